/*
 * test_read_slice.c - eng_partition_read_slice, what raw reads send with
 * sendfile, against eng_partition_read, which copies.
 *
 *   - for every batch boundary and a spread of max_bytes, the slice holds
 *     exactly the bytes the copying read returns: whole batches, at least
 *     one, as many as fit in max_bytes, below the high watermark, and the
 *     same next offset;
 *   - the slice never shrinks as max_bytes grows (a scan that began at an
 *     offset-index entry used to stop at the first batch crossing the limit
 *     and answer only the first batch);
 *   - it stops at a segment's end and at the high watermark, and answers out
 *     of range outside [log start, high watermark].
 *
 * Batches vary in size (1 to 40 records of 100 bytes) so that the offset
 * index's entries (every index.interval.bytes) fall between the start and
 * the limit of many reads.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "eng_batch.h"
#include "eng_config.h"
#include "eng_error.h"
#include "eng_partition.h"
#include "support.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define T0 1700000000000LL
#define NBATCHES 600
#define MAX_RECS 40

typedef struct fixture {
    char *dir;
    char pdir[512];
    eng_partition *p;
    int64_t base[NBATCHES + 1]; /* base offset of batch i; base[n] = log end */
} fixture;

static size_t build(uint8_t *buf, size_t cap, int n, int seed)
{
    static uint8_t value[100];
    eng_record_spec recs[MAX_RECS];
    for (int i = 0; i < n; i++) {
        memset(value, 'a' + (seed + i) % 26, sizeof value);
        recs[i] = (eng_record_spec){.timestamp = T0 + seed, .key = NULL, .key_len = -1,
                                    .value = value, .value_len = (int32_t)sizeof value};
    }
    eng_batch_params bp;
    eng_batch_params_init(&bp);
    return eng_batch_encode(buf, cap, &bp, recs, (size_t)n);
}

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    if (!f || !(f->dir = ts_tmpdir()))
        return -1;
    snprintf(f->pdir, sizeof f->pdir, "%s/raw-0", f->dir);
    eng_config_defaults d;
    eng_config_defaults_init(&d);
    d.cfg.v[ENG_CFG_SEGMENT_BYTES].i = 256 << 10; /* several segments */
    eng_partition_params pp = {.topic = "raw", .id = 0, .dir = f->pdir, .config = d.cfg,
                               .clean_shutdown = true, .recovery_point = 0,
                               .log_start_offset = -1};
    if (eng_partition_open(&pp, &f->p, NULL))
        return -1;
    static uint8_t buf[MAX_RECS * 200];
    for (int b = 0; b < NBATCHES; b++) {
        int n = 1 + (b * 7919) % MAX_RECS;
        size_t len = build(buf, sizeof buf, n, b);
        eng_append_opts o = {.expected_offset = -1, .producer_batches = true};
        eng_append_result res;
        if (eng_partition_append(f->p, buf, len, &o, &res, NULL))
            return -1;
        f->base[b] = res.base_offset;
    }
    f->base[NBATCHES] = eng_partition_high_watermark(f->p);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    eng_partition_close(f->p);
    eng_partition_unref(f->p);
    ts_rmtree(f->dir);
    free(f->dir);
    free(f);
    return 0;
}

/* The slice's bytes, read from its fd (malloc'd; NULL when empty). */
static uint8_t *slice_bytes(const eng_slice *s)
{
    if (s->fd < 0)
        return NULL;
    uint8_t *b = malloc(s->length ? s->length : 1);
    assert_non_null(b);
    assert_int_equal(pread(s->fd, b, s->length, (off_t)s->position), (ssize_t)s->length);
    return b;
}

static void test_slice_matches_copying_read(void **state)
{
    fixture *f = *state;
    static const size_t sizes[] = {1, 100, 4000, 4096, 8192, 10000, 23594, 23595, 60000,
                                   100000, 262144, 1 << 20};
    int checked = 0;
    for (int b = 0; b < NBATCHES; b += 3) {
        size_t prev_len = 0;
        for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++) {
            eng_fetch ft;
            eng_slice sl;
            assert_int_equal(eng_partition_read(f->p, f->base[b], sizes[k], &ft, NULL), 0);
            assert_int_equal(eng_partition_read_slice(f->p, f->base[b], sizes[k], &sl, NULL), 0);
            assert_true(ft.len > 0);
            if (sl.length != ft.len || sl.next_offset != ft.next_offset)
                fail_msg("offset %lld max_bytes %zu: slice %zu bytes to %lld, read %zu to %lld",
                         (long long)f->base[b], sizes[k], sl.length, (long long)sl.next_offset,
                         ft.len, (long long)ft.next_offset);
            uint8_t *bytes = slice_bytes(&sl);
            assert_memory_equal(bytes, ft.data, ft.len);
            /* Whole batches, as many as fit: the next one would not. */
            assert_true(sl.length <= sizes[k] || sl.next_offset == f->base[b + 1]);
            assert_true(sl.length >= prev_len || sl.next_offset == f->base[NBATCHES]);
            prev_len = sl.length;
            free(bytes);
            close(sl.fd);
            eng_fetch_free(&ft);
            checked++;
        }
    }
    printf("# %d reads compared\n", checked);
}

static void test_slice_bounds(void **state)
{
    fixture *f = *state;
    eng_slice sl;
    eng_errdetail err = {0};
    int64_t hw = f->base[NBATCHES];
    /* At the high watermark: empty, not an error. */
    assert_int_equal(eng_partition_read_slice(f->p, hw, 1 << 20, &sl, NULL), 0);
    assert_int_equal(sl.fd, -1);
    assert_int_equal(sl.length, 0);
    assert_int_equal(sl.next_offset, hw);
    assert_int_equal(eng_partition_read_slice(f->p, hw + 1, 1 << 20, &sl, &err), ENG_EOFFSET);
    assert_int_equal(eng_partition_read_slice(f->p, -1, 1 << 20, &sl, &err), ENG_EOFFSET);
    /* A huge max_bytes stops at the end of the segment holding the offset. */
    assert_int_equal(eng_partition_read_slice(f->p, 0, SIZE_MAX / 2, &sl, NULL), 0);
    assert_true(sl.length <= 256 << 10);
    assert_true(sl.next_offset < hw);
    close(sl.fd);
    /* From inside a batch: the slice starts with that batch. */
    eng_fetch ft;
    int64_t mid = f->base[10] + (f->base[11] - f->base[10]) / 2;
    assert_int_equal(eng_partition_read_slice(f->p, mid, 1, &sl, NULL), 0);
    assert_int_equal(eng_partition_read(f->p, mid, 1, &ft, NULL), 0);
    assert_int_equal(sl.length, ft.len);
    assert_int_equal(sl.next_offset, f->base[11]);
    close(sl.fd);
    eng_fetch_free(&ft);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_slice_matches_copying_read),
        cmocka_unit_test(test_slice_bounds),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
