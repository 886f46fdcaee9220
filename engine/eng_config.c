/*
 * eng_config.c - the topic config table and its parser.
 *
 * Defaults, bounds and synonyms are Kafka's (kafka-format.md §18.1), with
 * segment.bytes >= 1048576 as in current Kafka.  Topic configs that only mean
 * something with replicas or tiered storage are known by name so a user who
 * sets one gets a sentence saying why it is refused rather than "unknown".
 */
#include "eng_config.h"

#include "eng_compress.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define LMAX INT64_MAX
#define IMAX INT32_MAX
#define HOURS 3600000
#define MINUTES 60000

static const char *const policy_choices[] = {"delete", "compact", NULL};
static const char *const compression_choices[] = {"uncompressed", "zstd", "lz4", "snappy",
                                                  "gzip", "producer", NULL};
static const char *const ts_type_choices[] = {"CreateTime", "LogAppendTime", NULL};

static const eng_config_def defs[ENG_CFG_COUNT] = {
    [ENG_CFG_SEGMENT_BYTES] = {"segment.bytes", ENG_CFG_INT, "1073741824", 1048576, IMAX, 0, 0,
                               NULL, {{"log.segment.bytes", 1, 0}},
                               "Largest size of a segment's .log file before a new segment is rolled."},
    [ENG_CFG_SEGMENT_MS] = {"segment.ms", ENG_CFG_LONG, "604800000", 1, LMAX, 0, 0, NULL,
                            {{"log.roll.ms", 1, 0}, {"log.roll.hours", HOURS, 1}},
                            "Roll a new segment once the active one spans this much record time."},
    [ENG_CFG_SEGMENT_JITTER_MS] = {"segment.jitter.ms", ENG_CFG_LONG, "0", 0, LMAX, 0, 0, NULL,
                                   {{"log.roll.jitter.ms", 1, 0}, {"log.roll.jitter.hours", HOURS, 0}},
                                   "Random jitter subtracted from segment.ms per segment."},
    [ENG_CFG_SEGMENT_INDEX_BYTES] = {"segment.index.bytes", ENG_CFG_INT, "10485760", 4, IMAX, 0, 0,
                                     NULL, {{"log.index.size.max.bytes", 1, 0}},
                                     "Size each offset and time index is preallocated to."},
    [ENG_CFG_FLUSH_MESSAGES] = {"flush.messages", ENG_CFG_LONG, "9223372036854775807", 1, LMAX, 0,
                                0, NULL, {{"log.flush.interval.messages", 1, 0}},
                                "fsync after this many records; 1 makes every append durable before it is acknowledged."},
    [ENG_CFG_FLUSH_MS] = {"flush.ms", ENG_CFG_LONG, "9223372036854775807", 0, LMAX, 0, 0, NULL,
                          {{"log.flush.interval.ms", 1, 0}, {"log.flush.scheduler.interval.ms", 1, 0}},
                          "fsync when unflushed data is older than this."},
    [ENG_CFG_RETENTION_BYTES] = {"retention.bytes", ENG_CFG_LONG, "-1", INT64_MIN, LMAX, 0, 0, NULL,
                                 {{"log.retention.bytes", 1, 0}},
                                 "Delete oldest segments while the partition exceeds this size; -1 = no limit."},
    [ENG_CFG_RETENTION_MS] = {"retention.ms", ENG_CFG_LONG, "604800000", -1, LMAX, 0, 0, NULL,
                              {{"log.retention.ms", 1, 0},
                               {"log.retention.minutes", MINUTES, INT32_MIN},
                               {"log.retention.hours", HOURS, INT32_MIN}},
                              "Delete segments whose newest record is older than this; -1 = forever."},
    [ENG_CFG_MAX_MESSAGE_BYTES] = {"max.message.bytes", ENG_CFG_INT, "1048588", 0, IMAX, 0, 0, NULL,
                                   {{"message.max.bytes", 1, 0}},
                                   "Largest record batch accepted, in bytes."},
    [ENG_CFG_INDEX_INTERVAL_BYTES] = {"index.interval.bytes", ENG_CFG_INT, "4096", 0, IMAX, 0, 0,
                                      NULL, {{"log.index.interval.bytes", 1, 0}},
                                      "Bytes of log between two offset-index entries."},
    [ENG_CFG_DELETE_RETENTION_MS] = {"delete.retention.ms", ENG_CFG_LONG, "86400000", 0, LMAX, 0, 0,
                                     NULL, {{"log.cleaner.delete.retention.ms", 1, 0}},
                                     "How long tombstones survive compaction after their first clean."},
    [ENG_CFG_MIN_COMPACTION_LAG_MS] = {"min.compaction.lag.ms", ENG_CFG_LONG, "0", 0, LMAX, 0, 0,
                                       NULL, {{"log.cleaner.min.compaction.lag.ms", 1, 0}},
                                       "Records newer than this are never compacted."},
    [ENG_CFG_MAX_COMPACTION_LAG_MS] = {"max.compaction.lag.ms", ENG_CFG_LONG,
                                       "9223372036854775807", 1, LMAX, 0, 0, NULL,
                                       {{"log.cleaner.max.compaction.lag.ms", 1, 0}},
                                       "Compact a dirty segment once it is this old, whatever the dirty ratio."},
    [ENG_CFG_FILE_DELETE_DELAY_MS] = {"file.delete.delay.ms", ENG_CFG_LONG, "60000", 0, LMAX, 0, 0,
                                      NULL, {{"log.segment.delete.delay.ms", 1, 0}},
                                      "Time a .deleted file waits before it is unlinked."},
    [ENG_CFG_MIN_CLEANABLE_DIRTY_RATIO] = {"min.cleanable.dirty.ratio", ENG_CFG_DOUBLE, "0.5", 0, 0,
                                           0.0, 1.0, NULL,
                                           {{"log.cleaner.min.cleanable.ratio", 1, 0}},
                                           "Dirty share of the log above which the cleaner compacts it."},
    [ENG_CFG_CLEANUP_POLICY] = {"cleanup.policy", ENG_CFG_LIST, "delete", 0, 0, 0, 0,
                                policy_choices, {{"log.cleanup.policy", 1, 0}},
                                "delete (retention), compact (log cleaner), both, or empty "
                                "(keep everything)."},
    [ENG_CFG_COMPRESSION_TYPE] = {"compression.type", ENG_CFG_STRING, "producer", 0, 0, 0, 0,
                                  compression_choices, {{"compression.type", 1, 0}},
                                  "Codec of stored batches; producer keeps what the producer sent."},
    [ENG_CFG_COMPRESSION_GZIP_LEVEL] = {"compression.gzip.level", ENG_CFG_INT, "-1", -1, 9, 0, 0,
                                        NULL, {{"compression.gzip.level", 1, 0}},
                                        "gzip level, 1..9 or -1 for zlib's default."},
    [ENG_CFG_COMPRESSION_LZ4_LEVEL] = {"compression.lz4.level", ENG_CFG_INT, "9", 1, 17, 0, 0, NULL,
                                       {{"compression.lz4.level", 1, 0}}, "lz4 level, 1..17."},
    [ENG_CFG_COMPRESSION_ZSTD_LEVEL] = {"compression.zstd.level", ENG_CFG_INT, "3", -131072, 22, 0,
                                        0, NULL, {{"compression.zstd.level", 1, 0}},
                                        "zstd level, -131072..22."},
    [ENG_CFG_PREALLOCATE] = {"preallocate", ENG_CFG_BOOLEAN, "false", 0, 1, 0, 0, NULL,
                             {{"log.preallocate", 1, 0}},
                             "Preallocate a new segment's .log to segment.bytes."},
    [ENG_CFG_MESSAGE_TIMESTAMP_TYPE] = {"message.timestamp.type", ENG_CFG_STRING, "CreateTime", 0, 0,
                                        0, 0, ts_type_choices,
                                        {{"log.message.timestamp.type", 1, 0}},
                                        "CreateTime keeps the producer's timestamps; LogAppendTime stamps the server clock."},
    [ENG_CFG_MESSAGE_TIMESTAMP_DIFFERENCE_MAX_MS] = {
        "message.timestamp.difference.max.ms", ENG_CFG_LONG, "9223372036854775807", 0, LMAX, 0, 0,
        NULL, {{"log.message.timestamp.difference.max.ms", 1, 0}},
        "Deprecated: fallback for the before/after limits."},
    [ENG_CFG_MESSAGE_TIMESTAMP_BEFORE_MAX_MS] = {
        "message.timestamp.before.max.ms", ENG_CFG_LONG, "9223372036854775807", 0, LMAX, 0, 0, NULL,
        {{"log.message.timestamp.before.max.ms", 1, 0}},
        "Reject CreateTime records older than now minus this."},
    [ENG_CFG_MESSAGE_TIMESTAMP_AFTER_MAX_MS] = {
        "message.timestamp.after.max.ms", ENG_CFG_LONG, "9223372036854775807", 0, LMAX, 0, 0, NULL,
        {{"log.message.timestamp.after.max.ms", 1, 0}},
        "Reject CreateTime records newer than now plus this."},
};

static const char *const inapplicable[] = {
    "unclean.leader.election.enable", "min.insync.replicas", "message.format.version",
    "leader.replication.throttled.replicas", "follower.replication.throttled.replicas",
    "message.downconversion.enable", "remote.storage.enable", "local.retention.ms",
    "local.retention.bytes", "remote.log.copy.disable", "remote.log.delete.on.disable", NULL,
};

/* Their broker-level synonyms, which a reused Kafka server.properties may
 * hold. */
static const char *const inapplicable_broker[] = {
    "min.insync.replicas", "unclean.leader.election.enable", "log.message.format.version",
    "log.message.downconversion.enable", "log.local.retention.ms", "log.local.retention.bytes",
    NULL,
};

const eng_config_def *eng_config_def_at(eng_config_id id)
{
    return (unsigned)id < ENG_CFG_COUNT ? &defs[id] : NULL;
}

int eng_config_lookup(const char *name)
{
    for (int i = 0; i < ENG_CFG_COUNT; i++)
        if (strcmp(defs[i].name, name) == 0)
            return i;
    return -1;
}

bool eng_config_is_inapplicable(const char *name)
{
    for (size_t i = 0; inapplicable[i]; i++)
        if (strcmp(inapplicable[i], name) == 0)
            return true;
    return false;
}

bool eng_config_is_inapplicable_broker(const char *name)
{
    for (size_t i = 0; inapplicable_broker[i]; i++)
        if (strcmp(inapplicable_broker[i], name) == 0)
            return true;
    return false;
}

int eng_config_name_error(const char *name, eng_errdetail *err)
{
    eng_errdetail_key(err, name);
    if (eng_config_is_inapplicable(name))
        return eng_fail(err, ENG_ECONFIG, "%.100s has no meaning on a single-node log store",
                        name);
    return eng_fail(err, ENG_ECONFIG, "unknown topic config '%.100s'", name);
}

static int parse_long(const char *text, int64_t *out)
{
    while (isspace((unsigned char)*text))
        text++;
    if (!*text)
        return -1;
    errno = 0;
    char *end;
    long long v = strtoll(text, &end, 10);
    while (isspace((unsigned char)*end))
        end++;
    if (errno || *end)
        return -1;
    *out = v;
    return 0;
}

/* Stored values match any letter case (metadata written before new values
 * were checked exactly must still load); new ones must match exactly, as
 * Kafka's validators do (eng_config_overrides_set). */
static int choice_index(const char *const *choices, const char *s, size_t len, bool exact)
{
    for (int i = 0; choices[i]; i++)
        if (strlen(choices[i]) == len &&
            (exact ? strncmp(choices[i], s, len) : strncasecmp(choices[i], s, len)) == 0)
            return i;
    return -1;
}

/* A comma-separated list of choices as a bit mask; *dup (if given) says
 * whether a choice was named twice, and norm (if given) gets the list as
 * Kafka prints it: the choices' names in their order, without blanks.  An empty (or blank) list is mask 0: for
 * cleanup.policy, Kafka 4.2's "keep everything" (neither retention nor
 * compaction; only a raised log start offset deletes segments). */
static int parse_list(const eng_config_def *d, const char *text, int64_t *mask, bool *dup,
                      bool exact, char *norm, size_t normlen)
{
    const char *p = text;
    size_t used = 0;
    *mask = 0;
    if (dup)
        *dup = false;
    if (norm)
        norm[0] = 0;
    if (text[strspn(text, " ")] == 0)
        return 0;
    for (;;) {
        while (*p == ' ')
            p++;
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        while (len && p[len - 1] == ' ')
            len--;
        int c = choice_index(d->choices, p, len, exact);
        if (c < 0)
            return -1;
        if (dup && (*mask & (1 << c)))
            *dup = true;
        *mask |= 1 << c;
        if (norm) /* the items as named, in their order, without blanks */
            used += (size_t)snprintf(norm + used, used < normlen ? normlen - used : 0, "%s%s",
                                     used ? "," : "", d->choices[c]);
        if (!e)
            return 0;
        p = e + 1;
    }
}

static int bad_named(eng_errdetail *err, const char *name, const char *text, const char *why)
{
    eng_errdetail_key(err, name);
    return eng_fail(err, ENG_ECONFIG, "invalid value '%.64s' for %s: %s", text, name, why);
}

static int bad(eng_errdetail *err, const eng_config_def *d, const char *text, const char *why)
{
    return bad_named(err, d->name, text, why);
}

/* eng_config_parse, with errors naming `name`: a broker synonym is refused
 * under the name the user gave (log.segment.bytes), as Kafka's broker
 * config refuses it, not under the topic config it feeds. */
static int parse_as(eng_config_id id, const char *name, const char *text, eng_config_value *out,
                    eng_errdetail *err)
{
    const eng_config_def *d = &defs[id];
    eng_config_value v = {0};
    char why[160];
    switch (d->type) {
    case ENG_CFG_INT:
    case ENG_CFG_LONG:
        if (parse_long(text, &v.i))
            return bad_named(err, name, text,
                             d->type == ENG_CFG_INT ? "expected an int" : "expected a long");
        if (v.i < d->min || v.i > d->max) {
            /* An open-ended range names its lower bound, unless the value
             * is past the type's top (2147483648 for an int). */
            if (v.i > d->max && d->type == ENG_CFG_INT && d->max == IMAX)
                snprintf(why, sizeof why, "an int is at most %lld", (long long)IMAX);
            else if (d->max == LMAX || (d->type == ENG_CFG_INT && d->max == IMAX))
                snprintf(why, sizeof why, "must be at least %lld", (long long)d->min);
            else
                snprintf(why, sizeof why, "must be in [%lld, %lld]", (long long)d->min,
                         (long long)d->max);
            return bad_named(err, name, text, why);
        }
        /* Kafka's validator: 1..9, or -1 for zlib's default; 0 (no
         * compression) is refused, not taken as the default. */
        if (id == ENG_CFG_COMPRESSION_GZIP_LEVEL && v.i == 0)
            return bad_named(err, name, text, "must be in [1, 9] or -1");
        break;
    case ENG_CFG_DOUBLE: {
        char *end;
        errno = 0;
        v.d = strtod(text, &end);
        if (errno || end == text || *end || !isfinite(v.d))
            return bad_named(err, name, text, "expected a number");
        if (v.d < d->dmin || v.d > d->dmax) {
            snprintf(why, sizeof why, "must be in [%g, %g]", d->dmin, d->dmax);
            return bad_named(err, name, text, why);
        }
        break;
    }
    case ENG_CFG_BOOLEAN:
        if (strcasecmp(text, "true") == 0)
            v.i = 1;
        else if (strcasecmp(text, "false") == 0)
            v.i = 0;
        else
            return bad_named(err, name, text, "expected true or false");
        break;
    case ENG_CFG_STRING: {
        int c = choice_index(d->choices, text, strlen(text), false);
        if (c < 0)
            return bad_named(err, name, text, "not one of the allowed values");
        if (id == ENG_CFG_COMPRESSION_TYPE && !eng_codec_supported(eng_config_codec(c)))
            return bad_named(err, name, text, "this codec is not available in this build");
        v.i = c;
        break;
    }
    case ENG_CFG_LIST:
        if (parse_list(d, text, &v.i, NULL, false, NULL, 0))
            return bad_named(err, name, text,
                             "expected a comma-separated subset of delete, compact");
        break;
    }
    *out = v;
    return 0;
}

int eng_config_parse(eng_config_id id, const char *text, eng_config_value *out, eng_errdetail *err)
{
    return parse_as(id, defs[id].name, text, out, err);
}

void eng_format_double(double d, char *buf, size_t len)
{
    for (int prec = 1; prec <= 17; prec++)
        if (snprintf(buf, len, "%.*g", prec, d) > 0 && strtod(buf, NULL) == d)
            break;
}

void eng_config_format(eng_config_id id, eng_config_value v, char *buf, size_t len)
{
    const eng_config_def *d = &defs[id];
    switch (d->type) {
    case ENG_CFG_INT:
    case ENG_CFG_LONG:
        snprintf(buf, len, "%lld", (long long)v.i);
        break;
    case ENG_CFG_DOUBLE:
        eng_format_double(v.d, buf, len);
        break;
    case ENG_CFG_BOOLEAN:
        snprintf(buf, len, "%s", v.i ? "true" : "false");
        break;
    case ENG_CFG_STRING:
        snprintf(buf, len, "%s", d->choices[v.i]);
        break;
    case ENG_CFG_LIST: {
        size_t used = 0;
        buf[0] = 0;
        for (int i = 0; d->choices[i]; i++)
            if (v.i & (1 << i))
                used += (size_t)snprintf(buf + used, used < len ? len - used : 0, "%s%s",
                                         used ? "," : "", d->choices[i]);
        break;
    }
    }
}

void eng_config_defaults_init(eng_config_defaults *d)
{
    for (int i = 0; i < ENG_CFG_COUNT; i++) {
        int rc = eng_config_parse((eng_config_id)i, defs[i].default_text, &d->cfg.v[i], NULL);
        (void)rc; /* the table's own defaults always parse; a unit test holds it to that */
        d->synonym_rank[i] = -1;
    }
}

/* The value of unit synonym syn (log.retention.hours, ...) in
 * milliseconds.  Kafka reads the setting as a Java int with its own lower
 * bound, then multiplies; a negative retention means unlimited. */
static int scale_synonym(const eng_config_synonym *syn, const char *text, int64_t *ms,
                         eng_errdetail *err)
{
    int64_t raw;
    char why[64];
    if (parse_long(text, &raw) || raw < INT32_MIN || raw > INT32_MAX)
        return bad_named(err, syn->name, text, "expected an int");
    if (raw < syn->min) {
        snprintf(why, sizeof why, "must be at least %lld", (long long)syn->min);
        return bad_named(err, syn->name, text, why);
    }
    *ms = raw < 0 ? -1 : raw * syn->factor; /* |int| * 3,600,000 fits a long */
    return 0;
}

int eng_config_defaults_apply(eng_config_defaults *d, const char *name, const char *text,
                              eng_errdetail *err)
{
    int applied = 0;
    for (int i = 0; i < ENG_CFG_COUNT; i++) {
        for (int s = 0; s < 4 && defs[i].synonyms[s].name; s++) {
            const eng_config_synonym *syn = &defs[i].synonyms[s];
            if (strcmp(syn->name, name) != 0)
                continue;
            eng_config_value v;
            int rc;
            int64_t neg;
            if (syn->factor == 1 && i == ENG_CFG_RETENTION_MS && !parse_long(text, &neg) &&
                neg < 0) {
                /* Kafka's logRetentionTimeMillis: any negative broker value,
                 * whichever synonym gave it, means unlimited. */
                v.i = -1;
                rc = 0;
            } else if (syn->factor == 1) {
                rc = parse_as((eng_config_id)i, name, text, &v, err);
            } else {
                int64_t ms = 0;
                char scaled[32];
                rc = scale_synonym(syn, text, &ms, err);
                if (!rc) {
                    snprintf(scaled, sizeof scaled, "%lld", (long long)ms);
                    rc = parse_as((eng_config_id)i, name, scaled, &v, err);
                }
            }
            if (rc)
                return rc;
            applied = 1;
            /* Checked, but a lower-priority synonym never overrides a
             * higher one already set. */
            if (d->synonym_rank[i] >= 0 && d->synonym_rank[i] < s)
                continue;
            d->cfg.v[i] = v;
            d->synonym_rank[i] = (int8_t)s;
        }
    }
    return applied;
}

int eng_config_check(const eng_config *c, eng_errdetail *err)
{
    if (c->v[ENG_CFG_MIN_COMPACTION_LAG_MS].i > c->v[ENG_CFG_MAX_COMPACTION_LAG_MS].i) {
        eng_errdetail_key(err, "min.compaction.lag.ms");
        return eng_fail(err, ENG_ECONFIG,
                        "min.compaction.lag.ms (%lld) must not exceed max.compaction.lag.ms (%lld)",
                        (long long)c->v[ENG_CFG_MIN_COMPACTION_LAG_MS].i,
                        (long long)c->v[ENG_CFG_MAX_COMPACTION_LAG_MS].i);
    }
    return 0;
}

int eng_config_resolve(const eng_config_defaults *d, const eng_config_overrides *ov,
                       eng_config *out, eng_errdetail *err)
{
    eng_config c = d->cfg;
    for (int i = 0; ov && i < ENG_CFG_COUNT; i++) {
        if (!ov->text[i])
            continue;
        int rc = eng_config_parse((eng_config_id)i, ov->text[i], &c.v[i], err);
        if (rc)
            return rc;
    }
    int rc = eng_config_check(&c, err);
    if (rc)
        return rc;
    *out = c;
    return 0;
}

eng_config_source eng_config_source_of(const eng_config_defaults *d, const eng_config_overrides *ov,
                                       eng_config_id id)
{
    if (ov && ov->text[id])
        return ENG_SRC_TOPIC;
    return d->synonym_rank[id] >= 0 ? ENG_SRC_BROKER : ENG_SRC_DEFAULT;
}

void eng_config_overrides_clear(eng_config_overrides *ov)
{
    for (int i = 0; i < ENG_CFG_COUNT; i++) {
        free(ov->text[i]);
        ov->text[i] = NULL;
    }
}

int eng_config_overrides_copy(eng_config_overrides *dst, const eng_config_overrides *src)
{
    eng_config_overrides tmp = {{0}};
    for (int i = 0; i < ENG_CFG_COUNT; i++) {
        if (src->text[i] && !(tmp.text[i] = strdup(src->text[i]))) {
            eng_config_overrides_clear(&tmp);
            return -ENOMEM;
        }
    }
    *dst = tmp;
    return 0;
}

/* Validates a new, trimmed value for config id and takes it (owned, or
 * freed for its normalized copy) into ov; on failure the caller still owns
 * text. */
static int set_trimmed(eng_config_overrides *ov, int id, char *text, eng_errdetail *err)
{
    eng_config_value v;
    int rc = eng_config_parse((eng_config_id)id, text, &v, err);
    if (rc)
        return rc;
    /* New values only, as in Kafka 4.2: a list naming a choice twice is
     * refused; one already stored (eng_config_resolve) still loads. */
    bool dup = false;
    int64_t mask;
    char norm[256];
    if (defs[id].type == ENG_CFG_LIST &&
        parse_list(&defs[id], text, &mask, &dup, true, norm, sizeof norm))
        return bad(err, &defs[id], text, "not in the allowed values' letter case");
    if (dup)
        return bad(err, &defs[id], text, "contains duplicate values");
    if (defs[id].type == ENG_CFG_STRING && defs[id].choices &&
        choice_index(defs[id].choices, text, strlen(text), true) < 0)
        return bad(err, &defs[id], text, "not in the allowed values' letter case");
    /* Kept as Kafka's DescribeConfigs lists it, the parsed value printed
     * back ("+100" is 100, "TRUE" true, "compact , delete" compact,delete),
     * not as typed.  A list keeps its order; a double its text (Java's
     * Double.toString, 1.0 or 1.0E-5, is not what %g prints). */
    if (defs[id].type != ENG_CFG_LIST && defs[id].type != ENG_CFG_DOUBLE)
        eng_config_format((eng_config_id)id, v, norm, sizeof norm); /* a list's: parse_list */
    char *kept = text;
    if (defs[id].type != ENG_CFG_DOUBLE) {
        if (!(kept = strdup(norm)))
            return -ENOMEM;
        free(text);
    }
    free(ov->text[id]);
    ov->text[id] = kept;
    return 0;
}

int eng_config_overrides_set(eng_config_overrides *ov, const char *name, const char *text,
                             eng_errdetail *err)
{
    int id = eng_config_lookup(name);
    if (id < 0)
        return eng_config_name_error(name, err);
    if (!text) {
        free(ov->text[id]);
        ov->text[id] = NULL;
        return 0;
    }
    /* Kafka's ConfigDef trims every value before parsing it: " true" and
     * "0.5 " are valid there (they were refused here), and the trimmed text
     * is what is kept and listed (" 100 " was listed with its blanks). */
    while (isspace((unsigned char)*text))
        text++;
    size_t tlen = strlen(text);
    while (tlen && isspace((unsigned char)text[tlen - 1]))
        tlen--;
    char *trimmed = strndup(text, tlen);
    if (!trimmed)
        return -ENOMEM;
    int rc = set_trimmed(ov, id, trimmed, err);
    if (rc)
        free(trimmed);
    return rc;
}

int64_t eng_config_ts_before_max(const eng_config *c)
{
    int64_t v = c->v[ENG_CFG_MESSAGE_TIMESTAMP_BEFORE_MAX_MS].i;
    return v == INT64_MAX ? c->v[ENG_CFG_MESSAGE_TIMESTAMP_DIFFERENCE_MAX_MS].i : v;
}

int64_t eng_config_ts_after_max(const eng_config *c)
{
    int64_t v = c->v[ENG_CFG_MESSAGE_TIMESTAMP_AFTER_MAX_MS].i;
    return v == INT64_MAX ? c->v[ENG_CFG_MESSAGE_TIMESTAMP_DIFFERENCE_MAX_MS].i : v;
}

int eng_config_codec(int64_t compression_type)
{
    switch (compression_type) {
    case ENG_COMPRESSION_ZSTD: return ENG_CODEC_ZSTD;
    case ENG_COMPRESSION_LZ4: return ENG_CODEC_LZ4;
    case ENG_COMPRESSION_SNAPPY: return ENG_CODEC_SNAPPY;
    case ENG_COMPRESSION_GZIP: return ENG_CODEC_GZIP;
    default: return ENG_CODEC_NONE; /* uncompressed, producer */
    }
}

int eng_config_codec_level(const eng_config *c, int codec)
{
    switch (codec) {
    case ENG_CODEC_GZIP: return (int)c->v[ENG_CFG_COMPRESSION_GZIP_LEVEL].i;
    case ENG_CODEC_LZ4: return (int)c->v[ENG_CFG_COMPRESSION_LZ4_LEVEL].i;
    case ENG_CODEC_ZSTD: return (int)c->v[ENG_CFG_COMPRESSION_ZSTD_LEVEL].i;
    default: return -1;
    }
}
