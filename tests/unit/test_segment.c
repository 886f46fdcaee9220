/*
 * test_segment.c - one log segment (.log, .index, .timeindex):
 *   - writing the six batches of kafka-format.md §13.4 through
 *     eng_segment_append and sealing reproduces tests/data/sample-segment/
 *     byte for byte;
 *   - the sample files decode: find_batch, find_by_timestamp, max timestamp;
 *   - recovery of a truncated tail, a garbage tail and a flipped bit in a
 *     middle batch (bytes truncated, next offset, rebuilt indexes) (more
 *     recovery rules: test_segment_recover.c);
 *   - the five roll conditions of §14 and an append refused by a full index;
 *   - rename to ".deleted" and unlink.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "eng_batch.h"
#include "eng_endian.h"
#include "eng_error.h"
#include "eng_fault.h"
#include "eng_segment.h"
#include "segment_fixture.h"
#include "support.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Batch b of the sample segment: offsets 10b..10b+9, keys k-%06d of the
 * absolute offset, 250 x 'v', every record at T0 + b. */
static size_t sample_batch(int b, uint8_t *out, size_t cap)
{
    static uint8_t value[250];
    char keys[10][16];
    eng_record_spec recs[10];
    memset(value, 'v', sizeof value);
    for (int i = 0; i < 10; i++) {
        snprintf(keys[i], sizeof keys[i], "k-%06d", 10 * b + i);
        recs[i] = (eng_record_spec){.timestamp = T0 + b, .key = (const uint8_t *)keys[i],
                                    .key_len = 8, .value = value, .value_len = 250};
    }
    eng_batch_params bp;
    eng_batch_params_init(&bp);
    bp.base_offset = 10 * b;
    return eng_batch_encode(out, cap, &bp, recs, 10);
}

/* A batch of n tiny records at offsets base.., all at timestamp ts. */
static size_t tiny_batch(int64_t base, int n, int64_t ts, uint8_t *out, size_t cap)
{
    eng_record_spec recs[16];
    for (int i = 0; i < n; i++)
        recs[i] = (eng_record_spec){.timestamp = ts, .key = (const uint8_t *)"k", .key_len = 1,
                                    .value = (const uint8_t *)"v", .value_len = 1};
    eng_batch_params bp;
    eng_batch_params_init(&bp);
    bp.base_offset = base;
    return eng_batch_encode(out, cap, &bp, recs, (size_t)n);
}

static void expect_same_file(const char *a, const char *b)
{
    uint8_t *x, *y;
    size_t xn, yn;
    assert_int_equal(ts_read_file(a, &x, &xn), 0);
    assert_int_equal(ts_read_file(b, &y, &yn), 0);
    if (xn != yn)
        fail_msg("%s is %zu bytes, %s is %zu", a, xn, b, yn);
    assert_memory_equal(x, y, xn);
    free(x);
    free(y);
}

static void expect_sample_file(const char *dir, const char *ext)
{
    char got[512], want[512];
    seg_path(dir, ext, got, sizeof got);
    snprintf(want, sizeof want, "sample-segment/00000000000000000000%s", ext);
    expect_same_file(got, ts_data_path(want));
}

/* ---- writing the sample segment ---------------------------------------- */

static void test_write_sample_segment_byte_exact(void **state)
{
    fixture *f = *state;
    eng_segment_opts o = default_opts();
    eng_segment *s;
    assert_int_equal(eng_segment_create(f->dir, 0, &o, &s), 0);
    assert_true(eng_segment_is_active(s));
    assert_int_equal(eng_segment_size(s), 0);
    assert_int_equal(eng_segment_next_offset(s), 0);
    assert_int_equal(eng_segment_max_timestamp(s), -1);
    char path[512];
    /* The active segment's indexes are preallocated. */
    seg_path(f->dir, ".index", path, sizeof path);
    assert_int_equal(ts_file_size(path), 10485760);
    seg_path(f->dir, ".timeindex", path, sizeof path);
    assert_int_equal(ts_file_size(path), 10485756);

    uint8_t buf[4096];
    for (int b = 0; b < 6; b++) {
        size_t n = sample_batch(b, buf, sizeof buf);
        assert_int_equal(n, BATCH_BYTES);
        assert_int_equal(eng_segment_append(s, buf, n, 10 * b + 9, T0 + b, 10 * b + 9), 0);
        assert_int_equal(eng_segment_size(s), (uint64_t)(b + 1) * BATCH_BYTES);
        assert_int_equal(eng_segment_next_offset(s), 10 * b + 10);
    }
    /* Entries exactly as §13.4's table says, before the final one. */
    eng_index *oi = eng_segment_offset_index(s), *ti = eng_segment_time_index(s);
    assert_int_equal(eng_index_entries(oi), 2);
    assert_int_equal(eng_index_entries(ti), 2);
    assert_int_equal(eng_segment_max_timestamp(s), T0 + 5);
    assert_int_equal(eng_segment_offset_of_max_timestamp(s), 59);

    assert_int_equal(eng_segment_seal(s), 0);
    assert_false(eng_segment_is_active(s));
    assert_int_equal(eng_index_entries(ti), 3);
    assert_int_equal(eng_segment_sync(s), 0);
    /* Appends to a sealed segment are refused. */
    size_t n = sample_batch(6, buf, sizeof buf);
    assert_int_equal(eng_segment_append(s, buf, n, 69, T0 + 6, 69), ENG_EINVAL);
    eng_segment_unref(s);

    for (int i = 0; i < 3; i++)
        expect_sample_file(f->dir, exts[i]);
    /* And the same bytes as the vectors file carries. */
    uint8_t *v, *log;
    size_t vn, logn;
    assert_int_equal(ts_vector("segment_00000000000000000000.log", &v, &vn), 0);
    seg_path(f->dir, ".log", path, sizeof path);
    assert_int_equal(ts_read_file(path, &log, &logn), 0);
    assert_int_equal(vn, logn);
    assert_memory_equal(v, log, vn);
    free(v);
    free(log);
}

/* ---- decoding the sample segment ---------------------------------------- */

static void test_open_and_decode_sample(void **state)
{
    fixture *f = *state;
    copy_sample(f->dir);
    eng_segment_opts o = default_opts();
    eng_segment *s;
    assert_int_equal(eng_segment_open(f->dir, 0, &o, false, &s), 0);
    assert_false(eng_segment_is_active(s));
    assert_int_equal(eng_segment_size(s), SAMPLE_LOG_BYTES);
    assert_int_equal(eng_segment_next_offset(s), 60);
    assert_int_equal(eng_segment_max_timestamp(s), T0 + 5);
    assert_int_equal(eng_segment_offset_of_max_timestamp(s), 59);

    eng_index *oi = eng_segment_offset_index(s), *ti = eng_segment_time_index(s);
    assert_non_null(oi);
    assert_non_null(ti);
    assert_int_equal(eng_index_entries(oi), 2);
    assert_int_equal(eng_index_entries(ti), 3);
    assert_int_equal(eng_index_check(oi, SAMPLE_LOG_BYTES), 0);
    assert_int_equal(eng_index_check(ti, SAMPLE_LOG_BYTES), 0);
    int64_t off, ts;
    uint32_t pos;
    eng_offset_index_entry(oi, 0, &off, &pos);
    assert_int_equal(off, 29);
    assert_int_equal(pos, 5462);
    eng_time_index_entry(ti, 2, &ts, &off);
    assert_int_equal(ts, T0 + 5);
    assert_int_equal(off, 59);

    static const struct {
        int64_t target;
        uint64_t pos;
        int64_t base;
    } cases[] = {{0, 0, 0},         {9, 0, 0},          {10, 2731, 10},     {29, 5462, 20},
                 {35, 8193, 30},    {49, 10924, 40},    {50, 13655, 50},    {59, 13655, 50}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        eng_batch_pos b;
        assert_int_equal(eng_segment_find_batch(s, cases[i].target, SAMPLE_LOG_BYTES, &b), 0);
        assert_int_equal(b.position, cases[i].pos);
        assert_int_equal(b.header.base_offset, cases[i].base);
        assert_int_equal(b.header.record_count, 10);
        assert_int_equal(eng_batch_size(&b.header), BATCH_BYTES);
        assert_int_equal(b.header.max_timestamp, T0 + cases[i].base / 10);
    }
    eng_batch_pos b;
    assert_int_equal(eng_segment_find_batch(s, 60, SAMPLE_LOG_BYTES, &b), ENG_ENOTFOUND);
    /* The limit bounds the scan: offset 35 lies beyond the first 8193 bytes. */
    assert_int_equal(eng_segment_find_batch(s, 35, 8193, &b), ENG_ENOTFOUND);

    /* By timestamp: the first record with ts >= T. */
    assert_int_equal(eng_segment_find_by_timestamp(s, 0, 0, &off, &ts), 0);
    assert_int_equal(off, 0);
    assert_int_equal(ts, T0);
    assert_int_equal(eng_segment_find_by_timestamp(s, T0 + 3, 0, &off, &ts), 0);
    assert_int_equal(off, 30);
    assert_int_equal(ts, T0 + 3);
    assert_int_equal(eng_segment_find_by_timestamp(s, T0 + 5, 0, &off, &ts), 0);
    assert_int_equal(off, 50);
    assert_int_equal(eng_segment_find_by_timestamp(s, T0 + 6, 0, &off, &ts), ENG_ENOTFOUND);
    /* min_offset: the earliest qualifying record at or after it. */
    assert_int_equal(eng_segment_find_by_timestamp(s, T0, 45, &off, &ts), 0);
    assert_int_equal(off, 45);
    assert_int_equal(ts, T0 + 4);

    /* Scan visits all six batches in order. */
    uint8_t raw[ENG_BATCH_OVERHEAD];
    size_t got;
    assert_int_equal(eng_segment_pread(s, raw, sizeof raw, 8193, &got), 0);
    assert_int_equal(got, sizeof raw);
    assert_int_equal(eng_be64(raw), 30);
    assert_int_equal(eng_segment_pread(s, raw, sizeof raw, SAMPLE_LOG_BYTES - 10, &got), 0);
    assert_int_equal(got, 10);
    eng_segment_unref(s);
}

static int count_visit(const eng_batch_pos *b, void *ctx)
{
    int *n = ctx;
    if ((int64_t)b->position != (int64_t)*n * BATCH_BYTES || b->header.base_offset != 10 * *n)
        return -1;
    (*n)++;
    return 0;
}

static void test_scan_sample(void **state)
{
    fixture *f = *state;
    copy_sample(f->dir);
    eng_segment_opts o = default_opts();
    eng_segment *s;
    assert_int_equal(eng_segment_open(f->dir, 0, &o, false, &s), 0);
    int n = 0;
    assert_int_equal(eng_segment_scan(s, SAMPLE_LOG_BYTES, count_visit, &n), 0);
    assert_int_equal(n, 6);
    n = 0;
    /* A batch running past the limit (a file cut short) is damage, not the
     * end: the whole batches before it are visited, then ENG_ECORRUPT. */
    assert_int_equal(eng_segment_scan(s, SAMPLE_LOG_BYTES - 1, count_visit, &n), ENG_ECORRUPT);
    assert_int_equal(n, 5);
    eng_segment_unref(s);
}

/* ---- recovery ----------------------------------------------------------- */

static void test_recover_intact(void **state)
{
    fixture *f = *state;
    copy_sample(f->dir);
    /* Damage the indexes: recovery rebuilds them from the .log. */
    char path[512];
    seg_path(f->dir, ".index", path, sizeof path);
    assert_int_equal(truncate(path, 0), 0);
    seg_path(f->dir, ".timeindex", path, sizeof path);
    assert_int_equal(truncate(path, 120), 0);
    eng_recover_stats st;
    eng_segment *s;
    recover_sample(f->dir, &st, &s);
    assert_int_equal(st.truncated_bytes, 0);
    assert_int_equal(st.valid_bytes, SAMPLE_LOG_BYTES);
    assert_int_equal(st.next_offset, 60);
    assert_int_equal(st.batches, 6);
    assert_null(st.stop_reason);
    eng_segment_unref(s);
    for (int i = 0; i < 3; i++)
        expect_sample_file(f->dir, exts[i]);
}

/* §13.3: recovery rebuilds exactly the indexes appends made, including when
 * the bytes since the last entry equal index.interval.bytes exactly. */
static void test_recover_rebuilds_what_append_wrote(void **state)
{
    fixture *f = *state;
    static const uint32_t intervals[] = {0, BATCH_BYTES, 2 * BATCH_BYTES, 2 * BATCH_BYTES - 1};
    for (size_t k = 0; k < sizeof intervals / sizeof intervals[0]; k++) {
        eng_segment_opts o = default_opts();
        o.index_interval = intervals[k];
        eng_segment *s;
        assert_int_equal(eng_segment_create(f->dir, 0, &o, &s), 0);
        uint8_t buf[4096];
        for (int b = 0; b < 6; b++) {
            size_t n = sample_batch(b, buf, sizeof buf);
            assert_int_equal(eng_segment_append(s, buf, n, 10 * b + 9, T0 + b, 10 * b + 9), 0);
        }
        assert_int_equal(eng_segment_seal(s), 0);
        eng_segment_unref(s);
        uint8_t *want[2];
        size_t want_len[2];
        char path[512];
        for (int i = 0; i < 2; i++) {
            seg_path(f->dir, exts[i + 1], path, sizeof path);
            assert_int_equal(ts_read_file(path, &want[i], &want_len[i]), 0);
            assert_int_equal(unlink(path), 0);
        }
        eng_recover_stats st;
        assert_int_equal(eng_segment_open(f->dir, 0, &o, false, &s), 0);
        assert_int_equal(eng_segment_recover(s, &st), 0);
        assert_int_equal(st.truncated_bytes, 0);
        eng_segment_unref(s);
        for (int i = 0; i < 2; i++) {
            uint8_t *got;
            size_t got_len;
            seg_path(f->dir, exts[i + 1], path, sizeof path);
            assert_int_equal(ts_read_file(path, &got, &got_len), 0);
            if (got_len != want_len[i] || memcmp(got, want[i], got_len))
                fail_msg("interval %u: rebuilt %s differs (%zu vs %zu bytes)", intervals[k],
                         exts[i + 1], got_len, want_len[i]);
            free(got);
            free(want[i]);
        }
        if (intervals[k] == 2 * BATCH_BYTES) /* entries at batches 3 and 5 only */
            assert_int_equal(ts_file_size(path), 24);
        ts_rmtree(f->dir);
        assert_int_equal(mkdir(f->dir, 0755), 0);
    }
}

static void cut_tail(FILE *fp, void *ctx)
{
    (void)ctx;
    assert_int_equal(ftruncate(fileno(fp), SAMPLE_LOG_BYTES - 100), 0);
}

static void test_recover_truncated_tail(void **state)
{
    fixture *f = *state;
    copy_sample(f->dir);
    damage_log(f->dir, cut_tail, NULL);
    eng_recover_stats st;
    eng_segment *s;
    recover_sample(f->dir, &st, &s);
    assert_int_equal(st.truncated_bytes, BATCH_BYTES - 100);
    assert_int_equal(st.valid_bytes, 5 * BATCH_BYTES);
    assert_int_equal(st.next_offset, 50);
    assert_int_equal(st.batches, 5);
    assert_non_null(st.stop_reason);
    assert_int_equal(eng_segment_size(s), 5 * BATCH_BYTES);
    assert_int_equal(eng_segment_next_offset(s), 50);
    assert_int_equal(eng_segment_max_timestamp(s), T0 + 4);
    eng_segment_unref(s);

    char path[512];
    seg_path(f->dir, ".log", path, sizeof path);
    assert_int_equal(ts_file_size(path), 5 * BATCH_BYTES);
    /* The rebuilt offset index equals the original (both entries survive);
     * the time index is the original without its final (T+5, 59) entry. */
    expect_sample_file(f->dir, ".index");
    uint8_t *got, *want;
    size_t gn, wn;
    seg_path(f->dir, ".timeindex", path, sizeof path);
    assert_int_equal(ts_read_file(path, &got, &gn), 0);
    assert_int_equal(
        ts_read_file(ts_data_path("sample-segment/00000000000000000000.timeindex"), &want, &wn), 0);
    assert_int_equal(gn, 24);
    assert_memory_equal(got, want, 24);
    free(got);
    free(want);
}

static void add_garbage(FILE *fp, void *ctx)
{
    size_t n = *(size_t *)ctx;
    uint8_t junk[700];
    for (size_t i = 0; i < sizeof junk; i++)
        junk[i] = (uint8_t)(i * 37 + 11);
    assert_int_equal(fseek(fp, 0, SEEK_END), 0);
    assert_int_equal(fwrite(junk, 1, n, fp), n);
}

static void test_recover_garbage_tail(void **state)
{
    fixture *f = *state;
    /* Shorter than a batch header, longer than one, then zeros as a
     * preallocated file has. */
    static const size_t sizes[] = {30, 700};
    for (size_t k = 0; k < 2; k++) {
        copy_sample(f->dir);
        size_t n = sizes[k];
        damage_log(f->dir, add_garbage, &n);
        eng_recover_stats st;
        eng_segment *s;
        recover_sample(f->dir, &st, &s);
        assert_int_equal(st.truncated_bytes, n);
        assert_int_equal(st.valid_bytes, SAMPLE_LOG_BYTES);
        assert_int_equal(st.next_offset, 60);
        assert_int_equal(st.batches, 6);
        assert_non_null(st.stop_reason);
        eng_segment_unref(s);
        for (int i = 0; i < 3; i++)
            expect_sample_file(f->dir, exts[i]);
    }
    copy_sample(f->dir);
    char path[512];
    seg_path(f->dir, ".log", path, sizeof path);
    assert_int_equal(truncate(path, SAMPLE_LOG_BYTES + 4096), 0);
    eng_recover_stats st;
    eng_segment *s;
    recover_sample(f->dir, &st, &s);
    assert_int_equal(st.truncated_bytes, 4096);
    assert_int_equal(st.next_offset, 60);
    eng_segment_unref(s);
    expect_sample_file(f->dir, ".log");
}

static void flip_bit(FILE *fp, void *ctx)
{
    long at = *(long *)ctx;
    assert_int_equal(fseek(fp, at, SEEK_SET), 0);
    int c = fgetc(fp);
    assert_int_not_equal(c, EOF);
    assert_int_equal(fseek(fp, at, SEEK_SET), 0);
    assert_int_not_equal(fputc(c ^ 0x04, fp), EOF);
}

static void test_recover_flipped_bit_in_middle(void **state)
{
    fixture *f = *state;
    copy_sample(f->dir);
    long at = 3 * BATCH_BYTES + 1000; /* inside a record of batch 3 (offsets 30..39) */
    damage_log(f->dir, flip_bit, &at);
    eng_recover_stats st;
    eng_segment *s;
    recover_sample(f->dir, &st, &s);
    assert_int_equal(st.valid_bytes, 3 * BATCH_BYTES);
    assert_int_equal(st.truncated_bytes, SAMPLE_LOG_BYTES - 3 * BATCH_BYTES);
    assert_int_equal(st.next_offset, 30);
    assert_int_equal(st.batches, 3);
    assert_non_null(st.stop_reason);
    assert_string_equal(st.stop_reason, "CRC mismatch");
    eng_batch_pos b;
    assert_int_equal(eng_segment_find_batch(s, 25, eng_segment_size(s), &b), 0);
    assert_int_equal(b.position, 2 * BATCH_BYTES);
    assert_int_equal(eng_segment_find_batch(s, 30, eng_segment_size(s), &b), ENG_ENOTFOUND);
    eng_segment_unref(s);

    /* Indexes: only the entry of batch 2 remains, in both. */
    char path[512];
    uint8_t *raw;
    size_t n;
    seg_path(f->dir, ".index", path, sizeof path);
    assert_int_equal(ts_read_file(path, &raw, &n), 0);
    static const uint8_t want_idx[] = {0, 0, 0, 0x1d, 0, 0, 0x15, 0x56};
    assert_int_equal(n, sizeof want_idx);
    assert_memory_equal(raw, want_idx, n);
    free(raw);
    seg_path(f->dir, ".timeindex", path, sizeof path);
    assert_int_equal(ts_read_file(path, &raw, &n), 0);
    assert_int_equal(n, 12);
    assert_int_equal(eng_be64(raw), T0 + 2);
    assert_int_equal(eng_be32(raw + 8), 29);
    free(raw);

    /* A damaged header (bad magic) in the middle stops recovery there too. */
    copy_sample(f->dir);
    at = 4 * BATCH_BYTES + 16;
    damage_log(f->dir, flip_bit, &at);
    recover_sample(f->dir, &st, &s);
    assert_int_equal(st.valid_bytes, 4 * BATCH_BYTES);
    assert_int_equal(st.next_offset, 40);
    eng_segment_unref(s);
}

static void test_recover_active_segment_keeps_appending(void **state)
{
    fixture *f = *state;
    copy_sample(f->dir);
    size_t n = 30;
    damage_log(f->dir, add_garbage, &n);
    eng_segment_opts o = default_opts();
    eng_segment *s;
    /* Opening it active reads its tail, and a tail too short for a header
     * is damage; the loader then does what follows: open it inactive,
     * recover it, open it active again. */
    assert_int_equal(eng_segment_open(f->dir, 0, &o, true, &s), ENG_ECORRUPT);
    assert_int_equal(eng_segment_open(f->dir, 0, &o, false, &s), 0);
    eng_recover_stats st;
    assert_int_equal(eng_segment_recover(s, &st), 0);
    assert_int_equal(st.truncated_bytes, 30);
    eng_segment_unref(s);
    assert_int_equal(eng_segment_open(f->dir, 0, &o, true, &s), 0);
    assert_true(eng_segment_is_active(s));
    /* The active segment's indexes keep their full capacity, and their
     * files are expanded again at their first new entry. */
    char path[512];
    seg_path(f->dir, ".index", path, sizeof path);
    eng_index *oi;
    assert_int_equal(eng_segment_indexes(s, &oi, NULL), 0);
    assert_int_equal(eng_index_max_entries(oi), 10485760 / 8);
    uint32_t entries = eng_index_entries(oi);
    assert_int_equal(ts_file_size(path), entries * 8);
    uint8_t buf[4096];
    size_t len = sample_batch(6, buf, sizeof buf);
    assert_int_equal(eng_segment_append(s, buf, len, 69, T0 + 6, 69), 0);
    assert_int_equal(eng_segment_next_offset(s), 70);
    assert_int_equal(ts_file_size(path), entries * 8);
    /* Past index.interval.bytes (4096) of appends, the next entry. */
    for (int b = 7; eng_index_entries(oi) == entries; b++) {
        assert_true(b < 12);
        len = sample_batch(b, buf, sizeof buf);
        assert_int_equal(eng_segment_append(s, buf, len, 10 * b + 9, T0 + b, 10 * b + 9), 0);
    }
    assert_int_equal(ts_file_size(path), 10485760);
    eng_batch_pos b;
    assert_int_equal(eng_segment_find_batch(s, 65, eng_segment_size(s), &b), 0);
    assert_int_equal(b.position, SAMPLE_LOG_BYTES);
    eng_segment_unref(s);
}

/* ---- roll conditions ---------------------------------------------------- */

static void test_roll_size_and_time(void **state)
{
    fixture *f = *state;
    eng_segment_opts o = default_opts();
    eng_segment *s;
    assert_int_equal(eng_segment_create(f->dir, 0, &o, &s), 0);
    int64_t now = 1000; /* unused while record timestamps are known */
    /* An empty segment never rolls on time. */
    assert_int_equal(eng_segment_should_roll(s, 100, T0 + 1000000000, 0, 1 << 30, 1000, now),
                     ENG_ROLL_NONE);
    uint8_t buf[4096];
    for (int b = 0; b < 6; b++) {
        size_t n = sample_batch(b, buf, sizeof buf);
        assert_int_equal(eng_segment_append(s, buf, n, 10 * b + 9, T0 + b, 10 * b + 9), 0);
    }
    /* Size: roll when size > segment.bytes - batch size. */
    int64_t seg_bytes = SAMPLE_LOG_BYTES + BATCH_BYTES;
    assert_int_equal(eng_segment_should_roll(s, BATCH_BYTES, T0 + 6, 69, seg_bytes, 1 << 30, now),
                     ENG_ROLL_NONE);
    assert_int_equal(
        eng_segment_should_roll(s, BATCH_BYTES, T0 + 6, 69, seg_bytes - 1, 1 << 30, now),
        ENG_ROLL_SIZE);
    /* Time, from record timestamps: max ts - first batch's ts > segment.ms. */
    assert_int_equal(eng_segment_should_roll(s, 10, T0 + 1000, 69, 1 << 30, 1000, now),
                     ENG_ROLL_NONE);
    assert_int_equal(eng_segment_should_roll(s, 10, T0 + 1001, 69, 1 << 30, 1000, now),
                     ENG_ROLL_TIME);
    /* Offset overflow: last offset - base > 2^31 - 1. */
    assert_int_equal(eng_segment_should_roll(s, 10, T0, (int64_t)INT32_MAX, 1 << 30, 1000, now),
                     ENG_ROLL_NONE);
    assert_int_equal(
        eng_segment_should_roll(s, 10, T0, (int64_t)INT32_MAX + 1, 1 << 30, 1000, now),
        ENG_ROLL_OFFSET_OVERFLOW);
    /* ... and such an append is refused outright. */
    size_t n = tiny_batch(70, 1, T0, buf, sizeof buf);
    assert_int_equal(eng_segment_append(s, buf, n, (int64_t)INT32_MAX + 1, T0, 70), ENG_EINVAL);
    assert_int_equal(eng_segment_size(s), SAMPLE_LOG_BYTES);
    eng_segment_unref(s);

    /* Jitter is subtracted from segment.ms. */
    ts_rmtree(f->dir);
    assert_int_equal(mkdir(f->dir, 0755), 0);
    o.roll_jitter_ms = 100;
    assert_int_equal(eng_segment_create(f->dir, 0, &o, &s), 0);
    n = sample_batch(0, buf, sizeof buf);
    assert_int_equal(eng_segment_append(s, buf, n, 9, T0, 9), 0);
    assert_int_equal(eng_segment_should_roll(s, 10, T0 + 900, 19, 1 << 30, 1000, now),
                     ENG_ROLL_NONE);
    assert_int_equal(eng_segment_should_roll(s, 10, T0 + 901, 19, 1 << 30, 1000, now),
                     ENG_ROLL_TIME);
    eng_segment_unref(s);
}

static void test_roll_index_full(void **state)
{
    fixture *f = *state;
    /* 36 bytes: 4 offset entries, 3 time entries (full at 2); an entry per
     * append after the first (index.interval.bytes 0). */
    eng_segment_opts o = {.index_max_bytes = 36, .index_interval = 0};
    eng_segment *s;
    uint8_t buf[256];
    assert_int_equal(eng_segment_create(f->dir, 0, &o, &s), 0);
    /* Constant timestamps: the time index holds one entry, the offset index fills. */
    for (int i = 0; i < 5; i++) {
        assert_int_equal(eng_segment_should_roll(s, 100, T0, i, 1 << 30, 1 << 30, 0),
                         ENG_ROLL_NONE);
        size_t n = tiny_batch(i, 1, T0, buf, sizeof buf);
        assert_int_equal(eng_segment_append(s, buf, n, i, T0, i), 0);
    }
    assert_int_equal(eng_index_entries(eng_segment_offset_index(s)), 4);
    assert_int_equal(eng_index_entries(eng_segment_time_index(s)), 1);
    assert_int_equal(eng_segment_should_roll(s, 100, T0, 5, 1 << 30, 1 << 30, 0),
                     ENG_ROLL_OFFSET_INDEX_FULL);
    /* An append that needs an entry in a full index fails and leaves nothing. */
    uint64_t size = eng_segment_size(s);
    size_t n = tiny_batch(5, 1, T0, buf, sizeof buf);
    assert_int_not_equal(eng_segment_append(s, buf, n, 5, T0, 5), 0);
    assert_int_equal(eng_segment_size(s), size);
    assert_int_equal(eng_segment_next_offset(s), 5);
    char path[512];
    seg_path(f->dir, ".log", path, sizeof path);
    assert_int_equal(ts_file_size(path), (long long)size);
    eng_segment_unref(s);

    /* Increasing timestamps: the time index is full first (entries >= max - 1). */
    ts_rmtree(f->dir);
    assert_int_equal(mkdir(f->dir, 0755), 0);
    assert_int_equal(eng_segment_create(f->dir, 0, &o, &s), 0);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(eng_segment_should_roll(s, 100, T0 + i, i, 1 << 30, 1 << 30, 0),
                         ENG_ROLL_NONE);
        n = tiny_batch(i, 1, T0 + i, buf, sizeof buf);
        assert_int_equal(eng_segment_append(s, buf, n, i, T0 + i, i), 0);
    }
    assert_int_equal(eng_index_entries(eng_segment_offset_index(s)), 2);
    assert_int_equal(eng_index_entries(eng_segment_time_index(s)), 2);
    assert_int_equal(eng_segment_should_roll(s, 100, T0 + 3, 3, 1 << 30, 1 << 30, 0),
                     ENG_ROLL_TIME_INDEX_FULL);
    /* Sealing still gets its final entry into the reserved slot. */
    assert_int_equal(eng_segment_seal(s), 0);
    assert_int_equal(eng_index_entries(eng_segment_time_index(s)), 2); /* T0+2 already last */
    eng_segment_unref(s);
    seg_path(f->dir, ".timeindex", path, sizeof path);
    assert_int_equal(ts_file_size(path), 24);
    seg_path(f->dir, ".index", path, sizeof path);
    assert_int_equal(ts_file_size(path), 16);
}

/* ---- rename and unlink -------------------------------------------------- */

static void test_rename_deleted_and_unlink(void **state)
{
    fixture *f = *state;
    copy_sample(f->dir);
    eng_segment_opts o = default_opts();
    eng_segment *s;
    assert_int_equal(eng_segment_open(f->dir, 0, &o, false, &s), 0);
    assert_int_equal(eng_segment_rename(s, ".deleted"), 0);
    char path[512], name[64];
    for (int i = 0; i < 3; i++) {
        seg_path(f->dir, exts[i], path, sizeof path);
        assert_int_equal(ts_file_size(path), -1);
        snprintf(name, sizeof name, "%s.deleted", exts[i]);
        seg_path(f->dir, name, path, sizeof path);
        assert_true(ts_file_size(path) > 0);
    }
    assert_int_equal(eng_segment_file_path(s, ".log", path, sizeof path), 0);
    char want[512];
    seg_path(f->dir, ".log.deleted", want, sizeof want);
    assert_string_equal(path, want);
    /* A renamed segment still reads through its open descriptors. */
    eng_batch_pos b;
    assert_int_equal(eng_segment_find_batch(s, 35, eng_segment_size(s), &b), 0);
    assert_int_equal(b.position, 8193);

    /* Renaming back works, and so does unlinking under the current suffix. */
    assert_int_equal(eng_segment_rename(s, ""), 0);
    seg_path(f->dir, ".index", path, sizeof path);
    assert_int_equal(ts_file_size(path), 16);
    assert_int_equal(eng_segment_rename(s, ".deleted"), 0);
    assert_int_equal(eng_segment_unlink(s), 0);
    for (int i = 0; i < 3; i++) {
        snprintf(name, sizeof name, "%s.deleted", exts[i]);
        seg_path(f->dir, name, path, sizeof path);
        assert_int_equal(ts_file_size(path), -1);
        seg_path(f->dir, exts[i], path, sizeof path);
        assert_int_equal(ts_file_size(path), -1);
    }
    eng_segment_unref(s);

    /* A missing index is skipped by rename; a missing .log is an error. */
    copy_sample(f->dir);
    seg_path(f->dir, ".timeindex", path, sizeof path);
    assert_int_equal(unlink(path), 0);
    assert_int_equal(eng_segment_open(f->dir, 0, &o, false, &s), 0);
    assert_int_equal(eng_segment_rename(s, ".deleted"), 0);
    seg_path(f->dir, ".index.deleted", path, sizeof path);
    assert_int_equal(ts_file_size(path), 16);
    assert_int_equal(eng_segment_unlink(s), 0);
    assert_int_not_equal(eng_segment_rename(s, ""), 0);
    eng_segment_unref(s);
}

/* A reader that first opens the indexes of a segment after its .deleted
 * files were unlinked reads it by scanning, and creates no file: the
 * missing indexes used to be created, preallocated, as .index.deleted
 * files that stayed until the next start.  A .timeindex missing beside its
 * .index reads as empty too (it failed every read of the segment). */
static void test_missing_indexes_read_as_empty(void **state)
{
    fixture *f = *state;
    eng_segment_opts o = default_opts();
    char path[512], listing[2048];
    for (int row = 0; row < 2; row++) {
        copy_sample(f->dir);
        eng_segment *s;
        assert_int_equal(eng_segment_open(f->dir, 0, &o, false, &s), 0);
        if (row == 0) {
            assert_int_equal(eng_segment_rename(s, ".deleted"), 0);
            for (int i = 1; i < 3; i++) { /* the delete-file job took the indexes */
                char name[64];
                snprintf(name, sizeof name, "%s.deleted", exts[i]);
                seg_path(f->dir, name, path, sizeof path);
                assert_int_equal(unlink(path), 0);
            }
        } else {
            seg_path(f->dir, ".timeindex", path, sizeof path);
            assert_int_equal(unlink(path), 0);
        }
        eng_batch_pos b;
        assert_int_equal(eng_segment_find_batch(s, 35, eng_segment_size(s), &b), 0);
        assert_int_equal(b.position, 8193);
        ts_list_dir(f->dir, listing, sizeof listing);
        assert_null(strstr(listing, "timeindex"));
        if (row == 0)
            assert_null(strstr(listing, ".index"));
        eng_segment_unref(s);
        if (row == 0) {
            seg_path(f->dir, ".log.deleted", path, sizeof path);
            assert_int_equal(unlink(path), 0);
        }
    }
}

static void test_create_refuses_existing_log(void **state)
{
    fixture *f = *state;
    copy_sample(f->dir);
    eng_segment_opts o = default_opts();
    eng_segment *s = NULL;
    assert_int_equal(eng_segment_create(f->dir, 0, &o, &s), -EEXIST);
    expect_sample_file(f->dir, ".log"); /* untouched */
    /* Preallocation: the .log is fallocated and trimmed by seal. */
    o.preallocate_bytes = 1 << 20;
    assert_int_equal(eng_segment_create(f->dir, 100, &o, &s), 0);
    char path[512];
    snprintf(path, sizeof path, "%s/00000000000000000100.log", f->dir);
    assert_int_equal(ts_file_size(path), 1 << 20);
    uint8_t buf[256];
    size_t n = tiny_batch(100, 3, T0, buf, sizeof buf);
    assert_int_equal(eng_segment_append(s, buf, n, 102, T0, 102), 0);
    assert_int_equal(eng_segment_seal(s), 0);
    assert_int_equal(ts_file_size(path), (long long)n);
    eng_segment_unref(s);
}

/* A signal during the .log's preallocation (posix_fallocate says EINTR)
 * is not an I/O error: the allocation goes on and the segment is made. */
static void test_preallocation_interrupted_goes_on(void **state)
{
    fixture *f = *state;
    eng_segment_opts o = default_opts();
    o.preallocate_bytes = 1 << 20;
    eng_segment *s = NULL;
    eng_fault_set("fs.fallocate=eintr@1,fs.fallocate=eintr@2");
    int rc = eng_segment_create(f->dir, 100, &o, &s);
    eng_fault_set(NULL);
    assert_int_equal(rc, 0);
    char path[512];
    snprintf(path, sizeof path, "%s/00000000000000000100.log", f->dir);
    assert_int_equal(ts_file_size(path), 1 << 20);
    eng_segment_unref(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_write_sample_segment_byte_exact,
                                        ts_dir_setup, ts_dir_teardown),
        cmocka_unit_test_setup_teardown(test_open_and_decode_sample, ts_dir_setup, ts_dir_teardown),
        cmocka_unit_test_setup_teardown(test_scan_sample, ts_dir_setup, ts_dir_teardown),
        cmocka_unit_test_setup_teardown(test_recover_intact, ts_dir_setup, ts_dir_teardown),
        cmocka_unit_test_setup_teardown(test_recover_rebuilds_what_append_wrote,
                                        ts_dir_setup, ts_dir_teardown),
        cmocka_unit_test_setup_teardown(test_recover_truncated_tail, ts_dir_setup, ts_dir_teardown),
        cmocka_unit_test_setup_teardown(test_recover_garbage_tail, ts_dir_setup, ts_dir_teardown),
        cmocka_unit_test_setup_teardown(test_recover_flipped_bit_in_middle,
                                        ts_dir_setup, ts_dir_teardown),
        cmocka_unit_test_setup_teardown(test_recover_active_segment_keeps_appending,
                                        ts_dir_setup, ts_dir_teardown),
        cmocka_unit_test_setup_teardown(test_roll_size_and_time, ts_dir_setup, ts_dir_teardown),
        cmocka_unit_test_setup_teardown(test_roll_index_full, ts_dir_setup, ts_dir_teardown),
        cmocka_unit_test_setup_teardown(test_rename_deleted_and_unlink,
                                        ts_dir_setup, ts_dir_teardown),
        cmocka_unit_test_setup_teardown(test_missing_indexes_read_as_empty,
                                        ts_dir_setup, ts_dir_teardown),
        cmocka_unit_test_setup_teardown(test_create_refuses_existing_log,
                                        ts_dir_setup, ts_dir_teardown),
        cmocka_unit_test_setup_teardown(test_preallocation_interrupted_goes_on,
                                        ts_dir_setup, ts_dir_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
