/*
 * eng_compact_txn.c - transaction markers for the cleaner (see the header).
 *
 * The collecting pass reads batch headers in chunks (eng_segment_scan) and
 * reads a whole batch only for control batches, which are rare, so its cost
 * is about one header read per batch and nothing for logs without
 * transactions beyond that.
 */
#include "eng_compact_txn.h"

#include "eng_compress.h"
#include "eng_endian.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define CONTROL_ABORT 0
#define CONTROL_COMMIT 1

int eng__control_type(const eng_batch_header *h, const uint8_t *recs, size_t len)
{
    eng_record_iter it;
    eng_record r;
    eng_record_iter_init(&it, h, recs, len);
    if (eng_record_iter_next(&it, &r) != 1 || !r.key || r.key_len < 4)
        return -1;
    /* Kafka's ControlRecordType.parse: int16 version (negative is invalid,
     * a newer one is read the same way), int16 type. */
    if ((int16_t)eng_be16(r.key) < 0)
        return -1;
    return (int16_t)eng_be16(r.key + 2);
}

typedef struct collect_ctx {
    eng__txn_markers *t;
    eng_segment *seg;
    eng_buf *scratch;
    eng_buf batch;
    int err;
} collect_ctx;

static int push(eng__txn_markers *t, eng__txn_marker m)
{
    if (t->n == t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 16;
        eng__txn_marker *v = realloc(t->v, cap * sizeof *v);
        if (!v)
            return -ENOMEM;
        t->v = v;
        t->cap = cap;
    }
    t->v[t->n++] = m;
    t->any_abort |= m.abort;
    return 0;
}

static int visit(const eng_batch_pos *b, void *ctx)
{
    collect_ctx *c = ctx;
    const eng_batch_header *h = &b->header;
    if (!(h->attributes & ENG_ATTR_CONTROL) || h->record_count == 0)
        return 0;
    size_t size = eng_batch_size(h), got;
    int rc = eng_buf_reserve(&c->batch, size);
    if (!rc)
        rc = eng_segment_pread(c->seg, c->batch.data, size, b->position, &got);
    if (!rc && got != size)
        rc = ENG_ECORRUPT;
    if (!rc && eng_batch_compute_crc(c->batch.data, size) != h->crc)
        rc = ENG_ECRC;
    const uint8_t *recs;
    size_t len;
    if (!rc)
        rc = eng_batch_plain_records(c->batch.data, h, c->scratch, &recs, &len);
    if (!rc) {
        int type = eng__control_type(h, recs, len);
        if (type == CONTROL_ABORT || type == CONTROL_COMMIT)
            rc = push(c->t, (eng__txn_marker){h->producer_id, h->base_offset,
                                              type == CONTROL_ABORT});
    }
    if (rc) {
        /* eng_segment_scan returns what the visitor returns; keep the code
         * apart so a positive stop value can never be confused with it. */
        c->err = rc;
        return 1;
    }
    return 0;
}

static int cmp_marker(const void *a, const void *b)
{
    const eng__txn_marker *x = a, *y = b;
    if (x->producer_id != y->producer_id)
        return x->producer_id < y->producer_id ? -1 : 1;
    return x->offset < y->offset ? -1 : x->offset > y->offset;
}

int eng__txn_markers_collect(eng__txn_markers *t, const eng_segview *v, eng_buf *scratch)
{
    memset(t, 0, sizeof *t);
    collect_ctx c = {.t = t, .scratch = scratch};
    int rc = 0;
    for (size_t i = 0; i < v->n && !rc; i++) {
        c.seg = v->segs[i];
        rc = eng_segment_scan(c.seg, eng_segment_size(c.seg), visit, &c);
        if (rc > 0)
            rc = c.err;
    }
    eng_buf_free(&c.batch);
    if (rc) {
        eng__txn_markers_free(t);
        return rc;
    }
    if (t->n > 1)
        qsort(t->v, t->n, sizeof *t->v, cmp_marker);
    return 0;
}

bool eng__txn_aborted(const eng__txn_markers *t, const eng_batch_header *h)
{
    if (!t->any_abort || (h->attributes & (ENG_ATTR_TRANSACTIONAL | ENG_ATTR_CONTROL)) !=
                             ENG_ATTR_TRANSACTIONAL)
        return false;
    /* The first marker of this producer after the batch ends its
     * transaction. */
    int64_t last = eng_batch_last_offset(h);
    size_t lo = 0, hi = t->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const eng__txn_marker *m = &t->v[mid];
        if (m->producer_id < h->producer_id ||
            (m->producer_id == h->producer_id && m->offset <= last))
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < t->n && t->v[lo].producer_id == h->producer_id && t->v[lo].abort;
}

void eng__txn_markers_free(eng__txn_markers *t)
{
    free(t->v);
    memset(t, 0, sizeof *t);
}
