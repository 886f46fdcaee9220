/*
 * api_server.c - libmicrohttpd glue: connection callbacks to api_dispatch.
 *
 * The server runs MHD's internal thread pool with epoll, so a few threads
 * serve many keep-alive connections.  Handlers run on those threads.
 */
#include "api_server_impl.h"

#include "api_admission.h"
#include "api_lane.h"
#include "api_metrics.h"
#include "api_stream.h"
#include "api_wait.h"

#include "api_auth.h"
#include "api_cors.h"
#include "api_errors.h"
#include "api_router.h"
#include "eng_fs.h"
#include "eng_logger.h"

#include <arpa/inet.h>
#include <errno.h>
#include <malloc.h>
#include <microhttpd.h>
#include <netdb.h>
#include <pthread.h>
#include <stdatomic.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

/* A deferred answer.  The lock orders "suspend" (the request thread) against
 * "complete" (any thread): completing before the suspend happened just
 * leaves the answer for the request thread to send at once. */
enum { ASYNC_PENDING, ASYNC_SUSPENDED, ASYNC_DONE };

struct api_async {
    pthread_mutex_t lock;
    int state;
    api_response resp;
    struct MHD_Connection *conn;
    api_server *srv;
    char request_id[65];
};

typedef struct transport_ctx {
    api_server *srv;
    struct MHD_Connection *conn;
    conn_state *st;
    const char *request_id;
} transport_ctx;

static api_async *make_async(void *vctx)
{
    transport_ctx *t = vctx;
    if (t->st->async)
        return NULL; /* one deferral per request */
    api_async *a = calloc(1, sizeof *a);
    if (!a)
        return NULL;
    pthread_mutex_init(&a->lock, NULL);
    a->state = ASYNC_PENDING;
    a->conn = t->conn;
    a->srv = t->srv;
    snprintf(a->request_id, sizeof a->request_id, "%s", t->request_id);
    t->st->async = a;
    return a;
}

void api_async_complete(api_async *a, api_response *resp)
{
    api_resp_header(resp, "X-Request-Id", a->request_id);
    pthread_mutex_lock(&a->lock);
    api_response_clear(&a->resp);
    a->resp = *resp;
    memset(resp, 0, sizeof *resp);
    bool resume = a->state == ASYNC_SUSPENDED;
    a->state = ASYNC_DONE;
    if (resume) {
        /* Once resumed, a server thread may answer and free `a` at any time:
         * it is touched no more after this call (async_free waits for the
         * lock, which is released right after). */
        atomic_fetch_sub(&a->srv->suspended, 1);
        MHD_resume_connection(a->conn);
    }
    pthread_mutex_unlock(&a->lock);
}

static void async_free(api_async *a)
{
    if (!a)
        return;
    /* Wait out a completer that may still be between resume and unlock. */
    pthread_mutex_lock(&a->lock);
    pthread_mutex_unlock(&a->lock);
    api_response_clear(&a->resp);
    pthread_mutex_destroy(&a->lock);
    free(a);
}

void api_request_id(api_ctx *ctx, const char *client_id, char out[65])
{
    if (client_id) {
        size_t n = strlen(client_id);
        bool ok = n > 0 && n <= 64;
        for (size_t i = 0; ok && i < n; i++) {
            char c = client_id[i];
            ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                 c == '-' || c == '_' || c == '.';
        }
        if (ok) {
            memcpy(out, client_id, n + 1);
            return;
        }
    }
    snprintf(out, 65, "%s%010llx", ctx->id_prefix,
             (unsigned long long)atomic_fetch_add(&ctx->id_counter, 1));
}

/* A stream's link to its connection (owned by the MHD response). */
typedef struct stream_ctx {
    api_stream *s;
    api_server *srv;
    struct MHD_Connection *c;
    /* The request's, for its log line (body_bytes, client_left): only the
     * reader touches it, and libmicrohttpd calls the reader no more once the
     * request is reported complete, when it goes. */
    conn_state *st;
} stream_ctx;

static void stream_resume(void *vctx)
{
    stream_ctx *sc = vctx;
    atomic_fetch_sub(&sc->srv->suspended, 1);
    MHD_resume_connection(sc->c);
}

static ssize_t stream_reader(void *cls, uint64_t pos, char *buf, size_t max)
{
    (void)pos;
    stream_ctx *sc = cls;
    ssize_t n = api_stream_produce(sc->s, buf, max);
    if (n == API_STREAM_END) {
        sc->st->client_left = api_stream_client_left(sc->s);
        return MHD_CONTENT_READER_END_OF_STREAM;
    }
    if (n == API_STREAM_PARK) {
        /* libmicrohttpd's pattern for "no data yet": suspend, return 0.  The
         * suspend comes first so a wake-up can never precede it. */
        MHD_suspend_connection(sc->c);
        atomic_fetch_add(&sc->srv->suspended, 1);
        api_stream_park(sc->s);
        return 0;
    }
    sc->st->body_bytes += (uint64_t)n;
    return n;
}

static ssize_t head_reader(void *cls, uint64_t pos, char *buf, size_t max)
{
    (void)cls, (void)pos, (void)buf, (void)max;
    return MHD_CONTENT_READER_END_OF_STREAM;
}

static void stream_free(void *cls)
{
    stream_ctx *sc = cls;
    atomic_fetch_sub(&sc->srv->streams, 1);
    api_stream_free(sc->s);
    free(sc);
}

static enum MHD_Result queue(api_server *s, struct MHD_Connection *c, conn_state *st,
                             const char *method, api_response *resp)
{
    int64_t us = eng_mono_us() - st->start_us;
    api_metrics_request(st->route, method, resp->status, us);
    if (!st->handler_timed) {
        st->handler_timed = true;
        st->handler_us = us;
    }
    st->slow = s->slow_us && st->handler_us > s->slow_us;
    st->status = resp->status;
    bool head = strcmp(method, "HEAD") == 0;
    char *body = NULL;
    size_t len = 0;
    const char *ctype = resp->content_type ? resp->content_type : "application/json";
    struct MHD_Response *r = NULL;
    if (resp->stream_head) {
        /* A length of 0 would say the GET's body is empty; a stream has none
         * (libmicrohttpd never calls the reader for a HEAD). */
        r = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 1024, head_reader, NULL, NULL);
        if (!r)
            return MHD_NO;
    } else if (resp->stream) {
        stream_ctx *sc = malloc(sizeof *sc);
        if (!sc)
            return MHD_NO;
        *sc = (stream_ctx){.s = resp->stream, .srv = s, .c = c, .st = st};
        st->streamed = true;
        const union MHD_ConnectionInfo *ci =
            MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
        api_stream_bind(resp->stream, stream_resume, sc, ci ? ci->connect_fd : -1);
        resp->stream = NULL;
        atomic_fetch_add(&s->streams, 1);
        r = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 32 * 1024, stream_reader, sc,
                                              stream_free);
        if (!r) {
            stream_free(sc);
            return MHD_NO;
        }
    } else if (resp->has_file) {
        /* Sent straight from the segment file (sendfile on plain HTTP). */
        r = MHD_create_response_from_fd_at_offset64(resp->file_length, resp->file_fd,
                                                    resp->file_offset);
        if (!r)
            return MHD_NO;
        resp->has_file = false; /* the response closes the descriptor */
        len = resp->file_length;
        const union MHD_ConnectionInfo *ci =
            MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
        if (resp->file_part && s->ctx->waiters && ci && !st->live_added) {
            st->live = (api_live){.p = resp->file_part, .fd = ci->connect_fd};
            resp->file_part = NULL; /* the reference is the request's now */
            api_live_add(s->ctx->waiters, &st->live);
            st->live_added = true;
        }
    } else {
        if (resp->json) {
            body = json_dumps(resp->json, API_JSON_FLAGS);
            len = body ? strlen(body) : 0;
        } else if (resp->raw) {
            body = resp->raw;
            len = resp->raw_len;
            resp->raw = NULL;
        }
        r = MHD_create_response_from_buffer(len, body ? body : (char *)"",
                                            body ? MHD_RESPMEM_MUST_FREE : MHD_RESPMEM_PERSISTENT);
        if (!r) {
            free(body);
            return MHD_NO;
        }
    }
    if (len || resp->status != 204 || resp->stream)
        MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, ctype);
    for (size_t i = 0; i < resp->nheaders; i++)
        MHD_add_response_header(r, resp->headers[i].name, resp->headers[i].value);
    if (atomic_load(&s->ctx->state) == API_STOPPING)
        MHD_add_response_header(r, MHD_HTTP_HEADER_CONNECTION, "close");
    /* Every answer, errors and refusals before the body included, so a
     * cross-origin dashboard can read why a request failed. */
    bool wildcard;
    const char *origin = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Origin");
    if (api_cors_allowed(s->ctx->cors_origins, origin, &wildcard)) {
        MHD_add_response_header(r, "Access-Control-Allow-Origin", wildcard ? "*" : origin);
        MHD_add_response_header(r, "Access-Control-Expose-Headers", API_CORS_EXPOSE_HEADERS);
    }
    if (s->cors_varies)
        MHD_add_response_header(r, "Vary", "Origin");
    st->body_bytes = head || resp->stream_head ? 0 : len; /* a stream counts from 0 */
    enum MHD_Result ret = MHD_queue_response(c, (unsigned)resp->status, r);
    MHD_destroy_response(r);
    return ret;
}

/* Builds the request from the connection and body (borrowed for this call)
 * and answers it into resp. */
static void dispatch(api_server *s, struct MHD_Connection *c, conn_state *st, const char *method,
                     const char *url, const uint8_t *body, size_t len, api_response *resp)
{
    kv_list query = {0}, headers = {0};
    MHD_get_connection_values(c, MHD_GET_ARGUMENT_KIND, api__collect_kv, &query);
    MHD_get_connection_values(c, MHD_HEADER_KIND, api__collect_kv, &headers);
    api_request req = {.method = method, .path = url, .query = query.v, .nquery = query.n,
                       .headers = headers.v, .nheaders = headers.n, .body = body,
                       .body_len = len};
    api_request_id(s->ctx, api_header(&req, "X-Request-Id"), req.request_id);
    if (s->log_requests)
        memcpy(st->request_id, req.request_id, sizeof st->request_id);
    transport_ctx tctx = {.srv = s, .conn = c, .st = st, .request_id = req.request_id};
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    api_transport transport = {.defer = make_async, .conn = &tctx,
                               .client_fd = ci ? ci->connect_fd : -1};
    req.transport = &transport;
    if (st->too_large || st->overloaded) {
        /* The token was checked before the body (early_refusal). */
        if (st->too_large)
            api_admit_too_large(s->ctx, &req, resp, 0);
        else
            api_admit_overloaded(&req, resp, s->max_buffered);
        api_resp_header(resp, "X-Request-Id", req.request_id);
    } else {
        api_dispatch(s->ctx, &req, resp);
        st->route = resp->route;
    }
    free(query.v);
    free(headers.v);
}

/* Sends resp (and clears it), or suspends the connection until a deferred
 * answer is complete. */
static enum MHD_Result answer(api_server *s, struct MHD_Connection *c, conn_state *st,
                              const char *method, api_response *resp)
{
    if (resp->deferred && st->async) {
        /* A long-poll's handling ends where it parks: its wait is what it
         * asked for, not slowness (one clock read, only with the log on). */
        if (resp->waits && s->slow_us && !st->handler_timed) {
            st->handler_timed = true;
            st->handler_us = eng_mono_us() - st->start_us;
        }
        api_response_clear(resp);
        api_async *a = st->async;
        pthread_mutex_lock(&a->lock);
        if (a->state == ASYNC_DONE) {
            /* Completed while the handler was still running. */
            pthread_mutex_unlock(&a->lock);
            enum MHD_Result r = queue(s, c, st, method, &a->resp);
            api_response_clear(&a->resp);
            return r;
        }
        MHD_suspend_connection(c);
        atomic_fetch_add(&s->suspended, 1);
        st->unsent = true;
        atomic_fetch_add(&s->unsent, 1);
        a->state = ASYNC_SUSPENDED;
        pthread_mutex_unlock(&a->lock);
        return MHD_YES;
    }
    enum MHD_Result r = queue(s, c, st, method, resp);
    api_response_clear(resp);
    return r;
}

/* Whether the request's headers announce a body: a Content-Length above 0
 * or a Transfer-Encoding. */
static bool has_body(struct MHD_Connection *c)
{
    if (MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_TRANSFER_ENCODING))
        return true;
    const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
    return cl && strspn(cl, "0") != strlen(cl);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version, const char *upload,
                                  size_t *upload_size, void **con_cls)
{
    (void)version;
    api_server *s = cls;
    conn_state *st = *con_cls;
    if (!st || !st->begun) {
        if (!st) {
            if (!(st = calloc(1, sizeof *st + 1))) /* + an empty target */
                return MHD_NO;
            st->start_us = eng_mono_us();
            st->route = -1;
            *con_cls = st;
        }
        st->begun = true;
        api_request req = {.method = method, .path = url};
        api_request_id(s->ctx, MHD_lookup_connection_value(c, MHD_HEADER_KIND, "X-Request-Id"),
                       req.request_id);
        if (s->log_requests) {
            snprintf(st->method, sizeof st->method, "%s", method);
            memcpy(st->request_id, req.request_id, sizeof st->request_id);
        }
        api_response resp = {0};
        if (api__early_refusal(s, c, method, url, &resp, &req, st)) {
            if (!resp.nheaders || strcmp(resp.headers[resp.nheaders - 1].name, "X-Request-Id"))
                api_resp_header(&resp, "X-Request-Id", req.request_id);
            st->refused = true;
            /* libmicrohttpd closes the connection of an answer queued on
             * this first call, before the body: it cannot tell what to skip.
             * With no body to come, the answer waits for the call that ends
             * the request, and the connection serves the next one (the real
             * request after a CORS preflight, a client's after its 404). */
            if (!has_body(c) && (st->early = malloc(sizeof *st->early))) {
                *st->early = resp;
                return MHD_YES;
            }
            enum MHD_Result r = queue(s, c, st, method, &resp);
            api_response_clear(&resp);
            return r;
        }
        return MHD_YES;
    }
    if (st->refused) {
        if (st->early && !*upload_size) {
            api_response *early = st->early;
            st->early = NULL;
            enum MHD_Result r = queue(s, c, st, method, early);
            api_response_clear(early);
            free(early);
            return r;
        }
        *upload_size = 0; /* drain what MHD still hands us */
        return MHD_YES;
    }
    if (*upload_size) {
        size_t n = *upload_size;
        *upload_size = 0;
        if (st->len == 0 && n == st->declared && !st->too_large && !st->overloaded) {
            /* The whole body is in libmicrohttpd's read buffer (the usual
             * case for a body sent at once that fits, with its headers, in
             * that buffer: half the connection's memory; a larger one is
             * handed over as it arrives): answer from there instead of
             * copying it into ours first.  libmicrohttpd takes an answer
             * only on the call that ends the body, which it makes in the same
             * pass, so a deferred answer cannot be orphaned in between. */
            if (!(st->early = calloc(1, sizeof *st->early)))
                return MHD_NO;
            dispatch(s, c, st, method, url, (const uint8_t *)upload, n, st->early);
            return MHD_YES;
        }
        return api__gather_body(s, st, upload, n);
    }
    if (st->early) {
        api_response *early = st->early;
        st->early = NULL;
        enum MHD_Result r = answer(s, c, st, method, early);
        free(early);
        return r;
    }
    if (st->async) {
        /* Resumed: the deferred answer is ready. */
        enum MHD_Result r = queue(s, c, st, method, &st->async->resp);
        api_response_clear(&st->async->resp);
        return r;
    }
    api_response resp = {0};
    dispatch(s, c, st, method, url, (const uint8_t *)st->body, st->len, &resp);
    return answer(s, c, st, method, &resp);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
    api_server *s = cls;
    conn_state *st = *con_cls;
    if (st) {
        if (s->access_log || st->slow)
            api__log_request(s, c, st, toe);
        if (st->unsent)
            atomic_fetch_sub(&s->unsent, 1);
        /* A large body's JSON tree can take 25 times its size while parsed
         * (16 MiB of "1," is 420 MB of jansson values); glibc keeps freed
         * heap, so the process stayed that big.  Hand it back. */
        bool large = st->cap >= TRIM_AFTER_BODY_BYTES;
        api__release_body(s, st);
        if (large)
            malloc_trim(0);
        async_free(st->async);
        if (st->live_added) {
            /* Before libmicrohttpd closes the socket the registry may shut. */
            api_live_remove(s->ctx->waiters, &st->live);
            eng_partition_unref(st->live.p);
        }
        if (st->early) {
            api_response_clear(st->early);
            free(st->early);
        }
        free(st);
        *con_cls = NULL;
    }
}

/* MHD's default unescaper decodes "%00" to a NUL byte, which would silently
 * cut the path short: GET or DELETE /v1/topics/a%00junk would act on topic
 * "a".  Decode as MHD does, but keep every "%00" as the literal text "%00" so such
 * a path or query value stays invalid instead of turning into another one. */
static size_t unescape_keep_nul(void *cls, struct MHD_Connection *c, char *s)
{
    (void)cls;
    (void)c;
    if (!strstr(s, "%00"))
        return MHD_http_unescape(s);
    char *out = s;
    const char *in = s;
    for (;;) {
        const char *z = strstr(in, "%00");
        size_t n = z ? (size_t)(z - in) : strlen(in);
        memmove(out, in, n); /* out <= in: the text at z is still intact */
        out[n] = 0;
        out += MHD_http_unescape(out);
        if (!z)
            break;
        memcpy(out, "%00", 3); /* out + 3 <= z + 3: only overwrites consumed text */
        out += 3;
        in = z + 3;
    }
    *out = 0;
    return (size_t)(out - s);
}

/* libmicrohttpd hands us its own format strings. */
static void mhd_log(void *cls, const char *fmt, va_list ap) __attribute__((format(printf, 2, 0)));

/* libmicrohttpd's messages are mostly about clients: one that leaves a
 * stream early ("closed by remote peer") is the normal end of an SSE or
 * NDJSON reader and goes to DEBUG (a chaos run logged 1,377 such WARN lines
 * in 8 minutes); the rest (bad TLS handshakes, malformed requests), which
 * any client can cause at will, are WARN at most once a second with a count
 * of what was held back, so they cannot flood the log. */
static void mhd_log(void *cls, const char *fmt, va_list ap)
{
    (void)cls;
    char line[512];
    vsnprintf(line, sizeof line, fmt, ap);
    size_t n = strlen(line);
    while (n && (line[n - 1] == '\n' || line[n - 1] == '\r'))
        line[--n] = 0;
    if (strstr(line, "remote peer") || strstr(line, "reset by peer") ||
        strstr(line, "Broken pipe") || strstr(line, "no longer available for sending")) {
        ENG_DEBUG("http: %s", line);
        return;
    }
    /* Out of descriptors (or kernel memory), an HTTP thread that holds no
     * connection gets accept() failing on a listen socket that stays
     * readable, and libmicrohttpd 0.9.75 retries at once ("busy waiting"):
     * every such thread burned a core until descriptors came back.  This
     * message, logged on that thread for each failed round, is the only
     * hook it offers; pausing here caps the retries at about ten a second.
     * The thread holds no connection, so nobody waits on it but the
     * clients queued in the listen backlog, and a stop waits at most this
     * long for it. */
    if (strstr(line, "resource limit at FIRST connection"))
        nanosleep(&(struct timespec){.tv_nsec = 100 * 1000 * 1000}, NULL);
    /* libmicrohttpd says the same for both limits; past http.max.connections
     * it mostly stops accepting instead, so the operator is told which
     * setting to look at first. */
    static const char limit_hint[] =
        " (http.max.connections.per.ip from one address, or http.max.connections)";
    if (strstr(line, "Server reached connection limit") && n + sizeof limit_hint <= sizeof line)
        memcpy(line + n, limit_hint, sizeof limit_hint);
    static _Atomic int64_t last_ms;
    static _Atomic uint64_t held;
    int64_t now = eng_mono_ms(), last = atomic_load(&last_ms);
    if (last && now - last < 1000) {
        atomic_fetch_add(&held, 1);
        return;
    }
    if (!atomic_compare_exchange_strong(&last_ms, &last, now)) {
        atomic_fetch_add(&held, 1);
        return;
    }
    uint64_t h = atomic_exchange(&held, 0);
    if (h)
        ENG_WARN("http: %s (%llu more such messages in the last second)", line,
                 (unsigned long long)h);
    else
        ENG_WARN("http: %s", line);
}

int api_server_start(api_ctx *ctx, const api_server_opts *o, api_server **out, char *err,
                     size_t err_len)
{
    struct sockaddr_storage ss;
    memset(&ss, 0, sizeof ss);
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_PASSIVE},
                    *ai;
    int gai = getaddrinfo(o->host, NULL, &hints, &ai);
    if (gai) {
        snprintf(err, err_len, "cannot resolve listener host '%s': %s", o->host, gai_strerror(gai));
        return -EINVAL;
    }
    memcpy(&ss, ai->ai_addr, ai->ai_addrlen);
    bool v6 = ai->ai_family == AF_INET6;
    freeaddrinfo(ai);
    /* "[::]" means every address, as it does for Kafka (Java binds it
     * dual-stack): IPv4 clients reach it too, instead of only IPv6 ones. */
    bool any6 = v6 && IN6_IS_ADDR_UNSPECIFIED(&((struct sockaddr_in6 *)&ss)->sin6_addr);
    if (v6)
        ((struct sockaddr_in6 *)&ss)->sin6_port = htons(o->port);
    else
        ((struct sockaddr_in *)&ss)->sin_port = htons(o->port);
    api_server *s = calloc(1, sizeof *s);
    if (!s)
        return -ENOMEM;
    s->ctx = ctx;
    s->cors_varies = api_cors_varies(ctx->cors_origins);
    s->max_buffered = o->max_buffered;
    s->access_log = o->access_log;
    s->slow_us = o->slow_request_ms > 0 ? o->slow_request_ms * 1000 : 0;
    s->log_requests = s->access_log || s->slow_us;
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_USE_ERROR_LOG |
                     MHD_ALLOW_SUSPEND_RESUME |
                     (any6 ? MHD_USE_DUAL_STACK : v6 ? MHD_USE_IPv6 : 0);
    bool tls = o->tls_cert_pem && o->tls_key_pem;
    if (tls && MHD_is_feature_supported(MHD_FEATURE_TLS) != MHD_YES) {
        snprintf(err, err_len, "this libmicrohttpd has no TLS support");
        free(s);
        return -ENOTSUP;
    }
    struct MHD_OptionItem opts[16];
    int k = 0;
    opts[k++] = (struct MHD_OptionItem){MHD_OPTION_EXTERNAL_LOGGER, (intptr_t)mhd_log, NULL};
    opts[k++] = (struct MHD_OptionItem){MHD_OPTION_SOCK_ADDR, 0, &ss};
    opts[k++] = (struct MHD_OptionItem){MHD_OPTION_THREAD_POOL_SIZE, o->threads ? o->threads : 4, NULL};
    opts[k++] = (struct MHD_OptionItem){MHD_OPTION_CONNECTION_LIMIT,
                                        o->connection_limit ? o->connection_limit : 10000, NULL};
    opts[k++] = (struct MHD_OptionItem){MHD_OPTION_CONNECTION_TIMEOUT, o->idle_timeout_s, NULL};
    /* The idle timeout alone leaves one address free to hold every
     * connection slot with requests that trickle in (a slow-header attack,
     * or one runaway client): past http.max.connections everyone else
     * waits.  libmicrohttpd closes a connection over this limit as soon as
     * it is accepted, before reading a byte, and logs it (WARN, rate-limited
     * like every client-caused message). */
    if (o->per_ip_connection_limit)
        opts[k++] = (struct MHD_OptionItem){MHD_OPTION_PER_IP_CONNECTION_LIMIT,
                                            o->per_ip_connection_limit, NULL};
    opts[k++] = (struct MHD_OptionItem){MHD_OPTION_NOTIFY_COMPLETED, (intptr_t)on_completed, s};
    /* Only for the request logs: it costs a copy of the target per request. */
    if (s->log_requests)
        opts[k++] = (struct MHD_OptionItem){MHD_OPTION_URI_LOG_CALLBACK, (intptr_t)api__uri_logged, s};
    /* Not MHD_OPTION_LISTENING_ADDRESS_REUSE=1: that is SO_REUSEPORT, which
     * let a second server (another data dir, say) bind the same port and
     * take half the connections.  libmicrohttpd's default, SO_REUSEADDR,
     * still lets a restart bind at once past TIME_WAIT. */
    opts[k++] = (struct MHD_OptionItem){MHD_OPTION_UNESCAPE_CALLBACK, (intptr_t)unescape_keep_nul, NULL};
    /* libmicrohttpd builds the response headers in the same per-connection
     * pool that holds the request's: with the pool at http.max.header.bytes,
     * a request whose headers just fit left no room, so an append was stored
     * but answered with nothing ("failed to create response header") and a
     * retry stored it twice.  The pool gets room for our answers on top, and
     * the limit itself is checked in early_refusal. */
    s->max_header_bytes = o->memory_limit;
    if (o->memory_limit)
        opts[k++] = (struct MHD_OptionItem){MHD_OPTION_CONNECTION_MEMORY_LIMIT,
                                            (intptr_t)(o->memory_limit + RESPONSE_HEADROOM_BYTES),
                                            NULL};
    if (tls) {
        flags |= MHD_USE_TLS;
        opts[k++] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_MEM_CERT, 0, (void *)o->tls_cert_pem};
        opts[k++] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_MEM_KEY, 0, (void *)o->tls_key_pem};
        opts[k++] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_PRIORITIES, 0,
                                            (void *)"NORMAL:-VERS-ALL:+VERS-TLS1.3:+VERS-TLS1.2"};
    }
    opts[k++] = (struct MHD_OptionItem){MHD_OPTION_END, 0, NULL};
    /* A body sent without Content-Length grows by doubling.  glibc raises
     * its mmap threshold to the size of each mapped block freed (up to
     * 32 MiB), so after the first such 16 MiB body the next ones grew in the
     * HTTP threads' arenas, and malloc_trim gives back free chunks but never
     * a thread arena's top: each HTTP thread kept about 16 MiB for good (4
     * threads: RSS 10 -> 76 MB after eight refused chunked uploads).  A fixed
     * threshold maps every block of TRIM_AFTER_BODY_BYTES or more, so freeing
     * it returns it.  Setting it also fixes the trim threshold, at 128 KiB
     * unless set too: then every 1,000-record JSON read gave its pages back
     * and faulted them in again (a quarter fewer reads a second).  The same
     * 4 MiB bounds what a thread's heap keeps free at its top. */
#if !defined(__SANITIZE_ADDRESS__) /* ASan's allocator takes no mallopt (it answers 0) */
    if (mallopt(M_MMAP_THRESHOLD, (int)TRIM_AFTER_BODY_BYTES) != 1 ||
        mallopt(M_TRIM_THRESHOLD, (int)TRIM_AFTER_BODY_BYTES) != 1)
        ENG_WARN("http: mallopt(M_MMAP_THRESHOLD) failed; large request bodies may stay in the heap");
#endif
    s->daemon = MHD_start_daemon(flags, o->port, NULL, NULL, on_request, s, MHD_OPTION_ARRAY, opts,
                                 MHD_OPTION_END);
    if (!s->daemon) {
        snprintf(err, err_len, "cannot listen on %s:%u (address in use or not permitted)", o->host,
                 o->port);
        free(s);
        return -EADDRINUSE;
    }
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(s->daemon, MHD_DAEMON_INFO_BIND_PORT);
    s->port = info ? info->port : o->port;
    *out = s;
    return 0;
}

uint16_t api_server_port(const api_server *s)
{
    return s->port;
}

void api_server_stop(api_server *s)
{
    if (!s)
        return;
    /* No MHD_quiesce_daemon: with epoll and a thread pool, libmicrohttpd
     * 0.9.75 races its own workers removing the listen socket from their
     * epoll sets and aborts the process ("Failed to remove listen FD from
     * epoll set", seen in test_api_retention).  The socket stays open until
     * MHD_stop_daemon instead; the state is API_STOPPING, so a request that
     * arrives meanwhile gets 503 shutting_down with Connection: close.
     *
     * Parked readers are answered now and streams told to end.  Then, as
     * libmicrohttpd must not stop with suspended connections, every deferred
     * answer (durable appends, long-polls) is waited for until it has been
     * sent, not only resumed: stopping right after the resume closed the
     * connection before a server thread sent the answer (found by
     * test_stop_with_open_streams_and_polls, one long-poll in a CI run got
     * no answer).  Streams get a short grace to send their last event; a
     * client that stopped reading is cut off after it. */
    api_waiters_stop(s->ctx->waiters);
    /* Queued maintenance is refused (503); running maintenance ends first,
     * its answer then waited for like the others. */
    api_lanes_stop(s->ctx->lanes);
    for (int i = 0; i < 3000 && (atomic_load(&s->suspended) > 0 || atomic_load(&s->unsent) > 0);
         i++)
        usleep(10000);
    if (atomic_load(&s->suspended) > 0 || atomic_load(&s->unsent) > 0)
        ENG_WARN("http: %d connections still waiting at stop, %d answers unsent",
                 atomic_load(&s->suspended), atomic_load(&s->unsent));
    for (int i = 0; i < 200 && atomic_load(&s->streams) > 0; i++)
        usleep(10000);
    MHD_stop_daemon(s->daemon);
    free(s);
}
