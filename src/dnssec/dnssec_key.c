/*
 * dnssec_key.c — see dnssec_key.h.
 *
 * Reading is three passes: the DNSKEY record (owner, TTL, flags, algorithm, key bytes) and the
 * private fields (raw bytes per BIND field name), both read by dnssec_key_text.c, then the
 * EVP_PKEY built from those fields, whose public half must be the DNSKEY's key bytes exactly.
 * Generating and writing go the other way: libcrypto makes the EVP_PKEY, its public half becomes
 * the DNSKEY and its private numbers the fields dnssec_key_text.c writes.
 */
#include "tern/dnssec/dnssec_key.h"

#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/ec.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/obj_mac.h>
#include <openssl/param_build.h>
#include <openssl/params.h>
#include <openssl/rsa.h>

#include "dnssec_key_int.h"
#include "tern/common/buf.h"
#include "tern/common/err.h"
#include "tern/common/file.h"

/* A key file is a few KB (RSA-4096's .private is 3.3 KB); the bound only keeps a wrong path (a
 * log, a zone) from being read whole into memory. */
#define KEY_FILE_MAX (64 * 1024)
#define RSA_BITS_MIN 1024
#define RSA_BITS_MAX 4096
#define RSA_BITS_DEF 2048
/* The text files written: an RSA-4096 .private is 3.3 KB. Reserved at once, so the secret is
 * never left behind in a buffer that realloc() moved. */
#define WRITE_BUF 8192

/* Free a text that held private key material. */
static void free_secret(char *s)
{
    if (s) {
        OPENSSL_cleanse(s, strlen(s));
        free(s);
    }
}

/* --- the key bytes of a DNSKEY */

/* The RSA modulus inside DNSKEY key bytes (RFC 3110 §2: exponent length in one byte, or a zero
 * and two bytes, the exponent, then the modulus). NULL if the layout is wrong. */
static const uint8_t *rsa_modulus(const uint8_t *key, size_t len, size_t *mlen)
{
    size_t off = 1, elen = len ? key[0] : 0;
    if (len >= 3 && key[0] == 0) {
        elen = (size_t)key[1] << 8 | key[2];
        off = 3;
    }
    if (elen == 0 || off + elen >= len)
        return NULL;
    *mlen = len - off - elen;
    return key + off + elen;
}

static unsigned rsa_bits(const uint8_t *m, size_t mlen)
{
    unsigned bits = (unsigned)(mlen - 1) * 8;
    for (unsigned v = m[0]; v; v >>= 1)
        bits++;
    return bits;
}

/* The key bytes have the size and layout their algorithm prescribes. NULL, or why not. */
static const char *key_check(uint8_t alg, const uint8_t *key, size_t len, char *why, size_t wl)
{
    size_t mlen = 0;
    const uint8_t *m;
    switch (alg) {
    case DNSSEC_ALG_ECDSAP256SHA256:
        if (len != 64)
            snprintf(why, wl, "an ECDSA P-256 key is 64 bytes (RFC 6605), this one %zu", len);
        return len != 64 ? why : NULL;
    case DNSSEC_ALG_ED25519:
        if (len != 32)
            snprintf(why, wl, "an Ed25519 key is 32 bytes (RFC 8080), this one %zu", len);
        return len != 32 ? why : NULL;
    default:
        if (!(m = rsa_modulus(key, len, &mlen)))
            return "the RSA exponent's length runs past the key (RFC 3110)";
        if (m[0] == 0)
            return "the RSA modulus starts with a zero byte";
        unsigned bits = rsa_bits(m, mlen);
        if (bits < RSA_BITS_MIN || bits > RSA_BITS_MAX) {
            snprintf(why, wl, "an RSA key of %u bits: %d..%d are supported", bits, RSA_BITS_MIN,
                     RSA_BITS_MAX);
            return why;
        }
        return NULL;
    }
}

/* --- EVP_PKEY from the fields and back, and its public half as DNSKEY bytes */

/* libcrypto's names of the RSA fields, in key_priv_t's order */
static const char *const rsa_params[KEY_RSA_FIELDS] = {
    OSSL_PKEY_PARAM_RSA_N,         OSSL_PKEY_PARAM_RSA_E,
    OSSL_PKEY_PARAM_RSA_D,         OSSL_PKEY_PARAM_RSA_FACTOR1,
    OSSL_PKEY_PARAM_RSA_FACTOR2,   OSSL_PKEY_PARAM_RSA_EXPONENT1,
    OSSL_PKEY_PARAM_RSA_EXPONENT2, OSSL_PKEY_PARAM_RSA_COEFFICIENT1,
};

static EVP_PKEY *pkey_fromdata(const char *type, OSSL_PARAM_BLD *bld)
{
    EVP_PKEY *pkey = NULL;
    OSSL_PARAM *params = OSSL_PARAM_BLD_to_param(bld);
    EVP_PKEY_CTX *ctx = params ? EVP_PKEY_CTX_new_from_name(NULL, type, NULL) : NULL;
    if (ctx && EVP_PKEY_fromdata_init(ctx) == 1)
        (void)EVP_PKEY_fromdata(ctx, &pkey, EVP_PKEY_KEYPAIR, params);
    EVP_PKEY_CTX_free(ctx);
    /* the private numbers were copied into params (libcrypto 3.0 has no OSSL_PARAM_clear_free) */
    for (OSSL_PARAM *q = params; q && q->key; q++)
        OPENSSL_cleanse(q->data, q->data_size);
    OSSL_PARAM_free(params);
    return pkey;
}

static EVP_PKEY *pkey_rsa(const key_priv_t *pv)
{
    EVP_PKEY *pkey = NULL;
    BIGNUM *bn[KEY_RSA_FIELDS] = {NULL};
    OSSL_PARAM_BLD *bld = OSSL_PARAM_BLD_new();
    if (!bld)
        goto fail;
    for (size_t i = 0; i < KEY_RSA_FIELDS; i++)
        if (!(bn[i] = BN_bin2bn(pv->v[i], (int)pv->len[i], NULL)) ||
            !OSSL_PARAM_BLD_push_BN(bld, rsa_params[i], bn[i]))
            goto fail;
    pkey = pkey_fromdata("RSA", bld);
fail:
    for (size_t i = 0; i < KEY_RSA_FIELDS; i++)
        BN_clear_free(bn[i]);
    OSSL_PARAM_BLD_free(bld);
    return pkey;
}

/* A P-256 key from its private scalar: BIND's file holds no public point, and libcrypto 3.0
 * does not derive one on import, so it is computed here (d·G) and imported with the scalar. */
static EVP_PKEY *pkey_ecdsa(const key_priv_t *pv, const char **why)
{
    EVP_PKEY *pkey = NULL;
    uint8_t pt[65];
    OSSL_PARAM_BLD *bld = OSSL_PARAM_BLD_new();
    EC_GROUP *g = EC_GROUP_new_by_curve_name_ex(NULL, NULL, NID_X9_62_prime256v1);
    EC_POINT *p = g ? EC_POINT_new(g) : NULL;
    BIGNUM *d = BN_bin2bn(pv->v[0], (int)pv->len[0], NULL);
    if (!bld || !p || !d)
        goto fail;
    if (BN_is_zero(d) || BN_cmp(d, EC_GROUP_get0_order(g)) >= 0) {
        *why = "PrivateKey is not a P-256 private key (out of range)";
        goto fail;
    }
    if (EC_POINT_mul(g, p, d, NULL, NULL, NULL) != 1 ||
        EC_POINT_point2oct(g, p, POINT_CONVERSION_UNCOMPRESSED, pt, sizeof(pt), NULL) !=
            sizeof(pt) ||
        !OSSL_PARAM_BLD_push_utf8_string(bld, OSSL_PKEY_PARAM_GROUP_NAME, SN_X9_62_prime256v1, 0) ||
        !OSSL_PARAM_BLD_push_BN(bld, OSSL_PKEY_PARAM_PRIV_KEY, d) ||
        !OSSL_PARAM_BLD_push_octet_string(bld, OSSL_PKEY_PARAM_PUB_KEY, pt, sizeof(pt)))
        goto fail;
    pkey = pkey_fromdata("EC", bld);
fail:
    BN_clear_free(d);
    EC_POINT_free(p);
    EC_GROUP_free(g);
    OSSL_PARAM_BLD_free(bld);
    return pkey;
}

/* The key the private fields make; NULL with *why set (or left for "out of memory"). */
static EVP_PKEY *pkey_from_fields(uint8_t alg, const key_priv_t *pv, const char **why)
{
    switch (alg) {
    case DNSSEC_ALG_RSASHA256:
        return pkey_rsa(pv);
    case DNSSEC_ALG_ECDSAP256SHA256:
        return pkey_ecdsa(pv, why);
    default:
        if (pv->len[0] != 32) {
            *why = "an Ed25519 PrivateKey is 32 bytes (RFC 8080)";
            return NULL;
        }
        /* the seed: libcrypto derives the public key from it */
        return EVP_PKEY_new_raw_private_key_ex(NULL, "ED25519", NULL, pv->v[0], 32);
    }
}

static int pub_rsa(const EVP_PKEY *pkey, uint8_t *out, size_t cap)
{
    BIGNUM *n = NULL, *e = NULL;
    int len = -1;
    if (EVP_PKEY_get_bn_param(pkey, OSSL_PKEY_PARAM_RSA_N, &n) == 1 &&
        EVP_PKEY_get_bn_param(pkey, OSSL_PKEY_PARAM_RSA_E, &e) == 1) {
        size_t el = (size_t)BN_num_bytes(e), ml = (size_t)BN_num_bytes(n);
        size_t hl = el > 255 ? 3 : 1;
        if (el > 0 && el <= 0xffff && hl + el + ml <= cap) {
            out[0] = hl == 1 ? (uint8_t)el : 0;
            if (hl == 3) {
                out[1] = (uint8_t)(el >> 8);
                out[2] = (uint8_t)el;
            }
            BN_bn2bin(e, out + hl);
            BN_bn2bin(n, out + hl + el);
            len = (int)(hl + el + ml);
        }
    }
    BN_free(n);
    BN_free(e);
    return len;
}

/* The public half of pkey as DNSKEY key bytes (RSA: RFC 3110; ECDSA: X || Y, RFC 6605;
 * Ed25519: RFC 8080) into out (cap bytes). Returns the length, or -1. */
static int pub_encode(uint8_t alg, const EVP_PKEY *pkey, uint8_t *out, size_t cap)
{
    if (alg == DNSSEC_ALG_RSASHA256)
        return pub_rsa(pkey, out, cap);
    if (alg == DNSSEC_ALG_ED25519) {
        size_t n = cap;
        return EVP_PKEY_get_raw_public_key(pkey, out, &n) == 1 && n == 32 ? 32 : -1;
    }
    BIGNUM *x = NULL, *y = NULL;
    int len = cap >= 64 && EVP_PKEY_get_bn_param(pkey, OSSL_PKEY_PARAM_EC_PUB_X, &x) == 1 &&
                      EVP_PKEY_get_bn_param(pkey, OSSL_PKEY_PARAM_EC_PUB_Y, &y) == 1 &&
                      BN_bn2binpad(x, out, 32) == 32 && BN_bn2binpad(y, out + 32, 32) == 32
                  ? 64
                  : -1;
    BN_free(x);
    BN_free(y);
    return len;
}

/* One signature made and verified with pkey. Comparing the public halves proves an ECDSA or
 * Ed25519 pair (its public key was derived from the private one), but for RSA only n and e were
 * compared: a wrong d and primes would show in every signature, so they are shown here, at load,
 * as is a key libcrypto refuses to sign with at all. */
static bool pkey_signs(uint8_t alg, EVP_PKEY *pkey)
{
    static const uint8_t msg[] = "tern: does this key sign?";
    const char *md = alg == DNSSEC_ALG_ED25519 ? NULL : "SHA256";
    uint8_t sig[DNSSEC_SIG_MAX + 16]; /* ECDSA's DER form is a few bytes longer than 64 */
    size_t sl = sizeof(sig);
    EVP_MD_CTX *c = EVP_MD_CTX_new();
    bool ok = c && EVP_DigestSignInit_ex(c, NULL, md, NULL, NULL, pkey, NULL) == 1 &&
              EVP_DigestSign(c, sig, &sl, msg, sizeof(msg)) == 1 && EVP_MD_CTX_reset(c) == 1 &&
              EVP_DigestVerifyInit_ex(c, NULL, md, NULL, NULL, pkey, NULL) == 1 &&
              EVP_DigestVerify(c, sig, sl, msg, sizeof(msg)) == 1;
    EVP_MD_CTX_free(c);
    return ok;
}

/* --- the key */

/* "K<zone>+AAA+TTTTT", the zone without its final dot ("K." for the root). The tag stays the
 * last five characters (dnssec_setup.c rewrites it in place), so a long zone name is shortened. */
static void key_label(dnssec_key_t *k)
{
    char zone[NAME_TEXT_MAX];
    int n = dname_to_str(k->owner, zone, sizeof(zone));
    if (n > 1)
        zone[--n] = '\0';
    int room = (int)sizeof(k->label) - 1 - 1 - 10; /* "K" and "+AAA+TTTTT" */
    if (n > room)
        snprintf(k->label, sizeof(k->label), "K%.*s...+%03u+%05u", room - 3, zone, k->alg, k->tag);
    else
        snprintf(k->label, sizeof(k->label), "K%.*s+%03u+%05u", n, zone, k->alg, k->tag);
}

/* A key with its DNSKEY RDATA made of flags, algorithm and key bytes; no pkey yet. */
static dnssec_key_t *key_new(const uint8_t *owner, uint32_t ttl, uint16_t flags, uint8_t alg,
                             const uint8_t *key, size_t keylen)
{
    dnssec_key_t *k = calloc(1, sizeof(*k));
    if (!k)
        return NULL;
    k->alg = alg;
    k->flags = flags;
    k->ttl = ttl;
    k->rdata[0] = (uint8_t)(flags >> 8);
    k->rdata[1] = (uint8_t)flags;
    k->rdata[2] = 3;
    k->rdata[3] = alg;
    memcpy(k->rdata + 4, key, keylen);
    k->rdlen = (uint16_t)(4 + keylen);
    k->tag = dnssec_key_tag(k->rdata, k->rdlen);
    (void)dname_lower(k->owner, owner);
    size_t mlen = 0;
    const uint8_t *m = alg == DNSSEC_ALG_RSASHA256 ? rsa_modulus(key, keylen, &mlen) : NULL;
    /* RFC 5702 §3: an RSA signature is as long as the modulus; RFC 6605 and 8080: 64 bytes */
    k->bits = (uint16_t)(m ? rsa_bits(m, mlen) : 256);
    k->siglen = (uint16_t)(m ? mlen : 64);
    key_label(k);
    return k;
}

/* The DNSKEY as read can be a key here: an algorithm we sign with, key bytes of its size and
 * layout, the owner the zone (when one is given). */
static int pub_check(const key_pub_t *pk, const uint8_t *zone, const key_src_t *ps, char *err,
                     size_t errlen)
{
    char wb[128];
    const char *why;
    if (!key_alg_supported(pk->alg)) {
        dnssec_key_text_err(ps, pk->line, err, errlen,
                            "algorithm %u (%s) is not supported: use 8, 13 or 15", pk->alg,
                            dnssec_key_text_alg_name(pk->alg));
        return TERN_ENOTSUP;
    }
    if ((why = key_check(pk->alg, pk->key, pk->keylen, wb, sizeof(wb)))) {
        dnssec_key_text_err(ps, pk->line, err, errlen, "%s", why);
        return TERN_ESYNTAX;
    }
    if (zone && !dname_equal(pk->owner, zone)) {
        char o[NAME_TEXT_MAX], z[NAME_TEXT_MAX];
        (void)dname_to_str(pk->owner, o, sizeof(o));
        (void)dname_to_str(zone, z, sizeof(z));
        dnssec_key_text_err(ps, pk->line, err, errlen, "the key's owner %s is not the zone %s", o,
                            z);
        return TERN_EOUTZONE;
    }
    return 0;
}

/* Parse a pair; priv_text NULL: the public key alone (pkey NULL), for DS records. */
static int parse_pair(const char *pub_text, const char *priv_text, const key_src_t *ps,
                      const key_src_t *vs, const uint8_t *zone, dnssec_key_t **out, char *err,
                      size_t errlen)
{
    int rc = TERN_ENOMEM;
    key_pub_t pk = {.alg = 0};
    key_priv_t *pv = NULL;
    char *pubc = dnssec_key_text_unescape(pub_text);
    char *privc = priv_text ? dnssec_key_text_unescape(priv_text) : NULL;
    EVP_PKEY *pkey = NULL;
    *out = NULL;
    ERR_clear_error();
    if (!pubc || (priv_text && (!privc || !(pv = calloc(1, sizeof(*pv)))))) {
        dnssec_key_text_err(ps, 0, err, errlen, "out of memory");
        goto fail;
    }
    if ((rc = dnssec_key_text_pub(pubc, ps, &pk, err, errlen)) < 0)
        goto fail;
    if ((rc = pub_check(&pk, zone, ps, err, errlen)) < 0)
        goto fail;
    if (pv) {
        if ((rc = dnssec_key_text_priv(privc, vs, pk.alg, pv, err, errlen)) < 0)
            goto fail;
        const char *bad = NULL;
        uint8_t mine[KEY_MAX];
        int ml = -1;
        if ((pkey = pkey_from_fields(pk.alg, pv, &bad)))
            ml = pub_encode(pk.alg, pkey, mine, sizeof(mine));
        rc = TERN_EINVAL;
        if (ml < 0) {
            dnssec_key_text_err(vs, 0, err, errlen, "%s",
                                bad ? bad : "libcrypto does not take these fields as a key");
            goto fail;
        }
        if ((size_t)ml != pk.keylen || memcmp(mine, pk.key, pk.keylen) != 0) {
            dnssec_key_text_err(vs, 0, err, errlen,
                                "the private key is not the pair of the DNSKEY%s%s",
                                vs->what ? "" : " in ", vs->what ? "" : ps->name);
            goto fail;
        }
        if (!pkey_signs(pk.alg, pkey)) {
            dnssec_key_text_err(vs, 0, err, errlen,
                                "the private fields make signatures the DNSKEY does not verify");
            goto fail;
        }
    }
    dnssec_key_t *k = key_new(pk.owner, pk.ttl, pk.flags, pk.alg, pk.key, pk.keylen);
    if (!k) {
        rc = TERN_ENOMEM;
        dnssec_key_text_err(ps, 0, err, errlen, "out of memory");
        goto fail;
    }
    k->pkey = pkey;
    pkey = NULL;
    *out = k;
    rc = 0;
fail:
    EVP_PKEY_free(pkey);
    if (pv) {
        OPENSSL_cleanse(pv, sizeof(*pv));
        free(pv);
    }
    free_secret(privc);
    free(pubc);
    ERR_clear_error(); /* the signer reads this thread's queue for its own messages */
    return rc;
}

int dnssec_key_parse(const char *pub_text, const char *priv_text, const char *where,
                     const uint8_t *zone, dnssec_key_t **out, char *err, size_t errlen)
{
    const key_src_t ps = {where ? where : "key", "DNSKEY"}, vs = {ps.name, "private key"};
    *out = NULL;
    if (!pub_text || !priv_text) {
        dnssec_key_text_err(pub_text ? &vs : &ps, 0, err, errlen, "missing");
        return TERN_EINVAL;
    }
    return parse_pair(pub_text, priv_text, &ps, &vs, zone, out, err, errlen);
}

/* --- files */

/* The whole file as a NUL-terminated string, wiped if the read fails (a private key). */
static int read_text(const char *path, char **out, char *err, size_t errlen)
{
    return tern_file_read_text(path, KEY_FILE_MAX, true, out, err, errlen);
}

int dnssec_key_paths(const char *path, char *pub, char *priv, size_t len)
{
    size_t n = strlen(path);
    if (n > 4 && strcmp(path + n - 4, ".key") == 0)
        n -= 4;
    else if (n > 8 && strcmp(path + n - 8, ".private") == 0)
        n -= 8;
    int a = snprintf(pub, len, "%.*s.key", (int)n, path);
    int b = snprintf(priv, len, "%.*s.private", (int)n, path);
    return a < 0 || (size_t)a >= len || b < 0 || (size_t)b >= len ? TERN_ENOSPC : 0;
}

static int load(const char *path, bool with_private, const uint8_t *zone, dnssec_key_t **out,
                char *err, size_t errlen)
{
    char pubp[PATH_MAX], privp[PATH_MAX];
    char *pub = NULL, *priv = NULL;
    *out = NULL;
    int rc = dnssec_key_paths(path, pubp, privp, sizeof(pubp));
    if (rc < 0) {
        tern_set_err(err, errlen, "%.200s...: path too long", path);
        return rc;
    }
    if ((rc = read_text(pubp, &pub, err, errlen)) < 0 ||
        (with_private && (rc = read_text(privp, &priv, err, errlen)) < 0))
        goto fail;
    const key_src_t ps = {pubp, NULL}, vs = {privp, NULL};
    rc = parse_pair(pub, priv, &ps, &vs, zone, out, err, errlen);
fail:
    free(pub);
    free_secret(priv);
    return rc;
}

int dnssec_key_load(const char *path, const uint8_t *zone, dnssec_key_t **out, char *err,
                    size_t errlen)
{
    return load(path, true, zone, out, err, errlen);
}

int dnssec_key_load_public(const char *path, const uint8_t *zone, dnssec_key_t **out, char *err,
                           size_t errlen)
{
    return load(path, false, zone, out, err, errlen);
}

/* --- generating */

int dnssec_key_generate(const uint8_t *zone, unsigned alg, bool ksk, unsigned rsa_bits,
                        dnssec_key_t **out, char *err, size_t errlen)
{
    EVP_PKEY *pkey = NULL;
    *out = NULL;
    ERR_clear_error();
    if (dname_check(zone, DNAME_MAXLEN) < 0) {
        tern_set_err(err, errlen, "generating a key: bad zone name");
        return TERN_EINVAL;
    }
    if (!key_alg_supported(alg)) {
        tern_set_err(err, errlen, "algorithm %u (%s) is not supported: use 8, 13 or 15", alg,
                     dnssec_key_text_alg_name(alg));
        return TERN_ENOTSUP;
    }
    unsigned bits = rsa_bits ? rsa_bits : RSA_BITS_DEF;
    if (alg == DNSSEC_ALG_RSASHA256 && (bits < RSA_BITS_MIN || bits > RSA_BITS_MAX)) {
        tern_set_err(err, errlen, "an RSA key of %u bits: %d..%d are supported", bits, RSA_BITS_MIN,
                     RSA_BITS_MAX);
        return TERN_ERANGE;
    }
    if (alg == DNSSEC_ALG_RSASHA256)
        pkey = EVP_RSA_gen(bits); /* public exponent 65537 */
    else if (alg == DNSSEC_ALG_ECDSAP256SHA256)
        pkey = EVP_PKEY_Q_keygen(NULL, NULL, "EC", "P-256");
    else
        pkey = EVP_PKEY_Q_keygen(NULL, NULL, "ED25519");
    uint8_t key[KEY_MAX];
    int kl = pkey ? pub_encode((uint8_t)alg, pkey, key, sizeof(key)) : -1;
    if (kl < 0) {
        char e[256];
        ERR_error_string_n(ERR_peek_last_error(), e, sizeof(e));
        tern_set_err(err, errlen, "generating an algorithm %u key failed: %s", alg, e);
        EVP_PKEY_free(pkey);
        ERR_clear_error();
        return TERN_ENOMEM;
    }
    dnssec_key_t *k =
        key_new(zone, 0, ksk ? DNSSEC_FLAGS_KSK : DNSSEC_FLAGS_ZSK, (uint8_t)alg, key, (size_t)kl);
    if (!k) {
        tern_set_err(err, errlen, "out of memory");
        EVP_PKEY_free(pkey);
        return TERN_ENOMEM;
    }
    k->pkey = pkey;
    *out = k;
    return 0;
}

/* --- writing */

/* One BIGNUM of pkey as field i: pad bytes long, or as short as it goes when pad is 0. */
static bool bn_field(const EVP_PKEY *pkey, const char *param, int pad, key_priv_t *pv, size_t i)
{
    BIGNUM *bn = NULL;
    bool ok = EVP_PKEY_get_bn_param(pkey, param, &bn) == 1;
    int n = ok ? (pad ? pad : BN_num_bytes(bn)) : 0;
    ok = ok && n > 0 && n <= RSA_FIELD_MAX && BN_bn2binpad(bn, pv->v[i], n) == n;
    pv->len[i] = ok ? (size_t)n : 0;
    BN_clear_free(bn);
    return ok;
}

/* The private fields of k as BIND writes them (the values libcrypto holds); false on failure. */
static bool pkey_fields(const dnssec_key_t *k, key_priv_t *pv)
{
    if (k->alg == DNSSEC_ALG_ED25519) {
        pv->len[0] = RSA_FIELD_MAX;
        return EVP_PKEY_get_raw_private_key(k->pkey, pv->v[0], &pv->len[0]) == 1 &&
               pv->len[0] == 32;
    }
    if (k->alg == DNSSEC_ALG_ECDSAP256SHA256) /* the scalar is 32 bytes (RFC 6605 §6.1) */
        return bn_field(k->pkey, OSSL_PKEY_PARAM_PRIV_KEY, 32, pv, 0);
    for (size_t i = 0; i < KEY_RSA_FIELDS; i++)
        if (!bn_field(k->pkey, rsa_params[i], 0, pv, i))
            return false;
    return true;
}

/* A new file at path (never an existing one, nor through a symlink) holding b, synced: a key
 * whose DS goes to the parent must survive a crash. */
static int write_new(const char *path, mode_t mode, const tern_buf_t *b, char *err, size_t errlen)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, mode);
    if (fd < 0) {
        int rc = -errno;
        tern_set_err(err, errlen, "%s: %s", path,
                     rc == TERN_EEXIST ? "exists already (never overwritten)" : strerror(-rc));
        return rc;
    }
    size_t off = 0;
    int rc = 0;
    while (off < b->len && rc == 0) {
        ssize_t r = write(fd, b->p + off, b->len - off);
        if (r < 0 && errno != EINTR)
            rc = -errno;
        else if (r > 0)
            off += (size_t)r;
    }
    if (rc == 0 && fsync(fd) < 0)
        rc = -errno;
    if (close(fd) < 0 && rc == 0)
        rc = -errno;
    if (rc < 0) {
        tern_set_err(err, errlen, "%s: %s", path, strerror(-rc));
        unlink(path);
    }
    return rc;
}

/* The texts of k's BIND pair into pb (.private) and kb (.key), reserved here; name names the pair
 * in messages. 0 or a negative TERN_E* with err set. */
static int pair_texts(const dnssec_key_t *k, const char *name, tern_buf_t *pb, tern_buf_t *kb,
                      char *err, size_t errlen)
{
    if (!k->pkey) {
        tern_set_err(err, errlen, "%s: no private key to write", k->label);
        return TERN_EINVAL;
    }
    key_priv_t *pv = calloc(1, sizeof(*pv));
    int rc = TERN_ENOMEM;
    if (!pv || !tern_buf_reserve(pb, WRITE_BUF - 1) || !tern_buf_reserve(kb, 2048)) {
        tern_set_err(err, errlen, "%s: out of memory", k->label);
        goto fail;
    }
    rc = TERN_EINVAL;
    if (!pkey_fields(k, pv)) {
        tern_set_err(err, errlen, "%s: libcrypto did not give the private key's fields", name);
        goto fail;
    }
    rc = dnssec_key_text_files(k, pv, name, pb, kb, err, errlen);
fail:
    if (pv) {
        OPENSSL_cleanse(pv, sizeof(*pv));
        free(pv);
    }
    ERR_clear_error();
    return rc;
}

static void pair_free(tern_buf_t *pb, tern_buf_t *kb)
{
    if (pb->p)
        OPENSSL_cleanse(pb->p, pb->cap);
    tern_buf_free(pb);
    tern_buf_free(kb);
}

int dnssec_key_write(const dnssec_key_t *k, const char *dir, char *stem, size_t stemlen, char *err,
                     size_t errlen)
{
    char zone[NAME_TEXT_MAX], pubp[PATH_MAX], privp[PATH_MAX];
    tern_buf_t pb, kb;
    tern_buf_init(&pb, WRITE_BUF);
    tern_buf_init(&kb, WRITE_BUF);
    int rc = TERN_EINVAL;
    if (!k->pkey) {
        tern_set_err(err, errlen, "%s: no private key to write", k->label);
        goto fail;
    }
    (void)dname_to_str(k->owner, zone, sizeof(zone));
    if (strchr(zone, '/')) {
        tern_set_err(err, errlen, "%s: the zone name holds a '/': no file name", k->label);
        goto fail;
    }
    if (!dir[0])
        dir = ".";
    size_t dl = strlen(dir);
    while (dl > 1 && dir[dl - 1] == '/')
        dl--;
    int n = snprintf(stem, stemlen, "%.*s%sK%s+%03u+%05u", (int)dl, dir,
                     dl && dir[dl - 1] == '/' ? "" : "/", zone, k->alg, k->tag);
    rc = TERN_ENOSPC;
    if (n < 0 || (size_t)n >= stemlen || dnssec_key_paths(stem, pubp, privp, sizeof(pubp)) < 0) {
        tern_set_err(err, errlen, "%s: the file name is too long", k->label);
        goto fail;
    }
    if ((rc = pair_texts(k, stem, &pb, &kb, err, errlen)) < 0)
        goto fail;
    /* the private first, exclusively: if it exists, so does a key with this tag, and nothing is
     * written; if the .key cannot be written, the .private goes again */
    if ((rc = write_new(privp, 0600, &pb, err, errlen)) < 0)
        goto fail;
    if ((rc = write_new(pubp, 0644, &kb, err, errlen)) < 0) {
        unlink(privp);
        goto fail;
    }
    rc = 0;
fail:
    pair_free(&pb, &kb);
    return rc;
}

int dnssec_key_texts(const dnssec_key_t *k, char **pub, char **priv, char *err, size_t errlen)
{
    *pub = *priv = NULL;
    tern_buf_t pb, kb;
    tern_buf_init(&pb, WRITE_BUF);
    tern_buf_init(&kb, WRITE_BUF);
    int rc = pair_texts(k, k->label, &pb, &kb, err, errlen);
    if (rc == 0 && (!(*pub = strndup(kb.p, kb.len)) || !(*priv = strndup(pb.p, pb.len)))) {
        tern_set_err(err, errlen, "%s: out of memory", k->label);
        rc = TERN_ENOMEM;
    }
    if (rc < 0) {
        free(*pub);
        if (*priv)
            OPENSSL_cleanse(*priv, strlen(*priv));
        free(*priv);
        *pub = *priv = NULL;
    }
    pair_free(&pb, &kb);
    return rc;
}

/* --- texts and DS */

int dnssec_key_dnskey_text(const dnssec_key_t *k, uint32_t ttl, char *out, size_t outlen)
{
    return dnssec_key_text_dnskey(k, true, ttl, out, outlen);
}

int dnssec_key_ds(const dnssec_key_t *k, unsigned digest_type, uint8_t *rd, size_t rdlen)
{
    const EVP_MD *md = digest_type == 2 ? EVP_sha256() : digest_type == 4 ? EVP_sha384() : NULL;
    if (!md)
        return TERN_EINVAL;
    size_t dl = (size_t)EVP_MD_get_size(md);
    if (rdlen < 4 + dl)
        return TERN_ENOSPC;
    /* RFC 4034 §5.1.4: digest over the owner's canonical (lowercased) wire form and the RDATA */
    uint8_t buf[DNAME_MAXLEN + DNSSEC_KEY_RDATA_MAX];
    size_t ol = dname_lower(buf, k->owner);
    memcpy(buf + ol, k->rdata, k->rdlen);
    rd[0] = (uint8_t)(k->tag >> 8);
    rd[1] = (uint8_t)k->tag;
    rd[2] = k->alg;
    rd[3] = (uint8_t)digest_type;
    unsigned int got = 0;
    if (EVP_Digest(buf, ol + k->rdlen, rd + 4, &got, md, NULL) != 1 || got != dl) {
        ERR_clear_error();
        return TERN_ENOMEM;
    }
    return (int)(4 + dl);
}

int dnssec_key_ds_text(const dnssec_key_t *k, unsigned digest_type, char *out, size_t outlen)
{
    uint8_t rd[4 + EVP_MAX_MD_SIZE];
    int n = dnssec_key_ds(k, digest_type, rd, sizeof(rd));
    if (n < 0)
        return n;
    char owner[NAME_TEXT_MAX], hex[2 * EVP_MAX_MD_SIZE + 1];
    (void)dname_to_str(k->owner, owner, sizeof(owner));
    for (int i = 4; i < n; i++) /* uppercase, as dnssec-dsfromkey prints it */
        snprintf(hex + 2 * (i - 4), 3, "%02X", rd[i]);
    int len =
        snprintf(out, outlen, "%s IN DS %u %u %u %s", owner, k->tag, k->alg, digest_type, hex);
    return len < 0 || (size_t)len >= outlen ? TERN_ENOSPC : len;
}

uint16_t dnssec_key_tag(const uint8_t *rdata, size_t rdlen)
{
    /* RFC 4034 Appendix B: the RDATA summed as 16-bit big-endian words, the carry folded in */
    uint32_t ac = 0;
    for (size_t i = 0; i < rdlen; i++)
        ac += (i & 1) ? rdata[i] : (uint32_t)rdata[i] << 8;
    ac += (ac >> 16) & 0xffff;
    return (uint16_t)(ac & 0xffff);
}

void dnssec_key_free(dnssec_key_t *k)
{
    if (!k)
        return;
    EVP_PKEY_free(k->pkey);
    free(k);
}

dnssec_key_t *dnssec_key_dup(const dnssec_key_t *k)
{
    dnssec_key_t *c = malloc(sizeof(*c));
    if (!c)
        return NULL;
    *c = *k;
    if (c->pkey && EVP_PKEY_up_ref(c->pkey) != 1) {
        free(c);
        return NULL;
    }
    return c;
}
