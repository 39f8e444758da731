/*
 * test_zone_delta.c — the one zone change type: built from "these names now hold what this
 * partial zone holds" (sorted, unique, searchable; the patched version keeps it and is known as
 * its base's child), and built from IXFR steps over a base: removals, additions, a record added
 * and removed again, the TTL rule, a step chain; bad input (a removal of a record the zone does
 * not hold, a step from the wrong serial, no step at all) fails with a clear message and leaves
 * the base as it was. The patched version of an IXFR's delta holds what building the whole new
 * version holds, node for node.
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
#include "tern/wire/dname.h"
#include "tern/wire/rr.h"
#include "tern/zone/zone_builder.h"
#include "tern/zone/zone_delta.h"
#include "tern/zone/zone_patch.h"
#include "zone_test_util.h"

#define ORIGIN "d.test."

static const uint8_t A1[4] = {192, 0, 2, 1}, A2[4] = {192, 0, 2, 2}, A3[4] = {192, 0, 2, 3};
static const uint8_t A9[4] = {192, 0, 2, 99};

/* The apex (SOA of serial, NS ns1) and ns1's address. */
static void apex(zone_builder_t *b, uint32_t serial)
{
    uint8_t rd[600];
    size_t n = rdata_soa(rd, "ns1." ORIGIN, "hostmaster." ORIGIN, serial, 300);
    assert_int_equal(add_raw(b, ORIGIN, WIRE_T_SOA, 3600, rd, n, 1), 0);
    n = rdata_name(rd, NULL, 0, "ns1." ORIGIN);
    assert_int_equal(add_raw(b, ORIGIN, WIRE_T_NS, 3600, rd, n, 2), 0);
    assert_int_equal(add_raw(b, "ns1." ORIGIN, WIRE_T_A, 3600, A1, 4, 3), 0);
}

static zone_t *finish(zone_builder_t *b)
{
    zone_t *z = NULL;
    char err[256];
    if (zone_builder_finish(b, &z, err, sizeof(err)) != 0)
        fail_msg("%s", err);
    return z;
}

/* serial: www A 1 2, mail A 3, a.b.c A 1 (two empty non-terminals above it). */
static zone_t *base_zone(uint32_t serial)
{
    uint8_t o[DNAME_MAXLEN];
    wire_name(o, ORIGIN);
    zone_builder_t *b = zone_builder_new(o, "base");
    assert_non_null(b);
    apex(b, serial);
    assert_int_equal(add_raw(b, "www." ORIGIN, WIRE_T_A, 300, A1, 4, 4), 0);
    assert_int_equal(add_raw(b, "www." ORIGIN, WIRE_T_A, 300, A2, 4, 5), 0);
    assert_int_equal(add_raw(b, "mail." ORIGIN, WIRE_T_A, 300, A3, 4, 6), 0);
    assert_int_equal(add_raw(b, "a.b.c." ORIGIN, WIRE_T_A, 300, A1, 4, 7), 0);
    return finish(b);
}

static const zone_node_t *node(const zone_t *z, const char *name)
{
    uint8_t w[DNAME_MAXLEN];
    wire_name(w, name);
    return zone_find_node(z, w, dname_len(w), dname_hash(w));
}

static void test_from_names(void **state)
{
    (void)state;
    zone_t *base = base_zone(1);
    zone_builder_t *b = zone_builder_new(base->apex, "fresh");
    apex(b, 2);
    assert_int_equal(add_raw(b, "new." ORIGIN, WIRE_T_A, 60, A9, 4, 1), 0);
    zone_t *fresh = finish(b);
    uint8_t n1[DNAME_MAXLEN], n2[DNAME_MAXLEN], n3[DNAME_MAXLEN];
    wire_name(n1, "new." ORIGIN);
    wire_name(n2, "mail." ORIGIN);
    wire_name(n3, "zzz." ORIGIN);
    const uint8_t *names[] = {n1, n2, n1, base->apex, n2};
    zone_delta_t *d = zone_delta_new(base, fresh, names, 5);
    zone_free(fresh); /* the delta holds its own reference */
    assert_non_null(d);
    assert_int_equal(zone_delta_from(d), 1);
    assert_int_equal(zone_delta_to(d), 2);
    size_t n;
    const uint8_t *const *v = zone_delta_names(d, &n);
    assert_int_equal(n, 3); /* duplicates once */
    for (size_t i = 1; i < n; i++)
        assert_true(dname_len(v[i - 1]) < dname_len(v[i]) ||
                    (dname_len(v[i - 1]) == dname_len(v[i]) &&
                     memcmp(v[i - 1], v[i], dname_len(v[i])) < 0));
    assert_true(zone_delta_has(d, n1) && zone_delta_has(d, n2) && zone_delta_has(d, base->apex));
    assert_false(zone_delta_has(d, n3));

    zone_t *p = NULL, *sib = NULL;
    char err[256];
    assert_int_equal(zone_patch(base, d, &p, err, sizeof(err)), 0);
    assert_int_equal(p->serial, 2);
    assert_non_null(node(p, "new." ORIGIN));
    assert_null(node(p, "mail." ORIGIN));
    assert_non_null(node(p, "www." ORIGIN));
    assert_ptr_equal(zone_patch_delta(base, p), d);
    assert_null(zone_patch_delta(p, base));
    /* a second patch of the same base is its child, not p's */
    assert_int_equal(zone_patch(base, d, &sib, err, sizeof(err)), 0);
    assert_ptr_equal(zone_patch_delta(base, sib), d);
    assert_null(zone_patch_delta(p, sib));
    zone_t *other = base_zone(1); /* the same data, built again: not the base */
    assert_null(zone_patch_delta(other, p));
    zone_delta_release(d); /* the versions keep theirs */
    assert_int_equal(zone_delta_to(zone_patch_delta(base, p)), 2);
    zone_free(other);
    zone_free(sib);
    zone_free(p);
    zone_free(base);
}

static uint8_t soa2[600];
static size_t soa2_len;

static zone_delta_ixfr_t *steps_new(const zone_t *base)
{
    soa2_len = rdata_soa(soa2, "ns1." ORIGIN, "hostmaster." ORIGIN, 3, 300);
    zone_delta_ixfr_t *x = zone_delta_ixfr_new(base);
    assert_non_null(x);
    return x;
}

static int rm(zone_delta_ixfr_t *x, const char *owner, const uint8_t *a, char *err, size_t len)
{
    uint8_t w[DNAME_MAXLEN];
    wire_name(w, owner);
    return zone_delta_ixfr_remove(x, w, WIRE_T_A, a, 4, err, len);
}

static int add(zone_delta_ixfr_t *x, const char *owner, uint32_t ttl, const uint8_t *a)
{
    uint8_t w[DNAME_MAXLEN];
    wire_name(w, owner);
    return zone_delta_ixfr_add(x, w, WIRE_T_A, ttl, a, 4);
}

/* Every node of a is in b with the same RRsets (count, TTL), and they have as many nodes. */
static void same_nodes(const zone_t *a, const zone_t *b)
{
    assert_int_equal(a->node_count, b->node_count);
    assert_int_equal(a->rr_count, b->rr_count);
    for (size_t i = 0; i < a->node_count; i++) {
        const zone_node_t *n = zone_node_at(a, (uint32_t)i);
        const zone_node_t *m = zone_find_node(b, n->name, n->name_len, dname_hash(n->name));
        assert_non_null(m);
        assert_int_equal(n->nrrsets, m->nrrsets);
        for (unsigned k = 0; k < n->nrrsets; k++) {
            assert_int_equal(n->rrsets[k].type, m->rrsets[k].type);
            assert_int_equal(n->rrsets[k].ttl, m->rrsets[k].ttl);
            assert_int_equal(n->rrsets[k].count, m->rrsets[k].count);
        }
    }
}

/* The node n's link (cut or wildcard, 1 + index) in z, as the name it leads to. */
static const uint8_t *link_name(const zone_t *z, uint32_t ref)
{
    return ref ? zone_node_at(z, ref - 1)->name : NULL;
}

static void same_name(const uint8_t *a, const uint8_t *b, const char *what, const uint8_t *at)
{
    char nb[DNAME_MAXLEN * 4 + 1];
    (void)dname_to_str(at, nb, sizeof(nb));
    if (!a != !b || (a && !dname_equal(a, b)))
        fail_msg("%s: the %s differs", nb, what);
}

/* Every node of a has in b a node of its name with the same flags, the same cut and wildcard
 * (as names) and the same additional-section targets with data: what the indexes kept in a
 * node, in targets and in the name index lead to is the same, wherever the nodes are. */
static void same_links(const zone_t *a, const zone_t *b)
{
    assert_int_equal(a->node_count, b->node_count);
    for (size_t i = 0; i < a->node_count; i++) {
        const zone_node_t *n = zone_node_at(a, (uint32_t)i);
        const zone_node_t *m = zone_find_node(b, n->name, n->name_len, dname_hash(n->name));
        assert_non_null(m);
        assert_ptr_equal(zone_find_node(a, n->name, n->name_len, dname_hash(n->name)), n);
        assert_int_equal(n->flags, m->flags);
        same_name(link_name(a, n->cut), link_name(b, m->cut), "cut", n->name);
        same_name(link_name(a, n->wildcard), link_name(b, m->wildcard), "wildcard", n->name);
        assert_int_equal(n->nrrsets, m->nrrsets);
        for (unsigned k = 0; k < n->nrrsets; k++) {
            for (unsigned r = 0; r < n->rrsets[k].count; r++) {
                const zone_node_t *x = zone_rrset_target(a, &n->rrsets[k], r);
                const zone_node_t *y = zone_rrset_target(b, &m->rrsets[k], r);
                same_name(x && x->nrrsets ? x->name : NULL, y && y->nrrsets ? y->name : NULL,
                          "target", n->name);
            }
        }
    }
}

static void test_from_ixfr(void **state)
{
    (void)state;
    zone_t *base = base_zone(1);
    zone_delta_ixfr_t *x = steps_new(base);
    char err[256];
    /* step 1 -> 2: www loses 192.0.2.1, a.b.c goes (its ENTs too), tmp comes, mail gets a
     * second address with a lower TTL */
    assert_int_equal(zone_delta_ixfr_begin(x, 1, err, sizeof(err)), 0);
    assert_int_equal(rm(x, "www." ORIGIN, A1, err, sizeof(err)), 0);
    assert_int_equal(rm(x, "A.b.C." ORIGIN, A1, err, sizeof(err)), 0); /* any case */
    assert_int_equal(zone_delta_ixfr_end(x, 2), 0);
    assert_int_equal(add(x, "tmp." ORIGIN, 60, A9), 1);
    assert_int_equal(add(x, "mail." ORIGIN, 120, A9), 1);
    /* step 2 -> 3: tmp goes again, fresh.x.y comes */
    assert_int_equal(zone_delta_ixfr_begin(x, 2, err, sizeof(err)), 0);
    assert_int_equal(rm(x, "tmp." ORIGIN, A9, err, sizeof(err)), 0);
    assert_int_equal(zone_delta_ixfr_end(x, 3), 0);
    assert_int_equal(add(x, "fresh.x.y." ORIGIN, 300, A2), 1);
    assert_int_equal(add(x, "fresh.x.y." ORIGIN, 30, A2), 0); /* again: its TTL replaced */
    assert_int_equal(zone_delta_ixfr_added(x), 2);

    zone_delta_t *d = NULL;
    assert_int_equal(
        zone_delta_ixfr_finish(x, 3600, soa2, (uint16_t)soa2_len, "ixfr", &d, err, sizeof(err)), 0);
    assert_int_equal(zone_delta_from(d), 1);
    assert_int_equal(zone_delta_to(d), 3);
    zone_t *p = NULL;
    assert_int_equal(zone_patch(base, d, &p, err, sizeof(err)), 0);
    assert_int_equal(p->serial, 3);
    assert_int_equal(zone_node_rrset(node(p, "www." ORIGIN), WIRE_T_A)->count, 1);
    const zone_rrset_t *mail = zone_node_rrset(node(p, "mail." ORIGIN), WIRE_T_A);
    assert_int_equal(mail->count, 2);
    assert_int_equal(mail->ttl, 120); /* the lowest TTL added to it */
    assert_null(node(p, "tmp." ORIGIN));
    assert_null(node(p, "a.b.c." ORIGIN));
    assert_null(node(p, "c." ORIGIN)); /* the empty non-terminals went with it */
    assert_int_equal(zone_node_rrset(node(p, "fresh.x.y." ORIGIN), WIRE_T_A)->ttl, 30);
    assert_non_null(node(p, "x.y." ORIGIN));

    /* the same steps built whole: the same nodes, none left behind by the patch */
    zone_builder_t *b = zone_builder_new(base->apex, "whole");
    assert_int_equal(zone_delta_ixfr_build(x, 3600, soa2, (uint16_t)soa2_len, b), 0);
    zone_t *whole = finish(b);
    same_nodes(p, whole);
    same_nodes(whole, p);
    same_links(p, whole);
    /* the base is untouched */
    assert_int_equal(base->serial, 1);
    assert_non_null(node(base, "a.b.c." ORIGIN));
    assert_int_equal(zone_node_rrset(node(base, "www." ORIGIN), WIRE_T_A)->count, 2);
    zone_free(whole);
    zone_free(p);
    zone_delta_release(d);
    zone_delta_ixfr_free(x);
    zone_free(base);
}

static void test_ixfr_bad_input(void **state)
{
    (void)state;
    zone_t *base = base_zone(1);
    size_t rrs = base->rr_count;
    char err[256];
    zone_delta_ixfr_t *x = steps_new(base);
    /* a step from a serial the zone is not at */
    assert_int_equal(zone_delta_ixfr_begin(x, 7, err, sizeof(err)), TERN_EINVAL);
    assert_non_null(strstr(err, "starts at serial 7, the zone is at 1"));
    /* nothing to apply yet */
    zone_delta_t *d = (zone_delta_t *)1;
    assert_int_equal(
        zone_delta_ixfr_finish(x, 3600, soa2, (uint16_t)soa2_len, "ixfr", &d, err, sizeof(err)),
        TERN_EINVAL);
    assert_null(d);
    assert_non_null(strstr(err, "no complete IXFR step"));
    /* additions before the step's new SOA, removals after it */
    assert_int_equal(zone_delta_ixfr_begin(x, 1, err, sizeof(err)), 0);
    assert_int_equal(add(x, "tmp." ORIGIN, 60, A9), TERN_EINVAL);
    /* a record the zone does not hold: the versions have diverged */
    assert_int_equal(rm(x, "www." ORIGIN, A9, err, sizeof(err)), TERN_ENOENT);
    assert_string_equal(err, "a record that is not in the zone: www.d.test. A 192.0.2.99");
    assert_int_equal(rm(x, "nope." ORIGIN, A1, err, sizeof(err)), TERN_ENOENT);
    assert_int_equal(rm(x, "www." ORIGIN, A1, err, sizeof(err)), 0);
    assert_int_equal(rm(x, "www." ORIGIN, A1, err, sizeof(err)), TERN_ENOENT); /* twice */
    assert_int_equal(zone_delta_ixfr_end(x, 2), 0);
    assert_int_equal(rm(x, "www." ORIGIN, A2, err, sizeof(err)), TERN_EINVAL);
    /* the next step must start where this one ended */
    assert_int_equal(zone_delta_ixfr_begin(x, 1, err, sizeof(err)), TERN_EINVAL);
    assert_non_null(strstr(err, "starts at serial 1, the zone is at 2"));
    zone_delta_ixfr_free(x); /* abandoned: the old zone is what is served */
    assert_int_equal(base->rr_count, rrs);
    assert_int_equal(zone_node_rrset(node(base, "www." ORIGIN), WIRE_T_A)->count, 2);

    /* a step whose result the builder refuses (CNAME beside other data): finish says so */
    x = steps_new(base);
    assert_int_equal(zone_delta_ixfr_begin(x, 1, err, sizeof(err)), 0);
    assert_int_equal(zone_delta_ixfr_end(x, 3), 0);
    uint8_t w[DNAME_MAXLEN], rd[DNAME_MAXLEN];
    wire_name(w, "www." ORIGIN);
    size_t rl = rdata_name(rd, NULL, 0, "mail." ORIGIN);
    assert_int_equal(zone_delta_ixfr_add(x, w, WIRE_T_CNAME, 300, rd, (uint16_t)rl), 1);
    assert_int_equal(
        zone_delta_ixfr_finish(x, 3600, soa2, (uint16_t)soa2_len, "ixfr", &d, err, sizeof(err)),
        TERN_ECNAME);
    assert_null(d);
    assert_non_null(strstr(err, "CNAME and other data"));
    zone_delta_ixfr_free(x);
    zone_free(base);
}

/* The last nodes (a delegation with its glue, a wildcard, a mail target) move into the places
 * of removed ones; their index slots, cuts, wildcard and targets follow. */
static void add_links_zone(zone_builder_t *b, bool with_gone)
{
    uint8_t rd[DNAME_MAXLEN + 2];
    static const char *const gone[] = {"g1." ORIGIN, "g2." ORIGIN, "g3." ORIGIN, "g4." ORIGIN};
    for (size_t i = 0; with_gone && i < 4; i++)
        assert_int_equal(add_raw(b, gone[i], WIRE_T_A, 300, A2, 4, 10), 0);
    /* no empty non-terminals (the builder puts those last): the names added last are the
     * last nodes */
    size_t n = rdata_name(rd, "\0\12", 2, "mt." ORIGIN);
    assert_int_equal(add_raw(b, "mx." ORIGIN, WIRE_T_MX, 300, rd, n, 11), 0);
    assert_int_equal(add_raw(b, "w." ORIGIN, WIRE_T_A, 300, A3, 4, 12), 0);
    n = rdata_name(rd, NULL, 0, "ns.d1." ORIGIN);
    assert_int_equal(add_raw(b, "d1." ORIGIN, WIRE_T_NS, 300, rd, n, 13), 0);
    assert_int_equal(add_raw(b, "ns.d1." ORIGIN, WIRE_T_A, 300, A1, 4, 14), 0);
    assert_int_equal(add_raw(b, "*.w." ORIGIN, WIRE_T_A, 300, A9, 4, 15), 0);
    assert_int_equal(add_raw(b, "mt." ORIGIN, WIRE_T_A, 300, A3, 4, 16), 0);
}

static void test_patch_moves_nodes(void **state)
{
    (void)state;
    uint8_t o[DNAME_MAXLEN];
    wire_name(o, ORIGIN);
    zone_builder_t *b = zone_builder_new(o, "links");
    apex(b, 1);
    add_links_zone(b, true);
    zone_t *base = finish(b);
    b = zone_builder_new(o, "links");
    apex(b, 2);
    zone_t *fresh = finish(b); /* the apex; the four names have no data any more */
    uint8_t w[4][DNAME_MAXLEN];
    const uint8_t *names[5] = {base->apex};
    for (int i = 0; i < 4; i++) {
        char t[32];
        snprintf(t, sizeof(t), "g%d." ORIGIN, i + 1);
        wire_name(w[i], t);
        names[i + 1] = w[i];
    }
    zone_t *p = NULL;
    char err[256];
    assert_int_equal(zone_patch_names(base, fresh, names, 5, &p, err, sizeof(err)), 0);
    zone_free(fresh);
    b = zone_builder_new(o, "links");
    apex(b, 2);
    add_links_zone(b, false);
    zone_t *built = finish(b);
    same_links(p, built);
    same_links(built, p);
    same_links(base, base); /* the base untouched, still whole */
    /* they were the base's last nodes: they moved, the delegation among them */
    static const char *const deep[] = {"d1." ORIGIN, "ns.d1." ORIGIN, "*.w." ORIGIN, "mt." ORIGIN};
    for (size_t i = 0; i < 4; i++) {
        uint8_t d[DNAME_MAXLEN];
        size_t dl = wire_name(d, deep[i]);
        uint32_t was = zone_find_index(base, d, dl, dname_hash(d));
        uint32_t now = zone_find_index(p, d, dl, dname_hash(d));
        assert_true(was > built->node_count && now <= built->node_count);
    }
    assert_int_equal(base->node_count, built->node_count + 4);
    zone_free(built);
    zone_free(p);
    zone_free(base);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_from_names),
        cmocka_unit_test(test_from_ixfr),
        cmocka_unit_test(test_ixfr_bad_input),
        cmocka_unit_test(test_patch_moves_nodes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
