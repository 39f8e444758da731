/*
 * zone_builder.h — collect the records of one zone, validate them, and produce an immutable zone_t.
 *
 * Lifecycle: new → add (any number) → finish (validates and builds; the builder is consumed) or
 * free. Used only by loaders (zone files now, Redis/JSON later), never on the query path.
 * Not thread-safe; one builder per thread.
 *
 * finish() computes everything listed in zone.h. Validation, each error naming file:line of the
 * offending record where one exists:
 *   - an SOA at the apex (exactly one RR) and NS at the apex are required ("no SOA" names the
 *     source);
 *   - CNAME beside any other data at one name, or more than one CNAME (or DNAME) at a name, is
 *     an error;
 *   - a name below a DNAME owner, and a DNAME beside NS anywhere but at the apex, are errors
 *     (RFC 6672 §2.3, §2.4: such data would never be answered);
 *   - NS at a wildcard name is an error (RFC 4592 §4.2: tern does not serve wildcard
 *     delegations);
 *   - records of class other than IN are an error.
 * Out-of-zone records are refused by add() with TERN_EOUTZONE so the loader can warn and go on.
 * Duplicate RRs (same owner, type, and RDATA compared in canonical form: names inside the RDATA
 * case-insensitively, RFC 2181 §5 and RFC 4034 §6.2) are merged silently, the first spelling
 * kept; TTLs within an RRset that differ use the lowest, with a warning (RFC 2181 §5.2).
 */
#ifndef TERN_ZONE_ZONE_BUILDER_H
#define TERN_ZONE_ZONE_BUILDER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tern/common/compiler.h"
#include "tern/zone/zone.h"

typedef struct zone_builder zone_builder_t;

/* The largest RRset finish() accepts: zone_rrset_t.count is 16 bits (no DNS message could carry
 * more anyway), and its RDATA with the 2-byte length prefixes must stay far from 32-bit offsets.
 * Exported so that a loader can refuse one source's data before it reaches the builder. */
#define ZONE_BUILDER_MAX_RRSET_RRS   UINT16_MAX
#define ZONE_BUILDER_MAX_RRSET_BYTES (UINT32_MAX / 2)

/** Builder for the zone at origin (validated wire name; any case). source names it in messages. */
zone_builder_t *zone_builder_new(const uint8_t *origin, const char *source) TERN_WUR;

/**
 * Add one RR. owner is a validated wire name (any case); rdata is uncompressed wire RDATA of
 * rdlen bytes. file/line locate it for error messages (file may be NULL).
 * Returns 0, TERN_EOUTZONE (not added), TERN_EINVAL (bad class or type such as OPT), TERN_ENOMEM.
 */
int zone_builder_add(zone_builder_t *b, const uint8_t *owner, uint16_t type, uint16_t rclass,
                     uint32_t ttl, const uint8_t *rdata, uint16_t rdlen, const char *file,
                     unsigned line) TERN_WUR;

/** Per-RR geo metadata for zone_builder_add_geo(); the builder copies everything. */
typedef struct zone_geo_meta {
    uint32_t weight;
    const uint16_t *countries; /* ZONE_CC codes; 0 = redins' "" */
    size_t ncountries;         /* at most 255 */
    const uint32_t *asns;      /* 0 = redins' 0 (the fallback set) */
    size_t nasns;              /* at most 65535 */
    bool has_location;
    double lat, lon;     /* degrees, when has_location */
    health_ep_t *health; /* the RR's health check, or NULL; the builder takes its own reference */
    uint16_t priority;   /* failover tier (zone_geo_rr_t.priority); 0 = the best, the default */
    /* latency group (tern/geo/latency_group.h): its id (0 = none) and name (group_len bytes,
     * at most LATENCY_GROUP_MAX; copied) */
    uint32_t group;
    const char *group_name;
    size_t group_len;
} zone_geo_meta_t;

/**
 * Add one A or AAAA RR with geo metadata (meta may be NULL: no country, no ASN, weight 0, no
 * location). An RRset mixing RRs added with and without metadata is fine. A duplicate RR keeps
 * the first one's metadata. Returns as zone_builder_add(); TERN_EINVAL for other types.
 */
int zone_builder_add_geo(zone_builder_t *b, const uint8_t *owner, uint16_t type, uint32_t ttl,
                         const uint8_t *rdata, uint16_t rdlen, const zone_geo_meta_t *meta,
                         const char *file, unsigned line) TERN_WUR;

/**
 * Set the steering policy of the A or AAAA RRset at owner (the RRs may be added before or after).
 * An RRset whose policy is all defaults (multi, order none, filter none) is served plain, as is
 * one that never gets a policy. Setting it twice keeps the last. Returns 0, TERN_EOUTZONE,
 * TERN_EINVAL (another type), TERN_ENOMEM.
 */
int zone_builder_set_policy(zone_builder_t *b, const uint8_t *owner, uint16_t type,
                            const zone_geo_policy_t *policy) TERN_WUR;

/**
 * Health checks by address (ternd.yaml's health: checks): called by finish() for every kept A and
 * AAAA RR that was not given a check through zone_geo_meta_t.health, with its lowercased owner
 * and its address (4 or 16 bytes by type). Returns a new reference to the endpoint that checks
 * it (the builder keeps it, the zone holds its own), or NULL: not checked.
 */
typedef health_ep_t *(*zone_builder_health_fn)(void *ctx, const uint8_t *owner, uint16_t type,
                                               const uint8_t *addr);

/** Set the health hook (before finish). */
void zone_builder_set_health(zone_builder_t *b, zone_builder_health_fn fn, void *ctx);

/**
 * Make the zone ready for the signer (tern/dnssec/dnssec_zone.h): finish() adds the records in
 * dnskeys (len bytes, copied; each a u16 type, a u16 RDLENGTH and the RDATA: the signer's
 * DNSKEYs, CDS and CDNSKEY, dnssec_zone_dnskeys()) at the apex with TTL ttl (0: the SOA's), and
 * from now on add() drops RRSIG, NSEC, NSEC3 and NSEC3PARAM records silently (the
 * signer makes its own; zone_builder_dnssec_dropped() counts them for a warning). Call before
 * the first add(). Returns 0 or TERN_ENOMEM.
 */
int zone_builder_set_dnssec(zone_builder_t *b, const uint8_t *dnskeys, size_t len,
                            uint32_t ttl) TERN_WUR;

/** The zone's redins domain_id (len bytes, copied; at most ZONE_DOMAIN_ID_MAX): zone_t.domain_id.
 * 0, or TERN_EINVAL (too long), TERN_ENOMEM. */
int zone_builder_set_domain_id(zone_builder_t *b, const char *id, size_t len) TERN_WUR;

/* The longest domain_id kept: redins' are UUIDs (36 bytes); room for other ids, none for a
 * megabyte of text in a Redis key. */
#define ZONE_DOMAIN_ID_MAX 255

/** Records add() dropped because the zone is signed by tern. */
size_t zone_builder_dnssec_dropped(const zone_builder_t *b);

/** True when an RR already added has owner (a validated wire name, any case) as its owner. For a
 * loader that gives each owner from one place only (zone_json.h's Redis labels). */
bool zone_builder_has_owner(const zone_builder_t *b, const uint8_t *owner);

/* At most this many records are reserved ahead by zone_builder_expect(). */
#define ZONE_BUILDER_EXPECT_MAX ((size_t)4 << 20)

/**
 * Room, ahead, for about this many records (and names), so that loading a large zone does not
 * copy its growing arrays again and again. Best effort and bounded (a 2 GB file of holes must
 * not reserve much): the arrays still grow past it, and what is reserved but never written
 * costs address space, not memory.
 */
void zone_builder_expect(zone_builder_t *b, size_t records);

/**
 * Validate and build. On success *out is the new zone and 0 is returned. On failure a negative
 * TERN_E* code is returned and err (size errlen) holds "file:line: message" (or "zone X: message"
 * when no line applies). The builder is freed in both cases.
 */
int zone_builder_finish(zone_builder_t *b, zone_t **out, char *err, size_t errlen) TERN_WUR;

/**
 * Why the last zone_builder_add() failed: "file:line: message" (or "zone X: message"); "" when
 * nothing failed yet. Valid until the next add() or the builder is freed.
 */
const char *zone_builder_error(const zone_builder_t *b);

/** Abandon a builder. NULL is a no-op. */
void zone_builder_free(zone_builder_t *b);

#endif
