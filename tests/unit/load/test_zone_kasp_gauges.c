/*
 * test_zone_kasp_gauges.c — the metrics snapshot of the zones whose keys tern manages
 * (zone_kasp_gauges(), src/load/zone_kasp.c): after each step of a real key state (real keys
 * generated in a temporary state directory, a policy read from YAML) the counts by role and
 * state, the next event and the DS wait are those the step left; the snapshot is a copy that
 * later steps do not change; a zone never stepped and a forgotten zone are left out.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "test_util.h"

#include "tern/conf/config.h"
#include "tern/dnssec/dnssec_kasp.h"
#include "zone_kasp.h"

/* Any fixed wall clock: the key state reads no clock, zone_kasp_prepare() takes now. */
#define T0 1800000000

static char dir[64];
static config_t cfg;

/* Two zones with the test policy (5 s TTLs, as test_dnssec_kasp.py's), state under dir. */
static int setup(void **state)
{
    (void)state;
    tu_mkdtemp(dir, sizeof(dir), "tern-zone-kasp");
    char text[1024], path[128], err[512] = "";
    snprintf(text, sizeof(text),
             "listen: [\"127.0.0.1:53\"]\n"
             "dnssec_state_dir: %s/state\n"
             "dnssec_policies:\n"
             "  - {name: fast, algorithm: 13, zsk_lifetime: 20, propagation_delay: 2,\n"
             "     dnskey_ttl: 5, parent_ds_ttl: 5, zone_max_ttl: 5}\n"
             "zones:\n"
             "  - {origin: a.test, file: %s/a.zone, dnssec: {policy: fast}}\n"
             "  - {origin: b.test, file: %s/a.zone, dnssec: {policy: fast}}\n",
             dir, dir, dir);
    tu_write_file(dir, "ternd.yaml", text);
    snprintf(path, sizeof(path), "%s/ternd.yaml", dir);
    config_init(&cfg);
    int rc = config_load(&cfg, path, err, sizeof(err));
    if (rc < 0)
        print_error("%s\n", err);
    assert_int_equal(rc, 0);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    config_free(&cfg);
    tu_rmtree(dir);
    return 0;
}

/* Step zone i of cfg (key "a.test" or "b.test") to now; its keys are released at once. */
static void prepare(zone_kasp_t *k, size_t i, int64_t now)
{
    zone_kasp_keys_t keys;
    char err[512] = "";
    int rc = zone_kasp_prepare(k, cfg.zones[i].origin, &cfg.zones[i], &cfg, now, &keys, err,
                               sizeof(err));
    if (rc < 0)
        print_error("%s\n", err);
    assert_int_equal(rc, 0);
    assert_true(keys.n > 0);
    for (unsigned j = 0; j < keys.n; j++)
        dnssec_key_free(keys.keys[j]);
}

/* The entry of zone in a snapshot of n. */
static const loader_dnssec_keys_t *find(const loader_dnssec_keys_t *g, size_t n, const char *zone)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(g[i].zone, zone) == 0)
            return &g[i];
    fail_msg("zone %s not in the snapshot", zone);
    return NULL;
}

/* Keys of zone a.test in every state but these two counts, which must be as given. */
static void expect_counts(const loader_dnssec_keys_t *z, dnssec_kasp_state_t ksk, uint32_t nksk,
                          dnssec_kasp_state_t zsk, uint32_t nzsk)
{
    for (unsigned r = 0; r < LOADER_DNSSEC_ROLES; r++)
        for (unsigned s = 0; s < DNSSEC_KASP_STATE_COUNT; s++) {
            uint32_t want = r == DNSSEC_KASP_KSK && s == ksk   ? nksk
                            : r == DNSSEC_KASP_ZSK && s == zsk ? nzsk
                                                               : 0;
            if (z->count[r][s] != want)
                fail_msg("%s %s: %u keys, want %u", dnssec_kasp_role_name(r),
                         dnssec_kasp_state_name(s), z->count[r][s], want);
        }
}

static void test_gauges_follow_the_steps(void **state)
{
    (void)state;
    zone_kasp_t *k = zone_kasp_new();
    assert_non_null(k);
    loader_dnssec_keys_t *g = NULL;
    size_t n = 99;
    assert_int_equal(zone_kasp_gauges(k, &g, &n), 0);
    assert_null(g);
    assert_int_equal(n, 0);

    /* the first step: a KSK and a ZSK, published and signing; the KSK's DS not wanted yet */
    prepare(k, 0, T0);
    assert_int_equal(zone_kasp_gauges(k, &g, &n), 0);
    assert_int_equal(n, 1);
    const loader_dnssec_keys_t *a = find(g, n, "a.test");
    expect_counts(a, DNSSEC_KASP_PUBLISHED, 1, DNSSEC_KASP_ACTIVE, 1);
    assert_false(a->ds_wanted);
    /* ready once unsigned answers cached before have expired: max(5, 5) + 2 s */
    assert_int_equal(a->next_event, T0 + 7);
    loader_dnssec_keys_t *first = g;

    /* at that event the KSK is ready and its DS wanted; nothing moves by itself until the DS is
     * seen, but the ZSK's successor is due before its 20 s lifetime ends */
    prepare(k, 0, T0 + 7);
    assert_int_equal(zone_kasp_gauges(k, &g, &n), 0);
    a = find(g, n, "a.test");
    expect_counts(a, DNSSEC_KASP_READY, 1, DNSSEC_KASP_ACTIVE, 1);
    assert_true(a->ds_wanted);
    /* the earlier snapshot is a copy: it still says what the first step left */
    expect_counts(first, DNSSEC_KASP_PUBLISHED, 1, DNSSEC_KASP_ACTIVE, 1);
    assert_false(first->ds_wanted);
    assert_string_equal(first->zone, "a.test");
    free(first);
    free(g);

    /* the DS seen: the KSK active, no DS wanted */
    char err[256] = "";
    assert_int_equal(zone_kasp_ds_seen(k, "a.test", -1, T0 + 8, true, err, sizeof(err)), 0);
    prepare(k, 0, T0 + 8);
    /* a second zone: the block holds both names */
    prepare(k, 1, T0 + 8);
    assert_int_equal(zone_kasp_gauges(k, &g, &n), 0);
    assert_int_equal(n, 2);
    a = find(g, n, "a.test");
    expect_counts(a, DNSSEC_KASP_ACTIVE, 1, DNSSEC_KASP_ACTIVE, 1);
    assert_false(a->ds_wanted);
    assert_true(a->next_event > T0 + 8);
    const loader_dnssec_keys_t *b = find(g, n, "b.test");
    expect_counts(b, DNSSEC_KASP_PUBLISHED, 1, DNSSEC_KASP_ACTIVE, 1);
    assert_int_equal(b->next_event, T0 + 8 + 7);
    int64_t t = a->next_event;
    free(g);

    /* at that event the ZSK's successor is published (the KSK never rolls by itself) */
    prepare(k, 0, t);
    assert_int_equal(zone_kasp_gauges(k, &g, &n), 0);
    a = find(g, n, "a.test");
    assert_int_equal(a->count[DNSSEC_KASP_ZSK][DNSSEC_KASP_PUBLISHED], 1);
    assert_int_equal(a->count[DNSSEC_KASP_ZSK][DNSSEC_KASP_ACTIVE], 1);
    assert_int_equal(a->count[DNSSEC_KASP_KSK][DNSSEC_KASP_ACTIVE], 1);
    assert_true(a->next_event > t);
    free(g);

    /* a zone the config no longer manages is forgotten, and so are its gauges */
    config_t one;
    config_init(&one);
    assert_int_equal(config_copy(&one, &cfg), 0);
    free(one.zones[1].dnssec_policy);
    one.zones[1].dnssec_policy = NULL;
    zone_kasp_retain(k, &one);
    config_free(&one);
    assert_int_equal(zone_kasp_gauges(k, &g, &n), 0);
    assert_int_equal(n, 1);
    assert_string_equal(g[0].zone, "a.test");
    free(g);
    zone_kasp_free(k);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_gauges_follow_the_steps, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
