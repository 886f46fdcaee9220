/*
 * api_lane.c - a fixed pool of threads draining a bounded FIFO of jobs.
 *
 * Fixed and small on purpose: the work queued here is maintenance that reads
 * and writes whole segments, so running more of it at once only shares the
 * same disk more ways.  Bounded so that a client looping on compaction:run
 * gets 503 overloaded instead of growing the queue without end.
 */
#include "api_lane.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>

struct api_lane {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    api_lane_job *head, *tail;
    size_t queued, max_queued, running;
    bool stopping, joined;
    unsigned nthreads;
    pthread_t *threads;
};

static void *lane_main(void *arg)
{
    api_lane *l = arg;
    pthread_mutex_lock(&l->lock);
    for (;;) {
        while (!l->head && !l->stopping)
            pthread_cond_wait(&l->cond, &l->lock);
        if (!l->head)
            break; /* stopping, and the queue was handed to cancel */
        api_lane_job *j = l->head;
        l->head = j->next;
        if (!l->head)
            l->tail = NULL;
        l->queued--;
        l->running++;
        pthread_mutex_unlock(&l->lock);
        j->run(j);
        pthread_mutex_lock(&l->lock);
        l->running--;
    }
    pthread_mutex_unlock(&l->lock);
    return NULL;
}

int api_lane_start(unsigned threads, size_t max_queued, api_lane **out)
{
    *out = NULL;
    if (threads == 0)
        return -EINVAL;
    api_lane *l = calloc(1, sizeof *l);
    if (!l)
        return -ENOMEM;
    if (!(l->threads = calloc(threads, sizeof *l->threads))) {
        free(l);
        return -ENOMEM;
    }
    l->max_queued = max_queued;
    int rc = pthread_mutex_init(&l->lock, NULL);
    if (rc) {
        free(l->threads);
        free(l);
        return -rc;
    }
    if ((rc = pthread_cond_init(&l->cond, NULL))) {
        pthread_mutex_destroy(&l->lock);
        free(l->threads);
        free(l);
        return -rc;
    }
    for (; l->nthreads < threads; l->nthreads++) {
        if ((rc = pthread_create(&l->threads[l->nthreads], NULL, lane_main, l))) {
            api_lane_free(l); /* joins the ones started */
            return -rc;
        }
    }
    *out = l;
    return 0;
}

int api_lane_submit(api_lane *l, api_lane_job *job)
{
    pthread_mutex_lock(&l->lock);
    int rc = l->stopping ? -ESHUTDOWN : l->queued >= l->max_queued ? -EAGAIN : 0;
    if (!rc) {
        job->next = NULL;
        if (l->tail)
            l->tail->next = job;
        else
            l->head = job;
        l->tail = job;
        l->queued++;
        pthread_cond_signal(&l->cond);
    }
    pthread_mutex_unlock(&l->lock);
    return rc;
}

void api_lane_counts(api_lane *l, size_t *queued, size_t *running)
{
    *queued = *running = 0;
    if (!l)
        return;
    pthread_mutex_lock(&l->lock);
    *queued = l->queued;
    *running = l->running;
    pthread_mutex_unlock(&l->lock);
}

void api_lane_stop(api_lane *l)
{
    if (!l)
        return;
    pthread_mutex_lock(&l->lock);
    l->stopping = true;
    api_lane_job *q = l->head;
    l->head = l->tail = NULL;
    l->queued = 0;
    bool join = !l->joined;
    l->joined = true;
    pthread_cond_broadcast(&l->cond);
    pthread_mutex_unlock(&l->lock);
    /* Outside the lock: a cancel answers its request, which may take the
     * transport's locks. */
    while (q) {
        api_lane_job *next = q->next;
        q->cancel(q);
        q = next;
    }
    if (join)
        for (unsigned i = 0; i < l->nthreads; i++)
            pthread_join(l->threads[i], NULL);
}

void api_lane_free(api_lane *l)
{
    if (!l)
        return;
    api_lane_stop(l);
    pthread_cond_destroy(&l->cond);
    pthread_mutex_destroy(&l->lock);
    free(l->threads);
    free(l);
}

const char *api_lane_kind_name(api_lane_kind k)
{
    switch (k) {
    case API_LANE_COMPACTION:
        return "compaction";
    case API_LANE_RETENTION:
        return "retention";
    case API_LANE_SNAPSHOT:
        return "snapshot";
    default:
        return "none";
    }
}

int api_lanes_start(api_lane *lanes[API_LANES], unsigned threads, size_t max_queued)
{
    for (int k = 0; k < API_LANES; k++)
        lanes[k] = NULL;
    for (int k = API_LANE_NONE + 1; k < API_LANES; k++) {
        int rc = api_lane_start(threads, max_queued, &lanes[k]);
        if (rc) {
            api_lanes_free(lanes);
            return rc;
        }
    }
    return 0;
}

void api_lanes_stop(api_lane *const lanes[API_LANES])
{
    for (int k = 0; k < API_LANES; k++)
        api_lane_stop(lanes[k]);
}

void api_lanes_free(api_lane *lanes[API_LANES])
{
    for (int k = 0; k < API_LANES; k++) {
        api_lane_free(lanes[k]);
        lanes[k] = NULL;
    }
}
