/*
 * test_manager_stop.c - what a clean stop writes, and what it leaves alone;
 * partitions closed at a stop, and opened at a create, side by side.
 *
 * A stop must leave everything the clean-shutdown marker vouches for on
 * disk, and it must scale: an idle partition (nothing appended since the
 * last clean start) has nothing to flush, so its files are neither
 * rewritten (no trim, no new producer snapshot) nor fdatasync'd.  Every
 * fdatasync of a segment's .log or index passes the "segment.sync" fault
 * point; a hook on it counts them, or holds one until another close
 * thread arrives.  Partitions are closed on background.threads threads, so
 * these tests also run that under the sanitizers.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "eng_batch.h"
#include "eng_error.h"
#include "eng_fault.h"
#include "eng_manager.h"
#include "eng_partition.h"
#include "manager_fixture.h"
#include "support.h"

#include <dirent.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static _Atomic int g_syncs;

static void count_sync(void *ctx)
{
    (void)ctx;
    atomic_fetch_add(&g_syncs, 1);
}

static int setup_stop(void **state)
{
    if (setup(state))
        return -1;
    fixture *f = *state;
    eng_jobs_opts_default(&f->opts.jobs); /* background.threads: the close's threads */
    return 0;
}

/* Counts segment fdatasyncs during a close; returns what close said. */
static bool close_counting(eng_manager *m, int *syncs)
{
    atomic_store(&g_syncs, 0);
    eng_fault_hook("segment.sync", count_sync, NULL);
    bool ok = eng_manager_close(m);
    eng_fault_hook(NULL, NULL, NULL);
    *syncs = atomic_load(&g_syncs);
    return ok;
}

static int64_t log_end(eng_manager *m, const char *topic, int32_t id)
{
    eng_partition *p;
    assert_int_equal(eng_manager_partition(m, topic, id, &p, NULL), 0);
    int64_t leo = eng_partition_log_end_offset(p);
    eng_partition_unref(p);
    return leo;
}

/* What a directory holds, file by file, as stat sees it. */
#define MAX_FILES 32
typedef struct dir_state {
    size_t n;
    char name[MAX_FILES][256];
    struct stat st[MAX_FILES];
} dir_state;

static int by_name(const void *a, const void *b)
{
    return strcmp(a, b);
}

static void take_state(const char *dir, dir_state *ds)
{
    memset(ds, 0, sizeof *ds);
    DIR *dh = opendir(dir);
    assert_non_null(dh);
    struct dirent *e;
    while ((e = readdir(dh))) {
        if (e->d_name[0] == '.')
            continue;
        assert_true(ds->n < MAX_FILES);
        snprintf(ds->name[ds->n++], sizeof ds->name[0], "%s", e->d_name);
    }
    closedir(dh);
    qsort(ds->name, ds->n, sizeof ds->name[0], by_name);
    for (size_t i = 0; i < ds->n; i++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", dir, ds->name[i]);
        assert_int_equal(stat(path, &ds->st[i]), 0);
    }
}

static bool same_time(struct timespec a, struct timespec b)
{
    return a.tv_sec == b.tv_sec && a.tv_nsec == b.tv_nsec;
}

/* Same names, and each file the same inode, size, mtime and ctime: not
 * replaced, not truncated, not written. */
static void expect_unchanged(const dir_state *a, const dir_state *b, const char *dir)
{
    assert_int_equal(a->n, b->n);
    for (size_t i = 0; i < a->n; i++) {
        if (strcmp(a->name[i], b->name[i]))
            fail_msg("%s: %s became %s", dir, a->name[i], b->name[i]);
        const struct stat *x = &a->st[i], *y = &b->st[i];
        if (x->st_ino != y->st_ino || x->st_size != y->st_size ||
            !same_time(x->st_mtim, y->st_mtim) || !same_time(x->st_ctim, y->st_ctim))
            fail_msg("%s/%s changed: inode %llu -> %llu, size %lld -> %lld", dir, a->name[i],
                     (unsigned long long)x->st_ino, (unsigned long long)y->st_ino,
                     (long long)x->st_size, (long long)y->st_size);
    }
}

static void expect_clean_start(eng_manager *m)
{
    eng_startup_report rep;
    eng_manager_startup_report(m, &rep);
    assert_true(rep.clean_shutdown);
    assert_int_equal(rep.segments_recovered, 0);
    assert_int_equal(rep.bytes_truncated, 0);
}

#define IDLE_PARTS 3

/* Partitions idle since a clean start are left exactly as they were; the
 * busy one is flushed, and the next start trusts it without recovery. */
static void test_stop_leaves_idle_partitions_alone(void **state)
{
    fixture *f = *state;
    eng_manager *m = open_mgr(f);
    eng_errdetail err = {0};
    assert_int_equal(eng_manager_create_topic(m, "busy", 1, NULL, NULL, 0, &err), 0);
    assert_int_equal(eng_manager_create_topic(m, "idle", IDLE_PARTS, NULL, NULL, 0, &err), 0);
    append_records(m, "busy", 0, 10);
    append_records(m, "idle", 0, 10); /* data, then idle from the next start on */
    assert_true(eng_manager_close(m));

    m = open_mgr(f);
    expect_clean_start(m);
    dir_state before[IDLE_PARTS], after;
    char dirs[IDLE_PARTS][600];
    for (int i = 0; i < IDLE_PARTS; i++) {
        snprintf(dirs[i], sizeof dirs[i], "%s/idle-%d", f->data, i);
        take_state(dirs[i], &before[i]);
    }
    /* Nothing appended since the clean start: nothing to sync at all. */
    int syncs;
    assert_true(close_counting(m, &syncs));
    assert_int_equal(syncs, 0);
    for (int i = 0; i < IDLE_PARTS; i++) {
        take_state(dirs[i], &after);
        expect_unchanged(&before[i], &after, dirs[i]);
    }

    m = open_mgr(f);
    expect_clean_start(m);
    append_records(m, "busy", 0, 5);
    assert_true(close_counting(m, &syncs));
    assert_true(syncs >= 1); /* busy-0's .log at least */
    for (int i = 0; i < IDLE_PARTS; i++) {
        take_state(dirs[i], &after);
        expect_unchanged(&before[i], &after, dirs[i]);
    }

    m = open_mgr(f);
    expect_clean_start(m);
    assert_int_equal(log_end(m, "busy", 0), 15);
    assert_int_equal(log_end(m, "idle", 0), 10);
    /* Appends after a start that opened the indexes unexpanded. */
    append_records(m, "idle", 1, 3);
    assert_true(eng_manager_close(m));
    m = open_mgr(f);
    expect_clean_start(m);
    assert_int_equal(log_end(m, "idle", 1), 3);
    assert_true(eng_manager_close(m));
}

/* After a crash the start recovers the active segments through objects it
 * then replaces, and what it read may be in the page cache only: the stop
 * that follows must sync them although nothing was appended, or the
 * marker would vouch for files that are not on disk. */
static void test_stop_after_crash_syncs_recovered_segments(void **state)
{
    fixture *f = *state;
    enum { PARTS = 4 };
    eng_manager *m = open_mgr(f);
    eng_errdetail err = {0};
    assert_int_equal(eng_manager_create_topic(m, "t", PARTS, NULL, NULL, 0, &err), 0);
    for (int i = 0; i < PARTS; i++)
        append_records(m, "t", i, 10 + i);
    assert_true(eng_manager_close(m));

    m = open_mgr(f);
    append_records(m, "t", 0, 5);
    eng_manager_abandon(m); /* a crash: no close, no checkpoints, no marker */

    m = open_mgr(f);
    eng_startup_report rep;
    eng_manager_startup_report(m, &rep);
    assert_false(rep.clean_shutdown);
    assert_int_equal(rep.segments_recovered, PARTS);
    int syncs;
    assert_true(close_counting(m, &syncs));
    /* Each partition's .log and both its indexes. */
    assert_true(syncs >= 3 * PARTS);

    m = open_mgr(f);
    expect_clean_start(m);
    assert_int_equal(log_end(m, "t", 0), 15);
    for (int i = 1; i < PARTS; i++)
        assert_int_equal(log_end(m, "t", i), 10 + i);
    assert_true(eng_manager_close(m));
}

/* A sync that fails at stop, on whichever close thread: no marker, and the
 * next start recovers and keeps the data. */
static void test_failed_sync_at_stop_is_unclean(void **state)
{
    fixture *f = *state;
    enum { PARTS = 6 };
    eng_manager *m = open_mgr(f);
    eng_errdetail err = {0};
    assert_int_equal(eng_manager_create_topic(m, "t", PARTS, NULL, NULL, 0, &err), 0);
    for (int i = 0; i < PARTS; i++)
        append_records(m, "t", i, 4);
    eng_fault_set("segment.sync=eio@3");
    assert_false(eng_manager_close(m));
    eng_fault_set(NULL);
    assert_true(logged(f, "Input/output error"));
    char path[700];
    snprintf(path, sizeof path, "%s/.kafka_cleanshutdown", f->data);
    assert_int_equal(ts_file_size(path), -1);

    m = open_mgr(f);
    eng_startup_report rep;
    eng_manager_startup_report(m, &rep);
    assert_false(rep.clean_shutdown);
    for (int i = 0; i < PARTS; i++)
        assert_int_equal(log_end(m, "t", i), 4);
    assert_true(eng_manager_close(m));
}

/* The hook below: the first thread to reach its point waits (10 s at
 * most) for a second thread to reach it while it is still inside. */
static struct {
    pthread_mutex_t mu;
    pthread_cond_t cond;
    pthread_t first;
    int threads; /* distinct threads seen, up to 2 */
    bool overlapped;
} g_meet = {.mu = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER};

static void meet_at_sync(void *ctx)
{
    (void)ctx;
    pthread_mutex_lock(&g_meet.mu);
    if (g_meet.threads == 0) {
        g_meet.first = pthread_self();
        g_meet.threads = 1;
        struct timespec deadline;
        clock_gettime(CLOCK_REALTIME, &deadline);
        deadline.tv_sec += 10;
        while (g_meet.threads < 2 &&
               pthread_cond_timedwait(&g_meet.cond, &g_meet.mu, &deadline) == 0)
            ;
        g_meet.overlapped = g_meet.threads == 2;
    } else if (g_meet.threads == 1 && !pthread_equal(g_meet.first, pthread_self())) {
        g_meet.threads = 2;
        pthread_cond_broadcast(&g_meet.cond);
    }
    pthread_mutex_unlock(&g_meet.mu);
}

/* Partitions are closed side by side, not one after another: each one
 * written since its last flush waits for its own fsyncs, and 2,000 of
 * those in a row outlasted a container's grace period. */
static void test_stop_closes_partitions_concurrently(void **state)
{
    fixture *f = *state;
    enum { PARTS = 4 };
    g_meet.threads = 0;
    g_meet.overlapped = false;
    eng_manager *m = open_mgr(f);
    eng_errdetail err = {0};
    assert_int_equal(eng_manager_create_topic(m, "t", PARTS, NULL, NULL, 0, &err), 0);
    for (int i = 0; i < PARTS; i++)
        append_records(m, "t", i, 3);
    eng_fault_hook("segment.sync", meet_at_sync, NULL);
    assert_true(eng_manager_close(m));
    eng_fault_hook(NULL, NULL, NULL);
    assert_true(g_meet.overlapped);

    m = open_mgr(f);
    expect_clean_start(m);
    for (int i = 0; i < PARTS; i++)
        assert_int_equal(log_end(m, "t", i), 3);
    assert_true(eng_manager_close(m));
}

/* A new topic's partitions are opened side by side too: each makes its
 * directory and files durable, about five fsyncs, and a 4-partition topic
 * waited for them one after another. */
static void test_create_opens_partitions_concurrently(void **state)
{
    fixture *f = *state;
    enum { PARTS = 4 };
    g_meet.threads = 0;
    g_meet.overlapped = false;
    eng_manager *m = open_mgr(f);
    eng_errdetail err = {0};
    eng_fault_hook("partition.open", meet_at_sync, NULL);
    int rc = eng_manager_create_topic(m, "t", PARTS, NULL, NULL, 0, &err);
    eng_fault_hook(NULL, NULL, NULL);
    assert_int_equal(rc, 0);
    assert_true(g_meet.overlapped);
    for (int i = 0; i < PARTS; i++) {
        append_records(m, "t", i, 2);
        assert_int_equal(log_end(m, "t", i), 2);
    }
    assert_true(eng_manager_close(m));
    m = open_mgr(f);
    expect_clean_start(m);
    for (int i = 0; i < PARTS; i++)
        assert_int_equal(log_end(m, "t", i), 2);
    assert_true(eng_manager_close(m));
}

/* A create that fails in one of its parallel opens leaves nothing behind. */
static void test_failed_parallel_create_leaves_nothing(void **state)
{
    fixture *f = *state;
    eng_manager *m = open_mgr(f);
    eng_errdetail err = {0};
    eng_fault_set("partition.files=eio@3");
    assert_int_not_equal(eng_manager_create_topic(m, "t", 6, NULL, NULL, 0, &err), 0);
    eng_fault_set(NULL);
    for (int i = 0; i < 6; i++) {
        char path[700];
        snprintf(path, sizeof path, "%s/t-%d", f->data, i);
        assert_int_equal(ts_file_size(path), -1);
    }
    assert_int_equal(eng_manager_create_topic(m, "t", 6, NULL, NULL, 0, &err), 0);
    assert_true(eng_manager_close(m));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_stop_leaves_idle_partitions_alone, setup_stop,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_stop_after_crash_syncs_recovered_segments, setup_stop,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_failed_sync_at_stop_is_unclean, setup_stop, teardown),
        cmocka_unit_test_setup_teardown(test_stop_closes_partitions_concurrently, setup_stop,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_create_opens_partitions_concurrently, setup_stop,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_failed_parallel_create_leaves_nothing, setup_stop,
                                        teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
