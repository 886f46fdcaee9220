/*
 * eng_producer.h - idempotent producers' state, per partition (Kafka's
 * ProducerStateManager).
 *
 * A producer that sets a producerId (>= 0) in its batches numbers them with
 * sequences.  The partition remembers, for each producer id, its epoch and
 * the last five batches it appended, so that a retried batch is answered with
 * the offsets it got the first time instead of being appended twice, and one
 * that skips or repeats sequence numbers otherwise is refused (Kafka's rules,
 * ProducerAppendInfo.checkSequence and checkProducerEpoch).  The state is
 * saved in `<20-digit offset>.snapshot` files (kafka-format.md §12) at each
 * roll, at a clean stop and after a start's rebuild, and rebuilt at startup
 * from the latest snapshot and the batches after it.
 *
 * Not thread-safe: the partition guards its state with its append lock.
 */
#ifndef ENG_PRODUCER_H
#define ENG_PRODUCER_H

#include "eng_batch.h"
#include "eng_error.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Kafka's ProducerStateEntry.NUM_BATCHES_TO_RETAIN. */
#define ENG_PRODUCER_BATCHES 5

typedef struct eng_producer_batch {
    int32_t last_seq;
    int64_t last_offset;
    int32_t offset_delta; /* lastSeq - firstSeq, = lastOffset - firstOffset */
    int64_t timestamp;    /* the batch's maxTimestamp */
} eng_producer_batch;

typedef struct eng_producer_entry {
    int64_t producer_id;
    int16_t epoch;
    int32_t coordinator_epoch;  /* -1: logstore has no transaction coordinator */
    int64_t txn_first_offset;   /* -1: no open transaction */
    int64_t last_timestamp;     /* maxTimestamp of its last batch */
    uint32_t nbatches;          /* batches[0] is the oldest */
    eng_producer_batch batches[ENG_PRODUCER_BATCHES];
} eng_producer_entry;

/* Entries in no particular order, found through an open-addressing index:
 * producer ids are the clients' to choose, and a client that sends many
 * must not make every new one cost a move of all the others. */
typedef struct eng_producers {
    eng_producer_entry *entries; /* owned */
    size_t n, cap;
    uint32_t *slots;             /* entry index + 1, 0 empty; nslots a power of 2 */
    size_t nslots;
} eng_producers;

/* What an append's batches are against the state (eng_producers_check). */
typedef struct eng_producer_verdict {
    size_t producer_batches; /* batches with a producerId */
    size_t new_producers;    /* ids not in the state yet (room reserved for them) */
    bool duplicate;          /* every batch repeats one already appended: append nothing */
    int64_t dup_first_offset, dup_last_offset; /* the span of the offsets they were given */
    int64_t dup_timestamp;   /* maxTimestamp of the one given dup_last_offset (its append
                              * time under LogAppendTime) */
} eng_producer_verdict;

void eng_producers_init(eng_producers *st);
void eng_producers_free(eng_producers *st);

/* The entry of producer_id, or NULL. */
const eng_producer_entry *eng_producers_find(const eng_producers *st, int64_t producer_id);

/* Checks the batches of an append (whole, already validated batches) as if
 * appended in order: epochs not below the producer's (ENG_EPRODUCER_FENCED),
 * sequences following the last one (ENG_ESEQUENCE), or every batch a
 * duplicate (v->duplicate).  A request mixing duplicates with new batches is
 * refused with ENG_ESEQUENCE.  On success room is reserved for the producers
 * it adds, so eng_producers_apply cannot fail after the write.  err names the
 * batch by its index. */
int eng_producers_check(eng_producers *st, const uint8_t *data, size_t len,
                        eng_producer_verdict *v, eng_errdetail *err);

/* Only reserves room for the producers an append adds, checking nothing:
 * bytes not from a client (Kafka's non-CLIENT origins).  -ENOMEM. */
int eng_producers_reserve(eng_producers *st, const uint8_t *data, size_t len);

/* Records the batches of an append whose first offset is base_offset, after
 * eng_producers_check accepted it and the bytes were written. */
void eng_producers_apply(eng_producers *st, const uint8_t *data, size_t len, int64_t base_offset);

/* Records one stored batch while rebuilding the state from the log (no
 * checks, as Kafka replays with AppendOrigin.REPLICATION).  -ENOMEM. */
int eng_producers_replay(eng_producers *st, const eng_batch_header *h);

/* Drops producers whose last batch is expiration_ms or more older than now
 * (producer.id.expiration.ms); returns how many.  Arrays left a quarter
 * full or less are shrunk, so a burst of ids once does not stay allocated. */
size_t eng_producers_expire(eng_producers *st, int64_t now_ms, int64_t expiration_ms);

/* Rebuilds the index over entries[0, n) (after they were filled or
 * compacted directly); -ENOMEM, or ENG_ECORRUPT when an id is there twice. */
int eng_producers_reindex(eng_producers *st);

/* A copy of the entries sorted by producer id (malloc'd, caller frees;
 * NULL when n is 0). */
int eng_producers_copy(const eng_producers *st, eng_producer_entry **out, size_t *n);

/* The first sequence of a kept batch (its last one less its delta,
 * wrapping past 0 to INT32_MAX as Kafka's sequences do). */
int32_t eng_producer_batch_first_seq(const eng_producer_batch *b);

/* qsort order of entries by producer id. */
int eng_producer_cmp_id(const void *a, const void *b);

/* ---- snapshot files (eng_producer_snapshot.c) ------------------------------ */

/* Encodes st as a ProducerSnapshot v1 file body into *out (malloc'd, caller
 * frees). */
int eng_producers_encode(const eng_producers *st, uint8_t **out, size_t *len);

/* Decodes a snapshot file body into st (emptied first); ENG_ECORRUPT when its
 * version, CRC or length is wrong, or an id repeats.  Entries may come in
 * any order (Kafka writes them in a hash map's) and are kept in it,
 * indexed by id; those with no batch are kept with nbatches 0. */
int eng_producers_decode(eng_producers *st, const uint8_t *buf, size_t len);

/* Writes `<offset>.snapshot` in dir (replacing one there); with sync the
 * file and then dir are fsync'd. */
int eng_producers_write_snapshot(const eng_producers *st, const char *dir, int64_t offset,
                                 bool sync);

/* fsyncs `<offset>.snapshot` in dir (not its directory); 0 when there is
 * none (never written, or its segment deleted since), else -errno. */
int eng_producers_sync_snapshot(const char *dir, int64_t offset);

/* Loads the latest readable snapshot of dir at or below max_offset into st
 * and returns its offset in *at (-1 when none).  Snapshots above max_offset
 * (left by a truncation) and ones that do not decode are deleted, with a
 * warning for the latter, as Kafka's ProducerStateManager does (one that
 * cannot be read is passed over and kept); producers expired at
 * now_ms are dropped.  *found (may be NULL) tells whether dir held any
 * snapshot at all, usable or not. */
int eng_producers_load_latest(eng_producers *st, const char *dir, int64_t max_offset,
                              int64_t now_ms, int64_t expiration_ms, int64_t *at, bool *found);

/* Removes dir's snapshots named by none of the segment bases (sorted, n
 * of them) but keep, and the temporary files of snapshot writes a crash
 * cut short (Kafka's removeStraySnapshots).  Such a snapshot is a clean
 * stop's or a start's, at the log end: once a later one stands nothing
 * reads it, and retention, which takes a segment's own, never would. */
void eng_producers_remove_stray(const char *dir, const int64_t *bases, size_t n, int64_t keep);

#endif
