/*
 * eng_partition.h - one partition's log: segments, offsets, append and read.
 *
 * Model: Kafka's UnifiedLog + LocalLog.  The partition owns an ordered set of
 * segments (the last one active), the log start offset, the log end offset
 * (LEO), the high watermark (HW: end of acknowledged data) and the recovery
 * point (everything below it is known to be on disk).
 *
 * Concurrency: appends, rolls and segment-set changes take `append_lock`.
 * Readers never do: they take a reference on the current immutable segment
 * view (a short critical section on `view_lock`, no I/O under it) and read
 * through it, so a segment that is rolled, deleted or replaced under a reader
 * stays open until the reader lets go.  LEO, HW and the log start offset are
 * atomics.
 *
 * Handles are reference counted: eng_manager hands out references, and a
 * deleted topic's partitions are freed only when the last request is done.
 */
#ifndef ENG_PARTITION_H
#define ENG_PARTITION_H

#include "eng_batch.h"
#include "eng_config.h"
#include "eng_error.h"
#include "eng_producer.h"
#include "eng_segment.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct eng_partition eng_partition;

/* Callbacks the owner installs; all optional, called without the append
 * lock held unless stated. */
typedef struct eng_partition_events {
    /* A segment was sealed by a roll (called under the append lock; must not
     * block): the owner schedules its flush. */
    void (*on_roll)(eng_partition *p, eng_segment *sealed, int64_t new_base, void *ctx);
    /* The high watermark moved (new records are readable). */
    void (*on_hw)(eng_partition *p, int64_t hw, void *ctx);
    /* A segment left the log (retention, cleaning) and its files were renamed
     * .deleted: the owner unlinks them after file.delete.delay.ms and drops
     * the reference it is handed. */
    void (*on_delete)(eng_partition *p, eng_segment *seg, int64_t delay_ms, void *ctx);
    /* Appenders wait for durability: run eng_partition_commit(p) soon on
     * some other thread.  Without it the commit runs inline. */
    void (*request_commit)(eng_partition *p, void *ctx);
    void *ctx;
} eng_partition_events;

typedef struct eng_partition_params {
    const char *topic;
    int32_t id;
    const char *dir;          /* the partition directory, created if missing */
    bool defer_dir_sync;      /* the caller fsyncs the directory holding dir once
                               * it made all its partitions; else a created dir's
                               * parent is synced here */
    eng_config config;
    bool clean_shutdown;      /* the data dir had .kafka_cleanshutdown */
    int64_t recovery_point;   /* from the checkpoint; 0 if none */
    int64_t log_start_offset; /* from the checkpoint; -1 if none */
    _Atomic int *dir_offline; /* shared flag of the log dir; may be NULL */
    eng_partition_events events;
    int64_t producer_expiration_ms; /* producer.id.expiration.ms; 0: Kafka's default */
} eng_partition_params;

/* Kafka's producer.id.expiration.ms default: a day. */
#define ENG_PRODUCER_EXPIRATION_MS 86400000

/* What loading found; filled by eng_partition_open. */
typedef struct eng_load_stats {
    uint32_t segments;
    uint32_t segments_recovered;
    uint64_t bytes_truncated;
    uint32_t segments_deleted; /* after a truncation, or leftovers */
} eng_load_stats;

typedef struct eng_append_opts {
    int64_t expected_offset; /* -1: no check */
    bool producer_batches;   /* bytes came from a client: validate like a broker */
    bool async_durable;      /* return at once when a flush is due (see below) */
} eng_append_opts;

typedef struct eng_append_result {
    int64_t base_offset;
    int64_t last_offset;
    int32_t record_count;
    int timestamp_type;      /* ENG_TS_CREATE_TIME or ENG_TS_LOG_APPEND_TIME */
    int64_t log_append_time; /* -1 for CreateTime */
    int64_t log_start_offset;
    int64_t high_watermark;
    size_t batch_bytes;
    /* With async_durable: the records are written but flush.messages says
     * they are acknowledged only once on disk.  Call eng_partition_when_durable
     * with durable_upto before answering. */
    bool durable_pending;
    int64_t durable_upto;
    /* Every batch repeated one an idempotent producer had appended: nothing
     * was written, and the offsets are the ones those batches were given. */
    bool duplicate;
} eng_append_result;

/* Called once the records below `upto` are durable (rc 0) or their flush
 * failed (rc < 0).  Runs on the committing thread, or inline. */
typedef void (*eng_durable_cb)(void *ctx, int rc);

/* Whole batches read from one segment; data is malloc'd and owned by the
 * fetch (free with eng_fetch_free).  The first batch may start before the
 * requested offset: callers skip records below it. */
typedef struct eng_fetch {
    uint8_t *data;
    size_t len;
    int64_t log_start_offset;
    int64_t high_watermark;
    int64_t next_offset; /* after the last batch returned; = requested when empty */
} eng_fetch;

typedef struct eng_partition_info {
    int64_t log_start_offset;
    int64_t high_watermark;
    int64_t log_end_offset;
    int64_t recovery_point;
    uint64_t size_bytes;
    uint32_t segment_count;
    int64_t active_base_offset;
    int64_t first_timestamp; /* of the record at the log start offset (or the
                              * first after it), as readers see it; -1 if none */
    int64_t max_timestamp;   /* largest record timestamp, -1 if none */
} eng_partition_info;

typedef struct eng_segment_info {
    int64_t base_offset;
    int64_t next_offset;
    int64_t record_count;
    int64_t batch_count;
    uint64_t size_bytes;
    int64_t first_timestamp; /* of its first record, as readers see it
                              * (LogAppendTime: the stamped time); -1 if empty */
    int64_t max_timestamp;
    bool active;
    bool damaged; /* a batch does not decode or runs past the file's end;
                   * the counts cover the whole batches before it */
    uint64_t index_bytes, timeindex_bytes;
    uint32_t index_entries, timeindex_entries;
} eng_segment_info;

typedef struct eng_batch_dump {
    uint64_t position;
    eng_batch_header header;
    uint32_t computed_crc;
    bool valid; /* CRC matches and the records parse */
} eng_batch_dump;

/* Opens (loading or creating) the partition at pp->dir.  Loading checks or
 * recovers segments as kafka-format.md §17 says.  *out holds one reference. */
int eng_partition_open(const eng_partition_params *pp, eng_partition **out, eng_load_stats *st);

void eng_partition_ref(eng_partition *p);
void eng_partition_unref(eng_partition *p);

/* Seals the active segment (final time-index entry, trims) and syncs it;
 * used at clean stop.  Further appends fail with ENG_ESHUTDOWN. */
int eng_partition_close(eng_partition *p);

/* The partition's topic is deleted and its directory is about to be renamed
 * away; a topic created later under the same name takes the old path, so
 * nothing of this partition may name a file by that path again.  Waits for a
 * retention pass or a cleaning in progress (the cleaner stops at its next
 * batch), then refuses appends, rolls, retention, cleaning and reads with
 * ENG_ENOTOPIC.  Readers already holding a segment finish through its open
 * files. */
void eng_partition_retire(eng_partition *p);

/* A delete of p's topic has begun (true) or failed (false).  From true on,
 * appends are refused with ENG_EBUSY: acknowledged, they would go with the
 * topic.  Returns once the appends under way have finished. */
void eng_partition_set_deleting(eng_partition *p, bool deleting);

/* True once eng_partition_retire has begun on p: a reader about to wait for
 * p's high watermark learns here that no append will ever move it. */
bool eng_partition_retired(const eng_partition *p);

/* Borrowed from p, valid while a reference on it is held. */
const char *eng_partition_topic(const eng_partition *p);
int32_t eng_partition_id(const eng_partition *p);
const char *eng_partition_dir(const eng_partition *p);

void eng_partition_get_config(eng_partition *p, eng_config *out);
void eng_partition_set_config(eng_partition *p, const eng_config *c);

int64_t eng_partition_log_start_offset(const eng_partition *p);
int64_t eng_partition_high_watermark(const eng_partition *p);
int64_t eng_partition_log_end_offset(const eng_partition *p);
int64_t eng_partition_recovery_point(const eng_partition *p);

/* Appends data: one or more complete RecordBatch v2, modified in place
 * (offsets stamped, LogAppendTime applied) and written with one pwrite.
 * All or nothing. */
int eng_partition_append(eng_partition *p, uint8_t *data, size_t len, const eng_append_opts *o,
                         eng_append_result *res, eng_errdetail *err);

/* The same for bytes the caller cannot let be written (a buffer it only
 * borrows): offsets go out from batch heads of their own, interleaved with
 * data by pwritev, and a stamp that changes CRC-covered bytes (LogAppendTime,
 * a producer's wrong maxTimestamp) works on a copy.  Costs a little more
 * per call than eng_partition_append, and saves copying data first. */
int eng_partition_append_readonly(eng_partition *p, const uint8_t *data, size_t len,
                                  const eng_append_opts *o, eng_append_result *res,
                                  eng_errdetail *err);

/* Reads whole batches from offset (log start <= offset <= HW), at least one
 * batch when one exists, up to about max_bytes. */
int eng_partition_read(eng_partition *p, int64_t offset, size_t max_bytes, eng_fetch *out,
                       eng_errdetail *err);
void eng_fetch_free(eng_fetch *f);

/* A byte range of one segment's .log holding whole batches from an offset:
 * what a raw read sends with sendfile.  fd is a dup the caller owns (close
 * it, or hand it to something that will); -1 when the range is empty. */
typedef struct eng_slice {
    int fd;
    uint64_t position;
    size_t length;
    int64_t next_offset;
    int64_t log_start_offset;
    int64_t high_watermark;
} eng_slice;

/* Like eng_partition_read, but returns where the batches are instead of
 * copying them. */
int eng_partition_read_slice(eng_partition *p, int64_t offset, size_t max_bytes, eng_slice *out,
                             eng_errdetail *err);

/* First offset whose record timestamp >= ts (at or after the log start and
 * below HW); ENG_ENOTFOUND if none. */
int eng_partition_offset_for_timestamp(eng_partition *p, int64_t ts, int64_t *offset,
                                       int64_t *found_ts);

/* Offset and timestamp of the record with the largest timestamp;
 * ENG_ENOTFOUND when the log is empty or that record is not below the high
 * watermark yet. */
int eng_partition_max_timestamp(eng_partition *p, int64_t *offset, int64_t *ts);

void eng_partition_info_get(eng_partition *p, eng_partition_info *out);

/* Lists segments; *out is malloc'd (caller frees).  ENG_ENOTOPIC once the
 * topic was deleted: its indexes are no longer opened by path. */
int eng_partition_segments(eng_partition *p, eng_segment_info **out, size_t *n);

/* The same for at most limit segments from the start'th (0 is the oldest);
 * *total is how many the partition has.  Only those listed are scanned, so
 * a page costs its own segments' reads, not the whole log's. */
int eng_partition_segments_page(eng_partition *p, size_t start, size_t limit,
                                eng_segment_info **out, size_t *n, size_t *total);

/* The same from the first segment whose base offset is above after (>= 0):
 * a cursor that stays put while retention drops segments before it, where
 * a start index would skip as many segments as went.  *more tells whether
 * segments follow the page. */
int eng_partition_segments_after(eng_partition *p, int64_t after, size_t limit,
                                 eng_segment_info **out, size_t *n, size_t *total, bool *more);

/* A referenced segment by base offset (eng_segment_unref when done);
 * ENG_ENOTFOUND, or ENG_ENOTOPIC once the topic was deleted. */
int eng_partition_segment(eng_partition *p, int64_t base, eng_segment **out);

/* Batch headers of one segment from batch number `skip`, at most max; *out is
 * malloc'd (caller frees).  *total receives the segment's batch count.  A
 * header that does not decode, or a batch running past the file's end, ends
 * the dump there: *damaged_at (if given) receives its position, else -1. */
int eng_partition_dump_batches(eng_partition *p, int64_t base, size_t skip, size_t max,
                               eng_batch_dump **out, size_t *n, size_t *total,
                               int64_t *damaged_at);

/* Rolls now; *new_base receives the active segment's base afterwards (the
 * same segment when the active one is empty). */
int eng_partition_roll(eng_partition *p, int64_t *new_base);

/* A copy of the idempotent producers' state, sorted by producer id
 * (malloc'd, caller frees; NULL when *n is 0). */
int eng_partition_producers(eng_partition *p, eng_producer_entry **out, size_t *n);

/* Forgets producers whose last batch is producer.id.expiration.ms old at
 * now_ms; returns how many. */
size_t eng_partition_expire_producers(eng_partition *p, int64_t now_ms);

/* Traffic counters since start. */
typedef struct eng_partition_counters {
    uint64_t appended_records, appended_bytes, read_records, read_bytes;
    uint64_t duplicate_batches; /* idempotent producers' retries answered, not written */
    uint64_t producers;         /* idempotent producers known now */
} eng_partition_counters;

void eng_partition_counters_get(const eng_partition *p, eng_partition_counters *out);

/* Counts records handed to a reader (the API knows how many it sent). */
void eng_partition_count_read(eng_partition *p, uint64_t records, uint64_t bytes);

/* Makes everything appended so far durable and advances the recovery point. */
int eng_partition_flush(eng_partition *p);

/* Makes everything below offset durable (fsyncs the segments that may hold
 * it) and advances the recovery point to at least offset. */
int eng_partition_flush_upto(eng_partition *p, int64_t offset);

/* Calls cb when everything below upto is on disk (group commit: one fsync
 * serves every waiter that arrived before it started). */
void eng_partition_when_durable(eng_partition *p, int64_t upto, eng_durable_cb cb, void *ctx);

/* Runs pending group commits until no waiter is left (request_commit's
 * worker calls this). */
void eng_partition_commit(eng_partition *p);

/* Milliseconds since the last flush, and whether anything is unflushed. */
int64_t eng_partition_ms_since_flush(const eng_partition *p);
bool eng_partition_has_unflushed(const eng_partition *p);

#endif
