/*
 * test_high_watermark.c - nothing at or past the high watermark reaches a
 * reader (DESIGN §3: "the high watermark: the end of acknowledged data").
 * With flush.messages=1 an append whose fsync is still pending is written
 * (log end offset past it) but not acknowledged, so every read path must stop
 * short of it:
 *   - eng_partition_read answers the batches below the high watermark and
 *     not the pending one in the same segment;
 *   - eng_partition_read_slice (raw reads) ends its byte range there too;
 *   - a lookup by timestamp that would land on the pending batch finds
 *     nothing, and so does max_timestamp (Kafka filters ListOffsets results
 *     at or past the last fetchable offset);
 *   - once the fsync ran, the same reads see everything (so the assertions
 *     above are not met by reads that see nothing at all);
 *   - flush.messages changed on the live partition applies to the next
 *     append: lowered to 1 the next append waits for an fsync that covers
 *     the earlier unflushed records too; raised again while that append
 *     still waits, the append after it is acknowledged at once and the
 *     waiting one is still answered by its fsync.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "partition_fixture.h"

#include <unistd.h>

#define VLEN 50

/* Appends records k-<first>.. at ts; async leaves the fsync pending. */
static void append_at(eng_partition *p, int64_t first, int n, int64_t ts, bool async,
                      eng_append_result *res)
{
    uint8_t buf[MAX_RECS * 200];
    size_t len = ts_build_batch(buf, sizeof buf, first, n, ts, VLEN);
    eng_append_opts o = {.expected_offset = -1, .producer_batches = true, .async_durable = async};
    eng_errdetail err = {0};
    int rc = eng_partition_append(p, buf, len, &o, res, &err);
    if (rc)
        fail_msg("append: %s (%s)", eng_strerror(rc), err.message);
}

/* [0,10) at T0 acknowledged, [10,20) at T0 + 100 written with its fsync
 * pending; returns the partition and the first batch's size. */
static eng_partition *one_pending(fixture *f, size_t *first_batch)
{
    f->cfg.v[ENG_CFG_FLUSH_MESSAGES].i = 1;
    eng_partition *p = open_part(f, true, 0, NULL);
    eng_append_result res;
    append_at(p, 0, 10, T0, false, &res);
    assert_false(res.durable_pending);
    *first_batch = res.batch_bytes;
    append_at(p, 10, 10, T0 + 100, true, &res);
    assert_true(res.durable_pending);
    assert_int_equal(eng_partition_log_end_offset(p), 20);
    assert_int_equal(eng_partition_high_watermark(p), 10);
    return p;
}

/* The pending batch's fsync runs: its records become visible. */
static void make_durable(eng_partition *p)
{
    assert_int_equal(eng_partition_flush_upto(p, 20), 0);
    assert_int_equal(eng_partition_high_watermark(p), 20);
}

static void test_read_stops_at_high_watermark(void **state)
{
    fixture *f = *state;
    size_t first;
    eng_partition *p = one_pending(f, &first);

    eng_fetch ft;
    assert_int_equal(eng_partition_read(p, 0, 1 << 20, &ft, NULL), 0);
    assert_int_equal(ft.high_watermark, 10);
    assert_int_equal(ft.len, first); /* the first batch only, though both fit */
    assert_int_equal(ft.next_offset, 10);
    assert_int_equal(ts_walk_intact(&ft, 0, VLEN), 10);
    eng_fetch_free(&ft);
    /* At the high watermark: no records, not an error. Past it: out of range. */
    assert_int_equal(eng_partition_read(p, 10, 1 << 20, &ft, NULL), 0);
    assert_int_equal(ft.len, 0);
    eng_fetch_free(&ft);
    eng_errdetail err = {0};
    assert_int_equal(eng_partition_read(p, 11, 1 << 20, &ft, &err), ENG_EOFFSET);
    assert_true(err.has_bounds && err.lo == 0 && err.hi == 10);

    make_durable(p);
    assert_int_equal(eng_partition_read(p, 0, 1 << 20, &ft, NULL), 0);
    assert_true(ft.len > first);
    assert_int_equal(ts_walk_intact(&ft, 0, VLEN), 20);
    eng_fetch_free(&ft);
    eng_partition_unref(p);
}

static void test_raw_slice_stops_at_high_watermark(void **state)
{
    fixture *f = *state;
    size_t first;
    eng_partition *p = one_pending(f, &first);

    eng_slice sl;
    assert_int_equal(eng_partition_read_slice(p, 0, 1 << 20, &sl, NULL), 0);
    assert_true(sl.fd >= 0);
    assert_int_equal(sl.position, 0);
    assert_int_equal(sl.length, first);
    assert_int_equal(sl.next_offset, 10);
    assert_int_equal(sl.high_watermark, 10);
    close(sl.fd);

    make_durable(p);
    assert_int_equal(eng_partition_read_slice(p, 0, 1 << 20, &sl, NULL), 0);
    assert_true(sl.length > first);
    assert_int_equal(sl.next_offset, 20);
    close(sl.fd);
    eng_partition_unref(p);
}

static void test_timestamp_lookups_stop_at_high_watermark(void **state)
{
    fixture *f = *state;
    size_t first;
    eng_partition *p = one_pending(f, &first);

    int64_t off = -7, ts = -7;
    assert_int_equal(eng_partition_offset_for_timestamp(p, T0, &off, &ts), 0);
    assert_int_equal(off, 0);
    assert_int_equal(ts, T0);
    /* Only the pending batch holds a timestamp >= T0 + 1. */
    assert_int_equal(eng_partition_offset_for_timestamp(p, T0 + 1, &off, &ts), ENG_ENOTFOUND);
    /* The largest timestamp is the pending batch's: not a visible record. */
    assert_int_equal(eng_partition_max_timestamp(p, &off, &ts), ENG_ENOTFOUND);

    make_durable(p);
    assert_int_equal(eng_partition_offset_for_timestamp(p, T0 + 1, &off, &ts), 0);
    assert_int_equal(off, 10);
    assert_int_equal(ts, T0 + 100);
    assert_int_equal(eng_partition_max_timestamp(p, &off, &ts), 0);
    assert_int_equal(off, 10);
    assert_int_equal(ts, T0 + 100);
    eng_partition_unref(p);
}

static void on_durable_count(void *ctx, int rc)
{
    int *calls = ctx;
    assert_int_equal(rc, 0);
    (*calls)++;
}

static void test_flush_messages_changes_apply_to_next_append(void **state)
{
    fixture *f = *state;
    eng_partition *p = open_part(f, true, 0, NULL); /* flush.messages: Long.MAX */
    eng_append_result res;
    eng_partition_info in;
    append_at(p, 0, 10, T0, true, &res);
    assert_false(res.durable_pending);
    assert_int_equal(eng_partition_high_watermark(p), 10);

    eng_config cfg = f->cfg;
    cfg.v[ENG_CFG_FLUSH_MESSAGES].i = 1;
    eng_partition_set_config(p, &cfg);
    append_at(p, 10, 10, T0, true, &res);
    assert_true(res.durable_pending);
    assert_int_equal(res.durable_upto, 20);
    assert_int_equal(eng_partition_high_watermark(p), 10);

    cfg.v[ENG_CFG_FLUSH_MESSAGES].i = INT64_MAX;
    eng_partition_set_config(p, &cfg);
    append_at(p, 20, 5, T0, true, &res);
    assert_false(res.durable_pending);
    int calls = 0;
    eng_partition_when_durable(p, 20, on_durable_count, &calls); /* commits inline */
    assert_int_equal(calls, 1);
    eng_partition_info_get(p, &in);
    assert_true(in.recovery_point >= 20); /* the fsync covered [0, 10) too */
    assert_int_equal(in.high_watermark, 25);
    eng_partition_unref(p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_read_stops_at_high_watermark, setup, teardown),
        cmocka_unit_test_setup_teardown(test_raw_slice_stops_at_high_watermark, setup, teardown),
        cmocka_unit_test_setup_teardown(test_flush_messages_changes_apply_to_next_append, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_timestamp_lookups_stop_at_high_watermark, setup,
                                        teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
