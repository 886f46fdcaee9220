/*
 * api_records.c - appending and reading records as JSON.
 *
 * Append: the body is parsed into record specs, encoded into one RecordBatch
 * v2 (the same bytes a Kafka producer would send) and handed to the engine,
 * which assigns offsets and writes it whole or not at all.  Keyed appends
 * spread records over partitions with Kafka's murmur2 partitioner (null keys
 * round-robin), one batch per partition.
 *
 * Read: whole batches come back from the engine; records below the requested
 * offset are skipped, and the answer stops at max_records, max_bytes (after at
 * least one record), until_timestamp or the high watermark.  next_offset is
 * the cursor for the next read: compaction may leave gaps, so clients follow
 * it instead of counting.
 */
#include "api_codec.h"
#include "api_common.h"
#include "api_errors.h"
#include "api_json_arena.h"
#include "api_router.h"
#include "eng_batch.h"
#include "eng_buf.h"
#include "eng_compress.h"
#include "eng_fault.h"
#include "eng_fs.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static json_t *append_result_json(const eng_append_result *r)
{
    json_t *o = json_pack("{s:I,s:I,s:i,s:s,s:I,s:I,s:I}", "base_offset", (json_int_t)r->base_offset,
                          "last_offset", (json_int_t)r->last_offset, "record_count",
                          (int)r->record_count, "timestamp_type",
                          r->timestamp_type == ENG_TS_LOG_APPEND_TIME ? "LogAppendTime" : "CreateTime",
                          "log_start_offset", (json_int_t)r->log_start_offset, "high_watermark",
                          (json_int_t)r->high_watermark, "batch_bytes", (json_int_t)r->batch_bytes);
    json_object_set_new(o, "log_append_time", json_integer(r->log_append_time));
    if (r->duplicate) /* a producer's retry: nothing written, the first answer's offsets */
        json_object_set_new(o, "duplicate", json_true());
    return o;
}

/* Encodes specs and appends them; fills res or d.  With async, a durable
 * append may return with res->durable_pending (see append_answer). */
static int append_specs(eng_partition *p, const eng_record_spec *recs, size_t n,
                        int64_t expected_offset, bool async, eng_append_result *res,
                        eng_errdetail *d)
{
    uint8_t *batch;
    size_t len;
    int rc = api_encode_batch(recs, n, &batch, &len);
    if (rc)
        return eng_fail(d, rc, "out of memory encoding %zu records", n);
    eng_append_opts o = {.expected_offset = expected_offset, .producer_batches = false,
                         .async_durable = async};
    rc = eng_partition_append(p, batch, len, &o, res, d);
    free(batch);
    return rc;
}

/* The details of a failed JSON append, rewriting d's message where the
 * engine's words are a batch's: a client that sent JSON records knows them
 * by their place in its request, not by a batch index and an offset delta.
 * pos maps a record's place in the batch to its place in the request (NULL:
 * the same), for n records.  A new reference. */
static json_t *json_append_details(int rc, eng_errdetail *d, const size_t *pos, size_t n)
{
    if (rc == ENG_ENULLKEY && d->has_bounds && d->hi >= 0 && (uint64_t)d->hi < n) {
        size_t at = pos ? pos[d->hi] : (size_t)d->hi;
        snprintf(d->message, sizeof d->message,
                 "record %zu has a null key, which a compacted topic does not accept", at);
        return json_pack("{s:I}", "record", (json_int_t)at);
    }
    if (rc == ENG_ETIMESTAMP && d->has_bounds && d->hi >= 0 && (uint64_t)d->hi < n) {
        size_t at = pos ? pos[d->hi] : (size_t)d->hi;
        /* The engine's reason follows its "batch N: " */
        const char *why = strstr(d->message, ": ");
        char reason[sizeof d->message];
        snprintf(reason, sizeof reason, "%s", why ? why + 2 : d->message);
        snprintf(d->message, sizeof d->message, "record %zu: %.200s", at, reason);
        return json_pack("{s:I}", "record", (json_int_t)at);
    }
    return api_engine_details(rc, d);
}

static bool parse_body(api_ctx *ctx, const api_request *req, api_response *resp,
                       api_append_body *body)
{
    if (!api_json_content_type(req, resp))
        return false;
    api_codec_err cerr = {0};
    if (api_parse_append(req->body, req->body_len, eng_now_ms(), ctx->limits.max_records_per_request,
                         body, &cerr)) {
        api_error(resp, req, cerr.code, api_codec_err_details(&cerr), "%s", cerr.message);
        return false;
    }
    return true;
}

/* What a JSON body sent to one partition's URL may not contradict: records
 * naming another partition, or an expected_offset given both in the body and
 * (as binary appends take it) in the query with different values.  Sets
 * *expected to the one given, -1 for none. */
static bool partition_body_ok(const api_request *req, api_response *resp, int32_t partition,
                              const api_append_body *body, int64_t *expected)
{
    for (size_t i = 0; i < body->n; i++) {
        if (body->partitions[i] >= 0 && body->partitions[i] != partition) {
            api_error(resp, req, "invalid_request", NULL,
                      "record %zu names partition %d but was sent to partition %d's URL", i,
                      (int)body->partitions[i], (int)partition);
            return false;
        }
    }
    if (!api_query_i64(req, resp, "expected_offset", -1, 0, INT64_MAX, expected))
        return false;
    if (body->expected_offset >= 0 && *expected >= 0 && body->expected_offset != *expected) {
        api_error(resp, req, "invalid_request", NULL,
                  "expected_offset is %lld in the body but %lld in the query",
                  (long long)body->expected_offset, (long long)*expected);
        return false;
    }
    if (*expected < 0)
        *expected = body->expected_offset;
    return true;
}

/* A durable append waiting for its group commit, answered from the
 * committing thread. */
typedef struct durable_wait {
    api_async *async;
    eng_partition *p;
    eng_append_result res;
    char request_id[65];
} durable_wait;

static void durable_answer(eng_partition *p, eng_append_result *res, int rc,
                           const api_request *req, api_response *resp)
{
    if (rc) {
        eng_errdetail d = {0};
        /* Not disk_full's "nothing written": the records are in the log,
         * unconfirmed on disk, and the dir is offline until a restart
         * recovers them (or not). */
        eng_fail(&d, ENG_EOFFLINE,
                 "the append to %s-%d was written but its fsync failed, so the log dir is "
                 "offline: a restart recovers what reached the disk, and a retry then may "
                 "duplicate it",
                 eng_partition_topic(p), eng_partition_id(p));
        api_error_from_engine(resp, req, ENG_EOFFLINE, &d);
        return;
    }
    res->high_watermark = eng_partition_high_watermark(p);
    res->log_start_offset = eng_partition_log_start_offset(p);
    api_resp_json(resp, 200, append_result_json(res));
}

static void on_durable(void *vctx, int rc)
{
    durable_wait *w = vctx;
    api_request req = {.method = "POST", .path = ""};
    memcpy(req.request_id, w->request_id, sizeof req.request_id);
    api_response resp = {0};
    api_json_arena_begin(); /* this may run inline, inside an append's scope */
    durable_answer(w->p, &w->res, rc, &req, &resp);
    api_arena_close(&req, &resp, 256);
    api_async_complete(w->async, &resp);
    eng_partition_unref(w->p);
    free(w);
}

/* Answers an append: at once, or (flush.messages reached) once it is on
 * disk, without holding an HTTP thread while the fsync runs. */
static void append_answer(eng_partition *p, eng_append_result *res, const api_request *req,
                          api_response *resp)
{
    if (!res->durable_pending) {
        api_resp_json(resp, 200, append_result_json(res));
        return;
    }
    durable_wait *w = malloc(sizeof *w);
    api_async *a = w ? api_defer(req, resp) : NULL;
    if (!a) {
        free(w);
        int rc = eng_partition_flush_upto(p, res->durable_upto);
        durable_answer(p, res, rc, req, resp);
        return;
    }
    w->async = a;
    w->p = p;
    w->res = *res;
    memcpy(w->request_id, req->request_id, sizeof w->request_id);
    eng_partition_ref(p);
    eng_partition_when_durable(p, res->durable_upto, on_durable, w);
}

/* The records the batches in a binary body declare, summed from their
 * headers (recordCount) without decoding a record, so that
 * http.max.records.per.request holds for binary appends as for JSON ones.
 * Counting stops at the first header that does not decode or a batch that
 * runs past the body: the engine refuses those itself. */
static uint64_t binary_record_count(const uint8_t *body, size_t len)
{
    uint64_t total = 0;
    size_t pos = 0;
    eng_batch_header h;
    while (pos < len && eng_batch_header_decode(body + pos, len - pos, &h) == 0) {
        total += (uint64_t)h.record_count; /* never negative once decoded */
        size_t size = eng_batch_size(&h);
        if (size > len - pos)
            break;
        pos += size;
    }
    return total;
}

/* Content-Type: application/octet-stream: one or more RecordBatch v2 as a
 * Kafka producer builds them, checked as a broker checks them and stored
 * without re-encoding (unless the topic's compression.type asks for another
 * codec).  The engine writes the batches from the request's bytes behind
 * new heads (offsets), so they are copied once: from the request into the
 * page cache. */
static void append_binary(api_ctx *ctx, eng_partition *p, const api_request *req,
                          api_response *resp)
{
    int64_t expected;
    if (!api_query_i64(req, resp, "expected_offset", -1, 0, INT64_MAX, &expected))
        return;
    if (!req->body || req->body_len == 0) {
        eng_errdetail d = {0};
        eng_fail(&d, ENG_ECORRUPT, "the body holds no record batch");
        api_error_from_append(resp, req, ENG_ECORRUPT, &d);
        return;
    }
    uint64_t count = binary_record_count(req->body, req->body_len);
    if (count > ctx->limits.max_records_per_request) {
        api_error(resp, req, "request_too_large", NULL,
                  "%llu records in one request; the limit is %zu", (unsigned long long)count,
                  ctx->limits.max_records_per_request);
        return;
    }
    eng_append_opts o = {.expected_offset = expected, .producer_batches = true,
                         .async_durable = true};
    eng_append_result res;
    eng_errdetail d = {0};
    int rc = eng_partition_append_readonly(p, req->body, req->body_len, &o, &res, &d);
    if (rc)
        api_error_from_append(resp, req, rc, &d);
    else
        append_answer(p, &res, req, resp);
}

void api_h_append(api_ctx *ctx, const api_request *req, const api_params *params,
                  api_response *resp)
{
    eng_partition *p;
    if (!api_lookup_partition(ctx, req, params, resp, &p))
        return;
    const char *ct = api_header(req, "Content-Type");
    if (api_media_type_is(ct, "application/octet-stream")) {
        append_binary(ctx, p, req, resp);
        eng_partition_unref(p);
        return;
    }
    /* This route takes two media types: the 415 names both. */
    if (ct && !api_media_type_is(ct, "application/json")) {
        api_error(resp, req, "unsupported_media_type", NULL,
                  "Content-Type %.80s is not supported here; send application/json (records) or "
                  "application/octet-stream (RecordBatch v2 bytes)",
                  ct);
        eng_partition_unref(p);
        return;
    }
    /* The parsed body is thousands of small JSON values dropped at once: an
     * arena scope (api_json_arena.h). */
    api_json_arena_begin();
    api_append_body body;
    if (parse_body(ctx, req, resp, &body)) {
        int64_t expected;
        if (partition_body_ok(req, resp, eng_partition_id(p), &body, &expected)) {
            eng_append_result res;
            eng_errdetail d = {0};
            int rc = append_specs(p, body.recs, body.n, expected, true, &res, &d);
            if (rc) {
                json_t *details = json_append_details(rc, &d, NULL, body.n);
                api_error(resp, req, api_error_code_for(rc), details, "%s",
                          d.message[0] ? d.message : eng_strerror(rc));
            } else
                append_answer(p, &res, req, resp);
        }
        api_append_body_free(&body);
    }
    api_arena_close(req, resp, 512);
    eng_partition_unref(p);
}

/* A record of a keyed append and the partition chosen for it. */
typedef struct placed {
    int32_t part;
    size_t pos; /* its place in the request */
} placed;

/* By partition, then by place in the request: a partition's batch keeps the
 * request's order (qsort is not stable). */
static int placed_cmp(const void *a, const void *b)
{
    const placed *x = a, *y = b;
    if (x->part != y->part)
        return x->part < y->part ? -1 : 1;
    return x->pos < y->pos ? -1 : x->pos > y->pos;
}

void api_h_append_keyed(api_ctx *ctx, const api_request *req, const api_params *params,
                        api_response *resp)
{
    const char *topic = api_param(params, "topic");
    /* The partitions are taken once, together: one request acts on one
     * topic, even when the name is deleted and created again meanwhile
     * (the appends then fail as the deleted topic's). */
    eng_partition **parts;
    size_t nheld;
    if (!api_topic_partitions(ctx, req, resp, topic, NULL, &parts, &nheld))
        return;
    int32_t nparts = (int32_t)nheld;
    (void)ENG_FAULT("append_keyed.topic_read");
    api_append_body body;
    if (!parse_body(ctx, req, resp, &body)) {
        eng_partitions_release(parts, nheld);
        return;
    }
    if (body.expected_offset >= 0) {
        api_error(resp, req, "invalid_request", NULL,
                  "expected_offset applies to one partition; use the partition's records URL");
        api_append_body_free(&body);
        eng_partitions_release(parts, nheld);
        return;
    }
    /* Choose each record's partition, then append one batch per partition. */
    placed *order = malloc(body.n * sizeof *order);
    eng_record_spec *group = malloc(body.n * sizeof *group);
    size_t *group_pos = malloc(body.n * sizeof *group_pos); /* each one's place in the request */
    json_t *results = json_array(), *records = json_array();
    size_t ok = 0, failed = 0;
    json_t *first_error = NULL;
    int first_status = 0;
    if (!order || !group || !group_pos) {
        api_error(resp, req, "internal_error", NULL, "out of memory");
        goto done;
    }
    for (size_t i = 0; i < body.n; i++) {
        if (body.partitions[i] >= nparts) {
            api_error(resp, req, "unknown_partition", NULL,
                      "record %zu names partition %d; topic '%s' has %d", i, body.partitions[i],
                      topic, nparts);
            goto done;
        }
    }
    for (size_t i = 0; i < body.n; i++) {
        order[i].pos = i;
        if (body.partitions[i] >= 0)
            order[i].part = body.partitions[i];
        else if (body.recs[i].key)
            order[i].part =
                api_partition_for_key(body.recs[i].key, (size_t)body.recs[i].key_len, nparts);
        else
            order[i].part = (int32_t)(atomic_fetch_add(&ctx->round_robin, 1) % (uint64_t)nparts);
    }
    /* Grouped by sorting, not by a pass over the records per partition: that
     * cost records x partitions (seconds of an HTTP thread for a large
     * request to a topic of many partitions). */
    qsort(order, body.n, sizeof *order, placed_cmp);
    /* Per-record results in request order: filled as partitions complete. */
    json_t **rec_out = calloc(body.n, sizeof *rec_out);
    if (!rec_out) {
        api_error(resp, req, "internal_error", NULL, "out of memory");
        goto done;
    }
    for (size_t at = 0; at < body.n;) {
        int32_t part = order[at].part;
        size_t n = 0;
        for (; at < body.n && order[at].part == part; at++) {
            group_pos[n] = order[at].pos;
            group[n++] = body.recs[order[at].pos];
        }
        eng_errdetail d = {0};
        eng_append_result res;
        int rc = append_specs(parts[part], group, n, -1, false, &res, &d);
        json_t *r;
        if (rc) {
            const char *code = api_error_code_for(rc);
            json_t *details = json_append_details(rc, &d, group_pos, n);
            json_t *err = api_error_object(req, code, d.message[0] ? d.message : eng_strerror(rc),
                                           details);
            r = json_pack("{s:i,s:O}", "partition", (int)part, "error", err);
            if (!first_error) {
                first_error = err;
                first_status = api_error_status(code);
            } else {
                json_decref(err);
            }
            failed += n;
        } else {
            r = append_result_json(&res);
            json_object_set_new(r, "partition", json_integer(part));
            ok += n;
        }
        int64_t next = rc ? -1 : res.base_offset;
        for (size_t k = 0; k < n; k++)
            rec_out[group_pos[k]] =
                rc ? json_pack("{s:i,s:n}", "partition", (int)part, "offset")
                   : json_pack("{s:i,s:I}", "partition", (int)part, "offset", (json_int_t)next++);
        json_array_append_new(results, r);
    }
    for (size_t i = 0; i < body.n; i++)
        json_array_append_new(records, rec_out[i] ? rec_out[i] : json_null());
    free(rec_out);
    if (ok == 0 && first_error) {
        /* Nothing was acknowledged: answer with the (first) error itself,
         * whose message says when records were written unconfirmed (an
         * fsync that failed). */
        api_resp_json(resp, first_status, json_incref(first_error));
    } else {
        api_resp_json(resp, failed ? 207 : 200,
                      json_pack("{s:O,s:O,s:I,s:I}", "results", results, "records", records,
                                "records_appended", (json_int_t)ok, "records_failed",
                                (json_int_t)failed));
    }
done:
    json_decref(first_error);
    json_decref(results);
    json_decref(records);
    free(order);
    free(group);
    free(group_pos);
    api_append_body_free(&body);
    eng_partitions_release(parts, nheld);
}

