/*
 * test_http_bodies.c - how a request body reaches its handler, against the
 * real binary over loopback.
 *
 * A body that arrives whole in libmicrohttpd's read buffer is answered from
 * there; one that arrives in pieces, or is larger than a connection's own
 * memory, is gathered into a buffer first (api_server.c).  Both must store
 * the same bytes: the same binary batch sent each way is stored with only
 * its baseOffset and partitionLeaderEpoch changed.
 *
 * Pipelining: several appends in one write on one connection, JSON and
 * binary mixed, are answered in order with consecutive offsets; on a
 * flush.messages=1 topic too, where each answer waits for its fsync while
 * the next request is already in the read buffer.
 *
 * A body read in place after a 100 Continue, and durable appends whose
 * clients leave before the answer (the answer was made in the body's
 * callback and is sent, or dropped, on a later one), are stored alike; the
 * last test stops the server, whose sanitizer build exits non-zero on a leak
 * or a use after free of such a pending answer.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "harness.h"
#include "raw_http.h"

#include "eng_batch.h"
#include "eng_endian.h"

#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static ls_server g_srv;
static ls_server *S = &g_srv;

static int group_setup(void **state)
{
    (void)state;
    static const char *const settings[] = {"log.initial.task.delay.ms=3600000", NULL};
    return ls_start(S, settings);
}

static int group_teardown(void **state)
{
    (void)state;
    ls_stop(S);
    ls_cleanup(S);
    return 0;
}

/* One producer batch of n records with vlen-byte values; *len its size.
 * Owned by the caller. */
static uint8_t *make_batch(size_t n, size_t vlen, size_t *len)
{
    eng_record_spec *recs = calloc(n, sizeof *recs);
    char *value = malloc(vlen);
    assert_non_null(recs);
    assert_non_null(value);
    memset(value, 'v', vlen);
    for (size_t i = 0; i < n; i++)
        recs[i] = (eng_record_spec){.timestamp = 1700000000000LL + (int64_t)i,
                                    .key = (const uint8_t *)"key", .key_len = 3,
                                    .value = (const uint8_t *)value, .value_len = (int32_t)vlen};
    size_t cap = eng_batch_encoded_size(recs, n);
    uint8_t *b = malloc(cap);
    assert_non_null(b);
    eng_batch_params bp;
    eng_batch_params_init(&bp);
    *len = eng_batch_encode(b, cap, &bp, recs, n);
    assert_int_equal(*len, cap);
    eng_put_be32(b + 12, 9); /* a producer's epoch: stored as 0 */
    free(value);
    free(recs);
    return b;
}

/* The head of an append of len bytes to topic partition 0. */
static int append_head(char *out, size_t cap, const char *topic, const char *ctype, size_t len)
{
    int n = snprintf(out, cap,
                     "POST /v1/topics/%s/partitions/0/records HTTP/1.1\r\nHost: x\r\n"
                     "Content-Type: %s\r\nContent-Length: %zu\r\n\r\n",
                     topic, ctype, len);
    assert_true(n > 0 && (size_t)n < cap);
    return n;
}

/* Reads n whole answers (Content-Length framed) from fd into statuses and
 * their base_offset fields; fails after 10 s. */
static void read_answers(int fd, size_t n, int *status, long long *base)
{
    char buf[65536];
    size_t have = 0, done = 0;
    while (done < n) {
        buf[have] = 0;
        char *eoh = strstr(buf, "\r\n\r\n");
        const char *cl = eoh ? strcasestr(buf, "\r\nContent-Length:") : NULL;
        if (eoh && cl && cl < eoh) {
            size_t total = (size_t)(eoh + 4 - buf) + (size_t)atol(cl + 17);
            if (have >= total) {
                status[done] = atoi(buf + 9);
                json_t *j = json_loadb(eoh + 4, total - (size_t)(eoh + 4 - buf), 0, NULL);
                json_t *b = j ? json_object_get(j, "base_offset") : NULL;
                base[done] = json_is_integer(b) ? (long long)json_integer_value(b) : -1;
                json_decref(j);
                memmove(buf, buf + total, have - total);
                have -= total;
                done++;
                continue;
            }
        }
        struct pollfd p = {.fd = fd, .events = POLLIN};
        assert_int_equal(poll(&p, 1, 10000), 1);
        ssize_t got = recv(fd, buf + have, sizeof buf - 1 - have, 0);
        assert_true(got > 0);
        have += (size_t)got;
    }
}

/* The raw bytes stored from offset on (one batch and what follows it). */
static void read_raw(const char *topic, long long offset, ls_resp *r)
{
    char path[256];
    snprintf(path, sizeof path, "/v1/topics/%s/partitions/0/records?offset=%lld", topic, offset);
    static const char *const accept[] = {"Accept: application/octet-stream", NULL};
    assert_int_equal(ls_http(S, "GET", path, NULL, NULL, 0, accept, r), 0);
    assert_int_equal(r->status, 200);
}

/* The batch stored at base is the one sent, byte for byte after its first
 * 16 bytes: baseOffset = base and partitionLeaderEpoch 0 before them. */
static void assert_stored(const char *topic, long long base, const uint8_t *sent, size_t len)
{
    ls_resp r;
    read_raw(topic, base, &r);
    assert_true(r.len >= len);
    const uint8_t *got = (const uint8_t *)r.body;
    assert_int_equal((long long)eng_be64(got), base);
    assert_memory_equal(got + 8, sent + 8, 4);
    assert_int_equal(eng_be32(got + 12), 0);
    assert_memory_equal(got + 16, sent + 16, len - 16);
    ls_resp_free(&r);
}

/* The same batch sent whole in one write, then with a pause inside its
 * body (its first callback holds part of it, so it is gathered), then a
 * 256 KB batch (larger than a connection's memory): all stored as sent. */
static void test_body_whole_or_in_pieces(void **state)
{
    (void)state;
    assert_int_equal(ls_create_topic(S, "pieces", 1, NULL), 201);
    size_t len, big_len;
    uint8_t *b = make_batch(50, 100, &len);
    uint8_t *big = make_batch(256, 1000, &big_len);
    char head[512];
    int status[1];
    long long base[1];

    int fd = tcp_connect(S->port);
    char *msg = malloc((size_t)append_head(head, sizeof head, "pieces", "application/octet-stream",
                                           len) + len);
    assert_non_null(msg);
    size_t hl = strlen(head);
    memcpy(msg, head, hl);
    memcpy(msg + hl, b, len);
    send_bytes(fd, msg, hl + len);
    read_answers(fd, 1, status, base);
    assert_int_equal(status[0], 200);
    assert_int_equal(base[0], 0);

    send_bytes(fd, head, hl);
    send_bytes(fd, b, 100);
    usleep(100 * 1000);
    send_bytes(fd, b + 100, len - 100);
    read_answers(fd, 1, status, base);
    assert_int_equal(status[0], 200);
    assert_int_equal(base[0], 50);

    append_head(head, sizeof head, "pieces", "application/octet-stream", big_len);
    send_all(fd, head);
    send_bytes(fd, big, big_len);
    read_answers(fd, 1, status, base);
    assert_int_equal(status[0], 200);
    assert_int_equal(base[0], 100);
    close(fd);

    assert_stored("pieces", 0, b, len);
    assert_stored("pieces", 50, b, len);
    assert_stored("pieces", 100, big, big_len);
    assert_int_equal(ls_log_end_offset(S, "pieces", 0), 356);
    free(msg);
    free(big);
    free(b);
}

/* JSON, binary and JSON appends in one write: three answers in order. */
static void pipelined(const char *topic)
{
    static const char json[] = "{\"records\":[{\"key\":\"a\",\"value\":\"one\"}]}";
    size_t blen;
    uint8_t *b = make_batch(2, 10, &blen);
    char buf[8192], head[512];
    size_t n = 0;
    for (int i = 0; i < 3; i++) {
        bool binary = i == 1;
        size_t len = binary ? blen : strlen(json);
        append_head(head, sizeof head, topic, binary ? "application/octet-stream" : "application/json",
                    len);
        memcpy(buf + n, head, strlen(head));
        n += strlen(head);
        memcpy(buf + n, binary ? (const void *)b : json, len);
        n += len;
    }
    int fd = tcp_connect(S->port);
    send_bytes(fd, buf, n);
    int status[3];
    long long base[3];
    read_answers(fd, 3, status, base);
    close(fd);
    for (int i = 0; i < 3; i++)
        assert_int_equal(status[i], 200);
    assert_int_equal(base[0], 0);
    assert_int_equal(base[1], 1);
    assert_int_equal(base[2], 3);
    assert_int_equal(ls_log_end_offset(S, topic, 0), 4);
    assert_stored(topic, 1, b, blen);
    free(b);
}

static void test_pipelined_appends(void **state)
{
    (void)state;
    assert_int_equal(ls_create_topic(S, "pipe", 1, NULL), 201);
    pipelined("pipe");
}

static void test_pipelined_durable_appends(void **state)
{
    (void)state;
    assert_int_equal(ls_create_topic(S, "pipedur", 1, "{\"flush.messages\":\"1\"}"), 201);
    pipelined("pipedur");
    assert_int_equal(ls_partition_field(S, "pipedur", 0, "recovery_point"), 4);
}

/* Expect: 100-continue: the body comes after the server's 100 Continue,
 * whole in one write, and is read in place like any other. */
static void test_expect_100_continue_in_place(void **state)
{
    (void)state;
    assert_int_equal(ls_create_topic(S, "expect", 1, NULL), 201);
    size_t len;
    uint8_t *b = make_batch(20, 50, &len);
    char head[512], buf[256];
    int n = snprintf(head, sizeof head,
                     "POST /v1/topics/expect/partitions/0/records HTTP/1.1\r\nHost: x\r\n"
                     "Content-Type: application/octet-stream\r\nContent-Length: %zu\r\n"
                     "Expect: 100-continue\r\n\r\n",
                     len);
    assert_true(n > 0 && (size_t)n < sizeof head);
    int fd = tcp_connect(S->port);
    send_bytes(fd, head, (size_t)n);
    size_t have = 0;
    while (have < sizeof buf - 1) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        assert_int_equal(poll(&p, 1, 10000), 1);
        ssize_t got = recv(fd, buf + have, sizeof buf - 1 - have, 0);
        assert_true(got > 0);
        have += (size_t)got;
        buf[have] = 0;
        if (strstr(buf, "\r\n\r\n"))
            break;
    }
    assert_string_equal(buf, "HTTP/1.1 100 Continue\r\n\r\n");
    send_bytes(fd, b, len);
    int status[1];
    long long base[1];
    read_answers(fd, 1, status, base);
    assert_int_equal(status[0], 200);
    assert_int_equal(base[0], 0);
    close(fd);
    assert_stored("expect", 0, b, len);
    free(b);
}

/* Durable appends (flush.messages=1) whose clients close their connection
 * right after the request: each is stored and flushed, though nobody is
 * left to read its answer, which waited for the fsync. */
static void test_clients_leave_durable_appends(void **state)
{
    (void)state;
    assert_int_equal(ls_create_topic(S, "leavers", 1, "{\"flush.messages\":\"1\"}"), 201);
    static const char json[] = "{\"records\":[{\"value\":\"bye\"}]}";
    char msg[512];
    int hl = append_head(msg, sizeof msg, "leavers", "application/json", strlen(json));
    memcpy(msg + hl, json, strlen(json));
    enum { N = 40 };
    for (int i = 0; i < N; i++) {
        int fd = tcp_connect(S->port);
        send_bytes(fd, msg, (size_t)hl + strlen(json));
        close(fd);
    }
    long long end = -1;
    for (int i = 0; i < 200 && (end = ls_log_end_offset(S, "leavers", 0)) < N; i++)
        usleep(25 * 1000);
    assert_int_equal(end, N);
    for (int i = 0; i < 200 && ls_partition_field(S, "leavers", 0, "recovery_point") < N; i++)
        usleep(25 * 1000);
    assert_int_equal(ls_partition_field(S, "leavers", 0, "recovery_point"), N);
}

/* Last: a clean stop exits 0 (leaks, and any use after free of a request's
 * state, fail the sanitizer build's exit). */
static void test_zz_clean_stop(void **state)
{
    (void)state;
    assert_int_equal(ls_live_status(S), 200);
    assert_int_equal(ls_stop(S), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_body_whole_or_in_pieces),
        cmocka_unit_test(test_pipelined_appends),
        cmocka_unit_test(test_pipelined_durable_appends),
        cmocka_unit_test(test_expect_100_continue_in_place),
        cmocka_unit_test(test_clients_leave_durable_appends),
        cmocka_unit_test(test_zz_clean_stop),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
