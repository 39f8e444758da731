/*
 * zone_patch.h — a new version of a published zone with a change (a zone_delta_t: a few names
 * changed) applied, in time and memory proportional to the zone's small arrays (copied once) and
 * the change, not to its records.
 *
 * The new version copies the base's name index, child counts, targets and steering (about 18
 * bytes per name), shares the base's node pages but those it writes (zone.h: a changed name
 * copies the 128 KiB page it is on), and shares every byte the nodes point into (RRsets, names,
 * RDATA, geo lists: zone_data_t) with the base and with the zone the change was built as; the
 * changed names' RRsets go into a blob of the patch's own. The base stays untouched and
 * published until the loader swaps the new version in (the immutable snapshot and RCU contract
 * of zone.h holds). Lookups read a patched version exactly as a built one: the query path does
 * not know the difference.
 *
 * A change at the apex (a new SOA serial, NS set or apex records) is patched like any name; the
 * zone's SOA, negative SOA, NS and serial follow it.
 *
 * What a patch does not do, and says so by asking for a full build instead (return 1):
 * signed zones (their signatures are per RRset, made at build time), delegations and DNAMEs
 * changing (they move the zone's cuts for every name under them), a new name under a DNAME,
 * and, so that what patches leave behind stays bounded (replaced RRsets and
 * RDATA that shared blobs keep, each patch's own small blobs), once the patched names pass an
 * eighth of the zone (plus ZONE_PATCH_NAMES), once the version holds more than half again the
 * bytes it was built with (plus ZONE_PATCH_SLACK: a small zone is built again after a few
 * patches, a large one hardly ever for a few changed names), and every ZONE_PATCH_MAX-th patch;
 * a build compacts.
 *
 * A patched version holds the nodes a build of the same data holds (removed names leave no node
 * behind: the last nodes move into their places) and answers byte for byte as that build: names
 * that get data are
 * applied before names that lose it (so no empty non-terminal is taken away and made again), and
 * when names were added every NS/MX/SRV target that pointed at no live node is looked up again
 * (a target named before it existed, or removed and back), at the cost of one walk over the
 * nodes (7 ms for 1,000,000 names).
 */
#ifndef TERN_ZONE_ZONE_PATCH_H
#define TERN_ZONE_ZONE_PATCH_H

#include <stddef.h>
#include <stdint.h>

#include "tern/common/compiler.h"
#include "tern/zone/zone.h"
#include "tern/zone/zone_delta.h"

/* Patches in a row before a full build is asked for (each keeps a few small blobs: the count
 * bounds the list), the names they may change together beyond an eighth of the zone's nodes,
 * and the bytes they may hold beyond half again the zone's size when built. */
#define ZONE_PATCH_MAX   1024
#define ZONE_PATCH_NAMES 1024
#define ZONE_PATCH_SLACK ((size_t)16 << 10)

/**
 * A new version of base (refs 1, loader thread) in which each name of delta (zone_delta.h) has
 * exactly the RRsets it has in the delta's fresh zone, and no node if it has none there and no
 * descendants. The new version takes references to fresh's data and to the delta itself (the
 * IXFR journal reads it back through zone_patch_delta()); the delta stays the caller's too.
 *
 * Returns 0 with *out set; 1 when the change needs a full build (why in err); TERN_ENOMEM.
 */
int zone_patch(const zone_t *base, zone_delta_t *delta, zone_t **out, char *err,
               size_t errlen) TERN_WUR;

/**
 * zone_patch() of the delta zone_delta_new(base, fresh, names, n) makes: for the callers that
 * hold a partial zone and its names (Redis's patch in the loader; the tests).
 */
int zone_patch_names(const zone_t *base, zone_t *fresh, const uint8_t *const *names, size_t n,
                     zone_t **out, char *err, size_t errlen) TERN_WUR;

/**
 * The delta new was patched by when old is the very version it was patched from, else NULL
 * (new was built, or patched from another version). What the IXFR journal diffs by. Owned by
 * new.
 */
const zone_delta_t *zone_patch_delta(const zone_t *old, const zone_t *new);

#endif
