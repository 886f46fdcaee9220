/*
 * eng_snapshot_usage.c - the snapshots' disk use, measured in the background.
 *
 * A snapshot's figures (size, unshared bytes, topics, partitions) and the
 * bytes only snapshots hold take an lstat of every file of every snapshot:
 * with thousands of partitions and tens of snapshots, hundreds of thousands
 * of system calls, half a second and more.  Done on the HTTP thread that
 * received GET /v1/admin/snapshots or GET /v1/log-dirs, it held up every
 * other connection that thread serves (health probes, appends, tails), and
 * the dashboard asks for both every 10 s.  So the snapshot-usage job
 * measures them, at its interval and right after a snapshot is taken or
 * removed, and the answers read the last measurement (with when it was
 * taken).  A request reads files itself only for a snapshot never measured
 * (one copied in by hand, or in the moment after a start before the job's
 * first walk ends), or when the jobs are not running (tools, tests).
 *
 * Taking and removing a snapshot adjust the figures at once, so a listing
 * shows a new snapshot as soon as it is answered and never one removed:
 * a new snapshot is measured by the request taking it (on the maintenance
 * lane) and its unshared bytes, all copies only it holds, added to the
 * total; a removed one is forgotten and its unshared bytes taken off (files
 * it shared with other snapshots alone stay theirs).  What no event reports
 * is the live log dropping a segment a snapshot links (retention, the
 * cleaner, a topic deleted): the file becomes the snapshots' alone, which
 * the next walk finds, at most the job's interval later.
 *
 * A walk runs without snap_lock (taking and removing snapshots go on; a
 * walk would otherwise answer them 409 busy): usage_gen tells it what
 * changed meanwhile.  A snapshot measured is installed only if it still
 * exists and no newer figure (taken since the walk began) is there; the
 * total only if nothing was taken or removed during the walk (the job is
 * triggered again by either and runs once more right after).
 */
#include "eng_fault.h"
#include "eng_fs.h"
#include "eng_logger.h"
#include "eng_manager_impl.h"
#include "eng_snapshot_impl.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

struct eng__snap_usage {
    eng_snapshot_info info;
    uint64_t gen; /* usage_gen when its measurement began */
};

typedef struct inode_use {
    dev_t dev;
    ino_t ino;
    nlink_t nlink;
    uint64_t size;
} inode_use;

/* Every file of the snapshots walked, for the total (NULL: not wanted). */
typedef struct inode_set {
    inode_use *v;
    size_t n, cap;
} inode_set;

static int add_inode(inode_set *s, const struct stat *st)
{
    if (s->n == s->cap) {
        size_t nc = s->cap ? 2 * s->cap : 256;
        inode_use *nv = realloc(s->v, nc * sizeof *nv);
        if (!nv)
            return -ENOMEM;
        s->v = nv;
        s->cap = nc;
    }
    s->v[s->n++] = (inode_use){st->st_dev, st->st_ino, st->st_nlink, (uint64_t)st->st_size};
    return 0;
}

static int stopping(const eng_manager *m)
{
    return atomic_load(&((eng_manager *)m)->stop_requested) ? ENG_ESHUTDOWN : 0;
}

/* Sizes and counts of one snapshot directory, two levels deep (its meta/,
 * checkpoints and partition directories), each file also into set when one
 * is given.  A stop of m (when given) ends it between partitions
 * (ENG_ESHUTDOWN); a directory gone meanwhile counts as empty. */
static int walk(const eng_manager *m, const char *dir, int depth, bool in_meta,
                eng_snapshot_info *in, inode_set *set)
{
    DIR *dh = opendir(dir);
    if (!dh)
        return 0;
    struct dirent *e;
    char path[PATH_MAX];
    int rc = 0;
    while (!rc && (e = readdir(dh))) {
        struct stat st;
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..") ||
            eng_fs_join(path, sizeof path, dir, e->d_name) || lstat(path, &st) < 0)
            continue;
        if (S_ISDIR(st.st_mode)) {
            if (depth == 0 && strcmp(e->d_name, "meta"))
                in->partitions++;
            if (depth < 1 && !(rc = m ? stopping(m) : 0))
                rc = walk(m, path, depth + 1, !strcmp(e->d_name, "meta"), in, set);
        } else if (S_ISREG(st.st_mode)) {
            in->size_bytes += (uint64_t)st.st_size;
            if (st.st_nlink == 1)
                in->unshared_bytes += (uint64_t)st.st_size;
            if (in_meta && strstr(e->d_name, ".json"))
                in->topics++;
            if (set)
                rc = add_inode(set, &st);
        }
    }
    closedir(dh);
    return rc;
}

/* m: stop when it stops (NULL: never). */
static int measure(const eng_manager *m, const char *path, const char *name,
                   eng_snapshot_info *in, inode_set *set)
{
    memset(in, 0, sizeof *in);
    snprintf(in->name, sizeof in->name, "%s", name);
    in->measured_ms = eng_now_ms();
    struct stat st;
    if (stat(path, &st) == 0)
        in->created_ms = (int64_t)st.st_mtim.tv_sec * 1000 + st.st_mtim.tv_nsec / 1000000;
    (void)ENG_FAULT("snapshot.measure"); /* tests stall a measurement here */
    return walk(m, path, 0, false, in, set);
}

void eng__snapshot_measure(const eng_manager *m, const char *path, const char *name,
                           eng_snapshot_info *in)
{
    /* One snapshot, for one request: a stop waits for it, and its answer
     * is never cut short. */
    (void)m;
    (void)measure(NULL, path, name, in, NULL);
}

static int cmp_inode(const void *a, const void *b)
{
    const inode_use *x = a, *y = b;
    if (x->dev != y->dev)
        return x->dev < y->dev ? -1 : 1;
    return x->ino < y->ino ? -1 : x->ino > y->ino;
}

/* A file the snapshots hold alone has all its links among them: a segment
 * in two snapshots, gone from the data dir, counts once. */
static uint64_t only_in_snapshots(inode_set *s)
{
    if (s->n > 1)
        qsort(s->v, s->n, sizeof *s->v, cmp_inode);
    uint64_t total = 0;
    for (size_t i = 0; i < s->n;) {
        size_t j = i;
        while (j < s->n && !cmp_inode(&s->v[i], &s->v[j]))
            j++;
        if ((nlink_t)(j - i) >= s->v[i].nlink)
            total += s->v[i].size;
        i = j;
    }
    return total;
}

/* ---- the measurements (callers hold usage_lock) ----------------------------- */

static int cmp_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int cmp_usage(const void *a, const void *b)
{
    return strcmp(((const struct eng__snap_usage *)a)->info.name,
                  ((const struct eng__snap_usage *)b)->info.name);
}

static struct eng__snap_usage *find(const eng_manager *m, const char *name)
{
    for (size_t lo = 0, hi = m->nusage; lo < hi;) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(name, m->usage[mid].info.name);
        if (!c)
            return &m->usage[mid];
        if (c < 0)
            hi = mid;
        else
            lo = mid + 1;
    }
    return NULL;
}

/* Sets name's figures, unless newer ones are there.  -ENOMEM leaves the
 * snapshot unmeasured: the next listing or walk measures it. */
static int install(eng_manager *m, const eng_snapshot_info *in, uint64_t gen)
{
    struct eng__snap_usage *u = find(m, in->name);
    if (u) {
        if (u->gen <= gen)
            *u = (struct eng__snap_usage){*in, gen};
        return 0;
    }
    if (m->nusage == m->cap_usage) {
        size_t nc = m->cap_usage ? 2 * m->cap_usage : 16;
        struct eng__snap_usage *nv = realloc(m->usage, nc * sizeof *nv);
        if (!nv)
            return -ENOMEM;
        m->usage = nv;
        m->cap_usage = nc;
    }
    m->usage[m->nusage++] = (struct eng__snap_usage){*in, gen};
    qsort(m->usage, m->nusage, sizeof *m->usage, cmp_usage);
    return 0;
}

/* Whether snapshot name is still there (its removal renames it aside
 * before it forgets its figures, so one seen gone is never installed). */
static bool exists(const eng_manager *m, const char *name)
{
    char path[PATH_MAX];
    struct stat st;
    return !eng__snapshot_path(m, name, path, sizeof path) && lstat(path, &st) == 0 &&
           S_ISDIR(st.st_mode);
}

static bool jobs_running(const eng_manager *m)
{
    return atomic_load(&((eng_manager *)m)->sched) != NULL;
}

void eng__snapshot_usage_taken(eng_manager *m, const eng_snapshot_info *in)
{
    pthread_mutex_lock(&m->usage_lock);
    uint64_t gen = ++m->usage_gen;
    if (jobs_running(m) && install(m, in, gen) == 0 && m->usage_total_known)
        m->usage_total += in->unshared_bytes; /* its copies, which only it holds */
    pthread_mutex_unlock(&m->usage_lock);
    eng_manager_trigger_job(m, ENG_SNAPSHOT_USAGE_JOB);
}

void eng__snapshot_usage_removed(eng_manager *m, const char *name)
{
    pthread_mutex_lock(&m->usage_lock);
    m->usage_gen++;
    struct eng__snap_usage *u = find(m, name);
    if (u) {
        /* Files it shared with other snapshots alone stay theirs: only its
         * own copies leave the total. */
        uint64_t freed = u->info.unshared_bytes;
        m->usage_total = m->usage_total > freed ? m->usage_total - freed : 0;
        size_t i = (size_t)(u - m->usage);
        memmove(u, u + 1, (m->nusage - i - 1) * sizeof *u);
        m->nusage--;
    }
    pthread_mutex_unlock(&m->usage_lock);
    eng_manager_trigger_job(m, ENG_SNAPSHOT_USAGE_JOB);
}

void eng__snapshot_usage_free(eng_manager *m)
{
    free(m->usage);
    m->usage = NULL;
    m->nusage = m->cap_usage = 0;
}

/* ---- the walk over all snapshots ------------------------------------------------ */

typedef struct walk_result {
    char **names;
    size_t n;
    eng_snapshot_info *info; /* per name */
    uint64_t total;
    int64_t started_ms;
    uint64_t gen;
    size_t files;
} walk_result;

static void walk_result_free(walk_result *w)
{
    eng_strv_free(w->names, w->n);
    free(w->info);
}

/* Measures every snapshot, and the bytes only they hold. */
static int walk_all(eng_manager *m, walk_result *w)
{
    memset(w, 0, sizeof *w);
    pthread_mutex_lock(&m->usage_lock);
    w->gen = m->usage_gen;
    pthread_mutex_unlock(&m->usage_lock);
    w->started_ms = eng_now_ms();
    int rc = eng_manager_snapshot_names(m, &w->names, &w->n);
    if (rc)
        return rc;
    inode_set set = {0};
    if (!(w->info = calloc(w->n ? w->n : 1, sizeof *w->info)))
        rc = -ENOMEM;
    char path[PATH_MAX];
    for (size_t i = 0; !rc && i < w->n; i++)
        if (!(rc = stopping(m)) && !(rc = eng__snapshot_path(m, w->names[i], path, sizeof path)))
            rc = measure(m, path, w->names[i], &w->info[i], &set);
    w->files = set.n;
    if (!rc)
        w->total = only_in_snapshots(&set);
    free(set.v);
    if (rc)
        walk_result_free(w);
    return rc;
}

/* Installs a walk's figures (see the top of the file for what is kept). */
static void install_walk(eng_manager *m, const walk_result *w)
{
    pthread_mutex_lock(&m->usage_lock);
    /* Forgotten: snapshots gone without a removal through the server (by
     * hand), measured before the walk began and not found by it. */
    size_t k = 0;
    for (size_t i = 0; i < m->nusage; i++) {
        const char *name = m->usage[i].info.name;
        bool seen = w->n && bsearch(&name, w->names, w->n, sizeof *w->names, cmp_names);
        if (seen || m->usage[i].gen > w->gen)
            m->usage[k++] = m->usage[i];
    }
    m->nusage = k;
    for (size_t i = 0; i < w->n; i++)
        if (exists(m, w->names[i]) && install(m, &w->info[i], w->gen))
            break; /* out of memory: the rest are measured when asked for */
    if (m->usage_gen == w->gen) {
        m->usage_total = w->total;
        m->usage_total_known = true;
        m->usage_total_ms = w->started_ms;
    }
    pthread_mutex_unlock(&m->usage_lock);
}

int eng__snapshot_usage_job(void *arg, char *note, size_t len)
{
    eng_manager *m = arg;
    walk_result w;
    int rc = walk_all(m, &w);
    if (rc)
        return rc;
    install_walk(m, &w);
    snprintf(note, len, "%zu snapshots, %zu files; %" PRIu64 " bytes only in snapshots", w.n,
             w.files, w.total);
    walk_result_free(&w);
    return 0;
}

/* ---- the answers ------------------------------------------------------------------ */

int eng_manager_snapshot_describe(eng_manager *m, const char *name, eng_snapshot_info *out)
{
    char path[PATH_MAX];
    struct stat st;
    if (!eng_snapshot_name_valid(name))
        return ENG_EINVAL;
    int rc = eng__snapshot_path(m, name, path, sizeof path);
    if (rc)
        return rc;
    if (lstat(path, &st) < 0 || !S_ISDIR(st.st_mode))
        return ENG_ENOTFOUND;
    bool jobs = jobs_running(m);
    pthread_mutex_lock(&m->usage_lock);
    const struct eng__snap_usage *u = jobs ? find(m, name) : NULL;
    if (u)
        *out = u->info;
    uint64_t gen = m->usage_gen;
    pthread_mutex_unlock(&m->usage_lock);
    if (u)
        return 0;
    /* Never measured: read now, and kept for the next listing. */
    eng__snapshot_measure(m, path, name, out);
    if (jobs) {
        pthread_mutex_lock(&m->usage_lock);
        if (exists(m, name))
            (void)install(m, out, gen); /* out of memory: measured again next time */
        pthread_mutex_unlock(&m->usage_lock);
    }
    return 0;
}

int eng_manager_snapshot_bytes(eng_manager *m, uint64_t *unshared_bytes, int64_t *measured_ms)
{
    bool jobs = jobs_running(m);
    pthread_mutex_lock(&m->usage_lock);
    bool known = jobs && m->usage_total_known;
    *unshared_bytes = m->usage_total;
    *measured_ms = m->usage_total_ms;
    pthread_mutex_unlock(&m->usage_lock);
    if (known)
        return 0;
    walk_result w;
    int rc = walk_all(m, &w);
    if (rc)
        return rc;
    *unshared_bytes = w.total;
    *measured_ms = w.started_ms;
    if (jobs)
        install_walk(m, &w);
    walk_result_free(&w);
    return 0;
}
