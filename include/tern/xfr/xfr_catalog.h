/*
 * xfr_catalog.h — catalog zones consumed (RFC 9432, version 2): a secondary zone whose config
 * says `catalog_consumer:` lists member zones, and tern serves each as a secondary zone of its
 * own, transferred from the catalog's primaries (or those of the group its "group" property
 * names), kept in the catalog's directory across restarts, retired when the catalog drops it.
 *
 * Why in xfr (src/xfr/xfr_catalog.c) and not a source of its own: a member is a secondary zone
 * like any other — its primaries, keys, SOA timers, NOTIFY, puller and on-disk copy are the
 * transfer service's state (struct zst) — and a catalog's new version arrives on the puller that
 * transferred it. Deciding the members there, under the service's lock, orders every member
 * event (new version, reset, retirement) with the pullers' hand-overs, so a retired member is
 * never brought back by a transfer that finished late. What the members serve goes to the
 * loader through a source of its own (tern/source/source_catalog_member.h), through hooks
 * (xfr_hooks_t.member_in, member_gone): the view is never touched here.
 *
 * This header is the part with no threads: the catalog's parse (RFC 9432 §4) and the member list
 * file. Owner: the caller of each function; nothing is kept between calls.
 *
 * The rules (RFC 9432):
 *   - version.<catalog> TXT must be exactly one RR "2" (§4.2.1); else the catalog is refused
 *     (the members in force stay) with the zone and the label in the error;
 *   - a member is <unique-id>.zones.<catalog> with exactly one PTR (§4.1): more than one, and
 *     the member is ignored (logged);
 *   - one zone under two unique ids: the first (in the zone's name order) wins, logged (§4.1);
 *   - group.<id>.zones.<catalog> TXT (§4.4.2): one TXT RR; its first string is the group;
 *   - coo.<id>.zones.<catalog> PTR (§4.4.1): the catalog the member may migrate to.
 */
#ifndef TERN_XFR_XFR_CATALOG_H
#define TERN_XFR_XFR_CATALOG_H

#include <stddef.h>

#include "tern/common/compiler.h"
#include "tern/zone/zone.h"

/* One member of a catalog. Every string malloc'd. */
typedef struct xfr_catalog_member {
    char *zone;  /* the member's canonical key (dname_key()) */
    char *id;    /* its unique-id label, in presentation form */
    char *group; /* its group property, printable ASCII without spaces; NULL: none */
    char *coo;   /* the key of the catalog its coo property names; NULL: none */
} xfr_catalog_member_t;

typedef struct xfr_catalog_list {
    xfr_catalog_member_t *m;
    size_t n, cap;
    /* m's indexes ordered by zone (xfr_catalog_list_index()), valid while nix == n: a catalog of
     * 100,000 members is matched against the zones followed in n log n, not n^2 */
    size_t *ix, nix;
} xfr_catalog_list_t;

/** The members of catalog zone cat into out (empty on entry). 0; TERN_EINVAL when the catalog is
 * not one tern may follow (no version, or not "2"), err saying which label and why; TERN_ENOMEM.
 * Members it ignores are logged (warning) with the catalog and the label. */
int xfr_catalog_parse(const zone_t *cat, xfr_catalog_list_t *out, char *err,
                      size_t errlen) TERN_WUR;

/** Append a member (copies of the strings; group and coo may be NULL). 0 or TERN_ENOMEM. */
int xfr_catalog_list_add(xfr_catalog_list_t *l, const char *zone, const char *id, const char *group,
                         const char *coo) TERN_WUR;

/** Order l by zone for xfr_catalog_list_find() (until the next add). 0 or TERN_ENOMEM (finds
 * stay linear). */
int xfr_catalog_list_index(xfr_catalog_list_t *l) TERN_WUR;

/** The member whose zone is key, or NULL: a binary search once indexed, else linear. */
const xfr_catalog_member_t *xfr_catalog_list_find(const xfr_catalog_list_t *l, const char *key);

/** Free every member (l empty after). */
void xfr_catalog_list_clear(xfr_catalog_list_t *l);

/** l written to path (a temporary file renamed over it, fsync'd: a crash leaves the old list or
 * the new one). 0 or negative with err. */
int xfr_catalog_list_write(const xfr_catalog_list_t *l, const char *path, char *err,
                           size_t errlen) TERN_WUR;

/** The list at path into out (empty on entry). 0; TERN_ENOENT when there is none yet; another
 * negative code with err ("path:line: why") when it does not read. */
int xfr_catalog_list_read(const char *path, xfr_catalog_list_t *out, char *err,
                          size_t errlen) TERN_WUR;

/** The file name in a catalog's directory for zone key and suffix (".zone", ".members"): the key
 * with every byte but [A-Za-z0-9.-_] as '_' (a label may hold '/'), malloc'd; NULL when out of
 * memory. */
char *xfr_catalog_path(const char *dir, const char *key, const char *suffix) TERN_WUR;

#endif
