/*
 * test_partition_restore.c - README "What is on disk": one partition
 * directory put back from a backup taken before its topic was deleted and
 * created again is not adopted by the new topic, through the real server
 * and its metadata codec.
 *
 * The old records (old-0..old-4) must not be served as the new topic's,
 * and the partition must go on at the offset the new topic had reached
 * (2), so no offset its readers have seen is reused; the directory is kept
 * as -stray with its records, and the log names both topic ids.  Before the
 * check, the new topic served old-0..old-4 and took its next append at 5.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "eng_fs.h"
#include "harness.h"
#include "support.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static ls_server g_s;

static int teardown(void **state)
{
    (void)state;
    if (g_s.pid > 0)
        ls_kill9(&g_s);
    ls_cleanup(&g_s); /* the backup too: it is beside the data dir */
    return 0;
}

static long long append(ls_server *s, const char *value)
{
    char body[128];
    snprintf(body, sizeof body, "{\"records\":[{\"key\":\"k\",\"value\":\"%s\"}]}", value);
    ls_resp r;
    assert_int_equal(
        ls_send_json(s, "POST", "/v1/topics/orders/partitions/0/records", body, &r), 0);
    assert_int_equal(r.status, 200);
    long long off = ls_jint(&r, "base_offset");
    ls_resp_free(&r);
    return off;
}

static void topic_id(ls_server *s, char id[23])
{
    ls_resp r;
    assert_int_equal(ls_get(s, "/v1/topics/orders", &r), 0);
    assert_int_equal(r.status, 200);
    const char *v = ls_jstr(&r, "topic_id");
    assert_non_null(v);
    assert_int_equal(strlen(v), 22);
    memcpy(id, v, 23);
    ls_resp_free(&r);
}

/* The stray directory of orders-0 in dir, into name; how many there are. */
static int strays(const char *dir, char *name, size_t cap)
{
    DIR *d = opendir(dir);
    assert_non_null(d);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t len = strlen(e->d_name);
        if (!strncmp(e->d_name, "orders-0.", 9) && len > 6 &&
            !strcmp(e->d_name + len - 6, "-stray")) {
            snprintf(name, cap, "%s", e->d_name);
            n++;
        }
    }
    closedir(d);
    return n;
}

static void test_old_incarnation_is_not_adopted(void **state)
{
    (void)state;
    ls_server *s = &g_s;
    assert_int_equal(ls_start(s, NULL), 0);
    assert_int_equal(ls_create_topic(s, "orders", 1, NULL), 201);
    for (int i = 0; i < 5; i++) {
        char v[16];
        snprintf(v, sizeof v, "old-%d", i);
        assert_int_equal(append(s, v), i);
    }
    char old_id[23], new_id[23];
    topic_id(s, old_id);
    assert_int_equal(ls_stop(s), 0);
    char pdir[1400], backup[1400];
    snprintf(pdir, sizeof pdir, "%s/orders-0", s->dir);
    snprintf(backup, sizeof backup, "%s.backup-orders-0", s->dir);
    assert_int_equal(ts_copy_tree(pdir, backup), 0);

    assert_int_equal(ls_restart(s, NULL), 0);
    ls_resp r;
    assert_int_equal(ls_delete(s, "/v1/topics/orders", &r), 0);
    assert_int_equal(r.status, 204);
    ls_resp_free(&r);
    assert_int_equal(ls_create_topic(s, "orders", 1, NULL), 201);
    topic_id(s, new_id);
    assert_string_not_equal(old_id, new_id);
    assert_int_equal(append(s, "new-0"), 0);
    assert_int_equal(append(s, "new-1"), 1);
    assert_int_equal(ls_stop(s), 0);

    /* The operator puts the old partition back while the server is down. */
    assert_int_equal(eng_fs_remove_tree(pdir), 0);
    assert_int_equal(ts_copy_tree(backup, pdir), 0);
    assert_int_equal(ls_restart(s, NULL), 0);

    assert_int_equal(ls_get(s, "/v1/topics/orders/partitions/0", &r), 0);
    assert_int_equal(r.status, 200);
    assert_int_equal(ls_jint(&r, "log_start_offset"), 2);
    assert_int_equal(ls_jint(&r, "log_end_offset"), 2);
    ls_resp_free(&r);
    assert_int_equal(append(s, "new-2"), 2);
    assert_int_equal(ls_get(s, "/v1/topics/orders/partitions/0/records?offset=2", &r), 0);
    assert_int_equal(r.status, 200);
    assert_string_equal(ls_jstr(&r, "records.0.value"), "new-2");
    assert_null(ls_jget(&r, "records.1"));
    ls_resp_free(&r);

    char stray[300], path[2000];
    assert_int_equal(strays(s->dir, stray, sizeof stray), 1);
    snprintf(path, sizeof path, "%s/%s/00000000000000000000.log", s->dir, stray);
    char old_log[1600];
    snprintf(old_log, sizeof old_log, "%s/00000000000000000000.log", backup);
    assert_int_equal(ls_file_size(path), ls_file_size(old_log));
    size_t len;
    char *log = ls_read_file(s->log_path, &len);
    assert_non_null(log);
    char want[600];
    snprintf(want, sizeof want,
             "has topic id %s in its partition.metadata, but topic orders has id %s", old_id,
             new_id);
    assert_non_null(strstr(log, want));
    free(log);
    assert_int_equal(ls_stop(s), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_old_incarnation_is_not_adopted, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
