/*
 * tail_util.h - client machinery for test_tailing.c: the parked-reader
 * gauge from /metrics, fields of /proc/<pid>/status, a long-poll on its own
 * thread, many transfers at once on one libcurl multi handle (and aborting
 * them), and a plain TCP client for a reader that stops reading.
 *
 * Header-only (static inline): the Makefile links integration tests with
 * harness.o alone.  Nothing here asserts; callers check the results.
 */
#ifndef TEST_TAIL_UTIL_H
#define TEST_TAIL_UTIL_H

#include "harness.h"
#include "read_util.h"

#include <arpa/inet.h>
#include <curl/curl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* logstore_parked_readers from /metrics, or -1. */
static inline long long parked(ls_server *s)
{
    ls_resp r;
    if (ls_get(s, "/metrics", &r))
        return -1;
    const char *p = r.body ? strstr(r.body, "\nlogstore_parked_readers ") : NULL;
    long long v = p ? atoll(p + 25) : -1;
    ls_resp_free(&r);
    return v;
}

/* A field of /proc/<pid>/status ("VmRSS", "Threads"), or -1. */
static inline long long proc_status(pid_t pid, const char *field)
{
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "r");
    long long v = -1;
    size_t n = strlen(field);
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, field, n) && line[n] == ':')
            v = atoll(line + n + 1);
    if (f)
        fclose(f);
    return v;
}

/* A long-poll on its own thread. */
typedef struct poll_req {
    ls_server *s;
    char path[300];
    const char *accept; /* NULL: JSON; else the Accept header's value (static) */
    long long t0, t1;
    int rc;
    ls_resp r;
    _Atomic int done;
    pthread_t th;
} poll_req;

static inline void *poll_main(void *arg)
{
    poll_req *q = arg;
    q->t0 = ru_mono_ms();
    q->rc = q->accept ? ru_get_accept(q->s, q->path, q->accept, NULL, &q->r)
                      : ls_get(q->s, q->path, &q->r);
    q->t1 = ru_mono_ms();
    atomic_store(&q->done, 1);
    return NULL;
}

/* Starts a GET of path on its own thread (with Accept: accept unless NULL);
 * 0 or an errno. */
static inline int poll_start_accept(poll_req *q, ls_server *s, const char *path, const char *accept)
{
    memset(q, 0, sizeof *q);
    q->s = s;
    q->accept = accept;
    snprintf(q->path, sizeof q->path, "%s", path);
    return pthread_create(&q->th, NULL, poll_main, q);
}

static inline int poll_start(poll_req *q, ls_server *s, const char *path)
{
    return poll_start_accept(q, s, path, NULL);
}

/* Waits until the registry holds want readers; false on timeout. */
static inline bool wait_parked(ls_server *s, long long want, int timeout_ms)
{
    long long end = ru_mono_ms() + timeout_ms;
    while (ru_mono_ms() < end) {
        if (parked(s) >= want)
            return true;
        ru_sleep_ms(20);
    }
    fprintf(stderr, "# parked readers: %lld, wanted %lld\n", parked(s), want);
    return false;
}

/* Many transfers at once on one libcurl multi handle. */
typedef struct mreq {
    CURL *h;
    char *body;
    size_t len;
    long status;
    int done;
    CURLcode rc;
} mreq;

typedef struct mset {
    CURLM *m;
    mreq *r;
    size_t n, ndone;
    struct curl_slist *hdrs;
} mset;

static inline size_t mreq_write(char *p, size_t sz, size_t nm, void *ud)
{
    mreq *q = ud;
    char *nb = realloc(q->body, q->len + sz * nm + 1);
    if (!nb)
        return 0;
    memcpy(nb + q->len, p, sz * nm);
    q->len += sz * nm;
    nb[q->len] = 0;
    q->body = nb;
    return sz * nm;
}

static inline void mset_start(mset *ms, ls_server *s, const char *path, size_t n, const char *accept)
{
    memset(ms, 0, sizeof *ms);
    ms->m = curl_multi_init();
    ms->r = calloc(n, sizeof *ms->r);
    ms->n = n;
    if (accept) {
        char a[128];
        snprintf(a, sizeof a, "Accept: %s", accept);
        ms->hdrs = curl_slist_append(NULL, a);
    }
    char url[sizeof s->base_url + 1024];
    snprintf(url, sizeof url, "%s%.1000s", s->base_url, path);
    for (size_t i = 0; i < n; i++) {
        CURL *h = curl_easy_init();
        curl_easy_setopt(h, CURLOPT_URL, url);
        curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, mreq_write);
        curl_easy_setopt(h, CURLOPT_WRITEDATA, &ms->r[i]);
        curl_easy_setopt(h, CURLOPT_PRIVATE, &ms->r[i]);
        curl_easy_setopt(h, CURLOPT_HTTPHEADER, ms->hdrs);
        curl_easy_setopt(h, CURLOPT_TIMEOUT, 60L);
        curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
        ms->r[i].h = h;
        curl_multi_add_handle(ms->m, h);
    }
}

/* Drives the transfers for up to ms milliseconds. */
static inline void mset_pump(mset *ms, int ms_total)
{
    long long end = ru_mono_ms() + ms_total;
    do {
        int running;
        curl_multi_perform(ms->m, &running);
        CURLMsg *msg;
        int left;
        while ((msg = curl_multi_info_read(ms->m, &left))) {
            if (msg->msg != CURLMSG_DONE)
                continue;
            mreq *q;
            curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&q);
            curl_easy_getinfo(msg->easy_handle, CURLINFO_RESPONSE_CODE, &q->status);
            q->rc = msg->data.result;
            q->done = 1;
            ms->ndone++;
        }
        if (ms->ndone == ms->n)
            break;
        curl_multi_poll(ms->m, NULL, 0, 20, NULL);
    } while (ru_mono_ms() < end);
}

/* Pumps until every transfer ended or timeout; true when all did. */
static inline bool mset_finish(mset *ms, int timeout_ms)
{
    mset_pump(ms, timeout_ms);
    return ms->ndone == ms->n;
}

/* Aborts what still runs (closing those connections) and frees it all. */
static inline void mset_free(mset *ms)
{
    for (size_t i = 0; i < ms->n; i++) {
        curl_multi_remove_handle(ms->m, ms->r[i].h);
        curl_easy_cleanup(ms->r[i].h);
        free(ms->r[i].body);
    }
    curl_multi_cleanup(ms->m);
    curl_slist_free_all(ms->hdrs);
    free(ms->r);
    memset(ms, 0, sizeof *ms);
}

/* A plain TCP client, for one that stops reading. */
/* Sends a GET; returns the socket (rcvbuf: SO_RCVBUF if not 0), or -1. */
static inline int raw_get(ls_server *s, const char *path, const char *accept, int rcvbuf)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0)
        return -1;
    if (rcvbuf)
        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)s->port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    char req[1024];
    int n = snprintf(req, sizeof req, "GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: %s\r\n\r\n", path, accept);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) || write(fd, req, (size_t)n) != n) {
        close(fd);
        return -1;
    }
    return fd;
}

/* Reads up to max bytes within timeout_ms (less at EOF). */
static inline size_t raw_read(int fd, char *buf, size_t max, int timeout_ms)
{
    size_t got = 0;
    long long end = ru_mono_ms() + timeout_ms;
    while (got < max) {
        long long left = end - ru_mono_ms();
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (left <= 0 || poll(&p, 1, (int)left) <= 0)
            break;
        ssize_t n = read(fd, buf + got, max - got);
        if (n <= 0)
            break;
        got += (size_t)n;
    }
    return got;
}

#endif
