/*
 * main.c - wires settings, logging, the engine and the HTTP server.
 *
 * Order matters for operators: settings are checked first (bad ones exit 2
 * before anything touches the disk); the data dir lock is taken before the
 * port opens (a second process on the same dir exits at once); the port opens
 * before the logs load, so /health/ready can say "loading" with progress;
 * the stop on SIGTERM/SIGINT/SIGHUP drains requests (new ones get 503
 * shutting_down), then closes the engine, which writes the clean-shutdown
 * marker last.
 *
 * Signals are blocked in every thread and taken synchronously with sigwait
 * here, so no handler runs in an arbitrary thread.
 */
#include "api_ctx.h"
#include "api_auth.h"
#include "api_json_arena.h"
#include "api_lane.h"
#include "api_server.h"
#include "api_wait.h"
#include "eng_fs.h"
#include "eng_logger.h"
#include "eng_manager.h"
#include "svc_log.h"
#include "svc_meta.h"
#include "svc_settings.h"
#include "svc_tls.h"
#include "svc_version.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

/* Every segment keeps its three files open, as in Kafka, so the default
 * soft limit of 1024 descriptors runs out at a few hundred partitions; the
 * hard limit is what the operator allowed.  Raising the soft limit to it is
 * what nginx's worker_rlimit_nofile and systemd's services do. */
static void raise_open_files_limit(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
        return;
    if (rl.rlim_cur < rl.rlim_max) {
        rlim_t was = rl.rlim_cur;
        rl.rlim_cur = rl.rlim_max;
        if (setrlimit(RLIMIT_NOFILE, &rl) < 0) {
            ENG_WARN("cannot raise the open-files limit from %llu: %s", (unsigned long long)was,
                     strerror(errno));
            return;
        }
    }
    if (rl.rlim_cur == RLIM_INFINITY)
        ENG_INFO("open-files limit: unlimited");
    else
        ENG_INFO("open-files limit: %llu (a segment holds 1, an active one 3, a connection 1)",
                 (unsigned long long)rl.rlim_cur);
}

/* The engine's high-watermark hook: wakes parked readers of that partition. */
static void notify_hw(eng_partition *p, int64_t hw, void *vctx)
{
    api_ctx *ctx = vctx;
    api_waiters_notify(ctx->waiters, p, hw);
}

/* Reads the tokens file and the TLS key pair named by the settings. */
static int load_security(const svc_settings *s, api_ctx *ctx, char **cert, char **key)
{
    size_t len;
    const char *tokens = s->text[SVC_AUTH_TOKENS_FILE];
    if (!tokens[0]) {
        ENG_WARN("authentication is off: auth.tokens.file is not set, so anyone who can reach "
                 "the port can read, write and administer");
    } else {
        char *text, err[256];
        int rc = eng_fs_read_file(tokens, 1u << 20, &text, &len);
        if (rc) {
            ENG_ERROR("cannot read auth.tokens.file %s: %s", tokens, eng_strerror(rc));
            return -1;
        }
        rc = api_auth_load(text, len, &ctx->auth, err, sizeof err);
        free(text);
        if (rc) {
            ENG_ERROR("%s: %s", tokens, err);
            return -1;
        }
        ENG_INFO("authentication is on: %zu tokens from %s", api_auth_count(ctx->auth), tokens);
        /* Whoever can write the file can add a token of their own with any
         * role; a warning, not a refusal, since a shared group may be meant. */
        struct stat sb;
        if (stat(tokens, &sb) != 0)
            ENG_WARN("cannot check who may write auth.tokens.file %s: %s", tokens, strerror(errno));
        else if (sb.st_mode & (S_IWGRP | S_IWOTH))
            ENG_WARN("auth.tokens.file %s is writable by other users (%s): whoever can write it "
                     "can give themselves any role; chmod go-w it",
                     tokens, sb.st_mode & S_IWOTH ? "everyone" : "its group");
    }
    if (s->tls) {
        size_t klen = 0;
        int rc = eng_fs_read_file(s->text[SVC_TLS_CERT_FILE], 1u << 20, cert, &len);
        if (rc) {
            ENG_ERROR("cannot read tls.cert.file %s: %s", s->text[SVC_TLS_CERT_FILE],
                      eng_strerror(rc));
            return -1;
        }
        rc = eng_fs_read_file(s->text[SVC_TLS_KEY_FILE], 1u << 20, key, &klen);
        if (rc) {
            ENG_ERROR("cannot read tls.key.file %s: %s", s->text[SVC_TLS_KEY_FILE],
                      eng_strerror(rc));
            return -1;
        }
        char msg[512];
        if (svc_tls_check_pair(*cert, len, *key, klen, msg, sizeof msg)) {
            ENG_ERROR("%s (tls.cert.file %s, tls.key.file %s)", msg, s->text[SVC_TLS_CERT_FILE],
                      s->text[SVC_TLS_KEY_FILE]);
            return -1;
        }
    }
    return 0;
}

/* The stop signal, waited for on its own thread from before the logs load:
 * waited for only once the server was ready, a SIGTERM during a long
 * recovery was held until the load ended, and an orchestrator's grace
 * period ran out into a SIGKILL (and the same recovery at the next start). */
typedef struct stop_watch {
    sigset_t sigs;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int sig;          /* 0 until a stop signal came */
    eng_manager *m;   /* told a stop is coming (eng_manager_request_stop), once set */
} stop_watch;

static void *stop_watch_main(void *arg)
{
    stop_watch *w = arg;
    int sig = 0;
    while (sigwait(&w->sigs, &sig) != 0 || sig == 0)
        ;
    pthread_mutex_lock(&w->mu);
    w->sig = sig;
    if (w->m)
        eng_manager_request_stop(w->m);
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
    return NULL;
}

/* m may be NULL: a manager about to be freed is taken back first, so that a
 * signal arriving after it is gone does not reach freed memory. */
static void stop_watch_manager(stop_watch *w, eng_manager *m)
{
    pthread_mutex_lock(&w->mu);
    w->m = m;
    if (w->sig && m)
        eng_manager_request_stop(m);
    pthread_mutex_unlock(&w->mu);
}

/* The stop signal received so far, 0 if none. */
static int stop_watch_signal(stop_watch *w)
{
    pthread_mutex_lock(&w->mu);
    int sig = w->sig;
    pthread_mutex_unlock(&w->mu);
    return sig;
}

static int stop_watch_wait(stop_watch *w)
{
    pthread_mutex_lock(&w->mu);
    while (!w->sig)
        pthread_cond_wait(&w->cv, &w->mu);
    int sig = w->sig;
    pthread_mutex_unlock(&w->mu);
    return sig;
}

static const char *signal_name(int sig)
{
    return sig == SIGINT ? "SIGINT" : sig == SIGHUP ? "SIGHUP" : "SIGTERM";
}

int main(int argc, char **argv)
{
    api_json_arena_install(); /* before any JSON value exists */
    svc_settings s;
    svc_load_result lr = svc_settings_load(&s, argc, argv, environ);
    if (lr != SVC_LOAD_RUN)
        return lr == SVC_LOAD_EXIT_OK ? 0 : 2;
    svc_log_install((eng_log_level)s.log_level);
    if (s.warnings) {
        for (char *line = strtok(s.warnings, "\n"); line; line = strtok(NULL, "\n"))
            ENG_WARN("%s", line);
    }
    /* Said first, before a long load, to whoever is watching the start. */
    if (s.access_log && s.log_level > ENG_LOG_INFO)
        ENG_WARN("http.access.log is on but log.level %s drops its INFO lines: it is off",
                 s.text[SVC_LOG_LEVEL]);

    raise_open_files_limit();
    /* segment.jitter.ms draws from random(): unseeded, every start drew the
     * same jitters in the same order. */
    struct timespec seed;
    clock_gettime(CLOCK_REALTIME, &seed);
    srandom((unsigned)seed.tv_nsec ^ (unsigned)seed.tv_sec ^ (unsigned)getpid());

    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGTERM);
    sigaddset(&sigs, SIGINT);
    /* A closed terminal (make run in a shell that goes away) stops the
     * server cleanly instead of killing it, as the JVM does for Kafka. */
    sigaddset(&sigs, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);
    signal(SIGPIPE, SIG_IGN);
    static stop_watch watch = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};
    watch.sigs = sigs;
    pthread_t watcher;
    if (pthread_create(&watcher, NULL, stop_watch_main, &watch) != 0) {
        ENG_ERROR("cannot start the signal thread");
        svc_settings_free(&s);
        return 1;
    }
    pthread_detach(watcher);

    static api_ctx ctx;
    api_ctx_init(&ctx, LOGSTORE_VERSION);
    ctx.started_ms = eng_now_ms();
    ctx.limits.max_request_bytes = (size_t)s.max_request_bytes;
    ctx.limits.max_inflight_request_bytes = (size_t)s.max_inflight_request_bytes;
    ctx.limits.max_records_per_request = (size_t)s.max_records_per_request;
    ctx.limits.default_partitions = (int32_t)s.num_partitions;
    ctx.heartbeat_ms = s.sse_heartbeat_ms;
    ctx.cors_origins = s.text[SVC_HTTP_CORS_ALLOWED_ORIGINS];
    ctx.server_settings = svc_settings_json(&s);
    int rc = api_waiters_start(2, (size_t)s.max_waiters, &ctx.waiters);
    if (rc) {
        ENG_ERROR("cannot start the parked-reader threads: %s", eng_strerror(rc));
        svc_settings_free(&s);
        return 1;
    }
    /* One thread a kind: more would only share the same disk more ways. */
    if ((rc = api_lanes_start(ctx.lanes, 1, 64))) {
        ENG_ERROR("cannot start the maintenance threads: %s", eng_strerror(rc));
        api_waiters_free(ctx.waiters);
        svc_settings_free(&s);
        return 1;
    }

    /* Every error return below frees cert and key; free(NULL) covers the
     * unread ones. */
    char *cert = NULL, *key = NULL;
    if (load_security(&s, &ctx, &cert, &key)) {
        free(cert);
        free(key);
        api_waiters_free(ctx.waiters);
        api_lanes_free(ctx.lanes);
        json_decref(ctx.server_settings);
        svc_settings_free(&s);
        return 2;
    }

    eng_manager_opts mo = {.log_dir = s.log_dir, .defaults = s.topic_defaults,
                           .codec = svc_meta_codec(), .jobs = s.jobs,
                           .recovery_threads = (unsigned)s.recovery_threads, .cleaner = &s.cleaner,
                           .on_hw = notify_hw, .on_hw_ctx = &ctx};
    eng_manager *m = NULL;
    eng_errdetail err = {0};
    rc = eng_manager_new(&mo, &m, &err);
    if (rc) {
        ENG_ERROR("%s", err.message[0] ? err.message : eng_strerror(rc));
        free(cert);
        free(key);
        svc_settings_free(&s);
        return 1;
    }

    api_server *srv = NULL;
    api_server_opts so = {.host = s.listen_host, .port = s.listen_port,
                          .threads = (unsigned)s.http_threads,
                          .connection_limit = (unsigned)s.max_connections,
                          .per_ip_connection_limit = (unsigned)s.max_connections_per_ip,
                          .idle_timeout_s = (unsigned)((s.idle_timeout_ms + 999) / 1000),
                          .memory_limit = (size_t)s.max_header_bytes,
                          .max_buffered = (size_t)s.max_inflight_request_bytes,
                          .tls_cert_pem = cert, .tls_key_pem = key,
                          .access_log = s.access_log && s.log_level <= ENG_LOG_INFO,
                          .slow_request_ms = s.slow_request_ms};
    char msg[256];
    if ((rc = api_server_start(&ctx, &so, &srv, msg, sizeof msg))) {
        ENG_ERROR("%s", msg);
        eng_manager_abandon(m);
        free(cert);
        free(key);
        svc_settings_free(&s);
        return 1;
    }
    bool v6 = strchr(s.listen_host, ':') != NULL; /* written as a URL writes it: [::] */
    ENG_INFO("logstore %s listening on %s://%s%s%s:%u (data in %s)", LOGSTORE_VERSION,
             s.tls ? "https" : "http", v6 ? "[" : "", s.listen_host, v6 ? "]" : "",
             api_server_port(srv), s.log_dir);

    stop_watch_manager(&watch, m);
    if ((rc = eng_manager_load(m, &err)) == ENG_ESHUTDOWN) {
        ENG_INFO("received %s while loading; stopped (the next start loads again)",
                 signal_name(stop_watch_signal(&watch)));
        atomic_store(&ctx.state, API_STOPPING);
        api_server_stop(srv);
        stop_watch_manager(&watch, NULL);
        eng_manager_abandon(m);
        api_waiters_free(ctx.waiters);
        api_lanes_free(ctx.lanes);
        json_decref(ctx.server_settings);
        api_auth_free(ctx.auth);
        free(cert);
        free(key);
        svc_settings_free(&s);
        return 0;
    }
    if (rc) {
        ENG_ERROR("%s", err.message[0] ? err.message : eng_strerror(rc));
        atomic_store(&ctx.state, API_FAILED);
        api_server_stop(srv);
        stop_watch_manager(&watch, NULL);
        eng_manager_abandon(m);
        free(cert);
        free(key);
        svc_settings_free(&s);
        return 1;
    }
    if ((rc = eng_manager_start_jobs(m)) || (rc = eng_manager_start_cleaner(m))) {
        ENG_ERROR("cannot start background jobs or the log cleaner: %s", eng_strerror(rc));
        atomic_store(&ctx.state, API_FAILED);
        api_server_stop(srv);
        stop_watch_manager(&watch, NULL);
        eng_manager_close(m);
        free(cert);
        free(key);
        svc_settings_free(&s);
        return 1;
    }
    atomic_store(&ctx.mgr, m);
    atomic_store(&ctx.state, API_READY);
    ENG_INFO("ready");

    int sig = stop_watch_wait(&watch);
    ENG_INFO("received %s; stopping", signal_name(sig));
    atomic_store(&ctx.state, API_STOPPING);
    api_server_stop(srv);
    atomic_store(&ctx.mgr, NULL);
    stop_watch_manager(&watch, NULL);
    bool clean = eng_manager_close(m);
    api_waiters_free(ctx.waiters);
    api_lanes_free(ctx.lanes);
    json_decref(ctx.server_settings);
    api_auth_free(ctx.auth);
    free(cert);
    free(key);
    if (clean)
        ENG_INFO("stopped cleanly");
    else
        ENG_WARN("stopped without the clean-shutdown marker (see the errors above); the next start "
                 "recovers what follows the last recovery point");
    svc_settings_free(&s);
    return 0;
}
