/*
 * api_configs.c - topic configs, server defaults and log dirs.
 *
 * Every change goes through eng_manager_set_topic_overrides: the whole new
 * set of overrides is validated (bounds, cross-checks) and persisted in the
 * topic's metadata before any partition sees it, so an alter either applies
 * completely, at once, without a restart, or changes nothing.
 *
 * configs:alter takes Kafka's incremental operations: SET and DELETE on any
 * config, APPEND and SUBTRACT on list configs (cleanup.policy), each config
 * named once (as Kafka refuses duplicate config keys: an order between two
 * changes of one config is nothing a client should rely on).
 */
#include "api_common.h"
#include "api_errors.h"
#include "api_router.h"
#include "eng_fault.h"
#include "eng_snapshot.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* PUT, DELETE and configs:alter read the topic's overrides, change their
 * copy and write the whole set back: without a lock two concurrent changes
 * to different configs race and the later write silently drops the earlier
 * one.  Config changes are rare: one lock makes each read-modify-write whole.  The three
 * handlers below take it around their *_locked bodies. */
static pthread_mutex_t change_lock = PTHREAD_MUTEX_INITIALIZER;

static const char *const source_names[] = {"DEFAULT_CONFIG", "STATIC_BROKER_CONFIG", "TOPIC_CONFIG"};
static const char *const type_names[] = {"INT", "LONG", "DOUBLE", "BOOLEAN", "STRING", "LIST"};

/* The value server setting name was given (file, environment or flag), or
 * NULL when it was not set. */
static const char *set_value(json_t *server, const char *name)
{
    size_t i;
    json_t *e;
    json_array_foreach(server, i, e) {
        const char *n = json_string_value(json_object_get(e, "name"));
        const char *src = json_string_value(json_object_get(e, "source"));
        if (n && src && !strcmp(n, name) && strcmp(src, "DEFAULT") != 0)
            return json_string_value(json_object_get(e, "value"));
    }
    return NULL;
}

static json_t *synonym(const char *name, const char *value, const char *source)
{
    return json_pack("{s:s,s:s,s:s}", "name", name, "value", value, "source", source);
}

/* Kafka's DescribeConfigs synonyms of config id, highest priority first:
 * the topic's override, each broker synonym that was set, then the
 * broker synonym that holds Kafka's default (log.retention.hours=168, not
 * log.retention.ms, which has none).  server (may be NULL: in-process
 * callers) is the settings as given; without it the synonym in force is
 * shown with its resolved value. */
static json_t *synonyms_json(json_t *server, const eng_config_defaults *d,
                             const eng_config_overrides *ov, eng_config_id id)
{
    const eng_config_def *def = eng_config_def_at(id);
    json_t *syn = json_array();
    if (ov && ov->text[id])
        json_array_append_new(syn, synonym(def->name, ov->text[id], "TOPIC_CONFIG"));
    int last = 0;
    for (int k = 0; k < 4 && def->synonyms[k].name; k++) {
        last = k;
        const char *given = server ? set_value(server, def->synonyms[k].name) : NULL;
        char resolved[128];
        if (!server && d->synonym_rank[id] == k) {
            if (def->synonyms[k].factor == 1)
                eng_config_format(id, d->cfg.v[id], resolved, sizeof resolved);
            else
                snprintf(resolved, sizeof resolved, "%lld",
                         (long long)(d->cfg.v[id].i / def->synonyms[k].factor));
            given = resolved;
        }
        if (given)
            json_array_append_new(syn, synonym(def->synonyms[k].name, given, "STATIC_BROKER_CONFIG"));
    }
    char dflt[128];
    if (def->synonyms[last].factor == 1)
        snprintf(dflt, sizeof dflt, "%s", def->default_text);
    else
        snprintf(dflt, sizeof dflt, "%lld",
                 strtoll(def->default_text, NULL, 10) / (long long)def->synonyms[last].factor);
    json_array_append_new(syn, synonym(def->synonyms[last].name, dflt, "DEFAULT_CONFIG"));
    return syn;
}

static json_t *entry_json(json_t *server, const eng_config_defaults *d,
                          const eng_config_overrides *ov, const eng_config *c, eng_config_id id)
{
    const eng_config_def *def = eng_config_def_at(id);
    char value[128];
    eng_config_format(id, c->v[id], value, sizeof value);
    eng_config_source src = eng_config_source_of(d, ov, id);
    json_t *o = json_pack("{s:s,s:s,s:s,s:s,s:b,s:s}", "name", def->name, "value",
                          src == ENG_SRC_TOPIC ? ov->text[id] : value, "source", source_names[src],
                          "type", type_names[def->type], "is_default", src == ENG_SRC_DEFAULT,
                          "doc", def->doc);
    json_object_set_new(o, "synonyms", synonyms_json(server, d, ov, id));
    json_object_set_new(o, "default", json_string(def->default_text));
    return o;
}

/* Answers the listing of a described topic d (cleared here). */
static void answer_desc(api_ctx *ctx, eng_topic_desc *d, api_response *resp)
{
    const eng_config_defaults *defs = eng_manager_defaults(api_mgr(ctx));
    json_t *arr = json_array();
    for (int i = 0; i < ENG_CFG_COUNT; i++)
        json_array_append_new(arr, entry_json(ctx->server_settings, defs, &d->meta.overrides,
                                              &d->config, (eng_config_id)i));
    api_resp_json(resp, 200, json_pack("{s:s,s:o}", "topic", d->meta.name, "configs", arr));
    eng_topic_desc_clear(d);
}

void api_h_configs_get(api_ctx *ctx, const api_request *req, const api_params *params,
                       api_response *resp)
{
    eng_topic_desc d;
    if (!api_describe_topic(ctx, req, resp, api_param(params, "topic"), &d))
        return;
    answer_desc(ctx, &d, resp);
}

/* Applies ov to the topic; answers the new listing, taken with the change
 * (described again by name, a delete right after a change made it answer
 * 404), or the error. */
static void apply(api_ctx *ctx, const api_request *req, const eng_topic_meta *meta,
                  api_response *resp)
{
    eng_errdetail d = {0};
    eng_topic_desc changed;
    int rc = eng_manager_set_topic_overrides_desc(api_mgr(ctx), meta->name, meta->topic_id,
                                                  &meta->overrides, &changed, &d);
    if (rc) {
        api_error_from_engine(resp, req, rc, &d);
    } else {
        (void)ENG_FAULT("configs.answer");
        answer_desc(ctx, &changed, resp);
    }
}

static void config_put_locked(api_ctx *ctx, const api_request *req, const api_params *params,
                              api_response *resp)
{
    eng_topic_desc d;
    if (!api_describe_topic(ctx, req, resp, api_param(params, "topic"), &d))
        return;
    const char *name = api_param(params, "name");
    json_t *body = api_body_object(req, resp, false);
    char text[256];
    if (body) {
        json_t *v = json_object_get(body, "value");
        if (json_object_size(body) != 1 || !v || !api_config_text(v, text, sizeof text)) {
            api_error(resp, req, "invalid_request", NULL, "expected {\"value\": \"...\"}");
        } else {
            eng_errdetail ed = {0};
            int rc = eng_config_overrides_set(&d.meta.overrides, name, text, &ed);
            if (rc)
                api_error_from_engine(resp, req, rc, &ed);
            else
                apply(ctx, req, &d.meta, resp);
        }
        json_decref(body);
    }
    eng_topic_desc_clear(&d);
}

static void config_delete_locked(api_ctx *ctx, const api_request *req, const api_params *params,
                                 api_response *resp)
{
    eng_topic_desc d;
    if (!api_describe_topic(ctx, req, resp, api_param(params, "topic"), &d))
        return;
    eng_errdetail ed = {0};
    int rc = eng_config_overrides_set(&d.meta.overrides, api_param(params, "name"), NULL, &ed);
    if (rc)
        api_error_from_engine(resp, req, rc, &ed);
    else
        apply(ctx, req, &d.meta, resp);
    eng_topic_desc_clear(&d);
}

/* item with the blanks around it cut off, in place. */
static char *trim_item(char *item)
{
    while (*item == ' ' || *item == '\t')
        item++;
    size_t n = strlen(item);
    while (n > 0 && (item[n - 1] == ' ' || item[n - 1] == '\t'))
        item[--n] = 0;
    return item;
}

/* APPEND / SUBTRACT on a list config: items are comma separated.  Items
 * are trimmed and matched exactly, as Kafka parses and compares a list
 * (" compact" is compact; COMPACT is not). */
static int list_op(const char *current, const char *value, bool append, char *out, size_t len)
{
    char items[16][64];
    size_t n = 0;
    char cur[256];
    snprintf(cur, sizeof cur, "%s", current);
    char *save = NULL;
    for (char *t = strtok_r(cur, ",", &save); t && n < 16; t = strtok_r(NULL, ",", &save)) {
        t = trim_item(t);
        if (*t)
            snprintf(items[n++], sizeof items[0], "%s", t);
    }
    char val[256];
    snprintf(val, sizeof val, "%s", value);
    for (char *t = strtok_r(val, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        t = trim_item(t);
        if (!*t)
            continue;
        size_t k = 0;
        while (k < n && strcmp(items[k], t) != 0)
            k++;
        if (append && k == n && n < 16)
            snprintf(items[n++], sizeof items[0], "%s", t);
        /* Every occurrence, as Kafka filters the list: a list stored with
         * a duplicate (older metadata) kept the item otherwise. */
        while (!append && k < n) {
            memmove(items[k], items[k + 1], (n-- - k - 1) * sizeof items[0]);
            while (k < n && strcmp(items[k], t) != 0)
                k++;
        }
    }
    size_t used = 0;
    out[0] = 0;
    for (size_t k = 0; k < n; k++)
        used += (size_t)snprintf(out + used, used < len ? len - used : 0, "%s%s", k ? "," : "",
                                 items[k]);
    return used < len ? 0 : -1;
}

static void configs_alter_locked(api_ctx *ctx, const api_request *req, const api_params *params,
                                 api_response *resp)
{
    eng_topic_desc d;
    if (!api_describe_topic(ctx, req, resp, api_param(params, "topic"), &d))
        return;
    json_t *body = api_body_object(req, resp, false);
    json_t *ops = body ? json_object_get(body, "operations") : NULL;
    json_t *seen = NULL; /* the names so far: a set, as the operations may be many */
    if (body && (json_object_size(body) != 1 || !json_is_array(ops) || json_array_size(ops) == 0)) {
        api_error(resp, req, "invalid_request", NULL,
                  "expected {\"operations\": [{\"name\", \"op\", \"value\"}, ...]}");
        goto done;
    }
    if (body && !(seen = json_object())) {
        api_error(resp, req, "out_of_memory", NULL, "no memory for the operations");
        goto done;
    }
    size_t i;
    json_t *op;
    json_array_foreach(ops, i, op) {
        json_t *name = json_object_get(op, "name"), *kind = json_object_get(op, "op");
        json_t *value = json_object_get(op, "value");
        char text[256] = "";
        if (!json_is_object(op) || !json_is_string(name) || !json_is_string(kind)) {
            api_error(resp, req, "invalid_request", json_pack("{s:I}", "operation", (json_int_t)i),
                      "operation %zu needs a string name and op", i);
            goto done;
        }
        /* Read as C strings they stop at a NUL: "retention.ms\u0000x" would
         * set retention.ms, and "DELETE\u0000x" delete, neither of which was
         * sent. */
        if (strlen(json_string_value(name)) != json_string_length(name) ||
            strlen(json_string_value(kind)) != json_string_length(kind)) {
            api_error(resp, req, "invalid_request", json_pack("{s:I}", "operation", (json_int_t)i),
                      "operation %zu: name and op may not hold a NUL character", i);
            goto done;
        }
        const char *k = json_string_value(kind), *n = json_string_value(name);
        if (json_object_get(seen, n)) {
            api_error(resp, req, "invalid_request",
                      json_pack("{s:I,s:s}", "operation", (json_int_t)i, "key", n),
                      "operation %zu: %.100s is already changed by an earlier operation (Kafka "
                      "refuses duplicate config keys: send one operation per config)", i, n);
            goto done;
        }
        json_object_set_new(seen, n, json_true());
        bool needs_value = strcasecmp(k, "DELETE") != 0;
        if (needs_value && (!value || !api_config_text(value, text, sizeof text))) {
            api_error(resp, req, "invalid_request", json_pack("{s:I,s:s}", "operation", (json_int_t)i, "key", n),
                      "operation %zu (%s %s) needs a value", i, k, n);
            goto done;
        }
        eng_errdetail ed = {0};
        int rc = 0;
        int id = eng_config_lookup(n);
        if (!strcasecmp(k, "SET")) {
            rc = eng_config_overrides_set(&d.meta.overrides, n, text, &ed);
        } else if (!strcasecmp(k, "DELETE")) {
            rc = eng_config_overrides_set(&d.meta.overrides, n, NULL, &ed);
        } else if (!strcasecmp(k, "APPEND") || !strcasecmp(k, "SUBTRACT")) {
            /* A name that is no topic config is refused as SET refuses it:
             * "not a list" would be wrong for Kafka's replication lists. */
            if (id < 0) {
                rc = eng_config_name_error(n, &ed);
            } else if (eng_config_def_at((eng_config_id)id)->type != ENG_CFG_LIST) {
                eng_errdetail_key(&ed, n);
                rc = eng_fail(&ed, ENG_ECONFIG, "%s applies to list configs only; %.100s is not one", k, n);
            } else {
                eng_config c;
                char cur[256], next[256];
                if (!(rc = eng_config_resolve(eng_manager_defaults(api_mgr(ctx)), &d.meta.overrides, &c, &ed))) {
                    /* The topic's own list as it was set, in its order (as
                     * Kafka starts from it), else the default's. */
                    if (d.meta.overrides.text[id])
                        snprintf(cur, sizeof cur, "%s", d.meta.overrides.text[id]);
                    else
                        eng_config_format((eng_config_id)id, c.v[id], cur, sizeof cur);
                    if (list_op(cur, text, !strcasecmp(k, "APPEND"), next, sizeof next)) {
                        eng_errdetail_key(&ed, n);
                        rc = eng_fail(&ed, ENG_ECONFIG, "%s would make %s too long", k, n);
                    } else {
                        rc = eng_config_overrides_set(&d.meta.overrides, n, next, &ed);
                    }
                }
            }
        } else {
            api_error(resp, req, "invalid_request", json_pack("{s:I}", "operation", (json_int_t)i),
                      "operation %zu: op must be SET, DELETE, APPEND or SUBTRACT", i);
            goto done;
        }
        if (rc) {
            /* Nothing is applied: the whole set is refused, naming the op. */
            char msg[sizeof ed.message];
            int w = snprintf(msg, sizeof msg, "operation %zu (%.16s %.64s): ", i, k, n);
            snprintf(msg + w, sizeof msg - (size_t)w, "%.160s",
                     ed.message[0] ? ed.message : eng_strerror(rc));
            memcpy(ed.message, msg, sizeof msg);
            api_error_from_engine(resp, req, rc, &ed);
            json_object_set_new(json_object_get(resp->json, "details"), "operation", json_integer((json_int_t)i));
            goto done;
        }
    }
    if (body)
        apply(ctx, req, &d.meta, resp);
done:
    json_decref(seen);
    json_decref(body);
    eng_topic_desc_clear(&d);
}

void api_h_config_put(api_ctx *ctx, const api_request *req, const api_params *params,
                      api_response *resp)
{
    pthread_mutex_lock(&change_lock);
    config_put_locked(ctx, req, params, resp);
    pthread_mutex_unlock(&change_lock);
}

void api_h_config_delete(api_ctx *ctx, const api_request *req, const api_params *params,
                         api_response *resp)
{
    pthread_mutex_lock(&change_lock);
    config_delete_locked(ctx, req, params, resp);
    pthread_mutex_unlock(&change_lock);
}

void api_h_configs_alter(api_ctx *ctx, const api_request *req, const api_params *params,
                         api_response *resp)
{
    pthread_mutex_lock(&change_lock);
    configs_alter_locked(ctx, req, params, resp);
    pthread_mutex_unlock(&change_lock);
}

void api_h_configs_defaults(api_ctx *ctx, const api_request *req, const api_params *params,
                            api_response *resp)
{
    (void)req;
    (void)params;
    const eng_config_defaults *defs = eng_manager_defaults(api_mgr(ctx));
    json_t *topic = json_array();
    for (int i = 0; i < ENG_CFG_COUNT; i++) {
        const eng_config_def *def = eng_config_def_at((eng_config_id)i);
        char value[128];
        eng_config_format((eng_config_id)i, defs->cfg.v[i], value, sizeof value);
        json_t *o = json_pack("{s:s,s:s,s:s}", "name", def->name, "value", value, "source",
                              source_names[defs->synonym_rank[i] >= 0 ? ENG_SRC_BROKER : ENG_SRC_DEFAULT]);
        if (defs->synonym_rank[i] >= 0)
            json_object_set_new(o, "set_by", json_string(def->synonyms[defs->synonym_rank[i]].name));
        json_array_append_new(topic, o);
    }
    /* "O" took a second reference on the
     * json_array() made when there are no server settings (in-process
     * callers), leaking it on every request; borrow-or-own first, then "o". */
    json_t *server = ctx->server_settings ? json_incref(ctx->server_settings) : json_array();
    api_resp_json(resp, 200, json_pack("{s:o,s:o}", "server", server, "topic_defaults", topic));
}

void api_h_log_dirs(api_ctx *ctx, const api_request *req, const api_params *params,
                    api_response *resp)
{
    (void)params;
    api_part_pager pg;
    if (!api_part_pager_init(req, resp, &pg))
        return;
    eng_manager *m = api_mgr(ctx);
    uint64_t total = 0, usable = 0;
    int rc = eng_manager_disk_usage(m, &total, &usable);
    eng_partition **all;
    size_t n;
    if (eng_manager_all_partitions(m, &all, &n)) {
        api_error(resp, req, "internal_error", NULL, "out of memory");
        return;
    }
    /* Kafka's DescribeLogDirs shape: dir -> topics -> partitions, the
     * partitions paged in the order they come (by topic name, then id);
     * the dir's size_bytes counts every partition, on every page. */
    json_t *topics = json_array();
    json_t *cur = NULL;
    const char *cur_name = NULL;
    json_int_t dir_bytes = 0;
    for (size_t i = 0; i < n; i++) {
        eng_partition_info in;
        eng_partition_info_get(all[i], &in);
        dir_bytes += (json_int_t)in.size_bytes;
        if (!api_part_pager_take(&pg, all[i]))
            continue;
        if (!cur_name || strcmp(cur_name, eng_partition_topic(all[i]))) {
            cur_name = eng_partition_topic(all[i]);
            cur = json_array();
            json_array_append_new(topics, json_pack("{s:s,s:o}", "name", cur_name, "partitions", cur));
        }
        json_array_append_new(cur, json_pack("{s:i,s:I,s:I,s:b}", "partition",
                                             (int)eng_partition_id(all[i]), "size_bytes",
                                             (json_int_t)in.size_bytes, "offset_lag",
                                             (json_int_t)(in.log_end_offset - in.high_watermark),
                                             "is_future", 0));
    }
    eng_partitions_release(all, n);
    /* Files only snapshots hold (segments retention or the cleaner removed
     * since), so the disk's use adds up, as the snapshot-usage job last
     * measured them; unknown (-1) if they cannot be read. */
    uint64_t snap = 0;
    int64_t snap_ms = -1;
    bool snap_ok = eng_manager_snapshot_bytes(m, &snap, &snap_ms) == 0;
    json_t *dir = json_pack("{s:s,s:I,s:I,s:I,s:I,s:I,s:o}", "log_dir", eng_manager_log_dir(m),
                            "total_bytes", (json_int_t)total, "usable_bytes", (json_int_t)usable,
                            "size_bytes", dir_bytes, "snapshot_bytes",
                            snap_ok ? (json_int_t)snap : -1, "snapshot_bytes_measured_ms",
                            snap_ok ? (json_int_t)snap_ms : -1, "topics", topics);
    json_object_set_new(dir, "error", rc ? json_string(eng_strerror(rc))
                                         : eng_manager_offline(m) ? json_string("KAFKA_STORAGE_ERROR")
                                                                  : json_null());
    json_t *o = json_pack("{s:[o]}", "log_dirs", dir);
    api_part_pager_answer(&pg, o);
    api_resp_json(resp, 200, o);
}
