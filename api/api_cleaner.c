/*
 * api_cleaner.c - compaction on demand and the cleaner's status.
 *
 * compaction:run cleans now whatever the dirty ratio (the uncleanable
 * boundary and min.compaction.lag.ms still hold), or with {"dry_run":true}
 * reports what a clean would remove without writing anything.
 */
#include "api_common.h"
#include "api_errors.h"
#include "api_router.h"
#include "eng_cleaner.h"
#include "eng_fs.h"

#include <stdlib.h>
#include <string.h>

static json_t *stats_json(const eng_clean_stats *s)
{
    json_t *o = json_pack(
        "{s:b,s:{s:I,s:I},s:I,s:{s:i,s:I},s:{s:i,s:I},s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I}",
        "dry_run", s->dry_run, "range", "first_dirty_offset", (json_int_t)s->first_dirty,
        "end_offset", (json_int_t)s->end_offset, "first_uncleanable_offset",
        (json_int_t)s->first_uncleanable, "before", "segments", (int)s->segments_before, "bytes",
        (json_int_t)s->bytes_before, "after", "segments", (int)s->segments_after, "bytes",
        (json_int_t)s->bytes_after, "records_read", (json_int_t)s->records_read, "records_removed",
        (json_int_t)s->records_removed, "tombstones_removed", (json_int_t)s->tombstones_removed,
        "keyless_removed", (json_int_t)s->keyless_removed, "map_entries",
        (json_int_t)s->map_entries, "bytes_read", (json_int_t)s->bytes_read, "started_ms",
        (json_int_t)s->started_ms, "duration_ms", (json_int_t)s->duration_ms);
    json_object_set_new(o, "map_utilization", json_real(s->map_utilization));
    return o;
}

/* Runs compaction over parts; a topic's run answers 422/409 for its own
 * partition problems, an admin run reports them per partition. */
static void run(api_ctx *ctx, const api_request *req, api_response *resp, eng_partition **parts,
                size_t n, bool dry_run, bool strict)
{
    eng_cleaner *c = eng_manager_cleaner(api_mgr(ctx));
    if (!c) {
        api_error(resp, req, "not_ready", NULL, "the log cleaner is not running");
        return;
    }
    json_t *arr = json_array();
    for (size_t i = 0; i < n; i++) {
        eng_config cfg;
        eng_partition_get_config(parts[i], &cfg);
        if (!strict && !(cfg.v[ENG_CFG_CLEANUP_POLICY].i & ENG_POLICY_COMPACT))
            continue;
        eng_clean_stats st;
        int rc = eng_cleaner_clean_now(c, parts[i], dry_run, &st);
        if (rc == ENG_ESHUTDOWN) {
            /* A stop aborted the clean; the partitions after it would only
             * say the same, and the answer must not wait for them. */
            api_error_stopping(resp, req, "the server is stopping: the clean of %s-%d was abandoned",
                               eng_partition_topic(parts[i]), eng_partition_id(parts[i]));
            json_decref(arr);
            return;
        }
        json_t *o = json_pack("{s:s,s:i}", "topic", eng_partition_topic(parts[i]), "partition",
                              (int)eng_partition_id(parts[i]));
        if (rc && strict) {
            eng_errdetail d = {0};
            if (rc == ENG_ENOTCOMPACT)
                eng_fail(&d, rc, "topic '%s' has cleanup.policy without compact",
                         eng_partition_topic(parts[i]));
            else if (rc == ENG_EBUSY)
                eng_fail(&d, rc, "%s-%d is being cleaned right now", eng_partition_topic(parts[i]),
                         eng_partition_id(parts[i]));
            else
                eng_fail(&d, rc, "cleaning %s-%d failed: %s", eng_partition_topic(parts[i]),
                         eng_partition_id(parts[i]), eng_strerror(rc));
            if (rc == ENG_EINVAL) /* nothing the caller sent: the clean itself failed */
                api_error(resp, req, "internal_error", NULL, "%s", d.message);
            else
                api_error_from_engine(resp, req, rc, &d);
            json_decref(o);
            json_decref(arr);
            return;
        }
        if (rc)
            json_object_set_new(o, "error",
                                api_error_object(req,
                                                 rc == ENG_EINVAL ? "internal_error"
                                                                  : api_error_code_for(rc),
                                                 eng_strerror(rc), NULL));
        else
            json_object_update_new(o, json_pack("{s:o}", "stats", stats_json(&st)));
        json_array_append_new(arr, o);
    }
    api_resp_json(resp, 200, json_pack("{s:b,s:o}", "dry_run", dry_run, "partitions", arr));
}

void api_h_topic_compaction(api_ctx *ctx, const api_request *req, const api_params *params,
                            api_response *resp)
{
    bool dry_run;
    eng_partition **parts;
    size_t n;
    if (!api_maintenance_targets(ctx, req, resp, api_param(params, "topic"), &dry_run, &parts, &n))
        return;
    run(ctx, req, resp, parts, n, dry_run, true);
    eng_partitions_release(parts, n);
}

void api_h_admin_compaction(api_ctx *ctx, const api_request *req, const api_params *params,
                            api_response *resp)
{
    (void)params;
    bool dry_run;
    eng_partition **parts;
    size_t n;
    if (!api_maintenance_targets(ctx, req, resp, NULL, &dry_run, &parts, &n))
        return;
    run(ctx, req, resp, parts, n, dry_run, false);
    eng_partitions_release(parts, n);
}

void api_h_cleaner(api_ctx *ctx, const api_request *req, const api_params *params,
                   api_response *resp)
{
    (void)params;
    /* Only the partitions are paged: the threads, the last runs and the
     * uncleanable marks are few whatever the number of partitions. */
    api_part_pager pg;
    if (!api_part_pager_init(req, resp, &pg))
        return;
    eng_cleaner *c = eng_manager_cleaner(api_mgr(ctx));
    eng_cleaner_status s;
    if (!c || eng_cleaner_status_get(c, &s)) {
        api_error(resp, req, "not_ready", NULL, "the log cleaner is not running");
        return;
    }
    json_t *threads = json_array(), *runs = json_array(), *unc = json_array(), *parts = json_array();
    for (unsigned i = 0; i < s.nthreads; i++) {
        const eng_cleaner_thread_info *t = &s.threads[i];
        json_t *o = json_pack("{s:i,s:s,s:I}", "id", (int)t->id, "state", t->busy ? "cleaning" : "idle",
                              "cleanings", (json_int_t)t->cleanings);
        if (t->busy)
            json_object_update_new(o, json_pack("{s:s,s:i,s:I}", "topic", t->topic, "partition",
                                            (int)t->partition, "since_ms", (json_int_t)t->since_ms));
        json_array_append_new(threads, o);
    }
    for (size_t i = 0; i < s.nruns; i++) {
        const eng_cleaner_run *r = &s.runs[i];
        json_t *o = json_pack("{s:s,s:i,s:b,s:s,s:o}", "topic", r->topic, "partition",
                              (int)r->partition, "on_demand", r->on_demand, "outcome",
                              r->result ? api_error_code_for(r->result) : "ok", "stats",
                              stats_json(&r->stats));
        json_array_append_new(runs, o);
    }
    for (size_t i = 0; i < s.nuncleanable; i++)
        json_array_append_new(
            unc, json_pack("{s:s,s:i,s:I,s:s,s:o}", "topic", s.uncleanable[i].topic, "partition",
                           (int)s.uncleanable[i].partition, "since_ms",
                           (json_int_t)s.uncleanable[i].since_ms, "reason", s.uncleanable[i].reason,
                           "retry_ms", s.uncleanable[i].retry_ms
                                           ? json_integer(s.uncleanable[i].retry_ms)
                                           : json_null()));
    eng_partition **all;
    size_t n;
    if (eng_manager_all_partitions(api_mgr(ctx), &all, &n) == 0) {
        int64_t now = eng_now_ms();
        for (size_t i = 0; i < n; i++) {
            eng_config cfg;
            eng_partition_get_config(all[i], &cfg);
            if (!(cfg.v[ENG_CFG_CLEANUP_POLICY].i & ENG_POLICY_COMPACT) ||
                !api_part_pager_take(&pg, all[i]))
                continue;
            eng_clean_range r;
            int64_t ck = eng_cleaner_checkpoint(c, eng_partition_topic(all[i]), eng_partition_id(all[i]));
            eng_partition_clean_range(all[i], ck, now, &r);
            json_t *o = json_pack("{s:s,s:i,s:I,s:I,s:I,s:I,s:b}", "topic",
                                  eng_partition_topic(all[i]), "partition", (int)eng_partition_id(all[i]),
                                  "first_dirty_offset", (json_int_t)r.first_dirty,
                                  "first_uncleanable_offset", (json_int_t)r.first_uncleanable,
                                  "clean_bytes", (json_int_t)r.clean_bytes, "cleanable_bytes",
                                  (json_int_t)r.cleanable_bytes, "compaction_lag_exceeded",
                                  r.need_compaction_now);
            json_object_set_new(o, "dirty_ratio", json_real(r.dirty_ratio));
            json_object_set_new(o, "min_cleanable_dirty_ratio",
                                json_real(cfg.v[ENG_CFG_MIN_CLEANABLE_DIRTY_RATIO].d));
            json_array_append_new(parts, o);
        }
        eng_partitions_release(all, n);
    }
    json_t *o = json_pack("{s:b,s:i,s:I,s:o,s:o,s:o,s:o}", "enabled", s.enabled, "threads_count",
                          (int)s.nthreads, "dedupe_buffer_bytes_per_thread",
                          (json_int_t)s.dedupe_buffer_bytes_per_thread, "threads", threads,
                          "last_runs", runs, "uncleanable", unc, "partitions", parts);
    api_part_pager_answer(&pg, o);
    api_resp_json(resp, 200, o);
    eng_cleaner_status_free(&s);
}
