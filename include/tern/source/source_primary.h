/*
 * source_primary.h — secondary zones, as their primaries send them (AXFR/IXFR in, tern/xfr)
 * behind zone_source.h.
 *
 * Owner: the loader, as one entry of zone_source.c's table (source_primary_ops). It owns every
 * configured zone with `primaries:`; the transfer threads (xfr.h's pullers) hand each new version
 * to source_primary_zone_in() (main wires it as xfr_hooks_t.zone_in), which pushes it to the
 * loader's sink. A zone seen first is served from its on-disk copy (its `file:`, when that exists
 * and loads) or, until the first transfer, as unavailable (SERVFAIL); an expired zone too.
 *
 * Threading: source_primary_zone_in() any thread; the rest as zone_source.h.
 */
#ifndef TERN_SOURCE_SOURCE_PRIMARY_H
#define TERN_SOURCE_SOURCE_PRIMARY_H

#include "tern/source/zone_source.h"

extern const zone_source_ops_t source_primary_ops;

/** xfr_hooks_t.zone_in (ctx: the primary source): secondary zone key's new version, its
 * reference handed over, or NULL when the zone expired. Any thread. */
void source_primary_zone_in(void *ctx, const char *key, zone_t *z);

#endif
