/*
 * bench_recovery.c - restart time after an unclean stop, against the total
 * and the unflushed size of the log.  Never pass/fail: figures only.
 *
 * For each total T (MB): a fresh data dir, topic "rec" (one partition,
 * segment.bytes 128 MiB), T MB of the seed workload (10 records x 250 B,
 * 2,731-byte batches) appended through eng_partition_append, flushed
 * (eng_partition_flush: fsync, the recovery point moves to the end), rolled
 * (the next segment starts at the recovery point) and checkpointed
 * (recovery-point-offset-checkpoint).  Then, for each unflushed size U in
 * increasing order, U MB in all are appended after the recovery point and
 * never flushed, and the manager is dropped with eng_manager_abandon: no
 * seal, no checkpoint, no clean-shutdown marker, exactly what kill -9 leaves
 * (the page cache keeps the bytes).  eng_manager_open is then timed:
 *   warm: the files in the page cache, as right after a crash;
 *   cold: every file fdatasync'd and dropped from the page cache first
 *         (posix_fadvise DONTNEED), as after a machine restart.
 * Each row prints the open time, the startup report's segments recovered,
 * the bytes those segments hold (what recovery re-read: every batch's CRC
 * and framing checked, indexes rebuilt) and that scan's MB/s.  A clean
 * open (after eng_manager_close wrote the marker) closes each total.
 *
 *   bench_recovery DIR [TOTALS_MB] [UNFLUSHED_MB]
 *   e.g. bench_recovery /tmp/r 256,1024 0,32,128,512
 */
#include "eng_batch.h"
#include "eng_error.h"
#include "eng_fs.h"
#include "eng_logger.h"
#include "eng_manager.h"
#include "svc_meta.h"

#include "bench_util.h"

#include <dirent.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define SEGMENT_BYTES (128u << 20)

static void die(const char *what, int rc)
{
    fprintf(stderr, "bench_recovery: %s: %s\n", what, eng_strerror(rc));
    exit(1);
}

static eng_manager_opts g_opts;
static uint8_t g_batch[4096];
static size_t g_batch_len;

static eng_manager *open_mgr(double *secs)
{
    eng_manager *m;
    eng_errdetail err = {0};
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

static eng_partition *part(eng_manager *m)
{
    eng_partition *p;
    int rc = eng_manager_partition(m, "rec", 0, &p, NULL);
    if (rc)
        die("partition", rc);
    return p;
}

/* Appends about mb megabytes; returns the seconds it took. */
static double append_mb(eng_partition *p, double mb)
{
    uint64_t want = (uint64_t)(mb * 1048576.0), done = 0;
    eng_append_opts o = {.expected_offset = -1};
    eng_append_result res;
    eng_errdetail err = {0};
    double t0 = bench_now_s();
    while (done < want) {
        int rc = eng_partition_append(p, g_batch, g_batch_len, &o, &res, &err);
        if (rc)
            die(err.message, rc);
        done += g_batch_len;
    }
    return bench_now_s() - t0;
}

/* Bytes of the segments at or after base (what an unclean open re-reads). */
static uint64_t bytes_from(const char *pdir, int64_t base, uint64_t *total)
{
    DIR *d = opendir(pdir);
    uint64_t n = 0;
    *total = 0;
    struct dirent *e;
    char path[4600];
    while (d && (e = readdir(d))) {
        size_t l = strlen(e->d_name);
        if (l != 24 || strcmp(e->d_name + 20, ".log"))
            continue;
        snprintf(path, sizeof path, "%s/%s", pdir, e->d_name);
        struct stat st;
        if (stat(path, &st))
            continue;
        *total += (uint64_t)st.st_size;
        if (strtoll(e->d_name, NULL, 10) >= base)
            n += (uint64_t)st.st_size;
    }
    if (d)
        closedir(d);
    return n;
}

static void report(const char *label, double secs, eng_manager *m, uint64_t scanned, uint64_t total)
{
    eng_startup_report r;
    eng_manager_startup_report(m, &r);
    double mb = (double)scanned / 1048576.0;
    printf("    %-5s open %8.1f ms  (report %5" PRId64 " ms, %s)  %u of %u segments recovered, "
           "%7.1f MB of %7.1f MB re-read",
           label, secs * 1000, r.duration_ms, r.clean_shutdown ? "clean" : "unclean",
           r.segments_recovered, r.segments, r.clean_shutdown ? 0.0 : mb, (double)total / 1048576.0);
    if (!r.clean_shutdown && mb > 1)
        printf(", scan %6.0f MB/s", mb / secs);
    printf("\n");
    fflush(stdout);
}

int main(int argc, char **argv)
{
    const char *root = argc > 1 ? argv[1] : "/tmp/logstore-bench-recovery";
    long totals[8], unflushed[8];
    int nt = bench_parse_list(argc > 2 ? argv[2] : "256,1024", totals, 8);
    int nu = bench_parse_list(argc > 3 ? argv[3] : "0,32,128,512", unflushed, 8);
    eng_logger_set_sink(NULL, NULL, ENG_LOG_WARN);

    g_batch_len = bench_seed_batch(g_batch, sizeof g_batch);

    printf("recovery after an unclean stop: segment.bytes 128 MiB, %zu-byte batches; warm = files in "
           "the page cache (right after a crash), cold = dropped from it first\n", g_batch_len);
    for (int t = 0; t < nt; t++) {
        char dir[2048], pdir[2200];
        snprintf(dir, sizeof dir, "%s/total-%ld", root, totals[t]);
        snprintf(pdir, sizeof pdir, "%s/rec-0", dir);
        eng_fs_remove_tree(dir);
        eng_fs_mkdir(root);
        memset(&g_opts, 0, sizeof g_opts);
        g_opts.log_dir = dir;
        eng_config_defaults_init(&g_opts.defaults);
        g_opts.codec = svc_meta_codec();
        eng_jobs_opts_default(&g_opts.jobs);

        eng_manager *m = open_mgr(NULL);
        const char *k[] = {"segment.bytes"}, *v[] = {"134217728"};
        eng_errdetail err = {0};
        int rc = eng_manager_create_topic(m, "rec", 1, k, v, 1, &err);
        if (rc)
            die(err.message, rc);
        eng_partition *p = part(m);
        double wsecs = append_mb(p, (double)totals[t]);
        double f0 = bench_now_s();
        if ((rc = eng_partition_flush(p)))
            die("flush", rc);
        double fsecs = bench_now_s() - f0;
        int64_t rp;
        if ((rc = eng_partition_roll(p, &rp)))
            die("roll", rc);
        if ((rc = eng_manager_checkpoint_recovery_points(m)))
            die("checkpoint", rc);
        printf("  total %ld MB flushed (written at %.0f MB/s, fsync %.1f s), recovery point %" PRId64 "\n",
               totals[t], (double)totals[t] / wsecs, fsecs, eng_partition_recovery_point(p));
        long have = 0;
        for (int u = 0; u < nu; u++) {
            if (unflushed[u] > have)
                append_mb(p, (double)(unflushed[u] - have));
            have = unflushed[u] > have ? unflushed[u] : have;
            eng_partition_unref(p);
            eng_manager_abandon(m); /* kill -9: no seal, no checkpoint, no marker */
            uint64_t total, scanned = bytes_from(pdir, rp, &total);
            printf("  + %ld MB unflushed after it:\n", unflushed[u]);
            double secs;
            m = open_mgr(&secs);
            report("warm", secs, m, scanned, total);
            eng_manager_abandon(m); /* still unclean: the same state again */
            bench_drop_cache(pdir);
            m = open_mgr(&secs);
            report("cold", secs, m, scanned, total);
            p = part(m);
        }
        eng_partition_unref(p);
        eng_manager_close(m);
        double secs;
        m = open_mgr(&secs);
        uint64_t total;
        bytes_from(pdir, 0, &total);
        printf("  after a clean stop:\n");
        report("warm", secs, m, 0, total);
        eng_manager_close(m);
        eng_fs_remove_tree(dir);
    }
    return 0;
}
