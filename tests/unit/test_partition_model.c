/*
 * test_partition_model.c - one partition driven through the engine API by a
 * seeded PRNG and checked against an in-memory model of what Kafka's log
 * layer promises (kafka-format.md §13-§17, DESIGN §3).
 *
 * Operations: appends of 1-20 records (random keys, some null, values,
 * headers, explicit timestamps in order, equal, out of order and far in the
 * past) through eng_partition_append and eng_partition_append_readonly;
 * rolls; retention passes with retention.bytes / retention.ms chosen per
 * pass and a `now` near the explicit timestamps; delete-records to a random
 * offset; on the compacted variant, cleans; a clean close and reopen, and a
 * reopen after a crash (no close, no clean-shutdown marker).
 *
 * After every operation: log start offset, log end offset, high watermark;
 * a read from a random offset returns exactly the model's records from
 * there (offset, key, value, headers, timestamp); reads below the log start
 * or past the high watermark fail; the first offset with timestamp >= T
 * among live records (offset order: the time index's max-so-far entries
 * only choose where the scan starts, kafka-format.md §9.2); the largest
 * timestamp and its first offset; the segment listing's base offsets
 * increase, each segment's next offset is the next one's base, and the
 * sizes add up to the partition's.
 *
 * The seed is printed; PARTITION_MODEL_SEED=<n> runs that seed alone,
 * PARTITION_MODEL_OPS=<n> changes the number of operations, and
 * PARTITION_MODEL_FULL=1 reads the whole log after every operation (a
 * discrepancy shows where it begins).
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "partition_fixture.h"
#include "compact_util.h"
#include "eng_compress.h"
#include "eng_retention.h"

#include <inttypes.h>
#include <unistd.h>

#define NKEYS 40
#define SEG_BYTES 6144
#define DRM 3000 /* delete.retention.ms of the compacted variant */
#define DAY_MS 86400000LL

static uint64_t rnd(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static int64_t rndn(uint64_t *s, int64_t n)
{
    return n > 0 ? (int64_t)(rnd(s) % (uint64_t)n) : 0;
}

/* One record ever appended, by offset.  Value bytes and header values are
 * derived from the offset, so only their shape is kept. */
typedef struct mrec {
    int64_t ts;
    int key;      /* -1: null key */
    int vlen;     /* -1: null value (a tombstone) */
    int nh;       /* headers: "h0" = "o<offset>", "h1" = null */
    int64_t seg_base;
    int64_t horizon; /* tombstone's delete horizon, INT64_MAX before its first clean */
    bool present;    /* not compacted away */
} mrec;

typedef struct model {
    mrec *r;
    int64_t n, cap; /* n = log end offset */
    int64_t lso;
    int64_t cur_ts; /* the "present" the timestamps move around */
    int64_t ckpt;   /* cleaner checkpoint, -1 before any clean */
    bool compact;
} model;

typedef struct run {
    fixture *f;
    eng_partition *p;
    model m;
    uint64_t seed, seed0; /* the PRNG's state, and the seed it started from */
    int op;
    eng_offset_map *map;
    bool lso_lost; /* the next open has no log-start-offset checkpoint */
    int appends, rolls, retentions, deleted_segs, deletes, cleans, reopens, crashes, ts_hits;
} run;

static void key_name(char *b, size_t n, int key)
{
    snprintf(b, n, "key-%02d", key);
}

static void value_bytes(uint8_t *v, int len, int64_t off)
{
    for (int i = 0; i < len; i++)
        v[i] = (uint8_t)('a' + (off * 7 + i) % 26);
}

/* partition_fixture's setup, on tmpfs (ts_fast_tmpdir). */
static int setup_fast(void **state)
{
    if (setup(state))
        return -1;
    fixture *f = *state;
    char *t = ts_fast_tmpdir();
    if (!t)
        return -1;
    ts_rmtree(f->dir);
    free(f->dir);
    f->dir = t;
    snprintf(f->pdir, sizeof f->pdir, "%s/orders-0", f->dir);
    return 0;
}

static eng_partition *open_model(run *r, bool clean, int64_t rp)
{
    eng_partition_params pp = {.topic = "orders", .id = 0, .dir = r->f->pdir, .config = r->f->cfg,
                               .clean_shutdown = clean, .recovery_point = rp,
                               .log_start_offset = r->lso_lost ? -1 : r->m.lso};
    r->lso_lost = false;
    eng_partition *p = NULL;
    eng_load_stats st = {0};
    int rc = eng_partition_open(&pp, &p, &st);
    if (rc)
        fail_msg("seed %" PRIu64 " op %d: open: %s", r->seed0, r->op, eng_strerror(rc));
    if (st.bytes_truncated || st.segments_deleted)
        fail_msg("seed %" PRIu64 " op %d: reopen truncated %llu bytes, deleted %u segments",
                 r->seed0, r->op, (unsigned long long)st.bytes_truncated, st.segments_deleted);
    return p;
}

/* ---- operations ------------------------------------------------------------ */

static int64_t pick_ts(run *r)
{
    model *m = &r->m;
    if (rndn(&r->seed, 60) == 0)
        return -1; /* NO_TIMESTAMP: in no time index, and no segment's largest */
    switch (rndn(&r->seed, 10)) {
    case 0: case 1: case 2: case 3: case 4:
        return m->cur_ts += rndn(&r->seed, 2000);
    case 5: case 6:
        return m->cur_ts; /* equal */
    case 7: case 8:
        return m->cur_ts - rndn(&r->seed, 5000); /* out of order */
    default:
        return m->cur_ts - 30 * DAY_MS - rndn(&r->seed, DAY_MS); /* far in the past */
    }
}

/* Now and then another compression.type (the engine recompresses what it
 * stores) or message.timestamp.type (LogAppendTime: the records read back
 * with the time the append reports). */
static void maybe_switch_codec(run *r)
{
    static const int64_t codecs[][2] = {
        {ENG_COMPRESSION_PRODUCER, ENG_CODEC_NONE}, {ENG_COMPRESSION_UNCOMPRESSED, ENG_CODEC_NONE},
        {ENG_COMPRESSION_GZIP, ENG_CODEC_GZIP},     {ENG_COMPRESSION_SNAPPY, ENG_CODEC_SNAPPY},
        {ENG_COMPRESSION_LZ4, ENG_CODEC_LZ4},       {ENG_COMPRESSION_ZSTD, ENG_CODEC_ZSTD}};
    if (rndn(&r->seed, 25))
        return;
    eng_config c;
    eng_partition_get_config(r->p, &c);
    size_t i = (size_t)rndn(&r->seed, 6);
    if (eng_codec_supported((int)codecs[i][1]))
        c.v[ENG_CFG_COMPRESSION_TYPE].i = codecs[i][0];
    c.v[ENG_CFG_MESSAGE_TIMESTAMP_TYPE].i =
        rndn(&r->seed, 4) ? ENG_TS_CREATE_TIME : ENG_TS_LOG_APPEND_TIME;
    eng_partition_set_config(r->p, &c);
    r->f->cfg = c; /* what a reopen is given */
}

static void op_append(run *r)
{
    model *m = &r->m;
    maybe_switch_codec(r);
    int n = 1 + (int)rndn(&r->seed, 20);
    eng_record_spec specs[20];
    eng_record_header hdrs[20][2];
    char keys[20][16], hv[20][32];
    uint8_t vals[20][100];
    mrec add[20];
    bool null_key = false;
    int64_t base = m->n;
    int64_t ts_mode_same = rndn(&r->seed, 4) == 0 ? pick_ts(r) : -1;
    for (int i = 0; i < n; i++) {
        mrec *e = &add[i];
        int64_t off = base + i;
        *e = (mrec){.ts = ts_mode_same >= 0 ? ts_mode_same : pick_ts(r),
                    .key = rndn(&r->seed, 10) == 0 && !m->compact ? -1
                                                                  : (int)rndn(&r->seed, NKEYS),
                    .vlen = rndn(&r->seed, 10) == 0 ? -1 : (int)rndn(&r->seed, 100),
                    .nh = (int)rndn(&r->seed, 3), .horizon = INT64_MAX, .present = true};
        /* A compacted topic refuses a null key: now and then, one. */
        if (m->compact && rndn(&r->seed, 150) == 0) {
            e->key = -1;
            null_key = true;
        }
        if (e->key >= 0)
            key_name(keys[i], sizeof keys[i], e->key);
        if (e->vlen > 0)
            value_bytes(vals[i], e->vlen, off);
        snprintf(hv[i], sizeof hv[i], "o%" PRId64, off);
        hdrs[i][0] = (eng_record_header){(const uint8_t *)"h0", 2, (const uint8_t *)hv[i],
                                         (int32_t)strlen(hv[i])};
        hdrs[i][1] = (eng_record_header){(const uint8_t *)"h1", 2, NULL, -1};
        specs[i] = (eng_record_spec){.timestamp = e->ts,
                                     .key = e->key >= 0 ? (const uint8_t *)keys[i] : NULL,
                                     .key_len = e->key >= 0 ? (int32_t)strlen(keys[i]) : -1,
                                     .value = e->vlen >= 0 ? vals[i] : NULL,
                                     .value_len = e->vlen, .headers = hdrs[i],
                                     .header_count = (uint32_t)e->nh};
    }
    uint8_t buf[8192];
    size_t len = encode(buf, sizeof buf, specs, (size_t)n);
    assert_true(len > 0);
    /* Now and then a batch compressed as a client sends it. */
    int codec = 1 + (int)rndn(&r->seed, 4);
    if (rndn(&r->seed, 4) == 0 && eng_codec_supported(codec)) {
        eng_batch_header h;
        eng_buf scratch = {0}, out = {0};
        assert_int_equal(eng_batch_header_decode(buf, len, &h), 0);
        assert_int_equal(eng_batch_recode(buf, &h, codec, ENG_CODEC_DEFAULT_LEVEL, &scratch, &out),
                         0);
        assert_true(out.len <= sizeof buf);
        memcpy(buf, out.data, out.len);
        len = out.len;
        eng_buf_free(&scratch);
        eng_buf_free(&out);
    }
    eng_append_opts o = {.expected_offset = rndn(&r->seed, 2) ? base : -1,
                         .producer_batches = rndn(&r->seed, 2)};
    eng_append_result res;
    eng_errdetail err = {0};
    bool ro = rndn(&r->seed, 2);
    int rc = ro ? eng_partition_append_readonly(r->p, buf, len, &o, &res, &err)
                : eng_partition_append(r->p, buf, len, &o, &res, &err);
    if (null_key) {
        if (rc != ENG_ENULLKEY)
            fail_msg("seed %" PRIu64 " op %d: a null key on a compacted topic: %s", r->seed0,
                     r->op, eng_strerror(rc));
        return;
    }
    if (rc)
        fail_msg("seed %" PRIu64 " op %d: append%s of %d records: %s (%s)", r->seed0, r->op,
                 ro ? "_readonly" : "", n, eng_strerror(rc), err.message);
    assert_int_equal(res.base_offset, base);
    assert_int_equal(res.last_offset, base + n - 1);
    assert_int_equal(res.record_count, n);
    eng_partition_info info;
    eng_partition_info_get(r->p, &info);
    if (m->n + n > m->cap) {
        m->cap = (m->n + n) * 2;
        m->r = realloc(m->r, (size_t)m->cap * sizeof *m->r);
        assert_non_null(m->r);
    }
    for (int i = 0; i < n; i++) {
        add[i].seg_base = info.active_base_offset;
        if (res.timestamp_type == ENG_TS_LOG_APPEND_TIME)
            add[i].ts = res.log_append_time;
        m->r[m->n++] = add[i];
    }
    r->appends++;
}

typedef struct seglist {
    eng_segment_info *v;
    size_t n;
} seglist;

static void segs_get(run *r, seglist *s)
{
    assert_int_equal(eng_partition_segments(r->p, &s->v, &s->n), 0);
    assert_true(s->n > 0);
}

/* Largest record timestamp in [from, to), -1 if none. */
static int64_t model_max_ts(const model *m, int64_t from, int64_t to)
{
    int64_t t = -1;
    for (int64_t o = from; o < to; o++)
        if (m->r[o].present && m->r[o].ts > t)
            t = m->r[o].ts;
    return t;
}

/* kafka-format.md §15 on the model: how many of the listed segments go. */
static size_t model_retention(const model *m, const seglist *s, const eng_config *c, int64_t now,
                              const char **rule)
{
    size_t k = 0, n = s->n;
    int64_t hw = m->n;
#define UPPER(i) ((i) + 1 < n ? s->v[(i) + 1].base_offset : m->n)
#define DELETABLE(i) (UPPER(i) <= hw && !((i) + 1 == n && s->v[i].size_bytes == 0))
    while (k + 1 < n && s->v[k + 1].base_offset <= m->lso && DELETABLE(k))
        rule[k++] = "log_start_offset";
    if (!(c->v[ENG_CFG_CLEANUP_POLICY].i & ENG_POLICY_DELETE))
        return k;
    int64_t rb = c->v[ENG_CFG_RETENTION_BYTES].i, rms = c->v[ENG_CFG_RETENTION_MS].i;
    if (rb >= 0) {
        int64_t size = 0;
        for (size_t i = k; i < n; i++)
            size += (int64_t)s->v[i].size_bytes;
        if (size >= rb) {
            int64_t diff = size - rb;
            while (k < n && DELETABLE(k) && diff - (int64_t)s->v[k].size_bytes >= 0) {
                diff -= (int64_t)s->v[k].size_bytes;
                rule[k++] = "retention.bytes";
            }
        }
    }
    /* A segment without a timestamp goes by its .log's mtime: the real
     * clock, well after the `now` of these passes. */
    int64_t mx;
    if (rms >= 0)
        while (k < n && DELETABLE(k) && (mx = model_max_ts(m, s->v[k].base_offset, UPPER(k))) >= 0 &&
               now - mx > rms)
            rule[k++] = "retention.ms";
#undef DELETABLE
#undef UPPER
    return k;
}

static void op_retention(run *r)
{
    model *m = &r->m;
    eng_config c;
    eng_partition_get_config(r->p, &c);
    seglist s;
    segs_get(r, &s);
    int64_t size = 0;
    for (size_t i = 0; i < s.n; i++)
        size += (int64_t)s.v[i].size_bytes;
    c.v[ENG_CFG_RETENTION_BYTES].i = rndn(&r->seed, 3) ? -1 : rndn(&r->seed, size + size / 4 + 1);
    c.v[ENG_CFG_RETENTION_MS].i = rndn(&r->seed, 2) ? -1 : rndn(&r->seed, 40000);
    eng_partition_set_config(r->p, &c);
    int64_t now = m->cur_ts + rndn(&r->seed, 5000);
    const char **rule = calloc(s.n, sizeof *rule);
    assert_non_null(rule);
    size_t want = model_retention(m, &s, &c, now, rule);
    eng_retention_report rep;
    assert_int_equal(eng_partition_retention(r->p, now, false, &rep), 0);
    if (rep.n != want)
        fail_msg("seed %" PRIu64 " op %d: retention (bytes %" PRId64 ", ms %" PRId64
                 ", now %" PRId64 ") deleted %zu of %zu segments, the model %zu",
                 r->seed0, r->op, c.v[ENG_CFG_RETENTION_BYTES].i, c.v[ENG_CFG_RETENTION_MS].i,
                 now, rep.n, s.n, want);
    for (size_t i = 0; i < want; i++) {
        assert_int_equal(rep.segments[i].base_offset, s.v[i].base_offset);
        assert_string_equal(rep.segments[i].rule, rule[i]);
    }
    free(rule);
    int64_t lso = want == s.n ? m->n : s.v[want].base_offset;
    if (lso > m->lso)
        m->lso = lso;
    assert_int_equal(rep.log_start_offset_after, m->lso);
    assert_int_equal(rep.rolled, want == s.n);
    eng_retention_report_free(&rep);
    free(s.v);
    r->retentions++;
    r->deleted_segs += (int)want;
}

static void op_delete_records(run *r)
{
    model *m = &r->m;
    int64_t before = rndn(&r->seed, 8) == 0 ? -1 : m->lso - 3 + rndn(&r->seed, m->n - m->lso + 6);
    if (before < -1)
        before = 0;
    int64_t lso = -7;
    eng_errdetail err = {0};
    int rc = eng_partition_delete_records(r->p, before, &lso, &err);
    if (before > m->n) {
        assert_int_equal(rc, ENG_EOFFSET);
        return;
    }
    if (rc)
        fail_msg("seed %" PRIu64 " op %d: delete-records before %" PRId64 ": %s", r->seed0, r->op,
                 before, eng_strerror(rc));
    int64_t to = before < 0 ? m->n : before;
    if (to > m->lso)
        m->lso = to;
    assert_int_equal(lso, m->lso);
    r->deletes++;
}

/* What a clean of the segments below `end` does at `now` (kafka-format.md
 * §16.2, as test_compact_model.c models it). */
static void model_clean(model *m, int64_t end, int64_t now)
{
    int64_t last[NKEYS];
    for (int k = 0; k < NKEYS; k++)
        last[k] = -1;
    for (int64_t o = 0; o < end && o < m->n; o++)
        last[m->r[o].key] = o;
    for (int64_t o = 0; o < m->n; o++) {
        mrec *e = &m->r[o];
        if (!e->present || e->seg_base >= end)
            continue;
        if (o < end && last[e->key] > o) {
            e->present = false;
        } else if (e->vlen < 0) {
            if (e->horizon == INT64_MAX)
                e->horizon = now + DRM;
            else if (o < end && now >= e->horizon)
                e->present = false;
        }
    }
}

static void op_clean(run *r)
{
    model *m = &r->m;
    int64_t now = m->cur_ts + rndn(&r->seed, 3 * DRM);
    eng_clean_stats st;
    int rc = cu_clean(r->p, r->map, m->ckpt, now, false, &st);
    if (rc)
        fail_msg("seed %" PRIu64 " op %d: clean: %s", r->seed0, r->op, eng_strerror(rc));
    if (st.segments_before > 0)
        model_clean(m, st.end_offset, now);
    m->ckpt = st.end_offset;
    r->cleans++;
}

static void op_reopen(run *r)
{
    int64_t leo = r->m.n;
    /* Now and then the log-start-offset checkpoint is missing: the log
     * starts at its first segment again (records delete-records hid come
     * back, as in Kafka).  Not on the compacted variant, whose model keeps
     * no account of what a clean does below the log start offset. */
    if (!r->m.compact && rndn(&r->seed, 10) == 0) {
        seglist s;
        segs_get(r, &s);
        r->m.lso = s.v[0].base_offset;
        r->lso_lost = true;
        free(s.v);
    }
    if (rndn(&r->seed, 2)) {
        assert_int_equal(eng_partition_close(r->p), 0);
        eng_partition_unref(r->p);
        bool marker = rndn(&r->seed, 2);
        r->p = open_model(r, marker, marker ? leo : rndn(&r->seed, leo + 1));
        r->reopens++;
    } else {
        /* A crash: no close, no marker; the checkpoint holds the recovery
         * point the partition reached. */
        int64_t rp = eng_partition_recovery_point(r->p);
        eng_partition_unref(r->p);
        r->p = open_model(r, false, rp);
        r->crashes++;
    }
}

/* ---- checks ---------------------------------------------------------------- */

/* First live record at or after off, or m->n. */
static int64_t next_live(const model *m, int64_t off)
{
    while (off < m->n && !m->r[off].present)
        off++;
    return off;
}

static void check_record(run *r, const eng_record *rec)
{
    const mrec *e = &r->m.r[rec->offset];
    char kb[16], hb[32];
    uint8_t vb[100];
    if (!e->present || rec->timestamp != e->ts)
        fail_msg("seed %" PRIu64 " op %d: offset %" PRId64 ": timestamp %" PRId64
                 ", model %" PRId64 " (present %d)",
                 r->seed0, r->op, rec->offset, rec->timestamp, e->ts, e->present);
    if (e->key < 0) {
        assert_int_equal(rec->key_len, -1);
    } else {
        key_name(kb, sizeof kb, e->key);
        assert_int_equal(rec->key_len, (int32_t)strlen(kb));
        assert_memory_equal(rec->key, kb, strlen(kb));
    }
    assert_int_equal(rec->value_len, e->vlen);
    if (e->vlen > 0) {
        value_bytes(vb, e->vlen, rec->offset);
        assert_memory_equal(rec->value, vb, (size_t)e->vlen);
    }
    assert_int_equal(rec->header_count, e->nh);
    const uint8_t *hp = rec->headers;
    for (int j = 0; j < e->nh; j++) {
        eng_record_header h;
        assert_int_equal(eng_record_header_next(&hp, rec->headers_end, &h), 1);
        snprintf(hb, sizeof hb, "h%d", j);
        assert_int_equal(h.key_len, 2);
        assert_memory_equal(h.key, hb, 2);
        if (j == 1) {
            assert_int_equal(h.value_len, -1);
        } else {
            snprintf(hb, sizeof hb, "o%" PRId64, rec->offset);
            assert_int_equal(h.value_len, (int32_t)strlen(hb));
            assert_memory_equal(h.value, hb, strlen(hb));
        }
    }
}

/* Reads from off (one fetch of max_bytes) and checks every record from off
 * against the model; returns the fetch's next offset. */
static int64_t check_read(run *r, int64_t off, size_t max_bytes)
{
    model *m = &r->m;
    eng_fetch ft;
    eng_errdetail err = {0};
    int rc = eng_partition_read(r->p, off, max_bytes, &ft, &err);
    if (rc)
        fail_msg("seed %" PRIu64 " op %d: read at %" PRId64 " [%" PRId64 ", %" PRId64 "]: %s",
                 r->seed0, r->op, off, m->lso, m->n, eng_strerror(rc));
    assert_int_equal(ft.log_start_offset, m->lso);
    assert_int_equal(ft.high_watermark, m->n);
    int64_t want = next_live(m, off);
    eng_buf scratch = {0};
    size_t got = 0;
    for (size_t pos = 0; pos < ft.len;) {
        eng_batch_header h;
        assert_int_equal(eng_batch_header_decode(ft.data + pos, ft.len - pos, &h), 0);
        assert_true(eng_batch_size(&h) <= ft.len - pos);
        assert_int_equal(eng_batch_validate(ft.data + pos, eng_batch_size(&h), &h), 0);
        const uint8_t *plain;
        size_t plen;
        assert_int_equal(eng_batch_plain_records(ft.data + pos, &h, &scratch, &plain, &plen), 0);
        eng_record_iter it;
        eng_record rec;
        eng_record_iter_init(&it, &h, plain, plen);
        while (eng_record_iter_next(&it, &rec) == 1) {
            if (rec.offset < off)
                continue;
            if (rec.offset != want)
                fail_msg("seed %" PRIu64 " op %d: read at %" PRId64 ": offset %" PRId64
                         " where the model has %" PRId64,
                         r->seed0, r->op, off, rec.offset, want);
            check_record(r, &rec);
            got++;
            want = next_live(m, want + 1);
        }
        pos += eng_batch_size(&h);
    }
    eng_buf_free(&scratch);
    int64_t next = ft.next_offset;
    /* A page may hold only batches a clean emptied (kept as headers,
     * kafka-format.md §6.3): no record, but progress past them. */
    if (!got && next_live(m, off) < m->n && next <= off)
        fail_msg("seed %" PRIu64 " op %d: read at %" PRId64 " (%zu bytes) returned nothing and "
                 "next offset %" PRId64 ", the model has %" PRId64,
                 r->seed0, r->op, off, ft.len, next, next_live(m, off));
    assert_true(next <= m->n && next >= off);
    /* No live record is skipped between the last one returned and next. */
    assert_true(next <= want);
    eng_fetch_free(&ft);
    return next;
}

/* A raw read's slice holds the bytes a copying read returns.  Its next
 * offset may be the base offset of the batch after them where a copying
 * read answers the end of the last one: after a clean no record lies
 * between, and neither may skip one. */
static void check_slice(run *r, int64_t off, size_t max_bytes)
{
    eng_fetch ft;
    eng_slice sl;
    assert_int_equal(eng_partition_read(r->p, off, max_bytes, &ft, NULL), 0);
    assert_int_equal(eng_partition_read_slice(r->p, off, max_bytes, &sl, NULL), 0);
    if (sl.length != ft.len || sl.next_offset < ft.next_offset ||
        sl.next_offset > next_live(&r->m, ft.next_offset))
        fail_msg("seed %" PRIu64 " op %d: at %" PRId64 " a slice has %zu bytes to %" PRId64
                 ", a read %zu to %" PRId64 " (max %zu; next live record %" PRId64 ")",
                 r->seed0, r->op, off, sl.length, sl.next_offset, ft.len, ft.next_offset,
                 max_bytes, next_live(&r->m, ft.next_offset));
    if (sl.length) {
        uint8_t *b = malloc(sl.length);
        assert_non_null(b);
        assert_int_equal(pread(sl.fd, b, sl.length, (off_t)sl.position), (ssize_t)sl.length);
        assert_memory_equal(b, ft.data, sl.length);
        free(b);
    }
    if (sl.fd >= 0)
        close(sl.fd);
    eng_fetch_free(&ft);
}

static void check_out_of_range(run *r, int64_t off)
{
    eng_fetch ft;
    eng_errdetail err = {0};
    int rc = eng_partition_read(r->p, off, 4096, &ft, &err);
    if (rc != ENG_EOFFSET)
        fail_msg("seed %" PRIu64 " op %d: read at %" PRId64 " outside [%" PRId64 ", %" PRId64
                 "]: %s", r->seed0, r->op, off, r->m.lso, r->m.n, rc ? eng_strerror(rc) : "ok");
}

static void check_timestamp(run *r)
{
    model *m = &r->m;
    int64_t t;
    if (m->n > 0 && rndn(&r->seed, 3)) {
        t = m->r[rndn(&r->seed, m->n)].ts + rndn(&r->seed, 3) - 1;
        t = t < 0 ? 0 : t; /* -1 and -2 name latest and earliest, not a time */
    } else {
        t = m->cur_ts - 40 * DAY_MS + rndn(&r->seed, 41 * DAY_MS);
    }
    int64_t want = -1;
    for (int64_t o = m->lso; o < m->n && want < 0; o++)
        if (m->r[o].present && m->r[o].ts >= t)
            want = o;
    int64_t off = -7, ts = -7;
    int rc = eng_partition_offset_for_timestamp(r->p, t, &off, &ts);
    if (want < 0) {
        if (rc != ENG_ENOTFOUND)
            fail_msg("seed %" PRIu64 " op %d: offset for timestamp %" PRId64 ": %s, offset %"
                     PRId64 "; the model has none", r->seed0, r->op, t, eng_strerror(rc), off);
        return;
    }
    if (rc || off != want || ts != m->r[want].ts)
        fail_msg("seed %" PRIu64 " op %d: offset for timestamp %" PRId64 ": %s, offset %" PRId64
                 " ts %" PRId64 "; the model: offset %" PRId64 " ts %" PRId64,
                 r->seed0, r->op, t, rc ? eng_strerror(rc) : "ok", off, ts, want, m->r[want].ts);
    r->ts_hits++;
}

static void check_max_timestamp(run *r)
{
    model *m = &r->m;
    int64_t want = -1;
    for (int64_t o = m->lso; o < m->n; o++)
        if (m->r[o].present && (want < 0 || m->r[o].ts > m->r[want].ts))
            want = o;
    if (want >= 0 && m->r[want].ts < 0)
        return; /* only NO_TIMESTAMP records: the contract names no answer */
    int64_t off = -7, ts = -7;
    int rc = eng_partition_max_timestamp(r->p, &off, &ts);
    if (want < 0) {
        if (rc != ENG_ENOTFOUND)
            fail_msg("seed %" PRIu64 " op %d: max timestamp: %s at %" PRId64 "; the model has none",
                     r->seed0, r->op, eng_strerror(rc), off);
        return;
    }
    if (rc || off != want || ts != m->r[want].ts)
        fail_msg("seed %" PRIu64 " op %d: max timestamp: %s, offset %" PRId64 " ts %" PRId64
                 "; the model: offset %" PRId64 " ts %" PRId64,
                 r->seed0, r->op, rc ? eng_strerror(rc) : "ok", off, ts, want, m->r[want].ts);
}

static void check_all(run *r, bool full)
{
    model *m = &r->m;
    eng_partition *p = r->p;
    assert_int_equal(eng_partition_log_start_offset(p), m->lso);
    assert_int_equal(eng_partition_log_end_offset(p), m->n);
    assert_int_equal(eng_partition_high_watermark(p), m->n);

    seglist s;
    segs_get(r, &s);
    eng_partition_info info;
    eng_partition_info_get(p, &info);
    uint64_t size = 0;
    for (size_t i = 0; i < s.n; i++) {
        size += s.v[i].size_bytes;
        int64_t next = i + 1 < s.n ? s.v[i + 1].base_offset : m->n;
        if (s.v[i].next_offset != next || s.v[i].base_offset > next ||
            s.v[i].active != (i + 1 == s.n))
            fail_msg("seed %" PRIu64 " op %d: segment %zu of %zu: base %" PRId64 " next %" PRId64
                     ", expected next %" PRId64, r->seed0, r->op, i, s.n, s.v[i].base_offset,
                     s.v[i].next_offset, next);
        /* Without a clean, a segment holds every record in its range. */
        int64_t b = s.v[i].base_offset;
        if (!m->compact && (s.v[i].record_count != next - b ||
                            s.v[i].max_timestamp != model_max_ts(m, b, next) ||
                            s.v[i].first_timestamp != (next > b ? m->r[b].ts : -1)))
            fail_msg("seed %" PRIu64 " op %d: segment %" PRId64 ": %" PRId64 " records, "
                     "timestamps %" PRId64 "..max %" PRId64 "; the model %" PRId64 ", max %"
                     PRId64, r->seed0, r->op, b, s.v[i].record_count, s.v[i].first_timestamp,
                     s.v[i].max_timestamp, next - b, model_max_ts(m, b, next));
    }
    assert_true(s.v[0].base_offset <= m->lso);
    assert_int_equal(info.size_bytes, size);
    assert_int_equal(info.segment_count, s.n);
    assert_int_equal(info.active_base_offset, s.v[s.n - 1].base_offset);
    assert_int_equal(info.log_start_offset, m->lso);
    assert_int_equal(info.log_end_offset, m->n);
    int64_t first = next_live(m, m->lso);
    if (info.first_timestamp != (first < m->n ? m->r[first].ts : -1))
        fail_msg("seed %" PRIu64 " op %d: first_timestamp %" PRId64 ", the model %" PRId64
                 " (offset %" PRId64 ")", r->seed0, r->op, info.first_timestamp,
                 first < m->n ? m->r[first].ts : -1, first);
    free(s.v);

    int64_t off = m->lso + rndn(&r->seed, m->n - m->lso + 1);
    size_t max_bytes = 64 + (size_t)rndn(&r->seed, 6000);
    check_read(r, off, max_bytes);
    check_slice(r, off, max_bytes);
    if (m->lso > 0)
        check_out_of_range(r, rndn(&r->seed, m->lso));
    check_out_of_range(r, m->n + 1 + rndn(&r->seed, 3));
    check_timestamp(r);
    check_max_timestamp(r);
    if (full)
        for (int64_t o = m->lso; next_live(m, o) < m->n;)
            o = check_read(r, o, 16384);
}

static void run_model(fixture *f, uint64_t seed, int ops, bool compact, int64_t segment_ms)
{
    eng_config *c = &f->cfg;
    if (compact) {
        *c = cu_compact_config();
        c->v[ENG_CFG_DELETE_RETENTION_MS].i = DRM;
    }
    c->v[ENG_CFG_SEGMENT_BYTES].i = SEG_BYTES;
    if (segment_ms > 0)
        c->v[ENG_CFG_SEGMENT_MS].i = segment_ms; /* rolls on the records' timestamps too */
    c->v[ENG_CFG_INDEX_INTERVAL_BYTES].i = 200 + (int64_t)(seed % 300);
    c->v[ENG_CFG_SEGMENT_INDEX_BYTES].i = 240; /* 30 offset, 20 time entries: rolls on full */
    c->v[ENG_CFG_RETENTION_MS].i = -1;
    c->v[ENG_CFG_RETENTION_BYTES].i = -1;
    run r = {.f = f, .seed = seed, .seed0 = seed, .m = {.lso = 0, .cur_ts = T0, .ckpt = -1, .compact = compact}};
    printf("# seed %" PRIu64 " (%s), %d operations\n", seed, compact ? "compact" : "delete", ops);
    if (compact)
        assert_int_equal(eng_offset_map_new(1 << 16, 0.9, &r.map), 0);
    r.p = open_model(&r, false, 0);
    bool full_reads = getenv("PARTITION_MODEL_FULL");
    for (r.op = 0; r.op < ops; r.op++) {
        int x = (int)rndn(&r.seed, 100);
        if (x < 55)
            op_append(&r);
        else if (x < 63) {
            cu_roll(r.p);
            r.rolls++;
        } else if (x < 73)
            op_retention(&r);
        else if (x < 77)
            op_delete_records(&r);
        else if (x < 89 && compact)
            op_clean(&r);
        else if (x < 92)
            op_reopen(&r);
        else
            r.m.cur_ts += rndn(&r.seed, 10000);
        check_all(&r, full_reads || r.op % 50 == 49);
    }
    check_all(&r, true);
    printf("# %d appends (%" PRId64 " records), %d rolls, %d retention passes (%d segments), "
           "%d delete-records, %d cleans, %d reopens, %d crashes, %d timestamp hits\n",
           r.appends, r.m.n, r.rolls, r.retentions, r.deleted_segs, r.deletes, r.cleans,
           r.reopens, r.crashes, r.ts_hits);
    assert_true(r.appends > ops / 3 && r.deleted_segs > 0 && r.reopens + r.crashes > 5);
    if (compact)
        assert_true(r.cleans > 10);
    eng_partition_close(r.p);
    eng_partition_unref(r.p);
    if (r.map)
        eng_offset_map_free(r.map);
    free(r.m.r);
}

static uint64_t env_u64(const char *name, uint64_t dflt)
{
    const char *s = getenv(name);
    return s && *s ? strtoull(s, NULL, 0) : dflt;
}

static void model_case(void **state, uint64_t seed, bool compact, int64_t segment_ms)
{
    uint64_t s = env_u64("PARTITION_MODEL_SEED", 0);
    int ops = (int)env_u64("PARTITION_MODEL_OPS", 1000);
    run_model(*state, s ? s : seed, ops, compact, segment_ms);
}

static void test_model_delete(void **state)
{
    model_case(state, 0x5eed0001ULL, false, 0);
}

static void test_model_delete2(void **state)
{
    model_case(state, 0xa5a5a5a5deadbeefULL, false, 20000);
}

static void test_model_compact(void **state)
{
    model_case(state, 0x5eed0002ULL, true, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_model_delete, setup_fast, teardown),
        cmocka_unit_test_setup_teardown(test_model_delete2, setup_fast, teardown),
        cmocka_unit_test_setup_teardown(test_model_compact, setup_fast, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
