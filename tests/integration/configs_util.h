/*
 * configs_util.h - reading GET /v1/topics/{t}/configs and the entries of a
 * configs array, shared by test_configs_api.c and test_server_configs.c.
 *
 * Include after cmocka.h and harness.h.
 */
#ifndef CONFIGS_UTIL_H
#define CONFIGS_UTIL_H

#include "harness.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The "configs" array of GET /v1/topics/{topic}/configs (a new reference). */
static inline json_t *listing(ls_server *s, const char *topic)
{
    char path[256];
    snprintf(path, sizeof path, "/v1/topics/%s/configs", topic);
    ls_resp r;
    assert_int_equal(ls_get(s, path, &r), 0);
    if (r.status != 200)
        fprintf(stderr, "# GET %s: %ld %s\n", path, r.status, r.body);
    assert_int_equal(r.status, 200);
    assert_string_equal(ls_jstr(&r, "topic"), topic);
    json_t *arr = json_incref(json_object_get(r.json, "configs"));
    assert_true(json_is_array(arr));
    ls_resp_free(&r);
    return arr;
}

#define estr(e, key) json_string_value(json_object_get((e), (key)))

/* The entry named name in a configs array (borrowed), or NULL. */
#define entry(arr, name) ls_jfind((arr), "name", (name))

/* Asserts one config's value, source and is_default in arr. */
static inline void expect(json_t *arr, const char *name, const char *value, const char *source)
{
    json_t *e = entry(arr, name);
    if (!e)
        fprintf(stderr, "# config %s is not listed\n", name);
    assert_non_null(e);
    if (strcmp(estr(e, "value"), value) || strcmp(estr(e, "source"), source))
        fprintf(stderr, "# %s: value %s source %s, expected %s %s\n", name, estr(e, "value"),
                estr(e, "source"), value, source);
    assert_string_equal(estr(e, "value"), value);
    assert_string_equal(estr(e, "source"), source);
    assert_true(json_is_boolean(json_object_get(e, "is_default")));
    assert_int_equal(json_is_true(json_object_get(e, "is_default")), !strcmp(source, "DEFAULT_CONFIG"));
}

/* Appends n records whose values are vlen bytes each; returns the base offset. */
static inline long long append_values(ls_server *s, const char *topic, int n, size_t vlen)
{
    size_t cap = (size_t)n * (vlen + 32) + 64;
    char *body = malloc(cap);
    assert_non_null(body);
    size_t used = (size_t)snprintf(body, cap, "{\"records\":[");
    for (int i = 0; i < n; i++) {
        used += (size_t)snprintf(body + used, cap - used, "%s{\"value\":\"", i ? "," : "");
        memset(body + used, 'a' + i % 26, vlen);
        used += vlen;
        used += (size_t)snprintf(body + used, cap - used, "\"}");
    }
    snprintf(body + used, cap - used, "]}");
    char path[256];
    snprintf(path, sizeof path, "/v1/topics/%s/partitions/0/records", topic);
    ls_resp r;
    assert_int_equal(ls_send_json(s, "POST", path, body, &r), 0);
    free(body);
    if (r.status != 200)
        fprintf(stderr, "# append: %ld %s\n", r.status, r.body);
    assert_int_equal(r.status, 200);
    long long base = ls_jint(&r, "base_offset");
    ls_resp_free(&r);
    return base;
}

#endif
