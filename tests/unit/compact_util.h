/*
 * compact_util.h - helpers shared by the compaction suites (test_compact.c,
 * test_compact_model.c): a compacted partition opened directly, appends of
 * key/value lists, reading the whole log back record by record (every batch
 * CRC-checked on the way), a "trash" that keeps the segments a clean hands
 * over (renamed .deleted) until the test empties it, and directory listings.
 *
 * Everything is static inline so each suite uses only what it needs.
 */
#ifndef COMPACT_UTIL_H
#define COMPACT_UTIL_H

#include "eng_batch.h"
#include "eng_compact.h"
#include "eng_compress.h"
#include "eng_config.h"
#include "eng_error.h"
#include "eng_partition.h"
#include "eng_offset_map.h"
#include "eng_segment.h"
#include "support.h"

#include <dirent.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define CU_T0 1700000000000LL

/* A record to append: k NULL = keyless, v NULL = tombstone; ts 0 = the
 * batch's default timestamp. */
typedef struct cu_kv {
    const char *k, *v;
    int64_t ts;
} cu_kv;

/* A record read back (malloc'd strings; NULL for null key/value). */
typedef struct cu_rec {
    int64_t off, ts;
    int64_t horizon; /* its batch's delete horizon, -1 if the batch has none */
    char *key, *val;
} cu_rec;

typedef struct cu_recs {
    cu_rec *v;
    size_t n, cap;
} cu_recs;

static inline void cu_recs_free(cu_recs *r)
{
    for (size_t i = 0; i < r->n; i++) {
        free(r->v[i].key);
        free(r->v[i].val);
    }
    free(r->v);
    memset(r, 0, sizeof *r);
}

/* Segments a clean (or retention) handed over, kept until cu_trash_empty. */
typedef struct cu_trash {
    pthread_mutex_t mu;
    eng_segment **segs;
    size_t n, cap;
    int not_deleted; /* handed over without the .deleted suffix */
} cu_trash;

static inline void cu_on_delete(eng_partition *p, eng_segment *seg, int64_t delay_ms, void *ctx)
{
    (void)p;
    (void)delay_ms;
    cu_trash *t = ctx;
    pthread_mutex_lock(&t->mu);
    if (strcmp(eng_segment_suffix(seg), ".deleted"))
        t->not_deleted++;
    if (t->n == t->cap) {
        t->cap = t->cap ? t->cap * 2 : 16;
        t->segs = realloc(t->segs, t->cap * sizeof *t->segs);
    }
    t->segs[t->n++] = seg;
    pthread_mutex_unlock(&t->mu);
}

/* Unlinks and releases every segment in the trash. */
static inline void cu_trash_empty(cu_trash *t)
{
    pthread_mutex_lock(&t->mu);
    for (size_t i = 0; i < t->n; i++) {
        eng_segment_unlink(t->segs[i]);
        eng_segment_unref(t->segs[i]);
    }
    t->n = 0;
    pthread_mutex_unlock(&t->mu);
}

static inline void cu_trash_free(cu_trash *t)
{
    cu_trash_empty(t);
    free(t->segs);
    t->segs = NULL;
    t->cap = 0;
}

/* Table defaults with cleanup.policy=compact. */
static inline eng_config cu_compact_config(void)
{
    eng_config_defaults d;
    eng_config_defaults_init(&d);
    d.cfg.v[ENG_CFG_CLEANUP_POLICY].i = ENG_POLICY_COMPACT;
    return d.cfg;
}

/* Opens (or reloads) topic "kv" partition 0 in dir; trash may be NULL (the
 * engine then unlinks replaced segments at once). */
static inline eng_partition *cu_open(const char *dir, const eng_config *cfg, cu_trash *trash,
                                     bool clean_shutdown, int64_t recovery_point,
                                     eng_load_stats *st)
{
    eng_partition_params pp = {.topic = "kv", .id = 0, .dir = dir, .config = *cfg,
                               .clean_shutdown = clean_shutdown,
                               .recovery_point = recovery_point, .log_start_offset = -1};
    if (trash)
        pp.events = (eng_partition_events){.on_delete = cu_on_delete, .ctx = trash};
    eng_partition *p = NULL;
    eng_load_stats local;
    int rc = eng_partition_open(&pp, &p, st ? st : &local);
    if (rc)
        fail_msg("eng_partition_open(%s): %s", dir, eng_strerror(rc));
    return p;
}

/* Encodes recs as one batch (base offset 0) into a malloc'd buffer. */
static inline uint8_t *cu_encode(const cu_kv *recs, size_t n, int64_t ts, const eng_batch_params *bp,
                                 size_t *len)
{
    eng_record_spec *specs = calloc(n, sizeof *specs);
    assert_non_null(specs);
    for (size_t i = 0; i < n; i++)
        specs[i] = (eng_record_spec){.timestamp = recs[i].ts ? recs[i].ts : ts,
                                     .key = (const uint8_t *)recs[i].k,
                                     .key_len = recs[i].k ? (int32_t)strlen(recs[i].k) : -1,
                                     .value = (const uint8_t *)recs[i].v,
                                     .value_len = recs[i].v ? (int32_t)strlen(recs[i].v) : -1};
    eng_batch_params local;
    if (!bp) {
        eng_batch_params_init(&local);
        bp = &local;
    }
    size_t cap = eng_batch_encoded_size(specs, n);
    uint8_t *buf = malloc(cap);
    assert_non_null(buf);
    *len = eng_batch_encode(buf, cap, bp, specs, n);
    assert_int_equal(*len, cap);
    free(specs);
    return buf;
}

/* Appends recs as one batch; returns its base offset. */
static inline int64_t cu_append(eng_partition *p, const cu_kv *recs, size_t n, int64_t ts)
{
    size_t len;
    uint8_t *buf = cu_encode(recs, n, ts, NULL, &len);
    eng_append_opts o = {.expected_offset = -1};
    eng_append_result res;
    eng_errdetail err = {0};
    int rc = eng_partition_append(p, buf, len, &o, &res, &err);
    free(buf);
    if (rc)
        fail_msg("append: %s (%s)", eng_strerror(rc), err.message);
    return res.base_offset;
}

static inline int64_t cu_roll(eng_partition *p)
{
    int64_t base;
    assert_int_equal(eng_partition_roll(p, &base), 0);
    return base;
}

static inline char *cu_dup(const uint8_t *p, int32_t len)
{
    if (len < 0)
        return NULL;
    char *s = malloc((size_t)len + 1);
    assert_non_null(s);
    memcpy(s, p, (size_t)len);
    s[len] = 0;
    return s;
}

/* Empty pages below the high watermark, which skip to the next offset the
 * read names.  eng_partition_read loads the high watermark before it takes
 * the segment view; when a clean swaps in between and everything in
 * [offset, that high watermark) was compacted away, the page is empty and
 * its next_offset is that high watermark (seen with
 * tests/unit/test_compact_model.c's concurrent readers). */
static _Atomic int cu_empty_reads;

/* Reads every record from the log start to the high watermark (as it moves),
 * validating each batch (CRC, framing, decompression) and that offsets
 * strictly increase.
 * Returns 0, or the engine error of a failed read (then *out is partial). */
static inline int cu_read_all(eng_partition *p, cu_recs *out)
{
    memset(out, 0, sizeof *out);
    int64_t off = eng_partition_log_start_offset(p), last = -1;
    eng_buf scratch = {0};
    for (;;) {
        eng_fetch f;
        eng_errdetail err = {0};
        int rc = eng_partition_read(p, off, 64 << 10, &f, &err);
        if (rc) {
            eng_buf_free(&scratch);
            return rc;
        }
        if (f.len == 0) {
            /* Done at the high watermark the read itself saw (a fresh load
             * could be past it: appends go on while we read). */
            int64_t hw = f.high_watermark, next = f.next_offset;
            eng_fetch_free(&f);
            if (off < hw && next > off) {
                atomic_fetch_add(&cu_empty_reads, 1);
                off = next;
                continue;
            }
            eng_buf_free(&scratch);
            return off >= hw ? 0 : ENG_ENOTFOUND; /* no progress below the high watermark */
        }
        for (size_t pos = 0; pos < f.len;) {
            eng_batch_header h;
            if (eng_batch_header_decode(f.data + pos, f.len - pos, &h) ||
                eng_batch_size(&h) > f.len - pos ||
                eng_batch_validate(f.data + pos, eng_batch_size(&h), &h)) {
                eng_fetch_free(&f);
                eng_buf_free(&scratch);
                return ENG_ECORRUPT;
            }
            const uint8_t *plain;
            size_t plen;
            if (eng_batch_plain_records(f.data + pos, &h, &scratch, &plain, &plen)) {
                eng_fetch_free(&f);
                eng_buf_free(&scratch);
                return ENG_ECORRUPT;
            }
            eng_record_iter it;
            eng_record r;
            int rc2;
            eng_record_iter_init(&it, &h, plain, plen);
            while ((rc2 = eng_record_iter_next(&it, &r)) == 1) {
                if (r.offset < off)
                    continue;
                if (r.offset <= last) {
                    eng_fetch_free(&f);
                    eng_buf_free(&scratch);
                    return ENG_ECORRUPT; /* offsets must strictly increase */
                }
                last = r.offset;
                if (out->n == out->cap) {
                    out->cap = out->cap ? out->cap * 2 : 64;
                    out->v = realloc(out->v, out->cap * sizeof *out->v);
                    assert_non_null(out->v);
                }
                out->v[out->n++] = (cu_rec){.off = r.offset, .ts = r.timestamp,
                                            .horizon = h.attributes & ENG_ATTR_DELETE_HORIZON
                                                           ? h.base_timestamp
                                                           : -1,
                                            .key = cu_dup(r.key, r.key_len),
                                            .val = cu_dup(r.value, r.value_len)};
            }
            if (rc2 < 0) {
                eng_fetch_free(&f);
                eng_buf_free(&scratch);
                return ENG_ECORRUPT;
            }
            pos += eng_batch_size(&h);
        }
        off = f.next_offset;
        eng_fetch_free(&f);
    }
}

/* cu_read_all that must succeed. */
static inline void cu_read_ok(eng_partition *p, cu_recs *out)
{
    int rc = cu_read_all(p, out);
    if (rc)
        fail_msg("reading the log: %s", eng_strerror(rc));
}

static inline int cu_streq(const char *a, const char *b)
{
    return (!a && !b) || (a && b && !strcmp(a, b));
}

/* One clean with a given map and time. */
static inline int cu_clean(eng_partition *p, eng_offset_map *map, int64_t ckpt, int64_t now,
                           bool dry_run, eng_clean_stats *st)
{
    eng_clean_opts o = {.map = map, .now_ms = now, .dry_run = dry_run};
    return eng_partition_clean(p, ckpt, &o, st);
}

static inline int cu_cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* "name size\n" for every file in dir, sorted; malloc'd. */
static inline char *cu_listing(const char *dir)
{
    char *names[512];
    size_t n = 0;
    DIR *d = opendir(dir);
    assert_non_null(d);
    for (struct dirent *e; (e = readdir(d)) && n < 512;) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        char path[1024], line[600];
        struct stat st;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        if (stat(path, &st))
            continue;
        snprintf(line, sizeof line, "%s %lld", e->d_name, (long long)st.st_size);
        names[n++] = strdup(line);
    }
    closedir(d);
    qsort(names, n, sizeof names[0], cu_cmp_str);
    size_t cap = 1;
    for (size_t i = 0; i < n; i++)
        cap += strlen(names[i]) + 1;
    char *out = calloc(1, cap);
    assert_non_null(out);
    for (size_t i = 0; i < n; i++) {
        strcat(out, names[i]);
        strcat(out, "\n");
        free(names[i]);
    }
    return out;
}

/* Number of files in dir whose name ends with suffix. */
static inline int cu_count_suffix(const char *dir, const char *suffix)
{
    int n = 0;
    DIR *d = opendir(dir);
    assert_non_null(d);
    for (struct dirent *e; (e = readdir(d));) {
        size_t l = strlen(e->d_name), s = strlen(suffix);
        if (l > s && !strcmp(e->d_name + l - s, suffix))
            n++;
    }
    closedir(d);
    return n;
}

/* One partition directory with a compacted config and a 1 MiB offset map,
 * for cmocka setup/teardown. */
typedef struct cu_fixture {
    char *tmp;
    char dir[512];
    eng_config cfg;
    cu_trash trash;
    eng_offset_map *map;
} cu_fixture;

static inline int cu_setup(void **state)
{
    cu_fixture *f = calloc(1, sizeof *f);
    if (!f || !(f->tmp = ts_tmpdir()))
        return -1;
    snprintf(f->dir, sizeof f->dir, "%s/kv-0", f->tmp);
    f->cfg = cu_compact_config();
    pthread_mutex_init(&f->trash.mu, NULL);
    if (eng_offset_map_new(1 << 20, 0.9, &f->map))
        return -1;
    *state = f;
    return 0;
}

static inline int cu_teardown(void **state)
{
    cu_fixture *f = *state;
    cu_trash_free(&f->trash);
    pthread_mutex_destroy(&f->trash.mu);
    eng_offset_map_free(f->map);
    ts_rmtree(f->tmp);
    free(f->tmp);
    free(f);
    return 0;
}

#endif
