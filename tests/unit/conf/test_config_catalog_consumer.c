/*
 * test_config_catalog_consumer.c — a secondary zone's catalog_consumer (config_catalog_consumer.c):
 * its directory (resolved like every path), its groups and their primaries with keys, a copy
 * (reloads) equal to the original, and the mistakes refused with file:line.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "conf_test_util.h"

#define KEY "tsig_keys: [{name: xfr-key, algorithm: hmac-sha256, secret: \"c2VjcmV0c2VjcmV0\"}]\n"

static void expect_catalog(const config_t *c)
{
    assert_int_equal(c->nzones, 2);
    const config_zone_t *z = &c->zones[0];
    assert_null(z->catalog_consumer);
    z = &c->zones[1];
    assert_string_equal(z->origin, "catalog.test");
    const config_catalog_consumer_t *cc = z->catalog_consumer;
    assert_non_null(cc);
    assert_string_equal(cc->directory, "/var/lib/tern/catalog");
    assert_int_equal(cc->ngroups, 2);
    assert_string_equal(cc->groups[0].name, "special");
    assert_int_equal(cc->groups[0].nprimaries, 2);
    assert_string_equal(cc->groups[0].primaries[0].text, "192.0.2.9@5300");
    assert_string_equal(cc->groups[0].primaries[1].text, "192.0.2.10@53");
    assert_string_equal(cc->groups[0].primaries[1].key, "xfr-key");
    assert_string_equal(cc->groups[1].name, "Other.Group");
    assert_int_equal(cc->groups[1].nprimaries, 1);
    assert_null(cc->groups[1].primaries[0].key);
}

static void test_catalog_consumer(void **state)
{
    (void)state;
    config_t c = load_text(KEY "zones:\n"
                               "  - {origin: a.test, primary: 192.0.2.1}\n"
                               "  - origin: catalog.test\n"
                               "    primary: {address: 192.0.2.1, key: xfr-key}\n"
                               "    catalog_consumer:\n"
                               "      directory: /var/lib/tern/catalog\n"
                               "      groups:\n"
                               "        special:\n"
                               "          primary: [\"192.0.2.9@5300\",\n"
                               "                    {address: 192.0.2.10, key: xfr-key}]\n"
                               "        Other.Group: {primary: 192.0.2.11}\n");
    expect_catalog(&c);
    config_t d;
    config_init(&d);
    assert_int_equal(config_copy(&d, &c), 0);
    config_free(&c);
    expect_catalog(&d);
    config_free(&d);
}

/* a relative directory is relative to the config file's, and groups are optional */
static void test_catalog_relative(void **state)
{
    (void)state;
    config_t c = load_text("zones:\n"
                           "  - origin: catalog.test\n"
                           "    primary: 192.0.2.1\n"
                           "    catalog_consumer: {directory: cat}\n");
    const config_catalog_consumer_t *cc = c.zones[0].catalog_consumer;
    assert_non_null(cc);
    assert_string_equal(cc->directory, "/tmp/cat");
    assert_int_equal(cc->ngroups, 0);
    config_free(&c);
}

static void test_catalog_errors(void **state)
{
    (void)state;
    expect_error("zones:\n  - origin: catalog.test\n    file: x.zone\n"
                 "    catalog_consumer: {directory: d}\n",
                 4,
                 "zones[0]: catalog_consumer: only a secondary zone (with primary) is a catalog to "
                 "consume");
    expect_error("zones:\n  - origin: catalog.test\n    primary: 192.0.2.1\n"
                 "    catalog_consumer: {groups: {}}\n",
                 4,
                 "zones[0]: catalog_consumer: missing \"directory\" (the member list and the "
                 "members' copies (relative to the config file's directory))");
    expect_error("zones:\n  - origin: catalog.test\n    primary: 192.0.2.1\n"
                 "    catalog_consumer: {directory: d, groups: [a]}\n",
                 4,
                 "zones[0]: catalog_consumer: groups: expected a mapping of group names, got a "
                 "list");
    expect_error("zones:\n  - origin: catalog.test\n    primary: 192.0.2.1\n"
                 "    catalog_consumer: {directory: d, groups: {g: {address: 192.0.2.2}}}\n",
                 4,
                 "zones[0]: catalog_consumer: groups: g: unknown key \"address\" (want "
                 "primary)");
    expect_error("zones:\n  - origin: catalog.test\n    primary: 192.0.2.1\n"
                 "    catalog_consumer:\n      directory: d\n      groups:\n"
                 "        g: {primary: {address: 192.0.2.2, key: nokey}}\n",
                 7,
                 "zone catalog.test: catalog_consumer: groups: g: primary: no TSIG key "
                 "\"nokey\" in tsig_keys or tsig_key_file");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_catalog_consumer),
        cmocka_unit_test(test_catalog_relative),
        cmocka_unit_test(test_catalog_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
