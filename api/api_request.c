/*
 * api_request.c - lookups on requests and building responses.
 */
#include "api_request.h"

#include "api_stream.h"

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

void api_response_clear(api_response *resp)
{
    json_decref(resp->json);
    free(resp->raw);
    if (resp->has_file)
        close(resp->file_fd);
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
