/*
 * eng_manager.c - topics and partitions of one data dir.
 *
 * Topics live in an array sorted by name under a rwlock: lookups (every
 * request) take it shared for a binary search and a partition reference;
 * create, delete and add-partitions take it exclusive.  Partition handles are
 * reference counted, so deleting a topic never frees a partition a request is
 * still reading.
 */
#include "eng_manager_impl.h"

#include "eng_checkpoint.h"
#include "eng_fs.h"
#include "eng_logger.h"
#include "eng_partition_impl.h" /* first segment base, for log-start-offset-checkpoint */

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#define META_MAX_BYTES (1u << 20)

static _Atomic uint32_t g_loaded, g_total;

void eng_manager_load_progress(uint32_t *loaded, uint32_t *total)
{
    *loaded = atomic_load(&g_loaded);
    *total = atomic_load(&g_total);
}

bool eng_topic_name_valid(const char *name)
{
    size_t n = strlen(name);
    if (n == 0 || n > ENG_TOPIC_NAME_MAX || !strcmp(name, ".") || !strcmp(name, ".."))
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = name[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '_' || c == '-'))
            return false;
    }
    return true;
}

static void topic_free(eng_topic *t)
{
    if (!t)
        return;
    for (int32_t i = 0; t->parts && i < t->meta.partitions; i++)
        eng_partition_unref(t->parts[i]);
    free(t->parts);
    eng_config_overrides_clear(&t->meta.overrides);
    free(t);
}

static ssize_t find_topic(const eng_manager *m, const char *name, size_t *insert_at)
{
    size_t lo = 0, hi = m->ntopics;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(m->topics[mid]->meta.name, name);
        if (c == 0)
            return (ssize_t)mid;
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (insert_at)
        *insert_at = lo;
    return -1;
}

static int insert_topic(eng_manager *m, eng_topic *t)
{
    size_t at = 0;
    find_topic(m, t->meta.name, &at);
    if (m->ntopics == m->cap) {
        size_t cap = m->cap ? m->cap * 2 : 16;
        eng_topic **nt = realloc(m->topics, cap * sizeof *nt);
        if (!nt)
            return -ENOMEM;
        m->topics = nt;
        m->cap = cap;
    }
    memmove(&m->topics[at + 1], &m->topics[at], (m->ntopics - at) * sizeof *m->topics);
    m->topics[at] = t;
    m->ntopics++;
    return 0;
}

static int meta_path(const eng_manager *m, const char *topic, char *buf, size_t len)
{
    if ((size_t)snprintf(buf, len, "%s/%s.json", m->meta_dir, topic) >= len)
        return ENG_EINVAL;
    return 0;
}

static int partition_dir(const eng_manager *m, const char *topic, int32_t id, char *buf, size_t len)
{
    if ((size_t)snprintf(buf, len, "%s/%s-%" PRId32, m->dir, topic, id) >= len)
        return ENG_EINVAL;
    return 0;
}

static int write_meta(eng_manager *m, const eng_topic_meta *meta)
{
    char path[PATH_MAX], *buf = NULL;
    size_t len = 0;
    int rc = meta_path(m, meta->name, path, sizeof path);
    if (!rc)
        rc = m->codec.encode(meta, &buf, &len, m->codec.ctx);
    if (!rc)
        rc = eng_fs_write_atomic(path, buf, len);
    free(buf);
    return rc;
}

static void new_topic_id(char out[23])
{
    unsigned char raw[16], b64[32];
    if (RAND_bytes(raw, sizeof raw) != 1)
        for (size_t i = 0; i < sizeof raw; i++)
            raw[i] = (unsigned char)random();
    EVP_EncodeBlock(b64, raw, sizeof raw); /* 24 chars, the last two '=' */
    for (int i = 0; i < 22; i++)
        out[i] = b64[i] == '+' ? '-' : b64[i] == '/' ? '_' : (char)b64[i];
    out[22] = 0;
}

/* Files Kafka keeps beside a partition's segments. */
static int write_partition_files(const char *pdir, const char *topic_id, int64_t first_offset)
{
    char path[PATH_MAX], buf[128];
    int rc = eng_fs_join(path, sizeof path, pdir, "leader-epoch-checkpoint");
    if (!rc && !eng_fs_exists(path)) {
        int n = snprintf(buf, sizeof buf, "0\n1\n0 %" PRId64 "\n", first_offset);
        rc = eng_fs_write_atomic(path, buf, (size_t)n);
    }
    if (!rc)
        rc = eng_fs_join(path, sizeof path, pdir, "partition.metadata");
    if (!rc && !eng_fs_exists(path)) {
        int n = snprintf(buf, sizeof buf, "version: 0\ntopic_id: %s", topic_id);
        rc = eng_fs_write_atomic(path, buf, (size_t)n);
    }
    return rc;
}

/* Removes the temporary files of an eng_fs_write_atomic that a crash
 * interrupted ("<name>.tmp", or ".tmp-XXXXXX" for long names) from dir.
 * Their rename never happened, so the file they were to replace is intact
 * and they are garbage; the lock is held, so no other writer owns them.
 * (Found by tests/crash: a kill -9 during a checkpoint write left
 * cleaner-offset-checkpoint.tmp behind for good.) */
static void remove_stale_tmp(const char *dir)
{
    DIR *dh = opendir(dir);
    if (!dh)
        return;
    struct dirent *e;
    char path[PATH_MAX];
    while ((e = readdir(dh))) {
        size_t n = strlen(e->d_name);
        if (!((n > 4 && strcmp(e->d_name + n - 4, ".tmp") == 0) || strncmp(e->d_name, ".tmp-", 5) == 0))
            continue;
        struct stat st;
        if (eng_fs_join(path, sizeof path, dir, e->d_name) == 0 && lstat(path, &st) == 0 &&
            S_ISREG(st.st_mode) && unlink(path) == 0)
            ENG_INFO("removed %s (left by an interrupted write)", path);
    }
    closedir(dh);
}

typedef struct load_ctx {
    bool clean;
    eng_ckpt recovery, start;
    int64_t last_progress_ms;
} load_ctx;

static int open_partition(eng_manager *m, eng_topic *t, int32_t id, const load_ctx *lc,
                          eng_partition **out)
{
    char pdir[PATH_MAX];
    int rc = partition_dir(m, t->meta.name, id, pdir, sizeof pdir);
    if (rc)
        return rc;
    bool existed = eng_fs_exists(pdir);
    if (existed && lc)
        remove_stale_tmp(pdir);
    eng_partition_params pp = {
        .topic = t->meta.name,
        .id = id,
        .dir = pdir,
        .config = t->cfg,
        .clean_shutdown = lc ? lc->clean : true,
        .recovery_point = lc ? eng_checkpoint_find(&lc->recovery, t->meta.name, id, 0) : 0,
        .log_start_offset = lc ? eng_checkpoint_find(&lc->start, t->meta.name, id, -1) : -1,
        .dir_offline = &m->offline,
        .events = eng__manager_events(m),
    };
    eng_load_stats st;
    rc = eng_partition_open(&pp, out, &st);
    if (!rc) {
        rc = write_partition_files(pdir, t->meta.topic_id, eng_partition_log_start_offset(*out));
        if (rc)
            eng_partition_unref(*out);
    }
    if (rc) {
        if (!existed)
            eng_fs_remove_tree(pdir);
        return rc;
    }
    if (!lc)
        return 0; /* created now, not loaded: not part of the startup report */
    m->report.partitions++;
    m->report.segments += st.segments;
    m->report.segments_recovered += st.segments_recovered;
    m->report.bytes_truncated += st.bytes_truncated;
    if (st.segments_recovered)
        ENG_INFO("%s-%d: loaded %u segments, recovered %u, truncated %" PRIu64 " bytes",
                 t->meta.name, id, st.segments, st.segments_recovered, st.bytes_truncated);
    return 0;
}

static void *remove_tree_thread(void *arg)
{
    char *path = arg;
    int rc = eng_fs_remove_tree(path);
    if (rc)
        ENG_WARN("removing %s: %s", path, eng_strerror(rc));
    else
        ENG_INFO("removed %s", path);
    free(path);
    return NULL;
}

/* Removes a directory on a detached thread; an interrupted removal is
 * finished at the next startup (the name still ends in -delete). */
static void remove_in_background(const char *path)
{
    char *copy = strdup(path);
    pthread_t th;
    pthread_attr_t attr;
    if (!copy)
        return;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    if (pthread_create(&th, &attr, remove_tree_thread, copy) != 0)
        remove_tree_thread(copy);
    pthread_attr_destroy(&attr);
}

static int load_topic(eng_manager *m, const char *file, const load_ctx *lc)
{
    char path[PATH_MAX], *buf;
    size_t len;
    int rc = eng_fs_join(path, sizeof path, m->meta_dir, file);
    if (rc || (rc = eng_fs_read_file(path, META_MAX_BYTES, &buf, &len)))
        return rc;
    eng_topic *t = calloc(1, sizeof *t);
    if (!t) {
        free(buf);
        return -ENOMEM;
    }
    rc = m->codec.decode(buf, len, &t->meta, m->codec.ctx);
    free(buf);
    if (rc || !eng_topic_name_valid(t->meta.name) || t->meta.partitions <= 0) {
        ENG_ERROR("%s: unreadable topic metadata; topic not loaded", path);
        topic_free(t);
        return 0;
    }
    eng_errdetail err = {0};
    if (eng_config_resolve(&m->defaults, &t->meta.overrides, &t->cfg, &err)) {
        ENG_WARN("topic %s: %s; using broker defaults", t->meta.name, err.message);
        t->cfg = m->defaults.cfg;
    }
    t->parts = calloc((size_t)t->meta.partitions, sizeof *t->parts);
    if (!t->parts) {
        topic_free(t);
        return -ENOMEM;
    }
    atomic_fetch_add(&g_total, (uint32_t)t->meta.partitions);
    for (int32_t i = 0; i < t->meta.partitions; i++) {
        int64_t t0 = eng_mono_ms();
        if ((rc = open_partition(m, t, i, lc, &t->parts[i]))) {
            ENG_ERROR("topic %s partition %d failed to load: %s", t->meta.name, i, eng_strerror(rc));
            topic_free(t);
            return rc;
        }
        uint32_t loaded = atomic_fetch_add(&g_loaded, 1) + 1;
        int64_t took = eng_mono_ms() - t0;
        if (took >= 1000)
            ENG_INFO("%s-%d loaded in %lld ms", t->meta.name, i, (long long)took);
        /* Long loads report progress every couple of seconds. */
        if (eng_mono_ms() - lc->last_progress_ms >= 2000) {
            ((load_ctx *)lc)->last_progress_ms = eng_mono_ms();
            ENG_INFO("loading: %u of %u partitions so far", loaded, atomic_load(&g_total));
        }
    }
    m->report.topics++;
    return insert_topic(m, t);
}

static void read_checkpoint(const char *dir, const char *name, eng_ckpt *out, bool *trusted)
{
    char path[PATH_MAX];
    memset(out, 0, sizeof *out);
    if (eng_fs_join(path, sizeof path, dir, name))
        return;
    int rc = eng_checkpoint_read(path, out);
    if (rc && rc != -ENOENT) {
        ENG_WARN("%s does not parse (%s); ignoring it", path, eng_strerror(rc));
        if (trusted)
            *trusted = false;
    }
}

static int load_all(eng_manager *m, bool clean)
{
    load_ctx lc = {.clean = clean, .last_progress_ms = eng_mono_ms()};
    remove_stale_tmp(m->dir);
    remove_stale_tmp(m->meta_dir);
    bool recovery_ok = true;
    read_checkpoint(m->dir, "recovery-point-offset-checkpoint", &lc.recovery, &recovery_ok);
    read_checkpoint(m->dir, "log-start-offset-checkpoint", &lc.start, NULL);
    if (!recovery_ok)
        lc.clean = false; /* without a trustworthy recovery point, recover everything */
    int rc = 0;
    DIR *dh = opendir(m->meta_dir);
    if (!dh)
        rc = -errno;
    struct dirent *e;
    while (!rc && (e = readdir(dh))) {
        size_t n = strlen(e->d_name);
        if (n > 5 && strcmp(e->d_name + n - 5, ".json") == 0)
            rc = load_topic(m, e->d_name, &lc);
    }
    if (dh)
        closedir(dh);
    eng_checkpoint_free(&lc.recovery);
    eng_checkpoint_free(&lc.start);
    if (rc)
        return rc;
    /* Deleted topics whose removal a stop interrupted. */
    if ((dh = opendir(m->dir))) {
        char path[PATH_MAX];
        while ((e = readdir(dh))) {
            size_t n = strlen(e->d_name);
            if (n > 7 && strcmp(e->d_name + n - 7, "-delete") == 0 &&
                eng_fs_join(path, sizeof path, m->dir, e->d_name) == 0)
                remove_in_background(path);
        }
        closedir(dh);
    }
    return 0;
}

static void manager_free(eng_manager *m)
{
    eng_cleaner_stop(m->cleaner);
    eng_scheduler_free(atomic_load(&m->sched));
    for (size_t i = 0; i < m->ntopics; i++)
        topic_free(m->topics[i]);
    free(m->topics);
    if (m->lock_fd >= 0)
        close(m->lock_fd); /* releases the flock */
    pthread_rwlock_destroy(&m->lock);
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
    m->defaults = o->defaults;
    m->codec = o->codec;
    m->on_hw = o->on_hw;
    m->on_hw_ctx = o->on_hw_ctx;
    m->jobs_opts = o->jobs;
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
    if ((rc = eng_fs_mkdir(m->dir)) || (rc = eng_fs_mkdir(m->meta_dir))) {
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

int eng_manager_load(eng_manager *m, eng_errdetail *err)
{
    int64_t t0 = eng_mono_ms();
    char path[PATH_MAX];
    /* The marker is consumed before loading: a crash while loading is unclean. */
    int rc = eng_fs_join(path, sizeof path, m->dir, ".kafka_cleanshutdown");
    if (rc)
        return rc;
    m->report.clean_shutdown = eng_fs_exists(path);
    if (m->report.clean_shutdown && (unlink(path) < 0 || (rc = eng_fs_sync_dir(m->dir)))) {
        rc = rc ? rc : -errno;
        return eng_fail(err, rc, "cannot remove %s: %s", path, eng_strerror(rc));
    }
    atomic_store(&g_loaded, 0);
    atomic_store(&g_total, 0);
    if ((rc = load_all(m, m->report.clean_shutdown)))
        return eng_fail(err, rc, "loading %s failed: %s", m->dir, eng_strerror(rc));
    m->report.duration_ms = eng_mono_ms() - t0;
    m->report.first_start = m->report.topics == 0 && !m->report.clean_shutdown;
    ENG_INFO("loaded %u topics, %u partitions from %s in %lld ms (%s shutdown, %u segments "
             "recovered, %" PRIu64 " bytes truncated)",
             m->report.topics, m->report.partitions, m->dir, (long long)m->report.duration_ms,
             m->report.clean_shutdown ? "clean" : "unclean", m->report.segments_recovered,
             m->report.bytes_truncated);
    return 0;
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

void eng_manager_close(eng_manager *m)
{
    if (!m)
        return;
    /* The cleaner stops first (an unfinished clean leaves only .cleaned
     * files, removed at the next start), then the jobs: running ones finish,
     * pending one-shots are dropped (flushes are covered by the close below,
     * .deleted files by the next startup). */
    eng_cleaner_stop(m->cleaner);
    m->cleaner = NULL;
    /* Stopped, not freed: hooks fired by the closes below find it refusing
     * work (and do that work inline) rather than freed. */
    eng_scheduler_stop(atomic_load(&m->sched));
    bool ok = !atomic_load(&m->offline);
    pthread_rwlock_wrlock(&m->lock);
    for (size_t i = 0; i < m->ntopics; i++)
        for (int32_t p = 0; p < m->topics[i]->meta.partitions; p++) {
            int rc = eng_partition_close(m->topics[i]->parts[p]);
            if (rc) {
                ok = false;
                ENG_ERROR("closing %s-%d: %s", m->topics[i]->meta.name, p, eng_strerror(rc));
            }
        }
    pthread_rwlock_unlock(&m->lock);
    int rc = eng__manager_write_offsets(m, "recovery-point-offset-checkpoint", eng_partition_recovery_point,
                           false);
    if (!rc)
        rc = eng__manager_write_offsets(m, "log-start-offset-checkpoint", eng_partition_log_start_offset, true);
    if (rc) {
        ok = false;
        ENG_ERROR("writing checkpoints: %s", eng_strerror(rc));
    }
    char path[PATH_MAX];
    if (ok && eng_fs_join(path, sizeof path, m->dir, ".kafka_cleanshutdown") == 0) {
        static const char marker[] = "{\"version\":0,\"brokerEpoch\":0}";
        rc = eng_fs_write_atomic(path, marker, sizeof marker - 1);
        if (rc)
            ENG_ERROR("writing the clean-shutdown marker: %s", eng_strerror(rc));
    }
    manager_free(m);
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

static int no_topic(eng_errdetail *err, const char *name)
{
    return eng_fail(err, ENG_ENOTOPIC, "topic '%.200s' does not exist", name);
}

int eng_manager_create_topic(eng_manager *m, const char *name, int32_t partitions,
                             const char *const *keys, const char *const *values, size_t n,
                             eng_errdetail *err)
{
    if (!eng_topic_name_valid(name))
        return eng_fail(err, ENG_ETOPICNAME,
                        "invalid topic name: use 1 to 249 of [A-Za-z0-9._-], not '.' or '..'");
    if (partitions <= 0 || partitions > 100000) {
        eng_errdetail_key(err, "partitions");
        return eng_fail(err, ENG_EINVAL, "partitions must be between 1 and 100000");
    }
    eng_topic *t = calloc(1, sizeof *t);
    if (!t)
        return -ENOMEM;
    int rc = 0;
    for (size_t i = 0; i < n && !rc; i++)
        rc = eng_config_overrides_set(&t->meta.overrides, keys[i], values[i], err);
    if (!rc)
        rc = eng_config_resolve(&m->defaults, &t->meta.overrides, &t->cfg, err);
    if (rc) {
        topic_free(t);
        return rc;
    }
    snprintf(t->meta.name, sizeof t->meta.name, "%s", name);
    t->meta.partitions = partitions;
    t->meta.created_ms = eng_now_ms();
    new_topic_id(t->meta.topic_id);
    if (!(t->parts = calloc((size_t)partitions, sizeof *t->parts))) {
        topic_free(t);
        return -ENOMEM;
    }
    pthread_rwlock_wrlock(&m->lock);
    char path[PATH_MAX];
    if (find_topic(m, name, NULL) >= 0) {
        rc = eng_fail(err, ENG_ETOPICEXISTS, "topic '%s' already exists", name);
        goto unlock;
    }
    if ((rc = write_meta(m, &t->meta))) {
        eng_fail(err, rc, "writing metadata of topic '%s': %s", name, eng_strerror(rc));
        goto unlock;
    }
    int32_t opened = 0;
    while (opened < partitions && !(rc = open_partition(m, t, opened, NULL, &t->parts[opened])))
        opened++;
    if (rc) {
        /* Undo: no metadata, no partition directory, no reference. */
        eng_fail(err, rc, "creating partitions of topic '%s': %s", name, eng_strerror(rc));
        t->meta.partitions = opened;
        for (int32_t i = 0; i < opened; i++)
            if (!partition_dir(m, name, i, path, sizeof path))
                eng_fs_remove_tree(path);
        if (!meta_path(m, name, path, sizeof path))
            unlink(path);
        goto unlock;
    }
    if ((rc = insert_topic(m, t)))
        goto unlock;
    t = NULL;
    ENG_INFO("created topic %s with %d partitions", name, partitions);
unlock:
    pthread_rwlock_unlock(&m->lock);
    topic_free(t);
    return rc;
}

int eng_manager_delete_topic(eng_manager *m, const char *name, eng_errdetail *err)
{
    pthread_rwlock_wrlock(&m->lock);
    ssize_t i = find_topic(m, name, NULL);
    if (i < 0) {
        pthread_rwlock_unlock(&m->lock);
        return no_topic(err, name);
    }
    eng_topic *t = m->topics[i];
    char path[PATH_MAX], to[PATH_MAX + 64];
    int rc = meta_path(m, name, path, sizeof path);
    if (!rc && unlink(path) < 0)
        rc = -errno;
    if (!rc)
        rc = eng_fs_sync_dir(m->meta_dir);
    if (rc) {
        pthread_rwlock_unlock(&m->lock);
        return eng_fail(err, rc, "removing metadata of topic '%s': %s", name, eng_strerror(rc));
    }
    memmove(&m->topics[i], &m->topics[i + 1], (m->ntopics - (size_t)i - 1) * sizeof *m->topics);
    m->ntopics--;
    eng_cleaner *cleaner = m->cleaner;
    pthread_rwlock_unlock(&m->lock);
    if (cleaner)
        eng_cleaner_forget(cleaner, name);
    unsigned char raw[16];
    char uuid[33];
    if (RAND_bytes(raw, sizeof raw) != 1)
        for (size_t k = 0; k < sizeof raw; k++)
            raw[k] = (unsigned char)random();
    for (size_t k = 0; k < sizeof raw; k++)
        snprintf(uuid + 2 * k, 3, "%02x", raw[k]);
    for (int32_t p = 0; p < t->meta.partitions; p++) {
        if (partition_dir(m, name, p, path, sizeof path))
            continue;
        /* Kafka's name for a partition pending deletion: <topic>-<p>.<uuid>-delete,
         * with the topic cut so the name fits in 255 bytes, as Kafka's
         * logDirNameWithSuffixCappedLength does (else a long topic's rename
         * fails and its data would reappear when the name is reused). */
        char suffix[64];
        int slen = snprintf(suffix, sizeof suffix, "-%d.%s-delete", (int)p, uuid);
        snprintf(to, sizeof to, "%s/%.*s%s", m->dir, 255 - slen, name, suffix);
        if (rename(path, to) < 0) {
            ENG_WARN("renaming %s for deletion: %s", path, strerror(errno));
            continue;
        }
        remove_in_background(to);
    }
    eng_fs_sync_dir(m->dir);
    topic_free(t);
    ENG_INFO("deleted topic %s", name);
    return 0;
}

int eng_manager_add_partitions(eng_manager *m, const char *name, int32_t total, eng_errdetail *err)
{
    pthread_rwlock_wrlock(&m->lock);
    ssize_t i = find_topic(m, name, NULL);
    int rc = 0;
    if (i < 0) {
        rc = no_topic(err, name);
        goto unlock;
    }
    eng_topic *t = m->topics[i];
    if (total < t->meta.partitions || total > 100000) {
        eng_errdetail_key(err, "partitions");
        rc = eng_fail(err, ENG_EINVAL, "topic '%s' has %d partitions; it can grow but never shrink",
                      name, t->meta.partitions);
        goto unlock;
    }
    if (total == t->meta.partitions)
        goto unlock;
    eng_partition **parts = realloc(t->parts, (size_t)total * sizeof *parts);
    if (!parts) {
        rc = -ENOMEM;
        goto unlock;
    }
    t->parts = parts;
    int32_t old = t->meta.partitions;
    int32_t opened = old;
    while (opened < total && !(rc = open_partition(m, t, opened, NULL, &t->parts[opened])))
        opened++;
    if (!rc) {
        t->meta.partitions = total;
        if ((rc = write_meta(m, &t->meta)))
            t->meta.partitions = old;
    }
    if (rc) {
        eng_fail(err, rc, "adding partitions to '%s': %s", name, eng_strerror(rc));
        char path[PATH_MAX];
        for (int32_t p = old; p < opened; p++) {
            eng_partition_unref(t->parts[p]);
            if (!partition_dir(m, name, p, path, sizeof path))
                eng_fs_remove_tree(path);
        }
    }
unlock:
    pthread_rwlock_unlock(&m->lock);
    return rc;
}

void eng_strv_free(char **v, size_t n)
{
    for (size_t i = 0; v && i < n; i++)
        free(v[i]);
    free(v);
}

int eng_manager_list_topics(eng_manager *m, char ***names, size_t *n)
{
    pthread_rwlock_rdlock(&m->lock);
    char **v = calloc(m->ntopics ? m->ntopics : 1, sizeof *v);
    int rc = v ? 0 : -ENOMEM;
    for (size_t i = 0; !rc && i < m->ntopics; i++)
        if (!(v[i] = strdup(m->topics[i]->meta.name)))
            rc = -ENOMEM;
    size_t count = m->ntopics;
    pthread_rwlock_unlock(&m->lock);
    if (rc) {
        eng_strv_free(v, count);
        return rc;
    }
    *names = v;
    *n = count;
    return 0;
}

void eng_topic_desc_clear(eng_topic_desc *d)
{
    eng_config_overrides_clear(&d->meta.overrides);
}

int eng_manager_describe_topic(eng_manager *m, const char *name, eng_topic_desc *out)
{
    pthread_rwlock_rdlock(&m->lock);
    ssize_t i = find_topic(m, name, NULL);
    int rc = ENG_ENOTOPIC;
    if (i >= 0) {
        eng_topic *t = m->topics[i];
        out->meta = t->meta;
        out->config = t->cfg;
        rc = eng_config_overrides_copy(&out->meta.overrides, &t->meta.overrides);
    }
    pthread_rwlock_unlock(&m->lock);
    return rc;
}

int eng_manager_set_topic_overrides(eng_manager *m, const char *name,
                                    const eng_config_overrides *ov, eng_errdetail *err)
{
    eng_config cfg;
    int rc = eng_config_resolve(&m->defaults, ov, &cfg, err);
    if (rc)
        return rc;
    pthread_rwlock_wrlock(&m->lock);
    ssize_t i = find_topic(m, name, NULL);
    if (i < 0) {
        pthread_rwlock_unlock(&m->lock);
        return no_topic(err, name);
    }
    eng_topic *t = m->topics[i];
    eng_topic_meta updated = t->meta;
    if ((rc = eng_config_overrides_copy(&updated.overrides, ov)))
        goto unlock;
    if ((rc = write_meta(m, &updated))) {
        eng_config_overrides_clear(&updated.overrides);
        eng_fail(err, rc, "writing metadata of topic '%s': %s", name, eng_strerror(rc));
        goto unlock;
    }
    eng_config_overrides_clear(&t->meta.overrides);
    t->meta.overrides = updated.overrides;
    t->cfg = cfg;
    for (int32_t p = 0; p < t->meta.partitions; p++)
        eng_partition_set_config(t->parts[p], &cfg);
unlock:
    pthread_rwlock_unlock(&m->lock);
    return rc;
}

int eng_manager_partition(eng_manager *m, const char *topic, int32_t id, eng_partition **out,
                          eng_errdetail *err)
{
    pthread_rwlock_rdlock(&m->lock);
    ssize_t i = find_topic(m, topic, NULL);
    int rc = 0;
    if (i < 0) {
        rc = no_topic(err, topic);
    } else if (id < 0 || id >= m->topics[i]->meta.partitions) {
        rc = eng_fail(err, ENG_ENOPARTITION, "topic '%s' has no partition %d (it has %d)", topic,
                      id, m->topics[i]->meta.partitions);
    } else {
        *out = m->topics[i]->parts[id];
        eng_partition_ref(*out);
    }
    pthread_rwlock_unlock(&m->lock);
    return rc;
}
