/*
 * test_api_paging.c - the admin listings page (README "Paging"), against the
 * real server: GET /v1/topics (by name), GET /v1/topics/{t} (its partitions,
 * by id), GET /v1/log-dirs and GET /v1/cleaner (partitions by topic and
 * id), GET .../segments (by base offset) and GET /v1/admin/snapshots (by
 * name).
 *
 * For each: a walk that follows next_after sees every item exactly once, in
 * order, and ends with has_more false and next_after null; a walk with
 * topics, partitions or segments created and deleted between its pages sees
 * each item that lived through it exactly once, the new ones ahead of its
 * cursor too, and none of the deleted ones ahead of it; a client that sends
 * no paging arguments gets the first 1000 items and has_more; bad limit and
 * after values answer 400 invalid_request.  Also: /v1/cleaner forgets a
 * deleted topic's last runs, and POST /v1/admin/retention:run?partition=N
 * runs partition N of every topic that has one.
 *
 * One server serves the whole group; tests build on each other in order.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "harness.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static ls_server g_srv;
static ls_server *S = &g_srv;

#define MAX_SEEN 2048
#define CHECK_ERR(r, st, code) assert_int_equal(ls_check_error(&(r), (st), (code)), 0)

static int group_setup(void **state)
{
    (void)state;
    return ls_start(S, NULL) ? -1 : 0;
}

static int group_teardown(void **state)
{
    (void)state;
    ls_stop(S);
    ls_cleanup(S);
    return 0;
}

static void get_ok(const char *path, ls_resp *r)
{
    assert_int_equal(ls_get(S, path, r), 0);
    if (r->status != 200 || !r->json)
        fprintf(stderr, "# GET %s: %ld %s\n", path, r->status, r->body);
    assert_int_equal(r->status, 200);
    assert_non_null(r->json);
}

static void send_ok(const char *method, const char *path, const char *json, long status)
{
    ls_resp r;
    assert_int_equal(ls_send_json(S, method, path, json, &r), 0);
    if (r.status != status)
        fprintf(stderr, "# %s %s: %ld %s\n", method, path, r.status, r.body);
    assert_int_equal(r.status, status);
    ls_resp_free(&r);
}

static void create(const char *name, int partitions)
{
    assert_int_equal(ls_create_topic(S, name, partitions, NULL), 201);
}

static void delete_topic(const char *name)
{
    char path[300];
    snprintf(path, sizeof path, "/v1/topics/%s", name);
    send_ok("DELETE", path, NULL, 204);
}

static void expect_400(const char *path)
{
    assert_int_equal(ls_expect_error(S, "GET", path, NULL, 400, "invalid_request"), 0);
}

/* The paging fields of a page: has_more, and next_after as text ("" when
 * null); checks that they agree. */
static bool page_more(const ls_resp *r, char *next, size_t len)
{
    json_t *more = ls_jget(r, "has_more"), *n = ls_jget(r, "next_after");
    assert_true(json_is_boolean(more));
    assert_non_null(n);
    if (!json_is_true(more)) {
        assert_true(json_is_null(n));
        next[0] = 0;
        return false;
    }
    if (json_is_string(n))
        snprintf(next, len, "%s", json_string_value(n));
    else if (json_is_integer(n))
        snprintf(next, len, "%lld", (long long)json_integer_value(n));
    else
        fail_msg("next_after is neither a string nor an integer");
    return true;
}

/* Items seen by a walk, as text. */
typedef struct seen {
    size_t n;
    char item[MAX_SEEN][64];
} seen;

static size_t seen_count(const seen *s, const char *item)
{
    size_t k = 0;
    for (size_t i = 0; i < s->n; i++)
        k += strcmp(s->item[i], item) == 0;
    return k;
}

static void seen_add(seen *s, const char *item)
{
    assert_true(s->n < MAX_SEEN);
    snprintf(s->item[s->n++], sizeof s->item[0], "%s", item);
}

/* Called between pages: page is the number of pages read so far. */
typedef void (*between_fn)(int page);

/* Adds the items of one page to s, returning how many there were. */
typedef size_t (*items_fn)(const ls_resp *r, seen *s);

/* Follows next_after from base (a path with its own "?limit=") to the end,
 * collecting the items; returns the number of pages. */
static int walk(const char *base, items_fn items, between_fn between, seen *s)
{
    char path[512], next[300] = "";
    int pages = 0;
    s->n = 0;
    for (;;) {
        if (pages)
            snprintf(path, sizeof path, "%s&after=%s", base, next);
        else
            snprintf(path, sizeof path, "%s", base);
        ls_resp r;
        get_ok(path, &r);
        items(&r, s);
        bool more = page_more(&r, next, sizeof next);
        ls_resp_free(&r);
        pages++;
        assert_true(pages < 1000);
        if (!more)
            return pages;
        if (between)
            between(pages);
    }
}

/* ---- GET /v1/topics ------------------------------------------------------ */

static size_t topic_items(const ls_resp *r, seen *s)
{
    json_t *arr = ls_jget(r, "topics"), *t;
    size_t i;
    json_array_foreach(arr, i, t) seen_add(s, json_string_value(json_object_get(t, "name")));
    return json_array_size(arr);
}

/* Every item once, each above the one before (strcmp order). */
static void assert_ordered_once(const seen *s)
{
    for (size_t i = 1; i < s->n; i++)
        if (strcmp(s->item[i - 1], s->item[i]) >= 0)
            fail_msg("'%s' came after '%s'", s->item[i], s->item[i - 1]);
}

static void topics_churn(int page)
{
    if (page != 1)
        return;
    /* The first page of 7 ended at tp06: one behind the cursor goes, one
     * ahead goes, one is made behind it and one ahead. */
    delete_topic("tp02");
    delete_topic("tp20");
    create("tp03a", 1);
    create("tp99", 1);
}

static void test_topics(void **state)
{
    (void)state;
    char name[32];
    for (int i = 0; i < 25; i++) {
        snprintf(name, sizeof name, "tp%02d", i);
        create(name, 1);
    }
    static seen s;
    /* No arguments: all 25 in one page. */
    assert_int_equal(walk("/v1/topics?limit=1000", topic_items, NULL, &s), 1);
    assert_int_equal(s.n, 25);
    ls_resp r;
    get_ok("/v1/topics", &r);
    assert_int_equal(json_array_size(ls_jget(&r, "topics")), 25);
    assert_false(json_is_true(ls_jget(&r, "has_more")));
    assert_true(json_is_null(ls_jget(&r, "next_after")));
    ls_resp_free(&r);

    /* Pages of 7: 7, 7, 7, 4. */
    assert_int_equal(walk("/v1/topics?limit=7", topic_items, NULL, &s), 4);
    assert_int_equal(s.n, 25);
    assert_ordered_once(&s);
    assert_string_equal(s.item[0], "tp00");
    assert_string_equal(s.item[24], "tp24");
    /* Pages of exactly the count: the last page says there is no more. */
    assert_int_equal(walk("/v1/topics?limit=25", topic_items, NULL, &s), 1);
    assert_int_equal(walk("/v1/topics?limit=5", topic_items, NULL, &s), 5);
    assert_int_equal(s.n, 25);

    /* Created and deleted between pages. */
    walk("/v1/topics?limit=7", topic_items, topics_churn, &s);
    assert_ordered_once(&s);
    for (int i = 0; i < 25; i++) {
        snprintf(name, sizeof name, "tp%02d", i);
        assert_int_equal(seen_count(&s, name), i == 20 ? 0 : 1);
    }
    assert_int_equal(seen_count(&s, "tp99"), 1);
    assert_int_equal(seen_count(&s, "tp03a"), 0); /* made behind the cursor */

    /* A cursor naming no topic (deleted meanwhile) goes on after it. */
    get_ok("/v1/topics?after=tp20&limit=2", &r);
    assert_string_equal(ls_jstr(&r, "topics.0.name"), "tp21");
    assert_string_equal(ls_jstr(&r, "next_after"), "tp22");
    ls_resp_free(&r);
    get_ok("/v1/topics?after=tp99", &r);
    assert_int_equal(json_array_size(ls_jget(&r, "topics")), 0);
    assert_false(json_is_true(ls_jget(&r, "has_more")));
    ls_resp_free(&r);

    static const char *const bad[] = {
        "/v1/topics?limit=0",         "/v1/topics?limit=100001", "/v1/topics?limit=x",
        "/v1/topics?limit=-1",        "/v1/topics?limit=",       "/v1/topics?after=",
        "/v1/topics?after=a%2Fb",     "/v1/topics?after=..",     "/v1/topics?after=tp01&after=tp02",
        "/v1/topics?limit=1&limit=2",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        expect_400(bad[i]);
    get_ok("/v1/topics?limit=100000", &r);
    ls_resp_free(&r);
    for (int i = 0; i < 25; i++) {
        snprintf(name, sizeof name, "tp%02d", i);
        if (i != 2 && i != 20)
            delete_topic(name);
    }
    delete_topic("tp03a");
    delete_topic("tp99");
}

/* ---- GET /v1/admin/snapshots --------------------------------------------- */

static size_t snapshot_items(const ls_resp *r, seen *s)
{
    json_t *arr = ls_jget(r, "snapshots"), *o;
    size_t i;
    json_array_foreach(arr, i, o) seen_add(s, json_string_value(json_object_get(o, "name")));
    return json_array_size(arr);
}

static void snapshot(const char *name)
{
    char body[128];
    snprintf(body, sizeof body, "{\"name\":\"%s\"}", name);
    send_ok("POST", "/v1/admin/snapshots", body, 201);
}

static void delete_snapshot(const char *name)
{
    char path[300];
    snprintf(path, sizeof path, "/v1/admin/snapshots/%s", name);
    send_ok("DELETE", path, NULL, 204);
}

static void snapshots_churn(int page)
{
    if (page != 1)
        return;
    /* The first page of 2 ended at sn-2: one ahead goes, one is made
     * behind the cursor and one ahead. */
    delete_snapshot("sn-4");
    snapshot("sn-1a");
    snapshot("sn-9");
}

/* First in the group: the data dir is still empty, so each snapshot is
 * quick to take. */
static void test_snapshots(void **state)
{
    (void)state;
    /* Made out of order: listed by name all the same. */
    static const char *const names[] = {"sn-3", "sn-1", "sn-5", "sn-2", "sn-4"};
    for (size_t i = 0; i < 5; i++)
        snapshot(names[i]);
    static seen s;
    /* Pages of 2: 2, 2, 1, each snapshot once, in order. */
    assert_int_equal(walk("/v1/admin/snapshots?limit=2", snapshot_items, NULL, &s), 3);
    assert_int_equal(s.n, 5);
    assert_ordered_once(&s);
    assert_string_equal(s.item[0], "sn-1");
    assert_string_equal(s.item[4], "sn-5");
    ls_resp r;
    get_ok("/v1/admin/snapshots", &r);
    assert_int_equal(json_array_size(ls_jget(&r, "snapshots")), 5);
    assert_false(json_is_true(ls_jget(&r, "has_more")));
    assert_true(json_is_null(ls_jget(&r, "next_after")));
    ls_resp_free(&r);

    /* A cursor naming no snapshot goes on after it. */
    get_ok("/v1/admin/snapshots?after=sn-2a&limit=1", &r);
    assert_int_equal(json_array_size(ls_jget(&r, "snapshots")), 1);
    assert_string_equal(ls_jstr(&r, "snapshots.0.name"), "sn-3");
    assert_string_equal(ls_jstr(&r, "next_after"), "sn-3");
    ls_resp_free(&r);

    /* Taken and removed between pages. */
    walk("/v1/admin/snapshots?limit=2", snapshot_items, snapshots_churn, &s);
    assert_ordered_once(&s);
    assert_int_equal(s.n, 5);
    assert_int_equal(seen_count(&s, "sn-1a"), 0); /* made behind the cursor */
    assert_int_equal(seen_count(&s, "sn-4"), 0);
    assert_int_equal(seen_count(&s, "sn-9"), 1);

    static const char *const bad[] = {"/v1/admin/snapshots?limit=0", "/v1/admin/snapshots?limit=x",
                                      "/v1/admin/snapshots?after=", "/v1/admin/snapshots?after=.sn",
                                      "/v1/admin/snapshots?after=a%2Fb"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        expect_400(bad[i]);
    static const char *const left[] = {"sn-1", "sn-1a", "sn-2", "sn-3", "sn-5", "sn-9"};
    for (size_t i = 0; i < sizeof left / sizeof left[0]; i++)
        delete_snapshot(left[i]);
}

/* ---- GET /v1/topics/{t} -------------------------------------------------- */

/* Adds the integer field of each item of the answer's array to s,
 * zero-padded to width digits so that strcmp order is numeric order;
 * returns how many there were. */
static size_t number_items(const ls_resp *r, const char *array, const char *field, int width,
                           seen *s)
{
    json_t *arr = ls_jget(r, array), *o;
    size_t i;
    json_array_foreach(arr, i, o) {
        char item[32];
        snprintf(item, sizeof item, "%0*lld", width,
                 (long long)json_integer_value(json_object_get(o, field)));
        seen_add(s, item);
    }
    return json_array_size(arr);
}

static size_t partition_items(const ls_resp *r, seen *s)
{
    return number_items(r, "partitions", "partition", 4, s);
}

static void partitions_grow(int page)
{
    if (page == 2)
        send_ok("PATCH", "/v1/topics/wide", "{\"partitions\":30}", 200);
}

static void test_topic_partitions(void **state)
{
    (void)state;
    create("wide", 23);
    assert_int_equal(ls_append_json(S, "wide", 3, "{\"records\":[{\"value\":\"x\"}]}"), 200);
    assert_int_equal(ls_append_json(S, "wide", 21, "{\"records\":[{\"value\":\"y\"}]}"), 200);
    static seen s;
    assert_int_equal(walk("/v1/topics/wide?limit=5", partition_items, NULL, &s), 5);
    assert_int_equal(s.n, 23);
    assert_ordered_once(&s);
    assert_string_equal(s.item[22], "0022");

    /* The topic's totals cover every partition, on every page. */
    ls_resp r;
    get_ok("/v1/topics/wide?limit=1", &r);
    assert_int_equal(ls_jint(&r, "partition_count"), 23);
    assert_int_equal(ls_jint(&r, "records_appended"), 2);
    assert_int_equal(json_array_size(ls_jget(&r, "partitions")), 1);
    assert_int_equal(ls_jint(&r, "next_after"), 0);
    long long size = ls_jint(&r, "size_bytes");
    assert_true(size > 0);
    ls_resp_free(&r);
    get_ok("/v1/topics/wide", &r);
    long long sum = 0;
    for (size_t i = 0; i < 23; i++) {
        char key[64];
        snprintf(key, sizeof key, "partitions.%zu.size_bytes", i);
        sum += ls_jint(&r, key);
    }
    assert_int_equal(sum, size);
    assert_false(json_is_true(ls_jget(&r, "has_more")));
    ls_resp_free(&r);

    /* Grown between pages: the new partitions come at the end. */
    walk("/v1/topics/wide?limit=5", partition_items, partitions_grow, &s);
    assert_int_equal(s.n, 30);
    assert_ordered_once(&s);

    get_ok("/v1/topics/wide?after=29", &r);
    assert_int_equal(json_array_size(ls_jget(&r, "partitions")), 0);
    assert_false(json_is_true(ls_jget(&r, "has_more")));
    ls_resp_free(&r);
    get_ok("/v1/topics/wide?after=2147483647", &r);
    assert_int_equal(json_array_size(ls_jget(&r, "partitions")), 0);
    ls_resp_free(&r);
    static const char *const bad[] = {
        "/v1/topics/wide?limit=0",  "/v1/topics/wide?after=x",          "/v1/topics/wide?after=-1",
        "/v1/topics/wide?after=",   "/v1/topics/wide?after=2147483648", "/v1/topics/wide?after=1.5",
        "/v1/topics/wide?limit=1e3",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        expect_400(bad[i]);
    assert_int_equal(
        ls_expect_error(S, "GET", "/v1/topics/nope?limit=5", NULL, 404, "unknown_topic"), 0);
}

/* ---- GET /v1/log-dirs ---------------------------------------------------- */

static size_t dir_items(const ls_resp *r, seen *s)
{
    json_t *topics = ls_jget(r, "log_dirs.0.topics"), *t, *p;
    size_t i, j, n = 0;
    json_array_foreach(topics, i, t) {
        const char *name = json_string_value(json_object_get(t, "name"));
        json_array_foreach(json_object_get(t, "partitions"), j, p) {
            char item[64];
            /* Zero-padded so that strcmp order is the listing's order. */
            snprintf(item, sizeof item, "%s %04lld", name,
                     (long long)json_integer_value(json_object_get(p, "partition")));
            seen_add(s, item);
            n++;
        }
    }
    return n;
}

static void dirs_churn(int page)
{
    if (page != 1)
        return;
    /* The first page of 4 ended at a-3: c (ahead) goes; b and a0 are made
     * ahead of it (a-3 < a0-0 < b-0 < c-0). */
    delete_topic("c");
    create("b", 2);
    create("a0", 1);
}

static void test_log_dirs(void **state)
{
    (void)state;
    create("a", 6);
    create("c", 3);
    create("d", 2);
    static seen s;
    /* a (6), c (3), d (2), wide (30): 41 partitions. */
    assert_int_equal(walk("/v1/log-dirs?limit=4", dir_items, NULL, &s), 11);
    assert_int_equal(s.n, 41);
    assert_ordered_once(&s);
    /* A topic cut by a page boundary is listed on both pages, each with
     * its own partitions; the dir's size counts every partition. */
    ls_resp r, r2;
    get_ok("/v1/log-dirs?limit=4", &r);
    assert_string_equal(ls_jstr(&r, "next_after"), "a-3");
    get_ok("/v1/log-dirs?limit=4&after=a-3", &r2);
    assert_string_equal(ls_jstr(&r2, "log_dirs.0.topics.0.name"), "a");
    assert_int_equal(ls_jint(&r2, "log_dirs.0.topics.0.partitions.0.partition"), 4);
    assert_string_equal(ls_jstr(&r2, "log_dirs.0.topics.1.name"), "c");
    assert_int_equal(ls_jint(&r, "log_dirs.0.size_bytes"), ls_jint(&r2, "log_dirs.0.size_bytes"));
    assert_true(ls_jint(&r, "log_dirs.0.size_bytes") > 0);
    ls_resp_free(&r);
    ls_resp_free(&r2);

    walk("/v1/log-dirs?limit=4", dir_items, dirs_churn, &s);
    assert_ordered_once(&s);
    for (int p = 0; p < 6; p++) {
        char item[32];
        snprintf(item, sizeof item, "a %04d", p);
        assert_int_equal(seen_count(&s, item), 1);
    }
    assert_int_equal(seen_count(&s, "a0 0000"), 1);
    assert_int_equal(seen_count(&s, "b 0000"), 1);
    assert_int_equal(seen_count(&s, "b 0001"), 1);
    assert_int_equal(seen_count(&s, "c 0000"), 0);
    assert_int_equal(seen_count(&s, "d 0001"), 1);
    assert_int_equal(seen_count(&s, "wide 0029"), 1);
    assert_int_equal(s.n, 6 + 1 + 2 + 2 + 30);

    /* A topic name with '-' in it parses by the last '-'. */
    create("x-y", 2);
    get_ok("/v1/log-dirs?after=x-y-0", &r);
    assert_string_equal(ls_jstr(&r, "log_dirs.0.topics.0.name"), "x-y");
    assert_int_equal(ls_jint(&r, "log_dirs.0.topics.0.partitions.0.partition"), 1);
    ls_resp_free(&r);
    get_ok("/v1/log-dirs?after=zzz-0", &r);
    assert_int_equal(json_array_size(ls_jget(&r, "log_dirs.0.topics")), 0);
    assert_false(json_is_true(ls_jget(&r, "has_more")));
    ls_resp_free(&r);
    static const char *const bad[] = {
        "/v1/log-dirs?after=a",  "/v1/log-dirs?after=a-",     "/v1/log-dirs?after=-1",
        "/v1/log-dirs?after=a-x", "/v1/log-dirs?after=a-1.5", "/v1/log-dirs?after=a-2147483648",
        "/v1/log-dirs?after=",   "/v1/log-dirs?after=..-1",   "/v1/log-dirs?limit=0",
        "/v1/log-dirs?limit=100001",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        expect_400(bad[i]);
    delete_topic("x-y");
}

/* ---- what a client that ignores paging sees ------------------------------ */

static void test_default_page(void **state)
{
    (void)state;
    ls_resp r;
    /* The create's answer is the description's first page. */
    assert_int_equal(
        ls_send_json(S, "POST", "/v1/topics", "{\"name\":\"huge\",\"partitions\":1001}", &r), 0);
    assert_int_equal(r.status, 201);
    assert_int_equal(json_array_size(ls_jget(&r, "partitions")), 1000);
    assert_true(json_is_true(ls_jget(&r, "has_more")));
    ls_resp_free(&r);

    get_ok("/v1/topics/huge", &r);
    assert_int_equal(ls_jint(&r, "partition_count"), 1001);
    assert_int_equal(json_array_size(ls_jget(&r, "partitions")), 1000);
    assert_true(json_is_true(ls_jget(&r, "has_more")));
    assert_int_equal(ls_jint(&r, "next_after"), 999);
    ls_resp_free(&r);
    get_ok("/v1/topics/huge?after=999", &r);
    assert_int_equal(json_array_size(ls_jget(&r, "partitions")), 1);
    assert_int_equal(ls_jint(&r, "partitions.0.partition"), 1000);
    assert_false(json_is_true(ls_jget(&r, "has_more")));
    ls_resp_free(&r);
    get_ok("/v1/topics/huge?limit=1001", &r);
    assert_int_equal(json_array_size(ls_jget(&r, "partitions")), 1001);
    ls_resp_free(&r);

    static seen s;
    get_ok("/v1/log-dirs", &r);
    s.n = 0;
    assert_int_equal(dir_items(&r, &s), 1000);
    assert_true(json_is_true(ls_jget(&r, "has_more")));
    ls_resp_free(&r);
    delete_topic("huge");
}

/* ---- GET .../segments ---------------------------------------------------- */

static size_t segment_items(const ls_resp *r, seen *s)
{
    return number_items(r, "segments", "base_offset", 20, s);
}

#define SEGS "/v1/topics/sg/partitions/0/segments"

/* Retention takes the first three segments between pages: a position
 * would skip three segments, the base offset cursor none. */
static void segments_retention(int page)
{
    if (page != 1)
        return;
    send_ok("POST", "/v1/topics/sg/partitions/0/records:delete", "{\"before_offset\":3}", 200);
    ls_resp r;
    assert_int_equal(ls_send_json(S, "POST", "/v1/topics/sg/retention:run", "{}", &r), 0);
    assert_int_equal(r.status, 200);
    assert_int_equal(ls_jint(&r, "segments_deleted"), 3);
    ls_resp_free(&r);
}

static void test_segments(void **state)
{
    (void)state;
    create("sg", 1);
    for (int i = 0; i < 8; i++) {
        assert_int_equal(ls_append_json(S, "sg", 0, "{\"records\":[{\"value\":\"v\"}]}"), 200);
        send_ok("POST", "/v1/topics/sg/partitions/0/segments:roll", NULL, 200);
    }
    /* Bases 0..7 sealed, 8 active. */
    static seen s;
    assert_int_equal(walk(SEGS "?limit=2", segment_items, NULL, &s), 5);
    assert_int_equal(s.n, 9);
    assert_ordered_once(&s);
    ls_resp r;
    get_ok(SEGS "?limit=2", &r);
    assert_int_equal(ls_jint(&r, "next_after"), 1);
    assert_int_equal(ls_jint(&r, "segment_count"), 9);
    ls_resp_free(&r);
    /* The position paging reports has_more too. */
    get_ok(SEGS "?start=7&limit=2", &r);
    assert_int_equal(json_array_size(ls_jget(&r, "segments")), 2);
    assert_false(json_is_true(ls_jget(&r, "has_more")));
    ls_resp_free(&r);
    get_ok(SEGS "?start=6&limit=2", &r);
    assert_true(json_is_true(ls_jget(&r, "has_more")));
    assert_int_equal(ls_jint(&r, "next_after"), 7);
    ls_resp_free(&r);
    /* A base that is no segment's: from the first above it. */
    get_ok(SEGS "?after=100&limit=2", &r);
    assert_int_equal(json_array_size(ls_jget(&r, "segments")), 0);
    ls_resp_free(&r);

    walk(SEGS "?limit=2", segment_items, segments_retention, &s);
    assert_ordered_once(&s);
    /* 0 and 1 on page one; 2 went before page two, which starts at 3 (a
     * start=2 would have skipped 3 and 4). */
    assert_int_equal(s.n, 8);
    assert_int_equal(seen_count(&s, "00000000000000000002"), 0);
    for (int b = 3; b <= 8; b++) {
        char item[32];
        snprintf(item, sizeof item, "%020d", b);
        assert_int_equal(seen_count(&s, item), 1);
    }

    static const char *const bad[] = {
        SEGS "?after=x", SEGS "?after=-1", SEGS "?after=", SEGS "?after=1&start=1",
        SEGS "?limit=0", SEGS "?limit=100001",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        expect_400(bad[i]);
}

/* ---- GET /v1/cleaner's partitions ---------------------------------------- */

static size_t cleaner_items(const ls_resp *r, seen *s)
{
    json_t *arr = ls_jget(r, "partitions"), *o;
    size_t i;
    json_array_foreach(arr, i, o) {
        char item[64];
        snprintf(item, sizeof item, "%s %04lld", json_string_value(json_object_get(o, "topic")),
                 (long long)json_integer_value(json_object_get(o, "partition")));
        seen_add(s, item);
    }
    return json_array_size(arr);
}

static void cleaner_churn(int page)
{
    if (page != 1)
        return;
    /* The first page of 3 ended at cp1-2. */
    delete_topic("cp3");
    assert_int_equal(ls_create_topic(S, "cp0", 1, "{\"cleanup.policy\":\"compact\"}"), 201);
    assert_int_equal(ls_create_topic(S, "cp4", 2, "{\"cleanup.policy\":\"compact\"}"), 201);
}

static void test_cleaner_pages(void **state)
{
    (void)state;
    /* Beside the topics without compact left by the tests before. */
    assert_int_equal(ls_create_topic(S, "cp1", 4, "{\"cleanup.policy\":\"compact\"}"), 201);
    assert_int_equal(ls_create_topic(S, "cp2", 3, "{\"cleanup.policy\":\"compact\"}"), 201);
    assert_int_equal(ls_create_topic(S, "cp3", 2, "{\"cleanup.policy\":\"compact\"}"), 201);
    static seen s;
    assert_int_equal(walk("/v1/cleaner?limit=3", cleaner_items, NULL, &s), 3);
    assert_int_equal(s.n, 9);
    assert_ordered_once(&s);
    assert_string_equal(s.item[0], "cp1 0000");
    assert_string_equal(s.item[8], "cp3 0001");
    ls_resp r;
    get_ok("/v1/cleaner", &r);
    assert_int_equal(json_array_size(ls_jget(&r, "partitions")), 9);
    assert_true(json_is_array(ls_jget(&r, "last_runs")));
    assert_false(json_is_true(ls_jget(&r, "has_more")));
    ls_resp_free(&r);
    get_ok("/v1/cleaner?limit=4&after=cp1-3", &r);
    assert_string_equal(ls_jstr(&r, "partitions.0.topic"), "cp2");
    assert_string_equal(ls_jstr(&r, "next_after"), "cp3-0");
    ls_resp_free(&r);

    walk("/v1/cleaner?limit=3", cleaner_items, cleaner_churn, &s);
    assert_ordered_once(&s);
    assert_int_equal(seen_count(&s, "cp0 0000"), 0); /* made behind the cursor */
    assert_int_equal(seen_count(&s, "cp3 0000"), 0);
    assert_int_equal(seen_count(&s, "cp4 0001"), 1);
    assert_int_equal(s.n, 4 + 3 + 2);

    static const char *const bad[] = {"/v1/cleaner?limit=0", "/v1/cleaner?after=cp1",
                                      "/v1/cleaner?after=cp1-x", "/v1/cleaner?after="};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        expect_400(bad[i]);
    delete_topic("cp0");
    delete_topic("cp1");
    delete_topic("cp2");
    delete_topic("cp4");
}

/* ---- the cleaner's last runs --------------------------------------------- */

/* How many of /v1/cleaner's last runs are of topic. */
static int runs_of(const char *topic)
{
    ls_resp r;
    get_ok("/v1/cleaner", &r);
    json_t *o;
    size_t i;
    int n = 0;
    json_array_foreach(ls_jget(&r, "last_runs"), i, o)
        n += strcmp(json_string_value(json_object_get(o, "topic")), topic) == 0;
    ls_resp_free(&r);
    return n;
}

static void compact_once(const char *topic)
{
    char path[300];
    assert_int_equal(ls_create_topic(S, topic, 1, "{\"cleanup.policy\":\"compact\"}"), 201);
    assert_int_equal(ls_append_json(S, topic, 0,
                                    "{\"records\":[{\"key\":\"k\",\"value\":\"1\"},"
                                    "{\"key\":\"k\",\"value\":\"2\"}]}"),
                     200);
    snprintf(path, sizeof path, "/v1/topics/%s/partitions/0/segments:roll", topic);
    send_ok("POST", path, NULL, 200);
    snprintf(path, sizeof path, "/v1/topics/%s/compaction:run", topic);
    send_ok("POST", path, "{}", 200);
}

static void test_cleaner_forgets_deleted_topic(void **state)
{
    (void)state;
    compact_once("cl-a");
    compact_once("cl-b");
    assert_int_equal(runs_of("cl-a"), 1);
    assert_int_equal(runs_of("cl-b"), 1);
    delete_topic("cl-a");
    assert_int_equal(runs_of("cl-a"), 0);
    assert_int_equal(runs_of("cl-b"), 1);
    /* A topic made again under the name starts with no history. */
    assert_int_equal(ls_create_topic(S, "cl-a", 1, "{\"cleanup.policy\":\"compact\"}"), 201);
    assert_int_equal(runs_of("cl-a"), 0);
    delete_topic("cl-a");
    delete_topic("cl-b");
}

/* ---- POST /v1/admin/retention:run?partition=N ---------------------------- */

static void test_admin_retention_partition(void **state)
{
    (void)state;
    /* wide (30), a (6), b (2), d (2), a0 (1), sg (1): partition 5 exists in
     * wide and a only; the others are left out, not refused. */
    ls_resp r;
    assert_int_equal(ls_send_json(S, "POST", "/v1/admin/retention:run?partition=5",
                                  "{\"dry_run\":true}", &r),
                     0);
    assert_int_equal(r.status, 200);
    json_t *parts = ls_jget(&r, "partitions"), *o;
    assert_int_equal(json_array_size(parts), 2);
    size_t i;
    json_array_foreach(parts, i, o) {
        assert_int_equal(json_integer_value(json_object_get(o, "partition")), 5);
        const char *t = json_string_value(json_object_get(o, "topic"));
        assert_true(!strcmp(t, "a") || !strcmp(t, "wide"));
    }
    ls_resp_free(&r);
    /* A partition no topic has: an empty report. */
    assert_int_equal(ls_send_json(S, "POST", "/v1/admin/retention:run?partition=99",
                                  "{\"dry_run\":true}", &r),
                     0);
    assert_int_equal(r.status, 200);
    assert_int_equal(json_array_size(ls_jget(&r, "partitions")), 0);
    ls_resp_free(&r);
    assert_int_equal(ls_expect_error(S, "POST", "/v1/admin/retention:run?partition=-1", "{}", 400,
                                     "invalid_request"),
                     0);
}

static void test_zz_clean_stop(void **state)
{
    (void)state;
    assert_int_equal(ls_stop(S), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_snapshots),
        cmocka_unit_test(test_topics),
        cmocka_unit_test(test_topic_partitions),
        cmocka_unit_test(test_log_dirs),
        cmocka_unit_test(test_default_page),
        cmocka_unit_test(test_segments),
        cmocka_unit_test(test_cleaner_pages),
        cmocka_unit_test(test_cleaner_forgets_deleted_topic),
        cmocka_unit_test(test_admin_retention_partition),
        cmocka_unit_test(test_zz_clean_stop),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
