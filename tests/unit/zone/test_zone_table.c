/*
 * test_zone_table.c — zone selection by longest apex suffix, nested zones, REFUSED (no zone),
 * duplicate apexes, and a table of 10,000 small zones.
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
#include "tern/zone/zone_table.h"
#include "zone_test_util.h"

static zone_t *small_zone(const char *apex_txt)
{
    uint8_t apex[DNAME_MAXLEN], rd[600];
    char mname[300];
    wire_name(apex, apex_txt);
    zone_builder_t *b = zone_builder_new(apex, apex_txt);
    assert_non_null(b);
    snprintf(mname, sizeof(mname), "ns1.%s", apex_txt);
    size_t n = rdata_soa(rd, mname, mname, 1, 60);
    assert_int_equal(add_raw(b, apex_txt, 6, 60, rd, n, 1), 0);
    n = wire_name(rd, mname);
    assert_int_equal(add_raw(b, apex_txt, 2, 60, rd, n, 2), 0);
    uint8_t a[4] = {192, 0, 2, 1};
    assert_int_equal(add_raw(b, mname, 1, 60, a, 4, 3), 0);
    zone_t *z = NULL;
    char err[256];
    int rc = zone_builder_finish(b, &z, err, sizeof(err));
    if (rc)
        fail_msg("%s", err);
    return z;
}

static const zone_t *find(const zone_table_t *t, const char *name, unsigned *apex_label)
{
    dname_view_t v;
    view_of(&v, name);
    *apex_label = 999;
    return zone_table_find(t, &v, apex_label);
}

static void test_nested_zones(void **state)
{
    zone_table_t *t = zone_table_new();
    assert_non_null(t);
    zone_t *parent = small_zone("example.test.");
    zone_t *child = small_zone("sub.example.test.");
    zone_t *other = small_zone("other.test.");
    assert_int_equal(zone_table_add(t, child), 0);
    assert_int_equal(zone_table_add(t, parent), 0);
    assert_int_equal(zone_table_add(t, other), 0);
    assert_int_equal(zone_table_freeze(t), 0);
    assert_int_equal(zone_table_count(t), 3);
    assert_ptr_equal(zone_table_at(t, 0), child);
    assert_ptr_equal(zone_table_at(t, 1), parent);

    unsigned al;
    assert_ptr_equal(find(t, "www.sub.example.test.", &al), child);
    assert_int_equal(al, 1);
    assert_ptr_equal(find(t, "SUB.Example.TEST.", &al), child);
    assert_int_equal(al, 0);
    assert_ptr_equal(find(t, "www.example.test.", &al), parent);
    assert_int_equal(al, 1);
    assert_ptr_equal(find(t, "a.b.c.xsub.example.test.", &al), parent);
    assert_int_equal(al, 4);
    assert_ptr_equal(find(t, "example.test.", &al), parent);
    assert_int_equal(al, 0);
    assert_ptr_equal(find(t, "x.other.test.", &al), other);
    assert_int_equal(al, 1);
    /* REFUSED cases: no zone at all */
    assert_null(find(t, "test.", &al));
    assert_null(find(t, ".", &al));
    assert_null(find(t, "www.example.org.", &al));
    assert_null(find(t, "www.anexample.test.", &al));
    /* a 127-label random name (255 bytes) */
    char name[300] = "";
    for (int i = 0; i < 126; i++)
        strcat(name, "r.");
    strcat(name, "t.");
    assert_null(find(t, name, &al));
    name[0] = 0;
    for (int i = 0; i < 121; i++)
        strcat(name, "r.");
    strcat(name, "other.test.");
    assert_ptr_equal(find(t, name, &al), other);
    assert_int_equal(al, 121);
    zone_table_free(t);
}

static void test_duplicate_apex(void **state)
{
    zone_table_t *t = zone_table_new();
    zone_t *a = small_zone("example.test.");
    zone_t *b = small_zone("EXAMPLE.test.");
    assert_int_equal(zone_table_add(t, a), 0);
    assert_int_equal(zone_table_add(t, b), TERN_EDUPZONE);
    zone_free(b); /* not taken */
    assert_int_equal(zone_table_count(t), 1);
    assert_int_equal(zone_table_freeze(t), 0);
    /* frozen: no more adds */
    zone_t *c = small_zone("c.test.");
    assert_int_equal(zone_table_add(t, c), TERN_EINVAL);
    zone_free(c);
    zone_table_free(t);
    zone_table_free(NULL);
}

static void test_empty_and_root(void **state)
{
    unsigned al;
    zone_table_t *t = zone_table_new();
    assert_int_equal(zone_table_freeze(t), 0);
    assert_null(find(t, "www.example.test.", &al));
    zone_table_free(t);

    /* a root zone catches everything not in a longer zone */
    t = zone_table_new();
    assert_int_equal(zone_table_add(t, small_zone(".")), 0);
    assert_int_equal(zone_table_add(t, small_zone("example.test.")), 0);
    assert_int_equal(zone_table_freeze(t), 0);
    const zone_t *z = find(t, "www.example.org.", &al);
    assert_non_null(z);
    assert_int_equal(z->apex_labels, 0);
    assert_int_equal(al, 3);
    z = find(t, "www.example.test.", &al);
    assert_int_equal(z->apex_labels, 2);
    zone_table_free(t);
}

/* 10,000 zones, each built through zone_builder: every one found, none confused. */
static void test_many_zones(void **state)
{
    enum { N = 10000 };
    zone_table_t *t = zone_table_new();
    char apex[64];
    for (int i = 0; i < N; i++) {
        snprintf(apex, sizeof(apex), "z%d.example%d.test.", i, i % 7);
        assert_int_equal(zone_table_add(t, small_zone(apex)), 0);
    }
    assert_int_equal(zone_table_freeze(t), 0);
    assert_int_equal(zone_table_count(t), N);
    size_t footprint = 0;
    for (int i = 0; i < N; i++) {
        char q[96];
        snprintf(q, sizeof(q), "www.z%d.example%d.test.", i, i % 7);
        unsigned al;
        const zone_t *z = find(t, q, &al);
        assert_ptr_equal(z, zone_table_at(t, (size_t)i));
        assert_int_equal(al, 1);
        /* and the zone answers for its own names */
        dname_view_t v;
        snprintf(q, sizeof(q), "ns1.z%d.example%d.test.", i, i % 7);
        view_of(&v, q);
        zone_lookup_t r;
        zone_lookup(z, &v, 1, &r);
        assert_int_equal(r.kind, ZONE_LOOKUP_EXACT);
        footprint += arena_footprint(z->arena);
    }
    unsigned al;
    assert_null(find(t, "z10000.example0.test.", &al));
    /* one tiny zone must not cost more than a couple of pages */
    assert_true(footprint / N <= 8192);
    zone_table_free(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_nested_zones),
        cmocka_unit_test(test_duplicate_apex),
        cmocka_unit_test(test_empty_and_root),
        cmocka_unit_test(test_many_zones),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
