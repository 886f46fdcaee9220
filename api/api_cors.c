/*
 * api_cors.c - http.cors.allowed.origins: which origins may read answers,
 * and the preflight answer (see api_cors.h).
 */
#include "api_cors.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

/* The next comma-separated entry of *list, spaces trimmed; NULL at the end. */
static const char *next_entry(const char **list, size_t *len)
{
    const char *s = *list;
    while (*s == ' ' || *s == ',')
        s++;
    if (!*s)
        return NULL;
    size_t n = strcspn(s, ",");
    *list = s + n;
    while (n && s[n - 1] == ' ')
        n--;
    *len = n;
    return s;
}

/* http[s]://host[:port]: what a browser sends as Origin, nothing after. */
static bool is_origin(const char *s, size_t n)
{
    size_t skip = n > 7 && !strncasecmp(s, "http://", 7)    ? 7
                  : n > 8 && !strncasecmp(s, "https://", 8) ? 8
                                                            : 0;
    if (!skip)
        return false;
    for (size_t i = skip; i < n; i++)
        if (!isalnum((unsigned char)s[i]) && !strchr(".-:[]", s[i]))
            return false;
    return true;
}

bool api_cors_check_setting(const char *origins, char *err, size_t err_len)
{
    const char *list = origins, *e;
    size_t n;
    while ((e = next_entry(&list, &n))) {
        if ((n == 1 && *e == '*') || is_origin(e, n))
            continue;
        snprintf(err, err_len,
                 "http.cors.allowed.origins: '%.*s' is neither * nor an origin such as "
                 "https://dashboard.example.com:8443 (scheme, host and port, no path)",
                 (int)(n > 200 ? 200 : n), e);
        return false;
    }
    return true;
}

bool api_cors_allowed(const char *origins, const char *origin, bool *wildcard)
{
    *wildcard = false;
    if (!origins || !origin || !*origin)
        return false;
    const char *list = origins, *e;
    size_t n, olen = strlen(origin);
    while ((e = next_entry(&list, &n))) {
        if (n == 1 && *e == '*') {
            *wildcard = true;
            return true;
        }
        if (n == olen && strncasecmp(e, origin, n) == 0)
            return true;
    }
    return false;
}

bool api_cors_varies(const char *origins)
{
    bool any = false, wildcard = false;
    const char *list = origins ? origins : "", *e;
    size_t n;
    while ((e = next_entry(&list, &n))) {
        any = true;
        wildcard = wildcard || (n == 1 && *e == '*');
    }
    return any && !wildcard;
}

bool api_cors_preflight(const api_ctx *ctx, const api_request *req, const char *allow,
                        api_response *resp)
{
    bool wildcard;
    if (strcmp(req->method, "OPTIONS") != 0 || !api_header(req, "Access-Control-Request-Method") ||
        !api_cors_allowed(ctx->cors_origins, api_header(req, "Origin"), &wildcard))
        return false;
    resp->status = 204;
    api_resp_header(resp, "Access-Control-Allow-Methods", allow);
    api_resp_header(resp, "Access-Control-Allow-Headers",
                    "Authorization, Content-Type, Accept, Last-Event-ID, X-Request-Id");
    api_resp_header(resp, "Access-Control-Max-Age", "600");
    return true;
}
