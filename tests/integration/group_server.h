/*
 * group_server.h - one server for a whole cmocka group, S, started by
 * group_setup (with GROUP_SETTINGS, a NULL-terminated array of --set
 * "name=value", when the file defines it before the include) and stopped by
 * group_teardown, and the assertions the suites that share one use.
 *
 * Include after cmocka.h, in one test file.
 */
#ifndef GROUP_SERVER_H
#define GROUP_SERVER_H

#include "harness.h"

#include <stddef.h>

#ifndef GROUP_SETTINGS
#define GROUP_SETTINGS NULL
#endif

static ls_server g_srv;
static ls_server *S = &g_srv;

#define CHECK_ERR(r, st, code) assert_int_equal(ls_check_error(&(r), (st), (code)), 0)

static inline int group_setup(void **state)
{
    (void)state;
    return ls_start(S, GROUP_SETTINGS);
}

static inline int group_teardown(void **state)
{
    (void)state;
    ls_stop(S);
    ls_cleanup(S);
    return 0;
}

/* Asserts the data dir listing still equals before (ls_dir_listing); frees it. */
static inline void assert_same_dir(char *before)
{
    assert_int_equal(ls_dir_same(S->dir, before), 0);
}

/* DELETE path: 204 with no body. */
static inline void delete_ok(const char *path)
{
    ls_resp r;
    assert_int_equal(ls_delete(S, path, &r), 0);
    assert_int_equal(r.status, 204);
    assert_int_equal(r.len, 0);
    ls_resp_free(&r);
}

/* Number of topics GET /v1/topics lists. */
static inline size_t topic_count(void)
{
    ls_resp r;
    assert_int_equal(ls_get(S, "/v1/topics", &r), 0);
    assert_int_equal(r.status, 200);
    size_t n = json_array_size(ls_jget(&r, "topics"));
    ls_resp_free(&r);
    return n;
}

#endif
