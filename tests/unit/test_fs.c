/*
 * test_fs.c - eng_fs's durable file replacement and bounded read (DESIGN §2:
 * every checkpoint and metadata file is written to a temporary file,
 * fsync'd, renamed over the old one, and its directory fsync'd):
 *
 *   - a temporary file left longer by an interrupted write is truncated, so
 *     the new file holds exactly the new bytes, never a tail of the old;
 *   - a write that fails (the rename, or the write itself) leaves the old
 *     file as it was and no temporary file behind;
 *   - eng_fs_read_file takes a file of exactly max_len bytes and refuses
 *     one byte more with -EFBIG.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "eng_error.h"
#include "eng_fault.h"
#include "eng_fs.h"
#include "support.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static void write_plain(const char *path, const char *text)
{
    FILE *fp = fopen(path, "w");
    assert_non_null(fp);
    fputs(text, fp);
    fclose(fp);
}

static void expect_content(const char *path, const char *want)
{
    char *got;
    size_t len;
    assert_int_equal(eng_fs_read_file(path, 1 << 20, &got, &len), 0);
    assert_int_equal(len, strlen(want));
    assert_string_equal(got, want);
    free(got);
}

static void test_stale_longer_tmp_is_truncated(void **state)
{
    ts_dir_fixture *f = *state;
    char path[600], tmp[700];
    snprintf(path, sizeof path, "%s/recovery-point-offset-checkpoint", f->dir);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    write_plain(tmp, "0\n3\norders 0 123456789\norders 1 987654321\norders 2 5\n");
    assert_int_equal(eng_fs_write_atomic(path, "0\n0\n", 4), 0);
    expect_content(path, "0\n0\n");
    assert_int_equal(ts_file_size(tmp), -1); /* renamed away */
}

static void test_failed_write_keeps_old_file_and_no_tmp(void **state)
{
    ts_dir_fixture *f = *state;
    char path[600], tmp[700], inner[700];
    /* The rename fails: the target is a non-empty directory. */
    snprintf(path, sizeof path, "%s/busy", f->dir);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    assert_int_equal(mkdir(path, 0755), 0);
    snprintf(inner, sizeof inner, "%s/keep", path);
    write_plain(inner, "x");
    int rc = eng_fs_write_atomic(path, "new", 3);
    assert_true(rc == -EISDIR || rc == -ENOTEMPTY || rc == -EEXIST);
    assert_int_equal(ts_file_size(tmp), -1);
    assert_int_equal(ts_file_size(inner), 1);

    /* The write fails midway: the old file stays whole, the torn
     * temporary file goes. */
    snprintf(path, sizeof path, "%s/meta.json", f->dir);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    assert_int_equal(eng_fs_write_atomic(path, "old contents", 12), 0);
    eng_fault_set("fs.write_atomic.mid=eio@1");
    assert_int_equal(eng_fs_write_atomic(path, "new contents, longer", 20), -EIO);
    eng_fault_set(NULL);
    expect_content(path, "old contents");
    assert_int_equal(ts_file_size(tmp), -1);
    char listing[1024];
    ts_list_dir(f->dir, listing, sizeof listing);
    assert_string_equal(listing, "busy,meta.json");
}

static void test_read_file_bound(void **state)
{
    ts_dir_fixture *f = *state;
    char path[600];
    snprintf(path, sizeof path, "%s/f", f->dir);
    write_plain(path, "0123456789");
    char *buf = NULL;
    size_t len = 0;
    assert_int_equal(eng_fs_read_file(path, 10, &buf, &len), 0);
    assert_int_equal(len, 10);
    assert_string_equal(buf, "0123456789");
    free(buf);
    buf = NULL;
    assert_int_equal(eng_fs_read_file(path, 9, &buf, &len), -EFBIG);
    assert_null(buf);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_stale_longer_tmp_is_truncated, ts_dir_setup,
                                        ts_dir_teardown),
        cmocka_unit_test_setup_teardown(test_failed_write_keeps_old_file_and_no_tmp, ts_dir_setup,
                                        ts_dir_teardown),
        cmocka_unit_test_setup_teardown(test_read_file_bound, ts_dir_setup, ts_dir_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
