/*
 * corruption_fixture.h - the template partition of the corruption suites
 * (test_corruption.c, test_corruption_mgr.c): 15 batches of 3 records,
 * offsets 3b..3b+2, keys k-%03d, values val-%03d-xxx... of varying length,
 * segments starting at batches 0, SEG1 and SEG2; and the check of a
 * partition directory against them with crash_check.h.
 *
 * Include after cmocka.h.
 */
#ifndef CORRUPTION_FIXTURE_H
#define CORRUPTION_FIXTURE_H

#include "../crash/crash_check.h"
#include "eng_batch.h"
#include "eng_error.h"
#include "eng_partition.h"

#include <stdio.h>
#include <string.h>

#define T0 1700000000000LL
#define NB 15
#define SEG1 5 /* first batch of segment 1 */
#define SEG2 10

static inline int64_t seg_base(int b)
{
    return b >= SEG2 ? 3 * SEG2 : b >= SEG1 ? 3 * SEG1 : 0;
}

static inline void value_of(int64_t off, char *buf, size_t len)
{
    int n = snprintf(buf, len, "val-%03lld-", (long long)off);
    size_t want = (size_t)n + (size_t)(off * 7 % 40);
    for (size_t i = (size_t)n; i < want && i + 1 < len; i++)
        buf[i] = 'x';
    buf[want < len ? want : len - 1] = 0;
}

static inline size_t batch(uint8_t *buf, size_t cap, int b)
{
    char keys[3][16], vals[3][64];
    eng_record_spec recs[3];
    for (int i = 0; i < 3; i++) {
        int64_t off = 3 * b + i;
        snprintf(keys[i], sizeof keys[i], "k-%03lld", (long long)off);
        value_of(off, vals[i], sizeof vals[i]);
        recs[i] = (eng_record_spec){.timestamp = T0 + b, .key = (const uint8_t *)keys[i],
                                    .key_len = (int32_t)strlen(keys[i]),
                                    .value = (const uint8_t *)vals[i],
                                    .value_len = (int32_t)strlen(vals[i])};
    }
    eng_batch_params bp;
    eng_batch_params_init(&bp);
    return eng_batch_encode(buf, cap, &bp, recs, 3);
}

static inline void append_batch(eng_partition *p, int b)
{
    uint8_t buf[1024];
    size_t len = batch(buf, sizeof buf, b);
    eng_append_opts o = {.expected_offset = -1};
    eng_append_result res;
    eng_errdetail err = {0};
    if (eng_partition_append(p, buf, len, &o, &res, &err))
        fail_msg("append: %s", err.message);
    assert_int_equal(res.base_offset, 3 * b);
}

static inline void expect_files(const char *dir, eng_partition *p, int64_t from, int64_t leo, int nsegs)
{
    cc_part d;
    if (cc_check_partition(dir, &d))
        fail_msg("checker: %s", d.err);
    if (d.next_offset != leo || d.nsegments != nsegs)
        fail_msg("files end at %lld with %d segments, expected %lld with %d",
                 (long long)d.next_offset, d.nsegments, (long long)leo, nsegs);
    for (int64_t off = from; off < leo; off++) {
        const cc_record *r = cc_find(&d, off);
        char key[32], val[64];
        snprintf(key, sizeof key, "k-%03lld", (long long)off);
        value_of(off, val, sizeof val);
        if (!r || strcmp(r->key, key) || strcmp(r->value, val))
            fail_msg("offset %lld is %s", (long long)off, r ? "different" : "missing");
    }
    assert_int_equal(d.nrecs, (size_t)(leo - from));
    cc_part_free(&d);
    if (!p)
        return;
    assert_int_equal(eng_partition_log_end_offset(p), leo);
    assert_int_equal(eng_partition_high_watermark(p), leo);
    if (leo > 0) { /* the last record reads back through the engine */
        eng_fetch f;
        eng_errdetail err = {0};
        assert_int_equal(eng_partition_read(p, leo - 1, 1 << 20, &f, &err), 0);
        assert_true(f.len > 0);
        assert_int_equal(f.next_offset, leo);
        eng_fetch_free(&f);
    }
}

#endif
