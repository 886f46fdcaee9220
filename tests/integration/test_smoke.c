/*
 * test_smoke.c - the walk-through a new user does: start, create a topic,
 * append, read back, stop cleanly, restart and read again; and the other
 * signals that stop it cleanly (SIGINT from a terminal, SIGHUP when the
 * terminal goes away).
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "harness.h"
#include "read_util.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static void test_walkthrough(void **state)
{
    (void)state;
    ls_server s;
    assert_int_equal(ls_start(&s, NULL), 0);
    ls_resp r;

    assert_int_equal(ls_get(&s, "/health/live", &r), 0);
    assert_int_equal(r.status, 200);
    ls_resp_free(&r);

    assert_int_equal(ls_create_topic(&s, "orders", 2, "{\"segment.bytes\":\"1048576\"}"), 201);
    assert_int_equal(ls_post(&s, "/v1/topics/orders/partitions/0/records",
                             "{\"records\":[{\"key\":\"k1\",\"value\":\"v1\"},"
                             "{\"key\":\"k2\",\"value\":null,\"headers\":[{\"name\":\"h\",\"value\":\"x\"}]}]}",
                             &r),
                     0);
    assert_int_equal(r.status, 200);
    assert_int_equal(ls_jint(&r, "base_offset"), 0);
    assert_int_equal(ls_jint(&r, "last_offset"), 1);
    assert_int_equal(ls_jint(&r, "high_watermark"), 2);
    assert_non_null(ls_header(&r, "X-Request-Id"));
    ls_resp_free(&r);

    assert_int_equal(ls_get(&s, "/v1/topics/orders/partitions/0/records?offset=0", &r), 0);
    assert_int_equal(r.status, 200);
    assert_string_equal(ls_jstr(&r, "records.0.key"), "k1");
    assert_string_equal(ls_jstr(&r, "records.0.value"), "v1");
    assert_true(json_is_null(json_object_get(json_array_get(json_object_get(r.json, "records"), 1), "value")));
    assert_string_equal(ls_jstr(&r, "records.1.headers.0.name"), "h");
    assert_int_equal(ls_jint(&r, "next_offset"), 2);
    ls_resp_free(&r);

    assert_int_equal(ls_stop(&s), 0);
    char dir[256];
    snprintf(dir, sizeof dir, "%s", s.dir);
    assert_int_equal(ls_start_dir(&s, dir, NULL, true), 0);
    assert_int_equal(ls_get(&s, "/v1/topics/orders/partitions/0/records?offset=1", &r), 0);
    assert_int_equal(r.status, 200);
    assert_string_equal(ls_jstr(&r, "records.0.key"), "k2");
    ls_resp_free(&r);
    assert_int_equal(ls_get(&s, "/v1/info", &r), 0);
    assert_true(json_is_true(json_object_get(json_object_get(r.json, "startup"), "clean_shutdown")));
    ls_resp_free(&r);
    assert_int_equal(ls_stop(&s), 0);
    ls_cleanup(&s);
}

/* HEAD answers every GET route with the GET's status and headers and no body;
 * one that would wait or stream answers at once. */
static void test_head(void **state)
{
    (void)state;
    ls_server s;
    assert_int_equal(ls_start(&s, NULL), 0);
    assert_int_equal(ls_create_topic(&s, "h", 1, NULL), 201);
    ls_resp r;
    assert_int_equal(ls_post(&s, "/v1/topics/h/partitions/0/records", "{\"records\":[{\"value\":\"x\"}]}", &r), 0);
    assert_int_equal(r.status, 200);
    ls_resp_free(&r);
    static const struct {
        const char *path, *accept, *ctype;
        long status;
    } cases[] = {
        {"/health/live", NULL, "application/json", 200},
        {"/v1/topics/h", NULL, "application/json", 200},
        {"/v1/topics/nope", NULL, "application/json", 404},
        {"/v1/topics/h/partitions/0/records?offset=0", NULL, "application/json", 200},
        {"/v1/topics/h/partitions/0/records?offset=9", NULL, "application/json", 416},
        {"/v1/topics/h/partitions/0/records?offset=latest&wait_ms=20000", NULL, "application/json", 200},
        {"/v1/topics/h/partitions/0/records?offset=latest", "Accept: text/event-stream", "text/event-stream", 200},
        {"/v1/topics/h/partitions/0/records?offset=0", "Accept: application/octet-stream",
         "application/octet-stream", 200},
        {"/metrics", NULL, "text/plain", 200},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *const hdrs[] = {cases[i].accept, NULL};
        long long t0 = ru_mono_ms();
        assert_int_equal(ls_http(&s, "HEAD", cases[i].path, NULL, NULL, 0, cases[i].accept ? hdrs : NULL, &r), 0);
        assert_int_equal(r.status, cases[i].status);
        assert_int_equal(r.len, 0);
        assert_non_null(strstr(r.headers, cases[i].ctype));
        assert_true(ru_mono_ms() - t0 < 10000); /* not parked for wait_ms */
        ls_resp_free(&r);
    }
    /* A HEAD of a stream has the stream's headers: no length, since the GET's
     * body has none, not a Content-Length of 0. */
    static const char *const streams[] = {"Accept: text/event-stream", "Accept: application/x-ndjson"};
    for (size_t i = 0; i < 2; i++) {
        assert_int_equal(ls_http(&s, "HEAD", "/v1/topics/h/partitions/0/records?offset=0", NULL, NULL,
                                 0, (const char *const[]){streams[i], NULL}, &r), 0);
        assert_int_equal(r.status, 200);
        if (strcasestr(r.headers, "Content-Length"))
            fail_msg("HEAD with %s: %s", streams[i], r.headers);
        const char *cc = strstr(r.headers, "Cache-Control: no-cache");
        assert_non_null(cc);
        assert_null(strstr(cc + 1, "Cache-Control")); /* once */
        ls_resp_free(&r);
    }
    /* A HEAD of the raw read says how long the GET's body is. */
    assert_int_equal(ls_http(&s, "HEAD", "/v1/topics/h/partitions/0/records?offset=0", NULL, NULL, 0,
                             (const char *const[]){"Accept: application/octet-stream", NULL}, &r), 0);
    assert_non_null(strstr(r.headers, "X-Next-Offset: 1"));
    ls_resp_free(&r);
    /* 405 lists HEAD beside GET. */
    assert_int_equal(ls_http(&s, "PUT", "/v1/topics/h", NULL, NULL, 0, NULL, &r), 0);
    assert_int_equal(r.status, 405);
    assert_non_null(strstr(r.headers, "Allow: GET, HEAD, DELETE, PATCH"));
    ls_resp_free(&r);
    assert_int_equal(ls_stop(&s), 0);
    ls_cleanup(&s);
}

/* While a stop drains (here: an SSE client that stopped reading holds it
 * for its grace period), the listening socket stays open and a new request
 * is answered 503 shutting_down with Connection: close (an SSE read: an
 * empty 200 stream asking for a reconnect), then the server exits cleanly.  (It used to quiesce the listener, which libmicrohttpd
 * 0.9.75 can turn into an abort.) */
static void test_requests_during_stop(void **state)
{
    (void)state;
    ls_server s;
    assert_int_equal(ls_start(&s, NULL), 0);
    assert_int_equal(ls_create_topic(&s, "big", 1, NULL), 201);
    char *body = malloc(200 * 1100 + 64);
    assert_non_null(body);
    size_t n = (size_t)sprintf(body, "{\"records\":[");
    for (int i = 0; i < 200; i++)
        n += (size_t)sprintf(body + n, "%s{\"value\":\"%01000d\"}", i ? "," : "", i);
    strcpy(body + n, "]}");
    ls_resp r;
    for (int i = 0; i < 40; i++) { /* 8 MB: more than the sockets buffer */
        assert_int_equal(ls_post(&s, "/v1/topics/big/partitions/0/records", body, &r), 0);
        assert_int_equal(r.status, 200);
        ls_resp_free(&r);
    }
    free(body);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    int small = 4096;
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)s.port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof a), 0);
    const char *get = "GET /v1/topics/big/partitions/0/records?offset=0 HTTP/1.1\r\n"
                      "Host: x\r\nAccept: text/event-stream\r\n\r\n";
    assert_int_equal(send(fd, get, strlen(get), MSG_NOSIGNAL), (ssize_t)strlen(get));
    usleep(300 * 1000); /* the stream fills both socket buffers; fd is never read */

    assert_int_equal(kill(s.pid, SIGTERM), 0);
    long status = 0;
    long long end = ru_mono_ms() + 1500;
    while (status != 503 && ru_mono_ms() < end) {
        assert_int_equal(ls_get(&s, "/v1/topics", &r), 0);
        status = r.status;
        if (status == 503) {
            assert_int_equal(ls_check_error(&r, 503, "shutting_down"), 0);
            assert_non_null(ls_header(&r, "Connection"));
            assert_string_equal(ls_header(&r, "Connection"), "close");
            assert_non_null(ls_header(&r, "Retry-After"));
        }
        ls_resp_free(&r);
        usleep(20 * 1000);
    }
    assert_int_equal(status, 503);
    /* An EventSource would take a 503 as final: it gets an empty stream
     * that asks it to reconnect instead. */
    const char *const sse[] = {"Accept: text/event-stream", NULL};
    assert_int_equal(ls_http(&s, "GET", "/v1/topics/big/partitions/0/records?offset=latest", NULL,
                             NULL, 0, sse, &r), 0);
    if (r.status != 200 || !strstr(r.body, "retry: 1000\n"))
        fail_msg("an SSE read during the stop: %ld %s", r.status, r.body);
    assert_non_null(strstr(r.headers, "text/event-stream"));
    assert_null(strstr(r.body, "event:"));
    ls_resp_free(&r);
    close(fd);
    assert_int_equal(ls_stop(&s), 0); /* already stopping: waits for the exit */
    ls_cleanup(&s);
}

/* Runs the server binary with a listener and a data dir that must make it
 * refuse to start; returns its exit status, its output in out. */
static int start_refused(const char *listener, const char *dir, char *out, size_t len)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "timeout 20 %s --set listeners=%s --set log.dirs=%s 2>&1", ls_binary(),
             listener, dir);
    return ls_run_cmd(cmd, out, len);
}

/* A second server can take neither the port nor the data dir of a running
 * one: it used to bind the same port (SO_REUSEPORT) and take half of the
 * connections to a store of its own. */
static void test_port_and_dir_taken(void **state)
{
    (void)state;
    ls_server s;
    assert_int_equal(ls_start(&s, NULL), 0);
    char listener[64], other_dir[600], out[8192];
    snprintf(listener, sizeof listener, "http://127.0.0.1:%d", s.port);
    snprintf(other_dir, sizeof other_dir, "%s-other", s.dir);
    int st = start_refused(listener, other_dir, out, sizeof out);
    if (st == 0 || st == 124)
        fprintf(stderr, "# second server on port %d: status %d\n%s", s.port, st, out);
    assert_int_not_equal(st, 0);
    assert_int_not_equal(st, 124); /* refused, not left running until the timeout */
    assert_non_null(strstr(out, "cannot listen"));
    st = start_refused("http://127.0.0.1:0", s.dir, out, sizeof out);
    assert_int_not_equal(st, 0);
    assert_int_not_equal(st, 124);
    assert_non_null(strstr(out, "in use by another process"));
    assert_int_equal(ls_live_status(&s), 200);
    char rm[700];
    snprintf(rm, sizeof rm, "rm -rf '%s'", other_dir);
    assert_int_equal(system(rm), 0);
    assert_int_equal(ls_stop(&s), 0);
    ls_cleanup(&s);
}

static void test_sigint_and_sighup_stop_cleanly(void **state)
{
    (void)state;
    static const int sigs[] = {SIGINT, SIGHUP};
    static const char *const names[] = {"SIGINT", "SIGHUP"};
    for (int i = 0; i < 2; i++) {
        ls_server s;
        assert_int_equal(ls_start(&s, NULL), 0);
        assert_int_equal(ls_create_topic(&s, "sig", 1, NULL), 201);
        assert_int_equal(ls_append_json(&s, "sig", 0, "{\"records\":[{\"value\":\"v\"}]}"), 200);
        assert_int_equal(ls_stop_signal(&s, sigs[i]), 0);
        char want[64];
        snprintf(want, sizeof want, "received %s; stopping", names[i]);
        assert_true(ls_file_contains(s.log_path, want));
        assert_true(ls_file_contains(s.log_path, "stopped cleanly"));
        char marker[400];
        snprintf(marker, sizeof marker, "%s/.kafka_cleanshutdown", s.dir);
        assert_true(ls_file_size(marker) >= 0);
        ls_cleanup(&s);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_walkthrough),
        cmocka_unit_test(test_head),
        cmocka_unit_test(test_requests_during_stop),
        cmocka_unit_test(test_port_and_dir_taken),
        cmocka_unit_test(test_sigint_and_sighup_stop_cleanly),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
