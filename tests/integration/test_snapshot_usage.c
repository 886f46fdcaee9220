/*
 * test_snapshot_usage.c - the snapshots' disk use (README "Snapshots") is
 * measured by the snapshot-usage background job, and GET /v1/admin/snapshots
 * and GET /v1/log-dirs serve its last measurement:
 *   - with one HTTP thread and every measurement stalled 3 s (a slow disk,
 *     or a data dir of many files), a health probe, a snapshot listing and
 *     /v1/log-dirs are answered while a measurement is under way (before,
 *     each answer read every file of every snapshot on the HTTP thread, and
 *     the probe waited for it);
 *   - the figures are right at once after a snapshot is taken or removed,
 *     and the job is listed in /v1/jobs;
 *   - they catch up with what retention frees within the job's interval;
 *   - a stop during a measurement ends it at the next snapshot.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "harness.h"
#include "support.h"

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SNAPS "/v1/admin/snapshots"
#define MEASURE "snapshot.measure"

static const char *const one_thread[] = {"http.threads=1", "log.cleaner.threads=0",
                                         "log.retention.check.interval.ms=600000",
                                         "log.segment.delete.delay.ms=600000", NULL};

/* Lines of the server's log holding `what` about the measure point. */
static int fault_lines(ls_server *s, const char *what)
{
    char line[128];
    snprintf(line, sizeof line, "fault point " MEASURE ": %s", what);
    return ls_file_count(s->log_path, line);
}

static void wait_stalls_begun(ls_server *s, int n)
{
    for (int i = 0; i < 6000 && fault_lines(s, "stalling") < n; i++)
        ts_sleep_ms(5);
    if (fault_lines(s, "stalling") < n)
        fail_msg("%d measurements did not begin (log: %s)", n, s->log_path);
}

/* Stopped (if a failed check left it running) and removed by teardown. */
static ls_server g_s;

static int setup(void **state)
{
    (void)state;
    memset(&g_s, 0, sizeof g_s);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    unsetenv("LOGSTORE_FAULT");
    ls_cleanup(&g_s);
    return 0;
}

static void start_with(ls_server *s, const char *fault, const char *const *settings)
{
    if (fault)
        setenv("LOGSTORE_FAULT", fault, 1);
    int rc = ls_start(s, settings);
    unsetenv("LOGSTORE_FAULT");
    if (rc)
        fail_msg("the server did not start (log: %s)", s->log_path);
}

/* A topic of two partitions, the first with a sealed segment. */
static void load(ls_server *s)
{
    assert_int_equal(ls_create_topic(s, "t", 2, NULL), 201);
    const char *rec = "{\"records\":[{\"key\":\"k\",\"value\":\"some value\"}]}";
    for (int p = 0; p < 2; p++)
        assert_int_equal(ls_append_json(s, "t", p, rec), 200);
    ls_resp r;
    assert_int_equal(ls_post(s, "/v1/topics/t/partitions/0/segments:roll", "{}", &r), 0);
    assert_int_equal(r.status, 200);
    ls_resp_free(&r);
    assert_int_equal(ls_append_json(s, "t", 0, rec), 200);
}

static void create(ls_server *s, const char *name, long long *unshared)
{
    char body[128];
    snprintf(body, sizeof body, "{\"name\":\"%s\"}", name);
    ls_resp r;
    assert_int_equal(ls_post(s, SNAPS, body, &r), 0);
    assert_int_equal(r.status, 201);
    if (unshared)
        *unshared = ls_jint(&r, "unshared_bytes");
    ls_resp_free(&r);
}

static long long snapshot_bytes(ls_server *s)
{
    ls_resp r;
    assert_int_equal(ls_get(s, "/v1/log-dirs", &r), 0);
    assert_int_equal(r.status, 200);
    long long v = ls_jint(&r, "log_dirs.0.snapshot_bytes");
    ls_resp_free(&r);
    return v;
}

/* When the figure was measured: a wall-clock time, never before the
 * server's start. */
static long long snapshot_bytes_measured_ms(ls_server *s)
{
    ls_resp r;
    assert_int_equal(ls_get(s, "/v1/log-dirs", &r), 0);
    assert_int_equal(r.status, 200);
    long long v = ls_jint(&r, "log_dirs.0.snapshot_bytes_measured_ms");
    ls_resp_free(&r);
    return v;
}

typedef struct call {
    ls_server *s;
    const char *path;
    ls_resp r;
    _Atomic bool done;
} call;

static void *get_main(void *arg)
{
    call *c = arg;
    ls_get(c->s, c->path, &c->r);
    atomic_store(&c->done, true);
    return NULL;
}

static void test_answers_while_measured(void **state)
{
    (void)state;
    ls_server *s = &g_s;
    start_with(s, MEASURE "=stall@*", one_thread);
    load(s);
    long long unshared;
    create(s, "a", &unshared);
    /* The creation measured its snapshot (one stall); a second begins for
     * the measurement that follows it. */
    pthread_t t;
    call c = {.s = s, .path = "/v1/log-dirs"};
    assert_int_equal(pthread_create(&t, NULL, get_main, &c), 0);
    wait_stalls_begun(s, 2);

    assert_int_equal(ls_live_status(s), 200);
    ls_resp r;
    assert_int_equal(ls_get(s, "/health/ready", &r), 0);
    assert_int_equal(r.status, 200);
    ls_resp_free(&r);
    assert_int_equal(ls_get(s, SNAPS, &r), 0);
    assert_int_equal(r.status, 200);
    assert_int_equal(json_array_size(ls_jget(&r, "snapshots")), 1);
    assert_string_equal(ls_jstr(&r, "snapshots.0.name"), "a");
    assert_int_equal(ls_jint(&r, "snapshots.0.unshared_bytes"), unshared);
    assert_int_equal(ls_jint(&r, "snapshots.0.partitions"), 2);
    ls_resp_free(&r);
    assert_int_equal(snapshot_bytes(s), unshared);
    /* All of that while the measurement was still stalled. */
    assert_true(fault_lines(s, "stall over") < fault_lines(s, "stalling"));

    pthread_join(t, NULL);
    assert_int_equal(c.r.status, 200);
    assert_int_equal(ls_jint(&c.r, "log_dirs.0.snapshot_bytes"), unshared);
    ls_resp_free(&c.r);
    assert_int_equal(ls_stop(s), 0);
}

static long long listed(ls_server *s, size_t want, const char *name, const char *field)
{
    ls_resp r;
    assert_int_equal(ls_get(s, SNAPS, &r), 0);
    assert_int_equal(r.status, 200);
    json_t *arr = ls_jget(&r, "snapshots");
    assert_int_equal(json_array_size(arr), want);
    long long v = -1;
    json_t *o = name ? ls_jfind(arr, "name", name) : NULL;
    if (name) {
        assert_non_null(o);
        assert_true(json_integer_value(json_object_get(o, "measured_ms")) > 0);
        v = json_integer_value(json_object_get(o, field));
    }
    ls_resp_free(&r);
    return v;
}

static void test_figures_after_create_and_delete(void **state)
{
    (void)state;
    ls_server *s = &g_s;
    start_with(s, NULL, one_thread);
    load(s);
    assert_int_equal(listed(s, 0, NULL, NULL), -1);
    assert_int_equal(snapshot_bytes(s), 0);
    assert_true(snapshot_bytes_measured_ms(s) > 0);

    long long ua, ub;
    create(s, "a", &ua);
    assert_true(ua > 0);
    assert_int_equal(listed(s, 1, "a", "unshared_bytes"), ua);
    assert_int_equal(listed(s, 1, "a", "topics"), 1);
    assert_int_equal(snapshot_bytes(s), ua);
    create(s, "b", &ub);
    assert_int_equal(listed(s, 2, "b", "unshared_bytes"), ub);
    assert_int_equal(listed(s, 2, "b", "partitions"), 2);
    assert_int_equal(snapshot_bytes(s), ua + ub);

    ls_resp r;
    assert_int_equal(ls_delete(s, SNAPS "/a", &r), 0);
    assert_int_equal(r.status, 204);
    ls_resp_free(&r);
    assert_int_equal(listed(s, 1, "b", "unshared_bytes"), ub);
    assert_int_equal(snapshot_bytes(s), ub);
    assert_int_equal(ls_delete(s, SNAPS "/b", &r), 0);
    assert_int_equal(r.status, 204);
    ls_resp_free(&r);
    assert_int_equal(listed(s, 0, NULL, NULL), -1);
    assert_int_equal(snapshot_bytes(s), 0);

    assert_int_equal(ls_get(s, "/v1/jobs", &r), 0);
    json_t *job = ls_jfind(ls_jget(&r, "jobs"), "name", "snapshot-usage");
    assert_non_null(job);
    assert_string_equal(json_string_value(json_object_get(job, "kind")), "periodic");
    assert_int_equal(json_integer_value(json_object_get(job, "interval_ms")), 30000);
    assert_true(json_integer_value(json_object_get(job, "runs")) >= 1); /* at least at start */
    ls_resp_free(&r);
    assert_int_equal(ls_stop(s), 0);
}

/* Retention deletes the live log's sealed segment: from then on only the
 * snapshot holds it, which the figures say within the job's interval. */
static void test_figures_catch_up_with_retention(void **state)
{
    (void)state;
    static const char *const quick[] = {"log.cleaner.threads=0", "log.segment.delete.delay.ms=0",
                                        "log.retention.check.interval.ms=600000",
                                        "snapshot.usage.check.interval.ms=200", NULL};
    ls_server *s = &g_s;
    start_with(s, NULL, quick);
    load(s);
    long long unshared;
    create(s, "a", &unshared);
    char seg[2048];
    snprintf(seg, sizeof seg, "%s/snapshots/a/t-0/00000000000000000000.log", s->dir);
    long long seg_bytes = ls_file_size(seg);
    assert_true(seg_bytes > 0);
    ls_resp r;
    assert_int_equal(ls_post(s, "/v1/topics/t/partitions/0/records:delete", "{\"before_offset\":1}", &r), 0);
    assert_int_equal(r.status, 200);
    ls_resp_free(&r);
    assert_int_equal(ls_post(s, "/v1/topics/t/retention:run", "{}", &r), 0);
    assert_int_equal(r.status, 200);
    ls_resp_free(&r);
    long long now = 0;
    for (int i = 0; i < 1200 && (now = snapshot_bytes(s)) != unshared + seg_bytes; i++)
        ts_sleep_ms(25);
    assert_int_equal(now, unshared + seg_bytes);
    assert_int_equal(listed(s, 1, "a", "unshared_bytes"), unshared + seg_bytes);
    assert_int_equal(ls_stop(s), 0);
}

/* Four snapshots, each of whose measurement stalls 3 s: a stop during the
 * first ends the measurement there, and the server stops cleanly. */
static void test_stop_during_measurement(void **state)
{
    (void)state;
    ls_server *s = &g_s;
    start_with(s, NULL, one_thread);
    load(s);
    for (int i = 0; i < 4; i++) {
        char name[16];
        snprintf(name, sizeof name, "s%d", i);
        create(s, name, NULL);
    }
    assert_int_equal(ls_stop(s), 0);
    setenv("LOGSTORE_FAULT", MEASURE "=stall@*", 1);
    int rc = ls_restart(s, one_thread);
    unsetenv("LOGSTORE_FAULT");
    assert_int_equal(rc, 0);
    wait_stalls_begun(s, 1); /* the measurement at startup */
    assert_int_equal(ls_stop(s), 0);
    assert_int_equal(fault_lines(s, "stalling"), 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_answers_while_measured, setup, teardown),
        cmocka_unit_test_setup_teardown(test_figures_after_create_and_delete, setup, teardown),
        cmocka_unit_test_setup_teardown(test_figures_catch_up_with_retention, setup, teardown),
        cmocka_unit_test_setup_teardown(test_stop_during_measurement, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
