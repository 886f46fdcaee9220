/*
 * eng_segment_files.c - a segment's files under their names: the renames that
 * mark them (.deleted, .cleaned, .swap) and their unlinks.  Each goes
 * through the segment's gate, so nothing reaches the files of a deleted
 * topic's dir after a topic of the same name took it.
 */
#include "eng_fault.h"
#include "eng_fs.h"
#include "eng_segment_impl.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <unistd.h>

/* A segment's files.  The producer snapshot named by its base offset goes
 * with it when retention deletes it, as Kafka's
 * removeAndMarkSnapshotForDeletion does. */
static const char *const file_exts[] = {".log", ".index", ".timeindex", ".txnindex", ".snapshot",
                                        NULL};

int eng_segment_rename(eng_segment *s, const char *suffix)
{
    pthread_mutex_lock(&s->lock);
    int rc = eng__segment_path_enter(s);
    if (rc) {
        pthread_mutex_unlock(&s->lock);
        return rc;
    }
    char from[PATH_MAX], to[PATH_MAX], full[64];
    for (int i = 0; file_exts[i] && !rc; i++) {
        snprintf(full, sizeof full, "%s%s", file_exts[i], suffix);
        if ((rc = eng_segment_file_path(s, file_exts[i], from, sizeof from)) ||
            (rc = eng_fs_segment_path(to, sizeof to, s->dir, s->base, full)))
            break;
        /* Per file: a test fails a rename partway. */
        if ((rc = ENG_FAULT("segment.rename")))
            break;
        if (rename(from, to) < 0 && !(errno == ENOENT && i > 0))
            rc = -errno;
    }
    eng__segment_path_leave(s);
    if (!rc)
        snprintf(s->suffix, sizeof s->suffix, "%s", suffix);
    pthread_mutex_unlock(&s->lock);
    return rc;
}

/* Unlinks s's files named with suffix (NULL: their current one). */
static int unlink_files(eng_segment *s, const char *suffix)
{
    pthread_mutex_lock(&s->lock);
    if (eng__segment_path_enter(s)) {
        pthread_mutex_unlock(&s->lock);
        return 0; /* a deleted topic's: its files go with its directory */
    }
    int rc = 0;
    char path[PATH_MAX], full[64];
    for (int i = 0; file_exts[i]; i++) {
        snprintf(full, sizeof full, "%s%s", file_exts[i], suffix ? suffix : s->suffix);
        if (eng_fs_segment_path(path, sizeof path, s->dir, s->base, full) == 0 &&
            unlink(path) < 0 && errno != ENOENT && !rc)
            rc = -errno;
    }
    eng__segment_path_leave(s);
    pthread_mutex_unlock(&s->lock);
    return rc;
}

int eng_segment_unlink(eng_segment *s)
{
    return unlink_files(s, NULL);
}

int eng_segment_unlink_as(eng_segment *s, const char *suffix)
{
    return unlink_files(s, suffix);
}

const char *eng_segment_suffix(const eng_segment *s)
{
    return s->suffix;
}
