/*
 * test_config_catalog.c — catalog zones tern produces (src/conf/config_catalog.c): the catalogs
 * block (origin, members, the transfer settings that become a file-less zone entry), a zone's
 * catalog, catalog_group and catalog_coo, every error with its file:line, and copies (run under
 * ASan: a copy owns everything it points to).
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

#include "conf_test_util.h"

static const char good[] = "tsig_keys: [{name: k1, algorithm: hmac-sha256, secret: "
                           "\"c2VjcmV0c2VjcmV0c2VjcmV0\"}]\n"
                           "catalogs:\n"
                           "  - origin: Cat.Example.\n"
                           "    members: all\n"
                           "    allow_transfer: [127.0.0.1]\n"
                           "    notify: [\"127.0.0.1@5300\"]\n"
                           "    transfer_key: k1\n"
                           "  - origin: listed.example\n"
                           "    allow_transfer: 192.0.2.0/24\n"
                           "zones:\n"
                           "  - origin: a.test\n"
                           "    file: a.zone\n"
                           "    catalog: listed.example.\n"
                           "    catalog_group: blue\n"
                           "  - origin: r.test\n"
                           "    catalog_group: red\n"
                           "    catalog_coo: other.example\n";

/* The zone entry of origin o in c, or NULL. */
static const config_zone_t *zone_of(const config_t *c, const char *o)
{
    for (size_t i = 0; i < c->nzones; i++)
        if (strcmp(c->zones[i].origin, o) == 0)
            return &c->zones[i];
    return NULL;
}

static void check_good(const config_t *c)
{
    assert_int_equal(c->ncatalogs, 2);
    assert_string_equal(c->catalogs[0].origin, "Cat.Example.");
    assert_true(c->catalogs[0].members_all);
    assert_int_equal(c->catalogs[0].line, 3);
    assert_string_equal(c->catalogs[1].origin, "listed.example");
    assert_false(c->catalogs[1].members_all);
    /* each catalog's transfer settings: a zone entry without a file */
    const config_zone_t *z = zone_of(c, "Cat.Example.");
    assert_non_null(z);
    assert_null(z->file);
    assert_int_equal(z->nprimaries, 0);
    assert_int_equal(z->allow_transfer.n, 1);
    assert_int_equal(z->nnotify, 1);
    assert_string_equal(z->notify[0].text, "127.0.0.1@5300");
    assert_string_equal(z->transfer_key, "k1");
    z = zone_of(c, "listed.example");
    assert_non_null(z);
    assert_int_equal(z->allow_transfer.n, 1);
    assert_int_equal(z->nnotify, 0);
    assert_null(z->transfer_key);
    z = zone_of(c, "a.test");
    assert_non_null(z->file);
    assert_string_equal(z->catalog, "listed.example.");
    assert_string_equal(z->catalog_group, "blue");
    assert_null(z->catalog_coo);
    assert_int_equal(z->catalog_line, 13);
    /* a zone from Redis: an entry with only its catalog keys */
    z = zone_of(c, "r.test");
    assert_null(z->file);
    assert_null(z->catalog);
    assert_string_equal(z->catalog_group, "red");
    assert_string_equal(z->catalog_coo, "other.example");
}

static void test_catalogs(void **state)
{
    (void)state;
    config_t c = load_text(good);
    check_good(&c);
    config_t d;
    assert_int_equal(config_copy(&d, &c), 0);
    config_free(&c); /* the copy owns its own */
    check_good(&d);
    config_free(&d);
    /* none: nothing */
    c = load_text("catalogs: ~\n");
    assert_int_equal(c.ncatalogs, 0);
    assert_int_equal(c.nzones, 0);
    config_free(&c);
}

static void test_catalog_errors(void **state)
{
    (void)state;
    expect_error("catalogs:\n  - origin: c.example\n", 2,
                 "catalogs[0]: a catalog is for its consumers: give allow_transfer (and notify)");
    expect_error("catalogs:\n  - {origin: c.example, allow_transfer: 127.0.0.1, members: some}\n",
                 2, "catalogs[0]: members: expected listed or all, got \"some\"");
    expect_error("catalogs:\n  - {origin: \"a..b\", allow_transfer: 127.0.0.1}\n", 2,
                 "catalogs[0]: origin: expected a domain name, got a string");
    expect_error("catalogs:\n  - {allow_transfer: 127.0.0.1}\n", 2,
                 "catalogs[0]: missing \"origin\" (the catalog zone's name (RFC 9432))");
    expect_error("catalogs:\n  - {origin: c.example, allow_transfer: 127.0.0.1, file: x}\n", 2,
                 "catalogs[0]: unknown key \"file\" (want origin, members, notify, "
                 "allow_transfer, transfer_key)");
    expect_error("catalogs:\n  - {origin: c.example, allow_transfer: 127.0.0.1}\n"
                 "  - {origin: C.Example., notify: 127.0.0.1}\n",
                 3, "catalogs: C.Example. is given twice");
    expect_error("catalogs:\n  - {origin: c.example, allow_transfer: 127.0.0.1}\n"
                 "zones:\n  - {origin: c.example, file: c.zone}\n",
                 2,
                 "catalogs: c.example is also a zone entry (a catalog zone is made by tern: its "
                 "transfer settings go in its catalogs entry)");
    expect_error("catalogs:\n  - {origin: c.example, allow_transfer: 127.0.0.1}\n"
                 "zones:\n  - {origin: a.test, file: a.zone,\n     catalog: d.example}\n",
                 5, "zone a.test: catalog: no such entry in catalogs");
    expect_error("catalogs:\n  - {origin: c.example, allow_transfer: 127.0.0.1}\n"
                 "zones:\n  - {origin: s.test, primary: 192.0.2.1, catalog_group: g}\n",
                 4,
                 "zone s.test: a secondary zone is a member of its primary's catalog, not of "
                 "tern's");
    expect_error("zones:\n  - {origin: a.test, file: a.zone, catalog_group: \"\"}\n", 2,
                 "zones[0]: catalog_group: expected a group name of 1..255 bytes, got a string");
    expect_error("zones:\n  - {origin: a.test, file: a.zone, catalog_coo: [x]}\n", 2,
                 "zones[0]: catalog_coo: expected a catalog zone's name, got a list");
    /* the keys a catalog names must exist, as a zone's */
    expect_error("catalogs:\n  - {origin: c.example, allow_transfer: 127.0.0.1,\n"
                 "     transfer_key: nokey}\n",
                 3,
                 "zone c.example: transfer_key: no TSIG key \"nokey\" in tsig_keys or "
                 "tsig_key_file");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_catalogs),
        cmocka_unit_test(test_catalog_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
