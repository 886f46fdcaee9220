/*
 * eng_offset_map.h - the cleaner's key -> last offset map (Kafka's
 * SkimpyOffsetMap).
 *
 * One preallocated buffer of 24-byte slots: the MD5 of the key (16 bytes)
 * and the offset (8 bytes).  Open addressing: the probe sequence reads
 * successive 4-byte windows of the hash, then steps linearly, as Kafka does.
 * A probe into a large map is a cache miss; callers with many keys at hand
 * hash them all and prefetch their slots first, so the misses overlap.
 * The map holds at most slots x load factor keys; past that it reports full
 * and the cleaner cleans up to where it got.  Memory is fixed at creation
 * whatever the keys' sizes.  Not thread-safe: one map per cleaner thread.
 */
#ifndef ENG_OFFSET_MAP_H
#define ENG_OFFSET_MAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define ENG_OFFSET_MAP_SLOT 24
/* Keys a caller hashes and prefetches ahead of their probes: enough misses
 * in flight to overlap, few enough to stay in L1. */
#define ENG_OFFSET_MAP_CHUNK 16

typedef struct eng_offset_map eng_offset_map;

/* A map using `bytes` bytes of slots (rounded down to whole slots, at least
 * two) and accepting up to slots x load_factor keys (at least one, always
 * fewer than the slots, so every probe ends at an empty slot). */
int eng_offset_map_new(size_t bytes, double load_factor, eng_offset_map **out);
void eng_offset_map_free(eng_offset_map *m);

void eng_offset_map_clear(eng_offset_map *m);

typedef struct eng_key_hash {
    uint8_t b[16];
} eng_key_hash;

/* MD5 of the key. */
void eng_offset_map_hash(eng_offset_map *m, const uint8_t *key, size_t len, eng_key_hash *out);
/* Starts loading the slot the first probe for h reads. */
void eng_offset_map_prefetch(const eng_offset_map *m, const eng_key_hash *h);
bool eng_offset_map_put_hashed(eng_offset_map *m, const eng_key_hash *h, int64_t offset);
int64_t eng_offset_map_get_hashed(const eng_offset_map *m, const eng_key_hash *h);

/* Records key -> offset; false when the map already holds its maximum. */
bool eng_offset_map_put(eng_offset_map *m, const uint8_t *key, size_t len, int64_t offset);

/* Last offset recorded for key, or -1. */
int64_t eng_offset_map_get(eng_offset_map *m, const uint8_t *key, size_t len);

/* Highest offset the map covers (set by put and by the cleaner for batches
 * without keys); -1 when empty. */
int64_t eng_offset_map_latest(const eng_offset_map *m);
void eng_offset_map_update_latest(eng_offset_map *m, int64_t offset);

size_t eng_offset_map_size(const eng_offset_map *m);
size_t eng_offset_map_slots(const eng_offset_map *m);
size_t eng_offset_map_max_entries(const eng_offset_map *m);
bool eng_offset_map_full(const eng_offset_map *m);
/* size / slots */
double eng_offset_map_utilization(const eng_offset_map *m);

#endif
