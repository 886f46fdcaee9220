/*
 * test_admin_under_load.c - the HTTP side of test_partition_stress.c: every
 * kind of request on one partition at once, then the topic's delete while
 * they go on.  Written for ThreadSanitizer (make tsan runs the server built
 * with it, whose reports fail the run); the asserts hold under any build.
 *
 * One partition of a compact,delete topic with flush.messages=1 (every
 * append waits for a group commit) on a server whose cleaner backs off
 * 10 ms and whose jobs run every 50 ms, under:
 *   - two appenders; a long-poller parked at the high watermark; an NDJSON
 *     streamer; a roller;
 *   - a maintainer: retention:run, compaction:run, records:delete, and the
 *     same across all topics;
 *   - a lister: the partition, its segments, the first and last segment's
 *     index, time index and batches, producers, offsets, /v1/cleaner,
 *     /v1/jobs, /v1/log-dirs, /metrics; a config writer.
 * After 1.5 s the topic is deleted; 300 ms later everything stops.  No
 * answer is a 5xx or a dropped connection, the parked reads come back, and
 * the server stops cleanly.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "harness.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define RUN_MS 1500
#define AFTER_DELETE_MS 300
#define P "/v1/topics/busy/partitions/0"

enum { APPEND1, APPEND2, POLL, STREAM, ROLL, MAINTAIN, LIST, CONFIG, ROLES };

static ls_server g_srv;
static ls_server *S = &g_srv;

static const char *const settings[] = {
    "log.initial.task.delay.ms=0",
    "log.retention.check.interval.ms=50",
    "log.flush.scheduler.interval.ms=50",
    "log.flush.offset.checkpoint.interval.ms=50",
    "log.flush.start.offset.checkpoint.interval.ms=50",
    "log.cleaner.threads=1",
    "log.cleaner.backoff.ms=10",
    NULL,
};

typedef struct shared {
    _Atomic bool stop;
    _Atomic int bad;
    _Atomic long ops[ROLES];
    pthread_mutex_t mu;
    char first_bad[256];
} shared;

typedef struct worker {
    shared *sh;
    int role;
} worker;

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* A request whose answer may be anything but a server error or a dropped
 * connection: the topic may be gone (404), busy (409), or the offset
 * moved (416) under it. */
static void call(shared *sh, const char *method, const char *path, const char *body,
                 const char *accept)
{
    ls_resp r;
    const char *hdr[] = {accept, NULL};
    int rc = ls_http(S, method, path, body ? "application/json" : NULL, body,
                     body ? strlen(body) : 0, accept ? hdr : NULL, &r);
    long st = rc ? 0 : r.status;
    if (rc || st >= 500 || st == 400) {
        pthread_mutex_lock(&sh->mu);
        if (atomic_fetch_add(&sh->bad, 1) == 0)
            snprintf(sh->first_bad, sizeof sh->first_bad, "%s %s: %ld %.120s", method, path, st,
                     rc ? "(no answer)" : r.body ? r.body : "");
        pthread_mutex_unlock(&sh->mu);
    }
    if (!rc)
        ls_resp_free(&r);
}

static void list_all(shared *sh)
{
    static const char *const paths[] = {
        P, P "/segments", P "/producers", P "/offsets?spec=max_timestamp",
        P "/offsets?timestamp=0", "/v1/cleaner", "/v1/jobs", "/v1/log-dirs", "/metrics",
    };
    for (size_t i = 0; i < sizeof paths / sizeof *paths; i++)
        call(sh, "GET", paths[i], NULL, NULL);
    /* The first and the active segment's files, by base offset. */
    long long lso = ls_partition_field(S, "busy", 0, "log_start_offset");
    long long hw = ls_partition_field(S, "busy", 0, "high_watermark");
    long long bases[2] = {lso < 0 ? 0 : lso, hw < 0 ? 0 : hw};
    static const char *const files[] = {"index", "timeindex", "batches"};
    for (int b = 0; b < 2; b++) {
        ls_resp r;
        char path[160];
        /* The segment holding that offset: the last base at or below it. */
        if (ls_get(S, P "/segments", &r) || r.status != 200) {
            if (r.body)
                ls_resp_free(&r);
            continue;
        }
        long long base = 0;
        for (const char *q = r.body; (q = strstr(q, "\"base_offset\":")); q++) {
            long long v = atoll(q + strlen("\"base_offset\":"));
            if (v <= bases[b])
                base = v;
        }
        ls_resp_free(&r);
        for (int f = 0; f < 3; f++) {
            snprintf(path, sizeof path, P "/segments/%lld/%s", base, files[f]);
            call(sh, "GET", path, NULL, NULL);
        }
    }
}

static void *worker_main(void *arg)
{
    worker *w = arg;
    shared *sh = w->sh;
    unsigned seed = (unsigned)w->role + 1;
    char body[256], path[200];
    while (!atomic_load(&sh->stop)) {
        switch (w->role) {
        case APPEND1:
        case APPEND2:
            snprintf(body, sizeof body,
                     "{\"records\":[{\"key\":\"k%u\",\"value\":\"v%u\"},{\"key\":\"k%u\",\"value\":\"w\"}]}",
                     rand_r(&seed) % 8, rand_r(&seed), rand_r(&seed) % 8);
            call(sh, "POST", P "/records", body, NULL);
            break;
        case POLL:
            call(sh, "GET", P "/records?offset=latest&wait_ms=300", NULL, NULL);
            break;
        case STREAM:
            call(sh, "GET", P "/records?offset=latest&max_records=2", NULL,
                 "Accept: application/x-ndjson");
            break;
        case ROLL:
            call(sh, "POST", P "/segments:roll", "", NULL);
            sleep_ms(5);
            break;
        case MAINTAIN: {
            static const char *const ops[] = {
                "/v1/topics/busy/retention:run", "/v1/topics/busy/compaction:run",
                "/v1/admin/retention:run", "/v1/admin/compaction:run",
            };
            unsigned k = rand_r(&seed) % 5;
            if (k < 4) {
                call(sh, "POST", ops[k], "{}", NULL);
            } else {
                long long hw = ls_partition_field(S, "busy", 0, "high_watermark");
                snprintf(body, sizeof body, "{\"before_offset\":%lld}", hw > 4 ? hw - 4 : -1);
                snprintf(path, sizeof path, "%s", P "/records:delete");
                call(sh, "POST", path, body, NULL);
            }
            break;
        }
        case LIST:
            list_all(sh);
            break;
        default:
            snprintf(body, sizeof body,
                     "{\"operations\":[{\"name\":\"retention.ms\",\"op\":\"SET\",\"value\":\"%d\"}]}",
                     rand_r(&seed) % 2 ? 200 : 60000);
            call(sh, "POST", "/v1/topics/busy/configs:alter", body, NULL);
            sleep_ms(10);
            break;
        }
        atomic_fetch_add(&sh->ops[w->role], 1);
    }
    return NULL;
}

static void test_everything_on_one_partition_over_http(void **state)
{
    (void)state;
    assert_int_equal(ls_start(S, settings), 0);
    assert_int_equal(ls_create_topic(S, "busy", 1,
                                     "{\"cleanup.policy\":\"compact,delete\",\"flush.messages\":\"1\","
                                     "\"delete.retention.ms\":\"0\",\"file.delete.delay.ms\":\"0\","
                                     "\"min.cleanable.dirty.ratio\":\"0.01\"}"),
                     201);
    shared sh = {0};
    pthread_mutex_init(&sh.mu, NULL);
    worker w[ROLES];
    pthread_t th[ROLES];
    for (int i = 0; i < ROLES; i++) {
        w[i] = (worker){.sh = &sh, .role = i};
        assert_int_equal(pthread_create(&th[i], NULL, worker_main, &w[i]), 0);
    }
    sleep_ms(RUN_MS);
    ls_resp r;
    assert_int_equal(ls_delete(S, "/v1/topics/busy", &r), 0);
    long st = r.status;
    ls_resp_free(&r);
    assert_true(st == 200 || st == 204);
    sleep_ms(AFTER_DELETE_MS);
    atomic_store(&sh.stop, true);
    for (int i = 0; i < ROLES; i++)
        pthread_join(th[i], NULL);
    fprintf(stderr, "# appends %ld+%ld, polls %ld, streams %ld, rolls %ld, maintenance %ld, "
                    "listings %ld, configs %ld\n",
            atomic_load(&sh.ops[APPEND1]), atomic_load(&sh.ops[APPEND2]),
            atomic_load(&sh.ops[POLL]), atomic_load(&sh.ops[STREAM]), atomic_load(&sh.ops[ROLL]),
            atomic_load(&sh.ops[MAINTAIN]), atomic_load(&sh.ops[LIST]),
            atomic_load(&sh.ops[CONFIG]));
    if (atomic_load(&sh.bad))
        fail_msg("%d bad answers, the first %s", atomic_load(&sh.bad), sh.first_bad);
    for (int i = 0; i < ROLES; i++)
        assert_true(atomic_load(&sh.ops[i]) > 0);
    assert_int_equal(ls_stop(S), 0);
    ls_cleanup(S);
    pthread_mutex_destroy(&sh.mu);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_everything_on_one_partition_over_http),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
