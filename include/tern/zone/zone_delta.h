/*
 * zone_delta.h — a change of one zone version: the one type every change goes through.
 *
 * What it holds: the serials from → to, the sorted set of owner names whose data change (each
 * once, lowercased wire names inside the zone), and `fresh`, a partial zone of the same origin
 * that holds every one of those names' new RRsets — a name with no node (or no RRsets) in fresh
 * loses its data — plus the apex every build needs. A name's new data is given whole, never as
 * "these RRs out, these in": that is the form all producers can give and the one zone_patch()
 * applies in one step per name.
 *
 * Why this shape, having read the five encodings it replaces: the file diff (zone_diff.h) and
 * Redis already produced "these names now hold what this partial zone holds", and zone_patch()
 * consumed exactly that as two loose arguments; the IXFR journal (xfr/journal.h) needs only to
 * know which names to compare between two versions it holds anyway (it copies the RRs it keeps);
 * and an IXFR's remove/add RR sequences turn into the same form once applied to the base's
 * RRsets of the names they touch (zone_delta_ixfr_*() below), so the RR-level form has one
 * producer and no consumer that needs it kept. A per-name RR list would have copied every
 * RRset twice (once for the delta, once into the zone): fresh is built by the zone builder and
 * its data blobs are shared by the patched version as they are.
 *
 * Who produces one: zone_file_patch() (names from zone_diff), Redis's patch (through
 * zone_patch_names()), and IXFR-in (zone_delta_ixfr_*()). Who consumes one: zone_patch() (the
 * new version keeps a reference to the delta it was made by), and the IXFR journal
 * (xfr_diff() asks zone_patch_delta() for it and compares only its names).
 *
 * Lifecycle and ownership: built on the loader or a transfer thread, immutable from then on;
 * reference counted (atomic): the producer holds one, each version patched by it one; the last
 * release frees the names and drops the reference to fresh. Never read on the query path.
 */
#ifndef TERN_ZONE_ZONE_DELTA_H
#define TERN_ZONE_ZONE_DELTA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tern/common/compiler.h"
#include "tern/zone/zone.h"

typedef struct zone_delta zone_delta_t;

/**
 * The change of base to what fresh holds at each of the n names (lowercased wire names inside
 * the zone, duplicates allowed: kept once). Copies the names, takes a reference of its own to
 * fresh (same origin as base, built from the same source with those names' data and the apex).
 * from is base's serial, to fresh's. Returns the delta with one reference, NULL when out of
 * memory.
 */
zone_delta_t *zone_delta_new(const zone_t *base, zone_t *fresh, const uint8_t *const *names,
                             size_t n) TERN_WUR;

/** The serial of the version the delta applies to, and of the version it makes. */
uint32_t zone_delta_from(const zone_delta_t *d);
uint32_t zone_delta_to(const zone_delta_t *d);

/** The changed names, sorted (by length, then bytes) and unique: *n of them, owned by d. */
const uint8_t *const *zone_delta_names(const zone_delta_t *d, size_t *n);

/** Whether lc (a lowercased wire name) is one of the changed names (binary search). */
bool zone_delta_has(const zone_delta_t *d, const uint8_t *lc);

/** The partial zone holding the changed names' new data (owned by d). */
const zone_t *zone_delta_fresh(const zone_delta_t *d);

/** One more reference (any thread). Returns d. */
zone_delta_t *zone_delta_retain(zone_delta_t *d);

/** Drop one reference (any thread); the last frees the delta. NULL is a no-op. */
void zone_delta_release(zone_delta_t *d);

#endif
