/*
 * bench_util.h - small helpers the engine benchmarks share: a monotonic
 * clock in seconds, a comma-separated list of numbers from the command
 * line, the seed workload's batch, and pushing a tree of files to disk and out of the page cache (a
 * "cold" start, as after a machine restart).
 */
#ifndef BENCH_UTIL_H
#define BENCH_UTIL_H

#include "eng_batch.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static inline double bench_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Up to max numbers of "a,b,c" into out; returns how many. */
static inline int bench_parse_list(const char *s, long *out, int max)
{
    int n = 0;
    for (char *end; *s && n < max; s = *end ? end + 1 : end) {
        out[n++] = strtol(s, &end, 10);
        if (end == s)
            break;
    }
    return n;
}

/* The seed workload's batch (10 records, 8-byte keys, 250-byte values,
 * one timestamp) into buf; returns its length (0 when cap is short). */
static inline size_t bench_seed_batch(uint8_t *buf, size_t cap)
{
    eng_record_spec recs[10];
    char keys[10][16];
    static uint8_t value[250];
    memset(value, 'v', sizeof value);
    for (int i = 0; i < 10; i++) {
        snprintf(keys[i], sizeof keys[i], "k-%06d", i);
        recs[i] = (eng_record_spec){.timestamp = 1700000000000LL, .key = (const uint8_t *)keys[i],
                                    .key_len = 8, .value = value, .value_len = 250};
    }
    eng_batch_params bp;
    eng_batch_params_init(&bp);
    return eng_batch_encode(buf, cap, &bp, recs, 10);
}

/* Every file under dir (recursively) on disk and out of the page cache. */
static inline void bench_drop_cache(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    char path[4600];
    while (d && (e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        int n = snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        struct stat st;
        if (n < 0 || (size_t)n >= sizeof path)
            continue;
        if (lstat(path, &st))
            continue;
        if (S_ISDIR(st.st_mode)) {
            bench_drop_cache(path);
            continue;
        }
        int fd = open(path, O_RDONLY);
        if (fd < 0)
            continue;
        fdatasync(fd);
        posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
        close(fd);
    }
    if (d)
        closedir(d);
}

#endif
