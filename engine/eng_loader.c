/*
 * eng_loader.c - turns a partition directory into a segment view at startup.
 *
 * Kafka's LogLoader, in order (kafka-format.md §7 and §17):
 *   1. leftovers: *.deleted and *.cleaned files are removed, .swap files are
 *      completed (eng_swap.c), index files without a .log are removed, and
 *      so are the temporary files of interrupted writes; anything else
 *      unknown is left alone (all from one pass over the directory);
 *   2. segments load sorted by base offset, the last one active;
 *   3. after an unclean stop, the segment holding the recovery point and every
 *      later one are recovered (batches validated, indexes rebuilt, the file
 *      truncated at the first invalid batch, later segments deleted);
 *   4. any other segment whose index is missing or fails its consistency
 *      check is recovered as well, truncated at its first invalid batch but
 *      with the segments after it kept;
 *   5. log end offset = end of the last segment; log start offset =
 *      max(checkpoint, first base); recovery point = log end offset after a
 *      clean stop, else min(checkpoint, log end offset).
 */
#include "eng_partition_impl.h"

#include "eng_fs.h"
#include "eng_logger.h"
#include "eng_swap.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

typedef struct i64_vec {
    int64_t *v;
    size_t n, cap;
} i64_vec;

static int push_i64(i64_vec *a, int64_t x)
{
    if (a->n == a->cap) {
        size_t cap = a->cap ? a->cap * 2 : 16;
        int64_t *nv = realloc(a->v, cap * sizeof *nv);
        if (!nv)
            return -ENOMEM;
        a->v = nv;
        a->cap = cap;
    }
    a->v[a->n++] = x;
    return 0;
}

static bool has_i64(const i64_vec *a, int64_t x)
{
    /* bsearch takes a non-null array even for 0 elements (UB otherwise,
     * and UBSan aborts): a new partition dir has no .log, so v is NULL. */
    return a->n > 0 && bsearch(&x, a->v, a->n, sizeof *a->v, cmp_i64);
}

/* What one pass over a partition directory found: the bases of its
 * segment files by kind (sorted once the pass is done), and the names of
 * leftovers to remove. */
typedef struct dir_scan {
    i64_vec logs, index, timeindex, txnindex;
    char **junk; /* owned names */
    bool *junk_segment; /* a *.deleted or *.cleaned, else a temporary file */
    size_t njunk, capjunk;
    bool swaps; /* a *.swap to complete before anything else */
} dir_scan;

static void dir_scan_free(dir_scan *d)
{
    free(d->logs.v);
    free(d->index.v);
    free(d->timeindex.v);
    free(d->txnindex.v);
    for (size_t i = 0; i < d->njunk; i++)
        free(d->junk[i]);
    free(d->junk);
    free(d->junk_segment);
    memset(d, 0, sizeof *d);
}

static int push_junk(dir_scan *d, const char *name, bool segment)
{
    if (d->njunk == d->capjunk) {
        size_t cap = d->capjunk ? d->capjunk * 2 : 8;
        char **nj = realloc(d->junk, cap * sizeof *nj);
        if (!nj)
            return -ENOMEM;
        d->junk = nj;
        bool *ns = realloc(d->junk_segment, cap * sizeof *ns);
        if (!ns)
            return -ENOMEM;
        d->junk_segment = ns;
        d->capjunk = cap;
    }
    if (!(d->junk[d->njunk] = strdup(name)))
        return -ENOMEM;
    d->junk_segment[d->njunk++] = segment;
    return 0;
}

static void remove_file(const char *dir, const char *name, const char *why)
{
    char path[PATH_MAX];
    if (eng_fs_join(path, sizeof path, dir, name) == 0 && unlink(path) == 0)
        ENG_INFO("removed %s/%s (%s)", dir, name, why);
}

static bool has_suffix(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

/* A temporary file of an eng_fs_write_atomic ("<name>.tmp", ".tmp-XXXXXX")
 * or of a producer snapshot that a crash interrupted: its rename never
 * happened, so the file it was to replace is intact and it is garbage
 * (found by tests/crash: a kill -9 mid-write left one behind for good).
 * Only regular files: a directory of that name is someone's. */
static bool stale_tmp(const char *dir, const struct dirent *e)
{
    size_t n = strlen(e->d_name);
    if (!((n > 4 && strcmp(e->d_name + n - 4, ".tmp") == 0) || strncmp(e->d_name, ".tmp-", 5) == 0))
        return false;
    if (e->d_type == DT_REG)
        return true;
    if (e->d_type != DT_UNKNOWN)
        return false;
    char path[PATH_MAX];
    struct stat st;
    return eng_fs_join(path, sizeof path, dir, e->d_name) == 0 && lstat(path, &st) == 0 &&
           S_ISREG(st.st_mode);
}

/* Lists dir once, changing nothing. */
static int list_dir(const char *dir, dir_scan *d)
{
    DIR *dh = opendir(dir);
    if (!dh)
        return -errno;
    int rc = 0;
    struct dirent *e;
    while (!rc && (e = readdir(dh))) {
        if (stale_tmp(dir, e)) {
            rc = push_junk(d, e->d_name, false);
            continue;
        }
        const char *rest;
        int64_t base = eng_fs_segment_name_base(e->d_name, &rest);
        if (base < 0)
            continue;
        if (has_suffix(rest, ".swap"))
            d->swaps = true;
        else if (has_suffix(rest, ".deleted") || has_suffix(rest, ".cleaned"))
            rc = push_junk(d, e->d_name, true);
        else if (strcmp(rest, ".log") == 0)
            rc = push_i64(&d->logs, base);
        else if (strcmp(rest, ".index") == 0)
            rc = push_i64(&d->index, base);
        else if (strcmp(rest, ".timeindex") == 0)
            rc = push_i64(&d->timeindex, base);
        else if (strcmp(rest, ".txnindex") == 0)
            rc = push_i64(&d->txnindex, base);
    }
    closedir(dh);
    return rc;
}

static void remove_orphans(const char *dir, const dir_scan *d, const i64_vec *idx, const char *ext)
{
    for (size_t i = 0; i < idx->n; i++) {
        if (has_i64(&d->logs, idx->v[i]))
            continue;
        char name[48];
        snprintf(name, sizeof name, "%020" PRId64 "%s", idx->v[i], ext);
        remove_file(dir, name, "index without a .log");
    }
}

/* Step 1 and the list of .log bases, from one pass over dir: a start read
 * each partition directory about six times, and with thousands of
 * partitions those passes were a good share of a start's system calls.
 * A .swap found means a second pass, after eng_swap_complete, which
 * renames and removes files (and must see the .cleaned files first). */
static int scan_dir(const char *dir, dir_scan *d, eng_load_stats *st)
{
    int rc = list_dir(dir, d);
    if (!rc && d->swaps) {
        dir_scan_free(d);
        if (!(rc = eng_swap_complete(dir)))
            rc = list_dir(dir, d);
    }
    if (rc)
        return rc;
    for (size_t i = 0; i < d->njunk; i++) {
        if (d->junk_segment[i]) {
            remove_file(dir, d->junk[i], "leftover from an interrupted delete or clean");
            st->segments_deleted++;
        } else {
            remove_file(dir, d->junk[i], "left by an interrupted write");
        }
    }
    i64_vec *sorted[] = {&d->logs, &d->index, &d->timeindex, &d->txnindex};
    for (size_t i = 0; i < sizeof sorted / sizeof *sorted; i++)
        if (sorted[i]->n > 0)
            qsort(sorted[i]->v, sorted[i]->n, sizeof *sorted[i]->v, cmp_i64);
    /* Orphan indexes: an index whose .log is gone can only mislead. */
    remove_orphans(dir, d, &d->index, ".index");
    remove_orphans(dir, d, &d->timeindex, ".timeindex");
    remove_orphans(dir, d, &d->txnindex, ".txnindex");
    return 0;
}


/* True if the segment's indexes exist and pass the consistency check. */
static bool indexes_ok(eng_segment *seg, bool sealed)
{
    char path[PATH_MAX];
    if (eng_segment_file_path(seg, ".index", path, sizeof path) || !eng_fs_exists(path))
        return false;
    if (eng_segment_file_path(seg, ".timeindex", path, sizeof path) || !eng_fs_exists(path))
        return false;
    eng_index *oi = eng_segment_offset_index(seg), *ti = eng_segment_time_index(seg);
    if (!oi || !ti)
        return false;
    uint64_t size = eng_segment_size(seg);
    if (eng_index_check(oi, size) || eng_index_check(ti, size ? size : 1))
        return false;
    /* A sealed segment's index longer than its entries was never finished
     * (a start killed, or refused for a full disk, while it rebuilt a
     * missing one): trusted, its time index lost the segment's largest
     * timestamp, and reads by timestamp skipped the segment. */
    return !sealed || (eng_index_trimmed(oi) && eng_index_trimmed(ti));
}

static void drop_segment_files(eng_segment *seg, eng_load_stats *st)
{
    eng_segment_unlink(seg);
    st->segments_deleted++;
}

/* The segments after a torn unflushed one, which its truncation makes
 * unreachable history (Kafka's recoverLog). */
typedef struct later_segments {
    eng_partition *p;
    eng_segment **segs;
    size_t from, n;
    eng_load_stats *st;
    bool dropped;
} later_segments;

/* Deletes them, durably, before the torn segment is cut (the before_cut of
 * eng_segment_recover_cut): deleted after it, a crash in between left them
 * behind the cut segment, and the next start, finding that one whole, kept
 * them, with a gap in the offsets and the history the first start had
 * dropped. */
static int drop_later_segments(void *arg)
{
    later_segments *l = arg;
    for (size_t k = l->from; k < l->n; k++) {
        ENG_WARN("%s-%d: deleting segment %020" PRId64 " after a truncation", l->p->topic,
                 l->p->id, eng_segment_base(l->segs[k]));
        l->st->bytes_truncated += eng_segment_size(l->segs[k]);
        drop_segment_files(l->segs[k], l->st);
    }
    l->dropped = true;
    return eng_fs_sync_dir(l->p->dir);
}

int eng__partition_load(eng_partition *p, const eng_partition_params *pp, eng_load_stats *st)
{
    int rc = pp->defer_dir_sync ? eng_fs_mkdir(p->dir) : eng_fs_mkdir_durable(p->dir);
    if (rc)
        return rc;
    dir_scan d = {0};
    eng_segment **segs = NULL;
    bool *missing = NULL;
    size_t nsegs = 0;
    if ((rc = scan_dir(p->dir, &d, st)))
        goto done;
    eng_config cfg = pp->config;
    int64_t lso_ckpt = pp->log_start_offset;
    if (d.logs.n == 0) {
        eng_segment_opts o;
        eng__segment_opts(p, &cfg, true, &o);
        int64_t base = lso_ckpt > 0 ? lso_ckpt : 0;
        if (!(segs = malloc(sizeof *segs))) {
            rc = -ENOMEM;
            goto done;
        }
        if ((rc = eng_segment_create(p->dir, base, &o, &segs[0])))
            goto done;
        nsegs = 1;
    } else {
        if (!(segs = calloc(d.logs.n, sizeof *segs)) ||
            !(missing = calloc(d.logs.n, sizeof *missing))) {
            rc = -ENOMEM;
            goto done;
        }
        bool torn_tail = false;
        for (size_t i = 0; i < d.logs.n; i++) {
            /* Looked at before the open: opening a segment active creates its
             * missing indexes empty, and empty indexes pass indexes_ok, so
             * the active segment was never rebuilt (found by
             * tests/unit/test_corruption.c).  Kafka recovers any segment
             * whose index is missing. */
            missing[i] = !has_i64(&d.index, d.logs.v[i]) || !has_i64(&d.timeindex, d.logs.v[i]);
            eng_segment_opts o;
            eng__segment_opts(p, &cfg, false, &o);
            bool active = i + 1 == d.logs.n;
            rc = eng_segment_open(p->dir, d.logs.v[i], &o, active, &segs[i]);
            if (rc == ENG_ECORRUPT && active) {
                /* Opening a segment active scans its tail for the next offset,
                 * which fails on a torn or garbage tail (an unclean stop, or
                 * a preallocated .log's zeros).  Open it inactive instead;
                 * it is recovered below and then reopened active. */
                torn_tail = true;
                rc = eng_segment_open(p->dir, d.logs.v[i], &o, false, &segs[i]);
            }
            if (rc)
                goto done;
            nsegs++;
        }
        /* Recovery: from the segment holding the recovery point (unclean), or
         * any segment whose indexes cannot be trusted (always). */
        size_t first_recover = nsegs;
        if (!pp->clean_shutdown) {
            first_recover = 0;
            for (size_t i = 0; i < nsegs; i++)
                if (eng_segment_base(segs[i]) <= pp->recovery_point)
                    first_recover = i;
        }
        for (size_t i = 0; i < nsegs; i++) {
            if (i < first_recover) {
                bool sealed = i + 1 < nsegs;
                const char *why = missing[i]                  ? "an index file is missing"
                                  : torn_tail && !sealed       ? "its tail does not parse"
                                  : eng_segment_index_distrusted(segs[i])
                                      ? "its last offset index entry points off its batch"
                                  : !indexes_ok(segs[i], sealed) ? "an index fails its check"
                                                                 : NULL;
                if (!why)
                    continue;
                ENG_INFO("%s-%d: rebuilding segment %020" PRId64 "'s indexes: %s", p->topic,
                         p->id, eng_segment_base(segs[i]), why);
            }
            eng_recover_stats rs;
            int64_t next_base = i + 1 < nsegs ? eng_segment_base(segs[i + 1]) : INT64_MAX;
            /* Below the recovery point only this segment loses its tail
             * (see below); above it, the segments after go first. */
            later_segments later = {.p = p, .segs = segs, .from = i + 1, .n = nsegs, .st = st};
            bool drops_later = i >= first_recover && i + 1 < nsegs;
            rc = eng_segment_recover_cut(segs[i], next_base, drops_later ? drop_later_segments : NULL,
                                         &later, &rs);
            if (later.dropped) {
                /* Gone from disk: gone from the list too, even when the
                 * recovery then failed (the caller frees the list). */
                for (size_t k = i + 1; k < nsegs; k++)
                    eng_segment_unref(segs[k]);
                nsegs = i + 1;
            }
            if (rc)
                goto done;
            st->segments_recovered++;
            /* Below the recovery point no flush revisits the segment: its
             * rebuilt indexes (and any truncation) are synced now.  A sealed
             * segment above it is synced too: its rebuilt indexes keep their
             * descriptors until a sync, and a partition with many such
             * segments (a crash right after rolls) needed twice the
             * descriptors of a clean start, so a server that ran fine could
             * not start again after a crash (EMFILE). */
            if ((i < first_recover || i + 1 < nsegs) && (rc = eng_segment_sync(segs[i])))
                goto done;
            if (rs.zero_tail && cfg.v[ENG_CFG_PREALLOCATE].i && i + 1 == nsegs) {
                /* The active segment of a preallocating topic: the zeros are
                 * the file's unused space, trimmed as Kafka does, not data. */
                ENG_INFO("%s-%d: segment %020" PRId64 " trimmed to its data at byte %" PRIu64
                         " (%" PRIu64 " bytes of preallocated space)",
                         p->topic, p->id, eng_segment_base(segs[i]), rs.valid_bytes,
                         rs.truncated_bytes);
                /* Reopened, it no longer counts as preallocated, so a roll
                 * would not trim it again: the trim goes to disk now, or a
                 * power loss could bring the zeros back once the recovery
                 * point has passed it (see eng_segment_trim_preallocated). */
                if ((rc = eng_segment_sync_data(segs[i])))
                    goto done;
                continue;
            }
            st->bytes_truncated += rs.truncated_bytes;
            if (rs.truncated_bytes == 0)
                continue;
            ENG_WARN("%s-%d: segment %020" PRId64 " truncated at byte %" PRIu64 " (%" PRIu64
                     " bytes dropped): %s",
                     p->topic, p->id, eng_segment_base(segs[i]), rs.valid_bytes,
                     rs.truncated_bytes, rs.stop_reason ? rs.stop_reason : "invalid tail");
            /* The last one, or the segments after it went before the cut
             * (drop_later_segments): it becomes the active one below. */
            if (i + 1 == nsegs)
                break;
            /* Otherwise it was recovered for its index alone, below the
             * recovery point: the segments after it were flushed and are
             * whole, so only this one loses its damaged tail (as in Kafka's
             * loadSegmentFiles). */
        }
        /* A torn active segment, or one the segments after it were dropped
         * for, was opened inactive for its recovery; with its tail now valid
         * it becomes the active one. */
        if (!eng_segment_is_active(segs[nsegs - 1])) {
            eng_segment_opts o;
            eng__segment_opts(p, &cfg, false, &o);
            int64_t base = eng_segment_base(segs[nsegs - 1]);
            eng_segment_unref(segs[nsegs - 1]);
            if ((rc = eng_segment_open(p->dir, base, &o, true, &segs[nsegs - 1]))) {
                nsegs--;
                goto done;
            }
        }
    }
    st->segments = (uint32_t)nsegs;
    eng_segview *v = eng__segview_new(segs, nsegs);
    if (!v) {
        rc = -ENOMEM;
        goto done;
    }
    p->view = v;
    /* A close syncs only what its segment objects changed.  The active
     * segment's files may hold what no sync covered: a previous process's
     * unflushed appends (an unclean stop), or a recovery's rebuilt indexes
     * and truncation, made through objects the loader has since replaced.
     * Only after a clean stop with nothing rebuilt are they as that stop
     * synced them. */
    if (!pp->clean_shutdown || st->segments_recovered > 0)
        eng_segment_mark_unsynced(segs[nsegs - 1]);
    int64_t leo = eng_segment_next_offset(segs[nsegs - 1]);
    int64_t first_base = eng_segment_base(segs[0]);
    int64_t lso = lso_ckpt > first_base ? lso_ckpt : first_base;
    if (lso > leo)
        lso = leo;
    atomic_store(&p->log_end_offset, leo);
    atomic_store(&p->high_watermark, leo);
    atomic_store(&p->log_start_offset, lso);
    /* After an unclean stop, what recovery read past the checkpoint may be
     * in the page cache only (the process died, the machine did not): the
     * recovery point stays at the checkpoint until a flush syncs the rest,
     * as in Kafka's LogLoader, so a second crash recovers it again. */
    int64_t rp = pp->clean_shutdown || pp->recovery_point > leo ? leo : pp->recovery_point;
    atomic_store(&p->recovery_point, rp);
    rc = eng__partition_load_producers(p, pp->clean_shutdown);
done:
    for (size_t i = 0; i < nsegs; i++)
        eng_segment_unref(segs[i]);
    free(segs);
    free(missing);
    dir_scan_free(&d);
    return rc;
}
