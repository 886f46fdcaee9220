/*
 * svc_tls.c - see svc_tls.h.
 */
#include "svc_tls.h"

#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

/* Appends OpenSSL's first queued reason, which says what was wrong. */
static int fail(char *msg, size_t msglen, const char *what)
{
    unsigned long e = ERR_get_error();
    char reason[256] = "";
    if (e)
        ERR_error_string_n(e, reason, sizeof reason);
    ERR_clear_error();
    snprintf(msg, msglen, "%s%s%s", what, reason[0] ? ": " : "", reason);
    return -1;
}

/* OpenSSL's default, with no callback, asks for a pass phrase on the
 * terminal ("Enter PEM pass phrase"): a start under systemd or in a container
 * hung there, and an interactive one asked a question the settings cannot
 * answer.  No pass phrase is ever given, so an encrypted key fails to read. */
static int no_pass_phrase(char *buf, int size, int rwflag, void *u)
{
    (void)buf;
    (void)size;
    (void)rwflag;
    (void)u;
    return 0;
}

/* True when the key PEM is encrypted: PKCS#8 ("BEGIN ENCRYPTED PRIVATE KEY")
 * or the traditional form's "Proc-Type: 4,ENCRYPTED" header. */
static bool key_encrypted(const char *key, size_t key_len)
{
    return memmem(key, key_len, "-----BEGIN ENCRYPTED PRIVATE KEY-----", 37) ||
           memmem(key, key_len, "Proc-Type: 4,ENCRYPTED", 22);
}

int svc_tls_check_pair(const char *cert, size_t cert_len, const char *key, size_t key_len,
                       char *msg, size_t msglen)
{
    if (cert_len > INT_MAX || key_len > INT_MAX)
        return fail(msg, msglen, "the certificate or key file is too large");
    ERR_clear_error();
    BIO *cb = BIO_new_mem_buf(cert, (int)cert_len);
    BIO *kb = BIO_new_mem_buf(key, (int)key_len);
    X509 *x = NULL;
    EVP_PKEY *k = NULL;
    int rc;
    if (!cb || !kb)
        rc = fail(msg, msglen, "out of memory");
    else if (!(x = PEM_read_bio_X509(cb, NULL, NULL, NULL)))
        rc = fail(msg, msglen, "tls.cert.file holds no PEM certificate");
    else if (key_encrypted(key, key_len))
        rc = fail(msg, msglen,
                  "tls.key.file is encrypted, and logstore cannot be given its pass phrase; "
                  "store it decrypted (openssl pkey -in KEY -out PLAIN) and readable by the "
                  "server only");
    else if (!(k = PEM_read_bio_PrivateKey(kb, NULL, no_pass_phrase, NULL)))
        rc = fail(msg, msglen, "tls.key.file holds no unencrypted PEM private key");
    else if (X509_check_private_key(x, k) != 1)
        rc = fail(msg, msglen, "tls.key.file does not belong to the certificate in tls.cert.file");
    else
        rc = 0;
    X509_free(x);
    EVP_PKEY_free(k);
    BIO_free(cb);
    BIO_free(kb);
    return rc;
}
