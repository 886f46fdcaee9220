/*
 * test_topic_admin.c - what test_manager.c leaves to the HTTP layer or to
 * the crash suite, checked at the engine:
 *
 *   - the engine itself refuses more than 100000 partitions, at create and
 *     at grow (the API checks first, but the engine is the contract), before
 *     it opens a file: with a low open-files limit the answer is still
 *     "partitions must be between 1 and 100000", not -EMFILE;
 *   - startup removes what a stop cut short: "<topic>-<p>.<hex>-delete"
 *     directories (records and all), and the temporary files of an
 *     interrupted atomic write in partition directories ("<name>.tmp" and,
 *     for long names, ".tmp-XXXXXX"); the partition's own files stay;
 *   - a close stops the removals still running and waits for their
 *     threads: by its return each has logged its last line, so no engine
 *     thread logs through a sink its owner is taking down (under TSan the
 *     fixture's teardown raced with "removed ..."); the next start finishes
 *     a removal cut short;
 *   - a name that collides ('.' vs '_') only with a topic whose create or
 *     delete is under way is busy (retriable), not an invalid name: once
 *     the delete is done the same create succeeds.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "eng_error.h"
#include "eng_fault.h"
#include "eng_logger.h"
#include "eng_manager.h"
#include "manager_fixture.h"
#include "support.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

static void write_file(const char *path, const char *text)
{
    FILE *fp = fopen(path, "w");
    if (!fp)
        fail_msg("cannot create %s", path);
    fputs(text, fp);
    fclose(fp);
}

static void test_engine_bounds_partition_counts(void **state)
{
    fixture *f = *state;
    eng_manager *m = open_mgr(f);
    eng_errdetail err = {0};
    assert_int_equal(eng_manager_create_topic(m, "grow", 1, NULL, NULL, 0, &err), 0);

    struct rlimit saved;
    ts_fd_limit(100, &saved); /* a slip past the bound fails fast, on descriptors */
    memset(&err, 0, sizeof err);
    int create_rc = eng_manager_create_topic(m, "huge", 100001, NULL, NULL, 0, &err);
    char create_key[sizeof err.key], create_msg[sizeof err.message];
    snprintf(create_key, sizeof create_key, "%s", err.key);
    snprintf(create_msg, sizeof create_msg, "%s", err.message);
    memset(&err, 0, sizeof err);
    int grow_rc = eng_manager_add_partitions(m, "grow", 100001, &err);
    ts_fd_limit_restore(&saved);

    assert_int_equal(create_rc, ENG_EINVAL);
    assert_string_equal(create_key, "partitions");
    assert_non_null(strstr(create_msg, "between 1 and 100000"));
    assert_int_equal(grow_rc, ENG_EINVAL);
    assert_string_equal(err.key, "partitions");
    /* The refusal names the bound it broke: growing is allowed, not that far. */
    if (!strstr(err.message, "at most 100000"))
        fail_msg("grow past the bound said: %s", err.message);
    eng_topic_desc d;
    assert_int_equal(eng_manager_describe_topic(m, "huge", &d), ENG_ENOTOPIC);
    assert_int_equal(eng_manager_describe_topic(m, "grow", &d), 0);
    assert_int_equal(d.meta.partitions, 1);
    eng_topic_desc_clear(&d);
    char listing[4096];
    ts_list_dir(f->data, listing, sizeof listing);
    assert_string_equal(listing, ".lock,grow-0,meta");
    eng_manager_close(m);
}

static void test_startup_removes_interrupted_leftovers(void **state)
{
    fixture *f = *state;
    eng_manager *m = open_mgr(f);
    assert_int_equal(eng_manager_create_topic(m, "orders", 1, NULL, NULL, 0, NULL), 0);
    eng_manager_close(m);

    /* A delete whose background removal a stop cut short. */
    char path[1200];
    snprintf(path, sizeof path, "%s/gone-0.0123456789abcdef0123456789abcdef-delete", f->data);
    assert_int_equal(mkdir(path, 0755), 0);
    snprintf(path, sizeof path,
             "%s/gone-0.0123456789abcdef0123456789abcdef-delete/00000000000000000000.log", f->data);
    write_file(path, "records of a deleted topic");
    /* Torn temporary files of atomic writes in the partition directory. */
    snprintf(path, sizeof path, "%s/orders-0/leader-epoch-checkpoint.tmp", f->data);
    write_file(path, "0\n1\n0 9");
    snprintf(path, sizeof path, "%s/orders-0/.tmp-a1B2c3", f->data);
    write_file(path, "torn");

    m = open_mgr(f);
    char listing[4096];
    /* The removal runs in the background: wait (10 s at most) for it. */
    for (int tries = 0; tries < 1000; tries++) {
        ts_list_dir(f->data, listing, sizeof listing);
        if (!strstr(listing, "-delete"))
            break;
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    assert_null(strstr(listing, "gone-0"));
    assert_non_null(strstr(listing, "orders-0"));
    snprintf(path, sizeof path, "%s/orders-0", f->data);
    ts_list_dir(path, listing, sizeof listing);
    assert_null(strstr(listing, ".tmp"));
    assert_non_null(strstr(listing, "00000000000000000000.log"));
    assert_non_null(strstr(listing, "leader-epoch-checkpoint"));
    assert_non_null(strstr(f->log, "(left by an interrupted write)"));
    eng_manager_close(m);
}

static void test_close_stops_background_removals(void **state)
{
    fixture *f = *state;
    eng_manager *m = open_mgr(f);
    eng_manager_close(m);
    /* A deleted partition large enough that its removal outlasts a start
     * and a stop of an empty manager. */
    char dir[1200], path[1300];
    snprintf(dir, sizeof dir, "%s/big-0.0123456789abcdef0123456789abcdef-delete", f->data);
    assert_int_equal(mkdir(dir, 0755), 0);
    for (int i = 0; i < 3000; i++) {
        snprintf(path, sizeof path, "%s/%020d.log", dir, i);
        write_file(path, "x");
    }
    m = open_mgr(f);
    eng_manager_close(m);
    /* The removal's thread is done with the manager and the sink. */
    pthread_mutex_lock(&f->mu);
    bool done = strstr(f->log, "removed ") || strstr(f->log, "stopped removing ");
    pthread_mutex_unlock(&f->mu);
    assert_true(done);
    /* Cut short or not, nothing is left after the next start's removal. */
    m = open_mgr(f);
    char listing[4096];
    for (int tries = 0; tries < 1000; tries++) {
        ts_list_dir(f->data, listing, sizeof listing);
        if (!strstr(listing, "-delete"))
            break;
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    assert_null(strstr(listing, "-delete"));
    eng_manager_close(m);
}

typedef struct twin_try {
    eng_manager *m;
    const char *name;
    int rc;
    char message[256];
} twin_try;

/* A hook: creates the colliding name while the other's change is under
 * way (once). */
static void create_twin(void *arg)
{
    twin_try *t = arg;
    eng_fault_hook(NULL, NULL, NULL);
    eng_errdetail err = {0};
    t->rc = eng_manager_create_topic(t->m, t->name, 1, NULL, NULL, 0, &err);
    snprintf(t->message, sizeof t->message, "%s", err.message);
}

static void test_collision_with_a_change_under_way_is_busy(void **state)
{
    fixture *f = *state;
    eng_manager *m = open_mgr(f);
    assert_int_equal(eng_manager_create_topic(m, "metrics.eu", 1, NULL, NULL, 0, NULL), 0);

    /* being deleted: busy, then free */
    twin_try t = {.m = m, .name = "metrics_eu", .rc = 1};
    eng_fault_hook("checkpoint.after_list", create_twin, &t);
    assert_int_equal(eng_manager_delete_topic(m, "metrics.eu", NULL), 0);
    eng_fault_hook(NULL, NULL, NULL);
    assert_int_equal(t.rc, ENG_EBUSY);
    assert_non_null(strstr(t.message, "metrics.eu"));
    assert_int_equal(eng_manager_create_topic(m, "metrics_eu", 1, NULL, NULL, 0, NULL), 0);

    /* being created: busy; once it exists, the collision is final */
    twin_try u = {.m = m, .name = "logs.us", .rc = 1};
    eng_fault_hook("topic.sync_dir", create_twin, &u);
    assert_int_equal(eng_manager_create_topic(m, "logs_us", 1, NULL, NULL, 0, NULL), 0);
    eng_fault_hook(NULL, NULL, NULL);
    assert_int_equal(u.rc, ENG_EBUSY);
    assert_int_equal(eng_manager_create_topic(m, "logs.us", 1, NULL, NULL, 0, NULL),
                     ENG_ETOPICNAME);
    /* and a loaded twin is an invalid name, as before */
    assert_int_equal(eng_manager_create_topic(m, "metrics.eu", 1, NULL, NULL, 0, NULL),
                     ENG_ETOPICNAME);
    eng_manager_close(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_engine_bounds_partition_counts, setup, teardown),
        cmocka_unit_test_setup_teardown(test_startup_removes_interrupted_leftovers, setup, teardown),
        cmocka_unit_test_setup_teardown(test_close_stops_background_removals, setup, teardown),
        cmocka_unit_test_setup_teardown(test_collision_with_a_change_under_way_is_busy, setup,
                                        teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
