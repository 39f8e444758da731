/*
 * select.c — redins-style geo selection over one steered RRset (see select.h).
 *
 * Decisions, and why:
 *   - The candidates are u16 indexes into the RRset's zone_geo_rr_t array, filtered in place;
 *     an RRset holds at most 65535 RRs (zone_rrset_t.count), so the scratch arrays in the ctx
 *     bound everything and nothing is allocated.
 *   - PRNG: xorshift64* per worker (no shared state, unlike redins' global math/rand). The
 *     bounded draw is Lemire's multiply-shift on the top 32 bits: the bias for n <= 65535 is
 *     below 2^-16, far under any weight an operator writes.
 *   - Weights are summed in 64 bits: 65535 RRs of weight 2^32-1 still fit.
 *   - "Nearest" compares float dot products of unit vectors: exact ties (records at the same
 *     place) stay together, as redins keeps equal distances.
 */
#include "tern/answer/select.h"

#include "tern/answer/answer_trace.h"
#include "steer_shed.h"

#include "steer_latency.h"

#include "select_int.h"
#include "steer_sticky.h"
#include "steer_tier.h"

#include <math.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>

#include "tern/common/compiler.h"
#include "tern/common/hash.h"

void answer_ctx_seed(answer_ctx_t *ctx, uint64_t seed)
{
    /* splitmix64 once, so nearby seeds (worker ids) give unrelated streams; never 0 */
    uint64_t z = seed + 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    ctx->rng = z ? z : 0x2545F4914F6CDD1Dull;
}

static uint32_t rnd32(answer_ctx_t *ctx)
{
    uint64_t x = ctx->rng;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    ctx->rng = x;
    return (uint32_t)((x * 0x2545F4914F6CDD1Dull) >> 32);
}

uint32_t answer_select_rnd32(answer_ctx_t *ctx)
{
    return rnd32(ctx);
}

/* Uniform in [0, n), n >= 1. */
static uint32_t rnd_below(answer_ctx_t *ctx, uint32_t n)
{
    return (uint32_t)(((uint64_t)rnd32(ctx) * n) >> 32);
}

/* Uniform in [0, n) for a 64-bit n >= 1. */
static uint64_t rnd_below64(answer_ctx_t *ctx, uint64_t n)
{
    if (n <= UINT32_MAX)
        return rnd_below(ctx, (uint32_t)n);
    uint64_t r = (uint64_t)rnd32(ctx) << 32 | rnd32(ctx);
    return r % n; /* n > 2^32 only with huge weights: the modulo bias is negligible there too */
}

void answer_set_client(answer_ctx_t *ctx, int family, const uint8_t *addr)
{
    static const uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF};
    ctx->scope = 0;
    ctx->client_mapped = false;
    if (family == AF_INET6 && memcmp(addr, mapped, sizeof(mapped)) == 0) {
        family = AF_INET;
        addr += 12;
        ctx->client_mapped = true;
    }
    memset(ctx->client_addr, 0, sizeof(ctx->client_addr));
    if (family == AF_INET) {
        ctx->client_family = AF_INET;
        memcpy(ctx->client_addr, addr, 4);
    } else if (family == AF_INET6) {
        ctx->client_family = AF_INET6;
        memcpy(ctx->client_addr, addr, 16);
    } else {
        ctx->client_family = 0;
    }
    /* the cache slot: the address bytes hashed, the family as the seed */
    uint64_t h =
        tern_hash64(ctx->client_addr, sizeof(ctx->client_addr), (uint64_t)ctx->client_family);
    answer_geo_entry_t *e = &ctx->geo_cache[h & (ANSWER_GEO_CACHE - 1)];
    if (e->family != ctx->client_family ||
        memcmp(e->addr, ctx->client_addr, sizeof(e->addr)) != 0) {
        e->family = (uint8_t)ctx->client_family;
        memcpy(e->addr, ctx->client_addr, sizeof(e->addr));
        e->have_geo = e->have_asn = false;
    }
    ctx->ent = e;
}

/* The address steering decisions are about: a usable ECS option's, else the packet's source
 * (family AF_INET / AF_INET6 with its bytes at *addr, or 0 and NULL: unknown). */
static int query_client(const answer_ctx_t *ctx, const uint8_t **addr)
{
    const wire_ecs_t *ecs = ctx->q_ecs;
    const struct sockaddr *src = ctx->q_src;
    if (ecs && ecs->source_prefix > 0) {
        *addr = ecs->addr;
        return ecs->family == 1 ? AF_INET : AF_INET6;
    }
    if (src && src->sa_family == AF_INET) {
        *addr = (const uint8_t *)&((const struct sockaddr_in *)src)->sin_addr;
        return AF_INET;
    }
    if (src && src->sa_family == AF_INET6) {
        *addr = ((const struct sockaddr_in6 *)src)->sin6_addr.s6_addr;
        return AF_INET6;
    }
    *addr = NULL;
    return 0;
}

/* The client geo decisions are about, set once per query at the first filter that needs it
 * (later ones in a CNAME chain reuse ctx->ent). */
static void client_from_query(answer_ctx_t *ctx)
{
    const uint8_t *addr;
    int family = query_client(ctx, &addr);
    answer_set_client(ctx, family, addr);
}

static void widen_scope(answer_ctx_t *ctx, uint8_t prefix)
{
    if (prefix > ctx->scope)
        ctx->scope = prefix;
}

/* The client's cache entry, emptied if it was filled under another view. The client is
 * resolved here, on the first filter that needs it: an RRset steered by health, order or count
 * alone never touches the cache. */
static answer_geo_entry_t *entry(answer_ctx_t *ctx, const answer_view_t *v)
{
    if (!ctx->ent)
        client_from_query(ctx);
    answer_geo_entry_t *e = ctx->ent;
    if (e->gen != v->gen) {
        e->gen = v->gen;
        e->have_geo = e->have_asn = false;
    }
    return e;
}

static const geoip_result_t *client_geo(answer_ctx_t *ctx, const answer_view_t *v)
{
    answer_geo_entry_t *e = entry(ctx, v);
    if (!e->have_geo) {
        e->have_geo = true;
        if (ctx->client_family)
            geoip_set_lookup(&v->geoip, ctx->client_family, ctx->client_addr, &e->geo);
        else
            memset(&e->geo, 0, sizeof(e->geo));
        if (e->geo.has_location) {
            /* once per client, not per query: the location filter compares unit vectors */
            const double rad = 3.14159265358979323846 / 180.0;
            double lat = e->geo.lat * rad, lon = e->geo.lon * rad;
            double cl = cos(lat);
            e->loc[0] = (float)(cl * cos(lon));
            e->loc[1] = (float)(cl * sin(lon));
            e->loc[2] = (float)sin(lat);
        }
    }
    widen_scope(ctx, e->geo.prefix);
    return &e->geo;
}

static uint32_t client_asn(answer_ctx_t *ctx, const answer_view_t *v)
{
    answer_geo_entry_t *e = entry(ctx, v);
    if (!e->have_asn) {
        e->have_asn = true;
        e->asn = 0;
        e->asn_prefix = 0;
        if (v->asn && ctx->client_family == AF_INET) {
            const uint8_t *a = ctx->client_addr;
            uint32_t h = (uint32_t)a[0] << 24 | (uint32_t)a[1] << 16 | (uint32_t)a[2] << 8 | a[3];
            e->asn = asn_table_lookup_v4_prefix(v->asn, h, &e->asn_prefix);
        } else if (v->asn && ctx->client_family == AF_INET6) {
            e->asn = asn_table_lookup_v6_prefix(v->asn, ctx->client_addr, &e->asn_prefix);
        }
    }
    widen_scope(ctx, e->asn_prefix);
    return e->asn;
}

static bool has_cc(const zone_geo_rr_t *r, uint16_t cc)
{
    for (unsigned i = 0; i < r->ncountries; i++)
        if (r->countries[i] == cc)
            return true;
    return false;
}

static bool has_asn(const zone_geo_rr_t *r, uint32_t asn)
{
    for (unsigned i = 0; i < r->nasns; i++)
        if (r->asns[i] == asn)
            return true;
    return false;
}

/* Keep the candidates listing cc; else those listing no country or ""; else all. */
static unsigned keep_country(const zone_geo_t *g, uint16_t *c, unsigned n, uint16_t cc)
{
    unsigned k = 0;
    if (cc)
        for (unsigned i = 0; i < n; i++)
            if (has_cc(&g->rr[c[i]], cc))
                c[k++] = c[i];
    if (k)
        return k;
    for (unsigned i = 0; i < n; i++) {
        const zone_geo_rr_t *r = &g->rr[c[i]];
        if (!r->ncountries || has_cc(r, 0))
            c[k++] = c[i];
    }
    return k ? k : n;
}

/* The same with ASNs (0 = "none" on both sides). */
static unsigned keep_asn(const zone_geo_t *g, uint16_t *c, unsigned n, uint32_t asn)
{
    unsigned k = 0;
    if (asn)
        for (unsigned i = 0; i < n; i++)
            if (has_asn(&g->rr[c[i]], asn))
                c[k++] = c[i];
    if (k)
        return k;
    for (unsigned i = 0; i < n; i++) {
        const zone_geo_rr_t *r = &g->rr[c[i]];
        if (!r->nasns || has_asn(r, 0))
            c[k++] = c[i];
    }
    return k ? k : n;
}

/* Keep the candidates of the highest health rank present (health.h): redins' FilterHealthcheck
 * in one pass. Every record fully down is also "the highest rank": all are kept (fail open) and
 * counted. Each rank is read once, so a state change in the middle cannot empty the set. */
static unsigned keep_healthy(answer_ctx_t *ctx, const zone_geo_t *g, uint16_t *c, unsigned n)
{
    unsigned best = HEALTH_RANK_DOWN, k = 0;
    for (unsigned i = 0; i < n; i++) {
        unsigned r = health_ep_rank(g->rr[c[i]].health);
        if (r > best) {
            best = r;
            k = 0;
        }
        if (r == best)
            c[k++] = c[i];
    }
    if (best == HEALTH_RANK_DOWN && n > 0)
        ctx->info.health_fail_open++;
    return k;
}

/* Keep the located candidates nearest to the client e (all of them on exact ties). */
static unsigned keep_nearest(const zone_geo_t *g, uint16_t *c, unsigned n,
                             const answer_geo_entry_t *e)
{
    if (!e->geo.has_location)
        return n;
    const float *me = e->loc;
    float best = -2.0f;
    for (unsigned i = 0; i < n; i++) {
        const zone_geo_rr_t *r = &g->rr[c[i]];
        if (!r->has_loc)
            continue;
        float d = r->loc[0] * me[0] + r->loc[1] * me[1] + r->loc[2] * me[2];
        if (d > best)
            best = d;
    }
    if (best < -1.5f)
        return n; /* no record is located: all stay */
    unsigned k = 0;
    for (unsigned i = 0; i < n; i++) {
        const zone_geo_rr_t *r = &g->rr[c[i]];
        if (r->has_loc && r->loc[0] * me[0] + r->loc[1] * me[1] + r->loc[2] * me[2] == best)
            c[k++] = c[i];
    }
    return k;
}

/* The sticky order (steer_sticky.c) over c[0..n): the client's network hashed, the ECS scope
 * widened to the bits hashed (the answer holds for that whole network), offs as scratch. */
static void sticky(answer_ctx_t *ctx, const answer_view_t *v, const zone_geo_t *g, uint16_t *c,
                   unsigned n, uint32_t *offs, answer_trace_select_t *ts)
{
    /* the client as geo set it, else straight from the query: the sticky order needs no geo
     * cache entry, and a cache line per query is most of what it would cost */
    const uint8_t *addr = ctx->client_addr;
    int family = ctx->ent ? ctx->client_family : query_client(ctx, &addr);
    steer_sticky_net_t net;
    steer_sticky_net(family, addr, ctx->ent && ctx->client_mapped, ctx->q_ecs, &v->cfg, &g->policy,
                     &net);
    if (!ctx->ent)
        ctx->client_mapped = net.mapped; /* the scope is then written in the option's bits */
    widen_scope(ctx, net.bits);
    steer_sticky_order(ctx, g, c, n, &net, g->policy.count == ZONE_GEO_COUNT_SINGLE, offs);
    ctx->info.steer.rules |= ANSWER_STEER_STICKY;
    ctx->info.steer.sticky_prefix = net.bits;
    if (unlikely(ts != NULL)) {
        ts->sticky = true;
        ts->sticky_bits = net.bits;
        ts->sticky_family = net.family;
        memcpy(ts->sticky_net, net.addr, sizeof(ts->sticky_net));
    }
}

/* `ternctl explain`'s record of a filter step (answer_trace.h); ts is NULL on the workers. */
#define TRACE_FILTER(step, asn, key)                                                               \
    do {                                                                                           \
        if (unlikely(ts != NULL)) {                                                                \
            answer_trace_select_filter(ts, step, asn, key, g, c, n);                               \
            answer_trace_select_stage(ts, ANSWER_SEL_FILTER1 + (step), c, n);                      \
        }                                                                                          \
    } while (0)

unsigned answer_select(answer_ctx_t *ctx, const answer_view_t *v, const zone_geo_t *g,
                       uint32_t *offs)
{
    uint16_t *c = ctx->cand;
    unsigned n = g->count;
    for (unsigned i = 0; i < n; i++)
        c[i] = (uint16_t)i;
    answer_trace_select_t *ts = NULL;
    if (unlikely(ctx->trace != NULL))
        ts = answer_trace_select_begin(ctx->trace, g);
    bool fail_open = false;
    if (g->health) {
        uint16_t open = ctx->info.health_fail_open;
        n = keep_healthy(ctx, g, c, n);
        fail_open = ctx->info.health_fail_open != open;
        if (unlikely(ts != NULL)) {
            ts->fail_open = fail_open;
            answer_trace_select_stage(ts, ANSWER_SEL_HEALTH, c, n);
        }
    }

    switch (g->policy.filter) {
    case ZONE_GEO_FILTER_COUNTRY: {
        uint16_t cc = client_geo(ctx, v)->country;
        n = keep_country(g, c, n, cc);
        TRACE_FILTER(0, false, cc);
        break;
    }
    case ZONE_GEO_FILTER_ASN: {
        uint32_t asn = client_asn(ctx, v);
        n = keep_asn(g, c, n, asn);
        TRACE_FILTER(0, true, asn);
        break;
    }
    case ZONE_GEO_FILTER_ASN_COUNTRY: {
        uint32_t asn = client_asn(ctx, v);
        n = keep_asn(g, c, n, asn);
        TRACE_FILTER(0, true, asn);
        uint16_t cc = client_geo(ctx, v)->country;
        n = keep_country(g, c, n, cc);
        TRACE_FILTER(1, false, cc);
        break;
    }
    case ZONE_GEO_FILTER_LOCATION:
        (void)client_geo(ctx, v);
        n = keep_nearest(g, c, n, ctx->ent);
        if (unlikely(ts != NULL))
            answer_trace_select_stage(ts, ANSWER_SEL_FILTER1, c, n);
        break;
    case ZONE_GEO_FILTER_LATENCY: {
        (void)entry(ctx, v); /* resolves the client */
        unsigned k = steer_latency(ctx, v, g, c, n, ts);
        if (k == 0) { /* not in the map, or no candidate's group is: location (the issue) */
            (void)client_geo(ctx, v);
            k = keep_nearest(g, c, n, ctx->ent);
        }
        n = k;
        if (unlikely(ts != NULL))
            answer_trace_select_stage(ts, ANSWER_SEL_FILTER1, c, n);
        break;
    }
    default:
        break;
    }

    if (unlikely(g->policy.shed))
        n = steer_shed(ctx, g, c, n, ts);
    if (unlikely(g->tiers)) {
        unsigned skipped;
        n = steer_tier(g, c, n, fail_open, &ctx->info.steer.tier, &skipped, ts);
        ctx->info.steer.rules |= ANSWER_STEER_TIER;
        ctx->info.steer.tier_skipped = (uint8_t)(skipped > UINT8_MAX ? UINT8_MAX : skipped);
        if (unlikely(ts != NULL))
            answer_trace_select_stage(ts, ANSWER_SEL_TIER, c, n);
    }

    unsigned first = 0;
    if (n > 1) {
        if (g->policy.order == ZONE_GEO_ORDER_RR) {
            first = rnd_below(ctx, n);
        } else if (g->policy.order == ZONE_GEO_ORDER_WEIGHTED) {
            uint64_t sum = 0;
            for (unsigned i = 0; i < n; i++)
                sum += cand_weight(ctx, g, c, i);
            if (sum == 0) {
                first = rnd_below(ctx, n);
            } else {
                uint64_t x = rnd_below64(ctx, sum);
                while (x >= cand_weight(ctx, g, c, first)) /* zero weights are never chosen */
                    x -= cand_weight(ctx, g, c, first++);
            }
        } else if (g->policy.order == ZONE_GEO_ORDER_STICKY) {
            sticky(ctx, v, g, c, n, offs, ts);
        }
    } else if (g->policy.order == ZONE_GEO_ORDER_STICKY && n == 1) {
        sticky(ctx, v, g, c, n, offs, ts); /* the scope and the log say so for one record too */
    }
    if (g->policy.count == ZONE_GEO_COUNT_SINGLE && n > 0) {
        offs[0] = g->rr[c[first]].off;
        if (n > 1) /* a choice was made: the query log says which (answer_info_t.pick) */
            ctx->info.pick = &g->rr[c[first]];
        return 1;
    }
    for (unsigned i = 0, k = first; i < n; i++, k = k + 1 == n ? 0 : k + 1)
        offs[i] = g->rr[c[k]].off; /* rotated to start at first, without a division per RR */
    return n;
}
