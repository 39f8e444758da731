/*
 * test_source_catalog.c — the catalog producer (tern/source/source_catalog.h): the catalog
 * zone's records (RFC 9432 §4: SOA, NS invalid., version "2", member PTRs, group and coo), ids
 * pinned (they must never change between versions of tern), and the source as the loader drives
 * it: members from the table served and the config (members: all and listed, secondaries, the
 * catalog itself and unavailable zones left out), a new version and a poke only when members or
 * their properties change, a rising serial, a catalog dropped with its config.
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

#include "tern/common/byteorder.h"
#include "tern/common/err.h"
#include "tern/conf/config.h"
#include "tern/source/source_catalog.h"
#include "tern/wire/dname.h"
#include "tern/zone/zone_builder.h"
#include "tern/zone/zone_table.h"

/* The RRset of type at name (presentation) in z, or NULL. */
static const zone_rrset_t *rrset(const zone_t *z, const char *name, uint16_t type)
{
    uint8_t w[DNAME_MAXLEN], lc[DNAME_MAXLEN];
    const char *why;
    int n = dname_from_str(name, strlen(name), false, w, &why);
    assert_true(n > 0);
    size_t len = dname_lower(lc, w);
    const zone_node_t *node = zone_find_node(z, lc, len, dname_hash(lc));
    return node ? zone_node_rrset(node, type) : NULL;
}

/* The single RR's RDATA of that RRset (and its length), asserting there is exactly one. */
static const uint8_t *rdata1(const zone_t *z, const char *name, uint16_t type, uint16_t *len)
{
    const zone_rrset_t *s = rrset(z, name, type);
    if (!s)
        fail_msg("no %u at %s", type, name);
    assert_int_equal(s->count, 1);
    *len = tern_rd16(s->rdata);
    return s->rdata + 2;
}

/* Whether the PTR at name points to target. */
static bool ptr_is(const zone_t *z, const char *name, const char *target)
{
    uint16_t len;
    const uint8_t *rd = rdata1(z, name, WIRE_T_PTR, &len);
    char text[DNAME_KEY_MAX];
    assert_true(dname_to_str(rd, text, sizeof(text)) > 0);
    return strcmp(text, target) == 0;
}

static void test_ids_pinned(void **state)
{
    (void)state;
    char id[SOURCE_CATALOG_ID_LEN];
    /* a member's id is what consumers key it by: a tern that changed it would make every
     * consumer drop and re-add every zone (RFC 9432 §5.3), so it is pinned here */
    source_catalog_id("a.test", id);
    assert_string_equal(id, "18f7d9b971ef202c");
    source_catalog_id("b.test", id);
    assert_string_equal(id, "7683145e53acf77f");
    char again[SOURCE_CATALOG_ID_LEN];
    source_catalog_id("a.test", again);
    assert_string_equal(again, "18f7d9b971ef202c");
}

static void test_build(void **state)
{
    (void)state;
    const source_catalog_entry_t m[] = {
        {"a.test", "blue", NULL},
        {"b.test", NULL, "new.example"},
        {"c.test", NULL, NULL},
    };
    zone_t *z = NULL;
    char err[256] = "";
    assert_int_equal(source_catalog_build("cat.example", m, 3, 4242, &z, err, sizeof(err)), 0);
    assert_int_equal(z->serial, 4242);
    uint16_t len;
    const uint8_t *rd = rdata1(z, "cat.example", WIRE_T_SOA, &len);
    static const uint8_t invalid[] = {7, 'i', 'n', 'v', 'a', 'l', 'i', 'd', 0};
    assert_int_equal(len, 2 * sizeof(invalid) + 20);
    assert_memory_equal(rd, invalid, sizeof(invalid));
    assert_int_equal(tern_rd32(rd + 2 * sizeof(invalid)), 4242);
    rd = rdata1(z, "cat.example", WIRE_T_NS, &len);
    assert_int_equal(len, sizeof(invalid));
    assert_memory_equal(rd, invalid, sizeof(invalid));
    rd = rdata1(z, "version.cat.example", WIRE_T_TXT, &len);
    assert_int_equal(len, 2);
    assert_memory_equal(rd, "\0012", 2);
    assert_true(ptr_is(z, "18f7d9b971ef202c.zones.cat.example", "a.test."));
    assert_true(ptr_is(z, "7683145e53acf77f.zones.cat.example", "b.test."));
    rd = rdata1(z, "group.18f7d9b971ef202c.zones.cat.example", WIRE_T_TXT, &len);
    assert_int_equal(len, 5);
    assert_memory_equal(rd, "\004blue", 5);
    assert_true(ptr_is(z, "coo.7683145e53acf77f.zones.cat.example", "new.example."));
    assert_null(rrset(z, "group.7683145e53acf77f.zones.cat.example", WIRE_T_TXT));
    assert_null(rrset(z, "coo.18f7d9b971ef202c.zones.cat.example", WIRE_T_PTR));
    /* SOA, NS, version, 3 PTRs, one group, one coo */
    assert_int_equal(z->rr_count, 8);
    zone_free(z);
    /* an empty catalog is a valid one */
    assert_int_equal(source_catalog_build("cat.example", NULL, 0, 1, &z, err, sizeof(err)), 0);
    assert_int_equal(z->rr_count, 3);
    zone_free(z);
}

/* ---- the source as the loader drives it ---------------------------------------------------- */

static unsigned pokes;

static void poke(void *ctx, zone_source_t *src)
{
    (void)ctx;
    (void)src;
    pokes++;
}

static zone_t *mkzone(const char *origin)
{
    uint8_t apex[DNAME_MAXLEN], soa[2 * DNAME_MAXLEN + 20];
    const char *why;
    int n = dname_from_str(origin, strlen(origin), false, apex, &why);
    assert_true(n > 0);
    memcpy(soa, apex, (size_t)n);
    memcpy(soa + n, apex, (size_t)n);
    memset(soa + 2 * n, 0, 20);
    zone_builder_t *b = zone_builder_new(apex, origin);
    assert_non_null(b);
    assert_int_equal(zone_builder_add(b, apex, WIRE_T_SOA, WIRE_CLASS_IN, 60, soa,
                                      (uint16_t)(2 * n + 20), NULL, 0),
                     0);
    assert_int_equal(
        zone_builder_add(b, apex, WIRE_T_NS, WIRE_CLASS_IN, 60, apex, (uint16_t)n, NULL, 0), 0);
    zone_t *z = NULL;
    char err[256];
    assert_int_equal(zone_builder_finish(b, &z, err, sizeof(err)), 0);
    return z;
}

/* A table of these zones (NULL-terminated); "!name": served unavailable. */
static zone_table_t *table(const char *const *names)
{
    zone_table_t *t = zone_table_new();
    assert_non_null(t);
    for (; *names; names++) {
        zone_t *z;
        if (**names == '!') {
            uint8_t apex[DNAME_MAXLEN];
            const char *why;
            assert_true(dname_from_str(*names + 1, strlen(*names + 1), false, apex, &why) > 0);
            z = zone_new_unavailable(apex, "test");
        } else {
            z = mkzone(*names);
        }
        assert_non_null(z);
        assert_int_equal(zone_table_add(t, z), 0);
    }
    assert_int_equal(zone_table_freeze(t), 0);
    return t;
}

static config_t config(const char *text)
{
    char path[] = "/tmp/tern_catalog_XXXXXX", err[512] = "";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
    config_t c;
    config_init(&c);
    int rc = config_load(&c, path, err, sizeof(err));
    unlink(path);
    if (rc < 0)
        fail_msg("%s", err);
    return c;
}

/* The one catalog zone the source serves (asserting there is one). */
static const zone_t *served(zone_source_t *s)
{
    size_t n = 0;
    zone_source_zone_t *z = s->ops->zones(s, &n);
    assert_int_equal(n, 1);
    assert_string_equal(z[0].key, "cat.example");
    return z[0].zone;
}

static const char cfg_all[] = "catalogs:\n"
                              "  - {origin: cat.example, members: all, allow_transfer: 127.0.0.1}\n"
                              "zones:\n"
                              "  - {origin: a.test, file: a.zone, catalog_group: blue}\n"
                              "  - {origin: s.test, primary: 192.0.2.1}\n";

static void test_source(void **state)
{
    (void)state;
    const zone_source_env_t env = {.sink = {.poke = poke}};
    zone_source_t *s = zone_source_new(&source_catalog_ops, &env);
    assert_non_null(s);
    config_t cfg = config(cfg_all);
    /* a.test (a file), r.test (Redis: not configured), s.test (a secondary), the catalog
     * itself, an unavailable zone */
    static const char *const names[] = {"a.test",      "r.test",  "s.test",
                                        "cat.example", "!u.test", NULL};
    zone_table_t *t = table(names);
    pokes = 0;
    assert_false(s->ops->wait_first(s));
    s->ops->published(s, t, &cfg);
    assert_int_equal(pokes, 1);
    assert_true(s->ops->wait_first(s)); /* startup serves it before the first answers */
    assert_true(s->ops->collect(s));
    assert_false(s->ops->collect(s));
    const zone_t *z1 = served(s);
    assert_true(ptr_is(z1, "18f7d9b971ef202c.zones.cat.example", "a.test."));
    assert_non_null(rrset(z1, "group.18f7d9b971ef202c.zones.cat.example", WIRE_T_TXT));
    char id[SOURCE_CATALOG_ID_LEN], name[128];
    source_catalog_id("r.test", id);
    snprintf(name, sizeof(name), "%s.zones.cat.example", id);
    assert_true(ptr_is(z1, name, "r.test."));
    assert_int_equal(z1->rr_count, 3 + 2 + 1); /* apex 3, two PTRs, a.test's group */
    uint32_t serial1 = z1->serial;

    /* the same members again: no version, no poke (no churn) */
    s->ops->published(s, t, &cfg);
    assert_int_equal(pokes, 1);
    assert_false(s->ops->collect(s));
    assert_ptr_equal(served(s), z1);
    /* ... and a config that changed nothing of it (a reload): none either */
    assert_int_equal(s->ops->configure(s, &cfg, NULL, false), 0);
    s->ops->published(s, t, &cfg);
    assert_int_equal(pokes, 1);
    assert_ptr_equal(served(s), z1);

    /* the same names, r.test now unavailable (a secondary expired would be; here: it leaves) */
    static const char *const expired[] = {"a.test", "!r.test", "s.test", "cat.example", NULL};
    zone_table_t *t2 = table(expired);
    s->ops->published(s, t2, &cfg);
    assert_int_equal(pokes, 2);
    assert_null(rrset(served(s), name, WIRE_T_PTR));
    s->ops->published(s, t, &cfg); /* back */
    assert_int_equal(pokes, 3);
    assert_true(ptr_is(served(s), name, "r.test."));
    zone_table_free(t2);
    pokes = 1;

    /* a property changed: a new version with a higher serial */
    config_free(&cfg);
    cfg = config("catalogs:\n"
                 "  - {origin: cat.example, members: all, allow_transfer: 127.0.0.1}\n"
                 "zones:\n"
                 "  - {origin: a.test, file: a.zone, catalog_group: green}\n");
    assert_int_equal(s->ops->configure(s, &cfg, NULL, false), 0); /* as a reload does */
    s->ops->published(s, t, &cfg);
    assert_int_equal(pokes, 2);
    assert_true(s->ops->collect(s));
    const zone_t *z2 = served(s);
    assert_true((int32_t)(z2->serial - serial1) > 0); /* above every version before */
    uint16_t len;
    const uint8_t *rd = rdata1(z2, "group.18f7d9b971ef202c.zones.cat.example", WIRE_T_TXT, &len);
    assert_memory_equal(rd, "\005green", 6);
    uint32_t serial2 = z2->serial; /* the source frees z2 with its next version */
    zone_table_free(t);

    /* a member left the table (a Redis zone gone) */
    static const char *const fewer[] = {"a.test", "cat.example", NULL};
    t = table(fewer);
    s->ops->published(s, t, &cfg);
    assert_int_equal(pokes, 3);
    const zone_t *z3 = served(s);
    assert_null(rrset(z3, name, WIRE_T_PTR));
    assert_true((int32_t)(z3->serial - serial2) > 0);

    /* members: listed: only the zones naming the catalog */
    config_free(&cfg);
    cfg = config("catalogs:\n"
                 "  - {origin: cat.example, allow_transfer: 127.0.0.1}\n"
                 "zones:\n"
                 "  - {origin: a.test, file: a.zone}\n"
                 "  - {origin: r.test, catalog: cat.example}\n");
    assert_int_equal(s->ops->configure(s, &cfg, NULL, false), 0); /* as a reload does */
    zone_table_free(t);
    static const char *const both[] = {"a.test", "r.test", NULL};
    t = table(both);
    s->ops->published(s, t, &cfg);
    const zone_t *z4 = served(s);
    assert_null(rrset(z4, "18f7d9b971ef202c.zones.cat.example", WIRE_T_PTR));
    assert_true(ptr_is(z4, name, "r.test."));
    assert_int_equal(z4->rr_count, 3 + 1);

    /* the catalog no longer configured: not served */
    unsigned before = pokes;
    config_free(&cfg);
    cfg = config("zones:\n  - {origin: a.test, file: a.zone}\n");
    assert_int_equal(s->ops->configure(s, &cfg, NULL, false), 0); /* as a reload does */
    s->ops->published(s, t, &cfg);
    assert_int_equal(pokes, before + 1);
    size_t n = 9;
    (void)s->ops->zones(s, &n);
    assert_int_equal(n, 0);
    zone_source_stats_t st;
    s->ops->stats(s, &st);
    assert_int_equal(st.zones, 0);

    /* and no zone configured at all (zones from Redis only): nothing to do, nothing to sort */
    config_free(&cfg);
    cfg = config("workers: 1\n");
    assert_int_equal(s->ops->configure(s, &cfg, NULL, false), 0);
    s->ops->published(s, t, &cfg);
    assert_int_equal(pokes, before + 1);

    zone_table_free(t);
    config_free(&cfg);
    zone_source_free(s);
}

/* Catalogs without a single zone entry besides their own, and a table of Redis zones only. */
static void test_source_no_entries(void **state)
{
    (void)state;
    const zone_source_env_t env = {.sink = {.poke = poke}};
    zone_source_t *s = zone_source_new(&source_catalog_ops, &env);
    config_t cfg = config("catalogs:\n"
                          "  - {origin: cat.example, members: all, allow_transfer: 127.0.0.1}\n");
    static const char *const names[] = {"r.test", NULL};
    zone_table_t *t = table(names);
    pokes = 0;
    s->ops->published(s, t, &cfg);
    assert_int_equal(pokes, 1);
    char id[SOURCE_CATALOG_ID_LEN], name[128];
    source_catalog_id("r.test", id);
    snprintf(name, sizeof(name), "%s.zones.cat.example", id);
    assert_true(ptr_is(served(s), name, "r.test."));
    zone_table_free(t);
    config_free(&cfg);
    zone_source_free(s);
}

/* The loader's secondary(): members of a catalog tern consumes (not in the config, so nothing
 * else says they are copies) are never offered in a catalog of ours. */
static bool secondary_m(void *ctx, const char *key)
{
    (void)ctx;
    return strcmp(key, "m.test") == 0;
}

static void test_source_consumed_members(void **state)
{
    (void)state;
    const zone_source_env_t env = {.sink = {.poke = poke}, .secondary = secondary_m};
    zone_source_t *s = zone_source_new(&source_catalog_ops, &env);
    config_t cfg = config("catalogs:\n"
                          "  - {origin: cat.example, members: all, allow_transfer: 127.0.0.1}\n");
    static const char *const names[] = {"r.test", "m.test", NULL};
    zone_table_t *t = table(names);
    s->ops->published(s, t, &cfg);
    char id[SOURCE_CATALOG_ID_LEN], name[128];
    source_catalog_id("r.test", id);
    snprintf(name, sizeof(name), "%s.zones.cat.example", id);
    assert_true(ptr_is(served(s), name, "r.test."));
    source_catalog_id("m.test", id);
    snprintf(name, sizeof(name), "%s.zones.cat.example", id);
    assert_null(rrset(served(s), name, WIRE_T_PTR));
    assert_int_equal(served(s)->rr_count, 3 + 1);
    zone_table_free(t);
    config_free(&cfg);
    zone_source_free(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ids_pinned),
        cmocka_unit_test(test_build),
        cmocka_unit_test(test_source),
        cmocka_unit_test(test_source_no_entries),
        cmocka_unit_test(test_source_consumed_members),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
