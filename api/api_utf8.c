/*
 * api_utf8.c - see api_utf8.h.
 */
#include "api_utf8.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

size_t api_utf8_seq(const uint8_t *s, size_t n)
{
    if (n == 0)
        return 0;
    size_t len = s[0] < 0x80 ? 1 : (s[0] & 0xE0) == 0xC0 ? 2 : (s[0] & 0xF0) == 0xE0 ? 3
                               : (s[0] & 0xF8) == 0xF0 ? 4 : 0;
    if (len == 0 || len > n)
        return 0;
    uint32_t cp = len == 1 ? s[0] : s[0] & (0x7Fu >> len);
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80)
            return 0;
        cp = cp << 6 | (s[i] & 0x3F);
    }
    static const uint32_t min_cp[] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < min_cp[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
        return 0;
    return len;
}

/* Length of the maximal subpart at s, which starts no valid sequence: a
 * lead byte followed by the continuation bytes that could still have
 * completed it (Unicode's "maximal subpart" practice, which Java's decoder
 * follows), at least 1.  One U+FFFD stands for it. */
static size_t bad_run(const uint8_t *s, size_t n)
{
    uint8_t c = s[0];
    size_t need = c >= 0xC2 && c <= 0xDF   ? 2
                  : c >= 0xE0 && c <= 0xEF ? 3
                  : c >= 0xF0 && c <= 0xF4 ? 4
                                           : 0;
    if (need == 0)
        return 1;
    uint8_t lo = 0x80, hi = 0xBF; /* what the second byte may be */
    if (c == 0xE0)
        lo = 0xA0;
    else if (c == 0xED)
        hi = 0x9F;
    else if (c == 0xF0)
        lo = 0x90;
    else if (c == 0xF4)
        hi = 0x8F;
    size_t k = 1;
    while (k < need && k < n && s[k] >= (k == 1 ? lo : 0x80) && s[k] <= (k == 1 ? hi : 0xBF))
        k++;
    return k;
}

char *api_utf8_repair(const uint8_t *s, size_t n, bool hex, size_t *out_len)
{
    /* Either replacement is at most 4 bytes for 1 byte in. */
    if (n > (SIZE_MAX - 1) / 4)
        return NULL;
    char *out = malloc(4 * n + 1);
    if (!out)
        return NULL;
    size_t o = 0;
    for (size_t i = 0; i < n;) {
        size_t k = api_utf8_seq(s + i, n - i);
        if (k) {
            memcpy(out + o, s + i, k);
            o += k;
            i += k;
            continue;
        }
        if (hex) {
            o += (size_t)snprintf(out + o, 5, "\\x%02X", s[i]);
            i++;
        } else {
            memcpy(out + o, "\xEF\xBF\xBD", 3);
            o += 3;
            i += bad_run(s + i, n - i);
        }
    }
    out[o] = 0;
    *out_len = o;
    return out;
}
