/*
 * support.c - helpers for the test suites.
 */
#include "support.h"

#include "eng_config.h"
#include "eng_error.h"
#include "eng_fs.h"
#include "eng_process.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

char *ts_tmpdir(void)
{
    char *tmpl = strdup("/tmp/logstore-test-XXXXXX");
    if (tmpl && !mkdtemp(tmpl)) {
        free(tmpl);
        return NULL;
    }
    return tmpl;
}

char *ts_fast_tmpdir(void)
{
    char *t = strdup("/dev/shm/logstore-test-XXXXXX");
    if (t && access("/dev/shm", W_OK) == 0 && mkdtemp(t))
        return t;
    free(t);
    return ts_tmpdir();
}

int ts_dir_setup(void **state)
{
    ts_dir_fixture *f = calloc(1, sizeof *f);
    if (!f || !(f->dir = ts_tmpdir())) {
        free(f);
        return -1;
    }
    *state = f;
    return 0;
}

int ts_dir_teardown(void **state)
{
    ts_dir_fixture *f = *state;
    ts_rmtree(f->dir);
    free(f->dir);
    free(f);
    return 0;
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

static int copy_file(const char *from, const char *to)
{
    uint8_t *buf;
    size_t len;
    int rc = ts_read_file(from, &buf, &len);
    if (rc)
        return rc;
    int fd = open(to, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        free(buf);
        return -errno;
    }
    ssize_t w = write(fd, buf, len);
    rc = w == (ssize_t)len ? 0 : w < 0 ? -errno : -EIO;
    if (close(fd) < 0 && !rc)
        rc = -errno;
    free(buf);
    return rc;
}

int ts_copy_tree(const char *from, const char *to)
{
    if (mkdir(to, 0755) < 0)
        return -errno;
    DIR *d = opendir(from);
    if (!d)
        return -errno;
    int rc = 0;
    struct dirent *e;
    while (!rc && (e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        char a[2048], b[2048];
        snprintf(a, sizeof a, "%s/%s", from, e->d_name);
        snprintf(b, sizeof b, "%s/%s", to, e->d_name);
        struct stat st;
        if (lstat(a, &st) < 0)
            rc = -errno;
        else
            rc = S_ISDIR(st.st_mode) ? ts_copy_tree(a, b) : copy_file(a, b);
    }
    closedir(d);
    return rc;
}

void ts_sleep_ms(int64_t ms)
{
    struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
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

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

void ts_list_dir(const char *path, char *out, size_t cap)
{
    char *names[64];
    size_t n = 0;
    out[0] = 0;
    DIR *d = opendir(path);
    if (!d) {
        snprintf(out, cap, "(cannot list %s)", path);
        return;
    }
    for (struct dirent *e; (e = readdir(d));)
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..") && n < 64)
            names[n++] = strdup(e->d_name);
    closedir(d);
    qsort(names, n, sizeof names[0], cmp_str);
    for (size_t i = 0, used = 0; i < n; i++) {
        if (used < cap)
            used += (size_t)snprintf(out + used, cap - used, "%s%s", i ? "," : "",
                                     names[i] ? names[i] : "?");
        free(names[i]);
    }
}

void ts_fd_limit(long extra, struct rlimit *saved)
{
    long headroom, limit;
    getrlimit(RLIMIT_NOFILE, saved);
    if (eng_process_fd_headroom(&headroom, &limit))
        return;
    struct rlimit rl = *saved;
    rl.rlim_cur = (rlim_t)(limit - headroom + extra);
    setrlimit(RLIMIT_NOFILE, &rl);
}

void ts_fd_limit_restore(const struct rlimit *saved)
{
    setrlimit(RLIMIT_NOFILE, saved);
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

/* ---- the stand-in metadata codec ---------------------------------------- */

static int line_encode(const eng_topic_meta *m, char **out, size_t *len, void *ctx)
{
    (void)ctx;
    size_t cap = 512;
    for (int i = 0; i < ENG_CFG_COUNT; i++)
        if (m->overrides.text[i])
            cap += strlen(m->overrides.text[i]) + 64;
    char *buf = malloc(cap);
    if (!buf)
        return -ENOMEM;
    size_t n = (size_t)snprintf(buf, cap, "%s\n%d\n%s\n%lld\n", m->name, (int)m->partitions,
                                m->topic_id, (long long)m->created_ms);
    for (int i = 0; i < ENG_CFG_COUNT; i++)
        if (m->overrides.text[i])
            n += (size_t)snprintf(buf + n, cap - n, "%s=%s\n",
                                  eng_config_def_at((eng_config_id)i)->name, m->overrides.text[i]);
    *out = buf;
    *len = n;
    return 0;
}

static int line_decode(const char *buf, size_t len, eng_topic_meta *m, void *ctx)
{
    (void)ctx;
    char *copy = strndup(buf, len), *save = NULL;
    if (!copy)
        return -ENOMEM;
    int rc = ENG_ECORRUPT;
    char *name = strtok_r(copy, "\n", &save), *parts = strtok_r(NULL, "\n", &save);
    char *id = strtok_r(NULL, "\n", &save), *created = strtok_r(NULL, "\n", &save);
    if (!name || !parts || !id || !created || strlen(name) > ENG_TOPIC_NAME_MAX || strlen(id) > 22)
        goto done;
    snprintf(m->name, sizeof m->name, "%s", name);
    m->partitions = atoi(parts);
    snprintf(m->topic_id, sizeof m->topic_id, "%s", id);
    m->created_ms = atoll(created);
    for (char *line; (line = strtok_r(NULL, "\n", &save));) {
        char *eq = strchr(line, '=');
        if (!eq)
            goto done;
        *eq = 0;
        if (eng_config_overrides_set(&m->overrides, line, eq + 1, NULL))
            goto done;
    }
    rc = 0;
done:
    if (rc)
        eng_config_overrides_clear(&m->overrides);
    free(copy);
    return rc;
}

eng_meta_codec ts_line_codec(void)
{
    return (eng_meta_codec){.encode = line_encode, .decode = line_decode};
}

void ts_fill_value(uint8_t *v, int len, int64_t id)
{
    for (int j = 0; j < len; j++)
        v[j] = (uint8_t)('a' + (id * 7 + j) % 26);
}

size_t ts_build_batch(uint8_t *buf, size_t cap, int64_t first, int n, int64_t ts, int vlen)
{
    static _Thread_local uint8_t values[TS_BATCH_MAX_RECS][TS_VALUE_MAX];
    char keys[TS_BATCH_MAX_RECS][24];
    eng_record_spec recs[TS_BATCH_MAX_RECS];
    if (n < 0 || n > TS_BATCH_MAX_RECS || vlen < 0 || vlen > TS_VALUE_MAX)
        return 0;
    for (int i = 0; i < n; i++) {
        snprintf(keys[i], sizeof keys[i], "k-%06lld", (long long)(first + i));
        ts_fill_value(values[i], vlen, first + i);
        recs[i] = (eng_record_spec){.timestamp = ts, .key = (const uint8_t *)keys[i],
                                    .key_len = (int32_t)strlen(keys[i]), .value = values[i],
                                    .value_len = vlen};
    }
    eng_batch_params bp;
    eng_batch_params_init(&bp);
    return eng_batch_encode(buf, cap, &bp, recs, (size_t)n);
}

bool ts_record_intact(const eng_record *r, int vlen)
{
    char key[24];
    uint8_t want[TS_VALUE_MAX];
    int kl = snprintf(key, sizeof key, "k-%06lld", (long long)r->offset);
    if (vlen < 0 || vlen > TS_VALUE_MAX || r->key_len != kl || memcmp(r->key, key, (size_t)kl) ||
        r->value_len != vlen)
        return false;
    ts_fill_value(want, vlen, r->offset);
    return memcmp(r->value, want, (size_t)vlen) == 0;
}

int64_t ts_walk_fetch(const eng_fetch *ft, int64_t from, ts_rec_check check, void *ctx)
{
    int64_t expect = from;
    for (size_t pos = 0; pos < ft->len;) {
        eng_batch_header h;
        if (eng_batch_header_decode(ft->data + pos, ft->len - pos, &h) ||
            eng_batch_size(&h) > ft->len - pos ||
            eng_batch_validate(ft->data + pos, eng_batch_size(&h), &h))
            return -1;
        eng_record_iter it;
        eng_record r;
        eng_record_iter_init(&it, &h, ft->data + pos + ENG_BATCH_OVERHEAD,
                             eng_batch_size(&h) - ENG_BATCH_OVERHEAD);
        while (eng_record_iter_next(&it, &r) == 1)
            if (r.offset >= from && (r.offset != expect++ || check(&r, ctx)))
                return -1;
        pos += eng_batch_size(&h);
    }
    return expect;
}

int ts_check_intact(const eng_record *r, void *vlen)
{
    return ts_record_intact(r, *(const int *)vlen) ? 0 : -1;
}

int64_t ts_walk_intact(const eng_fetch *ft, int64_t from, int vlen)
{
    return ts_walk_fetch(ft, from, ts_check_intact, &vlen);
}
