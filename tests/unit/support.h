/*
 * support.h - small helpers shared by the cmocka suites: temporary
 * directories, the Kafka test vectors, whole-file reads.
 *
 * Tests run from the repository root; data comes from tests/data (or
 * $LOGSTORE_TEST_DATA).
 */
#ifndef TEST_SUPPORT_H
#define TEST_SUPPORT_H

#include "eng_batch.h"
#include "eng_manager.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/resource.h>

/* A new empty directory under /tmp; free() the result after ts_rmtree(). */
char *ts_tmpdir(void);

/* The same on tmpfs when /dev/shm is writable, else ts_tmpdir(): for suites
 * that roll and reopen thousands of times, whose fsyncs are not what they
 * test. */
char *ts_fast_tmpdir(void);

/* Removes a directory tree. */
void ts_rmtree(const char *path);

/* Copies the tree at from (files and directories) to a new directory to:
 * a backup, a restore, a copy to load.  0 or a negative errno. */
int ts_copy_tree(const char *from, const char *to);

/* A cmocka fixture that is just a fresh temporary directory: ts_dir_setup
 * makes it (*state is a ts_dir_fixture), ts_dir_teardown removes it. */
typedef struct ts_dir_fixture {
    char *dir;
} ts_dir_fixture;
int ts_dir_setup(void **state);
int ts_dir_teardown(void **state);

/* Loads vector `name` from kafka-vectors.txt as bytes (malloc'd). Returns 0. */
int ts_vector(const char *name, uint8_t **out, size_t *len);

/* Path of a file under the test data dir (static buffer). */
const char *ts_data_path(const char *rel);

/* Reads a whole file (malloc'd). Returns 0 or -errno. */
int ts_read_file(const char *path, uint8_t **out, size_t *len);

/* Sleeps ms milliseconds, all of them (a signal does not cut it short). */
void ts_sleep_ms(int64_t ms);

/* Size of a file, or -1. */
long long ts_file_size(const char *path);

/* The names in a directory, sorted and comma-joined into out ("" if empty;
 * at most 64 names). */
void ts_list_dir(const char *path, char *out, size_t cap);

/* Lets the process open only `extra` more files than it has open now (0:
 * every open fails with EMFILE); the old limits go to *saved. */
void ts_fd_limit(long extra, struct rlimit *saved);
void ts_fd_limit_restore(const struct rlimit *saved);

/* A line-based topic-metadata codec ("name\npartitions\ntopic_id\ncreated\n"
 * then "key=value" lines) for suites that run an eng_manager without the
 * service's JSON codec: the engine itself speaks no JSON. */
eng_meta_codec ts_line_codec(void);

/* Records "k-<id>" whose value of vlen bytes is derived from id, so a read can
 * check each one without keeping what was sent. */
#define TS_BATCH_MAX_RECS 16
#define TS_VALUE_MAX 2048

/* Fills v[0..len) with the value of record id. */
void ts_fill_value(uint8_t *v, int len, int64_t id);

/* Encodes records first..first+n-1 (n <= TS_BATCH_MAX_RECS, vlen <=
 * TS_VALUE_MAX), all at ts, as one batch with base offset 0 (the partition
 * stamps offsets).  Returns its size, 0 if it does not fit in cap. */
size_t ts_build_batch(uint8_t *buf, size_t cap, int64_t first, int n, int64_t ts, int vlen);

/* True if r is record r->offset as ts_build_batch writes it with vlen. */
bool ts_record_intact(const eng_record *r, int vlen);

/* A check of one record: 0 if it is right. */
typedef int (*ts_rec_check)(const eng_record *r, void *ctx);

/* Walks the batches of a fetch, validating each (CRC, framing) and checking
 * every record from `from` on, whose offsets must follow each other.
 * Returns the offset after the last record, or -1. */
int64_t ts_walk_fetch(const eng_fetch *ft, int64_t from, ts_rec_check check, void *ctx);

/* ts_record_intact as a check (vlen: an int *). */
int ts_check_intact(const eng_record *r, void *vlen);

/* ts_walk_fetch with ts_check_intact as the check. */
int64_t ts_walk_intact(const eng_fetch *ft, int64_t from, int vlen);

#endif
