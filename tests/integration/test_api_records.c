/*
 * test_api_records.c - appending to and reading from one partition over HTTP
 * (DESIGN §6), against the real server binary on loopback.
 *
 * Covers: appends with keys, null keys, tombstones (value null), empty
 * values, headers (including null header values) and explicit timestamps;
 * utf8 and base64 round trips with binary bytes and NUL inside values; every
 * field of the append response; DESIGN §2's example batch (10 records,
 * 250-byte values = 2,731 bytes); LogAppendTime topics; the
 * message.timestamp.before/after.max.ms window (422 invalid_timestamp,
 * nothing appended); expected_offset match and mismatch (412, nothing
 * appended); the read selectors (offset=N|earliest|latest, earliest, latest,
 * timestamp=T, tail=N; two at once is 400), max_records (> 10000 is 400),
 * max_bytes (at least one record), until_timestamp, clamp=true, a read at
 * exactly the high watermark (200, no records), out-of-range offsets (416
 * with details.log_start_offset/high_watermark, and a message naming the range
 * that request could use) and GET of one record.
 * Keyed appends (POST /v1/topics/{t}/records) and concurrent appends are in
 * test_api_records_keyed.c, to keep each file readable.
 *
 * One server serves the whole group.  The last test requires a clean exit.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "group_server.h"
#include "harness.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static long long now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* POST .../partitions/{p}/records; the response is left in *r. */
static void append(const char *topic, int part, const char *body, ls_resp *r)
{
    char path[256];
    snprintf(path, sizeof path, "/v1/topics/%s/partitions/%d/records", topic, part);
    assert_int_equal(ls_send_json(S, "POST", path, body, r), 0);
}

static void append_ok(const char *topic, int part, const char *body)
{
    ls_resp r;
    append(topic, part, body, &r);
    if (r.status != 200)
        fprintf(stderr, "# append failed: %s\n", r.body);
    assert_int_equal(r.status, 200);
    ls_resp_free(&r);
}

/* GET .../partitions/{p}/records?query; the response is left in *r. */
static void read_q(const char *topic, int part, const char *query, ls_resp *r)
{
    char path[512];
    snprintf(path, sizeof path, "/v1/topics/%s/partitions/%d/records%s%s", topic, part,
             *query ? "?" : "", query);
    assert_int_equal(ls_get(S, path, r), 0);
}

/* One request that must fail with status and code (and the DESIGN body). */
static void expect_err(const char *method, const char *path, const char *json, long status,
                       const char *code)
{
    assert_int_equal(ls_expect_error(S, method, path, json, status, code), 0);
}

/* expect_err on GET .../partitions/{p}/records?query */
static void read_err(const char *topic, int part, const char *query, long status, const char *code)
{
    char path[512];
    snprintf(path, sizeof path, "/v1/topics/%s/partitions/%d/records?%s", topic, part, query);
    expect_err("GET", path, NULL, status, code);
}

static json_t *rec(const ls_resp *r, size_t i)
{
    return json_array_get(ls_jget(r, "records"), i);
}

static size_t nrecs(const ls_resp *r)
{
    return json_array_size(ls_jget(r, "records"));
}

static long long partition_size(const char *topic, int part)
{
    char path[256];
    snprintf(path, sizeof path, "/v1/topics/%s/partitions/%d", topic, part);
    ls_resp r;
    assert_int_equal(ls_get(S, path, &r), 0);
    assert_int_equal(r.status, 200);
    long long v = ls_jint(&r, "size_bytes");
    ls_resp_free(&r);
    return v;
}

/* ---- appends ------------------------------------------------------------------- */

static void test_append_utf8_roundtrip(void **state)
{
    (void)state;
    assert_int_equal(ls_create_topic(S, "rt", 1, NULL), 201);
    ls_resp r;
    append("rt", 0,
           "{\"records\":["
           "{\"key\":\"k1\",\"value\":\"v1\",\"timestamp\":1700000000000,"
           "\"headers\":[{\"name\":\"h1\",\"value\":\"x\"},{\"name\":\"h2\",\"value\":null},"
           "{\"name\":\"h1\",\"value\":\"\"}]},"
           "{\"value\":\"no key\",\"timestamp\":1700000000001},"
           "{\"key\":null,\"value\":\"null key\",\"timestamp\":1700000000002},"
           "{\"key\":\"gone\",\"value\":null,\"timestamp\":1700000000003},"
           "{\"key\":\"\",\"value\":\"\",\"timestamp\":1700000000004},"
           "{\"key\":\"nul\",\"value\":\"a\\u0000b\\u0000\",\"timestamp\":1700000000005},"
           "{\"key\":\"\xc3\xa9t\xc3\xa9\",\"value\":\"\xe2\x82\xac \xf0\x9f\x98\x80\",\"timestamp\":1700000000006}"
           "]}",
           &r);
    assert_int_equal(r.status, 200);
    assert_int_equal(ls_jint(&r, "base_offset"), 0);
    assert_int_equal(ls_jint(&r, "last_offset"), 6);
    assert_int_equal(ls_jint(&r, "record_count"), 7);
    assert_string_equal(ls_jstr(&r, "timestamp_type"), "CreateTime");
    assert_int_equal(ls_jint(&r, "log_append_time"), -1);
    assert_int_equal(ls_jint(&r, "log_start_offset"), 0);
    assert_int_equal(ls_jint(&r, "high_watermark"), 7);
    long long batch_bytes = ls_jint(&r, "batch_bytes");
    assert_true(batch_bytes > 61);
    ls_resp_free(&r);
    /* batch_bytes is what the log grew by. */
    assert_int_equal(partition_size("rt", 0), batch_bytes);

    read_q("rt", 0, "offset=0", &r);
    assert_int_equal(r.status, 200);
    assert_int_equal(nrecs(&r), 7);
    assert_int_equal(ls_jint(&r, "next_offset"), 7);
    assert_int_equal(ls_jint(&r, "high_watermark"), 7);
    assert_int_equal(ls_jint(&r, "log_start_offset"), 0);
    for (size_t i = 0; i < 7; i++) {
        assert_int_equal(json_integer_value(json_object_get(rec(&r, i), "offset")), (json_int_t)i);
        assert_int_equal(json_integer_value(json_object_get(rec(&r, i), "timestamp")),
                         1700000000000LL + (long long)i);
        assert_string_equal(json_string_value(json_object_get(rec(&r, i), "timestamp_type")),
                            "CreateTime");
    }
    assert_string_equal(ls_jstr(&r, "records.0.key"), "k1");
    assert_string_equal(ls_jstr(&r, "records.0.value"), "v1");
    assert_int_equal(json_array_size(ls_jget(&r, "records.0.headers")), 3);
    assert_string_equal(ls_jstr(&r, "records.0.headers.0.name"), "h1");
    assert_string_equal(ls_jstr(&r, "records.0.headers.0.value"), "x");
    assert_string_equal(ls_jstr(&r, "records.0.headers.1.name"), "h2");
    assert_true(json_is_null(ls_jget(&r, "records.0.headers.1.value")));
    assert_string_equal(ls_jstr(&r, "records.0.headers.2.name"), "h1");
    assert_string_equal(ls_jstr(&r, "records.0.headers.2.value"), "");
    /* A missing key and "key": null are both null keys. */
    assert_true(json_is_null(ls_jget(&r, "records.1.key")));
    assert_string_equal(ls_jstr(&r, "records.1.value"), "no key");
    assert_true(json_is_array(ls_jget(&r, "records.1.headers")));
    assert_int_equal(json_array_size(ls_jget(&r, "records.1.headers")), 0);
    assert_true(json_is_null(ls_jget(&r, "records.2.key")));
    /* Tombstone vs empty value. */
    assert_string_equal(ls_jstr(&r, "records.3.key"), "gone");
    assert_true(json_is_null(ls_jget(&r, "records.3.value")));
    assert_string_equal(ls_jstr(&r, "records.4.key"), "");
    assert_string_equal(ls_jstr(&r, "records.4.value"), "");
    /* NUL bytes inside a utf8 value survive. */
    json_t *v = ls_jget(&r, "records.5.value");
    assert_int_equal(json_string_length(v), 4);
    assert_memory_equal(json_string_value(v), "a\0b\0", 4);
    assert_string_equal(ls_jstr(&r, "records.6.key"), "\xc3\xa9t\xc3\xa9");
    assert_string_equal(ls_jstr(&r, "records.6.value"), "\xe2\x82\xac \xf0\x9f\x98\x80");
    ls_resp_free(&r);

    /* The same records as base64. */
    read_q("rt", 0, "offset=5&encoding=base64", &r);
    assert_int_equal(r.status, 200);
    assert_string_equal(ls_jstr(&r, "records.0.key"), "bnVs");     /* "nul" */
    assert_string_equal(ls_jstr(&r, "records.0.value"), "YQBiAA=="); /* a\0b\0 */
    ls_resp_free(&r);

    /* A second append continues the offsets. */
    append("rt", 0, "{\"encoding\":\"utf8\",\"records\":[{\"value\":\"next\"}]}", &r);
    assert_int_equal(r.status, 200);
    assert_int_equal(ls_jint(&r, "base_offset"), 7);
    assert_int_equal(ls_jint(&r, "last_offset"), 7);
    assert_int_equal(ls_jint(&r, "record_count"), 1);
    assert_int_equal(ls_jint(&r, "high_watermark"), 8);
    ls_resp_free(&r);
}

static void test_append_base64_binary(void **state)
{
    (void)state;
    assert_int_equal(ls_create_topic(S, "bin", 1, NULL), 201);
    /* value: bytes 0x00..0xff (base64 below); key 0x00 0xff; header value 0xfe 0x00. */
    static const char all256[] =
        "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8gISIjJCUmJygpKissLS4vMDEyMzQ1Njc4OTo7PD0+P0BBQkNERU"
        "ZHSElKS0xNTk9QUVJTVFVWV1hZWltcXV5fYGFiY2RlZmdoaWprbG1ub3BxcnN0dXZ3eHl6e3x9fn+AgYKDhIWGh4iJiouM"
        "jY6PkJGSk5SVlpeYmZqbnJ2en6ChoqOkpaanqKmqq6ytrq+wsbKztLW2t7i5uru8vb6/wMHCw8TFxsfIycrLzM3Oz9DR0t"
        "PU1dbX2Nna29zd3t/g4eLj5OXm5+jp6uvs7e7v8PHy8/T19vf4+fr7/P3+/w==";
    char body[2048];
    snprintf(body, sizeof body,
             "{\"encoding\":\"base64\",\"records\":["
             "{\"key\":\"AP8=\",\"value\":\"%s\",\"timestamp\":42,"
             "\"headers\":[{\"name\":\"bin\",\"value\":\"/gA=\"},{\"name\":\"n\",\"value\":null}]},"
             "{\"key\":\"\",\"value\":\"\"},{\"value\":null}]}",
             all256);
    ls_resp r;
    append("bin", 0, body, &r);
    assert_int_equal(r.status, 200);
    assert_int_equal(ls_jint(&r, "record_count"), 3);
    ls_resp_free(&r);

    read_q("bin", 0, "offset=0&encoding=base64", &r);
    assert_int_equal(r.status, 200);
    assert_int_equal(nrecs(&r), 3);
    assert_string_equal(ls_jstr(&r, "records.0.key"), "AP8=");
    assert_string_equal(ls_jstr(&r, "records.0.value"), all256);
    assert_int_equal(ls_jint(&r, "records.0.timestamp"), 42);
    assert_string_equal(ls_jstr(&r, "records.0.headers.0.name"), "bin");
    assert_string_equal(ls_jstr(&r, "records.0.headers.0.value"), "/gA=");
    assert_true(json_is_null(ls_jget(&r, "records.0.headers.1.value")));
    assert_string_equal(ls_jstr(&r, "records.1.key"), "");
    assert_string_equal(ls_jstr(&r, "records.1.value"), "");
    assert_true(json_is_null(ls_jget(&r, "records.2.key")));
    assert_true(json_is_null(ls_jget(&r, "records.2.value")));
    ls_resp_free(&r);

    /* Bytes that are not UTF-8 cannot be read as utf8: a 422 that says so. */
    read_err("bin", 0, "offset=0", 422, "invalid_utf8");
    expect_err("GET", "/v1/topics/bin/partitions/0/records/0", NULL, 422, "invalid_utf8");
    /* ... naming the record in details, for a client to re-read or skip it. */
    static const char *const unread[] = {"/v1/topics/bin/partitions/0/records?offset=0",
                                         "/v1/topics/bin/partitions/0/records/0"};
    for (size_t i = 0; i < 2; i++) {
        assert_int_equal(ls_get(S, unread[i], &r), 0);
        assert_int_equal(r.status, 422);
        assert_true(json_is_integer(ls_jget(&r, "details.offset")));
        assert_int_equal(ls_jint(&r, "details.offset"), 0);
        ls_resp_free(&r);
    }
    /* ... and a stream (a utf8 read too) names it in its error's details. */
    const char *const ndjson[] = {"Accept: application/x-ndjson", NULL};
    assert_int_equal(ls_http(S, "GET", "/v1/topics/bin/partitions/0/records?offset=0&max_records=1",
                             NULL, NULL, 0, ndjson, &r),
                     0);
    assert_int_equal(r.status, 200);
    json_error_t jerr;
    json_t *line = json_loadb(r.body, strcspn(r.body, "\n"), 0, &jerr);
    if (!line)
        fail_msg("stream body does not start with a JSON line: %s", r.body);
    json_t *serr = json_object_get(line, "error");
    assert_non_null(serr);
    assert_string_equal(json_string_value(json_object_get(serr, "error_code")), "invalid_utf8");
    json_t *soff = json_object_get(json_object_get(serr, "details"), "offset");
    if (!json_is_integer(soff))
        fail_msg("stream error without details.offset: %s", r.body);
    assert_int_equal(json_integer_value(soff), 0);
    json_decref(line);
    ls_resp_free(&r);
    /* ... but the utf8-clean records after it can. */
    read_q("bin", 0, "offset=1", &r);
    assert_int_equal(r.status, 200);
    assert_int_equal(nrecs(&r), 2);
    ls_resp_free(&r);
    /* A bad encoding name is a 400. */
    read_err("bin", 0, "offset=0&encoding=hex", 400, "invalid_request");
}

/* DESIGN §2: 10 records with keys k-000000... and 250-byte values make a
 * 2,731-byte batch. */
static void test_design_example_batch(void **state)
{
    (void)state;
    assert_int_equal(ls_create_topic(S, "ex", 1, NULL), 201);
    char value[251];
    memset(value, 'v', 250);
    value[250] = 0;
    char body[8192];
    size_t n = (size_t)snprintf(body, sizeof body, "{\"records\":[");
    for (int i = 0; i < 10; i++)
        n += (size_t)snprintf(body + n, sizeof body - n,
                              "%s{\"key\":\"k-%06d\",\"value\":\"%s\",\"timestamp\":1794024676890}",
                              i ? "," : "", i, value);
    snprintf(body + n, sizeof body - n, "]}");
    ls_resp r;
    append("ex", 0, body, &r);
    assert_int_equal(r.status, 200);
    assert_int_equal(ls_jint(&r, "batch_bytes"), 2731);
    assert_int_equal(ls_jint(&r, "record_count"), 10);
    ls_resp_free(&r);
    assert_int_equal(partition_size("ex", 0), 2731);
    read_q("ex", 0, "offset=9", &r);
    assert_string_equal(ls_jstr(&r, "records.0.key"), "k-000009");
    assert_int_equal(strlen(ls_jstr(&r, "records.0.value")), 250);
    ls_resp_free(&r);
}

static void test_log_append_time(void **state)
{
    (void)state;
    assert_int_equal(
        ls_create_topic(S, "lat", 1, "{\"message.timestamp.type\":\"LogAppendTime\"}"), 201);
    long long t0 = now_ms();
    ls_resp r;
    append("lat", 0,
           "{\"records\":[{\"key\":\"a\",\"value\":\"1\",\"timestamp\":1000},"
           "{\"key\":\"b\",\"value\":\"2\",\"timestamp\":99999999999999},{\"value\":\"3\"}]}",
           &r);
    long long t1 = now_ms();
    assert_int_equal(r.status, 200);
    assert_string_equal(ls_jstr(&r, "timestamp_type"), "LogAppendTime");
    long long lat = ls_jint(&r, "log_append_time");
    assert_true(lat >= t0 && lat <= t1);
    ls_resp_free(&r);

    read_q("lat", 0, "offset=0", &r);
    assert_int_equal(r.status, 200);
    assert_int_equal(nrecs(&r), 3);
    for (size_t i = 0; i < 3; i++) {
        assert_int_equal(json_integer_value(json_object_get(rec(&r, i), "timestamp")), lat);
        assert_string_equal(json_string_value(json_object_get(rec(&r, i), "timestamp_type")),
                            "LogAppendTime");
    }
    ls_resp_free(&r);
    assert_int_equal(ls_get(S, "/v1/topics/lat/partitions/0/records/1", &r), 0);
    assert_int_equal(r.status, 200);
    assert_int_equal(ls_jint(&r, "timestamp"), lat);
    assert_string_equal(ls_jstr(&r, "timestamp_type"), "LogAppendTime");
    ls_resp_free(&r);
    /* The stored batch carries the type and the server time. */
    assert_int_equal(ls_get(S, "/v1/topics/lat/partitions/0/segments/0/batches", &r), 0);
    assert_int_equal(r.status, 200);
    assert_string_equal(ls_jstr(&r, "batches.0.timestamp_type"), "LogAppendTime");
    assert_int_equal(ls_jint(&r, "batches.0.max_timestamp"), lat);
    ls_resp_free(&r);
    /* The time lookup uses the append time too. */
    assert_int_equal(ls_get(S, "/v1/topics/lat/partitions/0/offsets?spec=max_timestamp", &r), 0);
    assert_int_equal(ls_jint(&r, "timestamp"), lat);
    ls_resp_free(&r);
}

static void test_timestamp_window(void **state)
{
    (void)state;
    assert_int_equal(ls_create_topic(S, "win", 1,
                                      "{\"message.timestamp.before.max.ms\":60000,"
                                      "\"message.timestamp.after.max.ms\":60000}"),
                     201);
    append_ok("win", 0, "{\"records\":[{\"value\":\"now\"}]}");
    char *before = ls_dir_listing(S->dir);
    long long now = now_ms();
    long long bad[] = {now - 3600000, now + 3600000, 1000};
    for (size_t i = 0; i < 3; i++) {
        char body[256];
        /* One bad timestamp rejects the whole batch. */
        snprintf(body, sizeof body,
                 "{\"records\":[{\"value\":\"ok\",\"timestamp\":%lld},{\"value\":\"bad\",\"timestamp\":%lld}]}",
                 now, bad[i]);
        ls_resp r;
        append("win", 0, body, &r);
        CHECK_ERR(r, 422, "invalid_timestamp");
        assert_string_equal(ls_jstr(&r, "kafka_error"), "INVALID_TIMESTAMP");
        /* Named as the client knows it, the second record of its request,
         * not as "batch 0" of a batch it never built. */
        const char *msg = ls_jstr(&r, "message");
        assert_non_null(msg);
        assert_true(strncmp(msg, "record 1: timestamp ", 20) == 0);
        assert_non_null(strstr(msg, "outside the topic's window"));
        assert_int_equal(ls_jint(&r, "details.record"), 1);
        ls_resp_free(&r);
    }
    /* Through the keyed path a partition's batch holds only some of the
     * request's records: the refusal still names the record's place. */
    ls_resp r;
    assert_int_equal(ls_post(S, "/v1/topics/win/records",
                             "{\"records\":[{\"value\":\"ok\",\"partition\":0},"
                             "{\"value\":\"bad\",\"partition\":0,\"timestamp\":1000}]}",
                             &r),
                     0);
    CHECK_ERR(r, 422, "invalid_timestamp");
    assert_int_equal(ls_jint(&r, "details.record"), 1);
    ls_resp_free(&r);
    /* A negative timestamp is never valid; the refusal names the record
     * the same way (it had no details at all). */
    assert_int_equal(ls_send_json(S, "POST", "/v1/topics/win/partitions/0/records",
                                  "{\"records\":[{\"value\":\"ok\"},{\"value\":\"neg\",\"timestamp\":-5}]}",
                                  &r),
                     0);
    CHECK_ERR(r, 422, "invalid_timestamp");
    assert_int_equal(ls_jint(&r, "details.record"), 1);
    ls_resp_free(&r);
    assert_same_dir(before);
    assert_int_equal(ls_log_end_offset(S, "win", 0), 1);
    /* Inside the window is fine. */
    char body[128];
    snprintf(body, sizeof body, "{\"records\":[{\"value\":\"ok\",\"timestamp\":%lld}]}", now - 30000);
    append_ok("win", 0, body);
    assert_int_equal(ls_log_end_offset(S, "win", 0), 2);
}

static void test_expected_offset(void **state)
{
    (void)state;
    assert_int_equal(ls_create_topic(S, "exp", 1, NULL), 201);
    ls_resp r;
    append("exp", 0, "{\"expected_offset\":0,\"records\":[{\"value\":\"a\"},{\"value\":\"b\"}]}", &r);
    assert_int_equal(r.status, 200);
    assert_int_equal(ls_jint(&r, "base_offset"), 0);
    ls_resp_free(&r);
    append("exp", 0, "{\"expected_offset\":2,\"records\":[{\"value\":\"c\"}]}", &r);
    assert_int_equal(r.status, 200);
    assert_int_equal(ls_jint(&r, "base_offset"), 2);
    ls_resp_free(&r);

    char *before = ls_dir_listing(S->dir);
    static const long long stale[] = {2, 0, 100};
    for (size_t i = 0; i < 3; i++) {
        char body[128];
        snprintf(body, sizeof body, "{\"expected_offset\":%lld,\"records\":[{\"value\":\"x\"}]}",
                 stale[i]);
        append("exp", 0, body, &r);
        CHECK_ERR(r, 412, "expected_offset_mismatch");
        assert_int_equal(ls_jint(&r, "details.expected_offset"), stale[i]);
        assert_int_equal(ls_jint(&r, "details.log_end_offset"), 3);
        ls_resp_free(&r);
    }
    expect_err("POST", "/v1/topics/exp/partitions/0/records",
               "{\"expected_offset\":-1,\"records\":[{\"value\":\"x\"}]}", 400, "invalid_request");
    assert_same_dir(before);
    assert_int_equal(ls_log_end_offset(S, "exp", 0), 3);
    read_q("exp", 0, "offset=2", &r);
    assert_int_equal(nrecs(&r), 1);
    assert_string_equal(ls_jstr(&r, "records.0.value"), "c");
    ls_resp_free(&r);
}

/* ---- reads ------------------------------------------------------------------------ */

/* Topic "sel": offsets 0..9 with timestamps 1000, 2000, ..., 10000, in four
 * batches [0-2] [3-5] [6-8] [9]. */
static void make_sel(void)
{
    static bool made;
    if (made)
        return;
    assert_int_equal(ls_create_topic(S, "sel", 1, NULL), 201);
    int off = 0;
    const int sizes[] = {3, 3, 3, 1};
    for (int b = 0; b < 4; b++) {
        char body[1024];
        size_t n = (size_t)snprintf(body, sizeof body, "{\"records\":[");
        for (int i = 0; i < sizes[b]; i++, off++)
            n += (size_t)snprintf(body + n, sizeof body - n,
                                  "%s{\"key\":\"k%d\",\"value\":\"v%d\",\"timestamp\":%d}", i ? "," : "",
                                  off, off, (off + 1) * 1000);
        snprintf(body + n, sizeof body - n, "]}");
        append_ok("sel", 0, body);
    }
    made = true;
}

/* Reads sel with query and checks the offsets returned and next_offset. */
static void expect_read(const char *query, long long first, size_t count, long long next)
{
    ls_resp r;
    read_q("sel", 0, query, &r);
    if (r.status != 200 || nrecs(&r) != count || ls_jint(&r, "next_offset") != next)
        fprintf(stderr, "# ?%s -> %ld %.300s\n", query, r.status, r.body);
    assert_int_equal(r.status, 200);
    assert_int_equal(nrecs(&r), count);
    for (size_t i = 0; i < count; i++) {
        json_t *o = rec(&r, i);
        long long off = first + (long long)i;
        assert_int_equal(json_integer_value(json_object_get(o, "offset")), off);
        assert_int_equal(json_integer_value(json_object_get(o, "timestamp")), (off + 1) * 1000);
        char k[16];
        snprintf(k, sizeof k, "k%lld", off);
        assert_string_equal(json_string_value(json_object_get(o, "key")), k);
    }
    assert_int_equal(ls_jint(&r, "next_offset"), next);
    assert_int_equal(ls_jint(&r, "high_watermark"), 10);
    assert_int_equal(ls_jint(&r, "log_start_offset"), 0);
    ls_resp_free(&r);
}

static void test_read_selectors(void **state)
{
    (void)state;
    make_sel();
    expect_read("", 0, 10, 10);
    expect_read("offset=0", 0, 10, 10);
    expect_read("offset=4", 4, 6, 10); /* from the middle of a batch */
    expect_read("offset=9", 9, 1, 10);
    expect_read("offset=earliest", 0, 10, 10);
    expect_read("offset=latest", 0, 0, 10);
    expect_read("earliest", 0, 10, 10);
    expect_read("latest", 0, 0, 10);
    expect_read("timestamp=0", 0, 10, 10);
    expect_read("timestamp=2500", 2, 8, 10);
    expect_read("timestamp=3000", 2, 8, 10);
    expect_read("timestamp=10000", 9, 1, 10);
    expect_read("timestamp=10001", 0, 0, 10);
    expect_read("tail=3", 7, 3, 10);
    expect_read("tail=1", 9, 1, 10);
    expect_read("tail=0", 0, 0, 10);
    expect_read("tail=100", 0, 10, 10);
    /* Exactly the high watermark: no records, not an error. */
    expect_read("offset=10", 0, 0, 10);

    static const char *const bad[] = {
        "offset=1&tail=2", "earliest&latest", "timestamp=1&offset=2", "offset=1&offset=2",
        "tail=1&latest", "offset=abc", "offset=", "tail=-1", "timestamp=-1", "offset=1.5",
        "offset=%2B1", "offset=%201",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        read_err("sel", 0, bad[i], 400, "invalid_request");
}

static void test_read_limits(void **state)
{
    (void)state;
    make_sel();
    expect_read("max_records=2", 0, 2, 2);
    expect_read("offset=4&max_records=3", 4, 3, 7);
    expect_read("max_records=10000", 0, 10, 10);
    expect_read("max_records=1&offset=5", 5, 1, 6);
    /* max_bytes: at least one record, even when it alone is larger. */
    expect_read("max_bytes=1", 0, 1, 1);
    expect_read("offset=6&max_bytes=1", 6, 1, 7);
    /* until_timestamp: stop before the first record past it. */
    expect_read("until_timestamp=3500", 0, 3, 3);
    expect_read("offset=3&until_timestamp=5500", 3, 2, 5);
    expect_read("until_timestamp=999999", 0, 10, 10);
    /* clamp: out-of-range starts move to the nearest end. */
    expect_read("offset=-5&clamp=true", 0, 10, 10);
    expect_read("offset=500&clamp=true", 0, 0, 10);
    expect_read("offset=3&clamp=true", 3, 7, 10);

    static const char *const bad[] = {
        "max_records=10001", "max_records=0", "max_records=-1", "max_records=x",
        "max_bytes=0", "max_bytes=abc", "until_timestamp=x", "clamp=maybe",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        read_err("sel", 0, bad[i], 400, "invalid_request");
}

static void test_read_out_of_range(void **state)
{
    (void)state;
    make_sel();
    static const char *const queries[] = {"offset=-1", "offset=11", "offset=1000000",
                                          "offset=-9223372036854775808", "offset=11&clamp=false"};
    for (size_t i = 0; i < sizeof queries / sizeof queries[0]; i++) {
        ls_resp r;
        read_q("sel", 0, queries[i], &r);
        if (ls_check_error(&r, 416, "offset_out_of_range"))
            fprintf(stderr, "# ?%s\n", queries[i]);
        CHECK_ERR(r, 416, "offset_out_of_range");
        assert_string_equal(ls_jstr(&r, "kafka_error"), "OFFSET_OUT_OF_RANGE");
        assert_int_equal(ls_jint(&r, "kafka_error_code"), 1);
        assert_int_equal(ls_jint(&r, "details.log_start_offset"), 0);
        assert_int_equal(ls_jint(&r, "details.high_watermark"), 10);
        ls_resp_free(&r);
    }
    /* An empty partition: only offset 0 is readable. */
    assert_int_equal(ls_create_topic(S, "empty", 1, NULL), 201);
    ls_resp r;
    read_q("empty", 0, "offset=0", &r);
    assert_int_equal(r.status, 200);
    assert_int_equal(nrecs(&r), 0);
    assert_int_equal(ls_jint(&r, "next_offset"), 0);
    ls_resp_free(&r);
    read_q("empty", 0, "offset=1", &r);
    CHECK_ERR(r, 416, "offset_out_of_range");
    assert_int_equal(ls_jint(&r, "details.high_watermark"), 0);
    ls_resp_free(&r);
}

static void test_read_one(void **state)
{
    (void)state;
    make_sel();
    ls_resp r;
    for (int off = 0; off < 10; off += 3) {
        char path[128];
        snprintf(path, sizeof path, "/v1/topics/sel/partitions/0/records/%d", off);
        assert_int_equal(ls_get(S, path, &r), 0);
        assert_int_equal(r.status, 200);
        assert_int_equal(ls_jint(&r, "offset"), off);
        assert_int_equal(ls_jint(&r, "timestamp"), (off + 1) * 1000);
        assert_string_equal(ls_jstr(&r, "timestamp_type"), "CreateTime");
        char k[16], v[16];
        snprintf(k, sizeof k, "k%d", off);
        snprintf(v, sizeof v, "v%d", off);
        assert_string_equal(ls_jstr(&r, "key"), k);
        assert_string_equal(ls_jstr(&r, "value"), v);
        assert_true(json_is_array(ls_jget(&r, "headers")));
        ls_resp_free(&r);
    }
    assert_int_equal(ls_get(S, "/v1/topics/sel/partitions/0/records/5?encoding=base64", &r), 0);
    assert_int_equal(r.status, 200);
    assert_string_equal(ls_jstr(&r, "value"), "djU="); /* "v5" */
    ls_resp_free(&r);
    static const char *const past[] = {"10", "11", "-1"};
    for (size_t i = 0; i < 3; i++) {
        char path[128];
        snprintf(path, sizeof path, "/v1/topics/sel/partitions/0/records/%s", past[i]);
        assert_int_equal(ls_get(S, path, &r), 0);
        CHECK_ERR(r, 416, "offset_out_of_range");
        assert_int_equal(ls_jint(&r, "details.log_start_offset"), 0);
        assert_int_equal(ls_jint(&r, "details.high_watermark"), 10);
        ls_resp_free(&r);
    }
    expect_err("GET", "/v1/topics/sel/partitions/0/records/abc", NULL, 400, "invalid_request");
}

/* A 416's message gives the range the request could have used: a page or a
 * stream may start at the high watermark ("[0, 10]"), one record cannot be
 * there ("[0, 10)").  Streams and single records below the log start offset
 * once named the other kind's range. */
static void test_out_of_range_message_names_readable_range(void **state)
{
    (void)state;
    make_sel();
    static const struct {
        const char *path, *accept, *range;
    } cases[] = {
        {"records?offset=11", NULL, "outside [0, 10] for sel-0"},
        {"records?offset=-1", NULL, "outside [0, 10] for sel-0"},
        {"records?offset=11", "Accept: text/event-stream", "outside [0, 10] for sel-0"},
        {"records?offset=-1", "Accept: application/x-ndjson", "outside [0, 10] for sel-0"},
        {"records/10", NULL, "outside [0, 10) for sel-0"},
        {"records/-1", NULL, "outside [0, 10) for sel-0"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char path[128];
        snprintf(path, sizeof path, "/v1/topics/sel/partitions/0/%s", cases[i].path);
        const char *const hdrs[] = {cases[i].accept, NULL};
        ls_resp r;
        assert_int_equal(ls_http(S, "GET", path, NULL, NULL, 0, hdrs, &r), 0);
        CHECK_ERR(r, 416, "offset_out_of_range");
        const char *msg = ls_jstr(&r, "message");
        if (!msg || !strstr(msg, cases[i].range))
            fprintf(stderr, "# %s %s: %s\n", path, cases[i].accept ? cases[i].accept : "", r.body);
        assert_non_null(msg);
        assert_non_null(strstr(msg, cases[i].range));
        assert_non_null(strstr(msg, "(log start offset, high watermark)"));
        assert_int_equal(ls_jint(&r, "details.log_start_offset"), 0);
        assert_int_equal(ls_jint(&r, "details.high_watermark"), 10);
        ls_resp_free(&r);
    }
    /* And the end a stream's message includes is one it takes. */
    const char *const sse[] = {"Accept: text/event-stream", NULL};
    ls_resp r;
    assert_int_equal(ls_http(S, "HEAD", "/v1/topics/sel/partitions/0/records?offset=10", NULL, NULL,
                             0, sse, &r),
                     0);
    assert_int_equal(r.status, 200);
    /* with the headers the GET's stream starts with (README: HEAD answers
     * the same status and headers), so a proxy probing it learns not to
     * cache or buffer the stream */
    assert_non_null(ls_header(&r, "Cache-Control"));
    assert_string_equal(ls_header(&r, "Cache-Control"), "no-cache");
    assert_non_null(ls_header(&r, "X-Accel-Buffering"));
    assert_string_equal(ls_header(&r, "X-Accel-Buffering"), "no");
    ls_resp_free(&r);
    /* as the GET's do */
    assert_int_equal(ls_http(S, "GET", "/v1/topics/sel/partitions/0/records?offset=9&max_records=1",
                             NULL, NULL, 0, sse, &r),
                     0);
    assert_int_equal(r.status, 200);
    assert_non_null(ls_header(&r, "Cache-Control"));
    assert_string_equal(ls_header(&r, "Cache-Control"), "no-cache");
    assert_non_null(ls_header(&r, "X-Accel-Buffering"));
    assert_string_equal(ls_header(&r, "X-Accel-Buffering"), "no");
    ls_resp_free(&r);
}

/* The read URL picks its answer by the Accept header's preferences: the
 * highest q among what it serves, q=0 refusing one, whole media types only
 * (application/json-seq is not JSON), anything else JSON. */
static void test_accept_negotiation(void **state)
{
    (void)state;
    make_sel();
    static const struct {
        const char *accept, *want;
    } cases[] = {
        {"Accept: text/event-stream;q=0, application/json", "application/json"},
        {"Accept: application/json;q=0.5, application/octet-stream", "application/octet-stream"},
        {"Accept: application/x-ndjson;q=0.9, text/event-stream;q=0.8", "application/x-ndjson"},
        {"Accept: text/event-stream, application/json", "text/event-stream"},
        {"Accept: application/json-seq, application/octet-stream;q=0.1", "application/octet-stream"},
        {"Accept: */*", "application/json"},
        {"Accept: application/xml", "application/json"},
        {"Accept: TEXT/EVENT-STREAM", "text/event-stream"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *const hdrs[] = {cases[i].accept, NULL};
        /* max_records ends the streams; a raw read, whole batches, takes none */
        bool raw = !strcmp(cases[i].want, "application/octet-stream");
        ls_resp r;
        assert_int_equal(ls_http(S, "GET",
                                 raw ? "/v1/topics/sel/partitions/0/records?offset=0"
                                     : "/v1/topics/sel/partitions/0/records?offset=0&max_records=1",
                                 NULL, NULL, 0, hdrs, &r), 0);
        assert_int_equal(r.status, 200);
        const char *ct = ls_header(&r, "Content-Type");
        if (!ct || strncmp(ct, cases[i].want, strlen(cases[i].want)))
            fprintf(stderr, "# %s: got %s\n", cases[i].accept, ct ? ct : "(none)");
        assert_non_null(ct);
        assert_int_equal(strncmp(ct, cases[i].want, strlen(cases[i].want)), 0);
        ls_resp_free(&r);
    }
}

/* Last: a clean stop exits 0 (leaks fail the sanitizer build's exit). */
static void test_zz_clean_stop(void **state)
{
    (void)state;
    assert_int_equal(ls_stop(S), 0);
    assert_int_equal(ls_restart(S, NULL), 0);
    ls_resp r;
    read_q("rt", 0, "offset=5", &r);
    assert_int_equal(r.status, 200);
    assert_int_equal(json_string_length(ls_jget(&r, "records.0.value")), 4);
    ls_resp_free(&r);
    assert_int_equal(ls_log_end_offset(S, "sel", 0), 10);
    assert_int_equal(ls_stop(S), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_append_utf8_roundtrip),
        cmocka_unit_test(test_append_base64_binary),
        cmocka_unit_test(test_design_example_batch),
        cmocka_unit_test(test_log_append_time),
        cmocka_unit_test(test_timestamp_window),
        cmocka_unit_test(test_expected_offset),
        cmocka_unit_test(test_read_selectors),
        cmocka_unit_test(test_read_limits),
        cmocka_unit_test(test_read_out_of_range),
        cmocka_unit_test(test_read_one),
        cmocka_unit_test(test_out_of_range_message_names_readable_range),
        cmocka_unit_test(test_accept_negotiation),
        cmocka_unit_test(test_zz_clean_stop),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
