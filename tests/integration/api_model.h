/*
 * api_model.h - the in-memory model test_api_model.c checks the server
 * against: topics, their configs, and per partition every record ever
 * appended (by offset) with whether it is still stored, plus the log start
 * offset, what log-start-offset-checkpoint holds of it, and its idempotent
 * producers.  The high watermark is the log end offset: no request is in
 * flight while another is checked, flush.messages=1 or not.
 * Then the run's state: the server, the PRNG, failure reports naming the
 * seed and the operation, request helpers and random record content.
 *
 * Header-only, and included by test_api_model.c alone (its state is
 * static here): the Makefile links integration tests with harness.o alone.
 * api_model_read.h holds the read checks, api_model_admin.h the topic,
 * config and invalid-request operations.
 */
#ifndef TEST_API_MODEL_H
#define TEST_API_MODEL_H

#include "harness.h"
#include "read_util.h"

#include <jansson.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define AM_MAXP 4   /* partitions a topic may grow to */
#define AM_NNAMES 6 /* the names topics are created under, reused */
#define AM_POLICY_DELETE 1
#define AM_POLICY_COMPACT 2

/* A byte string of the model; data NULL = null. */
typedef struct am_bytes {
    char *data;
    size_t len;
} am_bytes;

typedef struct am_rec {
    int64_t ts_lo, ts_hi; /* equal once known: a record sent without a timestamp gets the
                           * server's clock, known only within the request's span until read */
    bool log_append_time; /* stored in a LogAppendTime batch */
    am_bytes key, value;
    int nh;
    am_bytes hname[2], hval[2];
    bool stored; /* not removed by compaction or retention */
    int64_t horizon; /* a tombstone's delete horizon, set by its first clean; 0 before */
} am_rec;

#define AM_NPIDS 3 /* idempotent producer ids a partition sees */
#define AM_PBATCHES 5 /* batches a producer's retries are checked against (Kafka's five) */

/* One batch of an idempotent producer, as the producer listing shows it. */
typedef struct am_pbatch {
    int32_t first_seq, last_seq;
    int64_t first_off, last_off;
    long long ts_lo, ts_hi; /* its maxTimestamp; a range on LogAppendTime topics */
} am_pbatch;

/* What a partition remembers of one producer id (nb 0: unknown).  Every
 * batch is of the current epoch; the server keeps a suffix of them at
 * least `must` long: all since the last restart, plus the last before it. */
typedef struct am_prod {
    int epoch;
    int nb, must;
    am_pbatch b[AM_PBATCHES];
} am_prod;

typedef struct am_part {
    am_rec *r;
    int64_t n, cap; /* n: the log end offset */
    int64_t lso;
    int64_t ckpt_lso; /* the log start offset as log-start-offset-checkpoint last saved it */
    bool compressed; /* holds a compressed batch: the disk check cannot parse it */
    am_prod prod[AM_NPIDS]; /* by index into PIDS */
} am_part;

typedef struct am_topic {
    bool live;
    const char *name;
    int np;
    am_part p[AM_MAXP];
    int policy; /* AM_POLICY_* bits; 0 = empty list, keep everything */
    bool lat;   /* message.timestamp.type=LogAppendTime */
    long long retention_ms, retention_bytes;
    bool codec; /* compression.type compresses every batch */
    bool flush1; /* flush.messages=1: acknowledged means on disk */
    long long drm; /* delete.retention.ms */
    json_t *overrides; /* name -> value as set, what the description's "configs" holds */
} am_topic;

static inline am_bytes am_dup(const char *s, size_t len)
{
    am_bytes b = {NULL, len};
    if (s) {
        b.data = malloc(len + 1);
        if (b.data) {
            memcpy(b.data, s, len);
            b.data[len] = 0;
        }
    }
    return b;
}

static inline bool am_bytes_eq(const am_bytes *a, const char *s, size_t len)
{
    if (!a->data || !s)
        return !a->data && !s;
    return a->len == len && !memcmp(a->data, s, len);
}

static inline void am_rec_free(am_rec *r)
{
    free(r->key.data);
    free(r->value.data);
    for (int i = 0; i < 2; i++) {
        free(r->hname[i].data);
        free(r->hval[i].data);
    }
}

static inline void am_part_reset(am_part *p)
{
    for (int64_t i = 0; i < p->n; i++)
        am_rec_free(&p->r[i]);
    free(p->r);
    memset(p, 0, sizeof *p);
}

static inline am_rec *am_push(am_part *p)
{
    if (p->n == p->cap) {
        int64_t cap = p->cap ? p->cap * 2 : 64;
        am_rec *n = realloc(p->r, (size_t)cap * sizeof *n);
        if (!n)
            return NULL;
        p->r = n;
        p->cap = cap;
    }
    am_rec *r = &p->r[p->n++];
    memset(r, 0, sizeof *r);
    r->stored = true;
    return r;
}

/* The first offset >= from holding a record a reader sees, or n. */
static inline int64_t am_next_live(const am_part *p, int64_t from)
{
    if (from < p->lso)
        from = p->lso;
    while (from < p->n && !p->r[from].stored)
        from++;
    return from;
}

/* Live records in [from, to). */
static inline int64_t am_live_count(const am_part *p, int64_t from, int64_t to)
{
    int64_t c = 0;
    for (int64_t o = am_next_live(p, from); o < to && o < p->n; o = am_next_live(p, o + 1))
        c++;
    return c;
}

/* ---- base64 (RFC 4648, padded), the test's own ---------------------------- */

static inline char *am_b64(const char *in, size_t len)
{
    static const char tab[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    char *out = malloc((len + 2) / 3 * 4 + 1), *o = out;
    if (!out)
        return NULL;
    const unsigned char *p = (const unsigned char *)in;
    for (size_t i = 0; i < len; i += 3) {
        uint32_t v = (uint32_t)p[i] << 16 | (i + 1 < len ? (uint32_t)p[i + 1] << 8 : 0) |
                     (i + 2 < len ? p[i + 2] : 0);
        *o++ = tab[v >> 18 & 63];
        *o++ = tab[v >> 12 & 63];
        *o++ = i + 1 < len ? tab[v >> 6 & 63] : '=';
        *o++ = i + 2 < len ? tab[v & 63] : '=';
    }
    *o = 0;
    return out;
}

/* A model byte string as a read answers it (utf8 or base64); new reference. */
static inline json_t *am_bytes_json(const am_bytes *b, bool base64)
{
    if (!b->data)
        return json_null();
    if (!base64)
        return json_stringn(b->data, b->len);
    char *s = am_b64(b->data, b->len);
    json_t *j = json_string(s);
    free(s);
    return j;
}

#define DAY_MS 86400000LL
#define HOUR_MS 3600000LL

static ls_server g_srv;
static ls_server *S = &g_srv;
static uint64_t g_rng;
static unsigned long long g_seed;
static int g_op;
static char g_what[256]; /* the operation under way, for failure reports */
static am_topic T[AM_NNAMES];

/* What a run did, printed at its end: a run that never deleted a segment
 * or compacted a record checked little. */
static struct {
    long appended, pages, streams, raws, retention_deleted[3], rolled, compacted, restarts, invalid,
        created, deleted, configs, idempotent, idempotent_refused, crashes, lso_fell_back;
} g_stats;

/* m.x and m_x collide (Kafka's rule on . and _). */
static const char *const NAMES[AM_NNAMES] = {"alpha", "beta", "m.x", "m_x", "g-1", "d.2"};

static const char *const settings[] = {"log.initial.task.delay.ms=3600000", "log.cleaner.threads=0",
                                       NULL};

/* ---- the PRNG and failure reports ------------------------------------------- */

static uint64_t rnd(void)
{
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return g_rng;
}

static int64_t rndn(int64_t n)
{
    return n > 0 ? (int64_t)(rnd() % (uint64_t)n) : 0;
}

static bool chance(int percent)
{
    return rndn(100) < percent;
}

__attribute__((format(printf, 2, 3))) static void fail_at(int line, const char *fmt, ...)
{
    fprintf(stderr, "# API_MODEL_SEED=%llu: op %d (%s), line %d: ", g_seed, g_op, g_what, line);
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    fail();
}

#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        if (!(cond))                                                                               \
            fail_at(__LINE__, __VA_ARGS__);                                                        \
    } while (0)

#define CHECK_EQ(got, want, what)                                                                  \
    do {                                                                                           \
        long long g_ = (long long)(got), w_ = (long long)(want);                                   \
        if (g_ != w_)                                                                              \
            fail_at(__LINE__, "%s: %lld, expected %lld", (what), g_, w_);                          \
    } while (0)

static void what(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(g_what, sizeof g_what, fmt, ap);
    va_end(ap);
    if (getenv("API_MODEL_TRACE"))
        fprintf(stderr, "# op %d: %s\n", g_op, g_what);
}

/* ---- requests ------------------------------------------------------------------ */

static void req(const char *method, const char *path, const char *ctype, const void *body,
                size_t len, const char *accept, ls_resp *r)
{
    char a[128];
    const char *hdrs[2] = {NULL, NULL};
    if (accept) {
        snprintf(a, sizeof a, "Accept: %s", accept);
        hdrs[0] = a;
    }
    CHECK(ls_http(S, method, path, ctype, body, len, hdrs, r) == 0, "%s %s: no answer", method, path);
}

static void req_json(const char *method, const char *path, const char *json, ls_resp *r)
{
    req(method, path, json ? "application/json" : NULL, json, json ? strlen(json) : 0, NULL, r);
}

static void expect_ok(ls_resp *r, long status)
{
    CHECK(r->status == status, "status %ld, expected %ld: %.600s", r->status, status,
          r->body ? r->body : "");
}

static void expect_err(ls_resp *r, long status, const char *code)
{
    CHECK(ls_check_error(r, status, code) == 0, "expected %ld %s", status, code);
}

static json_t *jget(json_t *o, const char *k)
{
    return json_object_get(o, k);
}

static long long jint(json_t *o, const char *k)
{
    json_t *v = json_object_get(o, k);
    CHECK(json_is_integer(v), "field %s is not an integer", k);
    return json_integer_value(v);
}

/* ---- random data ------------------------------------------------------------------ */

static long long now_ms(void)
{
    return ru_now_ms();
}

/* Text of 0..max tokens, some of them JSON-escaped or multi-byte in UTF-8. */
static am_bytes rand_text(int max)
{
    static const char *const tok[] = {"a", "b", "Z", "0", "7", " ", "\"", "\\", "\n", "/", "é", "€", "x", "-"};
    char buf[512];
    size_t len = 0;
    int n = (int)rndn(max + 1);
    for (int i = 0; i < n; i++) {
        const char *t = tok[rndn(sizeof tok / sizeof tok[0])];
        size_t l = strlen(t);
        if (len + l >= sizeof buf)
            break;
        memcpy(buf + len, t, l);
        len += l;
    }
    return am_dup(buf, len);
}

static am_bytes rand_key(bool allow_null)
{
    if (allow_null && chance(15))
        return (am_bytes){NULL, 0};
    if (chance(80)) {
        char k[8];
        snprintf(k, sizeof k, "k%d", (int)rndn(8));
        return am_dup(k, strlen(k));
    }
    return rand_text(6);
}

static am_bytes rand_value(void)
{
    if (chance(8))
        return (am_bytes){NULL, 0};
    if (chance(2)) {
        size_t n = 1000 + (size_t)rndn(3000);
        char *v = malloc(n);
        CHECK(v != NULL, "out of memory");
        for (size_t i = 0; i < n; i++)
            v[i] = (char)('a' + (i * 7 + n) % 26);
        am_bytes b = am_dup(v, n);
        free(v);
        return b;
    }
    return rand_text(12);
}

/* The kind of timestamps a request's records get, mostly one kind per
 * request so that whole segments hold old records: 0 now, 1 days old, 2 in
 * the future.  Kept at least an hour away from every retention.ms the test
 * sets. */
static int g_ts_mode;

static void pick_ts_mode(void)
{
    int r = (int)rndn(100);
    g_ts_mode = r < 55 ? 0 : r < 95 ? 1 : 2;
}

static int64_t rand_ts(void)
{
    long long now = now_ms();
    int mode = chance(97) ? g_ts_mode : (int)rndn(3);
    if (mode == 0)
        return now - rndn(10 * 60000);
    if (mode == 1) {
        static const int days[] = {2, 3, 9, 12};
        return now - days[rndn(4)] * DAY_MS - rndn(HOUR_MS);
    }
    return now + 2 * HOUR_MS + rndn(HOUR_MS);
}

static void rand_headers(am_rec *r)
{
    r->nh = (int)rndn(3);
    for (int i = 0; i < r->nh; i++) {
        char n[4] = {'h', (char)('0' + i), 0};
        r->hname[i] = chance(70) ? am_dup(n, 2) : rand_text(4);
        r->hval[i] = chance(20) ? (am_bytes){NULL, 0} : rand_text(6);
    }
}

/* ---- model lookups ----------------------------------------------------------------- */

static am_topic *rand_live_topic(void)
{
    int live[AM_NNAMES], n = 0;
    for (int i = 0; i < AM_NNAMES; i++)
        if (T[i].live)
            live[n++] = i;
    return n ? &T[live[rndn(n)]] : NULL;
}

static void part_path(char *out, size_t len, const am_topic *t, int p, const char *rest)
{
    snprintf(out, len, "/v1/topics/%s/partitions/%d%s", t->name, p, rest);
}

#endif
