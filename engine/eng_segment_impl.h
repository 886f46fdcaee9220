/*
 * eng_segment_impl.h - the segment's state, shared by eng_segment.c (opening,
 * appends, sealing), eng_segment_files.c (renames, unlinks), eng_segment_find.c,
 * eng_segment_sync.c and eng_segment_recover.c (rebuilding from the .log).
 */
#ifndef ENG_SEGMENT_IMPL_H
#define ENG_SEGMENT_IMPL_H

#include "eng_buf.h"
#include "eng_segment.h"

#include <pthread.h>
#include <stdatomic.h>

struct eng_segment {
    int64_t base;
    char *dir;
    char suffix[16];
    int log_fd;
    eng_segment_opts opts;
    _Atomic int refs;
    _Atomic uint64_t size;
    _Atomic int64_t next_offset; /* -1 until loaded for an inactive segment */
    _Atomic int64_t max_ts;
    _Atomic int64_t offset_of_max_ts;
    _Atomic bool max_ts_loaded;
    _Atomic(eng_index *) oidx;
    _Atomic(eng_index *) tidx;
    _Atomic bool active;
    _Atomic bool index_distrusted; /* an entry pointed off a batch: scan instead */
    /* The .log changed (bytes or size) since this object's last fdatasync
     * of it.  Set after each change, cleared before the fdatasync, so a
     * change racing a sync leaves it set. */
    _Atomic bool log_dirty;
    pthread_mutex_t lock;
    /* appender-only state */
    uint64_t bytes_since_index;
    int64_t first_batch_ts; /* max timestamp of the first append, -1 unknown */
    int64_t created_ms;
    bool preallocated;
    bool index_full_skips; /* eng_segment_skip_full_index (cleaned segments) */
    bool discarded_on_failure; /* eng_segment_discard_on_failure (cleaned segments) */
};

/* Enters s's gate for one operation by path: 0 (leave with
 * eng__segment_path_leave), or ENG_ENOTOPIC when it was revoked (nothing to
 * leave). */
static inline int eng__segment_path_enter(const eng_segment *s)
{
    return s->opts.gate ? eng_segment_gate_enter(s->opts.gate) : 0;
}

static inline void eng__segment_path_leave(const eng_segment *s)
{
    if (s->opts.gate)
        eng_segment_gate_leave(s->opts.gate);
}

/* Stops using s's offset index for this process, once an entry at byte pos
 * was found pointing off its batch (logged once). */
void eng__segment_distrust_index(eng_segment *s, uint32_t pos);

/* Opens (or reopens) both indexes; writable ones are preallocated. */
int eng__segment_open_indexes(eng_segment *s, bool writable);

/* Reads the whole batch at b into buf. */
int eng__segment_read_batch(eng_segment *s, const eng_batch_pos *b, eng_buf *buf);

#endif
