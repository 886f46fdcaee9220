/*
 * test_checkpoint.c - Kafka's offset checkpoint files (kafka-format.md
 * §11.1-11.2): written durably in the exact text format, read back, and read
 * strictly: a wrong version, an entry count that disagrees with the lines,
 * garbage or missing fields are ENG_ECORRUPT (to be treated as absent); an
 * empty file holds no entries; a missing file is -ENOENT.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "eng_checkpoint.h"
#include "eng_error.h"
#include "support.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct fixture {
    char *dir;
    char path[512];
} fixture;

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    if (!f || !(f->dir = ts_tmpdir()))
        return -1;
    snprintf(f->path, sizeof f->path, "%s/recovery-point-offset-checkpoint", f->dir);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    ts_rmtree(f->dir);
    free(f->dir);
    free(f);
    return 0;
}

static void write_text(const char *path, const char *text)
{
    FILE *fp = fopen(path, "wb");
    assert_non_null(fp);
    fputs(text, fp);
    assert_int_equal(fclose(fp), 0);
}

static void test_write_exact_bytes_and_read_back(void **state)
{
    fixture *f = *state;
    eng_ckpt_entry e[] = {{.topic = "orders", .partition = 0, .offset = 60},
                          {.topic = "orders", .partition = 1, .offset = 0}};
    assert_int_equal(eng_checkpoint_write(f->path, e, 2), 0);
    uint8_t *raw;
    size_t len;
    assert_int_equal(ts_read_file(f->path, &raw, &len), 0);
    static const char want[] = "0\n2\norders 0 60\norders 1 0\n";
    assert_int_equal(len, strlen(want));
    assert_memory_equal(raw, want, len);
    free(raw);
    /* No temporary file is left behind. */
    char tmp[600];
    snprintf(tmp, sizeof tmp, "%s.tmp", f->path);
    assert_int_equal(ts_file_size(tmp), -1);

    eng_ckpt c;
    assert_int_equal(eng_checkpoint_read(f->path, &c), 0);
    assert_int_equal(c.n, 2);
    assert_string_equal(c.entries[0].topic, "orders");
    assert_int_equal(c.entries[0].partition, 0);
    assert_int_equal(c.entries[0].offset, 60);
    assert_int_equal(c.entries[1].partition, 1);
    assert_int_equal(c.entries[1].offset, 0);
    assert_int_equal(eng_checkpoint_find(&c, "orders", 0, -1), 60);
    assert_int_equal(eng_checkpoint_find(&c, "orders", 1, -1), 0);
    assert_int_equal(eng_checkpoint_find(&c, "orders", 2, -1), -1);
    assert_int_equal(eng_checkpoint_find(&c, "order", 0, 7), 7);
    assert_int_equal(eng_checkpoint_find(NULL, "orders", 0, 9), 9);
    eng_checkpoint_free(&c);
    assert_int_equal(c.n, 0);
    assert_null(c.entries);
    eng_checkpoint_free(NULL);

    /* Rewriting replaces the file; zero entries is "0\n0\n". */
    assert_int_equal(eng_checkpoint_write(f->path, NULL, 0), 0);
    assert_int_equal(ts_read_file(f->path, &raw, &len), 0);
    assert_int_equal(len, 4);
    assert_memory_equal(raw, "0\n0\n", 4);
    free(raw);
    assert_int_equal(eng_checkpoint_read(f->path, &c), 0);
    assert_int_equal(c.n, 0);
    eng_checkpoint_free(&c);
}

static void test_many_entries_and_large_offsets(void **state)
{
    fixture *f = *state;
    enum { N = 500 };
    static eng_ckpt_entry e[N];
    static char names[N][64];
    for (int i = 0; i < N; i++) {
        snprintf(names[i], sizeof names[i], "topic.%03d_x-y", i % 50);
        e[i] = (eng_ckpt_entry){.topic = names[i], .partition = i / 50,
                                .offset = (int64_t)i * 1000000007LL};
    }
    e[N - 1].offset = INT64_MAX;
    e[N - 2].partition = INT32_MAX;
    assert_int_equal(eng_checkpoint_write(f->path, e, N), 0);
    eng_ckpt c;
    assert_int_equal(eng_checkpoint_read(f->path, &c), 0);
    assert_int_equal(c.n, N);
    for (int i = 0; i < N; i++) {
        assert_string_equal(c.entries[i].topic, e[i].topic);
        assert_int_equal(c.entries[i].partition, e[i].partition);
        assert_true(c.entries[i].offset == e[i].offset);
    }
    eng_checkpoint_free(&c);
}

static void test_reads_kafka_variants(void **state)
{
    fixture *f = *state;
    eng_ckpt c;
    /* An empty file: no entries (Kafka's reader does the same). */
    write_text(f->path, "");
    assert_int_equal(eng_checkpoint_read(f->path, &c), 0);
    assert_int_equal(c.n, 0);
    eng_checkpoint_free(&c);
    /* Fields separated by any run of whitespace. */
    write_text(f->path, "0\n2\norders  3\t17\nlogs 0 5\n");
    assert_int_equal(eng_checkpoint_read(f->path, &c), 0);
    assert_int_equal(c.n, 2);
    assert_int_equal(eng_checkpoint_find(&c, "orders", 3, -1), 17);
    assert_int_equal(eng_checkpoint_find(&c, "logs", 0, -1), 5);
    eng_checkpoint_free(&c);
    /* CRLF line ends, and a last line without its newline: Kafka reads
     * them with readLine(); refused, the log start offset was forgotten. */
    static const char *const variants[] = {"0\r\n2\r\norders 3 17\r\nlogs 0 5\r\n",
                                           "0\n2\norders 3 17\nlogs 0 5",
                                           "0\r\n2\r\norders 3 17\r\nlogs 0 5"};
    for (size_t i = 0; i < sizeof variants / sizeof variants[0]; i++) {
        write_text(f->path, variants[i]);
        if (eng_checkpoint_read(f->path, &c))
            fail_msg("variant %zu refused", i);
        assert_int_equal(c.n, 2);
        assert_int_equal(eng_checkpoint_find(&c, "orders", 3, -1), 17);
        assert_int_equal(eng_checkpoint_find(&c, "logs", 0, -1), 5);
        eng_checkpoint_free(&c);
    }
    /* Entries as short as they can be: the count's bound against the file's
     * size must not refuse them. */
    write_text(f->path, "0\n3\na 0 0\nb 1 2\nc 3 4");
    assert_int_equal(eng_checkpoint_read(f->path, &c), 0);
    assert_int_equal(c.n, 3);
    assert_int_equal(eng_checkpoint_find(&c, "c", 3, -1), 4);
    eng_checkpoint_free(&c);
    /* A missing file. */
    char missing[600];
    snprintf(missing, sizeof missing, "%s/nope", f->dir);
    assert_int_equal(eng_checkpoint_read(missing, &c), -ENOENT);
}

static void test_rejects_malformed(void **state)
{
    fixture *f = *state;
    static const char *const bad[] = {
        "1\n1\norders 0 60\n",             /* wrong version */
        "-1\n0\n",                         /* wrong version */
        "0\n2\norders 0 60\n",             /* fewer lines than the count */
        "0\n1\norders 0 60\norders 1 5\n", /* more lines than the count */
        "0\n0\norders 0 60\n",             /* more lines than the count */
        "0\n-1\n",                         /* negative count */
        "0\n9223372036854775807\n",        /* a count no file could hold */
        "0\n9999999\n",                    /* a count this file cannot hold (it sized a
                                            * 240 MB allocation; found by fuzz_startup) */
        "0\n2\na 0 0\n",                   /* two entries claimed, room for one */
        "0\n1\norders 0\n",                /* missing offset */
        "0\r\n1\r\norders 0\r\n",          /* missing offset, CRLF */
        "0\n1\norders 0 6\r0\n",           /* a CR inside a line */
        "0\n1\norders\n",                  /* missing partition and offset */
        "0\n1\n\n",                        /* empty entry line */
        "0\n1\norders x 60\n",             /* partition not a number */
        "0\n1\norders 0 6x\n",             /* offset not a number */
        "0\n1\norders 1-5\n",              /* partition "1-5", offset missing */
        "0\n1\norders -1 60\n",            /* negative partition */
        "0\n1\norders 2147483648 60\n",    /* partition beyond int32 */
        "0\n1\norders 0 99999999999999999999\n", /* offset beyond int64 */
        "0\n1\norders 0 60 7\n",           /* an extra field */
        "0 1\norders 0 60\n",              /* version and count on one line */
        "0\n",                             /* count missing */
        "zero\n0\n",                       /* garbage */
        "\x01\x02\x03\x04",                /* binary garbage */
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        write_text(f->path, bad[i]);
        eng_ckpt c = {.entries = (eng_ckpt_entry *)0x1, .n = 12345}; /* untouched on failure */
        int rc = eng_checkpoint_read(f->path, &c);
        if (rc != ENG_ECORRUPT)
            fail_msg("case %zu (%s) read as %d", i, bad[i], rc);
        assert_int_equal(c.n, 12345);
    }
    /* A NUL byte inside the file is refused too, also after whole lines. */
    static const struct {
        const char *text;
        size_t len;
    } nul[] = {{"0\n1\nor\0ers 0 60\n", 16}, {"0\n1\norders 0 60\n\0junk", 22}};
    for (size_t i = 0; i < sizeof nul / sizeof nul[0]; i++) {
        FILE *fp = fopen(f->path, "wb");
        assert_non_null(fp);
        assert_int_equal(fwrite(nul[i].text, 1, nul[i].len, fp), nul[i].len);
        assert_int_equal(fclose(fp), 0);
        eng_ckpt c;
        if (eng_checkpoint_read(f->path, &c) != ENG_ECORRUPT)
            fail_msg("NUL case %zu was not refused", i);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_write_exact_bytes_and_read_back, setup, teardown),
        cmocka_unit_test_setup_teardown(test_many_entries_and_large_offsets, setup, teardown),
        cmocka_unit_test_setup_teardown(test_reads_kafka_variants, setup, teardown),
        cmocka_unit_test_setup_teardown(test_rejects_malformed, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
