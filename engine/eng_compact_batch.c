/*
 * eng_compact_batch.c - what a clean does to one batch: keep it, drop it, or
 * rebuild it from the records the offset map still points at (Kafka's
 * LogCleaner.filterInto).  Pure: no file I/O, no partition state, so the
 * rules are tested against Kafka's vectors byte for byte (test_compact.c).
 */
#include "eng_compact.h"

#include "eng_batch_reader.h"
#include "eng_compress.h"
#include "eng_endian.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Kafka's 61-byte header-only batch (kafka-format.md §6.3). */
static int empty_batch(const eng_batch_header *src, eng_buf *out)
{
    int rc = eng_buf_reserve(out, ENG_BATCH_OVERHEAD);
    if (rc)
        return rc;
    eng_batch_header h = *src;
    h.length = ENG_BATCH_OVERHEAD - ENG_LOG_OVERHEAD;
    h.attributes = (int16_t)(src->attributes & (ENG_ATTR_LOG_APPEND_TIME | ENG_ATTR_TRANSACTIONAL |
                                                ENG_ATTR_CONTROL));
    h.base_timestamp = -1;
    h.record_count = 0;
    eng_batch_header_encode(out->data, &h);
    eng_batch_update_crc(out->data, ENG_BATCH_OVERHEAD);
    out->len = ENG_BATCH_OVERHEAD;
    return 0;
}

/* Rebuilds a batch from its retained records (offsets and stored
 * timestamps unchanged; lastOffsetDelta kept). */
static int rebuild_batch(const eng_batch_header *src, const eng_record *recs, size_t n,
                         int64_t horizon, int level, eng_buf *out)
{
    int codec = src->attributes & ENG_ATTR_CODEC_MASK;
    if (codec != ENG_CODEC_NONE && !eng_codec_supported(codec))
        return ENG_ECORRUPT;
    bool has_horizon = (src->attributes & ENG_ATTR_DELETE_HORIZON) != 0;
    int64_t base_ts = horizon >= 0 ? horizon : has_horizon ? src->base_timestamp
                                                           : recs[0].raw_timestamp;
    for (size_t i = 0; i < n; i++) {
        int64_t ts = recs[i].raw_timestamp;
        /* A saturated horizon (horizon_of) is too far from a timestamp
         * before 1970 for their delta to fit in an int64: bring it in. */
        if (horizon >= 0 && ts < 0 && base_ts > (ts + 1) + INT64_MAX)
            base_ts = (ts + 1) + INT64_MAX;
    }
    for (size_t i = 0; i < n; i++) {
        /* Stored deltas are int64; a batch whose timestamps cannot be
         * re-encoded against base_ts is not one a producer could write. */
        int64_t ts = recs[i].raw_timestamp;
        if ((base_ts > 0 && ts < INT64_MIN + base_ts) || (base_ts < 0 && ts > INT64_MAX + base_ts))
            return ENG_ECORRUPT;
    }
    int64_t max_ts = -1;
    size_t body = 0;
    for (size_t i = 0; i < n; i++) {
        body += eng_record_reencoded_size(&recs[i], base_ts, src->base_offset);
        if (recs[i].raw_timestamp > max_ts)
            max_ts = recs[i].raw_timestamp;
    }
    int rc = eng_buf_reserve(out, ENG_BATCH_OVERHEAD + body);
    if (rc)
        return rc;
    uint8_t *p = out->data + ENG_BATCH_OVERHEAD;
    for (size_t i = 0; i < n; i++)
        p += eng_record_reencode(p, &recs[i], base_ts, src->base_offset);
    size_t size = ENG_BATCH_OVERHEAD + body;
    if (codec != ENG_CODEC_NONE) {
        eng_buf z = {0};
        rc = eng_records_compress(codec, level, out->data + ENG_BATCH_OVERHEAD, body, &z);
        if (rc) {
            eng_buf_free(&z);
            return rc;
        }
        if ((rc = eng_buf_reserve(out, ENG_BATCH_OVERHEAD + z.len))) {
            eng_buf_free(&z);
            return rc;
        }
        memcpy(out->data + ENG_BATCH_OVERHEAD, z.data, z.len);
        size = ENG_BATCH_OVERHEAD + z.len;
        eng_buf_free(&z);
    }
    eng_batch_header h = *src;
    h.length = (int32_t)(size - ENG_LOG_OVERHEAD);
    h.attributes = (int16_t)(src->attributes | (horizon >= 0 ? ENG_ATTR_DELETE_HORIZON : 0));
    h.base_timestamp = base_ts;
    if (!(src->attributes & ENG_ATTR_LOG_APPEND_TIME))
        h.max_timestamp = max_ts;
    h.record_count = (int32_t)n;
    eng_batch_header_encode(out->data, &h);
    eng_batch_update_crc(out->data, size);
    out->len = size;
    return 0;
}

/* now + delete.retention.ms, saturated: the config allows up to INT64_MAX
 * ("keep tombstones for ever"), and the sum would overflow. */
static int64_t horizon_of(int64_t now_ms, int64_t delete_retention_ms)
{
    if (delete_retention_ms > 0 && now_ms > INT64_MAX - delete_retention_ms)
        return INT64_MAX;
    return now_ms + delete_retention_ms;
}

int eng_clean_filter_batch(const uint8_t *batch, const eng_batch_header *h,
                           eng_offset_map *map, int64_t now_ms, int64_t delete_retention_ms,
                           bool keep_empty, bool aborted, eng_buf *scratch, eng_buf *out,
                           eng_clean_action *action, eng_clean_counts *c)
{
    *action = ENG_CLEAN_COPY;
    c->records += (uint64_t)h->record_count;
    /* Unlike Kafka's cleaner, check the CRC: a rewritten batch gets a new
     * one, which would turn bytes damaged on disk into valid-looking data.
     * The partition is marked uncleanable instead (eng_cleaner.c). */
    if (eng_batch_compute_crc(batch, eng_batch_size(h)) != h->crc)
        return ENG_ECRC;
    if (h->attributes & ENG_ATTR_CONTROL)
        return 0; /* markers stay (README, Compaction): removing one is always safe to skip */
    if (aborted) {
        /* Kafka discards an aborted transaction's data whatever the map
         * says; the empty header keeps a group's last offset as usual. */
        c->removed += (uint64_t)h->record_count;
        if (!keep_empty) {
            *action = ENG_CLEAN_DROP;
            return 0;
        }
        *action = ENG_CLEAN_REWRITE;
        return empty_batch(h, out);
    }
    const uint8_t *recs;
    size_t len;
    int rc = eng_batch_plain_records(batch, h, scratch, &recs, &len);
    if (rc)
        return rc;
    bool has_horizon = (h->attributes & ENG_ATTR_DELETE_HORIZON) != 0;
    bool tombstones_live = !has_horizon || now_ms < h->base_timestamp;
    int64_t latest = eng_offset_map_latest(map);
    /* Retained records are views into recs; at most record_count of them. */
    eng_record stackbuf[64];
    eng_record *kept = h->record_count <= 64 ? stackbuf
                                             : malloc((size_t)h->record_count * sizeof *kept);
    if (!kept)
        return -ENOMEM;
    size_t nkept = 0;
    bool kept_tombstone = false;
    eng_record_iter it;
    eng_record_iter_init(&it, h, recs, len);
    do {
        /* Hash a chunk of keys and prefetch their slots before the first
         * lookup, so the map's cache misses overlap. */
        eng_record chunk[ENG_OFFSET_MAP_CHUNK];
        eng_key_hash hash[ENG_OFFSET_MAP_CHUNK];
        size_t n = 0;
        while (n < ENG_OFFSET_MAP_CHUNK && (rc = eng_record_iter_next(&it, &chunk[n])) == 1) {
            if (chunk[n].key && chunk[n].offset <= latest) {
                eng_offset_map_hash(map, chunk[n].key, (size_t)chunk[n].key_len, &hash[n]);
                eng_offset_map_prefetch(map, &hash[n]);
            }
            n++;
        }
        for (size_t k = 0; k < n; k++) {
            const eng_record *r = &chunk[k];
            bool keep;
            if (r->offset > latest) {
                keep = true;
            } else if (!r->key) {
                keep = false;
                c->keyless_removed++;
            } else {
                int64_t found = eng_offset_map_get_hashed(map, &hash[k]);
                keep = r->offset >= found && (r->value || tombstones_live);
                if (!keep && !r->value && r->offset >= found)
                    c->tombstones_removed++;
            }
            if (keep) {
                kept[nkept++] = *r;
                kept_tombstone |= !r->value;
            } else {
                c->removed++;
            }
        }
    } while (rc == 1);
    if (rc < 0)
        goto done;
    rc = 0;
    bool need_horizon = kept_tombstone && !has_horizon;
    if (nkept == 0 && !keep_empty) {
        /* A header-only batch an
         * earlier clean kept as the last of its group matched "nothing
         * removed" and was copied forever, piling up inside merged groups;
         * Kafka's filterTo drops an empty batch it need not retain. */
        *action = ENG_CLEAN_DROP;
    } else if (nkept == (size_t)h->record_count && !need_horizon) {
        *action = ENG_CLEAN_COPY;
    } else if (nkept == 0) {
        *action = keep_empty ? ENG_CLEAN_REWRITE : ENG_CLEAN_DROP;
        if (keep_empty)
            rc = empty_batch(h, out);
    } else {
        *action = ENG_CLEAN_REWRITE;
        /* A rebuilt batch keeps its codec, recompressed at the codec's default
         * level as Kafka's cleaner does. */
        int64_t horizon = need_horizon ? horizon_of(now_ms, delete_retention_ms) : -1;
        rc = rebuild_batch(h, kept, nkept, horizon, ENG_CODEC_DEFAULT_LEVEL, out);
    }
done:
    if (kept != stackbuf)
        free(kept);
    return rc;
}
