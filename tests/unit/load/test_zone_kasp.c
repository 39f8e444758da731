/*
 * test_zone_kasp.c — the loader's managed zones (src/load/zone_kasp.h): a first prepare makes
 * a KSK and a ZSK in the state directory and signs at once; a reload's config keeps a zone that
 * still has a policy (its state and status) and forgets one that lost it; a policy whose
 * algorithm changed starts an algorithm rollover whose keys (both algorithms) make a valid
 * signing state; CSK policies make one combined key; unsign: true publishes CDS DELETE, waits
 * for the parent's DS to go and then drops the keys, and the flag dropped half way is refused.
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
#include "tern/conf/config.h"
#include "tern/dnssec/dnssec_zone.h"
#include "zone_kasp.h"

#define T0 1800000000

static char dir[] = "/tmp/tern-zone-kasp-XXXXXX";

static bool unsign; /* load(): the zone says unsign: true */

/* A config of one zone k.test with policy p (algorithm alg; csk when csk) in dir. */
static void load(config_t *c, unsigned alg, bool csk, bool policy)
{
    char path[512], text[1024];
    snprintf(path, sizeof(path), "%s/ternd.yaml", dir);
    snprintf(text, sizeof(text),
             "dnssec_policies:\n  - {name: p, algorithm: %u, csk: %s, propagation_delay: 2,\n"
             "     dnskey_ttl: 5, parent_ds_ttl: 5, zone_max_ttl: 5}\n"
             "dnssec_state_dir: \"%s/state\"\n"
             "zones:\n  - {origin: k.test, file: k.zone%s}\n",
             alg, csk ? "true" : "false", dir,
             !policy  ? ""
             : unsign ? ", dnssec: {policy: p, unsign: true}"
                      : ", dnssec: {policy: p}");
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
    char err[512];
    config_init(c);
    if (config_load(c, path, err, sizeof(err)) < 0)
        fail_msg("%s", err);
}

static void prepare(zone_kasp_t *k, const config_t *c, int64_t now, zone_kasp_keys_t *out)
{
    char err[512];
    if (zone_kasp_prepare(k, "k.test", &c->zones[0], c, now, out, err, sizeof(err)) < 0)
        fail_msg("%s", err);
}

/* The signing state the keys make (dnssec_zone_new_roles() checks every rule), freed. */
static void signs(zone_kasp_keys_t *out, unsigned want_zsk)
{
    dnssec_zone_t *dz = NULL;
    char err[512];
    if (dnssec_zone_new_roles((const uint8_t *)"\1k\4test", out->keys, out->roles, out->n,
                              out->cds_digest, out->cds_delete, 1, NULL, &dz, err, sizeof(err)) < 0)
        fail_msg("%s", err);
    if (want_zsk) /* 0: one or two, mid-rollover */
        assert_int_equal(dz->nzsk, want_zsk);
    dnssec_zone_free(dz);
    out->n = 0;
}

static void test_first_and_retain(void **state)
{
    (void)state;
    config_t c;
    load(&c, 13, false, true);
    zone_kasp_t *k = zone_kasp_new();
    zone_kasp_keys_t out;
    prepare(k, &c, T0, &out);
    assert_int_equal(out.n, 2);
    signs(&out, 1);
    char err[512], path[512];
    snprintf(path, sizeof(path), "%s/state/k.test.kasp", dir);
    assert_int_equal(access(path, R_OK), 0);
    char *st = zone_kasp_status(k, "k.test", err, sizeof(err));
    assert_non_null(st);
    assert_non_null(strstr(st, "KSK"));
    free(st);
    /* a reload whose config still has the policy keeps the zone */
    zone_kasp_retain(k, &c);
    st = zone_kasp_status(k, "k.test", err, sizeof(err));
    assert_non_null(st);
    free(st);
    /* one without it forgets the zone */
    config_t c2;
    load(&c2, 13, false, false);
    zone_kasp_retain(k, &c2);
    assert_null(zone_kasp_status(k, "k.test", err, sizeof(err)));
    assert_non_null(strstr(err, "no dnssec policy"));
    config_free(&c2);
    zone_kasp_free(k);
    config_free(&c);
}

static void test_algorithm_change(void **state)
{
    (void)state;
    config_t c;
    load(&c, 13, false, true); /* the state left by the test before: KSK published */
    zone_kasp_t *k = zone_kasp_new();
    zone_kasp_keys_t out;
    char err[512];
    prepare(k, &c, T0 + 100, &out); /* the KSK ready: its DS wanted */
    signs(&out, 1);
    assert_int_equal(zone_kasp_ds_seen(k, "k.test", -1, T0 + 100, true, err, sizeof(err)), 0);
    prepare(k, &c, T0 + 101, &out);
    signs(&out, 1);
    /* the policy now says 15: the new keys sign at once (pre-active), beside the old */
    c.dnssec_policies[0].algorithm = 15;
    prepare(k, &c, T0 + 102, &out);
    bool a13 = false, a15 = false;
    for (unsigned i = 0; i < out.n; i++) {
        a13 |= out.keys[i]->alg == 13;
        a15 |= out.keys[i]->alg == 15 && (out.roles[i] & DNSSEC_ROLE_SIGN_ZONE);
    }
    assert_true(a13 && a15);
    signs(&out, 2);
    /* and long after (the DS of the new KSK seen), only algorithm 15 is left */
    for (int64_t t = T0 + 200; t < T0 + 2000; t += 50) {
        prepare(k, &c, t, &out);
        signs(&out, 0);
        if (zone_kasp_ds_seen(k, "k.test", -1, t, true, err, sizeof(err)) < 0)
            continue; /* no DS wanted at this step */
    }
    prepare(k, &c, T0 + 3000, &out);
    for (unsigned i = 0; i < out.n; i++)
        assert_int_equal(out.keys[i]->alg, 15);
    signs(&out, 1);
    zone_kasp_free(k);
    config_free(&c);
}

static void test_csk(void **state)
{
    (void)state;
    char cmd[600];
    snprintf(cmd, sizeof(cmd), "rm -rf %s/state", dir);
    assert_int_equal(system(cmd), 0);
    config_t c;
    load(&c, 13, true, true);
    zone_kasp_t *k = zone_kasp_new();
    zone_kasp_keys_t out;
    prepare(k, &c, T0, &out);
    assert_int_equal(out.n, 1);
    assert_int_equal(out.roles[0] & (DNSSEC_ROLE_SIGN_ZONE | DNSSEC_ROLE_SIGN_DNSKEY),
                     DNSSEC_ROLE_SIGN_ZONE | DNSSEC_ROLE_SIGN_DNSKEY);
    signs(&out, 1);
    char err[512];
    prepare(k, &c, T0 + 100, &out);
    signs(&out, 1);
    assert_int_equal(zone_kasp_ds_seen(k, "k.test", -1, T0 + 100, true, err, sizeof(err)), 0);
    prepare(k, &c, T0 + 101, &out);
    signs(&out, 1);
    /* a CSK rollover: both CSKs sign everything from the new one's publication */
    assert_int_equal(zone_kasp_rollover(k, "k.test", "csk", T0 + 102, err, sizeof(err)), 0);
    prepare(k, &c, T0 + 102, &out);
    assert_int_equal(out.n, 2);
    signs(&out, 2);
    zone_kasp_free(k);
    config_free(&c);
}

static void test_unsign(void **state)
{
    (void)state;
    char cmd[600], err[512];
    snprintf(cmd, sizeof(cmd), "rm -rf %s/state", dir);
    assert_int_equal(system(cmd), 0);
    config_t c;
    zone_kasp_keys_t out;
    /* a zone never signed, told to unsign: no key is made, it is served unsigned */
    unsign = true;
    load(&c, 13, false, true);
    zone_kasp_t *k = zone_kasp_new();
    prepare(k, &c, T0, &out);
    assert_int_equal(out.n, 0);
    assert_false(zone_kasp_signing(k, "k.test"));
    config_free(&c);
    /* signed, its DS at the parent */
    unsign = false;
    load(&c, 13, false, true);
    prepare(k, &c, T0, &out);
    signs(&out, 1);
    prepare(k, &c, T0 + 100, &out);
    signs(&out, 1);
    assert_int_equal(zone_kasp_ds_seen(k, "k.test", -1, T0 + 100, true, err, sizeof(err)), 0);
    prepare(k, &c, T0 + 101, &out);
    signs(&out, 1);
    assert_int_equal(zone_kasp_ds_gone(k, "k.test", T0 + 101, true, err, sizeof(err)),
                     TERN_EINVAL); /* not being unsigned */
    config_free(&c);
    /* unsign: CDS DELETE, the keys stay until the DS is gone */
    unsign = true;
    load(&c, 13, false, true);
    prepare(k, &c, T0 + 200, &out);
    assert_true(out.cds_delete);
    signs(&out, 1);
    char *st = zone_kasp_status(k, "k.test", err, sizeof(err));
    assert_non_null(strstr(st, "ds_gone_wanted: yes"));
    free(st);
    assert_true(zone_kasp_signing(k, "k.test"));
    /* the flag dropped now: refused, the state unchanged */
    config_t c2;
    unsign = false;
    load(&c2, 13, false, true);
    assert_true(
        zone_kasp_prepare(k, "k.test", &c2.zones[0], &c2, T0 + 201, &out, err, sizeof(err)) < 0);
    assert_non_null(strstr(err, "it is being unsigned"));
    /* the parent's DS gone: DS TTL + propagation delay later, no key */
    assert_int_equal(zone_kasp_ds_gone(k, "k.test", T0 + 300, true, err, sizeof(err)), 0);
    prepare(k, &c, T0 + 300, &out);
    signs(&out, 1);
    prepare(k, &c, T0 + 300 + 5 + 2, &out);
    assert_int_equal(out.n, 0);
    assert_false(zone_kasp_signing(k, "k.test"));
    /* and without the flag again: signed afresh, new keys */
    prepare(k, &c2, T0 + 400, &out);
    assert_int_equal(out.n, 2);
    assert_false(out.cds_delete);
    signs(&out, 1);
    config_free(&c2);
    config_free(&c);
    zone_kasp_free(k);
}

static int setup(void **state)
{
    (void)state;
    return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[600];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    return system(cmd) == 0 ? 0 : -1;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_first_and_retain),
        cmocka_unit_test(test_algorithm_change),
        cmocka_unit_test(test_csk),
        cmocka_unit_test(test_unsign),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
