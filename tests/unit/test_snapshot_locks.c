/*
 * test_snapshot_locks.c - a snapshot waiting for a partition's maint_lock
 * when the stop comes.
 *
 * A snapshot takes each partition under its maint_lock, which a compaction
 * round holds for the whole round.  The cleaner is told to stop only by
 * eng_manager_close, after the server's requests (the snapshot's included)
 * are done, so a snapshot blocked on the lock held the stop until the round
 * ended.  The lock is held here by the test, as a round under way holds it,
 * and what is checked is that the snapshot gives up while it is still held
 * (it is released only after a generous deadline), leaving nothing behind.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "eng_fault.h"
#include "eng_fs.h"
#include "eng_manager.h"
#include "eng_partition_impl.h"
#include "eng_snapshot.h"
#include "manager_fixture.h"
#include "support.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <unistd.h>

#define DEADLINE_POLLS 2000 /* of 10 ms: 20 s */

typedef struct snap_run {
    eng_manager *m;
    _Atomic bool reached; /* at its first partition */
    _Atomic bool done;
    int rc;
} snap_run;

static void at_partition(void *ctx)
{
    atomic_store(&((snap_run *)ctx)->reached, true);
}

static void *take(void *arg)
{
    snap_run *r = arg;
    eng_errdetail err = {0};
    r->rc = eng_manager_snapshot_create(r->m, "s1", NULL, &err);
    atomic_store(&r->done, true);
    return NULL;
}

static bool poll_until(_Atomic bool *flag)
{
    for (int i = 0; i < DEADLINE_POLLS && !atomic_load(flag); i++)
        usleep(10000);
    return atomic_load(flag);
}

static void test_stop_while_waiting_for_maint_lock(void **state)
{
    fixture *f = *state;
    eng_manager *m = open_mgr(f);
    eng_errdetail err = {0};
    assert_int_equal(eng_manager_create_topic(m, "t", 2, NULL, NULL, 0, &err), 0);
    eng_partition *p;
    assert_int_equal(eng_manager_partition(m, "t", 0, &p, &err), 0);

    pthread_mutex_lock(&p->maint_lock); /* a compaction round under way */
    snap_run r = {.m = m};
    eng_fault_hook("snapshot.partition", at_partition, &r);
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, take, &r), 0);
    bool reached = poll_until(&r.reached);
    eng_manager_request_stop(m);
    bool gave_up = reached && poll_until(&r.done);
    pthread_mutex_unlock(&p->maint_lock);
    pthread_join(t, NULL);
    eng_fault_hook(NULL, NULL, NULL);

    assert_true(reached);
    if (!gave_up)
        fail_msg("the snapshot waited for the maint_lock past the stop");
    assert_int_equal(r.rc, ENG_ESHUTDOWN);
    char path[700];
    snprintf(path, sizeof path, "%s/snapshots/s1", f->data);
    assert_false(eng_fs_exists(path));
    snprintf(path, sizeof path, "%s/snapshots/.partial-s1", f->data);
    assert_false(eng_fs_exists(path));
    assert_true(logged(f, "snapshot 's1' abandoned: the server is stopping"));
    eng_partition_unref(p);
    assert_true(eng_manager_close(m));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_stop_while_waiting_for_maint_lock, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
