/*
 * eng_manager.h - the log manager: one data dir, its topics and partitions.
 *
 * Layout (DESIGN §2): <log.dirs>/<topic>-<partition>/ holds a partition;
 * <log.dirs>/meta/<topic>.json holds a topic's partition count and config
 * overrides.  The metadata file is the commit point of a topic: it is written
 * (durably) before partition directories are created and removed first when a
 * topic is deleted, so a crash never leaves a half-known topic.  The engine
 * does not speak JSON: service/ installs a codec that turns eng_topic_meta
 * into bytes and back.
 *
 * The data dir is locked with flock on <log.dirs>/.lock for the life of the
 * manager; .kafka_cleanshutdown is read and removed when loading starts and
 * written, last, by a clean close.
 */
#ifndef ENG_MANAGER_H
#define ENG_MANAGER_H

#include "eng_checkpoint.h"
#include "eng_config.h"
#include "eng_error.h"
#include "eng_partition.h"
#include "eng_scheduler.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct eng_manager eng_manager;

#define ENG_TOPIC_NAME_MAX 249
/* Most partitions a topic may have: creating, growing, and loading its
 * metadata from disk all hold to it. */
#define ENG_TOPIC_PARTITIONS_MAX 100000

/* A topic as stored in meta/<topic>.json. */
typedef struct eng_topic_meta {
    char name[ENG_TOPIC_NAME_MAX + 1];
    int32_t partitions;
    char topic_id[23];  /* 16 random bytes, URL-safe base64 without padding */
    int64_t created_ms;
    eng_config_overrides overrides;
} eng_topic_meta;

/* Serialization of topic metadata, provided by the service layer. */
typedef struct eng_meta_codec {
    /* Writes m into a malloc'd buffer (*out, *len) the engine frees. */
    int (*encode)(const eng_topic_meta *m, char **out, size_t *len, void *ctx);
    /* Parses buf into m (overrides malloc'd); ENG_ECORRUPT if invalid. */
    int (*decode)(const char *buf, size_t len, eng_topic_meta *m, void *ctx);
    void *ctx;
} eng_meta_codec;

/* Background jobs (DESIGN §4); Kafka's setting names in comments. */
typedef struct eng_jobs_opts {
    unsigned background_threads;                 /* background.threads (10) */
    int64_t initial_delay_ms;                    /* log.initial.task.delay.ms (30000) */
    int64_t retention_check_interval_ms;         /* log.retention.check.interval.ms (300000) */
    int64_t flush_scheduler_interval_ms;         /* log.flush.scheduler.interval.ms (Long.MAX) */
    int64_t recovery_checkpoint_interval_ms;     /* log.flush.offset.checkpoint.interval.ms (60000) */
    int64_t start_offset_checkpoint_interval_ms; /* log.flush.start.offset.checkpoint.interval.ms (60000) */
    int64_t producer_expiration_ms;              /* producer.id.expiration.ms (86400000) */
    int64_t producer_expiration_check_interval_ms; /* producer.id.expiration.check.interval.ms (600000) */
    int64_t snapshot_usage_check_interval_ms; /* snapshot.usage.check.interval.ms (30000) */
} eng_jobs_opts;

/* Kafka's defaults for eng_jobs_opts. */
void eng_jobs_opts_default(eng_jobs_opts *o);

typedef struct eng_cleaner eng_cleaner;

typedef struct eng_manager_opts {
    const char *log_dir;
    eng_jobs_opts jobs;
    /* num.recovery.threads.per.data.dir: threads loading the partitions at
     * startup (0 counts as 1, one after another). */
    unsigned recovery_threads;
    struct eng_cleaner_opts *cleaner; /* NULL: Kafka's defaults */
    eng_config_defaults defaults;
    eng_meta_codec codec;
    /* Called when a partition's high watermark moves (may be NULL). */
    void (*on_hw)(eng_partition *p, int64_t hw, void *ctx);
    void *on_hw_ctx;
} eng_manager_opts;

typedef struct eng_startup_report {
    bool first_start;     /* the data dir held nothing yet: no topic, no partition, no checkpoint */
    bool clean_shutdown;
    uint32_t topics;
    uint32_t partitions;
    uint32_t segments;
    uint32_t segments_recovered;
    uint64_t bytes_truncated;
    int64_t duration_ms;
} eng_startup_report;

/* What describe returns; free with eng_topic_desc_clear. */
typedef struct eng_topic_desc {
    eng_topic_meta meta;
    eng_config config; /* resolved */
} eng_topic_desc;

/* Locks and loads the data dir.  *out is owned by the caller
 * (eng_manager_close).  Fails with -EWOULDBLOCK if another process holds the
 * dir, with the reason in err. */
int eng_manager_open(const eng_manager_opts *o, eng_manager **out, eng_errdetail *err);

/* The two halves of eng_manager_open, so a server can refuse a locked dir
 * before it opens its port, then report progress while loading:
 * eng_manager_new creates the dir and takes the lock; eng_manager_load
 * consumes the clean-shutdown marker and loads every topic.  A manager whose
 * load failed is released with eng_manager_abandon (no marker written). */
int eng_manager_new(const eng_manager_opts *o, eng_manager **out, eng_errdetail *err);
int eng_manager_load(eng_manager *m, eng_errdetail *err);
void eng_manager_abandon(eng_manager *m);

/* A stop is coming (a stop signal): a running eng_manager_load stops after
 * the partitions its threads are on, so a stop request during a long recovery ends the
 * process in seconds (the load then fails with ENG_ESHUTDOWN; abandon the
 * manager: the next start loads again), and a snapshot being taken is
 * abandoned before its next partition or copied MiB (it fails with
 * ENG_ESHUTDOWN and leaves nothing behind), since the server's stop waits
 * for the request taking it.  Safe from any thread. */
void eng_manager_request_stop(eng_manager *m);

/* Clean stop: closes every partition (final index entries, trims, fsync),
 * writes checkpoints, then the clean-shutdown marker, then unlocks.  Frees m
 * either way; returns false when any of that failed (a full disk, an offline
 * dir), so no marker was written and the next start recovers. */
bool eng_manager_close(eng_manager *m);

/* Progress while eng_manager_open runs on another thread: partitions loaded
 * so far and in total (0 total before the count is known). */
void eng_manager_load_progress(uint32_t *loaded, uint32_t *total);

void eng_manager_startup_report(const eng_manager *m, eng_startup_report *out);
/* Borrowed from m, valid while it is open. */
const eng_config_defaults *eng_manager_defaults(const eng_manager *m);
const char *eng_manager_log_dir(const eng_manager *m);

/* True if name is a legal topic name: [A-Za-z0-9._-]{1,249}, not . or .. */
bool eng_topic_name_valid(const char *name);

/* A topic as a change left it: its description and every partition,
 * referenced, taken under the table's lock in the same step as the change.
 * Described afterwards, by name, a successful change could answer 404 (a
 * delete came in between) or describe the next topic of that name.  Free
 * with eng_topic_held_clear. */
typedef struct eng_topic_held {
    eng_topic_desc desc;
    eng_partition **parts;
    size_t n;
} eng_topic_held;

void eng_topic_held_clear(eng_topic_held *h);

/* Creates a topic.  keys/values: n config overrides (validated, the bad key
 * named in err).  ENG_ETOPICEXISTS, ENG_ETOPICNAME, ENG_ECONFIG, ENG_EINVAL,
 * ENG_EBUSY (a create or delete of that name, or of one colliding with it,
 * is under way). */
int eng_manager_create_topic(eng_manager *m, const char *name, int32_t partitions,
                             const char *const *keys, const char *const *values, size_t n,
                             eng_errdetail *err);
/* The same, and the new topic as created in *out (when out is not NULL).
 * -ENOMEM with the topic created when there is no memory for *out. */
int eng_manager_create_topic_held(eng_manager *m, const char *name, int32_t partitions,
                                  const char *const *keys, const char *const *values, size_t n,
                                  eng_topic_held *out, eng_errdetail *err);

/* Deletes a topic: metadata first, then partition dirs renamed
 * <topic>-<p>.<uuid>-delete and removed in the background. */
int eng_manager_delete_topic(eng_manager *m, const char *name, eng_errdetail *err);

/* Grows a topic to `total` partitions (never fewer). */
int eng_manager_add_partitions(eng_manager *m, const char *name, int32_t total, eng_errdetail *err);
/* The same, and the topic as grown in *out (when out is not NULL); -ENOMEM
 * with the topic grown when there is no memory for *out. */
int eng_manager_add_partitions_held(eng_manager *m, const char *name, int32_t total,
                                    eng_topic_held *out, eng_errdetail *err);

/* Sorted topic names; free with eng_strv_free. */
int eng_manager_list_topics(eng_manager *m, char ***names, size_t *n);
void eng_strv_free(char **v, size_t n);

int eng_manager_describe_topic(eng_manager *m, const char *name, eng_topic_desc *out);
void eng_topic_desc_clear(eng_topic_desc *d);

/* Replaces a topic's overrides (validated as a whole, persisted, applied to
 * its partitions at once).  Nothing changes on failure.  With topic_id (not
 * NULL) the change applies only to that incarnation of the name: a change
 * built from a topic that was deleted and created again meanwhile would
 * carry the old topic's overrides into the new one (ENG_ENOTOPIC then). */
int eng_manager_set_topic_overrides(eng_manager *m, const char *name, const char *topic_id,
                                    const eng_config_overrides *ov, eng_errdetail *err);
/* The same, and the topic's description as changed in *out (when out is
 * not NULL; eng_topic_desc_clear); -ENOMEM with the change made when there
 * is no memory for *out. */
int eng_manager_set_topic_overrides_desc(eng_manager *m, const char *name, const char *topic_id,
                                         const eng_config_overrides *ov, eng_topic_desc *out,
                                         eng_errdetail *err);

/* A referenced partition (eng_partition_unref when done).  ENG_ENOTOPIC or
 * ENG_ENOPARTITION. */
int eng_manager_partition(eng_manager *m, const char *topic, int32_t id, eng_partition **out,
                          eng_errdetail *err);

/* Every partition of one topic, referenced (eng_partitions_release), with
 * its description when desc is not NULL (eng_topic_desc_clear), taken
 * together under the table's lock.  A request that works on several
 * partitions takes them here, once: looked up one by one, by name, they
 * could come from two topics when the name is deleted and created again in
 * between.  ENG_ENOTOPIC. */
int eng_manager_topic_partitions(eng_manager *m, const char *topic, eng_topic_desc *desc,
                                 eng_partition ***out, size_t *n, eng_errdetail *err);

/* Every partition, referenced; free with eng_partitions_release. */
int eng_manager_all_partitions(eng_manager *m, eng_partition ***out, size_t *n);
void eng_partitions_release(eng_partition **v, size_t n);

/* Starts the background jobs (after eng_manager_load).  Without this call
 * nothing runs in the background: rolled segments are flushed only by
 * flush.messages or at close, and .deleted files are unlinked at once. */
int eng_manager_start_jobs(eng_manager *m);

/* Starts the log cleaner (after eng_manager_load); it is stopped by
 * eng_manager_close before anything else. */
int eng_manager_start_cleaner(eng_manager *m);

/* The cleaner, or NULL before eng_manager_start_cleaner. Borrowed. */
eng_cleaner *eng_manager_cleaner(eng_manager *m);

/* Every job with its statistics; *out malloc'd (caller frees).  Empty when
 * the jobs were not started. */
int eng_manager_jobs(eng_manager *m, eng_job_info **out, size_t *n);

/* Runs a periodic job now (e.g. "log-retention"); ENG_ENOTFOUND if unknown. */
int eng_manager_trigger_job(eng_manager *m, const char *name);

/* Writes recovery-point-offset-checkpoint / log-start-offset-checkpoint now. */
int eng_manager_checkpoint_recovery_points(eng_manager *m);
int eng_manager_checkpoint_start_offsets(eng_manager *m);

/* Writes checkpoint file `name` of the log dir (recovery points, log start
 * offsets, the cleaner's offsets) durably, with eng_checkpoint_write.  A
 * write the storage fails (EIO at the write, the fsync, the rename or the
 * directory's fsync; a file system gone read-only) takes the log dir
 * offline, as Kafka's LogDirFailureChannel does for a checkpoint's
 * IOException: the files may no longer be what the engine believes.  A
 * resource running short (eng_error_out_of_resources) refuses only this
 * write, as a crash before it would: the caller (a job, the cleaner)
 * writes the whole file again next time. */
int eng_manager_write_checkpoint(eng_manager *m, const char *name,
                                 const eng_ckpt_entry *entries, size_t n);

/* Size of the file system holding the log dir (statvfs). */
int eng_manager_disk_usage(const eng_manager *m, uint64_t *total_bytes, uint64_t *usable_bytes);

/* True if an I/O error took the data dir offline. */
bool eng_manager_offline(const eng_manager *m);

#endif
