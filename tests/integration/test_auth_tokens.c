/*
 * test_auth_tokens.c - bearer-token auth (issue 7), against the real server
 * binary.
 *
 * Tokens are hashed with `logstore --hash-token` (checked against SHA-256
 * computed here) into an auth.tokens.file holding admin, read, write,
 * read+write and a read+write token limited to topics starting with
 * "orders".  The test walks api_routes() - the router's own table, linked in
 * - so every route, including ones added later, is checked: no token or a
 * bad one is 401 with WWW-Authenticate: Bearer (open routes, role NONE, stay
 * open and are only / and /health/...), a token without the route's role is
 * 403, the right token gets through (2xx with the bodies below); each
 * route's role also matches a policy written here (expected_role).  The prefix
 * token reaches "orders..." only: other topics and topic-less routes are 403.
 * No token ever reaches the server log; without auth.tokens.file the log
 * says authentication is off; a bad tokens file stops the start (exit 2).
 *
 * HTTPS is in test_tls.c; the HTTP limits (header size, records per request,
 * connections, idle timeout) in test_http_limits.c.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "api_router.h"
#include "harness.h"

#include <curl/curl.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define CHECK_ERR(r, st, code) assert_int_equal(ls_check_error(&(r), (st), (code)), 0)

/* ---- tokens --------------------------------------------------------------------- */

enum { T_ADMIN, T_READ, T_WRITE, T_RW, T_ORDERS, T_COUNT };
static const char *const TOKENS[T_COUNT] = {"adm-9f2c41d07be3", "rd-51aa07c3e9d2", "wr-0c7d2be814fa",
                                            "rw-66e1f09a3c5b", "ord-3b8e5d2a7c10"};
static const char *const ROLES[T_COUNT] = {"admin", "read", "write", "read,write", "read,write orders"};
static const char *const BOGUS = "bogus-7e31c9a04f58";

static ls_server g_auth;
static ls_server *A = &g_auth;

static void hash_token(const char *token, char hex[65])
{
    char cmd[512], out[256];
    snprintf(cmd, sizeof cmd, "%s --hash-token '%s'", ls_binary(), token);
    assert_int_equal(ls_run_cmd(cmd, out, sizeof out), 0);
    assert_int_equal(strlen(out), 65); /* 64 hex digits and a newline */
    memcpy(hex, out, 64);
    hex[64] = 0;
}

static int auth_setup(void **state)
{
    (void)state;
    char file[300], text[2048], hex[65];
    size_t used = (size_t)snprintf(text, sizeof text, "# logstore test tokens\n\n");
    for (int i = 0; i < T_COUNT; i++) {
        hash_token(TOKENS[i], hex);
        used += (size_t)snprintf(text + used, sizeof text - used, "%s %s%s\n", hex, ROLES[i],
                                 i == T_RW ? "   # trailing comment" : "");
    }
    ls_scratch_path(file, sizeof file, "tokens");
    if (ls_write_file(file, text))
        return -1;
    char setting[400];
    snprintf(setting, sizeof setting, "auth.tokens.file=%s", file);
    /* A small body limit lets test_refusals_need_a_token cross it cheaply. */
    const char *const extra[] = {setting, "log.level=DEBUG", "http.max.request.bytes=65536", NULL};
    return ls_start(A, extra);
}

static int auth_teardown(void **state)
{
    (void)state;
    ls_stop(A);
    ls_cleanup(A);
    ls_scratch_remove();
    return 0;
}

/* One request with an optional bearer token (tok NULL: no header). */
static void treq(ls_server *s, const char *tok, const char *method, const char *path,
                 const char *body, ls_resp *r)
{
    char auth[256];
    snprintf(auth, sizeof auth, "Authorization: Bearer %s", tok ? tok : "");
    const char *const hdr[] = {auth, NULL};
    assert_int_equal(ls_http(s, method, path, body ? "application/json" : NULL, body,
                             body ? strlen(body) : 0, tok ? hdr : NULL, r),
                     0);
}

static long tstatus(ls_server *s, const char *tok, const char *method, const char *path,
                    const char *body)
{
    ls_resp r;
    treq(s, tok, method, path, body, &r);
    long st = r.status;
    ls_resp_free(&r);
    return st;
}

static void test_hash_token_cli(void **state)
{
    (void)state;
    char hex[65], want[65];
    hash_token("abc", hex);
    unsigned char md[32];
    unsigned int n = 0;
    assert_int_equal(EVP_Digest("abc", 3, md, &n, EVP_sha256(), NULL), 1);
    for (int i = 0; i < 32; i++)
        snprintf(want + 2 * i, 3, "%02x", md[i]);
    assert_string_equal(hex, want);
    assert_string_equal(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

/* Minimal valid query and body for the routes that need them. */
typedef struct walk_entry {
    const char *method, *pattern, *query, *body;
} walk_entry;

#define TP "/v1/topics/{topic}/partitions/{partition}"
#define REC "{\"records\":[{\"key\":\"k\",\"value\":\"v\"}]}"
static const walk_entry WALK[] = {
    {"POST", "/v1/topics", "", "{\"name\":\"orders-created\"}"},
    {"PATCH", "/v1/topics/{topic}", "", "{\"partitions\":2}"},
    {"POST", "/v1/topics/{topic}/records", "", REC},
    {"GET", TP "/offsets", "?spec=latest", NULL},
    {"POST", TP "/records", "", REC},
    {"POST", TP "/segments:roll", "", "{}"},
    {"POST", TP "/records:delete", "", "{\"before_offset\":0}"},
    {"POST", "/v1/topics/{topic}/retention:run", "", "{\"dry_run\":true}"},
    {"POST", "/v1/admin/retention:run", "", "{\"dry_run\":true}"},
    {"POST", "/v1/topics/{topic}/compaction:run", "", "{\"dry_run\":true}"},
    {"POST", "/v1/admin/compaction:run", "", "{\"dry_run\":true}"},
    {"POST", "/v1/topics/{topic}/configs:alter", "",
     "{\"operations\":[{\"name\":\"retention.ms\",\"op\":\"SET\",\"value\":\"86400000\"}]}"},
    {"PUT", "/v1/topics/{topic}/configs/{name}", "", "{\"value\":\"86400000\"}"},
    /* named as fill() names {name}, so the DELETE route after it finds it */
    {"POST", "/v1/admin/snapshots", "", "{\"name\":\"retention.ms\"}"},
};

static const walk_entry *walk_entry_of(const api_route *r)
{
    for (size_t i = 0; i < sizeof WALK / sizeof WALK[0]; i++)
        if (!strcmp(WALK[i].method, r->method) && !strcmp(WALK[i].pattern, r->pattern))
            return &WALK[i];
    return NULL;
}

/* The route's pattern with its captures filled in: {topic} = topic,
 * {name} = retention.ms, any other (partition, offset, base) = 0. */
static void fill(const char *pattern, const char *topic, const char *query, char *out, size_t len)
{
    size_t used = 0;
    for (const char *p = pattern; *p && used + 1 < len;) {
        if (*p != '{') {
            out[used++] = *p++;
            continue;
        }
        const char *end = strchr(p, '}');
        assert_non_null(end);
        const char *v = !strncmp(p, "{topic}", 7) ? topic : !strncmp(p, "{name}", 6) ? "retention.ms" : "0";
        used += (size_t)snprintf(out + used, len - used, "%s", v);
        p = end + 1;
    }
    snprintf(out + used, len - used, "%s", query ? query : "");
}

/* The role policy, independent of the table: reading needs read (the
 * dashboard and health are open), appending and deleting records need
 * write, every other change needs admin. */
static api_role expected_role(const api_route *r)
{
    if (!strcmp(r->method, "GET"))
        return !strcmp(r->pattern, "/") || !strncmp(r->pattern, "/health/", 8) ? API_ROLE_NONE
                                                                              : API_ROLE_READ;
    if (!strcmp(r->method, "POST") &&
        (!strcmp(r->pattern, "/v1/topics/{topic}/records") || !strcmp(r->pattern, TP "/records") ||
         !strcmp(r->pattern, TP "/records:delete")))
        return API_ROLE_WRITE;
    return API_ROLE_ADMIN;
}

static bool has_topic(const api_route *r)
{
    return strstr(r->pattern, "{topic}") != NULL;
}

static void expect_401(ls_server *s, const char *tok, const char *method, const char *path,
                       const char *body)
{
    ls_resp r;
    treq(s, tok, method, path, body, &r);
    if (r.status != 401)
        fprintf(stderr, "# %s %s with %s: %ld, expected 401\n", method, path, tok ? tok : "no token", r.status);
    CHECK_ERR(r, 401, "unauthorized");
    const char *h = ls_header(&r, "WWW-Authenticate");
    assert_non_null(h);
    assert_int_equal(strncmp(h, "Bearer", 6), 0);
    ls_resp_free(&r);
}

static void expect_403(ls_server *s, const char *tok, const char *method, const char *path,
                       const char *body, const char *message_part)
{
    ls_resp r;
    treq(s, tok, method, path, body, &r);
    if (r.status != 403)
        fprintf(stderr, "# %s %s with %s: %ld, expected 403\n", method, path, tok, r.status);
    CHECK_ERR(r, 403, "forbidden");
    if (message_part)
        assert_non_null(strstr(ls_jstr(&r, "message"), message_part));
    ls_resp_free(&r);
}

static void setup_topics(void)
{
    ls_resp r;
    treq(A, TOKENS[T_ADMIN], "POST", "/v1/topics",
         "{\"name\":\"orders\",\"configs\":{\"cleanup.policy\":\"compact,delete\"}}", &r);
    assert_int_equal(r.status, 201);
    ls_resp_free(&r);
    assert_int_equal(tstatus(A, TOKENS[T_ADMIN], "POST", "/v1/topics", "{\"name\":\"orders-doomed\"}"), 201);
    assert_int_equal(tstatus(A, TOKENS[T_ADMIN], "POST", "/v1/topics", "{\"name\":\"orders-eu\"}"), 201);
    assert_int_equal(tstatus(A, TOKENS[T_ADMIN], "POST", "/v1/topics", "{\"name\":\"other\"}"), 201);
    assert_int_equal(tstatus(A, TOKENS[T_WRITE], "POST", "/v1/topics/orders/partitions/0/records", REC), 200);
}

static void test_route_walk(void **state)
{
    (void)state;
    setup_topics();
    /* tokens lacking each role: write-only lacks read; read-only lacks write;
     * read+write lacks admin */
    const int lacking[4][2] = {{-1, -1}, {T_WRITE, T_WRITE}, {T_READ, T_READ}, {T_RW, T_READ}};
    const int right[4] = {-1, T_READ, T_WRITE, T_ADMIN};
    int walked = 0, open_routes = 0;
    for (const api_route *rt = api_routes(); rt->method; rt++, walked++) {
        if (rt->role != expected_role(rt))
            fprintf(stderr, "# %s %s declares role %d, the policy says %d\n", rt->method,
                    rt->pattern, (int)rt->role, (int)expected_role(rt));
        assert_int_equal(rt->role, expected_role(rt));
        const walk_entry *w = walk_entry_of(rt);
        const char *body = w ? w->body : (rt->flags & API_ROUTE_BODY) ? "{}" : NULL;
        char path[512];
        /* the topic delete gets a topic of its own */
        fill(rt->pattern, !strcmp(rt->method, "DELETE") && !strcmp(rt->pattern, "/v1/topics/{topic}")
                              ? "orders-doomed" : "orders",
             w ? w->query : "", path, sizeof path);
        if (rt->role == API_ROLE_NONE) {
            open_routes++;
            /* open: only the dashboard and health, whatever token comes */
            assert_true(!strcmp(rt->pattern, "/") || !strncmp(rt->pattern, "/health/", 8));
            long st = tstatus(A, NULL, rt->method, path, body);
            assert_true(st >= 200 && st < 300);
            assert_true(tstatus(A, BOGUS, rt->method, path, body) < 300);
            continue;
        }
        expect_401(A, NULL, rt->method, path, body);
        expect_401(A, BOGUS, rt->method, path, body);
        expect_401(A, "", rt->method, path, body);
        for (int k = 0; k < 2; k++)
            expect_403(A, TOKENS[lacking[rt->role][k]], rt->method, path, body, "role");
        long st = tstatus(A, TOKENS[right[rt->role]], rt->method, path, body);
        if (st < 200 || st >= 300)
            fprintf(stderr, "# %s %s with the %s token: %ld\n", rt->method, path, ROLES[right[rt->role]], st);
        if (w || !(rt->flags & API_ROUTE_BODY))
            assert_true(st >= 200 && st < 300);
        else
            assert_true(st != 401 && st != 403);
        /* admin implies every role */
        if (rt->role != API_ROLE_ADMIN && !strcmp(rt->method, "GET"))
            assert_true(tstatus(A, TOKENS[T_ADMIN], rt->method, path, body) < 300);
    }
    assert_true(walked >= 34);
    assert_int_equal(open_routes, 3);

    /* other ways of not presenting a valid bearer token */
    const char *const basic[] = {"Authorization: Basic YWRtaW46YWRtaW4=", NULL};
    ls_resp r;
    assert_int_equal(ls_http(A, "GET", "/v1/topics", NULL, NULL, 0, basic, &r), 0);
    CHECK_ERR(r, 401, "unauthorized");
    ls_resp_free(&r);
    char lower[128];
    snprintf(lower, sizeof lower, "Authorization: bearer %s", TOKENS[T_READ]);
    const char *const lc[] = {lower, NULL};
    assert_int_equal(ls_http(A, "GET", "/v1/topics", NULL, NULL, 0, lc, &r), 0);
    assert_int_equal(r.status, 200); /* the scheme is case-insensitive (RFC 7235) */
    ls_resp_free(&r);
}

static void test_prefix_token(void **state)
{
    (void)state;
    const char *o = TOKENS[T_ORDERS];
    /* its own topics, reading and writing */
    assert_int_equal(tstatus(A, o, "GET", "/v1/topics/orders", NULL), 200);
    assert_int_equal(tstatus(A, o, "GET", "/v1/topics/orders-eu/configs", NULL), 200);
    assert_int_equal(tstatus(A, o, "POST", "/v1/topics/orders/partitions/0/records", REC), 200);
    assert_int_equal(tstatus(A, o, "POST", "/v1/topics/orders-eu/records", REC), 200);
    assert_int_equal(tstatus(A, o, "GET", "/v1/topics/orders/partitions/0/records?offset=0", NULL), 200);
    /* every route, on another topic or without one: 403 (the prefix, or the
     * missing admin role) */
    const char *const others[] = {"other", "order", "Orders", "xorders"};
    for (const api_route *rt = api_routes(); rt->method; rt++) {
        if (rt->role == API_ROLE_NONE) {
            assert_true(tstatus(A, o, rt->method, rt->pattern, NULL) < 300);
            continue;
        }
        const walk_entry *w = walk_entry_of(rt);
        const char *body = w ? w->body : (rt->flags & API_ROUTE_BODY) ? "{}" : NULL;
        const char *why = rt->role == API_ROLE_ADMIN ? "role" : "orders";
        for (size_t k = 0; k < (has_topic(rt) ? sizeof others / sizeof others[0] : 1); k++) {
            char path[512];
            fill(rt->pattern, others[k], w ? w->query : "", path, sizeof path);
            expect_403(A, o, rt->method, path, body, why);
        }
    }
    /* nothing was written to "other" */
    ls_resp r;
    treq(A, TOKENS[T_READ], "GET", "/v1/topics/other/partitions/0", NULL, &r);
    assert_int_equal(r.status, 200);
    assert_int_equal(ls_jint(&r, "log_end_offset"), 0);
    ls_resp_free(&r);
}

/* Answers that come before a route's own check (no such route, a method the
 * path does not take, a body over the limit) still want a token: a client
 * without one learns nothing of which routes exist. */
static void test_refusals_need_a_token(void **state)
{
    (void)state;
    const char *const paths[][2] = {{"GET", "/v1/nope"},
                                    {"GET", "/v1/topics/orders/partitions/0/nope"},
                                    {"DELETE", "/v1/topics"}};
    for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++) {
        expect_401(A, NULL, paths[i][0], paths[i][1], NULL);
        expect_401(A, BOGUS, paths[i][0], paths[i][1], NULL);
    }
    ls_resp r;
    treq(A, TOKENS[T_READ], "GET", "/v1/nope", NULL, &r);
    CHECK_ERR(r, 404, "route_not_found");
    ls_resp_free(&r);
    treq(A, TOKENS[T_WRITE], "DELETE", "/v1/topics", NULL, &r);
    CHECK_ERR(r, 405, "method_not_allowed");
    ls_resp_free(&r);
    /* A body over http.max.request.bytes, refused on its Content-Length. */
    size_t n = 70000;
    char *big = malloc(n + 1);
    assert_non_null(big);
    memset(big, 'x', n);
    big[n] = 0;
    expect_401(A, NULL, "POST", "/v1/topics/orders/partitions/0/records", big);
    expect_401(A, BOGUS, "POST", "/v1/topics/orders/partitions/0/records", big);
    treq(A, TOKENS[T_WRITE], "POST", "/v1/topics/orders/partitions/0/records", big, &r);
    CHECK_ERR(r, 413, "request_too_large");
    ls_resp_free(&r);
    free(big);
    /* Open routes stay open whatever the body. */
    assert_int_equal(tstatus(A, NULL, "GET", "/health/live", NULL), 200);
    /* White space around the token is the header's (RFC 9110 OWS), not the token's. */
    char padded[200];
    snprintf(padded, sizeof padded, "  %s \t", TOKENS[T_READ]);
    assert_int_equal(tstatus(A, padded, "GET", "/v1/topics", NULL), 200);
}

/* Last in the group: stops the auth server to read its whole log. */
static void test_tokens_never_logged(void **state)
{
    (void)state;
    assert_int_equal(ls_stop(A), 0);
    assert_true(ls_file_contains(A->log_path, "authentication is on: 5 tokens"));
    for (int i = 0; i < T_COUNT; i++) {
        if (ls_file_contains(A->log_path, TOKENS[i]))
            fprintf(stderr, "# token %s is in the server log\n", TOKENS[i]);
        assert_false(ls_file_contains(A->log_path, TOKENS[i]));
    }
    assert_false(ls_file_contains(A->log_path, BOGUS));
}

static void test_auth_off_is_logged(void **state)
{
    (void)state;
    ls_server s;
    assert_int_equal(ls_start(&s, NULL), 0);
    assert_true(ls_file_contains(s.log_path, "authentication is off"));
    ls_stop(&s);
    ls_cleanup(&s);
}

#define ABC_HASH "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"

static void test_bad_tokens_file_refuses_start(void **state)
{
    (void)state;
    char file[300], set[400], out[16384];
    ls_scratch_path(file, sizeof file, "bad-tokens");
    assert_int_equal(ls_write_file(file, "# ok so far\nnot-a-hash read\n"), 0);
    snprintf(set, sizeof set, "--set auth.tokens.file=%s", file);
    assert_int_equal(ls_run_refused(set, out, sizeof out), 2);
    assert_non_null(strstr(out, "line 2"));
    assert_int_equal(ls_write_file(file, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad root\n"), 0);
    assert_int_equal(ls_run_refused(set, out, sizeof out), 2);
    /* The same token twice: one of the two lines would be ignored. */
    assert_int_equal(ls_write_file(file, "# two\n" ABC_HASH " read\n\n" ABC_HASH " admin\n"), 0);
    assert_int_equal(ls_run_refused(set, out, sizeof out), 2);
    assert_non_null(strstr(out, "line 4"));
    assert_non_null(strstr(out, "line 2"));
    /* A NUL byte ended the line early: "admin orders" read as "admin". */
    static const char nul[] = ABC_HASH " admin\0 orders\n";
    FILE *f = fopen(file, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(nul, 1, sizeof nul - 1, f), sizeof nul - 1);
    assert_int_equal(fclose(f), 0);
    assert_int_equal(ls_run_refused(set, out, sizeof out), 2);
    assert_non_null(strstr(out, "line 1"));
    /* No token at all: every request but health would be refused. */
    assert_int_equal(ls_write_file(file, "# nothing yet\n\n"), 0);
    assert_int_equal(ls_run_refused(set, out, sizeof out), 2);
    assert_non_null(strstr(out, "no token"));
    snprintf(set, sizeof set, "--set auth.tokens.file=%s.missing", file);
    assert_int_equal(ls_run_refused(set, out, sizeof out), 2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hash_token_cli),
        cmocka_unit_test(test_route_walk),
        cmocka_unit_test(test_prefix_token),
        cmocka_unit_test(test_refusals_need_a_token),
        cmocka_unit_test(test_tokens_never_logged),
        cmocka_unit_test(test_auth_off_is_logged),
        cmocka_unit_test(test_bad_tokens_file_refuses_start),
    };
    return cmocka_run_group_tests(tests, auth_setup, auth_teardown);
}
