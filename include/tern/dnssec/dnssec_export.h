/*
 * dnssec_export.h — the signed zone as a secondary needs it: what AXFR/IXFR send beside a signed
 * zone's own records.
 *
 * tern answers queries with signatures made ahead and per query, and denies existence with
 * compact NSECs made per query (dnssec_zone.h). A secondary that does not sign (NSD, a default
 * BIND) can do neither: it serves what it was sent. So a signed zone that is transferred also
 * gets an export, made once by the thread that signed the zone:
 *   - an NSEC chain over the zone's names in canonical order (RFC 4034 §4, §6.1): one NSEC per
 *     authoritative name and per delegation point (not for glue, occluded names or empty
 *     non-terminals), the last pointing back to the apex; its bitmap is the name's types plus
 *     RRSIG and NSEC (at a delegation: NS, DS if any, RRSIG, NSEC, RFC 4035 §2.3); its TTL the
 *     negative TTL, min(SOA TTL, SOA MINIMUM) (RFC 9077);
 *   - the RRSIGs of every authoritative RRset: the ones made ahead, the full list of every
 *     steered RRset (a secondary has no steering: it serves every record, signed), and each NSEC.
 * Each RRSIG group is one owner and one covered type, with the TTL of what it covers (RFC 4034
 * §3: an RRSIG's TTL is its RRset's), so a group is a set a secondary stores as it is.
 * The groups are in canonical owner order, then by type (RRSIG before NSEC), then by covered
 * type: two exports of one zone compare in one merge pass (the IXFR journal's diff,
 * tern/xfr/journal.h).
 *
 * Lifecycle: made by dnssec_export_make() right after the zone's signatures (the loader thread
 * or the Redis reader); owned by the dnssec_zone_t of one zone version and freed with it. A zone
 * version that is exported is never re-signed in place: new signatures make a new version with
 * a new serial, so a secondary's copy and ours always agree on what a serial holds.
 * Threading: immutable once made; the transfer threads read it while they pin the zone version.
 * The owner names point into the zone's nodes (alive as long as the zone).
 */
#ifndef TERN_DNSSEC_DNSSEC_EXPORT_H
#define TERN_DNSSEC_DNSSEC_EXPORT_H

#include <stddef.h>
#include <stdint.h>

#include "tern/common/compiler.h"
#include "tern/zone/zone.h"

struct dnssec_zone;

/* Some RRs of one owner and type with one TTL (an NSEC, or the RRSIGs of one covered type). */
typedef struct dnssec_export_set {
    const uint8_t *owner; /* lowercased wire name, a node's of the zone */
    uint8_t owner_len;
    uint16_t type;    /* WIRE_T_NSEC or WIRE_T_RRSIG */
    uint16_t covered; /* RRSIG: the type covered; NSEC: 0 */
    uint16_t count;   /* RRs in rdata */
    uint32_t ttl;
    uint32_t rdata_len;
    const uint8_t *rdata; /* RDATA sequence: per RR a big-endian u16 RDLENGTH + RDATA */
} dnssec_export_set_t;

typedef struct dnssec_export {
    dnssec_export_set_t *sets; /* in the order above */
    size_t count;
    size_t records;    /* RRs over all sets */
    uint64_t made;     /* signatures made for it (beyond the ones made ahead) */
    uint64_t reused;   /* ... and taken over from the previous version's export */
    uint32_t earliest; /* the earliest expiration of the signatures it made or took over */
    uint32_t names;    /* NSECs: names in the chain */
    uint8_t *blob;     /* what the sets point at besides the zone and its signatures */
    size_t blob_len;
    int64_t make_ms; /* how long it took */
} dnssec_export_t;

/**
 * The export of zone z, signed by dz (whose signatures made ahead are current: the ones the
 * export refers to, dnssec_zone_sign()). Signatures made here have the inception and expiration
 * of those made ahead. prev (the zone's previous version, or NULL): an NSEC, or a steered RRset,
 * whose data and signing key are the same there keeps its RRSIGs while none is due (as
 * dnssec_zone_sign_from() does for the rest). 0 and *out, or a negative TERN_E* with err naming
 * the zone and what failed (TERN_ENOMEM; a signing failure names the RRset and key).
 */
int dnssec_export_make(const struct dnssec_zone *dz, const zone_t *z, const zone_t *prev,
                       dnssec_export_t **out, char *err, size_t errlen) TERN_WUR;

/** Release. NULL is a no-op. */
void dnssec_export_free(dnssec_export_t *e);

/** RFC 4034 §6.1 canonical order of two lowercased wire names: <0, 0, >0. */
int dnssec_export_name_cmp(const uint8_t *a, const uint8_t *b);

/** The order of two sets as an export lists them (owner, type, covered type): <0, 0, >0. */
int dnssec_export_set_cmp(const dnssec_export_set_t *a, const dnssec_export_set_t *b);

#endif
