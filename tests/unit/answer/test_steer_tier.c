/*
 * Unit tests for failover tiers (steer_tier.c, issue 33): records' "priority" and the RRset's
 * "min_healthy" (a number, or per priority), after health and the geo filter: fall-through, a
 * tier per its own min_healthy, none qualifying (the fullest tier), fail open (the best
 * priority), a geo filter deciding first, what the request log is told, the schema's errors,
 * and that an untiered RRset is not tiered at all.
 *
 * Health states are forced through the registry's overrides (health.h), so nothing is probed.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "tern/common/err.h"
#include "tern/health/health.h"
#include "test_util.h"

#include "steer_test_util.h"

#define HC "\"health_check\": {\"enable\": true, \"protocol\": \"http\", \"uri\": \"/\"}"

static health_registry_t *hr;

static void state(uint8_t last, health_override_t st)
{
    uint8_t a[4] = {192, 0, 2, last};
    assert_true(health_set_override(hr, 4, a, 0, st) >= 0);
}

static void all_auto(void)
{
    for (uint8_t i = 1; i <= 8; i++)
        state(i, HEALTH_AUTO);
}

/* The answer as a string of last octets, sorted ("12" for 192.0.2.1 and .2). */
static const char *answer(const zone_geo_t *g, const char *client)
{
    static char s[32];
    uint8_t out[16];
    unsigned n = stu_pick(g, client, out);
    for (unsigned i = 0; i < n; i++)
        for (unsigned j = i + 1; j < n; j++)
            if (out[j] < out[i]) {
                uint8_t t = out[i];
                out[i] = out[j];
                out[j] = t;
            }
    for (unsigned i = 0; i < n; i++)
        s[i] = (char)('0' + out[i]);
    s[n] = 0;
    return s;
}

/* 1, 2 in tier 0; 3, 4 in tier 1; 5 in tier 2; all health-checked */
#define FIVE                                                                                       \
    "\"records\": [{\"ip\": \"192.0.2.1\"}, {\"ip\": \"192.0.2.2\"}, {\"ip\": \"192.0.2.3\", "     \
    "\"priority\": 1}, {\"ip\": \"192.0.2.4\", \"priority\": 1}, {\"ip\": \"192.0.2.5\", "         \
    "\"priority\": 2}]"

static void test_fall_through(void **st)
{
    (void)st;
    zone_t *z;
    const zone_geo_t *g = stu_build(hr, "{\"filter\": {\"min_healthy\": 2}, " HC ", " FIVE "}", &z);
    assert_true(g->tiers);
    assert_string_equal(answer(g, "198.51.100.1"), "12");
    assert_int_equal(stu_ctx.info.steer.rules, ANSWER_STEER_TIER);
    assert_int_equal(stu_ctx.info.steer.tier, 0);
    assert_int_equal(stu_ctx.info.steer.tier_skipped, 0);
    /* one of tier 0 down: fewer than 2 left there, tier 1 answers */
    state(1, HEALTH_FORCE_DOWN);
    assert_string_equal(answer(g, "198.51.100.1"), "34");
    assert_int_equal(stu_ctx.info.steer.tier, 1);
    assert_int_equal(stu_ctx.info.steer.tier_skipped, 1);
    /* one of tier 1 too: no tier has 2; the fullest (all have 1) with the best priority: 0 */
    state(3, HEALTH_FORCE_DOWN);
    assert_string_equal(answer(g, "198.51.100.1"), "2");
    assert_int_equal(stu_ctx.info.steer.tier, 0);
    assert_int_equal(stu_ctx.info.steer.tier_skipped, 0);
    /* back up: back to tier 0 */
    all_auto();
    assert_string_equal(answer(g, "198.51.100.1"), "12");
    zone_free(z);
}

static void test_per_tier_min(void **st)
{
    (void)st;
    zone_t *z;
    /* tier 0 needs 3 (it has 2): never answered while tier 1 has its 1 */
    const zone_geo_t *g = stu_build(
        hr, "{\"filter\": {\"min_healthy\": {\"0\": 3, \"1\": 1}}, " HC ", " FIVE "}", &z);
    assert_string_equal(answer(g, "198.51.100.1"), "34");
    state(3, HEALTH_FORCE_DOWN);
    assert_string_equal(answer(g, "198.51.100.1"), "4");
    state(4, HEALTH_FORCE_DOWN);
    /* tier 2 (not listed) needs 1, and has it */
    assert_string_equal(answer(g, "198.51.100.1"), "5");
    assert_int_equal(stu_ctx.info.steer.tier, 2);
    assert_int_equal(stu_ctx.info.steer.tier_skipped, 1); /* tier 1 had none left to pass over */
    all_auto();
    zone_free(z);
}

static void test_none_qualifies(void **st)
{
    (void)st;
    zone_t *z;
    const zone_geo_t *g = stu_build(
        hr,
        "{\"filter\": {\"min_healthy\": 5}, \"records\": [{\"ip\": \"192.0.2.1\"}, {\"ip\": "
        "\"192.0.2.2\"}, {\"ip\": \"192.0.2.3\", \"priority\": 7}, {\"ip\": \"192.0.2.4\", "
        "\"priority\": 7}, {\"ip\": \"192.0.2.5\", \"priority\": 7}]}",
        &z);
    /* none has 5: tier 7 has the most */
    assert_string_equal(answer(g, "198.51.100.1"), "345");
    assert_int_equal(stu_ctx.info.steer.tier, 7);
    assert_int_equal(stu_ctx.info.steer.tier_skipped, 1);
    zone_free(z);
}

static void test_fail_open(void **st)
{
    (void)st;
    zone_t *z;
    const zone_geo_t *g = stu_build(hr, "{\"filter\": {\"min_healthy\": 2}, " HC ", " FIVE "}", &z);
    for (uint8_t i = 1; i <= 5; i++)
        state(i, HEALTH_FORCE_DOWN);
    /* every record down: health keeps all (fail open); the best priority answers */
    uint16_t open = stu_ctx.info.health_fail_open;
    assert_string_equal(answer(g, "198.51.100.1"), "12");
    assert_int_equal(stu_ctx.info.health_fail_open, open + 1);
    assert_int_equal(stu_ctx.info.steer.tier, 0);
    /* only tier 2 up: it answers, whatever min_healthy says of the others */
    state(5, HEALTH_FORCE_UP);
    assert_string_equal(answer(g, "198.51.100.1"), "5");
    all_auto();
    zone_free(z);
}

/* Records 1 (AU) and 2 in tier 0, 3 and 4 in tier 1, min_healthy 2; filter as given. */
#define GEO4(filter)                                                                               \
    "{\"filter\": {" filter "\"min_healthy\": 2}, \"records\": [{\"ip\": \"192.0.2.1\", "          \
    "\"country\": \"AU\"}, {\"ip\": \"192.0.2.2\"}, {\"ip\": \"192.0.2.3\", \"priority\": 1}, "    \
    "{\"ip\": \"192.0.2.4\", \"priority\": 1}]}"

/* The geo filter runs first: the tiers are counted among what it kept. */
static void test_geo_first(void **st)
{
    (void)st;
    zone_t *z;
    /* an unlocated client keeps the records listing no country: 2 (tier 0), 3 and 4 (tier 1) */
    const zone_geo_t *g = stu_build(hr, GEO4("\"geo_filter\": \"country\", "), &z);
    assert_string_equal(answer(g, NULL), "34");
    assert_int_equal(stu_ctx.info.steer.tier, 1);
    zone_free(z);
    /* without the filter, tier 0 has its 2 */
    g = stu_build(hr, GEO4(""), &z);
    assert_string_equal(answer(g, NULL), "12");
    zone_free(z);
}

/* 200 answers of count single: how often each record came first. */
static void tally(const zone_geo_t *g, unsigned seen[8])
{
    memset(seen, 0, 8 * sizeof(seen[0]));
    for (int i = 0; i < 200; i++)
        seen[answer(g, "198.51.100.1")[0] - '0']++;
}

/* Tiers with an order: the order picks within the tier answered. */
static void test_with_order(void **st)
{
    (void)st;
    zone_t *z;
    const zone_geo_t *g = stu_build(
        hr, "{\"filter\": {\"count\": \"single\", \"order\": \"rr\"}, " HC ", " FIVE "}", &z);
    assert_true(g->tiers); /* priorities alone make tiers (min_healthy 1) */
    unsigned seen[8];
    tally(g, seen);
    assert_true(seen[1] > 0 && seen[2] > 0);
    assert_int_equal(seen[1] + seen[2], 200);
    state(1, HEALTH_FORCE_DOWN);
    state(2, HEALTH_FORCE_DOWN);
    tally(g, seen);
    assert_true(seen[3] > 0 && seen[4] > 0);
    assert_int_equal(seen[3] + seen[4], 200);
    all_auto();
    zone_free(z);
}

/* Priority 0 everywhere and no min_healthy: not tiered, the log is told nothing. */
static void test_untiered(void **st)
{
    (void)st;
    zone_t *z;
    const zone_geo_t *g = stu_build(
        hr,
        "{\"filter\": {\"count\": \"multi\", \"order\": \"weighted\"}, \"records\": [{\"ip\": "
        "\"192.0.2.1\", \"priority\": 0}, {\"ip\": \"192.0.2.2\"}]}",
        &z);
    assert_false(g->tiers);
    assert_int_equal(strlen(answer(g, "198.51.100.1")), 2);
    assert_int_equal(stu_ctx.info.steer.rules, 0);
    zone_free(z);
}

static void bad(const char *aset, const char *want)
{
    char err[512];
    zone_t *z = NULL;
    int rc = stu_try(hr, aset, &z, err, sizeof(err));
    if (rc != TERN_EINVAL || !strstr(err, want) || !strstr(err, "zone t.test") ||
        !strstr(err, "label www"))
        fail_msg("%s\n  got %d \"%s\"\n  want \"%s\"", aset, rc, err, want);
}

static void test_schema_errors(void **st)
{
    (void)st;
    bad("{\"records\": [{\"ip\": \"192.0.2.1\", \"priority\": 65536}]}",
        "a.records[0].priority: 65536 is out of range (0 to 65535)");
    bad("{\"records\": [{\"ip\": \"192.0.2.1\", \"priority\": \"1\"}]}",
        "a.records[0].priority: expected an integer, got a string");
    bad("{\"filter\": {\"min_healthy\": 0}, \"records\": []}",
        "a.filter.min_healthy: 0 is out of range (1 to 65535)");
    bad("{\"filter\": {\"min_healthy\": 65536}, \"records\": []}",
        "a.filter.min_healthy: 65536 is out of range (0 to 65535)");
    bad("{\"filter\": {\"min_healthy\": \"2\"}, \"records\": []}",
        "a.filter.min_healthy: expected a number or an object, got a string");
    bad("{\"filter\": {\"min_healthy\": {\"x\": 1}}, \"records\": []}",
        "a.filter.min_healthy.x: the key is not a priority (0 to 65535)");
    bad("{\"filter\": {\"min_healthy\": {\"1\": 0}}, \"records\": []}",
        "a.filter.min_healthy.1: expected an integer 1 to 65535");
    bad("{\"filter\": {\"min_healthy\": {\"0\": 1, \"1\": 1, \"2\": 1, \"3\": 1, \"4\": 1, \"5\": "
        "1, \"6\": 1, \"7\": 1, \"8\": 1}}, \"records\": []}",
        "a.filter.min_healthy: more than 8 tiers listed");
    bad("{\"filter\": {\"sticky_prefix\": {\"v4\": 33}}, \"records\": []}",
        "a.filter.sticky_prefix.v4: 33 is out of range (0 to 32)");
    bad("{\"filter\": {\"sticky_prefix\": {\"v6\": 129}}, \"records\": []}",
        "a.filter.sticky_prefix.v6: 129 is out of range (0 to 128)");
    bad("{\"filter\": {\"order\": \"Sticky\"}, \"records\": []}",
        "a.filter.order: \"Sticky\" is not one of");
}

static int setup(void **st)
{
    (void)st;
    hr = health_registry_new();
    answer_ctx_seed(&stu_ctx, 7);
    return hr ? 0 : -1;
}

static int teardown(void **st)
{
    (void)st;
    health_registry_free(hr);
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fall_through),   cmocka_unit_test(test_per_tier_min),
        cmocka_unit_test(test_none_qualifies), cmocka_unit_test(test_fail_open),
        cmocka_unit_test(test_geo_first),      cmocka_unit_test(test_with_order),
        cmocka_unit_test(test_untiered),       cmocka_unit_test(test_schema_errors),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
