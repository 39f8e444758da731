/*
 * Unit tests for ANAME in answer_query() (answer.h): A and AAAA at an ANAME owner answered with
 * the target's, in our zones (CNAMEs and ANAMEs followed, TTL the lowest on the way, loops
 * stopped, NODATA for a target without the type) and outside them from an aname_results_t table
 * (SERVFAIL until resolved); other types from the owner's own data; own A/AAAA win; ALIAS is a
 * synonym in zone files; answer_aname_exit() names what the resolver must get. Zones are written
 * by the test into a temporary directory; queries and responses go through ldns.
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
#include <ldns/ldns.h>

#include "answer_test_util.h"
#include "tern/answer/answer.h"
#include "tern/common/err.h"
#include "tern/wire/dname.h"
#include "tern/wire/rr.h"
#include "tern/zone/aname_results.h"
#include "tern/zone/zone_file.h"
#include "tern/zone/zone_table.h"

static const char ALIAS_ZONE[] = "$ORIGIN alias.test.\n"
                                 "$TTL 300\n"
                                 "@ SOA ns.alias.test. h.alias.test. 1 7200 3600 1209600 60\n"
                                 "@ NS ns.alias.test.\n"
                                 "ns A 192.0.2.53\n"
                                 "@ ANAME www.target.test.\n"
                                 "@ MX 10 mail.alias.test.\n"
                                 "mail A 192.0.2.25\n"
                                 "own ALIAS www.target.test.\n"
                                 "own A 192.0.2.99\n"
                                 "chain ANAME cn.target.test.\n"
                                 "nx ANAME nothere.target.test.\n"
                                 "v4only aname v4.target.test.\n"
                                 "loop1 ANAME loop2.alias.test.\n"
                                 "loop2 ANAME loop1.alias.test.\n"
                                 "out ANAME www.elsewhere.test.\n"
                                 "outcn ANAME tocn.target.test.\n"
                                 "rel ANAME v4\n"
                                 "v4 30 A 192.0.2.4\n"
                                 "deleg ANAME host.sub.alias.test.\n"
                                 "sub NS ns.other.test.\n"
                                 "*.wild ANAME www.target.test.\n"
                                 "txt TXT \"alias in text is not a type\"\n";

static const char TARGET_ZONE[] = "$ORIGIN target.test.\n"
                                  "$TTL 300\n"
                                  "@ SOA ns.target.test. h.target.test. 1 7200 3600 1209600 60\n"
                                  "@ NS ns.target.test.\n"
                                  "ns A 192.0.2.54\n"
                                  "www 120 A 192.0.2.1\n"
                                  "www 120 A 192.0.2.2\n"
                                  "www 600 AAAA 2001:db8::1\n"
                                  "cn 60 CNAME www.target.test.\n"
                                  "tocn CNAME far.elsewhere.test.\n"
                                  "v4 A 192.0.2.44\n";

static zone_table_t *table;
static answer_ctx_t ctx;
static uint8_t out[65535];
static char dir[] = "/tmp/tern-aname-XXXXXX";

static int load(const char *origin, const char *text)
{
    char path[256];
    snprintf(path, sizeof(path), "%s/%s.zone", dir, origin);
    FILE *f = fopen(path, "w");
    if (!f || fputs(text, f) < 0 || fclose(f) != 0)
        return -1;
    int rc = atu_add_file(table, origin, path);
    (void)unlink(path);
    return rc;
}

static int setup(void **state)
{
    (void)state;
    if (!mkdtemp(dir) || !(table = zone_table_new()))
        return -1;
    if (load("alias.test", ALIAS_ZONE) || load("target.test", TARGET_ZONE))
        return -1;
    return zone_table_freeze(table);
}

static int teardown(void **state)
{
    (void)state;
    zone_table_free(table);
    (void)rmdir(dir);
    return 0;
}

/* The response of (name, type) over a view of table with results (may be NULL). */
static ldns_pkt *ask_with(const char *name, ldns_rr_type type, const aname_results_t *results)
{
    ldns_pkt *q = NULL;
    assert_int_equal(ldns_pkt_query_new_frm_str(&q, name, type, LDNS_RR_CLASS_IN, LDNS_RD),
                     LDNS_STATUS_OK);
    ldns_pkt_set_id(q, 0x4242);
    uint8_t *wire = NULL;
    size_t len = 0;
    assert_int_equal(ldns_pkt2wire(&wire, q, &len), LDNS_STATUS_OK);
    ldns_pkt_free(q);
    answer_view_t v = {.table = table, .cfg = {.edns_max_udp = ANSWER_EDNS_DEFAULT}};
    v.aname = results;
    size_t n = answer_query(&v, &ctx, NULL, wire, len, out, sizeof(out), ANSWER_UDP);
    free(wire);
    assert_true(n >= 12);
    ldns_pkt *p = NULL;
    assert_int_equal(ldns_wire2pkt(&p, out, n), LDNS_STATUS_OK);
    return p;
}

static ldns_pkt *ask(const char *name, ldns_rr_type type)
{
    return ask_with(name, type, NULL);
}

static size_t count(ldns_rr_list *l)
{
    return l ? ldns_rr_list_rr_count(l) : 0;
}

/* Answer RR i: owner (exactly), type, RDATA presentation and TTL. */
static void check_an(ldns_pkt *p, size_t i, const char *owner, ldns_rr_type type, const char *rdata,
                     uint32_t ttl)
{
    ldns_rr_list *an = ldns_pkt_answer(p);
    assert_true(i < count(an));
    ldns_rr *rr = ldns_rr_list_rr(an, i);
    char *o = ldns_rdf2str(ldns_rr_owner(rr));
    assert_string_equal(o, owner);
    free(o);
    assert_int_equal(ldns_rr_get_type(rr), type);
    char *r = ldns_rdf2str(ldns_rr_rdf(rr, 0));
    assert_string_equal(r, rdata);
    free(r);
    assert_int_equal(ldns_rr_ttl(rr), ttl);
}

static void check_nodata(ldns_pkt *p, const char *apex)
{
    assert_int_equal(ldns_pkt_get_rcode(p), LDNS_RCODE_NOERROR);
    assert_true(ldns_pkt_aa(p));
    assert_int_equal(count(ldns_pkt_answer(p)), 0);
    assert_int_equal(count(ldns_pkt_authority(p)), 1);
    ldns_rr *soa = ldns_rr_list_rr(ldns_pkt_authority(p), 0);
    assert_int_equal(ldns_rr_get_type(soa), LDNS_RR_TYPE_SOA);
    char *o = ldns_rdf2str(ldns_rr_owner(soa));
    assert_string_equal(o, apex);
    free(o);
}

static void check_servfail(ldns_pkt *p)
{
    assert_int_equal(ldns_pkt_get_rcode(p), LDNS_RCODE_SERVFAIL);
    assert_false(ldns_pkt_aa(p));
    assert_int_equal(count(ldns_pkt_answer(p)), 0);
}

static void test_apex_follows_target(void **state)
{
    (void)state;
    ldns_pkt *p = ask("Alias.TEST.", LDNS_RR_TYPE_A);
    assert_int_equal(ldns_pkt_get_rcode(p), LDNS_RCODE_NOERROR);
    assert_true(ldns_pkt_aa(p));
    assert_int_equal(count(ldns_pkt_answer(p)), 2);
    /* owned by the name as asked; TTL min(ANAME 300, A 120) */
    check_an(p, 0, "Alias.TEST.", LDNS_RR_TYPE_A, "192.0.2.1", 120);
    check_an(p, 1, "Alias.TEST.", LDNS_RR_TYPE_A, "192.0.2.2", 120);
    assert_int_equal(ctx.info.rcode, 0);
    ldns_pkt_free(p);

    p = ask("alias.test.", LDNS_RR_TYPE_AAAA);
    assert_int_equal(count(ldns_pkt_answer(p)), 1);
    check_an(p, 0, "alias.test.", LDNS_RR_TYPE_AAAA, "2001:db8::1", 300); /* min(300, 600) */
    ldns_pkt_free(p);
}

static void test_other_types_are_the_owners(void **state)
{
    (void)state;
    ldns_pkt *p = ask("alias.test.", LDNS_RR_TYPE_MX);
    assert_int_equal(count(ldns_pkt_answer(p)), 1);
    assert_int_equal(ldns_rr_get_type(ldns_rr_list_rr(ldns_pkt_answer(p), 0)), LDNS_RR_TYPE_MX);
    ldns_pkt_free(p);
    /* the ANAME itself, asked by its type code */
    p = ask("alias.test.", (ldns_rr_type)WIRE_T_ANAME);
    assert_int_equal(count(ldns_pkt_answer(p)), 1);
    ldns_rr *rr = ldns_rr_list_rr(ldns_pkt_answer(p), 0);
    assert_int_equal(ldns_rr_get_type(rr), WIRE_T_ANAME);
    assert_int_equal(ldns_rr_ttl(rr), 300);
    ldns_pkt_free(p);
    /* a TXT that says "alias" is a TXT */
    p = ask("txt.alias.test.", LDNS_RR_TYPE_TXT);
    assert_int_equal(count(ldns_pkt_answer(p)), 1);
    ldns_pkt_free(p);
}

static void test_own_addresses_win(void **state)
{
    (void)state;
    ldns_pkt *p = ask("own.alias.test.", LDNS_RR_TYPE_A); /* written ALIAS in the file */
    assert_int_equal(count(ldns_pkt_answer(p)), 1);
    check_an(p, 0, "own.alias.test.", LDNS_RR_TYPE_A, "192.0.2.99", 300);
    ldns_pkt_free(p);
    p = ask("own.alias.test.", LDNS_RR_TYPE_AAAA); /* none of its own: the target's */
    check_an(p, 0, "own.alias.test.", LDNS_RR_TYPE_AAAA, "2001:db8::1", 300);
    ldns_pkt_free(p);
}

static void test_chains_and_relative_names(void **state)
{
    (void)state;
    ldns_pkt *p = ask("chain.alias.test.", LDNS_RR_TYPE_A); /* ANAME → CNAME → A */
    assert_int_equal(count(ldns_pkt_answer(p)), 2);
    check_an(p, 0, "chain.alias.test.", LDNS_RR_TYPE_A, "192.0.2.1", 60); /* the CNAME's */
    ldns_pkt_free(p);
    p = ask("rel.alias.test.", LDNS_RR_TYPE_A); /* "rel ANAME v4": $ORIGIN completes it */
    check_an(p, 0, "rel.alias.test.", LDNS_RR_TYPE_A, "192.0.2.4", 30);
    ldns_pkt_free(p);
    p = ask("x.Wild.alias.test.", LDNS_RR_TYPE_A); /* a wildcard owner: the name asked */
    assert_int_equal(count(ldns_pkt_answer(p)), 2);
    check_an(p, 0, "x.Wild.alias.test.", LDNS_RR_TYPE_A, "192.0.2.1", 120);
    ldns_pkt_free(p);
}

static void test_nodata_and_loops(void **state)
{
    (void)state;
    ldns_pkt *p = ask("nx.alias.test.", LDNS_RR_TYPE_A); /* target does not exist */
    check_nodata(p, "alias.test.");
    ldns_pkt_free(p);
    p = ask("v4only.alias.test.", LDNS_RR_TYPE_AAAA); /* target has no AAAA */
    check_nodata(p, "alias.test.");
    ldns_pkt_free(p);
    p = ask("v4only.alias.test.", LDNS_RR_TYPE_A);
    check_an(p, 0, "v4only.alias.test.", LDNS_RR_TYPE_A, "192.0.2.44", 300);
    ldns_pkt_free(p);
    p = ask("loop1.alias.test.", LDNS_RR_TYPE_A);
    check_servfail(p);
    ldns_pkt_free(p);
}

static aname_results_t *results(aname_state_t st, uint32_t ttl)
{
    aname_results_builder_t *b = aname_results_builder_new();
    assert_non_null(b);
    static const uint8_t rd[] = {0, 4, 198, 51, 100, 7, 0, 4, 198, 51, 100, 8};
    aname_result_t r = {.state = (uint8_t)st, .ttl = ttl};
    if (st == ANAME_OK) {
        r.count = 2;
        r.rdata_len = sizeof(rd);
        r.rdata = rd;
    }
    uint8_t name[DNAME_MAXLEN];
    const char *why;
    assert_true(dname_from_str("www.elsewhere.test.", 19, false, name, &why) > 0);
    assert_int_equal(aname_results_add(b, name, WIRE_T_A, &r), 0);
    assert_true(dname_from_str("far.elsewhere.test.", 19, false, name, &why) > 0);
    assert_int_equal(aname_results_add(b, name, WIRE_T_A, &r), 0);
    aname_results_t *t = aname_results_finish(b);
    assert_non_null(t);
    return t;
}

static void test_outside_our_zones(void **state)
{
    (void)state;
    /* nothing resolved yet: SERVFAIL */
    ldns_pkt *p = ask("out.alias.test.", LDNS_RR_TYPE_A);
    check_servfail(p);
    ldns_pkt_free(p);
    aname_results_t *t = results(ANAME_PENDING, 0);
    p = ask_with("out.alias.test.", LDNS_RR_TYPE_A, t);
    check_servfail(p);
    ldns_pkt_free(p);
    aname_results_release(t);

    t = results(ANAME_OK, 50);
    p = ask_with("out.alias.test.", LDNS_RR_TYPE_A, t);
    assert_int_equal(ldns_pkt_get_rcode(p), LDNS_RCODE_NOERROR);
    assert_true(ldns_pkt_aa(p));
    assert_int_equal(count(ldns_pkt_answer(p)), 2);
    check_an(p, 0, "out.alias.test.", LDNS_RR_TYPE_A, "198.51.100.7", 50); /* min(300, 50) */
    check_an(p, 1, "out.alias.test.", LDNS_RR_TYPE_A, "198.51.100.8", 50);
    ldns_pkt_free(p);
    /* through an in-zone CNAME that leaves our zones: the name where it leaves */
    p = ask_with("outcn.alias.test.", LDNS_RR_TYPE_A, t);
    check_an(p, 0, "outcn.alias.test.", LDNS_RR_TYPE_A, "198.51.100.7", 50);
    ldns_pkt_free(p);
    /* no AAAA entry: not resolved → SERVFAIL */
    p = ask_with("out.alias.test.", LDNS_RR_TYPE_AAAA, t);
    check_servfail(p);
    ldns_pkt_free(p);
    aname_results_release(t);

    t = results(ANAME_NODATA, 60);
    p = ask_with("out.alias.test.", LDNS_RR_TYPE_A, t);
    check_nodata(p, "alias.test.");
    ldns_pkt_free(p);
    aname_results_release(t);
    t = results(ANAME_NXDOMAIN, 60);
    p = ask_with("out.alias.test.", LDNS_RR_TYPE_A, t);
    check_nodata(p, "alias.test.");
    ldns_pkt_free(p);
    aname_results_release(t);

    /* a target below one of our delegations is not ours to answer either */
    p = ask("deleg.alias.test.", LDNS_RR_TYPE_A);
    check_servfail(p);
    ldns_pkt_free(p);
}

static void exit_of(const char *target, uint16_t qtype, const char *want)
{
    uint8_t name[DNAME_MAXLEN], got[DNAME_MAXLEN];
    const char *why;
    assert_true(dname_from_str(target, strlen(target), false, name, &why) > 0);
    int rc = answer_aname_exit(table, name, qtype, got);
    if (!want) {
        assert_int_equal(rc, 0);
        return;
    }
    assert_int_equal(rc, 1);
    char s[DNAME_MAXLEN * 4 + 1];
    (void)dname_to_str(got, s, sizeof(s));
    assert_string_equal(s, want);
}

static void test_exit_names(void **state)
{
    (void)state;
    exit_of("www.target.test.", WIRE_T_A, NULL);
    exit_of("nothere.target.test.", WIRE_T_A, NULL);                 /* NXDOMAIN is an answer */
    exit_of("v4.target.test.", WIRE_T_AAAA, NULL);                   /* NODATA too */
    exit_of("WWW.Elsewhere.test.", WIRE_T_A, "www.elsewhere.test."); /* lowercased */
    exit_of("tocn.target.test.", WIRE_T_AAAA, "far.elsewhere.test.");
    exit_of("host.sub.alias.test.", WIRE_T_A, "host.sub.alias.test.");
    exit_of("loop1.alias.test.", WIRE_T_A, NULL);
}

/* Load-time rules: one ANAME per name, its RDATA a name, not beside a CNAME. */
static void load_err(const char *text, const char *want)
{
    char path[256], err[512];
    snprintf(path, sizeof(path), "%s/bad.zone", dir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    assert_true(fputs(text, f) >= 0);
    assert_int_equal(fclose(f), 0);
    zone_t *z = NULL;
    assert_true(zone_file_load("bad.test", path, &z, err, sizeof(err)) < 0);
    assert_null(z);
    (void)unlink(path);
    if (!strstr(err, want))
        fail_msg("got \"%s\", want \"%s\"", err, want);
}

static void test_load_errors(void **state)
{
    (void)state;
    static const char head[] = "$ORIGIN bad.test.\n@ 300 SOA ns h 1 2 3 4 5\n@ 300 NS ns\n";
    char text[512];
    snprintf(text, sizeof(text), "%s@ ANAME a.example.\n@ ALIAS b.example.\n", head);
    load_err(text, ":5: second ANAME record at bad.test. (first at ");
    snprintf(text, sizeof(text), "%sw CNAME a.example.\nw ANAME b.example.\n", head);
    load_err(text, "CNAME and other data at w.bad.test.");
    snprintf(text, sizeof(text), "%sw ANAME\n", head);
    load_err(text, ":4: ");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_apex_follows_target),
        cmocka_unit_test(test_other_types_are_the_owners),
        cmocka_unit_test(test_own_addresses_win),
        cmocka_unit_test(test_chains_and_relative_names),
        cmocka_unit_test(test_nodata_and_loops),
        cmocka_unit_test(test_outside_our_zones),
        cmocka_unit_test(test_exit_names),
        cmocka_unit_test(test_load_errors),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
