/*
 * test_lane.c - api_lane, the threads slow requests run on (api_lane.h):
 *   - jobs run, in order, off the submitting thread;
 *   - past max_queued waiting jobs a submit is refused (-EAGAIN), and taken
 *     again once the queue drains;
 *   - a stop cancels the waiting jobs (each exactly once, never run), waits
 *     for the running one, and refuses later submits (-ESHUTDOWN).
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "api_lane.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>

typedef struct gate {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool open;
    int started, ran, cancelled;
    int order[8];
    int norder;
} gate;

typedef struct job {
    api_lane_job base;
    gate *g;
    int id;
    bool blocks; /* waits for the gate to open */
    pthread_t thread;
} job;

static void job_run(api_lane_job *j)
{
    job *x = (job *)j;
    pthread_mutex_lock(&x->g->mu);
    x->thread = pthread_self();
    x->g->started++;
    pthread_cond_broadcast(&x->g->cv);
    while (x->blocks && !x->g->open)
        pthread_cond_wait(&x->g->cv, &x->g->mu);
    x->g->order[x->g->norder++] = x->id;
    x->g->ran++;
    pthread_cond_broadcast(&x->g->cv);
    pthread_mutex_unlock(&x->g->mu);
}

static void job_cancel(api_lane_job *j)
{
    job *x = (job *)j;
    pthread_mutex_lock(&x->g->mu);
    x->g->cancelled++;
    pthread_cond_broadcast(&x->g->cv);
    pthread_mutex_unlock(&x->g->mu);
}

static void gate_init(gate *g)
{
    *g = (gate){0};
    pthread_mutex_init(&g->mu, NULL);
    pthread_cond_init(&g->cv, NULL);
}

static void gate_destroy(gate *g)
{
    pthread_cond_destroy(&g->cv);
    pthread_mutex_destroy(&g->mu);
}

static void job_init(job *j, gate *g, int id, bool blocks)
{
    *j = (job){.base = {.run = job_run, .cancel = job_cancel}, .g = g, .id = id, .blocks = blocks};
}

/* Waits until *counter reaches n. */
static void wait_count(gate *g, int *counter, int n)
{
    pthread_mutex_lock(&g->mu);
    while (*counter < n)
        pthread_cond_wait(&g->cv, &g->mu);
    pthread_mutex_unlock(&g->mu);
}

static void open_gate(gate *g)
{
    pthread_mutex_lock(&g->mu);
    g->open = true;
    pthread_cond_broadcast(&g->cv);
    pthread_mutex_unlock(&g->mu);
}

static void test_jobs_run_in_order_off_the_caller(void **state)
{
    (void)state;
    api_lane *l;
    assert_int_equal(api_lane_start(1, 8, &l), 0);
    gate g;
    gate_init(&g);
    job j[4];
    for (int i = 0; i < 4; i++) {
        job_init(&j[i], &g, i, false);
        assert_int_equal(api_lane_submit(l, &j[i].base), 0);
    }
    wait_count(&g, &g.ran, 4);
    for (int i = 0; i < 4; i++) {
        assert_int_equal(g.order[i], i);
        assert_false(pthread_equal(j[i].thread, pthread_self()));
    }
    api_lane_free(l);
    assert_int_equal(g.cancelled, 0);
    gate_destroy(&g);
}

static void test_full_queue_refuses_then_takes_again(void **state)
{
    (void)state;
    api_lane *l;
    assert_int_equal(api_lane_start(1, 2, &l), 0);
    gate g;
    gate_init(&g);
    job busy, w1, w2, over, later;
    job_init(&busy, &g, 0, true);
    job_init(&w1, &g, 1, false);
    job_init(&w2, &g, 2, false);
    job_init(&over, &g, 3, false);
    job_init(&later, &g, 4, false);
    assert_int_equal(api_lane_submit(l, &busy.base), 0);
    wait_count(&g, &g.started, 1); /* running, so no longer queued */
    assert_int_equal(api_lane_submit(l, &w1.base), 0);
    assert_int_equal(api_lane_submit(l, &w2.base), 0);
    assert_int_equal(api_lane_submit(l, &over.base), -EAGAIN);
    open_gate(&g);
    wait_count(&g, &g.ran, 3);
    assert_int_equal(api_lane_submit(l, &later.base), 0);
    wait_count(&g, &g.ran, 4);
    assert_int_equal(g.order[3], 4);
    api_lane_free(l);
    gate_destroy(&g);
}

typedef struct stopper {
    api_lane *l;
    gate *g;
    bool done;
} stopper;

static void *stop_main(void *arg)
{
    stopper *s = arg;
    api_lane_stop(s->l);
    pthread_mutex_lock(&s->g->mu);
    s->done = true;
    pthread_cond_broadcast(&s->g->cv);
    pthread_mutex_unlock(&s->g->mu);
    return NULL;
}

static void test_stop_cancels_waiting_and_waits_for_running(void **state)
{
    (void)state;
    api_lane *l;
    assert_int_equal(api_lane_start(1, 8, &l), 0);
    gate g;
    gate_init(&g);
    job busy, w1, w2, after;
    job_init(&busy, &g, 0, true);
    job_init(&w1, &g, 1, false);
    job_init(&w2, &g, 2, false);
    job_init(&after, &g, 3, false);
    assert_int_equal(api_lane_submit(l, &busy.base), 0);
    wait_count(&g, &g.started, 1);
    assert_int_equal(api_lane_submit(l, &w1.base), 0);
    assert_int_equal(api_lane_submit(l, &w2.base), 0);
    stopper st = {.l = l, .g = &g};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, stop_main, &st), 0);
    wait_count(&g, &g.cancelled, 2);
    /* The waiting ones are cancelled while the running one still runs, and
     * the stop is still waiting for it. */
    pthread_mutex_lock(&g.mu);
    assert_int_equal(g.ran, 0);
    assert_false(st.done);
    pthread_mutex_unlock(&g.mu);
    assert_int_equal(api_lane_submit(l, &after.base), -ESHUTDOWN);
    open_gate(&g);
    pthread_join(t, NULL);
    assert_true(st.done);
    assert_int_equal(g.ran, 1);
    assert_int_equal(g.order[0], 0);
    assert_int_equal(g.cancelled, 2);
    api_lane_stop(l); /* again: nothing more happens */
    api_lane_free(l);
    assert_int_equal(g.cancelled, 2);
    assert_int_equal(g.ran, 1);
    gate_destroy(&g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_jobs_run_in_order_off_the_caller),
        cmocka_unit_test(test_full_queue_refuses_then_takes_again),
        cmocka_unit_test(test_stop_cancels_waiting_and_waits_for_running),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
