/*
 * read_util.h - helpers shared by test_binary_append.c and test_tailing.c:
 * the kafkajs batch files and their MANIFEST.json (tests/data/kafkajs),
 * SSE and NDJSON parsing, reads with an Accept header, raw batch walking.
 *
 * Header-only (static inline) because the Makefile links integration tests
 * with harness.o alone.
 */
#ifndef TEST_READ_UTIL_H
#define TEST_READ_UTIL_H

#include "harness.h"

#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static inline long long ru_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static inline long long ru_mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static inline void ru_sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static inline uint64_t ru_be64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v = v << 8 | p[i];
    return v;
}

static inline uint32_t ru_be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static inline void ru_put_be32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

static inline void ru_put_be64(uint8_t *p, uint64_t v)
{
    for (int i = 7; i >= 0; i--, v >>= 8)
        p[i] = (uint8_t)v;
}

/* ---- the kafkajs files ------------------------------------------------------ */

/* MANIFEST.json (caller json_decref's it), or NULL. */
static inline json_t *ru_manifest(void)
{
    return json_load_file("tests/data/kafkajs/MANIFEST.json", 0, NULL);
}

/* The manifest entry of a file, borrowed; NULL when gen.js skipped it. */
static inline json_t *ru_manifest_file(json_t *m, const char *file)
{
    size_t i;
    json_t *f;
    json_array_foreach(json_object_get(m, "files"), i, f) {
        if (!strcmp(json_string_value(json_object_get(f, "file")), file))
            return f;
    }
    return NULL;
}

/* The bytes of a kafkajs file (malloc'd), or NULL. */
static inline uint8_t *ru_kjs_file(const char *file, size_t *len)
{
    char path[256];
    snprintf(path, sizeof path, "tests/data/kafkajs/%s", file);
    return ls_read_file(path, len);
}

/* Compares the records of a read (JSON array) with manifest records from
 * index `from` on, with offsets starting at base.  log_append_time >= 0
 * means every record must carry that timestamp instead.  Returns 0, or -1
 * after printing the first difference. */
static inline int ru_records_match(json_t *got, json_t *want, size_t from, long long base,
                                   long long log_append_time)
{
    size_t n = json_array_size(want) - from;
    if (json_array_size(got) != n) {
        fprintf(stderr, "# %zu records read, %zu expected\n", json_array_size(got), n);
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        json_t *g = json_array_get(got, i), *w = json_array_get(want, from + i);
        json_t *exp = json_pack("{s:I,s:O,s:s,s:O,s:O,s:O}", "offset", (json_int_t)(base + (long long)i),
                                "timestamp",
                                log_append_time >= 0 ? json_integer(log_append_time)
                                                     : json_object_get(w, "timestamp"),
                                "timestamp_type", log_append_time >= 0 ? "LogAppendTime" : "CreateTime",
                                "key", json_object_get(w, "key"), "value", json_object_get(w, "value"),
                                "headers", json_object_get(w, "headers"));
        if (log_append_time >= 0)
            json_decref(json_object_get(exp, "timestamp")); /* the O above took a reference */
        int same = json_equal(g, exp);
        if (!same) {
            char *a = json_dumps(g, JSON_COMPACT | JSON_SORT_KEYS),
                 *b = json_dumps(exp, JSON_COMPACT | JSON_SORT_KEYS);
            fprintf(stderr, "# record %zu differs:\n#   got  %s\n#   want %s\n", i, a, b);
            free(a);
            free(b);
        }
        json_decref(exp);
        if (!same)
            return -1;
    }
    return 0;
}

/* ---- reads ------------------------------------------------------------------------ */

/* GET path with an Accept header (NULL: none) and optional extra header. */
static inline int ru_get_accept(ls_server *s, const char *path, const char *accept,
                                const char *extra, ls_resp *r)
{
    char a[128];
    const char *hdrs[3] = {NULL, NULL, NULL};
    int n = 0;
    if (accept) {
        snprintf(a, sizeof a, "Accept: %s", accept);
        hdrs[n++] = a;
    }
    if (extra)
        hdrs[n++] = extra;
    return ls_http(s, "GET", path, NULL, NULL, 0, hdrs, r);
}

/* Parses an SSE body into [{"id":N|null,"event":"...","data":<json>}], "id"
 * being the event's own `id` field; comment lines (": heartbeat") are
 * counted in *comments.  An event ends at a blank line, and one without
 * data (an `id` alone) is no event, as for a browser. */
static inline json_t *ru_sse_parse(const char *body, size_t len, int *comments)
{
    json_t *events = json_array();
    char *copy = malloc(len + 1);
    memcpy(copy, body, len);
    copy[len] = 0;
    *comments = 0;
    json_t *cur = NULL;
    for (char *line = copy, *nl; (nl = strchr(line, '\n')); line = nl + 1) {
        *nl = 0;
        if (line[0] == ':') {
            (*comments)++;
            continue;
        }
        if (!line[0]) {
            if (cur && json_object_get(cur, "data"))
                json_array_append(events, cur);
            json_decref(cur);
            cur = NULL;
            continue;
        }
        if (!cur)
            cur = json_pack("{s:n,s:s}", "id", "event", "message");
        if (!strncmp(line, "id: ", 4))
            json_object_set_new(cur, "id", json_integer(atoll(line + 4)));
        else if (!strncmp(line, "event: ", 7))
            json_object_set_new(cur, "event", json_string(line + 7));
        else if (!strncmp(line, "data: ", 6))
            json_object_set_new(cur, "data", json_loads(line + 6, 0, NULL));
    }
    json_decref(cur); /* cut short before its blank line: not an event */
    free(copy);
    return events;
}

/* One JSON value per line. */
static inline json_t *ru_ndjson_parse(const char *body, size_t len)
{
    json_t *lines = json_array();
    char *copy = malloc(len + 1);
    memcpy(copy, body, len);
    copy[len] = 0;
    char *save = NULL;
    for (char *line = strtok_r(copy, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        json_t *v = json_loads(line, 0, NULL);
        json_array_append_new(lines, v ? v : json_string("(not json)"));
    }
    free(copy);
    return lines;
}

/* Counts the batches of a raw body and checks each one's length fits;
 * returns the count, or -1 when the body is not whole batches. */
static inline int ru_batch_count(const uint8_t *b, size_t len)
{
    int n = 0;
    for (size_t pos = 0; pos < len; n++) {
        if (len - pos < 61)
            return -1;
        size_t size = (size_t)ru_be32(b + pos + 8) + 12;
        if (size > len - pos)
            return -1;
        pos += size;
    }
    return n;
}

#endif
