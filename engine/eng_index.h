/*
 * eng_index.h - Kafka's sparse offset index (.index) and time index (.timeindex).
 *
 * Offset index entry (8 bytes, big-endian): int32 relative offset (the last
 * offset of the indexed batch - segment base), int32 file position of that
 * batch's start.  Time index entry (12 bytes): int64 timestamp (the largest
 * timestamp seen so far in the segment), int32 relative offset of the batch
 * holding it.  kafka-format.md §9 and §13 give the rules kept here.
 *
 * A writable index is preallocated to floor(max_bytes / entry) * entry bytes
 * (a file that existed trimmed to its entries, at its first new entry) and
 * trimmed to its entries on roll and close.  Reads go through a shared
 * mmap.  Appends store through it (read-write) onto blocks reserved first
 * with posix_fallocate, on file systems that overwrite blocks in place
 * (ext2/3/4, tmpfs); elsewhere they go through pwrite: either way a full
 * disk is an error code, not a SIGBUS (eng_index.c).  The entry count is
 * published with a release store after the bytes are written, so readers
 * on other threads never take a lock and never see a half-written entry.
 */
#ifndef ENG_INDEX_H
#define ENG_INDEX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum { ENG_INDEX_OFFSET, ENG_INDEX_TIME } eng_index_kind;

#define ENG_OFFSET_ENTRY_SIZE 8
#define ENG_TIME_ENTRY_SIZE 12
#define ENG_INDEX_WARM_BYTES 8192

typedef struct eng_index eng_index;

/* Opens (creating if missing when writable) the index at path.  A writable
 * index is resized to max_bytes rounded down to the entry size; existing
 * full entries are kept (floor(file length / entry size) of them).  A file
 * that existed and holds exactly its entries is resized only when it takes
 * its first entry, so opening and closing it unused leaves it untouched
 * and needs no sync.  A read-only index maps the file as it is.  *out is
 * owned by the caller and released with eng_index_close(). */
int eng_index_open(const char *path, eng_index_kind kind, int64_t base_offset, size_t max_bytes,
                   bool writable, eng_index **out);

/* An index of no entries backed by no file (read-only; eng_index_close
 * releases it): what a missing index file reads as. */
int eng_index_new_empty(eng_index_kind kind, int64_t base_offset, eng_index **out);

/* Unmaps and closes; idx may be NULL.  Does not trim. */
void eng_index_close(eng_index *idx);

/* Truncates the file to exactly entries x entry size.  The mapping stays. */
int eng_index_trim(eng_index *idx);

/* Marks the file as holding changes a sync must write, whoever made them
 * (a previous process, or another eng_index on the same file). */
void eng_index_mark_dirty(eng_index *idx);

/* Flushes written entries to disk (fdatasync).  A sealed index closes its
 * descriptor once it is clean. */
int eng_index_sync(eng_index *idx);

/* Marks the index finished (its segment rolled, after the final trim): no
 * more entries; the next eng_index_sync that leaves it clean closes its
 * file descriptor. */
void eng_index_seal(eng_index *idx);

/* Drops every entry (for a rebuild); the file keeps its size. */
void eng_index_reset(eng_index *idx);

/* True if the slots from the entry count up to slot `upto` (at most the
 * entries the file held when opened) are all zero bytes: after a rebuild,
 * nothing stale follows the entries, and the file reads as a trim to them
 * and a regrowth would leave it. */
bool eng_index_zero_past(const eng_index *idx, uint32_t upto);

/* Removes entries whose offset is >= offset (Kafka's truncateTo). */
void eng_index_truncate_to(eng_index *idx, int64_t offset);

uint32_t eng_index_entries(const eng_index *idx);
uint32_t eng_index_max_entries(const eng_index *idx);
int64_t eng_index_base_offset(const eng_index *idx);
/* Current length of the file in bytes. */
uint64_t eng_index_file_bytes(const eng_index *idx);

/* True when the file holds its entries and nothing past them, as every
 * sealed segment's index is left (a roll, a recovery and a clean stop trim
 * it); false for one still at its preallocated size. */
bool eng_index_trimmed(const eng_index *idx);
bool eng_index_is_full(const eng_index *idx);

/* Checks what a loaded file claims: offsets strictly increasing and within
 * the segment, positions increasing and below log_size, time-index
 * timestamps strictly increasing.  Returns 0 or ENG_ECORRUPT. */
int eng_index_check(const eng_index *idx, uint64_t log_size);

/* Offset index. */
int eng_offset_index_append(eng_index *idx, int64_t offset, uint32_t position);
void eng_offset_index_entry(const eng_index *idx, uint32_t i, int64_t *offset, uint32_t *position);
/* Largest entry with offset <= target; (base offset, 0) when there is none. */
void eng_offset_index_lookup(const eng_index *idx, int64_t target, int64_t *offset,
                             uint32_t *position);

/* Largest entry whose position <= pos; (base offset, 0) when none.
 * Positions grow with offsets, so the same search works on them. */
void eng_offset_index_floor_position(const eng_index *idx, uint64_t pos, int64_t *offset,
                                     uint32_t *position);

/* Time index: appends (ts, offset) only if ts is strictly larger than the
 * last entry's timestamp.  Errors when full (unless skip_full_check) or when
 * offset or ts would go backwards. */
int eng_time_index_maybe_append(eng_index *idx, int64_t ts, int64_t offset, bool skip_full_check);
void eng_time_index_entry(const eng_index *idx, uint32_t i, int64_t *ts, int64_t *offset);
/* Last entry, or (-1, base offset) when empty. */
void eng_time_index_last(const eng_index *idx, int64_t *ts, int64_t *offset);
/* Largest entry with timestamp <= target; (-1, base offset) when none. */
void eng_time_index_lookup(const eng_index *idx, int64_t target, int64_t *ts, int64_t *offset);

#endif
