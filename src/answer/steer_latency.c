/*
 * steer_latency.c — see steer_latency.h.
 *
 * Decisions, and why:
 *   - The client's entry is sorted by ms, so the first pair whose group some candidate has is
 *     the answer; pairs tied with it at that ms are kept too (two PoPs measured equal serve
 *     together, as equal distances do in the location filter). The scan is pairs × candidates,
 *     both small (a handful of PoPs per network, a handful of records per RRset).
 *   - No per-client cache: a lookup is one tree walk of the mapped table (73-105 ns with 4096
 *     clients, bench/latency_map.sh; the whole filter +155 ns a query), where a cached MaxMind
 *     lookup saves a walk of up to 128 nodes; caching it (a pointer, a count, a prefix) would
 *     grow every worker's 16384 answer_geo_entry_t from 80 to 96 bytes for ~60 ns saved on a
 *     latency-steered query only.
 *   - The scope is the map range's prefix even on a fallback: the answer depended on the client
 *     not being in the map, which holds for that block (the location's prefix is added by the
 *     fallback's own lookup).
 */
#include "steer_latency.h"

#include <sys/socket.h>

#include "tern/common/compiler.h"

/* Whether some candidate has group id. */
static bool has_group(const zone_geo_t *g, const uint16_t *c, unsigned n, uint32_t id)
{
    for (unsigned i = 0; i < n; i++)
        if (g->rr[c[i]].group == id)
            return true;
    return false;
}

/* The client's entry into the trace (the first ANSWER_TRACE_LATENCY groups). */
static void trace_entry(answer_trace_select_t *ts, const latency_map_t *m, const latency_entry_t *e,
                        uint8_t prefix)
{
    ts->latency.prefix = prefix;
    ts->latency.nentry = e->n;
    for (uint32_t i = 0; i < e->n && i < ANSWER_TRACE_LATENCY; i++) {
        latency_entry_at(e, i, &ts->latency.group[i], &ts->latency.ms[i]);
        ts->latency.name[i] = latency_map_group_name(m, ts->latency.group[i]);
    }
}

unsigned steer_latency(answer_ctx_t *ctx, const answer_view_t *v, const zone_geo_t *g, uint16_t *c,
                       unsigned n, answer_trace_select_t *ts)
{
    answer_steer_info_t *si = &ctx->info.steer;
    latency_entry_t e = {0};
    uint8_t prefix = 0;
    si->rules |= ANSWER_STEER_LATENCY;
    si->latency_how = ANSWER_LATENCY_UNMAPPED;
    if (v->latency && ctx->client_family)
        latency_map_lookup(v->latency, ctx->client_family, ctx->client_addr, &e, &prefix);
    if (prefix > ctx->scope)
        ctx->scope = prefix;
    if (unlikely(ts != NULL)) {
        ts->latency.ran = true;
        ts->latency.map = v->latency != NULL;
        if (v->latency)
            trace_entry(ts, v->latency, &e, prefix);
    }
    uint32_t best = UINT32_MAX, gid = 0, ms = 0;
    for (uint32_t i = 0; i < e.n && best == UINT32_MAX; i++) {
        latency_entry_at(&e, i, &gid, &ms);
        if (has_group(g, c, n, gid))
            best = ms; /* the fastest group some candidate has (ms <= 60000) */
    }
    if (best == UINT32_MAX) {
        si->latency_how = e.n ? ANSWER_LATENCY_NOGROUP : ANSWER_LATENCY_UNMAPPED;
        if (unlikely(ts != NULL))
            ts->latency.how = si->latency_how;
        return 0;
    }
    /* keep the candidates of every group at the best latency (the entry is sorted by ms) */
    unsigned k = 0;
    for (unsigned i = 0; i < n; i++) {
        uint32_t grp = g->rr[c[i]].group, pg, pm;
        if (!grp)
            continue;
        for (uint32_t j = 0; j < e.n; j++) {
            latency_entry_at(&e, j, &pg, &pm);
            if (pm > best)
                break;
            if (pg == grp) {
                c[k++] = c[i];
                break;
            }
        }
    }
    const char *name = NULL;
    for (unsigned i = 0; i < k && !name; i++)
        if (g->rr[c[i]].group == gid)
            name = g->rr[c[i]].group_name;
    si->latency_how = ANSWER_LATENCY_MATCHED;
    si->latency_ms = best;
    si->latency_group = name;
    if (unlikely(ts != NULL)) {
        ts->latency.how = ANSWER_LATENCY_MATCHED;
        ts->latency.chosen_ms = best;
        ts->latency.chosen = name;
    }
    return k;
}
