/*
 * eng_fault.c - the test-build side of ENG_FAULT (see eng_fault.h).
 */
#include "eng_fault.h"

#ifdef LOGSTORE_TEST_BUILD

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MAX_FAULTS 8
/* `stall`: the point sleeps this long, then carries on (a slow disk). */
#define FAULT_STALL 1
#define FAULT_STALL_SECONDS 3

typedef struct fault {
    char point[64];
    int action; /* 0 exit, FAULT_STALL, else the negative errno */
    long nth; /* 0: every hit */
    long hits;
} fault;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static fault faults[MAX_FAULTS];
static int nfaults = -1; /* -1: environment not read yet */
static char hook_point[64];
static void (*hook_fn)(void *ctx);
static void *hook_ctx;

static void parse(const char *spec)
{
    nfaults = 0;
    if (!spec)
        return;
    char buf[512];
    snprintf(buf, sizeof buf, "%s", spec);
    char *save = NULL;
    for (char *tok = strtok_r(buf, ",", &save); tok && nfaults < MAX_FAULTS;
         tok = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(tok, '=');
        if (!eq)
            continue;
        *eq = 0;
        fault *f = &faults[nfaults];
        memset(f, 0, sizeof *f);
        snprintf(f->point, sizeof f->point, "%s", tok);
        char *at = strchr(eq + 1, '@');
        f->nth = 1;
        if (at) {
            *at = 0;
            f->nth = !strcmp(at + 1, "*") ? 0 : atol(at + 1) > 0 ? atol(at + 1) : 1;
        }
        if (!strcmp(eq + 1, "exit"))
            f->action = 0;
        else if (!strcmp(eq + 1, "eio"))
            f->action = -EIO;
        else if (!strcmp(eq + 1, "enospc"))
            f->action = -ENOSPC;
        else if (!strcmp(eq + 1, "edquot"))
            f->action = -EDQUOT;
        else if (!strcmp(eq + 1, "enomem"))
            f->action = -ENOMEM;
        else if (!strcmp(eq + 1, "emfile"))
            f->action = -EMFILE;
        else if (!strcmp(eq + 1, "exdev"))
            f->action = -EXDEV;
        else if (!strcmp(eq + 1, "eperm"))
            f->action = -EPERM;
        else if (!strcmp(eq + 1, "eexist"))
            f->action = -EEXIST;
        else if (!strcmp(eq + 1, "eintr"))
            f->action = -EINTR;
        else if (!strcmp(eq + 1, "stall"))
            f->action = FAULT_STALL;
        else
            continue;
        nfaults++;
    }
}

void eng_fault_set(const char *spec)
{
    pthread_mutex_lock(&lock);
    parse(spec);
    pthread_mutex_unlock(&lock);
}

void eng_fault_hook(const char *point, void (*fn)(void *ctx), void *ctx)
{
    pthread_mutex_lock(&lock);
    snprintf(hook_point, sizeof hook_point, "%s", point && fn ? point : "");
    hook_fn = point ? fn : NULL;
    hook_ctx = ctx;
    pthread_mutex_unlock(&lock);
}

int eng__fault(const char *point)
{
    pthread_mutex_lock(&lock);
    void (*fn)(void *) = hook_fn && !strcmp(hook_point, point) ? hook_fn : NULL;
    void *fn_ctx = hook_ctx;
    pthread_mutex_unlock(&lock);
    if (fn) /* outside the lock: it may reach other points */
        fn(fn_ctx);
    pthread_mutex_lock(&lock);
    if (nfaults < 0)
        parse(getenv("LOGSTORE_FAULT"));
    int rc = 0;
    bool stall = false;
    for (int i = 0; i < nfaults; i++) {
        fault *f = &faults[i];
        if (strcmp(f->point, point) != 0 || (++f->hits != f->nth && f->nth != 0))
            continue;
        if (f->action == 0) {
            fprintf(stderr, "fault point %s: exiting\n", point);
            _exit(ENG_FAULT_EXIT_STATUS);
        }
        if (f->action == FAULT_STALL) {
            stall = true;
            continue;
        }
        rc = f->action;
    }
    pthread_mutex_unlock(&lock);
    if (stall) { /* a slow disk: outside the lock, so other points go on */
        /* Said, so a test can tell the stall has begun. */
        fprintf(stderr, "fault point %s: stalling %d s\n", point, FAULT_STALL_SECONDS);
        struct timespec ts = {FAULT_STALL_SECONDS, 0};
        while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
            ;
        /* And its end: a test can tell a request was answered while the
         * stalled work was still under way, without timing anything. */
        fprintf(stderr, "fault point %s: stall over\n", point);
    }
    return rc;
}

#else
/* An empty translation unit is not valid C: keep one declaration. */
typedef int eng_fault_unused;
#endif
