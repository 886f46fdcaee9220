/*
 * api_auth.h - bearer tokens with roles and an optional topic prefix.
 *
 * The tokens file (auth.tokens.file) holds one token a line:
 *   <sha256 hex of the token> <roles, comma-separated> [<topic prefix>]
 * with `#` starting a comment.  Roles: read, write, admin (admin implies
 * write and read).  Only hashes are stored; a presented token is hashed and
 * compared with every entry in constant time, so neither the file nor the
 * timing reveals a token.  Every route declares the role it needs
 * (api_router.c); routes needing none (health, the dashboard page) stay open.
 * A token with a topic prefix may only use routes about a topic whose name
 * starts with it.  No token or an unknown one: 401 with WWW-Authenticate:
 * Bearer; a missing role or a topic outside the prefix: 403.
 */
#ifndef API_AUTH_H
#define API_AUTH_H

#include "api_request.h"
#include "api_router.h"

#include <stdbool.h>
#include <stddef.h>

typedef struct api_auth api_auth;

/* Parses a tokens file's text.  On error returns -1 with a message naming
 * the line in err. */
int api_auth_load(const char *text, size_t len, api_auth **out, char *err, size_t err_len);

void api_auth_free(api_auth *a);

/* Number of tokens loaded. */
size_t api_auth_count(const api_auth *a);

/* SHA-256 of token as 64 lowercase hex digits (what the file stores). */
void api_auth_hash(const char *token, char out[65]);

/* True if auth is off or req presents a valid token (any role); otherwise
 * fills resp with the 401.  Answers that come before a route's own check
 * (no such route, a body over the limit) ask this first, so that a client
 * without a token learns nothing of which routes exist. */
bool api_auth_known(const api_auth *a, const api_request *req, api_response *resp);

/* True if req may use route r; otherwise fills resp (401/403). */
bool api_auth_check(const api_auth *a, const api_request *req, const api_route *r,
                    const api_params *params, api_response *resp);

#endif
