/*
 * source_redis.h — the Redis zone source (redins schema) behind zone_source.h: adapts the Redis
 * thread's callbacks (tern/redis/redis_source.h) to the loader's sink and keeps the Redis zones
 * served.
 *
 * Owner: the loader, as one entry of zone_source.c's table (source_redis_ops). configure() starts
 * the Redis thread when the config enables it, restarts it when its settings (or health checking
 * on/off) change, stops it when turned off and otherwise asks for a verify. Zones arrive on the
 * Redis thread and are pushed to the sink; apply() moves them into the served set on the loader
 * thread (patches applied with zone_patch_names(); serials raised for secondaries).
 *
 * Threading: as zone_source.h; source_redis_get_stats() any thread (under the source's own lock:
 * a reload may stop the Redis thread meanwhile).
 */
#ifndef TERN_SOURCE_SOURCE_REDIS_H
#define TERN_SOURCE_SOURCE_REDIS_H

#include <stdbool.h>

#include "tern/redis/redis_source.h"
#include "tern/source/zone_source.h"

extern const zone_source_ops_t source_redis_ops;

/** The Redis thread's counters; false (out zeroed) while none runs. Any thread. */
bool source_redis_get_stats(zone_source_t *s, redis_source_stats_t *out);

/** `ternctl dnssec status [ZONE]` for the Redis zones whose config names a key policy
 * (redis_source_dnssec_status()); NULL with err set when none, or no Redis thread. Any thread. */
char *source_redis_dnssec_status(zone_source_t *s, const char *key, char *err, size_t errlen);

/** `ternctl dnssec rollover|ds-seen` for such a zone: redis_source_dnssec_request(). Any
 * thread. */
int source_redis_dnssec_request(zone_source_t *s, const char *key, const char *request, char *err,
                                size_t errlen) TERN_WUR;

#endif
