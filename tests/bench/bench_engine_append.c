/*
 * bench_engine_append.c - engine append throughput beside raw write().
 *
 * Workload (the Kafka blog's seed): batches of 10 records, keys k-000000...,
 * 250-byte values, 2,731 bytes a batch.  The same bytes are first written
 * with plain write() in the same chunks to a file in the same directory (the
 * anchor: what the disk and page cache give), then appended through
 * eng_partition_append with default configs except segment.bytes, so rolls,
 * index entries and offset stamping are all paid.  Prints MB/s for both and
 * the ratio (median of three alternating rounds).  Never pass/fail.
 *
 *   bench_engine_append [DIR] [TOTAL_MB]
 */
#include "eng_batch.h"
#include "eng_config.h"
#include "eng_fs.h"
#include "eng_partition.h"

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

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    const char *dir = argc > 1 ? argv[1] : "/tmp/logstore-bench";
    long total_mb = argc > 2 ? atol(argv[2]) : 512;
    char path[4096];
    eng_fs_remove_tree(dir);
    eng_fs_mkdir(dir);

    uint8_t value[250];
    memset(value, 'v', sizeof value);
    char keys[10][16];
    eng_record_spec recs[10];
    for (int i = 0; i < 10; i++) {
        snprintf(keys[i], sizeof keys[i], "k-%06d", i);
        recs[i] = (eng_record_spec){.timestamp = 1794024676890LL, .key = (uint8_t *)keys[i],
                                    .key_len = 8, .value = value, .value_len = 250};
    }
    eng_batch_params bp;
    eng_batch_params_init(&bp);
    uint8_t batch[4096];
    size_t size = eng_batch_encode(batch, sizeof batch, &bp, recs, 10);
    long batches = total_mb * 1000000L / (long)size;

    eng_config_defaults d;
    eng_config_defaults_init(&d);
    d.cfg.v[ENG_CFG_SEGMENT_BYTES].i = 1073741824;
    /* Rounds alternate anchor and engine so both see the same machine state;
     * the median of each is reported. */
    enum { ROUNDS = 3 };
    double raw_t[ROUNDS], eng_t[ROUNDS];
    for (int round = 0; round < ROUNDS; round++) {
        snprintf(path, sizeof path, "%s/raw.bin", dir);
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        double t0 = now_s();
        for (long i = 0; i < batches; i++)
            if (write(fd, batch, size) != (ssize_t)size) {
                perror("write");
                return 1;
            }
        raw_t[round] = now_s() - t0;
        close(fd);
        unlink(path);

        snprintf(path, sizeof path, "%s/bench-0", dir);
        eng_fs_remove_tree(path);
        eng_partition_params pp = {.topic = "bench", .id = 0, .dir = path, .config = d.cfg,
                                   .clean_shutdown = true, .log_start_offset = -1};
        eng_partition *p;
        if (eng_partition_open(&pp, &p, NULL)) {
            fprintf(stderr, "cannot open partition\n");
            return 1;
        }
        eng_append_opts o = {.expected_offset = -1};
        eng_append_result res;
        t0 = now_s();
        for (long i = 0; i < batches; i++) {
            if (eng_partition_append(p, batch, size, &o, &res, NULL)) {
                fprintf(stderr, "append failed\n");
                return 1;
            }
        }
        eng_t[round] = now_s() - t0;
        eng_partition_close(p);
        eng_partition_unref(p);
        eng_fs_remove_tree(path);
    }
    eng_fs_remove_tree(dir);
    qsort(raw_t, ROUNDS, sizeof raw_t[0], cmp_double);
    qsort(eng_t, ROUNDS, sizeof eng_t[0], cmp_double);
    double raw_s = raw_t[ROUNDS / 2], eng_s = eng_t[ROUNDS / 2];
    double mb = (double)batches * (double)size / 1e6;
    printf("engine append: %ld batches of %zu bytes (10 records x 250 B), %.0f MB\n", batches, size, mb);
    printf("  raw write():   %8.1f MB/s\n", mb / raw_s);
    printf("  engine append: %8.1f MB/s  (%.2fx of raw, %.0f records/s)\n", mb / eng_s,
           raw_s / eng_s, batches * 10.0 / eng_s);
    return 0;
}
