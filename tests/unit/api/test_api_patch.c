/* test_api_patch.c — PATCH bodies into RFC 2136 UPDATE messages, each read back with ldns: the
 * zone section, every update RR's class, TTL and RDATA; and the 422 texts of bad bodies. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <ldns/ldns.h>

#include "tern/api/api_patch.h"
#include "tern/common/err.h"

/* The UPDATE for body over zone a.test: 0 and the message parsed, or the code with err. */
static int build(const char *body, ldns_pkt **pkt, size_t *n, char *err, size_t errlen)
{
    tern_buf_t msg;
    tern_buf_init(&msg, 0);
    int rc = api_patch_build("a.test", body, strlen(body), &msg, n, err, errlen);
    *pkt = NULL;
    if (rc == 0)
        assert_int_equal(ldns_wire2pkt(pkt, (const uint8_t *)msg.p, msg.len), LDNS_STATUS_OK);
    tern_buf_free(&msg);
    return rc;
}

/* Update RR i of pkt as text ("owner ttl CLASS TYPE rdata"), compared with want. */
static void expect_rr(const ldns_pkt *pkt, size_t i, const char *want)
{
    /* in an UPDATE the update section is where ldns reads the authority section */
    ldns_rr *rr = ldns_rr_list_rr(ldns_pkt_authority(pkt), i);
    assert_non_null(rr);
    char *owner = ldns_rdf2str(ldns_rr_owner(rr));
    char *type = ldns_rr_type2str(ldns_rr_get_type(rr));
    char *cls = ldns_rr_class2str(ldns_rr_get_class(rr));
    char text[512];
    int n = snprintf(text, sizeof(text), "%s %u %s %s", owner, ldns_rr_ttl(rr), cls, type);
    for (size_t k = 0; k < ldns_rr_rd_count(rr); k++) {
        char *rd = ldns_rdf2str(ldns_rr_rdf(rr, k));
        n += snprintf(text + n, sizeof(text) - (size_t)n, " %s", rd);
        free(rd);
    }
    free(owner);
    free(type);
    free(cls);
    assert_string_equal(text, want);
}

static void expect_zone(const ldns_pkt *pkt, size_t nupdates)
{
    assert_int_equal(ldns_pkt_get_opcode(pkt), LDNS_PACKET_UPDATE);
    assert_int_equal(ldns_pkt_qdcount(pkt), 1);
    assert_int_equal(ldns_pkt_ancount(pkt), 0);
    assert_int_equal(ldns_pkt_nscount(pkt), nupdates);
    assert_int_equal(ldns_pkt_arcount(pkt), 0);
    ldns_rr *z = ldns_rr_list_rr(ldns_pkt_question(pkt), 0);
    char *zn = ldns_rdf2str(ldns_rr_owner(z));
    assert_string_equal(zn, "a.test.");
    free(zn);
    assert_int_equal(ldns_rr_get_type(z), LDNS_RR_TYPE_SOA);
    assert_int_equal(ldns_rr_get_class(z), LDNS_RR_CLASS_IN);
}

static void test_replace(void **state)
{
    (void)state;
    ldns_pkt *pkt;
    size_t n;
    char err[512];
    assert_int_equal(
        build("{\"rrsets\": [{\"name\": \"www.a.test.\", \"type\": \"A\", \"ttl\": 60, "
              "\"changetype\": \"REPLACE\", \"records\": [{\"content\": \"192.0.2.1\", "
              "\"disabled\": false}, {\"content\": \"192.0.2.2\"}], \"comments\": []},"
              "{\"name\": \"a.test.\", \"type\": \"MX\", \"ttl\": 300, \"changetype\": "
              "\"replace\", \"records\": [{\"content\": \"10 mx\"}, {\"content\": \"20 "
              "mx.example.\"}]}]}",
              &pkt, &n, err, sizeof(err)),
        0);
    assert_int_equal(n, 6);
    expect_zone(pkt, 6);
    expect_rr(pkt, 0, "www.a.test. 0 ANY A");
    expect_rr(pkt, 1, "www.a.test. 60 IN A 192.0.2.1");
    expect_rr(pkt, 2, "www.a.test. 60 IN A 192.0.2.2");
    expect_rr(pkt, 3, "a.test. 0 ANY MX");
    /* a relative name in content is completed with the zone origin, as in a zone file */
    expect_rr(pkt, 4, "a.test. 300 IN MX 10 mx.a.test.");
    expect_rr(pkt, 5, "a.test. 300 IN MX 20 mx.example.");
    ldns_pkt_free(pkt);
}

static void test_delete_extend_prune(void **state)
{
    (void)state;
    ldns_pkt *pkt;
    size_t n;
    char err[512];
    assert_int_equal(
        build("{\"rrsets\": [{\"name\": \"old.a.test.\", \"type\": \"TXT\", \"changetype\": "
              "\"DELETE\"}, {\"name\": \"www.a.test.\", \"type\": \"AAAA\", \"ttl\": 30, "
              "\"changetype\": \"EXTEND\", \"records\": [{\"content\": \"2001:db8::1\"}]}, "
              "{\"name\": \"www.a.test.\", \"type\": \"TXT\", \"changetype\": \"PRUNE\", "
              "\"records\": [{\"content\": \"\\\"hello world\\\"\"}]}, {\"name\": "
              "\"gone.a.test.\", \"type\": \"A\", \"ttl\": 5, \"changetype\": \"REPLACE\", "
              "\"records\": []}]}",
              &pkt, &n, err, sizeof(err)),
        0);
    assert_int_equal(n, 4);
    expect_zone(pkt, 4);
    expect_rr(pkt, 0, "old.a.test. 0 ANY TXT");
    expect_rr(pkt, 1, "www.a.test. 30 IN AAAA 2001:db8::1");
    expect_rr(pkt, 2, "www.a.test. 0 NONE TXT \"hello world\"");
    expect_rr(pkt, 3, "gone.a.test. 0 ANY A");
    ldns_pkt_free(pkt);
}

/* comments alone and an empty list change nothing: no update RR */
static void test_nothing(void **state)
{
    (void)state;
    ldns_pkt *pkt;
    size_t n;
    char err[512];
    assert_int_equal(build("{\"rrsets\": [{\"name\": \"www.a.test.\", \"type\": \"A\", "
                           "\"changetype\": \"REPLACE\", \"comments\": [{\"content\": \"x\"}]}]}",
                           &pkt, &n, err, sizeof(err)),
                     0);
    assert_int_equal(n, 0);
    ldns_pkt_free(pkt);
    assert_int_equal(build("{\"rrsets\": []}", &pkt, &n, err, sizeof(err)), 0);
    assert_int_equal(n, 0);
    ldns_pkt_free(pkt);
}

/* body → the start of the 422 text */
static void expect_error(const char *body, const char *want)
{
    ldns_pkt *pkt;
    size_t n;
    char err[512] = "";
    assert_int_equal(build(body, &pkt, &n, err, sizeof(err)), TERN_EINVAL);
    if (strncmp(err, want, strlen(want)) != 0)
        fail_msg("for %s\n  got  \"%s\"\n  want \"%s...\"", body, err, want);
}

static void test_errors(void **state)
{
    (void)state;
    expect_error("{\"rrsets\": [", "JSON parse error: ");
    expect_error("{\"x\": 1}", "No rrsets given in update request");
    expect_error("{\"rrsets\": [{\"name\": \"www.a.test.\", \"type\": \"A\", \"changetype\": "
                 "\"MERGE\"}]}",
                 "Changetype 'MERGE' is not a valid value");
    expect_error("{\"rrsets\": [{\"name\": \"www.a.test\", \"type\": \"A\", \"changetype\": "
                 "\"DELETE\"}]}",
                 "DNS Name 'www.a.test' is not canonical");
    expect_error("{\"rrsets\": [{\"name\": \"www.b.test.\", \"type\": \"A\", \"changetype\": "
                 "\"DELETE\"}]}",
                 "RRset www.b.test. IN A: Name is out of zone");
    expect_error("{\"rrsets\": [{\"name\": \"www.a.test.\", \"type\": \"BOGUS\", "
                 "\"changetype\": \"DELETE\"}]}",
                 "RRset www.a.test. IN BOGUS: unknown type given");
    expect_error("{\"rrsets\": [{\"name\": \"www.a.test.\", \"type\": \"A\", \"changetype\": "
                 "\"DELETE\"}, {\"name\": \"WWW.a.test.\", \"type\": \"A\", \"changetype\": "
                 "\"DELETE\"}]}",
                 "Duplicate RRset WWW.a.test. IN A with changetype: DELETE");
    expect_error("{\"rrsets\": [{\"name\": \"www.a.test.\", \"type\": \"A\", \"changetype\": "
                 "\"REPLACE\", \"records\": [{\"content\": \"192.0.2.1\"}]}]}",
                 "Key 'ttl' not present");
    expect_error("{\"rrsets\": [{\"name\": \"www.a.test.\", \"type\": \"A\", \"changetype\": "
                 "\"REPLACE\"}]}",
                 "No change for RRset www.a.test. IN A");
    expect_error("{\"rrsets\": [{\"name\": \"www.a.test.\", \"type\": \"A\", \"ttl\": 60, "
                 "\"changetype\": \"REPLACE\", \"records\": [{\"content\": \"192.0.2.1\"}, "
                 "{\"content\": \"999.0.2.1\"}]}]}",
                 "Record www.a.test./A '999.0.2.1': ");
    expect_error("{\"rrsets\": [{\"name\": \"www.a.test.\", \"type\": \"MX\", \"ttl\": 60, "
                 "\"changetype\": \"REPLACE\", \"records\": [{\"content\": \"mx.a.test.\"}]}]}",
                 "Record www.a.test./MX 'mx.a.test.': ");
    expect_error("{\"rrsets\": [{\"name\": \"www.a.test.\", \"type\": \"A\", \"ttl\": 60, "
                 "\"changetype\": \"REPLACE\", \"records\": [{\"content\": \"192.0.2.1\\n"
                 "evil 1 IN A 192.0.2.2\"}]}]}",
                 "Record www.a.test./A '192.0.2.1");
    expect_error("{\"rrsets\": [{\"name\": \"www.a.test.\", \"type\": \"A\", \"ttl\": 60, "
                 "\"changetype\": \"REPLACE\", \"records\": [{\"content\": \"192.0.2.1\", "
                 "\"disabled\": true}]}]}",
                 "Record www.a.test./A '192.0.2.1': disabled records are not supported");
    expect_error("{\"rrsets\": [{\"name\": \"www.a.test.\", \"type\": \"A\", \"ttl\": -1, "
                 "\"changetype\": \"REPLACE\", \"records\": []}]}",
                 "Key 'ttl' not present or not an Integer");
}

/* more than one DNS message's worth: refused, not cut */
static void test_too_large(void **state)
{
    (void)state;
    size_t cap = 1 << 20, o = 0;
    char *body = malloc(cap);
    assert_non_null(body);
    o += (size_t)snprintf(body + o, cap - o,
                          "{\"rrsets\": [{\"name\": \"big.a.test.\", \"type\": \"TXT\", "
                          "\"ttl\": 60, \"changetype\": \"REPLACE\", \"records\": [");
    for (int i = 0; i < 400; i++)
        o += (size_t)snprintf(body + o, cap - o, "%s{\"content\": \"\\\"%0200d\\\"\"}",
                              i ? ", " : "", i);
    snprintf(body + o, cap - o, "]}]}");
    expect_error(body, "the change does not fit one DNS message");
    free(body);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_replace),   cmocka_unit_test(test_delete_extend_prune),
        cmocka_unit_test(test_nothing),   cmocka_unit_test(test_errors),
        cmocka_unit_test(test_too_large),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
