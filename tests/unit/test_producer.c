/*
 * test_producer.c - idempotent producers' state (eng_producer.h) against
 * Kafka's ProducerAppendInfo / ProducerStateEntry rules: sequences and
 * epochs per producer id, retries of the last five batches answered with
 * their first offsets, expiry, replay from the log, and the ProducerSnapshot
 * v1 files (kafka-format.md §12) byte for byte against Kafka's own output.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "eng_batch.h"
#include "eng_crc32c.h"
#include "eng_endian.h"
#include "eng_error.h"
#include "eng_fs.h"
#include "eng_producer.h"
#include "support.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

/* kafka-vectors.txt snapshot_empty and snapshot_one_producer (pid 4242, epoch
 * 1, lastSequence 18, lastOffset 101, offsetDelta 1, timestamp 5000, no
 * coordinator, no transaction), written by Kafka's
 * ProducerStateManager.writeSnapshot.  The sample files
 * 00000000000000000000.snapshot and 00000000000000000102.snapshot hold exactly
 * these bytes.  Copied here because CI has only the repository. */
static const char SNAP_EMPTY[] = "000148674bc700000000";
static const char SNAP_ONE[] = "000169cfb51f000000010000000000001092000100000012"
                               "0000000000000065000000010000000000001388"
                               "ffffffffffffffffffffffff";

static size_t unhex(const char *hex, uint8_t *out, size_t cap)
{
    size_t n = strlen(hex) / 2;
    assert_true(n <= cap);
    for (size_t i = 0; i < n; i++) {
        unsigned v;
        assert_int_equal(sscanf(hex + 2 * i, "%2x", &v), 1);
        out[i] = (uint8_t)v;
    }
    return n;
}

/* An append request: batches concatenated as a produce request carries
 * them, and what eng_producers_check said of it. */
typedef struct req {
    uint8_t buf[8192];
    size_t len;
    eng_producer_verdict v;
    eng_errdetail err;
} req;

/* Adds a batch of nrec records whose maxTimestamp is ts but whose first and
 * last records are older, so an entry's timestamp shows it took the maximum. */
static void add_batch(req *r, int64_t pid, int16_t epoch, int32_t seq, int nrec, int64_t ts,
                      int64_t base_offset)
{
    eng_record_spec recs[8];
    assert_true(nrec >= 1 && nrec <= 8);
    for (int i = 0; i < nrec; i++)
        recs[i] = (eng_record_spec){.timestamp = i == nrec / 2 ? ts : ts - 1 - i,
                                    .key = (const uint8_t *)"k", .key_len = 1,
                                    .value = (const uint8_t *)"v", .value_len = 1};
    eng_batch_params bp;
    eng_batch_params_init(&bp);
    bp.base_offset = base_offset;
    bp.producer_id = pid;
    bp.producer_epoch = epoch;
    bp.base_sequence = seq;
    size_t n = eng_batch_encode(r->buf + r->len, sizeof r->buf - r->len, &bp, recs, (size_t)nrec);
    assert_true(n > 0);
    r->len += n;
}

static int check(eng_producers *st, req *r)
{
    memset(&r->err, 0, sizeof r->err);
    return eng_producers_check(st, r->buf, r->len, &r->v, &r->err);
}

/* One batch checked as new and applied at base_offset, as the partition does. */
static void append1(eng_producers *st, int64_t pid, int16_t epoch, int32_t seq, int nrec,
                    int64_t ts, int64_t base_offset)
{
    req r = {.len = 0};
    add_batch(&r, pid, epoch, seq, nrec, ts, 0);
    int rc = check(st, &r);
    if (rc)
        fail_msg("append of pid %lld epoch %d seq %d refused: %d %s", (long long)pid, epoch, seq,
                 rc, r.err.message);
    assert_false(r.v.duplicate);
    eng_producers_apply(st, r.buf, r.len, base_offset);
}

/* Checks one batch that must be refused with want, leaving the state alone. */
static void refuse1(eng_producers *st, int64_t pid, int16_t epoch, int32_t seq, int nrec, int want)
{
    req r = {.len = 0};
    add_batch(&r, pid, epoch, seq, nrec, 1, 0);
    size_t n = st->n;
    int rc = check(st, &r);
    if (rc != want)
        fail_msg("pid %lld epoch %d seq %d: got %d (%s), want %d", (long long)pid, epoch, seq, rc,
                 r.err.message, want);
    assert_non_null(strstr(r.err.message, "batch 0: "));
    assert_int_equal(st->n, n);
}

static void expect_batch(const eng_producer_batch *b, int32_t last_seq, int64_t last_offset,
                         int32_t delta, int64_t ts)
{
    assert_int_equal(b->last_seq, last_seq);
    assert_int_equal(b->last_offset, last_offset);
    assert_int_equal(b->offset_delta, delta);
    assert_int_equal(b->timestamp, ts);
}

static const eng_producer_entry *must_find(const eng_producers *st, int64_t pid)
{
    const eng_producer_entry *e = eng_producers_find(st, pid);
    if (!e)
        fail_msg("producer %lld not in the state", (long long)pid);
    return e;
}

/* A retry must be answered with the offsets [first, last] the original got. */
static void expect_dup(eng_producers *st, req *r, int64_t first, int64_t last)
{
    int rc = check(st, r);
    if (rc)
        fail_msg("retry refused: %d %s", rc, r->err.message);
    assert_true(r->v.duplicate);
    assert_int_equal(r->v.dup_first_offset, first);
    assert_int_equal(r->v.dup_last_offset, last);
    assert_int_equal(r->v.new_producers, 0);
}

/* A test's state and directory, freed even when an assertion ends it early. */
typedef struct fixture {
    char *dir;
    eng_producers st;
} fixture;

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    if (!f || !(f->dir = ts_tmpdir())) {
        free(f);
        return -1;
    }
    eng_producers_init(&f->st);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    eng_producers_free(&f->st);
    ts_rmtree(f->dir);
    free(f->dir);
    free(f);
    return 0;
}

static void test_unknown_producer_takes_any_epoch_and_sequence(void **state)
{
    eng_producers *st = &((fixture *)*state)->st;
    req r = {.len = 0};
    add_batch(&r, 9, 3, 40, 4, 1000, 0);
    assert_int_equal(check(st, &r), 0);
    assert_int_equal(r.v.producer_batches, 1);
    assert_int_equal(r.v.new_producers, 1);
    assert_false(r.v.duplicate);
    eng_producers_apply(st, r.buf, r.len, 100);
    const eng_producer_entry *e = must_find(st, 9);
    assert_int_equal(e->epoch, 3);
    assert_int_equal(e->nbatches, 1);
    expect_batch(&e->batches[0], 43, 103, 3, 1000);
    assert_int_equal(e->last_timestamp, 1000);
    assert_int_equal(e->coordinator_epoch, -1);
    assert_int_equal(e->txn_first_offset, -1);
    /* Another unknown id, epoch 0 and a huge sequence; a copy lists the
     * producers by id whatever order they came in. */
    append1(st, 2, 0, 1 << 30, 1, 7, 104);
    assert_int_equal(st->n, 2);
    eng_producer_entry *c;
    size_t nc;
    assert_int_equal(eng_producers_copy(st, &c, &nc), 0);
    assert_int_equal(nc, 2);
    assert_int_equal(c[0].producer_id, 2);
    assert_int_equal(c[1].producer_id, 9);
    free(c);
    expect_batch(&must_find(st, 2)->batches[0], 1 << 30, 104, 0, 7);
    assert_null(eng_producers_find(st, 5));
}

static void test_same_epoch_sequence_must_follow(void **state)
{
    eng_producers *st = &((fixture *)*state)->st;
    /* Single-record batches: the multi-record cases come last (see main). */
    append1(st, 1, 0, 0, 1, 10, 0);
    append1(st, 1, 0, 1, 1, 20, 1);
    refuse1(st, 1, 0, 3, 1, ENG_ESEQUENCE); /* a gap */
    refuse1(st, 1, 0, 0, 2, ENG_ESEQUENCE); /* overlaps both, a retry of neither */
    refuse1(st, 1, 0, 1, 2, ENG_ESEQUENCE);
    assert_int_equal(must_find(st, 1)->nbatches, 2);
    append1(st, 1, 0, 2, 1, 30, 2);
    const eng_producer_entry *e = must_find(st, 1);
    assert_int_equal(e->nbatches, 3);
    expect_batch(&e->batches[2], 2, 2, 0, 30);
    assert_int_equal(e->last_timestamp, 30);
}

static void test_epochs_fence_and_restart_at_zero(void **state)
{
    eng_producers *st = &((fixture *)*state)->st;
    append1(st, 3, 5, 0, 1, 10, 0);
    append1(st, 3, 5, 1, 1, 11, 1);
    refuse1(st, 3, 4, 2, 1, ENG_EPRODUCER_FENCED);
    refuse1(st, 3, 6, 2, 1, ENG_ESEQUENCE); /* a new epoch continuing the old sequence */
    append1(st, 3, 6, 0, 1, 12, 2);
    const eng_producer_entry *e = must_find(st, 3);
    assert_int_equal(e->epoch, 6);
    assert_int_equal(e->nbatches, 1);
    expect_batch(&e->batches[0], 0, 2, 0, 12);
    /* A retry from the fenced epoch is no duplicate: it is fenced. */
    refuse1(st, 3, 5, 1, 1, ENG_EPRODUCER_FENCED);
    req r = {.len = 0};
    add_batch(&r, 3, 6, 0, 1, 12, 0);
    expect_dup(st, &r, 2, 2);
}

static void test_last_five_batches_answer_retries(void **state)
{
    eng_producers *st = &((fixture *)*state)->st;
    /* Single-record batches: multi-record retries have their own test. */
    for (int i = 0; i < 6; i++)
        append1(st, 5, 2, i, 1, 100 + i, 10 * i);
    const eng_producer_entry *e = must_find(st, 5);
    assert_int_equal(e->nbatches, ENG_PRODUCER_BATCHES);
    expect_batch(&e->batches[0], 1, 10, 0, 101);
    expect_batch(&e->batches[4], 5, 50, 0, 105);
    for (int i = 1; i < 6; i++) {
        req r = {.len = 0};
        add_batch(&r, 5, 2, i, 1, 1, 0);
        expect_dup(st, &r, 10 * i, 10 * i);
    }
    /* The sixth-oldest has been forgotten: now it is just out of sequence. */
    refuse1(st, 5, 2, 0, 1, ENG_ESEQUENCE);
    /* A retry is matched on its epoch too. */
    refuse1(st, 5, 3, 4, 1, ENG_ESEQUENCE);
    assert_int_equal(must_find(st, 5)->nbatches, ENG_PRODUCER_BATCHES);
}

static void test_several_batches_in_one_request(void **state)
{
    eng_producers *st = &((fixture *)*state)->st;
    append1(st, 1, 0, 0, 1, 10, 0);
    req r = {.len = 0};
    add_batch(&r, -1, -1, -1, 2, 20, 0);
    add_batch(&r, 1, 0, 1, 1, 21, 0);
    add_batch(&r, 9, 0, 7, 1, 22, 0);
    add_batch(&r, 1, 0, 2, 1, 23, 0);
    add_batch(&r, 11, 4, 0, 1, 24, 0);
    assert_int_equal(check(st, &r), 0);
    assert_int_equal(r.v.producer_batches, 4);
    assert_int_equal(r.v.new_producers, 2);
    assert_false(r.v.duplicate);
    /* Offsets run on through the producer-less batch: 100-101, 102, 103, 104, 105. */
    eng_producers_apply(st, r.buf, r.len, 100);
    assert_int_equal(st->n, 3);
    assert_null(eng_producers_find(st, -1));
    const eng_producer_entry *e = must_find(st, 1);
    assert_int_equal(e->nbatches, 3);
    expect_batch(&e->batches[1], 1, 102, 0, 21);
    expect_batch(&e->batches[2], 2, 104, 0, 23);
    expect_batch(&must_find(st, 9)->batches[0], 7, 103, 0, 22);
    expect_batch(&must_find(st, 11)->batches[0], 0, 105, 0, 24);

    /* A gap between two batches of the same request names the second. */
    r.len = 0;
    add_batch(&r, 1, 0, 3, 1, 1, 0);
    add_batch(&r, 1, 0, 5, 1, 1, 0);
    assert_int_equal(check(st, &r), ENG_ESEQUENCE);
    assert_non_null(strstr(r.err.message, "batch 1: "));
    /* A later batch below the epoch an earlier one of the request set. */
    r.len = 0;
    add_batch(&r, 1, 1, 0, 1, 1, 0);
    add_batch(&r, 1, 0, 3, 1, 1, 0);
    assert_int_equal(check(st, &r), ENG_EPRODUCER_FENCED);
    assert_non_null(strstr(r.err.message, "batch 1: "));

    /* Every batch a retry: the request's first and last offsets. */
    r.len = 0;
    add_batch(&r, 1, 0, 1, 1, 1, 0);
    add_batch(&r, 9, 0, 7, 1, 1, 0);
    add_batch(&r, 1, 0, 2, 1, 1, 0);
    expect_dup(st, &r, 102, 104);
    /* A retry next to a new batch cannot be answered either way. */
    r.len = 0;
    add_batch(&r, 1, 0, 2, 1, 1, 0);
    add_batch(&r, 1, 0, 3, 1, 1, 0);
    assert_int_equal(check(st, &r), ENG_ESEQUENCE);
    /* Nor a retry next to a producer-less batch. */
    r.len = 0;
    add_batch(&r, 1, 0, 2, 1, 1, 0);
    add_batch(&r, -1, -1, -1, 1, 1, 0);
    assert_int_equal(check(st, &r), ENG_ESEQUENCE);
    assert_int_equal(st->n, 3);
}

static void test_expire_drops_idle_producers(void **state)
{
    eng_producers *st = &((fixture *)*state)->st;
    append1(st, 1, 0, 0, 1, 1000, 0);
    append1(st, 2, 0, 0, 1, 2000, 1);
    append1(st, 3, 0, 0, 1, 2001, 2);
    append1(st, 4, 0, 0, 1, 500, 3);
    assert_int_equal(eng_producers_expire(st, 5000, 10000), 0);
    assert_int_equal(st->n, 4);
    /* Idle exactly expiration_ms counts as expired (Kafka's >=). */
    assert_int_equal(eng_producers_expire(st, 5000, 3000), 3);
    assert_int_equal(st->n, 1);
    assert_non_null(eng_producers_find(st, 3));
    assert_null(eng_producers_find(st, 1));
    assert_null(eng_producers_find(st, 2));
    assert_null(eng_producers_find(st, 4));
    /* An expired producer is unknown again: any sequence goes. */
    append1(st, 1, 0, 77, 1, 6000, 4);
    assert_int_equal(must_find(st, 1)->batches[0].last_seq, 77);
}

/* What the log of test_replay_builds_the_same_state leaves. */
static void expect_log_state(const eng_producers *st)
{
    assert_int_equal(st->n, 2);
    const eng_producer_entry *e = must_find(st, 1);
    assert_int_equal(e->epoch, 0);
    assert_int_equal(e->nbatches, 2);
    expect_batch(&e->batches[0], 2, 2, 2, 10);
    expect_batch(&e->batches[1], 4, 7, 1, 13);
    e = must_find(st, 2);
    assert_int_equal(e->epoch, 2);
    assert_int_equal(e->nbatches, 1);
    expect_batch(&e->batches[0], 0, 8, 0, 14);
    assert_int_equal(e->last_timestamp, 14);
}

static void test_replay_builds_the_same_state(void **state)
{
    eng_producers *applied = &((fixture *)*state)->st, replayed;
    /* The log as stored: header base offsets 0, 3, 5, 6, 8. */
    req r = {.len = 0};
    add_batch(&r, 1, 0, 0, 3, 10, 0);
    add_batch(&r, -1, -1, -1, 2, 11, 3);
    add_batch(&r, 2, 1, 10, 1, 12, 5);
    add_batch(&r, 1, 0, 3, 2, 13, 6);
    add_batch(&r, 2, 2, 0, 1, 14, 8);
    assert_int_equal(check(applied, &r), 0);
    eng_producers_apply(applied, r.buf, r.len, 0);
    expect_log_state(applied);
    eng_producers_init(&replayed);
    eng_batch_header h;
    for (size_t pos = 0; pos < r.len; pos += eng_batch_size(&h)) {
        assert_int_equal(eng_batch_header_decode(r.buf + pos, r.len - pos, &h), 0);
        assert_int_equal(eng_producers_replay(&replayed, &h), 0);
    }
    expect_log_state(&replayed);
    eng_producers_free(&replayed);
}

/* Kafka's vector state, reached the way a partition reaches it. */
static void one_producer_state(eng_producers *st)
{
    eng_producers_free(st);
    append1(st, 4242, 1, 17, 2, 5000, 100);
}

static void expect_one_producer(const eng_producers *st)
{
    assert_int_equal(st->n, 1);
    const eng_producer_entry *e = must_find(st, 4242);
    assert_int_equal(e->epoch, 1);
    assert_int_equal(e->nbatches, 1);
    expect_batch(&e->batches[0], 18, 101, 1, 5000);
    assert_int_equal(e->last_timestamp, 5000);
    assert_int_equal(e->coordinator_epoch, -1);
    assert_int_equal(e->txn_first_offset, -1);
}

static void expect_encoding(const eng_producers *st, const char *hex)
{
    uint8_t want[256], *out;
    size_t n = unhex(hex, want, sizeof want), len;
    assert_int_equal(eng_producers_encode(st, &out, &len), 0);
    assert_int_equal(len, n);
    assert_memory_equal(out, want, n);
    free(out);
}

static void test_snapshot_matches_kafka_vectors(void **state)
{
    eng_producers *st = &((fixture *)*state)->st;
    expect_encoding(st, SNAP_EMPTY);
    one_producer_state(st);
    expect_encoding(st, SNAP_ONE);

    uint8_t buf[256];
    size_t n = unhex(SNAP_ONE, buf, sizeof buf);
    eng_producers_free(st);
    assert_int_equal(eng_producers_decode(st, buf, n), 0);
    expect_one_producer(st);
    expect_encoding(st, SNAP_ONE);
    n = unhex(SNAP_EMPTY, buf, sizeof buf);
    assert_int_equal(eng_producers_decode(st, buf, n), 0); /* replaces what st held */
    assert_int_equal(st->n, 0);
}

/* fix_crc: recompute the CRC of an edited snapshot, so that the flaw the
 * edit made, not the CRC, is what the decoder must notice. */
static void expect_corrupt(uint8_t *b, size_t len, bool fix_crc, const char *what)
{
    if (fix_crc)
        eng_put_be32(b + 2, eng_crc32c(0, b + 6, len - 6));
    eng_producers st;
    eng_producers_init(&st);
    one_producer_state(&st);
    int rc = eng_producers_decode(&st, b, len);
    if (rc != ENG_ECORRUPT)
        fail_msg("%s: decode gave %d", what, rc);
    if (st.n != 0)
        fail_msg("%s: %zu entries left", what, st.n);
    eng_producers_free(&st);
}

static void test_snapshot_decode_refuses_corruption(void **state)
{
    eng_producers *two = &((fixture *)*state)->st;
    append1(two, 7, 0, 0, 1, 1, 0);
    append1(two, 8, 0, 0, 1, 1, 1);
    uint8_t *good, b[256];
    size_t len;
    assert_int_equal(eng_producers_encode(two, &good, &len), 0);
    assert_int_equal(len, 10 + 2 * 46);

    memcpy(b, good, len);
    b[30] ^= 1;
    expect_corrupt(b, len, false, "bad crc");
    memcpy(b, good, len);
    eng_put_be16(b, 2);
    expect_corrupt(b, len, true, "version 2");
    eng_put_be16(b, 1);
    expect_corrupt(b, len - 1, true, "truncated entry");
    expect_corrupt(b, len - 46, true, "count 2, one entry");
    memcpy(b, good, len);
    eng_put_be32(b + 6, 3);
    expect_corrupt(b, len, true, "count 3, two entries");
    memcpy(b, good, len);
    memcpy(b + 56, good + 10, 46); /* ids 7, 7 */
    expect_corrupt(b, len, true, "repeated id");
    memcpy(b, good, len);
    eng_put_be64(b + 10, (uint64_t)-3);
    expect_corrupt(b, len, true, "negative id");
    memcpy(b, good, len);
    expect_corrupt(b, 9, false, "shorter than the header");
    /* The untouched bytes still decode: each case above broke one thing. */
    eng_producers st;
    eng_producers_init(&st);
    assert_int_equal(eng_producers_decode(&st, good, len), 0);
    assert_int_equal(st.n, 2);
    eng_producers_free(&st);
    free(good);
}

/* Kafka writes its producers in the order of a Java HashMap (by the ids'
 * hash buckets: with 16 buckets, 16 lands in bucket 0 ahead of 5), so a
 * snapshot from a Kafka broker is not sorted by id.  It was refused as
 * corrupt and deleted, and the producers it held were then rebuilt from the
 * log at best, or forgotten after a clean stop. */
static void test_snapshot_in_kafka_order_decodes(void **state)
{
    eng_producers *st = &((fixture *)*state)->st;
    append1(st, 5, 0, 0, 1, 100, 0);
    append1(st, 16, 2, 7, 2, 200, 1);
    uint8_t *good, b[256];
    size_t len;
    assert_int_equal(eng_producers_encode(st, &good, &len), 0);
    assert_int_equal(len, 10 + 2 * 46);
    memcpy(b, good, 10);
    memcpy(b + 10, good + 56, 46); /* ids 16, 5 */
    memcpy(b + 56, good + 10, 46);
    eng_put_be32(b + 2, eng_crc32c(0, b + 6, len - 6));
    eng_producers_free(st);
    assert_int_equal(eng_producers_decode(st, b, len), 0);
    assert_int_equal(st->n, 2);
    assert_non_null(eng_producers_find(st, 5));
    const eng_producer_entry *e = must_find(st, 16);
    assert_int_equal(e->epoch, 2);
    expect_batch(&e->batches[0], 8, 2, 1, 200);
    /* Encoded again, in logstore's (sorted) order. */
    uint8_t *again;
    size_t len2;
    assert_int_equal(eng_producers_encode(st, &again, &len2), 0);
    assert_int_equal(len2, len);
    assert_memory_equal(again, good, len);
    free(again);
    free(good);
}

static void snapshot_path(char *buf, size_t cap, const char *dir, int64_t off)
{
    assert_int_equal(eng_fs_segment_path(buf, cap, dir, off, ".snapshot"), 0);
}

static void expect_dir(const char *dir, const char *want)
{
    char got[2048];
    ts_list_dir(dir, got, sizeof got);
    assert_string_equal(got, want);
}

static void test_snapshot_files_load_the_latest(void **state)
{
    fixture *f = *state;
    eng_producers *st = &f->st, none;
    eng_producers_init(&none);
    one_producer_state(st);
    assert_int_equal(eng_producers_write_snapshot(&none, f->dir, 0, true), 0);
    assert_int_equal(eng_producers_write_snapshot(st, f->dir, 102, false), 0);
    append1(st, 4243, 0, 0, 1, 6000, 102);
    assert_int_equal(eng_producers_write_snapshot(st, f->dir, 200, true), 0);
    assert_int_equal(eng_producers_write_snapshot(st, f->dir, 300, false), 0);
    /* Files Kafka's naming does not match are not snapshots. */
    char path[1024];
    snprintf(path, sizeof path, "%s/00000000000000000150.log", f->dir);
    assert_int_equal(eng_fs_write_atomic(path, "x", 1), 0);
    snprintf(path, sizeof path, "%s/150.snapshot", f->dir);
    assert_int_equal(eng_fs_write_atomic(path, "x", 1), 0);

    /* The unsynced writer too leaves Kafka's bytes. */
    uint8_t want[256], *raw;
    size_t n = unhex(SNAP_ONE, want, sizeof want), len;
    snapshot_path(path, sizeof path, f->dir, 102);
    assert_int_equal(ts_read_file(path, &raw, &len), 0);
    assert_int_equal(len, n);
    assert_memory_equal(raw, want, n);
    free(raw);

    int64_t at = 99;
    assert_int_equal(eng_producers_load_latest(st, f->dir, 250, 0, 1000000, &at, NULL), 0);
    assert_int_equal(at, 200);
    assert_int_equal(st->n, 2);
    expect_dir(f->dir, "00000000000000000000.snapshot,00000000000000000102.snapshot,"
                       "00000000000000000150.log,00000000000000000200.snapshot,150.snapshot");
    /* At the offset itself counts as at or below. */
    assert_int_equal(eng_producers_load_latest(st, f->dir, 102, 0, 1000000, &at, NULL), 0);
    assert_int_equal(at, 102);
    expect_one_producer(st);
    assert_int_equal(eng_producers_load_latest(st, f->dir, 101, 0, 1000000, &at, NULL), 0);
    assert_int_equal(at, 0);
    assert_int_equal(st->n, 0);
    expect_dir(f->dir, "00000000000000000000.snapshot,00000000000000000150.log,150.snapshot");
}

static void test_unreadable_snapshot_falls_back(void **state)
{
    fixture *f = *state;
    eng_producers *st = &f->st;
    one_producer_state(st);
    assert_int_equal(eng_producers_write_snapshot(st, f->dir, 102, true), 0);
    append1(st, 4243, 0, 0, 1, 6000, 102);
    assert_int_equal(eng_producers_write_snapshot(st, f->dir, 103, true), 0);
    assert_int_equal(eng_producers_write_snapshot(st, f->dir, 104, true), 0);
    /* 104 torn by a crash, 103 with a flipped bit. */
    char path[1024];
    uint8_t *raw;
    size_t len;
    snapshot_path(path, sizeof path, f->dir, 104);
    assert_int_equal(eng_fs_write_atomic(path, "\0\1", 2), 0);
    snapshot_path(path, sizeof path, f->dir, 103);
    assert_int_equal(ts_read_file(path, &raw, &len), 0);
    raw[len - 1] ^= 0x10;
    assert_int_equal(eng_fs_write_atomic(path, raw, len), 0);
    free(raw);

    int64_t at = 99;
    assert_int_equal(eng_producers_load_latest(st, f->dir, 1000, 0, 1000000, &at, NULL), 0);
    assert_int_equal(at, 102);
    expect_one_producer(st);
    expect_dir(f->dir, "00000000000000000102.snapshot");
}

/* A snapshot this process cannot read (here a socket where the file
 * should be: open fails with ENXIO) may be good once the cause is gone
 * (descriptors freed, a disk back): it is passed over, not deleted. */
static void test_snapshot_that_cannot_be_read_is_kept(void **state)
{
    fixture *f = *state;
    eng_producers *st = &f->st;
    one_producer_state(st);
    assert_int_equal(eng_producers_write_snapshot(st, f->dir, 102, true), 0);
    char path[1024];
    snapshot_path(path, sizeof path, f->dir, 104);
    int sock = socket(AF_UNIX, SOCK_STREAM, 0);
    assert_true(sock >= 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    assert_true(strlen(path) < sizeof sa.sun_path);
    memcpy(sa.sun_path, path, strlen(path) + 1);
    assert_int_equal(bind(sock, (struct sockaddr *)&sa, sizeof sa), 0);

    int64_t at = 99;
    assert_int_equal(eng_producers_load_latest(st, f->dir, 1000, 0, 1000000, &at, NULL), 0);
    assert_int_equal(at, 102);
    expect_one_producer(st);
    expect_dir(f->dir, "00000000000000000102.snapshot,00000000000000000104.snapshot");
    close(sock);
}

static void test_load_without_snapshots_and_with_expiry(void **state)
{
    fixture *f = *state;
    eng_producers *st = &f->st;
    one_producer_state(st);
    int64_t at = 99;
    assert_int_equal(eng_producers_load_latest(st, f->dir, 1000, 0, 1000000, &at, NULL), 0);
    assert_int_equal(at, -1);
    assert_int_equal(st->n, 0);

    one_producer_state(st); /* 4242 at 5000 */
    append1(st, 1, 0, 0, 1, 3000, 102);
    append1(st, 2, 0, 0, 1, 3001, 103);
    assert_int_equal(eng_producers_write_snapshot(st, f->dir, 104, true), 0);
    assert_int_equal(eng_producers_load_latest(st, f->dir, 104, 6000, 3000, &at, NULL), 0);
    assert_int_equal(at, 104);
    assert_int_equal(st->n, 2);
    assert_null(eng_producers_find(st, 1));
    assert_non_null(eng_producers_find(st, 2));
    assert_non_null(eng_producers_find(st, 4242));
}

/* A retry of several batches answers the offsets they span, whatever
 * order it sends them in: it answered the first one's first offset and
 * the last one's last, so [B, A] gave a base_offset above its last_offset,
 * and the append time and the durable wait (up to the last offset) of A,
 * the earlier batch, not of B. */
static void test_retry_in_another_order(void **state)
{
    eng_producers *st = &((fixture *)*state)->st;
    append1(st, 1, 0, 0, 2, 100, 10); /* A: offsets 10-11 */
    append1(st, 2, 0, 0, 3, 200, 12); /* B: offsets 12-14 */
    req r = {.len = 0};
    add_batch(&r, 2, 0, 0, 3, 1, 0);
    add_batch(&r, 1, 0, 0, 2, 1, 0);
    expect_dup(st, &r, 10, 14);
    assert_int_equal(r.v.dup_timestamp, 200);
}

/* A producer id with no epoch (-1), as ProducerAppendInfo takes it: a
 * stored epoch of -1 is no epoch at all, so any sequence follows it and
 * any epoch replaces it, with retries still found; once a real epoch is
 * known, -1 is below it.  An epoch below -1 is below even an unknown
 * producer's.  Ids below 0 (-1 and others: hasProducerId is id > -1) are
 * no producer, whatever their epoch and sequence say. */
static void test_producer_without_epoch(void **state)
{
    eng_producers *st = &((fixture *)*state)->st;
    append1(st, 7, -1, 5, 1, 10, 0);
    assert_int_equal(must_find(st, 7)->epoch, -1);
    append1(st, 7, -1, 100, 2, 11, 1);
    append1(st, 7, -1, 40, 1, 12, 3);
    req r = {.len = 0};
    add_batch(&r, 7, -1, 100, 2, 11, 0);
    expect_dup(st, &r, 1, 2);
    append1(st, 7, 0, 3, 1, 13, 4);
    const eng_producer_entry *e = must_find(st, 7);
    assert_int_equal(e->epoch, 0);
    assert_int_equal(e->nbatches, 1);
    expect_batch(&e->batches[0], 3, 4, 0, 13);
    refuse1(st, 7, -1, 4, 1, ENG_EPRODUCER_FENCED);
    refuse1(st, 8, -5, 0, 1, ENG_EPRODUCER_FENCED);
    assert_null(eng_producers_find(st, 8));

    for (int64_t pid = -1; pid >= -3; pid -= 2) {
        r.len = 0;
        add_batch(&r, pid, 3, 9, 1, 14, 0);
        assert_int_equal(check(st, &r), 0);
        assert_int_equal(r.v.producer_batches, 0);
        assert_false(r.v.duplicate);
        eng_producers_apply(st, r.buf, r.len, 5);
    }
    assert_int_equal(st->n, 1);
}

/* Sequences wrap past INT32_MAX to 0 (Kafka's incrementSequence and
 * inSequence, which compare in long arithmetic). */
static void test_sequence_wraps_at_int32_max(void **state)
{
    eng_producers *st = &((fixture *)*state)->st;
    append1(st, 1, 0, INT32_MAX, 1, 1, 0);
    assert_int_equal(must_find(st, 1)->batches[0].last_seq, INT32_MAX);
    append1(st, 1, 0, 0, 1, 2, 1);
    assert_int_equal(must_find(st, 1)->batches[1].last_seq, 0);
}

/* Batches of several records: the next one starts after the last record's
 * sequence, and a retry is recognised by both ends of its range, the first
 * found by going back from the last (Kafka's decrementSequence), across
 * INT32_MAX too. */
static void test_multi_record_batches(void **state)
{
    eng_producers *st = &((fixture *)*state)->st;
    append1(st, 1, 0, 0, 3, 1, 20);
    refuse1(st, 1, 0, 4, 1, ENG_ESEQUENCE);
    refuse1(st, 1, 0, 2, 1, ENG_ESEQUENCE);
    refuse1(st, 1, 0, 1, 2, ENG_ESEQUENCE); /* same last sequence, other first */
    append1(st, 1, 0, 3, 2, 2, 23);
    expect_batch(&must_find(st, 1)->batches[1], 4, 24, 1, 2);
    req r = {.len = 0};
    add_batch(&r, 1, 0, 0, 3, 1, 0);
    expect_dup(st, &r, 20, 22);
    add_batch(&r, 1, 0, 3, 2, 1, 0);
    expect_dup(st, &r, 20, 24);

    append1(st, 2, 0, INT32_MAX - 1, 4, 3, 30);
    expect_batch(&must_find(st, 2)->batches[0], 1, 33, 3, 3);
    r.len = 0;
    add_batch(&r, 2, 0, INT32_MAX - 1, 4, 3, 0);
    expect_dup(st, &r, 30, 33);
    refuse1(st, 2, 0, 0, 1, ENG_ESEQUENCE);
    append1(st, 2, 0, 2, 1, 4, 34);
    expect_batch(&must_find(st, 2)->batches[1], 2, 34, 0, 4);
}

/* Producer ids are the clients' to choose: thousands of them, in any
 * order, are each found, expire selectively, list in order and survive a
 * snapshot (the state is a hashed array, not a sorted one). */
static void test_many_producers(void **state)
{
    eng_producers *st = &((fixture *)*state)->st;
    enum { N = 5000 };
    for (int i = 0; i < N; i++) {
        int64_t pid = (int64_t)((i * 7919) % N) * 1000003; /* scattered, each once */
        append1(st, pid, 0, 0, 1, i % 2 ? 5000 : 1000, i);
    }
    assert_int_equal(st->n, N);
    for (int i = 0; i < N; i++)
        assert_int_equal(must_find(st, (int64_t)i * 1000003)->producer_id, (int64_t)i * 1000003);
    assert_null(eng_producers_find(st, 1));
    /* Timestamps 1000 (even i) expire at 3000 with a 2000 ms expiry. */
    assert_int_equal(eng_producers_expire(st, 3000, 2000), N / 2);
    assert_int_equal(st->n, N / 2);
    for (int i = 0; i < N; i++) {
        int64_t pid = (int64_t)((i * 7919) % N) * 1000003;
        const eng_producer_entry *e = eng_producers_find(st, pid);
        if (i % 2)
            assert_int_equal(must_find(st, pid)->batches[0].last_offset, i);
        else
            assert_null(e);
    }
    eng_producer_entry *c;
    size_t nc;
    assert_int_equal(eng_producers_copy(st, &c, &nc), 0);
    assert_int_equal(nc, N / 2);
    for (size_t i = 1; i < nc; i++)
        assert_true(c[i - 1].producer_id < c[i].producer_id);
    free(c);
    uint8_t *buf;
    size_t len;
    assert_int_equal(eng_producers_encode(st, &buf, &len), 0);
    eng_producers back;
    eng_producers_init(&back);
    assert_int_equal(eng_producers_decode(&back, buf, len), 0);
    free(buf);
    assert_int_equal(back.n, N / 2);
    for (size_t i = 0; i < st->n; i++)
        assert_int_equal(must_find(&back, st->entries[i].producer_id)->batches[0].last_seq,
                         st->entries[i].batches[0].last_seq);
    /* New ids still go in after the expiry compacted the array. */
    append1(&back, 42, 0, 0, 1, 9000, N);
    assert_int_equal(must_find(&back, 42)->batches[0].last_offset, N);
    eng_producers_free(&back);
}

/* Expiring producers gives their room back: the state of a partition that
 * once saw a burst of producer ids (each id the client's to choose) must
 * not keep the burst's arrays for good once they are forgotten.  Those
 * kept are still found and new ones still go in. */
static void test_expire_gives_back_room(void **state)
{
    eng_producers *st = &((fixture *)*state)->st;
    enum { N = 20000 };
    for (int i = 0; i < N; i++)
        append1(st, (int64_t)i * 7, 0, 0, 1, i < 3 ? 9000 : 1000, i);
    assert_true(st->cap >= N);
    assert_int_equal(eng_producers_expire(st, 3000, 2000), N - 3);
    assert_int_equal(st->n, 3);
    assert_true(st->cap <= 16);
    assert_true(st->nslots <= 32);
    for (int i = 0; i < 3; i++)
        assert_int_equal(must_find(st, (int64_t)i * 7)->batches[0].last_offset, i);
    assert_null(eng_producers_find(st, 21));
    for (int i = 0; i < 100; i++)
        append1(st, 1000000 + i, 0, 0, 1, 9000, N + i);
    assert_int_equal(st->n, 103);
    assert_int_equal(must_find(st, 1000099)->batches[0].last_offset, N + 99);
    assert_int_equal(must_find(st, 14)->batches[0].last_offset, 2);
    /* Every one expired: as little as an empty state holds. */
    assert_int_equal(eng_producers_expire(st, 100000, 2000), 103);
    assert_true(st->cap <= 8);
    assert_true(st->nslots <= 16);
    append1(st, 5, 0, 0, 1, 200000, N + 100);
    assert_int_equal(must_find(st, 5)->batches[0].last_offset, N + 100);
}

/* One request carrying many producers' batches (two each, in sequence)
 * is checked as one: each producer against its own earlier batch in the
 * request, a retry of the whole request found, a gap named by its batch. */
static void test_request_with_many_producers(void **state)
{
    eng_producers *st = &((fixture *)*state)->st;
    enum { P = 1000, B = 2 * P };
    size_t cap = (size_t)B * 80, len = 0;
    uint8_t *buf = malloc(cap);
    assert_non_null(buf);
    size_t gap_at = 0;
    for (int i = 0; i < B; i++) {
        eng_record_spec rec1 = {.timestamp = 1000, .key = (const uint8_t *)"k", .key_len = 1,
                                .value = (const uint8_t *)"v", .value_len = 1};
        eng_batch_params bp;
        eng_batch_params_init(&bp);
        bp.producer_id = i % P;
        bp.producer_epoch = 0;
        bp.base_sequence = i / P;
        if (i == B - 7)
            gap_at = len;
        size_t n = eng_batch_encode(buf + len, cap - len, &bp, &rec1, 1);
        assert_true(n > 0);
        len += n;
    }
    eng_producer_verdict v;
    eng_errdetail err = {0};
    assert_int_equal(eng_producers_check(st, buf, len, &v, &err), 0);
    assert_false(v.duplicate);
    assert_int_equal(v.producer_batches, B);
    assert_int_equal(v.new_producers, P);
    eng_producers_apply(st, buf, len, 0);
    assert_int_equal(st->n, P);
    assert_int_equal(must_find(st, P - 1)->batches[1].last_offset, B - 1);

    assert_int_equal(eng_producers_check(st, buf, len, &v, &err), 0);
    assert_true(v.duplicate);
    assert_int_equal(v.dup_first_offset, 0);
    assert_int_equal(v.dup_last_offset, B - 1);

    /* The same producers again, the 7th-last batch's sequence skipping one. */
    for (size_t pos = 0; pos < len;) {
        eng_batch_header h;
        assert_int_equal(eng_batch_header_decode(buf + pos, len - pos, &h), 0);
        h.base_sequence += pos == gap_at ? 3 : 2;
        eng_batch_header_encode(buf + pos, &h);
        eng_batch_update_crc(buf + pos, (size_t)h.length + 12);
        pos += (size_t)h.length + 12;
    }
    assert_int_equal(eng_producers_check(st, buf, len, &v, &err), ENG_ESEQUENCE);
    char want[32];
    snprintf(want, sizeof want, "batch %d: ", B - 7);
    assert_non_null(strstr(err.message, want));
    free(buf);
}

#define TEST(f) cmocka_unit_test_setup_teardown(f, setup, teardown)

int main(void)
{
    const struct CMUnitTest tests[] = {
        TEST(test_unknown_producer_takes_any_epoch_and_sequence),
        TEST(test_same_epoch_sequence_must_follow),
        TEST(test_epochs_fence_and_restart_at_zero),
        TEST(test_producer_without_epoch),
        TEST(test_retry_in_another_order),
        TEST(test_last_five_batches_answer_retries),
        TEST(test_several_batches_in_one_request),
        TEST(test_expire_drops_idle_producers),
        TEST(test_expire_gives_back_room),
        TEST(test_replay_builds_the_same_state),
        TEST(test_snapshot_matches_kafka_vectors),
        TEST(test_snapshot_decode_refuses_corruption),
        TEST(test_snapshot_in_kafka_order_decodes),
        TEST(test_snapshot_files_load_the_latest),
        TEST(test_unreadable_snapshot_falls_back),
        TEST(test_snapshot_that_cannot_be_read_is_kept),
        TEST(test_load_without_snapshots_and_with_expiry),
        TEST(test_many_producers),
        TEST(test_request_with_many_producers),
        /* Last, as each needs sequence arithmetic that can overflow an int
         * (the sanitizer build ends the whole run at the first overflow). */
        TEST(test_sequence_wraps_at_int32_max),
        TEST(test_multi_record_batches),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
