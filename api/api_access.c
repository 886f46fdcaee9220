/*
 * api_access.c - the access log (http.access.log) and the slow-request log
 * (http.slow.request.ms): one line per finished request,
 *
 *   access ADDR "METHOD TARGET" STATUS BYTES DURATION req=ID [slow=T] [end=WHY]
 *
 * at INFO, or at WARN with slow= when its handling took longer than
 * http.slow.request.ms.  Written from libmicrohttpd's completion callback,
 * the one place every request passes, refused or cut off included.
 */
#include "api_server_impl.h"

#include "eng_fs.h"
#include "eng_logger.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void *api__uri_logged(void *cls, const char *uri, struct MHD_Connection *c)
{
    (void)cls;
    (void)c;
    size_t n = strlen(uri);
    bool cut = n > API_LOG_TARGET_BYTES;
    if (cut)
        n = API_LOG_TARGET_BYTES;
    conn_state *st = calloc(1, sizeof *st + n + 1);
    if (!st)
        return NULL;
    memcpy(st->target, uri, n);
    st->target[n] = 0;
    st->target_cut = cut;
    st->start_us = eng_mono_us();
    st->route = -1;
    return st;
}

/* src with every byte that could end the quoted field or the line, or
 * fake another (a quote, a backslash, a space or any control byte), and
 * every byte past ASCII written as %XX, as in a URL: a target percent-encoded
 * by its client reads as it was sent, and one holding raw bytes (which
 * libmicrohttpd lets through) cannot forge or split a line. */
static void escape(char *out, size_t cap, const char *src, bool cut)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t o = 0;
    const unsigned char *p = (const unsigned char *)src;
    /* Room for one more escaped byte, the "..." of a cut and the NUL. */
    for (; *p && o + 7 < cap; p++) {
        if (*p <= 0x20 || *p >= 0x7f || *p == '"' || *p == '\\') {
            out[o++] = '%';
            out[o++] = hex[*p >> 4];
            out[o++] = hex[*p & 15];
        } else {
            out[o++] = (char)*p;
        }
    }
    out[o] = 0;
    if (cut || *p)
        memcpy(out + o, "...", 4);
}

/* Why a request ended other than by its answer being sent whole. */
static const char *end_reason(enum MHD_RequestTerminationCode toe)
{
    switch (toe) {
    case MHD_REQUEST_TERMINATED_COMPLETED_OK:
        return NULL;
    case MHD_REQUEST_TERMINATED_TIMEOUT_REACHED:
        return "idle_timeout";
    case MHD_REQUEST_TERMINATED_DAEMON_SHUTDOWN:
        return "shutdown";
    case MHD_REQUEST_TERMINATED_CLIENT_ABORT:
    case MHD_REQUEST_TERMINATED_READ_ERROR:
        return "client_closed";
    case MHD_REQUEST_TERMINATED_WITH_ERROR:
    default:
        return "error";
    }
}

static void client_address(struct MHD_Connection *c, char *out, size_t cap)
{
    snprintf(out, cap, "-");
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    const struct sockaddr *sa = ci ? ci->client_addr : NULL;
    if (!sa)
        return;
    if (sa->sa_family == AF_INET)
        inet_ntop(AF_INET, &((const struct sockaddr_in *)(const void *)sa)->sin_addr, out,
                  (socklen_t)cap);
    else if (sa->sa_family == AF_INET6)
        inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr, out,
                  (socklen_t)cap);
}

void api__log_request(api_server *s, struct MHD_Connection *c, conn_state *st,
                      enum MHD_RequestTerminationCode toe)
{
    if (!s->access_log && !st->slow)
        return;
    int64_t us = eng_mono_us() - st->start_us;
    char addr[INET6_ADDRSTRLEN + 1];
    client_address(c, addr, sizeof addr);
    int status = st->status;
    if (!status) {
        /* Answered by libmicrohttpd itself (a malformed request, headers
         * over its pool), before our handler saw it. */
        const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_HTTP_STATUS);
        if (ci)
            status = (int)ci->http_status;
    }
    /* The target is cut to keep the line within eng_logf's 1,024 bytes,
     * whose end (status, time, id) matters more than a long target's. */
    char method[3 * sizeof st->method + 8], target[720];
    escape(method, sizeof method, st->method[0] ? st->method : "-", false);
    escape(target, sizeof target, st->target[0] ? st->target : "-", st->target_cut);
    char status_txt[16] = "-", bytes_txt[32] = "-", slow_txt[40] = "", end_txt[32] = "";
    if (status)
        snprintf(status_txt, sizeof status_txt, "%d", status);
    /* A stream counts what it handed over; a fixed body or a file range is
     * known sent only when the request completed (libmicrohttpd does not say
     * how much of one went before the connection failed). */
    if (st->status && (st->streamed || toe == MHD_REQUEST_TERMINATED_COMPLETED_OK))
        snprintf(bytes_txt, sizeof bytes_txt, "%lluB", (unsigned long long)st->body_bytes);
    if (st->slow)
        snprintf(slow_txt, sizeof slow_txt, " slow=%.2fms", (double)st->handler_us / 1000.0);
    const char *why = st->client_left ? "client_closed" : end_reason(toe);
    if (why)
        snprintf(end_txt, sizeof end_txt, " end=%s", why);
    eng_logf(st->slow ? ENG_LOG_WARN : ENG_LOG_INFO, "access %s \"%s %s\" %s %s %.2fms req=%s%s%s",
             addr, method, target, status_txt, bytes_txt, (double)us / 1000.0,
             st->request_id[0] ? st->request_id : "-", slow_txt, end_txt);
}
