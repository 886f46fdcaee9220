/*
 * test_partition_topic_id.c - a partition directory's partition.metadata
 * checked against its topic's id at startup, as Kafka's
 * UnifiedLog.initializeTopicId does.
 *
 *   - A directory of another incarnation of the topic (restored from a
 *     backup taken before the topic was deleted and created again) is set
 *     aside as -stray, intact, and the partition starts again, empty, at
 *     the offset the checkpoints remember; the other partitions load as
 *     they were.  Adopted, its old records were served as the new topic's
 *     and new appends reused offsets the new topic's readers had seen.
 *   - A directory without partition.metadata (one from before the file was
 *     written, a create cut short) loads, and gets the file.
 *   - One that does not parse stops the start, naming the file, with the
 *     directory untouched, as topic metadata that does not parse does.
 *   - Lines ended by CRLF (a file edited or copied through Windows) read as
 *     Kafka's readLine reads them: the topic's own id loads, another id is
 *     set aside.  Both stopped the start as garbled.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "manager_fixture.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

static int create(eng_manager *m, const char *name, int32_t n)
{
    return eng_manager_create_topic(m, name, n, NULL, NULL, 0, NULL);
}

static void topic_id_of(eng_manager *m, const char *name, char id[23])
{
    eng_topic_desc d;
    assert_int_equal(eng_manager_describe_topic(m, name, &d), 0);
    snprintf(id, 23, "%s", d.meta.topic_id);
    assert_int_equal(strlen(id), 22);
    eng_topic_desc_clear(&d);
}

static void write_text(const char *path, const char *text)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    assert_int_equal(close(fd), 0);
}

static void expect_text(const char *path, const char *want)
{
    uint8_t *got;
    size_t len;
    assert_int_equal(ts_read_file(path, &got, &len), 0);
    assert_int_equal(len, strlen(want));
    assert_memory_equal(got, want, len);
    free(got);
}

/* The one entry of the data dir that is "<prefix><32 hex>-<suffix>", in
 * name (empty when there is none); how many there are. */
static int find_set_aside(fixture *f, const char *prefix, const char *suffix, char *name,
                          size_t cap)
{
    char listing[4096];
    ts_list_dir(f->data, listing, sizeof listing);
    int n = 0;
    name[0] = 0;
    size_t pl = strlen(prefix);
    for (char *save = NULL, *e = strtok_r(listing, ",", &save); e;
         e = strtok_r(NULL, ",", &save)) {
        if (!strncmp(e, prefix, pl) && strspn(e + pl, "0123456789abcdef") == 32 &&
            e[pl + 32] == '-' && !strcmp(e + pl + 33, suffix)) {
            snprintf(name, cap, "%s", e);
            n++;
        }
    }
    return n;
}

static void expect_offsets(eng_manager *m, const char *topic, int32_t id, int64_t start,
                           int64_t end)
{
    eng_partition *p;
    assert_int_equal(eng_manager_partition(m, topic, id, &p, NULL), 0);
    assert_int_equal(eng_partition_log_start_offset(p), start);
    assert_int_equal(eng_partition_log_end_offset(p), end);
    eng_partition_unref(p);
}

static void test_other_incarnation_is_set_aside(void **state)
{
    fixture *f = *state;
    eng_manager *m = open_mgr(f);
    assert_int_equal(create(m, "orders", 3), 0);
    append_records(m, "orders", 1, 7);
    char old_id[23], new_id[23];
    topic_id_of(m, "orders", old_id);
    assert_true(eng_manager_close(m));

    /* The backup an operator keeps of orders-1 ... */
    char pdir[700], backup[700], path[1400];
    snprintf(pdir, sizeof pdir, "%s/orders-1", f->data);
    snprintf(backup, sizeof backup, "%s/backup-orders-1", f->tmp);
    assert_int_equal(ts_copy_tree(pdir, backup), 0);
    snprintf(path, sizeof path, "%s/00000000000000000000.log", backup);
    long long old_log_size = ts_file_size(path);
    assert_true(old_log_size > 0);

    /* ... outlives the topic: orders is deleted and created again, and
     * its new partitions take records ... */
    m = open_mgr(f);
    assert_int_equal(eng_manager_delete_topic(m, "orders", NULL), 0);
    assert_int_equal(create(m, "orders", 3), 0);
    topic_id_of(m, "orders", new_id);
    assert_string_not_equal(old_id, new_id);
    append_records(m, "orders", 0, 3);
    append_records(m, "orders", 1, 2);
    assert_true(eng_manager_close(m));

    /* ... and is restored over the new orders-1 while the server is down. */
    ts_rmtree(pdir);
    assert_int_equal(ts_copy_tree(backup, pdir), 0);

    m = open_mgr(f);
    char stray[600];
    assert_int_equal(find_set_aside(f, "orders-1.", "stray", stray, sizeof stray), 1);
    /* Kept whole, for the operator: the old records and the old id. */
    snprintf(path, sizeof path, "%s/%s/00000000000000000000.log", f->data, stray);
    assert_int_equal(ts_file_size(path), old_log_size);
    char want[1400];
    snprintf(path, sizeof path, "%s/%s/partition.metadata", f->data, stray);
    snprintf(want, sizeof want, "version: 0\ntopic_id: %s", old_id);
    expect_text(path, want);
    snprintf(want, sizeof want,
             "%s has topic id %s in its partition.metadata, but topic orders has id %s", pdir,
             old_id, new_id);
    assert_true(logged(f, want));
    snprintf(want, sizeof want, "moved to %s/%s", f->data, stray);
    assert_true(logged(f, want));

    /* The partition goes on from where the new topic's was, not from the
     * backup's records nor from 0: no offset of the new topic is reused. */
    expect_offsets(m, "orders", 1, 2, 2);
    expect_offsets(m, "orders", 0, 0, 3);
    expect_offsets(m, "orders", 2, 0, 0);
    append_records(m, "orders", 1, 1);
    expect_offsets(m, "orders", 1, 2, 3);
    snprintf(path, sizeof path, "%s/partition.metadata", pdir);
    snprintf(want, sizeof want, "version: 0\ntopic_id: %s", new_id);
    expect_text(path, want);
    assert_true(eng_manager_close(m));

    /* The next start finds everything in order: nothing more is set aside. */
    m = open_mgr(f);
    assert_int_equal(find_set_aside(f, "orders-1.", "stray", stray, sizeof stray), 1);
    assert_int_equal(find_set_aside(f, "orders-0.", "stray", stray, sizeof stray), 0);
    expect_offsets(m, "orders", 1, 2, 3);
    expect_offsets(m, "orders", 0, 0, 3);
    assert_true(eng_manager_close(m));
    ts_rmtree(backup);
}

/* Directories from before partition.metadata was written, or a create cut
 * short before it: nothing to check against, so they load as they are and
 * get the file; one as Kafka writes it (the newline at its end) loads too. */
static void test_without_metadata_still_loads(void **state)
{
    fixture *f = *state;
    eng_manager *m = open_mgr(f);
    assert_int_equal(create(m, "orders", 2), 0);
    append_records(m, "orders", 0, 4);
    append_records(m, "orders", 1, 5);
    char id[23];
    topic_id_of(m, "orders", id);
    assert_true(eng_manager_close(m));
    char path0[700], path1[700], want[128];
    snprintf(path0, sizeof path0, "%s/orders-0/partition.metadata", f->data);
    snprintf(path1, sizeof path1, "%s/orders-1/partition.metadata", f->data);
    assert_int_equal(unlink(path0), 0);
    snprintf(want, sizeof want, "version: 0\ntopic_id: %s\n", id);
    write_text(path1, want);

    m = open_mgr(f);
    expect_offsets(m, "orders", 0, 0, 4);
    expect_offsets(m, "orders", 1, 0, 5);
    char stray[600];
    assert_int_equal(find_set_aside(f, "orders-", "stray", stray, sizeof stray), 0);
    snprintf(want, sizeof want, "version: 0\ntopic_id: %s", id);
    expect_text(path0, want);
    assert_true(eng_manager_close(m));
}

/* A file that does not parse is not a crash's (it is written by rename
 * after an fsync): Kafka's log then fails to load.  The start stops, naming
 * the file, with the directory as it was; removed, the directory loads as
 * the topic's. */
static void test_garbled_metadata_stops_the_start(void **state)
{
    fixture *f = *state;
    eng_manager *m = open_mgr(f);
    assert_int_equal(create(m, "orders", 2), 0);
    append_records(m, "orders", 1, 6);
    char id[23];
    topic_id_of(m, "orders", id);
    assert_true(eng_manager_close(m));
    char path[700], log[700], bad[5][128];
    snprintf(path, sizeof path, "%s/orders-1/partition.metadata", f->data);
    snprintf(log, sizeof log, "%s/orders-1/00000000000000000000.log", f->data);
    long long log_size = ts_file_size(log);
    snprintf(bad[0], sizeof bad[0], "%s", "");
    snprintf(bad[1], sizeof bad[1], "%s", "version: 0\n");
    snprintf(bad[2], sizeof bad[2], "version: 1\ntopic_id: %s", id);
    snprintf(bad[3], sizeof bad[3], "version: 0\ntopic_id: %s\nmore: 1\n", id);
    snprintf(bad[4], sizeof bad[4], "version: 0\ntopic_id: %s%s", id, id); /* 44 chars */
    for (int row = 0; row < 5; row++) {
        write_text(path, bad[row]);
        eng_manager_opts o = f->opts;
        eng_errdetail err = {0};
        m = NULL;
        int rc = eng_manager_open(&o, &m, &err);
        if (rc == 0) {
            eng_manager_close(m);
            fail_msg("row %d: the start went on with '%s'", row, bad[row]);
        }
        assert_null(m);
        assert_int_equal(rc, ENG_ECORRUPT);
        assert_non_null(strstr(err.message, "orders-1/partition.metadata"));
        /* Its own account only, not the code's text under it. */
        assert_false(logged(f, "partition 1 failed to load: corrupt record batch"));
        assert_int_equal(ts_file_size(log), log_size);
        expect_text(path, bad[row]);
        char stray[600];
        assert_int_equal(find_set_aside(f, "orders-", "stray", stray, sizeof stray), 0);
    }
    assert_int_equal(unlink(path), 0);
    m = open_mgr(f);
    expect_offsets(m, "orders", 1, 0, 6);
    assert_true(eng_manager_close(m));
}

static void test_crlf_line_ends(void **state)
{
    fixture *f = *state;
    eng_manager *m = open_mgr(f);
    assert_int_equal(create(m, "orders", 3), 0);
    append_records(m, "orders", 0, 4);
    append_records(m, "orders", 1, 5);
    append_records(m, "orders", 2, 6);
    char id[23];
    topic_id_of(m, "orders", id);
    assert_true(eng_manager_close(m));
    char path[700], text[128];
    snprintf(path, sizeof path, "%s/orders-0/partition.metadata", f->data);
    snprintf(text, sizeof text, "version: 0\r\ntopic_id: %s\r\n", id);
    write_text(path, text);
    /* Another id, as Kafka wrote it for another incarnation, then CRLF'd. */
    snprintf(path, sizeof path, "%s/orders-1/partition.metadata", f->data);
    write_text(path, "version: 0\r\ntopic_id: AAAAAAAAAAAAAAAAAAAAAA");
    /* A bare CR ends a line for readLine too (an old Mac editor's). */
    snprintf(path, sizeof path, "%s/orders-2/partition.metadata", f->data);
    write_text(path, "version: 0\rtopic_id: BBBBBBBBBBBBBBBBBBBBBB\r");

    eng_manager_opts o = f->opts;
    eng_errdetail err = {0};
    m = NULL;
    int rc = eng_manager_open(&o, &m, &err);
    if (rc)
        fail_msg("the start was refused: %s", err.message);
    char stray[600];
    assert_int_equal(find_set_aside(f, "orders-0.", "stray", stray, sizeof stray), 0);
    assert_int_equal(find_set_aside(f, "orders-1.", "stray", stray, sizeof stray), 1);
    assert_int_equal(find_set_aside(f, "orders-2.", "stray", stray, sizeof stray), 1);
    expect_offsets(m, "orders", 0, 0, 4);
    expect_offsets(m, "orders", 1, 5, 5);
    expect_offsets(m, "orders", 2, 6, 6);
    assert_true(eng_manager_close(m));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_other_incarnation_is_set_aside, setup, teardown),
        cmocka_unit_test_setup_teardown(test_without_metadata_still_loads, setup, teardown),
        cmocka_unit_test_setup_teardown(test_garbled_metadata_stops_the_start, setup, teardown),
        cmocka_unit_test_setup_teardown(test_crlf_line_ends, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
