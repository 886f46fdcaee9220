/*
 * test_access_log.c - http.access.log and http.slow.request.ms, against the
 * real server binary.
 *
 * With the access log on, every request ends in one INFO line
 * `access ADDR "METHOD TARGET" STATUS BYTES DURATION req=ID [end=...]`:
 * a JSON append, a 404, a 401 (whose bearer token never reaches the log),
 * a read with its query, a long-poll (its duration covers the wait, and it
 * is not slow for it), an SSE stream the client drops (the bytes sent so
 * far), and targets with quotes, newlines and control bytes (escaped, so no
 * line can be forged or split).
 *
 * With the access log off, a request whose handler ran past
 * http.slow.request.ms (a fault stall) still gets its line, at WARN with
 * slow=; a faster one gets none.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "harness.h"
#include "raw_http.h"

#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static ls_server g_srv;
static ls_server *S = &g_srv;

static const char *const TOKEN = "acc-5d1e0f9b27c4";
static const char *const BAD_TOKEN = "nope-83c1a6e0d94b";
static char g_auth_header[128];

static void sleep_ms(int ms)
{
    nanosleep(&(struct timespec){.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L}, NULL);
}

static int group_setup(void **state)
{
    (void)state;
    char cmd[512], out[256], file[300], text[320], setting[400];
    snprintf(cmd, sizeof cmd, "%s --hash-token '%s'", ls_binary(), TOKEN);
    if (ls_run_cmd(cmd, out, sizeof out) != 0 || strlen(out) != 65)
        return -1;
    out[64] = 0;
    snprintf(text, sizeof text, "%s admin\n", out);
    ls_scratch_path(file, sizeof file, "tokens");
    if (ls_write_file(file, text))
        return -1;
    snprintf(setting, sizeof setting, "auth.tokens.file=%s", file);
    snprintf(g_auth_header, sizeof g_auth_header, "Authorization: Bearer %s", TOKEN);
    /* The long-poll below waits 1.5 s, past this threshold: it must not be
     * reported as slow for its wait. */
    const char *const extra[] = {setting, "http.access.log=true", "http.slow.request.ms=1000",
                                 "log.initial.task.delay.ms=3600000", NULL};
    return ls_start(S, extra);
}

static int group_teardown(void **state)
{
    (void)state;
    ls_stop(S);
    ls_cleanup(S);
    ls_scratch_remove();
    return 0;
}

/* The log line holding needle (malloc'd, without its newline), waited for:
 * a request's line is written when libmicrohttpd reports it done, which may
 * come just after the client has its answer.  NULL after 10 s. */
static char *wait_line(ls_server *s, const char *needle)
{
    for (int i = 0; i < 1000; i++) {
        size_t len;
        char *all = ls_read_file(s->log_path, &len);
        char *hit = all ? strstr(all, needle) : NULL;
        if (hit) {
            char *start = hit;
            while (start > all && start[-1] != '\n')
                start--;
            char *end = strchr(hit, '\n');
            if (end) {
                char *line = strndup(start, (size_t)(end - start));
                free(all);
                return line;
            }
        }
        free(all);
        sleep_ms(10);
    }
    return NULL;
}

/* The access line of the request with X-Request-Id id (asserts it came). */
static char *access_line(ls_server *s, const char *id)
{
    char needle[96];
    snprintf(needle, sizeof needle, " req=%s", id);
    char *line = wait_line(s, needle);
    if (!line)
        fail_msg("no access line with %s in %s", needle, s->log_path);
    return line;
}

/* A request with the admin token (unless auth is given) and X-Request-Id id. */
static long call(const char *method, const char *path, const char *json, const char *id,
                 const char *auth, ls_resp *out)
{
    char idh[96];
    snprintf(idh, sizeof idh, "X-Request-Id: %s", id);
    const char *const headers[] = {auth ? auth : g_auth_header, idh, NULL};
    assert_int_equal(ls_http(S, method, path, json ? "application/json" : NULL, json,
                             json ? strlen(json) : 0, headers, out), 0);
    return out->status;
}

/* The number after " <status> " and before "B " in line, -1 for "-". */
static long long line_bytes(const char *line, long status)
{
    char pat[16];
    snprintf(pat, sizeof pat, "\" %ld ", status);
    const char *p = strstr(line, pat);
    assert_non_null(p);
    p += strlen(pat);
    if (*p == '-')
        return -1;
    return strtoll(p, NULL, 10);
}

/* The duration in ms (the field after the bytes). */
static double line_ms(const char *line)
{
    const char *q = strrchr(line, '"');
    assert_non_null(q);
    const char *p = strchr(q + 2, ' '); /* past the status */
    assert_non_null(p);
    p = strchr(p + 1, ' '); /* past the bytes */
    assert_non_null(p);
    char *end;
    double ms = strtod(p + 1, &end);
    assert_true(end > p + 1 && strncmp(end, "ms ", 3) == 0);
    return ms;
}

static void setup_topic(const char *name)
{
    ls_resp r = {0};
    char body[128];
    snprintf(body, sizeof body, "{\"name\":\"%s\",\"partitions\":1}", name);
    assert_int_equal(call("POST", "/v1/topics", body, "acc-create", NULL, &r), 201);
    ls_resp_free(&r);
}

static void test_json_append(void **state)
{
    (void)state;
    setup_topic("orders");
    ls_resp r = {0};
    assert_int_equal(call("POST", "/v1/topics/orders/partitions/0/records",
                          "{\"records\":[{\"value\":\"a\"},{\"value\":\"b\"}]}", "acc-append", NULL,
                          &r),
                     200);
    char *line = access_line(S, "acc-append");
    char want[160];
    snprintf(want, sizeof want,
             " INFO  access 127.0.0.1 \"POST /v1/topics/orders/partitions/0/records\" 200 %zuB ",
             r.len);
    if (!strstr(line, want))
        fail_msg("line '%s' lacks '%s'", line, want);
    assert_true(line_ms(line) >= 0);
    assert_null(strstr(line, "slow="));
    assert_null(strstr(line, "end="));
    free(line);
    ls_resp_free(&r);
}

static void test_not_found(void **state)
{
    (void)state;
    ls_resp r = {0};
    assert_int_equal(call("GET", "/v1/nothing/here", NULL, "acc-404", NULL, &r), 404);
    char *line = access_line(S, "acc-404");
    assert_non_null(strstr(line, " INFO  access 127.0.0.1 \"GET /v1/nothing/here\" 404 "));
    assert_int_equal(line_bytes(line, 404), (long long)r.len);
    free(line);
    ls_resp_free(&r);
}

static void test_unauthorized_token_never_logged(void **state)
{
    (void)state;
    char bad[128];
    snprintf(bad, sizeof bad, "Authorization: Bearer %s", BAD_TOKEN);
    ls_resp r = {0};
    assert_int_equal(call("GET", "/v1/topics/orders/partitions/0/records?offset=0", NULL, "acc-401",
                          bad, &r),
                     401);
    char *line = access_line(S, "acc-401");
    assert_non_null(strstr(line, "\"GET /v1/topics/orders/partitions/0/records?offset=0\" 401 "));
    free(line);
    ls_resp_free(&r);
    assert_false(ls_file_contains(S->log_path, BAD_TOKEN));
    assert_false(ls_file_contains(S->log_path, TOKEN));
}

static void test_read_with_query(void **state)
{
    (void)state;
    ls_resp r = {0};
    assert_int_equal(call("GET", "/v1/topics/orders/partitions/0/records?offset=0&max_records=1",
                          NULL, "acc-read", NULL, &r),
                     200);
    char *line = access_line(S, "acc-read");
    assert_non_null(strstr(
        line, "\"GET /v1/topics/orders/partitions/0/records?offset=0&max_records=1\" 200 "));
    assert_int_equal(line_bytes(line, 200), (long long)r.len);
    free(line);
    ls_resp_free(&r);
}

static void test_long_poll_duration_covers_wait(void **state)
{
    (void)state;
    ls_resp r = {0};
    assert_int_equal(call("GET", "/v1/topics/orders/partitions/0/records?offset=2&wait_ms=1500",
                          NULL, "acc-poll", NULL, &r),
                     200);
    char *line = access_line(S, "acc-poll");
    assert_true(line_ms(line) >= 1500);
    /* Waiting is what a long-poll is for: not a slow request. */
    assert_non_null(strstr(line, " INFO  access "));
    assert_null(strstr(line, "slow="));
    free(line);
    ls_resp_free(&r);
}

static void test_dropped_stream_logs_bytes_sent(void **state)
{
    (void)state;
    int fd = tcp_connect(S->port);
    char req[512];
    snprintf(req, sizeof req,
             "GET /v1/topics/orders/partitions/0/records?offset=0 HTTP/1.1\r\nHost: x\r\n"
             "Accept: text/event-stream\r\n%s\r\nX-Request-Id: acc-sse\r\n\r\n",
             g_auth_header);
    send_all(fd, req);
    /* Both records, then the stream parks: the client hangs up. */
    char buf[8192];
    size_t got = 0;
    for (int i = 0; i < 1000; i++) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, 10) == 1) {
            ssize_t n = recv(fd, buf + got, sizeof buf - 1 - got, 0);
            assert_true(n > 0);
            got += (size_t)n;
            buf[got] = 0;
        }
        const char *second = strstr(buf, "id: 1\n");
        if (second && strstr(second, "\n\n"))
            break;
    }
    assert_non_null(strstr(buf, "id: 1\n"));
    close(fd);
    char *line = access_line(S, "acc-sse");
    long long bytes = line_bytes(line, 200);
    const char *body = strstr(buf, "\r\n\r\n");
    assert_non_null(body);
    /* At least both events went out, and no more than the client got (the
     * chunked framing makes it less). */
    assert_true(bytes >= 2 * (long long)strlen("event: record\n"));
    assert_true(bytes <= (long long)(got - (size_t)(body + 4 - buf)));
    /* libmicrohttpd may report it sent whole (its last chunk fit the
     * socket's buffer): the stream knows its client left. */
    assert_non_null(strstr(line, " end=client_closed"));
    free(line);
}

static void test_escaped_target_cannot_forge_lines(void **state)
{
    (void)state;
    ls_resp r = {0};
    /* Percent-encoded as a client sends them: logged as sent. */
    call("GET", "/v1/topics/a%22b%0A2026-01-01T00:00:00.000Z%20INFO%20%20forged/partitions/0", NULL,
         "acc-enc", NULL, &r);
    char *line = access_line(S, "acc-enc");
    assert_non_null(strstr(line, "\"GET /v1/topics/a%22b%0A2026-01-01T00:00:00.000Z%20INFO%20%20"
                                 "forged/partitions/0\" "));
    free(line);
    ls_resp_free(&r);
    /* Raw bytes no client should send (a quote, a tab, a control byte, a
     * backslash, UTF-8) become %XX: the line keeps its two quotes. */
    int fd = tcp_connect(S->port);
    send_all(fd, "GET /v1/x\"y\tz\x01\\\xc3\xa9?q=\"1 HTTP/1.1\r\nHost: x\r\nX-Request-Id: acc-raw\r\n"
                 "Connection: close\r\n\r\n");
    char buf[2048];
    while (recv(fd, buf, sizeof buf, 0) > 0) {
    }
    close(fd);
    line = access_line(S, "acc-raw");
    const char *q1 = strchr(line, '"'), *q2 = q1 ? strchr(q1 + 1, '"') : NULL;
    assert_non_null(q2);
    assert_null(strchr(q2 + 1, '"'));
    assert_non_null(strstr(line, "\"GET /v1/x%22y%09z%01%5C%C3%A9?q=%221\" "));
    for (const char *p = line; *p; p++)
        assert_true(*p >= 0x20 && *p < 0x7f);
    free(line);
    /* Every line of the log is one of the server's own: none forged, none
     * split or interleaved. */
    size_t len;
    char *all = ls_read_file(S->log_path, &len);
    assert_non_null(all);
    for (char *l = all; *l; l = strchr(l, '\n') + 1) {
        if (strncmp(l, "20", 2) != 0 || l[23] != 'Z')
            fail_msg("a log line that is not the server's: %.80s", l);
        assert_false(strncmp(l + 25, "INFO  forged", 12) == 0);
        if (!strchr(l, '\n'))
            break;
    }
    free(all);
}

/* ---- the slow-request log, with the access log off -------------------------- */

static void test_slow_request_warned_fast_one_not(void **state)
{
    (void)state;
    ls_server slow = {0};
    setenv("LOGSTORE_FAULT", "append_keyed.topic_read=stall", 1);
    const char *const extra[] = {"http.slow.request.ms=1000", NULL};
    int rc = ls_start(&slow, extra);
    unsetenv("LOGSTORE_FAULT");
    assert_int_equal(rc, 0);
    assert_int_equal(ls_create_topic(&slow, "keyed", 1, NULL), 201);
    const char *const h1[] = {"X-Request-Id: acc-stalled", NULL};
    const char *const h2[] = {"X-Request-Id: acc-quick", NULL};
    const char *body = "{\"records\":[{\"key\":\"k\",\"value\":\"v\"}]}";
    ls_resp r = {0};
    /* The first keyed append stalls 3 s in its handler; the next does not. */
    assert_int_equal(ls_http(&slow, "POST", "/v1/topics/keyed/records", "application/json", body,
                             strlen(body), h1, &r),
                     0);
    assert_int_equal(r.status, 200);
    ls_resp_free(&r);
    assert_int_equal(ls_http(&slow, "POST", "/v1/topics/keyed/records", "application/json", body,
                             strlen(body), h2, &r),
                     0);
    assert_int_equal(r.status, 200);
    ls_resp_free(&r);
    char *line = access_line(&slow, "acc-stalled");
    assert_non_null(strstr(line, " WARN  access 127.0.0.1 \"POST /v1/topics/keyed/records\" 200 "));
    const char *s = strstr(line, " slow=");
    assert_non_null(s);
    assert_true(strtod(s + 6, NULL) >= 2900);
    assert_true(line_ms(line) >= 2900);
    free(line);
    /* Its line is written before the next request is answered on this
     * connection's thread pool; the quick one has none at all. */
    ls_stop(&slow);
    assert_false(ls_file_contains(slow.log_path, "acc-quick"));
    assert_int_equal(ls_file_count(slow.log_path, " access "), 1);
    ls_cleanup(&slow);
}

/* Access lines are INFO: above it the server says the log is off. */
static void test_access_log_needs_info_level(void **state)
{
    (void)state;
    /* Not ls_start: at WARN the server never logs the port it listens on.
     * The warning comes before the logs load; the run is cut short after. */
    char dir[300], cmd[1024], out[4096];
    ls_scratch_path(dir, sizeof dir, "quiet-data");
    snprintf(cmd, sizeof cmd,
             "timeout -s TERM 3 %s --set log.dirs=%s --set listeners=http://127.0.0.1:0 "
             "--set http.access.log=true --set log.level=WARN 2>&1",
             ls_binary(), dir);
    ls_run_cmd(cmd, out, sizeof out);
    if (!strstr(out, "WARN  http.access.log is on but log.level WARN drops its INFO lines"))
        fail_msg("no warning in: %s", out);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_json_append),
        cmocka_unit_test(test_not_found),
        cmocka_unit_test(test_unauthorized_token_never_logged),
        cmocka_unit_test(test_read_with_query),
        cmocka_unit_test(test_long_poll_duration_covers_wait),
        cmocka_unit_test(test_dropped_stream_logs_bytes_sent),
        cmocka_unit_test(test_escaped_target_cannot_forge_lines),
        cmocka_unit_test(test_slow_request_warned_fast_one_not),
        cmocka_unit_test(test_access_log_needs_info_level),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
