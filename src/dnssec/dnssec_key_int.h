/*
 * dnssec_key_int.h — what dnssec_key.c and dnssec_key_text.c share; not a public header.
 *
 * Owns the split of one component in two files: dnssec_key_text.c moves bytes between BIND's
 * text formats and these structs (ldns reads the DNSKEY record; the private fields are base64
 * lines), dnssec_key.c turns the structs into a key (libcrypto: the EVP_PKEY, the pair check)
 * and owns the files and the DS. The text side never sees an EVP_PKEY.
 * Lifecycle and threading: as dnssec_key.h (loader thread or ternctl; no shared state).
 */
#ifndef TERN_DNSSEC_DNSSEC_KEY_INT_H
#define TERN_DNSSEC_DNSSEC_KEY_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tern/common/buf.h"
#include "tern/common/compiler.h"
#include "tern/dnssec/dnssec_key.h"

/* The public key bytes of a DNSKEY: its RDATA less flags, protocol and algorithm. */
#define KEY_MAX (DNSSEC_KEY_RDATA_MAX - 4)
/* An RSA field of a .private is at most the modulus (4096 bits). */
#define RSA_FIELD_MAX 512
/* Presentation form of any name (every byte escaped as \DDD) and its NUL. */
#define NAME_TEXT_MAX (DNAME_MAXLEN * 4 + 2)

static inline bool key_alg_supported(unsigned alg)
{
    return alg == DNSSEC_ALG_RSASHA256 || alg == DNSSEC_ALG_ECDSAP256SHA256 ||
           alg == DNSSEC_ALG_ED25519;
}

/* Where a text came from: a file ("path:line: what"), or one of the two texts the caller named
 * with its where ("where (DNSKEY): line 2: what"). */
typedef struct key_src {
    const char *name;
    const char *what; /* NULL for a file, else "DNSKEY" or "private key" */
} key_src_t;

/* The DNSKEY record as read; its key bytes are not checked against the algorithm here. */
typedef struct key_pub {
    uint8_t owner[DNAME_MAXLEN];
    uint32_t ttl; /* 0: none given */
    uint16_t flags;
    uint8_t alg;
    unsigned line; /* where the record starts */
    size_t keylen;
    uint8_t key[KEY_MAX];
} key_pub_t;

/* The fields of a .private as raw bytes, in BIND's order (RSA: Modulus, PublicExponent,
 * PrivateExponent, Prime1, Prime2, Exponent1, Exponent2, Coefficient); ECDSA's scalar and
 * Ed25519's seed ("PrivateKey") in v[0]. Secret: cleansed by its owner. */
#define KEY_RSA_FIELDS 8
typedef struct key_priv {
    size_t len[KEY_RSA_FIELDS];
    unsigned line[KEY_RSA_FIELDS]; /* 0: not given */
    uint8_t v[KEY_RSA_FIELDS][RSA_FIELD_MAX];
} key_priv_t;

/* err = "WHERE:LINE: msg" (a file) or "WHERE (DNSKEY): line LINE: msg"; line 0: no line. */
void dnssec_key_text_err(const key_src_t *s, unsigned line, char *err, size_t errlen,
                         const char *fmt, ...) TERN_PRINTF(5, 6);

/* IANA's mnemonic of an algorithm as ldns knows it ("ECDSAP256SHA256"), or "unknown". */
const char *dnssec_key_text_alg_name(unsigned alg);

/* A copy of text with every two-character "\n" made a newline (redins stores keys either way),
 * so lines are numbered as a reader sees them. NULL when out of memory. */
char *dnssec_key_text_unescape(const char *text);

/* The one DNSKEY record of text: 0, or TERN_ESYNTAX / TERN_ENOMEM with err set. */
int dnssec_key_text_pub(const char *text, const key_src_t *src, key_pub_t *pk, char *err,
                        size_t errlen) TERN_WUR;

/* The fields of a BIND private text for algorithm alg (every one it needs present): 0, or a
 * negative TERN_E* with err set (TERN_ENOTSUP: a format version; TERN_EINVAL: another
 * algorithm). */
int dnssec_key_text_priv(const char *text, const key_src_t *src, uint8_t alg, key_priv_t *pv,
                         char *err, size_t errlen) TERN_WUR;

/* "owner [TTL] IN DNSKEY flags 3 alg base64"; its length or TERN_ENOSPC. */
int dnssec_key_text_dnskey(const dnssec_key_t *k, bool with_ttl, uint32_t ttl, char *out,
                           size_t outlen) TERN_WUR;

/* The texts of a BIND pair: the .private of k's fields pv into pb, the .key into kb. 0, or a
 * negative TERN_E* with err set (stem names the pair). */
int dnssec_key_text_files(const dnssec_key_t *k, const key_priv_t *pv, const char *stem,
                          tern_buf_t *pb, tern_buf_t *kb, char *err, size_t errlen) TERN_WUR;

#endif
