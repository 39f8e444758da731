/*
 * source_catalog_member.h — the member zones of catalogs tern consumes (RFC 9432), behind
 * zone_source.h: what the transfer service (tern/xfr/xfr_catalog.h) decides of each member — a
 * new version, no data yet (SERVFAIL), or gone (REFUSED) — pushed to the loader's sink and served
 * as this source's own zones (zones()).
 *
 * Owner: the loader, as one entry of zone_source.c's table (source_catalog_member_ops, named
 * "catalog"). It is last in the table: a member that is also a configured zone, or a zone of an
 * earlier source (Redis), is not served from here (the loader logs the clash once). Which zones
 * are members is the transfer service's business (xfr_catalog.c); this source only mirrors what
 * it is told, in the order it is told: main wires source_catalog_member_in() and _gone() as
 * xfr_hooks_t.member_in and member_gone.
 *
 * Threading: source_catalog_member_in() and _gone() any thread (the transfer service calls them
 * under its lock; they only queue); the rest as zone_source.h (the loader thread).
 */
#ifndef TERN_SOURCE_SOURCE_CATALOG_MEMBER_H
#define TERN_SOURCE_SOURCE_CATALOG_MEMBER_H

#include "tern/source/zone_source.h"

extern const zone_source_ops_t source_catalog_member_ops;

/** xfr_hooks_t.member_in (ctx: this source): member key's new version, its reference handed
 * over, or NULL: no data (not transferred yet, reset, or expired), answered SERVFAIL. */
void source_catalog_member_in(void *ctx, const char *key, zone_t *z);

/** xfr_hooks_t.member_gone (ctx: this source): member key left its catalog: no longer served. */
void source_catalog_member_gone(void *ctx, const char *key);

#endif
