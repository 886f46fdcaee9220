/*
 * test_cleaner_select.c - which partition the cleaner threads pick
 * (DESIGN §3 compaction; kafka-format.md §16.1, Kafka's
 * grabFilthiestCompactedLog):
 *   - of two eligible partitions, the one with the higher dirty ratio is
 *     cleaned first (one thread, so runs are one after the other);
 *   - a partition below min.cleanable.dirty.ratio is left alone until
 *     max.compaction.lag.ms says its oldest dirty segment has waited long
 *     enough; then the threads clean it whatever its ratio.  Old records
 *     in the active segment never force a clean.
 *
 * As in test_cleaner.c, a line-based codec stands in for the service's JSON.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "compact_util.h"
#include "eng_cleaner.h"
#include "eng_checkpoint.h"
#include "eng_fs.h"
#include "eng_logger.h"
#include "eng_manager.h"
#include "manager_fixture.h"
#include "support.h"

#include <time.h>

/* One cleaner thread: which partition it takes first is the question. */
static int setup_select(void **state)
{
    if (setup_cleaning(state))
        return -1;
    ((fixture *)*state)->copts.threads = 1;
    return 0;
}

static void topic(eng_manager *m, const char *name, const char *ratio)
{
    const char *keys[2] = {"cleanup.policy", "min.cleanable.dirty.ratio"};
    const char *vals[2] = {"compact", ratio};
    eng_errdetail err = {0};
    if (eng_manager_create_topic(m, name, 1, keys, vals, 2, &err))
        fail_msg("create %s: %s", name, err.message);
}

static eng_partition *part(eng_manager *m, const char *t)
{
    eng_partition *p;
    assert_int_equal(eng_manager_partition(m, t, 0, &p, NULL), 0);
    return p;
}

/* `versions` rounds of keys k0..k<nkeys-1> (10 a batch) at ts, then a roll. */
static void write_keys(eng_partition *p, int nkeys, int versions, int64_t ts)
{
    char keys[10][16], vals[10][32];
    cu_kv recs[10];
    for (int v = 0; v < versions; v++) {
        for (int k = 0; k < nkeys; k += 10) {
            for (int i = 0; i < 10; i++) {
                snprintf(keys[i], sizeof keys[i], "k%d", k + i);
                snprintf(vals[i], sizeof vals[i], "v%d-%d", v, k + i);
                recs[i] = (cu_kv){keys[i], vals[i], 0};
            }
            cu_append(p, recs, 10, ts);
        }
    }
    cu_roll(p);
}

static bool wait_checkpoint(eng_cleaner *c, const char *t, int64_t want, int ms)
{
    for (int waited = 0; waited < ms; waited += 10) {
        if (eng_cleaner_checkpoint(c, t, 0) == want)
            return true;
        ts_sleep_ms(10);
    }
    return eng_cleaner_checkpoint(c, t, 0) == want;
}

static void test_filthiest_first(void **state)
{
    fixture *f = *state;
    eng_manager *m = open_mgr(f);
    topic(m, "mild", "0.1");
    topic(m, "filthy", "0.1");
    eng_partition *mild = part(m, "mild"), *filthy = part(m, "filthy");
    write_keys(mild, 10, 5, CU_T0); /* [0, 50): cleaned already, per the checkpoint */
    write_keys(mild, 10, 1, CU_T0); /* [50, 60): dirty, ratio about 1/6 */
    write_keys(filthy, 10, 5, CU_T0); /* [0, 50): all dirty, ratio 1 */
    eng_clean_range r;
    eng_partition_clean_range(mild, 50, eng_now_ms(), &r);
    assert_true(r.dirty_ratio > 0.1 && r.dirty_ratio < 0.5);
    eng_partition_unref(mild);
    eng_partition_unref(filthy);
    eng_manager_close(m);

    char path[700];
    snprintf(path, sizeof path, "%s/cleaner-offset-checkpoint", f->data);
    eng_ckpt_entry e = {.topic = "mild", .partition = 0, .offset = 50};
    assert_int_equal(eng_checkpoint_write(path, &e, 1), 0);
    m = open_mgr(f);
    assert_int_equal(eng_manager_start_cleaner(m), 0);
    eng_cleaner *c = eng_manager_cleaner(m);
    assert_true(wait_checkpoint(c, "filthy", 50, 5000));
    assert_true(wait_checkpoint(c, "mild", 60, 5000));
    eng_cleaner_status s;
    assert_int_equal(eng_cleaner_status_get(c, &s), 0);
    assert_int_equal(s.nruns, 2);
    /* Most recent first: mild ran second. */
    assert_string_equal(s.runs[1].topic, "filthy");
    assert_string_equal(s.runs[0].topic, "mild");
    assert_int_equal(s.runs[0].stats.first_dirty, 50);
    eng_cleaner_status_free(&s);
    eng_manager_close(m);
}

static void test_max_compaction_lag_forces_a_clean(void **state)
{
    fixture *f = *state;
    eng_manager *m = open_mgr(f);
    topic(m, "slow", "0.5");
    eng_partition *p = part(m, "slow");
    assert_int_equal(eng_manager_start_cleaner(m), 0);
    eng_cleaner *c = eng_manager_cleaner(m);
    write_keys(p, 40, 2, CU_T0); /* all dirty: cleaned down to k0..k39 */
    assert_true(wait_checkpoint(c, "slow", 80, 5000));
    /* 10 rewrites over 40 clean records: a ratio of about 0.2. */
    write_keys(p, 10, 1, CU_T0);
    eng_clean_range r;
    eng_partition_clean_range(p, 80, eng_now_ms(), &r);
    assert_true(r.dirty_ratio > 0 && r.dirty_ratio < 0.5);
    assert_false(r.need_compaction_now); /* max.compaction.lag.ms is "never" */
    ts_sleep_ms(300); /* fifteen back-offs */
    assert_int_equal(eng_cleaner_checkpoint(c, "slow", 0), 80);

    /* The dirty segment's first batch (CU_T0, years ago) is older than
     * now - max.compaction.lag.ms: the threads clean it at once. */
    eng_config cfg;
    eng_partition_get_config(p, &cfg);
    cfg.v[ENG_CFG_MAX_COMPACTION_LAG_MS].i = 60000;
    eng_partition_set_config(p, &cfg);
    eng_partition_clean_range(p, 80, eng_now_ms(), &r);
    assert_true(r.need_compaction_now);
    assert_true(wait_checkpoint(c, "slow", 90, 5000));
    /* Old records in the active segment never force a clean: it is not
     * cleanable (Kafka looks at dirty non-active segments only). */
    cu_kv rec = {"k0", "again", 0};
    cu_append(p, &rec, 1, CU_T0);
    eng_partition_clean_range(p, 90, eng_now_ms(), &r);
    assert_false(r.need_compaction_now);
    assert_int_equal(r.cleanable_bytes, 0);
    eng_partition_unref(p);
    eng_manager_close(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_filthiest_first, setup_select, teardown),
        cmocka_unit_test_setup_teardown(test_max_compaction_lag_forces_a_clean, setup_select, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
