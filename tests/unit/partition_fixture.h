/*
 * partition_fixture.h - one partition in a temporary directory, and the
 * helpers its suites share: batches of records k-<offset> whose values are
 * tied to their keys, appends that must succeed, and reads that check every
 * record they return.  Used by test_partition.c and test_partition_reopen.c.
 *
 * Include after cmocka.h.
 */
#ifndef PARTITION_FIXTURE_H
#define PARTITION_FIXTURE_H

#include "eng_batch.h"
#include "eng_config.h"
#include "eng_error.h"
#include "eng_partition.h"
#include "support.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define T0 1700000000000LL
#define MAX_RECS TS_BATCH_MAX_RECS

typedef struct fixture {
    char *dir;
    char pdir[512];
    eng_config cfg;
    _Atomic int hw_events;
    _Atomic bool check_durable; /* flush.messages=1: the HW never passes the disk */
    _Atomic int not_durable;
} fixture;

static inline void on_hw(eng_partition *p, int64_t hw, void *ctx)
{
    fixture *f = ctx;
    atomic_fetch_add(&f->hw_events, 1);
    if (atomic_load(&f->check_durable) && eng_partition_recovery_point(p) < hw)
        atomic_fetch_add(&f->not_durable, 1);
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
    *state = f;
    return 0;
}

static inline int teardown(void **state)
{
    fixture *f = *state;
    ts_rmtree(f->dir);
    free(f->dir);
    free(f);
    return 0;
}

static inline eng_partition *open_part(fixture *f, bool clean, int64_t rp, eng_load_stats *st)
{
    eng_partition_params pp = {.topic = "orders", .id = 0, .dir = f->pdir, .config = f->cfg,
                               .clean_shutdown = clean, .recovery_point = rp,
                               .log_start_offset = -1,
                               .events = {.on_hw = on_hw, .ctx = f}};
    eng_partition *p = NULL;
    int rc = eng_partition_open(&pp, &p, st);
    if (rc)
        fail_msg("eng_partition_open: %s", eng_strerror(rc));
    return p;
}

/* Opens the partition after a clean stop with its dir's offline flag in
 * *offline, so a test sees whether a failure took the dir offline. */
static inline eng_partition *open_watched(fixture *f, _Atomic int *offline)
{
    eng_partition_params pp = {.topic = "orders", .id = 0, .dir = f->pdir, .config = f->cfg,
                               .clean_shutdown = true, .log_start_offset = -1,
                               .dir_offline = offline};
    eng_partition *p = NULL;
    int rc = eng_partition_open(&pp, &p, NULL);
    if (rc)
        fail_msg("eng_partition_open: %s", eng_strerror(rc));
    return p;
}

/* A record spec from C strings (NULL = null key or value). */
static inline eng_record_spec rec(int64_t ts, const char *k, const char *v)
{
    return (eng_record_spec){.timestamp = ts, .key = (const uint8_t *)k,
                             .key_len = k ? (int32_t)strlen(k) : -1, .value = (const uint8_t *)v,
                             .value_len = v ? (int32_t)strlen(v) : -1};
}

static inline size_t encode(uint8_t *buf, size_t cap, const eng_record_spec *recs, size_t n)
{
    eng_batch_params bp;
    eng_batch_params_init(&bp);
    return eng_batch_encode(buf, cap, &bp, recs, n);
}

static inline int do_append(eng_partition *p, uint8_t *buf, size_t len, int64_t expected,
                            bool producer, eng_append_result *res, eng_errdetail *err)
{
    eng_append_opts o = {.expected_offset = expected, .producer_batches = producer};
    eng_append_result local;
    return eng_partition_append(p, buf, len, &o, res ? res : &local, err);
}

/* Appends n records k-<first>.. in one batch at ts; asserts success. */
static inline void append_ok(eng_partition *p, int64_t first, int n, int64_t ts, int vlen)
{
    uint8_t buf[MAX_RECS * 2100];
    size_t len = ts_build_batch(buf, sizeof buf, first, n, ts, vlen);
    eng_errdetail err = {0};
    int rc = do_append(p, buf, len, -1, true, NULL, &err);
    if (rc)
        fail_msg("append: %s (%s)", eng_strerror(rc), err.message);
}

/* Reads [from, to) fetch by fetch, checking every record; returns the
 * offset reached or -1. */
static inline int64_t read_range(eng_partition *p, int64_t from, int64_t to, size_t max_bytes,
                                 ts_rec_check check, void *ctx)
{
    int64_t off = from;
    while (off < to) {
        eng_fetch ft;
        if (eng_partition_read(p, off, max_bytes, &ft, NULL) || ft.len == 0)
            return -1;
        int64_t next = ts_walk_fetch(&ft, off, check, ctx), want = ft.next_offset;
        eng_fetch_free(&ft);
        if (next < 0 || next != want)
            return -1;
        off = next;
    }
    return off;
}

/* Reads [from, HW) and checks every record; returns the records seen or -1. */
static inline int64_t read_and_check(eng_partition *p, int64_t from, int vlen)
{
    int64_t end = read_range(p, from, eng_partition_high_watermark(p), 64 * 1024, ts_check_intact,
                             &vlen);
    return end < 0 ? -1 : end - from;
}

static inline long long file_size(const char *dir, int64_t base, const char *ext)
{
    char path[600];
    snprintf(path, sizeof path, "%s/%020lld%s", dir, (long long)base, ext);
    return ts_file_size(path);
}

#endif
