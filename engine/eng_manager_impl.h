/*
 * eng_manager_impl.h - the log manager's state, shared by eng_manager.c
 * (topics, loading, closing) and eng_manager_jobs.c (background jobs).
 */
#ifndef ENG_MANAGER_IMPL_H
#define ENG_MANAGER_IMPL_H

#include "eng_cleaner.h"
#include "eng_manager.h"

#include <pthread.h>
#include <stdatomic.h>

typedef struct eng_topic {
    eng_topic_meta meta;
    eng_config cfg;
    eng_partition **parts;
} eng_topic;

struct eng_manager {
    char *dir;
    char *meta_dir;
    int lock_fd;
    eng_config_defaults defaults;
    eng_meta_codec codec;
    void (*on_hw)(eng_partition *p, int64_t hw, void *ctx);
    void *on_hw_ctx;
    pthread_rwlock_t lock;
    eng_topic **topics;
    size_t ntopics, cap;
    _Atomic int offline;
    eng_startup_report report;
    eng_jobs_opts jobs_opts;
    _Atomic(eng_scheduler *) sched; /* NULL until eng_manager_start_jobs */
    eng_cleaner_opts cleaner_opts;
    eng_cleaner *cleaner; /* NULL until eng_manager_start_cleaner */
};

/* Events every partition of this manager reports to it. */
eng_partition_events eng__manager_events(eng_manager *m);

/* Writes one offset checkpoint file from get(p) over every partition. */
int eng__manager_write_offsets(eng_manager *m, const char *name,
                               int64_t (*get)(const eng_partition *), bool only_positive);

#endif
