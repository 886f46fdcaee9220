/*
 * api_health.c - liveness, readiness and /v1/info.
 *
 * Readiness is 503 while the engine loads (with how many partitions are
 * done), while stopping, and when an I/O error took the log dir offline.
 */
#include "api_common.h"
#include "api_errors.h"
#include "api_router.h"

void api_h_health_live(api_ctx *ctx, const api_request *req, const api_params *params,
                       api_response *resp)
{
    (void)ctx;
    (void)req;
    (void)params;
    api_resp_json(resp, 200, json_pack("{s:s}", "status", "ok"));
}

void api_h_health_ready(api_ctx *ctx, const api_request *req, const api_params *params,
                        api_response *resp)
{
    (void)req;
    (void)params;
    int st = atomic_load(&ctx->state);
    eng_manager *m = atomic_load(&ctx->mgr);
    if (st == API_READY && m && !eng_manager_offline(m)) {
        api_resp_json(resp, 200, json_pack("{s:s}", "status", "ready"));
        return;
    }
    json_t *body;
    if (st == API_LOADING) {
        uint32_t loaded, total;
        eng_manager_load_progress(&loaded, &total);
        body = json_pack("{s:s,s:{s:I,s:I}}", "status", "loading", "progress", "partitions_loaded",
                         (json_int_t)loaded, "partitions_total", (json_int_t)total);
    } else if (st == API_READY) {
        body = json_pack("{s:s,s:s}", "status", "offline", "reason",
                         "an I/O error took the log dir offline; see the server log");
    } else {
        body = json_pack("{s:s}", "status", st == API_STOPPING ? "stopping" : "failed");
    }
    api_resp_header(resp, "Retry-After", "1");
    api_resp_json(resp, 503, body);
}

void api_h_info(api_ctx *ctx, const api_request *req, const api_params *params, api_response *resp)
{
    (void)req;
    (void)params;
    json_t *o = json_pack("{s:s,s:s,s:s,s:I}", "name", "logstore", "version", ctx->version,
                          "record_format", "Kafka RecordBatch v2", "started_ms",
                          (json_int_t)ctx->started_ms);
    json_object_set_new(o, "limits",
                        json_pack("{s:I,s:I,s:I,s:i}", "max_request_bytes",
                                  (json_int_t)ctx->limits.max_request_bytes,
                                  "max_inflight_request_bytes",
                                  (json_int_t)ctx->limits.max_inflight_request_bytes,
                                  "max_records_per_request",
                                  (json_int_t)ctx->limits.max_records_per_request,
                                  "max_records_per_read", ctx->limits.max_read_records));
    static const char *const states[] = {"loading", "ready", "stopping", "failed"};
    json_object_set_new(o, "state", json_string(states[atomic_load(&ctx->state)]));
    eng_manager *m = atomic_load(&ctx->mgr);
    if (m) {
        eng_startup_report r;
        eng_manager_startup_report(m, &r);
        json_object_set_new(o, "log_dir", json_string(eng_manager_log_dir(m)));
        json_object_set_new(
            o, "startup",
            json_pack("{s:b,s:b,s:i,s:i,s:i,s:i,s:I,s:I}", "first_start", r.first_start,
                      "clean_shutdown", r.clean_shutdown,
                      "topics", (int)r.topics, "partitions", (int)r.partitions, "segments",
                      (int)r.segments, "segments_recovered", (int)r.segments_recovered,
                      "bytes_truncated", (json_int_t)r.bytes_truncated, "duration_ms",
                      (json_int_t)r.duration_ms));
    } else {
        json_object_set_new(o, "startup", json_null());
    }
    api_resp_json(resp, 200, o);
}
