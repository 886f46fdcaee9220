/*
 * test_idempotent.c - idempotent producers over HTTP (Kafka's
 * ProducerStateManager), against the real server binary.
 *
 * Batches are RecordBatch v2 bytes from the engine's encoder with a
 * producerId, POSTed as application/octet-stream.  Covers: a retry of any of
 * a producer's last five batches answered 200 "duplicate": true with its
 * first offsets and nothing written, an older one refused; producers
 * interleaved, also within one request; out-of-order sequences (409
 * out_of_order_sequence, Kafka 45) and lower epochs (409
 * invalid_producer_epoch, 47) refused with nothing written; a new epoch
 * starting at 0; an unknown producer taking any sequence; a request mixing a
 * retry with new batches refused whole; JSON appends left out; GET
 * .../producers, paged by producer id; the state across a clean restart (snapshot at the log end)
 * and a SIGKILL (snapshot at the roll plus a scan of what came after);
 * retention taking the snapshot named by a segment it deletes;
 * flush.messages=1.
 *
 * Record r of a batch at sequence s has timestamp T + s + r, so a batch's
 * maxTimestamp is T + its last sequence: the producer listing can be checked
 * exactly.  T is the clock at start, since snapshots drop producers whose
 * last timestamp is past producer.id.expiration.ms.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "harness.h"

#include "eng_batch.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static ls_server g_srv; /* shared by the tests that need no restart */
static ls_server g_own; /* one per restart test, so a failure leaves no state behind */
static long long T;

/* Background jobs held off: the data dir changes only when a test acts. */
static const char *const settings[] = {"log.initial.task.delay.ms=3600000", NULL};

/* ---- batches ------------------------------------------------------------------- */

typedef struct req {
    uint8_t b[8192];
    size_t len;
} req;

/* Appends to q a batch of n records for producer pid at epoch, sequences
 * seq..seq+n-1. */
static void add(req *q, long long pid, int epoch, int seq, int n)
{
    eng_record_spec recs[16];
    char vals[16][32];
    assert_true(n >= 1 && n <= 16);
    for (int i = 0; i < n; i++) {
        int vl = snprintf(vals[i], sizeof vals[i], "p%lld-e%d-s%d", pid, epoch, seq + i);
        recs[i] = (eng_record_spec){.timestamp = T + seq + i, .key = NULL, .key_len = -1,
                                    .value = (const uint8_t *)vals[i], .value_len = vl};
    }
    eng_batch_params bp;
    eng_batch_params_init(&bp);
    bp.producer_id = pid;
    bp.producer_epoch = (int16_t)epoch;
    bp.base_sequence = seq;
    assert_true(eng_batch_encoded_size(recs, (size_t)n) <= sizeof q->b - q->len);
    size_t got = eng_batch_encode(q->b + q->len, sizeof q->b - q->len, &bp, recs, (size_t)n);
    assert_true(got > 0);
    q->len += got;
}

static void post(ls_server *s, const char *topic, const req *q, ls_resp *r)
{
    char path[256];
    snprintf(path, sizeof path, "/v1/topics/%s/partitions/0/records", topic);
    assert_int_equal(
        ls_http(s, "POST", path, "application/octet-stream", q->b, q->len, NULL, r), 0);
}

/* Sends q and expects it appended at base, with no "duplicate" key. */
static void expect_appended(ls_server *s, const char *topic, const req *q, long long base,
                            long long last)
{
    ls_resp r;
    post(s, topic, q, &r);
    if (r.status != 200)
        fail_msg("append to %s: %ld %s (expected base %lld)", topic, r.status, r.body, base);
    assert_int_equal(ls_jint(&r, "base_offset"), base);
    assert_int_equal(ls_jint(&r, "last_offset"), last);
    assert_int_equal(ls_jint(&r, "high_watermark"), last + 1);
    assert_null(ls_jget(&r, "duplicate"));
    ls_resp_free(&r);
}

static void append1(ls_server *s, const char *topic, long long pid, int epoch, int seq, int n,
                    long long base)
{
    req q = {.len = 0};
    add(&q, pid, epoch, seq, n);
    expect_appended(s, topic, &q, base, base + n - 1);
}

/* Sends q and expects it answered as a retry of [base, last]: the log end
 * and high watermark stay where they were. */
static void expect_dup(ls_server *s, const char *topic, const req *q, long long base,
                       long long last)
{
    long long leo = ls_log_end_offset(s, topic, 0);
    long long hw0 = ls_partition_field(s, topic, 0, "high_watermark");
    ls_resp r;
    post(s, topic, q, &r);
    if (r.status != 200)
        fail_msg("retry to %s: %ld %s (expected duplicate of %lld)", topic, r.status, r.body, base);
    assert_true(json_is_true(ls_jget(&r, "duplicate")));
    assert_int_equal(ls_jint(&r, "base_offset"), base);
    assert_int_equal(ls_jint(&r, "last_offset"), last);
    assert_int_equal(ls_jint(&r, "high_watermark"), hw0);
    assert_int_equal(ls_jint(&r, "batch_bytes"), 0);
    ls_resp_free(&r);
    assert_int_equal(ls_log_end_offset(s, topic, 0), leo);
    assert_int_equal(ls_partition_field(s, topic, 0, "high_watermark"), hw0);
}

static void dup1(ls_server *s, const char *topic, long long pid, int epoch, int seq, int n,
                 long long base)
{
    req q = {.len = 0};
    add(&q, pid, epoch, seq, n);
    expect_dup(s, topic, &q, base, base + n - 1);
}

/* Sends q and expects a 409 with code and Kafka's error, nothing written. */
static void expect_refused(ls_server *s, const char *topic, const req *q, const char *code)
{
    bool seq = !strcmp(code, "out_of_order_sequence");
    long long leo = ls_log_end_offset(s, topic, 0);
    ls_resp r;
    post(s, topic, q, &r);
    assert_int_equal(ls_check_error(&r, 409, code), 0);
    assert_int_equal(ls_jint(&r, "kafka_error_code"), seq ? 45 : 47);
    assert_string_equal(ls_jstr(&r, "kafka_error"),
                        seq ? "OUT_OF_ORDER_SEQUENCE_NUMBER" : "INVALID_PRODUCER_EPOCH");
    assert_false(json_is_true(ls_jget(&r, "retriable")));
    ls_resp_free(&r);
    assert_int_equal(ls_log_end_offset(s, topic, 0), leo);
}

static void refuse1(ls_server *s, const char *topic, long long pid, int epoch, int seq, int n,
                    const char *code)
{
    req q = {.len = 0};
    add(&q, pid, epoch, seq, n);
    expect_refused(s, topic, &q, code);
}

static void get_producers(ls_server *s, const char *topic, ls_resp *r)
{
    char path[256];
    snprintf(path, sizeof path, "/v1/topics/%s/partitions/0/producers", topic);
    assert_int_equal(ls_get(s, path, r), 0);
    assert_int_equal(r->status, 200);
}

static void snapshot_path(char *out, size_t len, const ls_server *s, const char *topic,
                          long long offset)
{
    snprintf(out, len, "%.255s/%s-0/%020lld.snapshot", s->dir, topic, offset);
}

static void create(ls_server *s, const char *topic, const char *configs)
{
    assert_int_equal(ls_create_topic(s, topic, 1, configs), 201);
}

static void roll(ls_server *s, const char *topic, long long new_base)
{
    char path[256];
    snprintf(path, sizeof path, "/v1/topics/%s/partitions/0/segments:roll", topic);
    ls_resp r;
    assert_int_equal(ls_post(s, path, "", &r), 0);
    assert_int_equal(r.status, 200);
    assert_true(json_is_true(ls_jget(&r, "rolled")));
    assert_int_equal(ls_jint(&r, "active_segment_base_offset"), new_base);
    ls_resp_free(&r);
}

/* ---- retries ------------------------------------------------------------------- */

static void test_retry_answers_original_offsets(void **state)
{
    (void)state;
    ls_server *s = &g_srv;
    create(s, "dup", NULL);
    append1(s, "dup", 1000, 0, 0, 3, 0);
    append1(s, "dup", 1000, 0, 3, 2, 3);
    dup1(s, "dup", 1000, 0, 0, 3, 0);
    dup1(s, "dup", 1000, 0, 3, 2, 3);
    dup1(s, "dup", 1000, 0, 3, 2, 3); /* a retry of a retry too */

    /* The log holds each record once. */
    ls_resp r;
    assert_int_equal(
        ls_get(s, "/v1/topics/dup/partitions/0/records?offset=0&max_records=100", &r), 0);
    assert_int_equal(r.status, 200);
    assert_int_equal(json_array_size(ls_jget(&r, "records")), 5);
    assert_string_equal(ls_jstr(&r, "records.4.value"), "p1000-e0-s4");
    ls_resp_free(&r);
    append1(s, "dup", 1000, 0, 5, 1, 5);

    /* The partition's description counts the three retries and the one
     * producer, and so does monitoring. */
    assert_int_equal(ls_get(s, "/v1/topics/dup/partitions/0", &r), 0);
    assert_int_equal(r.status, 200);
    assert_int_equal(ls_jint(&r, "idempotent_producers"), 1);
    assert_int_equal(ls_jint(&r, "duplicate_batches"), 3);
    ls_resp_free(&r);

    assert_int_equal(ls_metric(s, "logstore_duplicate_batches_total{topic=\"dup\"}", -1), 3);
    assert_int_equal(ls_metric(s, "logstore_partition_producers{topic=\"dup\",partition=\"0\"}", -1), 1);
    assert_int_equal(ls_metric(s, "logstore_records_appended_total{topic=\"dup\"}", -1), 6);
}

/* Five batches are kept per producer (Kafka's NUM_BATCHES_TO_RETAIN): the
 * sixth-last is neither a retry nor in sequence. */
static void test_last_five_batches_are_retries(void **state)
{
    (void)state;
    ls_server *s = &g_srv;
    create(s, "five", NULL);
    for (int i = 0; i < 6; i++)
        append1(s, "five", 5, 0, 2 * i, 2, 2 * i);
    for (int i = 1; i < 6; i++)
        dup1(s, "five", 5, 0, 2 * i, 2, 2 * i);
    refuse1(s, "five", 5, 0, 0, 2, "out_of_order_sequence");
}

static void test_interleaved_producers(void **state)
{
    (void)state;
    ls_server *s = &g_srv;
    create(s, "mix", NULL);
    append1(s, "mix", 7, 0, 0, 1, 0);
    append1(s, "mix", 8, 2, 0, 2, 1);
    append1(s, "mix", 7, 0, 1, 1, 3);
    append1(s, "mix", 9, 0, 0, 3, 4);
    append1(s, "mix", 8, 2, 2, 1, 7);

    /* Two producers in one request, both moved on by it. */
    req both = {.len = 0};
    add(&both, 7, 0, 2, 2);
    add(&both, 9, 0, 3, 1);
    expect_appended(s, "mix", &both, 8, 10);

    /* Retries in any order find their own producer's batches. */
    dup1(s, "mix", 9, 0, 0, 3, 4);
    dup1(s, "mix", 7, 0, 0, 1, 0);
    dup1(s, "mix", 8, 2, 2, 1, 7);
    dup1(s, "mix", 7, 0, 1, 1, 3);
    dup1(s, "mix", 8, 2, 0, 2, 1);
    expect_dup(s, "mix", &both, 8, 10);

    /* Another producer's sequence does not count: 8 is at 2, not 4. */
    refuse1(s, "mix", 8, 2, 4, 1, "out_of_order_sequence");
    append1(s, "mix", 8, 2, 3, 1, 11);
    append1(s, "mix", 9, 0, 4, 1, 12);
}

/* ---- refusals ------------------------------------------------------------------- */

/* The producer listing pages by producer id, as every listing that grows
 * does: ids are the clients' to choose, a day's worth may be many. */
static void test_producer_listing_pages(void **state)
{
    (void)state;
    ls_server *s = &g_srv;
    create(s, "many", NULL);
    static const long long pids[] = {50, 10, 40, 20, 30};
    for (int i = 0; i < 5; i++)
        append1(s, "many", pids[i], 0, 0, 1, i);
    static const struct {
        const char *query;
        long long first, next; /* -1: none (next_after is null on the last page) */
        int n;
        bool more;
    } pages[] = {
        {"?limit=2", 10, 20, 2, true},
        {"?limit=2&after=20", 30, 40, 2, true},
        {"?after=45", 50, -1, 1, false},
        {"?after=50", -1, -1, 0, false},
        {"", 10, -1, 5, false},
    };
    for (size_t i = 0; i < sizeof pages / sizeof pages[0]; i++) {
        char path[128];
        snprintf(path, sizeof path, "/v1/topics/many/partitions/0/producers%s", pages[i].query);
        ls_resp r;
        assert_int_equal(ls_get(s, path, &r), 0);
        assert_int_equal(r.status, 200);
        assert_int_equal(ls_jint(&r, "producer_count"), 5);
        assert_int_equal(json_array_size(ls_jget(&r, "producers")), pages[i].n);
        if (pages[i].first >= 0)
            assert_int_equal(ls_jint(&r, "producers.0.producer_id"), pages[i].first);
        assert_true(json_is_boolean(ls_jget(&r, "has_more")));
        assert_int_equal(json_is_true(ls_jget(&r, "has_more")), pages[i].more);
        if (pages[i].next >= 0)
            assert_int_equal(ls_jint(&r, "next_after"), pages[i].next);
        else
            assert_true(json_is_null(ls_jget(&r, "next_after")));
        ls_resp_free(&r);
    }
    static const char *const bad[] = {"?after=-1", "?after=x", "?after=", "?limit=0",
                                      "?limit=100001"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char path[128];
        snprintf(path, sizeof path, "/v1/topics/many/partitions/0/producers%s", bad[i]);
        assert_int_equal(ls_expect_error(s, "GET", path, NULL, 400, "invalid_request"), 0);
    }
}

static void test_out_of_order_sequence(void **state)
{
    (void)state;
    ls_server *s = &g_srv;
    create(s, "ooo", NULL);
    append1(s, "ooo", 20, 0, 0, 1, 0);
    append1(s, "ooo", 20, 0, 1, 2, 1);
    refuse1(s, "ooo", 20, 0, 4, 1, "out_of_order_sequence"); /* a gap */
    refuse1(s, "ooo", 20, 0, 2, 1, "out_of_order_sequence"); /* inside the last batch */
    refuse1(s, "ooo", 20, 0, 1, 1, "out_of_order_sequence"); /* not the whole last batch */
    refuse1(s, "ooo", 20, 0, 0, 3, "out_of_order_sequence"); /* spans two batches */
    /* The refusals moved nothing: 3 is still next. */
    append1(s, "ooo", 20, 0, 3, 1, 3);
}

static void test_lower_epoch_fenced(void **state)
{
    (void)state;
    ls_server *s = &g_srv;
    create(s, "fence", NULL);
    append1(s, "fence", 30, 3, 0, 1, 0);
    refuse1(s, "fence", 30, 2, 1, 1, "invalid_producer_epoch");
    refuse1(s, "fence", 30, 2, 0, 1, "invalid_producer_epoch");
    refuse1(s, "fence", 30, 0, 0, 1, "invalid_producer_epoch");
    append1(s, "fence", 30, 3, 1, 1, 1);
}

static void test_new_epoch_starts_at_zero(void **state)
{
    (void)state;
    ls_server *s = &g_srv;
    create(s, "bump", NULL);
    append1(s, "bump", 40, 0, 0, 1, 0);
    append1(s, "bump", 40, 0, 1, 1, 1);
    refuse1(s, "bump", 40, 1, 2, 1, "out_of_order_sequence");
    refuse1(s, "bump", 40, 1, 5, 1, "out_of_order_sequence");
    append1(s, "bump", 40, 1, 0, 2, 2);
    /* The old epoch is fenced now, its retries included. */
    refuse1(s, "bump", 40, 0, 2, 1, "invalid_producer_epoch");
    refuse1(s, "bump", 40, 0, 1, 1, "invalid_producer_epoch");
    dup1(s, "bump", 40, 1, 0, 2, 2);
    append1(s, "bump", 40, 1, 2, 1, 4);

    /* The new epoch forgot the old one's batches. */
    ls_resp r;
    get_producers(s, "bump", &r);
    assert_int_equal(ls_jint(&r, "producers.0.producer_epoch"), 1);
    assert_int_equal(ls_jint(&r, "producers.0.last_sequence"), 2);
    assert_int_equal(json_array_size(ls_jget(&r, "producers.0.batches")), 2);
    assert_int_equal(ls_jint(&r, "producers.0.batches.0.first_offset"), 2);
    ls_resp_free(&r);
}

static void test_unknown_producer_takes_any_sequence(void **state)
{
    (void)state;
    ls_server *s = &g_srv;
    create(s, "anyseq", NULL);
    append1(s, "anyseq", 50, 4, 17, 2, 0);
    refuse1(s, "anyseq", 50, 4, 20, 1, "out_of_order_sequence");
    append1(s, "anyseq", 50, 4, 19, 1, 2);
}

/* A retry and a new batch together would answer one offset range for two
 * different fates; Kafka refuses them, and nothing of the new batch sticks. */
static void test_mixed_request_refused(void **state)
{
    (void)state;
    ls_server *s = &g_srv;
    create(s, "mixed", NULL);
    append1(s, "mixed", 60, 0, 0, 1, 0);
    append1(s, "mixed", 60, 0, 1, 1, 1);
    req q = {.len = 0};
    add(&q, 60, 0, 1, 1);
    add(&q, 60, 0, 2, 1);
    expect_refused(s, "mixed", &q, "out_of_order_sequence");
    q.len = 0;
    add(&q, 61, 0, 0, 1); /* another producer's new batch */
    add(&q, 60, 0, 0, 1);
    expect_refused(s, "mixed", &q, "out_of_order_sequence");
    q.len = 0;
    add(&q, 60, 0, 1, 1);
    add(&q, -1, -1, -1, 1); /* a plain batch is new too */
    expect_refused(s, "mixed", &q, "out_of_order_sequence");

    ls_resp r;
    get_producers(s, "mixed", &r);
    assert_int_equal(json_array_size(ls_jget(&r, "producers")), 1);
    assert_int_equal(ls_jint(&r, "producers.0.last_sequence"), 1);
    ls_resp_free(&r);
    append1(s, "mixed", 60, 0, 2, 1, 2);
}

/* No producer id: no state, no check, every copy appended. */
static void test_plain_appends_unaffected(void **state)
{
    (void)state;
    ls_server *s = &g_srv;
    create(s, "plain", NULL);
    const char *body = "{\"records\":[{\"value\":\"a\"},{\"value\":\"b\"}]}";
    ls_resp r;
    for (int i = 0; i < 2; i++) {
        assert_int_equal(ls_post(s, "/v1/topics/plain/partitions/0/records", body, &r), 0);
        assert_int_equal(r.status, 200);
        assert_int_equal(ls_jint(&r, "base_offset"), 2 * i);
        assert_null(ls_jget(&r, "duplicate"));
        ls_resp_free(&r);
    }
    append1(s, "plain", -1, -1, -1, 2, 4);
    append1(s, "plain", -1, -1, -1, 2, 6);
    get_producers(s, "plain", &r);
    assert_int_equal(json_array_size(ls_jget(&r, "producers")), 0);
    ls_resp_free(&r);
}

/* ---- the listing ------------------------------------------------------------------ */

/* One entry of a producer's batches, at the dotted path at. */
static void check_batch(const ls_resp *r, const char *at, long long fseq, long long lseq,
                        long long foff, long long loff)
{
    json_t *b = ls_jget(r, at);
    assert_int_equal(json_object_size(b), 5);
    assert_int_equal(json_integer_value(json_object_get(b, "first_sequence")), fseq);
    assert_int_equal(json_integer_value(json_object_get(b, "last_sequence")), lseq);
    assert_int_equal(json_integer_value(json_object_get(b, "first_offset")), foff);
    assert_int_equal(json_integer_value(json_object_get(b, "last_offset")), loff);
    assert_int_equal(json_integer_value(json_object_get(b, "timestamp")), T + lseq);
}

static void test_producers_listing(void **state)
{
    (void)state;
    ls_server *s = &g_srv;
    create(s, "desc", NULL);
    ls_resp r;
    get_producers(s, "desc", &r);
    assert_string_equal(ls_jstr(&r, "topic"), "desc");
    assert_int_equal(ls_jint(&r, "partition"), 0);
    assert_true(json_is_array(ls_jget(&r, "producers")));
    assert_int_equal(json_array_size(ls_jget(&r, "producers")), 0);
    ls_resp_free(&r);

    /* Sent out of id order: the listing sorts them. */
    append1(s, "desc", 300, 1, 0, 2, 0);
    append1(s, "desc", 100, 0, 10, 1, 2);
    append1(s, "desc", 300, 1, 2, 3, 3);
    append1(s, "desc", 200, 7, 0, 1, 6);

    get_producers(s, "desc", &r);
    json_t *ps = ls_jget(&r, "producers");
    assert_int_equal(json_array_size(ps), 3);
    assert_int_equal(ls_jint(&r, "producers.0.producer_id"), 100);
    assert_int_equal(ls_jint(&r, "producers.1.producer_id"), 200);
    assert_int_equal(ls_jint(&r, "producers.2.producer_id"), 300);
    for (size_t i = 0; i < 3; i++)
        assert_int_equal(json_object_size(json_array_get(ps, i)), 6);

    assert_int_equal(ls_jint(&r, "producers.0.producer_epoch"), 0);
    assert_int_equal(ls_jint(&r, "producers.0.last_sequence"), 10);
    assert_int_equal(ls_jint(&r, "producers.0.last_offset"), 2);
    assert_int_equal(ls_jint(&r, "producers.0.last_timestamp"), T + 10);
    assert_int_equal(json_array_size(ls_jget(&r, "producers.0.batches")), 1);
    check_batch(&r, "producers.0.batches.0", 10, 10, 2, 2);

    assert_int_equal(ls_jint(&r, "producers.1.producer_epoch"), 7);
    assert_int_equal(ls_jint(&r, "producers.1.last_offset"), 6);
    check_batch(&r, "producers.1.batches.0", 0, 0, 6, 6);

    assert_int_equal(ls_jint(&r, "producers.2.producer_epoch"), 1);
    assert_int_equal(ls_jint(&r, "producers.2.last_sequence"), 4);
    assert_int_equal(ls_jint(&r, "producers.2.last_offset"), 5);
    assert_int_equal(ls_jint(&r, "producers.2.last_timestamp"), T + 4);
    assert_int_equal(json_array_size(ls_jget(&r, "producers.2.batches")), 2);
    check_batch(&r, "producers.2.batches.0", 0, 1, 0, 1);
    check_batch(&r, "producers.2.batches.1", 2, 4, 3, 5);
    ls_resp_free(&r);

    assert_int_equal(ls_expect_error(s, "GET", "/v1/topics/nope/partitions/0/producers", NULL, 404,
                                     "unknown_topic"),
                     0);
}

/* ---- flush.messages=1, retention ----------------------------------------------------- */

static void test_retry_with_flush_messages_1(void **state)
{
    (void)state;
    ls_server *s = &g_srv;
    create(s, "fsync", "{\"flush.messages\":1}");
    append1(s, "fsync", 95, 0, 0, 2, 0);
    append1(s, "fsync", 95, 0, 2, 1, 2);
    dup1(s, "fsync", 95, 0, 0, 2, 0);
    dup1(s, "fsync", 95, 0, 2, 1, 2);
    append1(s, "fsync", 95, 0, 3, 1, 3);
}

/* A snapshot named by a deleted segment's base goes with it; the one named
 * by the surviving active segment stays. */
static void test_retention_deletes_the_segments_snapshot(void **state)
{
    (void)state;
    ls_server *s = &g_srv;
    create(s, "ret", NULL);
    append1(s, "ret", 90, 0, 0, 1, 0);
    roll(s, "ret", 1);
    append1(s, "ret", 90, 0, 1, 1, 1);
    roll(s, "ret", 2);
    append1(s, "ret", 90, 0, 2, 1, 2);
    char snap1[512], snap2[512];
    snapshot_path(snap1, sizeof snap1, s, "ret", 1);
    snapshot_path(snap2, sizeof snap2, s, "ret", 2);
    assert_true(ls_file_size(snap1) > 0);
    assert_true(ls_file_size(snap2) > 0);

    ls_resp r;
    assert_int_equal(ls_post(s, "/v1/topics/ret/partitions/0/records:delete",
                             "{\"before_offset\":2}", &r), 0);
    assert_int_equal(r.status, 200);
    ls_resp_free(&r);
    assert_int_equal(ls_post(s, "/v1/topics/ret/retention:run", NULL, &r), 0);
    assert_int_equal(r.status, 200);
    assert_int_equal(ls_jint(&r, "segments_deleted"), 2);
    ls_resp_free(&r);
    assert_int_equal(ls_file_size(snap1), -1);
    assert_true(ls_file_size(snap2) > 0);
    /* The state in memory is untouched by it. */
    dup1(s, "ret", 90, 0, 2, 1, 2);
}

/* ---- restarts ------------------------------------------------------------------------ */

static int own_setup(void **state)
{
    (void)state;
    return ls_start(&g_own, settings);
}

static int own_teardown(void **state)
{
    (void)state;
    ls_stop(&g_own);
    ls_cleanup(&g_own);
    return 0;
}

/* A clean stop writes the snapshot at the log end; the next start reads it
 * instead of the log, and it keeps only each producer's last batch. */
static void test_retry_after_clean_restart(void **state)
{
    (void)state;
    ls_server *s = &g_own;
    create(s, "cr", NULL);
    append1(s, "cr", 70, 0, 0, 2, 0);
    append1(s, "cr", 70, 0, 2, 2, 2);
    append1(s, "cr", 70, 0, 4, 2, 4);
    append1(s, "cr", 71, 3, 0, 1, 6);
    char snap[512];
    snapshot_path(snap, sizeof snap, s, "cr", 7);
    assert_int_equal(ls_file_size(snap), -1);
    assert_int_equal(ls_stop(s), 0);
    assert_true(ls_file_size(snap) > 0);
    assert_int_equal(ls_restart(s, settings), 0);

    dup1(s, "cr", 70, 0, 4, 2, 4);
    dup1(s, "cr", 71, 3, 0, 1, 6);
    refuse1(s, "cr", 70, 0, 2, 2, "out_of_order_sequence");
    refuse1(s, "cr", 71, 2, 1, 1, "invalid_producer_epoch");
    ls_resp r;
    get_producers(s, "cr", &r);
    assert_int_equal(json_array_size(ls_jget(&r, "producers")), 2);
    assert_int_equal(json_array_size(ls_jget(&r, "producers.0.batches")), 1);
    check_batch(&r, "producers.0.batches.0", 4, 5, 4, 5);
    assert_int_equal(ls_jint(&r, "producers.1.producer_epoch"), 3);
    ls_resp_free(&r);
    append1(s, "cr", 70, 0, 6, 1, 7);
    append1(s, "cr", 71, 3, 1, 1, 8);
}

/* After SIGKILL no snapshot at the log end exists: the state comes from the
 * roll's snapshot (producer 80, only last batches) plus a scan of the batches
 * after the roll (producers 81 and 82, every batch kept). */
static void test_retry_after_kill_restart(void **state)
{
    (void)state;
    ls_server *s = &g_own;
    create(s, "kr", NULL);
    append1(s, "kr", 80, 0, 0, 1, 0);
    append1(s, "kr", 80, 0, 1, 1, 1);
    append1(s, "kr", 80, 0, 2, 1, 2);
    append1(s, "kr", 81, 0, 0, 1, 3);
    roll(s, "kr", 4);
    char snap4[512], snap7[512];
    snapshot_path(snap4, sizeof snap4, s, "kr", 4);
    snapshot_path(snap7, sizeof snap7, s, "kr", 7);
    assert_true(ls_file_size(snap4) > 0);
    append1(s, "kr", 81, 0, 1, 1, 4);
    append1(s, "kr", 81, 0, 2, 1, 5);
    append1(s, "kr", 82, 1, 0, 2, 6);
    ls_kill9(s);
    assert_int_equal(ls_file_size(snap7), -1);
    assert_int_equal(ls_restart(s, settings), 0);
    assert_int_equal(ls_log_end_offset(s, "kr", 0), 8);

    dup1(s, "kr", 80, 0, 2, 1, 2);
    refuse1(s, "kr", 80, 0, 1, 1, "out_of_order_sequence");
    dup1(s, "kr", 81, 0, 2, 1, 5);
    dup1(s, "kr", 81, 0, 1, 1, 4);
    dup1(s, "kr", 81, 0, 0, 1, 3);
    dup1(s, "kr", 82, 1, 0, 2, 6);
    refuse1(s, "kr", 82, 0, 2, 1, "invalid_producer_epoch");
    refuse1(s, "kr", 82, 1, 3, 1, "out_of_order_sequence");
    append1(s, "kr", 82, 1, 2, 1, 8);
    append1(s, "kr", 80, 0, 3, 1, 9);
    append1(s, "kr", 81, 0, 3, 1, 10);

    ls_resp r;
    get_producers(s, "kr", &r);
    assert_int_equal(json_array_size(ls_jget(&r, "producers")), 3);
    assert_int_equal(json_array_size(ls_jget(&r, "producers.0.batches")), 2);
    check_batch(&r, "producers.0.batches.0", 2, 2, 2, 2);
    assert_int_equal(json_array_size(ls_jget(&r, "producers.1.batches")), 4);
    check_batch(&r, "producers.1.batches.0", 0, 0, 3, 3);
    ls_resp_free(&r);
}

static int group_setup(void **state)
{
    (void)state;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    T = (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
    return ls_start(&g_srv, settings);
}

static int group_teardown(void **state)
{
    (void)state;
    ls_stop(&g_srv);
    ls_cleanup(&g_srv);
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_retry_answers_original_offsets),
        cmocka_unit_test(test_last_five_batches_are_retries),
        cmocka_unit_test(test_interleaved_producers),
        cmocka_unit_test(test_out_of_order_sequence),
        cmocka_unit_test(test_lower_epoch_fenced),
        cmocka_unit_test(test_new_epoch_starts_at_zero),
        cmocka_unit_test(test_unknown_producer_takes_any_sequence),
        cmocka_unit_test(test_mixed_request_refused),
        cmocka_unit_test(test_plain_appends_unaffected),
        cmocka_unit_test(test_producers_listing),
        cmocka_unit_test(test_retry_with_flush_messages_1),
        cmocka_unit_test(test_retention_deletes_the_segments_snapshot),
        cmocka_unit_test(test_producer_listing_pages),
        cmocka_unit_test_setup_teardown(test_retry_after_clean_restart, own_setup, own_teardown),
        cmocka_unit_test_setup_teardown(test_retry_after_kill_restart, own_setup, own_teardown),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
