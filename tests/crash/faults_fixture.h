/*
 * faults_fixture.h - what the fault-point suites (test_faults.c,
 * test_faults_maint.c) share: a server started with LOGSTORE_FAULT and
 * restarted without it, the model of every acknowledged record, appends,
 * and checks of the partition's files with crash_check.h.
 *
 * Include after cmocka.h.
 */
#ifndef FAULTS_FIXTURE_H
#define FAULTS_FIXTURE_H

#include "crash_check.h"
#include "harness.h"

#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define CHECK_ERR(r, st, code) assert_int_equal(ls_check_error(&(r), (st), (code)), 0)
#define MAXR 512

/* What the test was told: offset, key, value of every acknowledged record. */
typedef struct model {
    int n;
    int64_t off[MAXR];
    char key[MAXR][16];
    char val[MAXR][64];
} model;

static model M;
static ls_server *g_live; /* the server of the running test, for the teardown */

static inline void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* Starts (or, restart, restarts) s with LOGSTORE_FAULT=fault for the child only. */
static inline void start(ls_server *s, const char *fault, const char *const *extra, bool restart)
{
    if (fault)
        setenv("LOGSTORE_FAULT", fault, 1);
    g_live = s;
    int rc = restart ? ls_restart(s, extra) : ls_start(s, extra);
    unsetenv("LOGSTORE_FAULT");
    if (rc)
        fail_msg("the server did not start (fault %s; log %s)", fault ? fault : "none", s->log_path);
}

/* Waits for the server to end on its own; its exit status. */
static inline int wait_exit(ls_server *s)
{
    for (int i = 0; i < 800; i++) {
        int st;
        if (waitpid(s->pid, &st, WNOHANG) == s->pid) {
            s->pid = 0;
            return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        }
        sleep_ms(25);
    }
    return -1;
}

static inline void pdir(const ls_server *s, const char *topic, char *buf, size_t len)
{
    snprintf(buf, len, "%s/%s-0", s->dir, topic);
}

/* One batch of n records ("<tag>-<i>" keys unless keys is given) to topic-0;
 * returns the status; on 200 the records join the model. */
static inline long append(ls_server *s, const char *topic, int n, const char *tag, ls_resp *out)
{
    char body[8192], keys[32][16], vals[32][64];
    size_t off = (size_t)snprintf(body, sizeof body, "{\"records\":[");
    for (int i = 0; i < n; i++) {
        snprintf(keys[i], sizeof keys[i], "%s-%d", tag, i);
        snprintf(vals[i], sizeof vals[i], "value-%s-%d-%d-0123456789abcdefghij", tag, i, M.n + i);
        off += (size_t)snprintf(body + off, sizeof body - off, "%s{\"key\":\"%s\",\"value\":\"%s\"}",
                                i ? "," : "", keys[i], vals[i]);
    }
    snprintf(body + off, sizeof body - off, "]}");
    char path[128];
    snprintf(path, sizeof path, "/v1/topics/%s/partitions/0/records", topic);
    ls_resp r;
    if (ls_post(s, path, body, &r))
        return 0; /* no answer: the server went away */
    long st = r.status;
    if (st == 200) {
        long long base = ls_jint(&r, "base_offset");
        for (int i = 0; i < n && M.n < MAXR; i++, M.n++) {
            M.off[M.n] = base + i;
            snprintf(M.key[M.n], sizeof M.key[M.n], "%s", keys[i]);
            snprintf(M.val[M.n], sizeof M.val[M.n], "%s", vals[i]);
        }
    }
    if (out)
        *out = r;
    else
        ls_resp_free(&r);
    return st;
}

static inline void append_ok(ls_server *s, const char *topic, int n, const char *tag)
{
    assert_int_equal(append(s, topic, n, tag, NULL), 200);
}

/* The partition passes the checker and holds every record of the model
 * whose offset is at least from (with its key and value); returns the
 * parsed partition (cc_part_free it). */
static inline cc_part check_files(const ls_server *s, const char *topic, int64_t from)
{
    char dir[512];
    pdir(s, topic, dir, sizeof dir);
    cc_part p;
    if (cc_check_partition(dir, &p))
        fail_msg("%s: %s", dir, p.err);
    for (int i = 0; i < M.n; i++) {
        if (M.off[i] < from)
            continue;
        const cc_record *r = cc_find(&p, M.off[i]);
        if (!r || !r->key || !r->value || strcmp(r->key, M.key[i]) || strcmp(r->value, M.val[i]))
            fail_msg("%s: acknowledged offset %lld (%s) is %s", dir, (long long)M.off[i], M.key[i],
                     r ? "different" : "missing");
    }
    return p;
}

static inline void check_no_leftovers(const ls_server *s)
{
    char left[2048] = "";
    if (cc_find_leftovers(s->dir, left, sizeof left))
        fail_msg("leftover files: %s", left);
}

/* How many files in topic-0's dir end with suffix. */
static inline int count_suffix(const ls_server *s, const char *topic, const char *suffix)
{
    char dir[512];
    pdir(s, topic, dir, sizeof dir);
    DIR *d = opendir(dir);
    int n = 0;
    struct dirent *e;
    size_t sl = strlen(suffix);
    while (d && (e = readdir(d))) {
        size_t l = strlen(e->d_name);
        n += l > sl && !strcmp(e->d_name + l - sl, suffix);
    }
    if (d)
        closedir(d);
    return n;
}

static inline long long seg_file_size(const ls_server *s, const char *topic, long long base, const char *ext)
{
    char path[700];
    snprintf(path, sizeof path, "%s/%s-0/%020lld%s", s->dir, topic, base, ext);
    return ls_file_size(path);
}

static inline long ready_status(ls_server *s, char *status, size_t len)
{
    ls_resp r;
    assert_int_equal(ls_get(s, "/health/ready", &r), 0);
    long st = r.status;
    snprintf(status, len, "%s", ls_jstr(&r, "status") ? ls_jstr(&r, "status") : "");
    ls_resp_free(&r);
    return st;
}

static inline long long startup(ls_server *s, const char *field)
{
    ls_resp r;
    char path[64];
    snprintf(path, sizeof path, "startup.%s", field);
    assert_int_equal(ls_get(s, "/v1/info", &r), 0);
    json_t *v = ls_jget(&r, path);
    long long x = json_is_boolean(v) ? json_is_true(v) : json_is_integer(v) ? json_integer_value(v) : -1;
    ls_resp_free(&r);
    return x;
}

static inline long long part_field(ls_server *s, const char *topic, const char *field)
{
    char path[128];
    snprintf(path, sizeof path, "/v1/topics/%s/partitions/0", topic);
    ls_resp r;
    assert_int_equal(ls_get(s, path, &r), 0);
    long long v = ls_jint(&r, field);
    ls_resp_free(&r);
    return v;
}

static inline void roll(ls_server *s, const char *topic)
{
    char path[128];
    snprintf(path, sizeof path, "/v1/topics/%s/partitions/0/segments:roll", topic);
    ls_resp r;
    assert_int_equal(ls_post(s, path, "", &r), 0);
    assert_int_equal(r.status, 200);
    ls_resp_free(&r);
}

static inline int setup(void **state)
{
    (void)state;
    memset(&M, 0, sizeof M);
    return 0;
}

/* A failed assertion leaves the test early: stop its server and remove its
 * dir (ls_cleanup kills a live one; after a normal end both are gone). */
static inline int teardown(void **state)
{
    (void)state;
    if (g_live)
        ls_cleanup(g_live);
    g_live = NULL;
    return 0;
}

static const char *const NO_CLEANER[] = {"log.cleaner.threads=0", NULL};
#define PLAIN "{\"index.interval.bytes\":\"100\"}"
#define DURABLE "{\"index.interval.bytes\":\"100\",\"flush.messages\":\"1\"}"
#define COMPACT "{\"cleanup.policy\":\"compact\",\"min.cleanable.dirty.ratio\":\"0.01\"," \
                "\"index.interval.bytes\":\"100\"}"

#endif
