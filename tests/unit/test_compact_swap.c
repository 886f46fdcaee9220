/*
 * test_compact_swap.c - one partition cleaned for real (kafka-format.md
 * §16.2 steps 2-4, DESIGN §3): what the swap leaves on disk, refusals and
 * dry runs, the cleanable range.  Building blocks are in test_compact.c.
 *
 *   - the swap: no .cleaned/.swap left, the old segments handed over as
 *     .deleted, groups merged by segment.bytes and named by their first
 *     base, valid indexes whose entries sit at batch starts, offset and
 *     timestamp lookups landing on the survivors, the group's last source
 *     mtime kept, a reload with full recovery truncating nothing;
 *   - a corrupt batch in a sealed segment (a length running past the
 *     segment, or broken record framing) fails the clean and changes
 *     nothing, instead of silently dropping what follows it;
 *   - a round during which compaction is turned off (cleanup.policy set to
 *     delete) swaps nothing in and answers ENG_ENOTCOMPACT, as Kafka aborts
 *     the cleaning when a topic stops being compacted;
 *   - refusals: ENG_ENOTCOMPACT on a delete-policy partition, ENG_EBUSY while
 *     another clean holds the partition (retention reports busy too); a dry
 *     run changes nothing on disk and predicts what the real run removes;
 *   - the cleanable range: dirty ratio, checkpoint reset, first uncleanable
 *     offset = active base or the first segment within min.compaction.lag.ms
 *     (nothing cleanable when that is at or below a mid-segment checkpoint),
 *     need_compaction_now with max.compaction.lag.ms.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "compact_util.h"
#include "eng_fault.h"
#include "eng_index.h"
#include "eng_offset_map.h"
#include "eng_retention.h"
#include "support.h"

#include <fcntl.h>
#include <stdatomic.h>
#include <sys/resource.h>
#include <unistd.h>

typedef cu_fixture fixture;

/* ---- (f) the swap, files and indexes ------------------------------------ */

/* Segment s (300 records, batches of 10): 5 "hot-%02d" keys (20 in all,
 * rewritten everywhere) and 5 unique "cold" keys a batch, 100-byte values,
 * record timestamps T0 + offset. */
static void write_hot_cold(eng_partition *p, int segments, char (*keys)[16], char (*vals)[112])
{
    int64_t off = eng_partition_log_end_offset(p);
    for (int s = 0; s < segments; s++) {
        for (int b = 0; b < 30; b++) {
            cu_kv recs[10];
            for (int i = 0; i < 10; i++, off++) {
                if (i % 2 == 0)
                    snprintf(keys[off], 16, "hot-%02d", (int)((off / 2) % 20));
                else
                    snprintf(keys[off], 16, "cold-%05lld", (long long)off);
                snprintf(vals[off], 112, "%0100lld", (long long)off * 7919);
                recs[i] = (cu_kv){keys[off], vals[off], CU_T0 + off};
            }
            cu_append(p, recs, 10, CU_T0);
        }
        cu_roll(p);
    }
}

static void test_swap_files_indexes(void **state)
{
    fixture *f = *state;
    enum { SEGS = 6, N = SEGS * 300 };
    f->cfg.v[ENG_CFG_SEGMENT_BYTES].i = 100 * 1024;
    f->cfg.v[ENG_CFG_INDEX_INTERVAL_BYTES].i = 256;
    char(*keys)[16] = calloc(N, 16);
    char(*vals)[112] = calloc(N, 112);
    eng_partition *p = cu_open(f->dir, &f->cfg, &f->trash, false, 0, NULL);
    write_hot_cold(p, SEGS, keys, vals);
    /* The survivors: each key's last record. */
    bool *live = calloc(N, sizeof *live);
    for (int o = 0; o < N; o++) {
        live[o] = true;
        for (int later = o + 1; later < N && live[o]; later++)
            if (!strcmp(keys[later], keys[o]))
                live[o] = false;
    }
    eng_segment_info *si;
    size_t nseg;
    assert_int_equal(eng_partition_segments(p, &si, &nseg), 0);
    assert_int_equal(nseg, SEGS + 1);
    int64_t last_src_mtime[3];
    for (size_t i = 0; i < SEGS; i++)
        assert_true(si[i].size_bytes > 35 * 1024 && si[i].size_bytes < 50 * 1024);
    free(si);
    for (int g = 0; g < 3; g++) {
        eng_segment *s;
        assert_int_equal(eng_partition_segment(p, 300 * (2 * g + 1), &s), 0);
        last_src_mtime[g] = eng_segment_mtime_ms(s);
        eng_segment_unref(s);
    }

    eng_clean_stats st;
    assert_int_equal(cu_clean(p, f->map, -1, CU_T0 + N, false, &st), 0);
    assert_int_equal(st.end_offset, N);
    assert_int_equal(st.segments_before, SEGS);
    assert_int_equal(st.segments_after, 3); /* two ~40 KB segments fit 100 KB */

    /* Files: the three groups under their first base, the old six .deleted. */
    assert_int_equal(cu_count_suffix(f->dir, ".cleaned"), 0);
    assert_int_equal(cu_count_suffix(f->dir, ".swap"), 0);
    assert_int_equal(cu_count_suffix(f->dir, ".log.deleted"), SEGS);
    assert_int_equal(cu_count_suffix(f->dir, ".index.deleted"), SEGS);
    assert_int_equal(cu_count_suffix(f->dir, ".timeindex.deleted"), SEGS);
    assert_int_equal(cu_count_suffix(f->dir, ".log"), 4);
    assert_int_equal(f->trash.n, SEGS);
    assert_int_equal(f->trash.not_deleted, 0);
    assert_int_equal(eng_partition_segments(p, &si, &nseg), 0);
    assert_int_equal(nseg, 4);
    for (int g = 0; g < 3; g++) {
        assert_int_equal(si[g].base_offset, 600 * g);
        assert_int_equal(si[g].next_offset, 600 * (g + 1));
    }
    assert_int_equal(si[3].base_offset, N);
    assert_true(si[3].active);
    free(si);

    /* Indexes: valid, every offset entry at a batch start keyed by its last
     * offset; mtime of the group's last source kept. */
    for (int g = 0; g < 3; g++) {
        eng_segment *s;
        assert_int_equal(eng_partition_segment(p, 600 * g, &s), 0);
        eng_index *oi = eng_segment_offset_index(s), *ti = eng_segment_time_index(s);
        assert_non_null(oi);
        assert_non_null(ti);
        assert_int_equal(eng_index_check(oi, eng_segment_size(s)), 0);
        assert_int_equal(eng_index_check(ti, eng_segment_size(s)), 0);
        assert_true(eng_index_entries(oi) > 5);
        eng_batch_dump *d;
        size_t nb, total;
        assert_int_equal(eng_partition_dump_batches(p, 600 * g, 0, 1000, &d, &nb, &total, NULL), 0);
        for (uint32_t e = 0; e < eng_index_entries(oi); e++) {
            int64_t eo;
            uint32_t pos;
            eng_offset_index_entry(oi, e, &eo, &pos);
            bool found = false;
            for (size_t k = 0; k < nb; k++)
                if (d[k].position == pos) {
                    found = true;
                    assert_int_equal(eng_batch_last_offset(&d[k].header), eo);
                }
            assert_true(found);
        }
        for (size_t k = 0; k < nb; k++)
            assert_true(d[k].valid);
        free(d);
        assert_int_equal(eng_segment_mtime_ms(s), last_src_mtime[g]);
        eng_segment_unref(s);
    }

    /* Lookups: by offset, every survivor; by time, the first survivor at or
     * after each timestamp (timestamps grow with offsets). */
    cu_recs rs;
    cu_read_ok(p, &rs);
    size_t k = 0;
    for (int o = 0; o < N; o++) {
        if (!live[o])
            continue;
        assert_true(k < rs.n);
        assert_int_equal(rs.v[k].off, o);
        assert_string_equal(rs.v[k].key, keys[o]);
        assert_string_equal(rs.v[k].val, vals[o]);
        assert_int_equal(rs.v[k].ts, CU_T0 + o);
        k++;
    }
    assert_int_equal(k, rs.n);
    int next_live = N;
    for (int o = N - 1; o >= 0; o--) {
        if (live[o])
            next_live = o;
        int64_t got, ts;
        assert_int_equal(eng_partition_offset_for_timestamp(p, CU_T0 + o, &got, &ts), 0);
        assert_int_equal(got, next_live);
        assert_int_equal(ts, CU_T0 + next_live);
        eng_fetch fe;
        assert_int_equal(eng_partition_read(p, o, 1, &fe, NULL), 0);
        eng_batch_header h;
        assert_int_equal(eng_batch_header_decode(fe.data, fe.len, &h), 0);
        assert_true(eng_batch_last_offset(&h) >= o);
        assert_true(h.base_offset <= next_live);
        eng_fetch_free(&fe);
    }
    cu_recs_free(&rs);

    /* Reloaded with full recovery, nothing is truncated and all reads back. */
    eng_partition_close(p);
    eng_partition_unref(p);
    cu_trash_empty(&f->trash);
    assert_int_equal(cu_count_suffix(f->dir, ".deleted"), 0);
    eng_load_stats ls;
    p = cu_open(f->dir, &f->cfg, &f->trash, false, 0, &ls);
    assert_int_equal(ls.bytes_truncated, 0);
    assert_int_equal(ls.segments, 4);
    cu_read_ok(p, &rs);
    k = 0;
    for (int o = 0; o < N; o++)
        if (live[o])
            assert_int_equal(rs.v[k++].off, o);
    assert_int_equal(k, rs.n);
    cu_recs_free(&rs);
    eng_partition_close(p);
    eng_partition_unref(p);
    free(live);
    free(keys);
    free(vals);
}

/* ---- a corrupt sealed segment --------------------------------------------- */

static void patch(const char *path, uint64_t pos, const uint8_t *bytes, size_t n, uint8_t *saved)
{
    int fd = open(path, O_RDWR);
    assert_true(fd >= 0);
    if (saved)
        assert_int_equal(pread(fd, saved, n, (off_t)pos), (ssize_t)n);
    assert_int_equal(pwrite(fd, bytes, n, (off_t)pos), (ssize_t)n);
    close(fd);
}

static void test_corrupt_sealed_segment(void **state)
{
    fixture *f = *state;
    enum { N = 2 * 300 };
    char(*keys)[16] = calloc(N, 16);
    char(*vals)[112] = calloc(N, 112);
    eng_partition *p = cu_open(f->dir, &f->cfg, &f->trash, false, 0, NULL);
    write_hot_cold(p, 2, keys, vals);
    eng_batch_dump *d;
    size_t nb, total;
    assert_int_equal(eng_partition_dump_batches(p, 0, 0, 100, &d, &nb, &total, NULL), 0);
    assert_int_equal(nb, 30);
    uint64_t pos = d[3].position;
    int32_t length = d[3].header.length;
    free(d);
    char log[700];
    snprintf(log, sizeof log, "%s/00000000000000000000.log", f->dir);
    char *before = cu_listing(f->dir);
    eng_clean_stats st;

    /* Batch 3's length runs a megabyte past the end of its segment. */
    uint8_t big[4], saved[4];
    uint32_t bad = (uint32_t)length + 1000000u;
    for (int i = 0; i < 4; i++)
        big[i] = (uint8_t)(bad >> (24 - 8 * i));
    patch(log, pos + 8, big, 4, saved);
    int rc = cu_clean(p, f->map, -1, CU_T0 + N, false, &st);
    assert_true(rc < 0);
    char *after = cu_listing(f->dir);
    assert_string_equal(before, after);
    free(after);
    assert_int_equal(f->trash.n, 0);
    patch(log, pos + 8, saved, 4, NULL);

    /* Batch 3's first record has a length of -1. */
    uint8_t minus_one = 0x01, saved1;
    patch(log, pos + ENG_BATCH_OVERHEAD, &minus_one, 1, &saved1);
    assert_int_equal(cu_clean(p, f->map, -1, CU_T0 + N, false, &st), ENG_ECORRUPT);
    after = cu_listing(f->dir);
    assert_string_equal(before, after);
    free(after);
    patch(log, pos + ENG_BATCH_OVERHEAD, &saved1, 1, NULL);
    free(before);

    /* Repaired, it cleans, and every cold record (never rewritten) is there. */
    assert_int_equal(cu_clean(p, f->map, -1, CU_T0 + N, false, &st), 0);
    cu_recs rs;
    cu_read_ok(p, &rs);
    size_t cold = 0;
    for (size_t i = 0; i < rs.n; i++)
        cold += !strncmp(rs.v[i].key, "cold-", 5);
    assert_int_equal(cold, N / 2);
    assert_int_equal(rs.n, N / 2 + 20);
    cu_recs_free(&rs);
    eng_partition_close(p);
    eng_partition_unref(p);
    free(keys);
    free(vals);
}

/* ---- (g) refusals, busy, dry runs ---------------------------------------- */

typedef struct slow_clean {
    eng_partition *p;
    eng_offset_map *map;
    int rc;
    _Atomic bool done;
} slow_clean;

static void *slow_clean_main(void *arg)
{
    slow_clean *sc = arg;
    eng_clean_opts o = {.map = sc->map, .now_ms = CU_T0 + 100000, .max_bytes_per_second = 600e3};
    eng_clean_stats st;
    /* The main thread's short dry runs may hold the partition for a moment. */
    while ((sc->rc = eng_partition_clean(sc->p, -1, &o, &st)) == ENG_EBUSY)
        usleep(100);
    atomic_store(&sc->done, true);
    return NULL;
}

static void test_refusals_busy_dry_run(void **state)
{
    fixture *f = *state;
    eng_clean_stats st;
    /* A delete-policy partition is not compacted. */
    eng_config del = cu_compact_config();
    del.v[ENG_CFG_CLEANUP_POLICY].i = ENG_POLICY_DELETE;
    char dir2[600];
    snprintf(dir2, sizeof dir2, "%s/del-0", f->tmp);
    eng_partition *q = cu_open(dir2, &del, NULL, false, 0, NULL);
    cu_kv one = {"a", "1", 0};
    cu_append(q, &one, 1, CU_T0);
    cu_roll(q);
    assert_int_equal(cu_clean(q, f->map, -1, CU_T0, false, &st), ENG_ENOTCOMPACT);
    eng_partition_close(q);
    eng_partition_unref(q);

    f->cfg.v[ENG_CFG_SEGMENT_BYTES].i = 100 * 1024;
    enum { N = 4 * 300 };
    char(*keys)[16] = calloc(N, 16);
    char(*vals)[112] = calloc(N, 112);
    eng_partition *p = cu_open(f->dir, &f->cfg, &f->trash, false, 0, NULL);
    write_hot_cold(p, 4, keys, vals);

    /* A dry run changes nothing on disk and reads the same. */
    char *before = cu_listing(f->dir);
    cu_recs r0, r1;
    cu_read_ok(p, &r0);
    eng_clean_stats dry;
    assert_int_equal(cu_clean(p, f->map, -1, CU_T0 + N, true, &dry), 0);
    assert_true(dry.dry_run);
    assert_int_equal(dry.end_offset, N);
    assert_int_equal(dry.segments_before, 4);
    assert_int_equal(dry.segments_after, 2);
    assert_true(dry.records_removed > 0);
    assert_true(dry.bytes_after < dry.bytes_before);
    char *after = cu_listing(f->dir);
    assert_string_equal(before, after);
    free(after);
    assert_int_equal(f->trash.n, 0);
    cu_read_ok(p, &r1);
    assert_int_equal(r0.n, r1.n);
    cu_recs_free(&r1);

    /* While one clean runs (throttled), another is refused, and retention
     * stands aside. */
    slow_clean sc = {.p = p, .map = f->map};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, slow_clean_main, &sc), 0);
    eng_offset_map *m2;
    assert_int_equal(eng_offset_map_new(1 << 16, 0.9, &m2), 0);
    bool saw_busy = false, saw_ret_busy = false;
    while (!atomic_load(&sc.done) && !(saw_busy && saw_ret_busy)) {
        int rc = cu_clean(p, m2, -1, CU_T0 + N, true, &st);
        if (rc == ENG_EBUSY)
            saw_busy = true;
        else
            assert_int_equal(rc, 0);
        eng_retention_report rep;
        if (eng_partition_retention(p, CU_T0 + N, true, &rep) == 0 && rep.busy)
            saw_ret_busy = true;
        eng_retention_report_free(&rep);
        usleep(2000);
    }
    pthread_join(t, NULL);
    eng_offset_map_free(m2);
    assert_int_equal(sc.rc, 0);
    assert_true(saw_busy);
    assert_true(saw_ret_busy);
    /* The real run did what the dry run predicted. */
    cu_read_ok(p, &r1);
    assert_int_equal(r0.n - r1.n, dry.records_removed);
    cu_recs_free(&r1);
    cu_recs_free(&r0);
    eng_segment_info *si;
    size_t nseg;
    assert_int_equal(eng_partition_segments(p, &si, &nseg), 0);
    assert_int_equal(nseg, 3);
    assert_int_equal(si[0].size_bytes + si[1].size_bytes, dry.bytes_after);
    free(si);
    free(before);
    /* Nothing dirty left: a clean is a no-op that reports the same end. */
    assert_int_equal(cu_clean(p, f->map, N, CU_T0 + N, false, &st), 0);
    assert_int_equal(st.end_offset, N);
    assert_int_equal(st.segments_before, 0);
    eng_partition_close(p);
    eng_partition_unref(p);
    free(keys);
    free(vals);
}

/* max.compaction.lag.ms looks at every dirty non-active segment, past the
 * min.compaction.lag.ms cut-off too, as Kafka's maxCompactionDelay does: an
 * overdue segment after a young one forces a clean of what is cleanable
 * (it was only looked for below the cut-off). */
static void test_max_lag_past_min_lag_cutoff(void **state)
{
    fixture *f = *state;
    f->cfg.v[ENG_CFG_MIN_COMPACTION_LAG_MS].i = 60000;
    f->cfg.v[ENG_CFG_MAX_COMPACTION_LAG_MS].i = 120000;
    eng_partition *p = cu_open(f->dir, &f->cfg, &f->trash, false, 0, NULL);
    cu_kv recs[1] = {{"k", "v", 0}};
    int64_t now = CU_T0 + 7200000;
    cu_append(p, recs, 1, now - 90000); /* A: old enough to clean, not overdue */
    cu_roll(p);
    cu_append(p, recs, 1, now); /* B: too young, the cut-off */
    cu_roll(p);
    cu_append(p, recs, 1, now - 3600000); /* C: overdue, past the cut-off */
    cu_roll(p);
    cu_append(p, recs, 1, now); /* active */
    eng_clean_range r;
    eng_partition_clean_range(p, -1, now, &r);
    assert_int_equal(r.first_uncleanable, 1);
    assert_true(r.cleanable_bytes > 0);
    assert_true(r.need_compaction_now);
    eng_partition_close(p);
    eng_partition_unref(p);
}

/* ---- (i) the cleanable range ------------------------------------------------ */

static void test_clean_range(void **state)
{
    fixture *f = *state;
    eng_partition *p = cu_open(f->dir, &f->cfg, &f->trash, false, 0, NULL);
    char keys[10][16];
    cu_kv recs[10];
    for (int i = 0; i < 10; i++) {
        snprintf(keys[i], sizeof keys[i], "a%d", i);
        recs[i] = (cu_kv){keys[i], "value", 0};
    }
    cu_append(p, recs, 10, CU_T0); /* A: [0,10) at T0 */
    cu_roll(p);
    cu_append(p, recs, 10, CU_T0 + 10000); /* B: [10,20) at T0+10s */
    cu_roll(p);
    cu_append(p, recs, 5, CU_T0 + 20000); /* active C: [20,25) */
    eng_segment_info *si;
    size_t n;
    assert_int_equal(eng_partition_segments(p, &si, &n), 0);
    assert_int_equal(n, 3);
    uint64_t sa = si[0].size_bytes, sb = si[1].size_bytes;
    free(si);
    int64_t now = CU_T0 + 20000;
    eng_clean_range r;

    eng_partition_clean_range(p, -1, now, &r);
    assert_int_equal(r.first_dirty, 0);
    assert_int_equal(r.first_uncleanable, 20);
    assert_int_equal(r.clean_bytes, 0);
    assert_int_equal(r.cleanable_bytes, sa + sb);
    assert_true(r.dirty_ratio == 1.0);
    assert_false(r.need_compaction_now);
    eng_partition_clean_range(p, 10, now, &r);
    assert_int_equal(r.first_dirty, 10);
    assert_int_equal(r.clean_bytes, sa);
    assert_int_equal(r.cleanable_bytes, sb);
    assert_true(r.dirty_ratio > (double)sb / (double)(sa + sb) - 1e-9 &&
                r.dirty_ratio < (double)sb / (double)(sa + sb) + 1e-9);
    eng_partition_clean_range(p, 999, now, &r); /* past the end: reset */
    assert_int_equal(r.first_dirty, 0);
    eng_partition_clean_range(p, 20, now, &r);
    assert_int_equal(r.first_uncleanable, 20);
    assert_int_equal(r.cleanable_bytes, 0);
    assert_int_equal(r.clean_bytes, sa + sb);
    assert_true(r.dirty_ratio == 0.0);

    /* min.compaction.lag.ms: B (largest ts T0+10s > now - 15s) is too young. */
    f->cfg.v[ENG_CFG_MIN_COMPACTION_LAG_MS].i = 15000;
    eng_partition_set_config(p, &f->cfg);
    eng_partition_clean_range(p, -1, now, &r);
    assert_int_equal(r.first_uncleanable, 10);
    assert_int_equal(r.cleanable_bytes, sa);
    /* ...and a checkpoint inside B leaves nothing cleanable (Kafka's
     * logSegments(min(dirty, uncleanable), uncleanable) is empty), so the
     * cleaner cannot keep choosing a partition it cannot clean. */
    eng_partition_clean_range(p, 15, now, &r);
    assert_int_equal(r.first_dirty, 15);
    assert_int_equal(r.first_uncleanable, 10);
    assert_int_equal(r.cleanable_bytes, 0);
    assert_true(r.dirty_ratio == 0.0);
    eng_clean_stats st;
    assert_int_equal(cu_clean(p, f->map, 15, now, false, &st), 0);
    assert_int_equal(st.end_offset, 15);
    assert_int_equal(st.segments_before, 0);
    /* Both segments young: nothing cleanable at all. */
    f->cfg.v[ENG_CFG_MIN_COMPACTION_LAG_MS].i = 25000;
    eng_partition_set_config(p, &f->cfg);
    eng_partition_clean_range(p, -1, now, &r);
    assert_int_equal(r.first_uncleanable, 0);
    assert_int_equal(r.cleanable_bytes, 0);
    assert_int_equal(cu_clean(p, f->map, -1, now, false, &st), 0);
    assert_int_equal(st.end_offset, 0);
    assert_int_equal(st.segments_before, 0);
    f->cfg.v[ENG_CFG_MIN_COMPACTION_LAG_MS].i = 5000;
    eng_partition_set_config(p, &f->cfg);
    eng_partition_clean_range(p, -1, now, &r);
    assert_int_equal(r.first_uncleanable, 20);

    /* max.compaction.lag.ms: A's first batch (T0) is older than now - 15 s. */
    f->cfg.v[ENG_CFG_MIN_COMPACTION_LAG_MS].i = 0;
    f->cfg.v[ENG_CFG_MAX_COMPACTION_LAG_MS].i = 15000;
    eng_partition_set_config(p, &f->cfg);
    eng_partition_clean_range(p, -1, now, &r);
    assert_true(r.need_compaction_now);
    eng_partition_clean_range(p, 10, now, &r); /* only B is dirty: T0+10s */
    assert_false(r.need_compaction_now);
    eng_partition_clean_range(p, 10, now + 10000, &r);
    assert_true(r.need_compaction_now);
    f->cfg.v[ENG_CFG_MAX_COMPACTION_LAG_MS].i = 25000;
    eng_partition_set_config(p, &f->cfg);
    eng_partition_clean_range(p, -1, now, &r);
    assert_false(r.need_compaction_now);

    /* After a clean the range is clean. */
    assert_int_equal(cu_clean(p, f->map, -1, now, false, &st), 0);
    assert_int_equal(st.end_offset, 20);
    eng_partition_clean_range(p, st.end_offset, now, &r);
    assert_int_equal(r.cleanable_bytes, 0);
    assert_true(r.dirty_ratio == 0.0);
    assert_true(r.clean_bytes > 0 && r.clean_bytes < sa + sb);
    eng_partition_close(p);
    eng_partition_unref(p);
}

/* A hook: the topic stops being compacted as the round begins (it has
 * read its config already). */
static void policy_to_delete(void *ctx)
{
    eng_partition *p = ctx;
    eng_fault_hook(NULL, NULL, NULL);
    eng_config cfg;
    eng_partition_get_config(p, &cfg);
    cfg.v[ENG_CFG_CLEANUP_POLICY].i = ENG_POLICY_DELETE;
    eng_partition_set_config(p, &cfg);
}

/* Turned off while a round runs, compaction must not remove records after
 * all: the round swapped its cleaned segment in regardless, deleting
 * superseded values of a topic that is no longer compacted. */
static void test_policy_turned_off_during_round(void **state)
{
    fixture *f = *state;
    eng_partition *p = cu_open(f->dir, &f->cfg, &f->trash, false, 0, NULL);
    cu_kv a1 = {"a", "1", 0}, a2 = {"a", "2", 0}, b1 = {"b", "1", 0};
    cu_append(p, &a1, 1, CU_T0);
    cu_append(p, &a2, 1, CU_T0);
    cu_append(p, &b1, 1, CU_T0);
    cu_roll(p);
    char *before = cu_listing(f->dir);
    eng_clean_stats st;
    eng_fault_hook("compact.round_start", policy_to_delete, p);
    assert_int_equal(cu_clean(p, f->map, -1, CU_T0, false, &st), ENG_ENOTCOMPACT);
    eng_fault_hook(NULL, NULL, NULL);
    cu_recs got;
    cu_read_ok(p, &got);
    assert_int_equal(got.n, 3);
    cu_recs_free(&got);
    char *after = cu_listing(f->dir);
    assert_string_equal(before, after);
    free(before);
    free(after);

    /* compacted again: the next round cleans */
    eng_partition_set_config(p, &f->cfg);
    assert_int_equal(cu_clean(p, f->map, -1, CU_T0, false, &st), 0);
    assert_int_equal(st.records_removed, 1);
    eng_partition_close(p);
    eng_partition_unref(p);
}

/* Descriptors used up: the limit drops to what is open, and the holes
 * below it (a descriptor is the lowest free number, and an index closed
 * after its sync leaves one) are filled, so the next open() fails with
 * EMFILE. */
typedef struct fd_squeeze {
    struct rlimit saved;
    int fds[64];
    int n;
} fd_squeeze;

static void no_more_descriptors(void *ctx)
{
    fd_squeeze *q = ctx;
    ts_fd_limit(0, &q->saved);
    for (int fd; q->n < 64 && (fd = open("/dev/null", O_RDONLY | O_CLOEXEC)) >= 0;)
        q->fds[q->n++] = fd;
}

static void descriptors_back(fd_squeeze *q)
{
    while (q->n > 0)
        close(q->fds[--q->n]);
    ts_fd_limit_restore(&q->saved);
}

/* a=1, a=2, b=1 in a sealed segment, the partition reporting to *offline. */
static eng_partition *open_abab(fixture *f, _Atomic int *offline)
{
    eng_partition_params pp = {.topic = "kv", .id = 0, .dir = f->dir, .config = f->cfg,
                               .clean_shutdown = false, .recovery_point = 0,
                               .log_start_offset = -1, .dir_offline = offline,
                               .events = {.on_delete = cu_on_delete, .ctx = &f->trash}};
    eng_partition *p = NULL;
    eng_load_stats ls;
    assert_int_equal(eng_partition_open(&pp, &p, &ls), 0);
    cu_kv a1 = {"a", "1", 0}, a2 = {"a", "2", 0}, b1 = {"b", "1", 0};
    cu_append(p, &a1, 1, CU_T0);
    cu_append(p, &a2, 1, CU_T0);
    cu_append(p, &b1, 1, CU_T0);
    cu_roll(p);
    return p;
}

/* After a refused clean: the dir online, its files as listed in `before`
 * (freed here; no .cleaned, no .swap), all three records there, and the
 * next clean removes the superseded one.  Closes p. */
static void unchanged_then_cleaned(fixture *f, eng_partition *p, char *before,
                                   _Atomic int *offline)
{
    assert_int_equal(atomic_load(offline), 0);
    char *after = cu_listing(f->dir);
    assert_string_equal(before, after);
    free(before);
    free(after);
    cu_recs got;
    cu_read_ok(p, &got);
    assert_int_equal(got.n, 3);
    cu_recs_free(&got);
    eng_clean_stats st;
    assert_int_equal(cu_clean(p, f->map, -1, CU_T0, false, &st), 0);
    assert_int_equal(st.records_removed, 1);
    assert_int_equal(atomic_load(offline), 0);
    eng_partition_close(p);
    eng_partition_unref(p);
}

/* A swap that cannot open the partition directory to sync it (the process
 * is out of descriptors) has changed nothing the log reads, so the clean
 * fails with EMFILE, the cleaned segment goes, and the dir stays online;
 * the next round cleans.  The directory was opened only after the cleaned
 * segment was renamed .swap, and the failure took the log dir offline
 * until a restart. */
static void test_swap_out_of_descriptors_stays_online(void **state)
{
    fixture *f = *state;
    _Atomic int offline = 0;
    eng_partition *p = open_abab(f, &offline);
    char *before = cu_listing(f->dir);
    eng_clean_stats st;
    fd_squeeze q = {.n = 0};
    getrlimit(RLIMIT_NOFILE, &q.saved);
    eng_fault_hook("compact.before_swap", no_more_descriptors, &q);
    int rc = cu_clean(p, f->map, -1, CU_T0, false, &st);
    eng_fault_hook(NULL, NULL, NULL);
    descriptors_back(&q);
    assert_int_equal(rc, -EMFILE);
    unchanged_then_cleaned(f, p, before, &offline);
}

/* The swap's first rename (the cleaned segment's files to .swap) refused
 * for want of room, before it (the fault point) or partway through its
 * files (rename(2) says ENOSPC or EDQUOT where the directory needs a new
 * block, after the .log moved): nothing the log reads has changed, so the
 * clean is abandoned with its files, whatever name they got, and the dir
 * stays online; the next round cleans.  It used to go offline. */
static void test_first_rename_out_of_room_stays_online(void **state)
{
    fixture *f = *state;
    static const char *const faults[] = {"compact.before_swap=enospc",
                                         "compact.before_swap=edquot",
                                         "segment.rename=enospc@1", "segment.rename=edquot@2",
                                         "segment.rename=enospc@3"};
    static const int codes[] = {-ENOSPC, -EDQUOT, -ENOSPC, -EDQUOT, -ENOSPC};
    for (size_t i = 0; i < sizeof faults / sizeof faults[0]; i++) {
        _Atomic int offline = 0;
        eng_partition *p = open_abab(f, &offline);
        char *before = cu_listing(f->dir);
        eng_clean_stats st;
        eng_fault_set(faults[i]);
        int rc = cu_clean(p, f->map, -1, CU_T0, false, &st);
        eng_fault_set(NULL);
        assert_int_equal(rc, codes[i]);
        if (atomic_load(&offline))
            fail_msg("%s took the log dir offline", faults[i]);
        unchanged_then_cleaned(f, p, before, &offline);
        cu_trash_empty(&f->trash);
        ts_rmtree(f->dir);
    }
}

/* A real I/O error there still takes the dir offline: the disk, not a
 * shortage, and startup sorts out what the swap left. */
static void test_first_rename_eio_goes_offline(void **state)
{
    fixture *f = *state;
    static const char *const faults[] = {"compact.before_swap=eio", "segment.rename=eio@2"};
    for (size_t i = 0; i < sizeof faults / sizeof faults[0]; i++) {
        _Atomic int offline = 0;
        eng_partition *p = open_abab(f, &offline);
        eng_clean_stats st;
        eng_fault_set(faults[i]);
        int rc = cu_clean(p, f->map, -1, CU_T0, false, &st);
        eng_fault_set(NULL);
        assert_int_equal(rc, -EIO);
        if (!atomic_load(&offline))
            fail_msg("%s left the log dir online", faults[i]);
        eng_partition_close(p);
        eng_partition_unref(p);
        cu_trash_empty(&f->trash);
        ts_rmtree(f->dir);
    }
}

/* Out of memory for the new segment set once the files are swapped: disk
 * and memory disagree, so the dir goes offline (the clean returned ENOMEM
 * and left memory on the old segments, whose files it had renamed).  A
 * restart loads the cleaned log. */
static void test_view_out_of_memory_after_swap_goes_offline(void **state)
{
    fixture *f = *state;
    _Atomic int offline = 0;
    eng_partition *p = open_abab(f, &offline);
    eng_clean_stats st;
    eng_fault_set("compact.view=enomem");
    int rc = cu_clean(p, f->map, -1, CU_T0, false, &st);
    eng_fault_set(NULL);
    assert_int_equal(rc, -ENOMEM);
    assert_int_equal(atomic_load(&offline), 1);
    eng_partition_close(p);
    eng_partition_unref(p);
    cu_trash_empty(&f->trash);

    eng_partition_params pp = {.topic = "kv", .id = 0, .dir = f->dir, .config = f->cfg,
                               .clean_shutdown = false, .recovery_point = 0,
                               .log_start_offset = -1};
    eng_load_stats ls;
    assert_int_equal(eng_partition_open(&pp, &p, &ls), 0);
    cu_recs got;
    cu_read_ok(p, &got);
    assert_int_equal(got.n, 2); /* a=2, b=1: the clean's result */
    cu_recs_free(&got);
    eng_partition_close(p);
    eng_partition_unref(p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_swap_files_indexes, cu_setup, cu_teardown),
        cmocka_unit_test_setup_teardown(test_corrupt_sealed_segment, cu_setup, cu_teardown),
        cmocka_unit_test_setup_teardown(test_refusals_busy_dry_run, cu_setup, cu_teardown),
        cmocka_unit_test_setup_teardown(test_policy_turned_off_during_round, cu_setup, cu_teardown),
        cmocka_unit_test_setup_teardown(test_swap_out_of_descriptors_stays_online, cu_setup,
                                        cu_teardown),
        cmocka_unit_test_setup_teardown(test_first_rename_out_of_room_stays_online, cu_setup,
                                        cu_teardown),
        cmocka_unit_test_setup_teardown(test_first_rename_eio_goes_offline, cu_setup,
                                        cu_teardown),
        cmocka_unit_test_setup_teardown(test_view_out_of_memory_after_swap_goes_offline, cu_setup,
                                        cu_teardown),
        cmocka_unit_test_setup_teardown(test_clean_range, cu_setup, cu_teardown),
        cmocka_unit_test_setup_teardown(test_max_lag_past_min_lag_cutoff, cu_setup, cu_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
