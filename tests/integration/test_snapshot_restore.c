/*
 * test_snapshot_restore.c - README "Backing up a data directory": a server
 * started on a copy of a snapshot serves exactly what the server served when
 * the snapshot was taken.
 *
 * "Exactly" is everything the API shows of the data, compared as one JSON
 * document (state()): every topic with its partition count and config
 * overrides, every partition's log start offset, high watermark and log end
 * offset, every record from the log start to the high watermark with its
 * offset, timestamp, timestamp type, key, value and headers (so a compacted
 * partition's gaps and tombstones too), and the cleaner's first dirty offset
 * of each compacted partition.
 *
 *   - quiet: the state is read, the snapshot taken, then the source changes
 *     every way it can (appends, compaction, delete-records, retention,
 *     config changes, more partitions, a topic deleted and one created); the
 *     copy restores the state read before, and it differs from the source's
 *     by then (the comparison can fail);
 *   - racing a compaction swap (compact.before_final=stall: the old
 *     segments already *.deleted, the .swap not yet renamed): the snapshot
 *     waits for the swap, and restores exactly the compacted state;
 *   - racing retention (retention.after_start_offset=stall: the log start
 *     offset moved, the segments not yet renamed away): the snapshot
 *     restores exactly the state after that pass.
 * The restored server starts as after a crash (clean_shutdown false).
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "eng_fs.h"
#include "harness.h"
#include "snapshot_fixture.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int setup(void **state)
{
    (void)state;
    snap_fixture_reset();
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    snap_fixture_cleanup();
    return 0;
}

/* ---- the state a server shows ------------------------------------------------ */

static json_t *get_json(ls_server *s, const char *path)
{
    ls_resp r;
    assert_int_equal(ls_get(s, path, &r), 0);
    if (r.status != 200)
        fprintf(stderr, "# GET %s: %ld %s\n", path, r.status, r.body);
    assert_int_equal(r.status, 200);
    json_t *doc = json_incref(r.json);
    ls_resp_free(&r);
    return doc;
}

/* Every record of topic-p in [lso, hw), paging with next_offset. */
static json_t *records(ls_server *s, const char *topic, int p, long long lso, long long hw)
{
    json_t *all = json_array();
    for (long long next = lso; next < hw;) {
        char path[200];
        snprintf(path, sizeof path, "/v1/topics/%s/partitions/%d/records?offset=%lld&max_records=1000",
                 topic, p, next);
        json_t *page = get_json(s, path);
        json_array_extend(all, json_object_get(page, "records"));
        long long nn = json_integer_value(json_object_get(page, "next_offset"));
        json_decref(page);
        assert_true(nn > next);
        next = nn;
    }
    return all;
}

/* The file's header comment says what this holds; a new reference. */
static json_t *state(ls_server *s)
{
    json_t *out = json_object(), *topics = json_object();
    json_t *list = get_json(s, "/v1/topics");
    size_t i;
    json_t *t;
    json_array_foreach(json_object_get(list, "topics"), i, t) {
        const char *name = json_string_value(json_object_get(t, "name"));
        char path[200];
        snprintf(path, sizeof path, "/v1/topics/%s", name);
        json_t *d = get_json(s, path);
        json_t *parts = json_array();
        int n = (int)json_integer_value(json_object_get(d, "partition_count"));
        for (int p = 0; p < n; p++) {
            snprintf(path, sizeof path, "/v1/topics/%s/partitions/%d", name, p);
            json_t *pd = get_json(s, path);
            long long lso = json_integer_value(json_object_get(pd, "log_start_offset"));
            long long hw = json_integer_value(json_object_get(pd, "high_watermark"));
            json_array_append_new(parts, json_pack("{s:I,s:I,s:O,s:o}", "log_start_offset", (json_int_t)lso,
                                                   "high_watermark", (json_int_t)hw, "log_end_offset",
                                                   json_object_get(pd, "log_end_offset"), "records",
                                                   records(s, name, p, lso, hw)));
            json_decref(pd);
        }
        json_object_set_new(topics, name, json_pack("{s:i,s:O,s:o}", "partition_count", n, "configs",
                                                    json_object_get(d, "configs"), "partitions", parts));
        json_decref(d);
    }
    json_decref(list);
    json_object_set_new(out, "topics", topics);
    json_t *cleaner = get_json(s, "/v1/cleaner"), *dirty = json_object();
    json_array_foreach(json_object_get(cleaner, "partitions"), i, t) {
        char key[300];
        snprintf(key, sizeof key, "%s-%lld", json_string_value(json_object_get(t, "topic")),
                 (long long)json_integer_value(json_object_get(t, "partition")));
        json_object_set(dirty, key, json_object_get(t, "first_dirty_offset"));
    }
    json_decref(cleaner);
    json_object_set_new(out, "first_dirty_offset", dirty);
    return out;
}

static void print_state(const char *what, json_t *st)
{
    char *text = json_dumps(st, JSON_SORT_KEYS | JSON_INDENT(1));
    fprintf(stderr, "# %s:\n%s\n", what, text ? text : "?");
    free(text);
}

/* ---- the workload -------------------------------------------------------------- */

static void post_ok(ls_server *s, const char *path, const char *body)
{
    ls_resp r;
    assert_int_equal(ls_send_json(s, "POST", path, body, &r), 0);
    if (r.status != 200 && r.status != 201)
        fprintf(stderr, "# POST %s: %ld %s\n", path, r.status, r.body);
    assert_true(r.status == 200 || r.status == 201);
    ls_resp_free(&r);
}

static void send_ok(ls_server *s, const char *method, const char *path, const char *body)
{
    ls_resp r;
    assert_int_equal(ls_send_json(s, method, path, body, &r), 0);
    if (r.status < 200 || r.status > 204)
        fprintf(stderr, "# %s %s: %ld %s\n", method, path, r.status, r.body);
    assert_true(r.status >= 200 && r.status <= 204);
    ls_resp_free(&r);
}

static void roll(ls_server *s, const char *topic, int p)
{
    char path[200];
    snprintf(path, sizeof path, "/v1/topics/%s/partitions/%d/segments:roll", topic, p);
    post_ok(s, path, "{}");
}

/* n records with keys key<from>.. (or no key), values "<tag>-<i>", a header. */
static void append(ls_server *s, const char *topic, int p, const char *key, int from, int n, const char *tag)
{
    char body[8192];
    size_t used = (size_t)snprintf(body, sizeof body, "{\"records\":[");
    for (int i = 0; i < n; i++) {
        char k[64] = "null";
        if (key)
            snprintf(k, sizeof k, "\"%s%d\"", key, from + i);
        used += (size_t)snprintf(body + used, sizeof body - used,
                                 "%s{\"key\":%s,\"value\":\"%s-%d\",\"headers\":[{\"name\":\"h\",\"value\":\"%d\"}]}",
                                 i ? "," : "", k, tag, from + i, i);
    }
    snprintf(body + used, sizeof body - used, "]}");
    char path[200];
    snprintf(path, sizeof path, "/v1/topics/%s/partitions/%d/records", topic, p);
    post_ok(s, path, body);
}

/* plain: two partitions, three segments in plain-0 with its log start
 * moved into the second by delete-records and the first removed by
 * retention; users: compacted, with a tombstone, its active segment holding
 * records; both with config overrides. */
static void load(ls_server *s)
{
    assert_int_equal(ls_create_topic(s, "plain", 2, "{\"retention.ms\":\"86400000\"}"), 201);
    assert_int_equal(ls_create_topic(s, "users", 1,
                                     "{\"cleanup.policy\":\"compact\",\"min.cleanable.dirty.ratio\":\"0.01\","
                                     "\"delete.retention.ms\":\"86400000\"}"),
                     201);
    for (int i = 0; i < 3; i++) {
        append(s, "plain", 0, "p", 10 * i, 10, "a");
        if (i < 2)
            roll(s, "plain", 0);
    }
    append(s, "plain", 1, NULL, 0, 7, "b");
    post_ok(s, "/v1/topics/plain/partitions/0/records:delete", "{\"before_offset\":13}");
    post_ok(s, "/v1/topics/plain/retention:run", "{}");
    append(s, "users", 0, "k", 0, 10, "a");
    roll(s, "users", 0);
    append(s, "users", 0, "k", 0, 10, "b");
    post_ok(s, "/v1/topics/users/partitions/0/records", "{\"records\":[{\"key\":\"k3\",\"value\":null}]}");
    roll(s, "users", 0);
    append(s, "users", 0, "k", 0, 5, "c");
    post_ok(s, "/v1/topics/users/compaction:run", "{}");
    send_ok(s, "PUT", "/v1/topics/users/configs/max.message.bytes", "{\"value\":\"500000\"}");
}

/* ---- snapshot, copy, restore ------------------------------------------------------- */

static void create_snapshot(ls_server *s, const char *name)
{
    char body[128];
    snprintf(body, sizeof body, "{\"name\":\"%s\"}", name);
    post_ok(s, "/v1/admin/snapshots", body);
}

/* Copies the snapshot off with cp -a, as README's rsync does, starts a server
 * on the copy and returns its state; the server is left running. */
static json_t *restore(ls_server *s, const char *name)
{
    char copy[1400], cmd[3000], out[256];
    snprintf(copy, sizeof copy, "%s.restored-%s", s->dir, name);
    snprintf(cmd, sizeof cmd, "cp -a '%s/snapshots/%s' '%s'", s->dir, name, copy);
    assert_int_equal(ls_run_cmd(cmd, out, sizeof out), 0);
    memset(&g_restored, 0, sizeof g_restored);
    if (ls_start_dir(&g_restored, copy, settings, true))
        fail_msg("a server on the copy of snapshot '%s' did not start", name);
    ls_resp r;
    assert_int_equal(ls_get(&g_restored, "/v1/info", &r), 0);
    json_t *clean = ls_jget(&r, "startup.clean_shutdown");
    assert_true(json_is_false(clean));
    ls_resp_free(&r);
    return state(&g_restored);
}

static void expect_same(json_t *want, json_t *got, const char *what)
{
    if (json_equal(want, got))
        return;
    print_state("expected", want);
    print_state("restored", got);
    fail_msg("the server on the copy does not serve %s", what);
}

static void test_restore_is_the_moment(void **state_)
{
    (void)state_;
    ls_server *s = &g_src;
    assert_int_equal(ls_start(s, settings), 0);
    load(s);
    json_t *at = state(s);
    create_snapshot(s, "moment");

    /* The source moves on, every way it can. */
    append(s, "plain", 0, "p", 30, 5, "later");
    append(s, "users", 0, "k", 5, 5, "d");
    roll(s, "users", 0);
    post_ok(s, "/v1/topics/users/compaction:run", "{}");
    post_ok(s, "/v1/topics/plain/partitions/1/records:delete", "{\"before_offset\":4}");
    send_ok(s, "PUT", "/v1/topics/users/configs/max.message.bytes", "{\"value\":\"600000\"}");
    send_ok(s, "PATCH", "/v1/topics/users", "{\"partitions\":2}");
    send_ok(s, "DELETE", "/v1/topics/plain", NULL);
    assert_int_equal(ls_create_topic(s, "later", 1, NULL), 201);
    json_t *now = state(s);
    assert_false(json_equal(at, now));
    json_decref(now);

    json_t *got = restore(s, "moment");
    expect_same(at, got, "the state the snapshot was taken at");
    json_decref(got);
    json_decref(at);
    assert_int_equal(ls_stop(&g_restored), 0);
}

/* Polls (5 ms, up to 30 s) until the file exists; false if it never did. */
static bool wait_for_file(const char *path)
{
    for (int i = 0; i < 6000 && !eng_fs_exists(path); i++)
        usleep(5000);
    return eng_fs_exists(path);
}

static void test_restore_of_a_snapshot_racing_a_swap(void **state_)
{
    (void)state_;
    ls_server *s = &g_src;
    start_with_fault(s, "compact.before_final=stall@2");
    load(s); /* its compaction is the first hit; the second is the one raced */
    append(s, "users", 0, "k", 5, 5, "d");
    roll(s, "users", 0);
    bg_post bp = {.s = s, .path = "/v1/topics/users/compaction:run"};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, post_in_background, &bp), 0);
    /* The round's cleaned segment 0 is named .swap from the first rename to
     * the last, the stall between them.  (It waited for segment 10's
     * .deleted, which load()'s round had left for the delete delay: now and
     * then the snapshot then came before this round took the partition.) */
    char swap[1400];
    snprintf(swap, sizeof swap, "%s/users-0/00000000000000000000.log.swap", s->dir);
    bool mid_swap = wait_for_file(swap);
    create_snapshot(s, "mid-swap");
    pthread_join(t, NULL);
    assert_int_equal(bp.status, 200);
    if (!mid_swap)
        fprintf(stderr, "# the swap was not seen mid-way; the snapshot followed it\n");
    /* Nothing else changed: the source's state now is the compacted one
     * the snapshot waited for (the cleaner's checkpoint aside: the cleaner
     * records it only after the swap the snapshot waited for, so the
     * snapshot may hold the older one). */
    json_t *after = state(s);
    json_t *got = restore(s, "mid-swap");
    json_object_del(after, "first_dirty_offset");
    json_object_del(got, "first_dirty_offset");
    expect_same(after, got, "the compacted state");
    json_decref(got);
    json_decref(after);
    assert_int_equal(ls_stop(&g_restored), 0);
}

static void test_restore_of_a_snapshot_racing_retention(void **state_)
{
    (void)state_;
    ls_server *s = &g_src;
    /* load()'s retention pass is the first hit; the second is the one raced. */
    start_with_fault(s, "retention.after_start_offset=stall@2");
    load(s);
    post_ok(s, "/v1/topics/plain/partitions/0/records:delete", "{\"before_offset\":25}");
    bg_post bp = {.s = s, .path = "/v1/topics/plain/retention:run"};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, post_in_background, &bp), 0);
    /* The pass renames segment 10 away once its stall ends; the snapshot is
     * asked for once the pass has begun (plain-0 down to one segment). */
    bool begun = false;
    for (int i = 0; i < 6000 && !begun; i++) {
        begun = ls_partition_field(s, "plain", 0, "segment_count") == 1;
        if (!begun)
            usleep(5000);
    }
    create_snapshot(s, "mid-retention");
    pthread_join(t, NULL);
    assert_int_equal(bp.status, 200);
    if (!begun)
        fprintf(stderr, "# the retention pass was not seen mid-way\n");
    json_t *after = state(s);
    json_t *got = restore(s, "mid-retention");
    expect_same(after, got, "the state after the retention pass");
    assert_int_equal(json_integer_value(json_object_get(
                         json_array_get(json_object_get(json_object_get(json_object_get(got, "topics"), "plain"),
                                                        "partitions"),
                                        0),
                         "log_start_offset")),
                     25);
    json_decref(got);
    json_decref(after);
    assert_int_equal(ls_stop(&g_restored), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_restore_is_the_moment, setup, teardown),
        cmocka_unit_test_setup_teardown(test_restore_of_a_snapshot_racing_a_swap, setup, teardown),
        cmocka_unit_test_setup_teardown(test_restore_of_a_snapshot_racing_retention, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
