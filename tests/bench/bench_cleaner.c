/*
 * bench_cleaner.c - log cleaner throughput: MB/s of dirty log compacted by
 * one thread (eng_partition_clean directly, as a cleaner thread calls it).
 *
 * Workload: TOTAL_MB of records with VALUE_BYTES-byte values over KEYS keys
 * (uniformly random, "key-%08d"), 100 records a batch, in SEGMENT_MB
 * segments of a cleanup.policy=compact partition, then a roll so all of it
 * is cleanable.  The anchor, measured in the same run, is plain read() of
 * the same .log files (warm page cache, as the cleaner sees them right after
 * the appends).  The cleaner reads the dirty range twice (offset map, then
 * recopy), writes the survivors and fsyncs each cleaned segment; with a
 * dedupe buffer too small for the keys it needs several rounds, each over
 * the whole log.  Wall-clock MB/s and MB per CPU-second of the cleaning
 * thread are both printed: the second holds on a busy machine, the gap
 * between them is fsync and waiting.  Lookups in a large offset map are
 * cache misses (the map is random access over dedupe.buffer.size bytes), so
 * a buffer sized to the keys cleans faster than Kafka's 128 MiB default.
 * Prints the figures, never pass/fail.
 *
 *   bench_cleaner [DIR] [TOTAL_MB=256] [KEYS=100000] [VALUE_BYTES=100]
 *                 [SEGMENT_MB=1] [DEDUPE_MB=128]
 */
#include "eng_batch.h"
#include "eng_compact.h"
#include "eng_config.h"
#include "eng_fs.h"
#include "eng_logger.h"
#include "eng_offset_map.h"
#include "eng_partition.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* CPU seconds of this thread (the figures hold on a loaded machine). */
static double cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static uint64_t rnd(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

/* The cleaner's own start and end lines, as the server would log them. */
static void sink(eng_log_level level, const char *line, void *ctx)
{
    (void)level;
    (void)ctx;
    if (strstr(line, "clean"))
        printf("  log: %s\n", line);
}

/* read() of every .log file in dir with a 1 MiB buffer; returns bytes. */
static uint64_t read_logs(const char *dir)
{
    static char buf[1 << 20];
    uint64_t total = 0;
    DIR *d = opendir(dir);
    if (!d)
        return 0;
    for (struct dirent *e; (e = readdir(d));) {
        size_t l = strlen(e->d_name);
        if (l < 5 || strcmp(e->d_name + l - 4, ".log"))
            continue;
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        int fd = open(path, O_RDONLY);
        if (fd < 0)
            continue;
        for (ssize_t n; (n = read(fd, buf, sizeof buf)) > 0;)
            total += (uint64_t)n;
        close(fd);
    }
    closedir(d);
    return total;
}

static void commas(char *out, size_t len, uint64_t v)
{
    char tmp[32];
    int n = snprintf(tmp, sizeof tmp, "%llu", (unsigned long long)v), o = 0;
    for (int i = 0; i < n && (size_t)o + 2 < len; i++) {
        if (i && (n - i) % 3 == 0)
            out[o++] = ',';
        out[o++] = tmp[i];
    }
    out[o] = 0;
}

int main(int argc, char **argv)
{
    const char *dir = argc > 1 ? argv[1] : "/tmp/logstore-bench-cleaner";
    long total_mb = argc > 2 ? atol(argv[2]) : 256;
    long keys = argc > 3 ? atol(argv[3]) : 100000;
    int vlen = argc > 4 ? atoi(argv[4]) : 100;
    long seg_mb = argc > 5 ? atol(argv[5]) : 1;
    long dedupe_mb = argc > 6 ? atol(argv[6]) : 128;
    if (total_mb <= 0 || keys <= 0 || vlen < 0 || vlen > 65536 || seg_mb <= 0 || dedupe_mb <= 0) {
        fprintf(stderr, "usage: bench_cleaner [DIR] [TOTAL_MB] [KEYS] [VALUE_BYTES] [SEGMENT_MB] [DEDUPE_MB]\n");
        return 2;
    }
    eng_fs_remove_tree(dir);
    eng_fs_mkdir(dir);
    char pdir[4096];
    snprintf(pdir, sizeof pdir, "%s/bench-0", dir);

    eng_config_defaults d;
    eng_config_defaults_init(&d);
    d.cfg.v[ENG_CFG_CLEANUP_POLICY].i = ENG_POLICY_COMPACT;
    d.cfg.v[ENG_CFG_SEGMENT_BYTES].i = seg_mb << 20;
    eng_partition_params pp = {.topic = "bench", .id = 0, .dir = pdir, .config = d.cfg,
                               .clean_shutdown = true, .log_start_offset = -1};
    eng_partition *p;
    if (eng_partition_open(&pp, &p, NULL)) {
        fprintf(stderr, "cannot open partition\n");
        return 1;
    }

    /* The dirty log. */
    enum { PER_BATCH = 100 };
    char (*kbuf)[24] = calloc(PER_BATCH, 24);
    uint8_t *vbuf = malloc((size_t)PER_BATCH * (size_t)(vlen ? vlen : 1));
    eng_record_spec recs[PER_BATCH];
    size_t cap = (size_t)PER_BATCH * ((size_t)vlen + 64) + ENG_BATCH_OVERHEAD;
    uint8_t *batch = malloc(cap);
    uint64_t seed = 0x9e3779b97f4a7c15ULL, written = 0, nrec = 0;
    eng_batch_params bp;
    eng_batch_params_init(&bp);
    eng_append_opts ao = {.expected_offset = -1};
    eng_append_result res;
    double t0 = now_s();
    while (written < (uint64_t)total_mb << 20) {
        for (int i = 0; i < PER_BATCH; i++) {
            int klen = snprintf(kbuf[i], 24, "key-%08ld", (long)(rnd(&seed) % (uint64_t)keys));
            uint8_t *v = vbuf + (size_t)i * (size_t)vlen;
            uint64_t x = rnd(&seed);
            for (int j = 0; j < vlen; j++)
                v[j] = (uint8_t)('a' + (x >> (j % 60)) % 26);
            recs[i] = (eng_record_spec){.timestamp = 1794024676890LL + (int64_t)nrec, .key = (uint8_t *)kbuf[i],
                                        .key_len = klen, .value = v, .value_len = vlen};
            nrec++;
        }
        size_t len = eng_batch_encode(batch, cap, &bp, recs, PER_BATCH);
        if (!len || eng_partition_append(p, batch, len, &ao, &res, NULL)) {
            fprintf(stderr, "append failed\n");
            return 1;
        }
        written += len;
    }
    int64_t base;
    eng_partition_roll(p, &base);
    eng_partition_flush(p);
    double write_s = now_s() - t0;
    eng_partition_info info;
    eng_partition_info_get(p, &info);
    uint32_t segments = info.segment_count - 1;

    /* Anchor: plain read() of the same files, twice (the first warms up). */
    read_logs(pdir);
    t0 = now_s();
    double c0 = cpu_s();
    uint64_t anchor_bytes = read_logs(pdir);
    double read_s = now_s() - t0, read_cpu = cpu_s() - c0;

    /* The clean: rounds until the checkpoint reaches the uncleanable offset. */
    eng_offset_map *map;
    if (eng_offset_map_new((size_t)dedupe_mb << 20, 0.9, &map)) {
        fprintf(stderr, "cannot allocate the offset map\n");
        return 1;
    }
    eng_logger_set_sink(sink, NULL, ENG_LOG_INFO);
    int64_t ckpt = -1;
    int rounds = 0;
    uint64_t bytes_read = 0, removed = 0, after = 0;
    uint32_t segs_after = 0;
    size_t max_entries = 0;
    t0 = now_s();
    c0 = cpu_s();
    for (;;) {
        eng_clean_opts o = {.map = map, .now_ms = eng_now_ms()};
        eng_clean_stats st;
        int rc = eng_partition_clean(p, ckpt, &o, &st);
        if (rc) {
            fprintf(stderr, "clean failed: %s\n", eng_strerror(rc));
            return 1;
        }
        rounds++;
        bytes_read += st.bytes_read;
        removed += st.records_removed;
        after = st.bytes_after;
        segs_after = st.segments_after;
        if (st.map_entries > max_entries)
            max_entries = st.map_entries;
        ckpt = st.end_offset;
        if (st.end_offset >= st.first_uncleanable)
            break;
    }
    double clean_s = now_s() - t0, clean_cpu = cpu_s() - c0;
    eng_logger_set_sink(NULL, NULL, ENG_LOG_INFO);

    char a[32], b[32], c[32], e[32];
    commas(a, sizeof a, nrec);
    commas(b, sizeof b, (uint64_t)keys);
    printf("cleaner: %.0f MB of dirty log, %s records of %d-byte values over %s keys, %u segments of %ld MiB"
           " (written at %.0f MB/s)\n",
           (double)written / 1e6, a, vlen, b, segments, seg_mb, (double)written / 1e6 / write_s);
    commas(a, sizeof a, eng_offset_map_slots(map));
    commas(b, sizeof b, eng_offset_map_max_entries(map));
    commas(c, sizeof c, max_entries);
    printf("  dedupe buffer %ld MiB: %s slots, %s keys at most a round; %s keys mapped, %d round%s\n",
           dedupe_mb, a, b, c, rounds, rounds == 1 ? "" : "s");
    printf("  read() of the same .log files:  %8.1f MB/s (page cache; %.1f MB per CPU-second)\n",
           (double)anchor_bytes / 1e6 / read_s, (double)anchor_bytes / 1e6 / read_cpu);
    commas(a, sizeof a, removed);
    printf("  clean, one thread:              %8.1f MB/s of dirty log (%.2f s wall; %.1f MB read"
           " over both passes)\n",
           (double)written / 1e6 / clean_s, clean_s, (double)bytes_read / 1e6);
    printf("  clean, per CPU-second:          %8.1f MB/s of dirty log (%.2f s of the thread's CPU;"
           " the rest is waiting: fsync, a loaded machine)\n",
           (double)written / 1e6 / clean_cpu, clean_cpu);
    commas(e, sizeof e, after);
    printf("  result: %u segments -> %u, %s bytes kept, %s records removed\n", segments, segs_after, e, a);
    eng_offset_map_free(map);
    eng_partition_close(p);
    eng_partition_unref(p);
    eng_fs_remove_tree(dir);
    free(kbuf);
    free(vbuf);
    free(batch);
    return 0;
}
