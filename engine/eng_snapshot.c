/*
 * eng_snapshot.c - point-in-time snapshots of the data dir (eng_snapshot.h
 * says what one holds and why it is consistent).
 *
 * One snapshot is taken at a time (m->snap_lock), so any snapshots/.partial-*
 * found while holding it was left by a crash or a failure and is removed.
 * Topics are taken one by one, each with its description and partitions from
 * one incarnation of its name; a topic deleted while it is being taken is
 * left out whole (its metadata is written only after all its partitions).
 */
#include "eng_snapshot.h"
#include "eng_snapshot_impl.h"

#include "eng_checkpoint.h"
#include "eng_cleaner.h"
#include "eng_fault.h"
#include "eng_fs.h"
#include "eng_logger.h"
#include "eng_manager_impl.h"
#include "eng_partition_impl.h"
#include "eng_segment.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define PARTIAL_PREFIX ".partial-"
#define COPY_CHUNK (1u << 20)
#define MAINT_POLL_NS 10000000L /* 10 ms */

_Static_assert(sizeof PARTIAL_PREFIX - 1 + ENG_SNAPSHOT_NAME_MAX <= NAME_MAX,
               "snapshots/.partial-<name> must fit a file name");

bool eng_snapshot_name_valid(const char *name)
{
    return name && name[0] != '.' && strlen(name) <= ENG_SNAPSHOT_NAME_MAX && eng_topic_name_valid(name);
}

/* ENG_ESHUTDOWN once a stop is coming (eng_manager_request_stop): the
 * server's stop waits for the request taking the snapshot, and a snapshot
 * of a large data dir copies for longer than a stop's grace, so it gives up
 * between partitions and between the MiB it copies. */
static int stopping(const eng_manager *m)
{
    return atomic_load(&((eng_manager *)m)->stop_requested) ? ENG_ESHUTDOWN : 0;
}

/* ---- files ---------------------------------------------------------------- */

/* Copies [0, len) of the open file `fd` to a new file `to`, fsync'd. */
static int copy_fd(const eng_manager *m, int fd, uint64_t len, const char *to)
{
    int out = open(to, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (out < 0)
        return -errno;
    uint8_t *buf = malloc(COPY_CHUNK);
    int rc = buf ? 0 : -ENOMEM;
    for (uint64_t pos = 0; !rc && pos < len && !(rc = stopping(m));) {
        size_t want = len - pos < COPY_CHUNK ? (size_t)(len - pos) : COPY_CHUNK;
        ssize_t got = pread(fd, buf, want, (off_t)pos);
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0) {
            rc = got < 0 ? -errno : -EIO; /* shorter than its committed size */
            break;
        }
        rc = ENG_FAULT("snapshot.copy");
        if (!rc)
            rc = eng_fs_pwrite_all(out, buf, (size_t)got, pos);
        pos += (uint64_t)got;
    }
    free(buf);
    if (!rc && fsync(out) < 0)
        rc = -errno;
    close(out);
    if (rc)
        unlink(to);
    return rc;
}

/* Copies the whole file `from` to `to`; -ENOENT when `from` is missing. */
static int copy_path(const eng_manager *m, const char *from, const char *to)
{
    int fd = open(from, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    struct stat st;
    int rc = fstat(fd, &st) < 0 ? -errno : copy_fd(m, fd, (uint64_t)st.st_size, to);
    close(fd);
    return rc;
}

/* Hard-links `from` as `to` (a copy where the file system links nothing),
 * then fsyncs it: a sealed segment's own flush may still be pending. */
static int link_or_copy(const eng_manager *m, const char *from, const char *to)
{
    int rc = ENG_FAULT("snapshot.link"); /* exdev, eperm: a file system that links nothing */
    if (!rc && link(from, to) == 0)
        return eng_fs_sync_file(to);
    if (!rc)
        rc = -errno;
    if (rc != -EXDEV && rc != -EPERM && rc != -EMLINK && rc != -EOPNOTSUPP)
        return rc;
    return copy_path(m, from, to);
}

/* ---- one partition ----------------------------------------------------------- */

/* The partition's files that are not segments: copied as they are now. */
static int copy_partition_files(const eng_manager *m, const char *src, const char *dst,
                                int64_t active_base)
{
    static const char *const names[] = {"leader-epoch-checkpoint", "partition.metadata", NULL};
    char from[PATH_MAX], to[PATH_MAX];
    for (int i = 0; names[i]; i++) {
        if (eng_fs_join(from, sizeof from, src, names[i]) || eng_fs_join(to, sizeof to, dst, names[i]))
            return ENG_EINVAL;
        int rc = copy_path(m, from, to);
        if (rc && rc != -ENOENT)
            return rc;
    }
    /* Producer snapshots up to the active segment's base; a roll after the
     * partition was taken writes later ones, which belong to data not in it. */
    DIR *dh = opendir(src);
    if (!dh)
        return -errno;
    int rc = 0;
    struct dirent *e;
    while (!rc && (e = readdir(dh))) {
        const char *rest;
        int64_t base = eng_fs_segment_name_base(e->d_name, &rest);
        if (base < 0 || base > active_base || strcmp(rest, ".snapshot"))
            continue;
        if ((rc = eng_fs_join(from, sizeof from, src, e->d_name)) ||
            (rc = eng_fs_join(to, sizeof to, dst, e->d_name)))
            break;
        rc = copy_path(m, from, to);
        if (rc == -ENOENT) /* removed since the listing */
            rc = 0;
    }
    closedir(dh);
    return rc;
}

/* Links (.log) or copies (indexes) one sealed segment into dst. */
static int take_sealed(const eng_manager *m, eng_segment *seg, const char *dst)
{
    static const char *const exts[] = {".log", ".index", ".timeindex", ".txnindex", NULL};
    char from[PATH_MAX], to[PATH_MAX];
    for (int i = 0; exts[i]; i++) {
        int rc = eng_segment_file_path(seg, exts[i], from, sizeof from);
        if (!rc)
            rc = eng_fs_segment_path(to, sizeof to, dst, eng_segment_base(seg), exts[i]);
        if (!rc)
            rc = i == 0 ? link_or_copy(m, from, to) : copy_path(m, from, to);
        /* A missing index is rebuilt by the loader from the .log. */
        if (rc && !(i > 0 && rc == -ENOENT))
            return rc;
    }
    return 0;
}

/* Takes p's maint_lock, unless a stop comes first (ENG_ESHUTDOWN): a
 * compaction round under way holds it for as long as the round takes, and
 * the cleaner is told to stop only once the requests are done
 * (eng_manager_close), so a snapshot blocked on it held the stop for the
 * rest of the round.  Tried in 10 ms slices: retention and the cleaner only
 * ever try it, and a delete's retire that takes it first leaves the
 * partition retired, which the caller then finds. */
static int lock_maint(const eng_manager *m, eng_partition *p)
{
    while (pthread_mutex_trylock(&p->maint_lock) != 0) {
        int rc = stopping(m);
        if (rc)
            return rc;
        struct timespec slice = {0, MAINT_POLL_NS};
        nanosleep(&slice, NULL);
    }
    return 0;
}

typedef struct part_point {
    int64_t recovery_point; /* everything below is in sealed, fsync'd segments */
    int64_t log_start_offset;
    int64_t first_dirty; /* the cleaner's checkpoint for these segments; -1: none */
} part_point;

/* The cleaner's first dirty offset for p as its segments are being taken
 * (the caller holds p's maint_lock), or -1 for none.  Read here, not from
 * the data dir's file before the partitions: a topic deleted and made again,
 * or deleted, since that file was read would have the snapshot claim that
 * segments never cleaned are clean, and a restored cleaner keep their
 * duplicates for good.  Under maint_lock the entry is p's own: a delete
 * retires p (taking maint_lock) before it forgets the name's entries and
 * frees the name, and a clean swaps under it and records its offset only
 * after, so the entry is at most what these segments hold (an older one
 * only makes the restored cleaner redo work). */
static int64_t first_dirty(const eng_manager *m, eng_partition *p, int64_t active_base)
{
    if (!m->cleaner) /* not started: nothing cleans, and no entry is the safe answer */
        return -1;
    int64_t off = eng_cleaner_checkpoint(m->cleaner, eng_partition_topic(p), eng_partition_id(p));
    /* The cleaner never cleans the active segment: one past its base does
     * not describe these segments. */
    return off > active_base ? -1 : off;
}

/* Takes partition p into the new directory dst.  ENG_ENOTOPIC when its topic
 * was deleted meanwhile, ENG_ESHUTDOWN when a stop is coming. */
static int take_partition(const eng_manager *m, eng_partition *p, const char *dst, part_point *pt)
{
    int rc = eng_fs_mkdir(dst);
    if (!rc)
        rc = ENG_FAULT("snapshot.partition"); /* tests hold a snapshot mid-way here */
    if (!rc)
        rc = stopping(m);
    if (!rc)
        rc = lock_maint(m, p);
    if (rc)
        return rc;
    if (atomic_load(&p->retired) || p->closed || eng__dir_offline(p)) {
        rc = atomic_load(&p->retired) ? ENG_ENOTOPIC : p->closed ? ENG_ESHUTDOWN : ENG_EOFFLINE;
        pthread_mutex_unlock(&p->maint_lock);
        return rc;
    }
    /* The instant the partition is taken: its segment set, the active
     * segment's committed size and the log start offset agree. */
    pthread_mutex_lock(&p->append_lock);
    eng_segview *v = eng__segview_acquire(p);
    eng_segment *active = v->segs[v->n - 1];
    eng_segment_ref(active);
    uint64_t active_size = eng_segment_size(active);
    pt->log_start_offset = atomic_load(&p->log_start_offset);
    pthread_mutex_unlock(&p->append_lock);
    pt->recovery_point = eng_segment_base(active);
    pt->first_dirty = first_dirty(m, p, pt->recovery_point);

    for (size_t k = 0; !rc && k + 1 < v->n; k++)
        rc = take_sealed(m, v->segs[k], dst);
    if (!rc)
        rc = copy_partition_files(m, p->dir, dst, eng_segment_base(active));
    eng__segview_release(v);
    pthread_mutex_unlock(&p->maint_lock);

    /* Outside maint_lock: the segment's descriptor stays open while the
     * reference lives, whatever a later roll, swap or retention does to its
     * name, and the bytes below active_size never change. */
    char to[PATH_MAX];
    if (!rc)
        rc = eng_fs_segment_path(to, sizeof to, dst, eng_segment_base(active), ".log");
    if (!rc)
        rc = copy_fd(m, eng_segment_log_fd(active), active_size, to);
    eng_segment_unref(active);
    if (!rc)
        rc = eng_fs_sync_dir(dst);
    return rc;
}

/* ---- one topic ------------------------------------------------------------------ */

/* The partitions taken so far, for the snapshot's checkpoints. */
typedef struct taken {
    char *topic;
    int32_t id;
    part_point pt;
} taken;

typedef struct ckpts {
    taken *v;
    size_t n, cap;
} ckpts;

static void ckpts_truncate(ckpts *c, size_t n)
{
    while (c->n > n)
        free(c->v[--c->n].topic);
}

static void ckpts_free(ckpts *c)
{
    ckpts_truncate(c, 0);
    free(c->v);
}

static int ckpts_add(ckpts *c, const char *topic, int32_t id, const part_point *pt)
{
    if (c->n == c->cap) {
        size_t nc = c->cap ? 2 * c->cap : 16;
        taken *v = realloc(c->v, nc * sizeof *v);
        if (!v)
            return -ENOMEM;
        c->v = v;
        c->cap = nc;
    }
    char *t = strdup(topic);
    if (!t)
        return -ENOMEM;
    c->v[c->n++] = (taken){t, id, *pt};
    return 0;
}

enum { CK_RECOVERY, CK_START, CK_CLEANER };

/* Writes root/name with one of each taken partition's offsets (`which`);
 * the cleaner's only for the partitions it has one for. */
static int ckpts_write(const ckpts *c, const char *root, const char *name, int which)
{
    char path[PATH_MAX];
    int rc = eng_fs_join(path, sizeof path, root, name);
    if (rc)
        return rc;
    eng_ckpt_entry *e = calloc(c->n ? c->n : 1, sizeof *e);
    if (!e)
        return -ENOMEM;
    size_t k = 0;
    for (size_t i = 0; i < c->n; i++) {
        const part_point *pt = &c->v[i].pt;
        int64_t off = which == CK_RECOVERY ? pt->recovery_point
                      : which == CK_START  ? pt->log_start_offset
                                           : pt->first_dirty;
        if (off >= 0)
            e[k++] = (eng_ckpt_entry){c->v[i].topic, c->v[i].id, off};
    }
    rc = eng_checkpoint_write(path, e, k);
    free(e);
    return rc;
}

/* Takes every partition of topic `name` into root, then its metadata.  A
 * topic gone meanwhile is left out (0). */
static int take_topic(eng_manager *m, const char *root, const char *name, ckpts *c)
{
    eng_topic_desc desc;
    eng_partition **parts;
    size_t n;
    int rc = eng_manager_topic_partitions(m, name, &desc, &parts, &n, NULL);
    if (rc)
        return rc == ENG_ENOTOPIC ? 0 : rc;
    size_t done = 0, mark = c->n;
    char path[PATH_MAX], dir[PATH_MAX];
    for (; !rc && done < n; done++) {
        int w = snprintf(dir, sizeof dir, "%s/%s-%d", root, name, (int)eng_partition_id(parts[done]));
        part_point pt;
        rc = w < 0 || (size_t)w >= sizeof dir ? ENG_EINVAL : take_partition(m, parts[done], dir, &pt);
        if (!rc)
            rc = ckpts_add(c, name, eng_partition_id(parts[done]), &pt);
    }
    if (!rc) {
        char *buf = NULL;
        size_t len = 0;
        rc = m->codec.encode(&desc.meta, &buf, &len, m->codec.ctx);
        if (!rc && !(rc = eng_fs_join(dir, sizeof dir, root, "meta")) &&
            (size_t)snprintf(path, sizeof path, "%s/%s.json", dir, name) >= sizeof path)
            rc = ENG_EINVAL;
        if (!rc)
            rc = eng_fs_write_atomic(path, buf, len);
        free(buf);
    }
    if (rc == ENG_ENOTOPIC) {
        /* Deleted while it was being taken: none of it goes in. */
        for (size_t i = 0; i < done; i++) {
            int w = snprintf(dir, sizeof dir, "%s/%s-%d", root, name, (int)eng_partition_id(parts[i]));
            if (w > 0 && (size_t)w < sizeof dir)
                eng_fs_remove_tree(dir);
        }
        ckpts_truncate(c, mark);
        rc = 0;
    }
    eng_partitions_release(parts, n);
    eng_topic_desc_clear(&desc);
    return rc;
}

/* ---- the whole snapshot -------------------------------------------------------- */

/* Removes snapshots/.partial-* left by a crash or a failed snapshot (the
 * caller holds snap_lock, so none is being built). */
static void remove_partials(const char *snaps)
{
    DIR *dh = opendir(snaps);
    if (!dh)
        return;
    struct dirent *e;
    char path[PATH_MAX];
    while ((e = readdir(dh)))
        if (!strncmp(e->d_name, PARTIAL_PREFIX, strlen(PARTIAL_PREFIX)) &&
            !eng_fs_join(path, sizeof path, snaps, e->d_name)) {
            ENG_WARN("removing %s, an unfinished snapshot", path);
            eng_fs_remove_tree(path);
        }
    closedir(dh);
}

static int build(eng_manager *m, const char *root)
{
    char path[PATH_MAX];
    int rc = eng_fs_mkdir(root);
    if (!rc && !(rc = eng_fs_join(path, sizeof path, root, "meta")))
        rc = eng_fs_mkdir(path);
    char **names = NULL;
    size_t nnames = 0;
    if (!rc)
        rc = eng_manager_list_topics(m, &names, &nnames);
    ckpts c = {0};
    for (size_t i = 0; !rc && i < nnames; i++)
        rc = take_topic(m, root, names[i], &c);
    eng_strv_free(names, nnames);
    if (!rc)
        rc = ckpts_write(&c, root, "recovery-point-offset-checkpoint", CK_RECOVERY);
    if (!rc)
        rc = ckpts_write(&c, root, "log-start-offset-checkpoint", CK_START);
    if (!rc)
        rc = ckpts_write(&c, root, "cleaner-offset-checkpoint", CK_CLEANER);
    ckpts_free(&c);
    if (!rc && !(rc = eng_fs_join(path, sizeof path, root, "meta")))
        rc = eng_fs_sync_dir(path);
    if (!rc)
        rc = eng_fs_sync_dir(root);
    return rc;
}

int eng__snapshot_path(const eng_manager *m, const char *name, char *buf, size_t len)
{
    if ((size_t)snprintf(buf, len, "%s/" ENG_SNAPSHOTS_DIR "/%s", m->dir, name) >= len)
        return ENG_EINVAL;
    return 0;
}

/* The refusals that are about the name asked for carry the key "name": the
 * API answers them with the snapshot codes, and any other failure (an
 * EEXIST from a link deep inside a build, say) as the error it is. */
static int bad_name(eng_errdetail *err)
{
    eng_errdetail_key(err, "name");
    return eng_fail(err, ENG_EINVAL,
                    "a snapshot name is 1 to 246 of [A-Za-z0-9._-], not starting with '.'");
}

static int no_snapshot(eng_errdetail *err, const char *name)
{
    eng_errdetail_key(err, "name");
    return eng_fail(err, ENG_ENOTFOUND, "no snapshot '%s'", name);
}

int eng_manager_snapshot_create(eng_manager *m, const char *name, eng_snapshot_info *out,
                                eng_errdetail *err)
{
    if (!eng_snapshot_name_valid(name))
        return bad_name(err);
    if (pthread_mutex_trylock(&m->snap_lock) != 0)
        return eng_fail(err, ENG_EBUSY, "another snapshot is being taken");
    char snaps[PATH_MAX], final[PATH_MAX], partial[PATH_MAX], tmpname[ENG_TOPIC_NAME_MAX + 16];
    snprintf(tmpname, sizeof tmpname, PARTIAL_PREFIX "%s", name);
    int rc = atomic_load(&m->offline) ? ENG_EOFFLINE : 0;
    if (!rc && stopping(m))
        rc = eng_fail(err, ENG_ESHUTDOWN, "the server is stopping: no snapshot was taken");
    if (!rc && !(rc = eng_fs_join(snaps, sizeof snaps, m->dir, ENG_SNAPSHOTS_DIR)) &&
        !(rc = eng__snapshot_path(m, name, final, sizeof final)))
        rc = eng__snapshot_path(m, tmpname, partial, sizeof partial);
    if (!rc)
        rc = eng_fs_mkdir_durable(snaps);
    if (!rc && eng_fs_exists(final)) {
        eng_errdetail_key(err, "name");
        rc = eng_fail(err, -EEXIST, "snapshot '%s' exists", name);
    }
    if (!rc) {
        remove_partials(snaps);
        int64_t t0 = eng_mono_ms();
        rc = build(m, partial);
        if (!rc && rename(partial, final) < 0)
            rc = -errno;
        if (!rc)
            rc = eng_fs_sync_dir(snaps);
        if (rc == ENG_ESHUTDOWN) {
            ENG_WARN("snapshot '%s' abandoned: the server is stopping", name);
            eng_fs_remove_tree(partial);
            eng_fail(err, rc, "snapshot '%s' abandoned: the server is stopping", name);
        } else if (rc) {
            ENG_ERROR("snapshot '%s' failed: %s", name, eng_strerror(rc));
            eng_fs_remove_tree(partial);
            eng_fail(err, rc, "taking snapshot '%s': %s", name, eng_strerror(rc));
        } else {
            /* Measured here, on the thread taking it, so the listing and
             * snapshot_bytes count it from the moment it is answered. */
            eng_snapshot_info in;
            eng__snapshot_measure(m, final, name, &in);
            eng__snapshot_usage_taken(m, &in);
            ENG_INFO("snapshot '%s' taken in %" PRId64 " ms: %u topics, %u partitions, %" PRIu64
                     " bytes (%" PRIu64 " copied)",
                     name, eng_mono_ms() - t0, in.topics, in.partitions, in.size_bytes,
                     in.unshared_bytes);
            if (out)
                *out = in;
        }
    }
    pthread_mutex_unlock(&m->snap_lock);
    return rc;
}

static int cmp_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int eng_manager_snapshot_names(eng_manager *m, char ***out, size_t *n)
{
    char snaps[PATH_MAX], path[PATH_MAX];
    int rc = eng_fs_join(snaps, sizeof snaps, m->dir, ENG_SNAPSHOTS_DIR);
    if (rc)
        return rc;
    char **v = NULL;
    size_t cnt = 0, cap = 0;
    DIR *dh = opendir(snaps);
    if (!dh) {
        if (errno != ENOENT)
            return -errno;
        *out = NULL;
        *n = 0;
        return 0;
    }
    struct dirent *e;
    while (!rc && (e = readdir(dh))) {
        struct stat st;
        if (!eng_snapshot_name_valid(e->d_name) || eng_fs_join(path, sizeof path, snaps, e->d_name) ||
            lstat(path, &st) < 0 || !S_ISDIR(st.st_mode))
            continue;
        if (cnt == cap) {
            size_t nc = cap ? 2 * cap : 8;
            char **nv = realloc(v, nc * sizeof *nv);
            if (!nv) {
                rc = -ENOMEM;
                break;
            }
            v = nv;
            cap = nc;
        }
        if (!(v[cnt] = strdup(e->d_name)))
            rc = -ENOMEM;
        else
            cnt++;
    }
    closedir(dh);
    if (rc) {
        eng_strv_free(v, cnt);
        return rc;
    }
    if (cnt > 1)
        qsort(v, cnt, sizeof *v, cmp_name);
    *out = v;
    *n = cnt;
    return 0;
}

int eng_manager_snapshot_delete(eng_manager *m, const char *name, eng_errdetail *err)
{
    if (!eng_snapshot_name_valid(name))
        return bad_name(err);
    char path[PATH_MAX], snaps[PATH_MAX];
    int rc = eng__snapshot_path(m, name, path, sizeof path);
    if (!rc)
        rc = eng_fs_join(snaps, sizeof snaps, m->dir, ENG_SNAPSHOTS_DIR);
    if (rc)
        return rc;
    struct stat st;
    if (lstat(path, &st) < 0 || !S_ISDIR(st.st_mode))
        return no_snapshot(err, name);
    /* Renamed aside first, so a removal cut short never leaves a listed,
     * half-removed snapshot; the next snapshot clears what remains. */
    char aside[PATH_MAX], tmpname[ENG_TOPIC_NAME_MAX + 16];
    snprintf(tmpname, sizeof tmpname, PARTIAL_PREFIX "%s", name);
    if (pthread_mutex_trylock(&m->snap_lock) != 0)
        return eng_fail(err, ENG_EBUSY, "a snapshot is being taken");
    rc = eng__snapshot_path(m, tmpname, aside, sizeof aside);
    if (!rc && rename(path, aside) < 0)
        rc = errno == ENOENT ? no_snapshot(err, name) : -errno;
    if (!rc) {
        eng__snapshot_usage_removed(m, name);
        rc = eng_fs_remove_tree(aside);
        if (!rc)
            rc = eng_fs_sync_dir(snaps);
        if (!rc)
            ENG_INFO("snapshot '%s' removed", name);
    }
    pthread_mutex_unlock(&m->snap_lock);
    return rc;
}
