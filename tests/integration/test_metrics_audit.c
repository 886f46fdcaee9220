/*
 * test_metrics_audit.c - every figure the server reports about its logs,
 * checked against what the test computes on its own after a scripted
 * workload (JSON and binary appends, raw, page, record, NDJSON, SSE and
 * long-poll reads, a roll, delete-records, retention, compaction, bad
 * requests of several kinds, topic deletes, restarts):
 *
 *   - partition sizes and segment counts (description, segment listing,
 *     /v1/log-dirs, /metrics) equal the .log files stat() finds in the
 *     data dir; offsets and timestamps equal what was appended;
 *   - records and bytes appended and read per topic, retention and cleaner
 *     work, and requests by status equal the test's own counts;
 *   - a deleted topic leaves no series and no cleaner entry behind;
 *   - the startup figures (/v1/info and /metrics) equal the data dir after
 *     a clean stop and the bytes cut off after a crash; the recovery point
 *     is the log end after either.
 *
 * One server serves the whole group; the last test requires a clean exit
 * (the sanitizer build fails it on a leak, e.g. from the create/delete
 * cycles).
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

/* No cleaner threads: compaction runs only when the test asks, so sizes and
 * the startup's segment count do not change under it (compaction:run
 * cleans on the request's thread). */
static const char *const settings[] = {"log.cleaner.threads=0", NULL};
#define GROUP_SETTINGS settings
#include "group_server.h"
#include "harness.h"
#include "read_util.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

/* Answers this test received, by status: /metrics counts them too. */
static long long seen[600];

static void call(const char *method, const char *path, const char *ctype, const void *body,
                 size_t len, const char *accept, long want, ls_resp *r)
{
    char a[96];
    const char *hdrs[2] = {NULL, NULL};
    if (accept) {
        snprintf(a, sizeof a, "Accept: %s", accept);
        hdrs[0] = a;
    }
    assert_int_equal(ls_http(S, method, path, ctype, body, len, hdrs, r), 0);
    if (r->status != want)
        fprintf(stderr, "%s %s: %ld, wanted %ld: %s\n", method, path, r->status, want,
                r->body ? r->body : "");
    assert_int_equal(r->status, want);
    seen[r->status]++;
}

static void call_json(const char *method, const char *path, const char *json, long want)
{
    ls_resp r;
    call(method, path, json ? "application/json" : NULL, json, json ? strlen(json) : 0, NULL, want,
         &r);
    ls_resp_free(&r);
}

/* Appends a JSON body; returns the batch bytes the answer reports. */
static long long append(const char *topic, int p, const char *json)
{
    char path[128];
    snprintf(path, sizeof path, "/v1/topics/%s/partitions/%d/records", topic, p);
    ls_resp r;
    call("POST", path, "application/json", json, strlen(json), NULL, 200, &r);
    long long b = ls_jint(&r, "batch_bytes");
    ls_resp_free(&r);
    return b;
}

/* The value of the series (name with its labels, as printed) in a scrape,
 * or -1 when it is absent. */
static double series(const char *scrape, const char *name)
{
    size_t n = strlen(name);
    for (const char *l = scrape; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL)
        if (!strncmp(l, name, n) && l[n] == ' ')
            return strtod(l + n + 1, NULL);
    return -1;
}

/* The sum of the samples of logstore_http_requests_total with this status,
 * leaving out the scrapes themselves. */
static long long requests_with_status(const char *scrape, int status)
{
    static const char fam[] = "logstore_http_requests_total{";
    char st[32];
    snprintf(st, sizeof st, "status=\"%d\"}", status);
    long long sum = 0;
    for (const char *l = scrape; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
        const char *end = strchr(l, '\n');
        size_t len = end ? (size_t)(end - l) : strlen(l);
        char line[512];
        if (strncmp(l, fam, sizeof fam - 1) || len >= sizeof line)
            continue;
        memcpy(line, l, len);
        line[len] = 0;
        char *sp = strrchr(line, ' ');
        if (sp && strstr(line, st) && !strstr(line, "route=\"/metrics\""))
            sum += atoll(sp + 1);
    }
    return sum;
}

static char *scrape(void)
{
    ls_resp r;
    assert_int_equal(ls_get(S, "/metrics", &r), 0);
    assert_int_equal(r.status, 200);
    char *body = strdup(r.body);
    assert_non_null(body);
    ls_resp_free(&r);
    return body;
}

/* S->dir/topic-p/file (file may be ""). */
static void part_path(char *out, size_t len, const char *topic, int p, const char *file)
{
    int n = snprintf(out, len, "%s/%s-%d/%s", S->dir, topic, p, file);
    assert_true(n > 0 && (size_t)n < len);
}

/* Bytes and number of the partition's segment files (*.log exactly: not
 * .log.deleted, .cleaned or .swap), from stat(). */
static long long log_files(const char *topic, int p, int *count)
{
    char dir[1024];
    part_path(dir, sizeof dir, topic, p, "");
    DIR *d = opendir(dir);
    assert_non_null(d);
    long long bytes = 0;
    *count = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t n = strlen(e->d_name);
        if (n < 5 || strcmp(e->d_name + n - 4, ".log"))
            continue;
        char path[2048];
        part_path(path, sizeof path, topic, p, e->d_name);
        struct stat st;
        assert_int_equal(stat(path, &st), 0);
        bytes += st.st_size;
        (*count)++;
    }
    closedir(d);
    return bytes;
}

typedef struct expect {
    const char *topic;
    int partition;
    long long lso, hw, first_ts, max_ts; /* -1: no timestamp */
} expect;

/* Every place that reports the partition's size, segments and offsets
 * against stat() and the expectation; returns the stat() size. */
static long long check_partition(const expect *x, const char *m, json_t *log_dirs)
{
    int files;
    long long bytes = log_files(x->topic, x->partition, &files);
    char path[160], name[160];
    ls_resp r;
    snprintf(path, sizeof path, "/v1/topics/%s/partitions/%d", x->topic, x->partition);
    assert_int_equal(ls_get(S, path, &r), 0);
    assert_int_equal(r.status, 200);
    assert_int_equal(ls_jint(&r, "size_bytes"), bytes);
    assert_int_equal(ls_jint(&r, "segment_count"), files);
    assert_int_equal(ls_jint(&r, "log_start_offset"), x->lso);
    assert_int_equal(ls_jint(&r, "high_watermark"), x->hw);
    assert_int_equal(ls_jint(&r, "log_end_offset"), x->hw);
    json_t *ft = ls_jget(&r, "first_timestamp"), *mt = ls_jget(&r, "max_timestamp");
    assert_int_equal(x->first_ts < 0 ? json_is_null(ft) : json_integer_value(ft) == x->first_ts, 1);
    assert_int_equal(x->max_ts < 0 ? json_is_null(mt) : json_integer_value(mt) == x->max_ts, 1);
    ls_resp_free(&r);

    snprintf(path, sizeof path, "/v1/topics/%s/partitions/%d/segments", x->topic, x->partition);
    assert_int_equal(ls_get(S, path, &r), 0);
    assert_int_equal(r.status, 200);
    json_t *segs = ls_jget(&r, "segments");
    assert_int_equal(json_array_size(segs), files);
    long long listed = 0;
    size_t i;
    json_t *s;
    json_array_foreach(segs, i, s)
    {
        listed += json_integer_value(json_object_get(s, "size_bytes"));
        /* each file's own size, as stat() sees it */
        json_t *f;
        size_t k;
        json_array_foreach(json_object_get(s, "files"), k, f)
        {
            char fp[1024];
            part_path(fp, sizeof fp, x->topic, x->partition,
                      json_string_value(json_object_get(f, "name")));
            assert_int_equal(json_integer_value(json_object_get(f, "size_bytes")), ls_file_size(fp));
        }
    }
    assert_int_equal(listed, bytes);
    ls_resp_free(&r);

    static const char *const gauges[] = {"size_bytes", "segments", "log_start_offset",
                                         "high_watermark", "log_end_offset"};
    long long want[] = {bytes, files, x->lso, x->hw, x->hw};
    for (size_t g = 0; g < 5; g++) {
        snprintf(name, sizeof name, "logstore_partition_%s{topic=\"%s\",partition=\"%d\"}",
                 gauges[g], x->topic, x->partition);
        assert_true(series(m, name) == (double)want[g]);
    }

    json_t *t, *p;
    size_t ti, pi;
    int found = 0;
    json_array_foreach(json_object_get(json_array_get(log_dirs, 0), "topics"), ti, t)
    {
        if (strcmp(json_string_value(json_object_get(t, "name")), x->topic))
            continue;
        json_array_foreach(json_object_get(t, "partitions"), pi, p)
        {
            if (json_integer_value(json_object_get(p, "partition")) != x->partition)
                continue;
            assert_int_equal(json_integer_value(json_object_get(p, "size_bytes")), bytes);
            assert_int_equal(json_integer_value(json_object_get(p, "offset_lag")), 0);
            found++;
        }
    }
    assert_int_equal(found, 1);
    return bytes;
}

#define RET(rule, what) "logstore_retention_deleted_" what "_total{rule=\"" rule "\"}"

static void test_workload_figures(void **state)
{
    (void)state;
    char *m0 = scrape();
    long long base_status[600];
    static const int statuses[] = {200, 201, 204, 400, 404, 405, 415, 416, 422};
    for (size_t i = 0; i < sizeof statuses / sizeof *statuses; i++)
        base_status[statuses[i]] = requests_with_status(m0, statuses[i]);
    call_json("POST", "/v1/topics", "{\"name\":\"au\",\"partitions\":2}", 201);
    call_json("POST", "/v1/topics",
              "{\"name\":\"auc\",\"configs\":{\"cleanup.policy\":\"compact\","
              "\"min.cleanable.dirty.ratio\":\"0.01\"}}",
              201);
    call_json("POST", "/v1/topics", "{\"name\":\"aur\",\"configs\":{\"retention.ms\":\"1000\"}}", 201);

    /* au-0: three batches of two 2-byte values, timestamps T..T+5. */
    long long T = ru_now_ms() - 60000, appended_bytes = 0;
    char body[512];
    for (int b = 0; b < 3; b++) {
        snprintf(body, sizeof body,
                 "{\"records\":[{\"value\":\"a%d\",\"timestamp\":%lld},{\"value\":\"b%d\","
                 "\"timestamp\":%lld}]}",
                 b, T + 2 * b, b, T + 2 * b + 1);
        appended_bytes += append("au", 0, body);
    }
    /* Its stored batches, raw, appended as they are to au-1. */
    ls_resp r;
    call("GET", "/v1/topics/au/partitions/0/records?offset=0", NULL, NULL, 0,
         "application/octet-stream", 200, &r);
    assert_int_equal((long long)r.len, appended_bytes);
    ls_resp r2;
    call("POST", "/v1/topics/au/partitions/1/records", "application/octet-stream", r.body, r.len,
         NULL, 200, &r2);
    assert_int_equal(ls_jint(&r2, "batch_bytes"), (long long)r.len);
    appended_bytes += (long long)r.len;
    long long raw_len = (long long)r.len;
    ls_resp_free(&r2);
    ls_resp_free(&r);
    call_json("POST", "/v1/topics/au/partitions/0/segments:roll", "{}", 200);
    snprintf(body, sizeof body, "{\"records\":[{\"value\":\"c0\",\"timestamp\":%lld}]}", T + 10);
    appended_bytes += append("au", 0, body);

    /* Reads of each kind: 3 + 1 + 2 + 1 records of 2 bytes, and the raw
     * read above (its 6 offsets, its batch bytes). */
    call("GET", "/v1/topics/au/partitions/0/records?offset=0&max_records=3", NULL, NULL, 0, NULL,
         200, &r);
    ls_resp_free(&r);
    call("GET", "/v1/topics/au/partitions/0/records/4", NULL, NULL, 0, NULL, 200, &r);
    ls_resp_free(&r);
    call("GET", "/v1/topics/au/partitions/0/records?offset=0&max_records=2", NULL, NULL, 0,
         "application/x-ndjson", 200, &r);
    ls_resp_free(&r);
    call("GET", "/v1/topics/au/partitions/0/records?offset=0&max_records=1", NULL, NULL, 0,
         "text/event-stream", 200, &r);
    ls_resp_free(&r);
    call("GET", "/v1/topics/au/partitions/1/records?offset=latest&wait_ms=20&min_bytes=1", NULL,
         NULL, 0, NULL, 200, &r);
    ls_resp_free(&r);

    /* Delete-records up to the second segment, then retention deletes the
     * first under the log_start_offset rule. */
    char seg0[1024];
    part_path(seg0, sizeof seg0, "au", 0, "00000000000000000000.log");
    long long first_seg = ls_file_size(seg0);
    call_json("POST", "/v1/topics/au/partitions/0/records:delete", "{\"before_offset\":6}", 200);
    call("POST", "/v1/topics/au/retention:run", "application/json", "{}", 2, NULL, 200, &r);
    assert_int_equal(ls_jint(&r, "segments_deleted"), 1);
    assert_int_equal(ls_jint(&r, "bytes_freed"), first_seg);
    ls_resp_free(&r);

    /* aur: one old record, rolled and deleted by retention.ms. */
    long long aur_bytes = append("aur", 0, "{\"records\":[{\"value\":\"old\",\"timestamp\":1000}]}");
    call_json("POST", "/v1/topics/aur/partitions/0/segments:roll", "{}", 200);
    /* Dry runs first: they count nowhere. */
    call_json("POST", "/v1/topics/aur/retention:run", "{\"dry_run\":true}", 200);
    call("POST", "/v1/topics/aur/retention:run", "application/json", "{}", 2, NULL, 200, &r);
    assert_int_equal(ls_jint(&r, "bytes_freed"), aur_bytes);
    ls_resp_free(&r);

    /* auc: u twice and w, rolled and compacted: one record goes. */
    long long auc_bytes =
        append("auc", 0, "{\"records\":[{\"key\":\"u\",\"value\":\"1\"},{\"key\":\"w\",\"value\":\"2\"}]}");
    auc_bytes += append("auc", 0, "{\"records\":[{\"key\":\"u\",\"value\":\"3\"}]}");
    call_json("POST", "/v1/topics/auc/partitions/0/segments:roll", "{}", 200);
    int nc;
    long long auc_before = log_files("auc", 0, &nc);
    assert_int_equal(auc_before, auc_bytes);
    call_json("POST", "/v1/topics/auc/compaction:run", "{\"dry_run\":true}", 200);
    call("POST", "/v1/topics/auc/compaction:run", "application/json", "{}", 2, NULL, 200, &r);
    assert_int_equal(ls_jint(&r, "partitions.0.stats.records_removed"), 1);
    ls_resp_free(&r);
    long long auc_after = log_files("auc", 0, &nc);
    assert_true(auc_after < auc_before);
    /* One more segment, dirty: the ratio is its bytes over all the bytes
     * up to the active segment (the cleaned ones and it). */
    long long dirty = append("auc", 0, "{\"records\":[{\"key\":\"w\",\"value\":\"4\"}]}");
    auc_bytes += dirty;
    call_json("POST", "/v1/topics/auc/partitions/0/segments:roll", "{}", 200);
    assert_int_equal(log_files("auc", 0, &nc), auc_after + dirty);
    call("GET", "/v1/cleaner", NULL, NULL, 0, NULL, 200, &r);
    json_t *cp = ls_jfind(ls_jget(&r, "partitions"), "topic", "auc");
    assert_non_null(cp);
    assert_int_equal(json_integer_value(json_object_get(cp, "clean_bytes")), auc_after);
    assert_int_equal(json_integer_value(json_object_get(cp, "cleanable_bytes")), dirty);
    double ratio = (double)dirty / (double)(auc_after + dirty);
    double listed = json_real_value(json_object_get(cp, "dirty_ratio"));
    assert_true(listed > ratio - 1e-9 && listed < ratio + 1e-9);
    ls_resp_free(&r);

    /* Bad requests of several kinds. */
    call_json("GET", "/v1/topics/nope", NULL, 404);
    call_json("GET", "/no/such/route", NULL, 404);
    call_json("PUT", "/v1/topics", NULL, 405);
    call_json("POST", "/v1/topics", "{\"name\":", 400);
    call_json("POST", "/v1/topics", "{\"name\":\"bad name\"}", 422);
    call_json("GET", "/v1/topics/au/partitions/0/records?offset=999", NULL, 416);
    call("POST", "/v1/topics/au/partitions/0/records", "text/plain", "x", 1, NULL, 415, &r);
    ls_resp_free(&r);

    char *m = scrape();
    ls_resp ld;
    assert_int_equal(ls_get(S, "/v1/log-dirs", &ld), 0);
    json_t *dirs = ls_jget(&ld, "log_dirs");
    const expect xs[] = {
        {"au", 0, 6, 7, T + 10, T + 10},
        {"au", 1, 0, 6, T, T + 5},
        {"auc", 0, 0, 4, -2, -2},
        {"aur", 0, 1, 1, -1, -1},
    };
    long long total = 0;
    for (size_t i = 0; i < sizeof xs / sizeof *xs; i++) {
        expect x = xs[i];
        if (x.first_ts == -2) { /* JSON appends without timestamps: whatever they got */
            char p[64];
            snprintf(p, sizeof p, "/v1/topics/auc/partitions/0");
            assert_int_equal(ls_get(S, p, &r), 0);
            x.first_ts = ls_jint(&r, "first_timestamp");
            x.max_ts = ls_jint(&r, "max_timestamp");
            ls_resp_free(&r);
            assert_true(x.first_ts > T && x.max_ts >= x.first_ts);
        }
        total += check_partition(&x, m, dirs);
    }
    assert_int_equal(json_integer_value(json_object_get(json_array_get(dirs, 0), "size_bytes")), total);
    ls_resp_free(&ld);

    double mratio = series(m, "logstore_cleaner_dirty_ratio{topic=\"auc\",partition=\"0\"}");
    assert_true(mratio > ratio - 1e-5 && mratio < ratio + 1e-5); /* printed with %g */

    /* Traffic per topic. */
    assert_true(series(m, "logstore_records_appended_total{topic=\"au\"}") == 13);
    assert_true(series(m, "logstore_bytes_appended_total{topic=\"au\"}") == (double)appended_bytes);
    assert_true(series(m, "logstore_records_appended_total{topic=\"auc\"}") == 4);
    assert_true(series(m, "logstore_bytes_appended_total{topic=\"auc\"}") == (double)auc_bytes);
    assert_true(series(m, "logstore_records_appended_total{topic=\"aur\"}") == 1);
    assert_true(series(m, "logstore_records_read_total{topic=\"au\"}") == 6 + 3 + 1 + 2 + 1);
    assert_true(series(m, "logstore_bytes_read_total{topic=\"au\"}") == (double)(raw_len + 2 * 7));

    /* Retention and cleaner work, as deltas over this test. */
    assert_true(series(m, RET("log_start_offset", "segments")) - series(m0, RET("log_start_offset", "segments")) == 1);
    assert_true(series(m, RET("log_start_offset", "bytes")) - series(m0, RET("log_start_offset", "bytes")) == (double)first_seg);
    assert_true(series(m, RET("retention.ms", "segments")) - series(m0, RET("retention.ms", "segments")) == 1);
    assert_true(series(m, RET("retention.ms", "bytes")) - series(m0, RET("retention.ms", "bytes")) == (double)aur_bytes);
    assert_true(series(m, "logstore_cleaner_runs_total") - series(m0, "logstore_cleaner_runs_total") == 1);
    assert_true(series(m, "logstore_cleaner_bytes_reclaimed_total") -
                    series(m0, "logstore_cleaner_bytes_reclaimed_total") ==
                (double)(auc_before - auc_after));
    assert_true(series(m, "logstore_cleaner_records_removed_total") -
                    series(m0, "logstore_cleaner_records_removed_total") == 1);

    /* Requests by status: what this test received. */
    for (size_t i = 0; i < sizeof statuses / sizeof *statuses; i++) {
        int st = statuses[i];
        long long got = requests_with_status(m, st) - base_status[st];
        if (got != seen[st])
            fprintf(stderr, "status %d: /metrics counted %lld, the test got %lld\n", st, got, seen[st]);
        assert_int_equal(got, seen[st]);
    }
    free(m0);
    free(m);
}

/* Many create/append/delete cycles of a compacted topic: nothing of it stays
 * in /metrics, /v1/log-dirs or /v1/cleaner (and the clean stop at the end
 * finds no leak). */
static void test_deleted_topic_leaves_nothing(void **state)
{
    (void)state;
    for (int i = 0; i < 25; i++) {
        call_json("POST", "/v1/topics",
                  "{\"name\":\"cyc\",\"partitions\":3,\"configs\":{\"cleanup.policy\":\"compact\"}}",
                  201);
        append("cyc", 1, "{\"records\":[{\"key\":\"k\",\"value\":\"v\"}]}");
        ls_resp r;
        call("GET", "/v1/topics/cyc/partitions/1/records?offset=0", NULL, NULL, 0, NULL, 200, &r);
        ls_resp_free(&r);
        if (i % 5 == 0) {
            call("POST", "/v1/topics/cyc/compaction:run", "application/json", "{}", 2, NULL, 200, &r);
            ls_resp_free(&r);
        }
        char *m = scrape();
        assert_true(series(m, "logstore_records_appended_total{topic=\"cyc\"}") == 1);
        free(m);
        call_json("DELETE", "/v1/topics/cyc", NULL, 204);
    }
    char *m = scrape();
    if (strstr(m, "topic=\"cyc\""))
        fprintf(stderr, "%s", strstr(m, "topic=\"cyc\"") - 60);
    assert_null(strstr(m, "topic=\"cyc\""));
    assert_true(series(m, "logstore_cleaner_uncleanable_partitions") == 0);
    free(m);
    /* The cleaner's last runs are a history and may name it; its
     * partitions and uncleanable ones may not. */
    static const char *const where[][2] = {{"/v1/log-dirs", "log_dirs.0.topics"},
                                           {"/v1/cleaner", "partitions"},
                                           {"/v1/cleaner", "uncleanable"}};
    for (size_t i = 0; i < 3; i++) {
        ls_resp r;
        assert_int_equal(ls_get(S, where[i][0], &r), 0);
        assert_int_equal(r.status, 200);
        json_t *arr = ls_jget(&r, where[i][1]), *o;
        assert_true(json_is_array(arr));
        size_t k;
        json_array_foreach(arr, k, o)
        {
            json_t *t = json_object_get(o, json_object_get(o, "name") ? "name" : "topic");
            assert_string_not_equal(json_string_value(t), "cyc");
        }
        ls_resp_free(&r);
    }
}

/* /v1/info's startup report and the logstore_startup_* gauges agree with
 * each other and with the data dir: after a clean stop, the topics,
 * partitions and segments there; after a crash, the bytes cut off the
 * active segment. */
static void check_startup(bool clean, long long truncated)
{
    ls_resp r;
    assert_int_equal(ls_get(S, "/v1/info", &r), 0);
    assert_int_equal(r.status, 200);
    char *m = scrape();
    assert_int_equal(json_is_true(ls_jget(&r, "startup.clean_shutdown")), clean);
    assert_true(series(m, "logstore_startup_clean_shutdown") == clean);
    assert_int_equal(ls_jint(&r, "startup.bytes_truncated"), truncated);
    assert_true(series(m, "logstore_startup_bytes_truncated") == (double)truncated);
    assert_true(series(m, "logstore_startup_segments_recovered") ==
                (double)ls_jint(&r, "startup.segments_recovered"));
    assert_true(clean ? ls_jint(&r, "startup.segments_recovered") == 0
                      : ls_jint(&r, "startup.segments_recovered") >= 1);
    /* Counted from the dir: topics from /v1/topics, their partitions'
     * dirs and segment files. */
    ls_resp t;
    assert_int_equal(ls_get(S, "/v1/topics", &t), 0);
    json_t *topics = ls_jget(&t, "topics"), *o;
    long long parts = 0, segs = 0;
    size_t i;
    json_array_foreach(topics, i, o)
    {
        int n = (int)json_integer_value(json_object_get(o, "partitions"));
        for (int p = 0; p < n; p++) {
            int c;
            log_files(json_string_value(json_object_get(o, "name")), p, &c);
            segs += c;
            parts++;
        }
    }
    assert_int_equal(ls_jint(&r, "startup.topics"), (long long)json_array_size(topics));
    assert_int_equal(ls_jint(&r, "startup.partitions"), parts);
    if (ls_jint(&r, "startup.segments") != segs) {
        char *l = ls_dir_listing(S->dir);
        fprintf(stderr, "startup.segments %lld, .log files %lld:\n%s\n%s\n",
                ls_jint(&r, "startup.segments"), segs, l, r.body);
        free(l);
    }
    assert_int_equal(ls_jint(&r, "startup.segments"), segs);
    ls_resp_free(&t);
    ls_resp_free(&r);
    /* Everything was flushed by the clean stop, or recovered: the recovery
     * point is the log end. */
    for (int p = 0; p < 2; p++)
        assert_int_equal(ls_partition_field(S, "au", p, "recovery_point"),
                         ls_partition_field(S, "au", p, "log_end_offset"));
    /* Traffic counters start at 0 with the server. */
    assert_true(series(m, "logstore_records_appended_total{topic=\"au\"}") == 0);
    free(m);
}

static void test_startup_figures(void **state)
{
    (void)state;
    assert_int_equal(ls_stop(S), 0);
    assert_int_equal(ls_restart(S, settings), 0);
    check_startup(true, 0);

    /* A crash, then 37 bytes of junk after au-1's last batch. */
    ls_kill9(S);
    char seg[1024];
    part_path(seg, sizeof seg, "au", 1, "00000000000000000000.log");
    long long before = ls_file_size(seg);
    FILE *f = fopen(seg, "ab");
    assert_non_null(f);
    for (int i = 0; i < 37; i++)
        fputc(0x5a, f);
    assert_int_equal(fclose(f), 0);
    assert_int_equal(ls_restart(S, settings), 0);
    check_startup(false, 37);
    assert_int_equal(ls_file_size(seg), before);
    assert_int_equal(ls_partition_field(S, "au", 1, "size_bytes"), before);
}

/* The lines of a /proc file: /proc/<pid>/maps has one a mapping. */
static long proc_lines(const char *path)
{
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    long n = 0;
    int c;
    while ((c = fgetc(f)) != EOF)
        n += c == '\n';
    fclose(f);
    return n;
}

/* The process figures match what /proc says of the server's pid: its maps
 * (two a segment: the alert on vm.max_map_count rests on this count), the
 * kernel's limit, and a start time and memory that are the server's own. */
static void test_process_figures(void **state)
{
    (void)state;
    ls_resp r;
    call("GET", "/metrics", NULL, NULL, 0, NULL, 200, &r);
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/maps", (int)S->pid);
    long maps = proc_lines(path);
    double served = series(r.body, "logstore_memory_maps");
    /* the scrape's own answer may map or unmap a buffer or two meanwhile */
    assert_true(served > 0 && served > maps - 32 && served < maps + 32);
    FILE *f = fopen("/proc/sys/vm/max_map_count", "r");
    assert_non_null(f);
    long limit = 0;
    assert_int_equal(fscanf(f, "%ld", &limit), 1);
    fclose(f);
    assert_true(series(r.body, "logstore_memory_maps_limit") == (double)limit);
    double started = series(r.body, "process_start_time_seconds");
    time_t now = time(NULL);
    assert_true(started > (double)now - 3600 && started <= (double)now + 1);
    assert_true(series(r.body, "process_resident_memory_bytes") > 1e6);
    assert_true(series(r.body, "process_virtual_memory_bytes") >
                series(r.body, "process_resident_memory_bytes"));
    assert_true(series(r.body, "process_cpu_seconds_total") > 0);
    ls_resp_free(&r);
}

/* Last: a clean stop exits 0 (leaks fail the sanitizer build's exit). */
static void test_zz_clean_stop(void **state)
{
    (void)state;
    assert_int_equal(ls_stop(S), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_workload_figures),
        cmocka_unit_test(test_deleted_topic_leaves_nothing),
        cmocka_unit_test(test_startup_figures),
        cmocka_unit_test(test_process_figures),
        cmocka_unit_test(test_zz_clean_stop),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
