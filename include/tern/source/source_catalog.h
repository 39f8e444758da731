/*
 * source_catalog.h — catalog zones tern produces (RFC 9432, version 2) behind zone_source.h:
 * one zone per entry of the config's catalogs (tern/conf/config.h, src/conf/config_catalog.c)
 * whose members are the zones tern is primary for, so that secondaries (BIND's catalog-zones,
 * Knot's catalog-role: interpret) provision and drop them by themselves.
 *
 * Owner: the loader, as one entry of zone_source.c's table (source_catalog_ops). After each
 * publish (published()) it computes every catalog's members from the table served and the config
 * in force — a zone naming the catalog (catalog:), or with members: all every zone served that is
 * not a configured secondary (primary:) nor a catalog itself, wherever it came from (master
 * files, JSON files, Redis, so the HTTP API's too) — and only when a catalog's members or their
 * properties changed builds its new version and poke()s the loader: its collect() says so and
 * the next build serves the version from zones(). The catalog zone's transfer settings are a
 * zone entry of the config (config_catalog.c), so tern/xfr journals each version (IXFR gives
 * the membership diff) and sends NOTIFY like any zone's. An unchanged membership builds nothing:
 * a publish for another reason never churns the catalog.
 *
 * Content (RFC 9432 §4): the apex SOA (invalid. invalid., serial below) and NS invalid.,
 * version TXT "2", and per member <id>.zones PTR <member>, with the properties group.<id>.zones
 * TXT <group> (§4.4.2) and coo.<id>.zones PTR <catalog> (§4.4.1). <id> is 16 hex digits of a
 * hash of the member's canonical name (as Knot derives its ids from the member's name): the same
 * for a member across restarts and reloads, so a consumer never sees a member re-added (which
 * §5.1 would make it reset). Every record has TTL 0 (the consumers never cache them as data).
 * Serial: Knot's unixtime policy (zone_serial_next()): the first version since start is the
 * Unix time, each new one max(last + 1, now), so it rises across restarts too.
 *
 * Threading: as zone_source.h (loader thread), stats any thread.
 */
#ifndef TERN_SOURCE_SOURCE_CATALOG_H
#define TERN_SOURCE_SOURCE_CATALOG_H

#include <stddef.h>
#include <stdint.h>

#include "tern/common/compiler.h"
#include "tern/source/zone_source.h"
#include "tern/zone/zone.h"

extern const zone_source_ops_t source_catalog_ops;

/* The unique id of a member: 16 hex digits and a NUL. */
#define SOURCE_CATALOG_ID_LEN 17

/* One member of a catalog (strings the caller's). */
typedef struct source_catalog_member {
    const char *key;   /* zone_source_key() of the member's origin */
    const char *group; /* its group property, or NULL */
    const char *coo;   /* its change-of-ownership property (a catalog's name), or NULL */
} source_catalog_entry_t;

/** The unique id (RFC 9432 §4.1) of the member whose key is key, into id. Pure. */
void source_catalog_id(const char *key, char id[SOURCE_CATALOG_ID_LEN]);

/** The catalog zone catalog (a key) with members m[0..n) and this serial, into *out (one
 * reference). 0, or a negative code with err set (a member whose name does not fit under the
 * catalog, out of memory). Pure: any thread. */
int source_catalog_build(const char *catalog, const source_catalog_entry_t *m, size_t n,
                         uint32_t serial, zone_t **out, char *err, size_t errlen) TERN_WUR;

#endif
