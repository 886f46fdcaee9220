/*
 * test_binary_append.c - appends of real Kafka-client batches (Content-Type:
 * application/octet-stream), against the real server binary.
 *
 * The batches are the kafkajs 2.2.4 producer's own bytes, committed under
 * tests/data/kafkajs with a MANIFEST.json of what they hold (gen.js there
 * makes them; see its README).  Covers: each file appended and answered
 * (base_offset, last_offset, record_count), read back as JSON (equal to the
 * manifest), as raw batches (the bytes sent with only baseOffset and
 * partitionLeaderEpoch changed, CRC untouched), as SSE and NDJSON; a second
 * append getting the next offsets; LogAppendTime topics (attribute bit 3,
 * maxTimestamp = server clock, CRC recomputed and valid, record bytes
 * untouched); compression.type=producer keeping each codec and every other
 * compression.type recompressing (stored codec per the batch dump, xerial
 * snappy and Kafka's lz4 frame on disk, valid CRCs, producer fields kept);
 * JSON appends stored with the topic's codec; and every kind of bad batch
 * refused with 422 naming the batch, nothing written (data dir listing and
 * log end offset unchanged).
 *
 * One server serves the group; its periodic jobs are held off so the data
 * dir only changes when a test appends.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "harness.h"
#include "read_util.h"

#include "eng_batch.h"
#include "eng_endian.h"

#include <lz4frame.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static ls_server g_srv;
static ls_server *S = &g_srv;
static json_t *M; /* MANIFEST.json */

static const char *const settings[] = {"log.initial.task.delay.ms=3600000", NULL};

static int group_setup(void **state)
{
    (void)state;
    M = ru_manifest();
    if (!M || json_array_size(json_object_get(M, "files")) < 8) {
        fprintf(stderr, "# tests/data/kafkajs/MANIFEST.json is missing or short\n");
        return -1;
    }
    return ls_start(S, settings);
}

static int group_teardown(void **state)
{
    (void)state;
    ls_stop(S);
    ls_cleanup(S);
    json_decref(M);
    return 0;
}

/* POST bytes to topic-0 as a producer would. */
static void post_bin(const char *topic, const void *bytes, size_t len, ls_resp *r)
{
    char path[256];
    snprintf(path, sizeof path, "/v1/topics/%s/partitions/0/records", topic);
    assert_int_equal(ls_http(S, "POST", path, "application/octet-stream", bytes, len, NULL, r), 0);
}

static void read_json(const char *topic, long long offset, ls_resp *r)
{
    char path[256];
    snprintf(path, sizeof path, "/v1/topics/%s/partitions/0/records?offset=%lld&max_records=10000",
             topic, offset);
    assert_int_equal(ls_get(S, path, r), 0);
    assert_int_equal(r->status, 200);
}

static void read_raw(const char *topic, long long offset, ls_resp *r)
{
    char path[256];
    snprintf(path, sizeof path, "/v1/topics/%s/partitions/0/records?offset=%lld", topic, offset);
    assert_int_equal(ru_get_accept(S, path, "application/octet-stream", NULL, r), 0);
    assert_int_equal(r->status, 200);
}

/* GET .../segments/0/batches; the response is left in *r. */
static void batches(const char *topic, ls_resp *r)
{
    char path[256];
    snprintf(path, sizeof path, "/v1/topics/%s/partitions/0/segments/0/batches", topic);
    assert_int_equal(ls_get(S, path, r), 0);
    assert_int_equal(r->status, 200);
}

/* Raw bytes read == sent bytes, but for baseOffset (must be base, base +
 * count of the batches before...) and partitionLeaderEpoch (must be 0). */
static void assert_stored_as_sent(const uint8_t *sent, size_t len, const ls_resp *raw, long long base)
{
    assert_int_equal(raw->len, len);
    const uint8_t *got = (const uint8_t *)raw->body;
    long long next = base;
    for (size_t pos = 0; pos < len;) {
        size_t size = (size_t)ru_be32(sent + pos + 8) + 12;
        assert_int_equal((long long)ru_be64(got + pos), next);
        assert_int_equal(ru_be32(got + pos + 12), 0);
        assert_memory_equal(got + pos + 8, sent + pos + 8, 4);          /* length */
        assert_memory_equal(got + pos + 16, sent + pos + 16, size - 16); /* magic, CRC, the rest */
        next += (long long)ru_be32(sent + pos + 23) + 1;
        pos += size;
    }
}

/* ---- the kafkajs files, one topic each ----------------------------------------- */

static void check_streams(const char *topic, json_t *recs, size_t n)
{
    char path[256];
    ls_resp r;
    int comments;
    snprintf(path, sizeof path, "/v1/topics/%s/partitions/0/records?offset=0&max_records=%zu", topic, n);
    assert_int_equal(ru_get_accept(S, path, "text/event-stream", NULL, &r), 0);
    assert_int_equal(r.status, 200);
    assert_non_null(strstr(ls_header(&r, "Content-Type"), "text/event-stream"));
    json_t *ev = ru_sse_parse(r.body, r.len, &comments);
    assert_int_equal(json_array_size(ev), n + 1);
    json_t *data = json_array();
    for (size_t i = 0; i < n; i++) {
        json_t *e = json_array_get(ev, i);
        assert_string_equal(json_string_value(json_object_get(e, "event")), "record");
        assert_int_equal(json_integer_value(json_object_get(e, "id")), (json_int_t)i);
        json_array_append(data, json_object_get(e, "data"));
    }
    assert_int_equal(ru_records_match(data, recs, 0, 0, -1), 0);
    json_t *end = json_array_get(ev, n);
    assert_string_equal(json_string_value(json_object_get(end, "event")), "end");
    assert_int_equal(json_integer_value(json_object_get(json_object_get(end, "data"), "next_offset")),
                     (json_int_t)n);
    json_decref(data);
    json_decref(ev);
    ls_resp_free(&r);

    assert_int_equal(ru_get_accept(S, path, "application/x-ndjson", NULL, &r), 0);
    assert_int_equal(r.status, 200);
    json_t *lines = ru_ndjson_parse(r.body, r.len);
    assert_int_equal(json_array_size(lines), n + 1);
    json_t *cursor = json_array_get(lines, n);
    assert_int_equal(json_integer_value(json_object_get(cursor, "next_offset")), (json_int_t)n);
    assert_null(json_object_get(cursor, "offset"));
    json_array_remove(lines, n);
    assert_int_equal(ru_records_match(lines, recs, 0, 0, -1), 0);
    json_decref(lines);
    ls_resp_free(&r);
}

static void test_kafkajs_files_append_and_read_back(void **state)
{
    (void)state;
    size_t i, done = 0;
    json_t *f;
    json_array_foreach(json_object_get(M, "files"), i, f) {
        const char *file = json_string_value(json_object_get(f, "file"));
        if (!strcmp(file, "future.bin"))
            continue; /* its 2100 timestamp is for the window test */
        char topic[64];
        snprintf(topic, sizeof topic, "kj-%.*s", (int)(strlen(file) - 4), file);
        assert_int_equal(ls_create_topic(S, topic, 1, NULL), 201);
        size_t len;
        uint8_t *bytes = ru_kjs_file(file, &len);
        assert_non_null(bytes);
        assert_int_equal(len, json_integer_value(json_object_get(f, "size")));
        json_t *recs = json_object_get(f, "records");
        long long n = json_integer_value(json_object_get(f, "record_count"));
        fprintf(stderr, "# %s: %lld records in %zu batch(es)\n", file, n,
                json_array_size(json_object_get(f, "batches")));

        ls_resp r;
        post_bin(topic, bytes, len, &r);
        if (r.status != 200)
            fprintf(stderr, "# %s: %s\n", file, r.body);
        assert_int_equal(r.status, 200);
        assert_int_equal(ls_jint(&r, "base_offset"), 0);
        assert_int_equal(ls_jint(&r, "last_offset"), n - 1);
        assert_int_equal(ls_jint(&r, "record_count"), n);
        assert_int_equal(ls_jint(&r, "high_watermark"), n);
        assert_int_equal(ls_jint(&r, "batch_bytes"), (long long)len);
        assert_string_equal(ls_jstr(&r, "timestamp_type"), "CreateTime");
        ls_resp_free(&r);

        read_json(topic, 0, &r);
        assert_int_equal(ru_records_match(ls_jget(&r, "records"), recs, 0, 0, -1), 0);
        assert_int_equal(ls_jint(&r, "next_offset"), n);
        ls_resp_free(&r);

        read_raw(topic, 0, &r);
        assert_stored_as_sent(bytes, len, &r, 0);
        assert_int_equal(atoll(ls_header(&r, "X-Next-Offset")), n);
        assert_int_equal(atoll(ls_header(&r, "X-High-Watermark")), n);
        ls_resp_free(&r);

        /* The dump agrees: the producer's codec, epoch 0, CRC valid. */
        batches(topic, &r);
        json_t *want = json_object_get(f, "batches");
        assert_int_equal(json_array_size(ls_jget(&r, "batches")), json_array_size(want));
        for (size_t b = 0; b < json_array_size(want); b++) {
            json_t *got = json_array_get(ls_jget(&r, "batches"), b), *w = json_array_get(want, b);
            assert_string_equal(json_string_value(json_object_get(got, "compression")),
                                json_string_value(json_object_get(w, "codec")));
            assert_int_equal(json_integer_value(json_object_get(got, "partition_leader_epoch")), 0);
            assert_true(json_is_true(json_object_get(got, "valid")));
            assert_int_equal(json_integer_value(json_object_get(got, "crc")),
                             json_integer_value(json_object_get(w, "crc")));
            assert_int_equal(json_integer_value(json_object_get(got, "producer_id")),
                             json_integer_value(json_object_get(w, "producer_id")));
            assert_int_equal(json_integer_value(json_object_get(got, "base_sequence")),
                             json_integer_value(json_object_get(w, "base_sequence")));
            assert_int_equal(json_integer_value(json_object_get(got, "base_timestamp")),
                             json_integer_value(json_object_get(w, "first_timestamp")));
        }
        ls_resp_free(&r);

        check_streams(topic, recs, (size_t)n);

        /* Again: the same bytes take the next offsets, unless an
         * idempotent producer built them: then they are its retry,
         * answered with the first offsets and not stored twice. */
        post_bin(topic, bytes, len, &r);
        assert_int_equal(r.status, 200);
        if (json_integer_value(json_object_get(json_array_get(json_object_get(f, "batches"), 0),
                                               "producer_id")) >= 0) {
            assert_int_equal(ls_jint(&r, "base_offset"), 0);
            assert_int_equal(ls_jint(&r, "last_offset"), n - 1);
            assert_true(json_is_true(ls_jget(&r, "duplicate")));
            assert_int_equal(ls_jint(&r, "high_watermark"), n);
            ls_resp_free(&r);
            free(bytes);
            done++;
            continue;
        }
        assert_null(ls_jget(&r, "duplicate"));
        assert_int_equal(ls_jint(&r, "base_offset"), n);
        assert_int_equal(ls_jint(&r, "last_offset"), 2 * n - 1);
        ls_resp_free(&r);
        read_raw(topic, n, &r);
        assert_stored_as_sent(bytes, len, &r, n);
        ls_resp_free(&r);
        read_json(topic, n, &r);
        assert_int_equal(ru_records_match(ls_jget(&r, "records"), recs, 0, n, -1), 0);
        ls_resp_free(&r);
        free(bytes);
        done++;
    }
    assert_true(done >= 8);
}

/* ---- LogAppendTime ------------------------------------------------------------------- */

static void test_log_append_time(void **state)
{
    (void)state;
    static const char *const files[] = {"logappend.bin", "zstd.bin", "multi.bin"};
    for (size_t k = 0; k < 3; k++) {
        char topic[64];
        snprintf(topic, sizeof topic, "lat-%zu", k);
        assert_int_equal(ls_create_topic(S, topic, 1, "{\"message.timestamp.type\":\"LogAppendTime\"}"), 201);
        json_t *f = ru_manifest_file(M, files[k]);
        if (!f)
            continue; /* a codec gen.js could not build */
        size_t len;
        uint8_t *sent = ru_kjs_file(files[k], &len);
        assert_non_null(sent);
        long long before = ru_now_ms();
        ls_resp r;
        post_bin(topic, sent, len, &r);
        long long after = ru_now_ms();
        assert_int_equal(r.status, 200);
        assert_string_equal(ls_jstr(&r, "timestamp_type"), "LogAppendTime");
        long long lat = ls_jint(&r, "log_append_time");
        assert_true(lat >= before - 5 && lat <= after + 5);
        ls_resp_free(&r);

        read_raw(topic, 0, &r);
        assert_int_equal(r.len, len);
        uint8_t *got = (uint8_t *)r.body;
        for (size_t pos = 0; pos < len;) {
            size_t size = (size_t)ru_be32(sent + pos + 8) + 12;
            uint16_t attr_sent = (uint16_t)(sent[pos + 21] << 8 | sent[pos + 22]);
            uint16_t attr_got = (uint16_t)(got[pos + 21] << 8 | got[pos + 22]);
            assert_int_equal(attr_got, attr_sent | 0x08); /* bit 3, codec kept */
            assert_int_equal((long long)ru_be64(got + pos + 35), lat);
            assert_memory_equal(got + pos + 27, sent + pos + 27, 8);  /* baseTimestamp */
            assert_memory_equal(got + pos + 43, sent + pos + 43, size - 43); /* producer, records */
            uint32_t crc = ru_be32(got + pos + 17);
            assert_int_equal(crc, eng_batch_compute_crc(got + pos, size));
            assert_int_not_equal(crc, ru_be32(sent + pos + 17));
            pos += size;
        }
        ls_resp_free(&r);
        read_json(topic, 0, &r);
        assert_int_equal(ru_records_match(ls_jget(&r, "records"), json_object_get(f, "records"), 0, 0, lat), 0);
        ls_resp_free(&r);
        batches(topic, &r);
        for (size_t b = 0; b < json_array_size(ls_jget(&r, "batches")); b++) {
            json_t *got_b = json_array_get(ls_jget(&r, "batches"), b);
            assert_string_equal(json_string_value(json_object_get(got_b, "timestamp_type")), "LogAppendTime");
            assert_true(json_is_true(json_object_get(got_b, "valid")));
        }
        ls_resp_free(&r);
        free(sent);
    }
}

/* ---- codecs ---------------------------------------------------------------------------- */

static const char *const topic_codecs[] = {"gzip", "snappy", "lz4", "zstd", "uncompressed"};

static const char *stored_name(const char *ctype)
{
    return strcmp(ctype, "uncompressed") ? ctype : "none";
}

/* What the records section of a stored batch must start with for codec. */
static void assert_framing(const uint8_t *b, const char *codec)
{
    static const uint8_t xerial[8] = {0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0};
    if (!strcmp(codec, "snappy")) {
        assert_memory_equal(b + 61, xerial, 8);
    } else if (!strcmp(codec, "lz4")) {
        static const uint8_t magic[4] = {0x04, 0x22, 0x4d, 0x18};
        assert_memory_equal(b + 61, magic, 4);
        assert_int_equal(b[65], 0x60); /* version 01, independent blocks, no checksums */
        assert_int_equal(b[66], 0x40); /* 64 KiB blocks */
    } else if (!strcmp(codec, "gzip")) {
        assert_int_equal(b[61], 0x1f);
        assert_int_equal(b[62], 0x8b);
    } else if (!strcmp(codec, "zstd")) {
        static const uint8_t magic[4] = {0x28, 0xb5, 0x2f, 0xfd};
        assert_memory_equal(b + 61, magic, 4);
    }
}

/* Every batch of the topic stored with codec, valid, producer fields as in
 * the manifest's batches (want), baseTimestamp = its first record's, and
 * recompressed ones framed as Kafka frames that codec. */
static void assert_stored_codec(const char *topic, const char *codec, json_t *want, json_t *recs)
{
    ls_resp r, raw;
    batches(topic, &r);
    read_raw(topic, 0, &raw);
    json_t *got = ls_jget(&r, "batches");
    assert_int_equal(json_array_size(got), json_array_size(want));
    size_t pos = 0, first = 0;
    for (size_t b = 0; b < json_array_size(got); b++) {
        json_t *g = json_array_get(got, b), *w = json_array_get(want, b);
        if (strcmp(json_string_value(json_object_get(g, "compression")), codec))
            fail_msg("%s batch %zu stored as %s, not %s", topic, b,
                     json_string_value(json_object_get(g, "compression")), codec);
        assert_true(json_is_true(json_object_get(g, "valid")));
        assert_int_equal(json_integer_value(json_object_get(g, "crc")),
                         json_integer_value(json_object_get(g, "computed_crc")));
        assert_int_equal(json_integer_value(json_object_get(g, "record_count")),
                         json_integer_value(json_object_get(w, "record_count")));
        assert_int_equal(json_integer_value(json_object_get(g, "producer_id")),
                         json_integer_value(json_object_get(w, "producer_id")));
        assert_int_equal(json_integer_value(json_object_get(g, "producer_epoch")),
                         json_integer_value(json_object_get(w, "producer_epoch")));
        assert_int_equal(json_integer_value(json_object_get(g, "max_timestamp")),
                         json_integer_value(json_object_get(w, "max_timestamp")));
        assert_int_equal(json_integer_value(json_object_get(g, "base_timestamp")),
                         json_integer_value(json_object_get(json_array_get(recs, first), "timestamp")));
        /* A batch already in the topic's codec is kept as the producer sent
         * it (kafkajs-snappy's raw block stays raw); others are rebuilt. */
        if (strcmp(json_string_value(json_object_get(w, "codec")), codec))
            assert_framing((const uint8_t *)raw.body + pos, codec);
        pos += (size_t)json_integer_value(json_object_get(g, "size_bytes"));
        first += (size_t)json_integer_value(json_object_get(w, "record_count"));
    }
    assert_int_equal(pos, raw.len);
    ls_resp_free(&r);
    ls_resp_free(&raw);
}

static void test_topic_codec_recompresses(void **state)
{
    (void)state;
    static const char *const files[] = {"multi.bin", "zstd.bin", "snappy.bin", "lz4.bin", "headers.bin"};
    for (size_t c = 0; c < 5; c++) {
        for (size_t k = 0; k < 5; k++) {
            json_t *f = ru_manifest_file(M, files[k]);
            if (!f)
                continue;
            char topic[64], cfg[128];
            snprintf(topic, sizeof topic, "ct-%s-%zu", topic_codecs[c], k);
            snprintf(cfg, sizeof cfg, "{\"compression.type\":\"%s\"}", topic_codecs[c]);
            assert_int_equal(ls_create_topic(S, topic, 1, cfg), 201);
            size_t len;
            uint8_t *bytes = ru_kjs_file(files[k], &len);
            ls_resp r;
            post_bin(topic, bytes, len, &r);
            if (r.status != 200)
                fprintf(stderr, "# %s into %s: %s\n", files[k], topic, r.body);
            assert_int_equal(r.status, 200);
            assert_int_equal(ls_jint(&r, "record_count"), json_integer_value(json_object_get(f, "record_count")));
            ls_resp_free(&r);
            assert_stored_codec(topic, stored_name(topic_codecs[c]), json_object_get(f, "batches"),
                                json_object_get(f, "records"));
            read_json(topic, 0, &r);
            assert_int_equal(ru_records_match(ls_jget(&r, "records"), json_object_get(f, "records"), 0, 0, -1), 0);
            ls_resp_free(&r);
            free(bytes);
        }
    }
}

static void test_json_appends_use_topic_codec(void **state)
{
    (void)state;
    static const char *const ctypes[] = {"gzip", "snappy", "lz4", "zstd", "uncompressed", "producer"};
    char body[8192];
    size_t n = 0;
    n += (size_t)snprintf(body + n, sizeof body - n, "{\"records\":[");
    for (int i = 0; i < 20; i++)
        n += (size_t)snprintf(body + n, sizeof body - n,
                              "%s{\"key\":\"k%d\",\"value\":\"value %d value %d value %d\",\"timestamp\":%lld,"
                              "\"headers\":[{\"name\":\"h\",\"value\":\"%d\"}]}",
                              i ? "," : "", i, i, i, i, 1700000000000LL + i, i);
    snprintf(body + n, sizeof body - n, "]}");
    for (size_t c = 0; c < 6; c++) {
        char topic[64], cfg[128], path[128];
        snprintf(topic, sizeof topic, "js-%s", ctypes[c]);
        snprintf(cfg, sizeof cfg, "{\"compression.type\":\"%s\"}", ctypes[c]);
        assert_int_equal(ls_create_topic(S, topic, 1, cfg), 201);
        snprintf(path, sizeof path, "/v1/topics/%s/partitions/0/records", topic);
        ls_resp r;
        assert_int_equal(ls_post(S, path, body, &r), 0);
        assert_int_equal(r.status, 200);
        ls_resp_free(&r);
        const char *want = c >= 4 ? "none" : ctypes[c];
        batches(topic, &r);
        assert_int_equal(json_array_size(ls_jget(&r, "batches")), 1);
        assert_string_equal(ls_jstr(&r, "batches.0.compression"), want);
        assert_true(json_is_true(ls_jget(&r, "batches.0.valid")));
        ls_resp_free(&r);
        read_raw(topic, 0, &r);
        assert_framing((const uint8_t *)r.body, want);
        ls_resp_free(&r);
        read_json(topic, 0, &r);
        assert_int_equal(json_array_size(ls_jget(&r, "records")), 20);
        for (int i = 0; i < 20; i++) {
            char key[16], value[64], path2[64];
            snprintf(key, sizeof key, "k%d", i);
            snprintf(value, sizeof value, "value %d value %d value %d", i, i, i);
            snprintf(path2, sizeof path2, "records.%d.key", i);
            assert_string_equal(ls_jstr(&r, path2), key);
            snprintf(path2, sizeof path2, "records.%d.value", i);
            assert_string_equal(ls_jstr(&r, path2), value);
            snprintf(path2, sizeof path2, "records.%d.timestamp", i);
            assert_int_equal(ls_jint(&r, path2), 1700000000000LL + i);
            snprintf(path2, sizeof path2, "records.%d.headers.0.name", i);
            assert_string_equal(ls_jstr(&r, path2), "h");
        }
        ls_resp_free(&r);
    }
}

/* ---- bad batches ------------------------------------------------------------------------- */

/* Appends body to topic; it must fail with status/code, the message must
 * start with prefix (e.g. "batch 1: ") and contain `reason` when given, and
 * nothing may change. */
static void expect_refused(const char *topic, const uint8_t *body, size_t len, long status,
                           const char *code, const char *prefix, const char *reason)
{
    char *before = ls_dir_listing(S->dir);
    long long leo = ls_log_end_offset(S, topic, 0);
    ls_resp r;
    post_bin(topic, body, len, &r);
    assert_int_equal(ls_check_error(&r, status, code), 0);
    const char *msg = ls_jstr(&r, "message");
    if (strncmp(msg, prefix, strlen(prefix)) || (reason && !strcasestr(msg, reason)))
        fail_msg("message '%s' should start with '%s' and mention '%s'", msg, prefix,
                 reason ? reason : "");
    ls_resp_free(&r);
    char *after = ls_dir_listing(S->dir);
    assert_string_equal(before, after);
    assert_int_equal(ls_log_end_offset(S, topic, 0), leo);
    free(before);
    free(after);
}

/* A copy of a kafkajs file, to damage. */
static uint8_t *copy_of(const char *file, size_t *len)
{
    uint8_t *b = ru_kjs_file(file, len);
    assert_non_null(b);
    return b;
}

/* Offset of batch i in a body. */
static size_t batch_at(const uint8_t *b, size_t i)
{
    size_t pos = 0;
    while (i--)
        pos += (size_t)ru_be32(b + pos + 8) + 12;
    return pos;
}

static void recrc(uint8_t *b)
{
    size_t size = (size_t)ru_be32(b + 8) + 12;
    eng_batch_update_crc(b, size);
}

/* logstore_corrupt_record_errors_total from /metrics. */
static long long corrupt_record_errors(void)
{
    ls_resp r;
    assert_int_equal(ls_get(S, "/metrics", &r), 0);
    const char *at = strstr(r.body, "\nlogstore_corrupt_record_errors_total ");
    assert_non_null(at);
    long long n = strtoll(at + strlen("\nlogstore_corrupt_record_errors_total "), NULL, 10);
    ls_resp_free(&r);
    return n;
}

static void test_bad_batches_refused(void **state)
{
    (void)state;
    long long corrupt_before = corrupt_record_errors();
    assert_int_equal(ls_create_topic(S, "bad", 1, NULL), 201);
    size_t len, mlen;
    uint8_t *ok = copy_of("plain.bin", &len);
    ls_resp r;
    post_bin("bad", ok, len, &r);
    assert_int_equal(r.status, 200);
    ls_resp_free(&r);
    uint8_t *multi = copy_of("multi.bin", &mlen), *m = malloc(mlen + 64), *b = malloc(len + 256);
    size_t b1 = batch_at(multi, 1), b2 = batch_at(multi, 2);

    /* Bad CRC: one record byte of batch 1 changed, CRC as sent. */
    memcpy(m, multi, mlen);
    m[b1 + 70] ^= 0x01;
    expect_refused("bad", m, mlen, 422, "corrupt_record", "batch 1: ", "crc");
    /* Truncated body: cut inside batch 2, and inside the only batch. */
    expect_refused("bad", multi, mlen - 7, 422, "corrupt_record", "batch 2: ", NULL);
    expect_refused("bad", ok, len - 1, 422, "corrupt_record", "batch 0: ", NULL);
    expect_refused("bad", ok, 30, 422, "corrupt_record", "batch 0: ", NULL);
    /* A length field past the body (the body itself whole). */
    memcpy(b, ok, len);
    ru_put_be32(b + 8, ru_be32(b + 8) + 100);
    expect_refused("bad", b, len, 422, "corrupt_record", "batch 0: ", NULL);
    /* A length field short of the batch: its CRC no longer covers the records. */
    memcpy(b, ok, len);
    ru_put_be32(b + 8, ru_be32(b + 8) - 20);
    expect_refused("bad", b, len, 422, "corrupt_record", "batch 0: ", NULL);
    /* lastOffsetDelta + 1 != recordsCount, with a CRC that matches. */
    memcpy(b, ok, len);
    ru_put_be32(b + 23, 5); /* 5 records: 4 is right */
    recrc(b);
    expect_refused("bad", b, len, 422, "invalid_record", "batch 0: ", "lastOffsetDelta");
    /* recordsCount 6 and lastOffsetDelta 5 agree, but there are 5 records. */
    ru_put_be32(b + 57, 6);
    recrc(b);
    expect_refused("bad", b, len, 422, "invalid_record", "batch 0: ", "ends before");
    /* Record framing that lies: record 0's length varint says 2 bytes more. */
    memcpy(b, ok, len);
    b[61] = (uint8_t)(b[61] + 4); /* zigzag: +2 */
    recrc(b);
    expect_refused("bad", b, len, 422, "invalid_record", "batch 0: record ", NULL);
    /* ... and a key length running past its record. */
    memcpy(b, ok, len);
    b[61 + 4] = 0x7e; /* keyLength 63 */
    recrc(b);
    expect_refused("bad", b, len, 422, "invalid_record", "batch 0: record 0: ", "key length");
    /* Wrong magic (v1 and v3), in batch 2. */
    for (int magic = 1; magic <= 3; magic += 2) {
        memcpy(m, multi, mlen);
        m[b2 + 16] = (uint8_t)magic;
        expect_refused("bad", m, mlen, 422, "corrupt_record", "batch 2: ", NULL);
    }
    /* A control batch (transaction marker bit), CRC matching. */
    memcpy(b, ok, len);
    b[22] |= 0x20;
    recrc(b);
    expect_refused("bad", b, len, 422, "invalid_record", "batch 0: ", "control");
    /* A transactional data batch: with no transaction coordinator it would
     * stay an open transaction for ever (it was stored). */
    memcpy(b, ok, len);
    b[22] |= 0x10;
    recrc(b);
    expect_refused("bad", b, len, 422, "invalid_record", "batch 0: ", "transaction coordinator");
    /* Unknown codecs 5, 6 and 7. */
    for (int codec = 5; codec <= 7; codec++) {
        memcpy(b, ok, len);
        b[22] = (uint8_t)((b[22] & ~7) | codec);
        recrc(b);
        expect_refused("bad", b, len, 422, "corrupt_record", "batch 0: ", NULL);
    }
    /* A compressed stream that does not decompress (gzip batch 1 of multi). */
    memcpy(m, multi, mlen);
    memset(m + b1 + 61 + 12, 0xAA, 16);
    recrc(m + b1);
    expect_refused("bad", m, mlen, 422, "corrupt_record", "batch 1: ", "decompress");
    /* ... a zstd batch with bytes after its frame (Kafka's zstd reader
     * fails on them), CRC and length matching. */
    size_t zlen;
    uint8_t *z = ru_kjs_file("zstd.bin", &zlen);
    if (z) {
        uint8_t *zg = malloc(zlen + 16);
        memcpy(zg, z, zlen);
        memcpy(zg + zlen, "GARBAGE-AFTER-IT", 16);
        ru_put_be32(zg + 8, (uint32_t)(zlen + 16 - 12));
        recrc(zg);
        expect_refused("bad", zg, zlen + 16, 422, "corrupt_record", "batch 0: ", NULL);
        free(zg);
        free(z);
    }
    /* ... and a gzip batch claiming snappy. */
    memcpy(m, multi, mlen);
    m[b1 + 22] = (uint8_t)((m[b1 + 22] & ~7) | 2);
    recrc(m + b1);
    expect_refused("bad", m, mlen, 422, "corrupt_record", "batch 1: ", NULL);
    /* An idempotent batch without a base sequence. */
    size_t ilen;
    uint8_t *idem = copy_of("idempotent.bin", &ilen);
    ru_put_be32(idem + 53, 0xffffffffu);
    recrc(idem);
    expect_refused("bad", idem, ilen, 422, "invalid_record", "batch 0: ", "base sequence");
    free(idem);
    /* A valid batch followed by bytes that are no batch. */
    memcpy(b, ok, len);
    memset(b + len, 0, 20);
    expect_refused("bad", b, len + 20, 422, "corrupt_record", "batch 1: ", NULL);
    /* An empty body. */
    expect_refused("bad", ok, 0, 422, "corrupt_record", "", NULL);
    /* After all that, a good append still lands right after the first one. */
    post_bin("bad", ok, len, &r);
    assert_int_equal(r.status, 200);
    assert_int_equal(ls_jint(&r, "base_offset"), 5);
    ls_resp_free(&r);
    /* Those corrupt_record answers judged the request's bytes: the metric
     * that alerts on data damaged on disk must not count them. */
    assert_int_equal(corrupt_record_errors(), corrupt_before);
    free(ok);
    free(multi);
    free(m);
    free(b);
}

static void test_topic_rules_refuse_batches(void **state)
{
    (void)state;
    /* Null keys on a compacted topic, also inside a compressed batch. */
    assert_int_equal(ls_create_topic(S, "bad-compact", 1, "{\"cleanup.policy\":\"compact\"}"), 201);
    size_t len;
    uint8_t *plain = copy_of("plain.bin", &len);
    ls_resp r;
    post_bin("bad-compact", plain, len, &r);
    assert_int_equal(r.status, 200);
    ls_resp_free(&r);
    uint8_t *nk = copy_of("nullkeys.bin", &len);
    expect_refused("bad-compact", nk, len, 422, "invalid_record", "batch 0: ", "null key");
    free(nk);
    static const char *const compressed[] = {"gzip.bin", "snappy.bin", "lz4.bin", "zstd.bin"};
    for (size_t i = 0; i < 4; i++) {
        uint8_t *c = ru_kjs_file(compressed[i], &len);
        if (!c)
            continue;
        expect_refused("bad-compact", c, len, 422, "invalid_record", "batch 0: ", "offset delta 3");
        free(c);
    }
    /* Batch 1 bad, batch 0 fine: nothing of either is written. */
    size_t plen;
    uint8_t *p2 = copy_of("plain.bin", &plen);
    nk = copy_of("nullkeys.bin", &len);
    uint8_t *both = malloc(plen + len);
    memcpy(both, p2, plen);
    memcpy(both + plen, nk, len);
    expect_refused("bad-compact", both, plen + len, 422, "invalid_record", "batch 1: ", NULL);
    free(both);
    free(nk);
    free(p2);

    /* A timestamp past message.timestamp.after.max.ms (and before.max.ms). */
    assert_int_equal(ls_create_topic(S, "bad-time", 1,
                                     "{\"message.timestamp.after.max.ms\":\"3600000\","
                                     "\"message.timestamp.before.max.ms\":\"315360000000\"}"),
                     201);
    uint8_t *fut = copy_of("future.bin", &len);
    post_bin("bad-time", plain, plen, &r); /* 2023: inside the ten-year window */
    assert_int_equal(r.status, 200);
    ls_resp_free(&r);
    expect_refused("bad-time", fut, len, 422, "invalid_timestamp", "batch 0: ", "timestamp");
    both = malloc(plen + len);
    memcpy(both, plain, plen);
    memcpy(both + plen, fut, len);
    expect_refused("bad-time", both, plen + len, 422, "invalid_timestamp", "batch 1: ", NULL);
    /* and names where, as a null key's refusal does */
    post_bin("bad-time", both, plen + len, &r);
    assert_int_equal(ls_jint(&r, "details.batch"), 1);
    assert_int_equal(ls_jint(&r, "details.offset_delta"), 0);
    ls_resp_free(&r);
    free(both);
    /* The same file on a topic with the default window is fine. */
    assert_int_equal(ls_create_topic(S, "ok-time", 1, NULL), 201);
    post_bin("ok-time", fut, len, &r);
    assert_int_equal(r.status, 200);
    ls_resp_free(&r);
    free(fut);

    /* expected_offset applies to binary appends too. */
    char *before = ls_dir_listing(S->dir);
    assert_int_equal(ls_http(S, "POST", "/v1/topics/ok-time/partitions/0/records?expected_offset=7",
                             "application/octet-stream", plain, plen, NULL, &r),
                     0);
    assert_int_equal(ls_check_error(&r, 412, "expected_offset_mismatch"), 0);
    ls_resp_free(&r);
    char *after = ls_dir_listing(S->dir);
    assert_string_equal(before, after);
    free(before);
    free(after);
    assert_int_equal(ls_http(S, "POST", "/v1/topics/ok-time/partitions/0/records?expected_offset=1",
                             "application/octet-stream", plain, plen, NULL, &r),
                     0);
    assert_int_equal(r.status, 200);
    assert_int_equal(ls_jint(&r, "base_offset"), 1);
    ls_resp_free(&r);
    free(plain);
}

/* An LZ4 batch whose frame links its blocks (each may refer to the one
 * before) is refused: liblz4 reads it, but Kafka's clients do not, so a
 * broker never stores one.  It used to be stored. */
static void test_lz4_dependent_blocks_refused(void **state)
{
    (void)state;
    assert_int_equal(ls_create_topic(S, "lz4dep", 1, NULL), 201);
    enum { N = 4000 };
    static eng_record_spec recs[N];
    static char vals[N][100];
    for (int i = 0; i < N; i++) {
        snprintf(vals[i], sizeof vals[i], "value %d of a batch whose frame links its blocks %d", i,
                 i * 7919 % 1000);
        recs[i] = (eng_record_spec){.timestamp = 1700000000000LL, .value = (const uint8_t *)vals[i],
                                    .value_len = (int32_t)strlen(vals[i])};
    }
    eng_batch_params bp;
    eng_batch_params_init(&bp);
    size_t cap = eng_batch_encoded_size(recs, N);
    uint8_t *plain = malloc(cap);
    assert_non_null(plain);
    size_t plen = eng_batch_encode(plain, cap, &bp, recs, N);
    assert_true(plen > ENG_BATCH_OVERHEAD + (128 << 10)); /* several 64 KiB blocks */
    LZ4F_preferences_t prefs;
    memset(&prefs, 0, sizeof prefs);
    prefs.frameInfo.blockSizeID = LZ4F_max64KB;
    prefs.frameInfo.blockMode = LZ4F_blockLinked;
    size_t zcap = ENG_BATCH_OVERHEAD + LZ4F_compressFrameBound(plen, &prefs);
    uint8_t *b = malloc(zcap);
    assert_non_null(b);
    memcpy(b, plain, ENG_BATCH_OVERHEAD);
    size_t zlen = LZ4F_compressFrame(b + ENG_BATCH_OVERHEAD, zcap - ENG_BATCH_OVERHEAD,
                                     plain + ENG_BATCH_OVERHEAD, plen - ENG_BATCH_OVERHEAD, &prefs);
    assert_false(LZ4F_isError(zlen));
    size_t size = ENG_BATCH_OVERHEAD + zlen;
    eng_put_be32(b + 8, (uint32_t)(size - 12)); /* batchLength */
    b[22] = (uint8_t)(b[22] | 3);              /* attributes: lz4 */
    eng_put_be32(b + 17, eng_batch_compute_crc(b, size));
    expect_refused("lz4dep", b, size, 422, "corrupt_record", "batch 0: ", "dependent blocks");
    free(b);
    free(plain);
}

/* A header key that is not UTF-8 (a producer's bytes are stored as sent)
 * reads with U+FFFD in place of the bad bytes, as Kafka's Java client
 * decodes it; it made every page and stream covering the record answer
 * invalid_utf8, encoding=base64 too. */
static void test_header_key_not_utf8(void **state)
{
    (void)state;
    assert_int_equal(ls_create_topic(S, "hk", 1, NULL), 201);
    static const uint8_t bad_key[] = {'h', 0xFF, 0xFE, '!'};
    eng_record_header h = {.key = bad_key, .key_len = 4, .value = (const uint8_t *)"v",
                           .value_len = 1};
    eng_record_spec rec = {.timestamp = 1700000000000LL, .value = (const uint8_t *)"x",
                           .value_len = 1, .headers = &h, .header_count = 1};
    eng_batch_params bp;
    eng_batch_params_init(&bp);
    uint8_t buf[256];
    size_t n = eng_batch_encode(buf, sizeof buf, &bp, &rec, 1);
    assert_true(n > 0);
    ls_resp r;
    post_bin("hk", buf, n, &r);
    assert_int_equal(r.status, 200);
    ls_resp_free(&r);
    read_json("hk", 0, &r);
    assert_string_equal(ls_jstr(&r, "records.0.headers.0.name"), "h\xEF\xBF\xBD\xEF\xBF\xBD!");
    assert_string_equal(ls_jstr(&r, "records.0.headers.0.value"), "v");
    ls_resp_free(&r);
    assert_int_equal(ls_get(S, "/v1/topics/hk/partitions/0/records?offset=0&encoding=base64", &r),
                     0);
    assert_int_equal(r.status, 200);
    assert_string_equal(ls_jstr(&r, "records.0.headers.0.value"), "dg==");
    ls_resp_free(&r);
}

static void test_clean_stop(void **state)
{
    (void)state;
    assert_int_equal(ls_stop(S), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_kafkajs_files_append_and_read_back),
        cmocka_unit_test(test_log_append_time),
        cmocka_unit_test(test_topic_codec_recompresses),
        cmocka_unit_test(test_json_appends_use_topic_codec),
        cmocka_unit_test(test_bad_batches_refused),
        cmocka_unit_test(test_topic_rules_refuse_batches),
        cmocka_unit_test(test_lz4_dependent_blocks_refused),
        cmocka_unit_test(test_header_key_not_utf8),
        cmocka_unit_test(test_clean_stop),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
