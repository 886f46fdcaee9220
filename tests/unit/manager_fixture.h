/*
 * manager_fixture.h - a manager over a data dir in a temporary directory,
 * with every log line the engine writes kept for the test to search.  Used
 * by test_manager.c, test_topic_admin.c, test_cleaner.c and
 * test_cleaner_select.c; the last two start from setup_cleaning, whose
 * cleaner backs off 20 ms and maps 1 MiB of keys.
 *
 * Include after cmocka.h.
 */
#ifndef MANAGER_FIXTURE_H
#define MANAGER_FIXTURE_H

#include "eng_batch.h"
#include "eng_cleaner.h"
#include "eng_error.h"
#include "eng_logger.h"
#include "eng_manager.h"
#include "eng_partition.h"
#include "support.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct fixture {
    char *tmp;
    char data[512];
    eng_manager_opts opts;
    eng_cleaner_opts copts;
    pthread_mutex_t mu;
    char log[32768];
} fixture;

static inline void mf_sink(eng_log_level level, const char *line, void *ctx)
{
    (void)level;
    fixture *f = ctx;
    pthread_mutex_lock(&f->mu);
    size_t n = strlen(f->log);
    if (n + strlen(line) + 2 < sizeof f->log)
        snprintf(f->log + n, sizeof f->log - n, "%s\n", line);
    pthread_mutex_unlock(&f->mu);
}

/* Whether a log line so far holds needle. */
static inline bool logged(fixture *f, const char *needle)
{
    pthread_mutex_lock(&f->mu);
    bool hit = strstr(f->log, needle) != NULL;
    pthread_mutex_unlock(&f->mu);
    return hit;
}

static inline int setup(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    if (!f || !(f->tmp = ts_tmpdir())) {
        free(f);
        return -1;
    }
    snprintf(f->data, sizeof f->data, "%s/data", f->tmp);
    f->opts.log_dir = f->data;
    eng_config_defaults_init(&f->opts.defaults);
    f->opts.codec = ts_line_codec();
    pthread_mutex_init(&f->mu, NULL);
    eng_logger_set_sink(mf_sink, f, ENG_LOG_INFO);
    *state = f;
    return 0;
}

static inline int setup_cleaning(void **state)
{
    if (setup(state))
        return -1;
    fixture *f = *state;
    eng_jobs_opts_default(&f->opts.jobs);
    eng_cleaner_opts_default(&f->copts);
    f->copts.backoff_ms = 20;
    f->copts.dedupe_buffer_bytes = 1 << 20;
    f->opts.cleaner = &f->copts;
    return 0;
}

static inline int teardown(void **state)
{
    fixture *f = *state;
    eng_logger_set_sink(NULL, NULL, ENG_LOG_INFO);
    ts_rmtree(f->tmp);
    pthread_mutex_destroy(&f->mu);
    free(f->tmp);
    free(f);
    return 0;
}

static inline eng_manager *open_mgr(fixture *f)
{
    eng_manager *m = NULL;
    eng_errdetail err = {0};
    int rc = eng_manager_open(&f->opts, &m, &err);
    if (rc)
        fail_msg("eng_manager_open: %s (%s)", eng_strerror(rc), err.message);
    return m;
}

/* The data dir's file `name` as a string (malloc; the caller frees it), or
 * NULL when it cannot be read. */
static inline char *data_file_text(fixture *f, const char *name)
{
    char path[700];
    snprintf(path, sizeof path, "%s/%s", f->data, name);
    uint8_t *raw;
    size_t len;
    if (ts_read_file(path, &raw, &len))
        return NULL;
    char *s = realloc(raw, len + 1);
    assert_non_null(s);
    s[len] = 0;
    return s;
}

/* Appends one one-record batch (key "k", value "value", the i-th
 * timestamp) to topic-id; the append's return code. */
static inline int try_append_record(eng_manager *m, const char *topic, int32_t id, int i)
{
    eng_partition *p;
    assert_int_equal(eng_manager_partition(m, topic, id, &p, NULL), 0);
    eng_record_spec r = {.timestamp = 1700000000000LL + i, .key = (const uint8_t *)"k",
                         .key_len = 1, .value = (const uint8_t *)"value", .value_len = 5};
    eng_batch_params bp;
    eng_batch_params_init(&bp);
    uint8_t buf[256];
    size_t len = eng_batch_encode(buf, sizeof buf, &bp, &r, 1);
    eng_append_opts o = {.expected_offset = -1};
    eng_append_result res;
    int rc = eng_partition_append(p, buf, len, &o, &res, NULL);
    eng_partition_unref(p);
    return rc;
}

/* Appends n one-record batches (key "k", value "value") to topic-id. */
static inline void append_records(eng_manager *m, const char *topic, int32_t id, int n)
{
    for (int i = 0; i < n; i++)
        assert_int_equal(try_append_record(m, topic, id, i), 0);
}

#endif
