/*
 * test_waiters.c - the parked-reader registry (api_wait.h) over a real
 * partition, without HTTP:
 *
 *   - a notify wakes a waiter only when the high watermark passes its
 *     offset (a notify at its offset leaves it parked); a waiter on another
 *     offset of the same partition stays;
 *   - parking where data already is, or on a partition being deleted
 *     (retired: its own notify may have come before the waiter was there),
 *     makes the waiter ready at once;
 *   - parking past the cap fails with ENG_ELIMIT; stop wakes the rest with
 *     SHUTDOWN;
 *   - a long-poll's deadline is monotonic: with the wall clock stepped a
 *     day ahead as it parks and a day back while it waits, it times out
 *     when due, neither before nor a day later.
 *
 * Whether a waiter is parked is read right after the call that would move
 * it (notify and park decide under the registry's lock, before returning);
 * wake-ups are waited for on a condition variable, never slept for.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "api_wait.h"
#include "eng_fs.h"
#include "partition_fixture.h"

#include <pthread.h>
#include <stdatomic.h>
#include <time.h>

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;

typedef struct probe {
    api_waiter w; /* first: the wake callback gets &w */
    int wakes;
    api_wake_reason why;
} probe;

static void on_wake(api_waiter *w, api_wake_reason why)
{
    probe *pr = (probe *)w;
    pthread_mutex_lock(&mu);
    pr->wakes++;
    pr->why = why;
    pthread_cond_broadcast(&cv);
    pthread_mutex_unlock(&mu);
}

static void park(api_waiters *ws, probe *pr, eng_partition *p, int64_t offset)
{
    *pr = (probe){.w = {.p = p, .offset = offset, .deadline_ms = INT64_MAX, .fd = -1,
                        .wake = on_wake}};
    assert_int_equal(api_waiter_park(ws, &pr->w), 0);
}

/* Waits (10 s at most) for pr's first wake-up and returns its reason. */
static api_wake_reason woken(probe *pr)
{
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 10;
    pthread_mutex_lock(&mu);
    while (pr->wakes == 0)
        if (pthread_cond_timedwait(&cv, &mu, &until) != 0)
            break;
    int wakes = pr->wakes;
    api_wake_reason why = pr->why;
    pthread_mutex_unlock(&mu);
    assert_int_equal(wakes, 1);
    return why;
}

static void test_notify_wakes_only_past_the_offset(void **state)
{
    fixture *f = *state;
    eng_partition *p = open_part(f, true, 0, NULL);
    append_ok(p, 0, 2, T0, 10);
    api_waiters *ws;
    assert_int_equal(api_waiters_start(1, 16, &ws), 0);
    probe a, b;
    park(ws, &a, p, 2);
    park(ws, &b, p, 3);
    assert_int_equal(api_waiters_parked(ws), 2);
    api_waiters_notify(ws, p, 2); /* nothing past 2 yet */
    assert_int_equal(api_waiters_parked(ws), 2);
    append_ok(p, 2, 1, T0, 10); /* the partition's own hook is the fixture's */
    api_waiters_notify(ws, p, 3);
    assert_int_equal(api_waiters_parked(ws), 1); /* a, not b */
    assert_int_equal(woken(&a), API_WAKE_DATA);
    api_waiters_stop(ws);
    assert_int_equal(woken(&b), API_WAKE_SHUTDOWN);
    api_waiters_free(ws);
    eng_partition_close(p);
    eng_partition_unref(p);
}

static void test_park_where_data_is_or_partition_retired(void **state)
{
    fixture *f = *state;
    eng_partition *p = open_part(f, true, 0, NULL);
    append_ok(p, 0, 2, T0, 10);
    api_waiters *ws;
    assert_int_equal(api_waiters_start(1, 2, &ws), 0);
    probe early, at_end, over_cap;
    park(ws, &early, p, 1); /* offset 1 exists: ready at once */
    assert_int_equal(api_waiters_parked(ws), 0);
    assert_int_equal(woken(&early), API_WAKE_DATA);

    park(ws, &at_end, p, 2);
    probe filler;
    park(ws, &filler, p, 2);
    over_cap = (probe){.w = {.p = p, .offset = 2, .deadline_ms = INT64_MAX, .fd = -1,
                             .wake = on_wake}};
    assert_int_equal(api_waiter_park(ws, &over_cap.w), ENG_ELIMIT);
    assert_int_equal(api_waiters_parked(ws), 2);
    api_waiters_stop(ws);
    assert_int_equal(woken(&at_end), API_WAKE_SHUTDOWN);
    assert_int_equal(woken(&filler), API_WAKE_SHUTDOWN);
    api_waiters_free(ws);

    /* Deleted under the reader: parking at the end still wakes at once, so
     * the reader sees the topic is gone instead of waiting out its wait. */
    assert_int_equal(api_waiters_start(1, 16, &ws), 0);
    eng_partition_retire(p);
    probe late;
    park(ws, &late, p, 2);
    assert_int_equal(api_waiters_parked(ws), 0);
    assert_int_equal(woken(&late), API_WAKE_DATA);
    api_waiters_free(ws);
    eng_partition_unref(p);
}

static _Atomic int64_t wall_offset_ms;

static int64_t stepped_wall(void)
{
    return eng_real_now_ms() + atomic_load(&wall_offset_ms);
}

static void test_wait_ends_on_time_across_clock_steps(void **state)
{
    const int64_t day_ms = 86400000;
    fixture *f = *state;
    eng_partition *p = open_part(f, true, 0, NULL);
    append_ok(p, 0, 2, T0, 10);
    api_waiters *ws;
    assert_int_equal(api_waiters_start(1, 16, &ws), 0);
    atomic_store(&wall_offset_ms, day_ms);
    eng_clock_set_wall(stepped_wall);
    int64_t due = eng_mono_ms() + 300;
    probe pr = {.w = {.p = p, .offset = 2, .deadline_ms = due, .fd = -1, .wake = on_wake}};
    assert_int_equal(api_waiter_park(ws, &pr.w), 0);
    atomic_store(&wall_offset_ms, -day_ms);
    assert_int_equal(woken(&pr), API_WAKE_TIMEOUT);
    assert_true(eng_mono_ms() >= due);
    eng_clock_set_wall(NULL);
    api_waiters_stop(ws);
    api_waiters_free(ws);
    eng_partition_unref(p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_notify_wakes_only_past_the_offset, setup, teardown),
        cmocka_unit_test_setup_teardown(test_park_where_data_is_or_partition_retired, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_wait_ends_on_time_across_clock_steps, setup,
                                        teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
