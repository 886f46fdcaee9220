/*
 * api_ctx.h - what every handler can reach: the engine, the limits, the
 * service state.  One api_ctx lives for the life of the server; service/
 * fills it and flips `state` as loading and stopping progress.
 */
#ifndef API_CTX_H
#define API_CTX_H

#include "api_lane.h"
#include "eng_manager.h"

#include <jansson.h>

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

typedef enum { API_LOADING, API_READY, API_STOPPING, API_FAILED } api_state;

typedef struct api_limits {
    size_t max_request_bytes;   /* http.max.request.bytes */
    size_t max_inflight_request_bytes; /* http.max.inflight.request.bytes (reported) */
    size_t max_records_per_request;
    int32_t default_partitions; /* num.partitions */
    int max_read_records;       /* hard cap on max_records */
} api_limits;

typedef struct api_ctx {
    _Atomic(eng_manager *) mgr; /* NULL until loaded */
    _Atomic int state;          /* api_state */
    api_limits limits;
    const char *version;
    int64_t started_ms;
    char id_prefix[8];          /* request ids: <prefix><counter> */
    _Atomic uint64_t id_counter;
    _Atomic uint64_t round_robin; /* null-key partitioner */
    struct api_waiters *waiters;  /* parked readers; NULL: reads never wait */
    api_lane *lanes[API_LANES];   /* slow routes' threads, by kind; NULL: they run on the
                                   * calling thread */
    int64_t max_wait_ms;          /* wait_ms cap (30000) */
    int64_t heartbeat_ms;         /* SSE heartbeat interval */
    json_t *server_settings;      /* [{"name","value","source"}] from service/; borrowed */
    struct api_auth *auth;        /* bearer tokens; NULL: authentication is off */
    const char *cors_origins;     /* http.cors.allowed.origins (api_cors.h); NULL or "": off;
                                   * borrowed */
} api_ctx;

/* Initializes ctx with defaults (state LOADING, no manager). */
void api_ctx_init(api_ctx *ctx, const char *version);

#endif
