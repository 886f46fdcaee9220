/*
 * eng_manager_load.c - loading a data dir at startup: its checkpoints, its
 * topics' metadata, every partition (recovery after an unclean stop,
 * leftovers of interrupted writes), then the directories no topic owns.
 *
 * The manager's lifecycle (lock, close) is in eng_manager.c; the topic table
 * in eng_topics.c.
 */
#include "eng_manager_impl.h"

#include "eng_checkpoint.h"
#include "eng_fault.h"
#include "eng_fs.h"
#include "eng_logger.h"
#include "eng_parallel.h"
#include "eng_process.h"
#include "eng_snapshot.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define META_MAX_BYTES (1u << 20)
#define PARTITION_META_MAX_BYTES 4096u
/* Kafka's partition.metadata, as written here: this, then the topic id. */
#define PARTITION_META_HEAD "version: 0\ntopic_id: "

static _Atomic uint32_t g_loaded, g_total;

void eng_manager_load_progress(uint32_t *loaded, uint32_t *total)
{
    *loaded = atomic_load(&g_loaded);
    *total = atomic_load(&g_total);
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
        int n = snprintf(buf, sizeof buf, PARTITION_META_HEAD "%s", topic_id);
        rc = eng_fs_write_atomic(path, buf, (size_t)n);
    }
    return rc;
}

/* Removes the temporary files of an eng_fs_write_atomic that a crash
 * interrupted ("<name>.tmp", or ".tmp-XXXXXX" for long names) from dir:
 * the data dir and meta/ (a partition's loader does the same in its one
 * pass over the partition's directory, eng_loader.c).
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

/* The startup load's state, shared by its threads: the checkpoints are
 * only read; the report's counters and the progress log's clock are what
 * they write. */
struct load_ctx {
    bool clean;
    eng_ckpt recovery, start;
    _Atomic int64_t last_progress_ms;
    pthread_mutex_t report_lock; /* m->report and failure while partitions load */
    int failure_rc;              /* the first partition that said why it failed */
    char failure[sizeof(((eng_errdetail *)0)->message)];
};
typedef struct load_ctx load_ctx;

/* Set by partition_failed on the thread loading a partition, so load_one
 * does not add its generic line ("failed to load: corrupt record batch",
 * the code's text) under the partition's own account. */
static _Thread_local bool g_explained;

/* Logs why a partition cannot load and keeps the first such account for
 * the start's error, which would otherwise only name the error code. */
static int partition_failed(load_ctx *lc, int rc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int partition_failed(load_ctx *lc, int rc, const char *fmt, ...)
{
    char msg[2 * PATH_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    ENG_ERROR("%s", msg);
    g_explained = true;
    pthread_mutex_lock(&lc->report_lock);
    if (!lc->failure_rc) {
        lc->failure_rc = rc;
        size_t n = strnlen(msg, sizeof lc->failure - 1); /* cut to the detail's size */
        memcpy(lc->failure, msg, n);
        lc->failure[n] = 0;
    }
    pthread_mutex_unlock(&lc->report_lock);
    return rc;
}

/* "<key>:" and at least one blank at line, as Kafka's PartitionMetadataFile
 * splits its lines (":\s+"): the value after them, or NULL. */
static const char *pmeta_value(const char *line, const char *key)
{
    size_t n = strlen(key);
    if (strncmp(line, key, n) != 0 || line[n] != ':' ||
        (line[n + 1] != ' ' && line[n + 1] != '\t'))
        return NULL;
    line += n + 1;
    return line + strspn(line, " \t");
}

/* The length of the line end at p ("\n", "\r\n" or "\r"), 0 if there is
 * none: Kafka reads the file with readLine, which ends a line at any of the
 * three, so a file whose lines an editor or a copy ended otherwise is as
 * good as the one Kafka wrote. */
static size_t line_end(const char *p)
{
    return p[0] == '\n' ? 1 : p[0] == '\r' ? (p[1] == '\n' ? 2 : 1) : 0;
}

/* The topic id the partition.metadata at path names, into id: 0; -ENOENT
 * when there is no such file; ENG_ECORRUPT when it is not version 0 of the
 * format ("version: 0\ntopic_id: <id>", the newline Kafka ends it with
 * allowed, CRLF line ends too); another -errno when it cannot be read.  The file as this server
 * writes it for topic id `want` names want whatever want holds: the id in
 * meta/<topic>.json is kept as read, so one edited there to hold a '+' or a
 * '\n' still matches the file written from it (fuzz_startup's corpus holds
 * the '+').  An empty id is what this server wrote for a topic whose
 * metadata had none. */
static int read_partition_topic_id(const char *path, const char *want, char id[23])
{
    char *buf;
    size_t len;
    int rc = eng_fs_read_file(path, PARTITION_META_MAX_BYTES, &buf, &len);
    if (rc)
        return rc == -EFBIG ? ENG_ECORRUPT : rc;
    static const char head[] = PARTITION_META_HEAD;
    size_t hl = sizeof head - 1, wl = strlen(want);
    if (len >= hl + wl && len <= hl + wl + 1 && !memcmp(buf, head, hl) &&
        !memcmp(buf + hl, want, wl) && (len == hl + wl || buf[len - 1] == '\n')) {
        memcpy(id, want, wl + 1);
        free(buf);
        return 0;
    }
    rc = ENG_ECORRUPT;
    const char *v = strlen(buf) == len ? pmeta_value(buf, "version") : NULL;
    size_t eol;
    if (!v || v[0] != '0' || !(eol = line_end(v + 1)) ||
        !(v = pmeta_value(v + 1 + eol, "topic_id")))
        goto done;
    size_t n = 0;
    while (v[n] > ' ' && v[n] < 0x7f)
        n++;
    if (n > 22 || (v[n] && (!(eol = line_end(v + n)) || v[n + eol])))
        goto done;
    memcpy(id, v, n);
    id[n] = 0;
    rc = 0;
done:
    free(buf);
    return rc;
}

/* A partition directory whose partition.metadata names another topic id
 * belongs to another incarnation of the topic: restored from a backup
 * taken before the topic was deleted and created again, or copied from
 * another server.  Adopted, its records would be served as this topic's
 * and its offsets mixed with those this topic's readers have seen; Kafka
 * keeps such a log offline (InconsistentTopicIdException).  Here it is set
 * aside as a stray, never deleted (it is someone's data), and *set_aside
 * tells the caller to start the partition as one lost from under a stopped
 * server.  A file that does not parse stops the start, as topic metadata
 * that does not parse does: it is written by rename after an fsync, so no
 * crash leaves it half-written, and guessing either way could be wrong. */
static int check_topic_id(eng_manager *m, const eng_topic *t, int32_t id, const char *pdir,
                          load_ctx *lc, bool *set_aside)
{
    char path[PATH_MAX], found[23], to[PATH_MAX + 64];
    *set_aside = false;
    if (!t->meta.topic_id[0])
        return 0; /* metadata from before topic ids: nothing to compare with */
    int rc = eng_fs_join(path, sizeof path, pdir, "partition.metadata");
    if (!rc)
        rc = read_partition_topic_id(path, t->meta.topic_id, found);
    if (rc == -ENOENT)
        return 0; /* written before the file was, or a create cut short: the topic's */
    if (rc == ENG_ECORRUPT)
        return partition_failed(lc, rc,
                                "%s is not a partition.metadata file: restore it, or remove it "
                                "and %s loads as a partition of topic %s",
                                path, pdir, t->meta.name);
    if (rc) {
        /* No account of our own: the start's error gives the advice for
         * the code (descriptors, memory maps) as for any other file. */
        ENG_ERROR("reading %s failed: %s", path, eng_strerror(rc));
        return rc;
    }
    if (!strcmp(found, t->meta.topic_id))
        return 0;
    rc = eng__set_aside_partition_dir(m, t->meta.name, id, "stray", to, sizeof to);
    if (rc)
        return partition_failed(lc, rc,
                                "%s has topic id %s in its partition.metadata, but topic %s has "
                                "id %s, and it cannot be set aside: %s",
                                pdir, found, t->meta.name, t->meta.topic_id, eng_strerror(rc));
    int sync = eng_fs_sync_dir(m->dir);
    if (sync) /* the rename stands; a crash undoing it has the next start do it again */
        ENG_WARN("syncing %s after setting %s aside: %s", m->dir, pdir, eng_strerror(sync));
    ENG_ERROR("%s has topic id %s in its partition.metadata, but topic %s has id %s: it "
              "belongs to another topic of that name (a backup from before the topic was "
              "deleted and created again, or a copy from another server); moved to %s, remove "
              "it once you know it is not needed",
              pdir, found, t->meta.name, t->meta.topic_id, to);
    *set_aside = true;
    return 0;
}

int eng__open_partition(eng_manager *m, eng_topic *t, int32_t id, load_ctx *lc,
                        eng_partition **out)
{
    char pdir[PATH_MAX];
    int rc = eng__partition_dir(m, t->meta.name, id, pdir, sizeof pdir);
    if (rc)
        return rc;
    bool existed = eng_fs_exists(pdir), foreign = false;
    if (existed && !lc) {
        /* A new partition starts empty: whatever is there is no topic's. */
        eng__set_aside_stray(m, t->meta.name, id, "in the way of a new partition");
        existed = eng_fs_exists(pdir);
    }
    if (existed && lc) {
        if ((rc = check_topic_id(m, t, id, pdir, lc, &foreign)))
            return rc;
        existed = !foreign;
    }
    eng_partition_params pp = {
        .topic = t->meta.name,
        .id = id,
        .dir = pdir,
        .defer_dir_sync = !lc, /* a new topic's or grow's: synced once (eng_topics.c) */
        .config = t->cfg,
        .clean_shutdown = lc ? lc->clean : true,
        .recovery_point = lc ? eng_checkpoint_find(&lc->recovery, t->meta.name, id, 0) : 0,
        .log_start_offset = lc ? eng_checkpoint_find(&lc->start, t->meta.name, id, -1) : -1,
        .dir_offline = &m->offline,
        .events = eng__manager_events(m),
        .producer_expiration_ms = m->jobs_opts.producer_expiration_ms,
    };
    if (!existed && lc) {
        /* A partition directory lost from under a stopped server (or set
         * aside above as another topic's) must not come back empty at
         * offset 0, or new appends reuse offsets readers have consumed.
         * The checkpoints remember how far it went; it restarts there.  (A
         * create cut short by a crash is in no checkpoint and starts at 0,
         * as it would have.) */
        int64_t past = pp.recovery_point > pp.log_start_offset ? pp.recovery_point
                                                               : pp.log_start_offset;
        if (past > 0) {
            ENG_ERROR("%s %s records below offset %" PRId64 " are gone; it starts again, "
                      "empty, at that offset",
                      pdir,
                      foreign ? "held another topic's records: this topic's" : "is missing: its",
                      past);
            pp.log_start_offset = past;
            pp.recovery_point = past;
        }
    }
    eng_load_stats st;
    rc = ENG_FAULT("partition.open");
    if (!rc)
        rc = eng_partition_open(&pp, out, &st);
    if (!rc) {
        rc = ENG_FAULT("partition.files");
        if (!rc)
            rc = write_partition_files(pdir, t->meta.topic_id, eng_partition_log_start_offset(*out));
        if (rc) {
            /* The caller's undo must not unref it again (a full disk at
             * topic create would free it twice). */
            eng_partition_unref(*out);
            *out = NULL;
        }
    }
    if (rc) {
        if (!existed)
            eng_fs_remove_tree(pdir);
        return rc;
    }
    if (!lc)
        return 0; /* created now, not loaded: not part of the startup report */
    pthread_mutex_lock(&lc->report_lock);
    m->report.partitions++;
    m->report.segments += st.segments;
    m->report.segments_recovered += st.segments_recovered;
    m->report.bytes_truncated += st.bytes_truncated;
    pthread_mutex_unlock(&lc->report_lock);
    if (st.segments_recovered)
        ENG_INFO("%s-%d: loaded %u segments, recovered %u, truncated %" PRIu64 " bytes",
                 t->meta.name, id, st.segments, st.segments_recovered, st.bytes_truncated);
    return 0;
}

/* The startup error; out of descriptors, it says what to raise. */
static int load_failed(const eng_manager *m, int rc, eng_errdetail *err)
{
    long headroom, limit;
    if ((rc == -EMFILE || rc == -ENFILE) && eng_process_fd_headroom(&headroom, &limit) == 0)
        return eng_fail(err, rc,
                        "loading %s failed: %s: this process may open %ld files; every "
                        "segment holds 1 (an active one 3); " ENG_FD_LIMIT_HINT,
                        m->dir, eng_strerror(rc), limit);
    if (rc == -ENOMEM)
        return eng_fail(err, rc, "loading %s failed: %s: " ENG_MAP_LIMIT_HINT, m->dir,
                        eng_strerror(rc));
    return eng_fail(err, rc, "loading %s failed: %s", m->dir, eng_strerror(rc));
}

/* Metadata that does not parse, or a copy of a topic's file, stops the start,
 * naming the file, before anything is touched.  Skipping it would hide the
 * topic, set its directories aside as strays and drop its checkpoint entries
 * (a restored file would then bring back records deleted by records:delete);
 * loading a copy would give one set of files two owners. */
static int read_topic(eng_manager *m, const char *file, eng_errdetail *err)
{
    char path[PATH_MAX], *buf;
    size_t len;
    int rc = eng_fs_join(path, sizeof path, m->meta_dir, file);
    if (rc || (rc = eng_fs_read_file(path, META_MAX_BYTES, &buf, &len)))
        return eng_fail(err, rc, "reading %s failed: %s", path, eng_strerror(rc));
    eng_topic *t = calloc(1, sizeof *t);
    if (!t) {
        free(buf);
        return eng_fail(err, -ENOMEM, "loading %s: out of memory", path);
    }
    rc = m->codec.decode(buf, len, &t->meta, m->codec.ctx);
    free(buf);
    size_t stem = strlen(file) - strlen(".json");
    /* The partition count sizes an allocation and a loop that creates a
     * directory per partition: a damaged count (2147483647) asked for 16 GiB
     * and then ran for days instead of refusing the file (found by
     * fuzz_startup). */
    if (rc || !eng_topic_name_valid(t->meta.name) || t->meta.partitions <= 0 ||
        t->meta.partitions > ENG_TOPIC_PARTITIONS_MAX) {
        eng__topic_free(t);
        return eng_fail(err, ENG_ECORRUPT,
                        "%s is not valid topic metadata: restore it, or move it out of %s to "
                        "start without that topic",
                        path, m->meta_dir);
    }
    if (strlen(t->meta.name) != stem || strncmp(t->meta.name, file, stem) != 0 ||
        eng__topic_find(m, t->meta.name, NULL) >= 0) {
        int n = eng_fail(err, ENG_ETOPICEXISTS,
                         "%s describes topic '%s', whose metadata is %s/%s.json: move the copy "
                         "out of %s",
                         path, t->meta.name, m->meta_dir, t->meta.name, m->meta_dir);
        eng__topic_free(t);
        return n;
    }
    eng_errdetail cfg_err = {0};
    if (eng_config_resolve(&m->defaults, &t->meta.overrides, &t->cfg, &cfg_err)) {
        /* Kafka loads a log's config without the cross-checks its
         * AlterConfigs runs: keep every override that parses; only one that
         * does not falls back.  Falling back wholesale would turn a compact
         * (or retention.ms=-1) topic whose min.compaction.lag.ms passes a
         * newly lowered log.cleaner.max.compaction.lag.ms into a delete
         * topic with the default retention, while its listing still showed
         * the overrides.  One that does not parse is dropped, not kept:
         * the listing showed it as the topic's value (TOPIC_CONFIG) while
         * the broker's was in force, and every later config change was
         * refused for it.  The next change rewrites the file without it. */
        ENG_WARN("topic %s: %s; keeping its overrides that parse", t->meta.name, cfg_err.message);
        t->cfg = m->defaults.cfg;
        for (int k = 0; k < ENG_CFG_COUNT; k++) {
            if (!t->meta.overrides.text[k] ||
                !eng_config_parse((eng_config_id)k, t->meta.overrides.text[k], &t->cfg.v[k], NULL))
                continue;
            ENG_WARN("topic %s: %s='%.64s' does not parse; dropped, the broker's value applies",
                     t->meta.name, eng_config_def_at((eng_config_id)k)->name,
                     t->meta.overrides.text[k]);
            free(t->meta.overrides.text[k]);
            t->meta.overrides.text[k] = NULL;
        }
    }
    t->parts = calloc((size_t)t->meta.partitions, sizeof *t->parts);
    if (!t->parts) {
        eng__topic_free(t);
        return load_failed(m, -ENOMEM, err);
    }
    /* In the table before its partitions load, with none of them yet (a
     * failed start frees it with the manager); it lets the next file's
     * copy check see it. */
    if ((rc = eng__topic_insert(m, t))) {
        eng__topic_free(t);
        return load_failed(m, rc, err);
    }
    atomic_fetch_add(&g_total, (uint32_t)t->meta.partitions);
    return 0;
}

typedef struct load_item {
    eng_topic *t;
    int32_t id;
} load_item;

typedef struct load_run {
    eng_manager *m;
    load_ctx *lc;
    load_item *items;
    _Atomic bool stopped; /* an item saw the stop request */
} load_run;

/* One partition of the startup load, on one of its threads. */
static int load_one(void *arg, size_t i)
{
    load_run *r = arg;
    eng_manager *m = r->m;
    if (atomic_load(&m->stop_requested)) {
        atomic_store(&r->stopped, true);
        return ENG_ESHUTDOWN;
    }
    eng_topic *t = r->items[i].t;
    int32_t id = r->items[i].id;
    int64_t t0 = eng_mono_ms();
    g_explained = false;
    int rc = eng__open_partition(m, t, id, r->lc, &t->parts[id]);
    if (rc) {
        if (!g_explained)
            ENG_ERROR("topic %s partition %d failed to load: %s", t->meta.name, id,
                      eng_strerror(rc));
        return rc;
    }
    uint32_t loaded = atomic_fetch_add(&g_loaded, 1) + 1;
    int64_t now = eng_mono_ms();
    if (now - t0 >= 1000)
        ENG_INFO("%s-%d loaded in %lld ms", t->meta.name, id, (long long)(now - t0));
    /* Long loads report progress every couple of seconds: the thread
     * that moves the clock says it, the others see it moved. */
    int64_t last = atomic_load(&r->lc->last_progress_ms);
    if (now - last >= 2000 && atomic_compare_exchange_strong(&r->lc->last_progress_ms, &last, now))
        ENG_INFO("loading: %u of %u partitions so far", loaded, atomic_load(&g_total));
    return 0;
}

/* Loads every partition of the topics read so far, on
 * num.recovery.threads.per.data.dir threads (Kafka's recovery threads):
 * partitions are independent, and one after another their waits on the
 * file system (segments read back, indexes rewritten, producer snapshots)
 * added up to seconds for a few thousand.  The first failure stops the others from
 * taking more; what loaded stays in the table for the caller to free. */
static int load_partitions(eng_manager *m, load_ctx *lc, eng_errdetail *err)
{
    size_t n = 0;
    for (size_t i = 0; i < m->ntopics; i++)
        n += (size_t)m->topics[i]->meta.partitions;
    load_item *items = calloc(n ? n : 1, sizeof *items);
    if (!items)
        return load_failed(m, -ENOMEM, err);
    size_t k = 0;
    for (size_t i = 0; i < m->ntopics; i++)
        for (int32_t p = 0; p < m->topics[i]->meta.partitions; p++)
            items[k++] = (load_item){.t = m->topics[i], .id = p};
    load_run r = {.m = m, .lc = lc, .items = items};
    atomic_init(&r.stopped, false);
    unsigned threads = m->recovery_threads ? m->recovery_threads : 1;
    int rc = eng_parallel_for(n, threads, true, load_one, &r);
    free(items);
    /* A stop asked for while the last partitions loaded still stops: the
     * start would otherwise go on to serve, and then stop cleanly only
     * after the jobs had started. */
    if ((rc == ENG_ESHUTDOWN && atomic_load(&r.stopped)) ||
        (!rc && atomic_load(&m->stop_requested)))
        return eng_fail(err, ENG_ESHUTDOWN, "loading %s stopped by a stop request", m->dir);
    if (rc && rc == lc->failure_rc)
        return eng_fail(err, rc, "%s", lc->failure);
    return rc ? load_failed(m, rc, err) : 0;
}

static void read_checkpoint(const char *dir, const char *name, eng_ckpt *out, bool *trusted)
{
    char path[PATH_MAX];
    memset(out, 0, sizeof *out);
    if (eng_fs_join(path, sizeof path, dir, name))
        return;
    int rc = eng_checkpoint_read(path, out);
    if (rc && rc != -ENOENT) {
        ENG_WARN("%s %s; ignoring it", path,
                 rc == ENG_ECORRUPT ? "is not in Kafka's checkpoint format" : eng_strerror(rc));
        if (trusted)
            *trusted = false;
    }
}

/* True if name, a directory in dir, is spelled as a partition directory:
 * "<valid topic>-<id>" with id in canonical decimal. */
static bool parse_partition_dir(const char *dir, const char *name, char *topic, int32_t *id)
{
    const char *dash = strrchr(name, '-');
    if (!dash || dash == name || (size_t)(dash - name) > ENG_TOPIC_NAME_MAX)
        return false;
    const char *d = dash + 1;
    size_t nd = strlen(d);
    if (nd == 0 || nd > 10 || strspn(d, "0123456789") != nd || (d[0] == '0' && nd > 1))
        return false;
    long long v = atoll(d);
    if (v > INT32_MAX)
        return false;
    memcpy(topic, name, (size_t)(dash - name));
    topic[dash - name] = 0;
    char path[PATH_MAX];
    struct stat st;
    if (!eng_topic_name_valid(topic) || eng_fs_join(path, sizeof path, dir, name) ||
        lstat(path, &st) < 0 || !S_ISDIR(st.st_mode))
        return false;
    *id = (int32_t)v;
    return true;
}

/* True if partition id of topic is one the loaded topics own. */
static bool owned(const eng_manager *m, const char *topic, int32_t id)
{
    ssize_t i = eng__topic_find(m, topic, NULL);
    return i >= 0 && id < m->topics[i]->meta.partitions;
}

/* True if dir holds nothing a previous run could have left but the lock
 * file, an empty meta/ and snapshots/: a first start, not a crash of a
 * server that stored nothing.  Snapshots are never loaded (they are copies
 * for a backup), so a dir holding only them stores no topic yet. */
static bool holds_nothing(const char *dir)
{
    DIR *dh = opendir(dir);
    if (!dh)
        return true;
    bool empty = true;
    struct dirent *e;
    while (empty && (e = readdir(dh)))
        empty = !strcmp(e->d_name, ".") || !strcmp(e->d_name, "..") ||
                !strcmp(e->d_name, ".lock") || !strcmp(e->d_name, "meta") ||
                !strcmp(e->d_name, ENG_SNAPSHOTS_DIR);
    closedir(dh);
    return empty;
}

/* Whether c names a partition the loaded topics do not have. */
static bool names_missing(eng_manager *m, const eng_ckpt *c)
{
    bool missing = false;
    pthread_rwlock_rdlock(&m->lock);
    for (size_t i = 0; i < c->n && !missing; i++) {
        ssize_t t = eng__topic_find(m, c->entries[i].topic, NULL);
        missing = t < 0 || c->entries[i].partition >= m->topics[t]->meta.partitions;
    }
    pthread_rwlock_unlock(&m->lock);
    return missing;
}

static int load_all(eng_manager *m, bool clean, eng_errdetail *err)
{
    load_ctx lc = {.clean = clean};
    atomic_init(&lc.last_progress_ms, eng_mono_ms());
    pthread_mutex_init(&lc.report_lock, NULL);
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
        rc = load_failed(m, -errno, err);
    struct dirent *e;
    while (!rc && (e = readdir(dh))) {
        size_t n = strlen(e->d_name);
        if (n > 5 && strcmp(e->d_name + n - 5, ".json") == 0)
            rc = read_topic(m, e->d_name, err);
    }
    if (dh)
        closedir(dh);
    /* Every topic's metadata is read before any partition loads: one that
     * does not parse stops the start with nothing touched. */
    if (!rc)
        rc = load_partitions(m, &lc, err);
    if (!rc)
        m->report.topics = (uint32_t)m->ntopics;
    pthread_mutex_destroy(&lc.report_lock);
    bool stale = !rc && (names_missing(m, &lc.recovery) || names_missing(m, &lc.start));
    eng_checkpoint_free(&lc.recovery);
    eng_checkpoint_free(&lc.start);
    if (rc)
        return rc;
    /* Entries for partitions that no longer exist (a delete cut short by a
     * crash before it rewrote them) would be read into a topic created
     * again under that name if the next crash came before the jobs ran. */
    if (stale) {
        int ck = eng__manager_write_checkpoints(m);
        if (ck)
            ENG_WARN("rewriting the checkpoints without deleted partitions: %s (their jobs retry)",
                     eng_strerror(ck));
    }
    /* Deleted topics whose removal a stop interrupted; partition
     * directories no topic owns. */
    if ((dh = opendir(m->dir))) {
        char path[PATH_MAX], topic[ENG_TOPIC_NAME_MAX + 1];
        int32_t id;
        while ((e = readdir(dh))) {
            size_t n = strlen(e->d_name);
            if (n > 7 && strcmp(e->d_name + n - 7, "-delete") == 0 &&
                eng_fs_join(path, sizeof path, m->dir, e->d_name) == 0)
                eng__remove_in_background(m, path);
            else if (parse_partition_dir(m->dir, e->d_name, topic, &id) && !owned(m, topic, id))
                eng__set_aside_stray(m, topic, id, "found at startup");
        }
        closedir(dh);
    }
    return 0;
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
    bool fresh = holds_nothing(m->dir) && holds_nothing(m->meta_dir);
    atomic_store(&g_loaded, 0);
    atomic_store(&g_total, 0);
    if ((rc = load_all(m, m->report.clean_shutdown, err)))
        return rc;
    m->report.duration_ms = eng_mono_ms() - t0;
    m->report.first_start = fresh && m->report.topics == 0 && !m->report.clean_shutdown;
    ENG_INFO("loaded %u topics, %u partitions from %s in %lld ms (%s, %u segments "
             "recovered, %" PRIu64 " bytes truncated)",
             m->report.topics, m->report.partitions, m->dir, (long long)m->report.duration_ms,
             m->report.first_start      ? "first start"
             : m->report.clean_shutdown ? "clean shutdown"
                                        : "unclean shutdown",
             m->report.segments_recovered,
             m->report.bytes_truncated);
    return 0;
}
