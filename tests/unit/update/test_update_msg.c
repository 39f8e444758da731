/*
 * test_update_msg.c — RFC 2136 over a real zone read from a master file: the five prerequisite
 * kinds and their rcodes, the prescan's FORMERR/NOTZONE, add/delete RR, delete RRset, delete
 * name, the apex rules (SOA and NS stay, the last NS stays), the CNAME rules, the SOA serial
 * (one up on a change, the update's own when greater, unchanged when nothing changed), TTL
 * changes as a whole RRset out and in, compressed names in RDATA, limits and malformed messages.
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

#include "tern/common/byteorder.h"
#include "tern/update/update_msg.h"
#include "tern/wire/parse.h"
#include "tern/wire/rr.h"
#include "tern/zone/zone_file.h"
#include "../test_util.h"

static const char *ZONE = "$ORIGIN u.test.\n"
                          "@ 3600 IN SOA ns1 hostmaster 100 3600 600 86400 300\n"
                          "@ 3600 IN NS ns1\n"
                          "@ 3600 IN NS ns2\n"
                          "ns1 3600 IN A 192.0.2.1\n"
                          "ns2 3600 IN A 192.0.2.2\n"
                          "www 300 IN A 192.0.2.10\n"
                          "www 300 IN A 192.0.2.11\n"
                          "www 300 IN TXT \"hello\"\n"
                          "alias 300 IN CNAME www\n"
                          "mx 300 IN MX 10 mail.u.test.\n"
                          "a.b 300 IN A 192.0.2.20\n";

static char dir[256];
static zone_t *zone;

static int setup(void **state)
{
    (void)state;
    tu_mkdtemp(dir, sizeof(dir), "test_update_msg");
    tu_write_file(dir, "u.zone", ZONE);
    char path[512], err[256];
    snprintf(path, sizeof(path), "%s/u.zone", dir);
    if (zone_file_load("u.test.", path, &zone, err, sizeof(err)) != 0)
        fail_msg("%s", err);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    zone_free(zone);
    tu_rmtree(dir);
    return 0;
}

/* An UPDATE message being built: a header, the zone section, then sections in order. */
typedef struct msg {
    uint8_t b[8192];
    size_t len;
} msg_t;

static void put16(msg_t *m, uint16_t v)
{
    tern_wr16(m->b + m->len, v);
    m->len += 2;
}

static void put_name(msg_t *m, const char *name)
{
    ldns_rdf *d = ldns_dname_new_frm_str(name);
    assert_non_null(d);
    memcpy(m->b + m->len, ldns_rdf_data(d), ldns_rdf_size(d));
    m->len += ldns_rdf_size(d);
    ldns_rdf_deep_free(d);
}

static void start(msg_t *m, const char *zone_name, uint16_t pre, uint16_t upd)
{
    memset(m, 0, sizeof(*m));
    put16(m, 0x1234);
    put16(m, WIRE_OP_UPDATE << 11);
    put16(m, 1);
    put16(m, pre);
    put16(m, upd);
    put16(m, 0);
    put_name(m, zone_name);
    put16(m, WIRE_T_SOA);
    put16(m, WIRE_CLASS_IN);
}

/* One RR: rdata in presentation form (parsed by ldns for type), or NULL for none. */
static void rr(msg_t *m, const char *owner, uint16_t type, uint16_t rclass, uint32_t ttl,
               const char *rdata)
{
    put_name(m, owner);
    put16(m, type);
    put16(m, rclass);
    tern_wr32(m->b + m->len, ttl);
    m->len += 4;
    if (!rdata) {
        put16(m, 0);
        return;
    }
    char text[512];
    char *ts = ldns_rr_type2str(type);
    snprintf(text, sizeof(text), "%s 0 IN %s %s", owner, ts, rdata);
    free(ts);
    ldns_rr *r = NULL;
    assert_int_equal(ldns_rr_new_frm_str(&r, text, 0, NULL, NULL), LDNS_STATUS_OK);
    size_t at = m->len;
    put16(m, 0);
    for (size_t i = 0; i < ldns_rr_rd_count(r); i++) {
        const ldns_rdf *f = ldns_rr_rdf(r, i);
        memcpy(m->b + m->len, ldns_rdf_data(f), ldns_rdf_size(f));
        m->len += ldns_rdf_size(f);
    }
    tern_wr16(m->b + at, (uint16_t)(m->len - at - 2));
    ldns_rr_free(r);
}

static char why[512];

/* Parse and evaluate m over the zone: the rcode. */
static unsigned run(const msg_t *m, update_change_t *ch, bool dnssec)
{
    update_msg_t um;
    why[0] = '\0';
    unsigned rc = update_msg_parse(&um, m->b, m->len, 100, why, sizeof(why));
    if (rc == WIRE_RC_NOERROR) {
        const update_opts_t o = {.dnssec = dnssec};
        rc = update_eval(zone, &um, &o, ch, why, sizeof(why));
    } else {
        memset(ch, 0, sizeof(*ch));
    }
    update_msg_free(&um);
    return rc;
}

static bool has(const update_rr_t *rrs, size_t n, const char *owner, uint16_t type, uint32_t ttl)
{
    uint8_t w[DNAME_MAXLEN];
    ldns_rdf *d = ldns_dname_new_frm_str(owner);
    memcpy(w, ldns_rdf_data(d), ldns_rdf_size(d));
    size_t len = ldns_rdf_size(d);
    ldns_rdf_deep_free(d);
    for (size_t i = 0; i < n; i++)
        if (rrs[i].type == type && rrs[i].owner_len == len && memcmp(rrs[i].owner, w, len) == 0 &&
            rrs[i].ttl == ttl)
            return true;
    return false;
}

static void test_add(void **state)
{
    (void)state;
    msg_t m;
    update_change_t ch;
    start(&m, "u.test.", 0, 2);
    rr(&m, "new.u.test.", WIRE_T_A, WIRE_CLASS_IN, 60, "192.0.2.50");
    rr(&m, "WWW.u.test.", WIRE_T_A, WIRE_CLASS_IN, 300, "192.0.2.10"); /* already there */
    assert_int_equal(run(&m, &ch, false), WIRE_RC_NOERROR);
    assert_int_equal(ch.from, 100);
    assert_int_equal(ch.to, 101);
    assert_int_equal(ch.nadded, 1);
    assert_int_equal(ch.nremoved, 0);
    assert_true(has(ch.added, ch.nadded, "new.u.test.", WIRE_T_A, 60));
    assert_int_equal(tern_rd32(ch.soa + ch.soa_len - 20), 101);
    update_change_free(&ch);
}

static void test_nothing_changes(void **state)
{
    (void)state;
    msg_t m;
    update_change_t ch;
    start(&m, "u.test.", 0, 2);
    rr(&m, "www.u.test.", WIRE_T_A, WIRE_CLASS_IN, 300, "192.0.2.11");
    rr(&m, "nothere.u.test.", WIRE_T_A, WIRE_CLASS_ANY, 0, NULL);
    assert_int_equal(run(&m, &ch, false), WIRE_RC_NOERROR);
    assert_int_equal(ch.from, ch.to);
    assert_int_equal(ch.nadded + ch.nremoved, 0);
    update_change_free(&ch);
}

static void test_ttl_change_is_whole_rrset(void **state)
{
    (void)state;
    msg_t m;
    update_change_t ch;
    start(&m, "u.test.", 0, 1);
    rr(&m, "www.u.test.", WIRE_T_A, WIRE_CLASS_IN, 60, "192.0.2.12");
    assert_int_equal(run(&m, &ch, false), WIRE_RC_NOERROR);
    assert_int_equal(ch.nremoved, 2); /* both old A at 300 */
    assert_int_equal(ch.nadded, 3);   /* all three at 60 */
    assert_true(has(ch.removed, ch.nremoved, "www.u.test.", WIRE_T_A, 300));
    assert_true(has(ch.added, ch.nadded, "www.u.test.", WIRE_T_A, 60));
    update_change_free(&ch);
}

static void test_delete_kinds(void **state)
{
    (void)state;
    msg_t m;
    update_change_t ch;
    /* delete RR, delete RRset, delete name */
    start(&m, "u.test.", 0, 3);
    rr(&m, "www.u.test.", WIRE_T_A, WIRE_CLASS_NONE, 0, "192.0.2.10");
    rr(&m, "www.u.test.", WIRE_T_TXT, WIRE_CLASS_ANY, 0, NULL);
    rr(&m, "mx.u.test.", WIRE_T_ANY, WIRE_CLASS_ANY, 0, NULL);
    assert_int_equal(run(&m, &ch, false), WIRE_RC_NOERROR);
    assert_int_equal(ch.nremoved, 3);
    assert_int_equal(ch.nadded, 0);
    assert_true(has(ch.removed, ch.nremoved, "www.u.test.", WIRE_T_A, 300));
    assert_true(has(ch.removed, ch.nremoved, "www.u.test.", WIRE_T_TXT, 300));
    assert_true(has(ch.removed, ch.nremoved, "mx.u.test.", WIRE_T_MX, 300));
    assert_int_equal(ch.names, 2);
    assert_int_equal(ch.to, 101);
    update_change_free(&ch);
}

static void test_apex_rules(void **state)
{
    (void)state;
    msg_t m;
    update_change_t ch;
    /* delete name and delete RRset at the apex keep SOA and NS; delete RR of SOA is ignored */
    start(&m, "u.test.", 0, 4);
    rr(&m, "u.test.", WIRE_T_ANY, WIRE_CLASS_ANY, 0, NULL);
    rr(&m, "u.test.", WIRE_T_NS, WIRE_CLASS_ANY, 0, NULL);
    rr(&m, "u.test.", WIRE_T_SOA, WIRE_CLASS_ANY, 0, NULL);
    rr(&m, "u.test.", WIRE_T_SOA, WIRE_CLASS_NONE, 0,
       "ns1.u.test. hostmaster.u.test. 100 3600 600 86400 300");
    assert_int_equal(run(&m, &ch, false), WIRE_RC_NOERROR);
    assert_int_equal(ch.nremoved + ch.nadded, 0);
    assert_int_equal(ch.from, ch.to);
    update_change_free(&ch);
    /* one NS may go, the last stays */
    start(&m, "u.test.", 0, 2);
    rr(&m, "u.test.", WIRE_T_NS, WIRE_CLASS_NONE, 0, "ns1.u.test.");
    rr(&m, "u.test.", WIRE_T_NS, WIRE_CLASS_NONE, 0, "NS2.u.test.");
    assert_int_equal(run(&m, &ch, false), WIRE_RC_NOERROR);
    assert_int_equal(ch.nremoved, 1);
    assert_int_equal(ch.nadded, 0);
    update_change_free(&ch);
}

static void test_cname_rules(void **state)
{
    (void)state;
    msg_t m;
    update_change_t ch;
    start(&m, "u.test.", 0, 2);
    rr(&m, "alias.u.test.", WIRE_T_A, WIRE_CLASS_IN, 300, "192.0.2.1");    /* beside a CNAME */
    rr(&m, "www.u.test.", WIRE_T_CNAME, WIRE_CLASS_IN, 300, "mx.u.test."); /* beside data */
    assert_int_equal(run(&m, &ch, false), WIRE_RC_NOERROR);
    assert_int_equal(ch.nremoved + ch.nadded, 0);
    update_change_free(&ch);
    /* a CNAME replaces the CNAME */
    start(&m, "u.test.", 0, 1);
    rr(&m, "alias.u.test.", WIRE_T_CNAME, WIRE_CLASS_IN, 300, "mx.u.test.");
    assert_int_equal(run(&m, &ch, false), WIRE_RC_NOERROR);
    assert_int_equal(ch.nremoved, 1);
    assert_int_equal(ch.nadded, 1);
    update_change_free(&ch);
}

static void test_soa_serial(void **state)
{
    (void)state;
    msg_t m;
    update_change_t ch;
    start(&m, "u.test.", 0, 1);
    rr(&m, "u.test.", WIRE_T_SOA, WIRE_CLASS_IN, 3600,
       "ns1.u.test. hostmaster.u.test. 2000 3600 600 86400 300");
    assert_int_equal(run(&m, &ch, false), WIRE_RC_NOERROR);
    assert_int_equal(ch.to, 2000);
    update_change_free(&ch);
    /* a smaller serial is ignored */
    start(&m, "u.test.", 0, 2);
    rr(&m, "u.test.", WIRE_T_SOA, WIRE_CLASS_IN, 3600,
       "ns1.u.test. hostmaster.u.test. 99 3600 600 86400 300");
    rr(&m, "x.u.test.", WIRE_T_TXT, WIRE_CLASS_IN, 60, "\"x\"");
    assert_int_equal(run(&m, &ch, false), WIRE_RC_NOERROR);
    assert_int_equal(ch.to, 101);
    update_change_free(&ch);
}

static void test_prerequisites(void **state)
{
    (void)state;
    msg_t m;
    update_change_t ch;
    static const struct {
        const char *owner;
        uint16_t type, rclass;
        const char *rdata;
        unsigned rcode;
    } cases[] = {
        {"www.u.test.", WIRE_T_A, WIRE_CLASS_ANY, NULL, WIRE_RC_NOERROR},
        {"www.u.test.", WIRE_T_MX, WIRE_CLASS_ANY, NULL, WIRE_RC_NXRRSET},
        {"www.u.test.", WIRE_T_MX, WIRE_CLASS_NONE, NULL, WIRE_RC_NOERROR},
        {"www.u.test.", WIRE_T_A, WIRE_CLASS_NONE, NULL, WIRE_RC_YXRRSET},
        {"www.u.test.", WIRE_T_ANY, WIRE_CLASS_ANY, NULL, WIRE_RC_NOERROR},
        {"b.u.test.", WIRE_T_ANY, WIRE_CLASS_ANY, NULL, WIRE_RC_NXDOMAIN}, /* an ENT */
        {"b.u.test.", WIRE_T_ANY, WIRE_CLASS_NONE, NULL, WIRE_RC_NOERROR},
        {"www.u.test.", WIRE_T_ANY, WIRE_CLASS_NONE, NULL, WIRE_RC_YXDOMAIN},
        {"www.example.", WIRE_T_A, WIRE_CLASS_ANY, NULL, WIRE_RC_NOTZONE},
        {"mx.u.test.", WIRE_T_MX, WIRE_CLASS_IN, "10 MAIL.u.test.", WIRE_RC_NOERROR},
        {"mx.u.test.", WIRE_T_MX, WIRE_CLASS_IN, "20 mail.u.test.", WIRE_RC_NXRRSET},
        {"www.u.test.", WIRE_T_A, WIRE_CLASS_IN, "192.0.2.10", WIRE_RC_NXRRSET}, /* one of 2 */
        {"www.u.test.", WIRE_T_A, WIRE_CLASS_ANY, "192.0.2.10", WIRE_RC_FORMERR},
        {"www.u.test.", WIRE_T_A, 3, NULL, WIRE_RC_FORMERR},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        start(&m, "u.test.", 1, 1);
        rr(&m, cases[i].owner, cases[i].type, cases[i].rclass, 0, cases[i].rdata);
        rr(&m, "p.u.test.", WIRE_T_TXT, WIRE_CLASS_IN, 60, "\"p\"");
        unsigned rc = run(&m, &ch, false);
        if (rc != cases[i].rcode)
            fail_msg("case %zu: %s, expected %s (%s)", i, update_rcode_name(rc),
                     update_rcode_name(cases[i].rcode), why);
        if (rc == WIRE_RC_NOERROR)
            assert_int_equal(ch.nadded, 1);
        else
            assert_int_equal(ch.nadded, 0);
        update_change_free(&ch);
    }
    /* the whole RRset given, in another order and case: it matches */
    start(&m, "u.test.", 2, 0);
    rr(&m, "www.u.test.", WIRE_T_A, WIRE_CLASS_IN, 0, "192.0.2.11");
    rr(&m, "WWW.u.test.", WIRE_T_A, WIRE_CLASS_IN, 0, "192.0.2.10");
    assert_int_equal(run(&m, &ch, false), WIRE_RC_NOERROR);
    update_change_free(&ch);
    /* a prerequisite with a TTL */
    start(&m, "u.test.", 1, 0);
    rr(&m, "www.u.test.", WIRE_T_A, WIRE_CLASS_ANY, 5, NULL);
    assert_int_equal(run(&m, &ch, false), WIRE_RC_FORMERR);
    assert_non_null(strstr(why, "TTL 5"));
}

static void test_prescan(void **state)
{
    (void)state;
    msg_t m;
    update_change_t ch;
    start(&m, "u.test.", 0, 2);
    rr(&m, "x.u.test.", WIRE_T_A, WIRE_CLASS_IN, 60, "192.0.2.1");
    rr(&m, "x.other.", WIRE_T_A, WIRE_CLASS_IN, 60, "192.0.2.1");
    assert_int_equal(run(&m, &ch, false), WIRE_RC_NOTZONE);
    assert_non_null(strstr(why, "update 2"));
    start(&m, "u.test.", 0, 1);
    rr(&m, "x.u.test.", WIRE_T_ANY, WIRE_CLASS_IN, 60, NULL);
    assert_int_equal(run(&m, &ch, false), WIRE_RC_FORMERR);
    start(&m, "u.test.", 0, 1);
    rr(&m, "x.u.test.", WIRE_T_A, WIRE_CLASS_ANY, 60, NULL);
    assert_int_equal(run(&m, &ch, false), WIRE_RC_FORMERR);
    start(&m, "u.test.", 0, 1);
    rr(&m, "x.u.test.", WIRE_T_A, WIRE_CLASS_NONE, 60, "192.0.2.1");
    assert_int_equal(run(&m, &ch, false), WIRE_RC_FORMERR);
    /* a zone tern signs keeps its DNSSEC records */
    start(&m, "u.test.", 0, 1);
    rr(&m, "u.test.", WIRE_T_DNSKEY, WIRE_CLASS_ANY, 0, NULL);
    assert_int_equal(run(&m, &ch, true), WIRE_RC_REFUSED);
    assert_int_equal(run(&m, &ch, false), WIRE_RC_NOERROR);
    update_change_free(&ch);
}

static void test_malformed(void **state)
{
    (void)state;
    msg_t m;
    update_change_t ch;
    start(&m, "u.test.", 0, 1);
    rr(&m, "x.u.test.", WIRE_T_A, WIRE_CLASS_IN, 60, "192.0.2.1");
    for (size_t cut = 0; cut < m.len; cut++) {
        msg_t c = m;
        c.len = cut;
        unsigned rc = run(&c, &ch, false);
        assert_int_equal(rc, WIRE_RC_FORMERR);
    }
    /* two zones */
    tern_wr16(m.b + 4, 2);
    assert_int_equal(run(&m, &ch, false), WIRE_RC_FORMERR);
    /* the zone section's type is not SOA */
    start(&m, "u.test.", 0, 0);
    tern_wr16(m.b + m.len - 4, WIRE_T_A);
    assert_int_equal(run(&m, &ch, false), WIRE_RC_FORMERR);
    /* more records than allowed */
    start(&m, "u.test.", 60, 60);
    assert_int_equal(run(&m, &ch, false), WIRE_RC_REFUSED);
    assert_non_null(strstr(why, "update_max_records"));
}

/* An MX whose exchange is a compression pointer to the zone name in the zone section. */
static void test_compressed_rdata(void **state)
{
    (void)state;
    msg_t m;
    update_change_t ch;
    start(&m, "u.test.", 0, 1);
    put_name(&m, "mx2.u.test.");
    put16(&m, WIRE_T_MX);
    put16(&m, WIRE_CLASS_IN);
    tern_wr32(m.b + m.len, 60);
    m.len += 4;
    put16(&m, 2 + 2 + 2);
    put16(&m, 5);
    m.b[m.len++] = 1;
    m.b[m.len++] = 'm';
    put16(&m, 0xC000 | 12); /* "u.test." in the zone section */
    assert_int_equal(run(&m, &ch, false), WIRE_RC_NOERROR);
    assert_int_equal(ch.nadded, 1);
    /* preference, then "m.u.test." spelled out */
    assert_int_equal(ch.added[0].rdlen, 2 + 2 + 8);
    assert_memory_equal(ch.added[0].rdata + 2, "\1m\1u\4test", 10);
    update_change_free(&ch);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_add),
        cmocka_unit_test(test_nothing_changes),
        cmocka_unit_test(test_ttl_change_is_whole_rrset),
        cmocka_unit_test(test_delete_kinds),
        cmocka_unit_test(test_apex_rules),
        cmocka_unit_test(test_cname_rules),
        cmocka_unit_test(test_soa_serial),
        cmocka_unit_test(test_prerequisites),
        cmocka_unit_test(test_prescan),
        cmocka_unit_test(test_malformed),
        cmocka_unit_test(test_compressed_rdata),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
