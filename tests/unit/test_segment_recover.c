/*
 * test_segment_recover.c - more of a segment's recovery rules (Kafka's
 * LogSegment.recover, kafka-format.md §13.3), on the sample segment of
 * tests/data/sample-segment (six batches of 10 records, 2731 bytes each):
 *   - a batch whose CRC holds still ends recovery when its offsets overlap
 *     the batch before it, or when its compressed records do not
 *     decompress: it and what follows are truncated;
 *   - a header-only batch (61 bytes, as the cleaner leaves) ending the file
 *     is a whole batch, kept with its offsets, not a torn header;
 *   - an active segment opened without recovery (a clean start) whose last
 *     offset index entry points into a batch, at bytes that read as a batch
 *     header (a record's value), does not take its next offset from them:
 *     the segment is scanned from its start and its index distrusted (found
 *     by fuzz_startup: the log end offset became 1683975540).
 * (Truncated and garbage tails, flipped bits and index rebuilds:
 * test_segment.c.)
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "eng_batch.h"
#include "eng_error.h"
#include "eng_index.h"
#include "eng_segment.h"
#include "segment_fixture.h"
#include "support.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Rewrites batch b of the sample .log through fn (the whole batch in memory),
 * then stores it back; with fix_crc its CRC is recomputed, so only the rule
 * under test can reject it. */
static void rewrite_batch(const char *dir, int b, void (*fn)(uint8_t *batch), bool fix_crc)
{
    char path[512];
    seg_path(dir, ".log", path, sizeof path);
    uint8_t *raw;
    size_t n;
    assert_int_equal(ts_read_file(path, &raw, &n), 0);
    assert_int_equal(n, SAMPLE_LOG_BYTES);
    uint8_t *batch = raw + (size_t)b * BATCH_BYTES;
    fn(batch);
    if (fix_crc)
        eng_batch_update_crc(batch, BATCH_BYTES);
    FILE *fp = fopen(path, "wb");
    assert_non_null(fp);
    assert_int_equal(fwrite(raw, 1, n, fp), n);
    assert_int_equal(fclose(fp), 0);
    free(raw);
}

/* baseOffset lies outside the CRC: 25 keeps the batch valid on its own but
 * overlaps offsets 20..29 of the batch before it. */
static void overlap_base(uint8_t *batch)
{
    memset(batch, 0, 8);
    batch[7] = 25;
}

/* The records stay plain while the attributes claim gzip. */
static void claim_gzip(uint8_t *batch)
{
    batch[22] = (uint8_t)((batch[22] & ~ENG_ATTR_CODEC_MASK) | ENG_CODEC_GZIP);
}

/* §13.3: a batch whose CRC holds still ends recovery when its offsets go
 * backwards or its compressed records do not decompress; what follows it
 * (batches 3..5) is dropped and the indexes end at batch 2. */
static void test_recover_stops_at_overlap_and_bad_compression(void **state)
{
    fixture *f = *state;
    static const struct {
        void (*fn)(uint8_t *);
        bool fix_crc;
        const char *reason;
    } cases[] = {
        {overlap_base, false, "offsets not increasing"},
        {claim_gzip, true, "compressed records do not decompress"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        copy_sample(f->dir);
        rewrite_batch(f->dir, 3, cases[k].fn, cases[k].fix_crc);
        eng_recover_stats st;
        eng_segment *s;
        recover_sample(f->dir, &st, &s);
        assert_non_null(st.stop_reason);
        assert_string_equal(st.stop_reason, cases[k].reason);
        assert_int_equal(st.valid_bytes, 3 * BATCH_BYTES);
        assert_int_equal(st.truncated_bytes, SAMPLE_LOG_BYTES - 3 * BATCH_BYTES);
        assert_int_equal(st.batches, 3);
        assert_int_equal(st.next_offset, 30);
        assert_int_equal(eng_segment_next_offset(s), 30);
        assert_int_equal(eng_segment_max_timestamp(s), T0 + 2);
        eng_segment_unref(s);
        char path[512];
        seg_path(f->dir, ".log", path, sizeof path);
        assert_int_equal(ts_file_size(path), 3 * BATCH_BYTES);
    }
}

static void append_empty_batch(FILE *fp, void *ctx)
{
    (void)ctx;
    /* Kafka's header-only batch (kafka-format.md §6.3), as the cleaner
     * leaves one when it removes every record of a batch it must keep:
     * offsets 60..62, no records, 61 bytes. */
    eng_batch_header h = {.base_offset = 60, .length = ENG_BATCH_OVERHEAD - ENG_LOG_OVERHEAD,
                          .magic = 2, .last_offset_delta = 2, .base_timestamp = -1,
                          .max_timestamp = T0 + 6, .producer_id = -1, .producer_epoch = -1,
                          .base_sequence = -1, .record_count = 0};
    uint8_t b[ENG_BATCH_OVERHEAD];
    eng_batch_header_encode(b, &h);
    eng_batch_update_crc(b, sizeof b);
    assert_int_equal(fseek(fp, 0, SEEK_END), 0);
    assert_int_equal(fwrite(b, 1, sizeof b, fp), sizeof b);
}

/* A header-only batch ending the file is a whole batch, not a torn header:
 * recovery keeps it and its offsets. */
static void test_recover_keeps_trailing_empty_batch(void **state)
{
    fixture *f = *state;
    copy_sample(f->dir);
    damage_log(f->dir, append_empty_batch, NULL);
    eng_recover_stats st;
    eng_segment *s;
    recover_sample(f->dir, &st, &s);
    assert_null(st.stop_reason);
    assert_int_equal(st.truncated_bytes, 0);
    assert_int_equal(st.valid_bytes, SAMPLE_LOG_BYTES + ENG_BATCH_OVERHEAD);
    assert_int_equal(st.batches, 7);
    assert_int_equal(st.next_offset, 63);
    assert_int_equal(eng_segment_next_offset(s), 63);
    eng_segment_unref(s);
}

/* One batch at offset 0 holding one record whose value starts with a batch
 * header of its own (base offset 1000000) reaching exactly to the file's end;
 * the .index has one entry, offset 0 at that value's position. */
static void test_tail_scan_not_fooled_by_index_into_a_value(void **state)
{
    fixture *f = *state;
    uint8_t value[200], out[512];
    memset(value, 'x', sizeof value);
    eng_record_spec rec = {.timestamp = T0, .key = (const uint8_t *)"k", .key_len = 1,
                           .value = value, .value_len = sizeof value};
    eng_batch_params bp;
    eng_batch_params_init(&bp);
    size_t len = eng_batch_encode(out, sizeof out, &bp, &rec, 1);
    assert_true(len > 0);
    uint8_t *at = memmem(out, len, value, sizeof value);
    assert_non_null(at);
    size_t fake_pos = (size_t)(at - out);
    eng_batch_header h = {.base_offset = 1000000,
                          .length = (int32_t)(len - fake_pos - ENG_LOG_OVERHEAD),
                          .magic = 2, .base_timestamp = T0, .max_timestamp = T0,
                          .producer_id = -1, .producer_epoch = -1, .base_sequence = -1,
                          .record_count = 1};
    eng_batch_header_encode(value, &h);
    assert_int_equal(eng_batch_encode(out, sizeof out, &bp, &rec, 1), len);

    char path[512];
    seg_path(f->dir, ".log", path, sizeof path);
    FILE *fp = fopen(path, "wb");
    assert_non_null(fp);
    assert_int_equal(fwrite(out, 1, len, fp), len);
    assert_int_equal(fclose(fp), 0);
    uint8_t entry[ENG_OFFSET_ENTRY_SIZE] = {0, 0, 0, 0, (uint8_t)(fake_pos >> 24), (uint8_t)(fake_pos >> 16),
                                   (uint8_t)(fake_pos >> 8), (uint8_t)fake_pos};
    seg_path(f->dir, ".index", path, sizeof path);
    fp = fopen(path, "wb");
    assert_non_null(fp);
    assert_int_equal(fwrite(entry, 1, sizeof entry, fp), sizeof entry);
    assert_int_equal(fclose(fp), 0);
    seg_path(f->dir, ".timeindex", path, sizeof path);
    fp = fopen(path, "wb");
    assert_non_null(fp);
    assert_int_equal(fclose(fp), 0);

    eng_segment_opts o = default_opts();
    eng_segment *s;
    assert_int_equal(eng_segment_open(f->dir, 0, &o, true, &s), 0);
    assert_int_equal(eng_segment_next_offset(s), 1);
    assert_true(eng_segment_index_distrusted(s));
    eng_segment_unref(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_recover_stops_at_overlap_and_bad_compression,
                                        ts_dir_setup, ts_dir_teardown),
        cmocka_unit_test_setup_teardown(test_recover_keeps_trailing_empty_batch,
                                        ts_dir_setup, ts_dir_teardown),
        cmocka_unit_test_setup_teardown(test_tail_scan_not_fooled_by_index_into_a_value,
                                        ts_dir_setup, ts_dir_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
