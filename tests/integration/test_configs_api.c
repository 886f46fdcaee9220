/*
 * test_configs_api.c - topic configs (issue 7),
 * against the real server binary over loopback.
 *
 * GET /v1/topics/{t}/configs lists every topic config of `logstore
 * --settings-markdown` (README's table) with value, source (TOPIC_CONFIG,
 * STATIC_BROKER_CONFIG - the group server runs with log.retention.hours=24 -
 * or DEFAULT_CONFIG), type and is_default.  PUT takes effect on the running
 * topic (segment.bytes rolls the next append, LogAppendTime stamps the next
 * batch); DELETE reverts to the broker or table default; configs:alter runs
 * SET/DELETE/APPEND/SUBTRACT in order, and one bad operation is 422
 * invalid_config naming details.key and details.operation with nothing
 * changed (listing and metadata file identical).  Unknown topics are 404;
 * concurrent changes to different configs are all kept; changes survive a
 * restart, and stay in force when new broker defaults fail their
 * cross-check.  One server serves the group.  (Server defaults and log dirs:
 * test_server_configs.c.)
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

/* The group server runs with a broker default set, for the sources. */
#define GROUP_SETTINGS ((const char *const[]){"log.retention.hours=24", NULL})
#include "configs_util.h"
#include "group_server.h"
#include "harness.h"

#include <ctype.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* One answer from a JSON request, asserted to be status; returns the config
 * array of a 200 listing (a new reference) or NULL. */
static json_t *send_expect(const char *method, const char *path, const char *body, long status,
                           const char *code, ls_resp *keep)
{
    ls_resp r;
    assert_int_equal(ls_send_json(S, method, path, body, &r), 0);
    if (r.status != status)
        fprintf(stderr, "# %s %s %s: %ld %s\n", method, path, body ? body : "", r.status, r.body);
    json_t *arr = NULL;
    if (status >= 300) {
        CHECK_ERR(r, status, code);
    } else {
        assert_int_equal(r.status, status);
        arr = json_incref(json_object_get(r.json, "configs"));
    }
    if (keep)
        *keep = r;
    else
        ls_resp_free(&r);
    return arr;
}

static void put_config(const char *topic, const char *name, const char *value_json)
{
    char path[256], body[256];
    snprintf(path, sizeof path, "/v1/topics/%s/configs/%s", topic, name);
    snprintf(body, sizeof body, "{\"value\":%s}", value_json);
    json_t *arr = send_expect("PUT", path, body, 200, NULL, NULL);
    assert_non_null(entry(arr, name));
    assert_string_equal(estr(entry(arr, name), "source"), "TOPIC_CONFIG");
    json_decref(arr);
}


/* ---- the listing --------------------------------------------------------- */

typedef struct table_row {
    char name[64], type[16], dflt[64];
} table_row;

/* The topic-config table of `logstore --settings-markdown`; returns rows. */
static size_t settings_table(table_row *rows, size_t max)
{
    char cmd[512];
    snprintf(cmd, sizeof cmd, "%s --settings-markdown", ls_binary());
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    char line[1024];
    size_t n = 0;
    bool topic_table = false;
    while (fgets(line, sizeof line, p)) {
        if (!strncmp(line, "| Topic config |", 16)) {
            topic_table = true;
            continue;
        }
        /* "| `name` | type | `default` | synonyms | doc |" */
        if (!topic_table || strncmp(line, "| `", 3) || n == max)
            continue;
        if (sscanf(line, "| `%63[^`]` | %15s | `%63[^`]`", rows[n].name, rows[n].type,
                   rows[n].dflt) == 3)
            n++;
    }
    assert_int_equal(pclose(p), 0);
    return n;
}

static void test_listing_every_config(void **state)
{
    (void)state;
    assert_int_equal(ls_create_topic(S, "cfg", 1,
                                     "{\"segment.bytes\":\"2097152\",\"cleanup.policy\":\"compact,delete\"}"),
                     201);
    table_row rows[64];
    size_t n = settings_table(rows, 64);
    assert_true(n >= 20);
    json_t *arr = listing(S, "cfg");
    assert_int_equal(json_array_size(arr), n);
    for (size_t i = 0; i < n; i++) {
        json_t *e = entry(arr, rows[i].name);
        if (!e)
            fprintf(stderr, "# %s missing from the listing\n", rows[i].name);
        assert_non_null(e);
        /* every field, with its JSON type (is_default: in expect) */
        assert_true(estr(e, "value") && estr(e, "source") && estr(e, "type"));
        char type[16];
        size_t k = 0;
        for (; rows[i].type[k] && k < sizeof type - 1; k++)
            type[k] = (char)toupper((unsigned char)rows[i].type[k]);
        type[k] = 0;
        assert_string_equal(estr(e, "type"), type);
        assert_string_equal(estr(e, "default"), rows[i].dflt);
        if (!strcmp(rows[i].name, "segment.bytes"))
            expect(arr, "segment.bytes", "2097152", "TOPIC_CONFIG");
        else if (!strcmp(rows[i].name, "cleanup.policy"))
            expect(arr, "cleanup.policy", "compact,delete", "TOPIC_CONFIG");
        else if (!strcmp(rows[i].name, "retention.ms"))
            expect(arr, "retention.ms", "86400000", "STATIC_BROKER_CONFIG");
        else
            expect(arr, rows[i].name, rows[i].dflt, "DEFAULT_CONFIG");
    }
    /* a few types spelled out, in case the table itself drifted */
    assert_string_equal(estr(entry(arr, "segment.bytes"), "type"), "INT");
    assert_string_equal(estr(entry(arr, "retention.ms"), "type"), "LONG");
    assert_string_equal(estr(entry(arr, "min.cleanable.dirty.ratio"), "type"), "DOUBLE");
    assert_string_equal(estr(entry(arr, "preallocate"), "type"), "BOOLEAN");
    assert_string_equal(estr(entry(arr, "message.timestamp.type"), "type"), "STRING");
    assert_string_equal(estr(entry(arr, "cleanup.policy"), "type"), "LIST");
    json_decref(arr);
}

/* Asserts entry name's synonyms in arr: n (name, value, source) triples,
 * in Kafka's DescribeConfigs order. */
static void expect_synonyms(json_t *arr, const char *name, size_t n, const char *const want[][3])
{
    json_t *syn = json_object_get(entry(arr, name), "synonyms");
    char *got = json_dumps(syn, JSON_COMPACT);
    bool same = json_array_size(syn) == n;
    for (size_t i = 0; same && i < n; i++) {
        json_t *e = json_array_get(syn, i);
        same = json_is_string(json_object_get(e, "name")) && !strcmp(estr(e, "name"), want[i][0]) &&
               json_is_string(json_object_get(e, "value")) && !strcmp(estr(e, "value"), want[i][1]) &&
               json_is_string(json_object_get(e, "source")) && !strcmp(estr(e, "source"), want[i][2]);
    }
    if (!same)
        fprintf(stderr, "# %s synonyms: %s\n", name, got ? got : "(none)");
    free(got);
    assert_true(same);
}

/* synonyms as Kafka's DescribeConfigs lists them: the topic's override,
 * the broker settings that were set, then the broker default (they were
 * the names of every broker synonym, set or not). */
static void test_listing_synonyms_as_kafka(void **state)
{
    (void)state;
    assert_int_equal(ls_create_topic(S, "syn", 1, "{\"segment.ms\":\"60000\"}"), 201);
    json_t *arr = listing(S, "syn");
    expect_synonyms(arr, "retention.ms", 2,
                    (const char *const[][3]){{"log.retention.hours", "24", "STATIC_BROKER_CONFIG"},
                                             {"log.retention.hours", "168", "DEFAULT_CONFIG"}});
    expect_synonyms(arr, "segment.ms", 2,
                    (const char *const[][3]){{"segment.ms", "60000", "TOPIC_CONFIG"},
                                             {"log.roll.hours", "168", "DEFAULT_CONFIG"}});
    expect_synonyms(arr, "segment.bytes", 1,
                    (const char *const[][3]){{"log.segment.bytes", "1073741824", "DEFAULT_CONFIG"}});
    expect_synonyms(arr, "cleanup.policy", 1,
                    (const char *const[][3]){{"log.cleanup.policy", "delete", "DEFAULT_CONFIG"}});
    json_decref(arr);
}

/* ---- PUT and DELETE ---------------------------------------------------------- */

static void test_put_segment_bytes_rolls_without_restart(void **state)
{
    (void)state;
    assert_int_equal(ls_create_topic(S, "roll", 1, NULL), 201);
    assert_int_equal(append_values(S, "roll", 2, 300000), 0); /* ~600 KB */
    assert_int_equal(ls_partition_field(S, "roll", 0, "segment_count"), 1);
    put_config("roll", "segment.bytes", "\"1048576\"");
    json_t *arr = listing(S, "roll");
    expect(arr, "segment.bytes", "1048576", "TOPIC_CONFIG");
    json_decref(arr);
    /* 600 KB more would pass 1 MiB: the same running partition rolls */
    assert_int_equal(append_values(S, "roll", 2, 300000), 2);
    assert_int_equal(ls_partition_field(S, "roll", 0, "segment_count"), 2);
    assert_int_equal(ls_partition_field(S, "roll", 0, "active_segment_base_offset"), 2);
    /* and the describe shows the override */
    ls_resp r;
    assert_int_equal(ls_get(S, "/v1/topics/roll", &r), 0);
    assert_string_equal(json_string_value(json_object_get(json_object_get(r.json, "configs"),
                                                          "segment.bytes")),
                        "1048576");
    ls_resp_free(&r);
}

static void append_ts(const char *topic, long long ts, ls_resp *r)
{
    char path[256], body[256];
    snprintf(path, sizeof path, "/v1/topics/%s/partitions/0/records", topic);
    snprintf(body, sizeof body, "{\"records\":[{\"key\":\"k\",\"value\":\"v\",\"timestamp\":%lld}]}", ts);
    assert_int_equal(ls_send_json(S, "POST", path, body, r), 0);
    assert_int_equal(r->status, 200);
}

static void read_one(const char *topic, long long offset, ls_resp *r)
{
    char path[256];
    snprintf(path, sizeof path, "/v1/topics/%s/partitions/0/records/%lld", topic, offset);
    assert_int_equal(ls_get(S, path, r), 0);
    assert_int_equal(r->status, 200);
}

static void test_put_timestamp_type_changes_new_appends(void **state)
{
    (void)state;
    assert_int_equal(ls_create_topic(S, "ts", 1, NULL), 201);
    ls_resp r;
    append_ts("ts", 1000, &r);
    assert_string_equal(ls_jstr(&r, "timestamp_type"), "CreateTime");
    ls_resp_free(&r);

    put_config("ts", "message.timestamp.type", "\"LogAppendTime\"");
    int64_t before = now_ms();
    append_ts("ts", 1000, &r);
    int64_t after = now_ms();
    assert_string_equal(ls_jstr(&r, "timestamp_type"), "LogAppendTime");
    assert_true(ls_jint(&r, "log_append_time") >= before - 5);
    assert_true(ls_jint(&r, "log_append_time") <= after + 5);
    ls_resp_free(&r);
    read_one("ts", 1, &r);
    assert_string_equal(ls_jstr(&r, "timestamp_type"), "LogAppendTime");
    assert_true(ls_jint(&r, "timestamp") >= before - 5 && ls_jint(&r, "timestamp") <= after + 5);
    ls_resp_free(&r);
    read_one("ts", 0, &r); /* the old batch keeps its CreateTime */
    assert_string_equal(ls_jstr(&r, "timestamp_type"), "CreateTime");
    assert_int_equal(ls_jint(&r, "timestamp"), 1000);
    ls_resp_free(&r);

    /* DELETE reverts: CreateTime again for the next batch */
    json_t *arr = send_expect("DELETE", "/v1/topics/ts/configs/message.timestamp.type", NULL, 200,
                              NULL, NULL);
    expect(arr, "message.timestamp.type", "CreateTime", "DEFAULT_CONFIG");
    json_decref(arr);
    append_ts("ts", 1000, &r);
    assert_string_equal(ls_jstr(&r, "timestamp_type"), "CreateTime");
    ls_resp_free(&r);
    read_one("ts", 2, &r);
    assert_int_equal(ls_jint(&r, "timestamp"), 1000);
    ls_resp_free(&r);
}

static void test_put_and_delete_revert(void **state)
{
    (void)state;
    assert_int_equal(ls_create_topic(S, "rev", 1, "{\"segment.bytes\":\"2097152\"}"), 201);
    put_config("rev", "retention.ms", "1000");              /* a JSON number */
    put_config("rev", "preallocate", "true");               /* a JSON boolean */
    /* a JSON real, stored in its shortest form: "%.17g" made it
     * "0.29999999999999999" (topic create already had the fix) */
    put_config("rev", "min.cleanable.dirty.ratio", "0.3");
    json_t *arr = listing(S, "rev");
    expect(arr, "retention.ms", "1000", "TOPIC_CONFIG");
    expect(arr, "preallocate", "true", "TOPIC_CONFIG");
    expect(arr, "min.cleanable.dirty.ratio", "0.3", "TOPIC_CONFIG");
    json_decref(arr);

    /* DELETE goes back to the broker default (retention.ms) or the table's */
    arr = send_expect("DELETE", "/v1/topics/rev/configs/retention.ms", NULL, 200, NULL, NULL);
    expect(arr, "retention.ms", "86400000", "STATIC_BROKER_CONFIG");
    json_decref(arr);
    arr = send_expect("DELETE", "/v1/topics/rev/configs/segment.bytes", NULL, 200, NULL, NULL);
    expect(arr, "segment.bytes", "1073741824", "DEFAULT_CONFIG");
    expect(arr, "preallocate", "true", "TOPIC_CONFIG");
    json_decref(arr);
    /* deleting what is not overridden changes nothing and is no error */
    arr = send_expect("DELETE", "/v1/topics/rev/configs/segment.bytes", NULL, 200, NULL, NULL);
    expect(arr, "segment.bytes", "1073741824", "DEFAULT_CONFIG");
    json_decref(arr);

    /* refusals name the key and change nothing */
    static const char *const bad[][5] = {/* method, config, body, status, error_code */
        {"PUT", "segment.bytes", "{\"value\":\"1048575\"}", "422", "invalid_config"},
        {"PUT", "retention.ms", "{\"value\":\"soon\"}", "422", "invalid_config"},
        {"PUT", "no.such.config", "{\"value\":\"1\"}", "422", "invalid_config"},
        {"PUT", "min.insync.replicas", "{\"value\":\"2\"}", "422", "invalid_config"},
        {"DELETE", "no.such.config", NULL, "422", "invalid_config"},
        {"PUT", "retention.ms", "{\"val\":\"1\"}", "400", "invalid_request"},
        {"PUT", "retention.ms", "{\"value\":[1]}", "400", "invalid_request"},
        {"PUT", "retention.ms", "{\"value\":", "400", "malformed_json"}};
    json_t *before = listing(S, "rev");
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char path[128];
        ls_resp r;
        snprintf(path, sizeof path, "/v1/topics/rev/configs/%s", bad[i][1]);
        send_expect(bad[i][0], path, bad[i][2], atol(bad[i][3]), bad[i][4], &r);
        if (!strcmp(bad[i][4], "invalid_config"))
            assert_string_equal(ls_jstr(&r, "details.key"), bad[i][1]);
        ls_resp_free(&r);
    }
    json_t *after = listing(S, "rev");
    assert_true(json_equal(before, after));
    json_decref(before);
    json_decref(after);
}

/* ---- configs:alter ---------------------------------------------------------- */

static json_t *alter_ok(const char *topic, const char *ops)
{
    char path[256];
    snprintf(path, sizeof path, "/v1/topics/%s/configs:alter", topic);
    char *body = malloc(strlen(ops) + 32);
    assert_non_null(body);
    sprintf(body, "{\"operations\":%s}", ops);
    json_t *arr = send_expect("POST", path, body, 200, NULL, NULL);
    free(body);
    return arr;
}

static void test_alter_operations(void **state)
{
    (void)state;
    assert_int_equal(ls_create_topic(S, "alt", 1, NULL), 201);
    json_t *arr = alter_ok("alt", "[{\"name\":\"cleanup.policy\",\"op\":\"APPEND\",\"value\":\"compact\"}]");
    expect(arr, "cleanup.policy", "delete,compact", "TOPIC_CONFIG");
    json_decref(arr);
    /* appending what is there already adds nothing */
    arr = alter_ok("alt", "[{\"name\":\"cleanup.policy\",\"op\":\"APPEND\",\"value\":\"delete\"}]");
    expect(arr, "cleanup.policy", "delete,compact", "TOPIC_CONFIG");
    json_decref(arr);
    arr = alter_ok("alt", "[{\"name\":\"cleanup.policy\",\"op\":\"SUBTRACT\",\"value\":\"delete\"}]");
    expect(arr, "cleanup.policy", "compact", "TOPIC_CONFIG");
    json_decref(arr);
    /* subtracting what is absent changes nothing */
    arr = alter_ok("alt", "[{\"name\":\"cleanup.policy\",\"op\":\"SUBTRACT\",\"value\":\"delete\"}]");
    expect(arr, "cleanup.policy", "compact", "TOPIC_CONFIG");
    json_decref(arr);
    arr = alter_ok("alt", "[{\"name\":\"cleanup.policy\",\"op\":\"APPEND\",\"value\":\"delete\"}]");
    expect(arr, "cleanup.policy", "compact,delete", "TOPIC_CONFIG");
    json_decref(arr);
    /* subtracting everything leaves an empty policy (Kafka 4.2: keep everything) */
    arr = alter_ok("alt", "[{\"name\":\"cleanup.policy\",\"op\":\"SUBTRACT\",\"value\":\"compact,delete\"}]");
    expect(arr, "cleanup.policy", "", "TOPIC_CONFIG");
    json_decref(arr);
    arr = alter_ok("alt", "[{\"name\":\"cleanup.policy\",\"op\":\"APPEND\",\"value\":\"compact\"}]");
    expect(arr, "cleanup.policy", "compact", "TOPIC_CONFIG");
    json_decref(arr);
    /* As Kafka parses a list, blanks around each item go: " compact " is
     * compact (appending it adds nothing, subtracting it removes it).
     * Items match exactly, as Kafka's do: COMPACT is not compact. */
    arr = alter_ok("alt", "[{\"name\":\"cleanup.policy\",\"op\":\"APPEND\",\"value\":\" compact \"}]");
    expect(arr, "cleanup.policy", "compact", "TOPIC_CONFIG");
    json_decref(arr);
    arr = alter_ok("alt", "[{\"name\":\"cleanup.policy\",\"op\":\"APPEND\",\"value\":\"delete \"}]");
    expect(arr, "cleanup.policy", "compact,delete", "TOPIC_CONFIG");
    json_decref(arr);
    arr = alter_ok("alt", "[{\"name\":\"cleanup.policy\",\"op\":\"SUBTRACT\",\"value\":\"COMPACT\"}]");
    expect(arr, "cleanup.policy", "compact,delete", "TOPIC_CONFIG");
    json_decref(arr);
    arr = alter_ok("alt", "[{\"name\":\"cleanup.policy\",\"op\":\"SUBTRACT\",\"value\":\"compact , delete \"}]");
    expect(arr, "cleanup.policy", "", "TOPIC_CONFIG");
    json_decref(arr);
    arr = alter_ok("alt", "[{\"name\":\"cleanup.policy\",\"op\":\"APPEND\",\"value\":\"compact\"}]");
    expect(arr, "cleanup.policy", "compact", "TOPIC_CONFIG");
    json_decref(arr);

    /* several operations apply in one step */
    arr = alter_ok("alt", "[{\"name\":\"retention.ms\",\"op\":\"DELETE\"},"
                          "{\"name\":\"segment.bytes\",\"op\":\"SET\",\"value\":2097152},"
                          "{\"name\":\"cleanup.policy\",\"op\":\"DELETE\"},"
                          "{\"name\":\"flush.messages\",\"op\":\"SET\",\"value\":\"1\"}]");
    expect(arr, "retention.ms", "86400000", "STATIC_BROKER_CONFIG");
    expect(arr, "segment.bytes", "2097152", "TOPIC_CONFIG");
    expect(arr, "cleanup.policy", "delete", "DEFAULT_CONFIG");
    expect(arr, "flush.messages", "1", "TOPIC_CONFIG");
    json_decref(arr);
    /* APPEND on a default starts from the default */
    arr = alter_ok("alt", "[{\"name\":\"cleanup.policy\",\"op\":\"APPEND\",\"value\":\"compact\"},"
                          "{\"name\":\"retention.ms\",\"op\":\"SET\",\"value\":\"-1\"}]");
    expect(arr, "cleanup.policy", "delete,compact", "TOPIC_CONFIG");
    expect(arr, "retention.ms", "-1", "TOPIC_CONFIG");
    json_decref(arr);
    /* the listing answered by alter is what GET says */
    json_t *got = listing(S, "alt");
    expect(got, "cleanup.policy", "delete,compact", "TOPIC_CONFIG");
    expect(got, "flush.messages", "1", "TOPIC_CONFIG");
    json_decref(got);
}

/* Sends a refused alter; asserts status/code, details.key and
 * details.operation (when key is not NULL / op >= 0). */
static void alter_refused(const char *topic, const char *ops, long status, const char *code,
                          const char *key, int op)
{
    char path[256];
    snprintf(path, sizeof path, "/v1/topics/%s/configs:alter", topic);
    char *body = malloc(strlen(ops) + 32);
    assert_non_null(body);
    sprintf(body, "{\"operations\":%s}", ops);
    ls_resp r;
    send_expect("POST", path, body, status, code, &r);
    free(body);
    if (key)
        assert_string_equal(ls_jstr(&r, "details.key"), key);
    if (op >= 0)
        assert_int_equal(ls_jint(&r, "details.operation"), op);
    ls_resp_free(&r);
}

static void test_alter_refused_changes_nothing(void **state)
{
    (void)state;
    assert_int_equal(ls_create_topic(S, "atom", 1, "{\"retention.ms\":\"7000\"}"), 201);
    json_t *before = listing(S, "atom");
    char meta[400];
    snprintf(meta, sizeof meta, "%.255s/meta/atom.json", S->dir);
    size_t mlen0;
    char *meta0 = ls_read_file(meta, &mlen0);
    assert_non_null(meta0);

    /* good operations first, the bad one last: none of them may apply */
    alter_refused("atom",
                  "[{\"name\":\"retention.ms\",\"op\":\"SET\",\"value\":\"1234\"},"
                  "{\"name\":\"cleanup.policy\",\"op\":\"APPEND\",\"value\":\"compact\"},"
                  "{\"name\":\"segment.bytes\",\"op\":\"SET\",\"value\":\"12\"}]",
                  422, "invalid_config", "segment.bytes", 2);
    alter_refused("atom",
                  "[{\"name\":\"no.such.config\",\"op\":\"SET\",\"value\":\"1\"},"
                  "{\"name\":\"retention.ms\",\"op\":\"DELETE\"}]",
                  422, "invalid_config", "no.such.config", 0);
    alter_refused("atom",
                  "[{\"name\":\"segment.bytes\",\"op\":\"DELETE\"},"
                  "{\"name\":\"retention.ms\",\"op\":\"APPEND\",\"value\":\"5\"}]",
                  422, "invalid_config", "retention.ms", 1);
    alter_refused("atom",
                  "[{\"name\":\"cleanup.policy\",\"op\":\"APPEND\",\"value\":\"bogus\"}]",
                  422, "invalid_config", "cleanup.policy", 0);
    alter_refused("atom",
                  "[{\"name\":\"cleanup.policy\",\"op\":\"SET\",\"value\":\"delete,delete\"}]",
                  422, "invalid_config", "cleanup.policy", 0);
    alter_refused("atom",
                  "[{\"name\":\"segment.bytes\",\"op\":\"SET\",\"value\":\"2097152\"},"
                  "{\"name\":\"min.insync.replicas\",\"op\":\"SET\",\"value\":\"2\"}]",
                  422, "invalid_config", "min.insync.replicas", 1);
    /* each operation is fine alone; together they break a cross-check */
    alter_refused("atom",
                  "[{\"name\":\"max.compaction.lag.ms\",\"op\":\"SET\",\"value\":\"10\"},"
                  "{\"name\":\"min.compaction.lag.ms\",\"op\":\"SET\",\"value\":\"20\"}]",
                  422, "invalid_config", "min.compaction.lag.ms", -1);
    /* malformed operations: 400, naming the operation */
    alter_refused("atom",
                  "[{\"name\":\"retention.ms\",\"op\":\"SET\",\"value\":\"1\"},"
                  "{\"name\":\"segment.ms\",\"op\":\"MULTIPLY\",\"value\":\"2\"}]",
                  400, "invalid_request", NULL, 1);
    /* one config twice: Kafka's "duplicate config keys", whatever the ops */
    alter_refused("atom",
                  "[{\"name\":\"retention.ms\",\"op\":\"SET\",\"value\":\"1\"},"
                  "{\"name\":\"retention.ms\",\"op\":\"DELETE\"}]",
                  400, "invalid_request", "retention.ms", 1);
    alter_refused("atom", "[{\"name\":\"retention.ms\",\"op\":\"SET\"}]", 400, "invalid_request",
                  NULL, 0);
    alter_refused("atom", "[{\"name\":\"retention.ms\",\"op\":\"SET\",\"value\":\"1\"},{\"op\":\"SET\"}]",
                  400, "invalid_request", NULL, 1);
    /* a NUL ends the string for C, but the name or op sent is not the one
     * before it: "retention.ms\0x" is no config, "DELETE\0x" no operation */
    alter_refused("atom", "[{\"name\":\"retention.ms\\u0000x\",\"op\":\"SET\",\"value\":\"1\"}]",
                  400, "invalid_request", NULL, 0);
    alter_refused("atom",
                  "[{\"name\":\"segment.bytes\",\"op\":\"SET\",\"value\":\"2097152\"},"
                  "{\"name\":\"retention.ms\",\"op\":\"DELETE\\u0000x\"}]",
                  400, "invalid_request", NULL, 1);
    alter_refused("atom", "[]", 400, "invalid_request", NULL, -1);
    alter_refused("atom", "{}", 400, "invalid_request", NULL, -1);
    send_expect("POST", "/v1/topics/atom/configs:alter", "{\"ops\":[]}", 400, "invalid_request", NULL);

    json_t *after = listing(S, "atom");
    assert_true(json_equal(before, after));
    expect(after, "retention.ms", "7000", "TOPIC_CONFIG");
    size_t mlen1;
    char *meta1 = ls_read_file(meta, &mlen1);
    assert_non_null(meta1);
    assert_int_equal(mlen0, mlen1);
    assert_memory_equal(meta0, meta1, mlen0);
    free(meta0);
    free(meta1);
    json_decref(before);
    json_decref(after);
}

/* APPEND and SUBTRACT on a name that is no topic config say what it is, as
 * SET and DELETE do (Kafka: unknown config name), not that it is no list:
 * leader.replication.throttled.replicas is a list in Kafka. */
static void test_list_ops_name_unknown_and_inapplicable(void **state)
{
    (void)state;
    assert_int_equal(ls_create_topic(S, "listops", 1, NULL), 201);
    static const char *const cases[][3] = {
        {"no.such.config", "APPEND", "unknown topic config"},
        {"no.such.config", "SUBTRACT", "unknown topic config"},
        {"leader.replication.throttled.replicas", "APPEND", "no meaning on a single-node"},
        {"follower.replication.throttled.replicas", "SUBTRACT", "no meaning on a single-node"},
        {"min.insync.replicas", "APPEND", "no meaning on a single-node"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char body[256];
        snprintf(body, sizeof body,
                 "{\"operations\":[{\"name\":\"%s\",\"op\":\"%s\",\"value\":\"*\"}]}",
                 cases[i][0], cases[i][1]);
        ls_resp r;
        send_expect("POST", "/v1/topics/listops/configs:alter", body, 422, "invalid_config", &r);
        assert_string_equal(ls_jstr(&r, "details.key"), cases[i][0]);
        const char *msg = ls_jstr(&r, "message");
        if (!msg || !strstr(msg, cases[i][2]))
            fail_msg("%s %s: message \"%s\", want \"%s\"", cases[i][1], cases[i][0],
                     msg ? msg : "(none)", cases[i][2]);
        ls_resp_free(&r);
    }
}

static void test_unknown_topic(void **state)
{
    (void)state;
    send_expect("GET", "/v1/topics/nope/configs", NULL, 404, "unknown_topic", NULL);
    send_expect("PUT", "/v1/topics/nope/configs/retention.ms", "{\"value\":\"1\"}", 404,
                "unknown_topic", NULL);
    send_expect("DELETE", "/v1/topics/nope/configs/retention.ms", NULL, 404, "unknown_topic", NULL);
    send_expect("POST", "/v1/topics/nope/configs:alter",
                "{\"operations\":[{\"name\":\"retention.ms\",\"op\":\"SET\",\"value\":\"1\"}]}", 404,
                "unknown_topic", NULL);
    /* none of them created it */
    ls_resp r;
    assert_int_equal(ls_get(S, "/v1/topics/nope", &r), 0);
    CHECK_ERR(r, 404, "unknown_topic");
    ls_resp_free(&r);
    char meta[400];
    snprintf(meta, sizeof meta, "%.255s/meta/nope.json", S->dir);
    assert_int_equal(ls_file_size(meta), -1);
}

/* Concurrent changes to different configs of one topic: none may be lost. */
static const char *const RACE[8][2] = {
    {"segment.ms", "100000"}, {"retention.ms", "5000"}, {"retention.bytes", "1000000"},
    {"flush.messages", "5"}, {"delete.retention.ms", "1000"}, {"file.delete.delay.ms", "1000"},
    {"index.interval.bytes", "100"}, {"min.compaction.lag.ms", "5"}};

typedef struct race_job {
    const char *topic;
    size_t i; /* into RACE */
} race_job;

static void *put_thread(void *arg)
{
    const race_job *j = arg;
    char path[128], body[64];
    snprintf(path, sizeof path, "/v1/topics/%s/configs/%s", j->topic, RACE[j->i][0]);
    snprintf(body, sizeof body, "{\"value\":\"%s\"}", RACE[j->i][1]);
    ls_resp r;
    if (ls_send_json(S, "PUT", path, body, &r) == 0)
        ls_resp_free(&r);
    return NULL;
}

static void test_concurrent_changes_all_kept(void **state)
{
    (void)state;
    for (int round = 0; round < 4; round++) {
        char topic[32];
        race_job jobs[8];
        pthread_t th[8];
        snprintf(topic, sizeof topic, "race%d", round);
        assert_int_equal(ls_create_topic(S, topic, 1, NULL), 201);
        for (size_t i = 0; i < 8; i++) {
            jobs[i] = (race_job){topic, i};
            assert_int_equal(pthread_create(&th[i], NULL, put_thread, &jobs[i]), 0);
        }
        for (int i = 0; i < 8; i++)
            pthread_join(th[i], NULL);
        json_t *arr = listing(S, topic);
        for (int i = 0; i < 8; i++)
            expect(arr, RACE[i][0], RACE[i][1], "TOPIC_CONFIG");
        json_decref(arr);
    }
}

/* ---- restart ------------------------------------------------------------------ */

static void test_changes_survive_restart(void **state)
{
    (void)state;
    assert_int_equal(ls_create_topic(S, "keep", 1, NULL), 201);
    put_config("keep", "message.timestamp.type", "\"LogAppendTime\"");
    put_config("keep", "retention.bytes", "\"123456789\"");
    json_decref(alter_ok("keep", "[{\"name\":\"cleanup.policy\",\"op\":\"APPEND\",\"value\":\"compact\"},"
                                 "{\"name\":\"segment.bytes\",\"op\":\"SET\",\"value\":\"1048576\"}]"));
    json_decref(send_expect("DELETE", "/v1/topics/keep/configs/retention.bytes", NULL, 200, NULL, NULL));
    json_t *before = listing(S, "keep");
    json_t *rev = listing(S, "rev"); /* from an earlier test, when it ran */

    assert_int_equal(ls_stop(S), 0);
    assert_int_equal(ls_restart(S, GROUP_SETTINGS), 0);

    json_t *after = listing(S, "keep");
    assert_true(json_equal(before, after));
    expect(after, "cleanup.policy", "delete,compact", "TOPIC_CONFIG");
    expect(after, "segment.bytes", "1048576", "TOPIC_CONFIG");
    expect(after, "retention.bytes", "-1", "DEFAULT_CONFIG");
    expect(after, "retention.ms", "86400000", "STATIC_BROKER_CONFIG");
    json_t *rev2 = listing(S, "rev");
    assert_true(json_equal(rev, rev2));
    /* and still in force: LogAppendTime stamps the next append */
    ls_resp r;
    int64_t before_ms = now_ms();
    append_ts("keep", 1000, &r);
    assert_string_equal(ls_jstr(&r, "timestamp_type"), "LogAppendTime");
    assert_true(ls_jint(&r, "log_append_time") >= before_ms - 5);
    ls_resp_free(&r);
    json_decref(before);
    json_decref(after);
    json_decref(rev);
    json_decref(rev2);
}

/* A restart whose broker defaults now fail a topic's cross-check
 * (log.cleaner.max.compaction.lag.ms below the topic's
 * min.compaction.lag.ms) keeps the topic's overrides in force: it stays
 * compacted and is not handed to retention by the broker's defaults. */
static void test_overrides_kept_when_broker_defaults_clash(void **state)
{
    (void)state;
    assert_int_equal(ls_create_topic(S, "clash", 1,
                                     "{\"cleanup.policy\":\"compact\","
                                     "\"min.compaction.lag.ms\":\"1000\","
                                     "\"retention.ms\":\"-1\"}"),
                     201);
    ls_resp r;
    assert_int_equal(ls_send_json(S, "POST", "/v1/topics/clash/partitions/0/records",
                                  "{\"records\":[{\"key\":\"k\",\"value\":\"v\",\"timestamp\":1000}]}",
                                  &r),
                     0);
    assert_int_equal(r.status, 200);
    ls_resp_free(&r);
    assert_int_equal(ls_stop(S), 0);
    const char *const clash[] = {"log.retention.hours=24", "log.cleaner.max.compaction.lag.ms=500",
                                 NULL};
    assert_int_equal(ls_restart(S, clash), 0);

    /* in force: the cleaner sees a compacted partition ... */
    assert_int_equal(ls_get(S, "/v1/cleaner", &r), 0);
    assert_int_equal(r.status, 200);
    assert_non_null(ls_jfind(json_object_get(r.json, "partitions"), "topic", "clash"));
    ls_resp_free(&r);
    /* ... which retention leaves alone (the broker default would delete
     * the record of 1970 at once) */
    assert_int_equal(ls_send_json(S, "POST", "/v1/topics/clash/retention:run", "{\"dry_run\":true}",
                                  &r),
                     0);
    assert_int_equal(r.status, 200);
    assert_int_equal(ls_jint(&r, "segments_deleted"), 0);
    ls_resp_free(&r);
    json_t *arr = listing(S, "clash");
    expect(arr, "cleanup.policy", "compact", "TOPIC_CONFIG");
    expect(arr, "max.compaction.lag.ms", "500", "STATIC_BROKER_CONFIG");
    json_decref(arr);

    assert_int_equal(ls_stop(S), 0);
    assert_int_equal(ls_restart(S, GROUP_SETTINGS), 0);
}

/* An override in the metadata file that does not parse (written by hand, or
 * by an older logstore) is not in force: the broker's value applies.  The
 * listing said TOPIC_CONFIG with the bad text, and every later change was
 * refused naming it.  Now it is dropped at load: the listing shows the value
 * in force, a change to another config succeeds and rewrites the file
 * without it, and the overrides that parse stay.  A number there is taken
 * as the API takes one, and a name no version knows is logged (both were
 * skipped without a word). */
static void test_unparsable_stored_override_dropped(void **state)
{
    (void)state;
    assert_int_equal(ls_create_topic(S, "badmeta", 1,
                                     "{\"retention.ms\":\"5000\",\"segment.bytes\":\"2097152\"}"),
                     201);
    char meta[400];
    snprintf(meta, sizeof meta, "%.255s/meta/badmeta.json", S->dir);
    size_t len;
    char *text = ls_read_file(meta, &len);
    assert_non_null(text);
    char *at = strstr(text, "\"5000\"");
    assert_non_null(at);
    memcpy(at, "\"soon\"", 6); /* same length: "5000" -> "soon" */
    /* and by hand: a number where a string was, a name no version knows
     * (both were skipped without a word, the broker's value in force) */
    char *num = strstr(text, "\"2097152\"");
    char *cfgs = strstr(text, "\"configs\": {");
    assert_true(num && cfgs && cfgs < num);
    cfgs += strlen("\"configs\": {");
    size_t cap = len + 64;
    char *edited = malloc(cap);
    assert_non_null(edited);
    snprintf(edited, cap, "%.*s\"no.such.config\": \"1\",%.*s2097152%s", (int)(cfgs - text), text,
             (int)(num - cfgs), cfgs, num + strlen("\"2097152\""));
    free(text);
    assert_int_equal(ls_stop(S), 0);
    assert_int_equal(ls_write_file(meta, edited), 0);
    free(edited);
    assert_int_equal(ls_restart(S, GROUP_SETTINGS), 0);
    assert_true(ls_file_contains(S->log_path, "no.such.config"));

    json_t *arr = listing(S, "badmeta");
    expect(arr, "retention.ms", "86400000", "STATIC_BROKER_CONFIG");
    expect(arr, "segment.bytes", "2097152", "TOPIC_CONFIG");
    json_decref(arr);
    ls_resp r;
    assert_int_equal(ls_get(S, "/v1/topics/badmeta", &r), 0);
    assert_int_equal(r.status, 200);
    assert_null(json_object_get(json_object_get(r.json, "configs"), "retention.ms"));
    ls_resp_free(&r);
    put_config("badmeta", "preallocate", "true");
    assert_false(ls_file_contains(meta, "soon"));
    assert_true(ls_file_contains(meta, "2097152"));
}

/* SUBTRACT takes out every occurrence of an item, as Kafka's filter does:
 * from a list stored with a duplicate by an older logstore
 * ("compact,delete,compact"), subtracting compact left "delete,compact",
 * and the topic stayed compacted. */
static void test_subtract_removes_every_occurrence(void **state)
{
    (void)state;
    assert_int_equal(ls_create_topic(S, "dupes", 1, "{\"cleanup.policy\":\"compact,delete\"}"),
                     201);
    char meta[400];
    snprintf(meta, sizeof meta, "%.255s/meta/dupes.json", S->dir);
    size_t len;
    char *text = ls_read_file(meta, &len);
    assert_non_null(text);
    char *at = strstr(text, "\"compact,delete\"");
    assert_non_null(at);
    size_t cap = len + 16;
    char *edited = malloc(cap);
    assert_non_null(edited);
    snprintf(edited, cap, "%.*s\"compact,delete,compact\"%s", (int)(at - text), text,
             at + strlen("\"compact,delete\""));
    free(text);
    assert_int_equal(ls_stop(S), 0);
    assert_int_equal(ls_write_file(meta, edited), 0);
    free(edited);
    assert_int_equal(ls_restart(S, GROUP_SETTINGS), 0);

    json_t *arr = listing(S, "dupes");
    expect(arr, "cleanup.policy", "compact,delete,compact", "TOPIC_CONFIG");
    json_decref(arr);
    arr = alter_ok("dupes", "[{\"name\":\"cleanup.policy\",\"op\":\"SUBTRACT\",\"value\":\"compact\"}]");
    expect(arr, "cleanup.policy", "delete", "TOPIC_CONFIG");
    json_decref(arr);
    /* no longer compacted: a record without a key is taken */
    assert_int_equal(ls_append_json(S, "dupes", 0, "{\"records\":[{\"value\":\"v\"}]}"), 200);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_listing_every_config),
        cmocka_unit_test(test_listing_synonyms_as_kafka),
        cmocka_unit_test(test_put_segment_bytes_rolls_without_restart),
        cmocka_unit_test(test_put_timestamp_type_changes_new_appends),
        cmocka_unit_test(test_put_and_delete_revert),
        cmocka_unit_test(test_alter_operations),
        cmocka_unit_test(test_alter_refused_changes_nothing),
        cmocka_unit_test(test_list_ops_name_unknown_and_inapplicable),
        cmocka_unit_test(test_unknown_topic),
        cmocka_unit_test(test_concurrent_changes_all_kept),
        cmocka_unit_test(test_changes_survive_restart),
        cmocka_unit_test(test_overrides_kept_when_broker_defaults_clash),
        cmocka_unit_test(test_unparsable_stored_override_dropped),
        cmocka_unit_test(test_subtract_removes_every_occurrence),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
