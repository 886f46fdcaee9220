/*
 * eng_config.h - Kafka's topic-level log configs: one table, typed values.
 *
 * Every topic config that has a meaning on a single node is one row of the
 * table in eng_config.c: its Kafka name, type, default, bounds, broker-level
 * synonyms (highest priority first, with the unit factor that turns e.g.
 * log.retention.hours into milliseconds) and a one-line doc.  Parsing,
 * validation, the resolved values the engine reads on every append, the
 * configs listing and the README/--help tables all come from that table.
 *
 * Values are resolved in three layers, as in Kafka: the table default
 * (DEFAULT_CONFIG), a broker synonym from the server settings
 * (STATIC_BROKER_CONFIG) and a per-topic override (TOPIC_CONFIG).
 */
#ifndef ENG_CONFIG_H
#define ENG_CONFIG_H

#include "eng_error.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum {
    ENG_CFG_SEGMENT_BYTES,
    ENG_CFG_SEGMENT_MS,
    ENG_CFG_SEGMENT_JITTER_MS,
    ENG_CFG_SEGMENT_INDEX_BYTES,
    ENG_CFG_FLUSH_MESSAGES,
    ENG_CFG_FLUSH_MS,
    ENG_CFG_RETENTION_BYTES,
    ENG_CFG_RETENTION_MS,
    ENG_CFG_MAX_MESSAGE_BYTES,
    ENG_CFG_INDEX_INTERVAL_BYTES,
    ENG_CFG_DELETE_RETENTION_MS,
    ENG_CFG_MIN_COMPACTION_LAG_MS,
    ENG_CFG_MAX_COMPACTION_LAG_MS,
    ENG_CFG_FILE_DELETE_DELAY_MS,
    ENG_CFG_MIN_CLEANABLE_DIRTY_RATIO,
    ENG_CFG_CLEANUP_POLICY,
    ENG_CFG_COMPRESSION_TYPE,
    ENG_CFG_COMPRESSION_GZIP_LEVEL,
    ENG_CFG_COMPRESSION_LZ4_LEVEL,
    ENG_CFG_COMPRESSION_ZSTD_LEVEL,
    ENG_CFG_PREALLOCATE,
    ENG_CFG_MESSAGE_TIMESTAMP_TYPE,
    ENG_CFG_MESSAGE_TIMESTAMP_DIFFERENCE_MAX_MS,
    ENG_CFG_MESSAGE_TIMESTAMP_BEFORE_MAX_MS,
    ENG_CFG_MESSAGE_TIMESTAMP_AFTER_MAX_MS,
    ENG_CFG_COUNT
} eng_config_id;

typedef enum {
    ENG_CFG_INT,     /* Java int: fits int32 */
    ENG_CFG_LONG,    /* Java long */
    ENG_CFG_DOUBLE,
    ENG_CFG_BOOLEAN,
    ENG_CFG_STRING,  /* one of `choices`, stored as its index */
    ENG_CFG_LIST     /* comma-separated subset of `choices`, stored as a bit set */
} eng_config_type;

/* cleanup.policy bits */
#define ENG_POLICY_DELETE 1
#define ENG_POLICY_COMPACT 2

/* compression.type values (index into its choices) */
enum {
    ENG_COMPRESSION_UNCOMPRESSED,
    ENG_COMPRESSION_ZSTD,
    ENG_COMPRESSION_LZ4,
    ENG_COMPRESSION_SNAPPY,
    ENG_COMPRESSION_GZIP,
    ENG_COMPRESSION_PRODUCER
};

/* message.timestamp.type values */
enum { ENG_TS_CREATE_TIME, ENG_TS_LOG_APPEND_TIME };

typedef union eng_config_value {
    int64_t i; /* INT, LONG, BOOLEAN (0/1), STRING (choice index), LIST (bits) */
    double d;  /* DOUBLE */
} eng_config_value;

typedef struct eng_config_synonym {
    const char *name;
    int64_t factor; /* multiply the broker value by this (hours -> ms) */
    /* factor != 1 only: the setting is a Java int in Kafka (log.roll.hours,
     * log.retention.minutes, ...) with this lower bound of its own. */
    int64_t min;
} eng_config_synonym;

typedef struct eng_config_def {
    const char *name;
    eng_config_type type;
    const char *default_text;
    int64_t min, max;       /* INT/LONG bounds */
    double dmin, dmax;      /* DOUBLE bounds */
    const char *const *choices; /* STRING/LIST, NULL-terminated */
    eng_config_synonym synonyms[4]; /* highest priority first; name NULL ends */
    const char *doc;
} eng_config_def;

/* Resolved values for one topic: what the engine reads. */
typedef struct eng_config {
    eng_config_value v[ENG_CFG_COUNT];
} eng_config;

/* Where each value of a resolved config came from. */
typedef enum { ENG_SRC_DEFAULT, ENG_SRC_BROKER, ENG_SRC_TOPIC } eng_config_source;

/* Broker-level defaults: the table defaults with server settings applied. */
typedef struct eng_config_defaults {
    eng_config cfg;
    int8_t synonym_rank[ENG_CFG_COUNT]; /* -1 = table default, else synonym index */
} eng_config_defaults;

/* A topic's overrides as text (what users set), NULL where not overridden.
 * Owned strings (malloc). */
typedef struct eng_config_overrides {
    char *text[ENG_CFG_COUNT];
} eng_config_overrides;

/* The definition of id (static). */
const eng_config_def *eng_config_def_at(eng_config_id id);

/* Id of a topic config name, or -1. */
int eng_config_lookup(const char *name);

/* True for Kafka topic configs that have no meaning on one node (they are
 * refused with a message that says so). */
bool eng_config_is_inapplicable(const char *name);

/* True for the broker-level synonyms of those configs (min.insync.replicas,
 * log.message.format.version, ...): server settings with no meaning here. */
bool eng_config_is_inapplicable_broker(const char *name);

/* Refuses name, which is no topic config (eng_config_lookup gave -1), with
 * ENG_ECONFIG and the key named: unknown, or a Kafka config that has no
 * meaning on one node. */
int eng_config_name_error(const char *name, eng_errdetail *err);

/* Parses text for config id; fails with ENG_ECONFIG naming the key. */
int eng_config_parse(eng_config_id id, const char *text, eng_config_value *out, eng_errdetail *err);

/* Formats a value the way Kafka prints it ("delete,compact", "0.5", ...). */
void eng_config_format(eng_config_id id, eng_config_value v, char *buf, size_t len);
/* d in the shortest "%g" form that reads back as the same double (Kafka's
 * Double.toString is as short): "0.3", not "0.29999999999999999" or a
 * six-digit rounding.  buf is empty only if len is 0. */
void eng_format_double(double d, char *buf, size_t len);

/* Table defaults, no broker settings. */
void eng_config_defaults_init(eng_config_defaults *d);

/* Applies one server setting if it is a broker synonym of a topic config.
 * The value is checked whatever its priority, as Kafka parses every setting
 * it is given, and an error names the setting and the value as given.
 * Returns 1 if it is a synonym (applied, or outranked by a higher-priority
 * synonym already set), 0 if name is no synonym, or ENG_ECONFIG. */
int eng_config_defaults_apply(eng_config_defaults *d, const char *name, const char *text,
                              eng_errdetail *err);

/* Cross-field rules (min.compaction.lag.ms <= max.compaction.lag.ms). */
int eng_config_check(const eng_config *c, eng_errdetail *err);

/* Resolves overrides on top of defaults into out, validating everything. */
int eng_config_resolve(const eng_config_defaults *d, const eng_config_overrides *ov,
                       eng_config *out, eng_errdetail *err);

/* Source of value id in a config resolved from d and ov. */
eng_config_source eng_config_source_of(const eng_config_defaults *d, const eng_config_overrides *ov,
                                       eng_config_id id);

/* Deep copy / free of overrides (free leaves *ov empty). */
int eng_config_overrides_copy(eng_config_overrides *dst, const eng_config_overrides *src);
void eng_config_overrides_clear(eng_config_overrides *ov);

/* Sets (text != NULL) or removes (text == NULL) one override after parsing it;
 * does not run cross-checks. */
int eng_config_overrides_set(eng_config_overrides *ov, const char *name, const char *text,
                             eng_errdetail *err);

/* The batch codec (ENG_CODEC_*) a compression.type value stores with;
 * ENG_CODEC_NONE for uncompressed and producer. */
int eng_config_codec(int64_t compression_type);

/* The configured level for codec (compression.gzip/lz4/zstd.level), -1 for
 * codecs without one. */
int eng_config_codec_level(const eng_config *c, int codec);

/* Effective message.timestamp.before/after.max.ms: falls back to the
 * deprecated difference.max.ms when left at Long.MAX. */
int64_t eng_config_ts_before_max(const eng_config *c);
int64_t eng_config_ts_after_max(const eng_config *c);

#endif
