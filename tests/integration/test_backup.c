/*
 * test_backup.c - README "Backing up a data directory", followed to the
 * letter while the server works, then restored by starting a second server
 * on the copy.
 *
 * What a user expects of a backup, checked on the restored server:
 *   - it starts, and every partition reads from its log start to its high
 *     watermark without an error;
 *   - on a plain topic the records are one contiguous range of what was
 *     acknowledged, each with the value acknowledged at its offset, starting
 *     at or below the log start offset the backup began with and reaching at
 *     least the high watermark it began with;
 *   - on a compacted topic every key holds a value that was acknowledged for
 *     it, never one older than the key's value when the backup began.
 *
 * README's way is a snapshot (POST /v1/admin/snapshots) copied off file by
 * file.  The copy runs the workload between two files, at chosen points, so
 * the races a backup must survive happen on every run: a compaction that
 * folds the second segment into a new first one after the old first one was
 * copied, a retention pass that renames the first segment away before it is
 * copied.  (README's earlier procedure, copying the live data dir file by
 * file and skipping *.deleted, failed these checks: plain-0 restored from 10
 * with a gap, every users key back at its first value.)  Also: a snapshot
 * asked for mid-swap (LOGSTORE_FAULT compact.before_final=stall), one taken
 * while appends and rolls run, the routes and their refusals with
 * snapshot_bytes in /v1/log-dirs and a restart that leaves snapshots/ alone,
 * and the whole-dir copy of a stopped server.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "harness.h"
#include "snapshot_fixture.h"
#include "eng_fs.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define KEYS 10
#define MAX_OFFSETS 4096

/* What the server acknowledged, by topic. */
typedef struct model {
    char *plain[MAX_OFFSETS];  /* plain-0: value acknowledged at each offset */
    long long plain_end;       /* offsets below are acknowledged */
    char *user[MAX_OFFSETS];   /* users-0: "key=value" acknowledged at each offset */
    long long users_end;
} model;

/* What the backup began with: the state a restore must not fall behind. */
typedef struct begin_state {
    long long plain_lso, plain_hw;
    long long key_offset[KEYS]; /* users-0: each key's latest offset */
} begin_state;

static model M;
/* Problems found by a verification: each printed, all reported. */
static int g_problems;
#define PROBLEM(...) (fprintf(stderr, "# " __VA_ARGS__), fputc('\n', stderr), g_problems++)

static void model_free(void)
{
    for (int i = 0; i < MAX_OFFSETS; i++) {
        free(M.plain[i]);
        free(M.user[i]);
    }
    memset(&M, 0, sizeof M);
}

static void post_ok(ls_server *s, const char *path, const char *body)
{
    ls_resp r;
    assert_int_equal(ls_send_json(s, "POST", path, body, &r), 0);
    if (r.status != 200)
        fprintf(stderr, "# POST %s: %ld %s\n", path, r.status, r.body);
    assert_int_equal(r.status, 200);
    ls_resp_free(&r);
}

static void roll(ls_server *s, const char *topic)
{
    char path[128];
    snprintf(path, sizeof path, "/v1/topics/%s/partitions/0/segments:roll", topic);
    post_ok(s, path, "{}");
}

/* Appends n records to plain-0 and records what was acknowledged. */
static void append_plain(ls_server *s, int n)
{
    char body[256];
    for (int i = 0; i < n; i++) {
        char value[64];
        snprintf(value, sizeof value, "p-%lld", M.plain_end);
        snprintf(body, sizeof body, "{\"records\":[{\"key\":\"x\",\"value\":\"%s\"}]}", value);
        ls_resp r;
        assert_int_equal(ls_send_json(s, "POST", "/v1/topics/plain/partitions/0/records", body, &r), 0);
        assert_int_equal(r.status, 200);
        long long off = ls_jint(&r, "base_offset");
        ls_resp_free(&r);
        assert_int_equal(off, M.plain_end);
        assert_true(off < MAX_OFFSETS);
        M.plain[off] = strdup(value);
        M.plain_end = off + 1;
    }
}

/* Appends one value to each of keys [from, to) of users-0, tagged `gen`. */
static void append_users(ls_server *s, int from, int to, const char *gen)
{
    for (int k = from; k < to; k++) {
        char body[256], kv[64];
        snprintf(body, sizeof body, "{\"records\":[{\"key\":\"k%d\",\"value\":\"%s-%d\"}]}", k, gen, k);
        ls_resp r;
        assert_int_equal(ls_send_json(s, "POST", "/v1/topics/users/partitions/0/records", body, &r), 0);
        assert_int_equal(r.status, 200);
        long long off = ls_jint(&r, "base_offset");
        ls_resp_free(&r);
        assert_int_equal(off, M.users_end);
        assert_true(off < MAX_OFFSETS);
        snprintf(kv, sizeof kv, "k%d=%s-%d", k, gen, k);
        M.user[off] = strdup(kv);
        M.users_end = off + 1;
    }
}

static void partition_offsets(ls_server *s, const char *topic, long long *lso, long long *hw)
{
    char path[128];
    snprintf(path, sizeof path, "/v1/topics/%s/partitions/0", topic);
    ls_resp r;
    assert_int_equal(ls_get(s, path, &r), 0);
    assert_int_equal(r.status, 200);
    *lso = ls_jint(&r, "log_start_offset");
    *hw = ls_jint(&r, "high_watermark");
    ls_resp_free(&r);
}

static void take_begin_state(ls_server *s, begin_state *b)
{
    partition_offsets(s, "plain", &b->plain_lso, &b->plain_hw);
    for (int k = 0; k < KEYS; k++)
        b->key_offset[k] = -1;
    for (long long o = 0; o < M.users_end; o++) {
        int k = atoi(M.user[o] + 1);
        b->key_offset[k] = o;
    }
}

/* Calls fn on every record of topic-0 from its log start to its high
 * watermark, paging with next_offset; every page must answer 200. */
static void read_all(ls_server *s, const char *topic, long long *lso_out, long long *hw_out,
                     void (*fn)(long long off, const char *key, const char *value, void *ctx),
                     void *ctx)
{
    long long lso, hw;
    partition_offsets(s, topic, &lso, &hw);
    long long next = lso;
    while (next < hw) {
        char path[160];
        snprintf(path, sizeof path, "/v1/topics/%s/partitions/0/records?offset=%lld&max_records=500",
                 topic, next);
        ls_resp r;
        assert_int_equal(ls_get(s, path, &r), 0);
        if (r.status != 200)
            fprintf(stderr, "# GET %s: %ld %s\n", path, r.status, r.body);
        assert_int_equal(r.status, 200);
        size_t i;
        json_t *rec;
        json_array_foreach(ls_jget(&r, "records"), i, rec) {
            json_t *v = json_object_get(rec, "value");
            fn((long long)json_integer_value(json_object_get(rec, "offset")),
               json_string_value(json_object_get(rec, "key")), json_is_string(v) ? json_string_value(v) : NULL,
               ctx);
        }
        long long nn = ls_jint(&r, "next_offset");
        ls_resp_free(&r);
        assert_true(nn > next);
        next = nn;
    }
    *lso_out = lso;
    *hw_out = hw;
}

typedef struct plain_check {
    long long expect; /* the next offset a contiguous range must hold */
    bool first;
} plain_check;

static void check_plain_record(long long off, const char *key, const char *value, void *ctx)
{
    plain_check *c = ctx;
    (void)key;
    if (!c->first && off != c->expect)
        PROBLEM("plain-0: offset %lld follows %lld: records missing in the middle", off, c->expect - 1);
    c->first = false;
    c->expect = off + 1;
    assert_true(off < M.plain_end);
    if (!value || strcmp(value, M.plain[off]))
        PROBLEM("plain-0: offset %lld holds '%s', '%s' was acknowledged", off, value ? value : "null",
                 M.plain[off]);
}

typedef struct users_check {
    long long latest[KEYS];
} users_check;

static void check_user_record(long long off, const char *key, const char *value, void *ctx)
{
    users_check *c = ctx;
    char kv[64];
    snprintf(kv, sizeof kv, "%s=%s", key, value ? value : "null");
    assert_true(off < M.users_end);
    if (!M.user[off] || strcmp(kv, M.user[off]))
        PROBLEM("users-0: offset %lld holds %s, %s was acknowledged", off, kv,
                 M.user[off] ? M.user[off] : "nothing");
    int k = atoi(key + 1);
    assert_true(k >= 0 && k < KEYS);
    c->latest[k] = off;
}

/* The checks of the file's header comment, on a restored server. */
static void verify_restore(ls_server *r, const begin_state *b)
{
    plain_check pc = {.first = true};
    long long lso, hw;
    g_problems = 0;
    read_all(r, "plain", &lso, &hw, check_plain_record, &pc);
    if (lso > b->plain_lso)
        PROBLEM("plain-0: the restore starts at %lld, the backup began with %lld", lso, b->plain_lso);
    if (hw < b->plain_hw)
        PROBLEM("plain-0: the restore ends at %lld, the backup began with %lld", hw, b->plain_hw);
    if (!pc.first && pc.expect != hw)
        PROBLEM("plain-0: the records end at %lld, the high watermark is %lld", pc.expect, hw);

    users_check uc;
    for (int k = 0; k < KEYS; k++)
        uc.latest[k] = -1;
    read_all(r, "users", &lso, &hw, check_user_record, &uc);
    for (int k = 0; k < KEYS; k++)
        if (uc.latest[k] < b->key_offset[k])
            PROBLEM("users-0: key k%d reads %s (offset %lld); it was %s (offset %lld) when the backup began",
                     k, uc.latest[k] >= 0 ? M.user[uc.latest[k]] : "nothing", uc.latest[k],
                     M.user[b->key_offset[k]], b->key_offset[k]);
    if (g_problems)
        fail_msg("%d problems with the restored copy", g_problems);
}

/* ---- copying ------------------------------------------------------------- */

static int copy_file(const char *from, const char *to)
{
    size_t len;
    void *data = ls_read_file(from, &len);
    if (!data)
        return -1;
    int fd = open(to, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, data, len), (ssize_t)len);
    close(fd);
    free(data);
    return 0;
}

static bool ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && !strcmp(s + n - m, suffix);
}

/* Sorted names in dir (malloc'd vector, NULL-terminated). */
static char **list_dir(const char *dir)
{
    struct dirent **ents;
    int n = scandir(dir, &ents, NULL, alphasort);
    assert_true(n >= 0);
    char **v = calloc((size_t)n + 1, sizeof *v);
    int k = 0;
    for (int i = 0; i < n; i++) {
        if (strcmp(ents[i]->d_name, ".") && strcmp(ents[i]->d_name, ".."))
            v[k++] = strdup(ents[i]->d_name);
        free(ents[i]);
    }
    free(ents);
    return v;
}

static void strv_free(char **v)
{
    for (size_t i = 0; v && v[i]; i++)
        free(v[i]);
    free(v);
}

/* A point between two files of the copy where the workload runs. */
typedef void (*copy_hook)(const char *partition_dir, const char *file, void *ctx);

/* Copies the data dir `src` into `dst` file by file, in name order, as cp -r
 * or rsync would, leaving out `.lock` and `snapshots/`.  In a partition dir,
 * `before` runs before each segment file is copied and `after` after it. */
static void copy_tree(const char *src, const char *dst, copy_hook before, copy_hook after, void *ctx)
{
    assert_int_equal(eng_fs_mkdir(dst), 0);
    char **top = list_dir(src);
    for (size_t i = 0; top[i]; i++) {
        char a[1024], b[1024];
        snprintf(a, sizeof a, "%s/%s", src, top[i]);
        snprintf(b, sizeof b, "%s/%s", dst, top[i]);
        struct stat st;
        if (!strcmp(top[i], ".lock") || !strcmp(top[i], "snapshots") || lstat(a, &st) < 0)
            continue;
        if (!S_ISDIR(st.st_mode)) {
            assert_int_equal(copy_file(a, b), 0);
            continue;
        }
        assert_int_equal(eng_fs_mkdir(b), 0);
        char **files = list_dir(a);
        for (size_t k = 0; files[k]; k++) {
            char from[1400], to[1400];
            snprintf(from, sizeof from, "%s/%s", a, files[k]);
            snprintf(to, sizeof to, "%s/%s", b, files[k]);
            const char *rest;
            bool segment = eng_fs_segment_name_base(files[k], &rest) >= 0;
            if (segment && before)
                before(top[i], files[k], ctx);
            if (copy_file(from, to))
                fail_msg("%s went while it was copied", from);
            if (segment && after)
                after(top[i], files[k], ctx);
        }
        strv_free(files);
    }
    strv_free(top);
}

/* ---- the workload ---------------------------------------------------------- */

/* plain-0: three segments of 10; users-0: k0..k9 twice (two segments), then
 * k0..k4 again in the active segment.  Compaction then folds users' second
 * segment into a new first one; retention can delete plain's first. */
static void load(ls_server *s)
{
    assert_int_equal(ls_create_topic(s, "plain", 1, NULL), 201);
    assert_int_equal(ls_create_topic(s, "users", 1,
                                     "{\"cleanup.policy\":\"compact\",\"min.cleanable.dirty.ratio\":\"0.01\"}"),
                     201);
    for (int i = 0; i < 3; i++) {
        append_plain(s, 10);
        if (i < 2)
            roll(s, "plain");
    }
    append_users(s, 0, KEYS, "a");
    roll(s, "users");
    append_users(s, 0, KEYS, "b");
    roll(s, "users");
    append_users(s, 0, KEYS / 2, "c");
}

typedef struct race {
    ls_server *s;
    bool compacted, retained;
} race;

/* Runs the workload in the middle of the copy: once users' first segment
 * is copied, a compaction that folds the second into a new first one; before
 * plain's first segment is copied, delete-records and a retention pass; and
 * appends and rolls on both topics. */
static void race_after(const char *pdir, const char *file, void *ctx)
{
    race *rc = ctx;
    if (rc->compacted || strcmp(pdir, "users-0") || !ends_with(file, ".log"))
        return;
    rc->compacted = true;
    post_ok(rc->s, "/v1/topics/users/compaction:run", "{}");
    append_users(rc->s, KEYS / 2, KEYS, "d");
    roll(rc->s, "users");
}

static void race_before(const char *pdir, const char *file, void *ctx)
{
    race *rc = ctx;
    if (rc->retained || strcmp(pdir, "plain-0") || !ends_with(file, ".index"))
        return;
    rc->retained = true;
    post_ok(rc->s, "/v1/topics/plain/partitions/0/records:delete", "{\"before_offset\":10}");
    post_ok(rc->s, "/v1/topics/plain/retention:run", "{}");
    append_plain(rc->s, 5);
    roll(rc->s, "plain");
}

/* g_src, the server a test works on, and g_restored, the one started on
 * its backup (snapshot_fixture.h); the teardown stops both (a failed check
 * leaves them running) and removes the first one's temporary dir, which
 * holds the copy. */
static int setup(void **state)
{
    (void)state;
    model_free();
    snap_fixture_reset();
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    snap_fixture_cleanup();
    model_free();
    return 0;
}

static void restore_and_verify(const char *copy, const begin_state *b)
{
    memset(&g_restored, 0, sizeof g_restored);
    if (ls_start_dir(&g_restored, copy, settings, true))
        fail_msg("a server on the copy did not start");
    verify_restore(&g_restored, b);
    assert_int_equal(ls_stop(&g_restored), 0);
}

static void snapshot_dir(const ls_server *s, const char *name, char *buf, size_t len)
{
    snprintf(buf, len, "%s/snapshots/%s", s->dir, name);
}

static void create_snapshot(ls_server *s, const char *name, ls_resp *out)
{
    char body[128];
    snprintf(body, sizeof body, "{\"name\":\"%s\"}", name);
    assert_int_equal(ls_send_json(s, "POST", "/v1/admin/snapshots", body, out), 0);
    if (out->status != 201)
        fprintf(stderr, "# POST /v1/admin/snapshots: %ld %s\n", out->status, out->body);
    assert_int_equal(out->status, 201);
}

/* README's way on a running server: a snapshot, then its files copied off
 * one by one while the workload races the copy as above (compaction folding
 * users' second segment into a new first one, delete-records and retention
 * removing plain's first segment, appends and rolls). */
static void test_snapshot_copied_while_server_works(void **state)
{
    (void)state;
    ls_server *s = &g_src;
    assert_int_equal(ls_start(s, settings), 0);
    load(s);
    begin_state b;
    take_begin_state(s, &b);
    ls_resp r;
    create_snapshot(s, "nightly-1", &r);
    ls_resp_free(&r);
    char snap[1400], copy[1500];
    snapshot_dir(s, "nightly-1", snap, sizeof snap);
    snprintf(copy, sizeof copy, "%s.copy", s->dir);
    race rc = {.s = s};
    copy_tree(snap, copy, race_before, race_after, &rc);
    assert_true(rc.compacted && rc.retained);
    restore_and_verify(copy, &b);
    /* Nothing was appended while the snapshot was taken: it is exactly
     * the state it began with. */
    long long lso, hw;
    assert_int_equal(ls_start_dir(&g_restored, copy, settings, true), 0);
    partition_offsets(&g_restored, "plain", &lso, &hw);
    assert_int_equal(lso, b.plain_lso);
    assert_int_equal(hw, b.plain_hw);
    assert_int_equal(ls_stop(&g_restored), 0);
}

static bool name_ends_with_any(const char *name)
{
    return ends_with(name, ".deleted") || ends_with(name, ".swap") || ends_with(name, ".cleaned") ||
           ends_with(name, ".tmp");
}

/* A snapshot asked for in the middle of a cleaner swap (stalled after the
 * old segments became .deleted and before the .swap lost its suffix) is
 * taken whole: after the swap, never from its half-renamed files. */
static void test_snapshot_during_swap(void **state)
{
    (void)state;
    ls_server *s = &g_src;
    setenv("LOGSTORE_FAULT", "compact.before_final=stall", 1);
    int started = ls_start(s, settings);
    unsetenv("LOGSTORE_FAULT");
    assert_int_equal(started, 0);
    load(s);
    begin_state b;
    take_begin_state(s, &b);
    bg_post bp = {.s = s, .path = "/v1/topics/users/compaction:run"};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, post_in_background, &bp), 0);
    char deleted[1400];
    snprintf(deleted, sizeof deleted, "%s/users-0/00000000000000000010.log.deleted", s->dir);
    for (int i = 0; i < 6000 && !eng_fs_exists(deleted); i++)
        usleep(5000);
    if (!eng_fs_exists(deleted))
        fprintf(stderr, "# the swap was not seen mid-way; the snapshot follows it\n");
    ls_resp r;
    create_snapshot(s, "mid-swap", &r);
    ls_resp_free(&r);
    pthread_join(t, NULL);
    assert_int_equal(bp.status, 200);

    char snap[1400], copy[1500];
    snapshot_dir(s, "mid-swap", snap, sizeof snap);
    char part[1500];
    snprintf(part, sizeof part, "%s/users-0", snap);
    char **files = list_dir(part);
    for (size_t i = 0; files[i]; i++)
        if (name_ends_with_any(files[i]))
            fail_msg("the snapshot holds %s", files[i]);
    strv_free(files);
    snprintf(copy, sizeof copy, "%s.copy", s->dir);
    copy_tree(snap, copy, NULL, NULL, NULL);
    restore_and_verify(copy, &b);
}

typedef struct appender {
    ls_server *s;
    _Atomic bool stop;
    _Atomic int acked;
    int failed;
} appender;

/* Appends to plain-0 until told to stop, rolling every 40 records, and
 * records what was acknowledged in M (the main thread keeps off M
 * meanwhile).  No cmocka assertion here: they may not run off the main
 * thread; failures are counted. */
static void *append_loop(void *arg)
{
    appender *a = arg;
    while (!atomic_load(&a->stop) && M.plain_end < MAX_OFFSETS - 1) {
        char value[64], body[256];
        snprintf(value, sizeof value, "q-%lld", M.plain_end);
        snprintf(body, sizeof body, "{\"records\":[{\"key\":\"x\",\"value\":\"%s\"}]}", value);
        ls_resp r;
        if (ls_send_json(a->s, "POST", "/v1/topics/plain/partitions/0/records", body, &r)) {
            a->failed++;
            break;
        }
        long long off = r.status == 200 ? ls_jint(&r, "base_offset") : -1;
        ls_resp_free(&r);
        if (off != M.plain_end) {
            a->failed++;
            break;
        }
        M.plain[off] = strdup(value);
        M.plain_end = off + 1;
        int n = atomic_fetch_add(&a->acked, 1) + 1;
        if (n % 40 == 0 &&
            (ls_send_json(a->s, "POST", "/v1/topics/plain/partitions/0/segments:roll", "{}", &r) == 0))
            ls_resp_free(&r);
    }
    return NULL;
}

/* A snapshot taken while appends and rolls run on a partition holds a
 * prefix of what was acknowledged, whole batches only, and at least what
 * was acknowledged before it was asked for. */
static void test_snapshot_while_appending(void **state)
{
    (void)state;
    ls_server *s = &g_src;
    assert_int_equal(ls_start(s, settings), 0);
    load(s);
    appender a = {.s = s};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, append_loop, &a), 0);
    for (int i = 0; i < 12000 && atomic_load(&a.acked) < 30 && !a.failed; i++)
        usleep(5000);
    begin_state b;
    take_begin_state(s, &b); /* reads M.user only: the appender owns M.plain */
    ls_resp r;
    create_snapshot(s, "busy-1", &r);
    ls_resp_free(&r);
    int after = atomic_load(&a.acked);
    for (int i = 0; i < 12000 && atomic_load(&a.acked) < after + 30 && !a.failed; i++)
        usleep(5000);
    atomic_store(&a.stop, true);
    pthread_join(t, NULL);
    assert_int_equal(a.failed, 0);
    assert_true(b.plain_hw >= 60);

    char snap[1400], copy[1500];
    snapshot_dir(s, "busy-1", snap, sizeof snap);
    snprintf(copy, sizeof copy, "%s.copy", s->dir);
    copy_tree(snap, copy, NULL, NULL, NULL);
    restore_and_verify(copy, &b);
}

/* The snapshots' disk use is measured every 200 ms: what retention frees
 * shows in it at the job's next run (README "Snapshots"). */
static const char *const settings_quick_delete[] = {"log.cleaner.threads=0", "log.segment.delete.delay.ms=0",
                                                    "log.retention.check.interval.ms=600000",
                                                    "snapshot.usage.check.interval.ms=200", NULL};

static long long snapshot_bytes(ls_server *s)
{
    ls_resp r;
    assert_int_equal(ls_get(s, "/v1/log-dirs", &r), 0);
    assert_int_equal(r.status, 200);
    long long v = ls_jint(&r, "log_dirs.0.snapshot_bytes");
    ls_resp_free(&r);
    return v;
}

/* The routes: take, list, refuse, count on disk, survive a restart, remove. */
static void test_snapshot_routes(void **state)
{
    (void)state;
    ls_server *s = &g_src;
    assert_int_equal(ls_start(s, settings_quick_delete), 0);
    load(s);

    ls_resp r;
    assert_int_equal(ls_get(s, "/v1/admin/snapshots", &r), 0);
    assert_int_equal(r.status, 200);
    assert_int_equal(json_array_size(ls_jget(&r, "snapshots")), 0);
    ls_resp_free(&r);
    assert_int_equal(snapshot_bytes(s), 0);

    create_snapshot(s, "nightly-1", &r);
    assert_string_equal(ls_header(&r, "Location"), "/v1/admin/snapshots/nightly-1");
    assert_string_equal(ls_jstr(&r, "name"), "nightly-1");
    assert_int_equal(ls_jint(&r, "topics"), 2);
    assert_int_equal(ls_jint(&r, "partitions"), 2);
    long long size = ls_jint(&r, "size_bytes"), unshared = ls_jint(&r, "unshared_bytes");
    char path[1400];
    snapshot_dir(s, "nightly-1", path, sizeof path);
    assert_string_equal(ls_jstr(&r, "path"), path);
    ls_resp_free(&r);
    assert_true(size > 0 && unshared > 0 && unshared < size);
    assert_int_equal(snapshot_bytes(s), unshared);

    assert_int_equal(ls_expect_error(s, "POST", "/v1/admin/snapshots", "{\"name\":\"nightly-1\"}", 409,
                                     "snapshot_exists"), 0);
    const char *bad[] = {"{\"name\":\".hidden\"}", "{\"name\":\"a/b\"}", "{\"name\":\"\"}",
                         "{\"name\":\"..\"}", NULL};
    for (int i = 0; bad[i]; i++)
        assert_int_equal(ls_expect_error(s, "POST", "/v1/admin/snapshots", bad[i], 422,
                                         "invalid_snapshot_name"), 0);
    assert_int_equal(ls_expect_error(s, "POST", "/v1/admin/snapshots", "{}", 400, "invalid_request"), 0);
    assert_int_equal(ls_expect_error(s, "POST", "/v1/admin/snapshots", "{\"name\":\"x\",\"at\":1}", 400,
                                     "invalid_request"), 0);
    assert_int_equal(ls_expect_error(s, "DELETE", "/v1/admin/snapshots/nope", NULL, 404,
                                     "snapshot_not_found"), 0);
    assert_int_equal(ls_expect_error(s, "DELETE", "/v1/admin/snapshots/.partial-x", NULL, 422,
                                     "invalid_snapshot_name"), 0);

    /* Retention deletes plain's first segment: from then on only the
     * snapshot holds it, and the disk use says so. */
    char seg[1500];
    snprintf(seg, sizeof seg, "%s/plain-0/00000000000000000000.log", path);
    long long seg_bytes = ls_file_size(seg);
    assert_true(seg_bytes > 0);
    post_ok(s, "/v1/topics/plain/partitions/0/records:delete", "{\"before_offset\":10}");
    post_ok(s, "/v1/topics/plain/retention:run", "{}");
    long long now = 0;
    for (int i = 0; i < 1200 && (now = snapshot_bytes(s)) < unshared + seg_bytes; i++)
        usleep(25000);
    assert_int_equal(now, unshared + seg_bytes);
    assert_int_equal(ls_get(s, "/v1/admin/snapshots", &r), 0);
    assert_int_equal(ls_jint(&r, "snapshots.0.unshared_bytes"), unshared + seg_bytes);
    ls_resp_free(&r);

    /* A restart loads the data dir as before and leaves the snapshot be. */
    assert_int_equal(ls_stop(s), 0);
    assert_int_equal(ls_restart(s, settings_quick_delete), 0);
    size_t len;
    char *log = ls_read_file(s->log_path, &len);
    assert_non_null(log);
    assert_null(strstr(log, "stray"));
    free(log);
    assert_int_equal(ls_get(s, "/v1/admin/snapshots", &r), 0);
    assert_int_equal(json_array_size(ls_jget(&r, "snapshots")), 1);
    assert_string_equal(ls_jstr(&r, "snapshots.0.name"), "nightly-1");
    ls_resp_free(&r);

    assert_int_equal(ls_http(s, "DELETE", "/v1/admin/snapshots/nightly-1", NULL, NULL, 0, NULL, &r), 0);
    assert_int_equal(r.status, 204);
    ls_resp_free(&r);
    assert_false(eng_fs_exists(path));
    assert_int_equal(snapshot_bytes(s), 0);
    assert_int_equal(ls_expect_error(s, "DELETE", "/v1/admin/snapshots/nightly-1", NULL, 404,
                                     "snapshot_not_found"), 0);
}

/* A stopped server's whole dir, copied as it is, is a backup too. */
static void test_copy_of_stopped_server(void **state)
{
    (void)state;
    ls_server *s = &g_src;
    assert_int_equal(ls_start(s, settings), 0);
    load(s);
    post_ok(s, "/v1/topics/users/compaction:run", "{}");
    begin_state b;
    take_begin_state(s, &b);
    assert_int_equal(ls_stop(s), 0);
    char copy[1400];
    snprintf(copy, sizeof copy, "%s.copy", s->dir);
    copy_tree(s->dir, copy, NULL, NULL, NULL);
    restore_and_verify(copy, &b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_snapshot_copied_while_server_works, setup, teardown),
        cmocka_unit_test_setup_teardown(test_snapshot_during_swap, setup, teardown),
        cmocka_unit_test_setup_teardown(test_snapshot_while_appending, setup, teardown),
        cmocka_unit_test_setup_teardown(test_snapshot_routes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_copy_of_stopped_server, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
