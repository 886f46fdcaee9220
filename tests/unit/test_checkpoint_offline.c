/*
 * test_checkpoint_offline.c - what a failed checkpoint write does to the
 * log dir (README Durability, "offline vs refuse").
 *
 *   - recovery-point-offset-checkpoint and log-start-offset-checkpoint: an
 *     I/O error (EIO) writing them takes the log dir offline, as Kafka's
 *     LogDirFailureChannel does for a checkpoint's IOException, so appends
 *     are refused with ENG_EOFFLINE; a resource running short (ENOSPC,
 *     EDQUOT) refuses only that write: the previous file stays whole, the
 *     dir stays online and the next write succeeds;
 *   - cleaner-offset-checkpoint: the same two rules, through a clean.
 *
 * Every durable write of a file passes the fs.write_atomic.mid fault point
 * halfway through its data; nothing else writes one during these tests.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "compact_util.h"
#include "eng_cleaner.h"
#include "eng_fault.h"
#include "eng_manager.h"
#include "manager_fixture.h"
#include "support.h"

#include <errno.h>

static void make_topic(eng_manager *m, const char *name, bool compacted)
{
    const char *key = "cleanup.policy", *val = "compact";
    eng_errdetail err = {0};
    if (eng_manager_create_topic(m, name, 1, &key, &val, compacted ? 1 : 0, &err))
        fail_msg("create %s: %s", name, err.message);
}

static int write_recovery(eng_manager *m)
{
    return eng_manager_checkpoint_recovery_points(m);
}

static int write_start(eng_manager *m)
{
    return eng_manager_checkpoint_start_offsets(m);
}

typedef struct ckpt_case {
    const char *file;
    int (*write)(eng_manager *m);
} ckpt_case;

static const ckpt_case manager_ckpts[] = {
    {"recovery-point-offset-checkpoint", write_recovery},
    {"log-start-offset-checkpoint", write_start},
};

/* EIO halfway through the file: offline, and every append refused so. */
static void test_manager_checkpoint_eio_takes_dir_offline(void **state)
{
    fixture *f = *state;
    for (size_t i = 0; i < sizeof manager_ckpts / sizeof manager_ckpts[0]; i++) {
        const ckpt_case *c = &manager_ckpts[i];
        eng_manager *m = open_mgr(f);
        if (i == 0)
            make_topic(m, "t", false);
        assert_int_equal(try_append_record(m, "t", 0, 0), 0);
        eng_fault_set("fs.write_atomic.mid=eio");
        int rc = c->write(m);
        eng_fault_set(NULL);
        assert_int_equal(rc, -EIO);
        if (!eng_manager_offline(m))
            fail_msg("%s: EIO left the log dir online", c->file);
        assert_int_equal(try_append_record(m, "t", 0, 0), ENG_EOFFLINE);
        assert_true(logged(f, "taking the log dir offline"));
        assert_false(eng_manager_close(m)); /* no clean-shutdown marker */
    }
}

/* No room (or quota): that write is refused, nothing else. */
static void test_manager_checkpoint_out_of_room_stays_online(void **state)
{
    fixture *f = *state;
    static const char *const faults[] = {"fs.write_atomic.mid=enospc",
                                         "fs.write_atomic.mid=edquot"};
    static const int codes[] = {-ENOSPC, -EDQUOT};
    eng_manager *m = open_mgr(f);
    make_topic(m, "t", false);
    assert_int_equal(try_append_record(m, "t", 0, 0), 0);
    for (size_t i = 0; i < sizeof manager_ckpts / sizeof manager_ckpts[0]; i++) {
        const ckpt_case *c = &manager_ckpts[i];
        assert_int_equal(c->write(m), 0);
        char *before = data_file_text(f, c->file);
        assert_non_null(before);
        for (size_t k = 0; k < 2; k++) {
            assert_int_equal(try_append_record(m, "t", 0, 0), 0);
            eng_fault_set(faults[k]);
            int rc = c->write(m);
            eng_fault_set(NULL);
            assert_int_equal(rc, codes[k]);
            if (eng_manager_offline(m))
                fail_msg("%s: %s took the log dir offline", c->file, faults[k]);
            char *now = data_file_text(f, c->file);
            assert_non_null(now);
            assert_string_equal(now, before); /* the old file, whole */
            free(now);
        }
        free(before);
        assert_int_equal(try_append_record(m, "t", 0, 0), 0);
        assert_int_equal(c->write(m), 0); /* the next run writes it */
    }
    assert_false(logged(f, "taking the log dir offline"));
    assert_true(eng_manager_close(m));
}

/* The cleaner's checkpoint, written after a clean that succeeded. */
static void clean_with_fault(fixture *f, const char *fault, eng_manager **out)
{
    f->copts.threads = 0; /* on-demand cleans only */
    eng_manager *m = open_mgr(f);
    assert_int_equal(eng_manager_start_cleaner(m), 0);
    make_topic(m, "c", true);
    eng_partition *p;
    assert_int_equal(eng_manager_partition(m, "c", 0, &p, NULL), 0);
    cu_kv a1 = {"a", "1", 0}, a2 = {"a", "2", 0};
    cu_append(p, &a1, 1, CU_T0);
    cu_append(p, &a2, 1, CU_T0);
    cu_roll(p);
    eng_fault_set(fault);
    eng_clean_stats st;
    int rc = eng_cleaner_clean_now(eng_manager_cleaner(m), p, false, &st);
    eng_fault_set(NULL);
    assert_int_equal(rc, 0);
    assert_int_equal(st.records_removed, 1);
    eng_partition_unref(p);
    assert_true(logged(f, "writing cleaner-offset-checkpoint"));
    *out = m;
}

static void test_cleaner_checkpoint_eio_takes_dir_offline(void **state)
{
    fixture *f = *state;
    eng_manager *m;
    clean_with_fault(f, "fs.write_atomic.mid=eio", &m);
    assert_true(eng_manager_offline(m));
    assert_int_equal(try_append_record(m, "c", 0, 0), ENG_EOFFLINE);
    assert_false(eng_manager_close(m));
}

static void test_cleaner_checkpoint_enospc_stays_online(void **state)
{
    fixture *f = *state;
    eng_manager *m;
    clean_with_fault(f, "fs.write_atomic.mid=enospc", &m);
    assert_false(eng_manager_offline(m));
    assert_null(data_file_text(f, "cleaner-offset-checkpoint")); /* refused, none before */
    assert_int_equal(try_append_record(m, "c", 0, 0), 0);
    assert_false(logged(f, "taking the log dir offline"));
    assert_true(eng_manager_close(m));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_manager_checkpoint_eio_takes_dir_offline, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_manager_checkpoint_out_of_room_stays_online, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_cleaner_checkpoint_eio_takes_dir_offline,
                                        setup_cleaning, teardown),
        cmocka_unit_test_setup_teardown(test_cleaner_checkpoint_enospc_stays_online,
                                        setup_cleaning, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
