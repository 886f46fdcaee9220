/*
 * api_admission.h - what a request must pass before its body is read.
 *
 * libmicrohttpd can answer a request before it accepts the body, or after the
 * whole body has arrived, and in between only close the connection.  So
 * everything that the request line and headers decide is decided on the first
 * callback, before a client is sent 100 Continue or a byte of body is held
 * against http.max.inflight.request.bytes: how the body is framed, the size
 * of the request line and headers, the route's token (role and topic
 * prefix), whether the route takes a body at all, and a Content-Length over
 * the limit.
 *
 * These functions know nothing of libmicrohttpd: api_server.c passes them the
 * request's headers (and the sizes only the transport knows), and they fill
 * the error answer, so they can be driven in process.
 */
#ifndef API_ADMISSION_H
#define API_ADMISSION_H

#include "api_ctx.h"
#include "api_request.h"
#include "api_router.h"

#include <stdbool.h>
#include <stddef.h>

/* False, with a 400 (and Connection: close) in resp, when the body's length
 * is ambiguous: more than one Content-Length, Content-Length together with
 * Transfer-Encoding, or a Transfer-Encoding other than exactly "chunked".
 * A proxy in front could read such a request's end differently from us and
 * smuggle a second request inside its body (RFC 9112 §6.1, §6.3). */
bool api_admit_framing(const api_request *req, api_response *resp);

/* False, with a 414 (request line) or 431 (headers) in resp, when the request
 * line and headers together (header_bytes, as received) pass max_bytes
 * (http.max.header.bytes; 0 = no check).  line_bytes is the request line's
 * size, which tells the two apart. */
bool api_admit_header_size(const api_request *req, size_t line_bytes, size_t header_bytes,
                           size_t max_bytes, api_response *resp);

/* False, with the answer in resp, when route r refuses req before its body:
 * the token (401/403, exactly as the handler's own check would answer), or a
 * body sent to a route that takes none (413). */
bool api_admit_route(const api_ctx *ctx, const api_route *r, const api_params *params,
                     const api_request *req, api_response *resp);

/* The 413 for a body over http.max.request.bytes; declared is its
 * Content-Length, or 0 when it came chunked. */
void api_admit_too_large(const api_ctx *ctx, const api_request *req, api_response *resp,
                         unsigned long long declared);

/* The 503 for a body that did not fit under http.max.inflight.request.bytes
 * (max_buffered). */
void api_admit_overloaded(const api_request *req, api_response *resp, size_t max_buffered);

#endif
