/*
 * test_api_model.c - the whole HTTP API driven by a seeded PRNG against one
 * server, every answer checked against an in-memory model of what README.md
 * promises (api_model.h).
 *
 * Operations, over up to six topic names (created, deleted and created again,
 * 1-3 partitions, grown, random configs changed mid-way through PUT and
 * configs:alter): JSON appends to a partition or a topic (keys null, text or
 * base64, headers, explicit, old, future and missing timestamps), binary
 * RecordBatch appends (some compressed); reads as a JSON page at a random
 * offset, limit and max_bytes and from every start selector, one record,
 * NDJSON and SSE bounded by max_records, raw batches decoded by the test's
 * own parser (tests/crash/crash_check.h); earliest, latest, max_timestamp
 * and by-timestamp offsets; partition description; segment listing;
 * segments:roll; records:delete; retention:run, dry then real, whose deletions the model
 * predicts from the segment listing (Kafka's three rules); compaction:run
 * (last value per key survives below the cleaned range's end, tombstones
 * stay within delete.retention.ms, keyless records go, offsets never
 * change); idempotent producers' batches, new, retried (a duplicate, nothing
 * written), out of sequence and of a stale epoch, and their listing
 * (api_model_producers.h); flush.messages=1 topics, whose high watermark is
 * the log end after each acknowledged append; clean restarts and kill -9
 * restarts on the same data dir, the stopped (or killed) server's partition
 * directories parsed by that same parser, the log start offset after a
 * kill -9 no lower than log-start-offset-checkpoint allows; and invalid requests of
 * every kind, checked against README's error table, after which the model
 * is unchanged.  Every append is read back at once.
 *
 * The seed is printed; API_MODEL_SEED=<n> runs that seed, API_MODEL_OPS=<n>
 * changes the number of operations; API_MODEL_TRACE=1 prints each
 * operation, API_MODEL_VERBOSE=1 what retention and compaction predict.  The periodic jobs and the cleaner
 * threads are held off so only requests change the data.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "api_model_admin.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define DEFAULT_OPS 600

/* ---- appends ---------------------------------------------------------------------------- */

/* A record as a JSON append carries it. */
static json_t *rec_json(const am_rec *r, bool b64, int64_t ts, int partition)
{
    json_t *o = json_object();
    if (r->key.data || chance(50))
        json_object_set_new(o, "key", am_bytes_json(&r->key, b64));
    json_object_set_new(o, "value", am_bytes_json(&r->value, b64));
    if (ts >= 0)
        json_object_set_new(o, "timestamp", json_integer(ts));
    if (r->nh || chance(20)) {
        json_t *h = json_array();
        for (int i = 0; i < r->nh; i++)
            json_array_append_new(h, json_pack("{s:o,s:o}", "name", am_bytes_json(&r->hname[i], false),
                                               "value", am_bytes_json(&r->hval[i], b64)));
        json_object_set_new(o, "headers", h);
    }
    if (partition >= 0)
        json_object_set_new(o, "partition", json_integer(partition));
    return o;
}

/* Fills r with random content; its timestamp to send in *ts (-1: none). */
static void rand_rec(am_topic *t, am_rec *r, int64_t *ts)
{
    r->key = rand_key(!(t->policy & AM_POLICY_COMPACT));
    r->value = rand_value();
    rand_headers(r);
    *ts = chance(20) ? -1 : rand_ts();
}

/* Gives the model's records the timestamps the server must have given
 * them: an explicit one, or (LogAppendTime, or none sent) a time within the
 * request's span, pinned by the read-back that follows. */
static void set_ts(am_topic *t, am_rec *r, int64_t sent, long long t0, long long t1)
{
    r->log_append_time = t->lat;
    if (!t->lat && sent >= 0) {
        r->ts_lo = r->ts_hi = sent;
    } else {
        r->ts_lo = t0;
        r->ts_hi = t1;
    }
}

static void check_append_answer(ls_resp *r, am_topic *t, int p, int64_t base, int n)
{
    expect_ok(r, 200);
    CHECK_EQ(jint(r->json, "base_offset"), base, "base_offset");
    CHECK_EQ(jint(r->json, "last_offset"), base + n - 1, "last_offset");
    CHECK_EQ(jint(r->json, "record_count"), n, "record_count");
    CHECK_EQ(jint(r->json, "high_watermark"), base + n, "high_watermark");
    CHECK_EQ(jint(r->json, "log_start_offset"), t->p[p].lso, "log_start_offset");
    const char *tt = json_string_value(jget(r->json, "timestamp_type"));
    CHECK(tt && !strcmp(tt, t->lat ? "LogAppendTime" : "CreateTime"), "timestamp_type %s",
          tt ? tt : "(none)");
    CHECK((jint(r->json, "log_append_time") >= 0) == t->lat, "log_append_time %lld",
          jint(r->json, "log_append_time"));
    if (t->flush1) {
        /* Acknowledged means on disk and visible (README "Durability"). */
        char path[256];
        part_path(path, sizeof path, t, p, "");
        ls_resp d;
        req("GET", path, NULL, NULL, 0, NULL, &d);
        expect_ok(&d, 200);
        CHECK_EQ(jint(d.json, "high_watermark"), base + n, "flush.messages=1: the high watermark after an append");
        CHECK_EQ(jint(d.json, "log_end_offset"), base + n, "flush.messages=1: the log end after an append");
        ls_resp_free(&d);
    }
}

static void op_append_json(am_topic *t, int p)
{
    am_part *mp = &t->p[p];
    int n = 1 + (int)rndn(8);
    bool b64 = chance(30);
    what("JSON append of %d to %s-%d%s", n, t->name, p, b64 ? " (base64)" : "");
    json_t *recs = json_array();
    int64_t base = mp->n;
    int64_t sent[8];
    for (int i = 0; i < n; i++) {
        am_rec *r = am_push(mp);
        CHECK(r != NULL, "out of memory");
        rand_rec(t, r, &sent[i]);
        json_array_append_new(recs, rec_json(r, b64, sent[i], chance(10) ? p : -1));
    }
    json_t *body = json_pack("{s:o}", "records", recs);
    if (b64)
        json_object_set_new(body, "encoding", json_string("base64"));
    bool cond = chance(15);
    if (cond)
        json_object_set_new(body, "expected_offset", json_integer(base));
    char *text = json_dumps(body, JSON_COMPACT);
    json_decref(body);
    char path[256];
    part_path(path, sizeof path, t, p, "/records");
    long long t0 = now_ms();
    ls_resp r;
    req_json("POST", path, text, &r);
    long long t1 = now_ms();
    free(text);
    check_append_answer(&r, t, p, base, n);
    g_stats.appended += n;
    mp->compressed |= t->codec;
    long long lat = jint(r.json, "log_append_time");
    for (int i = 0; i < n; i++) {
        set_ts(t, &mp->r[base + i], sent[i], t0, t1);
        if (t->lat)
            mp->r[base + i].ts_lo = mp->r[base + i].ts_hi = lat;
    }
    ls_resp_free(&r);
    check_page(t, p, base, n, b64);
}

/* Records to /v1/topics/{t}/records: the server picks each partition (the
 * answer says which); the model follows, checking the offsets run on. */
static void op_append_topic(am_topic *t)
{
    int n = 1 + (int)rndn(8);
    what("JSON append of %d to topic %s", n, t->name);
    am_rec tmp[8];
    int64_t sent[8];
    json_t *recs = json_array();
    for (int i = 0; i < n; i++) {
        memset(&tmp[i], 0, sizeof tmp[i]);
        tmp[i].stored = true;
        rand_rec(t, &tmp[i], &sent[i]);
        json_array_append_new(recs, rec_json(&tmp[i], false, sent[i], -1));
    }
    json_t *body = json_pack("{s:o}", "records", recs);
    char *text = json_dumps(body, JSON_COMPACT);
    json_decref(body);
    char path[256];
    snprintf(path, sizeof path, "/v1/topics/%s/records", t->name);
    long long t0 = now_ms();
    ls_resp r;
    req_json("POST", path, text, &r);
    long long t1 = now_ms();
    free(text);
    expect_ok(&r, 200);
    CHECK_EQ(jint(r.json, "records_appended"), n, "records_appended");
    CHECK_EQ(jint(r.json, "records_failed"), 0, "records_failed");
    json_t *where = jget(r.json, "records");
    CHECK(json_array_size(where) == (size_t)n, "%zu placements", json_array_size(where));
    int64_t first[AM_MAXP], cnt[AM_MAXP] = {0};
    for (int p = 0; p < t->np; p++)
        first[p] = t->p[p].n;
    for (int i = 0; i < n; i++) {
        json_t *w = json_array_get(where, (size_t)i);
        int p = (int)jint(w, "partition");
        CHECK(p >= 0 && p < t->np, "record %d placed in partition %d", i, p);
        for (int j = 0; j < i; j++)
            if (tmp[j].key.data && am_bytes_eq(&tmp[j].key, tmp[i].key.data, tmp[i].key.len))
                CHECK(jint(json_array_get(where, (size_t)j), "partition") == p,
                      "records %d and %d share a key, not a partition", j, i);
        am_part *mp = &t->p[p];
        CHECK_EQ(jint(w, "offset"), mp->n, "placement offset");
        am_rec *m = am_push(mp);
        CHECK(m != NULL, "out of memory");
        *m = tmp[i];
        set_ts(t, m, sent[i], t0, t1);
        cnt[p]++;
        g_stats.appended++;
        mp->compressed |= t->codec;
    }
    ls_resp_free(&r);
    for (int p = 0; p < t->np; p++)
        if (cnt[p])
            check_page(t, p, first[p], (int)cnt[p], false);
}

#include "api_model_producers.h"

/* One or two RecordBatch v2 back to back, encoded by the engine's encoder. */
static void op_append_binary(am_topic *t, int p)
{
    am_part *mp = &t->p[p];
    int nbatches = 1 + (int)rndn(2), counts[2], n = 0;
    what("binary append to %s-%d", t->name, p);
    uint8_t *body = NULL;
    size_t len = 0;
    int64_t base = mp->n;
    for (int b = 0; b < nbatches; b++) {
        counts[b] = 1 + (int)rndn(5);
        eng_record_spec spec[5];
        eng_record_header hdr[5][2];
        for (int i = 0; i < counts[b]; i++) {
            am_rec *r = am_push(mp);
            CHECK(r != NULL, "out of memory");
            int64_t ts;
            rand_rec(t, r, &ts);
            if (ts < 0)
                ts = chance(50) ? -1 : rand_ts();
            set_ts(t, r, ts, now_ms(), now_ms());
            if (!t->lat)
                r->ts_lo = r->ts_hi = ts; /* -1 stays -1: no timestamp */
            rec_spec(r, ts, &spec[i], hdr[i]);
        }
        size_t cap = eng_batch_encoded_size(spec, (size_t)counts[b]);
        uint8_t *nb = realloc(body, len + cap);
        CHECK(nb != NULL, "out of memory");
        body = nb;
        eng_batch_params bp;
        eng_batch_params_init(&bp);
        size_t sz = eng_batch_encode(body + len, cap, &bp, spec, (size_t)counts[b]);
        CHECK(sz > 0, "encoding a batch failed");
        if (chance(30))
            sz = compress_batch(t, mp, &body, len, sz);
        len += sz;
        n += counts[b];
    }
    char path[256];
    part_path(path, sizeof path, t, p, "/records");
    long long t0 = now_ms();
    ls_resp r;
    req("POST", path, "application/octet-stream", body, len, NULL, &r);
    long long t1 = now_ms();
    free(body);
    check_append_answer(&r, t, p, base, n);
    g_stats.appended += n;
    mp->compressed |= t->codec;
    if (t->lat)
        for (int i = 0; i < n; i++) {
            mp->r[base + i].ts_lo = t0;
            mp->r[base + i].ts_hi = t1;
        }
    ls_resp_free(&r);
    check_page(t, p, base, n, true);
}

static void op_roll(am_topic *t, int p)
{
    what("roll %s-%d", t->name, p);
    char path[256];
    part_path(path, sizeof path, t, p, "/segments:roll");
    ls_resp r;
    req_json("POST", path, "{}", &r);
    expect_ok(&r, 200);
    CHECK_EQ(jint(r.json, "active_segment_base_offset"), t->p[p].n, "active_segment_base_offset");
    ls_resp_free(&r);
}

static void op_delete_records(am_topic *t, int p)
{
    am_part *mp = &t->p[p];
    int64_t before;
    int k = (int)rndn(10);
    if (k == 0)
        before = -1;
    else if (k == 1)
        before = mp->n + 1 + rndn(5);
    else if (k == 2)
        before = mp->lso > 0 ? rndn(mp->lso) : 0;
    else
        before = mp->lso + rndn(mp->n - mp->lso + 1);
    what("records:delete before %lld on %s-%d", (long long)before, t->name, p);
    char path[256], body[64];
    part_path(path, sizeof path, t, p, "/records:delete");
    snprintf(body, sizeof body, "{\"before_offset\":%lld}", (long long)before);
    ls_resp r;
    req_json("POST", path, body, &r);
    if (before > mp->n) {
        expect_range_error(&r, mp);
        ls_resp_free(&r);
        return;
    }
    expect_ok(&r, 200);
    int64_t to = before < 0 ? mp->n : before;
    if (to > mp->lso)
        mp->lso = to;
    CHECK_EQ(jint(r.json, "log_start_offset"), mp->lso, "log_start_offset");
    ls_resp_free(&r);
}

/* ---- retention and compaction ------------------------------------------------------------------ */

/* Kafka's three rules over the listing (README "Retention"): how many
 * leading segments go, each one's rule in rules[], and whether the active
 * one goes too (then an empty one is rolled first). */
static size_t predict_retention(am_topic *t, int p, json_t *segs, long long total, long long now,
                                const char **rules)
{
    am_part *mp = &t->p[p];
    size_t n = json_array_size(segs), k = 0;
    /* The loop of UnifiedLog.deletableSegments: stops at the first kept one;
     * never the last segment when it is empty. */
#define SEG(i) json_array_get(segs, (i))
#define DELETABLE(i) (jint(SEG(i), "next_offset") <= mp->n && !((i) == n - 1 && jint(SEG(i), "size_bytes") == 0))
    while (k < n - 1 && DELETABLE(k) && jint(SEG(k + 1), "base_offset") <= mp->lso)
        rules[k++] = "log_start_offset";
    if (!(t->policy & AM_POLICY_DELETE))
        return k;
    long long size = total;
    for (size_t i = 0; i < k; i++)
        size -= jint(SEG(i), "size_bytes");
    if (t->retention_bytes >= 0 && size >= t->retention_bytes) {
        long long diff = size - t->retention_bytes;
        while (k < n && DELETABLE(k) && diff - jint(SEG(k), "size_bytes") >= 0) {
            diff -= jint(SEG(k), "size_bytes");
            rules[k++] = "retention.bytes";
        }
    }
    if (t->retention_ms >= 0) {
        while (k < n && DELETABLE(k)) {
            json_t *mt = jget(SEG(k), "max_timestamp");
            long long largest = json_is_integer(mt) ? json_integer_value(mt) : now;
            if (now - largest <= t->retention_ms)
                break;
            rules[k++] = "retention.ms";
        }
    }
#undef DELETABLE
#undef SEG
    return k;
}

static void check_retention_report(json_t *part, json_t *segs, size_t k, const char **rules,
                                   int64_t new_lso, bool rolled)
{
    json_t *del = jget(part, "segments_deleted");
    CHECK(json_array_size(del) == k, "%zu segments deleted, the model expects %zu (first kept: %s)",
          json_array_size(del), k,
          k < json_array_size(segs) ? json_dumps(json_array_get(segs, k), JSON_COMPACT) : "none");
    for (size_t i = 0; i < k; i++) {
        json_t *d = json_array_get(del, i);
        CHECK_EQ(jint(d, "base_offset"), jint(json_array_get(segs, i), "base_offset"),
                 "deleted segment's base");
        const char *rule = json_string_value(jget(d, "rule"));
        CHECK(rule && !strcmp(rule, rules[i]), "segment %lld deleted by %s, the model says %s",
              jint(d, "base_offset"), rule ? rule : "(none)", rules[i]);
    }
    long long freed = 0;
    for (size_t i = 0; i < k; i++)
        freed += jint(json_array_get(segs, i), "size_bytes");
    CHECK_EQ(jint(part, "bytes_freed"), freed, "bytes_freed");
    CHECK_EQ(jint(part, "log_start_offset"), new_lso, "log_start_offset after retention");
    CHECK(json_is_true(jget(part, "rolled")) == rolled, "rolled is %s",
          json_is_true(jget(part, "rolled")) ? "true" : "false");
    CHECK(!json_is_true(jget(part, "busy")), "busy with no cleaner running");
}

static void op_retention(am_topic *t, int p)
{
    am_part *mp = &t->p[p];
    what("retention:run on %s-%d (policy %d, retention.ms %lld, retention.bytes %lld)", t->name, p,
         t->policy, t->retention_ms, t->retention_bytes);
    long long total;
    json_t *segs = segments(t, p, &total);
    const char *rules[512];
    CHECK(json_array_size(segs) <= 512, "too many segments");
    size_t k = predict_retention(t, p, segs, total, now_ms(), rules);
    size_t n = json_array_size(segs);
    if (getenv("API_MODEL_VERBOSE"))
        fprintf(stderr, "# %s: %zu segments, %lld bytes, %zu to delete\n", g_what, n, total, k);
    bool rolled = k == n;
    int64_t new_lso = mp->lso;
    if (rolled)
        new_lso = mp->n;
    else if (jint(json_array_get(segs, k), "base_offset") > new_lso)
        new_lso = jint(json_array_get(segs, k), "base_offset");
    char path[256];
    snprintf(path, sizeof path, "/v1/topics/%s/retention:run?partition=%d", t->name, p);
    for (int dry = 1; dry >= 0; dry--) {
        ls_resp r;
        req_json("POST", path, dry ? "{\"dry_run\":true}" : "{\"dry_run\":false}", &r);
        expect_ok(&r, 200);
        json_t *parts = jget(r.json, "partitions");
        CHECK(json_array_size(parts) == 1, "%zu partitions reported", json_array_size(parts));
        check_retention_report(json_array_get(parts, 0), segs, k, rules, new_lso, rolled);
        ls_resp_free(&r);
        if (dry)
            check_partition(t, p); /* nothing moved */
    }
    static const char *const names[3] = {"log_start_offset", "retention.bytes", "retention.ms"};
    for (size_t i = 0; i < k; i++)
        for (int j = 0; j < 3; j++)
            g_stats.retention_deleted[j] += !strcmp(rules[i], names[j]);
    g_stats.rolled += rolled;
    for (size_t i = 0; i < k; i++)
        for (long long o = jint(json_array_get(segs, i), "base_offset");
             o < jint(json_array_get(segs, i), "next_offset"); o++)
            mp->r[o].stored = false;
    mp->lso = new_lso;
    json_decref(segs);
}

/* Applies a clean of [first_dirty, end), run within [t0, t1], to the
 * model; returns how many records it removed.  Below end a keyed record
 * stays unless a later offset of the range holds its key; keyless records
 * go; a tombstone that stays gets its delete horizon (the clean's time plus
 * delete.retention.ms) the first time, and goes in a clean that starts past
 * it (Kafka's shouldRetainRecord). */
static long model_compact(am_topic *t, am_part *mp, int64_t first_dirty, int64_t end, long long t0,
                          long long t1)
{
    long removed = 0;
    if (first_dirty >= end)
        return 0; /* nothing dirty below the active segment: no clean ran */
    for (int64_t o = 0; o < end && o < mp->n; o++) {
        am_rec *r = &mp->r[o];
        if (!r->stored)
            continue;
        bool later = !r->key.data;
        for (int64_t l = o + 1 > first_dirty ? o + 1 : first_dirty; l < end && !later; l++)
            later = mp->r[l].stored && am_bytes_eq(&mp->r[l].key, r->key.data, r->key.len);
        if (later) {
            r->stored = false;
            removed++;
            if (getenv("API_MODEL_VERBOSE"))
                fprintf(stderr, "# clean [%lld, %lld) removes %lld (%s)\n", (long long)first_dirty,
                        (long long)end, (long long)o, r->key.data ? "superseded" : "keyless");
        }
    }
    for (int64_t o = 0; o < end && o < mp->n; o++) {
        am_rec *r = &mp->r[o];
        if (!r->stored || r->value.data)
            continue;
        if (!r->horizon) {
            r->horizon = t1 + t->drm;
        } else if (r->horizon <= t0) {
            r->stored = false;
            removed++;
            if (getenv("API_MODEL_VERBOSE"))
                fprintf(stderr, "# clean [%lld, %lld) removes tombstone %lld\n", (long long)first_dirty,
                        (long long)end, (long long)o);
        } else {
            /* Past the clean's end it stays; within [t0, t1] the model
             * cannot tell (two cleans in one millisecond). */
            CHECK(r->horizon > t1,
                  "offset %lld: the tombstone's horizon %lld falls within the clean [%lld, %lld]",
                  (long long)o, (long long)r->horizon, t0, t1);
        }
    }
    g_stats.compacted += removed;
    return removed;
}

static void op_compact(am_topic *t, int p)
{
    bool dry = chance(25);
    what("compaction:run%s on %s-%d", dry ? " (dry)" : "", t->name, p);
    char path[256];
    snprintf(path, sizeof path, "/v1/topics/%s/compaction:run?partition=%d", t->name, p);
    ls_resp r;
    long long t0 = now_ms();
    req_json("POST", path, dry ? "{\"dry_run\":true}" : "{}", &r);
    long long t1 = now_ms();
    if (!(t->policy & AM_POLICY_COMPACT)) {
        expect_err(&r, 422, "not_compacted");
        ls_resp_free(&r);
        return;
    }
    expect_ok(&r, 200);
    json_t *parts = jget(r.json, "partitions");
    CHECK(json_array_size(parts) == 1, "%zu partitions reported", json_array_size(parts));
    json_t *stats = jget(json_array_get(parts, 0), "stats");
    json_t *range = jget(stats, "range");
    long long d = jint(range, "first_dirty_offset"), e = jint(range, "end_offset");
    CHECK(d <= e && e <= t->p[p].n, "range [%lld, %lld) with log end %lld", d, e,
          (long long)t->p[p].n);
    if (!dry) {
        long removed = model_compact(t, &t->p[p], d, e, t0, t1);
        CHECK_EQ(jint(stats, "records_removed"), removed, "records_removed");
    }
    ls_resp_free(&r);
    check_all(t, p);
}

/* ---- restarts and the driver -------------------------------------------------------------------- */

static void check_topic(am_topic *t)
{
    for (int p = 0; p < t->np; p++) {
        check_partition(t, p);
        check_all(t, p);
        check_segments(t, p);
        check_producers(t, p);
    }
    check_overrides(t);
}

static void op_restart(void)
{
    g_stats.restarts++;
    what("clean restart");
    CHECK(ls_stop(S) == 0, "the server did not stop cleanly");
    for (int i = 0; i < AM_NNAMES; i++)
        for (int p = 0; T[i].live && p < T[i].np; p++)
            check_disk(&T[i], p);
    CHECK(ls_restart(S, settings) == 0, "the server did not restart");
    producers_restarted();
    for (int i = 0; i < AM_NNAMES; i++)
        for (int p = 0; T[i].live && p < T[i].np; p++)
            T[i].p[p].ckpt_lso = T[i].p[p].lso; /* a clean stop writes the checkpoint */
    for (int i = 0; i < AM_NNAMES; i++)
        if (T[i].live)
            check_topic(&T[i]);
}

/* kill -9 between requests: the page cache keeps every acknowledged byte,
 * so the log end stays; the log start offset is what
 * log-start-offset-checkpoint saved (at the last clean stop or topic
 * delete: its job is held off) or the first segment's base, whichever is
 * larger, and at most where it was (README "Durability", "Recovery"). */
static void op_crash(void)
{
    g_stats.crashes++;
    what("kill -9 and restart");
    ls_kill9(S);
    for (int i = 0; i < AM_NNAMES; i++)
        for (int p = 0; T[i].live && p < T[i].np; p++)
            check_disk(&T[i], p);
    CHECK(ls_restart(S, settings) == 0, "the server did not restart after kill -9");
    producers_restarted();
    for (int i = 0; i < AM_NNAMES; i++) {
        am_topic *t = &T[i];
        for (int p = 0; t->live && p < t->np; p++) {
            am_part *mp = &t->p[p];
            what("kill -9 and restart: log start of %s-%d", t->name, p);
            char path[256];
            part_path(path, sizeof path, t, p, "/segments");
            ls_resp r;
            req("GET", path, NULL, NULL, 0, NULL, &r);
            expect_ok(&r, 200);
            long long first = jint(json_array_get(jget(r.json, "segments"), 0), "base_offset");
            ls_resp_free(&r);
            long long floor = first > mp->ckpt_lso ? first : mp->ckpt_lso;
            part_path(path, sizeof path, t, p, "");
            req("GET", path, NULL, NULL, 0, NULL, &r);
            expect_ok(&r, 200);
            long long lso = jint(r.json, "log_start_offset");
            ls_resp_free(&r);
            CHECK(lso >= floor && lso <= mp->lso,
                  "log start %lld after kill -9: before it %lld, checkpointed %lld, first segment %lld", lso,
                  (long long)mp->lso, (long long)mp->ckpt_lso, first);
            g_stats.lso_fell_back += lso < mp->lso;
            mp->lso = lso;
        }
    }
    for (int i = 0; i < AM_NNAMES; i++)
        if (T[i].live)
            check_topic(&T[i]);
}

static void one_op(void)
{
    am_topic *t = rand_live_topic();
    int r = (int)rndn(100);
    int live = 0;
    for (int i = 0; i < AM_NNAMES; i++)
        live += T[i].live;
    if (!t || r < (live < 3 ? 6 : 2)) {
        op_create((int)rndn(AM_NNAMES));
        return;
    }
    int p = (int)rndn(t->np);
    am_part *mp = &t->p[p];
    int64_t span = mp->n - mp->lso;
    if (chance(15))
        pick_ts_mode();
    int64_t off = mp->lso + rndn(span + 1);
    if (r < 24)
        op_append_json(t, p);
    else if (r < 29)
        op_append_topic(t);
    else if (r < 34)
        op_append_binary(t, p);
    else if (r < 40)
        op_idempotent(t, p);
    else if (r < 47) {
        what("page of %s-%d", t->name, p);
        int k = (int)rndn(10);
        if (k < 5) {
            char sel[40];
            int64_t o = chance(10) ? off + rndn(5) - 2 : off;
            snprintf(sel, sizeof sel, "offset=%lld", (long long)o);
            check_page_sel(t, p, sel, o, 1 + (int)rndn(30), chance(20) ? 1 + (long)rndn(200) : -1,
                           chance(30));
        }
        else if (k < 8)
            check_selectors(t, p);
        else
            check_single(t, p, chance(10) ? off + rndn(5) - 2 : off);
    } else if (r < 53) {
        what("stream of %s-%d", t->name, p);
        check_stream(t, p, off, chance(50), chance(30));
    } else if (r < 59) {
        what("raw read of %s-%d", t->name, p);
        check_raw(t, p, chance(10) ? off + rndn(5) - 2 : off);
    } else if (r < 63)
        check_offsets(t, p);
    else if (r < 66)
        check_partition(t, p);
    else if (r < 69)
        check_segments(t, p);
    else if (r < 75)
        op_roll(t, p);
    else if (r < 78)
        op_delete_records(t, p);
    else if (r < 82)
        op_retention(t, p);
    else if (r < 87)
        op_compact(t, p);
    else if (r < 91)
        op_config(t);
    else if (r < 92)
        op_delete_topic(t);
    else if (r < 93)
        op_grow(t);
    else if (r < 97)
        op_invalid();
    else if (r < 98)
        op_restart();
    else
        op_crash();
}

static long long env_ll(const char *name, long long dflt)
{
    const char *v = getenv(name);
    return v && *v ? strtoll(v, NULL, 10) : dflt;
}

static void test_api_model(void **state)
{
    (void)state;
    g_seed = (unsigned long long)env_ll("API_MODEL_SEED", (long long)(time(NULL) ^ getpid()));
    int ops = (int)env_ll("API_MODEL_OPS", DEFAULT_OPS);
    fprintf(stderr, "# API_MODEL_SEED=%llu API_MODEL_OPS=%d\n", g_seed, ops);
    g_rng = g_seed * 0x9E3779B97F4A7C15ULL + 1;
    CHECK(ls_start(S, settings) == 0, "the server did not start");
    for (g_op = 0; g_op < ops; g_op++)
        one_op();
    g_op = -1;
    op_restart();
    fprintf(stderr,
            "# %ld records appended; %ld pages, %ld streams, %ld raw reads; segments deleted by "
            "log start %ld, bytes %ld, time %ld (%ld rolled); %ld records compacted away; "
            "%ld topics created, %ld deleted; %ld config changes; %ld invalid requests; %ld restarts, "
            "%ld kill -9 (%ld log starts fell back); %ld idempotent appends, %ld retries and refusals\n",
            g_stats.appended, g_stats.pages, g_stats.streams, g_stats.raws,
            g_stats.retention_deleted[0], g_stats.retention_deleted[1], g_stats.retention_deleted[2],
            g_stats.rolled, g_stats.compacted, g_stats.created, g_stats.deleted, g_stats.configs,
            g_stats.invalid, g_stats.restarts, g_stats.crashes, g_stats.lso_fell_back, g_stats.idempotent,
            g_stats.idempotent_refused);
    for (int i = 0; i < AM_NNAMES; i++) {
        for (int p = 0; p < AM_MAXP; p++)
            am_part_reset(&T[i].p[p]);
        json_decref(T[i].overrides);
    }
    CHECK(ls_stop(S) == 0, "the server did not stop cleanly");
    ls_cleanup(S);
}

/* After a failure too: a server left running would outlive the suite.
 * Its data dir stays then, for the post-mortem the failure asks for. */
static int teardown(void **state)
{
    (void)state;
    if (S->pid > 0) {
        fprintf(stderr, "# the server's data dir is kept: %s\n", S->dir);
        ls_kill9(S);
    }
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_api_model, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
