/*
 * zone_diff.h — which names of a published zone version a stream of records changes.
 *
 * A reload of a large zone file reads the file as a change of the version it replaces: the
 * records go, one by one and in file order, through zone_diff_add(), which checks each against
 * the base version; zone_diff_finish() then lists every name whose data differ (zone_file.h's
 * zone_file_patch() builds only those names, and zone_diff_delta() makes them and that partial
 * zone the zone_delta_t that zone_patch() applies). The point is the
 * reload's peak memory, so the diff keeps nothing per record and nothing per RRset: per base node
 * one u32 (the ordinal of its first RR in a walk over all nodes' RRsets), per base RR one bit
 * (matched yet), and the changed names themselves. A 1,000,000-name zone of 2 RRs a name costs
 * about 4.2 MB here, against some 150 MB for a second copy of the zone.
 *
 * A record matches when the base has its lowercased owner as a node, an RRset of its type, class
 * IN, the RRset's TTL, and as the RRset's next unmatched RR (in the RRset's order, which is the
 * order of the file it was built from) an RR of byte-identical RDATA (exact: the zone keeps the
 * first spelling of a name inside RDATA, so a case change is a change). Anything else marks the
 * owner changed: no node, no RRset, another TTL or class, RDATA not there, an RR given twice, or
 * RRs of one RRset in another order (the answers list them in that order). The test is
 * conservative: what the builder would merge into the same data (a duplicate line, RRs of mixed
 * TTLs) may be called a change, never the other way round. At finish, every base name whose RRs
 * were not all matched has changed too (records removed).
 *
 * Lifecycle: new (base pinned by the caller for the diff's life) → add (any number) → finish →
 * changed()/the list → free. Threading: the loader thread only, never on the query path (it
 * allocates); the base is only read, so it may be published and answering meanwhile.
 */
#ifndef TERN_ZONE_ZONE_DIFF_H
#define TERN_ZONE_ZONE_DIFF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tern/common/compiler.h"
#include "tern/zone/zone.h"
#include "tern/zone/zone_delta.h"

typedef struct zone_diff zone_diff_t;

/** A diff against base (which must outlive it). NULL when out of memory. */
zone_diff_t *zone_diff_new(const zone_t *base) TERN_WUR;

/**
 * One record, exactly as it would be given to zone_builder_add(): owner a validated wire name in
 * any case, rdata uncompressed wire RDATA of rdlen bytes. Returns 0 (matched or marked changed),
 * TERN_EOUTZONE (owner not in the base's zone: nothing recorded, the caller warns and skips it)
 * or TERN_ENOMEM. Not after finish (TERN_EINVAL).
 */
int zone_diff_add(zone_diff_t *d, const uint8_t *owner, uint16_t type, uint16_t rclass,
                  uint32_t ttl, const uint8_t *rdata, uint16_t rdlen) TERN_WUR;

/**
 * End of the records: every base name with RRs left unmatched is changed too. *names (n of
 * them, in the order they were found) are the changed names, lowercased wire names owned by the
 * diff, valid until zone_diff_free(). May be called again (same list). 0 or TERN_ENOMEM.
 */
int zone_diff_finish(zone_diff_t *d, const uint8_t *const **names, size_t *n) TERN_WUR;

/**
 * The change as a delta (zone_delta.h): the names finish() lists, their new data in fresh (the
 * changed names and the apex, built from the same records), base's serial to fresh's. After
 * finish; the delta keeps its own copy of the names. NULL when out of memory or before finish.
 */
zone_delta_t *zone_diff_delta(const zone_diff_t *d, zone_t *fresh) TERN_WUR;

/** Whether owner (validated wire name, any case) has changed. Complete only after finish. */
bool zone_diff_changed(const zone_diff_t *d, const uint8_t *owner);

/** Bytes the diff holds (its arrays and the changed names), for the memory bound above. */
size_t zone_diff_footprint(const zone_diff_t *d);

/** Release everything. NULL is a no-op. */
void zone_diff_free(zone_diff_t *d);

#endif
