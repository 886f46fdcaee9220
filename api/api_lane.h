/*
 * api_lane.h - a few threads for requests that take seconds (compaction:run,
 * retention:run, snapshot creation), off libmicrohttpd's threads.
 *
 * libmicrohttpd's pool threads each serve many connections: a handler that
 * cleans a large partition on one of them makes every other connection that
 * thread accepted (a health probe, a tail, an append) wait until the clean
 * ends.  Such routes are flagged API_ROUTE_SLOW; the router defers their
 * answer and hands the handler to this lane.  The lane only knows jobs: the
 * router decides what a job does.
 */
#ifndef API_LANE_H
#define API_LANE_H

#include <stddef.h>

typedef struct api_lane api_lane;

typedef struct api_lane_job {
    /* Runs on a lane thread; owns the job from then on (frees it). */
    void (*run)(struct api_lane_job *job);
    /* Called instead of run for a job still queued when the lane stops, on
     * the stopping thread; owns the job likewise. */
    void (*cancel)(struct api_lane_job *job);
    struct api_lane_job *next; /* the lane's queue link */
} api_lane_job;

/* Starts `threads` (>= 1) threads; at most max_queued jobs wait for one.
 * 0, or -ENOMEM / a pthread error (negative).  *out is owned by the caller
 * (api_lane_free). */
int api_lane_start(unsigned threads, size_t max_queued, api_lane **out);

/* Queues job (embedded in its owner).  0: the lane owns it and calls run or
 * cancel exactly once.  -EAGAIN: max_queued jobs are waiting; -ESHUTDOWN:
 * the lane is stopping.  On an error the caller keeps the job. */
int api_lane_submit(api_lane *l, api_lane_job *job);

/* Jobs waiting for a thread and jobs running right now (both 0 for NULL). */
void api_lane_counts(api_lane *l, size_t *queued, size_t *running);

/* Refuses new jobs, cancels the queued ones and waits for the running ones
 * to end, then joins the threads.  Idempotent; NULL is a no-op. */
void api_lane_stop(api_lane *l);

/* Stops (if not yet) and frees.  NULL is a no-op. */
void api_lane_free(api_lane *l);

#endif
