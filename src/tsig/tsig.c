/*
 * tsig.c — TSIG (RFC 8945): finding the TSIG RR, the MAC of requests and responses, and the MAC
 * chain of multi-message responses. Key text parsing lives in tsig_keys.c.
 *
 * Every MAC is computed by feeding its parts straight from the caller's message into one
 * libcrypto HMAC (EVP_MAC) kept in the ctx: the header is fed as a 12-byte copy with the
 * Original ID and the ARCOUNT without the TSIG (RFC 8945 §4.3.3), the rest of the message in
 * place, so no message is ever copied or allocated. The same running HMAC is what lets a client
 * fold unsigned messages of a stream into the next signed one's MAC (§5.3.1) without buffering.
 */
#include "tern/tsig/tsig.h"

#include <string.h>
#include <strings.h>

#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/params.h>

#include "tern/common/byteorder.h"
#include "tern/common/err.h"
#include "tern/wire/parse.h"
#include "tern/wire/rr.h"

enum { ROLE_NONE = 0, ROLE_SERVER = 1, ROLE_CLIENT = 2 };

/* Fixed parts of a TSIG RR around its names and variable fields: TYPE, CLASS, TTL, RDLENGTH
 * (10); Time Signed, Fudge, MAC Size, Original ID, Error, Other Len (16). */
#define RR_FIXED    10
#define RDATA_FIXED 16
/* A BADTIME response's Other Data: the server's clock, 48 bits (RFC 8945 §5.2.3). */
#define BADTIME_OTHER 6

/* ---- algorithms ---- */

typedef struct alg_info {
    const char *name;   /* presentation, as peers write it */
    const char *digest; /* the libcrypto digest name */
    size_t mac_len;
    const char *wire; /* the name in wire form, lowercase */
    size_t wire_len;
} alg_info_t;

/* Wire names as literals: octal length bytes (an octal escape ends after 3 digits, so the
 * label text cannot run into it); the literal's own NUL is the root label. */
#define WIRE(s) s, sizeof(s)
static const alg_info_t algs[] = {
    [TSIG_ALG_HMAC_MD5] = {"hmac-md5.sig-alg.reg.int", "MD5", 16,
                           WIRE("\010hmac-md5\007sig-alg\003reg\003int")},
    [TSIG_ALG_HMAC_SHA1] = {"hmac-sha1", "SHA1", 20, WIRE("\011hmac-sha1")},
    [TSIG_ALG_HMAC_SHA224] = {"hmac-sha224", "SHA224", 28, WIRE("\013hmac-sha224")},
    [TSIG_ALG_HMAC_SHA256] = {"hmac-sha256", "SHA256", 32, WIRE("\013hmac-sha256")},
    [TSIG_ALG_HMAC_SHA384] = {"hmac-sha384", "SHA384", 48, WIRE("\013hmac-sha384")},
    [TSIG_ALG_HMAC_SHA512] = {"hmac-sha512", "SHA512", 64, WIRE("\013hmac-sha512")},
};
#undef WIRE

static const alg_info_t *alg_get(int alg)
{
    if (alg <= TSIG_ALG_NONE || alg > TSIG_ALG_HMAC_SHA512)
        return NULL;
    return &algs[alg];
}

int tsig_alg_from_name(const char *s)
{
    if (!s)
        return TSIG_ALG_NONE;
    size_t n = strlen(s);
    if (n > 0 && s[n - 1] == '.')
        n--;
    /* "hmac-md5" is what BIND's and Knot's configs call it; the wire name is the long one */
    if (n == 8 && strncasecmp(s, "hmac-md5", 8) == 0)
        return TSIG_ALG_HMAC_MD5;
    for (int a = TSIG_ALG_HMAC_MD5; a <= TSIG_ALG_HMAC_SHA512; a++)
        if (strlen(algs[a].name) == n && strncasecmp(s, algs[a].name, n) == 0)
            return a;
    return TSIG_ALG_NONE;
}

const char *tsig_alg_name(int alg)
{
    const alg_info_t *a = alg_get(alg);
    return a ? a->name : NULL;
}

size_t tsig_alg_mac_len(int alg)
{
    const alg_info_t *a = alg_get(alg);
    return a ? a->mac_len : 0;
}

/* The algorithm of a lowercased wire name. */
static int alg_from_wire(const uint8_t *name, size_t len)
{
    for (int a = TSIG_ALG_HMAC_MD5; a <= TSIG_ALG_HMAC_SHA512; a++)
        if (algs[a].wire_len == len && memcmp(algs[a].wire, name, len) == 0)
            return a;
    return TSIG_ALG_NONE;
}

/* RFC 8945 §5.2.2.1: a MAC may be cut to no fewer than the larger of 10 bytes and half the
 * hash. */
static size_t mac_min_len(size_t full)
{
    return full / 2 > 10 ? full / 2 : 10;
}

size_t tsig_rr_size(const tsig_key_t *key)
{
    const alg_info_t *a = alg_get(key->alg);
    if (!a)
        return 0;
    return key->wire_len + RR_FIXED + a->wire_len + RDATA_FIXED + a->mac_len + BADTIME_OTHER;
}

const char *tsig_strerror(int code)
{
    switch (code) {
    case TSIG_ENOSIG:
        return "no TSIG where one is required";
    case TSIG_EBADKEY:
        return "TSIG with another key or algorithm";
    case TSIG_EBADSIG:
        return "TSIG MAC does not verify";
    case TSIG_EBADTIME:
        return "TSIG time outside the fudge";
    case TSIG_EPEER:
        return "the peer returned a TSIG error";
    default:
        return tern_strerror(code);
    }
}

const char *tsig_error_name(unsigned error)
{
    static const char *const names[] = {
        [0] = "NOERROR",  [1] = "FORMERR",  [2] = "SERVFAIL",  [3] = "NXDOMAIN",   [4] = "NOTIMP",
        [5] = "REFUSED",  [6] = "YXDOMAIN", [7] = "YXRRSET",   [8] = "NXRRSET",    [9] = "NOTAUTH",
        [10] = "NOTZONE", [16] = "BADSIG",  [17] = "BADKEY",   [18] = "BADTIME",   [19] = "BADMODE",
        [20] = "BADNAME", [21] = "BADALG",  [22] = "BADTRUNC", [23] = "BADCOOKIE",
    };
    if (error < TERN_ARRAY_SIZE(names) && names[error])
        return names[error];
    return "?";
}

/* ---- reading a message ---- */

static uint64_t rd48(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 6; i++)
        v = v << 8 | p[i];
    return v;
}

static void wr48(uint8_t *p, uint64_t v)
{
    for (int i = 5; i >= 0; i--, v >>= 8)
        p[i] = (uint8_t)v;
}

/* The name at msg[*pos] (dname_unpack(): its own bytes end by end, pointers go backwards only);
 * with out, stored lowercased (the canonical form the MAC covers) and its length in *outlen. */
static int read_name(const uint8_t *msg, size_t len, size_t end, size_t *pos, uint8_t *out,
                     uint8_t *outlen)
{
    uint8_t name[DNAME_MAXLEN];
    int n = dname_unpack(msg, len, end, pos, out ? name : NULL, NULL);
    if (n < 0)
        return n;
    if (out) {
        dname_lower(out, name);
        *outlen = (uint8_t)n;
    }
    return 0;
}

/* The RDATA of a TSIG RR at msg[pos..pos+rdlen) into rr. */
static int parse_tsig_rdata(const uint8_t *msg, size_t len, size_t pos, size_t rdlen, tsig_rr_t *rr)
{
    size_t end = pos + rdlen;
    /* the algorithm name should be uncompressed (RFC 3597 §4 for types after RFC 1035); a
     * compressed one is still read, backwards only, as we read every name */
    if (read_name(msg, len, end, &pos, rr->alg_name, &rr->alg_name_len) < 0)
        return TERN_EMALF;
    if (end - pos < 10)
        return TERN_EMALF;
    rr->time_signed = rd48(msg + pos);
    rr->fudge = tern_rd16(msg + pos + 6);
    rr->mac_len = tern_rd16(msg + pos + 8);
    pos += 10;
    if (end - pos < (size_t)rr->mac_len + 6)
        return TERN_EMALF;
    rr->mac = msg + pos;
    pos += rr->mac_len;
    rr->orig_id = tern_rd16(msg + pos);
    rr->error = tern_rd16(msg + pos + 2);
    rr->other_len = tern_rd16(msg + pos + 4);
    pos += 6;
    if (end - pos != rr->other_len)
        return TERN_EMALF;
    rr->other = msg + pos;
    rr->alg = alg_from_wire(rr->alg_name, rr->alg_name_len);
    return 0;
}

int tsig_find(const uint8_t *msg, size_t len, tsig_rr_t *rr)
{
    memset(rr, 0, sizeof(*rr));
    if (len < WIRE_HDR_LEN)
        return TERN_EMALF;
    unsigned qd = tern_rd16(msg + 4);
    size_t nrr = (size_t)tern_rd16(msg + 6) + tern_rd16(msg + 8) + tern_rd16(msg + 10);
    unsigned ar = tern_rd16(msg + 10);
    size_t pos = WIRE_HDR_LEN;
    for (unsigned i = 0; i < qd; i++) {
        if (read_name(msg, len, len, &pos, NULL, NULL) < 0 || len - pos < 4)
            return TERN_EMALF;
        pos += 4;
    }
    for (size_t i = 0; i < nrr; i++) {
        size_t start = pos;
        if (read_name(msg, len, len, &pos, NULL, NULL) < 0 || len - pos < RR_FIXED)
            return TERN_EMALF;
        uint16_t type = tern_rd16(msg + pos), rclass = tern_rd16(msg + pos + 2);
        uint32_t ttl = (uint32_t)tern_rd16(msg + pos + 4) << 16 | tern_rd16(msg + pos + 6);
        size_t rdlen = tern_rd16(msg + pos + 8);
        pos += RR_FIXED;
        if (rdlen > len - pos)
            return TERN_EMALF;
        if (type == WIRE_T_TSIG) {
            /* §5.1: only as the last record, of the additional section; once */
            if (i != nrr - 1 || ar == 0 || rclass != WIRE_CLASS_ANY || ttl != 0)
                return TERN_EMALF;
            size_t owner = start;
            if (read_name(msg, len, len, &owner, rr->key_name, &rr->key_name_len) < 0 ||
                parse_tsig_rdata(msg, len, pos, rdlen, rr) < 0) {
                memset(rr, 0, sizeof(*rr));
                return TERN_EMALF;
            }
            rr->present = true;
            rr->off = start;
        }
        pos += rdlen;
    }
    if (pos != len) { /* trailing bytes: not one message */
        memset(rr, 0, sizeof(*rr));
        return TERN_EMALF;
    }
    return 0;
}

/* ---- the HMAC ---- */

/* Start a MAC with key; the HMAC state is made on first use and kept for the ctx's life. */
static int mac_begin(tsig_ctx_t *ctx, const tsig_key_t *key)
{
    const alg_info_t *a = alg_get(key->alg);
    if (!a)
        return TERN_EINVAL;
    if (!ctx->hmac) {
        EVP_MAC *mac = EVP_MAC_fetch(NULL, "HMAC", NULL);
        if (!mac)
            return TERN_ENOTSUP;
        ctx->hmac = EVP_MAC_CTX_new(mac);
        EVP_MAC_free(mac); /* the ctx holds its own reference */
        if (!ctx->hmac)
            return TERN_ENOMEM;
    }
    OSSL_PARAM params[] = {
        OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, (char *)(uintptr_t)a->digest, 0),
        OSSL_PARAM_construct_end(),
    };
    /* MD5 is missing where a FIPS provider is the only one: that key cannot be used here */
    if (EVP_MAC_init(ctx->hmac, key->secret, key->secret_len, params) != 1)
        return TERN_ENOTSUP;
    return 0;
}

static int mac_feed(tsig_ctx_t *ctx, const void *p, size_t n)
{
    if (n == 0)
        return 0;
    return EVP_MAC_update(ctx->hmac, p, n) == 1 ? 0 : TERN_EIO;
}

static int mac_feed_u16(tsig_ctx_t *ctx, uint16_t v)
{
    uint8_t b[2];
    tern_wr16(b, v);
    return mac_feed(ctx, b, 2);
}

/* A MAC as the digest parts want it: its size, then the bytes (§4.3.2, §5.3.1). */
static int mac_feed_mac(tsig_ctx_t *ctx, const uint8_t *mac, uint16_t len)
{
    int r = mac_feed_u16(ctx, len);
    return r < 0 ? r : mac_feed(ctx, mac, len);
}

/* The message msg[0..off) as the MAC covers it (§4.3.3): the header with ID := orig_id and
 * ARCOUNT := arcount, then the rest as it is. */
static int mac_feed_msg(tsig_ctx_t *ctx, const uint8_t *msg, size_t off, uint16_t orig_id,
                        uint16_t arcount)
{
    uint8_t hdr[WIRE_HDR_LEN];
    memcpy(hdr, msg, WIRE_HDR_LEN);
    tern_wr16(hdr, orig_id);
    tern_wr16(hdr + 10, arcount);
    int r = mac_feed(ctx, hdr, sizeof(hdr));
    return r < 0 ? r : mac_feed(ctx, msg + WIRE_HDR_LEN, off - WIRE_HDR_LEN);
}

/* The TSIG variables (§4.3.3): key name, class ANY, TTL 0, algorithm name (both canonical),
 * time signed, fudge, error, other len and other data. */
static int mac_feed_vars(tsig_ctx_t *ctx, const uint8_t *kname, size_t klen, const uint8_t *aname,
                         size_t alen, uint64_t t, uint16_t fudge, uint16_t error,
                         const uint8_t *other, uint16_t other_len)
{
    uint8_t mid[6], tail[12];
    tern_wr16(mid, WIRE_CLASS_ANY);
    memset(mid + 2, 0, 4);
    wr48(tail, t);
    tern_wr16(tail + 6, fudge);
    tern_wr16(tail + 8, error);
    tern_wr16(tail + 10, other_len);
    int r = mac_feed(ctx, kname, klen);
    if (r == 0)
        r = mac_feed(ctx, mid, sizeof(mid));
    if (r == 0)
        r = mac_feed(ctx, aname, alen);
    if (r == 0)
        r = mac_feed(ctx, tail, sizeof(tail));
    if (r == 0)
        r = mac_feed(ctx, other, other_len);
    return r;
}

/* The timers alone (§5.3.1): time signed and fudge. */
static int mac_feed_timers(tsig_ctx_t *ctx, uint64_t t, uint16_t fudge)
{
    uint8_t b[8];
    wr48(b, t);
    tern_wr16(b + 6, fudge);
    return mac_feed(ctx, b, sizeof(b));
}

static int mac_final(tsig_ctx_t *ctx, uint8_t out[TSIG_MAC_MAX], size_t *outlen)
{
    return EVP_MAC_final(ctx->hmac, out, outlen, TSIG_MAC_MAX) == 1 ? 0 : TERN_EIO;
}

/* ---- writing the RR ---- */

typedef struct rr_out {
    const uint8_t *kname, *aname;
    size_t klen, alen;
    uint64_t time;
    uint16_t fudge, error, mac_len, other_len;
    const uint8_t *mac, *other;
} rr_out_t;

/* The TSIG RR we sign with key now: its names, our clock and fudge, a full-length MAC. */
static rr_out_t rr_out_signed(const tsig_key_t *key, const alg_info_t *a, uint64_t now,
                              uint8_t *mac)
{
    return (rr_out_t){.kname = key->wire,
                      .klen = key->wire_len,
                      .aname = (const uint8_t *)a->wire,
                      .alen = a->wire_len,
                      .time = now,
                      .fudge = TSIG_FUDGE,
                      .mac = mac,
                      .mac_len = (uint16_t)a->mac_len};
}

static size_t rr_out_size(const rr_out_t *o)
{
    return o->klen + RR_FIXED + o->alen + RDATA_FIXED + o->mac_len + o->other_len;
}

/* Whether the RR fits after msg[0..len) in cap (and in a DNS message) and ARCOUNT can grow. */
static bool rr_fits(const uint8_t *msg, size_t len, size_t cap, size_t size)
{
    return len <= cap && size <= cap - len && len + size <= UINT16_MAX &&
           tern_rd16(msg + 10) < UINT16_MAX;
}

/* Append the TSIG RR o (owner and algorithm uncompressed, Original ID = the header's ID) and
 * count it in ARCOUNT; the caller checked rr_fits(). */
static size_t rr_write(uint8_t *msg, size_t len, const rr_out_t *o)
{
    uint8_t *p = msg + len;
    memcpy(p, o->kname, o->klen);
    p += o->klen;
    tern_wr16(p, WIRE_T_TSIG);
    tern_wr16(p + 2, WIRE_CLASS_ANY);
    memset(p + 4, 0, 4);
    tern_wr16(p + 8, (uint16_t)(o->alen + RDATA_FIXED + o->mac_len + o->other_len));
    p += RR_FIXED;
    memcpy(p, o->aname, o->alen);
    p += o->alen;
    wr48(p, o->time);
    tern_wr16(p + 6, o->fudge);
    tern_wr16(p + 8, o->mac_len);
    p += 10;
    if (o->mac_len)
        memcpy(p, o->mac, o->mac_len);
    p += o->mac_len;
    memcpy(p, msg, 2); /* Original ID */
    tern_wr16(p + 2, o->error);
    tern_wr16(p + 4, o->other_len);
    p += 6;
    if (o->other_len)
        memcpy(p, o->other, o->other_len);
    p += o->other_len;
    tern_wr16(msg + 10, (uint16_t)(tern_rd16(msg + 10) + 1));
    return (size_t)(p - msg);
}

/* ---- the ctx ---- */

void tsig_ctx_init(tsig_ctx_t *ctx)
{
    memset(ctx, 0, sizeof(*ctx));
}

void tsig_ctx_clear(tsig_ctx_t *ctx)
{
    EVP_MAC_CTX_free(ctx->hmac);
    OPENSSL_cleanse(ctx, sizeof(*ctx));
}

/* Back to a fresh transaction, keeping the HMAC state for reuse. */
static void ctx_reset(tsig_ctx_t *ctx, int role)
{
    void *hmac = ctx->hmac;
    OPENSSL_cleanse(ctx, sizeof(*ctx));
    ctx->hmac = hmac;
    ctx->role = role;
}

static void ctx_save_mac(tsig_ctx_t *ctx, const uint8_t *mac, size_t len)
{
    memcpy(ctx->mac, mac, len);
    ctx->mac_len = (uint16_t)len;
}

/* ---- server ---- */

static const tsig_key_t *key_lookup(const tsig_key_t *keys, size_t nkeys, const tsig_rr_t *rr)
{
    for (size_t i = 0; i < nkeys; i++)
        if (keys[i].alg == rr->alg && keys[i].wire_len == rr->key_name_len &&
            memcmp(keys[i].wire, rr->key_name, rr->key_name_len) == 0)
            return &keys[i];
    return NULL;
}

int tsig_verify_request(tsig_ctx_t *ctx, const tsig_key_t *keys, size_t nkeys, const uint8_t *msg,
                        size_t len, uint64_t now)
{
    ctx_reset(ctx, ROLE_SERVER);
    tsig_rr_t rr;
    int r = tsig_find(msg, len, &rr);
    if (r < 0)
        return r;
    if (!rr.present)
        return TERN_ENOENT;
    memcpy(ctx->req_key_name, rr.key_name, rr.key_name_len);
    ctx->req_key_name_len = rr.key_name_len;
    memcpy(ctx->req_alg_name, rr.alg_name, rr.alg_name_len);
    ctx->req_alg_name_len = rr.alg_name_len;
    ctx->req_time = rr.time_signed;
    ctx->req_fudge = rr.fudge;

    /* 1. key (§5.2.1): name and algorithm both ours */
    const tsig_key_t *key = key_lookup(keys, nkeys, &rr);
    if (!key)
        return ctx->error = TSIG_BADKEY;
    /* 2. MAC (§5.2.2), with the truncation rules of §5.2.2.1: longer than the hash is FORMERR;
     * shorter than allowed (empty included) is refused as BADTRUNC before any comparison, so an
     * unverified request never gets a signed answer */
    size_t full = tsig_alg_mac_len(key->alg);
    if (rr.mac_len > full)
        return TERN_EMALF;
    if (rr.mac_len < mac_min_len(full))
        return ctx->error = TSIG_BADTRUNC;
    uint8_t mac[TSIG_MAC_MAX];
    size_t mac_len;
    if ((r = mac_begin(ctx, key)) < 0 ||
        (r = mac_feed_msg(ctx, msg, rr.off, rr.orig_id, (uint16_t)(tern_rd16(msg + 10) - 1))) < 0 ||
        (r = mac_feed_vars(ctx, rr.key_name, rr.key_name_len, rr.alg_name, rr.alg_name_len,
                           rr.time_signed, rr.fudge, rr.error, rr.other, rr.other_len)) < 0 ||
        (r = mac_final(ctx, mac, &mac_len)) < 0)
        return r;
    bool ok = CRYPTO_memcmp(mac, rr.mac, rr.mac_len) == 0;
    OPENSSL_cleanse(mac, sizeof(mac));
    if (!ok)
        return ctx->error = TSIG_BADSIG;
    /* verified: the response (even a BADTIME one) is signed with this key over this MAC, as
     * received (a truncated request MAC is used truncated, §5.2.2.1) */
    ctx->key = key;
    ctx_save_mac(ctx, rr.mac, rr.mac_len);
    /* 3. time (§5.2.3), with the request's own fudge */
    if (now > rr.time_signed + rr.fudge || rr.time_signed > now + rr.fudge)
        return ctx->error = TSIG_BADTIME;
    /* 4. truncation policy (§5.2.4): ours is §5.2.2.1's minimum, checked above */
    return 0;
}

int tsig_sign_response(tsig_ctx_t *ctx, uint8_t *msg, size_t len, size_t cap, uint64_t now,
                       size_t *newlen)
{
    if (ctx->role != ROLE_SERVER || !ctx->key || ctx->error || len < WIRE_HDR_LEN)
        return TERN_EINVAL;
    const tsig_key_t *key = ctx->key;
    const alg_info_t *a = alg_get(key->alg);
    uint8_t mac[TSIG_MAC_MAX];
    size_t mac_len = 0;
    rr_out_t o = rr_out_signed(key, a, now, mac);
    if (!rr_fits(msg, len, cap, rr_out_size(&o)))
        return TERN_ENOSPC;
    int r = mac_begin(ctx, key);
    if (r == 0)
        r = mac_feed_mac(ctx, ctx->mac, ctx->mac_len);
    if (r == 0)
        r = mac_feed(ctx, msg, len); /* its ID is the Original ID; ARCOUNT not yet counting us */
    if (r == 0 && ctx->nmsg == 0)    /* §5.3: request MAC, message, all variables */
        r = mac_feed_vars(ctx, o.kname, o.klen, o.aname, o.alen, o.time, o.fudge, 0, NULL, 0);
    else if (r == 0) /* §5.3.1: prior MAC, message, timers */
        r = mac_feed_timers(ctx, o.time, o.fudge);
    if (r == 0)
        r = mac_final(ctx, mac, &mac_len);
    if (r < 0)
        return r;
    *newlen = rr_write(msg, len, &o);
    ctx_save_mac(ctx, mac, mac_len);
    OPENSSL_cleanse(mac, sizeof(mac));
    ctx->nmsg++;
    return 0;
}

int tsig_append_error(tsig_ctx_t *ctx, uint8_t *msg, size_t len, size_t cap, uint64_t now,
                      size_t *newlen)
{
    if (ctx->role != ROLE_SERVER || ctx->error == 0 || len < WIRE_HDR_LEN)
        return TERN_EINVAL;
    uint8_t mac[TSIG_MAC_MAX], other[BADTIME_OTHER];
    size_t mac_len = 0;
    rr_out_t o = {.kname = ctx->req_key_name,
                  .klen = ctx->req_key_name_len,
                  .aname = ctx->req_alg_name,
                  .alen = ctx->req_alg_name_len,
                  .time = ctx->req_time,
                  .fudge = ctx->req_fudge,
                  .error = ctx->error};
    if (ctx->error != TSIG_BADTIME || !ctx->key) {
        /* §5.3.2: the request did not verify, so the answer is unsigned (MAC size 0) and
         * echoes what the request said */
        if (!rr_fits(msg, len, cap, rr_out_size(&o)))
            return TERN_ENOSPC;
        *newlen = rr_write(msg, len, &o);
        return 0;
    }
    /* BADTIME: signed over the request MAC and all variables; Time Signed is the request's, so
     * the client's time check passes and it can read our clock from Other Data (§5.2.3) */
    const alg_info_t *a = alg_get(ctx->key->alg);
    wr48(other, now);
    o.fudge = TSIG_FUDGE;
    o.mac = mac;
    o.mac_len = (uint16_t)a->mac_len;
    o.other = other;
    o.other_len = BADTIME_OTHER;
    if (!rr_fits(msg, len, cap, rr_out_size(&o)))
        return TERN_ENOSPC;
    int r = mac_begin(ctx, ctx->key);
    if (r == 0)
        r = mac_feed_mac(ctx, ctx->mac, ctx->mac_len);
    if (r == 0)
        r = mac_feed(ctx, msg, len);
    if (r == 0)
        r = mac_feed_vars(ctx, o.kname, o.klen, o.aname, o.alen, o.time, o.fudge, o.error, other,
                          BADTIME_OTHER);
    if (r == 0)
        r = mac_final(ctx, mac, &mac_len);
    if (r < 0)
        return r;
    *newlen = rr_write(msg, len, &o);
    OPENSSL_cleanse(mac, sizeof(mac));
    return 0;
}

/* ---- client ---- */

int tsig_sign_request(tsig_ctx_t *ctx, const tsig_key_t *key, uint8_t *msg, size_t len, size_t cap,
                      uint64_t now, size_t *newlen)
{
    ctx_reset(ctx, ROLE_NONE);
    const alg_info_t *a = alg_get(key->alg);
    if (!a || len < WIRE_HDR_LEN)
        return TERN_EINVAL;
    uint8_t mac[TSIG_MAC_MAX];
    size_t mac_len = 0;
    rr_out_t o = rr_out_signed(key, a, now, mac);
    if (!rr_fits(msg, len, cap, rr_out_size(&o)))
        return TERN_ENOSPC;
    int r = mac_begin(ctx, key);
    if (r == 0)
        r = mac_feed(ctx, msg, len);
    if (r == 0)
        r = mac_feed_vars(ctx, o.kname, o.klen, o.aname, o.alen, o.time, o.fudge, 0, NULL, 0);
    if (r == 0)
        r = mac_final(ctx, mac, &mac_len);
    if (r < 0)
        return r;
    *newlen = rr_write(msg, len, &o);
    ctx_save_mac(ctx, mac, mac_len);
    OPENSSL_cleanse(mac, sizeof(mac));
    ctx->role = ROLE_CLIENT;
    ctx->key = key;
    return 0;
}

static int client_fail(tsig_ctx_t *ctx, int code)
{
    ctx->failed = true;
    ctx->running = false;
    return code;
}

/* Start the MAC of the next signed message after a verified one: the prior MAC first. */
static int chain_begin(tsig_ctx_t *ctx)
{
    if (ctx->running)
        return 0;
    int r = mac_begin(ctx, ctx->key);
    if (r == 0)
        r = mac_feed_mac(ctx, ctx->mac, ctx->mac_len);
    ctx->running = r == 0;
    return r;
}

/* The MAC a signed response rr in msg should carry: the first against the request MAC and all
 * variables (§5.3), later ones against the prior MAC, the unsigned messages since (already in
 * the running HMAC) and the timers (§5.3.1). */
static int client_mac(tsig_ctx_t *ctx, const uint8_t *msg, const tsig_rr_t *rr,
                      uint8_t mac[TSIG_MAC_MAX], size_t *mac_len)
{
    uint16_t arcount = (uint16_t)(tern_rd16(msg + 10) - 1);
    int r;
    if (ctx->nmsg == 0) {
        r = mac_begin(ctx, ctx->key);
        if (r == 0)
            r = mac_feed_mac(ctx, ctx->mac, ctx->mac_len);
        if (r == 0)
            r = mac_feed_msg(ctx, msg, rr->off, rr->orig_id, arcount);
        if (r == 0)
            r = mac_feed_vars(ctx, rr->key_name, rr->key_name_len, rr->alg_name, rr->alg_name_len,
                              rr->time_signed, rr->fudge, rr->error, rr->other, rr->other_len);
    } else {
        r = chain_begin(ctx);
        if (r == 0)
            r = mac_feed_msg(ctx, msg, rr->off, rr->orig_id, arcount);
        if (r == 0)
            r = mac_feed_timers(ctx, rr->time_signed, rr->fudge);
    }
    if (r == 0)
        r = mac_final(ctx, mac, mac_len);
    ctx->running = false;
    return r;
}

int tsig_verify_response(tsig_ctx_t *ctx, const uint8_t *msg, size_t len, uint64_t now,
                         size_t *len_without_tsig)
{
    if (ctx->role != ROLE_CLIENT || ctx->failed)
        return TERN_EINVAL;
    const tsig_key_t *key = ctx->key;
    tsig_rr_t rr;
    int r = tsig_find(msg, len, &rr);
    if (r < 0)
        return client_fail(ctx, r);
    *len_without_tsig = rr.present ? rr.off : len;
    if (!rr.present) {
        /* §5.3.1: the first response must be signed, later ones at least every 100th; an
         * unsigned one joins the next signed one's MAC whole, as received */
        if (ctx->nmsg == 0 || ctx->nunsigned >= TSIG_MAX_UNSIGNED)
            return client_fail(ctx, TSIG_ENOSIG);
        if ((r = chain_begin(ctx)) < 0 || (r = mac_feed(ctx, msg, len)) < 0)
            return client_fail(ctx, r);
        ctx->nunsigned++;
        return TSIG_PENDING;
    }
    if (rr.mac_len == 0) {
        /* an unsigned error answer (§5.3.2: BADKEY, BADSIG) cannot be authenticated; report
         * it, the caller decides how far to trust it */
        if (rr.error == 0)
            return client_fail(ctx, TSIG_EBADSIG);
        ctx->peer_error = rr.error;
        ctx->peer_signed = false;
        return client_fail(ctx, TSIG_EPEER);
    }
    if (rr.alg != key->alg || rr.key_name_len != key->wire_len ||
        memcmp(rr.key_name, key->wire, key->wire_len) != 0)
        return client_fail(ctx, TSIG_EBADKEY);
    size_t full = tsig_alg_mac_len(key->alg);
    if (rr.mac_len > full)
        return client_fail(ctx, TERN_EMALF);
    if (rr.mac_len < mac_min_len(full))
        return client_fail(ctx, TSIG_EBADSIG);

    uint8_t mac[TSIG_MAC_MAX];
    size_t mac_len;
    if ((r = client_mac(ctx, msg, &rr, mac, &mac_len)) < 0)
        return client_fail(ctx, r);
    bool ok = CRYPTO_memcmp(mac, rr.mac, rr.mac_len) == 0;
    OPENSSL_cleanse(mac, sizeof(mac));
    if (!ok)
        return client_fail(ctx, TSIG_EBADSIG);
    if (rr.error) {
        /* a signed error (BADTIME, or BADTRUNC from a stricter peer): authentic */
        ctx->peer_error = rr.error;
        ctx->peer_signed = true;
        if (rr.error == TSIG_BADTIME && rr.other_len == BADTIME_OTHER)
            ctx->peer_time = rd48(rr.other);
        return client_fail(ctx, TSIG_EPEER);
    }
    if (now > rr.time_signed + rr.fudge || rr.time_signed > now + rr.fudge)
        return client_fail(ctx, TSIG_EBADTIME);
    ctx_save_mac(ctx, rr.mac, rr.mac_len);
    ctx->nunsigned = 0;
    ctx->nmsg++;
    return 0;
}

int tsig_verify_end(const tsig_ctx_t *ctx)
{
    if (ctx->role != ROLE_CLIENT || ctx->failed)
        return TERN_EINVAL;
    return ctx->nmsg > 0 && ctx->nunsigned == 0 ? 0 : TSIG_ENOSIG;
}
