/*
 * test_crash_loop.c - kill -9 at a random moment under load, restart on the
 * same data dir, and prove with an independent checker (crash_check.h: its
 * own CRC-32C and RecordBatch v2 parser, no engine code) that nothing
 * acknowledged was lost and that the files are exactly what Kafka accepts.
 *
 * Each iteration (CRASH_ITERATIONS, default 40; CRASH_SEED picks the seed):
 *   - six libcurl threads run against the ASan server: appenders to plain-0,
 *     plain-1, durable-0 (flush.messages=1) and compacted-0 (40 keys), a
 *     reader (random reads, every record checked against what was sent) that
 *     also rolls segments, and a maintainer that rolls, moves the log start
 *     offset (records:delete + retention:run) and compacts (compaction:run);
 *   - after 150..1300 ms the server is killed with SIGKILL, the threads are
 *     joined and the server restarted on the same dir;
 *   - right after /health/ready: no *.cleaned, *.swap, *.tmp or *.deleted
 *     anywhere (the checkpoint jobs first run 1 s after the start, so none
 *     should be in flight yet; a name must also still be there 250 ms later,
 *     so a stalled test process cannot mistake a write in progress for a
 *     leftover);
 *   - every partition dir passes cc_check_partition (whole batches, CRCs,
 *     offsets strictly increasing across batches and segments, index entries
 *     on batch boundaries naming the batch's last offset, time indexes
 *     increasing, inactive indexes trimmed);
 *   - every record whose append got 200 is at the offset the server returned,
 *     with the same key and value, unless it is below a log start offset the
 *     test moved; every record on disk is one the test sent (an append in
 *     flight at the kill may or may not be there; if it is, it counts as
 *     acknowledged from then on, and if not it may never appear later); on
 *     the compacted topic the latest acknowledged value of every key is there;
 *   - /v1/info reports an unclean start, each partition's high watermark is
 *     the checker's end offset, and reading [log start, high watermark)
 *     through the API returns exactly the records on disk.
 * kill -9 keeps the page cache, so records acknowledged without fsync count.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "crash_check.h"
#include "harness.h"

#include <pthread.h>
#include <stdatomic.h>
#include <time.h>
#include <unistd.h>

#define NPARTS 4 /* plain-0, plain-1, durable-0, compacted-0 */
#define COMPACTED 3
#define NKEYS 40
#define MAX_IDS (2u << 20)
#define KEEP_OFFSETS 3000 /* records:delete keeps about this many */

enum { ST_NONE, ST_PENDING, ST_ACKED, ST_LOST };

typedef struct attempt {
    _Atomic uint32_t meta; /* 1 << 31 | key << 8 | partition index, set before sending */
    uint8_t status;        /* owned by the sending thread, then by main after join */
    int64_t offset;
} attempt;

static const char *const TOPIC[NPARTS] = {"plain", "plain", "durable", "compacted"};
static const int PART[NPARTS] = {0, 1, 0, 0};

static ls_server g_srv;
static ls_server *S = &g_srv;
static attempt *g_att;
static _Atomic uint32_t g_next_id = 1;
static _Atomic int64_t g_floor[NPARTS]; /* log start offsets the test asked for */
static _Atomic int64_t g_hw[NPARTS];    /* last high watermark seen (for reads) */
static _Atomic bool g_stop;
static _Atomic long g_bad_appends, g_bad_reads, g_appends, g_reads, g_rolls, g_deletes, g_cleans;
static char g_failure[1024];
static pthread_mutex_t g_fail_lock = PTHREAD_MUTEX_INITIALIZER;

static const char *const SETTINGS[] = {
    "log.initial.task.delay.ms=1000",
    "log.flush.offset.checkpoint.interval.ms=100",
    "log.flush.start.offset.checkpoint.interval.ms=100",
    "log.retention.check.interval.ms=3600000",
    "log.cleaner.threads=0",
    /* its four partitions recover side by side, as a server set for quick
     * cold starts does (the default, Kafka's, is one thread) */
    "num.recovery.threads.per.data.dir=4",
    NULL,
};

static void note_failure(const char *fmt, ...)
{
    pthread_mutex_lock(&g_fail_lock);
    if (!g_failure[0]) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(g_failure, sizeof g_failure, fmt, ap);
        va_end(ap);
    }
    pthread_mutex_unlock(&g_fail_lock);
}

/* The value of record id: "v<id>." then letters, 8..207 bytes, derived from id. */
static size_t make_value(uint32_t id, char *buf)
{
    int n = snprintf(buf, 32, "v%u.", id);
    size_t len = 8 + (size_t)((id * 2654435761u) >> 7) % 200;
    /* From id 1,000,000 on,
     * "v<id>." is 9 bytes, and a length of 8 cut its '.', so the checker
     * called the test's own record one it never sent. */
    if (len < (size_t)n)
        len = (size_t)n;
    for (size_t i = (size_t)n; i < len; i++)
        buf[i] = (char)('a' + (id + i * 7) % 26);
    buf[len] = 0;
    return len;
}

static void make_key(uint32_t id, int pi, unsigned key, char *buf, size_t len)
{
    if (pi == COMPACTED)
        snprintf(buf, len, "c%02u", key);
    else
        snprintf(buf, len, "k%u", id);
}

/* Checks a record (from disk or the API) against what the test sent; returns
 * its id, or 0 after describing the mismatch in why. */
static uint32_t match_record(int pi, const char *key, const char *value, char *why, size_t len)
{
    char *end;
    if (!value || value[0] != 'v') {
        snprintf(why, len, "value %.40s was never sent", value ? value : "(null)");
        return 0;
    }
    unsigned long id = strtoul(value + 1, &end, 10);
    if (*end != '.' || id == 0 || id >= atomic_load(&g_next_id)) {
        snprintf(why, len, "value %.40s names no request", value);
        return 0;
    }
    uint32_t meta = atomic_load_explicit(&g_att[id].meta, memory_order_acquire);
    char want_v[256], want_k[32];
    make_value((uint32_t)id, want_v);
    make_key((uint32_t)id, (int)(meta & 0xFF), (meta >> 8) & 0xFF, want_k, sizeof want_k);
    if (!(meta >> 31) || (int)(meta & 0xFF) != pi || strcmp(value, want_v) ||
        !key || strcmp(key, want_k)) {
        snprintf(why, len, "record %lu (key %.20s) differs from what was sent to partition %d", id,
                 key ? key : "(null)", (int)(meta & 0xFF));
        return 0;
    }
    return (uint32_t)id;
}

/* ---- load threads ------------------------------------------------------------ */

/* A top-level integer of a JSON answer.  The threads must not use ls_jint:
 * the harness's ls_jget walks paths with strtok, whose state is shared. */
static long long jtop(const ls_resp *r, const char *key)
{
    json_t *v = json_object_get(r->json, key);
    return json_is_integer(v) ? json_integer_value(v) : -999999;
}

static void *appender(void *arg)
{
    int pi = (int)(intptr_t)arg;
    unsigned seed = (unsigned)time(NULL) ^ (unsigned)(pi * 7919) ^ atomic_load(&g_next_id);
    char path[128], body[8192];
    snprintf(path, sizeof path, "/v1/topics/%s/partitions/%d/records", TOPIC[pi], PART[pi]);
    while (!atomic_load(&g_stop)) {
        int n = 1 + (int)(rand_r(&seed) % 4);
        uint32_t first = atomic_fetch_add(&g_next_id, (uint32_t)n);
        if (first + (uint32_t)n >= MAX_IDS)
            break;
        size_t off = (size_t)snprintf(body, sizeof body, "{\"records\":[");
        for (int i = 0; i < n; i++) {
            uint32_t id = first + (uint32_t)i;
            unsigned key = rand_r(&seed) % NKEYS;
            char k[32], v[256];
            make_key(id, pi, key, k, sizeof k);
            make_value(id, v);
            g_att[id].status = ST_PENDING;
            atomic_store_explicit(&g_att[id].meta, 1u << 31 | key << 8 | (uint32_t)pi,
                                  memory_order_release);
            off += (size_t)snprintf(body + off, sizeof body - off, "%s{\"key\":\"%s\",\"value\":\"%s\"}",
                                    i ? "," : "", k, v);
        }
        snprintf(body + off, sizeof body - off, "]}");
        ls_resp r;
        if (ls_post(S, path, body, &r) != 0)
            continue; /* the server died under it: outcome unknown */
        long long base = jtop(&r, "base_offset");
        if (r.status == 200 && (base < 0 || jtop(&r, "record_count") != n)) {
            atomic_fetch_add(&g_bad_appends, 1);
            note_failure("append to %s answered 200 with %.300s (headers %.300s)", path,
                         r.body ? r.body : "(no body)", r.headers ? r.headers : "");
        } else if (r.status == 200) {
            for (int i = 0; i < n; i++) {
                g_att[first + (uint32_t)i].status = ST_ACKED;
                g_att[first + (uint32_t)i].offset = base + i;
            }
            long long hw = jtop(&r, "high_watermark");
            if (hw > atomic_load(&g_hw[pi]))
                atomic_store(&g_hw[pi], hw);
            atomic_fetch_add(&g_appends, 1);
        } else {
            atomic_fetch_add(&g_bad_appends, 1);
            note_failure("append to %s answered %ld: %.200s", path, r.status, r.body);
        }
        ls_resp_free(&r);
    }
    return NULL;
}

static void roll(int pi)
{
    char path[128];
    snprintf(path, sizeof path, "/v1/topics/%s/partitions/%d/segments:roll", TOPIC[pi], PART[pi]);
    ls_resp r;
    if (ls_post(S, path, "", &r) == 0) {
        if (r.status != 200)
            note_failure("roll %s: %ld %.200s", path, r.status, r.body);
        atomic_fetch_add(&g_rolls, 1);
        ls_resp_free(&r);
    }
}

/* A random read; every record must be one the test sent to that partition. */
static void read_some(int pi, unsigned *seed)
{
    int64_t hw = atomic_load(&g_hw[pi]);
    char path[256];
    snprintf(path, sizeof path, "/v1/topics/%s/partitions/%d/records?offset=%lld&max_records=50&clamp=true",
             TOPIC[pi], PART[pi], (long long)(hw > 0 ? (int64_t)(rand_r(seed) % (unsigned)hw) : 0));
    ls_resp r;
    if (ls_get(S, path, &r) != 0)
        return;
    atomic_fetch_add(&g_reads, 1);
    json_t *recs = json_object_get(r.json, "records");
    if (r.status != 200 || !json_is_array(recs)) {
        atomic_fetch_add(&g_bad_reads, 1);
        note_failure("read %s: %ld %.200s", path, r.status, r.body);
    }
    for (size_t i = 0; json_is_array(recs) && i < json_array_size(recs); i++) {
        json_t *o = json_array_get(recs, i);
        char why[256];
        if (!match_record(pi, json_string_value(json_object_get(o, "key")),
                          json_string_value(json_object_get(o, "value")), why, sizeof why)) {
            atomic_fetch_add(&g_bad_reads, 1);
            note_failure("read %s: %s", path, why);
            break;
        }
    }
    ls_resp_free(&r);
}

static void *reader(void *arg)
{
    unsigned seed = (unsigned)(uintptr_t)arg;
    while (!atomic_load(&g_stop)) {
        int pi = (int)(rand_r(&seed) % NPARTS);
        if (rand_r(&seed) % 8 == 0)
            roll(pi);
        else
            read_some(pi, &seed);
    }
    return NULL;
}

static void *maintainer(void *arg)
{
    unsigned seed = (unsigned)(uintptr_t)arg;
    ls_resp r;
    char path[256];
    while (!atomic_load(&g_stop)) {
        unsigned what = rand_r(&seed) % 10;
        if (what < 4) {
            roll((int)(rand_r(&seed) % NPARTS));
        } else if (what < 6) {
            /* Move the log start offset of a plain or durable partition, then
             * let retention delete the segments below it.  The floor is
             * raised before sending: if the answer is lost to the kill, the
             * move may still have happened. */
            int pi = (int)(rand_r(&seed) % 3);
            int64_t before = atomic_load(&g_hw[pi]) - KEEP_OFFSETS;
            if (before <= atomic_load(&g_floor[pi]))
                continue;
            atomic_store(&g_floor[pi], before);
            snprintf(path, sizeof path, "/v1/topics/%s/partitions/%d/records:delete", TOPIC[pi], PART[pi]);
            char body[64];
            snprintf(body, sizeof body, "{\"before_offset\":%lld}", (long long)before);
            if (ls_post(S, path, body, &r) == 0) {
                if (r.status != 200)
                    note_failure("records:delete: %ld %.200s", r.status, r.body);
                ls_resp_free(&r);
            }
            snprintf(path, sizeof path, "/v1/topics/%s/retention:run?partition=%d", TOPIC[pi], PART[pi]);
            if (ls_post(S, path, "{}", &r) == 0) {
                if (r.status != 200)
                    note_failure("retention:run: %ld %.200s", r.status, r.body);
                atomic_fetch_add(&g_deletes, 1);
                ls_resp_free(&r);
            }
        } else {
            if (ls_post(S, "/v1/topics/compacted/compaction:run", "{}", &r) == 0) {
                if (r.status != 200 && r.status != 409)
                    note_failure("compaction:run: %ld %.200s", r.status, r.body);
                atomic_fetch_add(&g_cleans, 1);
                ls_resp_free(&r);
            }
        }
    }
    return NULL;
}

/* ---- verification ---------------------------------------------------------------- */

typedef struct totals {
    long records_checked, acked_checked, promoted, lost, truncations;
    long long bytes_truncated, segments, loaded, recovered;
} totals;

static char g_pdir[NPARTS][640];
static cc_part g_disk[NPARTS];

/* Disk against the model: see the header comment. */
static void verify_model(totals *t)
{
    static uint8_t seen[MAX_IDS];
    memset(seen, 0, sizeof seen);
    char why[512];
    for (int pi = 0; pi < NPARTS; pi++) {
        const cc_part *d = &g_disk[pi];
        for (size_t i = 0; i < d->nrecs; i++) {
            const cc_record *rec = &d->recs[i];
            uint32_t id = match_record(pi, rec->key, rec->value, why, sizeof why);
            if (!id)
                fail_msg("%s-%d offset %lld: %s", TOPIC[pi], PART[pi], (long long)rec->offset, why);
            if (seen[id]++)
                fail_msg("%s-%d: record %u is on disk twice", TOPIC[pi], PART[pi], id);
            attempt *a = &g_att[id];
            if (a->status == ST_LOST)
                fail_msg("%s-%d: record %u appeared after a restart where it was missing", TOPIC[pi],
                         PART[pi], id);
            if (a->status == ST_PENDING) {
                /* In flight at the kill and written: acknowledged from now on. */
                a->status = ST_ACKED;
                a->offset = rec->offset;
                t->promoted++;
            } else if (a->offset != rec->offset) {
                fail_msg("%s-%d: record %u acknowledged at offset %lld is at %lld", TOPIC[pi],
                         PART[pi], id, (long long)a->offset, (long long)rec->offset);
            }
            t->records_checked++;
        }
    }
    /* Every acknowledged record is present (or, compacted, superseded). */
    int64_t latest[NKEYS];
    for (int k = 0; k < NKEYS; k++)
        latest[k] = -1;
    uint32_t n = atomic_load(&g_next_id);
    for (uint32_t id = 1; id < n && id < MAX_IDS; id++) {
        attempt *a = &g_att[id];
        uint32_t meta = atomic_load(&a->meta);
        int pi = (int)(meta & 0xFF);
        if (a->status == ST_PENDING) {
            a->status = ST_LOST; /* not written before the kill: may never appear */
            t->lost++;
            continue;
        }
        if (a->status != ST_ACKED)
            continue;
        if (pi == COMPACTED) {
            unsigned key = (meta >> 8) & 0xFF;
            if (a->offset > latest[key])
                latest[key] = a->offset;
            continue;
        }
        if (a->offset < atomic_load(&g_floor[pi]))
            continue;
        if (!seen[id])
            fail_msg("%s-%d: record %u acknowledged at offset %lld is missing (log %lld..%lld, %d "
                     "segments)", TOPIC[pi], PART[pi], id, (long long)a->offset,
                     (long long)g_disk[pi].first_base, (long long)g_disk[pi].next_offset,
                     g_disk[pi].nsegments);
        t->acked_checked++;
    }
    /* Compacted: the latest acknowledged value of every key is the newest
     * record of that key on disk. */
    int64_t newest[NKEYS];
    for (int k = 0; k < NKEYS; k++)
        newest[k] = -1;
    const cc_part *d = &g_disk[COMPACTED];
    for (size_t i = 0; i < d->nrecs; i++) {
        unsigned key = (unsigned)atoi(d->recs[i].key + 1);
        if (key < NKEYS && d->recs[i].offset > newest[key])
            newest[key] = d->recs[i].offset;
    }
    for (int k = 0; k < NKEYS; k++) {
        if (latest[k] != newest[k])
            fail_msg("compacted-0 key c%02d: latest acknowledged offset %lld, newest on disk %lld", k,
                     (long long)latest[k], (long long)newest[k]);
        if (latest[k] >= 0)
            t->acked_checked++;
    }
}

/* Reads [log start, high watermark) through the API and compares with disk. */
static void verify_api(int pi)
{
    const cc_part *d = &g_disk[pi];
    char path[256];
    ls_resp r;
    snprintf(path, sizeof path, "/v1/topics/%s/partitions/%d", TOPIC[pi], PART[pi]);
    assert_int_equal(ls_get(S, path, &r), 0);
    assert_int_equal(r.status, 200);
    long long lso = ls_jint(&r, "log_start_offset"), hw = ls_jint(&r, "high_watermark");
    long long leo = ls_jint(&r, "log_end_offset");
    ls_resp_free(&r);
    if (hw != d->next_offset || leo != d->next_offset || lso < d->first_base)
        fail_msg("%s-%d: API says [%lld, %lld) end %lld, the files [%lld, %lld)", TOPIC[pi], PART[pi],
                 lso, hw, leo, (long long)d->first_base, (long long)d->next_offset);
    atomic_store(&g_hw[pi], hw);
    size_t at = 0;
    while (at < d->nrecs && d->recs[at].offset < lso)
        at++;
    long long next = lso;
    while (next < hw) {
        snprintf(path, sizeof path,
                 "/v1/topics/%s/partitions/%d/records?offset=%lld&max_records=10000&max_bytes=8000000",
                 TOPIC[pi], PART[pi], next);
        assert_int_equal(ls_get(S, path, &r), 0);
        if (r.status != 200)
            fail_msg("%s: %ld %.300s", path, r.status, r.body);
        json_t *recs = json_object_get(r.json, "records");
        for (size_t i = 0; i < json_array_size(recs); i++, at++) {
            json_t *o = json_array_get(recs, i);
            const char *k = json_string_value(json_object_get(o, "key"));
            const char *v = json_string_value(json_object_get(o, "value"));
            long long off = json_integer_value(json_object_get(o, "offset"));
            if (at >= d->nrecs || d->recs[at].offset != off || !k || !v ||
                strcmp(d->recs[at].key, k) || strcmp(d->recs[at].value, v))
                fail_msg("%s-%d: the API returns offset %lld (%s) where the files hold %lld", TOPIC[pi],
                         PART[pi], off, k ? k : "?", at < d->nrecs ? (long long)d->recs[at].offset : -1LL);
        }
        long long nx = ls_jint(&r, "next_offset");
        ls_resp_free(&r);
        if (nx <= next)
            fail_msg("%s-%d: next_offset %lld does not advance from %lld", TOPIC[pi], PART[pi], nx, next);
        next = nx;
    }
    if (at != d->nrecs)
        fail_msg("%s-%d: the API returned %zu records from %lld, the files hold %zu", TOPIC[pi],
                 PART[pi], at, lso, d->nrecs);
}

static void verify_restart(totals *t)
{
    char left[2048] = "", again[2048] = "";
    if (cc_find_leftovers(S->dir, left, sizeof left)) {
        struct timespec ts = {0, 250000000L};
        nanosleep(&ts, NULL);
        if (cc_find_leftovers(S->dir, again, sizeof again) && !strcmp(left, again))
            fail_msg("leftover files after the restart: %s", left);
    }
    for (int pi = 0; pi < NPARTS; pi++) {
        cc_part_free(&g_disk[pi]);
        if (cc_check_partition(g_pdir[pi], &g_disk[pi]))
            fail_msg("%s-%d: %s", TOPIC[pi], PART[pi], g_disk[pi].err);
        t->segments += g_disk[pi].nsegments;
    }
    verify_model(t);
    ls_resp r;
    assert_int_equal(ls_get(S, "/v1/info", &r), 0);
    assert_false(json_is_true(ls_jget(&r, "startup.clean_shutdown")));
    long long trunc = ls_jint(&r, "startup.bytes_truncated");
    long long rec = ls_jint(&r, "startup.segments_recovered");
    assert_true(rec >= NPARTS); /* at least every active segment */
    t->recovered += rec;
    t->loaded += ls_jint(&r, "startup.segments");
    t->bytes_truncated += trunc;
    t->truncations += trunc > 0;
    ls_resp_free(&r);
    for (int pi = 0; pi < NPARTS; pi++)
        verify_api(pi);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static void test_crash_loop(void **state)
{
    (void)state;
    const char *it_env = getenv("CRASH_ITERATIONS"), *seed_env = getenv("CRASH_SEED");
    int iterations = it_env ? atoi(it_env) : 40;
    unsigned seed = seed_env ? (unsigned)strtoul(seed_env, NULL, 10) : (unsigned)time(NULL);
    printf("# seed %u (CRASH_SEED to replay), %d iterations\n", seed, iterations);
    g_att = calloc(MAX_IDS, sizeof *g_att);
    assert_non_null(g_att);
    assert_int_equal(cc_crc32c((const uint8_t *)"123456789", 9), 0xE3069283u);

    assert_int_equal(ls_start(S, SETTINGS), 0);
    const char *common = "\"segment.bytes\":\"1048576\",\"index.interval.bytes\":\"256\","
                         "\"file.delete.delay.ms\":\"50\"";
    char cfg[512];
    snprintf(cfg, sizeof cfg, "{%s}", common);
    assert_int_equal(ls_create_topic(S, "plain", 2, cfg), 201);
    snprintf(cfg, sizeof cfg, "{%s,\"flush.messages\":\"1\"}", common);
    assert_int_equal(ls_create_topic(S, "durable", 1, cfg), 201);
    snprintf(cfg, sizeof cfg, "{%s,\"cleanup.policy\":\"compact\",\"min.cleanable.dirty.ratio\":\"0.01\"}",
             common);
    assert_int_equal(ls_create_topic(S, "compacted", 1, cfg), 201);
    for (int pi = 0; pi < NPARTS; pi++)
        snprintf(g_pdir[pi], sizeof g_pdir[pi], "%.500s/%s-%d", S->dir, TOPIC[pi], PART[pi]);

    totals t = {0};
    double t0 = now_s(), restart_s = 0, verify_s = 0;
    for (int it = 0; it < iterations; it++) {
        atomic_store(&g_stop, false);
        pthread_t th[NPARTS + 2];
        for (int pi = 0; pi < NPARTS; pi++)
            assert_int_equal(pthread_create(&th[pi], NULL, appender, (void *)(intptr_t)pi), 0);
        assert_int_equal(pthread_create(&th[NPARTS], NULL, reader, (void *)(uintptr_t)rand_r(&seed)), 0);
        assert_int_equal(pthread_create(&th[NPARTS + 1], NULL, maintainer,
                                        (void *)(uintptr_t)rand_r(&seed)), 0);
        unsigned ms = 150 + rand_r(&seed) % 1150;
        struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
        nanosleep(&ts, NULL);
        ls_kill9(S);
        atomic_store(&g_stop, true);
        for (int i = 0; i < NPARTS + 2; i++)
            pthread_join(th[i], NULL);
        if (g_failure[0])
            fail_msg("iteration %d, under load: %s", it, g_failure);
        double a = now_s();
        if (ls_restart(S, SETTINGS) != 0)
            fail_msg("iteration %d: the server did not restart (see %s)", it, S->log_path);
        double b = now_s();
        verify_restart(&t);
        restart_s += b - a;
        verify_s += now_s() - b;
    }
    double total = now_s() - t0;
    assert_int_equal(atomic_load(&g_bad_appends), 0);
    assert_int_equal(atomic_load(&g_bad_reads), 0);
    printf("# %d kill -9 restarts in %.1f s (restart %.2f s, verification %.2f s in total)\n",
           iterations, total, restart_s, verify_s);
    printf("# %ld appends acknowledged, %ld reads, %ld rolls, %ld retention runs, %ld compactions\n",
           atomic_load(&g_appends), atomic_load(&g_reads), atomic_load(&g_rolls),
           atomic_load(&g_deletes), atomic_load(&g_cleans));
    printf("# %ld records checked on disk, %ld acknowledged checks, %ld in-flight records found "
           "written, %ld not (most sent after the kill); %ld restarts truncated %lld bytes; %lld segments seen\n",
           t.records_checked, t.acked_checked, t.promoted, t.lost, t.truncations, t.bytes_truncated,
           t.segments);
    printf("# restarts recovered %lld of the %lld segments they loaded (from the recovery point on)\n",
           t.recovered, t.loaded);

    /* A clean stop at the end: the marker is honoured and nothing is recovered. */
    assert_int_equal(ls_stop(S), 0);
    assert_int_equal(ls_restart(S, SETTINGS), 0);
    ls_resp r;
    assert_int_equal(ls_get(S, "/v1/info", &r), 0);
    assert_true(json_is_true(ls_jget(&r, "startup.clean_shutdown")));
    assert_int_equal(ls_jint(&r, "startup.segments_recovered"), 0);
    ls_resp_free(&r);
    for (int pi = 0; pi < NPARTS; pi++) {
        cc_part_free(&g_disk[pi]);
        if (cc_check_partition(g_pdir[pi], &g_disk[pi]))
            fail_msg("after a clean restart, %s-%d: %s", TOPIC[pi], PART[pi], g_disk[pi].err);
        verify_api(pi);
        cc_part_free(&g_disk[pi]);
    }
    assert_int_equal(ls_stop(S), 0);
    ls_cleanup(S);
    free(g_att);
    g_att = NULL;
}

/* After a failed assertion: no server left running, no data dir left. */
static int teardown(void **state)
{
    (void)state;
    atomic_store(&g_stop, true);
    ls_cleanup(S);
    for (int pi = 0; pi < NPARTS; pi++)
        cc_part_free(&g_disk[pi]);
    free(g_att);
    g_att = NULL;
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_crash_loop, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
