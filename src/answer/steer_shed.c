/*
 * steer_shed.c — load shedding of one steered RRset (see steer_shed.h).
 *
 * Decisions, and why:
 *   - The model is NS1's Shed Load filter ("Configuring automatic load shedding using the Shed
 *     Load filter", help.ns1.com/hc/en-us/articles/360020683413, and "About healthcheck
 *     filters", .../360056033654): at or below the low watermark an answer stays, at or above
 *     the high one it is removed, between the two it is removed "at a frequency equivalent to
 *     the distance it is between those two points"; an answer without load metadata is left
 *     alone (here: an unknown load). For the orders that weigh (weighted, sticky) the fall-off
 *     is the weight itself, so they keep their proportions and sticky clients stay put; the
 *     orders that do not weigh get NS1's per-answer draw. Unlike NS1's filter, all records at or
 *     above high are kept rather than none (fail open, as health does: an answer is never
 *     empty for load).
 *   - Each load is read once per candidate (one relaxed atomic load), so a cell changing in the
 *     middle cannot make the step disagree with itself.
 *   - The draw compares a 32-bit draw times (high - low) with (load - low) << 32: exact in
 *     64 bits, no division on the query path.
 */
#include "steer_shed.h"

#include "tern/common/compiler.h"
#include "tern/health/health.h"

uint32_t steer_shed_scale(uint32_t weight, uint32_t load, uint32_t low, uint32_t high)
{
    uint64_t span = high - low, room = high - load;
    uint64_t w = ((uint64_t)weight * room + span / 2) / span;
    return weight && w == 0 ? 1 : (uint32_t)w;
}

static uint8_t sat8(unsigned v)
{
    return v > UINT8_MAX ? UINT8_MAX : (uint8_t)v;
}

unsigned steer_shed(answer_ctx_t *ctx, const zone_geo_t *g, uint16_t *c, unsigned n,
                    answer_trace_select_t *ts)
{
    const uint32_t lo = g->policy.shed_low, hi = g->policy.shed_high;
    const bool weighs =
        g->policy.order != ZONE_GEO_ORDER_NONE && g->policy.order != ZONE_GEO_ORDER_RR;
    /* Per kept record: the weight the order reads (orders that weigh), or whether the draw
     * left it out (1) or not (0) (orders that do not: they never read it). First the loads. */
    uint32_t *w = ctx->wscaled;
    unsigned below = 0;
    for (unsigned i = 0; i < n; i++) {
        uint32_t load = health_ep_load(g->rr[c[i]].health);
        w[c[i]] = load;
        below += load == HEALTH_LOAD_UNKNOWN || load < hi;
    }
    const bool open = below == 0 && n > 0;
    unsigned k = 0, out = 0, scaled = 0, drawn = 0;
    for (unsigned i = 0; i < n; i++) {
        uint16_t r = c[i];
        uint32_t load = w[r], weight = g->rr[r].weight;
        uint8_t how = load == HEALTH_LOAD_UNKNOWN ? ANSWER_SHED_UNKNOWN
                      : load >= hi                ? (open ? ANSWER_SHED_OPEN : ANSWER_SHED_OUT)
                      : load <= lo                ? ANSWER_SHED_BELOW
                      : weighs                    ? ANSWER_SHED_SCALED
                      : (uint64_t)answer_select_rnd32(ctx) * (hi - lo) < (uint64_t)(load - lo) << 32
                          ? ANSWER_SHED_DRAWN
                          : ANSWER_SHED_SPARED;
        if (unlikely(ts != NULL) && r < ANSWER_TRACE_RRS) {
            ts->shed_how[r] = how;
            ts->load[r] = load;
        }
        if (how == ANSWER_SHED_OUT) {
            out++;
            continue;
        }
        if (how == ANSWER_SHED_SCALED) {
            weight = steer_shed_scale(weight, load, lo, hi);
            scaled++;
        }
        drawn += how == ANSWER_SHED_DRAWN;
        w[r] = weighs ? weight : how == ANSWER_SHED_DRAWN;
        c[k++] = r;
    }
    /* the draws leave out what they drew, unless that is every record left */
    if (drawn && drawn < k) {
        unsigned j = 0;
        for (unsigned i = 0; i < k; i++)
            if (!w[c[i]])
                c[j++] = c[i];
        k = j;
        out += drawn;
    } else if (drawn && unlikely(ts != NULL)) {
        for (unsigned i = 0; i < k; i++)
            if (c[i] < ANSWER_TRACE_RRS && ts->shed_how[c[i]] == ANSWER_SHED_DRAWN)
                ts->shed_how[c[i]] = ANSWER_SHED_SPARED;
    }
    if (unlikely(ts != NULL)) {
        for (unsigned i = 0; i < k; i++)
            if (c[i] < ANSWER_TRACE_RRS)
                ts->wscaled[c[i]] = weighs ? w[c[i]] : g->rr[c[i]].weight;
        ts->shed = true;
        ts->shed_fail_open = open;
        answer_trace_select_stage(ts, ANSWER_SEL_SHED, c, k);
    }
    if (out || scaled) {
        ctx->info.steer.rules |= ANSWER_STEER_SHED;
        ctx->info.steer.shed_out = sat8(out);
        ctx->info.steer.shed_scaled = sat8(scaled);
    }
    return k;
}
