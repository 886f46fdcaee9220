/*
 * bench_page_cache.c - how fast this machine takes appends into the page
 * cache when nothing else runs: one thread pwrite()s the same chunk (a
 * request body, such as one RecordBatch) at the end of a file, again and
 * again for a few seconds, starting a new file every GiB as a log rolls its
 * segments.  It does no HTTP, no validation and no fsync, so no append path
 * of one partition can beat it over the same time: the ceiling the binary
 * append benchmark is measured under.  The files are removed at the end
 * (their dirty pages go with them).
 *
 *   bench_page_cache DIR CHUNK_FILE [SECONDS]
 *
 * Prints "page cache: <MB/s> MB/s, <chunks/s> chunks/s, <GB> GB written".
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define FILE_BYTES (1L << 30)

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static int read_chunk(const char *path, char **buf, size_t *len)
{
    int fd = open(path, O_RDONLY);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) < 0 || st.st_size <= 0) {
        perror(path);
        if (fd >= 0)
            close(fd);
        return -1;
    }
    *len = (size_t)st.st_size;
    *buf = malloc(*len);
    ssize_t got = *buf ? read(fd, *buf, *len) : -1;
    close(fd);
    if (got != (ssize_t)*len) {
        fprintf(stderr, "%s: short read\n", path);
        free(*buf);
        return -1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: bench_page_cache DIR CHUNK_FILE [SECONDS]\n");
        return 2;
    }
    double seconds = argc > 3 ? atof(argv[3]) : 5.0;
    char *chunk;
    size_t len;
    if (read_chunk(argv[2], &chunk, &len))
        return 1;

    char path[4096];
    int files = 0, fd = -1, rc = 0;
    long n = 0, in_file = 0;
    double t0 = now_s(), t;
    while ((t = now_s()) - t0 < seconds) {
        /* 64 writes between clock reads keep the clock out of the figure. */
        for (int i = 0; i < 64; i++) {
            if (fd < 0 || in_file + (long)len > FILE_BYTES) {
                if (fd >= 0)
                    close(fd);
                snprintf(path, sizeof path, "%s/page-cache-%d.bin", argv[1], files++);
                fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
                if (fd < 0) {
                    perror(path);
                    rc = 1;
                    goto out;
                }
                in_file = 0;
            }
            if (pwrite(fd, chunk, len, in_file) != (ssize_t)len) {
                perror("pwrite");
                rc = 1;
                goto out;
            }
            in_file += (long)len;
            n++;
        }
    }
    double bytes = (double)n * (double)len;
    printf("page cache: %.0f MB/s, %.0f chunks/s, %.2f GB written\n", bytes / (t - t0) / 1e6,
           (double)n / (t - t0), bytes / 1e9);
out:
    if (fd >= 0)
        close(fd);
    for (int i = 0; i < files; i++) {
        snprintf(path, sizeof path, "%s/page-cache-%d.bin", argv[1], i);
        unlink(path);
    }
    free(chunk);
    return rc;
}
