/*
 * eng_batch.h - Kafka RecordBatch v2: the unit of every append and every read.
 *
 * Layout (kafka-format.md §2-3): a 61-byte big-endian header followed by
 * recordCount records, each a varint-framed body of zigzag varints.  The CRC
 * is CRC-32C over bytes [21, end).  This module is pure: it encodes, decodes
 * and validates bytes in caller-owned buffers and never allocates.
 *
 * Invariants the encoder keeps, matching a Java producer plus a broker's
 * leader append: offset deltas 0..n-1, baseTimestamp = first record's
 * timestamp, maxTimestamp = largest record timestamp (or the broker clock for
 * LogAppendTime), producer fields -1 unless the caller sets them.
 */
#ifndef ENG_BATCH_H
#define ENG_BATCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define ENG_BATCH_OVERHEAD 61 /* header bytes before the first record */
#define ENG_LOG_OVERHEAD 12   /* baseOffset + batchLength */
#define ENG_BATCH_MAGIC 2
#define ENG_BATCH_CRC_START 21
#define ENG_BATCH_MAGIC_POS 16

#define ENG_ATTR_CODEC_MASK 0x07
#define ENG_ATTR_LOG_APPEND_TIME 0x08
#define ENG_ATTR_TRANSACTIONAL 0x10
#define ENG_ATTR_CONTROL 0x20
#define ENG_ATTR_DELETE_HORIZON 0x40

enum { ENG_CODEC_NONE = 0, ENG_CODEC_GZIP = 1, ENG_CODEC_SNAPPY = 2, ENG_CODEC_LZ4 = 3, ENG_CODEC_ZSTD = 4 };

typedef struct eng_batch_header {
    int64_t base_offset;
    int32_t length; /* bytes after the length field: batch size - 12 */
    int32_t leader_epoch;
    int8_t magic;
    uint32_t crc;
    int16_t attributes;
    int32_t last_offset_delta;
    int64_t base_timestamp;
    int64_t max_timestamp;
    int64_t producer_id;
    int16_t producer_epoch;
    int32_t base_sequence;
    int32_t record_count;
} eng_batch_header;

/* One header of a record, as a view into a buffer (value_len -1 = null). */
typedef struct eng_record_header {
    const uint8_t *key;
    int32_t key_len;
    const uint8_t *value;
    int32_t value_len;
} eng_record_header;

/* A record to encode; key_len/value_len -1 mean null. Borrowed views. */
typedef struct eng_record_spec {
    int64_t timestamp;
    const uint8_t *key;
    int32_t key_len;
    const uint8_t *value;
    int32_t value_len;
    const eng_record_header *headers;
    uint32_t header_count;
} eng_record_spec;

/* Batch-level fields the caller chooses when encoding. */
typedef struct eng_batch_params {
    int64_t base_offset;
    int32_t leader_epoch;
    int16_t attributes;      /* codec bits must be 0: records are written plain */
    int64_t max_timestamp;   /* used only when ENG_ATTR_LOG_APPEND_TIME is set */
    int64_t producer_id;     /* -1 */
    int16_t producer_epoch;  /* -1 */
    int32_t base_sequence;   /* -1 */
} eng_batch_params;

/* A decoded record: views into the batch buffer, valid while it lives. */
typedef struct eng_record {
    int64_t offset;
    int64_t timestamp;      /* effective: the broker time for LogAppendTime batches */
    int64_t raw_timestamp;  /* as stored: base timestamp + delta */
    const uint8_t *key;
    int32_t key_len;
    const uint8_t *value;
    int32_t value_len;
    int32_t header_count;
    const uint8_t *headers; /* header_count encoded headers */
    const uint8_t *headers_end;
} eng_record;

typedef struct eng_record_iter {
    const uint8_t *p, *end;
    int64_t base_offset;
    int64_t base_timestamp;
    int64_t max_timestamp;
    bool log_append_time;
    int32_t remaining;
    int32_t last_delta; /* previous offset delta, -1 before the first */
    int32_t last_offset_delta;
    const char *why; /* what was wrong when next returned ENG_ECORRUPT */
} eng_record_iter;

/* Fills the defaults a non-idempotent producer uses (-1 producer fields). */
void eng_batch_params_init(eng_batch_params *p);

/* Decodes the 61-byte header at p; avail is how many bytes are readable.
 * Fails with ENG_ECORRUPT when avail < 61, magic != 2, length < 49, a
 * negative base offset, last offset delta or record count, or when the
 * offset after the batch (base + lastOffsetDelta + 1) would overflow. */
int eng_batch_header_decode(const uint8_t *p, size_t avail, eng_batch_header *h);

/* Writes all 61 header bytes (crc as given in h). */
void eng_batch_header_encode(uint8_t *p, const eng_batch_header *h);

static inline size_t eng_batch_size(const eng_batch_header *h)
{
    return (size_t)h->length + ENG_LOG_OVERHEAD;
}

static inline int64_t eng_batch_last_offset(const eng_batch_header *h)
{
    return h->base_offset + h->last_offset_delta;
}

/* CRC-32C of batch[21, size). */
uint32_t eng_batch_compute_crc(const uint8_t *batch, size_t size);

/* Recomputes and stores the CRC of a complete batch in place. */
void eng_batch_update_crc(uint8_t *batch, size_t size);

/* Size in bytes of one encoded record (length varint included). */
size_t eng_record_encoded_size(const eng_record_spec *r, int64_t base_timestamp, int32_t offset_delta);

/* Size of the batch that eng_batch_encode() would produce for recs. */
size_t eng_batch_encoded_size(const eng_record_spec *recs, size_t n);

/* Encodes n >= 1 records into out (cap bytes) as one uncompressed batch.
 * Returns the batch size, or 0 if cap is too small or n is 0. */
size_t eng_batch_encode(uint8_t *out, size_t cap, const eng_batch_params *bp,
                        const eng_record_spec *recs, size_t n);

/* Encodes just the records section (no header) starting at offset delta 0.
 * Returns bytes written or 0 when cap is too small.  Used by codecs that
 * compress the records before the header is written. */
size_t eng_records_encode(uint8_t *out, size_t cap, int64_t base_timestamp,
                          const eng_record_spec *recs, size_t n);

/* Checks a complete batch of exactly size bytes: header, length agreement,
 * CRC and, for uncompressed batches, every record's framing, increasing
 * offset deltas within lastOffsetDelta and the record count.  Fills h. */
int eng_batch_validate(const uint8_t *batch, size_t size, eng_batch_header *h);

/* Iterates the records of a batch.  records/len is the plain (decompressed)
 * records section; for an uncompressed batch that is batch + 61. */
void eng_record_iter_init(eng_record_iter *it, const eng_batch_header *h,
                          const uint8_t *records, size_t len);

/* Returns 1 and fills r, 0 at the end, or ENG_ECORRUPT on bad framing
 * (it->why then says what, as a static string). */
int eng_record_iter_next(eng_record_iter *it, eng_record *r);

/* Size of record r re-encoded against base_ts and base_offset, its headers
 * copied as they are (the cleaner rebuilds batches this way: offsets and
 * stored timestamps never change, only their deltas). */
size_t eng_record_reencoded_size(const eng_record *r, int64_t base_ts, int64_t base_offset);

/* Writes that encoding to out (room for eng_record_reencoded_size bytes). */
size_t eng_record_reencode(uint8_t *out, const eng_record *r, int64_t base_ts, int64_t base_offset);

/* Walks the encoded headers of a record: returns 1 and fills out, 0 at the
 * end, ENG_ECORRUPT on bad framing.  *p advances. */
int eng_record_header_next(const uint8_t **p, const uint8_t *end, eng_record_header *out);

#endif
