/*
 * eng_varint.h - Kafka's zigzag varints (int32) and varlongs (int64).
 *
 * Encoding: zigzag, then little-endian base-128 groups.  A varint is 1..5
 * bytes and a varlong 1..10; decoders refuse longer encodings, a fifth varint
 * byte with its high bit set, and input that ends mid-number.  Decoders return
 * the number of bytes consumed, or 0 on any of those errors.
 */
#ifndef ENG_VARINT_H
#define ENG_VARINT_H

#include <stddef.h>
#include <stdint.h>

#define ENG_VARINT_MAX 5
#define ENG_VARLONG_MAX 10

/* The sign mask comes from the unsigned sign bit: shifting a negative
 * signed value right is implementation-defined in C. */
static inline uint32_t eng_zigzag32(int32_t v)
{
    return ((uint32_t)v << 1) ^ (0u - ((uint32_t)v >> 31));
}

static inline uint64_t eng_zigzag64(int64_t v)
{
    return ((uint64_t)v << 1) ^ (0u - ((uint64_t)v >> 63));
}

/* Bytes a signed varint of v takes. */
static inline size_t eng_varint_size(int32_t v)
{
    uint32_t u = eng_zigzag32(v);
    size_t n = 1;
    while (u >= 0x80) {
        u >>= 7;
        n++;
    }
    return n;
}

static inline size_t eng_varlong_size(int64_t v)
{
    uint64_t u = eng_zigzag64(v);
    size_t n = 1;
    while (u >= 0x80) {
        u >>= 7;
        n++;
    }
    return n;
}

/* Writes v at p (room for ENG_VARINT_MAX bytes) and returns bytes written. */
static inline size_t eng_varint_put(uint8_t *p, int32_t v)
{
    uint32_t u = eng_zigzag32(v);
    size_t n = 0;
    while (u >= 0x80) {
        p[n++] = (uint8_t)(u | 0x80);
        u >>= 7;
    }
    p[n++] = (uint8_t)u;
    return n;
}

static inline size_t eng_varlong_put(uint8_t *p, int64_t v)
{
    uint64_t u = eng_zigzag64(v);
    size_t n = 0;
    while (u >= 0x80) {
        p[n++] = (uint8_t)(u | 0x80);
        u >>= 7;
    }
    p[n++] = (uint8_t)u;
    return n;
}

static inline size_t eng_varint_get(const uint8_t *p, const uint8_t *end, int32_t *out)
{
    uint32_t u = 0;
    for (size_t i = 0; i < ENG_VARINT_MAX; i++) {
        if (p + i >= end)
            return 0;
        uint8_t b = p[i];
        if (i == ENG_VARINT_MAX - 1 && (b & 0xf0))
            return 0; /* more than 32 bits */
        u |= (uint32_t)(b & 0x7f) << (7 * i);
        if (!(b & 0x80)) {
            *out = (int32_t)((u >> 1) ^ (~(u & 1) + 1));
            return i + 1;
        }
    }
    return 0;
}

static inline size_t eng_varlong_get(const uint8_t *p, const uint8_t *end, int64_t *out)
{
    uint64_t u = 0;
    for (size_t i = 0; i < ENG_VARLONG_MAX; i++) {
        if (p + i >= end)
            return 0;
        uint8_t b = p[i];
        if (i == ENG_VARLONG_MAX - 1 && (b & 0xfe))
            return 0; /* more than 64 bits */
        u |= (uint64_t)(b & 0x7f) << (7 * i);
        if (!(b & 0x80)) {
            *out = (int64_t)((u >> 1) ^ (~(u & 1) + 1));
            return i + 1;
        }
    }
    return 0;
}

#endif
