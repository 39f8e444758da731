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

/*
 * Building a delta from IXFR (RFC 1995) steps: each step's RRs removed, then its RRs added, over
 * base (pinned by the caller for the builder's life) with the earlier steps applied. What it
 * keeps is proportional to the steps, not to the zone: RRs removed from base as their position
 * in it (base is immutable), RRs added as copies. The rules are the ones xfr_in.h lists: a
 * removal of an RR the zone does not hold at that point fails (the versions have diverged), an
 * RR added that is there already replaces it (its TTL the added one's), and an RRset RRs are
 * added to takes the lowest TTL of the RRs added to it. RDATA compare canonically (wire/rdata.h:
 * names inside it case-insensitively). The delta made at the end names every owner a step
 * touched and holds, in its fresh zone, their data after the last step and the apex.
 * Lifecycle: new → (begin → remove… → end → add…)… → finish → [build, when the delta cannot be
 * patched] → free. Threading: one thread (the transfer's).
 */
typedef struct zone_delta_ixfr zone_delta_ixfr_t;
struct zone_builder;

/** A builder of a change of base (which must outlive it). NULL when out of memory. */
zone_delta_ixfr_t *zone_delta_ixfr_new(const zone_t *base) TERN_WUR;

/**
 * A step from serial `from` starts: 0, or TERN_EINVAL (err says which serials) when from is not
 * the serial the last step reached (base's for the first) or the last step was not ended.
 */
int zone_delta_ixfr_begin(zone_delta_ixfr_t *x, uint32_t from, char *err, size_t errlen) TERN_WUR;

/**
 * The step removes one RR (owner any case, inside the zone): 0; TERN_ENOENT when the zone does
 * not hold it at this point, err then "a record that is not in the zone: <owner> <type>
 * <rdata>"; TERN_EINVAL outside a step's removals; TERN_ENOMEM.
 */
int zone_delta_ixfr_remove(zone_delta_ixfr_t *x, const uint8_t *owner, uint16_t type,
                           const uint8_t *rdata, uint16_t rdlen, char *err, size_t errlen) TERN_WUR;

/** The step's removals end at its new SOA, of serial `to`: 0, TERN_EINVAL when none is open. */
int zone_delta_ixfr_end(zone_delta_ixfr_t *x, uint32_t to) TERN_WUR;

/**
 * The step adds one RR (owner any case, inside the zone; not the apex SOA): 1 when it is new
 * data (the caller may count what it costs), 0 when it replaced an RR an earlier step added,
 * TERN_EINVAL before the step's end, TERN_ENOMEM, TERN_ELIMIT past 4 GiB of added data.
 */
int zone_delta_ixfr_add(zone_delta_ixfr_t *x, const uint8_t *owner, uint16_t type, uint32_t ttl,
                        const uint8_t *rdata, uint16_t rdlen) TERN_WUR;

/** RRs the steps added and no later step removed. */
size_t zone_delta_ixfr_added(const zone_delta_ixfr_t *x);

/**
 * The steps as one delta of base, the new version's apex SOA being (ttl, soa, soa_len) with the
 * serial the last step reached: builds fresh through the zone builder (source names it), which
 * validates the touched names as a build would. Returns 0 with *out (one reference); TERN_EINVAL
 * when no step was ended or the last one is still in its removals; the builder's error with err.
 */
int zone_delta_ixfr_finish(zone_delta_ixfr_t *x, uint32_t ttl, const uint8_t *soa, uint16_t soa_len,
                           const char *source, zone_delta_t **out, char *err,
                           size_t errlen) TERN_WUR;

/**
 * The whole new version into b (a new builder of the zone): every RR of base the steps left (the
 * apex SOA replaced by the given one), then every RR they added, for when a delta cannot be
 * patched. After finish (or instead of it). 0 or the builder's error.
 */
int zone_delta_ixfr_build(zone_delta_ixfr_t *x, uint32_t ttl, const uint8_t *soa, uint16_t soa_len,
                          struct zone_builder *b) TERN_WUR;

/** Release the builder. NULL is a no-op. */
void zone_delta_ixfr_free(zone_delta_ixfr_t *x);

#endif
