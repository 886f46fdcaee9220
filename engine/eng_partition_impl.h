/*
 * eng_partition_impl.h - the partition's internals, shared only by the engine
 * modules that manage its segment set (loading, retention, cleaning).
 *
 * The segment view is an immutable array of referenced segments.  Replacing
 * it (roll, retention, a cleaner swap) happens under append_lock: build the
 * new view, swap the pointer under view_lock, release the old view.  Readers
 * take a view reference under view_lock and do their I/O outside it.
 */
#ifndef ENG_PARTITION_IMPL_H
#define ENG_PARTITION_IMPL_H

#include "eng_buf.h"
#include "eng_partition.h"
#include "eng_producer.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/types.h>
#include <sys/uio.h>

typedef struct durable_waiter {
    int64_t upto;
    eng_durable_cb cb;
    void *ctx;
} durable_waiter;

typedef struct eng_segview {
    _Atomic int refs;
    size_t n;
    eng_segment *segs[];
} eng_segview;

struct eng_partition {
    char *topic;
    int32_t id;
    char *dir;
    _Atomic int refs;

    pthread_mutex_t append_lock; /* appends, rolls, segment-set changes */
    pthread_mutex_t view_lock;   /* only to take a reference on `view` */
    eng_segview *view;

    pthread_mutex_t cfg_lock;
    eng_config cfg;

    /* Held for a whole retention pass or cleaning: the two rewrite the
     * segment set and must not interleave (Kafka pauses cleaning the same
     * way).  Appends and reads never take it. */
    pthread_mutex_t maint_lock;

    _Atomic int64_t log_start_offset;
    _Atomic int64_t high_watermark;
    _Atomic int64_t log_end_offset;
    _Atomic int64_t recovery_point;
    _Atomic int *dir_offline;
    eng_partition_events ev;
    bool closed;
    /* The topic was deleted (eng_partition_retire): set under maint_lock
     * and append_lock, read without them by the cleaner to stop early. */
    _Atomic bool retired;
    /* A delete of the topic has begun (eng_partition_set_deleting): set
     * and cleared outside append_lock, read under it by appends. */
    _Atomic bool deleting;
    /* Its segments' leave to use paths under dir: revoked on retire, before
     * the directory moves and the path may name the next topic's. */
    eng_segment_gate *gate;

    /* Group commit: appenders that need durability wait here for a flush
     * that covers their offset; one of them runs it for all. */
    pthread_mutex_t flush_lock;
    pthread_cond_t flush_cond;
    bool flushing;
    bool commit_queued;         /* request_commit called, commit not yet run */
    struct durable_waiter *waiters; /* asynchronous appenders (flush_lock) */
    size_t nwaiters, cap_waiters;
    int64_t flushed_offset;     /* everything below is fsync'd */
    /* Set (under flush_lock) when an fsync failed: Linux reports a writeback
     * error once and then marks the pages clean, so a later fsync that
     * succeeds proves nothing about them.  No flush runs after it. */
    bool fsync_failed;
    /* A data-only flush may have left the active segment's indexes unsynced:
     * the next roll syncs them.  Set before such a flush takes its view. */
    _Atomic bool index_sync_owed;
    /* Producer snapshots written unsynced (at a roll, at a load that rebuilt
     * the state): the latest one's offset, and the offset below which
     * every one is synced with its directory.  The next flush syncs those
     * in between before it moves the recovery point (eng__flush_upto). */
    _Atomic int64_t snap_written, snap_synced;
    /* Their sync could not open a file (out of descriptors): the recovery
     * point waits for a later flush, and the warning is logged once. */
    _Atomic bool snap_sync_put_off;
    int64_t unflushed_records;  /* appended since the last flush (append_lock) */
    /* The latest LogAppendTime stamped here (append_lock; from the log's
     * last batch at the first LogAppendTime append since open, see
     * append_time_seeded).  An append reads the clock before it takes the
     * lock, so it may follow one that read a later time, or the clock may
     * have been set back: it then takes this one, and LogAppendTime never
     * goes back along the offsets. */
    int64_t last_append_time_ms;
    /* last_append_time_ms was taken from the log's last batch (append_lock):
     * a restart with the clock set back must not stamp earlier than the
     * stamps already written. */
    bool append_time_seeded;
    _Atomic int64_t last_flush_ms; /* monotonic */
    /* Failed rolls are logged at most every ROLL_ERROR_LOG_MS (append_lock):
     * out of space or descriptors, every append tries again. */
    int64_t roll_error_logged_ms; /* monotonic; 0: never */
    uint64_t roll_errors_unlogged;
    _Atomic uint64_t appended_records, appended_bytes, read_records, read_bytes;
    _Atomic uint64_t duplicate_batches;
    _Atomic uint64_t producer_count; /* producers.n, for readers without append_lock */
    /* Idempotent producers' sequences (append_lock); saved at each roll, at
     * close and after the loader rebuilt them (eng_producer.h). */
    eng_producers producers;
    int64_t producer_expiration_ms; /* producer.id.expiration.ms */
    /* The offset of a producer snapshot known to be on disk, synced, and
     * to hold what `producers` holds, but for producers any load expires
     * again (append_lock); -1 when none is known.  A close finding one at
     * the log end has nothing to write. */
    int64_t snapshot_synced_at;
};

/* A new view holding references on n segments (each referenced here); the
 * caller owns it (eng__segview_release), NULL when out of memory. */
eng_segview *eng__segview_new(eng_segment *const *segs, size_t n);

/* Takes a reference on the partition's current view (never NULL). */
eng_segview *eng__segview_acquire(eng_partition *p);

/* Drops a view reference; the last one drops its segment references. */
void eng__segview_release(eng_segview *v);

/* Installs v as the current view (caller holds append_lock and hands over
 * its reference on v); the previous view is released. */
void eng__segview_install(eng_partition *p, eng_segview *v);

/* Index of the segment with the largest base <= offset, or -1. */
ssize_t eng__segview_floor(const eng_segview *v, int64_t offset);

/* True if segment k of v holds nothing at or above lso: deleted for readers,
 * waiting for retention to remove it. */
bool eng__below_start(const eng_segview *v, size_t k, int64_t lso);

/* Reads the batch at b (decompressed when it is) and starts *it on its
 * records; buf and scratch (the caller's) hold the bytes the iterator walks. */
int eng__iter_records(eng_segment *seg, const eng_batch_pos *b, eng_buf *buf, eng_buf *scratch,
                      eng_record_iter *it);

/* The largest timestamp among seg's records at or after `from` (the log
 * start offset), and the last offset of the batch holding it; (-1, -1) when
 * none (eng_partition_timestamps.c says how delete-records is allowed for). */
void eng__live_max_timestamp(eng_segment *seg, int64_t from, int64_t *ts, int64_t *last);

/* Per-segment options derived from a topic config, with p's gate. */
void eng__segment_opts(const eng_partition *p, const eng_config *c, bool active_prealloc,
                       eng_segment_opts *o);

/* Rolls the active segment (caller holds append_lock); a no-op when the
 * active segment is empty. */
int eng__partition_roll_locked(eng_partition *p, const eng_config *cfg, eng_roll_reason why);

/* Hands a segment that left the view to its owner (on_delete), or unlinks
 * it at once when nobody listens.  Takes over the caller's reference. */
void eng__partition_dispose(eng_partition *p, eng_segment *seg);

/* What an append becomes after validation (eng_validate.c). */
typedef struct eng__append_plan {
    int64_t total_offsets; /* sum of lastOffsetDelta + 1 */
    int32_t records;
    int64_t max_ts;
    size_t max_ts_batch;   /* index of the earliest batch holding max_ts */
    size_t batches;
    size_t producer_batches; /* with a producerId: checked against the producer state */
    eng_buf rebuilt;       /* non-empty: append these bytes (converted, or stamped when the
                            * caller's are read-only), not the caller's */
} eng__append_plan;

/* Checks, converts and stamps the batches of an append (no lock held).
 * mut is data when it may be stamped in place, else NULL (stamps then go
 * to a copy in plan->rebuilt). */
int eng__plan_append(const eng_config *cfg, const uint8_t *data, uint8_t *mut, size_t len,
                     bool producer, int64_t now, eng__append_plan *plan, eng_errdetail *err);
void eng__append_plan_free(eng__append_plan *plan);

/* Rewrites the LogAppendTime (maxTimestamp) of every batch of a planned
 * append to ts and recomputes their CRCs. */
void eng__restamp_log_append(uint8_t *data, size_t len, int64_t ts);

/* The bytes of a batch before the ones its CRC covers that an append
 * rewrites: baseOffset, batchLength (kept), partitionLeaderEpoch. */
#define ENG_BATCH_HEAD 16

/* How a planned append's batches reach the file: each batch's head from
 * heads, the rest of it from the caller's bytes as they are, so pwritev
 * writes them without copying them together.  Small appends (most
 * are one batch) use the inline arrays. */
typedef struct eng__append_gather {
    uint8_t (*heads)[ENG_BATCH_HEAD];
    struct iovec *iov;
    int iovcnt;
    uint8_t inline_heads[4][ENG_BATCH_HEAD];
    struct iovec inline_iov[8];
} eng__append_gather;

/* Stamps base offsets from `next` and partitionLeaderEpoch 0 into data's
 * batches; returns the last offset of the batch max_ts_batch (Kafka's
 * shallowOffsetOfMaxTimestamp). */
int64_t eng__assign_offsets(uint8_t *data, size_t len, int64_t next, size_t max_ts_batch);

/* Sizes g for an append of `batches` batches (0: none, a writable append);
 * eng__gather_free in any case. */
static inline int eng__gather_init(eng__append_gather *g, size_t batches)
{
    g->heads = g->inline_heads;
    g->iov = g->inline_iov;
    g->iovcnt = 0;
    if (batches <= sizeof g->inline_heads / sizeof g->inline_heads[0])
        return 0;
    g->heads = malloc(batches * sizeof *g->heads);
    g->iov = malloc(2 * batches * sizeof *g->iov);
    return g->heads && g->iov ? 0 : -ENOMEM;
}

static inline void eng__gather_free(eng__append_gather *g)
{
    if (g->heads != g->inline_heads)
        free(g->heads);
    if (g->iov != g->inline_iov)
        free(g->iov);
}

/* Fills g for data's batches, base offsets from `next`, partitionLeaderEpoch
 * 0; returns the last offset of the batch max_ts_batch (Kafka's
 * shallowOffsetOfMaxTimestamp). */
int64_t eng__gather_batches(eng__append_gather *g, const uint8_t *data, size_t len, int64_t next,
                            size_t max_ts_batch);

/* True once the log dir holding p went offline after an I/O error: its
 * files are not read or rewritten again until a restart recovers them
 * (DESIGN §3: 503 on its partitions). */
static inline bool eng__dir_offline(const eng_partition *p)
{
    return p->dir_offline && atomic_load(p->dir_offline);
}

static inline void eng__raise_atomic(_Atomic int64_t *a, int64_t v)
{
    int64_t cur = atomic_load(a);
    while (cur < v && !atomic_compare_exchange_weak(a, &cur, v))
        ;
}

/* Raises the high watermark to hw (never lowers it) and tells the
 * partition's listener (waiting readers). */
void eng__set_hw(eng_partition *p, int64_t hw);

/* fsyncs every segment that may hold data at or after `from`; data_only
 * leaves the active segment's indexes out (eng_partition_flush.c). */
int eng__sync_from(eng_partition *p, int64_t from, bool data_only);
/* eng__sync_from for a close (appends excluded): only the files each
 * segment changed since they were last synced (eng_segment_sync_changed). */
int eng__sync_changed_from(eng_partition *p, int64_t from);

/* Waits until everything below `upto` is on disk, running the flush itself
 * when no other appender is; 0, or ENG_EOFFLINE once an fsync failed. */
int eng__flush_upto(eng_partition *p, int64_t upto, bool data_only);

/* Loads segments from p->dir into p's view (eng_loader.c). */
int eng__partition_load(eng_partition *p, const eng_partition_params *pp, eng_load_stats *st);

/* Rebuilds p->producers once the view is loaded: from the latest snapshot
 * and the batches after it (eng_partition_producers.c). */
int eng__partition_load_producers(eng_partition *p, bool clean_shutdown);

#endif
