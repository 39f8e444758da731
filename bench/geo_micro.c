/*
 * geo_micro.c — what a geo-steered answer costs over a plain one, per query, without the network.
 *
 * Loads a redins-schema JSON zone (zone_json.h) with its records located through a real MaxMind
 * DB, maps a real ASN table, and times answer_query() for each case over a pool of client
 * subnets sent as EDNS Client Subnet options (so every query makes its own MaxMind/ASN lookup on
 * a different path through the trees, as real traffic does). The plain case carries the same ECS
 * option, so the difference between a case and "plain1" (a one-record plain answer, the size
 * of the steered single answers) is the geo work alone. RRsets with a health_check get endpoints
 * (health checking on): their cases add the health filter's cost. Best of ROUNDS.
 *
 * Usage: geo_micro ZONE.json ORIGIN GEOIP_V4.mmdb GEOIP_V6.mmdb|- ASN_TABLE ITERATIONS CLIENTS
 * CASE... CASE is LABEL=NAME (type A); the first case is the baseline. CLIENTS random IPv4 /24s
 * (drawn from 1.0.0.0-223.255.255.255 with a fixed seed) are cycled through: 4096 fit the
 * per-worker lookup cache (ANSWER_GEO_CACHE), so after the first round every lookup is a cache hit
 * — what a server sees from a few thousand busy resolvers; 1048576 do not, so every query walks the
 *   MaxMind tree and the ASN table — the cost without the cache.
 */
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
#include "tern/common/err.h"
#include "tern/geo/asn_table.h"
#include "tern/geo/geoip.h"
#include "tern/health/health.h"
#include "tern/zone/zone_json.h"
#include "tern/zone/zone_table.h"

#define ROUNDS      5
#define MAX_CASES   16
#define MAX_CLIENTS (1u << 20)

typedef struct bench_case {
    const char *label;
    uint8_t pkt[320];
    size_t len; /* the client's three address bytes are the last three */
} bench_case_t;

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* A query for name/A with an OPT carrying ECS client/24. */
static size_t build(uint8_t *p, const char *name, uint32_t client)
{
    static const uint8_t hdr[12] = {0x12, 0x34, 0x00, 0x00, 0, 1, 0, 0, 0, 0, 0, 1};
    memcpy(p, hdr, sizeof hdr);
    size_t o = sizeof hdr;
    for (const char *s = name; *s;) {
        const char *dot = strchr(s, '.');
        size_t n = dot ? (size_t)(dot - s) : strlen(s);
        p[o++] = (uint8_t)n;
        memcpy(p + o, s, n);
        o += n;
        s += n + (dot ? 1 : 0);
    }
    p[o++] = 0;
    static const uint8_t q[4] = {0, 1, 0, 1};
    memcpy(p + o, q, 4);
    o += 4;
    /* OPT: root, type 41, class 1232, ttl 0, rdlen 11: ECS family 1, /24, scope 0, 3 bytes */
    static const uint8_t opt[11] = {0, 0, 41, 0x04, 0xd0, 0, 0, 0, 0, 0, 11};
    memcpy(p + o, opt, sizeof opt);
    o += sizeof opt;
    const uint8_t ecs[8] = {0, 8, 0, 7, 0, 1, 24, 0};
    memcpy(p + o, ecs, sizeof ecs);
    o += sizeof ecs;
    p[o++] = (uint8_t)(client >> 24);
    p[o++] = (uint8_t)(client >> 16);
    p[o++] = (uint8_t)(client >> 8);
    return o;
}

static bool locate(void *ctx, int family, const uint8_t *addr, double *lat, double *lon)
{
    geoip_result_t r;
    geoip_set_lookup(ctx, family == 4 ? AF_INET : AF_INET6, addr, &r);
    *lat = r.lat;
    *lon = r.lon;
    return r.has_location;
}

int main(int argc, char **argv)
{
    if (argc < 9 || argc - 8 > MAX_CASES) {
        fprintf(stderr, "usage: geo_micro ZONE.json ORIGIN V4.mmdb V6.mmdb|- ASN_TABLE ITERATIONS "
                        "CLIENTS LABEL=NAME...\n");
        return 2;
    }
    unsigned nclients = (unsigned)strtoul(argv[7], NULL, 10);
    if (nclients == 0 || nclients > MAX_CLIENTS || (nclients & (nclients - 1))) {
        fprintf(stderr, "geo_micro: CLIENTS must be a power of two up to %u\n", MAX_CLIENTS);
        return 2;
    }
    char err[512] = "";
    geoip_db_t *v4 = geoip_open(argv[3], err, sizeof err);
    geoip_db_t *v6 = strcmp(argv[4], "-") ? geoip_open(argv[4], err, sizeof err) : NULL;
    asn_table_t *asn = asn_table_open(argv[5], err, sizeof err);
    if (!v4 || (strcmp(argv[4], "-") && !v6) || !asn) {
        fprintf(stderr, "geo_micro: %s\n", err);
        return 1;
    }
    long iters = strtol(argv[6], NULL, 10);
    answer_view_t view = {
        .cfg = {.edns_max_udp = ANSWER_EDNS_DEFAULT}, .asn = asn, .geoip = {.v4 = v4, .v6 = v6}};
    /* health checking on, as a ternd with a health: block: RRsets with a health_check get
     * endpoints (no checker runs here; each endpoint's rank is read per record all the same) */
    health_registry_t *health = health_registry_new();
    zone_json_opts_t jo = {.locate = locate, .locate_ctx = &view.geoip, .health = health};
    zone_t *z = NULL;
    if (zone_json_load_file(argv[2], argv[1], &jo, &z, err, sizeof err) < 0) {
        fprintf(stderr, "geo_micro: %s\n", err);
        return 1;
    }
    zone_table_t *t = zone_table_new();
    if (!t || zone_table_add(t, z) < 0 || zone_table_freeze(t) < 0)
        return 1;
    view.table = t;

    static bench_case_t cases[MAX_CASES];
    int ncases = 0;
    uint64_t seed = 0x9E3779B97F4A7C15ull;
    static uint32_t clients[MAX_CLIENTS];
    for (unsigned i = 0; i < nclients; i++) {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        uint32_t a = (uint32_t)(seed >> 16);
        a = 0x01000000u + a % (0xE0000000u - 0x01000000u); /* 1.0.0.0 .. 223.255.255.255 */
        clients[i] = a & 0xFFFFFF00u;
    }
    for (int i = 8; i < argc; i++) {
        char *eq = strchr(argv[i], '=');
        if (!eq)
            return 2;
        *eq = '\0';
        bench_case_t *c = &cases[ncases++];
        c->label = argv[i];
        c->len = build(c->pkt, eq + 1, clients[0]);
    }

    static answer_ctx_t ctx;
    static uint8_t out[4096];
    answer_ctx_seed(&ctx, 1);
    printf("# %s: %zu RRs; %ld iterations x %d rounds, %u client /24s (ECS), cache %u entries\n",
           argv[2], z->rr_count, iters, ROUNDS, nclients, ANSWER_GEO_CACHE);
    printf("%-12s %8s %6s %6s\n", "case", "ns/query", "+ns", "an");
    double plain = 0;
    for (int i = 0; i < ncases; i++) {
        bench_case_t *c = &cases[i];
        size_t n = answer_query(&view, &ctx, NULL, c->pkt, c->len, out, sizeof out, ANSWER_UDP);
        if (n < 12 || (out[3] & 0xF) != 0) {
            fprintf(stderr, "geo_micro: %s: bad response\n", c->label);
            return 1;
        }
        unsigned an = (unsigned)out[6] << 8 | out[7];
        double best = 1e18;
        for (int r = 0; r < ROUNDS; r++) {
            uint64_t t0 = now_ns();
            size_t sum = 0;
            uint8_t *a = c->pkt + c->len - 3;
            for (long k = 0; k < iters; k++) {
                uint32_t cl = clients[(unsigned)k & (nclients - 1)];
                a[0] = (uint8_t)(cl >> 24); /* the same three stores in every case */
                a[1] = (uint8_t)(cl >> 16);
                a[2] = (uint8_t)(cl >> 8);
                sum += answer_query(&view, &ctx, NULL, c->pkt, c->len, out, sizeof out, ANSWER_UDP);
            }
            double ns = (double)(now_ns() - t0) / (double)iters;
            if (sum == 0)
                return 1;
            if (ns < best)
                best = ns;
        }
        if (i == 0)
            plain = best;
        printf("%-12s %8.1f %+6.1f %6u\n", c->label, best, best - plain, an);
    }
    zone_table_free(t);
    health_registry_free(health);
    geoip_close(v4);
    geoip_close(v6);
    asn_table_close(asn);
    return 0;
}
