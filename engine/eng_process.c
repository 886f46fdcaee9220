/*
 * eng_process.c - the process's descriptors, memory maps, memory and CPU
 * time, read from /proc.  Read on demand (a create's budget check, a /metrics scrape), never
 * on the append path.
 */
#include "eng_process.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

/* read(2), retried on EINTR: the bytes read, 0 at the end, or -errno. */
static ssize_t read_retry(int fd, void *buf, size_t len)
{
    ssize_t r;
    do
        r = read(fd, buf, len);
    while (r < 0 && errno == EINTR);
    return r < 0 ? -errno : r;
}

/* Reads a small /proc file whole into buf (NUL-terminated).  Not
 * eng_fs_read_file: /proc files report a size of 0. */
static int read_small(const char *path, char *buf, size_t cap)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    size_t n = 0;
    ssize_t r = 0;
    while (n + 1 < cap && (r = read_retry(fd, buf + n, cap - 1 - n)) > 0)
        n += (size_t)r;
    close(fd);
    if (r < 0)
        return (int)r;
    buf[n] = 0;
    return 0;
}

/* Lines of /proc/self/maps, one a mapping; the file can run to megabytes
 * (tens of thousands of segments), so it is counted as it streams. */
static int count_maps(long *count)
{
    int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    char buf[65536];
    long lines = 0;
    ssize_t r;
    while ((r = read_retry(fd, buf, sizeof buf)) > 0)
        for (const char *p = buf; (p = memchr(p, '\n', (size_t)(buf + r - p))); p++)
            lines++;
    close(fd);
    if (r < 0)
        return (int)r;
    *count = lines;
    return 0;
}

#ifdef LOGSTORE_TEST_BUILD
static _Atomic long map_limit_override;

void eng_process_set_map_limit(long limit)
{
    map_limit_override = limit;
}
#endif

static int map_limit(long *out)
{
#ifdef LOGSTORE_TEST_BUILD
    if ((*out = map_limit_override) > 0)
        return 0;
#endif
    char buf[64];
    int rc = read_small("/proc/sys/vm/max_map_count", buf, sizeof buf);
    if (rc)
        return rc;
    char *end;
    errno = 0;
    long lim = strtol(buf, &end, 10);
    if (errno || end == buf || lim <= 0)
        return -EINVAL;
    *out = lim;
    return 0;
}

int eng_process_map_headroom(long *headroom, long *limit)
{
    long lim, now;
    int rc = map_limit(&lim);
    if (rc)
        return rc;
    if ((rc = count_maps(&now)))
        return rc;
    *limit = lim;
    *headroom = lim > now ? lim - now : 0;
    return 0;
}

int eng_process_fd_headroom(long *headroom, long *limit)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
        return -errno;
    DIR *d = opendir("/proc/self/fd");
    if (!d)
        return -errno;
    long open_now = -1; /* the listing's own descriptor is not the caller's */
    struct dirent *e;
    while ((e = readdir(d)))
        if (e->d_name[0] != '.')
            open_now++;
    closedir(d);
    long lim = rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur > (rlim_t)LONG_MAX ? LONG_MAX
                                                                               : (long)rl.rlim_cur;
    *limit = lim;
    *headroom = lim > open_now ? lim - open_now : 0;
    return 0;
}

/* An open partition holds its active segment's .log, .index and .timeindex,
 * and maps the two indexes. */
#define FDS_PER_PARTITION 3
#define MAPS_PER_PARTITION 2

/* What a budget check keeps free of a limit: 5%, at least 64. */
static long reserve_of(long limit)
{
    return limit / 20 > 64 ? limit / 20 : 64;
}

/* Refuses, before any file is made, partitions the process could not keep
 * open or map: running out of descriptors or of maps (vm.max_map_count)
 * midway would fail the request anyway, and then every connection, roll and
 * checkpoint with it.  A share of each limit stays free for those. */
int eng_process_check_partition_budget(const char *name, int32_t adding, eng_errdetail *err)
{
    long headroom, limit;
    if (!eng_process_fd_headroom(&headroom, &limit)) {
        long reserve = reserve_of(limit);
        long need = (long)adding * FDS_PER_PARTITION;
        if (need + reserve > headroom) {
            eng_errdetail_key(err, "partitions");
            return eng_fail(err, -EMFILE,
                            "%d new partitions of '%.200s' need %ld open files, and %ld of this "
                            "process's limit of %ld are free (%ld kept for connections and "
                            "segment rolls); " ENG_FD_LIMIT_HINT,
                            (int)adding, name, need, headroom, limit, reserve);
        }
    }
    if (!eng_process_map_headroom(&headroom, &limit)) {
        long reserve = reserve_of(limit);
        long need = (long)adding * MAPS_PER_PARTITION;
        if (need + reserve > headroom) {
            eng_errdetail_key(err, "partitions");
            return eng_fail(err, -ENOMEM,
                            "%d new partitions of '%.200s' need %ld memory maps, and %ld of "
                            "vm.max_map_count=%ld are free (%ld kept for segment rolls); "
                            ENG_MAP_LIMIT_HINT,
                            (int)adding, name, need, headroom, limit, reserve);
        }
    }
    return 0; /* or cannot tell: the opens will say */
}

/* The boot time, seconds since the epoch: /proc/stat's "btime" line, which
 * follows an "intr" line that runs to tens of kilobytes on large machines. */
static int boot_time(long long *out)
{
    FILE *f = fopen("/proc/stat", "re");
    if (!f)
        return -errno;
    char *line = NULL;
    size_t cap = 0;
    int rc = -EINVAL;
    while (getline(&line, &cap, f) >= 0)
        if (sscanf(line, "btime %lld", out) == 1) {
            rc = 0;
            break;
        }
    free(line);
    fclose(f);
    return rc;
}

int eng_process_usage_get(eng_process_usage *out)
{
    char buf[1024];
    int rc = read_small("/proc/self/stat", buf, sizeof buf);
    if (rc)
        return rc;
    /* The command name (field 2) may hold spaces and ')': fields resume
     * after the last ')'. */
    const char *p = strrchr(buf, ')');
    if (!p)
        return -EINVAL;
    unsigned long long utime, stime, start, vsize;
    long long rss;
    /* state ppid pgrp session tty_nr tpgid flags minflt cminflt majflt
     * cmajflt utime stime cutime cstime priority nice num_threads
     * itrealvalue starttime vsize rss (proc(5) fields 3-24) */
    if (sscanf(p + 1,
               " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu %*d %*d %*d %*d %*d %*d "
               "%llu %llu %lld",
               &utime, &stime, &start, &vsize, &rss) != 5)
        return -EINVAL;
    long ticks = sysconf(_SC_CLK_TCK), page = sysconf(_SC_PAGESIZE);
    long long btime;
    if (ticks <= 0 || page <= 0 || (rc = boot_time(&btime)))
        return rc ? rc : -EINVAL;
    out->cpu_seconds = (double)(utime + stime) / (double)ticks;
    out->start_time_seconds = (double)btime + (double)start / (double)ticks;
    out->resident_bytes = rss > 0 ? (uint64_t)rss * (uint64_t)page : 0;
    out->virtual_bytes = vsize;
    return 0;
}
