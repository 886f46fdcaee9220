/*
 * eng_endian.h - big-endian loads and stores for Kafka's fixed-width fields.
 *
 * Everything Kafka writes outside record varints is big-endian two's
 * complement.  These helpers go through memcpy so unaligned buffers are fine.
 */
#ifndef ENG_ENDIAN_H
#define ENG_ENDIAN_H

#include <stdint.h>
#include <string.h>

static inline uint16_t eng_be16(const uint8_t *p)
{
    return (uint16_t)((uint16_t)p[0] << 8 | p[1]);
}

static inline uint32_t eng_be32(const uint8_t *p)
{
    uint32_t v;
    memcpy(&v, p, 4);
    return __builtin_bswap32(v);
}

static inline uint64_t eng_be64(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
    return __builtin_bswap64(v);
}

static inline void eng_put_be16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)(v >> 8);
    p[1] = (uint8_t)v;
}

static inline void eng_put_be32(uint8_t *p, uint32_t v)
{
    v = __builtin_bswap32(v);
    memcpy(p, &v, 4);
}

static inline void eng_put_be64(uint8_t *p, uint64_t v)
{
    v = __builtin_bswap64(v);
    memcpy(p, &v, 8);
}

#endif
