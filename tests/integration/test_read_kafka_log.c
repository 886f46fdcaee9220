/*
 * test_read_kafka_log.c - reading a log that holds what only Kafka writes:
 * transaction markers (control batches).  logstore's appends refuse control
 * batches, but its files are Kafka's, so a partition copied from a broker
 * may hold them.  Consumers never see a marker as a record; neither do
 * logstore's JSON, NDJSON and SSE readers.  (They used to answer the marker
 * as a record with a 4-byte key and a 6-byte value.)
 *
 * Offsets 0 and 1 are appended through the API, the server is stopped, and
 * a COMMIT marker (offset 2) and one more transactional record (offset 3)
 * are written to the end of the .log as Kafka would; without the
 * clean-shutdown marker the start re-reads (and CRC-checks) the segment.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "eng_batch.h"
#include "harness.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static ls_server g_srv;
static ls_server *S = &g_srv;

#define RECORDS "/v1/topics/tx/partitions/0/records"
#define PID 4242

/* Appends one batch of one record at base to the file at path. */
static void write_batch(const char *path, int64_t base, int16_t attributes, const uint8_t *key,
                        int32_t key_len, const uint8_t *value, int32_t value_len)
{
    eng_record_spec rec = {.timestamp = 1700000000000LL, .key = key, .key_len = key_len,
                           .value = value, .value_len = value_len};
    eng_batch_params bp;
    eng_batch_params_init(&bp);
    bp.base_offset = base;
    bp.attributes = attributes;
    bp.producer_id = PID;
    bp.producer_epoch = 0;
    bp.base_sequence = attributes & ENG_ATTR_CONTROL ? -1 : 0;
    uint8_t buf[256];
    size_t n = eng_batch_encode(buf, sizeof buf, &bp, &rec, 1);
    assert_true(n > 0);
    FILE *fp = fopen(path, "ab");
    assert_non_null(fp);
    assert_int_equal(fwrite(buf, 1, n, fp), n);
    assert_int_equal(fclose(fp), 0);
}

static void test_markers_are_not_records(void **state)
{
    (void)state;
    assert_int_equal(ls_start(S, NULL), 0);
    assert_int_equal(ls_create_topic(S, "tx", 1, NULL), 201);
    assert_int_equal(ls_append_json(S, "tx", 0, "{\"records\":[{\"value\":\"zero\"}]}"), 200);
    assert_int_equal(ls_append_json(S, "tx", 0, "{\"records\":[{\"value\":\"one\"}]}"), 200);
    assert_int_equal(ls_stop(S), 0);

    char path[1400];
    snprintf(path, sizeof path, "%s/tx-0/00000000000000000000.log", S->dir);
    /* kafka-format.md §5: key = version 0, type 1 (COMMIT); value =
     * version 0, coordinator epoch 7 */
    static const uint8_t commit_key[] = {0, 0, 0, 1}, commit_value[] = {0, 0, 0, 0, 0, 7};
    write_batch(path, 2, ENG_ATTR_CONTROL | ENG_ATTR_TRANSACTIONAL, commit_key, 4, commit_value, 6);
    write_batch(path, 3, ENG_ATTR_TRANSACTIONAL, NULL, -1, (const uint8_t *)"three", 5);
    snprintf(path, sizeof path, "%s/.kafka_cleanshutdown", S->dir);
    assert_int_equal(unlink(path), 0);
    assert_int_equal(ls_restart(S, NULL), 0);

    ls_resp r;
    assert_int_equal(ls_get(S, "/v1/info", &r), 0);
    assert_int_equal(ls_jint(&r, "startup.bytes_truncated"), 0);
    ls_resp_free(&r);

    assert_int_equal(ls_get(S, RECORDS "?offset=0", &r), 0);
    assert_int_equal(r.status, 200);
    assert_int_equal(json_array_size(ls_jget(&r, "records")), 3);
    assert_string_equal(ls_jstr(&r, "records.1.value"), "one");
    assert_int_equal(ls_jint(&r, "records.2.offset"), 3);
    assert_string_equal(ls_jstr(&r, "records.2.value"), "three");
    assert_int_equal(ls_jint(&r, "next_offset"), 4);
    ls_resp_free(&r);

    /* A read starting at the marker moves past it. */
    assert_int_equal(ls_get(S, RECORDS "?offset=2&max_records=1", &r), 0);
    assert_int_equal(r.status, 200);
    assert_int_equal(ls_jint(&r, "records.0.offset"), 3);
    ls_resp_free(&r);

    assert_int_equal(ls_get(S, RECORDS "/2", &r), 0);
    assert_int_equal(ls_check_error(&r, 404, "record_not_found"), 0);
    ls_resp_free(&r);

    /* Streams skip it too (bounded, so they end). */
    static const char *const accepts[] = {"Accept: application/x-ndjson",
                                          "Accept: text/event-stream"};
    for (size_t i = 0; i < 2; i++) {
        const char *hdrs[] = {accepts[i], NULL};
        assert_int_equal(ls_http(S, "GET", RECORDS "?offset=0&max_records=3", NULL, NULL, 0, hdrs,
                                 &r),
                         0);
        assert_int_equal(r.status, 200);
        assert_non_null(strstr(r.body, "three"));
        assert_null(strstr(r.body, "\"offset\":2,"));
        assert_null(strstr(r.body, "id: 2\n"));
        ls_resp_free(&r);
    }
    assert_int_equal(ls_stop(S), 0);
    ls_cleanup(S);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_markers_are_not_records),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
