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
 *     exactly retention.ms old is kept, a millisecond more is not;
 *   - the log-start-offset rule alone (cleanup.policy=compact, or empty);
 *   - only segments wholly below the high watermark (flush.messages=1, an
 *     append whose durability is pending, even of the segment's last offset
 *     alone), then once its commit ran;
 *   - everything expired: an empty segment is rolled at the old log end
 *     offset first, and the next append gets that offset; without room to
 *     roll, all but the active segment go;
 *   - a future timestamp keeps its segment and the rest (warning, future_kept);
 *   - dry runs change nothing (files, log start offset, segments).
 *
 * Delete-records and the removal of deleted segments are in
 * test_delete_records.c.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "retention_fixture.h"
#include "eng_fault.h"

#include <sys/resource.h>

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

/* Kafka deletes a segment when now - largest timestamp > retention.ms: one
 * exactly retention.ms old stays, one a millisecond older goes.  The pass's
 * clock is given, so the boundary is exact. */
static void test_time_rule_boundary(void **state)
{
    fixture *f = *state;
    f->cfg.v[ENG_CFG_RETENTION_MS].i = 20000;
    eng_partition *p = open_part(f);
    segments(p, 1, OLD_TS);       /* [0,10): largest timestamp 1000 */
    append(p, 10, OLD_TS + 5000); /* active [10,20): young at either clock */
    eng_retention_report rep;
    assert_int_equal(eng_partition_retention(p, OLD_TS + 20000, false, &rep), 0);
    assert_int_equal(rep.n, 0);
    eng_retention_report_free(&rep);
    expect_segs(p, 2, 0);

    assert_int_equal(eng_partition_retention(p, OLD_TS + 20001, false, &rep), 0);
    assert_int_equal(rep.n, 1);
    expect_del(&rep.segments[0], 0, "retention.ms");
    eng_retention_report_free(&rep);
    assert_int_equal(eng_partition_log_start_offset(p), 10);
    expect_segs(p, 1, 10);
    close_part(p);
}

/* ---- log start offset rule ------------------------------------------------ */

/* Without "delete" (compact, or an empty policy: keep everything), old and
 * oversized segments stay; only a raised log start offset deletes. */
static void lso_rule_only(fixture *f, int64_t policy)
{
    f->cfg.v[ENG_CFG_CLEANUP_POLICY].i = policy;
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

static void test_log_start_offset_rule_any_policy(void **state)
{
    fixture *f = *state;
    lso_rule_only(f, ENG_POLICY_COMPACT);
    ts_rmtree(f->pdir);
    lso_rule_only(f, 0);
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

/* Wholly below means every offset: a segment whose one record waits for its
 * fsync (high watermark = its last offset) is kept too. */
static void test_high_watermark_bound_last_offset(void **state)
{
    fixture *f = *state;
    f->cfg.v[ENG_CFG_RETENTION_MS].i = 20000;
    f->cfg.v[ENG_CFG_FLUSH_MESSAGES].i = 1;
    eng_partition *p = open_part(f);
    segments(p, 1, OLD_TS); /* [0,10), durable */
    eng_append_result res;
    append_rec(p, 1, OLD_TS, 50, true, &res); /* offset 10, durability pending */
    assert_int_equal(eng_partition_high_watermark(p), 10);
    assert_int_equal(roll(p), 11); /* [0,10) [10,11) active [11) */

    eng_retention_report rep = run(p, false, 1);
    expect_del(&rep.segments[0], 0, "retention.ms");
    eng_retention_report_free(&rep);
    assert_true(seg_file(f->pdir, 10, ".log"));

    assert_int_equal(eng_partition_flush_upto(p, 11), 0);
    rep = run(p, false, 1);
    expect_del(&rep.segments[0], 10, "retention.ms");
    eng_retention_report_free(&rep);
    assert_int_equal(eng_partition_log_start_offset(p), 11);
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

/* Everything expired but no room for the new segment's files (here no
 * descriptor; a full disk or no inodes alike): the older segments still go,
 * since deleting them is what frees the room, and the active one stays
 * until a pass that can roll.  The pass used to fail whole (507) and keep
 * every segment, so a full disk stayed full. */
static void test_everything_goes_without_room_to_roll(void **state)
{
    fixture *f = *state;
    f->cfg.v[ENG_CFG_RETENTION_MS].i = 20000;
    eng_partition *p = open_part(f);
    segments(p, 2, OLD_TS);
    append(p, 7, OLD_TS); /* active [20,27), expired */
    struct rlimit saved;
    ts_fd_limit(0, &saved);
    eng_retention_report rep;
    int rc = eng_partition_retention(p, eng_now_ms(), false, &rep);
    ts_fd_limit_restore(&saved);
    assert_int_equal(rc, 0);
    assert_int_equal(rep.n, 2);
    assert_false(rep.rolled);
    assert_int_equal(rep.log_start_offset_after, 20);
    eng_retention_report_free(&rep);
    assert_int_equal(count_lines(f, "cannot roll before deleting every segment"), 1);
    expect_segs(p, 1, 20);
    assert_int_equal(seg_files(f->pdir, 0, "") + seg_files(f->pdir, 10, ""), 0);
    read_from(p, 20, 27);

    /* With room again, the next pass rolls and the active one goes. */
    rep = run(p, false, 1);
    assert_true(rep.rolled);
    assert_int_equal(rep.log_start_offset_after, 27);
    eng_retention_report_free(&rep);
    expect_segs(p, 1, 27);
    close_part(p);
}

/* Two expired sealed segments and an expired active one whose roll is
 * refused by fault: the sealed ones go, the active one waits. */
static void everything_goes_but_the_unrollable(fixture *f, const char *fault)
{
    f->cfg.v[ENG_CFG_RETENTION_MS].i = 20000;
    eng_partition *p = open_part(f);
    segments(p, 2, OLD_TS);
    append(p, 7, OLD_TS); /* active [20,27), expired */
    eng_fault_set(fault);
    eng_retention_report rep;
    int rc = eng_partition_retention(p, eng_now_ms(), false, &rep);
    eng_fault_set(NULL);
    assert_int_equal(rc, 0);
    assert_int_equal(rep.n, 2);
    assert_false(rep.rolled);
    assert_int_equal(rep.log_start_offset_after, 20);
    eng_retention_report_free(&rep);
    expect_segs(p, 1, 20);
    close_part(p);
}

/* A quota that is used up refuses the new segment's files with EDQUOT,
 * which the API answers as disk_full like ENOSPC: the pass must free room
 * there too rather than fail whole and keep every expired segment. */
static void test_everything_goes_without_quota_to_roll(void **state)
{
    everything_goes_but_the_unrollable(*state, "roll.create=edquot");
}

/* Out of memory maps (vm.max_map_count reached) the new segment cannot
 * map its indexes: as without descriptors, the older segments still go
 * (each one that goes unmaps its two indexes), and the active one waits.
 * The pass used to fail whole and keep every expired segment. */
static void test_everything_goes_without_maps_to_roll(void **state)
{
    everything_goes_but_the_unrollable(*state, "roll.create=enomem");
}

static eng_partition *open_watched(fixture *f, _Atomic int *offline)
{
    eng_partition_params pp = {.topic = "orders", .id = 0, .dir = f->pdir, .config = f->cfg,
                               .clean_shutdown = true, .recovery_point = 0,
                               .log_start_offset = -1, .dir_offline = offline,
                               .events = {.on_delete = on_delete, .on_roll = on_roll, .ctx = f}};
    eng_partition *p = NULL;
    assert_int_equal(eng_partition_open(&pp, &p, NULL), 0);
    return p;
}

/* Everything expired and the roll before the deletes fails for a reason
 * other than room (an I/O error creating the new segment): the dir goes
 * offline, as when an append's roll fails so.  Retention returned the
 * error and left the dir online, so appends went on over a directory
 * that had failed. */
static void test_roll_io_error_takes_dir_offline(void **state)
{
    fixture *f = *state;
    f->cfg.v[ENG_CFG_RETENTION_MS].i = 20000;
    _Atomic int offline = 0;
    eng_partition *p = open_watched(f, &offline);
    segments(p, 1, OLD_TS);
    append(p, 7, OLD_TS); /* active [10,17), expired */
    eng_fault_set("roll.create=eio");
    eng_retention_report rep;
    int rc = eng_partition_retention(p, eng_now_ms(), false, &rep);
    eng_fault_set(NULL);
    eng_retention_report_free(&rep);
    assert_true(rc != 0);
    assert_int_equal(atomic_load(&offline), 1);
    assert_int_equal(count_lines(f, "taking the log dir offline"), 1);
    expect_segs(p, 2, 0); /* nothing deleted */
    close_part(p);
}

/* Renaming a segment to .deleted creates a directory entry, which a full
 * disk or a used-up quota can refuse (no block for the directory) before
 * anything changed: the segment is deleted under its own name and the
 * dir stays online.  EDQUOT (and ENOMEM, the kernel's) took it offline
 * where ENOSPC did not. */
static void test_rename_refused_for_room_stays_online(void **state)
{
    fixture *f = *state;
    f->cfg.v[ENG_CFG_RETENTION_MS].i = 20000;
    _Atomic int offline = 0;
    eng_partition *p = open_watched(f, &offline);
    segments(p, 2, OLD_TS);
    append(p, 7, eng_now_ms());
    eng_fault_set("segment.dispose=edquot,segment.dispose=enomem@2");
    eng_retention_report rep = run(p, false, 2);
    eng_fault_set(NULL);
    eng_retention_report_free(&rep);
    assert_int_equal(atomic_load(&offline), 0);
    assert_int_equal(count_lines(f, "it is deleted under its name"), 2);
    assert_int_equal(count_lines(f, "offline"), 0);
    expect_segs(p, 1, 20);
    assert_int_equal(seg_files(f->pdir, 0, "") + seg_files(f->pdir, 10, ""), 0);
    append(p, 3, eng_now_ms());
    read_from(p, 20, 30);
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

/* A record stamped after the pass read the clock is young, not from the
 * future: no warning (it went off for LogAppendTime batches stamped a
 * millisecond after `now`), and the segment is kept as any young one. */
static void test_just_stamped_is_not_future(void **state)
{
    fixture *f = *state;
    f->cfg.v[ENG_CFG_RETENTION_MS].i = 20000;
    eng_partition *p = open_part(f);
    int64_t now = eng_now_ms();
    segments(p, 1, now); /* [0,10) stamped now */
    append(p, 10, now);
    eng_retention_report rep;
    /* the pass read the clock 5 ms before the records were stamped */
    assert_int_equal(eng_partition_retention(p, now - 5, false, &rep), 0);
    assert_int_equal(rep.n, 0);
    assert_int_equal(rep.future_kept, 0);
    eng_retention_report_free(&rep);
    assert_int_equal(count_lines(f, "in the future"), 0);
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
    assert_true(rep.rolled); /* the real run would roll first (nothing rolled: see rolls) */
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_size_rule_arithmetic, setup, teardown),
        cmocka_unit_test_setup_teardown(test_time_rule_stops_at_first_kept, setup, teardown),
        cmocka_unit_test_setup_teardown(test_time_rule_boundary, setup, teardown),
        cmocka_unit_test_setup_teardown(test_log_start_offset_rule_any_policy, setup, teardown),
        cmocka_unit_test_setup_teardown(test_high_watermark_bound, setup, teardown),
        cmocka_unit_test_setup_teardown(test_high_watermark_bound_last_offset, setup, teardown),
        cmocka_unit_test_setup_teardown(test_roll_when_everything_goes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_everything_goes_without_room_to_roll, setup, teardown),
        cmocka_unit_test_setup_teardown(test_everything_goes_without_quota_to_roll, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_everything_goes_without_maps_to_roll, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_rename_refused_for_room_stays_online, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_roll_io_error_takes_dir_offline, setup, teardown),
        cmocka_unit_test_setup_teardown(test_future_timestamp_kept, setup, teardown),
        cmocka_unit_test_setup_teardown(test_just_stamped_is_not_future, setup, teardown),
        cmocka_unit_test_setup_teardown(test_dry_run_changes_nothing, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
