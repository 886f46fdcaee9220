/*
 * eng_snapshot.h - point-in-time snapshots of the data dir, for backups.
 *
 * A snapshot is <log.dirs>/snapshots/<name>/, a complete data directory as
 * the server stood at one moment per partition: meta/<topic>.json, each
 * partition's directory with its segments, leader-epoch-checkpoint,
 * partition.metadata and producer snapshots, and the recovery-point,
 * log-start-offset and cleaner-offset checkpoints, each written from the
 * partitions as they were taken (the cleaner's first dirty offset read
 * under the same lock as the segments, so it never names cleaning that
 * the copied segments do not hold).  It has no .lock and no
 * .kafka_cleanshutdown, so a server started on a copy of it recovers the
 * active segments' tails (and rebuilds their indexes, which are left out).
 *
 * Sealed segments' .log files are hard-linked: once rolled they are never
 * written again, and the cleaner's swap and retention rename or unlink
 * directory entries, never the inode the snapshot links.  Their indexes,
 * small once trimmed, are copied.  The active segment's .log is copied up to
 * its committed size at the moment the partition was taken (appends only add
 * bytes after it).  Each partition is taken under its maint_lock, which keeps
 * a cleaner swap and a retention pass out while its segment set is read and
 * linked (a snapshot waits for a compaction round under way on that
 * partition), and its append_lock only for the instant the segment set and
 * the active segment's size are read.  Everything written is fsync'd before
 * the snapshot appears: it is built as snapshots/.partial-<name> and renamed
 * into place, so a listed snapshot is always whole.
 *
 * The loader never reads snapshots/: it is not a <topic>-<partition> name.
 */
#ifndef ENG_SNAPSHOT_H
#define ENG_SNAPSHOT_H

#include "eng_error.h"
#include "eng_manager.h"

#include <stdbool.h>
#include <stdint.h>

/* The directory under log.dirs that holds the snapshots. */
#define ENG_SNAPSHOTS_DIR "snapshots"

/* The longest snapshot name: a snapshot is built, and removed, under
 * snapshots/.partial-<name>, and that name must fit a file name (255 bytes
 * on Linux's file systems), 9 bytes more than the name itself. */
#define ENG_SNAPSHOT_NAME_MAX 246

typedef struct eng_snapshot_info {
    char name[ENG_TOPIC_NAME_MAX + 1];
    int64_t created_ms;      /* when it was completed (its directory's mtime) */
    uint64_t size_bytes;     /* every file in it */
    uint64_t unshared_bytes; /* files nothing else links to: what removing it frees */
    uint32_t topics;
    uint32_t partitions;
    int64_t measured_ms; /* wall clock when its files were read for these figures */
} eng_snapshot_info;

/* True if name may name a snapshot: a legal topic name of at most
 * ENG_SNAPSHOT_NAME_MAX bytes that does not start with '.' (names starting
 * with '.' are the server's own, in-progress ones). */
bool eng_snapshot_name_valid(const char *name);

/* Takes a snapshot called name; its description in *out (may be NULL).
 * ENG_EINVAL (bad name), -EEXIST (one of that name exists), ENG_EBUSY
 * (another snapshot is being taken), ENG_EOFFLINE, ENG_ESHUTDOWN (a stop
 * is coming, eng_manager_request_stop: the snapshot is abandoned), or the
 * failing system call's -errno; on failure nothing is left behind. */
int eng_manager_snapshot_create(eng_manager *m, const char *name, eng_snapshot_info *out,
                                eng_errdetail *err);

/* Every snapshot's name, sorted by strcmp (free with eng_strv_free): the
 * names alone, one readdir. */
int eng_manager_snapshot_names(eng_manager *m, char ***out, size_t *n);

/* Describes snapshot name: its figures as the snapshot-usage job last
 * measured them (or as taken, for one taken since), read now only for one
 * never measured, or when the background jobs are not running.
 * ENG_EINVAL (bad name), ENG_ENOTFOUND (none of that name, or removed since
 * it was listed). */
int eng_manager_snapshot_describe(eng_manager *m, const char *name, eng_snapshot_info *out);

/* Removes a snapshot.  ENG_EINVAL (bad name), ENG_ENOTFOUND, ENG_EBUSY (a
 * snapshot is being taken). */
int eng_manager_snapshot_delete(eng_manager *m, const char *name, eng_errdetail *err);

/* Bytes that only snapshots hold (see unshared_bytes), over all of them, a
 * file in several counted once, as the snapshot-usage job last measured
 * them at *measured_ms (wall clock), snapshots taken or removed since
 * accounted for.  Measured now when nothing has been yet, or when the
 * background jobs are not running.  A measurement can be up to the job's
 * interval behind what retention and the cleaner removed from the live log
 * since (removing a segment a snapshot links makes its bytes the
 * snapshot's alone). */
int eng_manager_snapshot_bytes(eng_manager *m, uint64_t *unshared_bytes, int64_t *measured_ms);

#endif
