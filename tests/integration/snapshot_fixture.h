/*
 * snapshot_fixture.h - what the backup and snapshot suites share: the
 * settings their servers run with (no cleaner thread, nothing deleted
 * behind the test's back), a source server and one started on a restored
 * copy, a start under a LOGSTORE_FAULT spec, and a POST sent from another
 * thread while the test holds the server mid-way.  Include after cmocka.h
 * and harness.h.
 */
#ifndef TEST_SNAPSHOT_FIXTURE_H
#define TEST_SNAPSHOT_FIXTURE_H

#include <stdlib.h>
#include <string.h>

static const char *const settings[] = {"log.cleaner.threads=0", "log.segment.delete.delay.ms=600000",
                                       "log.retention.check.interval.ms=600000", NULL};

/* Stopped (if still running: a failed check leaves them) and removed by
 * snap_fixture_cleanup. */
static ls_server g_src, g_restored;

static inline void snap_fixture_reset(void)
{
    memset(&g_src, 0, sizeof g_src);
    memset(&g_restored, 0, sizeof g_restored);
}

static inline void snap_fixture_cleanup(void)
{
    unsetenv("LOGSTORE_FAULT");
    ls_cleanup(&g_restored);
    ls_cleanup(&g_src);
}

/* Starts s with the fault spec (NULL: none) in its environment only. */
static inline void start_with_fault(ls_server *s, const char *fault)
{
    if (fault)
        setenv("LOGSTORE_FAULT", fault, 1);
    int rc = ls_start(s, settings);
    unsetenv("LOGSTORE_FAULT");
    if (rc)
        fail_msg("the server did not start (fault %s)", fault ? fault : "none");
}

typedef struct bg_post {
    ls_server *s;
    const char *path;
    long status; /* the answer's, -1 when none came */
} bg_post;

/* A pthread body: POSTs {} to bp->path. */
static inline void *post_in_background(void *arg)
{
    bg_post *bp = arg;
    ls_resp r;
    bp->status = ls_send_json(bp->s, "POST", bp->path, "{}", &r) == 0 ? r.status : -1;
    if (bp->status >= 0)
        ls_resp_free(&r);
    return NULL;
}

#endif
