/*
 * eng_compact.c - one compaction round over one partition.
 *
 * The partition's maint_lock is held for the whole round, so retention
 * cannot change the segment set underneath; appends carry on (they only
 * touch the active segment, which is never cleaned), and readers keep their
 * view of whichever segments they started with.
 */
#include "eng_compact.h"

#include "eng_batch_reader.h"
#include "eng_compact_txn.h"
#include "eng_compress.h"
#include "eng_fault.h"
#include "eng_fs.h"
#include "eng_logger.h"
#include "eng_partition_impl.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define DEFAULT_IO_BUFFER (256u << 10)

/* ---- the cleanable range ----------------------------------------------- */

/* Index of the first segment overlapping [offset, ...). */
static size_t first_overlapping(const eng_segview *v, int64_t offset)
{
    ssize_t i = eng__segview_floor(v, offset);
    return i < 0 ? 0 : (size_t)i;
}

static int64_t first_batch_max_ts(eng_segment *seg)
{
    eng_batch_header h;
    return eng_segment_first_batch(seg, &h) ? -1 : h.max_timestamp;
}

/* Kafka's LogSegment.largestTimestamp: the largest record timestamp, or
 * the file's mtime when no record has one (as retention does).  Without
 * the fallback a segment of timestamp-less records (-1) looked infinitely
 * old to min.compaction.lag.ms and was cleaned at once. */
static int64_t largest_timestamp(eng_segment *seg)
{
    int64_t ts = eng_segment_max_timestamp(seg);
    return ts >= 0 ? ts : eng_segment_mtime_ms(seg);
}

static void range_of(eng_partition *p, const eng_segview *v, int64_t ckpt, int64_t now,
                     const eng_config *cfg, eng_clean_range *r)
{
    memset(r, 0, sizeof *r);
    int64_t lso = atomic_load(&p->log_start_offset);
    int64_t leo = atomic_load(&p->log_end_offset);
    int64_t hw = atomic_load(&p->high_watermark);
    int64_t first_dirty = ckpt < lso || ckpt > leo ? lso : ckpt;
    int64_t active_base = eng_segment_base(v->segs[v->n - 1]);
    int64_t bound = hw < active_base ? hw : active_base;
    int64_t lag = cfg->v[ENG_CFG_MIN_COMPACTION_LAG_MS].i;
    if (lag > 0) {
        for (size_t i = first_overlapping(v, first_dirty); i + 1 < v->n; i++) {
            if (largest_timestamp(v->segs[i]) > now - lag) {
                if (eng_segment_base(v->segs[i]) < bound)
                    bound = eng_segment_base(v->segs[i]);
                break;
            }
        }
    }
    int64_t uncleanable_dirty = first_dirty > bound ? first_dirty : bound;
    /* The first uncleanable offset is a segment boundary: the base of the
     * (non-active) segment holding it, or the active segment's base. */
    int64_t first_uncleanable = active_base;
    ssize_t f = eng__segview_floor(v, uncleanable_dirty);
    if (f >= 0 && (size_t)f + 1 < v->n)
        first_uncleanable = eng_segment_base(v->segs[f]);
    r->first_dirty = first_dirty;
    r->first_uncleanable = first_uncleanable;
    /* Kafka counts
     * logSegments(min(firstDirty, firstUncleanable), firstUncleanable), which
     * is empty once the first uncleanable offset is at or below the first
     * dirty one.  Counting up to max(...) made the segment holding a
     * mid-segment checkpoint "cleanable" while a clean could do nothing, so
     * a cleaner thread picked that partition again and again without
     * backing off. */
    int64_t upto = first_uncleanable;
    int64_t max_lag = cfg->v[ENG_CFG_MAX_COMPACTION_LAG_MS].i;
    for (size_t i = 0; i < v->n; i++) {
        eng_segment *seg = v->segs[i];
        int64_t base = eng_segment_base(seg);
        int64_t next = i + 1 < v->n ? eng_segment_base(v->segs[i + 1]) : INT64_MAX;
        if (base < first_dirty)
            r->clean_bytes += eng_segment_size(seg);
        if (next > first_dirty && base < upto)
            r->cleanable_bytes += eng_segment_size(seg);
        /* Kafka's maxCompactionDelay looks at every dirty non-active
         * segment, past the min.compaction.lag.ms cut-off too (it was only
         * those below it).  As there, a segment whose first batch has no
         * timestamp never forces a clean: only its own dirty ratio makes it
         * eligible. */
        if (next > first_dirty && i + 1 < v->n && max_lag != INT64_MAX) {
            int64_t ts = first_batch_max_ts(seg);
            if (ts > 0 && ts < now - max_lag)
                r->need_compaction_now = true;
        }
    }
    uint64_t total = r->clean_bytes + r->cleanable_bytes;
    r->dirty_ratio = total ? (double)r->cleanable_bytes / (double)total : 0.0;
}

void eng_partition_clean_range(eng_partition *p, int64_t checkpoint, int64_t now_ms,
                               eng_clean_range *out)
{
    eng_config cfg;
    eng_partition_get_config(p, &cfg);
    eng_segview *v = eng__segview_acquire(p);
    range_of(p, v, checkpoint, now_ms, &cfg, out);
    eng__segview_release(v);
}

/* ---- a round ----------------------------------------------------------- */

typedef struct round {
    eng_partition *p;
    const eng_clean_opts *o;
    eng_clean_stats *st;
    eng_config cfg;
    eng_buf scratch, out;
    eng__txn_markers txn;
    /* The idempotent producers once the round has its view (sorted by id): the
     * last batch of each stays, if only as a header, so a rebuild of their
     * state from the log still finds their last sequence (Kafka's
     * isBatchLastRecordOfProducer, BatchRetention.RETAIN_EMPTY). */
    eng_producer_entry *producers;
    size_t nproducers;
    double started_s;
} round;

static bool last_of_producer(const round *rd, const eng_batch_header *h)
{
    if (h->producer_id < 0 || (h->attributes & ENG_ATTR_CONTROL))
        return false;
    size_t lo = 0, hi = rd->nproducers;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (rd->producers[mid].producer_id < h->producer_id)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == rd->nproducers || rd->producers[lo].producer_id != h->producer_id)
        return false;
    const eng_producer_entry *e = &rd->producers[lo];
    return e->nbatches && e->batches[e->nbatches - 1].last_offset == eng_batch_last_offset(h);
}

static double mono_s(void)
{
    return (double)eng_mono_us() / 1e6;
}

/* Stopping, or the topic was deleted (eng_partition_retire waits). */
static bool aborted(const round *rd)
{
    return (rd->o->abort && atomic_load(rd->o->abort)) || (rd->o->stop && atomic_load(rd->o->stop)) ||
           atomic_load(&rd->p->retired);
}

/* Longest single sleep of the throttle: how late a stop or a topic delete
 * may find the cleaner. */
#define THROTTLE_SLICE_S 0.05

/* Sleeps as needed to keep the round under max_bytes_per_second.  At a low
 * rate one batch's sleep can be long (50 KB at 1000 B/s is 50 s), and a
 * SIGTERM or a DELETE of the topic (eng_partition_retire waits for
 * maint_lock) must not wait it out: the sleep goes in slices and ends once
 * the round is aborted; the caller's next aborted() check stops the round. */
static void throttle(round *rd)
{
    double rate = rd->o->max_bytes_per_second;
    if (rate <= 0)
        return;
    for (;;) {
        double ahead = (double)rd->st->bytes_read / rate - (mono_s() - rd->started_s);
        if (ahead <= 0.001 || aborted(rd))
            return;
        if (ahead > THROTTLE_SLICE_S)
            ahead = THROTTLE_SLICE_S;
        struct timespec ts = {0, (long)(ahead * 1e9)};
        nanosleep(&ts, NULL);
    }
}

/* Maps the keyed records at or past `start`, in order, a chunk of hashes and
 * prefetches ahead of the puts; sets *full and stops at the first that
 * does not fit.  Returns 0 or the iterator's error. */
static int map_records(eng_offset_map *map, const eng_batch_header *h, const uint8_t *recs,
                       size_t len, int64_t start, bool *full)
{
    eng_record_iter it;
    eng_record_iter_init(&it, h, recs, len);
    int rc = 0;
    do {
        eng_record r;
        eng_key_hash hash[ENG_OFFSET_MAP_CHUNK];
        int64_t offset[ENG_OFFSET_MAP_CHUNK];
        size_t n = 0;
        while (n < ENG_OFFSET_MAP_CHUNK && (rc = eng_record_iter_next(&it, &r)) == 1) {
            if (!r.key || r.offset < start)
                continue;
            eng_offset_map_hash(map, r.key, (size_t)r.key_len, &hash[n]);
            eng_offset_map_prefetch(map, &hash[n]);
            offset[n++] = r.offset;
        }
        for (size_t k = 0; k < n; k++) {
            if (!eng_offset_map_put_hashed(map, &hash[k], offset[k])) {
                *full = true;
                return 0;
            }
        }
    } while (rc == 1);
    return rc;
}

/* Fills the offset map from [first_dirty, first_uncleanable). */
static int build_map(round *rd, const eng_segview *v)
{
    eng_offset_map *map = rd->o->map;
    int64_t start = rd->st->first_dirty, end = rd->st->first_uncleanable;
    eng_offset_map_clear(map);
    size_t first = first_overlapping(v, start);
    for (size_t i = first; i < v->n && eng_segment_base(v->segs[i]) < end; i++) {
        eng_segment *seg = v->segs[i];
        uint64_t pos = 0;
        if (i == first) {
            eng_index *oi = eng_segment_offset_index(seg);
            int64_t off;
            uint32_t at;
            if (!oi)
                return -EIO;
            eng_offset_index_lookup(oi, start, &off, &at);
            pos = at;
        }
        eng_batch_reader br;
        int rc = eng_batch_reader_init(&br, seg, pos, eng_segment_size(seg),
                                       rd->o->io_buffer_bytes ? rd->o->io_buffer_bytes : DEFAULT_IO_BUFFER);
        if (rc)
            return rc;
        eng_batch_pos b;
        const uint8_t *bytes;
        bool full = false;
        while (!full && (rc = eng_batch_reader_next(&br, &b, &bytes)) == 1) {
            rd->st->bytes_read += eng_batch_size(&b.header);
            if (aborted(rd)) {
                rc = atomic_load(&rd->p->retired) ? ENG_ENOTOPIC : ENG_ESHUTDOWN;
                break;
            }
            int64_t last = eng_batch_last_offset(&b.header);
            /* Neither markers nor aborted data may supersede a key. */
            if (!(b.header.attributes & ENG_ATTR_CONTROL) && last >= start &&
                !eng__txn_aborted(&rd->txn, &b.header)) {
                const uint8_t *recs;
                size_t len;
                if ((rc = eng_batch_plain_records(bytes, &b.header, &rd->scratch, &recs, &len)))
                    break;
                rc = map_records(map, &b.header, recs, len, start, &full);
                if (rc < 0)
                    break;
                rc = 0;
            }
            if (!full && last >= start)
                eng_offset_map_update_latest(map, last);
            throttle(rd);
        }
        /* The reader reports
         * "end" for a batch whose length runs past the segment; in a sealed
         * segment that is corruption, not the end (Kafka's cleaner fails
         * too), and treating it as the end made the round drop the rest of
         * the segment silently. */
        if (rc == 0 && !full && br.pos < eng_segment_size(seg))
            rc = ENG_ECORRUPT;
        eng_batch_reader_free(&br);
        if (rc < 0)
            return rc;
        if (full)
            return 0;
        /* A fully mapped segment covers everything up to the next one. */
        if (i + 1 < v->n && eng_segment_base(v->segs[i + 1]) <= end)
            eng_offset_map_update_latest(map, eng_segment_base(v->segs[i + 1]) - 1);
    }
    return 0;
}

/* Segments [from, to) of v form groups; returns the end of the group
 * starting at `from` (Kafka's groupSegmentsBySize).  Each segment added
 * counts one index entry more than it holds: its first batch had none (an
 * entry follows index.interval.bytes of earlier data), but in the merged
 * segment it follows the previous segment's batches and can earn one.
 * Summing only what the sources hold filled the merged indexes exactly when
 * index.interval.bytes was 0. */
static size_t group_end(const round *rd, const eng_segview *v, size_t from, size_t to)
{
    uint64_t max_log = (uint64_t)rd->cfg.v[ENG_CFG_SEGMENT_BYTES].i;
    uint64_t max_idx = (uint64_t)rd->cfg.v[ENG_CFG_SEGMENT_INDEX_BYTES].i;
    uint64_t log = eng_segment_size(v->segs[from]), oidx = 0, tidx = 0;
    eng_index *oi = eng_segment_offset_index(v->segs[from]);
    eng_index *ti = eng_segment_time_index(v->segs[from]);
    oidx = oi ? (uint64_t)eng_index_entries(oi) * ENG_OFFSET_ENTRY_SIZE : 0;
    tidx = ti ? (uint64_t)eng_index_entries(ti) * ENG_TIME_ENTRY_SIZE : 0;
    int64_t base = eng_segment_base(v->segs[from]);
    size_t j = from + 1;
    for (; j < to; j++) {
        eng_segment *s = v->segs[j];
        oi = eng_segment_offset_index(s);
        ti = eng_segment_time_index(s);
        uint64_t so = ((oi ? (uint64_t)eng_index_entries(oi) : 0) + 1) * ENG_OFFSET_ENTRY_SIZE;
        uint64_t st = ((ti ? (uint64_t)eng_index_entries(ti) : 0) + 1) * ENG_TIME_ENTRY_SIZE;
        int64_t last = (j + 1 < v->n ? eng_segment_base(v->segs[j + 1]) : rd->st->end_offset) - 1;
        if (log + eng_segment_size(s) > max_log || oidx + so > max_idx || tidx + st > max_idx ||
            last - base > INT32_MAX)
            break;
        log += eng_segment_size(s);
        oidx += so;
        tidx += st;
    }
    return j;
}

/* Recopies segs[from, to) into one new segment (NULL in a dry run). */
static int clean_group(round *rd, eng_segment *const *segs, size_t n, eng_segment **out)
{
    eng_segment *cleaned = NULL;
    int rc = 0;
    if (!rd->o->dry_run) {
        eng_segment_opts so;
        eng__segment_opts(rd->p, &rd->cfg, false, &so);
        so.preallocate_bytes = 0;
        if ((rc = eng_segment_create_suffixed(rd->p->dir, eng_segment_base(segs[0]), ".cleaned",
                                              &so, &cleaned)))
            return rc;
        /* group_end sizes the group so its indexes should fit, but a batch
         * rebuilt with a delete horizon grows and can earn an entry its
         * source did not have; a missing sparse entry costs a longer scan,
         * while a full-index error would fail the round (and mark the
         * partition uncleanable) every time. */
        eng_segment_skip_full_index(cleaned);
        eng_segment_discard_on_failure(cleaned);
    }
    int64_t drm = rd->cfg.v[ENG_CFG_DELETE_RETENTION_MS].i;
    for (size_t k = 0; k < n && !rc; k++) {
        eng_batch_reader br;
        uint64_t limit = eng_segment_size(segs[k]);
        if ((rc = eng_batch_reader_init(&br, segs[k], 0, limit,
                                        rd->o->io_buffer_bytes ? rd->o->io_buffer_bytes : DEFAULT_IO_BUFFER)))
            break;
        eng_batch_pos b;
        const uint8_t *bytes;
        while ((rc = eng_batch_reader_next(&br, &b, &bytes)) == 1) {
            if (aborted(rd)) {
                rc = atomic_load(&rd->p->retired) ? ENG_ENOTOPIC : ENG_ESHUTDOWN;
                break;
            }
            size_t size = eng_batch_size(&b.header);
            rd->st->bytes_read += size;
            bool keep_empty = (k + 1 == n && br.pos + ENG_BATCH_OVERHEAD > limit) ||
                              last_of_producer(rd, &b.header);
            eng_clean_action act;
            eng_clean_counts c = {0};
            rc = eng_clean_filter_batch(bytes, &b.header, rd->o->map, rd->o->now_ms, drm,
                                        keep_empty, eng__txn_aborted(&rd->txn, &b.header),
                                        &rd->scratch, &rd->out, &act, &c);
            if (rc)
                break;
            rd->st->records_read += c.records;
            rd->st->records_removed += c.removed;
            rd->st->tombstones_removed += c.tombstones_removed;
            rd->st->keyless_removed += c.keyless_removed;
            const uint8_t *wb = act == ENG_CLEAN_COPY ? bytes : rd->out.data;
            size_t wlen = act == ENG_CLEAN_COPY ? size : rd->out.len;
            if (act == ENG_CLEAN_DROP) {
                rd->st->batches_dropped++;
                continue;
            }
            rd->st->batches_rewritten += act == ENG_CLEAN_REWRITE;
            rd->st->bytes_after += wlen;
            if (cleaned) {
                eng_batch_header wh;
                eng_batch_header_decode(wb, wlen, &wh);
                int64_t last = eng_batch_last_offset(&wh);
                rc = eng_segment_append(cleaned, wb, wlen, last, wh.max_timestamp, last);
                if (rc == ENG_EINVAL) {
                    /* The segment refuses offsets that do not increase or
                     * leave its range: the source batches are out of order.
                     * That is damage on disk, not a caller's bad argument
                     * (which the API would answer with a 400). */
                    ENG_ERROR("%s-%d: batch at offset %" PRId64 " cannot follow the ones before "
                              "it in the cleaned segment",
                              rd->p->topic, rd->p->id, wh.base_offset);
                    rc = ENG_ECORRUPT;
                }
                if (rc)
                    break;
            }
            throttle(rd);
        }
        /* As in build_map: stopping short of a sealed segment's end is
         * corruption; never write a cleaned segment without the rest. */
        if (rc == 0 && br.pos < limit)
            rc = ENG_ECORRUPT;
        eng_batch_reader_free(&br);
        if (rc > 0)
            rc = 0;
    }
    if (!rc && cleaned) {
        if (!(rc = eng_segment_seal(cleaned)) && !(rc = eng_segment_sync(cleaned)))
            rc = eng_segment_set_mtime_ms(cleaned, eng_segment_mtime_ms(segs[n - 1]));
    }
    if (rc && cleaned) {
        eng_segment_unlink(cleaned);
        eng_segment_unref(cleaned);
        return rc;
    }
    *out = cleaned;
    return rc;
}

/* v with the segments old[0..n) replaced by cleaned (the caller holds the
 * append lock), or NULL without memory: a new view, owned by the caller. */
static eng_segview *swapped_view(const eng_segview *v, eng_segment *cleaned,
                                 eng_segment *const *old, size_t n)
{
    size_t at = 0;
    while (at < v->n && v->segs[at] != old[0])
        at++;
    /* A fault point stands for the allocations failing. */
    eng_segment **segs = ENG_FAULT("compact.view") ? NULL : malloc((v->n - n + 1) * sizeof *segs);
    eng_segview *nv = NULL;
    if (segs && at + n <= v->n) {
        memcpy(segs, v->segs, at * sizeof *segs);
        segs[at] = cleaned;
        memcpy(segs + at + 1, v->segs + at + n, (v->n - at - n) * sizeof *segs);
        nv = eng__segview_new(segs, v->n - n + 1);
    }
    free(segs);
    return nv;
}

/* The three renames of a swap, then the new segment set.  Until the first
 * rename (to .swap) has moved every file the log reads nothing changed, so
 * a resource running short there (no descriptor for the directory; no
 * room, which rename(2) can say) abandons the clean instead of taking the
 * dir offline (tests/unit/test_compact_swap.c).  An I/O error there, and
 * any error after, still takes it offline: startup finishes or undoes the
 * swap. */
static int swap_in(round *rd, eng_segment *cleaned, eng_segment *const *old, size_t n)
{
    eng_partition *p = rd->p;
    int dirfd = -1;
    int rc = ENG_FAULT("compact.before_swap");
    if (!rc)
        rc = eng_fs_open_dir(p->dir, &dirfd);
    if (!rc)
        rc = eng_segment_rename(cleaned, ".swap");
    if (rc && eng_error_out_of_resources(rc)) {
        ENG_WARN("%s-%d: cannot swap in cleaned segment %020" PRId64 " (%s); the log is unchanged",
                 p->topic, p->id, eng_segment_base(cleaned), eng_strerror(rc));
        /* What the rename moved goes first: startup completes a .swap
         * with no .cleaned file beside it. */
        if (eng_segment_unlink_as(cleaned, ".swap") == 0)
            eng_segment_unlink(cleaned);
        if (dirfd >= 0)
            close(dirfd);
        return rc;
    }
    if (!rc)
        rc = eng_fs_sync_dir_fd(dirfd);
    if (!rc)
        rc = ENG_FAULT("compact.after_swap");
    for (size_t k = 0; !rc && k < n; k++)
        rc = eng_segment_rename(old[k], ".deleted");
    if (!rc)
        rc = ENG_FAULT("compact.before_final");
    if (!rc)
        rc = eng_segment_rename(cleaned, "");
    if (!rc)
        rc = eng_fs_sync_dir_fd(dirfd);
    if (dirfd >= 0)
        close(dirfd);
    if (rc) {
        ENG_ERROR("%s-%d: swapping in cleaned segment %020" PRId64 ": %s (startup will finish "
                  "it); taking the log dir offline",
                  p->topic, p->id, eng_segment_base(cleaned), eng_strerror(rc));
        if (p->dir_offline)
            atomic_store(p->dir_offline, 1);
        return rc;
    }
    pthread_mutex_lock(&p->append_lock);
    eng_segview *nv = swapped_view(p->view, cleaned, old, n);
    if (nv)
        eng__segview_install(p, nv);
    pthread_mutex_unlock(&p->append_lock);
    if (!nv) {
        /* The files are swapped, the log in memory is not: later retention,
         * cleaning or a restart's recovery point would act on segments whose
         * files are gone.  Reads of the old ones still work (their files are
         * open), but only a restart, which loads what is on disk, makes the
         * two agree again. */
        ENG_ERROR("%s-%d: cleaned segment %020" PRId64 " swapped in on disk but not in memory "
                  "(out of memory); taking the log dir offline (a restart loads the swapped files)",
                  p->topic, p->id, eng_segment_base(cleaned));
        if (p->dir_offline)
            atomic_store(p->dir_offline, 1);
        return -ENOMEM;
    }
    for (size_t k = 0; k < n; k++) {
        eng_segment_ref(old[k]);
        eng__partition_dispose(p, old[k]);
    }
    return 0;
}

/* Whether p's config, as it is now, still compacts it. */
static bool still_compacted(eng_partition *p)
{
    eng_config cfg;
    eng_partition_get_config(p, &cfg);
    return (cfg.v[ENG_CFG_CLEANUP_POLICY].i & ENG_POLICY_COMPACT) != 0;
}

static int clean_locked(round *rd)
{
    eng_partition *p = rd->p;
    eng_clean_stats *st = rd->st;
    eng_segview *v = eng__segview_acquire(p);
    eng_clean_range r;
    range_of(p, v, st->first_dirty, rd->o->now_ms, &rd->cfg, &r);
    st->first_dirty = r.first_dirty;
    st->first_uncleanable = r.first_uncleanable;
    st->end_offset = r.first_dirty;
    int rc = 0;
    if (r.first_uncleanable <= r.first_dirty)
        goto done; /* nothing dirty is cleanable yet */
    /* Taken after the view, as Kafka takes them after the cleanable range:
     * the segments cleaned (all but the view's last) were rolled before
     * it, so every batch they hold is in the copy.  A copy taken first
     * missed a producer's batch appended and rolled in between, which
     * then went whole when newer values superseded its records. */
    if ((rc = eng_partition_producers(p, &rd->producers, &rd->nproducers)))
        goto done;
    if ((rc = eng__txn_markers_collect(&rd->txn, v, &rd->scratch)))
        goto done;
    if ((rc = build_map(rd, v)))
        goto done;
    st->map_entries = eng_offset_map_size(rd->o->map);
    st->map_utilization = eng_offset_map_utilization(rd->o->map);
    int64_t latest = eng_offset_map_latest(rd->o->map);
    if (latest < r.first_dirty)
        goto done;
    st->end_offset = latest + 1;
    size_t ncleanable = 0;
    while (ncleanable < v->n - 1 && eng_segment_base(v->segs[ncleanable]) < st->end_offset)
        ncleanable++;
    ENG_INFO("%s-%d: cleaning offsets [%" PRId64 ", %" PRId64 ") over %zu segments%s", p->topic,
             p->id, r.first_dirty, st->end_offset, ncleanable, rd->o->dry_run ? " (dry run)" : "");
    for (size_t from = 0; from < ncleanable && !rc;) {
        size_t to = group_end(rd, v, from, ncleanable);
        eng_segment *cleaned = NULL;
        for (size_t k = from; k < to; k++)
            st->bytes_before += eng_segment_size(v->segs[k]);
        st->segments_before += (uint32_t)(to - from);
        st->segments_after++;
        rc = clean_group(rd, v->segs + from, to - from, &cleaned);
        if (!rc && cleaned && !still_compacted(p)) {
            /* As Kafka aborts the cleaning of a log whose config stops
             * compacting it: records of a topic no longer compacted are not
             * removed by a round that began before the change. */
            eng_segment_unlink(cleaned);
            eng_segment_unref(cleaned);
            cleaned = NULL;
            rc = ENG_ENOTCOMPACT;
        }
        if (!rc && cleaned) {
            rc = swap_in(rd, cleaned, v->segs + from, to - from);
            eng_segment_unref(cleaned); /* the view holds it now */
        }
        from = to;
    }
done:
    eng__segview_release(v);
    return rc;
}

int eng_partition_clean(eng_partition *p, int64_t checkpoint, const eng_clean_opts *o,
                        eng_clean_stats *st)
{
    memset(st, 0, sizeof *st);
    st->dry_run = o->dry_run;
    st->started_ms = eng_now_ms();
    int64_t t0 = eng_mono_ms(); /* the duration must not take a wall-clock step in */
    st->first_dirty = checkpoint;
    round rd = {.p = p, .o = o, .st = st, .started_s = mono_s()};
    eng_partition_get_config(p, &rd.cfg);
    if (!(rd.cfg.v[ENG_CFG_CLEANUP_POLICY].i & ENG_POLICY_COMPACT))
        return ENG_ENOTCOMPACT;
    if (pthread_mutex_trylock(&p->maint_lock) != 0)
        return ENG_EBUSY;
    int rc = atomic_load(&p->retired) ? ENG_ENOTOPIC
             : p->closed                ? ENG_ESHUTDOWN
             : eng__dir_offline(p)      ? ENG_EOFFLINE
                                        : ENG_FAULT("compact.round_start");
    if (!rc)
        rc = clean_locked(&rd);
    pthread_mutex_unlock(&p->maint_lock);
    free(rd.producers);
    eng_buf_free(&rd.scratch);
    eng_buf_free(&rd.out);
    eng__txn_markers_free(&rd.txn);
    st->duration_ms = eng_mono_ms() - t0;
    if (!rc && st->segments_before > 0) {
        double secs = st->duration_ms > 0 ? (double)st->duration_ms / 1000.0 : 0.001;
        /* As Kafka's cleaner reports it: the log processed (each segment
         * once), over the whole clean, mapping pass included. */
        ENG_INFO("%s-%d: %s %u segments (%" PRIu64 " bytes) into %u (%" PRIu64
                 " bytes): %" PRIu64 " records removed, %" PRIu64
                 " tombstones, %.1f MB of log processed at %.1f MB/s",
                 p->topic, p->id, o->dry_run ? "would clean" : "cleaned", st->segments_before,
                 st->bytes_before, st->segments_after, st->bytes_after, st->records_removed,
                 st->tombstones_removed, (double)st->bytes_before / 1e6,
                 (double)st->bytes_before / 1e6 / secs);
    }
    return rc;
}
