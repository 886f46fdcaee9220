/*
 * harness.h - drives the real logstore binary for integration tests.
 *
 * ls_start forks build/san/logstore (or $TEST_LOGSTORE_BINARY) on a free
 * loopback port with a fresh data dir, reads the port it chose from its log,
 * and waits for /health/ready.  Requests go through libcurl; JSON answers are
 * parsed with jansson.  Server logs land in <dir>.log for post-mortems.
 */
#ifndef TEST_HARNESS_H
#define TEST_HARNESS_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

typedef struct ls_server {
    pid_t pid;
    int port;
    char dir[256];
    char log_path[300];
    char base_url[64];
    bool own_dir;
    /* Set by ls_start_opts and kept by ls_restart (empty = the defaults). */
    char listener[64];     /* default http://127.0.0.1:0 */
    char ca_file[300];     /* https: the certificate curl trusts */
    char config_file[300]; /* passed as --config */
    long max_open_files;   /* > 0: the server's RLIMIT_NOFILE, soft and hard */
} ls_server;

typedef struct ls_resp {
    long status;
    char *body;
    size_t len;
    char *headers; /* raw header block */
    json_t *json;  /* parsed body when it is JSON, else NULL */
} ls_resp;

/* Starts a server on a new temp dir; extra: NULL-terminated "name=value"
 * settings passed with --set.  Returns 0 or -1. */
int ls_start(ls_server *s, const char *const *extra);

/* Starts a server on an existing dir (restart tests). wait_ready=false
 * returns once the port is known.  Uses the plain http listener: options
 * given to ls_start_opts are dropped (ls_restart keeps them). */
int ls_start_dir(ls_server *s, const char *dir, const char *const *extra, bool wait_ready);

/* SIGTERM and wait; returns the exit status (or -1). */
int ls_stop(ls_server *s);

/* The same with another signal (SIGINT, SIGHUP). */
int ls_stop_signal(ls_server *s, int sig);

/* SIGKILL and wait. */
void ls_kill9(ls_server *s);

/* Removes the data dir (when ls_start made it) and the log. */
void ls_cleanup(ls_server *s);

/* One request. body may be NULL. extra_headers: NULL-terminated "Name: v". */
int ls_http(ls_server *s, const char *method, const char *path, const char *content_type,
            const void *body, size_t len, const char *const *extra_headers, ls_resp *out);

int ls_get(ls_server *s, const char *path, ls_resp *out);
int ls_post(ls_server *s, const char *path, const char *json_text, ls_resp *out);
int ls_delete(ls_server *s, const char *path, ls_resp *out);

/* The value of the sample `name` (with its labels, as printed) in GET
 * /metrics, or `absent` when there is none; -1 when the request fails. */
long long ls_metric(ls_server *s, const char *name, long long absent);

/* Creates a topic; asserts nothing, returns the status. */
long ls_create_topic(ls_server *s, const char *name, int partitions, const char *configs_json);

void ls_resp_free(ls_resp *r);

/* Value of a response header (static buffer), or NULL. */
const char *ls_header(const ls_resp *r, const char *name);

/* json_integer_value of r->json[key] (or of a nested "a.b" path). */
long long ls_jint(const ls_resp *r, const char *path);
const char *ls_jstr(const ls_resp *r, const char *path);

/* Total size of every regular file under dir (to assert "nothing changed"). */
long long ls_dir_bytes(const char *dir);

/* A listing "name size" of every file under dir, sorted; malloc'd. */
char *ls_dir_listing(const char *dir);

/* ---- helpers added for the API suites (test_api_*.c) ---------------------- */

/* ls_http with "Content-Type: application/json"; json_text may be NULL. */
int ls_send_json(ls_server *s, const char *method, const char *path, const char *json_text,
                 ls_resp *out);

/* The JSON value at a dotted path ("records.0.key"), borrowed; NULL if absent. */
json_t *ls_jget(const ls_resp *r, const char *path);

/* Checks that r is a DESIGN §6 error: the given status (never 2xx), a JSON
 * object with exactly error_code, message, kafka_error, kafka_error_code,
 * retriable, details, request_id (right types), error_code == code (unless
 * code is NULL) and request_id equal to the X-Request-Id header.  Returns 0,
 * or -1 after printing what differs (and the body) on stderr. */
int ls_check_error(const ls_resp *r, long status, const char *code);

/* Sends method path (a JSON body when json is not NULL) and checks the answer
 * with ls_check_error, printing the request when it fails.  0 when it
 * failed as expected. */
int ls_expect_error(ls_server *s, const char *method, const char *path, const char *json,
                    long status, const char *code);

/* Appends one JSON body to topic-partition; returns the HTTP status (-1 when
 * no answer came), printing the body of anything but 200. */
long ls_append_json(ls_server *s, const char *topic, int part, const char *body);

/* 0 when dir's listing (ls_dir_listing) still equals before, else 1 with
 * both printed; frees before.  The top-level checkpoint files are left out:
 * background jobs rewrite them whatever a request did. */
int ls_dir_same(const char *dir, char *before);

/* Status of GET /health/live, 0 when the server does not answer. */
long ls_live_status(ls_server *s);

/* log_end_offset of topic-partition from GET .../partitions/{p}, or -1. */
long long ls_log_end_offset(ls_server *s, const char *topic, int partition);

/* Size of a file, or -1. */
long long ls_file_size(const char *path);

/* A whole file, malloc'd (NUL-terminated for convenience), or NULL. */
void *ls_read_file(const char *path, size_t *len);

/* Restarts a stopped (or killed) server on its own data dir and waits until
 * ready.  The old log is moved to <log>.prev first: ls_start_dir reads the
 * port from the last "listening on" line of <dir>.log, which on a restart
 * still holds the previous run's port until the new server logs its own, so
 * a slow start (a loaded machine) made it wait on the old, dead port. */
int ls_restart(ls_server *s, const char *const *extra);

/* ---- helpers added for the configs, auth and TLS suites -------------------- */

/* The server binary: $TEST_LOGSTORE_BINARY or build/san/logstore. */
const char *ls_binary(void);

typedef struct ls_opts {
    const char *const *extra; /* NULL-terminated "name=value", passed with --set */
    const char *listener;     /* NULL = "http://127.0.0.1:0"; e.g. "https://127.0.0.1:0" */
    const char *ca_file;      /* with an https listener: the PEM curl trusts; requests
                               * then go to https://localhost:PORT (resolved to 127.0.0.1) */
    const char *config_file;  /* passed as --config FILE */
    long max_open_files;      /* > 0: the server may open this many files (soft and hard) */
} ls_opts;

/* ls_start with a listener, a CA and a --config file; the options are kept
 * in s, so ls_restart starts the same way.  Waits until ready.  0 or -1. */
int ls_start_opts(ls_server *s, const ls_opts *o);

/* Writes text to path, replacing it.  0 or -1. */
int ls_write_file(const char *path, const char *text);

/* Runs a shell command line; returns its exit status (-1 if it did not
 * exit), its output (stdout) in out, NUL-terminated. */
int ls_run_cmd(const char *cmd, char *out, size_t len);

/* Runs the server binary on a scratch data dir and an http:// listener on a
 * free port, with settings (more `--set k=v`, which win over those two) that
 * must stop its start, and stdin closed.  Returns its exit status (124: still
 * running after 20 s), its output (both streams) in out; -1 if it could not
 * be run or a sanitizer reported on the way out (a refused start must still
 * free what it read), printed to stderr. */
int ls_run_refused(const char *settings, char *out, size_t len);

/* A path for name in a scratch dir made on first use for this process
 * (tokens, certificates, refused data dirs); ls_scratch_remove deletes it. */
void ls_scratch_path(char *out, size_t len, const char *name);
void ls_scratch_remove(void);

/* True if the file at path holds needle (a log line, a token...). */
bool ls_file_contains(const char *path, const char *needle);

/* How many times needle stands in the file at path (0 if unreadable). */
int ls_file_count(const char *path, const char *needle);

/* The first object of array arr whose string member key equals value
 * (borrowed), or NULL: ls_jfind(configs, "name", "retention.ms"). */
json_t *ls_jfind(json_t *arr, const char *key, const char *value);

/* An integer field of GET /v1/topics/{topic}/partitions/{p} (asserting
 * nothing), or -1 when the request fails or answers another status. */
long long ls_partition_field(ls_server *s, const char *topic, int p, const char *field);

#endif
