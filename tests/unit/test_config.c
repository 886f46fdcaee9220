/*
 * test_config.c - the topic config table (kafka-format.md §18.1): every
 * default parses and prints back as Kafka prints it; bounds and types are
 * enforced with the key named in eng_errdetail; broker synonyms apply with
 * Kafka's priority (log.retention.ms > .minutes > .hours) whatever the order
 * they are applied in, with their unit factors; the min/max compaction lag
 * cross-check; cleanup.policy lists; unknown and inapplicable keys; layered
 * resolution and the source of each value; a new override kept in the form
 * Kafka's DescribeConfigs lists it.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "eng_compress.h"
#include "eng_config.h"
#include "eng_error.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static eng_config defaults(void)
{
    eng_config_defaults d;
    eng_config_defaults_init(&d);
    return d.cfg;
}

static void test_defaults_round_trip(void **state)
{
    (void)state;
    eng_config_defaults d;
    eng_config_defaults_init(&d);
    for (int i = 0; i < ENG_CFG_COUNT; i++) {
        const eng_config_def *def = eng_config_def_at((eng_config_id)i);
        assert_non_null(def);
        assert_non_null(def->name);
        assert_non_null(def->doc);
        assert_int_equal(eng_config_lookup(def->name), i);
        eng_config_value v;
        eng_errdetail err = {0};
        if (eng_config_parse((eng_config_id)i, def->default_text, &v, &err))
            fail_msg("default of %s does not parse: %s", def->name, err.message);
        char buf[128];
        eng_config_format((eng_config_id)i, v, buf, sizeof buf);
        assert_string_equal(buf, def->default_text);
        eng_config_format((eng_config_id)i, d.cfg.v[i], buf, sizeof buf);
        assert_string_equal(buf, def->default_text);
        assert_int_equal(d.synonym_rank[i], -1);
        assert_int_equal(eng_config_source_of(&d, NULL, (eng_config_id)i), ENG_SRC_DEFAULT);
    }
    assert_null(eng_config_def_at(ENG_CFG_COUNT));
    assert_int_equal(eng_config_lookup("no.such.config"), -1);

    /* Kafka's values, spelled out. */
    static const struct {
        eng_config_id id;
        const char *text;
    } kafka[] = {
        {ENG_CFG_SEGMENT_BYTES, "1073741824"},
        {ENG_CFG_SEGMENT_MS, "604800000"},
        {ENG_CFG_SEGMENT_JITTER_MS, "0"},
        {ENG_CFG_SEGMENT_INDEX_BYTES, "10485760"},
        {ENG_CFG_FLUSH_MESSAGES, "9223372036854775807"},
        {ENG_CFG_FLUSH_MS, "9223372036854775807"},
        {ENG_CFG_RETENTION_BYTES, "-1"},
        {ENG_CFG_RETENTION_MS, "604800000"},
        {ENG_CFG_MAX_MESSAGE_BYTES, "1048588"},
        {ENG_CFG_INDEX_INTERVAL_BYTES, "4096"},
        {ENG_CFG_DELETE_RETENTION_MS, "86400000"},
        {ENG_CFG_MIN_COMPACTION_LAG_MS, "0"},
        {ENG_CFG_MAX_COMPACTION_LAG_MS, "9223372036854775807"},
        {ENG_CFG_FILE_DELETE_DELAY_MS, "60000"},
        {ENG_CFG_MIN_CLEANABLE_DIRTY_RATIO, "0.5"},
        {ENG_CFG_CLEANUP_POLICY, "delete"},
        {ENG_CFG_COMPRESSION_TYPE, "producer"},
        {ENG_CFG_COMPRESSION_GZIP_LEVEL, "-1"},
        {ENG_CFG_COMPRESSION_LZ4_LEVEL, "9"},
        {ENG_CFG_COMPRESSION_ZSTD_LEVEL, "3"},
        {ENG_CFG_PREALLOCATE, "false"},
        {ENG_CFG_MESSAGE_TIMESTAMP_TYPE, "CreateTime"},
        {ENG_CFG_MESSAGE_TIMESTAMP_DIFFERENCE_MAX_MS, "9223372036854775807"},
        {ENG_CFG_MESSAGE_TIMESTAMP_BEFORE_MAX_MS, "9223372036854775807"},
        {ENG_CFG_MESSAGE_TIMESTAMP_AFTER_MAX_MS, "9223372036854775807"},
    };
    assert_int_equal(sizeof kafka / sizeof kafka[0], ENG_CFG_COUNT);
    for (size_t i = 0; i < sizeof kafka / sizeof kafka[0]; i++)
        assert_string_equal(eng_config_def_at(kafka[i].id)->default_text, kafka[i].text);
    assert_int_equal(d.cfg.v[ENG_CFG_SEGMENT_BYTES].i, 1073741824);
    assert_int_equal(d.cfg.v[ENG_CFG_CLEANUP_POLICY].i, ENG_POLICY_DELETE);
    assert_int_equal(d.cfg.v[ENG_CFG_COMPRESSION_TYPE].i, ENG_COMPRESSION_PRODUCER);
    assert_int_equal(d.cfg.v[ENG_CFG_MESSAGE_TIMESTAMP_TYPE].i, ENG_TS_CREATE_TIME);
    assert_true(d.cfg.v[ENG_CFG_MIN_CLEANABLE_DIRTY_RATIO].d == 0.5);
    assert_int_equal(eng_config_check(&d.cfg, NULL), 0);
}

/* Parses text for id; on failure checks the key named in the detail. */
static int parse(eng_config_id id, const char *text, eng_config_value *v)
{
    eng_errdetail err = {0};
    eng_config_value local;
    int rc = eng_config_parse(id, text, v ? v : &local, &err);
    if (rc) {
        assert_int_equal(rc, ENG_ECONFIG);
        assert_string_equal(err.key, eng_config_def_at(id)->name);
        assert_true(strlen(err.message) > 0);
    }
    return rc;
}

static void test_bounds_and_types(void **state)
{
    (void)state;
    eng_config_value v;
    /* segment.bytes >= 1048576 as in current Kafka; an int. */
    assert_int_equal(parse(ENG_CFG_SEGMENT_BYTES, "1048575", NULL), ENG_ECONFIG);
    assert_int_equal(parse(ENG_CFG_SEGMENT_BYTES, "14", NULL), ENG_ECONFIG);
    assert_int_equal(parse(ENG_CFG_SEGMENT_BYTES, "1048576", &v), 0);
    assert_int_equal(v.i, 1048576);
    assert_int_equal(parse(ENG_CFG_SEGMENT_BYTES, "2147483647", &v), 0);
    assert_int_equal(parse(ENG_CFG_SEGMENT_BYTES, "2147483648", NULL), ENG_ECONFIG);
    eng_errdetail err = {0};
    assert_int_equal(eng_config_parse(ENG_CFG_SEGMENT_BYTES, "1000", &v, &err), ENG_ECONFIG);
    assert_string_equal(err.key, "segment.bytes");
    assert_non_null(strstr(err.message, "1048576"));
    /* Past an int's top, the message says so (not "at least 1048576"). */
    assert_int_equal(eng_config_parse(ENG_CFG_SEGMENT_BYTES, "2147483648", &v, &err), ENG_ECONFIG);
    assert_non_null(strstr(err.message, "an int is at most 2147483647"));
    /* Not numbers. */
    static const char *const junk[] = {"", "abc", "12x", "1.5", "0x10", " "};
    for (size_t i = 0; i < sizeof junk / sizeof junk[0]; i++) {
        assert_int_equal(parse(ENG_CFG_SEGMENT_MS, junk[i], NULL), ENG_ECONFIG);
        assert_int_equal(parse(ENG_CFG_INDEX_INTERVAL_BYTES, junk[i], NULL), ENG_ECONFIG);
    }
    assert_int_equal(parse(ENG_CFG_SEGMENT_MS, "99999999999999999999", NULL), ENG_ECONFIG);
    /* Lower bounds of longs. */
    assert_int_equal(parse(ENG_CFG_SEGMENT_MS, "0", NULL), ENG_ECONFIG);
    assert_int_equal(parse(ENG_CFG_SEGMENT_MS, "1", &v), 0);
    assert_int_equal(parse(ENG_CFG_RETENTION_MS, "-2", NULL), ENG_ECONFIG);
    assert_int_equal(parse(ENG_CFG_RETENTION_MS, "-1", &v), 0);
    assert_int_equal(v.i, -1);
    assert_int_equal(parse(ENG_CFG_RETENTION_BYTES, "-5", &v), 0);
    assert_int_equal(parse(ENG_CFG_FLUSH_MESSAGES, "0", NULL), ENG_ECONFIG);
    assert_int_equal(parse(ENG_CFG_SEGMENT_INDEX_BYTES, "3", NULL), ENG_ECONFIG);
    assert_int_equal(parse(ENG_CFG_MAX_COMPACTION_LAG_MS, "0", NULL), ENG_ECONFIG);
    /* Ranges. */
    assert_int_equal(parse(ENG_CFG_COMPRESSION_GZIP_LEVEL, "10", NULL), ENG_ECONFIG);
    assert_int_equal(parse(ENG_CFG_COMPRESSION_GZIP_LEVEL, "9", &v), 0);
    /* 1..9 or -1: 0 was taken and silently meant the default */
    assert_int_equal(parse(ENG_CFG_COMPRESSION_GZIP_LEVEL, "0", NULL), ENG_ECONFIG);
    assert_int_equal(parse(ENG_CFG_COMPRESSION_GZIP_LEVEL, "-1", &v), 0);
    assert_int_equal(parse(ENG_CFG_COMPRESSION_GZIP_LEVEL, "-2", NULL), ENG_ECONFIG);
    assert_int_equal(parse(ENG_CFG_COMPRESSION_LZ4_LEVEL, "0", NULL), ENG_ECONFIG);
    assert_int_equal(parse(ENG_CFG_COMPRESSION_ZSTD_LEVEL, "-131073", NULL), ENG_ECONFIG);
    assert_int_equal(parse(ENG_CFG_COMPRESSION_ZSTD_LEVEL, "-131072", &v), 0);
    /* Doubles in [0, 1]. */
    assert_int_equal(parse(ENG_CFG_MIN_CLEANABLE_DIRTY_RATIO, "0.25", &v), 0);
    assert_true(v.d == 0.25);
    char buf[64];
    eng_config_format(ENG_CFG_MIN_CLEANABLE_DIRTY_RATIO, v, buf, sizeof buf);
    assert_string_equal(buf, "0.25");
    /* Formatted as the value in force, not rounded to six digits (a broker
     * default of 0.123456789 was listed as 0.123457). */
    assert_int_equal(parse(ENG_CFG_MIN_CLEANABLE_DIRTY_RATIO, "0.123456789", &v), 0);
    eng_config_format(ENG_CFG_MIN_CLEANABLE_DIRTY_RATIO, v, buf, sizeof buf);
    assert_string_equal(buf, "0.123456789");
    assert_int_equal(parse(ENG_CFG_MIN_CLEANABLE_DIRTY_RATIO, "0.1", &v), 0);
    eng_config_format(ENG_CFG_MIN_CLEANABLE_DIRTY_RATIO, v, buf, sizeof buf);
    assert_string_equal(buf, "0.1");
    assert_int_equal(parse(ENG_CFG_MIN_CLEANABLE_DIRTY_RATIO, "1.5", NULL), ENG_ECONFIG);
    assert_int_equal(parse(ENG_CFG_MIN_CLEANABLE_DIRTY_RATIO, "-0.1", NULL), ENG_ECONFIG);
    assert_int_equal(parse(ENG_CFG_MIN_CLEANABLE_DIRTY_RATIO, "nan", NULL), ENG_ECONFIG);
    assert_int_equal(parse(ENG_CFG_MIN_CLEANABLE_DIRTY_RATIO, "half", NULL), ENG_ECONFIG);
    /* Booleans and strings. */
    assert_int_equal(parse(ENG_CFG_PREALLOCATE, "true", &v), 0);
    assert_int_equal(v.i, 1);
    assert_int_equal(parse(ENG_CFG_PREALLOCATE, "yes", NULL), ENG_ECONFIG);
    assert_int_equal(parse(ENG_CFG_MESSAGE_TIMESTAMP_TYPE, "LogAppendTime", &v), 0);
    assert_int_equal(v.i, ENG_TS_LOG_APPEND_TIME);
    assert_int_equal(parse(ENG_CFG_MESSAGE_TIMESTAMP_TYPE, "WallTime", NULL), ENG_ECONFIG);
    assert_int_equal(parse(ENG_CFG_COMPRESSION_TYPE, "uncompressed", &v), 0);
    assert_int_equal(v.i, ENG_COMPRESSION_UNCOMPRESSED);
    eng_config_format(ENG_CFG_COMPRESSION_TYPE, v, buf, sizeof buf);
    assert_string_equal(buf, "uncompressed");
    assert_int_equal(parse(ENG_CFG_COMPRESSION_TYPE, "brotli", NULL), ENG_ECONFIG);
    /* A codec is accepted exactly when this build can write it. */
    static const char *const codecs[] = {"zstd", "lz4", "snappy", "gzip"};
    static const int ids[] = {ENG_COMPRESSION_ZSTD, ENG_COMPRESSION_LZ4, ENG_COMPRESSION_SNAPPY,
                              ENG_COMPRESSION_GZIP};
    for (int i = 0; i < 4; i++) {
        bool ok = eng_codec_supported(eng_config_codec(ids[i]));
        assert_int_equal(parse(ENG_CFG_COMPRESSION_TYPE, codecs[i], &v), ok ? 0 : ENG_ECONFIG);
        if (ok)
            assert_int_equal(v.i, ids[i]);
    }
}

/* Every numeric topic config's bounds, Kafka's (TopicConfig / LogConfig
 * validators): the last value inside each bound parses, the first outside
 * is refused with the key named.  NULL: no such bound beyond the type's. */
static void test_numeric_bounds_table(void **state)
{
    (void)state;
    static const struct {
        eng_config_id id;
        const char *lowest, *below, *highest, *above;
    } b[] = {
        {ENG_CFG_SEGMENT_BYTES, "1048576", "1048575", "2147483647", "2147483648"},
        {ENG_CFG_SEGMENT_MS, "1", "0", "9223372036854775807", NULL},
        {ENG_CFG_SEGMENT_JITTER_MS, "0", "-1", "9223372036854775807", NULL},
        {ENG_CFG_SEGMENT_INDEX_BYTES, "4", "3", "2147483647", "2147483648"},
        {ENG_CFG_FLUSH_MESSAGES, "1", "0", "9223372036854775807", NULL},
        {ENG_CFG_FLUSH_MS, "0", "-1", "9223372036854775807", NULL},
        {ENG_CFG_RETENTION_BYTES, "-9223372036854775808", NULL, "9223372036854775807", NULL},
        {ENG_CFG_RETENTION_MS, "-1", "-2", "9223372036854775807", NULL},
        {ENG_CFG_MAX_MESSAGE_BYTES, "0", "-1", "2147483647", "2147483648"},
        {ENG_CFG_INDEX_INTERVAL_BYTES, "0", "-1", "2147483647", "2147483648"},
        {ENG_CFG_DELETE_RETENTION_MS, "0", "-1", "9223372036854775807", NULL},
        {ENG_CFG_MIN_COMPACTION_LAG_MS, "0", "-1", "9223372036854775807", NULL},
        {ENG_CFG_MAX_COMPACTION_LAG_MS, "1", "0", "9223372036854775807", NULL},
        {ENG_CFG_FILE_DELETE_DELAY_MS, "0", "-1", "9223372036854775807", NULL},
        {ENG_CFG_COMPRESSION_GZIP_LEVEL, "1", "0", "9", "10"},
        {ENG_CFG_COMPRESSION_LZ4_LEVEL, "1", "0", "17", "18"},
        {ENG_CFG_COMPRESSION_ZSTD_LEVEL, "-131072", "-131073", "22", "23"},
        {ENG_CFG_MESSAGE_TIMESTAMP_DIFFERENCE_MAX_MS, "0", "-1", "9223372036854775807", NULL},
        {ENG_CFG_MESSAGE_TIMESTAMP_BEFORE_MAX_MS, "0", "-1", "9223372036854775807", NULL},
        {ENG_CFG_MESSAGE_TIMESTAMP_AFTER_MAX_MS, "0", "-1", "9223372036854775807", NULL},
    };
    for (size_t i = 0; i < sizeof b / sizeof b[0]; i++) {
        const char *name = eng_config_def_at(b[i].id)->name;
        eng_config_value v;
        if (parse(b[i].id, b[i].lowest, &v) || parse(b[i].id, b[i].highest, &v))
            fail_msg("%s: refused a value inside its bounds", name);
        if (b[i].below && parse(b[i].id, b[i].below, NULL) != ENG_ECONFIG)
            fail_msg("%s: took %s, below its lower bound", name, b[i].below);
        if (b[i].above && parse(b[i].id, b[i].above, NULL) != ENG_ECONFIG)
            fail_msg("%s: took %s, above its upper bound", name, b[i].above);
    }
}

static void test_cleanup_policy_lists(void **state)
{
    (void)state;
    eng_config_value v;
    char buf[64];
    assert_int_equal(parse(ENG_CFG_CLEANUP_POLICY, "compact,delete", &v), 0);
    assert_int_equal(v.i, ENG_POLICY_COMPACT | ENG_POLICY_DELETE);
    eng_config_format(ENG_CFG_CLEANUP_POLICY, v, buf, sizeof buf);
    assert_string_equal(buf, "delete,compact");
    assert_int_equal(parse(ENG_CFG_CLEANUP_POLICY, "delete, compact", &v), 0);
    assert_int_equal(v.i, ENG_POLICY_COMPACT | ENG_POLICY_DELETE);
    assert_int_equal(parse(ENG_CFG_CLEANUP_POLICY, "compact", &v), 0);
    assert_int_equal(v.i, ENG_POLICY_COMPACT);
    eng_config_format(ENG_CFG_CLEANUP_POLICY, v, buf, sizeof buf);
    assert_string_equal(buf, "compact");
    assert_int_equal(parse(ENG_CFG_CLEANUP_POLICY, "delete", &v), 0);
    assert_int_equal(v.i, ENG_POLICY_DELETE);
    assert_int_equal(parse(ENG_CFG_CLEANUP_POLICY, "compact,compact", &v), 0);
    assert_int_equal(v.i, ENG_POLICY_COMPACT);
    /* Empty or blank: neither (Kafka 4.2, keep everything). */
    assert_int_equal(parse(ENG_CFG_CLEANUP_POLICY, "", &v), 0);
    assert_int_equal(v.i, 0);
    eng_config_format(ENG_CFG_CLEANUP_POLICY, v, buf, sizeof buf);
    assert_string_equal(buf, "");
    assert_int_equal(parse(ENG_CFG_CLEANUP_POLICY, "  ", &v), 0);
    assert_int_equal(v.i, 0);
    assert_int_equal(parse(ENG_CFG_CLEANUP_POLICY, ",", NULL), ENG_ECONFIG);
    assert_int_equal(parse(ENG_CFG_CLEANUP_POLICY, " ,delete", NULL), ENG_ECONFIG);
    assert_int_equal(parse(ENG_CFG_CLEANUP_POLICY, "compact,archive", NULL), ENG_ECONFIG);
    assert_int_equal(parse(ENG_CFG_CLEANUP_POLICY, "compact,", NULL), ENG_ECONFIG);
    assert_int_equal(parse(ENG_CFG_CLEANUP_POLICY, "compactdelete", NULL), ENG_ECONFIG);
}

static void test_broker_synonyms_priority(void **state)
{
    (void)state;
    static const char *const names[3] = {"log.retention.ms", "log.retention.minutes",
                                         "log.retention.hours"};
    static const char *const values[3] = {"1234", "5", "2"};
    static const int64_t as_ms[3] = {1234, 5 * 60000, 2 * 3600000LL};
    static const int perms[6][3] = {{0, 1, 2}, {0, 2, 1}, {1, 0, 2},
                                    {1, 2, 0}, {2, 0, 1}, {2, 1, 0}};
    /* Any subset, in any order: the highest-priority synonym set wins. */
    for (int mask = 1; mask < 8; mask++) {
        for (int p = 0; p < 6; p++) {
            eng_config_defaults d;
            eng_config_defaults_init(&d);
            for (int k = 0; k < 3; k++) {
                int s = perms[p][k];
                if (mask & (1 << s))
                    assert_int_equal(eng_config_defaults_apply(&d, names[s], values[s], NULL), 1);
            }
            int best = (mask & 1) ? 0 : (mask & 2) ? 1 : 2;
            if (d.cfg.v[ENG_CFG_RETENTION_MS].i != as_ms[best])
                fail_msg("mask %d order %d: retention.ms %lld, want %lld", mask, p,
                         (long long)d.cfg.v[ENG_CFG_RETENTION_MS].i, (long long)as_ms[best]);
            assert_int_equal(d.synonym_rank[ENG_CFG_RETENTION_MS], best);
            assert_int_equal(eng_config_source_of(&d, NULL, ENG_CFG_RETENTION_MS), ENG_SRC_BROKER);
        }
    }
    eng_config_defaults d;
    eng_config_defaults_init(&d);
    /* Hours are multiplied by 3,600,000; a negative value means unlimited. */
    assert_int_equal(eng_config_defaults_apply(&d, "log.retention.hours", "168", NULL), 1);
    assert_int_equal(d.cfg.v[ENG_CFG_RETENTION_MS].i, 604800000);
    assert_int_equal(eng_config_defaults_apply(&d, "log.retention.hours", "-1", NULL), 1);
    assert_int_equal(d.cfg.v[ENG_CFG_RETENTION_MS].i, -1);
    /* log.retention.ms too (Kafka's logRetentionTimeMillis), though the
     * topic's retention.ms refuses anything below -1. */
    eng_config_defaults d2;
    eng_config_defaults_init(&d2);
    assert_int_equal(eng_config_defaults_apply(&d2, "log.retention.ms", "-5", NULL), 1);
    assert_int_equal(d2.cfg.v[ENG_CFG_RETENTION_MS].i, -1);
    assert_int_equal(eng_config_defaults_apply(&d2, "log.retention.hours", "2", NULL), 1);
    assert_int_equal(d2.cfg.v[ENG_CFG_RETENTION_MS].i, -1);
    assert_int_equal(eng_config_defaults_apply(&d, "log.roll.hours", "1", NULL), 1);
    assert_int_equal(d.cfg.v[ENG_CFG_SEGMENT_MS].i, 3600000);
    assert_int_equal(eng_config_defaults_apply(&d, "log.roll.ms", "5000", NULL), 1);
    assert_int_equal(eng_config_defaults_apply(&d, "log.roll.hours", "3", NULL), 1);
    assert_int_equal(d.cfg.v[ENG_CFG_SEGMENT_MS].i, 5000);
    /* Factor-1 synonyms are validated like the topic config. */
    assert_int_equal(eng_config_defaults_apply(&d, "log.segment.bytes", "2097152", NULL), 1);
    assert_int_equal(d.cfg.v[ENG_CFG_SEGMENT_BYTES].i, 2097152);
    eng_errdetail err = {0};
    assert_int_equal(eng_config_defaults_apply(&d, "log.segment.bytes", "1000", &err),
                     ENG_ECONFIG);
    assert_string_equal(err.key, "log.segment.bytes");
    assert_int_equal(d.cfg.v[ENG_CFG_SEGMENT_BYTES].i, 2097152);
    memset(&err, 0, sizeof err);
    assert_int_equal(eng_config_defaults_apply(&d, "log.retention.minutes", "ten", &err),
                     ENG_ECONFIG);
    assert_string_equal(err.key, "log.retention.minutes");
    /* Not a synonym of any topic config. */
    assert_int_equal(eng_config_defaults_apply(&d, "log.dirs", "/data", NULL), 0);
    assert_int_equal(eng_config_defaults_apply(&d, "retention.ms", "1", NULL), 0);
    /* A synonym shared by name with its topic config. */
    assert_int_equal(eng_config_defaults_apply(&d, "compression.type", "uncompressed", NULL), 1);
    assert_int_equal(d.cfg.v[ENG_CFG_COMPRESSION_TYPE].i, ENG_COMPRESSION_UNCOMPRESSED);
    assert_int_equal(eng_config_defaults_apply(&d, "log.cleanup.policy", "compact", NULL), 1);
    assert_int_equal(d.cfg.v[ENG_CFG_CLEANUP_POLICY].i, ENG_POLICY_COMPACT);
    assert_int_equal(eng_config_source_of(&d, NULL, ENG_CFG_FLUSH_MS), ENG_SRC_DEFAULT);
}

/* A broker synonym is checked as Kafka's broker config checks it, and the
 * error names the setting and the value as the user gave them: the unit
 * synonyms (log.retention.hours, .minutes, log.roll.hours,
 * log.roll.jitter.hours) are Java ints with their own bounds, and a
 * lower-priority synonym is checked even when a higher one is already set,
 * as Kafka parses every setting it is given. */
static void expect_synonym_refused(eng_config_defaults *d, const char *name, const char *text,
                                   const char *in_message)
{
    eng_errdetail err = {0};
    int rc = eng_config_defaults_apply(d, name, text, &err);
    if (rc != ENG_ECONFIG)
        fail_msg("%s=%s: rc %d, want ENG_ECONFIG", name, text, rc);
    assert_string_equal(err.key, name);
    char want[160];
    snprintf(want, sizeof want, "'%s' for %s", text, name);
    if (!strstr(err.message, want) || !strstr(err.message, in_message))
        fail_msg("%s=%s: message \"%s\" lacks \"%s\" or \"%s\"", name, text, err.message, want,
                 in_message);
}

static void test_broker_synonyms_checked_as_kafka(void **state)
{
    (void)state;
    eng_config_defaults d;
    eng_config_defaults_init(&d);
    /* Java ints: one past Integer.MAX_VALUE is refused, not scaled. */
    expect_synonym_refused(&d, "log.retention.hours", "2147483648", "int");
    expect_synonym_refused(&d, "log.retention.minutes", "99999999999", "int");
    expect_synonym_refused(&d, "log.roll.hours", "2147483648", "int");
    expect_synonym_refused(&d, "log.roll.jitter.hours", "2147483648", "int");
    /* Their own lower bounds, named with the value given (-5, not -1). */
    expect_synonym_refused(&d, "log.roll.hours", "0", "at least 1");
    expect_synonym_refused(&d, "log.roll.hours", "-3", "at least 1");
    expect_synonym_refused(&d, "log.roll.jitter.hours", "-5", "at least 0");
    /* A factor-1 synonym names itself too, not the topic config. */
    expect_synonym_refused(&d, "log.segment.bytes", "1000", "at least 1048576");
    expect_synonym_refused(&d, "message.max.bytes", "-1", "at least 0");
    assert_int_equal(d.cfg.v[ENG_CFG_RETENTION_MS].i, 604800000);
    assert_int_equal(d.cfg.v[ENG_CFG_SEGMENT_MS].i, 604800000);
    assert_int_equal(d.synonym_rank[ENG_CFG_RETENTION_MS], -1);
    /* Still valid: the largest int, and a negative retention (unlimited). */
    assert_int_equal(eng_config_defaults_apply(&d, "log.retention.hours", "2147483647", NULL), 1);
    assert_int_equal(d.cfg.v[ENG_CFG_RETENTION_MS].i, 2147483647LL * 3600000);
    assert_int_equal(eng_config_defaults_apply(&d, "log.retention.minutes", "-7", NULL), 1);
    assert_int_equal(d.cfg.v[ENG_CFG_RETENTION_MS].i, -1);
    /* Whatever the order: a bad lower-priority synonym after a good
     * higher one is refused, and leaves the value in force alone. */
    eng_config_defaults d2;
    eng_config_defaults_init(&d2);
    assert_int_equal(eng_config_defaults_apply(&d2, "log.retention.ms", "1000", NULL), 1);
    expect_synonym_refused(&d2, "log.retention.hours", "abc", "int");
    expect_synonym_refused(&d2, "log.retention.minutes", "2147483648", "int");
    assert_int_equal(eng_config_defaults_apply(&d2, "log.roll.ms", "5000", NULL), 1);
    expect_synonym_refused(&d2, "log.roll.hours", "0", "at least 1");
    assert_int_equal(eng_config_defaults_apply(&d2, "log.retention.hours", "2", NULL), 1);
    assert_int_equal(d2.cfg.v[ENG_CFG_RETENTION_MS].i, 1000);
    assert_int_equal(d2.cfg.v[ENG_CFG_SEGMENT_MS].i, 5000);
    assert_int_equal(d2.synonym_rank[ENG_CFG_RETENTION_MS], 0);
}

static void test_compaction_lag_cross_check(void **state)
{
    (void)state;
    eng_config c = defaults();
    c.v[ENG_CFG_MIN_COMPACTION_LAG_MS].i = 5000;
    c.v[ENG_CFG_MAX_COMPACTION_LAG_MS].i = 5000;
    assert_int_equal(eng_config_check(&c, NULL), 0);
    c.v[ENG_CFG_MAX_COMPACTION_LAG_MS].i = 4999;
    eng_errdetail err = {0};
    assert_int_equal(eng_config_check(&c, &err), ENG_ECONFIG);
    assert_string_equal(err.key, "min.compaction.lag.ms");

    /* Through resolve: overrides on top of the defaults. */
    eng_config_defaults d;
    eng_config_defaults_init(&d);
    eng_config_overrides ov = {{0}};
    assert_int_equal(eng_config_overrides_set(&ov, "min.compaction.lag.ms", "10000", NULL), 0);
    assert_int_equal(eng_config_overrides_set(&ov, "max.compaction.lag.ms", "9999", NULL), 0);
    eng_config out = defaults();
    out.v[ENG_CFG_SEGMENT_BYTES].i = 77; /* untouched on failure */
    memset(&err, 0, sizeof err);
    assert_int_equal(eng_config_resolve(&d, &ov, &out, &err), ENG_ECONFIG);
    assert_string_equal(err.key, "min.compaction.lag.ms");
    assert_int_equal(out.v[ENG_CFG_SEGMENT_BYTES].i, 77);
    assert_int_equal(eng_config_overrides_set(&ov, "max.compaction.lag.ms", "10000", NULL), 0);
    assert_int_equal(eng_config_resolve(&d, &ov, &out, NULL), 0);
    assert_int_equal(out.v[ENG_CFG_MIN_COMPACTION_LAG_MS].i, 10000);
    /* Across layers: a topic min above the broker-level max is caught too. */
    assert_int_equal(
        eng_config_defaults_apply(&d, "log.cleaner.max.compaction.lag.ms", "100", NULL), 1);
    assert_int_equal(eng_config_resolve(&d, &ov, &out, &err), 0); /* topic sets both */
    eng_config_overrides_clear(&ov);
    assert_int_equal(eng_config_overrides_set(&ov, "min.compaction.lag.ms", "101", NULL), 0);
    assert_int_equal(eng_config_resolve(&d, &ov, &out, &err), ENG_ECONFIG);
    eng_config_overrides_clear(&ov);
}

static void test_overrides_set_and_resolve(void **state)
{
    (void)state;
    eng_config_overrides ov = {{0}};
    eng_errdetail err = {0};
    /* Unknown key. */
    assert_int_equal(eng_config_overrides_set(&ov, "retention.weeks", "1", &err), ENG_ECONFIG);
    assert_string_equal(err.key, "retention.weeks");
    assert_non_null(strstr(err.message, "unknown"));
    /* Kafka topic configs that mean nothing on one node: refused, and said so. */
    static const char *const inapplicable[] = {"min.insync.replicas",
                                               "unclean.leader.election.enable",
                                               "remote.storage.enable", "message.format.version",
                                               "local.retention.ms"};
    for (size_t i = 0; i < sizeof inapplicable / sizeof inapplicable[0]; i++) {
        memset(&err, 0, sizeof err);
        assert_true(eng_config_is_inapplicable(inapplicable[i]));
        assert_int_equal(eng_config_overrides_set(&ov, inapplicable[i], "1", &err), ENG_ECONFIG);
        assert_string_equal(err.key, inapplicable[i]);
        assert_null(strstr(err.message, "unknown"));
    }
    assert_false(eng_config_is_inapplicable("retention.ms"));
    /* Broker synonyms are not topic configs. */
    assert_int_equal(eng_config_overrides_set(&ov, "log.retention.ms", "1", &err), ENG_ECONFIG);
    for (int i = 0; i < ENG_CFG_COUNT; i++)
        assert_null(ov.text[i]);

    /* Choices are matched in their letter case, as Kafka's validators do;
     * a stored value in another case still parses (metadata written before
     * this check must load). */
    static const char *const wrong_case[][2] = {{"message.timestamp.type", "logappendtime"},
                                                {"compression.type", "GZIP"},
                                                {"cleanup.policy", "Compact"},
                                                {"cleanup.policy", "delete,COMPACT"}};
    for (size_t i = 0; i < 4; i++) {
        memset(&err, 0, sizeof err);
        assert_int_equal(eng_config_overrides_set(&ov, wrong_case[i][0], wrong_case[i][1], &err),
                         ENG_ECONFIG);
        assert_string_equal(err.key, wrong_case[i][0]);
    }
    eng_config_value cv;
    assert_int_equal(eng_config_parse(ENG_CFG_MESSAGE_TIMESTAMP_TYPE, "logappendtime", &cv, NULL), 0);
    assert_int_equal(cv.i, ENG_TS_LOG_APPEND_TIME);
    assert_int_equal(eng_config_overrides_set(&ov, "message.timestamp.type", "LogAppendTime", NULL), 0);
    assert_int_equal(eng_config_overrides_set(&ov, "cleanup.policy", "compact, delete", NULL), 0);
    assert_int_equal(eng_config_overrides_set(&ov, "message.timestamp.type", NULL, NULL), 0);
    assert_int_equal(eng_config_overrides_set(&ov, "cleanup.policy", NULL, NULL), 0);
    /* Values are trimmed before they are parsed and kept, as Kafka's
     * ConfigDef trims them: " true" and "0.5 " were refused, " 100 " was
     * taken but listed with its blanks. */
    static const char *const padded[][3] = {{"preallocate", " true ", "true"},
                                            {"message.timestamp.type", "LogAppendTime\n", "LogAppendTime"},
                                            {"min.cleanable.dirty.ratio", "0.5 ", "0.5"},
                                            {"retention.bytes", " 100 ", "100"},
                                            {"cleanup.policy", " compact ", "compact"}};
    for (size_t i = 0; i < 5; i++) {
        assert_int_equal(eng_config_overrides_set(&ov, padded[i][0], padded[i][1], NULL), 0);
        assert_string_equal(ov.text[eng_config_lookup(padded[i][0])], padded[i][2]);
        assert_int_equal(eng_config_overrides_set(&ov, padded[i][0], NULL, NULL), 0);
    }

    /* Bad values are refused and leave the override as it was. */
    assert_int_equal(eng_config_overrides_set(&ov, "segment.bytes", "2097152", NULL), 0);
    memset(&err, 0, sizeof err);
    assert_int_equal(eng_config_overrides_set(&ov, "segment.bytes", "1048575", &err), ENG_ECONFIG);
    assert_string_equal(err.key, "segment.bytes");
    assert_string_equal(ov.text[ENG_CFG_SEGMENT_BYTES], "2097152");
    /* A new list naming a choice twice is refused (Kafka 4.2); one already
     * stored, as an older version kept it, still resolves. */
    memset(&err, 0, sizeof err);
    assert_int_equal(eng_config_overrides_set(&ov, "cleanup.policy", "compact,delete,compact", &err),
                     ENG_ECONFIG);
    assert_non_null(strstr(err.message, "contains duplicate values"));
    assert_string_equal(err.key, "cleanup.policy");
    assert_null(ov.text[ENG_CFG_CLEANUP_POLICY]);
    eng_config_overrides old = {0};
    assert_non_null(old.text[ENG_CFG_CLEANUP_POLICY] = strdup("compact,compact"));
    eng_config_defaults d0;
    eng_config_defaults_init(&d0);
    eng_config c0;
    assert_int_equal(eng_config_resolve(&d0, &old, &c0, NULL), 0);
    assert_int_equal(c0.v[ENG_CFG_CLEANUP_POLICY].i, ENG_POLICY_COMPACT);
    eng_config_overrides_clear(&old);
    assert_int_equal(eng_config_overrides_set(&ov, "cleanup.policy", "compact,delete", NULL), 0);
    assert_int_equal(eng_config_overrides_set(&ov, "retention.ms", "-1", NULL), 0);

    eng_config_defaults d;
    eng_config_defaults_init(&d);
    assert_int_equal(eng_config_defaults_apply(&d, "log.retention.hours", "1", NULL), 1);
    assert_int_equal(eng_config_defaults_apply(&d, "log.index.interval.bytes", "100", NULL), 1);
    eng_config c;
    assert_int_equal(eng_config_resolve(&d, &ov, &c, NULL), 0);
    assert_int_equal(c.v[ENG_CFG_SEGMENT_BYTES].i, 2097152);
    assert_int_equal(c.v[ENG_CFG_RETENTION_MS].i, -1); /* topic beats broker */
    assert_int_equal(c.v[ENG_CFG_INDEX_INTERVAL_BYTES].i, 100);
    assert_int_equal(c.v[ENG_CFG_CLEANUP_POLICY].i, ENG_POLICY_COMPACT | ENG_POLICY_DELETE);
    assert_int_equal(c.v[ENG_CFG_FLUSH_MESSAGES].i, INT64_MAX);
    assert_int_equal(eng_config_source_of(&d, &ov, ENG_CFG_RETENTION_MS), ENG_SRC_TOPIC);
    assert_int_equal(eng_config_source_of(&d, &ov, ENG_CFG_INDEX_INTERVAL_BYTES), ENG_SRC_BROKER);
    assert_int_equal(eng_config_source_of(&d, &ov, ENG_CFG_FLUSH_MS), ENG_SRC_DEFAULT);

    /* Copy is deep; removing an override (NULL) reverts to the lower layer. */
    eng_config_overrides copy;
    assert_int_equal(eng_config_overrides_copy(&copy, &ov), 0);
    assert_ptr_not_equal(copy.text[ENG_CFG_SEGMENT_BYTES], ov.text[ENG_CFG_SEGMENT_BYTES]);
    assert_string_equal(copy.text[ENG_CFG_CLEANUP_POLICY], "compact,delete");
    assert_int_equal(eng_config_overrides_set(&copy, "retention.ms", NULL, NULL), 0);
    assert_null(copy.text[ENG_CFG_RETENTION_MS]);
    assert_int_equal(eng_config_resolve(&d, &copy, &c, NULL), 0);
    assert_int_equal(c.v[ENG_CFG_RETENTION_MS].i, 3600000);
    assert_string_equal(ov.text[ENG_CFG_RETENTION_MS], "-1");
    eng_config_overrides_clear(&copy);
    eng_config_overrides_clear(&ov);
    for (int i = 0; i < ENG_CFG_COUNT; i++)
        assert_null(ov.text[i]);
}

static void test_timestamp_limit_fallback(void **state)
{
    (void)state;
    eng_config c = defaults();
    assert_int_equal(eng_config_ts_before_max(&c), INT64_MAX);
    assert_int_equal(eng_config_ts_after_max(&c), INT64_MAX);
    c.v[ENG_CFG_MESSAGE_TIMESTAMP_DIFFERENCE_MAX_MS].i = 1000;
    assert_int_equal(eng_config_ts_before_max(&c), 1000);
    assert_int_equal(eng_config_ts_after_max(&c), 1000);
    c.v[ENG_CFG_MESSAGE_TIMESTAMP_BEFORE_MAX_MS].i = 50;
    assert_int_equal(eng_config_ts_before_max(&c), 50);
    assert_int_equal(eng_config_ts_after_max(&c), 1000);
    c.v[ENG_CFG_MESSAGE_TIMESTAMP_AFTER_MAX_MS].i = 70;
    assert_int_equal(eng_config_ts_after_max(&c), 70);
}

/* A new override is kept (and so listed and stored) as Kafka's
 * DescribeConfigs lists it, the parsed value printed back: "+100" was
 * listed as "+100", "TRUE" as "TRUE", "compact , delete" with its blanks.
 * A list keeps its order; a double keeps its text (Java prints 1.0 and
 * 1.0E-5, which %g does not). */
static void test_overrides_kept_as_kafka_lists_them(void **state)
{
    (void)state;
    static const char *const cases[][3] = {{"retention.bytes", "+100", "100"},
                                           {"segment.ms", "007", "7"},
                                           {"index.interval.bytes", "-0", "0"},
                                           {"preallocate", "TRUE", "true"},
                                           {"preallocate", "False", "false"},
                                           {"cleanup.policy", "compact , delete", "compact,delete"},
                                           {"cleanup.policy", " delete,compact", "delete,compact"},
                                           {"cleanup.policy", " ", ""},
                                           {"compression.type", "gzip", "gzip"},
                                           {"min.cleanable.dirty.ratio", "0.50", "0.50"}};
    eng_config_overrides ov = {{0}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        eng_errdetail err = {0};
        if (eng_config_overrides_set(&ov, cases[i][0], cases[i][1], &err))
            fail_msg("%s=%s: %s", cases[i][0], cases[i][1], err.message);
        const char *kept = ov.text[eng_config_lookup(cases[i][0])];
        if (strcmp(kept, cases[i][2]))
            fail_msg("%s='%s' kept as '%s', not '%s'", cases[i][0], cases[i][1], kept, cases[i][2]);
    }
    eng_config_overrides_clear(&ov);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults_round_trip),
        cmocka_unit_test(test_bounds_and_types),
        cmocka_unit_test(test_numeric_bounds_table),
        cmocka_unit_test(test_cleanup_policy_lists),
        cmocka_unit_test(test_broker_synonyms_priority),
        cmocka_unit_test(test_broker_synonyms_checked_as_kafka),
        cmocka_unit_test(test_compaction_lag_cross_check),
        cmocka_unit_test(test_overrides_set_and_resolve),
        cmocka_unit_test(test_timestamp_limit_fallback),
        cmocka_unit_test(test_overrides_kept_as_kafka_lists_them),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
