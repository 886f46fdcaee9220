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

#include <signal.h>
#include <stdio.h>
#include <string.h>

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
        cmocka_unit_test(test_sigint_and_sighup_stop_cleanly),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
