/*
 * eng_process.h - what the kernel says about this process's resources: its
 * memory maps against vm.max_map_count, its memory and CPU time.
 *
 * Linux only, from /proc; every call returns an error when it cannot tell
 * (no /proc mounted, say), and callers then go on without the figure.
 */
#ifndef ENG_PROCESS_H
#define ENG_PROCESS_H

#include <stdint.h>

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

typedef struct {
    double cpu_seconds;        /* user + system time since the process started */
    double start_time_seconds; /* when it started, seconds since the epoch */
    uint64_t resident_bytes;
    uint64_t virtual_bytes;
} eng_process_usage;

/* Fills *out from /proc/self/stat and /proc/stat's boot time. */
int eng_process_usage_get(eng_process_usage *out);

#endif
