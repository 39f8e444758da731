/*
 * dnssec_sign.h — make RRSIGs (RFC 4034 §3, §6): the canonical RRset, then libcrypto.
 *
 * Owns: the signing data (RFC 4034 §3.1.8.1: the RRSIG RDATA without its signature, then the
 * RRs in canonical form and order) and the conversion of libcrypto's signature to the DNSSEC
 * form (ECDSA r||s, RFC 6605 §4). No cryptography is written here: SHA-256, ECDSA, Ed25519 and
 * RSA are libcrypto's.
 *
 * Two objects, both made off the query path:
 *   - dnssec_keyctx_t: one key ready to sign on one thread (its own EVP_PKEY_CTX, initialised
 *     for signing once). The loader makes one per key per worker and one for itself; a thread
 *     only ever uses its own.
 *   - dnssec_signer_t: one thread's scratch — the signing-data buffer, the sort index, and a
 *     preallocated region libcrypto's own allocations come from while this thread signs
 *     (dnssec_mem_install()). libcrypto allocates a few dozen small objects per ECDSA or RSA
 *     signature (bignums, the DER signature) and frees them before it returns; inside a
 *     signature they are carved from the region, which is reset afterwards. So a worker signs a
 *     steered subset without a malloc(), and what libcrypto keeps beyond one signature (the
 *     thread's random generator, the key's precomputation) is made before the first one, by
 *     a warm-up signature outside the region (dnssec_keyctx_new(), dnssec_signer_new()).
 *
 * Only the signature proper runs in the region: the digest context and RSA's blinding (kept in
 * the key, renewed in place every 32 signatures) keep what they allocate, so the digest is made
 * outside it and RSA signs with malloc() — algorithm 8 (for existing redins keys) allocates on
 * a worker's cache miss; 13 and 15 do not.
 *
 * Threading: a signer and a keyctx belong to one thread; keys (dnssec_key.h) are shared
 * read-only. Nothing here takes a lock of ours. libcrypto takes one in two places: RSA blinding
 * (per signature, algorithm 8 only) and the reseed of a thread's random generator from the
 * process one (every 2^16 signatures or 7 minutes, OpenSSL 3.0's defaults).
 */
#ifndef TERN_DNSSEC_DNSSEC_SIGN_H
#define TERN_DNSSEC_DNSSEC_SIGN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tern/common/compiler.h"
#include "tern/dnssec/dnssec_key.h"

/* RRSIG RDATA before the signer's name: type covered, algorithm, labels, original TTL,
 * expiration, inception, key tag (RFC 4034 §3.1). */
#define DNSSEC_RRSIG_FIXED 18
/* The largest RRSIG RDATA: fixed part, a 255-byte signer name, an RSA-4096 signature. */
#define DNSSEC_RRSIG_MAX (DNSSEC_RRSIG_FIXED + DNAME_MAXLEN + DNSSEC_SIG_MAX)

typedef struct dnssec_keyctx dnssec_keyctx_t;
typedef struct dnssec_signer dnssec_signer_t;

/** What an RRSIG says besides its signature. */
typedef struct dnssec_rrsig_req {
    const uint8_t *owner; /* the RRset's owner (wire, any case; signed lowercased) */
    unsigned labels;      /* the Labels field: owner's labels, minus one for a wildcard owner */
    uint16_t type;        /* type covered */
    uint32_t ttl;         /* original TTL */
    uint32_t inception;   /* Unix seconds (RFC 1982 serial arithmetic on the wire) */
    uint32_t expiration;
    const uint8_t *signer; /* the zone apex (lowercased wire name) */
} dnssec_rrsig_req_t;

/**
 * Route libcrypto's allocations through dnssec_sign's per-thread regions (outside a signature
 * they go to malloc()/realloc()/free() as before). Must run before libcrypto allocates anything:
 * ternd calls it first thing in main(), tests in their setup. Returns true when installed
 * (libcrypto refuses once it has allocated; signing still works then, with malloc()).
 */
bool dnssec_mem_install(void);

/**
 * A signing context for key k on the calling thread's behalf (it may be made by another
 * thread and handed over). Makes one warm-up signature. NULL on failure, with err set.
 */
dnssec_keyctx_t *dnssec_keyctx_new(const dnssec_key_t *k, char *err, size_t errlen) TERN_WUR;

/** Release. NULL is a no-op. */
void dnssec_keyctx_free(dnssec_keyctx_t *kc);

/** The key kc signs with. */
const dnssec_key_t *dnssec_keyctx_key(const dnssec_keyctx_t *kc);

/**
 * A signer for the calling thread: max_bytes is the largest signing data it will take (the
 * RRSIG header plus the canonical RRs); grow true lets it grow past that (the loader), false
 * makes larger RRsets fail with TERN_ENOSPC (workers: never an allocation per query).
 * Initialises the thread's libcrypto state (random generator, error queue) outside any region.
 * NULL on failure.
 */
dnssec_signer_t *dnssec_signer_new(size_t max_bytes, bool grow) TERN_WUR;

/** Release. NULL is a no-op. Call on the thread that used it or after it ended. */
void dnssec_signer_free(dnssec_signer_t *s);

/**
 * Sign count RRs of one RRset (rdata sequence: per RR a u16 RDLENGTH and the RDATA) as req
 * says, with kc. offs, if not NULL, picks the RRs: RR i is at rdata + offs[i] (a steered
 * subset); else they follow each other. The RRs must be distinct (a zone's RRsets are).
 * Writes the whole RRSIG RDATA (fixed part, signer, signature) to out (cap bytes, at least
 * DNSSEC_RRSIG_MAX is always enough). Returns its length, or a negative TERN_E*: TERN_ENOSPC
 * (signing data larger than the signer takes), TERN_EINVAL (libcrypto failed: a broken key).
 * Performs no malloc() on a signer made with grow false (algorithms 13 and 15).
 */
int dnssec_sign(dnssec_signer_t *s, const dnssec_keyctx_t *kc, const dnssec_rrsig_req_t *req,
                uint16_t count, const uint8_t *rdata, const uint32_t *offs, uint8_t *out,
                size_t cap) TERN_WUR;

/** Signatures made by this signer, and the nanoseconds they took (metrics). */
void dnssec_signer_stats(const dnssec_signer_t *s, uint64_t *sigs, uint64_t *ns);

#endif
