/*
 * api_router.h - the route table: method + path pattern -> handler.
 *
 * Patterns are literal segments and {name} captures of one non-empty segment,
 * e.g. "/v1/topics/{topic}/partitions/{partition}/records".  A path that
 * matches a pattern under another method gets 405 with an Allow header; a
 * path that matches nothing gets 404.  The table is the single place every
 * route is declared, so tests (and auth) can walk it.
 */
#ifndef API_ROUTER_H
#define API_ROUTER_H

#include "api_ctx.h"
#include "api_request.h"

typedef void (*api_handler)(api_ctx *ctx, const api_request *req, const api_params *params,
                            api_response *resp);

typedef enum { API_ROLE_NONE, API_ROLE_READ, API_ROLE_WRITE, API_ROLE_ADMIN } api_role;

typedef struct api_route {
    const char *method;
    const char *pattern;
    api_handler handler;
    api_role role;           /* what a caller needs (auth) */
    unsigned flags;          /* API_ROUTE_* */
    const char *query;       /* the query parameters it takes, space-separated; NULL: none;
                              * "*": any, all ignored (health, the dashboard page).  Any other
                              * is refused with 400, so a misspelt or misplaced parameter
                              * (expected_offset on the wrong URL) is never ignored. */
} api_route;

#define API_ROUTE_BODY 1u        /* takes a request body */
#define API_ROUTE_NEEDS_ENGINE 2u /* 503 while loading */
#define API_ROUTE_SSE 4u         /* may answer text/event-stream (see api_read_wants_sse) */
/* May take seconds: runs on lane k (api_lane.h), not on the HTTP thread. */
#define API_ROUTE_LANE(k) ((unsigned)(k) << 8)
#define API_ROUTE_LANE_OF(r) ((api_lane_kind)(((r)->flags >> 8) & 0xffu))

/* The table, terminated by a NULL method (static). */
const api_route *api_routes(void);

/* Finds the route for method/path; fills params.  Returns the route, or NULL
 * with *path_known set when the path exists under other methods (allow gets
 * the comma-separated list). */
const api_route *api_route_match(const char *method, const char *path, api_params *params,
                                 bool *path_known, char *allow, size_t allow_len);

/* Runs the whole request: routing, readiness, the handler, X-Request-Id. */
void api_dispatch(api_ctx *ctx, const api_request *req, api_response *resp);

/* Handlers, by module. */
void api_h_health_live(api_ctx *, const api_request *, const api_params *, api_response *);
void api_h_dashboard(api_ctx *, const api_request *, const api_params *, api_response *);
void api_h_metrics(api_ctx *, const api_request *, const api_params *, api_response *);
void api_h_health_ready(api_ctx *, const api_request *, const api_params *, api_response *);
void api_h_info(api_ctx *, const api_request *, const api_params *, api_response *);
void api_h_topics_list(api_ctx *, const api_request *, const api_params *, api_response *);
void api_h_topic_create(api_ctx *, const api_request *, const api_params *, api_response *);
void api_h_topic_get(api_ctx *, const api_request *, const api_params *, api_response *);
void api_h_topic_delete(api_ctx *, const api_request *, const api_params *, api_response *);
void api_h_topic_patch(api_ctx *, const api_request *, const api_params *, api_response *);
void api_h_partition_get(api_ctx *, const api_request *, const api_params *, api_response *);
void api_h_offsets(api_ctx *, const api_request *, const api_params *, api_response *);
void api_h_append(api_ctx *, const api_request *, const api_params *, api_response *);
void api_h_append_keyed(api_ctx *, const api_request *, const api_params *, api_response *);
void api_h_read(api_ctx *, const api_request *, const api_params *, api_response *);
/* True if the request's Accept prefers text/event-stream among the read's forms. */
bool api_read_wants_sse(const api_request *req);
void api_h_read_one(api_ctx *, const api_request *, const api_params *, api_response *);
void api_h_segments(api_ctx *, const api_request *, const api_params *, api_response *);
void api_h_producers(api_ctx *, const api_request *, const api_params *, api_response *);
void api_h_segment_index(api_ctx *, const api_request *, const api_params *, api_response *);
void api_h_segment_timeindex(api_ctx *, const api_request *, const api_params *, api_response *);
void api_h_segment_batches(api_ctx *, const api_request *, const api_params *, api_response *);
void api_h_segment_roll(api_ctx *, const api_request *, const api_params *, api_response *);
void api_h_delete_records(api_ctx *, const api_request *, const api_params *, api_response *);
void api_h_topic_retention(api_ctx *, const api_request *, const api_params *, api_response *);
void api_h_admin_retention(api_ctx *, const api_request *, const api_params *, api_response *);
void api_h_jobs(api_ctx *, const api_request *, const api_params *, api_response *);
void api_h_topic_compaction(api_ctx *, const api_request *, const api_params *, api_response *);
void api_h_admin_compaction(api_ctx *, const api_request *, const api_params *, api_response *);
void api_h_cleaner(api_ctx *, const api_request *, const api_params *, api_response *);
void api_h_configs_get(api_ctx *, const api_request *, const api_params *, api_response *);
void api_h_configs_alter(api_ctx *, const api_request *, const api_params *, api_response *);
void api_h_config_put(api_ctx *, const api_request *, const api_params *, api_response *);
void api_h_config_delete(api_ctx *, const api_request *, const api_params *, api_response *);
void api_h_configs_defaults(api_ctx *, const api_request *, const api_params *, api_response *);
void api_h_log_dirs(api_ctx *, const api_request *, const api_params *, api_response *);
void api_h_snapshot_create(api_ctx *, const api_request *, const api_params *, api_response *);
void api_h_snapshots_list(api_ctx *, const api_request *, const api_params *, api_response *);
void api_h_snapshot_delete(api_ctx *, const api_request *, const api_params *, api_response *);

#endif
