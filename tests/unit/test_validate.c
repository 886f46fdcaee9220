/*
 * test_validate.c - what an append is checked against and stamped with
 * (engine/eng_validate.c), beyond the refusals test_partition.c covers:
 *   - message.timestamp.before/after.max.ms (and the deprecated
 *     difference.max.ms fallback) near INT64_MAX refuse nothing;
 *   - a record without a timestamp (-1, Kafka's NO_TIMESTAMP) is outside
 *     no window; the window's ends are in it (Kafka refuses only
 *     now - ts > before.max.ms or ts - now > after.max.ms);
 *   - max.message.bytes holds for a producer batch as sent, not only after
 *     the topic's codec shrank it; JSON-built batches count as stored, and
 *     a batch of exactly max.message.bytes is taken;
 *   - a producer's partitionLeaderEpoch is stored as 0 (DESIGN §2);
 *   - a read-only append never writes to its input: offsets and epoch go out in
 *     heads of their own, stamps (LogAppendTime, a corrected maxTimestamp,
 *     and the later LogAppendTime restamped under the lock) in a copy;
 *   - an idempotent batch (producer id 0 included) needs a base sequence;
 *     control and delete-horizon batches are not taken from producers;
 *   - a producer batch carrying the LogAppendTime bit is stored as CreateTime
 *     on a CreateTime topic, with a valid CRC and its own record timestamps;
 *   - an LZ4 frame with the dictionary-ID flag is refused, as Kafka's LZ4
 *     reader refuses it, though liblz4 decodes it; so are LZ4 records that
 *     start with a skippable frame, naming that cause.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "eng_batch.h"
#include "eng_config.h"
#include "eng_endian.h"
#include "eng_error.h"
#include "eng_fault.h"
#include "eng_fs.h" /* eng_now_ms */
#include "eng_partition.h"
#include "eng_partition_impl.h" /* eng__plan_append: checks at a given clock */
#include "partition_fixture.h"
#include "support.h"

#include <lz4frame.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

/* Appends one producer batch of records at the given timestamps. */
static int append_at(eng_partition *p, const int64_t *ts, size_t n, eng_errdetail *err)
{
    eng_record_spec recs[8];
    assert_true(n <= 8);
    for (size_t i = 0; i < n; i++)
        recs[i] = rec(ts[i], "k", "v");
    uint8_t buf[512];
    size_t len = encode(buf, sizeof buf, recs, n);
    assert_true(len > 0);
    return do_append(p, buf, len, -1, true, NULL, err);
}

/* Reads the batch holding offset (max_bytes 1 still answers one whole
 * batch) and checks it like a consumer would. */
static void read_batch(eng_partition *p, int64_t offset, eng_fetch *ft, eng_batch_header *h)
{
    assert_int_equal(eng_partition_read(p, offset, 1, ft, NULL), 0);
    assert_true(ft->len > 0);
    assert_int_equal(eng_batch_validate(ft->data, ft->len, h), 0); /* CRC included */
    assert_int_equal(eng_batch_size(h), ft->len);
}

/* ---- timestamp windows ---------------------------------------------------- */

/* A limit near INT64_MAX used to overflow `now + limit` into a negative
 * bound that every record was above. */
static void test_window_near_int64_max(void **state)
{
    fixture *f = *state;
    f->cfg.v[ENG_CFG_MESSAGE_TIMESTAMP_AFTER_MAX_MS].i = INT64_MAX - 1;
    f->cfg.v[ENG_CFG_MESSAGE_TIMESTAMP_BEFORE_MAX_MS].i = INT64_MAX - 1;
    eng_partition *p = open_part(f, true, 0, NULL);
    eng_errdetail err = {0};
    int64_t now = eng_now_ms();
    int64_t ts[3] = {now, 0, INT64_MAX / 2};
    assert_int_equal(append_at(p, ts, 3, &err), 0);
    assert_int_equal(eng_partition_log_end_offset(p), 3);
    eng_partition_unref(p);
}

/* The same through the deprecated fallback, which both sides take when
 * before/after are left at their default. */
static void test_window_fallback_near_int64_max(void **state)
{
    fixture *f = *state;
    f->cfg.v[ENG_CFG_MESSAGE_TIMESTAMP_DIFFERENCE_MAX_MS].i = INT64_MAX - 1;
    eng_partition *p = open_part(f, true, 0, NULL);
    eng_errdetail err = {0};
    int64_t now = eng_now_ms();
    int64_t ts[2] = {now, now + 86400000};
    assert_int_equal(append_at(p, ts, 2, &err), 0);
    /* A finite limit still refuses, on each side. */
    f->cfg.v[ENG_CFG_MESSAGE_TIMESTAMP_AFTER_MAX_MS].i = 60000;
    f->cfg.v[ENG_CFG_MESSAGE_TIMESTAMP_BEFORE_MAX_MS].i = 60000;
    eng_partition_set_config(p, &f->cfg);
    int64_t future = now + 3600000, past = now - 3600000;
    assert_int_equal(append_at(p, &future, 1, &err), ENG_ETIMESTAMP);
    assert_int_equal(append_at(p, &past, 1, &err), ENG_ETIMESTAMP);
    assert_int_equal(eng_partition_log_end_offset(p), 2);
    eng_partition_unref(p);
}

/* Kafka's validateTimestamp skips NO_TIMESTAMP: a producer may send it. */
static void test_no_timestamp_is_in_every_window(void **state)
{
    fixture *f = *state;
    f->cfg.v[ENG_CFG_MESSAGE_TIMESTAMP_BEFORE_MAX_MS].i = 3600000;
    f->cfg.v[ENG_CFG_MESSAGE_TIMESTAMP_AFTER_MAX_MS].i = 60000;
    eng_partition *p = open_part(f, true, 0, NULL);
    eng_errdetail err = {0};
    int64_t now = eng_now_ms();
    int64_t none = -1;
    assert_int_equal(append_at(p, &none, 1, &err), 0);
    int64_t mixed[2] = {-1, now};
    assert_int_equal(append_at(p, mixed, 2, &err), 0);
    /* Other negative timestamps stay invalid; a real one is still checked. */
    int64_t bad[2] = {-1, -2}, old[2] = {-1, now - 2 * 3600000};
    assert_int_equal(append_at(p, bad, 2, &err), ENG_ETIMESTAMP);
    assert_int_equal(append_at(p, old, 2, &err), ENG_ETIMESTAMP);
    assert_int_equal(eng_partition_log_end_offset(p), 3);

    eng_fetch ft;
    eng_batch_header h;
    read_batch(p, 0, &ft, &h);
    assert_int_equal(h.max_timestamp, -1);
    eng_fetch_free(&ft);
    eng_partition_unref(p);
}

/* Kafka's recordHasInvalidTimestamp refuses now - ts > before or
 * ts - now > after: both ends of the window are in it.  The plan is made at
 * a given clock, so the ends are exact. */
static int plan_at(const eng_config *cfg, int64_t now, int64_t ts)
{
    eng_record_spec r = rec(ts, "k", "v");
    uint8_t buf[256];
    size_t len = encode(buf, sizeof buf, &r, 1);
    assert_true(len > 0);
    eng__append_plan plan;
    eng_errdetail err = {0};
    int rc = eng__plan_append(cfg, buf, buf, len, true, now, &plan, &err);
    if (!rc)
        eng__append_plan_free(&plan);
    else
        assert_non_null(strstr(err.message, "outside the topic's window"));
    return rc;
}

static void test_window_ends_are_inside(void **state)
{
    fixture *f = *state;
    f->cfg.v[ENG_CFG_MESSAGE_TIMESTAMP_BEFORE_MAX_MS].i = 1000;
    f->cfg.v[ENG_CFG_MESSAGE_TIMESTAMP_AFTER_MAX_MS].i = 500;
    const int64_t now = T0;
    assert_int_equal(plan_at(&f->cfg, now, now - 1000), 0);
    assert_int_equal(plan_at(&f->cfg, now, now - 1001), ENG_ETIMESTAMP);
    assert_int_equal(plan_at(&f->cfg, now, now + 500), 0);
    assert_int_equal(plan_at(&f->cfg, now, now + 501), ENG_ETIMESTAMP);
    assert_int_equal(plan_at(&f->cfg, now, now), 0);
}

/* ---- max.message.bytes ---------------------------------------------------- */

/* Five 100-byte values of one letter: ~700 bytes sent, far less in zstd. */
static size_t compressible_batch(uint8_t *buf, size_t cap)
{
    static char value[101];
    memset(value, 'v', 100);
    eng_record_spec recs[5];
    for (int i = 0; i < 5; i++)
        recs[i] = rec(T0 + i, "k", value);
    return encode(buf, cap, recs, 5);
}

/* compressible_batch's records in an LZ4 frame of Kafka's shape, with
 * dict_id in its header (0: no dictionary-ID flag). */
static size_t lz4_batch(uint8_t *buf, size_t cap, unsigned dict_id)
{
    uint8_t plain[2048];
    size_t len = compressible_batch(plain, sizeof plain);
    LZ4F_preferences_t prefs;
    memset(&prefs, 0, sizeof prefs);
    prefs.frameInfo.blockSizeID = LZ4F_max64KB;
    prefs.frameInfo.blockMode = LZ4F_blockIndependent;
    prefs.frameInfo.dictID = dict_id;
    size_t z = LZ4F_compressFrame(buf + ENG_BATCH_OVERHEAD, cap - ENG_BATCH_OVERHEAD,
                                  plain + ENG_BATCH_OVERHEAD, len - ENG_BATCH_OVERHEAD, &prefs);
    assert_false(LZ4F_isError(z));
    eng_batch_header h;
    assert_int_equal(eng_batch_header_decode(plain, len, &h), 0);
    h.length = (int32_t)(ENG_BATCH_OVERHEAD - ENG_LOG_OVERHEAD + z);
    h.attributes = (int16_t)((h.attributes & ~ENG_ATTR_CODEC_MASK) | ENG_CODEC_LZ4);
    eng_batch_header_encode(buf, &h);
    eng_batch_update_crc(buf, ENG_BATCH_OVERHEAD + z);
    return ENG_BATCH_OVERHEAD + z;
}

/* Kafka's KafkaLZ4BlockInputStream reads FLG bit 0 (the dictionary-ID flag
 * of the LZ4 spec) as a reserved bit and refuses the frame; liblz4 decodes
 * it, so logstore stored batches no Kafka consumer could read. */
static void test_lz4_dict_id_refused(void **state)
{
    fixture *f = *state;
    eng_partition *p = open_part(f, true, 0, NULL);
    uint8_t buf[2048];
    eng_errdetail err = {0};
    size_t len = lz4_batch(buf, sizeof buf, 7);
    assert_int_equal(do_append(p, buf, len, -1, true, NULL, &err), ENG_ECORRUPT);
    assert_non_null(strstr(err.message, "dictionary ID"));
    assert_int_equal(eng_partition_log_end_offset(p), 0);

    /* The same frame without the flag is Kafka's and is taken. */
    len = lz4_batch(buf, sizeof buf, 0);
    assert_int_equal(do_append(p, buf, len, -1, true, NULL, &err), 0);
    assert_int_equal(eng_partition_log_end_offset(p), 5);
    eng_partition_unref(p);
}

/* A skippable frame (magic 0x184D2A5?) ahead of the real one: liblz4 skips
 * it, then stops, having read no records; Kafka's reader wants the frame
 * magic first ("invalid magic bytes").  The refusal names the cause rather
 * than a record count the batch does hold. */
static void test_lz4_skippable_frame_refused(void **state)
{
    fixture *f = *state;
    eng_partition *p = open_part(f, true, 0, NULL);
    uint8_t buf[2048], out[2048];
    size_t len = lz4_batch(buf, sizeof buf, 0);
    static const uint8_t skip[12] = {0x50, 0x2a, 0x4d, 0x18, 4, 0, 0, 0, 'l', 'o', 'g', 's'};
    memcpy(out, buf, ENG_BATCH_OVERHEAD);
    memcpy(out + ENG_BATCH_OVERHEAD, skip, sizeof skip);
    memcpy(out + ENG_BATCH_OVERHEAD + sizeof skip, buf + ENG_BATCH_OVERHEAD, len - ENG_BATCH_OVERHEAD);
    len += sizeof skip;
    eng_batch_header h;
    assert_int_equal(eng_batch_header_decode(out, len, &h), 0);
    h.length += (int32_t)sizeof skip;
    eng_batch_header_encode(out, &h);
    eng_batch_update_crc(out, len);
    eng_errdetail err = {0};
    assert_int_equal(do_append(p, out, len, -1, true, NULL, &err), ENG_ECORRUPT);
    if (!strstr(err.message, "do not start with an LZ4 frame"))
        fail_msg("refused with: %s", err.message);
    assert_int_equal(eng_partition_log_end_offset(p), 0);
    eng_partition_unref(p);
}

static void test_max_message_bytes_before_conversion(void **state)
{
    fixture *f = *state;
    f->cfg.v[ENG_CFG_COMPRESSION_TYPE].i = ENG_COMPRESSION_ZSTD;
    f->cfg.v[ENG_CFG_MAX_MESSAGE_BYTES].i = 300;
    eng_partition *p = open_part(f, true, 0, NULL);
    uint8_t buf[2048];
    size_t len = compressible_batch(buf, sizeof buf);
    assert_true(len > 600);

    /* As Kafka's analyzeAndValidateRecords: the batch as sent is too big,
     * whatever zstd would make of it. */
    eng_errdetail err = {0};
    assert_int_equal(do_append(p, buf, len, -1, true, NULL, &err), ENG_ETOOLARGE);
    assert_true(err.has_bounds);
    assert_int_equal(err.hi, 300);
    assert_non_null(strstr(err.message, "max.message.bytes"));
    assert_int_equal(eng_partition_log_end_offset(p), 0);

    /* A JSON append has no batch as sent: logstore encodes it, and what is
     * stored (zstd) is what counts, as it did. */
    len = compressible_batch(buf, sizeof buf);
    eng_append_result res;
    assert_int_equal(do_append(p, buf, len, -1, false, &res, &err), 0);
    assert_true(res.batch_bytes <= 300);
    assert_int_equal(eng_partition_log_end_offset(p), 5);

    /* Under the limit as sent: accepted and stored compressed. */
    f->cfg.v[ENG_CFG_MAX_MESSAGE_BYTES].i = (int64_t)len;
    eng_partition_set_config(p, &f->cfg);
    len = compressible_batch(buf, sizeof buf);
    assert_int_equal(do_append(p, buf, len, -1, true, &res, &err), 0);
    assert_true(res.batch_bytes < len);
    eng_partition_unref(p);
}

/* A batch of exactly max.message.bytes as stored is taken; a byte more is
 * refused and nothing is written (Kafka: size > maxMessageSize refuses). */
static void test_max_message_bytes_exact(void **state)
{
    fixture *f = *state;
    eng_record_spec recs[3] = {rec(T0, "a", "one"), rec(T0, "b", "two"), rec(T0, "c", "six")};
    uint8_t buf[512];
    size_t len = encode(buf, sizeof buf, recs, 3);
    assert_true(len > 0);
    f->cfg.v[ENG_CFG_MAX_MESSAGE_BYTES].i = (int64_t)len - 1;
    eng_partition *p = open_part(f, true, 0, NULL);
    eng_errdetail err = {0};
    /* producer_batches false: measured as stored, as a JSON append is */
    assert_int_equal(do_append(p, buf, len, -1, false, NULL, &err), ENG_ETOOLARGE);
    assert_int_equal(err.hi, (int64_t)len - 1);
    assert_int_equal(eng_partition_log_end_offset(p), 0);

    f->cfg.v[ENG_CFG_MAX_MESSAGE_BYTES].i = (int64_t)len;
    eng_partition_set_config(p, &f->cfg);
    len = encode(buf, sizeof buf, recs, 3);
    eng_append_result res;
    assert_int_equal(do_append(p, buf, len, -1, false, &res, &err), 0);
    assert_int_equal(res.batch_bytes, len);
    len = encode(buf, sizeof buf, recs, 3);
    assert_int_equal(do_append(p, buf, len, -1, true, &res, &err), 0); /* as sent too */
    assert_int_equal(eng_partition_log_end_offset(p), 6);
    eng_partition_unref(p);
}

/* ---- producer batch headers ------------------------------------------------ */

/* One producer batch with the given header fields; returns the append's
 * result (nothing written on a refusal). */
static int append_with(eng_partition *p, int16_t attributes, int64_t producer_id,
                       int32_t base_sequence, eng_errdetail *err)
{
    eng_record_spec recs[2] = {rec(T0, "a", "x"), rec(T0, "b", "y")};
    eng_batch_params bp;
    eng_batch_params_init(&bp);
    bp.attributes = attributes;
    bp.producer_id = producer_id;
    bp.producer_epoch = producer_id >= 0 ? 0 : -1;
    bp.base_sequence = base_sequence;
    uint8_t buf[256];
    size_t len = eng_batch_encode(buf, sizeof buf, &bp, recs, 2);
    assert_true(len > 0);
    *err = (eng_errdetail){0};
    return do_append(p, buf, len, -1, true, NULL, err);
}

/* Kafka's validateBatch: an idempotent batch (producerId >= 0, and 0 is a
 * producer id) needs a base sequence.  Control batches come only from a
 * coordinator, and a delete horizon only from the cleaner: a produced
 * one would let the cleaner drop tombstones at a time the client chose. */
static void test_producer_header_rules(void **state)
{
    fixture *f = *state;
    eng_partition *p = open_part(f, true, 0, NULL);
    eng_errdetail err;
    assert_int_equal(append_with(p, 0, 0, -1, &err), ENG_EINVRECORD);
    assert_non_null(strstr(err.message, "base sequence"));
    assert_int_equal(append_with(p, ENG_ATTR_CONTROL, -1, -1, &err), ENG_EINVRECORD);
    assert_non_null(strstr(err.message, "control or cleaned"));
    assert_int_equal(append_with(p, ENG_ATTR_DELETE_HORIZON, -1, -1, &err), ENG_EINVRECORD);
    assert_non_null(strstr(err.message, "control or cleaned"));
    assert_int_equal(eng_partition_log_end_offset(p), 0);

    assert_int_equal(append_with(p, 0, 0, 0, &err), 0);   /* idempotent, producer id 0 */
    assert_int_equal(append_with(p, 0, -1, -1, &err), 0); /* plain */
    assert_int_equal(eng_partition_log_end_offset(p), 4);
    eng_partition_unref(p);
}

/* A refused batch's message names the record and what is wrong with it, as
 * Kafka's InvalidRecordException messages do; it said only "malformed
 * records".  Each case is a valid two-record batch with one byte changed
 * and its CRC made to match. */
static void test_bad_record_named(void **state)
{
    fixture *f = *state;
    eng_partition *p = open_part(f, true, 0, NULL);
    eng_record_spec recs[2] = {rec(T0, "a", "x"), rec(T0, "b", "y")};
    uint8_t good[256], buf[256];
    size_t len = encode(good, sizeof good, recs, 2);
    assert_true(len > 0);
    /* Record 0 at 61: length, attributes, timestamp delta, offset delta,
     * key length (one byte each here); record 1 after it. */
    size_t r1 = 61 + 1 + (size_t)(good[61] >> 1);
    static const struct {
        int rec;    /* which record's field; -1: the batch header */
        size_t at;  /* byte from the record's start (or the batch's) */
        uint8_t to; /* its new value */
        const char *want;
    } cases[] = {
        {0, 4, 9, "batch 0: record 0: its key length is below -1"},        /* -5 */
        {1, 3, 0, "batch 0: record 1: its offset delta is not above"},     /* 0 again */
        {-1, 22, 0x80, "batch 0: attribute bits 7-15 are set"},
        {-1, 60, 3, "batch 0: the batch ends before its recordCount records"},
        {-1, 26, 0, "batch 0: lastOffsetDelta + 1 must equal the record count"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        memcpy(buf, good, len);
        size_t at = cases[i].at + (cases[i].rec < 0 ? 0 : cases[i].rec == 0 ? 61 : r1);
        buf[at] = cases[i].to;
        if (cases[i].rec < 0 && cases[i].at == 60)
            buf[26] = 2; /* lastOffsetDelta 2 for 3 records */
        eng_batch_update_crc(buf, len);
        eng_errdetail err = {0};
        assert_int_equal(do_append(p, buf, len, -1, true, NULL, &err), ENG_EINVRECORD);
        if (strncmp(err.message, cases[i].want, strlen(cases[i].want)))
            fail_msg("case %zu: '%s', want '%s...'", i, err.message, cases[i].want);
    }
    assert_int_equal(eng_partition_log_end_offset(p), 0);
    eng_partition_unref(p);
}

/* ---- partitionLeaderEpoch --------------------------------------------------- */

/* A producer's batch may carry any partitionLeaderEpoch (it is outside the
 * CRC); logstore is leader epoch 0 and stores 0, as its
 * leader-epoch-checkpoint says. */
static void test_leader_epoch_stored_as_zero(void **state)
{
    fixture *f = *state;
    eng_partition *p = open_part(f, true, 0, NULL);
    eng_record_spec recs[2] = {rec(T0, "a", "x"), rec(T0 + 1, "b", "y")};
    uint8_t buf[256];
    size_t len = encode(buf, sizeof buf, recs, 2);
    assert_true(len > 0);
    eng_put_be32(buf + 12, 7);
    assert_int_equal(eng_batch_validate(buf, len, &(eng_batch_header){0}), 0);
    assert_int_equal(do_append(p, buf, len, -1, true, NULL, NULL), 0);

    eng_fetch ft;
    eng_batch_header h;
    read_batch(p, 0, &ft, &h);
    assert_int_equal(eng_be32(ft.data + 12), 0);
    assert_int_equal(h.record_count, 2);
    eng_fetch_free(&ft);
    eng_partition_unref(p);
}

/* ---- the caller's bytes are only read ------------------------------------- */

/* n one-record producer batches, partitionLeaderEpoch 7, in a read-only
 * mapping: an append that wrote to its input (offsets, epoch, stamps) would
 * fault.  *size gets the mapping's size, for munmap. */
static const uint8_t *read_only_batches(size_t n, size_t *len, size_t *size)
{
    uint8_t *buf = malloc(n * 128);
    assert_non_null(buf);
    *len = 0;
    for (size_t i = 0; i < n; i++) {
        char key[24];
        snprintf(key, sizeof key, "k%zu", i);
        eng_record_spec r = rec(T0 + (int64_t)i, key, "v");
        size_t l = encode(buf + *len, 128, &r, 1);
        assert_true(l > 0);
        eng_put_be32(buf + *len + 12, 7);
        *len += l;
    }
    *size = (*len + 4095) & ~(size_t)4095;
    uint8_t *m = mmap(NULL, *size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    assert_true(m != MAP_FAILED);
    memcpy(m, buf, *len);
    free(buf);
    assert_int_equal(mprotect(m, *size, PROT_READ), 0);
    return m;
}

/* Reads back n one-record batches from offset `first`: each stored with its
 * offset and epoch 0 and a valid CRC; with sent != NULL, every byte the CRC
 * covers is the request's. */
static void check_stored(eng_partition *p, int64_t first, size_t n, const uint8_t *sent,
                         int64_t log_append_time)
{
    eng_fetch ft;
    assert_int_equal(eng_partition_read(p, first, 1 << 20, &ft, NULL), 0);
    size_t off = 0;
    for (size_t i = 0; i < n; i++) {
        eng_batch_header h;
        assert_true(off < ft.len);
        assert_int_equal(eng_batch_header_decode(ft.data + off, ft.len - off, &h), 0);
        size_t size = eng_batch_size(&h);
        assert_int_equal(eng_batch_validate(ft.data + off, size, &h), 0);
        assert_int_equal(h.base_offset, first + (int64_t)i);
        assert_int_equal(eng_be32(ft.data + off + 12), 0);
        if (sent)
            assert_memory_equal(ft.data + off + 16, sent + off + 16, size - 16);
        if (log_append_time >= 0)
            assert_int_equal(h.max_timestamp, log_append_time);
        off += size;
    }
    assert_int_equal(off, ft.len);
    eng_fetch_free(&ft);
}

/* Read-only appends (eng_partition_append_readonly) write offsets and the
 * epoch from batch heads of their own (pwritev with the request's bytes),
 * and make a copy only to stamp bytes the CRC covers: LogAppendTime, or a
 * producer's wrong maxTimestamp.  300 batches take more iovecs than one
 * pwritev call is given. */
static void test_append_only_reads_its_input(void **state)
{
    fixture *f = *state;
    eng_partition *p = open_part(f, true, 0, NULL);
    size_t len, size;
    const uint8_t *in = read_only_batches(300, &len, &size);
    eng_append_opts o = {.expected_offset = -1, .producer_batches = true};
    eng_append_result res;
    assert_int_equal(eng_partition_append_readonly(p, in, len, &o, &res, NULL), 0);
    assert_int_equal(res.last_offset, 299);
    check_stored(p, 0, 300, in, -1);
    assert_int_equal(eng_be64(in), 0); /* still the producer's */
    assert_int_equal(eng_be32(in + 12), 7);

    /* A maxTimestamp that is not the records' is corrected, in a copy. */
    uint8_t *w = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    assert_true(w != MAP_FAILED);
    memcpy(w, in, len);
    eng_put_be64(w + 35, (uint64_t)(T0 + 5000));
    eng_batch_update_crc(w, eng_be32(w + 8) + 12);
    assert_int_equal(mprotect(w, size, PROT_READ), 0);
    assert_int_equal(eng_partition_append_readonly(p, w, len, &o, &res, NULL), 0);
    check_stored(p, 300, 300, NULL, -1);
    eng_fetch ft;
    eng_batch_header h;
    read_batch(p, 300, &ft, &h);
    assert_int_equal(h.max_timestamp, T0);
    eng_fetch_free(&ft);
    assert_int_equal(eng_be64(w + 35), T0 + 5000);

    /* LogAppendTime stamps every batch, in a copy. */
    f->cfg.v[ENG_CFG_MESSAGE_TIMESTAMP_TYPE].i = ENG_TS_LOG_APPEND_TIME;
    eng_partition_set_config(p, &f->cfg);
    assert_int_equal(eng_partition_append_readonly(p, in, len, &o, &res, NULL), 0);
    assert_true(res.log_append_time > 0);
    check_stored(p, 600, 300, NULL, res.log_append_time);
    assert_int_equal(eng_be64(in + 35), T0);

    /* An append that read the clock before one stamped later takes that
     * later stamp, restamped under the lock: in the copy as well.  (The
     * later append is stood in for by the partition's last stamp.) */
    int64_t later = res.log_append_time + 3600 * 1000;
    pthread_mutex_lock(&p->append_lock);
    p->last_append_time_ms = later;
    pthread_mutex_unlock(&p->append_lock);
    assert_int_equal(eng_partition_append_readonly(p, in, len, &o, &res, NULL), 0);
    assert_int_equal(res.log_append_time, later);
    check_stored(p, 900, 300, NULL, later);
    assert_int_equal(eng_be64(in + 35), T0);
    munmap(w, size);
    munmap((void *)in, size);
    eng_partition_unref(p);
}

/* The active .log's size when segment.append.partial is reached: half the
 * append is written by then (eng_segment.c), here in the middle of a
 * batch, so the rest resumes inside an iovec. */
static long long g_size_at_partial;
static char g_log_path[600];

static void note_partial(void *ctx)
{
    (void)ctx;
    g_size_at_partial = ts_file_size(g_log_path);
}

/* A read-only append written in two halves, the second starting inside a
 * batch, stores the same bytes as one written at once; one refused after
 * its first half (a full disk) leaves the .log as it was, and the next
 * append takes the same offsets. */
static void test_readonly_append_split_and_refused(void **state)
{
    fixture *f = *state;
    eng_partition *p = open_part(f, true, 0, NULL);
    size_t len, size;
    const uint8_t *in = read_only_batches(300, &len, &size);
    eng_append_opts o = {.expected_offset = -1, .producer_batches = true};
    eng_append_result res;
    snprintf(g_log_path, sizeof g_log_path, "%s/%020d.log", f->pdir, 0);
    g_size_at_partial = -1;
    eng_fault_hook("segment.append.partial", note_partial, NULL);
    assert_int_equal(eng_partition_append_readonly(p, in, len, &o, &res, NULL), 0);
    eng_fault_hook(NULL, NULL, NULL);
    assert_int_equal(g_size_at_partial, (long long)(len / 2));
    check_stored(p, 0, 300, in, -1);

    eng_fault_set("segment.append.partial=enospc");
    eng_errdetail err = {0};
    assert_int_equal(eng_partition_append_readonly(p, in, len, &o, &res, &err), -ENOSPC);
    eng_fault_set(NULL);
    assert_int_equal(ts_file_size(g_log_path), (long long)len);
    assert_int_equal(eng_partition_log_end_offset(p), 300);
    assert_int_equal(eng_partition_append_readonly(p, in, len, &o, &res, NULL), 0);
    assert_int_equal(res.base_offset, 300);
    check_stored(p, 300, 300, in, -1);
    munmap((void *)in, size);
    eng_partition_unref(p);
}

/* ---- the LogAppendTime bit on a CreateTime topic --------------------------- */

static void test_log_append_time_bit_cleared(void **state)
{
    fixture *f = *state;
    eng_partition *p = open_part(f, true, 0, NULL);
    /* Records at 1000 and 2000, sent with bit 3 and a maxTimestamp of 5000
     * that a LogAppendTime reader would give every record. */
    eng_record_spec recs[2] = {rec(1000, "a", "x"), rec(2000, "b", "y")};
    eng_batch_params bp;
    eng_batch_params_init(&bp);
    bp.attributes = ENG_ATTR_LOG_APPEND_TIME;
    bp.max_timestamp = 5000;
    uint8_t buf[256];
    size_t len = eng_batch_encode(buf, sizeof buf, &bp, recs, 2);
    assert_true(len > 0);
    eng_append_result res;
    eng_errdetail err = {0};
    assert_int_equal(do_append(p, buf, len, -1, true, &res, &err), 0);
    assert_int_equal(res.timestamp_type, ENG_TS_CREATE_TIME);
    assert_int_equal(res.log_append_time, -1);

    eng_fetch ft;
    eng_batch_header h;
    read_batch(p, 0, &ft, &h);
    assert_int_equal(h.attributes & ENG_ATTR_LOG_APPEND_TIME, 0);
    assert_int_equal(h.max_timestamp, 2000); /* the records' own maximum */
    eng_record_iter it;
    eng_record r;
    eng_record_iter_init(&it, &h, ft.data + ENG_BATCH_OVERHEAD, ft.len - ENG_BATCH_OVERHEAD);
    int64_t want[2] = {1000, 2000};
    int n = 0;
    while (eng_record_iter_next(&it, &r) == 1) {
        assert_true(n < 2);
        assert_int_equal(r.timestamp, want[n++]);
    }
    assert_int_equal(n, 2);
    eng_fetch_free(&ft);
    int64_t off, ts;
    assert_int_equal(eng_partition_max_timestamp(p, &off, &ts), 0);
    assert_int_equal(ts, 2000);
    assert_int_equal(off, 1);

    /* The same through a conversion to the topic's codec. */
    f->cfg.v[ENG_CFG_COMPRESSION_TYPE].i = ENG_COMPRESSION_GZIP;
    eng_partition_set_config(p, &f->cfg);
    len = eng_batch_encode(buf, sizeof buf, &bp, recs, 2);
    assert_int_equal(do_append(p, buf, len, -1, true, &res, &err), 0);
    read_batch(p, 2, &ft, &h);
    assert_int_equal(h.attributes & ENG_ATTR_CODEC_MASK, ENG_CODEC_GZIP);
    assert_int_equal(h.attributes & ENG_ATTR_LOG_APPEND_TIME, 0);
    assert_int_equal(h.max_timestamp, 2000);
    eng_fetch_free(&ft);
    eng_partition_unref(p);
}

/* ---- timestamps past int64 ------------------------------------------------- */

/* A record timestamp past int64 (base INT64_MAX, delta +1) is a malformed
 * record (it was a signed overflow: the sanitizer build died of one
 * request); so, on every topic, is a batch whose timestamps are too far
 * apart to be re-encoded against one base (recompression and the cleaner
 * do that: a LogAppendTime topic, which checks no record timestamp, took
 * such a batch and later stopped compaction of the partition for good). */
static void test_timestamps_past_int64(void **state)
{
    fixture *f = *state;
    f->cfg.v[ENG_CFG_MESSAGE_TIMESTAMP_TYPE].i = ENG_TS_LOG_APPEND_TIME;
    eng_partition *p = open_part(f, true, 0, NULL);
    eng_errdetail err = {0};
    int64_t wide[3] = {0, INT64_MIN, INT64_MAX}; /* deltas from 0: each fits */
    assert_int_equal(append_at(p, wide, 3, &err), ENG_EINVRECORD);
    assert_non_null(strstr(err.message, "too far apart"));
    /* base INT64_MAX, the second record's delta patched from 0 to +1 */
    eng_record_spec recs[2] = {rec(INT64_MAX, "k", "v"), rec(INT64_MAX, "k", "v")};
    uint8_t buf[256];
    size_t len = encode(buf, sizeof buf, recs, 2);
    assert_true(len > 0);
    size_t second = ENG_BATCH_OVERHEAD + 1 + (size_t)(buf[ENG_BATCH_OVERHEAD] >> 1);
    assert_int_equal(buf[second + 2], 0); /* its timestamp delta, a 1-byte varlong */
    buf[second + 2] = 2;                  /* zigzag +1 */
    eng_put_be32(buf + 17, eng_batch_compute_crc(buf, len));
    err = (eng_errdetail){0};
    assert_int_equal(do_append(p, buf, len, -1, true, NULL, &err), ENG_EINVRECORD);
    assert_int_equal(eng_partition_log_end_offset(p), 0);
    /* Far apart but within int64 is fine. */
    int64_t fine[2] = {0, INT64_MAX};
    assert_int_equal(append_at(p, fine, 2, &err), 0);
    eng_partition_unref(p);
}

#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(test_window_near_int64_max),
        T(test_window_fallback_near_int64_max),
        T(test_window_ends_are_inside),
        T(test_no_timestamp_is_in_every_window),
        T(test_max_message_bytes_before_conversion),
        T(test_lz4_dict_id_refused),
        T(test_lz4_skippable_frame_refused),
        T(test_max_message_bytes_exact),
        T(test_leader_epoch_stored_as_zero),
        T(test_append_only_reads_its_input),
        T(test_readonly_append_split_and_refused),
        T(test_producer_header_rules),
        T(test_bad_record_named),
        T(test_log_append_time_bit_cleared),
        T(test_timestamps_past_int64),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
