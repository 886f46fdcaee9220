/*
 * eng_topics.c - the topic table and its administration: create, delete,
 * add partitions, list, describe, change overrides, look up a partition.
 *
 * Topics live in an array sorted by name under the manager's rwlock:
 * lookups (every request) take it shared for a binary search and a
 * partition reference.  Create, delete and add-partitions take it exclusive
 * only to check and change the table: they reserve the name, make or move
 * directories without the lock (seconds of fsyncs for thousands of
 * partitions), and come back to install the result.  Partition handles are
 * reference counted, so deleting a topic never frees a partition a request
 * still holds; it retires them instead (eng_partition_retire), so none of
 * them touches the paths the next topic of that name will own.
 */
#include "eng_manager_impl.h"

#include "eng_fault.h"
#include "eng_fs.h"
#include "eng_logger.h"
#include "eng_parallel.h"
#include "eng_process.h"

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

bool eng_topic_name_valid(const char *name)
{
    size_t n = strlen(name);
    if (n == 0 || n > ENG_TOPIC_NAME_MAX || !strcmp(name, ".") || !strcmp(name, ".."))
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = name[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '_' || c == '-'))
            return false;
    }
    return true;
}

void eng__topic_free(eng_topic *t)
{
    if (!t)
        return;
    for (int32_t i = 0; t->parts && i < t->meta.partitions; i++)
        eng_partition_unref(t->parts[i]);
    free(t->parts);
    eng_config_overrides_clear(&t->meta.overrides);
    free(t);
}

ssize_t eng__topic_find(const eng_manager *m, const char *name, size_t *insert_at)
{
    size_t lo = 0, hi = m->ntopics;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(m->topics[mid]->meta.name, name);
        if (c == 0)
            return (ssize_t)mid;
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (insert_at)
        *insert_at = lo;
    return -1;
}

int eng__topic_insert(eng_manager *m, eng_topic *t)
{
    size_t at = 0;
    if (eng__topic_find(m, t->meta.name, &at) >= 0)
        return ENG_ETOPICEXISTS; /* two owners of one set of files */
    if (m->ntopics == m->cap) {
        size_t cap = m->cap ? m->cap * 2 : 16;
        eng_topic **nt = realloc(m->topics, cap * sizeof *nt);
        if (!nt)
            return -ENOMEM;
        m->topics = nt;
        m->cap = cap;
    }
    memmove(&m->topics[at + 1], &m->topics[at], (m->ntopics - at) * sizeof *m->topics);
    m->topics[at] = t;
    m->ntopics++;
    return 0;
}

int eng__topic_meta_path(const eng_manager *m, const char *topic, char *buf, size_t len)
{
    if ((size_t)snprintf(buf, len, "%s/%s.json", m->meta_dir, topic) >= len)
        return ENG_EINVAL;
    return 0;
}

int eng__partition_dir(const eng_manager *m, const char *topic, int32_t id, char *buf, size_t len)
{
    if ((size_t)snprintf(buf, len, "%s/%s-%" PRId32, m->dir, topic, id) >= len)
        return ENG_EINVAL;
    return 0;
}

static int write_meta(eng_manager *m, const eng_topic_meta *meta)
{
    char path[PATH_MAX], *buf = NULL;
    size_t len = 0;
    int rc = eng__topic_meta_path(m, meta->name, path, sizeof path);
    if (!rc)
        rc = m->codec.encode(meta, &buf, &len, m->codec.ctx);
    if (!rc)
        rc = eng_fs_write_atomic(path, buf, len);
    free(buf);
    return rc;
}

static void new_topic_id(char out[23])
{
    unsigned char raw[16], b64[32];
    if (RAND_bytes(raw, sizeof raw) != 1)
        for (size_t i = 0; i < sizeof raw; i++)
            raw[i] = (unsigned char)random();
    EVP_EncodeBlock(b64, raw, sizeof raw); /* 24 chars, the last two '=' */
    for (int i = 0; i < 22; i++)
        out[i] = b64[i] == '+' ? '-' : b64[i] == '/' ? '_' : (char)b64[i];
    out[22] = 0;
}

/* Removes what a failed create or grow made; a leftover would come back as
 * data of the next topic of that name. */
static void remove_partition_dir(eng_manager *m, const char *name, int32_t id)
{
    char path[PATH_MAX];
    int rc = eng__partition_dir(m, name, id, path, sizeof path);
    if (!rc)
        rc = eng_fs_remove_tree(path);
    if (rc && rc != -ENOENT)
        ENG_WARN("removing %s-%d after a failed create: %s", name, (int)id, eng_strerror(rc));
}

static int no_topic(eng_errdetail *err, const char *name)
{
    return eng_fail(err, ENG_ENOTOPIC, "topic '%.200s' does not exist", name);
}

/* m->reserved (see eng_manager_impl.h); callers hold m->lock. */
static bool reserved(const eng_manager *m, const char *name)
{
    for (size_t i = 0; i < m->nreserved; i++)
        if (!strcmp(m->reserved[i], name))
            return true;
    return false;
}

/* Reserves name for the caller's change, or fails: ENG_EBUSY when another
 * change holds it. */
static int reserve(eng_manager *m, const char *name, eng_errdetail *err)
{
    if (reserved(m, name))
        return eng_fail(err, ENG_EBUSY,
                        "topic '%s' is being created, grown or deleted; retry shortly", name);
    char **r = realloc(m->reserved, (m->nreserved + 1) * sizeof *r);
    if (!r)
        return -ENOMEM;
    m->reserved = r;
    if (!(r[m->nreserved] = strdup(name)))
        return -ENOMEM;
    m->nreserved++;
    return 0;
}

/* The error for a change to a topic not in the table; callers hold
 * m->lock.  A name that a create holds is busy, not missing: a client that
 * deletes after its create timed out must not be told the topic is gone
 * when it appears a moment later. */
static int absent(const eng_manager *m, const char *name, eng_errdetail *err)
{
    if (reserved(m, name))
        return eng_fail(err, ENG_EBUSY, "topic '%s' is being created; retry shortly", name);
    return no_topic(err, name);
}

/* Takes m->lock itself. */
static void release(eng_manager *m, const char *name)
{
    pthread_rwlock_wrlock(&m->lock);
    for (size_t i = 0; i < m->nreserved; i++) {
        if (!strcmp(m->reserved[i], name)) {
            free(m->reserved[i]);
            m->reserved[i] = m->reserved[--m->nreserved];
            break;
        }
    }
    pthread_rwlock_unlock(&m->lock);
}

/* Takes back new partitions [from, to): closes those opened (parts[i] may
 * be NULL) and then removes their directories (out of descriptors,
 * removing a tree needs one). */
static void undo_new_partitions(eng_manager *m, const char *name, eng_partition **parts,
                                int32_t from, int32_t to)
{
    for (int32_t i = from; i < to; i++) {
        eng_partition_unref(parts[i]);
        parts[i] = NULL;
    }
    for (int32_t i = from; i < to; i++)
        remove_partition_dir(m, name, i);
}

typedef struct new_parts {
    eng_manager *m;
    eng_topic *t;
    eng_partition **parts;
    int32_t from;
    bool *tried; /* [id - from]: its directory may exist */
} new_parts;

static int open_one(void *ctx, size_t i)
{
    new_parts *np = ctx;
    int32_t id = np->from + (int32_t)i;
    np->tried[i] = true;
    return eng__open_partition(np->m, np->t, id, NULL, &np->parts[id]);
}

/* Opens partitions [from, to) of t into parts[from..to), creating their
 * directories, without m->lock: a topic of thousands of partitions takes
 * seconds of fsyncs, and every lookup would wait.  They open side by side
 * on background.threads threads, each partition's files made durable as
 * before, so their fsyncs overlap (one after another, a 4-partition topic
 * waited for about 20 in a row).  On failure nothing of them stays, the
 * failed one's directory included. */
static int open_new_partitions(eng_manager *m, const eng_topic *t, eng_partition **parts,
                               int32_t from, int32_t to, eng_errdetail *err)
{
    size_t n = (size_t)(to - from);
    bool *tried = calloc(n ? n : 1, sizeof *tried);
    int rc = tried ? 0 : -ENOMEM;
    if (!rc) {
        new_parts np = {.m = m, .t = (eng_topic *)t, .parts = parts, .from = from, .tried = tried};
        rc = eng_parallel_for(n, m->jobs_opts.background_threads, true, open_one, &np);
    }
    /* Their directory entries, in one fsync: an acknowledged durable
     * append must not lose the directory holding it. */
    if (!rc && !(rc = ENG_FAULT("topic.sync_dir")) && !(rc = eng_fs_sync_dir(m->dir))) {
        free(tried);
        return 0;
    }
    eng_fail(err, rc, "creating partitions of topic '%s': %s", t->meta.name, eng_strerror(rc));
    /* Only those a thread took: a directory past them may be a stray that
     * the open would have set aside, not removed. */
    for (int32_t i = from; i < to && tried; i++)
        if (tried[i - from]) {
            eng_partition_unref(parts[i]);
            parts[i] = NULL;
        }
    for (int32_t i = from; i < to && tried; i++)
        if (tried[i - from])
            remove_partition_dir(m, t->meta.name, i);
    free(tried);
    return rc;
}

/* The name of a topic (loaded, or being created or deleted) that equals
 * name once '.' and '_' are taken as one character, as Kafka's
 * Topic.hasCollision does, or NULL; *settled says whether it is a loaded
 * topic rather than one whose create or delete is under way.  Callers hold
 * m->lock. */
static const char *collides(const eng_manager *m, const char *name, bool *settled)
{
    for (size_t i = 0; i < m->ntopics + m->nreserved; i++) {
        const char *other = i < m->ntopics ? m->topics[i]->meta.name : m->reserved[i - m->ntopics];
        size_t k = 0;
        while (name[k] && other[k] &&
               (name[k] == other[k] ||
                ((name[k] == '.' || name[k] == '_') && (other[k] == '.' || other[k] == '_'))))
            k++;
        if (!name[k] && !other[k] && strcmp(name, other) != 0) {
            *settled = i < m->ntopics;
            return other;
        }
    }
    return NULL;
}

void eng_topic_held_clear(eng_topic_held *h)
{
    eng_topic_desc_clear(&h->desc);
    eng_partitions_release(h->parts, h->n);
    h->parts = NULL;
    h->n = 0;
}

static int copy_desc(const eng_topic *t, eng_topic_desc *out);

/* t as it is now into *out (eng_topic_held); callers hold m->lock. */
static int hold(const eng_topic *t, eng_topic_held *out)
{
    memset(out, 0, sizeof *out);
    size_t n = (size_t)t->meta.partitions;
    eng_partition **v = calloc(n ? n : 1, sizeof *v);
    if (!v)
        return -ENOMEM;
    if (copy_desc(t, &out->desc)) {
        memset(out, 0, sizeof *out); /* copy_desc left t's strings there */
        free(v);
        return -ENOMEM;
    }
    for (size_t k = 0; k < n; k++) {
        v[k] = t->parts[k];
        eng_partition_ref(v[k]);
    }
    out->parts = v;
    out->n = n;
    return 0;
}

int eng_manager_create_topic(eng_manager *m, const char *name, int32_t partitions,
                             const char *const *keys, const char *const *values, size_t n,
                             eng_errdetail *err)
{
    return eng_manager_create_topic_held(m, name, partitions, keys, values, n, NULL, err);
}

int eng_manager_create_topic_held(eng_manager *m, const char *name, int32_t partitions,
                                  const char *const *keys, const char *const *values, size_t n,
                                  eng_topic_held *out, eng_errdetail *err)
{
    if (!eng_topic_name_valid(name))
        return eng_fail(err, ENG_ETOPICNAME,
                        "invalid topic name: use 1 to 249 of [A-Za-z0-9._-], not '.' or '..'");
    if (partitions <= 0 || partitions > ENG_TOPIC_PARTITIONS_MAX) {
        eng_errdetail_key(err, "partitions");
        return eng_fail(err, ENG_EINVAL, "partitions must be between 1 and %d",
                        ENG_TOPIC_PARTITIONS_MAX);
    }
    eng_topic *t = calloc(1, sizeof *t);
    if (!t)
        return -ENOMEM;
    int rc = 0;
    for (size_t i = 0; i < n && !rc; i++)
        rc = eng_config_overrides_set(&t->meta.overrides, keys[i], values[i], err);
    if (!rc)
        rc = eng_config_resolve(&m->defaults, &t->meta.overrides, &t->cfg, err);
    if (rc) {
        eng__topic_free(t);
        return rc;
    }
    snprintf(t->meta.name, sizeof t->meta.name, "%s", name);
    t->meta.partitions = partitions;
    t->meta.created_ms = eng_now_ms();
    new_topic_id(t->meta.topic_id);
    if (!(t->parts = calloc((size_t)partitions, sizeof *t->parts))) {
        eng__topic_free(t);
        return -ENOMEM;
    }
    pthread_rwlock_wrlock(&m->lock);
    const char *twin = NULL;
    bool settled = false;
    if (eng__topic_find(m, name, NULL) >= 0)
        rc = eng_fail(err, ENG_ETOPICEXISTS, "topic '%s' already exists", name);
    else if ((twin = collides(m, name, &settled)) && !settled)
        /* Only a create or delete under way holds that name: which of the
         * two it is decides the answer, so it is not final (422) yet. */
        rc = eng_fail(err, ENG_EBUSY,
                      "topic '%s' collides with topic '%s', which is being created or deleted; "
                      "retry shortly",
                      name, twin);
    else if (twin)
        rc = eng_fail(err, ENG_ETOPICNAME,
                      "topic '%s' collides with topic '%s': names that differ only in '.' and "
                      "'_' are refused, as in Kafka (their metric names would be the same)",
                      name, twin);
    else if (!(rc = eng_process_check_partition_budget(name, partitions, err)))
        rc = reserve(m, name, err);
    pthread_rwlock_unlock(&m->lock);
    if (rc) {
        eng__topic_free(t);
        return rc;
    }
    /* The topic is invisible until inserted; a crash after the metadata
     * is written makes startup finish it (missing partitions are made). */
    char path[PATH_MAX];
    int held_rc = 0;
    if ((rc = write_meta(m, &t->meta))) {
        eng_fail(err, rc, "writing metadata of topic '%s': %s", name, eng_strerror(rc));
    } else if (!(rc = open_new_partitions(m, t, t->parts, 0, partitions, err))) {
        pthread_rwlock_wrlock(&m->lock);
        rc = eng__topic_insert(m, t);
        if (!rc && out)
            held_rc = hold(t, out);
        pthread_rwlock_unlock(&m->lock);
        if (rc) /* out of memory: take it all back */
            undo_new_partitions(m, name, t->parts, 0, partitions);
    }
    /* Undone durably: a crash must not bring back the topic, empty. */
    if (rc && !eng__topic_meta_path(m, name, path, sizeof path) && unlink(path) == 0)
        eng_fs_sync_dir(m->meta_dir);
    release(m, name);
    if (rc) {
        eng__topic_free(t);
        return rc;
    }
    ENG_INFO("created topic %s with %d partitions", name, partitions);
    if (held_rc)
        return eng_fail(err, held_rc, "topic '%s' was created, but describing it failed: %s",
                        name, eng_strerror(held_rc));
    return 0;
}

int eng_manager_delete_topic(eng_manager *m, const char *name, eng_errdetail *err)
{
    /* After a config change parked in its write, which would otherwise
     * write the file back once this removed it: a topic at the next start
     * with none of its partitions. */
    pthread_mutex_lock(&m->meta_lock);
    pthread_rwlock_wrlock(&m->lock);
    ssize_t i = eng__topic_find(m, name, NULL);
    if (i < 0) {
        int rc_absent = absent(m, name, err);
        pthread_rwlock_unlock(&m->lock);
        pthread_mutex_unlock(&m->meta_lock);
        return rc_absent;
    }
    /* The name stays taken until the directories have moved (below). */
    int rc = reserve(m, name, err);
    eng_topic *t = m->topics[i];
    pthread_rwlock_unlock(&m->lock);
    if (rc) {
        pthread_mutex_unlock(&m->meta_lock);
        return rc;
    }
    /* An append acknowledged from here on would go with the topic, or with
     * its file after a crash: appends are refused as busy, those under way
     * finish first.  The reservation keeps t's partitions as they are. */
    for (int32_t p = 0; p < t->meta.partitions; p++)
        eng_partition_set_deleting(t->parts[p], true);
    /* The file goes without m->lock: every request to every topic takes
     * it, and one slow fsync of meta/ held it for all of them.  The
     * reservation keeps t in the table meanwhile (no other delete, grow or
     * create of the name), and meta_lock every config change. */
    char path[PATH_MAX], to[PATH_MAX + 64];
    bool unlinked = false;
    rc = eng__topic_meta_path(m, name, path, sizeof path);
    if (!rc && unlink(path) < 0)
        rc = -errno;
    unlinked = !rc;
    if (!rc && !(rc = ENG_FAULT("topic.delete.sync_meta")))
        rc = eng_fs_sync_dir(m->meta_dir);
    if (rc) {
        /* The topic stays, so its file must: without it the next start
         * would drop the topic and set its partitions aside as strays. */
        int back = unlinked ? write_meta(m, &t->meta) : 0;
        if (back)
            ENG_ERROR("topic %s: its delete failed and meta/%s.json cannot be written back (%s): "
                      "the next start will not load it",
                      name, name, eng_strerror(back));
        for (int32_t p = 0; p < t->meta.partitions; p++)
            eng_partition_set_deleting(t->parts[p], false);
        pthread_mutex_unlock(&m->meta_lock);
        release(m, name);
        return eng_fail(err, rc, "removing metadata of topic '%s': %s", name, eng_strerror(rc));
    }
    pthread_rwlock_wrlock(&m->lock);
    i = eng__topic_find(m, name, NULL); /* still t (the reservation), maybe moved */
    assert(i >= 0 && m->topics[i] == t);
    memmove(&m->topics[i], &m->topics[i + 1], (m->ntopics - (size_t)i - 1) * sizeof *m->topics);
    m->ntopics--;
    eng_cleaner *cleaner = m->cleaner;
    pthread_rwlock_unlock(&m->lock);
    pthread_mutex_unlock(&m->meta_lock);
    /* Requests that looked the partitions up before may still hold them:
     * once retired, none of them names a file under the old paths, which a
     * topic created under this name would own.  A crash before the
     * directories move leaves them to startup, which sets them aside as
     * -stray. */
    for (int32_t p = 0; p < t->meta.partitions; p++)
        eng_partition_retire(t->parts[p]);
    eng__manager_release_deleted(m);
    /* A crash from the metadata's removal to the rewrite in the forget
     * leaves the topic's entries in cleaner-offset-checkpoint; the cleaner
     * drops them at the next start. */
    (void)ENG_FAULT("topic.delete.before_forget");
    if (cleaner)
        eng_cleaner_forget(cleaner, name);
    size_t nparts = t->meta.partitions > 0 ? (size_t)t->meta.partitions : 0;
    char **gone = calloc(nparts ? nparts : 1, sizeof *gone);
    for (int32_t p = 0; p < t->meta.partitions; p++) {
        int r = eng__set_aside_partition_dir(m, name, p, "delete", to, sizeof to);
        if (r)
            ENG_WARN("renaming %s-%d for deletion: %s", name, (int)p, eng_strerror(r));
        else if (!gone || !(gone[p] = strdup(to)))
            ENG_WARN("out of memory: %s is removed at the next start", to);
    }
    eng_fs_sync_dir(m->dir);
    /* The checkpoints are rewritten now, before the name is free, as Kafka's
     * asyncDelete does.  Left to their jobs they would name the deleted
     * partitions a while longer: a topic created under this name and a crash
     * before then would load the old log start offset and recovery point
     * into the new partitions, and a start past their records would hide
     * them (retention would delete them), a recovery point past their end
     * skip their recovery. */
    int ck = eng__manager_write_checkpoints(m);
    if (ck)
        ENG_WARN("rewriting the checkpoints without topic %s: %s (its jobs retry)", name,
                 eng_strerror(ck));
    release(m, name);
    for (int32_t p = 0; gone && p < t->meta.partitions; p++) {
        if (gone[p])
            eng__remove_in_background(m, gone[p]);
        free(gone[p]);
    }
    free(gone);
    eng__topic_free(t);
    ENG_INFO("deleted topic %s", name);
    return 0;
}

int eng_manager_add_partitions(eng_manager *m, const char *name, int32_t total, eng_errdetail *err)
{
    return eng_manager_add_partitions_held(m, name, total, NULL, err);
}

int eng_manager_add_partitions_held(eng_manager *m, const char *name, int32_t total,
                                    eng_topic_held *out, eng_errdetail *err)
{
    pthread_rwlock_wrlock(&m->lock);
    ssize_t i = eng__topic_find(m, name, NULL);
    int rc = 0;
    if (i < 0) {
        int rc_absent = absent(m, name, err);
        pthread_rwlock_unlock(&m->lock);
        return rc_absent;
    }
    eng_topic *t = m->topics[i];
    int32_t old = t->meta.partitions;
    if (total < old) {
        eng_errdetail_key(err, "partitions");
        rc = eng_fail(err, ENG_EINVAL, "topic '%s' has %d partitions; it can grow but never shrink",
                      name, old);
    } else if (total > ENG_TOPIC_PARTITIONS_MAX) {
        eng_errdetail_key(err, "partitions");
        rc = eng_fail(err, ENG_EINVAL, "topic '%s' can grow to at most %d partitions, not %d",
                      name, ENG_TOPIC_PARTITIONS_MAX, total);
    } else if (total > old && !(rc = eng_process_check_partition_budget(name, total - old, err))) {
        rc = reserve(m, name, err);
    }
    int held_rc = !rc && total == old && out ? hold(t, out) : 0;
    /* A copy to open the new partitions from: t's own fields may change
     * under the lock meanwhile (configs), and the reservation keeps t. */
    eng_topic proto = {.meta = t->meta, .cfg = t->cfg};
    pthread_rwlock_unlock(&m->lock);
    if (held_rc)
        return eng_fail(err, held_rc, "describing topic '%s' failed: %s", name,
                        eng_strerror(held_rc));
    if (rc || total == old)
        return rc;
    eng_partition **parts = calloc((size_t)total, sizeof *parts);
    if (!parts)
        rc = -ENOMEM;
    else
        rc = open_new_partitions(m, &proto, parts, old, total, err);
    if (!rc) {
        /* A config change parked in its write (meta_lock) read the old
         * partition count; writing ours in between would be undone by its.
         * The file is written without m->lock, which every request takes:
         * meta_lock holds config changes off until ours is installed, the
         * reservation deletes and other grows, so the file and the table
         * end alike; a crash mid-write leaves the old file or the new one. */
        pthread_mutex_lock(&m->meta_lock);
        pthread_rwlock_rdlock(&m->lock);
        /* Its override strings stay t's: only a config change replaces them. */
        eng_topic_meta updated = t->meta;
        pthread_rwlock_unlock(&m->lock);
        updated.partitions = total;
        if ((rc = write_meta(m, &updated))) {
            eng_fail(err, rc, "adding partitions to '%s': %s", name, eng_strerror(rc));
        } else {
            pthread_rwlock_wrlock(&m->lock);
            memcpy(parts, t->parts, (size_t)old * sizeof *parts);
            t->meta.partitions = total;
            free(t->parts);
            t->parts = parts;
            /* A config change while they opened reached only the old ones. */
            for (int32_t p = old; p < total; p++)
                eng_partition_set_config(parts[p], &t->cfg);
            parts = NULL;
            if (out)
                held_rc = hold(t, out);
            pthread_rwlock_unlock(&m->lock);
        }
        pthread_mutex_unlock(&m->meta_lock);
        if (rc)
            undo_new_partitions(m, name, parts, old, total);
    }
    free(parts);
    release(m, name);
    if (!rc && held_rc)
        return eng_fail(err, held_rc, "topic '%s' was grown, but describing it failed: %s", name,
                        eng_strerror(held_rc));
    return rc;
}

void eng_strv_free(char **v, size_t n)
{
    for (size_t i = 0; v && i < n; i++)
        free(v[i]);
    free(v);
}

int eng_manager_list_topics(eng_manager *m, char ***names, size_t *n)
{
    pthread_rwlock_rdlock(&m->lock);
    char **v = calloc(m->ntopics ? m->ntopics : 1, sizeof *v);
    int rc = v ? 0 : -ENOMEM;
    for (size_t i = 0; !rc && i < m->ntopics; i++)
        if (!(v[i] = strdup(m->topics[i]->meta.name)))
            rc = -ENOMEM;
    size_t count = m->ntopics;
    pthread_rwlock_unlock(&m->lock);
    if (rc) {
        eng_strv_free(v, count);
        return rc;
    }
    *names = v;
    *n = count;
    return 0;
}

void eng_topic_desc_clear(eng_topic_desc *d)
{
    eng_config_overrides_clear(&d->meta.overrides);
}

/* t's description, its overrides copied (the caller clears out); under
 * m->lock. */
static int copy_desc(const eng_topic *t, eng_topic_desc *out)
{
    out->meta = t->meta;
    out->config = t->cfg;
    return eng_config_overrides_copy(&out->meta.overrides, &t->meta.overrides);
}

int eng_manager_describe_topic(eng_manager *m, const char *name, eng_topic_desc *out)
{
    pthread_rwlock_rdlock(&m->lock);
    ssize_t i = eng__topic_find(m, name, NULL);
    int rc = i >= 0 ? copy_desc(m->topics[i], out) : ENG_ENOTOPIC;
    pthread_rwlock_unlock(&m->lock);
    return rc;
}

int eng_manager_set_topic_overrides(eng_manager *m, const char *name, const char *topic_id,
                                    const eng_config_overrides *ov, eng_errdetail *err)
{
    return eng_manager_set_topic_overrides_desc(m, name, topic_id, ov, NULL, err);
}

int eng_manager_set_topic_overrides_desc(eng_manager *m, const char *name, const char *topic_id,
                                         const eng_config_overrides *ov, eng_topic_desc *out,
                                         eng_errdetail *err)
{
    eng_config cfg;
    int rc = eng_config_resolve(&m->defaults, ov, &cfg, err);
    if (rc)
        return rc;
    /* The file is written and fsync'd without m->lock: every request to
     * every topic takes that lock, and one slow fsync held it for all of
     * them.  meta_lock keeps the topic as read here until it is installed
     * below (no grow, delete or other change in between), so the file and
     * the table end alike; a crash mid-write leaves the old file or the new
     * one (eng_fs_write_atomic). */
    pthread_mutex_lock(&m->meta_lock);
    pthread_rwlock_rdlock(&m->lock);
    ssize_t i = eng__topic_find(m, name, NULL);
    if (i < 0) {
        rc = absent(m, name, err);
        pthread_rwlock_unlock(&m->lock);
        pthread_mutex_unlock(&m->meta_lock);
        return rc;
    }
    eng_topic *t = m->topics[i];
    if (topic_id && strcmp(topic_id, t->meta.topic_id) != 0) {
        pthread_rwlock_unlock(&m->lock);
        pthread_mutex_unlock(&m->meta_lock);
        return eng_fail(err, ENG_ENOTOPIC,
                        "topic '%s' was deleted and created again during the change; nothing "
                        "was changed",
                        name);
    }
    eng_topic_meta updated = t->meta;
    rc = eng_config_overrides_copy(&updated.overrides, ov);
    pthread_rwlock_unlock(&m->lock);
    if (rc) {
        pthread_mutex_unlock(&m->meta_lock);
        return rc;
    }
    if ((rc = write_meta(m, &updated))) {
        pthread_mutex_unlock(&m->meta_lock);
        eng_config_overrides_clear(&updated.overrides);
        return eng_fail(err, rc, "writing metadata of topic '%s': %s", name, eng_strerror(rc));
    }
    pthread_rwlock_wrlock(&m->lock);
    /* Still t: removing or replacing it takes meta_lock (a delete), and a
     * create needs the name free. */
    eng_config_overrides_clear(&t->meta.overrides);
    t->meta.overrides = updated.overrides;
    t->cfg = cfg;
    for (int32_t p = 0; p < t->meta.partitions; p++)
        eng_partition_set_config(t->parts[p], &cfg);
    if (out && (rc = copy_desc(t, out))) {
        memset(&out->meta.overrides, 0, sizeof out->meta.overrides); /* t's strings */
        eng_fail(err, rc, "the configs of topic '%s' were changed, but describing them failed: %s",
                 name, eng_strerror(rc));
    }
    pthread_rwlock_unlock(&m->lock);
    pthread_mutex_unlock(&m->meta_lock);
    return rc;
}

int eng_manager_partition(eng_manager *m, const char *topic, int32_t id, eng_partition **out,
                          eng_errdetail *err)
{
    pthread_rwlock_rdlock(&m->lock);
    ssize_t i = eng__topic_find(m, topic, NULL);
    int rc = 0;
    if (i < 0) {
        rc = no_topic(err, topic);
    } else if (id < 0 || id >= m->topics[i]->meta.partitions) {
        rc = eng_fail(err, ENG_ENOPARTITION, "topic '%s' has no partition %d (it has %d)", topic,
                      id, m->topics[i]->meta.partitions);
    } else {
        *out = m->topics[i]->parts[id];
        eng_partition_ref(*out);
    }
    pthread_rwlock_unlock(&m->lock);
    return rc;
}

int eng_manager_topic_partitions(eng_manager *m, const char *topic, eng_topic_desc *desc,
                                 eng_partition ***out, size_t *n, eng_errdetail *err)
{
    pthread_rwlock_rdlock(&m->lock);
    ssize_t i = eng__topic_find(m, topic, NULL);
    if (i < 0) {
        pthread_rwlock_unlock(&m->lock);
        return no_topic(err, topic);
    }
    eng_topic *t = m->topics[i];
    size_t count = (size_t)t->meta.partitions;
    eng_partition **v = calloc(count ? count : 1, sizeof *v);
    int rc = v ? 0 : -ENOMEM;
    if (!rc && desc)
        rc = copy_desc(t, desc);
    for (size_t k = 0; !rc && k < count; k++) {
        v[k] = t->parts[k];
        eng_partition_ref(v[k]);
    }
    pthread_rwlock_unlock(&m->lock);
    if (rc) {
        free(v);
        return rc;
    }
    *out = v;
    *n = count;
    return 0;
}
