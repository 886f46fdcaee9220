/*
 * test_read_corruption.c - a batch damaged on disk, read through the API.
 *
 * Three one-record batches (offsets 0, 1, 2) are written and the server
 * stopped cleanly; one byte of the middle batch's value is then changed in
 * the .log, so its CRC-32C no longer matches and nothing else tells (after a
 * clean stop the segment is not recovered, as in Kafka).  JSON, SSE and
 * NDJSON carry no checksum a client could verify, so the server must:
 *   - answer a JSON page from offset 0 with record 0 alone and next_offset 1
 *     (the records before the damage read normally);
 *   - answer a read from offset 1, and GET .../records/1, with 422
 *     corrupt_record naming the batch's offsets and the offset that skips it;
 *   - read on from offset 2;
 *   - end an NDJSON stream and an SSE stream from 0 with their error after
 *     record 0, never sending the damaged value;
 *   - still return the stored bytes as they are to a raw reader (Kafka
 *     clients check the CRC themselves);
 *   - log one warning naming the partition, however often it is read, and
 *     count each corrupt_record answer in /metrics;
 * A batch whose CRC holds but whose records do not parse reads the same way.
 * On a compacted topic, compaction:run refuses the damaged segment (422
 * corrupt_record) and leaves every file as it was: the cleaner rewrites
 * batches under fresh CRCs, so it must never take a damaged one in.  A
 * sealed segment cut short while the server was down reads up to the cut,
 * answers 422 inside it (it used to skip to the next segment in silence),
 * and the segment listing and batch dump show the damage (damaged,
 * damaged_at); records:delete past it and retention:run remove it.
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

#define RECORDS "/v1/topics/t/partitions/0/records"

/* Reads the partition's first .log, lets edit change its bytes in place,
 * and writes them back (the server is stopped). */
static void edit_first_log(void (*edit)(uint8_t *log, size_t len))
{
    char path[1400];
    snprintf(path, sizeof path, "%s/t-0/00000000000000000000.log", S->dir);
    size_t len;
    uint8_t *log = ls_read_file(path, &len);
    assert_non_null(log);
    edit(log, len);
    FILE *fp = fopen(path, "r+b");
    assert_non_null(fp);
    assert_int_equal(fwrite(log, 1, len, fp), len);
    assert_int_equal(fclose(fp), 0);
    free(log);
}

/* One byte of the middle batch's value changed: its CRC-32C fails. */
static void damage_value(uint8_t *log, size_t len)
{
    uint8_t *v = memmem(log, len, "value-one", 9);
    assert_non_null(v);
    assert_null(memmem(v + 1, len - (size_t)(v + 1 - log), "value-one", 9));
    *v = 'V';
}

/* Appends each value as a one-record batch (with key when not NULL). */
static void append_each(const char *key, const char *const *values, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        char body[160];
        if (key)
            snprintf(body, sizeof body, "{\"records\":[{\"key\":\"%s\",\"value\":\"%s\"}]}",
                     key, values[i]);
        else
            snprintf(body, sizeof body, "{\"records\":[{\"value\":\"%s\"}]}", values[i]);
        assert_int_equal(ls_append_json(S, "t", 0, body), 200);
    }
}

static void roll(void)
{
    ls_resp r;
    assert_int_equal(ls_send_json(S, "POST", "/v1/topics/t/partitions/0/segments:roll", NULL, &r), 0);
    assert_int_equal(r.status, 200);
    ls_resp_free(&r);
}

static void stream(const char *accept, ls_resp *r)
{
    const char *hdrs[] = {accept, NULL};
    assert_int_equal(ls_http(S, "GET", RECORDS "?offset=0&max_records=3", NULL, NULL, 0, hdrs, r), 0);
    assert_int_equal(r->status, 200);
    assert_non_null(strstr(r->body, "value-zero"));
    assert_null(strstr(r->body, "alue-one"));
    assert_null(strstr(r->body, "value-two"));
    assert_non_null(strstr(r->body, "corrupt_record"));
}

/* Three one-record batches (offsets 0, 1, 2) written, the server stopped
 * cleanly, the .log edited, the server started again. */
static void three_batches_edited(void (*edit)(uint8_t *log, size_t len))
{
    assert_int_equal(ls_start(S, NULL), 0);
    assert_int_equal(ls_create_topic(S, "t", 1, NULL), 201);
    static const char *const values[] = {"value-zero", "value-one", "value-two"};
    append_each(NULL, values, 3);
    assert_int_equal(ls_stop(S), 0);
    edit_first_log(edit);
    assert_int_equal(ls_restart(S, NULL), 0);
}

static void test_damaged_batch(void **state)
{
    (void)state;
    three_batches_edited(damage_value);
    ls_resp r;
    assert_int_equal(ls_get(S, RECORDS "?offset=0&max_records=3", &r), 0);
    assert_int_equal(r.status, 200);
    assert_int_equal(json_array_size(ls_jget(&r, "records")), 1);
    assert_string_equal(ls_jstr(&r, "records.0.value"), "value-zero");
    assert_int_equal(ls_jint(&r, "next_offset"), 1);
    ls_resp_free(&r);

    const char *bad[] = {RECORDS "?offset=1", RECORDS "/1"};
    for (size_t i = 0; i < 2; i++) {
        assert_int_equal(ls_get(S, bad[i], &r), 0);
        assert_int_equal(ls_check_error(&r, 422, "corrupt_record"), 0);
        assert_string_equal(ls_jstr(&r, "kafka_error"), "CORRUPT_MESSAGE");
        /* in details too, for a client to act on without parsing the message */
        assert_int_equal(ls_jint(&r, "details.first_offset"), 1);
        assert_int_equal(ls_jint(&r, "details.last_offset"), 1);
        assert_int_equal(ls_jint(&r, "details.next_offset"), 2);
        assert_non_null(strstr(ls_jstr(&r, "message"), "offsets 1 to 1 fails its CRC-32C check"));
        assert_non_null(strstr(ls_jstr(&r, "message"), "a read from offset 2 skips it"));
        ls_resp_free(&r);
    }

    assert_int_equal(ls_get(S, RECORDS "?offset=2", &r), 0);
    assert_int_equal(r.status, 200);
    assert_string_equal(ls_jstr(&r, "records.0.value"), "value-two");
    ls_resp_free(&r);

    stream("Accept: application/x-ndjson", &r);
    ls_resp_free(&r);
    stream("Accept: text/event-stream", &r);
    assert_non_null(strstr(r.body, "event: error"));
    ls_resp_free(&r);

    const char *raw[] = {"Accept: application/octet-stream", NULL};
    assert_int_equal(ls_http(S, "GET", RECORDS "?offset=0", NULL, NULL, 0, raw, &r), 0);
    assert_int_equal(r.status, 200);
    assert_non_null(memmem(r.body, r.len, "Value-one", 9));
    ls_resp_free(&r);

    /* Every corrupt_record answer and stream event so far is counted for
     * alerting: 2 reads, the NDJSON and the SSE stream. */
    assert_int_equal(ls_get(S, "/metrics", &r), 0);
    assert_non_null(strstr(r.body, "\nlogstore_corrupt_record_errors_total 4\n"));
    ls_resp_free(&r);

    size_t len;
    char *log = ls_read_file(S->log_path, &len);
    assert_non_null(log);
    const char *warn = "t-0: the stored batch holding offsets 1 to 1 fails its CRC-32C check";
    char *first = strstr(log, warn);
    assert_non_null(first);
    assert_null(strstr(first + 1, warn));
    free(log);

    assert_int_equal(ls_stop(S), 0);
    ls_cleanup(S);
}

/* The middle batch's record length made larger than the batch, under a
 * CRC-32C computed again: the bytes a producer that broke the format would
 * leave in a Kafka log. */
static void break_record_framing(uint8_t *log, size_t len)
{
    eng_batch_header h;
    assert_int_equal(eng_batch_header_decode(log, len, &h), 0);
    size_t pos = eng_batch_size(&h);
    assert_int_equal(eng_batch_header_decode(log + pos, len - pos, &h), 0);
    assert_int_equal(h.base_offset, 1);
    log[pos + ENG_BATCH_OVERHEAD] = 0x7e; /* zigzag 63: past the batch's end */
    eng_batch_update_crc(log + pos, eng_batch_size(&h));
}

/* A batch whose CRC holds but whose records do not parse is met as a
 * damaged one is: pages answer the records before it, then 422 with the
 * offset that skips it; streams end with that error (they used to skip the
 * rest of the batch in silence). */
static void test_unparsable_records(void **state)
{
    (void)state;
    three_batches_edited(break_record_framing);
    ls_resp r;
    assert_int_equal(ls_get(S, RECORDS "?offset=0&max_records=3", &r), 0);
    assert_int_equal(r.status, 200);
    assert_int_equal(json_array_size(ls_jget(&r, "records")), 1);
    assert_int_equal(ls_jint(&r, "next_offset"), 1);
    ls_resp_free(&r);
    assert_int_equal(ls_get(S, RECORDS "?offset=1", &r), 0);
    assert_int_equal(ls_check_error(&r, 422, "corrupt_record"), 0);
    assert_int_equal(ls_jint(&r, "details.first_offset"), 1);
    assert_int_equal(ls_jint(&r, "details.next_offset"), 2);
    assert_non_null(strstr(ls_jstr(&r, "message"), "passes its CRC-32C check"));
    ls_resp_free(&r);
    assert_int_equal(ls_get(S, RECORDS "?offset=2", &r), 0);
    assert_string_equal(ls_jstr(&r, "records.0.value"), "value-two");
    ls_resp_free(&r);

    stream("Accept: application/x-ndjson", &r);
    assert_non_null(strstr(r.body, "\"next_offset\":2"));
    ls_resp_free(&r);
    stream("Accept: text/event-stream", &r);
    assert_non_null(strstr(r.body, "event: error"));
    ls_resp_free(&r);
    assert_int_equal(ls_stop(S), 0);
    ls_cleanup(S);
}

/* The log cleaner rewrites batches with fresh CRCs, so it must not take a
 * damaged one in: compaction:run refuses, and the files stay as they were. */
static void test_cleaner_refuses_damage(void **state)
{
    (void)state;
    /* No cleaner threads: one could be cleaning the partition when the run
     * below asks (409 busy); on-demand runs still work. */
    static const char *const no_threads[] = {"log.cleaner.threads=0", NULL};
    assert_int_equal(ls_start(S, no_threads), 0);
    assert_int_equal(ls_create_topic(S, "t", 1, "{\"cleanup.policy\":\"compact\"}"), 201);
    static const char *const values[] = {"value-zero", "value-one", "value-two"};
    append_each("k", values, 3);
    roll();
    assert_int_equal(ls_stop(S), 0);
    ls_resp r;
    edit_first_log(damage_value);
    char pdir[1400], seg[1500];
    snprintf(pdir, sizeof pdir, "%s/t-0", S->dir);
    snprintf(seg, sizeof seg, "%s/00000000000000000000.log", pdir);
    size_t len_before, len_after;
    char *log_before = ls_read_file(seg, &len_before);
    assert_non_null(log_before);
    char *before = ls_dir_listing(pdir);
    assert_int_equal(ls_restart(S, no_threads), 0);

    assert_int_equal(ls_send_json(S, "POST", "/v1/topics/t/compaction:run", "{}", &r), 0);
    assert_int_equal(ls_check_error(&r, 422, "corrupt_record"), 0);
    assert_non_null(strstr(ls_jstr(&r, "message"), "CRC mismatch"));
    ls_resp_free(&r);
    assert_int_equal(ls_get(S, RECORDS "?offset=2", &r), 0);
    assert_string_equal(ls_jstr(&r, "records.0.value"), "value-two");
    ls_resp_free(&r);
    assert_int_equal(ls_get(S, "/v1/cleaner", &r), 0);
    assert_int_equal(json_array_size(ls_jget(&r, "uncleanable")), 1);
    ls_resp_free(&r);
    /* Repaired in place, a dry run that succeeds changes nothing: the
     * partition stays uncleanable (a dry run took it off the list, and the
     * cleaner threads went back to it). */
    size_t dlen;
    char *damaged = ls_read_file(seg, &dlen);
    assert_non_null(damaged);
    char *v = memmem(damaged, dlen, "Value-one", 9);
    assert_non_null(v);
    FILE *fp = fopen(seg, "r+b");
    assert_non_null(fp);
    assert_int_equal(fseek(fp, v - damaged, SEEK_SET), 0);
    assert_int_equal(fputc('v', fp), 'v');
    assert_int_equal(fclose(fp), 0);
    free(damaged);
    assert_int_equal(ls_send_json(S, "POST", "/v1/topics/t/compaction:run", "{\"dry_run\":true}", &r),
                     0);
    assert_int_equal(r.status, 200);
    ls_resp_free(&r);
    assert_int_equal(ls_get(S, "/v1/cleaner", &r), 0);
    assert_int_equal(json_array_size(ls_jget(&r, "uncleanable")), 1);
    ls_resp_free(&r);
    /* put back as it was for the checks below */
    fp = fopen(seg, "r+b");
    assert_non_null(fp);
    assert_int_equal(fwrite(log_before, 1, len_before, fp), len_before);
    assert_int_equal(fclose(fp), 0);
    assert_int_equal(ls_stop(S), 0);
    assert_int_equal(ls_dir_same(pdir, before), 0);
    char *log_after = ls_read_file(seg, &len_after);
    assert_non_null(log_after);
    assert_int_equal(len_after, len_before);
    assert_memory_equal(log_after, log_before, len_before);
    free(log_before);
    free(log_after);
    ls_cleanup(S);
}

/* Topic t: a sealed segment of three equal one-record batches (offsets
 * 0-2) whose second batch was cut in half while the server was down (a
 * clean stop, so nothing is re-read at the start), then offset 3 in the
 * active segment; the server is running again.  Returns a batch's size. */
static long long start_with_cut_segment(void)
{
    assert_int_equal(ls_start(S, NULL), 0);
    assert_int_equal(ls_create_topic(S, "t", 1, NULL), 201);
    static const char *const values[] = {"value-000", "value-001", "value-002"}; /* equal batches */
    append_each(NULL, values, 3);
    roll();
    assert_int_equal(ls_append_json(S, "t", 0, "{\"records\":[{\"value\":\"value-three\"}]}"), 200);
    assert_int_equal(ls_stop(S), 0);
    char path[1400];
    snprintf(path, sizeof path, "%s/t-0/00000000000000000000.log", S->dir);
    long long size = ls_file_size(path), batch = size / 3;
    assert_int_equal(size % 3, 0); /* three batches of the same size */
    assert_int_equal(truncate(path, (off_t)(batch + batch / 2)), 0);
    assert_int_equal(ls_restart(S, NULL), 0);
    return batch;
}

/* A sealed segment cut short while the server was down (a clean stop, so
 * nothing is re-read at the start): reads into the missing bytes answer 422
 * instead of skipping to the next segment in silence, the next segment
 * still reads, and the listings show where the damage is. */
static void test_segment_cut_short(void **state)
{
    (void)state;
    long long batch = start_with_cut_segment();
    ls_resp r;

    assert_int_equal(ls_get(S, RECORDS "?offset=0&max_records=10", &r), 0);
    assert_int_equal(r.status, 200);
    assert_int_equal(json_array_size(ls_jget(&r, "records")), 1);
    assert_int_equal(ls_jint(&r, "next_offset"), 1);
    ls_resp_free(&r);
    assert_int_equal(ls_get(S, RECORDS "?offset=1", &r), 0);
    assert_int_equal(ls_check_error(&r, 422, "corrupt_record"), 0);
    /* where the damage is and where reading goes on (the message was
     * "reading t-0 failed: corrupt record batch") */
    assert_non_null(strstr(ls_jstr(&r, "message"), "segment 00000000000000000000"));
    assert_non_null(strstr(ls_jstr(&r, "message"), "from offset 3"));
    assert_int_equal(ls_jint(&r, "details.next_offset"), 3);
    ls_resp_free(&r);
    assert_int_equal(ls_get(S, RECORDS "?offset=3", &r), 0);
    assert_int_equal(r.status, 200);
    assert_string_equal(ls_jstr(&r, "records.0.value"), "value-three");
    ls_resp_free(&r);

    assert_int_equal(ls_get(S, "/v1/topics/t/partitions/0/segments", &r), 0);
    assert_int_equal(r.status, 200);
    assert_true(json_is_true(ls_jget(&r, "segments.0.damaged")));
    assert_int_equal(ls_jint(&r, "segments.0.batch_count"), 1);
    assert_int_equal(ls_jint(&r, "segments.0.record_count"), 1);
    /* past the whole batch it lists (it said 0: offsets 0 to -1 on the
     * dashboard beside one record) */
    assert_int_equal(ls_jint(&r, "segments.0.next_offset"), 1);
    assert_true(json_is_false(ls_jget(&r, "segments.1.damaged")));
    ls_resp_free(&r);
    assert_int_equal(ls_get(S, "/v1/topics/t/partitions/0/segments/0/batches", &r), 0);
    assert_int_equal(r.status, 200);
    assert_int_equal(json_array_size(ls_jget(&r, "batches")), 1);
    assert_int_equal(ls_jint(&r, "damaged_at"), batch);
    ls_resp_free(&r);
    assert_int_equal(ls_get(S, "/v1/topics/t/partitions/0/segments/3/batches", &r), 0);
    assert_true(json_is_null(ls_jget(&r, "damaged_at")));
    ls_resp_free(&r);

    /* The remedy README gives: move the log start offset past the damage
     * and let retention delete the segment. */
    assert_int_equal(ls_send_json(S, "POST", RECORDS ":delete", "{\"before_offset\":3}", &r), 0);
    assert_int_equal(r.status, 200);
    ls_resp_free(&r);
    assert_int_equal(ls_send_json(S, "POST", "/v1/topics/t/retention:run", "{}", &r), 0);
    assert_int_equal(r.status, 200);
    assert_int_equal(ls_jint(&r, "segments_deleted"), 1);
    ls_resp_free(&r);
    assert_int_equal(ls_get(S, "/v1/topics/t/partitions/0/segments", &r), 0);
    assert_int_equal(json_array_size(ls_jget(&r, "segments")), 1);
    assert_true(json_is_false(ls_jget(&r, "segments.0.damaged")));
    ls_resp_free(&r);
    assert_int_equal(ls_get(S, RECORDS "?offset=earliest", &r), 0);
    assert_string_equal(ls_jstr(&r, "records.0.value"), "value-three");
    ls_resp_free(&r);

    assert_int_equal(ls_stop(S), 0);
    ls_cleanup(S);
}

/* The same cut read raw (Accept: application/octet-stream), as a Kafka
 * client reads: the whole batch before the cut comes back as a page's
 * record does, and a read inside the cut answers 422 with the segment and
 * the offset that skips it.  Raw reads answered 422 from offset 0 too (the
 * batch before the cut was refused with the rest), with details {} and
 * "reading t-0 failed: corrupt record batch", leaving a raw reader nowhere
 * to go on from. */
static void test_segment_cut_short_raw(void **state)
{
    (void)state;
    long long batch = start_with_cut_segment();

    const char *raw[] = {"Accept: application/octet-stream", NULL};
    ls_resp r;
    assert_int_equal(ls_http(S, "GET", RECORDS "?offset=0", NULL, NULL, 0, raw, &r), 0);
    assert_int_equal(r.status, 200);
    assert_int_equal((long long)r.len, batch);
    assert_non_null(memmem(r.body, r.len, "value-000", 9));
    assert_non_null(ls_header(&r, "X-Next-Offset"));
    assert_string_equal(ls_header(&r, "X-Next-Offset"), "1");
    ls_resp_free(&r);
    assert_int_equal(ls_http(S, "GET", RECORDS "?offset=1", NULL, NULL, 0, raw, &r), 0);
    assert_int_equal(ls_check_error(&r, 422, "corrupt_record"), 0);
    assert_non_null(strstr(ls_jstr(&r, "message"), "segment 00000000000000000000"));
    assert_int_equal(ls_jint(&r, "details.next_offset"), 3);
    ls_resp_free(&r);
    assert_int_equal(ls_http(S, "GET", RECORDS "?offset=3", NULL, NULL, 0, raw, &r), 0);
    assert_int_equal(r.status, 200);
    assert_non_null(memmem(r.body, r.len, "value-three", 11));
    ls_resp_free(&r);

    assert_int_equal(ls_stop(S), 0);
    ls_cleanup(S);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_damaged_batch),
        cmocka_unit_test(test_unparsable_records),
        cmocka_unit_test(test_cleaner_refuses_damage),
        cmocka_unit_test(test_segment_cut_short),
        cmocka_unit_test(test_segment_cut_short_raw),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
