/*
 * eng_offset_map.c - MD5-keyed open-addressing map in one fixed buffer.
 *
 * An empty slot is all zeros (hash and offset); a real key whose MD5 and
 * offset are both zero cannot be told apart, exactly as in Kafka, with a
 * probability not worth a byte per slot.
 */
#include "eng_offset_map.h"

#include "eng_endian.h"

#include <errno.h>
#include <openssl/evp.h>
#include <stdlib.h>
#include <string.h>

struct eng_offset_map {
    uint8_t *slots;
    size_t nslots;
    size_t max_entries;
    size_t size;
    int64_t latest;
    EVP_MD_CTX *ctx;
    EVP_MD *md5;
};

int eng_offset_map_new(size_t bytes, double load_factor, eng_offset_map **out)
{
    eng_offset_map *m = calloc(1, sizeof *m);
    if (!m)
        return -ENOMEM;
    m->nslots = bytes / ENG_OFFSET_MAP_SLOT;
    /* Fix (found by tests/unit/test_compact.c): at least two slots.  With
     * one slot holding one key, every probe for another key lands on that
     * slot forever, so get and put never returned (reachable with
     * log.cleaner.dedupe.buffer.size / log.cleaner.threads < 48 bytes). */
    if (m->nslots < 2)
        m->nslots = 2;
    if (load_factor <= 0 || load_factor > 1)
        load_factor = 0.9;
    m->max_entries = (size_t)((double)m->nslots * load_factor);
    if (m->max_entries == 0)
        m->max_entries = 1;
    if (m->max_entries >= m->nslots)
        m->max_entries = m->nslots - (m->nslots > 1);
    m->slots = calloc(m->nslots, ENG_OFFSET_MAP_SLOT);
    m->ctx = EVP_MD_CTX_new();
    m->md5 = EVP_MD_fetch(NULL, "MD5", NULL);
    if (!m->slots || !m->ctx || !m->md5) {
        eng_offset_map_free(m);
        return -ENOMEM;
    }
    m->latest = -1;
    *out = m;
    return 0;
}

void eng_offset_map_free(eng_offset_map *m)
{
    if (!m)
        return;
    free(m->slots);
    EVP_MD_CTX_free(m->ctx);
    EVP_MD_free(m->md5);
    free(m);
}

void eng_offset_map_clear(eng_offset_map *m)
{
    memset(m->slots, 0, m->nslots * ENG_OFFSET_MAP_SLOT);
    m->size = 0;
    m->latest = -1;
}

static void hash_key(eng_offset_map *m, const uint8_t *key, size_t len, uint8_t out[16])
{
    unsigned int n = 16;
    if (!EVP_DigestInit_ex2(m->ctx, m->md5, NULL) || !EVP_DigestUpdate(m->ctx, key, len) ||
        !EVP_DigestFinal_ex(m->ctx, out, &n))
        memset(out, 0, 16); /* unreachable with a working libcrypto; keys then collide */
}

/* Slot index for probe number `attempt` (Kafka's positionOf). */
static size_t position_of(const eng_offset_map *m, const uint8_t hash[16], uint32_t attempt)
{
    uint32_t at = attempt < 12 ? attempt : 12;
    /* Java int arithmetic wraps: add in unsigned, then read as signed. */
    int32_t probe = (int32_t)(eng_be32(hash + at) + (attempt > 12 ? attempt - 12 : 0));
    uint32_t abs = probe == INT32_MIN ? 0 : (uint32_t)(probe < 0 ? -probe : probe);
    return abs % m->nslots;
}

static bool slot_empty(const uint8_t *s)
{
    static const uint8_t zero[ENG_OFFSET_MAP_SLOT];
    return memcmp(s, zero, ENG_OFFSET_MAP_SLOT) == 0;
}

bool eng_offset_map_put(eng_offset_map *m, const uint8_t *key, size_t len, int64_t offset)
{
    uint8_t h[16];
    hash_key(m, key, len, h);
    for (uint32_t attempt = 0;; attempt++) {
        uint8_t *s = m->slots + position_of(m, h, attempt) * ENG_OFFSET_MAP_SLOT;
        if (slot_empty(s)) {
            if (m->size >= m->max_entries)
                return false;
            memcpy(s, h, 16);
            eng_put_be64(s + 16, (uint64_t)offset);
            m->size++;
            break;
        }
        if (memcmp(s, h, 16) == 0) {
            eng_put_be64(s + 16, (uint64_t)offset);
            break;
        }
    }
    if (offset > m->latest)
        m->latest = offset;
    return true;
}

int64_t eng_offset_map_get(eng_offset_map *m, const uint8_t *key, size_t len)
{
    uint8_t h[16];
    hash_key(m, key, len, h);
    /* The map is never full (size < slots), so the probe ends at an empty slot. */
    for (uint32_t attempt = 0;; attempt++) {
        const uint8_t *s = m->slots + position_of(m, h, attempt) * ENG_OFFSET_MAP_SLOT;
        if (slot_empty(s))
            return -1;
        if (memcmp(s, h, 16) == 0)
            return (int64_t)eng_be64(s + 16);
    }
}

int64_t eng_offset_map_latest(const eng_offset_map *m)
{
    return m->latest;
}

void eng_offset_map_update_latest(eng_offset_map *m, int64_t offset)
{
    if (offset > m->latest)
        m->latest = offset;
}

size_t eng_offset_map_size(const eng_offset_map *m)
{
    return m->size;
}

size_t eng_offset_map_slots(const eng_offset_map *m)
{
    return m->nslots;
}

size_t eng_offset_map_max_entries(const eng_offset_map *m)
{
    return m->max_entries;
}

bool eng_offset_map_full(const eng_offset_map *m)
{
    return m->size >= m->max_entries;
}

double eng_offset_map_utilization(const eng_offset_map *m)
{
    return (double)m->size / (double)m->nslots;
}
