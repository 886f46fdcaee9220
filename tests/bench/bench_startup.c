/*
 * bench_startup.c - start time of a data dir holding thousands of small
 * partitions, after a clean stop and after kill -9.  Never pass/fail:
 * figures only.
 *
 * A fresh data dir gets T topics of P/T partitions each (default 2,000
 * partitions over 8 topics); each partition receives a few 2,731-byte
 * seed-workload batches (10 records x 250 B) through eng_partition_append.
 * Then, for each thread count in the list (num.recovery.threads.per.data.dir):
 *   clean:   eng_manager_close wrote the marker; eng_manager_open is timed;
 *   unclean: one more batch is appended to every partition and never
 *            flushed, and the manager is dropped with eng_manager_abandon
 *            (no seal, no checkpoint, no marker: what kill -9 leaves, the
 *            page cache keeping the bytes), so every partition recovers its
 *            active segment; eng_manager_open is timed.
 * Each is measured RUNS times (an unclean open is abandoned again, which
 * leaves the same state) and the best and the median are printed.  The
 * page cache is warm, as right after a crash or a restart of the process;
 * with `cold`, every file is fdatasync'd and dropped from it
 * (posix_fadvise DONTNEED) before each open, as after a machine restart
 * (directories and inodes stay cached: only their data is dropped).
 *
 *   bench_startup DIR [PARTITIONS] [TOPICS] [THREADS_LIST] [RUNS] [cold]
 *   e.g. bench_startup /tmp/s 2000 8 1,2,4 3
 */
#include "eng_batch.h"
#include "eng_error.h"
#include "eng_fs.h"
#include "eng_logger.h"
#include "eng_manager.h"
#include "svc_meta.h"

#include "bench_util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static void die(const char *what, int rc)
{
    fprintf(stderr, "bench_startup: %s: %s\n", what, eng_strerror(rc));
    exit(1);
}

static eng_manager_opts g_opts;
static uint8_t g_batch[4096];
static size_t g_batch_len;
static long g_topics, g_per_topic;
static bool g_cold;

static eng_manager *open_mgr(double *secs)
{
    eng_manager *m;
    eng_errdetail err = {0};
    if (secs && g_cold)
        bench_drop_cache(g_opts.log_dir);
    double t0 = bench_now_s();
    int rc = eng_manager_open(&g_opts, &m, &err);
    if (secs)
        *secs = bench_now_s() - t0;
    if (rc) {
        fprintf(stderr, "open: %s\n", err.message);
        die("eng_manager_open", rc);
    }
    return m;
}

/* Appends n batches to every partition. */
static void append_all(eng_manager *m, int n)
{
    eng_append_opts o = {.expected_offset = -1};
    eng_append_result res;
    eng_errdetail err = {0};
    char name[32];
    for (long t = 0; t < g_topics; t++) {
        snprintf(name, sizeof name, "start-%ld", t);
        for (long i = 0; i < g_per_topic; i++) {
            eng_partition *p;
            int rc = eng_manager_partition(m, name, (int32_t)i, &p, NULL);
            if (rc)
                die("partition", rc);
            for (int k = 0; k < n; k++)
                if ((rc = eng_partition_append(p, g_batch, g_batch_len, &o, &res, &err)))
                    die(err.message, rc);
            eng_partition_unref(p);
        }
    }
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void report(const char *label, double *secs, int runs, eng_manager *m)
{
    eng_startup_report r;
    eng_manager_startup_report(m, &r);
    qsort(secs, (size_t)runs, sizeof *secs, cmp_double);
    printf("    %-8s best %8.1f ms  median %8.1f ms  (%u partitions, %u segments, %u recovered, "
           "%" PRIu64 " bytes truncated)\n",
           label, secs[0] * 1000, secs[runs / 2] * 1000, r.partitions, r.segments,
           r.segments_recovered, r.bytes_truncated);
    fflush(stdout);
}

int main(int argc, char **argv)
{
    const char *root = argc > 1 ? argv[1] : "/tmp/logstore-bench-startup";
    long partitions = argc > 2 ? atol(argv[2]) : 2000;
    g_topics = argc > 3 ? atol(argv[3]) : 8;
    long threads[8];
    int nthreads = bench_parse_list(argc > 4 ? argv[4] : "1,2,4", threads, 8);
    int runs = argc > 5 ? atoi(argv[5]) : 3;
    g_cold = argc > 6 && !strcmp(argv[6], "cold");
    if (g_topics < 1 || partitions < g_topics || runs < 1 || runs > 16 || nthreads < 1) {
        fprintf(stderr, "usage: bench_startup DIR [PARTITIONS] [TOPICS] [THREADS_LIST] [RUNS] [cold]\n");
        return 2;
    }
    g_per_topic = partitions / g_topics;
    eng_logger_set_sink(NULL, NULL, ENG_LOG_WARN);

    g_batch_len = bench_seed_batch(g_batch, sizeof g_batch);

    char dir[2048];
    snprintf(dir, sizeof dir, "%s/data", root);
    eng_fs_remove_tree(dir);
    eng_fs_mkdir(root);
    memset(&g_opts, 0, sizeof g_opts);
    g_opts.log_dir = dir;
    eng_config_defaults_init(&g_opts.defaults);
    g_opts.codec = svc_meta_codec();
    eng_jobs_opts_default(&g_opts.jobs);

    double t0 = bench_now_s();
    eng_manager *m = open_mgr(NULL);
    char name[32];
    for (long t = 0; t < g_topics; t++) {
        snprintf(name, sizeof name, "start-%ld", t);
        eng_errdetail err = {0};
        int rc = eng_manager_create_topic(m, name, (int32_t)g_per_topic, NULL, NULL, 0, &err);
        if (rc)
            die(err.message, rc);
    }
    append_all(m, 4);
    if (!eng_manager_close(m))
        die("close", -EIO);
    printf("startup: %ld topics x %ld partitions, 4 batches of %zu bytes each (set up in %.1f s); "
           "%s page cache; %d runs each\n",
           g_topics, g_per_topic, g_batch_len, bench_now_s() - t0, g_cold ? "cold" : "warm", runs);
    for (int k = 0; k < nthreads; k++) {
        g_opts.recovery_threads = (unsigned)threads[k];
        printf("  num.recovery.threads.per.data.dir=%ld\n", threads[k]);
        double secs[16];
        for (int r = 0; r < runs; r++) {
            m = open_mgr(&secs[r]);
            if (r + 1 < runs && !eng_manager_close(m))
                die("close", -EIO);
        }
        report("clean", secs, runs, m);
        append_all(m, 1);
        eng_manager_abandon(m); /* kill -9: no seal, no checkpoint, no marker */
        for (int r = 0; r < runs; r++) {
            m = open_mgr(&secs[r]);
            if (r + 1 < runs)
                eng_manager_abandon(m); /* still unclean: the same state again */
        }
        report("unclean", secs, runs, m);
        if (!eng_manager_close(m))
            die("close", -EIO);
    }
    eng_fs_remove_tree(dir);
    return 0;
}
