/*
 * test_stats.c - the process-wide counters behind /metrics (eng_stats.h):
 *
 *   - an fsync lands in the first bucket whose upper bound it does not
 *     exceed (Prometheus "le": a bound is inclusive), and the snapshot's
 *     buckets are cumulative;
 *   - a cleaner run counts its bytes read, the bytes it reclaimed (before
 *     minus after, never negative) and the records it removed; a failed run
 *     counts only as a run and a failure;
 *   - retention counts per rule, and ignores a rule out of range.
 *
 * The counters are global, so each test compares two snapshots.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "eng_stats.h"

#include <stdint.h>

static void test_fsync_buckets_are_inclusive_and_cumulative(void **state)
{
    (void)state;
    eng_stats a, b;
    eng_stats_snapshot(&a);
    eng_stats_fsync(eng_fsync_bucket_us[0]);     /* le 100 */
    eng_stats_fsync(eng_fsync_bucket_us[0] + 1); /* le 250 */
    eng_stats_fsync(eng_fsync_bucket_us[1]);     /* le 250 */
    eng_stats_fsync(-5);                         /* a clock step: le 100, adds 0 to the sum */
    eng_stats_snapshot(&b);
    assert_int_equal(b.fsync_buckets[0] - a.fsync_buckets[0], 2);
    assert_int_equal(b.fsync_buckets[1] - a.fsync_buckets[1], 4);
    assert_int_equal(b.fsync_buckets[ENG_FSYNC_BUCKETS - 1] - a.fsync_buckets[ENG_FSYNC_BUCKETS - 1],
                     4);
    assert_int_equal(b.fsync_count - a.fsync_count, 4);
    assert_int_equal(b.fsync_sum_us - a.fsync_sum_us, 100 + 101 + 250);
}

static void test_cleaner_counters(void **state)
{
    (void)state;
    eng_stats a, b;
    eng_stats_snapshot(&a);
    eng_stats_cleaner(0, 1000, 800, 799, 3); /* reclaimed one byte */
    eng_stats_cleaner(0, 50, 100, 120, 0);   /* grew (headers kept): reclaims nothing */
    eng_stats_cleaner(1, 7777, 7777, 0, 99); /* failed: nothing but the failure */
    eng_stats_snapshot(&b);
    assert_int_equal(b.cleaner_runs - a.cleaner_runs, 3);
    assert_int_equal(b.cleaner_failures - a.cleaner_failures, 1);
    assert_int_equal(b.cleaner_bytes_read - a.cleaner_bytes_read, 1050);
    assert_int_equal(b.cleaner_bytes_reclaimed - a.cleaner_bytes_reclaimed, 1);
    assert_int_equal(b.cleaner_records_removed - a.cleaner_records_removed, 3);
}

static void test_retention_counters(void **state)
{
    (void)state;
    eng_stats a, b;
    eng_stats_snapshot(&a);
    eng_stats_retention(ENG_RULE_RETENTION_BYTES, 4096);
    eng_stats_retention(ENG_RULE_RETENTION_BYTES, 1);
    eng_stats_retention(ENG_RULE_RETENTION_MS, 10);
    eng_stats_retention(ENG_RULE_COUNT, 1 << 20);
    eng_stats_retention(-1, 1 << 20);
    eng_stats_snapshot(&b);
    assert_int_equal(b.retention_segments[ENG_RULE_RETENTION_BYTES] -
                         a.retention_segments[ENG_RULE_RETENTION_BYTES],
                     2);
    assert_int_equal(b.retention_bytes[ENG_RULE_RETENTION_BYTES] -
                         a.retention_bytes[ENG_RULE_RETENTION_BYTES],
                     4097);
    assert_int_equal(b.retention_segments[ENG_RULE_RETENTION_MS] -
                         a.retention_segments[ENG_RULE_RETENTION_MS],
                     1);
    assert_int_equal(b.retention_bytes[ENG_RULE_RETENTION_MS] - a.retention_bytes[ENG_RULE_RETENTION_MS],
                     10);
    assert_int_equal(b.retention_segments[ENG_RULE_LOG_START_OFFSET] -
                         a.retention_segments[ENG_RULE_LOG_START_OFFSET],
                     0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fsync_buckets_are_inclusive_and_cumulative),
        cmocka_unit_test(test_cleaner_counters),
        cmocka_unit_test(test_retention_counters),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
