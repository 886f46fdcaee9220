/*
 * harness.c - process control and HTTP for integration tests.
 */
#include "harness.h"

#include <curl/curl.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "eng_fs.h"

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

const char *ls_binary(void)
{
    const char *b = getenv("TEST_LOGSTORE_BINARY");
    return b && *b ? b : "build/san/logstore";
}

static const char *binary(void)
{
    return ls_binary();
}

/* The port from "listening on http[s]://127.0.0.1:PORT" in the log, looking
 * only past `from` (a restart appends to the same log: the previous run's
 * port must not be taken for the new one's). */
static int read_port(const char *log_path, long from)
{
    FILE *f = fopen(log_path, "r");
    if (!f)
        return -1;
    if (from > 0 && fseek(f, from, SEEK_SET) != 0) {
        fclose(f);
        return -1;
    }
    char line[2048];
    int port = -1;
    while (fgets(line, sizeof line, f)) {
        char *p = strstr(line, "listening on http://");
        if (!p)
            p = strstr(line, "listening on https://");
        if (p) {
            /* the ':' after the host ("[v6]:port" too); the line goes on
             * after the port ("(data in DIR)", which may hold colons) */
            char *host = strstr(p, "://") + 3;
            char *close = *host == '[' ? strchr(host, ']') : NULL;
            char *colon = strchr(close ? close : host, ':');
            if (colon)
                port = atoi(colon + 1);
        }
    }
    fclose(f);
    return port;
}

/* Starts on dir with the options kept in s (listener, ca_file, config_file). */
static int start_impl(ls_server *s, const char *dir, const char *const *extra, bool wait_ready);

int ls_start_dir(ls_server *s, const char *dir, const char *const *extra, bool wait_ready)
{
    s->listener[0] = s->ca_file[0] = s->config_file[0] = 0;
    return start_impl(s, dir, extra, wait_ready);
}

static int start_impl(ls_server *s, const char *dir, const char *const *extra, bool wait_ready)
{
    static int curl_ready;
    if (!curl_ready) {
        curl_global_init(CURL_GLOBAL_ALL);
        curl_ready = 1;
    }
    snprintf(s->dir, sizeof s->dir, "%s", dir);
    snprintf(s->log_path, sizeof s->log_path, "%s.log", dir);
    char *argv[64];
    char sets[64][512];
    int n = 0, k = 0;
    argv[n++] = (char *)binary();
    snprintf(sets[k], sizeof sets[k], "log.dirs=%s", dir);
    argv[n++] = "--set";
    argv[n++] = sets[k++];
    snprintf(sets[k], sizeof sets[k], "listeners=%s",
             s->listener[0] ? s->listener : "http://127.0.0.1:0");
    argv[n++] = "--set";
    argv[n++] = sets[k++];
    if (s->config_file[0]) {
        argv[n++] = "--config";
        argv[n++] = s->config_file;
    }
    for (size_t i = 0; extra && extra[i] && n < 60; i++) {
        snprintf(sets[k], sizeof sets[k], "%s", extra[i]);
        argv[n++] = "--set";
        argv[n++] = sets[k++];
    }
    argv[n] = NULL;
    struct stat lst;
    long log_start = stat(s->log_path, &lst) == 0 ? (long)lst.st_size : 0;
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        int fd = open(s->log_path, O_WRONLY | O_CREAT | O_APPEND, 0644);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
            close(fd);
        }
        if (s->max_open_files > 0) {
            struct rlimit rl = {.rlim_cur = (rlim_t)s->max_open_files,
                                .rlim_max = (rlim_t)s->max_open_files};
            if (setrlimit(RLIMIT_NOFILE, &rl) < 0)
                _exit(126);
        }
        execv(argv[0], argv);
        _exit(127);
    }
    s->pid = pid;
    s->port = -1;
    for (int i = 0; i < 400 && s->port < 0; i++) {
        int st;
        if (waitpid(pid, &st, WNOHANG) == pid) {
            s->pid = 0;
            return -1;
        }
        sleep_ms(25);
        s->port = read_port(s->log_path, log_start);
    }
    if (s->port < 0)
        return -1;
    if (s->ca_file[0])
        snprintf(s->base_url, sizeof s->base_url, "https://localhost:%d", s->port);
    else
        snprintf(s->base_url, sizeof s->base_url, "http://127.0.0.1:%d", s->port);
    if (!wait_ready)
        return 0;
    for (int i = 0; i < 1200; i++) {
        ls_resp r;
        if (ls_get(s, "/health/ready", &r) == 0) {
            long st = r.status;
            ls_resp_free(&r);
            if (st == 200)
                return 0;
        }
        int wst;
        if (waitpid(pid, &wst, WNOHANG) == pid) {
            s->pid = 0;
            return -1;
        }
        sleep_ms(25);
    }
    return -1;
}

int ls_start(ls_server *s, const char *const *extra)
{
    memset(s, 0, sizeof *s);
    char tmpl[] = "/tmp/logstore-itest-XXXXXX";
    if (!mkdtemp(tmpl))
        return -1;
    s->own_dir = true;
    char dir[256];
    snprintf(dir, sizeof dir, "%s/data", tmpl);
    return ls_start_dir(s, dir, extra, true);
}

int ls_stop(ls_server *s)
{
    return ls_stop_signal(s, SIGTERM);
}

int ls_stop_signal(ls_server *s, int sig)
{
    if (s->pid <= 0)
        return -1;
    kill(s->pid, sig);
    int st = 0;
    for (int i = 0; i < 1200; i++) {
        if (waitpid(s->pid, &st, WNOHANG) == s->pid) {
            s->pid = 0;
            return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
        }
        sleep_ms(25);
    }
    kill(s->pid, SIGKILL);
    waitpid(s->pid, &st, 0);
    s->pid = 0;
    return -1;
}

void ls_kill9(ls_server *s)
{
    if (s->pid > 0) {
        kill(s->pid, SIGKILL);
        waitpid(s->pid, NULL, 0);
        s->pid = 0;
    }
}

void ls_cleanup(ls_server *s)
{
    if (s->pid > 0)
        ls_kill9(s);
    if (s->own_dir) {
        char parent[256];
        snprintf(parent, sizeof parent, "%s", s->dir);
        char *slash = strrchr(parent, '/');
        if (slash)
            *slash = 0;
        eng_fs_remove_tree(parent);
    }
}

typedef struct buf {
    char *p;
    size_t n;
} buf;

static size_t on_data(char *ptr, size_t size, size_t nmemb, void *ud)
{
    buf *b = ud;
    size_t add = size * nmemb;
    char *np = realloc(b->p, b->n + add + 1);
    if (!np)
        return 0;
    memcpy(np + b->n, ptr, add);
    b->n += add;
    np[b->n] = 0;
    b->p = np;
    return add;
}

int ls_http(ls_server *s, const char *method, const char *path, const char *content_type,
            const void *body, size_t len, const char *const *extra_headers, ls_resp *out)
{
    memset(out, 0, sizeof *out);
    CURL *c = curl_easy_init();
    if (!c)
        return -1;
    /* sized to fit: a fixed buffer silently cut long paths (limit tests) */
    size_t url_len = strlen(s->base_url) + strlen(path) + 1;
    char *url = malloc(url_len);
    if (!url) {
        curl_easy_cleanup(c);
        return -1;
    }
    snprintf(url, url_len, "%s%s", s->base_url, path);
    buf b = {0}, h = {0};
    struct curl_slist *hl = NULL;
    char ct[256];
    if (content_type) {
        snprintf(ct, sizeof ct, "Content-Type: %s", content_type);
        hl = curl_slist_append(hl, ct);
    }
    /* No Expect: 100-continue unless the caller asks for it (curl reads the
     * first Expect header it is given). */
    bool expect = false;
    for (size_t i = 0; extra_headers && extra_headers[i]; i++)
        expect |= strncasecmp(extra_headers[i], "Expect:", 7) == 0;
    if (!expect)
        hl = curl_slist_append(hl, "Expect:");
    for (size_t i = 0; extra_headers && extra_headers[i]; i++)
        hl = curl_slist_append(hl, extra_headers[i]);
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, hl);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &b);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_data);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, &h);
    curl_easy_setopt(c, CURLOPT_TIMEOUT, 60L);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    struct curl_slist *resolve = NULL;
    if (s->ca_file[0]) {
        char entry[64];
        snprintf(entry, sizeof entry, "localhost:%d:127.0.0.1", s->port);
        resolve = curl_slist_append(resolve, entry);
        curl_easy_setopt(c, CURLOPT_RESOLVE, resolve);
        curl_easy_setopt(c, CURLOPT_CAINFO, s->ca_file);
    }
    if (body) {
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
    }
    if (!strcmp(method, "HEAD"))
        curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
    CURLcode rc = curl_easy_perform(c);
    if (rc == CURLE_OK) {
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &out->status);
        out->body = b.p ? b.p : calloc(1, 1);
        out->len = b.n;
        out->headers = h.p ? h.p : calloc(1, 1);
        if (b.n)
            out->json = json_loadb(b.p, b.n, JSON_ALLOW_NUL, NULL);
    } else {
        free(b.p);
        free(h.p);
    }
    curl_slist_free_all(hl);
    curl_easy_cleanup(c);
    curl_slist_free_all(resolve);
    free(url);
    return rc == CURLE_OK ? 0 : -1;
}

int ls_get(ls_server *s, const char *path, ls_resp *out)
{
    return ls_http(s, "GET", path, NULL, NULL, 0, NULL, out);
}

long long ls_metric(ls_server *s, const char *name, long long absent)
{
    ls_resp r = {0};
    if (ls_get(s, "/metrics", &r) || r.status != 200) {
        ls_resp_free(&r);
        return -1;
    }
    long long v = absent;
    size_t n = strlen(name);
    for (const char *l = r.body; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL)
        if (!strncmp(l, name, n) && l[n] == ' ') {
            v = atoll(l + n + 1);
            break;
        }
    ls_resp_free(&r);
    return v;
}

int ls_post(ls_server *s, const char *path, const char *json_text, ls_resp *out)
{
    return ls_http(s, "POST", path, "application/json", json_text,
                   json_text ? strlen(json_text) : 0, NULL, out);
}

int ls_delete(ls_server *s, const char *path, ls_resp *out)
{
    return ls_http(s, "DELETE", path, NULL, NULL, 0, NULL, out);
}

long ls_create_topic(ls_server *s, const char *name, int partitions, const char *configs_json)
{
    char body[4096];
    snprintf(body, sizeof body, "{\"name\":\"%s\",\"partitions\":%d,\"configs\":%s}", name,
             partitions, configs_json ? configs_json : "{}");
    ls_resp r;
    if (ls_post(s, "/v1/topics", body, &r))
        return -1;
    long st = r.status;
    ls_resp_free(&r);
    return st;
}

void ls_resp_free(ls_resp *r)
{
    free(r->body);
    free(r->headers);
    json_decref(r->json);
    memset(r, 0, sizeof *r);
}

const char *ls_header(const ls_resp *r, const char *name)
{
    static char value[1024];
    size_t n = strlen(name);
    for (const char *line = r->headers; line && *line;) {
        const char *eol = strstr(line, "\r\n");
        size_t len = eol ? (size_t)(eol - line) : strlen(line);
        if (len > n && line[n] == ':' && strncasecmp(line, name, n) == 0) {
            const char *v = line + n + 1;
            while (*v == ' ')
                v++;
            size_t vl = len - (size_t)(v - line);
            if (vl >= sizeof value)
                vl = sizeof value - 1;
            memcpy(value, v, vl);
            value[vl] = 0;
            return value;
        }
        line = eol ? eol + 2 : line + len;
    }
    return NULL;
}

json_t *ls_jget(const ls_resp *r, const char *path)
{
    json_t *cur = r->json;
    char tmp[256];
    snprintf(tmp, sizeof tmp, "%s", path);
    char *save = NULL; /* strtok_r: test threads read JSON concurrently */
    for (char *tok = strtok_r(tmp, ".", &save); tok && cur; tok = strtok_r(NULL, ".", &save)) {
        if (json_is_array(cur))
            cur = json_array_get(cur, (size_t)atoi(tok));
        else
            cur = json_object_get(cur, tok);
    }
    return cur;
}

long long ls_jint(const ls_resp *r, const char *path)
{
    json_t *v = ls_jget(r, path);
    return json_is_integer(v) ? json_integer_value(v) : -999999;
}

const char *ls_jstr(const ls_resp *r, const char *path)
{
    json_t *v = ls_jget(r, path);
    return json_is_string(v) ? json_string_value(v) : NULL;
}

static long long walk_bytes(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return 0;
    long long total = 0;
    struct dirent *e;
    char path[4096];
    while ((e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        struct stat st;
        if (lstat(path, &st))
            continue;
        if (S_ISDIR(st.st_mode))
            total += walk_bytes(path);
        else
            total += st.st_size;
    }
    closedir(d);
    return total;
}

long long ls_dir_bytes(const char *dir)
{
    return walk_bytes(dir);
}

static void walk_list(const char *dir, const char *rel, char **out, size_t *len)
{
    DIR *d = opendir(dir);
    if (!d)
        return;
    struct dirent *e;
    char path[4096], r2[4096];
    while ((e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        snprintf(r2, sizeof r2, "%s%s%s", rel, *rel ? "/" : "", e->d_name);
        struct stat st;
        if (lstat(path, &st))
            continue;
        if (S_ISDIR(st.st_mode)) {
            walk_list(path, r2, out, len);
            continue;
        }
        char line[4200];
        int n = snprintf(line, sizeof line, "%s %lld\n", r2, (long long)st.st_size);
        char *np = realloc(*out, *len + (size_t)n + 1);
        if (!np)
            return;
        memcpy(np + *len, line, (size_t)n + 1);
        *out = np;
        *len += (size_t)n;
    }
    closedir(d);
}

static int cmp_lines(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

char *ls_dir_listing(const char *dir)
{
    char *raw = NULL;
    size_t len = 0;
    walk_list(dir, "", &raw, &len);
    if (!raw)
        return calloc(1, 1);
    size_t n = 0;
    for (char *p = raw; *p; p++)
        n += *p == '\n';
    char **lines = calloc(n + 1, sizeof *lines);
    size_t k = 0;
    char *save = NULL;
    for (char *tok = strtok_r(raw, "\n", &save); tok; tok = strtok_r(NULL, "\n", &save))
        lines[k++] = tok;
    qsort(lines, k, sizeof *lines, cmp_lines);
    char *out = calloc(1, len + 2);
    for (size_t i = 0; i < k; i++) {
        strcat(out, lines[i]);
        strcat(out, "\n");
    }
    free(lines);
    free(raw);
    return out;
}

/* ---- helpers added for the API suites -------------------------------------- */

int ls_send_json(ls_server *s, const char *method, const char *path, const char *json_text,
                 ls_resp *out)
{
    return ls_http(s, method, path, "application/json", json_text,
                   json_text ? strlen(json_text) : 0, NULL, out);
}

int ls_check_error(const ls_resp *r, long status, const char *code)
{
    static const char *const fields[] = {"error_code", "message", "kafka_error",
                                         "kafka_error_code", "retriable", "details",
                                         "request_id"};
    const char *why = NULL;
    char tmp[256];
    json_t *o = r->json;
    if (r->status != status) {
        snprintf(tmp, sizeof tmp, "status %ld, expected %ld", r->status, status);
        why = tmp;
    } else if (r->status >= 200 && r->status < 300) {
        why = "an error came back with a 2xx status";
    } else if (!json_is_object(o)) {
        why = "the body is not a JSON object";
    } else if (json_object_size(o) != sizeof fields / sizeof fields[0]) {
        snprintf(tmp, sizeof tmp, "the body has %zu fields, expected 7", json_object_size(o));
        why = tmp;
    } else {
        for (size_t i = 0; i < sizeof fields / sizeof fields[0] && !why; i++)
            if (!json_object_get(o, fields[i])) {
                snprintf(tmp, sizeof tmp, "field %s is missing", fields[i]);
                why = tmp;
            }
    }
    if (!why) {
        json_t *kafka = json_object_get(o, "kafka_error");
        json_t *kcode = json_object_get(o, "kafka_error_code");
        const char *hdr = ls_header(r, "X-Request-Id");
        char hid[128];
        snprintf(hid, sizeof hid, "%s", hdr ? hdr : "");
        if (!json_is_string(json_object_get(o, "error_code")) ||
            !json_is_string(json_object_get(o, "message")) ||
            !json_is_boolean(json_object_get(o, "retriable")) ||
            !json_is_object(json_object_get(o, "details")) ||
            !json_is_string(json_object_get(o, "request_id")))
            why = "a field has the wrong type";
        else if (!((json_is_string(kafka) && json_is_integer(kcode)) ||
                   (json_is_null(kafka) && json_is_null(kcode))))
            why = "kafka_error/kafka_error_code must be string+integer or both null";
        else if (strlen(json_string_value(json_object_get(o, "message"))) == 0)
            why = "empty message";
        else if (code && strcmp(json_string_value(json_object_get(o, "error_code")), code)) {
            snprintf(tmp, sizeof tmp, "error_code %s, expected %s",
                     json_string_value(json_object_get(o, "error_code")), code);
            why = tmp;
        } else if (!hdr || strcmp(hid, json_string_value(json_object_get(o, "request_id"))))
            why = "request_id differs from the X-Request-Id header";
    }
    if (!why)
        return 0;
    fprintf(stderr, "# error body check failed: %s\n# body: %.600s\n", why,
            r->body ? r->body : "(none)");
    return -1;
}

long ls_live_status(ls_server *s)
{
    ls_resp r;
    if (ls_get(s, "/health/live", &r))
        return 0;
    long st = r.status;
    ls_resp_free(&r);
    return st;
}

long long ls_log_end_offset(ls_server *s, const char *topic, int partition)
{
    char path[512];
    snprintf(path, sizeof path, "/v1/topics/%s/partitions/%d", topic, partition);
    ls_resp r;
    if (ls_get(s, path, &r))
        return -1;
    long long v = r.status == 200 ? ls_jint(&r, "log_end_offset") : -1;
    ls_resp_free(&r);
    return v;
}

long long ls_file_size(const char *path)
{
    struct stat st;
    return stat(path, &st) ? -1 : (long long)st.st_size;
}

void *ls_read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    size_t cap = 4096, n = 0;
    char *p = malloc(cap + 1);
    size_t got;
    while (p && (got = fread(p + n, 1, cap - n, f)) > 0) {
        n += got;
        if (n == cap) {
            char *np = realloc(p, cap * 2 + 1);
            if (!np) {
                free(p);
                p = NULL;
                break;
            }
            p = np;
            cap *= 2;
        }
    }
    fclose(f);
    if (!p)
        return NULL;
    p[n] = 0;
    *len = n;
    return p;
}

int ls_restart(ls_server *s, const char *const *extra)
{
    char dir[256], prev[320];
    snprintf(dir, sizeof dir, "%s", s->dir);
    snprintf(prev, sizeof prev, "%s.prev", s->log_path);
    rename(s->log_path, prev);
    bool own = s->own_dir;
    int rc = start_impl(s, dir, extra, true);
    s->own_dir = own;
    return rc;
}

/* ---- helpers added for the configs, auth and TLS suites -------------------- */

int ls_start_opts(ls_server *s, const ls_opts *o)
{
    memset(s, 0, sizeof *s);
    char tmpl[] = "/tmp/logstore-itest-XXXXXX";
    if (!mkdtemp(tmpl))
        return -1;
    s->own_dir = true;
    snprintf(s->listener, sizeof s->listener, "%s", o->listener ? o->listener : "");
    snprintf(s->ca_file, sizeof s->ca_file, "%s", o->ca_file ? o->ca_file : "");
    snprintf(s->config_file, sizeof s->config_file, "%s", o->config_file ? o->config_file : "");
    s->max_open_files = o->max_open_files;
    char dir[256];
    snprintf(dir, sizeof dir, "%s/data", tmpl);
    return start_impl(s, dir, o->extra, true);
}

int ls_write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return -1;
    size_t n = strlen(text);
    int rc = fwrite(text, 1, n, f) == n ? 0 : -1;
    return fclose(f) == 0 ? rc : -1;
}

int ls_run_cmd(const char *cmd, char *out, size_t len)
{
    out[0] = 0;
    FILE *p = popen(cmd, "r");
    if (!p)
        return -1;
    size_t n = fread(out, 1, len - 1, p);
    out[n] = 0;
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static char g_scratch[64];

int ls_run_refused(const char *settings, char *out, size_t len)
{
    char dir[300], cmd[2048];
    ls_scratch_path(dir, sizeof dir, "refused-data");
    if ((size_t)snprintf(cmd, sizeof cmd,
                         "timeout 20 %s --set log.dirs=%s --set listeners=http://127.0.0.1:0 %s "
                         "</dev/null 2>&1",
                         ls_binary(), dir, settings) >= sizeof cmd)
        return -1;
    int st = ls_run_cmd(cmd, out, len);
    if (strstr(out, "Sanitizer")) {
        fprintf(stderr, "# sanitizer report from a refused start:\n%.1500s\n", out);
        return -1;
    }
    return st;
}

void ls_scratch_path(char *out, size_t len, const char *name)
{
    if (!g_scratch[0]) {
        snprintf(g_scratch, sizeof g_scratch, "/tmp/logstore-scratch-XXXXXX");
        if (!mkdtemp(g_scratch))
            g_scratch[0] = 0;
    }
    snprintf(out, len, "%s/%s", g_scratch[0] ? g_scratch : "/tmp", name);
}

void ls_scratch_remove(void)
{
    if (g_scratch[0])
        eng_fs_remove_tree(g_scratch);
    g_scratch[0] = 0;
}

bool ls_file_contains(const char *path, const char *needle)
{
    size_t len;
    char *text = ls_read_file(path, &len);
    bool found = text && strstr(text, needle) != NULL;
    free(text);
    return found;
}

int ls_file_count(const char *path, const char *needle)
{
    size_t len;
    char *text = ls_read_file(path, &len);
    int n = 0;
    for (const char *p = text; p && (p = strstr(p, needle)); p += strlen(needle))
        n++;
    free(text);
    return n;
}

json_t *ls_jfind(json_t *arr, const char *key, const char *value)
{
    size_t i;
    json_t *e;
    json_array_foreach(arr, i, e) {
        const char *v = json_string_value(json_object_get(e, key));
        if (v && !strcmp(v, value))
            return e;
    }
    return NULL;
}

long long ls_partition_field(ls_server *s, const char *topic, int p, const char *field)
{
    char path[512];
    snprintf(path, sizeof path, "/v1/topics/%s/partitions/%d", topic, p);
    ls_resp r;
    if (ls_get(s, path, &r))
        return -1;
    long long v = r.status == 200 ? ls_jint(&r, field) : -1;
    ls_resp_free(&r);
    return v;
}

int ls_expect_error(ls_server *s, const char *method, const char *path, const char *json,
                    long status, const char *code)
{
    ls_resp r;
    if (ls_http(s, method, path, json ? "application/json" : NULL, json, json ? strlen(json) : 0,
                NULL, &r))
        return -1;
    int rc = ls_check_error(&r, status, code);
    if (rc)
        fprintf(stderr, "# %s %s %s\n", method, path, json ? json : "");
    ls_resp_free(&r);
    return rc;
}

long ls_append_json(ls_server *s, const char *topic, int part, const char *body)
{
    char path[512];
    snprintf(path, sizeof path, "/v1/topics/%s/partitions/%d/records", topic, part);
    ls_resp r;
    if (ls_send_json(s, "POST", path, body, &r))
        return -1;
    long status = r.status;
    if (status != 200)
        fprintf(stderr, "# append to %s-%d answered %ld: %s\n", topic, part, status, r.body);
    ls_resp_free(&r);
    return status;
}

/* Drops the listing's lines of the top-level checkpoint files (and their
 * temporary copies), in place: their jobs write them on their own schedule,
 * whatever a request did, so a job due between two listings must not read
 * as the request's doing. */
static void drop_checkpoint_lines(char *listing)
{
    static const char *const names[] = {"recovery-point-offset-checkpoint",
                                        "log-start-offset-checkpoint",
                                        "cleaner-offset-checkpoint"};
    char *w = listing;
    for (char *line = listing; line && *line;) {
        char *nl = strchr(line, '\n');
        size_t len = nl ? (size_t)(nl - line) + 1 : strlen(line);
        bool drop = false;
        for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
            size_t n = strlen(names[i]);
            drop |= strncmp(line, names[i], n) == 0 && (line[n] == ' ' || line[n] == '.');
        }
        if (!drop) {
            memmove(w, line, len);
            w += len;
        }
        line += len;
    }
    if (listing)
        *w = 0;
}

int ls_dir_same(const char *dir, char *before)
{
    char *after = ls_dir_listing(dir);
    drop_checkpoint_lines(before);
    drop_checkpoint_lines(after);
    int rc = !before || !after || strcmp(before, after) != 0;
    if (rc)
        fprintf(stderr, "# the data dir changed\n# before:\n%s\n# after:\n%s\n",
                before ? before : "(none)", after ? after : "(none)");
    free(before);
    free(after);
    return rc;
}
