/*
 * fuzz_config.c - the settings file and config values on arbitrary text.
 *
 * The input is the text of a server.properties (the --config file).  It goes
 * through, in turn:
 *
 *   1. svc_properties_parse, from memory: every key and value handed over is
 *      a NUL-terminated string, and the parse ends (0 or -1 with a message);
 *   2. every topic config parser, on every value of the file whatever its
 *      key (eng_config_parse for each config id): a value that parses
 *      formats to text that parses back to the same value, as the configs
 *      listing and meta/<topic>.json rely on;
 *   3. the file's topic-config keys as a topic's overrides
 *      (eng_config_overrides_set, then eng_config_resolve and its
 *      cross-checks), and its keys as broker settings
 *      (eng_config_defaults_apply);
 *   4. svc_settings_load with --config naming the input written to a scratch
 *      file (no environment, no other flags): settings that load serialize
 *      to JSON;
 *   5. api_auth_load on the same text as an auth.tokens.file.
 *
 * None may crash, leak or read out of bounds, whatever the text.  Settings
 * errors are printed on stderr by design; run with -close_fd_mask=2 to keep
 * the fuzzer's output readable.
 */
#include "api_auth.h"
#include "eng_config.h"
#include "eng_error.h"
#include "eng_fs.h"
#include "svc_properties.h"
#include "svc_settings.h"
#include "fuzz_support.h"

#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char root[256];
static char props_path[300];

static void remove_root(void)
{
    if (root[0])
        eng_fs_remove_tree(root);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    fuzz_make_root(root, sizeof root, "config");
    snprintf(props_path, sizeof props_path, "%s/server.properties", root);
    atexit(remove_root);
    return 0;
}

typedef struct entries {
    eng_config_overrides ov;
    eng_config_defaults broker;
    int n;
} entries;

/* Step 2 for one value. */
static void parse_everywhere(const char *value)
{
    for (int id = 0; id < ENG_CFG_COUNT; id++) {
        eng_config_value v, again;
        eng_errdetail err = {0};
        int rc = eng_config_parse((eng_config_id)id, value, &v, &err);
        CHECK(rc == 0 || rc == ENG_ECONFIG);
        if (rc)
            continue;
        char text[512];
        eng_config_format((eng_config_id)id, v, text, sizeof text);
        rc = eng_config_parse((eng_config_id)id, text, &again, &err);
        if (rc || (eng_config_def_at((eng_config_id)id)->type == ENG_CFG_DOUBLE
                       ? !(again.d == v.d || (isnan(again.d) && isnan(v.d)))
                       : again.i != v.i)) {
            fprintf(stderr, "fuzz_config: %s='%s' formats as '%s', which %s\n",
                    eng_config_def_at((eng_config_id)id)->name, value, text,
                    rc ? "does not parse" : "parses to another value");
            abort();
        }
    }
}

static int on_entry(void *ctx, const char *key, const char *value, int lineno)
{
    entries *e = ctx;
    CHECK(key && value && lineno >= 1);
    e->n++;
    parse_everywhere(value);
    eng_errdetail err = {0};
    if (eng_config_lookup(key) >= 0) {
        int rc = eng_config_overrides_set(&e->ov, key, value, &err);
        CHECK(rc == 0 || rc == ENG_ECONFIG || rc == -ENOMEM);
    }
    int rc = eng_config_defaults_apply(&e->broker, key, value, &err);
    CHECK(rc == 0 || rc == 1 || rc == ENG_ECONFIG);
    return 0;
}

static void write_props(const uint8_t *data, size_t size)
{
    int fd = open(props_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    CHECK(fd >= 0);
    size_t done = 0;
    while (done < size) {
        ssize_t w = write(fd, data + done, size - done);
        CHECK(w > 0);
        done += (size_t)w;
    }
    CHECK(close(fd) == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* 1-3: the properties parser and the topic config table. */
    FILE *f = fmemopen((void *)(size ? data : (const uint8_t *)""), size ? size : 1, "rb");
    CHECK(f);
    if (size == 0) {
        /* fmemopen refuses a zero size: read one byte off first. */
        CHECK(fgetc(f) == 0);
    }
    entries e = {0};
    eng_config_defaults_init(&e.broker);
    char err[256] = "";
    int rc = svc_properties_parse(f, "fuzz.properties", on_entry, &e, err, sizeof err);
    fclose(f);
    CHECK(rc == 0 || (rc == -1 && err[0]));
    eng_config cfg;
    eng_errdetail detail = {0};
    if (eng_config_resolve(&e.broker, &e.ov, &cfg, &detail) == 0)
        (void)eng_config_check(&cfg, &detail);
    eng_config_overrides_clear(&e.ov);

    /* 4: the whole settings load. */
    write_props(data, size);
    char *argv[] = {"logstore", "--config", props_path, NULL};
    char *envp[] = {NULL};
    svc_settings s;
    svc_load_result res = svc_settings_load(&s, 3, argv, envp);
    CHECK(res == SVC_LOAD_RUN || res == SVC_LOAD_EXIT_ERROR);
    if (res == SVC_LOAD_RUN) {
        json_t *j = svc_settings_json(&s);
        CHECK(j);
        char *text = json_dumps(j, 0);
        CHECK(text);
        free(text);
        json_decref(j);
        svc_settings_free(&s);
    }

    /* 5: a tokens file. */
    api_auth *a = NULL;
    if (api_auth_load((const char *)data, size, &a, err, sizeof err) == 0)
        api_auth_free(a);
    return 0;
}
