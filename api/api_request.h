/*
 * api_request.h - the HTTP request and response as handlers see them.
 *
 * Handlers never touch libmicrohttpd: api_server.c builds an api_request from
 * a connection (method, decoded path, query arguments, headers, body) and
 * turns the api_response a handler fills into bytes on the wire.  The same
 * structures let unit tests and the fuzzer drive every handler in process.
 */
#ifndef API_REQUEST_H
#define API_REQUEST_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct api_kv {
    const char *key;
    const char *value; /* may be NULL for a bare query flag (?earliest) */
} api_kv;

typedef struct api_async api_async;

/* How a transport lets a handler answer later (NULL = it cannot). */
typedef struct api_transport {
    api_async *(*defer)(void *conn);
    void *conn;
    int client_fd; /* the client's socket, to notice it leaving; -1 unknown */
} api_transport;

typedef struct api_request {
    const char *method;
    const char *path;    /* percent-decoded, without the query string */
    const api_kv *query; /* decoded query arguments, in order */
    size_t nquery;
    const api_kv *headers;
    size_t nheaders;
    /* NULL when there is none.  Borrowed for the handler's call only: it
     * may be libmicrohttpd's own read buffer (see api_server.c). */
    const uint8_t *body;
    size_t body_len;
    char request_id[65];
    const api_transport *transport; /* NULL for in-process callers */
} api_request;

/* How answers are serialized: compact, and reals to 15 significant digits,
 * so a dirty ratio of 0.1 reads 0.1 (jansson's default of 17 printed
 * 0.10000000000000001). */
#define API_JSON_FLAGS (JSON_COMPACT | JSON_REAL_PRECISION(15))

#define API_MAX_PARAMS 4
#define API_MAX_RESP_HEADERS 8

/* Path parameters captured by the router ({topic}, {partition}, ...). */
typedef struct api_params {
    const char *name[API_MAX_PARAMS];
    char value[API_MAX_PARAMS][256];
    size_t n;
} api_params;

typedef struct api_response {
    int status;
    json_t *json;          /* owned; serialized compactly */
    char *raw;             /* owned (malloc); sent as is when json is NULL */
    size_t raw_len;
    const char *content_type; /* static string; default application/json */
    struct {
        char name[48];
        /* The Location header of a topic with a 249-character name is
         * up to 260 bytes ("/v1/topics/" + name). */
        char value[512];
    } headers[API_MAX_RESP_HEADERS];
    size_t nheaders;
    bool deferred;         /* the answer comes through api_async_complete */
    /* Deferred to wait for records by design (a long-poll): the handling
     * time http.slow.request.ms is held to ends where it parks. */
    bool waits;
    /* A byte range of a file, sent with sendfile: the response owns fd. */
    int file_fd;           /* valid when has_file */
    bool has_file;
    uint64_t file_offset;
    size_t file_length;
    /* The partition the file belongs to (a reference, or NULL): while the
     * range is sent, a delete of its topic must be able to end the
     * connection of a client that stopped reading (api_live). */
    struct eng_partition *file_part;
    /* A body produced while it is sent (SSE, NDJSON); owned. */
    struct api_stream *stream;
    /* A HEAD of a stream: the stream's headers, no length, no body. */
    bool stream_head;
    int route; /* index in api_routes() of the route that answered, -1 none */
} api_response;

/* Answers later: marks resp deferred and returns the handle that completes
 * it, or NULL when the transport cannot defer (the handler then answers now).
 * The request itself must not be used after the handler returns; copy what
 * the completion needs (e.g. request_id).  The handle is owned by the
 * transport and freed by api_async_complete, which must be called once. */
api_async *api_defer(const api_request *req, api_response *resp);

/* Delivers the final response for a deferred request, from any thread; the
 * response's contents move into the handle (resp is left empty). */
void api_async_complete(api_async *a, api_response *resp);

/* A copy of r that outlives the call (everything in one block: free() it;
 * owned by the caller), without the transport: what a handler run on
 * another thread gets.  0 or -ENOMEM. */
int api_request_dup(const api_request *r, api_request **out);

/* First query value for key: *present tells whether the key appeared at all
 * (a bare flag has present=1 and a NULL value).  Borrowed from the request. */
const char *api_query(const api_request *r, const char *key, bool *present);

/* Number of times key appears in the query. */
size_t api_query_count(const api_request *r, const char *key);

/* A HEAD request: answered by the GET route, whose body the transport drops;
 * handlers that would park or stream answer at once instead. */
bool api_is_head(const api_request *r);

/* Case-insensitive header lookup; NULL if absent.  Borrowed from the request. */
const char *api_header(const api_request *r, const char *name);

/* Value of a path parameter; "" if absent.  Borrowed from p. */
const char *api_param(const api_params *p, const char *name);

/* Adds a response header (truncated to fit). */
void api_resp_header(api_response *resp, const char *name, const char *value);

/* Sets a JSON body (takes the reference) and status. */
void api_resp_json(api_response *resp, int status, json_t *body);

/* Releases what the response owns. */
void api_response_clear(api_response *resp);

/* Serializes resp->json into resp->raw (compact; size_hint is a first guess
 * at its length, 0 for none) and drops the JSON value: what a JSON arena
 * scope does before it ends.  No-op without json.  0 or -ENOMEM (then resp
 * is unchanged). */
int api_resp_freeze(api_response *resp, size_t size_hint);

#endif
