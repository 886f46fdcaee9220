/*
 * test_cors.c - http.cors.allowed.origins against the real server binary.
 *
 * With an origin listed (and auth on): a preflight from it gets 204 with the
 * route's methods and the headers a browser may send (Authorization,
 * Content-Type, Accept, Last-Event-ID, X-Request-Id), without a token; its
 * real requests carry Access-Control-Allow-Origin (echoed, with Vary:
 * Origin) on successes, on errors (401, 404) and on deferred answers (a
 * long-poll); another origin, or no Origin, gets no Access-Control header
 * (but Vary: Origin, so a cache keeps the answers apart), nor does one that
 * merely begins with a listed origin.  With "*"
 * the answer says "*"; an OPTIONS without Access-Control-Request-Method is
 * no preflight (405).  Unset (the default) no CORS header is ever sent and
 * OPTIONS stays 405.  A malformed setting refuses the start.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "harness.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DASH "https://dash.example.com"
#define TOKEN "cors-admin-5f1e0b7c"

/* Starts a server allowing origins (NULL: the setting unset), with one
 * admin token when auth is true. */
static void start(ls_server *s, const char *origins, bool auth)
{
    char cors[300], tokens[400], file[300], cmd[600], hex[128];
    const char *extra[4] = {NULL};
    size_t k = 0;
    if (origins) {
        snprintf(cors, sizeof cors, "http.cors.allowed.origins=%s", origins);
        extra[k++] = cors;
    }
    if (auth) {
        snprintf(cmd, sizeof cmd, "%s --hash-token '%s'", ls_binary(), TOKEN);
        assert_int_equal(ls_run_cmd(cmd, hex, sizeof hex), 0);
        hex[64] = 0;
        char text[200];
        snprintf(text, sizeof text, "%s admin\n", hex);
        ls_scratch_path(file, sizeof file, "tokens");
        assert_int_equal(ls_write_file(file, text), 0);
        snprintf(tokens, sizeof tokens, "auth.tokens.file=%s", file);
        extra[k++] = tokens;
    }
    assert_int_equal(ls_start(s, extra), 0);
}

/* One request with optional Origin, token and preflight method. */
static void request(ls_server *s, const char *method, const char *path, const char *origin,
                    bool token, const char *preflight_method, ls_resp *r)
{
    char o[200], m[200];
    const char *hdrs[4] = {NULL};
    size_t k = 0;
    if (origin) {
        snprintf(o, sizeof o, "Origin: %s", origin);
        hdrs[k++] = o;
    }
    if (token)
        hdrs[k++] = "Authorization: Bearer " TOKEN;
    if (preflight_method) {
        snprintf(m, sizeof m, "Access-Control-Request-Method: %s", preflight_method);
        hdrs[k++] = m;
    }
    assert_int_equal(ls_http(s, method, path, NULL, NULL, 0, hdrs, r), 0);
}

static void test_listed_origin_with_auth(void **state)
{
    (void)state;
    ls_server s;
    start(&s, "http://localhost:3000, " DASH, true);
    ls_resp r;
    /* The preflight: no token, yet 204 with what the route takes. */
    request(&s, "OPTIONS", "/v1/topics", DASH, false, "POST", &r);
    assert_int_equal(r.status, 204);
    assert_string_equal(ls_header(&r, "Access-Control-Allow-Origin"), DASH);
    assert_string_equal(ls_header(&r, "Access-Control-Allow-Methods"), "GET, HEAD, POST");
    assert_non_null(strstr(ls_header(&r, "Access-Control-Allow-Headers"), "Authorization"));
    assert_non_null(strstr(ls_header(&r, "Access-Control-Allow-Headers"), "Content-Type"));
    /* README: and the headers a reader sends (Accept, Last-Event-ID to resume a stream). */
    assert_non_null(strstr(ls_header(&r, "Access-Control-Allow-Headers"), "Accept"));
    assert_non_null(strstr(ls_header(&r, "Access-Control-Allow-Headers"), "Last-Event-ID"));
    assert_non_null(strstr(ls_header(&r, "Access-Control-Allow-Headers"), "X-Request-Id"));
    /* The browser sends the real request next: on the same connection, not
     * on a new one (a TCP, and with HTTPS a TLS, handshake per preflight). */
    assert_null(ls_header(&r, "Connection"));
    ls_resp_free(&r);
    /* Likewise any answer given from the headers of a request with no body. */
    request(&s, "GET", "/v1/topics", DASH, false, NULL, &r);
    assert_int_equal(ls_check_error(&r, 401, "unauthorized"), 0);
    assert_null(ls_header(&r, "Connection"));
    ls_resp_free(&r);
    /* An origin that only begins with a listed one is another origin. */
    static const char *const lookalikes[] = {DASH ".evil.example", DASH ":8443", "https://dash.example.co"};
    for (size_t i = 0; i < sizeof lookalikes / sizeof lookalikes[0]; i++) {
        request(&s, "OPTIONS", "/v1/topics", lookalikes[i], false, "POST", &r);
        assert_true(r.status >= 400);
        assert_null(ls_header(&r, "Access-Control-Allow-Origin"));
        ls_resp_free(&r);
        request(&s, "GET", "/v1/topics", lookalikes[i], true, NULL, &r);
        assert_int_equal(r.status, 200);
        assert_null(ls_header(&r, "Access-Control-Allow-Origin"));
        ls_resp_free(&r);
    }
    /* Another origin's preflight is an ordinary refusal, without CORS headers. */
    request(&s, "OPTIONS", "/v1/topics", "https://evil.example", false, "POST", &r);
    assert_true(r.status >= 400);
    assert_null(ls_header(&r, "Access-Control-Allow-Origin"));
    ls_resp_free(&r);

    /* Real requests: errors readable too; the other origin and no origin get nothing. */
    request(&s, "GET", "/v1/topics", DASH, false, NULL, &r);
    assert_int_equal(r.status, 401);
    assert_string_equal(ls_header(&r, "Access-Control-Allow-Origin"), DASH);
    ls_resp_free(&r);
    request(&s, "GET", "/v1/topics", DASH, true, NULL, &r);
    assert_int_equal(r.status, 200);
    assert_string_equal(ls_header(&r, "Access-Control-Allow-Origin"), DASH);
    assert_string_equal(ls_header(&r, "Vary"), "Origin");
    assert_non_null(strstr(ls_header(&r, "Access-Control-Expose-Headers"), "X-Request-Id"));
    ls_resp_free(&r);
    request(&s, "GET", "/v1/topics/nope", "http://localhost:3000", true, NULL, &r);
    assert_int_equal(r.status, 404);
    assert_string_equal(ls_header(&r, "Access-Control-Allow-Origin"), "http://localhost:3000");
    ls_resp_free(&r);
    request(&s, "GET", "/v1/topics", "https://evil.example", true, NULL, &r);
    assert_int_equal(r.status, 200);
    assert_null(ls_header(&r, "Access-Control-Allow-Origin"));
    assert_string_equal(ls_header(&r, "Vary"), "Origin"); /* caches keep origins apart */
    ls_resp_free(&r);
    request(&s, "GET", "/v1/topics", NULL, true, NULL, &r);
    assert_null(ls_header(&r, "Access-Control-Allow-Origin"));
    ls_resp_free(&r);

    /* A deferred answer (a long-poll that times out) carries it as well. */
    const char *const create[] = {"Authorization: Bearer " TOKEN, NULL};
    const char *body = "{\"name\":\"c\",\"partitions\":1}";
    assert_int_equal(ls_http(&s, "POST", "/v1/topics", "application/json", body, strlen(body), create, &r), 0);
    assert_int_equal(r.status, 201);
    ls_resp_free(&r);
    request(&s, "GET", "/v1/topics/c/partitions/0/records?offset=latest&wait_ms=300", DASH, true, NULL, &r);
    assert_int_equal(r.status, 200);
    assert_string_equal(ls_header(&r, "Access-Control-Allow-Origin"), DASH);
    ls_resp_free(&r);
    assert_int_equal(ls_stop(&s), 0);
    ls_cleanup(&s);
}

static void test_any_origin_and_off(void **state)
{
    (void)state;
    ls_server s;
    start(&s, "*", false);
    ls_resp r;
    request(&s, "GET", "/v1/topics", "https://anything.example:8443", false, NULL, &r);
    assert_int_equal(r.status, 200);
    assert_string_equal(ls_header(&r, "Access-Control-Allow-Origin"), "*");
    assert_null(ls_header(&r, "Vary"));
    ls_resp_free(&r);
    request(&s, "OPTIONS", "/v1/topics/x/partitions/0/records", "https://a.example", false, "POST", &r);
    assert_int_equal(r.status, 204);
    assert_string_equal(ls_header(&r, "Access-Control-Allow-Methods"), "POST, GET, HEAD");
    ls_resp_free(&r);
    /* OPTIONS without Access-Control-Request-Method is no preflight: 405. */
    request(&s, "OPTIONS", "/v1/topics", "https://a.example", false, NULL, &r);
    assert_int_equal(ls_check_error(&r, 405, "method_not_allowed"), 0);
    assert_null(ls_header(&r, "Access-Control-Allow-Methods"));
    assert_null(ls_header(&r, "Connection"));
    ls_resp_free(&r);
    request(&s, "GET", "/v1/nowhere", "https://a.example", false, NULL, &r);
    assert_int_equal(ls_check_error(&r, 404, "route_not_found"), 0);
    assert_null(ls_header(&r, "Connection"));
    ls_resp_free(&r);
    assert_int_equal(ls_stop(&s), 0);
    ls_cleanup(&s);

    start(&s, NULL, false); /* the default: off */
    request(&s, "OPTIONS", "/v1/topics", DASH, false, "POST", &r);
    assert_int_equal(ls_check_error(&r, 405, "method_not_allowed"), 0);
    assert_null(ls_header(&r, "Access-Control-Allow-Origin"));
    ls_resp_free(&r);
    request(&s, "GET", "/v1/topics", DASH, false, NULL, &r);
    assert_int_equal(r.status, 200);
    assert_null(ls_header(&r, "Access-Control-Allow-Origin"));
    ls_resp_free(&r);
    assert_int_equal(ls_stop(&s), 0);
    ls_cleanup(&s);
}

static void test_bad_setting_refuses_start(void **state)
{
    (void)state;
    static const char *const bad[] = {"https://dash.example.com/app", "dash.example.com",
                                      "ftp://x.example", "https://a.example,null"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char set[300], out[4096];
        snprintf(set, sizeof set, "--set 'http.cors.allowed.origins=%s'", bad[i]);
        int st = ls_run_refused(set, out, sizeof out);
        assert_true(st > 0);
        assert_int_not_equal(st, 124);
        assert_non_null(strstr(out, "http.cors.allowed.origins"));
    }
}

static int cleanup_tmp(void **state)
{
    (void)state;
    ls_scratch_remove();
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_listed_origin_with_auth),
        cmocka_unit_test(test_any_origin_and_off),
        cmocka_unit_test(test_bad_setting_refuses_start),
    };
    return cmocka_run_group_tests(tests, NULL, cleanup_tmp);
}
