/*
 * zone_table.h — the set of zones a server answers from.
 *
 * Lifecycle: zone_table_new() → zone_table_add() for each built zone → zone_table_freeze() builds
 * the apex hash index (build) → published to the workers (freeze/publish; the runtime issue does
 * this through RCU) → zone_table_free() after no worker can see it (retire).
 * Threading: built by one thread; after freeze, read concurrently by every worker without locks.
 *
 * The table holds one reference to each zone added to it (zone_table_add() takes over the
 * caller's) and drops them with itself; a zone shared by two tables is zone_retain()ed first.
 */
#ifndef TERN_ZONE_ZONE_TABLE_H
#define TERN_ZONE_ZONE_TABLE_H

#include <stddef.h>

#include "tern/common/compiler.h"
#include "tern/wire/dname.h"
#include "tern/zone/zone.h"

typedef struct zone_table zone_table_t;

/** Empty table; NULL when out of memory. */
zone_table_t *zone_table_new(void) TERN_WUR;

/**
 * Take ownership of z. TERN_EDUPZONE if a zone with the same apex is already in the table
 * (z is then not taken), TERN_ENOMEM. Not after freeze.
 */
int zone_table_add(zone_table_t *t, zone_t *z) TERN_WUR;

/** Build the lookup index. 0 or TERN_ENOMEM. After this the table is read-only. */
int zone_table_freeze(zone_table_t *t) TERN_WUR;

/**
 * The zone whose apex is the longest suffix of v (at most one hash probe per label of v), or NULL
 * if none. *apex_label is set to the label index in v where the apex starts.
 */
const zone_t *zone_table_find(const zone_table_t *t, const dname_view_t *v, unsigned *apex_label);

/** Number of zones. */
size_t zone_table_count(const zone_table_t *t);

/** The i-th zone (in the order added), for listing and stats; i < zone_table_count(). */
const zone_t *zone_table_at(const zone_table_t *t, size_t i);

/** Free the table and drop its reference to every zone in it. NULL is a no-op. */
void zone_table_free(zone_table_t *t);

#endif
