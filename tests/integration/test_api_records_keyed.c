/*
 * test_api_records_keyed.c - keyed appends, POST /v1/topics/{t}/records
 * (DESIGN §6), and concurrent appends, against the real server binary.
 * (Split from test_api_records.c, which covers one-partition appends and
 * reads, to keep each file readable.)
 *
 * Covers: Kafka's murmur2 partitioner (toPositive(murmur2(key)) % n, checked
 * against an independent murmur2 that is itself checked against Kafka's
 * UtilsTest values): every record lands where a Kafka producer would put it,
 * the same key always lands on the same partition, base64 keys hash over
 * their bytes, an explicit "partition" wins; null keys round-robin over the
 * partitions; the response's "records" maps each input record, in order, to
 * its partition and offset, and "results" has one batch per partition; a
 * record naming a missing partition (404) or expected_offset (400) writes
 * nothing; 207 when one partition's batch fails and another's is written, a
 * plain error when nothing was written.  Concurrent appends to one partition
 * get disjoint offsets with each batch whole, and of racing appends with the
 * same expected_offset exactly one wins (the others get 412).
 *
 * One server serves the whole group.  The last test requires a clean exit.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "group_server.h"
#include "harness.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One request that must fail with status and code (and the DESIGN body). */
static void expect_err(const char *method, const char *path, const char *json, long status,
                       const char *code)
{
    assert_int_equal(ls_expect_error(S, method, path, json, status, code), 0);
}

/* GET .../partitions/{p}/records?query; the response is left in *r. */
static void read_q(const char *topic, int part, const char *query, ls_resp *r)
{
    char path[512];
    snprintf(path, sizeof path, "/v1/topics/%s/partitions/%d/records?%s", topic, part, query);
    assert_int_equal(ls_get(S, path, r), 0);
}

static json_t *rec(const ls_resp *r, size_t i)
{
    return json_array_get(ls_jget(r, "records"), i);
}

static size_t nrecs(const ls_resp *r)
{
    return json_array_size(ls_jget(r, "records"));
}

/* ---- keyed appends --------------------------------------------------------------- */

/* Kafka's Utils.murmur2, written independently of the server's copy. */
static int32_t murmur2(const void *key, size_t len)
{
    const uint8_t *d = key;
    const uint32_t m = 0x5bd1e995u;
    uint32_t h = 0x9747b28cu ^ (uint32_t)len;
    size_t i = 0;
    for (; i + 4 <= len; i += 4) {
        uint32_t k = d[i] | (uint32_t)d[i + 1] << 8 | (uint32_t)d[i + 2] << 16 |
                     (uint32_t)d[i + 3] << 24;
        k *= m;
        k ^= k >> 24;
        k *= m;
        h *= m;
        h ^= k;
    }
    switch (len - i) {
    case 3: h ^= (uint32_t)d[i + 2] << 16; /* fall through */
    case 2: h ^= (uint32_t)d[i + 1] << 8;  /* fall through */
    case 1: h ^= d[i]; h *= m;
    }
    h ^= h >> 13;
    h *= m;
    h ^= h >> 15;
    return (int32_t)h;
}

/* Utils.toPositive(murmur2(key)) % n */
static int kafka_partition(const char *key, int n)
{
    return (int)(((uint32_t)murmur2(key, strlen(key)) & 0x7fffffffu) % (uint32_t)n);
}

static void test_keyed_murmur2(void **state)
{
    (void)state;
    /* The reference itself, against Kafka's UtilsTest.testMurmur2 values. */
    assert_int_equal(murmur2("21", 2), -973932308);
    assert_int_equal(murmur2("foobar", 6), -790332482);
    assert_int_equal(murmur2("a-little-bit-long-string", 24), -985981536);
    assert_int_equal(murmur2("abc", 3), 479470107);

    enum { NP = 4, NR = 40 };
    assert_int_equal(ls_create_topic(S, "keyed", NP, NULL), 201);
    char body[8192];
    size_t n = (size_t)snprintf(body, sizeof body, "{\"records\":[");
    int expect[NR], count[NP] = {0};
    long long expect_off[NR];
    for (int i = 0; i < NR; i++) {
        char key[32];
        snprintf(key, sizeof key, "user-%d", i * 7919);
        expect[i] = kafka_partition(key, NP);
        expect_off[i] = count[expect[i]]++;
        n += (size_t)snprintf(body + n, sizeof body - n, "%s{\"key\":\"%s\",\"value\":\"%d\"}",
                              i ? "," : "", key, i);
    }
    snprintf(body + n, sizeof body - n, "]}");
    /* Keys must actually spread, or the test proves little. */
    for (int p = 0; p < NP; p++)
        assert_true(count[p] > 0);
    ls_resp r;
    assert_int_equal(ls_send_json(S, "POST", "/v1/topics/keyed/records", body, &r), 0);
    assert_int_equal(r.status, 200);
    assert_int_equal(ls_jint(&r, "records_appended"), NR);
    assert_int_equal(ls_jint(&r, "records_failed"), 0);
    assert_int_equal(json_array_size(ls_jget(&r, "records")), NR);
    for (int i = 0; i < NR; i++) {
        json_t *o = json_array_get(ls_jget(&r, "records"), (size_t)i);
        assert_int_equal(json_integer_value(json_object_get(o, "partition")), expect[i]);
        assert_int_equal(json_integer_value(json_object_get(o, "offset")), expect_off[i]);
    }
    /* One result (batch) per partition used. */
    assert_int_equal(json_array_size(ls_jget(&r, "results")), NP);
    size_t i;
    json_t *res;
    json_array_foreach(ls_jget(&r, "results"), i, res) {
        int p = (int)json_integer_value(json_object_get(res, "partition"));
        assert_true(p >= 0 && p < NP);
        assert_int_equal(json_integer_value(json_object_get(res, "record_count")), count[p]);
        assert_int_equal(json_integer_value(json_object_get(res, "base_offset")), 0);
    }
    ls_resp_free(&r);

    /* Each partition holds exactly its keys, in request order. */
    for (int p = 0; p < NP; p++) {
        assert_int_equal(ls_log_end_offset(S, "keyed", p), count[p]);
        ls_resp rr;
        char path[128];
        snprintf(path, sizeof path, "/v1/topics/keyed/partitions/%d/records?offset=0", p);
        assert_int_equal(ls_get(S, path, &rr), 0);
        size_t k = 0;
        for (int j = 0; j < NR; j++) {
            if (expect[j] != p)
                continue;
            char key[32];
            snprintf(key, sizeof key, "user-%d", j * 7919);
            assert_string_equal(json_string_value(json_object_get(rec(&rr, k), "key")), key);
            k++;
        }
        assert_int_equal(nrecs(&rr), k);
        ls_resp_free(&rr);
    }

    /* The same key always lands on the same partition. */
    for (int rep = 0; rep < 3; rep++) {
        assert_int_equal(ls_send_json(S, "POST", "/v1/topics/keyed/records",
                                      "{\"records\":[{\"key\":\"user-7919\",\"value\":\"again\"}]}", &r),
                         0);
        assert_int_equal(r.status, 200);
        assert_int_equal(ls_jint(&r, "records.0.partition"), expect[1]);
        assert_int_equal(ls_jint(&r, "records.0.offset"), count[expect[1]] + rep);
        ls_resp_free(&r);
    }
    count[expect[1]] += 3;

    /* Keys given as base64 hash over their bytes: 0x00 0xff. */
    const uint8_t raw[2] = {0x00, 0xff};
    int bp = (int)(((uint32_t)murmur2(raw, 2) & 0x7fffffffu) % NP);
    assert_int_equal(ls_send_json(S, "POST", "/v1/topics/keyed/records",
                                  "{\"encoding\":\"base64\",\"records\":[{\"key\":\"AP8=\",\"value\":\"eA==\"}]}",
                                  &r),
                     0);
    assert_int_equal(r.status, 200);
    assert_int_equal(ls_jint(&r, "records.0.partition"), bp);
    ls_resp_free(&r);
    count[bp]++;

    /* An explicit "partition" wins over the key. */
    int other = (expect[0] + 1) % NP;
    snprintf(body, sizeof body, "{\"records\":[{\"key\":\"user-0\",\"value\":\"pinned\",\"partition\":%d}]}",
             other);
    assert_int_equal(ls_send_json(S, "POST", "/v1/topics/keyed/records", body, &r), 0);
    assert_int_equal(r.status, 200);
    assert_int_equal(ls_jint(&r, "records.0.partition"), other);
    assert_int_equal(ls_jint(&r, "records.0.offset"), count[other]);
    ls_resp_free(&r);
    count[other]++;
    for (int p = 0; p < NP; p++)
        assert_int_equal(ls_log_end_offset(S, "keyed", p), count[p]);
}

static void test_keyed_null_keys_round_robin(void **state)
{
    (void)state;
    enum { NP = 3 };
    assert_int_equal(ls_create_topic(S, "rr", NP, NULL), 201);
    ls_resp r;
    assert_int_equal(ls_send_json(S, "POST", "/v1/topics/rr/records",
                                  "{\"records\":[{\"value\":\"0\"},{\"value\":\"1\"},{\"key\":null,\"value\":\"2\"},"
                                  "{\"value\":\"3\"},{\"value\":\"4\"},{\"value\":\"5\"}]}",
                                  &r),
                     0);
    assert_int_equal(r.status, 200);
    int counts[NP] = {0};
    long long prev = -1;
    for (size_t i = 0; i < 6; i++) {
        json_t *o = json_array_get(ls_jget(&r, "records"), i);
        long long p = json_integer_value(json_object_get(o, "partition"));
        assert_true(p >= 0 && p < NP);
        if (i > 0)
            assert_int_equal(p, (prev + 1) % NP); /* one after another */
        counts[p]++;
        prev = p;
    }
    for (int p = 0; p < NP; p++) {
        assert_int_equal(counts[p], 2);
        assert_int_equal(ls_log_end_offset(S, "rr", p), 2);
    }
    ls_resp_free(&r);
    /* Across requests the rotation continues. */
    assert_int_equal(ls_send_json(S, "POST", "/v1/topics/rr/records", "{\"records\":[{\"value\":\"6\"}]}", &r),
                     0);
    assert_int_equal(r.status, 200);
    assert_int_equal(ls_jint(&r, "records.0.partition"), (prev + 1) % NP);
    ls_resp_free(&r);
}

/* Records interleaved over many partitions: each partition's batch keeps
 * the request's order, "records" maps every input record to its own
 * partition and offset, and "results" lists the partitions in order.  (The
 * records are grouped by sorting them, once, by partition.) */
static void test_keyed_interleaved_many_partitions(void **state)
{
    (void)state;
    enum { NP = 64, N = 2000 };
    assert_int_equal(ls_create_topic(S, "spread", NP, NULL), 201);
    json_t *recs = json_array();
    for (int i = 0; i < N; i++) { /* the value names the record: v<i> */
        char v[32];
        snprintf(v, sizeof v, "v%d", i);
        json_array_append_new(recs, json_pack("{s:i,s:s}", "partition", (i * 7) % NP, "value", v));
    }
    json_t *req = json_pack("{s:o}", "records", recs);
    char *body = json_dumps(req, JSON_COMPACT);
    json_decref(req);
    assert_non_null(body);
    ls_resp r;
    assert_int_equal(ls_send_json(S, "POST", "/v1/topics/spread/records", body, &r), 0);
    free(body);
    assert_int_equal(r.status, 200);
    assert_int_equal(ls_jint(&r, "records_appended"), N);
    json_t *results = ls_jget(&r, "results");
    assert_int_equal(json_array_size(results), NP);
    for (size_t k = 0; k < NP; k++)
        assert_int_equal(json_integer_value(json_object_get(json_array_get(results, k), "partition")),
                         (long long)k);
    long long next[NP] = {0};
    for (int i = 0; i < N; i++) {
        json_t *o = json_array_get(ls_jget(&r, "records"), (size_t)i);
        int p = (i * 7) % NP;
        assert_int_equal(json_integer_value(json_object_get(o, "partition")), p);
        assert_int_equal(json_integer_value(json_object_get(o, "offset")), next[p]++);
    }
    ls_resp_free(&r);
    /* Partition 5 holds, in order, the records i with 7i = 5 (mod 64). */
    read_q("spread", 5, "offset=0&max_records=1000", &r);
    assert_int_equal(r.status, 200);
    size_t k = 0;
    for (int i = 0; i < N; i++) {
        if ((i * 7) % NP != 5)
            continue;
        char v[32];
        snprintf(v, sizeof v, "v%d", i);
        assert_string_equal(json_string_value(json_object_get(rec(&r, k), "value")), v);
        k++;
    }
    assert_int_equal(nrecs(&r), k);
    ls_resp_free(&r);
}

static void test_keyed_errors(void **state)
{
    (void)state;
    enum { NP = 2 };
    assert_int_equal(ls_create_topic(S, "kerr", NP, "{\"max.message.bytes\":1000}"), 201);
    /* Two keys on different partitions. */
    char ka[16] = "", kb[16] = "";
    for (int i = 0; i < 100 && (!*ka || !*kb); i++) {
        char k[16];
        snprintf(k, sizeof k, "a%d", i);
        if (kafka_partition(k, NP) == 0 && !*ka)
            snprintf(ka, sizeof ka, "%s", k);
        if (kafka_partition(k, NP) == 1 && !*kb)
            snprintf(kb, sizeof kb, "%s", k);
    }
    assert_true(*ka && *kb);
    char big[3001];
    memset(big, 'z', 3000);
    big[3000] = 0;
    char body[4096];
    ls_resp r;

    /* Nothing written anywhere: a plain error, no 207. */
    char *before = ls_dir_listing(S->dir);
    snprintf(body, sizeof body, "{\"records\":[{\"key\":\"%s\",\"value\":\"%s\"}]}", kb, big);
    assert_int_equal(ls_send_json(S, "POST", "/v1/topics/kerr/records", body, &r), 0);
    CHECK_ERR(r, 413, "record_too_large");
    ls_resp_free(&r);
    /* A record naming a partition the topic lacks: 404, and the valid
     * records of the same request are not written either. */
    snprintf(body, sizeof body,
             "{\"records\":[{\"key\":\"%s\",\"value\":\"ok\"},{\"value\":\"x\",\"partition\":2}]}", ka);
    assert_int_equal(ls_send_json(S, "POST", "/v1/topics/kerr/records", body, &r), 0);
    CHECK_ERR(r, 404, "unknown_partition");
    ls_resp_free(&r);
    /* expected_offset only makes sense for one partition. */
    expect_err("POST", "/v1/topics/kerr/records",
               "{\"expected_offset\":0,\"records\":[{\"value\":\"x\"}]}", 400, "invalid_request");
    expect_err("POST", "/v1/topics/nosuch/records", "{\"records\":[{\"value\":\"x\"}]}", 404,
               "unknown_topic");
    assert_same_dir(before);

    /* One partition's batch fails, the other's is written: 207. */
    snprintf(body, sizeof body,
             "{\"records\":[{\"key\":\"%s\",\"value\":\"small\"},{\"key\":\"%s\",\"value\":\"%s\"}]}", ka,
             kb, big);
    assert_int_equal(ls_send_json(S, "POST", "/v1/topics/kerr/records", body, &r), 0);
    assert_int_equal(r.status, 207);
    assert_int_equal(ls_jint(&r, "records_appended"), 1);
    assert_int_equal(ls_jint(&r, "records_failed"), 1);
    assert_int_equal(ls_jint(&r, "records.0.partition"), 0);
    assert_int_equal(ls_jint(&r, "records.0.offset"), 0);
    assert_int_equal(ls_jint(&r, "records.1.partition"), 1);
    assert_true(json_is_null(ls_jget(&r, "records.1.offset")));
    bool saw_error = false;
    size_t i;
    json_t *res;
    json_array_foreach(ls_jget(&r, "results"), i, res) {
        json_t *err = json_object_get(res, "error");
        if (json_integer_value(json_object_get(res, "partition")) == 1) {
            assert_non_null(err);
            assert_string_equal(json_string_value(json_object_get(err, "error_code")),
                                "record_too_large");
            /* with the details a plain answer has (they were dropped here) */
            assert_true(json_integer_value(json_object_get(json_object_get(err, "details"),
                                                           "max_bytes")) > 0);
            saw_error = true;
        } else {
            assert_null(err);
            assert_int_equal(json_integer_value(json_object_get(res, "record_count")), 1);
        }
    }
    assert_true(saw_error);
    ls_resp_free(&r);
    assert_int_equal(ls_log_end_offset(S, "kerr", 0), 1);
    assert_int_equal(ls_log_end_offset(S, "kerr", 1), 0);
}

/* ---- concurrency ---------------------------------------------------------------- */

enum { NTHREADS = 4, PER_THREAD = 25 };

typedef struct appender {
    int id;
    int ok;
    long long base[PER_THREAD];
    int expected_offset; /* >= 0: every request carries it */
    long status;
} appender;

static void *append_thread(void *arg)
{
    appender *a = arg;
    int n = a->expected_offset >= 0 ? 1 : PER_THREAD;
    for (int i = 0; i < n; i++) {
        char body[256];
        if (a->expected_offset >= 0)
            snprintf(body, sizeof body, "{\"expected_offset\":%d,\"records\":[{\"value\":\"t%d\"}]}",
                     a->expected_offset, a->id);
        else
            snprintf(body, sizeof body,
                     "{\"records\":[{\"key\":\"t%d\",\"value\":\"%d\"},{\"key\":\"t%d\",\"value\":\"%d+\"}]}",
                     a->id, i, a->id, i);
        ls_resp r;
        if (ls_send_json(S, "POST", "/v1/topics/conc/partitions/0/records", body, &r))
            return NULL;
        a->status = r.status;
        if (r.status == 200) {
            a->base[i] = ls_jint(&r, "base_offset");
            a->ok++;
        }
        ls_resp_free(&r);
    }
    return NULL;
}

/* Concurrent appends get disjoint offsets, each batch whole and in order;
 * racing expected_offset appends: exactly one wins. */
static void test_concurrent_appends(void **state)
{
    (void)state;
    assert_int_equal(ls_create_topic(S, "conc", 1, NULL), 201);
    appender a[NTHREADS];
    pthread_t th[NTHREADS];
    for (int t = 0; t < NTHREADS; t++) {
        a[t] = (appender){.id = t, .expected_offset = -1};
        assert_int_equal(pthread_create(&th[t], NULL, append_thread, &a[t]), 0);
    }
    for (int t = 0; t < NTHREADS; t++)
        pthread_join(th[t], NULL);
    bool seen[NTHREADS * PER_THREAD * 2] = {false};
    for (int t = 0; t < NTHREADS; t++) {
        assert_int_equal(a[t].ok, PER_THREAD);
        for (int i = 0; i < PER_THREAD; i++) {
            long long b = a[t].base[i];
            assert_true(b >= 0 && b + 1 < NTHREADS * PER_THREAD * 2);
            assert_false(seen[b]);
            assert_false(seen[b + 1]);
            seen[b] = seen[b + 1] = true;
            if (i > 0)
                assert_true(b > a[t].base[i - 1]);
        }
    }
    assert_int_equal(ls_log_end_offset(S, "conc", 0), NTHREADS * PER_THREAD * 2);
    ls_resp r;
    read_q("conc", 0, "offset=0&max_records=10000", &r);
    assert_int_equal(nrecs(&r), NTHREADS * PER_THREAD * 2);
    int next[NTHREADS] = {0};
    for (size_t i = 0; i < nrecs(&r); i += 2) {
        /* the two records of one request are adjacent */
        const char *k1 = json_string_value(json_object_get(rec(&r, i), "key"));
        const char *k2 = json_string_value(json_object_get(rec(&r, i + 1), "key"));
        assert_string_equal(k1, k2);
        int t = k1[1] - '0';
        char v[16];
        snprintf(v, sizeof v, "%d", next[t]);
        assert_string_equal(json_string_value(json_object_get(rec(&r, i), "value")), v);
        next[t]++;
    }
    ls_resp_free(&r);

    long long leo = ls_log_end_offset(S, "conc", 0);
    enum { RACERS = 8 };
    appender race[RACERS];
    pthread_t rt[RACERS];
    for (int t = 0; t < RACERS; t++) {
        race[t] = (appender){.id = t, .expected_offset = (int)leo};
        assert_int_equal(pthread_create(&rt[t], NULL, append_thread, &race[t]), 0);
    }
    int winners = 0, lost = 0;
    for (int t = 0; t < RACERS; t++) {
        pthread_join(rt[t], NULL);
        winners += race[t].ok;
        lost += race[t].status == 412;
    }
    assert_int_equal(winners, 1);
    assert_int_equal(lost, RACERS - 1);
    assert_int_equal(ls_log_end_offset(S, "conc", 0), leo + 1);
}

/* Last: a clean stop exits 0 (leaks fail the sanitizer build's exit). */
static void test_zz_clean_stop(void **state)
{
    (void)state;
    assert_int_equal(ls_live_status(S), 200);
    assert_int_equal(ls_stop(S), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_keyed_murmur2),
        cmocka_unit_test(test_keyed_null_keys_round_robin),
        cmocka_unit_test(test_keyed_interleaved_many_partitions),
        cmocka_unit_test(test_keyed_errors),
        cmocka_unit_test(test_concurrent_appends),
        cmocka_unit_test(test_zz_clean_stop),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
