/*
 * eng_partition_flush.c - a partition's flushes: fsyncs of its segments,
 * group commit for appends that must be on disk before they are
 * acknowledged (flush.messages), and the recovery point they move.
 *
 * One fsync serves every appender that arrived while the previous one ran;
 * waiting appenders either block (eng__flush_upto) or leave a callback
 * (eng_partition_when_durable) that a commit job runs once their offset is
 * covered.  With flush.messages=1 the high watermark only moves past
 * records that are on disk.
 */
#include "eng_partition_impl.h"

#include "eng_fault.h"
#include "eng_fs.h"
#include "eng_logger.h"
#include "eng_stats.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>

/* Errors only an open() gives, never an fsync: no sync was tried. */
static bool could_not_open(int rc)
{
    return rc == -EMFILE || rc == -ENFILE || rc == -ENOMEM;
}

/* Syncs the producer snapshots written unsynced since the last call (see
 * snap_written), with their directory.  Without it a power loss could
 * leave a roll's snapshot empty or torn long after the recovery point
 * passed its offset; once retention has taken the segments before it (and
 * their snapshots), the next start can rebuild no producer whose last
 * batch was there, and a retry of that batch is stored twice.  Kafka's
 * flush-log job syncs the roll's snapshot the same way. */
static int sync_snapshots(eng_partition *p, const eng_segview *v)
{
    int64_t written = atomic_load(&p->snap_written), synced = atomic_load(&p->snap_synced);
    /* A deleted topic's dir path may already be a new topic's. */
    if (written <= synced || atomic_load(&p->retired))
        return 0;
    int rc = 0;
    /* Several rolls since the last flush leave one snapshot each. */
    for (size_t k = 0; k < v->n && !rc; k++) {
        int64_t base = eng_segment_base(v->segs[k]);
        if (base > synced && base < written)
            rc = eng_producers_sync_snapshot(p->dir, base);
    }
    if (!rc)
        rc = eng_producers_sync_snapshot(p->dir, written);
    if (!rc)
        rc = eng_fs_sync_dir(p->dir);
    /* The topic was deleted meanwhile: its directory moved (ENOENT) or may
     * name the next topic's.  Its files need no durability, and a failure
     * here must not pass for a writeback error that takes the log dir
     * offline (the retire marks it before the directory moves). */
    if (rc && atomic_load(&p->retired))
        return 0;
    if (!rc)
        eng__raise_atomic(&p->snap_synced, written);
    return rc;
}

/* fsyncs every segment that may hold data at or after `from`.  With
 * data_only the active (last) segment's indexes are left out: an append is
 * durable once its bytes are, startup recovery rebuilds the indexes of the
 * segment holding the recovery point, and a roll syncs a segment's indexes
 * before it stops being the last one (see eng__partition_roll_locked). */
int eng__sync_from(eng_partition *p, int64_t from, bool data_only)
{
    /* Before the view is taken: a roll after this point syncs the segment
     * skipped below, and one before it left that segment non-last here. */
    if (data_only)
        atomic_store(&p->index_sync_owed, true);
    eng_segview *v = eng__segview_acquire(p);
    ssize_t i = eng__segview_floor(v, from);
    int rc = 0;
    for (size_t k = i < 0 ? 0 : (size_t)i; k < v->n && !rc; k++)
        rc = data_only && k == v->n - 1 ? eng_segment_sync_data(v->segs[k])
                                        : eng_segment_sync(v->segs[k]);
    eng__segview_release(v);
    return rc;
}

int eng__sync_changed_from(eng_partition *p, int64_t from)
{
    eng_segview *v = eng__segview_acquire(p);
    ssize_t i = eng__segview_floor(v, from);
    int rc = 0;
    for (size_t k = i < 0 ? 0 : (size_t)i; k < v->n && !rc; k++)
        rc = eng_segment_sync_changed(v->segs[k]);
    eng__segview_release(v);
    return rc;
}

/* Waits until everything below `upto` is on disk, running the flush itself
 * when no other appender is; data_only (acknowledging appends) leaves the
 * active segment's indexes to later flushes.  Returns the fsync error, if
 * any. */
int eng__flush_upto(eng_partition *p, int64_t upto, bool data_only)
{
    int rc = 0;
    pthread_mutex_lock(&p->flush_lock);
    while (p->flushed_offset < upto) {
        /* Linux reports a writeback error once: a later flush (the flusher
         * job, a waiting appender, the stop) would "succeed" and move the
         * recovery point and the high watermark over data that may never
         * have reached the disk, making appends told their fsync failed
         * readable, and a retry would duplicate them. */
        if (p->fsync_failed || eng__dir_offline(p)) {
            rc = ENG_EOFFLINE;
            break;
        }
        if (p->flushing) {
            pthread_cond_wait(&p->flush_cond, &p->flush_lock);
            continue;
        }
        p->flushing = true;
        int64_t from = p->flushed_offset;
        int64_t target = atomic_load(&p->log_end_offset);
        pthread_mutex_unlock(&p->flush_lock);
        rc = ENG_FAULT("partition.fsync");
        if (!rc) {
            int64_t t0 = eng_mono_us();
            rc = eng__sync_from(p, from, data_only);
            eng_stats_fsync(eng_mono_us() - t0);
        }
        pthread_mutex_lock(&p->flush_lock);
        p->flushing = false;
        if (!rc && target > p->flushed_offset)
            p->flushed_offset = target;
        if (rc)
            p->fsync_failed = true; /* before the waiters wake */
        pthread_cond_broadcast(&p->flush_cond);
        if (rc)
            break;
    }
    int64_t done = p->flushed_offset;
    pthread_mutex_unlock(&p->flush_lock);
    bool snapshots_owed = false;
    if (!rc && atomic_load(&p->snap_written) > atomic_load(&p->snap_synced)) {
        /* After the data: with flush.messages the data below a roll was
         * flushed before the roll wrote its snapshot, and the flush-log job
         * after it has no data to flush. */
        eng_segview *v = eng__segview_acquire(p);
        int src = sync_snapshots(p, v);
        eng__segview_release(v);
        if (could_not_open(src)) {
            /* No fsync ran, so none failed: the data above is on disk and
             * its appends may be acknowledged.  Taking the dir offline for
             * it (as an fsync error must) turned a server short of
             * descriptors, which heals when they are freed, into one that
             * refused every append until restarted. */
            snapshots_owed = true;
            if (!atomic_exchange(&p->snap_sync_put_off, true))
                ENG_WARN("%s-%d: cannot sync its producer snapshots now (%s): the recovery "
                         "point stays at %" PRId64 " until a later flush can",
                         p->topic, p->id, eng_strerror(src),
                         atomic_load(&p->recovery_point));
        } else if (src) {
            rc = src;
            pthread_mutex_lock(&p->flush_lock);
            p->fsync_failed = true;
            pthread_mutex_unlock(&p->flush_lock);
        } else if (atomic_exchange(&p->snap_sync_put_off, false)) {
            ENG_INFO("%s-%d: producer snapshots synced; the recovery point moves again",
                     p->topic, p->id);
        }
    }
    if (rc && rc != ENG_EOFFLINE) {
        /* Even ENOSPC: the bytes were written (the log end offset moved);
         * what failed is their writeback, which no retry can vouch for. */
        if (p->dir_offline && !atomic_exchange(p->dir_offline, 1))
            ENG_ERROR("%s-%d: fsync failed (%s); taking the log dir offline", p->topic, p->id,
                      eng_strerror(rc));
        else if (!p->dir_offline)
            ENG_ERROR("%s-%d: fsync failed (%s); no more flushes", p->topic, p->id,
                      eng_strerror(rc));
        rc = ENG_EOFFLINE;
    }
    if (rc)
        return rc;
    if (!snapshots_owed)
        eng__raise_atomic(&p->recovery_point, done);
    atomic_store(&p->last_flush_ms, eng_mono_ms());
    return 0;
}

int eng_partition_flush_upto(eng_partition *p, int64_t offset)
{
    int rc = eng__flush_upto(p, offset, false);
    if (!rc) /* on disk, so visible: acknowledged appends must be readable */
        eng__set_hw(p, offset);
    return rc;
}

int64_t eng_partition_ms_since_flush(const eng_partition *p)
{
    return eng_mono_ms() - atomic_load(&((eng_partition *)p)->last_flush_ms);
}

bool eng_partition_has_unflushed(const eng_partition *p)
{
    eng_partition *mp = (eng_partition *)p;
    return atomic_load(&mp->log_end_offset) > atomic_load(&mp->recovery_point);
}

void eng_partition_when_durable(eng_partition *p, int64_t upto, eng_durable_cb cb, void *ctx)
{
    pthread_mutex_lock(&p->flush_lock);
    if (p->flushed_offset >= upto) {
        pthread_mutex_unlock(&p->flush_lock);
        /* A flush started by another appender syncs
         * up to the log end offset, past the waiters it serves, but raises
         * the high watermark only to their offsets.  An append it covered
         * was then acknowledged here while its records stayed invisible
         * (HW below them) until some later commit.  They are on disk:
         * publish them before answering. */
        eng__set_hw(p, upto);
        cb(ctx, 0);
        return;
    }
    if (p->nwaiters == p->cap_waiters) {
        size_t cap = p->cap_waiters ? p->cap_waiters * 2 : 16;
        durable_waiter *nw = realloc(p->waiters, cap * sizeof *nw);
        if (!nw) {
            pthread_mutex_unlock(&p->flush_lock);
            /* No room to wait: flush here and answer. */
            int rc = eng__flush_upto(p, upto, true);
            if (!rc)
                eng__set_hw(p, upto);
            cb(ctx, rc);
            return;
        }
        p->waiters = nw;
        p->cap_waiters = cap;
    }
    p->waiters[p->nwaiters++] = (durable_waiter){.upto = upto, .cb = cb, .ctx = ctx};
    bool kick = !p->commit_queued;
    p->commit_queued = true;
    pthread_mutex_unlock(&p->flush_lock);
    if (!kick)
        return;
    if (p->ev.request_commit)
        p->ev.request_commit(p, p->ev.ctx);
    else
        eng_partition_commit(p);
}

void eng_partition_commit(eng_partition *p)
{
    for (;;) {
        pthread_mutex_lock(&p->flush_lock);
        p->commit_queued = false;
        if (p->nwaiters == 0) {
            pthread_mutex_unlock(&p->flush_lock);
            return;
        }
        int64_t target = 0;
        for (size_t i = 0; i < p->nwaiters; i++)
            if (p->waiters[i].upto > target)
                target = p->waiters[i].upto;
        p->commit_queued = true; /* this thread is on it: new waiters need no kick */
        pthread_mutex_unlock(&p->flush_lock);

        int rc = eng__flush_upto(p, target, true);
        int64_t done = rc ? INT64_MAX : target;
        if (!rc)
            eng__set_hw(p, target);

        /* Answer every waiter the flush covered (all of them on failure). */
        pthread_mutex_lock(&p->flush_lock);
        size_t n = 0, keep = 0;
        durable_waiter *fire = malloc(p->nwaiters * sizeof *fire);
        for (size_t i = 0; i < p->nwaiters; i++) {
            if (fire && p->waiters[i].upto <= done)
                fire[n++] = p->waiters[i];
            else
                p->waiters[keep++] = p->waiters[i];
        }
        p->nwaiters = keep;
        pthread_mutex_unlock(&p->flush_lock);
        for (size_t i = 0; i < n; i++)
            fire[i].cb(fire[i].ctx, rc);
        free(fire);
    }
}

int eng_partition_flush(eng_partition *p)
{
    int64_t leo = atomic_load(&p->log_end_offset);
    pthread_mutex_lock(&p->append_lock);
    p->unflushed_records = 0;
    pthread_mutex_unlock(&p->append_lock);
    int rc = eng__flush_upto(p, leo, false);
    if (!rc)
        eng__set_hw(p, leo);
    return rc;
}
