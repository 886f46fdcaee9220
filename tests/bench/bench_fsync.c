/*
 * bench_fsync.c - the raw fsync rate of a disk: append a small record and
 * fdatasync, in a loop, for a few seconds.  The anchor for durable appends:
 * one client of a flush.messages=1 topic cannot beat it, and group commit is
 * what lets many clients share each fsync.
 *
 *   bench_fsync [DIR] [SECONDS]
 */
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

int main(int argc, char **argv)
{
    const char *dir = argc > 1 ? argv[1] : "/tmp";
    double seconds = argc > 2 ? atof(argv[2]) : 3.0;
    char path[4096];
    snprintf(path, sizeof path, "%s/fsync-bench.bin", dir);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) {
        perror(path);
        return 1;
    }
    char rec[100];
    memset(rec, 'r', sizeof rec);
    long n = 0;
    double t0 = now_s(), t;
    while ((t = now_s()) - t0 < seconds) {
        if (write(fd, rec, sizeof rec) != (ssize_t)sizeof rec || fdatasync(fd) != 0) {
            perror("write/fdatasync");
            return 1;
        }
        n++;
    }
    close(fd);
    unlink(path);
    printf("raw fsync: %.0f write+fdatasync/s (%.3f ms each)\n", n / (t - t0), (t - t0) * 1000 / n);
    return 0;
}
