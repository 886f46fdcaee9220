/*
 * svc_settings.h - server settings: one table, three sources.
 *
 * Sources, later ones winning (DESIGN §5): table defaults, a Kafka-style
 * properties file (--config FILE), LOGSTORE_<NAME> environment variables
 * (dots as underscores, upper case: LOGSTORE_LOG_RETENTION_HOURS), then
 * --set name=value flags.  Names are logstore's own server settings (the
 * table in svc_settings.c) or the broker-level synonyms of topic configs
 * (log.segment.bytes, log.retention.hours, ...), which become the
 * STATIC_BROKER_CONFIG defaults of every topic.
 */
#ifndef SVC_SETTINGS_H
#define SVC_SETTINGS_H

#include "eng_config.h"
#include "eng_cleaner.h"
#include "eng_manager.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef enum { SVC_SRC_DEFAULT, SVC_SRC_FILE, SVC_SRC_ENV, SVC_SRC_FLAG } svc_source;

typedef enum {
    SVC_LISTENERS,
    SVC_LOG_DIRS,
    SVC_LOG_DIR,
    SVC_HTTP_THREADS,
    SVC_HTTP_MAX_REQUEST_BYTES,
    SVC_HTTP_MAX_INFLIGHT_REQUEST_BYTES,
    SVC_HTTP_MAX_RECORDS_PER_REQUEST,
    SVC_HTTP_MAX_CONNECTIONS,
    SVC_HTTP_MAX_CONNECTIONS_PER_IP,
    SVC_HTTP_IDLE_TIMEOUT_MS,
    SVC_HTTP_MAX_HEADER_BYTES,
    SVC_AUTH_TOKENS_FILE,
    SVC_TLS_CERT_FILE,
    SVC_TLS_KEY_FILE,
    SVC_HTTP_MAX_WAITERS,
    SVC_HTTP_SSE_HEARTBEAT_MS,
    SVC_HTTP_CORS_ALLOWED_ORIGINS,
    SVC_HTTP_ACCESS_LOG,
    SVC_HTTP_SLOW_REQUEST_MS,
    SVC_NUM_PARTITIONS,
    SVC_LOG_LEVEL,
    SVC_BACKGROUND_THREADS,
    SVC_NUM_RECOVERY_THREADS_PER_DATA_DIR,
    SVC_LOG_INITIAL_TASK_DELAY_MS,
    SVC_LOG_RETENTION_CHECK_INTERVAL_MS,
    SVC_LOG_FLUSH_SCHEDULER_INTERVAL_MS,
    SVC_LOG_FLUSH_OFFSET_CHECKPOINT_INTERVAL_MS,
    SVC_LOG_FLUSH_START_OFFSET_CHECKPOINT_INTERVAL_MS,
    SVC_PRODUCER_ID_EXPIRATION_MS,
    SVC_PRODUCER_ID_EXPIRATION_CHECK_INTERVAL_MS,
    SVC_SNAPSHOT_USAGE_CHECK_INTERVAL_MS,
    SVC_LOG_CLEANER_ENABLE,
    SVC_LOG_CLEANER_THREADS,
    SVC_LOG_CLEANER_DEDUPE_BUFFER_SIZE,
    SVC_LOG_CLEANER_IO_BUFFER_LOAD_FACTOR,
    SVC_LOG_CLEANER_IO_BUFFER_SIZE,
    SVC_LOG_CLEANER_IO_MAX_BYTES_PER_SECOND,
    SVC_LOG_CLEANER_BACKOFF_MS,
    SVC_COUNT
} svc_setting_id;

typedef struct svc_setting_def {
    const char *name;
    const char *default_text;
    int64_t min, max; /* for integers; min > max means "text" */
    const char *doc;
} svc_setting_def;

/* A broker-level synonym of a topic config, as the user set it. */
typedef struct svc_synonym {
    char *name;
    char *value;
    svc_source source;
} svc_synonym;

typedef struct svc_settings {
    char *text[SVC_COUNT]; /* owned; the winning text of each setting */
    svc_source source[SVC_COUNT];
    svc_synonym *synonyms;
    size_t nsynonyms;
    char *warnings;        /* owned; lines to log once logging is up */

    /* Resolved values. */
    const char *log_dir;
    char listen_host[256];
    uint16_t listen_port;
    int64_t http_threads;
    int64_t max_request_bytes;
    int64_t max_inflight_request_bytes;
    int64_t max_records_per_request;
    int64_t max_connections;
    int64_t max_connections_per_ip;
    int64_t idle_timeout_ms;
    int64_t max_waiters;
    int64_t max_header_bytes;
    bool tls;             /* listeners is https:// */
    int64_t sse_heartbeat_ms;
    bool access_log;         /* http.access.log */
    int64_t slow_request_ms; /* http.slow.request.ms; 0 = off */
    int64_t num_partitions;
    int64_t recovery_threads; /* num.recovery.threads.per.data.dir */
    int log_level;
    eng_config_defaults topic_defaults;
    eng_jobs_opts jobs;
    eng_cleaner_opts cleaner;
} svc_settings;

typedef enum { SVC_LOAD_RUN, SVC_LOAD_EXIT_OK, SVC_LOAD_EXIT_ERROR } svc_load_result;

/* Parses argv (--config, --set, --help, --version), the environment and the
 * file.  On SVC_LOAD_EXIT_* the caller exits (help and errors are printed). */
svc_load_result svc_settings_load(svc_settings *s, int argc, char **argv, char **envp);

void svc_settings_free(svc_settings *s);

/* Every server setting and every broker-level synonym that was set, as
 * [{"name","value","source"}] (sources: DEFAULT, CONFIG_FILE, ENVIRONMENT,
 * COMMAND_LINE).  A new reference. */
struct json_t *svc_settings_json(const svc_settings *s);

/* Writes --help: every server setting and topic-config synonym with its
 * default and a line of doc. */
void svc_settings_help(FILE *out);

/* Writes a server.properties with every setting commented out at its
 * default (deploy/server.properties is this output, checked by a test). */
void svc_settings_properties(FILE *out);

/* Writes the same tables as Markdown (README's configuration reference is
 * this output, checked by a test). */
void svc_settings_markdown(FILE *out);

/* The definition of id (static). */
const svc_setting_def *svc_setting_def_at(svc_setting_id id);

#endif
