/*
 * eng_compact_txn.h - which transactional batches a clean must treat as
 * aborted (kafka-format.md §5, §16.2 steps 1 and 3).
 *
 * Kafka finds aborted transactions in each segment's .txnindex; logstore
 * does not maintain that file, so a clean first reads every batch header of
 * the partition (the log start to the log end as the round sees it) and
 * notes each transaction marker: a control batch whose control record key
 * is ABORT (type 0) or COMMIT (type 1), with its producer id and offset.
 * A transactional data batch belongs to the transaction that its producer's
 * next marker (the first at a higher offset) ends: it is aborted when that
 * marker is an ABORT.  A batch with no later marker is in an open
 * transaction; logstore has no transaction coordinator to bound the last
 * stable offset, so such data is treated as committed, as before this
 * module existed.
 *
 * Other control records (leader change, KRaft snapshots) end no
 * transaction and are ignored here.
 */
#ifndef ENG_COMPACT_TXN_H
#define ENG_COMPACT_TXN_H

#include "eng_batch.h"
#include "eng_partition_impl.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct eng__txn_marker {
    int64_t producer_id;
    int64_t offset;
    bool abort;
} eng__txn_marker;

/* The markers of a partition, sorted by (producer id, offset). */
typedef struct eng__txn_markers {
    eng__txn_marker *v;
    size_t n, cap;
    bool any_abort;
} eng__txn_markers;

/* Collects the markers of every segment of v (each up to the size it has
 * now) into *t, which must be zeroed or freed before.  A marker whose CRC
 * does not match is ENG_ECRC; an unreadable header ENG_ECORRUPT.  scratch
 * is read and decompression space. */
int eng__txn_markers_collect(eng__txn_markers *t, const eng_segview *v, eng_buf *scratch);

/* Whether the batch with header h is data of an aborted transaction. */
bool eng__txn_aborted(const eng__txn_markers *t, const eng_batch_header *h);

void eng__txn_markers_free(eng__txn_markers *t);

/* The control record type of a control batch's records (plain, len bytes),
 * or -1 when there is no record or its key is not a control key. */
int eng__control_type(const eng_batch_header *h, const uint8_t *recs, size_t len);

#endif
