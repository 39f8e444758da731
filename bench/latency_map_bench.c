/* latency_map_bench — what a latency map costs: the compile of a generated map of N lines (N/3
 * networks × 3 groups; 80% IPv4 /24s, 20% IPv6 /48s) and its size, then the per-query lookup
 * (latency_map_lookup() and reading the entry's pairs) over random client addresses, half of them
 * inside a mapped network; then answer_select() per query on a steered RRset of 5 records (one per
 * group) with geo_filter latency against the same RRset with no filter (the baseline: health,
 * order and count only), so the difference is what the latency filter costs a query. Built and run
 * by bench/latency_map.sh (Release libraries).
 * Usage: latency_map_bench [lines] [lookups] */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "tern/answer/answer.h"
#include "tern/answer/select.h"
#include "tern/geo/latency_map.h"
#include "tern/zone/zone_builder.h"

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static uint64_t rng = 88172645463325252ull;
static uint64_t rnd(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

/* A zone "b.test" whose www A RRset holds 5 records of groups pop0..pop4, steered by filter;
 * its zone_geo_t. */
static const zone_geo_t *steered(uint8_t filter, zone_t **zp)
{
    static const uint8_t apex[] = "\001b\004test", www[] = "\003www\001b\004test";
    static const uint8_t soa[] = "\002ns\001b\004test\000\001h\001b\004test\000"
                                 "\0\0\0\1\0\0\0\1\0\0\0\1\0\0\0\1\0\0\0\1";
    zone_builder_t *b = zone_builder_new(apex, "bench");
    char err[256];
    static const uint8_t ns[] = "\002ns\001b\004test";
    if (!b || zone_builder_add(b, apex, 6, 1, 300, soa, sizeof(soa) - 1, NULL, 0) < 0 ||
        zone_builder_add(b, apex, 2, 1, 300, ns, sizeof(ns), NULL, 0) < 0)
        return NULL;
    for (int i = 0; i < 5; i++) {
        char name[8];
        snprintf(name, sizeof(name), "pop%d", i);
        zone_geo_meta_t m = {
            .weight = 1, .group = latency_group_id(name, 4), .group_name = name, .group_len = 4};
        uint8_t addr[4] = {192, 0, 2, (uint8_t)(i + 1)};
        if (zone_builder_add_geo(b, www, 1, 60, addr, 4, &m, NULL, 0) < 0)
            return NULL;
    }
    zone_geo_policy_t pol = {
        .filter = filter, .count = ZONE_GEO_COUNT_SINGLE, .order = ZONE_GEO_ORDER_WEIGHTED};
    if (zone_builder_set_policy(b, www, 1, &pol) < 0 ||
        zone_builder_finish(b, zp, err, sizeof err) < 0) {
        fprintf(stderr, "zone: %s\n", err);
        return NULL;
    }
    return &(*zp)->geo[0];
}

int main(int argc, char **argv)
{
    size_t lines = argc > 1 ? strtoull(argv[1], NULL, 10) : 1000000;
    size_t lookups = argc > 2 ? strtoull(argv[2], NULL, 10) : 10000000;
    size_t nets = lines / 3;
    char *text = malloc(lines * 64 + 64), *p = text;
    uint32_t *v4 = malloc(nets * sizeof(*v4));
    size_t n4 = 0;
    uint8_t *seen = calloc(1u << 21, 1); /* one bit per /24: the generator may repeat one */
    for (size_t i = 0, k = 0; i < nets; k++) {
        unsigned ms[3] = {(unsigned)(rnd() % 200), (unsigned)(rnd() % 200),
                          (unsigned)(rnd() % 200)};
        if (i % 5 != 4) {
            /* distinct /24s spread over the space: i-th of a stride */
            uint32_t net =
                (uint32_t)(0x01000000u + (uint32_t)k * 2654435761u % 0xDF000000u) & 0xFFFFFF00u;
            if (seen[net >> 11] & 1u << (net >> 8 & 7)) {
                continue; /* a repeat: the next k instead */
            }
            seen[net >> 11] |= (uint8_t)(1u << (net >> 8 & 7));
            v4[n4++] = net;
            for (int g = 0; g < 3; g++)
                p += sprintf(p, "%u.%u.%u.0/24 pop%d %u\n", net >> 24, net >> 16 & 255,
                             net >> 8 & 255, g + (int)(i % 7), ms[g]);
        } else {
            for (int g = 0; g < 3; g++)
                p += sprintf(p, "2001:%x:%x::/48 pop%d %u\n", (unsigned)(i >> 16) & 0xffff,
                             (unsigned)i & 0xffff, g + (int)(i % 7), ms[g]);
        }
        i++;
    }
    free(seen);
    latency_map_t *m = NULL;
    latency_map_stats_t st;
    char err[512];
    double t0 = now();
    int rc = latency_map_compile(text, (size_t)(p - text), "bench", &m, &st, err, sizeof(err));
    double t1 = now();
    if (rc != 0) {
        fprintf(stderr, "compile: %s\n", err);
        return 1;
    }
    printf("compile: %zu lines, %zu networks, %zu entries, %zu groups -> %zu v4 + %zu v6 ranges, "
           "%zu bytes mapped, %.3f s (%zu bytes of text)\n",
           st.lines, st.networks, st.entries, st.groups, st.ranges_v4, st.ranges_v6, st.bytes,
           t1 - t0, (size_t)(p - text));
    free(text);
    uint8_t(*addr)[4] = malloc(1024 * 1024 * 4);
    for (size_t i = 0; i < 1024 * 1024; i++) {
        uint32_t a = i % 2 ? v4[rnd() % n4] | (uint32_t)(rnd() & 255) : (uint32_t)rnd();
        addr[i][0] = (uint8_t)(a >> 24);
        addr[i][1] = (uint8_t)(a >> 16);
        addr[i][2] = (uint8_t)(a >> 8);
        addr[i][3] = (uint8_t)a;
    }
    /* cold: a million client addresses (most lookups miss the CPU caches, as on a server with
     * many resolvers); warm: 4096 of them (the resolvers that send most queries) */
    static const size_t masks[2] = {1024 * 1024 - 1, 4095};
    for (int k = 0; k < 2; k++) {
        uint64_t sum = 0;
        size_t hits = 0;
        t0 = now();
        for (size_t i = 0; i < lookups; i++) {
            latency_entry_t e;
            uint8_t pfx;
            uint32_t n = latency_map_lookup(m, AF_INET, addr[i & masks[k]], &e, &pfx);
            if (n) {
                uint32_t g, ms;
                latency_entry_at(&e, 0, &g, &ms);
                sum += ms + g;
                hits++;
            }
            sum += pfx;
        }
        t1 = now();
        printf("lookup (%zu clients): %zu lookups (%zu mapped), %.1f ns each (checksum %llu)\n",
               masks[k] + 1, lookups, hits, (t1 - t0) * 1e9 / (double)lookups,
               (unsigned long long)sum);
    }
    /* per query: answer_select() with the latency filter against no filter */
    answer_ctx_t *ctx = calloc(1, sizeof(*ctx));
    answer_view_t view = {.latency = m, .gen = 1};
    zone_t *z1 = NULL, *z2 = NULL;
    const zone_geo_t *none = steered(ZONE_GEO_FILTER_NONE, &z1);
    const zone_geo_t *lat = steered(ZONE_GEO_FILTER_LATENCY, &z2);
    if (!ctx || !none || !lat) {
        fprintf(stderr, "zone build failed\n");
        return 1;
    }
    answer_ctx_seed(ctx, 1);
    for (int k = 0; k < 2; k++) {
        double ns[2];
        for (int f = 0; f < 2; f++) {
            const zone_geo_t *g = f ? lat : none;
            uint64_t sum = 0;
            t0 = now();
            for (size_t i = 0; i < lookups; i++) {
                ctx->ent = NULL;
                answer_set_client(ctx, AF_INET, addr[i & masks[k]]);
                sum += answer_select(ctx, &view, g, ctx->offs);
            }
            t1 = now();
            ns[f] = (t1 - t0) * 1e9 / (double)lookups;
            if (sum == 0)
                printf("(no answers)\n");
        }
        printf(
            "answer_select (%zu clients): no filter %.1f ns, latency %.1f ns: +%.1f ns a query\n",
            masks[k] + 1, ns[0], ns[1], ns[1] - ns[0]);
    }
    zone_free(z1);
    zone_free(z2);
    free(ctx);
    latency_map_free(m);
    free(addr);
    free(v4);
    return 0;
}
