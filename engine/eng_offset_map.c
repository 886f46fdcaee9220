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
#include <sys/mman.h>

/* In memory only, so native byte order: the hash as two words, then the
 * offset; 24 bytes, as DESIGN counts them. */
typedef struct slot {
    uint64_t h[2];
    int64_t offset;
} slot;

_Static_assert(sizeof(slot) == ENG_OFFSET_MAP_SLOT, "a slot is 24 bytes");

struct eng_offset_map {
    slot *slots;
    size_t nslots;
    size_t max_entries;
    size_t size;
    int64_t latest;
    void *mapping;  /* large tables: the anonymous mapping holding slots */
    size_t mapping_len;
    EVP_MD_CTX *ctx;
    EVP_MD *md5;
};

#define HUGE_PAGE ((size_t)2 << 20)

/* Probes land anywhere in the table: with 4 KiB pages a large table misses
 * the TLB on nearly every probe (Kafka's default 128 MiB buffer is 32,768
 * pages), so a table of several huge pages asks for them.  Anonymous memory
 * is zero, which is what an empty table is. */
static int alloc_slots(eng_offset_map *m)
{
    size_t bytes = m->nslots * sizeof *m->slots;
    if (bytes < 2 * HUGE_PAGE) {
        m->slots = calloc(m->nslots, sizeof *m->slots);
        return m->slots ? 0 : -ENOMEM;
    }
    /* One spare huge page so the table can start on a huge-page boundary. */
    size_t len = (bytes + HUGE_PAGE - 1) / HUGE_PAGE * HUGE_PAGE + HUGE_PAGE;
    void *base = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (base == MAP_FAILED)
        return -ENOMEM;
    uintptr_t at = ((uintptr_t)base + HUGE_PAGE - 1) & ~(uintptr_t)(HUGE_PAGE - 1);
    (void)madvise((void *)at, len - (at - (uintptr_t)base), MADV_HUGEPAGE); /* a hint only */
    m->mapping = base;
    m->mapping_len = len;
    m->slots = (slot *)at;
    return 0;
}

int eng_offset_map_new(size_t bytes, double load_factor, eng_offset_map **out)
{
    eng_offset_map *m = calloc(1, sizeof *m);
    if (!m)
        return -ENOMEM;
    m->nslots = bytes / ENG_OFFSET_MAP_SLOT;
    /* At least two slots.  With
     * one slot holding one key, every probe for another key lands on that
     * slot forever, so get and put never returned (reachable with
     * log.cleaner.dedupe.buffer.size / log.cleaner.threads < 48 bytes). */
    if (m->nslots < 2)
        m->nslots = 2;
    /* Probe windows are 31 bits wide; more slots could not be reached. */
    if (m->nslots > INT32_MAX)
        m->nslots = INT32_MAX;
    if (load_factor <= 0 || load_factor > 1)
        load_factor = 0.9;
    m->max_entries = (size_t)((double)m->nslots * load_factor);
    if (m->max_entries == 0)
        m->max_entries = 1;
    if (m->max_entries >= m->nslots)
        m->max_entries = m->nslots - (m->nslots > 1);
    if (alloc_slots(m) != 0) {
        eng_offset_map_free(m);
        return -ENOMEM;
    }
    m->ctx = EVP_MD_CTX_new();
    m->md5 = EVP_MD_fetch(NULL, "MD5", NULL);
    if (!m->ctx || !m->md5) {
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
    if (m->mapping)
        munmap(m->mapping, m->mapping_len);
    else
        free(m->slots);
    EVP_MD_CTX_free(m->ctx);
    EVP_MD_free(m->md5);
    free(m);
}

void eng_offset_map_clear(eng_offset_map *m)
{
    /* An empty map (a new one is zero) need not touch every page again. */
    if (m->size)
        memset(m->slots, 0, m->nslots * sizeof *m->slots);
    m->size = 0;
    m->latest = -1;
}

void eng_offset_map_hash(eng_offset_map *m, const uint8_t *key, size_t len, eng_key_hash *out)
{
    unsigned int n = 16;
    if (!EVP_DigestInit_ex2(m->ctx, m->md5, NULL) || !EVP_DigestUpdate(m->ctx, key, len) ||
        !EVP_DigestFinal_ex(m->ctx, out->b, &n))
        memset(out->b, 0, 16); /* unreachable with a working libcrypto; keys then collide */
}

/* Slot index for probe number `attempt`, shaped like Kafka's positionOf:
 * successive 4-byte windows of the hash, then linear steps from the last.
 * A window is reduced to the table by multiply-shift, not a division, which
 * costs as much as the cache hit it leads to. */
static size_t position_of(const eng_offset_map *m, const eng_key_hash *h, uint32_t attempt)
{
    uint32_t window = eng_be32(h->b + (attempt < 12 ? attempt : 12)) & 0x7fffffffu;
    size_t pos = (size_t)(((uint64_t)window * m->nslots) >> 31);
    if (attempt > 12)
        pos = (pos + (attempt - 12)) % m->nslots;
    return pos;
}

static slot *slot_at(const eng_offset_map *m, const eng_key_hash *h, uint32_t attempt)
{
    return &m->slots[position_of(m, h, attempt)];
}

static bool slot_empty(const slot *s)
{
    return (s->h[0] | s->h[1] | (uint64_t)s->offset) == 0;
}

static bool slot_holds(const slot *s, const eng_key_hash *h)
{
    uint64_t w[2];
    memcpy(w, h->b, sizeof w);
    return s->h[0] == w[0] && s->h[1] == w[1];
}

void eng_offset_map_prefetch(const eng_offset_map *m, const eng_key_hash *h)
{
    /* A 24-byte slot can straddle two cache lines. */
    const char *s = (const char *)slot_at(m, h, 0);
    __builtin_prefetch(s);
    __builtin_prefetch(s + sizeof(slot) - 1);
}

bool eng_offset_map_put_hashed(eng_offset_map *m, const eng_key_hash *h, int64_t offset)
{
    for (uint32_t attempt = 0;; attempt++) {
        slot *s = slot_at(m, h, attempt);
        if (slot_empty(s)) {
            if (m->size >= m->max_entries)
                return false;
            memcpy(s->h, h->b, sizeof s->h);
            s->offset = offset;
            m->size++;
            break;
        }
        if (slot_holds(s, h)) {
            s->offset = offset;
            break;
        }
    }
    eng_offset_map_update_latest(m, offset);
    return true;
}

int64_t eng_offset_map_get_hashed(const eng_offset_map *m, const eng_key_hash *h)
{
    /* The map is never full (size < slots), so the probe ends at an empty slot. */
    for (uint32_t attempt = 0;; attempt++) {
        const slot *s = slot_at(m, h, attempt);
        if (slot_empty(s))
            return -1;
        if (slot_holds(s, h))
            return s->offset;
    }
}

bool eng_offset_map_put(eng_offset_map *m, const uint8_t *key, size_t len, int64_t offset)
{
    eng_key_hash h;
    eng_offset_map_hash(m, key, len, &h);
    return eng_offset_map_put_hashed(m, &h, offset);
}

int64_t eng_offset_map_get(eng_offset_map *m, const uint8_t *key, size_t len)
{
    eng_key_hash h;
    eng_offset_map_hash(m, key, len, &h);
    return eng_offset_map_get_hashed(m, &h);
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
