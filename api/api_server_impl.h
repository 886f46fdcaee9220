/*
 * api_server_impl.h - what api_server.c (libmicrohttpd callbacks, deferred
 * answers, the daemon) and api_server_intake.c (a request's headers and
 * body before dispatch) share.  Not for other files.
 */
#ifndef API_SERVER_IMPL_H
#define API_SERVER_IMPL_H

#include "api_ctx.h"
#include "api_request.h"
#include "api_server.h"
#include "api_wait.h"

#include <microhttpd.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Bodies at least this large give freed heap back to the system when their
 * request ends (see on_completed). */
#define TRIM_AFTER_BODY_BYTES (4u << 20)

/* Per-connection memory past http.max.header.bytes, where libmicrohttpd builds
 * the response headers (see api_server_start).  Measured with header blocks
 * swept across the limit: a JSON error with CORS headers needed about 800
 * bytes past the request's; our largest answer adds at most
 * API_MAX_RESP_HEADERS headers of 48 + 512 bytes (4.5 KiB) to libmicrohttpd's
 * own (Date, Content-Length, Connection), so 8 KiB covers it with room. */
#define RESPONSE_HEADROOM_BYTES (8u << 10)

struct api_server {
    struct MHD_Daemon *daemon;
    api_ctx *ctx;
    uint16_t port;
    _Atomic int suspended; /* connections waiting for a deferred answer */
    /* Deferred answers (long-polls, durable appends) not yet sent, and
     * streams not yet ended: a resume only asks a server thread to send, so
     * stopping waits for these, not just for the resumes. */
    _Atomic int unsent;
    _Atomic int streams;
    bool cors_varies; /* api_cors_varies(ctx->cors_origins), computed once */
    /* Bytes of request-body buffers held, over every connection, against
     * max_buffered: many slow or concurrent large uploads are refused
     * (503 overloaded) instead of growing the process without bound. */
    _Atomic size_t buffered;
    size_t max_buffered;
    size_t max_header_bytes; /* http.max.header.bytes, checked in early_refusal; 0 = none */
    bool access_log;         /* http.access.log */
    int64_t slow_us;         /* http.slow.request.ms in microseconds; 0 = off */
    bool log_requests;       /* either: conn_state keeps what a request's line needs */
};

typedef struct conn_state {
    int64_t start_us; /* first callback: where request latency starts */
    int route;        /* the answering route, kept for deferred answers */
    char *body;
    size_t len, cap; /* cap is counted in api_server.buffered */
    size_t declared; /* Content-Length (within http.max.request.bytes), or 0 */
    size_t drained;  /* bytes dropped since the body was refused */
    bool too_large;
    bool overloaded; /* the body did not fit under api_server.max_buffered */
    bool refused; /* a response was queued before the body */
    bool unsent;  /* counted in api_server.unsent until the request ends */
    api_async *async;
    /* The answer to a body read in place, waiting for the body's end. */
    api_response *early;
    /* A file range being sent (a raw read): in the waiter registry's live
     * list until the request ends, holding live.p, so that a delete of its
     * topic cuts off a client that stopped reading rather than leave the
     * deleted segment open until the idle timeout. */
    api_live live;
    bool live_added;
    bool begun; /* on_request has seen the request (api__uri_logged made st before) */
    /* For the request's log line (api_access.c).  status, body_bytes and the
     * handler time are kept always (plain stores, no clock read); the rest
     * only with api_server.log_requests. */
    int status;          /* the status queued; 0 = none yet */
    uint64_t body_bytes; /* a fixed body's length, or what a stream produced so far */
    bool streamed;       /* body_bytes counts a stream's output */
    bool client_left;    /* the stream ended because its client hung up */
    bool handler_timed;  /* handler_us is set: the slow-request clock stopped */
    bool slow;           /* handler_us passed http.slow.request.ms */
    bool target_cut;     /* target holds only the start of a longer one */
    int64_t handler_us;
    char method[16];
    char request_id[65];
    char target[]; /* the request target as sent (api__uri_logged), or "" */
} conn_state;

/* How much of a request target is kept for its log line. */
#define API_LOG_TARGET_BYTES 512

typedef struct kv_list {
    api_kv *v;
    size_t n, cap;
    bool failed; /* an allocation failed: the list is short */
} kv_list;

/* MHD_KeyValueIterator appending to a kv_list (cls); the strings stay
 * libmicrohttpd's. */
enum MHD_Result api__collect_kv(void *cls, enum MHD_ValueKind kind, const char *key,
                                const char *value);

/* Answers before reading the body when the request can be refused from its
 * line and headers alone; false when it goes on to its body. */
bool api__early_refusal(api_server *s, struct MHD_Connection *c, const char *method,
                        const char *url, api_response *resp, api_request *req, conn_state *st);

/* Takes n more bytes of body into the connection's buffer; MHD_NO closes
 * the connection. */
enum MHD_Result api__gather_body(api_server *s, conn_state *st, const char *upload, size_t n);

/* MHD_OPTION_URI_LOG_CALLBACK: a request's state, made as soon as its
 * request line is read (so the log's duration starts there, and a request
 * libmicrohttpd refuses itself still ends in on_completed), holding its
 * target as sent.  NULL when out of memory (on_request makes it then). */
void *api__uri_logged(void *cls, const char *uri, struct MHD_Connection *c);

/* Writes a request's access or slow-request line, if it has one. */
void api__log_request(api_server *s, struct MHD_Connection *c, conn_state *st,
                      enum MHD_RequestTerminationCode toe);

/* Frees a connection's body buffer and gives its bytes back to the budget. */
void api__release_body(api_server *s, conn_state *st);

#endif
