/*
 * api_wait.c - the parked-reader registry.
 *
 * Parked waiters live in a hash of per-partition lists (bucket by partition
 * pointer) so a notify touches only its partition's waiters; a notify for a
 * partition nobody waits on costs one atomic load.  Ready waiters move to a
 * FIFO served by the worker threads.  A worker taking a waiter woken for data
 * takes with it the ready waiters of the same group (same partition, offset
 * and question), so their owner can compute one answer for all.  One worker
 * also sweeps every 20 ms for deadlines and every second for clients that
 * went away.  Beside them, a plain list holds every live stream and raw
 * send (api_live), walked only when a topic is deleted and, by the sweep,
 * while one of them waits out its grace.
 */
#include "api_wait.h"

#include "eng_error.h"
#include "eng_fs.h"
#include "eng_logger.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <sys/socket.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define NBUCKETS 1024
#define SWEEP_MS 20
#define GONE_CHECK_MS 1000

enum { W_IDLE, W_PARKED, W_READY };

typedef struct wlist {
    api_waiter *head, *tail;
} wlist;

struct api_waiters {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    wlist buckets[NBUCKETS];
    wlist ready;
    _Atomic size_t parked;
    size_t max;
    bool stopping;
    pthread_t *threads;
    unsigned nthreads;
    int64_t last_gone_check;
    int64_t next_sweep_ms; /* monotonic: when a worker sweeps next */
    api_live *live;         /* every stream (api_live_add) */
    _Atomic size_t nlive;
    size_t ncut;            /* live streams with a cut pending: the sweep looks */
};

static size_t bucket_of(const eng_partition *p)
{
    uintptr_t x = (uintptr_t)p;
    x ^= x >> 17;
    x *= 0x9E3779B97F4A7C15ull;
    return (size_t)(x >> 40) % NBUCKETS;
}

static void push(wlist *l, api_waiter *w)
{
    w->next = NULL;
    w->prev = l->tail;
    if (l->tail)
        l->tail->next = w;
    else
        l->head = w;
    l->tail = w;
}

static void unlink_w(wlist *l, api_waiter *w)
{
    if (w->prev)
        w->prev->next = w->next;
    else
        l->head = w->next;
    if (w->next)
        w->next->prev = w->prev;
    else
        l->tail = w->prev;
    w->next = w->prev = NULL;
}

/* Moves a parked waiter to the ready list (caller holds the lock). */
static void make_ready(api_waiters *ws, api_waiter *w, api_wake_reason why)
{
    unlink_w(&ws->buckets[bucket_of(w->p)], w);
    atomic_fetch_sub(&ws->parked, 1);
    w->state = W_READY;
    w->why = why;
    push(&ws->ready, w);
}

int api_waiter_park(api_waiters *ws, api_waiter *w)
{
    pthread_mutex_lock(&ws->lock);
    int rc = 0;
    if (ws->stopping) {
        rc = ENG_ESHUTDOWN;
    } else if (atomic_load(&ws->parked) >= ws->max) {
        rc = ENG_ELIMIT;
    } else {
        w->state = W_PARKED;
        push(&ws->buckets[bucket_of(w->p)], w);
        atomic_fetch_add(&ws->parked, 1);
        /* The data may have arrived between the caller's read and now; so
         * may the topic's delete, whose wake-up (retire notifies every
         * waiter of the partition) found no waiter yet: the reader would
         * wait out its wait_ms, or for ever as an NDJSON stream, which has
         * no heartbeat deadline.  retired is set before that notify takes
         * the lock, so one of the two sees it. */
        if (eng_partition_high_watermark(w->p) > w->offset || eng_partition_retired(w->p)) {
            make_ready(ws, w, API_WAKE_DATA);
            pthread_cond_signal(&ws->cond);
        }
    }
    pthread_mutex_unlock(&ws->lock);
    return rc;
}

/* Marks the live streams of p to be cut off after the grace (lock held). */
static void doom_live(api_waiters *ws, const eng_partition *p)
{
    int64_t at = eng_mono_ms() + API_LIVE_GRACE_MS;
    for (api_live *l = ws->live; l; l = l->next) {
        if (l->p == p && l->cut_at_ms == 0) {
            l->cut_at_ms = at;
            ws->ncut++;
        }
    }
}

void api_live_add(api_waiters *ws, api_live *l)
{
    pthread_mutex_lock(&ws->lock);
    l->cut_at_ms = 0;
    l->prev = NULL;
    l->next = ws->live;
    if (ws->live)
        ws->live->prev = l;
    ws->live = l;
    atomic_fetch_add(&ws->nlive, 1);
    /* Its topic deleted after the stream looked the partition up: the
     * delete's notify did not see it. */
    if (eng_partition_retired(l->p))
        doom_live(ws, l->p);
    pthread_mutex_unlock(&ws->lock);
}

void api_live_remove(api_waiters *ws, api_live *l)
{
    pthread_mutex_lock(&ws->lock);
    if (l->prev)
        l->prev->next = l->next;
    else
        ws->live = l->next;
    if (l->next)
        l->next->prev = l->prev;
    l->next = l->prev = NULL;
    if (l->cut_at_ms != 0 && l->cut_at_ms != INT64_MAX)
        ws->ncut--;
    atomic_fetch_sub(&ws->nlive, 1);
    pthread_mutex_unlock(&ws->lock);
}

void api_waiters_notify(api_waiters *ws, eng_partition *p, int64_t hw)
{
    if (!ws)
        return;
    /* The engine says INT64_MAX only when the topic is deleted. */
    bool deleted = hw == INT64_MAX && eng_partition_retired(p);
    if (atomic_load_explicit(&ws->parked, memory_order_relaxed) == 0 &&
        !(deleted && atomic_load(&ws->nlive) > 0))
        return;
    pthread_mutex_lock(&ws->lock);
    if (deleted)
        doom_live(ws, p);
    wlist *b = &ws->buckets[bucket_of(p)];
    bool any = false;
    for (api_waiter *w = b->head, *next; w; w = next) {
        next = w->next;
        if (w->p == p && hw > w->offset) {
            make_ready(ws, w, API_WAKE_DATA);
            any = true;
        }
    }
    if (any)
        pthread_cond_broadcast(&ws->cond);
    pthread_mutex_unlock(&ws->lock);
}

size_t api_waiters_parked(api_waiters *ws)
{
    return ws ? atomic_load(&ws->parked) : 0;
}

/* Shuts down the sockets of live streams whose grace is over (lock held):
 * libmicrohttpd then sees the connection end and frees the stream, which
 * releases the deleted partition.  The fd is still the stream's: it is
 * closed only after api_live_remove, which takes the lock. */
static void cut_live(api_waiters *ws, int64_t now)
{
    for (api_live *l = ws->live; l && ws->ncut > 0; l = l->next) {
        if (l->cut_at_ms == 0 || l->cut_at_ms == INT64_MAX || l->cut_at_ms > now)
            continue;
        if (l->fd >= 0 && shutdown(l->fd, SHUT_RDWR) != 0 && errno != ENOTCONN)
            ENG_WARN("http: ending a stream of a deleted topic: %s", strerror(errno));
        l->cut_at_ms = INT64_MAX;
        ws->ncut--;
    }
}

/* Deadlines, and each second the sockets of parked clients (lock held). */
static void sweep(api_waiters *ws)
{
    int64_t now = eng_mono_ms();
    if (ws->ncut > 0)
        cut_live(ws, now);
    bool check_gone = now - ws->last_gone_check >= GONE_CHECK_MS;
    if (check_gone)
        ws->last_gone_check = now;
    for (size_t i = 0; i < NBUCKETS; i++) {
        for (api_waiter *w = ws->buckets[i].head, *next; w; w = next) {
            next = w->next;
            if (w->deadline_ms <= now) {
                make_ready(ws, w, API_WAKE_TIMEOUT);
                continue;
            }
            if (check_gone && w->fd >= 0) {
                struct pollfd pfd = {.fd = w->fd, .events = POLLRDHUP};
                if (poll(&pfd, 1, 0) > 0 && (pfd.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)))
                    make_ready(ws, w, API_WAKE_GONE);
            }
        }
    }
}

#define MAX_GROUP 256

/* Takes from the ready list the waiters that may share w's answer (lock
 * held); w is already off the list.  Returns how many are in group[]. */
static size_t take_group(api_waiters *ws, api_waiter *w, api_waiter **group)
{
    size_t n = 0;
    group[n++] = w;
    if (!w->wake_many || w->why != API_WAKE_DATA)
        return n;
    for (api_waiter *o = ws->ready.head, *next; o && n < MAX_GROUP; o = next) {
        next = o->next;
        if (o->why == API_WAKE_DATA && o->p == w->p && o->offset == w->offset &&
            o->group == w->group && o->wake_many == w->wake_many) {
            unlink_w(&ws->ready, o);
            o->state = W_IDLE;
            group[n++] = o;
        }
    }
    return n;
}

static void *worker(void *arg)
{
    api_waiters *ws = arg;
    api_waiter *group[MAX_GROUP];
    pthread_mutex_lock(&ws->lock);
    for (;;) {
        /* The sweep goes by the clock, not by how the last wait ended: each
         * notify cuts the wait short, so sweeping only when a wait timed out
         * let steady appends to any watched partition hold back every
         * deadline, heartbeat and disconnect check. */
        int64_t now = eng_mono_ms();
        if (now >= ws->next_sweep_ms) {
            ws->next_sweep_ms = now + SWEEP_MS;
            sweep(ws);
        }
        api_waiter *w = ws->ready.head;
        if (w) {
            unlink_w(&ws->ready, w);
            w->state = W_IDLE;
            size_t n = take_group(ws, w, group);
            pthread_mutex_unlock(&ws->lock);
            /* The waiters may be freed or parked again from here on. */
            if (n > 1)
                w->wake_many(group, n);
            else
                w->wake(w, w->why);
            pthread_mutex_lock(&ws->lock);
            continue;
        }
        if (ws->stopping && atomic_load(&ws->parked) == 0)
            break;
        struct timespec ts = {.tv_sec = (time_t)(ws->next_sweep_ms / 1000),
                              .tv_nsec = (long)(ws->next_sweep_ms % 1000) * 1000000L};
        /* Signalled, timed out or woken spuriously: the loop looks again. */
        (void)pthread_cond_timedwait(&ws->cond, &ws->lock, &ts);
    }
    pthread_mutex_unlock(&ws->lock);
    return NULL;
}

int api_waiters_start(unsigned threads, size_t max, api_waiters **out)
{
    api_waiters *ws = calloc(1, sizeof *ws);
    if (!ws)
        return -ENOMEM;
    ws->max = max;
    ws->nthreads = threads ? threads : 1;
    ws->threads = calloc(ws->nthreads, sizeof *ws->threads);
    if (!ws->threads) {
        free(ws);
        return -ENOMEM;
    }
    pthread_mutex_init(&ws->lock, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&ws->cond, &ca);
    pthread_condattr_destroy(&ca);
    ws->last_gone_check = eng_mono_ms();
    ws->next_sweep_ms = ws->last_gone_check + SWEEP_MS;
    for (unsigned i = 0; i < ws->nthreads; i++) {
        int e = pthread_create(&ws->threads[i], NULL, worker, ws);
        if (e) {
            ws->nthreads = i;
            api_waiters_free(ws);
            return -e;
        }
    }
    *out = ws;
    return 0;
}

void api_waiters_stop(api_waiters *ws)
{
    if (!ws)
        return;
    pthread_mutex_lock(&ws->lock);
    ws->stopping = true;
    for (size_t i = 0; i < NBUCKETS; i++)
        while (ws->buckets[i].head)
            make_ready(ws, ws->buckets[i].head, API_WAKE_SHUTDOWN);
    pthread_cond_broadcast(&ws->cond);
    pthread_mutex_unlock(&ws->lock);
    for (unsigned i = 0; i < ws->nthreads; i++)
        pthread_join(ws->threads[i], NULL);
    ws->nthreads = 0;
}

void api_waiters_free(api_waiters *ws)
{
    if (!ws)
        return;
    api_waiters_stop(ws);
    pthread_mutex_destroy(&ws->lock);
    pthread_cond_destroy(&ws->cond);
    free(ws->threads);
    free(ws);
}
