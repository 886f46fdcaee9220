/*
 * eng_segment.h - one log segment: <base>.log, <base>.index, <base>.timeindex.
 *
 * A segment is a reference-counted handle.  The partition's segment view holds
 * one reference per segment; a reader that found a segment in a view takes its
 * own through the view, so a segment that retention or the cleaner drops stays
 * open (files renamed, descriptors valid) until the last reader lets go.
 *
 * Appends (one thread at a time, under the partition's append lock) write at
 * the committed size with pwrite and then publish the new size and next offset
 * with release stores; readers load them with acquire and never look past
 * them.  Index maintenance is Kafka's LogSegment.append (kafka-format.md
 * §13.1); sealing adds the final time-index entry and trims (§13.2);
 * recovery revalidates the .log and rebuilds both indexes (§13.3).
 *
 * Indexes of a segment opened inactive are mapped lazily, on first lookup.
 */
#ifndef ENG_SEGMENT_H
#define ENG_SEGMENT_H

#include "eng_batch.h"
#include "eng_index.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

typedef struct eng_segment eng_segment;

/* A partition directory's leave to be named by path, shared by the
 * partition and every segment made with it (eng_segment_opts.gate).
 * Deleting a topic revokes it before the directory moves away: the path
 * may then name the directory of the next topic of that name, so a segment
 * of the deleted topic opens (lazily: indexes, tail state), renames and
 * unlinks nothing by path any more.  Descriptors and mappings it already
 * holds keep working; what would need the path fails with ENG_ENOTOPIC.
 * Creating and loading segments is not gated: they run under the
 * partition's locks, which a retire waits for. */
typedef struct eng_segment_gate eng_segment_gate;

/* A new, open gate (*out holds the one reference). */
int eng_segment_gate_new(eng_segment_gate **out);
void eng_segment_gate_ref(eng_segment_gate *g);
/* Drops a reference; NULL is a no-op. */
void eng_segment_gate_unref(eng_segment_gate *g);
/* Waits for the path operations in progress under g, then refuses every
 * later one. */
void eng_segment_gate_revoke(eng_segment_gate *g);
/* Enters g for one path operation: 0 (leave with eng_segment_gate_leave), or
 * ENG_ENOTOPIC once it is revoked (nothing to leave). */
int eng_segment_gate_enter(eng_segment_gate *g);
void eng_segment_gate_leave(eng_segment_gate *g);
/* Whether g is revoked; takes no lock, so callers may hold any. */
bool eng_segment_gate_revoked(eng_segment_gate *g);

typedef struct eng_segment_opts {
    uint32_t index_max_bytes;   /* segment.index.bytes */
    uint32_t index_interval;    /* index.interval.bytes */
    uint64_t preallocate_bytes; /* > 0: fallocate a new .log to this size */
    int64_t roll_jitter_ms;     /* chosen per segment by the partition */
    eng_segment_gate *gate;     /* borrowed (the segment takes a reference); NULL: never revoked */
} eng_segment_opts;

/* Why a segment should roll; 0 = it should not. */
typedef enum {
    ENG_ROLL_NONE = 0,
    ENG_ROLL_SIZE,
    ENG_ROLL_TIME,
    ENG_ROLL_OFFSET_INDEX_FULL,
    ENG_ROLL_TIME_INDEX_FULL,
    ENG_ROLL_OFFSET_OVERFLOW,
} eng_roll_reason;

/* Where a batch sits in the file, with its decoded header. */
typedef struct eng_batch_pos {
    uint64_t position;
    eng_batch_header header;
} eng_batch_pos;

/* Result of recovering a segment. */
typedef struct eng_recover_stats {
    uint64_t valid_bytes;
    uint64_t truncated_bytes;
    int64_t next_offset;  /* last valid offset + 1, or base when empty */
    uint32_t batches;
    const char *stop_reason; /* static text, NULL when the whole file was valid */
    bool zero_tail;          /* it stopped at a header of zeros: preallocated space
                              * (or writes lost in a crash; they look the same) */
} eng_recover_stats;

/* Creates a new, empty, active segment; fails with -EEXIST if its .log exists
 * with content.  *out holds one reference. */
int eng_segment_create(const char *dir, int64_t base, const eng_segment_opts *o, eng_segment **out);

/* Like eng_segment_create, with every file named <base><ext><suffix>
 * (the cleaner writes its output as ".cleaned"). */
int eng_segment_create_suffixed(const char *dir, int64_t base, const char *suffix,
                                const eng_segment_opts *o, eng_segment **out);

/* True once an offset index entry of s was found pointing off its batch:
 * this process reads s by scanning it, and a start rebuilds its indexes. */
bool eng_segment_index_distrusted(const eng_segment *s);

/* Opens an existing segment.  An active one gets writable, preallocated
 * indexes at once; an inactive one maps them on first use.  The caller must
 * have checked or recovered the files (see eng_segment_recover). */
int eng_segment_open(const char *dir, int64_t base, const eng_segment_opts *o, bool active,
                     eng_segment **out);

void eng_segment_ref(eng_segment *s);
/* Drops a reference; the last one unmaps and closes everything. */
void eng_segment_unref(eng_segment *s);

int64_t eng_segment_base(const eng_segment *s);
/* Committed bytes of the .log (what readers may read). */
uint64_t eng_segment_size(const eng_segment *s);
/* Offset after the last committed batch (base when empty). */
int64_t eng_segment_next_offset(const eng_segment *s);
bool eng_segment_is_active(const eng_segment *s);
/* Whether s's gate is revoked: its topic was deleted. */
bool eng_segment_retired(const eng_segment *s);
/* Largest record timestamp (Kafka's largestTimestamp), -1 if none. */
int64_t eng_segment_max_timestamp(eng_segment *s);
/* Offset (batch last offset) that carries the max timestamp, -1 if none. */
int64_t eng_segment_offset_of_max_timestamp(eng_segment *s);
/* mtime of the .log in ms. */
int64_t eng_segment_mtime_ms(const eng_segment *s);
/* File descriptor of the .log (borrowed; valid while the reference lives). */
int eng_segment_log_fd(const eng_segment *s);

/* Checks the five roll conditions of kafka-format.md §14 for an append of
 * size bytes whose largest timestamp is max_ts and last offset last_offset. */
eng_roll_reason eng_segment_should_roll(eng_segment *s, uint64_t size, int64_t max_ts,
                                        int64_t last_offset, int64_t segment_bytes,
                                        int64_t max_segment_ms, int64_t now_ms);

/* Appends len bytes (whole batches) at the committed end and maintains the
 * indexes.  On failure nothing is left in the file (it is truncated back). */
int eng_segment_append(eng_segment *s, const uint8_t *data, size_t len, int64_t largest_offset,
                       int64_t largest_ts, int64_t offset_of_max_ts);

/* The same, for len bytes gathered from iovcnt pieces (written with
 * pwritev, so the pieces are not copied together first). */
int eng_segment_appendv(eng_segment *s, const struct iovec *iov, int iovcnt, size_t len,
                        int64_t largest_offset, int64_t largest_ts, int64_t offset_of_max_ts);

/* From now on an append whose sparse index entry does not fit in a full
 * index skips that entry instead of failing.  For segments that never roll
 * (the cleaner's output): skipping is always valid, since lookups scan
 * forward from the entry before, whereas failing would fail the clean. */
void eng_segment_skip_full_index(eng_segment *s);

/* The caller removes the whole file when an append fails (the cleaner's
 * output): an append whose refused bytes cannot be cut back then answers
 * its own error, not ENG_EOFFLINE, which is for a log whose next start
 * would keep them. */
void eng_segment_discard_on_failure(eng_segment *s);

/* Writes the time-index entry a seal ends with (the segment's largest
 * timestamp and its offset); nothing if it is there already.  After a
 * restart that entry is all that tells the segment's largest timestamp, so
 * a roll writes it before the next segment exists and fails without it. */
int eng_segment_write_final_time_entry(eng_segment *s);

/* Removes the segment's index file named by suffix (".index" or
 * ".timeindex"; its mapping, if open, stays readable).  For a sealed
 * segment whose index could not take all its entries (its time index its
 * final one) on a full disk: the next start finds the file missing and
 * rebuilds it, where the short index would be trusted. */
int eng_segment_drop_index_file(eng_segment *s, const char *suffix);

/* Makes the segment inactive: final time-index entry, trims indexes and a
 * preallocated .log.  The segment is sealed even when the final entry
 * cannot be written (a full disk), but that error is returned: a clean stop
 * must then leave no clean-shutdown marker, so the next start rebuilds the
 * index. */
int eng_segment_seal(eng_segment *s);

/* Cuts a preallocated .log to its data, before a roll creates the next
 * segment (a no-op for a segment not preallocated); the caller decides
 * whether the cut must be synced now (eng__partition_roll_locked).  The
 * segment stays active; later appends just grow the file. */
int eng_segment_trim_preallocated(eng_segment *s);
/* True while the .log may hold preallocated space past its data. */
bool eng_segment_is_preallocated(const eng_segment *s);

/* fdatasync of the .log and both indexes. */
int eng_segment_sync(eng_segment *s);
/* fdatasyncs the .log alone (appends are durable once their bytes are). */
int eng_segment_sync_data(eng_segment *s);
/* fdatasyncs the indexes that changed since their last sync. */
int eng_segment_sync_indexes(eng_segment *s);
/* eng_segment_sync of only the files this segment object changed since it
 * last synced them (or eng_segment_mark_unsynced named): a segment opened
 * and left alone costs no system call.  For callers that exclude appends
 * (a close); group commits sync the .log whatever the flag says. */
int eng_segment_sync_changed(eng_segment *s);
/* Makes the next eng_segment_sync_changed sync every file of the segment:
 * for files that changes made through another object, or a previous
 * process, may have left unsynced. */
void eng_segment_mark_unsynced(eng_segment *s);

/* Decodes the header of the segment's first batch: ENG_ENOTFOUND when the
 * segment is empty, ENG_ECORRUPT when the bytes there are no header. */
int eng_segment_first_batch(eng_segment *s, eng_batch_header *h);

/* Finds the first batch whose last offset >= target, scanning headers from
 * the index entry at or below target; stops at limit bytes.  Returns
 * ENG_ENOTFOUND when no such batch is in [0, limit). */
int eng_segment_find_batch(eng_segment *s, int64_t target, uint64_t limit, eng_batch_pos *out);

/* Finds the first record with timestamp >= ts and offset >= min_offset;
 * returns ENG_ENOTFOUND if none in this segment. */
int eng_segment_find_by_timestamp(eng_segment *s, int64_t ts, int64_t min_offset,
                                  int64_t *offset, int64_t *timestamp);

/* Reads len bytes at pos into buf (pread loop); short only at end of file. */
int eng_segment_pread(const eng_segment *s, uint8_t *buf, size_t len, uint64_t pos, size_t *got);

/* Visits every batch header in [0, limit) in order; stop early by returning
 * nonzero from fn (that value is returned).  limit is a batch boundary (the
 * segment's size): a header that does not decode, or a batch running past
 * limit, is ENG_ECORRUPT. */
typedef int (*eng_batch_visit_fn)(const eng_batch_pos *b, void *ctx);
int eng_segment_scan(eng_segment *s, uint64_t limit, eng_batch_visit_fn fn, void *ctx);

/* The same, starting at a batch boundary `start`. */
int eng_segment_scan_from(eng_segment *s, uint64_t start, uint64_t limit, eng_batch_visit_fn fn,
                          void *ctx);

/* Rebuilds the indexes from the .log, validating every batch (size, magic,
 * CRC, framing, offsets increasing, within the segment) and truncating the
 * file at the first invalid one.  Used at startup; single-threaded. */
int eng_segment_recover(eng_segment *s, eng_recover_stats *st);

/* The same for a segment followed by one based at next_base: a batch whose
 * offsets reach next_base is invalid too.  Its base offset is outside the
 * CRC, so a changed byte there passes every other check, and a segment
 * holding offsets of the next one breaks the lookup by base offset. */
int eng_segment_recover_below(eng_segment *s, int64_t next_base, eng_recover_stats *st);

/* The same, calling before_cut(ctx), when it is not NULL, just before the
 * file is truncated: whatever must not outlive the cut (the segments after
 * a torn one) goes first, so a crash between the two cannot keep it.  Its
 * error stops the recovery with nothing truncated. */
int eng_segment_recover_cut(eng_segment *s, int64_t next_base, int (*before_cut)(void *ctx),
                            void *ctx, eng_recover_stats *st);

/* Index access for listings; the index is opened if needed.  Borrowed
 * pointers valid while the reference lives; NULL on failure. */
eng_index *eng_segment_offset_index(eng_segment *s);
eng_index *eng_segment_time_index(eng_segment *s);
/* Both indexes, opened if needed, or why they cannot be (ENG_ENOTOPIC once
 * the gate is revoked).  Either out-pointer may be NULL. */
int eng_segment_indexes(eng_segment *s, eng_index **oi, eng_index **ti);

/* Renames the segment's files from their current suffix to suffix ("" for
 * none, ".deleted", ".swap", ...). Missing index files are skipped.  A
 * failure leaves the files renamed before it under suffix, the rest and
 * eng_segment_suffix as they were. */
int eng_segment_rename(eng_segment *s, const char *suffix);

/* Unlinks the segment's files under their current suffix; nothing once
 * the gate is revoked (they go with their directory). */
int eng_segment_unlink(eng_segment *s);

/* Unlinks the segment's files named with suffix instead of their current
 * one: those a rename to suffix that failed partway had moved. */
int eng_segment_unlink_as(eng_segment *s, const char *suffix);

/* The suffix the files currently carry ("" normally). Borrowed. */
const char *eng_segment_suffix(const eng_segment *s);

/* Sets the .log's modification time (the cleaner keeps the source's). */
int eng_segment_set_mtime_ms(eng_segment *s, int64_t ms);

/* Path of one of the segment's files under its current suffix. */
int eng_segment_file_path(const eng_segment *s, const char *ext, char *buf, size_t len);

#endif
