/*
 * test_manager_load.c - the startup load on several threads
 * (num.recovery.threads.per.data.dir) loads what one thread loads, and a
 * failure on one of them stops the start as it did before.
 *
 * The data dir: three topics of five partitions with a little data each,
 * dropped without a clean stop (eng_manager_abandon: what kill -9 leaves),
 * then torn by hand in several partitions at once: half a batch at the end
 * of three active segments, and garbage at the end of a middle segment of a
 * partition with three (the segment after it goes).  Two byte-identical
 * copies are loaded, one on one thread and one on four; the startup
 * reports, every partition's offsets and, after a clean stop of each, every
 * file of the two dirs must be the same.  The failures (an I/O error on one
 * partition, a full disk writing one's files, running out of descriptors,
 * a stop request) must end the start with the one-thread message and leave
 * nothing allocated (the suite runs under ASan's leak check) and nothing
 * lost: the next start loads everything.  Last, the rebuild of an active
 * segment's indexes after kill -9 keeps their preallocated files as they
 * are, unless stale entries follow the rebuilt ones.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "eng_batch.h"
#include "eng_error.h"
#include "eng_fault.h"
#include "eng_fs.h"
#include "eng_manager.h"
#include "eng_partition.h"
#include "manager_fixture.h"
#include "support.h"

#include <dirent.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#define TOPICS 3
#define PARTS 5
static const char *const names[TOPICS] = {"alpha", "beta", "gamma"};

/* Fails unless every file and directory under a is under b with the same
 * bytes, and the other way round. */
static void expect_same_tree(const char *a, const char *b, bool both_ways)
{
    DIR *d = opendir(a);
    assert_non_null(d);
    struct dirent *e;
    while ((e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        char pa[1024], pb[1024];
        snprintf(pa, sizeof pa, "%s/%s", a, e->d_name);
        snprintf(pb, sizeof pb, "%s/%s", b, e->d_name);
        struct stat sa, sb;
        assert_int_equal(lstat(pa, &sa), 0);
        if (lstat(pb, &sb) != 0)
            fail_msg("%s has no counterpart %s", pa, pb);
        assert_int_equal(S_ISDIR(sa.st_mode), S_ISDIR(sb.st_mode));
        if (S_ISDIR(sa.st_mode)) {
            expect_same_tree(pa, pb, both_ways);
            continue;
        }
        uint8_t *ba, *bb;
        size_t la, lb;
        assert_int_equal(ts_read_file(pa, &ba, &la), 0);
        assert_int_equal(ts_read_file(pb, &bb, &lb), 0);
        if (la != lb || (la && memcmp(ba, bb, la)))
            fail_msg("%s (%zu bytes) and %s (%zu bytes) differ", pa, la, pb, lb);
        free(ba);
        free(bb);
    }
    closedir(d);
    if (both_ways)
        expect_same_tree(b, a, false);
}

/* Appends bytes at the end of a partition's segment file. */
static void tear(fixture *f, const char *topic, int id, int64_t base, const void *bytes, size_t n)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s-%d/%020" PRId64 ".log", f->data, topic, id, base);
    int fd = open(path, O_WRONLY | O_APPEND);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, bytes, n), (ssize_t)n);
    close(fd);
}

/* The data dir of the file's comment, left as kill -9 leaves it. */
static void build_torn_dir(fixture *f)
{
    /* Small indexes: the rebuilt ones are compared byte for byte. */
    const char *k[] = {"segment.index.bytes", "index.interval.bytes"}, *v[] = {"4096", "100"};
    eng_manager *m = open_mgr(f);
    for (int t = 0; t < TOPICS; t++) {
        eng_errdetail err = {0};
        assert_int_equal(eng_manager_create_topic(m, names[t], PARTS, k, v, 2, &err), 0);
        for (int p = 0; p < PARTS; p++)
            append_records(m, names[t], p, 3 + t * PARTS + p);
    }
    /* alpha-0: three segments, the middle one to be torn. */
    eng_partition *p;
    int64_t bases[3] = {0};
    assert_int_equal(eng_manager_partition(m, "alpha", 0, &p, NULL), 0);
    for (int i = 1; i < 3; i++) {
        assert_int_equal(eng_partition_roll(p, &bases[i]), 0);
        eng_partition_unref(p);
        append_records(m, "alpha", 0, 4);
        assert_int_equal(eng_manager_partition(m, "alpha", 0, &p, NULL), 0);
    }
    eng_partition_unref(p);
    eng_manager_abandon(m);

    uint8_t batch[256];
    size_t len = ts_build_batch(batch, sizeof batch, 0, 2, 1700000000000LL, 40);
    assert_true(len > 61);
    tear(f, "alpha", 3, 0, batch, len / 2);      /* half a batch */
    tear(f, "beta", 1, 0, batch, len - 1);       /* all but its last byte */
    tear(f, "gamma", 4, 0, batch, 20);           /* part of a header */
    static const uint8_t junk[100] = {0x55, 0x55, 0x55};
    tear(f, "alpha", 0, bases[1], junk, sizeof junk); /* the segment after it goes */
}

typedef struct loaded {
    eng_startup_report r;
    int64_t leo[TOPICS][PARTS], lso[TOPICS][PARTS], rp[TOPICS][PARTS];
} loaded;

static eng_manager *load_with(fixture *f, const char *dir, unsigned threads, loaded *out)
{
    eng_manager_opts o = f->opts;
    o.log_dir = dir;
    o.recovery_threads = threads;
    eng_manager *m = NULL;
    eng_errdetail err = {0};
    int rc = eng_manager_open(&o, &m, &err);
    if (rc)
        fail_msg("eng_manager_open (%u threads): %s (%s)", threads, eng_strerror(rc), err.message);
    memset(out, 0, sizeof *out);
    eng_manager_startup_report(m, &out->r);
    for (int t = 0; t < TOPICS; t++)
        for (int i = 0; i < PARTS; i++) {
            eng_partition *p;
            assert_int_equal(eng_manager_partition(m, names[t], i, &p, NULL), 0);
            out->leo[t][i] = eng_partition_log_end_offset(p);
            out->lso[t][i] = eng_partition_log_start_offset(p);
            out->rp[t][i] = eng_partition_recovery_point(p);
            eng_partition_unref(p);
        }
    return m;
}

static int count_lines(fixture *f, const char *needle)
{
    int n = 0;
    pthread_mutex_lock(&f->mu);
    for (const char *s = f->log; (s = strstr(s, needle)); s += strlen(needle))
        n++;
    pthread_mutex_unlock(&f->mu);
    return n;
}

static void test_threads_load_the_same(void **state)
{
    fixture *f = *state;
    build_torn_dir(f);
    char copy[600];
    snprintf(copy, sizeof copy, "%s/copy", f->tmp);
    assert_int_equal(ts_copy_tree(f->data, copy), 0);

    loaded one, four;
    f->log[0] = 0;
    eng_manager *m1 = load_with(f, f->data, 1, &one);
    int truncated_one = count_lines(f, "bytes dropped");
    int deleted_one = count_lines(f, "after a truncation");
    f->log[0] = 0;
    eng_manager *m4 = load_with(f, copy, 4, &four);
    assert_int_equal(count_lines(f, "bytes dropped"), truncated_one);
    assert_int_equal(count_lines(f, "after a truncation"), deleted_one);

    /* What one thread found: every partition recovered, four torn tails
     * cut, the segment after the torn middle one deleted. */
    assert_false(one.r.clean_shutdown);
    assert_int_equal(one.r.topics, TOPICS);
    assert_int_equal(one.r.partitions, TOPICS * PARTS);
    assert_int_equal(one.r.segments, TOPICS * PARTS + 1);
    assert_int_equal(one.r.segments_recovered, TOPICS * PARTS + 1);
    assert_int_equal(truncated_one, 4);
    assert_int_equal(deleted_one, 1);
    assert_true(one.r.bytes_truncated > 100);

    assert_int_equal(four.r.clean_shutdown, one.r.clean_shutdown);
    assert_int_equal(four.r.topics, one.r.topics);
    assert_int_equal(four.r.partitions, one.r.partitions);
    assert_int_equal(four.r.segments, one.r.segments);
    assert_int_equal(four.r.segments_recovered, one.r.segments_recovered);
    assert_int_equal(four.r.bytes_truncated, one.r.bytes_truncated);
    for (int t = 0; t < TOPICS; t++)
        for (int i = 0; i < PARTS; i++) {
            assert_int_equal(four.leo[t][i], one.leo[t][i]);
            assert_int_equal(four.lso[t][i], one.lso[t][i]);
            assert_int_equal(four.rp[t][i], one.rp[t][i]);
        }
    /* The torn tails are gone, the records before them kept. */
    assert_int_equal(one.leo[0][3], 3 + 3);
    assert_int_equal(one.leo[1][1], 3 + PARTS + 1);
    assert_int_equal(one.leo[2][4], 3 + 2 * PARTS + 4);
    assert_int_equal(one.leo[0][0], 3 + 4);
    assert_true(eng_manager_close(m1));
    assert_true(eng_manager_close(m4));
    expect_same_tree(f->data, copy, true);
}

/* Loads f->data with the fault spec and threads; returns the error. */
static int load_failing(fixture *f, const char *faults, unsigned threads, char *msg, size_t len)
{
    eng_manager_opts o = f->opts;
    o.recovery_threads = threads;
    eng_manager *m = NULL;
    eng_errdetail err = {0};
    eng_fault_set(faults);
    int rc = eng_manager_open(&o, &m, &err);
    eng_fault_set(NULL);
    if (!rc)
        eng_manager_abandon(m);
    snprintf(msg, len, "%s", err.message);
    return rc;
}

static void expect_everything(fixture *f)
{
    loaded l;
    eng_manager *m = load_with(f, f->data, 4, &l);
    assert_int_equal(l.r.partitions, TOPICS * PARTS);
    assert_int_equal(l.leo[0][3], 3 + 3);
    assert_int_equal(l.leo[2][4], 3 + 2 * PARTS + 4);
    assert_true(eng_manager_close(m));
}

static void test_a_failing_partition_stops_the_start(void **state)
{
    fixture *f = *state;
    build_torn_dir(f);
    static const char *const faults[] = {"partition.open=eio@6", "partition.files=enospc@4"};
    for (size_t i = 0; i < sizeof faults / sizeof *faults; i++) {
        char one[512], four[512];
        uint32_t done1, done4, total;
        int rc1 = load_failing(f, faults[i], 1, one, sizeof one);
        eng_manager_load_progress(&done1, &total);
        int rc4 = load_failing(f, faults[i], 4, four, sizeof four);
        eng_manager_load_progress(&done4, &total);
        assert_int_equal(rc1, i == 0 ? -EIO : -ENOSPC);
        assert_int_equal(rc4, rc1);
        assert_string_equal(four, one);
        assert_non_null(strstr(four, "loading "));
        assert_true(logged(f, "failed to load"));
        assert_int_equal(total, TOPICS * PARTS);
        /* One thread takes no partition after the failure: at most the
         * five before it loaded.  Four stop taking them too, but how many
         * the other three finish between the failing open and the failure
         * being recorded depends on the scheduler (a loaded machine once
         * let a fourth one through): only "not all of them" is certain. */
        assert_true(done1 <= 5);
        assert_true(done4 < TOPICS * PARTS);
    }
    /* Out of descriptors on several threads: the same advice. */
    struct rlimit saved;
    ts_fd_limit(12, &saved);
    char msg[512];
    int rc = load_failing(f, NULL, 4, msg, sizeof msg);
    ts_fd_limit_restore(&saved);
    assert_int_equal(rc, -EMFILE);
    assert_non_null(strstr(msg, "this process may open"));
    /* Nothing was lost or left half done. */
    expect_everything(f);
}

static eng_manager *g_stopping;
static _Atomic int g_opens, g_stop_at;

/* Asks for a stop as the g_stop_at-th partition starts to load. */
static void request_stop(void *ctx)
{
    (void)ctx;
    if (atomic_fetch_add(&g_opens, 1) + 1 == atomic_load(&g_stop_at))
        eng_manager_request_stop(g_stopping);
}

/* A stop request while partitions load ends the load with ENG_ESHUTDOWN
 * and the one-thread message, on any number of threads, even when it comes
 * as the last partition loads (no thread has an item left to take, so none
 * of them sees it there). */
static void test_stop_request_while_loading(void **state)
{
    fixture *f = *state;
    build_torn_dir(f);
    static const struct {
        unsigned threads;
        int stop_at;
    } runs[] = {{1, 1}, {4, 1}, {4, 7}, {64, 3}, {1, TOPICS * PARTS}, {4, TOPICS * PARTS}};
    for (size_t i = 0; i < sizeof runs / sizeof *runs; i++) {
        eng_manager_opts o = f->opts;
        o.recovery_threads = runs[i].threads;
        eng_errdetail err = {0};
        assert_int_equal(eng_manager_new(&o, &g_stopping, &err), 0);
        atomic_store(&g_opens, 0);
        atomic_store(&g_stop_at, runs[i].stop_at);
        eng_fault_hook("partition.open", request_stop, NULL);
        int rc = eng_manager_load(g_stopping, &err);
        eng_fault_hook(NULL, NULL, NULL);
        assert_int_equal(rc, ENG_ESHUTDOWN);
        char want[600];
        snprintf(want, sizeof want, "loading %s stopped by a stop request", f->data);
        assert_string_equal(err.message, want);
        eng_manager_abandon(g_stopping);
    }
    expect_everything(f);
}

/* The one segment of partition id of "idx". */
static eng_segment_info segment_of(eng_manager *m, int32_t id)
{
    eng_partition *p;
    assert_int_equal(eng_manager_partition(m, "idx", id, &p, NULL), 0);
    eng_segment_info *si;
    size_t n;
    assert_int_equal(eng_partition_segments(p, &si, &n), 0);
    assert_int_equal(n, 1);
    eng_segment_info one = si[0];
    free(si);
    eng_partition_unref(p);
    return one;
}

/* After kill -9 the active segment's indexes are rebuilt in place: they
 * keep their preallocated size (a trim, only to grow them back, cost four
 * ftruncates a partition, most of a start after kill -9), unless entries
 * the rebuild did not write again follow its last one (a batch that was
 * indexed is gone): those are cut, or the next open would count them. */
static void test_recovery_keeps_active_indexes_preallocated(void **state)
{
    fixture *f = *state;
    const char *k[] = {"segment.index.bytes", "index.interval.bytes"}, *v[] = {"4096", "100"};
    eng_manager *m = open_mgr(f);
    eng_errdetail err = {0};
    assert_int_equal(eng_manager_create_topic(m, "idx", 2, k, v, 2, &err), 0);
    append_records(m, "idx", 0, 10);
    append_records(m, "idx", 1, 10);
    eng_segment_info before = segment_of(m, 1);
    assert_int_equal(before.index_bytes, 4096);
    assert_true(before.index_entries >= 3);
    eng_manager_abandon(m);

    /* idx-1: a flipped bit in its sixth batch, after indexed ones. */
    char path[1024];
    snprintf(path, sizeof path, "%s/idx-1/%020d.log", f->data, 0);
    long long size = ts_file_size(path);
    assert_true(size > 0 && size % 10 == 0);
    int fd = open(path, O_RDWR);
    assert_true(fd >= 0);
    uint8_t byte;
    off_t at = (off_t)(size / 10 * 5 + size / 20);
    assert_int_equal(pread(fd, &byte, 1, at), 1);
    byte ^= 0x10;
    assert_int_equal(pwrite(fd, &byte, 1, at), 1);
    close(fd);

    for (int round = 0; round < 2; round++) {
        m = open_mgr(f);
        eng_startup_report r;
        eng_manager_startup_report(m, &r);
        assert_false(r.clean_shutdown);
        assert_int_equal(r.segments_recovered, 2);
        eng_segment_info s0 = segment_of(m, 0), s1 = segment_of(m, 1);
        assert_int_equal(s0.next_offset, 10);
        assert_int_equal(s0.index_entries, before.index_entries);
        assert_int_equal(s0.index_bytes, 4096);
        assert_int_equal(s0.timeindex_bytes, 4092);
        assert_int_equal(s1.next_offset, 5);
        assert_true(s1.index_entries < before.index_entries);
        if (round == 0) {
            /* Cut to the entries rebuilt; grown again by the next one. */
            assert_int_equal(s1.index_bytes, (uint64_t)s1.index_entries * 8);
        }
        eng_manager_abandon(m); /* a second crash: the same entries again */
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_threads_load_the_same, setup, teardown),
        cmocka_unit_test_setup_teardown(test_a_failing_partition_stops_the_start, setup, teardown),
        cmocka_unit_test_setup_teardown(test_stop_request_while_loading, setup, teardown),
        cmocka_unit_test_setup_teardown(test_recovery_keeps_active_indexes_preallocated, setup,
                                        teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
