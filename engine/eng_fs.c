/*
 * eng_fs.c - durable file replacement, directory sync, tree removal, the
 * clocks.
 *
 * Two clocks, never mixed: the wall clock (eng_now_ms) is for what Kafka
 * decides by wall time (record timestamps, LogAppendTime, segment.ms,
 * retention.ms, compaction lags, producer expiry) and for times shown to
 * users; the monotonic clock (eng_mono_*) is for every wait and interval,
 * which must neither fire early nor stall when the wall clock is stepped
 * (NTP, a VM resume, `date -s`).
 */
#include "eng_fs.h"

#include "eng_error.h"
#include "eng_fault.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <sys/uio.h>
#include <unistd.h>

static int write_all(int fd, const void *data, size_t len)
{
    const char *p = data;
    while (len > 0) {
        ssize_t w = write(fd, p, len);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        p += w;
        len -= (size_t)w;
    }
    return 0;
}

/* The recipe of eng_fs_write_atomic and eng_fs_write_replace; `fault`
 * (test builds) is the point that acts halfway through the data. */
static int replace_file(const char *path, const void *data, size_t len, bool durable,
                        const char *fault)
{
    char tmp[4096];
    if ((size_t)snprintf(tmp, sizeof tmp, "%s.tmp", path) >= sizeof tmp)
        return ENG_EINVAL;
    const char *slash = strrchr(tmp, '/');
    size_t dir_len = slash ? (size_t)(slash + 1 - tmp) : 0;
    int fd;
    if (strlen(tmp + dir_len) > NAME_MAX) {
        /* "<name>.tmp" does not fit in a directory entry (the meta file of a
         * 249-character topic is 254 bytes): use a unique short name in the
         * same directory instead, so the rename stays atomic. */
        snprintf(tmp + dir_len, sizeof tmp - dir_len, ".tmp-XXXXXX");
        fd = mkostemp(tmp, O_CLOEXEC);
        if (fd >= 0 && fchmod(fd, 0644) < 0) {
            int e = errno;
            close(fd);
            unlink(tmp);
            return -e;
        }
    } else {
        fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    }
    if (fd < 0)
        return -errno;
#ifdef LOGSTORE_TEST_BUILD
    /* Half the file is written before the fault point acts, so that `exit`
     * leaves a torn temporary file (it used to act first: found by
     * tests/crash/test_faults.c). */
    int rc = write_all(fd, data, len / 2);
    if (!rc && fault)
        rc = ENG_FAULT(fault);
    if (!rc)
        rc = write_all(fd, (const char *)data + len / 2, len - len / 2);
#else
    (void)fault;
    int rc = write_all(fd, data, len);
#endif
    if (!rc && durable && fsync(fd) < 0)
        rc = -errno;
    if (close(fd) < 0 && !rc)
        rc = -errno;
    if (!rc && rename(tmp, path) < 0)
        rc = -errno;
    if (rc) {
        unlink(tmp);
        return rc;
    }
    return durable ? eng_fs_sync_parent(path) : 0;
}

int eng_fs_write_atomic(const char *path, const void *data, size_t len)
{
    return replace_file(path, data, len, true, "fs.write_atomic.mid");
}

int eng_fs_write_replace(const char *path, const void *data, size_t len, bool durable)
{
    return replace_file(path, data, len, durable, NULL);
}

int eng_fs_fallocate(int fd, uint64_t off, uint64_t len)
{
    /* A signal during a long allocation makes fallocate(2) fail with EINTR
     * (and so glibc's emulation, which writes a byte per block): nothing is
     * wrong with the disk, and allocating again what was allocated costs
     * nothing.  Taken for an I/O error, it failed a roll and could take the
     * log dir offline. */
    int e;
    do {
        int rc = ENG_FAULT("fs.fallocate");
        e = rc ? -rc : posix_fallocate(fd, (off_t)off, (off_t)len);
    } while (e == EINTR);
    return -e;
}

int eng_fs_read_file(const char *path, size_t max_len, char **out, size_t *len)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    struct stat st;
    int rc = 0;
    char *buf = NULL;
    if (fstat(fd, &st) < 0) {
        rc = -errno;
        goto done;
    }
    if ((uint64_t)st.st_size > max_len) {
        rc = -EFBIG;
        goto done;
    }
    buf = malloc((size_t)st.st_size + 1);
    if (!buf) {
        rc = -ENOMEM;
        goto done;
    }
    size_t got = 0;
    while (got < (size_t)st.st_size) {
        ssize_t r = read(fd, buf + got, (size_t)st.st_size - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            rc = -errno;
            goto done;
        }
        if (r == 0)
            break;
        got += (size_t)r;
    }
    buf[got] = 0;
    *out = buf;
    *len = got;
    buf = NULL;
done:
    free(buf);
    close(fd);
    return rc;
}

static int sync_path(const char *path, int flags)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | flags);
    if (fd < 0)
        return -errno;
    int rc = fsync(fd) < 0 ? -errno : 0;
    close(fd);
    return rc;
}

int eng_fs_sync_dir(const char *path)
{
    return sync_path(path, O_DIRECTORY);
}

int eng_fs_open_dir(const char *path, int *fd)
{
    int d = open(path, O_RDONLY | O_CLOEXEC | O_DIRECTORY);
    if (d < 0)
        return -errno;
    *fd = d;
    return 0;
}

int eng_fs_sync_dir_fd(int fd)
{
    return fsync(fd) < 0 ? -errno : 0;
}

int eng_fs_sync_file(const char *path)
{
    return sync_path(path, 0);
}

int eng_fs_sync_parent(const char *file_path)
{
    char dir[4096];
    const char *slash = strrchr(file_path, '/');
    if (!slash)
        return eng_fs_sync_dir(".");
    size_t n = (size_t)(slash - file_path);
    if (n == 0)
        return eng_fs_sync_dir("/");
    if (n >= sizeof dir)
        return ENG_EINVAL;
    memcpy(dir, file_path, n);
    dir[n] = 0;
    return eng_fs_sync_dir(dir);
}

int eng_fs_mkdir(const char *path)
{
    if (mkdir(path, 0755) == 0 || errno == EEXIST)
        return 0;
    return -errno;
}

int eng_fs_mkdir_durable(const char *path)
{
    if (mkdir(path, 0755) == 0)
        return eng_fs_sync_parent(path);
    return errno == EEXIST ? 0 : -errno;
}

static int remove_at(int parent_fd, const char *name, _Atomic bool *stop)
{
    int fd = openat(parent_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ENOTDIR || errno == ELOOP)
            return unlinkat(parent_fd, name, 0) < 0 && errno != ENOENT ? -errno : 0;
        return errno == ENOENT ? 0 : -errno;
    }
    DIR *d = fdopendir(fd);
    if (!d) {
        int rc = -errno;
        close(fd);
        return rc;
    }
    int rc = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        if (stop && atomic_load(stop)) {
            rc = ENG_ESHUTDOWN;
            break;
        }
        int r = remove_at(dirfd(d), e->d_name, stop);
        if (r && !rc)
            rc = r;
    }
    closedir(d);
    if (rc == ENG_ESHUTDOWN)
        return rc;
    if (unlinkat(parent_fd, name, AT_REMOVEDIR) < 0 && errno != ENOENT && !rc)
        rc = -errno;
    return rc;
}

int eng_fs_remove_tree(const char *path)
{
    return remove_at(AT_FDCWD, path, NULL);
}

int eng_fs_remove_tree_until(const char *path, _Atomic bool *stop)
{
    return remove_at(AT_FDCWD, path, stop);
}

int eng_fs_join(char *buf, size_t len, const char *dir, const char *name)
{
    if ((size_t)snprintf(buf, len, "%s/%s", dir, name) >= len)
        return ENG_EINVAL;
    return 0;
}

int eng_fs_segment_path(char *buf, size_t len, const char *dir, int64_t base, const char *suffix)
{
    if ((size_t)snprintf(buf, len, "%s/%020" PRId64 "%s", dir, base, suffix) >= len)
        return ENG_EINVAL;
    return 0;
}

int64_t eng_fs_segment_name_base(const char *name, const char **rest)
{
    int64_t v = 0;
    for (int i = 0; i < 20; i++) {
        if (name[i] < '0' || name[i] > '9' || v > (INT64_MAX - (name[i] - '0')) / 10)
            return -1;
        v = v * 10 + (name[i] - '0');
    }
    if (name[20] != '.')
        return -1;
    *rest = name + 20;
    return v;
}

bool eng_fs_exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

/* NULL: CLOCK_REALTIME.  Read relaxed: an append pays one load. */
static _Atomic(eng_wall_clock_fn) wall_clock;

void eng_clock_set_wall(eng_wall_clock_fn fn)
{
    atomic_store(&wall_clock, fn);
}

int64_t eng_real_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t eng_now_ms(void)
{
    eng_wall_clock_fn fn = atomic_load_explicit(&wall_clock, memory_order_relaxed);
    return fn ? fn() : eng_real_now_ms();
}

int64_t eng_mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

struct timespec eng_mono_deadline(int64_t ms)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    ts.tv_sec += ms / 1000;
    ts.tv_nsec += (ms % 1000) * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    return ts;
}

int64_t eng_mono_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* iovecs handed to one pwritev (two a batch; 8 KiB of stack, half of
 * IOV_MAX): a request of many small batches takes a few calls rather than
 * one per batch. */
#define WRITE_IOV_WINDOW 512

int eng_fs_pwrite_all(int fd, const uint8_t *data, size_t len, uint64_t pos)
{
    size_t done = 0;
    while (done < len) {
        ssize_t w = pwrite(fd, data + done, len - done, (off_t)(pos + done));
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        if (w == 0)
            return -EIO;
        done += (size_t)w;
    }
    return 0;
}

int eng_fs_pwritev_range(int fd, const struct iovec *iov, int cnt, uint64_t pos, size_t from,
                         size_t to)
{
    int i = 0;
    size_t skip = from; /* bytes of iov[i] already written */
    while (i < cnt && skip >= iov[i].iov_len)
        skip -= iov[i++].iov_len;
    while (from < to) {
        struct iovec win[WRITE_IOV_WINDOW];
        int k = 0;
        size_t want = to - from, sk = skip;
        for (int j = i; j < cnt && k < WRITE_IOV_WINDOW && want; j++, sk = 0) {
            size_t l = iov[j].iov_len - sk < want ? iov[j].iov_len - sk : want;
            win[k++] = (struct iovec){(uint8_t *)iov[j].iov_base + sk, l};
            want -= l;
        }
        ssize_t w = pwritev(fd, win, k, (off_t)(pos + from));
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        if (w == 0)
            return -EIO;
        from += (size_t)w;
        for (skip += (size_t)w; i < cnt && skip >= iov[i].iov_len;)
            skip -= iov[i++].iov_len;
    }
    return 0;
}
