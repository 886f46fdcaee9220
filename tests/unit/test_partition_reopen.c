/*
 * test_partition_reopen.c - a partition across rolls, stops and flushes.
 *
 *   - roll (an empty active segment stays), close, and reopen after a clean
 *     stop, with a missing index rebuilt;
 *   - reopen after an unclean stop: a garbage tail, a preallocated (zero
 *     padded) active segment, a damaged middle segment; an append refused
 *     in a preallocated segment does not come back;
 *   - flush.messages=1: every acknowledged append is on disk, concurrent
 *     appenders included (group commit); flush.messages=N flushes when
 *     the records since the last flush reach N, then counts again; a roll syncs the indexes an
 *     append's data-only fsync skipped, and only then; a roll trims a
 *     preallocated .log before the next segment exists, and syncs that
 *     only when a flush may already have moved the recovery point there.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "eng_fault.h"
#include "partition_fixture.h"

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <unistd.h>

/* ---- roll, close, reopen ------------------------------------------------ */

static void test_roll_close_reopen_clean(void **state)
{
    fixture *f = *state;
    eng_partition *p = open_part(f, true, 0, NULL);
    int64_t base;
    /* Rolling an empty active segment keeps it. */
    assert_int_equal(eng_partition_roll(p, &base), 0);
    assert_int_equal(base, 0);
    for (int i = 0; i < 3; i++)
        append_ok(p, 10 * i, 10, T0 + i, 300);
    assert_int_equal(eng_partition_roll(p, &base), 0);
    assert_int_equal(base, 30);
    assert_int_equal(eng_partition_roll(p, &base), 0);
    assert_int_equal(base, 30);
    /* The rolled segment is sealed and trimmed: one entry (29 -> pos of batch 2). */
    assert_int_equal(file_size(f->pdir, 0, ".index"), 8);
    assert_int_equal(file_size(f->pdir, 0, ".timeindex"), 12);
    for (int i = 3; i < 5; i++)
        append_ok(p, 10 * i, 10, T0 + i, 300);
    assert_int_equal(eng_partition_close(p), 0);
    assert_int_equal(eng_partition_recovery_point(p), 50);
    /* Closed: appends refused; the active segment is trimmed. */
    uint8_t buf[8192];
    size_t len = ts_build_batch(buf, sizeof buf, 50, 1, T0, 300);
    assert_int_equal(do_append(p, buf, len, -1, false, NULL, NULL), ENG_ESHUTDOWN);
    assert_int_equal(eng_partition_roll(p, &base), ENG_ESHUTDOWN);
    assert_int_equal(file_size(f->pdir, 30, ".index"), 0);
    assert_int_equal(file_size(f->pdir, 30, ".timeindex"), 12);
    long long log_bytes = file_size(f->pdir, 30, ".log");
    eng_partition_unref(p);
    /* A missing index is rebuilt even after a clean stop. */
    char path[600];
    snprintf(path, sizeof path, "%s/%020d.index", f->pdir, 0);
    assert_int_equal(unlink(path), 0);

    eng_load_stats st;
    p = open_part(f, true, 0, &st);
    assert_int_equal(st.segments, 2);
    assert_int_equal(st.segments_recovered, 1);
    assert_int_equal(file_size(f->pdir, 0, ".index"), 8);
    assert_int_equal(eng_partition_log_end_offset(p), 50);
    assert_int_equal(eng_partition_high_watermark(p), 50);
    assert_int_equal(eng_partition_log_start_offset(p), 0);
    assert_int_equal(file_size(f->pdir, 30, ".log"), log_bytes);
    /* Trimmed at the close, and left so until it takes an entry. */
    assert_int_equal(file_size(f->pdir, 30, ".index"), 0);
    assert_int_equal(read_and_check(p, 0, 300), 50);
    append_ok(p, 50, 10, T0 + 5, 300);
    assert_int_equal(eng_partition_log_end_offset(p), 60);
    assert_int_equal(read_and_check(p, 0, 300), 60);
    int64_t off, ts;
    assert_int_equal(eng_partition_max_timestamp(p, &off, &ts), 0);
    assert_int_equal(ts, T0 + 5);
    assert_int_equal(off, 50);
    eng_partition_unref(p);
}

static void test_reopen_unclean_truncates_garbage(void **state)
{
    fixture *f = *state;
    eng_partition *p = open_part(f, true, 0, NULL);
    for (int i = 0; i < 5; i++)
        append_ok(p, 10 * i, 10, T0 + i, 250);
    assert_int_equal(eng_partition_close(p), 0);
    eng_partition_unref(p);
    long long good = file_size(f->pdir, 0, ".log");
    assert_int_equal(good, 5 * 2731);

    char path[600];
    snprintf(path, sizeof path, "%s/%020d.log", f->pdir, 0);
    FILE *fp = fopen(path, "ab");
    assert_non_null(fp);
    for (int i = 0; i < 700; i++)
        fputc((i * 53 + 1) & 0xff, fp);
    assert_int_equal(fclose(fp), 0);

    eng_load_stats st;
    p = open_part(f, false, 0, &st);
    assert_non_null(p);
    assert_int_equal(st.bytes_truncated, 700);
    assert_true(st.segments_recovered >= 1);
    assert_int_equal(file_size(f->pdir, 0, ".log"), good);
    assert_int_equal(eng_partition_log_end_offset(p), 50);
    assert_int_equal(read_and_check(p, 0, 250), 50);
    append_ok(p, 50, 10, T0 + 5, 250);
    assert_int_equal(read_and_check(p, 0, 250), 60);
    eng_partition_unref(p);
}

/* After an unclean stop, what recovery read may be in the page cache only
 * (the process died, the machine did not): the recovery point stays at the
 * first segment it rewrote until a flush, so a second crash recovers it
 * again and a checkpoint never claims unsynced bytes. */
static void test_unclean_reopen_recovery_point_waits_for_flush(void **state)
{
    fixture *f = *state;
    f->cfg.v[ENG_CFG_SEGMENT_BYTES].i = 6000; /* two 2,731-byte batches a segment */
    eng_partition *p = open_part(f, true, 0, NULL);
    for (int i = 0; i < 6; i++)
        append_ok(p, 10 * i, 10, T0 + i, 250);
    eng_partition_unref(p); /* no close: a crash, the last checkpoint saying 20 */

    eng_load_stats st;
    p = open_part(f, false, 20, &st);
    assert_int_equal(st.segments_recovered, 2); /* 20 and 40 */
    assert_int_equal(eng_partition_log_end_offset(p), 60);
    assert_int_equal(eng_partition_recovery_point(p), 20);
    assert_true(eng_partition_has_unflushed(p));
    assert_int_equal(eng_partition_flush_upto(p, 60), 0);
    assert_int_equal(eng_partition_recovery_point(p), 60);
    eng_partition_unref(p);

    /* A crash with everything flushed: recovery rereads the last segment
     * (Kafka's rule) but what the checkpoint covers was on disk already. */
    p = open_part(f, false, 60, &st);
    assert_int_equal(st.segments_recovered, 1);
    assert_int_equal(eng_partition_recovery_point(p), 60);
    assert_int_equal(eng_partition_close(p), 0);
    eng_partition_unref(p);
    p = open_part(f, true, 60, &st); /* after a clean stop */
    assert_int_equal(st.segments_recovered, 0);
    assert_int_equal(eng_partition_recovery_point(p), 60);
    eng_partition_unref(p);
}

/* preallocate=true: a crash leaves the active .log padded with zeros. */
static void test_reopen_unclean_preallocated(void **state)
{
    fixture *f = *state;
    f->cfg.v[ENG_CFG_SEGMENT_BYTES].i = 1048576;
    f->cfg.v[ENG_CFG_PREALLOCATE].i = 1;
    eng_partition *p = open_part(f, true, 0, NULL);
    for (int i = 0; i < 3; i++)
        append_ok(p, 10 * i, 10, T0 + i, 250);
    assert_int_equal(file_size(f->pdir, 0, ".log"), 1048576);
    assert_int_equal(read_and_check(p, 0, 250), 30);
    eng_partition_unref(p); /* no close: a crash */

    eng_load_stats st;
    p = open_part(f, false, 0, &st);
    /* The zeros past the data are the preallocated space, trimmed without
     * counting as truncated data. */
    assert_int_equal(st.bytes_truncated, 0);
    assert_int_equal(st.segments_recovered, 1);
    assert_int_equal(eng_partition_log_end_offset(p), 30);
    assert_int_equal(read_and_check(p, 0, 250), 30);
    append_ok(p, 30, 10, T0 + 3, 250);
    assert_int_equal(read_and_check(p, 0, 250), 40);
    assert_int_equal(eng_partition_close(p), 0);
    eng_partition_unref(p);
    assert_int_equal(file_size(f->pdir, 0, ".log"), 4 * 2731);
}

/* preallocate=true: an append refused after its bytes were written (no
 * room for its index entries: 507) must not come back after a crash.  The
 * .log of a segment not preallocated is cut back to where it ended; a
 * preallocated one kept the whole batch past its data, where recovery, which
 * reads up to the first zeros, found a valid batch and kept it. */
static void test_refused_append_in_preallocated_segment_stays_out(void **state)
{
    fixture *f = *state;
    f->cfg.v[ENG_CFG_SEGMENT_BYTES].i = 1048576;
    f->cfg.v[ENG_CFG_PREALLOCATE].i = 1;
    eng_partition *p = open_part(f, true, 0, NULL);
    for (int i = 0; i < 3; i++)
        append_ok(p, 10 * i, 10, T0 + i, 250);
    uint8_t buf[MAX_RECS * 2100];
    size_t len = ts_build_batch(buf, sizeof buf, 30, 10, T0 + 3, 250);
    eng_errdetail err = {0};
    eng_fault_set("segment.append.index=enospc");
    int rc = do_append(p, buf, len, -1, true, NULL, &err);
    eng_fault_set(NULL);
    assert_int_equal(rc, -ENOSPC);
    assert_int_equal(eng_partition_log_end_offset(p), 30);
    eng_partition_unref(p); /* no close: a crash */

    eng_load_stats st;
    p = open_part(f, false, 0, &st);
    assert_int_equal(eng_partition_log_end_offset(p), 30);
    assert_int_equal(read_and_check(p, 0, 250), 30);
    append_ok(p, 30, 10, T0 + 4, 250);
    assert_int_equal(read_and_check(p, 0, 250), 40);
    assert_int_equal(eng_partition_close(p), 0);
    eng_partition_unref(p);
}

/* preallocate=true: startup trusts a segment that is not the last one to
 * its file's end once the recovery point has passed it, and with
 * flush.messages=1 the recovery point passes the active segment's data
 * before it rolls.  A power loss that kept the new segment but not the old
 * one's truncation left a sealed segment of segment.bytes ending in zeros
 * (its size counted by retention.bytes, its tail unreadable to the
 * cleaner).  So a roll trims and syncs a preallocated segment before it
 * creates the next one; the fault point inside that step tells whether the
 * roll ran it, and a failure there takes the dir offline. */
static void test_roll_syncs_preallocated_trim_first(void **state)
{
    fixture *f = *state;
    f->cfg.v[ENG_CFG_SEGMENT_BYTES].i = 1048576;
    f->cfg.v[ENG_CFG_PREALLOCATE].i = 1;
    f->cfg.v[ENG_CFG_FLUSH_MESSAGES].i = 1;
    _Atomic int offline = 0;
    eng_partition *p = open_watched(f, &offline);
    for (int i = 0; i < 3; i++)
        append_ok(p, 10 * i, 10, T0 + i, 250);
    eng_fault_set("roll.trim=eio");
    int64_t base;
    assert_int_equal(eng_partition_roll(p, &base), ENG_EOFFLINE);
    assert_int_equal(atomic_load(&offline), 1);
    assert_int_equal(file_size(f->pdir, 30, ".log"), -1); /* no segment after it */
    eng_fault_set(NULL);
    eng_partition_unref(p);

    /* Without the fault the roll leaves the old .log cut to its data. */
    ts_rmtree(f->pdir);
    atomic_store(&offline, 0);
    p = open_watched(f, &offline);
    for (int i = 0; i < 3; i++)
        append_ok(p, 10 * i, 10, T0 + i, 250);
    assert_int_equal(file_size(f->pdir, 0, ".log"), 1048576);
    assert_int_equal(eng_partition_roll(p, &base), 0);
    assert_int_equal(base, 30);
    assert_int_equal(file_size(f->pdir, 0, ".log"), 3 * 2731);
    append_ok(p, 30, 10, T0 + 3, 250);
    assert_int_equal(read_and_check(p, 0, 250), 40);
    eng_partition_unref(p);

    /* Not preallocated: the roll does not reach that step. */
    ts_rmtree(f->pdir);
    f->cfg.v[ENG_CFG_PREALLOCATE].i = 0;
    eng_fault_set("roll.trim=eio");
    p = open_watched(f, &offline);
    append_ok(p, 0, 10, T0, 250);
    assert_int_equal(eng_partition_roll(p, &base), 0);
    eng_fault_set(NULL);
    eng_partition_unref(p);
}

/* With the default flush policy nothing has moved the recovery point to
 * the preallocated segment's end when it rolls: the flush-log job after the
 * roll fdatasyncs the cut .log before it moves the recovery point there, so
 * the roll itself syncs nothing (the fault point inside that sync is not
 * reached) and the appender that rolls does not wait for the segment's
 * writeback.  The cut still happens at the roll. */
static void test_roll_leaves_preallocated_sync_to_flush(void **state)
{
    fixture *f = *state;
    f->cfg.v[ENG_CFG_SEGMENT_BYTES].i = 1048576;
    f->cfg.v[ENG_CFG_PREALLOCATE].i = 1;
    _Atomic int offline = 0;
    eng_partition *p = open_watched(f, &offline);
    for (int i = 0; i < 3; i++)
        append_ok(p, 10 * i, 10, T0 + i, 250);
    assert_int_equal(file_size(f->pdir, 0, ".log"), 1048576);
    eng_fault_set("roll.trim=eio");
    int64_t base;
    int rc = eng_partition_roll(p, &base);
    eng_fault_set(NULL);
    assert_int_equal(rc, 0);
    assert_int_equal(base, 30);
    assert_int_equal(atomic_load(&offline), 0);
    assert_int_equal(file_size(f->pdir, 0, ".log"), 3 * 2731);
    assert_int_equal(eng_partition_recovery_point(p), 0);
    assert_int_equal(eng_partition_flush_upto(p, base), 0); /* the flush-log job */
    assert_int_equal(eng_partition_recovery_point(p), 30);
    append_ok(p, 30, 10, T0 + 3, 250);
    assert_int_equal(read_and_check(p, 0, 250), 40);
    eng_partition_unref(p);
}

/* Three segments of 30 records (0, 30, 60), left without a clean close
 * (the process "crashed"), with a bit flipped in batch 1 of segment 30
 * (offsets 40..49). */
static void crash_with_damaged_middle_segment(fixture *f)
{
    eng_partition *p = open_part(f, true, 0, NULL);
    int64_t base;
    for (int s = 0; s < 3; s++) {
        for (int i = 0; i < 3; i++)
            append_ok(p, 30 * s + 10 * i, 10, T0 + 3 * s + i, 250);
        if (s < 2)
            assert_int_equal(eng_partition_roll(p, &base), 0);
    }
    assert_int_equal(eng_partition_log_end_offset(p), 90);
    eng_partition_unref(p);
    char path[600];
    snprintf(path, sizeof path, "%s/%020d.log", f->pdir, 30);
    FILE *fp = fopen(path, "r+b");
    assert_non_null(fp);
    assert_int_equal(fseek(fp, 2731 + 500, SEEK_SET), 0);
    int c = fgetc(fp);
    assert_int_equal(fseek(fp, 2731 + 500, SEEK_SET), 0);
    fputc(c ^ 0x80, fp);
    assert_int_equal(fclose(fp), 0);
}

static void test_reopen_unclean_damaged_middle_segment(void **state)
{
    fixture *f = *state;
    crash_with_damaged_middle_segment(f);

    eng_load_stats st;
    eng_partition *p = open_part(f, false, 0, &st);
    /* the last two batches of segment 30, and segment 60 deleted after it */
    assert_int_equal(st.bytes_truncated, 2 * 2731 + 3 * 2731);
    assert_int_equal(st.segments, 2);
    assert_true(st.segments_deleted >= 1);
    assert_int_equal(eng_partition_log_end_offset(p), 40);
    assert_int_equal(file_size(f->pdir, 60, ".log"), -1);
    assert_int_equal(file_size(f->pdir, 60, ".index"), -1);
    assert_int_equal(read_and_check(p, 0, 250), 40);
    /* The truncated segment is the active one again. */
    append_ok(p, 40, 10, T0 + 20, 250);
    eng_partition_info info;
    eng_partition_info_get(p, &info);
    assert_int_equal(info.active_base_offset, 30);
    assert_int_equal(info.log_end_offset, 50);
    assert_int_equal(read_and_check(p, 0, 250), 50);
    eng_partition_unref(p);
}

/* The same damage, and the start stops right after segment 30 is cut (a
 * crash there): the segments after it must already be gone.  They used to
 * be deleted after the cut, so the next start found segment 30 whole, kept
 * segment 60 behind it, and the log had a gap (offsets 40..59 missing)
 * with the history the first start had dropped back in it. */
static void test_reopen_stopped_after_middle_segment_cut(void **state)
{
    fixture *f = *state;
    crash_with_damaged_middle_segment(f);
    eng_partition *p;

    eng_partition_params pp = {.topic = "orders", .id = 0, .dir = f->pdir, .config = f->cfg,
                               .clean_shutdown = false, .log_start_offset = -1};
    eng_fault_set("segment.recover.after_cut=eio");
    int rc = eng_partition_open(&pp, &p, NULL);
    eng_fault_set(NULL);
    assert_int_equal(rc, -EIO);
    assert_int_equal(file_size(f->pdir, 30, ".log"), 2731);

    eng_load_stats st;
    p = open_part(f, false, 0, &st);
    assert_int_equal(file_size(f->pdir, 60, ".log"), -1);
    assert_int_equal(st.segments, 2);
    assert_int_equal(eng_partition_log_end_offset(p), 40);
    assert_int_equal(read_and_check(p, 0, 250), 40);
    append_ok(p, 40, 10, T0 + 20, 250);
    assert_int_equal(read_and_check(p, 0, 250), 50);
    eng_partition_unref(p);
}

typedef struct flusher {
    eng_partition *p;
    _Atomic int errors;
} flusher;

static void *flush_writer(void *arg)
{
    flusher *fl = arg;
    for (int i = 0; i < 20; i++) {
        uint8_t buf[1024];
        eng_record_spec r = rec(T0, "k", "v");
        size_t len = encode(buf, sizeof buf, &r, 1);
        eng_append_result res;
        if (do_append(fl->p, buf, len, -1, true, &res, NULL) ||
            eng_partition_recovery_point(fl->p) <= res.last_offset ||
            res.high_watermark <= res.last_offset)
            atomic_fetch_add(&fl->errors, 1);
    }
    return NULL;
}

static void test_flush_messages_one(void **state)
{
    fixture *f = *state;
    eng_partition *p = open_part(f, true, 0, NULL);
    /* Default policy: the recovery point waits for a flush. */
    append_ok(p, 0, 10, T0, 50);
    assert_int_equal(eng_partition_recovery_point(p), 0);
    assert_int_equal(eng_partition_high_watermark(p), 10);
    assert_int_equal(eng_partition_flush(p), 0);
    assert_int_equal(eng_partition_recovery_point(p), 10);
    assert_true(atomic_load(&f->hw_events) >= 1);

    /* flush.messages=1: every acknowledged append is on disk. */
    eng_config c;
    eng_partition_get_config(p, &c);
    c.v[ENG_CFG_FLUSH_MESSAGES].i = 1;
    eng_partition_set_config(p, &c);
    atomic_store(&f->check_durable, true);
    for (int i = 1; i < 6; i++) {
        append_ok(p, 10 * i, 10, T0 + i, 50);
        assert_int_equal(eng_partition_recovery_point(p), 10 * i + 10);
        assert_int_equal(eng_partition_high_watermark(p), 10 * i + 10);
    }
    /* Group commit: concurrent appenders, each acknowledged only once on disk. */
    flusher fl = {.p = p};
    pthread_t th[4];
    for (int i = 0; i < 4; i++)
        assert_int_equal(pthread_create(&th[i], NULL, flush_writer, &fl), 0);
    for (int i = 0; i < 4; i++)
        pthread_join(th[i], NULL);
    assert_int_equal(atomic_load(&fl.errors), 0);
    assert_int_equal(eng_partition_log_end_offset(p), 140);
    assert_int_equal(eng_partition_recovery_point(p), 140);
    assert_int_equal(atomic_load(&f->not_durable), 0);
    eng_partition_unref(p);
}

/* Appends' fsyncs (flush.messages) leave the active segment's indexes to the
 * next roll; a roll under the default policy owes no fsync.  The fault point
 * inside the roll's index sync tells whether the roll ran it. */
/* flush.messages=N counts records since the last flush: the append that
 * brings the count to N (not past it) flushes, and the count starts again
 * from zero, so the next appends below N do not. */
static void test_flush_messages_counts_records(void **state)
{
    fixture *f = *state;
    eng_partition *p = open_part(f, true, 0, NULL);
    eng_config c;
    eng_partition_get_config(p, &c);
    c.v[ENG_CFG_FLUSH_MESSAGES].i = 20;
    eng_partition_set_config(p, &c);
    static const int64_t want_rp[] = {0, 20, 20, 40, 40};
    for (int i = 0; i < 5; i++) {
        append_ok(p, 10 * i, 10, T0 + i, 50);
        if (eng_partition_recovery_point(p) != want_rp[i])
            fail_msg("after %d records the recovery point is %lld, not %lld", 10 * i + 10,
                     (long long)eng_partition_recovery_point(p), (long long)want_rp[i]);
        assert_int_equal(eng_partition_high_watermark(p), 10 * i + 10);
    }
    eng_partition_unref(p);
}

static void test_roll_syncs_indexes_only_when_owed(void **state)
{
    fixture *f = *state;
    eng_partition *p = open_part(f, true, 0, NULL);
    int64_t base;
    eng_fault_set("roll.index_sync=eio");
    /* Default policy: nothing skipped, the roll runs no index sync. */
    append_ok(p, 0, 10, T0, 50);
    assert_int_equal(eng_partition_roll(p, &base), 0);
    assert_int_equal(base, 10);
    /* flush.messages=1: the append's fsync skips the indexes, the roll owes
     * them and reaches the fault. */
    eng_config c;
    eng_partition_get_config(p, &c);
    c.v[ENG_CFG_FLUSH_MESSAGES].i = 1;
    eng_partition_set_config(p, &c);
    append_ok(p, 10, 10, T0 + 1, 50);
    assert_int_equal(eng_partition_roll(p, &base), -EIO);
    /* The roll stands all the same: the sealed segment is not last. */
    eng_partition_info info;
    eng_partition_info_get(p, &info);
    assert_int_equal(info.segment_count, 3);
    assert_int_equal(info.active_base_offset, 20);
    /* Paid once: the next roll owes nothing until a flush skips again. */
    eng_fault_set("roll.index_sync=eio");
    c.v[ENG_CFG_FLUSH_MESSAGES].i = INT64_MAX;
    eng_partition_set_config(p, &c);
    append_ok(p, 20, 10, T0 + 2, 50);
    assert_int_equal(eng_partition_roll(p, &base), 0);
    eng_fault_set(NULL);
    eng_partition_unref(p);
}

/* Recovery rebuilds indexes with the current index.interval.bytes; lowered
 * since the segment was written, the rebuilt offset index wants more
 * entries than segment.index.bytes holds.  It keeps what fits (a sparser
 * index is valid) instead of failing the open, which failed the whole
 * start after a kill -9 (found by a chaos run). */
static void test_recovery_with_lowered_index_interval(void **state)
{
    fixture *f = *state;
    f->cfg.v[ENG_CFG_SEGMENT_INDEX_BYTES].i = 4096; /* 512 offset entries */
    f->cfg.v[ENG_CFG_INDEX_INTERVAL_BYTES].i = 4096;
    eng_partition *p = open_part(f, true, 0, NULL);
    for (int b = 0; b < 700; b++)
        append_ok(p, b, 1, T0 + b, 250);
    eng_partition_info info;
    eng_partition_info_get(p, &info);
    assert_int_equal(info.segment_count, 1);
    eng_partition_unref(p); /* crash */
    f->cfg.v[ENG_CFG_INDEX_INTERVAL_BYTES].i = 0; /* an entry for every batch: 700 > 512 */
    eng_load_stats st;
    p = open_part(f, false, 0, &st);
    assert_int_equal(st.segments_recovered, 1);
    assert_int_equal(st.bytes_truncated, 0);
    assert_int_equal(eng_partition_log_end_offset(p), 700);
    assert_int_equal(read_and_check(p, 0, 250), 700);
    int64_t off, ts;
    assert_int_equal(eng_partition_offset_for_timestamp(p, T0 + 650, &off, &ts), 0);
    assert_int_equal(off, 650);
    eng_partition_unref(p);
}

#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(test_roll_close_reopen_clean),
        T(test_reopen_unclean_truncates_garbage),
        T(test_unclean_reopen_recovery_point_waits_for_flush),
        T(test_reopen_unclean_preallocated),
        T(test_refused_append_in_preallocated_segment_stays_out),
        T(test_roll_syncs_preallocated_trim_first),
        T(test_roll_leaves_preallocated_sync_to_flush),
        T(test_reopen_unclean_damaged_middle_segment),
        T(test_reopen_stopped_after_middle_segment_cut),
        T(test_flush_messages_one),
        T(test_flush_messages_counts_records),
        T(test_roll_syncs_indexes_only_when_owed),
        T(test_recovery_with_lowered_index_interval),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
