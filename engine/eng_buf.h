/*
 * eng_buf.h - a growable byte buffer for scratch space that is reused across
 * calls (batch reads, decompression), so hot paths do not allocate per call.
 */
#ifndef ENG_BUF_H
#define ENG_BUF_H

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

typedef struct eng_buf {
    uint8_t *data;
    size_t len;
    size_t cap;
} eng_buf;

/* Makes room for at least cap bytes; contents up to len are kept. */
static inline int eng_buf_reserve(eng_buf *b, size_t cap)
{
    if (cap <= b->cap)
        return 0;
    size_t n = b->cap ? b->cap : 4096;
    while (n < cap)
        n = n > SIZE_MAX / 2 ? cap : n * 2;
    uint8_t *p = realloc(b->data, n);
    if (!p)
        return -ENOMEM;
    b->data = p;
    b->cap = n;
    return 0;
}

static inline void eng_buf_free(eng_buf *b)
{
    free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
}

#endif
