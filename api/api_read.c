/*
 * api_read.c - every way of reading records: JSON pages, long-polls, SSE and
 * NDJSON streams, and raw batches.
 *
 * GET /v1/topics/{t}/partitions/{p}/records picks its mode from Accept:
 *   application/json (default)   a page of records; with wait_ms the request
 *                                parks (no thread held) until min_bytes are
 *                                acknowledged or the wait ends (<= 30 s);
 *   text/event-stream            SSE, resuming from Last-Event-ID;
 *   application/x-ndjson         one record per line;
 *   application/octet-stream     the stored batches as they are on disk, sent
 *                                from the segment file with sendfile.
 * Whole batches come back from the engine; records below the requested
 * offset are skipped, and a page stops at max_records, max_bytes (after at
 * least one record), until_timestamp or the high watermark.  next_offset is
 * the cursor for the next read: compaction leaves gaps, so clients follow it
 * rather than count.
 */
#include "api_codec.h"
#include "api_common.h"
#include "api_errors.h"
#include "api_json_arena.h"
#include "api_router.h"
#include "api_stream.h"
#include "api_wait.h"
#include "eng_buf.h"
#include "eng_compress.h"
#include "eng_fs.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

typedef struct read_req {
    int64_t start;
    int64_t max_records;
    int64_t max_bytes;
    int64_t until_ts; /* INT64_MAX: none */
    bool base64;
    bool clamp;
    bool bounded;     /* max_records or until_timestamp given (streams end there) */
    int64_t wait_ms;
    int64_t min_bytes;
    bool raw;         /* Accept: application/octet-stream: the stored batches */
} read_req;

typedef struct read_out {
    json_t *records;
    int64_t count;
    int64_t bytes;      /* key, value and header bytes: max_bytes and metrics */
    int64_t wait_bytes; /* what counts against min_bytes: bytes, at least 1 a record */
    int64_t next_offset;
    bool done; /* cut short (a bound, damage, the start moving): the page is final */
} read_out;

/* A stored batch whose records do not decode, met by collect: as with a
 * CRC failure, the records before it are answered, and a read that starts
 * at it gets the error naming the offset that skips it. */
static int unreadable(const eng_batch_header *h, read_out *out, api_codec_err *cerr)
{
    if (out->count > 0) {
        out->done = true;
        return 0;
    }
    api_stored_batch_unreadable(h, cerr);
    return ENG_ECORRUPT;
}

/* Appends the records of the fetched batches at or after out->next_offset. */
static int collect(eng_partition *p, const eng_fetch *f, const read_req *rr, read_out *out,
                   eng_buf *scratch, api_codec_err *cerr)
{
    size_t pos = 0;
    while (pos < f->len && !out->done) {
        eng_batch_header h;
        if (eng_batch_header_decode(f->data + pos, f->len - pos, &h))
            return ENG_ECORRUPT;
        if (api_check_stored_batch(f->data + pos, f->len - pos, &h, eng_partition_topic(p),
                                   eng_partition_id(p), cerr)) {
            if (out->count == 0)
                return ENG_ECRC;
            /* Answer the records before it; a read from next_offset meets
             * the error. */
            cerr->code = NULL;
            out->done = true;
            return 0;
        }
        if (h.attributes & ENG_ATTR_CONTROL) {
            /* A transaction marker (in a log written by Kafka) is no record
             * of the producer's: consumers skip it, and so do readers here. */
            if (eng_batch_last_offset(&h) + 1 > out->next_offset)
                out->next_offset = eng_batch_last_offset(&h) + 1;
            pos += eng_batch_size(&h);
            continue;
        }
        const uint8_t *recs;
        size_t len;
        int rc = eng_batch_plain_records(f->data + pos, &h, scratch, &recs, &len);
        if (rc == -ENOMEM)
            return rc;
        if (rc)
            return unreadable(&h, out, cerr);
        bool lat = (h.attributes & ENG_ATTR_LOG_APPEND_TIME) != 0;
        eng_record_iter it;
        eng_record r;
        eng_record_iter_init(&it, &h, recs, len);
        bool cut = false;
        while ((rc = eng_record_iter_next(&it, &r)) == 1) {
            if (r.offset < out->next_offset)
                continue;
            int64_t size = (r.key_len > 0 ? r.key_len : 0) + (r.value_len > 0 ? r.value_len : 0) +
                           (int64_t)(r.headers_end - r.headers);
            if (out->count >= rr->max_records || (out->count > 0 && out->bytes + size > rr->max_bytes) ||
                r.timestamp > rr->until_ts) {
                out->next_offset = r.offset;
                out->done = cut = true;
                break;
            }
            json_t *jr = api_record_json(&r, lat, rr->base64, cerr);
            if (!jr)
                return ENG_EINVAL;
            json_array_append_new(out->records, jr);
            out->count++;
            out->bytes += size;
            /* Kafka counts batch bytes, so any record satisfies min_bytes=1:
             * an empty one (null key, "" value) must too, or a long-poll
             * waiting for it sleeps through the whole wait. */
            out->wait_bytes += size > 0 ? size : 1;
            out->next_offset = r.offset + 1;
        }
        if (rc < 0)
            return unreadable(&h, out, cerr);
        if (!cut && eng_batch_last_offset(&h) + 1 > out->next_offset)
            out->next_offset = eng_batch_last_offset(&h) + 1;
        pos += eng_batch_size(&h);
    }
    return 0;
}

/* Resolves the start selector; false with resp filled on a bad request. */
static bool parse_read(const api_request *req, api_response *resp, eng_partition *p, read_req *rr)
{
    memset(rr, 0, sizeof *rr);
    static const char *const selectors[] = {"offset", "earliest", "latest", "timestamp", "tail"};
    size_t nsel = 0;
    for (size_t i = 0; i < 5; i++)
        nsel += api_query_count(req, selectors[i]);
    if (nsel > 1) {
        api_error(resp, req, "invalid_request", NULL,
                  "give at most one of offset, earliest, latest, timestamp or tail");
        return false;
    }
    /* Bare flags: ?latest=0 or ?earliest=false acted as the flag itself. */
    static const char *const flags[] = {"earliest", "latest"};
    for (size_t i = 0; i < 2; i++) {
        bool given;
        const char *v = api_query(req, flags[i], &given);
        if (given && v && *v && strcmp(v, "true") != 0) {
            api_error(resp, req, "invalid_request", NULL,
                      "%s is a flag: give it without a value (or as %s=true), or use offset=",
                      flags[i], flags[i]);
            return false;
        }
    }
    const char *enc = api_query(req, "encoding", NULL);
    if (api_parse_encoding(enc, &rr->base64)) {
        api_error(resp, req, "invalid_request", NULL, "encoding must be utf8 or base64");
        return false;
    }
    if (!api_query_i64(req, resp, "max_records", 100, 1, 10000, &rr->max_records) ||
        !api_query_i64(req, resp, "max_bytes", 1 << 20, 1, 64 << 20, &rr->max_bytes) ||
        !api_query_i64(req, resp, "until_timestamp", INT64_MAX, 0, INT64_MAX, &rr->until_ts) ||
        !api_query_bool(req, resp, "clamp", false, &rr->clamp) ||
        !api_query_i64(req, resp, "wait_ms", 0, 0, INT64_MAX, &rr->wait_ms) ||
        /* 0 is Kafka's fetch.min.bytes=0: answer at once, whatever wait_ms says */
        !api_query_i64(req, resp, "min_bytes", 1, 0, INT32_MAX, &rr->min_bytes))
        return false;
    rr->bounded = api_query_count(req, "max_records") || api_query_count(req, "until_timestamp");
    int64_t lso = eng_partition_log_start_offset(p), hw = eng_partition_high_watermark(p);
    bool present;
    const char *off = api_query(req, "offset", &present);
    if (present && off && !strcmp(off, "earliest"))
        rr->start = lso;
    else if (present && off && !strcmp(off, "latest"))
        rr->start = hw;
    else if (present) {
        if (!api_query_i64(req, resp, "offset", 0, INT64_MIN, INT64_MAX, &rr->start))
            return false;
    } else if (api_query_count(req, "latest")) {
        rr->start = hw;
    } else if (api_query_count(req, "timestamp")) {
        int64_t ts, found_ts;
        if (!api_query_i64(req, resp, "timestamp", 0, 0, INT64_MAX, &ts))
            return false;
        int rc = eng_partition_offset_for_timestamp(p, ts, &rr->start, &found_ts);
        if (rc == ENG_ENOTFOUND)
            rr->start = hw;
        else if (rc) {
            api_error_from_engine(resp, req, rc, NULL);
            return false;
        }
    } else if (api_query_count(req, "tail")) {
        int64_t n;
        if (!api_query_i64(req, resp, "tail", 0, 0, INT64_MAX, &n))
            return false;
        rr->start = hw - n < lso ? lso : hw - n;
    } else {
        rr->start = lso; /* earliest, explicit or by default */
    }
    if (rr->clamp)
        rr->start = rr->start < lso ? lso : rr->start > hw ? hw : rr->start;
    return true;
}

/* Reads into out; returns an engine code with d filled, or ENG_EINVAL with
 * cerr filled for an encoding problem. */
static int run_read(eng_partition *p, const read_req *rr, read_out *out, eng_errdetail *d,
                    api_codec_err *cerr)
{
    eng_buf scratch = {0};
    int rc = 0;
    out->next_offset = rr->start;
    while (!out->done) {
        eng_fetch f;
        int64_t budget = rr->max_bytes - out->bytes;
        rc = eng_partition_read(p, out->next_offset, budget > 0 ? (size_t)budget : 1, &f, d);
        if (rc == ENG_EOFFSET && rr->clamp && out->count == 0) {
            /* Retention moved the start under us: begin again at the new start. */
            int64_t lso = eng_partition_log_start_offset(p);
            if (out->next_offset < lso) {
                out->next_offset = lso;
                continue;
            }
        }
        if ((rc == ENG_EOFFSET || rc == ENG_ECORRUPT) && out->count > 0) {
            /* The start moved past the rest of this page (delete-records or
             * retention, concurrently), or the log is damaged past it:
             * answer what was read; the next read from next_offset meets the
             * new bounds or the damage.  Answering 416 here threw the page
             * away, even with clamp=true (found by
             * tests/crash/test_crash_loop.c). */
            rc = 0;
            out->done = true; /* final: waiting would not lengthen it */
            break;
        }
        if (rc)
            break;
        if (f.len == 0) {
            /* A clean emptied [next_offset, hw): the engine says where the
             * records resume. */
            int64_t resume = f.next_offset, hw = f.high_watermark;
            eng_fetch_free(&f);
            if (resume > out->next_offset) {
                out->next_offset = resume;
                if (resume < hw)
                    continue;
            }
            break;
        }
        rc = collect(p, &f, rr, out, &scratch, cerr);
        int64_t hw = f.high_watermark;
        eng_fetch_free(&f);
        if (rc || out->next_offset >= hw)
            break;
    }
    eng_buf_free(&scratch);
    return rc;
}


static json_t *page_json(eng_partition *p, const read_out *out)
{
    return json_pack("{s:O,s:I,s:I,s:I}", "records", out->records, "next_offset",
                     (json_int_t)out->next_offset, "high_watermark",
                     (json_int_t)eng_partition_high_watermark(p), "log_start_offset",
                     (json_int_t)eng_partition_log_start_offset(p));
}

/* Runs a read and turns it into a response (page or error), already
 * serialized into resp->raw: the page's JSON lives in an arena scope (see
 * api_json_arena.h).  out says what was read; out->records is NULL after. */
static void answer_page(eng_partition *p, const read_req *rr, const api_request *req,
                        api_response *resp, read_out *out)
{
    api_json_arena_begin();
    *out = (read_out){.records = json_array()};
    eng_errdetail d = {0};
    api_codec_err cerr = {0};
    int rc = out->records ? run_read(p, rr, out, &d, &cerr) : -ENOMEM;
    if (rc && cerr.code)
        api_error(resp, req, cerr.code, api_codec_err_details(&cerr), "%s", cerr.message);
    else if (rc)
        api_error_from_engine(resp, req, rc, &d);
    else
        api_resp_json(resp, 200, page_json(p, out));
    json_decref(out->records);
    out->records = NULL;
    /* About 1.5 bytes of JSON per byte of record data, plus each record's
     * fields and the envelope. */
    api_arena_close(req, resp, (size_t)out->bytes + (size_t)out->bytes / 2 +
                                   (size_t)out->count * 120 + 256);
}

/* What an answer delivers, counted in the partition's read metrics when it
 * is sent: an answer built and then dropped (a long-poll parked again) was
 * counted too. */
typedef struct read_tally {
    int64_t records; /* offsets delivered, for raw reads (compaction gaps included) */
    int64_t bytes;
} read_tally;

static void count_delivered(eng_partition *p, const read_tally *t)
{
    if (t->records > 0 || t->bytes > 0)
        eng_partition_count_read(p, (uint64_t)t->records, (uint64_t)t->bytes);
}

/* The stored batches from rr->start, sent from the segment file; the cursor
 * headers say where to go on (*next_offset too). */
static void answer_raw(eng_partition *p, const read_req *rr, const api_request *req,
                       api_response *resp, int64_t *next_offset, int64_t *hw, read_tally *tally)
{
    eng_slice sl;
    eng_errdetail d = {0};
    int rc = eng_partition_read_slice(p, rr->start, (size_t)rr->max_bytes, &sl, &d);
    if (rc) {
        api_error_from_engine(resp, req, rc, &d);
        return;
    }
    *next_offset = sl.next_offset;
    *hw = sl.high_watermark;
    char v[32];
    resp->status = 200;
    resp->content_type = "application/octet-stream";
    snprintf(v, sizeof v, "%lld", (long long)sl.next_offset);
    api_resp_header(resp, "X-Next-Offset", v);
    snprintf(v, sizeof v, "%lld", (long long)sl.high_watermark);
    api_resp_header(resp, "X-High-Watermark", v);
    snprintf(v, sizeof v, "%lld", (long long)sl.log_start_offset);
    api_resp_header(resp, "X-Log-Start-Offset", v);
    if (sl.fd >= 0) {
        *tally = (read_tally){.records = sl.next_offset - rr->start, .bytes = (int64_t)sl.length};
        resp->has_file = true;
        resp->file_fd = sl.fd;
        resp->file_offset = sl.position;
        resp->file_length = sl.length;
        eng_partition_ref(p);
        resp->file_part = p;
    }
}

/* Either answer: the JSON page or the stored batches.  *bytes is what counts
 * against min_bytes (record data, at least 1 byte a record, for a page; batch
 * bytes for a raw read).  The answer is final (*wait false) unless a reader
 * waiting for more could get it: a page cut short by max_records, max_bytes
 * or until_timestamp, or a raw slice ending before the high watermark it
 * was read under (its segment's end), cannot grow by waiting.  (Parked,
 * such a long-poll was woken at once by the data already past it, built
 * the same short answer and parked again: one core spun for the whole
 * wait_ms.)  What decides is the read itself, not the high watermark now:
 * appends landing while the page was built made every long-poll answer
 * early, short of min_bytes. */
static void answer_read(eng_partition *p, const read_req *rr, const api_request *req,
                        api_response *resp, int64_t *bytes, int64_t *next, bool *wait,
                        read_tally *tally)
{
    *tally = (read_tally){0};
    bool cut;
    if (rr->raw) {
        int64_t hw = rr->start;
        *next = rr->start;
        answer_raw(p, rr, req, resp, next, &hw, tally);
        *bytes = resp->has_file ? (int64_t)resp->file_length : 0;
        cut = *next < hw;
    } else {
        read_out out;
        answer_page(p, rr, req, resp, &out);
        *bytes = out.wait_bytes;
        *next = out.next_offset;
        cut = out.done;
        if (resp->status == 200)
            *tally = (read_tally){.records = out.count, .bytes = out.bytes};
    }
    *wait = resp->status == 200 && *bytes < rr->min_bytes && !cut;
}

/* ---- long-poll ------------------------------------------------------------ */

typedef struct long_poll {
    api_waiter w;
    api_waiters *ws;
    api_async *async;
    eng_partition *p;
    read_req rr;
    int64_t deadline_ms;
    char request_id[65];
} long_poll;

static void long_poll_free(long_poll *lp)
{
    eng_partition_unref(lp->p);
    free(lp);
}

static void long_poll_wake(api_waiter *w, api_wake_reason why)
{
    long_poll *lp = (long_poll *)((char *)w - offsetof(long_poll, w));
    api_request req = {.method = "GET", .path = ""};
    memcpy(req.request_id, lp->request_id, sizeof req.request_id);
    api_response resp = {0};
    int64_t bytes, next;
    bool wait;
    read_tally tally;
    answer_read(lp->p, &lp->rr, &req, &resp, &bytes, &next, &wait, &tally);
    if (wait && why == API_WAKE_DATA && eng_mono_ms() < lp->deadline_ms) {
        /* Some data came, not yet min_bytes of it: wait for more, from the
         * end of what is there. */
        lp->w.offset = next;
        api_response_clear(&resp);
        if (api_waiter_park(lp->ws, &lp->w) == 0)
            return;
        /* Cannot wait any longer (stopping): answer with what there is. */
        answer_read(lp->p, &lp->rr, &req, &resp, &bytes, &next, &wait, &tally);
    }
    count_delivered(lp->p, &tally);
    api_async_complete(lp->async, &resp);
    long_poll_free(lp);
}

/* Whether two reads give the same page at the same moment. */
static bool same_page(const read_req *a, const read_req *b)
{
    return a->start == b->start && a->max_records == b->max_records &&
           a->max_bytes == b->max_bytes && a->until_ts == b->until_ts && a->base64 == b->base64 &&
           a->clamp == b->clamp && a->min_bytes == b->min_bytes && a->raw == b->raw;
}

/* A hash of what same_page compares: the registry groups waiters by it. */
static uint64_t page_group(const read_req *rr)
{
    int64_t f[] = {rr->start, rr->max_records, rr->max_bytes, rr->until_ts,
                   rr->base64 | rr->clamp << 1 | rr->raw << 2, rr->min_bytes};
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < sizeof f / sizeof *f; i++) {
        h ^= (uint64_t)f[i];
        h *= 1099511628211ull;
        h ^= h >> 29;
    }
    return h | 1; /* never 0 */
}

/* Long-polls woken together by one append, most often every reader tailing
 * the partition: the page is read, built and serialized once, and each
 * waiter asking the same question gets a copy of the bytes.  Anything else
 * (a different question behind a hash collision, an error, too few bytes
 * for min_bytes) goes through long_poll_wake one by one. */
static void long_poll_wake_many(api_waiter **ws, size_t n)
{
    long_poll *first = (long_poll *)((char *)ws[0] - offsetof(long_poll, w));
    const read_req rr = first->rr; /* first is freed in the loop below */
    if (rr.raw) {
        /* Each raw answer is its own file range: nothing to share. */
        for (size_t i = 0; i < n; i++)
            long_poll_wake(ws[i], API_WAKE_DATA);
        return;
    }
    api_request req = {.method = "GET", .path = ""};
    memcpy(req.request_id, first->request_id, sizeof req.request_id);
    api_response resp = {0};
    read_out out;
    answer_page(first->p, &rr, &req, &resp, &out);
    char *body = NULL;
    size_t len = 0;
    if (resp.status == 200 && out.wait_bytes >= rr.min_bytes && resp.raw) {
        body = resp.raw; /* taken */
        len = resp.raw_len;
        resp.raw = NULL;
    }
    api_response_clear(&resp);
    for (size_t i = 0; i < n; i++) {
        long_poll *lp = (long_poll *)((char *)ws[i] - offsetof(long_poll, w));
        char *copy = NULL;
        if (body && same_page(&lp->rr, &rr) && (copy = malloc(len ? len : 1)))
            memcpy(copy, body, len);
        if (!copy) {
            long_poll_wake(ws[i], API_WAKE_DATA);
            continue;
        }
        eng_partition_count_read(lp->p, (uint64_t)out.count, (uint64_t)out.bytes);
        api_response r = {.status = 200, .raw = copy, .raw_len = len};
        api_async_complete(lp->async, &r);
        long_poll_free(lp);
    }
    free(body);
}

/* Parks a read whose first answer had fewer than min_bytes.  Returns false
 * when it cannot (no deferral, no registry): answer now instead. */
static bool park_read(api_ctx *ctx, eng_partition *p, const read_req *rr, int64_t wake_after,
                      const api_request *req, api_response *resp)
{
    if (!ctx->waiters || !req->transport)
        return false;
    long_poll *lp = calloc(1, sizeof *lp);
    if (!lp)
        return false;
    api_async *a = api_defer(req, resp);
    if (!a) {
        free(lp);
        return false;
    }
    resp->waits = true;
    int64_t wait = rr->wait_ms < ctx->max_wait_ms ? rr->wait_ms : ctx->max_wait_ms;
    eng_partition_ref(p);
    *lp = (long_poll){.ws = ctx->waiters, .async = a, .p = p, .rr = *rr,
                      .deadline_ms = eng_mono_ms() + wait};
    memcpy(lp->request_id, req->request_id, sizeof lp->request_id);
    lp->w = (api_waiter){.p = p, .offset = wake_after, .deadline_ms = lp->deadline_ms,
                         .fd = req->transport->client_fd, .wake = long_poll_wake,
                         .wake_many = long_poll_wake_many, .group = page_group(rr)};
    int rc = api_waiter_park(ctx->waiters, &lp->w);
    if (rc) {
        api_response now = {0};
        if (rc == ENG_ELIMIT) {
            api_error(&now, req, "too_many_waiters", NULL,
                      "too many parked readers (%zu); retry shortly", api_waiters_parked(ctx->waiters));
            api_resp_header(&now, "Retry-After", "1");
        } else {
            int64_t bytes, next;
            bool more;
            read_tally tally;
            answer_read(p, rr, req, &now, &bytes, &next, &more, &tally);
            count_delivered(p, &tally);
        }
        api_async_complete(a, &now);
        long_poll_free(lp);
    }
    return true;
}

/* ---- the handler ------------------------------------------------------------- */

typedef enum { MODE_JSON, MODE_SSE, MODE_NDJSON, MODE_RAW } read_mode;

/* The q of one media range's parameters ("; q=0.5"), 1 without one. */
static double quality_of(const char *params, size_t len)
{
    for (size_t i = 0; i + 1 < len; i++) {
        if ((params[i] == 'q' || params[i] == 'Q') && params[i + 1] == '=' &&
            (i == 0 || params[i - 1] == ';' || params[i - 1] == ' ')) {
            char buf[16];
            size_t n = 0;
            for (size_t k = i + 2; k < len && n < sizeof buf - 1 && params[k] != ';'; k++)
                buf[n++] = params[k];
            buf[n] = 0;
            char *end;
            double q = strtod(buf, &end);
            return end == buf || q < 0 ? 1 : q > 1 ? 1 : q;
        }
    }
    return 1;
}

/* The representation the Accept header prefers among those served here:
 * the highest q, the earlier on a tie; q=0 refuses one; a wildcard or
 * nothing we serve means JSON. */
static read_mode mode_of(const api_request *req)
{
    const char *accept = api_header(req, "Accept");
    if (!accept)
        return MODE_JSON;
    static const struct {
        const char *type;
        read_mode mode;
    } types[] = {{"text/event-stream", MODE_SSE}, {"application/x-ndjson", MODE_NDJSON},
                 {"application/octet-stream", MODE_RAW}, {"application/json", MODE_JSON},
                 {"*/*", MODE_JSON}, {"application/*", MODE_JSON}};
    read_mode mode = MODE_JSON;
    double best = 0;
    for (const char *s = accept; *s;) {
        size_t len = strcspn(s, ",");
        const char *type = s;
        while (type < s + len && *type == ' ')
            type++;
        size_t tlen = strcspn(type, ";,");
        while (tlen && type[tlen - 1] == ' ')
            tlen--;
        const char *params = type + strcspn(type, ";,");
        double q = *params == ';' ? quality_of(params + 1, (size_t)(s + len - params - 1)) : 1;
        for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
            if (strlen(types[i].type) == tlen && strncasecmp(types[i].type, type, tlen) == 0 &&
                q > best) {
                best = q;
                mode = types[i].mode;
            }
        }
        s += len + (s[len] == ',');
    }
    return mode;
}

bool api_read_wants_sse(const api_request *req)
{
    return mode_of(req) == MODE_SSE;
}

/* A 416 whose message gives the range this request could have asked for:
 * a read may start at the high watermark itself (it answers nothing yet, or
 * waits), one record cannot be there.  The bounds are the same either way. */
static void offset_out_of_range(const api_request *req, api_response *resp, eng_partition *p,
                                int64_t offset, int64_t lso, int64_t hw, bool hw_readable)
{
    eng_errdetail d = {0};
    eng_errdetail_bounds(&d, lso, hw);
    eng_fail(&d, ENG_EOFFSET,
             "offset %lld is outside [%lld, %lld%c for %s-%d (log start offset, high watermark)",
             (long long)offset, (long long)lso, (long long)hw, hw_readable ? ']' : ')',
             eng_partition_topic(p), eng_partition_id(p));
    api_error_from_engine(resp, req, ENG_EOFFSET, &d);
}

static void start_stream(api_ctx *ctx, eng_partition *p, read_req *rr, read_mode mode,
                         const api_request *req, api_response *resp)
{
    const char *last = api_header(req, "Last-Event-ID");
    int64_t id;
    if (mode == MODE_SSE && last && api_parse_i64(last, &id) && id >= -1) {
        /* No offset follows INT64_MAX (id + 1 would overflow), and INT64_MAX
         * is itself past any high watermark: that ID gets what any other
         * past the end gets, 416 or, with clamp, the high watermark. */
        rr->start = id < INT64_MAX ? id + 1 : INT64_MAX;
    }
    int64_t lso = eng_partition_log_start_offset(p), hw = eng_partition_high_watermark(p);
    if (rr->clamp)
        rr->start = rr->start < lso ? lso : rr->start > hw ? hw : rr->start;
    if (rr->start < lso || rr->start > hw) {
        offset_out_of_range(req, resp, p, rr->start, lso, hw, true);
        return;
    }
    api_stream_opts so = {.format = mode == MODE_SSE ? API_STREAM_SSE : API_STREAM_NDJSON,
                          .start = rr->start,
                          .max_records = api_query_count(req, "max_records") ? rr->max_records : INT64_MAX,
                          .until_timestamp = rr->until_ts, .base64 = rr->base64,
                          .heartbeat_ms = ctx->heartbeat_ms};
    memcpy(so.request_id, req->request_id, sizeof so.request_id);
    /* Neither cached nor buffered by a proxy (nginx reads X-Accel-Buffering),
     * and said to a HEAD too, which answers the GET's headers. */
    api_resp_header(resp, "Cache-Control", "no-cache");
    api_resp_header(resp, "X-Accel-Buffering", "no");
    if (api_is_head(req)) {
        /* The headers a stream would start with, and no stream to follow. */
        resp->status = 200;
        resp->content_type = mode == MODE_SSE ? "text/event-stream" : "application/x-ndjson";
        resp->stream_head = true;
        return;
    }
    if (!ctx->waiters || !req->transport) {
        api_error(resp, req, "invalid_request", NULL, "streaming is not available on this transport");
        return;
    }
    resp->stream = api_stream_new(p, ctx->waiters, &so);
    if (!resp->stream) {
        api_error(resp, req, "internal_error", NULL, "out of memory");
        return;
    }
    resp->status = 200;
    resp->content_type = mode == MODE_SSE ? "text/event-stream" : "application/x-ndjson";
}

/* The route takes every read parameter, but each form of answer applies
 * only some: a raw read is whole stored batches up to max_bytes (no record
 * count, time bound or encoding: max_records=1 answered a megabyte), and a
 * stream has no page to bound or wait for (max_bytes left a stream open
 * for good).  Such a parameter is refused, as an unknown one is, rather
 * than ignored. */
static bool mode_applies_query(const api_request *req, api_response *resp, read_mode mode)
{
    static const char *const not_raw[] = {"max_records", "until_timestamp", "encoding", NULL};
    static const char *const not_stream[] = {"max_bytes", "wait_ms", "min_bytes", NULL};
    const char *const *refused = mode == MODE_RAW                         ? not_raw
                                 : mode == MODE_SSE || mode == MODE_NDJSON ? not_stream
                                                                           : NULL;
    for (size_t i = 0; refused && refused[i]; i++) {
        if (!api_query_count(req, refused[i]))
            continue;
        if (mode == MODE_RAW)
            api_error(resp, req, "invalid_request", NULL,
                      "%s does not apply to a raw read (Accept: application/octet-stream), "
                      "which answers whole stored batches: bound it with max_bytes",
                      refused[i]);
        else
            api_error(resp, req, "invalid_request", NULL,
                      "%s does not apply to a stream (Accept: %s), which follows the log: "
                      "bound it with max_records or until_timestamp",
                      refused[i], mode == MODE_SSE ? "text/event-stream" : "application/x-ndjson");
        return false;
    }
    return true;
}

void api_h_read(api_ctx *ctx, const api_request *req, const api_params *params, api_response *resp)
{
    read_mode mode = mode_of(req);
    if (!mode_applies_query(req, resp, mode))
        return;
    eng_partition *p;
    if (!api_lookup_partition(ctx, req, params, resp, &p))
        return;
    read_req rr;
    if (parse_read(req, resp, p, &rr)) {
        if (mode == MODE_SSE || mode == MODE_NDJSON) {
            start_stream(ctx, p, &rr, mode, req, resp);
        } else {
            /* A page or the stored batches; both long-poll when there is too
             * little and the client is willing to wait. */
            rr.raw = mode == MODE_RAW;
            int64_t got, next;
            bool wait;
            read_tally tally;
            answer_read(p, &rr, req, resp, &got, &next, &wait, &tally);
            if (wait && rr.wait_ms > 0 && !api_is_head(req)) {
                api_response_clear(resp);
                tally = (read_tally){0}; /* counted when the parked read is answered */
                if (!park_read(ctx, p, &rr, next, req, resp))
                    answer_read(p, &rr, req, resp, &got, &next, &wait, &tally);
            }
            /* A HEAD is answered with the GET's headers and no body: it
             * hands the reader nothing to count. */
            if (!api_is_head(req))
                count_delivered(p, &tally);
        }
    }
    eng_partition_unref(p);
}

void api_h_read_one(api_ctx *ctx, const api_request *req, const api_params *params,
                    api_response *resp)
{
    int64_t offset;
    if (!api_parse_i64(api_param(params, "offset"), &offset)) {
        api_error(resp, req, "invalid_request", NULL, "offset must be an integer");
        return;
    }
    read_req rr = {.start = offset, .max_records = 1, .max_bytes = 1, .until_ts = INT64_MAX};
    if (api_parse_encoding(api_query(req, "encoding", NULL), &rr.base64)) {
        api_error(resp, req, "invalid_request", NULL, "encoding must be utf8 or base64");
        return;
    }
    eng_partition *p;
    if (!api_lookup_partition(ctx, req, params, resp, &p))
        return;
    /* Both ends here: below the log start offset the engine's read would
     * answer with a page's range, which includes the high watermark. */
    int64_t lso = eng_partition_log_start_offset(p), hw = eng_partition_high_watermark(p);
    if (offset < lso || offset >= hw) {
        offset_out_of_range(req, resp, p, offset, lso, hw, false);
        eng_partition_unref(p);
        return;
    }
    read_out out = {.records = json_array()};
    eng_errdetail d = {0};
    api_codec_err cerr = {0};
    int rc = run_read(p, &rr, &out, &d, &cerr);
    json_t *first = json_array_get(out.records, 0);
    if (rc && cerr.code)
        api_error(resp, req, cerr.code, api_codec_err_details(&cerr), "%s", cerr.message);
    else if (rc)
        api_error_from_engine(resp, req, rc, &d);
    else if (!first || json_integer_value(json_object_get(first, "offset")) != offset)
        api_error(resp, req, "record_not_found", json_pack("{s:I}", "offset", (json_int_t)offset),
                  "no record at offset %lld (removed by compaction, or a transaction marker)",
                  (long long)offset);
    else {
        /* Counted like a page's records: dashboards read the per-topic
         * read counters as what clients were handed, by any route (a
         * HEAD hands nothing). */
        if (!api_is_head(req))
            eng_partition_count_read(p, 1, (uint64_t)out.bytes);
        api_resp_json(resp, 200, json_incref(first));
    }
    json_decref(out.records);
    eng_partition_unref(p);
}
