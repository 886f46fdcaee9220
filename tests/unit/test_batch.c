/*
 * test_batch.c - CRC-32C, varints and the RecordBatch v2 codec against
 * Kafka's own test vectors (tests/data/kafka-vectors.txt).
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "eng_batch.h"
#include "eng_crc32c.h"
#include "eng_error.h"
#include "eng_varint.h"
#include "support.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void test_crc32c_check_value(void **state)
{
    (void)state;
    assert_int_equal(eng_crc32c_sw(0, "123456789", 9), 0xE3069283u);
    assert_int_equal(eng_crc32c(0, "123456789", 9), 0xE3069283u);
    if (eng_crc32c_hw_available())
        assert_int_equal(eng_crc32c_hw(0, "123456789", 9), 0xE3069283u);
}

/* The hardware path cuts inputs of 768 bytes and more into three blocks
 * CRC'd side by side and joined (256-byte blocks, 8 KiB ones from 24 KiB):
 * every length around those thresholds, at every alignment, from a nonzero
 * starting CRC, must match the table path byte for byte. */
static void test_crc32c_three_way_joins(void **state)
{
    (void)state;
    if (!eng_crc32c_hw_available())
        skip();
    size_t cap = 3 * 8192 * 2 + 3 * 256 + 64;
    uint8_t *buf = malloc(cap);
    assert_non_null(buf);
    uint32_t x = 2463534242u;
    for (size_t i = 0; i < cap; i++) {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        buf[i] = (uint8_t)x;
    }
    static const size_t around[] = {3 * 256, 3 * 8192, 2 * 3 * 8192, 3 * 8192 + 3 * 256};
    for (size_t a = 0; a < sizeof around / sizeof around[0]; a++) {
        for (size_t len = around[a] - 9; len <= around[a] + 9; len++) {
            for (size_t off = 0; off < 8; off++) {
                assert_true(off + len <= cap);
                uint32_t sw = eng_crc32c_sw(0x1234abcdu, buf + off, len);
                assert_int_equal(sw, eng_crc32c_hw(0x1234abcdu, buf + off, len));
            }
        }
    }
    for (size_t len = 700; len < cap - 8; len += 997)
        assert_int_equal(eng_crc32c_sw(0, buf + 3, len), eng_crc32c_hw(0, buf + 3, len));
    free(buf);
}

static void test_crc32c_paths_agree(void **state)
{
    (void)state;
    uint8_t buf[4099];
    for (size_t i = 0; i < sizeof buf; i++)
        buf[i] = (uint8_t)(i * 131 + 7);
    for (size_t len = 0; len < sizeof buf; len += 37) {
        for (size_t off = 0; off < 8; off++) {
            if (off + len > sizeof buf)
                continue;
            uint32_t sw = eng_crc32c_sw(0, buf + off, len);
            if (eng_crc32c_hw_available())
                assert_int_equal(sw, eng_crc32c_hw(0, buf + off, len));
            /* incremental == one shot */
            uint32_t inc = eng_crc32c_sw(eng_crc32c_sw(0, buf + off, len / 2), buf + off + len / 2,
                                         len - len / 2);
            assert_int_equal(sw, inc);
        }
    }
    uint8_t *v;
    size_t n;
    assert_int_equal(ts_vector("crc32c_123456789", &v, &n), 0);
    assert_int_equal(n, 4);
    assert_int_equal(((uint32_t)v[0] << 24 | v[1] << 16 | v[2] << 8 | v[3]), 0xE3069283u);
    free(v);
}

static void test_varint_examples(void **state)
{
    (void)state;
    static const struct {
        int64_t v;
        const char *hex;
    } ex[] = {{0, "00"},   {-1, "01"},     {1, "02"},       {8, "10"},       {63, "7e"},
              {-64, "7f"}, {64, "8001"},   {250, "f403"},   {265, "9204"},   {-1000, "cf0f"},
              {-87399000, "afe9ac53"}};
    for (size_t i = 0; i < sizeof ex / sizeof ex[0]; i++) {
        uint8_t buf[10];
        char hex[32] = {0};
        size_t n = eng_varlong_put(buf, ex[i].v);
        for (size_t k = 0; k < n; k++)
            sprintf(hex + 2 * k, "%02x", buf[k]);
        assert_string_equal(hex, ex[i].hex);
        assert_int_equal(n, eng_varlong_size(ex[i].v));
        int64_t back;
        assert_int_equal(eng_varlong_get(buf, buf + n, &back), n);
        assert_true(back == ex[i].v);
        if (ex[i].v >= INT32_MIN && ex[i].v <= INT32_MAX) {
            int32_t b32;
            assert_int_equal(eng_varint_put(buf, (int32_t)ex[i].v), n);
            assert_int_equal(eng_varint_get(buf, buf + n, &b32), n);
            assert_int_equal(b32, ex[i].v);
        }
    }
}

static void test_varint_rejects_bad(void **state)
{
    (void)state;
    int32_t v;
    int64_t l;
    uint8_t five_cont[] = {0x80, 0x80, 0x80, 0x80, 0x80, 0x01};
    assert_int_equal(eng_varint_get(five_cont, five_cont + sizeof five_cont, &v), 0);
    uint8_t truncated[] = {0x80, 0x80};
    assert_int_equal(eng_varint_get(truncated, truncated + 2, &v), 0);
    uint8_t eleven[11];
    memset(eleven, 0x80, sizeof eleven);
    assert_int_equal(eng_varlong_get(eleven, eleven + sizeof eleven, &l), 0);
    uint8_t max32[] = {0xfe, 0xff, 0xff, 0xff, 0x0f}; /* INT32_MAX zigzagged */
    assert_int_equal(eng_varint_get(max32, max32 + 5, &v), 5);
    assert_int_equal(v, INT32_MAX);
}

/* Builds the ten V1 records: keys k-00000i, 250 x 'v'. */
static void v1_records(eng_record_spec *recs, char keys[10][16], uint8_t *value)
{
    memset(value, 'v', 250);
    for (int i = 0; i < 10; i++) {
        snprintf(keys[i], 16, "k-%06d", i);
        recs[i] = (eng_record_spec){.timestamp = 1794024676890LL, .key = (uint8_t *)keys[i],
                                    .key_len = 8, .value = value, .value_len = 250};
    }
}

static void expect_vector(const char *name, const uint8_t *got, size_t len)
{
    uint8_t *v;
    size_t n;
    assert_int_equal(ts_vector(name, &v, &n), 0);
    assert_int_equal(len, n);
    assert_memory_equal(got, v, n);
    free(v);
}

static void test_encode_v1_java_and_kafkajs(void **state)
{
    (void)state;
    eng_record_spec recs[10];
    char keys[10][16];
    uint8_t value[250];
    v1_records(recs, keys, value);
    eng_batch_params bp;
    eng_batch_params_init(&bp);
    uint8_t out[4096];
    assert_int_equal(eng_batch_encoded_size(recs, 10), 2731);
    size_t n = eng_batch_encode(out, sizeof out, &bp, recs, 10);
    assert_int_equal(n, 2731);
    expect_vector("v1_10rec_java_conventions", out, n);
    expect_vector("v1_10rec_java_conventions_header61", out, 61);
    bp.producer_epoch = 0;
    bp.base_sequence = 0;
    n = eng_batch_encode(out, sizeof out, &bp, recs, 10);
    expect_vector("v1_10rec_kafkajs_defaults", out, n);
    expect_vector("v1_10rec_kafkajs_defaults_header61", out, 61);
    expect_vector("v1_record0", out + 61, 267);
    assert_int_equal(eng_record_encoded_size(&recs[0], recs[0].timestamp, 0), 267);
    /* too small a buffer is refused, not overrun */
    assert_int_equal(eng_batch_encode(out, 2730, &bp, recs, 10), 0);
}

static void test_encode_v2_tiny_and_logappendtime(void **state)
{
    (void)state;
    eng_record_spec r = {.timestamp = 1000, .key = (const uint8_t *)"a", .key_len = 1,
                         .value = (const uint8_t *)"b", .value_len = 1};
    eng_batch_params bp;
    eng_batch_params_init(&bp);
    bp.base_offset = 5;
    uint8_t out[128];
    size_t n = eng_batch_encode(out, sizeof out, &bp, &r, 1);
    assert_int_equal(n, 70);
    expect_vector("v2_tiny_java_conventions", out, n);
    bp.producer_epoch = 0;
    bp.base_sequence = 0;
    expect_vector("v2_tiny_kafkajs_defaults", out, eng_batch_encode(out, sizeof out, &bp, &r, 1));
    /* A broker with leader epoch 3 changes bytes 12..15 only (not in the CRC). */
    eng_batch_params_init(&bp);
    bp.base_offset = 5;
    bp.leader_epoch = 3;
    expect_vector("v2_broker_stored_epoch3", out, eng_batch_encode(out, sizeof out, &bp, &r, 1));
    bp.attributes = ENG_ATTR_LOG_APPEND_TIME;
    bp.max_timestamp = 2000;
    expect_vector("v2_broker_logappendtime", out, eng_batch_encode(out, sizeof out, &bp, &r, 1));
}

static void test_encode_tombstone_with_header(void **state)
{
    (void)state;
    eng_record_header h = {.key = (const uint8_t *)"h", .key_len = 1,
                           .value = (const uint8_t *)"v", .value_len = 1};
    eng_record_spec r = {.timestamp = 1000, .key = (const uint8_t *)"k", .key_len = 1,
                         .value = NULL, .value_len = -1, .headers = &h, .header_count = 1};
    eng_batch_params bp;
    eng_batch_params_init(&bp);
    uint8_t out[128];
    size_t n = eng_batch_encode(out, sizeof out, &bp, &r, 1);
    expect_vector("v3_tombstone_header_java_conventions", out, n);
    bp.producer_epoch = 0;
    bp.base_sequence = 0;
    n = eng_batch_encode(out, sizeof out, &bp, &r, 1);
    expect_vector("v3_tombstone_header_kafkajs_defaults", out, n);
}

/* Every batch vector decodes, validates, and re-encodes where we can. */
static void test_decode_all_batch_vectors(void **state)
{
    (void)state;
    static const char *names[] = {
        "v1_10rec_java_conventions", "v1_10rec_kafkajs_defaults", "v2_tiny_java_conventions",
        "v2_tiny_kafkajs_defaults", "v2_broker_stored_epoch3", "v2_broker_logappendtime",
        "v3_tombstone_header_java_conventions", "v3_tombstone_header_kafkajs_defaults",
        "v3_tombstone_after_first_clean", "control_commit_marker", "cleaner_empty_batch_header",
        "idempotent_two_records"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        uint8_t *v;
        size_t n;
        assert_int_equal(ts_vector(names[i], &v, &n), 0);
        eng_batch_header h;
        assert_int_equal(eng_batch_validate(v, n, &h), 0);
        assert_int_equal(eng_batch_size(&h), n);
        uint8_t hdr[61];
        eng_batch_header_encode(hdr, &h);
        assert_memory_equal(hdr, v, 61);
        free(v);
    }
}

static void test_decode_specific_fields(void **state)
{
    (void)state;
    uint8_t *v;
    size_t n;
    eng_batch_header h;
    eng_record_iter it;
    eng_record r;

    assert_int_equal(ts_vector("v3_tombstone_after_first_clean", &v, &n), 0);
    assert_int_equal(eng_batch_validate(v, n, &h), 0);
    assert_int_equal(h.attributes, ENG_ATTR_DELETE_HORIZON);
    assert_int_equal(h.base_timestamp, 87400000);
    eng_record_iter_init(&it, &h, v + 61, n - 61);
    assert_int_equal(eng_record_iter_next(&it, &r), 1);
    assert_int_equal(r.timestamp, 1000);
    assert_null(r.value);
    assert_int_equal(r.value_len, -1);
    assert_int_equal(r.header_count, 1);
    const uint8_t *hp = r.headers;
    eng_record_header hh;
    assert_int_equal(eng_record_header_next(&hp, r.headers_end, &hh), 1);
    assert_memory_equal(hh.key, "h", 1);
    assert_memory_equal(hh.value, "v", 1);
    assert_int_equal(eng_record_iter_next(&it, &r), 0);
    free(v);

    assert_int_equal(ts_vector("idempotent_two_records", &v, &n), 0);
    assert_int_equal(eng_batch_validate(v, n, &h), 0);
    assert_int_equal(h.producer_id, 4242);
    assert_int_equal(h.base_sequence, 17);
    eng_record_iter_init(&it, &h, v + 61, n - 61);
    assert_int_equal(eng_record_iter_next(&it, &r), 1);
    assert_int_equal(r.offset, 100);
    assert_int_equal(r.timestamp, 5000);
    assert_int_equal(eng_record_iter_next(&it, &r), 1);
    assert_int_equal(r.offset, 101);
    assert_int_equal(r.timestamp, 4000);
    assert_null(r.key);
    free(v);

    assert_int_equal(ts_vector("v2_broker_logappendtime", &v, &n), 0);
    assert_int_equal(eng_batch_validate(v, n, &h), 0);
    eng_record_iter_init(&it, &h, v + 61, n - 61);
    assert_int_equal(eng_record_iter_next(&it, &r), 1);
    assert_int_equal(r.timestamp, 2000); /* LogAppendTime: the broker's clock */
    free(v);
}

static void test_validate_rejects_damage(void **state)
{
    (void)state;
    uint8_t *v;
    size_t n;
    eng_batch_header h;
    assert_int_equal(ts_vector("v1_10rec_java_conventions", &v, &n), 0);
    /* A flipped bit anywhere in [21, end) breaks the CRC. */
    for (size_t pos = 21; pos < n; pos += 97) {
        v[pos] ^= 0x10;
        assert_int_equal(eng_batch_validate(v, n, &h), ENG_ECRC);
        v[pos] ^= 0x10;
    }
    /* Wrong magic, short length, truncation. */
    v[16] = 1;
    assert_int_equal(eng_batch_validate(v, n, &h), ENG_ECORRUPT);
    v[16] = 2;
    assert_int_equal(eng_batch_validate(v, n - 1, &h), ENG_ECORRUPT);
    assert_int_equal(eng_batch_validate(v, 60, &h), ENG_ECORRUPT);
    /* A record length that lies, with the CRC fixed up, is still refused. */
    v[61] = 0x94; /* record length 266 instead of 265 */
    eng_batch_update_crc(v, n);
    assert_int_equal(eng_batch_validate(v, n, &h), ENG_ECORRUPT);
    free(v);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_crc32c_check_value),
        cmocka_unit_test(test_crc32c_paths_agree),
        cmocka_unit_test(test_crc32c_three_way_joins),
        cmocka_unit_test(test_varint_examples),
        cmocka_unit_test(test_varint_rejects_bad),
        cmocka_unit_test(test_encode_v1_java_and_kafkajs),
        cmocka_unit_test(test_encode_v2_tiny_and_logappendtime),
        cmocka_unit_test(test_encode_tombstone_with_header),
        cmocka_unit_test(test_decode_all_batch_vectors),
        cmocka_unit_test(test_decode_specific_fields),
        cmocka_unit_test(test_validate_rejects_damage),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
