/*
 * api_web.c - the dashboard page at GET /.
 *
 * One self-contained HTML file (api/web/dashboard.html: markup, CSS and
 * JavaScript, no build step, nothing fetched from elsewhere), embedded at
 * build time.  It reads only the public API (the JSON routes and /metrics),
 * with the bearer token the user types in when authentication is on, so
 * serving the page needs no role.
 */
#include "api_router.h"

#include <stdlib.h>
#include <string.h>

extern const unsigned char api_web_dashboard[];
extern const size_t api_web_dashboard_len;

void api_h_dashboard(api_ctx *ctx, const api_request *req, const api_params *params,
                     api_response *resp)
{
    (void)ctx;
    (void)req;
    (void)params;
    char *copy = malloc(api_web_dashboard_len);
    if (!copy) {
        resp->status = 500;
        return;
    }
    memcpy(copy, api_web_dashboard, api_web_dashboard_len);
    resp->status = 200;
    resp->raw = copy;
    resp->raw_len = api_web_dashboard_len;
    resp->content_type = "text/html; charset=utf-8";
    api_resp_header(resp, "Content-Security-Policy",
                    "default-src 'self'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; "
                    "connect-src 'self'; img-src 'self' data:; frame-ancestors 'none'");
    api_resp_header(resp, "X-Content-Type-Options", "nosniff");
    api_resp_header(resp, "Cache-Control", "no-cache");
}
