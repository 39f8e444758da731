/*
 * test_config_dnssec.c — "dnssec_policies:", a zone's dnssec: {policy} and dnssec_state_dir
 * (src/conf/config_dnssec.c): every key read, the defaults (Knot's, as the key-state machine
 * has them), copies; every bad value with its file:line (run under ASan: nothing may leak).
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

#include "tern/conf/config.h"

#include "conf_test_util.h"

static const char *const full = "dnssec_state_dir: /var/lib/tern/dnssec\n"
                                "dnssec_policies:\n"
                                "  - name: fast\n"
                                "    algorithm: 15\n"
                                "    zsk_lifetime: 20\n"
                                "    propagation_delay: 2\n"
                                "    dnskey_ttl: 5\n"
                                "    parent_ds_ttl: 5\n"
                                "    zone_max_ttl: 5\n"
                                "    cds_digest: 4\n"
                                "    csk: true\n"
                                "    signature_lifetime: 86400\n"
                                "    signature_refresh: 7200\n"
                                "  - {name: default}\n"
                                "zones:\n"
                                "  - {origin: a.test, file: a.zone, dnssec: {policy: fast}}\n"
                                "  - {origin: b.test, file: b.zone, dnssec: {policy: fast, "
                                "unsign: true}}\n";

static void test_full(void **state)
{
    (void)state;
    config_t c = load_text(full);
    assert_string_equal(c.dnssec_state_dir, "/var/lib/tern/dnssec");
    assert_int_equal(c.ndnssec_policies, 2);
    const config_dnssec_policy_t *f = config_dnssec_policy_find(&c, "fast");
    assert_non_null(f);
    assert_int_equal(f->algorithm, 15);
    assert_int_equal(f->zsk_lifetime, 20);
    assert_int_equal(f->cds_digest, 4);
    assert_true(f->cds);
    assert_true(f->csk);
    assert_string_equal(c.zones[0].dnssec_policy, "fast");
    assert_false(c.zones[0].dnssec_unsign);
    assert_true(c.zones[1].dnssec_unsign);
    /* signatures: the policy's own, else the server's */
    unsigned life, refresh;
    config_dnssec_signatures(&c, f, &life, &refresh);
    assert_int_equal(life, 86400);
    assert_int_equal(refresh, 7200);
    config_dnssec_signatures(&c, config_dnssec_policy_find(&c, "default"), &life, &refresh);
    assert_int_equal(life, c.dnssec_lifetime);
    assert_int_equal(refresh, c.dnssec_refresh);
    /* the defaults are the key-state machine's */
    const config_dnssec_policy_t *d = config_dnssec_policy_find(&c, "default");
    dnssec_kasp_policy_t kd, kp;
    dnssec_kasp_policy_default(&kd);
    config_dnssec_policy_kasp(d, &kp);
    assert_int_equal(kp.algorithm, kd.algorithm);
    assert_int_equal(kp.zsk_lifetime, kd.zsk_lifetime);
    assert_int_equal(kp.ksk_lifetime, kd.ksk_lifetime);
    assert_int_equal(kp.propagation_delay, kd.propagation_delay);
    assert_int_equal(kp.dnskey_ttl, kd.dnskey_ttl);
    assert_int_equal(kp.parent_ds_ttl, kd.parent_ds_ttl);
    assert_int_equal(kp.cds_digest, kd.cds_digest);
    assert_int_equal(kp.publish_cds, kd.publish_cds);
    assert_int_equal(kp.rsa_bits, kd.rsa_bits);
    assert_null(config_dnssec_policy_find(&c, "other"));
    /* a copy owns its names */
    config_t e;
    assert_int_equal(config_copy(&e, &c), 0);
    assert_ptr_not_equal(e.dnssec_policies, c.dnssec_policies);
    assert_string_equal(e.dnssec_policies[0].name, "fast");
    assert_string_equal(e.zones[0].dnssec_policy, "fast");
    assert_true(e.zones[1].dnssec_unsign);
    config_free(&e);
    config_free(&c);
}

static void test_state_dir_default(void **state)
{
    (void)state;
    config_t c;
    config_init(&c);
    char buf[256];
    unsetenv("STATE_DIRECTORY");
    assert_null(config_dnssec_state_dir(&c, buf, sizeof(buf)));
    setenv("STATE_DIRECTORY", "/var/lib/tern:/var/lib/other", 1);
    assert_string_equal(config_dnssec_state_dir(&c, buf, sizeof(buf)), "/var/lib/tern/dnssec");
    unsetenv("STATE_DIRECTORY");
    config_free(&c);
}

static void test_errors(void **state)
{
    (void)state;
    expect_error("dnssec_policies:\n  - {algorithm: 13}\n", 2,
                 "dnssec_policies[0]: missing \"name\" (what zones call it)");
    expect_error("dnssec_policies:\n  - {name: a, algorithm: 10}\n", 2,
                 "dnssec_policies[0]: algorithm: 10 is not supported: use 8, 13 or 15");
    expect_error("dnssec_policies:\n  - {name: a}\n  - {name: a}\n", 3,
                 "dnssec_policies[1]: name: \"a\" is given twice");
    expect_error("dnssec_policies:\n  - {name: a, cds_digest: 3}\n", 2,
                 "dnssec_policies[0]: cds_digest: 3: use 2 or 4");
    expect_error("dnssec_policies:\n  - {name: a, signature_lifetime: 60}\n", 2,
                 "dnssec_policies[0]: signature_lifetime: 60: at least 3600 (or 0: "
                 "dnssec_lifetime)");
    expect_error("dnssec_policies:\n  - {name: a, signature_refresh: 60}\n", 2,
                 "dnssec_policies[0]: signature_refresh: 60: at least 600 (or 0: "
                 "dnssec_refresh)");
    expect_error("dnssec_policies: {name: a}\n", 1,
                 "dnssec_policies: expected a list of {name, algorithm, ...}, got a mapping");
    expect_error("zones:\n  - {origin: a.test, file: a.zone, dnssec: {keys: [k], unsign: true}}\n",
                 2,
                 "zones[0]: dnssec: unsign: only with policy (static keys are removed by removing "
                 "dnssec, once the parent has no DS)");
    expect_error("zones:\n  - {origin: a.test, file: a.zone, dnssec: {policy: p, unsign: 1}}\n", 2,
                 "zones[0]: dnssec: unsign: expected true or false, got a plain scalar");
    expect_error("zones:\n  - {origin: a.test, file: a.zone, dnssec: {}}\n", 2,
                 "zones[0]: dnssec: expected keys or policy (one of them)");
    expect_error("zones:\n  - {origin: a.test, file: a.zone, dnssec: {keys: [k], policy: p}}\n", 2,
                 "zones[0]: dnssec: expected keys or policy (one of them)");
}

/* Errors of the whole file (a zone naming what is not there) name the file, not a line. */
static void test_check(void **state)
{
    (void)state;
    static const struct {
        const char *text, *msg;
    } cases[] = {
        {"dnssec_state_dir: /tmp/x\nzones:\n  - {origin: a.test, file: a.zone, dnssec: {policy: "
         "p}}\n",
         "zone a.test: dnssec: policy \"p\" is not in dnssec_policies"},
        {"dnssec_policies: [{name: p}]\nzones:\n  - {origin: a.test, file: a.zone, dnssec: "
         "{policy: p}}\n",
         "zones with a dnssec policy need dnssec_state_dir (where their keys and key states are "
         "kept)"},
        /* a policy's refresh against the server's lifetime, known once the file is read */
        {"dnssec_lifetime: 7200\ndnssec_refresh: 600\ndnssec_policies: [{name: p, "
         "signature_refresh: 3600}]\n",
         "dnssec_policies p: signature refresh 3600 must be less than the signature lifetime "
         "7200 minus 3600"},
    };
    unsetenv("STATE_DIRECTORY");
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        config_t c;
        char err[512] = "", want[512];
        config_init(&c);
        const char *path = write_tmp(cases[i].text);
        assert_true(config_load(&c, path, err, sizeof(err)) < 0);
        snprintf(want, sizeof(want), "%s: %s", path, cases[i].msg);
        assert_string_equal(err, want);
        unlink(path);
        config_free(&c);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_full),
        cmocka_unit_test(test_state_dir_default),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_check),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
