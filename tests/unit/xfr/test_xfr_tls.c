/*
 * test_xfr_tls.c — the XoT client (src/xfr/xfr_tls.h) against an OpenSSL server in a thread over
 * a socketpair, with a CA and certificates made here: strict authentication by name and by pin
 * and each refusal's reason, opportunistic mode going on, TLS 1.3 required, ALPN "dot", mutual
 * TLS, session resumption, and unusable files.
 */
#include <errno.h>
#include <fcntl.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "tern/common/err.h"
#include "xfr_tls.h"

static char dir[64];
static EVP_PKEY *ca_key, *srv_key, *cli_key, *other_key;
static X509 *ca_cert, *srv_cert, *cli_cert, *other_ca;
static char srv_pin[48], other_pin[48];

static EVP_PKEY *new_key(void)
{
    EVP_PKEY *k = EVP_EC_gen("P-256");
    assert_non_null(k);
    return k;
}

/* A certificate for key, signed by signer (NULL: self-signed CA), with san (NULL: none). */
static X509 *new_cert(EVP_PKEY *key, const char *cn, X509 *issuer, EVP_PKEY *signer,
                      const char *san)
{
    X509 *c = X509_new();
    X509_set_version(c, 2);
    ASN1_INTEGER_set(X509_get_serialNumber(c), (long)(intptr_t)key & 0x7fffffff);
    X509_gmtime_adj(X509_getm_notBefore(c), -60);
    X509_gmtime_adj(X509_getm_notAfter(c), 3600);
    X509_set_pubkey(c, key);
    X509_NAME *n = X509_get_subject_name(c);
    X509_NAME_add_entry_by_txt(n, "CN", MBSTRING_ASC, (const unsigned char *)cn, -1, -1, 0);
    X509_set_issuer_name(c, issuer ? X509_get_subject_name(issuer) : n);
    X509V3_CTX v3;
    X509V3_set_ctx(&v3, issuer ? issuer : c, c, NULL, NULL, 0);
    X509_EXTENSION *e =
        X509V3_EXT_conf_nid(NULL, &v3, NID_basic_constraints, issuer ? "CA:FALSE" : "CA:TRUE");
    X509_add_ext(c, e, -1);
    X509_EXTENSION_free(e);
    if (san) {
        e = X509V3_EXT_conf_nid(NULL, &v3, NID_subject_alt_name, san);
        X509_add_ext(c, e, -1);
        X509_EXTENSION_free(e);
    }
    assert_true(X509_sign(c, signer ? signer : key, EVP_sha256()) > 0);
    return c;
}

static void write_pem(const char *name, X509 *c, EVP_PKEY *k)
{
    char p[128];
    snprintf(p, sizeof(p), "%s/%s", dir, name);
    FILE *f = fopen(p, "w");
    assert_non_null(f);
    if (c)
        PEM_write_X509(f, c);
    if (k)
        PEM_write_PrivateKey(f, k, NULL, NULL, 0, NULL, NULL);
    fclose(f);
}

static void pin_of(EVP_PKEY *k, char *out)
{
    unsigned char *der = NULL, md[32];
    unsigned len = 0;
    int n = i2d_PUBKEY(k, &der);
    assert_true(n > 0);
    EVP_Digest(der, (size_t)n, md, &len, EVP_sha256(), NULL);
    OPENSSL_free(der);
    EVP_EncodeBlock((unsigned char *)out, md, 32);
}

static int setup(void **state)
{
    (void)state;
    snprintf(dir, sizeof(dir), "/tmp/test_xfr_tls.XXXXXX");
    assert_non_null(mkdtemp(dir));
    ca_key = new_key();
    srv_key = new_key();
    cli_key = new_key();
    other_key = new_key();
    ca_cert = new_cert(ca_key, "test CA", NULL, NULL, NULL);
    other_ca = new_cert(other_key, "other CA", NULL, NULL, NULL);
    srv_cert = new_cert(srv_key, "primary.example", ca_cert, ca_key, "DNS:primary.example");
    cli_cert = new_cert(cli_key, "tern.example", ca_cert, ca_key, NULL);
    write_pem("ca.pem", ca_cert, NULL);
    write_pem("other-ca.pem", other_ca, NULL);
    write_pem("cli.pem", cli_cert, NULL);
    write_pem("cli.key", NULL, cli_key);
    pin_of(srv_key, srv_pin);
    pin_of(other_key, other_pin);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    const char *files[] = {"ca.pem", "other-ca.pem", "cli.pem", "cli.key"};
    for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
        char p[128];
        snprintf(p, sizeof(p), "%s/%s", dir, files[i]);
        unlink(p);
    }
    rmdir(dir);
    X509_free(ca_cert);
    X509_free(other_ca);
    X509_free(srv_cert);
    X509_free(cli_cert);
    EVP_PKEY_free(ca_key);
    EVP_PKEY_free(srv_key);
    EVP_PKEY_free(cli_key);
    EVP_PKEY_free(other_key);
    return 0;
}

/* ---- the server ---------------------------------------------------------------------------- */

typedef struct {
    SSL_CTX *ctx;
    int fd;
    bool accepted, got_ping, alpn_dot, reused, client_cert;
} srv_t;

static int alpn_select(SSL *ssl, const unsigned char **out, unsigned char *outlen,
                       const unsigned char *in, unsigned inlen, void *arg)
{
    (void)ssl;
    srv_t *s = arg;
    if (inlen == 4 && memcmp(in, "\3dot", 4) == 0) {
        s->alpn_dot = true;
        *out = in + 1;
        *outlen = 3;
        return SSL_TLSEXT_ERR_OK;
    }
    return SSL_TLSEXT_ERR_NOACK;
}

/* a server context: TLS 1.2 at most when old; a client certificate from the CA when mutual */
static SSL_CTX *srv_ctx(srv_t *s, bool old, bool mutual)
{
    SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());
    assert_non_null(ctx);
    assert_int_equal(SSL_CTX_use_certificate(ctx, srv_cert), 1);
    assert_int_equal(SSL_CTX_use_PrivateKey(ctx, srv_key), 1);
    if (old)
        SSL_CTX_set_max_proto_version(ctx, TLS1_2_VERSION);
    SSL_CTX_set_alpn_select_cb(ctx, alpn_select, s);
    /* stateless tickets only: a cached session that saw a failed handshake would keep the
     * context alive past SSL_CTX_free() */
    SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
    if (mutual) {
        X509_STORE_add_cert(SSL_CTX_get_cert_store(ctx), ca_cert);
        SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, NULL);
    }
    return ctx;
}

/* one connection: handshake, "ping" in, "pong" out, close */
static void *srv_main(void *arg)
{
    srv_t *s = arg;
    SSL *ssl = SSL_new(s->ctx);
    SSL_set_fd(ssl, s->fd);
    if (SSL_accept(ssl) == 1) {
        s->accepted = true;
        s->reused = SSL_session_reused(ssl);
        X509 *pc = SSL_get1_peer_certificate(ssl);
        s->client_cert = pc != NULL;
        X509_free(pc);
        char b[4];
        size_t n = 0;
        if (SSL_read_ex(ssl, b, 4, &n) == 1 && n == 4 && memcmp(b, "ping", 4) == 0) {
            s->got_ping = true;
            SSL_write_ex(ssl, "pong", 4, &n);
        }
        SSL_shutdown(ssl);
    }
    SSL_free(ssl);
    close(s->fd);
    ERR_clear_error();
    return NULL;
}

/* ---- the client side ----------------------------------------------------------------------- */

typedef struct {
    int rc; /* the handshake's */
    char err[512];
    char desc[256];
    bool pong, resumed;
} run_t;

/* Wait for want on fd, two seconds at most. */
static void wait_for(int fd, short want)
{
    struct pollfd pf = {.fd = fd, .events = want};
    assert_int_equal(poll(&pf, 1, 2000), 1);
}

/* A connection from t to server s (its ctx set): handshake, then ping/pong if it passed. */
static run_t run(xfr_tls_t *t, srv_t *s)
{
    run_t r = {0};
    int sv[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    s->fd = sv[1];
    s->accepted = s->got_ping = s->alpn_dot = s->reused = s->client_cert = false;
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, srv_main, s), 0);
    fcntl(sv[0], F_SETFL, O_NONBLOCK);
    xfr_tls_conn_t *c = xfr_tls_conn_new(t, sv[0]);
    assert_non_null(c);
    while ((r.rc = xfr_tls_handshake(c, r.err, sizeof(r.err))) > 0)
        wait_for(sv[0], (short)r.rc);
    if (r.rc == 0) {
        xfr_tls_conn_describe(c, r.desc, sizeof(r.desc));
        r.resumed = xfr_tls_conn_resumed(c);
        char buf[8] = "ping";
        size_t done = 0;
        short want = 0;
        while (done < 4) {
            ssize_t k = xfr_tls_io(c, buf + done, 4 - done, true, &want);
            if (k < 0) /* a server that refused us may be gone already */
                break;
            if (k == 0)
                wait_for(sv[0], want);
            done += (size_t)k;
        }
        done = done == 4 ? 0 : 5;
        while (done < 4) {
            ssize_t k = xfr_tls_io(c, buf + done, 4 - done, false, &want);
            if (k < 0)
                break;
            if (k == 0)
                wait_for(sv[0], want);
            done += (size_t)k;
        }
        r.pong = done == 4 && memcmp(buf, "pong", 4) == 0;
    }
    xfr_tls_conn_free(c);
    close(sv[0]);
    pthread_join(th, NULL);
    return r;
}

static xfr_tls_t *client(config_xfr_tls_mode_t mode, const char *name, const char *ca,
                         const char *pin, bool cert)
{
    config_xfr_tls_t cfg = {.mode = mode, .name = (char *)name};
    char cap[128], certp[128], keyp[128];
    if (ca) {
        snprintf(cap, sizeof(cap), "%s/%s", dir, ca);
        cfg.ca = cap;
    }
    if (pin) {
        unsigned char raw[48];
        assert_int_equal(EVP_DecodeBlock(raw, (const unsigned char *)pin, (int)strlen(pin)), 33);
        memcpy(cfg.pins[0], raw, 32);
        cfg.npins = 1;
    }
    if (cert) {
        snprintf(certp, sizeof(certp), "%s/cli.pem", dir);
        snprintf(keyp, sizeof(keyp), "%s/cli.key", dir);
        cfg.certificate = certp;
        cfg.key = keyp;
    }
    char err[256];
    xfr_tls_t *t = xfr_tls_new(&cfg, "127.0.0.1@853", err, sizeof(err));
    if (!t)
        fail_msg("xfr_tls_new: %s", err);
    return t;
}

/* strict by name: authenticated, ALPN "dot", data both ways; the next connection resumes */
static void test_strict_name(void **state)
{
    (void)state;
    srv_t s = {0};
    s.ctx = srv_ctx(&s, false, false);
    xfr_tls_t *t = client(CONFIG_XFR_TLS_STRICT, "primary.example", "ca.pem", NULL, false);
    run_t r = run(t, &s);
    assert_int_equal(r.rc, 0);
    assert_true(s.alpn_dot);
    assert_true(s.got_ping);
    assert_true(r.pong);
    assert_false(r.resumed);
    assert_string_equal(r.desc, "TLSv1.3");
    r = run(t, &s);
    assert_int_equal(r.rc, 0);
    assert_true(r.resumed);
    assert_true(s.reused);
    assert_string_equal(r.desc, "TLSv1.3, resumed");
    assert_true(r.pong);
    xfr_tls_release(t);
    SSL_CTX_free(s.ctx);
}

/* strict refusals: each reason named, and the server never gets a byte of data */
static void test_strict_refusals(void **state)
{
    (void)state;
    srv_t s = {0};
    s.ctx = srv_ctx(&s, false, false);
    struct {
        const char *name, *ca, *pin, *why;
    } cases[] = {
        {"wrong.example", "ca.pem", NULL,
         "name mismatch: the certificate is not for wrong.example"},
        {"primary.example", "other-ca.pem", NULL, "untrusted CA: "},
        {NULL, NULL, other_pin, "pin mismatch: the primary's SPKI SHA-256 is "},
        /* both given: both must pass */
        {"primary.example", "ca.pem", other_pin, "pin mismatch"},
        {"wrong.example", "ca.pem", srv_pin, "name mismatch"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        xfr_tls_t *t =
            client(CONFIG_XFR_TLS_STRICT, cases[i].name, cases[i].ca, cases[i].pin, false);
        run_t r = run(t, &s);
        assert_int_equal(r.rc, TERN_EACCES);
        if (!strstr(r.err, cases[i].why))
            fail_msg("case %zu: \"%s\" lacks \"%s\"", i, r.err, cases[i].why);
        assert_non_null(strstr(r.err, "TLS authentication failed (strict)"));
        assert_false(s.got_ping);
        xfr_tls_release(t);
    }
    /* the right pin alone, and name with pin: authenticated */
    xfr_tls_t *t = client(CONFIG_XFR_TLS_STRICT, NULL, NULL, srv_pin, false);
    run_t r = run(t, &s);
    assert_int_equal(r.rc, 0);
    assert_true(r.pong);
    xfr_tls_release(t);
    t = client(CONFIG_XFR_TLS_STRICT, "primary.example", "ca.pem", srv_pin, false);
    r = run(t, &s);
    assert_int_equal(r.rc, 0);
    xfr_tls_release(t);
    SSL_CTX_free(s.ctx);
}

/* opportunistic: a failed check is told, the connection goes on encrypted */
static void test_opportunistic(void **state)
{
    (void)state;
    srv_t s = {0};
    s.ctx = srv_ctx(&s, false, false);
    xfr_tls_t *t = client(CONFIG_XFR_TLS_OPPORTUNISTIC, "wrong.example", "ca.pem", NULL, false);
    run_t r = run(t, &s);
    assert_int_equal(r.rc, 0);
    assert_true(r.pong);
    assert_non_null(strstr(r.desc, "TLSv1.3; unauthenticated: name mismatch"));
    xfr_tls_release(t);
    t = client(CONFIG_XFR_TLS_OPPORTUNISTIC, NULL, NULL, NULL, false);
    r = run(t, &s);
    assert_int_equal(r.rc, 0);
    assert_string_equal(r.desc, "TLSv1.3");
    xfr_tls_release(t);
    SSL_CTX_free(s.ctx);
}

/* a primary without TLS 1.3 is refused (RFC 9103 §7.1), in either mode */
static void test_tls13_required(void **state)
{
    (void)state;
    srv_t s = {0};
    s.ctx = srv_ctx(&s, true, false);
    xfr_tls_t *t = client(CONFIG_XFR_TLS_OPPORTUNISTIC, NULL, NULL, NULL, false);
    run_t r = run(t, &s);
    assert_int_equal(r.rc, TERN_EPROTO);
    assert_non_null(strstr(r.err, "TLS handshake"));
    assert_false(s.accepted);
    xfr_tls_release(t);
    SSL_CTX_free(s.ctx);
}

/* mutual TLS: our certificate goes when configured; without it the server refuses (TLS 1.3: it
 * says so after our side of the handshake, so the data exchange fails) */
static void test_mutual(void **state)
{
    (void)state;
    srv_t s = {0};
    s.ctx = srv_ctx(&s, false, true);
    xfr_tls_t *t = client(CONFIG_XFR_TLS_STRICT, "primary.example", "ca.pem", NULL, true);
    run_t r = run(t, &s);
    assert_int_equal(r.rc, 0);
    assert_true(s.client_cert);
    assert_true(r.pong);
    xfr_tls_release(t);
    t = client(CONFIG_XFR_TLS_STRICT, "primary.example", "ca.pem", NULL, false);
    r = run(t, &s);
    assert_false(s.got_ping);
    assert_false(r.pong);
    xfr_tls_release(t);
    SSL_CTX_free(s.ctx);
}

/* files that cannot be used: NULL and a reason naming the file */
static void test_bad_files(void **state)
{
    (void)state;
    char err[256] = "";
    config_xfr_tls_t cfg = {.name = "primary.example", .ca = "/nonexistent/ca.pem"};
    assert_null(xfr_tls_new(&cfg, "127.0.0.1@853", err, sizeof(err)));
    assert_non_null(strstr(err, "/nonexistent/ca.pem"));
    char cap[128];
    snprintf(cap, sizeof(cap), "%s/ca.pem", dir);
    config_xfr_tls_t c2 = {.name = "primary.example", .certificate = cap, .key = cap};
    assert_null(xfr_tls_new(&c2, "127.0.0.1@853", err, sizeof(err))); /* no private key */
    assert_non_null(strstr(err, cap));
}

/* one context serves every zone naming the same primary with the same settings */
static void test_matches(void **state)
{
    (void)state;
    char err[256], ca[128];
    snprintf(ca, sizeof(ca), "%s/ca.pem", dir);
    config_xfr_tls_t cfg = {.name = "primary.example", .ca = ca, .npins = 1};
    cfg.pins[0][0] = 7;
    xfr_tls_t *t = xfr_tls_new(&cfg, "192.0.2.1@853", err, sizeof(err));
    assert_non_null(t);
    char ca2[128];
    snprintf(ca2, sizeof(ca2), "%s", ca); /* equal text, another buffer */
    config_xfr_tls_t same = cfg;
    same.ca = ca2;
    assert_true(xfr_tls_matches(t, "192.0.2.1@853", &same));
    assert_false(xfr_tls_matches(t, "192.0.2.2@853", &same)); /* another primary */
    config_xfr_tls_t d = same;
    d.mode = CONFIG_XFR_TLS_OPPORTUNISTIC;
    assert_false(xfr_tls_matches(t, "192.0.2.1@853", &d));
    d = same;
    d.pins[0][0] = 8;
    assert_false(xfr_tls_matches(t, "192.0.2.1@853", &d));
    d = same;
    d.name = "other.example";
    assert_false(xfr_tls_matches(t, "192.0.2.1@853", &d));
    d = same;
    d.ca = NULL;
    assert_false(xfr_tls_matches(t, "192.0.2.1@853", &d));
    xfr_tls_release(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_strict_name),   cmocka_unit_test(test_strict_refusals),
        cmocka_unit_test(test_opportunistic), cmocka_unit_test(test_tls13_required),
        cmocka_unit_test(test_mutual),        cmocka_unit_test(test_bad_files),
        cmocka_unit_test(test_matches),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
