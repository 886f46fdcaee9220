/*
 * test_snapshot_names.c - the snapshot routes (README "Snapshots") against
 * a client that sends what it should not, through the real server:
 *
 *   - names: a NUL inside the JSON string ("a\u0000b") is refused 422, never
 *     cut to "a"; so are 247 to 250 characters (".partial-<name>" would not
 *     fit a file name), non-ASCII, '/', "..", a leading dot and
 *     ".partial-"; 246 characters are taken and removed;
 *   - the DELETE path: "..", "%2E%2E", "a%2Fb", "x%00", 300 characters,
 *     "%C3%A4" and ".partial-<name>" never remove anything; a plain file or
 *     a symlink planted under snapshots/ is not a snapshot (404), and what
 *     the link points at is left alone;
 *   - a snapshot named like a topic is only a snapshot: the topic, a
 *     restart and the removal leave each other alone;
 *   - many creates of one name at once: one 201, every other 409 (busy or
 *     snapshot_exists), one snapshot listed and nothing half-made left;
 *   - a log dir gone offline (a failed write): 503 log_dir_offline and
 *     nothing written under snapshots/;
 *   - removing one while another is being taken: the removal waits its turn
 *     on the snapshot lane (it used to answer 409 busy, and before that ran
 *     on the HTTP thread), then removes it.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "eng_fs.h"
#include "harness.h"

#include <dirent.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define SNAPS "/v1/admin/snapshots"

static const char *const settings[] = {"log.cleaner.threads=0", "log.retention.check.interval.ms=600000",
                                       NULL};

static ls_server g_s;

static int setup(void **state)
{
    (void)state;
    memset(&g_s, 0, sizeof g_s);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    unsetenv("LOGSTORE_FAULT");
    ls_cleanup(&g_s);
    return 0;
}

static void start(ls_server *s)
{
    assert_int_equal(ls_start(s, settings), 0);
    assert_int_equal(ls_create_topic(s, "orders", 1, NULL), 201);
    assert_int_equal(ls_append_json(s, "orders", 0, "{\"records\":[{\"key\":\"k\",\"value\":\"v\"}]}"), 200);
}

/* Names under <dir>/snapshots, sorted, one a line ("" when there is none). */
static void snapshots_listing(const ls_server *s, char *buf, size_t len)
{
    char dir[1400];
    snprintf(dir, sizeof dir, "%s/snapshots", s->dir);
    buf[0] = 0;
    struct dirent **ents;
    int n = scandir(dir, &ents, NULL, alphasort);
    size_t used = 0;
    for (int i = 0; i < n; i++) {
        if (strcmp(ents[i]->d_name, ".") && strcmp(ents[i]->d_name, ".."))
            used += (size_t)snprintf(buf + used, len > used ? len - used : 0, "%s\n", ents[i]->d_name);
        free(ents[i]);
    }
    if (n >= 0)
        free(ents);
}

static size_t listed(ls_server *s)
{
    ls_resp r;
    assert_int_equal(ls_get(s, SNAPS, &r), 0);
    assert_int_equal(r.status, 200);
    size_t n = json_array_size(ls_jget(&r, "snapshots"));
    ls_resp_free(&r);
    return n;
}

static void create_ok(ls_server *s, const char *name)
{
    char body[400];
    snprintf(body, sizeof body, "{\"name\":\"%s\"}", name);
    ls_resp r;
    assert_int_equal(ls_send_json(s, "POST", SNAPS, body, &r), 0);
    if (r.status != 201)
        fprintf(stderr, "# POST %s %s: %ld %s\n", SNAPS, body, r.status, r.body);
    assert_int_equal(r.status, 201);
    assert_string_equal(ls_jstr(&r, "name"), name);
    ls_resp_free(&r);
}

static void delete_ok(ls_server *s, const char *name)
{
    char path[400];
    snprintf(path, sizeof path, SNAPS "/%s", name);
    ls_resp r;
    assert_int_equal(ls_delete(s, path, &r), 0);
    assert_int_equal(r.status, 204);
    ls_resp_free(&r);
}

static void test_names_in_the_body(void **state)
{
    (void)state;
    ls_server *s = &g_s;
    start(s);
    /* jansson keeps the NUL (JSON_ALLOW_NUL): the C string is "a", and a
     * snapshot "a" was taken from a request that named another. */
    assert_int_equal(ls_expect_error(s, "POST", SNAPS, "{\"name\":\"a\\u0000b\"}", 422,
                                     "invalid_snapshot_name"), 0);
    assert_int_equal(ls_expect_error(s, "POST", SNAPS, "{\"name\":\"nightly\\u0000\"}", 422,
                                     "invalid_snapshot_name"), 0);
    /* It is built as snapshots/.partial-<name>: 247 characters and more
     * made a file name over 255 bytes, and a 500 from mkdir. */
    char long_name[300], body[400];
    for (int n = 247; n <= 250; n++) {
        memset(long_name, 'n', (size_t)n);
        long_name[n] = 0;
        snprintf(body, sizeof body, "{\"name\":\"%s\"}", long_name);
        assert_int_equal(ls_expect_error(s, "POST", SNAPS, body, 422, "invalid_snapshot_name"), 0);
    }
    const char *const bad[] = {"sn\\u00e4p", "sn\xc3\xa4p", "a/b", "../x", "..", ".", ".partial-x",
                               ".hidden", "a b", "a\\\\b", "%2E%2E", NULL};
    for (int i = 0; bad[i]; i++) {
        snprintf(body, sizeof body, "{\"name\":\"%s\"}", bad[i]);
        assert_int_equal(ls_expect_error(s, "POST", SNAPS, body, 422, "invalid_snapshot_name"), 0);
    }
    assert_int_equal(ls_expect_error(s, "POST", SNAPS, "{\"name\":7}", 400, "invalid_request"), 0);
    assert_int_equal(ls_expect_error(s, "POST", SNAPS, "{\"name\":null}", 400, "invalid_request"), 0);
    char names[4096];
    snapshots_listing(s, names, sizeof names);
    if (names[0])
        fail_msg("refused names left under snapshots/:\n%s", names);
    assert_int_equal(listed(s), 0);

    /* 246 is the longest name taken, and removed. */
    long_name[246] = 0;
    create_ok(s, long_name);
    assert_int_equal(listed(s), 1);
    delete_ok(s, long_name);
    assert_int_equal(listed(s), 0);
}

static void test_names_in_the_path(void **state)
{
    (void)state;
    ls_server *s = &g_s;
    start(s);
    create_ok(s, "keep");
    /* Planted beside it: an unfinished one, a file, and a symlink to a
     * directory outside snapshots/. */
    char partial[1400], file[1400], link_path[1400], outside[1400], victim[1500];
    snprintf(partial, sizeof partial, "%s/snapshots/.partial-keep", s->dir);
    snprintf(file, sizeof file, "%s/snapshots/plain-file", s->dir);
    snprintf(link_path, sizeof link_path, "%s/snapshots/elsewhere", s->dir);
    snprintf(outside, sizeof outside, "%s/not-a-snapshot", s->dir);
    snprintf(victim, sizeof victim, "%s/precious", outside);
    assert_int_equal(mkdir(partial, 0755), 0);
    assert_int_equal(ls_write_file(file, "x"), 0);
    assert_int_equal(mkdir(outside, 0755), 0);
    assert_int_equal(ls_write_file(victim, "x"), 0);
    assert_int_equal(symlink(outside, link_path), 0);

    char long_path[400];
    int w = snprintf(long_path, sizeof long_path, SNAPS "/");
    memset(long_path + w, 'k', 300);
    long_path[w + 300] = 0;
    static const struct {
        const char *path;
        long status;
        const char *code;
    } cases[] = {
        /* libcurl removes the dot segment itself (RFC 3986 5.2.4), as
         * browsers do: the server sees /v1/admin/ */
        {SNAPS "/..", 404, "route_not_found"},
        {SNAPS "/%2E%2E", 422, "invalid_snapshot_name"},
        {SNAPS "/.partial-keep", 422, "invalid_snapshot_name"},
        {SNAPS "/keep%00", 422, "invalid_snapshot_name"},
        {SNAPS "/kee%C3%A4", 422, "invalid_snapshot_name"},
        {SNAPS "/a%2Fkeep", 404, "route_not_found"},
        {SNAPS "/plain-file", 404, "snapshot_not_found"},
        {SNAPS "/elsewhere", 404, "snapshot_not_found"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        assert_int_equal(ls_expect_error(s, "DELETE", cases[i].path, NULL, cases[i].status, cases[i].code), 0);
    assert_int_equal(ls_expect_error(s, "DELETE", long_path, NULL, 422, "invalid_snapshot_name"), 0);

    assert_true(eng_fs_exists(partial));
    assert_true(eng_fs_exists(file));
    assert_true(eng_fs_exists(victim));
    /* Only real, finished snapshots are listed. */
    ls_resp r;
    assert_int_equal(ls_get(s, SNAPS, &r), 0);
    assert_int_equal(json_array_size(ls_jget(&r, "snapshots")), 1);
    assert_string_equal(ls_jstr(&r, "snapshots.0.name"), "keep");
    ls_resp_free(&r);
    delete_ok(s, "keep");
    assert_true(eng_fs_exists(victim));
    unlink(link_path);
    unlink(victim);
    rmdir(outside);
}

/* Snapshots live under snapshots/, topics beside it: one of each called
 * "orders" leave each other alone. */
static void test_name_of_a_topic(void **state)
{
    (void)state;
    ls_server *s = &g_s;
    start(s);
    create_ok(s, "orders");
    assert_int_equal(ls_append_json(s, "orders", 0, "{\"records\":[{\"key\":\"k\",\"value\":\"w\"}]}"), 200);
    assert_int_equal(ls_stop(s), 0);
    assert_int_equal(ls_restart(s, settings), 0);
    ls_resp r;
    assert_int_equal(ls_get(s, "/v1/topics", &r), 0);
    assert_int_equal(json_array_size(ls_jget(&r, "topics")), 1);
    ls_resp_free(&r);
    assert_int_equal(ls_log_end_offset(s, "orders", 0), 2);
    delete_ok(s, "orders");
    assert_int_equal(ls_log_end_offset(s, "orders", 0), 2);
    assert_int_equal(ls_http(s, "DELETE", "/v1/topics/orders", NULL, NULL, 0, NULL, &r), 0);
    assert_int_equal(r.status, 204);
    ls_resp_free(&r);
    assert_int_equal(listed(s), 0);
}

#define RACERS 8

typedef struct racer {
    ls_server *s;
    pthread_barrier_t *go;
    long status;
    char code[64];
} racer;

/* No cmocka assertion off the main thread: the answer is kept. */
static void *create_same(void *arg)
{
    racer *rc = arg;
    pthread_barrier_wait(rc->go);
    ls_resp r;
    rc->status = -1;
    if (ls_send_json(rc->s, "POST", SNAPS, "{\"name\":\"same\"}", &r))
        return NULL;
    rc->status = r.status;
    const char *code = r.status == 201 ? "" : ls_jstr(&r, "error_code");
    snprintf(rc->code, sizeof rc->code, "%s", code ? code : "?");
    ls_resp_free(&r);
    return NULL;
}

static void test_concurrent_creates_of_one_name(void **state)
{
    (void)state;
    ls_server *s = &g_s;
    start(s);
    pthread_barrier_t go;
    pthread_barrier_init(&go, NULL, RACERS);
    racer rs[RACERS];
    pthread_t t[RACERS];
    for (int i = 0; i < RACERS; i++) {
        rs[i] = (racer){.s = s, .go = &go};
        assert_int_equal(pthread_create(&t[i], NULL, create_same, &rs[i]), 0);
    }
    int created = 0;
    for (int i = 0; i < RACERS; i++) {
        pthread_join(t[i], NULL);
        if (rs[i].status == 201) {
            created++;
            continue;
        }
        if (rs[i].status != 409 || (strcmp(rs[i].code, "busy") && strcmp(rs[i].code, "snapshot_exists")))
            fail_msg("a concurrent create answered %ld %s", rs[i].status, rs[i].code);
    }
    pthread_barrier_destroy(&go);
    assert_int_equal(created, 1);
    char names[4096];
    snapshots_listing(s, names, sizeof names);
    assert_string_equal(names, "same\n");
    assert_int_equal(listed(s), 1);
    assert_int_equal(ls_expect_error(s, "POST", SNAPS, "{\"name\":\"same\"}", 409, "snapshot_exists"), 0);
}

/* A write that failed took the log dir offline: what is on disk may not be
 * what was acknowledged, so no snapshot is taken of it. */
static void test_offline_log_dir(void **state)
{
    (void)state;
    ls_server *s = &g_s;
    setenv("LOGSTORE_FAULT", "segment.append.partial=eio@2", 1);
    int started = ls_start(s, settings);
    unsetenv("LOGSTORE_FAULT");
    assert_int_equal(started, 0);
    assert_int_equal(ls_create_topic(s, "orders", 1, NULL), 201);
    const char *rec = "{\"records\":[{\"key\":\"k\",\"value\":\"v\"}]}";
    assert_int_equal(ls_append_json(s, "orders", 0, rec), 200);
    ls_resp r;
    assert_int_equal(ls_send_json(s, "POST", "/v1/topics/orders/partitions/0/records", rec, &r), 0);
    assert_int_equal(ls_check_error(&r, 503, "log_dir_offline"), 0);
    ls_resp_free(&r);
    assert_int_equal(ls_expect_error(s, "POST", SNAPS, "{\"name\":\"after-eio\"}", 503, "log_dir_offline"), 0);
    char names[4096];
    snapshots_listing(s, names, sizeof names);
    if (names[0])
        fail_msg("an offline dir's snapshot left:\n%s", names);
    assert_int_equal(listed(s), 0);
}

typedef struct bg_create {
    ls_server *s;
    long status;
} bg_create;

static void *create_in_background(void *arg)
{
    bg_create *b = arg;
    ls_resp r;
    b->status = ls_send_json(b->s, "POST", SNAPS, "{\"name\":\"new\"}", &r) == 0 ? r.status : -1;
    if (b->status >= 0)
        ls_resp_free(&r);
    return NULL;
}

/* While one is being taken, removing another waits for it on the snapshot
 * lane (both use snapshots/.partial-*, and a removal of a large snapshot is
 * not for an HTTP thread), then removes it: 204, after the create, by the
 * server log's order. */
static void test_delete_while_one_is_taken(void **state)
{
    (void)state;
    ls_server *s = &g_s;
    /* Every partition of the second snapshot stalls (3 s each; the first
     * takes hits 1 to 4): the DELETE below has 12 s to land while it is
     * under way. */
    setenv("LOGSTORE_FAULT",
           "snapshot.partition=stall@5,snapshot.partition=stall@6,snapshot.partition=stall@7,"
           "snapshot.partition=stall@8",
           1);
    int started = ls_start(s, settings);
    unsetenv("LOGSTORE_FAULT");
    assert_int_equal(started, 0);
    assert_int_equal(ls_create_topic(s, "t", 4, NULL), 201);
    create_ok(s, "old");
    bg_create b = {.s = s};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, create_in_background, &b), 0);
    char first[1400];
    snprintf(first, sizeof first, "%s/snapshots/.partial-new/t-0", s->dir);
    for (int i = 0; i < 6000 && !eng_fs_exists(first); i++)
        usleep(5000);
    assert_true(eng_fs_exists(first));
    delete_ok(s, "old");
    pthread_join(t, NULL);
    assert_int_equal(b.status, 201);
    char names[4096];
    snapshots_listing(s, names, sizeof names);
    assert_string_equal(names, "new\n");
    size_t log_len;
    char *log = ls_read_file(s->log_path, &log_len);
    assert_non_null(log);
    const char *taken = strstr(log, "snapshot 'new' taken");
    const char *removed = strstr(log, "snapshot 'old' removed");
    assert_non_null(taken);
    assert_non_null(removed);
    assert_true(taken < removed);
    free(log);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_names_in_the_body, setup, teardown),
        cmocka_unit_test_setup_teardown(test_names_in_the_path, setup, teardown),
        cmocka_unit_test_setup_teardown(test_name_of_a_topic, setup, teardown),
        cmocka_unit_test_setup_teardown(test_concurrent_creates_of_one_name, setup, teardown),
        cmocka_unit_test_setup_teardown(test_offline_log_dir, setup, teardown),
        cmocka_unit_test_setup_teardown(test_delete_while_one_is_taken, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
