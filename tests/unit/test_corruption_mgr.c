/*
 * test_corruption_mgr.c - the corruption table at manager level (engine, no
 * HTTP), with the service's metadata codec, so the clean-shutdown marker and
 * the checkpoint files are the real ones; the partition-level rows are in
 * test_corruption.c.  The data dir holds topic orders built as the template
 * of corruption_fixture.h and closed cleanly; each row damages it and
 * reopens:
 *
 *   - .index and .timeindex deleted, or garbled, or the active segment's
 *     last offset entry shifted into its batch, WITH the marker: rebuilt,
 *     byte-identical to what the appends wrote;
 *   - recovery-point-offset-checkpoint with a wrong count or garbage: full
 *     recovery even with the marker (a good one without the marker
 *     recovers the active segment only, with the marker nothing);
 *   - log-start-offset-checkpoint garbage: ignored, start = first base;
 *   - cleaner-offset-checkpoint garbage: ignored, the next clean works
 *     from the log start and writes a valid checkpoint;
 *   - topic metadata that does not parse, claims more partitions than a
 *     topic may have, or is a copy: the start stops naming the file, with
 *     nothing touched;
 *   - a partition directory gone: it restarts empty at the checkpointed
 *     offset.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "corruption_fixture.h"
#include "eng_cleaner.h"
#include "eng_checkpoint.h"
#include "eng_config.h"
#include "eng_fs.h"
#include "eng_manager.h"
#include "eng_retention.h"
#include "support.h"
#include "svc_meta.h"

#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

static char *g_tmp;

static int group_setup(void **state)
{
    (void)state;
    return (g_tmp = ts_tmpdir()) ? 0 : -1;
}

static int group_teardown(void **state)
{
    (void)state;
    ts_rmtree(g_tmp);
    free(g_tmp);
    return 0;
}

/* ---- manager level ---------------------------------------------------------------------- */

typedef struct mfix {
    char data[400], pdir[512];
    eng_manager_opts opts;
} mfix;
static mfix g_m;

static eng_manager *mopen(void)
{
    eng_manager *m = NULL;
    eng_errdetail err = {0};
    int rc = eng_manager_open(&g_m.opts, &m, &err);
    if (rc)
        fail_msg("eng_manager_open: %s (%s)", eng_strerror(rc), err.message);
    return m;
}

static void mpath(const char *name, char *buf, size_t len)
{
    snprintf(buf, len, "%s/%s", g_m.data, name);
}

static void write_text(const char *path, const char *text)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
}

/* A fresh data dir with topic orders (3 segments, as the template), closed
 * cleanly: marker and checkpoints written. */
static void mbuild(const char *policy)
{
    char dir[400];
    snprintf(dir, sizeof dir, "%s/mgr", g_tmp);
    ts_rmtree(dir);
    snprintf(g_m.data, sizeof g_m.data, "%s", dir);
    snprintf(g_m.pdir, sizeof g_m.pdir, "%s/orders-0", dir);
    g_m.opts.log_dir = g_m.data;
    eng_config_defaults_init(&g_m.opts.defaults);
    g_m.opts.codec = svc_meta_codec();
    eng_jobs_opts_default(&g_m.opts.jobs);
    eng_manager *m = mopen();
    const char *keys[] = {"index.interval.bytes", "cleanup.policy"};
    const char *vals[] = {"100", policy};
    eng_errdetail err = {0};
    assert_int_equal(eng_manager_create_topic(m, "orders", 1, keys, vals, 2, &err), 0);
    eng_partition *p;
    assert_int_equal(eng_manager_partition(m, "orders", 0, &p, NULL), 0);
    for (int b = 0; b < NB; b++) {
        int64_t nb;
        if (b == SEG1 || b == SEG2)
            assert_int_equal(eng_partition_roll(p, &nb), 0);
        append_batch(p, b);
    }
    eng_partition_unref(p);
    eng_manager_close(m);
    char marker[1024];
    mpath(".kafka_cleanshutdown", marker, sizeof marker);
    assert_true(eng_fs_exists(marker));
}

static void mreport(eng_manager *m, eng_startup_report *r)
{
    eng_manager_startup_report(m, r);
}

/* Reads every index file of the partition into bufs (for byte comparison). */
static void snapshot_indexes(uint8_t *bufs[6], size_t lens[6])
{
    for (int i = 0; i < 6; i++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/%020d%s", g_m.pdir, 15 * (i / 2), i % 2 ? ".timeindex" : ".index");
        assert_int_equal(ts_read_file(path, &bufs[i], &lens[i]), 0);
    }
}

static void test_indexes_rebuilt_with_marker(void **state)
{
    (void)state;
    for (int row = 0; row < 3; row++) {
        mbuild("delete");
        uint8_t *want[6], *got[6];
        size_t wl[6], gl[6];
        snapshot_indexes(want, wl);
        char path[1024];
        for (int i = 0; i < 6; i++) {
            snprintf(path, sizeof path, "%s/%020d%s", g_m.pdir, 15 * (i / 2), i % 2 ? ".timeindex" : ".index");
            if (row == 0 && i != 3) /* missing: every file but 15.timeindex */
                assert_int_equal(unlink(path), 0);
            if (row == 2 && i == 4) {
                /* the active segment's last entry 5 bytes into its batch: it
                 * still increases, so only the next offset's scan from it
                 * can tell (which used to answer the log end offset from
                 * the batch before it and trust the index) */
                int fd = open(path, O_RDWR);
                uint8_t e[4];
                off_t at = (off_t)wl[i] - 4;
                assert_int_equal(pread(fd, e, 4, at), 4);
                uint32_t pos = (uint32_t)e[0] << 24 | (uint32_t)e[1] << 16 | (uint32_t)e[2] << 8 | e[3];
                pos += 5;
                e[0] = (uint8_t)(pos >> 24), e[1] = (uint8_t)(pos >> 16), e[2] = (uint8_t)(pos >> 8),
                e[3] = (uint8_t)pos;
                assert_int_equal(pwrite(fd, e, 4, at), 4);
                close(fd);
            }
            if (row == 1 && i < 4) { /* garbled: same size, nonsense entries */
                int fd = open(path, O_WRONLY);
                uint8_t junk[512];
                memset(junk, 0xAB, sizeof junk);
                assert_int_equal(pwrite(fd, junk, wl[i] < sizeof junk ? wl[i] : sizeof junk, 0) >= 0, 1);
                close(fd);
            }
        }
        eng_manager *m = mopen();
        eng_startup_report r;
        mreport(m, &r);
        assert_true(r.clean_shutdown);
        /* Deleted: every segment lacks a file; garbled: segments 0 and 15;
         * shifted: the active one. */
        assert_int_equal(r.segments_recovered, row == 0 ? 3 : row == 1 ? 2 : 1);
        eng_partition *p;
        assert_int_equal(eng_manager_partition(m, "orders", 0, &p, NULL), 0);
        eng_segment *active;
        assert_int_equal(eng_partition_segment(p, 30, &active), 0);
        assert_false(eng_segment_index_distrusted(active)); /* rebuilt: read through again */
        eng_segment_unref(active);
        eng_partition_unref(p);
        assert_int_equal(r.bytes_truncated, 0);
        eng_manager_close(m); /* trims the active segment's indexes again */
        snapshot_indexes(got, gl);
        for (int i = 0; i < 6; i++) {
            if (gl[i] != wl[i] || memcmp(got[i], want[i], wl[i]))
                fail_msg("row %d: index file %d differs from what the appends wrote", row, i);
            free(got[i]);
            free(want[i]);
        }
        expect_files(g_m.pdir, NULL, 0, 3 * NB, 3);
    }
}

static void test_recovery_checkpoint_garbage(void **state)
{
    (void)state;
    static const struct {
        const char *text; /* NULL: keep the good one */
        bool marker;
        uint32_t recovered;
    } rows[] = {
        {NULL, true, 0},                      /* clean: nothing recovered */
        {NULL, false, 1},                     /* unclean: from the recovery point (the active) */
        {"0\n3\norders 0 45\n", true, 3},     /* wrong count: full recovery, even with the marker */
        {"0\n1\norders 0 45\nextra 0 1\n", false, 3},
        {"this is not a checkpoint\n", true, 3},
        {"1\n1\norders 0 45\n", true, 3},     /* unknown version */
        {"0\n1\norders zero 45\n", false, 3},
    };
    char ckpt[1024], marker[1024];
    mpath("recovery-point-offset-checkpoint", ckpt, sizeof ckpt);
    mpath(".kafka_cleanshutdown", marker, sizeof marker);
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        mbuild("delete");
        if (rows[i].text)
            write_text(ckpt, rows[i].text);
        if (!rows[i].marker)
            assert_int_equal(unlink(marker), 0);
        eng_manager *m = mopen();
        eng_startup_report r;
        mreport(m, &r);
        if (r.segments_recovered != rows[i].recovered)
            fail_msg("row %zu: %u segments recovered, expected %u", i, r.segments_recovered,
                     rows[i].recovered);
        assert_int_equal(r.clean_shutdown, rows[i].marker);
        eng_partition *p;
        assert_int_equal(eng_manager_partition(m, "orders", 0, &p, NULL), 0);
        assert_int_equal(eng_partition_log_end_offset(p), 3 * NB);
        eng_partition_unref(p);
        eng_manager_close(m);
    }
}

static void test_start_offset_checkpoint_garbage(void **state)
{
    (void)state;
    mbuild("delete");
    char path[1024];
    mpath("log-start-offset-checkpoint", path, sizeof path);
    write_text(path, "0\n2\norders 0 9\n");
    eng_manager *m = mopen();
    eng_partition *p;
    assert_int_equal(eng_manager_partition(m, "orders", 0, &p, NULL), 0);
    assert_int_equal(eng_partition_log_start_offset(p), 0); /* not 9: the file is not trusted */
    eng_partition_unref(p);
    eng_manager_close(m);
}

static void test_cleaner_checkpoint_garbage(void **state)
{
    (void)state;
    mbuild("compact");
    char path[1024];
    mpath("cleaner-offset-checkpoint", path, sizeof path);
    write_text(path, "0\n1\norders 0 forty\n");
    eng_cleaner_opts co;
    eng_cleaner_opts_default(&co);
    co.threads = 0;
    co.dedupe_buffer_bytes = 1 << 20;
    g_m.opts.cleaner = &co;
    eng_manager *m = mopen();
    g_m.opts.cleaner = NULL;
    assert_int_equal(eng_manager_start_cleaner(m), 0);
    eng_cleaner *c = eng_manager_cleaner(m);
    assert_int_equal(eng_cleaner_checkpoint(c, "orders", 0), -1); /* ignored */
    eng_partition *p;
    assert_int_equal(eng_manager_partition(m, "orders", 0, &p, NULL), 0);
    eng_clean_stats st;
    assert_int_equal(eng_cleaner_clean_now(c, p, false, &st), 0);
    assert_int_equal(st.first_dirty, 0); /* from the log start */
    assert_int_equal(st.end_offset, 3 * SEG2);
    eng_partition_unref(p);
    eng_manager_close(m);
    uint8_t *txt;
    size_t len;
    assert_int_equal(ts_read_file(path, &txt, &len), 0);
    assert_int_equal(len, strlen("0\n1\norders 0 30\n"));
    assert_memory_equal(txt, "0\n1\norders 0 30\n", len);
    free(txt);
}

static eng_manager *mopen_fails(eng_errdetail *err)
{
    eng_manager *m = NULL;
    *err = (eng_errdetail){0};
    int rc = eng_manager_open(&g_m.opts, &m, err);
    if (rc == 0)
        fail_msg("eng_manager_open succeeded");
    assert_null(m);
    return m;
}

/* Metadata that does not parse, or a copy naming a topic that has its own
 * file, stops the start with the file's name, and nothing is touched: the
 * partition directory stays, the checkpoints keep the topic's entries
 * (records:delete's log start offset among them).  Skipped, the topic had
 * vanished, its directory was set aside as a stray and its checkpoint
 * entries dropped; a copy loaded the topic twice over the same files. */
static void test_bad_metadata_stops_the_start(void **state)
{
    (void)state;
    for (int row = 0; row < 3; row++) {
        mbuild("delete");
        eng_manager *m = mopen();
        eng_partition *p;
        assert_int_equal(eng_manager_partition(m, "orders", 0, &p, NULL), 0);
        int64_t lso;
        eng_errdetail err = {0};
        assert_int_equal(eng_partition_delete_records(p, 9, &lso, &err), 0);
        eng_partition_unref(p);
        eng_manager_close(m);
        char meta[1024], copy[1024], moved[1024], ckpt[1024];
        mpath("meta/orders.json", meta, sizeof meta);
        mpath("meta/orders-copy.json", copy, sizeof copy);
        mpath("orders.json.bak", moved, sizeof moved);
        mpath("log-start-offset-checkpoint", ckpt, sizeof ckpt);
        uint8_t *ck0, *ck1;
        size_t ck0_len, ck1_len;
        assert_int_equal(ts_read_file(ckpt, &ck0, &ck0_len), 0);
        uint8_t *good;
        size_t good_len;
        assert_int_equal(ts_read_file(meta, &good, &good_len), 0);
        if (row == 0) {
            assert_int_equal(rename(meta, moved), 0);
            write_text(meta, "{\"name\":\"orders\",\"partit");
        } else if (row == 2) {
            /* well-formed, but more partitions than a topic may have: loading
             * them would allocate 16 GiB and create directories for days */
            assert_int_equal(rename(meta, moved), 0);
            write_text(meta, "{\"version\":1,\"name\":\"orders\",\"partitions\":2147483647}");
        } else {
            write_text(copy, (const char *)good);
        }
        mopen_fails(&err);
        assert_non_null(
            strstr(err.message, row != 1 ? "meta/orders.json" : "meta/orders-copy.json"));
        assert_true(eng_fs_exists(g_m.pdir));
        assert_int_equal(ts_read_file(ckpt, &ck1, &ck1_len), 0);
        assert_int_equal(ck1_len, ck0_len);
        assert_memory_equal(ck1, ck0, ck0_len);
        free(ck1);
        /* put right, the topic is back as it was */
        if (row != 1)
            assert_int_equal(rename(moved, meta), 0);
        else
            assert_int_equal(unlink(copy), 0);
        m = mopen();
        assert_int_equal(eng_manager_partition(m, "orders", 0, &p, NULL), 0);
        assert_int_equal(eng_partition_log_start_offset(p), 9);
        assert_int_equal(eng_partition_log_end_offset(p), 3 * NB);
        eng_partition_unref(p);
        eng_manager_close(m);
        free(ck0);
        free(good);
    }
}

/* A partition directory lost while the server was stopped restarts empty at
 * the offset the checkpoints remember, not at 0: appends never reuse
 * offsets readers have consumed. */
static void test_missing_partition_dir_keeps_offsets(void **state)
{
    (void)state;
    mbuild("delete");
    ts_rmtree(g_m.pdir);
    eng_manager *m = mopen();
    eng_partition *p;
    assert_int_equal(eng_manager_partition(m, "orders", 0, &p, NULL), 0);
    assert_int_equal(eng_partition_log_start_offset(p), 3 * NB);
    assert_int_equal(eng_partition_log_end_offset(p), 3 * NB);
    append_batch(p, NB); /* asserts base offset 3 * NB */
    eng_partition_unref(p);
    eng_manager_close(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_indexes_rebuilt_with_marker),
        cmocka_unit_test(test_recovery_checkpoint_garbage),
        cmocka_unit_test(test_start_offset_checkpoint_garbage),
        cmocka_unit_test(test_cleaner_checkpoint_garbage),
        cmocka_unit_test(test_bad_metadata_stops_the_start),
        cmocka_unit_test(test_missing_partition_dir_keeps_offsets),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
