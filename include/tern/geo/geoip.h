/*
 * geoip.h — IP → country and coordinates from MaxMind DB (.mmdb) files, for geo-steered answers.
 *
 * Owns: one opened .mmdb file (libmaxminddb, MMDB_MODE_MMAP: the file is mapped read-only, nothing
 * of it is copied) and a small handle holding the key layout and a description for logs.
 *
 * Key layouts, detected once per file at open time by decoding the first data records in tree
 * order (never per query):
 *   - nested (MaxMind GeoIP2/GeoLite2, DB-IP): country.iso_code, falling back per record to
 *     registered_country.iso_code; location.latitude and location.longitude;
 *   - flat (ip-location-db and similar): country_code, latitude, longitude.
 * Coordinates may be stored as double, float or a decimal utf8_string. A file with neither
 * layout (an ASN database, say) is rejected, so a wrong file never puts every client at 0,0.
 *
 * Lifecycle: geoip_open() on the loader thread (validates the search tree against the data
 * section and decodes the probed records, so a truncated or garbled file fails there, not on
 * the query path) → published with a snapshot, immutable from then on → geoip_close() after the
 * RCU grace period.
 * Threading: any number of workers may call geoip_lookup()/geoip_set_lookup() concurrently on
 * one handle; a lookup never allocates, locks or makes a syscall (page faults on the mapping
 * aside), and it is bounded in time even on a corrupt data record (it answers "unknown").
 */
#ifndef TERN_GEO_GEOIP_H
#define TERN_GEO_GEOIP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tern/common/compiler.h"

typedef struct geoip_db geoip_db_t; /* one opened .mmdb file (MMDB_MODE_MMAP) */

typedef struct geoip_result {
    uint16_t
        country; /* ISO 3166-1 alpha-2 code packed as (c0 << 8 | c1), upper case; 0 = unknown */
    bool has_location; /* lat/lon valid */
    double lat, lon;   /* degrees */
    uint8_t prefix;    /* prefix length, in the looked-up address's own family (0..32 for IPv4,
                          0..128 for IPv6), of the network this answer holds for — also when
                          nothing was found (the not-found network's length), 0 when no database
                          could answer */
} geoip_result_t;

#define GEOIP_CC(a, b) ((uint16_t)((uint8_t)(a) << 8 | (uint8_t)(b)))

/**
 * Open and validate a MaxMind DB file: libmaxminddb's metadata checks, then every search-tree
 * record against the node count and the data section, then the key layout from the first data
 * records. Returns a handle, or NULL with a message naming the path in err (e.g. "x.mmdb: No
 * such file or directory", "x.mmdb: not a valid MaxMind DB file (truncated?): ...", "x.mmdb:
 * neither GeoIP2 (country/location) nor flat (country_code/latitude/longitude) keys ...").
 * err may be NULL.
 */
geoip_db_t *geoip_open(const char *path, char *err, size_t errlen) TERN_WUR;

/** Unmap and free. NULL is a no-op. */
void geoip_close(geoip_db_t *db);

/** 4 or 6: the database's IP version from its metadata (6 may also hold an IPv4 subtree). */
unsigned geoip_ip_version(const geoip_db_t *db);

/**
 * One line for logs, e.g. "GeoLite2-City, IPv6, nested keys, 2024-05-01" (database type, IP
 * version, layout, build date UTC). Owned by db, valid until geoip_close().
 */
const char *geoip_describe(const geoip_db_t *db);

/**
 * Look up one address: family AF_INET (addr = 4 bytes, network order) or AF_INET6 (16 bytes).
 * An IPv4-mapped address (::ffff:a.b.c.d) is looked up as IPv4 and gets an IPv4 prefix; an IPv4
 * address in an IPv6 database goes through its IPv4 subtree (::a.b.c.d), prefix still IPv4.
 * Always fills *out: unknown fields are 0/false; prefix as documented on geoip_result_t (0 for
 * an IPv6 address in an IPv4-only database, a NULL db or an unknown family).
 * No allocation, no lock, no syscall.
 */
void geoip_lookup(const geoip_db_t *db, int family, const uint8_t *addr, geoip_result_t *out);

/** The databases a view answers from; either may be NULL. */
typedef struct geoip_set {
    const geoip_db_t *v4;
    const geoip_db_t *v6;
} geoip_set_t;

/**
 * geoip_lookup() on the set's database for the address: IPv4 addresses (and IPv4-mapped
 * ::ffff:a.b.c.d, treated as IPv4 with an IPv4 prefix) go to set->v4 if set, else to set->v6 (a
 * v6 database with the IPv4 subtree answers them); IPv6 addresses go to set->v6. No database for
 * the family: everything unknown, prefix 0. set may be NULL.
 */
void geoip_set_lookup(const geoip_set_t *set, int family, const uint8_t *addr, geoip_result_t *out);

#endif
