/*
 * steer_sticky.c — the sticky order (steer_sticky.h): weighted rendezvous hashing (highest random
 * weight, Thaler and Ravishankar 1998) of the client's network.
 *
 * Decisions, and why:
 *   - Rendezvous, not jump hash: jump consistent hash (Lamping and Veach 2014) maps a key to a
 *     bucket number 0..N-1 and moves only 1/N of keys when buckets are added or removed AT THE
 *     END. An RRset's records are added and removed anywhere (an operator deletes the second of
 *     five addresses), which renumbers every bucket after it. Rendezvous scores each (client,
 *     record) pair independently, so removing a record moves exactly the clients whose best it
 *     was, and adding one takes from each other record in proportion to its weight: ~1/N either
 *     way. It costs one hash and one log per candidate — candidates are a handful of sites.
 *   - Weighted: score = -ln(u) / w with u uniform in (0, 1) (Schindelhauer and Schomaker's
 *     logarithmic method, the weighted HRW most implementations use): the lowest score of
 *     exponentials with rates w_i is record i with probability w_i / sum(w). Weight 0 is never
 *     chosen while a positive weight remains; all zero weigh alike (the weighted order's rule).
 *   - The record's identity is a hash of its RDATA (zone_geo_rr_t.ident, made at build time),
 *     never its index: adding a record before it must not change its scores.
 *   - u comes from splitmix64's finaliser of (network hash + identity * golden ratio): the
 *     network hash is tern_hash64() of the truncated address, family and prefix length.
 */
#include "steer_sticky.h"

#include <math.h>
#include <string.h>
#include <sys/socket.h>

#include "select_int.h"
#include "tern/common/hash.h"

void steer_sticky_net(int family, const uint8_t *addr, bool mapped, const wire_ecs_t *ecs,
                      const answer_config_t *cfg, const zone_geo_policy_t *p,
                      steer_sticky_net_t *net)
{
    static const uint8_t v4mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF};
    memset(net, 0, sizeof(*net));
    net->mapped = mapped;
    if (family == AF_INET6 && memcmp(addr, v4mapped, sizeof(v4mapped)) == 0) {
        family = AF_INET; /* as geo takes it (answer_set_client()) */
        addr += 12;
        net->mapped = true;
    }
    net->family = family;
    unsigned max = 0, bits = 0;
    if (net->family == AF_INET) {
        max = 32;
        bits = p->sticky_v4            ? p->sticky_v4
               : cfg->sticky_prefix_v4 ? cfg->sticky_prefix_v4
                                       : ANSWER_STICKY_V4;
    } else if (net->family == AF_INET6) {
        max = 128;
        bits = p->sticky_v6            ? p->sticky_v6
               : cfg->sticky_prefix_v6 ? cfg->sticky_prefix_v6
                                       : ANSWER_STICKY_V6;
    }
    /* the client came from the ECS option (select.c query_client()): never hash more of it
     * than the resolver sent (an IPv4-mapped address's prefix counts 96 bits before IPv4's) */
    if (ecs && ecs->source_prefix > 0) {
        unsigned sent = ecs->source_prefix;
        if (net->mapped)
            sent = sent > 96 ? sent - 96 : 0;
        if (sent < bits)
            bits = sent;
    }
    if (bits > max)
        bits = max;
    net->bits = (uint8_t)bits;
    unsigned full = bits / 8, rest = bits % 8;
    if (full)
        memcpy(net->addr, addr, full);
    if (rest)
        net->addr[full] = (uint8_t)(addr[full] & (0xFF00u >> rest));
    net->hash =
        tern_hash64(net->addr, sizeof(net->addr), (uint64_t)(unsigned)net->family << 8 | bits);
}

/* The 64 random bits of (network, record): u is their top 53 bits as a fraction. */
static inline uint64_t pair_bits(uint64_t h, uint32_t ident)
{
    return tern_mix64(h + (uint64_t)ident * 0x9E3779B97F4A7C15ull);
}

double steer_sticky_score(uint64_t h, uint32_t ident, uint32_t w)
{
    uint64_t x = pair_bits(h, ident);
    double u = ((double)(x >> 11) + 0.5) * 0x1p-53; /* in (0, 1): never 0, never 1 */
    return -log(u) / (double)w;
}

/* The sort key of a record: with weights that differ, its score (positive floats order as their
 * bits); with equal weights the score is monotonic in u alone, so the pair's bits stand in and
 * no log is taken (the usual sticky RRset weighs its records alike). Records of weight 0, while
 * a positive one remains, sort after every positive one, in their own unit-weight order. */
static uint32_t sort_key(uint64_t h, uint32_t ident, uint32_t w, bool equal, bool zero)
{
    if (equal || zero) {
        uint32_t k = (uint32_t)(~pair_bits(h, ident) >> 33); /* larger u: smaller key */
        return zero ? 0x80000000u | k : k;
    }
    float f = (float)steer_sticky_score(h, ident, w);
    uint32_t b;
    memcpy(&b, &f, sizeof(b));
    return b >> 1; /* below 0x40000000: before every zero-weight key */
}

void steer_sticky_order(const answer_ctx_t *ctx, const zone_geo_t *g, uint16_t *c, unsigned n,
                        const steer_sticky_net_t *net, bool single, uint32_t *scratch)
{
    if (n < 2)
        return;
    /* weights: any positive one (zeros then never win), and whether the positive ones are equal */
    uint32_t wpos = 0;
    bool equal = true;
    for (unsigned i = 0; i < n; i++) {
        uint32_t w = cand_weight(ctx, g, c, i);
        if (w && !wpos)
            wpos = w;
        else if (w && w != wpos)
            equal = false;
    }
    if (single) {
        unsigned best = 0;
        uint64_t bx = 0;
        double bs = INFINITY;
        for (unsigned i = 0; i < n; i++) {
            uint32_t w = cand_weight(ctx, g, c, i);
            if (wpos && w == 0)
                continue;
            uint32_t id = g->rr[c[i]].ident;
            if (equal) {
                uint64_t x = pair_bits(net->hash, id);
                if (x >= bx) {
                    bx = x;
                    best = i;
                }
            } else {
                double sc = steer_sticky_score(net->hash, id, w);
                if (sc < bs) {
                    bs = sc;
                    best = i;
                }
            }
        }
        uint16_t t = c[0];
        c[0] = c[best];
        c[best] = t;
        return;
    }
    for (unsigned i = 0; i < n; i++) {
        uint32_t w = cand_weight(ctx, g, c, i);
        scratch[i] = sort_key(net->hash, g->rr[c[i]].ident, w, equal, wpos && w == 0);
    }
    /* Shell sort (Ciura's gaps) of the (key, candidate) pairs: no allocation, and quick enough
     * for the few records an RRset steers between */
    static const unsigned gaps[] = {701, 301, 132, 57, 23, 10, 4, 1};
    for (unsigned gi = 0; gi < sizeof(gaps) / sizeof(gaps[0]); gi++) {
        unsigned gap = gaps[gi];
        for (unsigned i = gap; i < n; i++) {
            uint32_t k = scratch[i];
            uint16_t v = c[i];
            unsigned j = i;
            for (; j >= gap && scratch[j - gap] > k; j -= gap) {
                scratch[j] = scratch[j - gap];
                c[j] = c[j - gap];
            }
            scratch[j] = k;
            c[j] = v;
        }
    }
}
