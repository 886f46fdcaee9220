/*
 * fuzz_support.h - what the fuzz targets share: the invariant check, the
 * scratch directory, recomputed CRCs and the per-partition offsets compared
 * across a clean restart.  Each target is one translation unit, so these
 * are static inline.
 */
#ifndef FUZZ_SUPPORT_H
#define FUZZ_SUPPORT_H

#include "eng_batch.h"
#include "eng_manager.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* An invariant the engine must keep whatever the input: abort, so the
 * fuzzer saves the input (the file name says which target). */
#define CHECK(cond)                                                                              \
    do {                                                                                         \
        if (!(cond)) {                                                                           \
            fprintf(stderr, "%s:%d: invariant failed: %s\n", __FILE__, __LINE__, #cond);        \
            abort();                                                                             \
        }                                                                                        \
    } while (0)

/* Creates root (cap bytes) as logstore-fuzz-<name>-XXXXXX, on /dev/shm when
 * it can be written: runs rewrite files thousands of times a second. */
static inline void fuzz_make_root(char *root, size_t cap, const char *name)
{
    const char *base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
    snprintf(root, cap, "%s/logstore-fuzz-%s-XXXXXX", base, name);
    if (!mkdtemp(root)) {
        perror("mkdtemp");
        abort();
    }
}

/* Recomputes the CRC of each whole batch at the start of buf[0, size), so
 * a mutation reaches what follows the CRC check; returns whether any
 * changed. */
static inline bool fuzz_fix_crcs(uint8_t *buf, size_t size)
{
    bool changed = false;
    size_t pos = 0;
    eng_batch_header h;
    while (size - pos >= ENG_BATCH_OVERHEAD &&
           eng_batch_header_decode(buf + pos, size - pos, &h) == 0 &&
           eng_batch_size(&h) >= ENG_BATCH_OVERHEAD && eng_batch_size(&h) <= size - pos) {
        if (eng_batch_compute_crc(buf + pos, eng_batch_size(&h)) != h.crc) {
            eng_batch_update_crc(buf + pos, eng_batch_size(&h));
            changed = true;
        }
        pos += eng_batch_size(&h);
    }
    return changed;
}

/* A partition's offsets, compared before and after a clean restart. */
typedef struct part_state {
    char topic[ENG_TOPIC_NAME_MAX + 1];
    int32_t id;
    int64_t lso, leo;
} part_state;

/* qsort order: by topic, then partition. */
static inline int cmp_part(const void *a, const void *b)
{
    const part_state *x = a, *y = b;
    int c = strcmp(x->topic, y->topic);
    return c ? c : (x->id > y->id) - (x->id < y->id);
}

#endif
