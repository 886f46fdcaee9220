/*
 * test_retention.c - retention and delete-records on one partition, engine
 * level (eng_retention.h, kafka-format.md §15).  Old data comes from explicit
 * record timestamps (1000 with retention.ms=20000), never from sleeping.
 *   - retention.bytes alone, the figures: segment.bytes=1048576 and
 *     2,731-byte batches give three 1,045,973-byte segments and a 139,281-byte
 *     active one; retention.bytes=2000000 deletes exactly one, then nothing;
 *     retention.bytes=0 keeps only an empty active segment;
 *   - retention.ms alone: oldest first, stopping at the first young segment
 *     (an old one after it survives); no timestamps -> the .log mtime;
 *   - the log-start-offset rule alone (cleanup.policy=compact);
 *   - only segments wholly below the high watermark (flush.messages=1, an
 *     append whose durability is pending), then once its commit ran;
 *   - everything expired: an empty segment is rolled at the old log end
 *     offset first, and the next append gets that offset;
 *   - a future timestamp keeps its segment and the rest (warning, future_kept);
 *   - dry runs change nothing (files, log start offset, segments);
 *   - delete-records: raise, never lower, -1 = HW, past HW -> ENG_EOFFSET with
 *     bounds; reads below fail; retention then deletes the segments wholly
 *     below the new start (rule log_start_offset) without lowering it;
 *   - the log start offset moves before files are renamed *.deleted; the
 *     owner gets them with file.delete.delay.ms, unlinks later; log lines;
 *   - readers racing deletion: ENG_EOFFSET is the only error, and every
 *     record read is intact and at the offset asked for.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "eng_batch.h"
#include "eng_config.h"
#include "eng_endian.h"
#include "eng_error.h"
#include "eng_fs.h"
#include "eng_logger.h"
#include "eng_partition.h"
#include "eng_retention.h"
#include "support.h"

#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define OLD_TS 1000LL
#define MAX_RECS 10
#define MAX_HELD 64

typedef struct fixture {
    char *dir;
    char pdir[512];
    eng_config cfg;
    bool hold;                 /* on_delete keeps segments (the test unlinks) */
    pthread_mutex_t mu;
    eng_segment *held[MAX_HELD];
    int64_t held_delay[MAX_HELD];
    int64_t lso_seen[MAX_HELD];   /* log start offset when on_delete ran */
    bool renamed_seen[MAX_HELD];  /* <base>.log.deleted there, <base>.log gone */
    size_t ndeleted;
    _Atomic int rolls;
    char log[65536];
} fixture;

static void sink(eng_log_level level, const char *line, void *ctx)
{
    (void)level;
    fixture *f = ctx;
    pthread_mutex_lock(&f->mu);
    size_t n = strlen(f->log);
    snprintf(f->log + n, sizeof f->log - n, "%s\n", line);
    pthread_mutex_unlock(&f->mu);
}

static int count_lines(fixture *f, const char *needle)
{
    int n = 0;
    pthread_mutex_lock(&f->mu);
    for (const char *p = f->log; (p = strstr(p, needle)); p += strlen(needle))
        n++;
    pthread_mutex_unlock(&f->mu);
    return n;
}

static bool seg_file(const char *dir, int64_t base, const char *ext)
{
    char path[700];
    snprintf(path, sizeof path, "%s/%020lld%s", dir, (long long)base, ext);
    return access(path, F_OK) == 0;
}

/* How many of the segment's three files exist with `suffix` ("" or ".deleted"). */
static int seg_files(const char *dir, int64_t base, const char *suffix)
{
    static const char *const ext[] = {".log", ".index", ".timeindex"};
    int n = 0;
    for (int i = 0; i < 3; i++) {
        char e[32];
        snprintf(e, sizeof e, "%s%s", ext[i], suffix);
        n += seg_file(dir, base, e);
    }
    return n;
}

static void on_delete(eng_partition *p, eng_segment *seg, int64_t delay_ms, void *ctx)
{
    fixture *f = ctx;
    pthread_mutex_lock(&f->mu);
    size_t i = f->ndeleted < MAX_HELD ? f->ndeleted : MAX_HELD - 1;
    int64_t base = eng_segment_base(seg);
    f->held_delay[i] = delay_ms;
    f->lso_seen[i] = eng_partition_log_start_offset(p);
    f->renamed_seen[i] = seg_file(f->pdir, base, ".log.deleted") && !seg_file(f->pdir, base, ".log");
    f->ndeleted++;
    if (f->hold && i < MAX_HELD - 1) {
        f->held[i] = seg;
        seg = NULL;
    }
    pthread_mutex_unlock(&f->mu);
    if (seg) {
        eng_segment_unlink(seg);
        eng_segment_unref(seg);
    }
}

static void on_roll(eng_partition *p, eng_segment *sealed, int64_t new_base, void *ctx)
{
    (void)p, (void)sealed, (void)new_base;
    atomic_fetch_add(&((fixture *)ctx)->rolls, 1);
}

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    if (!f || !(f->dir = ts_tmpdir()))
        return -1;
    snprintf(f->pdir, sizeof f->pdir, "%s/orders-0", f->dir);
    eng_config_defaults d;
    eng_config_defaults_init(&d);
    f->cfg = d.cfg;
    f->cfg.v[ENG_CFG_RETENTION_MS].i = -1; /* each test enables the rule it tests */
    f->cfg.v[ENG_CFG_RETENTION_BYTES].i = -1;
    pthread_mutex_init(&f->mu, NULL);
    eng_logger_set_sink(sink, f, ENG_LOG_INFO);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    eng_logger_set_sink(NULL, NULL, ENG_LOG_INFO);
    for (size_t i = 0; i < f->ndeleted && i < MAX_HELD; i++)
        if (f->held[i])
            eng_segment_unref(f->held[i]);
    pthread_mutex_destroy(&f->mu);
    ts_rmtree(f->dir);
    free(f->dir);
    free(f);
    return 0;
}

static eng_partition *open_part(fixture *f)
{
    eng_partition_params pp = {.topic = "orders", .id = 0, .dir = f->pdir, .config = f->cfg,
                               .clean_shutdown = true, .recovery_point = 0, .log_start_offset = -1,
                               .events = {.on_delete = on_delete, .on_roll = on_roll, .ctx = f}};
    eng_partition *p = NULL;
    int rc = eng_partition_open(&pp, &p, NULL);
    if (rc)
        fail_msg("eng_partition_open: %s", eng_strerror(rc));
    return p;
}

static void close_part(eng_partition *p)
{
    eng_partition_close(p);
    eng_partition_unref(p);
}

/* ---- records: key k-<offset>, value tied to the offset ------------------- */

static void fill_value(uint8_t *v, int len, int64_t id)
{
    for (int j = 0; j < len; j++)
        v[j] = (uint8_t)('a' + (id * 7 + j) % 26);
}

static size_t build_batch(uint8_t *buf, size_t cap, int64_t first, int n, int64_t ts, int vlen)
{
    static _Thread_local uint8_t values[MAX_RECS][512];
    char keys[MAX_RECS][24];
    eng_record_spec recs[MAX_RECS];
    for (int i = 0; i < n; i++) {
        snprintf(keys[i], sizeof keys[i], "k-%06lld", (long long)(first + i));
        fill_value(values[i], vlen, first + i);
        recs[i] = (eng_record_spec){.timestamp = ts, .key = (const uint8_t *)keys[i],
                                    .key_len = (int32_t)strlen(keys[i]), .value = values[i],
                                    .value_len = vlen};
    }
    eng_batch_params bp;
    eng_batch_params_init(&bp);
    return eng_batch_encode(buf, cap, &bp, recs, (size_t)n);
}

/* Appends n records at ts (keys from the log end offset); returns the batch
 * size.  async: flush.messages' durability is left pending (see res). */
static size_t append_rec(eng_partition *p, int n, int64_t ts, int vlen, bool async,
                         eng_append_result *res)
{
    uint8_t buf[MAX_RECS * 600];
    size_t len = build_batch(buf, sizeof buf, eng_partition_log_end_offset(p), n, ts, vlen);
    eng_append_opts o = {.expected_offset = -1, .producer_batches = true, .async_durable = async};
    eng_append_result local;
    eng_errdetail err = {0};
    int rc = eng_partition_append(p, buf, len, &o, res ? res : &local, &err);
    if (rc)
        fail_msg("append: %s (%s)", eng_strerror(rc), err.message);
    return len;
}

static size_t append(eng_partition *p, int n, int64_t ts)
{
    return append_rec(p, n, ts, 50, false, NULL);
}

static int64_t roll(eng_partition *p)
{
    int64_t base;
    assert_int_equal(eng_partition_roll(p, &base), 0);
    return base;
}

/* One retention pass at the current time; asserts how many segments go. */
static eng_retention_report run(eng_partition *p, bool dry, size_t want)
{
    eng_retention_report rep;
    assert_int_equal(eng_partition_retention(p, eng_now_ms(), dry, &rep), 0);
    if (rep.n != want)
        fail_msg("retention (dry run %d): %zu segments, expected %zu", dry, rep.n, want);
    return rep;
}

/* Asserts one row of a retention report. */
static void expect_del(const eng_deleted_segment *d, int64_t base, const char *rule)
{
    assert_int_equal(d->base_offset, base);
    assert_string_equal(d->rule, rule);
}

/* Asserts the segment count and the first base offset. */
static void expect_segs(eng_partition *p, size_t want, int64_t first_base)
{
    eng_segment_info *si;
    size_t n;
    assert_int_equal(eng_partition_segments(p, &si, &n), 0);
    int64_t first = si[0].base_offset;
    free(si);
    assert_int_equal(n, want);
    assert_int_equal(first, first_base);
}

/* k segments of 10 records at ts, each rolled. */
static void segments(eng_partition *p, int k, int64_t ts)
{
    for (int i = 0; i < k; i++) {
        append(p, 10, ts);
        roll(p);
    }
}

static void set_cfg(eng_partition *p, eng_config_id id, int64_t v)
{
    eng_config c;
    eng_partition_get_config(p, &c);
    c.v[id].i = v;
    eng_partition_set_config(p, &c);
}

static int visible(const struct dirent *e)
{
    return e->d_name[0] != '.';
}

/* "name size\n" for every file of the partition dir, sorted. */
static char *listing(const char *dir)
{
    struct dirent **v;
    int n = scandir(dir, &v, visible, alphasort);
    assert_true(n >= 0);
    char *out = calloc(1, (size_t)n * 300 + 1);
    for (int i = 0; i < n; i++) {
        char path[700];
        snprintf(path, sizeof path, "%s/%s", dir, v[i]->d_name);
        sprintf(out + strlen(out), "%s %lld\n", v[i]->d_name, ts_file_size(path));
        free(v[i]);
    }
    free(v);
    return out;
}

/* Checks every record of a fetch from `from` on: consecutive offsets from
 * `from`, key and value intact, CRC valid.  Returns the offset after the
 * last record, or -1. */
static int64_t walk_fetch(const eng_fetch *ft, int64_t from, int vlen)
{
    int64_t expect = from;
    for (size_t pos = 0; pos < ft->len;) {
        eng_batch_header h;
        if (eng_batch_header_decode(ft->data + pos, ft->len - pos, &h) ||
            eng_batch_size(&h) > ft->len - pos ||
            eng_batch_validate(ft->data + pos, eng_batch_size(&h), &h))
            return -1;
        eng_record_iter it;
        eng_record r;
        eng_record_iter_init(&it, &h, ft->data + pos + ENG_BATCH_OVERHEAD,
                             eng_batch_size(&h) - ENG_BATCH_OVERHEAD);
        while (eng_record_iter_next(&it, &r) == 1) {
            if (r.offset < from)
                continue;
            char key[24];
            uint8_t want[512];
            int kl = snprintf(key, sizeof key, "k-%06lld", (long long)r.offset);
            fill_value(want, vlen, r.offset);
            if (r.offset != expect++ || r.key_len != kl || memcmp(r.key, key, (size_t)kl) ||
                r.value_len != vlen || memcmp(r.value, want, (size_t)vlen))
                return -1;
        }
        pos += eng_batch_size(&h);
    }
    return expect;
}

/* Reads from off and checks the records up to want_next (0: expects none). */
static void read_from(eng_partition *p, int64_t off, int64_t want_next)
{
    eng_fetch ft;
    assert_int_equal(eng_partition_read(p, off, 4096, &ft, NULL), 0);
    if (want_next)
        assert_int_equal(walk_fetch(&ft, off, 50), want_next);
    else
        assert_int_equal(ft.len, 0);
    eng_fetch_free(&ft);
}

/* A read at off fails out of range with bounds [lo, hi). */
static void read_out_of_range(eng_partition *p, int64_t off, int64_t lo, int64_t hi)
{
    eng_fetch ft;
    eng_errdetail err = {0};
    assert_int_equal(eng_partition_read(p, off, 4096, &ft, &err), ENG_EOFFSET);
    assert_true(err.has_bounds && err.lo == lo && err.hi == hi);
}

/* delete-records with its expected result; returns the log start offset. */
static int64_t del(eng_partition *p, int64_t before, int want, eng_errdetail *err)
{
    int64_t lso = -7;
    assert_int_equal(eng_partition_delete_records(p, before, &lso, err), want);
    if (!want)
        assert_int_equal(lso, eng_partition_log_start_offset(p));
    return eng_partition_log_start_offset(p);
}

/* ---- retention.bytes: the arithmetic -------------------------------- */

static void test_size_rule_arithmetic(void **state)
{
    fixture *f = *state;
    f->cfg.v[ENG_CFG_SEGMENT_BYTES].i = 1048576;
    eng_partition *p = open_part(f);
    int64_t now = eng_now_ms();
    /* 383 batches fill a segment; three full segments and 51 more batches. */
    for (int a = 0; a < 3 * 383 + 51; a++)
        assert_int_equal(append_rec(p, 10, now, 250, false, NULL), 2731);
    eng_segment_info *si;
    size_t n;
    assert_int_equal(eng_partition_segments(p, &si, &n), 0);
    assert_int_equal(n, 4);
    for (size_t i = 0; i < 3; i++)
        assert_int_equal(si[i].size_bytes, 1045973);
    assert_int_equal(si[3].size_bytes, 139281);
    assert_true(si[3].active);
    free(si);

    /* size 3,277,200 - 2,000,000 = 1,277,200: one segment of 1,045,973
     * fits in the excess, a second does not. */
    set_cfg(p, ENG_CFG_RETENTION_BYTES, 2000000);
    eng_retention_report rep = run(p, true, 1);
    assert_int_equal(rep.log_start_offset_after, 3830);
    eng_retention_report_free(&rep);
    assert_int_equal(eng_partition_log_start_offset(p), 0);

    rep = run(p, false, 1);
    expect_del(&rep.segments[0], 0, "retention.bytes");
    assert_int_equal(rep.segments[0].next_offset, 3830);
    assert_int_equal(rep.segments[0].size_bytes, 1045973);
    assert_non_null(strstr(rep.segments[0].reason, "retention.bytes 2000000"));
    assert_int_equal(rep.bytes_freed, 1045973);
    assert_int_equal(rep.log_start_offset_before, 0);
    assert_int_equal(rep.log_start_offset_after, 3830);
    assert_false(rep.rolled);
    eng_retention_report_free(&rep);
    assert_int_equal(eng_partition_log_start_offset(p), 3830);
    expect_segs(p, 3, 3830);

    /* 2,231,227 left: above the limit, but by less than a segment. */
    rep = run(p, false, 0);
    eng_retention_report_free(&rep);
    expect_segs(p, 3, 3830);

    /* retention.bytes=0 takes every segment but an empty active one. */
    assert_int_equal(roll(p), 12000);
    set_cfg(p, ENG_CFG_RETENTION_BYTES, 0);
    rep = run(p, false, 3);
    assert_int_equal(rep.bytes_freed, 2 * 1045973 + 139281);
    assert_false(rep.rolled);
    eng_retention_report_free(&rep);
    expect_segs(p, 1, 12000);
    assert_int_equal(eng_partition_log_start_offset(p), 12000);
    close_part(p);
}

/* ---- retention.ms --------------------------------------------------------- */

static void test_time_rule_stops_at_first_kept(void **state)
{
    fixture *f = *state;
    f->cfg.v[ENG_CFG_RETENTION_MS].i = 20000;
    eng_partition *p = open_part(f);
    int64_t now = eng_now_ms();
    segments(p, 1, OLD_TS);       /* [0,10) old */
    append(p, 5, OLD_TS);         /* [10,20) old: largest timestamp 1000 */
    append(p, 5, OLD_TS - 500);
    roll(p);
    append(p, 10, now);           /* [20,40): a young batch, then an old one */
    append(p, 10, OLD_TS);        /* (in this order: a younger one would roll by time) */
    roll(p);
    segments(p, 1, OLD_TS);       /* [40,50) old but after a young one: kept */
    append(p, 10, now);           /* active [50,60) */

    eng_retention_report rep = run(p, false, 2);
    for (size_t i = 0; i < 2; i++) {
        expect_del(&rep.segments[i], 10 * (int64_t)i, "retention.ms");
        assert_non_null(strstr(rep.segments[i].reason,
                               "retention.ms 20000 breached by largest timestamp 1000"));
    }
    assert_int_equal(rep.log_start_offset_after, 20);
    eng_retention_report_free(&rep);
    expect_segs(p, 3, 20);
    assert_int_equal(count_lines(f, "largest timestamp 1000"), 2);
    assert_int_equal(count_lines(f, "incremented log start offset to 20"), 1);
    assert_int_equal(count_lines(f, "incremented log start offset"), 1);

    /* A segment without timestamps is judged by its .log mtime. */
    close_part(p);
    ts_rmtree(f->pdir);
    p = open_part(f);
    segments(p, 1, -1);
    append(p, 10, now);
    char path[700];
    snprintf(path, sizeof path, "%s/%020d.log", f->pdir, 0);
    struct timespec times[2] = {{(now - 3600000) / 1000, 0}, {(now - 3600000) / 1000, 0}};
    assert_int_equal(utimensat(AT_FDCWD, path, times, 0), 0);
    rep = run(p, false, 1);
    assert_non_null(strstr(rep.segments[0].reason, "retention.ms 20000 breached by file mtime"));
    eng_retention_report_free(&rep);
    assert_int_equal(eng_partition_log_start_offset(p), 10);
    close_part(p);
}

/* ---- log start offset rule ------------------------------------------------ */

static void test_log_start_offset_rule_any_policy(void **state)
{
    fixture *f = *state;
    f->cfg.v[ENG_CFG_CLEANUP_POLICY].i = ENG_POLICY_COMPACT;
    f->cfg.v[ENG_CFG_RETENTION_MS].i = 20000; /* not applied: no "delete" */
    f->cfg.v[ENG_CFG_RETENTION_BYTES].i = 1;
    eng_partition *p = open_part(f);
    segments(p, 3, OLD_TS);
    append(p, 10, OLD_TS); /* [0,10) [10,20) [20,30) active [30,40) */
    eng_retention_report rep = run(p, false, 0);
    eng_retention_report_free(&rep);

    assert_int_equal(del(p, 25, 0, NULL), 25);
    rep = run(p, false, 2); /* [0,10) and [10,20); [20,30) holds 25 */
    expect_del(&rep.segments[0], 0, "log_start_offset");
    expect_del(&rep.segments[1], 10, "log_start_offset");
    assert_non_null(strstr(rep.segments[1].reason, "log start offset 25"));
    /* The start stays where delete-records put it, inside [20,30). */
    assert_int_equal(rep.log_start_offset_after, 25);
    eng_retention_report_free(&rep);
    assert_int_equal(eng_partition_log_start_offset(p), 25);
    expect_segs(p, 2, 20);
    close_part(p);
}

/* ---- the high watermark bound --------------------------------------------- */

static void on_durable(void *ctx, int rc)
{
    *(int *)ctx = rc + 1000; /* 1000: ran and succeeded */
}

static void test_high_watermark_bound(void **state)
{
    fixture *f = *state;
    f->cfg.v[ENG_CFG_RETENTION_MS].i = 20000;
    f->cfg.v[ENG_CFG_FLUSH_MESSAGES].i = 1;
    eng_partition *p = open_part(f);
    segments(p, 1, OLD_TS); /* durable at once: HW 10 */
    eng_append_result res;
    append_rec(p, 10, OLD_TS, 50, true, &res); /* written, durability pending */
    assert_true(res.durable_pending);
    assert_int_equal(res.durable_upto, 20);
    assert_int_equal(eng_partition_high_watermark(p), 10);
    assert_int_equal(eng_partition_log_end_offset(p), 20);
    assert_int_equal(roll(p), 20); /* [0,10) [10,20) active [20) */

    /* [10,20) is expired but not wholly below the HW: kept. */
    eng_retention_report rep = run(p, false, 1);
    expect_del(&rep.segments[0], 0, "retention.ms");
    eng_retention_report_free(&rep);
    assert_int_equal(eng_partition_log_start_offset(p), 10);
    assert_true(seg_file(f->pdir, 10, ".log"));

    /* The roll's flush-log job syncs it; the appender, answered at once,
     * must find its records visible.  Then retention takes [10,20) too (the
     * empty active segment stays; nothing needs rolling). */
    assert_int_equal(eng_partition_flush_upto(p, 20), 0);
    int cb = 0;
    eng_partition_when_durable(p, res.durable_upto, on_durable, &cb);
    assert_int_equal(cb, 1000);
    assert_int_equal(eng_partition_high_watermark(p), 20);
    rep = run(p, false, 1);
    expect_del(&rep.segments[0], 10, "retention.ms");
    assert_false(rep.rolled);
    eng_retention_report_free(&rep);
    assert_int_equal(eng_partition_log_start_offset(p), 20);
    expect_segs(p, 1, 20);
    close_part(p);
}

/* ---- everything expired --------------------------------------------------- */

static void test_roll_when_everything_goes(void **state)
{
    fixture *f = *state;
    f->cfg.v[ENG_CFG_RETENTION_MS].i = 20000;
    eng_partition *p = open_part(f);
    segments(p, 1, OLD_TS);
    append(p, 7, OLD_TS); /* active [10,17), expired */
    int rolls = atomic_load(&f->rolls);
    eng_retention_report rep = run(p, false, 2);
    assert_true(rep.rolled);
    assert_int_equal(rep.segments[1].next_offset, 17);
    assert_int_equal(rep.log_start_offset_after, 17);
    eng_retention_report_free(&rep);
    assert_int_equal(atomic_load(&f->rolls), rolls + 1);

    eng_partition_info pi;
    eng_partition_info_get(p, &pi);
    assert_true(pi.segment_count == 1 && pi.active_base_offset == 17 && pi.size_bytes == 0);
    assert_true(pi.log_start_offset == 17 && pi.log_end_offset == 17 && pi.high_watermark == 17);
    assert_int_equal(seg_files(f->pdir, 17, ""), 3);
    assert_int_equal(seg_files(f->pdir, 0, "") + seg_files(f->pdir, 10, ""), 0);

    /* Reads: below the start is out of range, at it is empty. */
    read_out_of_range(p, 16, 17, 17);
    read_from(p, 17, 0);

    /* The next append keeps the old log end offset. */
    eng_append_result res;
    append_rec(p, 3, eng_now_ms(), 50, false, &res);
    assert_int_equal(res.base_offset, 17);
    assert_int_equal(res.last_offset, 19);
    read_from(p, 17, 20);

    /* The new segment is young: nothing more to do. */
    rep = run(p, false, 0);
    assert_false(rep.rolled);
    eng_retention_report_free(&rep);
    close_part(p);
}

/* ---- future timestamps ---------------------------------------------------- */

static void test_future_timestamp_kept(void **state)
{
    fixture *f = *state;
    f->cfg.v[ENG_CFG_RETENTION_MS].i = 20000;
    eng_partition *p = open_part(f);
    int64_t future = eng_now_ms() + 3600000;
    segments(p, 1, OLD_TS); /* [0,10) expired */
    segments(p, 1, future); /* [10,20) from the future */
    segments(p, 1, OLD_TS); /* [20,30) expired but behind the future one */
    append(p, 10, eng_now_ms());
    eng_retention_report rep = run(p, true, 1);
    assert_int_equal(rep.future_kept, 1);
    eng_retention_report_free(&rep);
    rep = run(p, false, 1);
    assert_int_equal(rep.segments[0].base_offset, 0);
    assert_int_equal(rep.future_kept, 1);
    eng_retention_report_free(&rep);
    assert_int_equal(eng_partition_log_start_offset(p), 10);
    expect_segs(p, 3, 10);
    assert_true(count_lines(f, "segment 00000000000000000010 holds a timestamp in the future") >= 1);
    close_part(p);
}

/* ---- dry runs ------------------------------------------------------------- */

static void test_dry_run_changes_nothing(void **state)
{
    fixture *f = *state;
    f->cfg.v[ENG_CFG_RETENTION_MS].i = 20000;
    eng_partition *p = open_part(f);
    segments(p, 2, OLD_TS);
    append(p, 10, OLD_TS); /* everything expired, the active segment too */
    char *before = listing(f->pdir);
    int rolls = atomic_load(&f->rolls);
    eng_retention_report rep = run(p, true, 3);
    assert_true(rep.dry_run);
    assert_false(rep.rolled);
    assert_int_equal(rep.log_start_offset_before, 0);
    assert_int_equal(rep.log_start_offset_after, 30); /* what it would become */
    assert_int_equal(rep.segments[2].base_offset, 20);
    assert_int_equal(rep.segments[2].next_offset, 30);
    uint64_t freed = rep.bytes_freed;
    eng_retention_report_free(&rep);
    char *now = listing(f->pdir);
    assert_string_equal(before, now);
    free(now);
    assert_int_equal(eng_partition_log_start_offset(p), 0);
    assert_int_equal(atomic_load(&f->rolls), rolls);
    assert_int_equal(f->ndeleted, 0);
    expect_segs(p, 3, 0);
    assert_int_equal(count_lines(f, "incremented log start offset"), 0);
    assert_int_equal(count_lines(f, "deleting segment"), 0);

    /* With the start raised inside [10,20): rule 1 then rule 3, still only
     * reported. */
    assert_int_equal(del(p, 15, 0, NULL), 15);
    free(before);
    before = listing(f->pdir);
    rep = run(p, true, 3);
    expect_del(&rep.segments[0], 0, "log_start_offset");
    expect_del(&rep.segments[1], 10, "retention.ms");
    eng_retention_report_free(&rep);
    now = listing(f->pdir);
    assert_string_equal(before, now);
    free(now);
    free(before);
    assert_int_equal(eng_partition_log_start_offset(p), 15);

    /* The real run does what the dry run said. */
    rep = run(p, false, 3);
    assert_int_equal(rep.bytes_freed, freed);
    assert_true(rep.rolled);
    eng_retention_report_free(&rep);
    assert_int_equal(eng_partition_log_start_offset(p), 30);
    close_part(p);
}

/* ---- delete-records ------------------------------------------------------- */

static void test_delete_records(void **state)
{
    fixture *f = *state;
    eng_partition *p = open_part(f);
    segments(p, 3, eng_now_ms()); /* [0,10) [10,20) [20,30) active [30) */
    assert_int_equal(del(p, 15, 0, NULL), 15);
    assert_int_equal(count_lines(f, "incremented log start offset to 15"), 1);
    uint8_t *ck;
    size_t cklen;
    char path[700];
    snprintf(path, sizeof path, "%s/leader-epoch-checkpoint", f->pdir);
    assert_int_equal(ts_read_file(path, &ck, &cklen), 0);
    assert_int_equal(cklen, strlen("0\n1\n0 15\n"));
    assert_memory_equal(ck, "0\n1\n0 15\n", cklen);
    free(ck);

    /* Reads below the new start fail with its bounds; from it, intact. */
    read_out_of_range(p, 14, 15, 30);
    read_from(p, 15, 20);

    /* Never lowered; past the high watermark refused with the bounds. */
    assert_int_equal(del(p, 5, 0, NULL), 15);
    assert_int_equal(del(p, 15, 0, NULL), 15);
    eng_errdetail err = {0};
    assert_int_equal(del(p, 31, ENG_EOFFSET, &err), 15);
    assert_true(err.has_bounds && err.lo == 15 && err.hi == 30);
    assert_int_not_equal(eng_partition_delete_records(p, -2, &(int64_t){0}, NULL), 0);
    assert_int_equal(eng_partition_log_start_offset(p), 15);
    assert_int_equal(count_lines(f, "incremented log start offset"), 1);

    /* Retention then removes the segments wholly below the start, and
     * leaves the start where it is. */
    eng_retention_report rep = run(p, false, 1);
    expect_del(&rep.segments[0], 0, "log_start_offset");
    assert_int_equal(rep.log_start_offset_after, 15);
    eng_retention_report_free(&rep);
    assert_int_equal(eng_partition_log_start_offset(p), 15);
    assert_int_equal(count_lines(f, "incremented log start offset"), 1);

    /* -1: up to the high watermark (= HW allowed); then every closed
     * segment goes, the empty active one stays. */
    assert_int_equal(del(p, -1, 0, NULL), 30);
    assert_int_equal(del(p, 30, 0, NULL), 30);
    read_out_of_range(p, 29, 30, 30);
    rep = run(p, false, 2);
    assert_false(rep.rolled);
    eng_retention_report_free(&rep);
    expect_segs(p, 1, 30);
    assert_int_equal(count_lines(f, "incremented log start offset"), 2);
    close_part(p);
}

/* ---- .deleted, then unlinked ----------------------------------------------- */

static void test_deleted_then_unlinked(void **state)
{
    fixture *f = *state;
    f->hold = true;
    f->cfg.v[ENG_CFG_RETENTION_MS].i = 20000;
    f->cfg.v[ENG_CFG_FILE_DELETE_DELAY_MS].i = 1234;
    eng_partition *p = open_part(f);
    segments(p, 2, OLD_TS);
    append(p, 10, eng_now_ms());
    eng_retention_report rep = run(p, false, 2);
    eng_retention_report_free(&rep);
    assert_int_equal(f->ndeleted, 2);
    static const int64_t gone[] = {0, 10};
    for (size_t i = 0; i < 2; i++) {
        /* Handed over renamed, after the log start offset moved past it. */
        assert_int_equal(eng_segment_base(f->held[i]), gone[i]);
        assert_true(f->renamed_seen[i]);
        assert_true(f->lso_seen[i] >= 20);
        assert_int_equal(f->held_delay[i], 1234);
        assert_int_equal(seg_files(f->pdir, gone[i], ".deleted"), 3);
        assert_int_equal(seg_files(f->pdir, gone[i], ""), 0);
    }
    assert_int_equal(count_lines(f, "deleting segment 00000000000000000000"), 1);
    assert_int_equal(count_lines(f, "deleting segment 00000000000000000010"), 1);
    assert_int_equal(count_lines(f, "deleting segment"), 2);
    /* Whoever still holds a deleted segment reads it (the descriptors stay
     * valid); the owner unlinks when the delay is over. */
    uint8_t hdr[ENG_BATCH_OVERHEAD];
    size_t got;
    assert_int_equal(eng_segment_pread(f->held[1], hdr, sizeof hdr, 0, &got), 0);
    assert_int_equal(got, sizeof hdr);
    assert_int_equal(eng_be64(hdr), 10);
    for (size_t i = 0; i < 2; i++) {
        assert_int_equal(eng_segment_unlink(f->held[i]), 0);
        assert_int_equal(seg_files(f->pdir, gone[i], ".deleted"), 0);
        eng_segment_unref(f->held[i]);
        f->held[i] = NULL;
    }
    assert_true(seg_file(f->pdir, 20, ".log"));
    close_part(p);
}

/* ---- readers racing deletion ------------------------------------------------ */

#define READERS 4
#define VLEN 100

typedef struct race {
    eng_partition *p;
    _Atomic bool stop;
    _Atomic long records, passes, out_of_range, bad;
    _Atomic int ids;
    char why[512];
    pthread_mutex_t mu;
} race;

/* Records the first bad read (printf-style) and counts it. */
#define race_fail(r, ...)                                                                          \
    do {                                                                                           \
        pthread_mutex_lock(&(r)->mu);                                                              \
        if (!(r)->why[0])                                                                          \
            snprintf((r)->why, sizeof(r)->why, __VA_ARGS__);                                       \
        pthread_mutex_unlock(&(r)->mu);                                                            \
        atomic_fetch_add(&(r)->bad, 1);                                                            \
    } while (0)

/* Half the readers read whole passes from the log start; the other half
 * keep re-reading at the log start, where the segments go. */
static void *reader(void *arg)
{
    race *r = arg;
    bool at_start = atomic_fetch_add(&r->ids, 1) % 2;
    while (!atomic_load(&r->stop)) {
        int64_t off = eng_partition_log_start_offset(r->p);
        for (int reads = 0; !at_start || reads < 1; reads++) {
            eng_fetch ft;
            eng_errdetail err = {0};
            int rc = eng_partition_read(r->p, off, 2048, &ft, &err);
            if (rc == ENG_EOFFSET) {
                atomic_fetch_add(&r->out_of_range, 1);
                break; /* deleted under us: start again from the new start */
            }
            if (rc) {
                race_fail(r, "read at %lld: %s (%s)", (long long)off, eng_strerror(rc), err.message);
                return NULL;
            }
            if (ft.len == 0) { /* only at the high watermark */
                if (off < ft.high_watermark)
                    race_fail(r, "empty read at %lld below the high watermark %lld",
                              (long long)off, (long long)ft.high_watermark);
                eng_fetch_free(&ft);
                break;
            }
            int64_t next = walk_fetch(&ft, off, VLEN);
            if (next < 0 || next != ft.next_offset || next <= off) {
                race_fail(r, "records read from %lld are not intact or not from there: the fetch "
                          "holds [%lld, %lld), log start now %lld",
                          (long long)off, (long long)eng_be64(ft.data), (long long)ft.next_offset,
                          (long long)eng_partition_log_start_offset(r->p));
                eng_fetch_free(&ft);
                return NULL;
            }
            atomic_fetch_add(&r->records, (long)(next - off));
            eng_fetch_free(&ft);
            off = next;
        }
        atomic_fetch_add(&r->passes, 1);
    }
    return NULL;
}

static void test_readers_race_deletion(void **state)
{
    fixture *f = *state;
    eng_partition *p = open_part(f);
    race r = {.p = p};
    pthread_mutex_init(&r.mu, NULL);
    /* Four batches a segment; keep about three segments by size. */
    size_t blen = append_rec(p, 10, eng_now_ms(), VLEN, false, NULL);
    for (int i = 0; i < 3; i++)
        append_rec(p, 10, eng_now_ms(), VLEN, false, NULL);
    roll(p);
    set_cfg(p, ENG_CFG_RETENTION_BYTES, (int64_t)(3 * 4 * blen));

    pthread_t th[READERS];
    for (int i = 0; i < READERS; i++)
        assert_int_equal(pthread_create(&th[i], NULL, reader, &r), 0);
    long deleted = 0;
    for (int round = 0; round < 200 && !atomic_load(&r.bad); round++) {
        for (int i = 0; i < 4; i++)
            append_rec(p, 10, eng_now_ms(), VLEN, false, NULL);
        roll(p);
        eng_retention_report rep;
        assert_int_equal(eng_partition_retention(p, eng_now_ms(), false, &rep), 0);
        deleted += (long)rep.n;
        eng_retention_report_free(&rep);
        if (round % 50 == 49) { /* now and then everything goes */
            int64_t lso;
            assert_int_equal(eng_partition_delete_records(p, -1, &lso, NULL), 0);
            assert_int_equal(eng_partition_retention(p, eng_now_ms(), false, &rep), 0);
            deleted += (long)rep.n;
            eng_retention_report_free(&rep);
        }
        if (round % 16 == 0)
            usleep(500); /* let the readers run */
    }
    atomic_store(&r.stop, true);
    for (int i = 0; i < READERS; i++)
        pthread_join(th[i], NULL);
    if (atomic_load(&r.bad))
        fail_msg("%ld bad reads; first: %s", atomic_load(&r.bad), r.why);
    assert_true(deleted >= 150);
    assert_true(atomic_load(&r.records) > 0);
    assert_true(atomic_load(&r.passes) > 0);
    print_message("# %ld segments deleted; readers: %ld records, %ld passes, %ld out of range\n",
                  deleted, atomic_load(&r.records), atomic_load(&r.passes),
                  atomic_load(&r.out_of_range));
    pthread_mutex_destroy(&r.mu);
    /* No leftovers: every deleted segment was unlinked (no holder here). */
    char *l = listing(f->pdir);
    assert_null(strstr(l, ".deleted"));
    free(l);
    close_part(p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_size_rule_arithmetic, setup, teardown),
        cmocka_unit_test_setup_teardown(test_time_rule_stops_at_first_kept, setup, teardown),
        cmocka_unit_test_setup_teardown(test_log_start_offset_rule_any_policy, setup, teardown),
        cmocka_unit_test_setup_teardown(test_high_watermark_bound, setup, teardown),
        cmocka_unit_test_setup_teardown(test_roll_when_everything_goes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_future_timestamp_kept, setup, teardown),
        cmocka_unit_test_setup_teardown(test_dry_run_changes_nothing, setup, teardown),
        cmocka_unit_test_setup_teardown(test_delete_records, setup, teardown),
        cmocka_unit_test_setup_teardown(test_deleted_then_unlinked, setup, teardown),
        cmocka_unit_test_setup_teardown(test_readers_race_deletion, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
