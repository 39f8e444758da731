/*
 * view_db.h — private to src/load: the geo databases and the ASN table a view answers with,
 * mapped once and shared by consecutive snapshots while their files do not change (counted
 * references, loader thread only). A database that does not open fails the whole reload; the
 * old snapshot keeps its own.
 */
#ifndef TERN_LOAD_VIEW_DB_H
#define TERN_LOAD_VIEW_DB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tern/conf/config.h"

#include "snapshot.h"

/** The MaxMind DB at path for one role ("geoip_db" / "geoip_db_v6"): prev again (a new
 * reference) when it is the same unchanged file (quick: not looked at), else the file opened
 * anew, *changed set. 0, or a negative code with the message in err. */
int view_db_geo_get(struct geo_ref *prev, const char *path, const char *role, bool quick,
                    struct geo_ref **out, bool *changed, char *err, size_t errlen);

/** Drop a reference. NULL is a no-op. */
void view_db_geo_put(struct geo_ref *g);

/** zone_json_locate_fn over a geoip_set_t (ctx): a record address's coordinates. */
bool view_db_locate(void *ctx, int family, const uint8_t *addr, double *lat, double *lon);

/** The ASN table of cfg (asn_table, or asn_db compiled): prev again while it still holds.
 * 0, or a negative code with the message in err. */
int view_db_asn_get(struct asn_ref *prev, const config_t *cfg, bool quick, struct asn_ref **out,
                    char *err, size_t errlen);

/** Drop a reference. NULL is a no-op. */
void view_db_asn_put(struct asn_ref *a);

#endif
