/*
 * eng_parallel.c - eng_parallel_for: a shared counter hands out the items;
 * the first failure is kept with a compare-and-swap.
 */
#include "eng_parallel.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

typedef struct run {
    size_t n;
    bool stop_on_error;
    int (*fn)(void *ctx, size_t i);
    void *ctx;
    _Atomic size_t next;
    _Atomic int rc;
} run;

static void *worker(void *arg)
{
    run *r = arg;
    for (;;) {
        if (r->stop_on_error && atomic_load(&r->rc))
            break;
        size_t i = atomic_fetch_add(&r->next, 1);
        if (i >= r->n)
            break;
        int rc = r->fn(r->ctx, i);
        int none = 0;
        if (rc)
            atomic_compare_exchange_strong(&r->rc, &none, rc);
    }
    return NULL;
}

int eng_parallel_for(size_t n, unsigned threads, bool stop_on_error,
                     int (*fn)(void *ctx, size_t i), void *ctx)
{
    run r = {.n = n, .stop_on_error = stop_on_error, .fn = fn, .ctx = ctx};
    atomic_init(&r.next, 0);
    atomic_init(&r.rc, 0);
    size_t extra = threads > 1 ? threads - 1 : 0; /* besides this one */
    if (n == 0)
        extra = 0;
    else if (extra > n - 1)
        extra = n - 1;
    /* Without memory for the handles, or threads, this thread does it all. */
    pthread_t *tids = extra ? calloc(extra, sizeof *tids) : NULL;
    size_t started = 0;
    while (tids && started < extra && pthread_create(&tids[started], NULL, worker, &r) == 0)
        started++;
    worker(&r);
    for (size_t i = 0; i < started; i++)
        pthread_join(tids[i], NULL);
    free(tids);
    return atomic_load(&r.rc);
}
