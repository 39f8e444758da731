/*
 * xfr_tls.c — the TLS client of zone transfers in (xfr_tls.h): OpenSSL contexts per primary,
 * non-blocking handshakes with the RFC 8310 / RFC 9103 authentication, reads and writes, and
 * session resumption.
 */
#include "xfr_tls.h"

#include <arpa/inet.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tern/common/err.h"

struct xfr_tls {
    unsigned refs; /* atomic */
    SSL_CTX *ctx;
    config_xfr_tls_mode_t mode;
    char peer[INET6_ADDRSTRLEN + 8]; /* what it was made for (xfr_tls_matches()) */
    char *ca, *certificate, *key;
    char *name;
    uint8_t pins[CONFIG_XFR_TLS_PINS_MAX][32];
    size_t npins;
    /* the last session ticket the primary gave an authenticated connection: the next pull
     * resumes it (one full handshake per primary, not per pull) */
    pthread_mutex_t mu;
    SSL_SESSION *sess;
};

struct xfr_tls_conn {
    xfr_tls_t *t;
    SSL *ssl;
    bool done;        /* handshake and checks passed */
    char unauth[200]; /* opportunistic: why it is not authenticated ("" if it is or not asked) */
    char error[160];  /* the last TLS error after the handshake (an alert), "" if none */
};

/* ALPN for XoT (RFC 9103 §7.1: "dot", as DoT, RFC 7858) in wire form */
static const unsigned char ALPN_DOT[] = {3, 'd', 'o', 't'};

static int ctx_index = -1, conn_index = -1;
static pthread_once_t index_once = PTHREAD_ONCE_INIT;

static void make_indexes(void)
{
    ctx_index = SSL_CTX_get_ex_new_index(0, NULL, NULL, NULL, NULL);
    conn_index = SSL_get_ex_new_index(0, NULL, NULL, NULL, NULL);
}

/* OpenSSL's first queued error (or what) into err; the queue cleared. */
static void ssl_reason(char *err, size_t errlen, const char *what)
{
    unsigned long e = ERR_get_error();
    char buf[256];
    if (e) {
        ERR_error_string_n(e, buf, sizeof(buf));
        snprintf(err, errlen, "%s: %s", what, buf);
    } else {
        snprintf(err, errlen, "%s", what);
    }
    ERR_clear_error();
}

/* A new session ticket (TLS 1.3: after the handshake, while reading): kept for the next pull,
 * only from a connection that passed its checks, so a session never vouches for a primary that
 * failed them. 1: we keep the reference. */
static int new_session(SSL *ssl, SSL_SESSION *sess)
{
    xfr_tls_t *t = SSL_CTX_get_ex_data(SSL_get_SSL_CTX(ssl), ctx_index);
    const xfr_tls_conn_t *c = SSL_get_ex_data(ssl, conn_index);
    if (!t || !c || !c->done)
        return 0;
    pthread_mutex_lock(&t->mu);
    SSL_SESSION *old = t->sess;
    t->sess = sess;
    pthread_mutex_unlock(&t->mu);
    SSL_SESSION_free(old);
    return 1;
}

/* a copy of s (NULL stays NULL) into *d: false when out of memory */
static bool dup_opt(char **d, const char *s)
{
    *d = s ? strdup(s) : NULL;
    return !s || *d;
}

static bool same_opt(const char *a, const char *b)
{
    return (!a && !b) || (a && b && strcmp(a, b) == 0);
}

bool xfr_tls_matches(const xfr_tls_t *t, const char *peer, const config_xfr_tls_t *cfg)
{
    return strcmp(t->peer, peer) == 0 && t->mode == cfg->mode && same_opt(t->name, cfg->name) &&
           t->npins == cfg->npins && memcmp(t->pins, cfg->pins, sizeof(t->pins)) == 0 &&
           same_opt(t->ca, cfg->ca) && same_opt(t->certificate, cfg->certificate) &&
           same_opt(t->key, cfg->key);
}

xfr_tls_t *xfr_tls_new(const config_xfr_tls_t *cfg, const char *peer, char *err, size_t errlen)
{
    pthread_once(&index_once, make_indexes);
    xfr_tls_t *t = calloc(1, sizeof(*t));
    if (!t) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    t->refs = 1;
    pthread_mutex_init(&t->mu, NULL);
    t->mode = cfg->mode;
    t->npins = cfg->npins;
    memcpy(t->pins, cfg->pins, sizeof(t->pins));
    snprintf(t->peer, sizeof(t->peer), "%s", peer);
    if (!dup_opt(&t->name, cfg->name) || !dup_opt(&t->ca, cfg->ca) ||
        !dup_opt(&t->certificate, cfg->certificate) || !dup_opt(&t->key, cfg->key)) {
        snprintf(err, errlen, "out of memory");
        goto fail;
    }
    if (!(t->ctx = SSL_CTX_new(TLS_client_method()))) {
        ssl_reason(err, errlen, "TLS context");
        goto fail;
    }
    SSL_CTX_set_ex_data(t->ctx, ctx_index, t);
    /* RFC 9103 §7.2: XoT is TLS 1.3 or later; a primary offering less is refused */
    SSL_CTX_set_min_proto_version(t->ctx, TLS1_3_VERSION);
    SSL_CTX_set_alpn_protos(t->ctx, ALPN_DOT, sizeof(ALPN_DOT));
    /* messages are length-framed (RFC 1035 §4.2.2): a cut is seen by the reader, and primaries
     * commonly close without close_notify after the last message */
    SSL_CTX_set_options(t->ctx, SSL_OP_IGNORE_UNEXPECTED_EOF);
    SSL_CTX_set_mode(t->ctx, SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
    /* verification runs in every mode and its result is judged after the handshake
     * (xfr_tls_handshake()), so the reason can be told and opportunistic mode go on */
    SSL_CTX_set_verify(t->ctx, SSL_VERIFY_NONE, NULL);
    if (cfg->name) {
        int ok = cfg->ca ? SSL_CTX_load_verify_locations(t->ctx, cfg->ca, NULL)
                         : SSL_CTX_set_default_verify_paths(t->ctx);
        if (!ok) {
            ssl_reason(err, errlen, cfg->ca ? cfg->ca : "the system CA store");
            goto fail;
        }
    }
    if (cfg->certificate) {
        if (SSL_CTX_use_certificate_chain_file(t->ctx, cfg->certificate) != 1) {
            ssl_reason(err, errlen, cfg->certificate);
            goto fail;
        }
        if (SSL_CTX_use_PrivateKey_file(t->ctx, cfg->key, SSL_FILETYPE_PEM) != 1 ||
            SSL_CTX_check_private_key(t->ctx) != 1) {
            ssl_reason(err, errlen, cfg->key);
            goto fail;
        }
    }
    SSL_CTX_set_session_cache_mode(t->ctx,
                                   SSL_SESS_CACHE_CLIENT | SSL_SESS_CACHE_NO_INTERNAL_STORE);
    SSL_CTX_sess_set_new_cb(t->ctx, new_session);
    return t;
fail:
    xfr_tls_release(t);
    return NULL;
}

xfr_tls_t *xfr_tls_retain(xfr_tls_t *t)
{
    if (t)
        __atomic_add_fetch(&t->refs, 1, __ATOMIC_RELAXED);
    return t;
}

void xfr_tls_release(xfr_tls_t *t)
{
    if (!t || __atomic_sub_fetch(&t->refs, 1, __ATOMIC_ACQ_REL) != 0)
        return;
    SSL_SESSION_free(t->sess);
    SSL_CTX_free(t->ctx);
    pthread_mutex_destroy(&t->mu);
    free(t->name);
    free(t->ca);
    free(t->certificate);
    free(t->key);
    free(t);
}

xfr_tls_conn_t *xfr_tls_conn_new(xfr_tls_t *t, int fd)
{
    /* OpenSSL writes with write(), not send(MSG_NOSIGNAL): a primary that closed first would
     * SIGPIPE the whole daemon. The calling thread (a puller, which does nothing else) keeps
     * SIGPIPE blocked from here on; the write fails with EPIPE instead. */
    sigset_t pipe;
    sigemptyset(&pipe);
    sigaddset(&pipe, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe, NULL);
    xfr_tls_conn_t *c = calloc(1, sizeof(*c));
    if (!c)
        return NULL;
    c->t = t;
    if (!(c->ssl = SSL_new(t->ctx)) || SSL_set_fd(c->ssl, fd) != 1)
        goto fail;
    SSL_set_ex_data(c->ssl, conn_index, c);
    if (t->name) {
        /* SNI, and the name the chain's leaf must carry (no partial wildcards: RFC 6125 §6.4.3) */
        if (SSL_set_tlsext_host_name(c->ssl, t->name) != 1 || SSL_set1_host(c->ssl, t->name) != 1)
            goto fail;
        SSL_set_hostflags(c->ssl, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
    }
    pthread_mutex_lock(&t->mu);
    if (t->sess)
        SSL_set_session(c->ssl, t->sess); /* a failure only costs a full handshake */
    pthread_mutex_unlock(&t->mu);
    ERR_clear_error();
    return c;
fail:
    ERR_clear_error();
    SSL_free(c->ssl);
    free(c);
    return NULL;
}

/* The SHA-256 of the certificate's DER SubjectPublicKeyInfo (RFC 7858 §4.2's pin) is one of t's
 * pins; its base64 into got when not. */
static bool pin_ok(const xfr_tls_t *t, X509 *cert, char *got, size_t gotlen)
{
    unsigned char *der = NULL, md[EVP_MAX_MD_SIZE];
    unsigned mdlen = 0;
    int n = i2d_X509_PUBKEY(X509_get_X509_PUBKEY(cert), &der);
    if (n <= 0 || !EVP_Digest(der, (size_t)n, md, &mdlen, EVP_sha256(), NULL) || mdlen != 32) {
        OPENSSL_free(der);
        snprintf(got, gotlen, "(no public key)");
        return false;
    }
    OPENSSL_free(der);
    for (size_t i = 0; i < t->npins; i++)
        if (memcmp(t->pins[i], md, 32) == 0)
            return true;
    unsigned char b64[48];
    EVP_EncodeBlock(b64, md, 32);
    snprintf(got, gotlen, "%s", (const char *)b64);
    return false;
}

/* Why the chain or the name failed, for verify result v. */
static void verify_reason(const xfr_tls_t *t, long v, char *why, size_t len)
{
    switch (v) {
    case X509_V_ERR_HOSTNAME_MISMATCH:
        snprintf(why, len, "name mismatch: the certificate is not for %s", t->name);
        break;
    case X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY:
    case X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT:
    case X509_V_ERR_DEPTH_ZERO_SELF_SIGNED_CERT:
    case X509_V_ERR_SELF_SIGNED_CERT_IN_CHAIN:
    case X509_V_ERR_CERT_UNTRUSTED:
    case X509_V_ERR_UNABLE_TO_VERIFY_LEAF_SIGNATURE:
        snprintf(why, len, "untrusted CA: %s", X509_verify_cert_error_string(v));
        break;
    default:
        snprintf(why, len, "certificate: %s", X509_verify_cert_error_string(v));
    }
}

/* The identities t asks for, checked on c's completed handshake: "" into why when all pass. A
 * resumed session passed them when it was made (only such sessions are kept). */
static void authenticate(const xfr_tls_conn_t *c, char *why, size_t len)
{
    const xfr_tls_t *t = c->t;
    why[0] = '\0';
    if (SSL_session_reused(c->ssl) || (!t->name && !t->npins))
        return;
    X509 *cert = SSL_get1_peer_certificate(c->ssl);
    if (!cert) {
        snprintf(why, len, "the primary sent no certificate");
        return;
    }
    long v = SSL_get_verify_result(c->ssl);
    char got[64];
    if (t->name && v != X509_V_OK)
        verify_reason(t, v, why, len);
    else if (t->npins && !pin_ok(t, cert, got, sizeof(got)))
        snprintf(why, len,
                 "pin mismatch: the primary's SPKI SHA-256 is %s, not one of the %zu "
                 "pins",
                 got, t->npins);
    X509_free(cert);
}

int xfr_tls_handshake(xfr_tls_conn_t *c, char *err, size_t errlen)
{
    ERR_clear_error();
    int r = SSL_connect(c->ssl);
    if (r != 1) {
        int e = SSL_get_error(c->ssl, r);
        if (e == SSL_ERROR_WANT_READ)
            return POLLIN;
        if (e == SSL_ERROR_WANT_WRITE)
            return POLLOUT;
        if (e == SSL_ERROR_ZERO_RETURN || (e == SSL_ERROR_SYSCALL && ERR_peek_error() == 0)) {
            ERR_clear_error();
            snprintf(err, errlen, "TLS handshake: the primary closed the connection");
            return TERN_ECONNRESET;
        }
        ssl_reason(err, errlen, "TLS handshake");
        return TERN_EPROTO;
    }
    char why[sizeof(c->unauth)];
    authenticate(c, why, sizeof(why));
    if (why[0] && c->t->mode == CONFIG_XFR_TLS_STRICT) {
        snprintf(err, errlen, "TLS authentication failed (strict): %s", why);
        return TERN_EACCES;
    }
    snprintf(c->unauth, sizeof(c->unauth), "%s", why);
    c->done = true;
    return 0;
}

ssize_t xfr_tls_io(xfr_tls_conn_t *c, void *buf, size_t len, bool wr, short *want)
{
    size_t n = 0;
    ERR_clear_error();
    int r = wr ? SSL_write_ex(c->ssl, buf, len, &n) : SSL_read_ex(c->ssl, buf, len, &n);
    if (r == 1)
        return (ssize_t)n;
    switch (SSL_get_error(c->ssl, r)) {
    case SSL_ERROR_WANT_READ:
        *want = POLLIN;
        return 0;
    case SSL_ERROR_WANT_WRITE:
        *want = POLLOUT;
        return 0;
    case SSL_ERROR_ZERO_RETURN:
        return TERN_ECONNRESET;
    case SSL_ERROR_SYSCALL:
        ERR_clear_error();
        return TERN_ECONNRESET;
    default: /* e.g. the primary's alert: "tlsv13 alert certificate required" */
        ssl_reason(c->error, sizeof(c->error), "TLS");
        return TERN_EPROTO;
    }
}

const char *xfr_tls_conn_error(const xfr_tls_conn_t *c)
{
    return c->error;
}

const char *xfr_tls_conn_describe(const xfr_tls_conn_t *c, char *buf, size_t len)
{
    snprintf(buf, len, "%s%s%s%s", SSL_get_version(c->ssl),
             SSL_session_reused(c->ssl) ? ", resumed" : "",
             c->unauth[0] ? "; unauthenticated: " : "", c->unauth);
    return buf;
}

bool xfr_tls_conn_resumed(const xfr_tls_conn_t *c)
{
    return SSL_session_reused(c->ssl) == 1;
}

void xfr_tls_conn_free(xfr_tls_conn_t *c)
{
    if (!c)
        return;
    if (c->done)
        (void)SSL_shutdown(c->ssl); /* non-blocking socket: sent now or never */
    ERR_clear_error();
    SSL_free(c->ssl);
    free(c);
}
