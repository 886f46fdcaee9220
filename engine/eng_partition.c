/*
 * eng_partition.c - a partition's lifecycle and append (a roll is in
 * eng_partition_roll.c).
 *
 * Append is two phases.  Outside any lock, the batches are checked the way a
 * Kafka broker's LogValidator checks them (sizes, CRC and framing for
 * producer-built batches, timestamps against the topic's limits, keys on
 * compacted topics) and LogAppendTime is applied.  Then, under append_lock,
 * offsets are assigned, the roll conditions checked and the bytes written:
 * a writable buffer takes its offsets in place and goes out with one pwrite;
 * a read-only one (eng_partition_append_readonly: a request body still in
 * libmicrohttpd's buffer) goes out as it is behind batch heads of its own,
 * with pwritev (one call for up to 256 batches), so it is not copied unless
 * a stamp or a codec changes CRC-covered bytes.  A batch refused in either
 * phase leaves no trace.
 *
 * Durability: when flush.messages is reached the appender waits for a flush
 * covering its records (eng_partition_flush.c).  Batches of idempotent
 * producers are checked against their sequences under the lock, and a
 * retry is answered with its first offsets (eng_producer.h).
 */
#include "eng_partition_impl.h"

#include "eng_compress.h"
#include "eng_endian.h"
#include "eng_fault.h"
#include "eng_fs.h"
#include "eng_logger.h"
#include "eng_process.h"
#include "eng_stats.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- segment views ---------------------------------------------------- */

eng_segview *eng__segview_new(eng_segment *const *segs, size_t n)
{
    eng_segview *v = malloc(sizeof *v + n * sizeof v->segs[0]);
    if (!v)
        return NULL;
    atomic_init(&v->refs, 1);
    v->n = n;
    for (size_t i = 0; i < n; i++) {
        v->segs[i] = segs[i];
        eng_segment_ref(segs[i]);
    }
    return v;
}

eng_segview *eng__segview_acquire(eng_partition *p)
{
    pthread_mutex_lock(&p->view_lock);
    eng_segview *v = p->view;
    atomic_fetch_add_explicit(&v->refs, 1, memory_order_relaxed);
    pthread_mutex_unlock(&p->view_lock);
    return v;
}

void eng__segview_release(eng_segview *v)
{
    if (!v || atomic_fetch_sub_explicit(&v->refs, 1, memory_order_acq_rel) != 1)
        return;
    for (size_t i = 0; i < v->n; i++)
        eng_segment_unref(v->segs[i]);
    free(v);
}

void eng__segview_install(eng_partition *p, eng_segview *v)
{
    pthread_mutex_lock(&p->view_lock);
    eng_segview *old = p->view;
    p->view = v;
    pthread_mutex_unlock(&p->view_lock);
    eng__segview_release(old);
}

ssize_t eng__segview_floor(const eng_segview *v, int64_t offset)
{
    ssize_t lo = 0, hi = (ssize_t)v->n - 1, ans = -1;
    while (lo <= hi) {
        ssize_t mid = lo + (hi - lo) / 2;
        if (eng_segment_base(v->segs[mid]) <= offset) {
            ans = mid;
            lo = mid + 1;
        } else {
            hi = mid - 1;
        }
    }
    return ans;
}

void eng__segment_opts(const eng_partition *p, const eng_config *c, bool active_prealloc,
                       eng_segment_opts *o)
{
    o->gate = p->gate;
    o->index_max_bytes = (uint32_t)c->v[ENG_CFG_SEGMENT_INDEX_BYTES].i;
    o->index_interval = (uint32_t)c->v[ENG_CFG_INDEX_INTERVAL_BYTES].i;
    o->preallocate_bytes =
        active_prealloc && c->v[ENG_CFG_PREALLOCATE].i ? (uint64_t)c->v[ENG_CFG_SEGMENT_BYTES].i : 0;
    int64_t jitter = c->v[ENG_CFG_SEGMENT_JITTER_MS].i, seg_ms = c->v[ENG_CFG_SEGMENT_MS].i;
    int64_t bound = jitter < seg_ms ? jitter : seg_ms;
    o->roll_jitter_ms = bound > 0 ? (int64_t)((uint64_t)random() % (uint64_t)bound) : 0;
}

/* ---- lifecycle ---------------------------------------------------------- */

int eng_partition_open(const eng_partition_params *pp, eng_partition **out, eng_load_stats *st)
{
    eng_load_stats local;
    if (!st)
        st = &local;
    memset(st, 0, sizeof *st);
    eng_partition *p = calloc(1, sizeof *p);
    if (!p)
        return -ENOMEM;
    int rc = -ENOMEM;
    if (!(p->topic = strdup(pp->topic)) || !(p->dir = strdup(pp->dir)) ||
        (rc = eng_segment_gate_new(&p->gate)))
        goto fail;
    p->id = pp->id;
    p->cfg = pp->config;
    p->dir_offline = pp->dir_offline;
    p->ev = pp->events;
    p->producer_expiration_ms =
        pp->producer_expiration_ms > 0 ? pp->producer_expiration_ms : ENG_PRODUCER_EXPIRATION_MS;
    atomic_init(&p->refs, 1);
    pthread_mutexattr_t ma;
    pthread_mutexattr_init(&ma);
    pthread_mutexattr_settype(&ma, PTHREAD_MUTEX_ADAPTIVE_NP);
    pthread_mutex_init(&p->append_lock, &ma);
    pthread_mutex_init(&p->view_lock, NULL);
    pthread_mutex_init(&p->cfg_lock, NULL);
    pthread_mutex_init(&p->maint_lock, NULL);
    pthread_mutex_init(&p->flush_lock, &ma);
    pthread_mutexattr_destroy(&ma);
    pthread_cond_init(&p->flush_cond, NULL);
    atomic_init(&p->last_flush_ms, eng_mono_ms());
    atomic_init(&p->index_sync_owed, false);
    atomic_init(&p->snap_written, -1);
    atomic_init(&p->snap_synced, -1);
    p->snapshot_synced_at = -1;
    if ((rc = eng__partition_load(p, pp, st)))
        goto fail_locks;
    p->flushed_offset = atomic_load(&p->recovery_point);
    *out = p;
    return 0;
fail_locks:
    eng__segview_release(p->view); /* set when the producers' rebuild failed */
    eng_producers_free(&p->producers);
    pthread_mutex_destroy(&p->append_lock);
    pthread_mutex_destroy(&p->view_lock);
    pthread_mutex_destroy(&p->cfg_lock);
    pthread_mutex_destroy(&p->maint_lock);
    pthread_mutex_destroy(&p->flush_lock);
    pthread_cond_destroy(&p->flush_cond);
fail:
    eng_segment_gate_unref(p->gate);
    free(p->topic);
    free(p->dir);
    free(p);
    return rc;
}

void eng_partition_ref(eng_partition *p)
{
    atomic_fetch_add_explicit(&p->refs, 1, memory_order_relaxed);
}

void eng_partition_unref(eng_partition *p)
{
    if (!p || atomic_fetch_sub_explicit(&p->refs, 1, memory_order_acq_rel) != 1)
        return;
    eng__segview_release(p->view);
    eng_producers_free(&p->producers);
    free(p->waiters);
    pthread_mutex_destroy(&p->append_lock);
    pthread_mutex_destroy(&p->view_lock);
    pthread_mutex_destroy(&p->cfg_lock);
    pthread_mutex_destroy(&p->maint_lock);
    pthread_mutex_destroy(&p->flush_lock);
    pthread_cond_destroy(&p->flush_cond);
    eng_segment_gate_unref(p->gate);
    free(p->topic);
    free(p->dir);
    free(p);
}


int eng_partition_close(eng_partition *p)
{
    pthread_mutex_lock(&p->append_lock);
    int rc = 0;
    if (!p->closed) {
        p->closed = true;
        eng_segment *active = p->view->segs[p->view->n - 1];
        rc = eng_segment_seal(active);
        /* Everything past the last flush, not just the active segment: a
         * rolled segment whose flush-log job the stop dropped, or segments
         * recovered at startup, are covered by the recovery point (and the
         * clean-shutdown marker) written after this. */
        pthread_mutex_lock(&p->flush_lock);
        int64_t from = p->flushed_offset;
        /* After a failed fsync nothing past the recovery point is vouched
         * for: it stays, and the next start recovers from it. */
        if (!rc && (p->fsync_failed || eng__dir_offline(p)))
            rc = ENG_EOFFLINE;
        pthread_mutex_unlock(&p->flush_lock);
        int64_t leo = atomic_load(&p->log_end_offset);
        if (!rc && !atomic_load(&p->retired) && p->snapshot_synced_at != leo) {
            /* Where the next start finds the producers without a scan (not
             * for a deleted topic: its dir path may be a new topic's).  One
             * already there, synced and current (a partition idle since a
             * clean start) is not written again: a tmp file, two fsyncs and
             * a rename for each of 2,000 idle partitions was most of a stop. */
            int snap_rc = eng_producers_write_snapshot(&p->producers, p->dir, leo, true);
            if (snap_rc)
                ENG_WARN("%s-%d: writing the producer snapshot at %020lld: %s", p->topic, p->id,
                         (long long)leo, eng_strerror(snap_rc));
            else
                p->snapshot_synced_at = leo;
        }
        /* Only what changed since its last sync: an idle partition's files
         * are left as the last stop synced them, without an fdatasync (on
         * ext4 one may flush the disk's write cache with nothing dirty). */
        if (!rc)
            rc = eng__sync_changed_from(p, from);
        /* A group commit failing while this sync ran leaves pages this one
         * found clean: the recovery point must not pass them either. */
        pthread_mutex_lock(&p->flush_lock);
        if (!rc && p->fsync_failed)
            rc = ENG_EOFFLINE;
        pthread_mutex_unlock(&p->flush_lock);
        if (!rc)
            atomic_store(&p->recovery_point, atomic_load(&p->log_end_offset));
    }
    pthread_mutex_unlock(&p->append_lock);
    return rc;
}

void eng_partition_retire(eng_partition *p)
{
    atomic_store(&p->retired, true); /* a cleaning in progress sees it and stops */
    pthread_mutex_lock(&p->maint_lock);
    pthread_mutex_lock(&p->append_lock);
    pthread_mutex_unlock(&p->append_lock);
    pthread_mutex_unlock(&p->maint_lock);
    /* Readers still holding its segments open indexes and read tails
     * lazily, by path, and delete-file jobs unlink by path: none of them
     * may reach the files of a topic created next under the name. */
    eng_segment_gate_revoke(p->gate);
    /* Parked readers wake now (past any offset they wait for) and learn
     * the topic is gone, rather than wait out their wait_ms or, for a
     * stream, forever. */
    if (p->ev.on_hw)
        p->ev.on_hw(p, INT64_MAX, p->ev.ctx);
}

void eng_partition_set_deleting(eng_partition *p, bool deleting)
{
    atomic_store(&p->deleting, deleting);
    pthread_mutex_lock(&p->append_lock);
    pthread_mutex_unlock(&p->append_lock);
}

bool eng_partition_retired(const eng_partition *p)
{
    return atomic_load(&((eng_partition *)p)->retired);
}

const char *eng_partition_topic(const eng_partition *p)
{
    return p->topic;
}

int32_t eng_partition_id(const eng_partition *p)
{
    return p->id;
}

const char *eng_partition_dir(const eng_partition *p)
{
    return p->dir;
}

void eng_partition_get_config(eng_partition *p, eng_config *out)
{
    pthread_mutex_lock(&p->cfg_lock);
    *out = p->cfg;
    pthread_mutex_unlock(&p->cfg_lock);
}

void eng_partition_set_config(eng_partition *p, const eng_config *c)
{
    pthread_mutex_lock(&p->cfg_lock);
    p->cfg = *c;
    pthread_mutex_unlock(&p->cfg_lock);
}

int64_t eng_partition_log_start_offset(const eng_partition *p)
{
    return atomic_load(&((eng_partition *)p)->log_start_offset);
}

int64_t eng_partition_high_watermark(const eng_partition *p)
{
    return atomic_load(&((eng_partition *)p)->high_watermark);
}

int64_t eng_partition_log_end_offset(const eng_partition *p)
{
    return atomic_load(&((eng_partition *)p)->log_end_offset);
}

int64_t eng_partition_recovery_point(const eng_partition *p)
{
    return atomic_load(&((eng_partition *)p)->recovery_point);
}

void eng__set_hw(eng_partition *p, int64_t hw)
{
    eng__raise_atomic(&p->high_watermark, hw);
    if (p->ev.on_hw)
        p->ev.on_hw(p, hw, p->ev.ctx);
}

/* Out of room (eng_error_out_of_resources: disk, quota, descriptors,
 * memory maps) the append is refused and the next one tries again: the dir
 * is not poisoned.  Running out of descriptors or maps can only fail a
 * segment's create, which leaves no file behind (eng_segment_create). */
static void take_offline(eng_partition *p, int rc, const char *what)
{
    if (eng_error_out_of_resources(rc))
        return;
    if (p->dir_offline && !atomic_exchange(p->dir_offline, 1))
        ENG_ERROR("%s-%d: %s failed (%s); taking the log dir offline", p->topic, p->id, what,
                  eng_strerror(rc));
}

/* What an append reports after an I/O failure: ENG_EOFFLINE once the dir is
 * offline (503 log_dir_offline, like every append after it) rather than the
 * raw errno (500 internal_error); a full disk stays -ENOSPC (507), and so do
 * -EDQUOT, -EMFILE and -ENFILE.  Found by
 * tests/crash/test_faults.c (segment.append.partial=eio answered 500). */
static int offline_code(const eng_partition *p, int rc)
{
    return !eng_error_out_of_resources(rc) && eng__dir_offline(p) ? ENG_EOFFLINE : rc;
}


/* ---- append ------------------------------------------------------------- */

static int64_t max_segment_ms(const eng_config *cfg)
{
    int64_t seg_ms = cfg->v[ENG_CFG_SEGMENT_MS].i;
    int64_t lag = cfg->v[ENG_CFG_MAX_COMPACTION_LAG_MS].i;
    if ((cfg->v[ENG_CFG_CLEANUP_POLICY].i & ENG_POLICY_COMPACT) && lag > 0 && lag < seg_ms)
        return lag;
    return seg_ms;
}

/* A retried batch: nothing is written, and the answer names the offsets it
 * got the first time, once they are acknowledged (Kafka's DUPLICATE path of
 * UnifiedLog.append).  With flush.messages the original may still wait for
 * its fsync. */
static int answer_duplicate(eng_partition *p, const eng_config *cfg,
                            const eng_producer_verdict *pv, const eng_append_opts *o,
                            eng_append_result *res, eng_errdetail *err)
{
    int64_t upto = pv->dup_last_offset + 1;
    if (atomic_load(&p->high_watermark) < upto) {
        if (o->async_durable) {
            res->durable_pending = true;
            res->durable_upto = upto;
        } else if (eng__flush_upto(p, upto, true)) {
            return eng_fail(err, ENG_EOFFLINE,
                            "the batch repeats one appended to %s-%d whose fsync failed, so the "
                            "log dir is offline",
                            p->topic, p->id);
        } else {
            eng__set_hw(p, upto);
        }
    }
    res->duplicate = true;
    res->base_offset = pv->dup_first_offset;
    res->last_offset = pv->dup_last_offset;
    res->timestamp_type = (int)cfg->v[ENG_CFG_MESSAGE_TIMESTAMP_TYPE].i;
    /* As the first answer said: under LogAppendTime the batch's timestamp
     * is its append time (Kafka answers a duplicate with it too). */
    res->log_append_time =
        res->timestamp_type == ENG_TS_LOG_APPEND_TIME ? pv->dup_timestamp : -1;
    res->log_start_offset = atomic_load(&p->log_start_offset);
    res->high_watermark = atomic_load(&p->high_watermark);
    res->batch_bytes = 0;
    return 0;
}

/* The LogAppendTime of the log's last batch, or 0 when the last batch is
 * not stamped (a CreateTime batch's timestamps are the producer's, so they
 * bound nothing) or cannot be read (append_lock held). */
static int64_t last_stamp_on_disk(eng_partition *p)
{
    for (size_t k = p->view->n; k-- > 0;) {
        eng_segment *seg = p->view->segs[k];
        uint64_t size = eng_segment_size(seg);
        if (size == 0)
            continue; /* a fresh active segment: the last batch is further back */
        eng_batch_pos b;
        if (eng_segment_find_batch(seg, eng_segment_next_offset(seg) - 1, size, &b))
            return 0;
        return b.header.attributes & ENG_ATTR_LOG_APPEND_TIME ? b.header.max_timestamp : 0;
    }
    return 0;
}

/* Both entry points: data is the caller's bytes, mut the same bytes when
 * the caller lets them be written (else NULL). */
static int append(eng_partition *p, const uint8_t *data, uint8_t *mut, size_t len,
                  const eng_append_opts *o, eng_append_result *res, eng_errdetail *err)
{
    eng_config cfg;
    eng_partition_get_config(p, &cfg);
    int64_t now = eng_now_ms();
    eng__append_plan plan;
    res->durable_pending = false;
    res->durable_upto = -1;
    res->duplicate = false;
    int rc = eng__plan_append(&cfg, data, mut, len, o->producer_batches, now, &plan, err);
    if (rc)
        return rc;
    if (plan.rebuilt.len) {
        /* The batches were re-encoded for the topic's codec, or stamped. */
        data = mut = plan.rebuilt.data;
        len = plan.rebuilt.len;
    }
    /* Writable bytes take their offsets in place and go out with one pwrite;
     * read-only ones go out behind heads of their own (eng__gather_*). */
    eng__append_gather g;
    if ((rc = eng__gather_init(&g, mut ? 0 : plan.batches))) {
        eng__gather_free(&g);
        eng__append_plan_free(&plan);
        return eng_fail(err, rc, "out of memory for an append of %zu batches", plan.batches);
    }

    pthread_mutex_lock(&p->append_lock);
    if (atomic_load(&p->retired)) {
        rc = eng_fail(err, ENG_ENOTOPIC, "topic '%s' was deleted", p->topic);
        goto unlock;
    }
    if (atomic_load(&p->deleting)) {
        rc = eng_fail(err, ENG_EBUSY, "topic '%s' is being deleted", p->topic);
        goto unlock;
    }
    if (p->closed) {
        rc = eng_fail(err, ENG_ESHUTDOWN, "partition %s-%d is closed", p->topic, p->id);
        goto unlock;
    }
    if (eng__dir_offline(p)) {
        rc = eng_fail(err, ENG_EOFFLINE, "the log dir holding %s-%d is offline", p->topic, p->id);
        goto unlock;
    }
    /* Before expected_offset: a producer's retry of an append that landed
     * finds the log end moved, and is answered with what it was given. */
    eng_producer_verdict pv = {0};
    if (plan.producer_batches && o->producer_batches &&
        (rc = eng_producers_check(&p->producers, data, len, &pv, err)))
        goto unlock;
    if (plan.producer_batches && !o->producer_batches &&
        (rc = eng_producers_reserve(&p->producers, data, len))) {
        rc = eng_fail(err, rc, "out of memory for the producers of %s-%d", p->topic, p->id);
        goto unlock;
    }
    if (pv.duplicate) {
        pthread_mutex_unlock(&p->append_lock);
        atomic_fetch_add_explicit(&p->duplicate_batches, pv.producer_batches,
                                  memory_order_relaxed);
        rc = answer_duplicate(p, &cfg, &pv, o, res, err);
        res->record_count = plan.records;
        eng__gather_free(&g);
        eng__append_plan_free(&plan);
        return rc;
    }
    int64_t leo = atomic_load(&p->log_end_offset);
    if (o->expected_offset >= 0 && o->expected_offset != leo) {
        rc = eng_fail(err, ENG_EEXPECTED, "expected_offset %lld does not match the log end offset %lld",
                      (long long)o->expected_offset, (long long)leo);
        eng_errdetail_bounds(err, o->expected_offset, leo);
        goto unlock;
    }
    /* A log whose end offset is near INT64_MAX
     * (a segment file named up there) overflowed `last + 1` below, which is
     * undefined behaviour; refuse the append instead of wrapping around. */
    if (plan.total_offsets > INT64_MAX - leo) {
        rc = eng_fail(err, ENG_EOFFSET, "%s-%d has no offsets left after %lld for %lld more",
                      p->topic, p->id, (long long)leo, (long long)plan.total_offsets);
        goto unlock;
    }
    int64_t last = leo + plan.total_offsets - 1;
    /* `now` was read and stamped before the lock, so this append may come
     * after one stamped later (see last_append_time_ms).  Restamping takes
     * a CRC pass, but only then: the common path costs a comparison. */
    bool log_append = cfg.v[ENG_CFG_MESSAGE_TIMESTAMP_TYPE].i == ENG_TS_LOG_APPEND_TIME;
    int64_t stamp = now;
    if (log_append && !p->append_time_seeded) {
        int64_t before = last_stamp_on_disk(p);
        if (before > p->last_append_time_ms)
            p->last_append_time_ms = before;
        p->append_time_seeded = true;
    }
    if (log_append && now < p->last_append_time_ms) {
        stamp = p->last_append_time_ms;
        eng__restamp_log_append(mut, len, stamp); /* LogAppendTime: never read-only */
        plan.max_ts = stamp;
    }
    eng_segment *active = p->view->segs[p->view->n - 1];
    eng_roll_reason why = eng_segment_should_roll(active, len, plan.max_ts, last,
                                                  cfg.v[ENG_CFG_SEGMENT_BYTES].i,
                                                  max_segment_ms(&cfg), now);
    if (why != ENG_ROLL_NONE) {
        if ((rc = eng__partition_roll_locked(p, &cfg, why))) {
            rc = eng_fail(err, offline_code(p, rc), "rolling a segment of %s-%d failed: %s",
                          p->topic, p->id, eng_strerror(rc));
            goto unlock;
        }
        active = p->view->segs[p->view->n - 1];
    }
    if (mut) {
        int64_t off_of_max = eng__assign_offsets(mut, len, leo, plan.max_ts_batch);
        rc = eng_segment_append(active, mut, len, last, plan.max_ts, off_of_max);
    } else {
        int64_t off_of_max = eng__gather_batches(&g, data, len, leo, plan.max_ts_batch);
        rc = eng_segment_appendv(active, g.iov, g.iovcnt, len, last, plan.max_ts, off_of_max);
    }
    if (rc) {
        take_offline(p, rc, "append");
        if (rc == ENG_EOFFLINE) /* the segment could not cut the refused bytes off */
            rc = eng_fail(err, rc, "writing to %s-%d failed and the log could not be cut back, "
                          "so its log dir is offline: a restart recovers it", p->topic, p->id);
        else
            rc = eng_fail(err, offline_code(p, rc), "writing to %s-%d failed: %s", p->topic,
                          p->id, eng_strerror(rc));
        goto unlock;
    }
    if (plan.producer_batches) {
        eng_producers_apply(&p->producers, data, len, leo);
        atomic_store_explicit(&p->producer_count, p->producers.n, memory_order_relaxed);
    }
    atomic_store(&p->log_end_offset, last + 1);
    if (log_append)
        p->last_append_time_ms = stamp;
    atomic_fetch_add_explicit(&p->appended_records, (uint64_t)plan.records, memory_order_relaxed);
    atomic_fetch_add_explicit(&p->appended_bytes, len, memory_order_relaxed);
    p->unflushed_records += plan.records;
    int64_t flush_msgs = cfg.v[ENG_CFG_FLUSH_MESSAGES].i;
    bool must_flush = p->unflushed_records >= flush_msgs;
    if (must_flush)
        p->unflushed_records = 0;
    pthread_mutex_unlock(&p->append_lock);

    if (must_flush && o->async_durable) {
        res->durable_pending = true;
        res->durable_upto = last + 1;
    } else if (must_flush) {
        rc = eng__flush_upto(p, last + 1, true);
        if (rc) {
            eng__gather_free(&g);
            eng__append_plan_free(&plan);
            return eng_fail(err, offline_code(p, rc),
                            "the append to %s-%d was written but its fsync failed, so the log "
                            "dir is offline: a restart recovers what reached the disk",
                            p->topic, p->id);
        }
    }
    /* With flush.messages=1, only what is on disk is acknowledged and visible;
     * otherwise the high watermark follows the log end offset. */
    if (!res->durable_pending)
        eng__set_hw(p, last + 1);

    res->base_offset = leo;
    res->last_offset = last;
    res->record_count = plan.records;
    res->timestamp_type = (int)cfg.v[ENG_CFG_MESSAGE_TIMESTAMP_TYPE].i;
    res->log_append_time = log_append ? stamp : -1;
    res->log_start_offset = atomic_load(&p->log_start_offset);
    res->high_watermark = atomic_load(&p->high_watermark);
    res->batch_bytes = len;
    eng__gather_free(&g);
    eng__append_plan_free(&plan);
    return 0;
unlock:
    pthread_mutex_unlock(&p->append_lock);
    eng__gather_free(&g);
    eng__append_plan_free(&plan);
    return rc;
}

int eng_partition_append(eng_partition *p, uint8_t *data, size_t len, const eng_append_opts *o,
                         eng_append_result *res, eng_errdetail *err)
{
    return append(p, data, data, len, o, res, err);
}

int eng_partition_append_readonly(eng_partition *p, const uint8_t *data, size_t len,
                                  const eng_append_opts *o, eng_append_result *res,
                                  eng_errdetail *err)
{
    return append(p, data, NULL, len, o, res, err);
}

int eng_partition_roll(eng_partition *p, int64_t *new_base)
{
    eng_config cfg;
    eng_partition_get_config(p, &cfg);
    pthread_mutex_lock(&p->append_lock);
    int rc = atomic_load(&p->retired) ? ENG_ENOTOPIC
             : p->closed                ? ENG_ESHUTDOWN
             : eng__dir_offline(p)        ? ENG_EOFFLINE
                                        : 0;
    if (!rc && (rc = eng__partition_roll_locked(p, &cfg, ENG_ROLL_NONE)))
        rc = offline_code(p, rc); /* the roll took the dir offline unless out of room */
    if (!rc)
        *new_base = eng_segment_base(p->view->segs[p->view->n - 1]);
    pthread_mutex_unlock(&p->append_lock);
    return rc;
}

void eng_partition_counters_get(const eng_partition *p, eng_partition_counters *out)
{
    eng_partition *mp = (eng_partition *)p;
    out->appended_records = atomic_load_explicit(&mp->appended_records, memory_order_relaxed);
    out->appended_bytes = atomic_load_explicit(&mp->appended_bytes, memory_order_relaxed);
    out->read_records = atomic_load_explicit(&mp->read_records, memory_order_relaxed);
    out->read_bytes = atomic_load_explicit(&mp->read_bytes, memory_order_relaxed);
    out->duplicate_batches = atomic_load_explicit(&mp->duplicate_batches, memory_order_relaxed);
    out->producers = atomic_load_explicit(&mp->producer_count, memory_order_relaxed);
}

void eng_partition_count_read(eng_partition *p, uint64_t records, uint64_t bytes)
{
    atomic_fetch_add_explicit(&p->read_records, records, memory_order_relaxed);
    atomic_fetch_add_explicit(&p->read_bytes, bytes, memory_order_relaxed);
}
