/*
 * eng_index.c - offset and time indexes over an mmap'd, preallocated file.
 *
 * Lookups follow Kafka's AbstractIndex.indexSlotRangeFor: the last 8 KiB of
 * entries (the "warm" tail, the part consumers near the head touch) are
 * searched first when the target falls there, so a tailing read touches the
 * same few pages every time; older targets search the rest.
 *
 * Writers are serialized by the owning segment (one appender per partition);
 * readers rely only on the release/acquire pair on `entries`.
 *
 * Entries are written through the mapping (as Kafka's MappedByteBuffer
 * does), not with a pwrite each: that system call was a sixth of an engine
 * append of a 2.7 KB batch.  A store into a shared mapping cannot report
 * an error: a page whose blocks cannot be allocated (a full disk) raises
 * SIGBUS.  So the file's blocks are reserved ahead of the entries with
 * posix_fallocate, INDEX_RESERVE bytes at a time; a reservation that fails
 * fails the append, as the pwrite did, and the store only ever lands on
 * allocated blocks.
 *
 * That holds only where a block the file has is overwritten where it is:
 * ext2/3/4 and tmpfs.  btrfs writes every rewritten block somewhere new,
 * and XFS does for blocks shared with a reflinked copy (what a plain cp
 * makes there since coreutils 9), so a store into a page already written
 * needs new room whatever was reserved, and on a full disk was SIGBUS.
 * Elsewhere, unknown file systems included, entries are written with
 * pwrite, which reports a full disk, and the mapping stays read-only.
 *
 * Only a writable index keeps its file descriptor.  A read-only one closes it
 * once mapped, and a sealed one (its segment rolled) once its entries are on
 * disk, as Kafka's AbstractIndex does: a partition's old segments then cost
 * one descriptor each (the .log), not three.  sync_lock orders that close
 * against a concurrent fsync of the same descriptor.
 */
#include "eng_index.h"

#include "eng_endian.h"
#include "eng_error.h"
#include "eng_fault.h"
#include "eng_fs.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

struct eng_index {
    int fd;             /* -1 once closed (read-only, or sealed and synced) */
    pthread_mutex_t sync_lock;
    eng_index_kind kind;
    int64_t base_offset;
    uint8_t *map;       /* map_len bytes, writable if store_mapped; NULL if empty */
    size_t map_len;
    uint64_t reserved;  /* bytes from the start known to have blocks (writer only) */
    bool store_mapped;  /* entries stored through the map (see above), else with pwrite */
    uint32_t entry_size;
    /* Both change when a roll trims the index (eng_index_trim, under the
     * partition's append lock) while the segment listing and the index dump
     * read them with no lock: atomics, not torn or racing reads. */
    _Atomic uint32_t max_entries;
    _Atomic uint32_t entries;
    _Atomic uint64_t file_len;
    bool writable;      /* false once sealed (set under sync_lock): no more entries */
    _Atomic bool dirty; /* written since the last sync: a clean index needs no fsync */
};

static uint32_t entry_size_of(eng_index_kind kind)
{
    return kind == ENG_INDEX_OFFSET ? ENG_OFFSET_ENTRY_SIZE : ENG_TIME_ENTRY_SIZE;
}

/* Whether fd's file system overwrites a block where it is, so that blocks
 * reserved with posix_fallocate are all a store through the mapping can
 * need (see above).  EXT4_SUPER_MAGIC is ext2's and ext3's too. */
static bool overwrites_in_place(int fd)
{
    struct statfs sf;
    if (fstatfs(fd, &sf) != 0)
        return false;
    return sf.f_type == EXT4_SUPER_MAGIC || sf.f_type == TMPFS_MAGIC;
}

int eng_index_open(const char *path, eng_index_kind kind, int64_t base_offset, size_t max_bytes,
                   bool writable, eng_index **out)
{
    int rc;
    eng_index *idx = calloc(1, sizeof *idx);
    if (!idx)
        return -ENOMEM;
    idx->kind = kind;
    idx->base_offset = base_offset;
    idx->entry_size = entry_size_of(kind);
    idx->writable = writable;
    /* Exclusive first, to learn whether this open made the file: only a
     * file that was already there may wait for its first entry to grow. */
    bool created = false;
    idx->fd = -1;
    if (writable) {
        idx->fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
        created = idx->fd >= 0;
        if (idx->fd < 0 && errno != EEXIST) {
            rc = -errno;
            goto fail;
        }
    }
    if (idx->fd < 0)
        idx->fd = open(path, writable ? O_RDWR | O_CLOEXEC : O_RDONLY | O_CLOEXEC);
    if (idx->fd < 0) {
        rc = -errno;
        goto fail;
    }
    struct stat st;
    if (fstat(idx->fd, &st) < 0) {
        rc = -errno;
        goto fail;
    }
    uint64_t len = (uint64_t)st.st_size;
    /* A file left preallocated (a crash before the trim) is sparse past its
     * written entries, and entries are only ever written in order (with
     * pwrite, or stored through the mapping), so the first hole ends them.
     * Counting the holes as entries made the loader read them through the
     * map, and on tmpfs reading a hole of a shared map allocates a page:
     * with the file system full that is SIGBUS, and the server crashed at
     * every start until space was freed.  Where holes are not reported,
     * lseek gives the file's end and nothing changes.
     * Blocks reserved ahead of the entries (see above) but never written
     * are unwritten extents, which SEEK_HOLE reports as holes too. */
    off_t hole = lseek(idx->fd, 0, SEEK_HOLE);
    uint64_t data_len = hole >= 0 && (uint64_t)hole < len ? (uint64_t)hole : len;
    uint32_t existing = (uint32_t)(data_len / idx->entry_size);
    uint64_t map_len = len;
    bool grown_later = false;
    if (writable) {
        uint64_t want = (uint64_t)(max_bytes / idx->entry_size) * idx->entry_size;
        if (want < (uint64_t)existing * idx->entry_size)
            want = (uint64_t)existing * idx->entry_size;
        /* A file trimmed to its entries (a clean close, a roll) keeps its
         * size until an entry is added: expanding it here made every
         * clean stop trim and fsync both indexes of every idle partition
         * again, an ftruncate and two fdatasyncs each, whether or not
         * anything was appended (2,000 partitions stopped in 11 s).  The
         * map already spans the full size; nothing past the file's end is
         * touched before append_entry grows it. */
        grown_later = !created && len == (uint64_t)existing * idx->entry_size && len < want;
        if (!grown_later && want != len && ftruncate(idx->fd, (off_t)want) < 0) {
            rc = -errno;
            goto fail;
        }
        if (!grown_later)
            len = want;
        map_len = want;
    }
    idx->file_len = len;
    idx->max_entries = (uint32_t)(map_len / idx->entry_size);
    idx->store_mapped = writable && overwrites_in_place(idx->fd);
    /* An untouched file is as the last sync (or the loader, see
     * eng_segment_mark_unsynced) left it. */
    atomic_init(&idx->dirty, writable && !grown_later);
    atomic_store_explicit(&idx->entries, existing, memory_order_relaxed);
    if (map_len > 0) {
        /* mmap fails with ENOMEM once vm.max_map_count is reached */
        if ((rc = ENG_FAULT("index.map")) != 0)
            goto fail;
        idx->map = mmap(NULL, map_len, idx->store_mapped ? PROT_READ | PROT_WRITE : PROT_READ,
                        MAP_SHARED, idx->fd, 0);
        if (idx->map == MAP_FAILED) {
            idx->map = NULL;
            rc = -errno;
            goto fail;
        }
        idx->map_len = map_len;
        /* The first store into each page faults it in, and a fault reads
         * ahead: some hundred KiB of the unwritten tail, filled with zeros
         * and dropped again when a roll trims the file.  With 1 MiB
         * segments that churn halved the cleaner's speed; index pages are
         * only ever touched one at a time. */
        if (idx->store_mapped)
            (void)madvise(idx->map, map_len, MADV_RANDOM);
    }
    if (!writable) {
        close(idx->fd);
        idx->fd = -1;
    }
    pthread_mutex_init(&idx->sync_lock, NULL);
    *out = idx;
    return 0;
fail:
    if (idx->fd >= 0)
        close(idx->fd);
    free(idx);
    return rc;
}

int eng_index_new_empty(eng_index_kind kind, int64_t base_offset, eng_index **out)
{
    eng_index *idx = calloc(1, sizeof *idx);
    if (!idx)
        return -ENOMEM;
    idx->fd = -1;
    idx->kind = kind;
    idx->base_offset = base_offset;
    idx->entry_size = entry_size_of(kind);
    pthread_mutex_init(&idx->sync_lock, NULL);
    *out = idx;
    return 0;
}

void eng_index_close(eng_index *idx)
{
    if (!idx)
        return;
    if (idx->map)
        munmap(idx->map, idx->map_len);
    if (idx->fd >= 0)
        close(idx->fd);
    pthread_mutex_destroy(&idx->sync_lock);
    free(idx);
}

uint32_t eng_index_entries(const eng_index *idx)
{
    return atomic_load_explicit(&((eng_index *)idx)->entries, memory_order_acquire);
}

uint32_t eng_index_max_entries(const eng_index *idx)
{
    return idx->max_entries;
}

int64_t eng_index_base_offset(const eng_index *idx)
{
    return idx->base_offset;
}

uint64_t eng_index_file_bytes(const eng_index *idx)
{
    return idx->file_len;
}

bool eng_index_trimmed(const eng_index *idx)
{
    return atomic_load(&((eng_index *)idx)->file_len) ==
           (uint64_t)eng_index_entries(idx) * idx->entry_size;
}

bool eng_index_is_full(const eng_index *idx)
{
    uint32_t n = eng_index_entries(idx);
    if (idx->kind == ENG_INDEX_TIME)
        return idx->max_entries == 0 || n >= idx->max_entries - 1;
    return n >= idx->max_entries;
}

int eng_index_trim(eng_index *idx)
{
    uint64_t want = (uint64_t)eng_index_entries(idx) * idx->entry_size;
    if (want == idx->file_len) {
        /* Never grown since it was opened (see eng_index_open): nothing to
         * cut, and nothing for a sync to write. */
        idx->max_entries = eng_index_entries(idx);
        return 0;
    }
    if (idx->fd < 0)
        return ENG_EINVAL;
    if (ftruncate(idx->fd, (off_t)want) < 0)
        return -errno;
    idx->file_len = want;
    idx->max_entries = eng_index_entries(idx);
    atomic_store(&idx->dirty, true);
    return 0;
}

int eng_index_sync(eng_index *idx)
{
    pthread_mutex_lock(&idx->sync_lock);
    int rc = 0;
    if (atomic_exchange(&idx->dirty, false)) {
        rc = ENG_FAULT("segment.sync"); /* see eng_segment_sync_data */
        if (!rc && fdatasync(idx->fd) < 0)
            rc = -errno;
        if (rc)
            atomic_store(&idx->dirty, true);
    }
    if (!rc && !idx->writable && idx->fd >= 0) {
        close(idx->fd);
        idx->fd = -1;
    }
    pthread_mutex_unlock(&idx->sync_lock);
    return rc;
}

void eng_index_mark_dirty(eng_index *idx)
{
    if (idx->fd >= 0)
        atomic_store(&idx->dirty, true);
}

void eng_index_seal(eng_index *idx)
{
    pthread_mutex_lock(&idx->sync_lock);
    idx->writable = false;
    pthread_mutex_unlock(&idx->sync_lock);
}

void eng_index_reset(eng_index *idx)
{
    atomic_store_explicit(&idx->entries, 0, memory_order_release);
}

bool eng_index_zero_past(const eng_index *idx, uint32_t upto)
{
    uint64_t from = (uint64_t)eng_index_entries(idx) * idx->entry_size;
    uint64_t to = (uint64_t)upto * idx->entry_size;
    if (to <= from)
        return true;
    if (!idx->map || to > atomic_load(&((eng_index *)idx)->file_len))
        return false;
    for (uint64_t i = from; i < to; i++)
        if (idx->map[i])
            return false;
    return true;
}

static int64_t entry_offset(const eng_index *idx, uint32_t i)
{
    const uint8_t *e = idx->map + (size_t)i * idx->entry_size;
    if (idx->kind == ENG_INDEX_OFFSET)
        return idx->base_offset + (int32_t)eng_be32(e);
    return idx->base_offset + (int32_t)eng_be32(e + 8);
}

static int64_t entry_key(const eng_index *idx, uint32_t i)
{
    if (idx->kind == ENG_INDEX_OFFSET)
        return entry_offset(idx, i);
    return (int64_t)eng_be64(idx->map + (size_t)i * idx->entry_size);
}

/* Largest slot whose key <= target among the first n entries, or -1. */
static int64_t binary_search(const eng_index *idx, int64_t target, uint32_t lo, uint32_t hi)
{
    /* invariant: key(lo) <= target */
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo + 1) / 2;
        if (entry_key(idx, mid) <= target)
            lo = mid;
        else
            hi = mid - 1;
    }
    return lo;
}

static int64_t largest_lower_bound(const eng_index *idx, int64_t target)
{
    uint32_t n = eng_index_entries(idx);
    if (n == 0)
        return -1;
    uint32_t warm = ENG_INDEX_WARM_BYTES / idx->entry_size;
    uint32_t first_hot = n - 1 > warm ? n - 1 - warm : 0;
    if (entry_key(idx, first_hot) < target)
        return binary_search(idx, target, first_hot, n - 1);
    if (entry_key(idx, 0) > target)
        return -1;
    return binary_search(idx, target, 0, first_hot);
}

void eng_index_truncate_to(eng_index *idx, int64_t offset)
{
    uint32_t n = eng_index_entries(idx);
    uint32_t keep = 0;
    while (keep < n && entry_offset(idx, keep) < offset)
        keep++;
    atomic_store_explicit(&idx->entries, keep, memory_order_release);
}

int eng_index_check(const eng_index *idx, uint64_t log_size)
{
    /* Kafka's sanityCheck: a length that is not whole entries was cut or
     * written by something else. */
    if (idx->file_len % idx->entry_size)
        return ENG_ECORRUPT;
    uint32_t n = eng_index_entries(idx);
    int64_t prev_off = idx->base_offset - 1, prev_key = INT64_MIN;
    for (uint32_t i = 0; i < n; i++) {
        int64_t off = entry_offset(idx, i);
        if (off < idx->base_offset || off - idx->base_offset > INT32_MAX)
            return ENG_ECORRUPT;
        if (idx->kind == ENG_INDEX_OFFSET) {
            uint32_t pos = eng_be32(idx->map + (size_t)i * idx->entry_size + 4);
            if (off <= prev_off || pos >= log_size || (int64_t)pos <= prev_key)
                return ENG_ECORRUPT;
            prev_key = pos;
        } else {
            int64_t ts = entry_key(idx, i);
            if (off < prev_off || ts <= prev_key)
                return ENG_ECORRUPT;
            prev_key = ts;
        }
        prev_off = off;
    }
    return 0;
}

/* Reserved at a time: 5,461 time or 8,192 offset entries, so a segment
 * of Kafka's default 1 GiB with its 4 KiB index interval reserves about
 * 32 times (one fallocate per 32 MiB of log). */
#define INDEX_RESERVE (64u << 10)

static uint64_t round_up(uint64_t v, uint64_t unit)
{
    return (v + unit - 1) / unit * unit;
}

/* Makes sure the blocks under the pages of [0, end) are allocated, so that
 * a store through the mapping cannot fault for want of space (see above).
 * idx->reserved stays a multiple of the page size (or the file's end). */
static int reserve_blocks(eng_index *idx, uint64_t end)
{
    if (end <= idx->reserved)
        return 0;
    /* Whole pages: a store dirties the whole page it lands in, and where a
     * block is smaller than a page (ext4 with 1 KiB blocks; 64 KiB pages
     * on arm64 or ppc64) the fault allocates every block of that page, not
     * just those under the entry.  Reserving up to `end` itself left the
     * rest of the page a hole whenever an index reopened with more than
     * INDEX_RESERVE bytes of entries took its next one (and every later
     * reservation began mid-page): SIGBUS on a full disk (found by
     * tests/unit/test_index_fs.c). */
    long page = sysconf(_SC_PAGESIZE);
    uint64_t unit = page > 0 ? (uint64_t)page : 4096;
    uint64_t need = round_up(end, unit), to = idx->reserved + INDEX_RESERVE;
    if (to < need)
        to = need;
    to = round_up(to, unit);
    if (need > idx->file_len)
        need = idx->file_len; /* blocks past the end belong to no store */
    if (to > idx->file_len)
        to = idx->file_len;
    /* From 0 the first time: an index reopened after a crash may have
     * entries (blocks) and holes before its end alike; allocated blocks
     * cost fallocate nothing. */
    int rc = eng_fs_fallocate(idx->fd, idx->reserved, to - idx->reserved);
    if ((rc == -ENOSPC || rc == -EDQUOT) && need < to) {
        /* No room to reserve ahead: the pages this store needs may have
         * their blocks already (a rebuild rewrites the entries its file
         * held, a reopened index adds to its last page), and reserving
         * only those costs no room.  Refusing here failed a recovery on a
         * full disk, and with it the partition's load (found by
         * tests/unit/test_index_fs.c); the pwrite before needed no block
         * it did not have. */
        to = need;
        rc = eng_fs_fallocate(idx->fd, idx->reserved, to - idx->reserved);
    }
    if (rc)
        return rc;
    idx->reserved = to;
    return 0;
}

static int append_entry(eng_index *idx, const uint8_t *entry)
{
    uint32_t n = eng_index_entries(idx);
    if (!idx->writable || n >= idx->max_entries || !idx->map)
        return ENG_EINVAL;
    uint64_t pos = (uint64_t)n * idx->entry_size;
    /* No room for the entry.  Hit per offset entry, so tests can pick one:
     * those come by bytes appended, time entries by the clock. */
    int rc = idx->kind == ENG_INDEX_OFFSET ? ENG_FAULT("index.reserve") : 0;
    if (rc)
        return rc;
    if (idx->file_len < idx->map_len) {
        /* A reopened file's deferred preallocation (see eng_index_open). */
        if (ftruncate(idx->fd, (off_t)idx->map_len) < 0)
            return -errno;
        atomic_store(&idx->dirty, true);
        idx->file_len = idx->map_len;
    }
    if (idx->store_mapped)
        rc = reserve_blocks(idx, pos + idx->entry_size);
    if (idx->store_mapped && !rc) {
        memcpy(idx->map + pos, entry, idx->entry_size);
    } else if (idx->store_mapped && rc != -ENOSPC && rc != -EDQUOT) {
        return rc;
    } else {
        /* No room for the whole page the entry is in, but a pwrite needs
         * only the blocks under the entry, which a rebuild finds already
         * there (entries the file held before).  Where a block is smaller
         * than a page (ext4 with 1 KiB blocks) a page can have some of its
         * blocks and not others: the rebuild of an active segment's index
         * after kill -9 on a full disk was refused, and with it the start.
         * The page cache is shared, so the mapping sees the entry; a later
         * store into that page reserves again before it touches it. */
        ssize_t w = pwrite(idx->fd, entry, idx->entry_size, (off_t)pos);
        if (w < 0)
            return -errno;
        if ((size_t)w != idx->entry_size)
            return -EIO;
    }
    atomic_store(&idx->dirty, true);
    atomic_store_explicit(&idx->entries, n + 1, memory_order_release);
    return 0;
}

int eng_offset_index_append(eng_index *idx, int64_t offset, uint32_t position)
{
    uint32_t n = eng_index_entries(idx);
    int64_t rel = offset - idx->base_offset;
    if (rel < 0 || rel > INT32_MAX)
        return ENG_EINVAL;
    if (n > 0 && entry_offset(idx, n - 1) >= offset)
        return ENG_EINVAL;
    uint8_t e[ENG_OFFSET_ENTRY_SIZE];
    eng_put_be32(e, (uint32_t)rel);
    eng_put_be32(e + 4, position);
    return append_entry(idx, e);
}

void eng_offset_index_entry(const eng_index *idx, uint32_t i, int64_t *offset, uint32_t *position)
{
    *offset = entry_offset(idx, i);
    *position = eng_be32(idx->map + (size_t)i * ENG_OFFSET_ENTRY_SIZE + 4);
}

void eng_offset_index_lookup(const eng_index *idx, int64_t target, int64_t *offset,
                             uint32_t *position)
{
    int64_t slot = largest_lower_bound(idx, target);
    if (slot < 0) {
        *offset = idx->base_offset;
        *position = 0;
        return;
    }
    eng_offset_index_entry(idx, (uint32_t)slot, offset, position);
}

void eng_time_index_entry(const eng_index *idx, uint32_t i, int64_t *ts, int64_t *offset)
{
    *ts = entry_key(idx, i);
    *offset = entry_offset(idx, i);
}

void eng_time_index_last(const eng_index *idx, int64_t *ts, int64_t *offset)
{
    uint32_t n = eng_index_entries(idx);
    if (n == 0) {
        *ts = -1;
        *offset = idx->base_offset;
        return;
    }
    eng_time_index_entry(idx, n - 1, ts, offset);
}

int eng_time_index_maybe_append(eng_index *idx, int64_t ts, int64_t offset, bool skip_full_check)
{
    if (!skip_full_check && eng_index_is_full(idx))
        return ENG_EINVAL;
    int64_t last_ts, last_off;
    eng_time_index_last(idx, &last_ts, &last_off);
    if (eng_index_entries(idx) > 0 && (offset < last_off || ts < last_ts))
        return ENG_EINVAL;
    if (ts <= last_ts)
        return 0;
    int64_t rel = offset - idx->base_offset;
    if (rel < 0 || rel > INT32_MAX)
        return ENG_EINVAL;
    uint8_t e[ENG_TIME_ENTRY_SIZE];
    eng_put_be64(e, (uint64_t)ts);
    eng_put_be32(e + 8, (uint32_t)rel);
    return append_entry(idx, e);
}

void eng_time_index_lookup(const eng_index *idx, int64_t target, int64_t *ts, int64_t *offset)
{
    int64_t slot = largest_lower_bound(idx, target);
    if (slot < 0) {
        *ts = -1;
        *offset = idx->base_offset;
        return;
    }
    eng_time_index_entry(idx, (uint32_t)slot, ts, offset);
}

void eng_offset_index_floor_position(const eng_index *idx, uint64_t pos, int64_t *offset,
                                     uint32_t *position)
{
    uint32_t n = eng_index_entries(idx);
    *offset = idx->base_offset;
    *position = 0;
    uint32_t lo = 0, hi = n;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        uint32_t p = eng_be32(idx->map + (size_t)mid * ENG_OFFSET_ENTRY_SIZE + 4);
        if (p <= pos) {
            eng_offset_index_entry(idx, mid, offset, position);
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
}
