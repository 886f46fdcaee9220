/*
 * test_server_configs.c - server defaults and log dirs (issue 7), against the
 * real server binary over loopback.
 *
 * /v1/configs/defaults gives each server setting's source (DEFAULT,
 * CONFIG_FILE via --config, ENVIRONMENT via LOGSTORE_*, COMMAND_LINE via
 * --set) and which synonym set each broker default; /v1/log-dirs has Kafka's
 * DescribeLogDirs shape with sizes equal to the partitions' and the files'.
 * One server (log.retention.hours=24) serves the group; the sources test
 * starts its own.  (Topic configs: test_configs_api.c.)
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

/* The group server runs with a broker default set, for the sources. */
#define GROUP_SETTINGS ((const char *const[]){"log.retention.hours=24", NULL})
#include "configs_util.h"
#include "group_server.h"
#include "harness.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- /v1/configs/defaults ------------------------------------------------------- */

/* Asserts an entry of /v1/configs/defaults: value, source and the synonym
 * that set it (set_by NULL: none, as for every server setting). */
static void expect_setting(json_t *arr, const char *name, const char *value, const char *source,
                           const char *set_by)
{
    json_t *e = entry(arr, name);
    if (!e || strcmp(estr(e, "value"), value) || strcmp(estr(e, "source"), source))
        fprintf(stderr, "# %s = %s from %s, expected %s from %s\n", name, e ? estr(e, "value") : "?",
                e ? estr(e, "source") : "?", value, source);
    assert_non_null(e);
    assert_string_equal(estr(e, "value"), value);
    assert_string_equal(estr(e, "source"), source);
    if (set_by)
        assert_string_equal(estr(e, "set_by"), set_by);
    else
        assert_null(json_object_get(e, "set_by"));
}

static void test_defaults_command_line_and_default(void **state)
{
    (void)state;
    ls_resp r;
    assert_int_equal(ls_get(S, "/v1/configs/defaults", &r), 0);
    assert_int_equal(r.status, 200);
    json_t *server = json_object_get(r.json, "server");
    json_t *topic = json_object_get(r.json, "topic_defaults");
    assert_true(json_is_array(server) && json_is_array(topic));
    expect_setting(server, "listeners", "http://127.0.0.1:0", "COMMAND_LINE", NULL);
    expect_setting(server, "log.dirs", S->dir, "COMMAND_LINE", NULL);
    expect_setting(server, "log.retention.hours", "24", "COMMAND_LINE", NULL);
    expect_setting(server, "http.threads", "4", "DEFAULT", NULL);
    expect_setting(server, "http.max.request.bytes", "16777216", "DEFAULT", NULL);
    expect_setting(server, "auth.tokens.file", "", "DEFAULT", NULL);
    expect_setting(topic, "retention.ms", "86400000", "STATIC_BROKER_CONFIG", "log.retention.hours");
    expect_setting(topic, "segment.bytes", "1073741824", "DEFAULT_CONFIG", NULL);
    expect_setting(topic, "cleanup.policy", "delete", "DEFAULT_CONFIG", NULL);
    ls_resp_free(&r);
}

static void test_defaults_file_and_environment(void **state)
{
    (void)state;
    char tmpl[] = "/tmp/logstore-cfgfile-XXXXXX";
    assert_non_null(mkdtemp(tmpl));
    char props[300];
    snprintf(props, sizeof props, "%s/server.properties", tmpl);
    assert_int_equal(ls_write_file(props, "# a Kafka-style server.properties\n"
                                          "http.threads=2\n"
                                          "num.partitions: 3\n"
                                          "http.max.waiters 777\n"
                                          "log.retention.ms=3600000\n"
                                          "log.segment.bytes = 2097152\n"
                                          "! another comment\n"
                                          "broker.id=7\n"),
                     0);
    /* the environment beats the file, --set beats both; log.retention.ms
     * (file) beats log.retention.hours (--set): Kafka's synonym order */
    setenv("LOGSTORE_HTTP_THREADS", "3", 1);
    setenv("LOGSTORE_LOG_ROLL_HOURS", "2", 1);
    const char *const extra[] = {"num.partitions=2", "log.retention.hours=5", NULL};
    ls_opts o = {.extra = extra, .config_file = props};
    ls_server s;
    int rc = ls_start_opts(&s, &o);
    unsetenv("LOGSTORE_HTTP_THREADS");
    unsetenv("LOGSTORE_LOG_ROLL_HOURS");
    assert_int_equal(rc, 0);

    ls_resp r;
    assert_int_equal(ls_get(&s, "/v1/configs/defaults", &r), 0);
    assert_int_equal(r.status, 200);
    json_t *server = json_object_get(r.json, "server");
    json_t *topic = json_object_get(r.json, "topic_defaults");
    expect_setting(server, "http.threads", "3", "ENVIRONMENT", NULL);
    expect_setting(server, "num.partitions", "2", "COMMAND_LINE", NULL);
    expect_setting(server, "http.max.waiters", "777", "CONFIG_FILE", NULL);
    expect_setting(server, "http.max.connections", "10000", "DEFAULT", NULL);
    expect_setting(server, "log.retention.ms", "3600000", "CONFIG_FILE", NULL);
    expect_setting(server, "log.segment.bytes", "2097152", "CONFIG_FILE", NULL);
    expect_setting(server, "log.roll.hours", "2", "ENVIRONMENT", NULL);
    expect_setting(server, "log.retention.hours", "5", "COMMAND_LINE", NULL);
    expect_setting(topic, "retention.ms", "3600000", "STATIC_BROKER_CONFIG", "log.retention.ms");
    expect_setting(topic, "segment.bytes", "2097152", "STATIC_BROKER_CONFIG", "log.segment.bytes");
    expect_setting(topic, "segment.ms", "7200000", "STATIC_BROKER_CONFIG", "log.roll.hours");
    ls_resp_free(&r);

    /* a topic made now sees those defaults as STATIC_BROKER_CONFIG */
    assert_int_equal(ls_send_json(&s, "POST", "/v1/topics", "{\"name\":\"fromfile\"}", &r), 0);
    assert_int_equal(r.status, 201);
    assert_int_equal(ls_jint(&r, "partition_count"), 2);
    ls_resp_free(&r);
    json_t *arr = listing(&s, "fromfile");
    expect(arr, "retention.ms", "3600000", "STATIC_BROKER_CONFIG");
    expect(arr, "segment.bytes", "2097152", "STATIC_BROKER_CONFIG");
    expect(arr, "segment.ms", "7200000", "STATIC_BROKER_CONFIG");
    expect(arr, "retention.bytes", "-1", "DEFAULT_CONFIG");
    json_decref(arr);
    /* unknown names in the file are logged and skipped (Kafka files reuse) */
    assert_true(ls_file_contains(s.log_path, "ignoring unknown setting 'broker.id' from the config file"));
    assert_int_equal(ls_stop(&s), 0);
    ls_cleanup(&s);
    unlink(props);
    rmdir(tmpl);
}

/* ---- /v1/log-dirs ----------------------------------------------------------------- */

static void test_log_dirs(void **state)
{
    (void)state;
    assert_int_equal(ls_create_topic(S, "ld", 2, NULL), 201);
    assert_int_equal(ls_create_topic(S, "ld-gone", 1, NULL), 201);
    append_values(S, "ld", 3, 1000);
    ls_resp r;
    assert_int_equal(ls_send_json(S, "POST", "/v1/topics/ld/partitions/1/records",
                                  "{\"records\":[{\"value\":\"x\"}]}", &r), 0);
    assert_int_equal(r.status, 200);
    ls_resp_free(&r);
    assert_int_equal(ls_delete(S, "/v1/topics/ld-gone", &r), 0);
    assert_int_equal(r.status, 204);
    ls_resp_free(&r);

    assert_int_equal(ls_get(S, "/v1/log-dirs", &r), 0);
    assert_int_equal(r.status, 200);
    json_t *dirs = json_object_get(r.json, "log_dirs");
    assert_true(json_is_array(dirs));
    assert_int_equal(json_array_size(dirs), 1);
    json_t *d = json_array_get(dirs, 0);
    assert_string_equal(estr(d, "log_dir"), S->dir);
    json_t *total = json_object_get(d, "total_bytes"), *usable = json_object_get(d, "usable_bytes");
    assert_true(json_is_integer(total) && json_is_integer(usable));
    assert_true(json_integer_value(total) > 0);
    assert_true(json_integer_value(usable) >= 0);
    assert_true(json_integer_value(usable) <= json_integer_value(total));
    assert_true(json_is_null(json_object_get(d, "error")));

    json_t *topics = json_object_get(d, "topics");
    assert_true(json_is_array(topics));
    long long sum = 0;
    bool found = false;
    size_t i;
    json_t *t;
    json_array_foreach(topics, i, t) {
        const char *name = estr(t, "name");
        assert_non_null(name);
        assert_string_not_equal(name, "ld-gone");
        json_t *parts = json_object_get(t, "partitions");
        assert_true(json_is_array(parts));
        size_t k;
        json_t *p;
        json_array_foreach(parts, k, p) {
            int id = (int)json_integer_value(json_object_get(p, "partition"));
            long long size = json_integer_value(json_object_get(p, "size_bytes"));
            assert_true(json_is_integer(json_object_get(p, "size_bytes")));
            sum += size;
            /* equal to the partition's own report and to its files */
            assert_int_equal(size, ls_partition_field(S, name, id, "size_bytes"));
            if (!strcmp(name, "ld")) {
                char file[512];
                snprintf(file, sizeof file, "%.255s/ld-%d/00000000000000000000.log", S->dir, id);
                assert_int_equal(size, ls_file_size(file));
                assert_true(size > 0);
            }
        }
        if (!strcmp(name, "ld")) {
            found = true;
            assert_int_equal(json_array_size(parts), 2);
        }
    }
    assert_true(found);
    assert_int_equal(json_integer_value(json_object_get(d, "size_bytes")), sum);
    ls_resp_free(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults_command_line_and_default),
        cmocka_unit_test(test_log_dirs),
        cmocka_unit_test(test_defaults_file_and_environment),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
