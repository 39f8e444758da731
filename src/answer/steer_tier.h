/*
 * steer_tier.h — failover tiers (issue 33): of the candidates health, the geo filter and load
 * shedding left, keep the best-priority tier that still has enough of them (select.h, step 3).
 *
 * Owner: select.c calls it for an RRset with zone_geo_t.tiers set; nothing else does.
 * Threading: per worker; reads the immutable steering only; no allocation, lock or syscall.
 */
#ifndef TERN_ANSWER_STEER_TIER_H
#define TERN_ANSWER_STEER_TIER_H

#include <stdbool.h>
#include <stdint.h>

#include "tern/answer/answer_trace.h"
#include "tern/zone/zone.h"

/** min_healthy of the tier of priority prio in policy p: its listed value, else the RRset's,
 * else 1. */
unsigned steer_tier_min(const zone_geo_policy_t *p, uint16_t prio);

/**
 * Keep in c[0..n) the candidates of the tier g's policy answers (the order among them kept)
 * and return how many: the first tier, by ascending priority, with at least min_healthy
 * candidates; when none has, the tier with the most (ties: the better priority); when health
 * failed open (fail_open: every record down), the best priority present. Records the tier and
 * the tiers passed over in *prio and *skipped, and in ts when tracing (NULL on workers).
 */
unsigned steer_tier(const zone_geo_t *g, uint16_t *c, unsigned n, bool fail_open, uint16_t *prio,
                    unsigned *skipped, answer_trace_select_t *ts);

#endif
