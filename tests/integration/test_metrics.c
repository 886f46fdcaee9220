/*
 * test_metrics.c - /metrics counters with exact values (found by
 * mutation-testing api_metrics.c and the read paths: only
 * logstore_records_appended_total was pinned):
 *
 *   - logstore_bytes_appended_total adds each append's batch_bytes;
 *   - logstore_records_read_total and logstore_bytes_read_total count what
 *     readers were handed, as pages and as streams (NDJSON, bounded by
 *     max_records) and as single records by offset, bytes being keys plus
 *     values plus headers;
 *   - logstore_http_requests_total counts each request under its route and
 *     its own status (201 for a create, 404 for an unknown topic).
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

/* The value of the /metrics line that is exactly name (with labels), or 0
 * when the line is absent (a counter not yet counted). */
static long long metric(const char *name)
{
    long long v = ls_metric(S, name, 0);
    assert_true(v >= 0);
    return v;
}

#define CREATED "logstore_http_requests_total{method=\"POST\",route=\"/v1/topics\",status=\"201\"}"
#define CREATE_409 "logstore_http_requests_total{method=\"POST\",route=\"/v1/topics\",status=\"409\"}"
#define DESCRIBE_404 \
    "logstore_http_requests_total{method=\"GET\",route=\"/v1/topics/{topic}\",status=\"404\"}"
#define DESCRIBE_200 \
    "logstore_http_requests_total{method=\"GET\",route=\"/v1/topics/{topic}\",status=\"200\"}"

static void test_request_counts_by_route_and_status(void **state)
{
    (void)state;
    long long created = metric(CREATED), dup = metric(CREATE_409), missing = metric(DESCRIBE_404),
              found = metric(DESCRIBE_200);
    assert_int_equal(ls_create_topic(S, "counted", 1, NULL), 201);
    assert_int_equal(ls_create_topic(S, "counted", 1, NULL), 409);
    ls_resp r;
    for (int i = 0; i < 2; i++) {
        assert_int_equal(ls_get(S, "/v1/topics/absent", &r), 0);
        assert_int_equal(r.status, 404);
        ls_resp_free(&r);
    }
    assert_int_equal(ls_get(S, "/v1/topics/counted", &r), 0);
    assert_int_equal(r.status, 200);
    ls_resp_free(&r);
    assert_int_equal(metric(CREATED) - created, 1);
    assert_int_equal(metric(CREATE_409) - dup, 1);
    assert_int_equal(metric(DESCRIBE_404) - missing, 2);
    assert_int_equal(metric(DESCRIBE_200) - found, 1);
}

static void test_traffic_bytes_and_reads(void **state)
{
    (void)state;
    assert_int_equal(ls_create_topic(S, "traffic", 2, NULL), 201);
    ls_resp r;
    assert_int_equal(ls_send_json(S, "POST", "/v1/topics/traffic/partitions/0/records",
                                  "{\"records\":[{\"key\":\"kk\",\"value\":\"vvv\"},"
                                  "{\"value\":\"12345\",\"headers\":[{\"name\":\"h\",\"value\":\"xy\"}]}]}",
                                  &r),
                     0);
    assert_int_equal(r.status, 200);
    long long b0 = ls_jint(&r, "batch_bytes");
    ls_resp_free(&r);
    assert_int_equal(ls_send_json(S, "POST", "/v1/topics/traffic/partitions/1/records",
                                  "{\"records\":[{\"value\":\"z\"}]}", &r),
                     0);
    assert_int_equal(r.status, 200);
    long long b1 = ls_jint(&r, "batch_bytes");
    ls_resp_free(&r);
    assert_true(b0 > 61 && b1 > 61);
    assert_int_equal(metric("logstore_records_appended_total{topic=\"traffic\"}"), 3);
    assert_int_equal(metric("logstore_bytes_appended_total{topic=\"traffic\"}"), b0 + b1);
    assert_int_equal(metric("logstore_records_read_total{topic=\"traffic\"}"), 0);

    /* A page of both records of partition 0: 2 + 3 + 5 bytes of keys and
     * values, and the header as stored: 5 bytes (two length varints, "h",
     * "xy"). */
    assert_int_equal(ls_get(S, "/v1/topics/traffic/partitions/0/records?offset=0", &r), 0);
    assert_int_equal(r.status, 200);
    ls_resp_free(&r);
    assert_int_equal(metric("logstore_records_read_total{topic=\"traffic\"}"), 2);
    assert_int_equal(metric("logstore_bytes_read_total{topic=\"traffic\"}"), 15);

    /* A stream bounded at one record hands over "kk" and "vvv". */
    static const char *const ndjson[] = {"Accept: application/x-ndjson", NULL};
    assert_int_equal(ls_http(S, "GET", "/v1/topics/traffic/partitions/0/records?offset=0&max_records=1",
                             NULL, NULL, 0, ndjson, &r),
                     0);
    assert_int_equal(r.status, 200);
    assert_non_null(strstr(r.body, "\"vvv\""));
    ls_resp_free(&r);
    assert_int_equal(metric("logstore_records_read_total{topic=\"traffic\"}"), 3);
    assert_int_equal(metric("logstore_bytes_read_total{topic=\"traffic\"}"), 20);

    /* One record by its offset: "12345" and the 5 header bytes.  A miss
     * (past the high watermark) hands over nothing. */
    assert_int_equal(ls_get(S, "/v1/topics/traffic/partitions/0/records/1", &r), 0);
    assert_int_equal(r.status, 200);
    ls_resp_free(&r);
    assert_int_equal(ls_get(S, "/v1/topics/traffic/partitions/0/records/9", &r), 0);
    assert_int_equal(r.status, 416);
    ls_resp_free(&r);
    assert_int_equal(metric("logstore_records_read_total{topic=\"traffic\"}"), 4);
    assert_int_equal(metric("logstore_bytes_read_total{topic=\"traffic\"}"), 30);
}

/* A HEAD hands over no records: a page's, a raw read's or one record's
 * HEAD (a load balancer's check, a client asking the raw body's length)
 * left the read counters as if the body had been sent, and the
 * dashboard's read rate with them. */
static void test_head_reads_not_counted(void **state)
{
    (void)state;
    assert_int_equal(ls_create_topic(S, "heads", 1, NULL), 201);
    assert_int_equal(ls_append_json(S, "heads", 0, "{\"records\":[{\"key\":\"k\",\"value\":\"abc\"}]}"),
                     200);
    static const char *const raw[] = {"Accept: application/octet-stream", NULL};
    static const char *const *accepts[] = {NULL, raw};
    ls_resp r;
    for (size_t i = 0; i < 2; i++) {
        assert_int_equal(ls_http(S, "HEAD", "/v1/topics/heads/partitions/0/records?offset=0", NULL,
                                 NULL, 0, accepts[i], &r),
                         0);
        assert_int_equal(r.status, 200);
        ls_resp_free(&r);
    }
    assert_int_equal(ls_http(S, "HEAD", "/v1/topics/heads/partitions/0/records/0", NULL, NULL, 0,
                             NULL, &r),
                     0);
    assert_int_equal(r.status, 200);
    ls_resp_free(&r);
    assert_int_equal(metric("logstore_records_read_total{topic=\"heads\"}"), 0);
    assert_int_equal(metric("logstore_bytes_read_total{topic=\"heads\"}"), 0);
    assert_int_equal(ls_partition_field(S, "heads", 0, "records_read"), 0);

    /* The GET of the same page is counted, once. */
    assert_int_equal(ls_get(S, "/v1/topics/heads/partitions/0/records?offset=0", &r), 0);
    assert_int_equal(r.status, 200);
    ls_resp_free(&r);
    assert_int_equal(metric("logstore_records_read_total{topic=\"heads\"}"), 1);
    assert_int_equal(metric("logstore_bytes_read_total{topic=\"heads\"}"), 4);
}

/* A HEAD is counted as a HEAD: it was labelled method="GET", so a load
 * balancer's HEAD checks looked like reads in the request rates, and the
 * GET latency histogram mixed in answers with no body. */
#define LIST_GET "logstore_http_requests_total{method=\"GET\",route=\"/v1/topics\",status=\"200\"}"
#define LIST_HEAD "logstore_http_requests_total{method=\"HEAD\",route=\"/v1/topics\",status=\"200\"}"
#define LIST_HEAD_COUNT \
    "logstore_http_request_duration_seconds_count{method=\"HEAD\",route=\"/v1/topics\"}"
#define LIST_GET_COUNT \
    "logstore_http_request_duration_seconds_count{method=\"GET\",route=\"/v1/topics\"}"

static void test_head_counted_as_head(void **state)
{
    (void)state;
    long long get = metric(LIST_GET), head = metric(LIST_HEAD), get_n = metric(LIST_GET_COUNT),
              head_n = metric(LIST_HEAD_COUNT);
    ls_resp r;
    for (int i = 0; i < 3; i++) {
        assert_int_equal(ls_http(S, "HEAD", "/v1/topics", NULL, NULL, 0, NULL, &r), 0);
        assert_int_equal(r.status, 200);
        ls_resp_free(&r);
    }
    assert_int_equal(ls_get(S, "/v1/topics", &r), 0);
    assert_int_equal(r.status, 200);
    ls_resp_free(&r);
    assert_int_equal(metric(LIST_HEAD) - head, 3);
    assert_int_equal(metric(LIST_GET) - get, 1);
    assert_int_equal(metric(LIST_HEAD_COUNT) - head_n, 3);
    assert_int_equal(metric(LIST_GET_COUNT) - get_n, 1);
}

/* Requests refused from their headers, before any body is read, are counted
 * under the route they asked for and their own status: a 414 on a read and
 * a 413 on an append were counted as route="unmatched", method="" and (for
 * 414 and 431, which README lists) status="other". */
#define READ_414 \
    "logstore_http_requests_total{method=\"GET\",route=\"/v1/topics/{topic}/partitions/{partition}/records\",status=\"414\"}"
#define LIST_431 "logstore_http_requests_total{method=\"GET\",route=\"/v1/topics\",status=\"431\"}"
#define APPEND_413 \
    "logstore_http_requests_total{method=\"POST\",route=\"/v1/topics/{topic}/partitions/{partition}/records\",status=\"413\"}"

static void test_refused_from_headers_counted_by_route(void **state)
{
    (void)state;
    long long r414 = metric(READ_414), r431 = metric(LIST_431), r413 = metric(APPEND_413);
    size_t n = 34000; /* over http.max.header.bytes (32768), under libmicrohttpd's own limit */
    char *path = malloc(n + 64), *hdr = malloc(n + 16);
    assert_non_null(path);
    assert_non_null(hdr);
    int k = snprintf(path, n + 64, "/v1/topics/t/partitions/0/records?");
    memset(path + k, 'a', n);
    strcpy(path + k + n, "=1");
    ls_resp r;
    assert_int_equal(ls_get(S, path, &r), 0);
    assert_int_equal(r.status, 414);
    ls_resp_free(&r);
    k = snprintf(hdr, n + 16, "X-Big: ");
    memset(hdr + k, 'b', n);
    hdr[k + n] = 0;
    const char *hdrs[] = {hdr, NULL};
    assert_int_equal(ls_http(S, "GET", "/v1/topics", NULL, NULL, 0, hdrs, &r), 0);
    assert_int_equal(r.status, 431);
    ls_resp_free(&r);
    free(path);
    free(hdr);
    /* A Content-Length over http.max.request.bytes (16 MiB) is refused
     * before the body is sent. */
    const char *big[] = {"Content-Length: 999999999", "Expect: 100-continue", NULL};
    assert_int_equal(ls_http(S, "POST", "/v1/topics/t/partitions/0/records", "application/json",
                             "{}", 2, big, &r),
                     0);
    assert_int_equal(r.status, 413);
    ls_resp_free(&r);
    assert_int_equal(metric(READ_414) - r414, 1);
    assert_int_equal(metric(LIST_431) - r431, 1);
    assert_int_equal(metric(APPEND_413) - r413, 1);
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
        cmocka_unit_test(test_request_counts_by_route_and_status),
        cmocka_unit_test(test_traffic_bytes_and_reads),
        cmocka_unit_test(test_head_reads_not_counted),
        cmocka_unit_test(test_head_counted_as_head),
        cmocka_unit_test(test_refused_from_headers_counted_by_route),
        cmocka_unit_test(test_zz_clean_stop),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
