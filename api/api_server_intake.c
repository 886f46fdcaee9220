/*
 * api_server_intake.c - a request's line, headers and body on their way to
 * dispatch: the refusals made before any body byte is read, and the body's
 * buffer, held against the budget shared by every connection.
 */
#include "api_server_impl.h"

#include "api_admission.h"
#include "api_errors.h"
#include "api_router.h"
#include "eng_logger.h"

#include <stdlib.h>
#include <string.h>

/* libmicrohttpd answers a request only once its whole body is in (or before
 * any of it): a body refused while it streams in (over http.max.request.bytes,
 * or past the shared budget) is read and dropped this far further, so a client
 * that is nearly done still gets its 413 or 503; past it the connection is
 * closed without an answer rather than read to its end, however long. */
#define REFUSED_DRAIN_BYTES (64u << 10)

enum MHD_Result api__collect_kv(void *cls, enum MHD_ValueKind kind, const char *key,
                                const char *value)
{
    (void)kind;
    kv_list *l = cls;
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 16;
        api_kv *nv = realloc(l->v, cap * sizeof *nv);
        if (!nv) {
            l->failed = true;
            return MHD_NO;
        }
        l->v = nv;
        l->cap = cap;
    }
    l->v[l->n++] = (api_kv){.key = key, .value = value};
    return MHD_YES;
}

/* Takes delta more bytes of body buffer from the shared budget; false when
 * they do not fit. */
static bool reserve_body(api_server *s, size_t delta)
{
    size_t now = atomic_fetch_add(&s->buffered, delta) + delta;
    if (s->max_buffered && now > s->max_buffered) {
        atomic_fetch_sub(&s->buffered, delta);
        return false;
    }
    return true;
}

void api__release_body(api_server *s, conn_state *st)
{
    atomic_fetch_sub(&s->buffered, st->cap);
    free(st->body);
    st->body = NULL;
    st->len = st->cap = 0;
}

/* The request line's size: method, target and version with their three
 * separators.  The target is measured decoded (path and query arguments),
 * which may be a little shorter than sent: it only tells 414 from 431. */
static size_t request_line_bytes(struct MHD_Connection *c, const char *method, const char *url)
{
    kv_list query = {0};
    MHD_get_connection_values(c, MHD_GET_ARGUMENT_KIND, api__collect_kv, &query);
    size_t n = strlen(method) + 1 + strlen(url) + 1 + strlen("HTTP/1.1") + 2;
    for (size_t i = 0; i < query.n; i++)
        n += 1 + strlen(query.v[i].key) + (query.v[i].value ? 1 + strlen(query.v[i].value) : 0);
    free(query.v);
    return n;
}

/* The request line and headers as received, up to the empty line; counted
 * from the parsed headers when libmicrohttpd cannot say. */
static size_t request_header_bytes(struct MHD_Connection *c, const kv_list *headers)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_REQUEST_HEADER_SIZE);
    if (ci && ci->header_size)
        return ci->header_size;
    size_t n = 2;
    for (size_t i = 0; i < headers->n; i++)
        n += strlen(headers->v[i].key) + 2 + strlen(headers->v[i].value) + 2;
    return n;
}

/* Answers before reading the body, so that nothing a request could be
 * refused for costs a byte of body or a 100 Continue: an ambiguous body
 * length (two Content-Lengths, or Content-Length with Transfer-Encoding),
 * headers over http.max.header.bytes, an unknown route, the route's token
 * (role and topic prefix), a body on a route that takes none, a
 * Content-Length over http.max.request.bytes, or one the shared budget
 * cannot hold now (api_admission.h). */
bool api__early_refusal(api_server *s, struct MHD_Connection *c, const char *method,
                        const char *url, api_response *resp, api_request *req, conn_state *st)
{
    api_params params;
    bool known;
    char allow[64];
    const api_route *r = api_route_match(method, url, &params, &known, allow, sizeof allow);
    /* A refusal here (401, 403, 413, 414, 431, 503) answers a request for a
     * route: /metrics counts it there, not as an unmatched path. */
    st->route = r ? (int)(r - api_routes()) : -1;
    kv_list headers = {0};
    MHD_get_connection_values(c, MHD_HEADER_KIND, api__collect_kv, &headers);
    if (headers.failed) {
        /* A request judged on part of its headers could pass for another. */
        free(headers.v);
        api_error(resp, req, "internal_error", NULL, "out of memory reading the request headers");
        return true;
    }
    req->headers = headers.v;
    req->nheaders = headers.n;
    bool refused = true;
    if (!api_admit_framing(req, resp)) {
        /* 400: its body's end is ambiguous, so nothing after it is read */
    } else if (!api_admit_header_size(req, request_line_bytes(c, method, url),
                                      request_header_bytes(c, &headers), s->max_header_bytes,
                                      resp)) {
        /* 414 / 431 */
    } else if (!r) {
        api_dispatch(s->ctx, req, resp); /* 401, or 404 / 405 with the usual body */
    } else if (!api_admit_route(s->ctx, r, &params, req, resp)) {
        /* 401 / 403 / 413 already in resp */
    } else {
        const char *cl = api_header(req, MHD_HTTP_HEADER_CONTENT_LENGTH);
        char *end = NULL;
        unsigned long long n = cl ? strtoull(cl, &end, 10) : 0;
        if (cl && *end == 0 && n > s->ctx->limits.max_request_bytes) {
            api_admit_too_large(s->ctx, req, resp, n);
        } else if (cl && *end == 0 && s->max_buffered &&
                   atomic_load(&s->buffered) + n > s->max_buffered) {
            /* A body that cannot fit the budget now is refused before it is
             * sent (a client using Expect: 100-continue never sends it); one
             * that fits is still checked chunk by chunk as it arrives. */
            api_admit_overloaded(req, resp, s->max_buffered);
        } else {
            if (cl && *end == 0)
                st->declared = (size_t)n;
            refused = false;
        }
    }
    free(headers.v);
    req->headers = NULL;
    req->nheaders = 0;
    return refused;
}

enum MHD_Result api__gather_body(api_server *s, conn_state *st, const char *upload, size_t n)
{
    if (st->too_large || st->overloaded) {
        st->drained += n;
        if (st->drained <= REFUSED_DRAIN_BYTES)
            return MHD_YES;
        ENG_INFO("http: closed a connection whose refused body (%s) went on past %u more bytes",
                 st->too_large ? "over http.max.request.bytes" : "overloaded", REFUSED_DRAIN_BYTES);
        return MHD_NO;
    }
    if (st->len + n > s->ctx->limits.max_request_bytes) {
        st->too_large = true;
        api__release_body(s, st);
        return MHD_YES;
    }
    if (st->len + n > st->cap) {
        /* A declared length is the whole body: one allocation and no
         * copy as it grows (a lying client only costs a realloc). */
        size_t cap = st->cap ? st->cap : st->declared > n ? st->declared : 4096;
        while (cap < st->len + n)
            cap *= 2;
        if (cap > s->ctx->limits.max_request_bytes) /* the largest body takes no more */
            cap = s->ctx->limits.max_request_bytes;
        if (!reserve_body(s, cap - st->cap)) {
            st->overloaded = true;
            api__release_body(s, st);
            return MHD_YES;
        }
        char *nb = realloc(st->body, cap);
        if (!nb) {
            atomic_fetch_sub(&s->buffered, cap - st->cap);
            return MHD_NO;
        }
        st->body = nb;
        st->cap = cap;
    }
    memcpy(st->body + st->len, upload, n);
    st->len += n;
    return MHD_YES;
}
