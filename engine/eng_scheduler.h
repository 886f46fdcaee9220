/*
 * eng_scheduler.h - named background jobs on a fixed pool of threads.
 *
 * Modelled on Kafka's KafkaScheduler and Redis's bio.c: a small set of
 * worker threads serves a time-ordered queue.  Periodic jobs (log-retention,
 * log-flusher, the checkpoints) are rescheduled only after a run finishes, so
 * a job never runs twice at once and a slow job delays only itself.  One-shot
 * jobs (flush-log after a roll, delete-file after file.delete.delay.ms) carry
 * an argument; if the scheduler stops before they run they are dropped
 * through their drop callback: their work is redone at the next startup.
 *
 * Statistics per job name (interval, runs, last start, duration, outcome,
 * next run, pending one-shots) back GET /v1/jobs.
 */
#ifndef ENG_SCHEDULER_H
#define ENG_SCHEDULER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct eng_scheduler eng_scheduler;

/* A job body: returns 0 or an error code; may write a short outcome note. */
typedef int (*eng_job_fn)(void *arg, char *note, size_t note_len);

/* Called instead of the job when a one-shot is dropped at stop. */
typedef void (*eng_job_drop_fn)(void *arg);

typedef struct eng_job_info {
    char name[48];
    bool periodic;
    int64_t interval_ms;      /* periodic only; INT64_MAX = never */
    uint64_t runs;
    uint64_t failures;
    int64_t last_start_ms;    /* wall clock, -1 never */
    int64_t last_duration_ms; /* -1 never */
    int last_result;          /* 0 ok, else an engine error code */
    char last_note[160];
    int64_t next_run_ms;      /* wall clock, -1 none scheduled */
    uint32_t pending;         /* queued one-shots of this name */
    bool running;
} eng_job_info;

/* Creates a scheduler with `threads` workers (not started). */
int eng_scheduler_new(unsigned threads, eng_scheduler **out);

/* Starts the workers. */
int eng_scheduler_start(eng_scheduler *s);

/* Registers a periodic job: first run after initial_delay_ms, then every
 * interval_ms after the previous run ends.  INT64_MAX never runs (it is
 * still listed). */
int eng_scheduler_add_periodic(eng_scheduler *s, const char *name, int64_t initial_delay_ms,
                               int64_t interval_ms, eng_job_fn fn, void *arg);

/* Queues a one-shot job after delay_ms.  drop (may be NULL) releases arg if
 * the job never runs.  Fails with ENG_ESHUTDOWN once stopping (and calls
 * drop). */
int eng_scheduler_add_once(eng_scheduler *s, const char *name, int64_t delay_ms, eng_job_fn fn,
                           void *arg, eng_job_drop_fn drop);

/* Runs the periodic job `name` as soon as a worker is free (used by tests
 * and on-demand admin calls).  ENG_ENOTFOUND if unknown. */
int eng_scheduler_trigger(eng_scheduler *s, const char *name);

/* Makes the queued one-shots named `name` whose arg match(arg, ctx) accepts
 * due now.  match runs under the scheduler's lock: it must take no lock a
 * job or an add_once caller may hold. */
void eng_scheduler_expedite(eng_scheduler *s, const char *name,
                            bool (*match)(void *arg, void *ctx), void *ctx);

/* Stops: no new work starts, running jobs finish, pending one-shots are
 * dropped; later add_once calls fail (and drop).  s may be NULL. */
void eng_scheduler_stop(eng_scheduler *s);

/* Stops if needed and frees. s may be NULL. */
void eng_scheduler_free(eng_scheduler *s);

/* Snapshot of every job name; *out malloc'd (caller frees). */
int eng_scheduler_jobs(eng_scheduler *s, eng_job_info **out, size_t *n);

#endif
