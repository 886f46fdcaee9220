/*
 * api_stream.h - reads that stream: Server-Sent Events and NDJSON.
 *
 * A stream is pulled by the HTTP layer: each time the socket can take more,
 * the server asks api_stream_produce for up to `max` bytes.  The stream reads
 * the partition only then, about 64 KiB at a time, so a slow client never
 * makes the server hold more than one chunk for it.  When there is nothing
 * new, the stream asks to be suspended and parks in the waiter registry; a
 * new high watermark, its heartbeat deadline, its client leaving or the
 * server stopping wakes it (through the transport's resume hook).
 *
 * SSE: first `id: <start - 1>` with no data (an EventSource's last event ID
 * before any record), one `record` event per record with `id: <offset>`, `: heartbeat`
 * comments, an `end` event with the cursor when a bound (max_records,
 * until_timestamp) is reached, an `error` event if the position is deleted
 * under the reader.  NDJSON: one record per line, and on a bound a final
 * {"next_offset":...} cursor line (an error becomes an {"error":{...}} line).
 */
#ifndef API_STREAM_H
#define API_STREAM_H

#include "api_wait.h"
#include "eng_partition.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

typedef struct api_stream api_stream;

typedef enum { API_STREAM_SSE, API_STREAM_NDJSON } api_stream_format;

typedef struct api_stream_opts {
    api_stream_format format;
    int64_t start;           /* first offset */
    int64_t max_records;     /* INT64_MAX: unbounded */
    int64_t until_timestamp; /* INT64_MAX: none */
    bool base64;
    int64_t heartbeat_ms;
    char request_id[65];
} api_stream_opts;

/* Returned by api_stream_produce. */
#define API_STREAM_END (-1)
#define API_STREAM_PARK (-2) /* nothing now: suspend, then call api_stream_park */

/* Creates a stream over p (referenced here; released by api_stream_free). */
api_stream *api_stream_new(eng_partition *p, api_waiters *ws, const api_stream_opts *o);

/* How the transport is woken: resume(conn) after the stream was parked.
 * client_fd (if >= 0) must stay open until api_stream_free: a topic delete
 * shuts it down if the stream has not ended on its own within
 * API_LIVE_GRACE_MS (its client stopped reading). */
void api_stream_bind(api_stream *s, void (*resume)(void *conn), void *conn, int client_fd);

/* Fills buf with up to max bytes; or API_STREAM_END; or API_STREAM_PARK. */
ssize_t api_stream_produce(api_stream *s, char *buf, size_t max);

/* Registers the (already suspended) stream to be resumed when there is
 * something to send.  If it cannot park (too many waiters, stopping), it
 * resumes itself at once and will end the stream. */
void api_stream_park(api_stream *s);

/* Whether the stream ended because its client left (for the access log:
 * libmicrohttpd may still report such a stream as sent whole). */
bool api_stream_client_left(api_stream *s);

/* s may be NULL. */
void api_stream_free(api_stream *s);

#endif
