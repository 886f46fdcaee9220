/*
 * svc_tls.h - checks a TLS certificate and key before the server starts.
 *
 * libmicrohttpd reports a bad key pair only as a failure to listen, after the
 * data directory is locked and opened; checking the PEM here lets a refused
 * start name the file and the problem, with the other setting errors.
 */
#ifndef SVC_TLS_H
#define SVC_TLS_H

#include <stddef.h>

/* Returns 0 when cert holds a PEM certificate, key a PEM private key, and the
 * key belongs to the certificate; otherwise -1 with a message in msg. */
int svc_tls_check_pair(const char *cert, size_t cert_len, const char *key, size_t key_len,
                       char *msg, size_t msglen);

#endif
