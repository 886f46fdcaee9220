/*
 * test_api_retention.c - background jobs, retention, delete-records and
 * checkpoints through the real server (DESIGN §3, §4, §6; kafka-format.md
 * §11, §15).  Old data comes from explicit record timestamps (1000 with
 * retention.ms=20000); servers start with short job delays and intervals.
 *
 *   - GET /v1/jobs lists log-retention, log-flusher, recovery-point-checkpoint
 *     and log-start-offset-checkpoint with interval_ms, runs, last_start_ms,
 *     last_duration_ms, last_outcome and next_run_ms; a roll adds a flush-log
 *     one-shot that runs; log-flusher flushes a partition only once its
 *     flush.ms has passed;
 *   - POST /v1/topics/{t}/retention:run: a dry run reports segments with rule
 *     and reason and changes nothing on disk; the real run deletes them
 *     (log_start_offset, segments_deleted, bytes_freed); ?partition=; the
 *     admin run covers every topic; 404 unknown topic/partition; 400 bodies;
 *     a partition being compacted at that moment is reported "busy";
 *   - the deleted files are renamed *.deleted, then unlinked by a delete-file
 *     job after the topic's file.delete.delay.ms;
 *   - records:delete: new log start offset, reads below it 416, -1 = high
 *     watermark, past it 416, never lowered; retention then removes what is
 *     wholly below (rule log_start_offset);
 *   - the log-retention job deletes an expired segment by itself; the server
 *     log has one line per deleted segment naming the rule and one per log
 *     start offset increment;
 *   - recovery-point-offset-checkpoint and log-start-offset-checkpoint in
 *     Kafka's format after the checkpoint jobs ran and after a clean stop;
 *   - flush.messages=1: 16 threads appending at once all succeed, offsets are
 *     unique, every answer's high watermark covers its records, and the
 *     high watermark equals the log end offset afterwards.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "harness.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define WAIT_MS 15000 /* deadline for background work on a loaded machine */

/* Jobs start 200 ms after boot; log-retention runs once, then hourly. */
static const char *const listing[] = {
    "log.initial.task.delay.ms=200",
    "log.retention.check.interval.ms=3600000",
    "log.flush.scheduler.interval.ms=500",
    "log.flush.offset.checkpoint.interval.ms=300",
    "log.flush.start.offset.checkpoint.interval.ms=300",
    NULL,
};

/* The same, but retention runs only when asked (INT64_MAX: never). */
static const char *const on_demand[] = {
    "log.initial.task.delay.ms=200",
    "log.retention.check.interval.ms=9223372036854775807",
    "log.flush.scheduler.interval.ms=500",
    "log.flush.offset.checkpoint.interval.ms=300",
    "log.flush.start.offset.checkpoint.interval.ms=300",
    NULL,
};

static const char *const background[] = {
    "log.initial.task.delay.ms=200",
    "log.retention.check.interval.ms=300",
    NULL,
};

static long long now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void sleep_ms(int ms)
{
    usleep((useconds_t)ms * 1000);
}

static void start(ls_server *s, const char *const *settings)
{
    if (ls_start(s, settings) != 0)
        fail_msg("the server did not start (log: %s)", s->log_path);
}

static void stop(ls_server *s)
{
    assert_int_equal(ls_stop(s), 0);
    ls_cleanup(s);
}

/* POSTs json to path and asserts the status; the response stays in r. */
static void post(ls_server *s, const char *path, const char *json, long status, ls_resp *r)
{
    assert_int_equal(ls_post(s, path, json, r), 0);
    if (r->status != status)
        fail_msg("POST %s %s: %ld, expected %ld: %s", path, json ? json : "", r->status, status,
                 r->body);
}

/* Appends n records (keys k-0.., values v-0..) at ts (-1: now); returns the
 * base offset. */
static long long append(ls_server *s, const char *topic, int part, int n, long long ts)
{
    char body[8192], path[256];
    size_t len = (size_t)snprintf(body, sizeof body, "{\"records\":[");
    for (int i = 0; i < n; i++) {
        len += (size_t)snprintf(body + len, sizeof body - len,
                                "%s{\"key\":\"k-%d\",\"value\":\"v-%d\"", i ? "," : "", i, i);
        if (ts >= 0)
            len += (size_t)snprintf(body + len, sizeof body - len, ",\"timestamp\":%lld", ts);
        len += (size_t)snprintf(body + len, sizeof body - len, "}");
    }
    snprintf(body + len, sizeof body - len, "]}");
    snprintf(path, sizeof path, "/v1/topics/%s/partitions/%d/records", topic, part);
    ls_resp r;
    post(s, path, body, 200, &r);
    long long base = ls_jint(&r, "base_offset");
    ls_resp_free(&r);
    return base;
}

static void roll(ls_server *s, const char *topic, int part)
{
    char path[256];
    snprintf(path, sizeof path, "/v1/topics/%s/partitions/%d/segments:roll", topic, part);
    ls_resp r;
    post(s, path, NULL, 200, &r);
    ls_resp_free(&r);
}

/* Three segments: [0,10) and [10,20) at timestamp 1000, then [20,30) now. */
static void two_expired_segments(ls_server *s, const char *topic, int part)
{
    assert_int_equal(append(s, topic, part, 10, 1000), 0);
    roll(s, topic, part);
    assert_int_equal(append(s, topic, part, 10, 1000), 10);
    roll(s, topic, part);
    assert_int_equal(append(s, topic, part, 10, -1), 20);
}

/* An integer field of GET /v1/topics/{t}/partitions/{p}. */
static long long part_field(ls_server *s, const char *topic, int part, const char *field)
{
    char path[256];
    snprintf(path, sizeof path, "/v1/topics/%s/partitions/%d", topic, part);
    ls_resp r;
    assert_int_equal(ls_get(s, path, &r), 0);
    assert_int_equal(r.status, 200);
    long long v = ls_jint(&r, field);
    ls_resp_free(&r);
    return v;
}

/* Occurrences of needle in the server's log. */
static int log_count(ls_server *s, const char *needle)
{
    return ls_file_count(s->log_path, needle);
}

static bool file_exists(ls_server *s, const char *rel)
{
    char path[600];
    snprintf(path, sizeof path, "%s/%s", s->dir, rel);
    return access(path, F_OK) == 0;
}

/* The job named `name` in a GET /v1/jobs answer (borrowed), or NULL. */
static json_t *job(const ls_resp *r, const char *name)
{
    json_t *jobs = json_object_get(r->json, "jobs"), *j;
    size_t i;
    json_array_foreach(jobs, i, j)
    {
        if (strcmp(json_string_value(json_object_get(j, "name")), name) == 0)
            return j;
    }
    return NULL;
}

static long long jint(json_t *o, const char *key)
{
    json_t *v = json_object_get(o, key);
    return json_is_integer(v) ? json_integer_value(v) : -999999;
}

/* Polls /v1/jobs until `name` has run at least `runs` times; returns the
 * last answer (the caller frees it). */
static void wait_job(ls_server *s, const char *name, long long runs, ls_resp *r)
{
    long long end = now_ms() + WAIT_MS;
    for (;;) {
        assert_int_equal(ls_get(s, "/v1/jobs", r), 0);
        assert_int_equal(r->status, 200);
        json_t *j = job(r, name);
        if (j && jint(j, "runs") >= runs && !json_is_true(json_object_get(j, "running")))
            return;
        if (now_ms() > end)
            fail_msg("job %s did not run %lld times: %s", name, runs, r->body);
        ls_resp_free(r);
        sleep_ms(50);
    }
}

/* ---- /v1/jobs ----------------------------------------------------------- */

static void test_jobs_listing(void **state)
{
    (void)state;
    ls_server s;
    long long t0 = now_ms();
    start(&s, listing);
    static const struct {
        const char *name;
        long long interval;
    } periodic[] = {{"log-retention", 3600000},
                    {"log-flusher", 500},
                    {"recovery-point-checkpoint", 300},
                    {"log-start-offset-checkpoint", 300}};
    ls_resp r;
    for (size_t i = 0; i < 4; i++) {
        wait_job(&s, periodic[i].name, 1, &r);
        json_t *j = job(&r, periodic[i].name);
        assert_string_equal(json_string_value(json_object_get(j, "kind")), "periodic");
        assert_int_equal(jint(j, "interval_ms"), periodic[i].interval);
        long long start_ms = jint(j, "last_start_ms");
        assert_true(start_ms >= t0 + 200 - 5); /* not before the initial delay */
        assert_true(start_ms <= now_ms());
        assert_true(jint(j, "last_duration_ms") >= 0);
        assert_string_equal(json_string_value(json_object_get(j, "last_outcome")), "ok");
        assert_true(json_is_string(json_object_get(j, "last_note")));
        assert_int_equal(jint(j, "failures"), 0);
        assert_true(jint(j, "next_run_ms") >= start_ms + periodic[i].interval - 5);
        ls_resp_free(&r);
    }
    /* The checkpoint jobs keep running at their interval. */
    wait_job(&s, "recovery-point-checkpoint", 3, &r);
    ls_resp_free(&r);

    /* A roll queues a flush-log one-shot, which runs (flush.ms is off for
     * this topic: only that job moves its recovery point). */
    assert_int_equal(ls_create_topic(&s, "jobs", 1, "{\"flush.ms\":\"9223372036854775807\"}"), 201);
    append(&s, "jobs", 0, 5, -1);
    roll(&s, "jobs", 0);
    wait_job(&s, "flush-log", 1, &r);
    append(&s, "jobs", 0, 5, -1); /* after the flush, which would cover it */
    json_t *j = job(&r, "flush-log");
    assert_string_equal(json_string_value(json_object_get(j, "kind")), "one-shot");
    assert_true(json_is_null(json_object_get(j, "interval_ms")));
    assert_string_equal(json_string_value(json_object_get(j, "last_outcome")), "ok");
    assert_non_null(strstr(json_string_value(json_object_get(j, "last_note")), "jobs-0"));
    ls_resp_free(&r);
    /* ... and the flush moved the recovery point to the new segment. */
    assert_int_equal(part_field(&s, "jobs", 0, "recovery_point"), 5);

    /* log-flusher honours flush.ms (500 here, from the server's
     * log.flush.scheduler.interval.ms): the whole log gets flushed.  A
     * topic with flush.ms of an hour, written before it, is skipped by the
     * same runs. */
    assert_int_equal(ls_create_topic(&s, "hourly", 1, "{\"flush.ms\":\"3600000\"}"), 201);
    append(&s, "hourly", 0, 3, -1);
    assert_int_equal(ls_create_topic(&s, "lazy", 1, NULL), 201);
    append(&s, "lazy", 0, 4, -1);
    long long end = now_ms() + WAIT_MS;
    while (part_field(&s, "lazy", 0, "recovery_point") != 4 && now_ms() < end)
        sleep_ms(50);
    assert_int_equal(part_field(&s, "lazy", 0, "recovery_point"), 4);
    assert_int_equal(part_field(&s, "jobs", 0, "recovery_point"), 5);
    assert_int_equal(part_field(&s, "hourly", 0, "recovery_point"), 0);
    stop(&s);
}

/* ---- retention:run ------------------------------------------------------- */

/* Checks one partition of a retention report: two retention.ms segments,
 * [0,10) and [10,20), and the log start offset 20. */
static void check_report(json_t *pr, const char *topic, int part, bool dry)
{
    assert_string_equal(json_string_value(json_object_get(pr, "topic")), topic);
    assert_int_equal(jint(pr, "partition"), part);
    assert_true(json_is_true(json_object_get(pr, "dry_run")) == dry);
    assert_int_equal(jint(pr, "log_start_offset_before"), 0);
    assert_int_equal(jint(pr, "log_start_offset"), 20);
    json_t *segs = json_object_get(pr, "segments_deleted");
    assert_int_equal(json_array_size(segs), 2);
    long long sum = 0;
    for (size_t i = 0; i < 2; i++) {
        json_t *sg = json_array_get(segs, i);
        assert_int_equal(jint(sg, "base_offset"), 10 * (long long)i);
        assert_int_equal(jint(sg, "next_offset"), 10 * (long long)i + 10);
        assert_true(jint(sg, "size_bytes") > 0);
        sum += jint(sg, "size_bytes");
        assert_string_equal(json_string_value(json_object_get(sg, "rule")), "retention.ms");
        assert_non_null(strstr(json_string_value(json_object_get(sg, "reason")),
                               "retention.ms 20000 breached by largest timestamp 1000"));
    }
    assert_int_equal(jint(pr, "bytes_freed"), sum);
}

static void test_retention_run(void **state)
{
    (void)state;
    ls_server s;
    start(&s, on_demand);
    assert_int_equal(ls_create_topic(&s, "old", 2, "{\"retention.ms\":\"20000\"}"), 201);
    assert_int_equal(ls_create_topic(&s, "young", 1, NULL), 201);
    two_expired_segments(&s, "old", 0);
    two_expired_segments(&s, "old", 1);
    append(&s, "young", 0, 3, -1);
    char dir0[600];
    snprintf(dir0, sizeof dir0, "%s/old-0", s.dir);

    /* Dry run on partition 0: reported, nothing touched. */
    char *before = ls_dir_listing(dir0);
    ls_resp r;
    post(&s, "/v1/topics/old/retention:run?partition=0", "{\"dry_run\":true}", 200, &r);
    assert_true(json_is_true(json_object_get(r.json, "dry_run")));
    assert_int_equal(json_array_size(json_object_get(r.json, "partitions")), 1);
    check_report(ls_jget(&r, "partitions.0"), "old", 0, true);
    assert_int_equal(ls_jint(&r, "segments_deleted"), 2);
    ls_resp_free(&r);
    char *after = ls_dir_listing(dir0);
    assert_string_equal(before, after);
    free(after);
    assert_int_equal(part_field(&s, "old", 0, "log_start_offset"), 0);
    assert_int_equal(part_field(&s, "old", 0, "segment_count"), 3);
    assert_int_equal(log_count(&s, "incremented log start offset"), 0);

    /* The real run on partition 0 only. */
    post(&s, "/v1/topics/old/retention:run?partition=0", "{\"dry_run\":false}", 200, &r);
    assert_int_equal(json_array_size(json_object_get(r.json, "partitions")), 1);
    check_report(ls_jget(&r, "partitions.0"), "old", 0, false);
    long long freed = ls_jint(&r, "bytes_freed");
    ls_resp_free(&r);
    after = ls_dir_listing(dir0);
    assert_string_not_equal(before, after);
    free(before);
    free(after);
    assert_int_equal(part_field(&s, "old", 0, "log_start_offset"), 20);
    assert_int_equal(part_field(&s, "old", 0, "segment_count"), 1);
    assert_int_equal(part_field(&s, "old", 1, "log_start_offset"), 0);
    assert_false(file_exists(&s, "old-0/00000000000000000000.log"));
    assert_true(file_exists(&s, "old-0/00000000000000000000.log.deleted")); /* 60 s delay */
    assert_true(file_exists(&s, "old-0/00000000000000000010.timeindex.deleted"));
    assert_true(file_exists(&s, "old-0/00000000000000000020.log"));
    assert_true(file_exists(&s, "old-1/00000000000000000000.log"));
    ls_resp_free(&r);
    assert_int_equal(ls_get(&s, "/v1/topics/old/partitions/0/records?offset=19", &r), 0);
    assert_int_equal(ls_check_error(&r, 416, "offset_out_of_range"), 0);
    ls_resp_free(&r);

    /* Across topics: partition 1 of "old" goes too, "young" keeps all. */
    post(&s, "/v1/admin/retention:run", NULL, 200, &r);
    assert_false(json_is_true(json_object_get(r.json, "dry_run")));
    json_t *parts = json_object_get(r.json, "partitions"), *pr;
    assert_int_equal(json_array_size(parts), 3);
    size_t i;
    int seen = 0;
    json_array_foreach(parts, i, pr)
    {
        const char *t = json_string_value(json_object_get(pr, "topic"));
        if (!strcmp(t, "old") && jint(pr, "partition") == 1) {
            check_report(pr, "old", 1, false);
            assert_int_equal(jint(pr, "bytes_freed"), freed); /* same data as partition 0 */
            seen++;
        } else {
            assert_int_equal(json_array_size(json_object_get(pr, "segments_deleted")), 0);
        }
    }
    assert_int_equal(seen, 1);
    assert_int_equal(ls_jint(&r, "segments_deleted"), 2);
    ls_resp_free(&r);
    assert_int_equal(part_field(&s, "old", 1, "log_start_offset"), 20);
    assert_int_equal(part_field(&s, "young", 0, "log_start_offset"), 0);

    /* One log line per deleted segment, one per log start increment. */
    assert_int_equal(log_count(&s, "retention.ms 20000 breached by largest timestamp 1000"), 4);
    assert_int_equal(log_count(&s, "deleting segment"), 4);
    assert_int_equal(log_count(&s, "incremented log start offset to 20"), 2);
    assert_int_equal(log_count(&s, "incremented log start offset"), 2);

    /* Refusals. */
    post(&s, "/v1/topics/nope/retention:run", "{}", 404, &r);
    assert_int_equal(ls_check_error(&r, 404, "unknown_topic"), 0);
    ls_resp_free(&r);
    post(&s, "/v1/topics/old/retention:run?partition=7", "{}", 404, &r);
    assert_int_equal(ls_check_error(&r, 404, "unknown_partition"), 0);
    /* As every other unknown_partition says: how many there are. */
    assert_non_null(strstr(ls_jstr(&r, "message"), "has no partition 7 (it has "));
    ls_resp_free(&r);
    static const char *const bad[] = {"{\"dry_run\":\"yes\"}", "{\"dry_run\":true,\"x\":1}",
                                      "[true]", "{"};
    for (size_t k = 0; k < 4; k++) {
        post(&s, "/v1/topics/old/retention:run", bad[k], 400, &r);
        assert_int_equal(ls_check_error(&r, 400, NULL), 0);
        ls_resp_free(&r);
        post(&s, "/v1/admin/retention:run", bad[k], 400, &r);
        ls_resp_free(&r);
    }
    post(&s, "/v1/topics/old/retention:run?partition=x", "{}", 400, &r);
    ls_resp_free(&r);
    assert_int_equal(log_count(&s, "deleting segment"), 4);
    stop(&s);
}

static void test_deleted_files_unlinked_after_delay(void **state)
{
    (void)state;
    ls_server s;
    start(&s, on_demand);
    assert_int_equal(ls_create_topic(&s, "fdd", 1,
                                     "{\"retention.ms\":\"20000\",\"file.delete.delay.ms\":\"1500\"}"),
                     201);
    append(&s, "fdd", 0, 10, 1000);
    roll(&s, "fdd", 0);
    append(&s, "fdd", 0, 10, -1);
    long long t0 = now_ms();
    ls_resp r;
    post(&s, "/v1/topics/fdd/retention:run", "{\"dry_run\":false}", 200, &r);
    assert_int_equal(ls_jint(&r, "segments_deleted"), 1);
    ls_resp_free(&r);
    /* Renamed at once (the delay is long enough to see it)... */
    assert_false(file_exists(&s, "fdd-0/00000000000000000000.log"));
    assert_true(file_exists(&s, "fdd-0/00000000000000000000.log.deleted"));
    assert_true(file_exists(&s, "fdd-0/00000000000000000000.index.deleted"));
    assert_true(file_exists(&s, "fdd-0/00000000000000000000.timeindex.deleted"));
    wait_job(&s, "delete-file", 0, &r);
    assert_int_equal(jint(job(&r, "delete-file"), "pending"), 1);
    ls_resp_free(&r);
    /* ... and unlinked by the delete-file job after file.delete.delay.ms. */
    wait_job(&s, "delete-file", 1, &r);
    long long t1 = now_ms();
    json_t *j = job(&r, "delete-file");
    assert_string_equal(json_string_value(json_object_get(j, "kind")), "one-shot");
    assert_int_equal(jint(j, "pending"), 0);
    assert_true(jint(j, "last_start_ms") >= t0 + 1500 - 5);
    ls_resp_free(&r);
    assert_true(t1 - t0 >= 1500 - 5);
    assert_false(file_exists(&s, "fdd-0/00000000000000000000.log.deleted"));
    assert_false(file_exists(&s, "fdd-0/00000000000000000000.index.deleted"));
    assert_false(file_exists(&s, "fdd-0/00000000000000000000.timeindex.deleted"));
    assert_true(file_exists(&s, "fdd-0/00000000000000000010.log"));
    stop(&s);
}

/* ---- records:delete ------------------------------------------------------- */

static long long delete_records(ls_server *s, const char *body, long status)
{
    ls_resp r;
    post(s, "/v1/topics/dr/partitions/0/records:delete", body, status, &r);
    long long lso = ls_jint(&r, "log_start_offset");
    if (status != 200)
        assert_int_equal(ls_check_error(&r, status, NULL), 0);
    else
        assert_int_equal(ls_jint(&r, "high_watermark"), 30);
    ls_resp_free(&r);
    return lso;
}

static void test_delete_records(void **state)
{
    (void)state;
    ls_server s;
    start(&s, on_demand);
    assert_int_equal(ls_create_topic(&s, "dr", 1, NULL), 201);
    for (int i = 0; i < 3; i++) {
        append(&s, "dr", 0, 10, -1);
        roll(&s, "dr", 0);
    } /* [0,10) [10,20) [20,30) and an empty active segment */
    assert_int_equal(delete_records(&s, "{\"before_offset\":15}", 200), 15);
    assert_int_equal(part_field(&s, "dr", 0, "log_start_offset"), 15);
    assert_int_equal(log_count(&s, "dr-0: incremented log start offset to 15"), 1);

    ls_resp r;
    assert_int_equal(ls_get(&s, "/v1/topics/dr/partitions/0/records?offset=14", &r), 0);
    assert_int_equal(ls_check_error(&r, 416, "offset_out_of_range"), 0);
    assert_int_equal(ls_jint(&r, "details.log_start_offset"), 15);
    assert_int_equal(ls_jint(&r, "details.high_watermark"), 30);
    ls_resp_free(&r);
    assert_int_equal(ls_get(&s, "/v1/topics/dr/partitions/0/records?offset=15&max_records=1", &r), 0);
    assert_int_equal(r.status, 200);
    assert_int_equal(ls_jint(&r, "records.0.offset"), 15);
    assert_string_equal(ls_jstr(&r, "records.0.key"), "k-5");
    ls_resp_free(&r);
    assert_int_equal(ls_get(&s, "/v1/topics/dr/partitions/0/offsets?spec=earliest", &r), 0);
    assert_int_equal(ls_jint(&r, "offset"), 15);
    ls_resp_free(&r);

    /* Never lowered; past the high watermark refused; bad bodies 400. */
    assert_int_equal(delete_records(&s, "{\"before_offset\":3}", 200), 15);
    delete_records(&s, "{\"before_offset\":31}", 416);
    assert_int_equal(part_field(&s, "dr", 0, "log_start_offset"), 15);
    delete_records(&s, "{\"before_offset\":-2}", 400);
    delete_records(&s, "{\"before_offset\":\"7\"}", 400);
    delete_records(&s, "{}", 400);
    assert_int_equal(part_field(&s, "dr", 0, "log_start_offset"), 15);

    /* Retention removes the segment wholly below the start, no lower. */
    post(&s, "/v1/topics/dr/retention:run", NULL, 200, &r);
    assert_int_equal(ls_jint(&r, "segments_deleted"), 1);
    assert_int_equal(ls_jint(&r, "partitions.0.segments_deleted.0.base_offset"), 0);
    assert_string_equal(ls_jstr(&r, "partitions.0.segments_deleted.0.rule"), "log_start_offset");
    assert_int_equal(ls_jint(&r, "partitions.0.log_start_offset"), 15);
    ls_resp_free(&r);

    /* -1: everything up to the high watermark. */
    assert_int_equal(delete_records(&s, "{\"before_offset\":-1}", 200), 30);
    assert_int_equal(ls_get(&s, "/v1/topics/dr/partitions/0/records?offset=30", &r), 0);
    assert_int_equal(r.status, 200);
    assert_int_equal(json_array_size(json_object_get(r.json, "records")), 0);
    ls_resp_free(&r);
    post(&s, "/v1/topics/dr/retention:run", NULL, 200, &r);
    assert_int_equal(ls_jint(&r, "segments_deleted"), 2);
    ls_resp_free(&r);
    assert_int_equal(part_field(&s, "dr", 0, "segment_count"), 1);
    assert_int_equal(append(&s, "dr", 0, 1, -1), 30);
    assert_int_equal(log_count(&s, "incremented log start offset"), 2);
    stop(&s);
}

/* ---- the log-retention job ----------------------------------------------- */

static void test_background_retention(void **state)
{
    (void)state;
    ls_server s;
    start(&s, background);
    assert_int_equal(ls_create_topic(&s, "bg", 1, "{\"retention.ms\":\"20000\"}"), 201);
    append(&s, "bg", 0, 10, 1000);
    roll(&s, "bg", 0);
    append(&s, "bg", 0, 10, -1);
    long long end = now_ms() + WAIT_MS;
    while (part_field(&s, "bg", 0, "log_start_offset") != 10 && now_ms() < end)
        sleep_ms(50);
    assert_int_equal(part_field(&s, "bg", 0, "log_start_offset"), 10);
    assert_int_equal(part_field(&s, "bg", 0, "segment_count"), 1);
    ls_resp r;
    wait_job(&s, "log-retention", 1, &r);
    assert_string_equal(json_string_value(json_object_get(job(&r, "log-retention"), "last_outcome")),
                        "ok");
    assert_int_equal(jint(job(&r, "log-retention"), "interval_ms"), 300);
    ls_resp_free(&r);
    assert_int_equal(log_count(&s, "bg-0: deleting segment 00000000000000000000"), 1);
    assert_int_equal(log_count(&s, "retention.ms 20000 breached by largest timestamp 1000"), 1);
    assert_int_equal(log_count(&s, "bg-0: incremented log start offset to 10"), 1);
    /* Later passes find nothing more. */
    wait_job(&s, "log-retention", 3, &r);
    ls_resp_free(&r);
    assert_int_equal(log_count(&s, "deleting segment"), 1);
    stop(&s);
}

/* ---- checkpoints ------------------------------------------------------------ */

/* Parses a Kafka offset checkpoint ("0\n<n>\n<topic> <partition> <offset>\n"
 * n times, nothing else) and returns the offset of topic-part, -1 if absent;
 * fails the test if the file is missing or malformed. */
static long long checkpoint_offset(ls_server *s, const char *name, const char *topic, int part,
                                   int *entries)
{
    char path[600];
    snprintf(path, sizeof path, "%s/%s", s->dir, name);
    size_t len;
    char *text = ls_read_file(path, &len);
    if (!text)
        fail_msg("%s is missing", name);
    assert_true(len > 0 && text[len - 1] == '\n');
    char *save = NULL, *line = strtok_r(text, "\n", &save);
    assert_non_null(line);
    assert_string_equal(line, "0");
    line = strtok_r(NULL, "\n", &save);
    assert_non_null(line);
    int n = atoi(line), k = 0;
    long long found = -1;
    while ((line = strtok_r(NULL, "\n", &save))) {
        char t[256];
        int p;
        long long off;
        char extra;
        if (sscanf(line, "%255s %d %lld %c", t, &p, &off, &extra) != 3)
            fail_msg("%s: malformed entry '%s'", name, line);
        if (!strcmp(t, topic) && p == part)
            found = off;
        k++;
    }
    assert_int_equal(k, n);
    free(text);
    if (entries)
        *entries = n;
    return found;
}

static void test_checkpoints(void **state)
{
    (void)state;
    ls_server s;
    start(&s, on_demand);
    assert_int_equal(ls_create_topic(&s, "ck", 2, "{\"flush.ms\":\"9223372036854775807\"}"), 201);
    ls_resp r;
    /* ck-0: [0,5) flushed by the roll's flush-log, [5,7) not flushed; the
     * log start offset raised to 2, inside the first segment. */
    append(&s, "ck", 0, 5, -1);
    roll(&s, "ck", 0);
    wait_job(&s, "flush-log", 1, &r);
    ls_resp_free(&r);
    append(&s, "ck", 0, 2, -1);
    post(&s, "/v1/topics/ck/partitions/0/records:delete", "{\"before_offset\":2}", 200, &r);
    ls_resp_free(&r);
    /* ck-1: [0,3) rolled, flushed, then deleted by retention: its log start
     * offset is its first segment's base, which Kafka does not write. */
    append(&s, "ck", 1, 3, -1);
    roll(&s, "ck", 1);
    wait_job(&s, "flush-log", 2, &r);
    ls_resp_free(&r);
    post(&s, "/v1/topics/ck/partitions/1/records:delete", "{\"before_offset\":3}", 200, &r);
    ls_resp_free(&r);
    post(&s, "/v1/topics/ck/retention:run?partition=1", NULL, 200, &r);
    assert_int_equal(ls_jint(&r, "segments_deleted"), 1);
    ls_resp_free(&r);

    /* Written by the jobs (every 300 ms). */
    const char *rp = "recovery-point-offset-checkpoint", *ls = "log-start-offset-checkpoint";
    long long end = now_ms() + WAIT_MS;
    int entries;
    while ((!file_exists(&s, ls) || checkpoint_offset(&s, ls, "ck", 0, NULL) != 2 ||
            checkpoint_offset(&s, ls, "ck", 1, NULL) != -1 || !file_exists(&s, rp) ||
            checkpoint_offset(&s, rp, "ck", 0, NULL) != 5 ||
            checkpoint_offset(&s, rp, "ck", 1, NULL) != 3) &&
           now_ms() < end)
        sleep_ms(50);
    assert_int_equal(checkpoint_offset(&s, rp, "ck", 0, &entries), 5);
    assert_int_equal(entries, 2);
    assert_int_equal(checkpoint_offset(&s, rp, "ck", 1, NULL), 3);
    assert_int_equal(checkpoint_offset(&s, ls, "ck", 0, &entries), 2);
    assert_int_equal(entries, 1);
    assert_int_equal(checkpoint_offset(&s, ls, "ck", 1, NULL), -1);

    /* A clean stop writes them last, with everything flushed. */
    assert_int_equal(ls_stop(&s), 0);
    assert_int_equal(checkpoint_offset(&s, rp, "ck", 0, NULL), 7);
    assert_int_equal(checkpoint_offset(&s, rp, "ck", 1, NULL), 3);
    assert_int_equal(checkpoint_offset(&s, ls, "ck", 0, &entries), 2);
    assert_int_equal(entries, 1);
    assert_true(file_exists(&s, ".kafka_cleanshutdown"));
    assert_false(file_exists(&s, "recovery-point-offset-checkpoint.tmp"));
    assert_false(file_exists(&s, "log-start-offset-checkpoint.tmp"));

    /* ... and the next start honours them. */
    assert_int_equal(ls_restart(&s, on_demand), 0);
    assert_int_equal(part_field(&s, "ck", 0, "log_start_offset"), 2);
    assert_int_equal(part_field(&s, "ck", 0, "recovery_point"), 7);
    assert_int_equal(part_field(&s, "ck", 1, "log_start_offset"), 3);
    stop(&s);
}

/* ---- flush.messages=1: group commit ----------------------------------------- */

#define WRITERS 16
#define APPENDS 8

typedef struct writer {
    ls_server *s;
    long long base[APPENDS];
    int failures;
    char why[256];
} writer;

static void *write_thread(void *arg)
{
    writer *w = arg;
    for (int i = 0; i < APPENDS; i++) {
        ls_resp r;
        w->base[i] = -1;
        if (ls_post(w->s, "/v1/topics/durable/partitions/0/records",
                    "{\"records\":[{\"key\":\"a\",\"value\":\"1\"},{\"key\":\"b\",\"value\":\"2\"}]}",
                    &r)) {
            w->failures++;
            continue;
        }
        json_t *b = json_object_get(r.json, "base_offset");
        json_t *hw = json_object_get(r.json, "high_watermark");
        if (r.status != 200 || !json_is_integer(b) || !json_is_integer(hw) ||
            json_integer_value(hw) < json_integer_value(b) + 2) {
            /* acknowledged only once durable and visible: HW covers it */
            if (!w->why[0])
                snprintf(w->why, sizeof w->why, "%ld %s", r.status, r.body);
            w->failures++;
        } else {
            w->base[i] = json_integer_value(b);
        }
        ls_resp_free(&r);
    }
    return NULL;
}

static int cmp_ll(const void *a, const void *b)
{
    long long x = *(const long long *)a, y = *(const long long *)b;
    return (x > y) - (x < y);
}

static void test_flush_messages_group_commit(void **state)
{
    (void)state;
    ls_server s;
    start(&s, on_demand);
    assert_int_equal(ls_create_topic(&s, "durable", 1, "{\"flush.messages\":\"1\"}"), 201);
    writer w[WRITERS];
    pthread_t th[WRITERS];
    for (int i = 0; i < WRITERS; i++) {
        w[i] = (writer){.s = &s};
        assert_int_equal(pthread_create(&th[i], NULL, write_thread, &w[i]), 0);
    }
    for (int i = 0; i < WRITERS; i++)
        pthread_join(th[i], NULL);
    long long bases[WRITERS * APPENDS];
    size_t n = 0;
    for (int i = 0; i < WRITERS; i++) {
        if (w[i].failures)
            fail_msg("writer %d: %d failed appends (%s)", i, w[i].failures, w[i].why);
        for (int k = 0; k < APPENDS; k++)
            bases[n++] = w[i].base[k];
    }
    /* Unique offsets, two per append, no gaps. */
    qsort(bases, n, sizeof bases[0], cmp_ll);
    for (size_t i = 0; i < n; i++)
        assert_int_equal(bases[i], 2 * (long long)i);
    long long total = 2LL * WRITERS * APPENDS;
    assert_int_equal(part_field(&s, "durable", 0, "log_end_offset"), total);
    assert_int_equal(part_field(&s, "durable", 0, "high_watermark"), total);
    assert_true(part_field(&s, "durable", 0, "recovery_point") >= total);
    ls_resp r;
    wait_job(&s, "group-commit", 1, &r);
    ls_resp_free(&r);
    stop(&s);
}

/* retention:run while a clean holds the partition (the clean is stalled
 * 3 s at its start by a fault point) reports it "busy", rather than as a
 * partition with nothing to delete. */
typedef struct clean_call {
    ls_server *s;
    long status;
    atomic_bool done;
} clean_call;

static void *clean_thread(void *arg)
{
    clean_call *c = arg;
    ls_resp r;
    if (ls_post(c->s, "/v1/topics/both/compaction:run", "{}", &r) == 0) {
        c->status = r.status;
        ls_resp_free(&r);
    }
    atomic_store(&c->done, true);
    return NULL;
}

/* One clean under the stall, polled with retention:run until it ends:
 * true when a run reported the partition busy meanwhile. */
static bool busy_seen_during_clean(ls_server *s, long *clean_status)
{
    clean_call c = {.s = s};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, clean_thread, &c), 0);
    bool busy = false;
    /* Poll until the clean is over, however late a loaded machine starts
     * it: only a clean that ends unseen is a miss. */
    while (!busy && !atomic_load(&c.done)) {
        ls_resp r;
        post(s, "/v1/topics/both/retention:run", "{\"dry_run\":false}", 200, &r);
        json_t *p0 = json_array_get(ls_jget(&r, "partitions"), 0);
        json_t *b = json_object_get(p0, "busy");
        if (!json_is_boolean(b))
            fail_msg("no busy flag in %s", r.body);
        busy = json_is_true(b);
        if (busy)
            assert_int_equal(json_array_size(json_object_get(p0, "segments_deleted")), 0);
        ls_resp_free(&r);
        if (!busy)
            sleep_ms(10);
    }
    pthread_join(th, NULL);
    *clean_status = c.status;
    return busy;
}

static void test_retention_run_during_clean(void **state)
{
    (void)state;
    ls_server s;
    /* Every clean stalls 3 s at its start, holding the partition. */
    setenv("LOGSTORE_FAULT", "compact.round_start=stall@*", 1);
    int rc = ls_start(&s, on_demand);
    unsetenv("LOGSTORE_FAULT");
    if (rc)
        fail_msg("the server did not start (log: %s)", s.log_path);
    assert_int_equal(ls_create_topic(&s, "both", 1, "{\"cleanup.policy\":\"compact,delete\"}"), 201);
    append(&s, "both", 0, 3, -1);
    /* A clean now and then ended unseen by the polls in full runs of make
     * test, never when the suite ran alone.  The likely cause, the clean
     * holding the HTTP thread that also took the polls' connection, is gone
     * (maintenance runs on its own threads, api_lane.h); the retries stay
     * as a guard: a second or third clean must be seen. */
    long status = 0;
    bool busy = false;
    for (int attempt = 0; attempt < 3 && !busy; attempt++) {
        busy = busy_seen_during_clean(&s, &status);
        if (!busy)
            fprintf(stderr, "# clean %d (status %ld) ended unseen by retention:run\n", attempt + 1,
                    status);
    }
    if (!busy)
        fail_msg("three cleans ended without a busy report (log: %s)", s.log_path);
    assert_int_equal(status, 200);
    /* Once the clean is over the same run is not busy. */
    ls_resp r;
    post(&s, "/v1/topics/both/retention:run", "{}", 200, &r);
    assert_true(json_is_false(json_object_get(json_array_get(ls_jget(&r, "partitions"), 0), "busy")));
    ls_resp_free(&r);
    stop(&s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_jobs_listing),
        cmocka_unit_test(test_retention_run),
        cmocka_unit_test(test_deleted_files_unlinked_after_delay),
        cmocka_unit_test(test_delete_records),
        cmocka_unit_test(test_background_retention),
        cmocka_unit_test(test_checkpoints),
        cmocka_unit_test(test_flush_messages_group_commit),
        cmocka_unit_test(test_retention_run_during_clean),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
