/*
 * Unit tests for geo_filter "latency" (src/answer/steer_latency.c through answer_select()): the
 * fastest group that has a candidate is answered (ties keep both groups), health first, the
 * fallback to location for a client not in the map and for one whose entry names none of the
 * records' groups, no map at all, the ECS scope each implies, what ctx->info.steer and the
 * explain trace record, and no allocation while selecting.
 *
 * Locations come from the MaxMind DB fixture nested6.mmdb (tests/data/make_mmdb.pl, ctest
 * fixture geoip_mmdb): 1.2.3.0/24 = Brisbane, 81.2.69.128/26 = London.
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

#include "tern/answer/answer_trace.h"
#include "tern/answer/select.h"
#include "tern/common/err.h"
#include "tern/common/mem.h"
#include "tern/geo/geoip.h"
#include "tern/geo/latency_map.h"
#include "tern/zone/zone_builder.h"
#include "tern/zone/zone_json.h"
#include "geo_test_util.h"
#include "test_util.h"
#include "zone/zone_test_util.h"

static answer_ctx_t ctx;
static answer_view_t view;
static geoip_db_t *db;
static latency_map_t *map;
static zone_t *zone;
static const uint8_t *cur_rd;

typedef struct rr_spec {
    uint8_t last;
    const char *group; /* NULL: none */
    const char *loc;   /* address to locate through the DB, NULL = none */
} rr_spec_t;

/* Zone "l.test" with one steered A RRset at www (filter latency); returns its geo. */
static const zone_geo_t *build(const rr_spec_t *rr, size_t n, uint8_t count)
{
    uint8_t apex[256], www[256], ns[256], rd[512];
    wire_name(apex, "l.test");
    wire_name(www, "www.l.test");
    wire_name(ns, "ns.l.test");
    zone_builder_t *b = zone_builder_new(apex, "latency");
    assert_non_null(b);
    size_t l = strlen("ns.l.test") + 2;
    wire_name(rd, "ns.l.test");
    wire_name(rd + l, "h.l.test");
    l += strlen("h.l.test") + 2;
    memset(rd + l, 1, 20);
    l += 20;
    assert_int_equal(zone_builder_add(b, apex, 6, 1, 300, rd, (uint16_t)l, NULL, 0), 0);
    assert_int_equal(zone_builder_add(b, apex, 2, 1, 300, ns, strlen("ns.l.test") + 2, NULL, 0), 0);
    for (size_t i = 0; i < n; i++) {
        zone_geo_meta_t m = {0};
        if (rr[i].group) {
            m.group = latency_group_id(rr[i].group, strlen(rr[i].group));
            m.group_name = rr[i].group;
            m.group_len = strlen(rr[i].group);
        }
        if (rr[i].loc)
            geo_test_locate(db, rr[i].loc, &m);
        uint8_t addr[4] = {192, 0, 2, rr[i].last};
        assert_int_equal(zone_builder_add_geo(b, www, 1, 60, addr, 4, &m, NULL, 0), 0);
    }
    zone_geo_policy_t pol = {.filter = ZONE_GEO_FILTER_LATENCY, .count = count};
    assert_int_equal(zone_builder_set_policy(b, www, 1, &pol), 0);
    char err[256];
    zone_free(zone);
    assert_int_equal(zone_builder_finish(b, &zone, err, sizeof(err)), 0);
    uint8_t lc[256];
    wire_name(lc, "www.l.test");
    const zone_node_t *node = zone_find_node(zone, lc, strlen("www.l.test") + 2, dname_hash(lc));
    assert_non_null(node);
    cur_rd = zone_node_rrset(node, 1)->rdata;
    return &zone->geo[0];
}

/* Select for the client addr (text): the chosen last octets, sorted. */
static unsigned pick(const zone_geo_t *g, const char *addr, uint8_t *out)
{
    uint8_t a[16];
    int fam = strchr(addr, ':') ? AF_INET6 : AF_INET;
    assert_int_equal(inet_pton(fam, addr, a), 1);
    memset(&ctx.info.steer, 0, sizeof(ctx.info.steer));
    ctx.ent = NULL;
    answer_set_client(&ctx, fam, a);
    unsigned n = answer_select(&ctx, &view, g, ctx.offs);
    for (unsigned i = 0; i < n; i++)
        out[i] = cur_rd[ctx.offs[i] + 5];
    for (unsigned i = 1; i < n; i++) /* insertion sort: order is not what is tested */
        for (unsigned j = i; j > 0 && out[j - 1] > out[j]; j--) {
            uint8_t t = out[j];
            out[j] = out[j - 1];
            out[j - 1] = t;
        }
    return n;
}

static int setup(void **state)
{
    (void)state;
    char err[256];
    if (!(db = geo_test_fixture("nested6.mmdb")))
        return -1;
    const char *text = "198.51.100.0/24 fra1 23\n"
                       "198.51.100.0/24 ams1 12\n"
                       "198.51.100.0/24 lhr1 31\n"
                       "198.51.100.128/25 lhr1 5\n" /* more specific: lhr1 only */
                       "203.0.113.0/24 fra1 10\n"
                       "203.0.113.0/24 AMS1 10\n" /* a tie */
                       "192.0.2.0/24 sin1 3\n"    /* a group no record has */
                       "2001:db8::/32 ams1 7\n";
    if (latency_map_compile(text, strlen(text), "map", &map, NULL, err, sizeof(err)) < 0) {
        fprintf(stderr, "%s\n", err);
        return -1;
    }
    view.geoip.v4 = db;
    view.geoip.v6 = db;
    view.latency = map;
    view.gen = 1;
    answer_ctx_seed(&ctx, 42);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    zone_free(zone);
    geoip_close(db);
    latency_map_free(map);
    return 0;
}

static const rr_spec_t pops[] = {{.last = 1, .group = "fra1", .loc = "1.2.3.10"},
                                 {.last = 2, .group = "ams1"},
                                 {.last = 3, .group = "Ams1"}, /* the same group, any case */
                                 {.last = 4, .group = "lhr1", .loc = "81.2.69.130"},
                                 {.last = 5}}; /* no group */

static void test_matched(void **state)
{
    (void)state;
    const zone_geo_t *g = build(pops, 5, ZONE_GEO_COUNT_MULTI);
    uint8_t out[8];
    ctx.scope = 0;
    assert_int_equal(pick(g, "198.51.100.7", out), 2); /* ams1 at 12 ms: its two records */
    assert_int_equal(out[0], 2);
    assert_int_equal(out[1], 3);
    assert_int_equal(ctx.scope, 25); /* 198.51.100.0/25: the same entry */
    assert_true(ctx.info.steer.rules & ANSWER_STEER_LATENCY);
    assert_int_equal(ctx.info.steer.latency_how, ANSWER_LATENCY_MATCHED);
    assert_int_equal(ctx.info.steer.latency_ms, 12);
    assert_non_null(ctx.info.steer.latency_group);
    assert_int_equal(strcasecmp(ctx.info.steer.latency_group, "ams1"), 0);
    assert_int_equal(pick(g, "198.51.100.200", out), 1); /* the /25: lhr1 */
    assert_int_equal(out[0], 4);
    assert_int_equal(ctx.info.steer.latency_ms, 5);
    assert_string_equal(ctx.info.steer.latency_group, "lhr1");
    assert_int_equal(pick(g, "203.0.113.1", out), 3); /* fra1 and ams1 tie at 10 */
    assert_int_equal(out[0], 1);
    assert_int_equal(out[1], 2);
    assert_int_equal(out[2], 3);
    assert_int_equal(pick(g, "2001:db8::1", out), 2);
    assert_int_equal(ctx.scope, 32);
    /* count single: one of the fastest group */
    g = build(pops, 5, ZONE_GEO_COUNT_SINGLE);
    for (int i = 0; i < 20; i++) {
        assert_int_equal(pick(g, "198.51.100.7", out), 1);
        assert_true(out[0] == 2 || out[0] == 3);
    }
}

static void test_fallback(void **state)
{
    (void)state;
    const zone_geo_t *g = build(pops, 5, ZONE_GEO_COUNT_MULTI);
    uint8_t out[8];
    /* not in the map: location (Brisbane client: fra1's record is located there) */
    assert_int_equal(pick(g, "1.2.3.4", out), 1);
    assert_int_equal(out[0], 1);
    assert_int_equal(ctx.info.steer.latency_how, ANSWER_LATENCY_UNMAPPED);
    assert_null(ctx.info.steer.latency_group);
    assert_int_equal(ctx.scope, 24); /* the location's prefix; the map's gap is wider */
    /* London client, not mapped: lhr1's record */
    assert_int_equal(pick(g, "81.2.69.140", out), 1);
    assert_int_equal(out[0], 4);
    /* in the map, but only with a group no record has: location; 192.0.2.1 is not located, so
     * every candidate stays */
    assert_int_equal(pick(g, "192.0.2.1", out), 5);
    assert_int_equal(ctx.info.steer.latency_how, ANSWER_LATENCY_NOGROUP);
    assert_int_equal(ctx.scope, 24); /* the map range */
    /* no map configured: location */
    view.latency = NULL;
    assert_int_equal(pick(g, "198.51.100.7", out), 5);
    assert_int_equal(ctx.info.steer.latency_how, ANSWER_LATENCY_UNMAPPED);
    view.latency = map;
}

static void test_health_first(void **state)
{
    (void)state;
    /* the fastest group's only record has no candidate left (not in the set): the next */
    const rr_spec_t two[] = {{.last = 1, .group = "fra1"}, {.last = 4, .group = "lhr1"}};
    const zone_geo_t *g = build(two, 2, ZONE_GEO_COUNT_MULTI);
    uint8_t out[8];
    assert_int_equal(pick(g, "198.51.100.7", out), 1); /* ams1 absent: fra1 at 23 */
    assert_int_equal(out[0], 1);
    assert_int_equal(ctx.info.steer.latency_ms, 23);
}

static void test_trace(void **state)
{
    (void)state;
    const zone_geo_t *g = build(pops, 5, ZONE_GEO_COUNT_MULTI);
    answer_trace_t *t = calloc(1, sizeof(*t));
    assert_non_null(t);
    answer_trace_reset(t);
    ctx.trace = t;
    uint8_t out[8];
    assert_int_equal(pick(g, "198.51.100.7", out), 2);
    ctx.trace = NULL;
    assert_int_equal(t->nselects, 1);
    const answer_trace_select_t *s = &t->selects[0];
    assert_true(s->latency.ran);
    assert_true(s->latency.map);
    assert_int_equal(s->latency.how, ANSWER_LATENCY_MATCHED);
    assert_int_equal(s->latency.prefix, 25);
    assert_int_equal(s->latency.nentry, 3);
    assert_string_equal(s->latency.name[0], "ams1");
    assert_int_equal(s->latency.ms[0], 12);
    assert_string_equal(s->latency.name[1], "fra1");
    assert_string_equal(s->latency.name[2], "lhr1");
    assert_int_equal(s->latency.ms[2], 31);
    assert_int_equal(s->latency.chosen_ms, 12);
    assert_int_equal(s->dropped[0], ANSWER_SEL_FILTER1);
    assert_int_equal(s->dropped[1], ANSWER_SEL_KEPT);
    free(t);
}

static void test_no_alloc(void **state)
{
    (void)state;
    const zone_geo_t *g = build(pops, 5, ZONE_GEO_COUNT_SINGLE);
    const uint64_t *alloc, *dealloc;
    if (mem_thread_counters(&alloc, &dealloc) != 0)
        skip();
    uint8_t a[4] = {198, 51, 100, 7}, b[4] = {1, 2, 3, 4}, c[4] = {192, 0, 2, 9};
    const uint8_t *clients[] = {a, b, c};
    uint64_t a0 = *alloc;
    for (int i = 0; i < 999; i++) {
        ctx.ent = NULL;
        answer_set_client(&ctx, AF_INET, clients[i % 3]);
        (void)answer_select(&ctx, &view, g, ctx.offs);
    }
    assert_int_equal(*alloc, a0);
}

/* The redins JSON schema: "group" per record, geo_filter "latency", and their errors. */
static void test_json_schema(void **state)
{
    (void)state;
    static const char cfg[] = "{\"soa\": {\"ttl\": 3600, \"ns\": \"ns1.j.test.\", \"mbox\": "
                              "\"h.j.test\", \"refresh\": 1, \"retry\": 1, \"expire\": 1, "
                              "\"minttl\": 1, \"serial\": 1}}";
    static const char ok[] =
        "{\"a\": {\"filter\": {\"geo_filter\": \"latency\"}, \"records\": ["
        "{\"ip\": \"192.0.2.1\", \"group\": \"FRA1\"}, {\"ip\": \"192.0.2.2\"}]}}";
    char err[512];
    zone_json_t *zj = zone_json_new("j.test", "test", NULL, err, sizeof(err));
    assert_non_null(zj);
    assert_int_equal(zone_json_config(zj, cfg, strlen(cfg), err, sizeof(err)), 0);
    assert_int_equal(
        zone_json_label(zj, "@", "{\"ns\": {\"records\": [{\"host\": \"ns1.j.test.\"}]}}",
                        strlen("{\"ns\": {\"records\": [{\"host\": \"ns1.j.test.\"}]}}"), err,
                        sizeof(err)),
        0);
    if (zone_json_label(zj, "www", ok, strlen(ok), err, sizeof(err)) != 0)
        fail_msg("%s", err);
    zone_t *z = NULL;
    assert_int_equal(zone_json_finish(zj, &z, err, sizeof(err)), 0);
    assert_int_equal(z->geo_count, 1);
    const zone_geo_t *g = &z->geo[0];
    assert_int_equal(g->policy.filter, ZONE_GEO_FILTER_LATENCY);
    assert_int_equal(g->count, 2);
    assert_int_equal(g->rr[0].group, latency_group_id("fra1", 4));
    assert_string_equal(g->rr[0].group_name, "FRA1");
    assert_int_equal(g->rr[1].group, 0);
    assert_null(g->rr[1].group_name);
    zone_free(z);
    static const struct {
        const char *json, *want;
    } bad[] = {
        {"{\"a\": {\"records\": [{\"ip\": \"192.0.2.1\", \"group\": \"fra.1\"}]}}",
         "a.records[0].group: \"fra.1\" is not a group name (1..63 characters"},
        {"{\"a\": {\"records\": [{\"ip\": \"192.0.2.1\", \"group\": \"\"}]}}",
         "a.records[0].group: \"\" is not a group name"},
        {"{\"a\": {\"records\": [{\"ip\": \"192.0.2.1\", \"group\": 7}]}}", "a.records[0].group"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        zj = zone_json_new("j.test", "test", NULL, err, sizeof(err));
        assert_int_equal(zone_json_config(zj, cfg, strlen(cfg), err, sizeof(err)), 0);
        int rc = zone_json_label(zj, "www", bad[i].json, strlen(bad[i].json), err, sizeof(err));
        if (rc != TERN_EINVAL || !strstr(err, bad[i].want))
            fail_msg("%s: got %d \"%s\", want \"%s\"", bad[i].json, rc, err, bad[i].want);
        zone_json_free(zj);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_matched),      cmocka_unit_test(test_fallback),
        cmocka_unit_test(test_health_first), cmocka_unit_test(test_trace),
        cmocka_unit_test(test_no_alloc),     cmocka_unit_test(test_json_schema),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
