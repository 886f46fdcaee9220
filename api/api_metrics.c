/*
 * api_metrics.c - request instrumentation and the /metrics exposition.
 *
 * Request counters are atomics in fixed arrays indexed by route and by a
 * fixed list of statuses, so recording costs two or three atomic adds and no
 * lock.  The exposition is assembled into one buffer per scrape.
 */
#include "api_metrics.h"

#include "api_common.h"
#include "api_errors.h"
#include "api_lane.h"
#include "api_router.h"
#include "api_wait.h"
#include "eng_cleaner.h"
#include "eng_fs.h"
#include "eng_process.h"
#include "eng_stats.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_ROUTES 64
#define NSTATUS 23
#define NLAT 13

/* Every status the server answers with (README's error table), then
 * "other" (0).  414 and 431 are answered from the headers, before a route
 * runs, and were counted as "other". */
static const int statuses[NSTATUS] = {200, 201, 204, 207, 400, 401, 403, 404, 405, 409, 412, 413,
                                      414, 415, 416, 422, 429, 431, 500, 503, 507, 0, -1};
/* latency bucket upper bounds, microseconds */
static const int64_t lat_us[NLAT] = {250,    500,    1000,   2500,    5000,    10000,    25000,
                                     50000, 100000, 250000, 1000000, 5000000, INT64_MAX};

/* The second index is 1 for a HEAD answered by a GET route: labelled
 * method="HEAD", not counted as the GETs whose bodies it leaves out. */
static _Atomic uint64_t req_count[MAX_ROUTES + 1][2][NSTATUS];
static _Atomic uint64_t req_lat[MAX_ROUTES + 1][2][NLAT];
static _Atomic uint64_t req_lat_sum_us[MAX_ROUTES + 1][2];
static _Atomic int64_t open_streams;
static _Atomic uint64_t corrupt_records;

static int status_slot(int status)
{
    for (int i = 0; i < NSTATUS - 2; i++)
        if (statuses[i] == status)
            return i;
    return NSTATUS - 2; /* other */
}

void api_metrics_request(int route, const char *method, int status, int64_t us)
{
    int r = route >= 0 && route < MAX_ROUTES ? route : MAX_ROUTES;
    /* Unmatched requests keep method="" whatever they sent: any token is a
     * method, and labels stay bounded. */
    int h = r < MAX_ROUTES && method && !strcmp(method, "HEAD");
    atomic_fetch_add_explicit(&req_count[r][h][status_slot(status)], 1, memory_order_relaxed);
    for (int i = 0; i < NLAT; i++)
        if (us <= lat_us[i]) {
            atomic_fetch_add_explicit(&req_lat[r][h][i], 1, memory_order_relaxed);
            break;
        }
    atomic_fetch_add_explicit(&req_lat_sum_us[r][h], (uint64_t)(us > 0 ? us : 0),
                              memory_order_relaxed);
}

void api_metrics_streams(int delta)
{
    atomic_fetch_add(&open_streams, delta);
}

void api_metrics_corrupt_record(void)
{
    atomic_fetch_add_explicit(&corrupt_records, 1, memory_order_relaxed);
}

typedef struct out {
    char *p;
    size_t len, cap;
    bool oom;
} out;

static void put(out *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void put(out *o, const char *fmt, ...)
{
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(o->p ? o->p + o->len : NULL, o->cap - o->len, fmt, ap);
        va_end(ap);
        if (n < 0 || o->oom)
            return;
        if (o->len + (size_t)n < o->cap) {
            o->len += (size_t)n;
            return;
        }
        size_t cap = o->cap ? o->cap * 2 : 65536;
        while (cap <= o->len + (size_t)n)
            cap *= 2;
        char *np = realloc(o->p, cap);
        if (!np) {
            o->oom = true;
            return;
        }
        o->p = np;
        o->cap = cap;
    }
}

static void help(out *o, const char *name, const char *type, const char *text)
{
    put(o, "# HELP %s %s\n# TYPE %s %s\n", name, text, name, type);
}

static void requests(out *o)
{
    const api_route *routes = api_routes();
    /* The route table ends at a NULL method, before MAX_ROUTES: count the
     * routes once and index only below that. */
    int nroutes = 0;
    while (nroutes < MAX_ROUTES && routes[nroutes].method)
        nroutes++;
    help(o, "logstore_http_requests_total", "counter", "HTTP requests answered, by route and status.");
    for (int k = 0; k < 2 * (MAX_ROUTES + 1); k++) {
        int r = k / 2, h = k % 2;
        bool known = r < nroutes;
        if (r < MAX_ROUTES && !known)
            continue;
        for (int s = 0; s < NSTATUS - 1; s++) {
            uint64_t n = atomic_load(&req_count[r][h][s]);
            if (!n)
                continue;
            char st[8];
            if (statuses[s])
                snprintf(st, sizeof st, "%d", statuses[s]);
            else
                snprintf(st, sizeof st, "other");
            put(o, "logstore_http_requests_total{method=\"%s\",route=\"%s\",status=\"%s\"} %llu\n",
                !known ? "" : h ? "HEAD" : routes[r].method, known ? routes[r].pattern : "unmatched",
                st, (unsigned long long)n);
        }
    }
    help(o, "logstore_http_request_duration_seconds", "histogram",
         "Time from the request's arrival to its answer, by route.");
    for (int k = 0; k < 2 * (MAX_ROUTES + 1); k++) {
        int r = k / 2, h = k % 2;
        bool known = r < nroutes;
        if (r < MAX_ROUTES && !known)
            continue;
        /* One read of each bucket: a request finishing mid-scrape must not
         * leave _count apart from the +Inf bucket, which quantiles rely on. */
        uint64_t lat[NLAT], cum = 0, total = 0;
        for (int i = 0; i < NLAT; i++)
            total += lat[i] = atomic_load(&req_lat[r][h][i]);
        if (!total)
            continue;
        const char *m = !known ? "" : h ? "HEAD" : routes[r].method;
        const char *pat = known ? routes[r].pattern : "unmatched";
        for (int i = 0; i < NLAT; i++) {
            cum += lat[i];
            if (lat_us[i] == INT64_MAX)
                put(o, "logstore_http_request_duration_seconds_bucket{method=\"%s\",route=\"%s\",le=\"+Inf\"} %llu\n",
                    m, pat, (unsigned long long)cum);
            else
                put(o, "logstore_http_request_duration_seconds_bucket{method=\"%s\",route=\"%s\",le=\"%g\"} %llu\n",
                    m, pat, (double)lat_us[i] / 1e6, (unsigned long long)cum);
        }
        put(o, "logstore_http_request_duration_seconds_sum{method=\"%s\",route=\"%s\"} %.6f\n", m, pat,
            (double)atomic_load(&req_lat_sum_us[r][h]) / 1e6);
        put(o, "logstore_http_request_duration_seconds_count{method=\"%s\",route=\"%s\"} %llu\n", m,
            pat, (unsigned long long)total);
    }
}

static void partitions(out *o, eng_manager *m)
{
    eng_partition **v;
    size_t n;
    if (eng_manager_all_partitions(m, &v, &n))
        return;
    static const char *const traffic[5][2] = {
        {"logstore_records_appended_total", "Records appended, by topic."},
        {"logstore_bytes_appended_total", "Bytes of record batches appended, by topic."},
        {"logstore_records_read_total",
         "Records handed to readers, by topic (a raw read: the offsets its batches cover from the one asked for)."},
        {"logstore_bytes_read_total",
         "Bytes of keys, values and headers (as stored) handed to readers, by topic (a raw read: the batch bytes sent)."},
        {"logstore_duplicate_batches_total",
         "Idempotent producers' retried batches answered with their first offsets and not written, by topic."}};
    for (int k = 0; k < 5; k++) {
        help(o, traffic[k][0], "counter", traffic[k][1]);
        for (size_t i = 0; i < n;) {
            const char *topic = eng_partition_topic(v[i]);
            uint64_t sum = 0;
            for (; i < n && !strcmp(eng_partition_topic(v[i]), topic); i++) {
                eng_partition_counters c;
                eng_partition_counters_get(v[i], &c);
                sum += k == 0 ? c.appended_records : k == 1 ? c.appended_bytes
                       : k == 2 ? c.read_records : k == 3 ? c.read_bytes : c.duplicate_batches;
            }
            put(o, "%s{topic=\"%s\"} %llu\n", traffic[k][0], topic, (unsigned long long)sum);
        }
    }
    static const char *const gauges[6][2] = {
        {"logstore_partition_log_start_offset", "First offset still in the log."},
        {"logstore_partition_high_watermark", "End of acknowledged data."},
        {"logstore_partition_log_end_offset", "Offset the next record gets."},
        {"logstore_partition_size_bytes", "Bytes of the partition's .log files."},
        {"logstore_partition_segments", "Segments of the partition."},
        {"logstore_partition_producers", "Idempotent producers whose sequences the partition keeps."}};
    eng_partition_info *info = calloc(n ? n : 1, sizeof *info);
    for (size_t i = 0; info && i < n; i++)
        eng_partition_info_get(v[i], &info[i]);
    for (int k = 0; info && k < 6; k++) {
        help(o, gauges[k][0], "gauge", gauges[k][1]);
        for (size_t i = 0; i < n; i++) {
            eng_partition_counters c;
            if (k == 5)
                eng_partition_counters_get(v[i], &c);
            long long val = k == 0 ? info[i].log_start_offset : k == 1 ? info[i].high_watermark
                            : k == 2 ? info[i].log_end_offset : k == 3 ? (long long)info[i].size_bytes
                            : k == 4 ? info[i].segment_count : (long long)c.producers;
            put(o, "%s{topic=\"%s\",partition=\"%d\"} %lld\n", gauges[k][0], eng_partition_topic(v[i]),
                eng_partition_id(v[i]), val);
        }
    }
    free(info);
    eng_cleaner *c = eng_manager_cleaner(m);
    if (c) {
        help(o, "logstore_cleaner_dirty_ratio", "gauge",
             "Cleanable bytes / all bytes of each compacted partition.");
        int64_t now = eng_now_ms();
        for (size_t i = 0; i < n; i++) {
            eng_config cfg;
            eng_partition_get_config(v[i], &cfg);
            if (!(cfg.v[ENG_CFG_CLEANUP_POLICY].i & ENG_POLICY_COMPACT))
                continue;
            eng_clean_range r;
            eng_partition_clean_range(
                v[i], eng_cleaner_checkpoint(c, eng_partition_topic(v[i]), eng_partition_id(v[i])),
                now, &r);
            put(o, "logstore_cleaner_dirty_ratio{topic=\"%s\",partition=\"%d\"} %g\n",
                eng_partition_topic(v[i]), eng_partition_id(v[i]), r.dirty_ratio);
        }
        eng_cleaner_status st;
        if (eng_cleaner_status_get(c, &st) == 0) {
            help(o, "logstore_cleaner_uncleanable_partitions", "gauge",
                 "Partitions the cleaner gave up on after a failure.");
            put(o, "logstore_cleaner_uncleanable_partitions %zu\n", st.nuncleanable);
            eng_cleaner_status_free(&st);
        }
    }
    eng_partitions_release(v, n);
}

static void engine_stats(out *o)
{
    eng_stats s;
    eng_stats_snapshot(&s);
    static const char *const rules[ENG_RULE_COUNT] = {"log_start_offset", "retention.bytes",
                                                      "retention.ms"};
    help(o, "logstore_retention_deleted_segments_total", "counter", "Segments deleted by retention, by rule.");
    for (int r = 0; r < ENG_RULE_COUNT; r++)
        put(o, "logstore_retention_deleted_segments_total{rule=\"%s\"} %llu\n", rules[r],
            (unsigned long long)s.retention_segments[r]);
    help(o, "logstore_retention_deleted_bytes_total", "counter", "Bytes deleted by retention, by rule.");
    for (int r = 0; r < ENG_RULE_COUNT; r++)
        put(o, "logstore_retention_deleted_bytes_total{rule=\"%s\"} %llu\n", rules[r],
            (unsigned long long)s.retention_bytes[r]);
    help(o, "logstore_cleaner_runs_total", "counter", "Compaction rounds run.");
    put(o, "logstore_cleaner_runs_total %llu\n", (unsigned long long)s.cleaner_runs);
    help(o, "logstore_cleaner_failures_total", "counter", "Compaction rounds that failed.");
    put(o, "logstore_cleaner_failures_total %llu\n", (unsigned long long)s.cleaner_failures);
    help(o, "logstore_cleaner_bytes_read_total", "counter", "Bytes the cleaner read.");
    put(o, "logstore_cleaner_bytes_read_total %llu\n", (unsigned long long)s.cleaner_bytes_read);
    help(o, "logstore_cleaner_bytes_reclaimed_total", "counter", "Bytes compaction removed from logs.");
    put(o, "logstore_cleaner_bytes_reclaimed_total %llu\n", (unsigned long long)s.cleaner_bytes_reclaimed);
    help(o, "logstore_cleaner_records_removed_total", "counter", "Records compaction removed.");
    put(o, "logstore_cleaner_records_removed_total %llu\n", (unsigned long long)s.cleaner_records_removed);
    help(o, "logstore_fsync_duration_seconds", "histogram", "Latency of the fsyncs that flush partitions.");
    for (int i = 0; i < ENG_FSYNC_BUCKETS; i++) {
        if (eng_fsync_bucket_us[i] == INT64_MAX)
            put(o, "logstore_fsync_duration_seconds_bucket{le=\"+Inf\"} %llu\n",
                (unsigned long long)s.fsync_buckets[i]);
        else
            put(o, "logstore_fsync_duration_seconds_bucket{le=\"%g\"} %llu\n",
                (double)eng_fsync_bucket_us[i] / 1e6, (unsigned long long)s.fsync_buckets[i]);
    }
    put(o, "logstore_fsync_duration_seconds_sum %.6f\n", (double)s.fsync_sum_us / 1e6);
    put(o, "logstore_fsync_duration_seconds_count %llu\n", (unsigned long long)s.fsync_count);
}

void api_h_metrics(api_ctx *ctx, const api_request *req, const api_params *params,
                   api_response *resp)
{
    (void)req;
    (void)params;
    out o = {0};
    help(&o, "logstore_build_info", "gauge", "Build information.");
    put(&o, "logstore_build_info{version=\"%s\"} 1\n", ctx->version);
    eng_manager *m = atomic_load(&ctx->mgr);
    int state = atomic_load(&ctx->state);
    help(&o, "logstore_ready", "gauge", "1 when the server serves the logs (loaded, not stopping, dir online).");
    put(&o, "logstore_ready %d\n", state == API_READY && m && !eng_manager_offline(m));
    help(&o, "logstore_loading", "gauge", "1 while the logs are loading (recovery in progress).");
    put(&o, "logstore_loading %d\n", state == API_LOADING);
    help(&o, "logstore_parked_readers", "gauge", "Long-polls and idle streams parked right now.");
    put(&o, "logstore_parked_readers %zu\n", api_waiters_parked(ctx->waiters));
    size_t queued[API_LANES], running[API_LANES];
    for (int k = API_LANE_NONE + 1; k < API_LANES; k++)
        api_lane_counts(ctx->lanes[k], &queued[k], &running[k]);
    help(&o, "logstore_maintenance_requests_running", "gauge",
         "compaction:run, retention:run and snapshot creations and removals running right now, by kind.");
    for (int k = API_LANE_NONE + 1; k < API_LANES; k++)
        put(&o, "logstore_maintenance_requests_running{kind=\"%s\"} %zu\n",
            api_lane_kind_name(k), running[k]);
    help(&o, "logstore_maintenance_requests_queued", "gauge",
         "Such requests waiting for their kind's thread (past the queue's limit, 503 overloaded).");
    for (int k = API_LANE_NONE + 1; k < API_LANES; k++)
        put(&o, "logstore_maintenance_requests_queued{kind=\"%s\"} %zu\n",
            api_lane_kind_name(k), queued[k]);
    help(&o, "logstore_open_streams", "gauge", "SSE and NDJSON streams open right now.");
    put(&o, "logstore_open_streams %lld\n", (long long)atomic_load(&open_streams));
    help(&o, "logstore_corrupt_record_errors_total", "counter",
         "Answers and stream events that met damaged stored data (corrupt_record).");
    put(&o, "logstore_corrupt_record_errors_total %llu\n",
        (unsigned long long)atomic_load(&corrupt_records));
    long headroom, limit;
    if (eng_process_fd_headroom(&headroom, &limit) == 0) {
        /* The client libraries' standard names, so existing alerts apply. */
        help(&o, "process_open_fds", "gauge", "Open file descriptors (1 a segment, 3 for an active one, 1 a connection).");
        put(&o, "process_open_fds %ld\n", limit - headroom);
        help(&o, "process_max_fds", "gauge", "The process's open-files limit (soft RLIMIT_NOFILE).");
        put(&o, "process_max_fds %ld\n", limit);
    }
    if (eng_process_map_headroom(&headroom, &limit) == 0) {
        help(&o, "logstore_memory_maps", "gauge", "Memory maps the process holds (2 a segment: its indexes).");
        put(&o, "logstore_memory_maps %ld\n", limit - headroom);
        help(&o, "logstore_memory_maps_limit", "gauge",
             "The kernel's limit on them (vm.max_map_count); segment rolls fail past it.");
        put(&o, "logstore_memory_maps_limit %ld\n", limit);
    }
    eng_process_usage u;
    if (eng_process_usage_get(&u) == 0) {
        help(&o, "process_cpu_seconds_total", "counter", "User and system CPU time spent.");
        put(&o, "process_cpu_seconds_total %.2f\n", u.cpu_seconds);
        help(&o, "process_resident_memory_bytes", "gauge", "Resident memory size.");
        put(&o, "process_resident_memory_bytes %llu\n", (unsigned long long)u.resident_bytes);
        help(&o, "process_virtual_memory_bytes", "gauge", "Virtual memory size (index maps included).");
        put(&o, "process_virtual_memory_bytes %llu\n", (unsigned long long)u.virtual_bytes);
        help(&o, "process_start_time_seconds", "gauge", "Start time of the process since the epoch.");
        put(&o, "process_start_time_seconds %.2f\n", u.start_time_seconds);
    }
    requests(&o);
    engine_stats(&o);
    if (m && state == API_READY) {
        eng_startup_report r;
        eng_manager_startup_report(m, &r);
        help(&o, "logstore_startup_clean_shutdown", "gauge", "1 if the last start followed a clean stop.");
        put(&o, "logstore_startup_clean_shutdown %d\n", r.clean_shutdown);
        help(&o, "logstore_startup_segments_recovered", "gauge", "Segments recovered at the last start.");
        put(&o, "logstore_startup_segments_recovered %u\n", r.segments_recovered);
        help(&o, "logstore_startup_bytes_truncated", "gauge", "Bytes truncated by recovery at the last start.");
        put(&o, "logstore_startup_bytes_truncated %llu\n", (unsigned long long)r.bytes_truncated);
        help(&o, "logstore_startup_duration_seconds", "gauge", "How long the last start took to load the logs.");
        put(&o, "logstore_startup_duration_seconds %.3f\n", (double)r.duration_ms / 1000.0);
        help(&o, "logstore_log_dir_offline", "gauge", "1 after an I/O error took the log dir offline.");
        put(&o, "logstore_log_dir_offline %d\n", eng_manager_offline(m));
        uint64_t total, usable;
        if (eng_manager_disk_usage(m, &total, &usable) == 0) {
            help(&o, "logstore_log_dir_total_bytes", "gauge", "Size of the file system holding the log dir.");
            put(&o, "logstore_log_dir_total_bytes %llu\n", (unsigned long long)total);
            help(&o, "logstore_log_dir_usable_bytes", "gauge", "Free space usable on that file system.");
            put(&o, "logstore_log_dir_usable_bytes %llu\n", (unsigned long long)usable);
        }
        partitions(&o, m);
    }
    if (o.oom) {
        free(o.p);
        api_error(resp, req, "internal_error", NULL, "out of memory");
        return;
    }
    resp->status = 200;
    resp->raw = o.p;
    resp->raw_len = o.len;
    resp->content_type = "text/plain; version=0.0.4; charset=utf-8";
}
