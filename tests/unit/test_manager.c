/*
 * test_manager.c - the log manager over one data dir (DESIGN §2, §3):
 * topics created, listed, described, grown and deleted; refusals (duplicate,
 * invalid names, partition counts, configs) that leave nothing on disk; the
 * files Kafka expects (partition dirs, meta/<topic>.json,
 * leader-epoch-checkpoint, partition.metadata); deletion by renaming to
 * "<topic>-<p>.<32 hex>-delete"; the .lock that keeps a second manager out;
 * the clean-shutdown marker and checkpoints written by close and honoured by
 * the next open.
 *
 * The engine does not speak JSON: service/ installs the real codec.  Here a
 * tiny line-based codec (ts_line_codec, support.c) stands in ("name\npartitions\ntopic_id\ncreated\n"
 * then "key=value" lines).
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "eng_batch.h"
#include "eng_checkpoint.h"
#include "eng_error.h"
#include "eng_fault.h"
#include "eng_logger.h"
#include "eng_manager.h"
#include "eng_process.h"
#include "eng_retention.h"
#include "eng_fs.h"
#include "manager_fixture.h"
#include "support.h"

#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* ---- fixture: manager_fixture.h ---------------------------------------- */

static void expect_file(const char *path, const char *want)
{
    uint8_t *raw;
    size_t len;
    if (ts_read_file(path, &raw, &len))
        fail_msg("cannot read %s", path);
    assert_int_equal(len, strlen(want));
    assert_memory_equal(raw, want, len);
    free(raw);
}

static int create(eng_manager *m, const char *name, int32_t n, const char *k, const char *v,
                  eng_errdetail *err)
{
    const char *keys[1] = {k}, *values[1] = {v};
    return eng_manager_create_topic(m, name, n, keys, values, k ? 1 : 0, err);
}

/* Waits (up to 10 s) for the background removal of a deleted partition dir
 * and returns the renamed directory name it logged. */
static void wait_removed(fixture *f, const char *topic, int32_t id, char *name, size_t cap)
{
    char prefix[600];
    snprintf(prefix, sizeof prefix, "removed %s/%s-%d.", f->data, topic, (int)id);
    for (int tries = 0; tries < 1000; tries++) {
        pthread_mutex_lock(&f->mu);
        const char *hit = strstr(f->log, prefix);
        if (hit) {
            const char *s = hit + strlen("removed ") + strlen(f->data) + 1, *e = strchr(s, '\n');
            snprintf(name, cap, "%.*s", (int)(e - s), s);
            pthread_mutex_unlock(&f->mu);
            return;
        }
        pthread_mutex_unlock(&f->mu);
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    fail_msg("no removal of %s-%d logged; log:\n%s", topic, (int)id, f->log);
}

/* ---- tests -------------------------------------------------------------- */

static void test_create_list_describe_grow(void **state)
{
    fixture *f = *state;
    eng_manager *m = open_mgr(f);
    eng_startup_report rep;
    eng_manager_startup_report(m, &rep);
    assert_false(rep.clean_shutdown);
    assert_true(rep.first_start);
    assert_non_null(strstr(f->log, "(first start, 0 segments recovered")); /* not "unclean" */
    assert_int_equal(rep.topics, 0);
    assert_string_equal(eng_manager_log_dir(m), f->data);

    const char *keys[] = {"retention.ms", "cleanup.policy"}, *vals[] = {"1000", "compact,delete"};
    eng_errdetail err = {0};
    assert_int_equal(eng_manager_create_topic(m, "orders", 3, keys, vals, 2, &err), 0);
    assert_int_equal(create(m, "alpha", 1, NULL, NULL, NULL), 0);
    char **names;
    size_t n;
    assert_int_equal(eng_manager_list_topics(m, &names, &n), 0);
    assert_int_equal(n, 2);
    assert_string_equal(names[0], "alpha");
    assert_string_equal(names[1], "orders");
    eng_strv_free(names, n);

    eng_topic_desc d;
    assert_int_equal(eng_manager_describe_topic(m, "orders", &d), 0);
    assert_string_equal(d.meta.name, "orders");
    assert_int_equal(d.meta.partitions, 3);
    assert_int_equal(strlen(d.meta.topic_id), 22);
    assert_int_equal(strspn(d.meta.topic_id, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                                             "0123456789-_"),
                     22);
    assert_true(d.meta.created_ms > 1600000000000LL);
    assert_string_equal(d.meta.overrides.text[ENG_CFG_RETENTION_MS], "1000");
    assert_null(d.meta.overrides.text[ENG_CFG_SEGMENT_BYTES]);
    assert_int_equal(d.config.v[ENG_CFG_RETENTION_MS].i, 1000);
    assert_int_equal(d.config.v[ENG_CFG_CLEANUP_POLICY].i, ENG_POLICY_COMPACT | ENG_POLICY_DELETE);
    assert_int_equal(d.config.v[ENG_CFG_SEGMENT_BYTES].i, 1073741824);
    char topic_id[23];
    snprintf(topic_id, sizeof topic_id, "%s", d.meta.topic_id);
    eng_topic_desc_clear(&d);
    assert_int_equal(eng_manager_describe_topic(m, "nope", &d), ENG_ENOTOPIC);

    /* On disk: partition dirs, meta/orders.json, Kafka's per-partition files. */
    char path[700], listing[2048], want[256];
    ts_list_dir(f->data, listing, sizeof listing);
    assert_string_equal(listing, ".lock,alpha-0,meta,orders-0,orders-1,orders-2");
    snprintf(path, sizeof path, "%s/meta", f->data);
    ts_list_dir(path, listing, sizeof listing);
    assert_string_equal(listing, "alpha.json,orders.json");
    snprintf(path, sizeof path, "%s/orders-1", f->data);
    ts_list_dir(path, listing, sizeof listing);
    assert_string_equal(listing, "00000000000000000000.index,00000000000000000000.log,"
                                 "00000000000000000000.timeindex,leader-epoch-checkpoint,"
                                 "partition.metadata");
    snprintf(path, sizeof path, "%s/orders-1/leader-epoch-checkpoint", f->data);
    expect_file(path, "0\n1\n0 0\n");
    snprintf(path, sizeof path, "%s/orders-2/partition.metadata", f->data);
    snprintf(want, sizeof want, "version: 0\ntopic_id: %s", topic_id);
    expect_file(path, want);
    snprintf(path, sizeof path, "%s/meta/orders.json", f->data);
    uint8_t *raw;
    size_t len;
    assert_int_equal(ts_read_file(path, &raw, &len), 0);
    eng_topic_meta meta = {0};
    assert_int_equal(ts_line_codec().decode((char *)raw, len, &meta, NULL), 0);
    free(raw);
    assert_string_equal(meta.name, "orders");
    assert_int_equal(meta.partitions, 3);
    assert_string_equal(meta.topic_id, topic_id);
    assert_string_equal(meta.overrides.text[ENG_CFG_CLEANUP_POLICY], "compact,delete");
    eng_config_overrides_clear(&meta.overrides);

    /* Partition handles carry the resolved config. */
    eng_partition *p;
    assert_int_equal(eng_manager_partition(m, "orders", 2, &p, &err), 0);
    assert_string_equal(eng_partition_topic(p), "orders");
    assert_int_equal(eng_partition_id(p), 2);
    eng_config c;
    eng_partition_get_config(p, &c);
    assert_int_equal(c.v[ENG_CFG_RETENTION_MS].i, 1000);
    eng_partition_unref(p);
    assert_int_equal(eng_manager_partition(m, "orders", 3, &p, &err), ENG_ENOPARTITION);
    assert_int_equal(eng_manager_partition(m, "orders", -1, &p, &err), ENG_ENOPARTITION);
    assert_int_equal(eng_manager_partition(m, "nope", 0, &p, &err), ENG_ENOTOPIC);

    /* Growing: new dirs, metadata rewritten; never shrinking. */
    assert_int_equal(eng_manager_add_partitions(m, "orders", 5, &err), 0);
    snprintf(path, sizeof path, "%s/orders-4/00000000000000000000.log", f->data);
    assert_int_equal(ts_file_size(path), 0);
    assert_int_equal(eng_manager_describe_topic(m, "orders", &d), 0);
    assert_int_equal(d.meta.partitions, 5);
    eng_topic_desc_clear(&d);
    snprintf(path, sizeof path, "%s/meta/orders.json", f->data);
    assert_int_equal(ts_read_file(path, &raw, &len), 0);
    assert_int_equal(ts_line_codec().decode((char *)raw, len, &meta, NULL), 0);
    free(raw);
    assert_int_equal(meta.partitions, 5);
    eng_config_overrides_clear(&meta.overrides);
    assert_int_equal(eng_manager_add_partitions(m, "orders", 5, &err), 0);
    memset(&err, 0, sizeof err);
    assert_int_equal(eng_manager_add_partitions(m, "orders", 2, &err), ENG_EINVAL);
    assert_string_equal(err.key, "partitions");
    assert_int_equal(eng_manager_add_partitions(m, "nope", 2, &err), ENG_ENOTOPIC);
    eng_partition **all;
    assert_int_equal(eng_manager_all_partitions(m, &all, &n), 0);
    assert_int_equal(n, 6);
    eng_partitions_release(all, n);

    /* Overrides replaced as a whole and applied to the partitions at once. */
    eng_config_overrides ov = {{0}};
    assert_int_equal(eng_config_overrides_set(&ov, "segment.bytes", "2097152", NULL), 0);
    assert_int_equal(eng_manager_set_topic_overrides(m, "orders", NULL, &ov, &err), 0);
    assert_int_equal(eng_config_overrides_set(&ov, "min.compaction.lag.ms", "9", NULL), 0);
    assert_int_equal(eng_config_overrides_set(&ov, "max.compaction.lag.ms", "8", NULL), 0);
    assert_int_equal(eng_manager_set_topic_overrides(m, "orders", NULL, &ov, &err), ENG_ECONFIG);
    eng_config_overrides_clear(&ov);
    assert_int_equal(eng_manager_partition(m, "orders", 4, &p, &err), 0);
    eng_partition_get_config(p, &c);
    assert_int_equal(c.v[ENG_CFG_SEGMENT_BYTES].i, 2097152);
    assert_int_equal(c.v[ENG_CFG_RETENTION_MS].i, 604800000); /* no longer overridden */
    eng_partition_unref(p);

    /* A change built from a topic deleted and created again meanwhile does
     * not land on the new one (it carried the old overrides over). */
    eng_topic_desc old_d, new_d;
    assert_int_equal(eng_manager_describe_topic(m, "orders", &old_d), 0);
    assert_int_equal(eng_manager_delete_topic(m, "orders", &err), 0);
    assert_int_equal(create(m, "orders", 1, NULL, NULL, NULL), 0);
    memset(&err, 0, sizeof err);
    assert_int_equal(eng_manager_set_topic_overrides(m, "orders", old_d.meta.topic_id,
                                                     &old_d.meta.overrides, &err),
                     ENG_ENOTOPIC);
    assert_non_null(strstr(err.message, "created again"));
    assert_int_equal(eng_manager_describe_topic(m, "orders", &new_d), 0);
    assert_null(new_d.meta.overrides.text[ENG_CFG_SEGMENT_BYTES]);
    assert_int_equal(eng_manager_set_topic_overrides(m, "orders", new_d.meta.topic_id,
                                                     &old_d.meta.overrides, &err),
                     0);
    eng_topic_desc_clear(&old_d);
    eng_topic_desc_clear(&new_d);
    eng_manager_close(m);
}

static void test_delete_and_recreate(void **state)
{
    fixture *f = *state;
    eng_manager *m = open_mgr(f);
    assert_int_equal(create(m, "orders", 2, NULL, NULL, NULL), 0);
    append_records(m, "orders", 0, 3);
    /* A request may still hold a partition looked up before the delete. */
    eng_partition *held;
    assert_int_equal(eng_manager_partition(m, "orders", 0, &held, NULL), 0);
    eng_errdetail err = {0};
    assert_int_equal(eng_manager_delete_topic(m, "orders", &err), 0);
    assert_int_equal(eng_manager_delete_topic(m, "orders", &err), ENG_ENOTOPIC);

    char path[1200], listing[2048], name[512];
    snprintf(path, sizeof path, "%s/meta/orders.json", f->data);
    assert_int_equal(ts_file_size(path), -1);
    snprintf(path, sizeof path, "%s/orders-0", f->data);
    assert_int_equal(ts_file_size(path), -1);
    for (int p = 0; p < 2; p++) {
        wait_removed(f, "orders", p, name, sizeof name);
        /* <topic>-<p>.<32 hex>-delete */
        char want_prefix[32];
        snprintf(want_prefix, sizeof want_prefix, "orders-%d.", p);
        assert_int_equal(strncmp(name, want_prefix, strlen(want_prefix)), 0);
        const char *hex = name + strlen(want_prefix);
        assert_int_equal(strspn(hex, "0123456789abcdef"), 32);
        assert_string_equal(hex + 32, "-delete");
        snprintf(path, sizeof path, "%s/%s", f->data, name);
        assert_int_equal(ts_file_size(path), -1);
    }

    /* The name is free again at once, and the new topic starts empty. */
    assert_int_equal(create(m, "orders", 1, NULL, NULL, &err), 0);
    eng_partition *p;
    assert_int_equal(eng_manager_partition(m, "orders", 0, &p, NULL), 0);
    assert_int_equal(eng_partition_log_end_offset(p), 0);
    assert_int_equal(eng_manager_partition(m, "orders", 1, &p, NULL), ENG_ENOPARTITION);
    append_records(m, "orders", 0, 2);
    ts_list_dir(f->data, listing, sizeof listing);
    /* The delete rewrote the checkpoints without the old partitions. */
    assert_string_equal(listing, ".lock,log-start-offset-checkpoint,meta,orders-0,"
                                 "recovery-point-offset-checkpoint");
    snprintf(path, sizeof path, "%s/orders-0", f->data);
    char before[2048], after[2048];
    ts_list_dir(path, before, sizeof before);

    /* The old partition now lives at nobody's path: what its holder asks
     * for is refused, and nothing touches the new topic's files (a roll or
     * a retention pass of the old one used to name them). */
    eng_fetch ft;
    memset(&err, 0, sizeof err);
    assert_int_equal(eng_partition_read(held, 0, 1 << 20, &ft, &err), ENG_ENOTOPIC);
    assert_non_null(strstr(err.message, "was deleted"));
    uint8_t buf[4096];
    size_t len = ts_build_batch(buf, sizeof buf, 3, 2, eng_now_ms(), 100);
    eng_append_opts ao = {.expected_offset = -1, .producer_batches = true};
    eng_append_result res;
    assert_int_equal(eng_partition_append(held, buf, len, &ao, &res, &err), ENG_ENOTOPIC);
    int64_t base;
    assert_int_equal(eng_partition_roll(held, &base), ENG_ENOTOPIC);
    eng_retention_report rep;
    assert_int_equal(eng_partition_retention(held, eng_now_ms() + 1000LL * 86400 * 365, false, &rep), 0);
    assert_int_equal(rep.n, 0);
    eng_retention_report_free(&rep);
    int64_t lso;
    assert_int_equal(eng_partition_delete_records(held, -1, &lso, &err), ENG_ENOTOPIC);
    ts_list_dir(path, after, sizeof after);
    assert_string_equal(after, before);
    eng_partition_unref(held);
    assert_int_equal(eng_partition_log_end_offset(p), 2);
    eng_partition_unref(p);
    eng_manager_close(m);
}

static void expect_nothing_created(fixture *f, const char *want_data, const char *want_meta)
{
    char path[700], listing[2048];
    ts_list_dir(f->data, listing, sizeof listing);
    assert_string_equal(listing, want_data);
    snprintf(path, sizeof path, "%s/meta", f->data);
    ts_list_dir(path, listing, sizeof listing);
    assert_string_equal(listing, want_meta);
}

static void test_refusals_create_nothing(void **state)
{
    fixture *f = *state;
    eng_manager *m = open_mgr(f);
    eng_errdetail err = {0};
    assert_int_equal(create(m, "orders", 1, NULL, NULL, &err), 0);
    memset(&err, 0, sizeof err);
    assert_int_equal(create(m, "orders", 4, NULL, NULL, &err), ENG_ETOPICEXISTS);
    assert_non_null(strstr(err.message, "orders"));

    char long_name[260];
    memset(long_name, 'a', sizeof long_name);
    long_name[250] = 0;
    static const char *const bad[] = {"",    ".",    "..",   "a/b",       "a\\b",  "a b",
                                      "caf\xc3\xa9", "../x", "a\n", "orders*", "t:1", "\xff"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0] + 1; i++) {
        const char *name = i < sizeof bad / sizeof bad[0] ? bad[i] : long_name;
        assert_false(eng_topic_name_valid(name));
        if (create(m, name, 1, NULL, NULL, &err) != ENG_ETOPICNAME)
            fail_msg("name %zu accepted", i);
    }
    /* Partition counts and configs. */
    assert_int_equal(create(m, "fresh", 0, NULL, NULL, &err), ENG_EINVAL);
    assert_int_equal(create(m, "fresh", -1, NULL, NULL, &err), ENG_EINVAL);
    static const struct {
        const char *k, *v;
    } cfgs[] = {{"segment.bytes", "1000"},           {"bogus.key", "1"},
                {"min.insync.replicas", "2"},        {"cleanup.policy", "archive"},
                {"retention.ms", "soon"},            {"log.retention.ms", "5"}};
    for (size_t i = 0; i < sizeof cfgs / sizeof cfgs[0]; i++) {
        memset(&err, 0, sizeof err);
        assert_int_equal(create(m, "fresh", 1, cfgs[i].k, cfgs[i].v, &err), ENG_ECONFIG);
        assert_string_equal(err.key, cfgs[i].k);
    }
    const char *keys[] = {"min.compaction.lag.ms", "max.compaction.lag.ms"}, *vals[] = {"10", "5"};
    memset(&err, 0, sizeof err);
    assert_int_equal(eng_manager_create_topic(m, "fresh", 1, keys, vals, 2, &err), ENG_ECONFIG);
    assert_string_equal(err.key, "min.compaction.lag.ms");
    expect_nothing_created(f, ".lock,meta,orders-0", "orders.json");

    /* The longest legal name works: created, and deleted through a
     * "-delete" dir whose topic part is cut to fit 255 bytes, as Kafka does. */
    long_name[249] = 0;
    assert_true(eng_topic_name_valid(long_name));
    assert_true(eng_topic_name_valid("A-b_c.9"));
    assert_true(eng_topic_name_valid("..."));
    memset(&err, 0, sizeof err);
    if (create(m, long_name, 2, NULL, NULL, &err))
        fail_msg("249-char topic refused: %s", err.message);
    char path[1200];
    snprintf(path, sizeof path, "%s/%s-1/00000000000000000000.log", f->data, long_name);
    assert_int_equal(ts_file_size(path), 0);
    snprintf(path, sizeof path, "%s/meta/%s.json", f->data, long_name);
    assert_true(ts_file_size(path) > 0);
    assert_int_equal(eng_manager_delete_topic(m, long_name, &err), 0);
    for (int p = 0; p < 2; p++) {
        /* 255 - strlen("-<p>.<32 hex>-delete") = 213 characters of the topic */
        char name[512], cut[256];
        snprintf(cut, sizeof cut, "%.213s", long_name);
        wait_removed(f, cut, p, name, sizeof name);
        assert_int_equal(strlen(name), 255);
    }
    expect_nothing_created(f,
                           ".lock,log-start-offset-checkpoint,meta,orders-0,"
                           "recovery-point-offset-checkpoint",
                           "orders.json");
    eng_manager_close(m);
}

/* A topic the process could not keep open is refused before any file is
 * made, and so is growing one; a create or grow that fails midway takes back
 * every directory it made. */
static void test_failed_create_or_grow_leaves_nothing(void **state)
{
    fixture *f = *state;
    eng_manager *m = open_mgr(f);
    eng_errdetail err = {0}, grow_err = {0};
    assert_int_equal(create(m, "small", 2, NULL, NULL, &err), 0);

    struct rlimit saved;
    ts_fd_limit(100, &saved); /* 100 more files; 100 partitions need 300 */
    int rc = create(m, "wide", 100, NULL, NULL, &err);
    int grow = eng_manager_add_partitions(m, "small", 102, &grow_err);
    ts_fd_limit_restore(&saved);
    assert_int_equal(rc, -EMFILE);
    assert_string_equal(err.key, "partitions");
    assert_non_null(strstr(err.message, "need 300 open files"));
    assert_non_null(strstr(err.message, "raise the open-files limit"));
    assert_int_equal(grow, -EMFILE);
    expect_nothing_created(f, ".lock,meta,small-0,small-1", "small.json");

    /* The third partition fails to open: the first two go again. */
    eng_fault_set("partition.open=eio@3");
    assert_int_equal(create(m, "mid", 5, NULL, NULL, &err), -EIO);
    eng_fault_set("partition.open=eio@2");
    assert_int_equal(eng_manager_add_partitions(m, "small", 6, &grow_err), -EIO);
    /* A partition opens but its partition.metadata cannot be written (a
     * full disk): it was freed, then freed again by the undo. */
    eng_fault_set("partition.files=enospc@2,partition.files=enospc@5");
    assert_int_equal(create(m, "mid", 3, NULL, NULL, &err), -ENOSPC);
    assert_int_equal(eng_manager_add_partitions(m, "small", 6, &grow_err), -ENOSPC);
    /* The data dir's fsync, which makes the new directories durable, fails. */
    eng_fault_set("topic.sync_dir=eio@1,topic.sync_dir=eio@2");
    assert_int_equal(create(m, "mid", 5, NULL, NULL, &err), -EIO);
    assert_int_equal(eng_manager_add_partitions(m, "small", 6, &grow_err), -EIO);
    eng_fault_set(NULL);
    expect_nothing_created(f, ".lock,meta,small-0,small-1", "small.json");
    eng_topic_desc d;
    assert_int_equal(eng_manager_describe_topic(m, "small", &d), 0);
    assert_int_equal(d.meta.partitions, 2);
    eng_topic_desc_clear(&d);
    /* Nothing is left half-made: both names still work. */
    assert_int_equal(create(m, "mid", 5, NULL, NULL, &err), 0);
    assert_int_equal(eng_manager_add_partitions(m, "small", 6, &grow_err), 0);
    eng_manager_close(m);
}

/* How many entries of the data dir are "<prefix><32 hex>-<suffix>". */
static int count_set_aside(fixture *f, const char *prefix, const char *suffix)
{
    char listing[4096];
    ts_list_dir(f->data, listing, sizeof listing);
    int n = 0;
    for (char *save = NULL, *name = strtok_r(listing, ",", &save); name;
         name = strtok_r(NULL, ",", &save)) {
        size_t pl = strlen(prefix);
        if (!strncmp(name, prefix, pl) && strspn(name + pl, "0123456789abcdef") == 32 &&
            name[pl + 32] == '-' && !strcmp(name + pl + 33, suffix))
            n++;
    }
    return n;
}

/* Partition directories no topic owns (a delete cut short by a crash after
 * its metadata went; files copied in) are set aside as -stray, at startup
 * and when a new partition finds one in its way: never adopted by a topic
 * created under the name, never deleted.  One without records goes. */
static void test_stray_partition_dirs_are_set_aside(void **state)
{
    fixture *f = *state;
    eng_manager *m = open_mgr(f);
    assert_int_equal(create(m, "ghost", 2, NULL, NULL, NULL), 0);
    assert_int_equal(create(m, "orders", 1, NULL, NULL, NULL), 0);
    append_records(m, "ghost", 0, 3);
    eng_manager_close(m);
    char path[1200];
    snprintf(path, sizeof path, "%s/meta/ghost.json", f->data);
    assert_int_equal(unlink(path), 0);
    static const char *const dirs[] = {"orders-3", "orders-01", "notes-x", "-1"};
    for (size_t i = 0; i < sizeof dirs / sizeof dirs[0]; i++) {
        snprintf(path, sizeof path, "%s/%s", f->data, dirs[i]);
        assert_int_equal(mkdir(path, 0755), 0);
    }
    snprintf(path, sizeof path, "%s/x-5", f->data); /* a file, not a directory */
    FILE *fp = fopen(path, "w");
    assert_non_null(fp);
    fclose(fp);

    m = open_mgr(f);
    assert_int_equal(count_set_aside(f, "ghost-0.", "stray"), 1);
    /* Those without a record in them are simply removed. */
    static const char *const empty[] = {"ghost-1", "orders-3"};
    for (size_t i = 0; i < 2; i++) {
        char want[1400];
        snprintf(path, sizeof path, "%s/%s", f->data, empty[i]);
        assert_int_equal(ts_file_size(path), -1);
        snprintf(want, sizeof want, "%s-1.", empty[i]);
        assert_int_equal(count_set_aside(f, want, "stray"), 0);
        snprintf(want, sizeof want, "removed %s: no topic owns it (found at startup)", path);
        assert_non_null(strstr(f->log, want));
    }
    for (size_t i = 1; i < sizeof dirs / sizeof dirs[0]; i++) { /* not partition names */
        snprintf(path, sizeof path, "%s/%s", f->data, dirs[i]);
        struct stat st;
        assert_int_equal(stat(path, &st), 0);
    }
    assert_non_null(strstr(f->log, "ghost-0 belongs to no topic (found at startup)"));
    assert_non_null(strstr(f->log, "remove it once you know it is not needed"));
    eng_partition *p;
    assert_int_equal(eng_manager_partition(m, "orders", 0, &p, NULL), 0);
    eng_partition_unref(p);

    /* The name comes back empty, and so does a partition whose directory
     * someone made while the server ran. */
    assert_int_equal(create(m, "ghost", 1, NULL, NULL, NULL), 0);
    assert_int_equal(eng_manager_partition(m, "ghost", 0, &p, NULL), 0);
    assert_int_equal(eng_partition_log_end_offset(p), 0);
    eng_partition_unref(p);
    snprintf(path, sizeof path, "%s/fresh-0", f->data);
    assert_int_equal(mkdir(path, 0755), 0);
    snprintf(path, sizeof path, "%s/fresh-0/00000000000000000000.log", f->data);
    assert_non_null((fp = fopen(path, "w")));
    fputs("not a record batch", fp);
    fclose(fp);
    assert_int_equal(create(m, "fresh", 1, NULL, NULL, NULL), 0);
    assert_int_equal(ts_file_size(path), 0);
    assert_int_equal(count_set_aside(f, "fresh-0.", "stray"), 1);
    assert_non_null(strstr(f->log, "fresh-0 belongs to no topic (in the way of a new partition)"));
    assert_int_equal(count_set_aside(f, "ghost-0.", "stray"), 1); /* kept */
    eng_manager_close(m);
}

/* "First start" means an empty data dir; a dir with files but no topic and no
 * clean-shutdown marker is a crash of a server that had not written its
 * metadata yet, and is reported as one. */
static void test_first_start_only_when_empty(void **state)
{
    fixture *f = *state;
    char path[1200];
    assert_int_equal(mkdir(f->data, 0755), 0);
    snprintf(path, sizeof path, "%s/lone-0", f->data);
    assert_int_equal(mkdir(path, 0755), 0);
    eng_manager *m = open_mgr(f);
    eng_startup_report rep;
    eng_manager_startup_report(m, &rep);
    assert_false(rep.first_start);
    assert_non_null(strstr(f->log, "(unclean shutdown, 0 segments recovered"));
    eng_manager_close(m);
}

static void test_second_open_is_locked_out(void **state)
{
    fixture *f = *state;
    eng_manager *m = open_mgr(f), *m2 = NULL;
    eng_errdetail err = {0};
    int rc = eng_manager_open(&f->opts, &m2, &err);
    assert_true(rc == -EWOULDBLOCK || rc == -EAGAIN);
    assert_null(m2);
    assert_non_null(strstr(err.message, "in use"));
    eng_manager_close(m);
    assert_int_equal(eng_manager_open(&f->opts, &m2, &err), 0);
    eng_manager_close(m2);
}

/* A start that cannot map an index (vm.max_map_count reached: every
 * segment maps two) says what to raise, as one out of descriptors does;
 * it used to say only "Cannot allocate memory". */
static void test_load_out_of_maps_says_what_to_raise(void **state)
{
    fixture *f = *state;
    eng_manager *m = open_mgr(f), *m2 = NULL;
    assert_int_equal(create(m, "orders", 2, NULL, NULL, NULL), 0);
    append_records(m, "orders", 0, 3);
    eng_manager_close(m);
    eng_errdetail err = {0};
    eng_fault_set("index.map=enomem");
    int rc = eng_manager_open(&f->opts, &m2, &err);
    eng_fault_set(NULL);
    assert_int_equal(rc, -ENOMEM);
    assert_null(m2);
    assert_non_null(strstr(err.message, "vm.max_map_count"));
    assert_int_equal(eng_manager_open(&f->opts, &m2, &err), 0);
    eng_manager_close(m2);
}

/* Out of memory maps is refused up front as out of descriptors is: each
 * partition maps its active segment's two indexes, and a create that ran
 * into vm.max_map_count midway would take every later roll down with it. */
static void test_create_beyond_map_limit_is_refused(void **state)
{
    fixture *f = *state;
    eng_manager *m = open_mgr(f);
    eng_errdetail err = {0}, grow_err = {0};
    assert_int_equal(create(m, "small", 2, NULL, NULL, &err), 0);
    long headroom, limit;
    assert_int_equal(eng_process_map_headroom(&headroom, &limit), 0);
    assert_true(headroom > 0 && headroom < limit);
    /* 100 more maps: room for 10 partitions past the reserve of 64, not 100 */
    eng_process_set_map_limit(limit - headroom + 100);
    int rc = create(m, "wide", 100, NULL, NULL, &err);
    int grow = eng_manager_add_partitions(m, "small", 102, &grow_err);
    int fits = create(m, "narrow", 10, NULL, NULL, NULL);
    eng_process_set_map_limit(0);
    assert_int_equal(rc, -ENOMEM);
    assert_string_equal(err.key, "partitions");
    assert_non_null(strstr(err.message, "need 200 memory maps"));
    assert_non_null(strstr(err.message, "vm.max_map_count"));
    assert_int_equal(grow, -ENOMEM);
    assert_int_equal(fits, 0);
    assert_int_equal(eng_manager_delete_topic(m, "narrow", &err), 0);
    eng_topic_desc d;
    assert_int_equal(eng_manager_describe_topic(m, "small", &d), 0);
    assert_int_equal(d.meta.partitions, 2);
    eng_topic_desc_clear(&d);
    assert_int_equal(eng_manager_describe_topic(m, "wide", &d), ENG_ENOTOPIC);
    eng_manager_close(m);
}

static void test_close_writes_marker_and_checkpoints(void **state)
{
    fixture *f = *state;
    eng_manager *m = open_mgr(f);
    assert_int_equal(create(m, "orders", 2, NULL, NULL, NULL), 0);
    append_records(m, "orders", 0, 30);
    append_records(m, "orders", 1, 10);
    assert_true(eng_manager_close(m));

    char path[700];
    snprintf(path, sizeof path, "%s/.kafka_cleanshutdown", f->data);
    expect_file(path, "{\"version\":0,\"brokerEpoch\":0}");
    snprintf(path, sizeof path, "%s/recovery-point-offset-checkpoint", f->data);
    eng_ckpt c;
    assert_int_equal(eng_checkpoint_read(path, &c), 0);
    assert_int_equal(c.n, 2);
    assert_int_equal(eng_checkpoint_find(&c, "orders", 0, -1), 30);
    assert_int_equal(eng_checkpoint_find(&c, "orders", 1, -1), 10);
    eng_checkpoint_free(&c);
    snprintf(path, sizeof path, "%s/log-start-offset-checkpoint", f->data);
    expect_file(path, "0\n0\n"); /* every log starts at its first segment */
    snprintf(path, sizeof path, "%s/orders-0/00000000000000000000.index", f->data);
    assert_int_equal(ts_file_size(path), 0); /* trimmed at close */

    /* Reopen: a clean shutdown, reported; the marker is consumed. */
    m = open_mgr(f);
    eng_startup_report rep;
    eng_manager_startup_report(m, &rep);
    assert_true(rep.clean_shutdown);
    assert_non_null(strstr(f->log, "(clean shutdown, 0 segments recovered"));
    assert_int_equal(rep.topics, 1);
    assert_int_equal(rep.partitions, 2);
    assert_int_equal(rep.segments, 2);
    assert_int_equal(rep.segments_recovered, 0);
    snprintf(path, sizeof path, "%s/.kafka_cleanshutdown", f->data);
    assert_int_equal(ts_file_size(path), -1);
    eng_partition *p;
    assert_int_equal(eng_manager_partition(m, "orders", 0, &p, NULL), 0);
    assert_int_equal(eng_partition_log_end_offset(p), 30);
    eng_partition_unref(p);
    append_records(m, "orders", 0, 5);
    eng_manager_close(m);

    /* Without the marker (a crash), the log is recovered and garbage cut. */
    assert_int_equal(unlink(path), 0);
    snprintf(path, sizeof path, "%s/orders-0/00000000000000000000.log", f->data);
    long long good = ts_file_size(path);
    FILE *fp = fopen(path, "ab");
    assert_non_null(fp);
    for (int i = 0; i < 100; i++)
        fputc(0x5a, fp);
    assert_int_equal(fclose(fp), 0);
    m = open_mgr(f);
    eng_manager_startup_report(m, &rep);
    assert_false(rep.clean_shutdown);
    assert_int_equal(rep.segments_recovered, 2);
    assert_int_equal(rep.bytes_truncated, 100);
    assert_int_equal(ts_file_size(path), good);
    assert_int_equal(eng_manager_partition(m, "orders", 0, &p, NULL), 0);
    assert_int_equal(eng_partition_log_end_offset(p), 35);
    eng_partition_unref(p);
    eng_manager_close(m);
}

/* A topic deleted and created again under its name, then a crash before
 * the checkpoint jobs ran: the old topic's log start offset and recovery
 * point must not apply to the new one (they hid its records). */
static void test_delete_forgets_checkpoints(void **state)
{
    fixture *f = *state;
    eng_manager *m = open_mgr(f);
    assert_int_equal(create(m, "t", 1, NULL, NULL, NULL), 0);
    append_records(m, "t", 0, 8);
    eng_partition *p;
    assert_int_equal(eng_manager_partition(m, "t", 0, &p, NULL), 0);
    int64_t lso;
    assert_int_equal(eng_partition_delete_records(p, 6, &lso, NULL), 0);
    assert_int_equal(eng_partition_flush(p), 0);
    eng_partition_unref(p);
    assert_int_equal(eng_manager_checkpoint_start_offsets(m), 0);
    assert_int_equal(eng_manager_checkpoint_recovery_points(m), 0);
    char path[700];
    snprintf(path, sizeof path, "%s/log-start-offset-checkpoint", f->data);
    expect_file(path, "0\n1\nt 0 6\n");

    assert_int_equal(eng_manager_delete_topic(m, "t", NULL), 0);
    expect_file(path, "0\n0\n");
    snprintf(path, sizeof path, "%s/recovery-point-offset-checkpoint", f->data);
    expect_file(path, "0\n0\n");
    assert_int_equal(create(m, "t", 1, NULL, NULL, NULL), 0);
    append_records(m, "t", 0, 2);
    eng_manager_abandon(m); /* a crash: no close, no checkpoints, no marker */

    m = open_mgr(f);
    assert_int_equal(eng_manager_partition(m, "t", 0, &p, NULL), 0);
    assert_int_equal(eng_partition_log_start_offset(p), 0);
    assert_int_equal(eng_partition_log_end_offset(p), 2);
    eng_partition_unref(p);
    assert_true(eng_manager_close(m));

    /* A delete cut short before its rewrite (a crash) left entries for
     * partitions that are gone: the next start rewrites the files. */
    snprintf(path, sizeof path, "%s/log-start-offset-checkpoint", f->data);
    FILE *fp = fopen(path, "wb");
    assert_non_null(fp);
    fputs("0\n2\ngone 0 6\nt 3 4\n", fp);
    assert_int_equal(fclose(fp), 0);
    m = open_mgr(f);
    expect_file(path, "0\n0\n");
    assert_true(eng_manager_close(m));
}

/* A full disk at stop: the checkpoint cannot be written, so close says the
 * stop was not clean and leaves no marker; the next start recovers. */
static void test_close_without_space_is_unclean(void **state)
{
    fixture *f = *state;
    eng_manager *m = open_mgr(f);
    assert_int_equal(create(m, "orders", 1, NULL, NULL, NULL), 0);
    append_records(m, "orders", 0, 20);
    eng_fault_set("fs.write_atomic.mid=enospc@1");
    assert_false(eng_manager_close(m));
    eng_fault_set(NULL);
    assert_non_null(strstr(f->log, "writing checkpoints: No space left on device"));
    char path[700];
    snprintf(path, sizeof path, "%s/.kafka_cleanshutdown", f->data);
    assert_int_equal(ts_file_size(path), -1);

    m = open_mgr(f);
    eng_startup_report rep;
    eng_manager_startup_report(m, &rep);
    assert_false(rep.clean_shutdown);
    assert_int_equal(rep.segments_recovered, 1);
    eng_partition *p;
    assert_int_equal(eng_manager_partition(m, "orders", 0, &p, NULL), 0);
    assert_int_equal(eng_partition_log_end_offset(p), 20);
    eng_partition_unref(p);
    assert_true(eng_manager_close(m));
}

/* Unreadable metadata is skipped, not fatal; a corrupt checkpoint means a
 * full recovery. */
static void test_bad_metadata_and_checkpoint(void **state)
{
    fixture *f = *state;
    eng_manager *m = open_mgr(f);
    assert_int_equal(create(m, "orders", 1, NULL, NULL, NULL), 0);
    assert_int_equal(create(m, "other", 1, NULL, NULL, NULL), 0);
    eng_manager_close(m);
    char path[700];
    snprintf(path, sizeof path, "%s/meta/other.json", f->data);
    FILE *fp = fopen(path, "wb");
    assert_non_null(fp);
    fputs("other\n", fp);
    assert_int_equal(fclose(fp), 0);
    snprintf(path, sizeof path, "%s/recovery-point-offset-checkpoint", f->data);
    fp = fopen(path, "wb");
    assert_non_null(fp);
    fputs("0\n5\n", fp);
    assert_int_equal(fclose(fp), 0);

    /* Metadata that does not parse stops the start, naming the file
     * (test_corruption_mgr.c checks that nothing is touched)... */
    eng_manager_opts o = f->opts;
    eng_errdetail err = {0};
    assert_int_equal(eng_manager_open(&o, &m, &err), ENG_ECORRUPT);
    assert_non_null(strstr(err.message, "meta/other.json"));
    /* ... and moved away, the topic is gone and the rest loads. */
    char moved[700];
    snprintf(path, sizeof path, "%s/meta/other.json", f->data);
    snprintf(moved, sizeof moved, "%s/other.json.bad", f->data);
    assert_int_equal(rename(path, moved), 0);
    m = open_mgr(f);
    eng_startup_report rep;
    eng_manager_startup_report(m, &rep);
    assert_int_equal(rep.topics, 1);
    assert_int_equal(rep.segments_recovered, 1); /* recovered despite the marker */
    char **names;
    size_t n;
    assert_int_equal(eng_manager_list_topics(m, &names, &n), 0);
    assert_int_equal(n, 1);
    assert_string_equal(names[0], "orders");
    eng_strv_free(names, n);
    eng_manager_close(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_create_list_describe_grow, setup, teardown),
        cmocka_unit_test_setup_teardown(test_delete_and_recreate, setup, teardown),
        cmocka_unit_test_setup_teardown(test_refusals_create_nothing, setup, teardown),
        cmocka_unit_test_setup_teardown(test_failed_create_or_grow_leaves_nothing, setup, teardown),
        cmocka_unit_test_setup_teardown(test_stray_partition_dirs_are_set_aside, setup, teardown),
        cmocka_unit_test_setup_teardown(test_first_start_only_when_empty, setup, teardown),
        cmocka_unit_test_setup_teardown(test_second_open_is_locked_out, setup, teardown),
        cmocka_unit_test_setup_teardown(test_create_beyond_map_limit_is_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_load_out_of_maps_says_what_to_raise, setup, teardown),
        cmocka_unit_test_setup_teardown(test_close_writes_marker_and_checkpoints, setup, teardown),
        cmocka_unit_test_setup_teardown(test_close_without_space_is_unclean, setup, teardown),
        cmocka_unit_test_setup_teardown(test_delete_forgets_checkpoints, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_metadata_and_checkpoint, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
