/*
 * eng_snapshot_impl.h - what eng_snapshot.c (taking and removing snapshots)
 * and eng_snapshot_usage.c (measuring their disk use) share.
 */
#ifndef ENG_SNAPSHOT_IMPL_H
#define ENG_SNAPSHOT_IMPL_H

#include "eng_snapshot.h"

#include <stddef.h>

/* The job that measures every snapshot's disk use (GET /v1/jobs). */
#define ENG_SNAPSHOT_USAGE_JOB "snapshot-usage"

/* <log.dirs>/snapshots/<name> into buf; ENG_EINVAL when it does not fit. */
int eng__snapshot_path(const eng_manager *m, const char *name, char *buf, size_t len);

/* Reads every file of the snapshot at path into *in, now. */
void eng__snapshot_measure(const eng_manager *m, const char *path, const char *name,
                           eng_snapshot_info *in);

/* Snapshot in->name was just taken, described by *in: listed with it, and
 * counted in the bytes only snapshots hold, until the next measurement. */
void eng__snapshot_usage_taken(eng_manager *m, const eng_snapshot_info *in);

/* Snapshot name was just renamed aside to be removed (the caller holds
 * snap_lock): forgotten, and its unshared bytes no longer counted. */
void eng__snapshot_usage_removed(eng_manager *m, const char *name);

/* The snapshot-usage job's body (arg: the manager). */
int eng__snapshot_usage_job(void *arg, char *note, size_t len);

/* Frees the measurements (the manager is being freed). */
void eng__snapshot_usage_free(eng_manager *m);

#endif
