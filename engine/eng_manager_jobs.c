/*
 * eng_manager_jobs.c - the log manager's background jobs (DESIGN §4).
 *
 * Periodic: log-retention, log-flusher, recovery-point-checkpoint,
 * log-start-offset-checkpoint, producer-expiration, snapshot-usage
 * (eng_snapshot_usage.c).  One-shot: flush-log (queued by a roll: fsync
 * the sealed segment off the append path, then advance the recovery point to
 * the new segment's base) and delete-file (queued when a segment leaves the
 * log: unlink its .deleted files after file.delete.delay.ms).
 *
 * Partition events reach the manager through eng__manager_events; before
 * the jobs start (or after they stop) the same events are handled inline so
 * nothing is ever lost, only done sooner.
 */
#include "eng_manager_impl.h"

#include "eng_checkpoint.h"
#include "eng_fault.h"
#include "eng_fs.h"
#include "eng_logger.h"
#include "eng_partition_impl.h"
#include "eng_retention.h"
#include "eng_snapshot_impl.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/statvfs.h>

void eng_jobs_opts_default(eng_jobs_opts *o)
{
    o->background_threads = 10;
    o->initial_delay_ms = 30000;
    o->retention_check_interval_ms = 300000;
    o->flush_scheduler_interval_ms = INT64_MAX;
    o->recovery_checkpoint_interval_ms = 60000;
    o->start_offset_checkpoint_interval_ms = 60000;
    o->producer_expiration_ms = ENG_PRODUCER_EXPIRATION_MS;
    o->producer_expiration_check_interval_ms = 600000;
    o->snapshot_usage_check_interval_ms = 30000;
}

/* ---- one-shots ------------------------------------------------------------ */

typedef struct flush_arg {
    eng_partition *p;
    eng_segment *sealed;
    int64_t upto;
} flush_arg;

static void drop_flush_log(void *varg)
{
    flush_arg *a = varg;
    eng_segment_unref(a->sealed);
    eng_partition_unref(a->p);
    free(a);
}

static int job_flush_log(void *varg, char *note, size_t len)
{
    flush_arg *a = varg;
    int rc = eng_partition_flush_upto(a->p, a->upto);
    /* When an earlier flush had already passed the sealed segment, the
     * flush above skips it; its indexes' final trim still goes to disk, and
     * then they close their descriptors (a no-op when the flush synced them). */
    if (!rc)
        rc = eng_segment_sync_indexes(a->sealed);
    snprintf(note, len, "%s-%d up to %" PRId64, eng_partition_topic(a->p), eng_partition_id(a->p),
             a->upto);
    drop_flush_log(a);
    return rc;
}

static void on_roll(eng_partition *p, eng_segment *sealed, int64_t new_base, void *ctx)
{
    eng_manager *m = ctx;
    eng_scheduler *sched = atomic_load(&m->sched);
    if (!sched)
        return; /* no jobs: the sealed segment is flushed by flush.messages or at close */
    flush_arg *a = malloc(sizeof *a);
    if (!a)
        return; /* the next flush or the close covers it */
    eng_partition_ref(p);
    eng_segment_ref(sealed);
    a->p = p;
    a->sealed = sealed;
    a->upto = new_base;
    eng_scheduler_add_once(sched, "flush-log", 0, job_flush_log, a, drop_flush_log);
}

/* What a delete-file job needs: the segment, and its name for the job's
 * note (a copy: holding the partition would keep a deleted topic's
 * partition, its segments and their descriptors, for file.delete.delay.ms). */
typedef struct delete_arg {
    eng_segment *seg;
    char what[320]; /* "<topic>-<partition> segment <base>"; names are <= 249 bytes */
} delete_arg;

static void drop_delete_file(void *varg)
{
    /* The .deleted files stay; the next startup removes them. */
    delete_arg *a = varg;
    eng_segment_unref(a->seg);
    free(a);
}

/* The segment's files are unlinked by path, and a topic deleted and created
 * again within file.delete.delay.ms reuses the path: the new topic's
 * .deleted segment with the same base offset would lose its delay.  The
 * segment's gate, revoked when the topic is deleted, makes the unlink of a
 * deleted topic's segment a no-op (its directory is removed whole). */
static int job_delete_file(void *varg, char *note, size_t len)
{
    delete_arg *a = varg;
    snprintf(note, len, "%s", a->what);
    int rc = eng_segment_unlink(a->seg);
    drop_delete_file(a);
    return rc;
}

static bool of_deleted_topic(void *varg, void *ctx)
{
    (void)ctx;
    return eng_segment_retired(((delete_arg *)varg)->seg);
}

void eng__manager_release_deleted(eng_manager *m)
{
    eng_scheduler *sched = atomic_load(&m->sched);
    if (sched)
        eng_scheduler_expedite(sched, "delete-file", of_deleted_topic, NULL);
}

static void on_delete(eng_partition *p, eng_segment *seg, int64_t delay_ms, void *ctx)
{
    eng_manager *m = ctx;
    eng_scheduler *sched = atomic_load(&m->sched);
    delete_arg *a = NULL;
    if (sched && delay_ms > 0 && (a = malloc(sizeof *a))) {
        a->seg = seg;
        snprintf(a->what, sizeof a->what, "%s-%d segment %020" PRId64, eng_partition_topic(p),
                 eng_partition_id(p), eng_segment_base(seg));
        eng_scheduler_add_once(sched, "delete-file", delay_ms, job_delete_file, a,
                               drop_delete_file);
        return;
    }
    /* Now: no jobs, no delay, or no memory to wait with (the caller holds
     * the partition's maint_lock, so it is not being retired). */
    int rc = eng_segment_unlink(seg);
    if (rc)
        ENG_WARN("%s-%d: unlinking segment %020" PRId64 ": %s", eng_partition_topic(p),
                 eng_partition_id(p), eng_segment_base(seg), eng_strerror(rc));
    eng_segment_unref(seg);
}

static int job_group_commit(void *varg, char *note, size_t len)
{
    eng_partition *p = varg;
    snprintf(note, len, "%s-%d", eng_partition_topic(p), eng_partition_id(p));
    eng_partition_commit(p);
    eng_partition_unref(p);
    return 0;
}

/* Dropped at stop: commit inline so no appender is left waiting. */
static void drop_group_commit(void *varg)
{
    eng_partition_commit(varg);
    eng_partition_unref(varg);
}

static void request_commit(eng_partition *p, void *ctx)
{
    eng_manager *m = ctx;
    eng_scheduler *sched = atomic_load(&m->sched);
    if (!sched) {
        eng_partition_commit(p);
        return;
    }
    eng_partition_ref(p);
    eng_scheduler_add_once(sched, "group-commit", 0, job_group_commit, p, drop_group_commit);
}

static void on_hw(eng_partition *p, int64_t hw, void *ctx)
{
    eng_manager *m = ctx;
    if (m->on_hw)
        m->on_hw(p, hw, m->on_hw_ctx);
}

eng_partition_events eng__manager_events(eng_manager *m)
{
    return (eng_partition_events){.on_roll = on_roll, .on_hw = on_hw, .on_delete = on_delete,
                                  .request_commit = request_commit, .ctx = m};
}

/* ---- periodic ------------------------------------------------------------- */

static int job_retention(void *arg, char *note, size_t len)
{
    eng_manager *m = arg;
    eng_partition **v;
    size_t n;
    int rc = eng_manager_all_partitions(m, &v, &n);
    if (rc)
        return rc;
    uint64_t segments = 0, bytes = 0;
    int64_t now = eng_now_ms();
    int first_err = 0;
    for (size_t i = 0; i < n; i++) {
        eng_retention_report rep;
        int r = eng_partition_retention(v[i], now, false, &rep);
        if (r && !first_err)
            first_err = r;
        segments += rep.n;
        bytes += rep.bytes_freed;
        eng_retention_report_free(&rep);
    }
    eng_partitions_release(v, n);
    snprintf(note, len, "%zu partitions checked, %" PRIu64 " segments (%" PRIu64 " bytes) deleted",
             n, segments, bytes);
    return first_err;
}

static int job_flusher(void *arg, char *note, size_t len)
{
    eng_manager *m = arg;
    eng_partition **v;
    size_t n, flushed = 0;
    int rc = eng_manager_all_partitions(m, &v, &n);
    if (rc)
        return rc;
    int first_err = 0;
    for (size_t i = 0; i < n; i++) {
        eng_config cfg;
        eng_partition_get_config(v[i], &cfg);
        int64_t flush_ms = cfg.v[ENG_CFG_FLUSH_MS].i;
        if (flush_ms == INT64_MAX || !eng_partition_has_unflushed(v[i]) ||
            eng_partition_ms_since_flush(v[i]) < flush_ms)
            continue;
        int r = eng_partition_flush(v[i]);
        if (r && !first_err)
            first_err = r;
        flushed++;
    }
    eng_partitions_release(v, n);
    snprintf(note, len, "%zu of %zu partitions flushed (flush.ms)", flushed, n);
    return first_err;
}

static int job_producer_expiration(void *arg, char *note, size_t len)
{
    eng_manager *m = arg;
    eng_partition **v;
    size_t n, expired = 0;
    int rc = eng_manager_all_partitions(m, &v, &n);
    if (rc)
        return rc;
    int64_t now = eng_now_ms();
    for (size_t i = 0; i < n; i++)
        expired += eng_partition_expire_producers(v[i], now);
    eng_partitions_release(v, n);
    snprintf(note, len, "%zu idempotent producers expired in %zu partitions", expired, n);
    return 0;
}

static int job_recovery_checkpoint(void *arg, char *note, size_t len)
{
    snprintf(note, len, "recovery-point-offset-checkpoint");
    return eng_manager_checkpoint_recovery_points(arg);
}

static int job_start_checkpoint(void *arg, char *note, size_t len)
{
    snprintf(note, len, "log-start-offset-checkpoint");
    return eng_manager_checkpoint_start_offsets(arg);
}

/* Base offset of p's first segment (0 when it has none). */
static int64_t first_segment_base(eng_partition *p)
{
    eng_segview *v = eng__segview_acquire(p);
    int64_t base = v->n ? eng_segment_base(v->segs[0]) : 0;
    eng__segview_release(v);
    return base;
}

int eng_manager_write_checkpoint(eng_manager *m, const char *name, const eng_ckpt_entry *entries,
                                 size_t n)
{
    char path[PATH_MAX];
    int rc = eng_fs_join(path, sizeof path, m->dir, name);
    if (!rc)
        rc = eng_checkpoint_write(path, entries, n);
    /* Only a system call's error is the storage's: a domain code (a name
     * too long) says nothing about the disk. */
    bool io_error = rc < 0 && rc > -4096 && !eng_error_out_of_resources(rc);
    if (io_error && !atomic_exchange(&m->offline, 1))
        ENG_ERROR("writing %s failed (%s); taking the log dir offline", name, eng_strerror(rc));
    return rc;
}

/* Writes one offset checkpoint over every partition, using get(p).
 *
 * The listing and the write go under ckpt_lock together, so a topic
 * delete's rewrite (eng_manager_delete_topic), which waits for it, comes
 * after any older listing.  A job that listed the partitions just before the
 * delete and wrote after its rewrite would put the deleted partitions'
 * offsets back under their names; after a crash, a topic created again under
 * the name would load them (a log start offset past its records hides
 * them). */
int eng__manager_write_offsets(eng_manager *m, const char *name,
                               int64_t (*get)(const eng_partition *), bool only_above_first_base)
{
    eng_partition **v;
    size_t n;
    pthread_mutex_lock(&m->ckpt_lock);
    int rc = eng_manager_all_partitions(m, &v, &n);
    if (rc) {
        pthread_mutex_unlock(&m->ckpt_lock);
        return rc;
    }
    (void)ENG_FAULT("checkpoint.after_list");
    eng_ckpt_entry *e = calloc(n ? n : 1, sizeof *e);
    size_t k = 0;
    if (!e)
        rc = -ENOMEM;
    for (size_t i = 0; e && i < n; i++) {
        int64_t off = get(v[i]);
        /* This
         * compared with 0, so a log start offset that retention had moved to
         * the first segment's base was written; kafka-format.md §11.2 writes
         * only log start offsets above the first segment's base. */
        if (only_above_first_base && off <= first_segment_base(v[i]))
            continue;
        e[k].topic = (char *)eng_partition_topic(v[i]);
        e[k].partition = eng_partition_id(v[i]);
        e[k++].offset = off;
    }
    if (!rc)
        rc = eng_manager_write_checkpoint(m, name, e, k);
    pthread_mutex_unlock(&m->ckpt_lock);
    free(e);
    eng_partitions_release(v, n);
    return rc;
}

int eng_manager_checkpoint_recovery_points(eng_manager *m)
{
    return eng__manager_write_offsets(m, "recovery-point-offset-checkpoint",
                                      eng_partition_recovery_point, false);
}

int eng_manager_checkpoint_start_offsets(eng_manager *m)
{
    return eng__manager_write_offsets(m, "log-start-offset-checkpoint",
                                      eng_partition_log_start_offset, true);
}

int eng__manager_write_checkpoints(eng_manager *m)
{
    int rc = eng_manager_checkpoint_recovery_points(m);
    return rc ? rc : eng_manager_checkpoint_start_offsets(m);
}

int eng_manager_start_jobs(eng_manager *m)
{
    const eng_jobs_opts *o = &m->jobs_opts;
    eng_scheduler *s;
    int rc = eng_scheduler_new(o->background_threads, &s);
    if (rc)
        return rc;
    int64_t d = o->initial_delay_ms;
    if ((rc = eng_scheduler_add_periodic(s, "log-retention", d, o->retention_check_interval_ms,
                                         job_retention, m)) ||
        (rc = eng_scheduler_add_periodic(s, "log-flusher", d, o->flush_scheduler_interval_ms,
                                         job_flusher, m)) ||
        (rc = eng_scheduler_add_periodic(s, "recovery-point-checkpoint", d,
                                         o->recovery_checkpoint_interval_ms,
                                         job_recovery_checkpoint, m)) ||
        (rc = eng_scheduler_add_periodic(s, "log-start-offset-checkpoint", d,
                                         o->start_offset_checkpoint_interval_ms,
                                         job_start_checkpoint, m)) ||
        (rc = eng_scheduler_add_periodic(s, "producer-expiration", d,
                                         o->producer_expiration_check_interval_ms,
                                         job_producer_expiration, m)) ||
        /* At once, not after the initial delay: until its first walk ends,
         * listing the snapshots reads their files on the HTTP thread. */
        (rc = eng_scheduler_add_periodic(s, ENG_SNAPSHOT_USAGE_JOB, 0,
                                         o->snapshot_usage_check_interval_ms,
                                         eng__snapshot_usage_job, m)) ||
        (rc = eng_scheduler_start(s))) {
        eng_scheduler_free(s);
        return rc;
    }
    atomic_store(&m->sched, s);
    ENG_INFO("background jobs started on %u threads (first run in %" PRId64 " ms)",
             o->background_threads, d);
    return 0;
}

int eng_manager_jobs(eng_manager *m, eng_job_info **out, size_t *n)
{
    eng_scheduler *sched = atomic_load(&m->sched);
    if (!sched) {
        *out = NULL;
        *n = 0;
        return 0;
    }
    return eng_scheduler_jobs(sched, out, n);
}

int eng_manager_trigger_job(eng_manager *m, const char *name)
{
    eng_scheduler *sched = atomic_load(&m->sched);
    return sched ? eng_scheduler_trigger(sched, name) : ENG_ENOTFOUND;
}

int eng_manager_start_cleaner(eng_manager *m)
{
    return eng_cleaner_start(m, &m->cleaner_opts, &m->cleaner);
}

eng_cleaner *eng_manager_cleaner(eng_manager *m)
{
    return m->cleaner;
}

int eng_manager_disk_usage(const eng_manager *m, uint64_t *total_bytes, uint64_t *usable_bytes)
{
    struct statvfs vfs;
    if (statvfs(eng_manager_log_dir(m), &vfs) < 0)
        return -errno;
    *total_bytes = (uint64_t)vfs.f_blocks * vfs.f_frsize;
    *usable_bytes = (uint64_t)vfs.f_bavail * vfs.f_frsize;
    return 0;
}
