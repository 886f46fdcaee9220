/*
 * test_timestamps.c - the timestamps a partition stamps and reports:
 *   - LogAppendTime never decreases with the offset, however concurrent
 *     appenders interleave, and each append answers the time it stored;
 *   - a partition's first_timestamp is that of its first record at or after
 *     the log start offset, a segment's that of its first record, as a
 *     reader sees them: the stamped time of a LogAppendTime batch, the
 *     record's own one where baseTimestamp holds the cleaner's delete
 *     horizon;
 *   - the time index takes the maximum timestamp so far: a batch older than
 *     an earlier one is appended and adds no entry that goes back.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "eng_batch.h"
#include "eng_config.h"
#include "eng_compact.h"
#include "eng_error.h"
#include "eng_fs.h" /* eng_now_ms */
#include "eng_offset_map.h"
#include "eng_partition.h"
#include "eng_retention.h" /* eng_partition_delete_records */
#include "partition_fixture.h"
#include "support.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* ---- LogAppendTime order ------------------------------------------------- */

enum { STAMPERS = 4, STAMPS = 150 };

typedef struct stamp {
    int64_t base, time;
} stamp;

typedef struct stamper {
    eng_partition *p;
    int id;
    _Atomic int *errors;
    stamp done[STAMPS];
} stamper;

/* Each thread appends batches of its own size: compressing them into the
 * topic's zstd takes each a different time between reading the clock and
 * taking the append lock, which is where appends overtake each other. */
static void *stamper_main(void *arg)
{
    stamper *s = arg;
    uint8_t *buf = malloc(MAX_RECS * (TS_VALUE_MAX + 64));
    if (!buf) {
        atomic_fetch_add(s->errors, 1);
        return NULL;
    }
    int n = 1 + s->id * (MAX_RECS - 1) / (STAMPERS - 1);
    for (int i = 0; i < STAMPS; i++) {
        size_t len = ts_build_batch(buf, MAX_RECS * (TS_VALUE_MAX + 64), 0, n, T0, TS_VALUE_MAX);
        eng_append_result res;
        if (!len || do_append(s->p, buf, len, -1, true, &res, NULL)) {
            atomic_fetch_add(s->errors, 1);
            break;
        }
        s->done[i] = (stamp){res.base_offset, res.log_append_time};
    }
    free(buf);
    return NULL;
}

typedef struct order_ctx {
    int64_t last;    /* the previous batch's stamp */
    int64_t batches;
    int backwards;   /* batches stamped below the one before them */
    stamper *st;
    int unmatched;   /* batches whose stamp is not what their append answered */
} order_ctx;

static void check_batch(order_ctx *c, const eng_batch_header *h)
{
    if (!(h->attributes & ENG_ATTR_LOG_APPEND_TIME) || h->max_timestamp < c->last)
        c->backwards++;
    c->last = h->max_timestamp;
    c->batches++;
    bool found = false;
    for (int t = 0; t < STAMPERS && !found; t++)
        for (int i = 0; i < STAMPS && !found; i++)
            if (c->st[t].done[i].base == h->base_offset) {
                found = true;
                if (c->st[t].done[i].time != h->max_timestamp)
                    c->unmatched++;
            }
    if (!found)
        c->unmatched++;
}

static void test_log_append_time_never_decreases(void **state)
{
    fixture *f = *state;
    f->cfg.v[ENG_CFG_MESSAGE_TIMESTAMP_TYPE].i = ENG_TS_LOG_APPEND_TIME;
    f->cfg.v[ENG_CFG_COMPRESSION_TYPE].i = ENG_COMPRESSION_ZSTD;
    eng_partition *p = open_part(f, true, 0, NULL);
    _Atomic int errors = 0;
    static stamper st[STAMPERS];
    pthread_t th[STAMPERS];
    for (int i = 0; i < STAMPERS; i++) {
        st[i] = (stamper){.p = p, .id = i, .errors = &errors};
        assert_int_equal(pthread_create(&th[i], NULL, stamper_main, &st[i]), 0);
    }
    for (int i = 0; i < STAMPERS; i++)
        pthread_join(th[i], NULL);
    assert_int_equal(atomic_load(&errors), 0);

    order_ctx c = {.last = -1, .st = st};
    int64_t off = 0, end = eng_partition_high_watermark(p);
    while (off < end) {
        eng_fetch ft;
        assert_int_equal(eng_partition_read(p, off, 1 << 20, &ft, NULL), 0);
        assert_true(ft.len > 0);
        for (size_t pos = 0; pos < ft.len;) {
            eng_batch_header h;
            assert_int_equal(eng_batch_header_decode(ft.data + pos, ft.len - pos, &h), 0);
            assert_int_equal(eng_batch_validate(ft.data + pos, eng_batch_size(&h), &h), 0);
            check_batch(&c, &h);
            pos += eng_batch_size(&h);
        }
        off = ft.next_offset;
        eng_fetch_free(&ft);
    }
    assert_int_equal(c.batches, STAMPERS * STAMPS);
    assert_int_equal(c.backwards, 0);
    assert_int_equal(c.unmatched, 0);
    eng_partition_unref(p);
}

/* ---- first_timestamp ------------------------------------------------------ */

/* Appends one producer batch of two records at t1 and t2. */
static eng_append_result append_two(eng_partition *p, int64_t t1, int64_t t2)
{
    eng_record_spec recs[2] = {rec(t1, "a", "x"), rec(t2, "b", "y")};
    uint8_t buf[256];
    size_t len = encode(buf, sizeof buf, recs, 2);
    eng_append_result res;
    eng_errdetail err = {0};
    if (do_append(p, buf, len, -1, true, &res, &err))
        fail_msg("append: %s", err.message);
    return res;
}

static int64_t partition_first_ts(eng_partition *p)
{
    eng_partition_info info;
    eng_partition_info_get(p, &info);
    return info.first_timestamp;
}

/* first_timestamp of segment k of the listing. */
static int64_t segment_first_ts(eng_partition *p, size_t k)
{
    eng_segment_info *si;
    size_t n;
    assert_int_equal(eng_partition_segments(p, &si, &n), 0);
    assert_true(k < n);
    int64_t ts = si[k].first_timestamp;
    free(si);
    return ts;
}

/* A LogAppendTime batch's baseTimestamp is the client's: every record
 * reads as the stamped time. */
static void test_first_timestamp_log_append_time(void **state)
{
    fixture *f = *state;
    f->cfg.v[ENG_CFG_MESSAGE_TIMESTAMP_TYPE].i = ENG_TS_LOG_APPEND_TIME;
    eng_partition *p = open_part(f, true, 0, NULL);
    eng_append_result res = append_two(p, 1000, 1100);
    assert_true(res.log_append_time > 1100);
    assert_int_equal(partition_first_ts(p), res.log_append_time);
    assert_int_equal(segment_first_ts(p, 0), res.log_append_time);
    eng_partition_unref(p);
}

/* Records below the log start offset are gone for readers, though their
 * segment may stay until retention runs. */
static void test_first_timestamp_from_log_start(void **state)
{
    fixture *f = *state;
    eng_partition *p = open_part(f, true, 0, NULL);
    assert_int_equal(partition_first_ts(p), -1);
    append_two(p, 1000, 1100); /* offsets 0-1, segment 0 */
    int64_t base;
    assert_int_equal(eng_partition_roll(p, &base), 0);
    append_two(p, 2000, 2100); /* 2-3, segment 2 */
    f->cfg.v[ENG_CFG_COMPRESSION_TYPE].i = ENG_COMPRESSION_GZIP;
    eng_partition_set_config(p, &f->cfg);
    append_two(p, 3500, 3000); /* 4-5, gzip */
    assert_int_equal(partition_first_ts(p), 1000);

    int64_t lso;
    assert_int_equal(eng_partition_delete_records(p, 2, &lso, NULL), 0);
    assert_int_equal(partition_first_ts(p), 2000);
    assert_int_equal(eng_partition_delete_records(p, 3, &lso, NULL), 0);
    assert_int_equal(partition_first_ts(p), 2100); /* the record at 3, mid-batch */
    assert_int_equal(eng_partition_delete_records(p, 5, &lso, NULL), 0);
    assert_int_equal(partition_first_ts(p), 3000); /* inside a compressed batch */
    /* Segments list what they hold, whatever the log start offset. */
    assert_int_equal(segment_first_ts(p, 0), 1000);
    assert_int_equal(segment_first_ts(p, 1), 2000);
    assert_int_equal(eng_partition_delete_records(p, 6, &lso, NULL), 0);
    assert_int_equal(partition_first_ts(p), -1); /* nothing left to read */
    eng_partition_unref(p);
}

/* A batch whose baseTimestamp is the cleaner's delete horizon (attribute
 * bit 6): its records' timestamps are still base + delta. */
static void test_first_timestamp_delete_horizon(void **state)
{
    fixture *f = *state;
    eng_partition *p = open_part(f, true, 0, NULL);
    const int64_t horizon = 90000;
    eng_record_spec recs[2] = {rec(1000, "a", NULL), rec(1100, "b", "y")};
    uint8_t buf[256];
    size_t body = eng_records_encode(buf + ENG_BATCH_OVERHEAD, sizeof buf - ENG_BATCH_OVERHEAD,
                                     horizon, recs, 2);
    assert_true(body > 0);
    eng_batch_header h = {.length = (int32_t)(ENG_BATCH_OVERHEAD - ENG_LOG_OVERHEAD + body),
                          .magic = ENG_BATCH_MAGIC, .attributes = ENG_ATTR_DELETE_HORIZON,
                          .last_offset_delta = 1, .base_timestamp = horizon,
                          .max_timestamp = 1100, .producer_id = -1, .producer_epoch = -1,
                          .base_sequence = -1, .record_count = 2};
    eng_batch_header_encode(buf, &h);
    eng_batch_update_crc(buf, eng_batch_size(&h));
    /* Not a producer's batch: only the cleaner writes this bit. */
    assert_int_equal(do_append(p, buf, eng_batch_size(&h), -1, false, NULL, NULL), 0);
    assert_int_equal(partition_first_ts(p), 1000);
    assert_int_equal(segment_first_ts(p, 0), 1000);
    eng_partition_unref(p);
}

/* A LogAppendTime batch the cleaner rewrote keeps its last offset (here past
 * the log start offset) and its stamped time, but holds only records below
 * the log start offset: the first record is the next batch's, and so is its
 * time.  Seen with tests/unit/test_partition_model.c. */
static void test_first_timestamp_log_append_time_compacted(void **state)
{
    fixture *f = *state;
    f->cfg.v[ENG_CFG_MESSAGE_TIMESTAMP_TYPE].i = ENG_TS_LOG_APPEND_TIME;
    f->cfg.v[ENG_CFG_CLEANUP_POLICY].i = ENG_POLICY_COMPACT;
    eng_partition *p = open_part(f, true, 0, NULL);
    eng_record_spec a[3] = {rec(1000, "a", "1"), rec(1000, "b", "1"), rec(1000, "c", "1")};
    eng_record_spec b[1] = {rec(1000, "c", "2")};
    uint8_t buf[256];
    eng_append_result ra, rb;
    assert_int_equal(do_append(p, buf, encode(buf, sizeof buf, a, 3), -1, true, &ra, NULL), 0);
    while (eng_now_ms() <= ra.log_append_time)
        ; /* the two batches' stamps must differ: at most a millisecond */
    assert_int_equal(do_append(p, buf, encode(buf, sizeof buf, b, 1), -1, true, &rb, NULL), 0);
    assert_true(rb.log_append_time > ra.log_append_time);
    int64_t base, lso;
    assert_int_equal(eng_partition_roll(p, &base), 0);
    eng_offset_map *map;
    assert_int_equal(eng_offset_map_new(1 << 16, 0.9, &map), 0);
    eng_clean_opts o = {.map = map, .now_ms = eng_now_ms()};
    eng_clean_stats st;
    assert_int_equal(eng_partition_clean(p, -1, &o, &st), 0);
    eng_offset_map_free(map);
    assert_int_equal(st.records_removed, 1); /* c at 2; batch 0-2 keeps a, b */
    assert_int_equal(eng_partition_delete_records(p, 2, &lso, NULL), 0);
    assert_int_equal(partition_first_ts(p), rb.log_append_time);
    assert_int_equal(eng_partition_delete_records(p, 4, &lso, NULL), 0);
    assert_int_equal(partition_first_ts(p), -1);
    eng_partition_unref(p);
}

#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)

/* ---- the time index under out-of-order timestamps ------------------------- */

/* Kafka's maybeAppend(maxTimestampSoFar, offsetOfMaxTimestampSoFar): a batch
 * older than one before it adds no entry (the index never goes back), and
 * the append succeeds.  index.interval.bytes=0 asks for an entry at every
 * batch after the first. */
static void test_time_index_takes_max_so_far(void **state)
{
    fixture *f = *state;
    f->cfg.v[ENG_CFG_INDEX_INTERVAL_BYTES].i = 0;
    eng_partition *p = open_part(f, true, 0, NULL);
    append_ok(p, 0, 10, T0 + 5000, 50);  /* [0,10): the largest timestamp */
    append_ok(p, 10, 10, T0 + 3000, 50); /* older: entry (T0+5000, 9) */
    append_ok(p, 20, 10, T0 + 4000, 50); /* still below the max: no entry */
    append_ok(p, 30, 10, T0 + 6000, 50); /* newer: entry (T0+6000, 39) */
    assert_int_equal(eng_partition_log_end_offset(p), 40);
    eng_segment_info *si;
    size_t n;
    assert_int_equal(eng_partition_segments(p, &si, &n), 0);
    assert_int_equal(n, 1);
    assert_int_equal(si[0].timeindex_entries, 2);
    assert_int_equal(si[0].max_timestamp, T0 + 6000);
    free(si);
    /* The first record at or after T: by record, not by batch order. */
    int64_t off, ts;
    assert_int_equal(eng_partition_offset_for_timestamp(p, T0 + 3500, &off, &ts), 0);
    assert_int_equal(off, 0);
    assert_int_equal(ts, T0 + 5000);
    assert_int_equal(eng_partition_offset_for_timestamp(p, T0 + 5500, &off, &ts), 0);
    assert_int_equal(off, 30);
    assert_int_equal(ts, T0 + 6000);
    assert_int_equal(eng_partition_offset_for_timestamp(p, T0 + 6001, &off, &ts), ENG_ENOTFOUND);
    eng_partition_unref(p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(test_log_append_time_never_decreases),
        T(test_first_timestamp_log_append_time),
        T(test_first_timestamp_from_log_start),
        T(test_first_timestamp_delete_horizon),
        T(test_first_timestamp_log_append_time_compacted),
        T(test_time_index_takes_max_so_far),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
