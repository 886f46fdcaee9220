/*
 * test_json_arena.c - the per-thread JSON arena (api_json_arena.h) and
 * api_resp_freeze.
 *
 *   - values made in a scope work like any others and are gone with it;
 *     values made before a scope and freed inside it, or made inside and
 *     stored into outside containers that are released inside, are freed
 *     normally (LeakSanitizer checks the test);
 *   - a page larger than a chunk, nested scopes, many scopes in a row
 *     (the thread keeps one chunk, not one per page);
 *   - threads that used the arena and exit return their chunks;
 *   - api_resp_freeze turns a response's JSON into the same compact bytes
 *     json_dumps gives, whatever its size hint.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "api_json_arena.h"
#include "api_request.h"

#include <jansson.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* A page like a read's: n records with a 100-byte value each. */
static json_t *page(int n)
{
    char value[101];
    memset(value, 'v', 100);
    value[100] = 0;
    json_t *recs = json_array();
    for (int i = 0; i < n; i++)
        json_array_append_new(recs, json_pack("{s:I,s:s,s:n,s:[]}", "offset", (json_int_t)i,
                                              "value", value, "key", "headers"));
    return json_pack("{s:o,s:I}", "records", recs, "next_offset", (json_int_t)n);
}

static void test_scope_values(void **state)
{
    (void)state;
    json_t *outside = json_array(); /* made by malloc */
    json_t *kept = json_string("made outside, freed inside");
    char *expect;
    {
        json_t *p = page(50);
        expect = json_dumps(p, JSON_COMPACT); /* outside a scope: malloc'd */
        json_decref(p);
    }
    for (int round = 0; round < 200; round++) {
        api_json_arena_begin();
        json_t *p = page(50);
        /* json_dumpb, not json_dumps: a string json_dumps returns inside a
         * scope is arena memory that libc's free() must never see. */
        static char buf[16384];
        size_t n = json_dumpb(p, buf, sizeof buf, JSON_COMPACT);
        assert_int_equal(n, strlen(expect));
        assert_memory_equal(buf, expect, n);
        json_array_append_new(outside, json_integer(round)); /* grows in the arena */
        json_decref(p);
        json_array_clear(outside); /* frees the arena's table and values */
        if (round == 100) {
            json_decref(kept); /* made outside: really freed */
            kept = NULL;
        }
        api_json_arena_end();
    }
    json_array_append_new(outside, json_integer(1)); /* back on malloc */
    assert_int_equal(json_array_size(outside), 1);
    json_decref(outside);
    free(expect);
}

static void test_large_and_nested(void **state)
{
    (void)state;
    api_json_arena_begin();
    api_json_arena_begin(); /* nested: the outer scope decides */
    json_t *big = page(20000); /* a few MB: several chunks */
    api_json_arena_end();
    assert_int_equal(json_array_size(json_object_get(big, "records")), 20000);
    json_t *last = json_array_get(json_object_get(big, "records"), 19999);
    assert_int_equal(json_integer_value(json_object_get(last, "offset")), 19999);
    json_t *huge = json_stringn_nocheck("x", 1);
    char *blob = malloc(3 << 20);
    memset(blob, 'y', 3 << 20);
    json_t *s = json_stringn(blob, 3 << 20); /* one allocation above a chunk */
    free(blob);
    assert_non_null(s);
    assert_int_equal(json_string_length(s), 3 << 20);
    json_decref(s);
    json_decref(huge);
    json_decref(big);
    api_json_arena_end();
}

static void *thread_main(void *arg)
{
    (void)arg;
    for (int i = 0; i < 20; i++) {
        api_json_arena_begin();
        json_t *p = page(2000);
        json_decref(p);
        api_json_arena_end();
    }
    return NULL; /* the key's destructor returns the kept chunk */
}

static void test_threads(void **state)
{
    (void)state;
    pthread_t t[4];
    for (int i = 0; i < 4; i++)
        assert_int_equal(pthread_create(&t[i], NULL, thread_main, NULL), 0);
    for (int i = 0; i < 4; i++)
        pthread_join(t[i], NULL);
}

static void test_freeze(void **state)
{
    (void)state;
    static const size_t hints[] = {0, 1, 64, 1 << 20};
    for (size_t k = 0; k < sizeof hints / sizeof *hints; k++) {
        json_t *p = page(300);
        char *expect = json_dumps(p, JSON_COMPACT);
        api_json_arena_begin();
        api_response resp = {0};
        api_resp_json(&resp, 200, page(300));
        assert_int_equal(api_resp_freeze(&resp, hints[k]), 0);
        api_json_arena_end();
        assert_null(resp.json);
        assert_int_equal(resp.raw_len, strlen(expect));
        assert_memory_equal(resp.raw, expect, resp.raw_len);
        api_response_clear(&resp);
        free(expect);
        json_decref(p);
    }
    api_response none = {.status = 204};
    assert_int_equal(api_resp_freeze(&none, 0), 0);
    assert_null(none.raw);
}

int main(void)
{
    api_json_arena_install();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_scope_values),
        cmocka_unit_test(test_large_and_nested),
        cmocka_unit_test(test_threads),
        cmocka_unit_test(test_freeze),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
