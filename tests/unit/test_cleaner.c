/*
 * test_cleaner.c - the log cleaner's threads over a real eng_manager
 * (DESIGN §3 compaction, §4 jobs; kafka-format.md §11.2, §16.1).
 *
 *   - a compacted topic whose dirty ratio is above min.cleanable.dirty.ratio
 *     is cleaned by the background thread within a couple of seconds
 *     (log.cleaner.backoff.ms 20); one below its ratio is left alone, and
 *     eng_cleaner_clean_now cleans it anyway; the status shows the thread,
 *     its cleanings and the runs, most recent first;
 *   - cleaner-offset-checkpoint in Kafka's format ("0\n<n>\n<topic> <p>
 *     <offset>\n"), untouched by dry runs, read back after a restart: the
 *     next clean starts from it; deleting the topic forgets its entries;
 *   - a partition whose cleaning fails (a corrupt record in a sealed
 *     segment; works as root, unlike permissions) is marked uncleanable
 *     with a reason, logged, reported in the status, skipped by the threads
 *     and refused again on demand, while another partition still gets
 *     cleaned;
 *   - a clean that runs out of disk space is tried again after four
 *     backoffs, not sooner (not marked uncleanable until restart), and then
 *     works;
 *   - a partition the range says has nothing cleanable (a checkpoint inside
 *     a segment that min.compaction.lag.ms keeps) is not picked again and
 *     again: the thread backs off;
 *   - cleanup.policy=compact,delete topics also get retention (the
 *     log-retention job), compact-only topics do not, and both compact;
 *   - a thread's offset map is capped at 2^31 - 1 bytes as in Kafka,
 *     whatever log.cleaner.dedupe.buffer.size says; a map that cannot be
 *     allocated is a counted, reported failure after which the thread backs
 *     off (at least a second) and logs one line, not a spin logging
 *     hundreds of thousands a second, and the partition is not marked;
 *   - a throttled cleaning (log.cleaner.io.max.bytes.per.second) lets a
 *     delete of its topic and a stop through at once, not after its sleep;
 *   - a clean that fails as its topic is deleted leaves no uncleanable mark
 *     behind for a topic created again under the name.
 *
 * The engine does not speak JSON: a line-based codec stands in, as in
 * test_manager.c.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "compact_util.h"
#include "eng_cleaner.h"
#include "eng_fault.h"
#include "eng_fs.h"
#include "eng_logger.h"
#include "eng_manager.h"
#include "eng_stats.h"
#include "manager_fixture.h"
#include "support.h"

#include <errno.h>
#include <fcntl.h>
#include <time.h>
#include <unistd.h>

/* ---- fixture -------------------------------------------------------------- */

static eng_manager *open_cleaning(fixture *f, bool cleaner)
{
    eng_manager *m = open_mgr(f);
    if (cleaner)
        assert_int_equal(eng_manager_start_cleaner(m), 0);
    return m;
}

/* Creates a one-partition topic with up to three config overrides. */
static void topic(eng_manager *m, const char *name, int32_t parts, const char *k1, const char *v1,
                  const char *k2, const char *v2)
{
    const char *keys[3] = {"cleanup.policy", k1, k2}, *vals[3] = {"compact", v1, v2};
    size_t n = 1 + (k1 != NULL) + (k2 != NULL);
    for (size_t i = 1; i < n; i++)
        if (!strcmp(keys[i], "cleanup.policy")) { /* an explicit policy replaces compact */
            keys[0] = keys[i];
            vals[0] = vals[i];
            keys[i] = keys[n - 1];
            vals[i] = vals[n - 1];
            n--;
        }
    eng_errdetail err = {0};
    if (eng_manager_create_topic(m, name, parts, keys, vals, n, &err))
        fail_msg("create %s: %s", name, err.message);
}

static eng_partition *part(eng_manager *m, const char *t, int32_t id)
{
    eng_partition *p;
    assert_int_equal(eng_manager_partition(m, t, id, &p, NULL), 0);
    return p;
}

/* `versions` rounds of keys k000..k<nkeys-1> (10 a batch) at ts, then a roll. */
static void write_keys(eng_partition *p, int nkeys, int versions, int64_t ts)
{
    char keys[10][16], vals[10][24];
    cu_kv recs[10];
    for (int v = 0; v < versions; v++)
        for (int k = 0; k < nkeys; k += 10) {
            int n = nkeys - k < 10 ? nkeys - k : 10;
            for (int i = 0; i < n; i++) {
                snprintf(keys[i], sizeof keys[i], "k%03d", k + i);
                snprintf(vals[i], sizeof vals[i], "v%d-%d", v, k + i);
                recs[i] = (cu_kv){keys[i], vals[i], 0};
            }
            cu_append(p, recs, (size_t)n, ts);
        }
    cu_roll(p);
}

static size_t count_records(eng_partition *p)
{
    cu_recs rs;
    cu_read_ok(p, &rs);
    size_t n = rs.n;
    cu_recs_free(&rs);
    return n;
}

/* Waits up to ms for the checkpoint of t-0 to reach want. */
static bool wait_checkpoint(eng_cleaner *c, const char *t, int64_t want, int ms)
{
    for (int waited = 0; waited < ms; waited += 10) {
        if (eng_cleaner_checkpoint(c, t, 0) == want)
            return true;
        ts_sleep_ms(10);
    }
    return eng_cleaner_checkpoint(c, t, 0) == want;
}

/* ---- tests ------------------------------------------------------------------ */

static void test_background_and_ratio(void **state)
{
    fixture *f = *state;
    eng_manager *m = open_cleaning(f, false);
    topic(m, "hot", 1, NULL, NULL, NULL, NULL);
    topic(m, "calm", 1, NULL, NULL, NULL, NULL);
    eng_partition *hot = part(m, "hot", 0), *calm = part(m, "calm", 0);
    write_keys(hot, 10, 20, CU_T0); /* 200 records, 190 superseded: ratio 1 */
    write_keys(calm, 200, 1, CU_T0);
    assert_int_equal(eng_manager_start_cleaner(m), 0);
    eng_cleaner *c = eng_manager_cleaner(m);
    assert_non_null(c);

    /* Both are all dirty (ratio 1 > 0.5): the thread cleans them. */
    assert_true(wait_checkpoint(c, "hot", 200, 3000));
    assert_true(wait_checkpoint(c, "calm", 200, 3000));
    assert_int_equal(count_records(hot), 10);
    assert_int_equal(count_records(calm), 200);
    assert_true(logged(f, "hot-0: cleaning offsets [0, 200) over 1 segments"));

    /* calm: 20 rewrites over 200 clean records, ratio ~0.1 < 0.5: left alone. */
    write_keys(calm, 20, 1, CU_T0);
    eng_clean_range r;
    eng_partition_clean_range(calm, 200, eng_now_ms(), &r);
    assert_true(r.dirty_ratio > 0.05 && r.dirty_ratio < 0.5);
    ts_sleep_ms(400); /* twenty back-offs */
    assert_int_equal(eng_cleaner_checkpoint(c, "calm", 0), 200);
    assert_int_equal(count_records(calm), 220);

    eng_cleaner_status s;
    assert_int_equal(eng_cleaner_status_get(c, &s), 0);
    assert_true(s.enabled);
    assert_int_equal(s.nthreads, 1);
    assert_int_equal(s.dedupe_buffer_bytes_per_thread, 1 << 20);
    assert_int_equal(s.threads[0].id, 0);
    assert_false(s.threads[0].busy);
    assert_int_equal(s.threads[0].cleanings, 2);
    assert_int_equal(s.nruns, 2);
    for (size_t i = 0; i < 2; i++) {
        assert_false(s.runs[i].on_demand);
        assert_int_equal(s.runs[i].result, 0);
        assert_int_equal(s.runs[i].partition, 0);
    }
    const eng_cleaner_run *hr = !strcmp(s.runs[0].topic, "hot") ? &s.runs[0] : &s.runs[1];
    assert_string_equal(hr->topic, "hot");
    assert_int_equal(hr->stats.records_removed, 190);
    assert_int_equal(hr->stats.end_offset, 200);
    assert_int_equal(s.nuncleanable, 0);
    eng_cleaner_status_free(&s);

    /* On demand it is cleaned whatever the ratio, and reported first. */
    eng_clean_stats st;
    assert_int_equal(eng_cleaner_clean_now(c, calm, false, &st), 0);
    assert_int_equal(st.first_dirty, 200);
    assert_int_equal(st.end_offset, 220);
    assert_int_equal(st.records_removed, 20);
    assert_int_equal(count_records(calm), 200);
    assert_int_equal(eng_cleaner_checkpoint(c, "calm", 0), 220);
    assert_int_equal(eng_cleaner_status_get(c, &s), 0);
    assert_int_equal(s.nruns, 3);
    assert_true(s.runs[0].on_demand);
    assert_string_equal(s.runs[0].topic, "calm");
    eng_cleaner_status_free(&s);
    eng_partition_unref(hot);
    eng_partition_unref(calm);
    eng_manager_close(m);
}

static void test_checkpoint_file_and_restart(void **state)
{
    fixture *f = *state;
    f->copts.threads = 0; /* only on-demand runs: nothing races them */
    eng_manager *m = open_cleaning(f, true);
    topic(m, "ck", 2, NULL, NULL, NULL, NULL);
    eng_partition *p = part(m, "ck", 0);
    write_keys(p, 10, 3, CU_T0);
    eng_cleaner *c = eng_manager_cleaner(m);
    eng_clean_stats st;
    assert_int_equal(eng_cleaner_clean_now(c, p, true, &st), 0); /* dry run: no file */
    assert_true(st.dry_run);
    assert_int_equal(st.records_removed, 20);
    assert_null(data_file_text(f, "cleaner-offset-checkpoint"));
    assert_int_equal(eng_cleaner_checkpoint(c, "ck", 0), -1);
    assert_int_equal(eng_cleaner_clean_now(c, p, false, &st), 0);
    assert_int_equal(st.end_offset, 30);
    char *text = data_file_text(f, "cleaner-offset-checkpoint");
    assert_non_null(text);
    assert_string_equal(text, "0\n1\nck 0 30\n");
    free(text);
    eng_partition_unref(p);
    /* Another partition adds an entry (Kafka's order is unspecified). */
    p = part(m, "ck", 1);
    write_keys(p, 5, 2, CU_T0);
    assert_int_equal(eng_cleaner_clean_now(c, p, false, &st), 0);
    eng_partition_unref(p);
    text = data_file_text(f, "cleaner-offset-checkpoint");
    assert_true(!strcmp(text, "0\n2\nck 0 30\nck 1 10\n") || !strcmp(text, "0\n2\nck 1 10\nck 0 30\n"));
    free(text);
    /* ENG_ENOTCOMPACT for a delete topic, on demand too. */
    topic(m, "plain", 1, "cleanup.policy", "delete", NULL, NULL);
    p = part(m, "plain", 0);
    assert_int_equal(eng_cleaner_clean_now(c, p, false, &st), ENG_ENOTCOMPACT);
    eng_partition_unref(p);
    eng_manager_close(m);

    /* After a restart the next clean starts from the checkpoint. */
    m = open_cleaning(f, true);
    c = eng_manager_cleaner(m);
    assert_int_equal(eng_cleaner_checkpoint(c, "ck", 0), 30);
    assert_int_equal(eng_cleaner_checkpoint(c, "ck", 1), 10);
    p = part(m, "ck", 0);
    write_keys(p, 10, 1, CU_T0);
    assert_int_equal(eng_cleaner_clean_now(c, p, false, &st), 0);
    assert_int_equal(st.first_dirty, 30);
    assert_int_equal(st.end_offset, 40);
    assert_int_equal(st.records_removed, 10);
    assert_int_equal(count_records(p), 10);
    eng_partition_unref(p);
    text = data_file_text(f, "cleaner-offset-checkpoint");
    assert_true(strstr(text, "ck 0 40\n") && strstr(text, "ck 1 10\n") && !strncmp(text, "0\n2\n", 4));
    free(text);

    /* Deleting the topic forgets its entries, in memory and in the file: a
     * topic created under the same name cleans from offset 0 (it inherited
     * first dirty offset 40 before, leaving duplicates below it forever). */
    assert_int_equal(eng_manager_delete_topic(m, "ck", NULL), 0);
    text = data_file_text(f, "cleaner-offset-checkpoint");
    assert_string_equal(text, "0\n0\n");
    free(text);
    assert_int_equal(eng_cleaner_checkpoint(c, "ck", 0), -1);
    topic(m, "ck", 1, NULL, NULL, NULL, NULL);
    p = part(m, "ck", 0);
    write_keys(p, 10, 2, CU_T0);
    assert_int_equal(eng_cleaner_clean_now(c, p, false, &st), 0);
    assert_int_equal(st.first_dirty, 0);
    assert_int_equal(st.records_removed, 10);
    assert_int_equal(count_records(p), 10);
    eng_partition_unref(p);
    eng_manager_close(m);
}

/* Breaks the framing of the first record of batch `b` of segment 0. */
static void corrupt_record(eng_partition *p, const char *pdir, int b)
{
    eng_batch_dump *d;
    size_t n, total;
    assert_int_equal(eng_partition_dump_batches(p, 0, 0, 64, &d, &n, &total, NULL), 0);
    assert_true((size_t)b < n);
    uint64_t pos = d[b].position + ENG_BATCH_OVERHEAD;
    free(d);
    char path[800];
    snprintf(path, sizeof path, "%.700s/00000000000000000000.log", pdir);
    int fd = open(path, O_RDWR);
    assert_true(fd >= 0);
    uint8_t minus_one = 0x01; /* record length varint -1 */
    assert_int_equal(pwrite(fd, &minus_one, 1, (off_t)pos), 1);
    close(fd);
}

static void test_uncleanable(void **state)
{
    fixture *f = *state;
    eng_manager *m = open_cleaning(f, false);
    topic(m, "bad", 1, NULL, NULL, NULL, NULL);
    topic(m, "good", 1, NULL, NULL, NULL, NULL);
    eng_partition *bad = part(m, "bad", 0), *good = part(m, "good", 0);
    write_keys(bad, 10, 5, CU_T0);
    write_keys(good, 10, 5, CU_T0);
    char pdir[700];
    snprintf(pdir, sizeof pdir, "%s/bad-0", f->data);
    corrupt_record(bad, pdir, 2);
    assert_int_equal(eng_manager_start_cleaner(m), 0);
    eng_cleaner *c = eng_manager_cleaner(m);
    assert_true(wait_checkpoint(c, "good", 50, 3000));
    eng_cleaner_status s = {0};
    for (int i = 0; i < 300; i++) {
        assert_int_equal(eng_cleaner_status_get(c, &s), 0);
        if (s.nuncleanable)
            break;
        eng_cleaner_status_free(&s);
        ts_sleep_ms(10);
    }
    assert_int_equal(s.nuncleanable, 1);
    assert_string_equal(s.uncleanable[0].topic, "bad");
    assert_int_equal(s.uncleanable[0].partition, 0);
    assert_true(s.uncleanable[0].since_ms > 0);
    assert_non_null(strstr(s.uncleanable[0].reason, "cleaning failed: "));
    assert_true(strlen(s.uncleanable[0].reason) > strlen("cleaning failed: "));
    bool bad_run = false, good_run = false;
    for (size_t i = 0; i < s.nruns; i++) {
        if (!strcmp(s.runs[i].topic, "bad"))
            bad_run = s.runs[i].result == ENG_ECORRUPT;
        if (!strcmp(s.runs[i].topic, "good"))
            good_run = s.runs[i].result == 0 && s.runs[i].stats.records_removed == 40;
    }
    assert_true(bad_run);
    assert_true(good_run);
    eng_cleaner_status_free(&s);
    assert_true(logged(f, "bad-0: marked uncleanable"));
    assert_int_equal(eng_cleaner_checkpoint(c, "bad", 0), -1);
    assert_int_equal(cu_count_suffix(pdir, ".cleaned"), 0);
    /* The threads skip it from now on; on demand it fails again. */
    ts_sleep_ms(200);
    assert_int_equal(eng_cleaner_status_get(c, &s), 0);
    size_t runs = s.nruns;
    eng_cleaner_status_free(&s);
    eng_clean_stats st;
    assert_int_equal(eng_cleaner_clean_now(c, bad, false, &st), ENG_ECORRUPT);
    assert_int_equal(eng_cleaner_status_get(c, &s), 0);
    assert_int_equal(s.nruns, runs + 1);
    assert_int_equal(s.nuncleanable, 1);
    eng_cleaner_status_free(&s);
    assert_int_equal(count_records(good), 10);
    eng_partition_unref(bad);
    eng_partition_unref(good);
    eng_manager_close(m);
}

/* A clean that runs out of disk space (or descriptors, or memory maps) is
 * not marked uncleanable until a restart, as other failures are: the disk
 * frees up, and cleaning is what frees it.  The threads try again after
 * four backoffs, and this time it works. */
static void tried_again(fixture *f, const char *fault, int err, const char *errtext)
{
    eng_manager *m = open_cleaning(f, false);
    topic(m, "full", 1, NULL, NULL, NULL, NULL);
    eng_partition *p = part(m, "full", 0);
    write_keys(p, 10, 5, CU_T0);
    eng_fault_set(fault);
    assert_int_equal(eng_manager_start_cleaner(m), 0);
    eng_cleaner *c = eng_manager_cleaner(m);
    bool saw_retry = false;
    for (int i = 0; i < 300 && !saw_retry; i++) {
        eng_cleaner_status s = {0};
        assert_int_equal(eng_cleaner_status_get(c, &s), 0);
        saw_retry = s.nuncleanable == 1 && s.uncleanable[0].retry_ms >= s.uncleanable[0].since_ms + 80;
        eng_cleaner_status_free(&s);
        if (!saw_retry)
            ts_sleep_ms(5);
    }
    assert_true(saw_retry || eng_cleaner_checkpoint(c, "full", 0) == 50); /* may already be done */
    assert_true(wait_checkpoint(c, "full", 50, 5000));
    eng_fault_set(NULL);
    char line[256];
    snprintf(line, sizeof line, "full-0: cleaning failed: %s; the cleaner tries again in 80 ms",
             errtext);
    assert_true(logged(f, line));
    assert_true(logged(f, "full-0: trying to clean it again"));
    assert_false(logged(f, "marked uncleanable"));
    eng_cleaner_status s = {0};
    assert_int_equal(eng_cleaner_status_get(c, &s), 0);
    assert_int_equal(s.nuncleanable, 0);
    /* The retry waited its four backoffs: the run that worked started at
     * least 80 ms after the one that failed. */
    int64_t failed_at = -1, ok_at = -1;
    for (size_t i = 0; i < s.nruns; i++) {
        if (strcmp(s.runs[i].topic, "full"))
            continue;
        if (s.runs[i].result == err)
            failed_at = s.runs[i].stats.started_ms;
        else if (s.runs[i].result == 0 && (ok_at < 0 || s.runs[i].stats.started_ms < ok_at))
            ok_at = s.runs[i].stats.started_ms;
    }
    assert_true(failed_at > 0 && ok_at > 0);
    if (ok_at - failed_at < 80)
        fail_msg("tried again %lld ms after the failure (4 backoffs: 80)",
                 (long long)(ok_at - failed_at));
    eng_cleaner_status_free(&s);
    assert_int_equal(count_records(p), 10);
    char pdir[700];
    snprintf(pdir, sizeof pdir, "%s/full-0", f->data);
    assert_int_equal(cu_count_suffix(pdir, ".cleaned"), 0);
    eng_partition_unref(p);
    eng_manager_close(m);
}

static void test_out_of_room_tried_again(void **state)
{
    /* the cleaner's first write */
    tried_again(*state, "segment.append.partial=enospc", -ENOSPC, "No space left on device");
}

/* vm.max_map_count reached: the cleaned segment cannot map its indexes.
 * It was marked uncleanable until a restart, though the maps come back
 * as soon as retention or another clean drops a segment. */
static void test_out_of_maps_tried_again(void **state)
{
    tried_again(*state, "index.map=enomem", -ENOMEM, "Cannot allocate memory");
}

/* A checkpoint inside a segment that min.compaction.lag.ms keeps: nothing is
 * cleanable, so an idle thread must back off instead of picking it again. */
static void test_nothing_cleanable_backs_off(void **state)
{
    fixture *f = *state;
    eng_manager *m = open_cleaning(f, false);
    /* A low ratio: the old count (the segment holding the checkpoint counted
     * as cleanable, ~0.45 here) made it eligible. */
    topic(m, "lag", 1, "min.cleanable.dirty.ratio", "0.1", NULL, NULL);
    eng_partition *p = part(m, "lag", 0);
    int64_t now = eng_now_ms();
    write_keys(p, 5, 1, now - 600000);  /* A: [0,5), ten minutes old */
    write_keys(p, 40, 1, now - 60000);  /* B: [5,45), one minute old */
    /* A cleaner whose map holds 16 keys stops inside B. */
    eng_cleaner_opts small = f->copts;
    small.threads = 0;
    small.dedupe_buffer_bytes = 18 * 24;
    eng_cleaner *c1;
    assert_int_equal(eng_cleaner_start(m, &small, &c1), 0);
    eng_clean_stats st;
    assert_int_equal(eng_cleaner_clean_now(c1, p, false, &st), 0);
    assert_true(st.end_offset > 5 && st.end_offset < 45);
    int64_t mid = st.end_offset;
    eng_cleaner_stop(c1);
    /* Now B is too young to clean (5 minutes). */
    eng_topic_desc d;
    assert_int_equal(eng_manager_describe_topic(m, "lag", &d), 0);
    assert_int_equal(eng_config_overrides_set(&d.meta.overrides, "min.compaction.lag.ms", "300000", NULL), 0);
    assert_int_equal(eng_manager_set_topic_overrides(m, "lag", NULL, &d.meta.overrides, NULL), 0);
    eng_topic_desc_clear(&d);
    eng_cleaner_opts busy = f->copts;
    busy.backoff_ms = 60000;
    eng_cleaner *c2;
    assert_int_equal(eng_cleaner_start(m, &busy, &c2), 0);
    assert_int_equal(eng_cleaner_checkpoint(c2, "lag", 0), mid);
    ts_sleep_ms(300);
    eng_cleaner_status s;
    assert_int_equal(eng_cleaner_status_get(c2, &s), 0);
    assert_int_equal(s.threads[0].cleanings, 0);
    assert_false(s.threads[0].busy);
    eng_cleaner_status_free(&s);
    eng_cleaner_stop(c2);
    eng_partition_unref(p);
    eng_manager_close(m);
}

static void test_compact_delete_retention(void **state)
{
    fixture *f = *state;
    f->opts.jobs.initial_delay_ms = 0;
    f->opts.jobs.retention_check_interval_ms = 50;
    f->copts.threads = 0;
    eng_manager *m = open_cleaning(f, true);
    topic(m, "both", 1, "cleanup.policy", "compact,delete", "retention.ms", "3600000");
    topic(m, "keep", 1, "retention.ms", "3600000", NULL, NULL);
    eng_partition *both = part(m, "both", 0), *keep = part(m, "keep", 0);
    int64_t old = eng_now_ms() - 7200000; /* two hours old */
    for (int i = 0; i < 3; i++) {
        write_keys(both, 10, 2, old);
        write_keys(keep, 10, 2, old);
    }
    assert_int_equal(eng_manager_start_jobs(m), 0);
    for (int i = 0; i < 300 && eng_partition_log_start_offset(both) < 60; i++)
        ts_sleep_ms(10);
    assert_int_equal(eng_partition_log_start_offset(both), 60);
    eng_partition_info info;
    eng_partition_info_get(both, &info);
    assert_int_equal(info.segment_count, 1);
    /* compact only: retention.ms does not apply. */
    assert_int_equal(eng_partition_log_start_offset(keep), 0);
    eng_partition_info_get(keep, &info);
    assert_int_equal(info.segment_count, 4);
    /* Both policies still compact (a retention pass may hold a partition
     * for a moment: EBUSY, try again). */
    eng_clean_stats st;
    eng_cleaner *c = eng_manager_cleaner(m);
    write_keys(both, 10, 2, eng_now_ms());
    int rc;
    while ((rc = eng_cleaner_clean_now(c, both, false, &st)) == ENG_EBUSY)
        ts_sleep_ms(1);
    assert_int_equal(rc, 0);
    assert_int_equal(st.first_dirty, 60);
    assert_int_equal(st.records_removed, 10);
    while ((rc = eng_cleaner_clean_now(c, keep, false, &st)) == ENG_EBUSY)
        ts_sleep_ms(1);
    assert_int_equal(rc, 0);
    assert_int_equal(st.records_removed, 50);
    eng_partition_unref(both);
    eng_partition_unref(keep);
    eng_manager_close(m);
}

/* Kafka's cap: min(dedupe.buffer.size / threads, Int.MaxValue) bytes a
 * thread.  Uncapped, log.cleaner.dedupe.buffer.size near INT64_MAX asked for
 * a 48 GiB table that no allocation could give. */
static void test_map_capped(void **state)
{
    fixture *f = *state;
    eng_manager *m = open_cleaning(f, false);
    eng_cleaner_opts huge = f->copts;
    huge.threads = 0; /* nothing allocated: only the size is checked */
    huge.dedupe_buffer_bytes = (size_t)INT64_MAX;
    eng_cleaner *c;
    assert_int_equal(eng_cleaner_start(m, &huge, &c), 0);
    eng_cleaner_status s;
    assert_int_equal(eng_cleaner_status_get(c, &s), 0);
    assert_int_equal(s.dedupe_buffer_bytes_per_thread, 2147483647);
    eng_cleaner_status_free(&s);
    eng_cleaner_stop(c);
    huge.threads = 4;
    huge.dedupe_buffer_bytes = (size_t)4 << 20;
    assert_int_equal(eng_cleaner_start(m, &huge, &c), 0);
    assert_int_equal(eng_cleaner_status_get(c, &s), 0);
    assert_int_equal(s.dedupe_buffer_bytes_per_thread, 1 << 20); /* under the cap: divided */
    eng_cleaner_status_free(&s);
    eng_cleaner_stop(c);
    eng_manager_close(m);
}

static size_t count_logged(fixture *f, const char *needle)
{
    size_t n = 0;
    pthread_mutex_lock(&f->mu);
    for (const char *p = f->log; (p = strstr(p, needle)) != NULL; p++)
        n++;
    pthread_mutex_unlock(&f->mu);
    return n;
}

/* The offset map cannot be allocated twice, then can.  Each failure is a
 * failed run in the counters and the status, followed by a backoff of at
 * least a second (log.cleaner.backoff.ms is 20 here), logged once in the
 * minute; the partition is not marked uncleanable and is cleaned once the
 * map can be had. */
static void test_map_alloc_failure_backs_off(void **state)
{
    fixture *f = *state;
    eng_manager *m = open_cleaning(f, false);
    topic(m, "nomem", 1, NULL, NULL, NULL, NULL);
    eng_partition *p = part(m, "nomem", 0);
    write_keys(p, 10, 5, CU_T0);
    eng_stats before;
    eng_stats_snapshot(&before);
    eng_fault_set("cleaner.map_alloc=eio@1,cleaner.map_alloc=eio@2");
    int64_t t0 = eng_now_ms();
    assert_int_equal(eng_manager_start_cleaner(m), 0);
    eng_cleaner *c = eng_manager_cleaner(m);
    ts_sleep_ms(300);
    /* Mid-backoff: one failure so far, reported, nothing marked. */
    eng_cleaner_status s;
    assert_int_equal(eng_cleaner_status_get(c, &s), 0);
    assert_int_equal(s.nuncleanable, 0);
    assert_int_equal(s.nruns, 1);
    assert_string_equal(s.runs[0].topic, "nomem");
    assert_int_equal(s.runs[0].result, -EIO);
    assert_int_equal(s.threads[0].cleanings, 0);
    eng_cleaner_status_free(&s);
    eng_stats mid;
    eng_stats_snapshot(&mid);
    assert_int_equal(mid.cleaner_failures - before.cleaner_failures, 1);
    assert_true(wait_checkpoint(c, "nomem", 50, 5000));
    int64_t took = eng_now_ms() - t0;
    eng_fault_set(NULL);
    assert_true(took >= 1900); /* two backoffs of a second, not 20 ms */
    eng_stats after;
    eng_stats_snapshot(&after);
    assert_int_equal(after.cleaner_failures - before.cleaner_failures, 2);
    assert_int_equal(count_logged(f, "cannot allocate its 1048576-byte offset map"), 1);
    assert_true(logged(f, "to clean nomem-0: Input/output error (failure 1 in a row); trying "
                          "again in 1000 ms"));
    assert_int_equal(count_records(p), 10);
    eng_partition_unref(p);
    eng_manager_close(m);
}

/* Waits up to ms for cleaner thread 0 to be cleaning topic t. */
static bool wait_cleaning(eng_cleaner *c, const char *t, int ms)
{
    for (int waited = 0; waited < ms; waited += 10) {
        eng_cleaner_status s;
        assert_int_equal(eng_cleaner_status_get(c, &s), 0);
        bool busy = s.threads[0].busy && !strcmp(s.threads[0].topic, t);
        eng_cleaner_status_free(&s);
        if (busy)
            return true;
        ts_sleep_ms(10);
    }
    return false;
}

/* A throttled cleaning (log.cleaner.io.max.bytes.per.second 10: the first
 * batch of about 200 bytes is worth 20 s of sleep) must not hold up a
 * delete of its topic, which waits for the cleaning to let go, nor a stop,
 * which joins the thread.  Both took the whole sleep before the fix. */
static void test_throttled_clean_stops_promptly(void **state)
{
    fixture *f = *state;
    f->copts.max_bytes_per_second = 10;
    eng_manager *m = open_cleaning(f, false);
    topic(m, "slow1", 1, NULL, NULL, NULL, NULL);
    topic(m, "slow2", 1, NULL, NULL, NULL, NULL);
    eng_partition *p = part(m, "slow1", 0);
    write_keys(p, 20, 3, CU_T0);
    eng_partition_unref(p);
    assert_int_equal(eng_manager_start_cleaner(m), 0);
    eng_cleaner *c = eng_manager_cleaner(m);
    assert_true(wait_cleaning(c, "slow1", 10000));
    ts_sleep_ms(100); /* into the throttle's sleep */
    int64_t t0 = eng_mono_ms();
    eng_errdetail err = {0};
    assert_int_equal(eng_manager_delete_topic(m, "slow1", &err), 0);
    int64_t delete_ms = eng_mono_ms() - t0;

    p = part(m, "slow2", 0);
    write_keys(p, 20, 3, CU_T0);
    eng_partition_unref(p);
    assert_true(wait_cleaning(c, "slow2", 10000));
    ts_sleep_ms(100);
    t0 = eng_mono_ms();
    assert_true(eng_manager_close(m));
    int64_t close_ms = eng_mono_ms() - t0;
    /* Seconds of slack for a loaded machine; the bug took 20 s each. */
    assert_true(delete_ms < 5000);
    assert_true(close_ms < 5000);
}

static eng_manager *g_deleting;

/* Deletes topic "gone" where the hook runs: after its failed clean let go
 * of the partition, before the cleaner settles the failure. */
static void delete_gone(void *ctx)
{
    (void)ctx;
    eng_errdetail err = {0};
    assert_int_equal(eng_manager_delete_topic(g_deleting, "gone", &err), 0);
}

/* A clean that fails while its topic is being deleted does not mark the
 * deleted topic's partition uncleanable: the delete's forget may already
 * have run, and the mark then stayed, so a topic created again under the
 * name was skipped by the threads until a restart and listed with the old
 * failure. */
static void test_failed_clean_of_deleted_topic(void **state)
{
    fixture *f = *state;
    f->copts.threads = 0; /* on demand only: the hook runs on this thread */
    eng_manager *m = open_cleaning(f, true);
    eng_cleaner *c = eng_manager_cleaner(m);
    topic(m, "gone", 1, NULL, NULL, NULL, NULL);
    eng_partition *p = part(m, "gone", 0);
    write_keys(p, 10, 3, CU_T0);
    g_deleting = m;
    eng_fault_hook("cleaner.after_clean", delete_gone, NULL);
    eng_fault_set("compact.round_start=eio");
    eng_clean_stats st;
    int rc = eng_cleaner_clean_now(c, p, false, &st);
    eng_fault_set(NULL);
    eng_fault_hook(NULL, NULL, NULL);
    assert_int_equal(rc, -EIO);
    eng_partition_unref(p);
    eng_cleaner_status s = {0};
    assert_int_equal(eng_cleaner_status_get(c, &s), 0);
    for (size_t i = 0; i < s.nuncleanable; i++)
        fail_msg("%s-%d is listed uncleanable (%s) after its topic was deleted",
                 s.uncleanable[i].topic, s.uncleanable[i].partition, s.uncleanable[i].reason);
    eng_cleaner_status_free(&s);
    assert_false(logged(f, "gone-0: marked uncleanable"));
    assert_true(eng_manager_close(m));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_background_and_ratio, setup_cleaning, teardown),
        cmocka_unit_test_setup_teardown(test_checkpoint_file_and_restart, setup_cleaning, teardown),
        cmocka_unit_test_setup_teardown(test_uncleanable, setup_cleaning, teardown),
        cmocka_unit_test_setup_teardown(test_out_of_room_tried_again, setup_cleaning, teardown),
        cmocka_unit_test_setup_teardown(test_out_of_maps_tried_again, setup_cleaning, teardown),
        cmocka_unit_test_setup_teardown(test_nothing_cleanable_backs_off, setup_cleaning, teardown),
        cmocka_unit_test_setup_teardown(test_compact_delete_retention, setup_cleaning, teardown),
        cmocka_unit_test_setup_teardown(test_map_capped, setup_cleaning, teardown),
        cmocka_unit_test_setup_teardown(test_map_alloc_failure_backs_off, setup_cleaning, teardown),
        cmocka_unit_test_setup_teardown(test_throttled_clean_stops_promptly, setup_cleaning, teardown),
        cmocka_unit_test_setup_teardown(test_failed_clean_of_deleted_topic, setup_cleaning,
                                        teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
