/*
 * test_topic_churn.c - a topic deleted and created again under the same name
 * while other threads keep using partitions they looked up before: appends,
 * reads, rolls, retention passes, delete-records and cleanings of the old
 * partitions race the delete, and a second thread keeps creating the name
 * and adding a partition to it.  Every call answers 0 or an expected refusal;
 * nothing deadlocks; and the last topic of the name, reopened after a clean
 * stop, holds exactly its own records, contiguous from offset 0, with no file
 * of an earlier generation in its directory.  (Before partitions were retired
 * on delete, an old partition's roll or retention named files in the new
 * topic's directory.)
 *
 * A reader that read a partition before its topic was deleted and parks
 * only after the delete's wake-up went by is woken at once, not left
 * waiting for a high watermark that will never move.  A delete-file job
 * queued by the deleted topic does not unlink the new topic's files, and a
 * checkpoint written around the delete does not bring its offsets back;
 * a segment waiting out its delete delay is let go with its topic.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "api_wait.h"
#include "eng_compact.h"
#include "eng_error.h"
#include "eng_fault.h"
#include "eng_fs.h"
#include "eng_manager.h"
#include "eng_offset_map.h"
#include "eng_partition.h"
#include "eng_retention.h"
#include "support.h"

#include <dirent.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define WORKERS 4
#define GENERATIONS 150
#define T0 1700000000000LL

typedef struct shared {
    eng_manager *m;
    _Atomic bool stop;
    _Atomic int unexpected; /* a return code no race explains */
    _Atomic long ops;
    _Atomic int busy; /* changes refused while another one held the name */
    char first_bad[200];
    pthread_mutex_t mu;
} shared;

static void sleep_us(long us)
{
    struct timespec ts = {0, us * 1000};
    nanosleep(&ts, NULL);
}

static void expect_rc(shared *sh, const char *what, int rc)
{
    /* What a partition of a deleted topic, or a partition at its limits,
     * may answer. */
    if (rc == 0 || rc == ENG_ENOTOPIC || rc == ENG_ENOPARTITION || rc == ENG_EOFFSET ||
        rc == ENG_EBUSY)
        return;
    pthread_mutex_lock(&sh->mu);
    if (atomic_fetch_add(&sh->unexpected, 1) == 0)
        snprintf(sh->first_bad, sizeof sh->first_bad, "%s: %s", what, eng_strerror(rc));
    pthread_mutex_unlock(&sh->mu);
}

static void *worker(void *arg)
{
    shared *sh = arg;
    eng_offset_map *map = NULL;
    if (eng_offset_map_new(1 << 20, 0.9, &map))
        return NULL;
    unsigned seed = (unsigned)(uintptr_t)&map;
    uint8_t buf[TS_BATCH_MAX_RECS * (TS_VALUE_MAX + 64)];
    while (!atomic_load(&sh->stop)) {
        eng_partition *p;
        int32_t id = (int32_t)(rand_r(&seed) % 2);
        if (eng_manager_partition(sh->m, "churn", id, &p, NULL)) {
            sleep_us(50);
            continue;
        }
        sleep_us(rand_r(&seed) % 300); /* long enough for a delete to pass by */
        int op = (int)(rand_r(&seed) % 10);
        int rc = 0;
        if (op < 4) {
            size_t len = ts_build_batch(buf, sizeof buf, 0, 4, T0, 200);
            eng_append_opts o = {.expected_offset = -1, .producer_batches = true};
            eng_append_result res;
            rc = eng_partition_append(p, buf, len, &o, &res, NULL);
            expect_rc(sh, "append", rc);
        } else if (op < 6) {
            eng_fetch ft;
            rc = eng_partition_read(p, 0, 64 * 1024, &ft, NULL);
            if (!rc)
                eng_fetch_free(&ft);
            expect_rc(sh, "read", rc);
        } else if (op == 6) {
            int64_t base;
            expect_rc(sh, "roll", eng_partition_roll(p, &base));
        } else if (op == 7) {
            eng_retention_report rep;
            /* Far past every record: the pass deletes the whole log. */
            expect_rc(sh, "retention", eng_partition_retention(p, T0 + (1LL << 40), false, &rep));
            eng_retention_report_free(&rep);
        } else if (op == 8) {
            int64_t lso;
            expect_rc(sh, "delete-records", eng_partition_delete_records(p, -1, &lso, NULL));
        } else {
            eng_clean_opts co = {.map = map, .now_ms = T0 + (1LL << 40)};
            eng_clean_stats st;
            expect_rc(sh, "clean", eng_partition_clean(p, -1, &co, &st));
        }
        atomic_fetch_add(&sh->ops, 1);
        eng_partition_unref(p);
    }
    eng_offset_map_free(map);
    return NULL;
}

/* A second thread creating and growing the name, racing the deletes: the
 * name is free, taken, or being changed (409 busy over HTTP), nothing else. */
static void *creator(void *arg)
{
    shared *sh = arg;
    const char *keys[] = {"cleanup.policy"}, *vals[] = {"compact,delete"};
    while (!atomic_load(&sh->stop)) {
        int rc = eng_manager_create_topic(sh->m, "churn", 2, keys, vals, 1, NULL);
        if (rc == ENG_EBUSY)
            atomic_fetch_add(&sh->busy, 1);
        else if (rc != 0 && rc != ENG_ETOPICEXISTS)
            expect_rc(sh, "create", rc);
        sleep_us(100);
        /* Grown to a third partition, racing the same deletes. */
        rc = eng_manager_add_partitions(sh->m, "churn", 3, NULL);
        if (rc == ENG_EBUSY)
            atomic_fetch_add(&sh->busy, 1);
        else
            expect_rc(sh, "grow", rc);
    }
    return NULL;
}

static eng_manager *open_mgr(const char *dir)
{
    eng_manager_opts o = {.log_dir = dir, .codec = ts_line_codec()};
    eng_config_defaults_init(&o.defaults);
    eng_manager *m = NULL;
    eng_errdetail err = {0};
    if (eng_manager_open(&o, &m, &err))
        fail_msg("eng_manager_open: %s", err.message);
    return m;
}

static void test_delete_and_create_under_load(void **state)
{
    (void)state;
    char *tmp = ts_tmpdir();
    char data[600];
    snprintf(data, sizeof data, "%s/data", tmp);
    shared sh = {.m = open_mgr(data)};
    pthread_mutex_init(&sh.mu, NULL);
    const char *keys[] = {"cleanup.policy"}, *vals[] = {"compact,delete"};
    eng_errdetail err = {0};
    assert_int_equal(eng_manager_create_topic(sh.m, "churn", 2, keys, vals, 1, &err), 0);
    pthread_t th[WORKERS + 1];
    for (int i = 0; i < WORKERS; i++)
        assert_int_equal(pthread_create(&th[i], NULL, worker, &sh), 0);
    assert_int_equal(pthread_create(&th[WORKERS], NULL, creator, &sh), 0);
    int deleted = 0;
    for (int g = 0; g < GENERATIONS; g++) {
        sleep_us(2000);
        int rc;
        while ((rc = eng_manager_delete_topic(sh.m, "churn", &err)) == ENG_EBUSY) {
            atomic_fetch_add(&sh.busy, 1); /* being created or grown */
            sleep_us(50);
        }
        if (rc != ENG_ENOTOPIC) /* the creator may not have made it again yet */
            assert_int_equal(rc, 0);
        deleted += rc == 0;
    }
    atomic_store(&sh.stop, true);
    for (int i = 0; i <= WORKERS; i++)
        pthread_join(th[i], NULL);
    fprintf(stderr, "# %d deletes, %ld operations, %d changes told busy\n", deleted,
            atomic_load(&sh.ops), atomic_load(&sh.busy));
    int rc = eng_manager_create_topic(sh.m, "churn", 2, keys, vals, 1, &err);
    assert_true(rc == 0 || rc == ENG_ETOPICEXISTS);
    if (atomic_load(&sh.unexpected))
        fail_msg("%d unexpected answers, the first %s", atomic_load(&sh.unexpected), sh.first_bad);

    int64_t leo[2];
    for (int32_t id = 0; id < 2; id++) {
        eng_partition *p;
        assert_int_equal(eng_manager_partition(sh.m, "churn", id, &p, NULL), 0);
        leo[id] = eng_partition_log_end_offset(p);
        eng_partition_unref(p);
    }
    eng_manager_close(sh.m);

    eng_manager *m = open_mgr(data);
    eng_startup_report rep;
    eng_manager_startup_report(m, &rep);
    assert_true(rep.clean_shutdown);
    assert_int_equal(rep.bytes_truncated, 0);
    for (int32_t id = 0; id < 2; id++) {
        eng_partition *p;
        assert_int_equal(eng_manager_partition(m, "churn", id, &p, NULL), 0);
        assert_int_equal(eng_partition_log_end_offset(p), leo[id]);
        /* Every record left reads back intact, at contiguous offsets. */
        int64_t off = eng_partition_log_start_offset(p), hw = eng_partition_high_watermark(p);
        while (off < hw) {
            eng_fetch ft;
            assert_int_equal(eng_partition_read(p, off, 1 << 20, &ft, NULL), 0);
            assert_true(ft.next_offset > off);
            for (size_t pos = 0; pos < ft.len;) {
                eng_batch_header h;
                assert_int_equal(eng_batch_header_decode(ft.data + pos, ft.len - pos, &h), 0);
                assert_int_equal(eng_batch_validate(ft.data + pos, eng_batch_size(&h), &h), 0);
                pos += eng_batch_size(&h);
            }
            off = ft.next_offset;
            eng_fetch_free(&ft);
        }
        /* Only this partition's segments (and their .deleted leftovers),
         * and the producer snapshot the clean stop wrote at the log end. */
        eng_segment_info *segs;
        size_t n;
        assert_int_equal(eng_partition_segments(p, &segs, &n), 0);
        char dir[700], listing[4096];
        snprintf(dir, sizeof dir, "%s/churn-%d", data, (int)id);
        ts_list_dir(dir, listing, sizeof listing);
        for (char *save = NULL, *name = strtok_r(listing, ",", &save); name;
             name = strtok_r(NULL, ",", &save)) {
            if (!strcmp(name, "partition.metadata") || !strcmp(name, "leader-epoch-checkpoint") ||
                strstr(name, ".deleted"))
                continue;
            long long base = atoll(name);
            bool known = strstr(name, ".snapshot") && base == leo[id];
            for (size_t k = 0; k < n; k++)
                known |= segs[k].base_offset == base;
            if (!known)
                fail_msg("churn-%d/%s belongs to no segment of the partition", (int)id, name);
        }
        free(segs);
        eng_partition_unref(p);
    }
    eng_manager_close(m);
    pthread_mutex_destroy(&sh.mu);
    ts_rmtree(tmp);
    free(tmp);
}

typedef struct big_create {
    eng_manager *m;
    _Atomic bool done;
    int rc;
} big_create;

static void *create_big(void *arg)
{
    big_create *b = arg;
    eng_errdetail err = {0};
    b->rc = eng_manager_create_topic(b->m, "big", 300, NULL, NULL, 0, &err);
    atomic_store(&b->done, true);
    return NULL;
}

/* While a create holds a name, a delete, grow or config change of it is
 * told busy (409), not unknown_topic: a client that deletes after its
 * create timed out was told the topic was gone, and then it appeared. */
static void test_changes_during_create_are_busy(void **state)
{
    (void)state;
    char *tmp = ts_tmpdir();
    char data[600];
    snprintf(data, sizeof data, "%s/data", tmp);
    big_create b = {.m = open_mgr(data)};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, create_big, &b), 0);
    int busy = 0, missing_after_busy = 0;
    eng_config_overrides ov = {0};
    while (!atomic_load(&b.done)) {
        eng_errdetail err = {0};
        int rc[3] = {eng_manager_add_partitions(b.m, "big", 300, &err),
                     eng_manager_set_topic_overrides(b.m, "big", NULL, &ov, &err),
                     /* last: it succeeds once the create is done */
                     atomic_load(&b.done) ? ENG_EBUSY : eng_manager_delete_topic(b.m, "big", &err)};
        for (int i = 0; i < 3; i++) {
            busy += rc[i] == ENG_EBUSY;
            missing_after_busy += busy > 0 && rc[i] == ENG_ENOTOPIC;
        }
        if (rc[2] == 0)
            break;
    }
    pthread_join(th, NULL);
    assert_int_equal(b.rc, 0);
    assert_true(busy > 0);
    assert_int_equal(missing_after_busy, 0);
    eng_manager_close(b.m);
    ts_rmtree(tmp);
    free(tmp);
}

typedef struct wake_seen {
    _Atomic int calls;
    _Atomic int why;
} wake_seen;

static wake_seen g_wake;

static void record_wake(api_waiter *w, api_wake_reason why)
{
    (void)w;
    atomic_store(&g_wake.why, (int)why);
    atomic_fetch_add(&g_wake.calls, 1);
}

static void notify(eng_partition *p, int64_t hw, void *ctx)
{
    api_waiters_notify(ctx, p, hw);
}

/* The race of a long-poll or a stream with a delete: the reader's read
 * came before the delete (it found nothing new and decided to wait), the
 * delete's wake-up came before the reader parked.  Parked after it, the
 * waiter waited out its wait_ms, and an NDJSON stream (no heartbeat
 * deadline) for ever.  Here the order is forced: delete, then park. */
static void test_park_after_delete_wakes_at_once(void **state)
{
    (void)state;
    char *tmp = ts_tmpdir();
    char data[600];
    snprintf(data, sizeof data, "%s/data", tmp);
    api_waiters *ws = NULL;
    assert_int_equal(api_waiters_start(1, 16, &ws), 0);
    eng_manager_opts o = {.log_dir = data, .codec = ts_line_codec(), .on_hw = notify,
                          .on_hw_ctx = ws};
    eng_config_defaults_init(&o.defaults);
    eng_manager *m = NULL;
    eng_errdetail err = {0};
    assert_int_equal(eng_manager_open(&o, &m, &err), 0);
    assert_int_equal(eng_manager_create_topic(m, "gone", 1, NULL, NULL, 0, &err), 0);
    eng_partition *p;
    assert_int_equal(eng_manager_partition(m, "gone", 0, &p, &err), 0);
    assert_int_equal(eng_manager_delete_topic(m, "gone", &err), 0);

    atomic_store(&g_wake.calls, 0);
    /* Static: if the wake never comes, the registry still holds it after a
     * failed assertion leaves this frame. */
    static api_waiter w;
    w = (api_waiter){.p = p, .offset = eng_partition_high_watermark(p), .deadline_ms = INT64_MAX,
                     .fd = -1, .wake = record_wake};
    assert_int_equal(api_waiter_park(ws, &w), 0);
    for (int i = 0; i < 500 && atomic_load(&g_wake.calls) == 0; i++)
        sleep_us(10000);
    assert_int_equal(atomic_load(&g_wake.calls), 1);
    assert_int_equal(atomic_load(&g_wake.why), API_WAKE_DATA);
    /* What the woken reader then reads: the topic is gone (404). */
    eng_fetch f;
    assert_int_equal(eng_partition_read(p, w.offset, 1024, &f, &err), ENG_ENOTOPIC);

    api_waiters_free(ws);
    eng_partition_unref(p);
    eng_manager_close(m);
    ts_rmtree(tmp);
    free(tmp);
}

/* Runs of the delete-file job so far. */
static uint64_t delete_file_runs(eng_manager *m)
{
    eng_job_info *jobs;
    size_t n;
    assert_int_equal(eng_manager_jobs(m, &jobs, &n), 0);
    uint64_t runs = 0;
    for (size_t i = 0; i < n; i++)
        if (!strcmp(jobs[i].name, "delete-file"))
            runs = jobs[i].runs;
    free(jobs);
    return runs;
}

/* Appends 4 records to t-0 and lets retention delete the segment holding
 * them: 00000000000000000000.log.deleted, unlinked file.delete.delay.ms
 * later by the delete-file job. */
static void append_and_expire(eng_manager *m, const char *t)
{
    eng_partition *p;
    assert_int_equal(eng_manager_partition(m, t, 0, &p, NULL), 0);
    uint8_t buf[4 * (TS_VALUE_MAX + 64)];
    size_t len = ts_build_batch(buf, sizeof buf, 0, 4, T0, 100);
    eng_append_opts o = {.expected_offset = -1, .producer_batches = true};
    eng_append_result res;
    assert_int_equal(eng_partition_append(p, buf, len, &o, &res, NULL), 0);
    eng_retention_report rep;
    assert_int_equal(eng_partition_retention(p, T0 + (1LL << 40), false, &rep), 0);
    assert_int_equal(rep.n, 1);
    eng_retention_report_free(&rep);
    eng_partition_unref(p);
}

/* The delete-file job of a segment of a deleted topic ran after the topic
 * was created again, and unlinked by path: a .deleted segment of the new
 * topic with the same base offset went at once instead of after its own
 * file.delete.delay.ms (ten minutes here). */
static void test_old_delete_file_job_spares_new_topic(void **state)
{
    (void)state;
    char *tmp = ts_tmpdir();
    char data[600], gen2_file[700];
    snprintf(data, sizeof data, "%s/data", tmp);
    snprintf(gen2_file, sizeof gen2_file, "%s/t-0/00000000000000000000.log.deleted", data);
    eng_manager_opts o = {.log_dir = data, .codec = ts_line_codec()};
    eng_config_defaults_init(&o.defaults);
    eng_jobs_opts_default(&o.jobs);
    o.jobs.background_threads = 2;
    eng_manager *m = NULL;
    eng_errdetail err = {0};
    assert_int_equal(eng_manager_open(&o, &m, &err), 0);
    assert_int_equal(eng_manager_start_jobs(m), 0);
    const char *keys[] = {"file.delete.delay.ms"}, *soon[] = {"300"}, *late[] = {"600000"};

    assert_int_equal(eng_manager_create_topic(m, "t", 1, keys, soon, 1, &err), 0);
    append_and_expire(m, "t");
    assert_int_equal(eng_manager_delete_topic(m, "t", &err), 0);
    assert_int_equal(eng_manager_create_topic(m, "t", 1, keys, late, 1, &err), 0);
    append_and_expire(m, "t");
    assert_true(ts_file_size(gen2_file) >= 0);

    /* The first topic's job runs 300 ms after its retention pass. */
    for (int i = 0; i < 1000 && delete_file_runs(m) == 0; i++)
        sleep_us(10000);
    assert_int_equal(delete_file_runs(m), 1);
    assert_true(ts_file_size(gen2_file) >= 0);

    assert_true(eng_manager_close(m));
    ts_rmtree(tmp);
    free(tmp);
}

/* Descriptors this process holds on files of a deleted topic's partition
 * directories (<topic>-<p>.<uuid>-delete/...). */
static int fds_in_deleted_dirs(void)
{
    DIR *dh = opendir("/proc/self/fd");
    assert_non_null(dh);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(dh))) {
        char link[600], target[PATH_MAX];
        snprintf(link, sizeof link, "/proc/self/fd/%s", e->d_name);
        ssize_t len = readlink(link, target, sizeof target - 1);
        if (len < 0)
            continue;
        target[len] = 0;
        n += strstr(target, "-delete/") != NULL;
    }
    closedir(dh);
    return n;
}

/* A segment retention had just set aside (.deleted, waiting out
 * file.delete.delay.ms) kept its descriptor, and with it its disk space,
 * for the whole delay after its topic was deleted: ten minutes here, up to
 * forever with the config's maximum, though the directory was long gone. */
static void test_delete_releases_segments_waiting_for_delay(void **state)
{
    (void)state;
    char *tmp = ts_tmpdir();
    char data[600];
    snprintf(data, sizeof data, "%s/data", tmp);
    eng_manager_opts o = {.log_dir = data, .codec = ts_line_codec()};
    eng_config_defaults_init(&o.defaults);
    eng_jobs_opts_default(&o.jobs);
    o.jobs.background_threads = 2;
    eng_manager *m = NULL;
    eng_errdetail err = {0};
    assert_int_equal(eng_manager_open(&o, &m, &err), 0);
    assert_int_equal(eng_manager_start_jobs(m), 0);
    const char *keys[] = {"file.delete.delay.ms"}, *late[] = {"600000"};
    assert_int_equal(eng_manager_create_topic(m, "t", 1, keys, late, 1, &err), 0);
    append_and_expire(m, "t");
    assert_int_equal(eng_manager_delete_topic(m, "t", &err), 0);
    for (int i = 0; i < 500 && fds_in_deleted_dirs() > 0; i++)
        sleep_us(10000);
    assert_int_equal(fds_in_deleted_dirs(), 0);
    assert_int_equal(delete_file_runs(m), 1);
    assert_true(eng_manager_close(m));
    ts_rmtree(tmp);
    free(tmp);
}

typedef struct ckpt_job {
    eng_manager *m;
    int rc;
} ckpt_job;

static void *write_start_offsets(void *arg)
{
    ckpt_job *j = arg;
    j->rc = eng_manager_checkpoint_start_offsets(j->m);
    return NULL;
}

/* A log-start-offset-checkpoint job that listed the partitions just before
 * a delete wrote its file after the delete had rewritten it without the
 * topic: the deleted partition's log start offset was back under its name,
 * and after a crash the topic created again under that name loaded it,
 * hiding its own records below it.  The job's listing is held up here
 * (checkpoint.after_list stalls 3 s) while the delete and the create go by;
 * the crash is eng_manager_abandon (no close, no checkpoint rewrite). */
static void test_checkpoint_job_beside_delete(void **state)
{
    (void)state;
    char *tmp = ts_tmpdir();
    char data[600];
    snprintf(data, sizeof data, "%s/data", tmp);
    eng_manager *m = open_mgr(data);
    eng_errdetail err = {0};
    assert_int_equal(eng_manager_create_topic(m, "t", 1, NULL, NULL, 0, &err), 0);
    eng_partition *p;
    assert_int_equal(eng_manager_partition(m, "t", 0, &p, NULL), 0);
    uint8_t buf[4 * (TS_VALUE_MAX + 64)];
    size_t len = ts_build_batch(buf, sizeof buf, 0, 4, T0, 100);
    eng_append_opts o = {.expected_offset = -1, .producer_batches = true};
    eng_append_result res;
    assert_int_equal(eng_partition_append(p, buf, len, &o, &res, NULL), 0);
    int64_t lso;
    assert_int_equal(eng_partition_delete_records(p, 3, &lso, NULL), 0);
    eng_partition_unref(p);

    eng_fault_set("checkpoint.after_list=stall");
    ckpt_job job = {.m = m};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, write_start_offsets, &job), 0);
    sleep_us(300000); /* the job has listed t-0 and stalls */
    assert_int_equal(eng_manager_delete_topic(m, "t", &err), 0);
    assert_int_equal(eng_manager_create_topic(m, "t", 1, NULL, NULL, 0, &err), 0);
    pthread_join(th, NULL);
    eng_fault_set(NULL);
    assert_int_equal(job.rc, 0);
    assert_int_equal(eng_manager_partition(m, "t", 0, &p, NULL), 0);
    assert_int_equal(eng_partition_append(p, buf, len, &o, &res, NULL), 0);
    eng_partition_unref(p);
    eng_manager_abandon(m);

    m = open_mgr(data);
    assert_int_equal(eng_manager_partition(m, "t", 0, &p, NULL), 0);
    assert_int_equal(eng_partition_log_start_offset(p), 0);
    eng_fetch f;
    assert_int_equal(eng_partition_read(p, 0, 1 << 20, &f, &err), 0);
    assert_int_equal(ts_walk_intact(&f, 0, 100), 4);
    eng_fetch_free(&f);
    eng_partition_unref(p);
    eng_manager_close(m);
    ts_rmtree(tmp);
    free(tmp);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_delete_and_create_under_load),
        cmocka_unit_test(test_changes_during_create_are_busy),
        cmocka_unit_test(test_park_after_delete_wakes_at_once),
        cmocka_unit_test(test_old_delete_file_job_spares_new_topic),
        cmocka_unit_test(test_delete_releases_segments_waiting_for_delay),
        cmocka_unit_test(test_checkpoint_job_beside_delete),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
