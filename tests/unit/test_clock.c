/*
 * test_clock.c - the wall clock stepped under a running engine (an NTP
 * step, a VM resume, `date -s`), through eng_clock_set_wall.
 *
 * Waits and intervals run on the monotonic clock; what Kafka decides by
 * wall time (LogAppendTime, segment.ms, retention.ms) follows the stepped
 * clock as Kafka's would, without going wrong when it goes back:
 *
 *   - a periodic job keeps its interval through steps back and forward: no
 *     stall after a step back, no burst after a step forward; the next run
 *     the job list shows is on the stepped clock, never in its past;
 *   - LogAppendTime never goes back along the offsets when the clock is set
 *     back, in the same process or after a restart;
 *   - segment.ms: a clock set back behind the segment's first timestamp
 *     does not roll at every append, nor after; a step forward past
 *     segment.ms rolls once, at the next append;
 *   - retention.ms: a step back deletes nothing (segments look as if from
 *     the future and are kept); a step forward deletes what is old by it,
 *     as Kafka does;
 *   - file.delete.delay.ms is waited on the monotonic clock: a step
 *     forward does not unlink .deleted files early, a step back does not
 *     keep them;
 *   - the cleaner: a partition out of disk space is tried again after its
 *     backoff even when the clock was set back meanwhile; a cleaning's
 *     duration is not the step; the offset-map failure line stays at one a
 *     minute when the clock jumps forward.
 *
 * No assertion on how fast anything happens: lower bounds come from the
 * monotonic clock, upper bounds are generous deadlines.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "compact_util.h"
#include "eng_cleaner.h"
#include "eng_fault.h"
#include "eng_fs.h"
#include "eng_manager.h"
#include "eng_retention.h"
#include "eng_scheduler.h"
#include "manager_fixture.h"
#include "support.h"

#include <errno.h>
#include <stdatomic.h>
#include <time.h>

#define HOUR_MS 3600000LL
#define DAY_MS (24 * HOUR_MS)
#define DEADLINE_MS 20000 /* generous: a shared, noisy machine */

/* ---- the stepped clock ---------------------------------------------------- */

static _Atomic int64_t wall_offset_ms;

static int64_t stepped_wall(void)
{
    return eng_real_now_ms() + atomic_load(&wall_offset_ms);
}

/* Sets the wall clock `offset_ms` away from the real one. */
static void set_clock(int64_t offset_ms)
{
    atomic_store(&wall_offset_ms, offset_ms);
    eng_clock_set_wall(stepped_wall);
}

static int clock_setup(void **state)
{
    atomic_store(&wall_offset_ms, 0);
    eng_clock_set_wall(stepped_wall);
    return setup_cleaning(state);
}

static int clock_teardown(void **state)
{
    eng_fault_set(NULL);
    eng_clock_set_wall(NULL);
    return teardown(state);
}

/* ---- helpers -------------------------------------------------------------- */

static void topic(eng_manager *m, const char *name, const char *const *keys,
                  const char *const *vals, size_t n)
{
    eng_errdetail err = {0};
    if (eng_manager_create_topic(m, name, 1, keys, vals, n, &err))
        fail_msg("create %s: %s", name, err.message);
}

static eng_partition *part(eng_manager *m, const char *t)
{
    eng_partition *p;
    assert_int_equal(eng_manager_partition(m, t, 0, &p, NULL), 0);
    return p;
}

/* Appends one record at ts; returns what the append answered. */
static eng_append_result append_at(eng_partition *p, int64_t ts)
{
    cu_kv kv = {"k", "v", 0};
    size_t len;
    uint8_t *buf = cu_encode(&kv, 1, ts, NULL, &len);
    eng_append_opts o = {.expected_offset = -1};
    eng_append_result res;
    eng_errdetail err = {0};
    int rc = eng_partition_append(p, buf, len, &o, &res, &err);
    free(buf);
    if (rc)
        fail_msg("append: %s (%s)", eng_strerror(rc), err.message);
    return res;
}

static uint32_t segments(eng_partition *p)
{
    eng_partition_info in;
    eng_partition_info_get(p, &in);
    return in.segment_count;
}

static eng_job_info job(eng_manager *m, const char *name)
{
    eng_job_info *v, out = {.next_run_ms = -2};
    size_t n;
    assert_int_equal(eng_manager_jobs(m, &v, &n), 0);
    for (size_t i = 0; i < n; i++)
        if (!strcmp(v[i].name, name))
            out = v[i];
    free(v);
    if (out.next_run_ms == -2)
        fail_msg("no job %s", name);
    return out;
}

/* Runs log-retention now and waits for that run to end. */
static void run_retention(eng_manager *m)
{
    uint64_t before = job(m, "log-retention").runs;
    assert_int_equal(eng_manager_trigger_job(m, "log-retention"), 0);
    int64_t end = eng_mono_ms() + DEADLINE_MS;
    while (job(m, "log-retention").runs == before && eng_mono_ms() < end)
        ts_sleep_ms(5);
    assert_true(job(m, "log-retention").runs > before);
}

/* ---- scheduler ------------------------------------------------------------ */

#define RUNS 6
#define INTERVAL_MS 150

typedef struct ticks {
    _Atomic int n;
    int64_t mono_ms[RUNS + 16];
} ticks;

static int tick(void *arg, char *note, size_t len)
{
    (void)note;
    (void)len;
    ticks *t = arg;
    int i = atomic_load(&t->n);
    if (i < RUNS + 16)
        t->mono_ms[i] = eng_mono_ms();
    atomic_store(&t->n, i + 1);
    return 0;
}

static bool wait_ticks(ticks *t, int want)
{
    int64_t end = eng_mono_ms() + DEADLINE_MS;
    while (atomic_load(&t->n) < want && eng_mono_ms() < end)
        ts_sleep_ms(5);
    return atomic_load(&t->n) >= want;
}

/* A day back, then two forward: the job neither waits the day out nor
 * makes up for it with a burst of runs. */
static void test_job_interval_survives_steps(void **state)
{
    (void)state;
    eng_scheduler *s;
    assert_int_equal(eng_scheduler_new(2, &s), 0);
    assert_int_equal(eng_scheduler_start(s), 0);
    ticks t = {0};
    assert_int_equal(eng_scheduler_add_periodic(s, "tick", 0, INTERVAL_MS, tick, &t), 0);
    assert_true(wait_ticks(&t, 1));
    set_clock(-DAY_MS);
    assert_true(wait_ticks(&t, 3)); /* no stall */
    set_clock(DAY_MS);
    assert_true(wait_ticks(&t, RUNS));
    eng_scheduler_stop(s);
    eng_scheduler_free(s);
    for (int i = 1; i < RUNS; i++)
        if (t.mono_ms[i] - t.mono_ms[i - 1] < INTERVAL_MS - 1)
            fail_msg("runs %d and %d were %lld ms apart (interval %d)", i - 1, i,
                     (long long)(t.mono_ms[i] - t.mono_ms[i - 1]), INTERVAL_MS);
}

static int idle(void *arg, char *note, size_t len)
{
    (void)arg;
    (void)note;
    (void)len;
    return 0;
}

/* The job list's next run is on the clock as it reads now: within one
 * interval ahead of it, whichever way it was stepped. */
static void test_next_run_follows_step(void **state)
{
    (void)state;
    eng_scheduler *s;
    assert_int_equal(eng_scheduler_new(1, &s), 0);
    assert_int_equal(eng_scheduler_start(s), 0);
    assert_int_equal(eng_scheduler_add_periodic(s, "later", 60000, 60000, idle, NULL), 0);
    const int64_t steps[] = {DAY_MS, -DAY_MS, 0};
    for (size_t k = 0; k < sizeof steps / sizeof *steps; k++) {
        set_clock(steps[k]);
        int64_t before = eng_now_ms();
        eng_job_info *v;
        size_t n;
        assert_int_equal(eng_scheduler_jobs(s, &v, &n), 0);
        int64_t after = eng_now_ms(), next = v[0].next_run_ms;
        free(v);
        /* 2 ms: the two clocks each round down to a millisecond. */
        if (next < before - 2 || next > after + 60000 + 2)
            fail_msg("clock stepped %lld ms: next run %lld is outside [%lld, %lld + 60000]",
                     (long long)steps[k], (long long)next, (long long)before, (long long)after);
    }
    eng_scheduler_stop(s);
    eng_scheduler_free(s);
}

/* ---- LogAppendTime and segment.ms ---------------------------------------- */

static const char *const TS_KEYS[] = {"message.timestamp.type", "segment.ms"};

/* Set back an hour, in the process and then across a clean restart, the
 * stamps hold at the last one until the clock catches up. */
static void test_log_append_time_never_goes_back(void **state)
{
    fixture *f = *state;
    eng_manager *m = open_mgr(f);
    const char *const vals[] = {"LogAppendTime"};
    topic(m, "lat", TS_KEYS, vals, 1);
    eng_partition *p = part(m, "lat");
    int64_t t1 = append_at(p, CU_T0).log_append_time;
    assert_true(t1 >= eng_real_now_ms() - 60000);
    set_clock(-HOUR_MS);
    int64_t t2 = append_at(p, CU_T0).log_append_time;
    assert_int_equal(t2, t1);
    eng_partition_unref(p);
    eng_manager_close(m);

    m = open_mgr(f);
    p = part(m, "lat");
    int64_t t3 = append_at(p, CU_T0).log_append_time;
    if (t3 < t2)
        fail_msg("after a restart with the clock an hour back, LogAppendTime went from %lld to %lld",
                 (long long)t2, (long long)t3);
    set_clock(0);
    int64_t t4 = append_at(p, CU_T0).log_append_time;
    assert_true(t4 >= t3);
    assert_true(t4 >= eng_real_now_ms() - 60000);
    eng_partition_unref(p);
    eng_manager_close(m);
}

/* segment.ms (an hour) as Kafka's timeWaitedForRoll: the incoming batch's
 * timestamp minus the segment's first.  Under either timestamp type, the
 * clock set two hours back rolls nothing, however many appends; two hours
 * ahead rolls once, then not again until another hour. */
static void check_segment_ms(fixture *f, bool log_append_time)
{
    eng_manager *m = open_mgr(f);
    const char *vals[] = {log_append_time ? "LogAppendTime" : "CreateTime", "3600000"};
    topic(m, "roll", TS_KEYS, vals, 2);
    eng_partition *p = part(m, "roll");
    append_at(p, eng_now_ms()); /* CreateTime records carry the clock, as the API's default */
    set_clock(-2 * HOUR_MS);
    for (int i = 0; i < 5; i++)
        append_at(p, eng_now_ms());
    assert_int_equal(segments(p), 1);
    set_clock(2 * HOUR_MS);
    append_at(p, eng_now_ms());
    assert_int_equal(segments(p), 2);
    for (int i = 0; i < 5; i++)
        append_at(p, eng_now_ms());
    assert_int_equal(segments(p), 2);
    set_clock(-2 * HOUR_MS); /* behind the new segment's first timestamp */
    for (int i = 0; i < 5; i++)
        append_at(p, eng_now_ms());
    assert_int_equal(segments(p), 2);
    set_clock(0);
    eng_partition_unref(p);
    eng_manager_close(m);
}

static void test_segment_ms_log_append_time(void **state)
{
    check_segment_ms(*state, true);
}

static void test_segment_ms_create_time(void **state)
{
    check_segment_ms(*state, false);
}

/* ---- retention.ms and file.delete.delay.ms -------------------------------- */

/* Three closed segments and an active one, of records stamped now. */
static eng_partition *three_segments(eng_manager *m, const char *name, const char *delay)
{
    const char *keys[] = {"retention.ms", "file.delete.delay.ms"};
    const char *vals[] = {"3600000", delay};
    topic(m, name, keys, vals, 2);
    eng_partition *p = part(m, name);
    for (int i = 0; i < 3; i++) {
        append_at(p, eng_now_ms());
        cu_roll(p);
    }
    append_at(p, eng_now_ms());
    assert_int_equal(segments(p), 4);
    return p;
}

static bool wait_deleted_files(const char *dir, int want)
{
    int64_t end = eng_mono_ms() + DEADLINE_MS;
    while (cu_count_suffix(dir, ".deleted") != want && eng_mono_ms() < end)
        ts_sleep_ms(10);
    return cu_count_suffix(dir, ".deleted") == want;
}

static void test_retention_and_delete_delay(void **state)
{
    fixture *f = *state;
    f->opts.jobs.initial_delay_ms = 0;
    eng_manager *m = open_mgr(f);
    assert_int_equal(eng_manager_start_jobs(m), 0);
    eng_partition *slow = three_segments(m, "slow", "60000");
    eng_partition *fast = three_segments(m, "fast", "300");
    char slow_dir[700], fast_dir[700];
    snprintf(slow_dir, sizeof slow_dir, "%s/slow-0", f->data);
    snprintf(fast_dir, sizeof fast_dir, "%s/fast-0", f->data);

    /* A day back: every segment is from the future; nothing goes. */
    set_clock(-DAY_MS);
    run_retention(m);
    assert_int_equal(segments(slow), 4);
    assert_int_equal(segments(fast), 4);
    assert_true(logged(f, "holds a timestamp in the future"));

    /* Two hours ahead: every segment is old, and goes (behind a fresh
     * active one), as in Kafka. */
    set_clock(2 * HOUR_MS);
    run_retention(m);
    assert_int_equal(segments(slow), 1);
    assert_int_equal(segments(fast), 1);
    assert_int_equal(cu_count_suffix(slow_dir, ".log.deleted"), 4);

    /* A day further ahead: slow's minute has not passed on the monotonic
     * clock, so its files stay; a day back, fast's 300 ms still end. */
    set_clock(DAY_MS + 2 * HOUR_MS);
    ts_sleep_ms(500);
    assert_int_equal(cu_count_suffix(slow_dir, ".log.deleted"), 4);
    set_clock(-DAY_MS);
    assert_true(wait_deleted_files(fast_dir, 0));
    assert_int_equal(cu_count_suffix(slow_dir, ".log.deleted"), 4);
    set_clock(0);
    eng_partition_unref(slow);
    eng_partition_unref(fast);
    eng_manager_close(m);
}

/* ---- the cleaner ---------------------------------------------------------- */

static void compacted(eng_manager *m, const char *name)
{
    const char *keys[] = {"cleanup.policy"}, *vals[] = {"compact"};
    topic(m, name, keys, vals, 1);
}

/* 10 keys, 5 versions each (50 records), then a roll: half cleanable. */
static void write_versions(eng_partition *p)
{
    char keys[10][16], vals[10][32];
    cu_kv recs[10];
    for (int v = 0; v < 5; v++) {
        for (int k = 0; k < 10; k++) {
            snprintf(keys[k], sizeof keys[k], "k%d", k);
            snprintf(vals[k], sizeof vals[k], "v%d-%d", v, k);
            recs[k] = (cu_kv){keys[k], vals[k], 0};
        }
        cu_append(p, recs, 10, eng_now_ms());
    }
    cu_roll(p);
}

static bool wait_checkpoint(eng_cleaner *c, const char *t, int64_t want)
{
    int64_t end = eng_mono_ms() + DEADLINE_MS;
    while (eng_cleaner_checkpoint(c, t, 0) != want && eng_mono_ms() < end)
        ts_sleep_ms(10);
    return eng_cleaner_checkpoint(c, t, 0) == want;
}

/* Out of disk space: tried again after four backoffs (2 s here) of the
 * monotonic clock, though the wall clock went a day back meanwhile; the
 * status shows the retry on the stepped clock. */
static void test_out_of_room_retry_survives_step_back(void **state)
{
    fixture *f = *state;
    f->copts.backoff_ms = 500;
    eng_manager *m = open_mgr(f);
    compacted(m, "full");
    eng_partition *p = part(m, "full");
    write_versions(p);
    eng_fault_set("segment.append.partial=enospc"); /* the cleaner's first write */
    assert_int_equal(eng_manager_start_cleaner(m), 0);
    eng_cleaner *c = eng_manager_cleaner(m);
    size_t marked = 0;
    int64_t end = eng_mono_ms() + DEADLINE_MS;
    while (!marked && eng_mono_ms() < end) {
        eng_cleaner_status s;
        assert_int_equal(eng_cleaner_status_get(c, &s), 0);
        marked = s.nuncleanable;
        eng_cleaner_status_free(&s);
        if (!marked)
            ts_sleep_ms(5);
    }
    assert_int_equal(marked, 1);
    set_clock(-DAY_MS);
    eng_cleaner_status s;
    assert_int_equal(eng_cleaner_status_get(c, &s), 0);
    if (s.nuncleanable == 1) { /* not tried again yet: due within 2 s of now */
        int64_t now = eng_now_ms();
        assert_true(s.uncleanable[0].retry_ms > now - 100);
        assert_true(s.uncleanable[0].retry_ms <= now + 2000 + 2);
    }
    eng_cleaner_status_free(&s);
    if (!wait_checkpoint(c, "full", 50))
        fail_msg("not tried again %d s after the clock went a day back", DEADLINE_MS / 1000);
    assert_true(logged(f, "full-0: trying to clean it again"));
    set_clock(0);
    eng_partition_unref(p);
    eng_manager_close(m);
}

/* A wall clock read an hour earlier each time: a cleaning that measured
 * itself by it would last minus hours. */
static _Atomic int64_t falling_reads;

static int64_t falling_wall(void)
{
    return eng_real_now_ms() - atomic_fetch_add(&falling_reads, 1) * HOUR_MS;
}

static void test_clean_duration_ignores_steps(void **state)
{
    fixture *f = *state;
    /* On demand only: a cleaner thread picked "dur" (half dirty) itself,
     * and the run here then found it busy, or clean (failed 3 of 3 under
     * make tsan). */
    f->copts.threads = 0;
    eng_manager *m = open_mgr(f);
    compacted(m, "dur");
    eng_partition *p = part(m, "dur");
    write_versions(p);
    assert_int_equal(eng_manager_start_cleaner(m), 0);
    eng_clock_set_wall(falling_wall);
    eng_clean_stats st;
    int rc = eng_cleaner_clean_now(eng_manager_cleaner(m), p, false, &st);
    eng_clock_set_wall(stepped_wall);
    assert_int_equal(rc, 0);
    assert_int_equal(st.records_removed, 40);
    if (st.duration_ms < 0 || st.duration_ms > DEADLINE_MS)
        fail_msg("a cleaning under a stepping clock lasted %lld ms", (long long)st.duration_ms);
    eng_partition_unref(p);
    eng_manager_close(m);
}

static int count_logged(fixture *f, const char *needle)
{
    pthread_mutex_lock(&f->mu);
    int n = 0;
    for (const char *s = f->log; (s = strstr(s, needle)); s++)
        n++;
    pthread_mutex_unlock(&f->mu);
    return n;
}

/* The offset map cannot be had twice, a second apart; the clock jumps a
 * day forward in between: still one line, the rate is a minute of the
 * monotonic clock. */
static void test_map_alloc_log_rate_survives_step(void **state)
{
    fixture *f = *state;
    eng_manager *m = open_mgr(f);
    compacted(m, "nomem");
    eng_partition *p = part(m, "nomem");
    write_versions(p);
    eng_fault_set("cleaner.map_alloc=eio@1,cleaner.map_alloc=eio@2");
    assert_int_equal(eng_manager_start_cleaner(m), 0);
    eng_cleaner *c = eng_manager_cleaner(m);
    size_t runs = 0;
    int64_t end = eng_mono_ms() + DEADLINE_MS;
    while (runs == 0 && eng_mono_ms() < end) {
        eng_cleaner_status s;
        assert_int_equal(eng_cleaner_status_get(c, &s), 0);
        runs = s.nruns;
        eng_cleaner_status_free(&s);
        if (!runs)
            ts_sleep_ms(5);
    }
    assert_int_equal(runs, 1);
    set_clock(DAY_MS);
    assert_true(wait_checkpoint(c, "nomem", 50));
    eng_cleaner_status s;
    assert_int_equal(eng_cleaner_status_get(c, &s), 0);
    assert_int_equal(s.nruns, 3); /* two failures, then the clean */
    eng_cleaner_status_free(&s);
    assert_int_equal(count_logged(f, "cannot allocate its"), 1);
    set_clock(0);
    eng_partition_unref(p);
    eng_manager_close(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_job_interval_survives_steps, clock_setup,
                                        clock_teardown),
        cmocka_unit_test_setup_teardown(test_next_run_follows_step, clock_setup, clock_teardown),
        cmocka_unit_test_setup_teardown(test_log_append_time_never_goes_back, clock_setup,
                                        clock_teardown),
        cmocka_unit_test_setup_teardown(test_segment_ms_log_append_time, clock_setup,
                                        clock_teardown),
        cmocka_unit_test_setup_teardown(test_segment_ms_create_time, clock_setup, clock_teardown),
        cmocka_unit_test_setup_teardown(test_retention_and_delete_delay, clock_setup,
                                        clock_teardown),
        cmocka_unit_test_setup_teardown(test_out_of_room_retry_survives_step_back, clock_setup,
                                        clock_teardown),
        cmocka_unit_test_setup_teardown(test_clean_duration_ignores_steps, clock_setup,
                                        clock_teardown),
        cmocka_unit_test_setup_teardown(test_map_alloc_log_rate_survives_step, clock_setup,
                                        clock_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
