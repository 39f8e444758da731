/*
 * Unit tests for answer_select() (select.h): order none / rr / weighted, count single / multi,
 * the country, asn, asn+country and location filters with their fallbacks, the ECS scope they
 * imply, and no allocation while selecting.
 *
 * Steered RRsets are built with the zone builder. Country and location come from the MaxMind DB
 * fixtures tests/data/make_mmdb.pl writes (ctest fixture geoip_mmdb, directory in
 * TERN_GEOIP_DATA): nested6.mmdb has 1.2.3.0/24 = AU (Brisbane), 81.2.69.128/26 = GB (London),
 * 2a02:1234::/32 = SE (Stockholm). ASNs come from a table compiled here from a tiny CSV.
 * Statistical checks use a fixed seed, so they are deterministic; their bounds are still
 * several standard deviations wide, so a change of PRNG would not make them flaky.
 */
#include <arpa/inet.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <cmocka.h>

#include "tern/answer/select.h"
#include "tern/common/err.h"
#include "tern/common/mem.h"
#include "tern/geo/asn_compile.h"
#include "tern/geo/asn_table.h"
#include "tern/geo/geoip.h"
#include "tern/health/health.h"
#include "tern/zone/zone_builder.h"
#include "geo_test_util.h"
#include "test_util.h"
#include "zone/zone_test_util.h"

static answer_ctx_t ctx;
static answer_view_t view;
static geoip_db_t *db;
static asn_table_t *asns;
static char dir[256];

/* One RR of a steered set: the address's last octet, and its metadata. */
typedef struct rr_spec {
    uint8_t last;
    uint32_t weight;
    const char *cc;  /* comma-separated codes, "" entry allowed as ",": NULL = none */
    uint32_t asn[2]; /* up to 2, 0-terminated unless asn0 */
    bool asn0;       /* the list is exactly {0} */
    const char *loc; /* address to locate through the DB, NULL = none */
    health_ep_t *ep; /* its health check, NULL = none */
} rr_spec_t;

static zone_t *zone;
static const uint8_t *cur_rd; /* RDATA of the steered RRset build() made last */

/* Build zone "s.test" with one steered A RRset at www; returns its geo. */
static const zone_geo_t *build(const rr_spec_t *rr, size_t n, zone_geo_policy_t pol)
{
    uint8_t apex[256], www[256], ns[256], rd[512];
    wire_name(apex, "s.test");
    wire_name(www, "www.s.test");
    wire_name(ns, "ns.s.test");
    zone_builder_t *b = zone_builder_new(apex, "select");
    assert_non_null(b);
    /* SOA: ns hostmaster 1 2 3 4 5 */
    size_t l = 0;
    wire_name(rd, "ns.s.test");
    l = strlen("ns.s.test") + 2;
    wire_name(rd + l, "h.s.test");
    l += strlen("h.s.test") + 2;
    for (int i = 0; i < 5; i++) {
        uint32_t v = htonl((uint32_t)i + 1);
        memcpy(rd + l, &v, 4);
        l += 4;
    }
    assert_int_equal(zone_builder_add(b, apex, 6, 1, 300, rd, (uint16_t)l, NULL, 0), 0);
    assert_int_equal(zone_builder_add(b, apex, 2, 1, 300, ns, strlen("ns.s.test") + 2, NULL, 0), 0);
    for (size_t i = 0; i < n; i++) {
        uint16_t cc[8];
        size_t ncc = 0;
        if (rr[i].cc) {
            for (const char *p = rr[i].cc;; p++) {
                if (*p == ',' || *p == 0) {
                    cc[ncc++] = 0; /* "" */
                } else {
                    cc[ncc++] = ZONE_CC(p[0], p[1]);
                    p += 2;
                }
                if (*p == 0)
                    break;
            }
        }
        uint32_t al[2];
        size_t na = 0;
        if (rr[i].asn0)
            al[na++] = 0;
        for (int k = 0; k < 2 && rr[i].asn[k]; k++)
            al[na++] = rr[i].asn[k];
        zone_geo_meta_t m = {.weight = rr[i].weight,
                             .countries = cc,
                             .ncountries = ncc,
                             .asns = al,
                             .nasns = na,
                             .health = rr[i].ep};
        if (rr[i].loc)
            geo_test_locate(db, rr[i].loc, &m);
        uint8_t addr[4] = {192, 0, 2, rr[i].last};
        assert_int_equal(zone_builder_add_geo(b, www, 1, 60, addr, 4, &m, NULL, 0), 0);
    }
    assert_int_equal(zone_builder_set_policy(b, www, 1, &pol), 0);
    char err[256];
    zone_free(zone);
    assert_int_equal(zone_builder_finish(b, &zone, err, sizeof(err)), 0);
    assert_int_equal(zone->geo_count, 1);
    uint8_t lc[256];
    wire_name(lc, "www.s.test");
    size_t len = strlen("www.s.test") + 2;
    const zone_node_t *node = zone_find_node(zone, lc, len, dname_hash(lc));
    assert_non_null(node);
    cur_rd = zone_node_rrset(node, 1)->rdata;
    assert_ptr_equal(zone_rrset_geo(zone, zone_node_rrset(node, 1)), &zone->geo[0]);
    return &zone->geo[0];
}

/* Select for the client addr (text, v4 or v6; NULL = unknown) from the set whose RDATA is rd:
 * the chosen last octets. */
static unsigned pick_rd(const zone_geo_t *g, const uint8_t *rd, const char *addr, uint8_t *out)
{
    uint8_t a[16];
    int fam = 0;
    if (addr) {
        fam = strchr(addr, ':') ? AF_INET6 : AF_INET;
        assert_int_equal(inet_pton(fam, addr, a), 1);
    }
    answer_set_client(&ctx, fam, a);
    unsigned n = answer_select(&ctx, &view, g, ctx.offs);
    for (unsigned i = 0; i < n; i++)
        out[i] = rd[ctx.offs[i] + 5]; /* RDLENGTH (2) then 192.0.2.<last> */
    return n;
}

static unsigned pick(const zone_geo_t *g, const char *addr, uint8_t *out)
{
    return pick_rd(g, cur_rd, addr, out);
}

static int setup(void **state)
{
    (void)state;
    char err[256];
    if (!(db = geo_test_fixture("nested6.mmdb")))
        return -1;
    tu_mkdtemp(dir, sizeof(dir), "tern-select");
    char csv[300], tbl[300];
    snprintf(csv, sizeof(csv), "%s/asn.csv", dir);
    snprintf(tbl, sizeof(tbl), "%s/asn.bin", dir);
    FILE *f = fopen(csv, "w");
    if (!f)
        return -1;
    fputs("81.2.69.0,81.2.69.255,64500,\"London\"\n"
          "10.1.0.0,10.1.255.255,64501,\"Ten\"\n"
          "2a02:1234::,2a02:1234:ffff:ffff:ffff:ffff:ffff:ffff,64502,\"Stockholm\"\n",
          f);
    fclose(f);
    const char *in[] = {csv};
    if (asn_compile(in, 1, tbl, NULL, err, sizeof(err)) < 0 ||
        !(asns = asn_table_open(tbl, err, sizeof(err)))) {
        fprintf(stderr, "%s\n", err);
        return -1;
    }
    view.geoip.v4 = db;
    view.geoip.v6 = db;
    view.asn = asns;
    answer_ctx_seed(&ctx, 42);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    zone_free(zone);
    geoip_close(db);
    asn_table_close(asns);
    tu_rmtree(dir);
    return 0;
}

static void test_order_none(void **state)
{
    (void)state;
    const rr_spec_t rr[] = {{.last = 1}, {.last = 2}, {.last = 3}};
    uint8_t out[8];
    const zone_geo_t *g = build(rr, 3, (zone_geo_policy_t){.count = ZONE_GEO_COUNT_SINGLE});
    for (int i = 0; i < 10; i++) {
        assert_int_equal(pick(g, NULL, out), 1);
        assert_int_equal(out[0], 1);
    }
    assert_int_equal(ctx.scope, 0);
}

/* weighted single: frequencies follow the weights, zero weights never win */
static void test_weighted(void **state)
{
    (void)state;
    const rr_spec_t rr[] = {{.last = 1, .weight = 1},
                            {.last = 2, .weight = 0},
                            {.last = 3, .weight = 3},
                            {.last = 4, .weight = 6}};
    const zone_geo_t *g = build(
        rr, 4,
        (zone_geo_policy_t){.count = ZONE_GEO_COUNT_SINGLE, .order = ZONE_GEO_ORDER_WEIGHTED});
    unsigned seen[5] = {0};
    const unsigned n = 20000;
    uint8_t out[8];
    for (unsigned i = 0; i < n; i++) {
        assert_int_equal(pick(g, "1.2.3.4", out), 1);
        seen[out[0]]++;
    }
    assert_int_equal(seen[2], 0);
    /* expected 0.1, 0.3, 0.6 of 20000; sd <= 0.0035, bounds ~5 sd */
    assert_true(seen[1] > 0.082 * n && seen[1] < 0.118 * n);
    assert_true(seen[3] > 0.275 * n && seen[3] < 0.325 * n);
    assert_true(seen[4] > 0.575 * n && seen[4] < 0.625 * n);
    assert_int_equal(ctx.scope, 0); /* no geo filter: the answer does not depend on the client */

    /* multi weighted: all records, rotated to start at the chosen one */
    g = build(rr, 4, (zone_geo_policy_t){.order = ZONE_GEO_ORDER_WEIGHTED});
    assert_int_equal(pick(g, NULL, out), 4);
    for (unsigned i = 1; i < 4; i++)
        assert_int_equal(out[i], out[i - 1] % 4 + 1);

    /* all weights zero: uniform */
    const rr_spec_t z[] = {{.last = 1}, {.last = 2}};
    g = build(
        z, 2,
        (zone_geo_policy_t){.count = ZONE_GEO_COUNT_SINGLE, .order = ZONE_GEO_ORDER_WEIGHTED});
    memset(seen, 0, sizeof(seen));
    for (unsigned i = 0; i < 4000; i++) {
        assert_int_equal(pick(g, NULL, out), 1);
        seen[out[0]]++;
    }
    assert_true(seen[1] > 1800 && seen[2] > 1800);
}

/* rr multi: every answer is the whole set rotated; every start occurs about equally */
static void test_rr_rotation(void **state)
{
    (void)state;
    const rr_spec_t rr[] = {{.last = 1}, {.last = 2}, {.last = 3}, {.last = 4}};
    const zone_geo_t *g = build(rr, 4, (zone_geo_policy_t){.order = ZONE_GEO_ORDER_RR});
    unsigned first[5] = {0};
    uint8_t out[8];
    for (unsigned i = 0; i < 4000; i++) {
        assert_int_equal(pick(g, NULL, out), 4);
        for (unsigned k = 1; k < 4; k++)
            assert_int_equal(out[k], out[k - 1] % 4 + 1);
        first[out[0]]++;
    }
    for (unsigned k = 1; k <= 4; k++)
        assert_true(first[k] > 850 && first[k] < 1150); /* 1000 expected, sd 27 */
}

static void test_country(void **state)
{
    (void)state;
    const rr_spec_t rr[] = {{.last = 1, .cc = "AU"},
                            {.last = 2, .cc = "GB,IE"},
                            {.last = 3},
                            {.last = 4, .cc = "FR,"}}; /* FR or "" */
    const zone_geo_t *g = build(rr, 4, (zone_geo_policy_t){.filter = ZONE_GEO_FILTER_COUNTRY});
    uint8_t out[8];
    assert_int_equal(pick(g, "1.2.3.4", out), 1);
    assert_int_equal(out[0], 1);
    assert_int_equal(ctx.scope, 24);
    assert_int_equal(pick(g, "81.2.69.130", out), 1);
    assert_int_equal(out[0], 2);
    assert_int_equal(ctx.scope, 26);
    /* unknown country: the records listing none or "" */
    assert_int_equal(pick(g, "10.1.2.3", out), 2);
    assert_int_equal(out[0], 3);
    assert_int_equal(out[1], 4);
    assert_int_equal(pick(g, NULL, out), 2);
    assert_int_equal(ctx.scope, 0);
    /* SE client, no fallback records at all: everything */
    const rr_spec_t nf[] = {{.last = 1, .cc = "AU"}, {.last = 2, .cc = "GB"}};
    g = build(nf, 2, (zone_geo_policy_t){.filter = ZONE_GEO_FILTER_COUNTRY});
    assert_int_equal(pick(g, "2a02:1234::1", out), 2);
    assert_int_equal(ctx.scope, 32);
}

static void test_asn(void **state)
{
    (void)state;
    const rr_spec_t rr[] = {
        {.last = 1, .asn = {64500}}, {.last = 2, .asn = {7, 64501}}, {.last = 3, .asn0 = true}};
    const zone_geo_t *g = build(rr, 3, (zone_geo_policy_t){.filter = ZONE_GEO_FILTER_ASN});
    uint8_t out[8];
    assert_int_equal(pick(g, "81.2.69.1", out), 1);
    assert_int_equal(out[0], 1);
    assert_int_equal(ctx.scope, 24);
    assert_int_equal(pick(g, "10.1.200.1", out), 1);
    assert_int_equal(out[0], 2);
    assert_int_equal(ctx.scope, 16);
    assert_int_equal(pick(g, "1.2.3.4", out), 1); /* no ASN: the ASN-0 record */
    assert_int_equal(out[0], 3);
    assert_int_equal(ctx.scope, 5); /* 1.2.3.4 in the gap 0.0.0.0-10.0.255.255: 0.0.0.0/5 */
    assert_int_equal(pick(g, "2a02:1234:1::1", out), 1); /* AS64502: nobody lists it */
    assert_int_equal(out[0], 3);
    assert_int_equal(ctx.scope, 32);

    /* asn+country: ASN first, then country among those */
    const rr_spec_t both[] = {{.last = 1, .asn = {64500}, .cc = "GB"},
                              {.last = 2, .asn = {64500}, .cc = "AU"},
                              {.last = 3, .asn = {64501}, .cc = "GB"}};
    g = build(both, 3, (zone_geo_policy_t){.filter = ZONE_GEO_FILTER_ASN_COUNTRY});
    assert_int_equal(pick(g, "81.2.69.130", out), 1);
    assert_int_equal(out[0], 1);
    assert_int_equal(ctx.scope, 26);              /* the longer of ASN /24 and country /26 */
    assert_int_equal(pick(g, "1.2.3.4", out), 1); /* no ASN: all; then AU */
    assert_int_equal(out[0], 2);
}

static void test_location(void **state)
{
    (void)state;
    const rr_spec_t rr[] = {{.last = 1, .loc = "1.2.3.10"},     /* Brisbane */
                            {.last = 2},                        /* nowhere */
                            {.last = 3, .loc = "81.2.69.130"},  /* London */
                            {.last = 4, .loc = "81.2.69.140"}}; /* London too: a tie */
    const zone_geo_t *g = build(rr, 4, (zone_geo_policy_t){.filter = ZONE_GEO_FILTER_LOCATION});
    uint8_t out[8];
    assert_int_equal(pick(g, "1.2.3.4", out), 1);
    assert_int_equal(out[0], 1);
    assert_int_equal(pick(g, "2a02:1234::5", out), 2); /* Stockholm: London's two */
    assert_int_equal(out[0], 3);
    assert_int_equal(out[1], 4);
    assert_int_equal(ctx.scope, 32);
    assert_int_equal(pick(g, "10.1.2.3", out), 4); /* unlocated client: all */
    /* no record located: all */
    const rr_spec_t none[] = {{.last = 1}, {.last = 2}};
    g = build(
        none, 2,
        (zone_geo_policy_t){.filter = ZONE_GEO_FILTER_LOCATION, .count = ZONE_GEO_COUNT_SINGLE});
    assert_int_equal(pick(g, "1.2.3.4", out), 1);
    assert_int_equal(out[0], 1);
}

/* The per-worker lookup cache: a hit answers like the lookup it saved, and a new view generation
 * (a reload that swapped a database) never sees what the old one looked up. */
static void test_cache_generation(void **state)
{
    (void)state;
    const rr_spec_t rr[] = {{.last = 1, .cc = "AU"}, {.last = 2}};
    const zone_geo_t *g = build(rr, 2, (zone_geo_policy_t){.filter = ZONE_GEO_FILTER_COUNTRY});
    uint8_t out[8];
    for (int i = 0; i < 3; i++) { /* the first fills the entry, the others hit it */
        assert_int_equal(pick(g, "1.2.3.4", out), 1);
        assert_int_equal(out[0], 1);
        assert_int_equal(ctx.scope, 24);
    }
    answer_view_t saved = view;
    view.geoip.v4 = view.geoip.v6 = NULL; /* "reloaded" without a database */
    view.gen = saved.gen + 1;
    assert_int_equal(pick(g, "1.2.3.4", out), 1);
    assert_int_equal(out[0], 2);
    assert_int_equal(ctx.scope, 0);
    view = saved;
    view.gen = saved.gen + 2;
    assert_int_equal(pick(g, "1.2.3.4", out), 1);
    assert_int_equal(out[0], 1);
    /* many addresses share the 4096 slots: every one still gets its own answer */
    for (unsigned i = 0; i < 20000; i++) {
        char a[32];
        snprintf(a, sizeof(a), "%u.%u.%u.%u", 1 + i % 3, (i / 3) % 256, (i / 768) % 256, 7);
        bool au = i % 3 == 0 && (i / 3) % 256 == 2 && (i / 768) % 256 == 3;
        assert_int_equal(pick(g, a, out), 1);
        assert_int_equal(out[0], au ? 1 : 2);
    }
    view = saved;
}

/* Selecting allocates nothing (the per-worker ctx holds all scratch). */
/* An endpoint checking 192.0.2.<last>:80 (rank "unknown" until an override says otherwise). */
static health_ep_t *endpoint(health_registry_t *r, uint8_t last)
{
    health_spec_t s;
    health_spec_init(&s);
    uint8_t a[4] = {192, 0, 2, last};
    memcpy(s.addr, a, 4);
    health_ep_t *e = health_intern(r, &s);
    assert_non_null(e);
    return e;
}

static void force(health_registry_t *r, uint8_t last, health_override_t st)
{
    uint8_t a[4] = {192, 0, 2, last};
    assert_int_equal(health_set_override(r, 4, a, 0, st), 1);
}

/* Health first, then the geo filter on what is left (redins' Filter()); fail open counted. */
static void test_health(void **state)
{
    (void)state;
    health_registry_t *r = health_registry_new();
    health_ep_t *e1 = endpoint(r, 1), *e2 = endpoint(r, 2), *e3 = endpoint(r, 3);
    const rr_spec_t rr[] = {{.last = 1, .cc = "AU", .ep = e1},
                            {.last = 2, .cc = "GB", .ep = e2},
                            {.last = 3, .ep = e3}};
    const zone_geo_t *g = build(rr, 3, (zone_geo_policy_t){.filter = ZONE_GEO_FILTER_COUNTRY});
    assert_true(g->health);
    assert_int_equal(zone->health_count, 3);
    health_ep_release(e1); /* the zone holds its own references */
    health_ep_release(e2);
    health_ep_release(e3);
    uint8_t out[8];
    const char *gb = "81.2.69.130";
    /* all unknown: the same rank, geo as usual */
    ctx.info.health_fail_open = 0;
    assert_int_equal(pick(g, gb, out), 1);
    assert_int_equal(out[0], 2);
    /* the GB record is down: the GB client falls back to the record with no country */
    force(r, 2, HEALTH_FORCE_DOWN);
    assert_int_equal(pick(g, gb, out), 1);
    assert_int_equal(out[0], 3);
    /* that one too: only AU is healthy, and the country filter keeps all it is given */
    force(r, 3, HEALTH_FORCE_DOWN);
    assert_int_equal(pick(g, gb, out), 1);
    assert_int_equal(out[0], 1);
    assert_int_equal(ctx.info.health_fail_open, 0);
    /* every record down: all of them are candidates again (fail open), and it is counted */
    force(r, 1, HEALTH_FORCE_DOWN);
    assert_int_equal(pick(g, gb, out), 1);
    assert_int_equal(out[0], 2);
    assert_int_equal(ctx.info.health_fail_open, 1);
    /* a record fully up beats the ones still being checked */
    force(r, 1, HEALTH_FORCE_UP);
    force(r, 2, HEALTH_AUTO);
    force(r, 3, HEALTH_AUTO);
    assert_int_equal(pick(g, gb, out), 1);
    assert_int_equal(out[0], 1);
    force(r, 1, HEALTH_AUTO);
    assert_int_equal(pick(g, gb, out), 1);
    assert_int_equal(out[0], 2);
    zone_free(zone);
    zone = NULL;
    health_registry_free(r); /* every endpoint went with the zone */
}

static void test_no_alloc(void **state)
{
    (void)state;
    const uint64_t *alloc, *dealloc;
    if (mem_thread_counters(&alloc, &dealloc) != 0)
        skip();
    /* health-checked records too: one relaxed load each, nothing allocated */
    health_registry_t *hr = health_registry_new();
    health_ep_t *e1 = endpoint(hr, 1), *e2 = endpoint(hr, 2);
    const rr_spec_t rr[] = {{.last = 1, .cc = "AU", .asn = {64500}, .loc = "1.2.3.10", .ep = e1},
                            {.last = 2, .cc = "GB", .loc = "81.2.69.130", .weight = 2, .ep = e2}};
    const zone_geo_t *g[4];
    const uint8_t *rd[4];
    zone_t *keep[4];
    const uint8_t filters[] = {ZONE_GEO_FILTER_COUNTRY, ZONE_GEO_FILTER_ASN,
                               ZONE_GEO_FILTER_ASN_COUNTRY, ZONE_GEO_FILTER_LOCATION};
    for (int i = 0; i < 4; i++) {
        g[i] = build(rr, 2,
                     (zone_geo_policy_t){.filter = filters[i], .order = ZONE_GEO_ORDER_WEIGHTED});
        keep[i] = zone;
        rd[i] = cur_rd;
        zone = NULL; /* build() frees the previous one */
    }
    const char *clients[] = {"1.2.3.4", "81.2.69.130", "2a02:1234::1", "10.1.1.1", NULL};
    uint8_t out[8];
    uint64_t a0 = *alloc;
    for (int r = 0; r < 100; r++)
        for (int i = 0; i < 4; i++)
            for (size_t c = 0; c < TERN_ARRAY_SIZE(clients); c++)
                (void)pick_rd(g[i], rd[i], clients[c], out);
    assert_int_equal(*alloc, a0);
    for (int i = 0; i < 4; i++)
        zone_free(keep[i]);
    health_ep_release(e1);
    health_ep_release(e2);
    health_registry_free(hr);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_order_none),
        cmocka_unit_test(test_weighted),
        cmocka_unit_test(test_rr_rotation),
        cmocka_unit_test(test_country),
        cmocka_unit_test(test_asn),
        cmocka_unit_test(test_location),
        cmocka_unit_test(test_cache_generation),
        cmocka_unit_test(test_health),
        cmocka_unit_test(test_no_alloc),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
