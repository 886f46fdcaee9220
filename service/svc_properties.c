/*
 * svc_properties.c - java.util.Properties.load for --config files.
 *
 * Two stages, as in Java: a line reader (Properties.LineReader) joins
 * natural lines into logical ones, dropping comments, blank lines and
 * continuation backslashes; then each logical line is split into key and
 * value (Properties.load0) and both are unescaped (loadConvert).  The input
 * is read in fixed chunks and only the current logical line is held, so a
 * line may be any length and the file any size.  The rules are listed in
 * svc_properties.h.
 */
#include "svc_properties.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

typedef struct reader {
    FILE *f;
    const char *name;
    char *err;
    size_t errlen;
    unsigned char chunk[16384];
    size_t at, have;
    int pushed; /* a byte read ahead (after \r), or -1 */
} reader;

static void say(reader *r, int lineno, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static void say(reader *r, int lineno, const char *fmt, ...)
{
    char what[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    if (lineno > 0)
        snprintf(r->err, r->errlen, "%s:%d: %s", r->name, lineno, what);
    else
        snprintf(r->err, r->errlen, "%s: %s", r->name, what);
}

#define R_EOF (-1)
#define R_ERR (-2)

/* The next byte, R_EOF, or R_ERR with the message set: a short read is
 * only the end of the file if ferror says so. */
static int next_byte(reader *r)
{
    if (r->pushed >= 0) {
        int c = r->pushed;
        r->pushed = -1;
        return c;
    }
    if (r->at == r->have) {
        r->have = fread(r->chunk, 1, sizeof r->chunk, r->f);
        r->at = 0;
        if (r->have == 0) {
            if (ferror(r->f)) {
                say(r, 0, "cannot read: %s", strerror(errno ? errno : EIO));
                return R_ERR;
            }
            return R_EOF;
        }
    }
    return r->chunk[r->at++];
}

typedef struct buf {
    char *p;
    size_t len, cap;
} buf;

static int buf_put(buf *b, char c)
{
    if (b->len == b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 256;
        char *n = realloc(b->p, cap);
        if (!n)
            return -1;
        b->p = n;
        b->cap = cap;
    }
    b->p[b->len++] = c;
    return 0;
}

static int buf_utf8(buf *b, uint32_t cp)
{
    if (cp < 0x80)
        return buf_put(b, (char)cp);
    if (cp < 0x800)
        return buf_put(b, (char)(0xc0 | cp >> 6)) || buf_put(b, (char)(0x80 | (cp & 0x3f)));
    if (cp < 0x10000)
        return buf_put(b, (char)(0xe0 | cp >> 12)) || buf_put(b, (char)(0x80 | (cp >> 6 & 0x3f))) ||
               buf_put(b, (char)(0x80 | (cp & 0x3f)));
    return buf_put(b, (char)(0xf0 | cp >> 18)) || buf_put(b, (char)(0x80 | (cp >> 12 & 0x3f))) ||
           buf_put(b, (char)(0x80 | (cp >> 6 & 0x3f))) || buf_put(b, (char)(0x80 | (cp & 0x3f)));
}

static bool is_ws(char c)
{
    return c == ' ' || c == '\t' || c == '\f';
}

/* The four hex digits at s as a UTF-16 code unit, or -1. */
static long hex4(const char *s)
{
    long v = 0;
    for (int i = 0; i < 4; i++) {
        char c = s[i];
        int d = c >= '0' && c <= '9' ? c - '0'
                : c >= 'a' && c <= 'f' ? c - 'a' + 10
                : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                       : -1;
        if (d < 0)
            return -1;
        v = v * 16 + d;
    }
    return v;
}

/* loadConvert: unescapes in[0..n) into out as a NUL-terminated string. */
static int unescape(reader *r, int lineno, const char *what, const char *in, size_t n, buf *out)
{
    out->len = 0;
    for (size_t i = 0; i < n;) {
        char c = in[i++];
        if (c == '\\' && i < n) {
            c = in[i++];
            if (c == 'u') {
                long u = i + 4 <= n ? hex4(in + i) : -1;
                if (u < 0) {
                    say(r, lineno, "malformed \\uxxxx encoding in the %s", what);
                    return -1;
                }
                i += 4;
                uint32_t cp = (uint32_t)u;
                if (cp >= 0xd800 && cp < 0xdc00) {
                    /* A high surrogate: Java's string joins it with a
                     * following low one into one character. */
                    long lo = i + 6 <= n && in[i] == '\\' && in[i + 1] == 'u' ? hex4(in + i + 2) : -1;
                    if (lo >= 0xdc00 && lo < 0xe000) {
                        cp = 0x10000 + ((cp - 0xd800) << 10) + ((uint32_t)lo - 0xdc00);
                        i += 6;
                    } else {
                        cp = '?'; /* what Java writes for a lone surrogate */
                    }
                } else if (cp >= 0xdc00 && cp < 0xe000) {
                    cp = '?';
                }
                if (cp == 0) {
                    say(r, lineno, "the %s holds a NUL character (\\u0000)", what);
                    return -1;
                }
                if (buf_utf8(out, cp))
                    goto nomem;
                continue;
            }
            c = c == 't' ? '\t' : c == 'n' ? '\n' : c == 'r' ? '\r' : c == 'f' ? '\f' : c;
        } else if (c == '\\') {
            continue; /* a lone backslash at the very end: nothing to escape */
        }
        if (c == 0) {
            say(r, lineno, "the %s holds a NUL byte", what);
            return -1;
        }
        if (buf_put(out, c))
            goto nomem;
    }
    if (buf_put(out, 0))
        goto nomem;
    return 0;
nomem:
    say(r, lineno, "out of memory");
    return -1;
}

/* load0: splits one logical line into key and value and hands them on. */
static int emit(reader *r, const buf *line, int lineno, svc_properties_fn *fn, void *ctx, buf *key,
                buf *value)
{
    const char *l = line->p;
    size_t n = line->len, klen = 0, vstart = n;
    bool has_sep = false, bs = false;
    for (; klen < n; klen++) {
        char c = l[klen];
        if ((c == '=' || c == ':') && !bs) {
            vstart = klen + 1;
            has_sep = true;
            break;
        }
        if (is_ws(c) && !bs) {
            vstart = klen + 1;
            break;
        }
        bs = c == '\\' ? !bs : false;
    }
    for (; vstart < n; vstart++) {
        char c = l[vstart];
        if (!is_ws(c)) {
            if (!has_sep && (c == '=' || c == ':'))
                has_sep = true;
            else
                break;
        }
    }
    if (unescape(r, lineno, "key", l, klen, key) ||
        unescape(r, lineno, "value", l + vstart, n - vstart, value))
        return -1;
    return fn(ctx, key->p, value->p, lineno);
}

int svc_properties_parse(FILE *f, const char *name, svc_properties_fn *fn, void *ctx, char *err,
                         size_t errlen)
{
    reader *r = calloc(1, sizeof *r);
    if (!r) {
        snprintf(err, errlen, "%s: out of memory", name);
        return -1;
    }
    *r = (reader){.f = f, .name = name, .err = err, .errlen = errlen, .pushed = -1};
    buf line = {0}, key = {0}, value = {0};
    int rc = 0, lineno = 1, start = 1;
    /* LineReader's state: skipping leading whitespace (of a line, or of a
     * continuation), before the first byte of a logical line (for its line
     * number), inside a comment, and whether the bytes so far end in an odd
     * run of backslashes. */
    bool skip_ws = true, appended = false, at_start = true, comment = false, bs = false;
    for (;;) {
        int c = next_byte(r);
        if (c == R_ERR) {
            rc = -1;
            break;
        }
        if (c == R_EOF) {
            /* A pending line counts, a continuation's backslash dropped. */
            if (line.len && !comment)
                rc = emit(r, &(buf){line.p, line.len - bs, line.cap}, start, fn, ctx, &key, &value);
            break;
        }
        if (c == '\r' || c == '\n') {
            if (c == '\r') {
                int d = next_byte(r);
                if (d == R_ERR) {
                    rc = -1;
                    break;
                }
                if (d != '\n')
                    r->pushed = d; /* R_EOF included: read again, it is EOF again */
            }
            lineno++;
            if (skip_ws && !appended)
                continue; /* a blank line between logical lines */
            skip_ws = appended = false;
            if (comment || line.len == 0) {
                comment = false;
                at_start = skip_ws = true;
                line.len = 0;
                bs = false;
                continue;
            }
            if (bs) {
                line.len--;
                skip_ws = appended = true;
                bs = false;
                continue;
            }
            if ((rc = emit(r, &line, start, fn, ctx, &key, &value)) != 0)
                break;
            line.len = 0;
            at_start = skip_ws = true;
            continue;
        }
        if (skip_ws) {
            if (is_ws((char)c))
                continue;
            skip_ws = appended = false;
        }
        if (at_start) {
            at_start = false;
            start = lineno;
        }
        /* As in Java 9 and later, where Kafka runs: a line is a comment if
         * nothing precedes its '#' or '!' in the logical line, which also
         * holds after a continuation of a line that was only a backslash. */
        if (line.len == 0 && (c == '#' || c == '!'))
            comment = true;
        if (comment)
            continue;
        if (buf_put(&line, (char)c)) {
            say(r, start, "out of memory");
            rc = -1;
            break;
        }
        bs = c == '\\' ? !bs : false;
    }
    free(line.p);
    free(key.p);
    free(value.p);
    free(r);
    return rc;
}

int svc_properties_read(const char *path, svc_properties_fn *fn, void *ctx, char *err,
                        size_t errlen)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        snprintf(err, errlen, "cannot read config file %s: %s", path, strerror(errno));
        return -1;
    }
    struct stat st;
    if (fstat(fileno(f), &st)) {
        snprintf(err, errlen, "cannot read config file %s: %s", path, strerror(errno));
        fclose(f);
        return -1;
    }
    if (!S_ISREG(st.st_mode) && !S_ISFIFO(st.st_mode)) {
        snprintf(err, errlen, "config file %s is %s, not a regular file", path,
                 S_ISDIR(st.st_mode) ? "a directory" : "a device or socket");
        fclose(f);
        return -1;
    }
    int rc = svc_properties_parse(f, path, fn, ctx, err, errlen);
    fclose(f); /* opened for reading only: nothing to flush, nothing to lose */
    return rc;
}
