/*
 * test_topic_meta.c - when a topic's metadata file (meta/<topic>.json) is
 * written, and what other requests wait for meanwhile.
 *
 * The metadata codec is the seam: its encode runs inside the write, so a
 * codec that parks there until the test lets it go holds a change in the
 * middle of its file I/O for as long as the test needs, with no sleeps.
 *
 *   - a config change parked in its write leaves every other topic's and
 *     its own topic's lookups running: the file I/O (and its fsyncs, one
 *     slow disk away from seconds) is not done under the topic table's
 *     lock that every request takes;
 *   - a partition increase or a delete that comes while a config change
 *     is parked waits for it: the file ends up as the table is (a restart
 *     finds the new partitions and the new override), and a deleted
 *     topic's file is not written back by the change that started first;
 *   - a partition increase parked in its write, and a delete parked
 *     between its unlink and the fsync of meta/ (a hook on the fault point
 *     topic.delete.sync_meta), leave other topics' lookups running too;
 *   - a delete whose fsync of meta/ fails changes nothing: the topic stays,
 *     and so does its file (a restart used to lose the topic, its
 *     partitions set aside as strays, although the delete had failed);
 *   - an append that comes while a delete removes the file is refused as
 *     busy (it was acknowledged, then deleted), and taken again if the
 *     delete fails.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "eng_error.h"
#include "eng_fault.h"
#include "eng_manager.h"
#include "eng_partition.h"
#include "manager_fixture.h"
#include "support.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

/* Generous: only a broken build waits this long (a shared, noisy machine). */
#define DEADLINE_S 20

/* ---- a codec whose encode can be parked --------------------------------- */

typedef struct gate {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    eng_meta_codec inner;
    bool armed;  /* the next encode parks */
    bool parked; /* an encode is parked */
    bool open;   /* let it go */
} gate;

static gate g_gate = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, {0}, false, false, false};

/* Parks the calling thread while the gate is armed, until it is opened: a
 * fault hook for steps without a codec, and the codec's encode below. */
static void gated_hook(void *ctx)
{
    gate *g = ctx;
    pthread_mutex_lock(&g->mu);
    if (g->armed) {
        g->armed = false;
        g->parked = true;
        pthread_cond_broadcast(&g->cv);
        while (!g->open)
            pthread_cond_wait(&g->cv, &g->mu);
        g->parked = false;
    }
    pthread_mutex_unlock(&g->mu);
}

static int gated_encode(const eng_topic_meta *meta, char **out, size_t *len, void *ctx)
{
    gate *g = ctx;
    gated_hook(g);
    return g->inner.encode(meta, out, len, g->inner.ctx);
}

static int gated_decode(const char *buf, size_t len, eng_topic_meta *meta, void *ctx)
{
    gate *g = ctx;
    return g->inner.decode(buf, len, meta, g->inner.ctx);
}

static int setup_gated(void **state)
{
    if (setup(state))
        return -1;
    fixture *f = *state;
    g_gate.inner = f->opts.codec;
    g_gate.armed = g_gate.parked = g_gate.open = false;
    f->opts.codec = (eng_meta_codec){.encode = gated_encode, .decode = gated_decode, .ctx = &g_gate};
    return 0;
}

static void deadline_in(struct timespec *ts, int seconds)
{
    clock_gettime(CLOCK_REALTIME, ts);
    ts->tv_sec += seconds;
}

/* Waits until an encode is parked; false at the deadline. */
static bool wait_parked(void)
{
    struct timespec until;
    deadline_in(&until, DEADLINE_S);
    pthread_mutex_lock(&g_gate.mu);
    int e = 0;
    while (!g_gate.parked && e != ETIMEDOUT)
        e = pthread_cond_timedwait(&g_gate.cv, &g_gate.mu, &until);
    bool parked = g_gate.parked;
    pthread_mutex_unlock(&g_gate.mu);
    return parked;
}

static void open_gate(void)
{
    pthread_mutex_lock(&g_gate.mu);
    g_gate.open = true;
    pthread_cond_broadcast(&g_gate.cv);
    pthread_mutex_unlock(&g_gate.mu);
}

/* ---- operations run on threads of their own ------------------------------ */

typedef enum { OP_SET, OP_LOOKUP, OP_GROW, OP_DELETE } op_kind;

typedef struct op {
    eng_manager *m;
    op_kind kind;
    const char *topic;
    const char *value; /* OP_SET: segment.bytes */
    int32_t partitions; /* OP_GROW */
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool done;
    int rc;
} op;

static void *op_main(void *arg)
{
    op *o = arg;
    eng_errdetail err = {0};
    int rc = 0;
    if (o->kind == OP_SET) {
        eng_config_overrides ov = {{0}};
        rc = eng_config_overrides_set(&ov, "segment.bytes", o->value, &err);
        if (!rc)
            rc = eng_manager_set_topic_overrides(o->m, o->topic, NULL, &ov, &err);
        eng_config_overrides_clear(&ov);
    } else if (o->kind == OP_LOOKUP) {
        eng_partition *p = NULL;
        eng_topic_desc d;
        rc = eng_manager_partition(o->m, o->topic, 0, &p, &err);
        if (!rc) {
            eng_partition_unref(p);
            rc = eng_manager_describe_topic(o->m, o->topic, &d);
            if (!rc)
                eng_topic_desc_clear(&d);
        }
    } else if (o->kind == OP_GROW) {
        rc = eng_manager_add_partitions(o->m, o->topic, o->partitions, &err);
    } else {
        rc = eng_manager_delete_topic(o->m, o->topic, &err);
    }
    pthread_mutex_lock(&o->mu);
    o->rc = rc;
    o->done = true;
    pthread_cond_broadcast(&o->cv);
    pthread_mutex_unlock(&o->mu);
    return NULL;
}

static void op_start(op *o, eng_manager *m, op_kind kind, const char *topic)
{
    o->m = m;
    o->kind = kind;
    o->topic = topic;
    o->done = false;
    pthread_mutex_init(&o->mu, NULL);
    pthread_cond_init(&o->cv, NULL);
    assert_int_equal(pthread_create(&o->thread, NULL, op_main, o), 0);
}

/* Whether o finished within `seconds`. */
static bool op_wait_for(op *o, int seconds)
{
    struct timespec until;
    deadline_in(&until, seconds);
    pthread_mutex_lock(&o->mu);
    int e = 0;
    while (!o->done && e != ETIMEDOUT)
        e = pthread_cond_timedwait(&o->cv, &o->mu, &until);
    bool done = o->done;
    pthread_mutex_unlock(&o->mu);
    return done;
}

/* Whether o finished within the deadline. */
static bool op_wait(op *o)
{
    return op_wait_for(o, DEADLINE_S);
}

static int op_join(op *o)
{
    pthread_join(o->thread, NULL);
    pthread_mutex_destroy(&o->mu);
    pthread_cond_destroy(&o->cv);
    return o->rc;
}

static const char *segment_bytes_of(eng_manager *m, const char *topic, int32_t *partitions,
                                    char *buf, size_t len)
{
    eng_topic_desc d;
    if (eng_manager_describe_topic(m, topic, &d))
        return NULL;
    const char *v = d.meta.overrides.text[ENG_CFG_SEGMENT_BYTES];
    snprintf(buf, len, "%s", v ? v : "");
    *partitions = d.meta.partitions;
    eng_topic_desc_clear(&d);
    return buf;
}

/* ---- tests --------------------------------------------------------------- */

static void test_config_write_blocks_no_lookup(void **state)
{
    fixture *f = *state;
    eng_manager *m = open_mgr(f);
    eng_errdetail err = {0};
    assert_int_equal(eng_manager_create_topic(m, "slow", 1, NULL, NULL, 0, &err), 0);
    assert_int_equal(eng_manager_create_topic(m, "other", 1, NULL, NULL, 0, &err), 0);

    g_gate.armed = true;
    op set = {.value = "2097152"};
    op_start(&set, m, OP_SET, "slow");
    bool parked = wait_parked();

    /* Every request looks its partition up under the table's lock. */
    op other = {0}, same = {0};
    op_start(&other, m, OP_LOOKUP, "other");
    op_start(&same, m, OP_LOOKUP, "slow");
    bool other_done = op_wait(&other), same_done = op_wait(&same);
    open_gate(); /* whatever happened, so that every thread ends */
    int other_rc = op_join(&other), same_rc = op_join(&same), set_rc = op_join(&set);

    assert_true(parked);
    assert_true(other_done);
    assert_true(same_done);
    assert_int_equal(other_rc, 0);
    assert_int_equal(same_rc, 0);
    assert_int_equal(set_rc, 0);
    char v[32];
    int32_t n;
    assert_string_equal(segment_bytes_of(m, "slow", &n, v, sizeof v), "2097152");
    eng_manager_close(m);
    m = open_mgr(f);
    assert_string_equal(segment_bytes_of(m, "slow", &n, v, sizeof v), "2097152");
    eng_manager_close(m);
}

static void test_grow_during_config_write(void **state)
{
    fixture *f = *state;
    eng_manager *m = open_mgr(f);
    eng_errdetail err = {0};
    assert_int_equal(eng_manager_create_topic(m, "t", 1, NULL, NULL, 0, &err), 0);

    g_gate.armed = true;
    op set = {.value = "2097152"}, grow = {.partitions = 3};
    op_start(&set, m, OP_SET, "t");
    assert_true(wait_parked());
    op_start(&grow, m, OP_GROW, "t");
    /* The grow may finish now (its write waits for nothing) or wait for the
     * change; either way the file must end up as the table is.  A second
     * lets it get as far as it will (it waits on meta_lock today, so a full
     * deadline here would only slow every run). */
    (void)op_wait_for(&grow, 1);
    open_gate();
    assert_int_equal(op_join(&set), 0);
    assert_int_equal(op_join(&grow), 0);

    char v[32];
    int32_t n;
    assert_string_equal(segment_bytes_of(m, "t", &n, v, sizeof v), "2097152");
    assert_int_equal(n, 3);
    eng_manager_close(m);
    m = open_mgr(f); /* what the file says */
    assert_string_equal(segment_bytes_of(m, "t", &n, v, sizeof v), "2097152");
    assert_int_equal(n, 3);
    eng_manager_close(m);
}

static void test_delete_during_config_write(void **state)
{
    fixture *f = *state;
    eng_manager *m = open_mgr(f);
    eng_errdetail err = {0};
    assert_int_equal(eng_manager_create_topic(m, "t", 1, NULL, NULL, 0, &err), 0);

    g_gate.armed = true;
    op set = {.value = "2097152"}, del = {0};
    op_start(&set, m, OP_SET, "t");
    assert_true(wait_parked());
    op_start(&del, m, OP_DELETE, "t");
    (void)op_wait_for(&del, 1); /* as far as it gets: see the grow above */
    open_gate();
    int set_rc = op_join(&set);
    assert_int_equal(op_join(&del), 0);
    /* Before the delete (0) or after it (the topic is gone): never a file
     * written for a topic the table no longer has. */
    assert_true(set_rc == 0 || set_rc == ENG_ENOTOPIC);
    char path[700];
    struct stat st;
    snprintf(path, sizeof path, "%s/meta/t.json", f->data);
    assert_int_not_equal(stat(path, &st), 0);
    eng_manager_close(m);
    m = open_mgr(f);
    eng_topic_desc d;
    assert_int_equal(eng_manager_describe_topic(m, "t", &d), ENG_ENOTOPIC);
    eng_manager_close(m);
}

/* Lookups of another topic (and of the changed one) while a change is
 * parked mid-write: each must finish before the gate opens. */
static void lookups_finish_while_parked(eng_manager *m, const char *changed, bool changed_stays)
{
    op other = {0}, same = {0};
    op_start(&other, m, OP_LOOKUP, "other");
    op_start(&same, m, OP_LOOKUP, changed);
    bool other_done = op_wait(&other), same_done = op_wait(&same);
    open_gate(); /* whatever happened, so that every thread ends */
    eng_fault_hook(NULL, NULL, NULL);
    int other_rc = op_join(&other), same_rc = op_join(&same);
    assert_true(other_done);
    assert_true(same_done);
    assert_int_equal(other_rc, 0);
    if (changed_stays)
        assert_int_equal(same_rc, 0);
}

static void test_grow_write_blocks_no_lookup(void **state)
{
    fixture *f = *state;
    eng_manager *m = open_mgr(f);
    eng_errdetail err = {0};
    assert_int_equal(eng_manager_create_topic(m, "slow", 1, NULL, NULL, 0, &err), 0);
    assert_int_equal(eng_manager_create_topic(m, "other", 1, NULL, NULL, 0, &err), 0);

    g_gate.armed = true;
    op grow = {.partitions = 3};
    op_start(&grow, m, OP_GROW, "slow");
    bool parked = wait_parked();
    lookups_finish_while_parked(m, "slow", true);
    assert_true(parked);
    assert_int_equal(op_join(&grow), 0);
    char v[32];
    int32_t n;
    assert_non_null(segment_bytes_of(m, "slow", &n, v, sizeof v));
    assert_int_equal(n, 3);
    eng_manager_close(m);
    m = open_mgr(f);
    assert_non_null(segment_bytes_of(m, "slow", &n, v, sizeof v));
    assert_int_equal(n, 3);
    eng_manager_close(m);
}

static void test_delete_write_blocks_no_lookup(void **state)
{
    fixture *f = *state;
    eng_manager *m = open_mgr(f);
    eng_errdetail err = {0};
    assert_int_equal(eng_manager_create_topic(m, "slow", 1, NULL, NULL, 0, &err), 0);
    assert_int_equal(eng_manager_create_topic(m, "other", 1, NULL, NULL, 0, &err), 0);

    g_gate.armed = true;
    eng_fault_hook("topic.delete.sync_meta", gated_hook, &g_gate);
    op del = {0};
    op_start(&del, m, OP_DELETE, "slow");
    bool parked = wait_parked();
    lookups_finish_while_parked(m, "slow", false);
    assert_true(parked);
    assert_int_equal(op_join(&del), 0);
    eng_topic_desc d;
    assert_int_equal(eng_manager_describe_topic(m, "slow", &d), ENG_ENOTOPIC);
    eng_manager_close(m);
    m = open_mgr(f);
    assert_int_equal(eng_manager_describe_topic(m, "slow", &d), ENG_ENOTOPIC);
    assert_int_equal(eng_manager_describe_topic(m, "other", &d), 0);
    eng_topic_desc_clear(&d);
    eng_manager_close(m);
}

static void test_delete_meta_sync_fails(void **state)
{
    fixture *f = *state;
    eng_manager *m = open_mgr(f);
    eng_errdetail err = {0};
    assert_int_equal(eng_manager_create_topic(m, "t", 2, NULL, NULL, 0, &err), 0);
    eng_fault_set("topic.delete.sync_meta=eio");
    int rc = eng_manager_delete_topic(m, "t", &err);
    eng_fault_set(NULL);
    assert_int_equal(rc, -EIO);
    char path[700];
    struct stat st;
    snprintf(path, sizeof path, "%s/meta/t.json", f->data);
    assert_int_equal(stat(path, &st), 0);
    char v[32];
    int32_t n;
    assert_non_null(segment_bytes_of(m, "t", &n, v, sizeof v));
    assert_int_equal(n, 2);
    eng_manager_close(m);
    m = open_mgr(f); /* what the files say */
    assert_non_null(segment_bytes_of(m, "t", &n, v, sizeof v));
    assert_int_equal(n, 2);
    assert_int_equal(eng_manager_delete_topic(m, "t", &err), 0);
    eng_manager_close(m);
}

/* An append that comes while a delete removes the topic's metadata: made
 * from the delete's own thread (a hook on topic.delete.sync_meta, between
 * the unlink and the fsync of meta/), so it lands there on every run. */
typedef struct append_probe {
    eng_partition *p;
    int rc;
    int64_t base_offset;
} append_probe;

static int append_one(eng_partition *p, int64_t *base_offset)
{
    uint8_t b[4096];
    size_t len = ts_build_batch(b, sizeof b, 0, 1, 1718000000000, 10);
    assert_true(len > 0);
    eng_append_opts o = {.expected_offset = -1};
    eng_append_result res;
    eng_errdetail err = {0};
    int rc = eng_partition_append(p, b, len, &o, &res, &err);
    if (!rc && base_offset)
        *base_offset = res.base_offset;
    return rc;
}

static void append_probe_hook(void *ctx)
{
    append_probe *a = ctx;
    a->rc = append_one(a->p, &a->base_offset);
}

/* The delete has begun once its metadata is going: an append acknowledged
 * then would be gone when the delete ends (or, after a crash, when the
 * restart finds no meta/<topic>.json).  It is refused as busy instead, and
 * if the delete fails, appends are taken again. */
static void test_append_during_delete(void **state)
{
    fixture *f = *state;
    eng_manager *m = open_mgr(f);
    eng_errdetail err = {0};
    assert_int_equal(eng_manager_create_topic(m, "t", 1, NULL, NULL, 0, &err), 0);
    append_probe a = {.rc = 1};
    assert_int_equal(eng_manager_partition(m, "t", 0, &a.p, &err), 0);
    assert_int_equal(append_one(a.p, NULL), 0);

    /* A delete that fails at the fsync of meta/: refused meanwhile, then
     * taken again, at the next offset. */
    eng_fault_hook("topic.delete.sync_meta", append_probe_hook, &a);
    eng_fault_set("topic.delete.sync_meta=eio");
    int rc = eng_manager_delete_topic(m, "t", &err);
    eng_fault_set(NULL);
    eng_fault_hook(NULL, NULL, NULL);
    assert_int_equal(rc, -EIO);
    assert_int_equal(a.rc, ENG_EBUSY);
    int64_t base = -1;
    assert_int_equal(append_one(a.p, &base), 0);
    assert_int_equal(base, 1);

    /* A delete that goes through. */
    a.rc = 1;
    eng_fault_hook("topic.delete.sync_meta", append_probe_hook, &a);
    rc = eng_manager_delete_topic(m, "t", &err);
    eng_fault_hook(NULL, NULL, NULL);
    assert_int_equal(rc, 0);
    assert_int_equal(a.rc, ENG_EBUSY);
    assert_int_equal(append_one(a.p, NULL), ENG_ENOTOPIC);
    eng_partition_unref(a.p);
    eng_manager_close(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_config_write_blocks_no_lookup, setup_gated, teardown),
        cmocka_unit_test_setup_teardown(test_grow_during_config_write, setup_gated, teardown),
        cmocka_unit_test_setup_teardown(test_delete_during_config_write, setup_gated, teardown),
        cmocka_unit_test_setup_teardown(test_grow_write_blocks_no_lookup, setup_gated, teardown),
        cmocka_unit_test_setup_teardown(test_delete_write_blocks_no_lookup, setup_gated, teardown),
        cmocka_unit_test_setup_teardown(test_delete_meta_sync_fails, setup_gated, teardown),
        cmocka_unit_test_setup_teardown(test_append_during_delete, setup_gated, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
