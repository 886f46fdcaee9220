/*
 * eng_compress.h - the records section of a batch in plain form.
 *
 * Kafka compresses the records section of a batch as one stream
 * (kafka-format.md §4).  Everything in the engine that looks inside records
 * (timestamp search, the cleaner, recovery's framing check, reads) goes through
 * eng_batch_plain_records(), which hands back a view for uncompressed batches
 * and decompresses into caller-owned scratch space otherwise.
 */
#ifndef ENG_COMPRESS_H
#define ENG_COMPRESS_H

#include "eng_batch.h"
#include "eng_buf.h"

/* Sets *recs and *len to the plain records of the batch at `batch` (whose header
 * is h and which is eng_batch_size(h) bytes long).  scratch is used (and
 * grown) only for compressed batches.  Fails with ENG_ECORRUPT for an unknown
 * codec or a stream that does not decompress. */
int eng_batch_plain_records(const uint8_t *batch, const eng_batch_header *h, eng_buf *scratch,
                            const uint8_t **recs, size_t *len);

/* Compresses a plain records section with codec (ENG_CODEC_*) at level
 * (-1 = the codec's default) into out (replacing its contents).
 * ENG_EINVAL for a codec this build cannot write. */
int eng_records_compress(int codec, int level, const uint8_t *in, size_t len, eng_buf *out);

/* True if this build can read and write codec (ENG_CODEC_*). */
int eng_codec_supported(int codec);

#endif
