/*
 * test_stream.c - api_stream's refill bound, without HTTP: each refill
 * renders about 64 KiB of records (README: one slow client costs the JSON
 * of 64 KiB, not of a whole fetch), going on from the record where the last
 * one stopped, so every record comes exactly once, in order; at the end of
 * the log an NDJSON stream asks to park.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "api_stream.h"
#include "partition_fixture.h"

#include <sys/types.h>

#define NREC 1024
#define VLEN 1000

static void test_refill_is_bounded_and_resumes(void **state)
{
    fixture *f = *state;
    eng_partition *p = open_part(f, true, 0, NULL);
    for (int64_t first = 0; first < NREC; first += MAX_RECS)
        append_ok(p, first, MAX_RECS, T0, VLEN);
    api_stream_opts o = {.format = API_STREAM_NDJSON, .start = 0, .max_records = INT64_MAX,
                         .until_timestamp = INT64_MAX, .base64 = true, .heartbeat_ms = 1000};
    api_stream *s = api_stream_new(p, NULL, &o);
    assert_non_null(s);
    size_t cap = 4u << 20;
    char *buf = malloc(cap);
    assert_non_null(buf);
    int64_t lines = 0, calls = 0;
    for (;;) {
        ssize_t n = api_stream_produce(s, buf, cap);
        if (n == API_STREAM_PARK)
            break;
        assert_true(n > 0);
        calls++;
        /* One refill: 64 KiB and at most the record that crossed it. */
        if ((size_t)n > (64u << 10) + 2 * VLEN)
            fail_msg("refill %lld rendered %zd bytes", (long long)calls, n);
        for (ssize_t i = 0; i < n; i++) {
            if (buf[i] != '\n')
                continue;
            char want[40];
            int wl = snprintf(want, sizeof want, "\"offset\":%lld", (long long)lines);
            ssize_t start = i;
            while (start > 0 && buf[start - 1] != '\n')
                start--;
            assert_non_null(memmem(buf + start, (size_t)(i - start), want, (size_t)wl));
            lines++;
        }
    }
    assert_int_equal(lines, NREC);
    assert_true(calls >= 16); /* about 1.4 MB of base64 JSON at 64 KiB a refill */
    free(buf);
    api_stream_free(s);
    eng_partition_close(p);
    eng_partition_unref(p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_refill_is_bounded_and_resumes, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
