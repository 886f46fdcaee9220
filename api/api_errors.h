/*
 * api_errors.h - the one error body and status table of the HTTP API.
 *
 * Every failure becomes a non-2xx response with DESIGN §6's body:
 *   {"error_code","message","kafka_error","kafka_error_code","retriable",
 *    "details":{...},"request_id"}
 * Codes without a Kafka equivalent carry null kafka fields.  Engine error
 * codes map onto this table in one place (api_error_from_engine).
 */
#ifndef API_ERRORS_H
#define API_ERRORS_H

#include "api_request.h"
#include "eng_error.h"

/* Fills resp with the error `code` (a name from the table in api_errors.c),
 * its status, and a formatted message.  details (may be NULL) is stolen. */
void api_error(api_response *resp, const api_request *req, const char *code, json_t *details,
               const char *fmt, ...) __attribute__((format(printf, 5, 6)));

/* 503 shutting_down with Retry-After: 1 (the client retries, on the next
 * start), and a formatted message. */
void api_error_stopping(api_response *resp, const api_request *req, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Maps an engine result (ENG_E* or -errno) with its detail to a response. */
/* The details object of an engine error (bounds of a 416, the key of an
 * invalid config, ...): a new reference, {} when it has none. */
json_t *api_engine_details(int rc, const eng_errdetail *d);

void api_error_from_engine(api_response *resp, const api_request *req, int rc,
                           const eng_errdetail *d);

/* The same for an append's refusal: the bytes it judged came with the
 * request, so a corrupt_record there is the client's batch, not data
 * damaged on disk, and logstore_corrupt_record_errors_total (an alert on
 * the disk) does not count it. */
void api_error_from_append(api_response *resp, const api_request *req, int rc,
                           const eng_errdetail *d);

/* The API code an engine result maps to (for tests and 207 bodies): a
 * static string. */
const char *api_error_code_for(int rc);

/* HTTP status of an API code (500 for unknown codes). */
int api_error_status(const char *code);

/* Builds just the error object (for per-item errors inside a 207 body): a new
 * reference the caller owns (NULL when out of memory); details, if given, is
 * stolen. */
json_t *api_error_object(const api_request *req, const char *code, const char *message,
                         json_t *details);

#endif
