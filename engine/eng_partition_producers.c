/*
 * eng_partition_producers.c - a partition's idempotent-producer state
 * outside the append path: rebuilding it at startup (Kafka's
 * UnifiedLog.rebuildProducerState), listing it, expiring producers.
 */
#include "eng_batch_reader.h"
#include "eng_fs.h"
#include "eng_logger.h"
#include "eng_partition_impl.h"

#include <inttypes.h>
#include <stdlib.h>

/* Replays the batches of [from, end of log) into p->producers. */
static int replay_from(eng_partition *p, int64_t from)
{
    eng_segview *v = p->view;
    ssize_t first = eng__segview_floor(v, from);
    for (size_t i = first < 0 ? 0 : (size_t)first; i < v->n; i++) {
        eng_batch_reader r;
        int rc = eng_batch_reader_init(&r, v->segs[i], 0, eng_segment_size(v->segs[i]), 1 << 20);
        if (rc)
            return rc;
        eng_batch_pos b;
        const uint8_t *bytes;
        while ((rc = eng_batch_reader_next(&r, &b, &bytes)) == 1) {
            if (b.header.base_offset >= from && (rc = eng_producers_replay(&p->producers, &b.header)))
                break;
        }
        eng_batch_reader_free(&r);
        if (rc == ENG_ECORRUPT) {
            /* Damage reads report too; the producers past it are unknown,
             * and unknown producers are taken at any sequence. */
            ENG_WARN("%s-%d: segment %020" PRId64 " stops parsing; producer state is rebuilt "
                     "without its rest",
                     p->topic, p->id, eng_segment_base(v->segs[i]));
            continue;
        }
        if (rc < 0)
            return rc;
    }
    return 0;
}

/* Loads the state; *stands_on is the offset of the snapshot that now
 * holds it (-1 if none does). */
static int load(eng_partition *p, bool clean_shutdown, int64_t *stands_on)
{
    int64_t leo = atomic_load(&p->log_end_offset);
    int64_t lso = atomic_load(&p->log_start_offset);
    int64_t now = eng_now_ms();
    int64_t at;
    bool found;
    int rc = eng_producers_load_latest(&p->producers, p->dir, leo, now, p->producer_expiration_ms,
                                       &at, &found);
    *stands_on = at;
    /* After a clean stop the snapshot at the log end is the one that stop
     * synced (or kept, having found it so): a stop with nothing new to
     * say need not write it again. */
    if (!rc && at == leo && clean_shutdown)
        p->snapshot_synced_at = leo;
    if (rc || at == leo)
        return rc;
    if (!found && clean_shutdown) {
        /* Kafka after a clean stop with no snapshot file (a log from before
         * producer state was kept): no scan, nobody known; the snapshot
         * written here spares the next start after a crash a full scan.
         * Snapshots that were there but did not read are no such log: the
         * producers they held are rebuilt from it, as Kafka does. */
        if (leo > lso && !eng_producers_write_snapshot(&p->producers, p->dir, leo, false)) {
            *stands_on = leo;
            atomic_store(&p->snap_written, leo);
        }
        return 0;
    }
    /* The batches after the snapshot are replayed from it even below the
     * log start offset: delete-records moves the start without touching
     * the running state (as in Kafka), and they are still in the segments;
     * starting at the log start instead kept the snapshot's older
     * sequences, refusing the producers' next batches.  A snapshot below
     * the first segment cannot be brought up to date: it is not used. */
    if (at >= 0 && at < eng_segment_base(p->view->segs[0])) {
        eng_producers_free(&p->producers);
        at = *stands_on = -1;
    }
    /* With no usable snapshot the whole log is read, from its first
     * segment, not from the log start: batches below a delete-records
     * start are still there and may be a producer's last, and forgetting
     * that producer would store a retry of its acknowledged batch again. */
    int64_t from = at >= 0 ? at : eng_segment_base(p->view->segs[0]);
    int64_t t0 = eng_mono_ms();
    if ((rc = replay_from(p, from)))
        return rc;
    eng_producers_expire(&p->producers, now, p->producer_expiration_ms);
    if (p->producers.n || at >= 0)
        ENG_INFO("%s-%d: %zu idempotent producers rebuilt from offset %" PRId64 " in %" PRId64
                 " ms",
                 p->topic, p->id, p->producers.n, from, eng_mono_ms() - t0);
    rc = eng_producers_write_snapshot(&p->producers, p->dir, leo, false);
    if (rc) {
        ENG_WARN("%s-%d: writing the producer snapshot at %020" PRId64 ": %s", p->topic, p->id,
                 leo, eng_strerror(rc));
    } else {
        *stands_on = leo;
        atomic_store(&p->snap_written, leo);
    }
    return 0;
}

int eng__partition_load_producers(eng_partition *p, bool clean_shutdown)
{
    int64_t stands_on;
    int rc = load(p, clean_shutdown, &stands_on);
    if (rc)
        return rc;
    atomic_store_explicit(&p->producer_count, p->producers.n, memory_order_relaxed);
    /* Each clean stop leaves a snapshot no segment names; without this they
     * piled up, one a restart, for good. */
    eng_segview *v = p->view;
    int64_t *bases = malloc(v->n * sizeof *bases);
    if (!bases)
        return 0; /* they wait for a start with memory to spare */
    for (size_t i = 0; i < v->n; i++)
        bases[i] = eng_segment_base(v->segs[i]);
    eng_producers_remove_stray(p->dir, bases, v->n, stands_on);
    free(bases);
    return 0;
}

int eng_partition_producers(eng_partition *p, eng_producer_entry **out, size_t *n)
{
    pthread_mutex_lock(&p->append_lock);
    int rc = eng_producers_copy(&p->producers, out, n);
    pthread_mutex_unlock(&p->append_lock);
    return rc;
}

size_t eng_partition_expire_producers(eng_partition *p, int64_t now_ms)
{
    pthread_mutex_lock(&p->append_lock);
    size_t n = eng_producers_expire(&p->producers, now_ms, p->producer_expiration_ms);
    atomic_store_explicit(&p->producer_count, p->producers.n, memory_order_relaxed);
    if (n)
        p->snapshot_synced_at = -1; /* the state on disk has producers this one dropped */
    pthread_mutex_unlock(&p->append_lock);
    if (n)
        ENG_INFO("%s-%d: %zu idempotent producers expired (producer.id.expiration.ms %" PRId64 ")",
                 p->topic, p->id, n, p->producer_expiration_ms);
    return n;
}
