/*
 * api_router.c - the route table and request dispatch.
 */
#include "api_router.h"

#include "api_auth.h"
#include "api_cors.h"
#include "api_errors.h"
#include "api_lane.h"
#include "eng_logger.h"

#include <errno.h>
#include <poll.h>
#include <openssl/rand.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define E API_ROUTE_NEEDS_ENGINE
#define B API_ROUTE_BODY
#define COMPACTION API_ROUTE_LANE(API_LANE_COMPACTION)
#define RETENTION API_ROUTE_LANE(API_LANE_RETENTION)
#define SNAPSHOT API_ROUTE_LANE(API_LANE_SNAPSHOT)
#define TP "/v1/topics/{topic}/partitions/{partition}"
#define READ_QUERY                                                                             \
    "offset earliest latest timestamp tail max_records max_bytes until_timestamp encoding "   \
    "clamp wait_ms min_bytes"

static const api_route routes[] = {
    /* Probes and browsers may add a query of their own (a cache buster, a
     * load balancer's marker): these take anything and look at none of it. */
    {"GET", "/", api_h_dashboard, API_ROLE_NONE, 0, "*"},
    {"GET", "/health/live", api_h_health_live, API_ROLE_NONE, 0, "*"},
    {"GET", "/health/ready", api_h_health_ready, API_ROLE_NONE, 0, "*"},
    {"GET", "/metrics", api_h_metrics, API_ROLE_READ, 0, NULL},
    {"GET", "/v1/info", api_h_info, API_ROLE_READ, 0, NULL},
    {"GET", "/v1/topics", api_h_topics_list, API_ROLE_READ, E, "limit after"},
    {"POST", "/v1/topics", api_h_topic_create, API_ROLE_ADMIN, E | B, NULL},
    {"GET", "/v1/topics/{topic}", api_h_topic_get, API_ROLE_READ, E, "limit after"},
    {"DELETE", "/v1/topics/{topic}", api_h_topic_delete, API_ROLE_ADMIN, E, NULL},
    {"PATCH", "/v1/topics/{topic}", api_h_topic_patch, API_ROLE_ADMIN, E | B, NULL},
    {"POST", "/v1/topics/{topic}/records", api_h_append_keyed, API_ROLE_WRITE, E | B, NULL},
    {"GET", TP, api_h_partition_get, API_ROLE_READ, E, NULL},
    {"GET", TP "/offsets", api_h_offsets, API_ROLE_READ, E, "spec timestamp"},
    {"POST", TP "/records", api_h_append, API_ROLE_WRITE, E | B, "expected_offset"},
    {"GET", TP "/records", api_h_read, API_ROLE_READ, E | API_ROUTE_SSE, READ_QUERY},
    {"GET", TP "/records/{offset}", api_h_read_one, API_ROLE_READ, E, "encoding"},
    {"GET", TP "/segments", api_h_segments, API_ROLE_READ, E, "start limit after"},
    {"GET", TP "/producers", api_h_producers, API_ROLE_READ, E, "limit after"},
    {"POST", TP "/segments:roll", api_h_segment_roll, API_ROLE_ADMIN, E | B, NULL},
    {"GET", TP "/segments/{base}/index", api_h_segment_index, API_ROLE_READ, E, "start limit"},
    {"GET", TP "/segments/{base}/timeindex", api_h_segment_timeindex, API_ROLE_READ, E, "start limit"},
    {"GET", TP "/segments/{base}/batches", api_h_segment_batches, API_ROLE_READ, E, "start limit"},
    {"POST", TP "/records:delete", api_h_delete_records, API_ROLE_WRITE, E | B, NULL},
    {"POST", "/v1/topics/{topic}/retention:run", api_h_topic_retention, API_ROLE_ADMIN, E | B | RETENTION,
     "partition"},
    {"POST", "/v1/admin/retention:run", api_h_admin_retention, API_ROLE_ADMIN, E | B | RETENTION,
     "partition"},
    {"GET", "/v1/jobs", api_h_jobs, API_ROLE_READ, E, NULL},
    {"POST", "/v1/topics/{topic}/compaction:run", api_h_topic_compaction, API_ROLE_ADMIN, E | B | COMPACTION,
     "partition"},
    {"POST", "/v1/admin/compaction:run", api_h_admin_compaction, API_ROLE_ADMIN, E | B | COMPACTION,
     "partition"},
    {"GET", "/v1/cleaner", api_h_cleaner, API_ROLE_READ, E, "limit after"},
    {"GET", "/v1/topics/{topic}/configs", api_h_configs_get, API_ROLE_READ, E, NULL},
    {"POST", "/v1/topics/{topic}/configs:alter", api_h_configs_alter, API_ROLE_ADMIN, E | B, NULL},
    {"PUT", "/v1/topics/{topic}/configs/{name}", api_h_config_put, API_ROLE_ADMIN, E | B, NULL},
    {"DELETE", "/v1/topics/{topic}/configs/{name}", api_h_config_delete, API_ROLE_ADMIN, E, NULL},
    {"GET", "/v1/configs/defaults", api_h_configs_defaults, API_ROLE_READ, E, NULL},
    {"GET", "/v1/log-dirs", api_h_log_dirs, API_ROLE_READ, E, "limit after"},
    {"POST", "/v1/admin/snapshots", api_h_snapshot_create, API_ROLE_ADMIN, E | B | SNAPSHOT, NULL},
    {"GET", "/v1/admin/snapshots", api_h_snapshots_list, API_ROLE_READ, E, "limit after"},
    {"DELETE", "/v1/admin/snapshots/{name}", api_h_snapshot_delete, API_ROLE_ADMIN, E | SNAPSHOT, NULL},
    {NULL, NULL, NULL, API_ROLE_NONE, 0, NULL},
};

const api_route *api_routes(void)
{
    return routes;
}

/* Matches path against pattern, capturing {name} segments. */
static bool match_pattern(const char *pattern, const char *path, api_params *params)
{
    params->n = 0;
    const char *p = pattern, *s = path;
    while (*p && *s) {
        if (*p != '/' || *s != '/')
            return false;
        p++;
        s++;
        const char *pe = strchr(p, '/');
        const char *se = strchr(s, '/');
        size_t plen = pe ? (size_t)(pe - p) : strlen(p);
        size_t slen = se ? (size_t)(se - s) : strlen(s);
        if (plen > 2 && p[0] == '{' && p[plen - 1] == '}') {
            if (slen == 0 || params->n >= API_MAX_PARAMS)
                return false;
            static const char *const names[] = {"topic", "partition", "offset", "base", "name"};
            const char *name = NULL;
            for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
                if (strlen(names[i]) == plen - 2 && strncmp(names[i], p + 1, plen - 2) == 0)
                    name = names[i];
            if (!name)
                return false;
            params->name[params->n] = name;
            /* A segment too long for the buffer is cut, not refused: cut, it
             * is still too long for a topic (249) or any number or config
             * name, so its handler answers what is wrong with it instead of
             * 404 route_not_found. */
            size_t keep = slen < sizeof params->value[0] ? slen : sizeof params->value[0] - 1;
            memcpy(params->value[params->n], s, keep);
            params->value[params->n][keep] = 0;
            params->n++;
        } else if (plen != slen || strncmp(p, s, plen) != 0) {
            return false;
        }
        p += plen;
        s += slen;
    }
    return *p == 0 && *s == 0;
}

const api_route *api_route_match(const char *method, const char *path, api_params *params,
                                 bool *path_known, char *allow, size_t allow_len)
{
    *path_known = false;
    if (allow_len)
        allow[0] = 0;
    size_t used = 0;
    /* HEAD is GET without the body (RFC 9110 §9.3.2): every GET route takes it. */
    bool head = strcmp(method, "HEAD") == 0;
    for (const api_route *r = routes; r->method; r++) {
        api_params tmp;
        if (!match_pattern(r->pattern, path, &tmp))
            continue;
        bool get = strcmp(r->method, "GET") == 0;
        if (strcmp(r->method, method) == 0 || (head && get)) {
            *params = tmp;
            return r;
        }
        *path_known = true;
        if (used < allow_len)
            used += (size_t)snprintf(allow + used, allow_len - used, "%s%s%s", used ? ", " : "",
                                     r->method, get ? ", HEAD" : "");
    }
    return NULL;
}

/* True when every query parameter of req is one the route takes, each given
 * once (else a 400 in resp): a second value is never silently dropped. */
static bool query_known(const api_route *r, const api_request *req, api_response *resp)
{
    if (r->query && strcmp(r->query, "*") == 0)
        return true;
    for (size_t i = 0; i < req->nquery; i++) {
        const char *key = req->query[i].key;
        size_t klen = strlen(key);
        bool ok = false;
        for (const char *w = r->query; w && *w && !ok;) {
            size_t wlen = strcspn(w, " ");
            ok = wlen == klen && strncmp(w, key, klen) == 0;
            w += wlen + (w[wlen] == ' ');
        }
        if (!ok) {
            if (r->query)
                api_error(resp, req, "invalid_request", NULL,
                          "unknown query parameter '%.64s' (this URL takes: %s)", key, r->query);
            else
                api_error(resp, req, "invalid_request", NULL,
                          "unknown query parameter '%.64s' (this URL takes none)", key);
            return false;
        }
        for (size_t j = 0; j < i; j++) {
            if (strcmp(req->query[j].key, key) == 0) {
                api_error(resp, req, "invalid_request", NULL,
                          "query parameter '%.64s' is given more than once", key);
                return false;
            }
        }
    }
    return true;
}

/* A compressed request body would be read as JSON or record batches and
 * refused for the wrong reason (or, for a body that happens to parse, stored
 * as the compressed bytes): say what is wrong (RFC 9110 §8.4: 415). */
static bool identity_encoding(const api_request *req, api_response *resp)
{
    const char *ce = api_header(req, "Content-Encoding");
    if (!ce || !*ce || strcasecmp(ce, "identity") == 0)
        return true;
    api_error(resp, req, "unsupported_media_type", NULL,
              "Content-Encoding %.40s is not supported; send the body uncompressed (record "
              "batches may carry Kafka's own compression)", ce);
    api_resp_header(resp, "Accept-Encoding", "identity");
    return false;
}

/* An EventSource takes any status but 200 as final and never reconnects,
 * so a restart (a stop draining, then the next start loading its logs)
 * would end every browser's tail for good.  It reconnects when a 200
 * stream ends: this one ends at once, after asking for a retry in a
 * second, and sends no record (Last-Event-ID resumes where it was). */
static bool sse_come_back(api_response *resp, bool stopping)
{
    static const char stop_msg[] = "retry: 1000\n: the server is stopping; reconnect\n\n";
    static const char load_msg[] = "retry: 1000\n: the server is loading its logs; reconnect\n\n";
    const char *msg = stopping ? stop_msg : load_msg;
    if (!(resp->raw = strdup(msg)))
        return false; /* out of memory: the plain 503 */
    resp->raw_len = strlen(msg);
    resp->status = 200;
    resp->content_type = "text/event-stream";
    api_resp_header(resp, "Cache-Control", "no-cache");
    return true;
}

/* A handler that answered nothing is a bug, but the client still gets an
 * answer. */
static void ensure_answer(const api_request *req, api_response *resp)
{
    if (!resp->status)
        api_error(resp, req, "internal_error", NULL, "handler produced no response");
}

/* A slow route's call, carried to a lane thread: the request is a copy, as
 * the transport's own is gone once the dispatching call returns. */
typedef struct lane_call {
    api_lane_job job; /* first: the lane hands this back */
    api_ctx *ctx;
    const api_route *route;
    api_params params;
    api_request *req; /* owned (api_request_dup) */
    api_async *async;
    int client_fd;    /* the client's socket (open while the answer is deferred); -1 unknown */
} lane_call;

/* No X-Request-Id here: api_async_complete adds it (added here too, every
 * lane answer carried it twice). */
static void lane_answer(lane_call *lc, api_response *resp)
{
    ensure_answer(lc->req, resp);
    resp->route = (int)(lc->route - routes);
    api_async_complete(lc->async, resp);
    free(lc->req);
    free(lc);
}

/* Whether the client hung up (or half-closed, as a parked long-poll's is
 * judged: api_wait.c).  The connection stays open while its answer is
 * deferred, so the descriptor is still the client's. */
static bool client_gone(int fd)
{
    struct pollfd pfd = {.fd = fd, .events = POLLRDHUP};
    return fd >= 0 && poll(&pfd, 1, 0) > 0 &&
           (pfd.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL));
}

static void lane_run(api_lane_job *job)
{
    lane_call *lc = (lane_call *)job;
    api_response resp = {0};
    if (client_gone(lc->client_fd)) {
        /* A client that gave up while its clean waited in the queue (and
         * retries it, queueing another) must not leave the work done for
         * nobody: it is dropped, answered to a closed connection. */
        ENG_INFO("%s %s dropped before it ran: its client left", lc->req->method, lc->req->path);
        api_error(&resp, lc->req, "invalid_request", NULL, "the client left before the request ran");
    } else {
        lc->route->handler(lc->ctx, lc->req, &lc->params, &resp);
    }
    lane_answer(lc, &resp);
}

static void lane_cancel(api_lane_job *job)
{
    lane_call *lc = (lane_call *)job;
    api_response resp = {0};
    api_error_stopping(&resp, lc->req, "the server is stopping");
    lane_answer(lc, &resp);
}

/* Hands a slow route's handler to the lane and defers the answer; false
 * when the transport cannot defer (in-process callers: the handler runs
 * here).  A refusal (a full lane, no memory) is answered in resp. */
static bool run_on_lane(api_ctx *ctx, const api_route *r, const api_request *req,
                        const api_params *params, api_response *resp)
{
    lane_call *lc = calloc(1, sizeof *lc);
    if (!lc || api_request_dup(req, &lc->req)) {
        free(lc);
        api_error(resp, req, "out_of_memory", NULL, "no memory to queue the request");
        return true;
    }
    lc->job = (api_lane_job){.run = lane_run, .cancel = lane_cancel};
    lc->ctx = ctx;
    lc->route = r;
    lc->params = *params;
    lc->client_fd = req->transport ? req->transport->client_fd : -1;
    if (!(lc->async = api_defer(req, resp))) {
        free(lc->req);
        free(lc);
        return false;
    }
    int rc = api_lane_submit(ctx->lanes[API_ROUTE_LANE_OF(r)], &lc->job);
    if (rc == 0)
        return true;
    /* The deferral is made and must be completed once: with the refusal. */
    api_response no = {0};
    if (rc == -EAGAIN) {
        api_error(&no, lc->req, "overloaded", NULL,
                  "too many %s requests are waiting; retry later",
                  api_lane_kind_name(API_ROUTE_LANE_OF(r)));
        api_resp_header(&no, "Retry-After", "1");
    } else {
        api_error_stopping(&no, lc->req, "the server is stopping");
    }
    lane_answer(lc, &no);
    return true;
}

void api_dispatch(api_ctx *ctx, const api_request *req, api_response *resp)
{
    api_params params = {0};
    bool known;
    char allow[64];
    const api_route *r = api_route_match(req->method, req->path, &params, &known, allow, sizeof allow);
    resp->route = r ? (int)(r - routes) : -1;
    if (!r) {
        if (known && api_cors_preflight(ctx, req, allow, resp)) {
            /* 204; a preflight carries no token, so it comes before auth */
        } else if (!api_auth_known(ctx->auth, req, resp)) {
            /* 401 already in resp */
        } else if (known) {
            api_error(resp, req, "method_not_allowed", NULL, "%s is not allowed on %s (allowed: %s)",
                      req->method, req->path, allow);
            api_resp_header(resp, "Allow", allow);
        } else {
            api_error(resp, req, "route_not_found", NULL, "no route for %s %s", req->method,
                      req->path);
        }
    } else if (!api_auth_check(ctx->auth, req, r, &params, resp)) {
        /* 401 / 403 already in resp */
    } else if (!query_known(r, req, resp)) {
        /* 400 already in resp */
    } else if ((r->flags & API_ROUTE_BODY) && !identity_encoding(req, resp)) {
        /* 415 already in resp */
    } else if ((r->flags & API_ROUTE_NEEDS_ENGINE) &&
               (atomic_load(&ctx->state) != API_READY || !atomic_load(&ctx->mgr))) {
        int st = atomic_load(&ctx->state);
        if ((r->flags & API_ROUTE_SSE) && api_read_wants_sse(req) &&
            sse_come_back(resp, st == API_STOPPING)) {
            /* 200, an empty stream asking for a reconnect */
        } else if (st == API_STOPPING) {
            api_error_stopping(resp, req, "the server is stopping");
        } else {
            api_error(resp, req, "not_ready", NULL, "the server is still loading its logs");
            api_resp_header(resp, "Retry-After", "1");
        }
    } else if (ctx->lanes[API_ROUTE_LANE_OF(r)] &&
               run_on_lane(ctx, r, req, &params, resp)) {
        return; /* a lane thread answers */
    } else {
        r->handler(ctx, req, &params, resp);
    }
    if (!resp->deferred) {
        ensure_answer(req, resp);
        api_resp_header(resp, "X-Request-Id", req->request_id);
    }
}

void api_ctx_init(api_ctx *ctx, const char *version)
{
    memset(ctx, 0, sizeof *ctx);
    atomic_store(&ctx->state, API_LOADING);
    ctx->version = version;
    ctx->limits.max_request_bytes = 16u << 20;
    ctx->limits.max_inflight_request_bytes = 256u << 20;
    ctx->limits.max_records_per_request = 100000;
    ctx->limits.max_read_records = 10000;
    ctx->limits.default_partitions = 1;
    ctx->max_wait_ms = 30000;
    ctx->heartbeat_ms = 15000;
    unsigned char r[3];
    if (RAND_bytes(r, sizeof r) != 1)
        r[0] = r[1] = r[2] = 0;
    snprintf(ctx->id_prefix, sizeof ctx->id_prefix, "%02x%02x%02x", r[0], r[1], r[2]);
}
