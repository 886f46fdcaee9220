/*
 * test_api_codec.c - the pure parts of the HTTP layer: Kafka's murmur2
 * partitioner (Kafka's own test values), strict base64, the append-body
 * parser's refusals, record JSON, the route table and the error table (with
 * the Kafka error name and number of each code).
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "api_codec.h"
#include "api_utf8.h"
#include "api_errors.h"
#include "api_router.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static void test_murmur2_kafka_values(void **state)
{
    (void)state;
    /* From Kafka's UtilsTest.testMurmur2. */
    static const struct {
        const char *in;
        int32_t out;
    } cases[] = {
        {"21", -973932308},
        {"foobar", -790332482},
        {"a-little-bit-long-string", -985981536},
        {"a-little-bit-longer-string", -1486304829},
        {"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971},
        {"abc", 479470107},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        assert_int_equal(api_murmur2((const uint8_t *)cases[i].in, strlen(cases[i].in)), cases[i].out);
    /* toPositive(h) % n stays in range and is stable. */
    for (int n = 1; n < 50; n++) {
        int32_t p = api_partition_for_key((const uint8_t *)"user-42", 7, n);
        assert_true(p >= 0 && p < n);
        assert_int_equal(p, api_partition_for_key((const uint8_t *)"user-42", 7, n));
    }
}

static void test_base64_strict(void **state)
{
    (void)state;
    uint8_t out[64];
    assert_int_equal(api_base64_decode("aGVsbG8=", 8, out), 5);
    assert_memory_equal(out, "hello", 5);
    assert_int_equal(api_base64_decode("AP8=", 4, out), 2);
    assert_int_equal(out[0], 0x00);
    assert_int_equal(out[1], 0xff);
    assert_int_equal(api_base64_decode("", 0, out), 0);
    assert_int_equal(api_base64_decode("aGVsbG8", 7, out), -1);   /* no padding */
    assert_int_equal(api_base64_decode("aGV$bG8=", 8, out), -1);  /* bad char */
    assert_int_equal(api_base64_decode("aG=sbG8=", 8, out), -1);  /* padding inside */
}

static int parse(const char *json, api_append_body *b, api_codec_err *e)
{
    memset(e, 0, sizeof *e);
    return api_parse_append((const uint8_t *)json, strlen(json), 1000, 100, b, e);
}

static void test_parse_append_ok(void **state)
{
    (void)state;
    api_append_body b;
    api_codec_err e;
    assert_int_equal(parse("{\"encoding\":\"base64\",\"expected_offset\":7,\"records\":["
                           "{\"key\":\"AP8=\",\"value\":null,\"timestamp\":5,"
                           "\"headers\":[{\"name\":\"h\",\"value\":\"eA==\"}]},"
                           "{\"value\":\"\"}]}",
                           &b, &e),
                     0);
    assert_int_equal(b.n, 2);
    assert_int_equal(b.expected_offset, 7);
    assert_int_equal(b.recs[0].key_len, 2);
    assert_int_equal(b.recs[0].key[1], 0xff);
    assert_int_equal(b.recs[0].value_len, -1);
    assert_int_equal(b.recs[0].timestamp, 5);
    assert_int_equal(b.recs[0].header_count, 1);
    assert_int_equal(b.recs[0].headers[0].value_len, 1);
    assert_int_equal(b.recs[0].headers[0].value[0], 'x');
    assert_null(b.recs[1].key);
    assert_int_equal(b.recs[1].value_len, 0); /* "" is an empty value, not a tombstone */
    assert_int_equal(b.recs[1].timestamp, 1000); /* defaults to now */
    uint8_t *batch;
    size_t len;
    assert_int_equal(api_encode_batch(b.recs, b.n, &batch, &len), 0);
    eng_batch_header h;
    assert_int_equal(eng_batch_validate(batch, len, &h), 0);
    assert_int_equal(h.record_count, 2);
    free(batch);
    api_append_body_free(&b);
}

static void test_parse_append_refusals(void **state)
{
    (void)state;
    static const struct {
        const char *json;
        const char *code;
    } cases[] = {
        {"", "malformed_json"},
        {"{\"records\":[", "malformed_json"},
        {"[1,2]", "invalid_request"},
        {"{\"records\":[]}", "invalid_request"},
        {"{\"records\":{}}", "invalid_request"},
        {"{\"records\":[{\"key\":\"a\"}]}", "invalid_request"},          /* value missing */
        {"{\"records\":[{\"value\":5}]}", "invalid_request"},
        {"{\"records\":[{\"value\":\"v\",\"vlaue\":1}]}", "invalid_request"},
        {"{\"records\":[{\"value\":\"v\",\"timestamp\":-5}]}", "invalid_timestamp"},
        {"{\"records\":[{\"value\":\"v\",\"timestamp\":1.5}]}", "invalid_request"},
        {"{\"encoding\":\"base64\",\"records\":[{\"value\":\"***\"}]}", "invalid_base64"},
        {"{\"encoding\":\"hex\",\"records\":[{\"value\":\"v\"}]}", "invalid_request"},
        {"{\"expected_offset\":-1,\"records\":[{\"value\":\"v\"}]}", "invalid_request"},
        {"{\"records\":[{\"value\":\"v\",\"headers\":[{\"value\":\"x\"}]}]}", "invalid_request"},
        {"{\"records\":[{\"value\":\"v\"}],\"expected_offset\":99999999999999999999}", "malformed_json"},
        {"{\"records\":[{\"value\":\"\xff\"}]}", "invalid_utf8"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        api_append_body b;
        api_codec_err e;
        assert_int_equal(parse(cases[i].json, &b, &e), -1);
        assert_non_null(e.code);
        if (strcmp(e.code, cases[i].code) != 0)
            fail_msg("case %zu (%s): got %s (%s)", i, cases[i].json, e.code, e.message);
    }
    /* Over the per-request record limit. */
    char big[4096] = "{\"records\":[";
    for (int i = 0; i < 101; i++)
        strcat(big, i ? ",{\"value\":\"v\"}" : "{\"value\":\"v\"}");
    strcat(big, "]}");
    api_append_body b;
    api_codec_err e;
    assert_int_equal(parse(big, &b, &e), -1);
    assert_string_equal(e.code, "request_too_large");
}

static void test_record_json(void **state)
{
    (void)state;
    eng_record r = {.offset = 3, .timestamp = 9, .key = (const uint8_t *)"k", .key_len = 1,
                    .value = (const uint8_t *)"\xff", .value_len = 1};
    r.headers = r.headers_end = (const uint8_t *)"";
    api_codec_err e = {0};
    assert_null(api_record_json(&r, false, false, &e)); /* not UTF-8 */
    assert_string_equal(e.code, "invalid_utf8");
    json_t *o = api_record_json(&r, true, true, &e);
    assert_non_null(o);
    assert_string_equal(json_string_value(json_object_get(o, "value")), "/w==");
    assert_string_equal(json_string_value(json_object_get(o, "timestamp_type")), "LogAppendTime");
    json_decref(o);

    /* Past the first eight bytes too: a stray byte is refused, UTF-8 kept
     * as it is (NUL included), in values and in header names. */
    static const struct {
        const char *bytes;
        size_t len;
        bool ok;
    } cases[] = {
        {"abcdefgh\xff", 9, false},          {"abcdefghijklmno\x80p", 17, false},
        {"abcdefghij\xc3\xa9", 12, true},     {"abcdefghijklmnop\xe2\x82", 18, false},
        {"abcdefgh\0ijklmnopq", 18, true}, {"", 0, true},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        r.value = (const uint8_t *)cases[i].bytes;
        r.value_len = (int32_t)cases[i].len;
        o = api_record_json(&r, false, false, &e);
        assert_int_equal(o != NULL, cases[i].ok);
        if (o) {
            json_t *v = json_object_get(o, "value");
            assert_int_equal(json_string_length(v), cases[i].len);
            assert_memory_equal(json_string_value(v), cases[i].bytes, cases[i].len);
            json_decref(o);
        }
    }
    /* one header, name "abcdefghij\xff", value "v" */
    static const uint8_t hdr[] = {0x02, 22, 'a', 'b', 'c', 'd', 'e', 'f', 'g', 'h', 'i', 'j', 0xff, 2, 'v'};
    r.value = (const uint8_t *)"v";
    r.value_len = 1;
    r.headers = hdr + 1;
    r.headers_end = hdr + sizeof hdr;
    /* Header names are strings: the bad byte reads as U+FFFD, as Kafka's
     * Java client decodes it, in utf8 and base64 reads alike. */
    for (int base64 = 0; base64 < 2; base64++) {
        json_t *rec = api_record_json(&r, false, base64, &e);
        assert_non_null(rec);
        json_t *h = json_array_get(json_object_get(rec, "headers"), 0);
        assert_string_equal(json_string_value(json_object_get(h, "name")), "abcdefghij\xEF\xBF\xBD");
        json_decref(rec);
    }
}

/* What is not UTF-8 is replaced as Java's decoder replaces it: one U+FFFD
 * per maximal ill-formed subpart (a truncated sequence is one), or each bad
 * byte as \xNN for messages. */
static void test_utf8_repair(void **state)
{
    (void)state;
    static const struct {
        const char *in, *fffd, *hex;
    } cases[] = {
        {"plain", "plain", "plain"},
        {"caf\xc3\xa9", "caf\xc3\xa9", "caf\xc3\xa9"},
        {"a\xe2\x82" "b", "a\xef\xbf\xbd" "b", "a\\xE2\\x82" "b"},   /* truncated 3-byte */
        {"\xff\xfe", "\xef\xbf\xbd\xef\xbf\xbd", "\\xFF\\xFE"},
        {"\xe0\x80", "\xef\xbf\xbd\xef\xbf\xbd", "\\xE0\\x80"},       /* overlong lead */
        {"\xed\xa0\x80", "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd", "\\xED\\xA0\\x80"}, /* surrogate */
        {"\xf0\x9f\x98", "\xef\xbf\xbd", "\\xF0\\x9F\\x98"},          /* truncated 4-byte */
        {"\xf0\x9f\x98\x80", "\xf0\x9f\x98\x80", "\xf0\x9f\x98\x80"}, /* whole */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        for (int hex = 0; hex < 2; hex++) {
            size_t len;
            char *out = api_utf8_repair((const uint8_t *)cases[i].in, strlen(cases[i].in), hex, &len);
            assert_non_null(out);
            const char *want = hex ? cases[i].hex : cases[i].fffd;
            if (strcmp(out, want))
                fail_msg("case %zu (%s): got '%s'", i, hex ? "hex" : "U+FFFD", out);
            assert_int_equal(len, strlen(want));
            free(out);
        }
    }
}

static void test_routes(void **state)
{
    (void)state;
    api_params p;
    bool known;
    char allow[64];
    const api_route *r = api_route_match("GET", "/v1/topics/t1/partitions/3/records/17", &p, &known,
                                         allow, sizeof allow);
    assert_non_null(r);
    assert_string_equal(api_param(&p, "topic"), "t1");
    assert_string_equal(api_param(&p, "partition"), "3");
    assert_string_equal(api_param(&p, "offset"), "17");
    assert_null(api_route_match("PUT", "/v1/topics/t1", &p, &known, allow, sizeof allow));
    assert_true(known);
    assert_string_equal(allow, "GET, HEAD, DELETE, PATCH");
    /* HEAD takes the GET route; no route is HEAD-only or answers HEAD for POST. */
    const api_route *g = api_route_match("GET", "/v1/topics/t1", &p, &known, allow, sizeof allow);
    assert_ptr_equal(api_route_match("HEAD", "/v1/topics/t1", &p, &known, allow, sizeof allow), g);
    assert_null(api_route_match("HEAD", "/v1/topics/t1/records", &p, &known, allow, sizeof allow));
    assert_true(known);
    assert_null(api_route_match("GET", "/v1/nothing", &p, &known, allow, sizeof allow));
    assert_false(known);
    assert_null(api_route_match("GET", "/v1/topics//partitions/0", &p, &known, allow, sizeof allow));
    /* Every route declares a handler and, except health and the dashboard
     * page, a role. */
    for (const api_route *x = api_routes(); x->method; x++) {
        assert_non_null(x->handler);
        if (strncmp(x->pattern, "/health/", 8) != 0 && strcmp(x->pattern, "/") != 0)
            assert_true(x->role != API_ROLE_NONE);
    }
}

static void test_error_table(void **state)
{
    (void)state;
    assert_int_equal(api_error_status(api_error_code_for(ENG_EOFFSET)), 416);
    assert_int_equal(api_error_status(api_error_code_for(ENG_ETOOLARGE)), 413);
    assert_int_equal(api_error_status(api_error_code_for(ENG_ECONFIG)), 422);
    assert_int_equal(api_error_status(api_error_code_for(ENG_ETOPICEXISTS)), 409);
    assert_int_equal(api_error_status(api_error_code_for(ENG_EEXPECTED)), 412);
    assert_int_equal(api_error_status(api_error_code_for(-ENOSPC)), 507);
    assert_int_equal(api_error_status(api_error_code_for(ENG_EOFFLINE)), 503);
    assert_int_equal(api_error_status(api_error_code_for(-EIO)), 500);
    api_request req = {.method = "GET", .path = "/x", .request_id = "abc"};
    api_response resp = {0};
    eng_errdetail d = {0};
    eng_errdetail_bounds(&d, 0, 122);
    eng_fail(&d, ENG_EOFFSET, "offset 500 is outside [0, 122) for orders-0");
    api_error_from_engine(&resp, &req, ENG_EOFFSET, &d);
    assert_int_equal(resp.status, 416);
    json_t *o = resp.json;
    assert_string_equal(json_string_value(json_object_get(o, "error_code")), "offset_out_of_range");
    assert_string_equal(json_string_value(json_object_get(o, "kafka_error")), "OFFSET_OUT_OF_RANGE");
    assert_int_equal(json_integer_value(json_object_get(o, "kafka_error_code")), 1);
    assert_true(json_is_false(json_object_get(o, "retriable")));
    assert_int_equal(json_integer_value(json_object_get(json_object_get(o, "details"), "high_watermark")), 122);
    assert_string_equal(json_string_value(json_object_get(o, "request_id")), "abc");
    api_response_clear(&resp);
}

/* Every error code's status and retriability as README's Errors table
 * gives them (503 and 507 are retriable, so are 429 and 409 busy), and the
 * engine code each one comes from. */
static void test_error_table_complete(void **state)
{
    (void)state;
    static const struct {
        const char *code;
        int status;
        bool retriable;
        int from_engine; /* 0: not an engine error */
    } t[] = {
        {"malformed_json", 400, false, 0},
        {"invalid_request", 400, false, ENG_EINVAL},
        {"invalid_partitions", 400, false, 0},
        {"unauthorized", 401, false, 0},
        {"forbidden", 403, false, 0},
        {"unknown_topic", 404, false, ENG_ENOTOPIC},
        {"unknown_partition", 404, false, ENG_ENOPARTITION},
        {"segment_not_found", 404, false, 0},
        {"record_not_found", 404, false, 0},
        {"route_not_found", 404, false, 0},
        {"not_found", 404, false, ENG_ENOTFOUND},
        {"method_not_allowed", 405, false, 0},
        {"topic_exists", 409, false, ENG_ETOPICEXISTS},
        {"busy", 409, true, ENG_EBUSY},
        {"expected_offset_mismatch", 412, false, ENG_EEXPECTED},
        {"request_too_large", 413, false, 0},
        {"record_too_large", 413, false, ENG_ETOOLARGE},
        {"unsupported_media_type", 415, false, 0},
        {"offset_out_of_range", 416, false, ENG_EOFFSET},
        {"invalid_config", 422, false, ENG_ECONFIG},
        {"invalid_topic_name", 422, false, ENG_ETOPICNAME},
        {"invalid_record", 422, false, ENG_ENULLKEY},
        {"invalid_record", 422, false, ENG_EUNSUPPORTED},
        {"invalid_timestamp", 422, false, ENG_ETIMESTAMP},
        {"invalid_base64", 422, false, 0},
        {"invalid_utf8", 422, false, 0},
        {"corrupt_record", 422, false, ENG_ECORRUPT},
        {"corrupt_record", 422, false, ENG_ECRC},
        {"not_compacted", 422, false, ENG_ENOTCOMPACT},
        {"too_many_waiters", 429, true, ENG_ELIMIT},
        {"internal_error", 500, false, -EIO},
        {"not_ready", 503, true, ENG_ENOTREADY},
        {"log_dir_offline", 503, true, ENG_EOFFLINE},
        {"shutting_down", 503, true, ENG_ESHUTDOWN},
        {"overloaded", 503, true, 0},
        {"disk_full", 507, true, -ENOSPC},
        {"disk_full", 507, true, -EDQUOT},
        {"too_many_open_files", 507, true, -EMFILE},
        {"too_many_open_files", 507, true, -ENFILE},
        {"out_of_memory", 507, true, -ENOMEM},
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        if (api_error_status(t[i].code) != t[i].status)
            fail_msg("%s: status %d, README says %d", t[i].code, api_error_status(t[i].code),
                     t[i].status);
        json_t *o = api_error_object(NULL, t[i].code, "m", NULL);
        assert_non_null(o);
        assert_string_equal(json_string_value(json_object_get(o, "error_code")), t[i].code);
        if (json_is_true(json_object_get(o, "retriable")) != t[i].retriable)
            fail_msg("%s: retriable should be %d", t[i].code, t[i].retriable);
        json_decref(o);
        if (t[i].from_engine && strcmp(api_error_code_for(t[i].from_engine), t[i].code))
            fail_msg("engine code %d gives %s, not %s", t[i].from_engine,
                     api_error_code_for(t[i].from_engine), t[i].code);
    }
    /* An unknown code is an internal error, never a 2xx. */
    assert_int_equal(api_error_status("no_such_code"), 500);
}

/* The Kafka error each code names (README's Errors table, DESIGN §6's body):
 * the name and number of Kafka's Errors enum, or null for codes Kafka has
 * no error for. */
static void test_error_table_kafka_codes(void **state)
{
    (void)state;
    static const struct {
        const char *code;
        const char *kafka; /* NULL: no Kafka error */
        int kafka_code;
    } t[] = {
        {"invalid_request", "INVALID_REQUEST", 42},
        {"malformed_json", "INVALID_REQUEST", 42},
        {"invalid_partitions", "INVALID_PARTITIONS", 37},
        {"unauthorized", "SASL_AUTHENTICATION_FAILED", 58},
        {"forbidden", "TOPIC_AUTHORIZATION_FAILED", 29},
        {"route_not_found", NULL, 0},
        {"unknown_topic", "UNKNOWN_TOPIC_OR_PARTITION", 3},
        {"unknown_partition", "UNKNOWN_TOPIC_OR_PARTITION", 3},
        {"record_not_found", NULL, 0},
        {"topic_exists", "TOPIC_ALREADY_EXISTS", 36},
        {"expected_offset_mismatch", NULL, 0},
        {"record_too_large", "MESSAGE_TOO_LARGE", 10},
        {"offset_out_of_range", "OFFSET_OUT_OF_RANGE", 1},
        {"invalid_config", "INVALID_CONFIG", 40},
        {"invalid_topic_name", "INVALID_TOPIC_EXCEPTION", 17},
        {"invalid_record", "INVALID_RECORD", 87},
        {"corrupt_record", "CORRUPT_MESSAGE", 2},
        {"invalid_timestamp", "INVALID_TIMESTAMP", 32},
        {"invalid_base64", "INVALID_RECORD", 87},
        {"invalid_utf8", "INVALID_RECORD", 87},
        {"too_many_waiters", "THROTTLING_QUOTA_EXCEEDED", 89},
        {"internal_error", "UNKNOWN_SERVER_ERROR", -1},
        {"not_ready", "LEADER_NOT_AVAILABLE", 5},
        {"log_dir_offline", "KAFKA_STORAGE_ERROR", 56},
        {"shutting_down", "BROKER_NOT_AVAILABLE", 8},
        {"overloaded", "THROTTLING_QUOTA_EXCEEDED", 89},
        {"disk_full", "KAFKA_STORAGE_ERROR", 56},
        {"too_many_open_files", "KAFKA_STORAGE_ERROR", 56},
        {"out_of_memory", "KAFKA_STORAGE_ERROR", 56},
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        json_t *o = api_error_object(NULL, t[i].code, "m", NULL);
        assert_non_null(o);
        json_t *name = json_object_get(o, "kafka_error"), *num = json_object_get(o, "kafka_error_code");
        if (!t[i].kafka) {
            if (!json_is_null(name) || !json_is_null(num))
                fail_msg("%s: kafka_error should be null", t[i].code);
        } else if (!json_is_string(name) || strcmp(json_string_value(name), t[i].kafka) ||
                   !json_is_integer(num) || json_integer_value(num) != t[i].kafka_code) {
            fail_msg("%s: kafka_error %s %lld, want %s %d", t[i].code,
                     json_is_string(name) ? json_string_value(name) : "(not a string)",
                     (long long)json_integer_value(num), t[i].kafka, t[i].kafka_code);
        }
        json_decref(o);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_murmur2_kafka_values), cmocka_unit_test(test_base64_strict),
        cmocka_unit_test(test_parse_append_ok),      cmocka_unit_test(test_parse_append_refusals),
        cmocka_unit_test(test_record_json),          cmocka_unit_test(test_utf8_repair),
        cmocka_unit_test(test_routes),
        cmocka_unit_test(test_error_table),
        cmocka_unit_test(test_error_table_complete),
        cmocka_unit_test(test_error_table_kafka_codes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
