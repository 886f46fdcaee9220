/*
 * test_properties.c - the --config reader against java.util.Properties.load
 * (service/svc_properties.h lists the rules): one test per rule, each text
 * paired with the (key, value) list Java's load gives for it.
 *
 *   - separators: the first unescaped '=', ':' or whitespace, whitespace
 *     around it, one '='/':' after whitespace; a key alone; the value keeps
 *     later separators and its trailing whitespace;
 *   - comments (# and !, after leading whitespace) and blank lines; a
 *     comment ending in a backslash does not continue; Java 9's rule for a
 *     '#' after a continuation;
 *   - continuations: odd vs even runs of trailing backslashes (an escaped
 *     backslash at the end, log.dirs=/x\\, used to swallow the next line),
 *     the next line's leading whitespace dropped, a continuation line that
 *     starts with '#' is data, a continuation at end of file still counts
 *     (it used to be dropped);
 *   - escapes in keys and values: \t \n \r \f, \uXXXX as UTF-8 (a pair
 *     joined), any other escaped character stands for itself, malformed
 *     \uXXXX and NUL are errors;
 *   - line ends \n, \r\n and \r; lines far past the old 8191-byte fgets
 *     buffer, which split a commented-out setting and applied its tail;
 *   - a directory, a missing file and a read error are errors naming the
 *     path, a pipe is read.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "svc_properties.h"
#include "support.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Every entry as "key=value;" with the line number: "key=value@line;". */
typedef struct got {
    char text[1 << 18];
    int stop_after; /* entries to accept before returning 7 (0: all) */
    int n;
} got;

static int collect(void *ctx, const char *key, const char *value, int lineno)
{
    got *g = ctx;
    size_t used = strlen(g->text);
    snprintf(g->text + used, sizeof g->text - used, "%s=%s@%d;", key, value, lineno);
    g->n++;
    return g->stop_after && g->n == g->stop_after ? 7 : 0;
}

/* Parses text (n bytes, may hold NULs) and returns what was collected. */
static int parse_n(const char *text, size_t n, got *g, char *err, size_t errlen)
{
    memset(g, 0, sizeof *g);
    FILE *f = fmemopen((void *)text, n, "r");
    assert_non_null(f);
    err[0] = 0;
    int rc = svc_properties_parse(f, "t.properties", collect, g, err, errlen);
    assert_int_equal(fclose(f), 0);
    return rc;
}

static void expect(const char *text, const char *want)
{
    static got g;
    char err[300];
    if (parse_n(text, strlen(text), &g, err, sizeof err))
        fail_msg("parse of '%s' failed: %s", text, err);
    if (strcmp(g.text, want))
        fail_msg("for '%s'\n  got  '%s'\n  want '%s'", text, g.text, want);
}

static void expect_error(const char *text, size_t n, const char *msg)
{
    static got g;
    char err[300];
    assert_int_equal(parse_n(text, n, &g, err, sizeof err), -1);
    if (!strstr(err, msg))
        fail_msg("error '%s' lacks '%s'", err, msg);
}

static void test_separators(void **state)
{
    (void)state;
    expect("a=1\n", "a=1@1;");
    expect("a:1\n", "a=1@1;");
    expect("a 1\n", "a=1@1;");
    expect("a\t1\n", "a=1@1;");
    expect("a\f1\n", "a=1@1;");
    expect("a = 1\n", "a=1@1;");
    expect("a : 1\n", "a=1@1;");
    expect("a   =   1\n", "a=1@1;");
    /* Only one '=' or ':' after whitespace is a separator; the next is data. */
    expect("a = = 1\n", "a== 1@1;");
    expect("a==1\n", "a==1@1;");
    expect("a=b=c:d\n", "a=b=c:d@1;");
    expect("a:=1\n", "a==1@1;");
    /* Trailing whitespace stays in the value (the caller trims, as Kafka). */
    expect("a=1  \n", "a=1  @1;");
    expect("key\n", "key=@1;");
    expect("key=\n", "key=@1;");
    expect("=v\n", "=v@1;");
    expect("   indented = yes\n", "indented=yes@1;");
    expect("a=1\na=2\n", "a=1@1;a=2@2;"); /* the caller keeps the last */
}

static void test_comments_and_blank_lines(void **state)
{
    (void)state;
    expect("# c\n! c\na=1\n", "a=1@3;");
    expect("   # indented comment\n\t! too\na=1\n", "a=1@3;");
    expect("\n\n   \n\t\na=1\n\n", "a=1@5;");
    /* Not a comment: '#' after the key starts. */
    expect("a=#1\n", "a=#1@1;");
    expect("a#b=1\n", "a#b=1@1;");
    /* A comment line never continues, whatever it ends with. */
    expect("# c \\\na=1\n", "a=1@2;");
    expect("! c \\\\\\\nb=2\n", "b=2@2;");
    /* Java 9 and later: after a continuation of a line that was only a
     * backslash, nothing precedes the '!', so it is a comment. */
    expect("\\\n!x=1\na=2\n", "a=2@3;");
    expect("\\\n  x=1\n", "x=1@1;");
}

static void test_continuations(void **state)
{
    (void)state;
    expect("a=1\\\n2\n", "a=12@1;");
    /* The continuation's leading whitespace goes; the first line's stays. */
    expect("a=x \\\n     y\n", "a=x y@1;");
    expect("log.retention.hours=\\\n   5\n", "log.retention.hours=5@1;");
    expect("log.roll.ms = 36\\\n00000\n", "log.roll.ms=3600000@1;");
    /* An even run of backslashes is escaped backslashes, not a
     * continuation: the next line is its own entry. */
    expect("log.dirs=/x\\\\\nlog.level=WARN\n", "log.dirs=/x\\@1;log.level=WARN@2;");
    expect("a=\\\\\\\\\nb=2\n", "a=\\\\@1;b=2@2;");
    /* Odd: continues (three backslashes = one escaped + a continuation). */
    expect("a=x\\\\\\\ny\n", "a=x\\y@1;");
    /* A continuation line starting with '#' is data, not a comment. */
    expect("a=1\\\n#2\n", "a=1#2@1;");
    /* The key itself may continue. */
    expect("lo\\\n  g.level=INFO\n", "log.level=INFO@1;");
    /* A blank line after a continuation ends the entry. */
    expect("a=1\\\n\nb=2\n", "a=1@1;b=2@3;");
    expect("a=1\\\n   \nb=2\n", "a=1@1;b=2@3;");
    /* Several in a row. */
    expect("a=1,\\\n  2,\\\n  3\n", "a=1,2,3@1;");
}

static void test_end_of_file(void **state)
{
    (void)state;
    expect("a=1", "a=1@1;");
    expect("h=3\nr=1\\", "h=3@1;r=1@2;");
    expect("r=1\\\n", "r=1@1;");
    expect("r=1\\\n  ", "r=1@1;");
    expect("r=1\\\\", "r=1\\@1;");
    expect("# only a comment", "");
    expect("", "");
    expect("\n\n", "");
}

static void test_escapes(void **state)
{
    (void)state;
    expect("a=x\\:8080\n", "a=x:8080@1;");
    expect("a=\\=\\:\\#\\!\n", "a==:#!@1;");
    expect("a\\=b=c\n", "a=b=c@1;");       /* key "a=b" */
    expect("a\\:b:c\n", "a:b=c@1;");
    expect("a\\ b c\n", "a b=c@1;");       /* an escaped space stays in the key */
    expect("a=\\ lead\n", "a= lead@1;");   /* and a value's escaped leading space stays */
    expect("a=\\t\\n\\r\\f\n", "a=\t\n\r\f@1;");
    /* Any other escaped character is itself: the backslash goes. */
    expect("a=\\q\\/\\z\n", "a=q/z@1;");
    expect("a=C:\\\\dir\\\\file\n", "a=C:\\dir\\file@1;");
    /* \uXXXX in either case, as UTF-8 of one, two, three and four bytes. */
    expect("a=\\u0041\\u00e9\\u20AC\n", "a=A\xc3\xa9\xe2\x82\xac@1;");
    expect("a=\\ud83d\\ude00\n", "a=\xf0\x9f\x98\x80@1;");
    expect("a=\\ud83dx\n", "a=?x@1;"); /* a lone surrogate: Java writes '?' */
    expect("a=\\udc00x\n", "a=?x@1;"); /* a lone low surrogate too */
    expect("a=\\ud83d\\u0041\n", "a=?A@1;"); /* a high one before no low one */
    /* The last pair, U+10FFFF: \udfff is still a low surrogate. */
    expect("a=\\udbff\\udfff\n", "a=\xf4\x8f\xbf\xbf@1;");
    expect("\\u006cog.level=WARN\n", "log.level=WARN@1;");
    expect("log.dirs=/tmp/p\\u0064\n", "log.dirs=/tmp/pd@1;");
    /* Bytes pass through as they are (UTF-8 stays UTF-8). */
    expect("a=d\xc3\xa4t\xc3\xa4\n", "a=d\xc3\xa4t\xc3\xa4@1;");
    expect_error("a=\\u00\n", 7, "t.properties:1: malformed \\uxxxx encoding in the value");
    expect_error("a=\\u00zz\n", 9, "malformed \\uxxxx");
    expect_error("\\uXYZW=1\n", 9, "malformed \\uxxxx encoding in the key");
    expect_error("a=\\u0000\n", 9, "NUL");
    expect_error("a=x\0y\n", 6, "t.properties:1: the value holds a NUL byte");
}

static void test_line_ends(void **state)
{
    (void)state;
    expect("a=1\r\nb=2\r\n", "a=1@1;b=2@2;");
    expect("a=1\rb=2\r", "a=1@1;b=2@2;");
    expect("a=1\\\r\n  2\r\nb=3", "a=12@1;b=3@3;");
    expect("a=1\\\r  2\rb=3", "a=12@1;b=3@3;");
    expect("# c\r\n\r\na=1", "a=1@3;");
}

/* Lines longer than the old 8191-byte buffer: a commented-out setting whose
 * tail used to be parsed as a line of its own, and a value that long. */
static void test_long_lines(void **state)
{
    (void)state;
    size_t pad = 100000;
    char *text = malloc(2 * pad + 200);
    assert_non_null(text);
    char *p = text;
    *p++ = '#';
    memset(p, 'x', pad);
    p += pad;
    p += sprintf(p, "log.level=DEBUG\nv=");
    memset(p, 'y', pad);
    p += pad;
    p += sprintf(p, "\nlog.level=WARN\n");
    static got g;
    char err[300];
    assert_int_equal(parse_n(text, (size_t)(p - text), &g, err, sizeof err), 0);
    assert_int_equal(g.n, 2);
    assert_int_equal(strncmp(g.text, "v=yyy", 5), 0);
    assert_non_null(strstr(g.text, "y@2;log.level=WARN@3;"));
    assert_null(strstr(g.text, "DEBUG"));
    assert_int_equal(strlen(g.text), 2 + pad + strlen("@2;log.level=WARN@3;"));
    free(text);
}

static void test_callback_stops(void **state)
{
    (void)state;
    static got g;
    memset(&g, 0, sizeof g);
    g.stop_after = 2;
    const char *text = "a=1\nb=2\nc=3\n";
    FILE *f = fmemopen((void *)text, strlen(text), "r");
    assert_non_null(f);
    char err[100] = "";
    assert_int_equal(svc_properties_parse(f, "t", collect, &g, err, sizeof err), 7);
    fclose(f);
    assert_string_equal(g.text, "a=1@1;b=2@2;");
}

static void test_files(void **state)
{
    (void)state;
    char *tmp = ts_tmpdir();
    assert_non_null(tmp);
    static got g;
    char err[600], path[600];
    memset(&g, 0, sizeof g);
    /* A directory opens, then fails to read (EISDIR): it used to be an
     * empty file, and the server started with its defaults. */
    assert_int_equal(svc_properties_read(tmp, collect, &g, err, sizeof err), -1);
    assert_non_null(strstr(err, tmp));
    assert_non_null(strstr(err, "is a directory, not a regular file"));
    snprintf(path, sizeof path, "%s/missing.properties", tmp);
    assert_int_equal(svc_properties_read(path, collect, &g, err, sizeof err), -1);
    assert_non_null(strstr(err, path));
    assert_non_null(strstr(err, "No such file"));
    assert_int_equal(svc_properties_read("/dev/zero", collect, &g, err, sizeof err), -1);
    assert_non_null(strstr(err, "/dev/zero is a device or socket, not a regular file"));
    snprintf(path, sizeof path, "%s/ok.properties", tmp);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    assert_true(fputs("a=1\nb=2", f) >= 0);
    assert_int_equal(fclose(f), 0);
    assert_int_equal(svc_properties_read(path, collect, &g, err, sizeof err), 0);
    assert_string_equal(g.text, "a=1@1;b=2@2;");
    /* A pipe is read (--config <(...)). */
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    assert_int_equal(write(fds[1], "p=q\n", 4), 4);
    assert_int_equal(close(fds[1]), 0);
    snprintf(path, sizeof path, "/proc/self/fd/%d", fds[0]);
    memset(&g, 0, sizeof g);
    assert_int_equal(svc_properties_read(path, collect, &g, err, sizeof err), 0);
    assert_string_equal(g.text, "p=q@1;");
    assert_int_equal(close(fds[0]), 0);
    /* A read error mid-file is an error, not an early end: a stream
     * opened for writing only fails its reads with EBADF. */
    snprintf(path, sizeof path, "%s/ok.properties", tmp);
    f = fopen(path, "a");
    assert_non_null(f);
    memset(&g, 0, sizeof g);
    assert_int_equal(svc_properties_parse(f, path, collect, &g, err, sizeof err), -1);
    assert_int_equal(fclose(f), 0);
    assert_non_null(strstr(err, "cannot read: Bad file descriptor"));
    assert_non_null(strstr(err, path));
    ts_rmtree(tmp);
    free(tmp);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_separators),
        cmocka_unit_test(test_comments_and_blank_lines),
        cmocka_unit_test(test_continuations),
        cmocka_unit_test(test_end_of_file),
        cmocka_unit_test(test_escapes),
        cmocka_unit_test(test_line_ends),
        cmocka_unit_test(test_long_lines),
        cmocka_unit_test(test_callback_stops),
        cmocka_unit_test(test_files),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
