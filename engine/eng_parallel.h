/*
 * eng_parallel.h - one job over many items, on a few short-lived threads.
 *
 * For work made of many independent waits on the disk (closing 2,000
 * partitions at a stop, opening the partitions of a new topic): done one
 * after another their fsyncs queue up, done side by side the file system
 * commits them together.  Not the scheduler: these run when it is stopped
 * (a close) or must not wait behind its jobs (a create).
 */
#ifndef ENG_PARALLEL_H
#define ENG_PARALLEL_H

#include <stdbool.h>
#include <stddef.h>

/* Runs fn(ctx, i) once for each i in [0, n) on up to `threads` threads, the
 * calling one included, each taking the next i in turn; a thread that
 * cannot be started leaves its share to the others.  With stop_on_error no
 * new i is taken once a call has failed (the calls under way finish), so
 * fn must record which items it ran when the caller needs to undo them.
 * Returns the first failure seen (nonzero), or 0.  fn must be safe to run
 * on different items at once. */
int eng_parallel_for(size_t n, unsigned threads, bool stop_on_error,
                     int (*fn)(void *ctx, size_t i), void *ctx);

#endif
