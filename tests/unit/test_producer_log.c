/*
 * test_producer_log.c - idempotent producers through a partition: a retry
 * is answered with its first offsets and not stored, the state is saved in
 * snapshots at rolls and at close, rebuilt after a clean or an unclean stop
 * (snapshot, then the batches after it), survives unreadable or stale
 * snapshot files, leaves with retention, and expires.  A roll's snapshot
 * is synced by the flush after the roll, before the recovery point passes
 * it (and, short of descriptors to open it, by a later flush).
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "eng_retention.h"
#include "partition_fixture.h"

#include <dirent.h>
#include <unistd.h>

#include "eng_fault.h"
#include "eng_fs.h"

/* Batch timestamps: the wall clock, so producers are not found expired
 * (producer.id.expiration.ms, a day) when a restart loads them. */
static int64_t g_ts;

/* One record of producer pid at sequence seq (epoch ep), n records. */
static size_t idem_batch(uint8_t *buf, size_t cap, int64_t pid, int16_t ep, int32_t seq, int n,
                         int64_t ts)
{
    eng_record_spec recs[8];
    assert_true(n <= 8);
    for (int i = 0; i < n; i++)
        recs[i] = rec(ts + i, "k", "idempotent value");
    eng_batch_params bp;
    eng_batch_params_init(&bp);
    bp.producer_id = pid;
    bp.producer_epoch = ep;
    bp.base_sequence = seq;
    size_t len = eng_batch_encode(buf, cap, &bp, recs, (size_t)n);
    assert_true(len > 0);
    return len;
}

/* Appends as a client would; returns the engine's code and fills res. */
static int send(eng_partition *p, int64_t pid, int16_t ep, int32_t seq, int n,
                eng_append_result *res)
{
    uint8_t buf[4096];
    if (!g_ts)
        g_ts = eng_now_ms();
    size_t len = idem_batch(buf, sizeof buf, pid, ep, seq, n, g_ts);
    eng_errdetail err = {0};
    return do_append(p, buf, len, -1, true, res, &err);
}

static int64_t send_ok(eng_partition *p, int64_t pid, int16_t ep, int32_t seq, int n)
{
    eng_append_result res;
    int rc = send(p, pid, ep, seq, n, &res);
    if (rc)
        fail_msg("append of %lld/%d/%d: %s", (long long)pid, ep, seq, eng_strerror(rc));
    assert_false(res.duplicate);
    return res.base_offset;
}

/* A retry must come back with the offsets the first attempt got. */
static void expect_dup(eng_partition *p, int64_t pid, int16_t ep, int32_t seq, int n,
                       int64_t first)
{
    int64_t leo = eng_partition_log_end_offset(p);
    eng_append_result res;
    assert_int_equal(send(p, pid, ep, seq, n, &res), 0);
    assert_true(res.duplicate);
    assert_int_equal(res.base_offset, first);
    assert_int_equal(res.last_offset, first + n - 1);
    assert_int_equal(eng_partition_log_end_offset(p), leo);
}

/* open_part with the log start offset a checkpoint would give. */
static eng_partition *open_from(fixture *f, bool clean, int64_t rp, int64_t lso)
{
    eng_partition_params pp = {.topic = "orders", .id = 0, .dir = f->pdir, .config = f->cfg,
                               .clean_shutdown = clean, .recovery_point = rp,
                               .log_start_offset = lso};
    eng_partition *p = NULL;
    int rc = eng_partition_open(&pp, &p, NULL);
    if (rc)
        fail_msg("eng_partition_open: %s", eng_strerror(rc));
    return p;
}

static bool snapshot_exists(fixture *f, int64_t off)
{
    char path[700];
    snprintf(path, sizeof path, "%s/%020lld.snapshot", f->pdir, (long long)off);
    return access(path, F_OK) == 0;
}

static void test_retry_answered_not_stored(void **state)
{
    fixture *f = *state;
    eng_partition *p = open_part(f, true, 0, NULL);
    assert_int_equal(send_ok(p, 7, 0, 0, 3), 0);
    assert_int_equal(send_ok(p, 8, 2, 100, 1), 3);
    assert_int_equal(send_ok(p, 7, 0, 3, 2), 4);
    expect_dup(p, 7, 0, 0, 3, 0);
    expect_dup(p, 7, 0, 3, 2, 4);
    expect_dup(p, 8, 2, 100, 1, 3);
    eng_append_result res;
    assert_int_equal(send(p, 7, 0, 6, 1, &res), ENG_ESEQUENCE); /* 5 skipped */
    assert_int_equal(send(p, 7, 0, 4, 1, &res), ENG_ESEQUENCE); /* inside a batch, not a retry */
    assert_int_equal(send(p, 8, 1, 101, 1, &res), ENG_EPRODUCER_FENCED);
    assert_int_equal(eng_partition_log_end_offset(p), 6);

    /* Engine-built bytes (not a client's) are recorded without checks,
     * as Kafka's non-client origins are. */
    uint8_t buf[4096];
    size_t len = idem_batch(buf, sizeof buf, 7, 0, 42, 1, g_ts);
    eng_errdetail err = {0};
    assert_int_equal(do_append(p, buf, len, -1, false, &res, &err), 0);
    assert_false(res.duplicate);
    assert_int_equal(res.base_offset, 6);
    assert_int_equal(send_ok(p, 7, 0, 43, 1), 7);

    eng_producer_entry *e;
    size_t n;
    assert_int_equal(eng_partition_producers(p, &e, &n), 0);
    assert_int_equal(n, 2);
    assert_int_equal(e[0].producer_id, 7);
    assert_int_equal(e[0].nbatches, 4);
    assert_int_equal(e[0].batches[3].last_offset, 7);
    assert_int_equal(e[0].batches[3].last_seq, 43);
    assert_int_equal(e[1].producer_id, 8);
    assert_int_equal(e[1].epoch, 2);
    free(e);
    assert_int_equal(eng_partition_close(p), 0);
    eng_partition_unref(p);
}

/* A snapshot at each roll and at close; a clean start reads the one at the
 * log end and knows the producers' last batches. */
static void test_snapshots_and_clean_restart(void **state)
{
    fixture *f = *state;
    eng_partition *p = open_part(f, true, 0, NULL);
    send_ok(p, 1, 0, 0, 2);
    int64_t base;
    assert_int_equal(eng_partition_roll(p, &base), 0);
    assert_int_equal(base, 2);
    assert_true(snapshot_exists(f, 2));
    send_ok(p, 1, 0, 2, 2);
    send_ok(p, 2, 0, 0, 1);
    assert_int_equal(eng_partition_close(p), 0);
    eng_partition_unref(p);
    assert_true(snapshot_exists(f, 5));

    p = open_part(f, true, 5, NULL);
    expect_dup(p, 1, 0, 2, 2, 2);
    expect_dup(p, 2, 0, 0, 1, 4);
    eng_append_result res;
    assert_int_equal(send(p, 1, 0, 5, 1, &res), ENG_ESEQUENCE);
    assert_int_equal(send_ok(p, 1, 0, 4, 1), 5);
    assert_int_equal(eng_partition_close(p), 0);
    eng_partition_unref(p);
}

/* After a crash the state comes from the roll's snapshot and the batches
 * after it, so every batch since the roll (up to five) is still a retry. */
static void test_unclean_restart_replays(void **state)
{
    fixture *f = *state;
    eng_partition *p = open_part(f, true, 0, NULL);
    send_ok(p, 1, 0, 0, 1);
    int64_t base;
    assert_int_equal(eng_partition_roll(p, &base), 0);
    for (int i = 1; i <= 4; i++)
        send_ok(p, 1, 0, i, 1);
    send_ok(p, 3, 5, 9, 3);
    assert_int_equal(eng_partition_flush(p), 0);
    eng_partition_unref(p); /* no close: no snapshot at the log end */
    assert_false(snapshot_exists(f, 8));

    p = open_part(f, false, 0, NULL);
    for (int i = 1; i <= 4; i++)
        expect_dup(p, 1, 0, i, 1, i);
    expect_dup(p, 3, 5, 9, 3, 5);
    assert_int_equal(send_ok(p, 1, 0, 5, 1), 8);
    assert_true(snapshot_exists(f, 8)); /* written once rebuilt */
    eng_partition_unref(p);

    /* With every snapshot gone, the whole log is scanned. */
    char path[700];
    snprintf(path, sizeof path, "%s/%020d.snapshot", f->pdir, 1);
    assert_int_equal(unlink(path), 0);
    snprintf(path, sizeof path, "%s/%020d.snapshot", f->pdir, 8);
    assert_int_equal(unlink(path), 0);
    p = open_part(f, false, 0, NULL);
    expect_dup(p, 1, 0, 5, 1, 8);
    expect_dup(p, 3, 5, 9, 3, 5);
    eng_partition_unref(p);
}

/* Files left by another life of the log: a snapshot past the log end
 * (a truncation) is deleted, one that does not decode is deleted and the
 * state rebuilt from the one before it. */
static void test_stale_and_unreadable_snapshots(void **state)
{
    fixture *f = *state;
    eng_partition *p = open_part(f, true, 0, NULL);
    send_ok(p, 4, 0, 0, 1);
    int64_t base;
    assert_int_equal(eng_partition_roll(p, &base), 0);
    send_ok(p, 4, 0, 1, 1);
    assert_int_equal(eng_partition_close(p), 0);
    eng_partition_unref(p);
    assert_true(snapshot_exists(f, 2));

    char path[700];
    snprintf(path, sizeof path, "%s/%020d.snapshot", f->pdir, 2);
    FILE *fp = fopen(path, "wb");
    assert_non_null(fp);
    fputs("not a snapshot", fp);
    assert_int_equal(fclose(fp), 0);
    snprintf(path, sizeof path, "%s/%020d.snapshot", f->pdir, 99);
    fp = fopen(path, "wb");
    assert_non_null(fp);
    assert_int_equal(fclose(fp), 0);

    p = open_part(f, true, 2, NULL);
    assert_false(snapshot_exists(f, 99));
    expect_dup(p, 4, 0, 1, 1, 1); /* from the roll's snapshot and a scan */
    assert_int_equal(send_ok(p, 4, 0, 2, 1), 2);
    eng_partition_unref(p);
}

/* A log from before producer state was kept, stopped cleanly: nobody is
 * known (Kafka does not scan then), and a snapshot at the end spares the
 * next crash a full scan. */
static void test_clean_start_without_snapshots(void **state)
{
    fixture *f = *state;
    eng_partition *p = open_part(f, true, 0, NULL);
    send_ok(p, 5, 0, 0, 1);
    assert_int_equal(eng_partition_close(p), 0);
    eng_partition_unref(p);
    char path[700];
    snprintf(path, sizeof path, "%s/%020d.snapshot", f->pdir, 1);
    assert_int_equal(unlink(path), 0);

    p = open_part(f, true, 1, NULL);
    assert_true(snapshot_exists(f, 1));
    eng_producer_entry *e;
    size_t n;
    assert_int_equal(eng_partition_producers(p, &e, &n), 0);
    assert_int_equal(n, 0);
    assert_int_equal(send_ok(p, 5, 0, 7, 1), 1); /* unknown: any sequence */
    eng_partition_unref(p);
}

/* Retention takes the snapshot named by a deleted segment with it. */
static void test_retention_removes_snapshots(void **state)
{
    fixture *f = *state;
    eng_partition *p = open_part(f, true, 0, NULL);
    send_ok(p, 6, 0, 0, 1);
    int64_t base;
    assert_int_equal(eng_partition_roll(p, &base), 0);
    send_ok(p, 6, 0, 1, 1);
    assert_int_equal(eng_partition_roll(p, &base), 0);
    assert_true(snapshot_exists(f, 1));
    assert_true(snapshot_exists(f, 2));
    int64_t lso;
    assert_int_equal(eng_partition_delete_records(p, 2, &lso, NULL), 0);
    eng_retention_report rep;
    assert_int_equal(eng_partition_retention(p, g_ts, false, &rep), 0);
    assert_int_equal(rep.n, 2);
    eng_retention_report_free(&rep);
    assert_false(snapshot_exists(f, 1));
    assert_true(snapshot_exists(f, 2));
    /* The producer outlives its batches (Kafka keeps it until it expires). */
    expect_dup(p, 6, 0, 1, 1, 1);
    eng_partition_unref(p);
}

static void test_expiration(void **state)
{
    fixture *f = *state;
    eng_partition *p = open_part(f, true, 0, NULL);
    send_ok(p, 9, 0, 0, 1); /* maxTimestamp g_ts */
    assert_int_equal(eng_partition_expire_producers(p, g_ts + ENG_PRODUCER_EXPIRATION_MS - 1), 0);
    assert_int_equal(eng_partition_expire_producers(p, g_ts + ENG_PRODUCER_EXPIRATION_MS), 1);
    eng_producer_entry *e;
    size_t n;
    assert_int_equal(eng_partition_producers(p, &e, &n), 0);
    assert_int_equal(n, 0);
    /* Forgotten: its retry is appended again, any sequence is taken. */
    assert_int_equal(send_ok(p, 9, 0, 0, 1), 1);
    eng_partition_unref(p);
}

/* flush.messages=1: a retry of a batch still waiting for its fsync is
 * answered once that batch is on disk, as its first answer would be. */
static void test_durable_retry(void **state)
{
    fixture *f = *state;
    f->cfg.v[ENG_CFG_FLUSH_MESSAGES].i = 1;
    eng_partition *p = open_part(f, true, 0, NULL);
    uint8_t buf[4096];
    size_t len = idem_batch(buf, sizeof buf, 11, 0, 0, 2, g_ts);
    eng_append_opts o = {.expected_offset = -1, .producer_batches = true, .async_durable = true};
    eng_append_result res;
    eng_errdetail err = {0};
    assert_int_equal(eng_partition_append(p, buf, len, &o, &res, &err), 0);
    assert_true(res.durable_pending);
    assert_int_equal(eng_partition_high_watermark(p), 0);
    len = idem_batch(buf, sizeof buf, 11, 0, 0, 2, g_ts);
    assert_int_equal(eng_partition_append(p, buf, len, &o, &res, &err), 0);
    assert_true(res.duplicate);
    assert_true(res.durable_pending);
    assert_int_equal(res.durable_upto, 2);
    /* The synchronous path flushes before answering. */
    expect_dup(p, 11, 0, 0, 2, 0);
    assert_int_equal(eng_partition_high_watermark(p), 2);
    assert_true(eng_partition_recovery_point(p) >= 2);
    eng_partition_unref(p);
}

/* delete-records past the last roll's snapshot, then a crash: the batches
 * between that snapshot and the new log start are still in the segments,
 * and the running server knew them (Kafka keeps producers when the log
 * start moves).  Replaying only from the log start kept the snapshot's
 * older sequence, so the producer's next batch was refused and its retry
 * was not recognised. */
static void test_unclean_restart_after_delete_records(void **state)
{
    fixture *f = *state;
    eng_partition *p = open_part(f, true, 0, NULL);
    send_ok(p, 12, 0, 0, 1);
    int64_t base;
    assert_int_equal(eng_partition_roll(p, &base), 0);
    assert_true(snapshot_exists(f, 1));
    for (int i = 1; i <= 3; i++)
        send_ok(p, 12, 0, i, 1);
    int64_t lso;
    assert_int_equal(eng_partition_delete_records(p, 4, &lso, NULL), 0);
    assert_int_equal(lso, 4);
    assert_int_equal(eng_partition_flush(p), 0);
    eng_partition_unref(p); /* a crash: no snapshot at the log end */

    p = open_from(f, false, 0, 4);
    assert_int_equal(eng_partition_log_start_offset(p), 4);
    expect_dup(p, 12, 0, 3, 1, 3);
    assert_int_equal(send_ok(p, 12, 0, 4, 1), 4);
    eng_partition_unref(p);
}

/* The only readable snapshot left is below the first segment (the close's,
 * named by no segment, outlives retention): it misses the batches of the
 * deleted segments after it, so it is not used; the producer is then
 * unknown and takes its next sequence, where the snapshot's stale one
 * refused it. */
static void test_snapshot_below_first_segment_unused(void **state)
{
    fixture *f = *state;
    eng_partition *p = open_part(f, true, 0, NULL);
    send_ok(p, 13, 0, 0, 1);
    assert_int_equal(eng_partition_close(p), 0);
    eng_partition_unref(p);
    assert_true(snapshot_exists(f, 1));

    p = open_part(f, true, 1, NULL);
    send_ok(p, 13, 0, 1, 2);
    int64_t base;
    assert_int_equal(eng_partition_roll(p, &base), 0);
    assert_int_equal(base, 3);
    send_ok(p, 13, 0, 3, 1);
    assert_int_equal(eng_partition_roll(p, &base), 0);
    assert_int_equal(base, 4);
    int64_t lso;
    assert_int_equal(eng_partition_delete_records(p, 4, &lso, NULL), 0);
    eng_retention_report rep;
    assert_int_equal(eng_partition_retention(p, g_ts, false, &rep), 0);
    assert_int_equal(rep.n, 2);
    eng_retention_report_free(&rep);
    assert_true(snapshot_exists(f, 1));
    assert_int_equal(eng_partition_flush(p), 0);
    eng_partition_unref(p); /* a crash */

    /* The roll's snapshot torn by a power loss. */
    char path[700];
    snprintf(path, sizeof path, "%s/%020d.snapshot", f->pdir, 4);
    FILE *fp = fopen(path, "wb");
    assert_non_null(fp);
    fputs("torn", fp);
    assert_int_equal(fclose(fp), 0);

    p = open_from(f, false, 0, 4);
    assert_int_equal(send_ok(p, 13, 0, 4, 1), 4);
    eng_partition_unref(p);
}

/* How many files in the partition's directory end with suffix. */
/* A roll writes its snapshot without waiting for the disk; the flush-log
 * job after it (eng_partition_flush_upto to the new base) syncs it before
 * the recovery point passes it, once: later flushes cost no more fsyncs. */
typedef struct snap_sync_seen {
    eng_partition *p;
    int calls;
    int64_t rp_at_first;
} snap_sync_seen;

static void on_snapshot_sync(void *ctx)
{
    snap_sync_seen *s = ctx;
    if (s->calls++ == 0)
        s->rp_at_first = eng_partition_recovery_point(s->p);
}

static void test_roll_snapshot_synced_by_flush(void **state)
{
    fixture *f = *state;
    eng_partition *p = open_part(f, true, 0, NULL);
    send_ok(p, 1, 0, 0, 2);
    int64_t base;
    assert_int_equal(eng_partition_roll(p, &base), 0);
    assert_int_equal(base, 2);
    assert_true(snapshot_exists(f, 2));
    snap_sync_seen seen = {.p = p, .rp_at_first = -1};
    eng_fault_hook("snapshot.sync", on_snapshot_sync, &seen);
    assert_int_equal(eng_partition_flush_upto(p, base), 0);
    int calls = seen.calls;
    int64_t rp_at_first = seen.rp_at_first;
    send_ok(p, 1, 0, 2, 1);
    int rc = eng_partition_flush_upto(p, eng_partition_log_end_offset(p));
    int calls_after = seen.calls;
    eng_fault_hook(NULL, NULL, NULL);
    assert_int_equal(rc, 0);
    assert_int_equal(calls, 1);
    assert_int_equal(rp_at_first, 0); /* synced before the recovery point moved */
    assert_int_equal(calls_after, 1);
    assert_int_equal(eng_partition_recovery_point(p), 3);
    assert_int_equal(eng_partition_close(p), 0);
    eng_partition_unref(p);
}

/* With flush.messages=1 the records below the roll are on disk before the
 * roll writes its snapshot: the flush-log job then has no data to flush,
 * and still syncs the snapshot. */
static void test_roll_snapshot_synced_when_data_was(void **state)
{
    fixture *f = *state;
    f->cfg.v[ENG_CFG_FLUSH_MESSAGES].i = 1;
    eng_partition *p = open_part(f, true, 0, NULL);
    send_ok(p, 1, 0, 0, 2);
    assert_int_equal(eng_partition_recovery_point(p), 2);
    int64_t base;
    assert_int_equal(eng_partition_roll(p, &base), 0);
    snap_sync_seen seen = {.p = p, .rp_at_first = -1};
    eng_fault_hook("snapshot.sync", on_snapshot_sync, &seen);
    int rc = eng_partition_flush_upto(p, base);
    eng_fault_hook(NULL, NULL, NULL);
    assert_int_equal(rc, 0);
    assert_int_equal(seen.calls, 1);
    assert_int_equal(eng_partition_close(p), 0);
    eng_partition_unref(p);
}

/* Out of descriptors, the flush after a roll cannot open the roll's
 * snapshot (or its dir) to sync it.  No fsync ran, so none failed: the
 * flush succeeds for the data, the recovery point waits, and the dir stays
 * online (it was taken offline, refusing every append until a restart);
 * once descriptors are back the next flush syncs the snapshot and moves
 * the recovery point. */
static void test_snapshot_sync_short_of_descriptors_waits(void **state)
{
    fixture *f = *state;
    _Atomic int offline = 0;
    eng_partition *p = open_watched(f, &offline);
    send_ok(p, 1, 0, 0, 2);
    int64_t base;
    assert_int_equal(eng_partition_roll(p, &base), 0);
    eng_fault_set("snapshot.sync=emfile@*");
    int rc = eng_partition_flush_upto(p, base);
    eng_fault_set(NULL);
    assert_int_equal(rc, 0);
    assert_int_equal(atomic_load(&offline), 0);
    assert_int_equal(eng_partition_recovery_point(p), 0);
    send_ok(p, 1, 0, 2, 1);
    assert_int_equal(eng_partition_flush_upto(p, eng_partition_log_end_offset(p)), 0);
    assert_int_equal(eng_partition_recovery_point(p), 3);
    assert_int_equal(atomic_load(&offline), 0);
    assert_int_equal(eng_partition_close(p), 0);
    eng_partition_unref(p);
}

static int count_files(fixture *f, const char *suffix)
{
    DIR *d = opendir(f->pdir);
    assert_non_null(d);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t len = strlen(e->d_name), m = strlen(suffix);
        n += len >= m && strcmp(e->d_name + len - m, suffix) == 0;
    }
    closedir(d);
    return n;
}

/* A crash with no snapshot at all (the partition never rolled, never
 * stopped cleanly) after delete-records moved the log start past a
 * producer's last batch, still in the first segment.  The rebuild read only
 * from the log start, so the producer was forgotten and a retry of its last
 * acknowledged batch was stored a second time, where the README promises
 * the state outlives the producer's batches and that with no snapshot the
 * whole log's batch headers are read. */
static void test_unclean_restart_without_snapshot_after_delete_records(void **state)
{
    fixture *f = *state;
    eng_partition *p = open_part(f, true, 0, NULL);
    send_ok(p, 14, 0, 0, 1);
    send_ok(p, 14, 0, 1, 1);
    send_ok(p, 15, 0, 0, 2);
    int64_t lso;
    assert_int_equal(eng_partition_delete_records(p, 3, &lso, NULL), 0);
    assert_int_equal(lso, 3);
    assert_int_equal(eng_partition_flush(p), 0);
    eng_partition_unref(p); /* a crash */
    assert_int_equal(count_files(f, ".snapshot"), 0);

    p = open_from(f, false, 0, 3);
    assert_int_equal(eng_partition_log_start_offset(p), 3);
    expect_dup(p, 14, 0, 1, 1, 1);
    expect_dup(p, 15, 0, 0, 2, 2);
    assert_int_equal(send_ok(p, 14, 0, 2, 1), 4);
    eng_partition_unref(p);
}

/* Each clean stop writes a snapshot at the log end, which names no segment,
 * so retention never takes it: every restart left one for good.  A start
 * removes the snapshots no segment names but the one its state stands on
 * (Kafka's removeStraySnapshots), and the temporary file of a snapshot
 * write a crash cut short. */
static void test_stray_snapshots_removed(void **state)
{
    fixture *f = *state;
    for (int i = 0; i < 4; i++) {
        eng_partition *p = open_part(f, true, i, NULL);
        send_ok(p, 14, 0, i, 1);
        assert_int_equal(eng_partition_close(p), 0);
        eng_partition_unref(p);
    }
    char path[700];
    snprintf(path, sizeof path, "%s/%020d.snapshot.tmp", f->pdir, 4);
    FILE *fp = fopen(path, "wb");
    assert_non_null(fp);
    assert_int_equal(fclose(fp), 0);

    eng_partition *p = open_part(f, true, 4, NULL);
    assert_int_equal(count_files(f, ".snapshot"), 1);
    assert_true(snapshot_exists(f, 4));
    assert_int_equal(count_files(f, ".snapshot.tmp"), 0);
    expect_dup(p, 14, 0, 3, 1, 3);
    /* A roll's snapshot names its segment and stays. */
    int64_t base;
    assert_int_equal(eng_partition_roll(p, &base), 0);
    send_ok(p, 14, 0, 4, 1);
    assert_int_equal(eng_partition_flush(p), 0);
    eng_partition_unref(p); /* a crash */

    p = open_part(f, false, 0, NULL);
    assert_true(snapshot_exists(f, 4));
    assert_true(snapshot_exists(f, 5));
    assert_int_equal(count_files(f, ".snapshot"), 2);
    expect_dup(p, 14, 0, 4, 1, 4);
    eng_partition_unref(p);
}

/* After a clean stop whose only snapshot does not read (a disk error, or
 * one this version cannot take), the state comes from a scan of the log,
 * as in Kafka, which skips the scan only when no snapshot file exists at
 * all (a log from before producer state was kept).  The start took the
 * deleted snapshot for "none": the producer was forgotten and its retry
 * appended twice. */
static void test_clean_start_with_unreadable_snapshot_scans(void **state)
{
    fixture *f = *state;
    eng_partition *p = open_part(f, true, 0, NULL);
    send_ok(p, 15, 0, 0, 2);
    send_ok(p, 15, 0, 2, 1);
    assert_int_equal(eng_partition_close(p), 0);
    eng_partition_unref(p);
    assert_int_equal(count_files(f, ".snapshot"), 1);

    char path[700];
    snprintf(path, sizeof path, "%s/%020d.snapshot", f->pdir, 3);
    FILE *fp = fopen(path, "r+b");
    assert_non_null(fp);
    assert_int_equal(fseek(fp, 20, SEEK_SET), 0);
    fputc('X', fp);
    assert_int_equal(fclose(fp), 0);

    p = open_part(f, true, 3, NULL);
    expect_dup(p, 15, 0, 2, 1, 2);
    eng_append_result res;
    assert_int_equal(send(p, 15, 0, 7, 1, &res), ENG_ESEQUENCE);
    assert_int_equal(send_ok(p, 15, 0, 3, 1), 3);
    eng_partition_unref(p);
}

/* On a LogAppendTime topic a retry is answered with the append time its
 * batch got (Kafka's duplicate answer carries the batch's timestamp), not
 * -1: the first answer and the retry's must agree. */
static void test_retry_answer_keeps_log_append_time(void **state)
{
    fixture *f = *state;
    f->cfg.v[ENG_CFG_MESSAGE_TIMESTAMP_TYPE].i = ENG_TS_LOG_APPEND_TIME;
    eng_partition *p = open_part(f, true, 0, NULL);
    eng_append_result first, again;
    assert_int_equal(send(p, 16, 0, 0, 2, &first), 0);
    assert_false(first.duplicate);
    assert_true(first.log_append_time > 0);
    assert_int_equal(send(p, 16, 0, 0, 2, &again), 0);
    assert_true(again.duplicate);
    assert_int_equal(again.base_offset, 0);
    assert_int_equal(again.log_append_time, first.log_append_time);
    eng_partition_unref(p);
}

int main(void)
{
    g_ts = eng_now_ms();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_retry_answered_not_stored, setup, teardown),
        cmocka_unit_test_setup_teardown(test_snapshots_and_clean_restart, setup, teardown),
        cmocka_unit_test_setup_teardown(test_unclean_restart_replays, setup, teardown),
        cmocka_unit_test_setup_teardown(test_stale_and_unreadable_snapshots, setup, teardown),
        cmocka_unit_test_setup_teardown(test_clean_start_without_snapshots, setup, teardown),
        cmocka_unit_test_setup_teardown(test_retention_removes_snapshots, setup, teardown),
        cmocka_unit_test_setup_teardown(test_expiration, setup, teardown),
        cmocka_unit_test_setup_teardown(test_durable_retry, setup, teardown),
        cmocka_unit_test_setup_teardown(test_unclean_restart_after_delete_records, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_snapshot_below_first_segment_unused, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_unclean_restart_without_snapshot_after_delete_records,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_stray_snapshots_removed, setup, teardown),
        cmocka_unit_test_setup_teardown(test_clean_start_with_unreadable_snapshot_scans, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_retry_answer_keeps_log_append_time, setup, teardown),
        cmocka_unit_test_setup_teardown(test_roll_snapshot_synced_by_flush, setup, teardown),
        cmocka_unit_test_setup_teardown(test_roll_snapshot_synced_when_data_was, setup, teardown),
        cmocka_unit_test_setup_teardown(test_snapshot_sync_short_of_descriptors_waits, setup,
                                        teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
