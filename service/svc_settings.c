/*
 * svc_settings.c - the server settings table and its three sources.
 *
 * Every raw (name, value, source) triple is collected first, in precedence
 * order, then applied: a server setting takes the last value given; a topic
 * config synonym goes through eng_config_defaults_apply, which keeps Kafka's
 * priority between synonyms (log.retention.ms over .minutes over .hours)
 * whatever the order they arrive in.
 */
#include "svc_settings.h"

#include "api_auth.h"
#include "api_cors.h"
#include "svc_log.h"
#include "svc_properties.h"
#include "svc_version.h"

#include <ctype.h>
#include <jansson.h>
#include <float.h>
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define TEXT 1, 0

static const svc_setting_def defs[SVC_COUNT] = {
    [SVC_LISTENERS] = {"listeners", "http://127.0.0.1:8080", TEXT,
                       "Address to serve HTTP on, as http://host:port (port 0 picks a free one)."},
    [SVC_LOG_DIRS] = {"log.dirs", "./data", TEXT,
                      "Data directory holding every partition (one directory)."},
    [SVC_LOG_DIR] = {"log.dir", "", TEXT, "Kafka's single-dir name; used when log.dirs is not set."},
    [SVC_HTTP_THREADS] = {"http.threads", "4", 1, 1024,
                          "HTTP worker threads (each serves many connections)."},
    [SVC_HTTP_MAX_REQUEST_BYTES] = {"http.max.request.bytes", "16777216", 1024, 1073741824,
                                    "Largest request body accepted; larger ones get 413 while streaming."},
    [SVC_HTTP_MAX_INFLIGHT_REQUEST_BYTES] = {
        "http.max.inflight.request.bytes", "268435456", 1024, INT64_MAX,
        "Request bodies held at once over all connections (at least http.max.request.bytes); past it, 503 overloaded. "
        "A body that arrives whole in a connection's read buffer ((http.max.header.bytes + 8 KiB) / 2, "
        "its headers included) is not counted."},
    [SVC_HTTP_MAX_RECORDS_PER_REQUEST] = {"http.max.records.per.request", "100000", 1, 10000000,
                                          "Most records one append request may carry."},
    [SVC_HTTP_MAX_CONNECTIONS] = {"http.max.connections", "10000", 1, 1000000,
                                  "Concurrent HTTP connections accepted."},
    [SVC_HTTP_MAX_CONNECTIONS_PER_IP] = {
        "http.max.connections.per.ip", "0", 0, 1000000,
        "Concurrent HTTP connections from one client address (0 = no limit); past it, a new one is closed at once."},
    [SVC_HTTP_IDLE_TIMEOUT_MS] = {"http.idle.timeout.ms", "60000", 0, 86400000,
                                  "Close a connection idle this long (0 = never)."},
    [SVC_HTTP_MAX_HEADER_BYTES] = {"http.max.header.bytes", "32768", 4096, 16777216,
                                   "Memory for one connection's request line and headers."},
    [SVC_AUTH_TOKENS_FILE] = {"auth.tokens.file", "", TEXT,
                              "Bearer tokens (sha256 hex, roles, optional topic prefix); unset = no auth."},
    [SVC_TLS_CERT_FILE] = {"tls.cert.file", "", TEXT, "PEM certificate (chain) for HTTPS listeners."},
    [SVC_TLS_KEY_FILE] = {"tls.key.file", "", TEXT, "PEM private key for HTTPS listeners."},
    [SVC_HTTP_MAX_WAITERS] = {"http.max.waiters", "10000", 1, 10000000,
                              "Most parked long-polls and idle streams; past it, 429."},
    [SVC_HTTP_SSE_HEARTBEAT_MS] = {"http.sse.heartbeat.ms", "15000", 100, 3600000,
                                   "Comment line sent on an idle SSE stream this often."},
    [SVC_HTTP_CORS_ALLOWED_ORIGINS] = {"http.cors.allowed.origins", "", TEXT,
                                       "Origins whose browser scripts may call the API (comma-separated, or *); unset = none."},
    [SVC_HTTP_ACCESS_LOG] = {"http.access.log", "false", TEXT,
                             "Log one INFO line per HTTP request: client, method and target, status, bytes, time (true or false)."},
    [SVC_HTTP_SLOW_REQUEST_MS] = {"http.slow.request.ms", "10000", 0, 86400000,
                                  "Log a request whose handling took longer at WARN, access log on or off (0 = never); "
                                  "a long-poll's wait and a stream's life do not count."},
    [SVC_NUM_PARTITIONS] = {"num.partitions", "1", 1, 100000,
                            "Partitions of a topic created without a partition count."},
    [SVC_LOG_LEVEL] = {"log.level", "INFO", TEXT, "DEBUG, INFO, WARN or ERROR."},
    [SVC_BACKGROUND_THREADS] = {"background.threads", "10", 1, 1024,
                                "Threads running background jobs (retention, flushes, checkpoints)."},
    [SVC_NUM_RECOVERY_THREADS_PER_DATA_DIR] = {
        "num.recovery.threads.per.data.dir", "1", 1, 1024,
        "Threads loading the partitions at startup, recovery included; 1 loads them one after another."},
    [SVC_LOG_INITIAL_TASK_DELAY_MS] = {"log.initial.task.delay.ms", "30000", 0, INT64_MAX,
                                       "Delay before the periodic jobs first run."},
    [SVC_LOG_RETENTION_CHECK_INTERVAL_MS] = {"log.retention.check.interval.ms", "300000", 1,
                                             INT64_MAX, "How often the log-retention job runs."},
    [SVC_LOG_FLUSH_SCHEDULER_INTERVAL_MS] = {
        "log.flush.scheduler.interval.ms", "9223372036854775807", 1, INT64_MAX,
        "How often the log-flusher job checks flush.ms (also flush.ms's last-resort default)."},
    [SVC_LOG_FLUSH_OFFSET_CHECKPOINT_INTERVAL_MS] = {
        "log.flush.offset.checkpoint.interval.ms", "60000", 1, INT64_MAX,
        "How often recovery-point-offset-checkpoint is written."},
    [SVC_LOG_FLUSH_START_OFFSET_CHECKPOINT_INTERVAL_MS] = {
        "log.flush.start.offset.checkpoint.interval.ms", "60000", 1, INT64_MAX,
        "How often log-start-offset-checkpoint is written."},
    [SVC_PRODUCER_ID_EXPIRATION_MS] = {
        "producer.id.expiration.ms", "86400000", 1, INT64_MAX,
        "How long an idempotent producer's sequence state outlives its last batch."},
    [SVC_PRODUCER_ID_EXPIRATION_CHECK_INTERVAL_MS] = {
        "producer.id.expiration.check.interval.ms", "600000", 1, INT64_MAX,
        "How often the producer-expiration job forgets expired producers."},
    [SVC_SNAPSHOT_USAGE_CHECK_INTERVAL_MS] = {
        "snapshot.usage.check.interval.ms", "30000", 1, INT64_MAX,
        "How often the snapshot-usage job measures the snapshots' disk use (also right after one is taken or removed)."},
    [SVC_LOG_CLEANER_ENABLE] = {"log.cleaner.enable", "true", TEXT,
                                "Run the log cleaner threads for compacted topics (true or false)."},
    [SVC_LOG_CLEANER_THREADS] = {"log.cleaner.threads", "1", 0, 64,
                                 "Log cleaner threads; 0 disables them (on-demand runs still work)."},
    [SVC_LOG_CLEANER_DEDUPE_BUFFER_SIZE] = {"log.cleaner.dedupe.buffer.size", "134217728", 1024,
                                            INT64_MAX,
                                            "Bytes of offset map shared by the cleaner threads (24 per key)."},
    [SVC_LOG_CLEANER_IO_BUFFER_LOAD_FACTOR] = {"log.cleaner.io.buffer.load.factor", "0.9", TEXT,
                                               "How full an offset map may get (0 < f <= 1)."},
    [SVC_LOG_CLEANER_IO_BUFFER_SIZE] = {"log.cleaner.io.buffer.size", "524288", 4096, INT64_MAX,
                                        "Cleaner read buffers, in total over the threads."},
    [SVC_LOG_CLEANER_IO_MAX_BYTES_PER_SECOND] = {"log.cleaner.io.max.bytes.per.second",
                                                 "1.7976931348623157E308", TEXT,
                                                 "Throttle for the cleaner's reads and writes."},
    [SVC_LOG_CLEANER_BACKOFF_MS] = {"log.cleaner.backoff.ms", "15000", 0, INT64_MAX,
                                    "How long an idle cleaner thread sleeps before looking again."},
};

const svc_setting_def *svc_setting_def_at(svc_setting_id id)
{
    return (unsigned)id < SVC_COUNT ? &defs[id] : NULL;
}

static int lookup(const char *name)
{
    for (int i = 0; i < SVC_COUNT; i++)
        if (strcmp(defs[i].name, name) == 0)
            return i;
    return -1;
}

typedef struct raw_entry {
    char *name, *value;
    svc_source source;
} raw_entry;

typedef struct raw_list {
    raw_entry *v;
    size_t n, cap;
} raw_list;

static int raw_push(raw_list *l, const char *name, size_t nlen, const char *value, svc_source src)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 32;
        raw_entry *nv = realloc(l->v, cap * sizeof *nv);
        if (!nv)
            return -1;
        l->v = nv;
        l->cap = cap;
    }
    raw_entry *e = &l->v[l->n];
    e->name = strndup(name, nlen);
    e->value = strdup(value);
    e->source = src;
    if (!e->name || !e->value) {
        free(e->name);
        free(e->value);
        return -1;
    }
    l->n++;
    return 0;
}

static void raw_free(raw_list *l)
{
    for (size_t i = 0; i < l->n; i++) {
        free(l->v[i].name);
        free(l->v[i].value);
    }
    free(l->v);
}

static void warn(svc_settings *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void warn(svc_settings *s, const char *fmt, ...)
{
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    size_t old = s->warnings ? strlen(s->warnings) : 0;
    char *w = realloc(s->warnings, old + strlen(line) + 2);
    if (!w)
        return;
    memcpy(w + old, line, strlen(line));
    w[old + strlen(line)] = '\n';
    w[old + strlen(line) + 1] = 0;
    s->warnings = w;
}

/* One entry of the --config file.  The value is trimmed as Kafka's ConfigDef
 * trims every value it parses (String.trim: all bytes up to space). */
static int push_file_entry(void *ctx, const char *key, const char *value, int lineno)
{
    (void)lineno;
    size_t n = strlen(value);
    while (n && (unsigned char)value[n - 1] <= ' ')
        n--;
    while (n && (unsigned char)*value <= ' ') {
        value++;
        n--;
    }
    char *v = strndup(value, n);
    int rc = v ? raw_push(ctx, key, strlen(key), v, SVC_SRC_FILE) : -1;
    free(v);
    if (rc)
        fprintf(stderr, "logstore: out of memory reading the config file\n");
    return rc;
}

static int read_properties(const char *path, raw_list *raw)
{
    char err[512] = "";
    int rc = svc_properties_read(path, push_file_entry, raw, err, sizeof err);
    if (rc && err[0])
        fprintf(stderr, "logstore: %s\n", err);
    return rc ? -1 : 0;
}

static void usage(FILE *out)
{
    fprintf(out, "usage: logstore [--config FILE] [--set name=value]... [--help] [--version]\n"
                 "       logstore --hash-token TOKEN   (prints its sha256, the first field of an auth.tokens.file line)\n"
                 "       logstore --settings-markdown  (prints every setting, its default and meaning, as README's tables)\n"
                 "       logstore --settings-properties  (prints every setting at its default, as deploy/server.properties)\n");
}

static bool is_http_listener(const char *l, size_t n)
{
    return (n >= 7 && !strncmp(l, "http://", 7)) || (n >= 8 && !strncmp(l, "https://", 8));
}

/* listeners is also Kafka's name, for its own protocol
 * (PLAINTEXT://:9092,CONTROLLER://:9093), so the server.properties of a
 * broker, which README says can be reused, would stop the start.  From the
 * file, then, only http:// and https:// entries count: with none the value
 * is ignored (with a warning), with one that one is used.  The environment
 * and --set name logstore's listener alone and get no such leeway.
 * Returns 1 to skip e, 0 to apply it (e->value may have been narrowed), -1
 * on error. */
static int file_listener(svc_settings *s, raw_entry *e)
{
    const char *found = NULL;
    size_t found_len = 0;
    int nhttp = 0, nother = 0;
    for (const char *p = e->value; *p;) {
        size_t n = strcspn(p, ",");
        const char *q = p, *end = p + n;
        while (q < end && isspace((unsigned char)*q))
            q++;
        while (end > q && isspace((unsigned char)end[-1]))
            end--;
        if (is_http_listener(q, (size_t)(end - q))) {
            found = q;
            found_len = (size_t)(end - q);
            nhttp++;
        } else if (end > q) {
            nother++;
        }
        p += n + (p[n] == ',');
    }
    if (nhttp == 0) {
        warn(s, "ignoring 'listeners=%s' from the config file: it names no http:// or https:// "
                "listener (a Kafka broker's listeners are not logstore's); set logstore's with "
                "--set listeners=http://host:port",
             e->value);
        return 1;
    }
    if (nhttp > 1) {
        fprintf(stderr, "logstore: listeners '%s' in the config file names %d http(s):// "
                        "listeners; logstore serves one\n", e->value, nhttp);
        return -1;
    }
    if (nother == 0)
        return 0;
    char *one = strndup(found, found_len);
    if (!one)
        return -1;
    warn(s, "listeners '%s' from the config file: serving %s; the others are not HTTP and are "
            "ignored", e->value, one);
    free(e->value);
    e->value = one;
    return 0;
}

/* Records a broker-level topic default as given, for /v1/configs/defaults.
 * One entry a name: a later source (the environment over the file, a flag
 * over both) replaces the earlier one, which was listed beside it. */
static int record_synonym(svc_settings *s, const raw_entry *e)
{
    char *name = strdup(e->name), *value = strdup(e->value);
    if (!name || !value) {
        free(name);
        free(value);
        return -1;
    }
    for (size_t i = 0; i < s->nsynonyms; i++) {
        if (!strcmp(s->synonyms[i].name, name)) {
            free(s->synonyms[i].name);
            free(s->synonyms[i].value);
            s->synonyms[i] = (svc_synonym){name, value, e->source};
            return 0;
        }
    }
    svc_synonym *ns = realloc(s->synonyms, (s->nsynonyms + 1) * sizeof *ns);
    if (!ns) {
        free(name);
        free(value);
        return -1;
    }
    s->synonyms = ns;
    ns[s->nsynonyms++] = (svc_synonym){name, value, e->source};
    return 0;
}

static int apply(svc_settings *s, raw_list *raw)
{
    for (size_t i = 0; i < raw->n; i++) {
        raw_entry *e = &raw->v[i];
        if (e->source == SVC_SRC_FILE && !strcmp(e->name, defs[SVC_LISTENERS].name)) {
            int skip = file_listener(s, e);
            if (skip < 0)
                return -1;
            if (skip)
                continue;
        }
        /* A name can be both a server setting and a topic-config synonym
         * (log.flush.scheduler.interval.ms): it then feeds both. */
        int id = lookup(e->name);
        if (id >= 0) {
            free(s->text[id]);
            if (!(s->text[id] = strdup(e->value)))
                return -1;
            s->source[id] = e->source;
        }
        eng_errdetail err = {0};
        int rc = eng_config_defaults_apply(&s->topic_defaults, e->name, e->value, &err);
        if (rc < 0) {
            fprintf(stderr, "logstore: %s\n", err.message);
            return -1;
        }
        if (rc == 1 && record_synonym(s, e) != 0)
            return -1;
        if (id >= 0 || rc == 1)
            continue;
        /* Said as the topic configs refuse them, so a reused Kafka
         * server.properties tells what was dropped and why. */
        if (eng_config_is_inapplicable_broker(e->name)) {
            if (e->source == SVC_SRC_FLAG) {
                fprintf(stderr, "logstore: %s has no meaning on a single-node log store\n",
                        e->name);
                return -1;
            }
            warn(s, "ignoring '%s' from the %s: it has no meaning on a single-node log store",
                 e->name, e->source == SVC_SRC_FILE ? "config file" : "environment");
            continue;
        }
        if (e->source == SVC_SRC_FLAG) {
            fprintf(stderr, "logstore: unknown setting '%s' (see --help)\n", e->name);
            return -1;
        }
        warn(s, "ignoring unknown setting '%s' from the %s", e->name,
             e->source == SVC_SRC_FILE ? "config file" : "environment");
    }
    return 0;
}

static int resolve_int(svc_settings *s, svc_setting_id id, int64_t *out)
{
    const char *t = s->text[id];
    char *end;
    errno = 0;
    long long v = strtoll(t, &end, 10);
    if (errno || end == t || *end || v < defs[id].min || v > defs[id].max) {
        fprintf(stderr, "logstore: %s must be an integer in [%lld, %lld], got '%s'\n",
                defs[id].name, (long long)defs[id].min, (long long)defs[id].max, t);
        return -1;
    }
    *out = v;
    return 0;
}

static int resolve_bool(svc_settings *s, svc_setting_id id, bool *out)
{
    const char *t = s->text[id];
    if (!strcasecmp(t, "true") || !strcasecmp(t, "false")) {
        *out = !strcasecmp(t, "true");
        return 0;
    }
    fprintf(stderr, "logstore: %s must be true or false, got '%s'\n", defs[id].name, t);
    return -1;
}

static int resolve_double(svc_settings *s, svc_setting_id id, double min, double max, double *out)
{
    const char *t = s->text[id];
    char *end;
    errno = 0;
    double v = strtod(t, &end);
    if (errno || end == t || *end || !(v >= min && v <= max)) {
        fprintf(stderr, "logstore: %s must be a number in [%g, %g], got '%s'\n", defs[id].name,
                min, max, t);
        return -1;
    }
    *out = v;
    return 0;
}

static int resolve_listener(svc_settings *s)
{
    const char *l = s->text[SVC_LISTENERS];
    const char *p;
    if (strchr(l, ',')) {
        fprintf(stderr, "logstore: listeners takes one http:// or https:// listener, got '%s'\n", l);
        return -1;
    }
    if (!strncmp(l, "http://", 7)) {
        p = l + 7;
        s->tls = false;
    } else if (!strncmp(l, "https://", 8)) {
        p = l + 8;
        s->tls = true;
    } else {
        goto bad;
    }
    const char *host_end, *port_s;
    if (*p == '[') {
        host_end = strchr(p, ']');
        if (!host_end || host_end[1] != ':')
            goto bad;
        port_s = host_end + 2;
        p++;
    } else {
        host_end = strrchr(p, ':');
        if (!host_end)
            goto bad;
        port_s = host_end + 1;
    }
    size_t hl = (size_t)(host_end - p);
    if (hl == 0 || hl >= sizeof s->listen_host)
        goto bad;
    memcpy(s->listen_host, p, hl);
    s->listen_host[hl] = 0;
    char *end;
    long port = strtol(port_s, &end, 10);
    if (end == port_s || (*end && strcmp(end, "/")) || port < 0 || port > 65535)
        goto bad;
    s->listen_port = (uint16_t)port;
    bool files = s->text[SVC_TLS_CERT_FILE][0] && s->text[SVC_TLS_KEY_FILE][0];
    if (s->tls != files) {
        fprintf(stderr, "logstore: %s\n",
                s->tls ? "an https:// listener needs tls.cert.file and tls.key.file"
                       : "tls.cert.file and tls.key.file need an https:// listener (and each other)");
        return -1;
    }
    return 0;
bad:
    fprintf(stderr, "logstore: listeners must look like http://host:port or https://host:port, got '%s'\n", l);
    return -1;
}

static int resolve(svc_settings *s)
{
    if (resolve_listener(s) || resolve_int(s, SVC_HTTP_THREADS, &s->http_threads) ||
        resolve_int(s, SVC_HTTP_MAX_REQUEST_BYTES, &s->max_request_bytes) ||
        resolve_int(s, SVC_HTTP_MAX_INFLIGHT_REQUEST_BYTES, &s->max_inflight_request_bytes) ||
        resolve_int(s, SVC_HTTP_MAX_RECORDS_PER_REQUEST, &s->max_records_per_request) ||
        resolve_int(s, SVC_HTTP_MAX_CONNECTIONS, &s->max_connections) ||
        resolve_int(s, SVC_HTTP_MAX_CONNECTIONS_PER_IP, &s->max_connections_per_ip) ||
        resolve_int(s, SVC_HTTP_IDLE_TIMEOUT_MS, &s->idle_timeout_ms) ||
        resolve_int(s, SVC_HTTP_MAX_WAITERS, &s->max_waiters) ||
        resolve_int(s, SVC_HTTP_MAX_HEADER_BYTES, &s->max_header_bytes) ||
        resolve_int(s, SVC_HTTP_SSE_HEARTBEAT_MS, &s->sse_heartbeat_ms) ||
        resolve_bool(s, SVC_HTTP_ACCESS_LOG, &s->access_log) ||
        resolve_int(s, SVC_HTTP_SLOW_REQUEST_MS, &s->slow_request_ms) ||
        resolve_int(s, SVC_NUM_PARTITIONS, &s->num_partitions) ||
        resolve_int(s, SVC_NUM_RECOVERY_THREADS_PER_DATA_DIR, &s->recovery_threads))
        return -1;
    int64_t threads;
    eng_jobs_opts_default(&s->jobs);
    if (resolve_int(s, SVC_BACKGROUND_THREADS, &threads) ||
        resolve_int(s, SVC_LOG_INITIAL_TASK_DELAY_MS, &s->jobs.initial_delay_ms) ||
        resolve_int(s, SVC_LOG_RETENTION_CHECK_INTERVAL_MS, &s->jobs.retention_check_interval_ms) ||
        resolve_int(s, SVC_LOG_FLUSH_SCHEDULER_INTERVAL_MS, &s->jobs.flush_scheduler_interval_ms) ||
        resolve_int(s, SVC_LOG_FLUSH_OFFSET_CHECKPOINT_INTERVAL_MS,
                    &s->jobs.recovery_checkpoint_interval_ms) ||
        resolve_int(s, SVC_LOG_FLUSH_START_OFFSET_CHECKPOINT_INTERVAL_MS,
                    &s->jobs.start_offset_checkpoint_interval_ms) ||
        resolve_int(s, SVC_PRODUCER_ID_EXPIRATION_MS, &s->jobs.producer_expiration_ms) ||
        resolve_int(s, SVC_PRODUCER_ID_EXPIRATION_CHECK_INTERVAL_MS,
                    &s->jobs.producer_expiration_check_interval_ms) ||
        resolve_int(s, SVC_SNAPSHOT_USAGE_CHECK_INTERVAL_MS,
                    &s->jobs.snapshot_usage_check_interval_ms))
        return -1;
    s->jobs.background_threads = (unsigned)threads;
    eng_cleaner_opts_default(&s->cleaner);
    int64_t cthreads, dedupe, iobuf;
    if (resolve_int(s, SVC_LOG_CLEANER_THREADS, &cthreads) ||
        resolve_int(s, SVC_LOG_CLEANER_DEDUPE_BUFFER_SIZE, &dedupe) ||
        resolve_int(s, SVC_LOG_CLEANER_IO_BUFFER_SIZE, &iobuf) ||
        resolve_int(s, SVC_LOG_CLEANER_BACKOFF_MS, &s->cleaner.backoff_ms) ||
        resolve_bool(s, SVC_LOG_CLEANER_ENABLE, &s->cleaner.enable) ||
        resolve_double(s, SVC_LOG_CLEANER_IO_BUFFER_LOAD_FACTOR, 1e-6, 1.0, &s->cleaner.load_factor) ||
        resolve_double(s, SVC_LOG_CLEANER_IO_MAX_BYTES_PER_SECOND, 1.0, DBL_MAX,
                       &s->cleaner.max_bytes_per_second))
        return -1;
    s->cleaner.threads = (unsigned)cthreads;
    s->cleaner.dedupe_buffer_bytes = (size_t)dedupe;
    s->cleaner.io_buffer_bytes = (size_t)iobuf;
    if (s->cleaner.max_bytes_per_second > 1e300)
        s->cleaner.max_bytes_per_second = 0; /* Kafka's Double.MAX: no throttle */
    s->log_level = svc_log_parse_level(s->text[SVC_LOG_LEVEL]);
    if (s->log_level < 0) {
        fprintf(stderr, "logstore: log.level must be DEBUG, INFO, WARN or ERROR\n");
        return -1;
    }
    /* log.dirs wins; Kafka's log.dir is the fallback when only it is set. */
    s->log_dir = s->text[SVC_LOG_DIRS];
    if (s->source[SVC_LOG_DIRS] == SVC_SRC_DEFAULT && s->text[SVC_LOG_DIR][0])
        s->log_dir = s->text[SVC_LOG_DIR];
    if (strchr(s->log_dir, ',')) {
        fprintf(stderr, "logstore: log.dirs takes one directory, got '%s'\n", s->log_dir);
        return -1;
    }
    /* The default follows a raised http.max.request.bytes rather than stop
     * a server that was started with one before this setting existed. */
    if (s->source[SVC_HTTP_MAX_INFLIGHT_REQUEST_BYTES] == SVC_SRC_DEFAULT &&
        s->max_inflight_request_bytes < s->max_request_bytes) {
        char v[24], *copy;
        snprintf(v, sizeof v, "%lld", (long long)s->max_request_bytes);
        if (!(copy = strdup(v))) {
            fprintf(stderr, "logstore: out of memory\n");
            return -1;
        }
        free(s->text[SVC_HTTP_MAX_INFLIGHT_REQUEST_BYTES]); /* what /v1/configs/defaults shows */
        s->text[SVC_HTTP_MAX_INFLIGHT_REQUEST_BYTES] = copy;
        s->max_inflight_request_bytes = s->max_request_bytes;
    }
    if (s->max_inflight_request_bytes < s->max_request_bytes) {
        fprintf(stderr,
                "logstore: http.max.inflight.request.bytes (%lld) must be at least "
                "http.max.request.bytes (%lld), or the largest request could never be read\n",
                (long long)s->max_inflight_request_bytes, (long long)s->max_request_bytes);
        return -1;
    }
    char cors_err[400];
    if (!api_cors_check_setting(s->text[SVC_HTTP_CORS_ALLOWED_ORIGINS], cors_err, sizeof cors_err)) {
        fprintf(stderr, "logstore: %s\n", cors_err);
        return -1;
    }
    eng_errdetail err = {0};
    if (eng_config_check(&s->topic_defaults.cfg, &err)) {
        fprintf(stderr, "logstore: %s\n", err.message);
        return -1;
    }
    return 0;
}

svc_load_result svc_settings_load(svc_settings *s, int argc, char **argv, char **envp)
{
    memset(s, 0, sizeof *s);
    eng_config_defaults_init(&s->topic_defaults);
    for (int i = 0; i < SVC_COUNT; i++)
        if (!(s->text[i] = strdup(defs[i].default_text)))
            return SVC_LOAD_EXIT_ERROR;
    raw_list file = {0}, env = {0}, flags = {0};
    svc_load_result res = SVC_LOAD_EXIT_ERROR;
    const char *config_path = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            svc_settings_help(stdout);
            res = SVC_LOAD_EXIT_OK;
            goto done;
        } else if (!strcmp(a, "--settings-properties")) {
            svc_settings_properties(stdout);
            res = SVC_LOAD_EXIT_OK;
            goto done;
        } else if (!strcmp(a, "--settings-markdown")) {
            svc_settings_markdown(stdout);
            res = SVC_LOAD_EXIT_OK;
            goto done;
        } else if (!strcmp(a, "--hash-token") && i + 1 < argc) {
            char hex[65];
            api_auth_hash(argv[++i], hex);
            printf("%s\n", hex);
            res = SVC_LOAD_EXIT_OK;
            goto done;
        } else if (!strcmp(a, "--version")) {
            printf("logstore %s\n", LOGSTORE_VERSION);
            res = SVC_LOAD_EXIT_OK;
            goto done;
        } else if (!strcmp(a, "--config") && i + 1 < argc) {
            config_path = argv[++i];
        } else if (!strncmp(a, "--config=", 9)) {
            config_path = a + 9;
        } else if ((!strcmp(a, "--set") && i + 1 < argc) || !strncmp(a, "--set=", 6)) {
            const char *kv = a[5] == '=' ? a + 6 : argv[++i];
            const char *eq = strchr(kv, '=');
            if (!eq || eq == kv) {
                fprintf(stderr, "logstore: --set takes name=value, got '%s'\n", kv);
                goto done;
            }
            if (raw_push(&flags, kv, (size_t)(eq - kv), eq + 1, SVC_SRC_FLAG))
                goto done;
        } else {
            fprintf(stderr, "logstore: unknown argument '%s'\n", a);
            usage(stderr);
            goto done;
        }
    }
    if (config_path && read_properties(config_path, &file))
        goto done;
    for (char **e = envp; e && *e; e++) {
        if (strncmp(*e, "LOGSTORE_", 9) != 0 || strncmp(*e, "LOGSTORE_FAULT=", 15) == 0)
            continue; /* LOGSTORE_FAULT arms test builds' fault points (eng_fault.c) */
        const char *eq = strchr(*e, '=');
        if (!eq)
            continue;
        char name[256];
        size_t n = (size_t)(eq - *e) - 9;
        if (n == 0 || n >= sizeof name)
            continue;
        for (size_t k = 0; k < n; k++) {
            char c = (*e)[9 + k];
            name[k] = c == '_' ? '.' : (char)tolower((unsigned char)c);
        }
        name[n] = 0;
        if (raw_push(&env, name, n, eq + 1, SVC_SRC_ENV))
            goto done;
    }
    if (apply(s, &file) || apply(s, &env) || apply(s, &flags) || resolve(s))
        goto done;
    res = SVC_LOAD_RUN;
done:
    raw_free(&file);
    raw_free(&env);
    raw_free(&flags);
    if (res != SVC_LOAD_RUN)
        svc_settings_free(s);
    return res;
}

void svc_settings_free(svc_settings *s)
{
    for (int i = 0; i < SVC_COUNT; i++) {
        free(s->text[i]);
        s->text[i] = NULL;
    }
    for (size_t i = 0; i < s->nsynonyms; i++) {
        free(s->synonyms[i].name);
        free(s->synonyms[i].value);
    }
    free(s->synonyms);
    s->synonyms = NULL;
    s->nsynonyms = 0;
    free(s->warnings);
    s->warnings = NULL;
}

void svc_settings_help(FILE *out)
{
    usage(out);
    fprintf(out, "\nSettings come from defaults, then --config FILE (Kafka properties), then\n"
                 "LOGSTORE_<NAME> environment variables (LOGSTORE_LOG_RETENTION_HOURS=24), then\n"
                 "--set name=value.\n\nServer settings:\n");
    /* Columns as wide as the longest name, so every line lines up. */
    int w = 0, dw = 0;
    for (int i = 0; i < SVC_COUNT; i++) {
        int n = (int)strlen(defs[i].name), d = (int)strlen(defs[i].default_text);
        w = n > w ? n : w;
        dw = d > dw ? d : dw;
    }
    for (int i = 0; i < SVC_COUNT; i++)
        fprintf(out, "  %-*s default %-*s %s\n", w, defs[i].name, dw,
                defs[i].default_text[0] ? defs[i].default_text : "(unset)", defs[i].doc);
    fprintf(out, "\nTopic-config defaults (broker synonyms; per-topic names in parentheses):\n");
    w = 0;
    for (int i = 0; i < ENG_CFG_COUNT; i++) {
        const eng_config_def *d = eng_config_def_at((eng_config_id)i);
        for (int k = 0; k < 4 && d->synonyms[k].name; k++) {
            int n = (int)(strlen(d->synonyms[k].name) + strlen(d->name) + 3);
            w = n > w ? n : w;
        }
    }
    for (int i = 0; i < ENG_CFG_COUNT; i++) {
        const eng_config_def *d = eng_config_def_at((eng_config_id)i);
        for (int k = 0; k < 4 && d->synonyms[k].name; k++) {
            char dflt[64];
            long long v = strtoll(d->default_text, NULL, 10);
            int64_t f = d->synonyms[k].factor;
            if (f == 1)
                snprintf(dflt, sizeof dflt, "%s", d->default_text);
            else if (v >= 0 && v % f == 0)
                snprintf(dflt, sizeof dflt, "%lld", v / (long long)f);
            else
                snprintf(dflt, sizeof dflt, "(unset)");
            char label[96];
            snprintf(label, sizeof label, "%s (%s)", d->synonyms[k].name, d->name);
            fprintf(out, "  %-*s default %-20s %s\n", w, label, dflt, k ? "" : d->doc);
        }
    }
}

static const char *type_name(eng_config_type t)
{
    static const char *const names[] = {"int", "long", "double", "boolean", "string", "list"};
    return names[t];
}

void svc_settings_markdown(FILE *out)
{
    fprintf(out, "| Server setting | Default | Meaning |\n|---|---|---|\n");
    for (int i = 0; i < SVC_COUNT; i++)
        fprintf(out, "| `%s` | `%s` | %s |\n", defs[i].name,
                defs[i].default_text[0] ? defs[i].default_text : "(unset)", defs[i].doc);
    fprintf(out, "\n| Topic config | Type | Default | Broker-level synonyms | Meaning |\n"
                 "|---|---|---|---|---|\n");
    for (int i = 0; i < ENG_CFG_COUNT; i++) {
        const eng_config_def *d = eng_config_def_at((eng_config_id)i);
        char syn[256] = "";
        size_t used = 0;
        for (int k = 0; k < 4 && d->synonyms[k].name; k++)
            used += (size_t)snprintf(syn + used, sizeof syn - used, "%s`%s`", k ? ", " : "",
                                     d->synonyms[k].name);
        fprintf(out, "| `%s` | %s | `%s` | %s | %s |\n", d->name, type_name(d->type),
                d->default_text, syn, d->doc);
    }
}

static const char *const source_names[] = {"DEFAULT", "CONFIG_FILE", "ENVIRONMENT", "COMMAND_LINE"};

json_t *svc_settings_json(const svc_settings *s)
{
    json_t *arr = json_array();
    for (int i = 0; i < SVC_COUNT; i++)
        json_array_append_new(arr, json_pack("{s:s,s:s,s:s}", "name", defs[i].name, "value",
                                             s->text[i], "source", source_names[s->source[i]]));
    for (size_t i = 0; i < s->nsynonyms; i++)
        json_array_append_new(arr, json_pack("{s:s,s:s,s:s}", "name", s->synonyms[i].name, "value",
                                             s->synonyms[i].value, "source",
                                             source_names[s->synonyms[i].source]));
    return arr;
}

void svc_settings_properties(FILE *out)
{
    fprintf(out, "# logstore server.properties: every setting, commented out at its default.\n"
                 "# Generated by `logstore --settings-properties`; a test keeps this file in step.\n"
                 "# Use it with: logstore --config server.properties\n"
                 "# Precedence: defaults < this file < LOGSTORE_* environment < --set name=value.\n");
    fprintf(out, "\n# ---- server ----\n");
    for (int i = 0; i < SVC_COUNT; i++)
        fprintf(out, "\n# %s\n#%s=%s\n", defs[i].doc, defs[i].name, defs[i].default_text);
    fprintf(out, "\n# ---- topic defaults (Kafka's broker-level names; a topic may override\n"
                 "# each with the name in parentheses) ----\n");
    for (int i = 0; i < ENG_CFG_COUNT; i++) {
        const eng_config_def *d = eng_config_def_at((eng_config_id)i);
        fprintf(out, "\n# %s (topic config: %s)\n", d->doc, d->name);
        for (int k = 0; k < 4 && d->synonyms[k].name; k++) {
            long long v = strtoll(d->default_text, NULL, 10);
            int64_t f = d->synonyms[k].factor;
            if (f == 1)
                fprintf(out, "#%s=%s\n", d->synonyms[k].name, d->default_text);
            else if (v >= 0 && v % f == 0)
                fprintf(out, "#%s=%lld\n", d->synonyms[k].name, v / (long long)f);
        }
    }
}
