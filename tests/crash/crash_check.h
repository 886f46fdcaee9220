/*
 * crash_check.h - an independent checker of a logstore partition directory,
 * shared by the crash suites (test_crash_loop.c, test_faults.c).
 *
 * It calls no engine function: it has its own CRC-32C table (kafka-format.md
 * §1.2), its own RecordBatch v2 and record parser (§2-3) and reads the files
 * itself, so an engine bug cannot hide behind the same bug in the check.
 *
 * cc_check_partition() parses every <20 digits>.log of a partition dir, in
 * base-offset order, and fails (with the first problem in out->err) unless:
 *   - every batch is whole (no partial batch: each file ends exactly at a
 *     batch boundary), magic 2, batchLength >= 49, CRC-32C valid, records
 *     framed exactly (count, offset deltas increasing, <= lastOffsetDelta);
 *   - offsets are strictly increasing across batches and segments, every
 *     batch lies within its segment (base <= offset, offset < next base,
 *     last - base <= 2^31-1);
 *   - .index and .timeindex exist; every offset-index entry points at a batch
 *     boundary whose batch's last offset (or, for a multi-batch append, a
 *     later batch's: the chunk's) equals the entry's offset, entries
 *     strictly increasing; time-index timestamps strictly increasing, offsets
 *     non-decreasing, each entry naming a batch (its last offset) whose
 *     maxTimestamp is the entry's timestamp; an inactive segment's indexes
 *     are trimmed (no zero padding) and its time index ends with the
 *     segment's largest timestamp (§13.2).  The last (active) segment of a
 *     running server has preallocated indexes: reading stops at the first
 *     all-zero entry there (kafka-dump-log's rule, §9);
 *   - no orphan index and no *.cleaned / *.swap file is present.
 * It returns every record (offset, timestamp, key, value) in offset order.
 *
 * cc_find_leftovers() walks a whole data dir for *.cleaned, *.swap, *.tmp
 * and *.deleted names.
 *
 * Everything is static inline so each suite compiles only what it uses.
 */
#ifndef CRASH_CHECK_H
#define CRASH_CHECK_H

#include <dirent.h>
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* ---- CRC-32C, Castagnoli, reflected 0x82F63B78 ------------------------------ */

static inline uint32_t cc_crc32c(const uint8_t *p, size_t n)
{
    static uint32_t table[256];
    static int ready;
    if (!ready) {
        for (uint32_t i = 0; i < 256; i++) {
            uint32_t c = i;
            for (int k = 0; k < 8; k++)
                c = c & 1 ? (c >> 1) ^ 0x82F63B78u : c >> 1;
            table[i] = c;
        }
        ready = 1;
    }
    uint32_t crc = 0xFFFFFFFFu;
    for (size_t i = 0; i < n; i++)
        crc = table[(crc ^ p[i]) & 0xFF] ^ (crc >> 8);
    return crc ^ 0xFFFFFFFFu;
}

/* ---- big-endian and varints -------------------------------------------------- */

static inline uint32_t cc_be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static inline uint64_t cc_be64(const uint8_t *p)
{
    return (uint64_t)cc_be32(p) << 32 | cc_be32(p + 4);
}

/* Zigzag varlong at *p (< end), at most max_bytes long; 0 or -1. */
static inline int cc_varint(const uint8_t **p, const uint8_t *end, int max_bytes, int64_t *out)
{
    uint64_t u = 0;
    for (int i = 0; i < max_bytes; i++) {
        if (*p >= end)
            return -1;
        uint8_t b = *(*p)++;
        u |= (uint64_t)(b & 0x7F) << (7 * i);
        if (!(b & 0x80)) {
            *out = (int64_t)(u >> 1) ^ -(int64_t)(u & 1);
            return 0;
        }
    }
    return -1;
}

/* ---- results ----------------------------------------------------------------- */

typedef struct cc_record {
    int64_t offset;
    int64_t timestamp;
    char *key;   /* NUL-terminated copy, NULL for a null key */
    int32_t key_len;
    char *value; /* NULL for a tombstone */
    int32_t value_len;
} cc_record;

typedef struct cc_part {
    cc_record *recs;
    size_t nrecs, cap;
    int nsegments;
    int64_t first_base;  /* base offset of the first segment, -1 if none */
    int64_t next_offset; /* after the last batch (the active base when empty) */
    uint64_t bytes;      /* sum of the .log sizes */
    size_t batches;
    char err[512];
} cc_part;

static inline void cc_part_free(cc_part *p)
{
    for (size_t i = 0; i < p->nrecs; i++) {
        free(p->recs[i].key);
        free(p->recs[i].value);
    }
    free(p->recs);
    memset(p, 0, sizeof *p);
}

__attribute__((format(printf, 2, 3))) static inline int cc_fail(cc_part *p, const char *fmt, ...)
{
    if (!p->err[0]) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(p->err, sizeof p->err, fmt, ap);
        va_end(ap);
    }
    return -1;
}

/* The record at offset, or NULL (binary search). */
static inline const cc_record *cc_find(const cc_part *p, int64_t offset)
{
    size_t lo = 0, hi = p->nrecs;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (p->recs[mid].offset == offset)
            return &p->recs[mid];
        if (p->recs[mid].offset < offset)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

/* ---- files ------------------------------------------------------------------- */

static inline uint8_t *cc_slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    struct stat st;
    uint8_t *buf = NULL;
    if (fstat(fileno(f), &st) == 0 && (buf = malloc((size_t)st.st_size + 1))) {
        *len = fread(buf, 1, (size_t)st.st_size, f);
        if (*len != (size_t)st.st_size) {
            free(buf);
            buf = NULL;
        }
    }
    fclose(f);
    return buf;
}

/* An index file; for the active segment (preallocated, zero-filled past
 * its entries) reading stops after the chunk holding the first all-zero
 * entry, so 10 MiB of zeros are not read every time. */
static inline uint8_t *cc_slurp_index(const char *path, size_t entry, bool active, size_t *len)
{
    if (!active)
        return cc_slurp(path, len);
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    size_t cap = 0, n = 0, got;
    uint8_t *buf = NULL;
    bool zero = false;
    do {
        if (n + 65536 > cap) {
            uint8_t *nb = realloc(buf, cap = (n + 65536) * 2);
            if (!nb) {
                free(buf);
                fclose(f);
                return NULL;
            }
            buf = nb;
        }
        got = fread(buf + n, 1, 65536 - (65536 % entry), f);
        for (size_t i = n; i + entry <= n + got && !zero; i += entry) {
            zero = true;
            for (size_t k = 0; k < entry && zero; k++)
                zero = buf[i + k] == 0;
        }
        n += got;
    } while (got > 0 && !zero);
    fclose(f);
    if (!buf)
        buf = malloc(1);
    *len = n - n % entry;
    return buf;
}

static inline int64_t cc_name_base(const char *name, const char **rest)
{
    int64_t v = 0;
    for (int i = 0; i < 20; i++) {
        if (name[i] < '0' || name[i] > '9')
            return -1;
        v = v * 10 + (name[i] - '0');
    }
    if (name[20] != '.')
        return -1;
    *rest = name + 20;
    return v;
}

static inline int cc_cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

/* ---- one segment ------------------------------------------------------------- */

typedef struct cc_batch {
    uint64_t pos;
    int64_t last;
    int64_t max_ts;
} cc_batch;

static inline int cc_push_record(cc_part *p, const cc_record *r)
{
    if (p->nrecs == p->cap) {
        size_t cap = p->cap ? p->cap * 2 : 1024;
        cc_record *n = realloc(p->recs, cap * sizeof *n);
        if (!n)
            return -1;
        p->recs = n;
        p->cap = cap;
    }
    p->recs[p->nrecs++] = *r;
    return 0;
}

static inline char *cc_dup(const uint8_t *s, int64_t n)
{
    char *c = malloc((size_t)n + 1);
    if (c) {
        memcpy(c, s, (size_t)n);
        c[n] = 0;
    }
    return c;
}

/* Parses the records of one uncompressed batch b[0, size). */
static inline int cc_records(cc_part *p, const char *seg, const uint8_t *b, size_t size,
                             int64_t base, int32_t last_delta, int32_t count, int64_t base_ts)
{
    const uint8_t *q = b + 61, *end = b + size;
    int64_t prev_delta = -1;
    for (int32_t i = 0; i < count; i++) {
        int64_t len, ts_delta, off_delta, klen, vlen, nh;
        if (cc_varint(&q, end, 5, &len) || len < 1 || len > end - q)
            return cc_fail(p, "%s: batch %lld record %d: bad length", seg, (long long)base, i);
        const uint8_t *rend = q + len;
        q++; /* attributes */
        if (cc_varint(&q, rend, 10, &ts_delta) || cc_varint(&q, rend, 5, &off_delta) ||
            off_delta <= prev_delta || off_delta > last_delta || cc_varint(&q, rend, 5, &klen) ||
            klen < -1 || klen > rend - q)
            return cc_fail(p, "%s: batch %lld record %d: bad header", seg, (long long)base, i);
        cc_record r = {.offset = base + off_delta, .timestamp = base_ts + ts_delta,
                       .key_len = (int32_t)klen};
        const uint8_t *key = q;
        q += klen > 0 ? klen : 0;
        if (cc_varint(&q, rend, 5, &vlen) || vlen < -1 || vlen > rend - q)
            return cc_fail(p, "%s: batch %lld record %d: bad value", seg, (long long)base, i);
        const uint8_t *val = q;
        q += vlen > 0 ? vlen : 0;
        if (cc_varint(&q, rend, 5, &nh) || nh < 0)
            return cc_fail(p, "%s: batch %lld record %d: bad header count", seg, (long long)base, i);
        for (int64_t h = 0; h < nh; h++) {
            int64_t hk, hv;
            if (cc_varint(&q, rend, 5, &hk) || hk < 0 || hk > rend - q)
                return cc_fail(p, "%s: batch %lld: bad record header", seg, (long long)base);
            q += hk;
            if (cc_varint(&q, rend, 5, &hv) || hv < -1 || hv > rend - q)
                return cc_fail(p, "%s: batch %lld: bad record header", seg, (long long)base);
            q += hv > 0 ? hv : 0;
        }
        if (q != rend)
            return cc_fail(p, "%s: batch %lld record %d: %td stray bytes", seg, (long long)base, i,
                           rend - q);
        prev_delta = off_delta;
        r.value_len = (int32_t)vlen;
        r.key = klen >= 0 ? cc_dup(key, klen) : NULL;
        r.value = vlen >= 0 ? cc_dup(val, vlen) : NULL;
        if (cc_push_record(p, &r))
            return cc_fail(p, "out of memory");
    }
    if (q != end)
        return cc_fail(p, "%s: batch %lld: %td bytes after the last record", seg, (long long)base,
                       end - q);
    return 0;
}

static inline const cc_batch *cc_batch_at(const cc_batch *v, size_t n, uint64_t pos)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (v[mid].pos == pos)
            return &v[mid];
        if (v[mid].pos < pos)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

/* True if an offset-index entry for offset `off` may point at batch bt: a
 * batch's entry is keyed by its last offset, and a multi-batch append (a
 * request of several batches, a cleaner's chunk) makes one entry at the
 * first batch keyed by the last offset of the chunk (kafka-format.md §13.1),
 * so off must be the last offset of bt or of a batch after it. */
static inline bool cc_chunk_ends_at(const cc_batch *v, size_t n, const cc_batch *bt, int64_t off)
{
    for (; bt < v + n && bt->last < off; bt++)
        ;
    return bt < v + n && bt->last == off;
}

/* Checks one segment's three files; *prev_last is the last offset so far. */
static inline int cc_segment(cc_part *p, const char *dir, int64_t base, int64_t next_base,
                             bool active, int64_t *prev_last)
{
    char path[1024], seg[64];
    snprintf(seg, sizeof seg, "%020lld", (long long)base);
    snprintf(path, sizeof path, "%s/%s.log", dir, seg);
    size_t len = 0;
    uint8_t *log = cc_slurp(path, &len);
    if (!log)
        return cc_fail(p, "%s.log: cannot read", seg);
    p->bytes += len;
    cc_batch *bv = NULL;
    size_t nb = 0;
    int64_t seg_max_ts = -1;
    int rc = 0;
    for (uint64_t pos = 0; pos < len && !rc;) {
        const uint8_t *b = log + pos;
        if (len - pos < 61) {
            rc = cc_fail(p, "%s.log: partial batch (%zu bytes) at %llu", seg, (size_t)(len - pos),
                         (unsigned long long)pos);
            break;
        }
        int64_t bbase = (int64_t)cc_be64(b);
        int32_t blen = (int32_t)cc_be32(b + 8);
        if (blen < 49 || (uint64_t)blen + 12 > len - pos) {
            rc = cc_fail(p, "%s.log: partial or invalid batch at %llu (batchLength %d, %zu left)",
                         seg, (unsigned long long)pos, blen, (size_t)(len - pos));
            break;
        }
        size_t size = (size_t)blen + 12;
        int16_t attrs = (int16_t)(b[21] << 8 | b[22]);
        int32_t last_delta = (int32_t)cc_be32(b + 23);
        int64_t base_ts = (int64_t)cc_be64(b + 27), max_ts = (int64_t)cc_be64(b + 35);
        int32_t count = (int32_t)cc_be32(b + 57);
        int64_t last = bbase + last_delta;
        if (b[16] != 2)
            rc = cc_fail(p, "%s.log: batch at %llu has magic %d", seg, (unsigned long long)pos, b[16]);
        else if (cc_crc32c(b + 21, size - 21) != cc_be32(b + 17))
            rc = cc_fail(p, "%s.log: batch %lld at %llu: CRC mismatch", seg, (long long)bbase,
                         (unsigned long long)pos);
        else if (attrs & 0x07)
            rc = cc_fail(p, "%s.log: batch %lld is compressed (unexpected)", seg, (long long)bbase);
        else if (last_delta < 0 || count < 0 || bbase < base || bbase <= *prev_last ||
                 last - base > INT32_MAX || (next_base >= 0 && last >= next_base))
            rc = cc_fail(p, "%s.log: batch [%lld, %lld] at %llu out of order (previous last %lld, "
                         "next segment %lld)", seg, (long long)bbase, (long long)last,
                         (unsigned long long)pos, (long long)*prev_last, (long long)next_base);
        else
            rc = cc_records(p, seg, b, size, bbase, last_delta, count, base_ts);
        if (rc)
            break;
        cc_batch *nbv = realloc(bv, (nb + 1) * sizeof *nbv);
        if (!nbv) {
            rc = cc_fail(p, "out of memory");
            break;
        }
        bv = nbv;
        bv[nb++] = (cc_batch){.pos = pos, .last = last, .max_ts = max_ts};
        if (max_ts > seg_max_ts)
            seg_max_ts = max_ts;
        *prev_last = last;
        p->next_offset = last + 1;
        p->batches++;
        pos += size;
    }
    free(log);

    /* Offset index. */
    size_t ilen = 0;
    snprintf(path, sizeof path, "%s/%s.index", dir, seg);
    uint8_t *idx = rc ? NULL : cc_slurp_index(path, 8, active, &ilen);
    if (!rc && !idx)
        rc = cc_fail(p, "%s.index: missing", seg);
    if (!rc && ilen % 8)
        rc = cc_fail(p, "%s.index: %zu bytes, not a multiple of 8", seg, ilen);
    int64_t prev = base - 1;
    for (size_t i = 0; !rc && i < ilen / 8; i++) {
        uint32_t rel = cc_be32(idx + 8 * i), pos = cc_be32(idx + 8 * i + 4);
        if (rel == 0 && pos == 0) {
            if (!active)
                rc = cc_fail(p, "%s.index: zero entry %zu in an inactive segment (not trimmed)",
                             seg, i);
            break; /* the active segment's preallocated tail */
        }
        const cc_batch *bt = cc_batch_at(bv, nb, pos);
        int64_t off = base + (int32_t)rel;
        if (off <= prev)
            rc = cc_fail(p, "%s.index: entry %zu offset %lld not increasing", seg, i, (long long)off);
        else if (!bt)
            rc = cc_fail(p, "%s.index: entry %zu position %u is not a batch boundary", seg, i, pos);
        else if (!cc_chunk_ends_at(bv, nb, bt, off))
            rc = cc_fail(p, "%s.index: entry %zu says %lld but the batch at %u ends at %lld", seg, i,
                         (long long)off, pos, (long long)bt->last);
        prev = off;
    }
    free(idx);

    /* Time index. */
    snprintf(path, sizeof path, "%s/%s.timeindex", dir, seg);
    uint8_t *ti = rc ? NULL : cc_slurp_index(path, 12, active, &ilen);
    if (!rc && !ti)
        rc = cc_fail(p, "%s.timeindex: missing", seg);
    if (!rc && ilen % 12)
        rc = cc_fail(p, "%s.timeindex: %zu bytes, not a multiple of 12", seg, ilen);
    int64_t prev_ts = -1, prev_off = base, last_ts = -1;
    for (size_t i = 0; !rc && i < ilen / 12; i++) {
        int64_t ts = (int64_t)cc_be64(ti + 12 * i);
        int64_t off = base + (int32_t)cc_be32(ti + 12 * i + 8);
        if (ts == 0 && off == base) {
            if (!active)
                rc = cc_fail(p, "%s.timeindex: zero entry %zu in an inactive segment", seg, i);
            break;
        }
        if (ts <= prev_ts || off < prev_off) {
            rc = cc_fail(p, "%s.timeindex: entry %zu (%lld, %lld) does not increase", seg, i,
                         (long long)ts, (long long)off);
            break;
        }
        bool found = false;
        for (size_t k = 0; k < nb && !found; k++)
            found = bv[k].last == off && bv[k].max_ts == ts;
        if (!found)
            rc = cc_fail(p, "%s.timeindex: entry %zu (%lld, %lld) names no batch's (maxTimestamp, "
                         "last offset)", seg, i, (long long)ts, (long long)off);
        prev_ts = last_ts = ts;
        prev_off = off;
    }
    if (!rc && !active && seg_max_ts >= 0 && last_ts != seg_max_ts)
        rc = cc_fail(p, "%s.timeindex: last entry %lld, but the segment's largest timestamp is %lld",
                     seg, (long long)last_ts, (long long)seg_max_ts);
    free(ti);
    free(bv);
    return rc;
}

/* Checks and parses one partition directory (see the header comment). */
static inline int cc_check_partition(const char *dir, cc_part *out)
{
    memset(out, 0, sizeof *out);
    out->first_base = -1;
    DIR *d = opendir(dir);
    if (!d)
        return cc_fail(out, "%s: cannot open: %s", dir, strerror(errno));
    int64_t bases[4096], idxs[8192];
    size_t nb = 0, ni = 0;
    struct dirent *e;
    int rc = 0;
    while ((e = readdir(d)) && !rc) {
        const char *rest;
        int64_t base = cc_name_base(e->d_name, &rest);
        if (base < 0)
            continue;
        if (strstr(rest, ".cleaned") || strstr(rest, ".swap"))
            rc = cc_fail(out, "%s: leftover %s", dir, e->d_name);
        else if (!strcmp(rest, ".log") && nb < 4096)
            bases[nb++] = base;
        else if ((!strcmp(rest, ".index") || !strcmp(rest, ".timeindex")) && ni < 8192)
            idxs[ni++] = base;
    }
    closedir(d);
    if (rc)
        return rc;
    if (nb == 0)
        return cc_fail(out, "%s: no segment", dir);
    qsort(bases, nb, sizeof *bases, cc_cmp_i64);
    for (size_t i = 0; i < ni; i++)
        if (!bsearch(&idxs[i], bases, nb, sizeof *bases, cc_cmp_i64))
            return cc_fail(out, "%s: orphan index of %020lld", dir, (long long)idxs[i]);
    out->nsegments = (int)nb;
    out->first_base = bases[0];
    int64_t prev_last = -1;
    for (size_t i = 0; i < nb && !rc; i++) {
        out->next_offset = bases[i];
        if (i > 0 && prev_last >= bases[i])
            return cc_fail(out, "%s: segment %020lld starts at or below the previous last offset "
                           "%lld", dir, (long long)bases[i], (long long)prev_last);
        rc = cc_segment(out, dir, bases[i], i + 1 < nb ? bases[i + 1] : -1, i + 1 == nb, &prev_last);
    }
    return rc;
}

/* Appends to err (size len) every transient file under dir (recursively):
 * *.cleaned, *.swap, *.tmp, .tmp-*, *.deleted.  Returns how many. */
static inline int cc_find_leftovers(const char *dir, char *err, size_t len)
{
    DIR *d = opendir(dir);
    if (!d)
        return 0;
    int n = 0;
    struct dirent *e;
    char path[1024];
    while ((e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        struct stat st;
        if (lstat(path, &st))
            continue;
        if (S_ISDIR(st.st_mode)) {
            n += cc_find_leftovers(path, err, len);
            continue;
        }
        size_t l = strlen(e->d_name);
        bool bad = (l > 8 && !strcmp(e->d_name + l - 8, ".cleaned")) ||
                   (l > 5 && !strcmp(e->d_name + l - 5, ".swap")) ||
                   (l > 4 && !strcmp(e->d_name + l - 4, ".tmp")) ||
                   !strncmp(e->d_name, ".tmp-", 5) ||
                   (l > 8 && !strcmp(e->d_name + l - 8, ".deleted"));
        if (bad) {
            size_t used = strlen(err);
            snprintf(err + used, len - used, "%s%s", used ? ", " : "", path);
            n++;
        }
    }
    closedir(d);
    return n;
}

#endif
