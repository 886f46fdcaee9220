/*
 * test_snapshot_races.c - topics deleted, made again and grown while a
 * snapshot is being taken (README "What a snapshot is, exactly": a topic
 * deleted meanwhile is left out whole).
 *
 * The changes are made from a hook on the snapshot's "snapshot.partition"
 * point, which runs on the snapshot's own thread just before it takes each
 * partition, so each lands between two given partitions on every run: no
 * stall to race.  Topics are taken in name order: doomed-0, doomed-1,
 * doomed-2, grows-0, grows-1, keep-0.  Before doomed-1, "doomed" is deleted
 * and made again with one partition (a new incarnation, no records); before
 * grows-0, "grows" goes from 2 to 4 partitions.  The snapshot must hold no
 * file of either doomed (the old one was deleted, the new one was not in
 * the list it started from), "grows" as it was when its partitions were
 * taken (2, in its metadata and on disk), "keep" whole; and a manager
 * opened on it must load exactly that.
 *
 * The snapshot's cleaner-offset-checkpoint must describe the segments it
 * holds: before aa-0 is taken, compacted "bb" (cleaned to offset 10) is
 * deleted and made again with duplicates below offset 10 that were never
 * cleaned, and compacted "cc" (cleaned too) is deleted.  A cleaner started
 * on the snapshot must have no first dirty offset for either (bb's old 10
 * would have it take the new bb's duplicates as clean and keep them), and
 * still aa's.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "compact_util.h"
#include "eng_cleaner.h"
#include "eng_fault.h"
#include "eng_fs.h"
#include "eng_manager.h"
#include "eng_snapshot.h"
#include "manager_fixture.h"
#include "support.h"

#include <stdio.h>
#include <string.h>

typedef struct changes {
    eng_manager *m;
    int calls;
    int rc_delete, rc_create, rc_grow;
} changes;

static void before_partition(void *ctx)
{
    changes *c = ctx;
    eng_errdetail err = {0};
    c->calls++;
    if (c->calls == 2) {
        c->rc_delete = eng_manager_delete_topic(c->m, "doomed", &err);
        c->rc_create = eng_manager_create_topic(c->m, "doomed", 1, NULL, NULL, 0, &err);
    } else if (c->calls == 4) {
        c->rc_grow = eng_manager_add_partitions(c->m, "grows", 4, &err);
    }
}

static bool in_snapshot(fixture *f, const char *rel)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/snapshots/s1/%s", f->data, rel);
    return eng_fs_exists(path);
}

static void test_topics_changed_mid_snapshot(void **state)
{
    fixture *f = *state;
    eng_manager *m = open_mgr(f);
    eng_errdetail err = {0};
    assert_int_equal(eng_manager_create_topic(m, "doomed", 3, NULL, NULL, 0, &err), 0);
    assert_int_equal(eng_manager_create_topic(m, "grows", 2, NULL, NULL, 0, &err), 0);
    assert_int_equal(eng_manager_create_topic(m, "keep", 1, NULL, NULL, 0, &err), 0);
    for (int p = 0; p < 3; p++)
        append_records(m, "doomed", p, 3);
    append_records(m, "grows", 0, 4);
    append_records(m, "grows", 1, 5);
    append_records(m, "keep", 0, 6);

    changes c = {.m = m};
    eng_fault_hook("snapshot.partition", before_partition, &c);
    eng_snapshot_info in;
    int rc = eng_manager_snapshot_create(m, "s1", &in, &err);
    eng_fault_hook(NULL, NULL, NULL);
    if (rc)
        fail_msg("snapshot: %s (%s)", eng_strerror(rc), err.message);
    assert_int_equal(c.rc_delete, 0);
    assert_int_equal(c.rc_create, 0);
    assert_int_equal(c.rc_grow, 0);
    /* doomed-0, doomed-1 (then refused: retired), grows-0, grows-1, keep-0 */
    assert_int_equal(c.calls, 5);
    assert_int_equal(in.topics, 2);
    assert_int_equal(in.partitions, 3);

    for (int p = 0; p < 3; p++) {
        char rel[64];
        snprintf(rel, sizeof rel, "doomed-%d", p);
        assert_false(in_snapshot(f, rel));
    }
    assert_false(in_snapshot(f, "meta/doomed.json"));
    assert_true(in_snapshot(f, "grows-1"));
    assert_false(in_snapshot(f, "grows-2"));
    assert_false(in_snapshot(f, "grows-3"));
    assert_true(in_snapshot(f, "keep-0"));
    eng_manager_close(m);

    /* Opened as a data dir, the snapshot holds exactly the topics it lists. */
    char dir[600];
    snprintf(dir, sizeof dir, "%s/snapshots/s1", f->data);
    f->opts.log_dir = dir;
    m = open_mgr(f);
    char **names;
    size_t n;
    assert_int_equal(eng_manager_list_topics(m, &names, &n), 0);
    assert_int_equal(n, 2);
    assert_string_equal(names[0], "grows");
    assert_string_equal(names[1], "keep");
    eng_strv_free(names, n);
    eng_topic_desc d;
    assert_int_equal(eng_manager_describe_topic(m, "grows", &d), 0);
    assert_int_equal(d.meta.partitions, 2);
    eng_topic_desc_clear(&d);
    const int32_t want[][2] = {{0, 4}, {1, 5}};
    for (int i = 0; i < 2; i++) {
        eng_partition *p;
        assert_int_equal(eng_manager_partition(m, "grows", want[i][0], &p, NULL), 0);
        eng_partition_info pi;
        eng_partition_info_get(p, &pi);
        assert_int_equal(pi.log_end_offset, want[i][1]);
        eng_partition_unref(p);
    }
    eng_partition *p;
    assert_int_equal(eng_manager_partition(m, "keep", 0, &p, NULL), 0);
    eng_partition_info pi;
    eng_partition_info_get(p, &pi);
    assert_int_equal(pi.log_end_offset, 6);
    eng_partition_unref(p);
    assert_false(logged(f, "stray"));
    eng_manager_close(m);
}

/* ---- the cleaner checkpoint --------------------------------------------------- */

static void compacted(eng_manager *m, const char *name)
{
    const char *k = "cleanup.policy", *v = "compact";
    eng_errdetail err = {0};
    if (eng_manager_create_topic(m, name, 1, &k, &v, 1, &err))
        fail_msg("create %s: %s", name, err.message);
}

/* Keys <prefix>0..<prefix>4, `versions` times over, then a roll. */
static void fill(eng_manager *m, const char *topic, const char *prefix, int versions)
{
    eng_partition *p;
    assert_int_equal(eng_manager_partition(m, topic, 0, &p, NULL), 0);
    char keys[5][16];
    cu_kv recs[5];
    for (int i = 0; i < 5; i++) {
        snprintf(keys[i], sizeof keys[i], "%s%d", prefix, i);
        recs[i] = (cu_kv){keys[i], "v", 0};
    }
    for (int v = 0; v < versions; v++)
        cu_append(p, recs, 5, CU_T0);
    cu_roll(p);
    eng_partition_unref(p);
}

static void clean(eng_manager *m, const char *topic, eng_clean_stats *st)
{
    eng_partition *p;
    assert_int_equal(eng_manager_partition(m, topic, 0, &p, NULL), 0);
    assert_int_equal(eng_cleaner_clean_now(eng_manager_cleaner(m), p, false, st), 0);
    eng_partition_unref(p);
}

typedef struct remake {
    eng_manager *m;
    int calls;
    int rc_delete, rc_gone;
} remake;

static void remake_bb(void *ctx)
{
    remake *r = ctx;
    if (r->calls++)
        return;
    eng_errdetail err = {0};
    r->rc_delete = eng_manager_delete_topic(r->m, "bb", &err);
    r->rc_gone = eng_manager_delete_topic(r->m, "cc", &err);
    compacted(r->m, "bb");
    fill(r->m, "bb", "x", 2); /* [0, 10): x0..x4 twice, never cleaned */
    fill(r->m, "bb", "y", 1); /* [10, 15) */
}

static void test_cleaner_checkpoint_matches_segments(void **state)
{
    fixture *f = *state;
    f->copts.threads = 0; /* on-demand runs only: nothing races the test */
    eng_manager *m = open_mgr(f);
    assert_int_equal(eng_manager_start_cleaner(m), 0);
    eng_clean_stats st;
    const char *names[] = {"aa", "bb", "cc"};
    for (int i = 0; i < 3; i++) {
        compacted(m, names[i]);
        fill(m, names[i], "k", 2);
        clean(m, names[i], &st);
        assert_int_equal(st.end_offset, 10);
    }

    remake r = {.m = m};
    eng_errdetail err = {0};
    eng_fault_hook("snapshot.partition", remake_bb, &r);
    int rc = eng_manager_snapshot_create(m, "s1", NULL, &err);
    eng_fault_hook(NULL, NULL, NULL);
    if (rc)
        fail_msg("snapshot: %s (%s)", eng_strerror(rc), err.message);
    assert_int_equal(r.rc_delete, 0);
    assert_int_equal(r.rc_gone, 0);
    assert_int_equal(r.calls, 2); /* aa-0, the new bb-0 */
    eng_manager_close(m);

    char dir[600];
    snprintf(dir, sizeof dir, "%s/snapshots/s1", f->data);
    f->opts.log_dir = dir;
    m = open_mgr(f);
    assert_int_equal(eng_manager_start_cleaner(m), 0);
    eng_cleaner *c = eng_manager_cleaner(m);
    assert_int_equal(eng_cleaner_checkpoint(c, "aa", 0), 10);
    assert_int_equal(eng_cleaner_checkpoint(c, "bb", 0), -1);
    assert_int_equal(eng_cleaner_checkpoint(c, "cc", 0), -1);
    /* Cleaned from its start, the new bb loses its five older x values. */
    clean(m, "bb", &st);
    assert_int_equal(st.first_dirty, 0);
    assert_int_equal(st.records_removed, 5);
    eng_manager_close(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_topics_changed_mid_snapshot, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cleaner_checkpoint_matches_segments, setup_cleaning,
                                        teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
