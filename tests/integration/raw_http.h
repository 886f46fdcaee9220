/*
 * raw_http.h - plain TCP to the server under test, for requests libcurl
 * would not send: half a request, a body in pieces with pauses, several
 * requests in one write.  Include after cmocka.h.
 */
#ifndef TEST_RAW_HTTP_H
#define TEST_RAW_HTTP_H

#include <arpa/inet.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/types.h>

/* A connected socket to 127.0.0.1:port (asserts). */
static inline int tcp_connect(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof a), 0);
    return fd;
}

/* Sends len bytes in one call (asserts they all went). */
static inline void send_bytes(int fd, const void *data, size_t len)
{
    assert_int_equal(send(fd, data, len, MSG_NOSIGNAL), (ssize_t)len);
}

static inline void send_all(int fd, const char *text)
{
    send_bytes(fd, text, strlen(text));
}

#endif
