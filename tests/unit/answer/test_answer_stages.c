/*
 * Unit tests for the answer stages' contracts (src/answer/answer_int.h), each stage run by hand
 * as answer_parsed() runs them: where dispatch sends a request (answered, resolved, handed to the
 * transfer thread), and what resolve reports it answered — the outcome the finish stage derives
 * the RRL class from (the last link of a chain decides). The bytes of the responses are
 * test_answer.c's business; here the stages' hand-over is.
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

#include "answer_int.h"
#include "answer_test_util.h"
#include "tern/answer/answer.h"
#include "tern/wire/dname.h"

static answer_ctx_t ctx;
static wire_query_t query;
static uint8_t qbuf[512];
static uint8_t out[65535];

/* A one-question query for name/type/class with opcode op, parsed into query. */
static wire_parse_result_t mkquery(const char *name, uint16_t type, uint16_t cls, unsigned op)
{
    memset(qbuf, 0, sizeof(qbuf));
    qbuf[0] = 0x12;
    qbuf[2] = (uint8_t)((op & 0xF) << 3 | 1); /* RD */
    qbuf[5] = 1;
    ldns_rdf *dn = ldns_dname_new_frm_str(name);
    assert_non_null(dn);
    size_t p = WIRE_HDR_LEN;
    memcpy(qbuf + p, ldns_rdf_data(dn), ldns_rdf_size(dn));
    p += ldns_rdf_size(dn);
    ldns_rdf_deep_free(dn);
    qbuf[p] = (uint8_t)(type >> 8);
    qbuf[p + 1] = (uint8_t)type;
    qbuf[p + 2] = (uint8_t)(cls >> 8);
    qbuf[p + 3] = (uint8_t)cls;
    return wire_parse_query(&query, qbuf, p + 4);
}

/* The per-query state answer_parsed() sets up before its stages (no EDNS, no client, no policy
 * verdict). */
static void begin(answer_resp_t *r, const answer_view_t *v, wire_parse_result_t pr,
                  answer_transport_t tr)
{
    memset(r, 0, sizeof(*r));
    memset(&ctx.info, 0, sizeof(ctx.info));
    r->ctx = &ctx;
    r->v = v;
    r->q = &query;
    r->pr = pr;
    r->transport = tr;
    r->out = out;
    r->out_cap = sizeof(out);
    r->adv = ANSWER_EDNS_DEFAULT;
    ctx.q = &query;
    ctx.view = v;
    ctx.q_ecs = NULL;
    ctx.q_src = NULL;
    ctx.ent = NULL;
    ctx.scope = 0;
}

/* Policy, the response opened, dispatch: where the request goes. */
static answer_route_t route(answer_resp_t *r, const answer_view_t *v, const char *name,
                            uint16_t type, uint16_t cls, unsigned op, answer_transport_t tr)
{
    begin(r, v, mkquery(name, type, cls, op), tr);
    if (v->limit) /* as answer_parsed(): without limits, no verdict (begin()'s zeroes) */
        assert_true(answer_policy(r));
    answer_finish_open(r);
    return answer_dispatch(r);
}

/* The outcome resolve reports for name/type over the fixture table, and the rcode it left. */
static answer_res_t resolved(const char *name, uint16_t type, unsigned *rcode)
{
    answer_view_t v = {.table = table, .cfg = {.edns_max_udp = ANSWER_EDNS_DEFAULT}};
    answer_resp_t r;
    assert_int_equal(route(&r, &v, name, type, WIRE_CLASS_IN, WIRE_OP_QUERY, ANSWER_UDP),
                     ANSWER_ROUTE_RESOLVE);
    answer_res_t res = answer_resolve(&r);
    *rcode = r.rcode;
    return res;
}

/* owner (a wire name from the zone data) spells text */
static void assert_owner(const uint8_t *owner, const char *text)
{
    ldns_rdf *dn = ldns_dname_new_frm_str(text);
    assert_non_null(dn);
    assert_int_equal(dname_len(owner), ldns_rdf_size(dn));
    assert_memory_equal(owner, ldns_rdf_data(dn), ldns_rdf_size(dn));
    ldns_rdf_deep_free(dn);
}

static const zone_t *zone_named(const char *text)
{
    ldns_rdf *dn = ldns_dname_new_frm_str(text);
    assert_non_null(dn);
    dname_view_t v;
    dname_view_init(&v, ldns_rdf_data(dn));
    unsigned apex;
    const zone_t *z = zone_table_find(table, &v, &apex);
    ldns_rdf_deep_free(dn);
    assert_non_null(z);
    assert_int_equal(apex, 0);
    return z;
}

static void test_resolve_outcomes(void **state)
{
    (void)state;
    unsigned rc;
    answer_res_t res = resolved("www.example.test.", WIRE_T_A, &rc);
    assert_int_equal(res.kind, ANSWER_RES_ANSWER);
    assert_int_equal(rc, WIRE_RC_NOERROR);

    res = resolved("www.example.test.", WIRE_T_MX, &rc);
    assert_int_equal(res.kind, ANSWER_RES_NODATA);

    res = resolved("nope.example.test.", WIRE_T_A, &rc);
    assert_int_equal(res.kind, ANSWER_RES_NXDOMAIN);
    assert_int_equal(rc, WIRE_RC_NXDOMAIN);
    assert_ptr_equal(res.at.zone, zone_named("example.test."));

    res = resolved("host.sub.example.test.", WIRE_T_A, &rc);
    assert_int_equal(res.kind, ANSWER_RES_REFERRAL);
    assert_owner(res.at.owner, "sub.example.test.");

    res = resolved("anything.wild.example.test.", WIRE_T_A, &rc);
    assert_int_equal(res.kind, ANSWER_RES_WILDCARD);
    assert_owner(res.at.owner, "*.wild.example.test.");
}

/* The last link of a chain decides what the response was. */
static void test_resolve_chain_outcomes(void **state)
{
    (void)state;
    unsigned rc;
    answer_res_t res = resolved("alias.example.test.", WIRE_T_A, &rc);
    assert_int_equal(res.kind, ANSWER_RES_ANSWER);

    /* into another zone, ending there in NXDOMAIN: that zone's */
    res = resolved("extnx.example.test.", WIRE_T_A, &rc);
    assert_int_equal(res.kind, ANSWER_RES_NXDOMAIN);
    assert_ptr_equal(res.at.zone, zone_named("other.test."));

    /* out of our zones: an answer for the name asked, the resolver goes on */
    res = resolved("out.example.test.", WIRE_T_A, &rc);
    assert_int_equal(res.kind, ANSWER_RES_ANSWER);
    assert_int_equal(rc, WIRE_RC_NOERROR);

    /* a CNAME into a delegation: the referral */
    res = resolved("tocut.example.test.", WIRE_T_A, &rc);
    assert_int_equal(res.kind, ANSWER_RES_REFERRAL);
    assert_owner(res.at.owner, "sub.example.test.");

    /* a loop and the chain limit end with nothing to class by */
    res = resolved("loop1.example.test.", WIRE_T_A, &rc);
    assert_int_equal(res.kind, ANSWER_RES_NONE);
    res = resolved("c1.example.test.", WIRE_T_A, &rc);
    assert_int_equal(res.kind, ANSWER_RES_NONE);
    assert_int_equal(rc, WIRE_RC_NOERROR);
}

/* No served zone holds the name: REFUSED, nothing to class by. */
static void test_resolve_no_zone(void **state)
{
    (void)state;
    unsigned rc;
    answer_res_t res = resolved("www.example.net.", WIRE_T_A, &rc);
    assert_int_equal(res.kind, ANSWER_RES_NONE);
    assert_int_equal(rc, WIRE_RC_REFUSED);
}

static void test_dispatch_routes(void **state)
{
    (void)state;
    answer_view_t v = {.table = table, .cfg = {.edns_max_udp = ANSWER_EDNS_DEFAULT}};
    answer_resp_t r;
    const char *www = "www.example.test.";

    /* CHAOS identity is answered by dispatch itself (REFUSED here: none configured) */
    assert_int_equal(
        route(&r, &v, "id.server.", WIRE_T_TXT, WIRE_CLASS_CH, WIRE_OP_QUERY, ANSWER_UDP),
        ANSWER_ROUTE_FINISH);
    assert_int_equal(r.rcode, WIRE_RC_REFUSED);

    /* without transfers: NOTIFY is NOTAUTH, AXFR over TCP REFUSED, over UDP NOTIMP */
    assert_int_equal(route(&r, &v, www, WIRE_T_SOA, WIRE_CLASS_IN, WIRE_OP_NOTIFY, ANSWER_UDP),
                     ANSWER_ROUTE_FINISH);
    assert_int_equal(r.rcode, WIRE_RC_NOTAUTH);
    assert_int_equal(route(&r, &v, www, WIRE_T_AXFR, WIRE_CLASS_IN, WIRE_OP_QUERY, ANSWER_TCP),
                     ANSWER_ROUTE_FINISH);
    assert_int_equal(r.rcode, WIRE_RC_REFUSED);
    assert_int_equal(route(&r, &v, www, WIRE_T_AXFR, WIRE_CLASS_IN, WIRE_OP_QUERY, ANSWER_UDP),
                     ANSWER_ROUTE_FINISH);
    assert_int_equal(r.rcode, WIRE_RC_NOTIMP);

    /* with transfers: NOTIFY and AXFR/IXFR over TCP go to the transfer thread, nothing
     * written; IXFR over UDP is TC */
    v.cfg.xfr = true;
    assert_int_equal(route(&r, &v, www, WIRE_T_SOA, WIRE_CLASS_IN, WIRE_OP_NOTIFY, ANSWER_UDP),
                     ANSWER_ROUTE_HANDOFF);
    assert_int_equal(ctx.info.outcome, ANSWER_HANDOFF);
    assert_int_equal(route(&r, &v, www, WIRE_T_AXFR, WIRE_CLASS_IN, WIRE_OP_QUERY, ANSWER_TCP),
                     ANSWER_ROUTE_HANDOFF);
    assert_int_equal(route(&r, &v, www, WIRE_T_IXFR, WIRE_CLASS_IN, WIRE_OP_QUERY, ANSWER_UDP),
                     ANSWER_ROUTE_FINISH);
    assert_true(r.tc);
    v.cfg.xfr = false;

    /* another opcode, a meta type, a class we do not serve */
    assert_int_equal(route(&r, &v, www, WIRE_T_A, WIRE_CLASS_IN, 5, ANSWER_UDP),
                     ANSWER_ROUTE_FINISH);
    assert_int_equal(r.rcode, WIRE_RC_NOTIMP);
    assert_int_equal(route(&r, &v, www, WIRE_T_META_MIN, WIRE_CLASS_IN, WIRE_OP_QUERY, ANSWER_UDP),
                     ANSWER_ROUTE_FINISH);
    assert_int_equal(r.rcode, WIRE_RC_NOTIMP);
    assert_int_equal(route(&r, &v, www, WIRE_T_A, 4 /* HS */, WIRE_OP_QUERY, ANSWER_UDP),
                     ANSWER_ROUTE_FINISH);
    assert_int_equal(r.rcode, WIRE_RC_REFUSED);

    /* QCLASS ANY is answered from IN; no table at all is REFUSED before any lookup */
    assert_int_equal(route(&r, &v, www, WIRE_T_A, WIRE_CLASS_ANY, WIRE_OP_QUERY, ANSWER_UDP),
                     ANSWER_ROUTE_RESOLVE);
    v.table = NULL;
    assert_int_equal(route(&r, &v, www, WIRE_T_A, WIRE_CLASS_IN, WIRE_OP_QUERY, ANSWER_UDP),
                     ANSWER_ROUTE_FINISH);
    assert_int_equal(r.rcode, WIRE_RC_REFUSED);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_resolve_outcomes),
        cmocka_unit_test(test_resolve_chain_outcomes),
        cmocka_unit_test(test_resolve_no_zone),
        cmocka_unit_test(test_dispatch_routes),
    };
    return cmocka_run_group_tests(tests, atu_setup, atu_teardown);
}
