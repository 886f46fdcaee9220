/*
 * api_admin.c - operations on demand: retention runs, delete-records, and
 * the background job listing.
 *
 * retention:run applies exactly the code the log-retention job runs (or, with
 * {"dry_run":true}, only reports what it would delete).
 */
#include "api_common.h"
#include "api_errors.h"
#include "api_router.h"
#include "eng_fs.h"
#include "eng_retention.h"

#include <stdlib.h>
#include <string.h>

static json_t *retention_json(eng_partition *p, const eng_retention_report *r)
{
    json_t *segs = json_array();
    for (size_t i = 0; i < r->n; i++)
        json_array_append_new(segs, json_pack("{s:I,s:I,s:I,s:s,s:s}", "base_offset",
                                              (json_int_t)r->segments[i].base_offset, "next_offset",
                                              (json_int_t)r->segments[i].next_offset, "size_bytes",
                                              (json_int_t)r->segments[i].size_bytes, "rule",
                                              r->segments[i].rule, "reason", r->segments[i].reason));
    return json_pack("{s:s,s:i,s:b,s:b,s:I,s:I,s:o,s:I,s:b,s:i}", "topic", eng_partition_topic(p),
                     "partition", (int)eng_partition_id(p), "dry_run", r->dry_run, "busy", r->busy,
                     "log_start_offset_before", (json_int_t)r->log_start_offset_before,
                     "log_start_offset", (json_int_t)r->log_start_offset_after, "segments_deleted",
                     segs, "bytes_freed", (json_int_t)r->bytes_freed, "rolled", r->rolled,
                     "future_timestamp_segments_kept", (int)r->future_kept);
}

/* Runs retention over parts (already filtered); answers the report. */
static void run_retention(api_ctx *ctx, const api_request *req, api_response *resp,
                          eng_partition **parts, size_t n, bool dry_run)
{
    json_t *arr = json_array();
    json_int_t segs = 0, bytes = 0;
    int64_t now = eng_now_ms();
    for (size_t i = 0; i < n; i++) {
        /* A run over thousands of partitions must not hold up a stop. */
        if (atomic_load(&ctx->state) == API_STOPPING) {
            api_error_stopping(resp, req,
                               "the server is stopping: retention ran on %zu of %zu partitions", i,
                               n);
            json_decref(arr);
            return;
        }
        eng_retention_report rep;
        int rc = eng_partition_retention(parts[i], now, dry_run, &rep);
        if (rc) {
            api_error_from_engine(resp, req, rc, NULL);
            json_decref(arr);
            return;
        }
        segs += (json_int_t)rep.n;
        bytes += (json_int_t)rep.bytes_freed;
        json_array_append_new(arr, retention_json(parts[i], &rep));
        eng_retention_report_free(&rep);
    }
    api_resp_json(resp, 200, json_pack("{s:b,s:o,s:I,s:I}", "dry_run", dry_run, "partitions", arr,
                                       "segments_deleted", segs, "bytes_freed", bytes));
}

/* The optional ?partition= filter; -1 when absent. */
void api_h_topic_retention(api_ctx *ctx, const api_request *req, const api_params *params,
                           api_response *resp)
{
    bool dry_run;
    eng_partition **parts;
    size_t n;
    if (!api_maintenance_targets(ctx, req, resp, api_param(params, "topic"), &dry_run, &parts, &n))
        return;
    run_retention(ctx, req, resp, parts, n, dry_run);
    eng_partitions_release(parts, n);
}

void api_h_admin_retention(api_ctx *ctx, const api_request *req, const api_params *params,
                           api_response *resp)
{
    (void)params;
    bool dry_run;
    eng_partition **parts;
    size_t n;
    if (!api_maintenance_targets(ctx, req, resp, NULL, &dry_run, &parts, &n))
        return;
    run_retention(ctx, req, resp, parts, n, dry_run);
    eng_partitions_release(parts, n);
}

void api_h_delete_records(api_ctx *ctx, const api_request *req, const api_params *params,
                          api_response *resp)
{
    json_t *body = api_body_object(req, resp, false);
    if (!body)
        return;
    json_t *b = json_object_get(body, "before_offset");
    if (json_object_size(body) != 1 || !json_is_integer(b) || json_integer_value(b) < -1) {
        api_error(resp, req, "invalid_request", NULL,
                  "expected {\"before_offset\": N} with N >= 0, or -1 for the high watermark");
        json_decref(body);
        return;
    }
    int64_t before = json_integer_value(b);
    json_decref(body);
    eng_partition *p;
    if (!api_lookup_partition(ctx, req, params, resp, &p))
        return;
    int64_t lso;
    eng_errdetail d = {0};
    int rc = eng_partition_delete_records(p, before, &lso, &d);
    if (rc)
        api_error_from_engine(resp, req, rc, &d);
    else
        api_resp_json(resp, 200, json_pack("{s:s,s:i,s:I,s:I}", "topic", eng_partition_topic(p),
                                           "partition", (int)eng_partition_id(p),
                                           "log_start_offset", (json_int_t)lso, "high_watermark",
                                           (json_int_t)eng_partition_high_watermark(p)));
    eng_partition_unref(p);
}

static json_t *ms_or_null(int64_t v)
{
    return v >= 0 ? json_integer(v) : json_null();
}

void api_h_jobs(api_ctx *ctx, const api_request *req, const api_params *params, api_response *resp)
{
    (void)params;
    eng_job_info *jobs;
    size_t n;
    int rc = eng_manager_jobs(api_mgr(ctx), &jobs, &n);
    if (rc) {
        api_error_from_engine(resp, req, rc, NULL);
        return;
    }
    json_t *arr = json_array();
    for (size_t i = 0; i < n; i++) {
        const eng_job_info *j = &jobs[i];
        json_t *o = json_pack("{s:s,s:s,s:I,s:I,s:I,s:b}", "name", j->name, "kind",
                              j->periodic ? "periodic" : "one-shot", "runs", (json_int_t)j->runs,
                              "failures", (json_int_t)j->failures, "pending", (json_int_t)j->pending,
                              "running", j->running);
        json_object_set_new(o, "interval_ms", j->periodic && j->interval_ms != INT64_MAX
                                                  ? json_integer(j->interval_ms) : json_null());
        json_object_set_new(o, "last_start_ms", ms_or_null(j->last_start_ms));
        json_object_set_new(o, "last_duration_ms", ms_or_null(j->last_duration_ms));
        json_object_set_new(o, "last_outcome", j->runs == 0 ? json_null()
                                              : json_string(j->last_result ? api_error_code_for(j->last_result) : "ok"));
        json_object_set_new(o, "last_note", j->runs ? json_string(j->last_note) : json_null());
        json_object_set_new(o, "next_run_ms", ms_or_null(j->next_run_ms));
        json_array_append_new(arr, o);
    }
    free(jobs);
    api_resp_json(resp, 200, json_pack("{s:o}", "jobs", arr));
}
