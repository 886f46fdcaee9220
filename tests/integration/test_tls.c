/*
 * test_tls.c - HTTPS listeners (issue 7), against the real server binary.
 *
 * A self-signed certificate for localhost is made here with libcrypto; the
 * server runs an https:// listener (harness ls_start_opts) and libcurl,
 * trusting that certificate, reaches health, appends and reads (JSON and raw
 * batches), and takes, lists and removes a snapshot.  TLS 1.2 and 1.3 work;
 * TLS 1.1 is refused (the client is allowed TLS 1.1 with @SECLEVEL=0, and
 * `openssl s_server -tls1_1`, when installed, shows that client does speak
 * it); plain HTTP to the TLS port fails; an https listener without a key
 * pair, or a key pair without one, or a key of another pair, exits 2.  A
 * client stalling in the handshake holds no worker and is closed after
 * http.idle.timeout.ms.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "harness.h"

#include <arpa/inet.h>
#include <curl/curl.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define CHECK_ERR(r, st, code) assert_int_equal(ls_check_error(&(r), (st), (code)), 0)

#define REC "{\"records\":[{\"key\":\"k\",\"value\":\"v\"}]}"

static ls_server g_tls;
static ls_server *T = &g_tls;

/* A self-signed RSA-2048 certificate for localhost, PEM, into two files. */
static void make_cert(const char *cert_path, const char *key_path)
{
    EVP_PKEY *pkey = EVP_RSA_gen(2048);
    assert_non_null(pkey);
    X509 *x = X509_new();
    assert_non_null(x);
    X509_set_version(x, 2);
    ASN1_INTEGER_set(X509_get_serialNumber(x), 1);
    X509_gmtime_adj(X509_getm_notBefore(x), -3600);
    X509_gmtime_adj(X509_getm_notAfter(x), 86400);
    X509_set_pubkey(x, pkey);
    X509_NAME *name = X509_get_subject_name(x);
    X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, (const unsigned char *)"localhost", -1, -1, 0);
    X509_set_issuer_name(x, name);
    X509V3_CTX ctx;
    X509V3_set_ctx_nodb(&ctx);
    X509V3_set_ctx(&ctx, x, x, NULL, NULL, 0);
    const char *const ext[][2] = {{"subjectAltName", "DNS:localhost"},
                                  {"basicConstraints", "critical,CA:TRUE"}};
    for (size_t i = 0; i < 2; i++) {
        X509_EXTENSION *e = X509V3_EXT_nconf(NULL, &ctx, ext[i][0], ext[i][1]);
        assert_non_null(e);
        X509_add_ext(x, e, -1);
        X509_EXTENSION_free(e);
    }
    assert_true(X509_sign(x, pkey, EVP_sha256()) > 0);
    FILE *f = fopen(cert_path, "w");
    assert_non_null(f);
    assert_int_equal(PEM_write_X509(f, x), 1);
    fclose(f);
    f = fopen(key_path, "w");
    assert_non_null(f);
    assert_int_equal(PEM_write_PrivateKey(f, pkey, NULL, NULL, 0, NULL, NULL), 1);
    fclose(f);
    X509_free(x);
    EVP_PKEY_free(pkey);
}

static char g_cert[300], g_key[300];

static void start_tls_server(void)
{
    ls_scratch_path(g_cert, sizeof g_cert, "cert.pem");
    ls_scratch_path(g_key, sizeof g_key, "key.pem");
    make_cert(g_cert, g_key);
    char c[400], k[400];
    snprintf(c, sizeof c, "tls.cert.file=%s", g_cert);
    snprintf(k, sizeof k, "tls.key.file=%s", g_key);
    const char *const extra[] = {c, k, NULL};
    ls_opts o = {.extra = extra, .listener = "https://127.0.0.1:0", .ca_file = g_cert};
    assert_int_equal(ls_start_opts(T, &o), 0);
}

static size_t sink(char *p, size_t size, size_t n, void *ud)
{
    (void)p;
    (void)ud;
    return size * n;
}

/* GET https://localhost:port/health/live with the given TLS versions
 * (0: libcurl's default), trusting ca (NULL: the system store), with a
 * cipher list (NULL: default).  Returns the CURLcode; *status the HTTP one. */
static CURLcode tls_get(int port, const char *ca, long version, const char *ciphers, long *status,
                        char *errbuf)
{
    CURL *c = curl_easy_init();
    char url[128], resolve[64];
    snprintf(url, sizeof url, "https://localhost:%d/health/live", port);
    snprintf(resolve, sizeof resolve, "localhost:%d:127.0.0.1", port);
    struct curl_slist *rs = curl_slist_append(NULL, resolve);
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_RESOLVE, rs);
    if (ca)
        curl_easy_setopt(c, CURLOPT_CAINFO, ca);
    if (version)
        curl_easy_setopt(c, CURLOPT_SSLVERSION, version);
    if (ciphers)
        curl_easy_setopt(c, CURLOPT_SSL_CIPHER_LIST, ciphers);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, sink);
    curl_easy_setopt(c, CURLOPT_ERRORBUFFER, errbuf);
    curl_easy_setopt(c, CURLOPT_TIMEOUT, 10L);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    errbuf[0] = 0;
    *status = 0;
    CURLcode rc = curl_easy_perform(c);
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, status);
    curl_slist_free_all(rs);
    curl_easy_cleanup(c);
    return rc;
}

static void test_tls_serves_the_api(void **state)
{
    (void)state;
    start_tls_server();
    assert_true(ls_file_contains(T->log_path, "listening on https://127.0.0.1:"));
    assert_int_equal(ls_live_status(T), 200);
    assert_int_equal(ls_create_topic(T, "secure", 1, NULL), 201);
    ls_resp r;
    assert_int_equal(ls_post(T, "/v1/topics/secure/partitions/0/records", REC, &r), 0);
    assert_int_equal(r.status, 200);
    ls_resp_free(&r);
    assert_int_equal(ls_get(T, "/v1/topics/secure/partitions/0/records?offset=0", &r), 0);
    assert_int_equal(r.status, 200);
    assert_string_equal(ls_jstr(&r, "records.0.value"), "v");
    ls_resp_free(&r);
    /* raw batches come from the segment file, through TLS */
    const char *const raw[] = {"Accept: application/octet-stream", NULL};
    assert_int_equal(ls_http(T, "GET", "/v1/topics/secure/partitions/0/records?offset=0", NULL, NULL,
                             0, raw, &r), 0);
    assert_int_equal(r.status, 200);
    char seg[512];
    snprintf(seg, sizeof seg, "%.255s/secure-0/00000000000000000000.log", T->dir);
    size_t len;
    char *disk = ls_read_file(seg, &len);
    assert_non_null(disk);
    assert_int_equal(r.len, len);
    assert_memory_equal(r.body, disk, len);
    free(disk);
    ls_resp_free(&r);
    /* snapshots: taken, listed and removed over HTTPS as over HTTP */
    assert_int_equal(ls_post(T, "/v1/admin/snapshots", "{\"name\":\"over-tls\"}", &r), 0);
    assert_int_equal(r.status, 201);
    assert_string_equal(ls_header(&r, "Location"), "/v1/admin/snapshots/over-tls");
    assert_int_equal(ls_jint(&r, "partitions"), 1);
    ls_resp_free(&r);
    assert_int_equal(ls_get(T, "/v1/admin/snapshots", &r), 0);
    assert_int_equal(r.status, 200);
    assert_string_equal(ls_jstr(&r, "snapshots.0.name"), "over-tls");
    ls_resp_free(&r);
    assert_int_equal(ls_delete(T, "/v1/admin/snapshots/over-tls", &r), 0);
    assert_int_equal(r.status, 204);
    ls_resp_free(&r);
    /* a client that does not trust the certificate gets nowhere */
    long st;
    char err[CURL_ERROR_SIZE];
    assert_int_equal(tls_get(T->port, NULL, 0, NULL, &st, err), CURLE_PEER_FAILED_VERIFICATION);
}

/* A free loopback port (bound, read, released). */
static int free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t al = sizeof a;
    assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
    assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &al), 0);
    close(fd);
    return ntohs(a.sin_port);
}

static void test_tls_versions(void **state)
{
    (void)state;
    long st;
    char err[CURL_ERROR_SIZE];
    const long v12 = CURL_SSLVERSION_TLSv1_2 | CURL_SSLVERSION_MAX_TLSv1_2;
    const long v13 = CURL_SSLVERSION_TLSv1_3 | CURL_SSLVERSION_MAX_TLSv1_3;
    const long v11 = CURL_SSLVERSION_TLSv1_1 | CURL_SSLVERSION_MAX_TLSv1_1;
    assert_int_equal(tls_get(T->port, g_cert, v12, NULL, &st, err), CURLE_OK);
    assert_int_equal(st, 200);
    assert_int_equal(tls_get(T->port, g_cert, v13, NULL, &st, err), CURLE_OK);
    assert_int_equal(st, 200);
    /* @SECLEVEL=0 lets OpenSSL 3 offer TLS 1.1, so a failure is the server's */
    CURLcode rc = tls_get(T->port, g_cert, v11, "DEFAULT:@SECLEVEL=0", &st, err);
    fprintf(stderr, "# TLS 1.1 against logstore: %s (%s)\n", curl_easy_strerror(rc), err);
    assert_int_not_equal(rc, CURLE_OK);
    assert_int_equal(st, 0);
    /* the control: the same client does speak TLS 1.1 to a server allowing it */
    if (access("/usr/bin/openssl", X_OK) == 0) {
        int port = free_port();
        char accept[32];
        snprintf(accept, sizeof accept, "127.0.0.1:%d", port);
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
            int null = open("/dev/null", O_WRONLY);
            dup2(null, 1);
            dup2(null, 2);
            execl("/usr/bin/openssl", "openssl", "s_server", "-accept", accept, "-cert", g_cert, "-key",
                  g_key, "-tls1_1", "-cipher", "DEFAULT:@SECLEVEL=0", "-www", (char *)NULL);
            _exit(127);
        }
        rc = CURLE_COULDNT_CONNECT;
        for (int i = 0; i < 100 && rc == CURLE_COULDNT_CONNECT; i++) {
            usleep(50000);
            rc = tls_get(port, g_cert, v11, "DEFAULT:@SECLEVEL=0", &st, err);
        }
        kill(pid, SIGTERM);
        waitpid(pid, NULL, 0);
        fprintf(stderr, "# TLS 1.1 against openssl s_server -tls1_1: %s %s\n", curl_easy_strerror(rc), err);
        assert_int_equal(rc, CURLE_OK);
    } else {
        fprintf(stderr, "# no /usr/bin/openssl: the TLS 1.1 control is skipped\n");
    }
    /* plain HTTP to the TLS port gets no HTTP answer */
    ls_server plain = *T;
    plain.ca_file[0] = 0;
    snprintf(plain.base_url, sizeof plain.base_url, "http://127.0.0.1:%d", T->port);
    ls_resp r;
    if (ls_get(&plain, "/health/live", &r) == 0) {
        assert_true(r.status != 200);
        ls_resp_free(&r);
    }
    assert_int_equal(ls_live_status(T), 200); /* still serving */
    assert_int_equal(ls_stop(T), 0);
    ls_cleanup(T);
}

static void test_tls_settings_checked(void **state)
{
    (void)state;
    char out[16384], set[1024];
    assert_int_equal(ls_run_refused("--set listeners=https://127.0.0.1:0", out, sizeof out), 2);
    assert_non_null(strstr(out, "tls.cert.file"));
    snprintf(set, sizeof set, "--set listeners=https://127.0.0.1:0 --set tls.cert.file=%s", g_cert);
    assert_int_equal(ls_run_refused(set, out, sizeof out), 2);
    snprintf(set, sizeof set, "--set tls.cert.file=%s --set tls.key.file=%s", g_cert, g_key);
    assert_int_equal(ls_run_refused(set, out, sizeof out), 2); /* a key pair but http:// */
    snprintf(set, sizeof set, "--set listeners=https://127.0.0.1:0 --set tls.cert.file=%s.missing "
                              "--set tls.key.file=%s", g_cert, g_key);
    assert_int_equal(ls_run_refused(set, out, sizeof out), 2);
    snprintf(set, sizeof set, "--set listeners=https://127.0.0.1:0 --set tls.cert.file=%s "
                              "--set tls.key.file=%s.missing", g_cert, g_key);
    assert_int_equal(ls_run_refused(set, out, sizeof out), 2);
    /* Files that are not PEM are refused as settings errors (exit 2) that
     * name the file, before the data dir is touched; they used to surface as
     * "cannot listen" (exit 1) after it was locked and opened. */
    char junk[300];
    ls_scratch_path(junk, sizeof junk, "junk.pem");
    assert_int_equal(ls_write_file(junk, "not a certificate\n"), 0);
    snprintf(set, sizeof set, "--set listeners=https://127.0.0.1:0 --set tls.cert.file=%s "
                              "--set tls.key.file=%s", junk, g_key);
    assert_int_equal(ls_run_refused(set, out, sizeof out), 2);
    assert_non_null(strstr(out, "tls.cert.file holds no PEM certificate"));
    assert_non_null(strstr(out, junk));
    assert_null(strstr(out, "cannot listen"));
    /* The certificate given as the key: not a private key. */
    snprintf(set, sizeof set, "--set listeners=https://127.0.0.1:0 --set tls.cert.file=%s "
                              "--set tls.key.file=%s", g_cert, g_cert);
    assert_int_equal(ls_run_refused(set, out, sizeof out), 2);
    assert_non_null(strstr(out, "tls.key.file holds no unencrypted PEM private key"));
    /* Another pair's key: both files are PEM, but they do not match. */
    char other_cert[300], other_key[300];
    ls_scratch_path(other_cert, sizeof other_cert, "other-cert.pem");
    ls_scratch_path(other_key, sizeof other_key, "other-key.pem");
    make_cert(other_cert, other_key);
    snprintf(set, sizeof set, "--set listeners=https://127.0.0.1:0 --set tls.cert.file=%s "
                              "--set tls.key.file=%s", g_cert, other_key);
    assert_int_equal(ls_run_refused(set, out, sizeof out), 2);
    assert_non_null(strstr(out, "does not belong to the certificate"));
    assert_non_null(strstr(out, other_key));
}

/* True when the server closes fd within ms, whatever it sends first (a
 * TLS alert, say). */
static bool closed_within(int fd, int ms)
{
    char buf[512];
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        clock_gettime(CLOCK_MONOTONIC, &t);
        int left = ms - (int)((t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000);
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (left <= 0 || poll(&p, 1, left) <= 0)
            return false;
        if (recv(fd, buf, sizeof buf, 0) <= 0)
            return true;
    }
}

/* A client that connects and stalls in the handshake (nothing sent, or
 * half a ClientHello) holds no worker: with one thread another client is
 * served meanwhile, and http.idle.timeout.ms closes the stalled ones. */
static void test_tls_handshake_stall(void **state)
{
    (void)state;
    char c[400], k[400];
    snprintf(c, sizeof c, "tls.cert.file=%s", g_cert);
    snprintf(k, sizeof k, "tls.key.file=%s", g_key);
    const char *const extra[] = {c, k, "http.idle.timeout.ms=1000", "http.threads=1", NULL};
    ls_opts o = {.extra = extra, .listener = "https://127.0.0.1:0", .ca_file = g_cert};
    ls_server s;
    assert_int_equal(ls_start_opts(&s, &o), 0);
    int fds[2];
    static const unsigned char hello_start[] = {0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00, 0x01, 0xfc};
    for (int i = 0; i < 2; i++) {
        fds[i] = socket(AF_INET, SOCK_STREAM, 0);
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)s.port),
                                .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        assert_true(fds[i] >= 0);
        assert_int_equal(connect(fds[i], (struct sockaddr *)&a, sizeof a), 0);
    }
    assert_int_equal(send(fds[1], hello_start, sizeof hello_start, MSG_NOSIGNAL),
                     (ssize_t)sizeof hello_start);
    long st;
    char err[CURL_ERROR_SIZE];
    assert_int_equal(tls_get(s.port, g_cert, 0, NULL, &st, err), CURLE_OK);
    assert_int_equal(st, 200);
    /* a generous bound: the timeout is 1 s, the machine may be loaded */
    for (int i = 0; i < 2; i++) {
        bool closed = closed_within(fds[i], 20000);
        if (!closed)
            fprintf(stderr, "# stalled handshake %d still open after 20 s\n", i);
        assert_true(closed);
        close(fds[i]);
    }
    assert_int_equal(ls_stop(&s), 0);
    ls_cleanup(&s);
}

static int tls_teardown(void **state)
{
    (void)state;
    ls_stop(T);
    ls_cleanup(T);
    ls_scratch_remove();
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tls_serves_the_api),
        cmocka_unit_test(test_tls_versions),
        cmocka_unit_test(test_tls_handshake_stall),
        cmocka_unit_test(test_tls_settings_checked),
    };
    return cmocka_run_group_tests(tests, NULL, tls_teardown);
}
