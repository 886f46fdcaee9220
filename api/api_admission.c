/*
 * api_admission.c - see api_admission.h.
 *
 * Order matters and is api_server.c's: framing first (a request whose length
 * is ambiguous is not read further, whoever sent it), then the header size,
 * then the route (token, then body), then
 * the body's declared size and the shared body budget.  The token comes
 * before any statement about the body, so a client without one learns
 * nothing but 401.
 */
#include "api_admission.h"

#include "api_auth.h"
#include "api_errors.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* Compares a header value with word, ignoring case and the optional white
 * space around it (RFC 9110 §5.5). */
static bool value_is(const char *v, const char *word)
{
    while (*v == ' ' || *v == '\t')
        v++;
    size_t n = strlen(word);
    if (strncasecmp(v, word, n) != 0)
        return false;
    for (v += n; *v; v++)
        if (*v != ' ' && *v != '\t')
            return false;
    return true;
}

static bool bad_framing(const api_request *req, api_response *resp, const char *why)
{
    api_error(resp, req, "invalid_request", NULL, "%s; the connection is closed", why);
    api_resp_header(resp, "Connection", "close");
    return false;
}

bool api_admit_framing(const api_request *req, api_response *resp)
{
    size_t cl = 0, te = 0;
    const char *te_value = NULL;
    for (size_t i = 0; i < req->nheaders; i++) {
        if (strcasecmp(req->headers[i].key, "Content-Length") == 0) {
            cl++;
        } else if (strcasecmp(req->headers[i].key, "Transfer-Encoding") == 0) {
            te++;
            te_value = req->headers[i].value;
        }
    }
    if (cl > 1)
        return bad_framing(req, resp, "more than one Content-Length header");
    if (cl && te)
        return bad_framing(req, resp, "Content-Length together with Transfer-Encoding");
    /* libmicrohttpd decodes "chunked" alone; any other coding (or a list)
     * would be read as a body of unknown end. */
    if (te > 1 || (te && !value_is(te_value ? te_value : "", "chunked")))
        return bad_framing(req, resp, "the only Transfer-Encoding taken is a single 'chunked'");
    return true;
}

bool api_admit_header_size(const api_request *req, size_t line_bytes, size_t header_bytes,
                           size_t max_bytes, api_response *resp)
{
    if (!max_bytes || header_bytes <= max_bytes)
        return true;
    json_t *details = json_pack("{s:I}", "max_header_bytes", (json_int_t)max_bytes);
    bool line = line_bytes > max_bytes;
    /* No code of its own in the error table: request_too_large says what
     * the client must shrink, the status says which part. */
    api_error(resp, req, "request_too_large", details,
              line ? "the request line of %zu bytes is larger than http.max.header.bytes (%zu)"
                   : "the request line and headers (%zu bytes) are larger than "
                     "http.max.header.bytes (%zu)",
              line ? line_bytes : header_bytes, max_bytes);
    resp->status = line ? 414 : 431;
    return false;
}

/* True when the request announces a body: a non-zero Content-Length, or one
 * sent chunked (whose size is not known yet).  Framing was checked first. */
static bool has_body(const api_request *req)
{
    if (api_header(req, "Transfer-Encoding"))
        return true;
    const char *cl = api_header(req, "Content-Length");
    if (!cl)
        return false;
    char *end;
    unsigned long long n = strtoull(cl, &end, 10);
    return n > 0 || end == cl;
}

bool api_admit_route(const api_ctx *ctx, const api_route *r, const api_params *params,
                     const api_request *req, api_response *resp)
{
    if (!api_auth_check(ctx->auth, req, r, params, resp))
        return false;
    if (!(r->flags & API_ROUTE_BODY) && has_body(req)) {
        /* Buffering a body nobody reads would only spend the shared budget. */
        api_error(resp, req, "request_too_large", json_pack("{s:i}", "max_bytes", 0),
                  "%s %s takes no request body", r->method, r->pattern);
        return false;
    }
    return true;
}

void api_admit_too_large(const api_ctx *ctx, const api_request *req, api_response *resp,
                         unsigned long long declared)
{
    size_t max = ctx->limits.max_request_bytes;
    json_t *details = json_pack("{s:I}", "max_bytes", (json_int_t)max);
    if (declared)
        api_error(resp, req, "request_too_large", details,
                  "request body of %llu bytes is larger than http.max.request.bytes (%zu)",
                  declared, max);
    else
        api_error(resp, req, "request_too_large", details,
                  "request body is larger than http.max.request.bytes (%zu)", max);
}

void api_admit_overloaded(const api_request *req, api_response *resp, size_t max_buffered)
{
    api_error(resp, req, "overloaded",
              json_pack("{s:I}", "max_inflight_bytes", (json_int_t)max_buffered),
              "the server already holds http.max.inflight.request.bytes (%zu) of request "
              "bodies; retry shortly",
              max_buffered);
    api_resp_header(resp, "Retry-After", "1");
}
