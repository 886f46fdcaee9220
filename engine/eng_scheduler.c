/*
 * eng_scheduler.c - a min-heap of due times served by worker threads.
 *
 * Times in the heap are monotonic milliseconds; the wall clock is used only
 * to report. A periodic task is out of the heap while it runs, which is what
 * keeps it from overlapping itself.
 */
#include "eng_scheduler.h"

#include "eng_error.h"
#include "eng_fs.h"
#include "eng_logger.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct task {
    int64_t due;          /* monotonic ms */
    size_t stat;          /* index into stats */
    bool periodic;
    int64_t interval_ms;
    eng_job_fn fn;
    void *arg;
    eng_job_drop_fn drop;
} task;

typedef struct job_stat {
    eng_job_info info;
    bool trigger; /* run again as soon as the current run ends */
    unsigned active; /* runs in progress (one-shots of one name run side by side);
                      * info.running is read from it when jobs are listed */
    eng_job_fn fn; /* periodic jobs: what a trigger runs when none is queued */
    void *arg;
} job_stat;

struct eng_scheduler {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    task *heap;
    size_t n, cap;
    job_stat *stats;
    size_t nstats, cap_stats;
    pthread_t *threads;
    unsigned nthreads, started;
    bool stopping;
};

static bool earlier(const task *a, const task *b)
{
    return a->due < b->due;
}

static void sift_up(task *h, size_t i)
{
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!earlier(&h[i], &h[p]))
            break;
        task t = h[i];
        h[i] = h[p];
        h[p] = t;
        i = p;
    }
}

static void sift_down(task *h, size_t n, size_t i)
{
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < n && earlier(&h[l], &h[m]))
            m = l;
        if (r < n && earlier(&h[r], &h[m]))
            m = r;
        if (m == i)
            return;
        task t = h[i];
        h[i] = h[m];
        h[m] = t;
        i = m;
    }
}

static int push(eng_scheduler *s, const task *t)
{
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 32;
        task *nh = realloc(s->heap, cap * sizeof *nh);
        if (!nh)
            return -ENOMEM;
        s->heap = nh;
        s->cap = cap;
    }
    s->heap[s->n] = *t;
    sift_up(s->heap, s->n++);
    return 0;
}

static task pop(eng_scheduler *s)
{
    task t = s->heap[0];
    s->heap[0] = s->heap[--s->n];
    sift_down(s->heap, s->n, 0);
    return t;
}

/* Index of the stats row for name, created if missing; SIZE_MAX on OOM. */
static size_t stat_for(eng_scheduler *s, const char *name, bool periodic, int64_t interval)
{
    for (size_t i = 0; i < s->nstats; i++)
        if (strcmp(s->stats[i].info.name, name) == 0)
            return i;
    if (s->nstats == s->cap_stats) {
        size_t cap = s->cap_stats ? s->cap_stats * 2 : 16;
        job_stat *ns = realloc(s->stats, cap * sizeof *ns);
        if (!ns)
            return SIZE_MAX;
        s->stats = ns;
        s->cap_stats = cap;
    }
    job_stat *st = &s->stats[s->nstats];
    memset(st, 0, sizeof *st);
    snprintf(st->info.name, sizeof st->info.name, "%s", name);
    st->info.periodic = periodic;
    st->info.interval_ms = interval;
    st->info.last_start_ms = -1;
    st->info.last_duration_ms = -1;
    st->info.next_run_ms = -1;
    return s->nstats++;
}

/* now + delay, saturating at INT64_MAX: delays and intervals go up to
 * INT64_MAX (log.initial.task.delay.ms and the intervals allow it), and the
 * wall-clock reports add them to the current time as well. */
static int64_t deadline(int64_t now, int64_t delay)
{
    return delay > 0 && delay > INT64_MAX - now ? INT64_MAX : now + delay;
}

static void *worker(void *arg)
{
    eng_scheduler *s = arg;
    pthread_mutex_lock(&s->lock);
    while (!s->stopping) {
        if (s->n == 0) {
            pthread_cond_wait(&s->cond, &s->lock);
            continue;
        }
        int64_t now = eng_mono_ms();
        if (s->heap[0].due > now) {
            int64_t wait = s->heap[0].due - now;
            if (wait > 60000)
                wait = 60000; /* re-check periodically; clocks and heaps change */
            struct timespec ts = eng_mono_deadline(wait);
            pthread_cond_timedwait(&s->cond, &s->lock, &ts);
            continue;
        }
        task t = pop(s);
        job_stat *st = &s->stats[t.stat];
        st->active++;
        if (!t.periodic && st->info.pending > 0)
            st->info.pending--;
        st->info.last_start_ms = eng_now_ms();
        st->info.next_run_ms = -1;
        /* A one-shot of a new name may move s->stats while the job runs
         * without the lock: the warning below names it from a copy. */
        char name[sizeof st->info.name];
        memcpy(name, st->info.name, sizeof name);
        pthread_mutex_unlock(&s->lock);

        char note[160] = "";
        int64_t t0 = eng_mono_ms();
        int rc = t.fn(t.arg, note, sizeof note);
        int64_t took = eng_mono_ms() - t0;
        if (rc)
            ENG_WARN("job %s failed: %s%s%s", name, eng_strerror(rc),
                     note[0] ? ": " : "", note);

        pthread_mutex_lock(&s->lock);
        st = &s->stats[t.stat]; /* the array may have moved */
        st->active--;
        st->info.runs++;
        st->info.failures += rc != 0;
        st->info.last_result = rc;
        st->info.last_duration_ms = took;
        snprintf(st->info.last_note, sizeof st->info.last_note, "%s", note);
        /* A trigger during the run runs it again now, also for a job whose
         * interval is "never" (that trigger was lost). */
        if (t.periodic && !s->stopping && (t.interval_ms != INT64_MAX || st->trigger)) {
            t.due = st->trigger ? eng_mono_ms() : deadline(eng_mono_ms(), t.interval_ms);
            st->trigger = false;
            st->info.next_run_ms = deadline(eng_now_ms(), t.due - eng_mono_ms());
            if (push(s, &t))
                ENG_ERROR("job %s could not be rescheduled (out of memory)", st->info.name);
        }
        pthread_cond_signal(&s->cond);
    }
    pthread_mutex_unlock(&s->lock);
    return NULL;
}

int eng_scheduler_new(unsigned threads, eng_scheduler **out)
{
    eng_scheduler *s = calloc(1, sizeof *s);
    if (!s)
        return -ENOMEM;
    s->nthreads = threads ? threads : 1;
    s->threads = calloc(s->nthreads, sizeof *s->threads);
    if (!s->threads) {
        free(s);
        return -ENOMEM;
    }
    pthread_mutex_init(&s->lock, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC); /* waits immune to wall-clock jumps */
    pthread_cond_init(&s->cond, &ca);
    pthread_condattr_destroy(&ca);
    *out = s;
    return 0;
}

int eng_scheduler_start(eng_scheduler *s)
{
    for (unsigned i = 0; i < s->nthreads; i++) {
        int e = pthread_create(&s->threads[i], NULL, worker, s);
        if (e)
            return -e;
        s->started++;
    }
    return 0;
}

int eng_scheduler_add_periodic(eng_scheduler *s, const char *name, int64_t initial_delay_ms,
                               int64_t interval_ms, eng_job_fn fn, void *arg)
{
    pthread_mutex_lock(&s->lock);
    int rc = 0;
    size_t idx = stat_for(s, name, true, interval_ms);
    if (idx == SIZE_MAX) {
        rc = -ENOMEM;
    } else if (interval_ms == INT64_MAX) {
        /* Listed, never scheduled: a trigger can still run it once. */
        s->stats[idx].fn = fn;
        s->stats[idx].arg = arg;
    } else if (!s->stopping) {
        task t = {.due = deadline(eng_mono_ms(), initial_delay_ms), .stat = idx, .periodic = true,
                  .interval_ms = interval_ms, .fn = fn, .arg = arg};
        s->stats[idx].fn = fn;
        s->stats[idx].arg = arg;
        s->stats[idx].info.next_run_ms = deadline(eng_now_ms(), initial_delay_ms);
        rc = push(s, &t);
        pthread_cond_signal(&s->cond);
    }
    pthread_mutex_unlock(&s->lock);
    return rc;
}

int eng_scheduler_add_once(eng_scheduler *s, const char *name, int64_t delay_ms, eng_job_fn fn,
                           void *arg, eng_job_drop_fn drop)
{
    pthread_mutex_lock(&s->lock);
    int rc = 0;
    size_t idx = s->stopping ? SIZE_MAX : stat_for(s, name, false, 0);
    if (s->stopping) {
        rc = ENG_ESHUTDOWN;
    } else if (idx == SIZE_MAX) {
        rc = -ENOMEM;
    } else {
        task t = {.due = deadline(eng_mono_ms(), delay_ms), .stat = idx, .fn = fn, .arg = arg,
                  .drop = drop};
        if (!(rc = push(s, &t)))
            s->stats[idx].info.pending++;
        pthread_cond_signal(&s->cond);
    }
    pthread_mutex_unlock(&s->lock);
    if (rc && drop)
        drop(arg);
    return rc;
}

void eng_scheduler_expedite(eng_scheduler *s, const char *name,
                            bool (*match)(void *arg, void *ctx), void *ctx)
{
    pthread_mutex_lock(&s->lock);
    int64_t now = eng_mono_ms();
    bool moved = false;
    for (size_t i = 0; i < s->n; i++) {
        task *t = &s->heap[i];
        if (!t->periodic && t->due > now && !strcmp(s->stats[t->stat].info.name, name) &&
            match(t->arg, ctx)) {
            t->due = now;
            moved = true;
        }
    }
    if (moved) {
        for (size_t i = s->n / 2; i-- > 0;)
            sift_down(s->heap, s->n, i);
        pthread_cond_broadcast(&s->cond);
    }
    pthread_mutex_unlock(&s->lock);
}

int eng_scheduler_trigger(eng_scheduler *s, const char *name)
{
    pthread_mutex_lock(&s->lock);
    int rc = ENG_ENOTFOUND;
    for (size_t i = 0; i < s->n; i++) {
        task *t = &s->heap[i];
        if (t->periodic && strcmp(s->stats[t->stat].info.name, name) == 0) {
            t->due = eng_mono_ms();
            sift_up(s->heap, i);
            rc = 0;
            break;
        }
    }
    if (rc) {
        for (size_t i = 0; i < s->nstats; i++) {
            job_stat *st = &s->stats[i];
            if (!st->info.periodic || strcmp(st->info.name, name) != 0)
                continue;
            if (st->active > 0) {
                st->trigger = true;
                rc = 0;
            } else if (st->fn && !s->stopping) {
                /* A job whose interval is "never": run it once now. */
                task t = {.due = eng_mono_ms(), .stat = i, .periodic = true,
                          .interval_ms = st->info.interval_ms, .fn = st->fn, .arg = st->arg};
                rc = push(s, &t);
            }
        }
    }
    pthread_cond_signal(&s->cond);
    pthread_mutex_unlock(&s->lock);
    return rc;
}

void eng_scheduler_stop(eng_scheduler *s)
{
    if (!s)
        return;
    pthread_mutex_lock(&s->lock);
    bool already = s->stopping;
    s->stopping = true;
    pthread_cond_broadcast(&s->cond);
    pthread_mutex_unlock(&s->lock);
    if (already)
        return;
    for (unsigned i = 0; i < s->started; i++)
        pthread_join(s->threads[i], NULL);
    s->started = 0;
    /* Drop callbacks may call back in (add_once fails while stopping), so
     * they run without the lock on a private copy of the queue. */
    pthread_mutex_lock(&s->lock);
    task *pending = s->heap;
    size_t n = s->n;
    s->heap = NULL;
    s->n = s->cap = 0;
    pthread_mutex_unlock(&s->lock);
    for (size_t i = 0; i < n; i++)
        if (!pending[i].periodic && pending[i].drop)
            pending[i].drop(pending[i].arg);
    free(pending);
}

void eng_scheduler_free(eng_scheduler *s)
{
    if (!s)
        return;
    eng_scheduler_stop(s);
    pthread_mutex_destroy(&s->lock);
    pthread_cond_destroy(&s->cond);
    free(s->heap);
    free(s->stats);
    free(s->threads);
    free(s);
}

int eng_scheduler_jobs(eng_scheduler *s, eng_job_info **out, size_t *n)
{
    pthread_mutex_lock(&s->lock);
    eng_job_info *v = calloc(s->nstats ? s->nstats : 1, sizeof *v);
    if (v) {
        for (size_t i = 0; i < s->nstats; i++) {
            v[i] = s->stats[i].info;
            v[i].running = s->stats[i].active > 0;
        }
        /* Report the earliest pending run of each name, on today's wall
         * clock: the time stored when the run was planned is stale once the
         * clock is stepped (a day ahead, it showed a run due a day ago). */
        int64_t now_mono = eng_mono_ms(), now_wall = eng_now_ms();
        for (size_t i = 0; i < s->n; i++)
            v[s->heap[i].stat].next_run_ms = -1;
        for (size_t i = 0; i < s->n; i++) {
            eng_job_info *ji = &v[s->heap[i].stat];
            int64_t wall = deadline(now_wall, s->heap[i].due - now_mono);
            if (ji->next_run_ms < 0 || wall < ji->next_run_ms)
                ji->next_run_ms = wall;
        }
        *n = s->nstats;
    }
    pthread_mutex_unlock(&s->lock);
    if (!v)
        return -ENOMEM;
    *out = v;
    return 0;
}
