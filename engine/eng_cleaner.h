/*
 * eng_cleaner.h - the log cleaner: threads that keep compacted topics compact.
 *
 * log.cleaner.threads threads (0 disables them; on-demand runs still work)
 * each loop: pick the filthiest eligible partition, clean it, or back off
 * log.cleaner.backoff.ms.  Eligible: cleanup.policy contains compact, not
 * being cleaned, not marked uncleanable, and either its dirty ratio is
 * strictly above min.cleanable.dirty.ratio or a dirty segment is older than
 * max.compaction.lag.ms.  Each thread owns an offset map of
 * log.cleaner.dedupe.buffer.size / threads bytes, at most 2^31 - 1 as in
 * Kafka, allocated on first use.  A thread that cannot allocate it counts a
 * failed run (the partition is not marked: it is not its fault), logs at
 * most a line a minute and backs off log.cleaner.backoff.ms.
 *
 * The first dirty offset of every compacted partition is kept in
 * cleaner-offset-checkpoint (Kafka's format), rewritten atomically after
 * each clean.  A partition whose cleaning fails is marked uncleanable,
 * logged and reported; the threads go on with the others.
 */
#ifndef ENG_CLEANER_H
#define ENG_CLEANER_H

#include "eng_compact.h"
#include "eng_manager.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct eng_cleaner eng_cleaner;

/* Largest offset map a thread gets, in bytes: Kafka's Int.MaxValue. */
#define ENG_CLEANER_MAP_BYTES_MAX ((size_t)INT32_MAX)

typedef struct eng_cleaner_opts {
    bool enable;                 /* log.cleaner.enable */
    unsigned threads;            /* log.cleaner.threads */
    size_t dedupe_buffer_bytes;  /* log.cleaner.dedupe.buffer.size (total) */
    double load_factor;          /* log.cleaner.io.buffer.load.factor */
    int64_t backoff_ms;          /* log.cleaner.backoff.ms */
    size_t io_buffer_bytes;      /* log.cleaner.io.buffer.size (total) */
    double max_bytes_per_second; /* log.cleaner.io.max.bytes.per.second */
} eng_cleaner_opts;

void eng_cleaner_opts_default(eng_cleaner_opts *o);

typedef struct eng_cleaner_thread_info {
    unsigned id;
    bool busy;
    char topic[ENG_TOPIC_NAME_MAX + 1];
    int32_t partition;
    int64_t since_ms;
    uint64_t cleanings;
} eng_cleaner_thread_info;

typedef struct eng_cleaner_run {
    char topic[ENG_TOPIC_NAME_MAX + 1];
    int32_t partition;
    bool on_demand;
    int result; /* 0 or an engine error */
    eng_clean_stats stats;
} eng_cleaner_run;

typedef struct eng_uncleanable {
    char topic[ENG_TOPIC_NAME_MAX + 1];
    int32_t partition;
    int64_t since_ms;
    /* Out of disk space or descriptors, which pass: tried again from this
     * wall-clock time (as of the snapshot).  0: skipped until a restart or
     * an on-demand clean. */
    int64_t retry_ms;
    /* The same moment on the monotonic clock, which is what the threads
     * wait on: a wall clock set back must not postpone the retry. */
    int64_t retry_mono_ms;
    char reason[200];
} eng_uncleanable;

/* A snapshot for GET /v1/cleaner; free with eng_cleaner_status_free. */
typedef struct eng_cleaner_status {
    bool enabled;
    unsigned nthreads;
    eng_cleaner_thread_info *threads;
    size_t nruns;
    eng_cleaner_run *runs; /* most recent first */
    size_t nuncleanable;
    eng_uncleanable *uncleanable;
    size_t dedupe_buffer_bytes_per_thread;
} eng_cleaner_status;

/* Creates the cleaner for manager m (whose log dir holds the checkpoint)
 * and starts its threads when enabled. */
int eng_cleaner_start(eng_manager *m, const eng_cleaner_opts *o, eng_cleaner **out);

/* Stops the threads (an ongoing cleaning is abandoned: its .cleaned files
 * are removed, the old segments stay) and frees the cleaner. */
void eng_cleaner_stop(eng_cleaner *c);

/* Cleans p now whatever its dirty ratio (or reports what a clean would do).
 * ENG_ENOTCOMPACT, ENG_EBUSY (being cleaned), or the cleaning's error. */
int eng_cleaner_clean_now(eng_cleaner *c, eng_partition *p, bool dry_run, eng_clean_stats *st);

/* Drops what the cleaner remembers of a deleted topic (its checkpoint
 * entries, uncleanable marks, last runs), as Kafka does, so a topic created
 * later under the same name starts clean from offset 0 with no history. */
void eng_cleaner_forget(eng_cleaner *c, const char *topic);

/* The checkpointed first dirty offset of topic/partition, -1 if none. */
int64_t eng_cleaner_checkpoint(eng_cleaner *c, const char *topic, int32_t partition);

int eng_cleaner_status_get(eng_cleaner *c, eng_cleaner_status *out);
void eng_cleaner_status_free(eng_cleaner_status *s);

#endif
