/*
 * eng_retention.h - deleting what a partition's policy no longer keeps.
 *
 * Kafka's rules (kafka-format.md §15), oldest segment first, each rule
 * stopping at the first segment it keeps, and only for segments wholly below
 * the high watermark (an empty last segment is never deleted):
 *   1. log-start-offset breach: the next segment's base <= log start offset
 *      (always, whatever cleanup.policy says);
 *   2. retention.bytes: while size - retention.bytes - segment size >= 0;
 *   3. retention.ms: now - largest record timestamp > retention.ms (the .log
 *      mtime when the segment holds no timestamp; a segment with a future
 *      timestamp is kept, with a warning).
 * Rules 2 and 3 apply when cleanup.policy contains delete.  If every segment
 * goes, an empty active segment is rolled first, so the next append gets the
 * old log end offset.  The log start offset moves before any file is
 * touched; files are then renamed .deleted and handed to the owner, which
 * unlinks them after file.delete.delay.ms.  A reader inside a deleted segment
 * finishes its read: its descriptors stay valid.
 */
#ifndef ENG_RETENTION_H
#define ENG_RETENTION_H

#include "eng_partition.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct eng_deleted_segment {
    int64_t base_offset;
    int64_t next_offset;
    uint64_t size_bytes;
    const char *rule;   /* "log_start_offset", "retention.bytes" or "retention.ms" */
    char reason[192];   /* e.g. "retention.ms 20000 breached by largest timestamp ..." */
} eng_deleted_segment;

typedef struct eng_retention_report {
    bool dry_run;
    int64_t log_start_offset_before;
    int64_t log_start_offset_after;
    eng_deleted_segment *segments; /* malloc'd */
    size_t n;
    uint64_t bytes_freed;
    bool rolled;         /* every segment went: an empty one was rolled first (would be, in a dry run) */
    uint32_t future_kept; /* segments kept because of a future timestamp */
    bool busy;            /* a cleaning was in progress: nothing was examined */
} eng_retention_report;

/* Applies (or, with dry_run, only reports) retention at time now_ms. */
int eng_partition_retention(eng_partition *p, int64_t now_ms, bool dry_run,
                            eng_retention_report *rep);

void eng_retention_report_free(eng_retention_report *rep);

/* Raises the log start offset to before_offset (-1: the high watermark);
 * never lowers it.  Past the high watermark: ENG_EOFFSET.  *new_lso gets
 * the log start offset afterwards. */
int eng_partition_delete_records(eng_partition *p, int64_t before_offset, int64_t *new_lso,
                                 eng_errdetail *err);

#endif
