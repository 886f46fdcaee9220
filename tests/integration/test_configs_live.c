/*
 * test_configs_live.c - topic configs changed on a live topic that holds
 * data take effect where Kafka's do, against the real server binary:
 *
 *   - what Kafka fixes when a segment is created (index.interval.bytes,
 *     segment.index.bytes) leaves the active segment as it is and applies
 *     from the next one;
 *   - segment.ms rolls at the next append whose record time passes it;
 *   - message.timestamp.after.max.ms, max.message.bytes, cleanup.policy and
 *     compression.type judge or shape the next append only: what is stored
 *     stays as it was and stays readable, and deleting the override brings
 *     the default back.
 *
 * One server serves the group.  (Listing, PUT/DELETE/alter and restarts:
 * test_configs_api.c.)
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
#include <time.h>

static long long now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* PUT (value_json not NULL) or DELETE one config; asserts 200. */
static void set_config(const char *topic, const char *name, const char *value_json)
{
    char path[256], body[256];
    snprintf(path, sizeof path, "/v1/topics/%s/configs/%s", topic, name);
    snprintf(body, sizeof body, "{\"value\":%s}", value_json ? value_json : "null");
    ls_resp r;
    assert_int_equal(ls_send_json(S, value_json ? "PUT" : "DELETE", path,
                                  value_json ? body : NULL, &r),
                     0);
    if (r.status != 200)
        fprintf(stderr, "# %s %s: %ld %s\n", value_json ? "PUT" : "DELETE", path, r.status, r.body);
    assert_int_equal(r.status, 200);
    ls_resp_free(&r);
}

/* Appends one record (key may be NULL) stamped ts; returns the status, and
 * asserts the error code of a refusal (code not NULL). */
static long append_one(const char *topic, const char *key, const char *value, long long ts,
                       const char *code)
{
    char path[256], body[1024];
    snprintf(path, sizeof path, "/v1/topics/%s/partitions/0/records", topic);
    char keyj[80] = "null";
    if (key)
        snprintf(keyj, sizeof keyj, "\"%s\"", key);
    snprintf(body, sizeof body, "{\"records\":[{\"key\":%s,\"value\":\"%s\",\"timestamp\":%lld}]}",
             keyj, value, ts);
    ls_resp r;
    assert_int_equal(ls_send_json(S, "POST", path, body, &r), 0);
    long status = r.status;
    if (code)
        CHECK_ERR(r, status, code);
    ls_resp_free(&r);
    return status;
}

/* GET of one segment's index or batch dump (a new reference to its body). */
static json_t *segment_dump(const char *topic, long long base, const char *what)
{
    char path[256];
    snprintf(path, sizeof path, "/v1/topics/%s/partitions/0/segments/%lld/%s", topic, base, what);
    ls_resp r;
    assert_int_equal(ls_get(S, path, &r), 0);
    assert_int_equal(r.status, 200);
    json_t *o = json_incref(r.json);
    ls_resp_free(&r);
    return o;
}

static long long jint(json_t *o, const char *key)
{
    return (long long)json_integer_value(json_object_get(o, key));
}

static long long roll(const char *topic)
{
    char path[256];
    snprintf(path, sizeof path, "/v1/topics/%s/partitions/0/segments:roll", topic);
    ls_resp r;
    assert_int_equal(ls_post(S, path, "{}", &r), 0);
    assert_int_equal(r.status, 200);
    long long base = ls_jint(&r, "active_segment_base_offset");
    ls_resp_free(&r);
    return base;
}

static void test_per_segment_configs_from_next_segment(void **state)
{
    (void)state;
    assert_int_equal(ls_create_topic(S, "perseg", 1, NULL), 201);
    long long t = now_ms();
    assert_int_equal(append_one("perseg", NULL, "a", t, NULL), 200);
    set_config("perseg", "index.interval.bytes", "\"0\"");
    set_config("perseg", "segment.index.bytes", "\"4096\"");
    for (int i = 0; i < 3; i++)
        assert_int_equal(append_one("perseg", NULL, "b", t, NULL), 200);
    /* the active segment keeps what it was created with */
    json_t *idx = segment_dump("perseg", 0, "index");
    assert_int_equal(jint(idx, "entry_count"), 0);
    assert_int_equal(jint(idx, "max_entries"), 10485760 / 8);
    json_decref(idx);
    /* the next one follows the topic */
    long long base = roll("perseg");
    assert_int_equal(base, 4);
    for (int i = 0; i < 3; i++)
        assert_int_equal(append_one("perseg", NULL, "c", t, NULL), 200);
    /* as Kafka's LogSegment.append: a batch gets an entry once more than
     * index.interval.bytes were appended before it since the last entry,
     * so with 0 every batch but the segment's first */
    idx = segment_dump("perseg", base, "index");
    assert_int_equal(jint(idx, "entry_count"), 2);
    assert_int_equal(jint(idx, "max_entries"), 4096 / 8);
    json_decref(idx);
}

static void test_segment_ms_rolls_at_next_append(void **state)
{
    (void)state;
    assert_int_equal(ls_create_topic(S, "segms", 1, NULL), 201);
    long long t = now_ms();
    assert_int_equal(append_one("segms", NULL, "a", t, NULL), 200);
    assert_int_equal(append_one("segms", NULL, "b", t + 5000, NULL), 200);
    assert_int_equal(ls_partition_field(S, "segms", 0, "segment_count"), 1);
    set_config("segms", "segment.ms", "\"1000\"");
    /* the active segment's records already span 5 s: the next append rolls */
    assert_int_equal(append_one("segms", NULL, "c", t + 5000, NULL), 200);
    assert_int_equal(ls_partition_field(S, "segms", 0, "segment_count"), 2);
    assert_int_equal(ls_partition_field(S, "segms", 0, "active_segment_base_offset"), 2);
}

static void test_append_rules_follow_changes(void **state)
{
    (void)state;
    assert_int_equal(ls_create_topic(S, "rules", 1, NULL), 201);
    long long t = now_ms();
    /* an hour ahead: taken by default */
    assert_int_equal(append_one("rules", NULL, "future", t + 3600000, NULL), 200);
    set_config("rules", "message.timestamp.after.max.ms", "\"60000\"");
    assert_int_equal(append_one("rules", NULL, "future", t + 3600000, "invalid_timestamp"), 422);
    assert_int_equal(append_one("rules", NULL, "now", t, NULL), 200);
    set_config("rules", "message.timestamp.after.max.ms", NULL);
    assert_int_equal(append_one("rules", NULL, "future", t + 3600000, NULL), 200);

    set_config("rules", "max.message.bytes", "\"100\"");
    char big[201];
    memset(big, 'x', 200);
    big[200] = 0;
    assert_int_equal(append_one("rules", NULL, big, t, "record_too_large"), 413);
    set_config("rules", "max.message.bytes", NULL);
    assert_int_equal(append_one("rules", NULL, big, t, NULL), 200);

    set_config("rules", "cleanup.policy", "\"compact\"");
    assert_int_equal(append_one("rules", NULL, "nokey", t, "invalid_record"), 422);
    assert_int_equal(append_one("rules", "k", "keyed", t, NULL), 200);
    set_config("rules", "cleanup.policy", "\"delete\"");
    assert_int_equal(append_one("rules", NULL, "nokey", t, NULL), 200);

    set_config("rules", "compression.type", "\"gzip\"");
    assert_int_equal(append_one("rules", NULL, "zipped", t, NULL), 200);
    json_t *dump = segment_dump("rules", 0, "batches");
    json_t *batches = json_object_get(dump, "batches");
    size_t n = json_array_size(batches);
    assert_int_equal(n, 7);
    for (size_t i = 0; i < n; i++)
        assert_string_equal(json_string_value(json_object_get(json_array_get(batches, i),
                                                              "compression")),
                            i + 1 == n ? "gzip" : "none");
    json_decref(dump);
    /* everything stored before the changes is still read back */
    ls_resp r;
    assert_int_equal(ls_get(S, "/v1/topics/rules/partitions/0/records?offset=0", &r), 0);
    assert_int_equal(r.status, 200);
    json_t *recs = json_object_get(r.json, "records");
    assert_int_equal(json_array_size(recs), 7);
    assert_string_equal(json_string_value(json_object_get(json_array_get(recs, 0), "value")),
                        "future");
    assert_string_equal(json_string_value(json_object_get(json_array_get(recs, 6), "value")),
                        "zipped");
    ls_resp_free(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_per_segment_configs_from_next_segment),
        cmocka_unit_test(test_segment_ms_rolls_at_next_append),
        cmocka_unit_test(test_append_rules_follow_changes),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
