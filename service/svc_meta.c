/*
 * svc_meta.c - topic metadata <-> JSON with jansson.
 */
#include "svc_meta.h"

#include "eng_logger.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int encode(const eng_topic_meta *m, char **out, size_t *len, void *ctx)
{
    (void)ctx;
    json_t *cfg = json_object();
    for (int i = 0; i < ENG_CFG_COUNT; i++)
        if (m->overrides.text[i])
            json_object_set_new(cfg, eng_config_def_at((eng_config_id)i)->name,
                                json_string(m->overrides.text[i]));
    json_t *o = json_pack("{s:i,s:s,s:s,s:i,s:I,s:o}", "version", 1, "name", m->name, "topic_id",
                          m->topic_id, "partitions", (int)m->partitions, "created_ms",
                          (json_int_t)m->created_ms, "configs", cfg);
    if (!o)
        return -ENOMEM;
    char *s = json_dumps(o, JSON_INDENT(2) | JSON_SORT_KEYS);
    json_decref(o);
    if (!s)
        return -ENOMEM;
    size_t n = strlen(s);
    /* A trailing newline makes the file friendly to cat and diff. */
    char *withnl = realloc(s, n + 2);
    if (!withnl) {
        free(s);
        return -ENOMEM;
    }
    withnl[n] = '\n';
    withnl[n + 1] = 0;
    *out = withnl;
    *len = n + 1;
    return 0;
}

static int decode(const char *buf, size_t len, eng_topic_meta *m, void *ctx)
{
    (void)ctx;
    json_error_t jerr;
    json_t *o = json_loadb(buf, len, 0, &jerr);
    const char *name = NULL, *id = "";
    int parts = 0;
    json_int_t created = 0;
    json_t *cfg = NULL;
    int rc = ENG_ECORRUPT;
    memset(m, 0, sizeof *m);
    if (!o || json_unpack(o, "{s:s,s:i,s?s,s?I,s?o}", "name", &name, "partitions", &parts,
                          "topic_id", &id, "created_ms", &created, "configs", &cfg))
        goto done;
    if (strlen(name) > ENG_TOPIC_NAME_MAX || strlen(id) > 22)
        goto done;
    snprintf(m->name, sizeof m->name, "%s", name);
    snprintf(m->topic_id, sizeof m->topic_id, "%s", id);
    m->partitions = parts;
    m->created_ms = created;
    if (cfg && json_is_object(cfg)) {
        const char *k;
        json_t *v;
        /* Kept as written even if a value no longer validates: the engine then
         * falls back to defaults with a warning instead of hiding the topic.
         * A number or boolean (a hand edit: "retention.ms": 5000) is taken
         * as the API takes it; it, and a name this version does not know,
         * was skipped without a word, the broker's value silently in force. */
        json_object_foreach(cfg, k, v) {
            int cfg_id = eng_config_lookup(k);
            char num[64];
            const char *text = json_is_string(v) ? json_string_value(v) : NULL;
            if (json_is_integer(v)) {
                snprintf(num, sizeof num, "%lld", (long long)json_integer_value(v));
                text = num;
            } else if (json_is_real(v)) {
                eng_format_double(json_real_value(v), num, sizeof num);
                text = num;
            } else if (json_is_boolean(v)) {
                text = json_is_true(v) ? "true" : "false";
            }
            if (cfg_id < 0 || !text) {
                ENG_WARN("topic %s: config '%.100s' in its metadata is %s; ignored (the next "
                         "config change of the topic rewrites the file without it)",
                         name, k, cfg_id < 0 ? "unknown" : "not a string, number or boolean");
                continue;
            }
            free(m->overrides.text[cfg_id]);
            if (!(m->overrides.text[cfg_id] = strdup(text))) {
                eng_config_overrides_clear(&m->overrides);
                rc = -ENOMEM;
                goto done;
            }
        }
    }
    rc = 0;
done:
    json_decref(o);
    return rc;
}

eng_meta_codec svc_meta_codec(void)
{
    return (eng_meta_codec){.encode = encode, .decode = decode, .ctx = NULL};
}
