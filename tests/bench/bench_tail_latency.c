/*
 * bench_tail_latency.c - append-to-delivery latency to parked long-polls.
 *
 * POLLERS long-polls (libcurl multi, one keep-alive connection each) are
 * parked at the high watermark H of TOPIC partition 0 with wait_ms=10000.
 * After SETTLE_MS, one record is appended on a separate keep-alive socket;
 * the clock is read just before the request is written.  Each poller's
 * latency is the time from that write to the first byte of its answer
 * arriving in this process, measured two ways:
 *   - arrival: the kernel's receive timestamp of the answer's first segment
 *     (SO_TIMESTAMPNS, read with a MSG_PEEK before libcurl reads it): when
 *     the answer reached the poller's socket, whatever this one client
 *     thread was doing at the time;
 *   - seen: the moment epoll reported the socket readable, which also counts
 *     the time this client spent on the answers ahead of it in the queue
 *     (about 10-15 us of libcurl each, on the two cores the server uses).
 * The pollers run on libcurl's socket interface over epoll, so the client
 * handles only the sockets that are ready; with curl_multi_perform and
 * poll() it walked all 100 on every wake-up, and its own work showed up in
 * the figures.  Then every poller parks again at H+1, and so on
 * for ROUNDS rounds (after a few uncounted warm-up rounds that open the
 * connections).  Prints p50/p90/p99/max over all deliveries, the same for
 * the last delivery of each round, and the append's own acknowledgement
 * latency.  Never pass/fail.
 *
 *   bench_tail_latency PORT TOPIC [POLLERS] [ROUNDS] [SETTLE_MS]
 */
#include <curl/curl.h>

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <sys/epoll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* The clock of kernel receive timestamps. */
static double realtime_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double pct(const double *sorted, size_t n, double p)
{
    if (!n)
        return 0;
    size_t i = (size_t)(p * (double)(n - 1) + 0.5);
    return sorted[i < n ? i : n - 1];
}

typedef struct poller {
    CURL *h;
    double t_first; /* first byte of the answer, 0 until then */
    double t_arrive; /* its kernel receive timestamp (CLOCK_REALTIME), 0 when unknown */
    size_t bytes;
    int done;
    char url[512];
} poller;

/* When the current batch of epoll events was returned: every socket in it
 * had data waiting by then. */
static double g_woke;

/* Kernel receive timestamp of what waits on each connection, by its local
 * port (libcurl tells a transfer's local port, not its socket), taken
 * before libcurl reads it; 0 when none was found. */
static double g_arrive[65536];

static int on_sockopt(void *ctx, curl_socket_t fd, curlsocktype purpose)
{
    (void)ctx;
    (void)purpose;
    int one = 1;
    if (setsockopt(fd, SOL_SOCKET, SO_TIMESTAMPNS, &one, sizeof one) != 0)
        perror("SO_TIMESTAMPNS");
    return CURL_SOCKOPT_OK;
}

/* Peeks at the first waiting byte of fd for its receive timestamp. */
static void note_arrival(int fd)
{
    struct sockaddr_in local;
    socklen_t alen = sizeof local;
    if (getsockname(fd, (struct sockaddr *)&local, &alen) != 0 || local.sin_family != AF_INET)
        return;
    double *at = &g_arrive[ntohs(local.sin_port)];
    char byte, ctl[CMSG_SPACE(sizeof(struct timespec))];
    struct iovec iov = {&byte, 1};
    struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl,
                         .msg_controllen = sizeof ctl};
    *at = 0;
    if (recvmsg(fd, &msg, MSG_PEEK | MSG_DONTWAIT) <= 0)
        return;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c))
        if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_TIMESTAMPNS) {
            struct timespec ts;
            memcpy(&ts, CMSG_DATA(c), sizeof ts);
            *at = (double)ts.tv_sec + ts.tv_nsec / 1e9;
        }
}

static size_t on_data(char *ptr, size_t size, size_t n, void *ctx)
{
    (void)ptr;
    poller *pl = ctx;
    if (pl->t_first == 0) {
        pl->t_first = g_woke;
        long port = 0;
        if (curl_easy_getinfo(pl->h, CURLINFO_LOCAL_PORT, &port) == CURLE_OK && port > 0 &&
            port < 65536)
            pl->t_arrive = g_arrive[port];
    }
    pl->bytes += size * n;
    return size * n;
}

/* GET .../offsets?spec=latest -> the high watermark, or -1. */
static size_t on_text(char *ptr, size_t size, size_t n, void *ctx)
{
    char *buf = ctx;
    size_t have = strlen(buf), add = size * n;
    if (have + add >= 4096)
        add = 4095 - have;
    memcpy(buf + have, ptr, add);
    buf[have + add] = 0;
    return size * n;
}

static long long latest_offset(int port, const char *topic)
{
    char url[512], text[4096] = {0};
    snprintf(url, sizeof url, "http://127.0.0.1:%d/v1/topics/%s/partitions/0/offsets?spec=latest",
             port, topic);
    CURL *h = curl_easy_init();
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_text);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, (void *)text);
    CURLcode rc = curl_easy_perform(h);
    curl_easy_cleanup(h);
    const char *at = strstr(text, "\"offset\":");
    return rc == CURLE_OK && at ? atoll(at + 9) : -1;
}

static int connect_loopback(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sin = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                              .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    int one = 1;
    if (fd < 0 || connect(fd, (struct sockaddr *)&sin, sizeof sin) != 0) {
        perror("connect");
        return -1;
    }
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return fd;
}

/* An HTTP response (Content-Length framed) read in pieces from a socket. */
typedef struct http_in {
    char buf[8192];
    size_t have;
    int status; /* 0 until complete */
    double t_done;
} http_in;

/* Reads what is there (non-blocking); sets status and t_done once whole. */
static void http_in_read(http_in *in, int fd)
{
    while (!in->status) {
        ssize_t n = recv(fd, in->buf + in->have, sizeof in->buf - 1 - in->have, MSG_DONTWAIT);
        if (n <= 0) {
            if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK))
                in->status = -1;
            return;
        }
        in->have += (size_t)n;
        in->buf[in->have] = 0;
        char *eoh = strstr(in->buf, "\r\n\r\n");
        if (!eoh)
            continue;
        const char *cl = strcasestr(in->buf, "\r\nContent-Length:");
        size_t body = cl ? (size_t)atol(cl + 17) : 0;
        if (in->have >= (size_t)(eoh + 4 - in->buf) + body) {
            in->status = atoi(in->buf + 9);
            in->t_done = now_s();
        }
    }
}

typedef struct loop {
    int ep;
    long timeout_ms; /* libcurl's timer, -1 when none */
} loop;

static int on_socket(CURL *e, curl_socket_t fd, int what, void *ctx, void *sockp)
{
    (void)e;
    (void)sockp;
    loop *lp = ctx;
    if (what == CURL_POLL_REMOVE) {
        epoll_ctl(lp->ep, EPOLL_CTL_DEL, fd, NULL);
        return 0;
    }
    struct epoll_event ev = {.events = (what & CURL_POLL_IN ? EPOLLIN : 0u) |
                                       (what & CURL_POLL_OUT ? EPOLLOUT : 0u),
                             .data.fd = fd};
    if (epoll_ctl(lp->ep, EPOLL_CTL_MOD, fd, &ev) != 0 && errno == ENOENT)
        epoll_ctl(lp->ep, EPOLL_CTL_ADD, fd, &ev);
    return 0;
}

static int on_timer(CURLM *m, long timeout_ms, void *ctx)
{
    (void)m;
    ((loop *)ctx)->timeout_ms = timeout_ms;
    return 0;
}

/* Waits up to max_ms for sockets (or libcurl's timer) and lets libcurl act on
 * its own; the append socket afd is in the same epoll only to end the wait. */
static void drive(CURLM *m, loop *lp, int afd, int max_ms)
{
    struct epoll_event ev[256];
    int wait = max_ms;
    if (lp->timeout_ms >= 0 && lp->timeout_ms < wait)
        wait = (int)lp->timeout_ms;
    int n = epoll_wait(lp->ep, ev, 256, wait), running;
    g_woke = now_s();
    if (n <= 0) {
        lp->timeout_ms = -1;
        curl_multi_socket_action(m, CURL_SOCKET_TIMEOUT, 0, &running);
        return;
    }
    for (int i = 0; i < n; i++) {
        if (ev[i].data.fd == afd)
            continue;
        if (ev[i].events & EPOLLIN)
            note_arrival(ev[i].data.fd);
        int flags = (ev[i].events & EPOLLIN ? CURL_CSELECT_IN : 0) |
                    (ev[i].events & EPOLLOUT ? CURL_CSELECT_OUT : 0) |
                    (ev[i].events & (EPOLLERR | EPOLLHUP) ? CURL_CSELECT_ERR : 0);
        curl_multi_socket_action(m, ev[i].data.fd, flags, &running);
    }
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: bench_tail_latency PORT TOPIC [POLLERS] [ROUNDS] [SETTLE_MS]\n");
        return 2;
    }
    int port = atoi(argv[1]);
    const char *topic = argv[2];
    int npoll = argc > 3 ? atoi(argv[3]) : 100;
    int rounds = argc > 4 ? atoi(argv[4]) : 200;
    int settle_ms = argc > 5 ? atoi(argv[5]) : 30;
    enum { WARMUP = 5 };
    if (npoll < 1 || npoll > 1000 || rounds < 1) {
        fprintf(stderr, "bad POLLERS or ROUNDS\n");
        return 2;
    }
    curl_global_init(CURL_GLOBAL_DEFAULT);
    long long hw = latest_offset(port, topic);
    if (hw < 0) {
        fprintf(stderr, "cannot read the high watermark of %s-0\n", topic);
        return 1;
    }
    CURLM *m = curl_multi_init();
    curl_multi_setopt(m, CURLMOPT_MAXCONNECTS, (long)npoll + 16);
    loop lp = {.ep = epoll_create1(0), .timeout_ms = -1};
    if (lp.ep < 0) {
        perror("epoll_create1");
        return 1;
    }
    curl_multi_setopt(m, CURLMOPT_SOCKETFUNCTION, on_socket);
    curl_multi_setopt(m, CURLMOPT_SOCKETDATA, &lp);
    curl_multi_setopt(m, CURLMOPT_TIMERFUNCTION, on_timer);
    curl_multi_setopt(m, CURLMOPT_TIMERDATA, &lp);
    poller *pl = calloc((size_t)npoll, sizeof *pl);
    for (int i = 0; i < npoll; i++) {
        pl[i].h = curl_easy_init();
        curl_easy_setopt(pl[i].h, CURLOPT_WRITEFUNCTION, on_data);
        curl_easy_setopt(pl[i].h, CURLOPT_WRITEDATA, &pl[i]);
        curl_easy_setopt(pl[i].h, CURLOPT_PRIVATE, &pl[i]);
        curl_easy_setopt(pl[i].h, CURLOPT_TCP_NODELAY, 1L);
        curl_easy_setopt(pl[i].h, CURLOPT_SOCKOPTFUNCTION, on_sockopt);
        curl_easy_setopt(pl[i].h, CURLOPT_TIMEOUT_MS, 20000L);
    }
    int afd = connect_loopback(port);
    if (afd < 0)
        return 1;
    struct epoll_event aev = {.events = EPOLLIN, .data.fd = afd};
    if (epoll_ctl(lp.ep, EPOLL_CTL_ADD, afd, &aev) != 0) {
        perror("epoll_ctl");
        return 1;
    }
    char req[1024];
    static const char body[] = "{\"records\":[{\"key\":\"k\",\"value\":\"tail-latency-record\"}]}";
    int reqlen = snprintf(req, sizeof req,
                          "POST /v1/topics/%s/partitions/0/records HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                          "Content-Type: application/json\r\nContent-Length: %zu\r\n\r\n%s",
                          topic, sizeof body - 1, body);

    size_t cap = (size_t)rounds * (size_t)npoll, nlat = 0;
    size_t narr = 0;
    double *arr = malloc(cap * sizeof *arr), *arr_last = malloc((size_t)rounds * sizeof *arr_last);
    double *lat = malloc(cap * sizeof *lat), *last = malloc((size_t)rounds * sizeof *last),
           *ack = malloc((size_t)rounds * sizeof *ack);
    if (!arr || !arr_last || !lat || !last || !ack) {
        fprintf(stderr, "out of memory for %zu samples\n", cap);
        return 1;
    }
    long early = 0, failed = 0, lost = 0, unstamped = 0;
    int counted = 0;
    for (int r = 0; r < rounds + WARMUP; r++) {
        for (int i = 0; i < npoll; i++) {
            snprintf(pl[i].url, sizeof pl[i].url,
                     "http://127.0.0.1:%d/v1/topics/%s/partitions/0/records?offset=%lld&wait_ms=10000",
                     port, topic, hw);
            curl_easy_setopt(pl[i].h, CURLOPT_URL, pl[i].url);
            pl[i].t_first = 0;
            pl[i].t_arrive = 0;
            pl[i].bytes = 0;
            pl[i].done = 0;
            curl_multi_add_handle(m, pl[i].h);
        }
        int ndone = 0;
        /* Let the polls reach the server and park (the first rounds also connect). */
        double settle_until = now_s() + (r < WARMUP ? 0.3 : settle_ms / 1000.0);
        while (now_s() < settle_until)
            drive(m, &lp, afd, 1);
        for (int i = 0; i < npoll; i++)
            if (pl[i].t_first != 0)
                early++;
        double t_send = now_s(), t_send_rt = realtime_s();
        if (write(afd, req, (size_t)reqlen) != reqlen) {
            perror("append write");
            return 1;
        }
        double deadline = t_send + 5.0;
        http_in in = {.have = 0};
        while ((ndone < npoll || !in.status) && now_s() < deadline) {
            drive(m, &lp, afd, 10);
            if (!in.status)
                http_in_read(&in, afd);
            CURLMsg *msg;
            int left;
            while ((msg = curl_multi_info_read(m, &left))) {
                if (msg->msg != CURLMSG_DONE)
                    continue;
                poller *p;
                curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&p);
                long code = 0;
                curl_easy_getinfo(msg->easy_handle, CURLINFO_RESPONSE_CODE, &code);
                if (msg->data.result != CURLE_OK || code != 200)
                    failed++;
                p->done = 1;
                ndone++;
            }
        }
        if (in.status != 200) {
            fprintf(stderr, "append answered %d\n", in.status);
            return 1;
        }
        double t_ack = in.t_done;
        double worst = 0, arr_worst = 0;
        for (int i = 0; i < npoll; i++) {
            if (!pl[i].done) {
                lost++;
                continue;
            }
            double l = pl[i].t_first - t_send;
            if (l > worst)
                worst = l;
            double a = pl[i].t_arrive ? pl[i].t_arrive - t_send_rt : -1;
            if (a > arr_worst)
                arr_worst = a;
            if (r >= WARMUP && a >= 0)
                arr[narr++] = a;
            else if (r >= WARMUP)
                unstamped++;
            if (r >= WARMUP)
                lat[nlat++] = l;
        }
        if (r >= WARMUP) {
            last[counted] = worst;
            arr_last[counted] = arr_worst;
            ack[counted] = t_ack - t_send;
            counted++;
        }
        for (int i = 0; i < npoll; i++)
            curl_multi_remove_handle(m, pl[i].h);
        if (lost)
            break;
        hw++;
    }
    close(afd);
    qsort(arr, narr, sizeof *arr, cmp_double);
    qsort(arr_last, (size_t)counted, sizeof *arr_last, cmp_double);
    qsort(lat, nlat, sizeof *lat, cmp_double);
    qsort(last, (size_t)counted, sizeof *last, cmp_double);
    qsort(ack, (size_t)counted, sizeof *ack, cmp_double);
    printf("tail latency: %d parked long-polls (wait_ms=10000), one 1-record append a round, %d rounds,"
           " %zu deliveries\n", npoll, counted, nlat);
    printf("  append-to-arrival, every poller:  p50 %.3f ms  p90 %.3f ms  p99 %.3f ms  max %.3f ms\n",
           pct(arr, narr, 0.5) * 1e3, pct(arr, narr, 0.9) * 1e3, pct(arr, narr, 0.99) * 1e3,
           narr ? arr[narr - 1] * 1e3 : 0);
    printf("  arrival at the last poller:       p50 %.3f ms  p99 %.3f ms  max %.3f ms\n",
           pct(arr_last, (size_t)counted, 0.5) * 1e3, pct(arr_last, (size_t)counted, 0.99) * 1e3,
           counted ? arr_last[counted - 1] * 1e3 : 0);
    printf("  append-to-seen, every poller:     p50 %.3f ms  p90 %.3f ms  p99 %.3f ms  max %.3f ms\n",
           pct(lat, nlat, 0.5) * 1e3, pct(lat, nlat, 0.9) * 1e3, pct(lat, nlat, 0.99) * 1e3,
           nlat ? lat[nlat - 1] * 1e3 : 0);
    printf("  seen at the last poller:          p50 %.3f ms  p99 %.3f ms  max %.3f ms\n",
           pct(last, (size_t)counted, 0.5) * 1e3, pct(last, (size_t)counted, 0.99) * 1e3,
           counted ? last[counted - 1] * 1e3 : 0);
    printf("  the append's own 200:             p50 %.3f ms  p99 %.3f ms\n",
           pct(ack, (size_t)counted, 0.5) * 1e3, pct(ack, (size_t)counted, 0.99) * 1e3);
    if (early || failed || lost || unstamped)
        printf("  anomalies: %ld answered before the append, %ld failed, %ld never answered, %ld "
               "without a receive timestamp\n", early, failed, lost, unstamped);
    for (int i = 0; i < npoll; i++) {
        curl_multi_remove_handle(m, pl[i].h);
        curl_easy_cleanup(pl[i].h);
    }
    curl_multi_cleanup(m);
    curl_global_cleanup();
    close(lp.ep);
    free(pl);
    free(arr);
    free(arr_last);
    free(lat);
    free(last);
    free(ack);
    return 0;
}
