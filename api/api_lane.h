/*
 * api_lane.h - threads for requests that take seconds (compaction:run,
 * retention:run, taking and removing snapshots), off libmicrohttpd's threads.
 *
 * libmicrohttpd's pool threads each serve many connections: a handler that
 * cleans a large partition on one of them makes every other connection that
 * thread accepted (a health probe, a tail, an append) wait until the clean
 * ends.  Such routes name a lane (api_route.lane); the router defers their
 * answer and hands the handler to it.  One lane per kind, one thread each:
 * on-demand cleans take turns on one offset map anyway, and a queue of them
 * must not hold up a retention run or a snapshot.  A lane only knows jobs:
 * the router decides what a job does.
 */
#ifndef API_LANE_H
#define API_LANE_H

#include <stddef.h>

typedef struct api_lane api_lane;

/* What runs on each lane; NONE (0): the route runs on the HTTP thread. */
typedef enum {
    API_LANE_NONE,
    API_LANE_COMPACTION,
    API_LANE_RETENTION,
    API_LANE_SNAPSHOT,
    API_LANES
} api_lane_kind;

/* "compaction", "retention", "snapshot" (the metrics' kind label). */
const char *api_lane_kind_name(api_lane_kind k);

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

/* The same over one lane of each kind (lanes[API_LANE_NONE] stays NULL):
 * start gives every kind `threads` threads, and on failure frees those it
 * started. */
int api_lanes_start(api_lane *lanes[API_LANES], unsigned threads, size_t max_queued);
void api_lanes_stop(api_lane *const lanes[API_LANES]);
void api_lanes_free(api_lane *lanes[API_LANES]);

#endif
