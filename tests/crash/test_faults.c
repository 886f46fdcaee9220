/*
 * test_faults.c - every fault point of the test build (engine/eng_fault.h),
 * driven through the real server: start it with LOGSTORE_FAULT set, bring it
 * to the point, then restart it without the fault and check the outcome with
 * the independent checker of crash_check.h (own CRC-32C and batch parser)
 * plus the API.
 *
 *   segment.append.partial  exit: a torn tail that recovery truncates
 *                           (bytes_truncated > 0), earlier batches intact;
 *                           enospc: 507, the .log byte-identical, the next
 *                           append takes the same offset; eio: 503, the dir
 *                           offline (ready 503 "offline"), nothing partial,
 *                           everything acknowledged there after a restart
 *   segment.append.index    exit: the whole batch stays (nothing truncated);
 *                           enospc: 507 and the .log unchanged
 *   segment.append.truncate eio after index enospc (the refused batch
 *                           cannot be cut off): 503, the dir offline, and
 *                           after a kill -9 and restart the batch is gone
 *   index.reserve           enospc (no blocks for the next index entries):
 *                           507 and the .log unchanged, as above
 *   partition.fsync         eio with flush.messages=1: the append fails, the
 *                           high watermark does not move, the dir goes
 *                           offline; no later flush moves the high
 *                           watermark or the recovery point (enospc too);
 *                           exit: acknowledged records survive
 *   (compaction, atomic writes and retention: test_faults_maint.c)
 *   roll.after_create       both segments load, the unsealed one recovered
 *   roll.index_sync         eio and enospc: the append that rolls fails 503,
 *                           the dir offline, the new segment loads at restart
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "faults_fixture.h"

#include <signal.h>

/* ---- segment.append.partial ------------------------------------------------------ */

static void test_append_partial_exit(void **state)
{
    (void)state;
    static ls_server s; /* static: the teardown finds it after a failed assertion */
    start(&s, "segment.append.partial=exit@6", NULL, false);
    assert_int_equal(ls_create_topic(&s, "t", 1, PLAIN), 201);
    for (int b = 0; b < 5; b++)
        append_ok(&s, "t", 8, "a");
    long long before = seg_file_size(&s, "t", 0, ".log");
    assert_int_equal(append(&s, "t", 8, "torn", NULL), 0); /* the server dies in it */
    assert_int_equal(wait_exit(&s), 86);
    /* Half a batch is on disk: a torn tail. */
    long long torn = seg_file_size(&s, "t", 0, ".log");
    assert_true(torn > before);
    start(&s, NULL, NULL, true);
    assert_int_equal(startup(&s, "clean_shutdown"), 0);
    assert_int_equal(startup(&s, "bytes_truncated"), torn - before);
    assert_int_equal(seg_file_size(&s, "t", 0, ".log"), before);
    cc_part p = check_files(&s, "t", 0);
    assert_int_equal(p.next_offset, 40);
    cc_part_free(&p);
    assert_int_equal(part_field(&s, "t", "high_watermark"), 40);
    ls_resp r;
    assert_int_equal(append(&s, "t", 3, "after", &r), 200); /* the torn offsets are reused */
    assert_int_equal(ls_jint(&r, "base_offset"), 40);
    ls_resp_free(&r);
    p = check_files(&s, "t", 0);
    cc_part_free(&p);
    assert_int_equal(ls_stop(&s), 0);
    ls_cleanup(&s);
}

/* A refused append (enospc at point) leaves the .log byte-identical, the dir
 * online, and the next append takes the same offset. */
static void refused_append_leaves_nothing(const char *fault)
{
    static ls_server s; /* static: the teardown finds it after a failed assertion */
    start(&s, fault, NULL, false);
    assert_int_equal(ls_create_topic(&s, "t", 1, PLAIN), 201);
    for (int b = 0; b < 4; b++)
        append_ok(&s, "t", 6, "a");
    char path[600];
    snprintf(path, sizeof path, "%s/t-0/%020d.log", s.dir, 0);
    size_t len0, len1;
    char *before = ls_read_file(path, &len0);
    assert_non_null(before);
    ls_resp r;
    assert_int_equal(append(&s, "t", 6, "refused", &r), 507);
    CHECK_ERR(r, 507, "disk_full");
    ls_resp_free(&r);
    char *after = ls_read_file(path, &len1);
    assert_non_null(after);
    assert_int_equal(len0, len1);
    assert_memory_equal(before, after, len0);
    free(before);
    free(after);
    char st[32];
    assert_int_equal(ready_status(&s, st, sizeof st), 200);
    assert_int_equal(append(&s, "t", 6, "next", &r), 200);
    assert_int_equal(ls_jint(&r, "base_offset"), 24);
    ls_resp_free(&r);
    cc_part p = check_files(&s, "t", 0);
    assert_int_equal(p.next_offset, 30);
    cc_part_free(&p);
    assert_int_equal(ls_stop(&s), 0);
    start(&s, NULL, NULL, true);
    assert_int_equal(startup(&s, "clean_shutdown"), 1);
    p = check_files(&s, "t", 0);
    cc_part_free(&p);
    assert_int_equal(ls_stop(&s), 0);
    ls_cleanup(&s);
}

static void test_append_partial_enospc(void **state)
{
    (void)state;
    refused_append_leaves_nothing("segment.append.partial=enospc@5");
}

static void test_append_index_enospc(void **state)
{
    (void)state;
    refused_append_leaves_nothing("segment.append.index=enospc@5");
}

/* Index entries are stored through a mapping, onto blocks reserved
 * ahead with posix_fallocate; a reservation refused for want of space
 * must refuse the append like a failed write, not crash on SIGBUS. */
static void test_index_reserve_enospc(void **state)
{
    (void)state;
    /* Appends 2 to 5 each add an offset-index entry (the first batch of a
     * segment gets none): the 4th is the 5th append's. */
    refused_append_leaves_nothing("index.reserve=enospc@4");
}

/* An append refused after its whole batch was written (no room for its
 * index entry) whose .log cannot be cut back either: the batch would stay
 * in the file, and a start after a crash kept it although its client was
 * told the append failed (507, retriable: a retry stored it twice).  The
 * dir goes offline instead (503) and the batch is gone after the restart. */
static void test_append_truncate_eio(void **state)
{
    (void)state;
    static ls_server s; /* static: the teardown finds it after a failed assertion */
    start(&s, "segment.append.index=enospc@5,segment.append.truncate=eio", NULL, false);
    assert_int_equal(ls_create_topic(&s, "t", 1, PLAIN), 201);
    for (int b = 0; b < 4; b++)
        append_ok(&s, "t", 5, "a");
    ls_resp r;
    assert_int_equal(append(&s, "t", 5, "refused", &r), 503);
    CHECK_ERR(r, 503, "log_dir_offline");
    ls_resp_free(&r);
    char st[32];
    assert_int_equal(ready_status(&s, st, sizeof st), 503);
    assert_string_equal(st, "offline");
    assert_int_equal(append(&s, "t", 5, "after", &r), 503);
    ls_resp_free(&r);
    ls_kill9(&s);
    start(&s, NULL, NULL, true);
    assert_int_equal(ready_status(&s, st, sizeof st), 200);
    cc_part p = check_files(&s, "t", 0);
    assert_int_equal(p.next_offset, 20);
    cc_part_free(&p);
    assert_int_equal(part_field(&s, "t", "high_watermark"), 20);
    assert_int_equal(append(&s, "t", 5, "again", &r), 200);
    assert_int_equal(ls_jint(&r, "base_offset"), 20);
    ls_resp_free(&r);
    assert_int_equal(ls_stop(&s), 0);
    ls_cleanup(&s);
}

/* An I/O error on the append path takes the log dir offline: 503 on appends,
 * ready 503 "offline"; after a restart everything acknowledged is there. */
static void offline_after(const char *fault, const char *configs)
{
    static ls_server s; /* static: the teardown finds it after a failed assertion */
    start(&s, fault, NULL, false);
    assert_int_equal(ls_create_topic(&s, "t", 1, configs), 201);
    for (int b = 0; b < 4; b++)
        append_ok(&s, "t", 5, "a");
    long long size = seg_file_size(&s, "t", 0, ".log");
    ls_resp r;
    assert_int_equal(append(&s, "t", 5, "failed", &r), 503);
    CHECK_ERR(r, 503, "log_dir_offline");
    ls_resp_free(&r);
    char st[32];
    assert_int_equal(ready_status(&s, st, sizeof st), 503);
    assert_string_equal(st, "offline");
    assert_int_equal(append(&s, "t", 5, "refused", &r), 503);
    CHECK_ERR(r, 503, "log_dir_offline");
    ls_resp_free(&r);
    /* Only what was acknowledged counts; the dir's records are not read
     * again until a restart recovers them (DESIGN §3: 503 on its
     * partitions), and retention leaves its files alone. */
    assert_int_equal(part_field(&s, "t", "high_watermark"), 20);
    assert_int_equal(ls_get(&s, "/v1/topics/t/partitions/0/records?offset=0", &r), 0);
    CHECK_ERR(r, 503, "log_dir_offline");
    ls_resp_free(&r);
    assert_int_equal(ls_send_json(&s, "POST", "/v1/topics/t/retention:run", "{}", &r), 0);
    CHECK_ERR(r, 503, "log_dir_offline");
    ls_resp_free(&r);
    if (strstr(fault, "segment.append")) /* the write failed: nothing partial stays */
        assert_int_equal(seg_file_size(&s, "t", 0, ".log"), size);
    assert_int_equal(ls_stop(&s), 0);
    start(&s, NULL, NULL, true);
    /* An offline dir gets no clean-shutdown marker: the start recovers. */
    assert_int_equal(startup(&s, "clean_shutdown"), 0);
    assert_int_equal(ready_status(&s, st, sizeof st), 200);
    cc_part p = check_files(&s, "t", 0);
    /* The failed fsync's batch was written (page cache) but never acknowledged:
     * it may be there; the failed write's is not. */
    assert_true(p.next_offset == 20 || (strstr(fault, "fsync") && p.next_offset == 25));
    cc_part_free(&p);
    append_ok(&s, "t", 5, "again");
    p = check_files(&s, "t", 0);
    cc_part_free(&p);
    assert_int_equal(ls_stop(&s), 0);
    ls_cleanup(&s);
}

static void test_append_partial_eio(void **state)
{
    (void)state;
    offline_after("segment.append.partial=eio@5", PLAIN);
}

static void test_fsync_eio(void **state)
{
    (void)state;
    offline_after("partition.fsync=eio@5", DURABLE);
}

/* A failed fsync is final.  Linux reports a writeback error once and marks
 * the pages clean, so the flusher's next fsync "succeeded": it moved the
 * high watermark over the failed append (readable after its client was told
 * it failed) and the stop wrote a recovery point past it.  ENOSPC from an
 * fsync is the same (the bytes were written): 503, not 507's "nothing
 * written". */
static void test_fsync_failure_is_final(void **state)
{
    (void)state;
    static const char *const faults[] = {"partition.fsync=eio@5", "partition.fsync=enospc@5"};
    static const char *const fast_flusher[] = {"log.flush.scheduler.interval.ms=50", NULL};
    for (int i = 0; i < 2; i++) {
        static ls_server s;
        start(&s, faults[i], fast_flusher, false);
        assert_int_equal(ls_create_topic(&s, "t", 1,
                                         "{\"flush.messages\":\"1\",\"flush.ms\":\"100\"}"),
                         201);
        for (int b = 0; b < 4; b++)
            append_ok(&s, "t", 5, "a");
        ls_resp r;
        assert_int_equal(append(&s, "t", 5, "failed", &r), 503);
        CHECK_ERR(r, 503, "log_dir_offline");
        assert_non_null(strstr(ls_jstr(&r, "message"), "written but its fsync failed"));
        ls_resp_free(&r);
        sleep_ms(500); /* several flusher runs */
        assert_int_equal(part_field(&s, "t", "high_watermark"), 20);
        assert_int_equal(part_field(&s, "t", "recovery_point"), 20);
        assert_int_equal(ls_stop(&s), 0);
        char path[1400];
        snprintf(path, sizeof path, "%s/recovery-point-offset-checkpoint", s.dir);
        size_t len;
        char *ck = ls_read_file(path, &len);
        assert_non_null(ck);
        assert_non_null(strstr(ck, "t 0 20\n"));
        free(ck);
        ls_cleanup(&s);
    }
}

/* A stop signal during a long load ends the process at the next partition,
 * without the clean-shutdown marker (the next start loads again), rather
 * than after the whole load: it used to be waited for only once the server
 * was ready, so an orchestrator's grace period could run out into a
 * SIGKILL.  (partition.open=stall makes the first partition take 3 s.) */
static void test_stop_while_loading(void **state)
{
    (void)state;
    static ls_server s;
    start(&s, NULL, NULL, false);
    assert_int_equal(ls_create_topic(&s, "t", 3, PLAIN), 201);
    append_ok(&s, "t", 5, "a");
    assert_int_equal(ls_stop(&s), 0);
    char prev[400], dir[256];
    snprintf(prev, sizeof prev, "%s.prev", s.log_path);
    rename(s.log_path, prev);
    snprintf(dir, sizeof dir, "%s", s.dir);
    setenv("LOGSTORE_FAULT", "partition.open=stall@1", 1);
    g_live = &s;
    bool own = s.own_dir;
    int rc = ls_start_dir(&s, dir, NULL, false);
    s.own_dir = own;
    unsetenv("LOGSTORE_FAULT");
    assert_int_equal(rc, 0);
    char st[32];
    assert_int_equal(ready_status(&s, st, sizeof st), 503); /* still loading */
    assert_int_equal(kill(s.pid, SIGTERM), 0);
    assert_int_equal(wait_exit(&s), 0);
    size_t len;
    char *log = ls_read_file(s.log_path, &len);
    assert_non_null(log);
    assert_non_null(strstr(log, "received SIGTERM while loading"));
    free(log);
    char marker[400];
    snprintf(marker, sizeof marker, "%s/.kafka_cleanshutdown", s.dir);
    assert_int_equal(access(marker, F_OK), -1);
    /* The next start loads everything. */
    start(&s, NULL, NULL, true);
    assert_int_equal(startup(&s, "clean_shutdown"), 0);
    assert_int_equal(part_field(&s, "t", "log_end_offset"), 5);
    assert_int_equal(ls_stop(&s), 0);
    ls_cleanup(&s);
}

/* Appends' fsyncs leave the active segment's indexes to the roll, which
 * syncs them before the segment stops being last; when that fails the dir
 * goes offline like a failed append fsync, even on a full disk (the
 * recovery point must not pass indexes that are not on disk).  Here the
 * index holds one entry, so every append after the first rolls and the
 * fifth meets the fourth roll. */
#define ROLLS_EVERY_APPEND \
    "{\"segment.index.bytes\":\"12\",\"index.interval.bytes\":\"1\",\"flush.messages\":\"1\"}"

static void test_roll_index_sync_eio(void **state)
{
    (void)state;
    offline_after("roll.index_sync=eio@4", ROLLS_EVERY_APPEND);
}

static void test_roll_index_sync_enospc(void **state)
{
    (void)state;
    offline_after("roll.index_sync=enospc@4", ROLLS_EVERY_APPEND);
}

/* exit after the whole batch was written (before its index entry or its
 * fsync): recovery keeps the complete batch, acknowledged or not. */
static void exit_after_write(const char *fault, const char *configs)
{
    static ls_server s; /* static: the teardown finds it after a failed assertion */
    start(&s, fault, NULL, false);
    assert_int_equal(ls_create_topic(&s, "t", 1, configs), 201);
    for (int b = 0; b < 4; b++)
        append_ok(&s, "t", 5, "a");
    assert_int_equal(append(&s, "t", 5, "unacked", NULL), 0);
    assert_int_equal(wait_exit(&s), 86);
    start(&s, NULL, NULL, true);
    assert_int_equal(startup(&s, "clean_shutdown"), 0);
    assert_int_equal(startup(&s, "bytes_truncated"), 0);
    cc_part p = check_files(&s, "t", 0);
    assert_int_equal(p.next_offset, 25);
    cc_part_free(&p);
    assert_int_equal(part_field(&s, "t", "high_watermark"), 25);
    assert_int_equal(ls_stop(&s), 0);
    ls_cleanup(&s);
}

static void test_append_index_exit(void **state)
{
    (void)state;
    exit_after_write("segment.append.index=exit@5", PLAIN);
}

static void test_fsync_exit(void **state)
{
    (void)state;
    exit_after_write("partition.fsync=exit@5", DURABLE);
}

/* ---- roll.after_create ------------------------------------------------------------- */

static void test_roll_after_create(void **state)
{
    (void)state;
    static ls_server s; /* static: the teardown finds it after a failed assertion */
    start(&s, "roll.after_create=exit", NULL, false);
    assert_int_equal(ls_create_topic(&s, "t", 1, PLAIN), 201);
    for (int b = 0; b < 4; b++)
        append_ok(&s, "t", 6, "a");
    ls_resp r;
    assert_int_equal(ls_post(&s, "/v1/topics/t/partitions/0/segments:roll", "", &r), -1);
    assert_int_equal(wait_exit(&s), 86);
    /* The new segment exists; the old one was never sealed (its index is
     * still preallocated). */
    assert_int_equal(seg_file_size(&s, "t", 24, ".log"), 0);
    assert_true(seg_file_size(&s, "t", 0, ".index") > 1000);
    start(&s, NULL, NULL, true);
    assert_int_equal(startup(&s, "clean_shutdown"), 0);
    assert_int_equal(startup(&s, "segments"), 2);
    cc_part p = check_files(&s, "t", 0); /* the old segment's indexes trimmed and right */
    assert_int_equal(p.nsegments, 2);
    assert_int_equal(p.next_offset, 24);
    cc_part_free(&p);
    assert_int_equal(append(&s, "t", 6, "b", &r), 200);
    assert_int_equal(ls_jint(&r, "base_offset"), 24);
    ls_resp_free(&r);
    assert_int_equal(part_field(&s, "t", "active_segment_base_offset"), 24);
    p = check_files(&s, "t", 0);
    cc_part_free(&p);
    assert_int_equal(ls_stop(&s), 0);
    ls_cleanup(&s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_append_partial_exit, setup, teardown),
        cmocka_unit_test_setup_teardown(test_append_partial_enospc, setup, teardown),
        cmocka_unit_test_setup_teardown(test_append_partial_eio, setup, teardown),
        cmocka_unit_test_setup_teardown(test_append_index_exit, setup, teardown),
        cmocka_unit_test_setup_teardown(test_append_index_enospc, setup, teardown),
        cmocka_unit_test_setup_teardown(test_index_reserve_enospc, setup, teardown),
        cmocka_unit_test_setup_teardown(test_append_truncate_eio, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fsync_eio, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fsync_failure_is_final, setup, teardown),
        cmocka_unit_test_setup_teardown(test_roll_index_sync_eio, setup, teardown),
        cmocka_unit_test_setup_teardown(test_roll_index_sync_enospc, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fsync_exit, setup, teardown),
        cmocka_unit_test_setup_teardown(test_stop_while_loading, setup, teardown),
        cmocka_unit_test_setup_teardown(test_roll_after_create, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
