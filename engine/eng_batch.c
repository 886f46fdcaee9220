/*
 * eng_batch.c - RecordBatch v2 encoder, decoder and validator.
 *
 * The encoder computes each record's body size first (the length varint
 * precedes the body), then writes header fields, records, and finally the CRC
 * over [21, end).  The decoder trusts nothing: every length is checked against
 * the bytes that remain before anything is read, and a record must consume
 * exactly the bytes its length varint announced.
 */
#include "eng_batch.h"

#include "eng_crc32c.h"
#include "eng_endian.h"
#include "eng_error.h"
#include "eng_varint.h"

void eng_batch_params_init(eng_batch_params *p)
{
    p->base_offset = 0;
    p->leader_epoch = 0;
    p->attributes = 0;
    p->max_timestamp = -1;
    p->producer_id = -1;
    p->producer_epoch = -1;
    p->base_sequence = -1;
}

int eng_batch_header_decode(const uint8_t *p, size_t avail, eng_batch_header *h)
{
    if (avail < ENG_BATCH_OVERHEAD)
        return ENG_ECORRUPT;
    h->base_offset = (int64_t)eng_be64(p);
    h->length = (int32_t)eng_be32(p + 8);
    h->leader_epoch = (int32_t)eng_be32(p + 12);
    h->magic = (int8_t)p[16];
    h->crc = eng_be32(p + 17);
    h->attributes = (int16_t)eng_be16(p + 21);
    h->last_offset_delta = (int32_t)eng_be32(p + 23);
    h->base_timestamp = (int64_t)eng_be64(p + 27);
    h->max_timestamp = (int64_t)eng_be64(p + 35);
    h->producer_id = (int64_t)eng_be64(p + 43);
    h->producer_epoch = (int16_t)eng_be16(p + 51);
    h->base_sequence = (int32_t)eng_be32(p + 53);
    h->record_count = (int32_t)eng_be32(p + 57);
    if (h->magic != ENG_BATCH_MAGIC)
        return ENG_ECORRUPT;
    if (h->length < ENG_BATCH_OVERHEAD - ENG_LOG_OVERHEAD)
        return ENG_ECORRUPT;
    if (h->base_offset < 0 || h->last_offset_delta < 0 || h->record_count < 0)
        return ENG_ECORRUPT;
    /* A base offset near INT64_MAX made
     * eng_batch_last_offset() and the next offset (last + 1) overflow, which
     * is undefined behaviour, in recovery and in every header scan.  The next
     * offset after the batch must be representable. */
    if (h->base_offset > INT64_MAX - 1 - h->last_offset_delta)
        return ENG_ECORRUPT;
    return 0;
}

void eng_batch_header_encode(uint8_t *p, const eng_batch_header *h)
{
    eng_put_be64(p, (uint64_t)h->base_offset);
    eng_put_be32(p + 8, (uint32_t)h->length);
    eng_put_be32(p + 12, (uint32_t)h->leader_epoch);
    p[16] = (uint8_t)h->magic;
    eng_put_be32(p + 17, h->crc);
    eng_put_be16(p + 21, (uint16_t)h->attributes);
    eng_put_be32(p + 23, (uint32_t)h->last_offset_delta);
    eng_put_be64(p + 27, (uint64_t)h->base_timestamp);
    eng_put_be64(p + 35, (uint64_t)h->max_timestamp);
    eng_put_be64(p + 43, (uint64_t)h->producer_id);
    eng_put_be16(p + 51, (uint16_t)h->producer_epoch);
    eng_put_be32(p + 53, (uint32_t)h->base_sequence);
    eng_put_be32(p + 57, (uint32_t)h->record_count);
}

uint32_t eng_batch_compute_crc(const uint8_t *batch, size_t size)
{
    return eng_crc32c(0, batch + ENG_BATCH_CRC_START, size - ENG_BATCH_CRC_START);
}

void eng_batch_update_crc(uint8_t *batch, size_t size)
{
    eng_put_be32(batch + 17, eng_batch_compute_crc(batch, size));
}

static size_t bytes_field_size(int32_t len)
{
    return len < 0 ? 1 : eng_varint_size(len) + (size_t)len;
}

static size_t record_body_size(const eng_record_spec *r, int64_t base_ts, int32_t delta)
{
    size_t n = 1 + eng_varlong_size(r->timestamp - base_ts) + eng_varint_size(delta) +
               bytes_field_size(r->key_len) + bytes_field_size(r->value_len) +
               eng_varint_size((int32_t)r->header_count);
    for (uint32_t i = 0; i < r->header_count; i++)
        n += bytes_field_size(r->headers[i].key_len) + bytes_field_size(r->headers[i].value_len);
    return n;
}

size_t eng_record_encoded_size(const eng_record_spec *r, int64_t base_ts, int32_t delta)
{
    size_t body = record_body_size(r, base_ts, delta);
    return eng_varint_size((int32_t)body) + body;
}

size_t eng_batch_encoded_size(const eng_record_spec *recs, size_t n)
{
    if (n == 0)
        return 0;
    size_t total = ENG_BATCH_OVERHEAD;
    for (size_t i = 0; i < n; i++)
        total += eng_record_encoded_size(&recs[i], recs[0].timestamp, (int32_t)i);
    return total;
}

static uint8_t *put_bytes(uint8_t *p, const uint8_t *data, int32_t len)
{
    p += eng_varint_put(p, len < 0 ? -1 : len);
    if (len > 0) {
        memcpy(p, data, (size_t)len);
        p += len;
    }
    return p;
}

size_t eng_records_encode(uint8_t *out, size_t cap, int64_t base_ts, const eng_record_spec *recs,
                          size_t n)
{
    uint8_t *p = out;
    for (size_t i = 0; i < n; i++) {
        const eng_record_spec *r = &recs[i];
        size_t body = record_body_size(r, base_ts, (int32_t)i);
        if ((size_t)(p - out) + eng_varint_size((int32_t)body) + body > cap)
            return 0;
        p += eng_varint_put(p, (int32_t)body);
        *p++ = 0; /* record attributes: unused */
        p += eng_varlong_put(p, r->timestamp - base_ts);
        p += eng_varint_put(p, (int32_t)i);
        p = put_bytes(p, r->key, r->key_len);
        p = put_bytes(p, r->value, r->value_len);
        p += eng_varint_put(p, (int32_t)r->header_count);
        for (uint32_t h = 0; h < r->header_count; h++) {
            p = put_bytes(p, r->headers[h].key, r->headers[h].key_len);
            p = put_bytes(p, r->headers[h].value, r->headers[h].value_len);
        }
    }
    return (size_t)(p - out);
}

size_t eng_batch_encode(uint8_t *out, size_t cap, const eng_batch_params *bp,
                        const eng_record_spec *recs, size_t n)
{
    if (n == 0 || cap < ENG_BATCH_OVERHEAD || (bp->attributes & ENG_ATTR_CODEC_MASK))
        return 0;
    int64_t base_ts = recs[0].timestamp;
    int64_t max_ts = recs[0].timestamp;
    for (size_t i = 1; i < n; i++)
        if (recs[i].timestamp > max_ts)
            max_ts = recs[i].timestamp;
    size_t rec_bytes = eng_records_encode(out + ENG_BATCH_OVERHEAD, cap - ENG_BATCH_OVERHEAD,
                                          base_ts, recs, n);
    if (rec_bytes == 0)
        return 0;
    size_t size = ENG_BATCH_OVERHEAD + rec_bytes;
    eng_batch_header h = {
        .base_offset = bp->base_offset,
        .length = (int32_t)(size - ENG_LOG_OVERHEAD),
        .leader_epoch = bp->leader_epoch,
        .magic = ENG_BATCH_MAGIC,
        .crc = 0,
        .attributes = bp->attributes,
        .last_offset_delta = (int32_t)(n - 1),
        .base_timestamp = base_ts,
        .max_timestamp = (bp->attributes & ENG_ATTR_LOG_APPEND_TIME) ? bp->max_timestamp : max_ts,
        .producer_id = bp->producer_id,
        .producer_epoch = bp->producer_epoch,
        .base_sequence = bp->base_sequence,
        .record_count = (int32_t)n,
    };
    eng_batch_header_encode(out, &h);
    eng_batch_update_crc(out, size);
    return size;
}

void eng_record_iter_init(eng_record_iter *it, const eng_batch_header *h, const uint8_t *records,
                          size_t len)
{
    it->p = records;
    it->end = records + len;
    it->base_offset = h->base_offset;
    it->base_timestamp = h->base_timestamp;
    it->max_timestamp = h->max_timestamp;
    it->log_append_time = (h->attributes & ENG_ATTR_LOG_APPEND_TIME) != 0;
    it->remaining = h->record_count;
    it->last_delta = -1;
    it->last_offset_delta = h->last_offset_delta;
    it->why = NULL;
}

static int bad_record(eng_record_iter *it, const char *why)
{
    it->why = why;
    return ENG_ECORRUPT;
}

/* Reads a nullable byte string; returns the new position or NULL. */
static const uint8_t *get_bytes(const uint8_t *p, const uint8_t *end, const uint8_t **data,
                                int32_t *len)
{
    size_t n = eng_varint_get(p, end, len);
    if (!n || *len < -1)
        return NULL;
    p += n;
    if (*len > 0 && (size_t)(end - p) < (size_t)*len)
        return NULL;
    *data = *len >= 0 ? p : NULL;
    return *len > 0 ? p + *len : p;
}

int eng_record_header_next(const uint8_t **pp, const uint8_t *end, eng_record_header *out)
{
    const uint8_t *p = *pp;
    if (p >= end)
        return 0;
    p = get_bytes(p, end, &out->key, &out->key_len);
    if (!p || out->key_len < 0)
        return ENG_ECORRUPT;
    p = get_bytes(p, end, &out->value, &out->value_len);
    if (!p)
        return ENG_ECORRUPT;
    *pp = p;
    return 1;
}

int eng_record_iter_next(eng_record_iter *it, eng_record *r)
{
    if (it->remaining == 0)
        return it->p == it->end ? 0 : bad_record(it, "bytes follow its recordCount records");
    if (it->p == it->end)
        return bad_record(it, "the batch ends before its recordCount records");
    int32_t body_len;
    size_t n = eng_varint_get(it->p, it->end, &body_len);
    if (!n || body_len < 1 || (size_t)(it->end - it->p - (ptrdiff_t)n) < (size_t)body_len)
        return bad_record(it, "its length is no valid varint or runs past the batch");
    const uint8_t *p = it->p + n;
    const uint8_t *end = p + body_len;
    p++; /* record attributes */
    int64_t ts_delta;
    int32_t off_delta;
    if (!(n = eng_varlong_get(p, end, &ts_delta)))
        return bad_record(it, "its timestamp delta is no valid varlong");
    p += n;
    if (!(n = eng_varint_get(p, end, &off_delta)))
        return bad_record(it, "its offset delta is no valid varint");
    p += n;
    if (off_delta <= it->last_delta || off_delta > it->last_offset_delta)
        return bad_record(it, "its offset delta is not above the previous record's, or is past "
                              "lastOffsetDelta");
    if (!(p = get_bytes(p, end, &r->key, &r->key_len)))
        return bad_record(it, "its key length is below -1 or runs past the record");
    if (!(p = get_bytes(p, end, &r->value, &r->value_len)))
        return bad_record(it, "its value length is below -1 or runs past the record");
    int32_t hcount;
    if (!(n = eng_varint_get(p, end, &hcount)) || hcount < 0 || hcount > end - p)
        return bad_record(it, "its header count is negative or larger than the record");
    p += n;
    r->headers = p;
    for (int32_t i = 0; i < hcount; i++) {
        eng_record_header hh;
        if (eng_record_header_next(&p, end, &hh) != 1)
            return bad_record(it, "a header has a null key, a length below -1, or runs past "
                                  "the record");
    }
    if (p != end)
        return bad_record(it, "bytes follow its last header");
    r->headers_end = end;
    r->header_count = hcount;
    /* Bytes a producer sent: a sum past int64 is a malformed record, not
     * undefined behaviour (a base timestamp of INT64_MAX and a delta of 1
     * took down the sanitizer build). */
    if (__builtin_add_overflow(it->base_offset, (int64_t)off_delta, &r->offset) ||
        __builtin_add_overflow(it->base_timestamp, ts_delta, &r->raw_timestamp))
        return bad_record(it, "its offset or timestamp is past 64 bits");
    r->timestamp = it->log_append_time ? it->max_timestamp : r->raw_timestamp;
    it->last_delta = off_delta;
    it->p = end;
    it->remaining--;
    return 1;
}

int eng_batch_validate(const uint8_t *batch, size_t size, eng_batch_header *h)
{
    int rc = eng_batch_header_decode(batch, size, h);
    if (rc)
        return rc;
    if (eng_batch_size(h) != size)
        return ENG_ECORRUPT;
    if (eng_batch_compute_crc(batch, size) != h->crc)
        return ENG_ECRC;
    if (h->attributes & ~0x7f)
        return ENG_ECORRUPT;
    if ((h->attributes & ENG_ATTR_CODEC_MASK) != ENG_CODEC_NONE)
        return (h->attributes & ENG_ATTR_CODEC_MASK) > ENG_CODEC_ZSTD ? ENG_ECORRUPT : 0;
    eng_record_iter it;
    eng_record r;
    eng_record_iter_init(&it, h, batch + ENG_BATCH_OVERHEAD, size - ENG_BATCH_OVERHEAD);
    while ((rc = eng_record_iter_next(&it, &r)) == 1)
        ;
    return rc;
}

static size_t reencoded_body(const eng_record *r, int64_t base_ts, int64_t base_offset)
{
    return 1 + eng_varlong_size(r->raw_timestamp - base_ts) +
           eng_varint_size((int32_t)(r->offset - base_offset)) + bytes_field_size(r->key_len) +
           bytes_field_size(r->value_len) + eng_varint_size(r->header_count) +
           (size_t)(r->headers_end - r->headers);
}

size_t eng_record_reencoded_size(const eng_record *r, int64_t base_ts, int64_t base_offset)
{
    size_t body = reencoded_body(r, base_ts, base_offset);
    return eng_varint_size((int32_t)body) + body;
}

size_t eng_record_reencode(uint8_t *out, const eng_record *r, int64_t base_ts, int64_t base_offset)
{
    uint8_t *p = out;
    p += eng_varint_put(p, (int32_t)reencoded_body(r, base_ts, base_offset));
    *p++ = 0;
    p += eng_varlong_put(p, r->raw_timestamp - base_ts);
    p += eng_varint_put(p, (int32_t)(r->offset - base_offset));
    p = put_bytes(p, r->key, r->key_len);
    p = put_bytes(p, r->value, r->value_len);
    p += eng_varint_put(p, r->header_count);
    size_t hl = (size_t)(r->headers_end - r->headers);
    memcpy(p, r->headers, hl);
    return (size_t)(p + hl - out);
}
