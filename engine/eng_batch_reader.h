/*
 * eng_batch_reader.h - sequential whole-batch reads of a segment.
 *
 * The cleaner and recovery-style scans read every batch of a segment; doing
 * it through one large buffer costs one pread per chunk instead of one per
 * batch.  Batches larger than the chunk grow the buffer.
 */
#ifndef ENG_BATCH_READER_H
#define ENG_BATCH_READER_H

#include "eng_segment.h"

/* Reads whole batches in order through a large buffer, so scanning a
 * segment costs one pread per chunk rather than one per batch. */
typedef struct eng_batch_reader {
    eng_segment *seg;
    uint64_t pos, limit;
    uint8_t *buf;
    size_t cap, len;
    uint64_t buf_pos;
} eng_batch_reader;

/* Starts at a batch boundary; chunk is the read size (grown for batches
 * larger than it). */
int eng_batch_reader_init(eng_batch_reader *r, eng_segment *s, uint64_t start, uint64_t limit,
                          size_t chunk);

/* Returns 1 with the next batch (valid until the next call), 0 at the end,
 * or an error (ENG_ECORRUPT for an unreadable header inside the limit). */
int eng_batch_reader_next(eng_batch_reader *r, eng_batch_pos *b, const uint8_t **bytes);

void eng_batch_reader_free(eng_batch_reader *r);

#endif
