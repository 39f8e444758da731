/*
 * tsig.h — transaction signatures (TSIG, RFC 8945) for zone transfers and NOTIFY, both sides.
 *
 * Owns: TSIG keys (name, algorithm, decoded secret; parsed from tern's config or from BIND key
 * files), finding and checking the TSIG RR of a message, and the MAC chain of one transaction
 * (a request and its one or many responses) in a tsig_ctx_t.
 *
 * Lifecycle: keys are made at config load (tsig_key_init(), tsig_keys_parse_bind()) and are
 * immutable afterwards; a ctx lives for one transaction on the stack or in a transfer's state,
 * tsig_ctx_init() → sign/verify calls → tsig_ctx_clear(). The ctx points at the key it uses, so
 * keys outlive every ctx that uses them.
 *
 * Layer: its own module below conf (which makes keys from the config) and xfr (which signs and
 * verifies with them); it knows no zones and links only wire, common and libcrypto.
 *
 * Threading: keys are read-only and shared freely; a ctx belongs to the one thread that runs its
 * transaction. Nothing here runs on a query worker: the xfr threads call it. Messages are signed
 * and verified in the caller's buffer without copying; the only allocation is the HMAC state
 * (libcrypto EVP_MAC), made once per ctx on first use and reused for every message.
 *
 * Server side (AXFR/IXFR out, NOTIFY in):
 *   r = tsig_verify_request(&ctx, keys, nkeys, req, len, now);
 *     TERN_EMALF   → answer FORMERR, unsigned (a TSIG that is misplaced, doubled or garbled)
 *     TERN_ENOENT  → the request is unsigned: answer unsigned, or REFUSED if a key is required
 *     > 0          → a TSIG error (TSIG_BADSIG, ...): answer with RCODE NOTAUTH set by the
 *                    caller, then tsig_append_error() (§5.3.2: unsigned, or signed for BADTIME)
 *     0            → ctx.key is the key; check it is the one the zone wants; answer, and
 *                    tsig_sign_response() every message of the answer (§5.3, §5.3.1).
 * Client side (AXFR/IXFR in, NOTIFY out):
 *   tsig_sign_request(&ctx, key, req, len, cap, now, &len);  send; then per message received
 *   r = tsig_verify_response(&ctx, msg, len, now, &msglen);   0 ok, TSIG_PENDING (an unsigned
 *   message in a stream, accepted until the next signed one), or an error (TSIG_E*, TERN_E*);
 *   after the last message tsig_verify_end(&ctx) says whether the stream ended signed.
 *
 * Time is always passed in (seconds since the epoch) so tests can move it.
 */
#ifndef TERN_TSIG_TSIG_H
#define TERN_TSIG_TSIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tern/common/compiler.h"
#include "tern/wire/dname.h"

/* HMAC algorithms (RFC 8945 §6). 0 is "none/unknown". */
typedef enum tsig_alg {
    TSIG_ALG_NONE = 0,
    TSIG_ALG_HMAC_MD5,
    TSIG_ALG_HMAC_SHA1,
    TSIG_ALG_HMAC_SHA224,
    TSIG_ALG_HMAC_SHA256,
    TSIG_ALG_HMAC_SHA384,
    TSIG_ALG_HMAC_SHA512,
} tsig_alg_t;

/* TSIG error codes carried in the RR's Error field (RFC 8945 §3, IANA "TSIG Error values"). */
enum tsig_error {
    TSIG_NOERROR = 0,
    TSIG_BADSIG = 16,
    TSIG_BADKEY = 17,
    TSIG_BADTIME = 18,
    TSIG_BADTRUNC = 22,
};

/* Returned by tsig_verify_response() for an unsigned message between signed ones (§5.3.1). */
#define TSIG_PENDING 1

/* tsig's own result codes, negative like TERN_E* and far below them; tsig_strerror() names
 * them (and every TERN_E*). Client side: each tells the caller what to log. */
enum {
    TSIG_ENOSIG = -1100,   /* no TSIG where one is required */
    TSIG_EBADKEY = -1101,  /* signed with another key or algorithm than ours */
    TSIG_EBADSIG = -1102,  /* the MAC does not verify (or is absent or cut too short) */
    TSIG_EBADTIME = -1103, /* signed too far from now (outside the fudge) */
    TSIG_EPEER = -1104,    /* the peer answered with a TSIG error: ctx->peer_error */
};

#define TSIG_SECRET_MAX 128 /* bytes: the HMAC block of SHA-384/512; longer keys add nothing */
#define TSIG_MAC_MAX    64  /* bytes: HMAC-SHA512's output, the longest */
/* RFC 8945 §10 recommends 300 s: wide enough for loosely synchronised clocks, narrow enough to
 * bound replays. Used in what we sign; a peer's own fudge is honoured when we verify. */
#define TSIG_FUDGE 300
/* RFC 8945 §5.3.1: a client accepts up to 99 unsigned messages between two signed ones. */
#define TSIG_MAX_UNSIGNED 99

typedef struct tsig_key {
    char name[256];    /* presentation form, lowercased, no final dot ("xfr.key") */
    uint8_t wire[255]; /* the same lowercased in wire form */
    uint8_t wire_len;
    int alg;                         /* tsig_alg_t */
    uint8_t secret[TSIG_SECRET_MAX]; /* decoded */
    size_t secret_len;
} tsig_key_t;

/* A TSIG RR as found in a message (tsig_find()). Names are decompressed and lowercased (the
 * canonical form the MAC covers); mac and other point into the message. */
typedef struct tsig_rr {
    bool present; /* false: the message has no TSIG (the other fields are zero) */
    size_t off;   /* where the TSIG RR starts: the length of the message without it */
    uint8_t key_name[DNAME_MAXLEN];
    uint8_t key_name_len;
    uint8_t alg_name[DNAME_MAXLEN];
    uint8_t alg_name_len;
    int alg;              /* tsig_alg_t of alg_name; TSIG_ALG_NONE if we do not know it */
    uint64_t time_signed; /* 48 bits */
    uint16_t fudge;
    uint16_t mac_len;
    const uint8_t *mac;
    uint16_t orig_id;
    uint16_t error;
    uint16_t other_len;
    const uint8_t *other;
} tsig_rr_t;

/* One transaction's state. Readable fields are documented; the rest is internal. A ctx zeroed
 * by tsig_ctx_init() (or = {0}) is ready; tsig_ctx_clear() releases it. */
typedef struct tsig_ctx {
    const tsig_key_t *key; /* the transaction's key: the request's (server, after a verified or
                              BADTIME request) or ours (client); NULL otherwise */
    uint16_t error;        /* server: the TSIG error tsig_verify_request() found */
    uint16_t peer_error;   /* client: the TSIG error the peer returned (TSIG_EPEER) */
    bool peer_signed;      /* client: that error response carried a MAC that verified */
    uint64_t peer_time;    /* client: the peer's clock from a BADTIME response, else 0 */
    unsigned nmsg;         /* messages signed (server) or verified (client) so far */

    /* internal */
    int role; /* 0 none, 1 server, 2 client */
    bool failed;
    unsigned nunsigned; /* client: unsigned messages since the last signed one */
    bool running;       /* the HMAC holds the prior MAC and unsigned messages already */
    uint16_t mac_len;
    uint8_t mac[TSIG_MAC_MAX]; /* the request MAC, then the prior MAC of the chain */
    uint64_t req_time;         /* server: the request's time signed and fudge */
    uint16_t req_fudge;
    uint8_t req_key_name[DNAME_MAXLEN]; /* server: echoed in error responses */
    uint8_t req_key_name_len;
    uint8_t req_alg_name[DNAME_MAXLEN];
    uint8_t req_alg_name_len;
    void *hmac; /* EVP_MAC_CTX, made on first use */
} tsig_ctx_t;

/* ---- algorithms and keys ---- */

/** The algorithm named s ("hmac-sha256", "HMAC-MD5.SIG-ALG.REG.INT.", ... any case, final dot
 * optional; "hmac-md5" alone is accepted too), or TSIG_ALG_NONE. */
int tsig_alg_from_name(const char *s);

/** The presentation name of alg as peers expect it ("hmac-sha256", "hmac-md5.sig-alg.reg.int"),
 * or NULL for an unknown value. */
const char *tsig_alg_name(int alg);

/** The full MAC length of alg in bytes (16 for MD5 ... 64 for SHA-512), 0 for an unknown one. */
size_t tsig_alg_mac_len(int alg);

/**
 * Fill k from a key name (presentation form, final dot optional), an algorithm name
 * (tsig_alg_from_name()) and a base64 secret (blanks inside are skipped, as BIND does). Returns 0,
 * or TERN_EINVAL with a precise message in err: a bad name, an unknown algorithm, bad base64, an
 * empty secret or one longer than TSIG_SECRET_MAX bytes. k is cleansed on failure.
 */
int tsig_key_init(tsig_key_t *k, const char *name, const char *alg, const char *secret_b64,
                  char *err, size_t errlen) TERN_WUR;

/**
 * Parse BIND key syntax: zero or more `key "name" { algorithm hmac-sha256; secret "b64=="; };`
 * statements (the name and values quoted or not), with comments (#, //, and C-style blocks),
 * as tsig-keygen, rndc-confgen -a and named.conf write them. Any other statement, a missing or
 * repeated algorithm or secret, or a key defined twice is an error. On success *keys (malloc'd,
 * free() it after cleansing, NULL when *n is 0) holds *n keys in file order. Errors: TERN_ESYNTAX
 * (or TERN_EINVAL for a bad key) with "file:line: message" in err; TERN_ENOMEM.
 */
int tsig_keys_parse_bind(const char *text, const char *file, tsig_key_t **keys, size_t *n,
                         char *err, size_t errlen) TERN_WUR;

/** Bytes to reserve at the end of a message for the TSIG RR that tsig_sign_*() or
 * tsig_append_error() write with key (the largest: a BADTIME response with its Other Data);
 * 0 for a key without a valid algorithm. */
size_t tsig_rr_size(const tsig_key_t *key);

/** Text for a TSIG_E* code, or tern_strerror() of any other code; never NULL. */
const char *tsig_strerror(int code);

/** Mnemonic of a TSIG error value ("BADSIG", ...), or of an RCODE-range value; "?" unknown. */
const char *tsig_error_name(unsigned error);

/* ---- messages ---- */

/**
 * Walk msg[0..len) (header, question, every record of every section, compressed names anywhere
 * with pointers that must point backwards, no length trusted) and locate its TSIG RR. Returns 0
 * with rr filled (rr->present false when there is none), or TERN_EMALF: a message cut short or
 * with trailing bytes, a bad name, a TSIG that is not the last record of the additional section,
 * two of them, one whose class is not ANY or TTL not 0, or garbled RDATA (RFC 8945 §5.1, §5.2).
 */
int tsig_find(const uint8_t *msg, size_t len, tsig_rr_t *rr) TERN_WUR;

/** A ctx ready for a transaction (all zero). tsig_verify_request() and tsig_sign_request()
 * start a new transaction on a used ctx, so one ctx serves a thread's transactions one after
 * another and its HMAC state is made once. */
void tsig_ctx_init(tsig_ctx_t *ctx);

/** Release the HMAC state and cleanse the ctx (MACs); it is as after tsig_ctx_init(). */
void tsig_ctx_clear(tsig_ctx_t *ctx);

/**
 * Server: check the TSIG of request msg[0..len) against keys[0..nkeys) at time now, in the
 * order of RFC 8945 §5.2: key (name and algorithm), MAC (with §5.2.2.1's truncation rules), time.
 * Returns TERN_EMALF (answer FORMERR), TERN_ENOENT (no TSIG), TERN_ENOMEM, or the TSIG error to
 * answer with: 0, TSIG_BADKEY, TSIG_BADSIG, TSIG_BADTIME or TSIG_BADTRUNC (a MAC shorter than
 * max(10, half the hash) bytes, or empty: §5.2.2.1 allows FORMERR there, BADTRUNC tells the
 * client why; that MAC is never compared, so the answer is unsigned). A MAC longer than the hash
 * is TERN_EMALF. ctx is reset first and afterwards holds what the response needs; ctx->key is
 * the key used (NULL for BADKEY, BADSIG and BADTRUNC). §5.2.3's replay cache (the last Time
 * Signed per key) is not kept: keys are immutable and shared by threads.
 */
int tsig_verify_request(tsig_ctx_t *ctx, const tsig_key_t *keys, size_t nkeys, const uint8_t *msg,
                        size_t len, uint64_t now) TERN_WUR;

/**
 * Server: sign response msg[0..len) (buffer capacity cap) after tsig_verify_request() returned 0:
 * append the TSIG RR and increment ARCOUNT. The first response's MAC covers the request MAC, the
 * message and all TSIG variables (§5.3); each later one of the same transaction (an AXFR/IXFR
 * over TCP) the prior MAC, the message and the timers only (§5.3.1). The message's ID is the
 * Original ID. Returns 0 with *newlen set; TERN_ENOSPC (message unchanged; tsig_rr_size() says
 * what to keep free), TERN_EINVAL (ctx not a verified request), TERN_ENOMEM.
 */
int tsig_sign_response(tsig_ctx_t *ctx, uint8_t *msg, size_t len, size_t cap, uint64_t now,
                       size_t *newlen) TERN_WUR;

/**
 * Server: append the TSIG RR of an error response (§5.3.2) after tsig_verify_request() returned
 * a TSIG error. The caller sets RCODE NOTAUTH (9) in the header first (a BADTIME response's MAC
 * covers the header). BADKEY, BADSIG and BADTRUNC get an unsigned TSIG (MAC size 0) echoing the
 * request's key and algorithm names, time and fudge; BADTIME is signed with the request MAC, its
 * Time Signed is the request's and its Other Data our clock (now). Returns 0 with *newlen set,
 * TERN_ENOSPC (unchanged), TERN_EINVAL (no TSIG error in ctx), TERN_ENOMEM.
 */
int tsig_append_error(tsig_ctx_t *ctx, uint8_t *msg, size_t len, size_t cap, uint64_t now,
                      size_t *newlen) TERN_WUR;

/**
 * Client: sign request msg[0..len) (capacity cap) with key at time now: append the TSIG RR,
 * increment ARCOUNT, and start a new transaction in ctx (whatever it held) expecting responses
 * signed with key. Returns 0 with *newlen set, TERN_ENOSPC (unchanged), TERN_EINVAL (a key
 * without a valid algorithm, a message shorter than a header), TERN_ENOTSUP (libcrypto lacks
 * the digest, e.g. MD5 under FIPS), TERN_ENOMEM.
 */
int tsig_sign_request(tsig_ctx_t *ctx, const tsig_key_t *key, uint8_t *msg, size_t len, size_t cap,
                      uint64_t now, size_t *newlen) TERN_WUR;

/**
 * Client: verify response msg[0..len), the next of the transaction tsig_sign_request() started:
 * the first against the request MAC and all variables, later ones against the prior MAC and the
 * timers, with up to TSIG_MAX_UNSIGNED unsigned messages between signed ones folded into the
 * next signed one's MAC (§5.3.1). *len_without_tsig is the message's length without its TSIG RR
 * (ARCOUNT still counts it). Returns:
 *   0             signed, verified, in time
 *   TSIG_PENDING  unsigned, accepted for now (the next signed message vouches for it)
 *   TSIG_ENOSIG   unsigned where a TSIG is required: the first response, or one too many
 *   TSIG_EBADKEY  signed with another key name or algorithm
 *   TSIG_EBADSIG  the MAC does not verify, is missing, or is truncated below the minimum
 *   TSIG_EBADTIME time signed further than its fudge from now
 *   TSIG_EPEER    the peer sent a TSIG error (ctx->peer_error; ctx->peer_signed says whether the
 *                 response was signed and verified, as BADTIME responses are; BADKEY and BADSIG
 *                 ones are unsigned, so unauthenticated); ctx->peer_time is its clock on BADTIME
 *   TERN_EMALF    a malformed message or TSIG RR
 *   TERN_EINVAL   no request signed on ctx, or the transaction already failed
 *   TERN_ENOMEM
 * After any error the transaction is over: later calls return TERN_EINVAL.
 */
int tsig_verify_response(tsig_ctx_t *ctx, const uint8_t *msg, size_t len, uint64_t now,
                         size_t *len_without_tsig) TERN_WUR;

/**
 * Client: call after the last message of a response stream. Returns 0 if the last message
 * received was signed and verified, TSIG_ENOSIG if it was unsigned (RFC 8945 §5.3.1: the last
 * message must be signed) or nothing verified yet, TERN_EINVAL if the transaction failed.
 */
int tsig_verify_end(const tsig_ctx_t *ctx) TERN_WUR;

#endif
