/*
 * eng_segment_gate.c - a partition's leave for its segments to use paths.
 *
 * A deleted topic's directory is set aside, and the next topic created under
 * the name gets the same paths; a segment of the old topic still held by a
 * request must then name no file.  Path operations hold the gate shared;
 * revoking it takes it exclusive, so it waits for those in progress and
 * refuses the later ones.
 */
#include "eng_segment.h"

#include "eng_error.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>

struct eng_segment_gate {
    _Atomic int refs;
    pthread_rwlock_t lock; /* shared by path operations, exclusive to revoke */
    _Atomic bool revoked; /* set under lock; read without it by eng_segment_gate_revoked */
};

int eng_segment_gate_new(eng_segment_gate **out)
{
    eng_segment_gate *g = calloc(1, sizeof *g);
    if (!g)
        return -ENOMEM;
    int e = pthread_rwlock_init(&g->lock, NULL);
    if (e) {
        free(g);
        return -e;
    }
    atomic_init(&g->refs, 1);
    *out = g;
    return 0;
}

void eng_segment_gate_ref(eng_segment_gate *g)
{
    atomic_fetch_add_explicit(&g->refs, 1, memory_order_relaxed);
}

void eng_segment_gate_unref(eng_segment_gate *g)
{
    if (!g || atomic_fetch_sub_explicit(&g->refs, 1, memory_order_acq_rel) != 1)
        return;
    pthread_rwlock_destroy(&g->lock);
    free(g);
}

void eng_segment_gate_revoke(eng_segment_gate *g)
{
    pthread_rwlock_wrlock(&g->lock);
    g->revoked = true;
    pthread_rwlock_unlock(&g->lock);
}

int eng_segment_gate_enter(eng_segment_gate *g)
{
    pthread_rwlock_rdlock(&g->lock);
    if (!g->revoked)
        return 0;
    pthread_rwlock_unlock(&g->lock);
    return ENG_ENOTOPIC;
}

bool eng_segment_gate_revoked(eng_segment_gate *g)
{
    return atomic_load(&g->revoked);
}

void eng_segment_gate_leave(eng_segment_gate *g)
{
    pthread_rwlock_unlock(&g->lock);
}
