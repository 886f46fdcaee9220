/*
 * test_api_defaults.c - the HTTP API's documented defaults and edges that no
 * other suite pinned (found by mutation-testing api/ and service/): a value
 * changed or a bound moved by one here fails a test.
 *
 * Covers: a read's default max_records (100) and max_bytes (1 MiB, README's
 * query table; a page reaching it exactly is not cut); until_timestamp keeps
 * a record whose timestamp equals it ("later than" stops a page); max_bytes
 * is refused past 64 MiB.
 *
 * One server serves the whole group.  The last test requires a clean exit.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "group_server.h"
#include "harness.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* GET path; asserts 200 and leaves the response in *r. */
static void get_ok(const char *path, ls_resp *r)
{
    assert_int_equal(ls_get(S, path, r), 0);
    if (r->status != 200)
        fprintf(stderr, "# GET %s -> %ld %.300s\n", path, r->status, r->body);
    assert_int_equal(r->status, 200);
}

/* Appends n records with keys k<i>, values v<i> and timestamps 1000 * (i + 1),
 * starting at index first, to partition 0 of topic. */
static void append_n(const char *topic, int first, int n)
{
    size_t cap = 64 + (size_t)n * 80, len = 0;
    char *body = malloc(cap);
    assert_non_null(body);
    len += (size_t)snprintf(body, cap, "{\"records\":[");
    for (int i = first; i < first + n; i++)
        len += (size_t)snprintf(body + len, cap - len,
                                "%s{\"key\":\"k%d\",\"value\":\"v%d\",\"timestamp\":%d}",
                                i > first ? "," : "", i, i, (i + 1) * 1000);
    snprintf(body + len, cap - len, "]}");
    assert_int_equal(ls_append_json(S, topic, 0, body), 200);
    free(body);
}

/* ---- reads ---------------------------------------------------------------------- */

/* 150 records: a read naming no max_records returns README's default, 100,
 * with the cursor after them; the next page has the other 50. */
static void test_read_default_max_records(void **state)
{
    (void)state;
    assert_int_equal(ls_create_topic(S, "dflt", 1, NULL), 201);
    append_n("dflt", 0, 150);
    ls_resp r;
    get_ok("/v1/topics/dflt/partitions/0/records?offset=0", &r);
    assert_int_equal(json_array_size(ls_jget(&r, "records")), 100);
    assert_int_equal(ls_jint(&r, "records.99.offset"), 99);
    assert_int_equal(ls_jint(&r, "next_offset"), 100);
    assert_int_equal(ls_jint(&r, "high_watermark"), 150);
    ls_resp_free(&r);
    get_ok("/v1/topics/dflt/partitions/0/records?offset=100", &r);
    assert_int_equal(json_array_size(ls_jget(&r, "records")), 50);
    assert_int_equal(ls_jint(&r, "next_offset"), 150);
    ls_resp_free(&r);
}

/* until_timestamp=T keeps the record stamped exactly T. */
static void test_read_until_timestamp_inclusive(void **state)
{
    (void)state;
    ls_resp r;
    /* dflt: record i has timestamp 1000 * (i + 1). */
    get_ok("/v1/topics/dflt/partitions/0/records?offset=0&until_timestamp=3000", &r);
    assert_int_equal(json_array_size(ls_jget(&r, "records")), 3);
    assert_int_equal(ls_jint(&r, "records.2.timestamp"), 3000);
    assert_int_equal(ls_jint(&r, "next_offset"), 3);
    ls_resp_free(&r);
    get_ok("/v1/topics/dflt/partitions/0/records?offset=0&until_timestamp=2999", &r);
    assert_int_equal(json_array_size(ls_jget(&r, "records")), 2);
    assert_int_equal(ls_jint(&r, "next_offset"), 2);
    ls_resp_free(&r);
}

/* max_bytes takes up to 64 MiB: a page's budget, not the client's to raise
 * without end. */
static void test_read_max_bytes_bound(void **state)
{
    (void)state;
    ls_resp r;
    get_ok("/v1/topics/dflt/partitions/0/records?offset=0&max_records=1&max_bytes=67108864", &r);
    assert_int_equal(json_array_size(ls_jget(&r, "records")), 1);
    ls_resp_free(&r);
    assert_int_equal(ls_expect_error(S, "GET",
                                     "/v1/topics/dflt/partitions/0/records?offset=0&max_bytes=67108865",
                                     NULL, 400, "invalid_request"), 0);
}

/* Appends one record to partition 0 of topic: no key, a value of n 'a's. */
static void append_value_of(const char *topic, size_t n)
{
    char *body = malloc(n + 64);
    assert_non_null(body);
    int k = snprintf(body, n + 64, "{\"records\":[{\"value\":\"");
    memset(body + k, 'a', n);
    snprintf(body + k + n, 64, "\"}]}");
    assert_int_equal(ls_append_json(S, topic, 0, body), 200);
    free(body);
}

/* Two 512 KiB values add up to exactly the default max_bytes (1 MiB): both
 * come back, and the one-byte record after them does not. */
static void test_read_default_max_bytes(void **state)
{
    (void)state;
    assert_int_equal(ls_create_topic(S, "dfltb", 1, NULL), 201);
    append_value_of("dfltb", 512 * 1024);
    append_value_of("dfltb", 512 * 1024);
    append_value_of("dfltb", 1);
    ls_resp r;
    get_ok("/v1/topics/dfltb/partitions/0/records?offset=0", &r);
    assert_int_equal(json_array_size(ls_jget(&r, "records")), 2);
    assert_int_equal(json_string_length(ls_jget(&r, "records.1.value")), 512 * 1024);
    assert_int_equal(ls_jint(&r, "next_offset"), 2);
    ls_resp_free(&r);
    /* One byte less and the second no longer fits. */
    get_ok("/v1/topics/dfltb/partitions/0/records?offset=0&max_bytes=1048575", &r);
    assert_int_equal(json_array_size(ls_jget(&r, "records")), 1);
    assert_int_equal(ls_jint(&r, "next_offset"), 1);
    ls_resp_free(&r);
}

/* Last: a clean stop exits 0 (leaks fail the sanitizer build's exit). */
static void test_zz_clean_stop(void **state)
{
    (void)state;
    assert_int_equal(ls_stop(S), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_read_default_max_records),
        cmocka_unit_test(test_read_until_timestamp_inclusive),
        cmocka_unit_test(test_read_max_bytes_bound),
        cmocka_unit_test(test_read_default_max_bytes),
        cmocka_unit_test(test_zz_clean_stop),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
