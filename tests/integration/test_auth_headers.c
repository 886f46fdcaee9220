/*
 * test_auth_headers.c - the forms an Authorization header can take, against
 * the real server with auth.tokens.file set (RFC 6750 §3).
 *
 * A request without a token gets 401 and `WWW-Authenticate: Bearer` with no
 * error attribute; one whose token is not valid (empty, unknown, non-ASCII,
 * very long) adds error="invalid_token"; a known token without the route's
 * role or outside its prefix gets 403 with error="insufficient_scope".  Two
 * Authorization headers are 400 invalid_request whichever comes first: the
 * first used to win, so a proxy reading the last one and this server
 * disagreed on who was asking.  A tokens file others may write is warned
 * about at start.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "harness.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define CHECK_ERR(r, st, code) assert_int_equal(ls_check_error(&(r), (st), (code)), 0)

static const char *const TOK_READ = "hdr-rd-8c1f5a02";
static const char *const TOK_ORDERS = "hdr-ord-e73b9d40";

static ls_server g_srv;
static ls_server *S = &g_srv;

static void hash_token(const char *token, char hex[65])
{
    char cmd[512], out[256];
    snprintf(cmd, sizeof cmd, "%s --hash-token '%s'", ls_binary(), token);
    assert_int_equal(ls_run_cmd(cmd, out, sizeof out), 0);
    assert_int_equal(strlen(out), 65);
    memcpy(hex, out, 64);
    hex[64] = 0;
}

static int setup(void **state)
{
    (void)state;
    char file[300], text[512], r[65], o[65], setting[400];
    hash_token(TOK_READ, r);
    hash_token(TOK_ORDERS, o);
    snprintf(text, sizeof text, "%s read\n%s read orders\n", r, o);
    ls_scratch_path(file, sizeof file, "tokens");
    if (ls_write_file(file, text) || chmod(file, 0600))
        return -1;
    snprintf(setting, sizeof setting, "auth.tokens.file=%s", file);
    const char *const extra[] = {setting, NULL};
    return ls_start(S, extra);
}

static int teardown(void **state)
{
    (void)state;
    ls_stop(S);
    ls_cleanup(S);
    ls_scratch_remove();
    return 0;
}

/* GET /v1/topics with the given header lines (NULL-terminated). */
static void get_with(const char *const *hdr, ls_resp *r)
{
    assert_int_equal(ls_http(S, "GET", "/v1/topics", NULL, NULL, 0, hdr, r), 0);
}

/* The answer's status and WWW-Authenticate are what RFC 6750 §3 asks. */
static void expect_challenge(const char *const *hdr, long status, const char *code,
                             const char *error_attr)
{
    ls_resp r;
    get_with(hdr, &r);
    if (r.status != status)
        fprintf(stderr, "# %s: %ld, expected %ld\n", hdr && hdr[0] ? hdr[0] : "(none)", r.status,
                status);
    CHECK_ERR(r, status, code);
    const char *h = ls_header(&r, "WWW-Authenticate");
    assert_non_null(h);
    assert_int_equal(strncmp(h, "Bearer realm=\"logstore\"", 23), 0);
    if (error_attr) {
        char want[64];
        snprintf(want, sizeof want, "error=\"%s\"", error_attr);
        if (!strstr(h, want))
            fprintf(stderr, "# %s: WWW-Authenticate: %s\n", hdr ? hdr[0] : "(none)", h);
        assert_non_null(strstr(h, want));
    } else {
        assert_null(strstr(h, "error="));
    }
    ls_resp_free(&r);
}

static void test_challenges(void **state)
{
    (void)state;
    expect_challenge(NULL, 401, "unauthorized", NULL);
    const char *const basic[] = {"Authorization: Basic cmVhZDpyZWFk", NULL};
    expect_challenge(basic, 401, "unauthorized", NULL);
    const char *const bare[] = {"Authorization: Bearer", NULL};
    expect_challenge(bare, 401, "unauthorized", NULL);
    const char *const empty[] = {"Authorization: Bearer ", NULL};
    expect_challenge(empty, 401, "unauthorized", "invalid_token");
    const char *const unknown[] = {"Authorization: Bearer hdr-nope-00", NULL};
    expect_challenge(unknown, 401, "unauthorized", "invalid_token");
    const char *const utf8[] = {"Authorization: Bearer hdr-rd-8c1f5a0\xc3\xa9", NULL};
    expect_challenge(utf8, 401, "unauthorized", "invalid_token");
    size_t n = 6000;
    char *longer = malloc(n + 32);
    assert_non_null(longer);
    int k = snprintf(longer, n + 32, "Authorization: Bearer %s", TOK_READ);
    memset(longer + k, 'x', n - (size_t)k);
    longer[n] = 0;
    const char *const lng[] = {longer, NULL};
    expect_challenge(lng, 401, "unauthorized", "invalid_token");
    free(longer);

    /* a known token: the wrong role, another topic */
    char ord[128], rd[128];
    snprintf(ord, sizeof ord, "Authorization: Bearer %s", TOK_ORDERS);
    snprintf(rd, sizeof rd, "Authorization: Bearer %s", TOK_READ);
    const char *const scoped[] = {ord, NULL};
    expect_challenge(scoped, 403, "forbidden", "insufficient_scope");
    ls_resp r;
    assert_int_equal(ls_http(S, "DELETE", "/v1/topics/orders", NULL, NULL, 0,
                             (const char *const[]){rd, NULL}, &r), 0);
    CHECK_ERR(r, 403, "forbidden");
    assert_non_null(strstr(ls_header(&r, "WWW-Authenticate"), "error=\"insufficient_scope\""));
    ls_resp_free(&r);
    /* and a token that passes gets no challenge */
    get_with((const char *const[]){rd, NULL}, &r);
    assert_int_equal(r.status, 200);
    assert_null(ls_header(&r, "WWW-Authenticate"));
    ls_resp_free(&r);
}

static void test_two_authorization_headers(void **state)
{
    (void)state;
    char rd[128];
    snprintf(rd, sizeof rd, "Authorization: Bearer %s", TOK_READ);
    const char *const good_first[] = {rd, "Authorization: Bearer hdr-nope-00", NULL};
    const char *const good_last[] = {"Authorization: Bearer hdr-nope-00", rd, NULL};
    const char *const both_good[] = {rd, rd, NULL};
    expect_challenge(good_first, 400, "invalid_request", "invalid_request");
    expect_challenge(good_last, 400, "invalid_request", "invalid_request");
    expect_challenge(both_good, 400, "invalid_request", "invalid_request");
    /* an unknown path says no more than it does without a token */
    ls_resp r;
    assert_int_equal(ls_http(S, "GET", "/v1/nope", NULL, NULL, 0, good_first, &r), 0);
    assert_true(r.status == 400 || r.status == 401);
    ls_resp_free(&r);
}

/* Whoever can write the tokens file can give themselves admin: the start
 * says so when others can, and is quiet when they cannot. */
static void test_writable_tokens_file_warns(void **state)
{
    (void)state;
    assert_false(ls_file_contains(S->log_path, "writable by"));
    char file[300], setting[400], text[128], hex[65];
    hash_token(TOK_READ, hex);
    snprintf(text, sizeof text, "%s read\n", hex);
    ls_scratch_path(file, sizeof file, "tokens-shared");
    assert_int_equal(ls_write_file(file, text), 0);
    assert_int_equal(chmod(file, 0666), 0);
    snprintf(setting, sizeof setting, "auth.tokens.file=%s", file);
    const char *const extra[] = {setting, NULL};
    ls_server s;
    assert_int_equal(ls_start(&s, extra), 0);
    bool warned = ls_file_contains(s.log_path, "writable by other users");
    ls_stop(&s);
    ls_cleanup(&s);
    assert_true(warned);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_challenges),
        cmocka_unit_test(test_two_authorization_headers),
        cmocka_unit_test(test_writable_tokens_file_warns),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
