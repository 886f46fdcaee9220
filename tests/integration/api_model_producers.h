/*
 * api_model_producers.h - test_api_model.c's idempotent producers (README
 * "Idempotent producers"): binary batches with a producer id, epoch and
 * sequence, new ones, exact retries (200 "duplicate": true with the first
 * attempt's offsets, nothing written), out-of-sequence ones (409
 * out_of_order_sequence) and stale epochs (409 invalid_producer_epoch), and
 * GET .../producers against the model.  What a restart keeps: each
 * producer's last batch (am_prod.must).
 *
 * Included by test_api_model.c alone, after its append helpers (rand_rec,
 * set_ts, check_append_answer), which it uses.
 */
#ifndef TEST_API_MODEL_PRODUCERS_H
#define TEST_API_MODEL_PRODUCERS_H

#include "api_model_admin.h"

/* Sorted, as the listing is; the last one past 32 bits. */
static const int64_t PIDS[AM_NPIDS] = {7, 1000, 1099511627776LL};

/* One record of the model as the engine's encoder takes it. */
static void rec_spec(const am_rec *r, int64_t ts, eng_record_spec *spec, eng_record_header hdr[2])
{
    for (int h = 0; h < r->nh; h++)
        hdr[h] = (eng_record_header){(const uint8_t *)r->hname[h].data, (int32_t)r->hname[h].len,
                                     (const uint8_t *)r->hval[h].data,
                                     r->hval[h].data ? (int32_t)r->hval[h].len : -1};
    *spec = (eng_record_spec){ts, (const uint8_t *)r->key.data, r->key.data ? (int32_t)r->key.len : -1,
                              (const uint8_t *)r->value.data,
                              r->value.data ? (int32_t)r->value.len : -1, hdr, (uint32_t)r->nh};
}

/* Compresses the batch at *body + at (sz bytes) with a random codec, its
 * records section as one stream, as a producer sends it; returns its new
 * size (*body may move).  Stored so unless the topic recompresses. */
static size_t compress_batch(am_topic *t, am_part *mp, uint8_t **body, size_t at, size_t sz)
{
    int codec = 1 + (int)rndn(4);
    eng_buf z = {0};
    CHECK(eng_records_compress(codec, ENG_CODEC_DEFAULT_LEVEL, *body + at + ENG_BATCH_OVERHEAD,
                               sz - ENG_BATCH_OVERHEAD, &z) == 0,
          "compressing a batch failed");
    uint8_t *nb = realloc(*body, at + ENG_BATCH_OVERHEAD + z.len);
    CHECK(nb != NULL, "out of memory");
    *body = nb;
    memcpy(nb + at + ENG_BATCH_OVERHEAD, z.data, z.len);
    free(z.data);
    sz = ENG_BATCH_OVERHEAD + z.len;
    uint8_t *bt = nb + at;
    ru_put_be32(bt + 8, (uint32_t)(sz - 12));
    bt[22] = (uint8_t)(bt[22] | codec);
    ru_put_be32(bt + 17, eng_batch_compute_crc(bt, sz));
    if (!t->codec && strcmp(json_string_value(jget(t->overrides, "compression.type"))
                                ? json_string_value(jget(t->overrides, "compression.type"))
                                : "producer",
                            "uncompressed"))
        mp->compressed = true;
    return sz;
}

/* The partition's producers listing against the model. */
static void check_producers(am_topic *t, int p)
{
    am_part *mp = &t->p[p];
    char path[256];
    part_path(path, sizeof path, t, p, "/producers");
    what("producers of %s-%d", t->name, p);
    ls_resp r;
    req("GET", path, NULL, NULL, 0, NULL, &r);
    expect_ok(&r, 200);
    json_t *ps = jget(r.json, "producers");
    size_t k = 0;
    for (int i = 0; i < AM_NPIDS; i++) {
        am_prod *pr = &mp->prod[i];
        if (!pr->nb)
            continue;
        json_t *g = json_array_get(ps, k++);
        CHECK(g != NULL, "producer %lld missing from %s", (long long)PIDS[i], r.body);
        CHECK_EQ(jint(g, "producer_id"), PIDS[i], "producer_id");
        CHECK_EQ(jint(g, "producer_epoch"), pr->epoch, "producer_epoch");
        am_pbatch *last = &pr->b[pr->nb - 1];
        CHECK_EQ(jint(g, "last_sequence"), last->last_seq, "last_sequence");
        CHECK_EQ(jint(g, "last_offset"), last->last_off, "last_offset");
        long long lt = jint(g, "last_timestamp");
        CHECK(lt >= last->ts_lo && lt <= last->ts_hi, "producer %lld: last_timestamp %lld, expected [%lld, %lld]",
              (long long)PIDS[i], lt, last->ts_lo, last->ts_hi);
        /* A suffix of the model's batches, at least as long as must. */
        json_t *bs = jget(g, "batches");
        int m = (int)json_array_size(bs);
        CHECK(m >= pr->must && m <= pr->nb, "producer %lld: %d batches listed, the model has %d (%d kept for sure): %s",
              (long long)PIDS[i], m, pr->nb, pr->must, r.body);
        for (int j = 0; j < m; j++) {
            json_t *gb = json_array_get(bs, (size_t)j);
            am_pbatch *b = &pr->b[pr->nb - m + j];
            CHECK_EQ(jint(gb, "first_sequence"), b->first_seq, "a listed batch's first_sequence");
            CHECK_EQ(jint(gb, "last_sequence"), b->last_seq, "a listed batch's last_sequence");
            CHECK_EQ(jint(gb, "first_offset"), b->first_off, "a listed batch's first_offset");
            CHECK_EQ(jint(gb, "last_offset"), b->last_off, "a listed batch's last_offset");
        }
    }
    CHECK(json_array_size(ps) == k, "%zu producers listed, the model has %zu: %s", json_array_size(ps), k,
          r.body);
    ls_resp_free(&r);
}

/* After a restart only each producer's last batch is known for sure. */
static void producers_restarted(void)
{
    for (int i = 0; i < AM_NNAMES; i++)
        for (int p = 0; T[i].live && p < T[i].np; p++)
            for (int j = 0; j < AM_NPIDS; j++)
                if (T[i].p[p].prod[j].nb)
                    T[i].p[p].prod[j].must = 1;
}

enum { IDEM_NEW, IDEM_RETRY, IDEM_OOO, IDEM_STALE };

/* One request of one or two batches of producer PIDS[i], the first at
 * epoch, seq; kind says what the answer must be. */
static void op_idempotent(am_topic *t, int p)
{
    am_part *mp = &t->p[p];
    /* Mostly a producer the partition knows: that is where retries and
     * refusals are. */
    int i = (int)rndn(AM_NPIDS);
    for (int j = 0; j < AM_NPIDS && !mp->prod[i].nb && chance(60); j++)
        i = (i + 1) % AM_NPIDS;
    am_prod *pr = &mp->prod[i];
    int kind = IDEM_NEW, k = (int)rndn(100);
    if (pr->nb && k < 25)
        kind = IDEM_RETRY;
    else if (pr->nb && k < 40)
        kind = IDEM_OOO;
    else if (pr->nb && pr->epoch > 0 && k < 50)
        kind = IDEM_STALE;
    int epoch = pr->epoch, nbatch = 1, counts[2];
    int32_t seq;
    am_pbatch *orig = NULL;
    counts[0] = 1 + (int)rndn(5);
    counts[1] = 1 + (int)rndn(3);
    if (kind == IDEM_RETRY) {
        orig = &pr->b[pr->nb - 1 - rndn(pr->must)];
        seq = orig->first_seq;
        counts[0] = orig->last_seq - orig->first_seq + 1;
    } else if (kind == IDEM_OOO) {
        if (chance(30)) {
            epoch++; /* a new epoch not starting at 0 */
            seq = 1 + (int32_t)rndn(5);
        } else {
            seq = pr->b[pr->nb - 1].last_seq + 2 + (int32_t)rndn(5);
        }
    } else if (kind == IDEM_STALE) {
        epoch = (int)rndn(pr->epoch);
        seq = (int32_t)rndn(100);
    } else if (!pr->nb) {
        epoch = (int)rndn(4);
        seq = (int32_t)rndn(1000); /* unknown: any sequence */
        nbatch = 1 + chance(30);
    } else if (chance(10)) {
        epoch++;
        seq = 0;
    } else {
        seq = pr->b[pr->nb - 1].last_seq + 1;
        nbatch = 1 + chance(30);
    }
    static const char *const kinds[] = {"new", "retry", "out-of-sequence", "stale-epoch"};
    what("idempotent %s append to %s-%d: producer %lld epoch %d seq %d, %d batch(es)", kinds[kind], t->name, p,
         (long long)PIDS[i], epoch, (int)seq, nbatch);

    am_rec recs[8];
    int64_t ts[8];
    uint8_t *body = NULL;
    size_t len = 0;
    int n = 0;
    for (int b = 0; b < nbatch; b++) {
        eng_record_spec spec[5];
        eng_record_header hdr[5][2];
        for (int j = 0; j < counts[b]; j++) {
            am_rec *r = &recs[n + j];
            memset(r, 0, sizeof *r);
            r->stored = true;
            rand_rec(t, r, &ts[n + j]);
            /* Recent: a snapshot forgets producers a day past their last
             * timestamp (producer.id.expiration.ms). */
            ts[n + j] = now_ms() - rndn(60000);
            rec_spec(r, ts[n + j], &spec[j], hdr[j]);
        }
        size_t cap = eng_batch_encoded_size(spec, (size_t)counts[b]);
        uint8_t *nb = realloc(body, len + cap);
        CHECK(nb != NULL, "out of memory");
        body = nb;
        eng_batch_params bp;
        eng_batch_params_init(&bp);
        bp.producer_id = PIDS[i];
        bp.producer_epoch = (int16_t)epoch;
        bp.base_sequence = seq + n;
        size_t sz = eng_batch_encode(body + len, cap, &bp, spec, (size_t)counts[b]);
        CHECK(sz > 0, "encoding a batch failed");
        if (kind == IDEM_NEW && chance(25))
            sz = compress_batch(t, mp, &body, len, sz);
        len += sz;
        n += counts[b];
    }
    char path[256];
    part_path(path, sizeof path, t, p, "/records");
    int64_t base = mp->n;
    int added = 0;
    long long t0 = now_ms();
    ls_resp r;
    req("POST", path, "application/octet-stream", body, len, NULL, &r);
    long long t1 = now_ms();
    free(body);
    if (kind != IDEM_NEW)
        g_stats.idempotent_refused++;
    if (kind == IDEM_OOO || kind == IDEM_STALE) {
        expect_err(&r, 409, kind == IDEM_OOO ? "out_of_order_sequence" : "invalid_producer_epoch");
    } else if (kind == IDEM_RETRY) {
        expect_ok(&r, 200);
        CHECK(json_is_true(jget(r.json, "duplicate")), "a retry not answered as a duplicate: %s", r.body);
        CHECK_EQ(jint(r.json, "base_offset"), orig->first_off, "a retry's base_offset");
        CHECK_EQ(jint(r.json, "last_offset"), orig->last_off, "a retry's last_offset");
        CHECK_EQ(jint(r.json, "high_watermark"), mp->n, "a retry's high_watermark");
    } else {
        check_append_answer(&r, t, p, base, n);
        CHECK(!jget(r.json, "duplicate") || json_is_false(jget(r.json, "duplicate")),
              "a new batch answered as a duplicate: %s", r.body);
        if (epoch != pr->epoch)
            pr->nb = pr->must = 0; /* a new epoch forgets the old one's batches */
        pr->epoch = epoch;
        int at = 0;
        for (int b = 0; b < nbatch; b++) {
            am_pbatch pb = {seq + at, seq + at + counts[b] - 1, base + at, base + at + counts[b] - 1, -1, -1};
            for (int j = at; j < at + counts[b]; j++) {
                am_rec *m = am_push(mp);
                CHECK(m != NULL, "out of memory");
                *m = recs[j];
                set_ts(t, m, ts[j], t0, t1);
                if (!t->lat && ts[j] > pb.ts_lo)
                    pb.ts_lo = pb.ts_hi = ts[j];
            }
            if (t->lat) {
                pb.ts_lo = t0;
                pb.ts_hi = t1;
            }
            if (pr->nb == AM_PBATCHES) {
                memmove(&pr->b[0], &pr->b[1], (AM_PBATCHES - 1) * sizeof pr->b[0]);
                pr->nb--;
            }
            pr->b[pr->nb++] = pb;
            if (pr->must < AM_PBATCHES)
                pr->must++;
            at += counts[b];
        }
        g_stats.appended += n;
        g_stats.idempotent++;
        mp->compressed |= t->codec;
        added = n;
        n = 0; /* the model owns the records now */
    }
    for (int j = 0; j < n; j++)
        am_rec_free(&recs[j]);
    ls_resp_free(&r);
    if (added)
        check_page(t, p, base, added, true);
    check_partition(t, p); /* nothing written by a refusal or a retry */
    check_producers(t, p);
}

#endif
