/*
 * test_config_xfr_tls.c — a primary's `tls` mapping (src/conf/config_xfr_tls.c): every field
 * parsed, port 853 by default, the files read and checked at load (CA bundle, certificate and its
 * key), each error with its file:line and a message naming the key, copies and frees (under ASan:
 * a copy owns what it points to). The PEM files are made here with libcrypto.
 */
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <setjmp.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>

#include <cmocka.h>

#include "tern/conf/config.h"

#include "conf_test_util.h"

static char dir[64];
static char pin_a[48], pin_b[48];

/* a self-signed certificate for key, written with (or without) its key */
static void write_cert(const char *stem, EVP_PKEY *key, EVP_PKEY *written_key)
{
    X509 *c = X509_new();
    X509_set_version(c, 2);
    ASN1_INTEGER_set(X509_get_serialNumber(c), 1);
    X509_gmtime_adj(X509_getm_notBefore(c), 0);
    X509_gmtime_adj(X509_getm_notAfter(c), 3600);
    X509_set_pubkey(c, key);
    X509_NAME_add_entry_by_txt(X509_get_subject_name(c), "CN", MBSTRING_ASC,
                               (const unsigned char *)stem, -1, -1, 0);
    X509_set_issuer_name(c, X509_get_subject_name(c));
    assert_true(X509_sign(c, key, EVP_sha256()) > 0);
    char p[128];
    snprintf(p, sizeof(p), "%s/%s.pem", dir, stem);
    FILE *f = fopen(p, "w");
    assert_non_null(f);
    PEM_write_X509(f, c);
    fclose(f);
    snprintf(p, sizeof(p), "%s/%s.key", dir, stem);
    f = fopen(p, "w");
    assert_non_null(f);
    PEM_write_PrivateKey(f, written_key, NULL, NULL, 0, NULL, NULL);
    fclose(f);
    X509_free(c);
}

static int setup(void **state)
{
    (void)state;
    snprintf(dir, sizeof(dir), "/tmp/test_config_xfr_tls.XXXXXX");
    assert_non_null(mkdtemp(dir));
    EVP_PKEY *a = EVP_EC_gen("P-256"), *b = EVP_EC_gen("P-256");
    write_cert("me", a, a);
    write_cert("odd", a, b); /* its key is another's */
    EVP_PKEY_free(a);
    EVP_PKEY_free(b);
    /* two pins: any 32 bytes in base64 */
    unsigned char raw[32];
    memset(raw, 0xab, sizeof(raw));
    EVP_EncodeBlock((unsigned char *)pin_a, raw, 32);
    memset(raw, 0x01, sizeof(raw));
    EVP_EncodeBlock((unsigned char *)pin_b, raw, 32);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    const char *files[] = {"me.pem", "me.key", "odd.pem", "odd.key"};
    for (size_t i = 0; i < 4; i++) {
        char p[128];
        snprintf(p, sizeof(p), "%s/%s", dir, files[i]);
        unlink(p);
    }
    rmdir(dir);
    return 0;
}

static uint16_t port_of(const config_xfr_peer_t *p)
{
    return ntohs(((const struct sockaddr_in *)&p->addr)->sin_port);
}

/* every field, the default port 853, a given port kept, a copy that owns its strings */
static void test_tls_fields(void **state)
{
    (void)state;
    char text[2048];
    snprintf(text, sizeof(text),
             "zones:\n"
             "  - origin: s.test\n"
             "    primary:\n"
             "      - {address: 192.0.2.1, tls: {mode: strict, name: primary.example,\n"
             "         pin: [\"%s\", \"%s\"], ca: \"%s/me.pem\", certificate: \"%s/me.pem\",\n"
             "         key: \"%s/me.key\"}}\n"
             "      - {address: \"192.0.2.2@8853\", tls: {mode: opportunistic}}\n"
             "      - {address: 192.0.2.3, tls: ~}\n"
             "      - 192.0.2.4\n",
             pin_a, pin_b, dir, dir, dir);
    config_t c = load_text(text);
    assert_int_equal(c.nzones, 1);
    const config_zone_t *z = &c.zones[0];
    assert_int_equal(z->nprimaries, 4);
    const config_xfr_tls_t *t = z->primaries[0].tls;
    assert_non_null(t);
    assert_int_equal(t->mode, CONFIG_XFR_TLS_STRICT);
    assert_string_equal(t->name, "primary.example");
    assert_int_equal(t->npins, 2);
    assert_int_equal(t->pins[0][0], 0xab);
    assert_int_equal(t->pins[1][31], 0x01);
    char want[128];
    snprintf(want, sizeof(want), "%s/me.pem", dir);
    assert_string_equal(t->ca, want);
    assert_string_equal(t->certificate, want);
    snprintf(want, sizeof(want), "%s/me.key", dir);
    assert_string_equal(t->key, want);
    assert_int_equal(port_of(&z->primaries[0]), 853); /* XoT's port by default */
    assert_string_equal(z->primaries[0].text, "192.0.2.1@853");
    t = z->primaries[1].tls;
    assert_non_null(t);
    assert_int_equal(t->mode, CONFIG_XFR_TLS_OPPORTUNISTIC);
    assert_null(t->name);
    assert_int_equal(t->npins, 0);
    assert_null(t->ca);
    assert_int_equal(port_of(&z->primaries[1]), 8853);
    assert_null(z->primaries[2].tls); /* tls: ~ is clear text, port 53 */
    assert_int_equal(port_of(&z->primaries[2]), 53);
    assert_null(z->primaries[3].tls);
    config_t d;
    config_init(&d);
    assert_int_equal(config_copy(&d, &c), 0);
    config_free(&c); /* the copy must not point into it */
    t = d.zones[0].primaries[0].tls;
    assert_non_null(t);
    assert_ptr_not_equal(t, NULL);
    assert_string_equal(t->name, "primary.example");
    assert_string_equal(t->key, want);
    assert_int_equal(t->npins, 2);
    assert_int_equal(d.zones[0].primaries[1].tls->mode, CONFIG_XFR_TLS_OPPORTUNISTIC);
    assert_null(d.zones[0].primaries[2].tls);
    config_free(&d);
}

#define Z "zones:\n  - origin: s.test\n    primary: "

/* The error of a primary with `tls: <tls>`: "file:3: zones[0]: primary: tls: " and msg; a msg
 * ending in ": " is a prefix (OpenSSL's reason follows, worded by its version). */
static void expect_tls_error(const char *tls, const char *msg)
{
    char text[1024], want[1024], err[512] = "";
    snprintf(text, sizeof(text), Z "{address: 192.0.2.1, tls: %s}\n", tls);
    config_t c;
    config_init(&c);
    const char *path = write_tmp(text);
    int r = config_load(&c, path, err, sizeof(err));
    snprintf(want, sizeof(want), "%s:3: zones[0]: primary: tls: %s", path, msg);
    unlink(path);
    config_free(&c);
    size_t wl = strlen(want);
    bool prefix = wl > 2 && strcmp(want + wl - 2, ": ") == 0;
    if (r >= 0 || (prefix ? strncmp(err, want, wl) != 0 : strcmp(err, want) != 0))
        fail_msg("got r=%d err='%s'\nwant '%s'%s", r, err, want, prefix ? "..." : "");
}

/* each refusal names the key and says what is wrong */
static void test_tls_errors(void **state)
{
    (void)state;
    char buf[512], msg[512];
    expect_tls_error("{mode: loose, name: a.example}",
                     "mode: expected strict or opportunistic, got \"loose\"");
    expect_tls_error("{name: \"a b\"}", "name: expected a host name, got \"a b\"");
    expect_tls_error("{}", "strict TLS needs what to authenticate the primary by: name, pin or "
                           "both (RFC 8310 §6); or mode: opportunistic");
    expect_tls_error("{pin: \"AAAA\"}",
                     "pin: \"AAAA\" is not the base64 of a SHA-256 digest (32 bytes), as "
                     "`openssl x509 -pubkey -noout | openssl pkey -pubin -outform der | openssl "
                     "dgst -sha256 -binary | base64` prints");
    expect_tls_error("{pin: []}", "pin: an empty list");
    expect_tls_error("{name: a.example, ca: /nonexistent/ca.pem}", "ca: /nonexistent/ca.pem: ");
    snprintf(buf, sizeof(buf), "{pin: \"%s\", ca: \"%s/me.pem\"}", pin_a, dir);
    expect_tls_error(buf, "ca: a CA checks a certificate for a name: give name too");
    snprintf(buf, sizeof(buf), "{pin: \"%s\", certificate: \"%s/me.pem\"}", pin_a, dir);
    expect_tls_error(buf, "certificate and key: both or neither (mutual TLS)");
    snprintf(buf, sizeof(buf), "{pin: \"%s\", certificate: \"%s/odd.pem\", key: \"%s/odd.key\"}",
             pin_a, dir, dir);
    snprintf(msg, sizeof(msg), "key: %s/odd.key is not the key of %s/odd.pem", dir, dir);
    expect_tls_error(buf, msg);
    snprintf(buf, sizeof(buf), "{pin: \"%s\", certificate: \"%s/me.key\", key: \"%s/me.key\"}",
             pin_a, dir, dir);
    snprintf(msg, sizeof(msg), "certificate: %s/me.key: ", dir);
    expect_tls_error(buf, msg);
    expect_tls_error("{pin: \"AAAA\", port: 1}",
                     "unknown key \"port\" (want mode, name, pin, ca, certificate, key)");
    expect_error(Z "{address: 192.0.2.1, tls: yes}\n", 3,
                 "zones[0]: primary: tls: expected a mapping {mode, name, pin, ca, certificate, "
                 "key}, got a plain scalar");
    /* NOTIFY goes by datagram: no tls for a notify peer */
    expect_error("zones:\n  - origin: p.test\n    file: p.zone\n"
                 "    notify: [{address: 192.0.2.7, tls: {mode: opportunistic}}]\n",
                 4,
                 "zones[0]: notify[0]: tls: only a primary is reached over TLS (NOTIFY is a "
                 "datagram)");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tls_fields),
        cmocka_unit_test(test_tls_errors),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
