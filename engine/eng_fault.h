/*
 * eng_fault.h - fault points, compiled only into test builds.
 *
 * ENG_FAULT("name") marks a place where a crash or an I/O error matters
 * (half a batch written, between the steps of a swap, mid-checkpoint).  In a
 * test build (LOGSTORE_TEST_BUILD) it consults LOGSTORE_FAULT, read once:
 *
 *   LOGSTORE_FAULT="point=action[@n][,point=action[@n]...]"
 *
 * where action is `exit` (the process ends on the spot with status 86, as if
 * killed: nothing is flushed or cleaned up), `eio`, `enospc`, `edquot`, `enomem`, `emfile`,
 * `exdev`, `eperm` or `eexist` (the point returns -EIO / -ENOSPC / -EDQUOT / -ENOMEM / -EMFILE /
 * -EXDEV / -EPERM / -EEXIST to its caller), `eintr` (-EINTR: a signal cut
 * the call short; a point whose caller retries on EINTR spins with `@*`),
 * `stall` (the point sleeps 3 s and
 * carries on, a slow disk; the log says when each stall begins and when it
 * is over), and n picks the n-th time the point
 * is reached (default 1; later hits pass), or `*` every time (a file system
 * that never links).  In release builds ENG_FAULT is
 * the constant 0 and costs nothing.
 *
 * A unit test that needs something to happen at exactly one step (a topic
 * deleted and created again between two steps of a request) sets a hook on
 * the point instead of racing a stall: the hook runs on the thread that
 * reaches the point, so the interleaving is the same on every run.
 */
#ifndef ENG_FAULT_H
#define ENG_FAULT_H

#define ENG_FAULT_EXIT_STATUS 86

#ifdef LOGSTORE_TEST_BUILD
/* 0 to carry on, or a negative errno to inject; may not return (exit). */
int eng__fault(const char *point);
/* Replaces the fault spec at run time (unit tests); NULL clears it. */
void eng_fault_set(const char *spec);
/* Runs fn(ctx) each time `point` is reached, on the thread reaching it and
 * before its faults, until replaced; a NULL point or fn clears it.  One hook
 * at a time; fn may call eng_fault_hook itself (no lock is held). */
void eng_fault_hook(const char *point, void (*fn)(void *ctx), void *ctx);
#define ENG_FAULT(point) eng__fault(point)
#else
#define ENG_FAULT(point) ((void)(point), 0)
#endif

#endif
