/*
 * Unit tests for answer_query(): every resolution and policy case of answer.h, over a table
 * built from the fixture zones in tests/data/answer/ (example.test, other.test and
 * child.example.test). Queries are written by hand (so EDNS version, ECS and broken packets are
 * under our control); responses are read back with ldns, plus raw bytes where the wire form
 * itself is the point (question echo, owner pointers).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <ldns/ldns.h>

#include "answer_test_util.h"
#include "tern/answer/answer.h"
#include "tern/common/err.h"
#include "tern/zone/zone_file.h"
#include "tern/zone/zone_table.h"

#define QID 0xBEEF

static answer_ctx_t ctx;
static uint8_t qbuf[1024];
static size_t qlen;
static uint8_t out[65535];
static size_t outlen;

static const answer_config_t cfg_default = {
    .edns_max_udp = ANSWER_EDNS_DEFAULT,
    .identity = "ns1.tern.test",
    .version = "tern 0.1",
};
static const answer_config_t *cfg = &cfg_default;

/* ---- fixtures ---- */

/* ---- queries ---- */

typedef struct qspec {
    const char *name;
    uint16_t type;
    uint16_t cls; /* 0 = IN */
    unsigned opcode;
    bool no_rd;
    bool edns;
    uint16_t udp;
    uint8_t version;
    bool do_bit;
    bool ecs;
    uint8_t src; /* ECS source prefix (IPv4) */
    uint8_t addr4[4];
} qspec_t;

static void put16(uint8_t *p, unsigned v)
{
    p[0] = (uint8_t)(v >> 8);
    p[1] = (uint8_t)v;
}

/* Length of the question section of the query in qbuf. */
static size_t qsection_len;

static void mkquery(const qspec_t *s)
{
    memset(qbuf, 0, sizeof(qbuf));
    put16(qbuf, QID);
    put16(qbuf + 2, (s->opcode & 0xF) << 11 | (s->no_rd ? 0 : 0x0100));
    put16(qbuf + 4, 1);
    put16(qbuf + 10, s->edns ? 1 : 0);
    ldns_rdf *dn = ldns_dname_new_frm_str(s->name);
    assert_non_null(dn);
    size_t p = 12;
    memcpy(qbuf + p, ldns_rdf_data(dn), ldns_rdf_size(dn));
    p += ldns_rdf_size(dn);
    ldns_rdf_deep_free(dn);
    put16(qbuf + p, s->type);
    put16(qbuf + p + 2, s->cls ? s->cls : LDNS_RR_CLASS_IN);
    p += 4;
    qsection_len = p - 12;
    if (s->edns) {
        qbuf[p] = 0;
        put16(qbuf + p + 1, LDNS_RR_TYPE_OPT);
        put16(qbuf + p + 3, s->udp);
        qbuf[p + 5] = 0;
        qbuf[p + 6] = s->version;
        put16(qbuf + p + 7, s->do_bit ? 0x8000 : 0);
        size_t alen = ((size_t)s->src + 7) / 8;
        size_t rdlen = s->ecs ? 8 + alen : 0;
        put16(qbuf + p + 9, (unsigned)rdlen);
        p += 11;
        if (s->ecs) {
            put16(qbuf + p, 8);
            put16(qbuf + p + 2, (unsigned)(4 + alen));
            put16(qbuf + p + 4, 1);
            qbuf[p + 6] = s->src;
            qbuf[p + 7] = 0;
            memcpy(qbuf + p + 8, s->addr4, alen);
            p += rdlen;
        }
    }
    qlen = p;
}

/* Run the packet in qbuf through answer_query(); the response stays in out/outlen. */
static ldns_pkt *run(const zone_table_t *t, answer_transport_t tr)
{
    answer_view_t v = {.table = t, .cfg = *cfg};
    outlen = answer_query(&v, &ctx, NULL, qbuf, qlen, out, sizeof(out), tr);
    assert_true(outlen >= 12);
    ldns_pkt *p = NULL;
    assert_int_equal(ldns_wire2pkt(&p, out, outlen), LDNS_STATUS_OK);
    assert_int_equal(ldns_pkt_id(p), QID);
    assert_true(ldns_pkt_qr(p));
    assert_false(ldns_pkt_ra(p));
    assert_int_equal(ctx.info.rcode,
                     ldns_pkt_get_rcode(p) | (unsigned)ldns_pkt_edns_extended_rcode(p) << 4);
    assert_int_equal(ctx.info.truncated, ldns_pkt_tc(p));
    return p;
}

static ldns_pkt *ask_tr(const qspec_t *s, answer_transport_t tr)
{
    mkquery(s);
    return run(table, tr);
}

#define ASK(...)    ask_tr(&(qspec_t){__VA_ARGS__}, ANSWER_UDP)
#define ASKTCP(...) ask_tr(&(qspec_t){__VA_ARGS__}, ANSWER_TCP)

/* ---- response checks ---- */

static size_t count(ldns_rr_list *l)
{
    return l ? ldns_rr_list_rr_count(l) : 0;
}

/* Owner exactly (case included), type, and optionally the presentation of the first RDATA
 * field. */
static void check_rr(ldns_rr_list *l, size_t i, const char *owner, ldns_rr_type type,
                     const char *rdf0)
{
    assert_true(i < count(l));
    ldns_rr *rr = ldns_rr_list_rr(l, i);
    char *o = ldns_rdf2str(ldns_rr_owner(rr));
    assert_string_equal(o, owner);
    free(o);
    assert_int_equal(ldns_rr_get_type(rr), type);
    if (rdf0) {
        char *r = ldns_rdf2str(ldns_rr_rdf(rr, ldns_rr_get_type(rr) == LDNS_RR_TYPE_MX ? 1 : 0));
        assert_string_equal(r, rdf0);
        free(r);
    }
}

static uint32_t ttl_at(ldns_rr_list *l, size_t i)
{
    return ldns_rr_ttl(ldns_rr_list_rr(l, i));
}

static void check_head(ldns_pkt *p, ldns_pkt_rcode rcode, bool aa, size_t an, size_t ns, size_t ar)
{
    assert_int_equal(ldns_pkt_get_rcode(p), rcode);
    assert_int_equal(ldns_pkt_aa(p), aa);
    assert_int_equal(count(ldns_pkt_answer(p)), an);
    assert_int_equal(count(ldns_pkt_authority(p)), ns);
    assert_int_equal(count(ldns_pkt_additional(p)), ar);
}

/* The question section is the query's, byte for byte. */
static void check_question_echo(void)
{
    assert_int_equal(out[4], 0);
    assert_int_equal(out[5], 1);
    assert_true(outlen >= 12 + qsection_len);
    assert_memory_equal(out + 12, qbuf + 12, qsection_len);
}

static void check_neg_soa(ldns_pkt *p, const char *apex, uint32_t ttl)
{
    check_rr(ldns_pkt_authority(p), 0, apex, LDNS_RR_TYPE_SOA, NULL);
    assert_int_equal(ttl_at(ldns_pkt_authority(p), 0), ttl);
}

/* ---- positive answers ---- */

static void test_exact_answer(void **state)
{
    (void)state;
    ldns_pkt *p = ASK(.name = "WwW.Example.TEST.", .type = LDNS_RR_TYPE_A);
    check_head(p, LDNS_RCODE_NOERROR, true, 1, 0, 0);
    check_rr(ldns_pkt_answer(p), 0, "WwW.Example.TEST.", LDNS_RR_TYPE_A, "192.0.2.80");
    assert_int_equal(ttl_at(ldns_pkt_answer(p), 0), 3600);
    assert_true(ldns_pkt_rd(p));
    assert_false(ldns_pkt_edns(p));
    check_question_echo();
    /* the owner is a pointer to the question name */
    assert_int_equal(out[12 + qsection_len], 0xC0);
    assert_int_equal(out[12 + qsection_len + 1], 12);
    ldns_pkt_free(p);

    p = ASK(.name = "www.example.test.", .type = LDNS_RR_TYPE_AAAA, .no_rd = true);
    check_head(p, LDNS_RCODE_NOERROR, true, 1, 0, 0);
    check_rr(ldns_pkt_answer(p), 0, "www.example.test.", LDNS_RR_TYPE_AAAA, "2001:db8::80");
    assert_false(ldns_pkt_rd(p));
    ldns_pkt_free(p);
}

static void test_nodata(void **state)
{
    (void)state;
    ldns_pkt *p = ASK(.name = "www.example.test.", .type = LDNS_RR_TYPE_MX);
    check_head(p, LDNS_RCODE_NOERROR, true, 0, 1, 0);
    check_neg_soa(p, "example.test.", 300); /* min(SOA TTL 3600, MINIMUM 300) */
    ldns_pkt_free(p);
}

static void test_nodata_empty_non_terminal(void **state)
{
    (void)state;
    ldns_pkt *p = ASK(.name = "ent.example.test.", .type = LDNS_RR_TYPE_A);
    check_head(p, LDNS_RCODE_NOERROR, true, 0, 1, 0);
    check_neg_soa(p, "example.test.", 300);
    ldns_pkt_free(p);
}

static void test_nxdomain(void **state)
{
    (void)state;
    ldns_pkt *p = ASK(.name = "nope.example.test.", .type = LDNS_RR_TYPE_A);
    check_head(p, LDNS_RCODE_NXDOMAIN, true, 0, 1, 0);
    check_neg_soa(p, "example.test.", 300);
    check_question_echo();
    assert_int_equal(ctx.info.rcode, 3);
    ldns_pkt_free(p);
}

static void test_random_30_label_nxdomain(void **state)
{
    (void)state;
    static const char alnum[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-";
    srand(4242);
    for (int round = 0; round < 200; round++) {
        char name[300];
        size_t o = 0;
        for (int l = 0; l < 30; l++) {
            int n = 1 + rand() % 6;
            for (int k = 0; k < n; k++)
                name[o++] = alnum[rand() % (int)(sizeof(alnum) - 1)];
            name[o++] = '.';
        }
        strcpy(name + o, "example.test.");
        ldns_pkt *p = ASK(.name = name, .type = LDNS_RR_TYPE_A);
        check_head(p, LDNS_RCODE_NXDOMAIN, true, 0, 1, 0);
        check_neg_soa(p, "example.test.", 300);
        check_question_echo();
        ldns_pkt_free(p);
    }
}

/* ---- delegations ---- */

static void check_referral(ldns_pkt *p)
{
    check_head(p, LDNS_RCODE_NOERROR, false, 0, 2, 1);
    check_rr(ldns_pkt_authority(p), 0, "sub.example.test.", LDNS_RR_TYPE_NS, NULL);
    check_rr(ldns_pkt_authority(p), 1, "sub.example.test.", LDNS_RR_TYPE_NS, NULL);
    /* glue for the in-zone target only; ns.elsewhere.net. has none */
    check_rr(ldns_pkt_additional(p), 0, "ns.sub.example.test.", LDNS_RR_TYPE_A, "192.0.2.53");
}

static void test_referral_below_cut(void **state)
{
    (void)state;
    ldns_pkt *p = ASK(.name = "host.sub.example.test.", .type = LDNS_RR_TYPE_A);
    check_referral(p);
    ldns_pkt_free(p);
    /* even a name that does not exist below the cut: the child knows, we don't */
    p = ASK(.name = "a.b.c.sub.example.test.", .type = LDNS_RR_TYPE_MX);
    check_referral(p);
    ldns_pkt_free(p);
}

static void test_referral_at_cut(void **state)
{
    (void)state;
    ldns_pkt *p = ASK(.name = "sub.example.test.", .type = LDNS_RR_TYPE_A);
    check_referral(p);
    ldns_pkt_free(p);
    /* NS at the cut is the child's data too */
    p = ASK(.name = "sub.example.test.", .type = LDNS_RR_TYPE_NS);
    check_referral(p);
    ldns_pkt_free(p);
}

static void test_ds_at_cut(void **state)
{
    (void)state;
    ldns_pkt *p = ASK(.name = "sub.example.test.", .type = LDNS_RR_TYPE_DS);
    check_head(p, LDNS_RCODE_NOERROR, true, 1, 0, 0);
    check_rr(ldns_pkt_answer(p), 0, "sub.example.test.", LDNS_RR_TYPE_DS, "12345");
    ldns_pkt_free(p);
}

static void test_ds_at_cut_nodata(void **state)
{
    (void)state;
    ldns_pkt *p = ASK(.name = "nods.example.test.", .type = LDNS_RR_TYPE_DS);
    check_head(p, LDNS_RCODE_NOERROR, true, 0, 1, 0);
    check_neg_soa(p, "example.test.", 300);
    ldns_pkt_free(p);
    /* DS below a cut is the child's business: referral */
    p = ASK(.name = "x.sub.example.test.", .type = LDNS_RR_TYPE_DS);
    check_referral(p);
    ldns_pkt_free(p);
}

static void test_ds_at_served_child_apex(void **state)
{
    (void)state;
    /* we serve parent and child: DS comes from the parent side (RFC 4035 §3.1.4.1) */
    ldns_pkt *p = ASK(.name = "child.example.test.", .type = LDNS_RR_TYPE_DS);
    check_head(p, LDNS_RCODE_NOERROR, true, 1, 0, 0);
    check_rr(ldns_pkt_answer(p), 0, "child.example.test.", LDNS_RR_TYPE_DS, "54321");
    ldns_pkt_free(p);
    /* everything else at the child apex is the child's */
    p = ASK(.name = "child.example.test.", .type = LDNS_RR_TYPE_SOA);
    check_head(p, LDNS_RCODE_NOERROR, true, 1, 0, 0);
    check_rr(ldns_pkt_answer(p), 0, "child.example.test.", LDNS_RR_TYPE_SOA, NULL);
    ldns_pkt_free(p);
    p = ASK(.name = "www.child.example.test.", .type = LDNS_RR_TYPE_A);
    check_head(p, LDNS_RCODE_NOERROR, true, 1, 0, 0);
    ldns_pkt_free(p);
    /* DS at an apex whose parent we don't serve: the zone answers NODATA itself */
    p = ASK(.name = "other.test.", .type = LDNS_RR_TYPE_DS);
    check_head(p, LDNS_RCODE_NOERROR, true, 0, 1, 0);
    check_neg_soa(p, "other.test.", 60);
    ldns_pkt_free(p);
}

/* ---- additional section ---- */

static void test_additional_ns(void **state)
{
    (void)state;
    ldns_pkt *p = ASK(.name = "example.test.", .type = LDNS_RR_TYPE_NS);
    check_head(p, LDNS_RCODE_NOERROR, true, 2, 0, 3);
    ldns_rr_list *ar = ldns_pkt_additional(p);
    check_rr(ar, 0, "ns1.example.test.", LDNS_RR_TYPE_A, "192.0.2.1");
    check_rr(ar, 1, "ns1.example.test.", LDNS_RR_TYPE_AAAA, "2001:db8::1");
    check_rr(ar, 2, "ns2.example.test.", LDNS_RR_TYPE_A, "192.0.2.2");
    ldns_pkt_free(p);
}

static void test_additional_mx_dedup_and_skip_cut(void **state)
{
    (void)state;
    /* MX 10 mail, MX 20 mail, MX 30 ns.sub: mail once, ns.sub (below a cut) never */
    ldns_pkt *p = ASK(.name = "example.test.", .type = LDNS_RR_TYPE_MX);
    check_head(p, LDNS_RCODE_NOERROR, true, 3, 0, 2);
    ldns_rr_list *ar = ldns_pkt_additional(p);
    check_rr(ar, 0, "mail.example.test.", LDNS_RR_TYPE_A, "192.0.2.10");
    check_rr(ar, 1, "mail.example.test.", LDNS_RR_TYPE_AAAA, "2001:db8::10");
    ldns_pkt_free(p);
}

static void test_additional_srv(void **state)
{
    (void)state;
    ldns_pkt *p = ASK(.name = "_sip._tcp.example.test.", .type = LDNS_RR_TYPE_SRV);
    check_head(p, LDNS_RCODE_NOERROR, true, 1, 0, 1);
    check_rr(ldns_pkt_additional(p), 0, "sip.example.test.", LDNS_RR_TYPE_A, "192.0.2.82");
    ldns_pkt_free(p);
}

/* ---- CNAME ---- */

static void test_cname_in_zone(void **state)
{
    (void)state;
    ldns_pkt *p = ASK(.name = "Alias.example.test.", .type = LDNS_RR_TYPE_A);
    check_head(p, LDNS_RCODE_NOERROR, true, 2, 0, 0);
    check_rr(ldns_pkt_answer(p), 0, "Alias.example.test.", LDNS_RR_TYPE_CNAME, "www.example.test.");
    check_rr(ldns_pkt_answer(p), 1, "www.example.test.", LDNS_RR_TYPE_A, "192.0.2.80");
    ldns_pkt_free(p);
}

static void test_cname_qtype_cname(void **state)
{
    (void)state;
    ldns_pkt *p = ASK(.name = "alias.example.test.", .type = LDNS_RR_TYPE_CNAME);
    check_head(p, LDNS_RCODE_NOERROR, true, 1, 0, 0);
    check_rr(ldns_pkt_answer(p), 0, "alias.example.test.", LDNS_RR_TYPE_CNAME, "www.example.test.");
    ldns_pkt_free(p);
}

static void test_cname_across_zones(void **state)
{
    (void)state;
    ldns_pkt *p = ASK(.name = "ext.example.test.", .type = LDNS_RR_TYPE_A);
    check_head(p, LDNS_RCODE_NOERROR, true, 2, 0, 0);
    check_rr(ldns_pkt_answer(p), 0, "ext.example.test.", LDNS_RR_TYPE_CNAME, "www.other.test.");
    check_rr(ldns_pkt_answer(p), 1, "www.other.test.", LDNS_RR_TYPE_A, "198.51.100.1");
    ldns_pkt_free(p);
}

static void test_cname_to_nxdomain(void **state)
{
    (void)state;
    /* RFC 6604: the rcode is the last name's; the SOA is its zone's */
    ldns_pkt *p = ASK(.name = "extnx.example.test.", .type = LDNS_RR_TYPE_A);
    check_head(p, LDNS_RCODE_NXDOMAIN, true, 1, 1, 0);
    check_rr(ldns_pkt_answer(p), 0, "extnx.example.test.", LDNS_RR_TYPE_CNAME, NULL);
    check_neg_soa(p, "other.test.", 60);
    ldns_pkt_free(p);
}

static void test_cname_to_nodata(void **state)
{
    (void)state;
    ldns_pkt *p = ASK(.name = "extmx.example.test.", .type = LDNS_RR_TYPE_MX);
    check_head(p, LDNS_RCODE_NOERROR, true, 1, 1, 0);
    check_rr(ldns_pkt_answer(p), 0, "extmx.example.test.", LDNS_RR_TYPE_CNAME, NULL);
    check_neg_soa(p, "other.test.", 60);
    ldns_pkt_free(p);
}

static void test_cname_out_of_zones(void **state)
{
    (void)state;
    ldns_pkt *p = ASK(.name = "out.example.test.", .type = LDNS_RR_TYPE_A);
    check_head(p, LDNS_RCODE_NOERROR, true, 1, 0, 0);
    check_rr(ldns_pkt_answer(p), 0, "out.example.test.", LDNS_RR_TYPE_CNAME, "www.example.net.");
    ldns_pkt_free(p);
}

static void test_cname_loop_stops(void **state)
{
    (void)state;
    ldns_pkt *p = ASK(.name = "loop1.example.test.", .type = LDNS_RR_TYPE_A);
    check_head(p, LDNS_RCODE_NOERROR, true, 2, 0, 0);
    check_rr(ldns_pkt_answer(p), 0, "loop1.example.test.", LDNS_RR_TYPE_CNAME,
             "loop2.example.test.");
    check_rr(ldns_pkt_answer(p), 1, "loop2.example.test.", LDNS_RR_TYPE_CNAME,
             "loop1.example.test.");
    ldns_pkt_free(p);
}

static void test_cname_chain_limit(void **state)
{
    (void)state;
    /* c1 -> c2 -> ... -> c10 (A): nine CNAMEs, one more than the limit */
    ldns_pkt *p = ASK(.name = "c1.example.test.", .type = LDNS_RR_TYPE_A);
    check_head(p, LDNS_RCODE_NOERROR, true, ANSWER_CNAME_MAX, 0, 0);
    for (size_t i = 0; i < ANSWER_CNAME_MAX; i++)
        assert_int_equal(ldns_rr_get_type(ldns_rr_list_rr(ldns_pkt_answer(p), i)),
                         LDNS_RR_TYPE_CNAME);
    ldns_pkt_free(p);
    /* c2 -> ... -> c10: exactly ANSWER_CNAME_MAX CNAMEs, followed to the end */
    p = ASK(.name = "c2.example.test.", .type = LDNS_RR_TYPE_A);
    check_head(p, LDNS_RCODE_NOERROR, true, ANSWER_CNAME_MAX + 1, 0, 0);
    check_rr(ldns_pkt_answer(p), ANSWER_CNAME_MAX, "c10.example.test.", LDNS_RR_TYPE_A,
             "192.0.2.110");
    ldns_pkt_free(p);
}

static void test_cname_into_referral(void **state)
{
    (void)state;
    ldns_pkt *p = ASK(.name = "tocut.example.test.", .type = LDNS_RR_TYPE_A);
    /* AA stays: the first name is ours; the referral follows the CNAME */
    check_head(p, LDNS_RCODE_NOERROR, true, 1, 2, 1);
    check_rr(ldns_pkt_answer(p), 0, "tocut.example.test.", LDNS_RR_TYPE_CNAME,
             "host.sub.example.test.");
    check_rr(ldns_pkt_authority(p), 0, "sub.example.test.", LDNS_RR_TYPE_NS, NULL);
    check_rr(ldns_pkt_additional(p), 0, "ns.sub.example.test.", LDNS_RR_TYPE_A, "192.0.2.53");
    ldns_pkt_free(p);
}

/* ---- DNAME (RFC 6672) ---- */

static void test_dname_synthesis(void **state)
{
    (void)state;
    /* the DNAME, a CNAME with the DNAME's TTL owned by the name as asked, then its target */
    ldns_pkt *p = ASK(.name = "A.Dn.example.test.", .type = LDNS_RR_TYPE_A);
    check_head(p, LDNS_RCODE_NOERROR, true, 3, 0, 0);
    /* the DNAME's owner is a suffix of the question: written as a pointer to it */
    check_rr(ldns_pkt_answer(p), 0, "Dn.example.test.", LDNS_RR_TYPE_DNAME, "tgt.example.test.");
    check_rr(ldns_pkt_answer(p), 1, "A.Dn.example.test.", LDNS_RR_TYPE_CNAME,
             "A.tgt.example.test.");
    assert_int_equal(ttl_at(ldns_pkt_answer(p), 1), ttl_at(ldns_pkt_answer(p), 0));
    check_rr(ldns_pkt_answer(p), 2, "A.tgt.example.test.", LDNS_RR_TYPE_A, "192.0.2.120");
    check_question_echo();
    ldns_pkt_free(p);
    /* the target does not exist: NXDOMAIN after the synthesis (RFC 6604) */
    p = ASK(.name = "b.dn.example.test.", .type = LDNS_RR_TYPE_A);
    check_head(p, LDNS_RCODE_NXDOMAIN, true, 2, 1, 0);
    ldns_pkt_free(p);
    /* qtype CNAME: the synthesised CNAME is the answer, not followed */
    p = ASK(.name = "a.dn.example.test.", .type = LDNS_RR_TYPE_CNAME);
    check_head(p, LDNS_RCODE_NOERROR, true, 2, 0, 0);
    ldns_pkt_free(p);
}

static void test_dname_owner_answers_itself(void **state)
{
    (void)state;
    ldns_pkt *p = ASK(.name = "dn.example.test.", .type = LDNS_RR_TYPE_TXT);
    check_head(p, LDNS_RCODE_NOERROR, true, 1, 0, 0);
    check_rr(ldns_pkt_answer(p), 0, "dn.example.test.", LDNS_RR_TYPE_TXT, NULL);
    ldns_pkt_free(p);
    p = ASK(.name = "dn.example.test.", .type = LDNS_RR_TYPE_A);
    check_head(p, LDNS_RCODE_NOERROR, true, 0, 1, 0); /* NODATA */
    ldns_pkt_free(p);
}

static void test_dname_loop_and_chain(void **state)
{
    (void)state;
    /* x.dnself -> x.dnself.dnself... : one synthesis, then the same DNAME again stops it */
    ldns_pkt *p = ASK(.name = "x.dnself.example.test.", .type = LDNS_RR_TYPE_A);
    check_head(p, LDNS_RCODE_NOERROR, true, 2, 0, 0);
    ldns_pkt_free(p);
    /* DNAME -> DNAME: both synthesised, then the data */
    p = ASK(.name = "a.dnchain.example.test.", .type = LDNS_RR_TYPE_A);
    check_head(p, LDNS_RCODE_NOERROR, true, 5, 0, 0);
    check_rr(ldns_pkt_answer(p), 1, "a.dnchain.example.test.", LDNS_RR_TYPE_CNAME,
             "a.dn.example.test.");
    check_rr(ldns_pkt_answer(p), 3, "a.dn.example.test.", LDNS_RR_TYPE_CNAME,
             "a.tgt.example.test.");
    check_rr(ldns_pkt_answer(p), 4, "a.tgt.example.test.", LDNS_RR_TYPE_A, "192.0.2.120");
    ldns_pkt_free(p);
}

static void test_dname_yxdomain(void **state)
{
    (void)state;
    /* 2 x 61-byte labels + the 197-byte target: more than 255 bytes */
    char name[300];
    snprintf(name, sizeof(name), "%.60s.%.60s.dnyx.example.test.",
             "yyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyy",
             "yyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyy");
    ldns_pkt *p = ASK(.name = name, .type = LDNS_RR_TYPE_A);
    check_head(p, LDNS_RCODE_YXDOMAIN, true, 1, 0, 0);
    check_rr(ldns_pkt_answer(p), 0, "dnyx.example.test.", LDNS_RR_TYPE_DNAME, NULL);
    ldns_pkt_free(p);
    /* one label fewer fits (and the answer needs more than 512 bytes) */
    snprintf(name, sizeof(name), "%.30s.dnyx.example.test.",
             "yyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyy");
    p = ASK(.name = name, .type = LDNS_RR_TYPE_A, .edns = true, .udp = 1232);
    check_head(p, LDNS_RCODE_NXDOMAIN, true, 2, 1, 0);
    ldns_pkt_free(p);
}

/* ---- glue (RFC 9471) ---- */

static void test_glue_that_does_not_fit_sets_tc(void **state)
{
    (void)state;
    /* ten in-domain name servers with A and AAAA: not all fit 512 bytes */
    ldns_pkt *p = ASK(.name = "host.bigns.example.test.", .type = LDNS_RR_TYPE_A);
    assert_int_equal(ldns_pkt_get_rcode(p), LDNS_RCODE_NOERROR);
    assert_false(ldns_pkt_aa(p));
    assert_true(ldns_pkt_tc(p));
    assert_int_equal(count(ldns_pkt_authority(p)), 10);
    assert_true(count(ldns_pkt_additional(p)) < 20);
    ldns_pkt_free(p);
    /* with room, all of it and no TC */
    p = ASK(.name = "host.bigns.example.test.", .type = LDNS_RR_TYPE_A, .edns = true, .udp = 1232);
    assert_false(ldns_pkt_tc(p));
    assert_int_equal(count(ldns_pkt_additional(p)), 20);
    ldns_pkt_free(p);
    /* the same servers seen from another cut are sibling glue: dropped without TC */
    p = ASK(.name = "host.sibns.example.test.", .type = LDNS_RR_TYPE_A);
    assert_false(ldns_pkt_tc(p));
    assert_int_equal(count(ldns_pkt_authority(p)), 10);
    assert_true(count(ldns_pkt_additional(p)) < 20);
    ldns_pkt_free(p);
}

/* ---- wildcards ---- */

static void test_wildcard_answer(void **state)
{
    (void)state;
    ldns_pkt *p = ASK(.name = "MiXeD.wild.example.test.", .type = LDNS_RR_TYPE_A);
    check_head(p, LDNS_RCODE_NOERROR, true, 1, 0, 0);
    check_rr(ldns_pkt_answer(p), 0, "MiXeD.wild.example.test.", LDNS_RR_TYPE_A, "192.0.2.99");
    assert_int_equal(out[12 + qsection_len], 0xC0);
    assert_int_equal(out[12 + qsection_len + 1], 12);
    ldns_pkt_free(p);
    /* more than one label below the wildcard's parent */
    p = ASK(.name = "a.b.wild.example.test.", .type = LDNS_RR_TYPE_TXT);
    check_head(p, LDNS_RCODE_NOERROR, true, 1, 0, 0);
    check_rr(ldns_pkt_answer(p), 0, "a.b.wild.example.test.", LDNS_RR_TYPE_TXT, "\"wild\"");
    ldns_pkt_free(p);
}

static void test_wildcard_nodata(void **state)
{
    (void)state;
    ldns_pkt *p = ASK(.name = "x.wild.example.test.", .type = LDNS_RR_TYPE_MX);
    check_head(p, LDNS_RCODE_NOERROR, true, 0, 1, 0);
    check_neg_soa(p, "example.test.", 300);
    ldns_pkt_free(p);
    /* the wildcard's parent is an empty non-terminal, not covered by its own wildcard */
    p = ASK(.name = "wild.example.test.", .type = LDNS_RR_TYPE_A);
    check_head(p, LDNS_RCODE_NOERROR, true, 0, 1, 0);
    ldns_pkt_free(p);
}

static void test_wildcard_cname(void **state)
{
    (void)state;
    ldns_pkt *p = ASK(.name = "Foo.wc.example.test.", .type = LDNS_RR_TYPE_A);
    check_head(p, LDNS_RCODE_NOERROR, true, 2, 0, 0);
    check_rr(ldns_pkt_answer(p), 0, "Foo.wc.example.test.", LDNS_RR_TYPE_CNAME,
             "www.example.test.");
    check_rr(ldns_pkt_answer(p), 1, "www.example.test.", LDNS_RR_TYPE_A, "192.0.2.80");
    ldns_pkt_free(p);
}

/* ---- ANY (RFC 8482) ---- */

static void test_any_minimal(void **state)
{
    (void)state;
    /* www has A and AAAA: one RRset, the first in type order */
    ldns_pkt *p = ASK(.name = "www.example.test.", .type = LDNS_RR_TYPE_ANY);
    check_head(p, LDNS_RCODE_NOERROR, true, 1, 0, 0);
    check_rr(ldns_pkt_answer(p), 0, "www.example.test.", LDNS_RR_TYPE_A, "192.0.2.80");
    ldns_pkt_free(p);
    /* the apex: NS (type 2) comes first, with its additional data */
    p = ASK(.name = "example.test.", .type = LDNS_RR_TYPE_ANY);
    check_head(p, LDNS_RCODE_NOERROR, true, 2, 0, 3);
    check_rr(ldns_pkt_answer(p), 0, "example.test.", LDNS_RR_TYPE_NS, NULL);
    check_rr(ldns_pkt_answer(p), 1, "example.test.", LDNS_RR_TYPE_NS, NULL);
    ldns_pkt_free(p);
}

static void test_any_cname_and_ent(void **state)
{
    (void)state;
    ldns_pkt *p = ASK(.name = "alias.example.test.", .type = LDNS_RR_TYPE_ANY);
    check_head(p, LDNS_RCODE_NOERROR, true, 1, 0, 0);
    check_rr(ldns_pkt_answer(p), 0, "alias.example.test.", LDNS_RR_TYPE_CNAME, NULL);
    ldns_pkt_free(p);
    p = ASK(.name = "ent.example.test.", .type = LDNS_RR_TYPE_ANY);
    check_head(p, LDNS_RCODE_NOERROR, true, 0, 1, 0);
    check_neg_soa(p, "example.test.", 300);
    ldns_pkt_free(p);
}

/* ---- truncation ---- */

static void test_truncation_whole_rrsets(void **state)
{
    (void)state;
    /* 24 TXT records of ~73 bytes each: about 1750 bytes */
    ldns_pkt *p = ASK(.name = "big.example.test.", .type = LDNS_RR_TYPE_TXT);
    assert_true(outlen <= 512);
    assert_true(ldns_pkt_tc(p));
    assert_true(ctx.info.truncated);
    check_head(p, LDNS_RCODE_NOERROR, true, 0, 0, 0);
    check_question_echo();
    ldns_pkt_free(p);
    /* EDNS: the client's 4096 is capped at our 1232, and TC keeps the OPT */
    p = ASK(.name = "big.example.test.", .type = LDNS_RR_TYPE_TXT, .edns = true, .udp = 4096);
    assert_true(outlen <= ANSWER_EDNS_DEFAULT);
    assert_true(ldns_pkt_tc(p));
    assert_true(ldns_pkt_edns(p));
    check_head(p, LDNS_RCODE_NOERROR, true, 0, 0, 0);
    ldns_pkt_free(p);
    /* over TCP it all fits */
    p = ASKTCP(.name = "big.example.test.", .type = LDNS_RR_TYPE_TXT);
    assert_false(ldns_pkt_tc(p));
    check_head(p, LDNS_RCODE_NOERROR, true, 24, 0, 0);
    ldns_pkt_free(p);
    /* and over UDP when both sides allow 4096 */
    answer_config_t big = cfg_default;
    big.edns_max_udp = 4096;
    cfg = &big;
    p = ASK(.name = "big.example.test.", .type = LDNS_RR_TYPE_TXT, .edns = true, .udp = 4096);
    cfg = &cfg_default;
    assert_false(ldns_pkt_tc(p));
    check_head(p, LDNS_RCODE_NOERROR, true, 24, 0, 0);
    assert_int_equal(ldns_pkt_edns_udp_size(p), 4096);
    ldns_pkt_free(p);
}

static void test_truncation_authority_sets_tc(void **state)
{
    (void)state;
    /* six CNAMEs of ~78 bytes fill 512 bytes; the chain ends in NXDOMAIN whose SOA no longer
     * fits: TC, the rcode of the last lookup, the CNAMEs that fit */
    ldns_pkt *p = ASK(.name = "tcn.example.test.", .type = LDNS_RR_TYPE_A);
    assert_true(outlen <= 512);
    assert_true(ldns_pkt_tc(p));
    check_head(p, LDNS_RCODE_NXDOMAIN, true, 6, 0, 0);
    ldns_pkt_free(p);
    p = ASKTCP(.name = "tcn.example.test.", .type = LDNS_RR_TYPE_A);
    assert_false(ldns_pkt_tc(p));
    check_head(p, LDNS_RCODE_NXDOMAIN, true, 6, 1, 0);
    check_neg_soa(p, "example.test.", 300);
    ldns_pkt_free(p);
}

static void test_additional_dropped_without_tc(void **state)
{
    (void)state;
    /* 12 MX whose targets have A and AAAA: the MX fit 512, their addresses do not */
    ldns_pkt *p = ASK(.name = "bigmx.example.test.", .type = LDNS_RR_TYPE_MX);
    assert_true(outlen <= 512);
    assert_false(ldns_pkt_tc(p));
    assert_int_equal(count(ldns_pkt_answer(p)), 12);
    size_t ar = count(ldns_pkt_additional(p));
    assert_true(ar > 0 && ar < 24);
    check_rr(ldns_pkt_additional(p), 0, "mx00.example.test.", LDNS_RR_TYPE_A, "192.0.2.100");
    ldns_pkt_free(p);
    /* with room, all 24 */
    p = ASK(.name = "bigmx.example.test.", .type = LDNS_RR_TYPE_MX, .edns = true, .udp = 1232);
    assert_false(ldns_pkt_tc(p));
    assert_int_equal(count(ldns_pkt_answer(p)), 12);
    assert_int_equal(count(ldns_pkt_additional(p)), 24);
    ldns_pkt_free(p);
}

/* ---- EDNS ---- */

static void test_edns_echo(void **state)
{
    (void)state;
    ldns_pkt *p = ASK(.name = "www.example.test.", .type = LDNS_RR_TYPE_A, .edns = true,
                      .udp = 4096, .do_bit = true);
    check_head(p, LDNS_RCODE_NOERROR, true, 1, 0, 0);
    assert_true(ldns_pkt_edns(p));
    assert_int_equal(ldns_pkt_edns_udp_size(p), ANSWER_EDNS_DEFAULT);
    assert_int_equal(ldns_pkt_edns_version(p), 0);
    assert_int_equal(ldns_pkt_edns_extended_rcode(p), 0);
    assert_true(ldns_pkt_edns_do(p));
    ldns_pkt_free(p);
    p = ASK(.name = "www.example.test.", .type = LDNS_RR_TYPE_A, .edns = true, .udp = 1232);
    assert_true(ldns_pkt_edns(p));
    assert_false(ldns_pkt_edns_do(p));
    ldns_pkt_free(p);
    /* error responses to an EDNS query carry an OPT too */
    p = ASK(.name = "www.example.net.", .type = LDNS_RR_TYPE_A, .edns = true, .udp = 1232);
    check_head(p, LDNS_RCODE_REFUSED, false, 0, 0, 0);
    assert_true(ldns_pkt_edns(p));
    ldns_pkt_free(p);
}

static void test_edns_small_client_size_is_512(void **state)
{
    (void)state;
    /* an advertised size below 512 means 512 (RFC 6891 §6.2.5) */
    ldns_pkt *p =
        ASK(.name = "bigmx.example.test.", .type = LDNS_RR_TYPE_MX, .edns = true, .udp = 100);
    assert_true(outlen <= 512);
    assert_true(outlen > 400);
    assert_false(ldns_pkt_tc(p));
    assert_true(ldns_pkt_edns(p));
    ldns_pkt_free(p);
}

static void test_badvers(void **state)
{
    (void)state;
    ldns_pkt *p = ASK(.name = "www.example.test.", .type = LDNS_RR_TYPE_A, .edns = true,
                      .udp = 1232, .version = 1);
    /* BADVERS = 16: header rcode 0, OPT extended rcode 1 */
    check_head(p, LDNS_RCODE_NOERROR, false, 0, 0, 0);
    assert_true(ldns_pkt_edns(p));
    assert_int_equal(ldns_pkt_edns_extended_rcode(p), 1);
    assert_int_equal(ldns_pkt_edns_version(p), 0);
    assert_int_equal(ctx.info.rcode, 16);
    check_question_echo();
    ldns_pkt_free(p);
}

static void test_ecs_echo_scope_zero(void **state)
{
    (void)state;
    ldns_pkt *p = ASK(.name = "www.example.test.", .type = LDNS_RR_TYPE_A, .edns = true,
                      .udp = 1232, .ecs = true, .src = 24, .addr4 = {192, 0, 2, 0});
    check_head(p, LDNS_RCODE_NOERROR, true, 1, 0, 0);
    /* the OPT is the last record: its RDATA is the ECS option with scope 0 */
    static const uint8_t want[] = {0x00, 0x08, 0x00, 0x07, 0x00, 0x01, 24, 0, 192, 0, 2};
    assert_true(outlen > sizeof(want));
    assert_memory_equal(out + outlen - sizeof(want), want, sizeof(want));
    assert_int_equal(out[outlen - sizeof(want) - 2], 0);
    assert_int_equal(out[outlen - sizeof(want) - 1], sizeof(want));
    ldns_pkt_free(p);
    /* no ECS asked, none echoed */
    p = ASK(.name = "www.example.test.", .type = LDNS_RR_TYPE_A, .edns = true, .udp = 1232);
    assert_int_equal(out[outlen - 2], 0);
    assert_int_equal(out[outlen - 1], 0);
    ldns_pkt_free(p);
}

/* ---- policy ---- */

static void test_chaos_answered(void **state)
{
    (void)state;
    static const struct {
        const char *name;
        const char *text;
    } cases[] = {
        {"version.bind.", "\"tern 0.1\""},   {"VERSION.bind.", "\"tern 0.1\""},
        {"id.server.", "\"ns1.tern.test\""}, {"hostname.bind.", "\"ns1.tern.test\""},
        {"version.server.", "\"tern 0.1\""},
    };
    for (size_t i = 0; i < TERN_ARRAY_SIZE(cases); i++) {
        ldns_pkt *p = ASK(.name = cases[i].name, .type = LDNS_RR_TYPE_TXT, .cls = LDNS_RR_CLASS_CH);
        check_head(p, LDNS_RCODE_NOERROR, false, 1, 0, 0);
        check_rr(ldns_pkt_answer(p), 0, cases[i].name, LDNS_RR_TYPE_TXT, cases[i].text);
        ldns_rr *rr = ldns_rr_list_rr(ldns_pkt_answer(p), 0);
        assert_int_equal(ldns_rr_get_class(rr), LDNS_RR_CLASS_CH);
        assert_int_equal(ldns_rr_ttl(rr), 0);
        ldns_pkt_free(p);
    }
    ldns_pkt *p = ASK(.name = "version.bind.", .type = LDNS_RR_TYPE_ANY, .cls = LDNS_RR_CLASS_CH);
    check_head(p, LDNS_RCODE_NOERROR, false, 1, 0, 0);
    ldns_pkt_free(p);
}

static void test_chaos_refused(void **state)
{
    (void)state;
    ldns_pkt *p = ASK(.name = "authors.bind.", .type = LDNS_RR_TYPE_TXT, .cls = LDNS_RR_CLASS_CH);
    check_head(p, LDNS_RCODE_REFUSED, false, 0, 0, 0);
    ldns_pkt_free(p);
    p = ASK(.name = "version.bind.", .type = LDNS_RR_TYPE_A, .cls = LDNS_RR_CLASS_CH);
    check_head(p, LDNS_RCODE_REFUSED, false, 0, 0, 0);
    ldns_pkt_free(p);
    /* not configured */
    answer_config_t none = {.edns_max_udp = ANSWER_EDNS_DEFAULT};
    cfg = &none;
    p = ASK(.name = "version.bind.", .type = LDNS_RR_TYPE_TXT, .cls = LDNS_RR_CLASS_CH);
    check_head(p, LDNS_RCODE_REFUSED, false, 0, 0, 0);
    ldns_pkt_free(p);
    p = ASK(.name = "id.server.", .type = LDNS_RR_TYPE_TXT, .cls = LDNS_RR_CLASS_CH);
    check_head(p, LDNS_RCODE_REFUSED, false, 0, 0, 0);
    ldns_pkt_free(p);
    cfg = &cfg_default;
}

static void test_other_class_refused(void **state)
{
    (void)state;
    ldns_pkt *p = ASK(.name = "www.example.test.", .type = LDNS_RR_TYPE_A, .cls = LDNS_RR_CLASS_HS);
    check_head(p, LDNS_RCODE_REFUSED, false, 0, 0, 0);
    ldns_pkt_free(p);
}

static void test_qclass_any_is_in(void **state)
{
    (void)state;
    /* as NSD and Knot: the IN data answers QCLASS ANY */
    ldns_pkt *p =
        ASK(.name = "www.example.test.", .type = LDNS_RR_TYPE_A, .cls = LDNS_RR_CLASS_ANY);
    check_head(p, LDNS_RCODE_NOERROR, true, 1, 0, 0);
    check_question_echo();
    ldns_pkt_free(p);
    p = ASK(.name = "nope.example.test.", .type = LDNS_RR_TYPE_A, .cls = LDNS_RR_CLASS_ANY);
    check_head(p, LDNS_RCODE_NXDOMAIN, true, 0, 1, 0);
    ldns_pkt_free(p);
}

static void test_notimp_opcode(void **state)
{
    (void)state;
    ldns_pkt *p = ASK(.name = "www.example.test.", .type = LDNS_RR_TYPE_A, .opcode = 2,
                      .edns = true, .udp = 1232);
    check_head(p, LDNS_RCODE_NOTIMPL, false, 0, 0, 0);
    assert_int_equal(ldns_pkt_get_opcode(p), 2);
    assert_true(ldns_pkt_edns(p));
    ldns_pkt_free(p);
}

static void test_axfr_ixfr(void **state)
{
    (void)state;
    /* no transfers configured: AXFR over UDP is NOTIMP (RFC 5936 §4.2; NSD too), anything else
     * REFUSED, as a server that allows nobody answers */
    ldns_pkt *p = ASK(.name = "example.test.", .type = LDNS_RR_TYPE_AXFR);
    check_head(p, LDNS_RCODE_NOTIMPL, false, 0, 0, 0);
    ldns_pkt_free(p);
    p = ASK(.name = "example.test.", .type = LDNS_RR_TYPE_IXFR);
    check_head(p, LDNS_RCODE_REFUSED, false, 0, 0, 0);
    ldns_pkt_free(p);
    static const uint16_t types[] = {LDNS_RR_TYPE_AXFR, LDNS_RR_TYPE_IXFR};
    for (size_t i = 0; i < TERN_ARRAY_SIZE(types); i++) {
        p = ASKTCP(.name = "example.test.", .type = types[i]);
        check_head(p, LDNS_RCODE_REFUSED, false, 0, 0, 0);
        ldns_pkt_free(p);
    }
}

/* answer_query() with transfers configured (answer_config.xfr): nothing written, ANSWER_HANDOFF
 * for what the transfer thread takes. */
static size_t ask_xfr(answer_transport_t tr)
{
    answer_config_t c = *cfg;
    c.xfr = true;
    answer_view_t v = {.table = table, .cfg = c};
    return answer_query(&v, &ctx, NULL, qbuf, qlen, out, sizeof(out), tr);
}

static void test_xfr_handoff(void **state)
{
    (void)state;
    /* AXFR and IXFR over TCP: the transfer thread's */
    mkquery(&(qspec_t){.name = "example.test.", .type = LDNS_RR_TYPE_AXFR});
    assert_int_equal(ask_xfr(ANSWER_TCP), 0);
    assert_int_equal(ctx.info.outcome, ANSWER_HANDOFF);
    mkquery(&(qspec_t){.name = "example.test.", .type = LDNS_RR_TYPE_IXFR});
    assert_int_equal(ask_xfr(ANSWER_TCP), 0);
    assert_int_equal(ctx.info.outcome, ANSWER_HANDOFF);
    /* IXFR over UDP: TC, ask again over TCP (RFC 1995 §2) */
    size_t n = ask_xfr(ANSWER_UDP);
    assert_true(n >= 12);
    assert_int_equal(ctx.info.outcome, ANSWER_SENT);
    assert_true(out[2] & 0x02); /* TC */
    /* NOTIFY, on either transport */
    mkquery(&(qspec_t){.name = "example.test.", .type = LDNS_RR_TYPE_SOA, .opcode = 4});
    assert_int_equal(ask_xfr(ANSWER_UDP), 0);
    assert_int_equal(ctx.info.outcome, ANSWER_HANDOFF);
    /* a query with a TSIG record (the transfer side verifies it) */
    mkquery(&(qspec_t){.name = "example.test.", .type = LDNS_RR_TYPE_SOA});
    static const uint8_t tsig[] = {
        3,    'k',  'e',  'y',  0,    0,    250, 0,   255, 0,   0,   0,   0, /* key. TSIG ANY 0 */
        0,    29,                                                            /* RDLENGTH */
        11,   'h',  'm',  'a',  'c',  '-',  's', 'h', 'a', '2', '5', '6', 0, /* algorithm */
        0,    0,    0x5f, 0x5e, 0x10, 0x00,                                  /* time signed */
        1,    0x2c, 0,    0,                                                 /* fudge, MAC size */
        0x12, 0x34, 0,    0,    0,    0};                                    /* id, error, other */
    memcpy(qbuf + qlen, tsig, sizeof(tsig));
    qlen += sizeof(tsig);
    put16(qbuf + 10, 1);
    assert_int_equal(ask_xfr(ANSWER_UDP), 0);
    assert_int_equal(ctx.info.outcome, ANSWER_HANDOFF);
    /* without transfers configured the same query is answered here (the TSIG ignored) */
    ldns_pkt *p = run(table, ANSWER_UDP);
    assert_int_equal(ldns_pkt_get_rcode(p), LDNS_RCODE_NOERROR);
    assert_int_equal(ldns_pkt_ancount(p), 1);
    ldns_pkt_free(p);
}

static void test_notify_notauth(void **state)
{
    (void)state;
    /* RFC 1996: NOTIFY is for secondaries; tern is secondary for no zone (Knot: NOTAUTH) */
    ldns_pkt *p = ASK(.name = "example.test.", .type = LDNS_RR_TYPE_SOA, .opcode = 4);
    check_head(p, LDNS_RCODE_NOTAUTH, false, 0, 0, 0);
    assert_int_equal(ldns_pkt_get_opcode(p), 4);
    check_question_echo();
    ldns_pkt_free(p);
}

/* A header alone (QDCOUNT 0) with the given opcode; the rcode of the answer. */
static unsigned header_only(unsigned opcode, bool rd)
{
    memset(qbuf, 0, 12);
    put16(qbuf, QID);
    put16(qbuf + 2, opcode << 11 | (rd ? 0x0100 : 0));
    qlen = 12;
    outlen = answer_query(&(answer_view_t){.table = table, .cfg = *cfg}, &ctx, NULL, qbuf, qlen,
                          out, sizeof(out), ANSWER_UDP);
    assert_int_equal(outlen, 12);
    assert_int_equal(out[2] >> 3 & 0xF, opcode);
    assert_int_equal(!!(out[2] & 1), rd); /* RD copied */
    return out[3] & 0xF;
}

static void test_header_only_opcodes(void **state)
{
    (void)state;
    /* NOTIMP for what we do not implement (genreport's opcode 15 among them), FORMERR for the
     * two we do (a QUERY or NOTIFY needs its question), as NSD and Knot answer */
    assert_int_equal(header_only(15, true), LDNS_RCODE_NOTIMPL);
    assert_int_equal(header_only(1, false), LDNS_RCODE_NOTIMPL);
    assert_int_equal(header_only(2, true), LDNS_RCODE_NOTIMPL);
    assert_int_equal(header_only(5, true), LDNS_RCODE_NOTIMPL);
    assert_int_equal(header_only(0, true), LDNS_RCODE_FORMERR);
    assert_int_equal(header_only(4, false), LDNS_RCODE_FORMERR);
}

static void test_two_questions_formerr_no_flags(void **state)
{
    (void)state;
    /* QDCOUNT 2: FORMERR with no flag copied and no question, as NSD (Knot sends nothing) */
    mkquery(&(qspec_t){.name = "www.example.test.", .type = LDNS_RR_TYPE_A});
    memcpy(qbuf + qlen, qbuf + 12, qsection_len);
    qlen += qsection_len;
    put16(qbuf + 4, 2);
    qbuf[3] |= 0x30; /* AD, CD */
    outlen = answer_query(&(answer_view_t){.table = table, .cfg = *cfg}, &ctx, NULL, qbuf, qlen,
                          out, sizeof(out), ANSWER_UDP);
    assert_int_equal(outlen, 12);
    assert_int_equal(out[2], 0x80); /* QR, opcode QUERY, no AA TC RD */
    assert_int_equal(out[3], LDNS_RCODE_FORMERR);
}

static void test_meta_qtypes(void **state)
{
    (void)state;
    ldns_pkt *p = ASK(.name = "www.example.test.", .type = LDNS_RR_TYPE_OPT);
    check_head(p, LDNS_RCODE_FORMERR, false, 0, 0, 0);
    ldns_pkt_free(p);
    static const uint16_t notimp[] = {
        LDNS_RR_TYPE_MAILA, LDNS_RR_TYPE_MAILB, LDNS_RR_TYPE_TSIG, LDNS_RR_TYPE_TKEY, 128, 200};
    for (size_t i = 0; i < TERN_ARRAY_SIZE(notimp); i++) {
        p = ASK(.name = "www.example.test.", .type = notimp[i]);
        check_head(p, LDNS_RCODE_NOTIMPL, false, 0, 0, 0);
        ldns_pkt_free(p);
    }
}

static void test_refused_outside_zones(void **state)
{
    (void)state;
    ldns_pkt *p = ASK(.name = "www.example.net.", .type = LDNS_RR_TYPE_A);
    check_head(p, LDNS_RCODE_REFUSED, false, 0, 0, 0);
    check_question_echo();
    ldns_pkt_free(p);
    /* a parent of a served zone is not ours either */
    p = ASK(.name = "test.", .type = LDNS_RR_TYPE_A);
    check_head(p, LDNS_RCODE_REFUSED, false, 0, 0, 0);
    ldns_pkt_free(p);
    /* no table at all */
    mkquery(&(qspec_t){.name = "www.example.test.", .type = LDNS_RR_TYPE_A});
    p = run(NULL, ANSWER_UDP);
    check_head(p, LDNS_RCODE_REFUSED, false, 0, 0, 0);
    ldns_pkt_free(p);
}

static void test_formerr_from_parse(void **state)
{
    (void)state;
    /* a valid EDNS query with a trailing byte: FORMERR, question echoed, no OPT */
    mkquery(
        &(qspec_t){.name = "www.example.test.", .type = LDNS_RR_TYPE_A, .edns = true, .udp = 1232});
    qbuf[qlen++] = 0;
    ldns_pkt *p = run(table, ANSWER_UDP);
    check_head(p, LDNS_RCODE_FORMERR, false, 0, 0, 0);
    assert_false(ldns_pkt_edns(p));
    check_question_echo();
    ldns_pkt_free(p);
    /* ANCOUNT != 0 */
    mkquery(&(qspec_t){.name = "www.example.test.", .type = LDNS_RR_TYPE_A});
    put16(qbuf + 6, 1);
    p = run(table, ANSWER_UDP);
    assert_int_equal(ldns_pkt_get_rcode(p), LDNS_RCODE_FORMERR);
    assert_int_equal(count(ldns_pkt_answer(p)), 0);
    ldns_pkt_free(p);
}

static void test_dropped(void **state)
{
    (void)state;
    mkquery(&(qspec_t){.name = "www.example.test.", .type = LDNS_RR_TYPE_A});
    qbuf[2] |= 0x80; /* QR: a response, never answered */
    assert_int_equal(answer_query(&(answer_view_t){.table = table, .cfg = *cfg}, &ctx, NULL, qbuf,
                                  qlen, out, sizeof(out), ANSWER_UDP),
                     0);
    assert_int_equal(ctx.info.rcode, -1u);
    assert_int_equal(answer_query(&(answer_view_t){.table = table, .cfg = *cfg}, &ctx, NULL, qbuf,
                                  11, out, sizeof(out), ANSWER_UDP),
                     0);
    assert_int_equal(ctx.info.rcode, -1u);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_exact_answer),
        cmocka_unit_test(test_nodata),
        cmocka_unit_test(test_nodata_empty_non_terminal),
        cmocka_unit_test(test_nxdomain),
        cmocka_unit_test(test_random_30_label_nxdomain),
        cmocka_unit_test(test_referral_below_cut),
        cmocka_unit_test(test_referral_at_cut),
        cmocka_unit_test(test_ds_at_cut),
        cmocka_unit_test(test_ds_at_cut_nodata),
        cmocka_unit_test(test_ds_at_served_child_apex),
        cmocka_unit_test(test_additional_ns),
        cmocka_unit_test(test_additional_mx_dedup_and_skip_cut),
        cmocka_unit_test(test_additional_srv),
        cmocka_unit_test(test_cname_in_zone),
        cmocka_unit_test(test_cname_qtype_cname),
        cmocka_unit_test(test_cname_across_zones),
        cmocka_unit_test(test_cname_to_nxdomain),
        cmocka_unit_test(test_cname_to_nodata),
        cmocka_unit_test(test_cname_out_of_zones),
        cmocka_unit_test(test_cname_loop_stops),
        cmocka_unit_test(test_cname_chain_limit),
        cmocka_unit_test(test_cname_into_referral),
        cmocka_unit_test(test_wildcard_answer),
        cmocka_unit_test(test_wildcard_nodata),
        cmocka_unit_test(test_wildcard_cname),
        cmocka_unit_test(test_any_minimal),
        cmocka_unit_test(test_any_cname_and_ent),
        cmocka_unit_test(test_truncation_whole_rrsets),
        cmocka_unit_test(test_truncation_authority_sets_tc),
        cmocka_unit_test(test_additional_dropped_without_tc),
        cmocka_unit_test(test_edns_echo),
        cmocka_unit_test(test_edns_small_client_size_is_512),
        cmocka_unit_test(test_badvers),
        cmocka_unit_test(test_ecs_echo_scope_zero),
        cmocka_unit_test(test_chaos_answered),
        cmocka_unit_test(test_chaos_refused),
        cmocka_unit_test(test_other_class_refused),
        cmocka_unit_test(test_notimp_opcode),
        cmocka_unit_test(test_axfr_ixfr),
        cmocka_unit_test(test_xfr_handoff),
        cmocka_unit_test(test_meta_qtypes),
        cmocka_unit_test(test_refused_outside_zones),
        cmocka_unit_test(test_formerr_from_parse),
        cmocka_unit_test(test_dropped),
        cmocka_unit_test(test_qclass_any_is_in),
        cmocka_unit_test(test_notify_notauth),
        cmocka_unit_test(test_header_only_opcodes),
        cmocka_unit_test(test_two_questions_formerr_no_flags),
        cmocka_unit_test(test_dname_synthesis),
        cmocka_unit_test(test_dname_owner_answers_itself),
        cmocka_unit_test(test_dname_loop_and_chain),
        cmocka_unit_test(test_dname_yxdomain),
        cmocka_unit_test(test_glue_that_does_not_fit_sets_tc),
    };
    return cmocka_run_group_tests(tests, atu_setup, atu_teardown);
}
