/*
 * test_compact_edge.c - compaction at the edges of its configs (each case a
 * bug a review found; kafka-format.md §6, §13, §16):
 *
 *   - full indexes: two segments whose indexes together fill
 *     segment.index.bytes (index.interval.bytes 0) used to be merged into a
 *     segment whose index overflowed, failing every clean; a segment whose
 *     batches grow when the delete horizon is written earns more sparse
 *     entries than it had, and the clean must still succeed, every offset
 *     still readable from the middle;
 *   - min.compaction.lag.ms on records without timestamps: the segment's
 *     age is its file's mtime (Kafka's largestTimestamp), not "infinitely
 *     old"; max.compaction.lag.ms ignores such segments, as Kafka does; a
 *     segment exactly min.compaction.lag.ms old is cleanable;
 *   - a zero-length key is a key (deduplicated), not a null one (dropped);
 *   - delete.retention.ms at INT64_MAX: the horizon saturates instead of
 *     overflowing, records stamped -1 or before 1970 keep their timestamps;
 *   - ?spec=max_timestamp after a clean emptied the batch holding the
 *     largest timestamp but kept it as a header (the last of its group): the
 *     answer is the record with the largest timestamp that remains, not the
 *     header's offset, where no record is.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "compact_util.h"
#include "eng_fs.h"
#include "support.h"

#include <limits.h>

typedef cu_fixture fixture;

/* The first record offset a read at `offset` returns. */
static int64_t first_read_offset(eng_partition *p, int64_t offset)
{
    eng_fetch f;
    eng_errdetail err = {0};
    assert_int_equal(eng_partition_read(p, offset, 4096, &f, &err), 0);
    assert_true(f.len >= ENG_BATCH_OVERHEAD);
    eng_batch_header h;
    assert_int_equal(eng_batch_header_decode(f.data, f.len, &h), 0);
    eng_fetch_free(&f);
    return h.base_offset;
}

/* Appends n single-record batches "k<i>" (value or tombstone), one per
 * append; returns the size of one batch. */
static size_t append_singles(eng_partition *p, int from, int n, bool tombstones, int64_t ts)
{
    size_t len = 0;
    for (int i = from; i < from + n; i++) {
        char k[16];
        snprintf(k, sizeof k, "k%05d", i);
        cu_kv kv = {k, tombstones ? NULL : "v", 0};
        free(cu_encode(&kv, 1, ts, NULL, &len));
        cu_append(p, &kv, 1, ts);
    }
    return len;
}

/* ---- full indexes ---------------------------------------------------------- */

static void test_group_fills_index(void **state)
{
    fixture *f = *state;
    f->cfg.v[ENG_CFG_SEGMENT_INDEX_BYTES].i = 4096;
    f->cfg.v[ENG_CFG_INDEX_INTERVAL_BYTES].i = 0;
    eng_partition *p = cu_open(f->dir, &f->cfg, &f->trash, false, 0, NULL);
    /* 257 batches: 256 entries (the first batch gets none), 2048 bytes per
     * segment, 4096 for the two: exactly segment.index.bytes. */
    append_singles(p, 0, 257, false, CU_T0);
    assert_int_equal(cu_roll(p), 257);
    append_singles(p, 257, 257, false, CU_T0);
    assert_int_equal(cu_roll(p), 514);
    eng_clean_stats st;
    assert_int_equal(cu_clean(p, f->map, -1, CU_T0 + 60000, false, &st), 0);
    assert_int_equal(st.end_offset, 514);
    cu_recs rs;
    cu_read_ok(p, &rs);
    assert_int_equal(rs.n, 514);
    for (size_t i = 0; i < rs.n; i++)
        assert_int_equal(rs.v[i].off, (int64_t)i);
    cu_recs_free(&rs);
    for (int64_t off = 0; off < 514; off += 37)
        assert_int_equal(first_read_offset(p, off), off);
    /* A second clean (nothing dirty) and a third after more data work too:
     * the partition did not become uncleanable. */
    append_singles(p, 0, 10, false, CU_T0 + 1);
    cu_roll(p);
    assert_int_equal(cu_clean(p, f->map, st.end_offset, CU_T0 + 60000, false, &st), 0);
    assert_int_equal(st.records_removed, 10);
    eng_partition_close(p);
    eng_partition_unref(p);
}

static void test_horizon_growth_fills_index(void **state)
{
    fixture *f = *state;
    f->cfg.v[ENG_CFG_SEGMENT_INDEX_BYTES].i = 4096; /* 512 offset entries */
    /* With index.interval.bytes = one batch, the source gets an entry every
     * second batch (400 for 800); the first clean writes the delete horizon
     * into every tombstone batch, which makes each a few bytes larger than
     * the interval, so each would earn an entry: 799, above 512. */
    cu_kv probe = {"k00000", NULL, 0};
    size_t len;
    free(cu_encode(&probe, 1, CU_T0, NULL, &len));
    f->cfg.v[ENG_CFG_INDEX_INTERVAL_BYTES].i = (int64_t)len;
    eng_partition *p = cu_open(f->dir, &f->cfg, &f->trash, false, 0, NULL);
    append_singles(p, 0, 800, true, CU_T0);
    assert_int_equal(cu_roll(p), 800);
    eng_clean_stats st;
    assert_int_equal(cu_clean(p, f->map, -1, CU_T0 + 60000, false, &st), 0);
    assert_int_equal(st.batches_rewritten, 800);
    cu_recs rs;
    cu_read_ok(p, &rs);
    assert_int_equal(rs.n, 800);
    assert_int_equal(rs.v[799].horizon, CU_T0 + 60000 + 86400000);
    cu_recs_free(&rs);
    for (int64_t off = 0; off < 800; off += 53)
        assert_int_equal(first_read_offset(p, off), off);
    eng_partition_close(p);
    eng_partition_unref(p);
}

/* ---- compaction lags without timestamps ---------------------------------- */

static void test_min_lag_without_timestamps(void **state)
{
    fixture *f = *state;
    f->cfg.v[ENG_CFG_MIN_COMPACTION_LAG_MS].i = 3600000;
    eng_partition *p = cu_open(f->dir, &f->cfg, &f->trash, false, 0, NULL);
    cu_kv recs[] = {{"a", "1", 0}, {"a", "2", 0}, {"b", "3", 0}, {"a", "4", 0}};
    cu_append(p, recs, 4, -1); /* no record has a timestamp */
    cu_roll(p);
    int64_t now = eng_now_ms();
    eng_clean_range r;
    eng_partition_clean_range(p, -1, now, &r);
    assert_int_equal(r.first_uncleanable, 0);
    eng_clean_stats st;
    assert_int_equal(cu_clean(p, f->map, -1, now, false, &st), 0);
    assert_int_equal(st.records_removed, 0);
    assert_int_equal(st.segments_before, 0);
    /* Once the file is older than the lag, it is cleanable. */
    eng_partition_clean_range(p, -1, now + 2 * 3600000, &r);
    assert_int_equal(r.first_uncleanable, 4);
    assert_int_equal(cu_clean(p, f->map, -1, now + 2 * 3600000, false, &st), 0);
    assert_int_equal(st.records_removed, 2);
    eng_partition_close(p);
    eng_partition_unref(p);
}

static void test_max_lag_without_timestamps(void **state)
{
    fixture *f = *state;
    f->cfg.v[ENG_CFG_MAX_COMPACTION_LAG_MS].i = 1000;
    eng_partition *p = cu_open(f->dir, &f->cfg, &f->trash, false, 0, NULL);
    cu_kv recs[] = {{"a", "1", 0}, {"a", "2", 0}};
    cu_append(p, recs, 2, -1);
    cu_roll(p);
    eng_clean_range r;
    eng_partition_clean_range(p, -1, eng_now_ms() + 3600000, &r);
    assert_false(r.need_compaction_now);
    assert_true(r.cleanable_bytes > 0); /* its dirty ratio still counts */
    eng_partition_close(p);
    eng_partition_unref(p);
}

/* Kafka's cleanableOffsets: a segment whose largest timestamp is more than
 * now - min.compaction.lag.ms is uncleanable; one exactly the lag old is
 * cleanable.  The clock is given, so the boundary is exact. */
static void test_min_lag_boundary(void **state)
{
    fixture *f = *state;
    f->cfg.v[ENG_CFG_MIN_COMPACTION_LAG_MS].i = 1000;
    eng_partition *p = cu_open(f->dir, &f->cfg, &f->trash, false, 0, NULL);
    cu_kv recs[] = {{"a", "1", 0}, {"a", "2", 0}, {"b", "3", 0}, {"a", "4", 0}};
    cu_append(p, recs, 4, CU_T0);
    cu_roll(p);
    eng_clean_range r;
    eng_partition_clean_range(p, -1, CU_T0 + 999, &r);
    assert_int_equal(r.first_uncleanable, 0);
    eng_partition_clean_range(p, -1, CU_T0 + 1000, &r);
    assert_int_equal(r.first_uncleanable, 4);
    eng_clean_stats st;
    assert_int_equal(cu_clean(p, f->map, -1, CU_T0 + 1000, false, &st), 0);
    assert_int_equal(st.records_removed, 2);
    eng_partition_close(p);
    eng_partition_unref(p);
}

/* ---- the empty key ------------------------------------------------------- */

/* A zero-length key is a key, not a null one (Kafka's cleaner drops only
 * records with no key): the latest record under "" is kept, older ones go,
 * and offsets stay. */
static void test_empty_key_is_a_key(void **state)
{
    fixture *f = *state;
    eng_partition *p = cu_open(f->dir, &f->cfg, &f->trash, false, 0, NULL);
    cu_kv recs[] = {{"", "1", 0}, {"a", "2", 0}, {"", "3", 0}, {"a", "4", 0}, {"", "5", 0}};
    cu_append(p, recs, 5, CU_T0);
    cu_roll(p);
    eng_clean_stats st;
    assert_int_equal(cu_clean(p, f->map, -1, CU_T0 + 1000, false, &st), 0);
    assert_int_equal(st.records_removed, 3);
    cu_recs rs;
    cu_read_ok(p, &rs);
    assert_int_equal(rs.n, 2);
    assert_int_equal(rs.v[0].off, 3);
    assert_string_equal(rs.v[0].key, "a");
    assert_string_equal(rs.v[0].val, "4");
    assert_int_equal(rs.v[1].off, 4);
    assert_non_null(rs.v[1].key);
    assert_string_equal(rs.v[1].key, "");
    assert_string_equal(rs.v[1].val, "5");
    cu_recs_free(&rs);
    eng_partition_close(p);
    eng_partition_unref(p);
}

/* ---- delete.retention.ms at its maximum ------------------------------------ */

static void test_horizon_saturates(void **state)
{
    fixture *f = *state;
    cu_kv recs[] = {{"t", NULL, -1}, {"u", NULL, -5}, {"v", NULL, CU_T0}};
    size_t len;
    uint8_t *b = cu_encode(recs, 3, CU_T0, NULL, &len);
    eng_batch_header h;
    assert_int_equal(eng_batch_validate(b, len, &h), 0);
    eng_offset_map_put(f->map, (const uint8_t *)"t", 1, 0);
    eng_offset_map_put(f->map, (const uint8_t *)"u", 1, 1);
    eng_offset_map_put(f->map, (const uint8_t *)"v", 1, 2);
    eng_buf scratch = {0}, out = {0};
    eng_clean_action act;
    eng_clean_counts c = {0};
    assert_int_equal(eng_clean_filter_batch(b, &h, f->map, CU_T0, INT64_MAX, false, false,
                                            &scratch, &out, &act, &c),
                     0);
    assert_int_equal(act, ENG_CLEAN_REWRITE);
    eng_batch_header oh;
    assert_int_equal(eng_batch_validate(out.data, out.len, &oh), 0);
    assert_true(oh.attributes & ENG_ATTR_DELETE_HORIZON);
    /* Saturated, then brought in just enough for the -5 to fit. */
    assert_int_equal(oh.base_timestamp, INT64_MAX - 4);
    eng_record_iter it;
    eng_record r;
    eng_record_iter_init(&it, &oh, out.data + ENG_BATCH_OVERHEAD, out.len - ENG_BATCH_OVERHEAD);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(eng_record_iter_next(&it, &r), 1);
        assert_int_equal(r.raw_timestamp, recs[i].ts);
    }
    free(b);

    /* Without a pre-1970 stamp the horizon is INT64_MAX itself. */
    cu_kv one = {"t", NULL, -1};
    b = cu_encode(&one, 1, CU_T0, NULL, &len);
    assert_int_equal(eng_batch_validate(b, len, &h), 0);
    assert_int_equal(eng_clean_filter_batch(b, &h, f->map, CU_T0, INT64_MAX, false, false,
                                            &scratch, &out, &act, &c),
                     0);
    assert_int_equal(act, ENG_CLEAN_REWRITE);
    assert_int_equal(eng_batch_validate(out.data, out.len, &oh), 0);
    assert_int_equal(oh.base_timestamp, INT64_MAX);
    free(b);
    eng_buf_free(&scratch);
    eng_buf_free(&out);

    /* Through a whole clean: the tombstone stays, clean after clean. */
    f->cfg.v[ENG_CFG_DELETE_RETENTION_MS].i = INT64_MAX;
    eng_partition *p = cu_open(f->dir, &f->cfg, &f->trash, false, 0, NULL);
    cu_kv log[] = {{"a", "1", 0}, {"a", NULL, 0}};
    cu_append(p, log, 2, CU_T0);
    cu_roll(p);
    eng_clean_stats st;
    assert_int_equal(cu_clean(p, f->map, -1, CU_T0 + 1000, false, &st), 0);
    cu_kv more = {"b", "2", 0};
    cu_append(p, &more, 1, CU_T0 + 2);
    cu_roll(p);
    assert_int_equal(cu_clean(p, f->map, st.end_offset, INT64_MAX - 1, false, &st), 0);
    cu_recs rs;
    cu_read_ok(p, &rs);
    assert_int_equal(rs.n, 2);
    assert_int_equal(rs.v[0].off, 1);
    assert_null(rs.v[0].val);
    assert_int_equal(rs.v[0].horizon, INT64_MAX);
    cu_recs_free(&rs);
    eng_partition_close(p);
    eng_partition_unref(p);
}

/* ---- max timestamp after a clean --------------------------------------------- */

static void test_max_timestamp_skips_emptied_batch(void **state)
{
    fixture *f = *state;
    /* One batch a segment, one segment a group: the superseded a@9000 is
     * the last batch of its group, so it stays as a header that keeps its
     * maxTimestamp (kafka-format.md §6.3). */
    f->cfg.v[ENG_CFG_SEGMENT_BYTES].i = 100;
    eng_partition *p = cu_open(f->dir, &f->cfg, &f->trash, false, 0, NULL);
    cu_kv a1 = {"a", "1", CU_T0 + 9000}, a2 = {"a", "2", CU_T0 + 3}, b = {"b", "3", CU_T0 + 6},
          z = {"z", "4", CU_T0 + 4};
    assert_int_equal(cu_append(p, &a1, 1, CU_T0), 0);
    assert_int_equal(cu_append(p, &a2, 1, CU_T0), 1);
    assert_int_equal(cu_append(p, &b, 1, CU_T0), 2);
    assert_int_equal(cu_append(p, &z, 1, CU_T0), 3);
    int64_t off, ts;
    assert_int_equal(eng_partition_max_timestamp(p, &off, &ts), 0);
    assert_int_equal(off, 0);
    assert_int_equal(ts, CU_T0 + 9000);

    eng_clean_stats st;
    assert_int_equal(cu_clean(p, f->map, -1, CU_T0 + 60000, false, &st), 0);
    assert_int_equal(st.end_offset, 3);
    cu_recs rs;
    cu_read_ok(p, &rs);
    assert_int_equal(rs.n, 3);
    assert_int_equal(rs.v[0].off, 1);
    cu_recs_free(&rs);

    assert_int_equal(eng_partition_max_timestamp(p, &off, &ts), 0);
    assert_int_equal(off, 2);
    assert_int_equal(ts, CU_T0 + 6);
    eng_partition_close(p);
    eng_partition_unref(p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_group_fills_index, cu_setup, cu_teardown),
        cmocka_unit_test_setup_teardown(test_horizon_growth_fills_index, cu_setup, cu_teardown),
        cmocka_unit_test_setup_teardown(test_min_lag_without_timestamps, cu_setup, cu_teardown),
        cmocka_unit_test_setup_teardown(test_max_lag_without_timestamps, cu_setup, cu_teardown),
        cmocka_unit_test_setup_teardown(test_min_lag_boundary, cu_setup, cu_teardown),
        cmocka_unit_test_setup_teardown(test_empty_key_is_a_key, cu_setup, cu_teardown),
        cmocka_unit_test_setup_teardown(test_horizon_saturates, cu_setup, cu_teardown),
        cmocka_unit_test_setup_teardown(test_max_timestamp_skips_emptied_batch, cu_setup,
                                        cu_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
