/*
 * segment_fixture.h - the sample segment (tests/data/sample-segment: six
 * batches of ten records, written by Kafka's rules) copied into a temporary
 * directory, and the helpers that damage and recover it.  Used by
 * test_segment.c and test_segment_recover.c.
 *
 * Include after cmocka.h.
 */
#ifndef SEGMENT_FIXTURE_H
#define SEGMENT_FIXTURE_H

#include "eng_segment.h"
#include "support.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define T0 1794024676890LL
#define BATCH_BYTES 2731
#define SAMPLE_LOG_BYTES 16386

static const char *const exts[] = {".log", ".index", ".timeindex"};

typedef ts_dir_fixture fixture;

static inline eng_segment_opts default_opts(void)
{
    return (eng_segment_opts){.index_max_bytes = 10485760, .index_interval = 4096};
}

/* dir/00000000000000000000<name>. */
static inline void seg_path(const char *dir, const char *name, char *buf, size_t len)
{
    snprintf(buf, len, "%s/00000000000000000000%s", dir, name);
}

static inline void copy_file(const char *from, const char *to)
{
    uint8_t *x;
    size_t n;
    assert_int_equal(ts_read_file(from, &x, &n), 0);
    FILE *fp = fopen(to, "wb");
    assert_non_null(fp);
    assert_int_equal(fwrite(x, 1, n, fp), n);
    assert_int_equal(fclose(fp), 0);
    free(x);
}

/* The sample segment's .log and both indexes, into dir. */
static inline void copy_sample(const char *dir)
{
    char from[512], to[512];
    for (int i = 0; i < 3; i++) {
        snprintf(from, sizeof from, "sample-segment/00000000000000000000%s", exts[i]);
        seg_path(dir, exts[i], to, sizeof to);
        copy_file(ts_data_path(from), to);
    }
}

/* Opens dir's .log for update and hands it to fn. */
static inline void damage_log(const char *dir, void (*fn)(FILE *fp, void *ctx), void *ctx)
{
    char path[512];
    seg_path(dir, ".log", path, sizeof path);
    FILE *fp = fopen(path, "r+b");
    assert_non_null(fp);
    fn(fp, ctx);
    assert_int_equal(fclose(fp), 0);
}

/* Opens the segment at base 0 in dir and recovers it; *out is the caller's. */
static inline void recover_sample(const char *dir, eng_recover_stats *st, eng_segment **out)
{
    eng_segment_opts o = default_opts();
    assert_int_equal(eng_segment_open(dir, 0, &o, false, out), 0);
    assert_int_equal(eng_segment_recover(*out, st), 0);
}

#endif
