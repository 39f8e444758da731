/*
 * test_xfr_stream.c — AXFR and IXFR responses, checked by parsers that are not ours.
 *
 * A small zone with everything a transfer meets (apex data, a delegation with glue, a wildcard,
 * empty non-terminals, a geo-steered RRset, ANAME, a long TXT, an RRset of 300 RRs) is streamed
 * in messages of 512 bytes and more; every message is parsed by ldns (ldns_wire2pkt) and the
 * reassembled RR set must equal the zone file's. A real client is the second oracle: kdig asks a
 * tiny TCP server thread (answering from the stream) for AXFR and IXFR and must print the same
 * records. IXFR: a two-delta chain has the RFC 1995 shape, an up-to-date client gets the single
 * SOA, a serial not in the journal gets the AXFR-style answer. Also: an RR larger than a message,
 * the TSIG reserve, queries that are not queries.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <sys/wait.h>
#include <cmocka.h>
#include <ldns/ldns.h>

#include "tern/common/err.h"
#include "tern/xfr/journal.h"
#include "tern/xfr/xfr_stream.h"
#include "tern/zone/zone_builder.h"
#include "tern/zone/zone_file.h"
#include "test_util.h"

#define ORIGIN "example.test"
#define QNAME  "Example.TEST" /* as a client may spell it: echoed as asked */
#define SERIAL 2024010101u

/* The zone file; "many" (300 RRs) and the geo RRset are added by build_zone(). */
static const char zone_text[] =
    "$ORIGIN example.test.\n"
    "$TTL 3600\n"
    "@ SOA ns1 hostmaster %u 7200 900 1209600 300\n"
    "@ NS ns1\n"
    "@ NS ns2.other.test.\n"
    "@ MX 10 mail\n"
    "@ TXT \"v=spf1 -all\"\n"
    "ns1 A 192.0.2.1\n"
    "ns1 AAAA 2001:db8::1\n"
    "mail A 192.0.2.25\n"
    "www CNAME web\n"
    "web 300 A 192.0.2.80\n"
    "web 300 AAAA 2001:db8::80\n"
    "sub NS ns.sub\n"
    "sub NS ns2.other.test.\n"
    "ns.sub A 192.0.2.53\n" /* glue */
    "ns.sub AAAA 2001:db8::53\n"
    "deep.below.sub A 192.0.2.54\n" /* occluded, still zone data */
    "*.wild A 192.0.2.99\n"
    "*.wild TXT \"wild\"\n"
    "host.wild A 192.0.2.98\n"
    "a.b.c.ent A 192.0.2.7\n" /* b.c.ent and c.ent are empty non-terminals */
    "_sip._tcp SRV 10 5 5060 mail\n"
    "alias TYPE65305 \\# 19 046d61696c076578616d706c65047465737400\n" /* ANAME mail */
    "long TXT \"%s\" \"%s\"\n"
    "%s";

/* ---- zones ------------------------------------------------------------------------------ */

static char *xasprintf(const char *fmt, ...) TERN_PRINTF(1, 2);
static char *xasprintf(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *s = NULL;
    assert_true(vasprintf(&s, fmt, ap) >= 0);
    va_end(ap);
    return s;
}

/* The full zone text of serial `serial` plus `extra` lines; "many" gets `many` A RRs. */
static char *zone_src(uint32_t serial, unsigned many, const char *extra)
{
    char a[201], b[181];
    memset(a, 'a', 200);
    a[200] = 0;
    memset(b, 'b', 180);
    b[180] = 0;
    size_t cap = 64 + (size_t)many * 32 + strlen(extra);
    char *m = calloc(1, cap);
    assert_non_null(m);
    size_t o = 0;
    for (unsigned i = 0; i < many; i++)
        o += (size_t)snprintf(m + o, cap - o, "many 600 A 10.0.%u.%u\n", i / 200, i % 200 + 1);
    snprintf(m + o, cap - o, "%s", extra);
    char *t = xasprintf(zone_text, serial, a, b, m);
    free(m);
    return t;
}

/* Records of the geo-steered RRset (country filter): added with metadata, served in full. */
static const char *const geo_rrs[] = {
    "geo.example.test. 60 IN A 198.51.100.1",
    "geo.example.test. 60 IN A 198.51.100.2",
    "geo.example.test. 60 IN A 198.51.100.3",
};

static ldns_zone *parse_text(const char *text)
{
    FILE *f = fmemopen((void *)(uintptr_t)text, strlen(text), "r");
    assert_non_null(f);
    ldns_rdf *origin = ldns_dname_new_frm_str(ORIGIN ".");
    ldns_zone *lz = NULL;
    int line = 0;
    ldns_status st = ldns_zone_new_frm_fp_l(&lz, f, origin, 3600, LDNS_RR_CLASS_IN, &line);
    if (st != LDNS_STATUS_OK)
        fail_msg("zone text line %d: %s", line, ldns_get_errorstr_by_id(st));
    ldns_rdf_deep_free(origin);
    fclose(f);
    return lz;
}

static void builder_add_ldns(zone_builder_t *b, const ldns_rr *rr)
{
    ldns_buffer *buf = ldns_buffer_new(1024);
    assert_int_equal(ldns_rr_rdata2buffer_wire(buf, rr), LDNS_STATUS_OK);
    const ldns_rdf *owner = ldns_rr_owner(rr);
    int rc = zone_builder_add(b, ldns_rdf_data(owner), (uint16_t)ldns_rr_get_type(rr), 1,
                              ldns_rr_ttl(rr), ldns_buffer_begin(buf),
                              (uint16_t)ldns_buffer_position(buf), "test", 0);
    if (rc != 0)
        fail_msg("add: %s", zone_builder_error(b));
    ldns_buffer_free(buf);
}

/* The zone from text through the builder (as the file loader feeds it), with the geo RRset;
 * *expect (if not NULL) gets every RR as ldns sees them: the zone file's and the geo ones. */
static zone_t *build_zone(const char *text, bool geo, ldns_rr_list **expect)
{
    ldns_zone *lz = parse_text(text);
    uint8_t apex[DNAME_MAXLEN];
    const char *why;
    assert_true(dname_from_str(ORIGIN, strlen(ORIGIN), false, apex, &why) > 0);
    zone_builder_t *b = zone_builder_new(apex, "test");
    assert_non_null(b);
    builder_add_ldns(b, ldns_zone_soa(lz));
    ldns_rr_list *rrs = ldns_zone_rrs(lz);
    for (size_t i = 0; i < ldns_rr_list_rr_count(rrs); i++)
        builder_add_ldns(b, ldns_rr_list_rr(rrs, i));
    ldns_rr_list *all = ldns_rr_list_new();
    ldns_rr_list_push_rr(all, ldns_rr_clone(ldns_zone_soa(lz)));
    for (size_t i = 0; i < ldns_rr_list_rr_count(rrs); i++)
        ldns_rr_list_push_rr(all, ldns_rr_clone(ldns_rr_list_rr(rrs, i)));
    if (geo) {
        uint8_t owner[DNAME_MAXLEN];
        assert_true(dname_from_str("geo." ORIGIN, strlen("geo." ORIGIN), false, owner, &why) > 0);
        static const uint16_t cc[3] = {ZONE_CC('D', 'E'), ZONE_CC('U', 'S'), 0};
        for (unsigned i = 0; i < 3; i++) {
            uint8_t a[4] = {198, 51, 100, (uint8_t)(i + 1)};
            zone_geo_meta_t meta = {.weight = 10 * i, .countries = &cc[i], .ncountries = 1};
            assert_int_equal(zone_builder_add_geo(b, owner, WIRE_T_A, 60, a, 4, &meta, "test", 0),
                             0);
            ldns_rr *rr = NULL;
            assert_int_equal(ldns_rr_new_frm_str(&rr, geo_rrs[i], 0, NULL, NULL), LDNS_STATUS_OK);
            ldns_rr_list_push_rr(all, rr);
        }
        zone_geo_policy_t pol = {.filter = ZONE_GEO_FILTER_COUNTRY};
        assert_int_equal(zone_builder_set_policy(b, owner, WIRE_T_A, &pol), 0);
    }
    zone_t *z = NULL;
    char err[512];
    if (zone_builder_finish(b, &z, err, sizeof(err)) != 0)
        fail_msg("finish: %s", err);
    ldns_zone_deep_free(lz);
    if (expect)
        *expect = all;
    else
        ldns_rr_list_deep_free(all);
    return z;
}

/* ---- queries and responses -------------------------------------------------------------- */

/* An AXFR or IXFR query for QNAME (IXFR: with the client's SOA in the authority section). */
static size_t mk_query(uint8_t *q, uint16_t id, uint16_t type, uint32_t client_serial)
{
    uint8_t name[DNAME_MAXLEN];
    const char *why;
    int nl = dname_from_str(QNAME, strlen(QNAME), false, name, &why);
    assert_true(nl > 0);
    uint8_t hdr[12] = {(uint8_t)(id >> 8), (uint8_t)id, 0x01, 0, 0, 1, 0, 0, 0, 0, 0, 0};
    memcpy(q, hdr, 12);
    size_t o = 12;
    memcpy(q + o, name, (size_t)nl);
    o += (size_t)nl;
    q[o++] = (uint8_t)(type >> 8);
    q[o++] = (uint8_t)type;
    q[o++] = 0;
    q[o++] = 1;
    if (type == WIRE_T_IXFR) {
        q[9] = 1;      /* NSCOUNT */
        q[o++] = 0xC0; /* owner: the question's name */
        q[o++] = 12;
        static const uint8_t t[8] = {0, 6, 0, 1, 0, 0, 0x0e, 0x10};
        memcpy(q + o, t, 8);
        o += 8;
        q[o++] = 0;
        q[o++] = 22;
        memset(q + o, 0, 22); /* mname ".", rname ".", serial, 0... */
        q[o + 2] = (uint8_t)(client_serial >> 24);
        q[o + 3] = (uint8_t)(client_serial >> 16);
        q[o + 4] = (uint8_t)(client_serial >> 8);
        q[o + 5] = (uint8_t)client_serial;
        o += 22;
    }
    return o;
}

typedef struct run {
    size_t msgs;
    size_t bytes;
    ldns_rr_list *rrs; /* every answer RR in order */
    bool apex_ptr;     /* some owner was written as "labels + pointer to offset 12" */
} run_t;

/* Stream s to the end with buffers of cap bytes, `reserve` kept free; every message is checked
 * (header, question echoed byte for byte, size) and parsed by ldns. */
static run_t drain(xfr_stream_t *s, const uint8_t *query, size_t qlen, size_t cap, size_t reserve)
{
    run_t r = {.rrs = ldns_rr_list_new()};
    uint8_t *buf = malloc(cap);
    assert_non_null(buf);
    size_t qsec = qlen;
    if (query[9]) /* IXFR: the question ends before the authority SOA */
        qsec = 12 + strlen(QNAME) + 2 + 4;
    for (;;) {
        size_t len = 0;
        memset(buf, 0xEE, cap);
        int rc = xfr_stream_next(s, buf, cap, reserve, &len);
        if (rc < 0)
            fail_msg("message %zu: %s", r.msgs, tern_strerror(rc));
        r.msgs++;
        r.bytes += len;
        assert_true(len <= cap - reserve && len <= 65535);
        for (size_t i = len; i < cap; i++)
            assert_int_equal(buf[i], 0xEE); /* nothing written past the message */
        assert_memory_equal(buf, query, 2); /* id */
        assert_int_equal(buf[2], 0x80 | 0x04 | (query[2] & 0x01)); /* QR AA opcode 0 RD */
        assert_int_equal(buf[3], 0);                               /* RA 0, RCODE 0 */
        assert_memory_equal(buf + 4, "\0\1", 2);                   /* QDCOUNT */
        assert_memory_equal(buf + 8, "\0\0\0\0", 4);               /* NSCOUNT, ARCOUNT */
        assert_memory_equal(buf + 12, query + 12, qsec - 12);      /* the question as asked */
        for (size_t i = 12; i + 5 < len; i++)
            if (memcmp(buf + i, "\3www\xC0\x0C", 6) == 0)
                r.apex_ptr = true;
        ldns_pkt *p = NULL;
        ldns_status st = ldns_wire2pkt(&p, buf, len);
        if (st != LDNS_STATUS_OK)
            fail_msg("message %zu: ldns: %s", r.msgs, ldns_get_errorstr_by_id(st));
        assert_int_equal(ldns_pkt_get_opcode(p), LDNS_PACKET_QUERY);
        assert_true(ldns_pkt_aa(p) && ldns_pkt_qr(p));
        ldns_rr_list *an = ldns_pkt_answer(p);
        assert_true(ldns_rr_list_rr_count(an) > 0);
        for (size_t i = 0; i < ldns_rr_list_rr_count(an); i++)
            ldns_rr_list_push_rr(r.rrs, ldns_rr_clone(ldns_rr_list_rr(an, i)));
        ldns_pkt_free(p);
        if (rc == 0)
            break;
    }
    size_t dummy;
    assert_int_equal(xfr_stream_next(s, buf, cap, reserve, &dummy), TERN_EINVAL);
    assert_int_equal(xfr_stream_records(s), ldns_rr_list_rr_count(r.rrs));
    free(buf);
    return r;
}

static uint32_t soa_serial(const ldns_rr *rr)
{
    assert_int_equal(ldns_rr_get_type(rr), LDNS_RR_TYPE_SOA);
    return ldns_rdf2native_int32(ldns_rr_rdf(rr, 2));
}

/* Canonical text of each RR of l[from, to), sorted: compared as sets. */
static char **canon(const ldns_rr_list *l, size_t from, size_t to)
{
    char **v = calloc(to - from + 1, sizeof(*v));
    assert_non_null(v);
    for (size_t i = from; i < to; i++) {
        ldns_rr *c = ldns_rr_clone(ldns_rr_list_rr(l, i));
        ldns_rr2canonical(c);
        char *t = ldns_rr2str(c);
        t[strcspn(t, "\n")] = 0;
        v[i - from] = t;
        ldns_rr_free(c);
    }
    for (size_t i = 1; i < to - from; i++)
        for (size_t k = i; k > 0 && strcmp(v[k - 1], v[k]) > 0; k--) {
            char *x = v[k];
            v[k] = v[k - 1];
            v[k - 1] = x;
        }
    return v;
}

static void expect_same(const ldns_rr_list *got, size_t gfrom, size_t gto, const ldns_rr_list *want,
                        size_t wfrom, size_t wto, const char *what)
{
    char **g = canon(got, gfrom, gto), **w = canon(want, wfrom, wto);
    bool same = gto - gfrom == wto - wfrom;
    for (size_t i = 0; same && i < gto - gfrom; i++)
        same = strcmp(g[i], w[i]) == 0;
    if (!same) {
        fprintf(stderr, "%s: got %zu RRs, want %zu\n", what, gto - gfrom, wto - wfrom);
        for (size_t i = 0, k = 0; i < gto - gfrom || k < wto - wfrom;) {
            int c = i == gto - gfrom ? 1 : k == wto - wfrom ? -1 : strcmp(g[i], w[k]);
            if (c < 0)
                fprintf(stderr, "  extra:   %s\n", g[i++]);
            else if (c > 0)
                fprintf(stderr, "  missing: %s\n", w[k++]);
            else
                i++, k++;
        }
    }
    for (size_t i = 0; i < gto - gfrom; i++)
        free(g[i]);
    for (size_t i = 0; i < wto - wfrom; i++)
        free(w[i]);
    free(g);
    free(w);
    if (!same)
        fail_msg("%s differs", what);
}

/* An AXFR-shaped answer: SOA, the zone without its SOA, SOA. */
static void expect_axfr(const run_t *r, const ldns_rr_list *want, uint32_t serial)
{
    size_t n = ldns_rr_list_rr_count(r->rrs);
    assert_true(n >= 2);
    assert_int_equal(soa_serial(ldns_rr_list_rr(r->rrs, 0)), serial);
    assert_int_equal(soa_serial(ldns_rr_list_rr(r->rrs, n - 1)), serial);
    assert_int_equal(ldns_rr_compare(ldns_rr_list_rr(r->rrs, 0), ldns_rr_list_rr(r->rrs, n - 1)),
                     0);
    for (size_t i = 1; i + 1 < n; i++) /* the apex SOA only opens and closes */
        assert_int_not_equal(ldns_rr_get_type(ldns_rr_list_rr(r->rrs, i)), LDNS_RR_TYPE_SOA);
    expect_same(r->rrs, 0, n - 1, want, 0, ldns_rr_list_rr_count(want), "AXFR");
}

/* ---- AXFR ------------------------------------------------------------------------------- */

static void test_axfr_small_messages(void **state)
{
    (void)state;
    char *text = zone_src(SERIAL, 300, "");
    ldns_rr_list *want = NULL;
    zone_t *z = build_zone(text, true, &want);
    free(text);
    uint8_t q[512];
    size_t ql = mk_query(q, 0x1234, WIRE_T_AXFR, 0);
    static const size_t caps[][2] = {{512, 0}, {600, 88}, {16384, 100}, {65535, 0}, {70000, 0}};
    size_t msgs[TERN_ARRAY_SIZE(caps)];
    for (size_t c = 0; c < TERN_ARRAY_SIZE(caps); c++) {
        xfr_stream_t *s = xfr_stream_axfr(z, q, ql);
        assert_non_null(s);
        run_t r = drain(s, q, ql, caps[c][0], caps[c][1]);
        expect_axfr(&r, want, SERIAL);
        assert_true(r.apex_ptr); /* www.<pointer to the question> */
        msgs[c] = r.msgs;
        ldns_rr_list_deep_free(r.rrs);
        xfr_stream_free(s);
    }
    assert_true(msgs[0] > 10); /* 300 RRs of "many" alone need several 512-byte messages */
    assert_true(msgs[1] >= msgs[0]);
    assert_int_equal(msgs[3], 1); /* the whole zone in one 64 KiB message */
    assert_int_equal(msgs[4], 1); /* cap is bounded by the DNS message limit */
    ldns_rr_list_deep_free(want);
    zone_free(z);
}

/* The IXFR of a client whose serial is not in the journal is the AXFR layout. */
static void test_ixfr_not_in_journal(void **state)
{
    (void)state;
    char *text = zone_src(SERIAL, 20, "");
    ldns_rr_list *want = NULL;
    zone_t *z = build_zone(text, true, &want);
    free(text);
    uint8_t q[512];
    size_t ql = mk_query(q, 0xBEEF, WIRE_T_IXFR, SERIAL - 10);
    xfr_stream_t *s = xfr_stream_ixfr(z, NULL, 0, q, ql);
    assert_non_null(s);
    run_t r = drain(s, q, ql, 1024, 0);
    expect_axfr(&r, want, SERIAL);
    ldns_rr_list_deep_free(r.rrs);
    xfr_stream_free(s);
    ldns_rr_list_deep_free(want);
    zone_free(z);
}

static void test_too_big_and_bad_queries(void **state)
{
    (void)state;
    char big[256];
    memset(big, 'x', 250);
    big[250] = 0;
    char *extra = xasprintf("huge TXT \"%s\" \"%s\" \"%s\"\n", big, big, big);
    char *text = zone_src(SERIAL, 0, extra);
    free(extra);
    zone_t *z = build_zone(text, false, NULL);
    free(text);
    uint8_t q[512], buf[4096];
    size_t ql = mk_query(q, 7, WIRE_T_AXFR, 0), len;
    /* a 754-byte TXT in 512-byte messages: the messages before it go out, then the error */
    xfr_stream_t *s = xfr_stream_axfr(z, q, ql);
    assert_non_null(s);
    int rc;
    while ((rc = xfr_stream_next(s, buf, 512, 0, &len)) == 1)
        assert_true(len <= 512);
    assert_int_equal(rc, TERN_ETRUNC);
    assert_int_equal(xfr_stream_next(s, buf, 4096, 0, &len), TERN_ETRUNC); /* stays failed */
    xfr_stream_free(s);
    /* the same zone in 1024 bytes, but with 300 reserved for a signature: too small again */
    s = xfr_stream_axfr(z, q, ql);
    assert_non_null(s);
    while ((rc = xfr_stream_next(s, buf, 1024, 300, &len)) == 1)
        assert_true(len <= 724);
    assert_int_equal(rc, TERN_ETRUNC);
    xfr_stream_free(s);
    s = xfr_stream_axfr(z, q, ql);
    assert_non_null(s);
    assert_int_equal(xfr_stream_next(s, buf, 512, 512, &len), TERN_ETRUNC); /* all reserve */
    xfr_stream_free(s);
    s = xfr_stream_axfr(z, q, ql);
    assert_non_null(s);
    assert_int_equal(xfr_stream_next(s, buf, 1024, 0, &len), 1); /* fits 1024 */
    xfr_stream_free(s);

    /* not a query with one question */
    uint8_t bad[512];
    memcpy(bad, q, ql);
    bad[5] = 0; /* QDCOUNT 0 */
    assert_null(xfr_stream_axfr(z, bad, ql));
    assert_null(xfr_stream_axfr(z, q, 11));
    assert_null(xfr_stream_axfr(z, q, ql - 3)); /* the type and class cut short */
    memcpy(bad, q, ql);
    bad[12] = 0xC0; /* a compression pointer in the question */
    assert_null(xfr_stream_axfr(z, bad, ql));
    xfr_stream_free(NULL);
    zone_free(z);
}

/* A question that is not the apex (a caller's mistake) still gives a well-formed response:
 * owners are written whole. */
static void test_question_not_apex(void **state)
{
    (void)state;
    char *text = zone_src(SERIAL, 3, "");
    ldns_rr_list *want = NULL;
    zone_t *z = build_zone(text, false, &want);
    free(text);
    static const uint8_t q[] = {0,   9,   0,   0,   0, 1,   0,   0,   0,   0, 0, 0,   5, 'o',
                                't', 'h', 'e', 'r', 4, 't', 'e', 's', 't', 0, 0, 252, 0, 1};
    xfr_stream_t *s = xfr_stream_axfr(z, q, sizeof(q));
    assert_non_null(s);
    uint8_t buf[4096];
    size_t len;
    assert_int_equal(xfr_stream_next(s, buf, sizeof(buf), 0, &len), 0);
    ldns_pkt *p = NULL;
    assert_int_equal(ldns_wire2pkt(&p, buf, len), LDNS_STATUS_OK);
    run_t r = {.rrs = ldns_pkt_answer(p)};
    expect_axfr(&r, want, SERIAL);
    ldns_pkt_free(p);
    xfr_stream_free(s);
    ldns_rr_list_deep_free(want);
    zone_free(z);
}

/* ---- IXFR ------------------------------------------------------------------------------- */

#define V1 "chg A 192.0.2.10\ngone.x.y A 192.0.2.11\nttl 3600 A 192.0.2.12\n"
#define V2 "chg A 192.0.2.20\nttl 60 A 192.0.2.12\nnew AAAA 2001:db8::20\n"
#define V3 "chg A 192.0.2.20\nchg A 192.0.2.30\nttl 60 A 192.0.2.12\n"

/* The RRs removed and added by V1 → V2 → V3, per delta. */
static const char *const d1_removed[] = {
    "chg.example.test. 3600 IN A 192.0.2.10",
    "gone.x.y.example.test. 3600 IN A 192.0.2.11",
    "ttl.example.test. 3600 IN A 192.0.2.12",
    "many.example.test. 600 IN A 10.0.0.5",
};
static const char *const d1_added[] = {
    "chg.example.test. 3600 IN A 192.0.2.20",
    "ttl.example.test. 60 IN A 192.0.2.12",
    "new.example.test. 3600 IN AAAA 2001:db8::20",
};
static const char *const d2_removed[] = {
    "new.example.test. 3600 IN AAAA 2001:db8::20",
};
static const char *const d2_added[] = {
    "chg.example.test. 3600 IN A 192.0.2.30",
};

static ldns_rr_list *rr_strs(const char *const *s, size_t n)
{
    ldns_rr_list *l = ldns_rr_list_new();
    for (size_t i = 0; i < n; i++) {
        ldns_rr *rr = NULL;
        assert_int_equal(ldns_rr_new_frm_str(&rr, s[i], 0, NULL, NULL), LDNS_STATUS_OK);
        ldns_rr_list_push_rr(l, rr);
    }
    return l;
}

static void expect_part(const ldns_rr_list *got, size_t from, size_t to, const char *const *s,
                        size_t n, const char *what)
{
    ldns_rr_list *w = rr_strs(s, n);
    expect_same(got, from, to, w, 0, n, what);
    ldns_rr_list_deep_free(w);
}

static zone_t *v_zone(int v)
{
    static const char *const body[] = {V1, V2, V3};
    char *text = zone_src(SERIAL + (uint32_t)v, v == 1 ? 5 : 4, body[v - 1]);
    zone_t *z = build_zone(text, true, NULL);
    free(text);
    return z;
}

/* An RFC 1995 §4 answer for the chain v1 → v2 → v3: SOA3, (SOA1 removed SOA2 added),
 * (SOA2 removed SOA3 added), SOA3. */
static void expect_ixfr_chain(const ldns_rr_list *l)
{
    size_t n = ldns_rr_list_rr_count(l), soa[8], ns = 0;
    for (size_t i = 0; i < n; i++)
        if (ldns_rr_get_type(ldns_rr_list_rr(l, i)) == LDNS_RR_TYPE_SOA) {
            assert_true(ns < 8);
            soa[ns++] = i;
        }
    assert_int_equal(ns, 6);
    static const uint32_t serial[6] = {SERIAL + 3, SERIAL + 1, SERIAL + 2,
                                       SERIAL + 2, SERIAL + 3, SERIAL + 3};
    for (size_t i = 0; i < 6; i++)
        assert_int_equal(soa_serial(ldns_rr_list_rr(l, soa[i])), serial[i]);
    assert_int_equal(soa[0], 0);
    assert_int_equal(soa[1], 1);
    assert_int_equal(soa[5], n - 1);
    expect_part(l, soa[1] + 1, soa[2], d1_removed, TERN_ARRAY_SIZE(d1_removed), "d1 removed");
    expect_part(l, soa[2] + 1, soa[3], d1_added, TERN_ARRAY_SIZE(d1_added), "d1 added");
    expect_part(l, soa[3] + 1, soa[4], d2_removed, TERN_ARRAY_SIZE(d2_removed), "d2 removed");
    expect_part(l, soa[4] + 1, soa[5], d2_added, TERN_ARRAY_SIZE(d2_added), "d2 added");
}

static void test_ixfr_chain(void **state)
{
    (void)state;
    zone_t *v1 = v_zone(1), *v2 = v_zone(2), *v3 = v_zone(3);
    xfr_delta_t *d[2] = {xfr_diff(v1, v2), xfr_diff(v2, v3)};
    assert_non_null(d[0]);
    assert_non_null(d[1]);
    uint8_t q[512];
    size_t ql = mk_query(q, 0x4242, WIRE_T_IXFR, SERIAL + 1);
    static const size_t caps[] = {512, 4096};
    for (size_t c = 0; c < TERN_ARRAY_SIZE(caps); c++) {
        xfr_stream_t *s = xfr_stream_ixfr(v3, d, 2, q, ql);
        assert_non_null(s);
        run_t r = drain(s, q, ql, caps[c], 0);
        xfr_stream_free(s);
        expect_ixfr_chain(r.rrs);
        if (caps[c] == 512)
            assert_true(r.msgs >= 2);
        ldns_rr_list_deep_free(r.rrs);
    }
    /* the stream holds its own references: the caller's may go first */
    xfr_stream_t *s = xfr_stream_ixfr(v3, d + 1, 1, q, ql);
    assert_non_null(s);
    xfr_delta_t *d1 = d[1];
    xfr_delta_release(d1);
    d[1] = NULL;
    uint8_t buf[4096];
    size_t len;
    assert_int_equal(xfr_stream_next(s, buf, sizeof(buf), 0, &len), 0);
    assert_int_equal(xfr_stream_records(s), 1 + 1 + 1 + 1 + 1 + 1); /* 4 SOAs, -1, +1 */
    xfr_stream_free(s);
    d[1] = xfr_diff(v2, v3);
    assert_non_null(d[1]);

    /* deltas that do not lead to this version */
    assert_null(xfr_stream_ixfr(v3, d, 1, q, ql)); /* ends at v2 */
    xfr_delta_t *rev[2] = {d[1], d[0]};
    assert_null(xfr_stream_ixfr(v3, rev, 2, q, ql)); /* out of order */
    assert_null(xfr_stream_ixfr(v2, d, 2, q, ql));   /* ends past it */
    xfr_delta_release(d[0]);
    xfr_delta_release(d[1]);
    zone_free(v1);
    zone_free(v2);
    zone_free(v3);
}

static void test_ixfr_up_to_date(void **state)
{
    (void)state;
    zone_t *z = v_zone(3);
    uint8_t q[512];
    size_t ql = mk_query(q, 0x0101, WIRE_T_IXFR, SERIAL + 3);
    xfr_delta_t *none[1] = {NULL};
    xfr_stream_t *s = xfr_stream_ixfr(z, none, 0, q, ql);
    assert_non_null(s);
    run_t r = drain(s, q, ql, 512, 0);
    assert_int_equal(r.msgs, 1);
    assert_int_equal(ldns_rr_list_rr_count(r.rrs), 1);
    assert_int_equal(soa_serial(ldns_rr_list_rr(r.rrs, 0)), SERIAL + 3);
    ldns_rr_list_deep_free(r.rrs);
    xfr_stream_free(s);

    /* the journal's answer for the newest serial goes to the stream as is */
    xfr_journal_t *j = xfr_journal_new(4, SIZE_MAX);
    assert_non_null(j);
    zone_t *v2 = v_zone(2);
    xfr_journal_add(j, xfr_diff(v2, z));
    xfr_delta_t **c = NULL;
    size_t n = 9;
    assert_int_equal(xfr_journal_chain(j, SERIAL + 3, &c, &n), 0);
    assert_int_equal(n, 0);
    s = xfr_stream_ixfr(z, c, n, q, ql);
    assert_non_null(s);
    uint8_t buf[512];
    size_t len;
    assert_int_equal(xfr_stream_next(s, buf, sizeof(buf), 0, &len), 0);
    assert_int_equal(xfr_stream_records(s), 1);
    xfr_stream_free(s);
    free(c);
    xfr_journal_free(j);
    zone_free(v2);
    zone_free(z);
}

/* ---- kdig as the client: a tiny TCP server answers one transfer from the stream --------- */

typedef struct server {
    int lfd;
    uint16_t port;
    const zone_t *z;
    xfr_delta_t *const *deltas; /* IXFR: the chain (NULL: not in the journal) */
    size_t n;
    size_t cap;
    size_t msgs; /* sent */
    uint64_t records;
    int err; /* 0 or what went wrong */
    char why[128];
} server_t;

static bool read_full(int fd, uint8_t *p, size_t n)
{
    while (n) {
        struct pollfd pf = {.fd = fd, .events = POLLIN};
        if (poll(&pf, 1, 10000) != 1)
            return false;
        ssize_t k = read(fd, p, n);
        if (k <= 0)
            return false;
        p += k;
        n -= (size_t)k;
    }
    return true;
}

static bool write_full(int fd, const uint8_t *p, size_t n)
{
    while (n) {
        struct pollfd pf = {.fd = fd, .events = POLLOUT};
        if (poll(&pf, 1, 10000) != 1)
            return false;
        ssize_t k = write(fd, p, n);
        if (k <= 0)
            return false;
        p += k;
        n -= (size_t)k;
    }
    return true;
}

static void *serve(void *arg)
{
    server_t *sv = arg;
    struct pollfd pf = {.fd = sv->lfd, .events = POLLIN};
    if (poll(&pf, 1, 20000) != 1) {
        snprintf(sv->why, sizeof(sv->why), "no connection");
        sv->err = -1;
        return NULL;
    }
    int fd = accept(sv->lfd, NULL, NULL);
    uint8_t lenb[2], q[1024];
    uint8_t *msg = malloc(2 + sv->cap);
    if (fd < 0 || !msg || !read_full(fd, lenb, 2)) {
        snprintf(sv->why, sizeof(sv->why), "no query");
        sv->err = -1;
        goto out;
    }
    size_t ql = (size_t)(lenb[0] << 8 | lenb[1]);
    if (ql > sizeof(q) || !read_full(fd, q, ql)) {
        snprintf(sv->why, sizeof(sv->why), "bad query");
        sv->err = -1;
        goto out;
    }
    int nl = ql > 12 ? dname_check(q + 12, ql - 12) : -1;
    if (nl < 0 || ql < 12 + (size_t)nl + 4) {
        snprintf(sv->why, sizeof(sv->why), "bad question");
        sv->err = -1;
        goto out;
    }
    uint16_t qtype = (uint16_t)(q[12 + nl] << 8 | q[13 + nl]);
    xfr_stream_t *s = qtype == WIRE_T_IXFR ? xfr_stream_ixfr(sv->z, sv->deltas, sv->n, q, ql)
                                           : xfr_stream_axfr(sv->z, q, ql);
    if (!s) {
        snprintf(sv->why, sizeof(sv->why), "no stream for type %u", qtype);
        sv->err = -1;
        goto out;
    }
    int rc;
    do {
        size_t len = 0;
        rc = xfr_stream_next(s, msg + 2, sv->cap, 0, &len);
        if (rc < 0)
            break;
        msg[0] = (uint8_t)(len >> 8);
        msg[1] = (uint8_t)len;
        if (!write_full(fd, msg, 2 + len)) {
            rc = -1;
            break;
        }
        sv->msgs++;
    } while (rc == 1);
    sv->records = xfr_stream_records(s);
    sv->err = rc;
    if (rc < 0)
        snprintf(sv->why, sizeof(sv->why), "stream: %d", rc);
    xfr_stream_free(s);
out:
    free(msg);
    if (fd >= 0) {
        /* let the client read to the end before the close */
        shutdown(fd, SHUT_WR);
        uint8_t drainb[64];
        struct pollfd cf = {.fd = fd, .events = POLLIN};
        while (poll(&cf, 1, 5000) == 1 && read(fd, drainb, sizeof(drainb)) > 0)
            ;
        close(fd);
    }
    return NULL;
}

static void server_start(server_t *sv, pthread_t *t)
{
    sv->lfd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(sv->lfd >= 0);
    struct sockaddr_storage ss;
    socklen_t sl =
        tu_sockaddr(&ss, AF_INET, "127.0.0.1", 0); /* a free port, picked by the kernel */
    assert_int_equal(bind(sv->lfd, (struct sockaddr *)&ss, sl), 0);
    assert_int_equal(listen(sv->lfd, 4), 0);
    assert_int_equal(getsockname(sv->lfd, (struct sockaddr *)&ss, &sl), 0);
    sv->port = ntohs(((struct sockaddr_in *)&ss)->sin_port);
    assert_int_equal(pthread_create(t, NULL, serve, sv), 0);
}

/* Run kdig against the server; returns its output (malloc'd). */
static char *run_kdig(const server_t *sv, const char *type, const char *dir)
{
    char port[8], at[32], log[128];
    snprintf(port, sizeof(port), "%u", sv->port);
    snprintf(at, sizeof(at), "@127.0.0.1");
    snprintf(log, sizeof(log), "%s/kdig.out", dir);
    unlink(log);
    const char *argv[] = {"kdig", at, "-p", port, "+tcp", "+timeout=10", type, QNAME, NULL};
    pid_t pid = tu_spawn(argv, log);
    int st = -1;
    int64_t end = tu_now_ms() + 30000;
    while (waitpid(pid, &st, WNOHANG) == 0) {
        if (tu_now_ms() > end) {
            kill(pid, SIGKILL);
            waitpid(pid, &st, 0);
            fail_msg("kdig did not finish");
        }
        tu_sleep_ms(20);
    }
    FILE *f = fopen(log, "r");
    assert_non_null(f);
    static char out[1 << 20];
    size_t n = fread(out, 1, sizeof(out) - 1, f);
    out[n] = 0;
    fclose(f);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
        fail_msg("kdig failed (%d):\n%s", st, out);
    return strdup(out);
}

/* The records kdig printed (lines that are not comments), in order. */
static ldns_rr_list *kdig_rrs(const char *out, size_t *msgs)
{
    ldns_rr_list *l = ldns_rr_list_new();
    char *copy = strdup(out), *save = NULL;
    *msgs = 0;
    for (char *line = strtok_r(copy, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        if (line[0] == ';') {
            size_t m; /* ";; Received 6256 B (6 messages, 330 records)" */
            if (sscanf(line, ";; Received %*u B (%zu messages", &m) == 1)
                *msgs = m;
            continue;
        }
        if (!line[0])
            continue;
        ldns_rr *rr = NULL;
        ldns_status st = ldns_rr_new_frm_str(&rr, line, 0, NULL, NULL);
        if (st != LDNS_STATUS_OK)
            fail_msg("kdig line not an RR (%s): %s", ldns_get_errorstr_by_id(st), line);
        ldns_rr_list_push_rr(l, rr);
    }
    free(copy);
    return l;
}

static void test_kdig_axfr_ixfr(void **state)
{
    (void)state;
    char dir[64];
    tu_mkdtemp(dir, sizeof(dir), "tern-xfr-kdig");
    char *text = zone_src(SERIAL + 3, 300, V3);
    ldns_rr_list *want = NULL;
    zone_t *z = build_zone(text, true, &want);
    free(text);

    /* AXFR in 1200-byte messages */
    server_t sv = {.z = z, .cap = 1200};
    pthread_t t;
    server_start(&sv, &t);
    char *out = run_kdig(&sv, "AXFR", dir);
    assert_int_equal(pthread_join(t, NULL), 0);
    close(sv.lfd);
    if (sv.err != 0)
        fail_msg("server: %s", sv.why);
    size_t msgs = 0;
    ldns_rr_list *got = kdig_rrs(out, &msgs);
    run_t r = {.rrs = got};
    expect_axfr(&r, want, SERIAL + 3);
    assert_int_equal(ldns_rr_list_rr_count(got), sv.records);
    assert_int_equal(msgs, sv.msgs);
    assert_true(msgs > 5);
    ldns_rr_list_deep_free(got);
    free(out);

    /* IXFR from v1 through v2 */
    zone_t *v1 = v_zone(1), *v2 = v_zone(2), *v3 = v_zone(3);
    xfr_delta_t *d[2] = {xfr_diff(v1, v2), xfr_diff(v2, v3)};
    assert_non_null(d[0]);
    assert_non_null(d[1]);
    sv = (server_t){.z = v3, .cap = 512, .deltas = d, .n = 2};
    server_start(&sv, &t);
    char type[32];
    snprintf(type, sizeof(type), "IXFR=%u", SERIAL + 1);
    out = run_kdig(&sv, type, dir);
    assert_int_equal(pthread_join(t, NULL), 0);
    close(sv.lfd);
    if (sv.err != 0)
        fail_msg("server: %s", sv.why);
    got = kdig_rrs(out, &msgs);
    expect_ixfr_chain(got);
    assert_int_equal(msgs, sv.msgs);
    ldns_rr_list_deep_free(got);
    free(out);

    /* IXFR from a serial the journal does not have: kdig takes the AXFR-style answer */
    ldns_rr_list *want3 = NULL;
    text = zone_src(SERIAL + 3, 4, V3);
    zone_t *v3b = build_zone(text, true, &want3);
    free(text);
    sv = (server_t){.z = v3b, .cap = 512, .deltas = NULL};
    server_start(&sv, &t);
    snprintf(type, sizeof(type), "IXFR=%u", SERIAL - 100);
    out = run_kdig(&sv, type, dir);
    assert_int_equal(pthread_join(t, NULL), 0);
    close(sv.lfd);
    if (sv.err != 0)
        fail_msg("server: %s", sv.why);
    got = kdig_rrs(out, &msgs);
    r.rrs = got;
    expect_axfr(&r, want3, SERIAL + 3);
    ldns_rr_list_deep_free(got);
    free(out);

    ldns_rr_list_deep_free(want3);
    ldns_rr_list_deep_free(want);
    xfr_delta_release(d[0]);
    xfr_delta_release(d[1]);
    zone_free(v1);
    zone_free(v2);
    zone_free(v3);
    zone_free(v3b);
    zone_free(z);
    tu_rmtree(dir);
}

/* ---- NSD as a secondary: AXFR, then IXFR after a NOTIFY -------------------------------- */

/* A primary for NSD: answers SOA over UDP, and SOA, AXFR and IXFR over TCP from the current
 * version and its journal, until stopped. */
typedef struct primary {
    int tfd, ufd;
    uint16_t port;
    pthread_mutex_t mu;
    const zone_t *cur;
    xfr_journal_t *j;
    unsigned axfr, ixfr_delta, ixfr_full, soa; /* answered */
    int stop;
    char why[128];
} primary_t;

/* The answer to one query q (ql bytes) into out (cap); returns its length, 0 for none. */
static bool primary_answer(primary_t *p, int fd, const uint8_t *q, size_t ql, bool tcp,
                           struct sockaddr_storage *from, socklen_t fromlen)
{
    ldns_pkt *pkt = NULL;
    if (ldns_wire2pkt(&pkt, q, ql) != LDNS_STATUS_OK)
        return false;
    if (ldns_pkt_qr(pkt) || ldns_pkt_get_opcode(pkt) != LDNS_PACKET_QUERY ||
        ldns_rr_list_rr_count(ldns_pkt_question(pkt)) != 1) {
        ldns_pkt_free(pkt); /* e.g. NSD's answer to a NOTIFY */
        return true;
    }
    ldns_rr_type t = ldns_rr_get_type(ldns_rr_list_rr(ldns_pkt_question(pkt), 0));
    uint32_t client = 0;
    bool have_client = false;
    if (t == LDNS_RR_TYPE_IXFR && ldns_rr_list_rr_count(ldns_pkt_authority(pkt)) == 1) {
        const ldns_rr *soa = ldns_rr_list_rr(ldns_pkt_authority(pkt), 0);
        if (ldns_rr_get_type(soa) == LDNS_RR_TYPE_SOA && ldns_rr_rd_count(soa) == 7) {
            client = ldns_rdf2native_int32(ldns_rr_rdf(soa, 2));
            have_client = true;
        }
    }
    ldns_pkt_free(pkt);
    static xfr_delta_t *const none[1] = {NULL};
    pthread_mutex_lock(&p->mu);
    const zone_t *z = p->cur;
    xfr_stream_t *s = NULL;
    xfr_delta_t **c = NULL;
    size_t n = 0;
    if (t == LDNS_RR_TYPE_AXFR && tcp) {
        s = xfr_stream_axfr(z, q, ql);
        p->axfr++;
    } else if (t == LDNS_RR_TYPE_IXFR && tcp && have_client && xfr_serial_lt(client, z->serial)) {
        if (xfr_journal_chain(p->j, client, &c, &n) == 0 && n > 0) {
            s = xfr_stream_ixfr(z, c, n, q, ql);
            p->ixfr_delta++;
        } else {
            s = xfr_stream_ixfr(z, NULL, 0, q, ql);
            p->ixfr_full++;
        }
    } else { /* SOA, an up-to-date IXFR, any IXFR over UDP: the current SOA alone */
        s = xfr_stream_ixfr(z, none, 0, q, ql);
        p->soa++;
    }
    for (size_t i = 0; i < n; i++)
        xfr_delta_release(c[i]);
    free(c);
    bool ok = s != NULL;
    static uint8_t msg[2 + 65535];
    int rc = 1;
    while (ok && rc == 1) {
        size_t len = 0;
        rc = xfr_stream_next(s, msg + 2, tcp ? 65535 : 512, 0, &len);
        if (rc < 0) {
            ok = false;
            break;
        }
        msg[0] = (uint8_t)(len >> 8);
        msg[1] = (uint8_t)len;
        if (tcp)
            ok = write_full(fd, msg, 2 + len);
        else
            ok = sendto(fd, msg + 2, len, 0, (struct sockaddr *)from, fromlen) == (ssize_t)len;
    }
    xfr_stream_free(s);
    pthread_mutex_unlock(&p->mu);
    return ok;
}

static void *primary_run(void *arg)
{
    primary_t *p = arg;
    static uint8_t q[65535];
    while (!__atomic_load_n(&p->stop, __ATOMIC_ACQUIRE)) {
        struct pollfd pf[2] = {{.fd = p->tfd, .events = POLLIN}, {.fd = p->ufd, .events = POLLIN}};
        if (poll(pf, 2, 100) <= 0)
            continue;
        if (pf[1].revents & POLLIN) {
            struct sockaddr_storage from;
            socklen_t fl = sizeof(from);
            ssize_t k = recvfrom(p->ufd, q, sizeof(q), 0, (struct sockaddr *)&from, &fl);
            if (k > 0 && !primary_answer(p, p->ufd, q, (size_t)k, false, &from, fl))
                snprintf(p->why, sizeof(p->why), "UDP answer failed");
        }
        if (pf[0].revents & POLLIN) {
            int fd = accept(p->tfd, NULL, NULL);
            if (fd < 0)
                continue;
            uint8_t lb[2];
            /* queries on this connection until the secondary closes it */
            while (read_full(fd, lb, 2)) {
                size_t ql = (size_t)(lb[0] << 8 | lb[1]);
                if (!read_full(fd, q, ql) || !primary_answer(p, fd, q, ql, true, NULL, 0))
                    break;
            }
            close(fd);
        }
    }
    return NULL;
}

/* A TCP and a UDP socket on one free loopback port. */
static void primary_bind(primary_t *p)
{
    for (int attempt = 0; attempt < 20; attempt++) {
        struct sockaddr_storage ss;
        socklen_t sl = tu_sockaddr(&ss, AF_INET, "127.0.0.1", 0);
        p->tfd = socket(AF_INET, SOCK_STREAM, 0);
        assert_true(p->tfd >= 0);
        assert_int_equal(bind(p->tfd, (struct sockaddr *)&ss, sl), 0);
        assert_int_equal(getsockname(p->tfd, (struct sockaddr *)&ss, &sl), 0);
        p->ufd = socket(AF_INET, SOCK_DGRAM, 0);
        assert_true(p->ufd >= 0);
        if (bind(p->ufd, (struct sockaddr *)&ss, sl) == 0) {
            assert_int_equal(listen(p->tfd, 8), 0);
            p->port = ntohs(((struct sockaddr_in *)&ss)->sin_port);
            return;
        }
        close(p->tfd);
        close(p->ufd);
    }
    fail_msg("no free port for TCP and UDP");
}

/* Wait (bounded) until NSD has written the zone with this serial; returns its RRs. */
static ldns_rr_list *wait_zonefile(const char *path, uint32_t serial, const char *log)
{
    int64_t end = tu_now_ms() + 40000;
    for (;;) {
        FILE *f = fopen(path, "r");
        if (f) {
            ldns_zone *lz = NULL;
            ldns_rdf *origin = ldns_dname_new_frm_str(ORIGIN ".");
            ldns_status st = ldns_zone_new_frm_fp(&lz, f, origin, 3600, LDNS_RR_CLASS_IN);
            ldns_rdf_deep_free(origin);
            fclose(f);
            if (st == LDNS_STATUS_OK && ldns_zone_soa(lz) &&
                soa_serial(ldns_zone_soa(lz)) == serial) {
                ldns_rr_list *l = ldns_rr_list_new();
                ldns_rr_list_push_rr(l, ldns_rr_clone(ldns_zone_soa(lz)));
                for (size_t i = 0; i < ldns_rr_list_rr_count(ldns_zone_rrs(lz)); i++)
                    ldns_rr_list_push_rr(l, ldns_rr_clone(ldns_rr_list_rr(ldns_zone_rrs(lz), i)));
                ldns_zone_deep_free(lz);
                return l;
            }
            if (lz)
                ldns_zone_deep_free(lz);
        }
        if (tu_now_ms() > end) {
            char cmd[300];
            snprintf(cmd, sizeof(cmd), "cat '%s' >&2", log);
            if (system(cmd) != 0)
                fprintf(stderr, "no NSD log\n");
            fail_msg("NSD did not write serial %u to %s", serial, path);
        }
        tu_sleep_ms(100);
    }
}

static void wait_exit(pid_t pid, int ms, int *status)
{
    int64_t end = tu_now_ms() + ms;
    while (waitpid(pid, status, WNOHANG) == 0) {
        if (tu_now_ms() > end) {
            kill(pid, SIGKILL);
            waitpid(pid, status, 0);
            return;
        }
        tu_sleep_ms(20);
    }
}

static void send_notify(uint16_t port)
{
    uint8_t m[512], name[DNAME_MAXLEN];
    const char *why;
    int nl = dname_from_str(ORIGIN, strlen(ORIGIN), false, name, &why);
    assert_true(nl > 0);
    static const uint8_t hdr[12] = {0x51, 0x7e, 0x24, 0, 0, 1, 0, 0, 0, 0, 0, 0}; /* NOTIFY, AA */
    memcpy(m, hdr, 12);
    memcpy(m + 12, name, (size_t)nl);
    memcpy(m + 12 + nl, "\0\6\0\1", 4);
    int fd = socket(AF_INET, SOCK_DGRAM, 0);
    assert_true(fd >= 0);
    struct sockaddr_storage ss;
    socklen_t sl = tu_sockaddr(&ss, AF_INET, "127.0.0.1", port);
    assert_int_equal(sendto(fd, m, 12 + (size_t)nl + 4, 0, (struct sockaddr *)&ss, sl),
                     (ssize_t)(12 + nl + 4));
    close(fd);
}

static void test_nsd_secondary(void **state)
{
    (void)state;
    char dir[64], conf[128], zfile[128], log[128];
    tu_mkdtemp(dir, sizeof(dir), "tern-xfr-nsd");
    snprintf(conf, sizeof(conf), "%s/nsd.conf", dir);
    snprintf(zfile, sizeof(zfile), "%s/secondary.zone", dir);
    snprintf(log, sizeof(log), "%s/nsd.log", dir);
    ldns_rr_list *want1 = NULL, *want3 = NULL;
    char *text = zone_src(SERIAL + 1, 150, V1);
    zone_t *v1 = build_zone(text, true, &want1);
    free(text);
    zone_t *v2 = v_zone(2);
    text = zone_src(SERIAL + 3, 4, V3);
    zone_t *v3 = build_zone(text, true, &want3);
    free(text);

    primary_t p = {.cur = v1};
    assert_int_equal(pthread_mutex_init(&p.mu, NULL), 0);
    p.j = xfr_journal_new(8, SIZE_MAX);
    assert_non_null(p.j);
    primary_bind(&p);
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, primary_run, &p), 0);

    uint16_t nsd_port = tu_free_port();
    char *cfg = xasprintf("server:\n"
                          "  ip-address: 127.0.0.1\n"
                          "  port: %u\n"
                          "  server-count: 1\n"
                          "  username: \"\"\n"
                          "  chroot: \"\"\n"
                          "  zonesdir: \"%s\"\n"
                          "  pidfile: \"%s/nsd.pid\"\n"
                          "  xfrdfile: \"%s/xfrd.state\"\n"
                          "  xfrdir: \"%s\"\n"
                          "  zonelistfile: \"%s/zone.list\"\n"
                          "  database: \"\"\n"
                          "  zonefiles-write: 1\n"
                          "  logfile: \"%s\"\n"
                          "  verbosity: 2\n"
                          "remote-control:\n"
                          "  control-enable: no\n"
                          "zone:\n"
                          "  name: \"" ORIGIN "\"\n"
                          "  zonefile: \"%s\"\n"
                          "  request-xfr: 127.0.0.1@%u NOKEY\n"
                          "  allow-notify: 127.0.0.1 NOKEY\n",
                          nsd_port, dir, dir, dir, dir, dir, log, zfile, p.port);
    tu_write_file(dir, "nsd.conf", cfg);
    free(cfg);
    const char *argv[] = {"nsd", "-d", "-c", conf, NULL};
    pid_t nsd = tu_spawn(argv, log);

    /* the first transfer: a full one (NSD has nothing) */
    ldns_rr_list *got = wait_zonefile(zfile, SERIAL + 1, log);
    expect_same(got, 0, ldns_rr_list_rr_count(got), want1, 0, ldns_rr_list_rr_count(want1),
                "NSD after the AXFR");
    ldns_rr_list_deep_free(got);
    const char *check[] = {"nsd-checkzone", ORIGIN, zfile, NULL};
    int st = -1;
    wait_exit(tu_spawn(check, log), 20000, &st);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);

    /* two new versions and their deltas, then a NOTIFY: NSD asks IXFR from SERIAL + 1 */
    pthread_mutex_lock(&p.mu);
    xfr_journal_add(p.j, xfr_diff(v1, v2));
    xfr_journal_add(p.j, xfr_diff(v2, v3));
    p.cur = v3;
    unsigned full_before = p.axfr + p.ixfr_full;
    pthread_mutex_unlock(&p.mu);
    send_notify(nsd_port);
    got = wait_zonefile(zfile, SERIAL + 3, log);
    expect_same(got, 0, ldns_rr_list_rr_count(got), want3, 0, ldns_rr_list_rr_count(want3),
                "NSD after the IXFR");
    ldns_rr_list_deep_free(got);
    wait_exit(tu_spawn(check, log), 20000, &st);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    pthread_mutex_lock(&p.mu);
    unsigned ixfr = p.ixfr_delta, full = p.axfr + p.ixfr_full;
    pthread_mutex_unlock(&p.mu);
    assert_true(ixfr >= 1);              /* the change came as deltas */
    assert_int_equal(full, full_before); /* not as a second full transfer */

    kill(nsd, SIGTERM);
    wait_exit(nsd, 10000, &st);
    __atomic_store_n(&p.stop, 1, __ATOMIC_RELEASE);
    assert_int_equal(pthread_join(t, NULL), 0);
    if (p.why[0])
        fail_msg("primary: %s", p.why);
    close(p.tfd);
    close(p.ufd);
    xfr_journal_free(p.j);
    pthread_mutex_destroy(&p.mu);
    ldns_rr_list_deep_free(want1);
    ldns_rr_list_deep_free(want3);
    zone_free(v1);
    zone_free(v2);
    zone_free(v3);
    tu_rmtree(dir);
}

/* ---- a large zone: every RR once (the SOA twice), at what speed -------------------------- */

/* A zone of `names` hosts with an A each, through the builder. */
static zone_t *big_zone(size_t names)
{
    uint8_t apex[DNAME_MAXLEN], owner[DNAME_MAXLEN];
    const char *why;
    int al = dname_from_str(ORIGIN, strlen(ORIGIN), false, apex, &why);
    assert_true(al > 0);
    char *text = zone_src(SERIAL, 0, "");
    ldns_zone *lz = parse_text(text);
    free(text);
    zone_builder_t *b = zone_builder_new(apex, NULL);
    assert_non_null(b);
    zone_builder_expect(b, names + 64);
    builder_add_ldns(b, ldns_zone_soa(lz));
    for (size_t i = 0; i < ldns_rr_list_rr_count(ldns_zone_rrs(lz)); i++)
        builder_add_ldns(b, ldns_rr_list_rr(ldns_zone_rrs(lz), i));
    ldns_zone_deep_free(lz);
    for (size_t i = 0; i < names; i++) {
        int l = snprintf((char *)owner + 1, 16, "host%zu", i);
        owner[0] = (uint8_t)l;
        memcpy(owner + 1 + l, apex, (size_t)al);
        uint8_t a[4] = {10, (uint8_t)(i >> 16), (uint8_t)(i >> 8), (uint8_t)i};
        assert_int_equal(zone_builder_add(b, owner, WIRE_T_A, 1, 300, a, 4, NULL, 0), 0);
    }
    zone_t *z = NULL;
    char err[256];
    if (zone_builder_finish(b, &z, err, sizeof(err)) != 0)
        fail_msg("%s", err);
    return z;
}

/* Stream the whole AXFR of z in 64 KiB messages with a TSIG reserve, parsing only headers. */
static void axfr_count(const zone_t *z, const uint8_t *q, size_t ql, size_t *msgs, uint64_t *rrs,
                       uint64_t *bytes)
{
    xfr_stream_t *s = xfr_stream_axfr(z, q, ql);
    assert_non_null(s);
    static uint8_t buf[65535];
    int rc;
    *msgs = 0;
    *rrs = 0;
    *bytes = 0;
    do {
        size_t len = 0;
        rc = xfr_stream_next(s, buf, sizeof(buf), 100, &len);
        assert_true(rc >= 0);
        assert_true(len <= sizeof(buf) - 100);
        (*msgs)++;
        *rrs += (uint64_t)(buf[6] << 8 | buf[7]);
        *bytes += len;
    } while (rc == 1);
    assert_int_equal(*rrs, xfr_stream_records(s));
    xfr_stream_free(s);
}

static void test_axfr_large(void **state)
{
    (void)state;
    const char *file = getenv("TERN_XFR_BENCH_ZONE"); /* e.g. bench/gen_zone.py --names 1000000 */
    const char *origin = getenv("TERN_XFR_BENCH_ORIGIN");
    zone_t *z = NULL;
    uint8_t q[512];
    size_t ql;
    if (file) {
        char err[512];
        origin = origin ? origin : "bench.test";
        if (zone_file_load(origin, file, &z, err, sizeof(err)) != 0)
            fail_msg("%s", err);
        uint8_t name[DNAME_MAXLEN];
        const char *why;
        int nl = dname_from_str(origin, strlen(origin), false, name, &why);
        assert_true(nl > 0);
        static const uint8_t hdr[12] = {0, 1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0};
        memcpy(q, hdr, 12);
        memcpy(q + 12, name, (size_t)nl);
        memcpy(q + 12 + nl, "\0\xfc\0\1", 4);
        ql = 12 + (size_t)nl + 4;
    } else {
        z = big_zone(50000);
        ql = mk_query(q, 1, WIRE_T_AXFR, 0);
    }
    size_t msgs;
    uint64_t rrs, bytes;
    double t0 = (double)tu_now_ms();
    axfr_count(z, q, ql, &msgs, &rrs, &bytes);
    double t1 = (double)tu_now_ms();
    assert_int_equal(rrs, z->rr_count + 1); /* the SOA twice */
    print_message("AXFR of %zu names, %zu RRs: %zu messages, %.1f MB in %.0f ms\n", z->node_count,
                  z->rr_count, msgs, (double)bytes / 1e6, t1 - t0);
    zone_free(z);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_axfr_small_messages),
        cmocka_unit_test(test_ixfr_not_in_journal),
        cmocka_unit_test(test_too_big_and_bad_queries),
        cmocka_unit_test(test_question_not_apex),
        cmocka_unit_test(test_ixfr_chain),
        cmocka_unit_test(test_ixfr_up_to_date),
        cmocka_unit_test(test_kdig_axfr_ixfr),
        cmocka_unit_test(test_nsd_secondary),
        cmocka_unit_test(test_axfr_large),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
