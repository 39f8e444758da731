/*
 * config_xfr_tls.c — a primary's `tls` mapping (XFR over TLS, RFC 9103): its mode, the identities
 * the primary must prove (name, pin), the CA its chain is checked against, and our own
 * certificate and key for mutual TLS.
 *
 * The names follow what operators know: NSD's tls-auth (auth-domain-name, client-cert,
 * client-key; nsd.conf(5)), BIND's tls block (ca-file, cert-file, key-file, remote-hostname;
 * named.conf(5)) and RFC 7858 §4.2's SPKI pin set (Knot's remote cert-key is the same digest).
 * Files are read and checked here, with libcrypto, so a missing CA, a certificate that is not
 * PEM or a key that is not the certificate's is a config error with file:line, not a refresh that
 * fails at 3 a.m.; the transfer service builds its TLS context from the same paths
 * (src/xfr/xfr_tls.c).
 */
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509_vfy.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config_blocks.h"
#include "tern/common/base64.h"
#include "tern/common/err.h"

enum { TL_MODE, TL_NAME, TL_PIN, TL_CA, TL_CERT, TL_KEY, TL_COUNT };
static const field_t tls_fields[TL_COUNT] = {
    [TL_MODE] = {"mode", "strict (default: authenticate or send nothing) | opportunistic", false,
                 NULL},
    [TL_NAME] = {"name", "the primary's name in its certificate (RFC 8310 auth domain name)", false,
                 NULL},
    [TL_PIN] = {"pin", "base64 SHA-256 of the primary's SubjectPublicKeyInfo, or a list", false,
                NULL},
    [TL_CA] = {"ca", "PEM CA bundle a name is checked against (default: the system store)", false,
               NULL},
    [TL_CERT] = {"certificate", "our PEM certificate (chain) for mutual TLS", false, NULL},
    [TL_KEY] = {"key", "its PEM private key", false, NULL},
};

/* The first libcrypto error's text (or what), for a config message. */
static const char *crypto_err(char *buf, size_t len, const char *what)
{
    unsigned long e = ERR_get_error();
    if (e)
        ERR_error_string_n(e, buf, len);
    else
        snprintf(buf, len, "%s", what);
    ERR_clear_error();
    return buf;
}

/* A non-empty path at n, resolved against the config's directory into *out. */
static int get_path(parse_ctx_t *pc, const yaml_node_t *n, const char *key, const char *field,
                    char **out)
{
    if (!is_text(n) || scalar(n)[0] == '\0')
        return config_fail(pc, n, key, "%s: expected a file name, got %s", field,
                           config_node_kind(n));
    if (!(*out = config_resolve_path(pc, scalar(n))))
        return TERN_ENOMEM;
    return 0;
}

/* One pin (base64 of 32 bytes) at n into t. */
static int add_pin(parse_ctx_t *pc, const yaml_node_t *n, const char *key, config_xfr_tls_t *t)
{
    if (!is_text(n))
        return config_fail(pc, n, key, "pin: expected base64 text, got %s", config_node_kind(n));
    if (t->npins == CONFIG_XFR_TLS_PINS_MAX)
        return config_fail(pc, n, key, "pin: more than %d pins", CONFIG_XFR_TLS_PINS_MAX);
    size_t len = 0;
    const char *s = scalar(n);
    if (tern_base64_decode(s, strlen(s), 0, t->pins[t->npins], 32, &len, NULL) < 0 || len != 32)
        return config_fail(pc, n, key,
                           "pin: \"%s\" is not the base64 of a SHA-256 digest (32 bytes), as "
                           "`openssl x509 -pubkey -noout | openssl pkey -pubin -outform der | "
                           "openssl dgst -sha256 -binary | base64` prints",
                           s);
    t->npins++;
    return 0;
}

/* ca: a bundle with at least one certificate. */
static int check_ca(parse_ctx_t *pc, const yaml_node_t *n, const char *key, const char *path)
{
    char e[256];
    X509_STORE *st = X509_STORE_new();
    if (!st)
        return TERN_ENOMEM;
    int ok = X509_STORE_load_file(st, path);
    X509_STORE_free(st);
    if (!ok)
        return config_fail(pc, n, key, "ca: %s: %s", path, crypto_err(e, sizeof(e), "no CA"));
    return 0;
}

/* certificate and key: PEM, and the key is the certificate's. */
static int check_pair(parse_ctx_t *pc, const yaml_node_t *cn, const yaml_node_t *kn,
                      const char *key, const config_xfr_tls_t *t)
{
    char e[256];
    int r = 0;
    X509 *cert = NULL;
    EVP_PKEY *pk = NULL;
    BIO *b = BIO_new_file(t->certificate, "r");
    if (!b || !(cert = PEM_read_bio_X509(b, NULL, NULL, NULL)))
        r = config_fail(pc, cn, key, "certificate: %s: %s", t->certificate,
                        crypto_err(e, sizeof(e), "not a PEM certificate"));
    BIO_free(b);
    b = r < 0 ? NULL : BIO_new_file(t->key, "r");
    if (r == 0 && (!b || !(pk = PEM_read_bio_PrivateKey(b, NULL, NULL, NULL))))
        r = config_fail(pc, kn, key, "key: %s: %s", t->key,
                        crypto_err(e, sizeof(e), "not a PEM private key (or encrypted)"));
    BIO_free(b);
    if (r == 0 && X509_check_private_key(cert, pk) != 1)
        r = config_fail(pc, kn, key, "key: %s is not the key of %s", t->key, t->certificate);
    ERR_clear_error();
    X509_free(cert);
    EVP_PKEY_free(pk);
    return r;
}

/* The values (val, from config_get_fields()) into t and their checks. */
static int fill(parse_ctx_t *pc, const yaml_node_t *n, const char *key,
                const yaml_node_t *const *val, config_xfr_tls_t *t)
{
    int r;
    if (val[TL_MODE]) {
        const char *m = is_text(val[TL_MODE]) ? scalar(val[TL_MODE]) : "";
        if (strcmp(m, "strict") == 0)
            t->mode = CONFIG_XFR_TLS_STRICT;
        else if (strcmp(m, "opportunistic") == 0)
            t->mode = CONFIG_XFR_TLS_OPPORTUNISTIC;
        else
            return config_fail(pc, val[TL_MODE], key,
                               "mode: expected strict or opportunistic, got \"%s\"", m);
    }
    if (val[TL_NAME]) {
        const char *s = is_text(val[TL_NAME]) ? scalar(val[TL_NAME]) : "";
        /* a host name: the SAN's dNSName is at most 253 characters */
        if (s[0] == '\0' || strlen(s) > 253 ||
            strspn(s, "abcdefghijklmnopqrstuvwxyz"
                      "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-_*") != strlen(s))
            return config_fail(pc, val[TL_NAME], key, "name: expected a host name, got \"%s\"", s);
        if (!(t->name = strdup(s)))
            return TERN_ENOMEM;
    }
    if (val[TL_PIN]) {
        const yaml_node_t *p = val[TL_PIN];
        if (p->type != YAML_SEQUENCE_NODE) {
            if ((r = add_pin(pc, p, key, t)) < 0)
                return r;
        } else {
            for (yaml_node_item_t *it = p->data.sequence.items.start;
                 it < p->data.sequence.items.top; it++)
                if ((r = add_pin(pc, node(pc, *it), key, t)) < 0)
                    return r;
            if (!t->npins)
                return config_fail(pc, p, key, "pin: an empty list");
        }
    }
    if (val[TL_CA] && ((r = get_path(pc, val[TL_CA], key, "ca", &t->ca)) < 0 ||
                       (r = check_ca(pc, val[TL_CA], key, t->ca)) < 0))
        return r;
    if (val[TL_CERT] && (r = get_path(pc, val[TL_CERT], key, "certificate", &t->certificate)) < 0)
        return r;
    if (val[TL_KEY] && (r = get_path(pc, val[TL_KEY], key, "key", &t->key)) < 0)
        return r;
    if (!t->certificate != !t->key)
        return config_fail(pc, n, key, "certificate and key: both or neither (mutual TLS)");
    if (t->certificate && (r = check_pair(pc, val[TL_CERT], val[TL_KEY], key, t)) < 0)
        return r;
    if (t->mode == CONFIG_XFR_TLS_STRICT && !t->name && !t->npins)
        return config_fail(pc, n, key,
                           "strict TLS needs what to authenticate the primary by: name, pin or "
                           "both (RFC 8310 §6); or mode: opportunistic");
    if (t->ca && !t->name)
        return config_fail(pc, val[TL_CA], key,
                           "ca: a CA checks a certificate for a name: give name too");
    return 0;
}

int config_get_xfr_tls(parse_ctx_t *pc, const yaml_node_t *n, const char *key,
                       config_xfr_tls_t **out)
{
    char k[128];
    snprintf(k, sizeof(k), "%s: tls", key);
    if (n->type != YAML_MAPPING_NODE)
        return config_fail(pc, n, k,
                           "expected a mapping {mode, name, pin, ca, certificate, key}, got %s",
                           config_node_kind(n));
    const yaml_node_t *val[TL_COUNT] = {NULL};
    int r = config_get_fields(pc, n, k, tls_fields, TL_COUNT, val);
    if (r < 0)
        return r;
    config_xfr_tls_t *t = calloc(1, sizeof(*t));
    if (!t)
        return TERN_ENOMEM;
    if ((r = fill(pc, n, k, val, t)) < 0) {
        config_xfr_tls_free(t);
        return r;
    }
    *out = t;
    return 0;
}

void config_xfr_tls_free(config_xfr_tls_t *t)
{
    if (!t)
        return;
    free(t->name);
    free(t->ca);
    free(t->certificate);
    free(t->key);
    free(t);
}

/* a copy of s (NULL stays NULL) into *d: false when out of memory */
static bool dup_opt(char **d, const char *s)
{
    *d = s ? strdup(s) : NULL;
    return !s || *d;
}

int config_xfr_tls_copy(config_xfr_tls_t **dst, const config_xfr_tls_t *src)
{
    *dst = NULL;
    if (!src)
        return 0;
    config_xfr_tls_t *t = calloc(1, sizeof(*t));
    if (!t)
        return TERN_ENOMEM;
    *t = *src;
    t->name = t->ca = t->certificate = t->key = NULL;
    if (!dup_opt(&t->name, src->name) || !dup_opt(&t->ca, src->ca) ||
        !dup_opt(&t->certificate, src->certificate) || !dup_opt(&t->key, src->key)) {
        config_xfr_tls_free(t);
        return TERN_ENOMEM;
    }
    *dst = t;
    return 0;
}
