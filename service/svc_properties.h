/*
 * svc_properties.h - a reader for Java properties files, as
 * java.util.Properties.load reads them (and so as Kafka reads its
 * server.properties).
 *
 * The rules, which the unit tests check one by one:
 *   - lines end at \n, \r or \r\n and may be of any length;
 *   - leading space, tab and form feed of a line are skipped; a line then
 *     empty is skipped, and one starting with # or ! is a comment (a comment
 *     line never continues, whatever it ends with);
 *   - a line ending in an odd number of backslashes continues on the next:
 *     the backslash goes, and so does the next line's leading whitespace; an
 *     even number is that many halves of escaped backslashes; at end of file
 *     a pending line still counts (its trailing backslash dropped);
 *   - the key ends at the first unescaped '=', ':', space, tab or form feed;
 *     whitespace around it and one '=' or ':' after whitespace are skipped,
 *     and the rest of the line, trailing whitespace included, is the value;
 *   - in keys and values \t \n \r \f are those characters, \uXXXX is that
 *     UTF-16 code unit (a surrogate pair is joined), written as UTF-8, and a
 *     backslash before any other character stands for that character
 *     (\\ \= \: \# \! \space); a malformed \uXXXX is an error, as in Java.
 *
 * Comments are recognised as Java 9 and later do (Kafka's JDKs): a '#' or
 * '!' is one when nothing precedes it in the logical line.
 *
 * Three departures, where Java's behaviour would surprise a C server: bytes
 * are passed through as they are (Java reads ISO 8859-1, so a UTF-8 file's
 * non-ASCII text would arrive mangled); a key or value holding a NUL
 * character is an error rather than a string cut short; and a file whose
 * last line is a lone backslash ends there, where Java adds an entry with an
 * empty key and value.
 */
#ifndef SVC_PROPERTIES_H
#define SVC_PROPERTIES_H

#include <stddef.h>
#include <stdio.h>

/* Called for each key and value, in file order (a repeated key comes again:
 * the caller keeps the last, as Properties does).  Both are borrowed, valid
 * during the call.  lineno is the line the entry starts on (1-based).
 * Returns 0 to go on; anything else stops the parse and is returned. */
typedef int svc_properties_fn(void *ctx, const char *key, const char *value, int lineno);

/* Parses properties text from f, named name in messages.  Returns 0, -1 with
 * a message in err (a read error, a malformed \uXXXX, a NUL, no memory), or
 * what fn returned. */
int svc_properties_parse(FILE *f, const char *name, svc_properties_fn *fn, void *ctx, char *err,
                         size_t errlen);

/* Opens path and parses it.  Only a regular file or a pipe (--config
 * <(...)) is read: a directory, once opened, fails on the first read, which
 * used to end the file early and start with defaults; a device could never
 * end.  Returns as svc_properties_parse, with path in the message. */
int svc_properties_read(const char *path, svc_properties_fn *fn, void *ctx, char *err,
                        size_t errlen);

#endif
