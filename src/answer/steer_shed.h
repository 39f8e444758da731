/*
 * steer_shed.h — private to src/answer: load shedding (issue 33), the pipeline's step after the
 * geo filter and before the tiers (select.h), for an RRset with a "shed" block
 * (zone_geo_policy_t.shed, .shed_low, .shed_high).
 *
 * The rule, after NS1's "Shed Load" filter: a candidate whose load is at or above high is left
 * out while at least one candidate stays below high (all at or above: all kept, "fail open");
 * between low and high its weight is scaled by (high - load) / (high - low) for the orders that
 * read weights (weighted, sticky: they read ctx->wscaled[] through select.c's cand_weight()),
 * and for the orders that read none (none, rr) it is left out with probability
 * (load - low) / (high - low) — never all of them. A load that is unknown (no reading,
 * unparsable, stale: health.h) counts as unloaded: stale data never sheds.
 *
 * Threading: per worker, like select.c: one relaxed load per candidate (health_ep_load()), the
 * worker's PRNG, no allocation, no lock.
 */
#ifndef TERN_ANSWER_STEER_SHED_H
#define TERN_ANSWER_STEER_SHED_H

#include <stdint.h>

#include "tern/answer/answer.h"
#include "tern/answer/answer_trace.h"

/**
 * Shed the candidates c[0..n) of RRset g by load (g->policy.shed set). Keeps them in order in
 * c, fills ctx->wscaled[c[i]] for each kept one, records in ctx->info.steer (rules SHED,
 * shed_out, shed_scaled) when a load left a record out or scaled it, and in ts (may be NULL).
 * Returns how many are kept (n when n is 0 or every candidate is at or above high).
 */
unsigned steer_shed(answer_ctx_t *ctx, const zone_geo_t *g, uint16_t *c, unsigned n,
                    answer_trace_select_t *ts);

/** The weight in [0, weight] of a record at load (milli-units) between low and high:
 * weight * (high - load) / (high - low), rounded, at least 1 when weight is (kept records stay
 * pickable). low <= load < high. */
uint32_t steer_shed_scale(uint32_t weight, uint32_t load, uint32_t low, uint32_t high);

/** The worker's PRNG draw (select.c): uniform 32 bits. */
uint32_t answer_select_rnd32(answer_ctx_t *ctx);

#endif
