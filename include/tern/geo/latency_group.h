/*
 * latency_group.h — the name of a record group (a PoP) as the latency map and the zones agree on
 * it: 1..63 characters of [A-Za-z0-9_-], compared without case, and its 32-bit id.
 *
 * The id is what the answer path compares (tern/geo/latency_map.h entries against the "group"
 * of each record, zone_geo_rr_t.group): tern_hash64() of the lowercased name with
 * LATENCY_GROUP_SEED, folded to 32 bits, 0 never used (0 = "no group"). The map compiler refuses
 * a map in which two names share an id, so within one map an id is one name; a zone group that
 * collides with a map group it is not is a 1 in 2^32 chance per pair, and would only steer like
 * that group.
 *
 * Owns nothing; header-only pure functions, safe from any thread. Included by the zone parser
 * (src/zone) and the map compiler (src/geo) so that both compute the very same id.
 */
#ifndef TERN_GEO_LATENCY_GROUP_H
#define TERN_GEO_LATENCY_GROUP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tern/common/hash.h"

#define LATENCY_GROUP_MAX  63u /* a DNS label's length: group names often become host names */
#define LATENCY_GROUP_SEED 0x6c6174656e637931ull /* "latency1" */

/** Whether s[0 .. len) is a group name: 1..63 characters of [A-Za-z0-9_-]. */
static inline bool latency_group_valid(const char *s, size_t len)
{
    if (len == 0 || len > LATENCY_GROUP_MAX)
        return false;
    for (size_t i = 0; i < len; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
              ch == '_' || ch == '-'))
            return false;
    }
    return true;
}

/** The id of a valid group name (any case): never 0. */
static inline uint32_t latency_group_id(const char *s, size_t len)
{
    char lc[LATENCY_GROUP_MAX];
    for (size_t i = 0; i < len; i++)
        lc[i] = (char)(s[i] >= 'A' && s[i] <= 'Z' ? s[i] + ('a' - 'A') : s[i]);
    uint64_t h = tern_hash64(lc, len, LATENCY_GROUP_SEED);
    uint32_t id = (uint32_t)(h ^ (h >> 32));
    return id ? id : 1u;
}

#endif
