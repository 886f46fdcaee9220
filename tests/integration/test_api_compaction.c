/*
 * test_api_compaction.c - compaction over HTTP against the real server
 * (DESIGN §6 compaction endpoints, §3 compaction; kafka-format.md §6, §16).
 *
 * One server (log.cleaner.threads=1, log.cleaner.backoff.ms=600000 so the
 * background thread stays idle and every run here is on demand); tests build
 * on each other in order.  Covers:
 *   - POST /v1/topics/{t}/compaction:run with {"dry_run":true} (report:
 *     range first_dirty_offset/end_offset, first_uncleanable_offset, before
 *     and after segments and bytes, records_read/removed, tombstones,
 *     duration; nothing changes on disk, every record still reads) then for
 *     real (same figures; the textbook result 6:user1, 8:user3, 9:user2=null
 *     with the delete horizon in the batch dump);
 *   - ?partition= on a topic run and on POST /v1/admin/compaction:run (which
 *     skips non-compacted topics); unknown partition 404;
 *   - refusals: 422 not_compacted on a delete-policy topic, 404
 *     unknown_topic, 400 on a bad body;
 *   - a corrupt sealed segment: 422 corrupt_record, reported uncleanable;
 *   - GET /v1/cleaner: threads with state, last_runs (most recent first,
 *     outcome), partitions with dirty_ratio and the checkpoint, uncleanable;
 *   - the server log: one line when a cleaning starts (range, segments), one
 *     at the end (bytes before/after, MB/s);
 *   - a restart keeps the compacted data and cleaner-offset-checkpoint, and
 *     the next run starts from it.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "harness.h"

#include <fcntl.h>
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static ls_server g_srv;
static ls_server *S = &g_srv;

#define CHECK_ERR(r, st, code) assert_int_equal(ls_check_error(&(r), (st), (code)), 0)
#define DAY_MS 86400000LL

static const char *const settings[] = {"log.cleaner.threads=1", "log.cleaner.backoff.ms=600000",
                                       NULL};

static int group_setup(void **state)
{
    (void)state;
    if (ls_start(S, settings))
        return -1;
    if (ls_create_topic(S, "users", 1, "{\"cleanup.policy\":\"compact\"}") != 201 ||
        ls_create_topic(S, "multi", 2, "{\"cleanup.policy\":\"compact\"}") != 201 ||
        ls_create_topic(S, "plain", 1, NULL) != 201)
        return -1;
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    ls_stop(S);
    ls_cleanup(S);
    return 0;
}

static long long now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void post_ok(const char *path, const char *body, ls_resp *out)
{
    ls_resp local;
    ls_resp *r = out ? out : &local;
    assert_int_equal(ls_post(S, path, body, r), 0);
    if (r->status != 200)
        fprintf(stderr, "# POST %s: %ld %s\n", path, r->status, r->body);
    assert_int_equal(r->status, 200);
    if (!out)
        ls_resp_free(r);
}

static void roll(const char *topic, int p)
{
    char path[256];
    snprintf(path, sizeof path, "/v1/topics/%s/partitions/%d/segments:roll", topic, p);
    post_ok(path, "", NULL);
}

/* "offset:key=value ..." of every record from offset 0. */
static void records(const char *topic, int p, char *out, size_t cap)
{
    char path[256];
    snprintf(path, sizeof path, "/v1/topics/%s/partitions/%d/records?offset=0&max_records=1000",
             topic, p);
    ls_resp r;
    assert_int_equal(ls_get(S, path, &r), 0);
    assert_int_equal(r.status, 200);
    size_t i, n = 0;
    json_t *rec;
    out[0] = 0;
    json_array_foreach(ls_jget(&r, "records"), i, rec) {
        json_t *v = json_object_get(rec, "value");
        n += (size_t)snprintf(out + n, cap - n, "%s%lld:%s=%s", i ? " " : "",
                              (long long)json_integer_value(json_object_get(rec, "offset")),
                              json_string_value(json_object_get(rec, "key")),
                              json_is_null(v) ? "null" : json_string_value(v));
    }
    ls_resp_free(&r);
}

static long long jint(json_t *o, const char *path)
{
    char buf[128];
    snprintf(buf, sizeof buf, "%s", path);
    for (char *save = NULL, *k = strtok_r(buf, ".", &save); k && o; k = strtok_r(NULL, ".", &save))
        o = json_object_get(o, k);
    return json_is_integer(o) ? json_integer_value(o) : -999999;
}

static bool log_has(const char *needle)
{
    size_t len;
    char *text = ls_read_file(S->log_path, &len);
    bool hit = text && strstr(text, needle);
    free(text);
    return hit;
}

/* ---- tests -------------------------------------------------------------------- */

static const char *const textbook =
    "{\"records\":[{\"key\":\"user1\",\"value\":\"a1\"},{\"key\":\"user2\",\"value\":\"a2\"},"
    "{\"key\":\"user3\",\"value\":\"a3\"},{\"key\":\"user1\",\"value\":\"b1\"},"
    "{\"key\":\"user2\",\"value\":\"b2\"},{\"key\":\"user3\",\"value\":\"b3\"},"
    "{\"key\":\"user1\",\"value\":\"c1\"},{\"key\":\"user2\",\"value\":\"c2\"},"
    "{\"key\":\"user3\",\"value\":\"c3\"},{\"key\":\"user2\",\"value\":null}]}";

static void test_dry_run_then_run(void **state)
{
    (void)state;
    post_ok("/v1/topics/users/partitions/0/records", textbook, NULL);
    roll("users", 0);
    ls_resp r;
    assert_int_equal(ls_get(S, "/v1/topics/users/partitions/0/segments", &r), 0);
    long long seg_bytes = jint(json_array_get(ls_jget(&r, "segments"), 0), "size_bytes");
    ls_resp_free(&r);
    assert_true(seg_bytes > 61);

    char *before = ls_dir_listing(S->dir);
    post_ok("/v1/topics/users/compaction:run", "{\"dry_run\":true}", &r);
    assert_true(json_is_true(ls_jget(&r, "dry_run")));
    assert_int_equal(json_array_size(ls_jget(&r, "partitions")), 1);
    json_t *p = json_array_get(ls_jget(&r, "partitions"), 0);
    assert_string_equal(json_string_value(json_object_get(p, "topic")), "users");
    assert_int_equal(jint(p, "partition"), 0);
    json_t *st = json_object_get(p, "stats");
    assert_true(json_is_true(json_object_get(st, "dry_run")));
    assert_int_equal(jint(st, "range.first_dirty_offset"), 0);
    assert_int_equal(jint(st, "range.end_offset"), 10);
    assert_int_equal(jint(st, "first_uncleanable_offset"), 10);
    assert_int_equal(jint(st, "before.segments"), 1);
    assert_int_equal(jint(st, "before.bytes"), seg_bytes);
    assert_int_equal(jint(st, "after.segments"), 1);
    long long after_bytes = jint(st, "after.bytes");
    assert_true(after_bytes > 61 && after_bytes < seg_bytes);
    assert_int_equal(jint(st, "records_read"), 10);
    assert_int_equal(jint(st, "records_removed"), 7);
    assert_int_equal(jint(st, "tombstones_removed"), 0);
    assert_true(jint(st, "duration_ms") >= 0);
    ls_resp_free(&r);
    char *after = ls_dir_listing(S->dir);
    assert_string_equal(before, after); /* a dry run writes nothing */
    free(after);
    free(before);
    char got[1024];
    records("users", 0, got, sizeof got);
    assert_string_equal(got, "0:user1=a1 1:user2=a2 2:user3=a3 3:user1=b1 4:user2=b2 5:user3=b3 "
                             "6:user1=c1 7:user2=c2 8:user3=c3 9:user2=null");
    assert_true(log_has("users-0: cleaning offsets [0, 10) over 1 segments (dry run)"));
    assert_true(log_has("users-0: would clean 1 segments"));

    long long t0 = now_ms();
    post_ok("/v1/topics/users/compaction:run", "{\"dry_run\":false}", &r);
    long long t1 = now_ms();
    st = json_object_get(json_array_get(ls_jget(&r, "partitions"), 0), "stats");
    assert_true(json_is_false(json_object_get(st, "dry_run")));
    assert_int_equal(jint(st, "range.end_offset"), 10);
    assert_int_equal(jint(st, "records_removed"), 7);
    assert_int_equal(jint(st, "after.bytes"), after_bytes);
    ls_resp_free(&r);
    records("users", 0, got, sizeof got);
    assert_string_equal(got, "6:user1=c1 8:user3=c3 9:user2=null");
    /* One batch, offsets kept, the tombstone's delete horizon written. */
    assert_int_equal(ls_get(S, "/v1/topics/users/partitions/0/segments/0/batches", &r), 0);
    assert_int_equal(ls_jint(&r, "batch_count"), 1);
    assert_int_equal(ls_jint(&r, "batches.0.base_offset"), 0);
    assert_int_equal(ls_jint(&r, "batches.0.last_offset"), 9);
    assert_int_equal(ls_jint(&r, "batches.0.record_count"), 3);
    assert_int_equal(ls_jint(&r, "batches.0.size_bytes"), after_bytes);
    assert_true(json_is_true(ls_jget(&r, "batches.0.valid")));
    long long horizon = ls_jint(&r, "batches.0.delete_horizon_ms");
    assert_true(horizon >= t0 + DAY_MS - 1000 && horizon <= t1 + DAY_MS + 1000);
    ls_resp_free(&r);
    /* The log: a start line with the range and segments, an end line with
     * bytes before/after and the rate. */
    char line[256];
    snprintf(line, sizeof line, "users-0: cleaned 1 segments (%lld bytes) into 1 (%lld bytes): 7 records removed, 0 tombstones, ",
             seg_bytes, after_bytes);
    assert_true(log_has("users-0: cleaning offsets [0, 10) over 1 segments\n"));
    size_t len;
    char *text = ls_read_file(S->log_path, &len);
    char *end = strstr(text, line);
    assert_non_null(end);
    char *nl = strchr(end, '\n');
    assert_non_null(nl);
    assert_true(nl - end > 5 && !strncmp(nl - 5, " MB/s", 5));
    /* The rate is the log processed (the segment's bytes) over the clean. */
    char processed[64];
    snprintf(processed, sizeof processed, "tombstones, %.1f MB of log processed at ",
             (double)seg_bytes / 1e6);
    char *at = strstr(end, processed);
    assert_true(at && at < nl);
    free(text);
    /* Nothing dirty left: a run reports an empty range. */
    post_ok("/v1/topics/users/compaction:run", NULL, &r);
    st = json_object_get(json_array_get(ls_jget(&r, "partitions"), 0), "stats");
    assert_int_equal(jint(st, "range.first_dirty_offset"), 10);
    assert_int_equal(jint(st, "range.end_offset"), 10);
    assert_int_equal(jint(st, "before.segments"), 0);
    ls_resp_free(&r);
}

static void test_partition_param(void **state)
{
    (void)state;
    const char *body = "{\"records\":[{\"key\":\"a\",\"value\":\"1\"},{\"key\":\"a\",\"value\":\"2\"},"
                       "{\"key\":\"b\",\"value\":\"3\"},{\"key\":\"a\",\"value\":\"4\"}]}";
    post_ok("/v1/topics/multi/partitions/0/records", body, NULL);
    post_ok("/v1/topics/multi/partitions/1/records", body, NULL);
    roll("multi", 0);
    roll("multi", 1);
    ls_resp r;
    post_ok("/v1/topics/multi/compaction:run?partition=1", NULL, &r);
    assert_int_equal(json_array_size(ls_jget(&r, "partitions")), 1);
    assert_int_equal(ls_jint(&r, "partitions.0.partition"), 1);
    assert_int_equal(ls_jint(&r, "partitions.0.stats.records_removed"), 2);
    ls_resp_free(&r);
    char got[512];
    records("multi", 1, got, sizeof got);
    assert_string_equal(got, "2:b=3 3:a=4");
    records("multi", 0, got, sizeof got);
    assert_string_equal(got, "0:a=1 1:a=2 2:b=3 3:a=4");
    assert_int_equal(ls_post(S, "/v1/topics/multi/compaction:run?partition=5", NULL, &r), 0);
    CHECK_ERR(r, 404, "unknown_partition");
    ls_resp_free(&r);

    /* Admin, partition 0 of every compacted topic ("plain" is skipped), dry. */
    post_ok("/v1/admin/compaction:run?partition=0", "{\"dry_run\":true}", &r);
    assert_true(json_is_true(ls_jget(&r, "dry_run")));
    json_t *parts = ls_jget(&r, "partitions"), *o;
    size_t i;
    bool users = false, multi = false;
    json_array_foreach(parts, i, o) {
        const char *t = json_string_value(json_object_get(o, "topic"));
        assert_int_equal(jint(o, "partition"), 0);
        assert_true(strcmp(t, "plain") != 0);
        users |= !strcmp(t, "users");
        if (!strcmp(t, "multi")) {
            multi = true;
            assert_int_equal(jint(o, "stats.records_removed"), 2);
        }
    }
    assert_true(users && multi);
    ls_resp_free(&r);
    records("multi", 0, got, sizeof got);
    assert_string_equal(got, "0:a=1 1:a=2 2:b=3 3:a=4");
    /* For real, every partition. */
    post_ok("/v1/admin/compaction:run", NULL, &r);
    assert_int_equal(json_array_size(ls_jget(&r, "partitions")), 3);
    ls_resp_free(&r);
    records("multi", 0, got, sizeof got);
    assert_string_equal(got, "2:b=3 3:a=4");
}

static void test_refusals(void **state)
{
    (void)state;
    ls_resp r;
    assert_int_equal(ls_post(S, "/v1/topics/plain/compaction:run", NULL, &r), 0);
    CHECK_ERR(r, 422, "not_compacted");
    ls_resp_free(&r);
    assert_int_equal(ls_post(S, "/v1/topics/nope/compaction:run", NULL, &r), 0);
    CHECK_ERR(r, 404, "unknown_topic");
    ls_resp_free(&r);
    assert_int_equal(ls_post(S, "/v1/topics/users/compaction:run", "{\"dry_run\":\"yes\"}", &r), 0);
    CHECK_ERR(r, 400, "invalid_request");
    ls_resp_free(&r);
    assert_int_equal(ls_post(S, "/v1/topics/users/compaction:run", "{\"dry\":true}", &r), 0);
    CHECK_ERR(r, 400, "invalid_request");
    ls_resp_free(&r);
}

static void test_corrupt_segment_uncleanable(void **state)
{
    (void)state;
    assert_int_equal(ls_create_topic(S, "broken", 1, "{\"cleanup.policy\":\"compact\"}"), 201);
    for (int i = 0; i < 3; i++)
        post_ok("/v1/topics/broken/partitions/0/records",
                "{\"records\":[{\"key\":\"k\",\"value\":\"v\"},{\"key\":\"k\",\"value\":\"w\"}]}", NULL);
    roll("broken", 0);
    ls_resp r;
    assert_int_equal(ls_get(S, "/v1/topics/broken/partitions/0/segments/0/batches", &r), 0);
    long long pos = ls_jint(&r, "batches.1.position") + 61;
    ls_resp_free(&r);
    char path[512];
    snprintf(path, sizeof path, "%.400s/broken-0/00000000000000000000.log", S->dir);
    int fd = open(path, O_RDWR);
    assert_true(fd >= 0);
    unsigned char minus_one = 0x01; /* the record length varint: -1 */
    assert_int_equal(pwrite(fd, &minus_one, 1, (off_t)pos), 1);
    close(fd);
    assert_int_equal(ls_post(S, "/v1/topics/broken/compaction:run", NULL, &r), 0);
    CHECK_ERR(r, 422, "corrupt_record");
    ls_resp_free(&r);
    assert_true(log_has("broken-0: marked uncleanable"));
}

static void test_cleaner_status(void **state)
{
    (void)state;
    ls_resp r;
    assert_int_equal(ls_get(S, "/v1/cleaner", &r), 0);
    assert_int_equal(r.status, 200);
    assert_true(json_is_true(ls_jget(&r, "enabled")));
    assert_int_equal(ls_jint(&r, "threads_count"), 1);
    assert_true(ls_jint(&r, "dedupe_buffer_bytes_per_thread") > 0);
    assert_int_equal(json_array_size(ls_jget(&r, "threads")), 1);
    assert_int_equal(ls_jint(&r, "threads.0.id"), 0);
    assert_string_equal(ls_jstr(&r, "threads.0.state"), "idle");
    /* Most recent first: the failed run of broken-0. */
    assert_true(json_array_size(ls_jget(&r, "last_runs")) >= 6);
    assert_string_equal(ls_jstr(&r, "last_runs.0.topic"), "broken");
    assert_string_equal(ls_jstr(&r, "last_runs.0.outcome"), "corrupt_record");
    assert_true(json_is_true(ls_jget(&r, "last_runs.0.on_demand")));
    assert_string_equal(ls_jstr(&r, "last_runs.1.outcome"), "ok");
    assert_non_null(ls_jget(&r, "last_runs.1.stats.range.end_offset"));
    assert_int_equal(json_array_size(ls_jget(&r, "uncleanable")), 1);
    assert_string_equal(ls_jstr(&r, "uncleanable.0.topic"), "broken");
    assert_int_equal(ls_jint(&r, "uncleanable.0.partition"), 0);
    assert_non_null(strstr(ls_jstr(&r, "uncleanable.0.reason"), "cleaning failed"));
    assert_true(json_is_null(ls_jget(&r, "uncleanable.0.retry_ms"))); /* until a restart */
    /* Compacted partitions only, each with its checkpoint and ratio. */
    json_t *o;
    size_t i;
    int seen = 0;
    json_array_foreach(ls_jget(&r, "partitions"), i, o) {
        const char *t = json_string_value(json_object_get(o, "topic"));
        assert_true(strcmp(t, "plain") != 0);
        assert_true(json_is_real(json_object_get(o, "dirty_ratio")));
        assert_true(json_real_value(json_object_get(o, "min_cleanable_dirty_ratio")) == 0.5);
        if (!strcmp(t, "users")) {
            seen++;
            assert_int_equal(jint(o, "first_dirty_offset"), 10);
            assert_int_equal(jint(o, "first_uncleanable_offset"), 10);
            assert_int_equal(jint(o, "cleanable_bytes"), 0);
            assert_true(json_real_value(json_object_get(o, "dirty_ratio")) == 0.0);
        }
        if (!strcmp(t, "broken")) {
            seen++;
            assert_int_equal(jint(o, "first_dirty_offset"), 0);
            assert_true(json_real_value(json_object_get(o, "dirty_ratio")) == 1.0);
        }
    }
    assert_int_equal(seen, 2);
    assert_int_equal(json_array_size(ls_jget(&r, "partitions")), 4);
    ls_resp_free(&r);
    /* Reals are written to 15 significant digits: 0.1 reads 0.1, not
     * jansson's 0.10000000000000001. */
    assert_int_equal(ls_send_json(S, "PUT", "/v1/topics/users/configs/min.cleanable.dirty.ratio",
                                  "{\"value\":\"0.1\"}", &r),
                     0);
    assert_int_equal(r.status, 200);
    ls_resp_free(&r);
    assert_int_equal(ls_get(S, "/v1/cleaner", &r), 0);
    const char *ratio = strstr(r.body, "\"min_cleanable_dirty_ratio\":0.1");
    assert_non_null(ratio);
    assert_false(isdigit((unsigned char)ratio[strlen("\"min_cleanable_dirty_ratio\":0.1")]));
    ls_resp_free(&r);
}

static void test_restart_keeps_data_and_checkpoint(void **state)
{
    (void)state;
    ls_resp r;
    assert_int_equal(ls_delete(S, "/v1/topics/broken", &r), 0);
    assert_true(r.status == 200 || r.status == 204);
    ls_resp_free(&r);
    assert_int_equal(ls_stop(S), 0);
    char path[512];
    snprintf(path, sizeof path, "%.400s/cleaner-offset-checkpoint", S->dir);
    size_t len;
    char *ck = ls_read_file(path, &len);
    assert_non_null(ck);
    assert_int_equal(strncmp(ck, "0\n3\n", 4), 0);
    assert_non_null(strstr(ck, "\nusers 0 10\n"));
    assert_non_null(strstr(ck, "\nmulti 0 4\n"));
    assert_non_null(strstr(ck, "\nmulti 1 4\n"));
    free(ck);
    assert_int_equal(ls_restart(S, settings), 0);
    char got[512];
    records("users", 0, got, sizeof got);
    assert_string_equal(got, "6:user1=c1 8:user3=c3 9:user2=null");
    records("multi", 0, got, sizeof got);
    assert_string_equal(got, "2:b=3 3:a=4");
    post_ok("/v1/topics/users/partitions/0/records",
            "{\"records\":[{\"key\":\"user1\",\"value\":\"d1\"}]}", NULL);
    roll("users", 0);
    post_ok("/v1/topics/users/compaction:run", NULL, &r);
    assert_int_equal(ls_jint(&r, "partitions.0.stats.range.first_dirty_offset"), 10);
    assert_int_equal(ls_jint(&r, "partitions.0.stats.range.end_offset"), 11);
    assert_int_equal(ls_jint(&r, "partitions.0.stats.records_removed"), 1);
    ls_resp_free(&r);
    records("users", 0, got, sizeof got);
    assert_string_equal(got, "8:user3=c3 9:user2=null 10:user1=d1");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dry_run_then_run),
        cmocka_unit_test(test_partition_param),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_corrupt_segment_uncleanable),
        cmocka_unit_test(test_cleaner_status),
        cmocka_unit_test(test_restart_keeps_data_and_checkpoint),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
