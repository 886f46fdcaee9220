/*
 * api_model_admin.h - test_api_model.c's topic and config operations
 * (create, delete, grow, PUT, DELETE and configs:alter with SET, DELETE,
 * APPEND and SUBTRACT), checked against the model's overrides; and invalid
 * requests of every kind, each checked against README's error table, after
 * which the model is unchanged.
 *
 * Included by test_api_model.c alone, after api_model_read.h.
 */
#ifndef TEST_API_MODEL_ADMIN_H
#define TEST_API_MODEL_ADMIN_H

#include "api_model_read.h"

/* ---- topics and configs ------------------------------------------------------------------------ */

/* Updates the model's typed view of one config; value NULL = its default. */
static void model_config(am_topic *t, const char *name, const char *value)
{
    if (value)
        json_object_set_new(t->overrides, name, json_string(value));
    else
        json_object_del(t->overrides, name);
    if (!strcmp(name, "cleanup.policy")) {
        const char *v = value ? value : "delete";
        t->policy = (strstr(v, "delete") ? AM_POLICY_DELETE : 0) | (strstr(v, "compact") ? AM_POLICY_COMPACT : 0);
    } else if (!strcmp(name, "message.timestamp.type")) {
        t->lat = value && !strcmp(value, "LogAppendTime");
    } else if (!strcmp(name, "retention.ms")) {
        t->retention_ms = value ? atoll(value) : 7 * DAY_MS;
    } else if (!strcmp(name, "retention.bytes")) {
        t->retention_bytes = value ? atoll(value) : -1;
    } else if (!strcmp(name, "delete.retention.ms")) {
        t->drm = value ? atoll(value) : DAY_MS;
    } else if (!strcmp(name, "compression.type")) {
        t->codec = value && strcmp(value, "producer") && strcmp(value, "uncompressed");
    } else if (!strcmp(name, "flush.messages")) {
        t->flush1 = value && !strcmp(value, "1");
    }
}

/* A random valid value for one of the configs the test changes. */
static const char *rand_config(const char **value)
{
    static char buf[32];
    static const char *const policies[] = {"delete", "compact", "compact,delete", "delete,compact", ""};
    static const char *const codecs[] = {"producer", "gzip", "snappy", "lz4", "zstd", "uncompressed"};
    static const char *const rms[] = {"-1", "3600000", "86400000", "604800000"};
    switch (rndn(11)) {
    case 10:
        *value = chance(70) ? "1" : "1000";
        return "flush.messages";
    case 8:
        *value = chance(50) ? "1" : chance(50) ? "64" : "4096";
        return "index.interval.bytes";
    case 9:
        *value = chance(70) ? "96" : "10485760";
        return "segment.index.bytes";
    case 7:
        *value = chance(50) ? "0" : "86400000";
        return "delete.retention.ms";
    case 0:
        *value = policies[rndn(5)];
        return "cleanup.policy";
    case 1:
        *value = chance(50) ? "LogAppendTime" : "CreateTime";
        return "message.timestamp.type";
    case 2:
        *value = codecs[rndn(6)];
        return "compression.type";
    case 3:
        *value = rms[rndn(4)];
        return "retention.ms";
    case 4:
        snprintf(buf, sizeof buf, "%lld", chance(20) ? -1LL : (long long)rndn(3000));
        *value = buf;
        return "retention.bytes";
    case 5:
        *value = chance(50) ? "3600000" : "604800000";
        return "segment.ms";
    default:
        *value = chance(50) ? "1048576" : "2097152";
        return "segment.bytes";
    }
}

static bool collides(int idx)
{
    for (int i = 0; i < AM_NNAMES; i++) {
        if (i == idx || !T[i].live || strlen(NAMES[i]) != strlen(NAMES[idx]))
            continue;
        bool same = true;
        for (size_t c = 0; NAMES[i][c] && same; c++) {
            char a = NAMES[i][c] == '.' ? '_' : NAMES[i][c], b = NAMES[idx][c] == '.' ? '_' : NAMES[idx][c];
            same = a == b;
        }
        if (same)
            return true;
    }
    return false;
}

static void check_overrides(am_topic *t)
{
    char path[256];
    snprintf(path, sizeof path, "/v1/topics/%s", t->name);
    ls_resp r;
    req("GET", path, NULL, NULL, 0, NULL, &r);
    expect_ok(&r, 200);
    CHECK(json_equal(jget(r.json, "configs"), t->overrides), "configs %s, the model has %s",
          json_dumps(jget(r.json, "configs"), JSON_COMPACT), json_dumps(t->overrides, JSON_COMPACT));
    CHECK_EQ(jint(r.json, "partition_count"), t->np, "partition_count");
    ls_resp_free(&r);
}

static void op_create(int idx)
{
    am_topic *t = &T[idx];
    int np = 1 + (int)rndn(3);
    json_t *cfg = json_object();
    int nc = (int)rndn(6);
    if (chance(50)) {
        static const char *const policies[] = {"compact", "compact,delete", "delete"};
        json_object_set_new(cfg, "cleanup.policy", json_string(policies[rndn(3)]));
    }
    if (chance(30))
        json_object_set_new(cfg, "retention.ms", json_string(chance(50) ? "86400000" : "3600000"));
    if (chance(15))
        json_object_set_new(cfg, "flush.messages", json_string("1"));
    if (chance(30)) {
        char b[32];
        snprintf(b, sizeof b, "%lld", (long long)rndn(3000));
        json_object_set_new(cfg, "retention.bytes", json_string(b));
    }
    for (int i = 0; i < nc; i++) {
        const char *v, *name = rand_config(&v);
        json_object_set_new(cfg, name, json_string(v));
    }
    char *ctext = json_dumps(cfg, JSON_COMPACT);
    what("create %s, %d partitions, %s", NAMES[idx], np, ctext);
    free(ctext);
    json_t *body = json_pack("{s:s,s:i,s:O}", "name", NAMES[idx], "partitions", np, "configs", cfg);
    char *text = json_dumps(body, JSON_COMPACT);
    json_decref(body);
    ls_resp r;
    req_json("POST", "/v1/topics", text, &r);
    free(text);
    if (t->live) {
        expect_err(&r, 409, "topic_exists");
    } else if (collides(idx)) {
        expect_err(&r, 422, "invalid_topic_name");
    } else {
        expect_ok(&r, 201);
        g_stats.created++;
        memset(t, 0, sizeof *t);
        t->live = true;
        t->name = NAMES[idx];
        t->np = np;
        t->overrides = json_object();
        model_config(t, "cleanup.policy", NULL);
        model_config(t, "retention.ms", NULL);
        model_config(t, "retention.bytes", NULL);
        model_config(t, "delete.retention.ms", NULL);
        const char *k;
        json_t *v;
        json_object_foreach(cfg, k, v) model_config(t, k, json_string_value(v));
    }
    json_decref(cfg);
    ls_resp_free(&r);
}

static void op_delete_topic(am_topic *t)
{
    g_stats.deleted++;
    what("delete topic %s", t->name);
    char path[256];
    snprintf(path, sizeof path, "/v1/topics/%s", t->name);
    ls_resp r;
    req("DELETE", path, NULL, NULL, 0, NULL, &r);
    expect_ok(&r, 204);
    ls_resp_free(&r);
    for (int p = 0; p < AM_MAXP; p++)
        am_part_reset(&t->p[p]);
    /* A delete writes log-start-offset-checkpoint (README "Durability"). */
    for (int i = 0; i < AM_NNAMES; i++)
        for (int p = 0; T[i].live && &T[i] != t && p < T[i].np; p++)
            T[i].p[p].ckpt_lso = T[i].p[p].lso;
    json_decref(t->overrides);
    t->overrides = NULL;
    t->live = false;
    req("GET", path, NULL, NULL, 0, NULL, &r);
    expect_err(&r, 404, "unknown_topic");
    ls_resp_free(&r);
}

static void op_grow(am_topic *t)
{
    if (t->np >= AM_MAXP)
        return;
    int np = t->np + 1;
    what("grow %s to %d partitions", t->name, np);
    char path[256], body[64];
    snprintf(path, sizeof path, "/v1/topics/%s", t->name);
    snprintf(body, sizeof body, "{\"partitions\":%d}", np);
    ls_resp r;
    req_json("PATCH", path, body, &r);
    expect_ok(&r, 200);
    ls_resp_free(&r);
    t->np = np;
    check_partition(t, np - 1);
}

/* One config change through PUT, DELETE or configs:alter (SET, DELETE,
 * APPEND or SUBTRACT on cleanup.policy). */
static void op_config(am_topic *t)
{
    g_stats.configs++;
    const char *v, *name = rand_config(&v);
    char path[256], body[256];
    ls_resp r;
    int how = (int)rndn(4);
    what("config %s %s=%s on %s", how == 0 ? "PUT" : how == 1 ? "DELETE" : "alter", name, v, t->name);
    if (how == 0) {
        snprintf(path, sizeof path, "/v1/topics/%s/configs/%s", t->name, name);
        snprintf(body, sizeof body, "{\"value\":\"%s\"}", v);
        req_json("PUT", path, body, &r);
        expect_ok(&r, 200);
        model_config(t, name, v);
    } else if (how == 1) {
        snprintf(path, sizeof path, "/v1/topics/%s/configs/%s", t->name, name);
        req("DELETE", path, NULL, NULL, 0, NULL, &r);
        CHECK(r.status == 200 || r.status == 204, "DELETE %s: %ld %s", path, r.status, r.body);
        model_config(t, name, NULL);
    } else if (how == 2 || strcmp(name, "cleanup.policy")) {
        snprintf(path, sizeof path, "/v1/topics/%s/configs:alter", t->name);
        bool del = chance(25);
        snprintf(body, sizeof body, "{\"operations\":[{\"name\":\"%s\",\"op\":\"%s\",\"value\":\"%s\"}]}",
                 name, del ? "DELETE" : "SET", v);
        req_json("POST", path, body, &r);
        expect_ok(&r, 200);
        model_config(t, name, del ? NULL : v);
    } else {
        /* APPEND or SUBTRACT one item, to the list as set (or the default). */
        const char *item = chance(50) ? "delete" : "compact";
        bool append = chance(50);
        json_t *cur = jget(t->overrides, "cleanup.policy");
        char list[64];
        snprintf(list, sizeof list, "%s", cur ? json_string_value(cur) : "delete");
        bool has = false;
        char items[2][16];
        int ni = 0;
        for (char *save = NULL, *tok = strtok_r(list, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
            if (!strcmp(tok, item))
                has = true;
            if (ni < 2)
                snprintf(items[ni++], sizeof items[0], "%s", tok);
        }
        char out[64] = "";
        for (int i = 0; i < ni; i++)
            if (append || strcmp(items[i], item))
                snprintf(out + strlen(out), sizeof out - strlen(out), "%s%s", out[0] ? "," : "", items[i]);
        if (append && !has)
            snprintf(out + strlen(out), sizeof out - strlen(out), "%s%s", out[0] ? "," : "", item);
        what("config %s %s on %s's cleanup.policy (%s)", append ? "APPEND" : "SUBTRACT", item, t->name,
             cur ? json_string_value(cur) : "default");
        snprintf(path, sizeof path, "/v1/topics/%s/configs:alter", t->name);
        snprintf(body, sizeof body, "{\"operations\":[{\"name\":\"cleanup.policy\",\"op\":\"%s\",\"value\":\"%s\"}]}",
                 append ? "APPEND" : "SUBTRACT", item);
        req_json("POST", path, body, &r);
        expect_ok(&r, 200);
        model_config(t, "cleanup.policy", out);
    }
    ls_resp_free(&r);
    check_overrides(t);
}

/* ---- invalid requests: README's error table; the model stays as it was ------------------------- */

static void expect_req_err(const char *method, const char *path, const char *ctype, const char *body,
                           long status, const char *code)
{
    ls_resp r;
    req(method, path, ctype, body, body ? strlen(body) : 0, NULL, &r);
    if (ls_check_error(&r, status, code))
        fail_at(__LINE__, "%s %s %s: expected %ld %s", method, path, body ? body : "", status, code);
    ls_resp_free(&r);
}

static void op_invalid(void)
{
    g_stats.invalid++;
    am_topic *t = rand_live_topic();
    int p = t ? (int)rndn(t->np) : 0;
    am_part *mp = t ? &t->p[p] : NULL;
    char path[256], body[512];
    int kind = (int)rndn(16);
    what("invalid request kind %d", kind);
    switch (kind) {
    case 0: {
        static const char *const bad[] = {"", "a b", "..", ".", "x/y", "caf\xc3\xa9", "a\\u0000b"};
        char longname[300];
        memset(longname, 'x', 250);
        longname[250] = 0;
        const char *n = chance(15) ? longname : bad[rndn(7)];
        snprintf(body, sizeof body, "{\"name\":\"%s\"}", n);
        expect_req_err("POST", "/v1/topics", "application/json", body, 422, "invalid_topic_name");
        break;
    }
    case 1: {
        static const char *const bad[][2] = {{"segment.bytes", "100"}, {"retention.ms", "abc"},
                                             {"compression.type", "brotli"},
                                             {"cleanup.policy", "compact,compact"},
                                             {"message.timestamp.type", "Foo"},
                                             {"min.cleanable.dirty.ratio", "1.5"}};
        int i = (int)rndn(6);
        snprintf(body, sizeof body, "{\"name\":\"fresh\",\"configs\":{\"%s\":\"%s\"}}", bad[i][0], bad[i][1]);
        expect_req_err("POST", "/v1/topics", "application/json", body, 422, "invalid_config");
        if (t) {
            /* An alter with a good operation before the bad one changes nothing. */
            snprintf(path, sizeof path, "/v1/topics/%s/configs:alter", t->name);
            snprintf(body, sizeof body,
                     "{\"operations\":[{\"name\":\"retention.bytes\",\"op\":\"SET\",\"value\":\"12345\"},"
                     "{\"name\":\"%s\",\"op\":\"SET\",\"value\":\"%s\"}]}",
                     bad[i][0], bad[i][1]);
            expect_req_err("POST", path, "application/json", body, 422, "invalid_config");
            check_overrides(t);
        }
        break;
    }
    case 2:
        snprintf(body, sizeof body, "{\"name\":\"fresh\",\"partitions\":%d}", (int)rndn(2) - 1);
        expect_req_err("POST", "/v1/topics", "application/json", body, 400, "invalid_partitions");
        break;
    case 3:
        expect_req_err("POST", "/v1/topics", "application/json", "{\"name\":", 400, "malformed_json");
        break;
    case 4:
        expect_req_err("POST", "/v1/topics/nosuch/partitions/0/records", "application/json",
                       "{\"records\":[{\"value\":\"v\"}]}", 404, "unknown_topic");
        break;
    default:
        if (!t)
            break;
        switch (kind) {
        case 5:
            part_path(path, sizeof path, t, t->np + (int)rndn(3), "/records");
            expect_req_err("POST", path, "application/json", "{\"records\":[{\"value\":\"v\"}]}", 404,
                           "unknown_partition");
            break;
        case 6: {
            part_path(path, sizeof path, t, p, "/records");
            snprintf(body, sizeof body, "{\"expected_offset\":%lld,\"records\":[{\"key\":\"k1\",\"value\":\"v\"}]}",
                     (long long)(mp->n + 1 + rndn(3)));
            ls_resp r;
            req_json("POST", path, body, &r);
            expect_err(&r, 412, "expected_offset_mismatch");
            ls_resp_free(&r);
            break;
        }
        case 7:
            part_path(path, sizeof path, t, p, "/records");
            if (chance(50)) {
                expect_req_err("POST", path, "application/json",
                               "{\"encoding\":\"base64\",\"records\":[{\"key\":\"a2V5\",\"value\":\"not base64!\"}]}",
                               422, "invalid_base64");
            } else {
                /* A negative timestamp: refused naming the record (README,
                 * "Appending": details.record). */
                int at = (int)rndn(3);
                snprintf(body, sizeof body, "{\"records\":[%s{\"key\":\"k1\",\"value\":\"v\",\"timestamp\":-%d}]}",
                         at == 0 ? "" : at == 1 ? "{\"key\":\"k1\",\"value\":\"a\"}," :
                         "{\"key\":\"k1\",\"value\":\"a\"},{\"key\":\"k2\",\"value\":null},",
                         1 + (int)rndn(1000));
                ls_resp r;
                req_json("POST", path, body, &r);
                expect_err(&r, 422, "invalid_timestamp");
                json_t *rec = jget(jget(r.json, "details"), "record");
                CHECK(json_is_integer(rec) && json_integer_value(rec) == at,
                      "a negative timestamp's refusal: details %s, expected record %d",
                      json_dumps(jget(r.json, "details"), JSON_COMPACT), at);
                ls_resp_free(&r);
            }
            break;
        case 8:
            if (t->policy & AM_POLICY_COMPACT) {
                part_path(path, sizeof path, t, p, "/records");
                expect_req_err("POST", path, "application/json",
                               "{\"records\":[{\"key\":\"k1\",\"value\":\"v\"},{\"value\":\"no key\"}]}", 422,
                               "invalid_record");
            }
            break;
        case 9:
            part_path(path, sizeof path, t, p, "/records");
            expect_req_err("POST", path, "application/json", "{\"records\":{\"value\":\"v\"}}", 400,
                           "invalid_request");
            break;
        case 10:
            part_path(path, sizeof path, t, p, chance(50) ? "/records?offset=0&earliest" : "/records?offst=0");
            expect_req_err("GET", path, NULL, NULL, 400, "invalid_request");
            break;
        case 11:
            if (!(t->policy & AM_POLICY_COMPACT)) {
                snprintf(path, sizeof path, "/v1/topics/%s/compaction:run", t->name);
                expect_req_err("POST", path, "application/json", "{}", 422, "not_compacted");
            }
            break;
        case 12:
            if (t->np > 1) {
                snprintf(path, sizeof path, "/v1/topics/%s", t->name);
                snprintf(body, sizeof body, "{\"partitions\":%d}", t->np - 1);
                expect_req_err("PATCH", path, "application/json", body, 400, "invalid_partitions");
            }
            break;
        case 13: {
            /* A binary batch whose CRC does not hold. */
            eng_record_spec spec = {now_ms(), (const uint8_t *)"k1", 2, (const uint8_t *)"v", 1, NULL, 0};
            uint8_t b[256];
            eng_batch_params bp;
            eng_batch_params_init(&bp);
            size_t sz = eng_batch_encode(b, sizeof b, &bp, &spec, 1);
            CHECK(sz > 0, "encoding a batch failed");
            b[sz - 1] ^= 0x55;
            part_path(path, sizeof path, t, p, "/records");
            ls_resp r;
            req("POST", path, "application/octet-stream", b, sz, NULL, &r);
            expect_err(&r, 422, "corrupt_record");
            ls_resp_free(&r);
            break;
        }
        case 14: {
            int64_t off = chance(50) ? mp->n + 1 + rndn(5) : (mp->lso > 0 ? rndn(mp->lso) : -1);
            if (off >= 0) {
                check_page(t, p, off, 5, false);
                check_raw(t, p, off);
            }
            part_path(path, sizeof path, t, p, "/records:delete");
            expect_req_err("POST", path, "application/json", "{\"before_offset\":\"x\"}", 400,
                           "invalid_request");
            break;
        }
        default:
            snprintf(path, sizeof path, "/v1/topics/%s/partitions/x/records", t->name);
            expect_req_err("GET", path, NULL, NULL, 400, "invalid_request");
            break;
        }
        check_partition(t, p);
    }
}

#endif
