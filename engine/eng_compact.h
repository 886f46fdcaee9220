/*
 * eng_compact.h - compacting one partition (Kafka's Cleaner.doClean).
 *
 * One round, kafka-format.md §16.2:
 *   1. the cleanable range runs from the first dirty offset (the
 *      cleaner-offset-checkpoint, reset to the log start offset when out of
 *      range) to the first uncleanable offset: the active segment's base, or
 *      the first segment whose largest timestamp is within
 *      min.compaction.lag.ms;
 *   2. an offset map (key MD5 -> last offset) is built over that range; when
 *      it fills, the round covers only what it holds; data of aborted
 *      transactions is left out (eng_compact_txn.h);
 *   3. segments from the log start up to the map's end are grouped (summed
 *      .log within segment.bytes, indexes within segment.index.bytes,
 *      offsets within 2^31-1, one index entry more per segment added) and
 *      each group is recopied into one <base>.*.cleaned segment (a full
 *      index there skips sparse entries): aborted transactions' data goes,
 *      control batches stay, and a record stays if it is past the map, or
 *      its offset is the map's offset for its key and it has a value or its
 *      tombstone is still before its delete horizon (saturated at
 *      INT64_MAX); keyless records go; offsets never change;
 *   4. swap: .cleaned -> .swap, the old segments -> .deleted, .swap -> final
 *      name; readers see the old or the new set, never a mix.
 *
 * Batches are copied verbatim when nothing in them changes.  A tombstone's
 * first clean writes the delete horizon into its batch (attribute bit 6,
 * baseTimestamp = clean time + delete.retention.ms).  A batch whose records
 * all go disappears, except the last batch of each group, which stays as a
 * 61-byte header so the group keeps its last offset (this is also what lets
 * a crash between swap steps be completed at startup).  logstore keeps no
 * producer state, so it has no producer batches to retain beyond that.
 */
#ifndef ENG_COMPACT_H
#define ENG_COMPACT_H

#include "eng_buf.h"
#include "eng_offset_map.h"
#include "eng_partition.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

typedef struct eng_clean_range {
    int64_t first_dirty;
    int64_t first_uncleanable;
    uint64_t clean_bytes;
    uint64_t cleanable_bytes;
    double dirty_ratio;       /* cleanable / (clean + cleanable); 0 when both are 0 */
    bool need_compaction_now; /* a dirty segment is older than max.compaction.lag.ms */
} eng_clean_range;

typedef struct eng_clean_stats {
    bool dry_run;
    int64_t first_dirty, first_uncleanable, end_offset;
    uint32_t segments_before, segments_after;
    uint64_t bytes_before, bytes_after;
    uint64_t bytes_read;
    uint64_t records_read, records_removed, tombstones_removed, keyless_removed;
    uint64_t batches_rewritten, batches_dropped;
    uint64_t map_entries;
    double map_utilization;
    int64_t started_ms, duration_ms;
} eng_clean_stats;

typedef struct eng_clean_opts {
    eng_offset_map *map;
    int64_t now_ms;
    bool dry_run;
    size_t io_buffer_bytes;      /* read chunk; 0 = 256 KiB */
    double max_bytes_per_second; /* <= 0: no throttle */
    _Atomic bool *abort;         /* set to stop a cleaning early (may be NULL) */
    _Atomic bool *stop;          /* the same, a second flag: the manager's stop request */
} eng_clean_opts;

/* What one batch becomes. */
typedef enum { ENG_CLEAN_COPY, ENG_CLEAN_REWRITE, ENG_CLEAN_DROP } eng_clean_action;

typedef struct eng_clean_counts {
    uint64_t records, removed, tombstones_removed, keyless_removed;
} eng_clean_counts;

/* The cleanable range of p now, given the checkpointed first dirty offset
 * (-1 when there is none). */
void eng_partition_clean_range(eng_partition *p, int64_t checkpoint, int64_t now_ms,
                               eng_clean_range *out);

/* Filters one batch against map (pure, no I/O).  keep_empty keeps a 61-byte
 * header when every record goes; aborted says the batch is data of an
 * aborted transaction (every record goes).  For ENG_CLEAN_REWRITE the new
 * batch is in out; scratch is decompression space.  Counts are added to *c.
 * A batch whose CRC does not match is ENG_ECRC (never rewritten with a
 * fresh one). */
int eng_clean_filter_batch(const uint8_t *batch, const eng_batch_header *h,
                           eng_offset_map *map, int64_t now_ms, int64_t delete_retention_ms,
                           bool keep_empty, bool aborted, eng_buf *scratch, eng_buf *out,
                           eng_clean_action *action, eng_clean_counts *c);

/* Cleans p once (or, with dry_run, computes what a clean would do).
 * ENG_EBUSY if a retention pass or another cleaning holds the partition,
 * ENG_ENOTCOMPACT if its policy has no compact.  On success st->end_offset
 * is the new first dirty offset to checkpoint (unchanged when nothing was
 * dirty). */
int eng_partition_clean(eng_partition *p, int64_t checkpoint, const eng_clean_opts *o,
                        eng_clean_stats *st);

#endif
