/*
 * eng_checkpoint.c - strict reader and durable writer of checkpoint files.
 */
#include "eng_checkpoint.h"

#include "eng_error.h"
#include "eng_fs.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CKPT_MAX_BYTES (64u << 20)

void eng_checkpoint_free(eng_ckpt *c)
{
    if (!c)
        return;
    for (size_t i = 0; i < c->n; i++)
        free(c->entries[i].topic);
    free(c->entries);
    c->entries = NULL;
    c->n = 0;
}

/* Parses a decimal integer token at *p (after optional spaces). */
static int take_int(const char **p, int64_t *out)
{
    const char *s = *p;
    while (*s == ' ' || *s == '\t')
        s++;
    if (!*s || *s == '\n' || *s == '\r')
        return -1;
    errno = 0;
    char *end;
    long long v = strtoll(s, &end, 10);
    if (errno || end == s || (*end && !strchr(" \t\r\n", *end)))
        return -1;
    *out = v;
    *p = end;
    return 0;
}

/* Kafka reads checkpoints with readLine(), so a CRLF file (edited on
 * Windows) and a last line without its newline parse there: here too.
 * Refused, the log start offset checkpoint fell back to the first segment
 * and records removed by records:delete came back. */
static int end_of_line(const char **p)
{
    const char *s = *p;
    while (*s == ' ' || *s == '\t' || *s == '\r')
        s++;
    if (*s != '\n' && *s)
        return -1;
    *p = *s ? s + 1 : s;
    return 0;
}

int eng_checkpoint_read(const char *path, eng_ckpt *out)
{
    char *buf;
    size_t len;
    int rc = eng_fs_read_file(path, CKPT_MAX_BYTES, &buf, &len);
    if (rc)
        return rc;
    eng_ckpt c = {0};
    int64_t version, count;
    const char *p = buf;
    rc = ENG_ECORRUPT;
    if (len == 0) {
        rc = 0; /* Kafka: an empty file has no entries */
        goto done;
    }
    if (strlen(buf) != len || take_int(&p, &version) || end_of_line(&p) || version != 0 ||
        take_int(&p, &count) || end_of_line(&p) || count < 0 || count > 10000000)
        goto done;
    /* The count is only a claim: an entry takes at least 6 bytes ("t 0 0"
     * and its newline, which the last may lack), so a count the rest of the
     * file cannot hold is refused before it sizes an allocation ("0\n9999999\n"
     * asked for 240 MB). */
    if (count > (int64_t)((len - (size_t)(p - buf) + 1) / 6))
        goto done;
    c.entries = calloc(count ? (size_t)count : 1, sizeof *c.entries);
    if (!c.entries) {
        rc = -ENOMEM;
        goto done;
    }
    for (int64_t i = 0; i < count; i++) {
        while (*p == ' ' || *p == '\t')
            p++;
        const char *t = p;
        while (*p && !isspace((unsigned char)*p))
            p++;
        if (p == t)
            goto done;
        int64_t part, off;
        char *topic = strndup(t, (size_t)(p - t));
        if (!topic) {
            rc = -ENOMEM;
            goto done;
        }
        c.entries[c.n++].topic = topic;
        if (take_int(&p, &part) || take_int(&p, &off) || end_of_line(&p) || part < 0 ||
            part > INT32_MAX)
            goto done;
        c.entries[c.n - 1].partition = (int32_t)part;
        c.entries[c.n - 1].offset = off;
    }
    while (*p == '\n' || *p == '\r' || *p == ' ' || *p == '\t')
        p++;
    if (*p)
        goto done; /* more lines than the count says */
    rc = 0;
done:
    free(buf);
    if (rc) {
        eng_checkpoint_free(&c);
        return rc;
    }
    *out = c;
    return 0;
}

int eng_checkpoint_write(const char *path, const eng_ckpt_entry *e, size_t n)
{
    size_t cap = 32;
    for (size_t i = 0; i < n; i++)
        cap += strlen(e[i].topic) + 48;
    char *buf = malloc(cap);
    if (!buf)
        return -ENOMEM;
    size_t len = (size_t)snprintf(buf, cap, "0\n%zu\n", n);
    for (size_t i = 0; i < n; i++)
        len += (size_t)snprintf(buf + len, cap - len, "%s %" PRId32 " %" PRId64 "\n", e[i].topic,
                                e[i].partition, e[i].offset);
    int rc = eng_fs_write_atomic(path, buf, len);
    free(buf);
    return rc;
}

int64_t eng_checkpoint_find(const eng_ckpt *c, const char *topic, int32_t partition, int64_t dflt)
{
    for (size_t i = 0; c && i < c->n; i++)
        if (c->entries[i].partition == partition && strcmp(c->entries[i].topic, topic) == 0)
            return c->entries[i].offset;
    return dflt;
}
