/*
 * dnssec_key.c — see dnssec_key.h.
 *
 * Reading is three passes: the DNSKEY record (owner, TTL, flags, algorithm, key bytes), the
 * private fields (raw bytes per BIND field name), then the EVP_PKEY built from those fields,
 * whose public half must be the DNSKEY's key bytes exactly. Generating and writing go the other
 * way: libcrypto makes the EVP_PKEY, and its public half becomes the DNSKEY.
 */
#include "tern/dnssec/dnssec_key.h"

#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
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

#include "tern/common/buf.h"
#include "tern/common/err.h"
#include "tern/common/file.h"

/* A key file is a few KB (RSA-4096's .private is 3.3 KB); the bound only keeps a wrong path (a
 * log, a zone) from being read whole into memory. */
#define KEY_FILE_MAX (64 * 1024)
/* The public key bytes of a DNSKEY: its RDATA less flags, protocol and algorithm. */
#define KEY_MAX (DNSSEC_KEY_RDATA_MAX - 4)
/* base64 of KEY_MAX bytes is 688 characters; the rest of the room lets a key that is too long
 * be reported as such rather than as cut short. */
#define KEY_B64_MAX 1024
/* Words of one DNSKEY record: owner, TTL, class, type, three numbers and the base64, which
 * dnssec-keygen cuts every 56 characters (13 pieces for RSA-4096); generous beyond that. */
#define WORDS_MAX 128
/* An RSA field of a .private is at most the modulus (4096 bits). */
#define RSA_FIELD_MAX 512
#define RSA_BITS_MIN  1024
#define RSA_BITS_MAX  4096
#define RSA_BITS_DEF  2048
/* Presentation form of any name (every byte escaped as \DDD) and its NUL. */
#define NAME_TEXT_MAX (DNAME_MAXLEN * 4 + 2)
/* The text files written: an RSA-4096 .private is 3.3 KB. Reserved at once, so the secret is
 * never left behind in a buffer that realloc() moved. */
#define WRITE_BUF 8192

/* --- names and messages */

static const struct {
    uint8_t num;
    const char *name;
} alg_names[] = {
    /* IANA's mnemonics (DNS Security Algorithm Numbers): messages name what an operator has */
    {1, "RSAMD5"},           {3, "DSA"},          {5, "RSASHA1"},
    {6, "DSA-NSEC3-SHA1"},   {7, "NSEC3RSASHA1"}, {8, "RSASHA256"},
    {10, "RSASHA512"},       {12, "ECC-GOST"},    {13, "ECDSAP256SHA256"},
    {14, "ECDSAP384SHA384"}, {15, "ED25519"},     {16, "ED448"},
};

static const char *alg_name(unsigned alg)
{
    for (size_t i = 0; i < TERN_ARRAY_SIZE(alg_names); i++)
        if (alg_names[i].num == alg)
            return alg_names[i].name;
    return "unknown";
}

static bool alg_supported(unsigned alg)
{
    return alg == DNSSEC_ALG_RSASHA256 || alg == DNSSEC_ALG_ECDSAP256SHA256 ||
           alg == DNSSEC_ALG_ED25519;
}

/* Where a text came from: a file ("path:line: what"), or one of the two texts the caller named
 * with its where ("where (DNSKEY): line 2: what"). */
typedef struct src {
    const char *name;
    const char *what; /* NULL for a file, else "DNSKEY" or "private key" */
} src_t;

static void src_err(const src_t *s, unsigned line, char *err, size_t errlen, const char *fmt, ...)
    TERN_PRINTF(5, 6);

static void src_err(const src_t *s, unsigned line, char *err, size_t errlen, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    char at[32] = "";
    if (line)
        snprintf(at, sizeof(at), s->what ? " line %u:" : ":%u:", line);
    if (s->what)
        tern_set_err(err, errlen, "%s (%s):%s %s", s->name, s->what, at, msg);
    else
        tern_set_err(err, errlen, "%s%s%s %s", s->name, at, line ? "" : ":", msg);
}

/* --- text helpers */

/* A copy of text with every two-character "\n" made a newline (redins stores keys either way),
 * so lines are numbered as a reader sees them. NULL when out of memory. An owner name escaping
 * an 'n' as "\n" (RFC 1035 allows it, nobody writes it) would be cut there. */
static char *unescape_newlines(const char *text)
{
    size_t n = strlen(text);
    char *o = malloc(n + 1);
    if (!o)
        return NULL;
    size_t j = 0;
    for (size_t i = 0; i < n; i++) {
        if (text[i] == '\\' && text[i + 1] == 'n') {
            o[j++] = '\n';
            i++;
        } else {
            o[j++] = text[i];
        }
    }
    o[j] = '\0';
    return o;
}

/* Free a text that held private key material. */
static void free_secret(char *s)
{
    if (s) {
        OPENSSL_cleanse(s, strlen(s));
        free(s);
    }
}

static bool is_blank(char c)
{
    return c == ' ' || c == '\t' || c == '\r';
}

static bool b64_char(char c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '+' ||
           c == '/';
}

/* Strict base64 (RFC 4648 §4) of s[0..len) into out (room for cap bytes): the alphabet only, a
 * length that is a multiple of 4, '=' only as the last one or two characters. EVP_DecodeBlock()
 * does the decoding but alone would take '=' anywhere and count padding as data. Returns the
 * decoded length, or -1 with *why set. */
static int b64_decode(const char *s, size_t len, uint8_t *out, size_t cap, const char **why)
{
    size_t pad = 0;
    if (len >= 1 && s[len - 1] == '=')
        pad = len >= 2 && s[len - 2] == '=' ? 2 : 1;
    for (size_t i = 0; i < len - pad; i++) {
        if (!b64_char(s[i])) {
            *why = s[i] == '=' ? "'=' before the end" : "a character that is not base64";
            return -1;
        }
    }
    if (len == 0 || len % 4 != 0) {
        *why = len ? "its length is not a multiple of 4 (cut short?)" : "empty";
        return -1;
    }
    size_t n = len / 4 * 3 - pad;
    if (n > cap) {
        *why = "too long";
        return -1;
    }
    /* the body straight into out; the last quantum through tmp, for which EVP_DecodeBlock()
     * writes 3 bytes whatever its padding */
    uint8_t tmp[3];
    if ((len > 4 && EVP_DecodeBlock(out, (const unsigned char *)s, (int)(len - 4)) < 0) ||
        EVP_DecodeBlock(tmp, (const unsigned char *)s + len - 4, 4) != 3) {
        *why = "not base64";
        return -1;
    }
    memcpy(out + (len - 4) / 4 * 3, tmp, 3 - pad);
    OPENSSL_cleanse(tmp, sizeof(tmp));
    return (int)n;
}

/* base64 of data into out (cap bytes, room for 4 * ceil(len / 3) + 1). */
static void b64_encode(const uint8_t *data, size_t len, char *out, size_t cap)
{
    if (cap < (len + 2) / 3 * 4 + 1) {
        out[0] = '\0';
        return;
    }
    EVP_EncodeBlock((unsigned char *)out, data, (int)len);
}

/* --- the DNSKEY record */

typedef struct word {
    const char *s;
    size_t len;
    unsigned line;
} word_t;

typedef struct pub {
    uint8_t owner[DNAME_MAXLEN];
    uint32_t ttl;
    uint16_t flags;
    uint8_t alg;
    unsigned line; /* of the owner: where the record starts */
    size_t keylen;
    uint8_t key[KEY_MAX];
} pub_t;

/* The words of the first record of text: comments dropped, parentheses joining lines (RFC 1035
 * §5.1, all a key file uses of it). Anything after that record but comments is refused: one key
 * per text. Returns the number of words (0: no record) or -1 with err set. */
static int record_words(const char *text, const src_t *src, word_t *w, char *err, size_t errlen)
{
    unsigned line = 1, open_line = 0;
    int depth = 0;
    size_t n = 0;
    bool done = false; /* the first record has ended */
    for (const char *p = text; *p;) {
        char c = *p;
        if (c == '\n') {
            line++;
            p++;
            done = done || (n && !depth);
            continue;
        }
        if (is_blank(c)) {
            p++;
            continue;
        }
        if (c == ';') {
            while (*p && *p != '\n')
                p++;
            continue;
        }
        if (done) {
            src_err(src, line, err, errlen, "a second record: one DNSKEY per key");
            return -1;
        }
        if (c == '(' || c == ')') {
            if (c == ')' && depth == 0) {
                src_err(src, line, err, errlen, "')' without '('");
                return -1;
            }
            if (c == '(' && depth++ == 0)
                open_line = line;
            if (c == ')')
                depth--;
            p++;
            continue;
        }
        if (n == WORDS_MAX) {
            src_err(src, line, err, errlen, "more than %d words in the record", WORDS_MAX);
            return -1;
        }
        const char *s = p;
        while (*p && !is_blank(*p) && !strchr("\n;()", *p))
            p += (*p == '\\' && p[1] && p[1] != '\n') ? 2 : 1; /* "\;" is part of a name */
        w[n++] = (word_t){s, (size_t)(p - s), line};
    }
    if (depth) {
        src_err(src, open_line, err, errlen, "'(' without ')'");
        return -1;
    }
    return (int)n;
}

static bool word_is(const word_t *w, const char *s)
{
    return w->len == strlen(s) && strncasecmp(w->s, s, w->len) == 0;
}

/* w as a decimal number no greater than max. */
static bool word_num(const word_t *w, uint32_t max, uint32_t *v)
{
    uint64_t n = 0;
    if (w->len == 0 || w->len > 10)
        return false;
    for (size_t i = 0; i < w->len; i++) {
        if (w->s[i] < '0' || w->s[i] > '9')
            return false;
        n = n * 10 + (uint64_t)(w->s[i] - '0');
    }
    if (n > max)
        return false;
    *v = (uint32_t)n;
    return true;
}

/* Owner, optional TTL and class, type: the index of the first RDATA word, or -1. */
static int record_head(const word_t *w, size_t n, const src_t *src, pub_t *pk, char *err,
                       size_t errlen)
{
    const char *why = "";
    if (dname_from_str(w[0].s, w[0].len, false, pk->owner, &why) < 0) {
        src_err(src, w[0].line, err, errlen, "bad owner name '%.*s': %s", (int)w[0].len, w[0].s,
                why);
        return -1;
    }
    pk->line = w[0].line;
    size_t i = 1;
    bool ttl = false, cls = false;
    /* TTL and class come in either order (RFC 1035 §5.1); a TTL is seconds, at most 2^31-1
     * (RFC 2181 §8) */
    for (; i < n && i < 3; i++) {
        uint32_t v;
        if (!ttl && word_num(&w[i], INT32_MAX, &v)) {
            pk->ttl = v;
            ttl = true;
        } else if (!cls && word_is(&w[i], "IN")) {
            cls = true;
        } else {
            break;
        }
    }
    if (i == n) {
        src_err(src, w[n - 1].line, err, errlen, "the record ends before its type: not a DNSKEY");
        return -1;
    }
    if (!word_is(&w[i], "DNSKEY")) {
        src_err(src, w[i].line, err, errlen, "'%.*s' where DNSKEY was expected", (int)w[i].len,
                w[i].s);
        return -1;
    }
    return (int)i + 1;
}

/* The DNSKEY algorithm word: a number or a mnemonic. */
static bool word_alg(const word_t *w, uint8_t *alg)
{
    uint32_t v;
    if (word_num(w, 255, &v)) {
        *alg = (uint8_t)v;
        return true;
    }
    for (size_t i = 0; i < TERN_ARRAY_SIZE(alg_names); i++) {
        if (word_is(w, alg_names[i].name)) {
            *alg = alg_names[i].num;
            return true;
        }
    }
    return false;
}

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

/* Flags, protocol, algorithm and the base64 key from w[at..n). */
static int record_rdata(const word_t *w, size_t n, size_t at, const src_t *src, pub_t *pk,
                        char *err, size_t errlen)
{
    uint32_t v;
    if (n - at < 4) {
        src_err(src, w[n - 1].line, err, errlen,
                "a DNSKEY has flags, protocol, algorithm and the key: the record ends early");
        return TERN_ESYNTAX;
    }
    if (!word_num(&w[at], 65535, &v)) {
        src_err(src, w[at].line, err, errlen, "bad flags '%.*s'", (int)w[at].len, w[at].s);
        return TERN_ESYNTAX;
    }
    pk->flags = (uint16_t)v;
    if (!word_num(&w[at + 1], 255, &v) || v != 3) {
        src_err(src, w[at + 1].line, err, errlen, "protocol '%.*s': a DNSKEY's is 3 (RFC 4034)",
                (int)w[at + 1].len, w[at + 1].s);
        return TERN_ESYNTAX;
    }
    const word_t *a = &w[at + 2];
    if (!word_alg(a, &pk->alg)) {
        src_err(src, a->line, err, errlen, "unknown algorithm '%.*s'", (int)a->len, a->s);
        return TERN_ESYNTAX;
    }
    if (!alg_supported(pk->alg)) {
        src_err(src, a->line, err, errlen, "algorithm %u (%s) is not supported: use 8, 13 or 15",
                pk->alg, alg_name(pk->alg));
        return TERN_ENOTSUP;
    }
    /* the base64 may be cut into words anywhere: a bad character is named on its own line,
     * the length once they are joined */
    char b64[KEY_B64_MAX];
    size_t bl = 0;
    for (size_t i = at + 3; i < n; i++) {
        for (size_t j = 0; j < w[i].len; j++) {
            if (!b64_char(w[i].s[j]) && w[i].s[j] != '=') {
                src_err(src, w[i].line, err, errlen, "bad base64 in the key: '%c'", w[i].s[j]);
                return TERN_ESYNTAX;
            }
        }
        if (bl + w[i].len > sizeof(b64)) {
            src_err(src, w[i].line, err, errlen, "the key is too long");
            return TERN_ESYNTAX;
        }
        memcpy(b64 + bl, w[i].s, w[i].len);
        bl += w[i].len;
    }
    const char *why = "";
    int kl = b64_decode(b64, bl, pk->key, sizeof(pk->key), &why);
    if (kl < 0) {
        src_err(src, w[n - 1].line, err, errlen, "bad base64 in the key: %s", why);
        return TERN_ESYNTAX;
    }
    pk->keylen = (size_t)kl;
    char wb[128];
    if ((why = key_check(pk->alg, pk->key, pk->keylen, wb, sizeof(wb)))) {
        src_err(src, a->line, err, errlen, "%s", why);
        return TERN_ESYNTAX;
    }
    return 0;
}

static int parse_pub(const char *text, const src_t *src, pub_t *pk, char *err, size_t errlen)
{
    word_t w[WORDS_MAX];
    int n = record_words(text, src, w, err, errlen);
    if (n < 0)
        return TERN_ESYNTAX;
    if (n == 0) {
        src_err(src, 0, err, errlen, "no DNSKEY record (empty, or only comments)");
        return TERN_ESYNTAX;
    }
    int at = record_head(w, (size_t)n, src, pk, err, errlen);
    if (at < 0)
        return TERN_ESYNTAX;
    return record_rdata(w, (size_t)n, (size_t)at, src, pk, err, errlen);
}

/* --- the private key text */

enum { F_MODULUS, F_PUBEXP, F_PRIVEXP, F_PRIME1, F_PRIME2, F_EXP1, F_EXP2, F_COEFF, F_COUNT };

static const char *const rsa_fields[F_COUNT] = {
    "Modulus", "PublicExponent", "PrivateExponent", "Prime1",
    "Prime2",  "Exponent1",      "Exponent2",       "Coefficient",
};
/* libcrypto's names of the same fields, in the same order */
static const char *const rsa_params[F_COUNT] = {
    OSSL_PKEY_PARAM_RSA_N,         OSSL_PKEY_PARAM_RSA_E,
    OSSL_PKEY_PARAM_RSA_D,         OSSL_PKEY_PARAM_RSA_FACTOR1,
    OSSL_PKEY_PARAM_RSA_FACTOR2,   OSSL_PKEY_PARAM_RSA_EXPONENT1,
    OSSL_PKEY_PARAM_RSA_EXPONENT2, OSSL_PKEY_PARAM_RSA_COEFFICIENT1,
};
/* ECDSA's private scalar and Ed25519's seed (RFC 6605 §6.1, RFC 8080 §6) */
static const char *const key_field[1] = {"PrivateKey"};

/* The private fields as raw bytes; for ECDSA and Ed25519 only v[0]. */
typedef struct priv {
    size_t len[F_COUNT];
    unsigned line[F_COUNT]; /* 0: not given */
    uint8_t v[F_COUNT][RSA_FIELD_MAX];
} priv_t;

/* One "Name: value" line, trimmed. false if it has no colon. */
static bool split_field(const char *s, size_t len, const char **name, size_t *nl, const char **val,
                        size_t *vl)
{
    const char *c = memchr(s, ':', len);
    if (!c)
        return false;
    *name = s;
    *nl = (size_t)(c - s);
    while (*nl && is_blank(s[*nl - 1]))
        (*nl)--;
    const char *v = c + 1, *end = s + len;
    while (v < end && is_blank(*v))
        v++;
    *val = v;
    *vl = (size_t)(end - v);
    return true;
}

/* "Private-key-format: v1.N" (BIND's format 1, whatever its minor version: v1.2 and v1.3 differ
 * only in the timing lines this file skips). */
static bool format_ok(const char *v, size_t vl)
{
    if (vl < 4 || strncmp(v, "v1.", 3) != 0)
        return false;
    for (size_t i = 3; i < vl; i++)
        if (v[i] < '0' || v[i] > '9')
            return false;
    return true;
}

/* One line of the private text (the field lines; timing lines and unknown fields ignored). */
static int priv_line(const char *s, size_t len, unsigned line, const src_t *src, uint8_t alg,
                     bool *fmt, bool *algo, priv_t *pv, char *err, size_t errlen)
{
    const char *name, *val;
    size_t nl, vl;
    if (!split_field(s, len, &name, &nl, &val, &vl)) {
        src_err(src, line, err, errlen, "expected 'Field: value'");
        return TERN_ESYNTAX;
    }
    if (!*fmt) {
        if (nl != 18 || strncasecmp(name, "Private-key-format", 18) != 0) {
            src_err(src, line, err, errlen,
                    "not a BIND private key: the first line is not Private-key-format");
            return TERN_ESYNTAX;
        }
        if (!format_ok(val, vl)) {
            src_err(src, line, err, errlen, "Private-key-format %.*s: only v1.x is supported",
                    (int)vl, val);
            return TERN_ENOTSUP;
        }
        *fmt = true;
        return 0;
    }
    if (nl == 9 && strncasecmp(name, "Algorithm", 9) == 0) {
        /* "13 (ECDSAP256SHA256)": the number is what counts */
        word_t w = {val, 0, line};
        while (w.len < vl && !is_blank(val[w.len]))
            w.len++;
        uint32_t a;
        if (!word_num(&w, 255, &a) || a != alg) {
            src_err(src, line, err, errlen, "Algorithm %.*s, but the DNSKEY's is %u (%s)", (int)vl,
                    val, alg, alg_name(alg));
            return TERN_EINVAL;
        }
        *algo = true;
        return 0;
    }
    bool rsa = alg == DNSSEC_ALG_RSASHA256;
    const char *const *names = rsa ? rsa_fields : key_field;
    size_t count = rsa ? F_COUNT : 1, cap = rsa ? RSA_FIELD_MAX : 32;
    for (size_t i = 0; i < count; i++) {
        if (nl != strlen(names[i]) || strncasecmp(name, names[i], nl) != 0)
            continue;
        if (pv->line[i]) {
            src_err(src, line, err, errlen, "%s given again (first on line %u)", names[i],
                    pv->line[i]);
            return TERN_ESYNTAX;
        }
        const char *why = "";
        int r = b64_decode(val, vl, pv->v[i], cap, &why);
        if (r <= 0) {
            src_err(src, line, err, errlen, "bad base64 in %s: %s", names[i], r ? why : "empty");
            return TERN_ESYNTAX;
        }
        pv->len[i] = (size_t)r;
        pv->line[i] = line;
        return 0;
    }
    return 0; /* Created:, Publish:, Activate: and the like */
}

static int parse_priv(const char *text, const src_t *src, uint8_t alg, priv_t *pv, char *err,
                      size_t errlen)
{
    bool fmt = false, algo = false;
    unsigned line = 0;
    for (const char *p = text; *p;) {
        const char *nl = strchr(p, '\n');
        size_t len = nl ? (size_t)(nl - p) : strlen(p);
        const char *s = p;
        p += len + (nl != NULL);
        line++;
        while (len && is_blank(*s)) {
            s++;
            len--;
        }
        while (len && is_blank(s[len - 1]))
            len--;
        if (len == 0 || *s == ';')
            continue;
        int rc = priv_line(s, len, line, src, alg, &fmt, &algo, pv, err, errlen);
        if (rc < 0)
            return rc;
    }
    if (!fmt || !algo) {
        src_err(src, 0, err, errlen, "no %s line%s", !fmt ? "Private-key-format" : "Algorithm",
                !fmt ? " (empty?)" : "");
        return TERN_ESYNTAX;
    }
    bool rsa = alg == DNSSEC_ALG_RSASHA256;
    for (size_t i = 0; i < (rsa ? F_COUNT : 1); i++) {
        if (!pv->line[i]) {
            src_err(src, 0, err, errlen, "no %s field", rsa ? rsa_fields[i] : key_field[0]);
            return TERN_ESYNTAX;
        }
    }
    return 0;
}

/* --- EVP_PKEY from the fields, and its public half as DNSKEY bytes */

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

static EVP_PKEY *pkey_rsa(const priv_t *pv)
{
    EVP_PKEY *pkey = NULL;
    BIGNUM *bn[F_COUNT] = {NULL};
    OSSL_PARAM_BLD *bld = OSSL_PARAM_BLD_new();
    if (!bld)
        goto fail;
    for (size_t i = 0; i < F_COUNT; i++)
        if (!(bn[i] = BN_bin2bn(pv->v[i], (int)pv->len[i], NULL)) ||
            !OSSL_PARAM_BLD_push_BN(bld, rsa_params[i], bn[i]))
            goto fail;
    pkey = pkey_fromdata("RSA", bld);
fail:
    for (size_t i = 0; i < F_COUNT; i++)
        BN_clear_free(bn[i]);
    OSSL_PARAM_BLD_free(bld);
    return pkey;
}

/* A P-256 key from its private scalar: BIND's file holds no public point, and libcrypto 3.0
 * does not derive one on import, so it is computed here (d·G) and imported with the scalar. */
static EVP_PKEY *pkey_ecdsa(const priv_t *pv, const char **why)
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
static EVP_PKEY *pkey_from_fields(uint8_t alg, const priv_t *pv, const char **why)
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
 * last five characters (zone_sign.c rewrites it in place), so a long zone name is shortened. */
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

/* Parse a pair; priv_text NULL: the public key alone (pkey NULL), for DS records. */
static int parse_pair(const char *pub_text, const char *priv_text, const src_t *ps, const src_t *vs,
                      const uint8_t *zone, dnssec_key_t **out, char *err, size_t errlen)
{
    int rc = TERN_ENOMEM;
    pub_t pk = {.alg = 0};
    priv_t *pv = NULL;
    char *pubc = unescape_newlines(pub_text);
    char *privc = priv_text ? unescape_newlines(priv_text) : NULL;
    EVP_PKEY *pkey = NULL;
    *out = NULL;
    ERR_clear_error();
    if (!pubc || (priv_text && (!privc || !(pv = calloc(1, sizeof(*pv)))))) {
        src_err(ps, 0, err, errlen, "out of memory");
        goto fail;
    }
    if ((rc = parse_pub(pubc, ps, &pk, err, errlen)) < 0)
        goto fail;
    if (zone && !dname_equal(pk.owner, zone)) {
        char o[NAME_TEXT_MAX], z[NAME_TEXT_MAX];
        (void)dname_to_str(pk.owner, o, sizeof(o));
        (void)dname_to_str(zone, z, sizeof(z));
        src_err(ps, pk.line, err, errlen, "the key's owner %s is not the zone %s", o, z);
        rc = TERN_EOUTZONE;
        goto fail;
    }
    if (pv) {
        if ((rc = parse_priv(privc, vs, pk.alg, pv, err, errlen)) < 0)
            goto fail;
        const char *why = NULL;
        uint8_t mine[KEY_MAX];
        int ml = -1;
        if ((pkey = pkey_from_fields(pk.alg, pv, &why)))
            ml = pub_encode(pk.alg, pkey, mine, sizeof(mine));
        rc = TERN_EINVAL;
        if (ml < 0) {
            src_err(vs, 0, err, errlen, "%s",
                    why ? why : "libcrypto does not take these fields as a key");
            goto fail;
        }
        if ((size_t)ml != pk.keylen || memcmp(mine, pk.key, pk.keylen) != 0) {
            src_err(vs, 0, err, errlen, "the private key is not the pair of the DNSKEY%s%s",
                    vs->what ? "" : " in ", vs->what ? "" : ps->name);
            goto fail;
        }
        if (!pkey_signs(pk.alg, pkey)) {
            src_err(vs, 0, err, errlen,
                    "the private fields make signatures the DNSKEY does not verify");
            goto fail;
        }
    }
    dnssec_key_t *k = key_new(pk.owner, pk.ttl, pk.flags, pk.alg, pk.key, pk.keylen);
    if (!k) {
        rc = TERN_ENOMEM;
        src_err(ps, 0, err, errlen, "out of memory");
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
    const src_t ps = {where ? where : "key", "DNSKEY"}, vs = {ps.name, "private key"};
    *out = NULL;
    if (!pub_text || !priv_text) {
        src_err(pub_text ? &vs : &ps, 0, err, errlen, "missing");
        return TERN_EINVAL;
    }
    return parse_pair(pub_text, priv_text, &ps, &vs, zone, out, err, errlen);
}

/* --- files */

/* The whole file as a NUL-terminated string; a NUL inside is refused (not a text file). */
static int read_text(const char *path, char **out, char *err, size_t errlen)
{
    struct stat st;
    *out = NULL;
    int fd = tern_open_regular(path, KEY_FILE_MAX, &st, err, errlen);
    if (fd < 0)
        return fd;
    int rc = TERN_ENOMEM;
    size_t len = (size_t)st.st_size, got = 0;
    char *buf = malloc(len + 1);
    if (!buf) {
        tern_set_err(err, errlen, "%s: out of memory", path);
        goto fail;
    }
    while (got < len) {
        ssize_t r = read(fd, buf + got, len - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            rc = r < 0 ? -errno : TERN_EINVAL;
            tern_set_err(err, errlen, "%s: %s", path,
                         r < 0 ? strerror(errno) : "shrank while read");
            goto fail;
        }
        got += (size_t)r;
    }
    buf[len] = '\0';
    if (strlen(buf) != len) {
        rc = TERN_ESYNTAX;
        tern_set_err(err, errlen, "%s: holds a NUL byte: not a key file", path);
        goto fail;
    }
    close(fd);
    *out = buf;
    return 0;
fail:
    if (buf) {
        OPENSSL_cleanse(buf, len + 1);
        free(buf);
    }
    close(fd);
    return rc;
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
    const src_t ps = {pubp, NULL}, vs = {privp, NULL};
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
    if (!alg_supported(alg)) {
        tern_set_err(err, errlen, "algorithm %u (%s) is not supported: use 8, 13 or 15", alg,
                     alg_name(alg));
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

/* "owner [TTL] IN DNSKEY flags 3 alg base64"; its length or TERN_ENOSPC. */
static int dnskey_line(const dnssec_key_t *k, bool with_ttl, uint32_t ttl, char *out, size_t outlen)
{
    char owner[NAME_TEXT_MAX], t[16] = "", b64[KEY_MAX * 4 / 3 + 8];
    (void)dname_to_str(k->owner, owner, sizeof(owner));
    if (with_ttl)
        snprintf(t, sizeof(t), " %u", ttl);
    b64_encode(k->rdata + 4, k->rdlen - 4u, b64, sizeof(b64));
    int n = snprintf(out, outlen, "%s%s IN DNSKEY %u 3 %u %s", owner, t, k->flags, k->alg, b64);
    return n < 0 || (size_t)n >= outlen ? TERN_ENOSPC : n;
}

static void put_field(tern_buf_t *b, const char *name, const uint8_t *v, size_t len)
{
    char s[RSA_FIELD_MAX * 4 / 3 + 8];
    b64_encode(v, len, s, sizeof(s));
    tern_buf_printf(b, "%s: %s\n", name, s);
    OPENSSL_cleanse(s, sizeof(s));
}

/* One BIGNUM of pkey as a field: pad bytes long, or as short as it goes when pad is 0. */
static bool bn_field(const EVP_PKEY *pkey, const char *param, int pad, const char *name,
                     tern_buf_t *b)
{
    uint8_t v[RSA_FIELD_MAX];
    BIGNUM *bn = NULL;
    bool ok = EVP_PKEY_get_bn_param(pkey, param, &bn) == 1;
    int n = ok ? (pad ? pad : BN_num_bytes(bn)) : 0;
    ok = ok && n > 0 && n <= (int)sizeof(v) && BN_bn2binpad(bn, v, n) == n;
    if (ok)
        put_field(b, name, v, (size_t)n);
    BN_clear_free(bn);
    OPENSSL_cleanse(v, sizeof(v));
    return ok;
}

/* The key fields of a .private (BIND's names, the values libcrypto holds); false on failure. */
static bool private_fields(const dnssec_key_t *k, tern_buf_t *b)
{
    if (k->alg == DNSSEC_ALG_ED25519) {
        uint8_t seed[32];
        size_t n = sizeof(seed);
        bool ok = EVP_PKEY_get_raw_private_key(k->pkey, seed, &n) == 1 && n == sizeof(seed);
        if (ok)
            put_field(b, key_field[0], seed, n);
        OPENSSL_cleanse(seed, sizeof(seed));
        return ok;
    }
    if (k->alg == DNSSEC_ALG_ECDSAP256SHA256) /* the scalar is 32 bytes (RFC 6605 §6.1) */
        return bn_field(k->pkey, OSSL_PKEY_PARAM_PRIV_KEY, 32, key_field[0], b);
    for (size_t i = 0; i < F_COUNT; i++)
        if (!bn_field(k->pkey, rsa_params[i], 0, rsa_fields[i], b))
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

static int key_files(const dnssec_key_t *k, const char *stem, tern_buf_t *pb, tern_buf_t *kb,
                     char *err, size_t errlen)
{
    char ts[16], when[32], line[1024];
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    strftime(ts, sizeof(ts), "%Y%m%d%H%M%S", &tm);
    strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S UTC", &tm);
    /* v1.3 with the timing lines: dnssec-signzone then takes the key as published and active */
    tern_buf_printf(pb, "Private-key-format: v1.3\nAlgorithm: %u (%s)\n", k->alg, alg_name(k->alg));
    if (!private_fields(k, pb)) {
        tern_set_err(err, errlen, "%s: libcrypto did not give the private key's fields", stem);
        return TERN_EINVAL;
    }
    tern_buf_printf(pb, "Created: %s\nPublish: %s\nActivate: %s\n", ts, ts, ts);
    /* the TTL only when the key has one: without, a signer uses the zone's */
    char owner[NAME_TEXT_MAX];
    (void)dname_to_str(k->owner, owner, sizeof(owner));
    if (dnskey_line(k, k->ttl != 0, k->ttl, line, sizeof(line)) < 0) {
        tern_set_err(err, errlen, "%s: the DNSKEY line is too long", stem);
        return TERN_ENOSPC;
    }
    tern_buf_printf(kb, "; %s (flags %u) of %s, key tag %u, algorithm %u (%s)\n; created %s\n%s\n",
                    k->flags & DNSSEC_FLAG_SEP ? "key-signing key" : "zone-signing key", k->flags,
                    owner, k->tag, k->alg, alg_name(k->alg), when, line);
    if (pb->failed || kb->failed) {
        tern_set_err(err, errlen, "%s: out of memory", stem);
        return TERN_ENOMEM;
    }
    return 0;
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
    rc = TERN_ENOMEM;
    if (!tern_buf_reserve(&pb, WRITE_BUF - 1) || !tern_buf_reserve(&kb, 2048)) {
        tern_set_err(err, errlen, "%s: out of memory", k->label);
        goto fail;
    }
    if ((rc = key_files(k, stem, &pb, &kb, err, errlen)) < 0)
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
    if (pb.p)
        OPENSSL_cleanse(pb.p, pb.cap);
    tern_buf_free(&pb);
    tern_buf_free(&kb);
    ERR_clear_error();
    return rc;
}

/* --- texts and DS */

int dnssec_key_dnskey_text(const dnssec_key_t *k, uint32_t ttl, char *out, size_t outlen)
{
    return dnskey_line(k, true, ttl, out, outlen);
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
