/*
 * test_scheduler.c - the named background-job scheduler (eng_scheduler.h,
 * DESIGN §4):
 *   - periodic jobs: first run only after the initial delay, then again and
 *     again, never sooner than the interval after the previous run ends;
 *   - delays and intervals near INT64_MAX saturate (no overflow); a job with
 *     the "never" interval runs when triggered, and again after a run it
 *     was triggered during;
 *   - a job never runs twice at once, even with a 1 ms interval, four
 *     workers and triggers fired while it runs (concurrent entries counted);
 *   - a slow job does not delay the others (two workers: a fast job keeps
 *     running while the slow one is blocked);
 *   - one-shots run after their delay, in due order, with their argument;
 *     two of one name run side by side and the job reads as running until
 *     both have ended;
 *   - eng_scheduler_expedite: the matching one-shots of a name run now, the
 *     others keep their delay;
 *   - eng_scheduler_trigger: runs a far-away periodic job now, runs a
 *     running one again right after it ends, ENG_ENOTFOUND for unknown names;
 *   - stop: waits for the running job, calls the drop callback of every
 *     pending one-shot (never the job), and add_once during stop fails with
 *     ENG_ESHUTDOWN after dropping its argument synchronously;
 *   - eng_scheduler_jobs: runs, failures, last result / note / start /
 *     duration, next run, pending one-shots, running, the INT64_MAX job that
 *     is listed but never runs.
 *
 * Timings are tens of milliseconds and only lower bounds are asserted: the
 * machine is shared, so "soon" means "within a generous deadline".
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "eng_error.h"
#include "eng_fs.h"
#include "eng_logger.h"
#include "eng_scheduler.h"
#include "support.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define DEADLINE_MS 10000 /* how long "soon" may take on a loaded machine */

/* Waits until *v >= want or the deadline passes; returns the last value. */
static int wait_at_least(_Atomic int *v, int want)
{
    int64_t end = eng_mono_ms() + DEADLINE_MS;
    while (atomic_load(v) < want && eng_mono_ms() < end)
        ts_sleep_ms(2);
    return atomic_load(v);
}

/* The stats row of `name` in a fresh snapshot (copied out); fails if absent. */
static eng_job_info job_info(eng_scheduler *s, const char *name)
{
    eng_job_info *v, out;
    size_t n;
    assert_int_equal(eng_scheduler_jobs(s, &v, &n), 0);
    for (size_t i = 0; i < n; i++) {
        if (strcmp(v[i].name, name) == 0) {
            out = v[i];
            free(v);
            return out;
        }
    }
    free(v);
    fail_msg("job %s is not listed", name);
    return out;
}

/* Waits until `name` has at least `runs` runs and is not running (its
 * counters move just after the body returns); returns that snapshot. */
static eng_job_info wait_idle(eng_scheduler *s, const char *name, uint64_t runs)
{
    int64_t end = eng_mono_ms() + DEADLINE_MS;
    eng_job_info ji = job_info(s, name);
    while ((ji.runs < runs || ji.running) && eng_mono_ms() < end) {
        ts_sleep_ms(2);
        ji = job_info(s, name);
    }
    return ji;
}

/* ---- a recording job -------------------------------------------------- */

#define MAX_RUNS 64

typedef struct rec_job {
    _Atomic int runs;
    _Atomic int inside;     /* concurrent entries right now */
    _Atomic int max_inside; /* the most ever seen */
    int64_t start_ms[MAX_RUNS]; /* monotonic start of each run */
    int sleep_ms;           /* time spent inside each run */
    int result;             /* returned by each run */
    const char *note;
    /* Optional gate: runs wait while `closed` (the test opens it). */
    pthread_mutex_t mu;
    pthread_cond_t cond;
    bool closed;
    _Atomic int finished;   /* runs that got to the end */
} rec_job;

static void rec_init(rec_job *j, int sleep, int result, const char *note)
{
    memset(j, 0, sizeof *j);
    j->sleep_ms = sleep;
    j->result = result;
    j->note = note;
    pthread_mutex_init(&j->mu, NULL);
    pthread_cond_init(&j->cond, NULL);
}

static void rec_destroy(rec_job *j)
{
    pthread_mutex_destroy(&j->mu);
    pthread_cond_destroy(&j->cond);
}

static void gate_set(rec_job *j, bool closed)
{
    pthread_mutex_lock(&j->mu);
    j->closed = closed;
    pthread_cond_broadcast(&j->cond);
    pthread_mutex_unlock(&j->mu);
}

static int rec_fn(void *arg, char *note, size_t len)
{
    rec_job *j = arg;
    int now_in = atomic_fetch_add(&j->inside, 1) + 1;
    for (int m = atomic_load(&j->max_inside); now_in > m;)
        if (atomic_compare_exchange_weak(&j->max_inside, &m, now_in))
            break;
    int k = atomic_fetch_add(&j->runs, 1);
    if (k < MAX_RUNS)
        j->start_ms[k] = eng_mono_ms();
    pthread_mutex_lock(&j->mu);
    while (j->closed)
        pthread_cond_wait(&j->cond, &j->mu);
    pthread_mutex_unlock(&j->mu);
    if (j->sleep_ms)
        ts_sleep_ms(j->sleep_ms);
    if (j->note)
        snprintf(note, len, "%s", j->note);
    atomic_fetch_sub(&j->inside, 1);
    atomic_fetch_add(&j->finished, 1);
    return j->result;
}

/* ---- periodic ----------------------------------------------------------- */

static void test_periodic_delay_and_interval(void **state)
{
    (void)state;
    eng_scheduler *s;
    assert_int_equal(eng_scheduler_new(2, &s), 0);
    assert_int_equal(eng_scheduler_start(s), 0);
    rec_job j;
    rec_init(&j, 0, 0, NULL);
    int64_t added = eng_mono_ms();
    assert_int_equal(eng_scheduler_add_periodic(s, "tick", 60, 30, rec_fn, &j), 0);
    assert_true(wait_at_least(&j.runs, 5) >= 5);
    eng_scheduler_free(s);
    int runs = atomic_load(&j.runs);
    /* Not before the initial delay (1 ms of rounding between clocks). */
    assert_true(j.start_ms[0] - added >= 59);
    /* Never sooner than the interval after the previous run. */
    for (int k = 1; k < runs && k < MAX_RUNS; k++)
        if (j.start_ms[k] - j.start_ms[k - 1] < 29)
            fail_msg("run %d started %lld ms after run %d (interval 30)", k,
                     (long long)(j.start_ms[k] - j.start_ms[k - 1]), k - 1);
    assert_int_equal(atomic_load(&j.max_inside), 1);
    rec_destroy(&j);
}

static void test_never_overlaps_itself(void **state)
{
    (void)state;
    eng_scheduler *s;
    assert_int_equal(eng_scheduler_new(4, &s), 0);
    assert_int_equal(eng_scheduler_start(s), 0);
    rec_job j;
    rec_init(&j, 15, 0, NULL); /* 15 ms runs, 1 ms interval: overlap would be easy */
    assert_int_equal(eng_scheduler_add_periodic(s, "slow", 0, 1, rec_fn, &j), 0);
    int64_t end = eng_mono_ms() + 300;
    while (eng_mono_ms() < end) {
        assert_int_equal(eng_scheduler_trigger(s, "slow"), 0); /* queued or running */
        ts_sleep_ms(3);
    }
    assert_true(wait_at_least(&j.runs, 4) >= 4);
    eng_scheduler_free(s);
    assert_int_equal(atomic_load(&j.max_inside), 1);
    assert_int_equal(atomic_load(&j.inside), 0);
    rec_destroy(&j);
}

/* The interval counts from the end of a run, not from its due time: a job
 * that runs 40 ms every 30 ms starts at least 70 ms after the previous start
 * (a fixed-rate schedule would start it again right away). */
static void test_interval_counts_from_run_end(void **state)
{
    (void)state;
    eng_scheduler *s;
    assert_int_equal(eng_scheduler_new(2, &s), 0);
    assert_int_equal(eng_scheduler_start(s), 0);
    rec_job j;
    rec_init(&j, 40, 0, NULL);
    assert_int_equal(eng_scheduler_add_periodic(s, "long", 0, 30, rec_fn, &j), 0);
    assert_true(wait_at_least(&j.runs, 4) >= 4);
    eng_scheduler_free(s);
    int runs = atomic_load(&j.runs);
    for (int k = 1; k < runs && k < MAX_RUNS; k++)
        if (j.start_ms[k] - j.start_ms[k - 1] < 69)
            fail_msg("run %d started %lld ms after run %d (40 ms runs, interval 30)", k,
                     (long long)(j.start_ms[k] - j.start_ms[k - 1]), k - 1);
    rec_destroy(&j);
}

/* Delays near INT64_MAX saturate instead of overflowing the due time (UBSan
 * aborts on the overflow); such a job, and one whose interval is "never",
 * runs when triggered, and again right after a run it was triggered during. */
static void test_huge_delays_and_triggered_never_job(void **state)
{
    (void)state;
    eng_scheduler *s;
    assert_int_equal(eng_scheduler_new(2, &s), 0);
    assert_int_equal(eng_scheduler_start(s), 0);
    rec_job huge, never;
    rec_init(&huge, 0, 0, NULL);
    rec_init(&never, 0, 0, NULL);
    assert_int_equal(
        eng_scheduler_add_periodic(s, "huge", INT64_MAX - 1, INT64_MAX - 1, rec_fn, &huge), 0);
    assert_int_equal(eng_scheduler_add_periodic(s, "never", 0, INT64_MAX, rec_fn, &never), 0);
    ts_sleep_ms(30);
    assert_int_equal(atomic_load(&huge.runs), 0);
    assert_int_equal(atomic_load(&never.runs), 0);
    assert_int_equal(eng_scheduler_trigger(s, "huge"), 0);
    assert_int_equal(wait_at_least(&huge.runs, 1), 1);
    eng_job_info ji = wait_idle(s, "huge", 1);
    assert_int_equal(ji.runs, 1);

    gate_set(&never, true);
    assert_int_equal(eng_scheduler_trigger(s, "never"), 0);
    assert_int_equal(wait_at_least(&never.runs, 1), 1);
    assert_true(job_info(s, "never").running);
    assert_int_equal(eng_scheduler_trigger(s, "never"), 0);
    gate_set(&never, false);
    assert_int_equal(wait_at_least(&never.runs, 2), 2);
    ji = wait_idle(s, "never", 2);
    assert_int_equal(ji.runs, 2);
    ts_sleep_ms(30);
    assert_int_equal(atomic_load(&never.runs), 2); /* then never again */
    assert_int_equal(atomic_load(&never.max_inside), 1);
    assert_int_equal(atomic_load(&huge.runs), 1);
    eng_scheduler_free(s);
    rec_destroy(&huge);
    rec_destroy(&never);
}

static void test_slow_job_does_not_delay_others(void **state)
{
    (void)state;
    eng_scheduler *s;
    assert_int_equal(eng_scheduler_new(2, &s), 0);
    assert_int_equal(eng_scheduler_start(s), 0);
    rec_job slow, fast;
    rec_init(&slow, 0, 0, NULL);
    rec_init(&fast, 0, 0, NULL);
    gate_set(&slow, true); /* the slow job blocks until the test opens its gate */
    assert_int_equal(eng_scheduler_add_periodic(s, "slow", 0, 60000, rec_fn, &slow), 0);
    assert_int_equal(wait_at_least(&slow.runs, 1), 1);
    assert_int_equal(eng_scheduler_add_periodic(s, "fast", 0, 10, rec_fn, &fast), 0);
    /* With one worker stuck in "slow", the other keeps "fast" going. */
    assert_true(wait_at_least(&fast.runs, 5) >= 5);
    assert_int_equal(atomic_load(&slow.finished), 0);
    assert_true(job_info(s, "slow").running);
    gate_set(&slow, false);
    assert_int_equal(wait_at_least(&slow.finished, 1), 1);
    eng_scheduler_free(s);
    rec_destroy(&slow);
    rec_destroy(&fast);
}

/* ---- one-shots ---------------------------------------------------------- */

typedef struct once_arg {
    int id;
    int64_t queued_ms, delay_ms, ran_ms;
    _Atomic int *order; /* next position in the run order */
    int position;
    _Atomic int *drops;
} once_arg;

static int once_fn(void *varg, char *note, size_t len)
{
    once_arg *a = varg;
    a->ran_ms = eng_mono_ms();
    a->position = atomic_fetch_add(a->order, 1);
    snprintf(note, len, "once %d", a->id);
    return 0;
}

static void once_drop(void *varg)
{
    once_arg *a = varg;
    atomic_fetch_add(a->drops, 1);
}

static void test_one_shots_after_delay(void **state)
{
    (void)state;
    eng_scheduler *s;
    assert_int_equal(eng_scheduler_new(1, &s), 0); /* one worker: due order is run order */
    _Atomic int order = 0, drops = 0;
    static const int64_t delays[] = {120, 40, 0, 80};
    once_arg a[4];
    for (int i = 0; i < 4; i++) {
        a[i] = (once_arg){.id = i, .delay_ms = delays[i], .order = &order, .drops = &drops,
                          .position = -1, .queued_ms = eng_mono_ms()};
        assert_int_equal(eng_scheduler_add_once(s, "once", delays[i], once_fn, &a[i], once_drop), 0);
    }
    assert_int_equal(job_info(s, "once").pending, 4);
    assert_int_equal(eng_scheduler_start(s), 0);
    assert_int_equal(wait_at_least(&order, 4), 4);
    /* The last job stores its position after bumping `order`: only the
     * scheduler's lock, taken when it records the run, orders that store
     * before the reads below. */
    eng_job_info ji = wait_idle(s, "once", 4);
    for (int i = 0; i < 4; i++)
        if (a[i].ran_ms - a[i].queued_ms < a[i].delay_ms - 1)
            fail_msg("one-shot %d ran %lld ms after being queued with delay %lld", i,
                     (long long)(a[i].ran_ms - a[i].queued_ms), (long long)a[i].delay_ms);
    /* Due order: 0, 40, 80, 120 ms. */
    assert_int_equal(a[2].position, 0);
    assert_int_equal(a[1].position, 1);
    assert_int_equal(a[3].position, 2);
    assert_int_equal(a[0].position, 3);
    assert_false(ji.periodic);
    assert_int_equal(ji.runs, 4);
    assert_int_equal(ji.pending, 0);
    assert_int_equal(ji.next_run_ms, -1);
    assert_string_equal(ji.last_note, "once 0");
    eng_scheduler_free(s);
    assert_int_equal(atomic_load(&drops), 0); /* ran, so never dropped */
}

/* Two one-shots of one name run side by side; the job stays "running" until
 * the last of them ends, not the first. */
static void test_one_shots_of_one_name_overlap(void **state)
{
    (void)state;
    eng_scheduler *s;
    assert_int_equal(eng_scheduler_new(2, &s), 0);
    rec_job a, b;
    rec_init(&a, 0, 0, NULL);
    rec_init(&b, 0, 0, NULL);
    gate_set(&a, true);
    gate_set(&b, true);
    assert_int_equal(eng_scheduler_add_once(s, "flush-log", 0, rec_fn, &a, NULL), 0);
    assert_int_equal(eng_scheduler_add_once(s, "flush-log", 0, rec_fn, &b, NULL), 0);
    assert_int_equal(eng_scheduler_start(s), 0);
    assert_int_equal(wait_at_least(&a.runs, 1), 1);
    assert_int_equal(wait_at_least(&b.runs, 1), 1);
    gate_set(&a, false);
    assert_int_equal(wait_at_least(&a.finished, 1), 1);
    int64_t end = eng_mono_ms() + DEADLINE_MS;
    eng_job_info ji = job_info(s, "flush-log");
    while (ji.runs < 1 && eng_mono_ms() < end) {
        ts_sleep_ms(2);
        ji = job_info(s, "flush-log");
    }
    assert_int_equal(ji.runs, 1);
    assert_true(ji.running); /* b is still inside */
    gate_set(&b, false);
    ji = wait_idle(s, "flush-log", 2);
    assert_int_equal(ji.runs, 2);
    assert_false(ji.running);
    eng_scheduler_free(s);
    rec_destroy(&a);
    rec_destroy(&b);
}

static bool odd_id(void *varg, void *ctx)
{
    (void)ctx;
    return ((once_arg *)varg)->id % 2 == 1;
}

/* expedite runs the matching one-shots now; the others keep their delay
 * (an hour here) and are dropped at stop. */
static void test_expedite(void **state)
{
    (void)state;
    eng_scheduler *s;
    assert_int_equal(eng_scheduler_new(2, &s), 0);
    assert_int_equal(eng_scheduler_start(s), 0);
    _Atomic int order = 0, drops = 0;
    once_arg a[4];
    for (int i = 0; i < 4; i++) {
        a[i] = (once_arg){.id = i, .delay_ms = 3600000, .order = &order, .drops = &drops,
                          .position = -1, .queued_ms = eng_mono_ms()};
        assert_int_equal(eng_scheduler_add_once(s, "once", 3600000, once_fn, &a[i], once_drop), 0);
    }
    eng_scheduler_expedite(s, "other", odd_id, NULL); /* another name: nothing moves */
    eng_scheduler_expedite(s, "once", odd_id, NULL);
    assert_int_equal(wait_at_least(&order, 2), 2);
    /* As in test_one_shots_after_delay: a job stores its position after
     * bumping `order`, and only the scheduler's lock, taken when it records
     * the run, orders that store before the reads below. */
    eng_job_info ji = wait_idle(s, "once", 2);
    assert_true(a[1].position >= 0 && a[3].position >= 0);
    assert_int_equal(a[0].position, -1);
    assert_int_equal(a[2].position, -1);
    assert_int_equal(ji.pending, 2);
    eng_scheduler_free(s);
    assert_int_equal(atomic_load(&drops), 2);
}

/* ---- trigger ------------------------------------------------------------ */

static void test_trigger(void **state)
{
    (void)state;
    eng_scheduler *s;
    assert_int_equal(eng_scheduler_new(2, &s), 0);
    assert_int_equal(eng_scheduler_start(s), 0);
    rec_job j;
    rec_init(&j, 0, 0, NULL);
    assert_int_equal(eng_scheduler_add_periodic(s, "far", 60000, 60000, rec_fn, &j), 0);
    ts_sleep_ms(30);
    assert_int_equal(atomic_load(&j.runs), 0);
    assert_int_equal(eng_scheduler_trigger(s, "nope"), ENG_ENOTFOUND);

    /* A far-away job runs now when triggered. */
    gate_set(&j, true);
    assert_int_equal(eng_scheduler_trigger(s, "far"), 0);
    assert_int_equal(wait_at_least(&j.runs, 1), 1);
    /* Triggered while it runs: it runs again as soon as this run ends, not
     * in 60 s, and never alongside itself. */
    assert_true(job_info(s, "far").running);
    assert_int_equal(eng_scheduler_trigger(s, "far"), 0);
    ts_sleep_ms(20);
    assert_int_equal(atomic_load(&j.runs), 1);
    gate_set(&j, false);
    assert_int_equal(wait_at_least(&j.runs, 2), 2);
    eng_job_info ji = wait_idle(s, "far", 2);
    assert_int_equal(ji.runs, 2);
    ts_sleep_ms(50);
    assert_int_equal(atomic_load(&j.runs), 2); /* then back to its interval */
    assert_int_equal(atomic_load(&j.max_inside), 1);
    assert_true(ji.next_run_ms > eng_now_ms() + 50000);
    eng_scheduler_free(s);
    rec_destroy(&j);
}

/* ---- stop ----------------------------------------------------------------- */

typedef struct stopper {
    eng_scheduler *s;
    _Atomic int entered, done;
    _Atomic int queued, refused, drops, never_ran;
    int drops_before_refusal, drops_after_refusal;
    int refusal_rc;
} stopper;

static int never_fn(void *varg, char *note, size_t len)
{
    (void)note;
    (void)len;
    stopper *st = varg;
    atomic_fetch_add(&st->never_ran, 1);
    return 0;
}

static void stopper_drop(void *varg)
{
    stopper *st = varg;
    atomic_fetch_add(&st->drops, 1);
}

/* A running job that keeps queuing one-shots until the scheduler refuses:
 * that refusal can only come from a stop in progress. */
static int stopping_job(void *varg, char *note, size_t len)
{
    (void)note;
    (void)len;
    stopper *st = varg;
    atomic_store(&st->entered, 1);
    for (int i = 0; i < 5000; i++) {
        int before = atomic_load(&st->drops);
        int rc = eng_scheduler_add_once(st->s, "later", 60000, never_fn, st, stopper_drop);
        if (rc) {
            st->refusal_rc = rc;
            st->drops_before_refusal = before;
            st->drops_after_refusal = atomic_load(&st->drops);
            atomic_fetch_add(&st->refused, 1);
            break;
        }
        atomic_fetch_add(&st->queued, 1);
        ts_sleep_ms(2);
    }
    ts_sleep_ms(50); /* stop must wait for this */
    atomic_store(&st->done, 1);
    return 0;
}

static void test_stop_waits_and_drops(void **state)
{
    (void)state;
    stopper st = {0};
    assert_int_equal(eng_scheduler_new(2, &st.s), 0);
    assert_int_equal(eng_scheduler_start(st.s), 0);
    for (int i = 0; i < 3; i++)
        assert_int_equal(
            eng_scheduler_add_once(st.s, "later", 60000, never_fn, &st, stopper_drop), 0);
    assert_int_equal(eng_scheduler_add_periodic(st.s, "stopper", 0, 60000, stopping_job, &st), 0);
    assert_int_equal(wait_at_least(&st.entered, 1), 1);
    assert_true(wait_at_least(&st.queued, 2) >= 2);
    eng_job_info ji = job_info(st.s, "later");
    assert_true(ji.pending >= 5);
    eng_scheduler_free(st.s);
    /* Stop returned only after the running job finished. */
    assert_int_equal(atomic_load(&st.done), 1);
    assert_int_equal(atomic_load(&st.refused), 1);
    assert_int_equal(st.refusal_rc, ENG_ESHUTDOWN);
    /* The refused argument was dropped before add_once returned. */
    assert_int_equal(st.drops_after_refusal, st.drops_before_refusal + 1);
    /* Every queued one-shot was dropped, none ran: 3 + queued + 1 refused. */
    assert_int_equal(atomic_load(&st.never_ran), 0);
    assert_int_equal(atomic_load(&st.drops), 3 + atomic_load(&st.queued) + 1);
}

/* ---- statistics ----------------------------------------------------------- */

static void test_job_statistics(void **state)
{
    (void)state;
    eng_scheduler *s;
    assert_int_equal(eng_scheduler_new(3, &s), 0);
    int64_t t0 = eng_now_ms();
    rec_job ok, bad, never;
    rec_init(&ok, 20, 0, "all fine");
    rec_init(&bad, 0, -EIO, "disk on fire");
    rec_init(&never, 0, 0, NULL);
    assert_int_equal(eng_scheduler_add_periodic(s, "ok-job", 0, 60000, rec_fn, &ok), 0);
    assert_int_equal(eng_scheduler_add_periodic(s, "bad-job", 0, 10, rec_fn, &bad), 0);
    assert_int_equal(eng_scheduler_add_periodic(s, "never", 0, INT64_MAX, rec_fn, &never), 0);
    _Atomic int order = 0, drops = 0;
    once_arg la[2] = {{.order = &order, .drops = &drops}, {.order = &order, .drops = &drops}};
    once_arg soon = {.order = &order, .drops = &drops};
    assert_int_equal(eng_scheduler_add_once(s, "later", 60000, once_fn, &la[0], once_drop), 0);
    assert_int_equal(eng_scheduler_add_once(s, "later", 50000, once_fn, &la[1], once_drop), 0);
    assert_int_equal(eng_scheduler_add_once(s, "soon", 0, once_fn, &soon, once_drop), 0);

    /* Before start: listed, nothing run, next runs known. */
    eng_job_info ji = job_info(s, "ok-job");
    assert_true(ji.periodic);
    assert_int_equal(ji.interval_ms, 60000);
    assert_int_equal(ji.runs, 0);
    assert_int_equal(ji.last_start_ms, -1);
    assert_int_equal(ji.last_duration_ms, -1);
    assert_true(ji.next_run_ms >= t0 - 5 && ji.next_run_ms <= eng_now_ms() + 5);
    ji = job_info(s, "later");
    assert_false(ji.periodic);
    assert_int_equal(ji.pending, 2);
    assert_true(ji.next_run_ms >= t0 + 50000 - 5); /* the earliest of the two */
    assert_true(ji.next_run_ms <= eng_now_ms() + 50000 + 5);

    assert_int_equal(eng_scheduler_start(s), 0);
    assert_int_equal(wait_at_least(&ok.finished, 1), 1);
    assert_true(wait_at_least(&bad.finished, 3) >= 3);
    assert_int_equal(wait_at_least(&order, 1), 1);
    int64_t t1 = eng_now_ms();

    /* A successful run: result, note, start, duration, next run. */
    ji = wait_idle(s, "ok-job", 1);
    assert_int_equal(ji.runs, 1);
    assert_int_equal(ji.failures, 0);
    assert_int_equal(ji.last_result, 0);
    assert_string_equal(ji.last_note, "all fine");
    assert_false(ji.running);
    assert_true(ji.last_start_ms >= t0 - 5 && ji.last_start_ms <= t1);
    assert_true(ji.last_duration_ms >= 19);
    assert_true(ji.next_run_ms >= ji.last_start_ms + 60000 - 5);
    assert_true(ji.next_run_ms <= eng_now_ms() + 60000 + 5);

    /* A failing job: every run counted as a failure, the error kept. */
    ji = job_info(s, "bad-job");
    assert_true(ji.runs >= 3);
    assert_int_equal(ji.failures, ji.runs);
    assert_int_equal(ji.last_result, -EIO);
    assert_string_equal(ji.last_note, "disk on fire");
    assert_int_equal(ji.interval_ms, 10);

    /* INT64_MAX: listed, never run, nothing scheduled. */
    ji = job_info(s, "never");
    assert_true(ji.periodic);
    assert_int_equal(ji.interval_ms, INT64_MAX);
    assert_int_equal(ji.runs, 0);
    assert_int_equal(ji.next_run_ms, -1);
    assert_int_equal(ji.last_start_ms, -1);
    assert_int_equal(atomic_load(&never.runs), 0);

    /* One-shots: the one due at once ran; two are still pending. */
    ji = wait_idle(s, "soon", 1);
    assert_int_equal(ji.runs, 1);
    assert_int_equal(ji.pending, 0);
    assert_int_equal(ji.next_run_ms, -1);
    ji = job_info(s, "later");
    assert_int_equal(ji.runs, 0);
    assert_int_equal(ji.pending, 2);

    eng_scheduler_free(s);
    assert_int_equal(atomic_load(&drops), 2);
    assert_int_equal(atomic_load(&order), 1);
    rec_destroy(&ok);
    rec_destroy(&bad);
    rec_destroy(&never);
}

/* ---- a failure logged while names are added --------------------------------- */

static _Atomic int g_failure_lines;

static void count_failures(eng_log_level level, const char *line, void *ctx)
{
    (void)level;
    (void)ctx;
    if (strstr(line, "job flaky failed"))
        atomic_fetch_add(&g_failure_lines, 1);
}

/* A failed run is logged by name, after the job ran without the lock, while
 * a one-shot of a new name may grow (move) the table the name is in.  Each
 * name is added while the failing job is inside its run, so under TSan a
 * name read from the table outside the lock is a reported race. */
static void test_failure_logged_while_names_are_added(void **state)
{
    (void)state;
    eng_scheduler *s;
    assert_int_equal(eng_scheduler_new(1, &s), 0);
    rec_job bad;
    rec_init(&bad, 2, -EIO, "still broken");
    atomic_store(&g_failure_lines, 0);
    eng_logger_set_sink(count_failures, NULL, ENG_LOG_WARN);
    assert_int_equal(eng_scheduler_add_periodic(s, "flaky", 0, 1, rec_fn, &bad), 0);
    assert_int_equal(eng_scheduler_start(s), 0);
    _Atomic int order = 0, drops = 0;
    once_arg later = {.order = &order, .drops = &drops};
    enum { NAMES = 70 }; /* the table moves at 16, 32 and 64 names */
    for (int i = 0; i < NAMES; i++) {
        int64_t end = eng_mono_ms() + DEADLINE_MS;
        while (atomic_load(&bad.inside) == 0 && eng_mono_ms() < end)
            ;
        char name[32];
        snprintf(name, sizeof name, "later-%d", i);
        assert_int_equal(eng_scheduler_add_once(s, name, 60000, once_fn, &later, once_drop), 0);
    }
    eng_job_info ji = job_info(s, "later-69");
    assert_int_equal(ji.pending, 1);
    int runs = atomic_load(&bad.finished);
    assert_true(wait_at_least(&bad.finished, runs + 1) > runs);
    eng_scheduler_free(s);
    eng_logger_set_sink(NULL, NULL, ENG_LOG_INFO);
    assert_int_equal(atomic_load(&drops), NAMES);
    assert_int_equal(atomic_load(&order), 0);
    assert_true(atomic_load(&g_failure_lines) > 0);
    rec_destroy(&bad);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_periodic_delay_and_interval),
        cmocka_unit_test(test_never_overlaps_itself),
        cmocka_unit_test(test_interval_counts_from_run_end),
        cmocka_unit_test(test_huge_delays_and_triggered_never_job),
        cmocka_unit_test(test_slow_job_does_not_delay_others),
        cmocka_unit_test(test_one_shots_after_delay),
        cmocka_unit_test(test_one_shots_of_one_name_overlap),
        cmocka_unit_test(test_expedite),
        cmocka_unit_test(test_trigger),
        cmocka_unit_test(test_stop_waits_and_drops),
        cmocka_unit_test(test_job_statistics),
        cmocka_unit_test(test_failure_logged_while_names_are_added),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
