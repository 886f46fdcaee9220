/*
 * test_api_topics.c - the topic, partition and service endpoints of the HTTP
 * API (DESIGN §6), driven over loopback against the real server binary.
 *
 * Covers: /health/live and /health/ready; /v1/info (version, limits, the
 * startup report); topics list, create (201 + Location), describe, delete
 * (204) and PATCH partitions (grow; never shrink: 400 invalid_partitions);
 * duplicate topics (409 topic_exists); create with configs given as strings,
 * numbers and booleans; unknown topics and partitions (404 unknown_topic /
 * unknown_partition); wrong methods (405 + Allow); unknown routes (404
 * route_not_found); the partition GET fields; the offsets endpoint
 * (spec=earliest|latest|max_timestamp, timestamp=T giving the first offset
 * with timestamp >= T, null when none, 400 for both or neither); X-Request-Id
 * echoed when sane and generated otherwise, always equal to the error body's
 * request_id; and the exact shape of every error body (checked on every
 * error by ls_check_error, plus a sweep over one error of each kind).  The
 * last test restarts the server (data, configs and names like "x-0" survive)
 * and requires clean exits, which the sanitizer build fails on leaks.
 * Invalid configs, topic names and partition counts are in
 * test_api_topics_invalid.c, to keep each file readable.
 *
 * One server serves the whole group (started in the group setup).
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

/* POST /v1/topics with a raw JSON body; returns the response in *r. */
static void create_raw(const char *body, ls_resp *r)
{
    assert_int_equal(ls_send_json(S, "POST", "/v1/topics", body, r), 0);
}

/* Appends one batch given as JSON to topic-partition; asserts 200. */
static void append_ok(const char *topic, int part, const char *body)
{
    assert_int_equal(ls_append_json(S, topic, part, body), 200);
}

/* One request that must fail with status and code (and the DESIGN body). */
static void expect_err(const char *method, const char *path, const char *json, long status,
                       const char *code)
{
    assert_int_equal(ls_expect_error(S, method, path, json, status, code), 0);
}

/* expect_err, and the data dir is the same afterwards, and the server up. */
static void expect_err_same_dir(const char *method, const char *path, const char *json, long status,
                                const char *code)
{
    char *before = ls_dir_listing(S->dir);
    expect_err(method, path, json, status, code);
    assert_same_dir(before);
    assert_int_equal(ls_live_status(S), 200);
}

/* GET path (200) and one integer field of the answer. */
static long long get_int(const char *path, const char *field)
{
    ls_resp r;
    assert_int_equal(ls_get(S, path, &r), 0);
    assert_int_equal(r.status, 200);
    long long v = ls_jint(&r, field);
    ls_resp_free(&r);
    return v;
}

/* ---- health and info ------------------------------------------------------ */

static void test_health(void **state)
{
    (void)state;
    ls_resp r;
    assert_int_equal(ls_get(S, "/health/live", &r), 0);
    assert_int_equal(r.status, 200);
    assert_string_equal(ls_jstr(&r, "status"), "ok");
    assert_non_null(ls_header(&r, "Content-Type"));
    assert_non_null(strstr(ls_header(&r, "Content-Type"), "application/json"));
    ls_resp_free(&r);

    assert_int_equal(ls_get(S, "/health/ready", &r), 0);
    assert_int_equal(r.status, 200);
    assert_string_equal(ls_jstr(&r, "status"), "ready");
    ls_resp_free(&r);

    /* A wrong method on a health path is a 405 like any other. */
    assert_int_equal(ls_send_json(S, "POST", "/health/live", "{}", &r), 0);
    CHECK_ERR(r, 405, "method_not_allowed");
    assert_string_equal(ls_header(&r, "Allow"), "GET, HEAD");
    ls_resp_free(&r);
}

static void test_info(void **state)
{
    (void)state;
    ls_resp r;
    assert_int_equal(ls_get(S, "/v1/info", &r), 0);
    assert_int_equal(r.status, 200);
    assert_string_equal(ls_jstr(&r, "name"), "logstore");
    const char *v = ls_jstr(&r, "version");
    assert_non_null(v);
    /* MAJOR.MINOR.PATCH */
    int a, b, c;
    assert_int_equal(sscanf(v, "%d.%d.%d", &a, &b, &c), 3);
    assert_string_equal(ls_jstr(&r, "state"), "ready");
    /* Limits: the server defaults (http.max.request.bytes = 16 MiB, ...). */
    assert_int_equal(ls_jint(&r, "limits.max_request_bytes"), 16777216);
    assert_int_equal(ls_jint(&r, "limits.max_records_per_request"), 100000);
    assert_int_equal(ls_jint(&r, "limits.max_records_per_read"), 10000);
    /* The last startup's report, DESIGN §6 fields. */
    json_t *st = ls_jget(&r, "startup");
    assert_true(json_is_object(st));
    assert_true(json_is_boolean(json_object_get(st, "clean_shutdown")));
    assert_int_equal(ls_jint(&r, "startup.segments_recovered"), 0);
    assert_int_equal(ls_jint(&r, "startup.bytes_truncated"), 0);
    assert_true(ls_jint(&r, "startup.duration_ms") >= 0);
    assert_true(ls_jint(&r, "started_ms") > 1600000000000LL);
    ls_resp_free(&r);
}

/* ---- topic lifecycle --------------------------------------------------------- */

static void test_topic_lifecycle(void **state)
{
    (void)state;
    size_t before = topic_count();
    ls_resp r;
    create_raw("{\"name\":\"life\",\"partitions\":3}", &r);
    assert_int_equal(r.status, 201);
    assert_string_equal(ls_header(&r, "Location"), "/v1/topics/life");
    assert_string_equal(ls_jstr(&r, "name"), "life");
    assert_int_equal(ls_jint(&r, "partition_count"), 3);
    assert_int_equal(json_array_size(ls_jget(&r, "partitions")), 3);
    assert_int_equal(ls_jint(&r, "partitions.2.partition"), 2);
    assert_int_equal(ls_jint(&r, "partitions.2.high_watermark"), 0);
    assert_true(json_is_object(ls_jget(&r, "configs")));
    assert_int_equal(json_object_size(ls_jget(&r, "configs")), 0);
    ls_resp_free(&r);

    /* On disk: one directory per partition and the metadata file. */
    char *listing = ls_dir_listing(S->dir);
    assert_non_null(strstr(listing, "life-0/00000000000000000000.log 0"));
    assert_non_null(strstr(listing, "life-2/00000000000000000000.log 0"));
    assert_null(strstr(listing, "life-3/"));
    assert_non_null(strstr(listing, "meta/life.json"));
    free(listing);

    /* Listed and described. */
    assert_int_equal(topic_count(), before + 1);
    assert_int_equal(ls_get(S, "/v1/topics", &r), 0);
    json_t *t;
    size_t i;
    bool found = false;
    json_array_foreach(ls_jget(&r, "topics"), i, t) {
        if (!strcmp(json_string_value(json_object_get(t, "name")), "life")) {
            found = true;
            assert_int_equal(json_integer_value(json_object_get(t, "partitions")), 3);
        }
    }
    assert_true(found);
    ls_resp_free(&r);
    assert_int_equal(ls_get(S, "/v1/topics/life", &r), 0);
    assert_int_equal(r.status, 200);
    assert_int_equal(ls_jint(&r, "partition_count"), 3);
    assert_non_null(ls_jstr(&r, "topic_id"));
    assert_true(ls_jint(&r, "created_ms") > 0);
    ls_resp_free(&r);

    /* Delete: 204 without a body, then gone everywhere. */
    delete_ok("/v1/topics/life");
    expect_err("GET", "/v1/topics/life", NULL, 404, "unknown_topic");
    expect_err("GET", "/v1/topics/life/partitions/0", NULL, 404, "unknown_topic");
    expect_err("DELETE", "/v1/topics/life", NULL, 404, "unknown_topic");
    assert_int_equal(topic_count(), before);
    listing = ls_dir_listing(S->dir);
    assert_null(strstr(listing, "meta/life.json"));
    assert_null(strstr(listing, "life-0/00000000000000000000.log"));
    free(listing);

    /* Without "partitions" a topic gets num.partitions (1); every allowed
     * character class works through the paths. */
    create_raw("{\"name\":\"Ab.9_-z\"}", &r);
    assert_int_equal(r.status, 201);
    assert_int_equal(ls_jint(&r, "partition_count"), 1);
    assert_string_equal(ls_header(&r, "Location"), "/v1/topics/Ab.9_-z");
    ls_resp_free(&r);
    append_ok("Ab.9_-z", 0, "{\"records\":[{\"value\":\"x\"}]}");
    assert_int_equal(ls_log_end_offset(S, "Ab.9_-z", 0), 1);
    delete_ok("/v1/topics/Ab.9_-z");

    /* The name can be used again, and the new topic starts empty. */
    assert_int_equal(ls_create_topic(S, "life", 1, NULL), 201);
    assert_int_equal(ls_log_end_offset(S, "life", 0), 0);
    delete_ok("/v1/topics/life");
}

static void test_topic_exists(void **state)
{
    (void)state;
    assert_int_equal(ls_create_topic(S, "dup", 2, NULL), 201);
    append_ok("dup", 0, "{\"records\":[{\"value\":\"keep me\"}]}");
    char *before = ls_dir_listing(S->dir);
    ls_resp r;
    create_raw("{\"name\":\"dup\",\"partitions\":5}", &r);
    CHECK_ERR(r, 409, "topic_exists");
    assert_string_equal(ls_jstr(&r, "kafka_error"), "TOPIC_ALREADY_EXISTS");
    assert_int_equal(ls_jint(&r, "kafka_error_code"), 36);
    ls_resp_free(&r);
    assert_same_dir(before);
    /* The existing topic is untouched. */
    assert_int_equal(ls_get(S, "/v1/topics/dup", &r), 0);
    assert_int_equal(ls_jint(&r, "partition_count"), 2);
    assert_int_equal(ls_jint(&r, "partitions.0.log_end_offset"), 1);
    ls_resp_free(&r);
}

static void test_patch_partitions(void **state)
{
    (void)state;
    assert_int_equal(ls_create_topic(S, "grow", 2, NULL), 201);
    ls_resp r;
    assert_int_equal(ls_send_json(S, "PATCH", "/v1/topics/grow", "{\"partitions\":4}", &r), 0);
    assert_int_equal(r.status, 200);
    assert_int_equal(ls_jint(&r, "partition_count"), 4);
    assert_int_equal(json_array_size(ls_jget(&r, "partitions")), 4);
    ls_resp_free(&r);
    assert_int_equal(get_int("/v1/topics/grow/partitions/3", "partition"), 3);
    append_ok("grow", 3, "{\"records\":[{\"value\":\"new partition\"}]}");

    /* Never fewer: 400 invalid_partitions, nothing changes. */
    static const char *const shrink[] = {"{\"partitions\":1}", "{\"partitions\":3}",
                                         "{\"partitions\":0}", "{\"partitions\":-1}"};
    /* Nor past the 100000 that creation allows (nor wrapped past int32). */
    static const char *const huge[] = {"{\"partitions\":100001}", "{\"partitions\":4294967297}"};
    for (size_t i = 0; i < sizeof huge / sizeof huge[0]; i++)
        expect_err_same_dir("PATCH", "/v1/topics/grow", huge[i], 400, "invalid_partitions");
    for (size_t i = 0; i < sizeof shrink / sizeof shrink[0]; i++)
        expect_err_same_dir("PATCH", "/v1/topics/grow", shrink[i], 400, "invalid_partitions");
    /* The same count changes nothing either. */
    char *before = ls_dir_listing(S->dir);
    assert_int_equal(ls_send_json(S, "PATCH", "/v1/topics/grow", "{\"partitions\":4}", &r), 0);
    assert_true(r.status == 200 || r.status == 400);
    ls_resp_free(&r);
    assert_same_dir(before);
    assert_int_equal(get_int("/v1/topics/grow", "partition_count"), 4);
    expect_err("GET", "/v1/topics/grow/partitions/4", NULL, 404, "unknown_partition");

    /* Malformed PATCH bodies and unknown topics. */
    expect_err("PATCH", "/v1/topics/grow", "{\"partitions\":\"9\"}", 400, "invalid_request");
    expect_err("PATCH", "/v1/topics/grow", "{\"partitions\":", 400, "malformed_json");
    expect_err("PATCH", "/v1/topics/nope", "{\"partitions\":9}", 404, "unknown_topic");
    assert_int_equal(get_int("/v1/topics/grow", "partition_count"), 4);
}

/* ---- configs ------------------------------------------------------------------ */

static void test_create_with_configs(void **state)
{
    (void)state;
    ls_resp r;
    create_raw("{\"name\":\"cfg\",\"partitions\":1,\"configs\":{"
               "\"retention.ms\":\"3600000\",\"segment.bytes\":2097152,\"preallocate\":true,"
               "\"min.cleanable.dirty.ratio\":0.3,\"cleanup.policy\":\"compact,delete\","
               "\"message.timestamp.type\":\"LogAppendTime\"}}",
               &r);
    assert_int_equal(r.status, 201);
    json_t *cfg = ls_jget(&r, "configs");
    assert_true(json_is_object(cfg));
    assert_int_equal(json_object_size(cfg), 6);
    /* Every override comes back as the text it means. */
    assert_string_equal(json_string_value(json_object_get(cfg, "retention.ms")), "3600000");
    assert_string_equal(json_string_value(json_object_get(cfg, "segment.bytes")), "2097152");
    assert_string_equal(json_string_value(json_object_get(cfg, "preallocate")), "true");
    assert_string_equal(json_string_value(json_object_get(cfg, "min.cleanable.dirty.ratio")), "0.3");
    assert_string_equal(json_string_value(json_object_get(cfg, "cleanup.policy")), "compact,delete");
    ls_resp_free(&r);

    /* The same through describe and the list. */
    assert_int_equal(ls_get(S, "/v1/topics/cfg", &r), 0);
    cfg = ls_jget(&r, "configs");
    assert_string_equal(json_string_value(json_object_get(cfg, "segment.bytes")), "2097152");
    assert_string_equal(json_string_value(json_object_get(cfg, "min.cleanable.dirty.ratio")), "0.3");
    ls_resp_free(&r);

    /* And the config has its effect: LogAppendTime stamps appends. */
    assert_int_equal(ls_send_json(S, "POST", "/v1/topics/cfg/partitions/0/records",
                                  "{\"records\":[{\"key\":\"k\",\"value\":\"v\",\"timestamp\":5}]}", &r),
                     0);
    assert_int_equal(r.status, 200);
    assert_string_equal(ls_jstr(&r, "timestamp_type"), "LogAppendTime");
    ls_resp_free(&r);
}

/* ---- 404 / 405 ------------------------------------------------------------------ */

static void test_unknown_topic_and_partition(void **state)
{
    (void)state;
    assert_int_equal(ls_create_topic(S, "known", 2, NULL), 201);
    static const struct {
        const char *method, *path, *code;
    } cases[] = {
        {"GET", "/v1/topics/missing", "unknown_topic"},
        {"DELETE", "/v1/topics/missing", "unknown_topic"},
        {"GET", "/v1/topics/missing/partitions/0", "unknown_topic"},
        {"GET", "/v1/topics/missing/partitions/0/offsets?spec=latest", "unknown_topic"},
        {"GET", "/v1/topics/missing/partitions/0/records", "unknown_topic"},
        {"GET", "/v1/topics/known/partitions/2", "unknown_partition"},
        {"GET", "/v1/topics/known/partitions/2147483647", "unknown_partition"},
        {"GET", "/v1/topics/known/partitions/2/offsets?spec=earliest", "unknown_partition"},
        {"GET", "/v1/topics/known/partitions/5/records", "unknown_partition"},
        {"GET", "/v1/topics/known/partitions/5/segments", "unknown_partition"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        expect_err(cases[i].method, cases[i].path, NULL, 404, cases[i].code);
    ls_resp r;
    assert_int_equal(ls_get(S, "/v1/topics/known/partitions/9", &r), 0);
    CHECK_ERR(r, 404, "unknown_partition");
    assert_string_equal(ls_jstr(&r, "kafka_error"), "UNKNOWN_TOPIC_OR_PARTITION");
    assert_int_equal(ls_jint(&r, "kafka_error_code"), 3);
    assert_true(json_is_false(ls_jget(&r, "retriable")));
    ls_resp_free(&r);
}

static void test_method_not_allowed(void **state)
{
    (void)state;
    assert_int_equal(ls_create_topic(S, "meth", 1, NULL), 201);
    static const struct {
        const char *method, *path, *allow;
    } cases[] = {
        {"PUT", "/v1/topics", "GET, HEAD, POST"},
        {"DELETE", "/v1/topics", "GET, HEAD, POST"},
        {"POST", "/v1/topics/meth", "GET, HEAD, DELETE, PATCH"},
        {"PUT", "/v1/topics/meth", "GET, HEAD, DELETE, PATCH"},
        {"DELETE", "/v1/topics/meth/partitions/0", "GET, HEAD"},
        {"POST", "/v1/info", "GET, HEAD"},
        {"PUT", "/v1/topics/meth/partitions/0/records", "POST, GET, HEAD"},
        {"GET", "/v1/topics/meth/partitions/0/segments:roll", "POST"},
        {"DELETE", "/v1/topics/meth/partitions/0/records/0", "GET, HEAD"},
        {"GET", "/v1/topics/meth/records", "POST"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ls_resp r;
        assert_int_equal(ls_http(S, cases[i].method, cases[i].path, NULL, NULL, 0, NULL, &r), 0);
        if (ls_check_error(&r, 405, "method_not_allowed"))
            fprintf(stderr, "# %s %s\n", cases[i].method, cases[i].path);
        CHECK_ERR(r, 405, "method_not_allowed");
        const char *allow = ls_header(&r, "Allow");
        assert_non_null(allow);
        assert_string_equal(allow, cases[i].allow);
        ls_resp_free(&r);
    }
    /* The topic is still there after the DELETE on a partition path. */
    assert_int_equal(ls_log_end_offset(S, "meth", 0), 0);
}

static void test_route_not_found(void **state)
{
    (void)state;
    static const char *const paths[] = {
        "/v1/nothing", "/v2/topics", "/v1/topics/", "/v1/topics/x/partitions",
        "/v1/topics/x/partitions/0/whatever", "/v1/topics/x/partitions/0/records/1/2",
        "/health", "/v1", "/v1/topics/x/partitions/0/segments/0",
    };
    for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++)
        expect_err("GET", paths[i], NULL, 404, "route_not_found");
    /* Also with a body. */
    expect_err("POST", "/v1/nothing", "{\"a\":1}", 404, "route_not_found");
}

/* ---- partitions and offsets ---------------------------------------------------- */

static void test_partition_fields(void **state)
{
    (void)state;
    assert_int_equal(ls_create_topic(S, "pf", 2, NULL), 201);
    ls_resp r;
    assert_int_equal(ls_get(S, "/v1/topics/pf/partitions/1", &r), 0);
    assert_int_equal(r.status, 200);
    assert_string_equal(ls_jstr(&r, "topic"), "pf");
    assert_int_equal(ls_jint(&r, "partition"), 1);
    assert_int_equal(ls_jint(&r, "log_start_offset"), 0);
    assert_int_equal(ls_jint(&r, "high_watermark"), 0);
    assert_int_equal(ls_jint(&r, "log_end_offset"), 0);
    assert_int_equal(ls_jint(&r, "size_bytes"), 0);
    assert_int_equal(ls_jint(&r, "segment_count"), 1);
    assert_int_equal(ls_jint(&r, "active_segment_base_offset"), 0);
    assert_true(json_is_null(ls_jget(&r, "first_timestamp")));
    assert_true(json_is_null(ls_jget(&r, "max_timestamp")));
    assert_true(json_is_integer(ls_jget(&r, "recovery_point")));
    ls_resp_free(&r);

    append_ok("pf", 1, "{\"records\":[{\"value\":\"a\",\"timestamp\":1000},"
                       "{\"value\":\"b\",\"timestamp\":3000}]}");
    append_ok("pf", 1, "{\"records\":[{\"value\":\"c\",\"timestamp\":2000}]}");
    assert_int_equal(ls_get(S, "/v1/topics/pf/partitions/1", &r), 0);
    assert_int_equal(ls_jint(&r, "high_watermark"), 3);
    assert_int_equal(ls_jint(&r, "log_end_offset"), 3);
    assert_int_equal(ls_jint(&r, "first_timestamp"), 1000);
    assert_int_equal(ls_jint(&r, "max_timestamp"), 3000);
    assert_int_equal(ls_jint(&r, "segment_count"), 1);
    char path[1024];
    snprintf(path, sizeof path, "%.255s/pf-1/00000000000000000000.log", S->dir);
    assert_int_equal(ls_jint(&r, "size_bytes"), ls_file_size(path));
    assert_true(ls_jint(&r, "size_bytes") > 0);
    ls_resp_free(&r);
    /* Partition 0 is unaffected. */
    assert_int_equal(ls_log_end_offset(S, "pf", 0), 0);
    /* The describe call carries the same per-partition figures. */
    assert_int_equal(ls_get(S, "/v1/topics/pf", &r), 0);
    assert_int_equal(ls_jint(&r, "partitions.1.log_end_offset"), 3);
    assert_int_equal(ls_jint(&r, "partitions.1.max_timestamp"), 3000);
    assert_int_equal(ls_jint(&r, "partitions.0.log_end_offset"), 0);
    ls_resp_free(&r);
    /* Non-numeric partition in the path. */
    expect_err("GET", "/v1/topics/pf/partitions/one", NULL, 400, "invalid_request");
    expect_err("GET", "/v1/topics/pf/partitions/-1", NULL, 400, "invalid_request");
}

/* GET .../offsets and checks offset and timestamp (or nulls when off < 0). */
static void check_offsets(const char *query, long long off, long long ts)
{
    char path[256];
    snprintf(path, sizeof path, "/v1/topics/offs/partitions/0/offsets?%s", query);
    ls_resp r;
    assert_int_equal(ls_get(S, path, &r), 0);
    if (r.status != 200)
        fprintf(stderr, "# %s: %s\n", query, r.body);
    assert_int_equal(r.status, 200);
    if (off < 0) {
        assert_true(json_is_null(ls_jget(&r, "offset")));
        assert_true(json_is_null(ls_jget(&r, "timestamp")));
    } else {
        if (ls_jint(&r, "offset") != off || ls_jint(&r, "timestamp") != ts)
            fprintf(stderr, "# %s: %s\n", query, r.body);
        assert_int_equal(ls_jint(&r, "offset"), off);
        assert_int_equal(ls_jint(&r, "timestamp"), ts);
    }
    ls_resp_free(&r);
}

static void test_offsets(void **state)
{
    (void)state;
    assert_int_equal(ls_create_topic(S, "offs", 1, NULL), 201);
    /* Empty partition. */
    check_offsets("spec=earliest", 0, -1);
    check_offsets("spec=latest", 0, -1);
    check_offsets("spec=max_timestamp", -1, -1);
    check_offsets("timestamp=0", -1, -1);

    /* offsets 0..4 with timestamps 1000, 2000, 2000 | 3000, 2500 */
    append_ok("offs", 0, "{\"records\":[{\"value\":\"a\",\"timestamp\":1000},"
                         "{\"value\":\"b\",\"timestamp\":2000},{\"value\":\"c\",\"timestamp\":2000}]}");
    append_ok("offs", 0, "{\"records\":[{\"value\":\"d\",\"timestamp\":3000},"
                         "{\"value\":\"e\",\"timestamp\":2500}]}");
    check_offsets("spec=earliest", 0, -1);
    check_offsets("spec=latest", 5, -1);
    check_offsets("spec=max_timestamp", 3, 3000);
    check_offsets("timestamp=0", 0, 1000);
    check_offsets("timestamp=1000", 0, 1000);
    check_offsets("timestamp=1001", 1, 2000);
    check_offsets("timestamp=2000", 1, 2000);
    /* The first OFFSET whose timestamp is >= T: 3 (3000), not 4 (2500). */
    check_offsets("timestamp=2100", 3, 3000);
    check_offsets("timestamp=2500", 3, 3000);
    check_offsets("timestamp=3000", 3, 3000);
    check_offsets("timestamp=3001", -1, -1);

    /* Both, neither, repeated or bad values: 400. */
    static const char *const bad[] = {
        "", "spec=latest&timestamp=5", "spec=newest", "spec=", "timestamp=abc",
        "timestamp=-5", "timestamp=", "spec=latest&spec=earliest", "timestamp=1&timestamp=2",
        "timestamp=99999999999999999999", "spec=latest%00junk", "timestamp=5%00",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char path[256];
        snprintf(path, sizeof path, "/v1/topics/offs/partitions/0/offsets%s%s", *bad[i] ? "?" : "",
                 bad[i]);
        expect_err("GET", path, NULL, 400, "invalid_request");
    }
}

/* ---- request ids and error bodies --------------------------------------------- */

/* Sends method path (with header hdr unless NULL), checks the error and
 * returns its request_id (a static buffer). */
static const char *error_id(const char *method, const char *path, const char *hdr, long status,
                            const char *code)
{
    static char id[128];
    const char *hs[] = {hdr, NULL};
    const char *body = strcmp(method, "GET") ? "{}" : NULL;
    ls_resp r;
    assert_int_equal(ls_http(S, method, path, body ? "application/json" : NULL, body,
                             body ? 2 : 0, hs, &r),
                     0);
    CHECK_ERR(r, status, code); /* includes: request_id == X-Request-Id header */
    snprintf(id, sizeof id, "%s", ls_jstr(&r, "request_id"));
    ls_resp_free(&r);
    return id;
}

static void test_request_id(void **state)
{
    (void)state;
    /* A sane client id is echoed, on successes and errors alike... */
    const char *h1[] = {"X-Request-Id: client-42.A_b", NULL};
    ls_resp r;
    assert_int_equal(ls_http(S, "GET", "/v1/topics", NULL, NULL, 0, h1, &r), 0);
    assert_int_equal(r.status, 200);
    assert_string_equal(ls_header(&r, "X-Request-Id"), "client-42.A_b");
    ls_resp_free(&r);
    const char *want = "client-42.A_b";
    assert_string_equal(error_id("GET", "/v1/topics/nope", h1[0], 404, "unknown_topic"), want);
    /* ... also on answers given before the body is read (405, 404 route). */
    assert_string_equal(error_id("PUT", "/v1/topics", h1[0], 405, "method_not_allowed"), want);
    assert_string_equal(error_id("POST", "/v1/nope", h1[0], 404, "route_not_found"), want);
    /* 64 characters is the longest id kept. */
    char id64[80], hdr[128];
    memset(id64, 'b', 64);
    id64[64] = 0;
    snprintf(hdr, sizeof hdr, "X-Request-Id: %s", id64);
    assert_string_equal(error_id("GET", "/v1/topics/nope", hdr, 404, "unknown_topic"), id64);

    /* Insane ids are replaced by generated ones. */
    snprintf(hdr, sizeof hdr, "X-Request-Id: %sb", id64); /* 65 characters */
    const char *bad_ids[] = {"X-Request-Id: has space", "X-Request-Id: semi;colon",
                             "X-Request-Id: <script>", hdr};
    for (size_t i = 0; i < sizeof bad_ids / sizeof bad_ids[0]; i++) {
        const char *id = error_id("GET", "/v1/topics/nope", bad_ids[i], 404, "unknown_topic");
        assert_true(strlen(id) > 0 && strlen(id) <= 64);
        assert_null(strpbrk(id, " <;"));
        assert_null(strstr(id, id64));
    }
    /* Without one, each request gets its own generated id. */
    char first[128];
    snprintf(first, sizeof first, "%s", error_id("GET", "/v1/topics/nope", NULL, 404, "unknown_topic"));
    assert_true(strlen(first) > 0);
    assert_string_not_equal(first, error_id("GET", "/v1/topics/nope", NULL, 404, "unknown_topic"));
    assert_int_equal(ls_get(S, "/health/live", &r), 0);
    assert_non_null(ls_header(&r, "X-Request-Id"));
    assert_true(strlen(ls_header(&r, "X-Request-Id")) > 0);
    ls_resp_free(&r);
}

/* A sweep over error-producing requests of every kind: each answer must have
 * exactly the DESIGN error body and a non-2xx status. */
static void test_error_bodies(void **state)
{
    (void)state;
    assert_int_equal(ls_create_topic(S, "eb", 1, NULL), 201);
    static const struct {
        const char *method, *path, *ctype, *body;
        long status;
        const char *code;
    } cases[] = {
        {"GET", "/v1/nowhere", NULL, NULL, 404, "route_not_found"},
        {"PATCH", "/v1/topics", NULL, NULL, 405, "method_not_allowed"},
        {"POST", "/v1/topics", "application/json", "", 400, "malformed_json"},
        {"POST", "/v1/topics", "application/json", "[1,2]", 400, "invalid_request"},
        {"POST", "/v1/topics", "application/json", "{\"name\":\"eb\"}", 409, "topic_exists"},
        {"POST", "/v1/topics", "application/json", "{\"name\":\"..\"}", 422, "invalid_topic_name"},
        {"POST", "/v1/topics", "application/json", "{\"name\":\"z\",\"configs\":{\"x\":1}}", 422,
         "invalid_config"},
        {"GET", "/v1/topics/eb/partitions/0/records?offset=5", NULL, NULL, 416,
         "offset_out_of_range"},
        {"GET", "/v1/topics/eb/partitions/0/records?offset=x", NULL, NULL, 400, "invalid_request"},
        {"POST", "/v1/topics/eb/partitions/0/records", "text/plain", "{}", 415,
         "unsupported_media_type"},
        {"POST", "/v1/topics/eb/partitions/0/records", "application/json",
         "{\"expected_offset\":7,\"records\":[{\"value\":\"v\"}]}", 412, "expected_offset_mismatch"},
        {"GET", "/v1/topics/eb/partitions/0/segments/99/index", NULL, NULL, 404, "segment_not_found"},
        {"GET", "/v1/topics/eb/partitions/0/records/0", NULL, NULL, 416, "offset_out_of_range"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ls_resp r;
        const char *b = cases[i].body;
        assert_int_equal(ls_http(S, cases[i].method, cases[i].path, cases[i].ctype, b,
                                 b ? strlen(b) : 0, NULL, &r),
                         0);
        if (ls_check_error(&r, cases[i].status, cases[i].code))
            fprintf(stderr, "# case %zu: %s %s\n", i, cases[i].method, cases[i].path);
        CHECK_ERR(r, cases[i].status, cases[i].code);
        ls_resp_free(&r);
    }
    assert_int_equal(ls_log_end_offset(S, "eb", 0), 0);
}

/* Last: a clean stop exits 0 (the sanitizer build turns leaks into a failing
 * exit status), and the data survives a restart. */
static void test_zz_clean_stop(void **state)
{
    (void)state;
    /* Directory names parse back by their last '-': topic "x" partition 0 is
     * x-0, topic "x-0" partition 1 is x-0-1. */
    assert_int_equal(ls_create_topic(S, "x", 1, NULL), 201);
    assert_int_equal(ls_create_topic(S, "x-0", 2, NULL), 201);
    append_ok("x", 0, "{\"records\":[{\"value\":\"1\"}]}");
    append_ok("x-0", 0, "{\"records\":[{\"value\":\"1\"},{\"value\":\"2\"}]}");
    append_ok("x-0", 1, "{\"records\":[{\"value\":\"1\"},{\"value\":\"2\"},{\"value\":\"3\"}]}");
    assert_int_equal(ls_stop(S), 0);
    assert_int_equal(ls_restart(S, NULL), 0);
    ls_resp r;
    assert_int_equal(ls_get(S, "/v1/info", &r), 0);
    assert_true(json_is_true(ls_jget(&r, "startup.clean_shutdown")));
    assert_true(ls_jint(&r, "startup.topics") >= 5);
    ls_resp_free(&r);
    assert_int_equal(ls_log_end_offset(S, "offs", 0), 5);
    assert_int_equal(ls_log_end_offset(S, "x", 0), 1);
    assert_int_equal(ls_log_end_offset(S, "x-0", 0), 2);
    assert_int_equal(ls_log_end_offset(S, "x-0", 1), 3);
    assert_int_equal(get_int("/v1/topics/x", "partition_count"), 1);
    expect_err("GET", "/v1/topics/life", NULL, 404, "unknown_topic");
    assert_int_equal(get_int("/v1/topics/grow", "partition_count"), 4);
    assert_int_equal(ls_get(S, "/v1/topics/cfg", &r), 0);
    assert_string_equal(json_string_value(json_object_get(ls_jget(&r, "configs"), "segment.bytes")),
                        "2097152");
    ls_resp_free(&r);
    assert_int_equal(ls_stop(S), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_health),
        cmocka_unit_test(test_info),
        cmocka_unit_test(test_topic_lifecycle),
        cmocka_unit_test(test_topic_exists),
        cmocka_unit_test(test_patch_partitions),
        cmocka_unit_test(test_create_with_configs),
        cmocka_unit_test(test_unknown_topic_and_partition),
        cmocka_unit_test(test_method_not_allowed),
        cmocka_unit_test(test_route_not_found),
        cmocka_unit_test(test_partition_fields),
        cmocka_unit_test(test_offsets),
        cmocka_unit_test(test_request_id),
        cmocka_unit_test(test_error_bodies),
        cmocka_unit_test(test_zz_clean_stop),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
