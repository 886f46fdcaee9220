/*
 * eng_crc32c.c - CRC-32C with a hardware path and a table path.
 *
 * The table path is slicing-by-8 (eight 256-entry tables built once under
 * pthread_once).  The hardware path feeds 8 bytes per crc32q instruction; it
 * is compiled with a target attribute so the rest of the engine does not need
 * -msse4.2 and the binary still runs on CPUs without it.
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
__attribute__((target("sse4.2"))) uint32_t eng_crc32c_hw(uint32_t crc, const void *data, size_t len)
{
    const uint8_t *p = data;
    uint64_t c = ~crc;
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
