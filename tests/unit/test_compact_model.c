/*
 * test_compact_model.c - the log cleaner against a model (kafka-format.md
 * §6, §16; DESIGN §3), over many rounds and under concurrent readers.
 *
 *   - model-based: four fixed seeds, 600 random operations each over 300 keys
 *     (batches of puts and tombstones, explicit and size rolls, cleans with
 *     a large or a tiny offset map, close/reopen clean or with full
 *     recovery, time jumps).  The model knows, for every offset written, its
 *     key, value, segment and the first clean that processed it, so after
 *     every clean (and reopen) the whole log read from the start must be
 *     exactly the model's survivors.  The properties asked of a compacted
 *     log are also checked on their own: every live key has its latest value
 *     at its original offset, offsets strictly increase, the cleaned range
 *     holds each key at most once and only at its last offset there, nothing
 *     at or past the checkpoint is ever removed, and a tombstone survives at
 *     least delete.retention.ms after the first clean that could see it; at
 *     the end, two cleans past the horizon leave no tombstone;
 *   - a dedupe buffer with room for 16 keys: many rounds, each ending before
 *     the first uncleanable offset until the last, with the same records as
 *     one round with a large buffer;
 *   - two reader threads reading the whole log in a loop while the main
 *     thread appends, rolls and cleans (old segments unlinked at once):
 *     never an error, never a live key missing (an empty read below the high
 *     watermark skips to the next offset it names: see cu_empty_reads).
 *
 * Data dirs go to /dev/shm when it is writable: thousands of rolls and
 * cleans mean thousands of fsyncs, which is not what these cases test.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "compact_util.h"
#include "eng_offset_map.h"
#include "support.h"

#include <inttypes.h>
#include <stdatomic.h>
#include <unistd.h>

#define NKEYS 300
#define DRM 2000 /* delete.retention.ms of the model topic */

typedef struct fixture {
    char *tmp;
    char dir[512];
} fixture;

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    if (!f || !(f->tmp = ts_fast_tmpdir()))
        return -1;
    snprintf(f->dir, sizeof f->dir, "%s/kv-0", f->tmp);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    ts_rmtree(f->tmp);
    free(f->tmp);
    free(f);
    return 0;
}

static uint64_t rnd(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

/* ---- (d) the model ------------------------------------------------------- */

/* Everything written, by offset. */
typedef struct entry {
    int key;          /* 0..NKEYS-1 */
    int ver;          /* value "k<key>-v<ver>"; -1 = tombstone */
    int64_t seg_base; /* segment it was appended to */
    int64_t horizon;  /* first processing time + DRM; INT64_MAX before */
    bool present;
} entry;

typedef struct model {
    entry *e;
    int64_t n, cap;
    int64_t now;
    int64_t ckpt; /* the cleaner's first dirty offset (-1 before any clean) */
    int next_ver;
} model;

static void key_name(char *buf, size_t len, int key)
{
    snprintf(buf, len, "key-%03d", key);
}

static void value_name(char *buf, size_t len, int key, int ver)
{
    snprintf(buf, len, "k%03d-v%06d", key, ver);
}

static void model_append(model *m, eng_partition *p, uint64_t *seed, bool tombstones)
{
    int n = 1 + (int)(rnd(seed) % 6);
    char keys[6][16], vals[6][24];
    cu_kv recs[6];
    int kid[6], ver[6];
    for (int i = 0; i < n; i++) {
        kid[i] = rnd(seed) % 2 ? (int)(rnd(seed) % 30) : (int)(rnd(seed) % NKEYS);
        ver[i] = tombstones && rnd(seed) % 100 < 12 ? -1 : m->next_ver++;
        key_name(keys[i], sizeof keys[i], kid[i]);
        value_name(vals[i], sizeof vals[i], kid[i], ver[i]);
        recs[i] = (cu_kv){keys[i], ver[i] < 0 ? NULL : vals[i], 0};
    }
    int64_t base = cu_append(p, recs, (size_t)n, m->now);
    assert_int_equal(base, m->n);
    eng_partition_info info;
    eng_partition_info_get(p, &info);
    if (m->n + n > m->cap) {
        m->cap = (m->n + n) * 2;
        m->e = realloc(m->e, (size_t)m->cap * sizeof *m->e);
        assert_non_null(m->e);
    }
    for (int i = 0; i < n; i++)
        m->e[m->n++] = (entry){.key = kid[i], .ver = ver[i], .seg_base = info.active_base_offset,
                               .horizon = INT64_MAX, .present = true};
}

/* last[k] = last offset of key k below `end`, or -1. */
static void last_writes(const model *m, int64_t end, int64_t *last)
{
    for (int k = 0; k < NKEYS; k++)
        last[k] = -1;
    for (int64_t o = 0; o < end && o < m->n; o++)
        last[m->e[o].key] = o;
}

/* What a clean that processed every segment below `end` at m->now does. */
static void model_clean(model *m, int64_t end)
{
    int64_t *last = malloc(NKEYS * sizeof *last);
    last_writes(m, end, last);
    for (int64_t o = 0; o < m->n; o++) {
        entry *e = &m->e[o];
        if (!e->present || e->seg_base >= end)
            continue;
        if (o < end && last[e->key] > o) {
            e->present = false; /* superseded inside the mapped range */
        } else if (e->ver < 0) {
            if (e->horizon == INT64_MAX)
                e->horizon = m->now + DRM; /* first clean of its batch */
            else if (o < end && m->now >= e->horizon)
                e->present = false;
        }
    }
    free(last);
}

/* The log must be exactly the model's survivors, and hold the properties. */
static void model_check(const model *m, eng_partition *p, const char *when)
{
    cu_recs rs;
    cu_read_ok(p, &rs);
    char kb[16], vb[24];
    size_t i = 0;
    for (int64_t o = 0; o < m->n; o++) {
        const entry *e = &m->e[o];
        if (!e->present)
            continue;
        if (i >= rs.n || rs.v[i].off != o)
            fail_msg("%s: expected offset %" PRId64 " (key %d ver %d), found %lld", when, o, e->key,
                     e->ver, i < rs.n ? (long long)rs.v[i].off : -1LL);
        key_name(kb, sizeof kb, e->key);
        value_name(vb, sizeof vb, e->key, e->ver);
        assert_string_equal(rs.v[i].key, kb);
        assert_true(cu_streq(rs.v[i].val, e->ver < 0 ? NULL : vb));
        /* A tombstone's batch carries the horizon of its first clean. */
        if (e->ver < 0)
            assert_int_equal(rs.v[i].horizon, e->horizon == INT64_MAX ? -1 : e->horizon);
        i++;
    }
    if (i != rs.n)
        fail_msg("%s: %zu records read, model has %zu (extra at offset %lld)", when, rs.n, i,
                 (long long)rs.v[i].off);

    /* The same, as the properties of a compacted log. */
    int64_t end = m->ckpt < 0 ? 0 : m->ckpt;
    int64_t *seen = malloc(NKEYS * sizeof *seen), *last_clean = malloc(NKEYS * sizeof *seen),
            *last_all = malloc(NKEYS * sizeof *seen);
    last_writes(m, end, last_clean);
    last_writes(m, m->n, last_all);
    for (int k = 0; k < NKEYS; k++)
        seen[k] = -1;
    for (size_t j = 0; j < rs.n; j++) {
        int k = atoi(rs.v[j].key + 4);
        if (rs.v[j].off < end) {
            assert_int_equal(seen[k], -1); /* once in the cleaned range */
            assert_int_equal(rs.v[j].off, last_clean[k]);
        }
        seen[k] = rs.v[j].off;
    }
    for (int k = 0; k < NKEYS; k++) {
        int64_t l = last_all[k];
        if (l >= 0 && m->e[l].ver >= 0)
            assert_int_equal(seen[k], l); /* every live key, latest value, same offset */
    }
    for (int64_t o = end, j = 0; o < m->n; o++) { /* nothing past the checkpoint goes */
        while ((size_t)j < rs.n && rs.v[j].off < o)
            j++;
        assert_true((size_t)j < rs.n && rs.v[j].off == o);
    }
    for (int64_t o = 0; o < end; o++) { /* tombstones live until their horizon */
        const entry *e = &m->e[o];
        if (e->ver < 0 && last_clean[e->key] == o && e->horizon != INT64_MAX &&
            m->now < e->horizon)
            assert_true(e->present);
    }
    free(seen);
    free(last_clean);
    free(last_all);
    cu_recs_free(&rs);
}

static void run_model(fixture *f, uint64_t seed, size_t map_bytes)
{
    eng_config cfg = cu_compact_config();
    cfg.v[ENG_CFG_DELETE_RETENTION_MS].i = DRM;
    cfg.v[ENG_CFG_SEGMENT_BYTES].i = 16 * 1024;
    cfg.v[ENG_CFG_INDEX_INTERVAL_BYTES].i = 128;
    eng_offset_map *map;
    assert_int_equal(eng_offset_map_new(map_bytes, 0.9, &map), 0);
    model m = {.now = CU_T0, .ckpt = -1};
    eng_partition *p = cu_open(f->dir, &cfg, NULL, false, 0, NULL);
    int cleans = 0, reopens = 0, rounds_partial = 0;
    char when[64];
    for (int op = 0; op < 600; op++) {
        m.now += (int64_t)(rnd(&seed) % 50);
        unsigned r = (unsigned)(rnd(&seed) % 100);
        snprintf(when, sizeof when, "seed %" PRIu64 " op %d", seed, op);
        if (r < 60) {
            model_append(&m, p, &seed, true);
        } else if (r < 70) {
            cu_roll(p);
        } else if (r < 86) {
            eng_clean_stats st;
            assert_int_equal(cu_clean(p, map, m.ckpt, m.now, false, &st), 0);
            assert_true(st.end_offset >= (m.ckpt < 0 ? 0 : m.ckpt));
            if (st.segments_before > 0)
                model_clean(&m, st.end_offset);
            rounds_partial += st.end_offset < st.first_uncleanable;
            m.ckpt = st.end_offset;
            cleans++;
            model_check(&m, p, when);
        } else if (r < 90) {
            bool clean = rnd(&seed) % 2;
            int64_t leo = eng_partition_log_end_offset(p);
            assert_int_equal(eng_partition_close(p), 0);
            eng_partition_unref(p);
            eng_load_stats ls;
            p = cu_open(f->dir, &cfg, NULL, clean, clean ? leo : 0, &ls);
            assert_int_equal(ls.bytes_truncated, 0);
            assert_int_equal(eng_partition_log_end_offset(p), leo);
            reopens++;
            model_check(&m, p, when);
        } else {
            m.now += DRM / 3;
        }
    }
    /* Past every horizon, twice (the first clean may set some): no tombstone
     * is left below the checkpoint. */
    for (int pass = 0; pass < 2; pass++) {
        m.now += DRM + 1;
        model_append(&m, p, &seed, false);
        cu_roll(p);
        eng_clean_stats st;
        do {
            assert_int_equal(cu_clean(p, map, m.ckpt, m.now, false, &st), 0);
            if (st.segments_before > 0)
                model_clean(&m, st.end_offset);
            m.ckpt = st.end_offset;
        } while (st.end_offset < st.first_uncleanable);
        model_check(&m, p, "final");
    }
    cu_recs rs;
    cu_read_ok(p, &rs);
    for (size_t j = 0; j < rs.n; j++)
        assert_true(rs.v[j].off >= m.ckpt || rs.v[j].val != NULL);
    cu_recs_free(&rs);
    assert_true(cleans > 50);
    assert_true(reopens > 5);
    if (map_bytes < 4096)
        assert_true(rounds_partial > 5);
    eng_partition_close(p);
    eng_partition_unref(p);
    eng_offset_map_free(map);
    free(m.e);
}

static void test_model_seed1(void **state)
{
    run_model(*state, 0x9e3779b97f4a7c15ULL, 1 << 20);
}

static void test_model_seed2(void **state)
{
    run_model(*state, 12345, 1 << 20);
}

static void test_model_seed3(void **state)
{
    run_model(*state, 2718281828ULL, 1 << 16);
}

/* Room for 12 keys out of 300: many cleans end inside the range. */
static void test_model_small_map(void **state)
{
    run_model(*state, 31415926ULL, 14 * 24);
}

/* ---- (e) a tiny dedupe buffer ------------------------------------------- */

static void fill_same(eng_partition *a, eng_partition *b)
{
    uint64_t seed = 77;
    char keys[10][16], vals[10][24];
    for (int batch = 0; batch < 100; batch++) {
        cu_kv recs[10];
        for (int i = 0; i < 10; i++) {
            int k = (int)(rnd(&seed) % 200);
            key_name(keys[i], sizeof keys[i], k);
            value_name(vals[i], sizeof vals[i], k, batch * 10 + i);
            recs[i] = (cu_kv){keys[i], rnd(&seed) % 10 == 0 ? NULL : vals[i], 0};
        }
        cu_append(a, recs, 10, CU_T0 + batch);
        cu_append(b, recs, 10, CU_T0 + batch);
        if (batch % 12 == 11) {
            cu_roll(a);
            cu_roll(b);
        }
    }
    cu_roll(a);
    cu_roll(b);
}

static void test_tiny_dedupe_buffer(void **state)
{
    fixture *f = *state;
    eng_config cfg = cu_compact_config();
    char dir2[600];
    snprintf(dir2, sizeof dir2, "%s/big-0", f->tmp);
    eng_partition *a = cu_open(f->dir, &cfg, NULL, false, 0, NULL);
    eng_partition *b = cu_open(dir2, &cfg, NULL, false, 0, NULL);
    fill_same(a, b);
    eng_offset_map *tiny, *big;
    assert_int_equal(eng_offset_map_new(18 * 24, 0.9, &tiny), 0);
    assert_int_equal(eng_offset_map_max_entries(tiny), 16);
    assert_int_equal(eng_offset_map_new(1 << 20, 0.9, &big), 0);
    int64_t now = CU_T0 + 100000, ckpt = -1;
    eng_clean_stats st;
    int rounds = 0;
    do {
        assert_int_equal(cu_clean(a, tiny, ckpt, now, false, &st), 0);
        assert_true(st.end_offset > (ckpt < 0 ? 0 : ckpt)); /* progress */
        assert_true(st.map_entries <= 16);
        assert_true(st.end_offset <= st.first_uncleanable);
        ckpt = st.end_offset;
        rounds++;
        assert_true(rounds < 1000);
    } while (st.end_offset < st.first_uncleanable);
    assert_int_equal(ckpt, 1000);
    assert_true(rounds >= 5);
    eng_clean_stats one;
    assert_int_equal(cu_clean(b, big, -1, now, false, &one), 0);
    assert_int_equal(one.end_offset, 1000);
    assert_int_equal(one.end_offset, one.first_uncleanable);
    cu_recs ra, rb;
    cu_read_ok(a, &ra);
    cu_read_ok(b, &rb);
    assert_int_equal(ra.n, rb.n);
    assert_true(ra.n <= 200 && ra.n > 100);
    for (size_t i = 0; i < ra.n; i++) {
        assert_int_equal(ra.v[i].off, rb.v[i].off);
        assert_string_equal(ra.v[i].key, rb.v[i].key);
        assert_true(cu_streq(ra.v[i].val, rb.v[i].val));
    }
    cu_recs_free(&ra);
    cu_recs_free(&rb);
    eng_offset_map_free(tiny);
    eng_offset_map_free(big);
    eng_partition_close(a);
    eng_partition_unref(a);
    eng_partition_close(b);
    eng_partition_unref(b);
}

/* ---- (h) readers while cleans swap segments --------------------------------- */

#define LIVE 40

typedef struct race {
    eng_partition *p;
    _Atomic bool stop;
    _Atomic int passes;
    _Atomic int failures;
    char why[256];
} race;

static void *reader_main(void *arg)
{
    race *r = arg;
    while (!atomic_load(&r->stop)) {
        cu_recs rs;
        int rc = cu_read_all(r->p, &rs);
        bool have[LIVE] = {false};
        for (size_t i = 0; !rc && i < rs.n; i++)
            if (!strncmp(rs.v[i].key, "live-", 5) && rs.v[i].val)
                have[atoi(rs.v[i].key + 5)] = true;
        for (int k = 0; !rc && k < LIVE; k++)
            if (!have[k] && atomic_fetch_add(&r->failures, 1) == 0)
                snprintf(r->why, sizeof r->why, "live-%02d missing from a pass of %zu records", k, rs.n);
        if (rc && atomic_fetch_add(&r->failures, 1) == 0)
            snprintf(r->why, sizeof r->why, "read failed after %zu records: %s", rs.n,
                     eng_strerror(rc));
        cu_recs_free(&rs);
        atomic_fetch_add(&r->passes, 1);
    }
    return NULL;
}

static void test_readers_during_cleans(void **state)
{
    fixture *f = *state;
    eng_config cfg = cu_compact_config();
    cfg.v[ENG_CFG_DELETE_RETENTION_MS].i = 100;
    cfg.v[ENG_CFG_INDEX_INTERVAL_BYTES].i = 256;
    eng_partition *p = cu_open(f->dir, &cfg, NULL, false, 0, NULL);
    char keys[12][24], vals[12][24];
    cu_kv recs[12];
    for (int k = 0; k < LIVE; k++) {
        snprintf(keys[0], sizeof keys[0], "live-%02d", k);
        cu_kv one = {keys[0], "initial", 0};
        cu_append(p, &one, 1, CU_T0);
    }
    cu_roll(p);
    race r = {.p = p};
    pthread_t t[2];
    for (int i = 0; i < 2; i++)
        assert_int_equal(pthread_create(&t[i], NULL, reader_main, &r), 0);
    eng_offset_map *map;
    assert_int_equal(eng_offset_map_new(1 << 16, 0.9, &map), 0);
    uint64_t seed = 4242;
    int64_t now = CU_T0, ckpt = -1;
    int iter = 0;
    for (; iter < 3000 && (iter < 80 || atomic_load(&r.passes) < 40); iter++) {
        for (int i = 0; i < 10; i++) {
            int k = (int)(rnd(&seed) % LIVE);
            snprintf(keys[i], sizeof keys[i], "live-%02d", k);
            snprintf(vals[i], sizeof vals[i], "v%d", iter);
            recs[i] = (cu_kv){keys[i], vals[i], 0};
        }
        snprintf(keys[10], sizeof keys[10], "tmp-%d", iter % 7);
        recs[10] = (cu_kv){keys[10], "short-lived", 0};
        recs[11] = (cu_kv){keys[10], NULL, 0};
        cu_append(p, recs, 12, now);
        cu_roll(p);
        now += 50;
        eng_clean_stats st;
        assert_int_equal(cu_clean(p, map, ckpt, now, false, &st), 0);
        ckpt = st.end_offset;
    }
    atomic_store(&r.stop, true);
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    if (atomic_load(&r.failures))
        fail_msg("%d failed passes; first: %s", atomic_load(&r.failures), r.why);
    assert_true(atomic_load(&r.passes) >= 40);
    printf("# %d reader passes, %d iterations, %d empty pages below the high watermark skipped\n",
           atomic_load(&r.passes), iter, atomic_load(&cu_empty_reads));
    /* Compaction kept up: about one record per key is left. */
    eng_partition_info info;
    eng_partition_info_get(p, &info);
    cu_recs rs;
    cu_read_ok(p, &rs);
    assert_true(rs.n < LIVE + 7 * 2 + 12 + 1);
    cu_recs_free(&rs);
    eng_offset_map_free(map);
    eng_partition_close(p);
    eng_partition_unref(p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_model_seed1, setup, teardown),
        cmocka_unit_test_setup_teardown(test_model_seed2, setup, teardown),
        cmocka_unit_test_setup_teardown(test_model_seed3, setup, teardown),
        cmocka_unit_test_setup_teardown(test_model_small_map, setup, teardown),
        cmocka_unit_test_setup_teardown(test_tiny_dedupe_buffer, setup, teardown),
        cmocka_unit_test_setup_teardown(test_readers_during_cleans, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
