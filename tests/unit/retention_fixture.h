/*
 * retention_fixture.h - one partition in a temporary directory for the
 * retention suites, with an on_delete hook that can hold deleted segments
 * (the test unlinks them), a captured log, and helpers that append records
 * k-<offset> at chosen timestamps, run retention and check what it did.
 * Used by test_retention.c and test_delete_records.c.
 *
 * Include after cmocka.h.
 */
#ifndef RETENTION_FIXTURE_H
#define RETENTION_FIXTURE_H

#include "eng_batch.h"
#include "eng_config.h"
#include "eng_endian.h"
#include "eng_error.h"
#include "eng_fs.h"
#include "eng_logger.h"
#include "eng_partition.h"
#include "eng_retention.h"
#include "support.h"

#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define OLD_TS 1000LL
#define MAX_RECS 10
#define MAX_HELD 64

typedef struct fixture {
    char *dir;
    char pdir[512];
    eng_config cfg;
    bool hold;                 /* on_delete keeps segments (the test unlinks) */
    pthread_mutex_t mu;
    eng_segment *held[MAX_HELD];
    int64_t held_delay[MAX_HELD];
    int64_t lso_seen[MAX_HELD];   /* log start offset when on_delete ran */
    bool renamed_seen[MAX_HELD];  /* <base>.log.deleted there, <base>.log gone */
    size_t ndeleted;
    _Atomic int rolls;
    char log[65536];
} fixture;

static inline void sink(eng_log_level level, const char *line, void *ctx)
{
    (void)level;
    fixture *f = ctx;
    pthread_mutex_lock(&f->mu);
    size_t n = strlen(f->log);
    snprintf(f->log + n, sizeof f->log - n, "%s\n", line);
    pthread_mutex_unlock(&f->mu);
}

static inline int count_lines(fixture *f, const char *needle)
{
    int n = 0;
    pthread_mutex_lock(&f->mu);
    for (const char *p = f->log; (p = strstr(p, needle)); p += strlen(needle))
        n++;
    pthread_mutex_unlock(&f->mu);
    return n;
}

static inline bool seg_file(const char *dir, int64_t base, const char *ext)
{
    char path[700];
    snprintf(path, sizeof path, "%s/%020lld%s", dir, (long long)base, ext);
    return access(path, F_OK) == 0;
}

/* How many of the segment's three files exist with `suffix` ("" or ".deleted"). */
static inline int seg_files(const char *dir, int64_t base, const char *suffix)
{
    static const char *const ext[] = {".log", ".index", ".timeindex"};
    int n = 0;
    for (int i = 0; i < 3; i++) {
        char e[32];
        snprintf(e, sizeof e, "%s%s", ext[i], suffix);
        n += seg_file(dir, base, e);
    }
    return n;
}

static inline void on_delete(eng_partition *p, eng_segment *seg, int64_t delay_ms, void *ctx)
{
    fixture *f = ctx;
    pthread_mutex_lock(&f->mu);
    size_t i = f->ndeleted < MAX_HELD ? f->ndeleted : MAX_HELD - 1;
    int64_t base = eng_segment_base(seg);
    f->held_delay[i] = delay_ms;
    f->lso_seen[i] = eng_partition_log_start_offset(p);
    f->renamed_seen[i] =
        seg_file(f->pdir, base, ".log.deleted") && !seg_file(f->pdir, base, ".log");
    f->ndeleted++;
    if (f->hold && i < MAX_HELD - 1) {
        f->held[i] = seg;
        seg = NULL;
    }
    pthread_mutex_unlock(&f->mu);
    if (seg) {
        eng_segment_unlink(seg);
        eng_segment_unref(seg);
    }
}

static inline void on_roll(eng_partition *p, eng_segment *sealed, int64_t new_base, void *ctx)
{
    (void)p, (void)sealed, (void)new_base;
    atomic_fetch_add(&((fixture *)ctx)->rolls, 1);
}

static inline int setup(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    if (!f || !(f->dir = ts_tmpdir()))
        return -1;
    snprintf(f->pdir, sizeof f->pdir, "%s/orders-0", f->dir);
    eng_config_defaults d;
    eng_config_defaults_init(&d);
    f->cfg = d.cfg;
    f->cfg.v[ENG_CFG_RETENTION_MS].i = -1; /* each test enables the rule it tests */
    f->cfg.v[ENG_CFG_RETENTION_BYTES].i = -1;
    pthread_mutex_init(&f->mu, NULL);
    eng_logger_set_sink(sink, f, ENG_LOG_INFO);
    *state = f;
    return 0;
}

static inline int teardown(void **state)
{
    fixture *f = *state;
    eng_logger_set_sink(NULL, NULL, ENG_LOG_INFO);
    for (size_t i = 0; i < f->ndeleted && i < MAX_HELD; i++)
        if (f->held[i])
            eng_segment_unref(f->held[i]);
    pthread_mutex_destroy(&f->mu);
    ts_rmtree(f->dir);
    free(f->dir);
    free(f);
    return 0;
}

static inline eng_partition *open_part(fixture *f)
{
    eng_partition_params pp = {.topic = "orders", .id = 0, .dir = f->pdir, .config = f->cfg,
                               .clean_shutdown = true, .recovery_point = 0, .log_start_offset = -1,
                               .events = {.on_delete = on_delete, .on_roll = on_roll, .ctx = f}};
    eng_partition *p = NULL;
    int rc = eng_partition_open(&pp, &p, NULL);
    if (rc)
        fail_msg("eng_partition_open: %s", eng_strerror(rc));
    return p;
}

static inline void close_part(eng_partition *p)
{
    eng_partition_close(p);
    eng_partition_unref(p);
}

/* ---- records: key k-<offset>, value tied to the offset ------------------- */

/* Appends n records at ts (keys from the log end offset); returns the batch
 * size.  async: flush.messages' durability is left pending (see res). */
static inline size_t append_rec(eng_partition *p, int n, int64_t ts, int vlen, bool async,
                                eng_append_result *res)
{
    uint8_t buf[MAX_RECS * 600];
    size_t len = ts_build_batch(buf, sizeof buf, eng_partition_log_end_offset(p), n, ts, vlen);
    eng_append_opts o = {.expected_offset = -1, .producer_batches = true, .async_durable = async};
    eng_append_result local;
    eng_errdetail err = {0};
    int rc = eng_partition_append(p, buf, len, &o, res ? res : &local, &err);
    if (rc)
        fail_msg("append: %s (%s)", eng_strerror(rc), err.message);
    return len;
}

static inline size_t append(eng_partition *p, int n, int64_t ts)
{
    return append_rec(p, n, ts, 50, false, NULL);
}

static inline int64_t roll(eng_partition *p)
{
    int64_t base;
    assert_int_equal(eng_partition_roll(p, &base), 0);
    return base;
}

/* One retention pass at the current time; asserts how many segments go. */
static inline eng_retention_report run(eng_partition *p, bool dry, size_t want)
{
    eng_retention_report rep;
    assert_int_equal(eng_partition_retention(p, eng_now_ms(), dry, &rep), 0);
    if (rep.n != want)
        fail_msg("retention (dry run %d): %zu segments, expected %zu", dry, rep.n, want);
    return rep;
}

/* Asserts one row of a retention report. */
static inline void expect_del(const eng_deleted_segment *d, int64_t base, const char *rule)
{
    assert_int_equal(d->base_offset, base);
    assert_string_equal(d->rule, rule);
}

/* Asserts the segment count and the first base offset. */
static inline void expect_segs(eng_partition *p, size_t want, int64_t first_base)
{
    eng_segment_info *si;
    size_t n;
    assert_int_equal(eng_partition_segments(p, &si, &n), 0);
    int64_t first = si[0].base_offset;
    free(si);
    assert_int_equal(n, want);
    assert_int_equal(first, first_base);
}

/* k segments of 10 records at ts, each rolled. */
static inline void segments(eng_partition *p, int k, int64_t ts)
{
    for (int i = 0; i < k; i++) {
        append(p, 10, ts);
        roll(p);
    }
}

static inline void set_cfg(eng_partition *p, eng_config_id id, int64_t v)
{
    eng_config c;
    eng_partition_get_config(p, &c);
    c.v[id].i = v;
    eng_partition_set_config(p, &c);
}

static inline int visible(const struct dirent *e)
{
    return e->d_name[0] != '.';
}

/* "name size\n" for every file of the partition dir, sorted. */
static inline char *listing(const char *dir)
{
    struct dirent **v;
    int n = scandir(dir, &v, visible, alphasort);
    assert_true(n >= 0);
    char *out = calloc(1, (size_t)n * 300 + 1);
    assert_non_null(out);
    for (int i = 0; i < n; i++) {
        char path[800]; /* pdir (< 512) + '/' + a name (<= 255) */
        snprintf(path, sizeof path, "%s/%s", dir, v[i]->d_name);
        sprintf(out + strlen(out), "%s %lld\n", v[i]->d_name, ts_file_size(path));
        free(v[i]);
    }
    free(v);
    return out;
}

/* Reads from off and checks the records up to want_next (0: expects none). */
static inline void read_from(eng_partition *p, int64_t off, int64_t want_next)
{
    eng_fetch ft;
    assert_int_equal(eng_partition_read(p, off, 4096, &ft, NULL), 0);
    if (want_next)
        assert_int_equal(ts_walk_intact(&ft, off, 50), want_next);
    else
        assert_int_equal(ft.len, 0);
    eng_fetch_free(&ft);
}

/* A read at off fails out of range with bounds [lo, hi). */
static inline void read_out_of_range(eng_partition *p, int64_t off, int64_t lo, int64_t hi)
{
    eng_fetch ft;
    eng_errdetail err = {0};
    assert_int_equal(eng_partition_read(p, off, 4096, &ft, &err), ENG_EOFFSET);
    assert_true(err.has_bounds && err.lo == lo && err.hi == hi);
}

/* delete-records with its expected result; returns the log start offset. */
static inline int64_t del(eng_partition *p, int64_t before, int want, eng_errdetail *err)
{
    int64_t lso = -7;
    assert_int_equal(eng_partition_delete_records(p, before, &lso, err), want);
    if (!want)
        assert_int_equal(lso, eng_partition_log_start_offset(p));
    return eng_partition_log_start_offset(p);
}

#endif
