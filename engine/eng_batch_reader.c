/*
 * eng_batch_reader.c - chunked sequential batch reads.
 */
#include "eng_batch_reader.h"

#include "eng_error.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int eng_batch_reader_init(eng_batch_reader *r, eng_segment *s, uint64_t start, uint64_t limit,
                          size_t chunk)
{
    memset(r, 0, sizeof *r);
    r->seg = s;
    r->pos = start;
    r->limit = limit;
    r->cap = chunk < ENG_BATCH_OVERHEAD ? ENG_BATCH_OVERHEAD : chunk;
    r->buf = malloc(r->cap);
    return r->buf ? 0 : -ENOMEM;
}

/* Makes [pos, pos + need) available in the buffer, refilling from pos. */
static int reader_fill(eng_batch_reader *r, size_t need)
{
    if (r->pos >= r->buf_pos && r->pos + need <= r->buf_pos + r->len)
        return 0;
    if (need > r->cap) {
        uint8_t *nb = realloc(r->buf, need);
        if (!nb)
            return -ENOMEM;
        r->buf = nb;
        r->cap = need;
    }
    size_t want = r->limit - r->pos < r->cap ? (size_t)(r->limit - r->pos) : r->cap;
    int rc = eng_segment_pread(r->seg, r->buf, want, r->pos, &r->len);
    r->buf_pos = r->pos;
    if (rc)
        return rc;
    return r->len >= need ? 0 : ENG_ECORRUPT;
}

int eng_batch_reader_next(eng_batch_reader *r, eng_batch_pos *b, const uint8_t **bytes)
{
    if (r->pos + ENG_BATCH_OVERHEAD > r->limit)
        return 0;
    int rc = reader_fill(r, ENG_BATCH_OVERHEAD);
    if (rc)
        return rc;
    b->position = r->pos;
    if (eng_batch_header_decode(r->buf + (r->pos - r->buf_pos), r->len - (r->pos - r->buf_pos),
                                &b->header))
        return ENG_ECORRUPT;
    size_t size = eng_batch_size(&b->header);
    if (r->pos + size > r->limit)
        return 0;
    if ((rc = reader_fill(r, size)))
        return rc;
    *bytes = r->buf + (r->pos - r->buf_pos);
    r->pos += size;
    return 1;
}

void eng_batch_reader_free(eng_batch_reader *r)
{
    free(r->buf);
    r->buf = NULL;
}
