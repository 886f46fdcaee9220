/*
 * bench_mhd_echo.c - the anchor for binary appends: the least an HTTP server
 * built on libmicrohttpd can do with the same POST.  Same thread model as
 * logstore's api_server.c (MHD's internal thread pool of 4 with epoll, the
 * same connection limit and idle timeout); every request's body is gathered
 * into a per-connection buffer as logstore gathers it (realloc + memcpy),
 * then dropped, and the answer is 200 with a tiny JSON object.  No routing,
 * no parsing, no storage: what is left is libmicrohttpd, the kernel and the
 * load generator.
 *
 *   bench_mhd_echo PORT [THREADS]      serves 127.0.0.1:PORT until SIGTERM/SIGINT
 */
#include <arpa/inet.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct body {
    char *buf;
    size_t len, cap;
} body;

static const char answer[] = "{\"ok\":true}";

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version, const char *upload,
                                  size_t *upload_size, void **con_cls)
{
    (void)cls;
    (void)url;
    (void)method;
    (void)version;
    body *b = *con_cls;
    if (!b) {
        if (!(b = calloc(1, sizeof *b)))
            return MHD_NO;
        *con_cls = b;
        return MHD_YES;
    }
    if (*upload_size) {
        size_t n = *upload_size;
        *upload_size = 0;
        if (b->len + n > b->cap) {
            size_t cap = b->cap ? b->cap : 4096;
            while (cap < b->len + n)
                cap *= 2;
            char *nb = realloc(b->buf, cap);
            if (!nb)
                return MHD_NO;
            b->buf = nb;
            b->cap = cap;
        }
        memcpy(b->buf + b->len, upload, n);
        b->len += n;
        return MHD_YES;
    }
    struct MHD_Response *r =
        MHD_create_response_from_buffer(sizeof answer - 1, (void *)answer, MHD_RESPMEM_PERSISTENT);
    if (!r)
        return MHD_NO;
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json");
    enum MHD_Result ret = MHD_queue_response(c, MHD_HTTP_OK, r);
    MHD_destroy_response(r);
    return ret;
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
    (void)cls;
    (void)c;
    (void)toe;
    body *b = *con_cls;
    if (b) {
        free(b->buf);
        free(b);
        *con_cls = NULL;
    }
}

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
    (void)sig;
    stop = 1;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: bench_mhd_echo PORT [THREADS]\n");
        return 2;
    }
    unsigned port = (unsigned)atoi(argv[1]);
    unsigned threads = argc > 2 ? (unsigned)atoi(argv[2]) : 4;
    struct sigaction sa = {.sa_handler = on_signal};
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    struct sockaddr_in sin = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                              .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    struct MHD_Daemon *d = MHD_start_daemon(
        MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_USE_ERROR_LOG, (uint16_t)port, NULL,
        NULL, on_request, NULL, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&sin,
        MHD_OPTION_THREAD_POOL_SIZE, threads, MHD_OPTION_CONNECTION_LIMIT, 10000,
        MHD_OPTION_CONNECTION_TIMEOUT, 60, MHD_OPTION_NOTIFY_COMPLETED, on_completed, NULL,
        MHD_OPTION_LISTENING_ADDRESS_REUSE, 1, MHD_OPTION_END);
    if (!d) {
        fprintf(stderr, "bench_mhd_echo: cannot listen on 127.0.0.1:%u\n", port);
        return 1;
    }
    printf("bench_mhd_echo: serving 127.0.0.1:%u with %u threads\n", port, threads);
    fflush(stdout);
    while (!stop)
        pause();
    MHD_stop_daemon(d);
    return 0;
}
