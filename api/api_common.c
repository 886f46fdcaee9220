/*
 * api_common.c - shared handler helpers.
 */
#include "api_common.h"

#include "api_errors.h"
#include "api_json_arena.h"
#include "eng_fault.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

eng_manager *api_mgr(api_ctx *ctx)
{
    return atomic_load(&ctx->mgr);
}

bool api_parse_i64(const char *s, int64_t *out)
{
    if (!s || !*s)
        return false;
    const char *p = s;
    if (*p == '-')
        p++;
    if (!*p)
        return false;
    for (const char *q = p; *q; q++)
        if (*q < '0' || *q > '9')
            return false;
    errno = 0;
    char *end;
    long long v = strtoll(s, &end, 10);
    if (errno || *end)
        return false;
    *out = v;
    return true;
}

bool api_query_i64(const api_request *req, api_response *resp, const char *key, int64_t dflt,
                   int64_t min, int64_t max, int64_t *out)
{
    bool present;
    const char *v = api_query(req, key, &present);
    if (!present) {
        *out = dflt;
        return true;
    }
    int64_t x;
    if (!api_parse_i64(v, &x) || x < min || x > max) {
        api_error(resp, req, "invalid_request", NULL,
                  "query parameter %s must be an integer in [%lld, %lld]", key, (long long)min,
                  (long long)max);
        return false;
    }
    *out = x;
    return true;
}

bool api_page_limit(const api_request *req, api_response *resp, size_t *limit)
{
    int64_t v;
    if (!api_query_i64(req, resp, "limit", API_PAGE_DEFAULT, 1, API_PAGE_MAX, &v))
        return false;
    *limit = (size_t)v;
    return true;
}

void api_page_bad_after(const api_request *req, api_response *resp, const char *what)
{
    api_error(resp, req, "invalid_request", NULL,
              "query parameter after must be %s (the next_after of the page before)", what);
}

bool api_page_after(const api_request *req, api_response *resp, const char *what,
                    const char **after)
{
    bool present;
    const char *v = api_query(req, "after", &present);
    if (present && (!v || !*v)) {
        api_page_bad_after(req, resp, what);
        return false;
    }
    *after = present ? v : NULL;
    return true;
}

bool api_page_query_name(const api_request *req, api_response *resp, const char *what,
                         bool (*valid)(const char *), size_t *limit, const char **after)
{
    if (!api_page_limit(req, resp, limit) || !api_page_after(req, resp, what, after))
        return false;
    if (*after && !valid(*after)) {
        api_page_bad_after(req, resp, what);
        return false;
    }
    return true;
}

bool api_page_query_number(const api_request *req, api_response *resp, const char *what,
                           int64_t max, size_t *limit, int64_t *after)
{
    const char *text;
    *after = -1;
    if (!api_page_limit(req, resp, limit) || !api_page_after(req, resp, what, &text))
        return false;
    if (text && (!api_parse_i64(text, after) || *after < 0 || *after > max)) {
        api_page_bad_after(req, resp, what);
        return false;
    }
    return true;
}

void api_page_names(char *const *names, size_t n, const char *after, size_t limit,
                    size_t *first, size_t *end)
{
    size_t lo = 0;
    if (after) {
        size_t hi = n;
        while (lo < hi) {
            size_t mid = lo + (hi - lo) / 2;
            if (strcmp(names[mid], after) <= 0)
                lo = mid + 1;
            else
                hi = mid;
        }
    }
    *first = lo;
    *end = n - lo < limit ? n : lo + limit;
}

void api_page_answer(json_t *o, bool has_more, json_t *next)
{
    json_object_set_new(o, "has_more", json_boolean(has_more));
    json_object_set_new(o, "next_after", has_more && next ? next : json_null());
    if (!has_more && next)
        json_decref(next);
}

static const char part_after[] = "a partition's directory name, <topic>-<partition>";

bool api_part_pager_init(const api_request *req, api_response *resp, api_part_pager *pg)
{
    memset(pg, 0, sizeof *pg);
    pg->after_partition = -1;
    const char *after;
    if (!api_page_limit(req, resp, &pg->limit) || !api_page_after(req, resp, part_after, &after))
        return false;
    if (!after)
        return true;
    const char *dash = strrchr(after, '-');
    int64_t id;
    if (!dash || (size_t)(dash - after) > ENG_TOPIC_NAME_MAX || !api_parse_i64(dash + 1, &id) ||
        id < 0 || id > INT32_MAX) {
        api_page_bad_after(req, resp, part_after);
        return false;
    }
    memcpy(pg->after_topic, after, (size_t)(dash - after));
    pg->after_topic[dash - after] = 0;
    if (!eng_topic_name_valid(pg->after_topic)) {
        api_page_bad_after(req, resp, part_after);
        return false;
    }
    pg->has_after = true;
    pg->after_partition = id;
    return true;
}

bool api_part_pager_take(api_part_pager *pg, eng_partition *p)
{
    if (pg->has_after) {
        int c = strcmp(eng_partition_topic(p), pg->after_topic);
        if (c < 0 || (c == 0 && eng_partition_id(p) <= pg->after_partition))
            return false;
    }
    if (pg->listed == pg->limit) {
        pg->more = true;
        return false;
    }
    if (++pg->listed == pg->limit) {
        char name[ENG_TOPIC_NAME_MAX + 16];
        snprintf(name, sizeof name, "%s-%d", eng_partition_topic(p), (int)eng_partition_id(p));
        pg->next = json_string(name);
    }
    return true;
}

void api_part_pager_answer(api_part_pager *pg, json_t *o)
{
    api_page_answer(o, pg->more, pg->next);
    pg->next = NULL;
}

bool api_query_bool(const api_request *req, api_response *resp, const char *key, bool dflt,
                    bool *out)
{
    bool present;
    const char *v = api_query(req, key, &present);
    if (!present) {
        *out = dflt;
        return true;
    }
    if (!v || !*v || !strcmp(v, "1") || !strcmp(v, "true")) {
        *out = true;
        return true;
    }
    if (!strcmp(v, "0") || !strcmp(v, "false")) {
        *out = false;
        return true;
    }
    api_error(resp, req, "invalid_request", NULL, "query parameter %s must be true or false", key);
    return false;
}

bool api_lookup_partition(api_ctx *ctx, const api_request *req, const api_params *params,
                          api_response *resp, eng_partition **out)
{
    const char *topic = api_param(params, "topic");
    int64_t id;
    if (!eng_topic_name_valid(topic)) {
        api_error(resp, req, "invalid_topic_name", NULL, "'%.100s' is not a valid topic name", topic);
        return false;
    }
    if (!api_parse_i64(api_param(params, "partition"), &id) || id < 0 || id > INT32_MAX) {
        api_error(resp, req, "invalid_request", NULL, "partition must be a non-negative integer");
        return false;
    }
    eng_errdetail d = {0};
    int rc = eng_manager_partition(api_mgr(ctx), topic, (int32_t)id, out, &d);
    if (rc) {
        api_error_from_engine(resp, req, rc, &d);
        return false;
    }
    return true;
}

/* The type must end where type does (or be followed by parameters): a bare
 * prefix test would accept "application/json-seq", "application/jsonx" and
 * the like. */
bool api_media_type_is(const char *ct, const char *type)
{
    size_t n = strlen(type);
    return ct && strncasecmp(ct, type, n) == 0 &&
           (ct[n] == 0 || ct[n] == ';' || ct[n] == ' ' || ct[n] == '\t');
}

/* The charset parameter of a media type, if any: its value (quotes
 * stripped) into buf; false when there is none. */
static bool charset_of(const char *ct, char *buf, size_t len)
{
    for (const char *p = strchr(ct, ';'); p; p = strchr(p + 1, ';')) {
        const char *k = p + 1;
        while (*k == ' ' || *k == '\t')
            k++;
        if (strncasecmp(k, "charset=", 8))
            continue;
        const char *v = k + 8;
        bool quoted = *v == '"';
        v += quoted;
        size_t n = strcspn(v, quoted ? "\"" : "; \t");
        snprintf(buf, len, "%.*s", (int)(n < len ? n : len - 1), v);
        return true;
    }
    return false;
}

bool api_json_content_type(const api_request *req, api_response *resp)
{
    const char *ct = api_header(req, "Content-Type");
    if (!ct)
        return true;
    if (!api_media_type_is(ct, "application/json")) {
        api_error(resp, req, "unsupported_media_type", NULL,
                  "Content-Type %.80s is not supported here; send application/json", ct);
        return false;
    }
    /* JSON is UTF-8 (RFC 8259): a body declared in another charset would
     * be stored as the wrong characters, not refused. */
    char cs[32];
    if (charset_of(ct, cs, sizeof cs) && strcasecmp(cs, "utf-8") && strcasecmp(cs, "utf8")) {
        api_error(resp, req, "unsupported_media_type", NULL,
                  "charset %.31s is not supported; JSON bodies are UTF-8", cs);
        return false;
    }
    return true;
}

json_t *api_body_object(const api_request *req, api_response *resp, bool allow_empty)
{
    if (!req->body || req->body_len == 0) {
        if (allow_empty)
            return json_object();
        api_error(resp, req, "malformed_json", NULL, "the request body is empty; expected a JSON object");
        return NULL;
    }
    /* DESIGN §6: a body that is not application/json gets 415 (a text/plain
     * POST /v1/topics must not create a topic). */
    if (!api_json_content_type(req, resp))
        return NULL;
    json_error_t jerr;
    /* A key given twice was taken at its last value, silently. */
    json_t *doc = json_loadb((const char *)req->body, req->body_len,
                             JSON_ALLOW_NUL | JSON_REJECT_DUPLICATES, &jerr);
    if (!doc) {
        if (json_error_code(&jerr) == json_error_invalid_utf8)
            api_error(resp, req, "invalid_utf8", NULL, "the body is not valid UTF-8");
        else
            api_error(resp, req, "malformed_json", NULL, "malformed JSON at line %d column %d: %s",
                      jerr.line, jerr.column, jerr.text);
        return NULL;
    }
    if (!json_is_object(doc)) {
        json_decref(doc);
        api_error(resp, req, "invalid_request", NULL, "the body must be a JSON object");
        return NULL;
    }
    return doc;
}

void api_arena_close(const api_request *req, api_response *resp, size_t size_hint)
{
    int frozen = api_resp_freeze(resp, size_hint);
    if (frozen) {
        json_decref(resp->json);
        resp->json = NULL;
    }
    api_json_arena_end();
    if (frozen)
        api_error(resp, req, "internal_error", NULL, "out of memory serializing the answer");
}

static bool maintenance_args(const api_request *req, api_response *resp, int64_t *only,
                             bool *dry_run)
{
    if (!api_query_i64(req, resp, "partition", -1, 0, INT32_MAX, only))
        return false;
    json_t *body = api_body_object(req, resp, true);
    if (!body)
        return false;
    json_t *d = json_object_get(body, "dry_run");
    bool ok = json_object_size(body) == (d ? 1u : 0u) && (!d || json_is_boolean(d));
    if (!ok)
        api_error(resp, req, "invalid_request", NULL, "expected {\"dry_run\": true|false} or no body");
    *dry_run = d && json_is_true(d);
    json_decref(body);
    return ok;
}

bool api_describe_topic(api_ctx *ctx, const api_request *req, api_response *resp,
                        const char *topic, eng_topic_desc *d)
{
    if (!eng_topic_name_valid(topic)) {
        api_error(resp, req, "invalid_topic_name", NULL, "'%.100s' is not a valid topic name", topic);
        return false;
    }
    int rc = eng_manager_describe_topic(api_mgr(ctx), topic, d);
    if (rc) {
        eng_errdetail ed = {0};
        eng_fail(&ed, rc, "topic '%.200s' does not exist", topic);
        api_error_from_engine(resp, req, rc, &ed);
        return false;
    }
    return true;
}

bool api_topic_partitions(api_ctx *ctx, const api_request *req, api_response *resp,
                          const char *topic, eng_topic_desc *d, eng_partition ***parts,
                          size_t *n)
{
    if (!eng_topic_name_valid(topic)) {
        api_error(resp, req, "invalid_topic_name", NULL, "'%.100s' is not a valid topic name", topic);
        return false;
    }
    eng_errdetail ed = {0};
    int rc = eng_manager_topic_partitions(api_mgr(ctx), topic, d, parts, n, &ed);
    if (rc) {
        api_error_from_engine(resp, req, rc, &ed);
        return false;
    }
    return true;
}

static bool all_targets(api_ctx *ctx, const api_request *req, api_response *resp, int64_t only,
                        eng_partition ***out, size_t *n)
{
    eng_partition **all;
    size_t total;
    int rc = eng_manager_all_partitions(api_mgr(ctx), &all, &total);
    if (rc) {
        api_error_from_engine(resp, req, rc, NULL);
        return false;
    }
    size_t k = 0;
    for (size_t i = 0; i < total; i++) {
        if (only < 0 || eng_partition_id(all[i]) == only)
            all[k++] = all[i];
        else
            eng_partition_unref(all[i]);
    }
    *out = all;
    *n = k;
    return true;
}

bool api_maintenance_targets(api_ctx *ctx, const api_request *req, api_response *resp,
                             const char *topic, bool *dry_run, eng_partition ***out, size_t *n)
{
    *out = NULL;
    *n = 0;
    int64_t only;
    if (!maintenance_args(req, resp, &only, dry_run))
        return false;
    if (!topic)
        return all_targets(ctx, req, resp, only, out, n);
    /* Taken together: one run covers one topic, never partitions of a
     * topic deleted and created again while they were looked up. */
    eng_partition **parts;
    size_t nparts;
    if (!api_topic_partitions(ctx, req, resp, topic, NULL, &parts, &nparts))
        return false;
    (void)ENG_FAULT("maintenance.topic_read");
    if (only >= (int64_t)nparts) {
        api_error(resp, req, "unknown_partition", NULL, "topic '%s' has no partition %lld (it has %zu)",
                  topic, (long long)only, nparts);
        eng_partitions_release(parts, nparts);
        return false;
    }
    size_t k = 0;
    for (size_t i = 0; i < nparts; i++) {
        if (only < 0 || (int64_t)i == only)
            parts[k++] = parts[i];
        else
            eng_partition_unref(parts[i]);
    }
    *out = parts;
    *n = k;
    return true;
}

bool api_config_text(json_t *v, char *buf, size_t len)
{
    if (json_is_string(v))
        return (size_t)snprintf(buf, len, "%s", json_string_value(v)) < len &&
               strlen(json_string_value(v)) == json_string_length(v);
    if (json_is_integer(v))
        return snprintf(buf, len, "%lld", (long long)json_integer_value(v)) > 0;
    if (json_is_real(v)) {
        eng_format_double(json_real_value(v), buf, len);
        return len > 0 && buf[0] != 0;
    }
    if (json_is_boolean(v))
        return snprintf(buf, len, "%s", json_is_true(v) ? "true" : "false") > 0;
    return false;
}
