/*
 * test_zone.c — zone_builder output and zone_lookup: exact, ENT, wildcard rules (RFC 4592),
 * delegations and glue, NXDOMAIN enclosers, targets, negative SOA TTL, RRset order, merging.
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
#include "tern/wire/rr.h"
#include "tern/zone/zone.h"
#include "tern/zone/zone_builder.h"
#include "zone_test_util.h"

static void add_a(zone_builder_t *b, const char *owner, uint32_t ttl, uint8_t last, unsigned line)
{
    uint8_t a[4] = {192, 0, 2, last};
    assert_int_equal(add_raw(b, owner, WIRE_T_A, ttl, a, 4, line), 0);
}

static void add_name_rr(zone_builder_t *b, const char *owner, uint16_t type, const void *pre,
                        size_t prelen, const char *target, unsigned line)
{
    uint8_t rd[300];
    size_t n = rdata_name(rd, pre, prelen, target);
    assert_int_equal(add_raw(b, owner, type, 3600, rd, n, line), 0);
}

static void add_soa_ns(zone_builder_t *b, const char *apex, uint32_t soa_ttl, uint32_t minimum)
{
    uint8_t rd[600];
    char mname[300], rname[300];
    snprintf(mname, sizeof(mname), "ns1.%s", apex);
    snprintf(rname, sizeof(rname), "hostmaster.%s", apex);
    size_t n = rdata_soa(rd, mname, rname, 2024010101, minimum);
    assert_int_equal(add_raw(b, apex, WIRE_T_SOA, soa_ttl, rd, n, 1), 0);
    add_name_rr(b, apex, WIRE_T_NS, NULL, 0, mname, 2);
}

/* The zone of most tests; see the line numbers for what each record is for. */
static zone_t *build_example(void)
{
    uint8_t apex[DNAME_MAXLEN];
    wire_name(apex, "Example.TEST.");
    zone_builder_t *b = zone_builder_new(apex, "test.zone");
    assert_non_null(b);
    add_soa_ns(b, "example.test.", 3600, 300);
    add_name_rr(b, "example.test.", WIRE_T_NS, NULL, 0, "ns2.elsewhere.test.", 3);
    add_a(b, "ns1.example.test.", 3600, 1, 4);
    /* www: types added out of order, a duplicate, and a lower TTL on the second A */
    uint8_t v6[16] = {0x20, 0x01, 0x0d, 0xb8, [15] = 0x10};
    assert_int_equal(add_raw(b, "WWW.example.test.", WIRE_T_AAAA, 600, v6, 16, 5), 0);
    assert_int_equal(add_raw(b, "www.example.test.", WIRE_T_TXT, 600, "\x02hi", 3, 6), 0);
    add_a(b, "www.example.test.", 600, 10, 7);
    add_a(b, "www.EXAMPLE.test.", 60, 11, 8);
    add_a(b, "www.example.test.", 600, 10, 9); /* duplicate of line 7 */
    /* a.b.c: b.c and c become empty non-terminals */
    add_a(b, "a.b.c.example.test.", 3600, 20, 10);
    /* wildcards: at the apex, and below the ENT c */
    assert_int_equal(add_raw(b, "*.example.test.", WIRE_T_TXT, 3600, "\x04wild", 5, 11), 0);
    add_a(b, "*.c.example.test.", 3600, 21, 12);
    /* delegation sub with glue, a DS at the cut, an occluded wildcard and a nested cut */
    add_name_rr(b, "sub.example.test.", WIRE_T_NS, NULL, 0, "ns.sub.example.test.", 13);
    add_a(b, "ns.sub.example.test.", 3600, 30, 14);
    assert_int_equal(
        add_raw(b, "sub.example.test.", WIRE_T_DS, 3600, "\x12\x34\x08\x02\xaa", 5, 15), 0);
    add_a(b, "*.sub.example.test.", 3600, 31, 16);
    add_name_rr(b, "deep.x.sub.example.test.", WIRE_T_NS, NULL, 0, "ns1.example.test.", 17);
    /* additional-section targets */
    add_name_rr(b, "mx.example.test.", WIRE_T_MX, "\x00\x0a", 2, "www.example.test.", 18);
    add_name_rr(b, "mx.example.test.", WIRE_T_MX, "\x00\x14", 2, "mail.other.test.", 19);
    add_name_rr(b, "_sip._tcp.example.test.", WIRE_T_SRV, "\x00\x00\x00\x05\x13\xc4", 6,
                "WWW.example.test.", 20);
    add_name_rr(b, "alias.example.test.", WIRE_T_CNAME, NULL, 0, "www.example.test.", 21);
    zone_t *z = NULL;
    char err[256];
    int rc = zone_builder_finish(b, &z, err, sizeof(err));
    if (rc)
        fail_msg("finish: %s", err);
    assert_non_null(z);
    return z;
}

static const zone_node_t *find(const zone_t *z, const char *name)
{
    dname_view_t v;
    view_of(&v, name);
    return zone_find_node(z, v.lc, v.len, v.hash[0]);
}

static void lookup(const zone_t *z, const char *name, zone_lookup_t *r)
{
    dname_view_t v;
    view_of(&v, name);
    assert_true(v.nlabels >= z->apex_labels);
    zone_lookup(z, &v, v.nlabels - z->apex_labels, r);
}

static void test_zone_fields(void **state)
{
    zone_t *z = build_example();
    assert_int_equal(z->apex_len, 14);
    assert_memory_equal(z->apex,
                        "\x07"
                        "example\x04test",
                        14);
    assert_int_equal(z->apex_labels, 2);
    assert_int_equal(z->max_labels, 5); /* deep.x.sub.example.test */
    assert_int_equal(z->serial, 2024010101);
    assert_ptr_equal(z->apex_node, find(z, "example.test."));
    assert_true(z->apex_node->flags & ZONE_NODE_APEX);
    assert_ptr_equal(z->soa, zone_node_rrset(z->apex_node, WIRE_T_SOA));
    assert_ptr_equal(z->apex_ns, zone_node_rrset(z->apex_node, WIRE_T_NS));
    assert_int_equal(z->apex_ns->count, 2);
    /* 21 RRs given, one duplicate */
    assert_int_equal(z->rr_count, 20);
    /* 13 owner names + the ENTs b.c, c, _tcp and x.sub */
    assert_int_equal(z->node_count, 17);
    assert_string_equal(z->source, "test.zone");
    /* the hash table is a power of two, at most 2/3 full */
    assert_int_equal((z->node_mask + 1) & z->node_mask, 0);
    assert_true(z->node_count * 3 <= 2 * ((size_t)z->node_mask + 1));
    assert_ptr_equal(z->apex_node, zone_node_at(z, 0));
    /* every node is findable by its own name and hash */
    size_t seen = 0;
    for (uint32_t i = 0; i <= z->node_mask; i++) {
        if (!z->node_slots[i].node)
            continue;
        const zone_node_t *n = zone_node_at(z, z->node_slots[i].node - 1);
        uint32_t h = z->node_slots[i].hash;
        seen++;
        assert_int_equal(h, dname_hash(n->name));
        assert_ptr_equal(zone_find_node(z, n->name, n->name_len, h), n);
        assert_int_equal(n->labels, dname_labels(n->name));
    }
    assert_int_equal(seen, z->node_count);
    zone_free(z);
}

static void test_neg_soa(void **state)
{
    zone_t *z = build_example();
    assert_int_equal(z->soa->ttl, 3600);
    assert_int_equal(z->neg_soa->ttl, 300); /* min(TTL, MINIMUM) */
    assert_int_equal(z->neg_soa->type, WIRE_T_SOA);
    assert_ptr_equal(z->neg_soa->rdata, z->soa->rdata);
    assert_int_equal(z->neg_soa->rdata_len, z->soa->rdata_len);
    zone_free(z);

    /* MINIMUM above the SOA TTL: the TTL wins */
    uint8_t apex[DNAME_MAXLEN];
    wire_name(apex, "min.test.");
    zone_builder_t *b = zone_builder_new(apex, NULL);
    assert_non_null(b);
    add_soa_ns(b, "min.test.", 120, 86400);
    char err[256];
    assert_int_equal(zone_builder_finish(b, &z, err, sizeof(err)), 0);
    assert_int_equal(z->neg_soa->ttl, 120);
    assert_string_equal(z->source, "min.test.");
    zone_free(z);
}

static void test_sorted_merged_rrsets(void **state)
{
    zone_t *z = build_example();
    const zone_node_t *www = find(z, "www.example.test.");
    assert_non_null(www);
    const zone_rrset_t *s = www->rrsets;
    assert_int_equal(s->type, WIRE_T_A);
    assert_int_equal(www->nrrsets, 3);
    assert_int_equal(s[1].type, WIRE_T_TXT);
    assert_int_equal(s[2].type, WIRE_T_AAAA);
    /* A: duplicate merged, file order kept, lowest TTL */
    assert_int_equal(s->count, 2);
    assert_int_equal(s->ttl, 60);
    assert_int_equal(s->rdata_len, 12);
    assert_memory_equal(s->rdata, "\x00\x04\xc0\x00\x02\x0a\x00\x04\xc0\x00\x02\x0b", 12);
    assert_null(zone_rrset_geo(z, &s[0])); /* plain, not steered */
    assert_ptr_equal(zone_node_rrset(www, WIRE_T_AAAA), &s[2]);
    assert_null(zone_node_rrset(www, WIRE_T_MX));
    assert_null(zone_node_rrset(www, 65535));
    zone_free(z);
}

static void test_large_rrset_dedup(void **state)
{
    /* past the pairwise limit the de-duplication sorts; order must still be the file's */
    uint8_t apex[DNAME_MAXLEN];
    wire_name(apex, "pool.test.");
    zone_builder_t *b = zone_builder_new(apex, "pool.zone");
    add_soa_ns(b, "pool.test.", 3600, 300);
    for (unsigned i = 0; i < 100; i++)
        add_a(b, "p.pool.test.", 300, (uint8_t)(200 - (i % 50)), 10 + i);
    zone_t *z;
    char err[256];
    assert_int_equal(zone_builder_finish(b, &z, err, sizeof(err)), 0);
    const zone_rrset_t *s = zone_node_rrset(find(z, "p.pool.test."), WIRE_T_A);
    assert_int_equal(s->count, 50);
    for (unsigned i = 0; i < 50; i++)
        assert_int_equal(s->rdata[i * 6 + 5], 200 - i);
    zone_free(z);
}

static void test_lookup_exact(void **state)
{
    zone_t *z = build_example();
    zone_lookup_t r;
    lookup(z, "WwW.Example.Test.", &r);
    assert_int_equal(r.kind, ZONE_LOOKUP_EXACT);
    assert_ptr_equal(r.node, find(z, "www.example.test."));
    assert_ptr_equal(r.encloser, r.node);
    assert_null(r.cut);

    lookup(z, "example.test.", &r);
    assert_int_equal(r.kind, ZONE_LOOKUP_EXACT);
    assert_ptr_equal(r.node, z->apex_node);
    assert_null(r.cut);

    /* the wildcard node itself, asked for literally */
    lookup(z, "*.example.test.", &r);
    assert_int_equal(r.kind, ZONE_LOOKUP_EXACT);
    assert_true(r.node->flags & ZONE_NODE_WILD);
    zone_free(z);
}

static void test_lookup_ent(void **state)
{
    zone_t *z = build_example();
    zone_lookup_t r;
    lookup(z, "b.c.example.test.", &r);
    assert_int_equal(r.kind, ZONE_LOOKUP_EXACT);
    assert_true(r.node->flags & ZONE_NODE_ENT);
    assert_null(r.node->rrsets);
    lookup(z, "c.example.test.", &r);
    assert_int_equal(r.kind, ZONE_LOOKUP_EXACT);
    assert_true(r.node->flags & ZONE_NODE_ENT);
    assert_ptr_equal(zone_node_at(z, r.node->wildcard - 1), find(z, "*.c.example.test."));
    lookup(z, "_tcp.example.test.", &r);
    assert_int_equal(r.kind, ZONE_LOOKUP_EXACT);
    assert_true(r.node->flags & ZONE_NODE_ENT);
    /* an ENT below a cut is still a node, and carries the cut */
    lookup(z, "x.sub.example.test.", &r);
    assert_int_equal(r.kind, ZONE_LOOKUP_EXACT);
    assert_true(r.node->flags & ZONE_NODE_ENT);
    assert_ptr_equal(r.cut, find(z, "sub.example.test."));
    zone_free(z);
}

static void test_lookup_wildcard(void **state)
{
    zone_t *z = build_example();
    zone_lookup_t r;
    lookup(z, "nothere.example.test.", &r);
    assert_int_equal(r.kind, ZONE_LOOKUP_WILDCARD);
    assert_ptr_equal(r.node, find(z, "*.example.test."));
    assert_ptr_equal(r.encloser, z->apex_node);
    assert_null(r.cut);
    /* several labels below the encloser still match the wildcard of the closest encloser */
    lookup(z, "a.b.nothere.example.test.", &r);
    assert_int_equal(r.kind, ZONE_LOOKUP_WILDCARD);
    assert_ptr_equal(r.node, find(z, "*.example.test."));
    /* wildcard below an ENT */
    lookup(z, "x.c.example.test.", &r);
    assert_int_equal(r.kind, ZONE_LOOKUP_WILDCARD);
    assert_ptr_equal(r.node, find(z, "*.c.example.test."));
    assert_ptr_equal(r.encloser, find(z, "c.example.test."));
    zone_free(z);
}

static void test_lookup_no_wildcard_below_existing(void **state)
{
    zone_t *z = build_example();
    zone_lookup_t r;
    /* RFC 4592 §2.2.1: www exists, so *.example.test does not cover x.www */
    lookup(z, "x.www.example.test.", &r);
    assert_int_equal(r.kind, ZONE_LOOKUP_NXDOMAIN);
    assert_null(r.node);
    assert_ptr_equal(r.encloser, find(z, "www.example.test."));
    /* nor below the ENT b.c (closest encloser b.c has no wildcard child) */
    lookup(z, "x.b.c.example.test.", &r);
    assert_int_equal(r.kind, ZONE_LOOKUP_NXDOMAIN);
    assert_ptr_equal(r.encloser, find(z, "b.c.example.test."));
    assert_null(r.cut);
    zone_free(z);
}

static void test_lookup_delegation(void **state)
{
    zone_t *z = build_example();
    const zone_node_t *sub = find(z, "sub.example.test.");
    assert_non_null(sub);
    assert_true(sub->flags & ZONE_NODE_DELEG);
    assert_false(z->apex_node->flags & ZONE_NODE_DELEG);
    zone_lookup_t r;
    /* at the cut: cut == node, so a DS query can be answered from the parent side */
    lookup(z, "sub.example.test.", &r);
    assert_int_equal(r.kind, ZONE_LOOKUP_EXACT);
    assert_ptr_equal(r.node, sub);
    assert_ptr_equal(r.cut, sub);
    assert_non_null(zone_node_rrset(sub, WIRE_T_DS));
    /* glue below the cut: exact, but marked non-authoritative through cut */
    lookup(z, "ns.sub.example.test.", &r);
    assert_int_equal(r.kind, ZONE_LOOKUP_EXACT);
    assert_ptr_equal(r.cut, sub);
    assert_ptr_not_equal(r.node, sub);
    /* below the cut, the (occluded) wildcard is not used */
    lookup(z, "foo.sub.example.test.", &r);
    assert_int_equal(r.kind, ZONE_LOOKUP_NXDOMAIN);
    assert_ptr_equal(r.encloser, sub);
    assert_ptr_equal(r.cut, sub);
    /* a nested NS set is occluded: everything below the outer cut points at it */
    const zone_node_t *deep = find(z, "deep.x.sub.example.test.");
    assert_true(deep->flags & ZONE_NODE_DELEG);
    assert_ptr_equal(zone_node_cut(z, deep), sub);
    assert_true(sub->flags & ZONE_NODE_CUT);
    assert_false(deep->flags & ZONE_NODE_CUT);
    lookup(z, "a.deep.x.sub.example.test.", &r);
    assert_int_equal(r.kind, ZONE_LOOKUP_NXDOMAIN);
    assert_ptr_equal(r.encloser, deep);
    assert_ptr_equal(r.cut, sub);
    /* nodes beside the cut are unaffected */
    assert_int_equal(find(z, "www.example.test.")->cut, 0);
    assert_int_equal(z->apex_node->cut, 0);
    zone_free(z);
}

static void test_lookup_nxdomain_long_name(void **state)
{
    zone_t *z = build_example();
    /* 115 one-letter labels above mx: only max_labels - apex_labels + 1 probes matter */
    char name[400] = "";
    for (int i = 0; i < 115; i++)
        strcat(name, "q.");
    strcat(name, "mx.example.test.");
    zone_lookup_t r;
    lookup(z, name, &r);
    assert_int_equal(r.kind, ZONE_LOOKUP_NXDOMAIN);
    assert_ptr_equal(r.encloser, find(z, "mx.example.test."));
    assert_null(r.node);
    zone_free(z);
}

static void test_targets(void **state)
{
    zone_t *z = build_example();
    const zone_rrset_t *ns = z->apex_ns;
    assert_true(zone_rrset_has_targets(ns));
    assert_ptr_equal(zone_rrset_target(z, ns, 0), find(z, "ns1.example.test."));
    assert_null(zone_rrset_target(z, ns, 1)); /* ns2.elsewhere.test is not ours */
    const zone_rrset_t *mx = zone_node_rrset(find(z, "mx.example.test."), WIRE_T_MX);
    assert_int_equal(mx->count, 2);
    assert_ptr_equal(zone_rrset_target(z, mx, 0), find(z, "www.example.test."));
    assert_null(zone_rrset_target(z, mx, 1));
    /* SRV target given in upper case still resolves */
    const zone_rrset_t *srv = zone_node_rrset(find(z, "_sip._tcp.example.test."), WIRE_T_SRV);
    assert_ptr_equal(zone_rrset_target(z, srv, 0), find(z, "www.example.test."));
    /* RDATA case preserved */
    assert_memory_equal(srv->rdata + 2 + 6, "\x03WWW", 4);
    /* delegation NS: target is the glue node */
    const zone_rrset_t *dns = zone_node_rrset(find(z, "sub.example.test."), WIRE_T_NS);
    assert_ptr_equal(zone_rrset_target(z, dns, 0), find(z, "ns.sub.example.test."));
    /* no targets for other types */
    assert_false(
        zone_rrset_has_targets(zone_node_rrset(find(z, "alias.example.test."), WIRE_T_CNAME)));
    zone_free(z);
}

static void test_builder_refuses(void **state)
{
    uint8_t apex[DNAME_MAXLEN], o[DNAME_MAXLEN];
    wire_name(apex, "example.test.");
    zone_builder_t *b = zone_builder_new(apex, "test.zone");
    uint8_t a[4] = {192, 0, 2, 1};
    wire_name(o, "www.example.test.");
    assert_int_equal(zone_builder_add(b, o, WIRE_T_A, 3, 60, a, 4, "f.zone", 7), TERN_EINVAL);
    assert_non_null(strstr(zone_builder_error(b), "f.zone:7:"));
    assert_non_null(strstr(zone_builder_error(b), "class 3"));
    assert_int_equal(zone_builder_add(b, o, 41, 1, 60, NULL, 0, "f.zone", 8), TERN_EINVAL);
    assert_non_null(strstr(zone_builder_error(b), "f.zone:8:"));
    assert_int_equal(zone_builder_add(b, o, 250, 1, 60, NULL, 0, "f.zone", 9), TERN_EINVAL);
    assert_int_equal(zone_builder_add(b, o, 255, 1, 60, NULL, 0, "f.zone", 9), TERN_EINVAL);
    assert_int_equal(zone_builder_add(b, o, 128, 1, 60, NULL, 0, "f.zone", 9), TERN_EINVAL);
    /* bad RDATA shape for a type the zone interprets */
    assert_int_equal(zone_builder_add(b, o, WIRE_T_A, 1, 60, a, 3, NULL, 0), TERN_EINVAL);
    assert_non_null(strstr(zone_builder_error(b), "zone test.zone"));
    assert_int_equal(
        zone_builder_add(b, o, WIRE_T_NS, 1, 60, (const uint8_t *)"\x03www", 4, NULL, 0),
        TERN_EINVAL);
    /* out of zone: refused, builder still usable; "notexample.test" is not a subdomain */
    wire_name(o, "www.notexample.test.");
    assert_int_equal(zone_builder_add(b, o, WIRE_T_A, 1, 60, a, 4, "f.zone", 10), TERN_EOUTZONE);
    assert_non_null(strstr(zone_builder_error(b), "outside zone"));
    wire_name(o, "test.");
    assert_int_equal(zone_builder_add(b, o, WIRE_T_A, 1, 60, a, 4, "f.zone", 11), TERN_EOUTZONE);
    /* types 256 and up are data, including ones nobody knows */
    wire_name(o, "x.example.test.");
    assert_int_equal(zone_builder_add(b, o, 65280, 1, 60, a, 4, "f.zone", 12), 0);
    zone_builder_free(b);
}

static void test_builder_validation(void **state)
{
    uint8_t apex[DNAME_MAXLEN];
    char err[256];
    zone_t *z = NULL;
    wire_name(apex, "example.test.");

    zone_builder_t *b = zone_builder_new(apex, "v.zone");
    add_a(b, "www.example.test.", 60, 1, 3);
    assert_int_equal(zone_builder_finish(b, &z, err, sizeof(err)), TERN_ENOSOA);
    assert_null(z);
    assert_non_null(strstr(err, "no SOA"));

    b = zone_builder_new(apex, "v.zone");
    uint8_t rd[600];
    size_t n = rdata_soa(rd, "ns1.example.test.", "h.example.test.", 1, 60);
    assert_int_equal(add_raw(b, "example.test.", WIRE_T_SOA, 60, rd, n, 1), 0);
    assert_int_equal(zone_builder_finish(b, &z, err, sizeof(err)), TERN_ENONS);
    assert_non_null(strstr(err, "no NS"));

    /* 256 types at one name: more than a node can count */
    b = zone_builder_new(apex, "v.zone");
    add_soa_ns(b, "example.test.", 60, 60);
    for (unsigned t = 0; t < 256; t++)
        assert_int_equal(
            add_raw(b, "many.example.test.", (uint16_t)(65000 + t), 60, "x", 1, 20 + t), 0);
    assert_int_equal(zone_builder_finish(b, &z, err, sizeof(err)), TERN_ELIMIT);
    assert_non_null(strstr(err, "test.zone:20:"));
    assert_non_null(strstr(err, "record types at one name"));

    /* SOA below the apex */
    b = zone_builder_new(apex, "v.zone");
    add_soa_ns(b, "example.test.", 60, 60);
    assert_int_equal(add_raw(b, "low.example.test.", WIRE_T_SOA, 60, rd, n, 9), 0);
    assert_int_equal(zone_builder_finish(b, &z, err, sizeof(err)), TERN_EINVAL);
    assert_non_null(strstr(err, "test.zone:9:"));

    /* CNAME beside RRSIG and NSEC is fine (RFC 4035), beside A it is not */
    b = zone_builder_new(apex, "v.zone");
    add_soa_ns(b, "example.test.", 60, 60);
    add_name_rr(b, "c.example.test.", WIRE_T_CNAME, NULL, 0, "www.example.test.", 4);
    assert_int_equal(add_raw(b, "c.example.test.", 46, 60, "\x00\x05", 2, 5), 0);
    assert_int_equal(add_raw(b, "c.example.test.", 47, 60, "\x00\x06", 2, 6), 0);
    assert_int_equal(zone_builder_finish(b, &z, err, sizeof(err)), 0);
    zone_free(z);

    b = zone_builder_new(apex, "v.zone");
    add_soa_ns(b, "example.test.", 60, 60);
    add_a(b, "c.example.test.", 60, 1, 4);
    add_name_rr(b, "c.example.test.", WIRE_T_CNAME, NULL, 0, "www.example.test.", 5);
    assert_int_equal(zone_builder_finish(b, &z, err, sizeof(err)), TERN_ECNAME);
    assert_non_null(strstr(err, "test.zone:5:"));

    /* CNAME at the apex collides with SOA/NS */
    b = zone_builder_new(apex, "v.zone");
    add_soa_ns(b, "example.test.", 60, 60);
    add_name_rr(b, "example.test.", WIRE_T_CNAME, NULL, 0, "www.example.test.", 6);
    assert_int_equal(zone_builder_finish(b, &z, err, sizeof(err)), TERN_ECNAME);
    assert_non_null(strstr(err, "test.zone:6:"));

    /* identical CNAMEs merge; different ones are an error */
    b = zone_builder_new(apex, "v.zone");
    add_soa_ns(b, "example.test.", 60, 60);
    add_name_rr(b, "c.example.test.", WIRE_T_CNAME, NULL, 0, "www.example.test.", 4);
    add_name_rr(b, "c.example.test.", WIRE_T_CNAME, NULL, 0, "www.example.test.", 5);
    assert_int_equal(zone_builder_finish(b, &z, err, sizeof(err)), 0);
    zone_free(z);
    b = zone_builder_new(apex, "v.zone");
    add_soa_ns(b, "example.test.", 60, 60);
    add_name_rr(b, "c.example.test.", WIRE_T_CNAME, NULL, 0, "www.example.test.", 4);
    add_name_rr(b, "c.example.test.", WIRE_T_CNAME, NULL, 0, "ftp.example.test.", 5);
    assert_int_equal(zone_builder_finish(b, &z, err, sizeof(err)), TERN_ECNAME);
    assert_non_null(strstr(err, "test.zone:5:"));

    /* two different SOAs */
    b = zone_builder_new(apex, "v.zone");
    add_soa_ns(b, "example.test.", 60, 60);
    n = rdata_soa(rd, "ns1.example.test.", "h.example.test.", 2, 60);
    assert_int_equal(add_raw(b, "example.test.", WIRE_T_SOA, 60, rd, n, 8), 0);
    assert_int_equal(zone_builder_finish(b, &z, err, sizeof(err)), TERN_EINVAL);
    assert_non_null(strstr(err, "test.zone:8:"));
    assert_non_null(strstr(err, "SOA"));

    zone_builder_free(NULL);
    zone_free(NULL);
}

/* A zone of example.test. plus what add() puts in; finish()'s result and message. */
static int finish_with(void (*add)(zone_builder_t *b), zone_t **z, char *err, size_t errlen)
{
    uint8_t apex[DNAME_MAXLEN];
    wire_name(apex, "example.test.");
    zone_builder_t *b = zone_builder_new(apex, "d.zone");
    assert_non_null(b);
    add_soa_ns(b, "example.test.", 60, 60);
    add(b);
    *z = NULL;
    return zone_builder_finish(b, z, err, errlen);
}

static void add_dname_ok(zone_builder_t *b)
{
    add_name_rr(b, "d.example.test.", WIRE_T_DNAME, NULL, 0, "t.example.test.", 10);
    add_a(b, "d.example.test.", 60, 1, 11); /* the owner may have other data */
    add_a(b, "a.t.example.test.", 60, 2, 12);
}

static void add_below_dname(zone_builder_t *b)
{
    add_name_rr(b, "d.example.test.", WIRE_T_DNAME, NULL, 0, "t.example.test.", 10);
    add_a(b, "x.y.d.example.test.", 60, 1, 11); /* below, with an ENT between */
}

static void add_dname_ns(zone_builder_t *b)
{
    add_name_rr(b, "d.example.test.", WIRE_T_DNAME, NULL, 0, "t.example.test.", 10);
    add_name_rr(b, "d.example.test.", WIRE_T_NS, NULL, 0, "ns.elsewhere.test.", 11);
}

static void add_two_dnames(zone_builder_t *b)
{
    add_name_rr(b, "d.example.test.", WIRE_T_DNAME, NULL, 0, "t.example.test.", 10);
    add_name_rr(b, "d.example.test.", WIRE_T_DNAME, NULL, 0, "u.example.test.", 11);
}

static void add_dname_cname(zone_builder_t *b)
{
    add_name_rr(b, "d.example.test.", WIRE_T_CNAME, NULL, 0, "t.example.test.", 10);
    add_name_rr(b, "d.example.test.", WIRE_T_DNAME, NULL, 0, "u.example.test.", 11);
}

static void add_wildcard_ns(zone_builder_t *b)
{
    add_name_rr(b, "*.w.example.test.", WIRE_T_NS, NULL, 0, "ns.elsewhere.test.", 10);
}

static void add_apex_dname(zone_builder_t *b)
{
    add_name_rr(b, "example.test.", WIRE_T_DNAME, NULL, 0, "other.test.", 10);
}

static void test_dname_build_and_lookup(void **state)
{
    (void)state;
    zone_t *z;
    char err[512];
    assert_int_equal(finish_with(add_dname_ok, &z, err, sizeof(err)), 0);
    const zone_node_t *d = find(z, "d.example.test.");
    assert_true(d->flags & ZONE_NODE_DNAME);
    zone_lookup_t r;
    lookup(z, "a.b.D.example.test.", &r);
    assert_int_equal(r.kind, ZONE_LOOKUP_DNAME);
    assert_ptr_equal(r.node, d);
    assert_int_equal(r.encloser_label, 2); /* "a.b." is what the DNAME rewrites */
    lookup(z, "d.example.test.", &r);      /* the owner itself is exact */
    assert_int_equal(r.kind, ZONE_LOOKUP_EXACT);
    lookup(z, "x.t.example.test.", &r); /* no DNAME above: plain NXDOMAIN */
    assert_int_equal(r.kind, ZONE_LOOKUP_NXDOMAIN);
    zone_free(z);
    /* DNAME and NS may meet at the apex only */
    assert_int_equal(finish_with(add_apex_dname, &z, err, sizeof(err)), 0);
    zone_free(z);
}

static void test_dname_validation(void **state)
{
    (void)state;
    zone_t *z;
    char err[512];
    assert_int_equal(finish_with(add_below_dname, &z, err, sizeof(err)), TERN_EINVAL);
    assert_null(z);
    assert_non_null(strstr(err, "test.zone:11: x.y.d.example.test. is below the DNAME at "
                                "d.example.test. (test.zone:10)"));
    assert_int_equal(finish_with(add_dname_ns, &z, err, sizeof(err)), TERN_EINVAL);
    assert_non_null(strstr(err, "test.zone:11: DNAME and NS at d.example.test."));
    assert_int_equal(finish_with(add_two_dnames, &z, err, sizeof(err)), TERN_ECNAME);
    assert_non_null(strstr(err, "test.zone:11: second DNAME record at d.example.test."));
    assert_int_equal(finish_with(add_dname_cname, &z, err, sizeof(err)), TERN_ECNAME);
    assert_non_null(strstr(err, "test.zone:11: CNAME and other data"));
    assert_int_equal(finish_with(add_wildcard_ns, &z, err, sizeof(err)), TERN_EINVAL);
    assert_non_null(strstr(err, "test.zone:10: NS records at the wildcard *.w.example.test."));
}

static void add_case_dups(zone_builder_t *b)
{
    add_name_rr(b, "p.example.test.", 12, NULL, 0, "www.example.test.", 10);
    add_name_rr(b, "p.example.test.", 12, NULL, 0, "WWW.Example.TEST.", 11);
    add_name_rr(b, "m.example.test.", WIRE_T_MX, "\x00\x0a", 2, "Mail.example.test.", 12);
    add_name_rr(b, "m.example.test.", WIRE_T_MX, "\x00\x0a", 2, "mail.EXAMPLE.test.", 13);
    add_name_rr(b, "m.example.test.", WIRE_T_MX, "\x00\x14", 2, "mail.example.test.", 14);
    /* text is data, not a name: case matters */
    assert_int_equal(add_raw(b, "t.example.test.", WIRE_T_TXT, 60, "\001A", 2, 15), 0);
    assert_int_equal(add_raw(b, "t.example.test.", WIRE_T_TXT, 60, "\001a", 2, 16), 0);
    /* a pool larger than the pairwise limit goes through the sorted path */
    for (unsigned i = 0; i < 40; i++) {
        char host[64];
        snprintf(host, sizeof(host), "%s%u.example.test.", i % 2 ? "HOST" : "host", i / 2);
        add_name_rr(b, "ns-pool.example.test.", 12, NULL, 0, host, 20 + i);
    }
}

static void test_dedup_ignores_case_of_names(void **state)
{
    (void)state;
    zone_t *z;
    char err[512];
    assert_int_equal(finish_with(add_case_dups, &z, err, sizeof(err)), 0);
    const zone_rrset_t *ptr = zone_node_rrset(find(z, "p.example.test."), 12);
    assert_int_equal(ptr->count, 1);
    assert_memory_equal(ptr->rdata + 2, "\x03www", 4); /* the first spelling stays */
    assert_int_equal(zone_node_rrset(find(z, "m.example.test."), WIRE_T_MX)->count, 2);
    assert_int_equal(zone_node_rrset(find(z, "t.example.test."), WIRE_T_TXT)->count, 2);
    assert_int_equal(zone_node_rrset(find(z, "ns-pool.example.test."), 12)->count, 20);
    zone_free(z);
}

static void test_root_zone(void **state)
{
    /* the apex may be the root: no label arithmetic may underflow */
    zone_builder_t *b = zone_builder_new((const uint8_t *)"", "root.zone");
    assert_non_null(b);
    add_soa_ns(b, ".", 60, 60);
    add_a(b, "a.root-servers.net.", 60, 4, 3);
    zone_t *z;
    char err[256];
    assert_int_equal(zone_builder_finish(b, &z, err, sizeof(err)), 0);
    assert_int_equal(z->apex_labels, 0);
    zone_lookup_t r;
    lookup(z, ".", &r);
    assert_int_equal(r.kind, ZONE_LOOKUP_EXACT);
    assert_ptr_equal(r.node, z->apex_node);
    lookup(z, "b.root-servers.net.", &r);
    assert_int_equal(r.kind, ZONE_LOOKUP_NXDOMAIN);
    assert_ptr_equal(r.encloser, find(z, "root-servers.net."));
    assert_true(r.encloser->flags & ZONE_NODE_ENT);
    zone_free(z);
}

/* Geo metadata and policies reach the built zone: offsets point at each RR, the metadata of a
 * duplicate is the first one's, a policy may come before the RRs, all-default policies and names
 * with a policy but no RRs stay plain, and geo is refused on other types. */
static void test_builder_geo(void **state)
{
    (void)state;
    uint8_t apex[DNAME_MAXLEN], www[DNAME_MAXLEN], plain[DNAME_MAXLEN], ghost[DNAME_MAXLEN];
    wire_name(apex, "geo.test.");
    wire_name(www, "WWW.geo.test.");
    wire_name(plain, "plain.geo.test.");
    wire_name(ghost, "ghost.geo.test.");
    zone_builder_t *b = zone_builder_new(apex, "geo.json");
    assert_non_null(b);
    add_soa_ns(b, "geo.test.", 3600, 300);
    zone_geo_policy_t pol = {.filter = ZONE_GEO_FILTER_COUNTRY,
                             .count = ZONE_GEO_COUNT_SINGLE,
                             .order = ZONE_GEO_ORDER_WEIGHTED};
    assert_int_equal(zone_builder_set_policy(b, www, WIRE_T_A, &pol), 0); /* before the RRs */
    assert_int_equal(zone_builder_set_policy(b, ghost, WIRE_T_A, &pol), 0);
    zone_geo_policy_t none = {0};
    assert_int_equal(zone_builder_set_policy(b, plain, WIRE_T_A, &none), 0);
    const uint16_t us_de[] = {ZONE_CC('U', 'S'), ZONE_CC('D', 'E')};
    const uint32_t asns[] = {64500, 0};
    zone_geo_meta_t m1 = {.weight = 10,
                          .countries = us_de,
                          .ncountries = 2,
                          .asns = asns,
                          .nasns = 2,
                          .has_location = true,
                          .lat = 90,
                          .lon = 0};
    zone_geo_meta_t m2 = {.weight = 3};
    uint8_t a1[4] = {192, 0, 2, 1}, a2[4] = {192, 0, 2, 2};
    assert_int_equal(zone_builder_add_geo(b, www, WIRE_T_A, 60, a1, 4, &m1, NULL, 0), 0);
    assert_int_equal(zone_builder_add_geo(b, www, WIRE_T_A, 60, a2, 4, &m2, NULL, 0), 0);
    assert_int_equal(zone_builder_add_geo(b, www, WIRE_T_A, 60, a1, 4, &m2, NULL, 0), 0);  /* dup */
    assert_int_equal(zone_builder_add_geo(b, www, WIRE_T_A, 60, a2, 4, NULL, NULL, 0), 0); /* dup */
    assert_int_equal(zone_builder_add_geo(b, plain, WIRE_T_A, 60, a1, 4, &m1, NULL, 0), 0);
    assert_int_equal(zone_builder_add_geo(b, www, WIRE_T_NS, 60, a1, 4, &m1, NULL, 0), TERN_EINVAL);
    assert_int_equal(zone_builder_set_policy(b, www, WIRE_T_MX, &pol), TERN_EINVAL);
    zone_geo_meta_t bad = {.has_location = true, .lat = 91, .lon = 0};
    assert_int_equal(zone_builder_add_geo(b, www, WIRE_T_A, 60, a1, 4, &bad, NULL, 0), TERN_EINVAL);
    uint8_t out[DNAME_MAXLEN];
    wire_name(out, "www.other.test.");
    assert_int_equal(zone_builder_set_policy(b, out, WIRE_T_A, &pol), TERN_EOUTZONE);

    zone_t *z = NULL;
    char err[256];
    assert_int_equal(zone_builder_finish(b, &z, err, sizeof(err)), 0);
    assert_int_equal(z->geo_count, 1);
    uint8_t lc[DNAME_MAXLEN];
    size_t len = wire_name(lc, "www.geo.test.");
    const zone_node_t *n = zone_find_node(z, lc, len, dname_hash(lc));
    assert_non_null(n);
    const zone_rrset_t *s = zone_node_rrset(n, WIRE_T_A);
    assert_int_equal(s->count, 2);
    const zone_geo_t *g = zone_rrset_geo(z, s);
    assert_non_null(g);
    assert_int_equal(g->policy.filter, ZONE_GEO_FILTER_COUNTRY);
    assert_int_equal(g->policy.count, ZONE_GEO_COUNT_SINGLE);
    assert_int_equal(g->policy.order, ZONE_GEO_ORDER_WEIGHTED);
    assert_int_equal(g->count, 2);
    assert_int_equal(g->rr[0].off, 0);
    assert_int_equal(g->rr[1].off, 6);
    assert_memory_equal(s->rdata + g->rr[1].off + 2, a2, 4);
    assert_int_equal(g->rr[0].weight, 10);
    assert_int_equal(g->rr[0].ncountries, 2);
    assert_int_equal(g->rr[0].countries[1], ZONE_CC('D', 'E'));
    assert_int_equal(g->rr[0].nasns, 2);
    assert_int_equal(g->rr[0].asns[0], 64500);
    assert_true(g->rr[0].has_loc);
    assert_true(g->rr[0].loc[2] > 0.999f); /* the north pole */
    assert_int_equal(g->rr[1].weight, 3);
    assert_false(g->rr[1].has_loc);
    assert_int_equal(g->rr[1].ncountries, 0);

    len = wire_name(lc, "plain.geo.test.");
    n = zone_find_node(z, lc, len, dname_hash(lc));
    assert_null(zone_rrset_geo(z, zone_node_rrset(n, WIRE_T_A)));
    len = wire_name(lc, "ghost.geo.test.");
    assert_null(zone_find_node(z, lc, len, dname_hash(lc)));
    zone_free(z);
}

/* The builder's health hook: records at 192.0.2.10 are checked, by one endpoint per owner. */
struct hook_ctx {
    health_registry_t *r;
    unsigned calls;
};

static health_ep_t *hook(void *ctx, const uint8_t *owner, uint16_t type, const uint8_t *addr)
{
    struct hook_ctx *h = ctx;
    h->calls++;
    assert_true(type == WIRE_T_A || type == WIRE_T_AAAA);
    if (type != WIRE_T_A || addr[3] != 10)
        return NULL;
    char name[300];
    assert_true(dname_to_str(owner, name, sizeof(name)) > 0);
    name[strlen(name) - 1] = '\0';
    health_spec_t s;
    health_spec_init(&s);
    memcpy(s.addr, addr, 4);
    s.host = name;
    return health_intern(h->r, &s);
}

static void count_fn(void *ctx, const health_ep_info_t *i)
{
    (void)i;
    ++*(size_t *)ctx;
}

static void test_builder_health_hook(void **state)
{
    (void)state;
    struct hook_ctx h = {.r = health_registry_new()};
    uint8_t apex[DNAME_MAXLEN];
    wire_name(apex, "example.test.");
    zone_builder_t *b = zone_builder_new(apex, "hook.zone");
    add_soa_ns(b, "example.test.", 3600, 300);
    add_a(b, "ns1.example.test.", 3600, 1, 3);
    add_a(b, "www.example.test.", 60, 10, 4); /* checked */
    add_a(b, "www.example.test.", 60, 11, 5); /* same RRset, not checked: always up */
    add_a(b, "www.example.test.", 60, 10, 6); /* a duplicate: one RR, one endpoint */
    add_a(b, "api.example.test.", 60, 10, 7); /* another owner: its own endpoint (Host) */
    uint8_t v6[16] = {0x20, 0x01, 0x0d, 0xb8, [15] = 10};
    assert_int_equal(add_raw(b, "www.example.test.", WIRE_T_AAAA, 60, v6, 16, 8), 0);
    zone_builder_set_health(b, hook, &h);
    zone_t *z;
    char err[256];
    assert_int_equal(zone_builder_finish(b, &z, err, sizeof(err)), 0);
    assert_int_equal(h.calls, 5); /* ns1, www x2, api, www AAAA */
    const zone_node_t *www = find(z, "www.example.test.");
    const zone_rrset_t *a = zone_node_rrset(www, WIRE_T_A);
    const zone_geo_t *g = zone_rrset_geo(z, a);
    assert_non_null(g);
    assert_true(g->health);
    assert_int_equal(g->policy.filter, ZONE_GEO_FILTER_NONE);
    assert_int_equal(g->count, 2);
    assert_non_null(g->rr[0].health);
    assert_null(g->rr[1].health);
    assert_null(zone_rrset_geo(z, zone_node_rrset(www, WIRE_T_AAAA)));
    assert_null(zone_rrset_geo(z, zone_node_rrset(find(z, "ns1.example.test."), WIRE_T_A)));
    const zone_geo_t *ga =
        zone_rrset_geo(z, zone_node_rrset(find(z, "api.example.test."), WIRE_T_A));
    assert_non_null(ga);
    assert_ptr_not_equal(ga->rr[0].health, g->rr[0].health);
    assert_int_equal(z->health_count, 2);
    size_t n = 0;
    health_each(h.r, count_fn, &n);
    assert_int_equal(n, 2);
    zone_free(z); /* the zone's references, and the builder's before them, are gone */
    n = 0;
    health_each(h.r, count_fn, &n);
    assert_int_equal(n, 0);
    health_registry_free(h.r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_zone_fields),
        cmocka_unit_test(test_neg_soa),
        cmocka_unit_test(test_sorted_merged_rrsets),
        cmocka_unit_test(test_large_rrset_dedup),
        cmocka_unit_test(test_lookup_exact),
        cmocka_unit_test(test_lookup_ent),
        cmocka_unit_test(test_lookup_wildcard),
        cmocka_unit_test(test_lookup_no_wildcard_below_existing),
        cmocka_unit_test(test_lookup_delegation),
        cmocka_unit_test(test_lookup_nxdomain_long_name),
        cmocka_unit_test(test_targets),
        cmocka_unit_test(test_dname_build_and_lookup),
        cmocka_unit_test(test_dname_validation),
        cmocka_unit_test(test_dedup_ignores_case_of_names),
        cmocka_unit_test(test_builder_refuses),
        cmocka_unit_test(test_builder_validation),
        cmocka_unit_test(test_builder_geo),
        cmocka_unit_test(test_builder_health_hook),
        cmocka_unit_test(test_root_zone),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
