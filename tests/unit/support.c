/*
 * support.c - helpers for the test suites.
 */
#include "support.h"

#include "eng_fs.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

char *ts_tmpdir(void)
{
    char *tmpl = strdup("/tmp/logstore-test-XXXXXX");
    if (tmpl && !mkdtemp(tmpl)) {
        free(tmpl);
        return NULL;
    }
    return tmpl;
}

void ts_rmtree(const char *path)
{
    if (path)
        eng_fs_remove_tree(path);
}

const char *ts_data_path(const char *rel)
{
    static char buf[4096];
    const char *root = getenv("LOGSTORE_TEST_DATA");
    snprintf(buf, sizeof buf, "%s/%s", root ? root : "tests/data", rel);
    return buf;
}

int ts_read_file(const char *path, uint8_t **out, size_t *len)
{
    char *buf;
    int rc = eng_fs_read_file(path, 1u << 30, &buf, len);
    if (rc)
        return rc;
    *out = (uint8_t *)buf;
    return 0;
}

long long ts_file_size(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 ? (long long)st.st_size : -1;
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

int ts_vector(const char *name, uint8_t **out, size_t *len)
{
    uint8_t *file;
    size_t flen;
    int rc = ts_read_file(ts_data_path("kafka-vectors.txt"), &file, &flen);
    if (rc)
        return rc;
    rc = -ENOENT;
    size_t nlen = strlen(name);
    char *line = (char *)file;
    while (line && *line) {
        char *next = strchr(line, '\n');
        if (next)
            *next++ = 0;
        if (strncmp(line, name, nlen) == 0 && line[nlen] == '\t') {
            char *size_s = line + nlen + 1;
            char *hex = strchr(size_s, '\t');
            if (!hex)
                break;
            size_t size = strtoul(size_s, NULL, 10);
            hex++;
            if (strlen(hex) != size * 2)
                break;
            uint8_t *b = malloc(size ? size : 1);
            if (!b) {
                rc = -ENOMEM;
                break;
            }
            for (size_t i = 0; i < size; i++)
                b[i] = (uint8_t)(hexval(hex[2 * i]) << 4 | hexval(hex[2 * i + 1]));
            *out = b;
            *len = size;
            rc = 0;
            break;
        }
        line = next;
    }
    free(file);
    return rc;
}
