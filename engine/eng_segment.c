/*
 * eng_segment.c - the .log file and its indexes.
 *
 * Threading: one appender (the partition's append lock), many readers.  The
 * fields readers look at (size, next_offset, max timestamp, the lazily opened
 * index pointers) are atomics; everything else belongs to the appender or to
 * single-threaded startup code.  `lock` only guards lazy index opening,
 * lazy tail-state loading and renames, never I/O on the append path.
 *
 * Every use of a path outside the partition's locks (lazy opens and
 * reads, renames, unlinks) runs inside its gate (eng_segment_gate), taken
 * after `lock`: once a deleted topic's gate is revoked, none of them can
 * reach a file of the next topic created under the name.
 */
#include "eng_segment_impl.h"

#include "eng_batch.h"
#include "eng_buf.h"
#include "eng_endian.h"
#include "eng_error.h"
#include "eng_fault.h"
#include "eng_fs.h"
#include "eng_logger.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <sys/stat.h>
#include <unistd.h>

#define SCAN_CHUNK 16384

int eng_segment_file_path(const eng_segment *s, const char *ext, char *buf, size_t len)
{
    char full[64];
    snprintf(full, sizeof full, "%s%s", ext, s->suffix);
    return eng_fs_segment_path(buf, len, s->dir, s->base, full);
}

static eng_segment *segment_new(const char *dir, int64_t base, const eng_segment_opts *o)
{
    eng_segment *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    if (!(s->dir = strdup(dir))) {
        free(s);
        return NULL;
    }
    s->base = base;
    s->opts = *o;
    if (o->gate)
        eng_segment_gate_ref(o->gate);
    s->log_fd = -1;
    atomic_init(&s->refs, 1);
    atomic_init(&s->next_offset, base);
    atomic_init(&s->max_ts, -1);
    atomic_init(&s->offset_of_max_ts, -1);
    s->first_batch_ts = -1;
    s->created_ms = eng_now_ms();
    pthread_mutex_init(&s->lock, NULL);
    return s;
}

static void segment_free(eng_segment *s)
{
    eng_index_close(atomic_load(&s->oidx));
    eng_index_close(atomic_load(&s->tidx));
    if (s->log_fd >= 0)
        close(s->log_fd);
    pthread_mutex_destroy(&s->lock);
    eng_segment_gate_unref(s->opts.gate);
    free(s->dir);
    free(s);
}

void eng_segment_ref(eng_segment *s)
{
    atomic_fetch_add_explicit(&s->refs, 1, memory_order_relaxed);
}

void eng_segment_unref(eng_segment *s)
{
    if (s && atomic_fetch_sub_explicit(&s->refs, 1, memory_order_acq_rel) == 1)
        segment_free(s);
}

/* Opens one index.  A read-only one whose file is missing reads as empty
 * (recovery rebuilds it at the next start).  Creating a missing file here
 * would leave new .index.deleted files behind when a reader opens the
 * indexes of a segment already deleted, and a missing .timeindex beside its
 * .index must not fail every read of the segment. */
static int open_index(eng_segment *s, const char *ext, eng_index_kind kind, bool writable,
                      eng_index **out)
{
    char path[PATH_MAX];
    int rc = eng__segment_path_enter(s);
    if (rc)
        return rc;
    rc = eng_segment_file_path(s, ext, path, sizeof path);
    if (!rc)
        rc = eng_index_open(path, kind, s->base, s->opts.index_max_bytes, writable, out);
    eng__segment_path_leave(s);
    if (rc == -ENOENT && !writable)
        rc = eng_index_new_empty(kind, s->base, out);
    return rc;
}

/* Opens both indexes; writable ones are preallocated.  Caller holds lock or
 * is the only thread. */
int eng__segment_open_indexes(eng_segment *s, bool writable)
{
    eng_index *oi = NULL, *ti = NULL;
    int rc = open_index(s, ".index", ENG_INDEX_OFFSET, writable, &oi);
    if (!rc)
        rc = open_index(s, ".timeindex", ENG_INDEX_TIME, writable, &ti);
    if (rc) {
        eng_index_close(oi);
        return rc;
    }
    eng_index_close(atomic_exchange(&s->oidx, oi));
    eng_index_close(atomic_exchange(&s->tidx, ti));
    return 0;
}

/* Maps the indexes of an inactive segment on first use. */
static int ensure_indexes(eng_segment *s)
{
    if (atomic_load_explicit(&s->tidx, memory_order_acquire))
        return 0;
    pthread_mutex_lock(&s->lock);
    int rc = atomic_load(&s->tidx) ? 0 : eng__segment_open_indexes(s, false);
    pthread_mutex_unlock(&s->lock);
    return rc;
}

int eng_segment_indexes(eng_segment *s, eng_index **oi, eng_index **ti)
{
    int rc = ensure_indexes(s);
    if (rc)
        return rc;
    if (oi)
        *oi = atomic_load_explicit(&s->oidx, memory_order_acquire);
    if (ti)
        *ti = atomic_load_explicit(&s->tidx, memory_order_acquire);
    return 0;
}

eng_index *eng_segment_offset_index(eng_segment *s)
{
    return ensure_indexes(s) ? NULL : atomic_load_explicit(&s->oidx, memory_order_acquire);
}

eng_index *eng_segment_time_index(eng_segment *s)
{
    return ensure_indexes(s) ? NULL : atomic_load_explicit(&s->tidx, memory_order_acquire);
}

static int remove_stale(eng_segment *s, const char *ext)
{
    char path[PATH_MAX];
    int rc = eng_segment_file_path(s, ext, path, sizeof path);
    if (!rc && unlink(path) < 0 && errno != ENOENT)
        rc = -errno;
    return rc;
}

int eng_segment_create(const char *dir, int64_t base, const eng_segment_opts *o, eng_segment **out)
{
    return eng_segment_create_suffixed(dir, base, "", o, out);
}

int eng_segment_create_suffixed(const char *dir, int64_t base, const char *suffix,
                                const eng_segment_opts *o, eng_segment **out)
{
    char path[PATH_MAX];
    eng_segment *s = segment_new(dir, base, o);
    if (!s)
        return -ENOMEM;
    snprintf(s->suffix, sizeof s->suffix, "%s", suffix);
    bool made_indexes = false;
    int rc = eng_segment_file_path(s, ".log", path, sizeof path);
    if (rc)
        goto fail;
    s->log_fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (s->log_fd < 0) {
        rc = -errno;
        goto fail;
    }
    struct stat st;
    if (fstat(s->log_fd, &st) < 0) {
        rc = -errno;
        goto fail;
    }
    if (st.st_size > 0) {
        rc = -EEXIST;
        goto fail;
    }
    atomic_store(&s->log_dirty, true); /* new: nothing of it is known to be on disk */
    if (o->preallocate_bytes > 0) {
        if ((rc = eng_fs_fallocate(s->log_fd, 0, (uint64_t)o->preallocate_bytes)))
            goto fail;
        s->preallocated = true;
    }
    if ((rc = remove_stale(s, ".index")) || (rc = remove_stale(s, ".timeindex")))
        goto fail;
    made_indexes = true; /* from here any index file is this segment's own */
    if ((rc = eng__segment_open_indexes(s, true)))
        goto fail;
    atomic_store(&s->max_ts_loaded, true);
    atomic_store(&s->active, true);
    if ((rc = eng_fs_sync_dir(dir)))
        goto fail;
    *out = s;
    return 0;
fail:
    /* Nothing of a failed create stays behind: out of descriptors, the
     * .log may exist with its indexes only half opened. */
    if (s->log_fd >= 0 && rc != -EEXIST)
        unlink(path);
    if (made_indexes) {
        remove_stale(s, ".index");
        remove_stale(s, ".timeindex");
    }
    segment_free(s);
    return rc;
}

/* Reads up to len bytes at pos, retrying short reads. */
int eng_segment_pread(const eng_segment *s, uint8_t *buf, size_t len, uint64_t pos, size_t *got)
{
    size_t done = 0;
    while (done < len) {
        ssize_t r = pread(s->log_fd, buf + done, len - done, (off_t)(pos + done));
        if (r < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        if (r == 0)
            break;
        done += (size_t)r;
    }
    *got = done;
    return 0;
}

/* Visits batch headers from a batch boundary up to limit, reading the file in
 * chunks so that small batches do not cost one pread each.  Every limit
 * given is a segment size (or an earlier batch boundary), and the size only
 * grows by whole batches, so a batch running past it is damage: a torn tail
 * before recovery, or a file cut short behind the server's back.  Stopping
 * there as if at the end made readers skip the rest of the segment in
 * silence (found by hand after a clean restart on a truncated segment). */
static int scan_from(eng_segment *s, uint64_t start, uint64_t limit, eng_batch_visit_fn fn,
                     void *ctx)
{
    uint8_t buf[SCAN_CHUNK];
    uint64_t pos = start, buf_pos = 0;
    size_t buf_len = 0;
    while (pos + ENG_BATCH_OVERHEAD <= limit) {
        if (pos < buf_pos || pos + ENG_BATCH_OVERHEAD > buf_pos + buf_len) {
            size_t want = limit - pos < SCAN_CHUNK ? (size_t)(limit - pos) : SCAN_CHUNK;
            int rc = eng_segment_pread(s, buf, want, pos, &buf_len);
            if (rc)
                return rc;
            buf_pos = pos;
            if (buf_len < ENG_BATCH_OVERHEAD)
                return ENG_ECORRUPT;
        }
        eng_batch_pos b = {.position = pos};
        if (eng_batch_header_decode(buf + (pos - buf_pos), buf_len - (pos - buf_pos), &b.header))
            return ENG_ECORRUPT;
        if (pos + eng_batch_size(&b.header) > limit)
            return ENG_ECORRUPT;
        int r = fn(&b, ctx);
        if (r)
            return r;
        pos += eng_batch_size(&b.header);
    }
    return pos >= limit ? 0 : ENG_ECORRUPT; /* bytes left that are too few for a header */
}

int eng_segment_scan(eng_segment *s, uint64_t limit, eng_batch_visit_fn fn, void *ctx)
{
    return scan_from(s, 0, limit, fn, ctx);
}

int eng_segment_scan_from(eng_segment *s, uint64_t start, uint64_t limit, eng_batch_visit_fn fn,
                          void *ctx)
{
    return scan_from(s, start, limit, fn, ctx);
}

typedef struct last_batch_ctx {
    int64_t next_offset;
    int64_t first_max_ts;
    int64_t entry_offset; /* the index entry the scan starts from, -1 if none */
    bool first;
    bool entry_bad; /* the batch at the entry's position cannot hold its offset */
} last_batch_ctx;

static int visit_last(const eng_batch_pos *b, void *ctx)
{
    last_batch_ctx *c = ctx;
    if (c->first) {
        /* An entry names the last offset of what was appended at its
         * position, so the batch there starts at or below it.  One that
         * does not is bytes inside another batch (a hand-cut or damaged
         * index a clean start trusted): taken as a batch, they gave the
         * log end offset of whatever they happened to read as a header. */
        if (c->entry_offset >= 0 && b->header.base_offset > c->entry_offset) {
            c->entry_bad = true;
            return 1;
        }
        c->first_max_ts = b->header.max_timestamp;
        c->first = false;
    }
    c->next_offset = eng_batch_last_offset(&b->header) + 1;
    return 0;
}

/* Position of the last offset-index entry (*entry_offset its offset, -1 for
 * none), read straight from the file, so an inactive segment's next offset
 * can be found without mapping its index. */
static uint64_t last_index_position(eng_segment *s, uint64_t log_size, int64_t *entry_offset)
{
    *entry_offset = -1;
    /* An open (active) index is preallocated: its file's last slot is zero
     * padding, so ask the index for its last real entry.  Reading the file's
     * tail here made every
     * start scan the whole active segment. */
    eng_index *oi = atomic_load(&s->oidx);
    if (oi) {
        uint32_t n = eng_index_entries(oi), pos = 0;
        int64_t off = -1;
        if (n > 0)
            eng_offset_index_entry(oi, n - 1, &off, &pos);
        if (pos >= log_size)
            return 0;
        *entry_offset = pos ? off : -1;
        return pos;
    }
    /* Revoked: scanning from the start needs only the open .log. */
    char path[PATH_MAX];
    if (eng__segment_path_enter(s))
        return 0;
    int fd = eng_segment_file_path(s, ".index", path, sizeof path) ? -1
             : open(path, O_RDONLY | O_CLOEXEC);
    eng__segment_path_leave(s);
    if (fd < 0)
        return 0;
    uint64_t pos = 0;
    struct stat st;
    uint8_t e[ENG_OFFSET_ENTRY_SIZE];
    if (fstat(fd, &st) == 0 && st.st_size >= ENG_OFFSET_ENTRY_SIZE &&
        pread(fd, e, sizeof e, (st.st_size / ENG_OFFSET_ENTRY_SIZE - 1) * ENG_OFFSET_ENTRY_SIZE) ==
            (ssize_t)sizeof e) {
        pos = eng_be32(e + 4);
        if (pos >= log_size)
            pos = 0;
        else if (pos)
            *entry_offset = s->base + eng_be32(e);
    }
    close(fd);
    return pos;
}

/* Loads next offset (and, for an active segment, the first batch's
 * timestamp) by scanning from the last index entry to the end. */
static int load_tail_state(eng_segment *s)
{
    uint64_t size = atomic_load(&s->size);
    int64_t entry;
    uint64_t start = last_index_position(s, size, &entry);
    last_batch_ctx c = {.next_offset = s->base, .first_max_ts = -1, .entry_offset = entry,
                        .first = true};
    int rc = scan_from(s, start, size, visit_last, &c);
    if ((rc == ENG_ECORRUPT || c.entry_bad) && start > 0) {
        bool entry_bad = c.entry_bad;
        c = (last_batch_ctx){.next_offset = s->base, .first_max_ts = -1, .entry_offset = -1,
                             .first = true};
        rc = scan_from(s, 0, size, visit_last, &c);
        /* Whole batches from the start, but not from the entry on: the entry
         * points off its batch (with the .log damaged too, recovery decides). */
        if (entry_bad || rc == 0)
            eng__segment_distrust_index(s, (uint32_t)start);
    }
    if (rc)
        return rc;
    atomic_store_explicit(&s->next_offset, c.next_offset, memory_order_release);
    if (start == 0)
        s->first_batch_ts = c.first_max_ts;
    return 0;
}

static void load_max_ts(eng_segment *s)
{
    if (atomic_load_explicit(&s->max_ts_loaded, memory_order_acquire))
        return;
    pthread_mutex_lock(&s->lock);
    if (!atomic_load(&s->max_ts_loaded)) {
        int64_t ts = -1, off = -1;
        eng_index *ti = atomic_load(&s->tidx);
        if (ti) {
            eng_time_index_last(ti, &ts, &off);
        } else if (!eng__segment_path_enter(s)) { /* revoked: the timestamp stays unknown */
            char path[PATH_MAX];
            int fd = eng_segment_file_path(s, ".timeindex", path, sizeof path) ? -1
                     : open(path, O_RDONLY | O_CLOEXEC);
            eng__segment_path_leave(s);
            struct stat st;
            uint8_t e[ENG_TIME_ENTRY_SIZE];
            if (fd >= 0 && fstat(fd, &st) == 0 && st.st_size >= ENG_TIME_ENTRY_SIZE &&
                pread(fd, e, sizeof e,
                      (st.st_size / ENG_TIME_ENTRY_SIZE - 1) * ENG_TIME_ENTRY_SIZE) ==
                    (ssize_t)sizeof e) {
                ts = (int64_t)eng_be64(e);
                off = s->base + (int32_t)eng_be32(e + 8);
            }
            if (fd >= 0)
                close(fd);
        }
        if (ts < 0)
            off = -1;
        atomic_store(&s->max_ts, ts);
        atomic_store(&s->offset_of_max_ts, off);
        atomic_store_explicit(&s->max_ts_loaded, true, memory_order_release);
    }
    pthread_mutex_unlock(&s->lock);
}

int eng_segment_open(const char *dir, int64_t base, const eng_segment_opts *o, bool active,
                     eng_segment **out)
{
    char path[PATH_MAX];
    eng_segment *s = segment_new(dir, base, o);
    if (!s)
        return -ENOMEM;
    int rc = eng_segment_file_path(s, ".log", path, sizeof path);
    if (rc)
        goto fail;
    s->log_fd = open(path, O_RDWR | O_CLOEXEC);
    if (s->log_fd < 0) {
        rc = -errno;
        goto fail;
    }
    struct stat st;
    if (fstat(s->log_fd, &st) < 0) {
        rc = -errno;
        goto fail;
    }
    atomic_store(&s->size, (uint64_t)st.st_size);
    atomic_store(&s->active, active);
    if (active) {
        if ((rc = eng__segment_open_indexes(s, true)))
            goto fail;
        load_max_ts(s);
        if ((rc = load_tail_state(s)))
            goto fail;
        eng_batch_header h;
        if (s->first_batch_ts < 0 && eng_segment_first_batch(s, &h) == 0)
            s->first_batch_ts = h.max_timestamp;
    } else {
        atomic_store(&s->next_offset, -1);
    }
    *out = s;
    return 0;
fail:
    segment_free(s);
    return rc;
}

int64_t eng_segment_base(const eng_segment *s)
{
    return s->base;
}

uint64_t eng_segment_size(const eng_segment *s)
{
    return atomic_load_explicit(&((eng_segment *)s)->size, memory_order_acquire);
}

int64_t eng_segment_next_offset(const eng_segment *cs)
{
    eng_segment *s = (eng_segment *)cs;
    int64_t n = atomic_load_explicit(&s->next_offset, memory_order_acquire);
    if (n >= 0)
        return n;
    pthread_mutex_lock(&s->lock);
    if (atomic_load(&s->next_offset) < 0 && load_tail_state(s) != 0)
        atomic_store(&s->next_offset, s->base); /* unreadable tail: treat as empty */
    pthread_mutex_unlock(&s->lock);
    return atomic_load_explicit(&s->next_offset, memory_order_acquire);
}

bool eng_segment_is_active(const eng_segment *s)
{
    return atomic_load(&((eng_segment *)s)->active);
}

bool eng_segment_retired(const eng_segment *s)
{
    return s->opts.gate && eng_segment_gate_revoked(s->opts.gate);
}

int64_t eng_segment_max_timestamp(eng_segment *s)
{
    load_max_ts(s);
    return atomic_load_explicit(&s->max_ts, memory_order_acquire);
}

int64_t eng_segment_offset_of_max_timestamp(eng_segment *s)
{
    load_max_ts(s);
    return atomic_load_explicit(&s->offset_of_max_ts, memory_order_acquire);
}

int64_t eng_segment_mtime_ms(const eng_segment *s)
{
    struct stat st;
    /* Unknown age counts as young: retention must never delete on a guess. */
    if (fstat(s->log_fd, &st) < 0)
        return eng_now_ms();
    return (int64_t)st.st_mtim.tv_sec * 1000 + st.st_mtim.tv_nsec / 1000000;
}

int eng_segment_log_fd(const eng_segment *s)
{
    return s->log_fd;
}

eng_roll_reason eng_segment_should_roll(eng_segment *s, uint64_t size, int64_t max_ts,
                                        int64_t last_offset, int64_t segment_bytes,
                                        int64_t max_segment_ms, int64_t now_ms)
{
    uint64_t cur = eng_segment_size(s);
    if ((int64_t)cur > segment_bytes - (int64_t)size)
        return ENG_ROLL_SIZE;
    if (cur > 0) {
        int64_t waited = s->first_batch_ts >= 0 ? max_ts - s->first_batch_ts : now_ms - s->created_ms;
        if (waited > max_segment_ms - s->opts.roll_jitter_ms)
            return ENG_ROLL_TIME;
    }
    eng_index *oi = atomic_load(&s->oidx), *ti = atomic_load(&s->tidx);
    if (oi && eng_index_is_full(oi))
        return ENG_ROLL_OFFSET_INDEX_FULL;
    if (ti && eng_index_is_full(ti))
        return ENG_ROLL_TIME_INDEX_FULL;
    if (last_offset - s->base > INT32_MAX)
        return ENG_ROLL_OFFSET_OVERFLOW;
    return ENG_ROLL_NONE;
}

/* Writes bytes [from, to) of an append: data when the caller has one
 * buffer, else iov's pieces. */
static int write_part(int fd, const uint8_t *data, const struct iovec *iov, int iovcnt,
                      uint64_t pos, size_t from, size_t to)
{
    return data ? eng_fs_pwrite_all(fd, data + from, to - from, pos + from)
                : eng_fs_pwritev_range(fd, iov, iovcnt, pos, from, to);
}

static int append_bytes(eng_segment *s, const uint8_t *data, const struct iovec *iov, int iovcnt,
                        size_t len, int64_t largest_offset, int64_t largest_ts,
                        int64_t offset_of_max_ts)
{
    if (largest_offset - s->base > INT32_MAX || largest_offset < s->base)
        return ENG_EINVAL;
    eng_index *oi = atomic_load(&s->oidx), *ti = atomic_load(&s->tidx);
    if (!oi || !ti || !eng_segment_is_active(s))
        return ENG_EINVAL;
    uint64_t pos = eng_segment_size(s);
    if (pos + len > UINT32_MAX)
        return ENG_ETOOLARGE;
#ifdef LOGSTORE_TEST_BUILD
    /* Half the batch reaches the file before the fault point acts, so that
     * `exit` leaves a torn tail (eng_fault.h).  The point used to act first,
     * so exit left nothing to recover (found by tests/crash/test_faults.c). */
    int rc = write_part(s->log_fd, data, iov, iovcnt, pos, 0, len / 2);
    if (!rc)
        rc = ENG_FAULT("segment.append.partial");
    if (!rc)
        rc = write_part(s->log_fd, data, iov, iovcnt, pos, len / 2, len);
#else
    int rc = write_part(s->log_fd, data, iov, iovcnt, pos, 0, len);
#endif
    atomic_store(&s->log_dirty, true); /* even half-written: a truncation or a sync follows */
    if (!rc && (rc = ENG_FAULT("segment.append.index")) == 0 &&
        s->bytes_since_index > s->opts.index_interval) {
        int64_t ts = largest_ts > atomic_load(&s->max_ts) ? largest_ts : atomic_load(&s->max_ts);
        int64_t ts_off = largest_ts > atomic_load(&s->max_ts) ? offset_of_max_ts
                                                               : atomic_load(&s->offset_of_max_ts);
        bool skip_oi = s->index_full_skips && eng_index_is_full(oi);
        bool skip_ti = s->index_full_skips && eng_index_is_full(ti);
        if (!skip_oi)
            rc = eng_offset_index_append(oi, largest_offset, (uint32_t)pos);
        if (!rc && !skip_ti) {
            rc = eng_time_index_maybe_append(ti, ts, ts_off, false);
            if (rc && !skip_oi)
                eng_index_truncate_to(oi, largest_offset);
        }
    }
    if (rc) {
        /* Leave no batch behind, whole or partial: the file ends where it
         * ended.  A preallocated .log is cut too, giving up the rest of its
         * preallocation: recovery reads it up to the first zeros, and a
         * whole batch left there (its index entries refused for want of
         * room) came back after a crash although the append was refused,
         * and a retry of it was stored twice. */
        int cut = ENG_FAULT("segment.append.truncate");
        if (!cut && ftruncate(s->log_fd, (off_t)pos) < 0)
            cut = -errno;
        if (!cut) {
            s->preallocated = false;
            return rc;
        }
        if (s->discarded_on_failure) {
            /* The owner removes the whole file (a clean's output), so the
             * refused bytes reach no log: the write's own error is what
             * happened, and no dir is offline. */
            ENG_WARN("segment %020lld: cannot cut a failed write off the .log (%s); the file is "
                     "discarded",
                     (long long)s->base, eng_strerror(cut));
            return rc;
        }
        /* The refused bytes stay in the file, and a start after a crash
         * would keep a whole batch its client was told failed (a retry
         * stores it twice).  Kafka takes the log dir offline on an I/O
         * error in the append path; so do we (ENG_EOFFLINE, whatever rc
         * was: a full disk is no longer just "try again"), and zero the
         * batch header too, which ends the log at pos for recovery.  That
         * write is not synced: the refused bytes were not either. */
        ENG_ERROR("segment %020lld: cannot cut a failed append off the .log (%s); the log dir "
                  "goes offline",
                  (long long)s->base, eng_strerror(cut));
        static const uint8_t zeros[ENG_BATCH_OVERHEAD];
        int z = eng_fs_pwrite_all(s->log_fd, zeros, len < sizeof zeros ? len : sizeof zeros, pos);
        if (z)
            ENG_ERROR("segment %020lld: cannot zero the failed append's header either (%s): a "
                      "restart may keep it",
                      (long long)s->base, eng_strerror(z));
        return ENG_EOFFLINE;
    }
    if (s->bytes_since_index > s->opts.index_interval)
        s->bytes_since_index = 0;
    s->bytes_since_index += len;
    if (largest_ts > atomic_load(&s->max_ts)) {
        atomic_store(&s->offset_of_max_ts, offset_of_max_ts);
        atomic_store(&s->max_ts, largest_ts);
    }
    if (pos == 0)
        s->first_batch_ts = largest_ts;
    atomic_store_explicit(&s->next_offset, largest_offset + 1, memory_order_release);
    atomic_store_explicit(&s->size, pos + len, memory_order_release);
    return 0;
}

int eng_segment_append(eng_segment *s, const uint8_t *data, size_t len, int64_t largest_offset,
                       int64_t largest_ts, int64_t offset_of_max_ts)
{
    return append_bytes(s, data, NULL, 0, len, largest_offset, largest_ts, offset_of_max_ts);
}

int eng_segment_appendv(eng_segment *s, const struct iovec *iov, int iovcnt, size_t len,
                        int64_t largest_offset, int64_t largest_ts, int64_t offset_of_max_ts)
{
    return append_bytes(s, NULL, iov, iovcnt, len, largest_offset, largest_ts, offset_of_max_ts);
}

void eng_segment_skip_full_index(eng_segment *s)
{
    s->index_full_skips = true;
}

void eng_segment_discard_on_failure(eng_segment *s)
{
    s->discarded_on_failure = true;
}

int eng_segment_write_final_time_entry(eng_segment *s)
{
    eng_index *ti = atomic_load(&s->tidx);
    int64_t ts = atomic_load(&s->max_ts);
    /* A time index with no slot at all (segment.index.bytes under 12 bytes)
     * never holds an entry, so there is nothing to lose. */
    if (ts < 0 || !ti || eng_index_max_entries(ti) == 0)
        return 0;
    return eng_time_index_maybe_append(ti, ts, atomic_load(&s->offset_of_max_ts), true);
}

int eng_segment_drop_index_file(eng_segment *s, const char *suffix)
{
    char path[PATH_MAX];
    int rc = eng__segment_path_enter(s);
    if (rc)
        return rc;
    rc = eng_segment_file_path(s, suffix, path, sizeof path);
    if (!rc && unlink(path) < 0 && errno != ENOENT)
        rc = -errno;
    eng__segment_path_leave(s);
    return rc;
}

int eng_segment_seal(eng_segment *s)
{
    if (!eng_segment_is_active(s))
        return 0;
    eng_index *oi = atomic_load(&s->oidx), *ti = atomic_load(&s->tidx);
    int rc = 0;
    /* Without this entry a later start reads an older largest timestamp
     * (none at all when it was the index's first), so reads by timestamp
     * skip the segment's newest records and retention.ms judges it by the
     * wrong time: the error is kept for the caller (see the header). */
    int final_rc = eng_segment_write_final_time_entry(s);
    if (final_rc)
        ENG_WARN("segment %020lld: final time-index entry not written: %s", (long long)s->base,
                 eng_strerror(final_rc));
    if (oi && (rc = eng_index_trim(oi)))
        return rc;
    if (ti && (rc = eng_index_trim(ti)))
        return rc;
    if (oi)
        eng_index_seal(oi);
    if (ti)
        eng_index_seal(ti);
    if (s->preallocated) {
        if (ftruncate(s->log_fd, (off_t)eng_segment_size(s)) < 0)
            return -errno;
        atomic_store(&s->log_dirty, true);
    }
    atomic_store(&s->active, false);
    return final_rc;
}

int eng_segment_set_mtime_ms(eng_segment *s, int64_t ms)
{
    struct timespec ts[2] = {{.tv_nsec = UTIME_OMIT},
                             {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L}};
    return futimens(s->log_fd, ts) < 0 ? -errno : 0;
}

