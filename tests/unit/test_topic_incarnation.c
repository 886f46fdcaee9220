/*
 * test_topic_incarnation.c - a request acts on one incarnation of a topic.
 * A topic deleted and created again under the same name between two steps
 * of a request (a fault-point hook runs the delete and create at exactly
 * that step): a keyed append, a retention run and a topic description stay
 * on the topic they started with or answer that it was deleted, never split
 * or mix the two; a create, a partition increase or a config change
 * answers with the topic it changed, not 404 or the next topic of that name;
 * and a deleted topic's segments use no path that may by then name the new
 * topic's files; a flush of a partition whose topic is deleted under it
 * does not take the log dir offline.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "api_ctx.h"
#include "api_request.h"
#include "api_router.h"
#include "eng_compact.h"
#include "eng_error.h"
#include "eng_fault.h"
#include "eng_fs.h"
#include "eng_index.h"
#include "eng_manager.h"
#include "eng_partition.h"
#include "eng_retention.h"
#include "eng_segment.h"
#include "support.h"

#include <jansson.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define T0 1700000000000LL

static eng_manager *open_mgr(const char *dir)
{
    eng_manager_opts o = {.log_dir = dir, .codec = ts_line_codec()};
    eng_config_defaults_init(&o.defaults);
    eng_manager *m = NULL;
    eng_errdetail err = {0};
    if (eng_manager_open(&o, &m, &err))
        fail_msg("eng_manager_open: %s", err.message);
    return m;
}

typedef struct recreate {
    eng_manager *m;
    const char *name;
    int32_t partitions;
    int records; /* appended to partition 0 of the new topic, stamped T0 */
    int rc;      /* of the delete, the create, then the append */
} recreate;

/* Appends n records stamped T0 (years ago: past any retention.ms). */
static int append_old(eng_manager *m, const char *name, int n)
{
    eng_partition *p;
    int rc = eng_manager_partition(m, name, 0, &p, NULL);
    if (rc)
        return rc;
    uint8_t buf[TS_BATCH_MAX_RECS * (TS_VALUE_MAX + 64)];
    eng_append_opts o = {.expected_offset = -1, .producer_batches = true};
    eng_append_result res;
    size_t len = ts_build_batch(buf, sizeof buf, 0, n, T0, 20);
    rc = eng_partition_append(p, buf, len, &o, &res, NULL);
    eng_partition_unref(p);
    return rc;
}

/* A hook (eng_fault_hook): the topic is deleted and created again right
 * there, once, on the request's own thread. */
static void recreate_topic(void *arg)
{
    recreate *r = arg;
    eng_fault_hook(NULL, NULL, NULL);
    r->rc = eng_manager_delete_topic(r->m, r->name, NULL);
    if (!r->rc)
        r->rc = eng_manager_create_topic(r->m, r->name, r->partitions, NULL, NULL, 0, NULL);
    if (!r->rc && r->records)
        r->rc = append_old(r->m, r->name, r->records);
}

/* Runs one request in process; the caller clears *resp. */
static void run_api(api_ctx *ctx, const char *method, const char *path, const char *body,
                    api_response *resp)
{
    static const api_kv json_ct[] = {{"Content-Type", "application/json"}};
    api_request req = {.method = method, .path = path, .headers = json_ct, .nheaders = 1,
                       .body = (const uint8_t *)body, .body_len = body ? strlen(body) : 0};
    snprintf(req.request_id, sizeof req.request_id, "t1");
    memset(resp, 0, sizeof *resp);
    api_dispatch(ctx, &req, resp);
}

static json_t *resp_body(const api_response *resp)
{
    return resp->json ? json_incref(resp->json) : json_loadb(resp->raw, resp->raw_len, 0, NULL);
}

static int64_t total_end_offsets(eng_manager *m, const char *name)
{
    eng_topic_desc d;
    assert_int_equal(eng_manager_describe_topic(m, name, &d), 0);
    int64_t sum = 0;
    for (int32_t i = 0; i < d.meta.partitions; i++) {
        eng_partition *p;
        assert_int_equal(eng_manager_partition(m, name, i, &p, NULL), 0);
        sum += eng_partition_log_end_offset(p);
        eng_partition_unref(p);
    }
    eng_topic_desc_clear(&d);
    return sum;
}

/* A keyed append whose topic is deleted and created again after it read
 * the topic: it fails as the deleted topic's request (404), and the new
 * topic gets none of its records.  (It used to look each partition up by
 * name again, so they landed in the new topic, hashed with the old
 * partition count.) */
static void test_keyed_append_stays_on_its_topic(void **state)
{
    (void)state;
    char *tmp = ts_tmpdir();
    char data[600];
    snprintf(data, sizeof data, "%s/data", tmp);
    eng_manager *m = open_mgr(data);
    assert_int_equal(eng_manager_create_topic(m, "kt", 2, NULL, NULL, 0, NULL), 0);
    api_ctx ctx;
    api_ctx_init(&ctx, "test");
    atomic_store(&ctx.mgr, m);
    atomic_store(&ctx.state, API_READY);
    const char *body = "{\"records\":[{\"key\":\"a\",\"value\":\"1\"},{\"key\":\"b\","
                       "\"value\":\"2\"},{\"key\":\"c\",\"value\":\"3\"},{\"key\":\"d\","
                       "\"value\":\"4\"},{\"value\":\"5\"}]}";

    recreate r = {.m = m, .name = "kt", .partitions = 3, .rc = -1};
    eng_fault_hook("append_keyed.topic_read", recreate_topic, &r);
    api_response resp;
    run_api(&ctx, "POST", "/v1/topics/kt/records", body, &resp);
    eng_fault_hook(NULL, NULL, NULL);
    assert_int_equal(r.rc, 0);
    json_t *o = resp_body(&resp);
    assert_non_null(o);
    if (resp.status != 404)
        fail_msg("answered %d: %s", resp.status, json_dumps(o, JSON_COMPACT));
    assert_string_equal(json_string_value(json_object_get(o, "error_code")), "unknown_topic");
    json_decref(o);
    api_response_clear(&resp);
    assert_int_equal(total_end_offsets(m, "kt"), 0);

    /* The new topic takes the same request, all of it. */
    run_api(&ctx, "POST", "/v1/topics/kt/records", body, &resp);
    assert_int_equal(resp.status, 200);
    api_response_clear(&resp);
    assert_int_equal(total_end_offsets(m, "kt"), 5);
    eng_manager_close(m);
    ts_rmtree(tmp);
    free(tmp);
}

static eng_manager *api_setup(api_ctx *ctx, char **tmp)
{
    *tmp = ts_tmpdir();
    char data[600];
    snprintf(data, sizeof data, "%s/data", *tmp);
    eng_manager *m = open_mgr(data);
    api_ctx_init(ctx, "test");
    atomic_store(&ctx->mgr, m);
    atomic_store(&ctx->state, API_READY);
    return m;
}

/* retention:run of a topic deleted and created again after the run read
 * it: the run covers the deleted topic's partitions (gone: nothing to do),
 * never the new topic's, whose records stay.  (Its partitions were looked
 * up by name one by one, and the new topic's old records went.) */
static void test_retention_run_stays_on_its_topic(void **state)
{
    (void)state;
    api_ctx ctx;
    char *tmp;
    eng_manager *m = api_setup(&ctx, &tmp);
    assert_int_equal(eng_manager_create_topic(m, "rt", 1, NULL, NULL, 0, NULL), 0);
    recreate r = {.m = m, .name = "rt", .partitions = 1, .records = 4, .rc = -1};
    eng_fault_hook("maintenance.topic_read", recreate_topic, &r);
    api_response resp;
    run_api(&ctx, "POST", "/v1/topics/rt/retention:run", NULL, &resp);
    eng_fault_hook(NULL, NULL, NULL);
    assert_int_equal(r.rc, 0);
    assert_int_equal(resp.status, 200);
    api_response_clear(&resp);
    eng_partition *p;
    assert_int_equal(eng_manager_partition(m, "rt", 0, &p, NULL), 0);
    assert_int_equal(eng_partition_log_start_offset(p), 0);
    assert_int_equal(eng_partition_log_end_offset(p), 4);
    eng_partition_unref(p);
    /* A run that starts on the new topic deletes them, as it should. */
    run_api(&ctx, "POST", "/v1/topics/rt/retention:run", NULL, &resp);
    assert_int_equal(resp.status, 200);
    api_response_clear(&resp);
    assert_int_equal(eng_manager_partition(m, "rt", 0, &p, NULL), 0);
    assert_int_equal(eng_partition_log_start_offset(p), 4);
    eng_partition_unref(p);
    eng_manager_close(m);
    ts_rmtree(tmp);
    free(tmp);
}

/* A topic's description deleted and created again while it is built
 * describes one topic: its id with its own partitions' offsets. */
static void test_describe_stays_on_its_topic(void **state)
{
    (void)state;
    api_ctx ctx;
    char *tmp;
    eng_manager *m = api_setup(&ctx, &tmp);
    assert_int_equal(eng_manager_create_topic(m, "dt", 1, NULL, NULL, 0, NULL), 0);
    assert_int_equal(append_old(m, "dt", 3), 0);
    eng_topic_desc before;
    assert_int_equal(eng_manager_describe_topic(m, "dt", &before), 0);
    recreate r = {.m = m, .name = "dt", .partitions = 1, .rc = -1};
    eng_fault_hook("describe.topic_read", recreate_topic, &r);
    api_response resp;
    run_api(&ctx, "GET", "/v1/topics/dt", NULL, &resp);
    eng_fault_hook(NULL, NULL, NULL);
    assert_int_equal(r.rc, 0);
    assert_int_equal(resp.status, 200);
    json_t *o = resp_body(&resp);
    assert_non_null(o);
    assert_string_equal(json_string_value(json_object_get(o, "topic_id")), before.meta.topic_id);
    json_t *p0 = json_array_get(json_object_get(o, "partitions"), 0);
    assert_int_equal(json_integer_value(json_object_get(p0, "high_watermark")), 3);
    json_decref(o);
    api_response_clear(&resp);
    eng_topic_desc_clear(&before);
    eng_manager_close(m);
    ts_rmtree(tmp);
    free(tmp);
}

/* Appends `batches` batches of 2 records to partition 0 of name, then
 * rolls, so segment 0 is inactive. */
static void fill_and_roll(eng_manager *m, const char *name, int batches)
{
    eng_partition *p;
    assert_int_equal(eng_manager_partition(m, name, 0, &p, NULL), 0);
    uint8_t buf[TS_BATCH_MAX_RECS * (TS_VALUE_MAX + 64)];
    for (int b = 0; b < batches; b++) {
        eng_append_opts o = {.expected_offset = -1, .producer_batches = true};
        eng_append_result res;
        size_t len = ts_build_batch(buf, sizeof buf, 2 * b, 2, T0, 100);
        assert_int_equal(eng_partition_append(p, buf, len, &o, &res, NULL), 0);
    }
    int64_t base;
    assert_int_equal(eng_partition_roll(p, &base), 0);
    eng_partition_unref(p);
}

/* A request that holds a partition, or one of its segments, across a
 * delete and create of the topic's name names no file by path afterwards:
 * the path names the new topic's files by then.  The segment listing and
 * lookup answer as the deleted topic's (unknown topic); a held segment
 * answers from what it has open; its unlink (a delete-file job's) leaves
 * the new topic's files alone; and an index not yet mapped is refused,
 * never opened from the new topic's file.  (The old partition listed its
 * segments after the delete, and its segment's unlink removed the new
 * topic's segment.) */
static void test_retired_partition_opens_nothing_by_path(void **state)
{
    (void)state;
    char *tmp = ts_tmpdir();
    char data[600];
    snprintf(data, sizeof data, "%s/data", tmp);
    const char *keys[] = {"index.interval.bytes"}, *vals[] = {"1"};
    eng_manager *m = open_mgr(data);
    assert_int_equal(eng_manager_create_topic(m, "lz", 1, keys, vals, 1, NULL), 0);
    fill_and_roll(m, "lz", 1); /* one batch: no index entry */
    eng_partition *old;
    eng_segment *seg;
    assert_int_equal(eng_manager_partition(m, "lz", 0, &old, NULL), 0);
    assert_int_equal(eng_partition_segment(old, 0, &seg), 0);

    assert_int_equal(eng_manager_delete_topic(m, "lz", NULL), 0);
    assert_int_equal(eng_manager_create_topic(m, "lz", 1, keys, vals, 1, NULL), 0);
    fill_and_roll(m, "lz", 5); /* five batches: four index entries */

    eng_segment_info *si = NULL;
    size_t n = 0;
    int rc = eng_partition_segments(old, &si, &n);
    if (rc == 0)
        free(si);
    assert_int_equal(rc, ENG_ENOTOPIC);
    eng_segment *again;
    assert_int_equal(eng_partition_segment(old, 0, &again), ENG_ENOTOPIC);
    /* What the held segment has open answers for itself. */
    eng_index *oi = NULL;
    assert_int_equal(eng_segment_indexes(seg, &oi, NULL), 0);
    assert_int_equal(eng_index_entries(oi), 0);
    assert_int_equal(eng_segment_next_offset(seg), 2);
    assert_int_equal(eng_segment_unlink(seg), 0);
    char path[700];
    snprintf(path, sizeof path, "%s/lz-0/00000000000000000000.log", data);
    assert_true(ts_file_size(path) > 0);
    snprintf(path, sizeof path, "%s/lz-0/00000000000000000000.index", data);
    assert_int_equal(ts_file_size(path), 4 * 8);
    eng_segment_unref(seg);
    eng_partition_unref(old);

    /* An index mapped lazily (a segment opened inactive) after its gate is
     * revoked: refused, not opened from whatever the path names now. */
    eng_segment_gate *gate;
    assert_int_equal(eng_segment_gate_new(&gate), 0);
    eng_segment_opts so = {.index_max_bytes = 1 << 20, .index_interval = 1, .gate = gate};
    snprintf(path, sizeof path, "%s/lz-0", data);
    assert_int_equal(eng_segment_open(path, 0, &so, false, &seg), 0);
    eng_segment_gate_revoke(gate);
    eng_segment_gate_unref(gate); /* the segment holds its own reference */
    assert_int_equal(eng_segment_indexes(seg, &oi, NULL), ENG_ENOTOPIC);
    assert_int_equal(eng_segment_next_offset(seg), 10); /* from its open .log */
    eng_segment_unref(seg);

    /* The new topic's segment 0 is whole. */
    eng_partition *p;
    assert_int_equal(eng_manager_partition(m, "lz", 0, &p, NULL), 0);
    assert_int_equal(eng_partition_segments(p, &si, &n), 0);
    assert_int_equal(si[0].index_entries, 4);
    assert_int_equal(si[0].record_count, 10);
    free(si);
    eng_fetch ft;
    assert_int_equal(eng_partition_read(p, 4, 1 << 20, &ft, NULL), 0);
    assert_true(ft.len > 0);
    eng_fetch_free(&ft);
    eng_partition_unref(p);
    eng_manager_close(m);
    ts_rmtree(tmp);
    free(tmp);
}

/* Runs method path body with the topic deleted and created again (one
 * partition, no overrides) at fault point `at`, after the change was made
 * and before it is answered; returns the answer's body (a new reference),
 * asserted to be status. */
static json_t *change_then_recreate(api_ctx *ctx, eng_manager *m, const char *at,
                                    const char *method, const char *path, const char *body,
                                    int status)
{
    recreate r = {.m = m, .name = "ct", .partitions = 1, .rc = -1};
    eng_fault_hook(at, recreate_topic, &r);
    api_response resp;
    run_api(ctx, method, path, body, &resp);
    eng_fault_hook(NULL, NULL, NULL);
    assert_int_equal(r.rc, 0);
    json_t *o = resp_body(&resp);
    assert_non_null(o);
    if (resp.status != status)
        fail_msg("%s %s answered %d: %s", method, path, resp.status, json_dumps(o, JSON_COMPACT));
    api_response_clear(&resp);
    return o;
}

/* The topic id the name has now. */
static void current_id(eng_manager *m, char id[32])
{
    eng_topic_desc d;
    assert_int_equal(eng_manager_describe_topic(m, "ct", &d), 0);
    snprintf(id, 32, "%s", d.meta.topic_id);
    eng_topic_desc_clear(&d);
}

/* A create, a partition increase and a config change that succeed answer
 * with the topic they changed, even when it is deleted (and created again)
 * before the answer is built: they described it afterwards, by name, and
 * answered 404 for a change that was made, or the next topic's state. */
static void test_changes_answer_their_own_topic(void **state)
{
    (void)state;
    api_ctx ctx;
    char *tmp;
    eng_manager *m = api_setup(&ctx, &tmp);
    char now[32];

    json_t *o = change_then_recreate(&ctx, m, "create.answer", "POST", "/v1/topics",
                                     "{\"name\":\"ct\",\"partitions\":2,"
                                     "\"configs\":{\"retention.ms\":\"5000\"}}",
                                     201);
    current_id(m, now);
    assert_string_not_equal(json_string_value(json_object_get(o, "topic_id")), now);
    assert_int_equal(json_integer_value(json_object_get(o, "partition_count")), 2);
    assert_int_equal(json_array_size(json_object_get(o, "partitions")), 2);
    assert_string_equal(json_string_value(json_object_get(json_object_get(o, "configs"),
                                                          "retention.ms")),
                        "5000");
    json_decref(o);

    o = change_then_recreate(&ctx, m, "grow.answer", "PATCH", "/v1/topics/ct",
                             "{\"partitions\":3}", 200);
    current_id(m, now);
    assert_string_not_equal(json_string_value(json_object_get(o, "topic_id")), now);
    assert_int_equal(json_integer_value(json_object_get(o, "partition_count")), 3);
    assert_int_equal(json_array_size(json_object_get(o, "partitions")), 3);
    json_decref(o);

    o = change_then_recreate(&ctx, m, "configs.answer", "PUT", "/v1/topics/ct/configs/segment.ms",
                             "{\"value\":\"60000\"}", 200);
    json_t *e = NULL;
    size_t i;
    json_array_foreach(json_object_get(o, "configs"), i, e)
        if (!strcmp(json_string_value(json_object_get(e, "name")), "segment.ms"))
            break;
    assert_non_null(e);
    assert_string_equal(json_string_value(json_object_get(e, "value")), "60000");
    assert_string_equal(json_string_value(json_object_get(e, "source")), "TOPIC_CONFIG");
    json_decref(o);
    eng_manager_close(m);
    ts_rmtree(tmp);
    free(tmp);
}

typedef struct deleter {
    eng_manager *m;
    const char *name;
    int rc; /* of the delete; 1 until the hook ran */
} deleter;

static void delete_topic_hook(void *arg)
{
    deleter *d = arg;
    eng_fault_hook(NULL, NULL, NULL);
    d->rc = eng_manager_delete_topic(d->m, d->name, NULL);
}

/* A flush syncing a roll's producer snapshot while its topic is deleted:
 * the delete moves the partition's directory, and the flush's sync of it
 * failed there (ENOENT), which a flush takes for a writeback error: the
 * whole log dir went offline, every partition of every topic answering 503
 * until a restart.  A deleted topic's files need no durability. */
static void test_flush_of_deleted_topic_keeps_dir_online(void **state)
{
    (void)state;
    char *tmp = ts_tmpdir();
    char data[600];
    snprintf(data, sizeof data, "%s/data", tmp);
    eng_manager *m = open_mgr(data);
    assert_int_equal(eng_manager_create_topic(m, "ft", 1, NULL, NULL, 0, NULL), 0);
    assert_int_equal(eng_manager_create_topic(m, "other", 1, NULL, NULL, 0, NULL), 0);
    assert_int_equal(append_old(m, "ft", 3), 0);
    eng_partition *p;
    assert_int_equal(eng_manager_partition(m, "ft", 0, &p, NULL), 0);
    int64_t base;
    assert_int_equal(eng_partition_roll(p, &base), 0); /* its producer snapshot, unsynced */

    deleter d = {.m = m, .name = "ft", .rc = 1};
    eng_fault_hook("snapshot.sync", delete_topic_hook, &d);
    int rc = eng_partition_flush(p);
    eng_fault_hook(NULL, NULL, NULL);
    assert_int_equal(d.rc, 0); /* deleted mid-flush */
    assert_int_equal(rc, 0);
    assert_false(eng_manager_offline(m));
    assert_int_equal(append_old(m, "other", 2), 0);
    eng_partition_unref(p);
    assert_true(eng_manager_close(m));
    ts_rmtree(tmp);
    free(tmp);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_keyed_append_stays_on_its_topic),
        cmocka_unit_test(test_retention_run_stays_on_its_topic),
        cmocka_unit_test(test_describe_stays_on_its_topic),
        cmocka_unit_test(test_changes_answer_their_own_topic),
        cmocka_unit_test(test_retired_partition_opens_nothing_by_path),
        cmocka_unit_test(test_flush_of_deleted_topic_keeps_dir_online),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
