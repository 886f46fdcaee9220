/*
 * test_faults.c - every fault point of the test build (engine/eng_fault.h),
 * driven through the real server: start it with LOGSTORE_FAULT set, bring it
 * to the point, then restart it without the fault and check the outcome with
 * the independent checker of crash_check.h (own CRC-32C and batch parser)
 * plus the API.
 *
 *   segment.append.partial  exit: a torn tail that recovery truncates
 *                           (bytes_truncated > 0), earlier batches intact;
 *                           enospc: 507, the .log byte-identical, the next
 *                           append takes the same offset; eio: 503, the dir
 *                           offline (ready 503 "offline"), nothing partial,
 *                           everything acknowledged there after a restart
 *   segment.append.index    exit: the whole batch stays (nothing truncated);
 *                           enospc: 507 and the .log unchanged
 *   partition.fsync         eio with flush.messages=1: the append fails, the
 *                           high watermark does not move, the dir goes
 *                           offline; exit: acknowledged records survive
 *   compact.before_swap     old data after the restart, no .cleaned left
 *   compact.after_swap      exit and eio: the restart completes the swap
 *   compact.before_final    the restart completes the swap (.swap + .deleted)
 *   cleaner.before_checkpoint  compacted data; the next clean is harmless
 *   fs.write_atomic.mid     exit in a checkpoint job: the old checkpoints
 *                           intact, the torn .tmp ignored and removed;
 *                           enospc on topic creation: 507, nothing created
 *   retention.after_start_offset  the start offset is only as durable as its
 *                           checkpoint (see the test)
 *   roll.after_create       both segments load, the unsealed one recovered
 *   roll.index_sync         eio and enospc: the append that rolls fails 503,
 *                           the dir offline, the new segment loads at restart
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "crash_check.h"
#include "harness.h"

#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define CHECK_ERR(r, st, code) assert_int_equal(ls_check_error(&(r), (st), (code)), 0)
#define MAXR 512

/* What the test was told: offset, key, value of every acknowledged record. */
typedef struct model {
    int n;
    int64_t off[MAXR];
    char key[MAXR][16];
    char val[MAXR][64];
} model;

static model M;
static ls_server *g_live; /* the server of the running test, for the teardown */

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* Starts (or, restart, restarts) s with LOGSTORE_FAULT=fault for the child only. */
static void start(ls_server *s, const char *fault, const char *const *extra, bool restart)
{
    if (fault)
        setenv("LOGSTORE_FAULT", fault, 1);
    g_live = s;
    int rc = restart ? ls_restart(s, extra) : ls_start(s, extra);
    unsetenv("LOGSTORE_FAULT");
    if (rc)
        fail_msg("the server did not start (fault %s; log %s)", fault ? fault : "none", s->log_path);
}

/* Waits for the server to end on its own; its exit status. */
static int wait_exit(ls_server *s)
{
    for (int i = 0; i < 800; i++) {
        int st;
        if (waitpid(s->pid, &st, WNOHANG) == s->pid) {
            s->pid = 0;
            return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        }
        sleep_ms(25);
    }
    return -1;
}

static void pdir(const ls_server *s, const char *topic, char *buf, size_t len)
{
    snprintf(buf, len, "%s/%s-0", s->dir, topic);
}

/* One batch of n records ("<tag>-<i>" keys unless keys is given) to topic-0;
 * returns the status; on 200 the records join the model. */
static long append(ls_server *s, const char *topic, int n, const char *tag, ls_resp *out)
{
    char body[8192], keys[32][16], vals[32][64];
    size_t off = (size_t)snprintf(body, sizeof body, "{\"records\":[");
    for (int i = 0; i < n; i++) {
        snprintf(keys[i], sizeof keys[i], "%s-%d", tag, i);
        snprintf(vals[i], sizeof vals[i], "value-%s-%d-%d-0123456789abcdefghij", tag, i, M.n + i);
        off += (size_t)snprintf(body + off, sizeof body - off, "%s{\"key\":\"%s\",\"value\":\"%s\"}",
                                i ? "," : "", keys[i], vals[i]);
    }
    snprintf(body + off, sizeof body - off, "]}");
    char path[128];
    snprintf(path, sizeof path, "/v1/topics/%s/partitions/0/records", topic);
    ls_resp r;
    if (ls_post(s, path, body, &r))
        return 0; /* no answer: the server went away */
    long st = r.status;
    if (st == 200) {
        long long base = ls_jint(&r, "base_offset");
        for (int i = 0; i < n && M.n < MAXR; i++, M.n++) {
            M.off[M.n] = base + i;
            snprintf(M.key[M.n], sizeof M.key[M.n], "%s", keys[i]);
            snprintf(M.val[M.n], sizeof M.val[M.n], "%s", vals[i]);
        }
    }
    if (out)
        *out = r;
    else
        ls_resp_free(&r);
    return st;
}

static void append_ok(ls_server *s, const char *topic, int n, const char *tag)
{
    assert_int_equal(append(s, topic, n, tag, NULL), 200);
}

/* The partition passes the checker and holds every record of the model
 * whose offset is at least from (with its key and value); returns the
 * parsed partition (cc_part_free it). */
static cc_part check_files(const ls_server *s, const char *topic, int64_t from)
{
    char dir[512];
    pdir(s, topic, dir, sizeof dir);
    cc_part p;
    if (cc_check_partition(dir, &p))
        fail_msg("%s: %s", dir, p.err);
    for (int i = 0; i < M.n; i++) {
        if (M.off[i] < from)
            continue;
        const cc_record *r = cc_find(&p, M.off[i]);
        if (!r || !r->key || !r->value || strcmp(r->key, M.key[i]) || strcmp(r->value, M.val[i]))
            fail_msg("%s: acknowledged offset %lld (%s) is %s", dir, (long long)M.off[i], M.key[i],
                     r ? "different" : "missing");
    }
    return p;
}

static void check_no_leftovers(const ls_server *s)
{
    char left[2048] = "";
    if (cc_find_leftovers(s->dir, left, sizeof left))
        fail_msg("leftover files: %s", left);
}

/* How many files in topic-0's dir end with suffix. */
static int count_suffix(const ls_server *s, const char *topic, const char *suffix)
{
    char dir[512];
    pdir(s, topic, dir, sizeof dir);
    DIR *d = opendir(dir);
    int n = 0;
    struct dirent *e;
    size_t sl = strlen(suffix);
    while (d && (e = readdir(d))) {
        size_t l = strlen(e->d_name);
        n += l > sl && !strcmp(e->d_name + l - sl, suffix);
    }
    if (d)
        closedir(d);
    return n;
}

static long long seg_file_size(const ls_server *s, const char *topic, long long base, const char *ext)
{
    char path[700];
    snprintf(path, sizeof path, "%s/%s-0/%020lld%s", s->dir, topic, base, ext);
    return ls_file_size(path);
}

static long ready_status(ls_server *s, char *status, size_t len)
{
    ls_resp r;
    assert_int_equal(ls_get(s, "/health/ready", &r), 0);
    long st = r.status;
    snprintf(status, len, "%s", ls_jstr(&r, "status") ? ls_jstr(&r, "status") : "");
    ls_resp_free(&r);
    return st;
}

static long long startup(ls_server *s, const char *field)
{
    ls_resp r;
    char path[64];
    snprintf(path, sizeof path, "startup.%s", field);
    assert_int_equal(ls_get(s, "/v1/info", &r), 0);
    json_t *v = ls_jget(&r, path);
    long long x = json_is_boolean(v) ? json_is_true(v) : json_is_integer(v) ? json_integer_value(v) : -1;
    ls_resp_free(&r);
    return x;
}

static long long part_field(ls_server *s, const char *topic, const char *field)
{
    char path[128];
    snprintf(path, sizeof path, "/v1/topics/%s/partitions/0", topic);
    ls_resp r;
    assert_int_equal(ls_get(s, path, &r), 0);
    long long v = ls_jint(&r, field);
    ls_resp_free(&r);
    return v;
}

static void roll(ls_server *s, const char *topic)
{
    char path[128];
    snprintf(path, sizeof path, "/v1/topics/%s/partitions/0/segments:roll", topic);
    ls_resp r;
    assert_int_equal(ls_post(s, path, "", &r), 0);
    assert_int_equal(r.status, 200);
    ls_resp_free(&r);
}

static int setup(void **state)
{
    (void)state;
    memset(&M, 0, sizeof M);
    return 0;
}

/* A failed assertion leaves the test early: stop its server and remove its
 * dir (ls_cleanup kills a live one; after a normal end both are gone). */
static int teardown(void **state)
{
    (void)state;
    if (g_live)
        ls_cleanup(g_live);
    g_live = NULL;
    return 0;
}

static const char *const NO_CLEANER[] = {"log.cleaner.threads=0", NULL};
#define PLAIN "{\"index.interval.bytes\":\"100\"}"
#define DURABLE "{\"index.interval.bytes\":\"100\",\"flush.messages\":\"1\"}"
#define COMPACT "{\"cleanup.policy\":\"compact\",\"min.cleanable.dirty.ratio\":\"0.01\"," \
                "\"index.interval.bytes\":\"100\"}"

/* ---- segment.append.partial ------------------------------------------------------ */

static void test_append_partial_exit(void **state)
{
    (void)state;
    static ls_server s; /* static: the teardown finds it after a failed assertion */
    start(&s, "segment.append.partial=exit@6", NULL, false);
    assert_int_equal(ls_create_topic(&s, "t", 1, PLAIN), 201);
    for (int b = 0; b < 5; b++)
        append_ok(&s, "t", 8, "a");
    long long before = seg_file_size(&s, "t", 0, ".log");
    assert_int_equal(append(&s, "t", 8, "torn", NULL), 0); /* the server dies in it */
    assert_int_equal(wait_exit(&s), 86);
    /* Half a batch is on disk: a torn tail. */
    long long torn = seg_file_size(&s, "t", 0, ".log");
    assert_true(torn > before);
    start(&s, NULL, NULL, true);
    assert_int_equal(startup(&s, "clean_shutdown"), 0);
    assert_int_equal(startup(&s, "bytes_truncated"), torn - before);
    assert_int_equal(seg_file_size(&s, "t", 0, ".log"), before);
    cc_part p = check_files(&s, "t", 0);
    assert_int_equal(p.next_offset, 40);
    cc_part_free(&p);
    assert_int_equal(part_field(&s, "t", "high_watermark"), 40);
    ls_resp r;
    assert_int_equal(append(&s, "t", 3, "after", &r), 200); /* the torn offsets are reused */
    assert_int_equal(ls_jint(&r, "base_offset"), 40);
    ls_resp_free(&r);
    p = check_files(&s, "t", 0);
    cc_part_free(&p);
    assert_int_equal(ls_stop(&s), 0);
    ls_cleanup(&s);
}

/* A refused append (enospc at point) leaves the .log byte-identical, the dir
 * online, and the next append takes the same offset. */
static void refused_append_leaves_nothing(const char *fault)
{
    static ls_server s; /* static: the teardown finds it after a failed assertion */
    start(&s, fault, NULL, false);
    assert_int_equal(ls_create_topic(&s, "t", 1, PLAIN), 201);
    for (int b = 0; b < 4; b++)
        append_ok(&s, "t", 6, "a");
    char path[600];
    snprintf(path, sizeof path, "%s/t-0/%020d.log", s.dir, 0);
    size_t len0, len1;
    char *before = ls_read_file(path, &len0);
    assert_non_null(before);
    ls_resp r;
    assert_int_equal(append(&s, "t", 6, "refused", &r), 507);
    CHECK_ERR(r, 507, "disk_full");
    ls_resp_free(&r);
    char *after = ls_read_file(path, &len1);
    assert_non_null(after);
    assert_int_equal(len0, len1);
    assert_memory_equal(before, after, len0);
    free(before);
    free(after);
    char st[32];
    assert_int_equal(ready_status(&s, st, sizeof st), 200);
    assert_int_equal(append(&s, "t", 6, "next", &r), 200);
    assert_int_equal(ls_jint(&r, "base_offset"), 24);
    ls_resp_free(&r);
    cc_part p = check_files(&s, "t", 0);
    assert_int_equal(p.next_offset, 30);
    cc_part_free(&p);
    assert_int_equal(ls_stop(&s), 0);
    start(&s, NULL, NULL, true);
    assert_int_equal(startup(&s, "clean_shutdown"), 1);
    p = check_files(&s, "t", 0);
    cc_part_free(&p);
    assert_int_equal(ls_stop(&s), 0);
    ls_cleanup(&s);
}

static void test_append_partial_enospc(void **state)
{
    (void)state;
    refused_append_leaves_nothing("segment.append.partial=enospc@5");
}

static void test_append_index_enospc(void **state)
{
    (void)state;
    refused_append_leaves_nothing("segment.append.index=enospc@5");
}

/* An I/O error on the append path takes the log dir offline: 503 on appends,
 * ready 503 "offline"; after a restart everything acknowledged is there. */
static void offline_after(const char *fault, const char *configs)
{
    static ls_server s; /* static: the teardown finds it after a failed assertion */
    start(&s, fault, NULL, false);
    assert_int_equal(ls_create_topic(&s, "t", 1, configs), 201);
    for (int b = 0; b < 4; b++)
        append_ok(&s, "t", 5, "a");
    long long size = seg_file_size(&s, "t", 0, ".log");
    ls_resp r;
    assert_int_equal(append(&s, "t", 5, "failed", &r), 503);
    CHECK_ERR(r, 503, "log_dir_offline");
    ls_resp_free(&r);
    char st[32];
    assert_int_equal(ready_status(&s, st, sizeof st), 503);
    assert_string_equal(st, "offline");
    assert_int_equal(append(&s, "t", 5, "refused", &r), 503);
    CHECK_ERR(r, 503, "log_dir_offline");
    ls_resp_free(&r);
    /* Only what was acknowledged is visible. */
    assert_int_equal(part_field(&s, "t", "high_watermark"), 20);
    assert_int_equal(ls_get(&s, "/v1/topics/t/partitions/0/records?offset=0", &r), 0);
    assert_int_equal(r.status, 200);
    assert_int_equal(ls_jint(&r, "next_offset"), 20);
    ls_resp_free(&r);
    if (strstr(fault, "segment.append")) /* the write failed: nothing partial stays */
        assert_int_equal(seg_file_size(&s, "t", 0, ".log"), size);
    assert_int_equal(ls_stop(&s), 0);
    start(&s, NULL, NULL, true);
    /* An offline dir gets no clean-shutdown marker: the start recovers. */
    assert_int_equal(startup(&s, "clean_shutdown"), 0);
    assert_int_equal(ready_status(&s, st, sizeof st), 200);
    cc_part p = check_files(&s, "t", 0);
    /* The failed fsync's batch was written (page cache) but never acknowledged:
     * it may be there; the failed write's is not. */
    assert_true(p.next_offset == 20 || (strstr(fault, "fsync") && p.next_offset == 25));
    cc_part_free(&p);
    append_ok(&s, "t", 5, "again");
    p = check_files(&s, "t", 0);
    cc_part_free(&p);
    assert_int_equal(ls_stop(&s), 0);
    ls_cleanup(&s);
}

static void test_append_partial_eio(void **state)
{
    (void)state;
    offline_after("segment.append.partial=eio@5", PLAIN);
}

static void test_fsync_eio(void **state)
{
    (void)state;
    offline_after("partition.fsync=eio@5", DURABLE);
}

/* Appends' fsyncs leave the active segment's indexes to the roll, which
 * syncs them before the segment stops being last; when that fails the dir
 * goes offline like a failed append fsync, even on a full disk (the
 * recovery point must not pass indexes that are not on disk).  Here the
 * index holds one entry, so every append after the first rolls and the
 * fifth meets the fourth roll. */
#define ROLLS_EVERY_APPEND \
    "{\"segment.index.bytes\":\"12\",\"index.interval.bytes\":\"1\",\"flush.messages\":\"1\"}"

static void test_roll_index_sync_eio(void **state)
{
    (void)state;
    offline_after("roll.index_sync=eio@4", ROLLS_EVERY_APPEND);
}

static void test_roll_index_sync_enospc(void **state)
{
    (void)state;
    offline_after("roll.index_sync=enospc@4", ROLLS_EVERY_APPEND);
}

/* exit after the whole batch was written (before its index entry or its
 * fsync): recovery keeps the complete batch, acknowledged or not. */
static void exit_after_write(const char *fault, const char *configs)
{
    static ls_server s; /* static: the teardown finds it after a failed assertion */
    start(&s, fault, NULL, false);
    assert_int_equal(ls_create_topic(&s, "t", 1, configs), 201);
    for (int b = 0; b < 4; b++)
        append_ok(&s, "t", 5, "a");
    assert_int_equal(append(&s, "t", 5, "unacked", NULL), 0);
    assert_int_equal(wait_exit(&s), 86);
    start(&s, NULL, NULL, true);
    assert_int_equal(startup(&s, "clean_shutdown"), 0);
    assert_int_equal(startup(&s, "bytes_truncated"), 0);
    cc_part p = check_files(&s, "t", 0);
    assert_int_equal(p.next_offset, 25);
    cc_part_free(&p);
    assert_int_equal(part_field(&s, "t", "high_watermark"), 25);
    assert_int_equal(ls_stop(&s), 0);
    ls_cleanup(&s);
}

static void test_append_index_exit(void **state)
{
    (void)state;
    exit_after_write("segment.append.index=exit@5", PLAIN);
}

static void test_fsync_exit(void **state)
{
    (void)state;
    exit_after_write("partition.fsync=exit@5", DURABLE);
}

/* ---- compaction ---------------------------------------------------------------- */

/* Three generations of keys c-0..c-9 in three batches, then a roll: the
 * first segment is cleanable.  Generation g of key i is at offset 10g + i. */
static void compacted_setup(ls_server *s, const char *fault, const char *const *extra)
{
    start(s, fault, extra ? extra : NO_CLEANER, false);
    assert_int_equal(ls_create_topic(s, "c", 1, COMPACT), 201);
    for (int g = 0; g < 3; g++)
        append_ok(s, "c", 10, "c");
    roll(s, "c");
}

static long compaction_run(ls_server *s)
{
    ls_resp r;
    if (ls_post(s, "/v1/topics/c/compaction:run", "{}", &r))
        return 0;
    long st = r.status;
    ls_resp_free(&r);
    return st;
}

/* After a finished clean: generation 2 stays, generations 0 and 1 are gone. */
static void check_compacted(ls_server *s)
{
    cc_part p = check_files(s, "c", 20);
    for (int64_t off = 0; off < 20; off++)
        if (cc_find(&p, off))
            fail_msg("superseded offset %lld survived the clean", (long long)off);
    assert_int_equal(p.nrecs, 10);
    assert_int_equal(p.next_offset, 30);
    cc_part_free(&p);
}

static void check_uncompacted(ls_server *s)
{
    cc_part p = check_files(s, "c", 0);
    assert_int_equal(p.nrecs, 30);
    cc_part_free(&p);
}

static void test_compact_before_swap(void **state)
{
    (void)state;
    static ls_server s; /* static: the teardown finds it after a failed assertion */
    compacted_setup(&s, "compact.before_swap=exit", NULL);
    assert_int_equal(compaction_run(&s), 0);
    assert_int_equal(wait_exit(&s), 86);
    assert_int_equal(count_suffix(&s, "c", ".log.cleaned"), 1);
    start(&s, NULL, NO_CLEANER, true);
    check_no_leftovers(&s);
    check_uncompacted(&s); /* the old data, every generation */
    assert_int_equal(compaction_run(&s), 200);
    check_compacted(&s);
    assert_int_equal(ls_stop(&s), 0);
    ls_cleanup(&s);
}

/* A crash (or I/O error) once the cleaned segment is renamed .swap: the
 * restart completes the swap. */
static void swap_completed(const char *fault, const char *suffix_before, bool crash)
{
    static ls_server s; /* static: the teardown finds it after a failed assertion */
    compacted_setup(&s, fault, NULL);
    if (crash) {
        assert_int_equal(compaction_run(&s), 0);
        assert_int_equal(wait_exit(&s), 86);
    } else {
        assert_int_equal(compaction_run(&s), 500);
        char st[32];
        assert_int_equal(ready_status(&s, st, sizeof st), 503);
        assert_string_equal(st, "offline");
        assert_int_equal(ls_stop(&s), 0);
    }
    assert_int_equal(count_suffix(&s, "c", ".log.swap"), 1);
    if (suffix_before)
        assert_int_equal(count_suffix(&s, "c", suffix_before), 1);
    start(&s, NULL, NO_CLEANER, true);
    check_no_leftovers(&s);
    check_compacted(&s);
    /* Reads agree with the files: the latest value of every key. */
    ls_resp r;
    assert_int_equal(ls_get(&s, "/v1/topics/c/partitions/0/records?offset=0", &r), 0);
    assert_int_equal(r.status, 200);
    assert_int_equal(json_array_size(json_object_get(r.json, "records")), 10);
    assert_int_equal(ls_jint(&r, "records.0.offset"), 20);
    assert_string_equal(ls_jstr(&r, "records.0.value"), M.val[20]);
    ls_resp_free(&r);
    append_ok(&s, "c", 10, "c");
    cc_part p = check_files(&s, "c", 20);
    cc_part_free(&p);
    assert_int_equal(ls_stop(&s), 0);
    ls_cleanup(&s);
}

static void test_compact_after_swap(void **state)
{
    (void)state;
    swap_completed("compact.after_swap=exit", NULL, true);
}

static void test_compact_after_swap_eio(void **state)
{
    (void)state;
    swap_completed("compact.after_swap=eio", NULL, false);
}

static void test_compact_before_final(void **state)
{
    (void)state;
    swap_completed("compact.before_final=exit", ".log.deleted", true);
}

static void test_cleaner_before_checkpoint(void **state)
{
    (void)state;
    static ls_server s; /* static: the teardown finds it after a failed assertion */
    compacted_setup(&s, "cleaner.before_checkpoint=exit", NULL);
    assert_int_equal(compaction_run(&s), 0);
    assert_int_equal(wait_exit(&s), 86);
    char path[600];
    snprintf(path, sizeof path, "%s/cleaner-offset-checkpoint", s.dir);
    assert_int_equal(ls_file_size(path), -1); /* never written */
    start(&s, NULL, NO_CLEANER, true);
    check_no_leftovers(&s);
    check_compacted(&s);
    /* The next clean starts from the log start again: harmless. */
    assert_int_equal(compaction_run(&s), 200);
    check_compacted(&s);
    assert_true(ls_file_size(path) > 0);
    assert_int_equal(ls_stop(&s), 0);
    ls_cleanup(&s);
}

/* ---- fs.write_atomic.mid ------------------------------------------------------------ */

static void test_checkpoint_write_exit(void **state)
{
    (void)state;
    static ls_server s; /* static: the teardown finds it after a failed assertion */
    start(&s, NULL, NULL, false);
    assert_int_equal(ls_create_topic(&s, "t", 1, DURABLE), 201);
    for (int b = 0; b < 3; b++)
        append_ok(&s, "t", 5, "a");
    ls_resp r;
    assert_int_equal(ls_post(&s, "/v1/topics/t/partitions/0/records:delete", "{\"before_offset\":5}", &r), 0);
    assert_int_equal(r.status, 200);
    ls_resp_free(&r);
    assert_int_equal(ls_stop(&s), 0); /* writes both checkpoints */
    char rp[600], lso[600];
    snprintf(rp, sizeof rp, "%s/recovery-point-offset-checkpoint", s.dir);
    snprintf(lso, sizeof lso, "%s/log-start-offset-checkpoint", s.dir);
    size_t rp_len, lso_len, l2;
    char *rp0 = ls_read_file(rp, &rp_len), *lso0 = ls_read_file(lso, &lso_len);
    assert_non_null(rp0);
    assert_non_null(lso0);
    assert_string_equal(rp0, "0\n1\nt 0 15\n");
    assert_string_equal(lso0, "0\n1\nt 0 5\n");

    /* The checkpoint jobs first run 2.5 s after the start; durable appends move
     * the recovery point before that, so the job has something new to write. */
    static const char *const jobs[] = {"log.initial.task.delay.ms=2500",
                                       "log.flush.offset.checkpoint.interval.ms=100",
                                       "log.flush.start.offset.checkpoint.interval.ms=100", NULL};
    start(&s, "fs.write_atomic.mid=exit", jobs, true);
    for (int b = 0; b < 3; b++)
        append_ok(&s, "t", 5, "b");
    assert_int_equal(wait_exit(&s), 86);
    char *rp1 = ls_read_file(rp, &l2);
    assert_non_null(rp1);
    assert_string_equal(rp1, rp0); /* the previous checkpoint is intact */
    free(rp1);
    rp1 = ls_read_file(lso, &l2);
    assert_non_null(rp1);
    assert_string_equal(rp1, lso0);
    free(rp1);
    char tmp1[700], tmp2[700];
    snprintf(tmp1, sizeof tmp1, "%s.tmp", rp);
    snprintf(tmp2, sizeof tmp2, "%s.tmp", lso);
    long long t1 = ls_file_size(tmp1), t2 = ls_file_size(tmp2);
    assert_true(t1 >= 0 || t2 >= 0); /* the torn temporary file */
    assert_true(t1 < (long long)rp_len && t2 < (long long)lso_len);

    start(&s, NULL, NULL, true);
    assert_int_equal(startup(&s, "clean_shutdown"), 0);
    check_no_leftovers(&s); /* the .tmp is ignored, then removed */
    assert_int_equal(part_field(&s, "t", "log_start_offset"), 5);
    cc_part p = check_files(&s, "t", 0);
    assert_int_equal(p.next_offset, 30);
    cc_part_free(&p);
    assert_int_equal(ls_stop(&s), 0);
    free(rp0);
    free(lso0);
    ls_cleanup(&s);
}

static void test_topic_meta_enospc(void **state)
{
    (void)state;
    static ls_server s; /* static: the teardown finds it after a failed assertion */
    start(&s, "fs.write_atomic.mid=enospc@1", NULL, false);
    ls_resp r;
    assert_int_equal(ls_post(&s, "/v1/topics", "{\"name\":\"t\",\"partitions\":2}", &r), 0);
    CHECK_ERR(r, 507, "disk_full");
    ls_resp_free(&r);
    char path[600];
    snprintf(path, sizeof path, "%s/t-0", s.dir);
    assert_int_equal(ls_file_size(path), -1);
    snprintf(path, sizeof path, "%s/meta/t.json", s.dir);
    assert_int_equal(ls_file_size(path), -1);
    check_no_leftovers(&s);
    assert_int_equal(ls_get(&s, "/v1/topics/t", &r), 0);
    CHECK_ERR(r, 404, "unknown_topic");
    ls_resp_free(&r);
    assert_int_equal(ls_create_topic(&s, "t", 1, PLAIN), 201);
    append_ok(&s, "t", 5, "a");
    assert_int_equal(ls_stop(&s), 0);
    ls_cleanup(&s);
}

/* ---- retention.after_start_offset ---------------------------------------------------- */

/* Four segments of 10 records; retention.bytes then keeps the last two.
 * The fault fires after the start offset moved in memory and the segments
 * left the view, before any file was renamed.  What the code guarantees:
 * the log start offset is durable only through log-start-offset-checkpoint
 * (written by its job and at a clean stop), and a segment only goes once it
 * is renamed .deleted.  So after the restart the segments are all still
 * there, unrenamed, and the start offset is what the checkpoint last said:
 *   - no checkpoint since the move: the start is back at 0 and offsets below
 *     the retention's new start read their data (nothing was lost, and the
 *     files and the start agree);
 *   - checkpoint written after an earlier records:delete: the start is that
 *     offset and reads below it answer 416.
 * A retention run after the restart then deletes the segments for good. */
static void retention_crash(bool checkpointed)
{
    static ls_server s; /* static: the teardown finds it after a failed assertion */
    static const char *const jobs[] = {"log.initial.task.delay.ms=100",
                                       "log.flush.start.offset.checkpoint.interval.ms=100", NULL};
    start(&s, "retention.after_start_offset=exit", checkpointed ? jobs : NULL, false);
    assert_int_equal(ls_create_topic(&s, "r", 1, PLAIN), 201);
    for (int seg = 0; seg < 4; seg++) {
        append_ok(&s, "r", 10, "r");
        if (seg < 3)
            roll(&s, "r");
    }
    ls_resp r;
    long long start_after = 0;
    if (checkpointed) {
        assert_int_equal(ls_post(&s, "/v1/topics/r/partitions/0/records:delete", "{\"before_offset\":5}", &r), 0);
        assert_int_equal(r.status, 200);
        ls_resp_free(&r);
        /* The log-start-offset-checkpoint job (every 100 ms) writes 5. */
        char path[600], *txt = NULL;
        size_t len;
        snprintf(path, sizeof path, "%s/log-start-offset-checkpoint", s.dir);
        for (int i = 0; i < 400; i++, sleep_ms(25)) {
            free(txt);
            if ((txt = ls_read_file(path, &len)) && !strcmp(txt, "0\n1\nr 0 5\n"))
                break;
        }
        assert_non_null(txt);
        assert_string_equal(txt, "0\n1\nr 0 5\n");
        free(txt);
        start_after = 5;
    }
    long long seg_bytes = seg_file_size(&s, "r", 0, ".log");
    char body[64];
    snprintf(body, sizeof body, "{\"value\":\"%lld\"}", 2 * seg_bytes + 10);
    assert_int_equal(ls_send_json(&s, "PUT", "/v1/topics/r/configs/retention.bytes", body, &r), 0);
    assert_int_equal(r.status, 200);
    ls_resp_free(&r);
    assert_int_equal(ls_post(&s, "/v1/topics/r/retention:run", "{}", &r), -1);
    assert_int_equal(wait_exit(&s), 86);

    start(&s, NULL, NULL, true);
    check_no_leftovers(&s);
    cc_part p = check_files(&s, "r", 0);
    assert_int_equal(p.nsegments, 4);
    assert_int_equal(p.first_base, 0);
    assert_int_equal(p.next_offset, 40);
    cc_part_free(&p);
    assert_int_equal(part_field(&s, "r", "log_start_offset"), start_after);
    assert_int_equal(ls_get(&s, "/v1/topics/r/partitions/0/records?offset=5", &r), 0);
    assert_int_equal(r.status, 200);
    assert_string_equal(ls_jstr(&r, "records.0.value"), M.val[5]);
    ls_resp_free(&r);
    assert_int_equal(ls_get(&s, "/v1/topics/r/partitions/0/records?offset=0", &r), 0);
    if (checkpointed)
        CHECK_ERR(r, 416, "offset_out_of_range");
    else
        assert_string_equal(ls_jstr(&r, "records.0.value"), M.val[0]);
    ls_resp_free(&r);

    /* The next run deletes the two oldest segments properly. */
    assert_int_equal(ls_post(&s, "/v1/topics/r/retention:run", "{}", &r), 0);
    assert_int_equal(r.status, 200);
    ls_resp_free(&r);
    assert_int_equal(part_field(&s, "r", "log_start_offset"), 20);
    assert_int_equal(ls_get(&s, "/v1/topics/r/partitions/0/records?offset=0", &r), 0);
    CHECK_ERR(r, 416, "offset_out_of_range");
    ls_resp_free(&r);
    assert_int_equal(ls_stop(&s), 0);
    start(&s, NULL, NULL, true);
    p = check_files(&s, "r", 20);
    assert_int_equal(p.first_base, 20);
    cc_part_free(&p);
    assert_int_equal(part_field(&s, "r", "log_start_offset"), 20);
    assert_int_equal(ls_stop(&s), 0);
    ls_cleanup(&s);
}

static void test_retention_after_start_offset(void **state)
{
    (void)state;
    retention_crash(false);
}

static void test_retention_after_start_offset_checkpointed(void **state)
{
    (void)state;
    retention_crash(true);
}

/* ---- roll.after_create ------------------------------------------------------------- */

static void test_roll_after_create(void **state)
{
    (void)state;
    static ls_server s; /* static: the teardown finds it after a failed assertion */
    start(&s, "roll.after_create=exit", NULL, false);
    assert_int_equal(ls_create_topic(&s, "t", 1, PLAIN), 201);
    for (int b = 0; b < 4; b++)
        append_ok(&s, "t", 6, "a");
    ls_resp r;
    assert_int_equal(ls_post(&s, "/v1/topics/t/partitions/0/segments:roll", "", &r), -1);
    assert_int_equal(wait_exit(&s), 86);
    /* The new segment exists; the old one was never sealed (its index is
     * still preallocated). */
    assert_int_equal(seg_file_size(&s, "t", 24, ".log"), 0);
    assert_true(seg_file_size(&s, "t", 0, ".index") > 1000);
    start(&s, NULL, NULL, true);
    assert_int_equal(startup(&s, "clean_shutdown"), 0);
    assert_int_equal(startup(&s, "segments"), 2);
    cc_part p = check_files(&s, "t", 0); /* the old segment's indexes trimmed and right */
    assert_int_equal(p.nsegments, 2);
    assert_int_equal(p.next_offset, 24);
    cc_part_free(&p);
    assert_int_equal(append(&s, "t", 6, "b", &r), 200);
    assert_int_equal(ls_jint(&r, "base_offset"), 24);
    ls_resp_free(&r);
    assert_int_equal(part_field(&s, "t", "active_segment_base_offset"), 24);
    p = check_files(&s, "t", 0);
    cc_part_free(&p);
    assert_int_equal(ls_stop(&s), 0);
    ls_cleanup(&s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_append_partial_exit, setup, teardown),
        cmocka_unit_test_setup_teardown(test_append_partial_enospc, setup, teardown),
        cmocka_unit_test_setup_teardown(test_append_partial_eio, setup, teardown),
        cmocka_unit_test_setup_teardown(test_append_index_exit, setup, teardown),
        cmocka_unit_test_setup_teardown(test_append_index_enospc, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fsync_eio, setup, teardown),
        cmocka_unit_test_setup_teardown(test_roll_index_sync_eio, setup, teardown),
        cmocka_unit_test_setup_teardown(test_roll_index_sync_enospc, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fsync_exit, setup, teardown),
        cmocka_unit_test_setup_teardown(test_compact_before_swap, setup, teardown),
        cmocka_unit_test_setup_teardown(test_compact_after_swap, setup, teardown),
        cmocka_unit_test_setup_teardown(test_compact_after_swap_eio, setup, teardown),
        cmocka_unit_test_setup_teardown(test_compact_before_final, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cleaner_before_checkpoint, setup, teardown),
        cmocka_unit_test_setup_teardown(test_checkpoint_write_exit, setup, teardown),
        cmocka_unit_test_setup_teardown(test_topic_meta_enospc, setup, teardown),
        cmocka_unit_test_setup_teardown(test_retention_after_start_offset, setup, teardown),
        cmocka_unit_test_setup_teardown(test_retention_after_start_offset_checkpointed, setup, teardown),
        cmocka_unit_test_setup_teardown(test_roll_after_create, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
