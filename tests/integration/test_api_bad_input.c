/*
 * test_api_bad_input.c - hostile and broken requests against the real server
 * binary (DESIGN §6: "Every error is a non-2xx status with this body", "A
 * rejected append changes nothing").
 *
 * For every bad input below the test asserts DESIGN's status and error_code,
 * the exact error body, that the server stays up (/health/live is 200
 * afterwards), and that nothing changed: the data dir listing (every file and
 * its size) and the log end offset of each partition are the same before and
 * after.  Inputs: malformed and truncated JSON, wrong JSON types, integers out
 * of range, invalid base64, bytes that are not UTF-8, a null key on a
 * compacted topic, empty record lists, missing "value", unknown fields, a
 * body over http.max.request.bytes (with and without Content-Length, i.e.
 * chunked), too many records for http.max.records.per.request, a batch over
 * max.message.bytes, unknown topics and partitions, wrong Content-Types and
 * partition path segments that are not numbers.  Valid requests close to the
 * limits are accepted, so the rejections are not just "everything fails".
 *
 * One server (http.max.request.bytes=65536, http.max.records.per.request=50)
 * serves the whole group.  The last test requires a clean exit.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "harness.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static ls_server g_srv;
static ls_server *S = &g_srv;

#define CHECK_ERR(r, st, code) assert_int_equal(ls_check_error(&(r), (st), (code)), 0)
#define BAD "/v1/topics/bad/partitions/0/records"
#define JSON "application/json"

static int group_setup(void **state)
{
    (void)state;
    static const char *const extra[] = {"http.max.request.bytes=65536",
                                        "http.max.records.per.request=50", NULL};
    if (ls_start(S, extra))
        return -1;
    if (ls_create_topic(S, "bad", 2, NULL) != 201 ||
        ls_create_topic(S, "compacted", 1, "{\"cleanup.policy\":\"compact\"}") != 201 ||
        ls_create_topic(S, "small", 1, "{\"max.message.bytes\":1000}") != 201)
        return -1;
    ls_resp r;
    if (ls_post(S, BAD, "{\"records\":[{\"key\":\"a\",\"value\":\"1\"},{\"value\":\"2\"}]}", &r) ||
        r.status != 200)
        return -1;
    ls_resp_free(&r);
    if (ls_post(S, "/v1/topics/compacted/partitions/0/records",
                "{\"records\":[{\"key\":\"a\",\"value\":\"1\"}]}", &r) ||
        r.status != 200)
        return -1;
    ls_resp_free(&r);
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    ls_stop(S);
    ls_cleanup(S);
    return 0;
}

/* The log end offsets a rejected request must not move. */
typedef struct snapshot {
    char *listing;
    long long leo[4];
} snapshot;

static void snap(snapshot *s)
{
    s->listing = ls_dir_listing(S->dir);
    s->leo[0] = ls_log_end_offset(S, "bad", 0);
    s->leo[1] = ls_log_end_offset(S, "bad", 1);
    s->leo[2] = ls_log_end_offset(S, "compacted", 0);
    s->leo[3] = ls_log_end_offset(S, "small", 0);
    assert_true(s->leo[0] >= 2);
}

static void assert_unchanged(snapshot *before, const char *what)
{
    snapshot after;
    snap(&after);
    free(after.listing); /* ls_dir_same takes its own, checkpoints left out */
    if (ls_dir_same(S->dir, before->listing))
        fail_msg("the data dir changed after %s", what);
    for (int i = 0; i < 4; i++)
        assert_int_equal(before->leo[i], after.leo[i]);
}

/* Sends one request that must be refused with status/code and change nothing. */
static void expect_rejected_h(const char *method, const char *path, const char *ctype,
                              const void *body, size_t len, const char *const *hdrs, long status,
                              const char *code)
{
    snapshot before;
    snap(&before);
    ls_resp r;
    assert_int_equal(ls_http(S, method, path, ctype, body, len, hdrs, &r), 0);
    if (ls_check_error(&r, status, code))
        fprintf(stderr, "# %s %s body: %.120s\n", method, path, body ? (const char *)body : "");
    CHECK_ERR(r, status, code);
    ls_resp_free(&r);
    assert_int_equal(ls_live_status(S), 200);
    assert_unchanged(&before, path);
}

static void expect_rejected(const char *path, const char *json, long status, const char *code)
{
    expect_rejected_h("POST", path, JSON, json, strlen(json), NULL, status, code);
}

/* A valid append still works (and moves the offsets). */
static void append_still_works(void)
{
    long long leo = ls_log_end_offset(S, "bad", 0);
    ls_resp r;
    assert_int_equal(ls_post(S, BAD, "{\"records\":[{\"value\":\"fine\"}]}", &r), 0);
    assert_int_equal(r.status, 200);
    assert_int_equal(ls_jint(&r, "base_offset"), leo);
    ls_resp_free(&r);
}

/* ---- JSON ----------------------------------------------------------------------- */

static void test_malformed_json(void **state)
{
    (void)state;
    static const char *const cases[] = {
        "{\"records\":[{\"value\":\"a\"}]",   /* unclosed */
        "{records:[{\"value\":\"a\"}]}",      /* unquoted key */
        "{\"records\":[{\"value\":'a'}]}",    /* single quotes */
        "{\"records\":[{\"value\":\"a\"},]}", /* trailing comma */
        "nope",
        "{\"records\":[{\"value\":\"a\"}]} trailing",
        "{\"records\":[{\"value\":\"a\"}]}{\"records\":[]}",
        "{\"records\":[{\"value\":\"a\\q\"}]}", /* bad escape */
        "\x01",
        "{\"records\":[{\"value\":\"a\"}],\"expected_offset\":99999999999999999999}",
        "{\"records\":[{\"value\":\"a\",\"timestamp\":99999999999999999999}]}",
        "{\"records\":[{\"value\":\"\\ud800\"}]}", /* lone surrogate escape */
        /* duplicate keys: the last one won, silently */
        "{\"records\":[{\"value\":\"first\",\"value\":\"second\"}]}",
        "{\"expected_offset\":0,\"expected_offset\":2,\"records\":[{\"value\":\"a\"}]}",
        "{\"records\":[{\"value\":\"a\",\"headers\":[{\"name\":\"h\",\"name\":\"i\"}]}]}",
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        expect_rejected(BAD, cases[i], 400, "malformed_json");
    /* An empty body. */
    expect_rejected_h("POST", BAD, JSON, "", 0, NULL, 400, "malformed_json");
    expect_rejected_h("POST", BAD, JSON, NULL, 0, NULL, 400, "malformed_json");
    append_still_works();
}

static void test_truncated_json(void **state)
{
    (void)state;
    const char *full = "{\"encoding\":\"utf8\",\"records\":[{\"key\":\"k\",\"value\":\"hello\","
                       "\"headers\":[{\"name\":\"h\",\"value\":\"x\"}]},{\"value\":\"second\"}]}";
    size_t n = strlen(full);
    /* Every proper prefix (stepping a few bytes) is refused as malformed JSON. */
    for (size_t cut = 1; cut < n; cut += 7)
        expect_rejected_h("POST", BAD, JSON, full, cut, NULL, 400, "malformed_json");
    expect_rejected_h("POST", BAD, JSON, full, n - 1, NULL, 400, "malformed_json");
    /* The whole thing is fine. */
    ls_resp r;
    assert_int_equal(ls_post(S, BAD, full, &r), 0);
    assert_int_equal(r.status, 200);
    assert_int_equal(ls_jint(&r, "record_count"), 2);
    ls_resp_free(&r);
}

static void test_wrong_types(void **state)
{
    (void)state;
    static const char *const cases[] = {
        "[{\"value\":\"a\"}]",
        "{\"records\":\"x\"}",
        "{\"records\":{\"value\":\"a\"}}",
        "{\"records\":null}",
        "{\"records\":5}",
        "{\"records\":[1]}",
        "{\"records\":[\"value\"]}",
        "{\"records\":[null]}",
        "{\"records\":[{\"value\":1}]}",
        "{\"records\":[{\"value\":true}]}",
        "{\"records\":[{\"value\":{\"a\":1}}]}",
        "{\"records\":[{\"value\":[\"a\"]}]}",
        "{\"records\":[{\"key\":{},\"value\":\"a\"}]}",
        "{\"records\":[{\"key\":5,\"value\":\"a\"}]}",
        "{\"records\":[{\"value\":\"a\",\"headers\":\"x\"}]}",
        "{\"records\":[{\"value\":\"a\",\"headers\":{\"h\":\"x\"}}]}",
        "{\"records\":[{\"value\":\"a\",\"headers\":[1]}]}",
        "{\"records\":[{\"value\":\"a\",\"headers\":[{\"name\":1,\"value\":\"x\"}]}]}",
        "{\"records\":[{\"value\":\"a\",\"headers\":[{\"value\":\"x\"}]}]}",
        "{\"records\":[{\"value\":\"a\",\"headers\":[{\"name\":\"h\",\"value\":5}]}]}",
        "{\"records\":[{\"value\":\"a\",\"timestamp\":\"now\"}]}",
        "{\"records\":[{\"value\":\"a\",\"timestamp\":1.5}]}",
        "{\"records\":[{\"value\":\"a\",\"timestamp\":true}]}",
        "{\"encoding\":5,\"records\":[{\"value\":\"a\"}]}",
        "{\"encoding\":\"hex\",\"records\":[{\"value\":\"a\"}]}",
        /* a NUL ends the string for C: "base64" and "utf8" are not what was sent */
        "{\"encoding\":\"base64\\u0000x\",\"records\":[{\"value\":\"YQ==\"}]}",
        "{\"encoding\":\"utf8\\u0000\",\"records\":[{\"value\":\"a\"}]}",
        "{\"expected_offset\":\"3\",\"records\":[{\"value\":\"a\"}]}",
        "{\"expected_offset\":3.0,\"records\":[{\"value\":\"a\"}]}",
        /* a bad record after good ones refuses the whole batch */
        "{\"records\":[{\"value\":\"ok\"},{\"value\":\"ok\"},{\"value\":7}]}",
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        expect_rejected(BAD, cases[i], 400, "invalid_request");
    /* Bare scalars are not JSON texts to the parser (RFC 4627): 400 either way. */
    static const char *const scalars[] = {"\"records\"", "42", "null", "true"};
    for (size_t i = 0; i < sizeof scalars / sizeof scalars[0]; i++)
        expect_rejected(BAD, scalars[i], 400, NULL);
    append_still_works();
}

static void test_integers_out_of_range(void **state)
{
    (void)state;
    static const char *const cases[] = {
        "{\"expected_offset\":1e30,\"records\":[{\"value\":\"a\"}]}",
        "{\"expected_offset\":-5,\"records\":[{\"value\":\"a\"}]}",
        "{\"expected_offset\":-9223372036854775808,\"records\":[{\"value\":\"a\"}]}",
        "{\"records\":[{\"value\":\"a\",\"timestamp\":1e30}]}",
        "{\"records\":[{\"value\":\"a\",\"partition\":99999999999}]}",
        "{\"records\":[{\"value\":\"a\",\"partition\":-1}]}",
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        expect_rejected(BAD, cases[i], 400, "invalid_request");
    /* Through the keyed path as well. */
    expect_rejected("/v1/topics/bad/records", "{\"records\":[{\"value\":\"a\",\"partition\":99999999999}]}",
                    400, "invalid_request");
    /* ...and as raw numbers jansson cannot hold. */
    expect_rejected(BAD, "{\"expected_offset\":99999999999999999999,\"records\":[{\"value\":\"a\"}]}",
                    400, "malformed_json");
    /* A huge but valid expected_offset is a mismatch, not a crash. */
    snapshot before;
    snap(&before);
    ls_resp r;
    assert_int_equal(ls_post(S, BAD, "{\"expected_offset\":9223372036854775807,\"records\":[{\"value\":\"a\"}]}",
                             &r),
                     0);
    CHECK_ERR(r, 412, "expected_offset_mismatch");
    ls_resp_free(&r);
    assert_unchanged(&before, "expected_offset max");
}

/* ---- encodings ------------------------------------------------------------------ */

static void test_invalid_base64(void **state)
{
    (void)state;
    static const char *const cases[] = {
        "{\"encoding\":\"base64\",\"records\":[{\"value\":\"!!!!\"}]}",
        "{\"encoding\":\"base64\",\"records\":[{\"value\":\"abc\"}]}",   /* length */
        "{\"encoding\":\"base64\",\"records\":[{\"value\":\"YQ\"}]}",    /* no padding */
        "{\"encoding\":\"base64\",\"records\":[{\"value\":\"YQ==YQ==\"}]}",
        "{\"encoding\":\"base64\",\"records\":[{\"value\":\"YQ== \"}]}",
        "{\"encoding\":\"base64\",\"records\":[{\"value\":\"Y Q=\"}]}",
        "{\"encoding\":\"base64\",\"records\":[{\"value\":\"YWJj\\n\"}]}",
        "{\"encoding\":\"base64\",\"records\":[{\"value\":\"YW-j\"}]}", /* url alphabet */
        "{\"encoding\":\"base64\",\"records\":[{\"key\":\"%%%%\",\"value\":\"YQ==\"}]}",
        "{\"encoding\":\"base64\",\"records\":[{\"value\":\"YQ==\",\"headers\":[{\"name\":\"h\",\"value\":\"*\"}]}]}",
        "{\"encoding\":\"base64\",\"records\":[{\"value\":\"YQ==\"},{\"value\":\"no good\"}]}",
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        expect_rejected(BAD, cases[i], 422, "invalid_base64");
    /* The same strings are fine as utf8, and valid base64 is fine. */
    ls_resp r;
    assert_int_equal(ls_post(S, BAD, "{\"encoding\":\"base64\",\"records\":[{\"value\":\"YQ==\"}]}", &r), 0);
    assert_int_equal(r.status, 200);
    ls_resp_free(&r);
}

static void test_invalid_utf8(void **state)
{
    (void)state;
    /* Raw bytes that are not UTF-8 inside a JSON string. */
    static const char *const cases[] = {
        "{\"records\":[{\"value\":\"\xff\"}]}",
        "{\"records\":[{\"value\":\"ok\xfe\xff\"}]}",
        "{\"records\":[{\"value\":\"\xc0\xaf\"}]}",     /* overlong '/' */
        "{\"records\":[{\"value\":\"\xed\xa0\x80\"}]}", /* UTF-16 surrogate */
        "{\"records\":[{\"value\":\"\xf4\x90\x80\x80\"}]}", /* above U+10FFFF */
        "{\"records\":[{\"value\":\"\x80\"}]}",         /* lone continuation */
        "{\"records\":[{\"key\":\"\xff\",\"value\":\"a\"}]}",
        "{\"records\":[{\"value\":\"a\",\"headers\":[{\"name\":\"\xff\",\"value\":\"x\"}]}]}",
        "{\"encoding\":\"base64\",\"records\":[{\"value\":\"YQ==\",\"headers\":[{\"name\":\"\xff\",\"value\":null}]}]}",
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        expect_rejected(BAD, cases[i], 422, "invalid_utf8");
    /* Also when creating topics. */
    snapshot before;
    snap(&before);
    ls_resp r;
    assert_int_equal(ls_post(S, "/v1/topics", "{\"name\":\"\xff\"}", &r), 0);
    CHECK_ERR(r, 422, "invalid_utf8");
    ls_resp_free(&r);
    assert_unchanged(&before, "topic name 0xff");
}

/* ---- record rules ---------------------------------------------------------------- */

static void test_null_key_on_compacted_topic(void **state)
{
    (void)state;
    const char *p = "/v1/topics/compacted/partitions/0/records";
    expect_rejected(p, "{\"records\":[{\"value\":\"no key\"}]}", 422, "invalid_record");
    expect_rejected(p, "{\"records\":[{\"key\":null,\"value\":\"x\"}]}", 422, "invalid_record");
    expect_rejected(p, "{\"records\":[{\"key\":\"a\",\"value\":\"1\"},{\"value\":\"2\"}]}", 422,
                    "invalid_record");
    expect_rejected(p, "{\"records\":[{\"key\":null,\"value\":null}]}", 422, "invalid_record");
    /* Through the keyed path: every record failed, so a plain error. */
    expect_rejected("/v1/topics/compacted/records", "{\"records\":[{\"value\":\"x\"}]}", 422,
                    "invalid_record");
    /* Keys, including empty keys and tombstones, are fine. */
    ls_resp r;
    assert_int_equal(ls_post(S, p, "{\"records\":[{\"key\":\"\",\"value\":\"e\"},{\"key\":\"a\",\"value\":null}]}",
                             &r),
                     0);
    assert_int_equal(r.status, 200);
    ls_resp_free(&r);
}

/* A JSON client sent records, not batches: the refusal names the record by
 * its place in the request ("record 1", details.record), not by the batch
 * index and offset delta a binary producer gets.  Through the keyed path a
 * partition's batch holds only some of the request's records, so its place
 * in that batch is not its place in the request. */
static void test_null_key_names_the_json_record(void **state)
{
    (void)state;
    ls_resp r;
    assert_int_equal(ls_post(S, "/v1/topics/compacted/partitions/0/records",
                             "{\"records\":[{\"key\":\"a\",\"value\":\"1\"},{\"value\":\"2\"}]}", &r),
                     0);
    CHECK_ERR(r, 422, "invalid_record");
    assert_string_equal(ls_jstr(&r, "message"),
                        "record 1 has a null key, which a compacted topic does not accept");
    assert_int_equal(ls_jint(&r, "details.record"), 1);
    ls_resp_free(&r);

    assert_int_equal(ls_create_topic(S, "compacted2", 2, "{\"cleanup.policy\":\"compact\"}"), 201);
    /* Partition 1's batch is records 0 and 2 of the request; 2 is at fault. */
    assert_int_equal(ls_post(S, "/v1/topics/compacted2/records",
                             "{\"records\":[{\"key\":\"a\",\"value\":\"1\",\"partition\":1},"
                             "{\"key\":\"b\",\"value\":\"1\",\"partition\":0},"
                             "{\"value\":\"x\",\"partition\":1}]}",
                             &r),
                     0);
    assert_int_equal(r.status, 207);
    json_t *results = ls_jget(&r, "results");
    assert_int_equal(json_array_size(results), 2);
    json_t *err = json_object_get(json_array_get(results, 1), "error");
    assert_non_null(err);
    assert_string_equal(json_string_value(json_object_get(err, "message")),
                        "record 2 has a null key, which a compacted topic does not accept");
    assert_int_equal(json_integer_value(json_object_get(json_object_get(err, "details"), "record")),
                     2);
    ls_resp_free(&r);
}

static void test_record_list_shape(void **state)
{
    (void)state;
    expect_rejected(BAD, "{\"records\":[]}", 400, "invalid_request");
    expect_rejected(BAD, "{}", 400, "invalid_request");
    expect_rejected(BAD, "{\"encoding\":\"utf8\"}", 400, "invalid_request");
    /* a missing value (null must be explicit for a tombstone) */
    expect_rejected(BAD, "{\"records\":[{\"key\":\"k\"}]}", 400, "invalid_request");
    expect_rejected(BAD, "{\"records\":[{}]}", 400, "invalid_request");
    expect_rejected(BAD, "{\"records\":[{\"value\":\"a\"},{\"key\":\"k\",\"timestamp\":1}]}", 400,
                    "invalid_request");
    /* unknown fields at every level */
    expect_rejected(BAD, "{\"records\":[{\"value\":\"a\"}],\"colour\":\"red\"}", 400, "invalid_request");
    expect_rejected(BAD, "{\"records\":[{\"value\":\"a\",\"val\":\"b\"}]}", 400, "invalid_request");
    expect_rejected(BAD, "{\"records\":[{\"value\":\"a\",\"headers\":[{\"name\":\"h\",\"value\":\"x\",\"extra\":1}]}]}",
                    400, "invalid_request");
    expect_rejected(BAD, "{\"Records\":[{\"value\":\"a\"}]}", 400, "invalid_request");
    /* more records than http.max.records.per.request (50) */
    char body[4096];
    size_t n = (size_t)snprintf(body, sizeof body, "{\"records\":[");
    for (int i = 0; i < 51; i++)
        n += (size_t)snprintf(body + n, sizeof body - n, "%s{\"value\":\"%d\"}", i ? "," : "", i);
    snprintf(body + n, sizeof body - n, "]}");
    expect_rejected(BAD, body, 413, "request_too_large");
    /* ...while exactly 50 is fine. */
    n = (size_t)snprintf(body, sizeof body, "{\"records\":[");
    for (int i = 0; i < 50; i++)
        n += (size_t)snprintf(body + n, sizeof body - n, "%s{\"value\":\"%d\"}", i ? "," : "", i);
    snprintf(body + n, sizeof body - n, "]}");
    ls_resp r;
    assert_int_equal(ls_post(S, BAD, body, &r), 0);
    assert_int_equal(r.status, 200);
    assert_int_equal(ls_jint(&r, "record_count"), 50);
    ls_resp_free(&r);
}

/* ---- query parameters ------------------------------------------------------------ */

/* Every route takes a fixed set of query parameters; anything else, or one
 * given twice, is refused rather than ignored, so a conditional append whose
 * expected_offset went to the wrong place never writes unconditionally. */
static void test_query_parameters(void **state)
{
    (void)state;
    const char *rec = "{\"records\":[{\"value\":\"q\"}]}";
    expect_rejected(BAD "?expected_ofset=0", rec, 400, "invalid_request");
    expect_rejected("/v1/topics/bad/records?expected_offset=0", rec, 400, "invalid_request");
    expect_rejected_h("DELETE", "/v1/topics/bad?force=true", NULL, NULL, 0, NULL, 400,
                      "invalid_request");
    expect_rejected_h("GET", BAD "?offset=0&offset=1", NULL, NULL, 0, NULL, 400, "invalid_request");
    expect_rejected_h("GET", BAD "?max_records=1&max_records=5", NULL, NULL, 0, NULL, 400,
                      "invalid_request");
    /* A misspelt paging argument: ignored, it would answer a page of the
     * default size, not the one asked for. */
    expect_rejected_h("GET", "/v1/topics?limt=5", NULL, NULL, 0, NULL, 400, "invalid_request");
    expect_rejected_h("GET", "/v1/topics?limit=5&limit=6", NULL, NULL, 0, NULL, 400,
                      "invalid_request");
    /* earliest and latest are flags: a value other than true is refused
     * (?latest=0 read from the high watermark) */
    expect_rejected_h("GET", BAD "?latest=0", NULL, NULL, 0, NULL, 400, "invalid_request");
    expect_rejected_h("GET", BAD "?earliest=false", NULL, NULL, 0, NULL, 400, "invalid_request");
    ls_resp fl;
    static const char *const fine[] = {BAD "?latest", BAD "?latest=true", BAD "?earliest="};
    for (size_t i = 0; i < 3; i++) {
        assert_int_equal(ls_get(S, fine[i], &fl), 0);
        assert_int_equal(fl.status, 200);
        ls_resp_free(&fl);
    }
    /* Nor is a read parameter the answer's form does not apply: a raw read
     * is whole stored batches up to max_bytes (max_records=1 answered a
     * megabyte of them), and a stream ends only at max_records or
     * until_timestamp (max_bytes left an NDJSON stream open for good).  The
     * streams here carry max_records, so one that is not refused ends. */
    static const char *const raw_accept[] = {"Accept: application/octet-stream", NULL};
    static const char *const sse_accept[] = {"Accept: text/event-stream", NULL};
    static const char *const ndjson_accept[] = {"Accept: application/x-ndjson", NULL};
    static const struct {
        const char *query;
        const char *const *accept;
    } unapplied[] = {
        {"?offset=0&max_records=1", raw_accept},
        {"?offset=0&until_timestamp=1", raw_accept},
        {"?offset=0&encoding=base64", raw_accept},
        {"?offset=0&max_records=1&max_bytes=1", sse_accept},
        {"?offset=0&max_records=1&max_bytes=1", ndjson_accept},
        {"?offset=0&max_records=1&wait_ms=100", sse_accept},
        {"?offset=0&max_records=1&min_bytes=5", ndjson_accept},
    };
    for (size_t i = 0; i < sizeof unapplied / sizeof unapplied[0]; i++) {
        char q[160];
        snprintf(q, sizeof q, BAD "%s", unapplied[i].query);
        expect_rejected_h("GET", q, NULL, NULL, 0, unapplied[i].accept, 400, "invalid_request");
    }
    /* what they do apply is taken */
    assert_int_equal(ls_http(S, "GET", BAD "?offset=0&max_bytes=1&wait_ms=10&min_bytes=1", NULL,
                             NULL, 0, raw_accept, &fl),
                     0);
    assert_int_equal(fl.status, 200);
    ls_resp_free(&fl);
    assert_int_equal(ls_http(S, "GET", BAD "?offset=0&max_records=1&until_timestamp=9&encoding=base64",
                             NULL, NULL, 0, ndjson_accept, &fl),
                     0);
    assert_int_equal(fl.status, 200);
    ls_resp_free(&fl);

    /* Probes may add a query of their own: health ignores it. */
    ls_resp h;
    assert_int_equal(ls_get(S, "/health/ready?probe=lb-7", &h), 0);
    assert_int_equal(h.status, 200);
    ls_resp_free(&h);

    /* The JSON append takes expected_offset in the query, as the binary one does. */
    long long leo = ls_log_end_offset(S, "bad", 0);
    char path[128], body[128];
    snprintf(path, sizeof path, BAD "?expected_offset=%lld", leo + 5);
    expect_rejected(path, rec, 412, "expected_offset_mismatch");
    snprintf(body, sizeof body, "{\"expected_offset\":%lld,\"records\":[{\"value\":\"q\"}]}", leo + 1);
    snprintf(path, sizeof path, BAD "?expected_offset=%lld", leo);
    expect_rejected(path, body, 400, "invalid_request");
    ls_resp r;
    assert_int_equal(ls_post(S, path, rec, &r), 0);
    assert_int_equal(r.status, 200);
    assert_int_equal(ls_jint(&r, "base_offset"), leo);
    ls_resp_free(&r);

    /* A record naming another partition is not quietly put in this one. */
    expect_rejected(BAD, "{\"records\":[{\"value\":\"a\",\"partition\":1}]}", 400,
                    "invalid_request");
    assert_int_equal(ls_post(S, BAD, "{\"records\":[{\"value\":\"a\",\"partition\":0}]}", &r), 0);
    assert_int_equal(r.status, 200);
    ls_resp_free(&r);
    append_still_works();
}

/* ---- sizes ---------------------------------------------------------------------- */

/* {"records":[{"value":"xxx..."}]} of exactly total bytes. */
static char *body_of_size(size_t total)
{
    const char *head = "{\"records\":[{\"value\":\"", *tail = "\"}]}";
    size_t fixed = strlen(head) + strlen(tail);
    char *b = malloc(total + 1);
    assert_non_null(b);
    memcpy(b, head, strlen(head));
    memset(b + strlen(head), 'x', total - fixed);
    memcpy(b + total - strlen(tail), tail, strlen(tail) + 1);
    return b;
}

/* POSTs an oversized body that the server may cut off mid-upload: the answer
 * is 413 when the client gets one, the server stays up, nothing is written. */
static void too_large_or_reset(const char *body, size_t len, const char *const *hdrs)
{
    snapshot before;
    snap(&before);
    ls_resp r;
    if (ls_http(S, "POST", BAD, JSON, body, len, hdrs, &r) == 0) {
        CHECK_ERR(r, 413, "request_too_large");
        ls_resp_free(&r);
    }
    assert_int_equal(ls_live_status(S), 200);
    assert_unchanged(&before, BAD);
}

static void test_body_too_large(void **state)
{
    (void)state;
    /* 1 MB with a Content-Length: refused from its headers, before the body
     * is read.  A client that waits for 100 Continue gets the 413 and never
     * sends the body. */
    char *big = body_of_size(1000000);
    static const char *const expect[] = {"Expect: 100-continue", NULL};
    expect_rejected_h("POST", BAD, JSON, big, 1000000, expect, 413, "request_too_large");
    ls_resp r;
    assert_int_equal(ls_http(S, "POST", BAD, JSON, big, 1000000, expect, &r), 0);
    CHECK_ERR(r, 413, "request_too_large");
    assert_int_equal(ls_jint(&r, "details.max_bytes"), 65536);
    ls_resp_free(&r);
    /* One that sends the body at once gets the same answer, or, when the
     * connection's close overtakes it while the body is still being sent,
     * a reset (libmicrohttpd closes a connection answered before its body);
     * never anything else, and nothing is written. */
    too_large_or_reset(big, 1000000, NULL);
    /* The same without a Content-Length (chunked): refused while streaming.
     * libmicrohttpd cannot answer in the middle of an upload, so the server
     * reads at most 64 KiB past the limit and then closes the connection;
     * nothing is written either way. */
    static const char *const chunked[] = {"Transfer-Encoding: chunked", NULL};
    too_large_or_reset(big, 1000000, chunked);
    /* Just over the limit, and on the topic route. */
    free(big);
    big = body_of_size(65537);
    expect_rejected_h("POST", BAD, JSON, big, 65537, NULL, 413, "request_too_large");
    expect_rejected_h("POST", BAD, JSON, big, 65537, chunked, 413, "request_too_large");
    expect_rejected_h("POST", "/v1/topics", JSON, big, 65537, NULL, 413, "request_too_large");
    free(big);
    /* Exactly the limit is accepted, with and without Content-Length. */
    big = body_of_size(65536);
    assert_int_equal(ls_http(S, "POST", BAD, JSON, big, 65536, NULL, &r), 0);
    assert_int_equal(r.status, 200);
    ls_resp_free(&r);
    assert_int_equal(ls_http(S, "POST", BAD, JSON, big, 65536, chunked, &r), 0);
    assert_int_equal(r.status, 200);
    ls_resp_free(&r);
    free(big);
    /* A small chunked append works. */
    const char *ok = "{\"records\":[{\"value\":\"chunked\"}]}";
    assert_int_equal(ls_http(S, "POST", BAD, JSON, ok, strlen(ok), chunked, &r), 0);
    assert_int_equal(r.status, 200);
    ls_resp_free(&r);
    assert_int_equal(ls_live_status(S), 200);
}

static void test_batch_over_max_message_bytes(void **state)
{
    (void)state;
    const char *p = "/v1/topics/small/partitions/0/records";
    char value[5001];
    memset(value, 'q', 5000);
    value[5000] = 0;
    char body[6000];
    snprintf(body, sizeof body, "{\"records\":[{\"key\":\"k\",\"value\":\"%s\"}]}", value);
    snapshot before;
    snap(&before);
    ls_resp r;
    assert_int_equal(ls_post(S, p, body, &r), 0);
    CHECK_ERR(r, 413, "record_too_large");
    assert_string_equal(ls_jstr(&r, "kafka_error"), "MESSAGE_TOO_LARGE");
    assert_int_equal(ls_jint(&r, "details.max_bytes"), 1000);
    ls_resp_free(&r);
    assert_unchanged(&before, "5000-byte value");
    /* Many small records adding up past the limit: the batch counts. */
    size_t n = (size_t)snprintf(body, sizeof body, "{\"records\":[");
    for (int i = 0; i < 30; i++)
        n += (size_t)snprintf(body + n, sizeof body - n, "%s{\"value\":\"%.60s\"}", i ? "," : "", value);
    snprintf(body + n, sizeof body - n, "]}");
    expect_rejected(p, body, 413, "record_too_large");
    /* Keyed path too. */
    snprintf(body, sizeof body, "{\"records\":[{\"key\":\"k\",\"value\":\"%s\"}]}", value);
    expect_rejected("/v1/topics/small/records", body, 413, "record_too_large");
    /* A small batch fits. */
    assert_int_equal(ls_post(S, p, "{\"records\":[{\"value\":\"tiny\"}]}", &r), 0);
    assert_int_equal(r.status, 200);
    assert_true(ls_jint(&r, "batch_bytes") <= 1000);
    ls_resp_free(&r);
}

/* ---- addressing ------------------------------------------------------------------- */

static void test_unknown_topic_or_partition(void **state)
{
    (void)state;
    const char *rec = "{\"records\":[{\"value\":\"a\"}]}";
    expect_rejected("/v1/topics/nosuch/partitions/0/records", rec, 404, "unknown_topic");
    expect_rejected("/v1/topics/nosuch/records", rec, 404, "unknown_topic");
    expect_rejected("/v1/topics/bad/partitions/2/records", rec, 404, "unknown_partition");
    expect_rejected("/v1/topics/bad/partitions/2147483647/records", rec, 404, "unknown_partition");
    expect_rejected("/v1/topics/bad/records", "{\"records\":[{\"value\":\"a\",\"partition\":2}]}", 404,
                    "unknown_partition");
    /* Nothing was created for the unknown topic. */
    ls_resp r;
    assert_int_equal(ls_get(S, "/v1/topics/nosuch", &r), 0);
    CHECK_ERR(r, 404, "unknown_topic");
    ls_resp_free(&r);
}

static void test_wrong_content_type(void **state)
{
    (void)state;
    const char *rec = "{\"records\":[{\"value\":\"a\"}]}";
    static const char *const types[] = {
        "text/plain", "application/x-www-form-urlencoded", "application/xml",
        "multipart/form-data; boundary=x", "application/octet-stream-ish",
        "application/json-seq", "application/jsonx", "text/json",
    };
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        expect_rejected_h("POST", BAD, types[i], rec, strlen(rec), NULL, 415, "unsupported_media_type");
        expect_rejected_h("POST", "/v1/topics/bad/records", types[i], rec, strlen(rec), NULL, 415,
                          "unsupported_media_type");
    }
    /* The partition's append takes binary batches too, and its 415 says so. */
    ls_resp r;
    assert_int_equal(ls_http(S, "POST", BAD, "text/plain", rec, strlen(rec), NULL, &r), 0);
    CHECK_ERR(r, 415, "unsupported_media_type");
    const char *msg = json_string_value(ls_jget(&r, "message"));
    assert_non_null(msg);
    assert_non_null(strstr(msg, "application/json"));
    assert_non_null(strstr(msg, "application/octet-stream"));
    ls_resp_free(&r);
    /* Creating a topic takes JSON too. */
    expect_rejected_h("POST", "/v1/topics", "text/plain", "{\"name\":\"tp\"}", 13, NULL, 415,
                      "unsupported_media_type");
    assert_int_equal(ls_get(S, "/v1/topics/tp", &r), 0);
    CHECK_ERR(r, 404, "unknown_topic");
    ls_resp_free(&r);
    /* JSON is UTF-8: another declared charset is refused, not misread. */
    static const char *const charsets[] = {"application/json; charset=latin1",
                                           "application/json;charset=\"ISO-8859-1\"",
                                           "application/json; q=1; charset=utf-16"};
    for (size_t i = 0; i < sizeof charsets / sizeof charsets[0]; i++)
        expect_rejected_h("POST", BAD, charsets[i], rec, strlen(rec), NULL, 415,
                          "unsupported_media_type");
    /* Parameters and case are fine. */
    static const char *const fine[] = {"application/json; charset=utf-8",
                                       "application/json;charset=\"UTF-8\"",
                                       "application/json; charset=utf8"};
    for (size_t i = 0; i < sizeof fine / sizeof fine[0]; i++) {
        assert_int_equal(ls_http(S, "POST", BAD, fine[i], rec, strlen(rec), NULL, &r), 0);
        assert_int_equal(r.status, 200);
        ls_resp_free(&r);
    }
    assert_int_equal(ls_http(S, "POST", BAD, "Application/JSON", rec, strlen(rec), NULL, &r), 0);
    assert_int_equal(r.status, 200);
    ls_resp_free(&r);
    /* A compressed body is refused for what it is, not as malformed JSON or
     * a corrupt batch; identity is no encoding at all. */
    const char *const gz[] = {"Content-Encoding: gzip", NULL};
    expect_rejected_h("POST", BAD, JSON, rec, strlen(rec), gz, 415, "unsupported_media_type");
    expect_rejected_h("POST", BAD, "application/octet-stream", rec, strlen(rec), gz, 415,
                      "unsupported_media_type");
    expect_rejected_h("POST", "/v1/topics", JSON, "{\"name\":\"gz\"}", 13, gz, 415,
                      "unsupported_media_type");
    const char *const id[] = {"Content-Encoding: identity", NULL};
    assert_int_equal(ls_http(S, "POST", BAD, JSON, rec, strlen(rec), id, &r), 0);
    assert_int_equal(r.status, 200);
    ls_resp_free(&r);
}

static void test_bad_partition_in_path(void **state)
{
    (void)state;
    const char *rec = "{\"records\":[{\"value\":\"a\"}]}";
    static const char *const parts[] = {"x", "-1", "1x", "0x1", "%201", "%2B0", "1.0",
                                        "99999999999", "2147483648", "-0x"};
    for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++) {
        char path[256];
        snprintf(path, sizeof path, "/v1/topics/bad/partitions/%s/records", parts[i]);
        expect_rejected(path, rec, 400, "invalid_request");
        snprintf(path, sizeof path, "/v1/topics/bad/partitions/%s", parts[i]);
        expect_rejected_h("GET", path, NULL, NULL, 0, NULL, 400, "invalid_request");
    }
    /* An empty segment is no route at all. */
    expect_rejected("/v1/topics/bad/partitions//records", rec, 404, "route_not_found");
    append_still_works();
}

/* The limits this server was started with are the ones it reports. */
static void test_limits_reported(void **state)
{
    (void)state;
    ls_resp r;
    assert_int_equal(ls_get(S, "/v1/info", &r), 0);
    assert_int_equal(r.status, 200);
    assert_int_equal(ls_jint(&r, "limits.max_request_bytes"), 65536);
    assert_int_equal(ls_jint(&r, "limits.max_inflight_request_bytes"), 268435456);
    assert_int_equal(ls_jint(&r, "limits.max_records_per_request"), 50);
    ls_resp_free(&r);
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
        cmocka_unit_test(test_malformed_json),
        cmocka_unit_test(test_truncated_json),
        cmocka_unit_test(test_wrong_types),
        cmocka_unit_test(test_integers_out_of_range),
        cmocka_unit_test(test_invalid_base64),
        cmocka_unit_test(test_invalid_utf8),
        cmocka_unit_test(test_null_key_on_compacted_topic),
        cmocka_unit_test(test_null_key_names_the_json_record),
        cmocka_unit_test(test_record_list_shape),
        cmocka_unit_test(test_query_parameters),
        cmocka_unit_test(test_body_too_large),
        cmocka_unit_test(test_batch_over_max_message_bytes),
        cmocka_unit_test(test_unknown_topic_or_partition),
        cmocka_unit_test(test_wrong_content_type),
        cmocka_unit_test(test_bad_partition_in_path),
        cmocka_unit_test(test_limits_reported),
        cmocka_unit_test(test_zz_clean_stop),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
