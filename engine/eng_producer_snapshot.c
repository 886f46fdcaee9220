/*
 * eng_producer_snapshot.c - producer state snapshot files, Kafka's
 * ProducerSnapshot v1 (kafka-format.md §12): big-endian, a CRC-32C over
 * everything after it, 46 bytes an entry.  Only each producer's last batch
 * is saved, as Kafka saves it, so a retry of an older batch is found only
 * while the process that appended it runs.
 */
#include "eng_crc32c.h"
#include "eng_endian.h"
#include "eng_fault.h"
#include "eng_fs.h"
#include "eng_logger.h"
#include "eng_producer.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define SNAP_HEADER 10
#define SNAP_ENTRY 46
#define SNAP_VERSION 1
/* About 23 million producers: a state of more is not one we wrote (each
 * costs over 200 bytes of memory as well: a 200-byte entry and its index
 * slots). */
#define SNAP_MAX_BYTES (1024u << 20)

/* Orders encoded entries by their leading producer id. */
static int cmp_entry_id(const void *a, const void *b)
{
    int64_t x = (int64_t)eng_be64(a), y = (int64_t)eng_be64(b);
    return x < y ? -1 : x > y;
}

int eng_producers_encode(const eng_producers *st, uint8_t **out, size_t *len)
{
    size_t n = SNAP_HEADER + st->n * SNAP_ENTRY;
    uint8_t *b = malloc(n);
    if (!b)
        return -ENOMEM;
    eng_put_be16(b, SNAP_VERSION);
    eng_put_be32(b + 6, (uint32_t)st->n);
    uint8_t *p = b + SNAP_HEADER;
    for (size_t i = 0; i < st->n; i++, p += SNAP_ENTRY) {
        const eng_producer_entry *e = &st->entries[i];
        const eng_producer_batch *last = e->nbatches ? &e->batches[e->nbatches - 1] : NULL;
        eng_put_be64(p, (uint64_t)e->producer_id);
        eng_put_be16(p + 8, (uint16_t)e->epoch);
        eng_put_be32(p + 10, (uint32_t)(last ? last->last_seq : -1));
        eng_put_be64(p + 14, (uint64_t)(last ? last->last_offset : -1));
        eng_put_be32(p + 22, (uint32_t)(last ? last->offset_delta : 0));
        eng_put_be64(p + 26, (uint64_t)e->last_timestamp);
        eng_put_be32(p + 34, (uint32_t)e->coordinator_epoch);
        eng_put_be64(p + 38, (uint64_t)e->txn_first_offset);
    }
    /* By id, so that the same state always makes the same file. */
    qsort(b + SNAP_HEADER, st->n, SNAP_ENTRY, cmp_entry_id);
    eng_put_be32(b + 2, eng_crc32c(0, b + 6, n - 6));
    *out = b;
    *len = n;
    return 0;
}

int eng_producers_decode(eng_producers *st, const uint8_t *buf, size_t len)
{
    eng_producers_free(st);
    if (len < SNAP_HEADER || eng_be16(buf) != SNAP_VERSION)
        return ENG_ECORRUPT;
    if (eng_be32(buf + 2) != eng_crc32c(0, buf + 6, len - 6))
        return ENG_ECORRUPT;
    int32_t count = (int32_t)eng_be32(buf + 6);
    if (count < 0 || (size_t)count != (len - SNAP_HEADER) / SNAP_ENTRY ||
        (len - SNAP_HEADER) % SNAP_ENTRY)
        return ENG_ECORRUPT;
    if (count == 0)
        return 0;
    if (!(st->entries = malloc((size_t)count * sizeof *st->entries)))
        return -ENOMEM;
    st->cap = (size_t)count;
    const uint8_t *p = buf + SNAP_HEADER;
    for (int32_t i = 0; i < count; i++, p += SNAP_ENTRY) {
        eng_producer_entry e = {.producer_id = (int64_t)eng_be64(p),
                                .epoch = (int16_t)eng_be16(p + 8),
                                .last_timestamp = (int64_t)eng_be64(p + 26),
                                .coordinator_epoch = (int32_t)eng_be32(p + 34),
                                .txn_first_offset = (int64_t)eng_be64(p + 38)};
        int64_t last_offset = (int64_t)eng_be64(p + 14);
        if (last_offset >= 0) {
            e.nbatches = 1;
            e.batches[0] = (eng_producer_batch){.last_seq = (int32_t)eng_be32(p + 10),
                                                .last_offset = last_offset,
                                                .offset_delta = (int32_t)eng_be32(p + 22),
                                                .timestamp = e.last_timestamp};
        }
        if (e.producer_id < 0) {
            eng_producers_free(st);
            return ENG_ECORRUPT;
        }
        st->entries[st->n++] = e;
    }
    /* Kafka writes its producers in a Java HashMap's order, not by id,
     * and any order reads; an id twice is no file Kafka or we wrote. */
    int rc = eng_producers_reindex(st);
    if (rc)
        eng_producers_free(st);
    return rc;
}

int eng_producers_write_snapshot(const eng_producers *st, const char *dir, int64_t offset,
                                 bool sync)
{
    char path[PATH_MAX];
    int rc = eng_fs_segment_path(path, sizeof path, dir, offset, ".snapshot");
    if (rc)
        return rc;
    uint8_t *buf;
    size_t len;
    if ((rc = eng_producers_encode(st, &buf, &len)))
        return rc;
    /* Unsynced at a roll, which must not wait for the disk: the flush-log
     * job the roll schedules syncs it (eng_producers_sync_snapshot) before
     * the recovery point passes it, as Kafka's flushProducerStateSnapshot
     * does.  A snapshot torn by a power loss before then fails its CRC at
     * the next start and the state is rebuilt from the one before it and
     * the log.  The stop's is synced with its directory here: the
     * clean-shutdown marker written after it says "no scan needed". */
    rc = eng_fs_write_replace(path, buf, len, sync);
    free(buf);
    return rc;
}

int eng_producers_sync_snapshot(const char *dir, int64_t offset)
{
    char path[PATH_MAX];
    int rc = eng_fs_segment_path(path, sizeof path, dir, offset, ".snapshot");
    if (rc)
        return rc;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return errno == ENOENT ? 0 : -errno;
    rc = ENG_FAULT("snapshot.sync");
    if (!rc && fsync(fd) < 0)
        rc = -errno;
    close(fd);
    return rc;
}

/* The offset a file's name gives, or -1 when name is not "<20 digits>"
 * followed by suffix. */
static int64_t named_offset(const char *name, const char *suffix)
{
    const char *rest;
    int64_t off = eng_fs_segment_name_base(name, &rest);
    return off >= 0 && !strcmp(rest, suffix) ? off : -1;
}

/* The offset a snapshot file's name gives, or -1. */
static int64_t snapshot_offset(const char *name)
{
    return named_offset(name, ".snapshot");
}

static void remove_snapshot(const char *dir, int64_t offset, const char *why)
{
    char path[PATH_MAX];
    if (eng_fs_segment_path(path, sizeof path, dir, offset, ".snapshot"))
        return;
    if (unlink(path) < 0 && errno != ENOENT)
        ENG_WARN("removing %s (%s): %s", path, why, strerror(errno));
}

/* The largest snapshot offset of dir at or below `below`, or -1; those
 * above `end` (the log end) are removed.  *seen is set when dir holds any
 * snapshot. */
static int latest_at_most(const char *dir, int64_t below, int64_t end, int64_t *best, bool *seen)
{
    *best = -1;
    DIR *dh = opendir(dir);
    if (!dh)
        return -errno;
    struct dirent *e;
    while ((e = readdir(dh))) {
        int64_t off = snapshot_offset(e->d_name);
        if (off < 0)
            continue;
        *seen = true;
        if (off > end)
            remove_snapshot(dir, off, "past the log end");
        else if (off <= below && off > *best)
            *best = off;
    }
    closedir(dh);
    return 0;
}

int eng_producers_load_latest(eng_producers *st, const char *dir, int64_t max_offset,
                              int64_t now_ms, int64_t expiration_ms, int64_t *at, bool *found)
{
    eng_producers_free(st);
    *at = -1;
    bool seen = false;
    if (!found)
        found = &seen;
    *found = false;
    /* Lowered past each snapshot that fails, without taking it for one
     * past the log end. */
    int64_t below = max_offset;
    for (;;) {
        int64_t off;
        int rc = latest_at_most(dir, below, max_offset, &off, found);
        if (rc || off < 0)
            return rc;
        char path[PATH_MAX];
        if ((rc = eng_fs_segment_path(path, sizeof path, dir, off, ".snapshot")))
            return rc;
        char *buf;
        size_t len;
        rc = eng_fs_read_file(path, SNAP_MAX_BYTES, &buf, &len);
        if (rc == -ENOMEM)
            return rc;
        if (!rc) {
            rc = eng_producers_decode(st, (const uint8_t *)buf, len);
            free(buf);
            if (rc == -ENOMEM)
                return rc;
        }
        if (!rc) {
            eng_producers_expire(st, now_ms, expiration_ms);
            *at = off;
            return 0;
        }
        /* Only a file that reads but does not decode is deleted (Kafka's
         * CorruptSnapshotException): one this process could not read (out
         * of descriptors, an I/O error) may be good next time. */
        bool corrupt = rc == ENG_ECORRUPT;
        ENG_WARN("%s: unreadable producer snapshot (%s); %s and rebuilding from the log", path,
                 eng_strerror(rc), corrupt ? "deleting it" : "passing over it");
        if (corrupt)
            remove_snapshot(dir, off, "does not decode");
        below = off - 1;
    }
}

static bool names_segment(const int64_t *bases, size_t n, int64_t off)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (bases[mid] < off)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < n && bases[lo] == off;
}

void eng_producers_remove_stray(const char *dir, const int64_t *bases, size_t n, int64_t keep)
{
    DIR *dh = opendir(dir);
    if (!dh)
        return;
    struct dirent *e;
    while ((e = readdir(dh))) {
        int64_t off = snapshot_offset(e->d_name);
        if (off >= 0 && off != keep && !names_segment(bases, n, off)) {
            remove_snapshot(dir, off, "named by no segment");
        } else if (named_offset(e->d_name, ".snapshot.tmp") >= 0) {
            char path[PATH_MAX];
            if (eng_fs_join(path, sizeof path, dir, e->d_name) == 0 && unlink(path) < 0 &&
                errno != ENOENT)
                ENG_WARN("removing %s (an interrupted write): %s", path, strerror(errno));
        }
    }
    closedir(dh);
}
