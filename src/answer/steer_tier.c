/*
 * steer_tier.c — failover tiers (steer_tier.h).
 *
 * The rule, and whose it is:
 *   - Tiers are the candidates grouped by priority, ascending (lower is preferred). The first
 *     tier with at least min_healthy candidates is answered. This is gdnsd's metafo (datacenters
 *     tried in order, the first whose sub-plugin succeeds answers: src/plugins/meta_core.inc)
 *     over multifo's up_thresh (a datacenter "succeeds" while non_down >= ceil(up_thresh x
 *     total): docs/gdnsd-plugin-multifo.podin), with the threshold an absolute count, because
 *     operators size a tier by the servers it needs to carry the load, not by a fraction of
 *     what it has. NS1's priority filter is the default, 1: the best priority with a record up.
 *   - When no tier qualifies, the tier with the most candidates is answered (ties: the better
 *     priority). gdnsd answers the FIRST datacenter then ("all datacenters failed ... use first
 *     dc", meta_core.inc), with every address of it, down ones included (multifo's fallback).
 *     We keep health's verdict and prefer the tier that can still carry the most load; for
 *     tiers of equal size that is gdnsd's choice.
 *   - When health failed open (every record of the RRset down, select.c kept them all), nothing
 *     tells the tiers apart but their priority: the best priority present answers, as metafo's
 *     first datacenter does.
 *   - The candidates are what health, the geo filter and shedding left, so a tier emptied by
 *     load spills to the next (issue 33's pipeline).
 * Cost: one pass per tier looked at (tiers are a handful), nothing allocated; the candidates keep
 * their order, so the order step that follows sees them as it would without tiers.
 */
#include "steer_tier.h"

unsigned steer_tier_min(const zone_geo_policy_t *p, uint16_t prio)
{
    for (unsigned i = 0; i < p->nmin; i++)
        if (p->min[i].priority == prio)
            return p->min[i].n;
    return p->min_healthy ? p->min_healthy : 1;
}

/* The least priority above `above` among the candidates (above = -1: the least of all), and how
 * many candidates have it; false when none is left. */
static bool next_tier(const zone_geo_t *g, const uint16_t *c, unsigned n, long above,
                      uint16_t *prio, unsigned *count)
{
    long best = -1;
    unsigned k = 0;
    for (unsigned i = 0; i < n; i++) {
        long p = g->rr[c[i]].priority;
        if (p <= above)
            continue;
        if (best < 0 || p < best) {
            best = p;
            k = 0;
        }
        if (p == best)
            k++;
    }
    if (best < 0)
        return false;
    *prio = (uint16_t)best;
    *count = k;
    return true;
}

unsigned steer_tier(const zone_geo_t *g, uint16_t *c, unsigned n, bool fail_open, uint16_t *prio,
                    unsigned *skipped, answer_trace_select_t *ts)
{
    uint16_t p = 0, pick = 0;
    unsigned cnt = 0, most = 0, skip = 0;
    bool found = false;
    long above = -1;
    *skipped = 0;
    while (next_tier(g, c, n, above, &p, &cnt)) {
        unsigned need = steer_tier_min(&g->policy, p);
        if (fail_open || cnt >= need) {
            pick = p;
            found = true;
            if (ts)
                ts->tier_how = fail_open ? ANSWER_TIER_FAIL_OPEN : ANSWER_TIER_QUALIFIED;
            break;
        }
        if (ts && ts->ntiers < ANSWER_TRACE_TIERS)
            ts->tiers[ts->ntiers++] = (answer_trace_tier_t){p, (uint16_t)cnt, (uint16_t)need};
        if (cnt > most) { /* strictly more: on ties the better priority, met first, stays */
            most = cnt;
            pick = p;
        }
        skip++;
        above = p;
    }
    if (n == 0) {
        *prio = 0;
        return 0;
    }
    /* none qualified: the fullest tier; the tiers before it were passed over */
    if (!found) {
        skip = 0;
        above = -1;
        while (next_tier(g, c, n, above, &p, &cnt) && p < pick) {
            skip++;
            above = p;
        }
        if (ts)
            ts->tier_how = ANSWER_TIER_FULLEST;
    }
    unsigned k = 0;
    for (unsigned i = 0; i < n; i++)
        if (g->rr[c[i]].priority == pick)
            c[k++] = c[i];
    *prio = pick;
    *skipped = skip;
    if (ts) {
        ts->tiered = true;
        ts->tier = pick;
        ts->tier_skipped = (uint16_t)skip;
    }
    return k;
}
