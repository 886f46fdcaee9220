/*
 * test_maintenance_lane.c - compaction:run, retention:run and snapshot
 * creation run on the maintenance threads, not on the HTTP thread that
 * received them (api_lane.h).  The server has one HTTP thread and every clean
 * stalls 3 s at its start (a slow disk):
 *   - while one compaction:run cleans, the same thread answers a health
 *     probe, a listing and a retention:run of the partition, which finds
 *     it busy (proof the clean was still on); before, each waited for the
 *     clean to end;
 *   - /metrics shows the running and queued maintenance requests by kind;
 *   - a clean longer than http.idle.timeout.ms still gets its answer;
 *   - with a clean running, a snapshot waiting for its round and a second
 *     clean queued behind the first, a retention run is answered (each kind
 *     has its own thread); a stop then answers the clean 200 (past its
 *     stall it has nothing to clean), the snapshot 503 shutting_down (a stop
 *     abandons it) and the queued clean 503 shutting_down without beginning
 *     it, and the server stops cleanly;
 *   - a stop during a long on-demand clean abandons it (503 shutting_down)
 *     instead of waiting for its end, and cuts a retention run over many
 *     partitions short at the next partition;
 *   - an answer from a lane carries the client's X-Request-Id once (it was
 *     sent twice: the router and the deferred completion each added it),
 *     and a body gathered in pieces (past the connection's read buffer)
 *     reaches the handler whole;
 *   - a queued request whose client left is dropped when its turn comes.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "harness.h"
#include "raw_http.h"
#include "support.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* The cleaner's own rounds would stall too (and hold partitions): after its
 * first look, at start, it sleeps for the whole test.  An idle timeout
 * shorter than the stall: a connection waiting for its deferred answer is
 * not idle, and must not be cut. */
static const char *const one_thread[] = {"http.threads=1", "log.cleaner.backoff.ms=3600000",
                                         "http.idle.timeout.ms=1000", NULL};

#define CLEAN_STALL "compact.round_start"
#define RUNNING(kind) "logstore_maintenance_requests_running{kind=\"" kind "\"}"
#define QUEUED(kind) "logstore_maintenance_requests_queued{kind=\"" kind "\"}"

typedef struct call {
    ls_server *s;
    const char *path, *body;
    ls_resp r;
    _Atomic bool done;
} call;

static void *call_main(void *arg)
{
    call *c = arg;
    ls_post(c->s, c->path, c->body, &c->r);
    atomic_store(&c->done, true);
    return NULL;
}

/* POSTs body to path on a thread of its own (the strings are borrowed). */
static void start_call(pthread_t *t, call *c, ls_server *s, const char *path, const char *body)
{
    memset(c, 0, sizeof *c);
    c->s = s;
    c->path = path;
    c->body = body;
    assert_int_equal(pthread_create(t, NULL, call_main, c), 0);
}

/* Times the server's log says a stall began at `point` (the clean's by
 * default). */
static int stalls_at(ls_server *s, const char *point)
{
    char line[128];
    snprintf(line, sizeof line, "fault point %s: stalling", point);
    return ls_file_count(s->log_path, line);
}

static int stalls_begun(ls_server *s)
{
    return stalls_at(s, CLEAN_STALL);
}

static void wait_stalls_at(ls_server *s, const char *point, int n)
{
    for (int i = 0; i < 3000 && stalls_at(s, point) < n; i++)
        ts_sleep_ms(5);
    if (stalls_at(s, point) < n)
        fail_msg("%d stalls at %s did not begin (log: %s)", n, point, s->log_path);
}

static void wait_stalls(ls_server *s, int n)
{
    wait_stalls_at(s, CLEAN_STALL, n);
}

static void start_stalling(ls_server *s, int compacted_topics)
{
    setenv("LOGSTORE_FAULT", CLEAN_STALL "=stall@*", 1);
    int rc = ls_start(s, one_thread);
    unsetenv("LOGSTORE_FAULT");
    if (rc)
        fail_msg("the server did not start (log: %s)", s->log_path);
    for (int i = 0; i < compacted_topics; i++) {
        char name[16];
        snprintf(name, sizeof name, "c%d", i);
        assert_int_equal(
            ls_create_topic(s, name, 1, "{\"cleanup.policy\":\"compact,delete\"}"), 201);
        assert_int_equal(ls_append_json(s, name, 0, "{\"records\":[{\"key\":\"k\",\"value\":\"1\"}]}"),
                         200);
    }
}

static void test_requests_answered_while_a_clean_runs(void **state)
{
    (void)state;
    ls_server s;
    start_stalling(&s, 1);
    pthread_t t;
    call a;
    start_call(&t, &a, &s, "/v1/topics/c0/compaction:run", "{}");
    wait_stalls(&s, 1);
    /* Each of these waited for the clean on the single HTTP thread. */
    assert_int_equal(ls_live_status(&s), 200);
    ls_resp r;
    assert_int_equal(ls_get(&s, "/v1/topics", &r), 0);
    assert_int_equal(r.status, 200);
    ls_resp_free(&r);
    /* Busy: the clean still holds the partition (answered after it, the
     * run would find it free). */
    assert_int_equal(ls_post(&s, "/v1/topics/c0/retention:run", "{}", &r), 0);
    assert_int_equal(r.status, 200);
    assert_true(json_is_true(ls_jget(&r, "partitions.0.busy")));
    ls_resp_free(&r);
    assert_int_equal(ls_metric(&s, RUNNING("compaction"), -1), 1);
    assert_int_equal(ls_metric(&s, QUEUED("compaction"), -1), 0);
    assert_int_equal(ls_metric(&s, RUNNING("retention"), -1), 0);
    pthread_join(t, NULL);
    assert_int_equal(a.r.status, 200);
    assert_non_null(ls_jget(&a.r, "partitions"));
    assert_non_null(ls_header(&a.r, "X-Request-Id"));
    ls_resp_free(&a.r);
    assert_int_equal(ls_metric(&s, RUNNING("compaction"), -1), 0);
    assert_int_equal(ls_stop(&s), 0);
    ls_cleanup(&s);
}

static void wait_metric(ls_server *s, const char *name, long long want)
{
    for (int i = 0; i < 3000 && ls_metric(s, name, -1) != want; i++)
        ts_sleep_ms(5);
    if (ls_metric(s, name, -1) != want)
        fail_msg("%s never reached %lld (log: %s)", name, want, s->log_path);
}

static void test_stop_answers_running_and_queued(void **state)
{
    (void)state;
    ls_server s;
    start_stalling(&s, 2);
    pthread_t t[3];
    call c[3];
    start_call(&t[0], &c[0], &s, "/v1/topics/c0/compaction:run", "{}");
    wait_stalls(&s, 1);
    /* A snapshot waits for the clean's round to end, on its own thread. */
    start_call(&t[1], &c[1], &s, "/v1/admin/snapshots", "{\"name\":\"s\"}");
    wait_metric(&s, RUNNING("snapshot"), 1);
    /* Another clean waits for the first, queued on the compaction lane. */
    start_call(&t[2], &c[2], &s, "/v1/topics/c1/compaction:run", "{}");
    wait_metric(&s, QUEUED("compaction"), 1);
    /* Retention has its own thread: not held up by either. */
    ls_resp r;
    assert_int_equal(ls_post(&s, "/v1/admin/retention:run", "{}", &r), 0);
    assert_int_equal(r.status, 200);
    ls_resp_free(&r);
    assert_int_equal(ls_metric(&s, QUEUED("compaction"), -1), 1);
    assert_false(atomic_load(&c[0].done));
    assert_int_equal(ls_stop(&s), 0);
    for (int i = 0; i < 3; i++)
        pthread_join(t[i], NULL);
    /* The clean (one record in the active segment: nothing to clean once
     * its stall ends) answers; the snapshot is abandoned (as any stop
     * abandons one); the queued clean never begins. */
    assert_int_equal(c[0].r.status, 200);
    assert_int_equal(ls_check_error(&c[1].r, 503, "shutting_down"), 0);
    assert_int_equal(ls_check_error(&c[2].r, 503, "shutting_down"), 0);
    assert_string_equal(ls_header(&c[2].r, "Retry-After"), "1");
    for (int i = 0; i < 3; i++)
        ls_resp_free(&c[i].r);
    assert_int_equal(stalls_begun(&s), 1);
    assert_true(ls_file_contains(s.log_path, "stopped cleanly"));
    ls_cleanup(&s);
}

/* A stop during an on-demand clean of a large log (throttled here to take
 * tens of seconds) abandons the clean instead of waiting it out: the stop
 * waits for running maintenance before it stops the cleaner, so a clean
 * that did not see the stop request held the whole stop (past docker
 * stop's 10 s, a kill and a recovery on the next start). */
static void test_stop_abandons_a_long_clean(void **state)
{
    (void)state;
    static const char *const slow[] = {"log.cleaner.io.max.bytes.per.second=50000",
                                       "log.cleaner.backoff.ms=3600000", NULL};
    ls_server s;
    if (ls_start(&s, slow))
        fail_msg("the server did not start (log: %s)", s.log_path);
    assert_int_equal(ls_create_topic(&s, "big", 1, "{\"cleanup.policy\":\"compact\"}"), 201);
    /* 1 MB in 10 requests of 100 records of 1 KB, all under one key. */
    size_t cap = 100 * 1100 + 64, len = 0;
    char *body = malloc(cap);
    assert_non_null(body);
    char value[1001];
    memset(value, 'v', 1000);
    value[1000] = 0;
    len += (size_t)snprintf(body + len, cap - len, "{\"records\":[");
    for (int i = 0; i < 100; i++)
        len += (size_t)snprintf(body + len, cap - len, "%s{\"key\":\"k\",\"value\":\"%s\"}",
                                i ? "," : "", value);
    snprintf(body + len, cap - len, "]}");
    for (int i = 0; i < 10; i++)
        assert_int_equal(ls_append_json(&s, "big", 0, body), 200);
    free(body);
    ls_resp r;
    assert_int_equal(ls_post(&s, "/v1/topics/big/partitions/0/segments:roll", "{}", &r), 0);
    assert_int_equal(r.status, 200);
    ls_resp_free(&r);
    pthread_t t;
    call c;
    start_call(&t, &c, &s, "/v1/topics/big/compaction:run", "{}");
    wait_metric(&s, RUNNING("compaction"), 1);
    assert_int_equal(ls_stop(&s), 0);
    pthread_join(t, NULL);
    assert_int_equal(ls_check_error(&c.r, 503, "shutting_down"), 0);
    ls_resp_free(&c.r);
    assert_true(ls_file_contains(s.log_path, "stopped cleanly"));
    ls_cleanup(&s);
}

/* A retention run over many partitions stops at the next one once a stop
 * begins (each deletion stalls 3 s here, a slow disk). */
static void test_stop_cuts_a_retention_run_short(void **state)
{
    (void)state;
    setenv("LOGSTORE_FAULT", "retention.after_start_offset=stall@*", 1);
    ls_server s;
    int rc = ls_start(&s, NULL);
    unsetenv("LOGSTORE_FAULT");
    if (rc)
        fail_msg("the server did not start (log: %s)", s.log_path);
    assert_int_equal(ls_create_topic(&s, "old", 4, "{\"retention.ms\":\"20000\"}"), 201);
    for (int p = 0; p < 4; p++) {
        assert_int_equal(ls_append_json(&s, "old", p,
                                        "{\"records\":[{\"value\":\"x\",\"timestamp\":1000}]}"),
                         200);
        char path[96];
        snprintf(path, sizeof path, "/v1/topics/old/partitions/%d/segments:roll", p);
        ls_resp r;
        assert_int_equal(ls_post(&s, path, "{}", &r), 0);
        assert_int_equal(r.status, 200);
        ls_resp_free(&r);
    }
    pthread_t t;
    call c;
    start_call(&t, &c, &s, "/v1/topics/old/retention:run", "{}");
    wait_stalls_at(&s, "retention.after_start_offset", 1);
    assert_int_equal(ls_stop(&s), 0);
    pthread_join(t, NULL);
    assert_int_equal(ls_check_error(&c.r, 503, "shutting_down"), 0);
    assert_non_null(strstr(ls_jstr(&c.r, "message"), "retention ran on 1 of 4 partitions"));
    ls_resp_free(&c.r);
    assert_int_equal(stalls_at(&s, "retention.after_start_offset"), 1);
    ls_cleanup(&s);
}

/* How many lines of r's header block are an X-Request-Id. */
static int request_id_headers(const ls_resp *r)
{
    int n = 0;
    for (const char *p = r->headers; p && (p = strcasestr(p, "\r\nX-Request-Id:")); p += 2)
        n++;
    return n;
}

static void test_lane_answer_has_one_request_id(void **state)
{
    (void)state;
    ls_server s;
    assert_int_equal(ls_start(&s, NULL), 0);
    assert_int_equal(
        ls_create_topic(&s, "c0", 1, "{\"cleanup.policy\":\"compact\"}"), 201);
    static const char *const paths[] = {"/v1/topics/c0/compaction:run",
                                        "/v1/admin/retention:run", "/v1/admin/snapshots"};
    static const char *const bodies[] = {"{}", "{}", "{\"name\":\"one\"}"};
    const char *id[] = {"X-Request-Id: lane-id-1", NULL};
    for (int i = 0; i < 3; i++) {
        ls_resp r;
        assert_int_equal(ls_http(&s, "POST", paths[i], "application/json", bodies[i],
                                 strlen(bodies[i]), id, &r),
                         0);
        if (r.status != 200 && r.status != 201)
            fail_msg("%s: %ld %s", paths[i], r.status, r.body);
        if (request_id_headers(&r) != 1)
            fail_msg("%s: %d X-Request-Id headers in\n%s", paths[i], request_id_headers(&r),
                     r.headers);
        assert_string_equal(ls_header(&r, "X-Request-Id"), "lane-id-1");
        ls_resp_free(&r);
    }
    /* 64 KB of blanks inside the object: more than the read buffer holds,
     * so the body is gathered before it is copied for the lane. */
    size_t pad = 64 * 1024;
    char *big = malloc(pad + 32);
    assert_non_null(big);
    int n = snprintf(big, 32, "{\"dry_run\":");
    memset(big + n, ' ', pad);
    memcpy(big + n + pad, "true}", 6);
    ls_resp r;
    assert_int_equal(ls_http(&s, "POST", paths[0], "application/json", big, strlen(big), NULL, &r),
                     0);
    free(big);
    assert_int_equal(r.status, 200);
    assert_true(json_is_true(ls_jget(&r, "dry_run")));
    assert_int_equal(request_id_headers(&r), 1);
    ls_resp_free(&r);
    assert_int_equal(ls_stop(&s), 0);
    ls_cleanup(&s);
}

/* A client that gives up while its clean waits in the queue (and would
 * retry, queueing another) leaves no clean done for nobody: the queued
 * request is dropped when its turn comes. */
static void test_queued_request_of_a_gone_client_is_dropped(void **state)
{
    (void)state;
    ls_server s;
    start_stalling(&s, 2);
    pthread_t t;
    call a;
    start_call(&t, &a, &s, "/v1/topics/c0/compaction:run", "{}");
    wait_stalls(&s, 1);
    int fd = tcp_connect(s.port);
    send_all(fd, "POST /v1/topics/c1/compaction:run HTTP/1.1\r\nHost: x\r\n"
                 "Content-Type: application/json\r\nContent-Length: 2\r\n\r\n{}");
    wait_metric(&s, QUEUED("compaction"), 1);
    close(fd);
    pthread_join(t, NULL);
    assert_int_equal(a.r.status, 200);
    ls_resp_free(&a.r);
    wait_metric(&s, QUEUED("compaction"), 0);
    wait_metric(&s, RUNNING("compaction"), 0);
    assert_int_equal(stalls_begun(&s), 1); /* c1's clean never began */
    assert_true(ls_file_contains(s.log_path, "POST /v1/topics/c1/compaction:run dropped before it "
                                             "ran: its client left"));
    assert_int_equal(ls_stop(&s), 0);
    ls_cleanup(&s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_requests_answered_while_a_clean_runs),
        cmocka_unit_test(test_stop_answers_running_and_queued),
        cmocka_unit_test(test_stop_abandons_a_long_clean),
        cmocka_unit_test(test_stop_cuts_a_retention_run_short),
        cmocka_unit_test(test_lane_answer_has_one_request_id),
        cmocka_unit_test(test_queued_request_of_a_gone_client_is_dropped),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
