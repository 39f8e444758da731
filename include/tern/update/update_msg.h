/*
 * update_msg.h — an RFC 2136 UPDATE message: parsed with every byte checked, then evaluated over
 * the zone version served into the RR-level change a journal keeps (the RRs removed, the RRs
 * added, the new apex SOA), or the rcode that refuses it. Nothing is applied here: the update
 * service (update.h) persists the change and the loader publishes it, so a refused update never
 * leaves half of itself behind.
 *
 * The rules, in the RFC's order:
 *   - the zone section (§2.3): exactly one entry, type SOA; the caller finds the zone (NOTAUTH);
 *   - prerequisites (§3.2, all five kinds of §2.4) against the version given, with TTL 0: RRset
 *     exists (value independent: class ANY, type T), RRset exists (value dependent: class IN,
 *     the RRsets compared as sets, RDATA canonically), RRset does not exist (class NONE, type
 *     T), name is in use (class ANY, type ANY), name is not in use (class NONE, type ANY);
 *     NXRRSET, YXRRSET, NXDOMAIN, YXDOMAIN, NOTZONE, FORMERR as §3.2.5 lists;
 *   - the update section's prescan (§3.4.1), every RR before any is applied: owners inside the
 *     zone (NOTZONE), classes and meta types as §3.4.1.3 allows (FORMERR);
 *   - processing (§3.4.2): add RR (a duplicate RDATA replaces the RR; the RRset takes the TTL of
 *     the RR added, as BIND does, RFC 2181 §5.2), delete RRset, delete name, delete RR; a CNAME
 *     is not added beside other data nor other data beside a CNAME (§3.4.2.2, RRSIG and NSEC
 *     excepted, RFC 4035 §2.5); an SOA is only replaced by one with a greater serial (RFC 1982);
 *     the apex SOA and NS are never deleted by "delete name" or "delete RRset", the SOA never by
 *     "delete RR", nor the apex's last NS (§3.4.2.3, §3.4.2.4, §7.17).
 *   - a zone tern signs (opts.dnssec) refuses DNSKEY, RRSIG, NSEC, NSEC3 and NSEC3PARAM in
 *     updates (REFUSED: its keys and signatures are tern's own), and its DNSKEYs are not part of
 *     what an update sees or changes.
 * A change that changes nothing keeps the serial (no new version, NOERROR). Otherwise the new
 * serial is the update's own SOA serial when it set a greater one, else the old one plus one
 * (RFC 1982 arithmetic).
 *
 * Threading: pure functions over caller-owned structs and an immutable zone_t. Not for workers
 * (they allocate).
 */
#ifndef TERN_UPDATE_UPDATE_MSG_H
#define TERN_UPDATE_UPDATE_MSG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tern/common/compiler.h"
#include "tern/wire/dname.h"
#include "tern/zone/zone.h"

struct arena; /* tern/common/arena.h */

/* One RR of a message or of a change. In a parsed message the owner is lowercased and the RDATA's
 * names are decompressed (RDATA otherwise as sent). */
typedef struct update_rr {
    const uint8_t *owner; /* lowercased wire name */
    uint8_t owner_len;
    uint16_t type, rclass;
    uint32_t ttl;
    uint16_t rdlen;
    const uint8_t *rdata;
} update_rr_t;

/* A parsed UPDATE. The RRs point into data (owned). */
typedef struct update_msg {
    uint16_t id;
    uint8_t zone[DNAME_MAXLEN]; /* the zone section's name, lowercased */
    uint8_t zone_len;
    uint16_t zclass;
    update_rr_t *pre; /* prerequisites */
    size_t npre;
    update_rr_t *upd; /* updates */
    size_t nupd;
    struct arena *arena; /* the RRs, their owners and RDATA */
} update_msg_t;

/**
 * Parse msg (len bytes, an UPDATE request) into m. max_rrs bounds the prerequisites and updates
 * together. Returns WIRE_RC_NOERROR, WIRE_RC_FORMERR (why: what and at which offset), or
 * WIRE_RC_REFUSED (why: over max_rrs); m is cleared on failure (update_msg_free() is still safe).
 */
unsigned update_msg_parse(update_msg_t *m, const uint8_t *msg, size_t len, size_t max_rrs,
                          char *why, size_t whylen);

/** Free what m holds. */
void update_msg_free(update_msg_t *m);

/* The change an update makes, in RFC 1995 terms: every RR removed and added (in arena), and the new
 * apex SOA. from == to with no RRs: nothing changed. */
typedef struct update_change {
    uint32_t from, to;
    uint32_t soa_ttl;
    uint16_t soa_len;
    uint8_t soa[DNAME_MAXLEN * 2 + 20]; /* the new apex SOA's RDATA */
    update_rr_t *removed, *added;
    size_t nremoved, nadded;
    size_t names;        /* owner names touched */
    struct arena *arena; /* the RRs, their owners and RDATA */
} update_change_t;

typedef struct update_opts {
    bool dnssec; /* the zone is signed by tern: DNSSEC types refused, its DNSKEYs not seen */
} update_opts_t;

/**
 * Evaluate m over z (the version served). WIRE_RC_NOERROR with *ch the change (possibly empty),
 * or the rcode of the first prerequisite or rule that fails, with why naming it ("prerequisite
 * 2: www.example. A: RRset does not exist"). *ch is cleared on failure.
 */
unsigned update_eval(const zone_t *z, const update_msg_t *m, const update_opts_t *o,
                     update_change_t *ch, char *why, size_t whylen);

/** Free what ch holds. */
void update_change_free(update_change_t *ch);

/** "NOERROR", "NXRRSET", ...: the name of rcode. */
const char *update_rcode_name(unsigned rcode);

#endif
