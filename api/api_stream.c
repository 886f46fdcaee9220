/*
 * api_stream.c - SSE and NDJSON streams of a partition.
 *
 * The stream's output buffer holds at most one refill (records worth about
 * REFILL_BYTES, plus one record): it is drained by the HTTP layer before the
 * next refill, which goes on from the record where the last one stopped.  Everything here runs on the HTTP thread that
 * owns the connection, except on_wake, which runs on a waiter thread and
 * only flags and resumes.
 */
#include "api_stream.h"

#include "api_codec.h"
#include "api_errors.h"
#include "api_metrics.h"
#include "eng_buf.h"
#include "eng_compress.h"
#include "eng_fs.h"

#include <errno.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define REFILL_BYTES (64u << 10)

struct api_stream {
    eng_partition *p;
    api_waiters *ws;
    api_stream_opts o;
    int64_t next;
    int64_t sent;
    char *out;
    size_t len, pos, cap;
    bool finished;
    _Atomic bool stop;
    _Atomic bool gone; /* the client left: nothing more is written */
    int64_t last_send_ms;
    api_waiter w;
    api_live live; /* in ws's live list from bind to free */
    bool live_added;
    void (*resume)(void *conn);
    void *conn;
    int fd;
    /* Where the last refill stopped: the fetch it read, the batch in it
     * (decompressed into scratch) and the record iterator over that. */
    eng_fetch f;
    bool fetched, in_batch;
    size_t fpos;
    eng_batch_header h;
    eng_record_iter it;
    eng_buf scratch;
};

static bool emit(api_stream *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

api_stream *api_stream_new(eng_partition *p, api_waiters *ws, const api_stream_opts *o)
{
    api_stream *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    eng_partition_ref(p);
    s->p = p;
    s->ws = ws;
    s->o = *o;
    s->next = o->start;
    s->fd = -1;
    s->last_send_ms = eng_mono_ms();
    api_metrics_streams(1);
    /* An EventSource that reconnects before any record came has no last
     * event ID to send, so it asks for the URL's start again, and a start
     * such as `latest` or `tail=N` is then later: what was appended in
     * between is skipped.  An `id` field with no data sets the last event
     * ID without firing an event (HTML, "dispatch the event"), so the
     * stream begins by naming the offset before its start. */
    if (o->format == API_STREAM_SSE && !emit(s, "id: %lld\n\n", (long long)(o->start - 1))) {
        api_stream_free(s);
        return NULL;
    }
    return s;
}

void api_stream_bind(api_stream *s, void (*resume)(void *conn), void *conn, int client_fd)
{
    s->resume = resume;
    s->conn = conn;
    s->fd = client_fd;
    if (client_fd >= 0) {
        s->live = (api_live){.p = s->p, .fd = client_fd};
        api_live_add(s->ws, &s->live);
        s->live_added = true;
    }
}

void api_stream_free(api_stream *s)
{
    if (!s)
        return;
    api_metrics_streams(-1);
    if (s->live_added)
        api_live_remove(s->ws, &s->live);
    eng_partition_unref(s->p);
    if (s->fetched)
        eng_fetch_free(&s->f);
    eng_buf_free(&s->scratch);
    free(s->out);
    free(s);
}

static bool emit(api_stream *s, const char *fmt, ...)
{
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(s->out ? s->out + s->len : NULL, s->cap - s->len, fmt, ap);
        va_end(ap);
        if (n < 0)
            return false;
        if (s->len + (size_t)n < s->cap) {
            s->len += (size_t)n;
            return true;
        }
        size_t cap = s->cap ? s->cap * 2 : 4096;
        while (cap <= s->len + (size_t)n)
            cap *= 2;
        char *nb = realloc(s->out, cap);
        if (!nb)
            return false;
        s->out = nb;
        s->cap = cap;
    }
}

static void emit_json(api_stream *s, const char *event, json_t *o, int64_t id)
{
    char *txt = json_dumps(o, JSON_COMPACT);
    if (!txt)
        return;
    if (s->o.format == API_STREAM_NDJSON)
        emit(s, "%s\n", txt);
    else if (id >= 0)
        emit(s, "id: %lld\nevent: %s\ndata: %s\n\n", (long long)id, event, txt);
    else
        emit(s, "event: %s\ndata: %s\n\n", event, txt);
    free(txt);
}

/* The end of a bounded stream: the cursor to continue from. */
static void finish(api_stream *s)
{
    json_t *o = json_pack("{s:I,s:I}", "next_offset", (json_int_t)s->next, "high_watermark",
                          (json_int_t)eng_partition_high_watermark(s->p));
    emit_json(s, "end", o, -1);
    json_decref(o);
    s->finished = true;
}

/* Ends the stream with an error event; details (taken, may be NULL) as in
 * the JSON answer of the same error. */
static void fail_with(api_stream *s, const char *code, json_t *details, const char *message)
{
    api_request req = {.method = "GET", .path = ""};
    memcpy(req.request_id, s->o.request_id, sizeof req.request_id);
    json_t *err = api_error_object(&req, code, message, details);
    if (s->o.format == API_STREAM_NDJSON) {
        json_t *o = json_pack("{s:o}", "error", err);
        emit_json(s, "error", o, -1);
        json_decref(o);
    } else {
        emit_json(s, "error", err, -1);
        json_decref(err);
    }
    s->finished = true;
}

static void fail(api_stream *s, const char *code, const char *message)
{
    fail_with(s, code, NULL, message);
}

/* A decompressed batch larger than this is not kept between refills. */
#define SCRATCH_KEEP (1u << 20)

/* Done with the batch at s->fpos: the cursor passes its last offset (a
 * compaction gap, a marker), and the fetch moves to the next batch. */
static void close_batch(api_stream *s)
{
    if (!s->finished && eng_batch_last_offset(&s->h) + 1 > s->next)
        s->next = eng_batch_last_offset(&s->h) + 1;
    s->fpos += eng_batch_size(&s->h);
    s->in_batch = false;
    if (s->scratch.cap > SCRATCH_KEEP)
        eng_buf_free(&s->scratch);
}

/* Ends the stream at a batch whose CRC holds but whose records do not
 * decode, with the details a page gives. */
static void unreadable(api_stream *s)
{
    api_codec_err e = {0};
    api_stored_batch_unreadable(&s->h, &e);
    fail_with(s, e.code, api_codec_err_details(&e), e.message);
}

/* Takes up the next batch of the fetch for its records: false (and
 * s->fpos moved past it) when it has none to give (a transaction marker),
 * or when it fails the stream. */
static bool open_batch(api_stream *s)
{
    const uint8_t *b = s->f.data + s->fpos;
    size_t avail = s->f.len - s->fpos;
    if (eng_batch_header_decode(b, avail, &s->h)) {
        fail(s, "corrupt_record", "a stored batch does not decode");
        return false;
    }
    api_codec_err crc_err = {0};
    if (api_check_stored_batch(b, avail, &s->h, eng_partition_topic(s->p), eng_partition_id(s->p),
                               &crc_err)) {
        fail_with(s, crc_err.code, api_codec_err_details(&crc_err), crc_err.message);
        return false;
    }
    if (s->h.attributes & ENG_ATTR_CONTROL) { /* a transaction marker: skipped, as by consumers */
        close_batch(s);
        return false;
    }
    const uint8_t *recs;
    size_t len;
    int rc = eng_batch_plain_records(b, &s->h, &s->scratch, &recs, &len);
    if (rc == -ENOMEM) {
        fail(s, "internal_error", "out of memory");
        return false;
    }
    if (rc) {
        unreadable(s);
        return false;
    }
    eng_record_iter_init(&s->it, &s->h, recs, len);
    s->in_batch = true;
    return true;
}

/* Appends one record to the output; false once the stream ended. */
static bool emit_record(api_stream *s, const eng_record *r)
{
    if (r->timestamp > s->o.until_timestamp) {
        s->next = r->offset;
        finish(s);
        return false;
    }
    api_codec_err cerr = {0};
    json_t *o = api_record_json(r, (s->h.attributes & ENG_ATTR_LOG_APPEND_TIME) != 0, s->o.base64,
                                &cerr);
    if (!o) {
        /* With the details a page gives (details.offset for invalid_utf8):
         * a tailing client needs the offset to re-read or skip the record. */
        fail_with(s, cerr.code, api_codec_err_details(&cerr), cerr.message);
        return false;
    }
    emit_json(s, "record", o, r->offset);
    json_decref(o);
    /* counted as pages count them: keys, values and headers */
    eng_partition_count_read(s->p, 1,
                             (uint64_t)((r->key_len > 0 ? r->key_len : 0) +
                                        (r->value_len > 0 ? r->value_len : 0) +
                                        (r->headers_end - r->headers)));
    s->next = r->offset + 1;
    if (++s->sent >= s->o.max_records) {
        finish(s);
        return false;
    }
    return true;
}

/* Renders about REFILL_BYTES of records into the output buffer.  It stops
 * there even inside a batch and goes on from the same record next time:
 * rendering a whole fetch at once made one slow client cost the JSON of
 * every record of a large compressed batch (hundreds of megabytes), not
 * the 64 KiB the README promises.  The fetch and the decompressed batch
 * are kept between refills for that; a large decompressed batch is let go
 * once read. */
static void refill(api_stream *s)
{
    bool fetched_now = false;
    while (!s->finished && s->len < REFILL_BYTES) {
        if (!s->fetched) {
            if (fetched_now)
                break; /* one read of the partition per refill */
            eng_errdetail d = {0};
            int rc = eng_partition_read(s->p, s->next, REFILL_BYTES, &s->f, &d);
            if (rc) {
                fail_with(s, api_error_code_for(rc), api_engine_details(rc, &d),
                          d.message[0] ? d.message : eng_strerror(rc));
                return;
            }
            fetched_now = true;
            if (s->f.len == 0) {
                if (s->f.next_offset > s->next)
                    s->next = s->f.next_offset; /* a clean emptied the range: resume past it */
                eng_fetch_free(&s->f);
                break;
            }
            s->fetched = true;
            s->fpos = 0;
        }
        if (!s->in_batch) {
            if (s->fpos >= s->f.len) {
                eng_fetch_free(&s->f);
                s->fetched = false;
                continue;
            }
            if (!open_batch(s))
                continue;
        }
        eng_record r;
        int more = eng_record_iter_next(&s->it, &r);
        if (more < 0) {
            unreadable(s); /* as a page: the records before it went out */
            break;
        }
        if (more == 0) {
            close_batch(s);
            continue;
        }
        if (r.offset >= s->next && !emit_record(s, &r))
            break;
    }
}

ssize_t api_stream_produce(api_stream *s, char *buf, size_t max)
{
    if (s->pos == s->len) {
        s->pos = s->len = 0;
        if (s->finished)
            return API_STREAM_END;
        if (atomic_load(&s->stop)) {
            /* Ended by the server (stopping, or no room to park): the
             * client still gets the cursor to resume from, as at a bound. */
            if (atomic_load(&s->gone))
                return API_STREAM_END;
            finish(s);
        } else {
            refill(s);
        }
        if (s->len == 0) {
            bool heartbeat = s->o.format == API_STREAM_SSE &&
                             eng_mono_ms() - s->last_send_ms >= s->o.heartbeat_ms;
            if (!heartbeat)
                return API_STREAM_PARK;
            emit(s, ": heartbeat\n\n");
        }
    }
    size_t n = s->len - s->pos < max ? s->len - s->pos : max;
    memcpy(buf, s->out + s->pos, n);
    s->pos += n;
    s->last_send_ms = eng_mono_ms();
    return (ssize_t)n;
}

bool api_stream_client_left(api_stream *s)
{
    return atomic_load(&s->gone);
}

static void on_wake(api_waiter *w, api_wake_reason why)
{
    api_stream *s = (api_stream *)((char *)w - offsetof(api_stream, w));
    if (why == API_WAKE_GONE)
        atomic_store(&s->gone, true);
    if (why == API_WAKE_GONE || why == API_WAKE_SHUTDOWN)
        atomic_store(&s->stop, true);
    s->resume(s->conn); /* s belongs to the HTTP thread again from here */
}

void api_stream_park(api_stream *s)
{
    /* Woken once the high watermark is above next: a record at next exists. */
    s->w = (api_waiter){.p = s->p, .offset = s->next, .fd = s->fd, .wake = on_wake};
    s->w.deadline_ms = s->o.format == API_STREAM_SSE ? s->last_send_ms + s->o.heartbeat_ms : INT64_MAX;
    if (api_waiter_park(s->ws, &s->w) != 0) {
        atomic_store(&s->stop, true);
        s->resume(s->conn);
    }
}
