/*
 * test_index_fs.c - index entries stored through the index file's shared
 * mapping, on small file systems of their own filled to the last block.  A
 * store into a shared mapping cannot fail with an error: a page the file
 * system cannot find room for is SIGBUS, which kills the server.  So on a
 * full disk an append must be refused (-ENOSPC, a 507), never fault:
 *   - ext4 with 1 KiB blocks (or any block smaller than a page): an index
 *     reopened with more than 64 KiB of entries, then appended to;
 *   - tmpfs: a rebuild (recovery) rewrites entries the file already held,
 *     which needs no new room and must not fail for want of it;
 *   - btrfs, and XFS after a reflink copy: a rewrite of a block already
 *     written needs a new one (copy on write), reserved or not.
 * Each runs where it can: as root, with loop devices and the mkfs tool;
 * elsewhere it says it was skipped.  Scenarios that may fault run in a
 * child process, so a SIGBUS fails the test instead of ending the suite.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "eng_config.h"
#include "eng_endian.h"
#include "eng_error.h"
#include "eng_fs.h"
#include "eng_index.h"
#include "eng_partition.h"
#include "eng_segment.h"
#include "segment_fixture.h"
#include "support.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

typedef struct fs_fixture {
    char *dir;      /* temporary directory: the image and the mount point */
    char mnt[256];  /* dir/mnt */
    bool mounted;
} fs_fixture;

static int setup(void **state)
{
    fs_fixture *f = calloc(1, sizeof *f);
    if (!f || !(f->dir = ts_tmpdir())) {
        free(f);
        return -1;
    }
    snprintf(f->mnt, sizeof f->mnt, "%s/mnt", f->dir);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fs_fixture *f = *state;
    char cmd[1200];
    if (f->mounted) {
        snprintf(cmd, sizeof cmd, "umount '%s' 2>/dev/null || umount -l '%s'", f->mnt, f->mnt);
        if (system(cmd) != 0)
            fprintf(stderr, "# could not unmount %s\n", f->mnt);
    }
    ts_rmtree(f->dir);
    free(f->dir);
    free(f);
    return 0;
}

/* Mounts a new file system at f->mnt: tmpfs of `size` when mkfs is NULL,
 * else an image of `size` made by `mkfs` (a command the image path is
 * appended to) on a loop device.  false (the test skips) where that is not
 * possible: not root, no loop devices, no mkfs tool. */
static bool mount_fs(fs_fixture *f, const char *mkfs, const char *size)
{
    char cmd[1600];
    if (geteuid() != 0) {
        fprintf(stderr, "# skipped: mounting a file system needs root\n");
        return false;
    }
    if (mkdir(f->mnt, 0755) != 0)
        return false;
    if (!mkfs)
        snprintf(cmd, sizeof cmd, "mount -t tmpfs -o size=%s tmpfs '%s' >/dev/null 2>&1", size,
                 f->mnt);
    else
        snprintf(cmd, sizeof cmd,
                 "truncate -s %s '%s/img' && %s '%s/img' >/dev/null 2>&1 && "
                 "mount -o loop '%s/img' '%s' >/dev/null 2>&1",
                 size, f->dir, mkfs, f->dir, f->dir, f->mnt);
    if (system(cmd) != 0) {
        fprintf(stderr, "# skipped: could not make and mount a file system (%s)\n",
                mkfs ? mkfs : "tmpfs");
        return false;
    }
    f->mounted = true;
    return true;
}

/* Writes a file until the file system has no room left; the errno that
 * stopped it (ENOSPC). */
static int fill_fs(const char *dir)
{
    char path[600];
    snprintf(path, sizeof path, "%s/filler", dir);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0)
        return errno;
    static char buf[4096];
    memset(buf, 0x5a, sizeof buf);
    int err = 0;
    /* Twice: copy-on-write file systems find more room once the first
     * round is on disk. */
    for (int round = 0; round < 2; round++) {
        while (write(fd, buf, sizeof buf) > 0)
            ;
        err = errno;
        (void)fsync(fd);
    }
    close(fd);
    sync();
    return err;
}

static long long ls_size(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 ? (long long)st.st_size : -1;
}

/* Runs fn(dir) in a child process and returns its exit code, or 128 plus
 * the signal that ended it (SIGBUS: 135). */
static int in_child(int (*fn)(const char *dir), const char *dir)
{
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        /* cmocka's handler would carry the child on to the next test. */
        signal(SIGBUS, SIG_DFL);
        signal(SIGSEGV, SIG_DFL);
        _exit(fn(dir));
    }
    assert_true(pid > 0);
    int st;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    if (WIFSIGNALED(st))
        return 128 + WTERMSIG(st);
    return WEXITSTATUS(st);
}

/* Appends offset-index entries first..last-1 (offset i + 1 at position
 * 10 i); 0, or 10 after a refusal other than -ENOSPC. */
static int append_entries(eng_index *idx, uint32_t first, uint32_t last)
{
    for (uint32_t i = first; i < last; i++) {
        int rc = eng_offset_index_append(idx, (int64_t)i + 1, i * 10);
        if (rc == -ENOSPC)
            return 0; /* refused: what a full disk must do */
        if (rc) {
            fprintf(stderr, "# append %u: %s\n", i, eng_strerror(rc));
            return 10;
        }
    }
    return 0;
}

/* An index of 10,000 entries (80,000 bytes) trimmed, as a clean stop
 * leaves the active segment's, then reopened on a full disk and
 * appended to. */
static int reopen_after_trim_on_full_disk(const char *dir)
{
    char path[600];
    snprintf(path, sizeof path, "%s/00000000000000000000.index", dir);
    eng_index *idx;
    if (eng_index_open(path, ENG_INDEX_OFFSET, 0, 1 << 20, true, &idx))
        return 1;
    if (append_entries(idx, 0, 10000) || eng_index_entries(idx) != 10000 ||
        eng_index_trim(idx) || eng_index_sync(idx))
        return 2;
    eng_index_close(idx);
    if (fill_fs(dir) != ENOSPC)
        return 3;
    if (eng_index_open(path, ENG_INDEX_OFFSET, 0, 1 << 20, true, &idx))
        return 4;
    int rc = append_entries(idx, 10000, 12000);
    eng_index_close(idx);
    return rc;
}

/* The reservation covered the entries' bytes, not the whole page they are
 * in: the page's other blocks were holes, and the store's page fault could
 * not allocate them (SIGBUS). */
static void test_reopen_on_full_disk_with_small_blocks(void **state)
{
    fs_fixture *f = *state;
    if (!mount_fs(f, "mkfs.ext4 -q -F -b 1024 -m 0", "16M"))
        return;
    int rc = in_child(reopen_after_trim_on_full_disk, f->mnt);
    if (rc)
        fprintf(stderr, "# the child ended with %d (135: SIGBUS)\n", rc);
    assert_int_equal(rc, 0);
}

/* An index of 100 entries (800 bytes: one 1 KiB block of a 4 KiB page)
 * trimmed and on disk, then, the disk full, reopened and rebuilt with the
 * same entries, as recovery after kill -9 rebuilds the active segment's.
 * Each entry lands in a block the file has, but the page's other three
 * blocks are holes: reserving the whole page found no room, the rebuild
 * failed with -ENOSPC, and with it the partition's load, so the server
 * could not start on a full disk (found by running it on a full ext4). */
static int rebuild_on_full_disk(const char *dir)
{
    char path[600];
    snprintf(path, sizeof path, "%s/00000000000000000000.index", dir);
    eng_index *idx;
    if (eng_index_open(path, ENG_INDEX_OFFSET, 0, 1 << 20, true, &idx))
        return 1;
    if (append_entries(idx, 0, 100) || eng_index_entries(idx) != 100 || eng_index_trim(idx) ||
        eng_index_sync(idx))
        return 2;
    eng_index_close(idx);
    if (fill_fs(dir) != ENOSPC)
        return 3;
    if (eng_index_open(path, ENG_INDEX_OFFSET, 0, 1 << 20, true, &idx))
        return 4;
    eng_index_reset(idx);
    for (uint32_t i = 0; i < 100; i++) {
        int rc = eng_offset_index_append(idx, (int64_t)i + 1, i * 10);
        if (rc) {
            fprintf(stderr, "# rebuilding entry %u: %s\n", i, eng_strerror(rc));
            eng_index_close(idx);
            return 5;
        }
    }
    int64_t off;
    uint32_t pos;
    eng_offset_index_lookup(idx, 50, &off, &pos);
    eng_index_close(idx);
    return off == 50 && pos == 490 ? 0 : 6;
}

static void test_rebuild_on_full_disk_with_small_blocks(void **state)
{
    fs_fixture *f = *state;
    if (!mount_fs(f, "mkfs.ext4 -q -F -b 1024 -m 0", "16M"))
        return;
    int rc = in_child(rebuild_on_full_disk, f->mnt);
    if (rc)
        fprintf(stderr, "# the child ended with %d (135: SIGBUS)\n", rc);
    assert_int_equal(rc, 0);
}

/* Recovery (the loader after a crash, or an index that fails its check)
 * rebuilds a sealed segment's indexes in their files: on a full disk the
 * entries land where the file's blocks already are.  Reserving 64 KiB
 * ahead failed with -ENOSPC instead, and with it the segment's recovery
 * and the partition's load: the server could not start until space was
 * freed (pwrite, before, needed no new block). */
static void test_rebuild_on_full_tmpfs(void **state)
{
    fs_fixture *f = *state;
    if (!mount_fs(f, NULL, "1m"))
        return;
    copy_sample(f->mnt);
    assert_int_equal(fill_fs(f->mnt), ENOSPC);
    eng_segment_opts o = default_opts();
    eng_segment *seg;
    assert_int_equal(eng_segment_open(f->mnt, 0, &o, false, &seg), 0);
    eng_recover_stats st;
    int rc = eng_segment_recover(seg, &st);
    if (rc)
        fprintf(stderr, "# recovery: %s\n", eng_strerror(rc));
    assert_int_equal(rc, 0);
    assert_int_equal(st.valid_bytes, SAMPLE_LOG_BYTES);
    eng_index *oi, *ti;
    assert_int_equal(eng_segment_indexes(seg, &oi, &ti), 0);
    assert_true(eng_index_entries(oi) > 0);
    assert_true(eng_index_entries(ti) > 0);
    eng_segment_unref(seg);
}

/* Entries written and on disk, then (the disk full) more entries into the
 * same page, as the active index takes them.  With reflink set, the file
 * is first copied with cp --reflink (what a plain cp does on XFS and btrfs
 * since coreutils 9), so its blocks are shared. */
static int append_to_written_page(const char *dir, bool reflink)
{
    char path[600], cmd[1400];
    snprintf(path, sizeof path, "%s/00000000000000000000.index", dir);
    eng_index *idx;
    if (eng_index_open(path, ENG_INDEX_OFFSET, 0, 1 << 20, true, &idx))
        return 1;
    if (append_entries(idx, 0, 10) || eng_index_entries(idx) != 10 || eng_index_sync(idx))
        return 2;
    if (reflink) {
        snprintf(cmd, sizeof cmd, "cp --reflink=always '%s' '%s.copy'", path, path);
        if (system(cmd) != 0)
            return 3;
    }
    if (fill_fs(dir) != ENOSPC)
        return 4;
    int rc = append_entries(idx, 10, 200);
    eng_index_close(idx);
    return rc;
}

static int append_to_written_page_plain(const char *dir)
{
    return append_to_written_page(dir, false);
}

static int append_to_written_page_reflinked(const char *dir)
{
    return append_to_written_page(dir, true);
}

/* btrfs writes every rewritten block somewhere new: blocks reserved with
 * fallocate are used by the first write only, and a store into a page
 * already written back found no room (SIGBUS). */
static void test_store_on_full_btrfs(void **state)
{
    fs_fixture *f = *state;
    if (!mount_fs(f, "mkfs.btrfs -q -f", "256M"))
        return;
    int rc = in_child(append_to_written_page_plain, f->mnt);
    if (rc)
        fprintf(stderr, "# the child ended with %d (135: SIGBUS)\n", rc);
    assert_int_equal(rc, 0);
}

/* XFS overwrites in place, except blocks shared with a reflinked copy. */
static void test_store_on_full_xfs_after_reflink_copy(void **state)
{
    fs_fixture *f = *state;
    if (!mount_fs(f, "mkfs.xfs -q -f", "300M"))
        return;
    int rc = in_child(append_to_written_page_reflinked, f->mnt);
    if (rc)
        fprintf(stderr, "# the child ended with %d (135: SIGBUS)\n", rc);
    assert_int_equal(rc, 0);
}

/* Appends one one-record batch at offset `offset` with timestamp ts
 * (partition_fixture.h's append_ok, whose fixture this file cannot share). */
static void append_one(eng_partition *p, int64_t offset, int64_t ts)
{
    uint8_t buf[4096];
    size_t len = ts_build_batch(buf, sizeof buf, offset, 1, ts, 10);
    eng_append_opts o = {.expected_offset = -1, .producer_batches = true};
    eng_append_result res;
    eng_errdetail err = {0};
    assert_int_equal(eng_partition_append(p, buf, len, &o, &res, &err), 0);
}

/* A roll on a full disk.  A segment of under index.interval.bytes has no
 * time-index entry until its seal writes the last one (the segment's
 * largest timestamp), and that entry is all a later start reads back as
 * the segment's largest timestamp.  With no room for it the roll went
 * ahead and sealed the segment without it (a warning in the log): after a
 * restart reads by timestamp skipped the segment's records, the partition
 * reported no largest timestamp, and retention.ms judged the segment by its
 * file's mtime.  The roll must be refused instead (-ENOSPC, a 507), the
 * segment staying active; once there is room it rolls, and a restart finds
 * the records by timestamp. */
static void test_roll_on_full_tmpfs_keeps_final_time_entry(void **state)
{
    fs_fixture *f = *state;
    if (!mount_fs(f, NULL, "1m"))
        return;
    char pdir[600], filler[600];
    snprintf(pdir, sizeof pdir, "%s/orders-0", f->mnt);
    snprintf(filler, sizeof filler, "%s/filler", f->mnt);
    eng_config_defaults d;
    eng_config_defaults_init(&d);
    eng_partition_params pp = {.topic = "orders", .id = 0, .dir = pdir, .config = d.cfg,
                               .clean_shutdown = true, .log_start_offset = -1};
    eng_partition *p;
    assert_int_equal(eng_partition_open(&pp, &p, NULL), 0);
    int64_t ts0 = eng_now_ms() - 60000;
    for (int i = 0; i < 3; i++)
        append_one(p, i, ts0 + i * 1000);
    assert_int_equal(fill_fs(f->mnt), ENOSPC);
    int64_t base;
    assert_int_equal(eng_partition_roll(p, &base), -ENOSPC);
    assert_int_equal(unlink(filler), 0);
    assert_int_equal(eng_partition_roll(p, &base), 0);
    assert_int_equal(base, 3);
    assert_int_equal(eng_partition_close(p), 0);
    eng_partition_unref(p);

    assert_int_equal(eng_partition_open(&pp, &p, NULL), 0);
    int64_t off, ts;
    assert_int_equal(eng_partition_offset_for_timestamp(p, ts0 + 1500, &off, &ts), 0);
    assert_int_equal(off, 2);
    assert_int_equal(eng_partition_max_timestamp(p, &off, &ts), 0);
    assert_int_equal(off, 2);
    assert_int_equal(ts, ts0 + 2000);
    eng_partition_unref(p);
}

/* A sealed segment whose .timeindex is rebuilt at startup on a full disk
 * (the file was lost; a segment under index.interval.bytes needs only the
 * final entry, the index's first).  With no room for that entry the start
 * still succeeds, but the file must not stay behind without it: the next
 * start would trust it, and reads by timestamp would skip the segment's
 * records.  It is removed, and the start after that (with room) rebuilds
 * it. */
static void test_rebuild_without_room_for_final_time_entry(void **state)
{
    fs_fixture *f = *state;
    if (!mount_fs(f, NULL, "1m"))
        return;
    char pdir[600], filler[600], tindex[700];
    snprintf(pdir, sizeof pdir, "%s/orders-0", f->mnt);
    snprintf(filler, sizeof filler, "%s/filler", f->mnt);
    snprintf(tindex, sizeof tindex, "%s/00000000000000000000.timeindex", pdir);
    eng_config_defaults d;
    eng_config_defaults_init(&d);
    eng_partition_params pp = {.topic = "orders", .id = 0, .dir = pdir, .config = d.cfg,
                               .clean_shutdown = true, .log_start_offset = -1};
    eng_partition *p;
    assert_int_equal(eng_partition_open(&pp, &p, NULL), 0);
    int64_t ts0 = eng_now_ms() - 60000;
    for (int i = 0; i < 3; i++)
        append_one(p, i, ts0 + i * 1000);
    int64_t base;
    assert_int_equal(eng_partition_roll(p, &base), 0);
    append_one(p, 3, ts0 + 3000);
    assert_int_equal(eng_partition_close(p), 0);
    eng_partition_unref(p);

    assert_int_equal(unlink(tindex), 0);
    assert_int_equal(fill_fs(f->mnt), ENOSPC);
    assert_int_equal(eng_partition_open(&pp, &p, NULL), 0);
    assert_int_equal(access(tindex, F_OK), -1);
    int64_t off, ts;
    assert_int_equal(eng_partition_offset_for_timestamp(p, ts0 + 1500, &off, &ts), 0);
    assert_int_equal(off, 2);
    assert_int_equal(unlink(filler), 0);
    assert_int_equal(eng_partition_close(p), 0);
    eng_partition_unref(p);

    assert_int_equal(eng_partition_open(&pp, &p, NULL), 0);
    assert_int_equal(access(tindex, F_OK), 0);
    assert_int_equal(eng_partition_offset_for_timestamp(p, ts0 + 1500, &off, &ts), 0);
    assert_int_equal(off, 2);
    assert_int_equal(eng_partition_close(p), 0);
    eng_partition_unref(p);

    /* A clean start trusts the rebuilt file: it holds the final entry. */
    assert_int_equal(eng_partition_open(&pp, &p, NULL), 0);
    assert_int_equal(eng_partition_offset_for_timestamp(p, ts0 + 1500, &off, &ts), 0);
    assert_int_equal(off, 2);
    eng_partition_unref(p);
}

/* A sealed segment whose .index is rebuilt at startup on a full disk (the
 * file was lost, or a power loss kept its entries from the disk): the
 * rebuild has no room for a single entry.  The start failed with -ENOSPC
 * (the server exited, and space could not be freed through its API).  It
 * must succeed and read the segment; the short index does not stay behind
 * (a clean start would trust it), so the start after that, with room,
 * rebuilds it whole. */
static void test_rebuild_without_room_for_offset_entries(void **state)
{
    fs_fixture *f = *state;
    if (!mount_fs(f, NULL, "1m"))
        return;
    char pdir[600], filler[600], index[700];
    snprintf(pdir, sizeof pdir, "%s/orders-0", f->mnt);
    snprintf(filler, sizeof filler, "%s/filler", f->mnt);
    snprintf(index, sizeof index, "%s/00000000000000000000.index", pdir);
    eng_config_defaults d;
    eng_config_defaults_init(&d);
    eng_partition_params pp = {.topic = "orders", .id = 0, .dir = pdir, .config = d.cfg,
                               .clean_shutdown = true, .log_start_offset = -1};
    eng_partition *p;
    assert_int_equal(eng_partition_open(&pp, &p, NULL), 0);
    int64_t ts0 = eng_now_ms() - 60000;
    uint8_t buf[4096];
    for (int i = 0; i < 20; i++) {
        /* ~1 KiB batches: an offset-index entry every four (index.interval.bytes 4096) */
        size_t len = ts_build_batch(buf, sizeof buf, i, 1, ts0 + i, 1000);
        eng_append_opts o = {.expected_offset = -1, .producer_batches = true};
        eng_append_result res;
        eng_errdetail err = {0};
        assert_int_equal(eng_partition_append(p, buf, len, &o, &res, &err), 0);
    }
    int64_t base;
    assert_int_equal(eng_partition_roll(p, &base), 0);
    append_one(p, 20, ts0 + 20);
    assert_int_equal(eng_partition_close(p), 0);
    eng_partition_unref(p);
    assert_true(ls_size(index) > 0);

    assert_int_equal(unlink(index), 0);
    assert_int_equal(fill_fs(f->mnt), ENOSPC);
    int rc = eng_partition_open(&pp, &p, NULL);
    if (rc)
        fprintf(stderr, "# open on a full disk: %s\n", eng_strerror(rc));
    assert_int_equal(rc, 0);
    assert_int_equal(access(index, F_OK), -1);
    eng_fetch fe;
    eng_errdetail err = {0};
    assert_int_equal(eng_partition_read(p, 13, 1 << 20, &fe, &err), 0);
    assert_true(fe.len >= 8);
    assert_true((int64_t)eng_be64(fe.data) <= 13);
    assert_true(fe.next_offset > 13);
    eng_fetch_free(&fe);
    assert_int_equal(unlink(filler), 0);
    assert_int_equal(eng_partition_close(p), 0);
    eng_partition_unref(p);

    assert_int_equal(eng_partition_open(&pp, &p, NULL), 0);
    assert_true(ls_size(index) >= 4 * 8);
    assert_int_equal(eng_partition_close(p), 0);
    eng_partition_unref(p);
}

/* A sealed segment's index left at its preallocated size with no entries
 * (a start cut short while it rebuilt a missing index: a full disk before
 * the rebuild could take no room, a kill).  A sealed segment's indexes are
 * trimmed to their entries, so a longer file is one whose writing did not
 * finish; it passed the load check (no entry to contradict), was trusted
 * empty, and the segment lost its largest timestamp: reads by timestamp
 * skipped its records.  It must be rebuilt. */
static void test_untrimmed_sealed_index_rebuilt(void **state)
{
    fs_fixture *f = *state;
    char pdir[600], index[700], tindex[700];
    snprintf(pdir, sizeof pdir, "%s/orders-0", f->dir);
    snprintf(index, sizeof index, "%s/00000000000000000000.index", pdir);
    snprintf(tindex, sizeof tindex, "%s/00000000000000000000.timeindex", pdir);
    eng_config_defaults d;
    eng_config_defaults_init(&d);
    eng_partition_params pp = {.topic = "orders", .id = 0, .dir = pdir, .config = d.cfg,
                               .clean_shutdown = true, .log_start_offset = -1};
    eng_partition *p;
    assert_int_equal(eng_partition_open(&pp, &p, NULL), 0);
    int64_t ts0 = eng_now_ms() - 60000;
    uint8_t buf[4096];
    for (int i = 0; i < 20; i++) {
        size_t len = ts_build_batch(buf, sizeof buf, i, 1, ts0 + i * 1000, 1000);
        eng_append_opts o = {.expected_offset = -1, .producer_batches = true};
        eng_append_result res;
        eng_errdetail err = {0};
        assert_int_equal(eng_partition_append(p, buf, len, &o, &res, &err), 0);
    }
    int64_t base;
    assert_int_equal(eng_partition_roll(p, &base), 0);
    append_one(p, 20, ts0 + 20000);
    assert_int_equal(eng_partition_close(p), 0);
    eng_partition_unref(p);
    long long index_len = ls_size(index), tindex_len = ls_size(tindex);
    assert_true(index_len > 0 && tindex_len > 0);

    assert_int_equal(truncate(index, 0), 0);
    assert_int_equal(truncate(index, 1 << 20), 0);
    assert_int_equal(truncate(tindex, 0), 0);
    assert_int_equal(truncate(tindex, 12 << 16), 0);
    assert_int_equal(eng_partition_open(&pp, &p, NULL), 0);
    int64_t off, ts;
    assert_int_equal(eng_partition_offset_for_timestamp(p, ts0 + 15500, &off, &ts), 0);
    assert_int_equal(off, 16);
    assert_int_equal(ls_size(index), index_len);
    assert_int_equal(ls_size(tindex), tindex_len);
    assert_int_equal(eng_partition_close(p), 0);
    eng_partition_unref(p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_reopen_on_full_disk_with_small_blocks, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_rebuild_on_full_disk_with_small_blocks, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_rebuild_on_full_tmpfs, setup, teardown),
        cmocka_unit_test_setup_teardown(test_roll_on_full_tmpfs_keeps_final_time_entry, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_rebuild_without_room_for_final_time_entry, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_rebuild_without_room_for_offset_entries, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_untrimmed_sealed_index_rebuilt, setup, teardown),
        cmocka_unit_test_setup_teardown(test_store_on_full_btrfs, setup, teardown),
        cmocka_unit_test_setup_teardown(test_store_on_full_xfs_after_reflink_copy, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
