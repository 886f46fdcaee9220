/*
 * test_api_segments.c - looking inside a partition over HTTP (DESIGN §6
 * segments endpoints, §2 files, §3 index rules), against the real server.
 *
 * Topic "seg" (segment.bytes=1048576, index.interval.bytes=4096 default)
 * gets 20 batches of 10 records with keys k-%06d and 250-byte values; batch b
 * has every timestamp T+b, so each batch is DESIGN's 2,731-byte example.
 * Covers: the segment listing (base_offset, next_offset, record_count,
 * size_bytes, active, files with names/sizes/entries); the offset-index dump
 * (Kafka's rule, kafka-format.md §13.1: an entry for the batch that finds more
 * than 4096 bytes written since the last entry, keyed by its last offset, at
 * its start position: (29, 5462), (49, 10924), ...); the time-index dump; the
 * batch header dump (positions, sizes, offsets, timestamps, crc ==
 * computed_crc, valid); files byte-identical to the kafka-format.md §13.4
 * sample segment (tests/data/sample-segment); segments:roll (new active base =
 * log end offset, old segment trimmed with its final time-index entry; rolling
 * an empty active segment reports rolled false); rolls by segment.ms and
 * segment.bytes (kafka-format.md §14); reads across segments;
 * unknown segment bases (404 segment_not_found) and bad ones (400); files on
 * disk matching the listing; a clean restart keeping all of it; and a kill -9
 * restart with a torn tail (recovery truncates it, reports the bytes, and
 * rebuilds the indexes by Kafka's recovery rule).
 *
 * One server serves the whole group; tests build on each other in order.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "harness.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static ls_server g_srv;
static ls_server *S = &g_srv;

#define CHECK_ERR(r, st, code) assert_int_equal(ls_check_error(&(r), (st), (code)), 0)
#define T0 1794024676890LL
#define BATCH 2731
#define SEGS "/v1/topics/seg/partitions/0/segments"

/* Appends batch number b (offsets 10b..10b+9, every timestamp ts) to topic. */
static void append_batch_ts(const char *topic, int b, long long ts)
{
    static char value[251];
    memset(value, 'v', 250);
    char body[8192];
    size_t n = (size_t)snprintf(body, sizeof body, "{\"records\":[");
    for (int i = 0; i < 10; i++)
        n += (size_t)snprintf(body + n, sizeof body - n,
                              "%s{\"key\":\"k-%06d\",\"value\":\"%s\",\"timestamp\":%lld}", i ? "," : "",
                              b * 10 + i, value, ts);
    snprintf(body + n, sizeof body - n, "]}");
    char path[256];
    snprintf(path, sizeof path, "/v1/topics/%s/partitions/0/records", topic);
    ls_resp r;
    assert_int_equal(ls_post(S, path, body, &r), 0);
    if (r.status != 200)
        fprintf(stderr, "# append: %s\n", r.body);
    assert_int_equal(r.status, 200);
    assert_int_equal(ls_jint(&r, "base_offset"), b * 10);
    assert_int_equal(ls_jint(&r, "batch_bytes"), BATCH);
    ls_resp_free(&r);
}

/* Batch b with timestamps T0+b. */
static void append_batch(const char *topic, int b)
{
    append_batch_ts(topic, b, T0 + b);
}

static int group_setup(void **state)
{
    (void)state;
    if (ls_start(S, NULL))
        return -1;
    if (ls_create_topic(S, "seg", 1, "{\"segment.bytes\":1048576}") != 201)
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

static json_t *segment(const ls_resp *r, size_t i)
{
    return json_array_get(ls_jget(r, "segments"), i);
}

static long long jint(json_t *o, const char *key)
{
    json_t *v = json_object_get(o, key);
    return json_is_integer(v) ? json_integer_value(v) : -999999;
}

static json_t *file_named(json_t *seg, const char *suffix)
{
    size_t i;
    json_t *f;
    json_array_foreach(json_object_get(seg, "files"), i, f) {
        const char *name = json_string_value(json_object_get(f, "name"));
        if (name && strlen(name) > strlen(suffix) &&
            !strcmp(name + strlen(name) - strlen(suffix), suffix))
            return f;
    }
    return NULL;
}

static void part_file(char *out, size_t len, const char *topic, const char *name)
{
    snprintf(out, len, "%.255s/%s-0/%s", S->dir, topic, name);
}

/* ---- listing and dumps ----------------------------------------------------------- */

static void test_listing(void **state)
{
    (void)state;
    for (int b = 0; b < 20; b++)
        append_batch("seg", b);
    ls_resp r;
    assert_int_equal(ls_get(S, SEGS, &r), 0);
    assert_int_equal(r.status, 200);
    assert_string_equal(ls_jstr(&r, "topic"), "seg");
    assert_int_equal(ls_jint(&r, "partition"), 0);
    assert_int_equal(json_array_size(ls_jget(&r, "segments")), 1);
    json_t *s = segment(&r, 0);
    assert_int_equal(jint(s, "base_offset"), 0);
    assert_int_equal(jint(s, "next_offset"), 200);
    assert_int_equal(jint(s, "record_count"), 200);
    assert_int_equal(jint(s, "size_bytes"), 20 * BATCH);
    assert_true(json_is_true(json_object_get(s, "active")));
    assert_int_equal(jint(s, "max_timestamp"), T0 + 19);
    assert_int_equal(json_array_size(json_object_get(s, "files")), 3);
    json_t *log = file_named(s, ".log"), *idx = file_named(s, ".index"),
           *tix = file_named(s, ".timeindex");
    assert_non_null(log);
    assert_non_null(idx);
    assert_non_null(tix);
    assert_string_equal(json_string_value(json_object_get(log, "name")), "00000000000000000000.log");
    assert_string_equal(json_string_value(json_object_get(idx, "name")), "00000000000000000000.index");
    assert_string_equal(json_string_value(json_object_get(tix, "name")),
                        "00000000000000000000.timeindex");
    assert_int_equal(jint(log, "size_bytes"), 20 * BATCH);
    assert_int_equal(jint(log, "entries"), 20); /* batches */
    assert_int_equal(jint(idx, "entries"), 9);
    assert_int_equal(jint(tix, "entries"), 9);
    ls_resp_free(&r);
    /* The partition agrees. */
    assert_int_equal(ls_get(S, "/v1/topics/seg/partitions/0", &r), 0);
    assert_int_equal(ls_jint(&r, "segment_count"), 1);
    assert_int_equal(ls_jint(&r, "size_bytes"), 20 * BATCH);
    assert_int_equal(ls_jint(&r, "log_end_offset"), 200);
    ls_resp_free(&r);
}

static void test_offset_index(void **state)
{
    (void)state;
    ls_resp r;
    assert_int_equal(ls_get(S, SEGS "/0/index", &r), 0);
    assert_int_equal(r.status, 200);
    assert_int_equal(ls_jint(&r, "base_offset"), 0);
    assert_int_equal(ls_jint(&r, "entry_count"), 9);
    assert_int_equal(json_array_size(ls_jget(&r, "entries")), 9);
    /* Kafka's rule: batch 2 is the first to see > 4096 bytes since the last
     * entry (5462); its entry is (its last offset 29, its position 5462). */
    assert_int_equal(ls_jint(&r, "entries.0.offset"), 29);
    assert_int_equal(ls_jint(&r, "entries.0.position"), 2 * BATCH);
    for (int k = 0; k < 9; k++) {
        json_t *e = json_array_get(ls_jget(&r, "entries"), (size_t)k);
        assert_int_equal(jint(e, "offset"), 29 + 20 * k);
        assert_int_equal(jint(e, "position"), (2 + 2 * k) * BATCH);
    }
    ls_resp_free(&r);
    /* Paging. */
    assert_int_equal(ls_get(S, SEGS "/0/index?start=3&limit=2", &r), 0);
    assert_int_equal(r.status, 200);
    assert_int_equal(ls_jint(&r, "entry_count"), 9);
    assert_int_equal(json_array_size(ls_jget(&r, "entries")), 2);
    assert_int_equal(ls_jint(&r, "entries.0.offset"), 89);
    assert_int_equal(ls_jint(&r, "entries.1.offset"), 109);
    ls_resp_free(&r);
    assert_int_equal(ls_get(S, SEGS "/0/index?limit=0", &r), 0);
    CHECK_ERR(r, 400, "invalid_request");
    ls_resp_free(&r);
}

static void test_time_index(void **state)
{
    (void)state;
    ls_resp r;
    assert_int_equal(ls_get(S, SEGS "/0/timeindex", &r), 0);
    assert_int_equal(r.status, 200);
    assert_int_equal(ls_jint(&r, "entry_count"), 9);
    /* (max timestamp so far, the last offset of the batch holding it) */
    for (int k = 0; k < 9; k++) {
        json_t *e = json_array_get(ls_jget(&r, "entries"), (size_t)k);
        assert_int_equal(jint(e, "timestamp"), T0 + 2 + 2 * k);
        assert_int_equal(jint(e, "offset"), 29 + 20 * k);
    }
    ls_resp_free(&r);
    /* The time lookups use it: the first offset with timestamp >= T0+7. */
    assert_int_equal(ls_get(S, "/v1/topics/seg/partitions/0/offsets?timestamp=1794024676897", &r), 0);
    assert_int_equal(ls_jint(&r, "offset"), 70);
    assert_int_equal(ls_jint(&r, "timestamp"), T0 + 7);
    ls_resp_free(&r);
    assert_int_equal(
        ls_get(S, "/v1/topics/seg/partitions/0/records?timestamp=1794024676903&max_records=1", &r), 0);
    assert_int_equal(ls_jint(&r, "records.0.offset"), 130);
    assert_string_equal(ls_jstr(&r, "records.0.key"), "k-000130");
    ls_resp_free(&r);
}

static void test_batches(void **state)
{
    (void)state;
    ls_resp r;
    assert_int_equal(ls_get(S, SEGS "/0/batches", &r), 0);
    assert_int_equal(r.status, 200);
    assert_int_equal(ls_jint(&r, "base_offset"), 0);
    assert_int_equal(ls_jint(&r, "batch_count"), 20);
    assert_int_equal(json_array_size(ls_jget(&r, "batches")), 20);
    for (int b = 0; b < 20; b++) {
        json_t *h = json_array_get(ls_jget(&r, "batches"), (size_t)b);
        assert_int_equal(jint(h, "position"), b * BATCH);
        assert_int_equal(jint(h, "size_bytes"), BATCH);
        assert_int_equal(jint(h, "base_offset"), 10 * b);
        assert_int_equal(jint(h, "last_offset"), 10 * b + 9);
        assert_int_equal(jint(h, "record_count"), 10);
        assert_int_equal(jint(h, "base_timestamp"), T0 + b);
        assert_int_equal(jint(h, "max_timestamp"), T0 + b);
        assert_int_equal(jint(h, "magic"), 2);
        assert_int_equal(jint(h, "producer_id"), -1);
        assert_int_equal(jint(h, "producer_epoch"), -1);
        assert_int_equal(jint(h, "base_sequence"), -1);
        assert_int_equal(jint(h, "partition_leader_epoch"), 0);
        assert_string_equal(json_string_value(json_object_get(h, "compression")), "none");
        assert_string_equal(json_string_value(json_object_get(h, "timestamp_type")), "CreateTime");
        assert_true(json_is_true(json_object_get(h, "valid")));
        assert_true(json_is_false(json_object_get(h, "is_transactional")));
        assert_true(json_is_false(json_object_get(h, "is_control")));
        assert_int_equal(jint(h, "crc"), jint(h, "computed_crc"));
        assert_true(jint(h, "crc") >= 0);
    }
    /* Batches 0..19 differ only in offsets, keys and timestamps: CRCs differ. */
    assert_int_not_equal(ls_jint(&r, "batches.0.crc"), ls_jint(&r, "batches.1.crc"));
    ls_resp_free(&r);
    assert_int_equal(ls_get(S, SEGS "/0/batches?start=5&limit=3", &r), 0);
    assert_int_equal(r.status, 200);
    assert_int_equal(ls_jint(&r, "batch_count"), 20);
    assert_int_equal(json_array_size(ls_jget(&r, "batches")), 3);
    assert_int_equal(ls_jint(&r, "batches.0.position"), 5 * BATCH);
    assert_int_equal(ls_jint(&r, "batches.2.base_offset"), 70);
    ls_resp_free(&r);
    /* Every offset-index entry points at a batch start holding its offset. */
    ls_resp ri, rb;
    assert_int_equal(ls_get(S, SEGS "/0/index", &ri), 0);
    assert_int_equal(ls_get(S, SEGS "/0/batches", &rb), 0);
    size_t i;
    json_t *e;
    json_array_foreach(ls_jget(&ri, "entries"), i, e) {
        bool found = false;
        size_t j;
        json_t *h;
        json_array_foreach(ls_jget(&rb, "batches"), j, h) {
            if (jint(h, "position") == jint(e, "position")) {
                found = true;
                assert_int_equal(jint(h, "last_offset"), jint(e, "offset"));
            }
        }
        assert_true(found);
    }
    ls_resp_free(&ri);
    ls_resp_free(&rb);
}

/* kafka-format.md §13.4: six such batches, then a roll, give exactly the
 * sample segment's three files. */
static void test_matches_sample_segment(void **state)
{
    (void)state;
    assert_int_equal(ls_create_topic(S, "six", 1, "{\"segment.bytes\":1048576}"), 201);
    for (int b = 0; b < 6; b++)
        append_batch("six", b);
    ls_resp r;
    /* It takes no options: a body asking for one is refused and rolls nothing. */
    assert_int_equal(ls_post(S, "/v1/topics/six/partitions/0/segments:roll", "{\"force\":true}", &r), 0);
    assert_int_equal(ls_check_error(&r, 400, "invalid_request"), 0);
    ls_resp_free(&r);
    assert_int_equal(ls_post(S, "/v1/topics/six/partitions/0/segments:roll", "", &r), 0);
    assert_int_equal(r.status, 200);
    assert_true(json_is_true(ls_jget(&r, "rolled")));
    assert_int_equal(ls_jint(&r, "active_segment_base_offset"), 60);
    ls_resp_free(&r);
    static const char *const names[] = {"00000000000000000000.log", "00000000000000000000.index",
                                        "00000000000000000000.timeindex"};
    for (size_t i = 0; i < 3; i++) {
        char ours[1024], want[512];
        part_file(ours, sizeof ours, "six", names[i]);
        snprintf(want, sizeof want, "tests/data/sample-segment/%s", names[i]);
        size_t n1, n2;
        unsigned char *a = ls_read_file(ours, &n1), *b = ls_read_file(want, &n2);
        assert_non_null(a);
        assert_non_null(b);
        if (n1 != n2 || memcmp(a, b, n1))
            fprintf(stderr, "# %s differs from the sample (%zu vs %zu bytes)\n", names[i], n1, n2);
        assert_int_equal(n1, n2);
        assert_memory_equal(a, b, n1);
        free(a);
        free(b);
    }
    /* The sealed segment's dumps say the same. */
    assert_int_equal(ls_get(S, "/v1/topics/six/partitions/0/segments/0/timeindex", &r), 0);
    assert_int_equal(ls_jint(&r, "entry_count"), 3);
    assert_int_equal(ls_jint(&r, "entries.2.timestamp"), T0 + 5);
    assert_int_equal(ls_jint(&r, "entries.2.offset"), 59);
    ls_resp_free(&r);
}

/* ---- roll ------------------------------------------------------------------------ */

static void test_roll(void **state)
{
    (void)state;
    ls_resp r;
    assert_int_equal(ls_post(S, SEGS ":roll", "", &r), 0);
    assert_int_equal(r.status, 200);
    assert_true(json_is_true(ls_jget(&r, "rolled")));
    assert_int_equal(ls_jint(&r, "previous_base_offset"), 0);
    assert_int_equal(ls_jint(&r, "active_segment_base_offset"), 200); /* = log end offset */
    ls_resp_free(&r);

    /* Rolling an empty active segment is a no-op. */
    char *before = ls_dir_listing(S->dir);
    assert_int_equal(ls_post(S, SEGS ":roll", "", &r), 0);
    assert_int_equal(r.status, 200);
    assert_true(json_is_false(ls_jget(&r, "rolled")));
    assert_int_equal(ls_jint(&r, "active_segment_base_offset"), 200);
    assert_int_equal(ls_jint(&r, "previous_base_offset"), 200);
    ls_resp_free(&r);
    char *after = ls_dir_listing(S->dir);
    assert_string_equal(before, after);
    free(before);
    free(after);

    assert_int_equal(ls_get(S, SEGS, &r), 0);
    assert_int_equal(json_array_size(ls_jget(&r, "segments")), 2);
    json_t *old = segment(&r, 0), *cur = segment(&r, 1);
    assert_true(json_is_false(json_object_get(old, "active")));
    assert_int_equal(jint(old, "next_offset"), 200);
    /* Sealed: the final time-index entry (T0+19, 199), files trimmed. */
    assert_int_equal(jint(file_named(old, ".index"), "entries"), 9);
    assert_int_equal(jint(file_named(old, ".index"), "size_bytes"), 9 * 8);
    assert_int_equal(jint(file_named(old, ".timeindex"), "entries"), 10);
    assert_int_equal(jint(file_named(old, ".timeindex"), "size_bytes"), 10 * 12);
    assert_true(json_is_true(json_object_get(cur, "active")));
    assert_int_equal(jint(cur, "base_offset"), 200);
    assert_int_equal(jint(cur, "next_offset"), 200);
    assert_int_equal(jint(cur, "record_count"), 0);
    assert_int_equal(jint(cur, "size_bytes"), 0);
    assert_string_equal(json_string_value(json_object_get(file_named(cur, ".log"), "name")),
                        "00000000000000000200.log");
    ls_resp_free(&r);
    assert_int_equal(ls_get(S, SEGS "/0/timeindex?start=9", &r), 0);
    assert_int_equal(ls_jint(&r, "entries.0.timestamp"), T0 + 19);
    assert_int_equal(ls_jint(&r, "entries.0.offset"), 199);
    ls_resp_free(&r);

    /* New appends go to the new segment, whose index holds absolute offsets. */
    for (int b = 20; b < 25; b++)
        append_batch("seg", b);
    assert_int_equal(ls_get(S, SEGS "/200/index", &r), 0);
    assert_int_equal(r.status, 200);
    assert_int_equal(ls_jint(&r, "base_offset"), 200);
    assert_int_equal(ls_jint(&r, "entry_count"), 2);
    assert_int_equal(ls_jint(&r, "entries.0.offset"), 229);
    assert_int_equal(ls_jint(&r, "entries.0.position"), 2 * BATCH);
    assert_int_equal(ls_jint(&r, "entries.1.offset"), 249);
    ls_resp_free(&r);
    assert_int_equal(ls_get(S, SEGS "/200/batches", &r), 0);
    assert_int_equal(ls_jint(&r, "batch_count"), 5);
    assert_int_equal(ls_jint(&r, "batches.0.position"), 0);
    assert_int_equal(ls_jint(&r, "batches.0.base_offset"), 200);
    ls_resp_free(&r);
    assert_int_equal(ls_get(S, "/v1/topics/seg/partitions/0", &r), 0);
    assert_int_equal(ls_jint(&r, "segment_count"), 2);
    assert_int_equal(ls_jint(&r, "active_segment_base_offset"), 200);
    assert_int_equal(ls_jint(&r, "size_bytes"), 25 * BATCH);
    ls_resp_free(&r);

    /* A read crosses the segment boundary. */
    assert_int_equal(ls_get(S, "/v1/topics/seg/partitions/0/records?offset=195&max_records=10", &r), 0);
    assert_int_equal(r.status, 200);
    assert_int_equal(json_array_size(ls_jget(&r, "records")), 10);
    assert_int_equal(ls_jint(&r, "records.0.offset"), 195);
    assert_int_equal(ls_jint(&r, "records.9.offset"), 204);
    assert_string_equal(ls_jstr(&r, "records.5.key"), "k-000200");
    assert_int_equal(ls_jint(&r, "next_offset"), 205);
    ls_resp_free(&r);
    assert_int_equal(ls_get(S, "/v1/topics/seg/partitions/0/records?offset=0&max_records=10000", &r), 0);
    assert_int_equal(json_array_size(ls_jget(&r, "records")), 250);
    assert_int_equal(ls_jint(&r, "next_offset"), 250);
    ls_resp_free(&r);
}

/* Base offsets of topic's partition-0 segments, in order; returns how many. */
static size_t segment_bases(const char *topic, long long *bases, size_t max)
{
    char path[256];
    snprintf(path, sizeof path, "/v1/topics/%s/partitions/0/segments", topic);
    ls_resp r;
    assert_int_equal(ls_get(S, path, &r), 0);
    assert_int_equal(r.status, 200);
    size_t n = json_array_size(ls_jget(&r, "segments"));
    for (size_t i = 0; i < n && i < max; i++)
        bases[i] = jint(segment(&r, i), "base_offset");
    ls_resp_free(&r);
    return n;
}

/* DESIGN §3 / kafka-format.md §14: rolls by size and by record time. */
static void test_automatic_rolls(void **state)
{
    (void)state;
    long long bases[8];
    /* segment.ms=1000: roll when the incoming batch's largest timestamp is
     * more than 1000 ms past the segment's first timestamp. */
    assert_int_equal(ls_create_topic(S, "tr", 1, "{\"segment.ms\":1000}"), 201);
    append_batch_ts("tr", 0, T0);
    append_batch_ts("tr", 1, T0 + 500);
    append_batch_ts("tr", 2, T0 + 1000); /* exactly segment.ms: no roll */
    assert_int_equal(segment_bases("tr", bases, 8), 1);
    append_batch_ts("tr", 3, T0 + 1001);
    assert_int_equal(segment_bases("tr", bases, 8), 2);
    assert_int_equal(bases[1], 30);
    append_batch_ts("tr", 4, T0 + 1900);
    append_batch_ts("tr", 5, T0 + 2100);
    assert_int_equal(segment_bases("tr", bases, 8), 3);
    assert_int_equal(bases[2], 50);

    /* segment.bytes=1048576 holds 383 such batches (1,045,973 bytes); the
     * 384th would pass the limit, so it starts segment 3830. */
    assert_int_equal(ls_create_topic(S, "sz", 1, "{\"segment.bytes\":1048576}"), 201);
    for (int b = 0; b < 384; b++)
        append_batch("sz", b);
    assert_int_equal(segment_bases("sz", bases, 8), 2);
    assert_int_equal(bases[1], 3830);
    ls_resp r;
    assert_int_equal(ls_get(S, "/v1/topics/sz/partitions/0/segments", &r), 0);
    json_t *old = segment(&r, 0), *cur = segment(&r, 1);
    assert_int_equal(jint(old, "size_bytes"), 383 * BATCH);
    assert_int_equal(jint(old, "next_offset"), 3830);
    assert_int_equal(jint(cur, "size_bytes"), BATCH);
    /* Entries at batches 2, 4, ..., 382; the final time entry equals the last. */
    assert_int_equal(jint(file_named(old, ".index"), "entries"), 191);
    assert_int_equal(jint(file_named(old, ".index"), "size_bytes"), 191 * 8);
    assert_int_equal(jint(file_named(old, ".timeindex"), "entries"), 191);
    ls_resp_free(&r);
    assert_int_equal(ls_get(S, "/v1/topics/sz/partitions/0/records?offset=3825&max_records=10", &r), 0);
    assert_int_equal(json_array_size(ls_jget(&r, "records")), 10);
    assert_string_equal(ls_jstr(&r, "records.5.key"), "k-003830");
    ls_resp_free(&r);
}

static void test_segment_not_found(void **state)
{
    (void)state;
    static const char *const missing[] = {SEGS "/7/index", SEGS "/7/timeindex", SEGS "/7/batches",
                                          SEGS "/199/index", SEGS "/201/batches",
                                          SEGS "/100000/timeindex"};
    for (size_t i = 0; i < sizeof missing / sizeof missing[0]; i++) {
        ls_resp r;
        assert_int_equal(ls_get(S, missing[i], &r), 0);
        if (ls_check_error(&r, 404, "segment_not_found"))
            fprintf(stderr, "# GET %s\n", missing[i]);
        CHECK_ERR(r, 404, "segment_not_found");
        assert_true(ls_jint(&r, "details.base_offset") >= 7);
        ls_resp_free(&r);
    }
    static const char *const bad[] = {SEGS "/abc/index", SEGS "/-1/timeindex", SEGS "/1x/batches",
                                      SEGS "/0/batches?start=-1", SEGS "/0/index?limit=abc",
                                      SEGS "/0/batches?limit=100001"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ls_resp r;
        assert_int_equal(ls_get(S, bad[i], &r), 0);
        if (ls_check_error(&r, 400, "invalid_request"))
            fprintf(stderr, "# GET %s\n", bad[i]);
        CHECK_ERR(r, 400, "invalid_request");
        ls_resp_free(&r);
    }
    /* -1 is an integer: the refusal says what a base offset must be. */
    ls_resp r;
    assert_int_equal(ls_get(S, SEGS "/-1/timeindex", &r), 0);
    assert_string_equal(ls_jstr(&r, "message"), "segment base offset must be a non-negative integer");
    ls_resp_free(&r);
    assert_int_equal(ls_get(S, "/v1/topics/seg/partitions/1/segments", &r), 0);
    CHECK_ERR(r, 404, "unknown_partition");
    ls_resp_free(&r);
    assert_int_equal(ls_get(S, "/v1/topics/seg/partitions/1/segments/0/index", &r), 0);
    CHECK_ERR(r, 404, "unknown_partition");
    ls_resp_free(&r);
    assert_int_equal(ls_post(S, "/v1/topics/nope/partitions/0/segments:roll", "", &r), 0);
    CHECK_ERR(r, 404, "unknown_topic");
    ls_resp_free(&r);
}

/* Every file the listing names exists with that size, and every segment file
 * on disk is listed. */
static void check_files_match_disk(void)
{
    ls_resp r;
    assert_int_equal(ls_get(S, SEGS, &r), 0);
    assert_int_equal(r.status, 200);
    size_t i, listed = 0;
    json_t *s;
    json_array_foreach(ls_jget(&r, "segments"), i, s) {
        size_t j;
        json_t *f;
        json_array_foreach(json_object_get(s, "files"), j, f) {
            char path[1024];
            part_file(path, sizeof path, "seg", json_string_value(json_object_get(f, "name")));
            long long size = ls_file_size(path);
            if (size != jint(f, "size_bytes"))
                fprintf(stderr, "# %s: %lld on disk, %lld listed\n", path, size, jint(f, "size_bytes"));
            assert_int_equal(size, jint(f, "size_bytes"));
            listed++;
        }
        if (json_is_false(json_object_get(s, "active"))) {
            /* sealed segments' indexes hold exactly their entries */
            assert_int_equal(jint(file_named(s, ".index"), "size_bytes"),
                             8 * jint(file_named(s, ".index"), "entries"));
            assert_int_equal(jint(file_named(s, ".timeindex"), "size_bytes"),
                             12 * jint(file_named(s, ".timeindex"), "entries"));
        }
        assert_int_equal(jint(file_named(s, ".log"), "size_bytes"), jint(s, "size_bytes"));
    }
    ls_resp_free(&r);
    char dir[1024];
    snprintf(dir, sizeof dir, "%.255s/seg-0", S->dir);
    DIR *d = opendir(dir);
    assert_non_null(d);
    size_t on_disk = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t n = strlen(e->d_name);
        if ((n > 4 && !strcmp(e->d_name + n - 4, ".log")) ||
            (n > 6 && !strcmp(e->d_name + n - 6, ".index")) ||
            (n > 10 && !strcmp(e->d_name + n - 10, ".timeindex")))
            on_disk++;
    }
    closedir(d);
    assert_int_equal(on_disk, listed);
}

static void test_files_match_disk(void **state)
{
    (void)state;
    check_files_match_disk();
}

static void test_restart_keeps_everything(void **state)
{
    (void)state;
    ls_resp seg1, idx0, tix0, bat0, bat1, idx1, tix1;
    assert_int_equal(ls_get(S, SEGS, &seg1), 0);
    assert_int_equal(ls_get(S, SEGS "/0/index", &idx0), 0);
    assert_int_equal(ls_get(S, SEGS "/0/timeindex", &tix0), 0);
    assert_int_equal(ls_get(S, SEGS "/0/batches", &bat0), 0);
    assert_int_equal(ls_get(S, SEGS "/200/batches", &bat1), 0);
    assert_int_equal(ls_get(S, SEGS "/200/index", &idx1), 0);
    assert_int_equal(ls_get(S, SEGS "/200/timeindex", &tix1), 0);

    assert_int_equal(ls_stop(S), 0);
    assert_int_equal(ls_restart(S, NULL), 0);

    ls_resp r;
    assert_int_equal(ls_get(S, "/v1/info", &r), 0);
    assert_true(json_is_true(ls_jget(&r, "startup.clean_shutdown")));
    assert_int_equal(ls_jint(&r, "startup.segments_recovered"), 0);
    assert_int_equal(ls_jint(&r, "startup.bytes_truncated"), 0);
    ls_resp_free(&r);

    assert_int_equal(ls_get(S, SEGS, &r), 0);
    assert_int_equal(json_array_size(ls_jget(&r, "segments")), 2);
    for (size_t i = 0; i < 2; i++) {
        json_t *a = segment(&seg1, i), *b = segment(&r, i);
        static const char *const keys[] = {"base_offset", "next_offset", "record_count", "size_bytes",
                                           "max_timestamp"};
        for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++)
            assert_int_equal(jint(a, keys[k]), jint(b, keys[k]));
        assert_true(json_equal(json_object_get(a, "active"), json_object_get(b, "active")));
        assert_int_equal(jint(file_named(a, ".index"), "entries"),
                         jint(file_named(b, ".index"), "entries"));
    }
    /* The sealed segment is untouched: same files, same entries. */
    assert_true(json_equal(segment(&seg1, 0), segment(&r, 0)));
    ls_resp_free(&r);

    ls_resp *before[] = {&idx0, &tix0, &bat0, &bat1, &idx1};
    const char *paths[] = {SEGS "/0/index", SEGS "/0/timeindex", SEGS "/0/batches", SEGS "/200/batches",
                           SEGS "/200/index"};
    const char *arrays[] = {"entries", "entries", "batches", "batches", "entries"};
    for (size_t i = 0; i < 5; i++) {
        assert_int_equal(ls_get(S, paths[i], &r), 0);
        assert_int_equal(r.status, 200);
        if (!json_equal(ls_jget(before[i], arrays[i]), ls_jget(&r, arrays[i])))
            fprintf(stderr, "# %s changed across the restart\n", paths[i]);
        assert_true(json_equal(ls_jget(before[i], arrays[i]), ls_jget(&r, arrays[i])));
        ls_resp_free(&r);
    }
    /* The active segment's time index keeps its entries (close may add the
     * final one). */
    assert_int_equal(ls_get(S, SEGS "/200/timeindex", &r), 0);
    json_t *ea = ls_jget(&tix1, "entries"), *eb = ls_jget(&r, "entries");
    assert_true(json_array_size(eb) >= json_array_size(ea));
    for (size_t i = 0; i < json_array_size(ea); i++)
        assert_true(json_equal(json_array_get(ea, i), json_array_get(eb, i)));
    ls_resp_free(&r);
    for (size_t i = 0; i < 5; i++)
        ls_resp_free(before[i]);
    ls_resp_free(&tix1);
    ls_resp_free(&seg1);

    /* Records, appends and rolls carry on. */
    assert_int_equal(ls_get(S, "/v1/topics/seg/partitions/0/records?offset=199&max_records=2", &r), 0);
    assert_string_equal(ls_jstr(&r, "records.0.key"), "k-000199");
    assert_string_equal(ls_jstr(&r, "records.1.key"), "k-000200");
    ls_resp_free(&r);
    append_batch("seg", 25);
    assert_int_equal(ls_log_end_offset(S, "seg", 0), 260);
    check_files_match_disk();
    /* The sample-identical topic too. */
    char path[1024];
    part_file(path, sizeof path, "six", "00000000000000000000.log");
    assert_int_equal(ls_file_size(path), 6 * BATCH);
}

/* kill -9, then restart: a torn tail is truncated and reported, and recovery
 * rebuilds the active segment's indexes by kafka-format.md §13.3. */
static void test_unclean_restart(void **state)
{
    (void)state;
    for (int b = 26; b < 30; b++)
        append_batch("seg", b);
    ls_resp idx, tix, bat;
    assert_int_equal(ls_get(S, SEGS "/200/index", &idx), 0);
    assert_int_equal(ls_get(S, SEGS "/200/timeindex", &tix), 0);
    assert_int_equal(ls_get(S, SEGS "/200/batches", &bat), 0);
    assert_int_equal(ls_jint(&idx, "entry_count"), 4);
    char log200[1024];
    part_file(log200, sizeof log200, "seg", "00000000000000000200.log");
    long long log_size = ls_file_size(log200);
    assert_int_equal(log_size, 10 * BATCH);

    ls_kill9(S);
    /* A torn write: the first 100 bytes of a batch that claims 200. */
    FILE *f = fopen(log200, "ab");
    assert_non_null(f);
    static const unsigned char junk[100] = {0, 0, 0, 0, 0, 0, 1, 44, 0, 0, 0, 200};
    assert_int_equal(fwrite(junk, 1, sizeof junk, f), sizeof junk);
    fclose(f);
    assert_int_equal(ls_restart(S, NULL), 0);

    ls_resp r;
    assert_int_equal(ls_get(S, "/v1/info", &r), 0);
    assert_true(json_is_false(ls_jget(&r, "startup.clean_shutdown")));
    assert_true(ls_jint(&r, "startup.segments_recovered") >= 1);
    assert_int_equal(ls_jint(&r, "startup.bytes_truncated"), 100);
    ls_resp_free(&r);
    assert_int_equal(ls_file_size(log200), log_size);
    assert_int_equal(ls_log_end_offset(S, "seg", 0), 300);

    /* Before the kill, the append path made its entries as Kafka does: a
     * segment opened again (the clean restart above, after batch 24) starts
     * counting bytes since the last entry from 0, so batches 27 and 29 got
     * them.  Recovery (§13.3) rebuilds from the file alone: batches 2, 4, 6, 8
     * of the segment, plus the final "largest timestamp" time-index entry. */
    static const long long before_off[][2] = {{229, 5462}, {249, 10924}, {279, 19117}, {299, 24579}};
    static const long long rebuilt_off[][2] = {{229, 5462}, {249, 10924}, {269, 16386}, {289, 21848}};
    static const long long rebuilt_time[][2] = {{T0 + 22, 229}, {T0 + 24, 249}, {T0 + 26, 269},
                                                {T0 + 28, 289}, {T0 + 29, 299}};
    for (size_t i = 0; i < 4; i++) {
        json_t *e = json_array_get(ls_jget(&idx, "entries"), i);
        assert_int_equal(jint(e, "offset"), before_off[i][0]);
        assert_int_equal(jint(e, "position"), before_off[i][1]);
        e = json_array_get(ls_jget(&tix, "entries"), i);
        assert_int_equal(jint(e, "offset"), before_off[i][0]);
        assert_int_equal(jint(e, "timestamp"), T0 + 20 + (before_off[i][0] - 200) / 10);
    }
    assert_int_equal(ls_get(S, SEGS "/200/index", &r), 0);
    if (ls_jint(&r, "entry_count") != 4)
        fprintf(stderr, "# rebuilt offset index: %s\n", r.body);
    assert_int_equal(ls_jint(&r, "entry_count"), 4);
    for (size_t i = 0; i < 4; i++) {
        json_t *e = json_array_get(ls_jget(&r, "entries"), i);
        assert_int_equal(jint(e, "offset"), rebuilt_off[i][0]);
        assert_int_equal(jint(e, "position"), rebuilt_off[i][1]);
    }
    ls_resp_free(&r);
    assert_int_equal(ls_get(S, SEGS "/200/timeindex", &r), 0);
    if (ls_jint(&r, "entry_count") != 5)
        fprintf(stderr, "# rebuilt time index: %s\n", r.body);
    assert_int_equal(ls_jint(&r, "entry_count"), 5);
    for (size_t i = 0; i < 5; i++) {
        json_t *e = json_array_get(ls_jget(&r, "entries"), i);
        assert_int_equal(jint(e, "timestamp"), rebuilt_time[i][0]);
        assert_int_equal(jint(e, "offset"), rebuilt_time[i][1]);
    }
    ls_resp_free(&r);
    assert_int_equal(ls_get(S, SEGS "/200/batches", &r), 0);
    assert_true(json_equal(ls_jget(&bat, "batches"), ls_jget(&r, "batches")));
    ls_resp_free(&r);
    ls_resp_free(&idx);
    ls_resp_free(&tix);
    ls_resp_free(&bat);

    /* Appends continue at the right offset and position. */
    append_batch("seg", 30);
    assert_int_equal(ls_get(S, SEGS "/200/batches?start=10", &r), 0);
    assert_int_equal(ls_jint(&r, "batches.0.position"), 10 * BATCH);
    assert_int_equal(ls_jint(&r, "batches.0.base_offset"), 300);
    assert_true(json_is_true(ls_jget(&r, "batches.0.valid")));
    ls_resp_free(&r);
    check_files_match_disk();
}

/* The listing pages as the dumps do: a partition of thousands of segments
 * answered them all, every batch header of the log read for one request. */
static void test_listing_pages(void **state)
{
    (void)state;
    assert_int_equal(ls_create_topic(S, "pg", 1, "{\"segment.bytes\":1048576}"), 201);
    ls_resp r;
    for (int b = 0; b < 4; b++) {
        append_batch("pg", b);
        assert_int_equal(ls_post(S, "/v1/topics/pg/partitions/0/segments:roll", "", &r), 0);
        assert_int_equal(r.status, 200);
        ls_resp_free(&r);
    }
    /* 4 sealed segments (bases 0, 10, 20, 30) and the empty active one at 40 */
    assert_int_equal(ls_get(S, "/v1/topics/pg/partitions/0/segments?start=1&limit=2", &r), 0);
    assert_int_equal(r.status, 200);
    assert_int_equal(ls_jint(&r, "segment_count"), 5);
    assert_int_equal(json_array_size(ls_jget(&r, "segments")), 2);
    assert_int_equal(jint(segment(&r, 0), "base_offset"), 10);
    assert_int_equal(jint(segment(&r, 0), "record_count"), 10);
    assert_int_equal(jint(segment(&r, 1), "base_offset"), 20);
    ls_resp_free(&r);
    assert_int_equal(ls_get(S, "/v1/topics/pg/partitions/0/segments?start=4", &r), 0);
    assert_int_equal(r.status, 200);
    assert_int_equal(json_array_size(ls_jget(&r, "segments")), 1);
    assert_int_equal(jint(segment(&r, 0), "base_offset"), 40);
    assert_true(json_is_true(json_object_get(segment(&r, 0), "active")));
    ls_resp_free(&r);
    assert_int_equal(ls_get(S, "/v1/topics/pg/partitions/0/segments?start=9", &r), 0);
    assert_int_equal(r.status, 200);
    assert_int_equal(ls_jint(&r, "segment_count"), 5);
    assert_int_equal(json_array_size(ls_jget(&r, "segments")), 0);
    ls_resp_free(&r);
    assert_int_equal(ls_get(S, "/v1/topics/pg/partitions/0/segments?limit=0", &r), 0);
    assert_int_equal(ls_check_error(&r, 400, "invalid_request"), 0);
    ls_resp_free(&r);
}

static void test_zz_clean_stop(void **state)
{
    (void)state;
    assert_int_equal(ls_stop(S), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_listing),
        cmocka_unit_test(test_offset_index),
        cmocka_unit_test(test_time_index),
        cmocka_unit_test(test_batches),
        cmocka_unit_test(test_matches_sample_segment),
        cmocka_unit_test(test_roll),
        cmocka_unit_test(test_automatic_rolls),
        cmocka_unit_test(test_listing_pages),
        cmocka_unit_test(test_segment_not_found),
        cmocka_unit_test(test_files_match_disk),
        cmocka_unit_test(test_restart_keeps_everything),
        cmocka_unit_test(test_unclean_restart),
        cmocka_unit_test(test_zz_clean_stop),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
