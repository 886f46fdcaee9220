/*
 * test_settings.c - svc_settings_load with a --config file, as main() calls
 * it (SVC_LOAD_EXIT_ERROR is exit status 2):
 *
 *   - --config naming a directory, a missing file or a device stops the
 *     start with the path named (a directory used to read as an empty file
 *     and the server started on its defaults);
 *   - the file goes through the Properties.load reader: an escaped trailing
 *     backslash does not swallow the next line, escapes are decoded, a
 *     commented-out setting on a line past 8 KiB is not applied, a
 *     continuation at end of file is, values are trimmed as Kafka trims them;
 *   - a Kafka broker's server.properties starts: its listeners
 *     (PLAINTEXT://:9092,...) are not logstore's and are ignored with a
 *     warning; an http:// one among them is used; two are refused; the
 *     environment and --set get no such leeway;
 *   - precedence: --set over LOGSTORE_<NAME> over the file; log.dir only
 *     when log.dirs is not given; a value below a setting's minimum and an
 *     unknown --set name stop the start (an unknown name in the file is a
 *     warning).
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "svc_settings.h"
#include "support.h"

#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct fixture {
    char *tmp;
    char path[600];
    char err[4096]; /* what the load printed on stderr */
} fixture;

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    if (!f || !(f->tmp = ts_tmpdir()))
        return -1;
    snprintf(f->path, sizeof f->path, "%s/server.properties", f->tmp);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    ts_rmtree(f->tmp);
    free(f->tmp);
    free(f);
    return 0;
}

static void write_file(fixture *f, const char *text, size_t n)
{
    FILE *out = fopen(f->path, "w");
    assert_non_null(out);
    assert_int_equal(fwrite(text, 1, n, out), n);
    assert_int_equal(fclose(out), 0);
}

/* Loads with --config path, the extra argv and envp, stderr kept in f->err. */
static svc_load_result load(fixture *f, svc_settings *s, const char *path, const char *set,
                            char **envp)
{
    char *argv[] = {"logstore", "--config", (char *)path, set ? "--set" : NULL, (char *)set, NULL};
    char cap[700];
    snprintf(cap, sizeof cap, "%s/stderr", f->tmp);
    int fd = open(cap, O_RDWR | O_CREAT | O_TRUNC, 0600);
    assert_true(fd >= 0);
    fflush(stderr);
    int saved = dup(2);
    assert_true(saved >= 0);
    assert_int_equal(dup2(fd, 2), 2);
    svc_load_result r = svc_settings_load(s, set ? 5 : 3, argv, envp);
    fflush(stderr);
    assert_int_equal(dup2(saved, 2), 2);
    assert_int_equal(close(saved), 0);
    ssize_t n = pread(fd, f->err, sizeof f->err - 1, 0);
    assert_true(n >= 0);
    f->err[n] = 0;
    assert_int_equal(close(fd), 0);
    return r;
}

static void test_config_not_a_file(void **state)
{
    fixture *f = *state;
    svc_settings s;
    assert_int_equal(load(f, &s, f->tmp, NULL, NULL), SVC_LOAD_EXIT_ERROR);
    assert_non_null(strstr(f->err, f->tmp));
    assert_non_null(strstr(f->err, "is a directory"));
    assert_int_equal(load(f, &s, "/dev/zero", NULL, NULL), SVC_LOAD_EXIT_ERROR);
    assert_non_null(strstr(f->err, "/dev/zero"));
    assert_int_equal(load(f, &s, f->path, NULL, NULL), SVC_LOAD_EXIT_ERROR); /* not there yet */
    assert_non_null(strstr(f->err, f->path));
    write_file(f, "log.level=WARN\n", 15);
    assert_int_equal(load(f, &s, f->path, NULL, NULL), SVC_LOAD_RUN);
    assert_string_equal(s.text[SVC_LOG_LEVEL], "WARN");
    svc_settings_free(&s);
}

/* A topic default given in the file and again in the environment is listed
 * once, as the environment gave it (the one that applies): it was listed
 * twice in /v1/configs/defaults. */
static void test_synonym_listed_once(void **state)
{
    fixture *f = *state;
    const char *text = "log.segment.bytes=2097152\n";
    write_file(f, text, strlen(text));
    char env0[] = "LOGSTORE_LOG_SEGMENT_BYTES=4194304";
    char *envp[] = {env0, NULL};
    svc_settings s;
    assert_int_equal(load(f, &s, f->path, NULL, envp), SVC_LOAD_RUN);
    json_t *arr = svc_settings_json(&s);
    size_t i, seen = 0;
    json_t *o;
    json_array_foreach(arr, i, o) {
        if (strcmp(json_string_value(json_object_get(o, "name")), "log.segment.bytes"))
            continue;
        seen++;
        assert_string_equal(json_string_value(json_object_get(o, "value")), "4194304");
        assert_string_equal(json_string_value(json_object_get(o, "source")), "ENVIRONMENT");
    }
    assert_int_equal(seen, 1);
    json_decref(arr);
    svc_settings_free(&s);
}

static void test_properties_syntax(void **state)
{
    fixture *f = *state;
    size_t pad = 10000; /* past the old 8191-byte line buffer */
    char *text = malloc(pad + 1000);
    assert_non_null(text);
    char *p = text;
    p += sprintf(p, "log.dirs=/tmp/x\\\\\n"          /* ends in an escaped backslash */
                    "log.level = WARN   \n"           /* trimmed, as Kafka trims */
                    "http.cors.allowed.origins=http://a.example\\:8080\n"
                    "auth.tokens.file=/etc/t\\u00e9\\\n"
                    "     st\n"
                    "#");
    memset(p, 'x', pad);
    p += pad;
    p += sprintf(p, "http.threads=99\n"                /* the tail of a comment */
                    "log.retention.hours=\\\n   5\n"
                    "http.max.waiters=77\\");           /* a continuation at EOF */
    write_file(f, text, (size_t)(p - text));
    free(text);
    svc_settings s;
    assert_int_equal(load(f, &s, f->path, NULL, NULL), SVC_LOAD_RUN);
    assert_string_equal(s.log_dir, "/tmp/x\\");
    assert_string_equal(s.text[SVC_LOG_LEVEL], "WARN");
    assert_string_equal(s.text[SVC_HTTP_CORS_ALLOWED_ORIGINS], "http://a.example:8080");
    assert_string_equal(s.text[SVC_AUTH_TOKENS_FILE], "/etc/t\xc3\xa9st");
    assert_int_equal(s.http_threads, 4);
    assert_int_equal(s.max_waiters, 77);
    assert_int_equal(s.topic_defaults.cfg.v[ENG_CFG_RETENTION_MS].i, 5 * 3600000LL);
    assert_int_equal(s.source[SVC_LOG_DIRS], SVC_SRC_FILE);
    svc_settings_free(&s);
    write_file(f, "log.dirs=/x\\u00zz\n", 18);
    assert_int_equal(load(f, &s, f->path, NULL, NULL), SVC_LOAD_EXIT_ERROR);
    assert_non_null(strstr(f->err, "server.properties:1: malformed \\uxxxx encoding"));
}

/* The head of Kafka's config/kraft/server.properties. */
static const char kafka[] =
    "process.roles=broker,controller\n"
    "node.id=1\n"
    "controller.quorum.voters=1@localhost:9093\n"
    "listeners=PLAINTEXT://:9092,CONTROLLER://:9093\n"
    "inter.broker.listener.name=PLAINTEXT\n"
    "advertised.listeners=PLAINTEXT://localhost:9092\n"
    "controller.listener.names=CONTROLLER\n"
    "listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SSL:SSL\n"
    "num.network.threads=3\n"
    "num.io.threads=8\n"
    "socket.send.buffer.bytes=102400\n"
    "socket.receive.buffer.bytes=102400\n"
    "socket.request.max.bytes=104857600\n"
    "log.dirs=/tmp/kraft-combined-logs\n"
    "num.partitions=1\n"
    "num.recovery.threads.per.data.dir=1\n"
    "offsets.topic.replication.factor=1\n"
    "transaction.state.log.replication.factor=1\n"
    "transaction.state.log.min.isr=1\n"
    "log.retention.hours=168\n"
    "log.segment.bytes=1073741824\n"
    "log.retention.check.interval.ms=300000\n";

static void test_kafka_server_properties(void **state)
{
    fixture *f = *state;
    write_file(f, kafka, strlen(kafka));
    svc_settings s;
    assert_int_equal(load(f, &s, f->path, NULL, NULL), SVC_LOAD_RUN);
    assert_string_equal(s.text[SVC_LISTENERS], "http://127.0.0.1:8080");
    assert_int_equal(s.source[SVC_LISTENERS], SVC_SRC_DEFAULT);
    assert_int_equal(s.listen_port, 8080);
    assert_string_equal(s.log_dir, "/tmp/kraft-combined-logs");
    assert_non_null(s.warnings);
    assert_non_null(strstr(s.warnings, "ignoring 'listeners=PLAINTEXT://:9092,CONTROLLER://:9093' "
                                       "from the config file: it names no http:// or https://"));
    assert_non_null(strstr(s.warnings, "ignoring unknown setting 'process.roles'"));
    svc_settings_free(&s);
    /* With logstore's listener given by --set or the environment. */
    assert_int_equal(load(f, &s, f->path, "listeners=http://127.0.0.1:18231", NULL), SVC_LOAD_RUN);
    assert_int_equal(s.listen_port, 18231);
    assert_int_equal(s.source[SVC_LISTENERS], SVC_SRC_FLAG);
    svc_settings_free(&s);
    char *envp[] = {"LOGSTORE_LISTENERS=http://127.0.0.1:18232", NULL};
    assert_int_equal(load(f, &s, f->path, NULL, envp), SVC_LOAD_RUN);
    assert_int_equal(s.listen_port, 18232);
    svc_settings_free(&s);
    /* Kafka's listeners from --set or the environment are still errors. */
    char *kenv[] = {"LOGSTORE_LISTENERS=PLAINTEXT://:9092", NULL};
    assert_int_equal(load(f, &s, f->path, NULL, kenv), SVC_LOAD_EXIT_ERROR);
    assert_non_null(strstr(f->err, "listeners must look like http://host:port"));
    assert_int_equal(load(f, &s, f->path, "listeners=PLAINTEXT://:9092,CONTROLLER://:9093", NULL),
                     SVC_LOAD_EXIT_ERROR);
    assert_non_null(strstr(f->err, "listeners takes one http:// or https:// listener"));
}

static void test_file_listeners_mixed(void **state)
{
    fixture *f = *state;
    const char *mixed = "listeners=PLAINTEXT://:9092, http://127.0.0.1:18233 ,CONTROLLER://:9093\n";
    write_file(f, mixed, strlen(mixed));
    svc_settings s;
    assert_int_equal(load(f, &s, f->path, NULL, NULL), SVC_LOAD_RUN);
    assert_string_equal(s.text[SVC_LISTENERS], "http://127.0.0.1:18233");
    assert_int_equal(s.source[SVC_LISTENERS], SVC_SRC_FILE);
    assert_int_equal(s.listen_port, 18233);
    assert_non_null(strstr(s.warnings, "serving http://127.0.0.1:18233; the others are not HTTP"));
    svc_settings_free(&s);
    const char *plain = "listeners=http://127.0.0.1:18234\n";
    write_file(f, plain, strlen(plain));
    assert_int_equal(load(f, &s, f->path, NULL, NULL), SVC_LOAD_RUN);
    assert_int_equal(s.listen_port, 18234);
    assert_null(s.warnings);
    svc_settings_free(&s);
    const char *two = "listeners=http://127.0.0.1:18235,http://127.0.0.1:18236\n";
    write_file(f, two, strlen(two));
    assert_int_equal(load(f, &s, f->path, NULL, NULL), SVC_LOAD_EXIT_ERROR);
    assert_non_null(strstr(f->err, "names 2 http(s):// listeners; logstore serves one"));
}

/* DESIGN §5: the file, then the environment, then --set, each over the one
 * before. */
static void test_precedence(void **state)
{
    fixture *f = *state;
    const char *text = "log.level=WARN\nlog.dir=/tmp/from-log-dir\n";
    write_file(f, text, strlen(text));
    char env0[] = "LOGSTORE_LOG_LEVEL=ERROR";
    char *envp[] = {env0, NULL};
    svc_settings s;
    assert_int_equal(load(f, &s, f->path, "log.level=DEBUG", envp), SVC_LOAD_RUN);
    assert_string_equal(s.text[SVC_LOG_LEVEL], "DEBUG");
    assert_int_equal(s.source[SVC_LOG_LEVEL], SVC_SRC_FLAG);
    /* Kafka's log.dir applies when log.dirs is not given. */
    assert_string_equal(s.log_dir, "/tmp/from-log-dir");
    svc_settings_free(&s);
    assert_int_equal(load(f, &s, f->path, NULL, envp), SVC_LOAD_RUN);
    assert_string_equal(s.text[SVC_LOG_LEVEL], "ERROR");
    assert_int_equal(s.source[SVC_LOG_LEVEL], SVC_SRC_ENV);
    svc_settings_free(&s);
    assert_int_equal(load(f, &s, f->path, NULL, NULL), SVC_LOAD_RUN);
    assert_string_equal(s.text[SVC_LOG_LEVEL], "WARN");
    assert_int_equal(s.source[SVC_LOG_LEVEL], SVC_SRC_FILE);
    svc_settings_free(&s);
    /* log.dirs, from anywhere, wins over log.dir. */
    assert_int_equal(load(f, &s, f->path, "log.dirs=/tmp/from-log-dirs", NULL), SVC_LOAD_RUN);
    assert_string_equal(s.log_dir, "/tmp/from-log-dirs");
    svc_settings_free(&s);
}

/* Bounds hold at both ends; an unknown name is an error on the command line
 * and a warning in the file (a Kafka broker's file has names of its own). */
static void test_bounds_and_unknown_names(void **state)
{
    fixture *f = *state;
    write_file(f, "", 0);
    svc_settings s;
    assert_int_equal(load(f, &s, f->path, "http.threads=0", NULL), SVC_LOAD_EXIT_ERROR);
    assert_non_null(strstr(f->err, "http.threads must be an integer in [1, 1024], got '0'"));
    assert_int_equal(load(f, &s, f->path, "http.threads=1025", NULL), SVC_LOAD_EXIT_ERROR);
    assert_int_equal(load(f, &s, f->path, "http.max.header.bytes=4095", NULL), SVC_LOAD_EXIT_ERROR);
    assert_int_equal(load(f, &s, f->path, "http.threads=1", NULL), SVC_LOAD_RUN);
    assert_int_equal(s.http_threads, 1);
    svc_settings_free(&s);
    assert_int_equal(load(f, &s, f->path, "no.such.setting=1", NULL), SVC_LOAD_EXIT_ERROR);
    assert_non_null(strstr(f->err, "unknown setting 'no.such.setting'"));
    const char *text = "no.such.setting=1\n";
    write_file(f, text, strlen(text));
    assert_int_equal(load(f, &s, f->path, NULL, NULL), SVC_LOAD_RUN);
    assert_non_null(s.warnings);
    assert_non_null(strstr(s.warnings, "ignoring unknown setting 'no.such.setting' from the config file"));
    svc_settings_free(&s);
}

/* The broker-level names of Kafka's topic configs that mean nothing on one
 * node are said to be that, as the topic configs are (422 "has no meaning
 * on a single-node log store"), not called unknown: refused as a flag,
 * ignored with that warning from a file. */
static void test_inapplicable_broker_synonyms(void **state)
{
    fixture *f = *state;
    static const char *const names[] = {"min.insync.replicas", "unclean.leader.election.enable",
                                        "log.message.format.version",
                                        "log.message.downconversion.enable",
                                        "log.local.retention.ms", "log.local.retention.bytes"};
    svc_settings s;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        char set[128], want[160];
        write_file(f, "", 0);
        snprintf(set, sizeof set, "%s=2", names[i]);
        assert_int_equal(load(f, &s, f->path, set, NULL), SVC_LOAD_EXIT_ERROR);
        snprintf(want, sizeof want, "%s has no meaning on a single-node log store", names[i]);
        if (!strstr(f->err, want))
            fail_msg("--set %s printed \"%s\", want \"%s\"", set, f->err, want);
        snprintf(set, sizeof set, "%s=2\n", names[i]);
        write_file(f, set, strlen(set));
        assert_int_equal(load(f, &s, f->path, NULL, NULL), SVC_LOAD_RUN);
        snprintf(want, sizeof want,
                 "ignoring '%s' from the config file: it has no meaning on a single-node log store",
                 names[i]);
        if (!s.warnings || !strstr(s.warnings, want))
            fail_msg("file %s warned \"%s\", want \"%s\"", names[i],
                     s.warnings ? s.warnings : "", want);
        svc_settings_free(&s);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_config_not_a_file, setup, teardown),
        cmocka_unit_test_setup_teardown(test_properties_syntax, setup, teardown),
        cmocka_unit_test_setup_teardown(test_synonym_listed_once, setup, teardown),
        cmocka_unit_test_setup_teardown(test_kafka_server_properties, setup, teardown),
        cmocka_unit_test_setup_teardown(test_file_listeners_mixed, setup, teardown),
        cmocka_unit_test_setup_teardown(test_precedence, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bounds_and_unknown_names, setup, teardown),
        cmocka_unit_test_setup_teardown(test_inapplicable_broker_synonyms, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
