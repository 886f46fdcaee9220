/*
 * eng_checkpoint.h - Kafka's offset checkpoint files (kafka-format.md §11).
 *
 *   0\n<entry count>\n<topic> <partition> <offset>\n...
 *
 * Used for recovery-point-offset-checkpoint, log-start-offset-checkpoint and
 * cleaner-offset-checkpoint.  Written durably (tmp, fsync, rename, fsync
 * dir).  A file that does not parse exactly (version, count, fields) is
 * reported as ENG_ECORRUPT and must be treated as absent, never trusted.
 */
#ifndef ENG_CHECKPOINT_H
#define ENG_CHECKPOINT_H

#include <stddef.h>
#include <stdint.h>

typedef struct eng_ckpt_entry {
    char *topic; /* owned */
    int32_t partition;
    int64_t offset;
} eng_ckpt_entry;

typedef struct eng_ckpt {
    eng_ckpt_entry *entries;
    size_t n;
} eng_ckpt;

/* Reads path into out (caller frees with eng_checkpoint_free).  -ENOENT if
 * the file is missing, ENG_ECORRUPT if it does not parse. */
int eng_checkpoint_read(const char *path, eng_ckpt *out);

/* Writes entries durably. */
int eng_checkpoint_write(const char *path, const eng_ckpt_entry *entries, size_t n);

/* Offset recorded for topic/partition, or dflt. */
int64_t eng_checkpoint_find(const eng_ckpt *c, const char *topic, int32_t partition, int64_t dflt);

void eng_checkpoint_free(eng_ckpt *c);

#endif
