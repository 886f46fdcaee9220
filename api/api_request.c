/*
 * api_request.c - lookups on requests and building responses.
 */
#include "api_request.h"

#include "api_stream.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

const char *api_query(const api_request *r, const char *key, bool *present)
{
    for (size_t i = 0; i < r->nquery; i++) {
        if (strcmp(r->query[i].key, key) == 0) {
            if (present)
                *present = true;
            return r->query[i].value;
        }
    }
    if (present)
        *present = false;
    return NULL;
}

size_t api_query_count(const api_request *r, const char *key)
{
    size_t n = 0;
    for (size_t i = 0; i < r->nquery; i++)
        n += strcmp(r->query[i].key, key) == 0;
    return n;
}

bool api_is_head(const api_request *r)
{
    return r->method && strcmp(r->method, "HEAD") == 0;
}

const char *api_header(const api_request *r, const char *name)
{
    for (size_t i = 0; i < r->nheaders; i++)
        if (strcasecmp(r->headers[i].key, name) == 0)
            return r->headers[i].value;
    return NULL;
}

const char *api_param(const api_params *p, const char *name)
{
    for (size_t i = 0; i < p->n; i++)
        if (strcmp(p->name[i], name) == 0)
            return p->value[i];
    return "";
}

void api_resp_header(api_response *resp, const char *name, const char *value)
{
    if (resp->nheaders >= API_MAX_RESP_HEADERS)
        return;
    snprintf(resp->headers[resp->nheaders].name, sizeof resp->headers[0].name, "%s", name);
    snprintf(resp->headers[resp->nheaders].value, sizeof resp->headers[0].value, "%s", value);
    resp->nheaders++;
}

void api_resp_json(api_response *resp, int status, json_t *body)
{
    json_decref(resp->json);
    resp->status = status;
    resp->json = body;
}

typedef struct grow_buf {
    char *data;
    size_t len, cap;
    bool failed;
} grow_buf;

static int grow_append(const char *buf, size_t size, void *data)
{
    grow_buf *g = data;
    if (g->cap - g->len < size + 1) {
        size_t cap = g->cap ? g->cap : 4096;
        while (cap - g->len < size + 1)
            cap *= 2;
        char *n = realloc(g->data, cap);
        if (!n) {
            g->failed = true;
            return -1;
        }
        g->data = n;
        g->cap = cap;
    }
    memcpy(g->data + g->len, buf, size);
    g->len += size;
    return 0;
}

int api_resp_freeze(api_response *resp, size_t size_hint)
{
    if (!resp->json)
        return 0;
    /* Written into our own buffer (malloc), never through jansson's
     * allocator: the bytes outlive an arena scope. */
    grow_buf g = {0};
    if (size_hint > 0 && !(g.data = malloc(size_hint)))
        return -ENOMEM;
    g.cap = size_hint;
    if (json_dump_callback(resp->json, grow_append, &g, API_JSON_FLAGS) != 0 || g.failed ||
        grow_append("", 0, &g) != 0) {
        free(g.data);
        return -ENOMEM;
    }
    json_decref(resp->json);
    resp->json = NULL;
    free(resp->raw);
    resp->raw = g.data;
    resp->raw_len = g.len;
    return 0;
}

void api_response_clear(api_response *resp)
{
    json_decref(resp->json);
    free(resp->raw);
    if (resp->has_file)
        close(resp->file_fd);
    if (resp->file_part)
        eng_partition_unref(resp->file_part);
    api_stream_free(resp->stream);
    memset(resp, 0, sizeof *resp);
}

api_async *api_defer(const api_request *req, api_response *resp)
{
    if (!req->transport || !req->transport->defer)
        return NULL;
    api_async *a = req->transport->defer(req->transport->conn);
    if (a)
        resp->deferred = true;
    return a;
}

/* Bytes of a string with its NUL, 0 for NULL. */
static size_t str_size(const char *s)
{
    return s ? strlen(s) + 1 : 0;
}

/* Copies s into *at and advances it; NULL stays NULL. */
static const char *str_put(char **at, const char *s)
{
    if (!s)
        return NULL;
    size_t n = strlen(s) + 1;
    memcpy(*at, s, n);
    const char *out = *at;
    *at += n;
    return out;
}

int api_request_dup(const api_request *r, api_request **out)
{
    *out = NULL;
    size_t kvs = r->nquery + r->nheaders;
    size_t strs = str_size(r->method) + str_size(r->path);
    for (size_t i = 0; i < r->nquery; i++)
        strs += str_size(r->query[i].key) + str_size(r->query[i].value);
    for (size_t i = 0; i < r->nheaders; i++)
        strs += str_size(r->headers[i].key) + str_size(r->headers[i].value);
    /* One block: the struct, then the key/value arrays (pointer-aligned as
     * the struct's size is), then the strings and the body. */
    api_request *c = malloc(sizeof *c + kvs * sizeof(api_kv) + strs + r->body_len);
    if (!c)
        return -ENOMEM;
    *c = *r;
    c->transport = NULL;
    api_kv *kv = (api_kv *)(c + 1);
    char *at = (char *)(kv + kvs);
    c->method = str_put(&at, r->method);
    c->path = str_put(&at, r->path);
    for (size_t i = 0; i < r->nquery; i++)
        kv[i] = (api_kv){str_put(&at, r->query[i].key), str_put(&at, r->query[i].value)};
    for (size_t i = 0; i < r->nheaders; i++)
        kv[r->nquery + i] = (api_kv){str_put(&at, r->headers[i].key),
                                     str_put(&at, r->headers[i].value)};
    c->query = kv;
    c->headers = kv + r->nquery;
    if (r->body) {
        memcpy(at, r->body, r->body_len);
        c->body = (const uint8_t *)at;
    }
    *out = c;
    return 0;
}
