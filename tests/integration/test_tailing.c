/*
 * test_tailing.c - reads that wait and stream (DESIGN §6, api_read.c,
 * api_stream.c, api_wait.c), against the real server binary.
 *
 * Long-polls: woken by an append well before wait_ms ends; an empty page on
 * timeout; wait_ms=60000 capped at the server's 30 s (run in a background
 * thread for the whole group, so it costs no extra time); min_bytes; 300
 * parked at once with libcurl multi, all answered after one append, while
 * /health/live answers and the server's thread count stays flat; a server
 * with http.max.waiters=5 refusing the 6th with 429 too_many_waiters and
 * Retry-After, and cleaning up parked clients that disconnect.  SSE (with
 * http.sse.heartbeat.ms=300): record events with ids, Last-Event-ID resume,
 * heartbeat comments, end events at max_records and until_timestamp, an
 * unbounded stream following the log, an error event when records:delete
 * and retention remove the reader's position under it.  NDJSON: a record a
 * line and a final cursor line, following the log.  Raw reads: whole
 * batches from the one holding the offset, X-Next-Offset and
 * X-High-Watermark, at least one batch for a tiny max_bytes, 416 out of
 * range, an empty body at the high watermark.  A slow SSE client that stops
 * reading while ~50 MB is appended does not grow the server's RSS with it.
 * The server exits 0 while streams and long-polls are open.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "harness.h"
#include "read_util.h"
#include "tail_util.h"

#include "eng_batch.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static ls_server g_srv, g_small, g_slow;
static ls_server *S = &g_srv;

static const char *const settings[] = {"http.sse.heartbeat.ms=300", "log.initial.task.delay.ms=3600000",
                                       NULL};

/* ---- helpers ------------------------------------------------------------------------ */

static void append_json(ls_server *s, const char *topic, const char *body)
{
    char path[256];
    snprintf(path, sizeof path, "/v1/topics/%s/partitions/0/records", topic);
    ls_resp r;
    assert_int_equal(ls_post(s, path, body, &r), 0);
    if (r.status != 200)
        fprintf(stderr, "# append to %s: %s\n", topic, r.body);
    assert_int_equal(r.status, 200);
    ls_resp_free(&r);
}

/* n records key k<i>, value v<i>, timestamps ts + i, as one batch. */
static void append_n(ls_server *s, const char *topic, int n, long long ts)
{
    char body[8192];
    size_t len = (size_t)snprintf(body, sizeof body, "{\"records\":[");
    for (int i = 0; i < n; i++)
        len += (size_t)snprintf(body + len, sizeof body - len,
                                "%s{\"key\":\"k%d\",\"value\":\"v%d\",\"timestamp\":%lld}", i ? "," : "",
                                i, i, ts + i);
    snprintf(body + len, sizeof body - len, "]}");
    append_json(s, topic, body);
}

/* nbatches binary appends of 100 records with 10,000-byte values ('x'). */
static void append_big(ls_server *s, const char *topic, int nbatches)
{
    enum { N = 100, V = 10000 };
    uint8_t *value = malloc(V);
    memset(value, 'x', V);
    eng_record_spec recs[N];
    for (int i = 0; i < N; i++)
        recs[i] = (eng_record_spec){.timestamp = ru_now_ms(), .key = (const uint8_t *)"big", .key_len = 3,
                                    .value = value, .value_len = V};
    size_t cap = eng_batch_encoded_size(recs, N);
    uint8_t *b = malloc(cap);
    eng_batch_params bp;
    eng_batch_params_init(&bp);
    size_t len = eng_batch_encode(b, cap, &bp, recs, N);
    assert_true(len > 0);
    char path[256];
    snprintf(path, sizeof path, "/v1/topics/%s/partitions/0/records", topic);
    for (int i = 0; i < nbatches; i++) {
        ls_resp r;
        assert_int_equal(ls_http(s, "POST", path, "application/octet-stream", b, len, NULL, &r), 0);
        if (r.status != 200)
            fprintf(stderr, "# big append: %s\n", r.body);
        assert_int_equal(r.status, 200);
        ls_resp_free(&r);
    }
    free(b);
    free(value);
}

/* ---- the 30 s cap, measured in the background ------------------------------------- */

static poll_req g_cap;

static int group_setup(void **state)
{
    (void)state;
    if (ls_start(S, settings))
        return -1;
    if (ls_create_topic(S, "idle-cap", 1, NULL) != 201)
        return -1;
    return poll_start(&g_cap, S, "/v1/topics/idle-cap/partitions/0/records?offset=0&wait_ms=60000") ? -1 : 0;
}

static int group_teardown(void **state)
{
    (void)state;
    ls_cleanup(&g_small);
    ls_cleanup(&g_slow);
    ls_stop(S);
    ls_cleanup(S);
    return 0;
}

/* ---- long-polls ------------------------------------------------------------------------ */

static void test_long_poll_wakes_on_append(void **state)
{
    (void)state;
    assert_int_equal(ls_create_topic(S, "lp", 1, NULL), 201);
    long long base = parked(S);
    poll_req q;
    assert_int_equal(poll_start(&q, S, "/v1/topics/lp/partitions/0/records?offset=0&wait_ms=10000"), 0);
    assert_true(wait_parked(S, base + 1, 5000));
    ru_sleep_ms(200);
    assert_false(atomic_load(&q.done));
    long long t_append = ru_mono_ms();
    append_n(S, "lp", 1, ru_now_ms());
    pthread_join(q.th, NULL);
    assert_int_equal(q.rc, 0);
    assert_int_equal(q.r.status, 200);
    assert_int_equal(json_array_size(ls_jget(&q.r, "records")), 1);
    assert_string_equal(ls_jstr(&q.r, "records.0.value"), "v0");
    assert_int_equal(ls_jint(&q.r, "next_offset"), 1);
    fprintf(stderr, "# answered %lld ms after the append (waited %lld ms)\n", q.t1 - t_append, q.t1 - q.t0);
    assert_true(q.t1 - t_append < 5000); /* wait_ms / 2: generous */
    assert_true(q.t1 - q.t0 >= 200);     /* it did wait */
    ls_resp_free(&q.r);
}

static void test_long_poll_times_out_empty(void **state)
{
    (void)state;
    poll_req q;
    assert_int_equal(poll_start(&q, S, "/v1/topics/lp/partitions/0/records?offset=1&wait_ms=800"), 0);
    pthread_join(q.th, NULL);
    assert_int_equal(q.rc, 0);
    assert_int_equal(q.r.status, 200);
    assert_int_equal(json_array_size(ls_jget(&q.r, "records")), 0);
    assert_int_equal(ls_jint(&q.r, "next_offset"), 1);
    assert_int_equal(ls_jint(&q.r, "high_watermark"), 1);
    assert_true(q.t1 - q.t0 >= 750);
    assert_true(q.t1 - q.t0 < 5000);
    ls_resp_free(&q.r);
}

static void test_long_poll_min_bytes(void **state)
{
    (void)state;
    assert_int_equal(ls_create_topic(S, "mb", 1, NULL), 201);
    char body[512], value[101];
    memset(value, 'm', 100);
    value[100] = 0;
    snprintf(body, sizeof body, "{\"records\":[{\"key\":\"a\",\"value\":\"%s\"}]}", value);
    long long base = parked(S);
    poll_req q;
    assert_int_equal(poll_start(&q, S, "/v1/topics/mb/partitions/0/records?offset=0&wait_ms=10000&min_bytes=250"), 0);
    assert_true(wait_parked(S, base + 1, 5000));
    append_json(S, "mb", body); /* 101 bytes: not enough */
    ru_sleep_ms(500);
    assert_false(atomic_load(&q.done));
    append_json(S, "mb", body); /* 202 */
    ru_sleep_ms(300);
    assert_false(atomic_load(&q.done));
    long long t_append = ru_mono_ms();
    append_json(S, "mb", body); /* 303 >= 250 */
    pthread_join(q.th, NULL);
    assert_int_equal(q.r.status, 200);
    assert_int_equal(json_array_size(ls_jget(&q.r, "records")), 3);
    assert_true(q.t1 - t_append < 5000);
    ls_resp_free(&q.r);
    /* Enough already there: no wait at all. */
    assert_int_equal(poll_start(&q, S, "/v1/topics/mb/partitions/0/records?offset=0&wait_ms=10000&min_bytes=250"), 0);
    pthread_join(q.th, NULL);
    assert_int_equal(json_array_size(ls_jget(&q.r, "records")), 3);
    assert_true(q.t1 - q.t0 < 2000);
    ls_resp_free(&q.r);
}

static void test_hundreds_of_parked_long_polls(void **state)
{
    (void)state;
    enum { N = 300 };
    assert_int_equal(ls_create_topic(S, "many", 1, NULL), 201);
    long long base = parked(S), threads0 = proc_status(S->pid, "Threads");
    mset ms;
    mset_start(&ms, S, "/v1/topics/many/partitions/0/records?offset=0&wait_ms=20000", N, NULL);
    long long end = ru_mono_ms() + 15000;
    while (parked(S) < base + N && ru_mono_ms() < end)
        mset_pump(&ms, 50);
    assert_int_equal(parked(S), base + N);
    assert_int_equal(ms.ndone, 0);
    /* They hold no threads: the server did not grow one per reader, and it
     * still answers at once. */
    long long threads1 = proc_status(S->pid, "Threads");
    fprintf(stderr, "# threads %lld -> %lld with %d parked\n", threads0, threads1, N);
    assert_true(threads1 - threads0 < 16);
    long long t = ru_mono_ms();
    assert_int_equal(ls_live_status(S), 200);
    assert_true(ru_mono_ms() - t < 2000);
    t = ru_mono_ms();
    append_n(S, "many", 1, ru_now_ms());
    assert_true(mset_finish(&ms, 15000));
    fprintf(stderr, "# %d long-polls answered %lld ms after the append\n", N, ru_mono_ms() - t);
    for (size_t i = 0; i < N; i++) {
        assert_int_equal(ms.r[i].rc, CURLE_OK);
        assert_int_equal(ms.r[i].status, 200);
        json_t *j = json_loads(ms.r[i].body, 0, NULL);
        assert_int_equal(json_array_size(json_object_get(j, "records")), 1);
        json_decref(j);
    }
    assert_true(ru_mono_ms() - t < 10000);
    mset_free(&ms);
    assert_true(wait_parked(S, base, 100) && parked(S) == base);
}

/* Long-polls woken by one append share one rendered page only when they ask
 * the same question: plain and base64 readers, and readers wanting two
 * records, parked at the same offset, each get their own answer. */
static void test_woken_together_answered_apart(void **state)
{
    (void)state;
    enum { N = 4 };
    assert_int_equal(ls_create_topic(S, "mixed", 1, NULL), 201);
    long long base = parked(S);
    static const char *const paths[] = {
        "/v1/topics/mixed/partitions/0/records?offset=0&wait_ms=20000",
        "/v1/topics/mixed/partitions/0/records?offset=0&wait_ms=20000&encoding=base64",
        "/v1/topics/mixed/partitions/0/records?offset=0&wait_ms=20000&max_records=1",
    };
    mset ms[3];
    for (int k = 0; k < 3; k++)
        mset_start(&ms[k], S, paths[k], N, NULL);
    long long end = ru_mono_ms() + 10000;
    while (parked(S) < base + 3 * N && ru_mono_ms() < end)
        for (int k = 0; k < 3; k++)
            mset_pump(&ms[k], 20);
    assert_int_equal(parked(S), base + 3 * N);
    append_n(S, "mixed", 2, ru_now_ms());
    static const char *const first_value[] = {"v0", "djA=", "v0"};
    static const size_t nrecords[] = {2, 2, 1};
    for (int k = 0; k < 3; k++) {
        assert_true(mset_finish(&ms[k], 10000));
        for (size_t i = 0; i < N; i++) {
            assert_int_equal(ms[k].r[i].status, 200);
            json_t *j = json_loads(ms[k].r[i].body, 0, NULL);
            json_t *recs = json_object_get(j, "records");
            assert_int_equal(json_array_size(recs), nrecords[k]);
            assert_string_equal(json_string_value(json_object_get(json_array_get(recs, 0), "value")),
                                first_value[k]);
            assert_int_equal(json_integer_value(json_object_get(j, "next_offset")),
                             (json_int_t)nrecords[k]);
            json_decref(j);
        }
        mset_free(&ms[k]);
    }
}

static void test_waiter_cap_and_disconnects(void **state)
{
    (void)state;
    static const char *const cap5[] = {"http.max.waiters=5", NULL};
    ls_server *B = &g_small;
    assert_int_equal(ls_start(B, cap5), 0);
    assert_int_equal(ls_create_topic(B, "w", 1, NULL), 201);
    const char *path = "/v1/topics/w/partitions/0/records?offset=0&wait_ms=20000";
    for (int round = 0; round < 2; round++) {
        mset ms;
        mset_start(&ms, B, path, 5, NULL);
        long long end = ru_mono_ms() + 5000;
        while (parked(B) < 5 && ru_mono_ms() < end)
            mset_pump(&ms, 50);
        assert_int_equal(parked(B), 5);
        /* The 6th: 429 with Retry-After, at once. */
        long long t = ru_mono_ms();
        ls_resp r;
        assert_int_equal(ls_get(B, path, &r), 0);
        assert_int_equal(ls_check_error(&r, 429, "too_many_waiters"), 0);
        assert_non_null(ls_header(&r, "Retry-After"));
        assert_true(atoi(ls_header(&r, "Retry-After")) >= 1);
        assert_true(json_is_true(ls_jget(&r, "retriable")));
        ls_resp_free(&r);
        assert_true(ru_mono_ms() - t < 2000);
        assert_int_equal(ls_live_status(B), 200);
        if (round == 0) {
            /* The five go away while parked: the server notices and frees
             * their places (it checks each second). */
            mset_free(&ms);
            end = ru_mono_ms() + 8000;
            while (parked(B) > 0 && ru_mono_ms() < end)
                ru_sleep_ms(50);
            assert_int_equal(parked(B), 0);
            assert_int_equal(ls_live_status(B), 200);
        } else {
            append_n(B, "w", 1, ru_now_ms());
            assert_true(mset_finish(&ms, 10000));
            for (size_t i = 0; i < 5; i++)
                assert_int_equal(ms.r[i].status, 200);
            mset_free(&ms);
        }
    }
    assert_int_equal(ls_stop(B), 0);
    ls_cleanup(B);
}

/* ---- SSE and NDJSON ------------------------------------------------------------------ */

static void sse(const char *query, const char *extra, json_t **events, int *comments)
{
    char path[300];
    snprintf(path, sizeof path, "/v1/topics/sse/partitions/0/records?%s", query);
    ls_resp r;
    assert_int_equal(ru_get_accept(S, path, "text/event-stream", extra, &r), 0);
    assert_int_equal(r.status, 200);
    assert_non_null(strstr(ls_header(&r, "Content-Type"), "text/event-stream"));
    *events = ru_sse_parse(r.body, r.len, comments);
    ls_resp_free(&r);
}

/* Asserts events = record events with ids from..to-1, then an end event
 * with next_offset. */
static void assert_records_then_end(json_t *ev, long long from, long long to, long long next)
{
    assert_int_equal(json_array_size(ev), (size_t)(to - from) + 1);
    for (long long id = from; id < to; id++) {
        json_t *e = json_array_get(ev, (size_t)(id - from));
        assert_string_equal(json_string_value(json_object_get(e, "event")), "record");
        assert_int_equal(json_integer_value(json_object_get(e, "id")), id);
        assert_int_equal(json_integer_value(json_object_get(json_object_get(e, "data"), "offset")), id);
    }
    json_t *end = json_array_get(ev, (size_t)(to - from));
    assert_string_equal(json_string_value(json_object_get(end, "event")), "end");
    assert_true(json_is_null(json_object_get(end, "id")));
    assert_int_equal(json_integer_value(json_object_get(json_object_get(end, "data"), "next_offset")), next);
}

static void test_sse_events_resume_and_end(void **state)
{
    (void)state;
    assert_int_equal(ls_create_topic(S, "sse", 1, NULL), 201);
    long long T = 1700000000000LL;
    append_n(S, "sse", 5, T);
    json_t *ev;
    int comments;
    sse("offset=0&max_records=5", NULL, &ev, &comments);
    assert_records_then_end(ev, 0, 5, 5);
    assert_string_equal(json_string_value(json_object_get(json_object_get(json_array_get(ev, 3), "data"), "key")), "k3");
    assert_int_equal(json_integer_value(json_object_get(json_object_get(json_array_get(ev, 5), "data"),
                                                        "high_watermark")),
                     5);
    json_decref(ev);
    /* Last-Event-ID wins over offset: resume after 2. */
    sse("offset=0&max_records=2", "Last-Event-ID: 2", &ev, &comments);
    assert_records_then_end(ev, 3, 5, 5);
    json_decref(ev);
    sse("offset=0&max_records=1", "Last-Event-ID: 0", &ev, &comments);
    assert_records_then_end(ev, 1, 2, 2);
    json_decref(ev);
    /* until_timestamp: records up to T+2, then the cursor at 3. */
    char q[128];
    snprintf(q, sizeof q, "offset=0&until_timestamp=%lld", T + 2);
    sse(q, NULL, &ev, &comments);
    assert_records_then_end(ev, 0, 3, 3);
    json_decref(ev);
}

static void test_ndjson_lines_and_cursor(void **state)
{
    (void)state;
    ls_resp r;
    assert_int_equal(ru_get_accept(S, "/v1/topics/sse/partitions/0/records?offset=1&max_records=3",
                                   "application/x-ndjson", NULL, &r),
                     0);
    assert_int_equal(r.status, 200);
    assert_non_null(strstr(ls_header(&r, "Content-Type"), "application/x-ndjson"));
    /* One line per record, each a JSON object, and the cursor last. */
    size_t nl = 0;
    for (size_t i = 0; i < r.len; i++)
        nl += r.body[i] == '\n';
    assert_int_equal(nl, 4);
    json_t *lines = ru_ndjson_parse(r.body, r.len);
    assert_int_equal(json_array_size(lines), 4);
    for (size_t i = 0; i < 3; i++) {
        json_t *l = json_array_get(lines, i);
        assert_int_equal(json_integer_value(json_object_get(l, "offset")), (json_int_t)(i + 1));
        assert_non_null(json_object_get(l, "value"));
    }
    json_t *cursor = json_array_get(lines, 3);
    assert_int_equal(json_integer_value(json_object_get(cursor, "next_offset")), 4);
    assert_int_equal(json_integer_value(json_object_get(cursor, "high_watermark")), 5);
    json_decref(lines);
    ls_resp_free(&r);
}

/* An unbounded stream at the high watermark: heartbeats while idle, then
 * each appended record as it comes. */
static void follow(const char *accept, int *heartbeats, json_t **items)
{
    mset ms;
    mset_start(&ms, S, "/v1/topics/sse/partitions/0/records?offset=latest", 1, accept);
    long long hw = ls_log_end_offset(S, "sse", 0);
    mset_pump(&ms, 1000); /* idle: about three heartbeats */
    for (int i = 0; i < 3; i++) {
        append_n(S, "sse", 1, ru_now_ms());
        mset_pump(&ms, 150);
    }
    mset_pump(&ms, 700);
    assert_int_equal(ms.ndone, 0); /* still open: unbounded */
    assert_int_equal(ms.r[0].status, 0);
    long code;
    curl_easy_getinfo(ms.r[0].h, CURLINFO_RESPONSE_CODE, &code);
    assert_int_equal(code, 200);
    if (strstr(accept, "event-stream")) {
        *items = ru_sse_parse(ms.r[0].body, ms.r[0].len, heartbeats);
    } else {
        *heartbeats = 0;
        *items = ru_ndjson_parse(ms.r[0].body, ms.r[0].len);
    }
    assert_int_equal(json_array_size(*items), 3);
    for (size_t i = 0; i < 3; i++) {
        json_t *it = json_array_get(*items, i);
        json_t *rec = json_object_get(it, "data") ? json_object_get(it, "data") : it;
        assert_int_equal(json_integer_value(json_object_get(rec, "offset")), hw + (long long)i);
    }
    mset_free(&ms);
}

static void test_streams_follow_the_log_with_heartbeats(void **state)
{
    (void)state;
    int hb;
    json_t *items;
    follow("text/event-stream", &hb, &items);
    fprintf(stderr, "# %d heartbeats in ~1.8 s at 300 ms\n", hb);
    assert_true(hb >= 2);
    assert_string_equal(json_string_value(json_object_get(json_array_get(items, 0), "event")), "record");
    json_decref(items);
    follow("application/x-ndjson", &hb, &items);
    json_decref(items);
}

static void test_sse_error_when_position_deleted(void **state)
{
    (void)state;
    assert_int_equal(ls_create_topic(S, "gone", 1, "{\"segment.bytes\":\"1048576\"}"), 201);
    append_big(S, "gone", 16); /* ~16 MB, more than the sockets can buffer */
    int fd = raw_get(S, "/v1/topics/gone/partitions/0/records?offset=0", "text/event-stream", 4096);
    assert_true(fd >= 0);
    char *buf = malloc(1 << 20);
    size_t got = raw_read(fd, buf, 64 << 10, 3000);
    assert_true(got > 0);
    buf[got] = 0;
    assert_non_null(strstr(buf, "event: record"));
    ru_sleep_ms(500); /* the server fills the socket and stops */
    ls_resp r;
    assert_int_equal(ls_post(S, "/v1/topics/gone/partitions/0/records:delete", "{\"before_offset\":-1}", &r), 0);
    assert_int_equal(r.status, 200);
    assert_int_equal(ls_jint(&r, "log_start_offset"), 1600);
    ls_resp_free(&r);
    assert_int_equal(ls_post(S, "/v1/topics/gone/retention:run", "{\"dry_run\":false}", &r), 0);
    assert_int_equal(r.status, 200);
    ls_resp_free(&r);
    /* Read on: the records already sent, then an error event. */
    bool found = false;
    size_t total = got;
    char tail[8192] = {0};
    long long end = ru_mono_ms() + 20000;
    while (!found && ru_mono_ms() < end) {
        size_t n = raw_read(fd, buf, (1 << 20) - 1, 500);
        if (n == 0)
            continue;
        total += n;
        buf[n] = 0;
        /* keep the last bytes: the event may straddle two reads */
        size_t keep = strlen(tail) > 4096 ? 4096 : strlen(tail);
        memmove(tail, tail + strlen(tail) - keep, keep);
        size_t add = n > 4000 ? 4000 : n;
        memcpy(tail + keep, buf + n - add, add);
        tail[keep + add] = 0;
        found = strstr(tail, "event: error") && strstr(tail, "offset_out_of_range");
    }
    fprintf(stderr, "# read %zu bytes before the error event\n", total);
    assert_true(found);
    assert_true(total < 20u << 20);
    close(fd);
    free(buf);
}

/* Deleting a topic ends what waits on it at once: the long-poll gets 404,
 * each stream an error naming unknown_topic; the name then starts empty. */
static void test_topic_deleted_under_readers(void **state)
{
    (void)state;
    assert_int_equal(ls_create_topic(S, "doomed", 1, NULL), 201);
    append_n(S, "doomed", 1, ru_now_ms());
    long long base = parked(S);
    poll_req q;
    assert_int_equal(poll_start(&q, S, "/v1/topics/doomed/partitions/0/records?offset=1&wait_ms=20000"), 0);
    mset sse, nd;
    mset_start(&sse, S, "/v1/topics/doomed/partitions/0/records?offset=0", 1, "text/event-stream");
    mset_start(&nd, S, "/v1/topics/doomed/partitions/0/records?offset=0", 1, "application/x-ndjson");
    long long end = ru_mono_ms() + 5000;
    while (parked(S) < base + 3 && ru_mono_ms() < end) {
        mset_pump(&sse, 20);
        mset_pump(&nd, 20);
    }
    assert_true(wait_parked(S, base + 3, 100));
    long long t_delete = ru_mono_ms();
    ls_resp r;
    assert_int_equal(ls_delete(S, "/v1/topics/doomed", &r), 0);
    assert_int_equal(r.status, 204);
    ls_resp_free(&r);
    end = ru_mono_ms() + 5000;
    while ((sse.ndone < 1 || nd.ndone < 1) && ru_mono_ms() < end) {
        mset_pump(&sse, 20);
        mset_pump(&nd, 20);
    }
    pthread_join(q.th, NULL);
    fprintf(stderr, "# long-poll answered %lld ms after the delete\n", q.t1 - t_delete);
    assert_int_equal(q.r.status, 404);
    assert_string_equal(ls_jstr(&q.r, "error_code"), "unknown_topic");
    assert_true(q.t1 - t_delete < 5000);
    ls_resp_free(&q.r);
    assert_int_equal(sse.ndone, 1);
    assert_int_equal(nd.ndone, 1);
    assert_non_null(strstr(sse.r[0].body, "event: record"));
    assert_non_null(strstr(sse.r[0].body, "event: error"));
    assert_non_null(strstr(sse.r[0].body, "\"unknown_topic\""));
    assert_non_null(strstr(nd.r[0].body, "{\"error\":{\"error_code\":\"unknown_topic\""));
    mset_free(&sse);
    mset_free(&nd);

    assert_int_equal(ls_create_topic(S, "doomed", 1, NULL), 201);
    assert_int_equal(ls_get(S, "/v1/topics/doomed/partitions/0/records?offset=0", &r), 0);
    assert_int_equal(r.status, 200);
    assert_int_equal(json_array_size(ls_jget(&r, "records")), 0);
    ls_resp_free(&r);
}

static void test_slow_sse_client_bounded_memory(void **state)
{
    (void)state;
    /* Its own server, with a small ASan quarantine: freed request buffers
     * would otherwise stay resident and hide what the stream holds. */
    const char *old = getenv("ASAN_OPTIONS");
    char *saved = old ? strdup(old) : NULL;
    char opts[512];
    snprintf(opts, sizeof opts, "%s%squarantine_size_mb=4", old ? old : "", old && *old ? ":" : "");
    setenv("ASAN_OPTIONS", opts, 1);
    ls_server *D = &g_slow;
    int rc = ls_start(D, settings);
    if (saved)
        setenv("ASAN_OPTIONS", saved, 1);
    else
        unsetenv("ASAN_OPTIONS");
    free(saved);
    assert_int_equal(rc, 0);
    assert_int_equal(ls_create_topic(D, "slow", 1, NULL), 201);
    append_big(D, "slow", 2); /* warm up the append path */
    int fd = raw_get(D, "/v1/topics/slow/partitions/0/records?offset=latest", "text/event-stream", 4096);
    assert_true(fd >= 0);
    char head[4096];
    assert_true(raw_read(fd, head, sizeof head - 1, 1000) > 0); /* status line and headers */
    long long rss0 = proc_status(D->pid, "VmRSS");
    append_big(D, "slow", 50); /* ~50 MB the client never reads */
    ru_sleep_ms(500);
    long long rss1 = proc_status(D->pid, "VmRSS");
    fprintf(stderr, "# server RSS %lld kB -> %lld kB after 50 MB to a client that does not read\n", rss0,
            rss1);
    assert_true(rss0 > 0 && rss1 > 0);
    assert_true(rss1 - rss0 < 24 * 1024); /* holding the stream would be >= 50 MB */
    /* A second one that starts at offset 0, with all of it there already:
     * the stream must not read ahead of the socket either. */
    int fd2 = raw_get(D, "/v1/topics/slow/partitions/0/records?offset=0", "text/event-stream", 4096);
    assert_true(fd2 >= 0);
    assert_true(raw_read(fd2, head, sizeof head - 1, 1000) > 0);
    ru_sleep_ms(500);
    long long rss2 = proc_status(D->pid, "VmRSS");
    fprintf(stderr, "# %lld kB with a second one reading from offset 0\n", rss2);
    assert_true(rss2 - rss0 < 24 * 1024);
    /* The streams are live, just behind: they give records once read. */
    char *buf = malloc(256 << 10);
    for (int k = 0; k < 2; k++) {
        size_t n = raw_read(k ? fd2 : fd, buf, (256 << 10) - 1, 3000);
        buf[n] = 0;
        assert_non_null(strstr(buf, "event: record"));
    }
    free(buf);
    /* And the server stops cleanly with those clients still connected. */
    assert_int_equal(ls_stop(D), 0);
    close(fd);
    close(fd2);
    ls_cleanup(D);
}

/* ---- raw batches ----------------------------------------------------------------------- */

static void raw(const char *query, ls_resp *r)
{
    char path[256];
    snprintf(path, sizeof path, "/v1/topics/raw/partitions/0/records?%s", query);
    assert_int_equal(ru_get_accept(S, path, "application/octet-stream", NULL, r), 0);
}

static void test_raw_reads(void **state)
{
    (void)state;
    assert_int_equal(ls_create_topic(S, "raw", 1, NULL), 201);
    append_n(S, "raw", 2, 1700000000000LL); /* offsets 0-1 */
    append_n(S, "raw", 3, 1700000000100LL); /* 2-4 */
    append_n(S, "raw", 4, 1700000000200LL); /* 5-8 */
    ls_resp all, r;
    raw("offset=0", &all);
    assert_int_equal(all.status, 200);
    assert_non_null(strstr(ls_header(&all, "Content-Type"), "application/octet-stream"));
    assert_int_equal(ru_batch_count((uint8_t *)all.body, all.len), 3);
    assert_int_equal(atoll(ls_header(&all, "X-Next-Offset")), 9);
    assert_int_equal(atoll(ls_header(&all, "X-High-Watermark")), 9);
    size_t b0 = ru_be32((uint8_t *)all.body + 8) + 12;
    size_t b1 = ru_be32((uint8_t *)all.body + b0 + 8) + 12;
    /* Offset 3 is inside the second batch: the body starts there, whole. */
    raw("offset=3", &r);
    assert_int_equal(r.status, 200);
    assert_int_equal(r.len, all.len - b0);
    assert_memory_equal(r.body, all.body + b0, r.len);
    assert_int_equal((long long)ru_be64((uint8_t *)r.body), 2);
    assert_int_equal(atoll(ls_header(&r, "X-Next-Offset")), 9);
    ls_resp_free(&r);
    /* A tiny max_bytes still gives one whole batch. */
    raw("offset=3&max_bytes=1", &r);
    assert_int_equal(r.status, 200);
    assert_int_equal(r.len, b1);
    assert_memory_equal(r.body, all.body + b0, b1);
    assert_int_equal(atoll(ls_header(&r, "X-Next-Offset")), 5);
    assert_int_equal(atoll(ls_header(&r, "X-High-Watermark")), 9);
    ls_resp_free(&r);
    raw("offset=0&max_bytes=1", &r);
    assert_int_equal(r.len, b0);
    assert_int_equal(atoll(ls_header(&r, "X-Next-Offset")), 2);
    ls_resp_free(&r);
    /* At the high watermark: 200 and nothing. */
    raw("offset=9", &r);
    assert_int_equal(r.status, 200);
    assert_int_equal(r.len, 0);
    assert_int_equal(atoll(ls_header(&r, "X-Next-Offset")), 9);
    assert_int_equal(atoll(ls_header(&r, "X-High-Watermark")), 9);
    ls_resp_free(&r);
    /* Outside [log start, high watermark]: 416 with the bounds. */
    raw("offset=10", &r);
    assert_int_equal(ls_check_error(&r, 416, "offset_out_of_range"), 0);
    assert_int_equal(ls_jint(&r, "details.high_watermark"), 9);
    ls_resp_free(&r);
    raw("offset=-1", &r);
    assert_int_equal(ls_check_error(&r, 416, "offset_out_of_range"), 0);
    ls_resp_free(&r);
    assert_int_equal(ls_post(S, "/v1/topics/raw/partitions/0/records:delete", "{\"before_offset\":5}", &r), 0);
    assert_int_equal(r.status, 200);
    ls_resp_free(&r);
    raw("offset=2", &r);
    assert_int_equal(ls_check_error(&r, 416, "offset_out_of_range"), 0);
    assert_int_equal(ls_jint(&r, "details.log_start_offset"), 5);
    ls_resp_free(&r);
    raw("offset=5", &r);
    assert_int_equal(r.status, 200);
    assert_int_equal(r.len, all.len - b0 - b1);
    assert_memory_equal(r.body, all.body + b0 + b1, r.len);
    assert_int_equal(atoll(ls_header(&r, "X-Log-Start-Offset")), 5);
    ls_resp_free(&r);
    ls_resp_free(&all);

    /* Raw reads long-poll too: parked at the high watermark, answered with
     * the batch an append brings; and empty, with the cursor, when the wait
     * ends.  (wait_ms used to be ignored, so a raw consumer could only spin.) */
    long long base = parked(S);
    poll_req q;
    assert_int_equal(poll_start_accept(&q, S, "/v1/topics/raw/partitions/0/records?offset=9&wait_ms=10000",
                                       "application/octet-stream"), 0);
    assert_true(wait_parked(S, base + 1, 5000));
    ru_sleep_ms(100);
    assert_false(atomic_load(&q.done));
    append_n(S, "raw", 2, 1700000000300LL); /* 9-10 */
    pthread_join(q.th, NULL);
    assert_int_equal(q.rc, 0);
    assert_int_equal(q.r.status, 200);
    assert_int_equal(ru_batch_count((uint8_t *)q.r.body, q.r.len), 1);
    assert_int_equal((long long)ru_be64((uint8_t *)q.r.body), 9);
    assert_int_equal(atoll(ls_header(&q.r, "X-Next-Offset")), 11);
    assert_true(q.t1 - q.t0 >= 100);
    ls_resp_free(&q.r);
    assert_int_equal(poll_start_accept(&q, S, "/v1/topics/raw/partitions/0/records?offset=11&wait_ms=600",
                                       "application/octet-stream"), 0);
    pthread_join(q.th, NULL);
    assert_int_equal(q.r.status, 200);
    assert_int_equal(q.r.len, 0);
    assert_int_equal(atoll(ls_header(&q.r, "X-Next-Offset")), 11);
    assert_true(q.t1 - q.t0 >= 550);
    ls_resp_free(&q.r);
}

/* ---- the cap, and stopping ---------------------------------------------------------------- */

static void test_long_poll_capped_at_30s(void **state)
{
    (void)state;
    pthread_join(g_cap.th, NULL); /* started by group_setup with wait_ms=60000 */
    long long took = g_cap.t1 - g_cap.t0;
    fprintf(stderr, "# wait_ms=60000 on an idle partition answered after %lld ms\n", took);
    assert_int_equal(g_cap.rc, 0);
    assert_int_equal(g_cap.r.status, 200);
    assert_int_equal(json_array_size(ls_jget(&g_cap.r, "records")), 0);
    assert_true(took >= 29500 && took <= 33000);
    ls_resp_free(&g_cap.r);
}

/* Stopping answers every parked long-poll (an empty 200) and ends every
 * stream before it closes their connections.  Sixty long-polls make the
 * answers take long enough to go out that a stop which only waited for the
 * resumes closed some first (one long-poll in a CI run got no answer). */
#define STOP_POLLS 60

static void test_stop_with_open_streams_and_polls(void **state)
{
    (void)state;
    long long base = parked(S);
    mset polls, sses, nd;
    mset_start(&polls, S, "/v1/topics/lp/partitions/0/records?offset=latest&wait_ms=20000",
               STOP_POLLS, NULL);
    mset_start(&sses, S, "/v1/topics/lp/partitions/0/records?offset=latest", 2, "text/event-stream");
    mset_start(&nd, S, "/v1/topics/lp/partitions/0/records?offset=latest", 1, "application/x-ndjson");
    long long want = base + STOP_POLLS + 3, end = ru_mono_ms() + 5000;
    while (parked(S) < want && ru_mono_ms() < end) {
        mset_pump(&polls, 20);
        mset_pump(&sses, 20);
        mset_pump(&nd, 20);
    }
    long long now = parked(S);
    if (now != want)
        fprintf(stderr, "# parked readers: %lld before, %lld now (%d more wanted)\n", base, now,
                STOP_POLLS + 3);
    assert_int_equal(now, want);
    long long t = ru_mono_ms();
    assert_int_equal(ls_stop(S), 0);
    fprintf(stderr, "# stopped in %lld ms with %d long-polls and 3 streams open\n",
            ru_mono_ms() - t, STOP_POLLS);
    assert_true(ru_mono_ms() - t < 15000);
    /* Every client got an ending: the long-polls an (empty) answer. */
    assert_true(mset_finish(&polls, 5000));
    int answered = 0;
    for (size_t i = 0; i < STOP_POLLS; i++)
        answered += polls.r[i].status == 200;
    fprintf(stderr, "# %d of %d long-polls answered 200\n", answered, STOP_POLLS);
    assert_int_equal(answered, STOP_POLLS);
    /* The streams a clean end of their chunked body, not a cut connection,
     * after the cursor to resume from: SSE's end event, NDJSON's last line. */
    assert_true(mset_finish(&sses, 5000));
    assert_true(mset_finish(&nd, 5000));
    for (size_t i = 0; i < 2; i++) {
        assert_int_equal(sses.r[i].rc, CURLE_OK);
        assert_non_null(sses.r[i].body);
        assert_non_null(strstr(sses.r[i].body, "event: end\ndata: {\"next_offset\":"));
    }
    assert_int_equal(nd.r[0].rc, CURLE_OK);
    assert_non_null(nd.r[0].body);
    assert_non_null(strstr(nd.r[0].body, "{\"next_offset\":"));
    mset_free(&polls);
    mset_free(&sses);
    mset_free(&nd);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_long_poll_wakes_on_append),
        cmocka_unit_test(test_long_poll_times_out_empty),
        cmocka_unit_test(test_long_poll_min_bytes),
        cmocka_unit_test(test_hundreds_of_parked_long_polls),
        cmocka_unit_test(test_woken_together_answered_apart),
        cmocka_unit_test(test_waiter_cap_and_disconnects),
        cmocka_unit_test(test_sse_events_resume_and_end),
        cmocka_unit_test(test_ndjson_lines_and_cursor),
        cmocka_unit_test(test_streams_follow_the_log_with_heartbeats),
        cmocka_unit_test(test_sse_error_when_position_deleted),
        cmocka_unit_test(test_topic_deleted_under_readers),
        cmocka_unit_test(test_slow_sse_client_bounded_memory),
        cmocka_unit_test(test_raw_reads),
        cmocka_unit_test(test_long_poll_capped_at_30s),
        cmocka_unit_test(test_stop_with_open_streams_and_polls),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
