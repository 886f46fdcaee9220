/*
 * eng_manager.c - one data dir's lifecycle: locking it, removing deleted
 * topics' directories in the background, and closing it all down.
 *
 * Loading it at startup is in eng_manager_load.c; the topic table and its
 * administration are in eng_topics.c.
 */
#include "eng_manager_impl.h"
#include "eng_snapshot_impl.h"

#include "eng_fs.h"
#include "eng_logger.h"
#include "eng_parallel.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>


typedef struct removal {
    eng_manager *m;
    char path[];
} removal;

static void *remove_tree_thread(void *arg)
{
    removal *r = arg;
    eng_manager *m = r->m;
    int rc = eng_fs_remove_tree_until(r->path, &m->removals_stop);
    if (rc == ENG_ESHUTDOWN)
        ENG_INFO("stopped removing %s: the next start finishes it", r->path);
    else if (rc)
        ENG_WARN("removing %s: %s", r->path, eng_strerror(rc));
    else
        ENG_INFO("removed %s", r->path);
    free(r);
    /* Last: once the count is down, the manager may be freed under us. */
    pthread_mutex_lock(&m->removals_lock);
    m->removals--;
    pthread_cond_broadcast(&m->removals_done);
    pthread_mutex_unlock(&m->removals_lock);
    return NULL;
}

void eng__remove_in_background(eng_manager *m, const char *path)
{
    size_t len = strlen(path) + 1;
    removal *r = malloc(sizeof *r + len);
    if (!r)
        return; /* the next start removes it */
    r->m = m;
    memcpy(r->path, path, len);
    pthread_mutex_lock(&m->removals_lock);
    m->removals++;
    pthread_mutex_unlock(&m->removals_lock);
    pthread_t th;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    if (pthread_create(&th, &attr, remove_tree_thread, r) != 0)
        remove_tree_thread(r);
    pthread_attr_destroy(&attr);
}

/* Stops the removals still running (what is left is removed at the next
 * start) and waits for their threads to be done with m. */
static void stop_removals(eng_manager *m)
{
    atomic_store(&m->removals_stop, true);
    pthread_mutex_lock(&m->removals_lock);
    while (m->removals > 0)
        pthread_cond_wait(&m->removals_done, &m->removals_lock);
    pthread_mutex_unlock(&m->removals_lock);
}
static void manager_free(eng_manager *m)
{
    stop_removals(m);
    eng_cleaner_stop(m->cleaner);
    eng_scheduler_free(atomic_load(&m->sched));
    for (size_t i = 0; i < m->ntopics; i++)
        eng__topic_free(m->topics[i]);
    free(m->topics);
    for (size_t i = 0; i < m->nreserved; i++)
        free(m->reserved[i]);
    free(m->reserved);
    if (m->lock_fd >= 0)
        close(m->lock_fd); /* releases the flock */
    pthread_rwlock_destroy(&m->lock);
    pthread_mutex_destroy(&m->ckpt_lock);
    pthread_mutex_destroy(&m->meta_lock);
    pthread_mutex_destroy(&m->snap_lock);
    eng__snapshot_usage_free(m);
    pthread_mutex_destroy(&m->usage_lock);
    pthread_mutex_destroy(&m->removals_lock);
    pthread_cond_destroy(&m->removals_done);
    free(m->meta_dir);
    free(m->dir);
    free(m);
}

int eng_manager_new(const eng_manager_opts *o, eng_manager **out, eng_errdetail *err)
{
    eng_manager *m = calloc(1, sizeof *m);
    if (!m)
        return -ENOMEM;
    m->lock_fd = -1;
    pthread_rwlock_init(&m->lock, NULL);
    pthread_mutex_init(&m->ckpt_lock, NULL);
    pthread_mutex_init(&m->meta_lock, NULL);
    pthread_mutex_init(&m->snap_lock, NULL);
    pthread_mutex_init(&m->usage_lock, NULL);
    pthread_mutex_init(&m->removals_lock, NULL);
    pthread_cond_init(&m->removals_done, NULL);
    m->defaults = o->defaults;
    m->codec = o->codec;
    m->on_hw = o->on_hw;
    m->on_hw_ctx = o->on_hw_ctx;
    m->jobs_opts = o->jobs;
    m->recovery_threads = o->recovery_threads;
    if (o->cleaner)
        m->cleaner_opts = *o->cleaner;
    else
        eng_cleaner_opts_default(&m->cleaner_opts);
    char path[PATH_MAX];
    int rc = -ENOMEM;
    if (!(m->dir = strdup(o->log_dir)))
        goto fail;
    if ((rc = eng_fs_join(path, sizeof path, m->dir, "meta")) || !(m->meta_dir = strdup(path))) {
        rc = rc ? rc : -ENOMEM;
        goto fail;
    }
    if ((rc = eng_fs_mkdir_durable(m->dir)) || (rc = eng_fs_mkdir_durable(m->meta_dir))) {
        eng_fail(err, rc, "cannot create log dir %s: %s", m->dir, eng_strerror(rc));
        goto fail;
    }
    if ((rc = eng_fs_join(path, sizeof path, m->dir, ".lock")))
        goto fail;
    m->lock_fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (m->lock_fd < 0) {
        rc = -errno;
        eng_fail(err, rc, "cannot open %s: %s", path, eng_strerror(rc));
        goto fail;
    }
    if (flock(m->lock_fd, LOCK_EX | LOCK_NB) < 0) {
        rc = -errno;
        eng_fail(err, rc, "log dir %s is in use by another process (%s is locked)", m->dir, path);
        goto fail;
    }
    *out = m;
    return 0;
fail:
    manager_free(m);
    return rc;
}

void eng_manager_request_stop(eng_manager *m)
{
    atomic_store(&m->stop_requested, true);
}

void eng_manager_abandon(eng_manager *m)
{
    if (m)
        manager_free(m);
}

int eng_manager_open(const eng_manager_opts *o, eng_manager **out, eng_errdetail *err)
{
    eng_manager *m;
    int rc = eng_manager_new(o, &m, err);
    if (rc)
        return rc;
    if ((rc = eng_manager_load(m, err))) {
        manager_free(m);
        return rc;
    }
    *out = m;
    return 0;
}

int eng_manager_all_partitions(eng_manager *m, eng_partition ***out, size_t *n)
{
    pthread_rwlock_rdlock(&m->lock);
    size_t total = 0;
    for (size_t i = 0; i < m->ntopics; i++)
        total += (size_t)m->topics[i]->meta.partitions;
    eng_partition **v = calloc(total ? total : 1, sizeof *v);
    if (v) {
        size_t k = 0;
        for (size_t i = 0; i < m->ntopics; i++)
            for (int32_t p = 0; p < m->topics[i]->meta.partitions; p++) {
                v[k] = m->topics[i]->parts[p];
                eng_partition_ref(v[k++]);
            }
    }
    pthread_rwlock_unlock(&m->lock);
    if (!v)
        return -ENOMEM;
    *out = v;
    *n = total;
    return 0;
}

void eng_partitions_release(eng_partition **v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        eng_partition_unref(v[i]);
    free(v);
}

static int close_one(void *ctx, size_t i)
{
    eng_partition **parts = ctx;
    int rc = eng_partition_close(parts[i]);
    if (rc)
        ENG_ERROR("closing %s-%d: %s", eng_partition_topic(parts[i]), eng_partition_id(parts[i]),
                  eng_strerror(rc));
    return rc;
}

/* Closes every partition; false if any close failed.  Partitions written
 * since their last flush each wait for fsyncs of their own, and one after
 * another those waits added up (30 s for 2,000 partitions after a crash
 * recovery or a first start): on background.threads threads they overlap,
 * and the file system commits concurrent fsyncs together.  Caller holds
 * m->lock for writing. */
static bool close_partitions(eng_manager *m)
{
    size_t total = 0;
    for (size_t i = 0; i < m->ntopics; i++)
        total += (size_t)m->topics[i]->meta.partitions;
    eng_partition **parts = calloc(total ? total : 1, sizeof *parts);
    if (!parts) {
        /* No memory for the list: one after another, as they are. */
        bool ok = true;
        for (size_t i = 0; i < m->ntopics; i++)
            for (int32_t p = 0; p < m->topics[i]->meta.partitions; p++)
                if (close_one(m->topics[i]->parts, (size_t)p))
                    ok = false;
        return ok;
    }
    size_t k = 0;
    for (size_t i = 0; i < m->ntopics; i++)
        for (int32_t p = 0; p < m->topics[i]->meta.partitions; p++)
            parts[k++] = m->topics[i]->parts[p];
    int rc = eng_parallel_for(total, m->jobs_opts.background_threads, false, close_one, parts);
    free(parts);
    return rc == 0;
}

bool eng_manager_close(eng_manager *m)
{
    if (!m)
        return true;
    /* The cleaner stops first (an unfinished clean leaves only .cleaned
     * files, removed at the next start), then the jobs: running ones finish,
     * pending one-shots are dropped (flushes are covered by the close below,
     * .deleted files by the next startup). */
    /* Said to the jobs too: a snapshot-usage walk ends at its next
     * partition rather than holding the close for the rest of it. */
    atomic_store(&m->stop_requested, true);
    eng_cleaner_stop(m->cleaner);
    m->cleaner = NULL;
    /* Stopped, not freed: hooks fired by the closes below find it refusing
     * work (and do that work inline) rather than freed. */
    eng_scheduler_stop(atomic_load(&m->sched));
    bool ok = !atomic_load(&m->offline);
    pthread_rwlock_wrlock(&m->lock);
    if (!close_partitions(m))
        ok = false;
    pthread_rwlock_unlock(&m->lock);
    int rc = eng__manager_write_checkpoints(m);
    if (rc) {
        ok = false;
        ENG_ERROR("writing checkpoints: %s", eng_strerror(rc));
    }
    char path[PATH_MAX];
    if (ok && eng_fs_join(path, sizeof path, m->dir, ".kafka_cleanshutdown") == 0) {
        static const char marker[] = "{\"version\":0,\"brokerEpoch\":0}";
        rc = eng_fs_write_atomic(path, marker, sizeof marker - 1);
        if (rc) {
            ok = false;
            ENG_ERROR("writing the clean-shutdown marker: %s", eng_strerror(rc));
        }
    }
    manager_free(m);
    return ok;
}

void eng_manager_startup_report(const eng_manager *m, eng_startup_report *out)
{
    *out = m->report;
}

const eng_config_defaults *eng_manager_defaults(const eng_manager *m)
{
    return &m->defaults;
}

const char *eng_manager_log_dir(const eng_manager *m)
{
    return m->dir;
}

bool eng_manager_offline(const eng_manager *m)
{
    return atomic_load(&((eng_manager *)m)->offline) != 0;
}
