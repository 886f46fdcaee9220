/*
 * api_topics.c - topics, partitions and offsets: create, list, describe,
 * delete, grow; partition state; earliest/latest/max-timestamp/by-time
 * offsets.
 */
#include "api_common.h"
#include "api_errors.h"
#include "api_router.h"
#include "eng_fault.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static json_t *partition_json(eng_partition *p)
{
    eng_partition_info in;
    eng_partition_info_get(p, &in);
    json_t *o = json_pack("{s:s,s:i,s:I,s:I,s:I,s:I,s:I,s:i,s:I}", "topic", eng_partition_topic(p),
                          "partition", (int)eng_partition_id(p), "log_start_offset",
                          (json_int_t)in.log_start_offset, "high_watermark",
                          (json_int_t)in.high_watermark, "log_end_offset",
                          (json_int_t)in.log_end_offset, "recovery_point",
                          (json_int_t)in.recovery_point, "size_bytes", (json_int_t)in.size_bytes,
                          "segment_count", (int)in.segment_count, "active_segment_base_offset",
                          (json_int_t)in.active_base_offset);
    eng_partition_counters c;
    eng_partition_counters_get(p, &c);
    json_object_set_new(o, "records_appended", json_integer((json_int_t)c.appended_records));
    json_object_set_new(o, "bytes_appended", json_integer((json_int_t)c.appended_bytes));
    json_object_set_new(o, "records_read", json_integer((json_int_t)c.read_records));
    json_object_set_new(o, "bytes_read", json_integer((json_int_t)c.read_bytes));
    json_object_set_new(o, "idempotent_producers", json_integer((json_int_t)c.producers));
    json_object_set_new(o, "duplicate_batches", json_integer((json_int_t)c.duplicate_batches));
    json_object_set_new(o, "first_timestamp",
                        in.first_timestamp >= 0 ? json_integer(in.first_timestamp) : json_null());
    json_object_set_new(o, "max_timestamp",
                        in.max_timestamp >= 0 ? json_integer(in.max_timestamp) : json_null());
    return o;
}

static json_t *overrides_json(const eng_config_overrides *ov)
{
    json_t *o = json_object();
    for (int i = 0; i < ENG_CFG_COUNT; i++)
        if (ov->text[i])
            json_object_set_new(o, eng_config_def_at((eng_config_id)i)->name,
                                json_string(ov->text[i]));
    return o;
}

/* Description of a held topic (cleared here) with one page of its
 * partitions: at most limit of them, from the one after partition `after`
 * (-1: from the first).  The topic's totals cover every partition: a
 * dashboard shows them without reading every page. */
static json_t *held_json(eng_topic_held *h, int64_t after, size_t limit)
{
    json_t *parts = json_array();
    json_int_t size = 0, appended = 0, read = 0;
    size_t first = after + 1 < (int64_t)h->n ? (size_t)(after + 1) : h->n;
    size_t end = h->n - first < limit ? h->n : first + limit;
    for (size_t i = 0; i < h->n; i++) {
        if (i >= first && i < end) {
            json_t *pj = partition_json(h->parts[i]);
            size += json_integer_value(json_object_get(pj, "size_bytes"));
            appended += json_integer_value(json_object_get(pj, "records_appended"));
            read += json_integer_value(json_object_get(pj, "records_read"));
            json_array_append_new(parts, pj);
            continue;
        }
        eng_partition_info in;
        eng_partition_counters c;
        eng_partition_info_get(h->parts[i], &in);
        eng_partition_counters_get(h->parts[i], &c);
        size += (json_int_t)in.size_bytes;
        appended += (json_int_t)c.appended_records;
        read += (json_int_t)c.read_records;
    }
    const eng_topic_meta *meta = &h->desc.meta;
    json_t *o = json_pack("{s:s,s:s,s:i,s:I,s:o,s:I,s:I,s:I,s:o}", "name", meta->name, "topic_id",
                          meta->topic_id, "partition_count", (int)meta->partitions, "created_ms",
                          (json_int_t)meta->created_ms, "configs", overrides_json(&meta->overrides),
                          "size_bytes", size, "records_appended", appended, "records_read", read,
                          "partitions", parts);
    api_page_answer(o, end < h->n, end > first ? json_integer((json_int_t)(end - 1)) : NULL);
    eng_topic_held_clear(h);
    return o;
}

/* Description of a topic with one page of its partitions (held_json), or
 * NULL with resp filled. */
static json_t *describe(api_ctx *ctx, const api_request *req, const char *name, int64_t after,
                        size_t limit, api_response *resp)
{
    /* The partitions with the description, of one incarnation: not the
     * id of a topic deleted meanwhile beside its successor's offsets. */
    eng_topic_held h;
    if (!api_topic_partitions(ctx, req, resp, name, &h.desc, &h.parts, &h.n))
        return NULL;
    (void)ENG_FAULT("describe.topic_read");
    return held_json(&h, after, limit);
}

/* Answers a successful create (201) or grow (200) with the topic as the
 * change left it (h, cleared here): described again by name, a delete
 * right after the change made it answer 404, or the next topic's state.
 * Its partitions are the description's first page, as a GET without
 * paging arguments answers. */
static void answer_changed(api_response *resp, int status, eng_topic_held *h)
{
    if (status == 201) {
        char loc[300];
        snprintf(loc, sizeof loc, "/v1/topics/%s", h->desc.meta.name);
        api_resp_header(resp, "Location", loc);
    }
    api_resp_json(resp, status, held_json(h, -1, API_PAGE_DEFAULT));
}

void api_h_topics_list(api_ctx *ctx, const api_request *req, const api_params *params,
                       api_response *resp)
{
    (void)params;
    size_t limit;
    const char *after;
    if (!api_page_query_name(req, resp, "a topic name", eng_topic_name_valid, &limit, &after))
        return;
    char **names;
    size_t n;
    int rc = eng_manager_list_topics(api_mgr(ctx), &names, &n);
    if (rc) {
        api_error_from_engine(resp, req, rc, NULL);
        return;
    }
    /* The names come sorted as the engine sorts them (strcmp). */
    size_t first, end;
    api_page_names(names, n, after, limit, &first, &end);
    json_t *arr = json_array();
    for (size_t i = first; i < end; i++) {
        eng_topic_desc d;
        if (eng_manager_describe_topic(api_mgr(ctx), names[i], &d) != 0)
            continue; /* deleted meanwhile */
        json_array_append_new(arr, json_pack("{s:s,s:i,s:o}", "name", names[i], "partitions",
                                             (int)d.meta.partitions, "configs",
                                             overrides_json(&d.meta.overrides)));
        eng_topic_desc_clear(&d);
    }
    /* The last name looked at, listed or deleted meanwhile: the next page
     * goes on after it either way. */
    json_t *o = json_pack("{s:o}", "topics", arr);
    api_page_answer(o, end < n, end > first ? json_string(names[end - 1]) : NULL);
    eng_strv_free(names, n);
    api_resp_json(resp, 200, o);
}

void api_h_topic_create(api_ctx *ctx, const api_request *req, const api_params *params,
                        api_response *resp)
{
    (void)params;
    json_t *body = api_body_object(req, resp, false);
    if (!body)
        return;
    json_t *name = json_object_get(body, "name");
    json_t *parts = json_object_get(body, "partitions");
    json_t *configs = json_object_get(body, "configs");
    const char *key;
    json_t *v;
    json_object_foreach(body, key, v) {
        if (strcmp(key, "name") && strcmp(key, "partitions") && strcmp(key, "configs")) {
            api_error(resp, req, "invalid_request", NULL, "unknown field '%.64s'", key);
            goto done;
        }
    }
    if (!json_is_string(name)) {
        api_error(resp, req, "invalid_request", NULL, "name must be a string");
        goto done;
    }
    if (strlen(json_string_value(name)) != json_string_length(name) ||
        !eng_topic_name_valid(json_string_value(name))) {
        api_error(resp, req, "invalid_topic_name", json_pack("{s:s}", "key", "name"),
                  "invalid topic name: use 1 to 249 of [A-Za-z0-9._-], not '.' or '..'");
        goto done;
    }
    int64_t nparts = ctx->limits.default_partitions;
    if (parts && !json_is_null(parts)) {
        if (!json_is_integer(parts)) {
            api_error(resp, req, "invalid_request", NULL, "partitions must be an integer");
            goto done;
        }
        nparts = json_integer_value(parts);
    }
    if (nparts <= 0 || nparts > ENG_TOPIC_PARTITIONS_MAX) {
        api_error(resp, req, "invalid_partitions", json_pack("{s:s}", "key", "partitions"),
                  "partitions must be between 1 and %d, got %lld", ENG_TOPIC_PARTITIONS_MAX,
                  (long long)nparts);
        goto done;
    }
    if (configs && !json_is_null(configs) && !json_is_object(configs)) {
        api_error(resp, req, "invalid_request", NULL, "configs must be an object of name: value");
        goto done;
    }
    size_t n = configs ? json_object_size(configs) : 0, i = 0;
    const char **keys = calloc(n ? n : 1, sizeof *keys);
    const char **vals = calloc(n ? n : 1, sizeof *vals);
    char (*texts)[256] = calloc(n ? n : 1, sizeof *texts);
    if (!keys || !vals || !texts) {
        api_error(resp, req, "internal_error", NULL, "out of memory");
        goto free_arrays;
    }
    if (configs) {
        json_object_foreach(configs, key, v) {
            if (!api_config_text(v, texts[i], sizeof texts[i])) {
                api_error(resp, req, "invalid_config", json_pack("{s:s}", "key", key),
                          "value of %.100s must be a string, number or boolean", key);
                goto free_arrays;
            }
            keys[i] = key;
            vals[i] = texts[i];
            i++;
        }
    }
    eng_errdetail d = {0};
    eng_topic_held h;
    int rc = eng_manager_create_topic_held(api_mgr(ctx), json_string_value(name), (int32_t)nparts,
                                           keys, vals, n, &h, &d);
    if (rc) {
        api_error_from_engine(resp, req, rc, &d);
    } else {
        (void)ENG_FAULT("create.answer");
        answer_changed(resp, 201, &h);
    }
free_arrays:
    free(keys);
    free(vals);
    free(texts);
done:
    json_decref(body);
}

static bool topic_param(const api_request *req, const api_params *params, api_response *resp,
                        const char **name)
{
    *name = api_param(params, "topic");
    if (!eng_topic_name_valid(*name)) {
        api_error(resp, req, "invalid_topic_name", NULL, "'%.100s' is not a valid topic name", *name);
        return false;
    }
    return true;
}

void api_h_topic_get(api_ctx *ctx, const api_request *req, const api_params *params,
                     api_response *resp)
{
    const char *name;
    if (!topic_param(req, params, resp, &name))
        return;
    size_t limit;
    int64_t after;
    if (!api_page_query_number(req, resp, "a partition number", INT32_MAX, &limit, &after))
        return;
    json_t *o = describe(ctx, req, name, after, limit, resp);
    if (o)
        api_resp_json(resp, 200, o);
}

void api_h_topic_delete(api_ctx *ctx, const api_request *req, const api_params *params,
                        api_response *resp)
{
    const char *name;
    if (!topic_param(req, params, resp, &name))
        return;
    eng_errdetail d = {0};
    int rc = eng_manager_delete_topic(api_mgr(ctx), name, &d);
    if (rc) {
        api_error_from_engine(resp, req, rc, &d);
        return;
    }
    resp->status = 204;
}

void api_h_topic_patch(api_ctx *ctx, const api_request *req, const api_params *params,
                       api_response *resp)
{
    const char *name;
    if (!topic_param(req, params, resp, &name))
        return;
    json_t *body = api_body_object(req, resp, false);
    if (!body)
        return;
    json_t *parts = json_object_get(body, "partitions");
    if (json_object_size(body) != 1 || !json_is_integer(parts)) {
        api_error(resp, req, "invalid_request", NULL, "expected {\"partitions\": N}");
    } else if (json_integer_value(parts) <= 0 ||
               json_integer_value(parts) > ENG_TOPIC_PARTITIONS_MAX) {
        api_error(resp, req, "invalid_partitions", json_pack("{s:s}", "key", "partitions"),
                  "partitions must be between 1 and %d", ENG_TOPIC_PARTITIONS_MAX);
    } else {
        eng_errdetail d = {0};
        eng_topic_held h;
        int rc = eng_manager_add_partitions_held(api_mgr(ctx), name,
                                                 (int32_t)json_integer_value(parts), &h, &d);
        if (rc == ENG_EINVAL) {
            api_error(resp, req, "invalid_partitions", json_pack("{s:s}", "key", "partitions"),
                      "%s", d.message);
        } else if (rc) {
            api_error_from_engine(resp, req, rc, &d);
        } else {
            (void)ENG_FAULT("grow.answer");
            answer_changed(resp, 200, &h);
        }
    }
    json_decref(body);
}

void api_h_partition_get(api_ctx *ctx, const api_request *req, const api_params *params,
                         api_response *resp)
{
    eng_partition *p;
    if (!api_lookup_partition(ctx, req, params, resp, &p))
        return;
    api_resp_json(resp, 200, partition_json(p));
    eng_partition_unref(p);
}

void api_h_offsets(api_ctx *ctx, const api_request *req, const api_params *params,
                   api_response *resp)
{
    bool has_spec, has_ts;
    const char *spec = api_query(req, "spec", &has_spec);
    api_query(req, "timestamp", &has_ts);
    if (has_spec == has_ts || api_query_count(req, "spec") > 1 ||
        api_query_count(req, "timestamp") > 1) {
        api_error(resp, req, "invalid_request", NULL,
                  "give exactly one of spec=earliest|latest|max_timestamp or timestamp=T");
        return;
    }
    int64_t ts = 0;
    if (has_ts && !api_query_i64(req, resp, "timestamp", 0, 0, INT64_MAX, &ts))
        return;
    if (has_spec && (!spec || (strcmp(spec, "earliest") && strcmp(spec, "latest") &&
                               strcmp(spec, "max_timestamp")))) {
        api_error(resp, req, "invalid_request", NULL,
                  "spec must be earliest, latest or max_timestamp");
        return;
    }
    eng_partition *p;
    if (!api_lookup_partition(ctx, req, params, resp, &p))
        return;
    int64_t off, found_ts;
    json_t *o = NULL;
    if (has_spec && !strcmp(spec, "earliest")) {
        o = json_pack("{s:I,s:I}", "offset", (json_int_t)eng_partition_log_start_offset(p),
                      "timestamp", (json_int_t)-1);
    } else if (has_spec && !strcmp(spec, "latest")) {
        o = json_pack("{s:I,s:I}", "offset", (json_int_t)eng_partition_high_watermark(p),
                      "timestamp", (json_int_t)-1);
    } else {
        int rc = has_spec ? eng_partition_max_timestamp(p, &off, &found_ts)
                          : eng_partition_offset_for_timestamp(p, ts, &off, &found_ts);
        if (rc == ENG_ENOTFOUND)
            o = json_pack("{s:n,s:n}", "offset", "timestamp");
        else if (rc == 0)
            o = json_pack("{s:I,s:I}", "offset", (json_int_t)off, "timestamp", (json_int_t)found_ts);
        else
            api_error_from_engine(resp, req, rc, NULL);
    }
    if (o)
        api_resp_json(resp, 200, o);
    eng_partition_unref(p);
}
