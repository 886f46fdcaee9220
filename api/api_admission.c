/*
 * api_admission.c - see api_admission.h.
 *
 * Order matters and is api_server.c's: the route (token, then body), then
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
