/*
 * test_cleaner_ckpt.c - cleaner-offset-checkpoint is checked against the
 * logs, not trusted as loaded (kafka-format.md §11.2; Kafka's
 * LogCleanerManager.cleanableOffsets and its checkpoint pruning):
 *   - an entry of a topic that no longer exists (a delete whose rewrite of
 *     the file failed or was cut short by a crash) is dropped at startup and
 *     the file rewritten: a topic created later under the name cleans from
 *     offset 0, where it inherited the old first dirty offset and kept every
 *     duplicate below it for good;
 *   - an entry past its partition's log end offset (the log lost or
 *     truncated under it) is reset to the log start offset at startup, with
 *     a warning naming both offsets, before appends can carry the log end
 *     past it and make the records below it look clean;
 *   - an entry below the log start offset (records deleted) is cleaned from
 *     the log start offset, with Kafka's warning for a compact-only topic and
 *     none for compact,delete, whose retention moves the start all the time.
 *
 * As in test_cleaner.c, a line-based codec stands in for the service's JSON.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "compact_util.h"
#include "eng_cleaner.h"
#include "eng_fault.h"
#include "eng_fs.h"
#include "eng_logger.h"
#include "eng_manager.h"
#include "eng_retention.h"
#include "manager_fixture.h"
#include "support.h"

/* On-demand runs only: nothing races the test's. */
static int setup_ckpt(void **state)
{
    if (setup_cleaning(state))
        return -1;
    ((fixture *)*state)->copts.threads = 0;
    return 0;
}

static eng_manager *open_with_cleaner(fixture *f)
{
    eng_manager *m = open_mgr(f);
    assert_int_equal(eng_manager_start_cleaner(m), 0);
    return m;
}

static void topic(eng_manager *m, const char *name, const char *policy)
{
    const char *keys[1] = {"cleanup.policy"}, *vals[1] = {policy};
    eng_errdetail err = {0};
    if (eng_manager_create_topic(m, name, 1, keys, vals, 1, &err))
        fail_msg("create %s: %s", name, err.message);
}

static eng_partition *part(eng_manager *m, const char *t)
{
    eng_partition *p;
    assert_int_equal(eng_manager_partition(m, t, 0, &p, NULL), 0);
    return p;
}

/* `versions` rounds of keys <prefix>0..<prefix><nkeys-1> (one batch each),
 * then a roll. */
static void write_keys(eng_partition *p, const char *prefix, int nkeys, int versions)
{
    char keys[10][32], vals[10][32];
    cu_kv recs[10];
    assert_true(nkeys <= 10);
    for (int v = 0; v < versions; v++) {
        for (int k = 0; k < nkeys; k++) {
            snprintf(keys[k], sizeof keys[k], "%s%d", prefix, k);
            snprintf(vals[k], sizeof vals[k], "v%d-%d", v, k);
            recs[k] = (cu_kv){keys[k], vals[k], 0};
        }
        cu_append(p, recs, (size_t)nkeys, CU_T0);
    }
    cu_roll(p);
}

/* Keys k0..k9 three times over [0, 30), then x0..x9 over [30, 40).  A clean
 * from a first dirty offset of 30 maps only the x keys and leaves the 20
 * superseded k records; from 0 it removes them. */
static void dirty_below_30(eng_partition *p)
{
    write_keys(p, "k", 10, 3);
    write_keys(p, "x", 10, 1);
}

static size_t count_records(eng_partition *p)
{
    cu_recs rs;
    cu_read_ok(p, &rs);
    size_t n = rs.n;
    cu_recs_free(&rs);
    return n;
}

static void write_ckpt_text(fixture *f, const char *text)
{
    char path[700];
    snprintf(path, sizeof path, "%s/cleaner-offset-checkpoint", f->data);
    assert_int_equal(eng_fs_write_atomic(path, text, strlen(text)), 0);
}

/* ---- tests ------------------------------------------------------------------ */

/* t-0 written with duplicates below 30, then cleaned: from offset 0, all
 * 20 superseded records removed.  Closes m. */
static void cleaned_from_zero(eng_manager *m)
{
    eng_partition *p = part(m, "t");
    dirty_below_30(p);
    eng_clean_stats st;
    assert_int_equal(eng_cleaner_clean_now(eng_manager_cleaner(m), p, false, &st), 0);
    assert_int_equal(st.first_dirty, 0);
    assert_int_equal(st.records_removed, 20);
    assert_int_equal(count_records(p), 20);
    eng_partition_unref(p);
    assert_true(eng_manager_close(m));
}

/* The delete's rewrite of the file fails (no room: the state a crash
 * between the metadata's removal and that rewrite leaves too), so the file
 * still names the deleted topic.  At the next start the entry must go: the
 * topic created again under the name used to start with first dirty offset
 * 30, and its duplicates below 30 were never compacted. */
static void test_deleted_topic_entry_dropped_at_load(void **state)
{
    fixture *f = *state;
    eng_manager *m = open_with_cleaner(f);
    eng_cleaner *c = eng_manager_cleaner(m);
    topic(m, "t", "compact");
    eng_partition *p = part(m, "t");
    write_keys(p, "k", 10, 3);
    eng_clean_stats st;
    assert_int_equal(eng_cleaner_clean_now(c, p, false, &st), 0);
    assert_int_equal(st.end_offset, 30);
    eng_partition_unref(p);

    eng_fault_set("fs.write_atomic.mid=enospc"); /* the first write: the cleaner's forget */
    assert_int_equal(eng_manager_delete_topic(m, "t", NULL), 0);
    eng_fault_set(NULL);
    char *text = data_file_text(f, "cleaner-offset-checkpoint");
    assert_non_null(text);
    assert_string_equal(text, "0\n1\nt 0 30\n"); /* the window, reproduced */
    free(text);
    assert_true(eng_manager_close(m));

    m = open_with_cleaner(f);
    c = eng_manager_cleaner(m);
    assert_int_equal(eng_cleaner_checkpoint(c, "t", 0), -1);
    assert_true(logged(f, "cleaner-offset-checkpoint: dropping the entry of t-0"));
    text = data_file_text(f, "cleaner-offset-checkpoint");
    assert_string_equal(text, "0\n0\n"); /* rewritten: a crash now cannot bring it back */
    free(text);
    topic(m, "t", "compact");
    cleaned_from_zero(m);
}

/* The partition's log is empty (lost with its directory, or truncated by
 * recovery) while the file says offsets below 30 are clean.  Appends past
 * 30 before the first clean then made [0, 30) look clean for good. */
static void test_entry_past_log_end_reset_at_load(void **state)
{
    fixture *f = *state;
    eng_manager *m = open_with_cleaner(f);
    topic(m, "t", "compact");
    assert_true(eng_manager_close(m));
    write_ckpt_text(f, "0\n1\nt 0 30\n");

    m = open_with_cleaner(f);
    eng_cleaner *c = eng_manager_cleaner(m);
    assert_true(logged(f, "t-0: the checkpointed first dirty offset 30 is past the log end "
                          "offset 0; resetting it to the log start offset 0"));
    assert_int_equal(eng_cleaner_checkpoint(c, "t", 0), 0);
    char *text = data_file_text(f, "cleaner-offset-checkpoint");
    assert_string_equal(text, "0\n1\nt 0 0\n");
    free(text);
    cleaned_from_zero(m);
}

/* Records deleted past the checkpoint: the clean starts at the log start
 * offset (the records below it are gone, nothing dirty is skipped).  Kafka
 * warns for a compact-only topic; for compact,delete retention moves the
 * start past the checkpoint as a matter of course, and it stays quiet. */
static void test_entry_below_log_start(void **state)
{
    fixture *f = *state;
    eng_manager *m = open_with_cleaner(f);
    eng_cleaner *c = eng_manager_cleaner(m);
    const char *names[2] = {"only", "both"}, *policies[2] = {"compact", "compact,delete"};
    for (int i = 0; i < 2; i++) {
        topic(m, names[i], policies[i]);
        eng_partition *p = part(m, names[i]);
        write_keys(p, "k", 10, 3);
        eng_clean_stats st;
        assert_int_equal(eng_cleaner_clean_now(c, p, false, &st), 0);
        assert_int_equal(st.end_offset, 30);
        write_keys(p, "k", 10, 2); /* [30, 50) */
        int64_t lso;
        assert_int_equal(eng_partition_delete_records(p, 40, &lso, NULL), 0);
        assert_int_equal(lso, 40);
        assert_int_equal(eng_cleaner_clean_now(c, p, false, &st), 0);
        assert_int_equal(st.first_dirty, 40);
        assert_int_equal(st.end_offset, 50);
        assert_int_equal(count_records(p), 10);
        assert_int_equal(eng_cleaner_checkpoint(c, names[i], 0), 50);
        eng_partition_unref(p);
    }
    assert_true(logged(f, "only-0: resetting the first dirty offset to the log start offset 40: "
                          "the checkpointed offset 30 is below it"));
    assert_false(logged(f, "both-0: resetting"));
    assert_true(eng_manager_close(m));
}

/* The same failed rewrite with the cleaner's thread running: it writes the
 * file again at its next look, so a process that dies later (after a topic
 * of the name was created) leaves no stale entry for it to inherit. */
static void test_failed_write_retried_by_the_thread(void **state)
{
    fixture *f = *state;
    eng_manager *m = open_with_cleaner(f);
    eng_cleaner *c = eng_manager_cleaner(m);
    topic(m, "t", "compact");
    eng_partition *p = part(m, "t");
    write_keys(p, "k", 10, 3);
    eng_partition_unref(p);
    /* Cleaned on demand or by the thread, whichever comes first. */
    for (int i = 0; i < 1000 && eng_cleaner_checkpoint(c, "t", 0) != 30; i++) {
        eng_clean_stats st;
        p = part(m, "t");
        (void)eng_cleaner_clean_now(c, p, false, &st);
        eng_partition_unref(p);
        ts_sleep_ms(10);
    }
    assert_int_equal(eng_cleaner_checkpoint(c, "t", 0), 30);

    eng_fault_set("fs.write_atomic.mid=enospc");
    assert_int_equal(eng_manager_delete_topic(m, "t", NULL), 0);
    /* The line comes once the file is written. */
    static const char again[] = "cleaner-offset-checkpoint written again after an earlier failure";
    for (int i = 0; i < 1000 && !logged(f, again); i++)
        ts_sleep_ms(10);
    eng_fault_set(NULL);
    assert_true(logged(f, again));
    char *text = data_file_text(f, "cleaner-offset-checkpoint");
    assert_string_equal(text, "0\n0\n");
    free(text);
    assert_true(eng_manager_close(m));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_deleted_topic_entry_dropped_at_load, setup_ckpt,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_entry_past_log_end_reset_at_load, setup_ckpt, teardown),
        cmocka_unit_test_setup_teardown(test_entry_below_log_start, setup_ckpt, teardown),
        cmocka_unit_test_setup_teardown(test_failed_write_retried_by_the_thread, setup_cleaning,
                                        teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
