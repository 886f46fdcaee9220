/*
 * eng_crc32c.c - CRC-32C with a hardware path and a table path.
 *
 * The table path is slicing-by-8 (eight 256-entry tables built once under
 * pthread_once).  The hardware path feeds 8 bytes per crc32q instruction; it
 * is compiled with a target attribute so the rest of the engine does not need
 * -msse4.2 and the binary still runs on CPUs without it.
 *
 * One crc32q waits for the previous one (3 cycles of latency, one issued per
 * cycle), so a single stream runs at a third of what the unit can do.  Long
 * inputs are cut into three blocks CRC'd side by side, each from zero, and
 * joined: the register is linear, so CRC(A||B) from state s is
 * Z(CRC(A) from s) ^ (CRC(B) from 0), where Z feeds |B| zero bytes; for the
 * two block sizes used, Z is a table of four 256-entry slices built once.
 */
#include "eng_crc32c.h"

#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#define POLY 0x82F63B78u

static uint32_t table[8][256];
static pthread_once_t table_once = PTHREAD_ONCE_INIT;

static void build_tables(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = (c & 1) ? (c >> 1) ^ POLY : c >> 1;
        table[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; i++)
        for (int t = 1; t < 8; t++)
            table[t][i] = (table[t - 1][i] >> 8) ^ table[0][table[t - 1][i] & 0xff];
}

uint32_t eng_crc32c_sw(uint32_t crc, const void *data, size_t len)
{
    pthread_once(&table_once, build_tables);
    const uint8_t *p = data;
    uint32_t c = ~crc;
    while (len >= 8) {
        uint32_t lo, hi;
        memcpy(&lo, p, 4);
        memcpy(&hi, p + 4, 4);
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
        lo = __builtin_bswap32(lo);
        hi = __builtin_bswap32(hi);
#endif
        lo ^= c;
        c = table[7][lo & 0xff] ^ table[6][(lo >> 8) & 0xff] ^ table[5][(lo >> 16) & 0xff] ^
            table[4][lo >> 24] ^ table[3][hi & 0xff] ^ table[2][(hi >> 8) & 0xff] ^
            table[1][(hi >> 16) & 0xff] ^ table[0][hi >> 24];
        p += 8;
        len -= 8;
    }
    while (len--)
        c = (c >> 8) ^ table[0][(c ^ *p++) & 0xff];
    return ~c;
}

#if defined(__x86_64__)
/* Block sizes of the three-way path: the long one for big batches (a 1 MiB
 * read, the cleaner's and recovery's scans), the short one down to inputs
 * of 768 bytes, where the two joins per round still cost little. */
#define LONG_BLOCK 8192u
#define SHORT_BLOCK 256u

static uint32_t shift_long[4][256], shift_short[4][256];
static pthread_once_t shift_once = PTHREAD_ONCE_INIT;

/* The register after len zero bytes, from state c (no inversions). */
static uint32_t feed_zeros(uint32_t c, size_t len)
{
    while (len--)
        c = (c >> 8) ^ table[0][c & 0xff];
    return c;
}

/* Z for `len` zero bytes as byte slices: Z is linear, so Z(x) is the XOR
 * of its images of x's set bits, grouped eight bits to a slice. */
static void build_shift(uint32_t t[4][256], size_t len)
{
    uint32_t image[32];
    for (int j = 0; j < 32; j++)
        image[j] = feed_zeros(1u << j, len);
    for (int k = 0; k < 4; k++) {
        for (int b = 0; b < 256; b++) {
            uint32_t v = 0;
            for (int j = 0; j < 8; j++)
                if ((b >> j) & 1)
                    v ^= image[8 * k + j];
            t[k][b] = v;
        }
    }
}

static void build_shifts(void)
{
    pthread_once(&table_once, build_tables);
    build_shift(shift_long, LONG_BLOCK);
    build_shift(shift_short, SHORT_BLOCK);
}

static inline uint32_t shift(const uint32_t t[4][256], uint32_t c)
{
    return t[0][c & 0xff] ^ t[1][(c >> 8) & 0xff] ^ t[2][(c >> 16) & 0xff] ^ t[3][c >> 24];
}

/* Consumes rounds of three `block`-byte blocks from *pp while they last. */
__attribute__((target("sse4.2"))) static uint64_t crc_3way(uint64_t c0, const uint8_t **pp,
                                                           size_t *lenp, size_t block,
                                                           const uint32_t t[4][256])
{
    const uint8_t *p = *pp;
    size_t len = *lenp;
    while (len >= 3 * block) {
        uint64_t c1 = 0, c2 = 0;
        const uint8_t *end = p + block;
        do {
            uint64_t v0, v1, v2;
            memcpy(&v0, p, 8);
            memcpy(&v1, p + block, 8);
            memcpy(&v2, p + 2 * block, 8);
            c0 = __builtin_ia32_crc32di(c0, v0);
            c1 = __builtin_ia32_crc32di(c1, v1);
            c2 = __builtin_ia32_crc32di(c2, v2);
            p += 8;
        } while (p < end);
        c0 = shift(t, (uint32_t)c0) ^ (uint32_t)c1;
        c0 = shift(t, (uint32_t)c0) ^ (uint32_t)c2;
        p += 2 * block;
        len -= 3 * block;
    }
    *pp = p;
    *lenp = len;
    return c0;
}

__attribute__((target("sse4.2"))) uint32_t eng_crc32c_hw(uint32_t crc, const void *data, size_t len)
{
    const uint8_t *p = data;
    uint64_t c = ~crc;
    if (len >= 3 * SHORT_BLOCK) {
        pthread_once(&shift_once, build_shifts);
        c = crc_3way(c, &p, &len, LONG_BLOCK, shift_long);
        c = crc_3way(c, &p, &len, SHORT_BLOCK, shift_short);
    }
    while (len >= 8) {
        uint64_t v;
        memcpy(&v, p, 8);
        c = __builtin_ia32_crc32di(c, v);
        p += 8;
        len -= 8;
    }
    uint32_t c32 = (uint32_t)c;
    while (len--)
        c32 = __builtin_ia32_crc32qi(c32, *p++);
    return ~c32;
}

bool eng_crc32c_hw_available(void)
{
    /* Atomic: the first appends of several HTTP threads ask at once (a plain
     * int was a data race, harmless on x86 but undefined in C11, and
     * ThreadSanitizer said so). */
    static _Atomic int cached = -1;
    int v = atomic_load_explicit(&cached, memory_order_relaxed);
    if (v < 0) {
        v = __builtin_cpu_supports("sse4.2") ? 1 : 0;
        atomic_store_explicit(&cached, v, memory_order_relaxed);
    }
    return v == 1;
}
#else
uint32_t eng_crc32c_hw(uint32_t crc, const void *data, size_t len)
{
    return eng_crc32c_sw(crc, data, len);
}

bool eng_crc32c_hw_available(void)
{
    return false;
}
#endif

uint32_t eng_crc32c(uint32_t crc, const void *data, size_t len)
{
    if (eng_crc32c_hw_available())
        return eng_crc32c_hw(crc, data, len);
    return eng_crc32c_sw(crc, data, len);
}
