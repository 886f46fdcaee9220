/*
 * fuzz_request.c - the HTTP request handler, in process, on arbitrary requests.
 *
 * Input framing (text-friendly, so seeds can be written by hand): the input
 * is up to MAX_REQUESTS requests, one after the other, each ended by a NUL
 * byte (or the end of the input):
 *
 *     METHOD SP TARGET LF              TARGET = path [ "?" query ]
 *     Name: value LF                   zero or more header lines
 *     LF                               an empty line, then
 *     body                             every byte up to the next NUL, or
 *                                      exactly Content-Length bytes when that
 *                                      header is given (binary bodies hold
 *                                      NULs), then an optional NUL
 *
 * Lines may end in CRLF; a NUL ends the request wherever it comes.  A request
 * line without a space is a method with the path "/".  Without the empty
 * line there is no body.  The path and the query keys and values are
 * percent-decoded like libmicrohttpd does (and '+' is a space in the query);
 * a query item without '=' is a bare flag (NULL value).  A body is handed
 * over in a buffer of its own, exactly its length, so that a read past its
 * end is caught.
 *
 * Each request goes through api_dispatch on one api_ctx whose manager is
 * opened on a scratch data dir (on /dev/shm when it exists) with the log
 * cleaner (no threads, so compaction runs only on demand) and no background
 * jobs, and three topics: "orders" (3 partitions, defaults, two segments
 * with records), "users" (cleanup.policy=compact) and "events"
 * (message.timestamp.type=LogAppendTime, segment.bytes=1048576), each with a
 * few records.  The transport is NULL, so durable appends answer at once and
 * reads never park or stream.  Authentication is on only for requests that
 * carry an Authorization header, with three tokens: "admin", "reader" (read)
 * and "ord-writer" (write and read, topics starting with "ord").
 *
 * Invariants, for every response: a status in [200, 599]; never deferred;
 * X-Request-Id is the request's id; a JSON body serializes; a 2xx other than
 * 204 has a body; any other status has a JSON object body with string
 * error_code, message and request_id (the request's), and the status is the
 * one api_errors.c gives that error_code; no 500 internal_error and the data
 * dir never goes offline (nothing here should fail inside the server); a raw
 * (sendfile) answer is a range of whole batches inside its file.
 *
 * After an input whose requests may have changed something (any request
 * other than GET that was not refused with a 4xx), the engine is audited:
 * every partition reads back from its log start offset to its high
 * watermark as whole, valid batches with increasing offsets, its segments
 * have increasing bases and add up to its size; then the manager is closed
 * cleanly and opened again on the same dir, which must need no recovery,
 * truncate nothing and find the same topics with the same log start and end
 * offsets (and pass the same audit).  Then the data dir is deleted and set up
 * again (a few ms on tmpfs), so every input starts from the same state: a
 * crash reproduces from its input alone and corpus files do not depend on
 * each other.  Inputs that only read or are refused keep the state and run
 * at full speed.  This also keeps the
 * data dir small; on top of that, requests that would make a topic with more
 * than MAX_PARTITIONS partitions (creating or growing), or preallocate
 * segments larger than 8 MiB, are skipped (out-of-range values still run, to
 * exercise their validation: only values the server would accept are
 * skipped).  FUZZ_REQUEST_VERBOSE=1 prints each request and its answer.
 *
 * A request carrying the header "X-Fuzz-Fix-Crc" (any value) has the CRC of
 * every batch its body starts with recomputed before it is dispatched: a
 * mutated binary append almost never keeps a valid CRC-32C, and without this
 * the fuzzer would test the CRC check and nothing past it (timestamp rules,
 * offsets, decompression, recoding to the topic's compression.type).
 */
#include "api_json_arena.h"
#include "api_auth.h"
#include "api_ctx.h"
#include "api_errors.h"
#include "api_request.h"
#include "api_router.h"
#include "api_server.h"
#include "eng_batch.h"
#include "eng_cleaner.h"
#include "eng_config.h"
#include "eng_fs.h"
#include "eng_manager.h"
#include "eng_partition.h"
#include "svc_meta.h"
#include "fuzz_support.h"

#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_REQUESTS 8
#define MAX_QUERY 32
#define MAX_HEADERS 16
#define MAX_PARTITIONS 8

static char root[256];       /* scratch dir, created once */
static char data_dir[300];   /* <root>/data, recreated on every reset */
static api_ctx ctx;
static eng_manager *mgr;
static api_auth *tokens; /* in force for requests that carry Authorization */
static bool verbose; /* FUZZ_REQUEST_VERBOSE=1: one line per request on stderr */
static bool dirty;   /* the state may differ from the one server_start made */
static eng_cleaner_opts cleaner_opts;
static eng_manager_opts mgr_opts;

/* ---- the server --------------------------------------------------------------- */

/* Dispatches one request in process and checks the response; returns its
 * status.  `body` may be NULL. */
static int run_request(const char *method, const char *path, const api_kv *query, size_t nquery,
                       const api_kv *headers, size_t nheaders, const uint8_t *body, size_t len);

static void dispatch_setup(const char *method, const char *path, const char *body, int want)
{
    api_kv ct = {"Content-Type", "application/json"};
    int st = run_request(method, path, NULL, 0, &ct, 1, (const uint8_t *)body,
                         body ? strlen(body) : 0);
    if (st != want) {
        fprintf(stderr, "fuzz_request: setup %s %s answered %d, not %d\n", method, path, st, want);
        abort();
    }
}

static void server_stop(void)
{
    if (!mgr)
        return;
    atomic_store(&ctx.state, API_STOPPING);
    atomic_store(&ctx.mgr, NULL);
    eng_manager_close(mgr);
    mgr = NULL;
}

/* Opens the manager on data_dir as it is and makes the api_ctx serve it. */
static void manager_open(void)
{
    eng_cleaner_opts_default(&cleaner_opts);
    cleaner_opts.threads = 0; /* on-demand runs only: nothing races the requests */
    cleaner_opts.dedupe_buffer_bytes = 1 << 20;
    mgr_opts = (eng_manager_opts){.log_dir = data_dir, .codec = svc_meta_codec(),
                                  .cleaner = &cleaner_opts};
    eng_jobs_opts_default(&mgr_opts.jobs);
    eng_config_defaults_init(&mgr_opts.defaults);
    api_ctx_init(&ctx, "fuzz");
    ctx.started_ms = eng_now_ms();
    eng_errdetail err = {0};
    int rc = eng_manager_open(&mgr_opts, &mgr, &err);
    if (!rc)
        rc = eng_manager_start_cleaner(mgr);
    if (rc) {
        fprintf(stderr, "fuzz_request: cannot open the manager on %s: %s %s\n", data_dir,
                eng_strerror(rc), err.message);
        abort();
    }
    atomic_store(&ctx.mgr, mgr);
    atomic_store(&ctx.state, API_READY);
}

static void server_start(void)
{
    eng_fs_remove_tree(data_dir);
    manager_open();

    dispatch_setup("POST", "/v1/topics", "{\"name\":\"orders\",\"partitions\":3}", 201);
    dispatch_setup("POST", "/v1/topics",
                   "{\"name\":\"users\",\"configs\":{\"cleanup.policy\":\"compact\","
                   "\"min.cleanable.dirty.ratio\":\"0.01\",\"segment.bytes\":1048576}}",
                   201);
    dispatch_setup("POST", "/v1/topics",
                   "{\"name\":\"events\",\"partitions\":2,\"configs\":{"
                   "\"message.timestamp.type\":\"LogAppendTime\",\"segment.bytes\":\"1048576\"}}",
                   201);
    const char *recs = "{\"records\":[{\"key\":\"a\",\"value\":\"1\"},{\"key\":\"b\",\"value\":\"2\","
                       "\"headers\":[{\"name\":\"h\",\"value\":\"x\"}]},{\"value\":null},"
                       "{\"key\":\"a\",\"value\":\"3\",\"timestamp\":1700000000000}]}";
    dispatch_setup("POST", "/v1/topics/orders/partitions/0/records", recs, 200);
    dispatch_setup("POST", "/v1/topics/orders/partitions/0/segments:roll", NULL, 200);
    dispatch_setup("POST", "/v1/topics/orders/partitions/0/records", recs, 200);
    dispatch_setup("POST", "/v1/topics/orders/records", recs, 200);
    dispatch_setup("POST", "/v1/topics/users/partitions/0/records",
                   "{\"records\":[{\"key\":\"a\",\"value\":\"1\"},{\"key\":\"a\",\"value\":\"2\"},"
                   "{\"key\":\"b\",\"value\":null}]}",
                   200);
    dispatch_setup("POST", "/v1/topics/users/partitions/0/segments:roll", NULL, 200);
    dispatch_setup("POST", "/v1/topics/users/partitions/0/records",
                   "{\"records\":[{\"key\":\"a\",\"value\":\"3\"},{\"key\":\"c\",\"value\":\"4\"}]}",
                   200);
    dispatch_setup("POST", "/v1/topics/events/partitions/1/records",
                   "{\"encoding\":\"base64\",\"records\":[{\"key\":\"AAE=\",\"value\":\"/wA=\"}]}",
                   200);
    dirty = false;
}

static void remove_root(void)
{
    server_stop();
    api_auth_free(tokens);
    tokens = NULL;
    if (root[0])
        eng_fs_remove_tree(root);
}

static void setup_once(void)
{
    if (root[0])
        return;
    verbose = getenv("FUZZ_REQUEST_VERBOSE") != NULL;
    fuzz_make_root(root, sizeof root, "request");
    snprintf(data_dir, sizeof data_dir, "%s/data", root);
    /* Tokens "admin", "reader" and "ord-writer" (write, topics "ord*"). */
    char text[512], h[3][65];
    api_auth_hash("admin", h[0]);
    api_auth_hash("reader", h[1]);
    api_auth_hash("ord-writer", h[2]);
    snprintf(text, sizeof text, "# fuzz tokens\n%s admin\n%s read\n%s write,read ord\n", h[0],
             h[1], h[2]);
    char err[256];
    if (api_auth_load(text, strlen(text), &tokens, err, sizeof err)) {
        fprintf(stderr, "fuzz_request: tokens: %s\n", err);
        abort();
    }
    atexit(remove_root);
    server_start();
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    api_json_arena_install(); /* as the server runs: pages built in arena scopes */
    setup_once();
    return 0;
}

/* ---- checking one response ------------------------------------------------------ */

/* A raw answer: [offset, offset + length) of its file, whole batches. */
static void check_file_range(const api_response *resp)
{
    struct stat st;
    CHECK(fstat(resp->file_fd, &st) == 0);
    CHECK(resp->file_offset + resp->file_length <= (uint64_t)st.st_size);
    uint8_t *buf = malloc(resp->file_length ? resp->file_length : 1);
    CHECK(buf);
    ssize_t got = pread(resp->file_fd, buf, resp->file_length, (off_t)resp->file_offset);
    CHECK(got == (ssize_t)resp->file_length);
    size_t pos = 0;
    while (pos < resp->file_length) {
        eng_batch_header h;
        CHECK(eng_batch_header_decode(buf + pos, resp->file_length - pos, &h) == 0);
        CHECK(eng_batch_size(&h) <= resp->file_length - pos);
        pos += eng_batch_size(&h);
    }
    free(buf);
}

static void check_response(const api_request *req, const api_response *resp)
{
    CHECK(!resp->deferred);
    CHECK(resp->status >= 200 && resp->status <= 599);
    CHECK(resp->nheaders > 0);
    CHECK(strcmp(resp->headers[resp->nheaders - 1].name, "X-Request-Id") == 0);
    CHECK(strcmp(resp->headers[resp->nheaders - 1].value, req->request_id) == 0);
    if (resp->json) {
        char *s = json_dumps(resp->json, JSON_COMPACT);
        CHECK(s != NULL);
        free(s);
    }
    if (resp->has_file)
        check_file_range(resp);
    if (resp->status >= 200 && resp->status < 300) {
        if (resp->status != 204)
            CHECK(resp->json || resp->raw || resp->has_file || resp->stream ||
                  (resp->content_type && strcmp(resp->content_type, "application/json")));
        return;
    }
    /* Reads answer with their JSON already serialized (api_resp_freeze). */
    json_t *body = resp->json ? json_incref(resp->json)
                   : resp->raw ? json_loadb(resp->raw, resp->raw_len, 0, NULL) : NULL;
    CHECK(json_is_object(body));
    json_t *code = json_object_get(body, "error_code");
    json_t *msg = json_object_get(body, "message");
    json_t *id = json_object_get(body, "request_id");
    CHECK(json_is_string(code) && json_is_string(msg) && json_is_string(id));
    CHECK(strcmp(json_string_value(id), req->request_id) == 0);
    CHECK(api_error_status(json_string_value(code)) == resp->status);
    if (resp->status == 500) {
        fprintf(stderr, "fuzz_request: 500 for %s %s: %s\n", req->method, req->path,
                json_string_value(msg));
        abort();
    }
    json_decref(body);
}

static int run_request(const char *method, const char *path, const api_kv *query, size_t nquery,
                       const api_kv *headers, size_t nheaders, const uint8_t *body, size_t len)
{
    /* A copy of its own: the sanitizers see a read past its end. */
    uint8_t *copy = NULL;
    if (body && len) {
        copy = malloc(len);
        CHECK(copy);
        memcpy(copy, body, len);
    }
    api_request req = {.method = method, .path = path, .query = query, .nquery = nquery,
                       .headers = headers, .nheaders = nheaders, .body = copy,
                       .body_len = copy ? len : 0, .transport = NULL};
    api_request_id(&ctx, api_header(&req, "X-Request-Id"), req.request_id);
    ctx.auth = api_header(&req, "Authorization") ? tokens : NULL;
    api_response resp = {0};
    api_dispatch(&ctx, &req, &resp);
    ctx.auth = NULL;
    if (verbose) {
        json_t *code = json_is_object(resp.json) ? json_object_get(resp.json, "error_code") : NULL;
        json_t *msg = json_is_object(resp.json) ? json_object_get(resp.json, "message") : NULL;
        fprintf(stderr, "%s %s -> %d %s %s %.*s\n", method, path, resp.status,
                code ? json_string_value(code) : "", msg ? json_string_value(msg) : "",
                resp.raw ? (int)(resp.raw_len < 300 ? resp.raw_len : 300) : 0,
                resp.raw ? resp.raw : "");
    }
    check_response(&req, &resp);
    CHECK(!eng_manager_offline(mgr));
    int status = resp.status;
    api_response_clear(&resp);
    free(copy);
    if (strcmp(method, "GET") && (status < 400 || status >= 500))
        dirty = true;
    return status;
}

/* ---- auditing the engine after a change -------------------------------------------- */

/* Reads p back whole and checks its offsets and segments. */
static void audit_partition(eng_partition *p, part_state *out)
{
    eng_partition_info in;
    eng_partition_info_get(p, &in);
    CHECK(in.log_start_offset <= in.high_watermark && in.high_watermark <= in.log_end_offset);
    eng_segment_info *si;
    size_t n;
    CHECK(eng_partition_segments(p, &si, &n) == 0);
    CHECK(n == in.segment_count && n > 0);
    uint64_t size = 0;
    for (size_t i = 0; i < n; i++) {
        CHECK(si[i].next_offset >= si[i].base_offset);
        CHECK(i == 0 || si[i].base_offset >= si[i - 1].next_offset);
        size += si[i].size_bytes;
    }
    CHECK(size == in.size_bytes);
    CHECK(si[n - 1].next_offset == in.log_end_offset);
    free(si);
    int64_t at = in.log_start_offset, prev_last = -1;
    while (at < in.high_watermark) {
        eng_fetch f;
        eng_errdetail d = {0};
        int rc = eng_partition_read(p, at, 65536, &f, &d);
        if (rc) {
            fprintf(stderr, "fuzz_request: %s-%d: read at %lld of [%lld, %lld): %s\n",
                    eng_partition_topic(p), eng_partition_id(p), (long long)at,
                    (long long)in.log_start_offset, (long long)in.high_watermark, d.message);
            abort();
        }
        CHECK(f.len > 0 && f.next_offset > at);
        for (size_t pos = 0; pos < f.len;) {
            eng_batch_header h, v;
            CHECK(eng_batch_header_decode(f.data + pos, f.len - pos, &h) == 0);
            CHECK(eng_batch_size(&h) <= f.len - pos);
            CHECK(eng_batch_validate(f.data + pos, eng_batch_size(&h), &v) == 0);
            CHECK(h.base_offset > prev_last);
            prev_last = eng_batch_last_offset(&h);
            pos += eng_batch_size(&h);
        }
        at = f.next_offset;
        eng_fetch_free(&f);
    }
    CHECK(at == in.high_watermark);
    if (out) {
        snprintf(out->topic, sizeof out->topic, "%s", eng_partition_topic(p));
        out->id = eng_partition_id(p);
        out->lso = in.log_start_offset;
        out->leo = in.log_end_offset;
    }
}

/* Audits every partition; *out (malloc'd, sorted) receives their offsets. */
static size_t audit_all(part_state **out)
{
    eng_partition **all;
    size_t n;
    CHECK(eng_manager_all_partitions(mgr, &all, &n) == 0);
    part_state *st = calloc(n ? n : 1, sizeof *st);
    CHECK(st);
    for (size_t i = 0; i < n; i++)
        audit_partition(all[i], &st[i]);
    eng_partitions_release(all, n);
    qsort(st, n, sizeof *st, cmp_part);
    *out = st;
    return n;
}

/* After a change: audit, stop cleanly, reload, compare, audit again. */
static void audit_and_restart(void)
{
    part_state *before, *after;
    size_t nb = audit_all(&before);
    server_stop();
    manager_open();
    eng_startup_report r;
    eng_manager_startup_report(mgr, &r);
    CHECK(r.clean_shutdown);
    CHECK(r.bytes_truncated == 0 && r.segments_recovered == 0);
    size_t na = audit_all(&after);
    CHECK(na == nb);
    for (size_t i = 0; i < na; i++) {
        if (strcmp(before[i].topic, after[i].topic) || before[i].id != after[i].id ||
            before[i].lso != after[i].lso || before[i].leo != after[i].leo) {
            fprintf(stderr, "fuzz_request: after a clean restart %s-%d has [%lld, %lld), "
                    "before it %s-%d had [%lld, %lld)\n", after[i].topic, after[i].id,
                    (long long)after[i].lso, (long long)after[i].leo, before[i].topic,
                    before[i].id, (long long)before[i].lso, (long long)before[i].leo);
            abort();
        }
    }
    free(before);
    free(after);
    server_stop();
}

/* ---- parsing the input ------------------------------------------------------------ */

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* Percent-decodes s in place ('+' is a space when plus); %00 is left as is,
 * since a C string cannot hold it (libmicrohttpd does the same). */
static void unescape(char *s, bool plus)
{
    char *w = s;
    for (char *r = s; *r; r++) {
        int hi, lo;
        if (*r == '%' && (hi = hexval(r[1])) >= 0 && (lo = hexval(r[2])) >= 0 && (hi || lo)) {
            *w++ = (char)(hi * 16 + lo);
            r += 2;
        } else if (*r == '+' && plus) {
            *w++ = ' ';
        } else {
            *w++ = *r;
        }
    }
    *w = 0;
}

/* Cuts the line starting at *p: returns it NUL-terminated without its LF or
 * CRLF and moves *p past it.  *last is set when the line ended at a NUL (or
 * at end, which holds a NUL) instead of a LF: the request ends with it. */
static char *next_line(char **p, char *end, bool *last)
{
    char *start = *p, *q = start;
    while (q < end && *q != '\n' && *q != 0)
        q++;
    *last = q == end || *q == 0;
    *q = 0;
    if (q > start && q[-1] == '\r')
        q[-1] = 0;
    *p = q < end ? q + 1 : end;
    return start;
}

static long json_int_of(json_t *v)
{
    if (json_is_integer(v))
        return (long)json_integer_value(v);
    if (json_is_string(v)) {
        char *e;
        errno = 0;
        long x = strtol(json_string_value(v), &e, 10);
        if (!errno && *e == 0 && e != json_string_value(v))
            return x;
    }
    return -1;
}

/* False for a request this harness refuses to run because it would make the
 * data dir too large or too slow (see the header). */
static bool affordable(const char *method, const uint8_t *body, size_t len)
{
    if (!body || (strcmp(method, "POST") && strcmp(method, "PATCH")))
        return true;
    json_t *doc = json_loadb((const char *)body, len, JSON_ALLOW_NUL, NULL);
    if (!json_is_object(doc)) {
        json_decref(doc);
        return true;
    }
    bool ok = true;
    json_t *parts = json_object_get(doc, "partitions");
    if (json_is_integer(parts) && json_integer_value(parts) > MAX_PARTITIONS &&
        json_integer_value(parts) <= 100000)
        ok = false;
    json_t *cfg = json_object_get(doc, "configs");
    if (json_is_object(cfg) && json_object_get(cfg, "preallocate")) {
        long seg = json_int_of(json_object_get(cfg, "segment.bytes"));
        if (seg < 0 || seg > (8 << 20))
            ok = false;
    }
    json_decref(doc);
    return ok;
}

/* Parses and runs the request at the start of buf[0, avail) (buf[avail] is
 * NUL; buf is modified); returns how many bytes it took, its separator
 * included. */
static size_t run_one(char *buf, size_t avail)
{
    char *end = buf + avail, *p = buf;
    bool last;
    char *method = next_line(&p, end, &last), *target = strchr(method, ' ');
    if (target)
        *target++ = 0;
    else
        target = "/";
    char *query_s = strchr(target, '?');
    if (query_s)
        *query_s++ = 0;
    char path_buf[4096];
    snprintf(path_buf, sizeof path_buf, "%s", target);
    unescape(path_buf, false);

    api_kv query[MAX_QUERY];
    size_t nq = 0;
    for (char *item = query_s; item && *item && nq < MAX_QUERY;) {
        char *amp = strchr(item, '&');
        if (amp)
            *amp = 0;
        if (*item) {
            char *eq = strchr(item, '=');
            if (eq)
                *eq++ = 0;
            unescape(item, true);
            if (eq)
                unescape(eq, true);
            query[nq++] = (api_kv){item, eq};
        }
        item = amp ? amp + 1 : NULL;
    }

    api_kv headers[MAX_HEADERS];
    size_t nh = 0;
    const uint8_t *body = NULL;
    size_t body_len = 0;
    const char *content_length = NULL;
    while (!last) {
        char *h = next_line(&p, end, &last);
        if (*h == 0) {
            if (last)
                break;
            /* The body: Content-Length bytes when given (it may hold NULs),
             * else everything up to the next NUL. */
            char *e;
            unsigned long long n = content_length ? strtoull(content_length, &e, 10) : 0;
            if (content_length && *content_length >= '0' && *content_length <= '9' && *e == 0) {
                body_len = n < (unsigned long long)(end - p) ? (size_t)n : (size_t)(end - p);
                body = (const uint8_t *)p;
                p += body_len;
                if (p < end && *p == 0)
                    p++;
            } else {
                char *nul = memchr(p, 0, (size_t)(end - p));
                body_len = (size_t)((nul ? nul : end) - p);
                body = (const uint8_t *)p;
                p = nul && nul < end ? nul + 1 : end;
            }
            break;
        }
        char *colon = strchr(h, ':');
        if (!colon || nh == MAX_HEADERS)
            continue;
        *colon = 0;
        char *v = colon + 1;
        while (*v == ' ' || *v == '\t')
            v++;
        headers[nh++] = (api_kv){h, v};
        if (strcasecmp(h, "Content-Length") == 0)
            content_length = v;
    }
    if (body_len == 0)
        body = NULL;
    bool fix_crc = false;
    for (size_t i = 0; i < nh; i++)
        fix_crc |= strcasecmp(headers[i].key, "X-Fuzz-Fix-Crc") == 0;
    if (fix_crc && body)
        (void)fuzz_fix_crcs((uint8_t *)(uintptr_t)body, body_len);
    if (*method && affordable(method, body, body_len))
        run_request(method, path_buf, query, nq, headers, nh, body, body_len);
    return (size_t)(p - buf);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    setup_once();
    if (!mgr)
        server_start();
    /* A private, NUL-terminated copy that parsing may cut up. */
    char *buf = malloc(size + 1);
    CHECK(buf);
    memcpy(buf, data, size);
    buf[size] = 0;
    size_t pos = 0;
    for (int n = 0; n < MAX_REQUESTS && pos < size; n++) {
        size_t used = run_one(buf + pos, size - pos);
        CHECK(used > 0 && used <= size - pos);
        pos += used;
    }
    free(buf);
    if (dirty)
        audit_and_restart(); /* and the next input starts afresh */
    return 0;
}
