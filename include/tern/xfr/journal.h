/*
 * journal.h — what changed between two versions of a zone (a delta), and the per-zone IXFR
 * journal that keeps the most recent deltas.
 *
 * A delta is the RR-level difference of two zone versions in RFC 1995 terms: the RRs removed,
 * the RRs added, the old and the new SOA. It copies every byte it needs (owner names, RDATA,
 * both SOAs), so it outlives both versions: the journal keeps deltas long after the loader has
 * retired the versions they were computed from.
 * Lifecycle: xfr_diff() builds one (loader or xfr thread, off the query path); it is immutable from
 * then on and shared by reference — the journal holds one, every transfer stream holds one; the
 * count is atomic and the last xfr_delta_release() frees it.
 *
 * The journal: one per zone, a bounded FIFO of deltas that chain (each delta's from-serial is the
 * previous one's to-serial), oldest first. The loader thread appends after it publishes a new
 * version; transfer threads ask for the chain from a client's serial. One mutex guards the list;
 * xfr_journal_chain() hands out references of its own, so a transfer streams without the lock
 * while the loader appends and evicts.
 *
 * Serial numbers compare in RFC 1982 arithmetic (xfr_serial_lt() and friends).
 */
#ifndef TERN_XFR_JOURNAL_H
#define TERN_XFR_JOURNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "tern/common/compiler.h"
#include "tern/zone/zone.h"

/* RFC 1982 §3.2: s1 < s2 when they differ by less than 2^31 "going up" from s1. Two serials
 * exactly 2^31 apart are neither less nor greater (the RFC leaves the comparison undefined). */
static inline bool xfr_serial_lt(uint32_t a, uint32_t b)
{
    uint32_t d = b - a; /* modulo 2^32 by definition of unsigned arithmetic */
    return d != 0 && d < UINT32_C(0x80000000);
}

static inline bool xfr_serial_gt(uint32_t a, uint32_t b)
{
    return xfr_serial_lt(b, a);
}

static inline bool xfr_serial_le(uint32_t a, uint32_t b)
{
    return a == b || xfr_serial_lt(a, b);
}

static inline bool xfr_serial_ge(uint32_t a, uint32_t b)
{
    return a == b || xfr_serial_lt(b, a);
}

typedef struct xfr_delta xfr_delta_t; /* immutable after creation; atomic refcount */

/* Which side of a delta: the RRs (and SOA) of the old version, or of the new one. */
typedef enum { XFR_REMOVED = 0, XFR_ADDED = 1 } xfr_side_t;

/* Some RRs of one owner and type with one TTL, as a delta (or a zone) holds them. */
typedef struct xfr_rrset {
    const uint8_t *owner; /* lowercased wire name, inside the zone */
    uint8_t owner_len;
    uint16_t type;
    uint16_t count; /* RRs in rdata */
    uint32_t ttl;
    uint32_t rdata_len;
    const uint8_t *rdata; /* RDATA sequence: per RR a big-endian u16 RDLENGTH + RDATA */
} xfr_rrset_t;

/**
 * The RR-level difference old → new of two versions of one zone (RFC 1995: RRs removed, RRs
 * added). An RRset whose TTL changed is all its old RRs removed and all its new RRs added; the
 * apex SOA is not in the lists but kept apart as the old and the new SOA. Equal content with
 * only a new serial is a valid delta (just the SOAs). When new was patched from old
 * (zone_patch_delta(): the zone_delta_t it was made by), only that change's names are compared,
 * a few lookups per changed name, in the order the whole-zone walk would meet them (so the
 * groups come out the same). Otherwise it costs one hash lookup per name of new in
 * old, plus one per name of old in new only when some name of old is missing from new; an
 * RRset whose rdata pointer, length, count and TTL are the same in both versions (a patched
 * version shares its base's RDATA) is unchanged without reading its bytes.
 * Returns a delta with one reference, or NULL when out of memory or when the zones have
 * different apexes.
 */
xfr_delta_t *xfr_diff(const zone_t *old, const zone_t *new) TERN_WUR;

/** The serial of the old version. */
uint32_t xfr_delta_from(const xfr_delta_t *d);

/** The serial of the new version. */
uint32_t xfr_delta_to(const xfr_delta_t *d);

/** RRs removed (the old SOA not counted). */
size_t xfr_delta_removed(const xfr_delta_t *d);

/** RRs added (the new SOA not counted). */
size_t xfr_delta_added(const xfr_delta_t *d);

/** Bytes of memory the delta holds (what the journal's max_bytes counts). */
size_t xfr_delta_bytes(const xfr_delta_t *d);

/**
 * Walk the RRs removed (XFR_REMOVED) or added (XFR_ADDED), grouped by owner, type and TTL, in
 * no particular order. *pos starts at 0; returns true with *out filled (pointing into d, valid
 * while the caller holds a reference) and *pos advanced, false after the last group.
 */
bool xfr_delta_next(const xfr_delta_t *d, xfr_side_t side, size_t *pos, xfr_rrset_t *out);

/** The SOA of the old (XFR_REMOVED) or the new (XFR_ADDED) version: one RR, owner the apex. */
void xfr_delta_soa(const xfr_delta_t *d, xfr_side_t side, xfr_rrset_t *out);

/** One more reference (any thread). Returns d. */
xfr_delta_t *xfr_delta_retain(xfr_delta_t *d);

/** Drop one reference (any thread); the last frees the delta. NULL is a no-op. */
void xfr_delta_release(xfr_delta_t *d);

typedef struct xfr_journal xfr_journal_t; /* one per zone; thread-safe (a mutex) */

/* One version kept, for `ternctl zone`. */
typedef struct xfr_journal_entry {
    uint32_t from, to;     /* serials */
    size_t removed, added; /* RRs */
    size_t bytes;          /* xfr_delta_bytes() */
    struct timespec when;  /* wall clock (CLOCK_REALTIME) when it was added */
} xfr_journal_entry_t;

/**
 * An empty journal that keeps at most max_versions deltas of at most max_bytes bytes together
 * (0 for either: keep nothing, every IXFR falls back to a full transfer; SIZE_MAX: no byte
 * bound). NULL when out of memory.
 */
xfr_journal_t *xfr_journal_new(unsigned max_versions, size_t max_bytes) TERN_WUR;

/**
 * Append d, taking the caller's reference. If d's from-serial is not the newest delta's
 * to-serial the chain is broken and everything older is dropped first. Then the oldest deltas
 * are dropped until the journal is within max_versions and max_bytes (d too, if it alone is
 * larger than max_bytes). d NULL (a diff that failed) drops everything: the next delta could not
 * chain to what is kept.
 */
void xfr_journal_add(xfr_journal_t *j, xfr_delta_t *d);

/**
 * The chain from serial `from` to the newest version: returns 0 with *out a malloc'd array of
 * *n deltas, oldest first, each retained for the caller (release each, free the array). When
 * `from` is the newest to-serial, *n is 0 and *out still a (non-NULL) array to free, so that it
 * can go to xfr_stream_ixfr() as "up to date". TERN_ENOENT when `from` is no serial in the
 * journal (the client needs a full transfer), TERN_ENOMEM. Should a serial occur twice (serials
 * wrapped around within the journal), the shorter chain is returned.
 */
int xfr_journal_chain(xfr_journal_t *j, uint32_t from, xfr_delta_t ***out, size_t *n) TERN_WUR;

/** Drop every delta (a full reload that cannot be diffed, a zone that goes away). */
void xfr_journal_clear(xfr_journal_t *j);

/**
 * The versions kept, oldest first: writes at most max entries to out and returns how many it
 * wrote. When more than max are kept, the newest max are written (what a listing shows).
 */
size_t xfr_journal_list(xfr_journal_t *j, xfr_journal_entry_t *out, size_t max);

/** Drop every delta and free the journal. NULL is a no-op. */
void xfr_journal_free(xfr_journal_t *j);

#endif
