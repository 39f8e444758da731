/*
 * dnssec_zone.h — one signed zone: its keys, the signatures made ahead, and what each worker
 * needs to sign the rest per query.
 *
 * What is signed when:
 *   - at load (the loader, dnssec_zone_sign()): every RRset of the zone's authoritative data
 *     whose answer is always the same — all but the steered A/AAAA RRsets (geo, weights,
 *     health: the subset is chosen per query), DNSKEY by every KSK, the rest by each zone
 *     signer (one, or two during an algorithm or CSK rollover);
 *     DS at a delegation is signed, the NS there and glue are not (RFC 4035 §2.2);
 *   - per query (dnssec_online(), on the worker, through its bounded signature cache): the
 *     subset a client is given of a steered RRset; answers synthesised from a wildcard (signed
 *     as the name asked, so no wildcard proof is needed); CNAMEs synthesised from a DNAME; and
 *     denial of existence, compact (RFC 9824): a name that does not exist gets NOERROR, the
 *     SOA, and an NSEC at the name itself whose next name is the name's immediate successor
 *     ("\000.name") and whose bitmap holds RRSIG, NSEC and NXNAME; NODATA gets the same NSEC
 *     with the name's own types. A validator needs nothing else (no walkable chain exists).
 *
 * Refresh: signatures made at load live `lifetime` seconds from an inception an hour in the
 * past (clock skew); the loader makes a new set once less than `refresh` seconds remain
 * (dnssec_zone_due(), then dnssec_zone_sign()) and publishes it by RCU in place of the old one —
 * the zone itself is untouched, so nothing is reloaded. Online signatures are cached until less
 * than `refresh` remains, then made again.
 *
 * Lifecycle: made and signed by the loader before the zone is published; freed with the zone
 * (zone_t.dnssec_free) after the grace period. Threading: workers read `sigs` through
 * dnssec_zone_sigs() (an acquire load; the loader stores with release and frees the old set
 * only after synchronize_rcu()); each worker signs with its own keyctx per zone signer
 * (zsk_ctx[worker * nzsk + signer]).
 */
#ifndef TERN_DNSSEC_DNSSEC_ZONE_H
#define TERN_DNSSEC_DNSSEC_ZONE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tern/common/compiler.h"
#include "tern/dnssec/dnssec_key.h"
#include "tern/dnssec/dnssec_sign.h"
#include "tern/zone/zone.h"

/* NXNAME (RFC 9824 §3): in an NSEC bitmap, "this name does not exist". */
#define DNSSEC_T_NXNAME 128

typedef struct dnssec_policy {
    uint32_t lifetime; /* seconds a signature is valid from its inception; default 14 days */
    uint32_t refresh;  /* re-sign when less than this remains; default 7 days */
    bool export;       /* secondaries transfer the zone: make its export (dnssec_export.h) with
                          its signatures, and never re-sign a version in place */
} dnssec_policy_t;

#define DNSSEC_LIFETIME_DEFAULT (14u * 86400u)
#define DNSSEC_REFRESH_DEFAULT  (7u * 86400u)
/* Inception an hour back: validators whose clocks run behind still accept a fresh signature. */
#define DNSSEC_INCEPTION_SKEW 3600u

/* The signatures made ahead for one zone version: per RRset (zone_t.rrsets order), 1 + the
 * offset in blob of a u16 count and that many RRSIG RDATA (each u16 RDLENGTH + RDATA, the
 * writer's rdata sequence), or 0: not signed. */
typedef struct dnssec_sigs {
    uint32_t inception, expiration; /* of every signature made for it */
    uint32_t earliest; /* the earliest expiration of any signature in it (one taken over from the
                          previous version may expire before the ones made now) */
    uint64_t reused;   /* signatures taken over from the previous version */
    uint32_t count;    /* entries of at: the zone's RRsets */
    uint32_t *at;
    uint8_t *blob;
    size_t blob_len;
    uint64_t made; /* signatures made for it */
} dnssec_sigs_t;

/* Keys that sign the zone's RRsets at once: two during an algorithm rollover (RFC 6781 §4.1.4:
 * every RRset signed with both algorithms) or a CSK rollover (old and new CSK); four leaves room
 * for a plan that overlaps both. Each is one more RRSIG per RRset and one more signature per
 * query-time signing. */
#define DNSSEC_ZONE_SIGNERS_MAX 4

typedef struct dnssec_zone {
    uint64_t gen; /* distinct for every signed zone version: the key of its cached signatures */
    dnssec_key_t **keys; /* every key (owned) */
    uint8_t *roles;      /* per key: DNSSEC_ROLE_* */
    unsigned nkeys;
    uint8_t cds_digest; /* 0: no CDS; 2 or 4 */
    bool cds_delete;
    /* sign all but DNSKEY (static keys: the first key without SEP, else the first key, a
     * combined signing key; managed keys: every key with DNSSEC_ROLE_SIGN_ZONE, in key order) */
    const dnssec_key_t *zsk[DNSSEC_ZONE_SIGNERS_MAX];
    unsigned nzsk;
    dnssec_keyctx_t *loader_zsk[DNSSEC_ZONE_SIGNERS_MAX]; /* the loader's own contexts */
    dnssec_keyctx_t **loader_ksk;
    unsigned nksk;
    dnssec_keyctx_t **zsk_ctx; /* per worker w, zone signer j: [w * nzsk + j]; then the control
                                  thread's (DNSSEC_WORKER_CONTROL) at w = nworkers */
    unsigned nworkers;
    dnssec_policy_t policy;
    dnssec_sigs_t *sigs; /* RCU: read with dnssec_zone_sigs() */
    /* policy.export: the NSEC chain and RRSIGs a transfer sends, made with the first
     * signatures (dnssec_setup_attach()); immutable afterwards */
    struct dnssec_export *export;
} dnssec_zone_t;

/**
 * A signing state for zone origin (wire name) with keys (ownership passes to it, also on
 * failure) for nworkers workers. At least one key; the keys must belong to the zone and share
 * one algorithm. Every key is published; the SEP keys (flags 257) sign DNSKEY, the first other
 * one signs the rest (a zone of SEP keys only: the first signs everything). Errors name the zone
 * and the key.
 */
int dnssec_zone_new(const uint8_t *origin, dnssec_key_t **keys, unsigned nkeys, unsigned nworkers,
                    const dnssec_policy_t *policy, dnssec_zone_t **out, char *err,
                    size_t errlen) TERN_WUR;

/* What a key does in a zone whose keys are managed (tern/dnssec/dnssec_kasp.h's plan). */
enum dnssec_role {
    DNSSEC_ROLE_PUBLISH = 1,     /* its DNSKEY is in the DNSKEY RRset */
    DNSSEC_ROLE_SIGN_DNSKEY = 2, /* signs DNSKEY, CDS and CDNSKEY */
    DNSSEC_ROLE_SIGN_ZONE = 4,   /* signs every other RRset */
    DNSSEC_ROLE_CDS = 8,         /* its CDS and CDNSKEY are published (RFC 7344) */
};

/**
 * The same with each key's roles (DNSSEC_ROLE_* bits, roles[i] for keys[i]), as a key policy's
 * plan gives them: 1..DNSSEC_ZONE_SIGNERS_MAX keys sign the zone and at least one signs DNSKEY;
 * keys may use several algorithms (an algorithm rollover), and then every algorithm of the
 * published keys signs both the zone and DNSKEY (RFC 4035 §2.2, RFC 6840 §5.11: a validator may
 * expect a signature of each). A key that signs before it is published (pre-active) or after it
 * left DNSKEY (post-active) adds signatures validators ignore. cds_digest is the CDS digest type
 * (2 or 4); cds_delete publishes CDS/CDNSKEY DELETE (RFC 8078) instead.
 */
int dnssec_zone_new_roles(const uint8_t *origin, dnssec_key_t **keys, const uint8_t *roles,
                          unsigned nkeys, unsigned cds_digest, bool cds_delete, unsigned nworkers,
                          const dnssec_policy_t *policy, dnssec_zone_t **out, char *err,
                          size_t errlen) TERN_WUR;

/**
 * The apex records the zone builder adds for dz (zone_builder_set_dnssec()): each entry a u16
 * type, a u16 RDLENGTH and the RDATA — the DNSKEY of every published key, and the CDS and
 * CDNSKEY of the keys the parent is to take (or the DELETE pair). Into out (cap bytes); returns
 * the length, or TERN_ENOSPC.
 */
int dnssec_zone_dnskeys(const dnssec_zone_t *dz, uint8_t *out, size_t cap) TERN_WUR;

/** True for the RRsets the DNSKEY signers sign: DNSKEY, CDS and CDNSKEY at the apex. */
static inline bool dnssec_ksk_signed(uint16_t type)
{
    return type == WIRE_T_DNSKEY || type == WIRE_T_CDS || type == WIRE_T_CDNSKEY;
}

/**
 * Sign every static RRset of z (which must hold the keys' DNSKEYs at its apex) as of time now,
 * and publish the result as dz->sigs; the previous set, if any, is returned in *old for the
 * caller to free with dnssec_sigs_free() after a grace period. Errors name the zone and the
 * RRset or key.
 */
int dnssec_zone_sign(dnssec_zone_t *dz, const zone_t *z, uint32_t now, dnssec_sigs_t **old,
                     char *err, size_t errlen) TERN_WUR;

/**
 * The same, taking over what prev (the zone's previous version, signed, or NULL) signed of the
 * same data: an RRset with the same owner, type, TTL and RRs, signed by the same keys, keeps its
 * RRSIGs while more than the refresh time remains of each. So a change re-signs what it changed
 * (and the SOA), and a secondary's IXFR carries only those signatures. prev must not be
 * re-signed in place meanwhile (the caller's thread owns it, or it is exported, which never is).
 */
int dnssec_zone_sign_from(dnssec_zone_t *dz, const zone_t *z, const zone_t *prev, uint32_t now,
                          dnssec_sigs_t **old, char *err, size_t errlen) TERN_WUR;

/** True when a and b sign the zone's RRsets with the same keys, in the same order (signatures
 * of one may be taken over by the other). */
bool dnssec_zone_same_signers(const dnssec_zone_t *a, const dnssec_zone_t *b);

/** RRset s (at node n of a new version) as prev has it, when prev has exactly the same (owner,
 * type, TTL and RRs), else NULL: what signatures may be taken over for. */
const zone_rrset_t *dnssec_prev_rrset(const zone_t *prev, const zone_node_t *n,
                                      const zone_rrset_t *s);

/** The bytes of count RRSIGs (an rdata sequence at seq) when none of them is due at now (more
 * than refresh seconds remain of each), with the earliest expiration in *earliest; 0 when one
 * is due. */
size_t dnssec_rrsigs_fresh(const uint8_t *seq, unsigned count, uint32_t now, uint32_t refresh,
                           uint32_t *earliest);

/** What the RRSIG of RRset type/ttl at node n of zone apex says, with sg's validity: the Labels
 * field leaves a wildcard's "*" out (RFC 4034 §3.1.3). For the signing passes (ahead, export). */
static inline dnssec_rrsig_req_t dnssec_node_req(const zone_node_t *n, uint16_t type, uint32_t ttl,
                                                 const dnssec_sigs_t *sg, const uint8_t *apex)
{
    return (dnssec_rrsig_req_t){
        .owner = n->name,
        .labels = (n->flags & ZONE_NODE_WILD) ? n->labels - 1u : n->labels,
        .type = type,
        .ttl = ttl,
        .inception = sg->inception,
        .expiration = sg->expiration,
        .signer = apex,
    };
}

/** A wire name as text for messages ("?" when it cannot be written). */
void dnssec_name_text(const uint8_t *name, char *buf, size_t len);

/** True when a and b are the same key (its DNSKEY RDATA). */
bool dnssec_key_same(const dnssec_key_t *a, const dnssec_key_t *b);

/** The expiration field of an RRSIG RDATA (rd: its first byte). */
static inline uint32_t dnssec_rrsig_expiration(const uint8_t *rd)
{
    return (uint32_t)rd[8] << 24 | (uint32_t)rd[9] << 16 | (uint32_t)rd[10] << 8 | rd[11];
}

/** The earliest expiration of dz's signatures made ahead and of its export's (0: unsigned). */
uint32_t dnssec_zone_earliest(const dnssec_zone_t *dz);

/** True when dz's signatures should be made again at time now (refresh). */
bool dnssec_zone_due(const dnssec_zone_t *dz, uint32_t now);

/** Release a signature set. NULL is a no-op. */
void dnssec_sigs_free(dnssec_sigs_t *s);

/** Release everything (the zone's dnssec_free). NULL is a no-op. */
void dnssec_zone_free(dnssec_zone_t *dz);

/** The current signature set (worker side). */
static inline const dnssec_sigs_t *dnssec_zone_sigs(const dnssec_zone_t *dz)
{
    return __atomic_load_n(&dz->sigs, __ATOMIC_ACQUIRE);
}

/** The signatures made ahead for RRset s of zone z: an rdata sequence of *count RRSIGs, or
 * NULL when s is not signed ahead. */
static inline const uint8_t *dnssec_static(const dnssec_sigs_t *sg, const zone_t *z,
                                           const zone_rrset_t *s, uint16_t *count)
{
    size_t i = (size_t)(s - z->rrsets);
    if (!sg || i >= sg->count || !sg->at[i])
        return NULL;
    const uint8_t *p = sg->blob + sg->at[i] - 1;
    *count = (uint16_t)(p[0] << 8 | p[1]);
    return p + 2;
}

/*
 * Per worker: the signer and the signature cache for what is signed per query.
 *
 * The cache is 4-way set-associative, keyed by a 64-bit hash of (zone version, owner, type,
 * TTL, labels, the chosen RRs as a set: the same subset in another order is the same entry);
 * an entry holds the RRSIG's fixed part and signature (the signer's name is the zone's apex,
 * written from the zone). It is valid while more than the policy's refresh time remains.
 * Entries: a power of two; each about 600 bytes, touched only when used.
 */
typedef struct dnssec_worker dnssec_worker_t;

/* The id of the control thread's signer (`ternctl explain`): a zone keeps one set of key
 * contexts for it beyond the workers' (libcrypto contexts are not shared between threads). */
#define DNSSEC_WORKER_CONTROL 0xFFFFFFFFu

dnssec_worker_t *dnssec_worker_new(unsigned id, unsigned entries) TERN_WUR;
void dnssec_worker_free(dnssec_worker_t *w);

/** What the cache and signer did (metrics): hits, misses, signatures, nanoseconds signing,
 * failures. Written by the worker only; read by anyone. */
typedef struct dnssec_worker_stats {
    uint64_t hits, misses, sigs, sign_ns, fails;
} dnssec_worker_stats_t;
void dnssec_worker_stats(const dnssec_worker_t *w, dnssec_worker_stats_t *out);

/**
 * The RRSIG by zone signer `signer` (0..dz->nzsk-1) of count RRs (rdata sequence at rdata,
 * picked by offs when not NULL) owned by owner (wire, any case) of type/ttl in zone z (signed by
 * dz), as of time now: from the cache or signed now. labels is the RRSIG Labels field. Writes
 * the RRSIG RDATA into out (at least DNSSEC_RRSIG_MAX bytes) and returns its length, or a
 * negative TERN_E* (the answer then goes without the signature, and a validator treats it as
 * bogus — counted as a failure). An RRset gets one RRSIG per zone signer: call it for each.
 */
int dnssec_online(dnssec_worker_t *w, const dnssec_zone_t *dz, unsigned signer, const zone_t *z,
                  const uint8_t *owner, unsigned labels, uint16_t type, uint32_t ttl,
                  uint16_t count, const uint8_t *rdata, const uint32_t *offs, uint32_t now,
                  uint8_t *out) TERN_WUR;

/**
 * An NSEC type bitmap (RFC 4034 §4.1.2) of types[0..ntypes) merged with extra[0..nextra) (each
 * ascending; a type in both is set once) into out (cap bytes). Returns its length, or
 * TERN_ENOSPC.
 */
int dnssec_nsec_bitmap(const uint16_t *types, unsigned ntypes, const uint16_t *extra,
                       unsigned nextra, uint8_t *out, size_t cap) TERN_WUR;

/**
 * The RDATA of the compact-denial NSEC (RFC 9824) at owner (wire, any case): next name
 * "\000.owner" lowercased, then the bitmap of types[0..ntypes) (ascending, no duplicates) plus
 * RRSIG and NSEC (and NXNAME when nxname), into out (cap bytes; DNSSEC_NSEC_MAX is enough for any
 * node: a next name and 256 windows of 34 bytes). Returns its length, or TERN_ENOSPC (also when
 * the owner is 254+ bytes long: no successor name exists below 255 bytes, so the answer goes
 * without an NSEC).
 */
#define DNSSEC_NSEC_MAX (DNAME_MAXLEN + 2 + 256 * 34)
int dnssec_nsec_rdata(const uint8_t *owner, const uint16_t *types, unsigned ntypes, bool nxname,
                      uint8_t *out, size_t cap) TERN_WUR;

#endif
