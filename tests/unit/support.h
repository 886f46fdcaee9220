/*
 * support.h - small helpers shared by the cmocka suites: temporary
 * directories, the Kafka test vectors, whole-file reads.
 *
 * Tests run from the repository root; data comes from tests/data (or
 * $LOGSTORE_TEST_DATA).
 */
#ifndef TEST_SUPPORT_H
#define TEST_SUPPORT_H

#include "eng_manager.h"

#include <stddef.h>
#include <stdint.h>

/* A new empty directory under /tmp; free() the result after ts_rmtree(). */
char *ts_tmpdir(void);

/* Removes a directory tree. */
void ts_rmtree(const char *path);

/* Loads vector `name` from kafka-vectors.txt as bytes (malloc'd). Returns 0. */
int ts_vector(const char *name, uint8_t **out, size_t *len);

/* Path of a file under the test data dir (static buffer). */
const char *ts_data_path(const char *rel);

/* Reads a whole file (malloc'd). Returns 0 or -errno. */
int ts_read_file(const char *path, uint8_t **out, size_t *len);

/* Size of a file, or -1. */
long long ts_file_size(const char *path);

/* A line-based topic-metadata codec ("name\npartitions\ntopic_id\ncreated\n"
 * then "key=value" lines) for suites that run an eng_manager without the
 * service's JSON codec: the engine itself speaks no JSON. */
eng_meta_codec ts_line_codec(void);

#endif
