/*
 * api_server.h - the libmicrohttpd server that feeds api_dispatch.
 *
 * Per request (the systemd-journal-remote pattern): the first callback
 * creates the request state and checks method, route and Content-Length
 * before any body is accepted; body chunks are appended up to
 * http.max.request.bytes (a larger body is refused while it streams in, never
 * buffered whole); the last callback dispatches and queues the response; the
 * completion callback frees the state.
 */
#ifndef API_SERVER_H
#define API_SERVER_H

#include "api_ctx.h"

#include <stdint.h>

typedef struct api_server api_server;

typedef struct api_server_opts {
    const char *host;         /* numeric or resolvable address */
    uint16_t port;            /* 0 = any free port */
    unsigned threads;         /* MHD thread pool size */
    unsigned connection_limit;
    unsigned per_ip_connection_limit; /* from one client address (0 = none) */
    unsigned idle_timeout_s;
    size_t memory_limit;      /* http.max.header.bytes: the request line and headers, checked
                               * before the body (431); libmicrohttpd's per-connection pool
                               * gets room for the response headers on top (0 = MHD's
                               * default pool, no check of our own) */
    size_t max_buffered;      /* request bodies held at once, all connections (0 = no cap) */
    const char *tls_cert_pem; /* both set: serve HTTPS (TLS 1.2+) */
    const char *tls_key_pem;
    bool access_log;          /* http.access.log: a line per request (INFO) */
    int64_t slow_request_ms;  /* http.slow.request.ms: handling longer is logged (WARN); 0 off */
} api_server_opts;

/* Starts listening; *out owned by the caller (api_server_stop). */
int api_server_start(api_ctx *ctx, const api_server_opts *o, api_server **out, char *err,
                     size_t err_len);

/* The port actually bound (useful with port 0). */
uint16_t api_server_port(const api_server *s);

/* Stops accepting, lets in-flight requests finish, frees the server. */
void api_server_stop(api_server *s);

/* Fills req->request_id from a client X-Request-Id (if sane) or a new id. */
void api_request_id(api_ctx *ctx, const char *client_id, char out[65]);

#endif
