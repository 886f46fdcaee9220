/*
 * eng_validate.c - what a Kafka broker's LogValidator does to an append
 * before it takes offsets: check every batch, convert codecs, stamp what the
 * leader stamps.
 *
 * Three passes over the request's batches, none holding a lock, and the
 * layout of the write that follows them:
 *   1. check: header, length against the body, and for producer-built batches
 *      the size as sent against max.message.bytes, the CRC, the record
 *      framing, lastOffsetDelta + 1 == count, no control or cleaned batches;
 *      for every batch when the topic needs it, record timestamps against
 *      message.timestamp.before/after.max.ms and non-null keys on compacted
 *      topics; note which batches need another codec;
 *   2. convert: batches whose codec is not the topic's compression.type (other
 *      than `producer`) are re-encoded into a new buffer;
 *   3. stamp: maxTimestamp = the records' true maximum (CreateTime,
 *      attribute bit 3 cleared) or the broker clock (LogAppendTime, bit 3
 *      set), CRC recomputed when a covered byte changed; size limits on what
 *      will be stored.
 * A writable append is stamped in place, offsets too (eng__assign_offsets).
 * A read-only one is never written: a batch whose CRC-covered bytes change
 * is stamped in a copy (plan->rebuilt), and otherwise its bytes reach the
 * file as they are, with only each batch's first 16 bytes (baseOffset,
 * batchLength, partitionLeaderEpoch 0; the CRC covers from attributes on)
 * written from eng__gather_batches.  Any failure leaves nothing behind: the
 * log is only touched afterwards.
 */
#include "eng_compress.h"
#include "eng_endian.h"
#include "eng_partition_impl.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

typedef struct batch_info {
    size_t off, size;
    int64_t max_ts;
    int codec; /* the codec it must be stored with */
} batch_info;

static int batch_fail(eng_errdetail *err, int rc, size_t idx, const char *why)
{
    return eng_fail(err, rc, "batch %zu: %s", idx, why);
}

/* The refusal of a batch whose records iterator `it` stopped at with
 * ENG_ECORRUPT after `seen` records: which record, and why. */
static int bad_records(eng_errdetail *err, size_t idx, const eng_record_iter *it, int32_t seen)
{
    const char *why = it->why ? it->why : "malformed records";
    if (it->remaining == 0 || it->p == it->end)
        return eng_fail(err, ENG_EINVRECORD, "batch %zu: %s", idx, why);
    return eng_fail(err, ENG_EINVRECORD, "batch %zu: record %d: %s", idx, (int)seen, why);
}

/* Kafka's recordHasInvalidTimestamp: the distance from now against each
 * limit, never `now + after`, which wraps for limits near INT64_MAX (the
 * deprecated difference.max.ms fallback included) and refused everything.
 * ts >= 0 here and the clock is past 1970, so now - ts cannot wrap either. */
static bool outside_window(int64_t ts, int64_t now, int64_t before, int64_t after)
{
    int64_t behind = now - ts; /* negative: ts is ahead of now */
    return behind > before || -behind > after;
}

/* Record-level checks of one batch: timestamps, keys, and the true max
 * timestamp.  Timestamps are the stored ones (base + delta) even in a batch
 * that carries the LogAppendTime bit: on a CreateTime topic pass 3 clears
 * the bit, and these are what readers will see.  (Kafka checks and keeps the
 * sent maxTimestamp there, which would leave the time index naming a maximum
 * no record has.) */
static int check_records(const eng_config *cfg, const uint8_t *batch, const eng_batch_header *h,
                         size_t idx, int64_t now, eng_buf *scratch, int64_t *max_ts,
                         eng_errdetail *err)
{
    const uint8_t *recs;
    size_t len;
    if (eng_batch_lz4_not_frame(batch, h))
        return batch_fail(err, ENG_ECORRUPT, idx,
                          "its LZ4 records do not start with an LZ4 frame (a skippable frame "
                          "first?), which Kafka's clients cannot read");
    int rc = eng_batch_plain_records(batch, h, scratch, &recs, &len);
    if (rc)
        return batch_fail(err, ENG_ECORRUPT, idx, "the compressed records do not decompress");
    if (eng_batch_lz4_dependent(batch, h))
        return batch_fail(err, ENG_ECORRUPT, idx,
                          "an LZ4 frame of dependent blocks, which Kafka's clients cannot read");
    if (eng_batch_lz4_dict_id(batch, h))
        return batch_fail(err, ENG_ECORRUPT, idx,
                          "an LZ4 frame with a dictionary ID, which Kafka's clients cannot read");
    bool create_time = cfg->v[ENG_CFG_MESSAGE_TIMESTAMP_TYPE].i == ENG_TS_CREATE_TIME;
    bool compact = cfg->v[ENG_CFG_CLEANUP_POLICY].i & ENG_POLICY_COMPACT;
    int64_t before = eng_config_ts_before_max(cfg), after = eng_config_ts_after_max(cfg);
    eng_record_iter it;
    eng_record r;
    int32_t seen = 0;
    *max_ts = -1;
    int64_t lo = INT64_MAX, hi = INT64_MIN, span;
    eng_record_iter_init(&it, h, recs, len);
    while ((rc = eng_record_iter_next(&it, &r)) == 1) {
        seen++;
        lo = r.raw_timestamp < lo ? r.raw_timestamp : lo;
        hi = r.raw_timestamp > hi ? r.raw_timestamp : hi;
        if (compact && !r.key) {
            /* Where it is, as numbers too: a JSON append names the record
             * by its place in the request, which only the API knows. */
            eng_errdetail_bounds(err, (int64_t)idx, r.offset - h->base_offset);
            return eng_fail(err, ENG_ENULLKEY,
                            "batch %zu: record at offset delta %lld has a null key, which a "
                            "compacted topic does not accept",
                            idx, (long long)(r.offset - h->base_offset));
        }
        int64_t ts = r.raw_timestamp;
        if (create_time) {
            /* Where it is, as for a null key: a JSON append names the
             * record by its place in the request. */
            if (ts < 0 && ts != -1) {
                eng_errdetail_bounds(err, (int64_t)idx, r.offset - h->base_offset);
                return eng_fail(err, ENG_ETIMESTAMP, "batch %zu: invalid timestamp %lld", idx,
                                (long long)ts);
            }
            /* -1 is NO_TIMESTAMP, which Kafka producers may send and
             * validateTimestamp lets through: it is in no window. */
            if (ts != -1 && outside_window(ts, now, before, after)) {
                eng_errdetail_bounds(err, (int64_t)idx, r.offset - h->base_offset);
                return eng_fail(err, ENG_ETIMESTAMP,
                                "batch %zu: timestamp %lld is outside the topic's window "
                                "[now - %lld, now + %lld]",
                                idx, (long long)ts, (long long)before, (long long)after);
            }
        }
        if (ts > *max_ts)
            *max_ts = ts;
    }
    if (rc < 0)
        return bad_records(err, idx, &it, seen);
    if (seen != h->record_count)
        return batch_fail(err, ENG_EINVRECORD, idx, "record framing does not match the header");
    /* On every topic, LogAppendTime ones too: a batch is re-encoded against
     * one base timestamp (recompression, the cleaner), which needs every
     * record's distance from it to fit in 64 bits.  Refused later, such a
     * batch overflowed a recompression, or stopped compaction of the
     * partition for good. */
    if (seen > 0 && __builtin_sub_overflow(hi, lo, &span))
        return batch_fail(err, ENG_EINVRECORD, idx,
                          "record timestamps too far apart for one batch");
    return 0;
}

/* The checks only producer-built bytes need (JSON appends are built here). */
static int check_producer_batch(const uint8_t *b, size_t size, const eng_batch_header *h,
                                size_t idx, eng_errdetail *err)
{
    eng_batch_header v;
    int rc = eng_batch_validate(b, size, &v);
    if (rc == ENG_ECRC)
        return batch_fail(err, rc, idx, "CRC mismatch");
    /* Before the records, as Kafka's validateBatch: a count that does not
     * match is the reason, not the record past lastOffsetDelta it makes. */
    if (h->record_count <= 0 || h->last_offset_delta + 1 != h->record_count)
        return batch_fail(err, ENG_EINVRECORD, idx,
                          "lastOffsetDelta + 1 must equal the record count");
    if (rc && (h->attributes & ~0x7f))
        return batch_fail(err, ENG_EINVRECORD, idx,
                          "attribute bits 7-15 are set, which Kafka leaves unused");
    if (rc && (h->attributes & ENG_ATTR_CODEC_MASK) == ENG_CODEC_NONE) {
        /* Walked again to name the record: a refusal's cold path. */
        eng_record_iter it;
        eng_record r;
        int32_t seen = 0;
        eng_record_iter_init(&it, h, b + ENG_BATCH_OVERHEAD, size - ENG_BATCH_OVERHEAD);
        while (eng_record_iter_next(&it, &r) == 1)
            seen++;
        return bad_records(err, idx, &it, seen);
    }
    if (rc) /* all eng_batch_validate refuses of a compressed batch here */
        return batch_fail(err, rc, idx, "unknown compression codec");
    if (h->attributes & (ENG_ATTR_CONTROL | ENG_ATTR_DELETE_HORIZON))
        return batch_fail(err, ENG_EINVRECORD, idx,
                          "control or cleaned batches cannot be produced");
    /* A Kafka broker takes transactional data only inside a transaction its
     * coordinator began, and only the coordinator's markers end one.  With
     * no coordinator here, such a batch would be an open transaction for
     * ever: a Kafka consumer reading these files read_committed would stop
     * at it. */
    if (h->attributes & ENG_ATTR_TRANSACTIONAL)
        return batch_fail(err, ENG_EUNSUPPORTED, idx,
                          "transactional batches need a transaction coordinator, which logstore "
                          "does not have");
    if (h->producer_id >= 0 && h->base_sequence < 0)
        return batch_fail(err, ENG_EINVRECORD, idx, "idempotent batch without a base sequence");
    if (!eng_codec_supported(h->attributes & ENG_ATTR_CODEC_MASK))
        return batch_fail(err, ENG_ECORRUPT, idx, "unknown compression codec");
    return 0;
}

static int too_large(eng_errdetail *err, size_t idx, size_t size, int64_t max_msg, const char *when)
{
    int rc = eng_fail(err, ENG_ETOOLARGE, "batch %zu is %zu bytes%s, above max.message.bytes %lld",
                      idx, size, when, (long long)max_msg);
    eng_errdetail_bounds(err, 0, max_msg);
    return rc;
}

static int push_info(batch_info **v, size_t *n, size_t *cap, batch_info bi)
{
    if (*n == *cap) {
        size_t c = *cap ? *cap * 2 : 16;
        batch_info *nv = realloc(*v, c * sizeof *nv);
        if (!nv)
            return -ENOMEM;
        *v = nv;
        *cap = c;
    }
    (*v)[(*n)++] = bi;
    return 0;
}

void eng__append_plan_free(eng__append_plan *plan)
{
    eng_buf_free(&plan->rebuilt);
}

int eng__plan_append(const eng_config *cfg, const uint8_t *data, uint8_t *mut, size_t len,
                     bool producer, int64_t now, eng__append_plan *plan, eng_errdetail *err)
{
    memset(plan, 0, sizeof *plan);
    plan->max_ts = -1;
    if (len == 0)
        return eng_fail(err, ENG_EINVAL, "no record batch in the request");
    bool log_append = cfg->v[ENG_CFG_MESSAGE_TIMESTAMP_TYPE].i == ENG_TS_LOG_APPEND_TIME;
    bool need_records = producer || (cfg->v[ENG_CFG_CLEANUP_POLICY].i & ENG_POLICY_COMPACT) ||
                        eng_config_ts_before_max(cfg) != INT64_MAX ||
                        eng_config_ts_after_max(cfg) != INT64_MAX;
    int64_t ctype = cfg->v[ENG_CFG_COMPRESSION_TYPE].i;
    int64_t max_msg = cfg->v[ENG_CFG_MAX_MESSAGE_BYTES].i;
    batch_info *info = NULL;
    size_t n = 0, cap = 0;
    bool convert = false;
    eng_buf scratch = {0};
    int rc = 0;

    /* 1. check */
    for (size_t off = 0; off < len;) {
        eng_batch_header h;
        const uint8_t *b = data + off;
        if (eng_batch_header_decode(b, len - off, &h)) {
            rc = batch_fail(err, ENG_ECORRUPT, n, "not a RecordBatch v2 header");
            goto done;
        }
        size_t size = eng_batch_size(&h);
        if (size > len - off) {
            rc = batch_fail(err, ENG_ECORRUPT, n, "batch length runs past the end of the body");
            goto done;
        }
        /* As Kafka's analyzeAndValidateRecords: a batch too large as sent is
         * refused even when the topic's codec would shrink it below the
         * limit; pass 3 checks it again as stored.  A JSON append has no
         * batch "as sent" (it was encoded here, uncompressed), so only its
         * stored size counts. */
        if (producer && (int64_t)size > max_msg) {
            rc = too_large(err, n, size, max_msg, " as sent");
            goto done;
        }
        if (producer && (rc = check_producer_batch(b, size, &h, n, err)))
            goto done;
        if (h.producer_id >= 0)
            plan->producer_batches++;
        int64_t max_ts = h.max_timestamp;
        /* A LogAppendTime bit on a CreateTime topic is cleared in pass 3,
         * and its maxTimestamp is then no guide to the records'. */
        bool lat_bit = !log_append && (h.attributes & ENG_ATTR_LOG_APPEND_TIME);
        if ((need_records || lat_bit) &&
            (rc = check_records(cfg, b, &h, n, now, &scratch, &max_ts, err)))
            goto done;
        int codec = h.attributes & ENG_ATTR_CODEC_MASK;
        int target = ctype == ENG_COMPRESSION_PRODUCER ? codec : eng_config_codec(ctype);
        convert |= target != codec;
        if ((rc = push_info(&info, &n, &cap, (batch_info){off, size, max_ts, target})))
            goto done;
        off += size;
    }

    /* 2. convert */
    const uint8_t *final = data;
    uint8_t *owned = mut; /* final, when its bytes may be written */
    size_t final_len = len;
    if (convert) {
        for (size_t i = 0; i < n; i++) {
            const uint8_t *b = data + info[i].off;
            eng_batch_header h;
            eng_batch_header_decode(b, info[i].size, &h);
            size_t start = plan->rebuilt.len;
            if ((h.attributes & ENG_ATTR_CODEC_MASK) != info[i].codec) {
                rc = eng_batch_recode(b, &h, info[i].codec, eng_config_codec_level(cfg, info[i].codec),
                                      &scratch, &plan->rebuilt);
                if (rc) {
                    rc = batch_fail(err, rc == -ENOMEM ? rc : ENG_ECORRUPT, i,
                                    "cannot be converted to the topic's compression.type");
                    goto done;
                }
            } else {
                if ((rc = eng_buf_reserve(&plan->rebuilt, start + info[i].size)))
                    goto done;
                memcpy(plan->rebuilt.data + start, b, info[i].size);
                plan->rebuilt.len = start + info[i].size;
            }
            info[i].off = start;
            info[i].size = plan->rebuilt.len - start;
        }
        final = owned = plan->rebuilt.data;
        final_len = plan->rebuilt.len;
    }

    /* 3. stamp and size */
    for (size_t i = 0; i < n; i++) {
        size_t size = info[i].size;
        if ((int64_t)size > max_msg) {
            rc = too_large(err, i, size, max_msg, "");
            goto done;
        }
        eng_batch_header h;
        eng_batch_header_decode(final + info[i].off, size, &h);
        int64_t max_ts = info[i].max_ts;
        bool stamp = log_append || max_ts != h.max_timestamp ||
                     (h.attributes & ENG_ATTR_LOG_APPEND_TIME);
        if (stamp && !owned) {
            if ((rc = eng_buf_reserve(&plan->rebuilt, len)))
                goto done;
            memcpy(plan->rebuilt.data, data, len);
            plan->rebuilt.len = len;
            final = owned = plan->rebuilt.data;
        }
        if (log_append) {
            uint8_t *b = owned + info[i].off;
            eng_put_be16(b + 21, (uint16_t)(h.attributes | ENG_ATTR_LOG_APPEND_TIME));
            eng_put_be64(b + 35, (uint64_t)now);
            eng_batch_update_crc(b, size);
            max_ts = now;
        } else if (stamp) {
            /* Kafka's setMaxTimestamp(CREATE_TIME, max): a producer's
             * LogAppendTime bit would make readers give every record the
             * batch's maxTimestamp. */
            uint8_t *b = owned + info[i].off;
            eng_put_be16(b + 21, (uint16_t)(h.attributes & ~ENG_ATTR_LOG_APPEND_TIME));
            eng_put_be64(b + 35, (uint64_t)max_ts);
            eng_batch_update_crc(b, size);
        }
        if (max_ts > plan->max_ts) {
            plan->max_ts = max_ts;
            plan->max_ts_batch = i;
        }
        plan->total_offsets += (int64_t)h.last_offset_delta + 1;
        plan->records += h.record_count;
        plan->batches++;
    }
    if ((int64_t)final_len > cfg->v[ENG_CFG_SEGMENT_BYTES].i) {
        rc = eng_fail(err, ENG_ETOOLARGE, "append of %zu bytes is larger than segment.bytes %lld",
                      final_len, (long long)cfg->v[ENG_CFG_SEGMENT_BYTES].i);
        eng_errdetail_bounds(err, 0, cfg->v[ENG_CFG_SEGMENT_BYTES].i);
    }
done:
    free(info);
    eng_buf_free(&scratch);
    if (rc)
        eng__append_plan_free(plan);
    return rc;
}

void eng__restamp_log_append(uint8_t *data, size_t len, int64_t ts)
{
    for (size_t off = 0; off < len;) {
        uint8_t *b = data + off;
        size_t size = (size_t)eng_be32(b + 8) + ENG_LOG_OVERHEAD;
        eng_put_be64(b + 35, (uint64_t)ts);
        eng_batch_update_crc(b, size);
        off += size;
    }
}

/* Writes batch b's base offset (*next) and partitionLeaderEpoch 0 into head,
 * its first ENG_BATCH_HEAD bytes as stored (b itself, or a copy); returns
 * the batch's last offset and moves *next past it. */
static int64_t stamp_head(uint8_t *head, const uint8_t *b, int64_t *next)
{
    int64_t last = *next + (int32_t)eng_be32(b + 23); /* lastOffsetDelta */
    eng_put_be64(head, (uint64_t)*next);
    eng_put_be32(head + 12, 0); /* partitionLeaderEpoch: this is leader epoch 0 */
    *next = last + 1;
    return last;
}

int64_t eng__assign_offsets(uint8_t *data, size_t len, int64_t next, size_t max_ts_batch)
{
    int64_t off_of_max = -1;
    for (size_t off = 0, idx = 0; off < len; idx++) {
        uint8_t *b = data + off;
        int64_t last = stamp_head(b, b, &next);
        if (idx == max_ts_batch)
            off_of_max = last;
        off += (size_t)eng_be32(b + 8) + ENG_LOG_OVERHEAD;
    }
    return off_of_max;
}

int64_t eng__gather_batches(eng__append_gather *g, const uint8_t *data, size_t len, int64_t next,
                            size_t max_ts_batch)
{
    int64_t off_of_max = -1;
    size_t idx = 0;
    for (size_t off = 0; off < len; idx++) {
        const uint8_t *b = data + off;
        size_t size = (size_t)eng_be32(b + 8) + ENG_LOG_OVERHEAD;
        uint8_t *head = g->heads[idx];
        memcpy(head, b, ENG_BATCH_HEAD); /* batchLength kept */
        int64_t last = stamp_head(head, b, &next);
        g->iov[2 * idx] = (struct iovec){head, ENG_BATCH_HEAD};
        g->iov[2 * idx + 1] = (struct iovec){(void *)(b + ENG_BATCH_HEAD), size - ENG_BATCH_HEAD};
        if (idx == max_ts_batch)
            off_of_max = last;
        off += size;
    }
    g->iovcnt = (int)(2 * idx);
    return off_of_max;
}
