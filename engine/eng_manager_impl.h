/*
 * eng_manager_impl.h - the log manager's state, shared by eng_manager.c
 * (loading, closing), eng_topics.c (the topic table and its administration)
 * and eng_manager_jobs.c (background jobs).
 */
#ifndef ENG_MANAGER_IMPL_H
#define ENG_MANAGER_IMPL_H

#include "eng_cleaner.h"
#include "eng_manager.h"

#include <pthread.h>
#include <stdatomic.h>
#include <sys/types.h>

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
    /* Names a create, a partition increase or a delete is working on
     * outside the lock (making or moving directories): any other change
     * to them waits its turn with ENG_EBUSY (m->lock). */
    char **reserved;
    size_t nreserved;
    _Atomic int offline;
    /* eng_manager_request_stop: a load stops early and a snapshot being
     * taken is abandoned, so neither holds the stop past its grace. */
    _Atomic bool stop_requested;
    eng_startup_report report;
    eng_jobs_opts jobs_opts;
    unsigned recovery_threads; /* num.recovery.threads.per.data.dir */
    _Atomic(eng_scheduler *) sched; /* NULL until eng_manager_start_jobs */
    eng_cleaner_opts cleaner_opts;
    eng_cleaner *cleaner; /* NULL until eng_manager_start_cleaner */
    /* One checkpoint write at a time, from the listing of the partitions to
     * the rename: they share "<name>.tmp", and a delete writes them outside
     * the jobs (eng__manager_write_offsets).  Taken before m->lock. */
    pthread_mutex_t ckpt_lock;
    /* Orders the writes of an existing topic's meta/<topic>.json (config
     * changes, partition increases, deletes): a config change writes and
     * fsyncs the file without m->lock, which every request takes, and this
     * keeps a grow or a delete from landing between its read of the topic
     * and its install, so the file always ends as the table is.  Taken
     * before m->lock. */
    pthread_mutex_t meta_lock;
    /* Directories being removed on threads of their own
     * (eng__remove_in_background).  Freeing the manager stops and waits
     * for them: they log, and a thread outliving the close logged through
     * a sink its owner was already taking down. */
    pthread_mutex_t removals_lock;
    pthread_cond_t removals_done;
    unsigned removals;
    _Atomic bool removals_stop;
    /* One snapshot taken or removed at a time (eng_snapshot.c). */
    pthread_mutex_t snap_lock;
    /* The snapshots' disk use as last measured (eng_snapshot_usage.c):
     * reading every file of every snapshot takes too long for a request's
     * thread, so the snapshot-usage job does it and the answers read this.
     * usage_lock guards the fields below; never held across file I/O
     * except one lstat per snapshot installed. */
    pthread_mutex_t usage_lock;
    struct eng__snap_usage *usage; /* by name (strcmp) */
    size_t nusage, cap_usage;
    uint64_t usage_gen;     /* bumped by every snapshot taken or removed */
    bool usage_total_known; /* usage_total has been measured */
    uint64_t usage_total;   /* bytes only snapshots hold (eng_manager_snapshot_bytes) */
    int64_t usage_total_ms; /* wall clock when the walk behind it began */
};

/* ---- eng_topics.c: the topic table (callers hold m->lock) ---- */

/* Frees t and drops its partition references; NULL is a no-op. */
void eng__topic_free(eng_topic *t);

/* Index of `name` in m->topics, or -1 with *insert_at (if given) set to
 * where it would go. */
ssize_t eng__topic_find(const eng_manager *m, const char *name, size_t *insert_at);

/* Takes ownership of t on success; -ENOMEM leaves it with the caller. */
int eng__topic_insert(eng_manager *m, eng_topic *t);

/* Path of a topic's metadata file / a partition's directory; ENG_EINVAL
 * when it does not fit in buf. */
int eng__topic_meta_path(const eng_manager *m, const char *topic, char *buf, size_t len);
int eng__partition_dir(const eng_manager *m, const char *topic, int32_t id, char *buf, size_t len);

/* Renames partition directory <topic>-<id> to Kafka's form for a directory
 * set aside, "<topic>-<id>.<32 hex>-<suffix>" (suffix "delete" or "stray"),
 * the topic cut so the name fits in 255 bytes as Kafka's
 * logDirNameWithSuffixCappedLength does; *to gets the new path.  0 or -errno. */
int eng__set_aside_partition_dir(const eng_manager *m, const char *topic, int32_t id,
                                 const char *suffix, char *to, size_t len);

/* A partition directory no topic owns (a delete cut short by a crash,
 * files copied in without their meta/<topic>.json) is set aside as -stray,
 * never adopted by a topic created later under the name, and never deleted:
 * it may be someone's data.  `why` says where it was found. */
void eng__set_aside_stray(const eng_manager *m, const char *topic, int32_t id, const char *why);

/* ---- eng_manager_load.c, eng_manager.c ---- */

struct load_ctx;

/* Opens (creating when missing) partition `id` of t into *out, a new
 * reference.  lc is the startup load's state, or NULL for a partition
 * created now. */
int eng__open_partition(eng_manager *m, eng_topic *t, int32_t id, struct load_ctx *lc,
                        eng_partition **out);

/* Removes a directory on a detached thread of m's; an interrupted removal
 * (a stop, a crash) is finished at the next startup (the name still ends
 * in -delete). */
void eng__remove_in_background(eng_manager *m, const char *path);

/* Runs now the delete-file jobs of deleted topics' segments: their unlink
 * is a no-op (the directory goes whole), but until they run they hold the
 * segment's descriptor, and the unlinked file's disk space with it. */
void eng__manager_release_deleted(eng_manager *m);

/* Events every partition of this manager reports to it. */
eng_partition_events eng__manager_events(eng_manager *m);

/* Writes both offset checkpoints (recovery points, then log start
 * offsets); the first error stops it. */
int eng__manager_write_checkpoints(eng_manager *m);

/* Writes one offset checkpoint file from get(p) over every partition. */
int eng__manager_write_offsets(eng_manager *m, const char *name,
                               int64_t (*get)(const eng_partition *), bool only_positive);

#endif
