/*
 * test_tailing_edges.c - edge cases of reads that wait and stream
 * (api_read.c, api_wait.c), against the real server binary; the common
 * cases are in test_tailing.c.
 *
 * Deadlines under traffic: while appends every few milliseconds keep waking
 * an SSE reader on one partition, a long-poll on an idle partition still
 * ends at its wait_ms and an idle SSE stream still gets its heartbeats (the
 * registry's sweep once ran only when 20 ms passed without any wake, so
 * steady traffic anywhere held every deadline back).
 *
 * min_bytes: a long-poll with the default min_bytes=1 is answered by an
 * empty record (null key, "" value), which once counted 0 bytes.
 *
 * A page already cut short (max_records, until_timestamp, a raw read's
 * max_bytes) is answered at once instead of spinning until wait_ms.
 *
 * A stream over one large compressed batch renders it a refill at a time.
 *
 * Last-Event-ID: the largest int64 (whose next offset does not exist) is
 * past the high watermark like any other: 416, or the high watermark with
 * clamp=true; one that is not an offset (text, -5, past int64) is ignored.
 * A stream's start has the bounds of any read: one past the
 * high watermark (by offset or Last-Event-ID) or below the log start offset
 * is 416, for SSE and NDJSON.  A stream opens with the ID of the offset
 * before its start, so an idle `offset=latest` reader that reconnects with
 * it misses nothing.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "harness.h"
#include "read_util.h"
#include "tail_util.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static ls_server g_srv;
static ls_server *S = &g_srv;

static const char *const settings[] = {"http.sse.heartbeat.ms=300", "log.initial.task.delay.ms=3600000",
                                       NULL};

static int group_setup(void **state)
{
    (void)state;
    return ls_start(S, settings);
}

static int group_teardown(void **state)
{
    (void)state;
    ls_stop(S);
    ls_cleanup(S);
    return 0;
}

/* Waits until no reader is parked (a closed client leaves the registry
 * within about a second), so a test can count its own.  The bound is
 * generous: a full run on a machine busy compiling once took more than 5 s
 * to see the 8 MB stream of test_slow_stream_renders_per_refill go. */
static void settle(void)
{
    long long end = ru_mono_ms() + 20000;
    while (parked(S) != 0 && ru_mono_ms() < end)
        ru_sleep_ms(20);
    assert_int_equal(parked(S), 0);
}

/* ---- deadlines under traffic ------------------------------------------------------------ */

/* Appends to busy/0 every couple of milliseconds until stop is set. */
typedef struct appender {
    ls_server *s;
    _Atomic int stop;
    int appended, failed;
    pthread_t th;
} appender;

static void *append_main(void *arg)
{
    appender *a = arg;
    while (!atomic_load(&a->stop)) {
        if (ls_append_json(a->s, "busy", 0, "{\"records\":[{\"value\":\"x\"}]}") == 200)
            a->appended++;
        else
            a->failed++;
        ru_sleep_ms(2);
    }
    return NULL;
}

static void test_deadlines_kept_under_traffic(void **state)
{
    (void)state;
    assert_int_equal(ls_create_topic(S, "busy", 1, NULL), 201);
    assert_int_equal(ls_create_topic(S, "idle", 1, NULL), 201);
    long long base = parked(S);
    /* A reader that parks again after every append: each append wakes the
     * registry. */
    mset busy, idle_sse;
    mset_start(&busy, S, "/v1/topics/busy/partitions/0/records?offset=latest", 1, "text/event-stream");
    mset_start(&idle_sse, S, "/v1/topics/idle/partitions/0/records?offset=latest", 1,
               "text/event-stream");
    long long end = ru_mono_ms() + 5000;
    while (parked(S) < base + 2 && ru_mono_ms() < end) {
        mset_pump(&busy, 20);
        mset_pump(&idle_sse, 20);
    }
    assert_int_equal(parked(S), base + 2);
    appender a = {.s = S};
    assert_int_equal(pthread_create(&a.th, NULL, append_main, &a), 0);
    mset_pump(&busy, 200);
    poll_req q;
    assert_int_equal(poll_start(&q, S, "/v1/topics/idle/partitions/0/records?offset=latest&wait_ms=500"), 0);
    /* Keep the traffic going past the long-poll's deadline (and long enough
     * for a few heartbeats), or until it is clear the deadline was missed. */
    long long t0 = ru_mono_ms();
    end = t0 + 8000;
    while (ru_mono_ms() < end && (!atomic_load(&q.done) || ru_mono_ms() - t0 < 1500)) {
        mset_pump(&busy, 20);
        mset_pump(&idle_sse, 20);
    }
    atomic_store(&a.stop, 1);
    pthread_join(a.th, NULL);
    pthread_join(q.th, NULL);
    int heartbeats;
    json_t *ev = ru_sse_parse(idle_sse.r[0].body ? idle_sse.r[0].body : "", idle_sse.r[0].len, &heartbeats);
    int busy_hb;
    json_t *busy_ev = ru_sse_parse(busy.r[0].body ? busy.r[0].body : "", busy.r[0].len, &busy_hb);
    fprintf(stderr,
            "# %d appends (%d failed); wait_ms=500 answered after %lld ms; busy reader got %zu "
            "events, idle one %d heartbeats\n",
            a.appended, a.failed, q.t1 - q.t0, json_array_size(busy_ev), heartbeats);
    assert_int_equal(a.failed, 0);
    assert_true(a.appended >= 50);
    assert_true(json_array_size(busy_ev) >= 50);
    assert_int_equal(q.rc, 0);
    assert_int_equal(q.r.status, 200);
    assert_int_equal(json_array_size(ls_jget(&q.r, "records")), 0);
    assert_true(q.t1 - q.t0 >= 450);
    assert_true(q.t1 - q.t0 < 3000);
    assert_int_equal(json_array_size(ev), 0);
    assert_true(heartbeats >= 1);
    json_decref(ev);
    json_decref(busy_ev);
    ls_resp_free(&q.r);
    mset_free(&busy);
    mset_free(&idle_sse);
}

/* ---- min_bytes ----------------------------------------------------------------------- */

static void test_empty_record_satisfies_min_bytes(void **state)
{
    (void)state;
    settle();
    assert_int_equal(ls_create_topic(S, "empty", 1, NULL), 201);
    poll_req q;
    assert_int_equal(poll_start(&q, S, "/v1/topics/empty/partitions/0/records?offset=latest&wait_ms=5000"), 0);
    assert_true(wait_parked(S, 1, 5000));
    ru_sleep_ms(200);
    long long t_append = ru_mono_ms();
    assert_int_equal(ls_append_json(S, "empty", 0, "{\"records\":[{\"value\":\"\"}]}"), 200);
    pthread_join(q.th, NULL);
    fprintf(stderr, "# answered %lld ms after the append of an empty record\n", q.t1 - t_append);
    assert_int_equal(q.rc, 0);
    assert_int_equal(q.r.status, 200);
    assert_int_equal(json_array_size(ls_jget(&q.r, "records")), 1);
    assert_true(json_is_null(ls_jget(&q.r, "records.0.key")));
    assert_string_equal(ls_jstr(&q.r, "records.0.value"), "");
    assert_int_equal(ls_jint(&q.r, "next_offset"), 1);
    assert_true(q.t1 - t_append < 2500); /* wait_ms / 2: generous */
    ls_resp_free(&q.r);
    /* Readers asking the same question are woken and answered together. */
    mset ms;
    mset_start(&ms, S, "/v1/topics/empty/partitions/0/records?offset=1&wait_ms=5000", 3, NULL);
    long long end = ru_mono_ms() + 5000;
    while (parked(S) < 3 && ru_mono_ms() < end)
        mset_pump(&ms, 20);
    assert_int_equal(parked(S), 3);
    t_append = ru_mono_ms();
    assert_int_equal(ls_append_json(S, "empty", 0, "{\"records\":[{\"value\":\"\"}]}"), 200);
    assert_true(mset_finish(&ms, 2500));
    fprintf(stderr, "# three answered %lld ms after the append\n", ru_mono_ms() - t_append);
    for (size_t i = 0; i < 3; i++) {
        assert_int_equal(ms.r[i].status, 200);
        json_t *page = json_loads(ms.r[i].body, 0, NULL);
        assert_non_null(page);
        assert_int_equal(json_array_size(json_object_get(page, "records")), 1);
        assert_int_equal(json_integer_value(json_object_get(page, "next_offset")), 2);
        json_decref(page);
    }
    mset_free(&ms);
}

/* min_bytes=0 is Kafka's fetch.min.bytes=0: the read is answered at once,
 * empty at the high watermark, however long wait_ms is (it was refused with
 * 400). */
static void test_min_bytes_zero_answers_at_once(void **state)
{
    (void)state;
    settle();
    assert_int_equal(ls_create_topic(S, "zero", 1, NULL), 201);
    assert_int_equal(ls_append_json(S, "zero", 0, "{\"records\":[{\"value\":\"a\"}]}"), 200);
    poll_req q;
    assert_int_equal(poll_start(&q, S, "/v1/topics/zero/partitions/0/records?offset=latest&wait_ms=30000&min_bytes=0"), 0);
    pthread_join(q.th, NULL);
    assert_int_equal(q.rc, 0);
    assert_int_equal(q.r.status, 200);
    assert_int_equal(json_array_size(ls_jget(&q.r, "records")), 0);
    assert_int_equal(ls_jint(&q.r, "next_offset"), 1);
    assert_true(q.t1 - q.t0 < 15000); /* not parked for its wait_ms: generous */
    ls_resp_free(&q.r);
    /* Below the high watermark it answers what is there, as any read. */
    assert_int_equal(poll_start(&q, S, "/v1/topics/zero/partitions/0/records?offset=0&wait_ms=30000&min_bytes=0"), 0);
    pthread_join(q.th, NULL);
    assert_int_equal(q.r.status, 200);
    assert_int_equal(json_array_size(ls_jget(&q.r, "records")), 1);
    ls_resp_free(&q.r);
}

/* ---- a page already cut short ----------------------------------------------------------- */

/* A long-poll whose page stops below the high watermark (max_records,
 * until_timestamp, a raw read's max_bytes) cannot gain by waiting: it is
 * answered at once.  It used to be parked at its next offset, woken at once
 * by the data already past it, and parked again, spinning a core for the
 * whole wait_ms and answering only at its end. */
static void test_cut_page_answers_at_once(void **state)
{
    (void)state;
    settle();
    assert_int_equal(ls_create_topic(S, "cut", 1, NULL), 201);
    assert_int_equal(ls_append_json(S, "cut", 0,
                                    "{\"records\":[{\"value\":\"a\",\"timestamp\":1000},"
                                    "{\"value\":\"b\",\"timestamp\":2000}]}"),
                     200);
    static const char *const paths[] = {
        "/v1/topics/cut/partitions/0/records?offset=0&max_records=1&min_bytes=1000&wait_ms=10000",
        "/v1/topics/cut/partitions/0/records?offset=0&until_timestamp=1500&min_bytes=1000&wait_ms=10000",
    };
    for (size_t i = 0; i < 2; i++) {
        long long t0 = ru_mono_ms();
        ls_resp r;
        assert_int_equal(ls_get(S, paths[i], &r), 0);
        long long took = ru_mono_ms() - t0;
        fprintf(stderr, "# cut page %zu answered in %lld ms\n", i, took);
        assert_int_equal(r.status, 200);
        assert_int_equal(json_array_size(ls_jget(&r, "records")), 1);
        assert_int_equal(ls_jint(&r, "next_offset"), 1);
        assert_true(took < 5000); /* wait_ms / 2: generous */
        ls_resp_free(&r);
    }
    /* A raw read of one batch with max_bytes below it still answers that
     * batch; the page it makes is final too. */
    assert_int_equal(ls_append_json(S, "cut", 0, "{\"records\":[{\"value\":\"c\"}]}"), 200);
    long long t0 = ru_mono_ms();
    ls_resp r;
    assert_int_equal(ru_get_accept(S, "/v1/topics/cut/partitions/0/records?offset=0&max_bytes=1&"
                                      "min_bytes=100000&wait_ms=10000",
                                   "application/octet-stream", NULL, &r),
                     0);
    assert_int_equal(r.status, 200);
    assert_true(ru_mono_ms() - t0 < 5000);
    ls_resp_free(&r);
    assert_int_equal(parked(S), 0);
}

/* Appenders that keep the high watermark moving while a long-poll's page is
 * built do not end the wait early: the page was taken for cut short when
 * the high watermark had moved past it by the time it was built, and every
 * such long-poll answered at once, short of its min_bytes. */
typedef struct steady_writer {
    ls_server *s;
    _Atomic bool stop;
    _Atomic long appended;
} steady_writer;

static void *steady_write(void *arg)
{
    steady_writer *w = arg;
    while (!atomic_load(&w->stop))
        if (ls_append_json(w->s, "steady", 0, "{\"records\":[{\"value\":\"x\"}]}") == 200)
            atomic_fetch_add(&w->appended, 1);
    return NULL;
}

static void test_min_bytes_waits_under_steady_appends(void **state)
{
    (void)state;
    settle();
    assert_int_equal(ls_create_topic(S, "steady", 1, NULL), 201);
    steady_writer w = {.s = S};
    pthread_t th[3];
    for (int i = 0; i < 3; i++)
        assert_int_equal(pthread_create(&th[i], NULL, steady_write, &w), 0);
    ru_sleep_ms(200);
    long long t0 = ru_mono_ms();
    ls_resp r;
    assert_int_equal(ls_get(S, "/v1/topics/steady/partitions/0/records?offset=latest&wait_ms=1500&"
                               "min_bytes=100000000&max_records=10000",
                            &r),
                     0);
    long long took = ru_mono_ms() - t0;
    atomic_store(&w.stop, true);
    for (int i = 0; i < 3; i++)
        pthread_join(th[i], NULL);
    fprintf(stderr, "# answered after %lld ms with %zu records; %ld appends meanwhile\n", took,
            json_array_size(ls_jget(&r, "records")), atomic_load(&w.appended));
    assert_int_equal(r.status, 200);
    assert_true(took >= 1400); /* the wait ran to its end */
    assert_true(json_array_size(ls_jget(&r, "records")) > 0);
    ls_resp_free(&r);
}

/* A stream client that leaves mid-stream is the normal end of a reader:
 * libmicrohttpd's "closed by remote peer" goes to DEBUG, not WARN (a chaos
 * run logged 1,377 such warnings in 8 minutes). */
static void test_client_leaving_is_not_a_warning(void **state)
{
    (void)state;
    settle();
    assert_int_equal(ls_create_topic(S, "leave", 1, NULL), 201);
    char body[70000];
    int used = snprintf(body, sizeof body, "{\"records\":[");
    for (int i = 0; i < 60; i++)
        used += snprintf(body + used, sizeof body - (size_t)used, "%s{\"value\":\"%01000d\"}",
                         i ? "," : "", i);
    snprintf(body + used, sizeof body - (size_t)used, "]}");
    for (int k = 0; k < 20; k++)
        assert_int_equal(ls_append_json(S, "leave", 0, body), 200); /* 1.2 MB */
    for (int c = 0; c < 5; c++) {
        int fd = raw_get(S, "/v1/topics/leave/partitions/0/records?offset=0", "text/event-stream", 4096);
        assert_true(fd >= 0);
        char head[4096];
        assert_true(raw_read(fd, head, sizeof head - 1, 2000) > 0);
        struct linger lg = {.l_onoff = 1, .l_linger = 0}; /* a reset, as a killed client sends */
        setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
        close(fd);
    }
    ru_sleep_ms(500);
    size_t len;
    char *log = ls_read_file(S->log_path, &len);
    assert_non_null(log);
    for (char *line = strtok(log, "\n"); line; line = strtok(NULL, "\n"))
        if (strstr(line, "WARN") && strstr(line, "peer"))
            fail_msg("a client leaving was logged as a warning: %s", line);
    free(log);
}

/* ---- read metrics ---------------------------------------------------------------------- */

/* A long-poll woken by too little for its min_bytes parks again; the page it
 * built then is not sent, and is not counted as read: records_read counted
 * every such page, so one reader inflated it with each append. */
static void test_reparked_pages_not_counted(void **state)
{
    (void)state;
    settle();
    assert_int_equal(ls_create_topic(S, "tally", 1, NULL), 201);
    poll_req q;
    assert_int_equal(poll_start(&q, S, "/v1/topics/tally/partitions/0/records?offset=0&"
                                       "min_bytes=100000&wait_ms=1500"),
                     0);
    assert_true(wait_parked(S, 1, 5000));
    for (int i = 0; i < 3; i++) {
        assert_int_equal(ls_append_json(S, "tally", 0, "{\"records\":[{\"value\":\"x\"}]}"), 200);
        ru_sleep_ms(100); /* each wakes the reader, which parks again */
    }
    pthread_join(q.th, NULL);
    assert_int_equal(q.r.status, 200);
    assert_int_equal(json_array_size(ls_jget(&q.r, "records")), 3);
    ls_resp_free(&q.r);
    ls_resp r;
    assert_int_equal(ls_get(S, "/v1/topics/tally/partitions/0", &r), 0);
    assert_int_equal(ls_jint(&r, "records_read"), 3);
    assert_int_equal(ls_jint(&r, "bytes_read"), 3);
    ls_resp_free(&r);
}

/* ---- a slow stream over one large compressed batch ------------------------------------ */

/* A stream renders about 64 KiB of records per refill, stopping inside a
 * batch if need be.  It rendered every record of each fetched batch at
 * once: one slow client of a large compressed batch held the JSON of all
 * of it (hundreds of megabytes with a few readers).  The partition's
 * records_read counts what streams rendered. */
static void test_slow_stream_renders_per_refill(void **state)
{
    (void)state;
    settle();
    assert_int_equal(ls_create_topic(S, "bigbatch", 1, "{\"compression.type\":\"lz4\"}"), 201);
    enum { N = 8000, V = 1000 };
    size_t cap = (size_t)N * (V + 32) + 64, used = 0;
    char *body = malloc(cap);
    assert_non_null(body);
    used += (size_t)snprintf(body + used, cap - used, "{\"records\":[");
    for (int i = 0; i < N; i++) {
        used += (size_t)snprintf(body + used, cap - used, "%s{\"value\":\"", i ? "," : "");
        memset(body + used, 'a' + i % 26, V);
        used += V;
        used += (size_t)snprintf(body + used, cap - used, "\"}");
    }
    used += (size_t)snprintf(body + used, cap - used, "]}");
    assert_int_equal(ls_append_json(S, "bigbatch", 0, body), 200); /* one batch */
    free(body);
    int fd = raw_get(S, "/v1/topics/bigbatch/partitions/0/records?offset=0", "text/event-stream", 4096);
    assert_true(fd >= 0);
    char head[4096];
    assert_true(raw_read(fd, head, sizeof head - 1, 2000) > 0);
    ru_sleep_ms(500); /* the server fills the socket and stops */
    ls_resp r;
    assert_int_equal(ls_get(S, "/v1/topics/bigbatch/partitions/0", &r), 0);
    long long rendered = ls_jint(&r, "records_read");
    ls_resp_free(&r);
    fprintf(stderr, "# %lld of %d records rendered for a client that stopped reading\n", rendered, N);
    /* What the sockets hold (a few MB) and one refill, not the batch. */
    assert_true(rendered > 0 && rendered < N * 7 / 8);
    /* Read on: every record arrives, in order. */
    char *buf = malloc(64 << 20);
    assert_non_null(buf);
    size_t got = 0;
    long long end = ru_mono_ms() + 20000;
    char want[32];
    snprintf(want, sizeof want, "id: %d\n", N - 1);
    while (ru_mono_ms() < end) {
        got += raw_read(fd, buf + got, (64 << 20) - 1 - got, 500);
        buf[got] = 0;
        if (strstr(buf, want))
            break;
    }
    assert_non_null(strstr(buf, want));
    assert_non_null(strstr(buf, "id: 4000\n"));
    free(buf);
    close(fd);
}

/* ---- Last-Event-ID ------------------------------------------------------------------- */

static void test_last_event_id_at_int64_max(void **state)
{
    (void)state;
    assert_int_equal(ls_create_topic(S, "leid", 1, NULL), 201);
    assert_int_equal(ls_append_json(S, "leid", 0, "{\"records\":[{\"value\":\"a\"}]}"), 200);
    static const char *const ids[] = {"Last-Event-ID: 9223372036854775807",
                                      "Last-Event-ID: 9223372036854775806"};
    for (size_t i = 0; i < 2; i++) {
        ls_resp r;
        assert_int_equal(ru_get_accept(S, "/v1/topics/leid/partitions/0/records?offset=0", "text/event-stream",
                                       ids[i], &r),
                         0);
        assert_int_equal(ls_check_error(&r, 416, "offset_out_of_range"), 0);
        ls_resp_free(&r);
    }
    /* clamp=true: from the high watermark, the next record first. */
    settle();
    mset ms;
    mset_start(&ms, S, "/v1/topics/leid/partitions/0/records?clamp=true&max_records=1", 1, "text/event-stream");
    /* Nothing is sent before the first pump: the header joins the Accept. */
    ms.hdrs = curl_slist_append(ms.hdrs, ids[0]);
    curl_easy_setopt(ms.r[0].h, CURLOPT_HTTPHEADER, ms.hdrs);
    long long end = ru_mono_ms() + 5000;
    while (parked(S) < 1 && ru_mono_ms() < end)
        mset_pump(&ms, 20);
    assert_int_equal(parked(S), 1);
    assert_int_equal(ls_append_json(S, "leid", 0, "{\"records\":[{\"value\":\"b\"}]}"), 200);
    assert_true(mset_finish(&ms, 5000));
    assert_int_equal(ms.r[0].status, 200);
    int comments;
    json_t *ev = ru_sse_parse(ms.r[0].body, ms.r[0].len, &comments);
    assert_int_equal(json_array_size(ev), 2);
    assert_int_equal(json_integer_value(json_object_get(json_array_get(ev, 0), "id")), 1);
    assert_string_equal(json_string_value(json_object_get(json_object_get(json_array_get(ev, 0), "data"), "value")),
                        "b");
    assert_string_equal(json_string_value(json_object_get(json_array_get(ev, 1), "event")), "end");
    json_decref(ev);
    mset_free(&ms);
}

/* README: "A Last-Event-ID that is not an offset (another server's ids, a
 * proxy's) is ignored: the stream starts where its query says."  Text, a
 * fraction, hex, a number below -1 and one past int64 all start at
 * offset=1; -1 (the id a stream from offset 0 opens with) resumes at 0. */
static void test_last_event_id_not_an_offset(void **state)
{
    (void)state;
    assert_int_equal(ls_create_topic(S, "leid-junk", 1, NULL), 201);
    assert_int_equal(ls_append_json(S, "leid-junk", 0,
                                    "{\"records\":[{\"value\":\"a\"},{\"value\":\"b\"},{\"value\":\"c\"}]}"),
                     200);
    static const struct {
        const char *header;
        long long first;
    } cases[] = {{"Last-Event-ID: abc", 1},      {"Last-Event-ID: 1.5", 1},
                 {"Last-Event-ID: 0x1", 1},      {"Last-Event-ID: -5", 1},
                 {"Last-Event-ID: 99999999999999999999", 1},
                 {"Last-Event-ID: -1", 0}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ls_resp r;
        assert_int_equal(ru_get_accept(S, "/v1/topics/leid-junk/partitions/0/records?offset=1&max_records=1",
                                       "text/event-stream", cases[i].header, &r),
                         0);
        assert_int_equal(r.status, 200);
        int comments;
        json_t *ev = ru_sse_parse(r.body, r.len, &comments);
        if (json_array_size(ev) != 2 ||
            json_integer_value(json_object_get(json_array_get(ev, 0), "id")) != cases[i].first)
            fprintf(stderr, "# %s: %s\n", cases[i].header, r.body);
        assert_int_equal(json_array_size(ev), 2);
        assert_int_equal(json_integer_value(json_object_get(json_array_get(ev, 0), "id")), cases[i].first);
        assert_string_equal(json_string_value(json_object_get(json_array_get(ev, 1), "event")), "end");
        json_decref(ev);
        ls_resp_free(&r);
    }
}

/* A stream starts like any read: from the log start offset to the high
 * watermark itself, both ends in (DESIGN §6).  One past the high watermark,
 * by offset or by a Last-Event-ID naming the last record there is, and one
 * below the log start offset are 416 with the bounds, for SSE and NDJSON
 * alike; the stream path checks them itself. */
static void test_stream_start_bounds(void **state)
{
    (void)state;
    assert_int_equal(ls_create_topic(S, "sbound", 1, NULL), 201);
    assert_int_equal(ls_append_json(S, "sbound", 0,
                                    "{\"records\":[{\"value\":\"a\"},{\"value\":\"b\"},{\"value\":\"c\"}]}"),
                     200);
    ls_resp r;
    assert_int_equal(ls_post(S, "/v1/topics/sbound/partitions/0/records:delete", "{\"before_offset\":1}", &r), 0);
    assert_int_equal(r.status, 200);
    ls_resp_free(&r);
    static const struct {
        const char *query, *accept, *header;
    } outside[] = {
        {"offset=4", "text/event-stream", NULL},
        {"offset=4", "application/x-ndjson", NULL},
        {"offset=0", "text/event-stream", NULL},
        {"offset=0", "application/x-ndjson", NULL},
        {"offset=1", "text/event-stream", "Last-Event-ID: 3"},
    };
    for (size_t i = 0; i < sizeof outside / sizeof outside[0]; i++) {
        char path[128];
        snprintf(path, sizeof path, "/v1/topics/sbound/partitions/0/records?%s", outside[i].query);
        assert_int_equal(ru_get_accept(S, path, outside[i].accept, outside[i].header, &r), 0);
        if (ls_check_error(&r, 416, "offset_out_of_range"))
            fail_msg("%s (%s, %s): not 416", path, outside[i].accept,
                     outside[i].header ? outside[i].header : "no Last-Event-ID");
        json_t *d = ls_jget(&r, "details");
        assert_int_equal(json_integer_value(json_object_get(d, "log_start_offset")), 1);
        assert_int_equal(json_integer_value(json_object_get(d, "high_watermark")), 3);
        ls_resp_free(&r);
    }
    /* Inside, bounded by max_records: from the log start offset, and from
     * Last-Event-ID 1 (the next record, 2). */
    assert_int_equal(ru_get_accept(S, "/v1/topics/sbound/partitions/0/records?offset=1&max_records=1",
                                   "application/x-ndjson", NULL, &r),
                     0);
    assert_int_equal(r.status, 200);
    json_t *lines = ru_ndjson_parse(r.body, r.len);
    assert_true(json_array_size(lines) >= 1);
    assert_int_equal(json_integer_value(json_object_get(json_array_get(lines, 0), "offset")), 1);
    json_decref(lines);
    ls_resp_free(&r);
    assert_int_equal(ru_get_accept(S, "/v1/topics/sbound/partitions/0/records?offset=1&max_records=1",
                                   "text/event-stream", "Last-Event-ID: 1", &r),
                     0);
    assert_int_equal(r.status, 200);
    int comments;
    json_t *ev = ru_sse_parse(r.body, r.len, &comments);
    assert_true(json_array_size(ev) >= 1);
    assert_int_equal(json_integer_value(json_object_get(json_array_get(ev, 0), "id")), 2);
    json_decref(ev);
    ls_resp_free(&r);
}

/* What an EventSource does when the connection drops (a restart, a proxy)
 * before any record came: it reconnects to the same URL with the last event
 * ID it has.  On `offset=latest` that has to be where the first stream
 * started, or the records appended in between are skipped. */
static void test_idle_stream_resumes_where_it_started(void **state)
{
    (void)state;
    assert_int_equal(ls_create_topic(S, "sse-start", 1, NULL), 201);
    assert_int_equal(ls_append_json(S, "sse-start", 0, "{\"records\":[{\"value\":\"a\"},{\"value\":\"b\"}]}"),
                     200);
    int fd = raw_get(S, "/v1/topics/sse-start/partitions/0/records?offset=latest", "text/event-stream", 0);
    assert_true(fd >= 0);
    char buf[4096];
    size_t got = 0;
    long long end = ru_mono_ms() + 3000;
    buf[0] = 0;
    while (!strstr(buf, "\r\n\r\n") || !strstr(strstr(buf, "\r\n\r\n"), "\n\n")) {
        assert_true(ru_mono_ms() < end && got < sizeof buf - 1);
        got += raw_read(fd, buf + got, sizeof buf - 1 - got, 100);
        buf[got] = 0;
    }
    close(fd);
    /* The body opens with the offset before its start, no event: an
     * EventSource keeps it as its last event ID. */
    const char *body = strstr(buf, "\r\n\r\n") + 4;
    const char *id = strstr(body, "id: ");
    assert_non_null(id);
    assert_int_equal(atoll(id + 4), 1);
    assert_null(strstr(body, "event: "));
    assert_int_equal(ls_append_json(S, "sse-start", 0, "{\"records\":[{\"value\":\"c\"},{\"value\":\"d\"}]}"),
                     200);
    /* The reconnect: the same URL with that ID gets both records. */
    char leid[64];
    snprintf(leid, sizeof leid, "Last-Event-ID: %lld", atoll(id + 4));
    const char *hdrs[] = {"Accept: text/event-stream", leid, NULL};
    ls_resp r;
    assert_int_equal(ls_http(S, "GET", "/v1/topics/sse-start/partitions/0/records?offset=latest&max_records=2",
                             NULL, NULL, 0, hdrs, &r),
                     0);
    assert_int_equal(r.status, 200);
    int comments;
    json_t *ev = ru_sse_parse(r.body, r.len, &comments);
    assert_int_equal(json_array_size(ev), 3);
    assert_int_equal(json_integer_value(json_object_get(json_array_get(ev, 0), "id")), 2);
    assert_int_equal(json_integer_value(json_object_get(json_array_get(ev, 1), "id")), 3);
    assert_string_equal(json_string_value(json_object_get(json_array_get(ev, 2), "event")), "end");
    json_decref(ev);
    ls_resp_free(&r);
    /* From offset 0 the ID is -1, which resumes at 0. */
    const char *plain[] = {"Accept: text/event-stream", NULL};
    assert_int_equal(ls_http(S, "GET", "/v1/topics/sse-start/partitions/0/records?offset=0&max_records=1",
                             NULL, NULL, 0, plain, &r),
                     0);
    assert_int_equal(r.status, 200);
    assert_true(r.len > 8 && memcmp(r.body, "id: -1\n\n", 8) == 0);
    ls_resp_free(&r);
    settle();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_deadlines_kept_under_traffic),
        cmocka_unit_test(test_empty_record_satisfies_min_bytes),
        cmocka_unit_test(test_min_bytes_zero_answers_at_once),
        cmocka_unit_test(test_last_event_id_at_int64_max),
        cmocka_unit_test(test_last_event_id_not_an_offset),
        cmocka_unit_test(test_stream_start_bounds),
        cmocka_unit_test(test_idle_stream_resumes_where_it_started),
        cmocka_unit_test(test_cut_page_answers_at_once),
        cmocka_unit_test(test_slow_stream_renders_per_refill),
        cmocka_unit_test(test_reparked_pages_not_counted),
        cmocka_unit_test(test_min_bytes_waits_under_steady_appends),
        cmocka_unit_test(test_client_leaving_is_not_a_warning),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
