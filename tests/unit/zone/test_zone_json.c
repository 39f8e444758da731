/*
 * test_zone_json.c — redins JSON zones: every type's RDATA against the same records read from an
 * RFC 1035 master file, the decoding rules redins inherits from Go (case-insensitive keys,
 * string-or-array, number-or-array), the geo metadata and policies reaching the built zone,
 * per-label errors naming zone, label and field, the SOA and apex NS rules, and the file loader.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "tern/common/err.h"
#include "tern/zone/zone_file.h"
#include "tern/zone/zone_json.h"
#include "test_util.h"
#include "zone_test_util.h"

#define ORIGIN "geo.example.test"

#define CONFIG                                                                                     \
    "{\"soa\": {\"ttl\": 3600, \"ns\": \"ns1.geo.example.test.\", "                                \
    "\"mbox\": \"hostmaster.geo.example.test\", \"refresh\": 7200, \"retry\": 900, "               \
    "\"expire\": 1209600, \"minttl\": 300, \"serial\": 2024010101}}"

/* ---- helpers ----------------------------------------------------------------------------- */

static zone_json_t *start(const zone_json_opts_t *opts, const char *config)
{
    char err[512];
    zone_json_t *zj = zone_json_new(ORIGIN, "test", opts, err, sizeof(err));
    if (!zj)
        fail_msg("new: %s", err);
    if (config && zone_json_config(zj, config, strlen(config), err, sizeof(err)) != 0)
        fail_msg("config: %s", err);
    return zj;
}

static void label_ok(zone_json_t *zj, const char *label, const char *json)
{
    char err[512];
    if (zone_json_label(zj, label, json, strlen(json), err, sizeof(err)) != 0)
        fail_msg("label %s: %s", label, err);
}

static zone_t *finish(zone_json_t *zj)
{
    char err[512];
    zone_t *z = NULL;
    if (zone_json_finish(zj, &z, err, sizeof(err)) != 0)
        fail_msg("finish: %s", err);
    return z;
}

/* A zone of one label besides an apex with NS. */
static zone_t *one_label(const zone_json_opts_t *opts, const char *label, const char *json)
{
    zone_json_t *zj = start(opts, CONFIG);
    label_ok(zj, "@", "{\"ns\": {\"records\": [{\"host\": \"ns1.geo.example.test\"}]}}");
    label_ok(zj, label, json);
    return finish(zj);
}

/* The error of one bad label (return code checked against rc). */
static void label_err(const char *json, int rc, const char *want)
{
    char err[512];
    zone_json_t *zj = start(NULL, CONFIG);
    int got = zone_json_label(zj, "bad", json, strlen(json), err, sizeof(err));
    if (got != rc || !strstr(err, want))
        fail_msg("%s\n  got %d \"%s\"\n  want %d \"%s\"", json, got, err, rc, want);
    zone_json_free(zj);
}

static const zone_rrset_t *rrset(const zone_t *z, const char *name, uint16_t type)
{
    dname_view_t v;
    view_of(&v, name);
    const zone_node_t *n = zone_find_node(z, v.lc, v.len, v.hash[0]);
    return n ? zone_node_rrset(n, type) : NULL;
}

static const zone_geo_t *geo(const zone_t *z, const char *name, uint16_t type)
{
    const zone_rrset_t *s = rrset(z, name, type);
    assert_non_null(s);
    return zone_rrset_geo(z, s);
}

/* ---- RDATA of every type ----------------------------------------------------------------- */

static const char *const json_all[][2] = {
    {"@", "{\"ns\": {\"ttl\": 86400, \"records\": [{\"host\": \"ns1.geo.example.test.\"}, "
          "{\"host\": \"ns2.other.test\"}]},"
          " \"mx\": {\"records\": [{\"host\": \"mail.geo.example.test\", \"preference\": 10},"
          " {\"host\": \".\", \"preference\": 0}]},"
          " \"txt\": {\"ttl\": 60, \"records\": [{\"text\": \"v=spf1 -all\"}, {\"text\": \"\"},"
          " {\"text\": \"say \\\"hi\\\"; \\\\ ok\"}]},"
          " \"caa\": {\"records\": [{\"flag\": 0, \"tag\": \"issue\", \"value\": \"ca.test\"},"
          " {\"flag\": 128, \"tag\": \"tbs\", \"value\": \"\"}]},"
          " \"a\": {\"records\": [{\"ip\": \"192.0.2.1\"}, {\"ip\": \"198.51.100.7\"}]},"
          " \"aaaa\": {\"records\": [{\"ip\": \"2001:db8::1\"}]}}"},
    {"www", "{\"cname\": {\"ttl\": 120, \"host\": \"web.geo.example.test\"}}"},
    {"web",
     "{\"a\": {\"records\": [{\"ip\": \"192.0.2.80\"}]},"
     " \"aaaa\": {\"records\": [{\"ip\": \"2001:db8::80\"}, {\"ip\": \"::ffff:1.2.3.4\"}]}}"},
    {"_sip._tcp", "{\"srv\": {\"records\": [{\"target\": \"sip.geo.example.test\", \"priority\": "
                  "10, \"weight\": 20, \"port\": 5060}, {\"target\": \".\", \"priority\": 0, "
                  "\"weight\": 0, \"port\": 0}]}}"},
    {"ptr.a.b", "{\"ptr\": {\"domain\": \"web.geo.example.test.\"}}"},
    {"_443._tcp.web",
     "{\"tlsa\": {\"records\": [{\"usage\": 3, \"selector\": 1, \"matching_type\": 1, "
     "\"certificate\": \"0C72ac70b745ac19998811b131d662c9ac69dbdbe7cb23e5b514b56664c5d3d6\"}]}}"},
    {"sub", "{\"ns\": {\"records\": [{\"host\": \"ns.sub.geo.example.test\"}, {\"host\": \"\"}]}}"},
    {"ns.sub", "{\"a\": {\"records\": [{\"ip\": \"203.0.113.53\"}]}}"},
    {"*.wild", "{\"txt\": {\"records\": [{\"text\": \"wild\"}]}}"},
};

static const char zone_all[] = "$ORIGIN geo.example.test.\n"
                               "@ 3600 IN SOA ns1 hostmaster 2024010101 7200 900 1209600 300\n"
                               "@ 86400 IN NS ns1\n"
                               "@ 86400 IN NS ns2.other.test.\n"
                               "@ 300 IN MX 10 mail\n"
                               "@ 300 IN MX 0 .\n"
                               "@ 60 IN TXT \"v=spf1 -all\"\n"
                               "@ 60 IN TXT \"say \\\"hi\\\"; \\\\ ok\"\n"
                               "@ 300 IN CAA 0 issue \"ca.test\"\n"
                               "@ 300 IN CAA 128 tbs \"\"\n"
                               "@ 300 IN A 192.0.2.1\n"
                               "@ 300 IN A 198.51.100.7\n"
                               "@ 300 IN AAAA 2001:db8::1\n"
                               "www 120 IN CNAME web\n"
                               "web 300 IN A 192.0.2.80\n"
                               "web 300 IN AAAA 2001:db8::80\n"
                               "web 300 IN AAAA ::ffff:1.2.3.4\n"
                               "_sip._tcp 300 IN SRV 10 20 5060 sip\n"
                               "_sip._tcp 300 IN SRV 0 0 0 .\n"
                               "ptr.a.b 300 IN PTR web\n"
                               "_443._tcp.web 300 IN TLSA 3 1 1 "
                               "0c72ac70b745ac19998811b131d662c9ac69dbdbe7cb23e5b514b56664c5d3d6\n"
                               "sub 300 IN NS ns.sub\n"
                               "ns.sub 300 IN A 203.0.113.53\n"
                               "*.wild 300 IN TXT wild\n";

static void test_types_match_master_file(void **state)
{
    char dir[64], path[128], err[512];
    tu_mkdtemp(dir, sizeof(dir), "tern-json");
    tu_write_file(dir, "all.zone", zone_all);
    snprintf(path, sizeof(path), "%s/all.zone", dir);
    zone_t *want = NULL;
    if (zone_file_load(ORIGIN, path, &want, err, sizeof(err)) != 0)
        fail_msg("zone file: %s", err);

    zone_json_t *zj = start(NULL, CONFIG);
    for (size_t i = 0; i < sizeof(json_all) / sizeof(json_all[0]); i++)
        label_ok(zj, json_all[i][0], json_all[i][1]);
    zone_t *got = finish(zj);

    static const struct {
        const char *name;
        uint16_t type;
    } sets[] = {
        {ORIGIN, 6},
        {ORIGIN, 2},
        {ORIGIN, 15},
        {ORIGIN, 16},
        {ORIGIN, 257},
        {ORIGIN, 1},
        {ORIGIN, 28},
        {"www." ORIGIN, 5},
        {"web." ORIGIN, 1},
        {"web." ORIGIN, 28},
        {"_sip._tcp." ORIGIN, 33},
        {"ptr.a.b." ORIGIN, 12},
        {"_443._tcp.web." ORIGIN, 52},
        {"sub." ORIGIN, 2},
        {"ns.sub." ORIGIN, 1},
        {"*.wild." ORIGIN, 16},
    };
    for (size_t i = 0; i < sizeof(sets) / sizeof(sets[0]); i++) {
        const zone_rrset_t *a = rrset(want, sets[i].name, sets[i].type);
        const zone_rrset_t *b = rrset(got, sets[i].name, sets[i].type);
        if (!a || !b)
            fail_msg("%s type %u: %s missing", sets[i].name, sets[i].type, a ? "json" : "file");
        if (a->count != b->count || a->ttl != b->ttl || a->rdata_len != b->rdata_len ||
            memcmp(a->rdata, b->rdata, a->rdata_len) != 0)
            fail_msg("%s type %u differs: count %u/%u ttl %u/%u len %u/%u", sets[i].name,
                     sets[i].type, a->count, b->count, a->ttl, b->ttl, a->rdata_len, b->rdata_len);
    }
    assert_int_equal(got->node_count, want->node_count);
    assert_int_equal(got->rr_count, want->rr_count);
    assert_int_equal(got->serial, 2024010101);
    /* no filter anywhere: every A/AAAA RRset is plain */
    assert_null(geo(got, ORIGIN, 1));
    assert_null(geo(got, "web." ORIGIN, 28));
    zone_free(want);
    zone_free(got);
    tu_rmtree(dir);
}

static void test_rdata_bytes(void **state)
{
    zone_t *z =
        one_label(NULL, "x",
                  "{\"caa\": {\"records\": [{\"flag\": 128, \"tag\": \"issue\", "
                  "\"value\": \"ca.test; x=1\"}]},"
                  " \"tlsa\": {\"records\": [{\"usage\": 2, \"selector\": 0, "
                  "\"matching_type\": 2, \"certificate\": \"00fF10\"}]},"
                  " \"srv\": {\"records\": [{\"target\": \"t.test\", \"priority\": 1, "
                  "\"weight\": 258, \"port\": 65535}]},"
                  " \"mx\": {\"records\": [{\"host\": \"m.test.\", \"preference\": 513}]}}");
    const zone_rrset_t *s = rrset(z, "x." ORIGIN, 257);
    assert_non_null(s);
    static const uint8_t caa[] = "\x00\x13\x80\x05issueca.test; x=1";
    assert_int_equal(s->rdata_len, sizeof(caa) - 1);
    assert_memory_equal(s->rdata, caa, sizeof(caa) - 1);

    s = rrset(z, "x." ORIGIN, 52);
    static const uint8_t tlsa[] = {0, 6, 2, 0, 2, 0x00, 0xff, 0x10};
    assert_int_equal(s->rdata_len, sizeof(tlsa));
    assert_memory_equal(s->rdata, tlsa, sizeof(tlsa));

    s = rrset(z, "x." ORIGIN, 33);
    static const uint8_t srv[] = "\x00\x0e\x00\x01\x01\x02\xff\xff\x01t\x04test";
    assert_int_equal(s->rdata_len, sizeof(srv)); /* the literal's NUL is the root label */
    assert_memory_equal(s->rdata, srv, sizeof(srv));

    s = rrset(z, "x." ORIGIN, 15);
    static const uint8_t mx[] = "\x00\x0a\x02\x01\x01m\x04test";
    assert_int_equal(s->rdata_len, sizeof(mx));
    assert_memory_equal(s->rdata, mx, sizeof(mx));
    zone_free(z);
}

static void test_txt_split_255(void **state)
{
    char text[601], json[1024];
    for (int i = 0; i < 600; i++)
        text[i] = (char)('a' + i % 26);
    text[600] = 0;
    snprintf(json, sizeof(json),
             "{\"txt\": {\"records\": [{\"text\": \"%s\"}, {\"text\": \"%.255s\"}]}}", text, text);
    zone_t *z = one_label(NULL, "t", json);
    const zone_rrset_t *s = rrset(z, "t." ORIGIN, 16);
    assert_non_null(s);
    assert_int_equal(s->count, 2);
    const uint8_t *r = s->rdata;
    /* 600 bytes: 255 + 255 + 90 */
    assert_int_equal(r[0] << 8 | r[1], 603);
    assert_int_equal(r[2], 255);
    assert_memory_equal(r + 3, text, 255);
    assert_int_equal(r[258], 255);
    assert_memory_equal(r + 259, text + 255, 255);
    assert_int_equal(r[514], 90);
    assert_memory_equal(r + 515, text + 510, 90);
    /* exactly 255: one string, no empty one after it */
    r += 2 + 603;
    assert_int_equal(r[0] << 8 | r[1], 256);
    assert_int_equal(r[2], 255);
    assert_int_equal(s->rdata_len, 2 + 603 + 2 + 256);
    zone_free(z);
}

/* ---- decoding ---------------------------------------------------------------------------- */

static void test_keys_case_insensitive(void **state)
{
    const char *cfg = "{\"SOA\": {\"NS\": \"ns1.geo.example.test\", \"MBox\": \"h.example.test\","
                      " \"Serial\": 5, \"TTL\": 77, \"MinTTL\": 10}, \"DNSSEC\": false}";
    zone_json_t *zj = start(NULL, cfg);
    label_ok(zj, "@", "{\"NS\": {\"Records\": [{\"Host\": \"ns1.geo.example.test\"}]}}");
    label_ok(zj, "x",
             "{\"A\": {\"TTL\": 60, \"Records\": [{\"IP\": \"192.0.2.1\", \"Country\": \"us\","
             " \"ASN\": 7, \"Weight\": 3}], \"Filter\": {\"Geo_Filter\": \"country\","
             " \"COUNT\": \"single\"}, \"Health_Check\": {\"Enable\": true}},"
             " \"Txt\": {\"records\": [{\"TEXT\": \"hi\"}]},"
             " \"unknown\": [1, 2, 3], \"a\": {\"ttl\": 61, \"records\": [{\"ip\": \"192.0.2.2\"}],"
             " \"filter\": {\"geo_filter\": \"asn\"}}}");
    zone_t *z = finish(zj);
    assert_int_equal(z->serial, 5);
    assert_int_equal(z->soa->ttl, 77);
    assert_int_equal(z->neg_soa->ttl, 10);
    /* "A" and "a" are the same key; the last one wins, as in Go */
    const zone_rrset_t *s = rrset(z, "x." ORIGIN, 1);
    assert_non_null(s);
    assert_int_equal(s->count, 1);
    assert_int_equal(s->ttl, 61);
    assert_memory_equal(s->rdata, "\x00\x04\xc0\x00\x02\x02", 6);
    const zone_geo_t *g = zone_rrset_geo(z, s);
    assert_non_null(g);
    assert_int_equal(g->policy.filter, ZONE_GEO_FILTER_ASN);
    assert_non_null(rrset(z, "x." ORIGIN, 16));
    zone_free(z);

    /* the same, one key each */
    z = one_label(NULL, "y",
                  "{\"AAAA\": {\"TTL\": 60, \"Records\": [{\"IP\": \"2001:db8::1\", \"Country\":"
                  " \"us\", \"ASN\": 7, \"WEIGHT\": 3}], \"Filter\": {\"Geo_Filter\": \"country\","
                  " \"COUNT\": \"single\", \"Order\": \"rr\"}}}");
    s = rrset(z, "y." ORIGIN, 28);
    assert_int_equal(s->ttl, 60);
    g = zone_rrset_geo(z, s);
    assert_non_null(g);
    assert_int_equal(g->policy.filter, ZONE_GEO_FILTER_COUNTRY);
    assert_int_equal(g->policy.count, ZONE_GEO_COUNT_SINGLE);
    assert_int_equal(g->policy.order, ZONE_GEO_ORDER_RR);
    assert_int_equal(g->rr[0].weight, 3);
    assert_int_equal(g->rr[0].ncountries, 1);
    assert_int_equal(g->rr[0].countries[0], ZONE_CC('U', 'S'));
    assert_int_equal(g->rr[0].nasns, 1);
    assert_int_equal(g->rr[0].asns[0], 7);
    zone_free(z);
}

static void test_geo_meta(void **state)
{
    zone_t *z = one_label(
        NULL, "geo",
        "{\"a\": {\"filter\": {\"count\": \"single\", \"order\": \"weighted\","
        " \"geo_filter\": \"asn+country\"}, \"records\": ["
        " {\"ip\": \"192.0.2.1\", \"country\": \"us\", \"asn\": [1, 4294967295], \"weight\": 10},"
        " {\"ip\": \"192.0.2.2\", \"country\": [\"DE\", \"fr\", \"\"], \"asn\": 0, \"weight\": 0},"
        " {\"ip\": \"\"},"
        " {\"ip\": \"192.0.2.3\", \"country\": [], \"asn\": []},"
        " {\"country\": \"IR\"},"
        " {\"ip\": \"192.0.2.4\", \"country\": \"\", \"weight\": 4294967295}]}}");
    const zone_rrset_t *s = rrset(z, "geo." ORIGIN, 1);
    assert_non_null(s);
    assert_int_equal(s->count, 4); /* the two without an address are skipped, as redins does */
    const zone_geo_t *g = zone_rrset_geo(z, s);
    assert_non_null(g);
    assert_int_equal(g->policy.filter, ZONE_GEO_FILTER_ASN_COUNTRY);
    assert_int_equal(g->policy.count, ZONE_GEO_COUNT_SINGLE);
    assert_int_equal(g->policy.order, ZONE_GEO_ORDER_WEIGHTED);
    assert_int_equal(g->count, 4);
    for (unsigned i = 0; i < 4; i++) {
        assert_int_equal(g->rr[i].off, 6 * i);
        assert_int_equal(s->rdata[g->rr[i].off + 5], i + 1); /* 192.0.2.<i+1> */
        assert_int_equal(g->rr[i].has_loc, 0);
    }
    assert_int_equal(g->rr[0].weight, 10);
    assert_int_equal(g->rr[0].ncountries, 1);
    assert_int_equal(g->rr[0].countries[0], ZONE_CC('U', 'S'));
    assert_int_equal(g->rr[0].nasns, 2);
    assert_int_equal(g->rr[0].asns[0], 1);
    assert_int_equal(g->rr[0].asns[1], UINT32_MAX);

    assert_int_equal(g->rr[1].weight, 0);
    assert_int_equal(g->rr[1].ncountries, 3);
    assert_int_equal(g->rr[1].countries[0], ZONE_CC('D', 'E'));
    assert_int_equal(g->rr[1].countries[1], ZONE_CC('F', 'R'));
    assert_int_equal(g->rr[1].countries[2], 0);
    assert_int_equal(g->rr[1].nasns, 1);
    assert_int_equal(g->rr[1].asns[0], 0);

    assert_int_equal(g->rr[2].ncountries, 0);
    assert_int_equal(g->rr[2].nasns, 0);
    assert_int_equal(g->rr[2].weight, 0);

    assert_int_equal(g->rr[3].ncountries, 1);
    assert_int_equal(g->rr[3].countries[0], 0);
    assert_int_equal(g->rr[3].weight, UINT32_MAX);
    zone_free(z);
}

static void test_filter_policies(void **state)
{
    static const struct {
        const char *filter;
        int plain; /* 1: served plain (no geo) */
        zone_geo_policy_t want;
    } ok[] = {
        {"", 1, {0}},
        {", \"filter\": {}", 1, {0}},
        {", \"filter\": null", 1, {0}},
        {", \"filter\": {\"count\": \"\", \"order\": \"\", \"geo_filter\": \"\"}", 1, {0}},
        {", \"filter\": {\"count\": \"multi\", \"order\": \"none\", \"geo_filter\": \"none\"}",
         1,
         {0}},
        {", \"filter\": {\"count\": \"single\"}", 0, {.count = ZONE_GEO_COUNT_SINGLE}},
        {", \"filter\": {\"order\": \"weighted\"}", 0, {.order = ZONE_GEO_ORDER_WEIGHTED}},
        {", \"filter\": {\"order\": \"rr\"}", 0, {.order = ZONE_GEO_ORDER_RR}},
        {", \"filter\": {\"geo_filter\": \"country\"}", 0, {.filter = ZONE_GEO_FILTER_COUNTRY}},
        {", \"filter\": {\"geo_filter\": \"location\"}", 0, {.filter = ZONE_GEO_FILTER_LOCATION}},
        {", \"filter\": {\"geo_filter\": \"asn\"}", 0, {.filter = ZONE_GEO_FILTER_ASN}},
        {", \"filter\": {\"geo_filter\": \"asn+country\"}",
         0,
         {.filter = ZONE_GEO_FILTER_ASN_COUNTRY}},
        {", \"filter\": {\"count\": \"single\", \"order\": \"rr\", \"geo_filter\": \"location\","
         " \"extra\": 1}",
         0,
         {.count = ZONE_GEO_COUNT_SINGLE,
          .order = ZONE_GEO_ORDER_RR,
          .filter = ZONE_GEO_FILTER_LOCATION}},
    };
    for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
        char json[512];
        snprintf(json, sizeof(json),
                 "{\"a\": {\"records\": [{\"ip\": \"192.0.2.1\"}, {\"ip\": \"192.0.2.2\"}]%s}}",
                 ok[i].filter);
        zone_t *z = one_label(NULL, "f", json);
        const zone_geo_t *g = geo(z, "f." ORIGIN, 1);
        if (ok[i].plain) {
            if (g)
                fail_msg("%s: expected a plain RRset", ok[i].filter);
        } else {
            if (!g)
                fail_msg("%s: expected a steered RRset", ok[i].filter);
            assert_int_equal(g->policy.filter, ok[i].want.filter);
            assert_int_equal(g->policy.count, ok[i].want.count);
            assert_int_equal(g->policy.order, ok[i].want.order);
            assert_int_equal(g->count, 2);
        }
        zone_free(z);
    }

    label_err(
        "{\"a\": {\"records\": [{\"ip\": \"192.0.2.1\"}], \"filter\": {\"count\": \"many\"}}}",
        TERN_EINVAL, "label bad: a.filter.count: \"many\" is not one of multi or single");
    label_err("{\"a\": {\"records\": [], \"filter\": {\"order\": \"random\"}}}", TERN_EINVAL,
              "a.filter.order: \"random\" is not one of none, weighted or rr");
    label_err("{\"aaaa\": {\"filter\": {\"geo_filter\": \"city\"}}}", TERN_EINVAL,
              "aaaa.filter.geo_filter: \"city\" is not one of none, country, location, asn or "
              "asn+country");
    /* values are exact, as redins compares them */
    label_err("{\"a\": {\"filter\": {\"count\": \"Single\"}}}", TERN_EINVAL,
              "a.filter.count: \"Single\" is not one of");
    label_err("{\"a\": {\"filter\": {\"count\": 1}}}", TERN_EINVAL,
              "a.filter.count: expected a string, got a number");
    label_err("{\"a\": {\"filter\": \"country\"}}", TERN_EINVAL,
              "a.filter: expected an object, got a string");
}

struct located {
    unsigned calls;
    int family[8];
    uint8_t addr[8][16];
};

/* 192.0.2.1 is at 0,0; 2001:db8::1 at the north pole; 192.0.2.2 at 0,90; others unknown. */
static bool locate(void *ctx, int family, const uint8_t *addr, double *lat, double *lon)
{
    struct located *l = ctx;
    assert_true(l->calls < 8);
    l->family[l->calls] = family;
    memcpy(l->addr[l->calls], addr, family == 4 ? 4 : 16);
    l->calls++;
    if (family == 4 && memcmp(addr, "\xc0\x00\x02\x01", 4) == 0) {
        *lat = 0;
        *lon = 0;
        return true;
    }
    if (family == 4 && memcmp(addr, "\xc0\x00\x02\x02", 4) == 0) {
        *lat = 0;
        *lon = 90;
        return true;
    }
    if (family == 6 && memcmp(addr, "\x20\x01\x0d\xb8", 4) == 0 && addr[15] == 1) {
        *lat = 90;
        *lon = 0;
        return true;
    }
    return false;
}

static void assert_vec(const float v[3], double x, double y, double zz)
{
    if (!(v[0] > x - 1e-5 && v[0] < x + 1e-5 && v[1] > y - 1e-5 && v[1] < y + 1e-5 &&
          v[2] > zz - 1e-5 && v[2] < zz + 1e-5))
        fail_msg("loc %g,%g,%g want %g,%g,%g", v[0], v[1], v[2], x, y, zz);
}

static void test_locate(void **state)
{
    struct located l = {0};
    zone_json_opts_t opts = {.locate = locate, .locate_ctx = &l};
    zone_t *z =
        one_label(&opts, "near",
                  "{\"a\": {\"filter\": {\"geo_filter\": \"location\"}, \"records\": [{\"ip\": "
                  "\"192.0.2.1\"}, {\"ip\": \"192.0.2.2\"}, {\"ip\": \"192.0.2.9\"}]},"
                  " \"aaaa\": {\"filter\": {\"geo_filter\": \"location\", \"count\": \"single\"},"
                  " \"records\": [{\"ip\": \"2001:db8::1\"}, {\"ip\": \"2001:db8::2\"}]}}");
    assert_int_equal(l.calls, 5);
    assert_int_equal(l.family[0], 4);
    assert_memory_equal(l.addr[0], "\xc0\x00\x02\x01", 4);
    assert_int_equal(l.family[2], 4);
    assert_memory_equal(l.addr[2], "\xc0\x00\x02\x09", 4);
    assert_int_equal(l.family[3], 6);
    assert_memory_equal(l.addr[3], "\x20\x01\x0d\xb8\0\0\0\0\0\0\0\0\0\0\0\x01", 16);
    assert_int_equal(l.family[4], 6);
    assert_memory_equal(l.addr[4], "\x20\x01\x0d\xb8\0\0\0\0\0\0\0\0\0\0\0\x02", 16);

    const zone_geo_t *g = geo(z, "near." ORIGIN, 1);
    assert_non_null(g);
    assert_int_equal(g->policy.filter, ZONE_GEO_FILTER_LOCATION);
    assert_int_equal(g->rr[0].has_loc, 1);
    assert_vec(g->rr[0].loc, 1, 0, 0);
    assert_int_equal(g->rr[1].has_loc, 1);
    assert_vec(g->rr[1].loc, 0, 1, 0);
    assert_int_equal(g->rr[2].has_loc, 0);
    g = geo(z, "near." ORIGIN, 28);
    assert_non_null(g);
    assert_int_equal(g->policy.count, ZONE_GEO_COUNT_SINGLE);
    assert_int_equal(g->rr[0].has_loc, 1);
    assert_vec(g->rr[0].loc, 0, 0, 1);
    assert_int_equal(g->rr[1].has_loc, 0);
    zone_free(z);
}

/* ---- errors ------------------------------------------------------------------------------ */

static void test_bad_label_skipped(void **state)
{
    char err[512];
    zone_json_t *zj = start(NULL, CONFIG);
    label_ok(zj, "good", "{\"a\": {\"records\": [{\"ip\": \"192.0.2.1\"}]}}");
    const char *bad = "{\"txt\": {\"records\": [{\"text\": \"kept?\"}]},"
                      " \"a\": {\"records\": [{\"ip\": \"192.0.2.1\"}, {\"ip\": \"192.0.2.2\"},"
                      " {\"ip\": \"1.2.3\"}]}}";
    assert_int_equal(zone_json_label(zj, "www", bad, strlen(bad), err, sizeof(err)), TERN_EINVAL);
    assert_string_equal(err, "test: zone geo.example.test label www: a.records[2].ip: \"1.2.3\" "
                             "is not an IPv4 address");
    const char *syntax = "{\"a\": {\"records\": [}";
    assert_int_equal(zone_json_label(zj, "broken", syntax, strlen(syntax), err, sizeof(err)),
                     TERN_ESYNTAX);
    assert_non_null(strstr(err, "test: zone geo.example.test label broken: JSON syntax error"));
    /* jansson quotes the input in its message, a newline too: the message stays one line */
    const char *forged = "{\"a\": \"\\u12\nternd: error: forged\"}";
    assert_int_equal(zone_json_label(zj, "forged", forged, strlen(forged), err, sizeof(err)),
                     TERN_ESYNTAX);
    assert_non_null(strstr(err, "invalid escape near '\\\"\\\\u12\\010'"));
    assert_null(strchr(err, '\n'));
    label_ok(zj, "other", "{\"txt\": {\"records\": [{\"text\": \"fine\"}]}}");
    zone_t *z = finish(zj);
    assert_non_null(rrset(z, "good." ORIGIN, 1));
    assert_non_null(rrset(z, "other." ORIGIN, 16));
    dname_view_t v;
    view_of(&v, "www." ORIGIN);
    assert_null(zone_find_node(z, v.lc, v.len, v.hash[0])); /* nothing of it, not even the TXT */
    zone_free(z);
}

/* A label whose RRset is larger than a zone can hold, or than max_rrset_records, costs that label
 * only: before, it reached the builder and every version of the zone failed at finish. */
static void test_rrset_cap_costs_the_label(void **state)
{
    (void)state;
    char err[512];
    zone_json_t *zj = start(NULL, CONFIG);
    label_ok(zj, "@", "{\"ns\": {\"records\": [{\"host\": \"ns1.geo.example.test\"}]}}");
    char *huge = json_a_records(70000);
    assert_int_equal(zone_json_label(zj, "huge", huge, strlen(huge), err, sizeof(err)),
                     TERN_ELIMIT);
    assert_string_equal(err, "test: zone geo.example.test label huge: a.records: 70000 records, "
                             "more than 65535 (what an RRset can hold)");
    free(huge);
    label_ok(zj, "www", "{\"a\": {\"records\": [{\"ip\": \"192.0.2.1\"}]}}");
    zone_t *z = finish(zj);
    assert_null(rrset(z, "huge." ORIGIN, 1));
    assert_non_null(rrset(z, "www." ORIGIN, 1));
    zone_free(z);

    /* the configured cap: as many as it allows is fine, one more is not */
    zone_json_opts_t opts = {.max_rrset_records = 3};
    zj = start(&opts, CONFIG);
    char *three = json_a_records(3), *four = json_a_records(4);
    label_ok(zj, "three", three);
    assert_int_equal(zone_json_label(zj, "four", four, strlen(four), err, sizeof(err)),
                     TERN_ELIMIT);
    assert_non_null(
        strstr(err, "label four: a.records: 4 records, more than max_rrset_records (3)"));
    /* every RRset type with records counts, not only addresses */
    const char *txt = "{\"txt\": {\"records\": [{\"text\": \"1\"}, {\"text\": \"2\"}, "
                      "{\"text\": \"3\"}, {\"text\": \"4\"}]}}";
    assert_int_equal(zone_json_label(zj, "t", txt, strlen(txt), err, sizeof(err)), TERN_ELIMIT);
    free(three);
    free(four);
    z = finish(zj);
    assert_int_equal(rrset(z, "three." ORIGIN, 1)->count, 3);
    assert_null(rrset(z, "four." ORIGIN, 1));
    assert_null(rrset(z, "t." ORIGIN, 16));
    zone_free(z);
}

/* Two labels naming one owner ("www", "WWW", "\119ww"): the second is refused, so a CNAME in one
 * beside data in the other no longer fails the zone at finish. */
static void test_same_owner_second_label_skipped(void **state)
{
    (void)state;
    char err[512];
    zone_json_t *zj = start(NULL, CONFIG);
    label_ok(zj, "@", "{\"ns\": {\"records\": [{\"host\": \"ns1.geo.example.test\"}]}}");
    label_ok(zj, "www", "{\"cname\": {\"host\": \"web.geo.example.test\"}}");
    const char *a = "{\"a\": {\"records\": [{\"ip\": \"192.0.2.1\"}]}}";
    assert_int_equal(zone_json_label(zj, "WWW", a, strlen(a), err, sizeof(err)), TERN_EEXIST);
    assert_string_equal(err,
                        "test: zone geo.example.test label WWW: www.geo.example.test. is given "
                        "by another label already (labels that differ only in case or "
                        "escapes name one owner)");
    assert_int_equal(zone_json_label(zj, "\\119ww", a, strlen(a), err, sizeof(err)), TERN_EEXIST);
    assert_int_equal(zone_json_label(zj, "@", a, strlen(a), err, sizeof(err)), TERN_EEXIST);
    /* a label that added nothing (an address without "ip") claims no owner */
    label_ok(zj, "empty", "{\"a\": {\"records\": [{\"weight\": 1}]}}");
    label_ok(zj, "EMPTY", a);
    zone_t *z = finish(zj);
    assert_non_null(rrset(z, "www." ORIGIN, 5));
    assert_null(rrset(z, "www." ORIGIN, 1));
    assert_non_null(rrset(z, "empty." ORIGIN, 1));
    assert_null(rrset(z, ORIGIN, 1));
    zone_free(z);
}

static void test_value_errors(void **state)
{
    static const struct {
        const char *json;
        const char *want;
    } cases[] = {
        {"{\"aaaa\": {\"records\": [{\"ip\": \"192.0.2.1\"}]}}",
         "aaaa.records[0].ip: \"192.0.2.1\" is not an IPv6 address"},
        {"{\"a\": {\"records\": [{\"ip\": \"2001:db8::1\"}]}}",
         "a.records[0].ip: \"2001:db8::1\" is not an IPv4 address"},
        {"{\"a\": {\"records\": [{\"ip\": 1}]}}",
         "a.records[0].ip: expected a string, got a number"},
        {"{\"a\": {\"records\": [{\"ip\": \"192.0.2.1\", \"country\": \"USA\"}]}}",
         "a.records[0].country: \"USA\" is not a two-letter country code"},
        {"{\"a\": {\"records\": [{\"ip\": \"192.0.2.1\", \"country\": [\"US\", \"1A\"]}]}}",
         "a.records[0].country[1]: \"1A\" is not a two-letter country code"},
        {"{\"a\": {\"records\": [{\"ip\": \"192.0.2.1\", \"country\": [\"US\", 1]}]}}",
         "a.records[0].country[1]: expected a string, got a number"},
        {"{\"a\": {\"records\": [{\"ip\": \"192.0.2.1\", \"country\": true}]}}",
         "a.records[0].country: expected a string or an array of strings, got a boolean"},
        {"{\"a\": {\"records\": [{\"ip\": \"192.0.2.1\", \"asn\": -1}]}}",
         "a.records[0].asn: -1 is not an AS number"},
        {"{\"a\": {\"records\": [{\"ip\": \"192.0.2.1\", \"asn\": 4294967296}]}}",
         "a.records[0].asn: 4294967296 is not an AS number"},
        {"{\"a\": {\"records\": [{\"ip\": \"192.0.2.1\", \"asn\": [1, \"2\"]}]}}",
         "a.records[0].asn[1]: expected an integer, got a string"},
        {"{\"a\": {\"records\": [{\"ip\": \"192.0.2.1\", \"asn\": \"1\"}]}}",
         "a.records[0].asn: expected a number or an array of numbers, got a string"},
        {"{\"a\": {\"records\": [{\"ip\": \"192.0.2.1\", \"weight\": -1}]}}",
         "a.records[0].weight: -1 is out of range"},
        {"{\"a\": {\"records\": [{\"ip\": \"192.0.2.1\", \"weight\": 1.5}]}}",
         "a.records[0].weight: expected an integer, got a number"},
        {"{\"a\": {\"ttl\": \"300\"}}", "a.ttl: expected an integer, got a string"},
        {"{\"a\": {\"ttl\": 2147483648}}", "a.ttl: 2147483648 is out of range (0 to 2147483647)"},
        {"{\"a\": []}", "a: expected an object, got an array"},
        {"{\"a\": {\"records\": {}}}", "a.records: expected an array, got an object"},
        {"{\"a\": {\"records\": [1]}}", "a.records[0]: expected an object, got a number"},
        {"{\"mx\": {\"records\": [{\"host\": \"m.test\", \"preference\": 65536}]}}",
         "mx.records[0].preference: 65536 is out of range (0 to 65535)"},
        {"{\"mx\": {\"records\": [{\"host\": \"a..test\"}]}}",
         "mx.records[0].host: \"a..test\": empty label in name"},
        {"{\"srv\": {\"records\": [{\"target\": \"t.test\", \"port\": 70000}]}}",
         "srv.records[0].port: 70000 is out of range"},
        {"{\"ns\": {\"records\": [{\"host\": "
         "\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa.test\"}]}}",
         "label longer than 63 bytes"},
        {"{\"cname\": {\"host\": \"\"}}", "cname.host: missing"},
        {"{\"cname\": {\"host\": \"x.test\"}, \"txt\": {\"records\": [{\"text\": \"t\"}]}}",
         "cname: a CNAME cannot be beside other data"},
        {"{\"ptr\": {}}", "ptr.domain: missing"},
        {"{\"caa\": {\"records\": [{\"tag\": \"is-sue\", \"value\": \"x\"}]}}",
         "caa.records[0].tag: \"is-sue\" is not a CAA tag"},
        {"{\"caa\": {\"records\": [{\"value\": \"x\"}]}}", "caa.records[0].tag: \"\" is not"},
        {"{\"caa\": {\"records\": [{\"tag\": \"issue\", \"flag\": 256}]}}",
         "caa.records[0].flag: 256 is out of range (0 to 255)"},
        {"{\"tlsa\": {\"records\": [{\"certificate\": \"abc\"}]}}",
         "tlsa.records[0].certificate: odd number of hex digits"},
        {"{\"tlsa\": {\"records\": [{\"certificate\": \"zz\"}]}}",
         "tlsa.records[0].certificate: \"zz\" is not hexadecimal"},
        {"{\"tlsa\": {\"records\": [{\"usage\": 3}]}}", "tlsa.records[0].certificate: missing"},
        {"{\"txt\": {\"records\": [{\"text\": 5}]}}",
         "txt.records[0].text: expected a string, got a number"},
        {"[1]", "label bad: expected an object, got an array"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        label_err(cases[i].json, TERN_EINVAL, cases[i].want);
    label_err("{\"a\": ", TERN_ESYNTAX, "label bad: JSON syntax error at line 1");

    /* bad labels themselves */
    char err[512];
    zone_json_t *zj = start(NULL, CONFIG);
    const char *j = "{}";
    assert_int_equal(zone_json_label(zj, "www.", j, 2, err, sizeof(err)), TERN_EINVAL);
    assert_non_null(strstr(err, "label www.: bad label"));
    assert_int_equal(zone_json_label(zj, "", j, 2, err, sizeof(err)), TERN_EINVAL);
    assert_int_equal(zone_json_label(zj, "a..b", j, 2, err, sizeof(err)), TERN_EINVAL);
    j = "{\"cname\": {\"host\": \"x.test\"}}";
    assert_int_equal(zone_json_label(zj, "@", j, strlen(j), err, sizeof(err)), TERN_EINVAL);
    assert_non_null(strstr(err, "the apex has the SOA"));
    /* multi-label and escaped labels are fine */
    label_ok(zj, "@", "{\"ns\": {\"records\": [{\"host\": \"ns1.geo.example.test\"}]}}");
    label_ok(zj, "a.b", "{\"a\": {\"records\": [{\"ip\": \"192.0.2.1\"}]}}");
    label_ok(zj, "dot\\.ted", "{\"a\": {\"records\": [{\"ip\": \"192.0.2.1\"}]}}");
    zone_t *z = finish(zj);
    assert_non_null(rrset(z, "a.b." ORIGIN, 1));
    zone_free(z);
}

static void count_ep(void *ctx, const health_ep_info_t *i)
{
    (void)i;
    ++*(size_t *)ctx;
}

/* redins' health_check: each record of the RRset gets an endpoint keyed by the check, its
 * address and the owner; bad values fail the label with their path; a disabled check (or health
 * checking off: no registry) checks nothing. */
static void test_health_check(void **state)
{
    (void)state;
    health_registry_t *r = health_registry_new();
    zone_json_opts_t o = {.health = r};
    zone_t *z =
        one_label(&o, "www",
                  "{\"a\": {\"records\": [{\"ip\": \"192.0.2.1\"}, {\"ip\": \"192.0.2.2\"}],"
                  " \"health_check\": {\"enable\": true, \"protocol\": \"https\", \"uri\": \"/hc\","
                  " \"up_count\": 2, \"down_count\": 4, \"timeout\": 500, \"expect\": [200, 204],"
                  " \"tls_verify\": false}},"
                  " \"aaaa\": {\"records\": [{\"ip\": \"2001:db8::1\"}],"
                  " \"health_check\": {\"enable\": false, \"protocol\": \"nonsense\"}}}");
    const zone_geo_t *g = geo(z, "www." ORIGIN, 1);
    assert_non_null(g); /* steered for health alone */
    assert_true(g->health);
    assert_int_equal(g->count, 2);
    assert_non_null(g->rr[0].health);
    assert_ptr_not_equal(g->rr[0].health, g->rr[1].health);
    assert_null(geo(z, "www." ORIGIN, 28)); /* the disabled check: a plain RRset */
    assert_int_equal(z->health_count, 2);
    size_t n = 0;
    assert_int_equal(health_each(r, count_ep, &n), 2);
    /* the same data built again (a reload) shares the endpoints */
    zone_t *z2 =
        one_label(&o, "www",
                  "{\"a\": {\"records\": [{\"ip\": \"192.0.2.1\"}, {\"ip\": \"192.0.2.2\"}],"
                  " \"health_check\": {\"enable\": true, \"protocol\": \"https\", \"uri\": \"/hc\","
                  " \"up_count\": 2, \"down_count\": -4, \"timeout\": 500, \"expect\": [200, 204],"
                  " \"tls_verify\": false}}}");
    assert_ptr_equal(geo(z2, "www." ORIGIN, 1)->rr[0].health, g->rr[0].health);
    assert_int_equal(health_each(r, count_ep, &n), 2);
    zone_free(z);
    zone_free(z2);
    assert_int_equal(health_each(r, count_ep, &n), 0);

    /* no registry: validated, not checked */
    z = one_label(NULL, "www",
                  "{\"a\": {\"records\": [{\"ip\": \"192.0.2.1\"}],"
                  " \"health_check\": {\"enable\": true, \"port\": 8080}}}");
    assert_null(geo(z, "www." ORIGIN, 1));
    zone_free(z);
    health_registry_free(r);

    static const struct {
        const char *json;
        const char *want;
    } bad[] = {
        {"{\"a\": {\"records\": [{\"ip\": \"192.0.2.1\"}], \"health_check\": {\"enable\": "
         "true, \"port\": 0}}}",
         "a.health_check: port 0 is not a port"},
        {"{\"a\": {\"records\": [{\"ip\": \"192.0.2.1\"}], \"health_check\": {\"enable\": "
         "true, \"protocol\": \"ftp\"}}}",
         "a.health_check.protocol: \"ftp\" is not a check protocol"},
        {"{\"a\": {\"records\": [{\"ip\": \"192.0.2.1\"}], \"health_check\": {\"enable\": "
         "true, \"timeout\": -5}}}",
         "a.health_check.timeout: -5 is negative"},
        {"{\"a\": {\"records\": [{\"ip\": \"192.0.2.1\"}], \"health_check\": {\"enable\": "
         "true, \"up_count\": 0}}}",
         "a.health_check: up_count 0 is out of range"},
        {"{\"a\": {\"records\": [{\"ip\": \"192.0.2.1\"}], \"health_check\": {\"enable\": "
         "true, \"protocol\": \"tcp\"}}}",
         "a.health_check.port: a tcp check needs a port"},
        {"{\"a\": {\"records\": [{\"ip\": \"192.0.2.1\"}], \"health_check\": {\"enable\": "
         "true, \"uri\": \"health\"}}}",
         "a.health_check: uri must start with '/'"},
        {"{\"a\": {\"records\": [{\"ip\": \"192.0.2.1\"}], \"health_check\": {\"enable\": "
         "true, \"method\": \"POST\"}}}",
         "a.health_check.method: \"POST\" is not HEAD or GET"},
        {"{\"a\": {\"records\": [{\"ip\": \"192.0.2.1\"}], \"health_check\": {\"enable\": "
         "true, \"expect\": [200, 700]}}}",
         "a.health_check.expect[1]: expected an HTTP status code"},
        {"{\"a\": {\"records\": [{\"ip\": \"192.0.2.1\"}], \"health_check\": {\"enable\": "
         "\"yes\"}}}",
         "a.health_check.enable: expected true or false"},
        {"{\"a\": {\"records\": [{\"ip\": \"192.0.2.1\"}], \"health_check\": []}}",
         "a.health_check: expected an object"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        label_err(bad[i].json, TERN_EINVAL, bad[i].want);
}

/* Load shedding's "shed" block (issue 33): the watermarks in milli-units on the policy, the
 * source on the check's spec (its own endpoint: the same check without a load is another one),
 * GET for a JSON body; each error names its field. */
static void test_shed(void **state)
{
    (void)state;
    health_registry_t *r = health_registry_new();
    zone_json_opts_t o = {.health = r};
    zone_t *z = one_label(&o, "www",
                          "{\"a\": {\"records\": [{\"ip\": \"192.0.2.1\"}],"
                          " \"health_check\": {\"enable\": true},"
                          " \"shed\": {\"low\": 0.7, \"high\": 90, \"header\": \"X-Load\"}},"
                          " \"aaaa\": {\"records\": [{\"ip\": \"2001:db8::1\"}],"
                          " \"health_check\": {\"enable\": true},"
                          " \"shed\": {\"low\": 1, \"high\": 2, \"json\": \"stats.load\"}}}");
    /* a Redis load on a tcp check */
    zone_t *zr = one_label(&o, "r",
                           "{\"a\": {\"records\": [{\"ip\": \"192.0.2.9\"}],"
                           " \"health_check\": {\"enable\": true, \"protocol\": \"tcp\","
                           " \"port\": 80}, \"shed\": {\"low\": 50, \"high\": 80,"
                           " \"redis\": \"tern:load\"}}}");
    assert_int_equal(geo(zr, "r." ORIGIN, 1)->policy.shed_high, 80000);
    zone_free(zr);
    const zone_geo_t *g = geo(z, "www." ORIGIN, 1);
    assert_non_null(g);
    assert_int_equal(g->policy.shed, 1);
    assert_int_equal(g->policy.shed_low, 700);
    assert_int_equal(g->policy.shed_high, 90000);
    assert_int_equal(health_ep_load(g->rr[0].health), HEALTH_LOAD_UNKNOWN);
    const zone_geo_t *g6 = geo(z, "www." ORIGIN, 28);
    assert_int_equal(g6->policy.shed_low, 1000);
    size_t n = 0;
    assert_int_equal(health_each(r, count_ep, &n), 2);
    /* the same check without "shed" is another endpoint */
    zone_t *z2 = one_label(&o, "www",
                           "{\"a\": {\"records\": [{\"ip\": \"192.0.2.1\"}],"
                           " \"health_check\": {\"enable\": true}}}");
    assert_ptr_not_equal(geo(z2, "www." ORIGIN, 1)->rr[0].health, g->rr[0].health);
    assert_int_equal(geo(z2, "www." ORIGIN, 1)->policy.shed, 0);
    zone_free(z);
    zone_free(z2);
    health_registry_free(r);

#define HC "\"health_check\": {\"enable\": true}, "
#define A  "{\"a\": {\"records\": [{\"ip\": \"192.0.2.1\"}], "
    static const struct {
        const char *json;
        const char *want;
    } bad[] = {
        {A HC "\"shed\": {\"low\": 0.9, \"high\": 0.7, \"header\": \"X\"}}}",
         "a.shed: low (0.9) must be below high (0.7)"},
        {A HC "\"shed\": {\"low\": 0.9, \"high\": 0.9, \"header\": \"X\"}}}",
         "a.shed: low (0.9) must be below high (0.9)"},
        {A HC "\"shed\": {\"low\": 1, \"high\": 2, \"header\": \"X\", \"json\": \"l\"}}}",
         "a.shed: give one load source, not header and json"},
        {A HC "\"shed\": {\"low\": 1, \"high\": 2, \"snmp\": \"X\"}}}",
         "a.shed.snmp: unknown load source (header, json or redis)"},
        {A HC "\"shed\": {\"low\": 1, \"high\": 2}}}", "a.shed: no load source"},
        {A HC "\"shed\": {\"low\": \"1\", \"high\": 2, \"header\": \"X\"}}}",
         "a.shed.low: expected a number, got a string"},
        {A HC "\"shed\": {\"high\": 2, \"header\": \"X\"}}}", "a.shed.low: missing"},
        {A HC "\"shed\": {\"low\": -1, \"high\": 2, \"header\": \"X\"}}}",
         "a.shed.low: -1 is out of range"},
        {A HC "\"shed\": {\"low\": 1, \"high\": 2, \"json\": \"a..b\"}}}",
         "a.shed.json: expected a dotted path"},
        {A HC "\"shed\": {\"low\": 1, \"high\": 2, \"header\": 5}}}",
         "a.shed.header: expected a string"},
        {A "\"shed\": {\"low\": 1, \"high\": 2, \"header\": \"X\"}}}",
         "a.shed.header: a load source needs an enabled health_check block"},
        {A "\"health_check\": {\"enable\": true, \"protocol\": \"tcp\", \"port\": 1}, "
           "\"shed\": {\"low\": 1, \"high\": 2, \"header\": \"X\"}}}",
         "a.shed.header: the load is read from an http or https check"},
        {A "\"health_check\": {\"enable\": true, \"method\": \"HEAD\"}, "
           "\"shed\": {\"low\": 1, \"high\": 2, \"json\": \"load\"}}}",
         "a.shed.json: a load in the JSON body needs health_check.method GET"},
        {A HC "\"shed\": 5}}", "a.shed: expected an object"},
        {A "\"shed\": {\"low\": 1, \"high\": 2, \"redis\": \"loads\"}}}",
         "a.shed.redis: a load source needs an enabled health_check block"},
        {A HC "\"shed\": {\"low\": 1, \"high\": 2, \"redis\": \"\"}}}",
         "a.shed.redis: expected a hash key"},
    };
#undef HC
#undef A
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        label_err(bad[i].json, TERN_EINVAL, bad[i].want);
}

static void test_soa_required(void **state)
{
    char err[512];
    zone_t *z = (zone_t *)1;
    /* never given */
    zone_json_t *zj = start(NULL, NULL);
    label_ok(zj, "x", "{\"a\": {\"records\": [{\"ip\": \"192.0.2.1\"}]}}");
    assert_int_equal(zone_json_finish(zj, &z, err, sizeof(err)), TERN_ENOSOA);
    assert_null(z);
    assert_string_equal(err, "test: zone geo.example.test: no SOA (zone config missing)");

    static const struct {
        const char *cfg;
        int rc;
        const char *want;
    } bad[] = {
        {"{}", TERN_EINVAL, "test: zone geo.example.test config: soa: missing"},
        {"{\"soa\": null}", TERN_EINVAL, "config: soa: missing"},
        {"{\"soa\": \"x\"}", TERN_EINVAL, "config: soa: expected an object, got a string"},
        {"{\"soa\": {\"mbox\": \"h.test\"}}", TERN_EINVAL, "config: soa.ns: missing"},
        {"{\"soa\": {\"ns\": \"ns.test\"}}", TERN_EINVAL, "config: soa.mbox: missing"},
        {"{\"soa\": {\"ns\": \"ns.test\", \"mbox\": \"h.test\", \"serial\": -1}}", TERN_EINVAL,
         "config: soa.serial: -1 is out of range"},
        {"{\"soa\": {\"ns\": \"ns.test\", \"mbox\": \"h.test\"}, \"dnssec\": \"yes\"}", TERN_EINVAL,
         "config: dnssec: expected true or false, got a string"},
        {"{\"soa\": {\"ns\": \"ns.test\", \"mbox\": \"h.test\"}, \"dnssec\": true}", TERN_EINVAL,
         "config: \"dnssec\" is true but the zone has no keys"},
        {"[]", TERN_EINVAL, "config: expected an object, got an array"},
        {"{", TERN_ESYNTAX, "config: JSON syntax error"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        zj = start(NULL, NULL);
        int rc = zone_json_config(zj, bad[i].cfg, strlen(bad[i].cfg), err, sizeof(err));
        if (rc != bad[i].rc || !strstr(err, bad[i].want))
            fail_msg("%s: got %d \"%s\"", bad[i].cfg, rc, err);
        zone_json_free(zj);
    }

    /* minimal SOA: redins' timers, the default TTL, a serial from the clock */
    zone_json_opts_t opts = {.default_ttl = 600};
    zj = start(&opts, "{\"soa\": {\"ns\": \"ns.test\", \"mbox\": \"h.test\"}, \"domain_id\": "
                      "\"x\", \"cname_flattening\": false, \"future\": {}}");
    assert_int_equal(zone_json_config(zj, CONFIG, strlen(CONFIG), err, sizeof(err)), TERN_EINVAL);
    assert_non_null(strstr(err, "config: given twice"));
    z = finish(zj);
    assert_int_equal(z->soa->ttl, 600);
    assert_true(z->serial > 1700000000u);
    /* domain_id is kept for the request log's domain_uuid */
    assert_int_equal(z->domain_id_len, 1);
    assert_memory_equal(z->domain_id, "x", 1);
    static const uint8_t timers[] = {0, 1, 0x51, 0x80, 0, 0, 0x1c, 0x20,
                                     0, 0, 0x0e, 0x10, 0, 0, 1,    0x2c};
    assert_memory_equal(z->soa->rdata + z->soa->rdata_len - 16, timers, 16);
    zone_free(z);
}

/* tern's "dnssec_policy" (Redis zones): the name kept and the zone signed; refused where the
 * keys are not deferred (a file's JSON zone names its policy in ternd.yaml), and when no name */
static void test_dnssec_policy(void **state)
{
    (void)state;
    char err[512];
    zone_json_opts_t redis = {.dnssec_deferred = true};
#define MIN_SOA "{\"soa\": {\"ns\": \"ns.test\", \"mbox\": \"h.test\"}, "
    zone_json_t *zj = start(&redis, MIN_SOA "\"dnssec_policy\": \"fast\"}");
    assert_true(zone_json_dnssec(zj));
    assert_string_equal(zone_json_dnssec_policy(zj), "fast");
    assert_false(zone_json_dnssec_unsign(zj));
    zone_json_free(zj);
    zj = start(&redis, MIN_SOA "\"dnssec_policy\": \"fast\", \"dnssec_unsign\": true}");
    assert_true(zone_json_dnssec(zj));
    assert_true(zone_json_dnssec_unsign(zj));
    zone_json_free(zj);
    zj = start(&redis, CONFIG);
    assert_false(zone_json_dnssec(zj));
    assert_null(zone_json_dnssec_policy(zj));
    assert_false(zone_json_dnssec_unsign(zj));
    zone_json_free(zj);
    char long_name[200];
    snprintf(long_name, sizeof(long_name), MIN_SOA "\"dnssec_policy\": \"%070d\"}", 7);
    const struct {
        const zone_json_opts_t *opts;
        const char *cfg;
        const char *want;
    } bad[] = {
        {NULL, MIN_SOA "\"dnssec_policy\": \"fast\"}",
         "\"dnssec_policy\" is read from Redis zones only"},
        {&redis, MIN_SOA "\"dnssec_policy\": \"\"}", "dnssec_policy: a name of 1..63 bytes"},
        {&redis, long_name, "dnssec_policy: a name of 1..63 bytes"},
        {&redis, MIN_SOA "\"dnssec_policy\": 5}", "dnssec_policy: expected"},
        {&redis, MIN_SOA "\"dnssec_unsign\": true}",
         "\"dnssec_unsign\": true needs \"dnssec_policy\""},
        {&redis, MIN_SOA "\"dnssec_policy\": \"fast\", \"dnssec_unsign\": 1}",
         "dnssec_unsign: expected"},
    };
#undef MIN_SOA
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        zj = start(bad[i].opts, NULL);
        int rc = zone_json_config(zj, bad[i].cfg, strlen(bad[i].cfg), err, sizeof(err));
        if (rc != TERN_EINVAL || !strstr(err, bad[i].want))
            fail_msg("%s: got %d \"%s\"", bad[i].cfg, rc, err);
        zone_json_free(zj);
    }
}

/* redins' handler max_ttl: caps every TTL, and fills in missing ones through default_ttl */
static void test_max_ttl(void **state)
{
    (void)state;
    zone_json_opts_t opts = {.default_ttl = 120, .max_ttl = 300};
    zone_t *z = one_label(&opts, "www",
                          "{\"a\": {\"ttl\": 3600, \"records\": [{\"ip\": \"192.0.2.1\"}]}, "
                          "\"txt\": {\"ttl\": 60, \"records\": [{\"text\": \"x\"}]}, "
                          "\"mx\": {\"records\": [{\"host\": \"m.test\", \"preference\": 1}]}}");
    assert_int_equal(rrset(z, "www." ORIGIN, 1)->ttl, 300);
    assert_int_equal(rrset(z, "www." ORIGIN, 16)->ttl, 60);
    assert_int_equal(rrset(z, "www." ORIGIN, 15)->ttl, 120);
    zone_free(z);
}

static void test_apex_ns_synthesised(void **state)
{
    char log[2048];
    ztu_capture_begin();
    zone_json_t *zj = start(NULL, CONFIG);
    label_ok(zj, "@",
             "{\"a\": {\"records\": [{\"ip\": \"192.0.2.1\"}]},"
             " \"ns\": {\"records\": [{\"host\": \"\"}]}}");
    zone_t *z = finish(zj);
    ztu_capture_end(log, sizeof(log));
    assert_non_null(z->apex_ns);
    assert_int_equal(z->apex_ns->count, 1);
    assert_int_equal(z->apex_ns->ttl, 3600); /* the SOA's */
    uint8_t want[64];
    size_t n = wire_name(want + 2, "ns1.geo.example.test.");
    want[0] = 0;
    want[1] = (uint8_t)n;
    assert_int_equal(z->apex_ns->rdata_len, n + 2);
    assert_memory_equal(z->apex_ns->rdata, want, n + 2);
    assert_non_null(strstr(log, "zone geo.example.test: no NS at the apex, serving NS "
                                "ns1.geo.example.test."));
    zone_free(z);

    /* an NS RRset at the apex is served as given */
    zj = start(NULL, CONFIG);
    label_ok(zj, "@",
             "{\"ns\": {\"ttl\": 5, \"records\": [{\"host\": \"a.ns.test\"},"
             " {\"host\": \"b.ns.test\"}]}}");
    z = finish(zj);
    assert_int_equal(z->apex_ns->count, 2);
    assert_int_equal(z->apex_ns->ttl, 5);
    zone_free(z);
}

static void test_warnings(void **state)
{
    char log[2048];
    ztu_capture_begin();
    zone_json_t *zj = start(NULL, "{\"soa\": {\"ns\": \"ns.test\", \"mbox\": \"h.test\"}}");
    label_ok(zj, "al",
             "{\"aname\": {\"location\": \"x.example.\"},"
             " \"txt\": {\"records\": [{\"text\": \"t\"}]}}");
    label_ok(zj, "hc",
             "{\"a\": {\"records\": [{\"ip\": \"192.0.2.1\"}], \"health_check\": "
             "{\"enable\": true, \"uri\": \"/\", \"port\": 80}}}"); /* no registry: no check */
    zone_t *z = finish(zj);
    ztu_capture_end(log, sizeof(log));
    assert_null(strstr(log, "ANAME")); /* served now: no warning */
    assert_non_null(rrset(z, "al." ORIGIN, 16));
    /* redins' aname is an ANAME record (answer.h), its location the RDATA */
    const zone_rrset_t *an = rrset(z, "al." ORIGIN, WIRE_T_ANAME);
    assert_non_null(an);
    assert_int_equal(an->count, 1);
    static const uint8_t target[] = {0, 11, 1, 'x', 7, 'e', 'x', 'a', 'm', 'p', 'l', 'e', 0};
    assert_int_equal(an->rdata_len, sizeof(target));
    assert_memory_equal(an->rdata, target, sizeof(target));
    label_err("{\"cname\": {\"host\": \"a.example.\"}, \"aname\": {\"location\": \"b.example.\"}}",
              TERN_EINVAL, "a CNAME cannot be beside other data");
    label_err("{\"aname\": {\"location\": \"bad..name\"}}", TERN_EINVAL, "aname.location");
    assert_non_null(rrset(z, "hc." ORIGIN, 1));
    zone_free(z);
}

/* ---- files ------------------------------------------------------------------------------- */

static void test_file_errors(void **state)
{
    char dir[64], path[128], err[512];
    zone_t *z = NULL;
    tu_mkdtemp(dir, sizeof(dir), "tern-json");

    tu_write_file(dir, "syntax.json", "{\n  \"config\": {},\n  \"records\": {,}\n}\n");
    snprintf(path, sizeof(path), "%s/syntax.json", dir);
    assert_int_equal(zone_json_load_file(ORIGIN, path, NULL, &z, err, sizeof(err)), TERN_ESYNTAX);
    char want[200];
    snprintf(want, sizeof(want), "%s:3:", path);
    if (strncmp(err, want, strlen(want)) != 0)
        fail_msg("got \"%s\"", err);

    snprintf(path, sizeof(path), "%s/missing.json", dir);
    assert_int_equal(zone_json_load_file(ORIGIN, path, NULL, &z, err, sizeof(err)), TERN_ENOENT);

    static const struct {
        const char *text;
        const char *want;
    } cases[] = {
        {"[]", "expected an object with \"config\" and \"records\""},
        {"{\"config\": " CONFIG ", \"records\": {}, \"zones\": 1}", "unknown key \"zones\""},
        {"{\"records\": {}}", "zone geo.example.test: \"config\" missing"},
        {"{\"config\": " CONFIG "}", "\"records\" missing"},
        {"{\"config\": " CONFIG ", \"records\": []}", "\"records\" must be an object"},
        {"{\"config\": {\"soa\": {}}, \"records\": {}}", "zone geo.example.test config: soa.ns"},
        {"{\"config\": " CONFIG ", \"records\": {\"ok\": {}, \"www\": {\"a\": {\"records\": "
         "[{\"ip\": \"x\"}]}}}}",
         "zone geo.example.test label www: a.records[0].ip: \"x\" is not an IPv4 address"},
        {"{\"config\": " CONFIG ", \"records\": {\"www\": 1}}",
         "label www: expected an object, got a number"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        tu_write_file(dir, "bad.json", cases[i].text);
        snprintf(path, sizeof(path), "%s/bad.json", dir);
        int rc = zone_json_load_file(ORIGIN, path, NULL, &z, err, sizeof(err));
        if (rc != TERN_EINVAL || strncmp(err, path, strlen(path)) != 0 ||
            !strstr(err, cases[i].want))
            fail_msg("%s: got %d \"%s\"", cases[i].text, rc, err);
        assert_null(z);
    }
    /* a CNAME beside data at one owner, from two labels: the builder's finish says so */
    tu_write_file(dir, "cname.json",
                  "{\"config\": " CONFIG ", \"records\": {\"@\": {\"ns\": {\"records\": "
                  "[{\"host\": \"ns.test\"}]}}, \"www\": {\"cname\": {\"host\": \"x.test\"}},"
                  " \"WWW\": {\"txt\": {\"records\": [{\"text\": \"x\"}]}}}}");
    snprintf(path, sizeof(path), "%s/cname.json", dir);
    assert_int_equal(zone_json_load_file(ORIGIN, path, NULL, &z, err, sizeof(err)), TERN_ECNAME);
    assert_non_null(strstr(err, "CNAME"));
    tu_rmtree(dir);
}

static bool locate_any(void *ctx, int family, const uint8_t *addr, double *lat, double *lon)
{
    unsigned *calls = ctx;
    (*calls)++;
    *lat = addr[family == 4 ? 3 : 15] % 90;
    *lon = 0;
    return true;
}

static void test_example_file(void **state)
{
    char err[512], log[4096];
    zone_t *z = NULL;
    unsigned calls = 0;
    zone_json_opts_t opts = {.locate = locate_any, .locate_ctx = &calls};
    ztu_capture_begin();
    int rc =
        zone_json_load_file(ORIGIN, TERN_CONF_DIR "/example-geo.json", &opts, &z, err, sizeof(err));
    ztu_capture_end(log, sizeof(log));
    if (rc)
        fail_msg("example: %s", err);
    assert_string_equal(log, ""); /* no warning for the shipped example */
    assert_int_equal(z->serial, 2024060101);
    assert_int_equal(z->apex_ns->count, 2);
    assert_true(calls >= 20);
    static const struct {
        const char *name;
        uint16_t type;
        uint8_t filter, count, order;
    } steered[] = {
        {"by-country", 1, ZONE_GEO_FILTER_COUNTRY, 0, 0},
        {"by-asn", 1, ZONE_GEO_FILTER_ASN, 0, 0},
        {"by-asn-and-country", 1, ZONE_GEO_FILTER_ASN_COUNTRY, 1, ZONE_GEO_ORDER_WEIGHTED},
        {"nearest", 1, ZONE_GEO_FILTER_LOCATION, 1, 0},
        {"nearest", 28, ZONE_GEO_FILTER_LOCATION, 1, 0},
        {"weighted", 1, 0, 1, ZONE_GEO_ORDER_WEIGHTED},
        {"round-robin", 1, 0, 1, ZONE_GEO_ORDER_RR},
    };
    for (size_t i = 0; i < sizeof(steered) / sizeof(steered[0]); i++) {
        char name[128];
        snprintf(name, sizeof(name), "%s." ORIGIN, steered[i].name);
        const zone_geo_t *g = geo(z, name, steered[i].type);
        if (!g)
            fail_msg("%s: not steered", name);
        assert_int_equal(g->policy.filter, steered[i].filter);
        assert_int_equal(g->policy.count, steered[i].count);
        assert_int_equal(g->policy.order, steered[i].order);
        assert_int_equal(g->rr[0].has_loc, 1);
    }
    static const struct {
        const char *name;
        uint16_t type;
    } present[] = {
        {ORIGIN, 15},
        {ORIGIN, 16},
        {ORIGIN, 257},
        {"www." ORIGIN, 5},
        {"_sip._tcp." ORIGIN, 33},
        {"_443._tcp.web." ORIGIN, 52},
        {"host-80." ORIGIN, 12},
        {"sub." ORIGIN, 2},
        {"ns1.sub." ORIGIN, 1},
        {"long-text." ORIGIN, 16},
    };
    for (size_t i = 0; i < sizeof(present) / sizeof(present[0]); i++)
        if (!rrset(z, present[i].name, present[i].type))
            fail_msg("%s type %u missing", present[i].name, present[i].type);
    zone_free(z);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_types_match_master_file),
        cmocka_unit_test(test_rdata_bytes),
        cmocka_unit_test(test_txt_split_255),
        cmocka_unit_test(test_keys_case_insensitive),
        cmocka_unit_test(test_geo_meta),
        cmocka_unit_test(test_filter_policies),
        cmocka_unit_test(test_locate),
        cmocka_unit_test(test_bad_label_skipped),
        cmocka_unit_test(test_rrset_cap_costs_the_label),
        cmocka_unit_test(test_same_owner_second_label_skipped),
        cmocka_unit_test(test_value_errors),
        cmocka_unit_test(test_health_check),
        cmocka_unit_test(test_shed),
        cmocka_unit_test(test_soa_required),
        cmocka_unit_test(test_apex_ns_synthesised),
        cmocka_unit_test(test_max_ttl),
        cmocka_unit_test(test_warnings),
        cmocka_unit_test(test_dnssec_policy),
        cmocka_unit_test(test_file_errors),
        cmocka_unit_test(test_example_file),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
