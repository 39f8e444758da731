/*
 * tls.c — the DoT credentials (one SSL_CTX for every worker, replaced whole on SIGHUP) and the
 * non-blocking steps of a connection (tern/net/tls.h).
 *
 * Choices, as Knot's and NSD's DoT listeners make them:
 *   - TLS 1.2 and 1.3 only (RFC 8310 §9 / RFC 9325: nothing older); OpenSSL's default cipher
 *     lists, server preference. No renegotiation (a client could make us redo a handshake at
 *     will).
 *   - ALPN: "dot" is selected when offered (RFC 9103 §7.1 requires it of transfers); a client
 *     offering only other protocols is served without ALPN (RFC 7858 predates ALPN, and a stub
 *     that sends "h2" by mistake still gets answers); xfr_out refuses a transfer without it.
 *   - Resumption by tickets only (stateless: no shared session cache, no lock between
 *     workers), one ticket per handshake — a DNS client keeps one connection at a time, and
 *     each ticket costs an encryption and a record. The ticket keys are random per process and
 *     carried over a reload, so a restart (not a reload) ends resumption of older tickets.
 *   - client_ca: every client is asked for a certificate, none is required (a DoT stub has
 *     none); the verification result is kept for xfr_out's mutual TLS check (a transfer from
 *     a zone with transfer_tls: mutual), the handshake succeeds either way.
 *   - An EOF without close_notify is an ordinary EOF (SSL_OP_IGNORE_UNEXPECTED_EOF): DNS
 *     messages are length-framed, truncation cannot go unseen.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include "tern/common/err.h"
#include "tern/common/log.h"
#include "tern/common/rcu.h"
#include "tern/net/tls.h"

/* Session tickets issued after each full handshake (OpenSSL's default is 2): see the header. */
#define TLS_TICKETS 1

/* OpenSSL's ticket key material: name (16) + HMAC secret (32) + AES key (32). */
#define TLS_TICKET_KEYS_LEN 80

struct tls_server {
    SSL_CTX *ctx; /* published: the workers tern_rcu_deref() it at accept */
    char *certificate, *key, *client_ca;
    bool tickets;
    pthread_mutex_t mu; /* one reload at a time */
};

static const unsigned char ALPN_DOT[] = {3, 'd', 'o', 't'};

/* Select "dot" when the client offers it; otherwise go on without ALPN (see the top). */
static int alpn_select(SSL *s, const unsigned char **out, unsigned char *outlen,
                       const unsigned char *in, unsigned int inlen, void *arg)
{
    (void)s;
    (void)arg;
    unsigned char *sel = NULL;
    if (SSL_select_next_proto(&sel, outlen, ALPN_DOT, sizeof(ALPN_DOT), in, inlen) ==
        OPENSSL_NPN_NEGOTIATED) {
        *out = sel;
        return SSL_TLSEXT_ERR_OK;
    }
    return SSL_TLSEXT_ERR_NOACK;
}

/* Keep the handshake going whatever the client certificate: its result is recorded
 * (SSL_get_verify_result()) for the transfers that ask for it. */
static int verify_keep(int preverify, X509_STORE_CTX *x)
{
    (void)preverify;
    (void)x;
    return 1;
}

/* "what path: OpenSSL's reason" into err. */
static void ssl_fail(char *err, size_t errlen, const char *what, const char *path)
{
    char reason[256];
    unsigned long e = ERR_peek_error(); /* the first: the cause, not "PEM lib" */
    if (e)
        ERR_error_string_n(e, reason, sizeof(reason));
    else
        snprintf(reason, sizeof(reason), "%s", strerror(errno ? errno : EINVAL));
    ERR_clear_error();
    snprintf(err, errlen, "tls: %s %s: %s", what, path ? path : "", reason);
}

/* A new SSL_CTX with t's credentials, or NULL with the reason in err. */
static SSL_CTX *ctx_build(const tls_server_t *t, char *err, size_t errlen)
{
    ERR_clear_error();
    SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());
    if (!ctx) {
        ssl_fail(err, errlen, "SSL_CTX_new", NULL);
        return NULL;
    }
    (void)SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
    SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION | SSL_OP_CIPHER_SERVER_PREFERENCE |
                                 SSL_OP_IGNORE_UNEXPECTED_EOF |
                                 (t->tickets ? 0 : SSL_OP_NO_TICKET));
    /* tcp.c writes whatever part of its queue the kernel takes, and compacts the queue between
     * attempts: the bytes of a retried write may have moved */
    SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
    SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
    /* without one, OpenSSL fails every resumption once client certificates are asked for
     * (client_ca): a secondary's second transfer would not connect */
    static const unsigned char SID_CTX[] = "tern-dot";
    (void)SSL_CTX_set_session_id_context(ctx, SID_CTX, sizeof(SID_CTX) - 1);
    (void)SSL_CTX_set_num_tickets(ctx, t->tickets ? TLS_TICKETS : 0);
    SSL_CTX_set_alpn_select_cb(ctx, alpn_select, NULL);
    if (SSL_CTX_use_certificate_chain_file(ctx, t->certificate) != 1) {
        ssl_fail(err, errlen, "certificate", t->certificate);
        goto fail;
    }
    if (SSL_CTX_use_PrivateKey_file(ctx, t->key, SSL_FILETYPE_PEM) != 1) {
        ssl_fail(err, errlen, "key", t->key);
        goto fail;
    }
    if (SSL_CTX_check_private_key(ctx) != 1) {
        ssl_fail(err, errlen, "key does not match the certificate: key", t->key);
        goto fail;
    }
    if (t->client_ca) {
        STACK_OF(X509_NAME) *names = SSL_load_client_CA_file(t->client_ca);
        if (!names || SSL_CTX_load_verify_locations(ctx, t->client_ca, NULL) != 1) {
            sk_X509_NAME_pop_free(names, X509_NAME_free);
            ssl_fail(err, errlen, "client_ca", t->client_ca);
            goto fail;
        }
        SSL_CTX_set_client_CA_list(ctx, names);
        SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, verify_keep);
    }
    return ctx;
fail:
    SSL_CTX_free(ctx);
    return NULL;
}

static void server_free_paths(tls_server_t *t)
{
    free(t->certificate);
    free(t->key);
    free(t->client_ca);
}

tls_server_t *tls_server_new(const server_tls_settings_t *set, char *err, size_t errlen)
{
    tls_server_t *t = calloc(1, sizeof(*t));
    if (!t || !set->certificate || !set->key) {
        snprintf(err, errlen, "tls: %s",
                 t ? "a certificate and its key are required" : "out of memory");
        free(t);
        return NULL;
    }
    t->tickets = set->session_tickets;
    t->certificate = strdup(set->certificate);
    t->key = strdup(set->key);
    t->client_ca = set->client_ca ? strdup(set->client_ca) : NULL;
    if (!t->certificate || !t->key || (set->client_ca && !t->client_ca)) {
        snprintf(err, errlen, "tls: out of memory");
        goto fail;
    }
    if (!(t->ctx = ctx_build(t, err, errlen)))
        goto fail;
    pthread_mutex_init(&t->mu, NULL);
    return t;
fail:
    server_free_paths(t);
    free(t);
    return NULL;
}

int tls_server_reload(tls_server_t *t, char *err, size_t errlen)
{
    pthread_mutex_lock(&t->mu);
    SSL_CTX *fresh = ctx_build(t, err, errlen);
    if (!fresh) {
        pthread_mutex_unlock(&t->mu);
        return TERN_EINVAL;
    }
    /* the same ticket keys: tickets issued before the reload still resume */
    unsigned char keys[TLS_TICKET_KEYS_LEN];
    if (SSL_CTX_get_tlsext_ticket_keys(t->ctx, keys, sizeof(keys)) == 1)
        (void)SSL_CTX_set_tlsext_ticket_keys(fresh, keys, sizeof(keys));
    OPENSSL_cleanse(keys, sizeof(keys));
    SSL_CTX *old = tern_rcu_xchg(&t->ctx, fresh);
    /* a worker may hold old between its deref and SSL_new() (which takes a reference): free
     * only once every worker has passed a quiescent state */
    tern_rcu_synchronize();
    SSL_CTX_free(old);
    pthread_mutex_unlock(&t->mu);
    return 0;
}

void tls_server_free(tls_server_t *t)
{
    if (!t)
        return;
    SSL_CTX_free(t->ctx);
    pthread_mutex_destroy(&t->mu);
    server_free_paths(t);
    free(t);
}

SSL *tls_conn_new(tls_server_t *t, int fd)
{
    ERR_clear_error();
    SSL *s = SSL_new(tern_rcu_deref(t->ctx));
    if (!s)
        return NULL;
    if (SSL_set_fd(s, fd) != 1) {
        SSL_free(s);
        return NULL;
    }
    SSL_set_accept_state(s);
    return s;
}

/* The TLS_IO_* code of a failed call that returned r. */
static int io_code(SSL *s, int r)
{
    switch (SSL_get_error(s, r)) {
    case SSL_ERROR_WANT_READ:
        return TLS_IO_WANT_READ;
    case SSL_ERROR_WANT_WRITE:
        return TLS_IO_WANT_WRITE;
    case SSL_ERROR_ZERO_RETURN:
        return TLS_IO_EOF;
    case SSL_ERROR_SYSCALL:
        ERR_clear_error();
        return errno == 0 ? TLS_IO_EOF : TLS_IO_ERROR;
    default:
        ERR_clear_error(); /* nothing of it may leak into the next call's SSL_get_error() */
        return TLS_IO_ERROR;
    }
}

int tls_conn_handshake(SSL *s)
{
    ERR_clear_error();
    errno = 0;
    int r = SSL_do_handshake(s);
    return r == 1 ? 0 : io_code(s, r);
}

ssize_t tls_conn_read(SSL *s, void *buf, size_t len)
{
    size_t got = 0;
    ERR_clear_error();
    errno = 0;
    int r = SSL_read_ex(s, buf, len, &got);
    return r == 1 ? (ssize_t)got : io_code(s, r);
}

ssize_t tls_conn_write(SSL *s, const void *buf, size_t len)
{
    size_t put = 0;
    ERR_clear_error();
    errno = 0;
    int r = SSL_write_ex(s, buf, len, &put);
    return r == 1 ? (ssize_t)put : io_code(s, r);
}

size_t tls_conn_pending(const SSL *s)
{
    int n = SSL_pending(s);
    return n > 0 ? (size_t)n : 0;
}

bool tls_conn_resumed(const SSL *s)
{
    return SSL_session_reused(s) == 1;
}

bool tls_conn_alpn_dot(const SSL *s)
{
    const unsigned char *p = NULL;
    unsigned int n = 0;
    SSL_get0_alpn_selected(s, &p, &n);
    return n == 3 && memcmp(p, "dot", 3) == 0;
}

bool tls_conn_client_verified(const SSL *s)
{
    X509 *peer = SSL_get0_peer_certificate(s);
    return peer && SSL_get_verify_result(s) == X509_V_OK;
}

void tls_thread_init(void)
{
    sigset_t pipe;
    sigemptyset(&pipe);
    sigaddset(&pipe, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe, NULL);
}

void tls_conn_free(SSL *s)
{
    if (!s)
        return;
    if (SSL_is_init_finished(s)) {
        /* one non-blocking try at close_notify (the socket is non-blocking): a peer that does
         * not read it loses nothing, and we never wait for its reply */
        ERR_clear_error();
        (void)SSL_shutdown(s);
    }
    ERR_clear_error();
    SSL_free(s);
}
