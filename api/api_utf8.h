/*
 * api_utf8.h - making bytes that should be UTF-8 (but may not be) fit a
 * JSON string, for the places that cannot refuse them: error messages that
 * quote what a client sent, and header names stored by Kafka producers.
 */
#ifndef API_UTF8_H
#define API_UTF8_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Length of the valid UTF-8 sequence at s (n bytes left), 0 if none starts
 * there (overlong forms, surrogates and code points past U+10FFFF are not
 * valid). */
size_t api_utf8_seq(const uint8_t *s, size_t n);

/* A copy of s[0..n) in which what is not UTF-8 is replaced: each such byte
 * by the text \xNN when hex, else each maximal ill-formed subpart by one
 * U+FFFD (what Kafka's Java client makes of a header key's bad bytes).  NUL-terminated, *out_len its
 * length; malloc'd, the caller frees it.  NULL when out of memory. */
char *api_utf8_repair(const uint8_t *s, size_t n, bool hex, size_t *out_len);

#endif
