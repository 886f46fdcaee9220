/*
 * eng_partition_roll.c - a partition's segment roll: the active segment is
 * cut to its data and sealed, and a new one takes the appends.
 *
 * Everything that can fail for want of a resource (the new segment's files,
 * descriptors and maps; memory for the new segment view) is taken before
 * the old segment is sealed, so such a roll is refused with nothing
 * changed: the caller answers 507 and the next append rolls again.  Any
 * other failure (an fsync, EIO, the partition directory gone) takes the
 * log dir offline, whoever asked for the roll.
 */
#include "eng_partition_impl.h"

#include "eng_fault.h"
#include "eng_fs.h"
#include "eng_logger.h"
#include "eng_process.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* How often a partition's failing rolls are logged. */
#define ROLL_ERROR_LOG_MS 10000

/* Whether a flush may have moved, or be moving, the recovery point to
 * `end` without an fdatasync of the active .log after this point. */
static bool trim_sync_needed(eng_partition *p, int64_t end)
{
    pthread_mutex_lock(&p->flush_lock);
    bool needed = p->flushing || p->flushed_offset >= end;
    pthread_mutex_unlock(&p->flush_lock);
    return needed;
}

static int roll(eng_partition *p, const eng_config *cfg, eng_roll_reason why)
{
    eng_segview *v = p->view;
    eng_segment *active = v->segs[v->n - 1];
    int64_t new_base = atomic_load(&p->log_end_offset);
    if (eng_segment_size(active) == 0 && eng_segment_base(active) == new_base)
        return 0;
    /* Before the next segment exists: once the recovery point passes this
     * one, startup trusts it to its file's end, and a power loss that kept
     * the next segment but not this cut left preallocated zeros inside the
     * log for good (a sealed segment of segment.bytes whose tail is no
     * batches).  The cut needs its own fsync only when a flush may already
     * have moved the recovery point to this segment's end (flush.messages,
     * flush.ms, or one running now); otherwise the flush that moves it
     * there starts after the cut and fdatasyncs this .log first (the
     * flush-log job the roll schedules), as for a segment never
     * preallocated, and the appender that rolled does not wait for up to
     * segment.bytes of writeback. */
    bool preallocated = eng_segment_is_preallocated(active);
    int rc = eng_segment_trim_preallocated(active);
    if (!rc && preallocated && trim_sync_needed(p, new_base)) {
        rc = ENG_FAULT("roll.trim");
        if (!rc)
            rc = eng_segment_sync_data(active);
    }
    if (rc) {
        /* A failed fsync is final, even on a full disk. */
        if (p->dir_offline && !atomic_exchange(p->dir_offline, 1))
            ENG_ERROR("%s-%d: trimming segment %020lld before a roll failed (%s); taking the "
                      "log dir offline",
                      p->topic, p->id, (long long)eng_segment_base(active), eng_strerror(rc));
        return p->dir_offline ? ENG_EOFFLINE : rc;
    }
    /* Also before the next segment exists: the sealed segment's largest
     * timestamp survives a restart only as its time index's last entry.  A
     * disk too full for that entry (the index's first, for a segment of
     * under index.interval.bytes) fails the roll, as a disk too full for the
     * next segment does; sealing it without the entry left a segment that,
     * after a restart, reads by timestamp skipped and retention.ms judged
     * by its file's mtime. */
    if ((rc = eng_segment_write_final_time_entry(active)))
        return !eng_error_out_of_resources(rc) && eng__dir_offline(p) ? ENG_EOFFLINE : rc;
    /* The next view, before the next segment exists: made after the seal,
     * a failed allocation left a sealed segment last in the view, so the
     * next append that did not roll was refused as an invalid argument and
     * took the dir offline.  Its last slot holds the active segment until
     * the new one takes it. */
    eng_segview *nv = NULL;
    eng_segment **segs = ENG_FAULT("roll.view") ? NULL : malloc((v->n + 1) * sizeof *segs);
    if (segs) {
        memcpy(segs, v->segs, v->n * sizeof *segs);
        segs[v->n] = active;
        nv = eng__segview_new(segs, v->n + 1);
        free(segs);
    }
    if (!nv)
        return -ENOMEM;
    eng_segment_opts o;
    eng__segment_opts(p, cfg, true, &o);
    eng_segment *seg;
    rc = ENG_FAULT("roll.create");
    if (!rc)
        rc = eng_segment_create(p->dir, new_base, &o, &seg);
    if (rc) {
        eng__segview_release(nv);
        int64_t now = eng_mono_ms();
        if (p->roll_error_logged_ms && now - p->roll_error_logged_ms < ROLL_ERROR_LOG_MS) {
            p->roll_errors_unlogged++;
            return rc;
        }
        ENG_ERROR("%s-%d: cannot create segment %020lld: %s (%llu more failed since the last "
                  "report)%s",
                  p->topic, p->id, (long long)new_base, eng_strerror(rc),
                  (unsigned long long)p->roll_errors_unlogged,
                  rc == -ENOMEM ? "; " ENG_MAP_LIMIT_HINT : "");
        p->roll_error_logged_ms = now;
        p->roll_errors_unlogged = 0;
        return rc;
    }
    (void)ENG_FAULT("roll.after_create");
    rc = eng_segment_seal(active);
    if (rc)
        ENG_WARN("%s-%d: sealing segment %020lld: %s", p->topic, p->id,
                 (long long)eng_segment_base(active), eng_strerror(rc));
    /* Appends' fsyncs may have skipped the active segment's indexes
     * (eng__sync_from); once it is no longer last, the recovery point may
     * pass it and startup would trust its indexes, so they go to disk now.
     * Under the default flush policy no flush skips them and a roll costs
     * no fsync, as in Kafka. */
    int sync_rc = 0;
    if (atomic_exchange(&p->index_sync_owed, false)) {
        sync_rc = ENG_FAULT("roll.index_sync");
        if (!sync_rc)
            sync_rc = eng_segment_sync_indexes(active);
    }
    nv->segs[v->n] = seg; /* the view takes the create's reference */
    eng_segment_unref(active); /* the slot's */
    eng__segview_install(p, nv);
    /* Kafka's takeSnapshot at roll: a restart after a crash replays the
     * producers' batches from here on, not from the log's start.  Not for
     * a deleted topic: its dir path may already be a new topic's. */
    /* Unsynced, it may replace the stop's synced one of the same name. */
    p->snapshot_synced_at = -1;
    int snap_rc = atomic_load(&p->retired)
                      ? 0
                      : eng_producers_write_snapshot(&p->producers, p->dir, new_base, false);
    if (snap_rc)
        ENG_WARN("%s-%d: writing the producer snapshot at %020lld: %s", p->topic, p->id,
                 (long long)new_base, eng_strerror(snap_rc));
    else if (!atomic_load(&p->retired))
        atomic_store(&p->snap_written, new_base); /* synced by the flush-log job */
    ENG_DEBUG("%s-%d: rolled segment %020lld (reason %d)", p->topic, p->id, (long long)new_base,
              (int)why);
    if (p->ev.on_roll)
        p->ev.on_roll(p, active, new_base, p->ev.ctx);
    if (sync_rc) {
        /* The roll stands (the sealed segment must take no more appends),
         * but no append may be acknowledged past indexes that are not on
         * disk: the dir goes offline, even on a full disk. */
        if (p->dir_offline && !atomic_exchange(p->dir_offline, 1))
            ENG_ERROR("%s-%d: index fsync at roll failed (%s); taking the log dir offline",
                      p->topic, p->id, eng_strerror(sync_rc));
        return p->dir_offline ? ENG_EOFFLINE : sync_rc;
    }
    return 0;
}

int eng__partition_roll_locked(eng_partition *p, const eng_config *cfg, eng_roll_reason why)
{
    int rc = roll(p, cfg, why);
    /* Here rather than in each caller: retention's roll (everything
     * expired) failing with EIO left the dir online, where an append's
     * roll failing so took it offline. */
    if (rc && !eng_error_out_of_resources(rc) && p->dir_offline &&
        !atomic_exchange(p->dir_offline, 1))
        ENG_ERROR("%s-%d: segment roll failed (%s); taking the log dir offline", p->topic, p->id,
                  eng_strerror(rc));
    return rc;
}
