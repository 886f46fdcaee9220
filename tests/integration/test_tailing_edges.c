/*
 * test_tailing_edges.c - edge cases of reads that wait and stream
 * (api_read.c, api_wait.c), against the real server binary; the common
 * cases are in test_tailing.c.
 *
 * Deadlines under traffic: while appends every few milliseconds keep waking
 * an SSE reader on one partition, a long-poll on an idle partition still
 * ends at its wait_ms and an idle SSE stream still gets its heartbeats (the
 * registry's sweep once ran only when 20 ms passed without any wake, so
 * steady traffic anywhere held every deadline back).
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "harness.h"
#include "read_util.h"
#include "tail_util.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static ls_server g_srv;
static ls_server *S = &g_srv;

static const char *const settings[] = {"http.sse.heartbeat.ms=300", "log.initial.task.delay.ms=3600000",
                                       NULL};

static int group_setup(void **state)
{
    (void)state;
    return ls_start(S, settings);
}

static int group_teardown(void **state)
{
    (void)state;
    ls_stop(S);
    ls_cleanup(S);
    return 0;
}

/* ---- deadlines under traffic ------------------------------------------------------------ */

/* Appends to busy/0 every couple of milliseconds until stop is set. */
typedef struct appender {
    ls_server *s;
    _Atomic int stop;
    int appended, failed;
    pthread_t th;
} appender;

static void *append_main(void *arg)
{
    appender *a = arg;
    while (!atomic_load(&a->stop)) {
        if (ls_append_json(a->s, "busy", 0, "{\"records\":[{\"value\":\"x\"}]}") == 200)
            a->appended++;
        else
            a->failed++;
        ru_sleep_ms(2);
    }
    return NULL;
}

static void test_deadlines_kept_under_traffic(void **state)
{
    (void)state;
    assert_int_equal(ls_create_topic(S, "busy", 1, NULL), 201);
    assert_int_equal(ls_create_topic(S, "idle", 1, NULL), 201);
    long long base = parked(S);
    /* A reader that parks again after every append: each append wakes the
     * registry. */
    mset busy, idle_sse;
    mset_start(&busy, S, "/v1/topics/busy/partitions/0/records?offset=latest", 1, "text/event-stream");
    mset_start(&idle_sse, S, "/v1/topics/idle/partitions/0/records?offset=latest", 1,
               "text/event-stream");
    long long end = ru_mono_ms() + 5000;
    while (parked(S) < base + 2 && ru_mono_ms() < end) {
        mset_pump(&busy, 20);
        mset_pump(&idle_sse, 20);
    }
    assert_int_equal(parked(S), base + 2);
    appender a = {.s = S};
    assert_int_equal(pthread_create(&a.th, NULL, append_main, &a), 0);
    mset_pump(&busy, 200);
    poll_req q;
    assert_int_equal(poll_start(&q, S, "/v1/topics/idle/partitions/0/records?offset=latest&wait_ms=500"), 0);
    /* Keep the traffic going past the long-poll's deadline (and long enough
     * for a few heartbeats), or until it is clear the deadline was missed. */
    long long t0 = ru_mono_ms();
    end = t0 + 8000;
    while (ru_mono_ms() < end && (!atomic_load(&q.done) || ru_mono_ms() - t0 < 1500)) {
        mset_pump(&busy, 20);
        mset_pump(&idle_sse, 20);
    }
    atomic_store(&a.stop, 1);
    pthread_join(a.th, NULL);
    pthread_join(q.th, NULL);
    int heartbeats;
    json_t *ev = ru_sse_parse(idle_sse.r[0].body ? idle_sse.r[0].body : "", idle_sse.r[0].len, &heartbeats);
    int busy_hb;
    json_t *busy_ev = ru_sse_parse(busy.r[0].body ? busy.r[0].body : "", busy.r[0].len, &busy_hb);
    fprintf(stderr,
            "# %d appends (%d failed); wait_ms=500 answered after %lld ms; busy reader got %zu "
            "events, idle one %d heartbeats\n",
            a.appended, a.failed, q.t1 - q.t0, json_array_size(busy_ev), heartbeats);
    assert_int_equal(a.failed, 0);
    assert_true(a.appended >= 50);
    assert_true(json_array_size(busy_ev) >= 50);
    assert_int_equal(q.rc, 0);
    assert_int_equal(q.r.status, 200);
    assert_int_equal(json_array_size(ls_jget(&q.r, "records")), 0);
    assert_true(q.t1 - q.t0 >= 450);
    assert_true(q.t1 - q.t0 < 3000);
    assert_int_equal(json_array_size(ev), 0);
    assert_true(heartbeats >= 1);
    json_decref(ev);
    json_decref(busy_ev);
    ls_resp_free(&q.r);
    mset_free(&busy);
    mset_free(&idle_sse);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_deadlines_kept_under_traffic),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
