/*
 * dnssec_key_text.c — BIND's key text formats, read and written; see dnssec_key_int.h.
 *
 * The DNSKEY record goes through ldns: its entry reader takes the comments, the parentheses over
 * lines and CR line ends, and its converters the owner name, the TTL units, the class, type and
 * algorithm mnemonics and the base64 key (split by blanks anywhere). We do not hand the record to
 * ldns_rr_new_frm_str(), because ldns 1.8 reads numbers with strtol() and keeps the low bits
 * (flags 70000 would be 4464, protocol 259 would be 3), takes the TTL before the class only
 * (RFC 1035 §5.1 allows either order, as redins' miekg/dns does), and when it refuses a record
 * says "could not parse the RR's rdata" without the field: the record's words are checked one by
 * one with ldns's converters instead, so every message names the field.
 * The private text ("Field: value" lines) is BIND's own format, not a zone file; it is read here,
 * its base64 decoded by tern_base64_decode() (strict: no blanks, unlike TSIG secrets) into
 * buffers that are cleansed afterwards: ldns's public decoder, ldns_str2rdf_b64(), copies the
 * secret into memory it frees uncleared.
 */
#include <ctype.h>
#include <ldns/ldns.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>

#include "dnssec_key_int.h"
#include "tern/common/base64.h"
#include "tern/common/err.h"

/* --- names and messages */

const char *dnssec_key_text_alg_name(unsigned alg)
{
    const ldns_lookup_table *t = ldns_lookup_by_id(ldns_algorithms, (int)alg);
    return t ? t->name : "unknown";
}

void dnssec_key_text_err(const key_src_t *s, unsigned line, char *err, size_t errlen,
                         const char *fmt, ...)
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

/* An owner name escaping an 'n' as "\n" (RFC 1035 allows it, nobody writes it) is cut there. */
char *dnssec_key_text_unescape(const char *text)
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

static bool is_blank(char c)
{
    return c == ' ' || c == '\t' || c == '\r';
}

/* s[0..len) as a decimal number no greater than max (ldns's strtol() would wrap it). */
static bool word_num(const char *s, size_t len, uint32_t max, uint32_t *v)
{
    uint64_t n = 0;
    if (len == 0 || len > 10)
        return false;
    for (size_t i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9')
            return false;
        n = n * 10 + (uint64_t)(s[i] - '0');
    }
    if (n > max)
        return false;
    *v = (uint32_t)n;
    return true;
}

/* --- base64 of the private fields */

/* Strict base64 (RFC 4648 §4) of s[0..len) into out (room for cap bytes): the alphabet only, a
 * length that is a multiple of 4, '=' only as the last one or two characters. Returns the
 * decoded length, or -1 with *why set: the first character that breaks the rules, where '='
 * anywhere but in the final padding (the last one or two characters) is "before the end" and
 * final padding the length cannot take is a length error. */
static int b64_decode(const char *s, size_t len, uint8_t *out, size_t cap, const char **why)
{
    size_t n;
    tern_base64_err_t e;
    if (tern_base64_decode(s, len, 0, out, cap, &n, &e) < 0) {
        size_t pad = len >= 1 && s[len - 1] == '=' ? (len >= 2 && s[len - 2] == '=' ? 2 : 1) : 0;
        bool in_final_pad = e.pad_at != SIZE_MAX && e.pad_at >= len - pad;
        if (e.fault == TERN_BASE64_BAD_CHAR)
            *why = e.pad_at < e.at ? "'=' before the end" : "a character that is not base64";
        else if (e.fault == TERN_BASE64_LENGTH || in_final_pad)
            *why = "its length is not a multiple of 4 (cut short?)";
        else
            *why = "'=' before the end";
        return -1;
    }
    if (n == 0) {
        *why = "empty";
        return -1;
    }
    if (n > cap) {
        *why = "too long";
        return -1;
    }
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

/* The line of the first word at or after text[from]: blanks, blank lines and comments skipped. */
static unsigned first_line(const char *text, size_t from)
{
    unsigned line = 1;
    for (size_t i = 0; i < from; i++)
        line += text[i] == '\n';
    for (const char *p = text + from;; p++, line++) {
        p += strspn(p, " \t\r");
        if (*p == ';')
            p += strcspn(p, "\n");
        if (*p != '\n')
            return line;
    }
}

/* ldns 1.8 ends a record at a ')' that closes nothing, and takes a '(' still open at the end of
 * the text as closed (parse.c returns before its own check), so a key cut short would pass for
 * a shorter one: the parentheses of s[0..len) outside comments must balance. NULL, or why not. */
static const char *unbalanced(const char *s, size_t len)
{
    int depth = 0;
    for (size_t i = 0; i < len; i++) {
        if (s[i] == ';') {
            const char *nl = memchr(s + i, '\n', len - i);
            i = nl ? (size_t)(nl - s) : len;
        } else if (s[i] == '\\') {
            i++;
        } else if (s[i] == '(') {
            depth++;
        } else if (s[i] == ')' && --depth < 0) {
            return "')' without '('";
        }
    }
    return depth ? "'(' without ')'" : NULL;
}

/* The next blank-separated word of *p, cut off in place (an escaped blank stays in the word);
 * NULL at the end. */
static char *next_word(char **p)
{
    char *w = *p + strspn(*p, " \t");
    if (!*w)
        return NULL;
    char *e = w;
    while (*e && *e != ' ' && *e != '\t')
        e += e[0] == '\\' && e[1] ? 2 : 1;
    *p = *e ? e + 1 : e;
    *e = '\0';
    return w;
}

/* The head of a record ldns's entry reader joined (comments and parentheses gone, one line):
 * owner, TTL and class in either order, the type, which must be DNSKEY. *p is left at the
 * RDATA. Every message names pk->line, where the record starts. */
static int pub_head(char **p, const key_src_t *src, key_pub_t *pk, char *err, size_t errlen)
{
    const unsigned ln = pk->line;
    char *w = next_word(p);
    ldns_rdf *rdf = NULL;
    ldns_status st = ldns_str2rdf_dname(&rdf, w);
    if (st != LDNS_STATUS_OK || ldns_rdf_size(rdf) > DNAME_MAXLEN) {
        dnssec_key_text_err(src, ln, err, errlen, "bad owner name '%s': %s", w,
                            st ? ldns_get_errorstr_by_id(st) : "too long");
        ldns_rdf_deep_free(rdf);
        return st == LDNS_STATUS_MEM_ERR ? TERN_ENOMEM : TERN_ESYNTAX;
    }
    memcpy(pk->owner, ldns_rdf_data(rdf), ldns_rdf_size(rdf));
    ldns_rdf_deep_free(rdf);
    /* a TTL starts with a digit (as ldns tells one), may have units ("1h30m") and is at most
     * 2^31 - 1 seconds (RFC 2181 §8) */
    bool ttl = false, cls = false;
    w = next_word(p);
    for (int i = 0; i < 2 && w; i++, w = next_word(p)) {
        ldns_rr_class c;
        if (!ttl && isdigit((unsigned char)w[0])) {
            const char *end = NULL;
            pk->ttl = ldns_str2period(w, &end);
            if (*end || pk->ttl > INT32_MAX) {
                dnssec_key_text_err(src, ln, err, errlen,
                                    "bad TTL '%s' (at most %d seconds, RFC 2181)", w, INT32_MAX);
                return TERN_ESYNTAX;
            }
            ttl = true;
        } else if (!cls && (c = ldns_get_rr_class_by_name(w))) {
            if (c != LDNS_RR_CLASS_IN) {
                dnssec_key_text_err(src, ln, err, errlen, "class %s: a DNSKEY is of class IN", w);
                return TERN_ESYNTAX;
            }
            cls = true;
        } else {
            break;
        }
    }
    if (!w) {
        dnssec_key_text_err(src, ln, err, errlen, "the record ends before its type: not a DNSKEY");
        return TERN_ESYNTAX;
    }
    if (ldns_get_rr_type_by_name(w) != LDNS_RR_TYPE_DNSKEY) {
        dnssec_key_text_err(src, ln, err, errlen, "'%s' where DNSKEY was expected", w);
        return TERN_ESYNTAX;
    }
    return 0;
}

/* The DNSKEY RDATA p: flags, protocol, algorithm, then the key to the end. */
static int pub_rdata(char *p, const key_src_t *src, key_pub_t *pk, char *err, size_t errlen)
{
    const unsigned ln = pk->line;
    char *flags = next_word(&p), *proto = next_word(&p), *alg = next_word(&p);
    uint32_t v;
    p += strspn(p, " \t");
    if (!alg || !*p) {
        dnssec_key_text_err(
            src, ln, err, errlen,
            "a DNSKEY has flags, protocol, algorithm and the key: the record ends early");
        return TERN_ESYNTAX;
    }
    if (!word_num(flags, strlen(flags), 65535, &v)) {
        dnssec_key_text_err(src, ln, err, errlen, "bad flags '%s'", flags);
        return TERN_ESYNTAX;
    }
    pk->flags = (uint16_t)v;
    if (!word_num(proto, strlen(proto), 255, &v) || v != 3) {
        dnssec_key_text_err(src, ln, err, errlen, "protocol '%s': a DNSKEY's is 3 (RFC 4034)",
                            proto);
        return TERN_ESYNTAX;
    }
    /* a number or ldns's mnemonic ("ECDSAP256SHA256", any case) */
    const ldns_lookup_table *a = ldns_lookup_by_name(ldns_algorithms, alg);
    if (!a && !word_num(alg, strlen(alg), 255, &v)) {
        dnssec_key_text_err(src, ln, err, errlen, "unknown algorithm '%s'", alg);
        return TERN_ESYNTAX;
    }
    pk->alg = (uint8_t)(a ? a->id : (int)v);
    /* the key's base64 may be cut by blanks anywhere: ldns skips them */
    ldns_rdf *rdf = NULL;
    ldns_status st = ldns_str2rdf_b64(&rdf, p);
    if (st != LDNS_STATUS_OK || ldns_rdf_size(rdf) > KEY_MAX) {
        if (st)
            dnssec_key_text_err(src, ln, err, errlen, "bad base64 in the key: %s",
                                ldns_get_errorstr_by_id(st));
        else
            dnssec_key_text_err(src, ln, err, errlen, "the key is too long (%zu bytes)",
                                ldns_rdf_size(rdf));
        ldns_rdf_deep_free(rdf);
        return st == LDNS_STATUS_MEM_ERR ? TERN_ENOMEM : TERN_ESYNTAX;
    }
    pk->keylen = ldns_rdf_size(rdf);
    memcpy(pk->key, ldns_rdf_data(rdf), pk->keylen);
    ldns_rdf_deep_free(rdf);
    return 0;
}

int dnssec_key_text_pub(const char *text, const key_src_t *src, key_pub_t *pk, char *err,
                        size_t errlen)
{
    /* read only: fmemopen() takes a char * for every mode */
    FILE *f = fmemopen((void *)text, strlen(text), "r");
    char *line = NULL;
    size_t cap = 0;
    unsigned records = 0;
    int rc = TERN_ENOMEM;
    if (!f) {
        dnssec_key_text_err(src, 0, err, errlen, "out of memory");
        return rc;
    }
    for (;;) {
        /* ldns returns the next record on one line, with the blank and comment lines before
         * it; SYNTAX_EMPTY when only those are left */
        long at = ftell(f);
        ldns_status st = ldns_fget_token_l_st(f, &line, &cap, false, LDNS_PARSE_SKIP_SPACE, NULL);
        if (st == LDNS_STATUS_MEM_ERR) {
            dnssec_key_text_err(src, 0, err, errlen, "out of memory");
            rc = TERN_ENOMEM;
            break;
        }
        rc = TERN_ESYNTAX;
        const char *why = st == LDNS_STATUS_OK || st == LDNS_STATUS_SYNTAX_EMPTY
                              ? unbalanced(text + at, (size_t)(ftell(f) - at))
                              : ldns_get_errorstr_by_id(st);
        if (!why && !line[strspn(line, " \t")]) {
            if (!feof(f))
                continue;
            if (records)
                rc = 0;
            else
                dnssec_key_text_err(src, 0, err, errlen,
                                    "no DNSKEY record (empty, or only comments)");
            break;
        }
        if (!why && records++)
            why = "a second record: one DNSKEY per key";
        pk->line = first_line(text, (size_t)at);
        if (why) {
            dnssec_key_text_err(src, pk->line, err, errlen, "%s", why);
            break;
        }
        char *p = line;
        if ((rc = pub_head(&p, src, pk, err, errlen)) < 0 ||
            (rc = pub_rdata(p, src, pk, err, errlen)) < 0)
            break;
    }
    free(line);
    fclose(f);
    return rc;
}

/* --- the private key text */

/* BIND's names of the RSA fields, in key_priv_t's order */
static const char *const rsa_fields[KEY_RSA_FIELDS] = {
    "Modulus", "PublicExponent", "PrivateExponent", "Prime1",
    "Prime2",  "Exponent1",      "Exponent2",       "Coefficient",
};
/* ECDSA's private scalar and Ed25519's seed (RFC 6605 §6.1, RFC 8080 §6) */
static const char *const key_field[1] = {"PrivateKey"};

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
static int priv_line(const char *s, size_t len, unsigned line, const key_src_t *src, uint8_t alg,
                     bool *fmt, bool *algo, key_priv_t *pv, char *err, size_t errlen)
{
    const char *name, *val;
    size_t nl, vl;
    if (!split_field(s, len, &name, &nl, &val, &vl)) {
        dnssec_key_text_err(src, line, err, errlen, "expected 'Field: value'");
        return TERN_ESYNTAX;
    }
    if (!*fmt) {
        if (nl != 18 || strncasecmp(name, "Private-key-format", 18) != 0) {
            dnssec_key_text_err(src, line, err, errlen,
                                "not a BIND private key: the first line is not Private-key-format");
            return TERN_ESYNTAX;
        }
        if (!format_ok(val, vl)) {
            dnssec_key_text_err(src, line, err, errlen,
                                "Private-key-format %.*s: only v1.x is supported", (int)vl, val);
            return TERN_ENOTSUP;
        }
        *fmt = true;
        return 0;
    }
    if (nl == 9 && strncasecmp(name, "Algorithm", 9) == 0) {
        /* "13 (ECDSAP256SHA256)": the number is what counts */
        uint32_t a;
        size_t al = 0;
        while (al < vl && !is_blank(val[al]))
            al++;
        if (!word_num(val, al, 255, &a) || a != alg) {
            dnssec_key_text_err(src, line, err, errlen,
                                "Algorithm %.*s, but the DNSKEY's is %u (%s)", (int)vl, val, alg,
                                dnssec_key_text_alg_name(alg));
            return TERN_EINVAL;
        }
        *algo = true;
        return 0;
    }
    bool rsa = alg == DNSSEC_ALG_RSASHA256;
    const char *const *names = rsa ? rsa_fields : key_field;
    size_t count = rsa ? KEY_RSA_FIELDS : 1, cap = rsa ? RSA_FIELD_MAX : 32;
    for (size_t i = 0; i < count; i++) {
        if (nl != strlen(names[i]) || strncasecmp(name, names[i], nl) != 0)
            continue;
        if (pv->line[i]) {
            dnssec_key_text_err(src, line, err, errlen, "%s given again (first on line %u)",
                                names[i], pv->line[i]);
            return TERN_ESYNTAX;
        }
        const char *why = "";
        int r = b64_decode(val, vl, pv->v[i], cap, &why);
        if (r <= 0) {
            dnssec_key_text_err(src, line, err, errlen, "bad base64 in %s: %s", names[i],
                                r ? why : "empty");
            return TERN_ESYNTAX;
        }
        pv->len[i] = (size_t)r;
        pv->line[i] = line;
        return 0;
    }
    return 0; /* Created:, Publish:, Activate: and the like */
}

int dnssec_key_text_priv(const char *text, const key_src_t *src, uint8_t alg, key_priv_t *pv,
                         char *err, size_t errlen)
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
        dnssec_key_text_err(src, 0, err, errlen, "no %s line%s",
                            !fmt ? "Private-key-format" : "Algorithm", !fmt ? " (empty?)" : "");
        return TERN_ESYNTAX;
    }
    bool rsa = alg == DNSSEC_ALG_RSASHA256;
    for (size_t i = 0; i < (rsa ? KEY_RSA_FIELDS : 1); i++) {
        if (!pv->line[i]) {
            dnssec_key_text_err(src, 0, err, errlen, "no %s field",
                                rsa ? rsa_fields[i] : key_field[0]);
            return TERN_ESYNTAX;
        }
    }
    return 0;
}

/* --- writing */

int dnssec_key_text_dnskey(const dnssec_key_t *k, bool with_ttl, uint32_t ttl, char *out,
                           size_t outlen)
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

int dnssec_key_text_files(const dnssec_key_t *k, const key_priv_t *pv, const char *stem,
                          tern_buf_t *pb, tern_buf_t *kb, char *err, size_t errlen)
{
    char ts[16], when[32], line[1024];
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    strftime(ts, sizeof(ts), "%Y%m%d%H%M%S", &tm);
    strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S UTC", &tm);
    /* v1.3 with the timing lines: dnssec-signzone then takes the key as published and active */
    const char *alg = dnssec_key_text_alg_name(k->alg);
    tern_buf_printf(pb, "Private-key-format: v1.3\nAlgorithm: %u (%s)\n", k->alg, alg);
    bool rsa = k->alg == DNSSEC_ALG_RSASHA256;
    for (size_t i = 0; i < (rsa ? KEY_RSA_FIELDS : 1); i++)
        put_field(pb, rsa ? rsa_fields[i] : key_field[0], pv->v[i], pv->len[i]);
    tern_buf_printf(pb, "Created: %s\nPublish: %s\nActivate: %s\n", ts, ts, ts);
    /* the TTL only when the key has one: without, a signer uses the zone's */
    char owner[NAME_TEXT_MAX];
    (void)dname_to_str(k->owner, owner, sizeof(owner));
    if (dnssec_key_text_dnskey(k, k->ttl != 0, k->ttl, line, sizeof(line)) < 0) {
        tern_set_err(err, errlen, "%s: the DNSKEY line is too long", stem);
        return TERN_ENOSPC;
    }
    tern_buf_printf(kb, "; %s (flags %u) of %s, key tag %u, algorithm %u (%s)\n; created %s\n%s\n",
                    k->flags & DNSSEC_FLAG_SEP ? "key-signing key" : "zone-signing key", k->flags,
                    owner, k->tag, k->alg, alg, when, line);
    if (pb->failed || kb->failed) {
        tern_set_err(err, errlen, "%s: out of memory", stem);
        return TERN_ENOMEM;
    }
    return 0;
}
