/*
 * test_partition.c - one partition's log: append, roll, read, reload.
 *
 *   - the Kafka figures: 12,000 records of 250 bytes, 10 per append, with
 *     segment.bytes=1048576 give segments 0/3830/7660/11490 of 1,045,973
 *     bytes, 1,528-byte indexes and 2,292-byte time indexes; offset 35 is
 *     read from the batch at position 8193;
 *   - 8 appending and 8 reading threads: every offset assigned once, every
 *     record read back intact; segment listings while segments roll;
 *   - refusals that leave nothing behind: expected_offset, max.message.bytes,
 *     a corrupt producer batch, null keys on compacted topics, timestamps
 *     outside message.timestamp.before/after.max.ms;
 *   - LogAppendTime, reads out of range and at the high watermark,
 *     offset_for_timestamp, max_timestamp.
 *
 * Rolls, reopening and flushing are in test_partition_reopen.c.
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
#include "eng_process.h"
#include "eng_logger.h"
#include "eng_partition.h"
#include "partition_fixture.h"
#include "support.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- the Kafka figures -------------------------------------------------- */

static void test_kafka_figures(void **state)
{
    fixture *f = *state;
    f->cfg.v[ENG_CFG_SEGMENT_BYTES].i = 1048576;
    eng_partition *p = open_part(f, true, 0, NULL);
    for (int a = 0; a < 1200; a++) {
        uint8_t buf[4096];
        size_t len = ts_build_batch(buf, sizeof buf, 10 * a, 10, T0 + a, 250);
        assert_int_equal(len, 2731);
        eng_append_result res;
        eng_errdetail err = {0};
        assert_int_equal(do_append(p, buf, len, -1, false, &res, &err), 0);
        assert_int_equal(res.base_offset, 10 * a);
        assert_int_equal(res.last_offset, 10 * a + 9);
        assert_int_equal(res.record_count, 10);
        assert_int_equal(res.batch_bytes, 2731);
    }
    assert_int_equal(eng_partition_log_end_offset(p), 12000);
    assert_int_equal(eng_partition_high_watermark(p), 12000);

    eng_segment_info *si;
    size_t n;
    assert_int_equal(eng_partition_segments(p, &si, &n), 0);
    assert_int_equal(n, 4);
    static const int64_t bases[] = {0, 3830, 7660, 11490};
    for (size_t i = 0; i < 3; i++) {
        assert_int_equal(si[i].base_offset, bases[i]);
        assert_int_equal(si[i].next_offset, bases[i + 1]);
        assert_false(si[i].active);
        assert_int_equal(si[i].size_bytes, 1045973);
        assert_int_equal(si[i].batch_count, 383);
        assert_int_equal(si[i].record_count, 3830);
        assert_int_equal(si[i].index_entries, 191);
        assert_int_equal(si[i].index_bytes, 1528);
        assert_int_equal(si[i].timeindex_entries, 191);
        assert_int_equal(si[i].timeindex_bytes, 2292);
        assert_int_equal(file_size(f->pdir, bases[i], ".log"), 1045973);
        assert_int_equal(file_size(f->pdir, bases[i], ".index"), 1528);
        assert_int_equal(file_size(f->pdir, bases[i], ".timeindex"), 2292);
    }
    assert_int_equal(si[3].base_offset, 11490);
    assert_true(si[3].active);
    assert_int_equal(si[3].size_bytes, 51 * 2731);
    assert_int_equal(file_size(f->pdir, 11490, ".index"), 10485760);
    assert_int_equal(file_size(f->pdir, 11490, ".timeindex"), 10485756);
    free(si);

    /* First index entries of the first segment: (29 -> 5462), (T+2, 29). */
    eng_segment *seg;
    assert_int_equal(eng_partition_segment(p, 0, &seg), 0);
    int64_t off, ts;
    uint32_t pos;
    eng_offset_index_entry(eng_segment_offset_index(seg), 0, &off, &pos);
    assert_int_equal(off, 29);
    assert_int_equal(pos, 5462);
    eng_time_index_entry(eng_segment_time_index(seg), 0, &ts, &off);
    assert_int_equal(ts, T0 + 2);
    assert_int_equal(off, 29);
    eng_time_index_last(eng_segment_time_index(seg), &ts, &off);
    assert_int_equal(ts, T0 + 382);
    assert_int_equal(off, 3829);
    /* Offset 35 lives in the batch at position 8193. */
    eng_batch_pos b;
    assert_int_equal(eng_segment_find_batch(seg, 35, eng_segment_size(seg), &b), 0);
    assert_int_equal(b.position, 8193);
    assert_int_equal(b.header.base_offset, 30);
    eng_segment_unref(seg);

    eng_fetch ft;
    eng_errdetail err = {0};
    assert_int_equal(eng_partition_read(p, 35, 1, &ft, &err), 0);
    assert_true(ft.len >= 2731);
    assert_int_equal(eng_be64(ft.data), 30);
    assert_int_equal(ft.next_offset, 40);
    assert_int_equal(ft.high_watermark, 12000);
    eng_fetch_free(&ft);
    /* Across a segment boundary. */
    assert_int_equal(eng_partition_read(p, 3835, 1, &ft, &err), 0);
    assert_int_equal(eng_be64(ft.data), 3830);
    eng_fetch_free(&ft);

    assert_int_equal(read_and_check(p, 0, 250), 12000);
    assert_int_equal(eng_partition_close(p), 0);
    eng_partition_unref(p);
}

/* ---- concurrency -------------------------------------------------------- */

enum { WRITERS = 8, READERS = 8, APPENDS = 60, RECS = 5, VLEN = 1000 };

typedef struct conc {
    eng_partition *p;
    int w;
    _Atomic int *writers_left;
    _Atomic int *errors;
    int64_t bases[APPENDS];
} conc;

/* Writer w's append a, record r: key "w<w>-<a>-<r>", value tied to it. */
static void conc_value(uint8_t *v, int w, int a, int r)
{
    for (int j = 0; j < VLEN; j++)
        v[j] = (uint8_t)(w * 31 + a * 7 + r * 3 + j);
}

static void *writer_main(void *arg)
{
    conc *c = arg;
    static _Thread_local uint8_t values[RECS][VLEN];
    uint8_t buf[RECS * (VLEN + 64) + 64];
    for (int a = 0; a < APPENDS; a++) {
        char keys[RECS][32];
        eng_record_spec recs[RECS];
        for (int r = 0; r < RECS; r++) {
            snprintf(keys[r], sizeof keys[r], "w%d-%d-%d", c->w, a, r);
            conc_value(values[r], c->w, a, r);
            recs[r] = (eng_record_spec){.timestamp = eng_now_ms(), .key = (const uint8_t *)keys[r],
                                        .key_len = (int32_t)strlen(keys[r]), .value = values[r],
                                        .value_len = VLEN};
        }
        size_t len = encode(buf, sizeof buf, recs, RECS);
        eng_append_result res;
        if (len == 0 || do_append(c->p, buf, len, -1, true, &res, NULL) ||
            res.last_offset != res.base_offset + RECS - 1)
            atomic_fetch_add(c->errors, 1);
        c->bases[a] = res.base_offset;
    }
    atomic_fetch_sub(c->writers_left, 1);
    return NULL;
}

/* A record of writer w's append a, number r: "w<w>-<a>-<r>", value tied to it. */
static int conc_intact(const eng_record *r, void *ctx)
{
    conc *cs = ctx; /* when set: the record must sit where its append was put */
    int w, a, rr;
    char key[32];
    uint8_t want[VLEN];
    if (r->key_len <= 0 || r->key_len >= (int)sizeof key || r->value_len != VLEN)
        return -1;
    memcpy(key, r->key, (size_t)r->key_len);
    key[r->key_len] = 0;
    if (sscanf(key, "w%d-%d-%d", &w, &a, &rr) != 3 || w < 0 || w >= WRITERS || a < 0 ||
        a >= APPENDS)
        return -1;
    conc_value(want, w, a, rr);
    if (memcmp(want, r->value, VLEN))
        return -1;
    return cs && r->offset != cs[w].bases[a] + rr ? -1 : 0;
}

static void *reader_main(void *arg)
{
    conc *c = arg;
    int64_t off = 0;
    for (;;) {
        bool done = atomic_load(c->writers_left) == 0;
        int64_t hw = eng_partition_high_watermark(c->p);
        if (off < hw && (off = read_range(c->p, off, hw, 32 * 1024, conc_intact, NULL)) < 0) {
            atomic_fetch_add(c->errors, 1);
            return NULL;
        }
        if (done)
            break;
    }
    if (off != WRITERS * APPENDS * RECS)
        atomic_fetch_add(c->errors, 1);
    return NULL;
}

static void test_concurrent_append_and_read(void **state)
{
    fixture *f = *state;
    f->cfg.v[ENG_CFG_SEGMENT_BYTES].i = 1048576; /* ~1.5 MB of data: rolls under readers */
    eng_partition *p = open_part(f, true, 0, NULL);
    _Atomic int writers_left = WRITERS, errors = 0;
    static conc cs[WRITERS + READERS];
    pthread_t th[WRITERS + READERS];
    for (int i = 0; i < WRITERS + READERS; i++) {
        cs[i] = (conc){.p = p, .w = i, .writers_left = &writers_left, .errors = &errors};
        assert_int_equal(
            pthread_create(&th[i], NULL, i < WRITERS ? writer_main : reader_main, &cs[i]), 0);
    }
    for (int i = 0; i < WRITERS + READERS; i++)
        pthread_join(th[i], NULL);
    assert_int_equal(atomic_load(&errors), 0);
    const int64_t total = WRITERS * APPENDS * RECS;
    assert_int_equal(eng_partition_log_end_offset(p), total);
    assert_int_equal(eng_partition_high_watermark(p), total);

    /* Every offset assigned exactly once: each of the `total` offsets holds
     * an intact record whose append was given base + r == that offset, so no
     * two appends overlap and every record is there exactly once. */
    assert_int_equal(read_range(p, 0, total, 1 << 20, conc_intact, cs), total);
    eng_partition_info info;
    eng_partition_info_get(p, &info);
    assert_true(info.segment_count > 1);
    assert_int_equal(eng_partition_close(p), 0);
    eng_partition_unref(p);
}

typedef struct roller {
    eng_partition *p;
    _Atomic int stop;
    _Atomic int errors;
} roller;

static void *lister_main(void *arg)
{
    roller *r = arg;
    while (!atomic_load(&r->stop)) {
        eng_segment_info *si;
        size_t n;
        if (eng_partition_segments(r->p, &si, &n) || n == 0)
            atomic_fetch_add(&r->errors, 1);
        else
            free(si);
        eng_partition_info info;
        eng_partition_info_get(r->p, &info);
    }
    return NULL;
}

/* Segment listings while the segment set changes under them. */
static void test_listing_during_rolls(void **state)
{
    fixture *f = *state;
    eng_partition *p = open_part(f, true, 0, NULL);
    roller r = {.p = p};
    pthread_t th[2];
    for (int i = 0; i < 2; i++)
        assert_int_equal(pthread_create(&th[i], NULL, lister_main, &r), 0);
    for (int i = 0; i < 150; i++) {
        append_ok(p, i, 1, T0 + i, 10);
        int64_t base;
        assert_int_equal(eng_partition_roll(p, &base), 0);
        assert_int_equal(base, i + 1);
    }
    atomic_store(&r.stop, 1);
    for (int i = 0; i < 2; i++)
        pthread_join(th[i], NULL);
    assert_int_equal(atomic_load(&r.errors), 0);
    assert_int_equal(read_and_check(p, 0, 10), 150);
    eng_partition_unref(p);
}

/* ---- refusals that change nothing --------------------------------------- */

static void expect_unchanged(eng_partition *p, fixture *f, int64_t leo, long long log_bytes)
{
    assert_int_equal(eng_partition_log_end_offset(p), leo);
    assert_int_equal(eng_partition_high_watermark(p), leo);
    assert_int_equal(file_size(f->pdir, 0, ".log"), log_bytes);
}

static void test_refusals_write_nothing(void **state)
{
    fixture *f = *state;
    f->cfg.v[ENG_CFG_MAX_MESSAGE_BYTES].i = 3000;
    eng_partition *p = open_part(f, true, 0, NULL);
    append_ok(p, 0, 10, T0, 250);
    long long size = file_size(f->pdir, 0, ".log");
    assert_int_equal(size, 2731);
    uint8_t buf[8192];
    eng_errdetail err = {0};

    /* expected_offset mismatch */
    size_t len = ts_build_batch(buf, sizeof buf, 10, 10, T0, 250);
    assert_int_equal(do_append(p, buf, len, 5, false, NULL, &err), ENG_EEXPECTED);
    assert_true(strlen(err.message) > 0);
    assert_int_equal(do_append(p, buf, len, 11, false, NULL, &err), ENG_EEXPECTED);
    expect_unchanged(p, f, 10, size);
    len = ts_build_batch(buf, sizeof buf, 10, 10, T0, 250);
    assert_int_equal(do_append(p, buf, len, 10, false, NULL, &err), 0);
    size = file_size(f->pdir, 0, ".log");

    /* a batch over max.message.bytes (3000): 12 x 267 + 61 = 3,265 bytes */
    len = ts_build_batch(buf, sizeof buf, 20, 12, T0, 250);
    assert_int_equal(len, 3265);
    memset(&err, 0, sizeof err);
    assert_int_equal(do_append(p, buf, len, -1, false, NULL, &err), ENG_ETOOLARGE);
    assert_true(err.has_bounds);
    assert_int_equal(err.hi, 3000);
    expect_unchanged(p, f, 20, size);

    /* a producer batch with a bad CRC, alone or after a good batch */
    len = ts_build_batch(buf, sizeof buf, 20, 3, T0, 100);
    buf[len - 5] ^= 0x01;
    assert_int_equal(do_append(p, buf, len, -1, true, NULL, &err), ENG_ECRC);
    expect_unchanged(p, f, 20, size);
    size_t l1 = ts_build_batch(buf, sizeof buf, 20, 3, T0, 100);
    size_t l2 = ts_build_batch(buf + l1, sizeof buf - l1, 23, 3, T0, 100);
    buf[l1 + 70] ^= 0x40;
    assert_int_equal(do_append(p, buf, l1 + l2, -1, true, NULL, &err), ENG_ECRC);
    expect_unchanged(p, f, 20, size);
    /* lastOffsetDelta that disagrees with the record count (CRC fixed up) */
    len = ts_build_batch(buf, sizeof buf, 20, 3, T0, 100);
    eng_put_be32(buf + 23, 5);
    eng_batch_update_crc(buf, len);
    assert_int_not_equal(do_append(p, buf, len, -1, true, NULL, &err), 0);
    expect_unchanged(p, f, 20, size);
    /* a truncated body */
    len = ts_build_batch(buf, sizeof buf, 20, 3, T0, 100);
    assert_int_equal(do_append(p, buf, len - 1, -1, true, NULL, &err), ENG_ECORRUPT);
    assert_int_equal(do_append(p, buf, 0, -1, true, NULL, &err), ENG_EINVAL);
    expect_unchanged(p, f, 20, size);
    /* a good producer batch still goes in */
    len = ts_build_batch(buf, sizeof buf, 20, 3, T0, 100);
    assert_int_equal(do_append(p, buf, len, -1, true, NULL, &err), 0);
    assert_int_equal(eng_partition_log_end_offset(p), 23);
    eng_partition_unref(p);
}

/* Out of descriptors, a roll fails cleanly: the append is refused with
 * -EMFILE, no file of the new segment stays, the dir stays online, and once
 * files can be opened again the append rolls. */
static void count_roll_errors(eng_log_level level, const char *line, void *ctx)
{
    (void)level;
    if (strstr(line, "cannot create segment"))
        (*(int *)ctx)++;
}

static void test_roll_out_of_descriptors(void **state)
{
    fixture *f = *state;
    f->cfg.v[ENG_CFG_SEGMENT_BYTES].i = 4000;
    _Atomic int offline = 0;
    eng_partition *p = open_watched(f, &offline);
    append_ok(p, 0, 10, T0, 250); /* 2,731 bytes: the next batch must roll */
    char before[2048], after[2048];
    ts_list_dir(f->pdir, before, sizeof before);

    uint8_t buf[8192];
    size_t len = ts_build_batch(buf, sizeof buf, 10, 10, T0, 250);
    eng_errdetail err = {0};
    /* Run out before each file a new segment opens, one more each time,
     * until the roll goes through. */
    static int logged; /* static: the sink may outlive a failed assertion */
    logged = 0;
    eng_logger_set_sink(count_roll_errors, &logged, ENG_LOG_INFO);
    long extra = 0;
    for (;; extra++) {
        struct rlimit saved;
        ts_fd_limit(extra, &saved);
        memset(&err, 0, sizeof err);
        int rc = do_append(p, buf, len, -1, true, NULL, &err);
        ts_fd_limit_restore(&saved);
        if (rc == 0)
            break;
        if (rc != -EMFILE || extra == 8)
            fail_msg("room for %ld files: %s (%s)", extra, eng_strerror(rc), err.message);
        assert_non_null(strstr(err.message, "rolling a segment"));
        ts_list_dir(f->pdir, after, sizeof after);
        assert_string_equal(after, before);
        assert_int_equal(atomic_load(&offline), 0);
        assert_int_equal(eng_partition_log_end_offset(p), 10);
    }
    eng_logger_set_sink(NULL, NULL, ENG_LOG_INFO);
    assert_true(extra >= 2); /* the .log and at least one index */
    assert_int_equal(logged, 1); /* every append tries again; the log says so once */
    assert_int_equal(eng_partition_log_end_offset(p), 20);
    assert_int_equal(file_size(f->pdir, 10, ".log"), 2731);
    assert_int_equal(read_and_check(p, 0, 250), 20);
    eng_partition_unref(p);
}

/* A roll asked for by the API fails the way an append's roll does: out of
 * descriptors it is refused and the dir stays online; with the partition's
 * directory gone the dir goes offline (it used to answer a bare ENOENT and
 * keep appending to files no longer in the directory). */
static void test_requested_roll_failures(void **state)
{
    fixture *f = *state;
    _Atomic int offline = 0;
    eng_partition *p = open_watched(f, &offline);
    append_ok(p, 0, 10, T0, 250);
    int64_t base = -1;
    struct rlimit saved;
    ts_fd_limit(0, &saved);
    int rc = eng_partition_roll(p, &base);
    ts_fd_limit_restore(&saved);
    assert_int_equal(rc, -EMFILE);
    assert_int_equal(atomic_load(&offline), 0);
    assert_int_equal(eng_partition_roll(p, &base), 0);
    assert_int_equal(base, 10);
    append_ok(p, 10, 10, T0, 250);

    ts_rmtree(f->pdir);
    assert_int_equal(eng_partition_roll(p, &base), ENG_EOFFLINE);
    assert_int_equal(atomic_load(&offline), 1);
    assert_int_equal(eng_partition_roll(p, &base), ENG_EOFFLINE); /* and stays refused */
    eng_partition_unref(p);
}

/* Out of memory for the new segment view, a roll is refused with nothing
 * changed: the active segment takes the next append.  The view was made
 * after the active segment was sealed, so the next append that did not
 * roll was refused (invalid argument) and took the dir offline. */
static void test_roll_out_of_memory_for_view(void **state)
{
    fixture *f = *state;
    _Atomic int offline = 0;
    eng_partition *p = open_watched(f, &offline);
    append_ok(p, 0, 10, T0, 250);
    char before[2048], after[2048];
    ts_list_dir(f->pdir, before, sizeof before);
    int64_t base = -1;
    eng_fault_set("roll.view=enomem");
    int rc = eng_partition_roll(p, &base);
    eng_fault_set(NULL);
    assert_int_equal(rc, -ENOMEM);
    assert_int_equal(atomic_load(&offline), 0);
    ts_list_dir(f->pdir, after, sizeof after);
    assert_string_equal(after, before);
    append_ok(p, 10, 10, T0, 250);
    assert_int_equal(eng_partition_roll(p, &base), 0);
    assert_int_equal(base, 20);
    append_ok(p, 20, 10, T0, 250);
    assert_int_equal(read_and_check(p, 0, 250), 30);
    assert_int_equal(atomic_load(&offline), 0);
    eng_partition_unref(p);
}

/* One 2,731-byte batch in a 4,000-byte segment, so that the next batch
 * (built into buf, *len bytes) must roll; that roll is refused by fault
 * with want, and the dir must stay online with no file added.  Returns the
 * partition, its dir's offline flag in *offline. */
static eng_partition *roll_refused(fixture *f, _Atomic int *offline, const char *fault, int want,
                                   uint8_t *buf, size_t cap, size_t *len)
{
    f->cfg.v[ENG_CFG_SEGMENT_BYTES].i = 4000;
    eng_partition *p = open_watched(f, offline);
    append_ok(p, 0, 10, T0, 250);
    char before[2048], after[2048];
    ts_list_dir(f->pdir, before, sizeof before);
    *len = ts_build_batch(buf, cap, 10, 10, T0, 250);
    eng_errdetail err = {0};
    eng_fault_set(fault);
    int rc = do_append(p, buf, *len, -1, true, NULL, &err);
    eng_fault_set(NULL);
    assert_int_equal(rc, want);
    assert_int_equal(atomic_load(offline), 0);
    ts_list_dir(f->pdir, after, sizeof after);
    assert_string_equal(after, before);
    return p;
}

/* Out of memory maps (vm.max_map_count reached: every segment maps its two
 * indexes), a roll fails as it does out of descriptors: the append is
 * refused, no file stays and the dir stays online.  It used to take the
 * whole log dir offline until a restart. */
static void test_roll_out_of_maps(void **state)
{
    fixture *f = *state;
    _Atomic int offline = 0;
    uint8_t buf[8192];
    size_t len;
    eng_partition *p = roll_refused(f, &offline, "index.map=enomem", -ENOMEM, buf, sizeof buf, &len);
    eng_errdetail err = {0};
    assert_int_equal(do_append(p, buf, len, -1, true, NULL, &err), 0);
    assert_int_equal(eng_partition_log_end_offset(p), 20);
    assert_int_equal(read_and_check(p, 0, 250), 20);
    eng_partition_unref(p);
}

/* A used-up quota (EDQUOT) is a full disk to the writer, and the API
 * answers it as one (507 disk_full): a refused append, or a roll refused
 * for its new segment's files, must leave the dir online as ENOSPC does.
 * Both took the whole log dir offline until a restart. */
static void test_quota_exceeded_stays_online(void **state)
{
    fixture *f = *state;
    _Atomic int offline = 0;
    uint8_t buf[8192];
    size_t len;
    eng_partition *p = roll_refused(f, &offline, "roll.create=edquot", -EDQUOT, buf, sizeof buf, &len);
    eng_errdetail err = {0};

    /* Half the batch is written when the quota runs out: it is cut off. */
    eng_fault_set("segment.append.partial=edquot");
    int rc = do_append(p, buf, len, -1, true, NULL, &err);
    eng_fault_set(NULL);
    assert_int_equal(rc, -EDQUOT);
    assert_int_equal(atomic_load(&offline), 0);
    assert_int_equal(eng_partition_log_end_offset(p), 10);
    assert_int_equal(file_size(f->pdir, 10, ".log"), 0);

    assert_int_equal(do_append(p, buf, len, -1, true, NULL, &err), 0);
    assert_int_equal(eng_partition_log_end_offset(p), 20);
    assert_int_equal(read_and_check(p, 0, 250), 20);
    eng_partition_unref(p);
}

static void test_compacted_null_key(void **state)
{
    fixture *f = *state;
    f->cfg.v[ENG_CFG_CLEANUP_POLICY].i = ENG_POLICY_COMPACT | ENG_POLICY_DELETE;
    eng_partition *p = open_part(f, true, 0, NULL);
    eng_record_spec recs[2] = {rec(T0, "a", "1"), rec(T0, NULL, "2")};
    uint8_t buf[256];
    size_t len = encode(buf, sizeof buf, recs, 2);
    eng_errdetail err = {0};
    /* Refused whether or not the bytes came from a client. */
    assert_int_equal(do_append(p, buf, len, -1, false, NULL, &err), ENG_ENULLKEY);
    assert_int_equal(do_append(p, buf, len, -1, true, NULL, &err), ENG_ENULLKEY);
    expect_unchanged(p, f, 0, 0);
    /* A tombstone (null value) with a key is fine. */
    recs[1] = rec(T0, "a", NULL);
    len = encode(buf, sizeof buf, recs, 2);
    assert_int_equal(do_append(p, buf, len, -1, true, NULL, &err), 0);
    assert_int_equal(eng_partition_log_end_offset(p), 2);
    eng_partition_unref(p);
}

static void test_timestamp_limits(void **state)
{
    fixture *f = *state;
    f->cfg.v[ENG_CFG_MESSAGE_TIMESTAMP_BEFORE_MAX_MS].i = 3600000;
    f->cfg.v[ENG_CFG_MESSAGE_TIMESTAMP_AFTER_MAX_MS].i = 60000;
    eng_partition *p = open_part(f, true, 0, NULL);
    uint8_t buf[4096];
    eng_errdetail err = {0};
    int64_t now = eng_now_ms();
    size_t len = ts_build_batch(buf, sizeof buf, 0, 2, now - 2 * 3600000, 10);
    assert_int_equal(do_append(p, buf, len, -1, false, NULL, &err), ENG_ETIMESTAMP);
    len = ts_build_batch(buf, sizeof buf, 0, 2, now + 600000, 10);
    assert_int_equal(do_append(p, buf, len, -1, true, NULL, &err), ENG_ETIMESTAMP);
    expect_unchanged(p, f, 0, 0);
    len = ts_build_batch(buf, sizeof buf, 0, 2, now - 1000, 10);
    assert_int_equal(do_append(p, buf, len, -1, true, NULL, &err), 0);
    eng_partition_unref(p);
}

static void test_log_append_time(void **state)
{
    fixture *f = *state;
    f->cfg.v[ENG_CFG_MESSAGE_TIMESTAMP_TYPE].i = ENG_TS_LOG_APPEND_TIME;
    eng_partition *p = open_part(f, true, 0, NULL);
    uint8_t buf[4096];
    size_t len = ts_build_batch(buf, sizeof buf, 0, 3, 1000, 10);
    int64_t before = eng_now_ms();
    eng_append_result res;
    assert_int_equal(do_append(p, buf, len, -1, true, &res, NULL), 0);
    int64_t after = eng_now_ms();
    assert_int_equal(res.timestamp_type, ENG_TS_LOG_APPEND_TIME);
    assert_true(res.log_append_time >= before && res.log_append_time <= after);

    eng_fetch ft;
    assert_int_equal(eng_partition_read(p, 0, 1 << 20, &ft, NULL), 0);
    eng_batch_header h;
    assert_int_equal(ft.len, len);
    assert_int_equal(eng_batch_validate(ft.data, ft.len, &h), 0); /* CRC recomputed */
    assert_true(h.attributes & ENG_ATTR_LOG_APPEND_TIME);
    assert_int_equal(h.max_timestamp, res.log_append_time);
    assert_int_equal(h.base_timestamp, 1000); /* untouched */
    eng_record_iter it;
    eng_record r;
    eng_record_iter_init(&it, &h, ft.data + ENG_BATCH_OVERHEAD, ft.len - ENG_BATCH_OVERHEAD);
    int n = 0;
    while (eng_record_iter_next(&it, &r) == 1) {
        assert_int_equal(r.timestamp, res.log_append_time);
        n++;
    }
    assert_int_equal(n, 3);
    eng_fetch_free(&ft);
    int64_t off, ts;
    assert_int_equal(eng_partition_max_timestamp(p, &off, &ts), 0);
    assert_int_equal(ts, res.log_append_time);
    eng_partition_unref(p);
}

/* ---- reads -------------------------------------------------------------- */

static void test_read_bounds(void **state)
{
    fixture *f = *state;
    eng_partition *p = open_part(f, true, 0, NULL);
    eng_fetch ft;
    eng_errdetail err = {0};
    /* Empty log: offset 0 is the high watermark, an empty fetch. */
    assert_int_equal(eng_partition_read(p, 0, 100, &ft, &err), 0);
    assert_int_equal(ft.len, 0);
    assert_int_equal(ft.next_offset, 0);
    for (int i = 0; i < 4; i++)
        append_ok(p, 10 * i, 10, T0 + i, 20);
    assert_int_equal(eng_partition_read(p, 41, 100, &ft, &err), ENG_EOFFSET);
    assert_true(err.has_bounds);
    assert_int_equal(err.lo, 0);
    assert_int_equal(err.hi, 40);
    assert_non_null(strstr(err.message, "41"));
    memset(&err, 0, sizeof err);
    assert_int_equal(eng_partition_read(p, -1, 100, &ft, &err), ENG_EOFFSET);
    assert_true(err.has_bounds);
    assert_int_equal(err.hi, 40);
    /* Exactly at the high watermark: no records, no error. */
    assert_int_equal(eng_partition_read(p, 40, 100, &ft, &err), 0);
    assert_int_equal(ft.len, 0);
    assert_null(ft.data);
    assert_int_equal(ft.next_offset, 40);
    assert_int_equal(ft.high_watermark, 40);
    eng_fetch_free(&ft);
    /* max_bytes is a soft limit: at least one whole batch comes back. */
    assert_int_equal(eng_partition_read(p, 15, 1, &ft, &err), 0);
    assert_int_equal(eng_be64(ft.data), 10);
    assert_int_equal(ft.next_offset, 20);
    eng_fetch_free(&ft);
    assert_int_equal(eng_partition_read(p, 15, 1 << 20, &ft, &err), 0);
    assert_int_equal(ft.next_offset, 40);
    eng_fetch_free(&ft);
    assert_int_equal(read_and_check(p, 0, 20), 40);
    assert_int_equal(read_and_check(p, 7, 20), 33);
    eng_partition_unref(p);
}

/* A sealed segment cut short behind the engine's back (the disk or a
 * person): a read that starts in the missing bytes fails with ENG_ECORRUPT
 * rather than answer an empty page that never advances (found by hand: a
 * JSON reader looped on next_offset 0, and a stream waited forever). */
static void test_read_of_file_cut_short(void **state)
{
    fixture *f = *state;
    eng_partition *p = open_part(f, true, 0, NULL);
    append_ok(p, 0, 10, T0, 20);
    append_ok(p, 10, 10, T0, 20);
    int64_t base;
    assert_int_equal(eng_partition_roll(p, &base), 0);
    assert_int_equal(base, 20);
    append_ok(p, 20, 10, T0, 20);
    char path[600];
    snprintf(path, sizeof path, "%s/%020d.log", f->pdir, 0);
    assert_int_equal(truncate(path, 100), 0);
    eng_fetch ft;
    eng_errdetail err = {0};
    assert_int_equal(eng_partition_read(p, 0, 1 << 20, &ft, &err), ENG_ECORRUPT);
    assert_int_equal(eng_partition_read(p, 12, 1 << 20, &ft, &err), ENG_ECORRUPT);
    assert_int_equal(read_and_check(p, 20, 20), 10); /* the next segment reads on */
    eng_partition_unref(p);
}

static void expect_ts_lookup(eng_partition *p, int64_t t, int64_t want_off, int64_t want_ts)
{
    int64_t off, ts;
    assert_int_equal(eng_partition_offset_for_timestamp(p, t, &off, &ts), 0);
    assert_int_equal(off, want_off);
    assert_int_equal(ts, want_ts);
}

static void test_offset_for_timestamp_and_max(void **state)
{
    fixture *f = *state;
    eng_partition *p = open_part(f, true, 0, NULL);
    int64_t off, ts;
    assert_int_equal(eng_partition_max_timestamp(p, &off, &ts), ENG_ENOTFOUND);
    assert_int_equal(eng_partition_offset_for_timestamp(p, 0, &off, &ts), ENG_ENOTFOUND);
    append_ok(p, 0, 10, 1000, 10);
    append_ok(p, 10, 10, 2000, 10);
    int64_t base;
    assert_int_equal(eng_partition_roll(p, &base), 0);
    append_ok(p, 20, 10, 3000, 10);
    /* A batch whose records are out of order: 5000, 7000, 6000. */
    eng_record_spec recs[3] = {rec(5000, "a", "x"), rec(7000, "b", "y"), rec(6000, "c", "z")};
    uint8_t buf[512];
    size_t len = encode(buf, sizeof buf, recs, 3);
    assert_int_equal(do_append(p, buf, len, -1, true, NULL, NULL), 0);

    expect_ts_lookup(p, 0, 0, 1000);
    expect_ts_lookup(p, 1500, 10, 2000);
    expect_ts_lookup(p, 2000, 10, 2000);
    expect_ts_lookup(p, 2001, 20, 3000); /* in the second segment */
    expect_ts_lookup(p, 6500, 31, 7000); /* not the batch's first record */
    assert_int_equal(eng_partition_offset_for_timestamp(p, 7001, &off, &ts), ENG_ENOTFOUND);

    assert_int_equal(eng_partition_max_timestamp(p, &off, &ts), 0);
    assert_int_equal(ts, 7000);
    assert_int_equal(off, 31);
    eng_partition_info info;
    eng_partition_info_get(p, &info);
    assert_int_equal(info.max_timestamp, 7000);
    assert_int_equal(info.first_timestamp, 1000);
    assert_int_equal(info.segment_count, 2);
    assert_int_equal(info.active_base_offset, 20);
    assert_int_equal(info.log_end_offset, 33);
    eng_partition_unref(p);
}

static int open_fds(void)
{
    long headroom, limit;
    assert_int_equal(eng_process_fd_headroom(&headroom, &limit), 0);
    return (int)(limit - headroom);
}

/* An old segment keeps its .log open and nothing else: its indexes close
 * their descriptors once they are on disk (after a roll and a flush), and
 * indexes mapped lazily after a restart never keep one. */
static void test_old_segments_hold_one_descriptor(void **state)
{
    fixture *f = *state;
    f->cfg.v[ENG_CFG_SEGMENT_BYTES].i = 4000;
    enum { SEGS = 30 };
    int before = open_fds();
    eng_partition *p = open_part(f, true, 0, NULL);
    for (int i = 0; i < SEGS; i++)
        append_ok(p, i * 10, 10, T0, 250); /* 2,731 bytes: one batch a segment */
    assert_int_equal(eng_partition_flush_upto(p, eng_partition_log_end_offset(p)), 0);
    int held = open_fds() - before;
    /* SEGS .log files, plus the active segment's two indexes */
    assert_in_range(held, SEGS, SEGS + 3);
    assert_int_equal(read_and_check(p, 0, 250), SEGS * 10);
    assert_int_equal(eng_partition_close(p), 0);
    eng_partition_unref(p);
    assert_int_equal(open_fds(), before);

    /* A close syncs every segment rolled since the last flush (the stop
     * drops pending flush-log jobs, and the recovery point it leaves claims
     * them): their indexes, synced, hold no descriptor. */
    p = open_part(f, true, SEGS * 10, NULL);
    for (int i = SEGS; i < 2 * SEGS; i++)
        append_ok(p, i * 10, 10, T0, 250);
    assert_in_range(open_fds() - before, 2 * SEGS, 2 * SEGS + 3 * SEGS + 3); /* unsynced */
    assert_int_equal(eng_partition_close(p), 0);
    held = open_fds() - before;
    /* All but segment 290's: active at the reopen, fully flushed before it
     * rolled, so the close's sync starts past it (the service's flush-log
     * job syncs and closes those too). */
    assert_int_equal(held, 2 * SEGS + 2);
    assert_int_equal(eng_partition_recovery_point(p), 2 * SEGS * 10);
    eng_partition_unref(p);
    assert_int_equal(open_fds(), before);

    p = open_part(f, true, 2 * SEGS * 10, NULL);
    assert_int_equal(read_and_check(p, 0, 250), 2 * SEGS * 10); /* maps every index */
    int64_t off, found_ts;
    assert_int_equal(eng_partition_offset_for_timestamp(p, T0, &off, &found_ts), 0);
    held = open_fds() - before;
    assert_in_range(held, 2 * SEGS, 2 * SEGS + 3);
    eng_partition_unref(p);
}

#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(test_kafka_figures),
        T(test_concurrent_append_and_read),
        T(test_listing_during_rolls),
        T(test_refusals_write_nothing),
        T(test_roll_out_of_descriptors),
        T(test_roll_out_of_maps),
        T(test_roll_out_of_memory_for_view),
        T(test_quota_exceeded_stays_online),
        T(test_old_segments_hold_one_descriptor),
        T(test_requested_roll_failures),
        T(test_compacted_null_key),
        T(test_timestamp_limits),
        T(test_log_append_time),
        T(test_read_bounds),
        T(test_read_of_file_cut_short),
        T(test_offset_for_timestamp_and_max),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
