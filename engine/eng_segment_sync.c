/*
 * eng_segment_sync.c - what of a segment has reached the disk: fdatasync of
 * its .log and its indexes, the dirty marks that let a sync (a clean stop of
 * thousands of idle partitions) skip files nothing changed, and the trim of
 * a preallocated .log to its data.
 */
#include "eng_segment_impl.h"

#include "eng_fault.h"

#include <errno.h>
#include <stdatomic.h>
#include <unistd.h>

/* Not synced here: a roll syncs the cut only when a flush may already
 * have moved the recovery point to the segment's end (see
 * eng__partition_roll_locked). */
int eng_segment_trim_preallocated(eng_segment *s)
{
    if (!s->preallocated)
        return 0;
    if (ftruncate(s->log_fd, (off_t)eng_segment_size(s)) < 0)
        return -errno;
    s->preallocated = false;
    return 0;
}

bool eng_segment_is_preallocated(const eng_segment *s)
{
    return s->preallocated;
}

int eng_segment_sync_data(eng_segment *s)
{
    bool was = atomic_exchange(&s->log_dirty, false);
    /* Every fdatasync of a segment's files passes here or in
     * eng_index_sync: a test counts them, or fails one. */
    int rc = ENG_FAULT("segment.sync");
    if (!rc && fdatasync(s->log_fd) < 0)
        rc = -errno;
    if (rc && was)
        atomic_store(&s->log_dirty, true);
    return rc;
}

int eng_segment_sync_indexes(eng_segment *s)
{
    eng_index *oi = atomic_load(&s->oidx), *ti = atomic_load(&s->tidx);
    int rc = 0;
    if (oi && (rc = eng_index_sync(oi)))
        return rc;
    if (ti && (rc = eng_index_sync(ti)))
        return rc;
    return 0;
}

int eng_segment_sync(eng_segment *s)
{
    int rc = eng_segment_sync_data(s);
    return rc ? rc : eng_segment_sync_indexes(s);
}

int eng_segment_sync_changed(eng_segment *s)
{
    int rc = atomic_load(&s->log_dirty) ? eng_segment_sync_data(s) : 0;
    return rc ? rc : eng_segment_sync_indexes(s);
}

void eng_segment_mark_unsynced(eng_segment *s)
{
    atomic_store(&s->log_dirty, true);
    eng_index *oi = atomic_load(&s->oidx), *ti = atomic_load(&s->tidx);
    if (oi)
        eng_index_mark_dirty(oi);
    if (ti)
        eng_index_mark_dirty(ti);
}
