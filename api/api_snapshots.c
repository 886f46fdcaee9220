/*
 * api_snapshots.c - point-in-time snapshots of the data dir for backups:
 * POST /v1/admin/snapshots {"name":"..."} takes one, GET lists them with
 * their bytes as last measured (a page at a time, by name, as every listing pages: see
 * api_common.h), DELETE /v1/admin/snapshots/{name} removes one.  The engine
 * (eng_snapshot.h) does all the file work; this file turns it into JSON.
 */
#include "api_common.h"
#include "api_errors.h"
#include "api_router.h"
#include "eng_snapshot.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static json_t *snapshot_json(api_ctx *ctx, const eng_snapshot_info *in)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/" ENG_SNAPSHOTS_DIR "/%s", eng_manager_log_dir(api_mgr(ctx)),
             in->name);
    return json_pack("{s:s,s:s,s:I,s:i,s:i,s:I,s:I,s:I}", "name", in->name, "path", path,
                     "created_ms", (json_int_t)in->created_ms, "topics", (int)in->topics,
                     "partitions", (int)in->partitions, "size_bytes", (json_int_t)in->size_bytes,
                     "unshared_bytes", (json_int_t)in->unshared_bytes, "measured_ms",
                     (json_int_t)in->measured_ms);
}

/* The engine's refusal, with the codes that only snapshots have. */
static void snapshot_error(api_response *resp, const api_request *req, int rc,
                           const eng_errdetail *d)
{
    bool about_name = d && !strcmp(d->key, "name");
    const char *code = !about_name              ? NULL
                       : rc == -EEXIST         ? "snapshot_exists"
                       : rc == ENG_ENOTFOUND ? "snapshot_not_found"
                       : rc == ENG_EINVAL    ? "invalid_snapshot_name"
                                             : NULL;
    if (code)
        api_error(resp, req, code, NULL, "%s", d->message[0] ? d->message : eng_strerror(rc));
    else
        api_error_from_engine(resp, req, rc, d);
}

void api_h_snapshot_create(api_ctx *ctx, const api_request *req, const api_params *params,
                           api_response *resp)
{
    (void)params;
    json_t *body = api_body_object(req, resp, false);
    if (!body)
        return;
    const char *key;
    json_t *v;
    json_object_foreach(body, key, v) {
        if (strcmp(key, "name")) {
            api_error(resp, req, "invalid_request", NULL, "unknown field '%.64s'", key);
            json_decref(body);
            return;
        }
    }
    json_t *name = json_object_get(body, "name");
    if (!json_is_string(name)) {
        api_error(resp, req, "invalid_request", NULL, "name must be a string");
        json_decref(body);
        return;
    }
    /* jansson keeps a \u0000 (JSON_ALLOW_NUL): the C string would end
     * there, and a snapshot of another name than the one asked for be taken. */
    if (strlen(json_string_value(name)) != json_string_length(name)) {
        api_error(resp, req, "invalid_snapshot_name", NULL,
                  "a snapshot name holds no NUL byte: 1 to 246 of [A-Za-z0-9._-], not starting "
                  "with '.'");
        json_decref(body);
        return;
    }
    eng_errdetail d = {0};
    eng_snapshot_info in;
    int rc = eng_manager_snapshot_create(api_mgr(ctx), json_string_value(name), &in, &d);
    json_decref(body);
    if (rc) {
        snapshot_error(resp, req, rc, &d);
        return;
    }
    char loc[300];
    snprintf(loc, sizeof loc, "/v1/admin/snapshots/%s", in.name);
    api_resp_header(resp, "Location", loc);
    api_resp_json(resp, 201, snapshot_json(ctx, &in));
}

void api_h_snapshots_list(api_ctx *ctx, const api_request *req, const api_params *params,
                          api_response *resp)
{
    (void)params;
    size_t limit;
    const char *after;
    if (!api_page_query_name(req, resp, "a snapshot name", eng_snapshot_name_valid, &limit, &after))
        return;
    char **names;
    size_t n;
    int rc = eng_manager_snapshot_names(api_mgr(ctx), &names, &n);
    if (rc) {
        api_error_from_engine(resp, req, rc, NULL);
        return;
    }
    /* Only the page's snapshots are described: the snapshot-usage job's
     * figures, except for one it has not measured yet, whose files are read
     * now. */
    size_t first, end;
    api_page_names(names, n, after, limit, &first, &end);
    json_t *arr = json_array();
    for (size_t i = first; i < end; i++) {
        eng_snapshot_info in;
        if (eng_manager_snapshot_describe(api_mgr(ctx), names[i], &in) == 0)
            json_array_append_new(arr, snapshot_json(ctx, &in));
        /* else removed meanwhile: the next page goes on after it all the same */
    }
    json_t *o = json_pack("{s:o}", "snapshots", arr);
    api_page_answer(o, end < n, end > first ? json_string(names[end - 1]) : NULL);
    eng_strv_free(names, n);
    api_resp_json(resp, 200, o);
}

void api_h_snapshot_delete(api_ctx *ctx, const api_request *req, const api_params *params,
                           api_response *resp)
{
    eng_errdetail d = {0};
    int rc = eng_manager_snapshot_delete(api_mgr(ctx), api_param(params, "name"), &d);
    if (rc) {
        snapshot_error(resp, req, rc, &d);
        return;
    }
    resp->status = 204;
}
