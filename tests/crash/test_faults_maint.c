/*
 * test_faults_maint.c - the fault points of compaction, of atomic file
 * writes and of retention, driven through the real server as in
 * test_faults.c (which has the append, fsync and roll points):
 *
 *   compact.before_swap     old data after the restart, no .cleaned left
 *   compact.after_swap      exit and eio: the restart completes the swap
 *   compact.before_final    the restart completes the swap (.swap + .deleted)
 *   cleaner.before_checkpoint  compacted data; the next clean is harmless
 *   topic.delete.before_forget  the deleted topic's cleaner checkpoint entry
 *                           left in the file is dropped at the restart: the
 *                           topic created again cleans from offset 0
 *   segment.append.truncate  a clean's refused write not cut back: its own
 *                           error (507), the dir online, the next clean fine
 *   fs.write_atomic.mid     exit in a checkpoint job: the old checkpoints
 *                           intact, the torn .tmp ignored and removed;
 *                           enospc on topic creation: 507, nothing created
 *   retention.after_start_offset  the start offset is only as durable as its
 *                           checkpoint (see the test)
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "faults_fixture.h"

/* ---- compaction ---------------------------------------------------------------- */

/* Three generations of keys c-0..c-9 in three batches, then a roll: the
 * first segment is cleanable.  Generation g of key i is at offset 10g + i. */
static void compacted_setup(ls_server *s, const char *fault, const char *const *extra)
{
    start(s, fault, extra ? extra : NO_CLEANER, false);
    assert_int_equal(ls_create_topic(s, "c", 1, COMPACT), 201);
    for (int g = 0; g < 3; g++)
        append_ok(s, "c", 10, "c");
    roll(s, "c");
}

static long compaction_run(ls_server *s)
{
    ls_resp r;
    if (ls_post(s, "/v1/topics/c/compaction:run", "{}", &r))
        return 0;
    long st = r.status;
    ls_resp_free(&r);
    return st;
}

/* After a finished clean: generation 2 stays, generations 0 and 1 are gone. */
static void check_compacted(ls_server *s)
{
    cc_part p = check_files(s, "c", 20);
    for (int64_t off = 0; off < 20; off++)
        if (cc_find(&p, off))
            fail_msg("superseded offset %lld survived the clean", (long long)off);
    assert_int_equal(p.nrecs, 10);
    assert_int_equal(p.next_offset, 30);
    cc_part_free(&p);
}

static void check_uncompacted(ls_server *s)
{
    cc_part p = check_files(s, "c", 0);
    assert_int_equal(p.nrecs, 30);
    cc_part_free(&p);
}

static void test_compact_before_swap(void **state)
{
    (void)state;
    static ls_server s; /* static: the teardown finds it after a failed assertion */
    compacted_setup(&s, "compact.before_swap=exit", NULL);
    assert_int_equal(compaction_run(&s), 0);
    assert_int_equal(wait_exit(&s), 86);
    assert_int_equal(count_suffix(&s, "c", ".log.cleaned"), 1);
    start(&s, NULL, NO_CLEANER, true);
    check_no_leftovers(&s);
    check_uncompacted(&s); /* the old data, every generation */
    assert_int_equal(compaction_run(&s), 200);
    check_compacted(&s);
    assert_int_equal(ls_stop(&s), 0);
    ls_cleanup(&s);
}

/* A crash (or I/O error) once the cleaned segment is renamed .swap: the
 * restart completes the swap. */
static void swap_completed(const char *fault, const char *suffix_before, bool crash)
{
    static ls_server s; /* static: the teardown finds it after a failed assertion */
    compacted_setup(&s, fault, NULL);
    if (crash) {
        assert_int_equal(compaction_run(&s), 0);
        assert_int_equal(wait_exit(&s), 86);
    } else {
        assert_int_equal(compaction_run(&s), 500);
        char st[32];
        assert_int_equal(ready_status(&s, st, sizeof st), 503);
        assert_string_equal(st, "offline");
        assert_int_equal(ls_stop(&s), 0);
    }
    assert_int_equal(count_suffix(&s, "c", ".log.swap"), 1);
    if (suffix_before)
        assert_int_equal(count_suffix(&s, "c", suffix_before), 1);
    start(&s, NULL, NO_CLEANER, true);
    check_no_leftovers(&s);
    check_compacted(&s);
    /* Reads agree with the files: the latest value of every key. */
    ls_resp r;
    assert_int_equal(ls_get(&s, "/v1/topics/c/partitions/0/records?offset=0", &r), 0);
    assert_int_equal(r.status, 200);
    assert_int_equal(json_array_size(json_object_get(r.json, "records")), 10);
    assert_int_equal(ls_jint(&r, "records.0.offset"), 20);
    assert_string_equal(ls_jstr(&r, "records.0.value"), M.val[20]);
    ls_resp_free(&r);
    append_ok(&s, "c", 10, "c");
    cc_part p = check_files(&s, "c", 20);
    cc_part_free(&p);
    assert_int_equal(ls_stop(&s), 0);
    ls_cleanup(&s);
}

static void test_compact_after_swap(void **state)
{
    (void)state;
    swap_completed("compact.after_swap=exit", NULL, true);
}

static void test_compact_after_swap_eio(void **state)
{
    (void)state;
    swap_completed("compact.after_swap=eio", NULL, false);
}

static void test_compact_before_final(void **state)
{
    (void)state;
    swap_completed("compact.before_final=exit", ".log.deleted", true);
}

static void test_cleaner_before_checkpoint(void **state)
{
    (void)state;
    static ls_server s; /* static: the teardown finds it after a failed assertion */
    compacted_setup(&s, "cleaner.before_checkpoint=exit", NULL);
    assert_int_equal(compaction_run(&s), 0);
    assert_int_equal(wait_exit(&s), 86);
    char path[600];
    snprintf(path, sizeof path, "%s/cleaner-offset-checkpoint", s.dir);
    assert_int_equal(ls_file_size(path), -1); /* never written */
    start(&s, NULL, NO_CLEANER, true);
    check_no_leftovers(&s);
    check_compacted(&s);
    /* The next clean starts from the log start again: harmless. */
    assert_int_equal(compaction_run(&s), 200);
    check_compacted(&s);
    assert_true(ls_file_size(path) > 0);
    assert_int_equal(ls_stop(&s), 0);
    ls_cleanup(&s);
}

/* A crash in a topic delete after its metadata went, before it rewrote
 * cleaner-offset-checkpoint: the file still says c-0 is clean below 30.  The
 * topic created again under the name inherited that offset, and its
 * superseded records below 30 (keys not written again above it) stayed. */
static void test_delete_before_cleaner_forget(void **state)
{
    (void)state;
    static ls_server s; /* static: the teardown finds it after a failed assertion */
    compacted_setup(&s, "topic.delete.before_forget=exit", NULL);
    assert_int_equal(compaction_run(&s), 200);
    ls_resp r;
    if (ls_delete(&s, "/v1/topics/c", &r) == 0)
        ls_resp_free(&r);
    assert_int_equal(wait_exit(&s), 86);
    char path[600];
    snprintf(path, sizeof path, "%s/cleaner-offset-checkpoint", s.dir);
    size_t len;
    char *text = ls_read_file(path, &len);
    assert_non_null(text);
    assert_string_equal(text, "0\n1\nc 0 30\n"); /* the window */
    free(text);
    start(&s, NULL, NO_CLEANER, true);
    memset(&M, 0, sizeof M);
    assert_int_equal(ls_create_topic(&s, "c", 1, COMPACT), 201);
    for (int g = 0; g < 3; g++)
        append_ok(&s, "c", 10, "c");
    append_ok(&s, "c", 10, "d");
    roll(&s, "c");
    assert_int_equal(compaction_run(&s), 200);
    cc_part p = check_files(&s, "c", 20);
    for (int64_t off = 0; off < 20; off++)
        if (cc_find(&p, off))
            fail_msg("superseded offset %lld survived the clean", (long long)off);
    assert_int_equal(p.nrecs, 20);
    cc_part_free(&p);
    assert_int_equal(ls_stop(&s), 0);
    ls_cleanup(&s);
}

/* The cleaned segment refuses a write (a full disk) and cannot be cut
 * back either.  Unlike an append's, the refused bytes are in a file the
 * clean throws away whole, so nothing is wrong with the log: the answer is
 * the write's own error (507), not 503 log_dir_offline with the dir still
 * online, and the next clean succeeds. */
static void test_compact_write_and_cut_fail(void **state)
{
    (void)state;
    static ls_server s; /* static: the teardown finds it after a failed assertion */
    /* Hits 1-3 are the setup's appends; the 4th is the clean's first write. */
    compacted_setup(&s, "segment.append.partial=enospc@4,segment.append.truncate=eio", NULL);
    ls_resp r;
    assert_int_equal(ls_post(&s, "/v1/topics/c/compaction:run", "{}", &r), 0);
    CHECK_ERR(r, 507, "disk_full");
    ls_resp_free(&r);
    char st[32];
    assert_int_equal(ready_status(&s, st, sizeof st), 200);
    assert_int_equal(count_suffix(&s, "c", ".log.cleaned"), 0);
    check_uncompacted(&s);
    assert_int_equal(compaction_run(&s), 200);
    check_compacted(&s);
    append_ok(&s, "c", 10, "c");
    assert_int_equal(ls_stop(&s), 0);
    ls_cleanup(&s);
}

/* ---- fs.write_atomic.mid ------------------------------------------------------------ */

static void test_checkpoint_write_exit(void **state)
{
    (void)state;
    static ls_server s; /* static: the teardown finds it after a failed assertion */
    start(&s, NULL, NULL, false);
    assert_int_equal(ls_create_topic(&s, "t", 1, DURABLE), 201);
    for (int b = 0; b < 3; b++)
        append_ok(&s, "t", 5, "a");
    ls_resp r;
    assert_int_equal(ls_post(&s, "/v1/topics/t/partitions/0/records:delete", "{\"before_offset\":5}", &r), 0);
    assert_int_equal(r.status, 200);
    ls_resp_free(&r);
    assert_int_equal(ls_stop(&s), 0); /* writes both checkpoints */
    char rp[600], lso[600];
    snprintf(rp, sizeof rp, "%s/recovery-point-offset-checkpoint", s.dir);
    snprintf(lso, sizeof lso, "%s/log-start-offset-checkpoint", s.dir);
    size_t rp_len, lso_len, l2;
    char *rp0 = ls_read_file(rp, &rp_len), *lso0 = ls_read_file(lso, &lso_len);
    assert_non_null(rp0);
    assert_non_null(lso0);
    assert_string_equal(rp0, "0\n1\nt 0 15\n");
    assert_string_equal(lso0, "0\n1\nt 0 5\n");

    /* The checkpoint jobs first run 2.5 s after the start; durable appends move
     * the recovery point before that, so the job has something new to write. */
    static const char *const jobs[] = {"log.initial.task.delay.ms=2500",
                                       "log.flush.offset.checkpoint.interval.ms=100",
                                       "log.flush.start.offset.checkpoint.interval.ms=100", NULL};
    start(&s, "fs.write_atomic.mid=exit", jobs, true);
    for (int b = 0; b < 3; b++)
        append_ok(&s, "t", 5, "b");
    assert_int_equal(wait_exit(&s), 86);
    char *rp1 = ls_read_file(rp, &l2);
    assert_non_null(rp1);
    assert_string_equal(rp1, rp0); /* the previous checkpoint is intact */
    free(rp1);
    rp1 = ls_read_file(lso, &l2);
    assert_non_null(rp1);
    assert_string_equal(rp1, lso0);
    free(rp1);
    char tmp1[700], tmp2[700];
    snprintf(tmp1, sizeof tmp1, "%s.tmp", rp);
    snprintf(tmp2, sizeof tmp2, "%s.tmp", lso);
    long long t1 = ls_file_size(tmp1), t2 = ls_file_size(tmp2);
    assert_true(t1 >= 0 || t2 >= 0); /* the torn temporary file */
    assert_true(t1 < (long long)rp_len && t2 < (long long)lso_len);

    start(&s, NULL, NULL, true);
    assert_int_equal(startup(&s, "clean_shutdown"), 0);
    check_no_leftovers(&s); /* the .tmp is ignored, then removed */
    assert_int_equal(part_field(&s, "t", "log_start_offset"), 5);
    cc_part p = check_files(&s, "t", 0);
    assert_int_equal(p.next_offset, 30);
    cc_part_free(&p);
    assert_int_equal(ls_stop(&s), 0);
    free(rp0);
    free(lso0);
    ls_cleanup(&s);
}

static void test_topic_meta_enospc(void **state)
{
    (void)state;
    static ls_server s; /* static: the teardown finds it after a failed assertion */
    start(&s, "fs.write_atomic.mid=enospc@1", NULL, false);
    ls_resp r;
    assert_int_equal(ls_post(&s, "/v1/topics", "{\"name\":\"t\",\"partitions\":2}", &r), 0);
    CHECK_ERR(r, 507, "disk_full");
    ls_resp_free(&r);
    char path[600];
    snprintf(path, sizeof path, "%s/t-0", s.dir);
    assert_int_equal(ls_file_size(path), -1);
    snprintf(path, sizeof path, "%s/meta/t.json", s.dir);
    assert_int_equal(ls_file_size(path), -1);
    check_no_leftovers(&s);
    assert_int_equal(ls_get(&s, "/v1/topics/t", &r), 0);
    CHECK_ERR(r, 404, "unknown_topic");
    ls_resp_free(&r);
    assert_int_equal(ls_create_topic(&s, "t", 1, PLAIN), 201);
    append_ok(&s, "t", 5, "a");
    assert_int_equal(ls_stop(&s), 0);
    ls_cleanup(&s);
}

/* ---- retention.after_start_offset ---------------------------------------------------- */

/* Four segments of 10 records; retention.bytes then keeps the last two.
 * The fault fires after the start offset moved in memory and the segments
 * left the view, before any file was renamed.  What the code guarantees:
 * the log start offset is durable only through log-start-offset-checkpoint
 * (written by its job and at a clean stop), and a segment only goes once it
 * is renamed .deleted.  So after the restart the segments are all still
 * there, unrenamed, and the start offset is what the checkpoint last said:
 *   - no checkpoint since the move: the start is back at 0 and offsets below
 *     the retention's new start read their data (nothing was lost, and the
 *     files and the start agree);
 *   - checkpoint written after an earlier records:delete: the start is that
 *     offset and reads below it answer 416.
 * A retention run after the restart then deletes the segments for good. */
static void retention_crash(bool checkpointed)
{
    static ls_server s; /* static: the teardown finds it after a failed assertion */
    static const char *const jobs[] = {"log.initial.task.delay.ms=100",
                                       "log.flush.start.offset.checkpoint.interval.ms=100", NULL};
    start(&s, "retention.after_start_offset=exit", checkpointed ? jobs : NULL, false);
    assert_int_equal(ls_create_topic(&s, "r", 1, PLAIN), 201);
    for (int seg = 0; seg < 4; seg++) {
        append_ok(&s, "r", 10, "r");
        if (seg < 3)
            roll(&s, "r");
    }
    ls_resp r;
    long long start_after = 0;
    if (checkpointed) {
        assert_int_equal(ls_post(&s, "/v1/topics/r/partitions/0/records:delete", "{\"before_offset\":5}", &r), 0);
        assert_int_equal(r.status, 200);
        ls_resp_free(&r);
        /* The log-start-offset-checkpoint job (every 100 ms) writes 5. */
        char path[600], *txt = NULL;
        size_t len;
        snprintf(path, sizeof path, "%s/log-start-offset-checkpoint", s.dir);
        for (int i = 0; i < 400; i++, sleep_ms(25)) {
            free(txt);
            if ((txt = ls_read_file(path, &len)) && !strcmp(txt, "0\n1\nr 0 5\n"))
                break;
        }
        assert_non_null(txt);
        assert_string_equal(txt, "0\n1\nr 0 5\n");
        free(txt);
        start_after = 5;
    }
    long long seg_bytes = seg_file_size(&s, "r", 0, ".log");
    char body[64];
    snprintf(body, sizeof body, "{\"value\":\"%lld\"}", 2 * seg_bytes + 10);
    assert_int_equal(ls_send_json(&s, "PUT", "/v1/topics/r/configs/retention.bytes", body, &r), 0);
    assert_int_equal(r.status, 200);
    ls_resp_free(&r);
    assert_int_equal(ls_post(&s, "/v1/topics/r/retention:run", "{}", &r), -1);
    assert_int_equal(wait_exit(&s), 86);

    start(&s, NULL, NULL, true);
    check_no_leftovers(&s);
    cc_part p = check_files(&s, "r", 0);
    assert_int_equal(p.nsegments, 4);
    assert_int_equal(p.first_base, 0);
    assert_int_equal(p.next_offset, 40);
    cc_part_free(&p);
    assert_int_equal(part_field(&s, "r", "log_start_offset"), start_after);
    assert_int_equal(ls_get(&s, "/v1/topics/r/partitions/0/records?offset=5", &r), 0);
    assert_int_equal(r.status, 200);
    assert_string_equal(ls_jstr(&r, "records.0.value"), M.val[5]);
    ls_resp_free(&r);
    assert_int_equal(ls_get(&s, "/v1/topics/r/partitions/0/records?offset=0", &r), 0);
    if (checkpointed)
        CHECK_ERR(r, 416, "offset_out_of_range");
    else
        assert_string_equal(ls_jstr(&r, "records.0.value"), M.val[0]);
    ls_resp_free(&r);

    /* The next run deletes the two oldest segments properly. */
    assert_int_equal(ls_post(&s, "/v1/topics/r/retention:run", "{}", &r), 0);
    assert_int_equal(r.status, 200);
    ls_resp_free(&r);
    assert_int_equal(part_field(&s, "r", "log_start_offset"), 20);
    assert_int_equal(ls_get(&s, "/v1/topics/r/partitions/0/records?offset=0", &r), 0);
    CHECK_ERR(r, 416, "offset_out_of_range");
    ls_resp_free(&r);
    assert_int_equal(ls_stop(&s), 0);
    start(&s, NULL, NULL, true);
    p = check_files(&s, "r", 20);
    assert_int_equal(p.first_base, 20);
    cc_part_free(&p);
    assert_int_equal(part_field(&s, "r", "log_start_offset"), 20);
    assert_int_equal(ls_stop(&s), 0);
    ls_cleanup(&s);
}

static void test_retention_after_start_offset(void **state)
{
    (void)state;
    retention_crash(false);
}

static void test_retention_after_start_offset_checkpointed(void **state)
{
    (void)state;
    retention_crash(true);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_compact_before_swap, setup, teardown),
        cmocka_unit_test_setup_teardown(test_compact_after_swap, setup, teardown),
        cmocka_unit_test_setup_teardown(test_compact_after_swap_eio, setup, teardown),
        cmocka_unit_test_setup_teardown(test_compact_before_final, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cleaner_before_checkpoint, setup, teardown),
        cmocka_unit_test_setup_teardown(test_delete_before_cleaner_forget, setup, teardown),
        cmocka_unit_test_setup_teardown(test_compact_write_and_cut_fail, setup, teardown),
        cmocka_unit_test_setup_teardown(test_checkpoint_write_exit, setup, teardown),
        cmocka_unit_test_setup_teardown(test_topic_meta_enospc, setup, teardown),
        cmocka_unit_test_setup_teardown(test_retention_after_start_offset, setup, teardown),
        cmocka_unit_test_setup_teardown(test_retention_after_start_offset_checkpointed, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
