/*
 * eng_fs.h - file-system helpers shared by the engine: durable atomic
 * writes, directory fsync, tree removal, path building, the clock.
 *
 * Durable replace follows the Redis/Kafka recipe: write <path>.tmp, fsync it,
 * rename over <path>, fsync the directory.  A crash leaves either the old file
 * or the new one, never a mix; a leftover .tmp is ignored by readers.
 */
#ifndef ENG_FS_H
#define ENG_FS_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>
#include <time.h>

/* Replaces path with len bytes of data, durably (see above). */
int eng_fs_write_atomic(const char *path, const void *data, size_t len);

/* The same, durably or not: without, nothing is fsync'd (a crash may leave
 * the old file, the new one, or a torn new one, and the reader must tell).
 * No fault point acts in it, so tests counting fs.write_atomic.mid hits
 * count only the files that need durability. */
int eng_fs_write_replace(const char *path, const void *data, size_t len, bool durable);

/* Writes len bytes at file position pos, resuming after short writes and
 * EINTR; 0 or -errno. */
int eng_fs_pwrite_all(int fd, const uint8_t *data, size_t len, uint64_t pos);

/* Writes bytes [from, to) of iov's concatenation at file position
 * pos + from, as eng_fs_pwrite_all does, with pwritev. */
int eng_fs_pwritev_range(int fd, const struct iovec *iov, int cnt, uint64_t pos, size_t from,
                         size_t to);

/* posix_fallocate of [off, off + len), again after EINTR; 0 or -errno. */
int eng_fs_fallocate(int fd, uint64_t off, uint64_t len);

/* Reads a whole file (up to max_len bytes) into a malloc'd buffer the
 * caller frees; a trailing NUL is added (not counted in *len). */
int eng_fs_read_file(const char *path, size_t max_len, char **out, size_t *len);

/* fsync of the directory at path (so a create or rename in it is durable). */
int eng_fs_sync_dir(const char *path);

/* Opens the directory at path for eng_fs_sync_dir_fd into *fd (the caller
 * closes it): a sequence of renames that must not start unless it can be
 * made durable takes its descriptor first, since a process out of
 * descriptors fails the open, not the fsync. */
int eng_fs_open_dir(const char *path, int *fd);

/* fsync of a directory opened by eng_fs_open_dir. */
int eng_fs_sync_dir_fd(int fd);

/* fsync of the file at path (a file written by another descriptor). */
int eng_fs_sync_file(const char *path);

/* fsync of the directory holding file_path. */
int eng_fs_sync_parent(const char *file_path);

/* mkdir that succeeds if the directory exists. */
int eng_fs_mkdir(const char *path);

/* The same, and when it made the directory, an fsync of its parent: a
 * directory entry is durable only once the directory holding it is. */
int eng_fs_mkdir_durable(const char *path);

/* Removes a directory and everything below it (no symlinks followed). */
int eng_fs_remove_tree(const char *path);

/* The same, giving up with ENG_ESHUTDOWN (what is left stays) once *stop
 * is set: checked before each entry. */
int eng_fs_remove_tree_until(const char *path, _Atomic bool *stop);

/* Writes "<dir>/<name>" into buf; ENG_EINVAL if it does not fit. */
int eng_fs_join(char *buf, size_t len, const char *dir, const char *name);

/* Writes "<dir>/<20-digit base><suffix>" into buf. */
int eng_fs_segment_path(char *buf, size_t len, const char *dir, int64_t base, const char *suffix);

/* The inverse: the base offset a file name starts with ("<20 digits>."),
 * with *rest at the '.', or -1 when it does not start so or the digits pass
 * INT64_MAX. */
int64_t eng_fs_segment_name_base(const char *name, const char **rest);

bool eng_fs_exists(const char *path);

/* Wall clock in milliseconds since the epoch (eng_clock_set_wall's source
 * when one is set). */
int64_t eng_now_ms(void);

/* CLOCK_REALTIME in milliseconds, whatever eng_clock_set_wall says. */
int64_t eng_real_now_ms(void);

/* Replaces the wall clock's source (NULL: CLOCK_REALTIME again), so tests
 * can step it as NTP or `date -s` would.  The monotonic clock has no such
 * seam on purpose: timed waits sleep on the kernel's CLOCK_MONOTONIC,
 * which a replaced source could not move along. */
typedef int64_t (*eng_wall_clock_fn)(void);
void eng_clock_set_wall(eng_wall_clock_fn fn);

/* Monotonic clock in milliseconds (for intervals). */
int64_t eng_mono_ms(void);

/* Monotonic clock in microseconds. */
int64_t eng_mono_us(void);

/* The monotonic time ms from now, for pthread_cond_timedwait on a
 * condition variable set to CLOCK_MONOTONIC. */
struct timespec eng_mono_deadline(int64_t ms);

#endif
