/*
 * test_snapshot_stop.c - a stop signal that arrives while a snapshot is
 * being taken.
 *
 * The server's stop waits for every request in flight, the snapshot's
 * included: a snapshot of a large data dir (each active segment copied, up
 * to segment.bytes apiece) held the stop until it was whole, past an
 * orchestrator's grace period, and the SIGKILL after it made the next start
 * a crash recovery.  The snapshot is held mid-way here with a fault stall on
 * each partition (LOGSTORE_FAULT snapshot.partition=stall, 3 s apiece), the
 * server is told to stop, and what is checked is the outcome, not how long
 * it took: the snapshot is abandoned (no snapshot of that name, no
 * .partial- directory, no 201), and the stop is a clean one (exit status 0,
 * clean-shutdown marker, every record there after a restart).
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "harness.h"
#include "eng_fs.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define PARTITIONS 4

typedef struct bg_snapshot {
    ls_server *s;
    long status; /* -1: no answer (the connection closed by the stop) */
} bg_snapshot;

static void *snapshot_in_background(void *arg)
{
    bg_snapshot *b = arg;
    ls_resp r;
    b->status = -1;
    if (ls_send_json(b->s, "POST", "/v1/admin/snapshots", "{\"name\":\"cut\"}", &r) == 0) {
        b->status = r.status;
        ls_resp_free(&r);
    }
    return NULL;
}

static ls_server g_s;

static int teardown(void **state)
{
    (void)state;
    ls_cleanup(&g_s); /* after a failure too: the server and its dir go */
    return 0;
}

static void test_stop_abandons_snapshot(void **state)
{
    (void)state;
    ls_server *s = &g_s;
    /* Every partition stalls, so the snapshot is still being taken when the
     * signal comes even if this thread sees it start late. */
    setenv("LOGSTORE_FAULT",
           "snapshot.partition=stall@1,snapshot.partition=stall@2,"
           "snapshot.partition=stall@3,snapshot.partition=stall@4",
           1);
    int started = ls_start(&g_s, NULL);
    unsetenv("LOGSTORE_FAULT");
    assert_int_equal(started, 0);
    assert_int_equal(ls_create_topic(s, "t", PARTITIONS, NULL), 201);
    for (int p = 0; p < PARTITIONS; p++)
        assert_int_equal(
            ls_append_json(s, "t", p, "{\"records\":[{\"key\":\"k\",\"value\":\"v\"}]}"), 200);

    bg_snapshot b = {.s = s};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, snapshot_in_background, &b), 0);
    /* The first partition's directory is made just before its stall. */
    char first[1400], partial[1400], final[1400], marker[1400];
    snprintf(first, sizeof first, "%s/snapshots/.partial-cut/t-0", s->dir);
    snprintf(partial, sizeof partial, "%s/snapshots/.partial-cut", s->dir);
    snprintf(final, sizeof final, "%s/snapshots/cut", s->dir);
    snprintf(marker, sizeof marker, "%s/.kafka_cleanshutdown", s->dir);
    for (int i = 0; i < 6000 && !eng_fs_exists(first); i++)
        usleep(5000);
    assert_true(eng_fs_exists(first));

    int status = ls_stop(s);
    pthread_join(t, NULL);
    assert_int_equal(status, 0);
    if (b.status == 201 || eng_fs_exists(final))
        fail_msg("the stop waited for the whole snapshot (answer %ld)", b.status);
    /* Answered 503 shutting_down when the answer made it out before the
     * listener closed. */
    if (b.status != -1 && b.status != 503)
        fail_msg("the abandoned snapshot answered %ld", b.status);
    assert_false(eng_fs_exists(partial));
    assert_true(eng_fs_exists(marker));
    assert_true(ls_file_contains(s->log_path, "abandoned"));

    assert_int_equal(ls_restart(s, NULL), 0);
    ls_resp r;
    assert_int_equal(ls_get(s, "/v1/info", &r), 0);
    assert_true(json_is_true(json_object_get(json_object_get(r.json, "startup"), "clean_shutdown")));
    ls_resp_free(&r);
    for (int p = 0; p < PARTITIONS; p++)
        assert_int_equal(ls_log_end_offset(s, "t", p), 1);
    assert_int_equal(ls_stop(s), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_stop_abandons_snapshot, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
