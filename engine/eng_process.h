/*
 * eng_process.h - what the kernel says about this process's resources: its
 * descriptors against RLIMIT_NOFILE, its memory maps against
 * vm.max_map_count, its memory and CPU time.
 *
 * Linux only, from /proc; every call returns an error when it cannot tell
 * (no /proc mounted, say), and callers then go on without the figure.
 */
#ifndef ENG_PROCESS_H
#define ENG_PROCESS_H

#include "eng_error.h"

#include <stdint.h>

/* How many more files this process may open: the soft RLIMIT_NOFILE (into
 * *limit) less the descriptors open now, counted in /proc/self/fd.  An error
 * means it cannot tell (no /proc, say). */
int eng_process_fd_headroom(long *headroom, long *limit);

/* What an error that ran out of descriptors tells the operator to do. */
#define ENG_FD_LIMIT_HINT \
    "raise the open-files limit (ulimit -n, LimitNOFILE, docker run --ulimit nofile=...)"

/* What an error that ran out of memory tells the operator to check: each
 * segment maps its two indexes, and mmap fails with ENOMEM at the kernel's
 * per-process limit long before memory runs out. */
#define ENG_MAP_LIMIT_HINT \
    "every segment maps its 2 index files: if the process's maps (/proc/PID/maps) are near " \
    "vm.max_map_count, raise it (sysctl -w vm.max_map_count=262144)"

/* How many more memory maps this process may make: vm.max_map_count (into
 * *limit) less the maps it holds now, counted in /proc/self/maps.  Each
 * segment maps its .index and .timeindex, so this, not memory, is what a
 * large number of segments runs out of first. */
int eng_process_map_headroom(long *headroom, long *limit);

#ifdef LOGSTORE_TEST_BUILD
/* Makes eng_process_map_headroom see this vm.max_map_count instead of the
 * kernel's (tests cannot lower a system-wide setting); 0 restores it. */
void eng_process_set_map_limit(long limit);
#endif

/* Refuses (-EMFILE or -ENOMEM, with err's key "partitions") `adding` new
 * partitions of topic `name` that the process could not keep open or map,
 * keeping a share of each limit free; 0 when they fit or it cannot tell. */
int eng_process_check_partition_budget(const char *name, int32_t adding, eng_errdetail *err);

typedef struct {
    double cpu_seconds;        /* user + system time since the process started */
    double start_time_seconds; /* when it started, seconds since the epoch */
    uint64_t resident_bytes;
    uint64_t virtual_bytes;
} eng_process_usage;

/* Fills *out from /proc/self/stat and /proc/stat's boot time. */
int eng_process_usage_get(eng_process_usage *out);

#endif
