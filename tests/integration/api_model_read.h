/*
 * api_model_read.h - test_api_model.c's checks of what the server answers
 * against the model (api_model.h): records of a page (every start selector,
 * limits, encodings), of an NDJSON or SSE stream, of raw batches decoded by
 * the crash suites' own parser (tests/crash/crash_check.h); one record;
 * offsets by spec and timestamp; the partition description; the segment
 * listing; a stopped server's partition directory.  Checking pins the
 * timestamps the model knew only within a span.
 *
 * Included by test_api_model.c alone, after api_model.h.
 */
#ifndef TEST_API_MODEL_READ_H
#define TEST_API_MODEL_READ_H

#include "api_model.h"
#include "../crash/crash_check.h"

#include "eng_batch.h"
#include "eng_compress.h"

/* ---- checking records ----------------------------------------------------------------- */

static void check_bytes(json_t *got, const am_bytes *want, bool b64, const char *field, int64_t off)
{
    json_t *w = am_bytes_json(want, b64);
    bool same = json_equal(got, w);
    if (!same) {
        char *g = got ? json_dumps(got, JSON_ENCODE_ANY) : NULL, *e = json_dumps(w, JSON_ENCODE_ANY);
        fail_at(__LINE__, "offset %lld: %s is %s, expected %s", (long long)off, field,
                g ? g : "(absent)", e);
    }
    json_decref(w);
}

/* Checks a record of a page or stream against the model's record at off,
 * and pins a timestamp the model knew only within a span. */
static void check_record(am_part *mp, json_t *got, int64_t off, bool b64)
{
    CHECK(json_is_object(got), "record %lld is not an object", (long long)off);
    CHECK_EQ(jint(got, "offset"), off, "record offset");
    am_rec *r = &mp->r[off];
    long long ts = jint(got, "timestamp");
    CHECK(ts >= r->ts_lo && ts <= r->ts_hi, "offset %lld: timestamp %lld outside [%lld, %lld]",
          (long long)off, ts, (long long)r->ts_lo, (long long)r->ts_hi);
    r->ts_lo = r->ts_hi = ts;
    const char *tt = json_string_value(jget(got, "timestamp_type"));
    CHECK(tt && !strcmp(tt, r->log_append_time ? "LogAppendTime" : "CreateTime"),
          "offset %lld: timestamp_type %s", (long long)off, tt ? tt : "(none)");
    check_bytes(jget(got, "key"), &r->key, b64, "key", off);
    check_bytes(jget(got, "value"), &r->value, b64, "value", off);
    json_t *h = jget(got, "headers");
    CHECK(json_is_array(h) && (int)json_array_size(h) == r->nh, "offset %lld: %zu headers, expected %d",
          (long long)off, json_array_size(h), r->nh);
    for (int i = 0; i < r->nh; i++) {
        json_t *e = json_array_get(h, (size_t)i);
        check_bytes(jget(e, "name"), &r->hname[i], false, "header name", off);
        check_bytes(jget(e, "value"), &r->hval[i], b64, "header value", off);
    }
    CHECK(json_object_size(got) == 6, "offset %lld: %zu fields", (long long)off, json_object_size(got));
}

/* next_offset after records ending at last (from - 1 when none): past them,
 * at most the high watermark, skipping no record a reader sees. */
static void check_cursor(am_part *mp, long long next, int64_t from, int64_t last)
{
    int64_t lo = last >= from ? last + 1 : from;
    CHECK(next >= lo && next <= mp->n, "next_offset %lld outside [%lld, %lld]", next, (long long)lo,
          (long long)mp->n);
    CHECK(am_next_live(mp, lo) >= next, "next_offset %lld skips the record at %lld", next,
          (long long)am_next_live(mp, lo));
}

static void expect_range_error(ls_resp *r, am_part *mp)
{
    expect_err(r, 416, "offset_out_of_range");
    json_t *d = jget(r->json, "details");
    CHECK_EQ(jint(d, "log_start_offset"), mp->lso, "details.log_start_offset");
    CHECK_EQ(jint(d, "high_watermark"), mp->n, "details.high_watermark");
}

/* A page read with the query sel (a start selector, "" for none) that the
 * model says starts at off; max_bytes < 0: the default. */
static void check_page_sel(am_topic *t, int p, const char *sel, int64_t off, int max, long max_bytes,
                           bool b64)
{
    g_stats.pages++;
    am_part *mp = &t->p[p];
    char path[320], q[200], mb[40] = "";
    if (max_bytes >= 0)
        snprintf(mb, sizeof mb, "&max_bytes=%ld", max_bytes);
    snprintf(q, sizeof q, "/records?%s%smax_records=%d%s%s", sel, sel[0] ? "&" : "", max, mb,
             b64 ? "&encoding=base64" : "");
    part_path(path, sizeof path, t, p, q);
    ls_resp r;
    req("GET", path, NULL, NULL, 0, NULL, &r);
    if (off < mp->lso || off > mp->n) {
        expect_range_error(&r, mp);
        ls_resp_free(&r);
        return;
    }
    expect_ok(&r, 200);
    json_t *recs = jget(r.json, "records");
    CHECK(json_is_array(recs), "no records array");
    int64_t o = am_next_live(mp, off), last = off - 1;
    size_t i = 0, got = json_array_size(recs);
    for (; o < mp->n && (int)i < max && (max_bytes < 0 || i < got); o = am_next_live(mp, o + 1), i++) {
        CHECK(i < got, "GET %s: %zu records, the record at %lld is missing", path, got, (long long)o);
        check_record(mp, json_array_get(recs, i), o, b64);
        last = o;
    }
    CHECK(got == i, "GET %s: %zu records, expected %zu", path, got, i);
    if (max_bytes >= 0 && am_next_live(mp, off) < mp->n)
        CHECK(got >= 1, "GET %s: no record, though one exists", path);
    long long next = jint(r.json, "next_offset");
    check_cursor(mp, next, off, last);
    if ((int)i < max && max_bytes < 0)
        CHECK_EQ(next, mp->n, "next_offset of a page that reached the end");
    CHECK_EQ(jint(r.json, "high_watermark"), mp->n, "high_watermark");
    CHECK_EQ(jint(r.json, "log_start_offset"), mp->lso, "log_start_offset");
    ls_resp_free(&r);
}

static void check_page(am_topic *t, int p, int64_t off, int max, bool b64)
{
    char sel[40];
    snprintf(sel, sizeof sel, "offset=%lld", (long long)off);
    check_page_sel(t, p, sel, off, max, -1, b64);
}

/* The first live offset whose timestamp is >= ts, or -1. */
static int64_t model_offset_for_ts(am_part *mp, int64_t ts)
{
    for (int64_t o = am_next_live(mp, 0); o < mp->n; o = am_next_live(mp, o + 1)) {
        CHECK(mp->r[o].ts_lo == mp->r[o].ts_hi, "offset %lld's timestamp is not pinned", (long long)o);
        if (mp->r[o].ts_lo >= ts)
            return o;
    }
    return -1;
}

/* Every start selector of README's "Reading records" table, clamp too. */
static void check_selectors(am_topic *t, int p)
{
    am_part *mp = &t->p[p];
    char sel[80];
    int64_t start;
    int k = (int)rndn(8);
    switch (k) {
    case 0:
        snprintf(sel, sizeof sel, "offset=earliest");
        start = mp->lso;
        break;
    case 1:
        snprintf(sel, sizeof sel, "offset=latest");
        start = mp->n;
        break;
    case 2:
        snprintf(sel, sizeof sel, chance(50) ? "earliest" : "earliest=true");
        start = mp->lso;
        break;
    case 3:
        snprintf(sel, sizeof sel, "latest");
        start = mp->n;
        break;
    case 4: {
        int64_t n = rndn(mp->n - mp->lso + 3);
        snprintf(sel, sizeof sel, "tail=%lld", (long long)n);
        start = mp->n - n < mp->lso ? mp->lso : mp->n - n;
        break;
    }
    case 5: {
        int64_t ts = rand_ts();
        if (mp->n > mp->lso && chance(60)) {
            am_rec *x = &mp->r[mp->lso + rndn(mp->n - mp->lso)];
            ts = x->ts_lo + rndn(3) - 1;
        }
        if (ts < 0)
            ts = 0;
        snprintf(sel, sizeof sel, "timestamp=%lld", (long long)ts);
        start = model_offset_for_ts(mp, ts);
        if (start < 0)
            start = mp->n;
        break;
    }
    case 6:
        start = chance(50) ? mp->n + 1 + rndn(5) : mp->lso - 1 - rndn(3);
        snprintf(sel, sizeof sel, "offset=%lld&clamp=true", (long long)start);
        start = start < mp->lso ? mp->lso : start > mp->n ? mp->n : start;
        break;
    default:
        sel[0] = 0;
        start = mp->lso;
        break;
    }
    what("page of %s-%d from %s", t->name, p, sel[0] ? sel : "(no selector)");
    check_page_sel(t, p, sel, start, 1 + (int)rndn(30), -1, chance(30));
}

/* GET .../records/{offset}: the record, 404 where compaction removed it,
 * 416 outside [log start, high watermark). */
static void check_single(am_topic *t, int p, int64_t off)
{
    am_part *mp = &t->p[p];
    what("record %lld of %s-%d", (long long)off, t->name, p);
    char path[256], q[64];
    bool b64 = chance(30);
    snprintf(q, sizeof q, "/records/%lld%s", (long long)off, b64 ? "?encoding=base64" : "");
    part_path(path, sizeof path, t, p, q);
    ls_resp r;
    req("GET", path, NULL, NULL, 0, NULL, &r);
    if (off < mp->lso || off >= mp->n)
        expect_err(&r, 416, "offset_out_of_range");
    else if (!mp->r[off].stored)
        expect_err(&r, 404, "record_not_found");
    else {
        expect_ok(&r, 200);
        check_record(mp, r.json, off, b64);
    }
    ls_resp_free(&r);
}

/* Reads the whole partition page by page (pins every timestamp). */
static void check_all(am_topic *t, int p)
{
    am_part *mp = &t->p[p];
    int64_t off = mp->lso;
    for (int guard = 0; guard < 10000; guard++) {
        int64_t first = am_next_live(mp, off);
        int64_t cnt = am_live_count(mp, off, mp->n);
        check_page(t, p, off, 200, chance(30));
        if (cnt <= 200)
            return;
        int64_t o = first;
        for (int k = 1; k < 200; k++)
            o = am_next_live(mp, o + 1);
        off = o + 1;
    }
}

/* NDJSON or SSE from off, bounded by max_records so it ends without waiting. */
/* NDJSON or SSE from off, bounded so it ends without waiting: by
 * max_records, or by until_timestamp below a record still to come (the
 * stream stops before the first record later than it).  An SSE stream may
 * start from Last-Event-ID instead (it resumes after that id). */
static void check_stream(am_topic *t, int p, int64_t off, bool sse, bool b64)
{
    am_part *mp = &t->p[p];
    int64_t avail = am_live_count(mp, off, mp->n);
    if (off < mp->lso || off > mp->n || avail == 0)
        return;
    int max = 1 + (int)rndn(avail < 20 ? avail : 20);
    g_stats.streams++;
    char path[256], q[160], bound[64], last_id[64] = "";
    int64_t until = -1, stop = INT64_MAX; /* the first offset with a timestamp past until */
    if (chance(30)) {
        int64_t x = am_next_live(mp, off);
        for (int64_t k = rndn(avail); k > 0; k--)
            x = am_next_live(mp, x + 1);
        if (mp->r[x].ts_lo >= 1) {
            until = mp->r[x].ts_lo - 1;
            for (int64_t o = am_next_live(mp, off); o < mp->n; o = am_next_live(mp, o + 1))
                if (mp->r[o].ts_lo > until) {
                    stop = o;
                    break;
                }
        }
    }
    int n = 0; /* records the stream sends */
    for (int64_t o = am_next_live(mp, off); o < mp->n && o < stop && (until >= 0 || n < max);
         o = am_next_live(mp, o + 1))
        n++;
    if (until >= 0)
        snprintf(bound, sizeof bound, "until_timestamp=%lld", (long long)until);
    else
        snprintf(bound, sizeof bound, "max_records=%d", max);
    bool resume = sse && off > 0 && chance(30);
    if (resume) {
        snprintf(last_id, sizeof last_id, "Last-Event-ID: %lld", (long long)(off - 1));
        snprintf(q, sizeof q, "/records?%s%s", bound, b64 ? "&encoding=base64" : "");
    } else {
        snprintf(q, sizeof q, "/records?offset=%lld&%s%s", (long long)off, bound,
                 b64 ? "&encoding=base64" : "");
    }
    part_path(path, sizeof path, t, p, q);
    ls_resp r;
    CHECK(ru_get_accept(S, path, sse ? "text/event-stream" : "application/x-ndjson",
                        resume ? last_id : NULL, &r) == 0,
          "GET %s: no answer", path);
    expect_ok(&r, 200);
    json_t *items;
    if (sse) {
        int comments;
        items = ru_sse_parse(r.body, r.len, &comments);
    } else {
        items = ru_ndjson_parse(r.body, r.len);
    }
    CHECK(json_array_size(items) == (size_t)n + 1, "%s %s%s%s: %zu items, expected %d records and the end",
          sse ? "SSE" : "NDJSON", path, resume ? " with " : "", last_id, json_array_size(items), n);
    int64_t o = am_next_live(mp, off), last = off - 1;
    for (int i = 0; i < n; i++, o = am_next_live(mp, o + 1)) {
        json_t *it = json_array_get(items, (size_t)i);
        if (sse) {
            CHECK(!strcmp(json_string_value(jget(it, "event")), "record"), "SSE event %d is %s", i,
                  json_string_value(jget(it, "event")));
            CHECK_EQ(jint(it, "id"), o, "SSE id");
            it = jget(it, "data");
        }
        check_record(mp, it, o, b64);
        last = o;
    }
    json_t *end = json_array_get(items, (size_t)n);
    if (sse) {
        CHECK(!strcmp(json_string_value(jget(end, "event")), "end"), "SSE's last event is %s",
              json_string_value(jget(end, "event")));
        end = jget(end, "data");
    }
    long long next = jint(end, "next_offset");
    check_cursor(mp, next, off, last);
    if (until >= 0)
        CHECK(next <= stop, "next_offset %lld past the record at %lld, later than until_timestamp", next,
              (long long)stop);
    json_decref(items);
    ls_resp_free(&r);
}

/* Raw batches from off, decoded by the test's own parser (CRC, framing),
 * decompressed through the engine's codecs. */
static void check_raw(am_topic *t, int p, int64_t off)
{
    g_stats.raws++;
    am_part *mp = &t->p[p];
    char path[256], q[96];
    long max_bytes = chance(50) ? 1 + (long)rndn(2000) : 1048576;
    snprintf(q, sizeof q, "/records?offset=%lld&max_bytes=%ld", (long long)off, max_bytes);
    part_path(path, sizeof path, t, p, q);
    ls_resp r;
    req("GET", path, NULL, NULL, 0, "application/octet-stream", &r);
    if (off < mp->lso || off > mp->n) {
        expect_range_error(&r, mp);
        ls_resp_free(&r);
        return;
    }
    expect_ok(&r, 200);
    CHECK_EQ(atoll(ls_header(&r, "X-High-Watermark")), mp->n, "X-High-Watermark");
    CHECK_EQ(atoll(ls_header(&r, "X-Log-Start-Offset")), mp->lso, "X-Log-Start-Offset");
    long long xnext = atoll(ls_header(&r, "X-Next-Offset"));
    const uint8_t *b = (const uint8_t *)r.body;
    size_t pos = 0, nb = 0;
    int64_t o = am_next_live(mp, off), last = off - 1, batch_end = off;
    eng_buf scratch = {0};
    while (pos < r.len) {
        CHECK(r.len - pos >= 61, "raw: %zu bytes after batch %zu", r.len - pos, nb);
        size_t size = (size_t)cc_be32(b + pos + 8) + 12;
        CHECK(size >= 61 && size <= r.len - pos, "raw: batch %zu runs past the body", nb);
        const uint8_t *bt = b + pos;
        CHECK(bt[16] == 2, "raw: batch %zu magic %d", nb, bt[16]);
        CHECK(cc_crc32c(bt + 21, size - 21) == cc_be32(bt + 17), "raw: batch %zu CRC mismatch", nb);
        int64_t base = (int64_t)cc_be64(bt);
        int16_t attr = (int16_t)(bt[21] << 8 | bt[22]);
        int32_t last_delta = (int32_t)cc_be32(bt + 23);
        int64_t base_ts = (int64_t)cc_be64(bt + 27), max_ts = (int64_t)cc_be64(bt + 35);
        int32_t count = (int32_t)cc_be32(bt + 57);
        CHECK(nb > 0 || (base <= off && off <= base + last_delta) || base > off,
              "raw: the first batch [%lld, %lld] does not hold %lld", (long long)base,
              (long long)(base + last_delta), (long long)off);
        CHECK(base >= batch_end || nb == 0, "raw: batch at %lld overlaps the one before", (long long)base);
        eng_batch_header h;
        CHECK(eng_batch_header_decode(bt, size, &h) == 0, "raw: batch %zu header", nb);
        const uint8_t *plain;
        size_t plen;
        CHECK(eng_batch_plain_records(bt, &h, &scratch, &plain, &plen) == 0,
              "raw: batch %zu does not decompress", nb);
        uint8_t *whole = malloc(61 + plen);
        CHECK(whole != NULL, "out of memory");
        memcpy(whole, bt, 61);
        memcpy(whole + 61, plain, plen);
        cc_part cp = {0};
        int rc = cc_records(&cp, "raw", whole, 61 + plen, base, last_delta, count, base_ts);
        free(whole);
        CHECK(rc == 0, "raw: %s", cp.err);
        for (size_t i = 0; i < cp.nrecs; i++) {
            cc_record *cr = &cp.recs[i];
            if (cr->offset < off)
                continue;
            CHECK(cr->offset == o, "raw: record at %lld, the model's next is %lld",
                  (long long)cr->offset, (long long)o);
            am_rec *m = &mp->r[o];
            int64_t ts = (attr & ENG_ATTR_LOG_APPEND_TIME) ? max_ts : cr->timestamp;
            CHECK(ts >= m->ts_lo && ts <= m->ts_hi, "raw: offset %lld timestamp %lld",
                  (long long)o, (long long)ts);
            CHECK(am_bytes_eq(&m->key, cr->key, (size_t)(cr->key_len > 0 ? cr->key_len : 0)) &&
                      (cr->key_len < 0) == (m->key.data == NULL),
                  "raw: offset %lld key differs", (long long)o);
            CHECK(am_bytes_eq(&m->value, cr->value, (size_t)(cr->value_len > 0 ? cr->value_len : 0)) &&
                      (cr->value_len < 0) == (m->value.data == NULL),
                  "raw: offset %lld value differs", (long long)o);
            last = o;
            o = am_next_live(mp, o + 1);
        }
        cc_part_free(&cp);
        batch_end = base + last_delta + 1;
        pos += size;
        nb++;
    }
    free(scratch.data);
    if (off == mp->n)
        CHECK(nb == 0, "raw: %zu batches at the high watermark", nb);
    else if (am_live_count(mp, off, mp->n) > 0)
        CHECK(nb > 0, "raw: no batch from %lld below the high watermark %lld", (long long)off,
              (long long)mp->n);
    if (nb > 1)
        CHECK(r.len <= (size_t)max_bytes, "raw: %zu bytes in %zu batches, max_bytes %ld", r.len, nb,
              max_bytes);
    /* The cursor may pass offsets compaction emptied after the last batch
     * (the server knows the next batch's base when the offset index took
     * it there); README promises a cursor, not the last batch's end, so
     * what must hold is that it skips no record. */
    if (nb > 0)
        CHECK(xnext >= batch_end && xnext <= mp->n && am_live_count(mp, batch_end, xnext) == 0,
              "X-Next-Offset %lld, the last batch ends at %lld, the next live record is %lld", xnext,
              (long long)batch_end, (long long)am_next_live(mp, batch_end));
    else
        CHECK(xnext >= off && xnext <= mp->n, "X-Next-Offset %lld", xnext);
    (void)last;
    ls_resp_free(&r);
}

/* ---- offsets, descriptions, segments ---------------------------------------------------------- */

static void check_offsets(am_topic *t, int p)
{
    am_part *mp = &t->p[p];
    what("offsets of %s-%d", t->name, p);
    char path[256];
    ls_resp r;
    part_path(path, sizeof path, t, p, "/offsets?spec=earliest");
    req("GET", path, NULL, NULL, 0, NULL, &r);
    expect_ok(&r, 200);
    CHECK_EQ(jint(r.json, "offset"), mp->lso, "earliest");
    ls_resp_free(&r);
    part_path(path, sizeof path, t, p, "/offsets?spec=latest");
    req("GET", path, NULL, NULL, 0, NULL, &r);
    expect_ok(&r, 200);
    CHECK_EQ(jint(r.json, "offset"), mp->n, "latest");
    ls_resp_free(&r);
    /* A T near a record's own timestamp, or anywhere. */
    int64_t T0 = rand_ts();
    if (mp->n > mp->lso && chance(60)) {
        am_rec *x = &mp->r[mp->lso + rndn(mp->n - mp->lso)];
        if (x->ts_lo == x->ts_hi)
            T0 = x->ts_lo + rndn(3) - 1;
        if (T0 < 0)
            T0 = 0;
    }
    char q[96];
    snprintf(q, sizeof q, "/offsets?timestamp=%lld", (long long)T0);
    part_path(path, sizeof path, t, p, q);
    req("GET", path, NULL, NULL, 0, NULL, &r);
    expect_ok(&r, 200);
    int64_t want = model_offset_for_ts(mp, T0);
    json_t *off = jget(r.json, "offset");
    if (want < 0) {
        CHECK(json_is_null(off), "timestamp %lld: offset %s, expected null", (long long)T0, r.body);
    } else {
        CHECK(json_is_integer(off) && json_integer_value(off) == want,
              "timestamp %lld: %s, expected offset %lld (ts %lld)", (long long)T0, r.body,
              (long long)want, (long long)mp->r[want].ts_lo);
        CHECK_EQ(jint(r.json, "timestamp"), mp->r[want].ts_lo, "timestamp of the offset found");
    }
    ls_resp_free(&r);
    /* The largest timestamp of the live records, and an offset holding it. */
    int64_t maxts = -1;
    for (int64_t o = am_next_live(mp, 0); o < mp->n; o = am_next_live(mp, o + 1))
        if (mp->r[o].ts_lo > maxts)
            maxts = mp->r[o].ts_lo;
    part_path(path, sizeof path, t, p, "/offsets?spec=max_timestamp");
    req("GET", path, NULL, NULL, 0, NULL, &r);
    expect_ok(&r, 200);
    off = jget(r.json, "offset");
    if (maxts < 0) {
        CHECK(json_is_null(off), "max_timestamp: %s, the model has no timestamp", r.body);
    } else {
        CHECK(json_is_integer(off), "max_timestamp: %s, the model has %lld", r.body, (long long)maxts);
        long long mo = json_integer_value(off);
        CHECK_EQ(jint(r.json, "timestamp"), maxts, "max_timestamp");
        CHECK(mo >= mp->lso && mo < mp->n && mp->r[mo].stored && mp->r[mo].ts_lo == maxts,
              "max_timestamp: offset %lld does not hold a record with timestamp %lld", mo,
              (long long)maxts);
    }
    ls_resp_free(&r);
}

static void check_partition(am_topic *t, int p)
{
    am_part *mp = &t->p[p];
    what("describe %s-%d", t->name, p);
    char path[256];
    part_path(path, sizeof path, t, p, "");
    ls_resp r;
    req("GET", path, NULL, NULL, 0, NULL, &r);
    expect_ok(&r, 200);
    CHECK_EQ(jint(r.json, "log_start_offset"), mp->lso, "log_start_offset");
    CHECK_EQ(jint(r.json, "high_watermark"), mp->n, "high_watermark");
    CHECK_EQ(jint(r.json, "log_end_offset"), mp->n, "log_end_offset");
    int64_t maxts = -1;
    for (int64_t k = am_next_live(mp, 0); k < mp->n; k = am_next_live(mp, k + 1))
        maxts = mp->r[k].ts_lo > maxts ? mp->r[k].ts_lo : maxts;
    json_t *mt = jget(r.json, "max_timestamp");
    CHECK(maxts < 0 ? json_is_null(mt) || json_integer_value(mt) >= 0
                    : json_is_integer(mt) && json_integer_value(mt) >= maxts,
          "max_timestamp %s, the live records' largest is %lld", json_dumps(mt, JSON_ENCODE_ANY),
          (long long)maxts);
    int64_t o = am_next_live(mp, mp->lso);
    json_t *ft = jget(r.json, "first_timestamp");
    if (o < mp->n && mp->r[o].ts_lo == mp->r[o].ts_hi && mp->r[o].ts_lo >= 0)
        CHECK(json_is_integer(ft) && json_integer_value(ft) == mp->r[o].ts_lo,
              "first_timestamp %s, expected %lld (offset %lld)", r.body, (long long)mp->r[o].ts_lo,
              (long long)o);
    ls_resp_free(&r);
}

/* The segment listing (a new reference), checked against the model. */
static json_t *segments(am_topic *t, int p, long long *total)
{
    am_part *mp = &t->p[p];
    char path[256];
    part_path(path, sizeof path, t, p, "/segments");
    ls_resp r;
    req("GET", path, NULL, NULL, 0, NULL, &r);
    expect_ok(&r, 200);
    json_t *segs = json_incref(jget(r.json, "segments"));
    ls_resp_free(&r);
    size_t n = json_array_size(segs);
    CHECK(n >= 1, "no segment");
    *total = 0;
    for (size_t i = 0; i < n; i++) {
        json_t *s = json_array_get(segs, i);
        long long base = jint(s, "base_offset"), next = jint(s, "next_offset");
        *total += jint(s, "size_bytes");
        CHECK(json_is_true(jget(s, "active")) == (i == n - 1), "segment %lld active flag", base);
        CHECK(base <= next, "segment %lld next_offset %lld", base, next);
        if (i + 1 < n)
            CHECK_EQ(jint(json_array_get(segs, i + 1), "base_offset"), next, "the next segment's base");
        else
            CHECK_EQ(next, mp->n, "the last segment's next_offset");
        if (i == 0)
            CHECK(base <= mp->lso, "the first segment starts at %lld, past the log start %lld", base,
                  (long long)mp->lso);
        if (base >= mp->lso) {
            CHECK_EQ(jint(s, "record_count"), am_live_count(mp, base, next),
                     "record_count of a segment");
            /* Its first record's timestamp, as a reader sees it. */
            int64_t f = am_next_live(mp, base);
            json_t *ft = jget(s, "first_timestamp");
            if (f < next && mp->r[f].ts_lo >= 0)
                CHECK(json_is_integer(ft) && json_integer_value(ft) == mp->r[f].ts_lo,
                      "segment %lld: first_timestamp %s, its first record (%lld) has %lld", base,
                      json_dumps(ft, JSON_ENCODE_ANY), (long long)f, (long long)mp->r[f].ts_lo);
        }
    }
    return segs;
}

static void check_segments(am_topic *t, int p)
{
    what("segments of %s-%d", t->name, p);
    long long total;
    json_decref(segments(t, p, &total));
    char path[256];
    part_path(path, sizeof path, t, p, "");
    ls_resp r;
    req("GET", path, NULL, NULL, 0, NULL, &r);
    expect_ok(&r, 200);
    CHECK_EQ(jint(r.json, "size_bytes"), total, "partition size_bytes against its segments'");
    ls_resp_free(&r);
}

/* A stopped server's partition directory, read by the crash suites' own
 * parser (kafka-format.md's layouts: CRCs, framing, indexes), holds the
 * model's records from the log start offset on. */
static void check_disk(am_topic *t, int p)
{
    am_part *mp = &t->p[p];
    if (mp->compressed)
        return;
    char dir[2048];
    snprintf(dir, sizeof dir, "%s/%s-%d", S->dir, t->name, p);
    cc_part cp;
    int rc = cc_check_partition(dir, &cp);
    CHECK(rc == 0, "%s: %s", dir, cp.err);
    CHECK_EQ(cp.next_offset, mp->n, "the log end offset on disk");
    int64_t o = am_next_live(mp, 0);
    for (size_t i = 0; i < cp.nrecs; i++) {
        cc_record *cr = &cp.recs[i];
        if (cr->offset < mp->lso)
            continue;
        CHECK(cr->offset == o, "%s: record at %lld on disk, the model's next is %lld", dir,
              (long long)cr->offset, (long long)o);
        am_rec *m = &mp->r[o];
        CHECK(am_bytes_eq(&m->key, cr->key, (size_t)(cr->key_len > 0 ? cr->key_len : 0)) &&
                  am_bytes_eq(&m->value, cr->value, (size_t)(cr->value_len > 0 ? cr->value_len : 0)),
              "%s: offset %lld differs on disk", dir, (long long)o);
        if (!m->log_append_time)
            CHECK_EQ(cr->timestamp, m->ts_lo, "a timestamp on disk");
        o = am_next_live(mp, o + 1);
    }
    CHECK(o == mp->n, "%s: the record at %lld is not on disk", dir, (long long)o);
    cc_part_free(&cp);
}

#endif
