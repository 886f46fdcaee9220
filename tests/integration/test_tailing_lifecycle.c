/*
 * test_tailing_lifecycle.c - streams and long-polls while the log under them
 * changes shape: a topic deleted (and recreated) under readers that have
 * stopped reading, and the files those readers must not keep open.
 *
 * A stream whose client stops reading is not parked (its socket is full,
 * not its log), so a topic delete's wake-up of parked readers does not
 * reach it: checked through /proc/<server pid>/fd, the deleted partition's
 * segment files must be closed within seconds of the DELETE, not at
 * http.idle.timeout.ms (or never, with the timeout off).  The same for a
 * raw read whose sendfile waits on a client that stopped reading, and, for
 * a segment retention deleted under such a read, http.idle.timeout.ms
 * bounds how long its descriptor stays.  Readers parked on a topic that is
 * deleted and at once created again end on the old one (404, an error
 * event or line), never reading the new one's offsets.  Many
 * such readers at once, beside parked ones, hold memory that does not grow
 * with the log, and a stop ends them all, cleanly and in bounded time.
 * Clients leaving mid-event or mid-sendfile (some with a reset) leave no
 * stream behind.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "harness.h"
#include "read_util.h"
#include "tail_util.h"

#include "eng_batch.h"

#include <dirent.h>
#include <limits.h>
#include <stdint.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static ls_server g_srv;
static ls_server *S = &g_srv;

/* The idle timeout off: nothing but the delete may close the streams. */
static const char *const settings[] = {"http.sse.heartbeat.ms=300", "http.idle.timeout.ms=0",
                                       "log.initial.task.delay.ms=3600000", NULL};

static int group_setup(void **state)
{
    (void)state;
    return ls_start(S, settings);
}

static int group_teardown(void **state)
{
    (void)state;
    int rc = ls_stop(S);
    ls_cleanup(S);
    return rc == 0 ? 0 : -1;
}

/* nbatches binary appends of 100 records with 10,000-byte values. */
static void append_big(const char *topic, int nbatches)
{
    enum { N = 100, V = 10000 };
    uint8_t *value = malloc(V);
    assert_non_null(value);
    memset(value, 'x', V);
    eng_record_spec recs[N];
    for (int i = 0; i < N; i++)
        recs[i] = (eng_record_spec){.timestamp = ru_now_ms(), .key = (const uint8_t *)"big", .key_len = 3,
                                    .value = value, .value_len = V};
    size_t cap = eng_batch_encoded_size(recs, N);
    uint8_t *b = malloc(cap);
    assert_non_null(b);
    eng_batch_params bp;
    eng_batch_params_init(&bp);
    size_t len = eng_batch_encode(b, cap, &bp, recs, N);
    assert_true(len > 0);
    char path[256];
    snprintf(path, sizeof path, "/v1/topics/%s/partitions/0/records", topic);
    for (int i = 0; i < nbatches; i++) {
        ls_resp r;
        assert_int_equal(ls_http(S, "POST", path, "application/octet-stream", b, len, NULL, &r), 0);
        assert_int_equal(r.status, 200);
        ls_resp_free(&r);
    }
    free(b);
    free(value);
}

/* How many of the descriptors process pid holds name a file match()
 * accepts (given the link's target and topic). */
static int count_open_files(pid_t pid, bool (*match)(const char *target, const char *topic),
                            const char *topic)
{
    char dir[64], target[PATH_MAX];
    snprintf(dir, sizeof dir, "/proc/%d/fd", (int)pid);
    DIR *d = opendir(dir);
    assert_non_null(d);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        char path[PATH_MAX];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        ssize_t len = readlink(path, target, sizeof target - 1);
        if (len <= 0)
            continue;
        target[len] = 0;
        n += match(target, topic);
    }
    closedir(d);
    return n;
}

/* A file of partition dir `<topic>-0` (before or after its delete renamed
 * it to `<topic>-0.<uuid>-delete`). */
static bool in_partition_dir(const char *target, const char *topic)
{
    char needle[300];
    snprintf(needle, sizeof needle, "/%s-0", topic);
    const char *at = strstr(target, needle);
    return at && (at[strlen(needle)] == '/' || at[strlen(needle)] == '.');
}

static int open_partition_files(const char *topic)
{
    return count_open_files(S->pid, in_partition_dir, topic);
}

/* Waits until the server holds no file of topic's partition; the count
 * left at the end. */
static int wait_files_closed(const char *topic, int timeout_ms)
{
    long long end = ru_mono_ms() + timeout_ms;
    int n;
    while ((n = open_partition_files(topic)) > 0 && ru_mono_ms() < end)
        ru_sleep_ms(50);
    return n;
}

/* Bytes the server has queued on its side of the client's connection
 * (tx_queue in /proc/net/tcp), or -1 if it is not found. */
static long server_send_queue(int client_fd)
{
    struct sockaddr_in a;
    socklen_t alen = sizeof a;
    if (getsockname(client_fd, (struct sockaddr *)&a, &alen))
        return -1;
    unsigned client_port = ntohs(a.sin_port);
    FILE *f = fopen("/proc/net/tcp", "r");
    if (!f)
        return -1;
    char line[512];
    long q = -1;
    while (q < 0 && fgets(line, sizeof line, f)) {
        unsigned lport, rport;
        unsigned long tx;
        if (sscanf(line, " %*d: %*8x:%x %*8x:%x %*x %lx:", &lport, &rport, &tx) == 3 &&
            lport == (unsigned)S->port && rport == client_port)
            q = (long)tx;
    }
    fclose(f);
    return q;
}

/* Waits until the server has stopped writing to a client that does not
 * read: its send queue is full and stays put.  Rendering megabytes of JSON
 * under ASan takes a while, and a stream still rendering when its topic is
 * deleted ends on its own. */
static bool wait_stalled(int client_fd, int timeout_ms)
{
    long long end = ru_mono_ms() + timeout_ms;
    long last = -1;
    int same = 0;
    while (ru_mono_ms() < end && same < 3) {
        ru_sleep_ms(100);
        long q = server_send_queue(client_fd);
        same = q > 0 && q == last ? same + 1 : 0;
        last = q;
    }
    return same >= 3;
}

/* Reads until the stream is over: EOF (or a reset), or the last chunk of
 * its chunked body; false on timeout. */
static bool drain_to_end(int fd, int timeout_ms)
{
    char buf[65536], tail[8] = {0};
    long long end = ru_mono_ms() + timeout_ms;
    while (ru_mono_ms() < end) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, 100) <= 0)
            continue;
        ssize_t n = read(fd, buf, sizeof buf);
        if (n <= 0)
            return true;
        size_t keep = n >= 7 ? 0 : 7 - (size_t)n;
        memmove(tail, tail + 7 - keep, keep);
        memcpy(tail + keep, buf + n - (7 - keep), 7 - keep);
        if (!memcmp(tail + 2, "0\r\n\r\n", 5))
            return true;
    }
    return false;
}

/* Streams (SSE, NDJSON) whose clients stopped reading, over a topic that is
 * then deleted: the server lets go of the partition's files at once and ends
 * the streams, with the idle timeout off.  Then the name is created again
 * and reads as a new, empty topic. */
static void test_delete_under_stalled_streams(void **state)
{
    (void)state;
    assert_int_equal(ls_create_topic(S, "stalled", 1, "{\"segment.bytes\":\"1048576\"}"), 201);
    append_big("stalled", 16); /* ~16 MB in 16 segments: more than the sockets hold */
    const char *accepts[] = {"text/event-stream", "application/x-ndjson"};
    int fds[2];
    char head[4096];
    for (int i = 0; i < 2; i++) {
        fds[i] = raw_get(S, "/v1/topics/stalled/partitions/0/records?offset=0", accepts[i], 4096);
        assert_true(fds[i] >= 0);
        assert_true(raw_read(fds[i], head, sizeof head, 2000) > 0);
    }
    for (int i = 0; i < 2; i++)
        assert_true(wait_stalled(fds[i], 20000));
    assert_true(open_partition_files("stalled") > 0);
    long long t = ru_mono_ms();
    ls_resp r;
    assert_int_equal(ls_delete(S, "/v1/topics/stalled", &r), 0);
    assert_int_equal(r.status, 204);
    ls_resp_free(&r);
    int left = wait_files_closed("stalled", 8000);
    fprintf(stderr, "# %d descriptors on the deleted partition after %lld ms\n", left,
            ru_mono_ms() - t);
    assert_int_equal(left, 0);
    /* The streams ended: their clients reach the end of what was sent. */
    for (int i = 0; i < 2; i++) {
        assert_true(drain_to_end(fds[i], 20000));
        close(fds[i]);
    }
    assert_int_equal(ls_create_topic(S, "stalled", 1, NULL), 201);
    assert_int_equal(ls_get(S, "/v1/topics/stalled/partitions/0/records?offset=0", &r), 0);
    assert_int_equal(r.status, 200);
    assert_int_equal(json_array_size(ls_jget(&r, "records")), 0);
    ls_resp_free(&r);
}

/* The same for a raw read sent with sendfile from the deleted segment: its
 * client stops reading, and the connection held a descriptor of the
 * deleted file (its disk space) until the idle timeout. */
static void test_delete_under_stalled_raw_read(void **state)
{
    (void)state;
    assert_int_equal(ls_create_topic(S, "stalled-raw", 1, NULL), 201);
    append_big("stalled-raw", 16); /* one segment of ~16 MB */
    int fd = raw_get(S, "/v1/topics/stalled-raw/partitions/0/records?offset=0&max_bytes=67108864",
                     "application/octet-stream", 4096);
    assert_true(fd >= 0);
    char head[4096];
    assert_true(raw_read(fd, head, sizeof head, 2000) > 0);
    assert_true(wait_stalled(fd, 20000));
    ls_resp r;
    assert_int_equal(ls_delete(S, "/v1/topics/stalled-raw", &r), 0);
    assert_int_equal(r.status, 204);
    ls_resp_free(&r);
    int left = wait_files_closed("stalled-raw", 8000);
    fprintf(stderr, "# %d descriptors on the deleted partition\n", left);
    assert_int_equal(left, 0);
    assert_true(drain_to_end(fd, 20000));
    close(fd);
}

static void append_value(const char *topic, const char *value)
{
    char path[128], body[256];
    snprintf(path, sizeof path, "/v1/topics/%s/partitions/0/records", topic);
    snprintf(body, sizeof body, "{\"records\":[{\"key\":\"k\",\"value\":\"%s\"}]}", value);
    ls_resp r;
    assert_int_equal(ls_post(S, path, body, &r), 0);
    assert_int_equal(r.status, 200);
    ls_resp_free(&r);
}

/* Readers parked at the end of a topic that is deleted and at once created
 * again, with more records than the old one had: each ends on the old
 * topic (404 unknown_topic, an error event or line) and none goes on
 * reading the new topic's offsets, which are the same numbers. */
static void test_delete_and_recreate_under_parked_readers(void **state)
{
    (void)state;
    assert_int_equal(ls_create_topic(S, "again", 1, NULL), 201);
    append_value("again", "old-0");
    long long base = parked(S);
    poll_req q, raw;
    assert_int_equal(poll_start(&q, S, "/v1/topics/again/partitions/0/records?offset=1&wait_ms=20000"), 0);
    assert_int_equal(poll_start_accept(&raw, S,
                                       "/v1/topics/again/partitions/0/records?offset=1&wait_ms=20000",
                                       "application/octet-stream"),
                     0);
    mset sse, nd;
    mset_start(&sse, S, "/v1/topics/again/partitions/0/records?offset=0", 1, "text/event-stream");
    mset_start(&nd, S, "/v1/topics/again/partitions/0/records?offset=0", 1, "application/x-ndjson");
    long long end = ru_mono_ms() + 10000;
    while (parked(S) < base + 4 && ru_mono_ms() < end) {
        mset_pump(&sse, 20);
        mset_pump(&nd, 20);
    }
    assert_true(wait_parked(S, base + 4, 100));
    ls_resp r;
    assert_int_equal(ls_delete(S, "/v1/topics/again", &r), 0);
    assert_int_equal(r.status, 204);
    ls_resp_free(&r);
    assert_int_equal(ls_create_topic(S, "again", 1, NULL), 201);
    for (int i = 0; i < 3; i++)
        append_value("again", "new");
    end = ru_mono_ms() + 10000;
    while ((sse.ndone < 1 || nd.ndone < 1) && ru_mono_ms() < end) {
        mset_pump(&sse, 20);
        mset_pump(&nd, 20);
    }
    pthread_join(q.th, NULL);
    pthread_join(raw.th, NULL);
    assert_int_equal(q.r.status, 404);
    assert_string_equal(ls_jstr(&q.r, "error_code"), "unknown_topic");
    assert_int_equal(raw.r.status, 404);
    ls_resp_free(&q.r);
    ls_resp_free(&raw.r);
    assert_int_equal(sse.ndone, 1);
    assert_int_equal(nd.ndone, 1);
    assert_non_null(strstr(sse.r[0].body, "old-0"));
    assert_non_null(strstr(sse.r[0].body, "event: error"));
    assert_non_null(strstr(sse.r[0].body, "\"unknown_topic\""));
    assert_null(strstr(sse.r[0].body, "new"));
    assert_non_null(strstr(nd.r[0].body, "old-0"));
    assert_non_null(strstr(nd.r[0].body, "{\"error\":{\"error_code\":\"unknown_topic\""));
    assert_null(strstr(nd.r[0].body, "new"));
    mset_free(&sse);
    mset_free(&nd);
}

/* A file of `<topic>-0` that retention has set aside or unlinked
 * (`.deleted`, or `(deleted)` once gone). */
static bool deleted_in_partition(const char *target, const char *topic)
{
    char needle[300];
    snprintf(needle, sizeof needle, "/%s-0/", topic);
    return strstr(target, needle) && strstr(target, "deleted");
}

static int open_deleted_files(ls_server *s, const char *topic)
{
    return count_open_files(s->pid, deleted_in_partition, topic);
}

/* A raw read (sendfile) of a segment that retention then deletes, whose
 * client stopped reading: the descriptor keeps the unlinked file's disk
 * space until the connection goes, which http.idle.timeout.ms bounds (a
 * stalled send is no activity).  Its own server: the group's has the
 * timeout off. */
static ls_server g_own;

/* After a test that ran its own server in S: stops it if a failed
 * assertion left it running, and gives S back to the group's. */
static int own_server_teardown(void **state)
{
    (void)state;
    if (S != &g_own)
        return 0;
    int rc = ls_stop(S);
    ls_cleanup(S);
    S = &g_srv;
    return rc == 0 ? 0 : -1;
}

static void test_retention_under_stalled_raw_read(void **state)
{
    (void)state;
    ls_server *const own = &g_own;
    static const char *const idle[] = {"http.idle.timeout.ms=2000", "log.initial.task.delay.ms=3600000",
                                       "log.segment.delete.delay.ms=0", NULL};
    S = own;
    assert_int_equal(ls_start(S, idle), 0);
    assert_int_equal(ls_create_topic(S, "aged", 1, "{\"file.delete.delay.ms\":\"0\"}"), 201);
    append_big("aged", 16); /* one segment of ~16 MB */
    ls_resp r;
    assert_int_equal(ls_post(S, "/v1/topics/aged/partitions/0/segments:roll", "{}", &r), 0);
    assert_int_equal(r.status, 200);
    ls_resp_free(&r);
    int fd = raw_get(S, "/v1/topics/aged/partitions/0/records?offset=0&max_bytes=67108864",
                     "application/octet-stream", 4096);
    assert_true(fd >= 0);
    char head[4096];
    assert_true(raw_read(fd, head, sizeof head, 2000) > 0);
    assert_true(wait_stalled(fd, 20000));
    assert_int_equal(ls_post(S, "/v1/topics/aged/partitions/0/records:delete", "{\"before_offset\":-1}", &r), 0);
    assert_int_equal(r.status, 200);
    ls_resp_free(&r);
    assert_int_equal(ls_post(S, "/v1/topics/aged/retention:run", "{\"dry_run\":false}", &r), 0);
    assert_int_equal(r.status, 200);
    ls_resp_free(&r);
    /* The read may still hold the deleted segment (unless the timeout
     * already ended it), then lets it go. */
    long long t = ru_mono_ms(), end = t + 20000;
    int left = open_deleted_files(S, "aged");
    fprintf(stderr, "# %d descriptors on the deleted segment after retention\n", left);
    while ((left = open_deleted_files(S, "aged")) > 0 && ru_mono_ms() < end)
        ru_sleep_ms(100);
    fprintf(stderr, "# %d descriptors on the deleted segment after %lld ms\n", left,
            ru_mono_ms() - t);
    assert_int_equal(left, 0);
    assert_true(drain_to_end(fd, 20000));
    close(fd);
}

#define LEAVERS 24

/* Clients that leave in the middle of an event or of a sendfile, half of
 * them with a reset: every stream is freed (the open-streams gauge goes
 * back to 0), the server stays up, and its stop at the end of the group
 * finds nothing for the sanitizers to report. */
static void test_clients_leave_mid_event(void **state)
{
    (void)state;
    assert_int_equal(ls_create_topic(S, "leavers", 1, NULL), 201);
    append_big("leavers", 4);
    static const char *const accepts[] = {"text/event-stream", "application/x-ndjson",
                                          "application/octet-stream"};
    int fds[LEAVERS];
    for (int i = 0; i < LEAVERS; i++) {
        fds[i] = raw_get(S,
                         i % 3 == 2 ? "/v1/topics/leavers/partitions/0/records?offset=0&max_bytes=67108864"
                                    : "/v1/topics/leavers/partitions/0/records?offset=0",
                         accepts[i % 3], 4096);
        assert_true(fds[i] >= 0);
    }
    char *buf = malloc(1 << 20);
    assert_non_null(buf);
    for (int i = 0; i < LEAVERS; i++) {
        /* Odd amounts, so most stop inside an event or a batch. */
        size_t want = 1000 + (size_t)i * 37519 % (900 << 10);
        assert_true(raw_read(fds[i], buf, want, 3000) > 0);
        if (i % 2) {
            struct linger l = {.l_onoff = 1, .l_linger = 0}; /* close with a reset */
            setsockopt(fds[i], SOL_SOCKET, SO_LINGER, &l, sizeof l);
        }
        close(fds[i]);
    }
    free(buf);
    long long end = ru_mono_ms() + 10000, open = -1;
    while (ru_mono_ms() < end && (open = ls_metric(S, "logstore_open_streams", -1)) != 0)
        ru_sleep_ms(50);
    assert_int_equal(open, 0);
    ls_resp r;
    assert_int_equal(ls_get(S, "/health/live", &r), 0);
    assert_int_equal(r.status, 200);
    ls_resp_free(&r);
}

#define STALLED 8
#define PARKED 30

/* Many clients that stopped reading (SSE, NDJSON, raw) next to parked
 * long-polls and idle streams: the server's memory does not grow with
 * what is appended behind them, and it stops cleanly (exit 0, so no
 * sanitizer report) in bounded time with all of them still connected. */
static void test_stalled_readers_memory_and_stop(void **state)
{
    (void)state;
    /* Its own server, stopped here; a small ASan quarantine, or freed
     * buffers stay resident and hide what the readers hold. */
    static ls_server d;
    const char *old = getenv("ASAN_OPTIONS");
    char *saved = old ? strdup(old) : NULL;
    char opts[512];
    snprintf(opts, sizeof opts, "%s%squarantine_size_mb=4", old ? old : "", old && *old ? ":" : "");
    setenv("ASAN_OPTIONS", opts, 1);
    ls_server *keep = S;
    S = &d;
    int rc = ls_start(S, settings);
    if (saved)
        setenv("ASAN_OPTIONS", saved, 1);
    else
        unsetenv("ASAN_OPTIONS");
    free(saved);
    assert_int_equal(rc, 0);
    assert_int_equal(ls_create_topic(S, "many", 1, NULL), 201);
    append_big("many", 6); /* ~6 MB: past what a socket buffers */
    static const char *const accepts[] = {"text/event-stream", "application/x-ndjson",
                                          "application/octet-stream"};
    int fds[STALLED];
    char head[4096];
    for (int i = 0; i < STALLED; i++) {
        const char *a = accepts[i % 3];
        fds[i] = raw_get(S,
                         i % 3 == 2 ? "/v1/topics/many/partitions/0/records?offset=0&max_bytes=67108864"
                                    : "/v1/topics/many/partitions/0/records?offset=0",
                         a, 4096);
        assert_true(fds[i] >= 0);
        assert_true(raw_read(fds[i], head, sizeof head, 2000) > 0);
    }
    for (int i = 0; i < STALLED; i++)
        assert_true(wait_stalled(fds[i], 30000));
    long long base = parked(S);
    mset polls, idle;
    mset_start(&polls, S, "/v1/topics/many/partitions/0/records?offset=latest&wait_ms=20000", PARKED,
               NULL);
    mset_start(&idle, S, "/v1/topics/many/partitions/0/records?offset=latest", 2, "text/event-stream");
    long long end = ru_mono_ms() + 10000;
    while (parked(S) < base + PARKED + 2 && ru_mono_ms() < end) {
        mset_pump(&polls, 20);
        mset_pump(&idle, 20);
    }
    assert_true(wait_parked(S, base + PARKED + 2, 100));
    /* ~20 MB appended behind the stalled readers (the parked ones are
     * answered and go). */
    long long rss0 = proc_status(S->pid, "VmRSS");
    append_big("many", 20);
    ru_sleep_ms(300);
    long long rss1 = proc_status(S->pid, "VmRSS");
    fprintf(stderr, "# server RSS %lld kB -> %lld kB with %d stalled readers behind 20 MB\n", rss0,
            rss1, STALLED);
    assert_true(rss0 > 0 && rss1 > 0);
    assert_true(rss1 - rss0 < 32 * 1024);
    /* New parked readers at the new end, then the stop. */
    mset_free(&polls);
    mset_free(&idle);
    base = parked(S);
    mset_start(&polls, S, "/v1/topics/many/partitions/0/records?offset=latest&wait_ms=20000", PARKED,
               NULL);
    end = ru_mono_ms() + 10000;
    while (parked(S) < base + PARKED && ru_mono_ms() < end)
        mset_pump(&polls, 20);
    assert_true(wait_parked(S, base + PARKED, 100));
    long long t = ru_mono_ms();
    assert_int_equal(ls_stop(S), 0);
    fprintf(stderr, "# stopped in %lld ms\n", ru_mono_ms() - t);
    assert_true(ru_mono_ms() - t < 15000);
    assert_true(mset_finish(&polls, 5000));
    for (size_t i = 0; i < PARKED; i++)
        assert_int_equal(polls.r[i].status, 200);
    mset_free(&polls);
    for (int i = 0; i < STALLED; i++)
        close(fds[i]);
    ls_cleanup(S);
    S = keep;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_delete_under_stalled_streams),
        cmocka_unit_test(test_delete_under_stalled_raw_read),
        cmocka_unit_test(test_delete_and_recreate_under_parked_readers),
        cmocka_unit_test_teardown(test_retention_under_stalled_raw_read, own_server_teardown),
        cmocka_unit_test(test_clients_leave_mid_event),
        cmocka_unit_test(test_stalled_readers_memory_and_stop),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
