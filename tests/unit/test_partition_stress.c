/*
 * test_partition_stress.c - everything that touches one partition, at once,
 * for a second and a half, then the topic's delete while it all goes on.
 * Written for ThreadSanitizer (make tsan), which sees the races the asserts
 * cannot; the asserts hold under any build.
 *
 * One partition of a compact,delete topic with 2 KiB segments (a roll every
 * few appends), flush.messages=3 and retention.ms=150, under:
 *   - an idempotent appender whose flushes go through group commit
 *     (async_durable, eng_partition_when_durable, the scheduler's
 *     group-commit one-shots) and a plain appender that flushes itself;
 *   - a reader: copies, slices, lookups by timestamp, the largest timestamp;
 *   - a roller; a maintainer running retention passes, delete-records and
 *     cleanings of its own beside the cleaner thread; the background jobs
 *     every few milliseconds (retention, flusher, both checkpoints, producer
 *     expiration) and triggered by hand;
 *   - a lister walking what the admin API shows: segments, each segment's
 *     indexes and batch headers, producers, partition info and counters,
 *     jobs, cleaner status; a config writer flipping retention and the dirty
 *     ratio.
 * Every thread looks the partition up again on each round, so after the
 * delete some work on the retired partition and the rest are told the topic
 * is gone.  Every call answers 0 or a refusal the race explains; every batch
 * read passes its CRC; every group-commit callback runs.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "eng_batch.h"
#include "eng_cleaner.h"
#include "eng_compact.h"
#include "eng_error.h"
#include "eng_fs.h"
#include "eng_index.h"
#include "eng_manager.h"
#include "eng_offset_map.h"
#include "eng_partition.h"
#include "eng_retention.h"
#include "eng_segment.h"
#include "support.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define RUN_MS 1500       /* before the delete */
#define AFTER_DELETE_MS 200
#define KEYS 16

enum { APPEND_IDEM, APPEND_PLAIN, READ, ROLL, MAINTAIN, LIST, CONFIG, ROLES };

typedef struct shared {
    eng_manager *m;
    _Atomic bool stop;
    _Atomic int unexpected;
    _Atomic long ops[ROLES];
    _Atomic long durable_asked, durable_answered;
    char first_bad[256];
    pthread_mutex_t mu;
} shared;

typedef struct worker {
    shared *sh;
    int role;
} worker;

static void sleep_us(long us)
{
    struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
    nanosleep(&ts, NULL);
}

static void bad(shared *sh, const char *what, int rc)
{
    pthread_mutex_lock(&sh->mu);
    if (atomic_fetch_add(&sh->unexpected, 1) == 0)
        snprintf(sh->first_bad, sizeof sh->first_bad, "%s: %s", what, eng_strerror(rc));
    pthread_mutex_unlock(&sh->mu);
}

/* What a partition racing its own delete, retention and cleaning may answer. */
static void expect_rc(shared *sh, const char *what, int rc)
{
    if (rc == 0 || rc == ENG_ENOTOPIC || rc == ENG_ENOPARTITION || rc == ENG_EOFFSET ||
        rc == ENG_EBUSY || rc == ENG_ENOTFOUND)
        return;
    bad(sh, what, rc);
}

/* One batch of n keyed records (of KEYS keys) at now; idempotent when pid >= 0. */
static size_t keyed_batch(uint8_t *buf, size_t cap, int64_t pid, int32_t seq, int n, unsigned *seed)
{
    eng_record_spec recs[4];
    char keys[4][16], vals[4][64];
    int64_t now = eng_now_ms();
    for (int i = 0; i < n; i++) {
        snprintf(keys[i], sizeof keys[i], "k%u", rand_r(seed) % KEYS);
        snprintf(vals[i], sizeof vals[i], "value %u of a record under stress", rand_r(seed));
        recs[i] = (eng_record_spec){.timestamp = now, .key = (const uint8_t *)keys[i],
                                    .key_len = (int32_t)strlen(keys[i]),
                                    .value = (const uint8_t *)vals[i],
                                    .value_len = (int32_t)strlen(vals[i])};
    }
    eng_batch_params bp;
    eng_batch_params_init(&bp);
    if (pid >= 0) {
        bp.producer_id = pid;
        bp.producer_epoch = 0;
        bp.base_sequence = seq;
    }
    return eng_batch_encode(buf, cap, &bp, recs, (size_t)n);
}

static void on_durable(void *ctx, int rc)
{
    shared *sh = ctx;
    if (rc && rc != ENG_ENOTOPIC && rc != ENG_ESHUTDOWN)
        bad(sh, "group commit", rc);
    atomic_fetch_add(&sh->durable_answered, 1);
}

static void do_append(shared *sh, eng_partition *p, bool idem, int64_t *pid, int32_t *seq,
                      unsigned *seed)
{
    uint8_t buf[2048];
    int n = 1 + (int)(rand_r(seed) % 4);
    size_t len = keyed_batch(buf, sizeof buf, idem ? *pid : -1, *seq, n, seed);
    eng_append_opts o = {.expected_offset = -1, .producer_batches = true, .async_durable = idem};
    eng_append_result res;
    int rc = eng_partition_append(p, buf, len, &o, &res, NULL);
    if (rc == ENG_ESEQUENCE) {
        /* Retention may have taken the producer's last batch with it. */
        (*pid)++;
        *seq = 0;
        return;
    }
    expect_rc(sh, "append", rc);
    if (rc)
        return;
    *seq += n;
    if (idem && res.durable_pending) {
        atomic_fetch_add(&sh->durable_asked, 1);
        eng_partition_when_durable(p, res.durable_upto, on_durable, sh);
    } else if (!idem && rand_r(seed) % 4 == 0) {
        expect_rc(sh, "flush", eng_partition_flush_upto(p, res.last_offset + 1));
    }
}

static void do_read(shared *sh, eng_partition *p, unsigned *seed)
{
    int64_t lso = eng_partition_log_start_offset(p), hw = eng_partition_high_watermark(p);
    int64_t from = hw > lso ? lso + (int64_t)(rand_r(seed) % (uint64_t)(hw - lso)) : lso;
    eng_fetch ft;
    int rc = eng_partition_read(p, from, 8192, &ft, NULL);
    expect_rc(sh, "read", rc);
    if (!rc) {
        for (size_t pos = 0; pos < ft.len;) {
            eng_batch_header h;
            if (eng_batch_header_decode(ft.data + pos, ft.len - pos, &h) ||
                eng_batch_validate(ft.data + pos, eng_batch_size(&h), &h)) {
                bad(sh, "read: a batch does not validate", ENG_ECORRUPT);
                break;
            }
            pos += eng_batch_size(&h);
        }
        eng_fetch_free(&ft);
    }
    eng_slice sl;
    rc = eng_partition_read_slice(p, from, 8192, &sl, NULL);
    expect_rc(sh, "read_slice", rc);
    if (!rc && sl.fd >= 0)
        close(sl.fd);
    int64_t off, ts;
    expect_rc(sh, "offset_for_timestamp", eng_partition_offset_for_timestamp(p, 0, &off, &ts));
    expect_rc(sh, "max_timestamp", eng_partition_max_timestamp(p, &off, &ts));
}

static void do_maintain(shared *sh, eng_partition *p, eng_offset_map *map, unsigned *seed)
{
    switch (rand_r(seed) % 4) {
    case 0: {
        eng_retention_report rep;
        expect_rc(sh, "retention", eng_partition_retention(p, eng_now_ms(), false, &rep));
        eng_retention_report_free(&rep);
        break;
    }
    case 1: {
        /* A couple of records short of the high watermark (-1: up to it). */
        int64_t hw = eng_partition_high_watermark(p), lso;
        expect_rc(sh, "delete-records",
                  eng_partition_delete_records(p, hw > 2 ? hw - 2 : -1, &lso, NULL));
        break;
    }
    case 2: {
        eng_clean_opts co = {.map = map, .now_ms = eng_now_ms()};
        eng_clean_stats st;
        expect_rc(sh, "clean", eng_partition_clean(p, -1, &co, &st));
        break;
    }
    default: {
        static const char *const jobs[] = {"log-retention", "log-flusher",
                                           "recovery-point-checkpoint",
                                           "log-start-offset-checkpoint", "producer-expiration",
                                           "snapshot-usage"};
        expect_rc(sh, "trigger",
                  eng_manager_trigger_job(sh->m, jobs[rand_r(seed) % (sizeof jobs / sizeof *jobs)]));
        break;
    }
    }
}

static void list_segment(shared *sh, eng_partition *p, int64_t base)
{
    eng_segment *seg;
    int rc = eng_partition_segment(p, base, &seg);
    expect_rc(sh, "segment", rc);
    if (rc)
        return;
    eng_index *oi, *ti;
    rc = eng_segment_indexes(seg, &oi, &ti);
    expect_rc(sh, "indexes", rc);
    if (!rc) {
        uint32_t n = eng_index_entries(oi);
        int64_t off;
        uint32_t pos;
        for (uint32_t i = 0; i < n; i++)
            eng_offset_index_entry(oi, i, &off, &pos);
        n = eng_index_entries(ti);
        int64_t ts;
        for (uint32_t i = 0; i < n; i++)
            eng_time_index_entry(ti, i, &ts, &off);
    }
    eng_segment_unref(seg);
    eng_batch_dump *d;
    size_t nd, total;
    rc = eng_partition_dump_batches(p, base, 0, 16, &d, &nd, &total, NULL);
    expect_rc(sh, "dump_batches", rc);
    if (!rc)
        free(d);
}

static void do_list(shared *sh, eng_partition *p)
{
    eng_segment_info *si;
    size_t n;
    int rc = eng_partition_segments(p, &si, &n);
    expect_rc(sh, "segments", rc);
    if (!rc) {
        for (size_t i = 0; i < n; i++)
            list_segment(sh, p, si[i].base_offset);
        free(si);
    }
    eng_producer_entry *pe;
    rc = eng_partition_producers(p, &pe, &n);
    expect_rc(sh, "producers", rc);
    if (!rc)
        free(pe);
    eng_partition_info info;
    eng_partition_info_get(p, &info);
    eng_partition_counters c;
    eng_partition_counters_get(p, &c);
    eng_job_info *ji;
    if (!(rc = eng_manager_jobs(sh->m, &ji, &n)))
        free(ji);
    expect_rc(sh, "jobs", rc);
    eng_cleaner_status cs;
    if (!(rc = eng_cleaner_status_get(eng_manager_cleaner(sh->m), &cs)))
        eng_cleaner_status_free(&cs);
    expect_rc(sh, "cleaner status", rc);
}

static void do_config(eng_partition *p, unsigned *seed)
{
    eng_config cfg;
    eng_partition_get_config(p, &cfg);
    cfg.v[ENG_CFG_RETENTION_MS].i = rand_r(seed) % 2 ? 150 : 600;
    cfg.v[ENG_CFG_MIN_CLEANABLE_DIRTY_RATIO].d = rand_r(seed) % 2 ? 0.01 : 0.5;
    eng_partition_set_config(p, &cfg);
}

static void *worker_main(void *arg)
{
    worker *w = arg;
    shared *sh = w->sh;
    unsigned seed = (unsigned)w->role * 7919u + 1;
    int64_t pid = 1000 + w->role * 100000;
    int32_t seq = 0;
    eng_offset_map *map = NULL;
    if (w->role == MAINTAIN && eng_offset_map_new(1 << 20, 0.9, &map)) {
        bad(sh, "offset map", -ENOMEM);
        return NULL;
    }
    while (!atomic_load(&sh->stop)) {
        eng_partition *p;
        if (eng_manager_partition(sh->m, "stress", 0, &p, NULL)) {
            sleep_us(200); /* deleted */
            continue;
        }
        switch (w->role) {
        case APPEND_IDEM:
        case APPEND_PLAIN:
            do_append(sh, p, w->role == APPEND_IDEM, &pid, &seq, &seed);
            break;
        case READ:
            do_read(sh, p, &seed);
            break;
        case ROLL: {
            int64_t base;
            expect_rc(sh, "roll", eng_partition_roll(p, &base));
            sleep_us(1000);
            break;
        }
        case MAINTAIN:
            do_maintain(sh, p, map, &seed);
            break;
        case LIST:
            do_list(sh, p);
            break;
        default:
            do_config(p, &seed);
            sleep_us(2000);
            break;
        }
        atomic_fetch_add(&sh->ops[w->role], 1);
        eng_partition_unref(p);
    }
    eng_offset_map_free(map);
    return NULL;
}

static void test_everything_on_one_partition(void **state)
{
    (void)state;
    char *tmp = ts_tmpdir();
    assert_non_null(tmp);
    char data[600];
    snprintf(data, sizeof data, "%s/data", tmp);
    eng_cleaner_opts copts;
    eng_cleaner_opts_default(&copts);
    copts.threads = 1;
    copts.backoff_ms = 5;
    copts.dedupe_buffer_bytes = 1 << 20;
    eng_manager_opts o = {.log_dir = data, .codec = ts_line_codec(), .cleaner = &copts};
    eng_config_defaults_init(&o.defaults);
    eng_jobs_opts_default(&o.jobs);
    o.jobs.background_threads = 2;
    o.jobs.initial_delay_ms = 0;
    o.jobs.retention_check_interval_ms = 10;
    o.jobs.flush_scheduler_interval_ms = 10;
    o.jobs.recovery_checkpoint_interval_ms = 10;
    o.jobs.start_offset_checkpoint_interval_ms = 10;
    o.jobs.producer_expiration_check_interval_ms = 10;
    shared sh = {0};
    pthread_mutex_init(&sh.mu, NULL);
    eng_errdetail err = {0};
    assert_int_equal(eng_manager_open(&o, &sh.m, &err), 0);
    assert_int_equal(eng_manager_start_jobs(sh.m), 0);
    assert_int_equal(eng_manager_start_cleaner(sh.m), 0);
    const char *keys[] = {"cleanup.policy", "flush.messages", "retention.ms",
                          "delete.retention.ms", "file.delete.delay.ms", "segment.index.bytes"};
    const char *vals[] = {"compact,delete", "3", "150", "0", "0", "4096"};
    assert_int_equal(eng_manager_create_topic(sh.m, "stress", 1, keys, vals, 6, &err), 0);
    eng_partition *p;
    assert_int_equal(eng_manager_partition(sh.m, "stress", 0, &p, NULL), 0);
    /* Below the 1 MiB that topic configs allow: a roll every few appends. */
    eng_config cfg;
    eng_partition_get_config(p, &cfg);
    cfg.v[ENG_CFG_SEGMENT_BYTES].i = 2048;
    eng_partition_set_config(p, &cfg);
    eng_partition_unref(p);

    worker w[ROLES];
    pthread_t th[ROLES];
    for (int i = 0; i < ROLES; i++) {
        w[i] = (worker){.sh = &sh, .role = i};
        assert_int_equal(pthread_create(&th[i], NULL, worker_main, &w[i]), 0);
    }
    sleep_us(RUN_MS * 1000L);
    assert_int_equal(eng_manager_delete_topic(sh.m, "stress", &err), 0);
    sleep_us(AFTER_DELETE_MS * 1000L);
    atomic_store(&sh.stop, true);
    for (int i = 0; i < ROLES; i++)
        pthread_join(th[i], NULL);
    /* Every group commit asked for is answered, at the latest by the stop. */
    int64_t end = eng_mono_ms() + 10000;
    while (atomic_load(&sh.durable_answered) < atomic_load(&sh.durable_asked) &&
           eng_mono_ms() < end)
        sleep_us(1000);
    fprintf(stderr, "# appends %ld+%ld, reads %ld, rolls %ld, maintenance %ld, listings %ld, "
                    "configs %ld; group commits %ld\n",
            atomic_load(&sh.ops[APPEND_IDEM]), atomic_load(&sh.ops[APPEND_PLAIN]),
            atomic_load(&sh.ops[READ]), atomic_load(&sh.ops[ROLL]),
            atomic_load(&sh.ops[MAINTAIN]), atomic_load(&sh.ops[LIST]),
            atomic_load(&sh.ops[CONFIG]), atomic_load(&sh.durable_asked));
    assert_int_equal(atomic_load(&sh.durable_answered), atomic_load(&sh.durable_asked));
    if (atomic_load(&sh.unexpected))
        fail_msg("%d unexpected answers, the first %s", atomic_load(&sh.unexpected), sh.first_bad);
    for (int i = 0; i < ROLES; i++)
        assert_true(atomic_load(&sh.ops[i]) > 0);
    eng_manager_close(sh.m);
    pthread_mutex_destroy(&sh.mu);
    ts_rmtree(tmp);
    free(tmp);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_everything_on_one_partition),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
