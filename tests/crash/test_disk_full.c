/*
 * test_disk_full.c - the real server on a file system that really fills,
 * as a user whose disk fills sees it (the fault-point suites only inject
 * ENOSPC at chosen calls):
 *
 *   appends on a full tmpfs  JSON, binary and flush.messages=1 appends get
 *                           507 disk_full, nothing of them on disk, the high
 *                           watermark unmoved; reads, listings, readiness
 *                           and /metrics answer; a topic create is refused
 *                           whole; records:delete + retention:run free room
 *                           after file.delete.delay.ms and the next append
 *                           takes the offset the refused one would have;
 *                           a topic delete frees its room (its directories
 *                           go in the background, moments later)
 *   start on a full ext4    after kill -9, with the disk full: the active
 *                           segment's indexes are rebuilt in place (1 KiB
 *                           blocks: a page of the index only partly
 *                           allocated) and a sealed segment's lost .index
 *                           cannot be rebuilt at all; the server must
 *                           still start, or space cannot be freed through
 *                           its API
 *
 * Each mounts a file system of its own, so it runs as root only (and, for
 * ext4, with loop devices and mkfs.ext4); elsewhere it says why it skipped.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "faults_fixture.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>

typedef struct fs_env {
    char base[64];  /* temp dir: the image, the mount point, the server log */
    char mnt[128];  /* base/mnt: the data dir itself (its log is base/mnt.log) */
    bool mounted;
    ls_server s;
} fs_env;

static fs_env E;

static int fs_setup(void **state)
{
    memset(&E, 0, sizeof E);
    snprintf(E.base, sizeof E.base, "/tmp/logstore-diskfull-XXXXXX");
    if (!mkdtemp(E.base))
        return -1;
    snprintf(E.mnt, sizeof E.mnt, "%s/mnt", E.base);
    return setup(state);
}

static int fs_teardown(void **state)
{
    teardown(state); /* the server, if a failed assertion left it running */
    char cmd[400];
    if (E.mounted) {
        snprintf(cmd, sizeof cmd, "umount '%s' 2>/dev/null || umount -l '%s'", E.mnt, E.mnt);
        if (system(cmd) != 0)
            fprintf(stderr, "# could not unmount %s\n", E.mnt);
    }
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", E.base);
    if (system(cmd) != 0)
        fprintf(stderr, "# could not remove %s\n", E.base);
    return 0;
}

/* Mounts tmpfs of `size` (mkfs NULL) or an image made by mkfs on a loop
 * device at E.mnt; false, saying why, where that cannot be done. */
static bool mount_fs(const char *mkfs, const char *size)
{
    char cmd[800];
    if (geteuid() != 0) {
        fprintf(stderr, "# skipped: mounting a file system needs root\n");
        return false;
    }
    if (mkdir(E.mnt, 0755) != 0)
        return false;
    if (!mkfs)
        snprintf(cmd, sizeof cmd, "mount -t tmpfs -o size=%s tmpfs '%s' >/dev/null 2>&1", size,
                 E.mnt);
    else
        snprintf(cmd, sizeof cmd,
                 "truncate -s %s '%s/img' && %s '%s/img' >/dev/null 2>&1 && "
                 "mount -o loop '%s/img' '%s' >/dev/null 2>&1",
                 size, E.base, mkfs, E.base, E.base, E.mnt);
    if (system(cmd) != 0) {
        fprintf(stderr, "# skipped: could not make and mount a file system (%s)\n",
                mkfs ? mkfs : "tmpfs");
        return false;
    }
    E.mounted = true;
    return true;
}

static void start_on_mount(const char *const *extra)
{
    memset(&E.s, 0, sizeof E.s);
    g_live = &E.s;
    if (ls_start_dir(&E.s, E.mnt, extra, true))
        fail_msg("the server did not start on %s (log %s)", E.mnt, E.s.log_path);
}

/* Writes path until the file system has no room left. */
static void fill_with_file(const char *path)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND, 0644);
    assert_true(fd >= 0);
    static char block[4096];
    memset(block, 0x5a, sizeof block);
    while (write(fd, block, sizeof block) > 0)
        ;
    assert_int_equal(errno, ENOSPC);
    /* The last pages' worth, byte-sized: tmpfs allocates by page. */
    while (write(fd, block, 1) > 0)
        ;
    close(fd);
}

/* One record of about 60 KB (not in the model); the status. */
static long append_big(const char *topic, int i)
{
    static char body[61000];
    int n = snprintf(body, sizeof body, "{\"records\":[{\"key\":\"big-%d\",\"value\":\"", i);
    memset(body + n, 'v', 60000);
    snprintf(body + n + 60000, sizeof body - (size_t)n - 60000, "\"}]}");
    char path[128];
    snprintf(path, sizeof path, "/v1/topics/%s/partitions/0/records", topic);
    ls_resp r;
    if (ls_post(&E.s, path, body, &r))
        return 0;
    long st = r.status;
    ls_resp_free(&r);
    return st;
}

/* Appends big records, then model records, until the disk refuses; checks
 * that refusal is 507 disk_full. */
static void fill_topic(const char *topic)
{
    long st = 200;
    for (int i = 0; i < 10000 && st == 200; i++)
        st = append_big(topic, i);
    assert_int_equal(st, 507);
    /* What is left is smaller than a big record: fill it to the last byte. */
    ls_resp r;
    for (int i = 0; i < 10000; i++) {
        st = append(&E.s, topic, 1, "fill", &r);
        if (st != 200)
            break;
        ls_resp_free(&r);
    }
    CHECK_ERR(r, 507, "disk_full");
    ls_resp_free(&r);
}

/* One small record to d, outside the model (which is t's); the answer. */
static long append_d(ls_resp *out)
{
    ls_resp r;
    assert_int_equal(ls_post(&E.s, "/v1/topics/d/partitions/0/records",
                             "{\"records\":[{\"key\":\"k\",\"value\":\"durable\"}]}", &r),
                     0);
    long st = r.status;
    if (out)
        *out = r;
    else
        ls_resp_free(&r);
    return st;
}

static long get_status(const char *path)
{
    ls_resp r;
    assert_int_equal(ls_get(&E.s, path, &r), 0);
    long st = r.status;
    ls_resp_free(&r);
    return st;
}

/* A stored batch as a binary append sends it: the raw read of offset 0. */
static void *first_batch(const char *topic, size_t *len)
{
    char path[160];
    snprintf(path, sizeof path, "/v1/topics/%s/partitions/0/records?offset=0&max_bytes=1", topic);
    const char *h[] = {"Accept: application/octet-stream", NULL};
    ls_resp r;
    assert_int_equal(ls_http(&E.s, "GET", path, NULL, NULL, 0, h, &r), 0);
    assert_int_equal(r.status, 200);
    assert_true(r.len > 61);
    void *b = malloc(r.len);
    assert_non_null(b);
    memcpy(b, r.body, r.len);
    *len = r.len;
    ls_resp_free(&r);
    return b;
}

static void test_appends_on_full_tmpfs(void **state)
{
    (void)state;
    if (!mount_fs(NULL, "16m"))
        return;
    start_on_mount(NO_CLEANER);
    assert_int_equal(ls_create_topic(&E.s, "t", 1,
                                     "{\"segment.bytes\":\"1048576\",\"file.delete.delay.ms\":\"500\"}"),
                     201);
    assert_int_equal(ls_create_topic(&E.s, "d", 1, DURABLE), 201);
    assert_int_equal(append_d(NULL), 200);
    assert_int_equal(append_d(NULL), 200);
    fill_topic("t");
    long long hw = part_field(&E.s, "t", "high_watermark");
    assert_int_equal(hw, part_field(&E.s, "t", "log_end_offset"));

    /* Every kind of append is refused whole, and nothing moves. */
    ls_resp r;
    assert_int_equal(append_d(&r), 507);
    CHECK_ERR(r, 507, "disk_full");
    ls_resp_free(&r);
    size_t blen;
    void *batch = first_batch("t", &blen);
    const char *octet[] = {NULL};
    assert_int_equal(ls_http(&E.s, "POST", "/v1/topics/t/partitions/0/records",
                             "application/octet-stream", batch, blen, octet, &r),
                     0);
    CHECK_ERR(r, 507, "disk_full");
    ls_resp_free(&r);
    free(batch);
    assert_int_equal(append_big("t", -1), 507);
    assert_int_equal(part_field(&E.s, "t", "high_watermark"), hw);
    assert_int_equal(part_field(&E.s, "d", "high_watermark"), 2);

    /* A topic create is refused whole: no directory, no metadata. */
    assert_int_equal(ls_create_topic(&E.s, "n", 2, NULL), 507);
    char path[300];
    snprintf(path, sizeof path, "%s/n-0", E.mnt);
    assert_int_equal(access(path, F_OK), -1);
    snprintf(path, sizeof path, "%s/meta/n.json", E.mnt);
    assert_int_equal(access(path, F_OK), -1);
    assert_int_equal(get_status("/v1/topics/n"), 404);

    /* The rest of the server answers; readiness stays ready: reads go on. */
    char status[32];
    assert_int_equal(ready_status(&E.s, status, sizeof status), 200);
    assert_string_equal(status, "ready");
    assert_int_equal(get_status("/v1/topics/t/partitions/0/records?offset=0&max_records=2"), 200);
    assert_int_equal(get_status("/v1/topics"), 200);
    assert_int_equal(get_status("/v1/log-dirs"), 200);
    assert_int_equal(ls_metric(&E.s, "logstore_log_dir_offline", -1), 0);
    cc_part p = check_files(&E.s, "t", 0);
    assert_int_equal(p.next_offset, hw);
    cc_part_free(&p);
    char ddir[300];
    snprintf(ddir, sizeof ddir, "%s/d-0", E.mnt);
    if (cc_check_partition(ddir, &p))
        fail_msg("%s: %s", ddir, p.err);
    assert_int_equal(p.next_offset, 2);
    cc_part_free(&p);

    /* Room made through the API: the next append gets the refused offset,
     * once the .deleted files go (file.delete.delay.ms, 500 ms here). */
    assert_int_equal(ls_post(&E.s, "/v1/topics/t/partitions/0/records:delete",
                             "{\"before_offset\":100}", &r),
                     0);
    assert_int_equal(r.status, 200);
    ls_resp_free(&r);
    assert_int_equal(ls_send_json(&E.s, "POST", "/v1/topics/t/retention:run", "{}", &r), 0);
    assert_int_equal(r.status, 200);
    ls_resp_free(&r);
    long st = 507;
    for (int i = 0; i < 1200 && st == 507; i++) {
        st = append(&E.s, "t", 1, "after", &r);
        if (st == 200)
            assert_int_equal(ls_jint(&r, "base_offset"), hw);
        ls_resp_free(&r);
        if (st == 507)
            sleep_ms(25);
    }
    assert_int_equal(st, 200);
    assert_int_equal(append_d(NULL), 200);
    p = check_files(&E.s, "t", 100);
    cc_part_free(&p);

    /* A topic delete frees its room once its directories, renamed aside
     * at once, are removed in the background (a create right after the
     * delete was refused 507 in 2 runs of 80). */
    fill_topic("t");
    assert_int_equal(ls_delete(&E.s, "/v1/topics/t", &r), 0);
    assert_int_equal(r.status, 204);
    ls_resp_free(&r);
    st = 507;
    for (int i = 0; i < 1200 && st == 507; i++)
        if ((st = append_d(NULL)) == 507)
            sleep_ms(25);
    assert_int_equal(st, 200);
    st = 507;
    for (int i = 0; i < 1200 && st == 507; i++)
        if ((st = ls_create_topic(&E.s, "n", 2, NULL)) == 507)
            sleep_ms(25);
    assert_int_equal(st, 201);
    assert_int_equal(ls_stop(&E.s), 0);
    assert_true(ls_file_contains(E.s.log_path, "stopped cleanly"));
    check_no_leftovers(&E.s);
}

static void test_start_on_full_ext4_after_kill(void **state)
{
    (void)state;
    if (!mount_fs("mkfs.ext4 -q -F -b 1024 -m 0", "24M"))
        return;
    start_on_mount(NO_CLEANER);
    assert_int_equal(ls_create_topic(&E.s, "t", 1, PLAIN), 201);
    for (int i = 0; i < 20; i++)
        append_ok(&E.s, "t", 8, "a");
    roll(&E.s, "t");
    long long active = part_field(&E.s, "t", "active_segment_base_offset");
    for (int i = 0; i < 20; i++)
        append_ok(&E.s, "t", 8, "b");
    /* A clean stop trims the active segment's indexes to their entries:
     * a few blocks, the rest of their last page holes. */
    assert_int_equal(ls_stop(&E.s), 0);
    char filler[300], index[400];
    snprintf(filler, sizeof filler, "%s/filler", E.mnt);
    snprintf(index, sizeof index, "%s/t-0/%020d.index", E.mnt, 0);
    assert_true(ls_file_size(index) > 0);
    fill_with_file(filler);
    start_on_mount(NO_CLEANER);
    ls_kill9(&E.s);
    /* Lost, and with no room to rebuild it. */
    assert_int_equal(unlink(index), 0);
    start_on_mount(NO_CLEANER);
    assert_int_equal(startup(&E.s, "clean_shutdown"), 0);
    char status[32];
    assert_int_equal(ready_status(&E.s, status, sizeof status), 200);
    assert_int_equal(part_field(&E.s, "t", "log_end_offset"), M.n);
    assert_int_equal(get_status("/v1/topics/t/partitions/0/records?offset=13&max_records=2"), 200);
    assert_true(part_field(&E.s, "t", "active_segment_base_offset") == active);

    /* Room again: appends go on, and the next start rebuilds the index. */
    assert_int_equal(unlink(filler), 0);
    append_ok(&E.s, "t", 8, "c");
    assert_int_equal(ls_stop(&E.s), 0);
    start_on_mount(NO_CLEANER);
    assert_true(ls_file_size(index) > 0);
    cc_part p = check_files(&E.s, "t", 0);
    assert_int_equal(p.next_offset, M.n);
    cc_part_free(&p);
    assert_int_equal(ls_stop(&E.s), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_appends_on_full_tmpfs, fs_setup, fs_teardown),
        cmocka_unit_test_setup_teardown(test_start_on_full_ext4_after_kill, fs_setup, fs_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
