/*
 * Unit tests for the explain trace (answer_trace.h): what each stage records as it decides —
 * the lookup path (CNAME, DNAME, wildcard, referral, NXDOMAIN, loops, leaving the zones, no zone),
 * the selection of a steered RRset (each record's fate, the filter's fallback, health fail
 * open, the records given) — and that a trace changes nothing in the response: the same bytes
 * with and without it.
 *
 * Resolution runs over the fixture zones of tests/data/answer; steering over a redins JSON zone
 * written here, located through the MaxMind DB fixture (TERN_GEOIP_DATA: nested6.mmdb has
 * 81.2.69.128/26 = GB, 1.2.3.0/24 = AU).
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

#include "answer_test_util.h"
#include "tern/answer/answer.h"
#include "tern/answer/answer_trace.h"
#include "tern/answer/select.h"
#include "tern/geo/geoip.h"
#include "tern/health/health.h"
#include "tern/wire/dname.h"
#include "tern/zone/zone_json.h"
#include "test_util.h"

static answer_ctx_t ctx;
static answer_trace_t trace;
static answer_view_t view;
static uint8_t out[65535];
static uint8_t qbuf[512];

/* A query for name/type with EDNS, and an ECS option when ecs (IPv4 text) is given with src. */
static size_t mkquery(const char *name, uint16_t type, const char *ecs, uint8_t src)
{
    memset(qbuf, 0, 12);
    qbuf[5] = 1;  /* QDCOUNT */
    qbuf[11] = 1; /* ARCOUNT */
    const char *why;
    int n = dname_from_str(name, strlen(name), false, qbuf + 12, &why);
    assert_true(n > 0);
    size_t p = 12 + (size_t)n;
    qbuf[p++] = (uint8_t)(type >> 8);
    qbuf[p++] = (uint8_t)type;
    qbuf[p++] = 0;
    qbuf[p++] = 1;
    uint8_t opt[] = {0, 0, 41, 4, 0xd0, 0, 0, 0, 0, 0, 0};
    size_t alen = ((size_t)src + 7) / 8;
    if (ecs)
        opt[10] = (uint8_t)(8 + alen);
    memcpy(qbuf + p, opt, sizeof(opt));
    p += sizeof(opt);
    if (ecs) {
        uint8_t a[4];
        assert_int_equal(inet_pton(AF_INET, ecs, a), 1);
        uint8_t o[] = {0, 8, 0, (uint8_t)(4 + alen), 0, 1, src, 0};
        memcpy(qbuf + p, o, sizeof(o));
        p += sizeof(o);
        memcpy(qbuf + p, a, alen);
        p += alen;
    }
    return p;
}

/* Answer name/type from 127.0.0.1 with the trace on (traced) or off; the response length. */
static size_t ask(const char *name, uint16_t type, const char *ecs, uint8_t src, bool traced)
{
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(5353)};
    sa.sin_addr.s_addr = htonl(0x7f000001);
    size_t len = mkquery(name, type, ecs, src);
    answer_trace_reset(&trace);
    ctx.trace = traced ? &trace : NULL;
    size_t n =
        answer_query(&view, &ctx, (const struct sockaddr *)&sa, qbuf, len, out, 1232, ANSWER_UDP);
    ctx.trace = NULL;
    return n;
}

static void assert_name(const uint8_t *wire, const char *text)
{
    char buf[300];
    assert_true(dname_to_str(wire, buf, sizeof(buf)) > 0);
    assert_string_equal(buf, text);
}

/* The kinds of the recorded steps, as a string of letters (L lookup, C cname, D dname, A aname,
 * R referral, X nxdomain, N nodata, Y answer, S stop), for compact expectations. */
static const char *kinds(void)
{
    static char s[ANSWER_TRACE_STEPS + 1];
    static const char letters[] = "LCDARXNYS";
    unsigned i = 0;
    for (; i < trace.nsteps; i++)
        s[i] = letters[trace.steps[i].kind];
    s[i] = '\0';
    return s;
}

static int setup_fixture(void **state)
{
    (void)state;
    if (atu_setup(state) != 0)
        return -1;
    view.table = table;
    view.cfg.edns_max_udp = 1232;
    view.gen = 1;
    answer_ctx_seed(&ctx, 7);
    return 0;
}

static void test_path(void **state)
{
    (void)state;
    assert_true(ask("alias.example.test", WIRE_T_A, NULL, 0, true) > 0);
    assert_string_equal(kinds(), "LCLY");
    assert_int_equal(trace.steps[0].detail, ZONE_LOOKUP_EXACT);
    assert_name(trace.steps[1].name, "alias.example.test.");
    assert_name(trace.steps[1].target, "www.example.test.");
    assert_int_equal(trace.steps[3].type, WIRE_T_A);
    assert_name(trace.steps[3].zone->apex, "example.test.");

    assert_true(ask("nope.example.test", WIRE_T_A, NULL, 0, true) > 0);
    assert_string_equal(kinds(), "LX");
    assert_int_equal(trace.steps[0].detail, ZONE_LOOKUP_NXDOMAIN);

    assert_true(ask("www.example.test", WIRE_T_TXT, NULL, 0, true) > 0);
    assert_string_equal(kinds(), "LN");
    assert_int_equal(trace.steps[1].type, WIRE_T_TXT);

    assert_true(ask("host.sub.example.test", WIRE_T_A, NULL, 0, true) > 0);
    assert_string_equal(kinds(), "LR");
    assert_int_equal(trace.steps[0].flag, 1); /* below a delegation */
    assert_name(trace.steps[1].target, "sub.example.test.");

    assert_true(ask("x.dn.example.test", WIRE_T_A, NULL, 0, true) > 0);
    assert_int_equal(trace.steps[0].detail, ZONE_LOOKUP_DNAME);
    assert_int_equal(trace.steps[1].kind, ANSWER_STEP_DNAME);
    assert_name(trace.steps[1].target2, "dn.example.test.");
    assert_name(trace.steps[1].target, "x.tgt.example.test.");

    assert_true(ask("a.wild.example.test", WIRE_T_A, NULL, 0, true) > 0);
    assert_string_equal(kinds(), "LY");
    assert_int_equal(trace.steps[1].flag, 1);
    assert_name(trace.steps[1].target, "*.wild.example.test.");

    assert_true(ask("loop1.example.test", WIRE_T_A, NULL, 0, true) > 0);
    assert_string_equal(kinds(), "LCLCLS");
    assert_int_equal(trace.steps[5].detail, ANSWER_STOP_LOOP);

    assert_true(ask("c1.example.test", WIRE_T_A, NULL, 0, true) > 0);
    assert_int_equal(trace.steps[trace.nsteps - 1].kind, ANSWER_STEP_STOP);
    assert_int_equal(trace.steps[trace.nsteps - 1].detail, ANSWER_STOP_LIMIT);

    assert_true(ask("out.example.test", WIRE_T_A, NULL, 0, true) > 0);
    assert_string_equal(kinds(), "LCS");
    assert_int_equal(trace.steps[2].detail, ANSWER_STOP_LEFT);
    assert_name(trace.steps[2].name, "www.example.net.");

    assert_true(ask("www.example.net", WIRE_T_A, NULL, 0, true) > 0);
    assert_string_equal(kinds(), "S");
    assert_int_equal(trace.steps[0].detail, ANSWER_STOP_NOZONE);
    assert_false(trace.lost);
    assert_false(trace.limits); /* no limits in this view: the policy stage did not run */
}

/* A trace records; it decides nothing: the same response, byte for byte. */
static void test_same_bytes(void **state)
{
    (void)state;
    static const char *const names[] = {"alias.example.test",    "nope.example.test",
                                        "host.sub.example.test", "x.dn.example.test",
                                        "loop1.example.test",    "mail.example.test"};
    static uint8_t plain[65535];
    for (size_t i = 0; i < TERN_ARRAY_SIZE(names); i++) {
        size_t a = ask(names[i], WIRE_T_A, NULL, 0, false);
        memcpy(plain, out, a);
        assert_int_equal(trace.nsteps, 0); /* off: nothing recorded */
        size_t b = ask(names[i], WIRE_T_A, NULL, 0, true);
        assert_int_equal(a, b);
        assert_memory_equal(plain, out, a);
        assert_true(trace.nsteps > 0);
    }
}

/* ---- steering ---- */

static geoip_db_t *db;
static health_registry_t *reg;
static zone_table_t *steer_table;
static char dir[256];

static const char *const STEER_JSON =
    "{\"config\": {\"soa\": {\"ttl\": 300, \"ns\": \"ns1.s.test.\", \"MBox\": \"h.s.test.\","
    " \"refresh\": 3600, \"retry\": 600, \"expire\": 86400, \"minttl\": 60, \"serial\": 7}},"
    " \"records\": {"
    "  \"@\": {\"ns\": {\"records\": [{\"host\": \"ns1.s.test.\"}]}},"
    "  \"ns1\": {\"a\": {\"records\": [{\"ip\": \"192.0.2.53\"}]}},"
    "  \"cc\": {\"a\": {\"ttl\": 60, \"filter\": {\"count\": \"multi\", \"order\": \"none\","
    "   \"geo_filter\": \"country\"}, \"records\": [{\"ip\": \"192.0.2.1\", \"country\": \"AU\"},"
    "   {\"ip\": \"192.0.2.2\", \"country\": \"GB\"}, {\"ip\": \"192.0.2.3\"}]}},"
    "  \"hc\": {\"a\": {\"ttl\": 60, \"filter\": {\"count\": \"multi\", \"order\": \"none\","
    "   \"geo_filter\": \"country\"}, \"records\": [{\"ip\": \"192.0.2.11\", \"country\": \"GB\"},"
    "   {\"ip\": \"192.0.2.12\"}], \"health_check\": {\"enable\": true, \"port\": 80}}},"
    "  \"wrr\": {\"a\": {\"ttl\": 60, \"filter\": {\"count\": \"single\", \"order\": "
    "   \"weighted\"}, \"records\": [{\"ip\": \"192.0.2.21\", \"weight\": 1},"
    "   {\"ip\": \"192.0.2.22\", \"weight\": 0}, {\"ip\": \"192.0.2.23\", \"weight\": 3}]}}"
    "}}";

static int setup_steer(void **state)
{
    (void)state;
    const char *data = getenv("TERN_GEOIP_DATA");
    char path[512], err[256];
    snprintf(path, sizeof(path), "%s/nested6.mmdb", data ? data : ".");
    if (!data || !(db = geoip_open(path, err, sizeof(err)))) {
        fprintf(stderr, "TERN_GEOIP_DATA: %s\n", data ? err : "not set (run through ctest)");
        return -1;
    }
    tu_mkdtemp(dir, sizeof(dir), "tern-trace");
    tu_write_file(dir, "s.json", STEER_JSON);
    snprintf(path, sizeof(path), "%s/s.json", dir);
    reg = health_registry_new();
    zone_json_opts_t opts = {.health = reg};
    zone_t *z = NULL;
    steer_table = zone_table_new();
    if (!reg || !steer_table ||
        zone_json_load_file("s.test", path, &opts, &z, err, sizeof(err)) != 0) {
        fprintf(stderr, "s.json: %s\n", err);
        return -1;
    }
    if (zone_table_add(steer_table, z) != 0 || zone_table_freeze(steer_table) != 0)
        return -1;
    view.table = steer_table;
    view.geoip.v4 = db;
    view.geoip.v6 = db;
    view.cfg.edns_max_udp = 1232;
    view.gen = 2;
    answer_ctx_seed(&ctx, 7);
    return 0;
}

static int teardown_steer(void **state)
{
    (void)state;
    zone_table_free(steer_table);
    health_registry_free(reg);
    geoip_close(db);
    tu_rmtree(dir);
    return 0;
}

static void test_select_country(void **state)
{
    (void)state;
    /* a GB client: the GB record matched, the others dropped by the filter */
    assert_true(ask("cc.s.test", WIRE_T_A, "81.2.69.160", 27, true) > 0);
    assert_int_equal(trace.nselects, 1);
    const answer_trace_select_t *s = &trace.selects[0];
    assert_int_equal(s->count, 3);
    assert_int_equal(s->nfilters, 1);
    assert_int_equal(s->filter_key[0], GEOIP_CC('G', 'B'));
    assert_int_equal(s->filter_end[0], ANSWER_FILTER_MATCHED);
    assert_int_equal(s->dropped[0], ANSWER_SEL_FILTER1);
    assert_int_equal(s->dropped[1], ANSWER_SEL_KEPT);
    assert_int_equal(s->dropped[2], ANSWER_SEL_FILTER1);
    assert_int_equal(s->nout, 1);
    assert_int_equal(s->out[0], 1);
    assert_int_equal(s->left[1], 1);
    assert_true(s->client_known);
    assert_true(s->geo.have_geo);
    assert_true(s->geo.geo.prefix > 0);
    assert_name(s->owner, "cc.s.test.");
    assert_ptr_equal(s->zone, zone_table_find(steer_table, &ctx.query.name, &(unsigned){0}));
    /* a client from nowhere the DB knows: the record listing no country */
    assert_true(ask("cc.s.test", WIRE_T_A, "198.18.0.0", 16, true) > 0);
    s = &trace.selects[0];
    assert_int_equal(s->filter_end[0], ANSWER_FILTER_UNLISTED);
    assert_int_equal(s->out[0], 2);
}

static void test_select_weighted(void **state)
{
    (void)state;
    for (int i = 0; i < 20; i++) {
        assert_true(ask("wrr.s.test", WIRE_T_A, NULL, 0, true) > 0);
        const answer_trace_select_t *s = &trace.selects[0];
        assert_int_equal(s->nout, 1);
        assert_true(s->out[0] == 0 || s->out[0] == 2); /* never the zero weight */
        for (unsigned k = 0; k < 3; k++)
            assert_int_equal(s->dropped[k], k == s->out[0] ? ANSWER_SEL_KEPT : ANSWER_SEL_ORDER);
        assert_false(s->client_known); /* no filter asked where the client is */
    }
}

static void force(const char *addr, health_override_t st)
{
    uint8_t a[4];
    assert_int_equal(inet_pton(AF_INET, addr, a), 1);
    assert_true(health_set_override(reg, 4, a, 0, st) >= 1);
}

static void test_select_health(void **state)
{
    (void)state;
    /* the GB record down: dropped by health, the GB client falls back */
    force("192.0.2.11", HEALTH_FORCE_DOWN);
    force("192.0.2.12", HEALTH_FORCE_UP);
    assert_true(ask("hc.s.test", WIRE_T_A, "81.2.69.160", 27, true) > 0);
    const answer_trace_select_t *s = &trace.selects[0];
    assert_int_equal(s->rank[0], HEALTH_RANK_DOWN);
    assert_int_equal(s->rank[1], HEALTH_RANK_UP);
    assert_int_equal(s->dropped[0], ANSWER_SEL_HEALTH);
    assert_false(s->fail_open);
    assert_int_equal(s->left[0], 1);
    assert_int_equal(s->out[0], 1);
    /* both down: fail open, the filter runs over all, the GB client gets its record */
    force("192.0.2.12", HEALTH_FORCE_DOWN);
    assert_true(ask("hc.s.test", WIRE_T_A, "81.2.69.160", 27, true) > 0);
    s = &trace.selects[0];
    assert_true(s->fail_open);
    assert_int_equal(s->left[0], 2);
    assert_int_equal(s->dropped[0], ANSWER_SEL_KEPT);
    assert_int_equal(s->out[0], 0);
    force("192.0.2.11", HEALTH_AUTO);
    force("192.0.2.12", HEALTH_AUTO);
}

static void test_select_same_bytes(void **state)
{
    (void)state;
    static uint8_t plain[65535];
    static const char *const names[] = {"cc.s.test", "hc.s.test"};
    for (size_t i = 0; i < TERN_ARRAY_SIZE(names); i++) {
        size_t a = ask(names[i], WIRE_T_A, "1.2.3.0", 24, false);
        memcpy(plain, out, a);
        size_t b = ask(names[i], WIRE_T_A, "1.2.3.0", 24, true);
        assert_int_equal(a, b);
        assert_memory_equal(plain, out, a);
    }
}

int main(void)
{
    const struct CMUnitTest paths[] = {
        cmocka_unit_test(test_path),
        cmocka_unit_test(test_same_bytes),
    };
    const struct CMUnitTest steer[] = {
        cmocka_unit_test(test_select_country),
        cmocka_unit_test(test_select_weighted),
        cmocka_unit_test(test_select_health),
        cmocka_unit_test(test_select_same_bytes),
    };
    int rc = cmocka_run_group_tests(paths, setup_fixture, atu_teardown);
    return rc | cmocka_run_group_tests(steer, setup_steer, teardown_steer);
}
