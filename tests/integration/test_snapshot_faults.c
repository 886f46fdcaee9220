/*
 * test_snapshot_faults.c - snapshots (README "Snapshots") where the file
 * system or the process lets them down, through the real server with
 * LOGSTORE_FAULT (engine/eng_fault.h):
 *
 *   - links refused (snapshot.link=exdev or eperm, every time, as on a file
 *     system that links nothing): every file is copied, the snapshot holds
 *     exactly the partition's records and bytes, shares no inode with the
 *     data dir, and a server started on a copy of it reads them all;
 *   - a preallocated topic (preallocate=true, links refused too): the
 *     active .log holds zeros past its data, and the snapshot takes only
 *     the data;
 *   - a full disk mid-snapshot (snapshot.copy=enospc): 507, nothing listed,
 *     nothing left under snapshots/, and the same name works next time;
 *   - a crash mid-snapshot (snapshot.copy=exit) leaves
 *     snapshots/.partial-<name>: never listed, and the next snapshot of that
 *     name replaces it;
 *   - a data dir holding only snapshots/ is still a first start, with no
 *     topic, partition or log dir entry taken from the snapshots.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "eng_fault.h"
#include "eng_fs.h"
#include "harness.h"
#include "snapshot_fixture.h"

#include <dirent.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define NRECORDS 60

static int setup(void **state)
{
    (void)state;
    snap_fixture_reset();
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    snap_fixture_cleanup();
    return 0;
}

static void post_ok(ls_server *s, const char *path, const char *body)
{
    ls_resp r;
    assert_int_equal(ls_send_json(s, "POST", path, body, &r), 0);
    if (r.status != 200)
        fprintf(stderr, "# POST %s: %ld %s\n", path, r.status, r.body);
    assert_int_equal(r.status, 200);
    ls_resp_free(&r);
}

/* Topic t, one partition: NRECORDS records valued "v-<offset>", rolled every
 * 20, so two sealed segments and an active one holding the last 20. */
static void load(ls_server *s, const char *configs)
{
    assert_int_equal(ls_create_topic(s, "t", 1, configs), 201);
    for (int i = 0; i < NRECORDS; i++) {
        char body[128];
        snprintf(body, sizeof body, "{\"records\":[{\"key\":\"k\",\"value\":\"v-%d\"}]}", i);
        assert_int_equal(ls_append_json(s, "t", 0, body), 200);
        if (i % 20 == 19 && i + 1 < NRECORDS)
            post_ok(s, "/v1/topics/t/partitions/0/segments:roll", "{}");
    }
}

/* Every record of t-0 is read back, valued as load() wrote it. */
static void check_records(ls_server *s)
{
    assert_int_equal(ls_partition_field(s, "t", 0, "log_start_offset"), 0);
    assert_int_equal(ls_partition_field(s, "t", 0, "high_watermark"), NRECORDS);
    long long next = 0;
    while (next < NRECORDS) {
        char path[128];
        snprintf(path, sizeof path, "/v1/topics/t/partitions/0/records?offset=%lld&max_records=500", next);
        ls_resp r;
        assert_int_equal(ls_get(s, path, &r), 0);
        assert_int_equal(r.status, 200);
        size_t i;
        json_t *rec;
        json_array_foreach(ls_jget(&r, "records"), i, rec) {
            char want[32];
            long long off = (long long)json_integer_value(json_object_get(rec, "offset"));
            assert_int_equal(off, next);
            snprintf(want, sizeof want, "v-%lld", off);
            assert_string_equal(json_string_value(json_object_get(rec, "value")), want);
            next++;
        }
        long long nn = ls_jint(&r, "next_offset");
        ls_resp_free(&r);
        assert_int_equal(nn, next);
    }
}

static long take_snapshot(ls_server *s, const char *name, ls_resp *out)
{
    char body[128];
    snprintf(body, sizeof body, "{\"name\":\"%s\"}", name);
    if (ls_send_json(s, "POST", "/v1/admin/snapshots", body, out))
        return -1;
    return out->status;
}

/* The names in dir, joined by spaces, sorted; "" when empty or missing. */
static void listing(const char *dir, char *buf, size_t len)
{
    buf[0] = 0;
    struct dirent **v;
    int n = scandir(dir, &v, NULL, alphasort);
    for (int i = 0; i < n; i++) {
        if (strcmp(v[i]->d_name, ".") && strcmp(v[i]->d_name, ".."))
            snprintf(buf + strlen(buf), len - strlen(buf), "%s%s", buf[0] ? " " : "", v[i]->d_name);
        free(v[i]);
    }
    if (n >= 0)
        free(v);
}

static long long snapshot_count(ls_server *s)
{
    ls_resp r;
    assert_int_equal(ls_get(s, "/v1/admin/snapshots", &r), 0);
    assert_int_equal(r.status, 200);
    long long n = (long long)json_array_size(ls_jget(&r, "snapshots"));
    ls_resp_free(&r);
    return n;
}

static long long snapshot_bytes(ls_server *s)
{
    ls_resp r;
    assert_int_equal(ls_get(s, "/v1/log-dirs", &r), 0);
    assert_int_equal(r.status, 200);
    long long v = ls_jint(&r, "log_dirs.0.snapshot_bytes");
    ls_resp_free(&r);
    return v;
}

/* A server started on a copy of the snapshot (README's restore) reads every
 * record back. */
static void restore_and_check(ls_server *s, const char *name)
{
    char cmd[8192], out[256], copy[2048];
    snprintf(copy, sizeof copy, "%s.copy", s->dir);
    snprintf(cmd, sizeof cmd, "cp -a '%s/snapshots/%s' '%s'", s->dir, name, copy);
    assert_int_equal(ls_run_cmd(cmd, out, sizeof out), 0);
    if (ls_start_dir(&g_restored, copy, settings, true))
        fail_msg("a server on the copy did not start");
    check_records(&g_restored);
    assert_int_equal(ls_stop(&g_restored), 0);
}

/* Each segment .log of the snapshot's t-0 equals the data dir's (the active
 * one: its data, the first `active_bytes`), and no file shares an inode
 * with the data dir. */
static void check_copied_files(ls_server *s, const char *name, long long active_bytes)
{
    char snap[2048], data[2048];
    snprintf(snap, sizeof snap, "%s/snapshots/%s/t-0", s->dir, name);
    snprintf(data, sizeof data, "%s/t-0", s->dir);
    struct dirent **v;
    int n = scandir(snap, &v, NULL, alphasort);
    assert_true(n > 2);
    int logs = 0;
    for (int i = 0; i < n; i++) {
        char a[4096], b[4096];
        snprintf(a, sizeof a, "%s/%s", snap, v[i]->d_name);
        snprintf(b, sizeof b, "%s/%s", data, v[i]->d_name);
        struct stat st;
        assert_int_equal(lstat(a, &st), 0);
        if (S_ISREG(st.st_mode)) {
            if (st.st_nlink != 1)
                fail_msg("%s is linked (%lu links) although links were refused", a,
                         (unsigned long)st.st_nlink);
        }
        size_t len = strlen(v[i]->d_name);
        if (len > 4 && !strcmp(v[i]->d_name + len - 4, ".log")) {
            logs++;
            size_t la, lb;
            char *fa = ls_read_file(a, &la), *fb = ls_read_file(b, &lb);
            assert_non_null(fa);
            assert_non_null(fb);
            bool active = !strcmp(v[i]->d_name, "00000000000000000040.log");
            assert_int_equal(la, active ? (size_t)active_bytes : lb);
            assert_true(lb >= la);
            assert_memory_equal(fa, fb, la);
            free(fa);
            free(fb);
        }
        free(v[i]);
    }
    free(v);
    assert_int_equal(logs, 3);
}

static long long active_segment_bytes(ls_server *s)
{
    ls_resp r;
    assert_int_equal(ls_get(s, "/v1/topics/t/partitions/0/segments", &r), 0);
    assert_int_equal(r.status, 200);
    assert_int_equal(ls_jint(&r, "segments.2.base_offset"), 40);
    long long v = ls_jint(&r, "segments.2.size_bytes");
    ls_resp_free(&r);
    return v;
}

static void links_refused(const char *fault)
{
    ls_server *s = &g_src;
    start_with_fault(s, fault);
    load(s, NULL);
    ls_resp r;
    assert_int_equal(take_snapshot(s, "copied", &r), 201);
    long long size = ls_jint(&r, "size_bytes"), unshared = ls_jint(&r, "unshared_bytes");
    assert_int_equal(ls_jint(&r, "topics"), 1);
    assert_int_equal(ls_jint(&r, "partitions"), 1);
    ls_resp_free(&r);
    assert_true(size > 0);
    assert_int_equal(unshared, size); /* nothing linked: it all counts */
    assert_int_equal(snapshot_bytes(s), size);
    check_copied_files(s, "copied", active_segment_bytes(s));
    restore_and_check(s, "copied");
}

static void test_links_refused_exdev(void **state)
{
    (void)state;
    links_refused("snapshot.link=exdev@*");
}

static void test_links_refused_eperm(void **state)
{
    (void)state;
    links_refused("snapshot.link=eperm@*");
}

/* preallocate=true: the active .log is segment.bytes long, zeros past its
 * data; the snapshot's copy holds the data only.  Links refused, so the
 * sealed segments (cut to their data at the roll) are copied too. */
static void test_preallocated_topic(void **state)
{
    (void)state;
    ls_server *s = &g_src;
    start_with_fault(s, "snapshot.link=exdev@*");
    load(s, "{\"preallocate\":\"true\",\"segment.bytes\":\"1048576\"}");
    long long data = active_segment_bytes(s);
    char active[2048];
    snprintf(active, sizeof active, "%s/t-0/00000000000000000040.log", s->dir);
    assert_true(ls_file_size(active) > data); /* the zeros are there to be left out */
    ls_resp r;
    assert_int_equal(take_snapshot(s, "prealloc", &r), 201);
    ls_resp_free(&r);
    check_copied_files(s, "prealloc", data);
    restore_and_check(s, "prealloc");
}

/* A full disk while the snapshot's files are copied: 507, and nothing of it
 * stays, listed or not; the next try of the same name is whole. */
static void test_disk_full_mid_snapshot(void **state)
{
    (void)state;
    ls_server *s = &g_src;
    start_with_fault(s, "snapshot.copy=enospc@3");
    load(s, NULL);
    assert_int_equal(ls_expect_error(s, "POST", "/v1/admin/snapshots", "{\"name\":\"full\"}", 507,
                                     "disk_full"), 0);
    char snaps[2048], names[512];
    snprintf(snaps, sizeof snaps, "%s/snapshots", s->dir);
    listing(snaps, names, sizeof names);
    assert_string_equal(names, "");
    assert_int_equal(snapshot_count(s), 0);
    assert_int_equal(snapshot_bytes(s), 0);
    ls_resp r;
    assert_int_equal(take_snapshot(s, "full", &r), 201);
    ls_resp_free(&r);
    listing(snaps, names, sizeof names);
    assert_string_equal(names, "full");
    restore_and_check(s, "full");
}

/* A failure inside a snapshot's build that happens to be EEXIST (a link
 * meeting a file it did not expect) is a server error, not the client's
 * name: it used to answer 409 snapshot_exists for a name that did not
 * exist, and the name is free again at once. */
static void test_inner_eexist_is_no_name_clash(void **state)
{
    (void)state;
    ls_server *s = &g_src;
    start_with_fault(s, "snapshot.link=eexist");
    load(s, NULL);
    assert_int_equal(ls_expect_error(s, "POST", "/v1/admin/snapshots", "{\"name\":\"odd\"}", 500,
                                     "internal_error"),
                     0);
    assert_int_equal(snapshot_count(s), 0);
    ls_resp r;
    assert_int_equal(take_snapshot(s, "odd", &r), 201); /* the fault fired once */
    ls_resp_free(&r);
    assert_int_equal(ls_expect_error(s, "POST", "/v1/admin/snapshots", "{\"name\":\"odd\"}", 409,
                                     "snapshot_exists"),
                     0);
}

/* Waits for the server to end on its own; its exit status, -1 if it did not. */
static int wait_exit(ls_server *s)
{
    for (int i = 0; i < 2400; i++) {
        int st;
        if (waitpid(s->pid, &st, WNOHANG) == s->pid) {
            s->pid = 0;
            return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        }
        struct timespec ts = {0, 25000000};
        nanosleep(&ts, NULL);
    }
    return -1;
}

/* A crash mid-snapshot leaves snapshots/.partial-<name>: a restart lists
 * nothing, and a snapshot of the same name replaces the leftover. */
static void test_crash_mid_snapshot(void **state)
{
    (void)state;
    ls_server *s = &g_src;
    start_with_fault(s, "snapshot.copy=exit@3");
    load(s, NULL);
    ls_resp r;
    assert_int_equal(take_snapshot(s, "nightly", &r), -1); /* the server dies in it */
    assert_int_equal(wait_exit(s), ENG_FAULT_EXIT_STATUS);
    char snaps[2048], names[512];
    snprintf(snaps, sizeof snaps, "%s/snapshots", s->dir);
    listing(snaps, names, sizeof names);
    assert_string_equal(names, ".partial-nightly");
    assert_int_equal(ls_restart(s, settings), 0);
    assert_int_equal(snapshot_count(s), 0);
    assert_int_equal(ls_expect_error(s, "DELETE", "/v1/admin/snapshots/.partial-nightly", NULL, 422,
                                     "invalid_snapshot_name"), 0);
    assert_int_equal(take_snapshot(s, "nightly", &r), 201);
    ls_resp_free(&r);
    listing(snaps, names, sizeof names);
    assert_string_equal(names, "nightly");
    assert_int_equal(snapshot_count(s), 1);
    restore_and_check(s, "nightly");
}

/* snapshots/ is not data the server loads: a data dir holding only it (a
 * topic's snapshot included) starts as a first start with no topic. */
static void test_only_snapshots_is_first_start(void **state)
{
    (void)state;
    ls_server *s = &g_src;
    start_with_fault(s, NULL);
    load(s, NULL);
    ls_resp r;
    assert_int_equal(take_snapshot(s, "kept", &r), 201);
    ls_resp_free(&r);
    assert_int_equal(ls_stop(s), 0);
    /* Everything but snapshots/ goes. */
    struct dirent **v;
    int n = scandir(s->dir, &v, NULL, alphasort);
    assert_true(n > 0);
    for (int i = 0; i < n; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", s->dir, v[i]->d_name);
        if (strcmp(v[i]->d_name, ".") && strcmp(v[i]->d_name, "..") && strcmp(v[i]->d_name, "snapshots"))
            assert_int_equal(eng_fs_remove_tree(path), 0);
        free(v[i]);
    }
    free(v);
    assert_int_equal(ls_restart(s, settings), 0);
    assert_int_equal(ls_get(s, "/v1/info", &r), 0);
    assert_int_equal(r.status, 200);
    assert_true(json_is_true(ls_jget(&r, "startup.first_start")));
    assert_int_equal(ls_jint(&r, "startup.topics"), 0);
    assert_int_equal(ls_jint(&r, "startup.partitions"), 0);
    ls_resp_free(&r);
    assert_int_equal(ls_get(s, "/v1/log-dirs", &r), 0);
    assert_int_equal(json_array_size(ls_jget(&r, "log_dirs.0.topics")), 0);
    ls_resp_free(&r);
    assert_int_equal(ls_get(s, "/v1/topics", &r), 0);
    assert_int_equal(json_array_size(ls_jget(&r, "topics")), 0);
    ls_resp_free(&r);
    assert_int_equal(snapshot_count(s), 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_links_refused_exdev, setup, teardown),
        cmocka_unit_test_setup_teardown(test_links_refused_eperm, setup, teardown),
        cmocka_unit_test_setup_teardown(test_preallocated_topic, setup, teardown),
        cmocka_unit_test_setup_teardown(test_disk_full_mid_snapshot, setup, teardown),
        cmocka_unit_test_setup_teardown(test_inner_eexist_is_no_name_clash, setup, teardown),
        cmocka_unit_test_setup_teardown(test_crash_mid_snapshot, setup, teardown),
        cmocka_unit_test_setup_teardown(test_only_snapshots_is_first_start, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
