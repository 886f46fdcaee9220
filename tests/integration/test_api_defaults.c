/*
 * test_api_defaults.c - the HTTP API's documented defaults and edges that no
 * other suite pinned (found by mutation-testing api/ and service/): a value
 * changed or a bound moved by one here fails a test.
 *
 * Covers: a read's default max_records (100) and max_bytes (1 MiB, README's
 * query table; a page reaching it exactly is not cut); until_timestamp keeps
 * a record whose timestamp equals it ("later than" stops a page); max_bytes
 * is refused past 64 MiB.  A retention run's totals add up its partitions,
 * ?partition= past the last is 404 and records:delete takes no before_offset
 * under -1.  /metrics adds up a topic's partitions and keeps histogram
 * buckets cumulative.
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

/* ---- maintenance runs ------------------------------------------------------------ */

/* POST path with body; asserts status and leaves the response in *r. */
static void post_status(const char *path, const char *body, long status, ls_resp *r)
{
    assert_int_equal(ls_post(S, path, body, r), 0);
    if (r->status != status)
        fprintf(stderr, "# POST %s -> %ld %.300s\n", path, r->status, r->body);
    assert_int_equal(r->status, status);
}

/* Topic "mnt": two partitions, each with a rolled segment [0, 1) below the
 * log start offset (1), which the next retention run deletes. */
static void make_mnt(void)
{
    assert_int_equal(ls_create_topic(S, "mnt", 2, NULL), 201);
    for (int p = 0; p < 2; p++) {
        char path[128];
        ls_resp r;
        assert_int_equal(ls_append_json(S, "mnt", p, "{\"records\":[{\"value\":\"old\"}]}"), 200);
        snprintf(path, sizeof path, "/v1/topics/mnt/partitions/%d/segments:roll", p);
        post_status(path, "{}", 200, &r);
        ls_resp_free(&r);
        assert_int_equal(ls_append_json(S, "mnt", p, "{\"records\":[{\"value\":\"new\"}]}"), 200);
        snprintf(path, sizeof path, "/v1/topics/mnt/partitions/%d/records:delete", p);
        post_status(path, "{\"before_offset\":1}", 200, &r);
        assert_int_equal(ls_jint(&r, "log_start_offset"), 1);
        ls_resp_free(&r);
    }
}

/* A retention run's totals add up every partition's segments and bytes;
 * ?partition= names one that exists (404 past the last); before_offset
 * takes -1 (the high watermark) and nothing lower. */
static void test_retention_run_totals_and_filter(void **state)
{
    (void)state;
    make_mnt();
    ls_resp r;
    post_status("/v1/topics/mnt/retention:run?partition=2", "{}", 404, &r);
    CHECK_ERR(r, 404, "unknown_partition");
    ls_resp_free(&r);
    assert_int_equal(ls_expect_error(S, "POST", "/v1/topics/mnt/partitions/0/records:delete",
                                     "{\"before_offset\":-2}", 400, "invalid_request"), 0);
    assert_int_equal(ls_partition_field(S, "mnt", 0, "log_start_offset"), 1);

    post_status("/v1/topics/mnt/retention:run?partition=1", "{\"dry_run\":true}", 200, &r);
    assert_int_equal(json_array_size(ls_jget(&r, "partitions")), 1);
    assert_int_equal(ls_jint(&r, "partitions.0.partition"), 1);
    assert_int_equal(ls_jint(&r, "segments_deleted"), 1);
    ls_resp_free(&r);

    post_status("/v1/topics/mnt/retention:run", "{}", 200, &r);
    assert_int_equal(json_array_size(ls_jget(&r, "partitions")), 2);
    long long segs = 0, bytes = 0;
    for (int i = 0; i < 2; i++) {
        json_t *pr = json_array_get(ls_jget(&r, "partitions"), (size_t)i);
        long long n = (long long)json_array_size(json_object_get(pr, "segments_deleted"));
        long long b = json_integer_value(json_object_get(pr, "bytes_freed"));
        assert_int_equal(n, 1);
        assert_true(b > 0);
        segs += n;
        bytes += b;
    }
    assert_int_equal(ls_jint(&r, "segments_deleted"), segs);
    assert_int_equal(ls_jint(&r, "bytes_freed"), bytes);
    ls_resp_free(&r);
}

/* ---- metrics ---------------------------------------------------------------------- */

/* The value of the /metrics line that starts with prefix (name and labels), or -1. */
static long long metric(const char *text, const char *prefix)
{
    size_t n = strlen(prefix);
    for (const char *l = text; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL)
        if (!strncmp(l, prefix, n) && l[n] == ' ')
            return atoll(l + n + 1);
    return -1;
}

/* Traffic counters add up a topic's partitions; a latency histogram's
 * buckets are cumulative, ending at +Inf with the count. */
static void test_metrics_sums_and_buckets(void **state)
{
    (void)state;
    assert_int_equal(ls_create_topic(S, "mt", 2, NULL), 201);
    assert_int_equal(ls_append_json(S, "mt", 0, "{\"records\":[{\"value\":\"a\"}]}"), 200);
    assert_int_equal(ls_append_json(S, "mt", 1, "{\"records\":[{\"value\":\"b\"},{\"value\":\"c\"}]}"), 200);
    for (int i = 0; i < 3; i++)
        assert_int_equal(ls_live_status(S), 200);
    ls_resp r;
    get_ok("/metrics", &r);
    assert_int_equal(metric(r.body, "logstore_records_appended_total{topic=\"mt\"}"), 3);
    const char *route = "{method=\"GET\",route=\"/health/live\"";
    char name[256];
    snprintf(name, sizeof name, "logstore_http_request_duration_seconds_count%s}", route);
    long long count = metric(r.body, name);
    assert_true(count >= 3);
    /* Every bucket line of the route, in order: never decreasing, +Inf = count. */
    snprintf(name, sizeof name, "logstore_http_request_duration_seconds_bucket%s,le=\"", route);
    long long prev = 0, last = -1;
    size_t buckets = 0;
    for (const char *l = strstr(r.body, name); l; l = strstr(l + 1, name)) {
        long long v = atoll(strchr(l, ' ') + 1);
        assert_true(v >= prev);
        prev = last = v;
        buckets++;
        if (!strncmp(l + strlen(name), "+Inf\"", 5))
            break;
    }
    assert_true(buckets > 1);
    assert_int_equal(last, count);
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
        cmocka_unit_test(test_retention_run_totals_and_filter),
        cmocka_unit_test(test_metrics_sums_and_buckets),
        cmocka_unit_test(test_zz_clean_stop),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
