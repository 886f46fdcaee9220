/*
 * test_timestamps.c - the timestamps a partition stamps and reports:
 *   - LogAppendTime never decreases with the offset, however concurrent
 *     appenders interleave, and each append answers the time it stored.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "eng_batch.h"
#include "eng_config.h"
#include "eng_error.h"
#include "eng_partition.h"
#include "partition_fixture.h"
#include "support.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* ---- LogAppendTime order ------------------------------------------------- */

enum { STAMPERS = 4, STAMPS = 150 };

typedef struct stamp {
    int64_t base, time;
} stamp;

typedef struct stamper {
    eng_partition *p;
    int id;
    _Atomic int *errors;
    stamp done[STAMPS];
} stamper;

/* Each thread appends batches of its own size: compressing them into the
 * topic's zstd takes each a different time between reading the clock and
 * taking the append lock, which is where appends overtake each other. */
static void *stamper_main(void *arg)
{
    stamper *s = arg;
    uint8_t *buf = malloc(MAX_RECS * (TS_VALUE_MAX + 64));
    if (!buf) {
        atomic_fetch_add(s->errors, 1);
        return NULL;
    }
    int n = 1 + s->id * (MAX_RECS - 1) / (STAMPERS - 1);
    for (int i = 0; i < STAMPS; i++) {
        size_t len = ts_build_batch(buf, MAX_RECS * (TS_VALUE_MAX + 64), 0, n, T0, TS_VALUE_MAX);
        eng_append_result res;
        if (!len || do_append(s->p, buf, len, -1, true, &res, NULL)) {
            atomic_fetch_add(s->errors, 1);
            break;
        }
        s->done[i] = (stamp){res.base_offset, res.log_append_time};
    }
    free(buf);
    return NULL;
}

typedef struct order_ctx {
    int64_t last;    /* the previous batch's stamp */
    int64_t batches;
    int backwards;   /* batches stamped below the one before them */
    stamper *st;
    int unmatched;   /* batches whose stamp is not what their append answered */
} order_ctx;

static void check_batch(order_ctx *c, const eng_batch_header *h)
{
    if (!(h->attributes & ENG_ATTR_LOG_APPEND_TIME) || h->max_timestamp < c->last)
        c->backwards++;
    c->last = h->max_timestamp;
    c->batches++;
    bool found = false;
    for (int t = 0; t < STAMPERS && !found; t++)
        for (int i = 0; i < STAMPS && !found; i++)
            if (c->st[t].done[i].base == h->base_offset) {
                found = true;
                if (c->st[t].done[i].time != h->max_timestamp)
                    c->unmatched++;
            }
    if (!found)
        c->unmatched++;
}

static void test_log_append_time_never_decreases(void **state)
{
    fixture *f = *state;
    f->cfg.v[ENG_CFG_MESSAGE_TIMESTAMP_TYPE].i = ENG_TS_LOG_APPEND_TIME;
    f->cfg.v[ENG_CFG_COMPRESSION_TYPE].i = ENG_COMPRESSION_ZSTD;
    eng_partition *p = open_part(f, true, 0, NULL);
    _Atomic int errors = 0;
    static stamper st[STAMPERS];
    pthread_t th[STAMPERS];
    for (int i = 0; i < STAMPERS; i++) {
        st[i] = (stamper){.p = p, .id = i, .errors = &errors};
        assert_int_equal(pthread_create(&th[i], NULL, stamper_main, &st[i]), 0);
    }
    for (int i = 0; i < STAMPERS; i++)
        pthread_join(th[i], NULL);
    assert_int_equal(atomic_load(&errors), 0);

    order_ctx c = {.last = -1, .st = st};
    int64_t off = 0, end = eng_partition_high_watermark(p);
    while (off < end) {
        eng_fetch ft;
        assert_int_equal(eng_partition_read(p, off, 1 << 20, &ft, NULL), 0);
        assert_true(ft.len > 0);
        for (size_t pos = 0; pos < ft.len;) {
            eng_batch_header h;
            assert_int_equal(eng_batch_header_decode(ft.data + pos, ft.len - pos, &h), 0);
            assert_int_equal(eng_batch_validate(ft.data + pos, eng_batch_size(&h), &h), 0);
            check_batch(&c, &h);
            pos += eng_batch_size(&h);
        }
        off = ft.next_offset;
        eng_fetch_free(&ft);
    }
    assert_int_equal(c.batches, STAMPERS * STAMPS);
    assert_int_equal(c.backwards, 0);
    assert_int_equal(c.unmatched, 0);
    eng_partition_unref(p);
}

#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(test_log_append_time_never_decreases),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
