/*
 * health_index.h — ternd.yaml's health checks by address (config.h's
 * config_health_check_t), as the zone builders' health hook (zone_builder_health_fn) needs them.
 *
 * An index is built from a config (copying what it needs, so it outlives that config), is
 * immutable afterwards, and is read by the loader thread (file zones) and the Redis thread
 * (Redis zones) alike; source_redis.c swaps the one the Redis thread uses under a mutex.
 *
 * Matching: a record matches the entries with its address (family by record type); an entry
 * naming the record's owner wins over one without an owner; among equals the first listed wins.
 * The endpoint gets the entry's spec with the record's address and, for http and https checks
 * that name no host, the record's owner as host (the Host header, as for redins data).
 */
#ifndef TERN_SOURCE_HEALTH_INDEX_H
#define TERN_SOURCE_HEALTH_INDEX_H

#include <stdint.h>

#include "tern/common/compiler.h"
#include "tern/conf/config.h"
#include "tern/health/health.h"

typedef struct health_index health_index_t;

/** The index of h's checks interning into reg; NULL when h has no checks (or is disabled) and
 * when out of memory (*nomem says which). */
health_index_t *health_index_new(health_registry_t *reg, const config_health_t *h, bool *nomem);

/** Free an index. NULL is a no-op. */
void health_index_free(health_index_t *x);

/** zone_builder_health_fn over an index (ctx): a new reference to the endpoint checking the
 * record at owner (lowercased wire name) with address addr, or NULL. */
health_ep_t *health_index_lookup(void *ctx, const uint8_t *owner, uint16_t type,
                                 const uint8_t *addr);

#endif
