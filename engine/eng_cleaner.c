/*
 * eng_cleaner.c - cleaner threads, choosing what to clean, the
 * cleaner-offset-checkpoint and the status report.
 *
 * One mutex guards the cleaner's bookkeeping (checkpoint entries, the set of
 * partitions in progress, uncleanable marks, recent runs); no I/O happens
 * under it except the checkpoint write, which is small.
 */
#include "eng_cleaner.h"

#include "eng_checkpoint.h"
#include "eng_fault.h"
#include "eng_fs.h"
#include "eng_logger.h"
#include "eng_manager_impl.h"
#include "eng_stats.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_RUNS 32

typedef struct worker {
    eng_cleaner *c;
    unsigned id;
    pthread_t thread;
    eng_offset_map *map; /* allocated on first clean */
    eng_cleaner_thread_info info;
    int64_t alloc_logged_ms;   /* last "cannot allocate" line (0: none yet) */
    uint64_t alloc_failures;   /* in a row; 0 once a map is allocated */
} worker;

struct eng_cleaner {
    eng_manager *m;
    eng_cleaner_opts o;
    size_t map_bytes;
    pthread_mutex_t lock;
    pthread_cond_t wake;
    bool stopping;
    _Atomic bool abort;
    worker *workers;
    unsigned nworkers, started;
    eng_ckpt ckpt;                   /* first dirty offsets (lock) */
    bool ckpt_unsaved;               /* the file's last write failed (lock) */
    eng_partition **in_progress;     /* (lock) */
    size_t nin_progress, cap_in_progress;
    eng_uncleanable *uncleanable;    /* (lock) */
    size_t nuncleanable;
    eng_cleaner_run runs[MAX_RUNS];  /* ring (lock) */
    size_t nruns, next_run;
    pthread_mutex_t admin_lock;      /* one on-demand run at a time */
    eng_offset_map *admin_map;
};

void eng_cleaner_opts_default(eng_cleaner_opts *o)
{
    o->enable = true;
    o->threads = 1;
    o->dedupe_buffer_bytes = 134217728;
    o->load_factor = 0.9;
    o->backoff_ms = 15000;
    o->io_buffer_bytes = 524288;
    o->max_bytes_per_second = 0;
}

/* ---- bookkeeping (caller holds c->lock) --------------------------------- */

static int64_t ckpt_get(eng_cleaner *c, const char *topic, int32_t part)
{
    return eng_checkpoint_find(&c->ckpt, topic, part, -1);
}

static int ckpt_set(eng_cleaner *c, const char *topic, int32_t part, int64_t off)
{
    for (size_t i = 0; i < c->ckpt.n; i++) {
        if (c->ckpt.entries[i].partition == part && !strcmp(c->ckpt.entries[i].topic, topic)) {
            c->ckpt.entries[i].offset = off;
            return 0;
        }
    }
    eng_ckpt_entry *ne = realloc(c->ckpt.entries, (c->ckpt.n + 1) * sizeof *ne);
    if (!ne)
        return -ENOMEM;
    c->ckpt.entries = ne;
    if (!(ne[c->ckpt.n].topic = strdup(topic)))
        return -ENOMEM;
    ne[c->ckpt.n].partition = part;
    ne[c->ckpt.n].offset = off;
    c->ckpt.n++;
    return 0;
}

/* Writes the checkpoint, keeping only partitions that still exist. */
static int ckpt_write(eng_cleaner *c)
{
    eng_ckpt_entry *keep = calloc(c->ckpt.n ? c->ckpt.n : 1, sizeof *keep);
    if (!keep)
        return -ENOMEM;
    size_t k = 0;
    for (size_t i = 0; i < c->ckpt.n; i++) {
        eng_partition *p;
        if (eng_manager_partition(c->m, c->ckpt.entries[i].topic, c->ckpt.entries[i].partition,
                                  &p, NULL) == 0) {
            keep[k++] = c->ckpt.entries[i];
            eng_partition_unref(p);
        }
    }
    int rc = eng_manager_write_checkpoint(c->m, "cleaner-offset-checkpoint", keep, k);
    free(keep);
    c->ckpt_unsaved = rc != 0;
    return rc;
}

/* Whether p is still the partition the manager serves under its name: a
 * topic deleted while it was being cleaned must not leave a checkpoint entry
 * behind for a new topic of the same name to inherit. */
static bool still_registered(eng_cleaner *c, eng_partition *p)
{
    eng_partition *cur;
    if (eng_manager_partition(c->m, eng_partition_topic(p), eng_partition_id(p), &cur, NULL))
        return false;
    eng_partition_unref(cur);
    return cur == p;
}

/* Kafka's LogCleanerManager.cleanableOffsets: a checkpointed first dirty
 * offset outside [log start, log end] is reset to the log start offset.
 * Past the end, the log was lost or truncated under it (recovery, a
 * partition directory gone): once appends carried the end past it again,
 * records below it would pass for clean and keep their duplicates for good.
 * Below the start, records were deleted; quiet for compact,delete, whose
 * retention moves the start past it all the time, as in Kafka.  -1 (none)
 * is returned as is. */
static int64_t checked_first_dirty(eng_partition *p, int64_t ckpt)
{
    if (ckpt < 0)
        return ckpt;
    int64_t lso = eng_partition_log_start_offset(p), leo = eng_partition_log_end_offset(p);
    if (ckpt > leo) {
        ENG_WARN("%s-%d: the checkpointed first dirty offset %lld is past the log end offset "
                 "%lld; resetting it to the log start offset %lld",
                 eng_partition_topic(p), eng_partition_id(p), (long long)ckpt, (long long)leo,
                 (long long)lso);
        return lso;
    }
    if (ckpt < lso) {
        eng_config cfg;
        eng_partition_get_config(p, &cfg);
        if (!(cfg.v[ENG_CFG_CLEANUP_POLICY].i & ENG_POLICY_DELETE))
            ENG_WARN("%s-%d: resetting the first dirty offset to the log start offset %lld: the "
                     "checkpointed offset %lld is below it",
                     eng_partition_topic(p), eng_partition_id(p), (long long)lso, (long long)ckpt);
        return lso;
    }
    return ckpt;
}

/* Checks the checkpoint as loaded against the logs (the manager has loaded
 * and recovered them; nothing appends before the service is ready) and
 * rewrites it if anything changed.  An entry of a partition that does not
 * exist is a delete whose rewrite failed or was cut short by a crash: kept,
 * a topic created later under the name would inherit its offset and never
 * compact the duplicates below it (Kafka prunes its checkpoint against the
 * logs).  One out of its log's range is reset. */
static void ckpt_check_loaded(eng_cleaner *c)
{
    bool changed = false;
    size_t k = 0;
    for (size_t i = 0; i < c->ckpt.n; i++) {
        eng_ckpt_entry *e = &c->ckpt.entries[i];
        eng_partition *p;
        if (eng_manager_partition(c->m, e->topic, e->partition, &p, NULL)) {
            ENG_WARN("cleaner-offset-checkpoint: dropping the entry of %s-%d (first dirty offset "
                     "%lld): no such partition, a topic delete cut short",
                     e->topic, e->partition, (long long)e->offset);
            free(e->topic);
            changed = true;
            continue;
        }
        int64_t off = checked_first_dirty(p, e->offset);
        eng_partition_unref(p);
        changed |= off != e->offset;
        e->offset = off;
        c->ckpt.entries[k++] = *e;
    }
    c->ckpt.n = k;
    int rc = changed ? ckpt_write(c) : 0;
    if (rc)
        ENG_WARN("rewriting cleaner-offset-checkpoint after checking it: %s (the next clean "
                 "writes it)",
                 eng_strerror(rc));
}

static bool in_progress(eng_cleaner *c, eng_partition *p)
{
    for (size_t i = 0; i < c->nin_progress; i++)
        if (c->in_progress[i] == p)
            return true;
    return false;
}

static bool mark_in_progress(eng_cleaner *c, eng_partition *p)
{
    if (in_progress(c, p))
        return false;
    if (c->nin_progress == c->cap_in_progress) {
        size_t cap = c->cap_in_progress ? c->cap_in_progress * 2 : 8;
        eng_partition **n = realloc(c->in_progress, cap * sizeof *n);
        if (!n)
            return false;
        c->in_progress = n;
        c->cap_in_progress = cap;
    }
    c->in_progress[c->nin_progress++] = p;
    return true;
}

static void unmark_in_progress(eng_cleaner *c, eng_partition *p)
{
    for (size_t i = 0; i < c->nin_progress; i++)
        if (c->in_progress[i] == p) {
            c->in_progress[i] = c->in_progress[--c->nin_progress];
            return;
        }
}

static ssize_t find_uncleanable(eng_cleaner *c, const char *topic, int32_t part)
{
    for (size_t i = 0; i < c->nuncleanable; i++)
        if (c->uncleanable[i].partition == part && !strcmp(c->uncleanable[i].topic, topic))
            return (ssize_t)i;
    return -1;
}

/* True while the threads must leave partition i alone (c->lock held). */
static bool skipped(eng_cleaner *c, ssize_t i, int64_t now_mono_ms)
{
    if (i < 0)
        return false;
    eng_uncleanable *u = &c->uncleanable[i];
    if (u->retry_ms == 0 || now_mono_ms < u->retry_mono_ms)
        return true;
    ENG_INFO("%s-%d: trying to clean it again (%s)", u->topic, u->partition, u->reason);
    c->uncleanable[i] = c->uncleanable[--c->nuncleanable];
    return false;
}

static void set_uncleanable(eng_cleaner *c, eng_partition *p, int rc)
{
    if (find_uncleanable(c, eng_partition_topic(p), eng_partition_id(p)) >= 0)
        return;
    eng_uncleanable *n = realloc(c->uncleanable, (c->nuncleanable + 1) * sizeof *n);
    if (!n)
        return;
    c->uncleanable = n;
    eng_uncleanable *u = &n[c->nuncleanable++];
    snprintf(u->topic, sizeof u->topic, "%s", eng_partition_topic(p));
    u->partition = eng_partition_id(p);
    u->since_ms = eng_now_ms();
    snprintf(u->reason, sizeof u->reason, "cleaning failed: %s", eng_strerror(rc));
    /* Kafka marks any failure uncleanable until a restart; a full disk,
     * too many open files or no memory map left passes, and cleaning is
     * what frees the disk (and, dropping segments, their maps). */
    bool passes = eng_error_out_of_resources(rc);
    /* Four backoffs (a minute by default): a failed attempt may have read
     * its whole dirty range before it found no room to write. */
    int64_t wait = 4 * (int64_t)c->o.backoff_ms;
    u->retry_ms = passes ? u->since_ms + wait : 0;
    u->retry_mono_ms = passes ? eng_mono_ms() + wait : 0;
    if (passes)
        ENG_WARN("%s-%d: %s; the cleaner tries again in %lld ms", u->topic, u->partition,
                 u->reason, (long long)wait);
    else
        ENG_ERROR("%s-%d: marked uncleanable (%s); the cleaner skips it until restart", u->topic,
                  u->partition, u->reason);
}

static void clear_uncleanable(eng_cleaner *c, eng_partition *p)
{
    ssize_t i = find_uncleanable(c, eng_partition_topic(p), eng_partition_id(p));
    if (i >= 0)
        c->uncleanable[i] = c->uncleanable[--c->nuncleanable];
}

static void record_run(eng_cleaner *c, eng_partition *p, bool on_demand, int rc,
                       const eng_clean_stats *st)
{
    eng_cleaner_run *r = &c->runs[c->next_run];
    snprintf(r->topic, sizeof r->topic, "%s", eng_partition_topic(p));
    r->partition = eng_partition_id(p);
    r->on_demand = on_demand;
    r->result = rc;
    r->stats = *st;
    c->next_run = (c->next_run + 1) % MAX_RUNS;
    if (c->nruns < MAX_RUNS)
        c->nruns++;
}

/* ---- cleaning ------------------------------------------------------------ */

/* Runs one clean of p with map and settles the bookkeeping.  p must have
 * been marked in progress by the caller. */
static int run_clean(eng_cleaner *c, eng_partition *p, eng_offset_map *map, bool dry_run,
                     bool on_demand, eng_clean_stats *st)
{
    pthread_mutex_lock(&c->lock);
    int64_t ckpt = ckpt_get(c, eng_partition_topic(p), eng_partition_id(p));
    pthread_mutex_unlock(&c->lock);
    /* Not written back here: the clean below writes where it ended, which
     * differs from the offset checkpointed whenever this resets it. */
    int64_t first_dirty = checked_first_dirty(p, ckpt);
    eng_clean_opts o = {.map = map, .now_ms = eng_now_ms(), .dry_run = dry_run,
                        .io_buffer_bytes = c->o.io_buffer_bytes / 2 / (c->nworkers ? c->nworkers : 1),
                        .max_bytes_per_second = c->o.max_bytes_per_second, .abort = &c->abort,
                        /* A stop must not wait out an on-demand clean of a large log:
                         * the HTTP side waits for it before the cleaner is stopped. */
                        .stop = &c->m->stop_requested};
    int rc = eng_partition_clean(p, first_dirty, &o, st);
    (void)ENG_FAULT("cleaner.after_clean");
    pthread_mutex_lock(&c->lock);
    if (!rc && !dry_run && st->end_offset != ckpt && still_registered(c, p)) {
        (void)ENG_FAULT("cleaner.before_checkpoint");
        int w = ckpt_set(c, eng_partition_topic(p), eng_partition_id(p), st->end_offset);
        if (!w)
            w = ckpt_write(c);
        if (w)
            ENG_ERROR("writing cleaner-offset-checkpoint: %s", eng_strerror(w));
    }
    /* Stopping, or the topic deleted under the clean: neither is the
     * partition's fault, and a deleted topic's name may be reused. */
    bool interrupted = rc == ENG_ESHUTDOWN || rc == ENG_ENOTOPIC;
    if (!dry_run && rc != ENG_EBUSY && rc != ENG_ENOTCOMPACT && !interrupted &&
        (rc || st->segments_before))
        eng_stats_cleaner(rc != 0, st->bytes_read, st->bytes_before, st->bytes_after,
                          st->records_removed);
    /* A dry run changes nothing, the uncleanable list included.  Nor does
     * a failure of a topic deleted since: its forget may have run already,
     * and the mark would then outlive it, keeping the threads off a topic
     * created again under the name until a restart. */
    if (!dry_run && rc && rc != ENG_EBUSY && !interrupted && rc != ENG_ENOTCOMPACT &&
        still_registered(c, p))
        set_uncleanable(c, p, rc);
    else if (!dry_run && !rc && on_demand)
        clear_uncleanable(c, p);
    /* Not once the topic is gone from the manager: its forget (which
     * follows, under this lock) may have run already. */
    if (rc != ENG_EBUSY && rc != ENG_ENOTCOMPACT && rc != ENG_ENOTOPIC &&
        (st->segments_before || rc || on_demand) && still_registered(c, p))
        record_run(c, p, on_demand, rc, st);
    pthread_mutex_unlock(&c->lock);
    return rc;
}

/* The filthiest eligible partition, marked in progress (referenced), or NULL.
 * The dirty ratios are computed outside the lock (they read segment headers). */
static eng_partition *choose(eng_cleaner *c)
{
    eng_partition **v;
    size_t n;
    if (eng_manager_all_partitions(c->m, &v, &n))
        return NULL;
    int64_t *ckpt = malloc((n ? n : 1) * sizeof *ckpt);
    if (!ckpt) {
        eng_partitions_release(v, n);
        return NULL;
    }
    int64_t now_mono = eng_mono_ms();
    pthread_mutex_lock(&c->lock);
    for (size_t i = 0; i < n; i++) {
        eng_config cfg;
        eng_partition_get_config(v[i], &cfg);
        bool skip = !(cfg.v[ENG_CFG_CLEANUP_POLICY].i & ENG_POLICY_COMPACT) || in_progress(c, v[i]) ||
                    skipped(c, find_uncleanable(c, eng_partition_topic(v[i]), eng_partition_id(v[i])),
                            now_mono);
        ckpt[i] = skip ? INT64_MIN : ckpt_get(c, eng_partition_topic(v[i]), eng_partition_id(v[i]));
    }
    pthread_mutex_unlock(&c->lock);
    int64_t now = eng_now_ms();
    eng_partition *best = NULL;
    double best_ratio = -1;
    for (size_t i = 0; i < n; i++) {
        if (ckpt[i] == INT64_MIN)
            continue;
        eng_config cfg;
        eng_partition_get_config(v[i], &cfg);
        eng_clean_range r;
        eng_partition_clean_range(v[i], ckpt[i], now, &r);
        bool eligible = (r.need_compaction_now && r.cleanable_bytes > 0) ||
                        r.dirty_ratio > cfg.v[ENG_CFG_MIN_CLEANABLE_DIRTY_RATIO].d;
        if (eligible && r.cleanable_bytes > 0 && r.dirty_ratio > best_ratio) {
            best = v[i];
            best_ratio = r.dirty_ratio;
        }
    }
    free(ckpt);
    pthread_mutex_lock(&c->lock);
    if (best && mark_in_progress(c, best))
        eng_partition_ref(best);
    else
        best = NULL;
    pthread_mutex_unlock(&c->lock);
    eng_partitions_release(v, n);
    return best;
}

/* Sleeps up to ms on c->wake, or until the cleaner stops. */
static void backoff(eng_cleaner *c, int64_t ms)
{
    struct timespec ts = eng_mono_deadline(ms);
    pthread_mutex_lock(&c->lock);
    if (!c->stopping)
        pthread_cond_timedwait(&c->wake, &c->lock, &ts);
    pthread_mutex_unlock(&c->lock);
}

/* At most one line a minute per thread: a map that cannot be allocated now
 * will not be next round either, and the log is not the place to count. */
#define ALLOC_LOG_EVERY_MS 60000

/* log.cleaner.backoff.ms may be 0, which suits an idle poll but would spin
 * on an allocation that keeps failing; this bounds it to one try a second. */
#define ALLOC_BACKOFF_MIN_MS 1000

static int64_t alloc_backoff_ms(const eng_cleaner *c)
{
    return c->o.backoff_ms > ALLOC_BACKOFF_MIN_MS ? c->o.backoff_ms : ALLOC_BACKOFF_MIN_MS;
}

/* An offset map could not be allocated for p.  Not p's fault, so p is not
 * marked uncleanable; but it is a failed run (counted, and shown in the
 * status), and the thread backs off instead of choosing again at once: it
 * used to spin on choose() and log a line each time, 250,000 a second. */
static void map_alloc_failed(worker *w, eng_partition *p, int rc)
{
    eng_cleaner *c = w->c;
    int64_t now = eng_mono_ms(); /* a rate, not a date: a clock step must not bring a burst */
    w->alloc_failures++;
    if (!w->alloc_logged_ms || now - w->alloc_logged_ms >= ALLOC_LOG_EVERY_MS) {
        ENG_ERROR("cleaner thread %u: cannot allocate its %zu-byte offset map to clean %s-%d: %s "
                  "(failure %llu in a row); trying again in %lld ms",
                  w->id, c->map_bytes, eng_partition_topic(p), eng_partition_id(p),
                  eng_strerror(rc), (unsigned long long)w->alloc_failures,
                  (long long)alloc_backoff_ms(c));
        w->alloc_logged_ms = now;
    }
    eng_clean_stats st;
    memset(&st, 0, sizeof st);
    eng_stats_cleaner(1, 0, 0, 0, 0);
    pthread_mutex_lock(&c->lock);
    record_run(c, p, false, rc, &st);
    unmark_in_progress(c, p);
    pthread_mutex_unlock(&c->lock);
}

static void *worker_main(void *arg)
{
    worker *w = arg;
    eng_cleaner *c = w->c;
    for (;;) {
        pthread_mutex_lock(&c->lock);
        /* A stop request aborts cleans under way (run_clean): choosing
         * again would only start and abort one after another until the
         * stop reaches the cleaner. */
        bool stop = c->stopping || atomic_load(&c->m->stop_requested);
        /* A write that failed (a full disk) is tried again at each look,
         * not left to the next clean: the file may still hold a deleted
         * topic's entries, which a topic created under the name would
         * inherit if the process died before anything wrote it again. */
        if (!stop && c->ckpt_unsaved && ckpt_write(c) == 0)
            ENG_INFO("cleaner-offset-checkpoint written again after an earlier failure");
        pthread_mutex_unlock(&c->lock);
        if (stop)
            break;
        eng_partition *p = choose(c);
        if (!p) {
            backoff(c, c->o.backoff_ms);
            continue;
        }
        if (!w->map) {
            int rc = ENG_FAULT("cleaner.map_alloc");
            if (!rc)
                rc = eng_offset_map_new(c->map_bytes, c->o.load_factor, &w->map);
            if (rc) {
                map_alloc_failed(w, p, rc);
                eng_partition_unref(p);
                backoff(c, alloc_backoff_ms(c));
                continue;
            }
            w->alloc_failures = 0;
        }
        pthread_mutex_lock(&c->lock);
        w->info.busy = true;
        snprintf(w->info.topic, sizeof w->info.topic, "%s", eng_partition_topic(p));
        w->info.partition = eng_partition_id(p);
        w->info.since_ms = eng_now_ms();
        pthread_mutex_unlock(&c->lock);
        eng_clean_stats st;
        memset(&st, 0, sizeof st);
        run_clean(c, p, w->map, false, false, &st);
        pthread_mutex_lock(&c->lock);
        w->info.busy = false;
        w->info.cleanings++;
        unmark_in_progress(c, p);
        pthread_mutex_unlock(&c->lock);
        eng_partition_unref(p);
    }
    return NULL;
}

int eng_cleaner_start(eng_manager *m, const eng_cleaner_opts *o, eng_cleaner **out)
{
    eng_cleaner *c = calloc(1, sizeof *c);
    if (!c)
        return -ENOMEM;
    c->m = m;
    c->o = *o;
    c->nworkers = o->enable ? o->threads : 0;
    /* Kafka's cap (kafka-format.md §16.2): min(buffer / threads, 2^31 - 1)
     * bytes a thread, so a huge log.cleaner.dedupe.buffer.size asks for a
     * 2 GiB map rather than one no machine can give. */
    c->map_bytes = o->dedupe_buffer_bytes / (o->threads ? o->threads : 1);
    if (c->map_bytes > ENG_CLEANER_MAP_BYTES_MAX)
        c->map_bytes = ENG_CLEANER_MAP_BYTES_MAX;
    pthread_mutex_init(&c->lock, NULL);
    pthread_mutex_init(&c->admin_lock, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&c->wake, &ca);
    pthread_condattr_destroy(&ca);
    char path[PATH_MAX];
    int rc = eng_fs_join(path, sizeof path, eng_manager_log_dir(m), "cleaner-offset-checkpoint");
    if (!rc && (rc = eng_checkpoint_read(path, &c->ckpt)) != 0) {
        if (rc != -ENOENT)
            ENG_WARN("%s does not parse (%s); cleaning from each log start offset", path,
                     eng_strerror(rc));
        memset(&c->ckpt, 0, sizeof c->ckpt);
        rc = 0;
    }
    ckpt_check_loaded(c);
    if (c->nworkers && !(c->workers = calloc(c->nworkers, sizeof *c->workers)))
        rc = -ENOMEM;
    for (unsigned i = 0; !rc && i < c->nworkers; i++) {
        c->workers[i] = (worker){.c = c, .id = i, .info = {.id = i}};
        int e = pthread_create(&c->workers[i].thread, NULL, worker_main, &c->workers[i]);
        if (e)
            rc = -e;
        else
            c->started++;
    }
    if (rc) {
        eng_cleaner_stop(c);
        return rc;
    }
    if (c->nworkers)
        ENG_INFO("log cleaner started: %u threads, %zu-byte offset map each", c->nworkers,
                 c->map_bytes);
    else
        ENG_INFO("log cleaner threads disabled (log.cleaner.threads=0 or log.cleaner.enable=false)");
    *out = c;
    return 0;
}

void eng_cleaner_stop(eng_cleaner *c)
{
    if (!c)
        return;
    pthread_mutex_lock(&c->lock);
    c->stopping = true;
    atomic_store(&c->abort, true);
    pthread_cond_broadcast(&c->wake);
    pthread_mutex_unlock(&c->lock);
    for (unsigned i = 0; i < c->started; i++)
        pthread_join(c->workers[i].thread, NULL);
    for (unsigned i = 0; i < c->nworkers && c->workers; i++)
        eng_offset_map_free(c->workers[i].map);
    eng_offset_map_free(c->admin_map);
    eng_checkpoint_free(&c->ckpt);
    free(c->workers);
    free(c->in_progress);
    free(c->uncleanable);
    pthread_mutex_destroy(&c->lock);
    pthread_mutex_destroy(&c->admin_lock);
    pthread_cond_destroy(&c->wake);
    free(c);
}

int eng_cleaner_clean_now(eng_cleaner *c, eng_partition *p, bool dry_run, eng_clean_stats *st)
{
    memset(st, 0, sizeof *st);
    eng_config cfg;
    eng_partition_get_config(p, &cfg);
    if (!(cfg.v[ENG_CFG_CLEANUP_POLICY].i & ENG_POLICY_COMPACT))
        return ENG_ENOTCOMPACT;
    pthread_mutex_lock(&c->lock);
    bool marked = mark_in_progress(c, p);
    pthread_mutex_unlock(&c->lock);
    if (!marked)
        return ENG_EBUSY;
    pthread_mutex_lock(&c->admin_lock);
    int rc = c->admin_map ? 0 : eng_offset_map_new(c->map_bytes, c->o.load_factor, &c->admin_map);
    if (!rc)
        rc = run_clean(c, p, c->admin_map, dry_run, true, st);
    pthread_mutex_unlock(&c->admin_lock);
    pthread_mutex_lock(&c->lock);
    unmark_in_progress(c, p);
    pthread_mutex_unlock(&c->lock);
    return rc;
}

void eng_cleaner_forget(eng_cleaner *c, const char *topic)
{
    pthread_mutex_lock(&c->lock);
    size_t k = 0;
    bool dropped = false;
    for (size_t i = 0; i < c->ckpt.n; i++) {
        if (!strcmp(c->ckpt.entries[i].topic, topic)) {
            free(c->ckpt.entries[i].topic);
            dropped = true;
        } else {
            c->ckpt.entries[k++] = c->ckpt.entries[i];
        }
    }
    c->ckpt.n = k;
    size_t j = 0;
    for (size_t i = 0; i < c->nuncleanable; i++)
        if (strcmp(c->uncleanable[i].topic, topic))
            c->uncleanable[j++] = c->uncleanable[i];
    c->nuncleanable = j;
    /* Its runs too: /v1/cleaner would show a deleted topic's cleanings as
     * the history of a topic created later under the name.  Kept in order,
     * oldest first, from slot 0. */
    eng_cleaner_run kept[MAX_RUNS];
    size_t nkept = 0;
    for (size_t i = 0; i < c->nruns; i++) {
        const eng_cleaner_run *r = &c->runs[(c->next_run + MAX_RUNS - c->nruns + i) % MAX_RUNS];
        if (strcmp(r->topic, topic))
            kept[nkept++] = *r;
    }
    memcpy(c->runs, kept, nkept * sizeof *kept);
    c->nruns = nkept;
    c->next_run = nkept % MAX_RUNS;
    int rc = dropped ? ckpt_write(c) : 0;
    if (rc)
        ENG_WARN("writing cleaner-offset-checkpoint: %s", eng_strerror(rc));
    pthread_mutex_unlock(&c->lock);
}

int64_t eng_cleaner_checkpoint(eng_cleaner *c, const char *topic, int32_t partition)
{
    pthread_mutex_lock(&c->lock);
    int64_t v = ckpt_get(c, topic, partition);
    pthread_mutex_unlock(&c->lock);
    return v;
}

int eng_cleaner_status_get(eng_cleaner *c, eng_cleaner_status *out)
{
    memset(out, 0, sizeof *out);
    pthread_mutex_lock(&c->lock);
    out->enabled = c->nworkers > 0;
    out->nthreads = c->nworkers;
    out->dedupe_buffer_bytes_per_thread = c->map_bytes;
    out->threads = calloc(c->nworkers ? c->nworkers : 1, sizeof *out->threads);
    out->runs = calloc(c->nruns ? c->nruns : 1, sizeof *out->runs);
    out->uncleanable = calloc(c->nuncleanable ? c->nuncleanable : 1, sizeof *out->uncleanable);
    int rc = out->threads && out->runs && out->uncleanable ? 0 : -ENOMEM;
    if (!rc) {
        for (unsigned i = 0; i < c->nworkers; i++)
            out->threads[i] = c->workers[i].info;
        for (size_t i = 0; i < c->nruns; i++)
            out->runs[i] = c->runs[(c->next_run + MAX_RUNS - 1 - i) % MAX_RUNS];
        out->nruns = c->nruns;
        if (c->nuncleanable)
            memcpy(out->uncleanable, c->uncleanable, c->nuncleanable * sizeof *out->uncleanable);
        out->nuncleanable = c->nuncleanable;
        /* Shown on today's wall clock: it may have been stepped since. */
        int64_t now_wall = eng_now_ms(), now_mono = eng_mono_ms();
        for (size_t i = 0; i < out->nuncleanable; i++)
            if (out->uncleanable[i].retry_ms)
                out->uncleanable[i].retry_ms =
                    now_wall + (out->uncleanable[i].retry_mono_ms - now_mono);
    }
    pthread_mutex_unlock(&c->lock);
    if (rc)
        eng_cleaner_status_free(out);
    return rc;
}

void eng_cleaner_status_free(eng_cleaner_status *s)
{
    free(s->threads);
    free(s->runs);
    free(s->uncleanable);
    memset(s, 0, sizeof *s);
}
