/*
 * api_cors.h - Cross-Origin Resource Sharing, for browser dashboards served
 * from another origin than the API (http.cors.allowed.origins).
 *
 * The setting is empty (off: no CORS header is ever sent, as before), "*"
 * (any origin), or a comma-separated list of origins such as
 * "https://grafana.example.com,http://localhost:3000".  A request whose
 * Origin is allowed gets Access-Control-Allow-Origin on every answer,
 * errors included, so a browser script can read a 401 or a 404; a
 * preflight (OPTIONS with Access-Control-Request-Method) on any route gets
 * 204 with the methods the route takes, without a token: browsers send
 * none on a preflight.  Tokens still guard the real request.
 */
#ifndef API_CORS_H
#define API_CORS_H

#include "api_ctx.h"
#include "api_request.h"

#include <stdbool.h>
#include <stddef.h>

/* Response headers a cross-origin script may read. */
#define API_CORS_EXPOSE_HEADERS \
    "X-Request-Id, X-Next-Offset, X-High-Watermark, X-Log-Start-Offset, Retry-After, Location"

/* Checks the setting's text; false with a message in err when an entry is
 * neither "*" nor an origin (http[s]://host[:port], no path). */
bool api_cors_check_setting(const char *origins, char *err, size_t err_len);

/* Whether origin (a request's Origin header) may read answers; *wildcard
 * tells whether the answer should say "*" rather than echo it. */
bool api_cors_allowed(const char *origins, const char *origin, bool *wildcard);

/* Whether answers depend on the request's Origin (a list of origins is
 * set, without "*"): they then say Vary: Origin, allowed origin or not, so
 * a shared cache never hands one origin's answer to another. */
bool api_cors_varies(const char *origins);

/* Answers a CORS preflight for a path the router knows (allow: its methods)
 * with 204; false, leaving resp alone, when req is not one or its origin
 * is not allowed. */
bool api_cors_preflight(const api_ctx *ctx, const api_request *req, const char *allow,
                        api_response *resp);

#endif
