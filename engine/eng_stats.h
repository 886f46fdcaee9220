/*
 * eng_stats.h - process-wide engine counters for monitoring.
 *
 * Lock-free atomics bumped on the paths they measure: fsync latency (a
 * histogram), segments deleted by retention per rule, cleaner work.  Per
 * partition counters (records and bytes appended and read) live in the
 * partition (eng_partition_counters).  Readers take a snapshot.
 */
#ifndef ENG_STATS_H
#define ENG_STATS_H

#include <stdint.h>

/* fsync latency buckets, upper bounds in microseconds (+Inf last). */
#define ENG_FSYNC_BUCKETS 12
extern const int64_t eng_fsync_bucket_us[ENG_FSYNC_BUCKETS];

enum { ENG_RULE_LOG_START_OFFSET, ENG_RULE_RETENTION_BYTES, ENG_RULE_RETENTION_MS, ENG_RULE_COUNT };

typedef struct eng_stats {
    uint64_t fsync_buckets[ENG_FSYNC_BUCKETS]; /* cumulative counts per upper bound */
    uint64_t fsync_count;
    uint64_t fsync_sum_us;
    uint64_t retention_segments[ENG_RULE_COUNT];
    uint64_t retention_bytes[ENG_RULE_COUNT];
    uint64_t cleaner_runs;
    uint64_t cleaner_failures;
    uint64_t cleaner_bytes_read;
    uint64_t cleaner_bytes_reclaimed;
    uint64_t cleaner_records_removed;
} eng_stats;

void eng_stats_fsync(int64_t us);
void eng_stats_retention(int rule, uint64_t bytes);
void eng_stats_cleaner(int failed, uint64_t bytes_read, uint64_t bytes_before, uint64_t bytes_after,
                       uint64_t records_removed);
void eng_stats_snapshot(eng_stats *out);

#endif
