/*
 * api_wait.h - parked readers: long-polls and idle streams waiting for data.
 *
 * A parked reader holds no thread: its connection is suspended and its
 * api_waiter sits in this registry until one of four things happens, each
 * reported through its wake callback (called once, on a registry thread,
 * after the waiter has left the registry):
 *   DATA     the partition's high watermark passed the waiter's offset
 *            (api_waiters_notify, called on every high-watermark move, only
 *            moves waiters to a ready list: the append path pays nothing more);
 *   TIMEOUT  its deadline passed (long-poll wait_ms, stream heartbeat);
 *   GONE     its client closed the connection (sockets are polled each second);
 *   SHUTDOWN the server is stopping.
 * A small pool of threads serves the ready list, so one slow read does not
 * hold up the others.  Past `max` parked readers, parking fails and the
 * caller answers 429.  The registry also knows every stream and raw file
 * send while it lasts, parked or not (api_live), to end those of a deleted
 * topic.
 */
#ifndef API_WAIT_H
#define API_WAIT_H

#include "eng_partition.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum { API_WAKE_DATA, API_WAKE_TIMEOUT, API_WAKE_GONE, API_WAKE_SHUTDOWN } api_wake_reason;

typedef struct api_waiter api_waiter;
typedef struct api_waiters api_waiters;

typedef void (*api_wake_fn)(api_waiter *w, api_wake_reason why);

/* Wakes n >= 1 waiters at once, all woken for DATA, with the same partition,
 * offset, group and wake_many: readers asking the same question get one
 * answer computed for all (100 long-polls at the tail of a partition wake
 * together on every append). */
typedef void (*api_wake_many_fn)(api_waiter **ws, size_t n);

/* Embedded in its owner; the owner fills the fields up to wake_many. */
struct api_waiter {
    eng_partition *p;    /* borrowed: the owner keeps a reference */
    int64_t offset;      /* woken once the high watermark is above this */
    int64_t deadline_ms; /* monotonic ms; INT64_MAX for none */
    int fd;              /* the client's socket, -1 if unknown */
    api_wake_fn wake;
    api_wake_many_fn wake_many; /* optional; used for DATA wakes */
    uint64_t group;      /* waiters of one group may share an answer */
    /* registry links */
    api_waiter *next, *prev;
    int state;
    api_wake_reason why;
};

/* A stream for its whole life, parked or not.  One whose client stopped
 * reading is not parked (its socket is full, not its log), so a topic
 * delete's wake-up never reached it, and it held the deleted partition (its
 * open segment files) until the connection went: at http.idle.timeout.ms,
 * or never with the timeout off.  Once its partition is retired, a live
 * stream still there after API_LIVE_GRACE_MS has its socket shut down, which
 * makes the HTTP layer close the connection and free the stream.  Embedded
 * in its owner, which fills p and fd. */
typedef struct api_live api_live;
struct api_live {
    eng_partition *p; /* borrowed: the owner keeps a reference */
    int fd;           /* the client's socket; valid until api_live_remove */
    int64_t cut_at_ms; /* registry: 0, or when to shut the socket down */
    api_live *next, *prev;
};

/* Long enough for a client that reads to get the stream's error event. */
#define API_LIVE_GRACE_MS 1000

/* Tracks l until api_live_remove, which must come before its fd closes. */
void api_live_add(api_waiters *ws, api_live *l);
void api_live_remove(api_waiters *ws, api_live *l);

int api_waiters_start(unsigned threads, size_t max, api_waiters **out);

/* Wakes every parked reader with SHUTDOWN and waits for the wake callbacks
 * to finish; parking fails from then on.  ws may be NULL. */
void api_waiters_stop(api_waiters *ws);

/* Frees a stopped registry (after nothing can notify it any more). */
void api_waiters_free(api_waiters *ws);

/* Parks w; ENG_ELIMIT when the registry is full, ENG_ESHUTDOWN when
 * stopping.  It may be woken (on another thread) before this returns. */
int api_waiter_park(api_waiters *ws, api_waiter *w);

/* A partition's high watermark moved to hw; INT64_MAX when its topic was
 * deleted (every waiter wakes, and its live streams are cut off after the
 * grace). */
void api_waiters_notify(api_waiters *ws, eng_partition *p, int64_t hw);

/* Readers parked right now. */
size_t api_waiters_parked(api_waiters *ws);

#endif
