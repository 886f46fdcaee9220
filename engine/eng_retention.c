/*
 * eng_retention.c - segment deletion by log start offset, size and time, and
 * delete-records.
 *
 * Everything that decides runs under the partition's append lock, so the
 * segment set, log end offset and high watermark are one consistent picture;
 * renames happen after the lock is released (readers and appenders never
 * wait on file-system metadata).
 */
#include "eng_retention.h"

#include "eng_fault.h"
#include "eng_fs.h"
#include "eng_logger.h"
#include "eng_stats.h"
#include "eng_partition_impl.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void eng_retention_report_free(eng_retention_report *rep)
{
    if (!rep)
        return;
    free(rep->segments);
    rep->segments = NULL;
    rep->n = 0;
}

typedef struct plan {
    size_t count;             /* segments [0, count) go */
    eng_deleted_segment *why; /* one per segment of the view */
    uint32_t future_kept;
} plan;

/* May segment i go at all?  Only when wholly below the high watermark and
 * not the empty last segment. */
static bool deletable_at(eng_segview *v, size_t i, int64_t leo, int64_t hw)
{
    bool last = i + 1 == v->n;
    if (last && eng_segment_size(v->segs[i]) == 0)
        return false;
    int64_t upper = last ? leo : eng_segment_base(v->segs[i + 1]);
    return hw >= upper;
}

static void note(plan *pl, eng_segview *v, size_t i, int64_t leo, const char *rule,
                 const char *fmt, ...) __attribute__((format(printf, 6, 7)));

static void note(plan *pl, eng_segview *v, size_t i, int64_t leo, const char *rule,
                 const char *fmt, ...)
{
    eng_deleted_segment *d = &pl->why[i];
    d->base_offset = eng_segment_base(v->segs[i]);
    d->next_offset = i + 1 < v->n ? eng_segment_base(v->segs[i + 1]) : leo;
    d->size_bytes = eng_segment_size(v->segs[i]);
    d->rule = rule;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(d->reason, sizeof d->reason, fmt, ap);
    va_end(ap);
}

static void make_plan(eng_partition *p, eng_segview *v, const eng_config *cfg, int64_t now,
                      plan *pl)
{
    int64_t leo = atomic_load(&p->log_end_offset);
    int64_t hw = atomic_load(&p->high_watermark);
    int64_t lso = atomic_load(&p->log_start_offset);
    size_t i = 0;

    /* 1. log start offset breach */
    while (i + 1 < v->n && eng_segment_base(v->segs[i + 1]) <= lso && deletable_at(v, i, leo, hw)) {
        note(pl, v, i, leo, "log_start_offset",
             "log start offset %" PRId64 " breached: the next segment starts at %" PRId64, lso,
             eng_segment_base(v->segs[i + 1]));
        i++;
    }
    if (!(cfg->v[ENG_CFG_CLEANUP_POLICY].i & ENG_POLICY_DELETE)) {
        pl->count = i;
        return;
    }

    /* 2. retention.bytes */
    int64_t limit = cfg->v[ENG_CFG_RETENTION_BYTES].i;
    if (limit >= 0) {
        int64_t size = 0;
        for (size_t k = i; k < v->n; k++)
            size += (int64_t)eng_segment_size(v->segs[k]);
        if (size >= limit) {
            int64_t diff = size - limit;
            while (i < v->n && deletable_at(v, i, leo, hw) &&
                   diff - (int64_t)eng_segment_size(v->segs[i]) >= 0) {
                note(pl, v, i, leo, "retention.bytes",
                     "retention.bytes %" PRId64 " breached: partition size %" PRId64
                     " exceeds it by %" PRId64,
                     limit, size, diff);
                diff -= (int64_t)eng_segment_size(v->segs[i]);
                i++;
            }
        }
    }

    /* 3. retention.ms */
    int64_t keep_ms = cfg->v[ENG_CFG_RETENTION_MS].i;
    if (keep_ms >= 0) {
        while (i < v->n && deletable_at(v, i, leo, hw)) {
            eng_segment *seg = v->segs[i];
            int64_t ts = eng_segment_max_timestamp(seg);
            bool by_mtime = ts < 0;
            if (by_mtime)
                ts = eng_segment_mtime_ms(seg);
            /* Checked against the clock again: a record stamped since the
             * pass read it is young, not from the future (the warning went
             * off for batches stamped a millisecond after `now`). */
            if (ts > now && ts > eng_now_ms()) {
                ENG_WARN("%s-%d: segment %020" PRId64 " holds a timestamp in the future (%" PRId64
                         " > now %" PRId64 "); keeping it and everything after it",
                         p->topic, p->id, eng_segment_base(seg), ts, now);
                pl->future_kept++;
                break;
            }
            if (now - ts <= keep_ms)
                break;
            note(pl, v, i, leo, "retention.ms",
                 "retention.ms %" PRId64 " breached by %s %" PRId64 " (%" PRId64 " ms old)", keep_ms,
                 by_mtime ? "file mtime" : "largest timestamp", ts, now - ts);
            i++;
        }
    }
    pl->count = i;
}

/* Writes the partition's leader-epoch-checkpoint for a new log start: Kafka
 * truncates its epoch cache from the start the same way. */
static void write_epoch_checkpoint(eng_partition *p, int64_t lso)
{
    char path[4096], buf[64];
    if (eng_fs_join(path, sizeof path, p->dir, "leader-epoch-checkpoint"))
        return;
    int n = snprintf(buf, sizeof buf, "0\n1\n0 %" PRId64 "\n", lso);
    int rc = eng_fs_write_atomic(path, buf, (size_t)n);
    if (rc)
        ENG_WARN("%s-%d: writing leader-epoch-checkpoint: %s", p->topic, p->id, eng_strerror(rc));
}

/* Raises the log start offset under append_lock; logs the increment. */
static bool raise_lso(eng_partition *p, int64_t to, const char *why)
{
    int64_t cur = atomic_load(&p->log_start_offset);
    if (to <= cur)
        return false;
    atomic_store(&p->log_start_offset, to);
    ENG_INFO("%s-%d: incremented log start offset to %" PRId64 " (%s)", p->topic, p->id, to, why);
    return true;
}

void eng__partition_dispose(eng_partition *p, eng_segment *seg)
{
    int rc = 0;
    if (strcmp(eng_segment_suffix(seg), ".deleted")) {
        rc = ENG_FAULT("segment.dispose");
        if (!rc)
            rc = eng_segment_rename(seg, ".deleted");
    }
    if (rc) {
        /* No room for the new name's directory entry (a full disk or
         * quota; the kernel out of memory) changed nothing: the segment is
         * deleted under its own name.  Anything else (EIO) is the dir. */
        bool offline = p->dir_offline && !eng_error_out_of_resources(rc);
        ENG_ERROR("%s-%d: renaming segment %020" PRId64 " to .deleted: %s%s", p->topic, p->id,
                  eng_segment_base(seg), eng_strerror(rc),
                  offline ? "; taking the log dir offline" : "; it is deleted under its name");
        if (offline)
            atomic_store(p->dir_offline, 1);
    }
    eng_config cfg;
    eng_partition_get_config(p, &cfg);
    if (p->ev.on_delete) {
        p->ev.on_delete(p, seg, cfg.v[ENG_CFG_FILE_DELETE_DELAY_MS].i, p->ev.ctx);
    } else {
        eng_segment_unlink(seg);
        eng_segment_unref(seg);
    }
}

static int retention_locked(eng_partition *p, int64_t now_ms, bool dry_run,
                            eng_retention_report *rep);

int eng_partition_retention(eng_partition *p, int64_t now_ms, bool dry_run,
                            eng_retention_report *rep)
{
    memset(rep, 0, sizeof *rep);
    rep->dry_run = dry_run;
    rep->log_start_offset_before = rep->log_start_offset_after = atomic_load(&p->log_start_offset);
    /* A cleaning in progress owns the segment set; retention waits for the
     * next pass rather than block behind it. */
    if (eng__dir_offline(p))
        return ENG_EOFFLINE; /* its files are left as the failure found them */
    if (pthread_mutex_trylock(&p->maint_lock) != 0) {
        rep->busy = true;
        return 0;
    }
    int rc = retention_locked(p, now_ms, dry_run, rep);
    pthread_mutex_unlock(&p->maint_lock);
    return rc;
}

static int retention_locked(eng_partition *p, int64_t now_ms, bool dry_run,
                            eng_retention_report *rep)
{
    eng_config cfg;
    eng_partition_get_config(p, &cfg);
    pthread_mutex_lock(&p->append_lock);
    eng_segview *v = p->view;
    rep->log_start_offset_before = atomic_load(&p->log_start_offset);
    rep->log_start_offset_after = rep->log_start_offset_before;
    if (p->closed || atomic_load(&p->retired)) {
        pthread_mutex_unlock(&p->append_lock);
        return 0;
    }
    plan pl = {.why = calloc(v->n, sizeof *pl.why)};
    if (!pl.why) {
        pthread_mutex_unlock(&p->append_lock);
        return -ENOMEM;
    }
    make_plan(p, v, &cfg, now_ms, &pl);
    rep->future_kept = pl.future_kept;
    rep->n = pl.count;
    rep->segments = pl.why; /* the first count rows are filled */
    for (size_t i = 0; i < pl.count; i++)
        rep->bytes_freed += pl.why[i].size_bytes;
    if (pl.count == 0 || dry_run) {
        /* A dry run says what the real one would do, the roll included. */
        rep->rolled = dry_run && pl.count > 0 && pl.count == v->n;
        if (dry_run && pl.count > 0)
            rep->log_start_offset_after =
                pl.count < v->n ? eng_segment_base(v->segs[pl.count]) : atomic_load(&p->log_end_offset);
        if (rep->log_start_offset_after < rep->log_start_offset_before)
            rep->log_start_offset_after = rep->log_start_offset_before;
        pthread_mutex_unlock(&p->append_lock);
        return 0;
    }
    int rc = 0;
    if (pl.count == v->n) {
        /* Everything goes: roll first so the next append keeps its offset. */
        rc = eng__partition_roll_locked(p, &cfg, ENG_ROLL_NONE);
        bool no_room = eng_error_out_of_resources(rc);
        if (rc && (!no_room || pl.count == 1)) {
            pthread_mutex_unlock(&p->append_lock);
            return rc;
        }
        if (rc) {
            /* Out of room for the new segment's files (a full disk or
             * quota, no inodes, descriptors or memory maps left): the
             * others still go, since deleting them is what makes room, and
             * the active one waits for a pass that can roll.  Refusing the whole pass kept
             * every expired segment on a full disk for good. */
            ENG_WARN("%s-%d: cannot roll before deleting every segment (%s); keeping the active "
                     "one until a later retention pass",
                     p->topic, p->id, eng_strerror(rc));
            pl.count--;
            rep->n = pl.count;
            rep->bytes_freed -= pl.why[pl.count].size_bytes;
            rc = 0;
        } else {
            rep->rolled = true;
            v = p->view;
        }
    }
    eng_segment **gone = malloc(pl.count * sizeof *gone);
    eng_segview *nv = eng__segview_new(v->segs + pl.count, v->n - pl.count);
    if (!gone || !nv) {
        free(gone);
        eng__segview_release(nv);
        pthread_mutex_unlock(&p->append_lock);
        return -ENOMEM;
    }
    for (size_t i = 0; i < pl.count; i++) {
        gone[i] = v->segs[i];
        eng_segment_ref(gone[i]);
    }
    /* The log start offset moves before any file is touched. */
    int64_t new_start = eng_segment_base(nv->segs[0]);
    bool moved = raise_lso(p, new_start, pl.why[pl.count - 1].rule);
    rep->log_start_offset_after = atomic_load(&p->log_start_offset);
    eng__segview_install(p, nv);
    pthread_mutex_unlock(&p->append_lock);
    (void)ENG_FAULT("retention.after_start_offset");

    for (size_t i = 0; i < pl.count; i++) {
        const char *rule = pl.why[i].rule;
        eng_stats_retention(!strcmp(rule, "log_start_offset")  ? ENG_RULE_LOG_START_OFFSET
                            : !strcmp(rule, "retention.bytes") ? ENG_RULE_RETENTION_BYTES
                                                               : ENG_RULE_RETENTION_MS,
                            pl.why[i].size_bytes);
        ENG_INFO("%s-%d: deleting segment %020" PRId64 " (%" PRIu64 " bytes): %s", p->topic, p->id,
                 pl.why[i].base_offset, pl.why[i].size_bytes, pl.why[i].reason);
        eng__partition_dispose(p, gone[i]);
    }
    free(gone);
    eng_fs_sync_dir(p->dir);
    if (moved)
        write_epoch_checkpoint(p, rep->log_start_offset_after);
    return 0;
}

int eng_partition_delete_records(eng_partition *p, int64_t before_offset, int64_t *new_lso,
                                 eng_errdetail *err)
{
    pthread_mutex_lock(&p->append_lock);
    if (atomic_load(&p->retired)) {
        pthread_mutex_unlock(&p->append_lock);
        return eng_fail(err, ENG_ENOTOPIC, "topic '%s' was deleted", p->topic);
    }
    int64_t hw = atomic_load(&p->high_watermark);
    int64_t lso = atomic_load(&p->log_start_offset);
    int64_t target = before_offset == -1 ? hw : before_offset;
    if (before_offset < -1) {
        pthread_mutex_unlock(&p->append_lock);
        return eng_fail(err, ENG_EINVAL, "before_offset must be >= 0, or -1 for the high watermark");
    }
    if (target > hw) {
        pthread_mutex_unlock(&p->append_lock);
        eng_errdetail_bounds(err, lso, hw);
        return eng_fail(err, ENG_EOFFSET,
                        "cannot delete records before %" PRId64 ": the high watermark of %s-%d is %" PRId64,
                        before_offset, p->topic, p->id, hw);
    }
    bool moved = raise_lso(p, target, "delete-records");
    *new_lso = atomic_load(&p->log_start_offset);
    /* Still under the lock: eng_partition_retire must not let the
     * directory's path go to a new topic while this file is written. */
    if (moved)
        write_epoch_checkpoint(p, *new_lso);
    pthread_mutex_unlock(&p->append_lock);
    return 0;
}
