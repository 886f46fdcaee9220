/*
 * eng_partition_read.c - the read side of a partition: fetch by offset and
 * the listings for admin (lookups by timestamp: eng_partition_timestamps.c).
 *
 * Nothing here takes append_lock.  Every function takes a view reference,
 * reads the atomics it needs once at the start (so a concurrent append can
 * only make the answer slightly stale, never inconsistent) and bounds every
 * read by the committed size of the segment and the high watermark.
 */
#include "eng_partition_impl.h"

#include "eng_buf.h"
#include "eng_compress.h"
#include "eng_logger.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

void eng_fetch_free(eng_fetch *f)
{
    if (!f)
        return;
    free(f->data);
    f->data = NULL;
    f->len = 0;
}

static int out_of_range(eng_partition *p, int64_t offset, int64_t lso, int64_t hw,
                        eng_errdetail *err)
{
    eng_errdetail_bounds(err, lso, hw);
    /* A read may start anywhere from the log start offset to the high
     * watermark itself (which answers no records yet): both ends are in. */
    return eng_fail(err, ENG_EOFFSET,
                    "offset %lld is outside [%lld, %lld] for %s-%d (log start offset, high "
                    "watermark)",
                    (long long)offset, (long long)lso, (long long)hw, p->topic, p->id);
}

/* Reads whole batches starting at b (inside seg, below limit) into out. */
static int read_batches(eng_segment *seg, const eng_batch_pos *b, uint64_t limit, int64_t hw,
                        size_t max_bytes, eng_fetch *out)
{
    size_t first = eng_batch_size(&b->header);
    size_t want = max_bytes > first ? max_bytes : first;
    if (want > limit - b->position)
        want = (size_t)(limit - b->position);
    uint8_t *buf = malloc(want ? want : 1);
    if (!buf)
        return -ENOMEM;
    size_t got;
    int rc = eng_segment_pread(seg, buf, want, b->position, &got);
    if (rc) {
        free(buf);
        return rc;
    }
    size_t used = 0;
    int64_t next = out->next_offset;
    while (got - used >= ENG_BATCH_OVERHEAD) {
        eng_batch_header h;
        if (eng_batch_header_decode(buf + used, got - used, &h))
            break;
        if (eng_batch_size(&h) > got - used || h.base_offset >= hw)
            break;
        /* Offsets must go on increasing: a segment trusted without being
         * read (a clean stop) may hold a batch renumbered on disk, and
         * taking it moved next_offset back to the offset asked for, so a
         * reader fetched the same bytes forever (found by fuzz_startup). */
        if (used && h.base_offset < next)
            break;
        used += eng_batch_size(&h);
        next = eng_batch_last_offset(&h) + 1;
    }
    if (used == 0) {
        /* The batch the segment says is at b, below the high watermark, is
         * not whole in the file (it was cut short behind our back).  An
         * empty answer would leave the reader at the same offset forever,
         * and a stream waiting for data that is already there. */
        free(buf);
        return ENG_ECORRUPT;
    }
    out->data = buf;
    out->len = used;
    out->next_offset = next;
    return 0;
}

/* Two races with maintenance shape the readers below.
 *
 *
 * Retention may delete the segment holding `offset` between the range check
 * and taking the view; the scan then starts at the next segment and answers
 * records from a later offset, a silent gap.  Retention raises the log start
 * offset before it installs the new view, so a fresh load after taking the
 * view sees it, and the read answers out of range, as Kafka does.
 *
 * A clean that removed every record in [offset, hw) leaves the scan finding
 * its first batch at or past hw.  Nothing can reappear below hw, so the
 * readers answer an empty page whose next offset is hw rather than one that
 * never advances. */
/* Range checks for a read at offset and, when there is something below the
 * high watermark to read, the view (*v, to release).  Returns 0 with *v NULL
 * for an empty answer at the high watermark, or ENG_EOFFSET. */
static int open_read(eng_partition *p, int64_t offset, int64_t *hw, int64_t *lso, eng_segview **v,
                     eng_errdetail *err)
{
    *v = NULL;
    *hw = atomic_load(&p->high_watermark);
    *lso = atomic_load(&p->log_start_offset);
    if (atomic_load(&p->retired))
        return eng_fail(err, ENG_ENOTOPIC, "topic '%s' was deleted", p->topic);
    if (eng__dir_offline(p))
        return eng_fail(err, ENG_EOFFLINE,
                        "the log dir holding %s-%d went offline after an I/O error; restart the "
                        "server to recover it",
                        p->topic, p->id);
    if (offset < *lso || offset > *hw)
        return out_of_range(p, offset, *lso, *hw, err);
    if (offset == *hw)
        return 0;
    eng_segview *view = eng__segview_acquire(p);
    *lso = atomic_load(&p->log_start_offset);
    if (offset < *lso) {
        eng__segview_release(view);
        return out_of_range(p, offset, *lso, *hw, err);
    }
    *v = view;
    return 0;
}

/* The first batch of view v holding offset or later, below hw: *seg NULL
 * when there is none, because a clean emptied [offset, hw). */
static int first_batch(eng_segview *v, int64_t offset, int64_t hw, eng_segment **seg,
                       eng_batch_pos *b)
{
    *seg = NULL;
    ssize_t i = eng__segview_floor(v, offset);
    int64_t target = offset;
    for (size_t k = i < 0 ? 0 : (size_t)i; k < v->n; k++) {
        eng_segment *s = v->segs[k];
        if (eng_segment_base(s) > target)
            target = eng_segment_base(s);
        if (target >= hw)
            return 0;
        int rc = eng_segment_find_batch(s, target, eng_segment_size(s), b);
        if (rc == ENG_ENOTFOUND)
            continue;
        if (rc) {
            *seg = s; /* the segment that failed, for the caller's message */
            return rc;
        }
        if (b->header.base_offset >= hw)
            return 0;
        *seg = s;
        return 0;
    }
    return 0;
}

static int read_failed(eng_partition *p, int64_t offset, int rc, eng_errdetail *err)
{
    ENG_ERROR("%s-%d: read at offset %lld failed: %s", p->topic, p->id, (long long)offset,
              eng_strerror(rc));
    return eng_fail(err, rc, "reading %s-%d failed: %s", p->topic, p->id, eng_strerror(rc));
}

/* Damage in seg's .log (cut short, a batch that does not parse) met by a
 * read at offset: says where, and where reading can go on, as a CRC failure
 * does.  Releases v; returns ENG_ECORRUPT. */
static int damaged(eng_partition *p, eng_segview *v, eng_segment *seg, int64_t offset,
                   eng_errdetail *err)
{
    int64_t skip = -1;
    for (size_t k = 0; k + 1 < v->n; k++)
        if (v->segs[k] == seg)
            skip = eng_segment_base(v->segs[k + 1]);
    int64_t base = eng_segment_base(seg);
    eng__segview_release(v);
    ENG_ERROR("%s-%d: read at offset %lld met damage in segment %020lld", p->topic, p->id,
              (long long)offset, (long long)base);
    if (skip < 0)
        return eng_fail(err, ENG_ECORRUPT,
                        "segment %020lld of %s-%d is damaged (cut short, or a batch that "
                        "does not parse) at or after offset %lld",
                        (long long)base, p->topic, p->id, (long long)offset);
    eng_errdetail_bounds(err, offset, skip);
    return eng_fail(err, ENG_ECORRUPT,
                    "segment %020lld of %s-%d is damaged (cut short, or a batch that does "
                    "not parse) at or after offset %lld; a read from offset %lld (the next "
                    "segment) skips it",
                    (long long)base, p->topic, p->id, (long long)offset, (long long)skip);
}

int eng_partition_read(eng_partition *p, int64_t offset, size_t max_bytes, eng_fetch *out,
                       eng_errdetail *err)
{
    memset(out, 0, sizeof *out);
    out->next_offset = offset;
    eng_segview *v;
    int rc = open_read(p, offset, &out->high_watermark, &out->log_start_offset, &v, err);
    if (rc || !v)
        return rc;
    eng_segment *seg;
    eng_batch_pos b;
    rc = first_batch(v, offset, out->high_watermark, &seg, &b);
    if (!rc && !seg)
        out->next_offset = out->high_watermark;
    else if (!rc)
        rc = read_batches(seg, &b, eng_segment_size(seg), out->high_watermark, max_bytes, out);
    if (rc == ENG_ECORRUPT && seg)
        return damaged(p, v, seg, offset, err);
    eng__segview_release(v);
    return rc ? read_failed(p, offset, rc, err) : 0;
}

/* Walks batch headers up to `want_end`, remembering the last whole batch. */
typedef struct slice_ctx {
    uint64_t want_end, end;
    int64_t next;
} slice_ctx;

static int visit_slice(const eng_batch_pos *b, void *vctx)
{
    slice_ctx *c = vctx;
    uint64_t end = b->position + eng_batch_size(&b->header);
    /* As in read_batches: a batch whose offsets go back ends the slice. */
    if (b->header.base_offset < c->next)
        return 1;
    if (end > c->want_end) {
        /* The scan began at a batch boundary the offset index gave, past
         * c->end: everything before this batch is whole batches;
         * stopping without taking them would answer one batch for a large
         * max_bytes, fewer bytes than for a smaller one. */
        if (b->position > c->end) {
            c->end = b->position;
            c->next = b->header.base_offset;
        }
        return 1;
    }
    c->end = end;
    c->next = eng_batch_last_offset(&b->header) + 1;
    return 0;
}

/* Finds [start, end) of whole batches from the batch at b, below hw and about
 * max_bytes long (at least one batch), reading only headers near the end: the
 * offset index jumps most of the way. */
static int slice_range(eng_segment *seg, const eng_batch_pos *b, int64_t hw, size_t max_bytes,
                       uint64_t *end, int64_t *next)
{
    uint64_t limit = eng_segment_size(seg);
    eng_batch_pos hb;
    /* Batches at or past the high watermark are not readable yet. */
    if (eng_segment_next_offset(seg) > hw && eng_segment_find_batch(seg, hw, limit, &hb) == 0)
        limit = hb.position;
    uint64_t first_end = b->position + eng_batch_size(&b->header);
    if (first_end > limit)
        return ENG_ENOTFOUND;
    slice_ctx c = {.want_end = b->position + max_bytes, .end = first_end,
                   .next = eng_batch_last_offset(&b->header) + 1};
    if (c.want_end < first_end)
        c.want_end = first_end;
    if (c.want_end > limit)
        c.want_end = limit;
    eng_index *oi = eng_segment_offset_index(seg);
    uint64_t from = first_end;
    if (oi) {
        int64_t ioff;
        uint32_t ipos;
        eng_offset_index_floor_position(oi, c.want_end, &ioff, &ipos);
        if (ipos > from && ipos < c.want_end)
            from = ipos;
    }
    /* Scan to the readable limit, not to want_end: the scan skips a batch
     * that crosses its limit without showing it, and visit_slice must see
     * the crossing batch to take the whole batches before it. */
    int rc = eng_segment_scan_from(seg, from, limit, visit_slice, &c);
    if (rc == ENG_ECORRUPT) {
        /* Damage past the whole batches found so far: send those, as a page
         * answers the records before damage, and let the read from c.next
         * meet it.  Refusing the lot left a raw reader with no way on, since
         * the read at the damage itself is what names the skip offset.  The
         * size a segment was opened with may be more than its file holds
         * now (cut behind our back): bytes sendfile cannot find are damage
         * too. */
        struct stat st;
        int fd = eng_segment_log_fd(seg);
        if (fd < 0 || fstat(fd, &st) != 0 || (uint64_t)st.st_size < c.end)
            return ENG_ECORRUPT;
        rc = 0;
    }
    if (rc < 0)
        return rc;
    *end = c.end;
    *next = c.next;
    return 0;
}

int eng_partition_read_slice(eng_partition *p, int64_t offset, size_t max_bytes, eng_slice *out,
                             eng_errdetail *err)
{
    memset(out, 0, sizeof *out);
    out->fd = -1;
    out->next_offset = offset;
    eng_segview *v;
    int rc = open_read(p, offset, &out->high_watermark, &out->log_start_offset, &v, err);
    if (rc || !v)
        return rc;
    eng_segment *seg;
    eng_batch_pos b;
    uint64_t end;
    int64_t next;
    rc = first_batch(v, offset, out->high_watermark, &seg, &b);
    if (!rc && !seg) {
        out->next_offset = out->high_watermark;
    } else if (!rc && !(rc = slice_range(seg, &b, out->high_watermark, max_bytes, &end, &next))) {
        out->fd = dup(eng_segment_log_fd(seg));
        if (out->fd < 0) {
            rc = -errno;
        } else {
            out->position = b.position;
            out->length = (size_t)(end - b.position);
            out->next_offset = next;
        }
    }
    /* Told as a page's read tells it: a raw reader needs the offset that
     * skips the damage as much as a JSON one. */
    if (rc == ENG_ECORRUPT && seg)
        return damaged(p, v, seg, offset, err);
    eng__segview_release(v);
    if (rc == ENG_ENOTFOUND)
        rc = 0;
    return rc ? read_failed(p, offset, rc, err) : 0;
}

bool eng__below_start(const eng_segview *v, size_t k, int64_t lso)
{
    return k + 1 < v->n && eng_segment_base(v->segs[k + 1]) <= lso;
}

int eng__iter_records(eng_segment *seg, const eng_batch_pos *b, eng_buf *buf, eng_buf *scratch,
                        eng_record_iter *it)
{
    size_t size = eng_batch_size(&b->header), got, len;
    const uint8_t *recs;
    /* The header may come from a lone 61-byte read (the first batch of a
     * segment, for its timestamp), not a scan that checked it against the
     * file: a length damaged on disk sized a 2 GiB buffer for a listing
     * (found by fuzz_startup). */
    if (b->position > eng_segment_size(seg) || size > eng_segment_size(seg) - b->position)
        return ENG_ECORRUPT;
    int rc = eng_buf_reserve(buf, size);
    if (!rc)
        rc = eng_segment_pread(seg, buf->data, size, b->position, &got);
    if (!rc && got != size)
        rc = ENG_ECORRUPT;
    if (!rc)
        rc = eng_batch_plain_records(buf->data, &b->header, scratch, &recs, &len);
    if (!rc)
        eng_record_iter_init(it, &b->header, recs, len);
    return rc;
}

typedef struct first_ts_ctx {
    eng_segment *seg;
    int64_t from;
    int64_t ts;
    bool found, failed;
    eng_buf batch, scratch;
} first_ts_ctx;

/* The timestamp a reader sees on the first record at or after c->from.  The
 * header answers for most batches: a LogAppendTime batch's records all read
 * as maxTimestamp (its baseTimestamp is the client's), and otherwise
 * baseTimestamp is the first record's.  The records answer when `from` falls
 * inside the batch or baseTimestamp holds the cleaner's delete horizon. */
static int visit_first_ts(const eng_batch_pos *b, void *vctx)
{
    first_ts_ctx *c = vctx;
    const eng_batch_header *h = &b->header;
    if (eng_batch_last_offset(h) < c->from || h->record_count == 0)
        return 0; /* an empty batch is what a clean left of one */
    /* A batch from `from` on answers from its header.  One holding `from`
     * is read: a clean may have left it only records below it. */
    if (h->base_offset >= c->from && (h->attributes & ENG_ATTR_LOG_APPEND_TIME)) {
        c->ts = h->max_timestamp;
        c->found = true;
        return 1;
    }
    if (h->base_offset >= c->from && !(h->attributes & ENG_ATTR_DELETE_HORIZON)) {
        c->ts = h->base_timestamp;
        c->found = true;
        return 1;
    }
    eng_record_iter it;
    eng_record r;
    if (eng__iter_records(c->seg, b, &c->batch, &c->scratch, &it)) {
        c->failed = true;
        return 1;
    }
    while (eng_record_iter_next(&it, &r) == 1) {
        if (r.offset >= c->from) {
            c->ts = r.timestamp;
            c->found = true;
            return 1;
        }
    }
    return 0; /* compaction left only records below `from` */
}

/* Sets *ts to the timestamp of seg's first record at or after `from`.
 * Returns false when seg has no such record, so the caller looks further;
 * true when it has, or when seg cannot be read there (*ts untouched: a
 * listing shows no time rather than failing, nor a later record's). */
static bool first_timestamp_from(eng_segment *seg, int64_t from, int64_t *ts)
{
    first_ts_ctx c = {.seg = seg, .from = from, .ts = -1};
    uint64_t size = eng_segment_size(seg);
    eng_batch_pos b = {.position = 0};
    int rc;
    /* Metrics ask this of every partition, and `from` is most often the
     * segment's base: its first header, one 61-byte read, usually settles
     * it without a scan's chunk-sized reads. */
    if (from <= eng_segment_base(seg)) {
        if ((rc = eng_segment_first_batch(seg, &b.header)))
            return rc != ENG_ENOTFOUND;
        rc = visit_first_ts(&b, &c);
        if (!rc)
            rc = eng_segment_scan_from(seg, 0, size, visit_first_ts, &c);
    } else if ((rc = eng_segment_find_batch(seg, from, size, &b))) {
        return rc != ENG_ENOTFOUND;
    } else {
        rc = eng_segment_scan_from(seg, b.position, size, visit_first_ts, &c);
    }
    eng_buf_free(&c.batch);
    eng_buf_free(&c.scratch);
    if (c.found)
        *ts = c.ts;
    return c.found || c.failed || rc < 0;
}

/* A segment's first timestamp: its first record's, whatever the log start
 * offset (a listing shows what the files hold). */
static int64_t segment_first_timestamp(eng_segment *seg)
{
    int64_t ts = -1;
    first_timestamp_from(seg, eng_segment_base(seg), &ts);
    return ts;
}

void eng_partition_info_get(eng_partition *p, eng_partition_info *out)
{
    memset(out, 0, sizeof *out);
    out->log_start_offset = atomic_load(&p->log_start_offset);
    out->high_watermark = atomic_load(&p->high_watermark);
    out->log_end_offset = atomic_load(&p->log_end_offset);
    out->recovery_point = atomic_load(&p->recovery_point);
    eng_segview *v = eng__segview_acquire(p);
    out->segment_count = (uint32_t)v->n;
    out->max_timestamp = -1;
    out->first_timestamp = -1;
    for (size_t k = 0; k < v->n; k++) {
        out->size_bytes += eng_segment_size(v->segs[k]);
        if (eng__below_start(v, k, out->log_start_offset))
            continue;
        int64_t t, last;
        eng__live_max_timestamp(v->segs[k], out->log_start_offset, &t, &last);
        if (t > out->max_timestamp)
            out->max_timestamp = t;
    }
    if (v->n > 0)
        out->active_base_offset = eng_segment_base(v->segs[v->n - 1]);
    /* The partition's first record is the one at the log start offset (what
     * an `earliest` read starts from): records below it are deleted for
     * readers even while their segment waits for retention. */
    ssize_t i = eng__segview_floor(v, out->log_start_offset);
    for (size_t k = i < 0 ? 0 : (size_t)i; k < v->n; k++)
        if (first_timestamp_from(v->segs[k], out->log_start_offset, &out->first_timestamp))
            break;
    eng__segview_release(v);
}

typedef struct count_ctx {
    int64_t records, batches;
    int64_t next; /* past the last whole batch */
} count_ctx;

static int visit_count(const eng_batch_pos *b, void *vctx)
{
    count_ctx *c = vctx;
    c->records += b->header.record_count;
    c->batches++;
    c->next = eng_batch_last_offset(&b->header) + 1;
    return 0;
}

int eng_partition_segments(eng_partition *p, eng_segment_info **out, size_t *n)
{
    size_t total;
    return eng_partition_segments_page(p, 0, SIZE_MAX, out, n, &total);
}

/* Lists at most limit segments of p from the start'th, or, when after >= 0,
 * from the first whose base offset is above after. */
static int segments_list(eng_partition *p, size_t start, int64_t after, size_t limit,
                         eng_segment_info **out, size_t *n, size_t *total, bool *more)
{
    if (atomic_load(&p->retired))
        return ENG_ENOTOPIC;
    eng_segview *v = eng__segview_acquire(p);
    /* Read the count while the view is held: once released, a roll may have
     * dropped the last reference and freed it. */
    size_t all = v->n;
    if (after >= 0)
        start = (size_t)(eng__segview_floor(v, after) + 1);
    size_t first = start < all ? start : all;
    size_t count = all - first < limit ? all - first : limit;
    eng_segment_info *arr = calloc(count ? count : 1, sizeof *arr);
    int rc = arr ? 0 : -ENOMEM;
    for (size_t k = 0; k < count && !rc; k++) {
        eng_segment *seg = v->segs[first + k];
        eng_segment_info *si = &arr[k];
        si->base_offset = eng_segment_base(seg);
        si->next_offset = eng_segment_next_offset(seg);
        si->size_bytes = eng_segment_size(seg);
        si->max_timestamp = eng_segment_max_timestamp(seg);
        si->first_timestamp = segment_first_timestamp(seg);
        si->active = eng_segment_is_active(seg);
        count_ctx c = {0};
        rc = eng_segment_scan(seg, si->size_bytes, visit_count, &c);
        if (rc == ENG_ECORRUPT) {
            /* Listed, not refused: the listing is where an operator looks.
             * A sealed segment whose tail does not parse has its next offset
             * taken as its base (empty) by the engine; the listing gives
             * the end of the whole batches it shows instead, so its offsets
             * agree with its record and batch counts.  One whose next offset
             * the engine found (from its last index entry on) keeps it:
             * what a scan from the start reads past damage in the middle
             * may be any bytes, and the active segment's next offset is the
             * log end offset appends go on from. */
            si->damaged = true;
            if (si->next_offset == si->base_offset && c.next > si->next_offset)
                si->next_offset = c.next;
            rc = 0;
        }
        si->record_count = c.records;
        si->batch_count = c.batches;
        eng_index *oi = NULL, *ti = NULL;
        if (!rc)
            rc = eng_segment_indexes(seg, &oi, &ti); /* ENG_ENOTOPIC once retired */
        if (!rc) {
            si->index_bytes = eng_index_file_bytes(oi);
            si->timeindex_bytes = eng_index_file_bytes(ti);
            si->index_entries = eng_index_entries(oi);
            si->timeindex_entries = eng_index_entries(ti);
        }
    }
    eng__segview_release(v);
    if (rc) {
        free(arr);
        return rc;
    }
    *out = arr;
    *n = count;
    *total = all;
    *more = first + count < all;
    return 0;
}

int eng_partition_segments_page(eng_partition *p, size_t start, size_t limit,
                                eng_segment_info **out, size_t *n, size_t *total)
{
    bool more;
    return segments_list(p, start, -1, limit, out, n, total, &more);
}

int eng_partition_segments_after(eng_partition *p, int64_t after, size_t limit,
                                 eng_segment_info **out, size_t *n, size_t *total, bool *more)
{
    return segments_list(p, 0, after < 0 ? 0 : after, limit, out, n, total, more);
}

int eng_partition_segment(eng_partition *p, int64_t base, eng_segment **out)
{
    if (atomic_load(&p->retired))
        return ENG_ENOTOPIC;
    eng_segview *v = eng__segview_acquire(p);
    ssize_t i = eng__segview_floor(v, base);
    int rc = ENG_ENOTFOUND;
    if (i >= 0 && eng_segment_base(v->segs[i]) == base) {
        eng_segment_ref(v->segs[i]);
        *out = v->segs[i];
        rc = 0;
    }
    eng__segview_release(v);
    return rc;
}

typedef struct dump_ctx {
    eng_segment *seg;
    size_t skip, max, index;
    eng_batch_dump *arr;
    size_t n;
    eng_buf batch, scratch;
    int err;
    uint64_t end; /* where the last batch visited ends */
} dump_ctx;

static int visit_dump(const eng_batch_pos *b, void *vctx)
{
    dump_ctx *c = vctx;
    c->end = b->position + eng_batch_size(&b->header);
    size_t idx = c->index++;
    if (idx < c->skip || c->n >= c->max)
        return 0;
    eng_batch_dump *d = &c->arr[c->n++];
    d->position = b->position;
    d->header = b->header;
    size_t size = eng_batch_size(&b->header), got;
    if ((c->err = eng_buf_reserve(&c->batch, size)) ||
        (c->err = eng_segment_pread(c->seg, c->batch.data, size, b->position, &got)))
        return 1;
    eng_batch_header h;
    d->computed_crc = got == size ? eng_batch_compute_crc(c->batch.data, size) : 0;
    d->valid = got == size && eng_batch_validate(c->batch.data, size, &h) == 0;
    if (d->valid && (h.attributes & ENG_ATTR_CODEC_MASK)) {
        const uint8_t *recs;
        size_t len;
        d->valid = eng_batch_plain_records(c->batch.data, &h, &c->scratch, &recs, &len) == 0;
    }
    return 0;
}

int eng_partition_dump_batches(eng_partition *p, int64_t base, size_t skip, size_t max,
                               eng_batch_dump **out, size_t *n, size_t *total,
                               int64_t *damaged_at)
{
    if (damaged_at)
        *damaged_at = -1;
    eng_segment *seg;
    int rc = eng_partition_segment(p, base, &seg);
    if (rc)
        return rc;
    dump_ctx c = {.seg = seg, .skip = skip, .max = max};
    c.arr = calloc(max ? max : 1, sizeof *c.arr);
    if (!c.arr)
        rc = -ENOMEM;
    if (!rc)
        rc = eng_segment_scan(seg, eng_segment_size(seg), visit_dump, &c);
    if (rc == ENG_ECORRUPT && !c.err) {
        /* Shown up to the damage, which is what an operator came to find. */
        if (damaged_at)
            *damaged_at = (int64_t)c.end;
        rc = 0;
    }
    if (!rc)
        rc = c.err;
    eng_buf_free(&c.batch);
    eng_buf_free(&c.scratch);
    eng_segment_unref(seg);
    if (rc) {
        free(c.arr);
        return rc;
    }
    *out = c.arr;
    *n = c.n;
    *total = c.index;
    return 0;
}
