/*
 * api_auth.c - token hashing, the tokens file, and the per-route check.
 */
#include "api_auth.h"

#include "api_errors.h"

#include <ctype.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

enum { ROLE_READ = 1, ROLE_WRITE = 2, ROLE_ADMIN = 4 };

typedef struct token {
    unsigned char hash[32];
    unsigned roles;
    char prefix[256];
    int line; /* in the file, to name a repeat */
} token;

struct api_auth {
    token *tokens;
    size_t n;
};

static void sha256(const char *s, size_t len, unsigned char out[32])
{
    unsigned int n = 32;
    if (!EVP_Digest(s, len, out, &n, EVP_sha256(), NULL))
        memset(out, 0, 32);
}

void api_auth_hash(const char *token_text, char out[65])
{
    unsigned char h[32];
    sha256(token_text, strlen(token_text), h);
    for (int i = 0; i < 32; i++)
        snprintf(out + 2 * i, 3, "%02x", h[i]);
}

static int hexval(char ch)
{
    int c = tolower((unsigned char)ch);
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

static int parse_roles(const char *s, unsigned *roles)
{
    *roles = 0;
    char buf[300];
    snprintf(buf, sizeof buf, "%s", s);
    char *save = NULL;
    for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        if (!strcasecmp(t, "read"))
            *roles |= ROLE_READ;
        else if (!strcasecmp(t, "write"))
            *roles |= ROLE_WRITE;
        else if (!strcasecmp(t, "admin"))
            *roles |= ROLE_ADMIN | ROLE_WRITE | ROLE_READ;
        else
            return -1;
    }
    return *roles ? 0 : -1;
}

int api_auth_load(const char *text, size_t len, api_auth **out, char *err, size_t err_len)
{
    api_auth *a = calloc(1, sizeof *a);
    if (!a)
        return -1;
    const char *p = text, *end = text + len;
    int lineno = 0;
    while (p < end) {
        const char *eol = memchr(p, '\n', (size_t)(end - p));
        size_t n = eol ? (size_t)(eol - p) : (size_t)(end - p);
        char line[1024];
        lineno++;
        if (n >= sizeof line) {
            snprintf(err, err_len, "tokens file line %d is too long", lineno);
            goto fail;
        }
        /* A NUL would end the line early: "<hash> admin\0 orders" read as
         * an unscoped admin token. */
        if (memchr(p, 0, n)) {
            snprintf(err, err_len, "tokens file line %d holds a NUL byte", lineno);
            goto fail;
        }
        memcpy(line, p, n);
        line[n] = 0;
        p = eol ? eol + 1 : end;
        char *hash = strchr(line, '#');
        if (hash)
            *hash = 0;
        /* Split on white space by hand: sscanf with three %s fields read a
         * fourth field (a prefix with a space, a stray word) as nothing, and
         * a field of 300 bytes or more as two, so the line meant something
         * other than what it said, silently. */
        const char *f[3] = {"", "", ""};
        int nf = 0;
        char *save = NULL;
        static const char ws[] = " \t\r\v\f";
        for (char *w = strtok_r(line, ws, &save); w; w = strtok_r(NULL, ws, &save)) {
            if (nf == 3) {
                snprintf(err, err_len,
                         "tokens file line %d has more than three fields; expected '<sha256 hex> "
                         "<read|write|admin,...> [topic prefix]' ('#' starts a comment)",
                         lineno);
                goto fail;
            }
            f[nf++] = w;
        }
        if (nf == 0)
            continue;
        token t = {0};
        bool ok = nf >= 2 && strlen(f[0]) == 64 && strlen(f[1]) < 300 &&
                  parse_roles(f[1], &t.roles) == 0 && strlen(f[2]) < sizeof t.prefix;
        for (int i = 0; ok && i < 32; i++) {
            int hi = hexval(f[0][2 * i]), lo = hexval(f[0][2 * i + 1]);
            ok = hi >= 0 && lo >= 0;
            if (ok) /* hexval is -1 for a non-hex digit: no shift of it */
                t.hash[i] = (unsigned char)(hi << 4 | lo);
        }
        if (!ok) {
            snprintf(err, err_len,
                     "tokens file line %d: expected '<sha256 hex> <read|write|admin,...> [topic prefix]'",
                     lineno);
            goto fail;
        }
        /* The length was checked above (snprintf here trips
         * -Werror=format-truncation in the -O1 sanitizer build). */
        memcpy(t.prefix, f[2], strlen(f[2]) + 1);
        /* A token is looked up by its hash alone: of two lines with the same
         * hash one would never apply, and which one is not what the file says. */
        for (size_t i = 0; i < a->n; i++) {
            if (!memcmp(a->tokens[i].hash, t.hash, sizeof t.hash)) {
                snprintf(err, err_len,
                         "tokens file line %d has the same token (hash) as line %d; give each "
                         "token one line",
                         lineno, a->tokens[i].line);
                goto fail;
            }
        }
        t.line = lineno;
        token *nt = realloc(a->tokens, (a->n + 1) * sizeof *nt);
        if (!nt)
            goto fail;
        a->tokens = nt;
        a->tokens[a->n++] = t;
    }
    if (!a->n) {
        /* Authentication on with no token refuses every request but health
         * and the page: an emptied or truncated file, not a wish. */
        snprintf(err, err_len,
                 "the tokens file holds no token; add a '<sha256 hex> <roles> [topic prefix]' "
                 "line, or unset auth.tokens.file to turn authentication off");
        goto fail;
    }
    *out = a;
    return 0;
fail:
    api_auth_free(a);
    return -1;
}

void api_auth_free(api_auth *a)
{
    if (!a)
        return;
    OPENSSL_cleanse(a->tokens, a->n * sizeof *a->tokens);
    free(a->tokens);
    free(a);
}

size_t api_auth_count(const api_auth *a)
{
    return a ? a->n : 0;
}

/* The matching token, comparing against every entry whatever matches so the
 * time taken does not depend on which (or whether) one matched. */
static const token *find(const api_auth *a, const char *presented, size_t len)
{
    unsigned char h[32];
    sha256(presented, len, h);
    const token *found = NULL;
    for (size_t i = 0; i < a->n; i++) {
        bool eq = CRYPTO_memcmp(h, a->tokens[i].hash, 32) == 0;
        if (eq && !found)
            found = &a->tokens[i];
    }
    OPENSSL_cleanse(h, sizeof h);
    return found;
}

/* The request's valid token, or NULL with a 401 (a 400 for two tokens) in
 * resp, its WWW-Authenticate as RFC 6750 §3 says. */
static const token *authenticate(const api_auth *a, const api_request *req, api_response *resp)
{
    /* Authorization is a single-value field: with two, a proxy reading the
     * last and this server the first would disagree on who is asking. */
    size_t count = 0;
    for (size_t i = 0; i < req->nheaders; i++)
        count += strcasecmp(req->headers[i].key, "Authorization") == 0;
    if (count > 1) {
        api_error(resp, req, "invalid_request", NULL,
                  "the request has %zu Authorization headers; send one", count);
        api_resp_header(resp, "WWW-Authenticate",
                        "Bearer realm=\"logstore\", error=\"invalid_request\"");
        return NULL;
    }
    const char *h = api_header(req, "Authorization");
    const char *presented = NULL;
    size_t len = 0;
    if (h && strncasecmp(h, "Bearer ", 7) == 0) {
        presented = h + 7;
        while (*presented == ' ')
            presented++;
        /* White space after the token is the header's, not the token's
         * (RFC 9110 §5.5 OWS); libmicrohttpd leaves it in the value. */
        len = strlen(presented);
        while (len && (presented[len - 1] == ' ' || presented[len - 1] == '\t'))
            len--;
    }
    const token *t = len ? find(a, presented, len) : NULL;
    if (!t) {
        api_error(resp, req, "unauthorized", NULL,
                  presented ? "the bearer token is not valid" : "a bearer token is required");
        /* No error attribute without a token (RFC 6750 §3.1). */
        api_resp_header(resp, "WWW-Authenticate",
                        presented ? "Bearer realm=\"logstore\", error=\"invalid_token\""
                                  : "Bearer realm=\"logstore\"");
    }
    return t;
}

bool api_auth_known(const api_auth *a, const api_request *req, api_response *resp)
{
    return !a || authenticate(a, req, resp) != NULL;
}

/* A known token without the right (RFC 6750 §3.1). */
#define INSUFFICIENT "Bearer realm=\"logstore\", error=\"insufficient_scope\""

bool api_auth_check(const api_auth *a, const api_request *req, const api_route *r,
                    const api_params *params, api_response *resp)
{
    if (!a || r->role == API_ROLE_NONE)
        return true;
    const token *t = authenticate(a, req, resp);
    if (!t)
        return false;
    unsigned need = r->role == API_ROLE_ADMIN ? ROLE_ADMIN : r->role == API_ROLE_WRITE ? ROLE_WRITE
                                                                                      : ROLE_READ;
    static const char *const names[] = {"", "read", "write", "admin"};
    if (!(t->roles & need)) {
        api_error(resp, req, "forbidden", NULL, "this route needs the %s role", names[r->role]);
        api_resp_header(resp, "WWW-Authenticate", INSUFFICIENT);
        return false;
    }
    if (t->prefix[0]) {
        const char *topic = api_param(params, "topic");
        if (!topic[0] || strncmp(topic, t->prefix, strlen(t->prefix)) != 0) {
            api_error(resp, req, "forbidden", NULL,
                      "this token only reaches topics whose names start with '%s'", t->prefix);
            api_resp_header(resp, "WWW-Authenticate", INSUFFICIENT);
            return false;
        }
    }
    return true;
}
