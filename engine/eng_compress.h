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

#include <stdbool.h>

/* Sets *recs and *len to the plain records of the batch at `batch` (whose header
 * is h and which is eng_batch_size(h) bytes long).  scratch is used (and
 * grown) only for compressed batches.  Fails with ENG_ECORRUPT for an unknown
 * codec or a stream that does not decompress. */
int eng_batch_plain_records(const uint8_t *batch, const eng_batch_header *h, eng_buf *scratch,
                            const uint8_t **recs, size_t *len);

/* Asks eng_records_compress for the codec's own default level (Kafka's:
 * gzip 6, lz4 9, zstd 3). */
#define ENG_CODEC_DEFAULT_LEVEL INT32_MIN

/* Compresses a plain records section with codec (ENG_CODEC_*) at level
 * (ENG_CODEC_DEFAULT_LEVEL for the default) into out (replacing its contents).
 * ENG_EINVAL for a codec this build cannot write. */
int eng_records_compress(int codec, int level, const uint8_t *in, size_t len, eng_buf *out);

/* Appends to out the batch re-encoded with codec at level, as a broker does
 * when the topic's compression.type differs from the producer's: records
 * decoded and written again against the first record's timestamp, every
 * other header field kept, CRC recomputed.  scratch holds decompressed
 * records. */
int eng_batch_recode(const uint8_t *batch, const eng_batch_header *h, int codec, int level,
                     eng_buf *scratch, eng_buf *out);

/* True if the batch is LZ4 and its records do not start with an LZ4 frame's
 * magic (a skippable frame first, say): liblz4 steps over what it may skip,
 * but Kafka's reader wants the frame magic first ("invalid magic bytes"). */
bool eng_batch_lz4_not_frame(const uint8_t *batch, const eng_batch_header *h);

/* True if the batch is LZ4 in a frame of linked (dependent) blocks: liblz4
 * reads it, but Kafka's reader refuses it ("Dependent block stream is
 * unsupported"), so a broker never stores one. */
bool eng_batch_lz4_dependent(const uint8_t *batch, const eng_batch_header *h);

/* True if the batch is LZ4 in a frame whose FLG sets the dictionary-ID
 * flag: liblz4 reads it (the blocks need no dictionary), but Kafka's reader
 * (KafkaLZ4BlockInputStream) refuses any reserved FLG bit ("Reserved0 field
 * must be 0"), so a broker never stores one and no Kafka client could read
 * one. */
bool eng_batch_lz4_dict_id(const uint8_t *batch, const eng_batch_header *h);

/* True if this build can read and write codec (ENG_CODEC_*). */
int eng_codec_supported(int codec);

#endif
