/*
 * test_answer_dnssec.c — answer_query() on a signed zone (the answer fixture example.test,
 * signed with generated ECDSA keys): every RRSIG in the answer and authority sections is checked
 * by ldns against the zone's DNSKEYs, and the shapes RFC 4035 and RFC 9824 ask for: signed
 * answers, CNAME chains and DNAME synthesis, wildcard answers signed as the name asked, compact
 * denial for NXDOMAIN (NOERROR, NSEC with NXNAME) and NODATA, referrals with the child's DS or
 * the NSEC that proves there is none, DS at a cut, DNSKEY by the KSK, truncation over UDP. DO=0
 * answers are byte for byte those of the unsigned zone.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>
#include <ldns/ldns.h>

#include "tern/answer/answer.h"
#include "tern/dnssec/dnssec_key.h"
#include "tern/dnssec/dnssec_sign.h"
#include "tern/dnssec/dnssec_zone.h"
#include "tern/zone/zone_file.h"
#include "tern/zone/zone_table.h"

static zone_table_t *signed_t, *plain_t;
static answer_ctx_t ctx;
static uint8_t qbuf[512], out[65535];
static size_t qlen, outlen;
static ldns_rr_list *dnskeys; /* the zone's, for ldns */

static zone_t *load(const dnssec_zone_t *dz)
{
    const char *dir = getenv("TERN_TEST_DATA");
    char path[1024], err[512];
    snprintf(path, sizeof(path), "%s/answer/example.test.zone", dir ? dir : "tests/data");
    uint8_t keys[4096];
    zone_file_opts_t o = {0};
    if (dz) {
        int kl = dnssec_zone_dnskeys(dz, keys, sizeof(keys));
        assert_true(kl > 0);
        o.dnskeys = keys;
        o.dnskeys_len = (size_t)kl;
    }
    zone_t *z = NULL;
    if (zone_file_load_opts("example.test", path, &o, &z, err, sizeof(err)) < 0)
        fail_msg("%s", err);
    return z;
}

static zone_table_t *table_of(zone_t *z)
{
    zone_table_t *t = zone_table_new();
    assert_non_null(t);
    assert_int_equal(zone_table_add(t, z), 0);
    assert_int_equal(zone_table_freeze(t), 0);
    return t;
}

static int setup(void **state)
{
    (void)state;
    (void)dnssec_mem_install();
    const uint8_t origin[] = "\7example\4test";
    dnssec_key_t *k[2] = {NULL, NULL};
    char err[512];
    if (dnssec_key_generate(origin, DNSSEC_ALG_ECDSAP256SHA256, true, 0, &k[0], err, sizeof(err)) <
            0 ||
        dnssec_key_generate(origin, DNSSEC_ALG_ECDSAP256SHA256, false, 0, &k[1], err, sizeof(err)) <
            0)
        return -1;
    dnskeys = ldns_rr_list_new();
    for (int i = 0; i < 2; i++) {
        char text[1024];
        ldns_rr *rr = NULL;
        if (dnssec_key_dnskey_text(k[i], 3600, text, sizeof(text)) < 0 ||
            ldns_rr_new_frm_str(&rr, text, 3600, NULL, NULL) != LDNS_STATUS_OK)
            return -1;
        ldns_rr_list_push_rr(dnskeys, rr);
    }
    dnssec_zone_t *dz = NULL;
    if (dnssec_zone_new(origin, k, 2, 1, NULL, &dz, err, sizeof(err)) < 0)
        return -1;
    zone_t *z = load(dz);
    dnssec_sigs_t *old = NULL;
    if (dnssec_zone_sign(dz, z, (uint32_t)time(NULL), &old, err, sizeof(err)) < 0)
        return -1;
    z->dnssec = dz;
    z->dnssec_free = dnssec_zone_free;
    signed_t = table_of(z);
    plain_t = table_of(load(NULL));
    ctx.dnssec = dnssec_worker_new(0, 256);
    ctx.now_s = (uint32_t)time(NULL);
    return ctx.dnssec ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    zone_table_free(signed_t);
    zone_table_free(plain_t);
    dnssec_worker_free(ctx.dnssec);
    ldns_rr_list_deep_free(dnskeys);
    return 0;
}

static void put16(uint8_t *p, unsigned v)
{
    p[0] = (uint8_t)(v >> 8);
    p[1] = (uint8_t)v;
}

/* A query with EDNS (payload udp), DO as given. */
static void mkquery(const char *name, uint16_t type, bool do_bit, uint16_t udp)
{
    memset(qbuf, 0, sizeof(qbuf));
    put16(qbuf, 0x1234);
    put16(qbuf + 4, 1);
    put16(qbuf + 10, 1);
    ldns_rdf *dn = ldns_dname_new_frm_str(name);
    assert_non_null(dn);
    size_t p = 12;
    memcpy(qbuf + p, ldns_rdf_data(dn), ldns_rdf_size(dn));
    p += ldns_rdf_size(dn);
    ldns_rdf_deep_free(dn);
    put16(qbuf + p, type);
    put16(qbuf + p + 2, 1);
    p += 4;
    qbuf[p] = 0;
    put16(qbuf + p + 1, LDNS_RR_TYPE_OPT);
    put16(qbuf + p + 3, udp);
    put16(qbuf + p + 7, do_bit ? 0x8000 : 0);
    qlen = p + 11;
}

static ldns_pkt *ask_t(const zone_table_t *t, const char *name, uint16_t type, bool do_bit,
                       uint16_t udp, answer_transport_t tr)
{
    mkquery(name, type, do_bit, udp);
    answer_view_t v = {.table = t, .cfg = {.edns_max_udp = 4096}, .dnssec = true};
    outlen = answer_query(&v, &ctx, NULL, qbuf, qlen, out, sizeof(out), tr);
    assert_true(outlen >= 12);
    ldns_pkt *p = NULL;
    assert_int_equal(ldns_wire2pkt(&p, out, outlen), LDNS_STATUS_OK);
    return p;
}

static ldns_pkt *ask(const char *name, uint16_t type)
{
    return ask_t(signed_t, name, type, true, 4096, ANSWER_UDP);
}

/* Every RRSIG of section l verifies over the RRset it covers (same owner and type, in l), and
 * every RRset of l but the ones in unsigned_types (NS of a referral) has one. Returns the number
 * of RRSIGs. */
static unsigned verify_section(ldns_rr_list *l, const ldns_rr_type *unsigned_types, size_t nun)
{
    unsigned sigs = 0;
    for (size_t i = 0; i < ldns_rr_list_rr_count(l); i++) {
        ldns_rr *rr = ldns_rr_list_rr(l, i);
        ldns_rr_type t = ldns_rr_get_type(rr);
        if (t == LDNS_RR_TYPE_RRSIG) {
            ldns_rr_type covered = ldns_rdf2rr_type(ldns_rr_rrsig_typecovered(rr));
            ldns_rr_list *set = ldns_rr_list_new();
            for (size_t j = 0; j < ldns_rr_list_rr_count(l); j++) {
                ldns_rr *x = ldns_rr_list_rr(l, j);
                if (ldns_rr_get_type(x) == covered &&
                    ldns_dname_compare(ldns_rr_owner(x), ldns_rr_owner(rr)) == 0)
                    ldns_rr_list_push_rr(set, x);
            }
            ldns_rr_list *good = ldns_rr_list_new();
            ldns_status st = ldns_verify_rrsig_keylist(set, rr, dnskeys, good);
            if (st != LDNS_STATUS_OK) {
                char *s = ldns_rr2str(rr);
                fail_msg("RRSIG does not verify (%s): %s", ldns_get_errorstr_by_id(st), s);
            }
            ldns_rr_list_free(good);
            ldns_rr_list_free(set);
            sigs++;
            continue;
        }
        bool exempt = false;
        for (size_t u = 0; u < nun; u++)
            exempt |= t == unsigned_types[u];
        if (exempt)
            continue;
        bool has = false;
        for (size_t j = 0; j < ldns_rr_list_rr_count(l) && !has; j++) {
            ldns_rr *x = ldns_rr_list_rr(l, j);
            has = ldns_rr_get_type(x) == LDNS_RR_TYPE_RRSIG &&
                  ldns_rdf2rr_type(ldns_rr_rrsig_typecovered(x)) == t &&
                  ldns_dname_compare(ldns_rr_owner(x), ldns_rr_owner(rr)) == 0;
        }
        if (!has) {
            char *s = ldns_rr2str(rr);
            fail_msg("no RRSIG for %s", s);
        }
    }
    return sigs;
}

static unsigned verify(ldns_pkt *p)
{
    return verify_section(ldns_pkt_answer(p), NULL, 0) +
           verify_section(ldns_pkt_authority(p), (ldns_rr_type[]){LDNS_RR_TYPE_NS}, 1);
}

/* The NSEC of the authority section (owner, and whether its bitmap has type t). */
static ldns_rr *nsec_of(ldns_pkt *p)
{
    ldns_rr_list *l = ldns_pkt_rr_list_by_type(p, LDNS_RR_TYPE_NSEC, LDNS_SECTION_AUTHORITY);
    assert_non_null(l);
    assert_int_equal(ldns_rr_list_rr_count(l), 1);
    ldns_rr *n = ldns_rr_clone(ldns_rr_list_rr(l, 0));
    ldns_rr_list_deep_free(l);
    return n;
}

static bool nsec_has(ldns_rr *nsec, uint16_t t)
{
    return ldns_nsec_bitmap_covers_type(ldns_rr_rdf(nsec, 1), t);
}

static void check_owner(ldns_rr *rr, const char *name)
{
    ldns_rdf *want = ldns_dname_new_frm_str(name);
    assert_int_equal(ldns_dname_compare(ldns_rr_owner(rr), want), 0);
    ldns_rdf_deep_free(want);
}

static void test_signed_answer_and_do0(void **state)
{
    (void)state;
    ldns_pkt *p = ask("www.example.test", LDNS_RR_TYPE_A);
    assert_int_equal(ldns_pkt_get_rcode(p), LDNS_RCODE_NOERROR);
    assert_true(ldns_pkt_edns_do(p));
    assert_int_equal(ldns_pkt_ancount(p), 2);
    assert_int_equal(verify(p), 1);
    ldns_pkt_free(p);
    /* DO=0: exactly the unsigned zone's answer, for answers, denial and referrals */
    static const struct {
        const char *n;
        uint16_t t;
    } q[] = {{"www.example.test", 1},    {"nope.example.test", 1},     {"www.example.test", 16},
             {"x.wild.example.test", 1}, {"host.sub.example.test", 1}, {"a.dn.example.test", 1}};
    for (size_t i = 0; i < sizeof(q) / sizeof(q[0]); i++) {
        ldns_pkt_free(ask_t(plain_t, q[i].n, q[i].t, false, 4096, ANSWER_UDP));
        uint8_t plain[4096];
        size_t plen = outlen;
        memcpy(plain, out, outlen);
        ldns_pkt_free(ask_t(signed_t, q[i].n, q[i].t, false, 4096, ANSWER_UDP));
        assert_int_equal(outlen, plen);
        assert_memory_equal(out, plain, plen);
    }
}

static void test_dnskey_by_ksk(void **state)
{
    (void)state;
    ldns_pkt *p = ask("example.test", LDNS_RR_TYPE_DNSKEY);
    assert_int_equal(ldns_pkt_ancount(p), 3); /* two keys and one RRSIG (the KSK's) */
    assert_int_equal(verify(p), 1);
    ldns_pkt_free(p);
}

static void test_nxdomain_compact(void **state)
{
    (void)state;
    ldns_pkt *p = ask("nope.example.test", LDNS_RR_TYPE_A);
    /* RFC 9824: NOERROR, SOA, and an NSEC at the name with NXNAME */
    assert_int_equal(ldns_pkt_get_rcode(p), LDNS_RCODE_NOERROR);
    assert_int_equal(ldns_pkt_ancount(p), 0);
    assert_int_equal(verify(p), 2);
    ldns_rr *n = nsec_of(p);
    check_owner(n, "nope.example.test.");
    assert_true(nsec_has(n, DNSSEC_T_NXNAME));
    assert_true(nsec_has(n, LDNS_RR_TYPE_RRSIG) && nsec_has(n, LDNS_RR_TYPE_NSEC));
    assert_false(nsec_has(n, LDNS_RR_TYPE_A));
    char *next = ldns_rdf2str(ldns_rr_rdf(n, 0));
    assert_string_equal(next, "\\000.nope.example.test.");
    free(next);
    ldns_rr_free(n);
    ldns_pkt_free(p);
}

static void test_nodata_and_ent(void **state)
{
    (void)state;
    ldns_pkt *p = ask("www.example.test", LDNS_RR_TYPE_TXT);
    assert_int_equal(ldns_pkt_get_rcode(p), LDNS_RCODE_NOERROR);
    assert_int_equal(verify(p), 2);
    ldns_rr *n = nsec_of(p);
    assert_true(nsec_has(n, LDNS_RR_TYPE_A) && nsec_has(n, LDNS_RR_TYPE_AAAA));
    assert_false(nsec_has(n, LDNS_RR_TYPE_TXT) || nsec_has(n, DNSSEC_T_NXNAME));
    ldns_rr_free(n);
    ldns_pkt_free(p);
    p = ask("ent.example.test", LDNS_RR_TYPE_A); /* an empty non-terminal */
    assert_int_equal(ldns_pkt_get_rcode(p), LDNS_RCODE_NOERROR);
    n = nsec_of(p);
    assert_false(nsec_has(n, LDNS_RR_TYPE_A) || nsec_has(n, DNSSEC_T_NXNAME));
    assert_true(nsec_has(n, LDNS_RR_TYPE_NSEC));
    ldns_rr_free(n);
    assert_int_equal(verify(p), 2);
    ldns_pkt_free(p);
}

static void test_wildcard_signed_as_asked(void **state)
{
    (void)state;
    ldns_pkt *p = ask("x.WILD.example.test", LDNS_RR_TYPE_A);
    assert_int_equal(verify(p), 1);
    ldns_rr_list *s = ldns_pkt_rr_list_by_type(p, LDNS_RR_TYPE_RRSIG, LDNS_SECTION_ANSWER);
    /* the Labels field counts the name asked: no wildcard proof needed */
    assert_int_equal(ldns_rdf2native_int8(ldns_rr_rrsig_labels(ldns_rr_list_rr(s, 0))), 4);
    ldns_rr_list_deep_free(s);
    ldns_pkt_free(p);
    /* a second name: its own signature, both in the worker's cache now */
    dnssec_worker_stats_t st0, st1;
    dnssec_worker_stats(ctx.dnssec, &st0);
    ldns_pkt_free(ask("y.wild.example.test", LDNS_RR_TYPE_A));
    ldns_pkt_free(ask("y.wild.example.test", LDNS_RR_TYPE_A));
    dnssec_worker_stats(ctx.dnssec, &st1);
    assert_int_equal(st1.misses - st0.misses, 1);
    assert_int_equal(st1.hits - st0.hits, 1);
    /* a wildcard CNAME, and the literal wildcard name (signed ahead, Labels without the "*") */
    p = ask("q.wc.example.test", LDNS_RR_TYPE_A);
    assert_int_equal(verify(p), 2);
    ldns_pkt_free(p);
    p = ask("*.wild.example.test", LDNS_RR_TYPE_TXT);
    assert_int_equal(verify(p), 1);
    ldns_pkt_free(p);
}

static void test_chains(void **state)
{
    (void)state;
    ldns_pkt *p = ask("c2.example.test", LDNS_RR_TYPE_A);
    assert_int_equal(verify(p), 9); /* 8 CNAMEs and the A, each signed */
    ldns_pkt_free(p);
    /* DNAME: the DNAME signed ahead, the synthesised CNAME per query, then the target */
    p = ask("a.dn.example.test", LDNS_RR_TYPE_A);
    assert_int_equal(ldns_pkt_get_rcode(p), LDNS_RCODE_NOERROR);
    assert_int_equal(verify(p), 3);
    ldns_pkt_free(p);
    /* a chain that ends in a name that does not exist: the proof is for that name */
    p = ask("b.dn.example.test", LDNS_RR_TYPE_A);
    assert_int_equal(ldns_pkt_get_rcode(p), LDNS_RCODE_NOERROR);
    ldns_rr *n = nsec_of(p);
    check_owner(n, "b.tgt.example.test.");
    assert_true(nsec_has(n, DNSSEC_T_NXNAME));
    ldns_rr_free(n);
    verify(p);
    ldns_pkt_free(p);
}

static void test_referrals(void **state)
{
    (void)state;
    /* a secure delegation: NS (unsigned), the DS and its RRSIG */
    ldns_pkt *p = ask("host.sub.example.test", LDNS_RR_TYPE_A);
    assert_false(ldns_pkt_aa(p));
    assert_int_equal(verify(p), 1);
    ldns_rr_list *ds = ldns_pkt_rr_list_by_type(p, LDNS_RR_TYPE_DS, LDNS_SECTION_AUTHORITY);
    assert_non_null(ds);
    ldns_rr_list_deep_free(ds);
    assert_true(ldns_pkt_arcount(p) >= 1); /* glue, unsigned */
    ldns_pkt_free(p);
    /* an insecure one: the NSEC at the cut has NS and no DS */
    p = ask("host.nods.example.test", LDNS_RR_TYPE_A);
    assert_int_equal(verify(p), 1);
    ldns_rr *n = nsec_of(p);
    check_owner(n, "nods.example.test.");
    assert_true(nsec_has(n, LDNS_RR_TYPE_NS));
    assert_false(nsec_has(n, LDNS_RR_TYPE_DS) || nsec_has(n, LDNS_RR_TYPE_A));
    ldns_rr_free(n);
    ldns_pkt_free(p);
    /* DS asked at the cut: the parent's answer, signed; or its NODATA proof */
    p = ask("sub.example.test", LDNS_RR_TYPE_DS);
    assert_true(ldns_pkt_aa(p));
    assert_int_equal(verify(p), 1);
    ldns_pkt_free(p);
    p = ask("nods.example.test", LDNS_RR_TYPE_DS);
    assert_int_equal(ldns_pkt_ancount(p), 0);
    n = nsec_of(p);
    assert_true(nsec_has(n, LDNS_RR_TYPE_NS));
    assert_false(nsec_has(n, LDNS_RR_TYPE_DS));
    ldns_rr_free(n);
    assert_int_equal(verify(p), 2);
    ldns_pkt_free(p);
}

static void test_truncation(void **state)
{
    (void)state;
    /* the signed big TXT does not fit 512 bytes: TC, then complete over TCP */
    ldns_pkt *p = ask_t(signed_t, "big.example.test", LDNS_RR_TYPE_TXT, true, 512, ANSWER_UDP);
    assert_true(ldns_pkt_tc(p));
    ldns_pkt_free(p);
    p = ask_t(signed_t, "big.example.test", LDNS_RR_TYPE_TXT, true, 512, ANSWER_TCP);
    assert_false(ldns_pkt_tc(p));
    assert_int_equal(verify(p), 1);
    ldns_pkt_free(p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_signed_answer_and_do0),
        cmocka_unit_test(test_dnskey_by_ksk),
        cmocka_unit_test(test_nxdomain_compact),
        cmocka_unit_test(test_nodata_and_ent),
        cmocka_unit_test(test_wildcard_signed_as_asked),
        cmocka_unit_test(test_chains),
        cmocka_unit_test(test_referrals),
        cmocka_unit_test(test_truncation),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
