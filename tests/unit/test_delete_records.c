/*
 * test_delete_records.c - delete-records and the removal of deleted
 * segments, engine level (eng_retention.h, kafka-format.md §15).
 *   - delete-records: raise, never lower, -1 = HW, past HW -> ENG_EOFFSET with
 *     bounds; reads below fail; retention then deletes the segments wholly
 *     below the new start (rule log_start_offset) without lowering it;
 *   - the log start offset moves before files are renamed *.deleted; the
 *     owner gets them with file.delete.delay.ms, unlinks later; log lines;
 *   - readers racing deletion: ENG_EOFFSET is the only error, and every
 *     record read is intact and at the offset asked for.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "retention_fixture.h"

/* ---- delete-records ------------------------------------------------------- */

static void test_delete_records(void **state)
{
    fixture *f = *state;
    eng_partition *p = open_part(f);
    segments(p, 3, eng_now_ms()); /* [0,10) [10,20) [20,30) active [30) */
    assert_int_equal(del(p, 15, 0, NULL), 15);
    assert_int_equal(count_lines(f, "incremented log start offset to 15"), 1);
    uint8_t *ck;
    size_t cklen;
    char path[700];
    snprintf(path, sizeof path, "%s/leader-epoch-checkpoint", f->pdir);
    assert_int_equal(ts_read_file(path, &ck, &cklen), 0);
    assert_int_equal(cklen, strlen("0\n1\n0 15\n"));
    assert_memory_equal(ck, "0\n1\n0 15\n", cklen);
    free(ck);

    /* Reads below the new start fail with its bounds; from it, intact. */
    read_out_of_range(p, 14, 15, 30);
    read_from(p, 15, 20);

    /* Never lowered; past the high watermark refused with the bounds. */
    assert_int_equal(del(p, 5, 0, NULL), 15);
    assert_int_equal(del(p, 15, 0, NULL), 15);
    eng_errdetail err = {0};
    assert_int_equal(del(p, 31, ENG_EOFFSET, &err), 15);
    assert_true(err.has_bounds && err.lo == 15 && err.hi == 30);
    assert_int_not_equal(eng_partition_delete_records(p, -2, &(int64_t){0}, NULL), 0);
    assert_int_equal(eng_partition_log_start_offset(p), 15);
    assert_int_equal(count_lines(f, "incremented log start offset"), 1);

    /* Retention then removes the segments wholly below the start, and
     * leaves the start where it is. */
    eng_retention_report rep = run(p, false, 1);
    expect_del(&rep.segments[0], 0, "log_start_offset");
    assert_int_equal(rep.log_start_offset_after, 15);
    eng_retention_report_free(&rep);
    assert_int_equal(eng_partition_log_start_offset(p), 15);
    assert_int_equal(count_lines(f, "incremented log start offset"), 1);

    /* -1: up to the high watermark (= HW allowed); then every closed
     * segment goes, the empty active one stays. */
    assert_int_equal(del(p, -1, 0, NULL), 30);
    assert_int_equal(del(p, 30, 0, NULL), 30);
    read_out_of_range(p, 29, 30, 30);
    rep = run(p, false, 2);
    assert_false(rep.rolled);
    eng_retention_report_free(&rep);
    expect_segs(p, 1, 30);
    assert_int_equal(count_lines(f, "incremented log start offset"), 2);
    close_part(p);
}

/* What delete-records removed no longer counts as the partition's latest
 * timestamp: ?spec=max_timestamp named offset 0 of a deleted segment,
 * which then read as 416. */
static void test_max_timestamp_after_delete(void **state)
{
    fixture *f = *state;
    eng_partition *p = open_part(f);
    int64_t now = eng_now_ms();
    append(p, 10, now + 5000); /* [0,10): the largest timestamps */
    roll(p);
    append(p, 10, now); /* [10,20) */
    int64_t off, ts;
    assert_int_equal(eng_partition_max_timestamp(p, &off, &ts), 0);
    assert_int_equal(ts, now + 5000);
    assert_true(off < 10);
    assert_int_equal(del(p, 10, 0, NULL), 10);
    assert_int_equal(eng_partition_max_timestamp(p, &off, &ts), 0);
    assert_int_equal(ts, now);
    assert_true(off >= 10 && off < 20);
    eng_partition_info info;
    eng_partition_info_get(p, &info);
    assert_int_equal(info.max_timestamp, now);
    close_part(p);
}

/* The same inside the segment that stays: with the log start offset inside
 * the batch holding the largest timestamp only its later records count, and
 * past that batch the next largest does.  The answer named offset 2, below
 * the log start offset, which reads as 416. */
static void test_max_timestamp_after_delete_inside_segment(void **state)
{
    fixture *f = *state;
    eng_partition *p = open_part(f);
    int64_t now = eng_now_ms();
    append(p, 2, now);        /* [0,2) */
    append(p, 2, now + 5000); /* [2,4): the largest */
    append(p, 2, now + 1000); /* [4,6) */
    append(p, 2, now + 2000); /* [6,8) */
    int64_t off, ts;
    eng_partition_info info;
    assert_int_equal(del(p, 3, 0, NULL), 3);
    assert_int_equal(eng_partition_max_timestamp(p, &off, &ts), 0);
    assert_int_equal(ts, now + 5000);
    assert_int_equal(off, 3);
    assert_int_equal(del(p, 4, 0, NULL), 4);
    assert_int_equal(eng_partition_max_timestamp(p, &off, &ts), 0);
    assert_int_equal(ts, now + 2000);
    assert_int_equal(off, 6);
    eng_partition_info_get(p, &info);
    assert_int_equal(info.max_timestamp, now + 2000);
    close_part(p);
}

/* ---- .deleted, then unlinked ----------------------------------------------- */

static void test_deleted_then_unlinked(void **state)
{
    fixture *f = *state;
    f->hold = true;
    f->cfg.v[ENG_CFG_RETENTION_MS].i = 20000;
    f->cfg.v[ENG_CFG_FILE_DELETE_DELAY_MS].i = 1234;
    eng_partition *p = open_part(f);
    segments(p, 2, OLD_TS);
    append(p, 10, eng_now_ms());
    eng_retention_report rep = run(p, false, 2);
    eng_retention_report_free(&rep);
    assert_int_equal(f->ndeleted, 2);
    static const int64_t gone[] = {0, 10};
    for (size_t i = 0; i < 2; i++) {
        /* Handed over renamed, after the log start offset moved past it. */
        assert_int_equal(eng_segment_base(f->held[i]), gone[i]);
        assert_true(f->renamed_seen[i]);
        assert_true(f->lso_seen[i] >= 20);
        assert_int_equal(f->held_delay[i], 1234);
        assert_int_equal(seg_files(f->pdir, gone[i], ".deleted"), 3);
        assert_int_equal(seg_files(f->pdir, gone[i], ""), 0);
    }
    assert_int_equal(count_lines(f, "deleting segment 00000000000000000000"), 1);
    assert_int_equal(count_lines(f, "deleting segment 00000000000000000010"), 1);
    assert_int_equal(count_lines(f, "deleting segment"), 2);
    /* Whoever still holds a deleted segment reads it (the descriptors stay
     * valid); the owner unlinks when the delay is over. */
    uint8_t hdr[ENG_BATCH_OVERHEAD];
    size_t got;
    assert_int_equal(eng_segment_pread(f->held[1], hdr, sizeof hdr, 0, &got), 0);
    assert_int_equal(got, sizeof hdr);
    assert_int_equal(eng_be64(hdr), 10);
    for (size_t i = 0; i < 2; i++) {
        assert_int_equal(eng_segment_unlink(f->held[i]), 0);
        assert_int_equal(seg_files(f->pdir, gone[i], ".deleted"), 0);
        eng_segment_unref(f->held[i]);
        f->held[i] = NULL;
    }
    assert_true(seg_file(f->pdir, 20, ".log"));
    close_part(p);
}

/* ---- readers racing deletion ------------------------------------------------ */

#define READERS 4
#define VLEN 100

typedef struct race {
    eng_partition *p;
    _Atomic bool stop;
    _Atomic long records, passes, out_of_range, bad;
    _Atomic int ids;
    char why[512];
    pthread_mutex_t mu;
} race;

/* Records the first bad read (printf-style) and counts it. */
#define race_fail(r, ...)                                                                          \
    do {                                                                                           \
        pthread_mutex_lock(&(r)->mu);                                                              \
        if (!(r)->why[0])                                                                          \
            snprintf((r)->why, sizeof(r)->why, __VA_ARGS__);                                       \
        pthread_mutex_unlock(&(r)->mu);                                                            \
        atomic_fetch_add(&(r)->bad, 1);                                                            \
    } while (0)

/* Half the readers read whole passes from the log start; the other half
 * keep re-reading at the log start, where the segments go. */
static void *reader(void *arg)
{
    race *r = arg;
    bool at_start = atomic_fetch_add(&r->ids, 1) % 2;
    while (!atomic_load(&r->stop)) {
        int64_t off = eng_partition_log_start_offset(r->p);
        for (int reads = 0; !at_start || reads < 1; reads++) {
            eng_fetch ft;
            eng_errdetail err = {0};
            int rc = eng_partition_read(r->p, off, 2048, &ft, &err);
            if (rc == ENG_EOFFSET) {
                atomic_fetch_add(&r->out_of_range, 1);
                break; /* deleted under us: start again from the new start */
            }
            if (rc) {
                race_fail(r, "read at %lld: %s (%s)", (long long)off, eng_strerror(rc), err.message);
                return NULL;
            }
            if (ft.len == 0) { /* only at the high watermark */
                if (off < ft.high_watermark)
                    race_fail(r, "empty read at %lld below the high watermark %lld",
                              (long long)off, (long long)ft.high_watermark);
                eng_fetch_free(&ft);
                break;
            }
            int64_t next = ts_walk_intact(&ft, off, VLEN);
            if (next < 0 || next != ft.next_offset || next <= off) {
                race_fail(r, "records read from %lld are not intact or not from there: the fetch "
                          "holds [%lld, %lld), log start now %lld",
                          (long long)off, (long long)eng_be64(ft.data), (long long)ft.next_offset,
                          (long long)eng_partition_log_start_offset(r->p));
                eng_fetch_free(&ft);
                return NULL;
            }
            atomic_fetch_add(&r->records, (long)(next - off));
            eng_fetch_free(&ft);
            off = next;
        }
        atomic_fetch_add(&r->passes, 1);
    }
    return NULL;
}

static void test_readers_race_deletion(void **state)
{
    fixture *f = *state;
    eng_partition *p = open_part(f);
    race r = {.p = p};
    pthread_mutex_init(&r.mu, NULL);
    /* Four batches a segment; keep about three segments by size. */
    size_t blen = append_rec(p, 10, eng_now_ms(), VLEN, false, NULL);
    for (int i = 0; i < 3; i++)
        append_rec(p, 10, eng_now_ms(), VLEN, false, NULL);
    roll(p);
    set_cfg(p, ENG_CFG_RETENTION_BYTES, (int64_t)(3 * 4 * blen));

    pthread_t th[READERS];
    for (int i = 0; i < READERS; i++)
        assert_int_equal(pthread_create(&th[i], NULL, reader, &r), 0);
    long deleted = 0;
    for (int round = 0; round < 200 && !atomic_load(&r.bad); round++) {
        for (int i = 0; i < 4; i++)
            append_rec(p, 10, eng_now_ms(), VLEN, false, NULL);
        roll(p);
        eng_retention_report rep;
        assert_int_equal(eng_partition_retention(p, eng_now_ms(), false, &rep), 0);
        deleted += (long)rep.n;
        eng_retention_report_free(&rep);
        if (round % 50 == 49) { /* now and then everything goes */
            int64_t lso;
            assert_int_equal(eng_partition_delete_records(p, -1, &lso, NULL), 0);
            assert_int_equal(eng_partition_retention(p, eng_now_ms(), false, &rep), 0);
            deleted += (long)rep.n;
            eng_retention_report_free(&rep);
        }
        if (round % 16 == 0)
            usleep(500); /* let the readers run */
    }
    atomic_store(&r.stop, true);
    for (int i = 0; i < READERS; i++)
        pthread_join(th[i], NULL);
    if (atomic_load(&r.bad))
        fail_msg("%ld bad reads; first: %s", atomic_load(&r.bad), r.why);
    assert_true(deleted >= 150);
    assert_true(atomic_load(&r.records) > 0);
    assert_true(atomic_load(&r.passes) > 0);
    print_message("# %ld segments deleted; readers: %ld records, %ld passes, %ld out of range\n",
                  deleted, atomic_load(&r.records), atomic_load(&r.passes),
                  atomic_load(&r.out_of_range));
    pthread_mutex_destroy(&r.mu);
    /* No leftovers: every deleted segment was unlinked (no holder here). */
    char *l = listing(f->pdir);
    assert_null(strstr(l, ".deleted"));
    free(l);
    close_part(p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_delete_records, setup, teardown),
        cmocka_unit_test_setup_teardown(test_max_timestamp_after_delete, setup, teardown),
        cmocka_unit_test_setup_teardown(test_max_timestamp_after_delete_inside_segment, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_deleted_then_unlinked, setup, teardown),
        cmocka_unit_test_setup_teardown(test_readers_race_deletion, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
