/*
 * eng_segment_find.c - finding batches in a segment: by offset through the
 * offset index, by timestamp through both indexes, then a scan of batch
 * headers from the position found.  An index entry that does not point at
 * its batch makes the segment's index distrusted: later lookups scan it from
 * its start instead.
 */
#include "eng_segment.h"
#include "eng_segment_impl.h"

#include "eng_batch.h"
#include "eng_buf.h"
#include "eng_compress.h"
#include "eng_error.h"
#include "eng_index.h"
#include "eng_logger.h"

#include <errno.h>
#include <inttypes.h>
#include <stdatomic.h>

int eng_segment_first_batch(eng_segment *s, eng_batch_header *h)
{
    if (eng_segment_size(s) < ENG_BATCH_OVERHEAD)
        return ENG_ENOTFOUND;
    uint8_t hb[ENG_BATCH_OVERHEAD];
    size_t got;
    int rc = eng_segment_pread(s, hb, sizeof hb, 0, &got);
    if (rc)
        return rc;
    return got == sizeof hb && !eng_batch_header_decode(hb, got, h) ? 0 : ENG_ECORRUPT;
}

typedef struct find_ctx {
    int64_t target;
    int64_t entry_offset; /* the index entry the scan starts from, -1 if none */
    eng_batch_pos found;
    bool ok;
    bool entry_bad; /* the batch at the entry's position cannot hold its offset */
} find_ctx;

static int visit_find(const eng_batch_pos *b, void *ctx)
{
    find_ctx *c = ctx;
    if (c->entry_offset >= 0) {
        /* An entry names the last offset of what was appended at its
         * position, so the batch there starts at or below it. */
        if (b->header.base_offset > c->entry_offset) {
            c->entry_bad = true;
            return 1;
        }
        c->entry_offset = -1;
    }
    if (eng_batch_last_offset(&b->header) >= c->target) {
        c->found = *b;
        c->ok = true;
        return 1;
    }
    return 0;
}

/* Where a scan for target may start: the offset index's entry at or below
 * it (*entry its offset), or 0 once the index is distrusted. */
static uint32_t scan_start(eng_segment *s, eng_index *oi, int64_t target, uint64_t limit,
                           int64_t *entry)
{
    uint32_t pos = 0;
    *entry = -1;
    if (!atomic_load(&s->index_distrusted))
        eng_offset_index_lookup(oi, target, entry, &pos);
    return pos < limit ? pos : 0;
}

/* An entry shifted off its batch passes the load-time check while it still
 * increases; trusting it would make every read through it answer
 * corrupt_record.  The caller scans the segment from its start instead, and
 * this process uses its index no more. */
bool eng_segment_index_distrusted(const eng_segment *s)
{
    return atomic_load(&((eng_segment *)s)->index_distrusted);
}

void eng__segment_distrust_index(eng_segment *s, uint32_t pos)
{
    if (!atomic_exchange(&s->index_distrusted, true))
        ENG_WARN("segment %020" PRId64 "%s: the offset index entry at byte %u does not point at"
                 " its batch; reading the segment by scanning it (delete its .index before a"
                 " restart to have it rebuilt)", s->base, s->suffix, pos);
}

int eng_segment_find_batch(eng_segment *s, int64_t target, uint64_t limit, eng_batch_pos *out)
{
    eng_index *oi;
    int rc = eng_segment_indexes(s, &oi, NULL);
    if (rc)
        return rc;
    int64_t off;
    uint32_t pos = scan_start(s, oi, target, limit, &off);
    find_ctx c = {.target = target, .entry_offset = pos ? off : -1};
    rc = eng_segment_scan_from(s, pos, limit, visit_find, &c);
    if (pos && (rc == ENG_ECORRUPT || c.entry_bad)) {
        bool entry_bad = c.entry_bad;
        c = (find_ctx){.target = target, .entry_offset = -1};
        rc = eng_segment_scan_from(s, 0, limit, visit_find, &c);
        /* A scan from the start that meets damage too means the .log is
         * damaged, not the index: blaming the index would send the operator
         * to rebuild it, which truncates the segment at the damage. */
        if (entry_bad || rc != ENG_ECORRUPT)
            eng__segment_distrust_index(s, pos);
    }
    if (rc < 0)
        return rc;
    if (!c.ok)
        return ENG_ENOTFOUND;
    *out = c.found;
    return 0;
}

/* Reads the whole batch at b into buf. */
int eng__segment_read_batch(eng_segment *s, const eng_batch_pos *b, eng_buf *buf)
{
    size_t size = eng_batch_size(&b->header);
    int rc = eng_buf_reserve(buf, size);
    size_t got;
    if (!rc)
        rc = eng_segment_pread(s, buf->data, size, b->position, &got);
    if (!rc && got != size)
        rc = ENG_ECORRUPT;
    if (!rc)
        buf->len = size;
    return rc;
}

typedef struct ts_ctx {
    eng_segment *s;
    int64_t ts, min_offset;
    int64_t found_offset, found_ts;
    eng_buf batch, scratch;
    int err;
} ts_ctx;

static int visit_ts(const eng_batch_pos *b, void *ctx)
{
    ts_ctx *c = ctx;
    if (b->header.max_timestamp < c->ts || eng_batch_last_offset(&b->header) < c->min_offset)
        return 0;
    const uint8_t *recs;
    size_t len;
    int rc = eng__segment_read_batch(c->s, b, &c->batch);
    if (!rc)
        rc = eng_batch_plain_records(c->batch.data, &b->header, &c->scratch, &recs, &len);
    if (rc) {
        c->err = rc;
        return 1;
    }
    eng_record_iter it;
    eng_record r;
    eng_record_iter_init(&it, &b->header, recs, len);
    while ((rc = eng_record_iter_next(&it, &r)) == 1) {
        if (r.timestamp >= c->ts && r.offset >= c->min_offset) {
            c->found_offset = r.offset;
            c->found_ts = r.timestamp;
            return 1;
        }
    }
    if (rc < 0) {
        c->err = rc;
        return 1;
    }
    return 0;
}

int eng_segment_find_by_timestamp(eng_segment *s, int64_t ts, int64_t min_offset, int64_t *offset,
                                  int64_t *timestamp)
{
    eng_index *oi, *ti;
    int rc = eng_segment_indexes(s, &oi, &ti);
    if (rc)
        return rc;
    int64_t ets, eoff, ioff;
    eng_time_index_lookup(ti, ts, &ets, &eoff);
    uint64_t limit = eng_segment_size(s);
    uint32_t pos = scan_start(s, oi, eoff > min_offset ? eoff : min_offset, limit, &ioff);
    ts_ctx c = {.s = s, .ts = ts, .min_offset = min_offset, .found_offset = -1};
    rc = eng_segment_scan_from(s, pos, limit, visit_ts, &c);
    if (rc == ENG_ECORRUPT && pos) {
        eng__segment_distrust_index(s, pos);
        c.found_offset = -1;
        c.err = 0;
        rc = eng_segment_scan_from(s, 0, limit, visit_ts, &c);
    }
    eng_buf_free(&c.batch);
    eng_buf_free(&c.scratch);
    if (rc < 0)
        return rc;
    if (c.err)
        return c.err;
    if (c.found_offset < 0)
        return ENG_ENOTFOUND;
    *offset = c.found_offset;
    *timestamp = c.found_ts;
    return 0;
}
