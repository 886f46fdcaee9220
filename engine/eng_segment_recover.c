/*
 * eng_segment_recover.c - rebuilding a segment from its .log (Kafka's
 * LogSegment.recover, kafka-format.md §13.3).
 *
 * Every batch is validated before it counts: the length against the file
 * before anything is allocated, magic, CRC, record framing, offsets
 * increasing and within the segment (below the next segment's base when
 * the loader names one).  The indexes are rebuilt exactly as
 * appends would have built them, and the file is truncated at the first
 * invalid batch.  Runs single-threaded at startup.
 */
#include "eng_segment_impl.h"

#include "eng_compress.h"
#include "eng_error.h"
#include "eng_fault.h"
#include "eng_logger.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static bool no_room(int rc)
{
    return rc == -ENOSPC || rc == -EDQUOT;
}

/* Validates one batch read whole into buf, as recovery must: CRC, framing of
 * every record, offsets within the segment and after the previous batch. */
static const char *check_batch(eng_segment *s, const eng_batch_header *h, eng_buf *buf,
                               eng_buf *scratch, int64_t prev_next, int64_t next_base)
{
    eng_batch_header v;
    int rc = eng_batch_validate(buf->data, buf->len, &v);
    if (rc == ENG_ECRC)
        return "CRC mismatch";
    if (rc)
        return "malformed batch";
    if (h->base_offset < s->base || h->base_offset < prev_next)
        return "offsets not increasing";
    if (eng_batch_last_offset(h) - s->base > INT32_MAX)
        return "offset beyond the segment's range";
    if (eng_batch_last_offset(h) >= next_base)
        return "offsets reach the next segment";
    if ((h->attributes & ENG_ATTR_CODEC_MASK) != ENG_CODEC_NONE) {
        const uint8_t *recs;
        size_t len;
        eng_record_iter it;
        eng_record r;
        if (eng_batch_plain_records(buf->data, h, scratch, &recs, &len))
            return "compressed records do not decompress";
        eng_record_iter_init(&it, h, recs, len);
        while ((rc = eng_record_iter_next(&it, &r)) == 1)
            ;
        if (rc)
            return "malformed compressed records";
    }
    return NULL;
}

int eng_segment_recover(eng_segment *s, eng_recover_stats *st)
{
    return eng_segment_recover_below(s, INT64_MAX, st);
}

int eng_segment_recover_below(eng_segment *s, int64_t next_base, eng_recover_stats *st)
{
    return eng_segment_recover_cut(s, next_base, NULL, NULL, st);
}

int eng_segment_recover_cut(eng_segment *s, int64_t next_base, int (*before_cut)(void *ctx),
                            void *ctx, eng_recover_stats *st)
{
    memset(st, 0, sizeof *st);
    st->next_offset = s->base;
    struct stat fst;
    if (fstat(s->log_fd, &fst) < 0)
        return -errno;
    uint64_t file_size = (uint64_t)fst.st_size;
    int rc = eng__segment_open_indexes(s, true);
    if (rc)
        return rc;
    eng_index *oi = atomic_load(&s->oidx), *ti = atomic_load(&s->tidx);
    uint32_t had_oi = eng_index_entries(oi), had_ti = eng_index_entries(ti);
    eng_index_reset(oi);
    eng_index_reset(ti);
    eng_buf buf = {0}, scratch = {0};
    uint64_t valid = 0, last_entry = 0;
    int64_t max_ts = -1, off_of_max = -1, next = s->base;
    uint8_t hb[ENG_BATCH_OVERHEAD];
    /* An index with no room for its next entry (a full disk: a rebuild of
     * a missing index, or of entries a power loss kept from the disk)
     * keeps those it has, as a full one does, rather than fail the start:
     * the server must start on a full disk for space to be freed through
     * its API.  Refusing made every start exit until space was freed by
     * hand (found by running the server on a full ext4). */
    bool oi_short = false, ti_short = false;
    for (;;) {
        size_t got;
        if (file_size - valid < ENG_BATCH_OVERHEAD) {
            if (file_size != valid)
                st->stop_reason = "torn batch header at the end";
            break;
        }
        if ((rc = eng_segment_pread(s, hb, sizeof hb, valid, &got)))
            goto done;
        eng_batch_header h;
        if (got != sizeof hb || eng_batch_header_decode(hb, got, &h)) {
            static const uint8_t zeros[ENG_BATCH_OVERHEAD];
            st->zero_tail = got == sizeof hb && memcmp(hb, zeros, sizeof hb) == 0;
            st->stop_reason = st->zero_tail ? "zeros past the data" : "invalid batch header";
            break;
        }
        /* The length is checked against the file before anything is allocated. */
        if (eng_batch_size(&h) > file_size - valid) {
            st->stop_reason = "batch extends past the end of the file";
            break;
        }
        eng_batch_pos b = {.position = valid, .header = h};
        if ((rc = eng__segment_read_batch(s, &b, &buf)))
            goto done;
        const char *why = check_batch(s, &h, &buf, &scratch, next, next_base);
        if (why) {
            st->stop_reason = why;
            break;
        }
        if (h.max_timestamp > max_ts) {
            max_ts = h.max_timestamp;
            off_of_max = eng_batch_last_offset(&h);
        }
        if (valid - last_entry > s->opts.index_interval) {
            /* An index that fills up keeps the entries it has (a sparser
             * index is still valid: reads scan further from an earlier
             * entry).  It fills when index.interval.bytes was lowered after
             * the segment was written; refusing failed the whole start
             * (found by a chaos run: kill -9, then exit 1).  The time
             * index keeps its last slot for the final entry below. */
            if (!oi_short && !eng_index_is_full(oi) &&
                (rc = eng_offset_index_append(oi, eng_batch_last_offset(&h), (uint32_t)valid)) &&
                !(oi_short = no_room(rc)))
                goto done;
            if (!ti_short && !eng_index_is_full(ti) &&
                (rc = eng_time_index_maybe_append(ti, max_ts, off_of_max, false)) &&
                !(ti_short = no_room(rc)))
                goto done;
            rc = 0;
            last_entry = valid;
        }
        valid += eng_batch_size(&h);
        next = eng_batch_last_offset(&h) + 1;
        st->batches++;
    }
    if (valid < file_size) {
        if (before_cut && (rc = before_cut(ctx)))
            goto done;
        if (ftruncate(s->log_fd, (off_t)valid) < 0) {
            rc = -errno;
            goto done;
        }
        atomic_store(&s->log_dirty, true);
        if ((rc = ENG_FAULT("segment.recover.after_cut")))
            goto done;
    }
    st->valid_bytes = valid;
    st->truncated_bytes = file_size - valid;
    st->next_offset = next;
    if (max_ts >= 0 && (rc = eng_time_index_maybe_append(ti, max_ts, off_of_max, true))) {
        /* A sealed segment's largest timestamp survives a restart only as
         * this entry (the active one's seal writes it again).  With no
         * room for it (a full disk), the file goes: the next start rebuilds
         * it, where it would trust an index that makes reads by timestamp
         * skip the segment's newest records and retention.ms judge it by
         * its mtime.  This run keeps the timestamp in memory. */
        if (!eng_segment_is_active(s)) {
            ENG_WARN("segment %020lld: no room for its final time-index entry (%s); the "
                     "index is rebuilt at the next start",
                     (long long)s->base, eng_strerror(rc));
            if ((rc = eng_segment_drop_index_file(s, ".timeindex")))
                goto done;
        }
        rc = 0;
    }
    if (oi_short && !eng_segment_is_active(s)) {
        /* Sparse is valid (reads scan further), but only a rebuild makes
         * it whole again, and a clean start trusts a file it finds: it
         * goes, like a time index without its final entry above. */
        ENG_WARN("segment %020lld: no room for its offset-index entries; the index is rebuilt "
                 "at the next start",
                 (long long)s->base);
        if ((rc = eng_segment_drop_index_file(s, ".index")))
            goto done;
    } else if (oi_short || ti_short) {
        ENG_WARN("segment %020lld: no room for some index entries; reads of it scan further",
                 (long long)s->base);
    }
    /* The active segment's indexes stay as they are when nothing stale
     * follows the rebuilt entries (a crash's usual case: the same entries
     * again, then the zeros of the blocks reserved ahead).  Trimming them,
     * only to grow them back below, cost four ftruncates a partition, and
     * on ext4 a shrink waits its turn in the journal: most of a start
     * after kill -9 with 2,000 partitions (tests/bench/bench_startup.c).
     * Stale entries (the rebuild stopped short of them) are still cut, or
     * the next open would count them. */
    bool keep_size = eng_segment_is_active(s) && eng_index_zero_past(oi, had_oi) &&
                     eng_index_zero_past(ti, had_ti);
    if (!keep_size && ((rc = eng_index_trim(oi)) || (rc = eng_index_trim(ti))))
        goto done;
    atomic_store(&s->size, valid);
    atomic_store(&s->next_offset, next);
    atomic_store(&s->max_ts, max_ts);
    atomic_store(&s->offset_of_max_ts, off_of_max);
    atomic_store(&s->max_ts_loaded, true);
    s->bytes_since_index = 0;
    atomic_store(&s->index_distrusted, false); /* its entries now come from its batches */
    if (!eng_segment_is_active(s)) {
        eng_index_seal(oi); /* its descriptors close at the next sync */
        eng_index_seal(ti);
    } else {
        /* The active segment keeps growing: expand its indexes again. */
        if (!keep_size && (rc = eng__segment_open_indexes(s, true)))
            goto done;
        if (valid > 0) {
            eng_batch_header h;
            size_t got;
            if (!eng_segment_pread(s, hb, sizeof hb, 0, &got) && got == sizeof hb &&
                !eng_batch_header_decode(hb, got, &h))
                s->first_batch_ts = h.max_timestamp;
        }
    }
done:
    eng_buf_free(&buf);
    eng_buf_free(&scratch);
    return rc;
}

