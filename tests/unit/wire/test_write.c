/*
 * test_write.c — the response writer: header and question, compression, RDLENGTH after
 * compression, all-or-nothing RRsets, reserve + OPT (with ECS), finish. Every message built here
 * is also decoded by ldns, an independent parser, and its names compared with what was written.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <ldns/ldns.h>

#include "tern/common/err.h"
#include "tern/wire/write.h"

#include "wire_test_util.h"

static uint16_t rd16(const uint8_t *p)
{
    return (uint16_t)(p[0] << 8 | p[1]);
}

/* An RDATA sequence (write.h): append one RR's RDATA of n bytes. */
typedef struct rdseq {
    uint8_t b[4096];
    size_t len;
} rdseq_t;

static void rd_add(rdseq_t *s, const void *data, size_t n)
{
    assert_true(s->len + 2 + n <= sizeof(s->b));
    s->b[s->len] = (uint8_t)(n >> 8);
    s->b[s->len + 1] = (uint8_t)n;
    memcpy(s->b + s->len + 2, data, n);
    s->len += 2 + n;
}

static void rd_add_name(rdseq_t *s, const char *name)
{
    uint8_t n[256];
    rd_add(s, n, to_wire(name, n));
}

/* Parse a real query for qname/qtype (flags as given) into q. */
static void make_query(wire_query_t *q, uint8_t *pkt, const char *qname, uint16_t qtype,
                       uint16_t flags)
{
    size_t l = 0;
    pkt[l++] = 0xAB;
    pkt[l++] = 0xCD;
    pkt[l++] = (uint8_t)(flags >> 8);
    pkt[l++] = (uint8_t)flags;
    memcpy(pkt + l, "\0\1\0\0\0\0\0\0", 8);
    l += 8;
    l += to_wire(qname, pkt + l);
    pkt[l++] = (uint8_t)(qtype >> 8);
    pkt[l++] = (uint8_t)qtype;
    pkt[l++] = 0;
    pkt[l++] = 1;
    assert_int_equal(wire_parse_query(q, pkt, l), WIRE_OK);
}

/* Decode with ldns; fails the test if ldns rejects the message. */
static ldns_pkt *decode(const uint8_t *msg, size_t len)
{
    ldns_pkt *p = NULL;
    ldns_status st = ldns_wire2pkt(&p, msg, len);
    if (st != LDNS_STATUS_OK)
        fail_msg("ldns: %s", ldns_get_errorstr_by_id(st));
    return p;
}

/* Case-insensitive compare of an ldns name with a presentation name. */
static void assert_name(const ldns_rdf *rdf, const char *want)
{
    uint8_t w[256];
    size_t wl = to_wire(want, w);
    assert_int_equal(ldns_rdf_get_type(rdf), LDNS_RDF_TYPE_DNAME);
    assert_int_equal(ldns_rdf_size(rdf), wl);
    assert_true(dname_equal(ldns_rdf_data(rdf), w));
}

/* Check the ldns-decoded RR: owner, type, and that its RDATA fields concatenate to exactly the
 * uncompressed RDATA we gave (names compared case-insensitively). */
static void assert_rr(const ldns_rr *rr, const char *owner, uint16_t type, const uint8_t *rdata,
                      size_t rdlen)
{
    assert_name(ldns_rr_owner(rr), owner);
    assert_int_equal(ldns_rr_get_type(rr), type);
    uint8_t got[1024];
    size_t gl = 0;
    for (size_t i = 0; i < ldns_rr_rd_count(rr); i++) {
        const ldns_rdf *f = ldns_rr_rdf(rr, i);
        assert_true(gl + ldns_rdf_size(f) <= sizeof(got));
        memcpy(got + gl, ldns_rdf_data(f), ldns_rdf_size(f));
        gl += ldns_rdf_size(f);
    }
    assert_int_equal(gl, rdlen);
    for (size_t i = 0; i < rdlen; i++) {
        uint8_t a = got[i], b = rdata[i];
        if (a >= 'A' && a <= 'Z')
            a += 32;
        if (b >= 'A' && b <= 'Z')
            b += 32;
        assert_int_equal(a, b);
    }
}

/* Every compression pointer target in msg lies below 0x4000 by construction; also check each
 * pointer points strictly backwards, which ldns doesn't insist on. Walks the message with the
 * counts from the header, a small independent decoder. */
static void assert_pointers_backwards(const uint8_t *msg, size_t len)
{
    size_t pos = 12;
    unsigned n = rd16(msg + 4) + rd16(msg + 6) + rd16(msg + 8) + rd16(msg + 10);
    for (unsigned r = 0; r < n; r++) {
        for (;;) {
            assert_true(pos < len);
            uint8_t l = msg[pos];
            if ((l & 0xC0) == 0xC0) {
                assert_true((size_t)(rd16(msg + pos) & 0x3FFF) < pos);
                pos += 2;
                break;
            }
            pos += (size_t)l + 1;
            if (l == 0)
                break;
        }
        if (r == 0 && rd16(msg + 4) == 1) {
            pos += 4;
            continue;
        }
        assert_true(pos + 10 <= len);
        uint16_t type = rd16(msg + pos);
        size_t rdlen = rd16(msg + pos + 8);
        pos += 10;
        /* pointers inside compressible RDATA: check those of single-name types */
        if (type == WIRE_T_NS || type == WIRE_T_CNAME || type == WIRE_T_PTR) {
            size_t p = pos;
            for (;;) {
                uint8_t l = msg[p];
                if ((l & 0xC0) == 0xC0) {
                    assert_true((size_t)(rd16(msg + p) & 0x3FFF) < p);
                    p += 2;
                    break;
                }
                p += (size_t)l + 1;
                if (l == 0)
                    break;
            }
            assert_int_equal(p, pos + rdlen); /* RDLENGTH matches the compressed name */
        }
        pos += rdlen;
    }
    assert_int_equal(pos, len);
}

static wire_query_t q;
static wire_writer_t w;
static uint8_t qpkt[512];
static uint8_t buf[65535];

/* ---- header and question ---- */

static void test_init_header_and_question(void **state)
{
    (void)state;
    /* RD, CD, AD set in the query: only RD and the opcode survive */
    make_query(&q, qpkt, "www.Example.COM", WIRE_T_A,
               WIRE_FLAG_RD | WIRE_FLAG_CD | WIRE_FLAG_AD | WIRE_FLAG_RA);
    wire_writer_init(&w, buf, 512, &q);
    assert_int_equal(w.len, 12 + q.question_len);
    assert_int_equal(w.ncomp, 3); /* www.example.com, example.com, com */
    size_t len = wire_writer_finish(&w, true, false, WIRE_RC_NXDOMAIN);
    assert_int_equal(len, 12 + 17 + 4);
    assert_int_equal(rd16(buf), 0xABCD);
    assert_int_equal(rd16(buf + 2), WIRE_FLAG_QR | WIRE_FLAG_RD | WIRE_FLAG_AA | 3);
    assert_int_equal(rd16(buf + 4), 1);
    assert_int_equal(rd16(buf + 6), 0);
    assert_memory_equal(buf + 12, qpkt + 12, q.question_len); /* case as sent */

    ldns_pkt *p = decode(buf, len);
    assert_int_equal(ldns_pkt_get_rcode(p), LDNS_RCODE_NXDOMAIN);
    assert_true(ldns_pkt_aa(p));
    assert_false(ldns_pkt_ra(p));
    assert_false(ldns_pkt_cd(p));
    ldns_pkt_free(p);

    /* opcode NOTIFY copied, RD clear stays clear */
    make_query(&q, qpkt, "example.com", WIRE_T_SOA, WIRE_OP_NOTIFY << 11);
    wire_writer_init(&w, buf, 512, &q);
    len = wire_writer_finish(&w, false, false, 0);
    assert_int_equal(rd16(buf + 2), WIRE_FLAG_QR | WIRE_OP_NOTIFY << 11);
}

static void test_init_without_question(void **state)
{
    (void)state;
    uint8_t pkt[12] = {0x11, 0x22, 0x01, 0x00, 0, 0, 0, 0, 0, 0, 0, 0};
    assert_int_equal(wire_parse_query(&q, pkt, sizeof(pkt)), WIRE_FORMERR);
    wire_writer_init(&w, buf, 512, &q);
    size_t len = wire_writer_finish(&w, false, false, WIRE_RC_FORMERR);
    assert_int_equal(len, 12);
    assert_int_equal(rd16(buf), 0x1122);
    assert_int_equal(rd16(buf + 2), WIRE_FLAG_QR | WIRE_FLAG_RD | WIRE_RC_FORMERR);
    assert_int_equal(rd16(buf + 4), 0);
    assert_int_equal(w.ncomp, 0);
}

/* ---- RRsets and compression ---- */

static void test_answer_pointer_to_question(void **state)
{
    (void)state;
    make_query(&q, qpkt, "www.example.com", WIRE_T_A, 0);
    wire_writer_init(&w, buf, 512, &q);
    rdseq_t s = {.len = 0};
    rd_add(&s, "\xC0\x00\x02\x01", 4);
    rd_add(&s, "\xC0\x00\x02\x02", 4);
    assert_int_equal(wire_write_rrset(&w, WIRE_SEC_AN, 12, NULL, WIRE_T_A, 300, 2, s.b), 0);
    assert_int_equal(w.last_name_off, 0);
    size_t len = wire_writer_finish(&w, true, false, 0);
    static const uint8_t rr[] = {0xC0, 12, 0, 1, 0, 1, 0, 0, 1, 44, 0, 4, 0xC0, 0, 2, 1};
    assert_int_equal(len, 33 + 2 * 16);
    assert_memory_equal(buf + 33, rr, 16);
    assert_memory_equal(buf + 33 + 16, rr, 12);

    ldns_pkt *p = decode(buf, len);
    assert_int_equal(ldns_pkt_ancount(p), 2);
    const ldns_rr *a = ldns_rr_list_rr(ldns_pkt_answer(p), 1);
    assert_rr(a, "www.example.com", WIRE_T_A, (const uint8_t *)"\xC0\x00\x02\x02", 4);
    assert_int_equal(ldns_rr_ttl(a), 300);
    assert_int_equal(ldns_rr_get_class(a), LDNS_RR_CLASS_IN);
    ldns_pkt_free(p);
}

/* A CNAME chain: the CNAME target is compressed against the question, the next owner is a
 * pointer to the target (last_name_off), NS and glue compress against all of it. */
static void test_cname_chain_compression(void **state)
{
    (void)state;
    make_query(&q, qpkt, "www.Example.com", WIRE_T_A, WIRE_FLAG_RD);
    wire_writer_init(&w, buf, 512, &q);

    rdseq_t cname = {.len = 0};
    rd_add_name(&cname, "web.example.com");
    assert_int_equal(wire_write_rrset(&w, WIRE_SEC_AN, 12, NULL, WIRE_T_CNAME, 60, 1, cname.b), 0);
    /* owner C00C, then type..rdlength (10), then the target */
    size_t tgt = 33 + 2 + 10;
    assert_int_equal(w.last_name_off, tgt);
    assert_int_equal(rd16(buf + tgt - 2), 6); /* RDLENGTH after compression: 3web + pointer */
    assert_memory_equal(buf + tgt, "\3web\xC0\x10", 6); /* pointer to "Example.com" at 16 */

    rdseq_t a = {.len = 0};
    rd_add(&a, "\xC6\x33\x64\x01", 4);
    assert_int_equal(wire_write_rrset(&w, WIRE_SEC_AN, w.last_name_off, NULL, WIRE_T_A, 60, 1, a.b),
                     0);
    assert_int_equal(rd16(buf + tgt + 6), 0xC000 | tgt);

    uint8_t apex[64];
    to_wire("example.com", apex);
    rdseq_t ns = {.len = 0};
    rd_add_name(&ns, "ns1.example.com");
    rd_add_name(&ns, "ns2.example.com");
    size_t ns_at = w.len;
    assert_int_equal(wire_write_rrset(&w, WIRE_SEC_NS, 0, apex, WIRE_T_NS, 3600, 2, ns.b), 0);
    assert_int_equal(rd16(buf + ns_at), 0xC010); /* owner found case-insensitively */
    assert_int_equal(rd16(buf + ns_at + 10), 6); /* 3ns1 + pointer */
    assert_memory_equal(buf + ns_at + 12, "\3ns1\xC0\x10", 6);
    /* second NS: owner repeats as the same pointer */
    assert_int_equal(rd16(buf + ns_at + 18), 0xC010);

    uint8_t glue_owner[64];
    to_wire("ns1.example.com", glue_owner);
    rdseq_t glue = {.len = 0};
    rd_add(&glue, "\xC0\x00\x02\x35", 4);
    size_t glue_at = w.len;
    assert_int_equal(wire_write_rrset(&w, WIRE_SEC_AR, 0, glue_owner, WIRE_T_A, 3600, 1, glue.b),
                     0);
    assert_int_equal(rd16(buf + glue_at), 0xC000 | (ns_at + 12)); /* the NS target */

    size_t len = wire_writer_finish(&w, true, false, 0);
    assert_pointers_backwards(buf, len);
    ldns_pkt *p = decode(buf, len);
    assert_int_equal(ldns_pkt_ancount(p), 2);
    assert_int_equal(ldns_pkt_nscount(p), 2);
    assert_int_equal(ldns_pkt_arcount(p), 1);
    const ldns_rr_list *an = ldns_pkt_answer(p), *au = ldns_pkt_authority(p);
    uint8_t wire[256];
    size_t wl = to_wire("web.example.com", wire);
    assert_rr(ldns_rr_list_rr(an, 0), "www.example.com", WIRE_T_CNAME, wire, wl);
    assert_rr(ldns_rr_list_rr(an, 1), "web.example.com", WIRE_T_A,
              (const uint8_t *)"\xC6\x33\x64\x01", 4);
    wl = to_wire("ns2.example.com", wire);
    assert_rr(ldns_rr_list_rr(au, 1), "example.com", WIRE_T_NS, wire, wl);
    assert_rr(ldns_rr_list_rr(ldns_pkt_additional(p), 0), "ns1.example.com", WIRE_T_A,
              (const uint8_t *)"\xC0\x00\x02\x35", 4);
    ldns_pkt_free(p);
}

/* Only whole labels match: "ample.com" shares "com", "example.net" shares nothing. */
static void test_compression_label_boundaries(void **state)
{
    (void)state;
    make_query(&q, qpkt, "example.com", WIRE_T_NS, 0);
    wire_writer_init(&w, buf, 512, &q);
    rdseq_t ns = {.len = 0};
    rd_add_name(&ns, "ample.com");
    rd_add_name(&ns, "example.net");
    rd_add_name(&ns, "net");
    assert_int_equal(wire_write_rrset(&w, WIRE_SEC_AN, 12, NULL, WIRE_T_NS, 60, 3, ns.b), 0);
    size_t p0 = 29 + 12;
    assert_memory_equal(buf + p0, "\5ample\xC0\x14", 8); /* "com" of the question at 20 */
    size_t p1 = p0 + 8 + 12;
    assert_memory_equal(buf + p1, "\7example\3net\0", 13);
    size_t p2 = p1 + 13 + 12;
    assert_int_equal(rd16(buf + p2 - 2), 2);
    assert_int_equal(rd16(buf + p2), 0xC000 | (p1 + 8)); /* "net" registered from example.net */
    size_t len = wire_writer_finish(&w, false, false, 0);
    assert_pointers_backwards(buf, len);
    ldns_pkt *p = decode(buf, len);
    uint8_t wire[256];
    size_t wl = to_wire("ample.com", wire);
    assert_rr(ldns_rr_list_rr(ldns_pkt_answer(p), 0), "example.com", WIRE_T_NS, wire, wl);
    wl = to_wire("example.net", wire);
    assert_rr(ldns_rr_list_rr(ldns_pkt_answer(p), 1), "example.com", WIRE_T_NS, wire, wl);
    wl = to_wire("net", wire);
    assert_rr(ldns_rr_list_rr(ldns_pkt_answer(p), 2), "example.com", WIRE_T_NS, wire, wl);
    ldns_pkt_free(p);
}

static void test_soa_mx_minfo_compressed(void **state)
{
    (void)state;
    make_query(&q, qpkt, "example.com", WIRE_T_SOA, 0);
    wire_writer_init(&w, buf, 512, &q);
    uint8_t soa[128];
    size_t l = to_wire("ns1.example.com", soa);
    l += to_wire("hostmaster.example.com", soa + l);
    memcpy(soa + l, "\0\0\0\1\0\0\x0e\x10\0\0\x07\x08\0\x12\x75\0\0\0\x01\x2c", 20);
    size_t soa_len = l + 20;
    rdseq_t s = {.len = 0};
    rd_add(&s, soa, soa_len);
    assert_int_equal(wire_write_rrset(&w, WIRE_SEC_AN, 12, NULL, WIRE_T_SOA, 3600, 1, s.b), 0);
    assert_int_equal(w.last_name_off, 0);
    /* 3ns1+ptr (6) + 10hostmaster+ptr (13) + 20 */
    assert_int_equal(rd16(buf + 29 + 10), 6 + 13 + 20);

    uint8_t mx[64] = {0, 10};
    size_t mxl = 2 + to_wire("mail.example.com", mx + 2);
    rdseq_t m = {.len = 0};
    rd_add(&m, mx, mxl);
    size_t mx_at = w.len;
    assert_int_equal(wire_write_rrset(&w, WIRE_SEC_AN, 12, NULL, WIRE_T_MX, 3600, 1, m.b), 0);
    assert_int_equal(w.last_name_off, mx_at + 12 + 2);
    assert_int_equal(rd16(buf + mx_at + 10), 2 + 5 + 2);

    uint8_t minfo[128];
    size_t mil = to_wire("admin.example.com", minfo);
    mil += to_wire("hostmaster.example.com", minfo + mil);
    rdseq_t mi = {.len = 0};
    rd_add(&mi, minfo, mil);
    size_t mi_at = w.len;
    assert_int_equal(wire_write_rrset(&w, WIRE_SEC_AN, 12, NULL, 14, 3600, 1, mi.b), 0);
    assert_int_equal(rd16(buf + mi_at + 10), 8 + 2); /* 5admin+ptr, then a bare pointer */

    size_t len = wire_writer_finish(&w, true, false, 0);
    ldns_pkt *p = decode(buf, len);
    const ldns_rr_list *an = ldns_pkt_answer(p);
    assert_rr(ldns_rr_list_rr(an, 0), "example.com", WIRE_T_SOA, soa, soa_len);
    assert_rr(ldns_rr_list_rr(an, 1), "example.com", WIRE_T_MX, mx, mxl);
    assert_rr(ldns_rr_list_rr(an, 2), "example.com", 14, minfo, mil);
    ldns_pkt_free(p);
}

/* wire_write_rrset_names(): with the caller's views of the SOA's names the message is byte for
 * byte wire_write_rrset()'s, whatever the question and whatever came before; a missing view or
 * one of another name's length is made anew. */
static void test_rrset_names_same_bytes(void **state)
{
    (void)state;
    static const char *const qnames[] = {"x.example.com", "ns1.example.com", "a.ns1.example.com",
                                         "example.com",   "other.net",       "EXAMPLE.COM"};
    static const char *const soas[][2] = {{"ns1.example.com", "hostmaster.example.com"},
                                          {"ns1.example.com", "h.ns1.example.com"},
                                          {"ns.other.net", "root.example.com"},
                                          {".", "."}};
    static uint8_t ref[65535];
    for (size_t qi = 0; qi < sizeof(qnames) / sizeof(qnames[0]); qi++) {
        for (size_t si = 0; si < sizeof(soas) / sizeof(soas[0]); si++) {
            for (int cname = 0; cname < 2; cname++) {
                for (int mode = 0; mode < 3; mode++) {
                    uint8_t soa[600];
                    size_t a = to_wire(soas[si][0], soa);
                    size_t b = to_wire(soas[si][1], soa + a);
                    memset(soa + a + b, 7, 20);
                    rdseq_t sr = {.len = 0}, cr = {.len = 0};
                    rd_add(&sr, soa, a + b + 20);
                    rd_add_name(&cr, "alias.ns1.example.com");
                    dname_view_t v0, v1;
                    dname_view_init(&v0, soa);
                    dname_view_init(&v1, soa + a);
                    const dname_view_t *views[2] = {&v0, &v1};
                    if (mode == 1)
                        views[0] = NULL; /* made here */
                    if (mode == 2)
                        views[1] = &v0; /* the wrong name: used only when lengths agree */
                    if (mode == 2 && v0.len == v1.len)
                        continue;
                    size_t len[2];
                    for (int k = 0; k < 2; k++) {
                        make_query(&q, qpkt, qnames[qi], WIRE_T_A, 0);
                        wire_writer_init(&w, buf, 512, &q);
                        if (cname)
                            assert_int_equal(wire_write_rrset(&w, WIRE_SEC_AN, 12, NULL,
                                                              WIRE_T_CNAME, 60, 1, cr.b),
                                             0);
                        int rc = k == 0 ? wire_write_rrset(&w, WIRE_SEC_NS, 0, soa, WIRE_T_SOA, 60,
                                                           1, sr.b)
                                        : wire_write_rrset_names(&w, WIRE_SEC_NS, 0, soa,
                                                                 WIRE_T_SOA, 60, 1, sr.b, views, 2);
                        assert_int_equal(rc, 0);
                        len[k] = wire_writer_finish(&w, true, false, 0);
                        if (k == 0)
                            memcpy(ref, buf, len[0]);
                    }
                    assert_int_equal(len[0], len[1]);
                    assert_memory_equal(ref, buf, len[0]);
                }
            }
        }
    }
}

/* SRV, DNAME (and every type not in RFC 3597 §4's list) keep their names uncompressed. */
static void test_srv_dname_not_compressed(void **state)
{
    (void)state;
    make_query(&q, qpkt, "_sip._udp.example.com", WIRE_T_SRV, 0);
    wire_writer_init(&w, buf, 512, &q);
    uint8_t srv[64] = {0, 1, 0, 2, 0x13, 0xC4};
    size_t sl = 6 + to_wire("sip.example.com", srv + 6);
    rdseq_t s = {.len = 0};
    rd_add(&s, srv, sl);
    size_t at = w.len;
    assert_int_equal(wire_write_rrset(&w, WIRE_SEC_AN, 12, NULL, WIRE_T_SRV, 60, 1, s.b), 0);
    assert_int_equal(rd16(buf + at + 10), sl);
    assert_memory_equal(buf + at + 12, srv, sl);
    assert_int_equal(w.last_name_off, at + 12 + 6);

    uint8_t tgt[64];
    size_t tl = to_wire("example.com", tgt);
    rdseq_t d = {.len = 0};
    rd_add(&d, tgt, tl);
    at = w.len;
    assert_int_equal(wire_write_rrset(&w, WIRE_SEC_AN, 12, NULL, WIRE_T_DNAME, 60, 1, d.b), 0);
    assert_int_equal(rd16(buf + at + 10), tl);
    assert_memory_equal(buf + at + 12, tgt, tl);
    assert_int_equal(w.last_name_off, at + 12);

    /* a name written uncompressed is not registered: the next "sip.example.com" can't point
     * into SRV RDATA (nothing forbids it, but nothing registered it either) — it compresses
     * against the question's "example.com" */
    uint8_t owner[64];
    to_wire("sip.example.com", owner);
    rdseq_t a = {.len = 0};
    rd_add(&a, "\1\2\3\4", 4);
    at = w.len;
    assert_int_equal(wire_write_rrset(&w, WIRE_SEC_AR, 0, owner, WIRE_T_A, 60, 1, a.b), 0);
    assert_memory_equal(buf + at, "\3sip\xC0\x16", 6); /* example.com at 12 + 10 */

    size_t len = wire_writer_finish(&w, true, false, 0);
    ldns_pkt *p = decode(buf, len);
    assert_rr(ldns_rr_list_rr(ldns_pkt_answer(p), 0), "_sip._udp.example.com", WIRE_T_SRV, srv, sl);
    assert_rr(ldns_rr_list_rr(ldns_pkt_additional(p), 0), "sip.example.com", WIRE_T_A,
              (const uint8_t *)"\1\2\3\4", 4);
    ldns_pkt_free(p);
}

static void test_root_owner_and_class(void **state)
{
    (void)state;
    make_query(&q, qpkt, "", WIRE_T_NS, 0);
    wire_writer_init(&w, buf, 512, &q);
    assert_int_equal(w.ncomp, 0); /* the root is never worth a pointer */
    rdseq_t ns = {.len = 0};
    rd_add_name(&ns, "a.root-servers.net");
    rd_add_name(&ns, "b.root-servers.net");
    uint8_t root[1] = {0};
    assert_int_equal(
        wire_write_rrset_class(&w, WIRE_SEC_AN, 0, root, WIRE_T_NS, WIRE_CLASS_CH, 518400, 2, ns.b),
        0);
    size_t len = wire_writer_finish(&w, true, false, 0);
    assert_int_equal(buf[17], 0); /* owner: one root byte */
    assert_int_equal(rd16(buf + 20), WIRE_CLASS_CH);
    /* second RR: root owner again, its target "b" + pointer to "root-servers.net" */
    size_t second = 17 + 1 + 10 + 20;
    assert_int_equal(buf[second], 0);
    assert_memory_equal(buf + second + 11, "\1b\xC0", 3);
    ldns_pkt *p = decode(buf, len);
    uint8_t wire[64];
    size_t wl = to_wire("b.root-servers.net", wire);
    assert_rr(ldns_rr_list_rr(ldns_pkt_answer(p), 1), "", WIRE_T_NS, wire, wl);
    assert_int_equal(ldns_rr_get_class(ldns_rr_list_rr(ldns_pkt_answer(p), 1)), LDNS_RR_CLASS_CH);
    ldns_pkt_free(p);
}

/* ---- truncation and rollback ---- */

static void test_rollback_on_enospc(void **state)
{
    (void)state;
    make_query(&q, qpkt, "example.com", WIRE_T_NS, 0);
    wire_writer_init(&w, buf, 512, &q);
    /* fill to a few bytes below the limit with one big TXT */
    uint8_t txt[512];
    memset(txt, 'x', sizeof(txt));
    size_t fill = 512 - w.len - 12 - 40; /* leave 40 bytes */
    txt[0] = 255;
    rdseq_t t = {.len = 0};
    rd_add(&t, txt, fill);
    /* TXT strings: first 255, then the rest as another string */
    t.b[2 + 256] = (uint8_t)(fill - 257);
    assert_int_equal(wire_write_rrset(&w, WIRE_SEC_AN, 12, NULL, WIRE_T_TXT, 60, 1, t.b), 0);
    assert_int_equal(w.len, 472);

    /* two NS with new names: the first (2+10+ 4+6+2 = 24 bytes... ) fits, the second doesn't */
    rdseq_t ns = {.len = 0};
    rd_add_name(&ns, "ns1.provider-one.net");
    rd_add_name(&ns, "ns2.provider-two.org");
    uint8_t before[512];
    memcpy(before, buf, w.len);
    size_t len0 = w.len;
    unsigned ncomp0 = w.ncomp;
    uint16_t last0 = w.last_name_off;
    assert_int_equal(wire_write_rrset(&w, WIRE_SEC_AN, 12, NULL, WIRE_T_NS, 60, 2, ns.b),
                     TERN_ENOSPC);
    assert_int_equal(w.len, len0);
    assert_int_equal(w.ncomp, ncomp0);
    assert_int_equal(w.count[WIRE_SEC_AN], 1);
    assert_int_equal(w.last_name_off, last0);
    assert_memory_equal(buf, before, len0);

    /* the rolled-back names must not be pointed at: ns1.provider-one.net alone fits (owner 2 +
     * 10 + 22 literal = 34 <= 40), and must be written literally */
    rdseq_t one = {.len = 0};
    rd_add_name(&one, "ns1.provider-one.net");
    assert_int_equal(wire_write_rrset(&w, WIRE_SEC_AN, 12, NULL, WIRE_T_NS, 60, 1, one.b), 0);
    assert_memory_equal(buf + len0 + 12, "\3ns1\14provider-one\3net\0", 22);

    size_t len = wire_writer_finish(&w, false, true, 0);
    assert_true(len <= 512);
    assert_pointers_backwards(buf, len);
    ldns_pkt *p = decode(buf, len);
    assert_true(ldns_pkt_tc(p));
    assert_int_equal(ldns_pkt_ancount(p), 2);
    uint8_t wire[64];
    size_t wl = to_wire("ns1.provider-one.net", wire);
    assert_rr(ldns_rr_list_rr(ldns_pkt_answer(p), 1), "example.com", WIRE_T_NS, wire, wl);
    ldns_pkt_free(p);
}

/* Exactly at the limit fits; one byte less does not. */
static void test_limit_exact(void **state)
{
    (void)state;
    make_query(&q, qpkt, "example.com", WIRE_T_A, 0);
    rdseq_t a = {.len = 0};
    rd_add(&a, "\1\2\3\4", 4);
    size_t need = 29 + 16;
    uint8_t small[64];
    wire_writer_init(&w, small, need, &q);
    assert_int_equal(wire_write_rrset(&w, WIRE_SEC_AN, 12, NULL, WIRE_T_A, 1, 1, a.b), 0);
    assert_int_equal(w.len, need);
    wire_writer_init(&w, small, need - 1, &q);
    assert_int_equal(wire_write_rrset(&w, WIRE_SEC_AN, 12, NULL, WIRE_T_A, 1, 1, a.b), TERN_ENOSPC);
    assert_int_equal(w.len, 29);
}

static void test_reserve_and_opt(void **state)
{
    (void)state;
    make_query(&q, qpkt, "example.com", WIRE_T_A, 0);
    rdseq_t a = {.len = 0};
    rd_add(&a, "\1\2\3\4", 4);
    uint8_t small[128];
    size_t limit = 29 + 16 + 11;
    wire_writer_init(&w, small, limit, &q);
    assert_int_equal(wire_writer_reserve(&w, limit), TERN_ENOSPC);
    assert_int_equal(wire_writer_reserve(&w, 12), 0);
    /* the A record would fit in the limit but not beside the reserved room */
    assert_int_equal(wire_write_rrset(&w, WIRE_SEC_AN, 12, NULL, WIRE_T_A, 1, 1, a.b), TERN_ENOSPC);
    assert_int_equal(wire_writer_reserve(&w, wire_opt_size(NULL, 0)), 0);
    assert_int_equal(wire_write_rrset(&w, WIRE_SEC_AN, 12, NULL, WIRE_T_A, 1, 1, a.b), 0);
    assert_int_equal(wire_write_opt(&w, 1232, 0, true, NULL, 0, NULL, 0), 0);
    size_t len = wire_writer_finish(&w, true, false, 0);
    assert_int_equal(len, limit);
    static const uint8_t opt[] = {0, 0, 41, 0x04, 0xD0, 0, 0, 0x80, 0, 0, 0};
    assert_memory_equal(small + len - 11, opt, 11);
    ldns_pkt *p = decode(small, len);
    assert_int_equal(ldns_pkt_edns_udp_size(p), 1232);
    assert_true(ldns_pkt_edns_do(p));
    assert_int_equal(ldns_pkt_arcount(p), 0); /* ldns takes the OPT out of the count */
    ldns_pkt_free(p);
}

static void test_opt_with_ecs(void **state)
{
    (void)state;
    make_query(&q, qpkt, "example.com", WIRE_T_A, 0);
    wire_writer_init(&w, buf, 512, &q);
    wire_ecs_t e = {.family = 1, .source_prefix = 22, .addr = {198, 51, 103, 7}};
    assert_int_equal(wire_opt_size(&e, 0), 11 + 8 + 3);
    assert_int_equal(wire_writer_reserve(&w, wire_opt_size(&e, 0)), 0);
    /* BADVERS: 16 = ext rcode 1, header rcode 0 */
    assert_int_equal(wire_write_opt(&w, 4096, WIRE_RC_BADVERS >> 4, false, &e, 20, NULL, 0), 0);
    size_t len = wire_writer_finish(&w, false, false, WIRE_RC_BADVERS);
    assert_int_equal(len, 29 + 22);
    static const uint8_t want[] = {0, 0, 41, 0x10, 0x00, 1, 0,  0,  0,   0,  11,
                                   0, 8, 0,  7,    0,    1, 22, 20, 198, 51, 100};
    /* 103 = 0b01100111 masked to /22 -> 0b01100100 = 100; the 4th byte is not sent */
    assert_memory_equal(buf + 29, want, sizeof(want));
    assert_int_equal(rd16(buf + 2) & 0xF, 0);
    assert_int_equal(rd16(buf + 10), 1);

    ldns_pkt *p = decode(buf, len);
    assert_int_equal(ldns_pkt_edns_udp_size(p), 4096);
    assert_int_equal(ldns_pkt_edns_extended_rcode(p), 1);
    assert_false(ldns_pkt_edns_do(p));
    ldns_edns_option_list *ol = ldns_pkt_edns_get_option_list(p);
    assert_non_null(ol);
    assert_int_equal(ldns_edns_option_list_get_count(ol), 1);
    ldns_edns_option *o = ldns_edns_option_list_get_option(ol, 0);
    assert_int_equal(ldns_edns_get_code(o), LDNS_EDNS_CLIENT_SUBNET);
    assert_int_equal(ldns_edns_get_size(o), 7);
    assert_memory_equal(ldns_edns_get_data(o), want + 15, 7);
    ldns_pkt_free(p);

    /* IPv6 /0: no address bytes */
    wire_writer_init(&w, buf, 512, &q);
    wire_ecs_t z = {.family = 2, .source_prefix = 0};
    assert_int_equal(wire_write_opt(&w, 1232, 0, true, &z, 0, NULL, 0), 0);
    assert_int_equal(w.len, 29 + 19);
    assert_memory_equal(buf + 29 + 11, "\0\x08\0\x04\0\x02\0\0", 8);

    /* a prefix no address can have is refused, not read past addr[] */
    wire_writer_init(&w, buf, 512, &q);
    wire_ecs_t bad = {.family = 2, .source_prefix = 129};
    assert_int_equal(wire_write_opt(&w, 1232, 0, false, &bad, 0, NULL, 0), TERN_EINVAL);
    assert_int_equal(w.len, 29);
}

static void test_opt_no_room(void **state)
{
    (void)state;
    make_query(&q, qpkt, "example.com", WIRE_T_A, 0);
    uint8_t small[64];
    wire_writer_init(&w, small, 29 + 10, &q);
    assert_int_equal(wire_writer_reserve(&w, 11), TERN_ENOSPC);
    assert_int_equal(wire_write_opt(&w, 1232, 0, false, NULL, 0, NULL, 0), TERN_ENOSPC);
    assert_int_equal(w.len, 29);
    assert_int_equal(w.count[WIRE_SEC_AR], 0);
}

static void test_sections_forward_only(void **state)
{
    (void)state;
    make_query(&q, qpkt, "example.com", WIRE_T_A, 0);
    wire_writer_init(&w, buf, 512, &q);
    rdseq_t a = {.len = 0};
    rd_add(&a, "\1\2\3\4", 4);
    assert_int_equal(wire_write_rrset(&w, WIRE_SEC_NS, 12, NULL, WIRE_T_A, 1, 1, a.b), 0);
    size_t len0 = w.len;
    assert_int_equal(wire_write_rrset(&w, WIRE_SEC_AN, 12, NULL, WIRE_T_A, 1, 1, a.b), TERN_EINVAL);
    assert_int_equal(w.len, len0);
    assert_int_equal(wire_write_rrset(&w, WIRE_SEC_AR, 12, NULL, WIRE_T_A, 1, 1, a.b), 0);
    wire_writer_finish(&w, false, false, 0);
    assert_int_equal(rd16(buf + 6), 0);
    assert_int_equal(rd16(buf + 8), 1);
    assert_int_equal(rd16(buf + 10), 1);
}

/* Past 16 KiB (TCP) nothing can be pointed at: names there are written out, and owner_off
 * beyond the pointer range still yields the right owner. */
static void test_beyond_pointer_range(void **state)
{
    (void)state;
    make_query(&q, qpkt, "big.example.com", WIRE_T_TXT, 0);
    wire_writer_init(&w, buf, 65535, &q);
    rdseq_t t = {.len = 0};
    uint8_t txt[256];
    memset(txt, 'y', sizeof(txt));
    txt[0] = 255;
    for (int i = 0; i < 15; i++)
        rd_add(&t, txt, 256);
    for (int k = 0; k < 5; k++) /* 5 * 15 * (2+10+256) > 16384 */
        assert_int_equal(wire_write_rrset(&w, WIRE_SEC_AN, 12, NULL, WIRE_T_TXT, 1, 15, t.b), 0);
    assert_true(w.len > 0x4000);

    rdseq_t c = {.len = 0};
    rd_add_name(&c, "far.away.test");
    assert_int_equal(wire_write_rrset(&w, WIRE_SEC_AN, 12, NULL, WIRE_T_CNAME, 1, 1, c.b), 0);
    size_t tgt = w.last_name_off;
    assert_true(tgt >= 0x4000);
    assert_memory_equal(buf + tgt, "\3far\4away\4test\0", 15); /* nothing to point at */

    rdseq_t a = {.len = 0};
    rd_add(&a, "\1\2\3\4", 4);
    rd_add(&a, "\1\2\3\5", 4);
    size_t at = w.len;
    assert_int_equal(wire_write_rrset(&w, WIRE_SEC_AN, (uint16_t)tgt, NULL, WIRE_T_A, 1, 2, a.b),
                     0);
    assert_memory_equal(buf + at, "\3far\4away\4test\0", 15);
    /* and the second owner is written out again (its first copy is out of pointer range) */
    assert_memory_equal(buf + at + 15 + 14, "\3far\4away\4test\0", 15);

    size_t len = wire_writer_finish(&w, true, false, 0);
    assert_pointers_backwards(buf, len);
    ldns_pkt *p = decode(buf, len);
    size_t n = ldns_rr_list_rr_count(ldns_pkt_answer(p));
    assert_int_equal(n, 5 * 15 + 3);
    assert_rr(ldns_rr_list_rr(ldns_pkt_answer(p), n - 1), "far.away.test", WIRE_T_A,
              (const uint8_t *)"\1\2\3\5", 4);
    ldns_pkt_free(p);
}

/*
 * Random RRsets of compressible and plain types with names from a small vocabulary (so there is
 * plenty to compress), written until the buffer is full; ldns must decode exactly what was
 * written. Deterministic PRNG so a failure reproduces.
 */
static uint32_t rng = 88172645u;
static uint32_t next_rand(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 17;
    rng ^= rng << 5;
    return rng;
}

static size_t random_name(uint8_t *out)
{
    static const char *labels[] = {"a", "www", "mail", "ns1", "example", "com", "net", "x-y"};
    static const char *tlds[] = {"com", "net", "org"};
    unsigned n = next_rand() % 4;
    size_t o = 0;
    for (unsigned i = 0; i < n; i++) {
        const char *l = labels[next_rand() % TERN_ARRAY_SIZE(labels)];
        out[o++] = (uint8_t)strlen(l);
        memcpy(out + o, l, strlen(l));
        o += strlen(l);
    }
    const char *t = tlds[next_rand() % TERN_ARRAY_SIZE(tlds)];
    out[o++] = (uint8_t)strlen(t);
    memcpy(out + o, t, strlen(t));
    o += strlen(t);
    out[o++] = 0;
    return o;
}

typedef struct expect_rr {
    uint8_t owner[256];
    uint16_t type;
    uint8_t rdata[300];
    size_t rdlen;
} expect_rr_t;

static void test_random_roundtrip(void **state)
{
    (void)state;
    static expect_rr_t exp[512];
    static const uint16_t types[] = {WIRE_T_NS,  WIRE_T_CNAME, WIRE_T_MX, WIRE_T_SOA,
                                     WIRE_T_PTR, WIRE_T_SRV,   WIRE_T_A,  WIRE_T_TXT};
    for (int iter = 0; iter < 300; iter++) {
        make_query(&q, qpkt, "www.example.com", WIRE_T_ANY, 0);
        size_t limit = 512 + next_rand() % 3000;
        wire_writer_init(&w, buf, limit, &q);
        size_t nexp = 0;
        for (int sec = 0; sec < 3; sec++) {
            for (;;) {
                uint8_t owner[256];
                random_name(owner);
                uint16_t type = types[next_rand() % TERN_ARRAY_SIZE(types)];
                unsigned count = 1 + next_rand() % 3;
                rdseq_t s = {.len = 0};
                uint8_t rd[300];
                size_t first = nexp;
                for (unsigned r = 0; r < count && nexp < TERN_ARRAY_SIZE(exp); r++) {
                    size_t l = 0;
                    switch (type) {
                    case WIRE_T_MX:
                        rd[0] = 0;
                        rd[1] = (uint8_t)r;
                        l = 2 + random_name(rd + 2);
                        break;
                    case WIRE_T_SRV:
                        memcpy(rd, "\0\1\0\2\0\3", 6);
                        l = 6 + random_name(rd + 6);
                        break;
                    case WIRE_T_SOA:
                        l = random_name(rd);
                        l += random_name(rd + l);
                        memset(rd + l, (int)r, 20);
                        l += 20;
                        break;
                    case WIRE_T_A:
                        memcpy(rd, "\x0a\0\0", 3);
                        rd[3] = (uint8_t)r;
                        l = 4;
                        break;
                    case WIRE_T_TXT:
                        rd[0] = 3;
                        memcpy(rd + 1, "ab", 2);
                        rd[3] = (uint8_t)('0' + r);
                        l = 4;
                        break;
                    default:
                        l = random_name(rd);
                    }
                    rd_add(&s, rd, l);
                    expect_rr_t *e = &exp[nexp++];
                    memcpy(e->owner, owner, dname_len(owner));
                    e->type = type;
                    memcpy(e->rdata, rd, l);
                    e->rdlen = l;
                }
                count = (unsigned)(nexp - first);
                if (count == 0)
                    break;
                /* owners: sometimes a pointer to the question or the last name */
                uint16_t owner_off = 0;
                unsigned how = next_rand() % 4;
                if (how == 0) {
                    owner_off = 12;
                    for (size_t i = first; i < nexp; i++)
                        memcpy(exp[i].owner, q.name.lc, q.name.len);
                } else if (how == 1 && w.last_name_off != 0) {
                    owner_off = w.last_name_off;
                    uint8_t n[256];
                    size_t nl = 0;
                    /* decode it independently: follow pointers in buf */
                    size_t p = owner_off;
                    for (int hops = 0; hops < 128; hops++) {
                        uint8_t l = buf[p];
                        if ((l & 0xC0) == 0xC0) {
                            p = rd16(buf + p) & 0x3FFF;
                            continue;
                        }
                        memcpy(n + nl, buf + p, (size_t)l + 1);
                        nl += (size_t)l + 1;
                        p += (size_t)l + 1;
                        if (l == 0)
                            break;
                    }
                    for (size_t i = first; i < nexp; i++)
                        memcpy(exp[i].owner, n, nl);
                }
                int rc = wire_write_rrset(&w, (wire_section_t)sec, owner_off,
                                          owner_off ? NULL : owner, type, 60, (uint16_t)count, s.b);
                if (rc == TERN_ENOSPC) {
                    nexp = first;
                    break;
                }
                assert_int_equal(rc, 0);
            }
        }
        size_t len = wire_writer_finish(&w, false, false, 0);
        assert_true(len <= limit);
        assert_pointers_backwards(buf, len);
        ldns_pkt *p = decode(buf, len);
        const ldns_rr_list *lists[3] = {ldns_pkt_answer(p), ldns_pkt_authority(p),
                                        ldns_pkt_additional(p)};
        size_t k = 0;
        for (int sec = 0; sec < 3; sec++) {
            for (size_t i = 0; i < ldns_rr_list_rr_count(lists[sec]); i++, k++) {
                assert_true(k < nexp);
                char owner[512];
                assert_true(dname_to_str(exp[k].owner, owner, sizeof(owner)) > 0);
                owner[strlen(owner) - 1] = 0; /* to_wire() takes names without the final dot */
                assert_rr(ldns_rr_list_rr(lists[sec], i), owner, exp[k].type, exp[k].rdata,
                          exp[k].rdlen);
            }
        }
        assert_int_equal(k, nexp);
        ldns_pkt_free(p);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_init_header_and_question),
        cmocka_unit_test(test_init_without_question),
        cmocka_unit_test(test_answer_pointer_to_question),
        cmocka_unit_test(test_cname_chain_compression),
        cmocka_unit_test(test_compression_label_boundaries),
        cmocka_unit_test(test_soa_mx_minfo_compressed),
        cmocka_unit_test(test_rrset_names_same_bytes),
        cmocka_unit_test(test_srv_dname_not_compressed),
        cmocka_unit_test(test_root_owner_and_class),
        cmocka_unit_test(test_rollback_on_enospc),
        cmocka_unit_test(test_limit_exact),
        cmocka_unit_test(test_reserve_and_opt),
        cmocka_unit_test(test_opt_with_ecs),
        cmocka_unit_test(test_opt_no_room),
        cmocka_unit_test(test_sections_forward_only),
        cmocka_unit_test(test_beyond_pointer_range),
        cmocka_unit_test(test_random_roundtrip),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
