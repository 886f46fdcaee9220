/*
 * eng_partition_timestamps.c - a partition's lookups by timestamp: the first
 * offset at or after a time (ListOffsets by timestamp) and the record with
 * the largest timestamp (spec=max_timestamp).
 *
 * As on the rest of the read side, nothing here takes append_lock: a view
 * reference, the atomics read once, reads bounded by committed sizes and the
 * high watermark.
 */
#include "eng_partition_impl.h"

#include "eng_buf.h"

#include <stdlib.h>
#include <string.h>

int eng_partition_offset_for_timestamp(eng_partition *p, int64_t ts, int64_t *offset,
                                       int64_t *found_ts)
{
    int64_t lso = atomic_load(&p->log_start_offset);
    int64_t hw = atomic_load(&p->high_watermark);
    eng_segview *v = eng__segview_acquire(p);
    int rc = ENG_ENOTFOUND;
    for (size_t k = 0; k < v->n; k++) {
        eng_segment *seg = v->segs[k];
        if (eng__below_start(v, k, lso))
            continue;
        if (eng_segment_size(seg) == 0 || eng_segment_max_timestamp(seg) < ts)
            continue;
        rc = eng_segment_find_by_timestamp(seg, ts, lso, offset, found_ts);
        if (rc != ENG_ENOTFOUND)
            break;
    }
    eng__segview_release(v);
    if (rc == 0 && *offset >= hw)
        rc = ENG_ENOTFOUND;
    return rc;
}


typedef struct max_ts_ctx {
    eng_segment *seg;
    int64_t ts;
    int64_t target_last;
    int64_t min_offset; /* the log start offset: records below it are deleted */
    int64_t offset;
    eng_buf batch, scratch;
} max_ts_ctx;

/* Finds, in the batch whose last offset is target_last, the first record at
 * or after min_offset carrying the maximum timestamp. */
static int visit_max_ts(const eng_batch_pos *b, void *vctx)
{
    max_ts_ctx *c = vctx;
    if (eng_batch_last_offset(&b->header) < c->target_last)
        return 0;
    eng_record_iter it;
    eng_record r;
    if (eng__iter_records(c->seg, b, &c->batch, &c->scratch, &it))
        return 1;
    while (eng_record_iter_next(&it, &r) == 1) {
        if (r.timestamp == c->ts && r.offset >= c->min_offset) {
            c->offset = r.offset;
            break;
        }
    }
    return 1;
}

typedef struct live_max_ctx {
    eng_segment *seg;
    int64_t from;
    int64_t ts, last; /* largest timestamp at or after from; its first batch's last offset */
    bool failed;
    eng_buf batch, scratch;
} live_max_ctx;

static int visit_live_max(const eng_batch_pos *b, void *vctx)
{
    live_max_ctx *c = vctx;
    const eng_batch_header *h = &b->header;
    /* A batch a clean emptied keeps its maxTimestamp but holds no record
     * (kafka-format.md §6.3): nothing of it can be answered. */
    if (eng_batch_last_offset(h) < c->from || h->record_count == 0)
        return 0;
    int64_t t = h->max_timestamp;
    if (h->base_offset < c->from) {
        /* The batch holding `from`: only its records from there on count. */
        eng_record_iter it;
        eng_record r;
        if (eng__iter_records(c->seg, b, &c->batch, &c->scratch, &it)) {
            c->failed = true;
            return 1;
        }
        t = -1;
        while (eng_record_iter_next(&it, &r) == 1)
            if (r.offset >= c->from && r.timestamp > t)
                t = r.timestamp;
    }
    if (t > c->ts) {
        c->ts = t;
        c->last = eng_batch_last_offset(h);
    }
    return 0;
}

/* The largest timestamp among seg's records at or after `from`, read from
 * its batches, and the last offset of the first batch holding it; (-1, -1)
 * when none.  False, with *ts and *last untouched, when seg cannot be read. */
static bool scan_live_max(eng_segment *seg, int64_t from, int64_t *ts, int64_t *last)
{
    uint64_t size = eng_segment_size(seg);
    eng_batch_pos b = {.position = 0};
    live_max_ctx c = {.seg = seg, .from = from, .ts = -1, .last = -1};
    int rc = from > eng_segment_base(seg) ? eng_segment_find_batch(seg, from, size, &b) : 0;
    if (!rc)
        rc = eng_segment_scan_from(seg, b.position, size, visit_live_max, &c);
    eng_buf_free(&c.batch);
    eng_buf_free(&c.scratch);
    if ((rc < 0 && rc != ENG_ENOTFOUND) || c.failed)
        return false;
    *ts = c.ts;
    *last = c.last;
    return true;
}

/* The largest timestamp among seg's records at or after `from` (the log start
 * offset) and the last offset of the first batch holding it; (-1, -1) when
 * none.  The segment's own maximum (its time index's last entry) also counts
 * records that delete-records removed, so when `from` falls inside seg and
 * that maximum's batch starts below it, the batches from `from` on are read.
 * Leaving out only whole segments below the log start offset would let
 * ?spec=max_timestamp name a deleted offset (which reads as 416) after
 * records:delete inside a segment.  An I/O error keeps the segment's own maximum: a
 * listing shows that rather than fail. */
void eng__live_max_timestamp(eng_segment *seg, int64_t from, int64_t *ts, int64_t *last)
{
    *ts = eng_segment_max_timestamp(seg);
    *last = eng_segment_offset_of_max_timestamp(seg);
    if (from <= eng_segment_base(seg) || *ts < 0)
        return;
    uint64_t size = eng_segment_size(seg);
    eng_batch_pos b;
    /* Most often the maximum is in a batch wholly at or after `from`: one
     * index lookup settles it, with no scan. */
    if (*last >= from && eng_segment_find_batch(seg, *last, size, &b) == 0 &&
        b.header.base_offset >= from)
        return;
    scan_live_max(seg, from, ts, last);
}

/* A segment's candidate for the partition's largest timestamp. */
typedef struct seg_max {
    int64_t ts, last; /* its largest timestamp and that batch's last offset */
    bool rescanned;   /* ts now read from its records, not its time index */
} seg_max;

int eng_partition_max_timestamp(eng_partition *p, int64_t *offset, int64_t *ts)
{
    int64_t lso = atomic_load(&p->log_start_offset);
    int64_t hw = atomic_load(&p->high_watermark);
    eng_segview *v = eng__segview_acquire(p);
    seg_max *m = calloc(v->n ? v->n : 1, sizeof *m);
    int rc = m ? ENG_ENOTFOUND : -ENOMEM;
    /* Segments below the log start offset do not count: after
     * records:delete the answer would name an offset that reads as 416. */
    for (size_t k = 0; m && k < v->n; k++) {
        m[k].ts = m[k].last = -1;
        if (!eng__below_start(v, k, lso))
            eng__live_max_timestamp(v->segs[k], lso, &m[k].ts, &m[k].last);
    }
    while (rc == ENG_ENOTFOUND) {
        ssize_t best = -1;
        int64_t best_ts = -1;
        for (size_t k = 0; k < v->n; k++) {
            if (m[k].ts > best_ts) {
                best_ts = m[k].ts;
                best = (ssize_t)k;
            }
        }
        if (best < 0)
            break;
        eng_segment *seg = v->segs[best];
        max_ts_ctx c = {.seg = seg, .ts = best_ts, .target_last = m[best].last,
                        .min_offset = lso, .offset = -1};
        eng_segment_scan(seg, eng_segment_size(seg), visit_max_ts, &c);
        eng_buf_free(&c.batch);
        eng_buf_free(&c.scratch);
        /* A segment's maximum (its time index) may come from a batch a clean
         * emptied and kept as a header, as the last of its group or of its
         * producer: no record has that timestamp, and answering the header's
         * offset named a record that reads as 404.  The segment's records
         * answer instead, and the segments are compared again. */
        if (c.offset < 0 && !m[best].rescanned) {
            m[best].rescanned = true;
            if (scan_live_max(seg, lso, &m[best].ts, &m[best].last))
                continue;
        }
        if (c.offset < 0)
            c.offset = c.target_last; /* unreadable: the batch still bounds it */
        /* A record past the high watermark (flush.messages, its fsync
         * pending) is an offset reads answer nothing at: Kafka filters
         * ListOffsets answers at or past the last fetchable offset too. */
        if (c.offset < hw) {
            *offset = c.offset;
            *ts = best_ts;
            rc = 0;
        }
        break;
    }
    free(m);
    eng__segview_release(v);
    return rc;
}
