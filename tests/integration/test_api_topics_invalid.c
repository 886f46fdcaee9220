/*
 * test_api_topics_invalid.c - topic creation refusing what it must (DESIGN
 * §5 topic names and configs, §6 statuses), against the real server binary.
 * (Split from test_api_topics.c to keep each file readable.)
 *
 * Covers: every kind of invalid config (422 invalid_config with details.key
 * naming the key): unknown keys, out-of-bounds segment.bytes=1000, bad
 * numbers, min.compaction.lag.ms > max.compaction.lag.ms, bad or repeated cleanup.policy,
 * inapplicable keys (min.insync.replicas, unclean.leader.election.enable),
 * bad booleans, ratios and enums, values that are objects, arrays, null or
 * strings with NUL; invalid topic names (422 invalid_topic_name): empty, ".",
 * "..", 250 characters (249 is fine, and its Location header is whole), "/",
 * backslash, space, "%2e%2e" literally, NUL, non-ASCII ("é") and more, in the create
 * body and percent-encoded in paths (GET, DELETE, POST; "a%00b" must not act
 * on topic "a"); partition counts 0, -1 and 100001 (400 invalid_partitions)
 * and non-integer ones (400); more partitions than the open-files limit
 * allows (507, on a second server with 256).  For each: nothing is created under the data
 * dir (ls_dir_listing before/after equal) and the server is still up.
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

static void test_invalid_configs(void **state)
{
    (void)state;
    static const struct {
        const char *configs;
        const char *key; /* the key details.key must name */
        const char *alt; /* another acceptable key, or NULL */
    } cases[] = {
        {"{\"no.such.config\":\"1\"}", "no.such.config", NULL},
        {"{\"segment.bytes\":1000}", "segment.bytes", NULL},
        {"{\"segment.bytes\":\"1000\"}", "segment.bytes", NULL},
        {"{\"segment.bytes\":\"lots\"}", "segment.bytes", NULL},
        {"{\"segment.bytes\":3000000000}", "segment.bytes", NULL},
        {"{\"min.compaction.lag.ms\":10000,\"max.compaction.lag.ms\":5000}",
         "min.compaction.lag.ms", "max.compaction.lag.ms"},
        {"{\"cleanup.policy\":\"shred\"}", "cleanup.policy", NULL},
        {"{\"cleanup.policy\":\"delete,bogus\"}", "cleanup.policy", NULL},
        {"{\"cleanup.policy\":\"compact,delete,compact\"}", "cleanup.policy", NULL},
        {"{\"min.insync.replicas\":2}", "min.insync.replicas", NULL},
        {"{\"unclean.leader.election.enable\":true}", "unclean.leader.election.enable", NULL},
        {"{\"preallocate\":\"maybe\"}", "preallocate", NULL},
        {"{\"min.cleanable.dirty.ratio\":1.5}", "min.cleanable.dirty.ratio", NULL},
        {"{\"message.timestamp.type\":\"WallClock\"}", "message.timestamp.type", NULL},
        {"{\"retention.ms\":{\"value\":1}}", "retention.ms", NULL},
        {"{\"retention.ms\":[1]}", "retention.ms", NULL},
        {"{\"retention.ms\":null}", "retention.ms", NULL},
        {"{\"segment.bytes\":\"1048576\\u0000junk\"}", "segment.bytes", NULL},
    };
    char *before = ls_dir_listing(S->dir);
    size_t ntopics = topic_count();
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char body[512];
        snprintf(body, sizeof body, "{\"name\":\"badcfg\",\"partitions\":1,\"configs\":%s}",
                 cases[i].configs);
        ls_resp r;
        create_raw(body, &r);
        if (ls_check_error(&r, 422, "invalid_config"))
            fprintf(stderr, "# case %zu: %s\n", i, cases[i].configs);
        CHECK_ERR(r, 422, "invalid_config");
        const char *key = ls_jstr(&r, "details.key");
        if (!key || (strcmp(key, cases[i].key) && (!cases[i].alt || strcmp(key, cases[i].alt))))
            fprintf(stderr, "# case %zu: details.key %s, expected %s\n", i, key ? key : "(none)",
                    cases[i].key);
        assert_non_null(key);
        assert_true(!strcmp(key, cases[i].key) || (cases[i].alt && !strcmp(key, cases[i].alt)));
        assert_string_equal(ls_jstr(&r, "kafka_error"), "INVALID_CONFIG");
        ls_resp_free(&r);
    }
    assert_same_dir(before);
    assert_int_equal(topic_count(), ntopics);
    expect_err("GET", "/v1/topics/badcfg", NULL, 404, "unknown_topic");
    assert_int_equal(ls_live_status(S), 200);
}

static void test_invalid_topic_names(void **state)
{
    (void)state;
    char n250[300], n249[300];
    memset(n250, 'x', 250);
    n250[250] = 0;
    memset(n249, 'y', 249);
    n249[249] = 0;
    /* JSON string literals as they appear in the body. */
    const char *names[] = {"\"\"", "\".\"", "\"..\"", NULL /* 250 chars */, "\"a/b\"", "\"a\\\\b\"",
                           "\"a b\"", "\"%2e%2e\"", "\"a\\u0000b\"", "\"\\u0000\"", "\"\xc3\xa9\"",
                           "\"caf\xc3\xa9\"", "\"../etc\"", "\"a:b\"", "\"a*\""};
    char q250[320];
    snprintf(q250, sizeof q250, "\"%s\"", n250);
    names[3] = q250;
    size_t ntopics = topic_count();
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        char body[512];
        snprintf(body, sizeof body, "{\"name\":%s,\"partitions\":1}", names[i]);
        expect_err_same_dir("POST", "/v1/topics", body, 422, "invalid_topic_name");
    }
    assert_int_equal(topic_count(), ntopics);

    /* A name that is not a string at all is a malformed request. */
    ls_resp r;
    expect_err("POST", "/v1/topics", "{\"name\":42}", 400, "invalid_request");
    /* Nor is one named twice (the last one was taken, silently). */
    expect_err_same_dir("POST", "/v1/topics", "{\"name\":\"t2\",\"name\":\"t3\"}", 400,
                        "malformed_json");

    /* Names that differ only in '.' and '_' collide, as in Kafka. */
    assert_int_equal(ls_create_topic(S, "metrics.eu_west", 1, NULL), 201);
    expect_err_same_dir("POST", "/v1/topics", "{\"name\":\"metrics_eu.west\"}", 422,
                        "invalid_topic_name");
    expect_err_same_dir("POST", "/v1/topics", "{\"name\":\"metrics_eu_west\"}", 422,
                        "invalid_topic_name");
    assert_int_equal(ls_create_topic(S, "metrics.eu_west2", 1, NULL), 201);
    delete_ok("/v1/topics/metrics.eu_west");
    assert_int_equal(ls_create_topic(S, "metrics_eu_west", 1, NULL), 201);
    delete_ok("/v1/topics/metrics_eu_west");
    delete_ok("/v1/topics/metrics.eu_west2");

    /* 249 characters is the longest valid name. */
    char body[400];
    snprintf(body, sizeof body, "{\"name\":\"%s\",\"partitions\":1}", n249);
    create_raw(body, &r);
    assert_int_equal(r.status, 201);
    char path[400];
    snprintf(path, sizeof path, "/v1/topics/%s", n249);
    /* The Location header names the whole topic. */
    assert_non_null(ls_header(&r, "Location"));
    assert_string_equal(ls_header(&r, "Location"), path);
    ls_resp_free(&r);
    assert_int_equal(ls_get(S, path, &r), 0);
    assert_int_equal(r.status, 200);
    assert_int_equal(strlen(ls_jstr(&r, "name")), 249);
    ls_resp_free(&r);
    delete_ok(path);
}

/* Invalid names reaching the server through the path, percent-encoded. */
static void test_invalid_topic_names_in_path(void **state)
{
    (void)state;
    assert_int_equal(ls_create_topic(S, "a", 1, NULL), 201);
    append_ok("a", 0, "{\"records\":[{\"value\":\"x\"}]}");
    static const char *const paths[] = {
        "/v1/topics/%2e%2e",
        "/v1/topics/%2E",
        "/v1/topics/a%20b",
        "/v1/topics/%C3%A9",
        "/v1/topics/a%5Cb",
        "/v1/topics/a%00b",  /* must not be taken for topic "a" */
        "/v1/topics/a%00",
    };
    for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++) {
        expect_err_same_dir("GET", paths[i], NULL, 422, "invalid_topic_name");
        expect_err_same_dir("DELETE", paths[i], NULL, 422, "invalid_topic_name");
    }
    /* Appends and partition reads through such paths create nothing either. */
    static const char *const rec_paths[] = {
        "/v1/topics/%2e%2e/partitions/0/records",
        "/v1/topics/a%00b/partitions/0/records",
        "/v1/topics/a%20b/records",
    };
    for (size_t i = 0; i < sizeof rec_paths / sizeof rec_paths[0]; i++)
        expect_err_same_dir("POST", rec_paths[i], "{\"records\":[{\"value\":\"x\"}]}", 422,
                            "invalid_topic_name");
    /* A name over the router's 255-byte buffer is still a bad name, not an
     * unknown route. */
    char longpath[400];
    snprintf(longpath, sizeof longpath, "/v1/topics/%0300d", 0);
    expect_err_same_dir("GET", longpath, NULL, 422, "invalid_topic_name");
    /* A name that is not UTF-8 is quoted in the message as \xNN escapes (it
     * was "(unprintable message)"). */
    ls_resp r;
    assert_int_equal(ls_get(S, "/v1/topics/a%FFb", &r), 0);
    CHECK_ERR(r, 422, "invalid_topic_name");
    assert_non_null(strstr(ls_jstr(&r, "message"), "a\\xFFb"));
    ls_resp_free(&r);
    /* Topic "a" survived every one of them. */
    assert_int_equal(ls_log_end_offset(S, "a", 0), 1);
    assert_int_equal(ls_live_status(S), 200);
}

static void test_invalid_partition_counts(void **state)
{
    (void)state;
    static const char *const bodies[] = {
        "{\"name\":\"p0\",\"partitions\":0}",
        "{\"name\":\"p0\",\"partitions\":-1}",
        "{\"name\":\"p0\",\"partitions\":100001}",
    };
    for (size_t i = 0; i < sizeof bodies / sizeof bodies[0]; i++)
        expect_err_same_dir("POST", "/v1/topics", bodies[i], 400, "invalid_partitions");
    expect_err_same_dir("POST", "/v1/topics", "{\"name\":\"p0\",\"partitions\":\"2\"}", 400,
                        "invalid_request");
    expect_err_same_dir("POST", "/v1/topics", "{\"name\":\"p0\",\"partitions\":1,\"colour\":\"red\"}",
                        400, "invalid_request");
    expect_err("GET", "/v1/topics/p0", NULL, 404, "unknown_topic");
}

/* A server allowed 256 open files says so at start and refuses a topic it
 * could not keep open (3 files a partition) with 507, creating nothing; a
 * smaller one still goes in.  Restarted with too few, it will not start,
 * and says why. */
static void test_open_files_limit(void **state)
{
    (void)state;
    ls_server small;
    ls_opts o = {.max_open_files = 256};
    assert_int_equal(ls_start_opts(&small, &o), 0);
    size_t len;
    char *log = ls_read_file(small.log_path, &len);
    assert_non_null(log);
    assert_non_null(strstr(log, "open-files limit: 256"));
    free(log);
    char *before = ls_dir_listing(small.dir);
    ls_resp r;
    assert_int_equal(ls_post(&small, "/v1/topics", "{\"name\":\"wide\",\"partitions\":100}", &r), 0);
    CHECK_ERR(r, 507, "too_many_open_files");
    assert_true(json_is_true(ls_jget(&r, "retriable")));
    assert_string_equal(ls_jstr(&r, "details.key"), "partitions");
    assert_non_null(strstr(ls_jstr(&r, "message"), "need 300 open files"));
    ls_resp_free(&r);
    char *after = ls_dir_listing(small.dir);
    assert_string_equal(after, before);
    free(before);
    free(after);
    assert_int_equal(ls_create_topic(&small, "narrow", 20, NULL), 201);
    assert_int_equal(ls_stop(&small), 0);
    /* Restarted with room for fewer files than its segments hold, it
     * refuses to start and says what to raise. */
    small.max_open_files = 48;
    assert_int_equal(ls_restart(&small, NULL), -1);
    assert_true(ls_file_contains(small.log_path, "raise the open-files limit (ulimit -n"));
    assert_true(ls_file_contains(small.log_path,
                                 "this process may open 48 files; every segment holds 1 (an active one 3)"));
    ls_cleanup(&small);
}

/* Last: nothing invalid was kept, and a clean stop exits 0. */
static void test_zz_clean_stop(void **state)
{
    (void)state;
    assert_int_equal(topic_count(), 1); /* just "a" */
    assert_int_equal(ls_stop(S), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_invalid_configs),
        cmocka_unit_test(test_invalid_topic_names),
        cmocka_unit_test(test_invalid_topic_names_in_path),
        cmocka_unit_test(test_invalid_partition_counts),
        cmocka_unit_test(test_open_files_limit),
        cmocka_unit_test(test_zz_clean_stop),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
