/*
 * eng_stats.c - the counters behind eng_stats.h.
 */
#include "eng_stats.h"

#include <stdatomic.h>
#include <string.h>

const int64_t eng_fsync_bucket_us[ENG_FSYNC_BUCKETS] = {
    100, 250, 500, 1000, 2500, 5000, 10000, 25000, 50000, 100000, 1000000, INT64_MAX};

static _Atomic uint64_t fsync_buckets[ENG_FSYNC_BUCKETS];
static _Atomic uint64_t fsync_sum_us;
static _Atomic uint64_t ret_segments[ENG_RULE_COUNT], ret_bytes[ENG_RULE_COUNT];
static _Atomic uint64_t cl_runs, cl_failures, cl_read, cl_reclaimed, cl_removed;

void eng_stats_fsync(int64_t us)
{
    for (int i = 0; i < ENG_FSYNC_BUCKETS; i++)
        if (us <= eng_fsync_bucket_us[i]) {
            atomic_fetch_add_explicit(&fsync_buckets[i], 1, memory_order_relaxed);
            break;
        }
    atomic_fetch_add_explicit(&fsync_sum_us, (uint64_t)(us > 0 ? us : 0), memory_order_relaxed);
}

void eng_stats_retention(int rule, uint64_t bytes)
{
    if (rule < 0 || rule >= ENG_RULE_COUNT)
        return;
    atomic_fetch_add_explicit(&ret_segments[rule], 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&ret_bytes[rule], bytes, memory_order_relaxed);
}

void eng_stats_cleaner(int failed, uint64_t bytes_read, uint64_t bytes_before, uint64_t bytes_after,
                       uint64_t records_removed)
{
    atomic_fetch_add_explicit(&cl_runs, 1, memory_order_relaxed);
    if (failed) {
        atomic_fetch_add_explicit(&cl_failures, 1, memory_order_relaxed);
        return;
    }
    atomic_fetch_add_explicit(&cl_read, bytes_read, memory_order_relaxed);
    if (bytes_before > bytes_after)
        atomic_fetch_add_explicit(&cl_reclaimed, bytes_before - bytes_after, memory_order_relaxed);
    atomic_fetch_add_explicit(&cl_removed, records_removed, memory_order_relaxed);
}

void eng_stats_snapshot(eng_stats *out)
{
    memset(out, 0, sizeof *out);
    uint64_t cum = 0;
    for (int i = 0; i < ENG_FSYNC_BUCKETS; i++) {
        cum += atomic_load(&fsync_buckets[i]);
        out->fsync_buckets[i] = cum;
    }
    /* The count is the +Inf bucket of this same read, never a counter of
     * its own: an fsync ending mid-scrape would set the two apart. */
    out->fsync_count = cum;
    out->fsync_sum_us = atomic_load(&fsync_sum_us);
    for (int r = 0; r < ENG_RULE_COUNT; r++) {
        out->retention_segments[r] = atomic_load(&ret_segments[r]);
        out->retention_bytes[r] = atomic_load(&ret_bytes[r]);
    }
    out->cleaner_runs = atomic_load(&cl_runs);
    out->cleaner_failures = atomic_load(&cl_failures);
    out->cleaner_bytes_read = atomic_load(&cl_read);
    out->cleaner_bytes_reclaimed = atomic_load(&cl_reclaimed);
    out->cleaner_records_removed = atomic_load(&cl_removed);
}
