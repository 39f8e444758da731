/* test_parse.c — wire_parse_query(): one test per rule of parse.h, and good queries. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "tern/wire/parse.h"

/* A tiny message builder: enough to hand-craft any malformation. */
typedef struct pkt {
    uint8_t b[1024];
    size_t len;
} pkt_t;

static void put8(pkt_t *p, unsigned v)
{
    assert_true(p->len < sizeof(p->b));
    p->b[p->len++] = (uint8_t)v;
}

static void put16(pkt_t *p, unsigned v)
{
    put8(p, v >> 8);
    put8(p, v & 0xFF);
}

static void put32(pkt_t *p, uint32_t v)
{
    put16(p, v >> 16);
    put16(p, v & 0xFFFF);
}

static void putmem(pkt_t *p, const void *m, size_t n)
{
    assert_true(p->len + n <= sizeof(p->b));
    if (n == 0)
        return; /* memcpy(NULL, 0) is undefined */
    memcpy(p->b + p->len, m, n);
    p->len += n;
}

/* "www.example.com" in wire form (no escapes). */
static void putname(pkt_t *p, const char *s)
{
    while (*s) {
        const char *dot = strchr(s, '.');
        size_t l = dot ? (size_t)(dot - s) : strlen(s);
        put8(p, (unsigned)l);
        putmem(p, s, l);
        s += l;
        if (*s == '.')
            s++;
    }
    put8(p, 0);
}

static void header(pkt_t *p, unsigned id, unsigned flags, unsigned qd, unsigned an, unsigned ns,
                   unsigned ar)
{
    p->len = 0;
    put16(p, id);
    put16(p, flags);
    put16(p, qd);
    put16(p, an);
    put16(p, ns);
    put16(p, ar);
}

/* The usual query: "www.Example.com A IN", RD set, id 0x1234, arcount as given. */
static void query(pkt_t *p, unsigned ar)
{
    header(p, 0x1234, WIRE_FLAG_RD, 1, 0, 0, ar);
    putname(p, "www.Example.com");
    put16(p, WIRE_T_A);
    put16(p, WIRE_CLASS_IN);
}

/* OPT header up to RDLENGTH; the caller appends rdlen bytes of options. */
static void opt(pkt_t *p, unsigned udp, unsigned version, bool do_bit, unsigned rdlen)
{
    put8(p, 0);
    put16(p, WIRE_T_OPT);
    put16(p, udp);
    put32(p, (uint32_t)version << 16 | (do_bit ? 0x8000u : 0));
    put16(p, rdlen);
}

/* An ECS option with the given fields and alen address bytes. */
static void ecs(pkt_t *p, unsigned family, unsigned source, unsigned scope, const uint8_t *addr,
                size_t alen)
{
    put16(p, WIRE_EDNS_ECS);
    put16(p, (unsigned)(4 + alen));
    put16(p, family);
    put8(p, source);
    put8(p, scope);
    putmem(p, addr, alen);
}

static wire_query_t q;

static wire_parse_result_t parse(const pkt_t *p)
{
    return wire_parse_query(&q, p->b, p->len);
}

/* ---- good queries ---- */

static void test_good_query(void **state)
{
    (void)state;
    pkt_t p;
    query(&p, 0);
    assert_int_equal(parse(&p), WIRE_OK);
    assert_int_equal(q.id, 0x1234);
    assert_int_equal(q.flags, WIRE_FLAG_RD);
    assert_true(q.has_question);
    assert_ptr_equal(q.qname, p.b + 12);
    assert_int_equal(q.question_len, 17 + 4);
    assert_int_equal(q.qtype, WIRE_T_A);
    assert_int_equal(q.qclass, WIRE_CLASS_IN);
    /* qname keeps the case as sent; the view is lowercased */
    assert_memory_equal(q.qname, "\3www\7Example\3com", 17);
    assert_memory_equal(q.name.lc, "\3www\7example\3com", 17);
    assert_int_equal(q.name.nlabels, 3);
    assert_int_equal(q.name.hash[0], dname_hash(q.name.lc));
    assert_false(q.has_edns);
    assert_false(q.has_ecs);
}

static void test_good_root_and_max_name(void **state)
{
    (void)state;
    pkt_t p;
    header(&p, 1, 0, 1, 0, 0, 0);
    put8(&p, 0);
    put16(&p, WIRE_T_NS);
    put16(&p, WIRE_CLASS_IN);
    assert_int_equal(parse(&p), WIRE_OK);
    assert_int_equal(q.name.nlabels, 0);
    assert_int_equal(q.question_len, 5);
    assert_int_equal(q.qtype, WIRE_T_NS);

    /* 255 bytes: three 63-byte labels, one of 61, root */
    header(&p, 1, 0, 1, 0, 0, 0);
    uint8_t lab[64];
    memset(lab, 'a', sizeof(lab));
    for (int i = 0; i < 3; i++) {
        put8(&p, 63);
        putmem(&p, lab, 63);
    }
    put8(&p, 61);
    putmem(&p, lab, 61);
    put8(&p, 0);
    put16(&p, WIRE_T_A);
    put16(&p, WIRE_CLASS_IN);
    assert_int_equal(parse(&p), WIRE_OK);
    assert_int_equal(q.name.len, 255);
}

/* ---- WIRE_DROP ---- */

static void test_short_is_dropped(void **state)
{
    (void)state;
    pkt_t p;
    query(&p, 0);
    for (size_t l = 0; l < 12; l++)
        assert_int_equal(wire_parse_query(&q, p.b, l), WIRE_DROP);
}

static void test_response_is_dropped(void **state)
{
    (void)state;
    pkt_t p;
    query(&p, 0);
    assert_int_equal(parse(&p), WIRE_OK);
    p.b[2] |= 0x80;
    assert_int_equal(parse(&p), WIRE_DROP);
    assert_false(q.has_question); /* nothing stale from the query before */
}

/* ---- question rules ---- */

static void test_qdcount_not_one(void **state)
{
    (void)state;
    pkt_t p;
    header(&p, 7, 0, 0, 0, 0, 0);
    assert_int_equal(parse(&p), WIRE_FORMERR);
    assert_false(q.has_question);
    assert_int_equal(q.id, 7);

    query(&p, 0);
    p.b[5] = 2; /* two questions, the second one present too */
    putname(&p, "example.com");
    put16(&p, WIRE_T_A);
    put16(&p, WIRE_CLASS_IN);
    assert_int_equal(parse(&p), WIRE_FORMERR);
    assert_false(q.has_question);
}

static void test_label_too_long(void **state)
{
    (void)state;
    pkt_t p;
    header(&p, 1, 0, 1, 0, 0, 0);
    uint8_t lab[64];
    memset(lab, 'a', sizeof(lab));
    put8(&p, 64);
    putmem(&p, lab, 64);
    put8(&p, 0);
    put16(&p, WIRE_T_A);
    put16(&p, WIRE_CLASS_IN);
    assert_int_equal(parse(&p), WIRE_FORMERR);
    assert_false(q.has_question);
}

static void test_name_too_long(void **state)
{
    (void)state;
    pkt_t p;
    header(&p, 1, 0, 1, 0, 0, 0);
    uint8_t lab[64];
    memset(lab, 'a', sizeof(lab));
    for (int i = 0; i < 3; i++) {
        put8(&p, 63);
        putmem(&p, lab, 63);
    }
    put8(&p, 62); /* 256 bytes with the root */
    putmem(&p, lab, 62);
    put8(&p, 0);
    put16(&p, WIRE_T_A);
    put16(&p, WIRE_CLASS_IN);
    assert_int_equal(parse(&p), WIRE_FORMERR);
    assert_false(q.has_question);
}

static void test_pointer_in_question(void **state)
{
    (void)state;
    pkt_t p;
    header(&p, 1, 0, 1, 0, 0, 0);
    put8(&p, 3);
    putmem(&p, "www", 3);
    put16(&p, 0xC000 | 12);
    put16(&p, WIRE_T_A);
    put16(&p, WIRE_CLASS_IN);
    assert_int_equal(parse(&p), WIRE_FORMERR);
    assert_false(q.has_question);

    p.b[12] = 0x40; /* extended label type */
    assert_int_equal(parse(&p), WIRE_FORMERR);
}

static void test_question_cut_short(void **state)
{
    (void)state;
    pkt_t p;
    query(&p, 0);
    for (size_t l = 12; l < p.len; l++) {
        assert_int_equal(wire_parse_query(&q, p.b, l), WIRE_FORMERR);
        assert_false(q.has_question);
    }
}

static void test_ancount_nscount(void **state)
{
    (void)state;
    pkt_t p;
    query(&p, 0);
    p.b[7] = 1;
    assert_int_equal(parse(&p), WIRE_FORMERR);
    assert_true(q.has_question); /* the error response echoes it */
    assert_int_equal(q.qtype, WIRE_T_A);

    query(&p, 0);
    p.b[9] = 1;
    assert_int_equal(parse(&p), WIRE_FORMERR);
    assert_true(q.has_question);
}

/* NOTIFY (RFC 1996) may carry the SOA in the answer section: walked, not an error. */
static void test_notify_answer_walked(void **state)
{
    (void)state;
    pkt_t p;
    header(&p, 9, WIRE_OP_NOTIFY << 11 | WIRE_FLAG_AA, 1, 1, 0, 0);
    putname(&p, "example.com");
    put16(&p, WIRE_T_SOA);
    put16(&p, WIRE_CLASS_IN);
    put16(&p, 0xC00C);
    put16(&p, WIRE_T_SOA);
    put16(&p, WIRE_CLASS_IN);
    put32(&p, 3600);
    put16(&p, 22);
    put8(&p, 0);
    put8(&p, 0);
    for (int i = 0; i < 5; i++)
        put32(&p, (uint32_t)i);
    assert_int_equal(parse(&p), WIRE_OK);
    assert_int_equal(WIRE_OPCODE(q.flags), WIRE_OP_NOTIFY);

    p.len--; /* the record cut short */
    assert_int_equal(parse(&p), WIRE_FORMERR);
    assert_true(q.has_question);
}

/* IXFR (RFC 1995 §3) carries the client's SOA in the authority section; a TSIG after it sets
 * has_tsig. Any other query with authority records, or an IXFR with two, is FORMERR. */
static void test_ixfr_authority_soa(void **state)
{
    (void)state;
    pkt_t p;
    header(&p, 9, 0, 1, 0, 1, 1);
    putname(&p, "example.com");
    put16(&p, WIRE_T_IXFR);
    put16(&p, WIRE_CLASS_IN);
    put16(&p, 0xC00C);
    put16(&p, WIRE_T_SOA);
    put16(&p, WIRE_CLASS_IN);
    put32(&p, 3600);
    put16(&p, 22);
    put8(&p, 0);
    put8(&p, 0);
    for (int i = 0; i < 5; i++)
        put32(&p, (uint32_t)i);
    /* a TSIG (its contents are tsig.c's to check) */
    putname(&p, "key");
    put16(&p, WIRE_T_TSIG);
    put16(&p, 255);
    put32(&p, 0);
    put16(&p, 0);
    assert_int_equal(parse(&p), WIRE_OK);
    assert_int_equal(q.qtype, WIRE_T_IXFR);
    assert_true(q.has_tsig);

    p.b[11] = 0; /* ARCOUNT 0 would leave the TSIG as trailing garbage */
    assert_int_equal(parse(&p), WIRE_FORMERR);
    p.b[11] = 1;
    p.b[9] = 2; /* two authority records */
    assert_int_equal(parse(&p), WIRE_FORMERR);
    p.b[9] = 1;
    /* the qtype follows "\7example\3com\0" (13 bytes): AXFR with an SOA in authority is no
     * query */
    p.b[12 + 13] = 0;
    p.b[12 + 14] = WIRE_T_AXFR & 0xFF;
    assert_int_equal(parse(&p), WIRE_FORMERR);
}

/* An OPT outside the additional section is not EDNS (RFC 6891 §6.1.1). */
static void test_opt_outside_additional(void **state)
{
    (void)state;
    pkt_t p;
    header(&p, 9, WIRE_OP_NOTIFY << 11, 1, 1, 0, 0);
    putname(&p, "example.com");
    put16(&p, WIRE_T_SOA);
    put16(&p, WIRE_CLASS_IN);
    opt(&p, 1232, 0, false, 0);
    assert_int_equal(parse(&p), WIRE_FORMERR);
}

static void test_trailing_bytes(void **state)
{
    (void)state;
    pkt_t p;
    query(&p, 0);
    put8(&p, 0);
    assert_int_equal(parse(&p), WIRE_FORMERR);
    assert_true(q.has_question);

    query(&p, 1);
    opt(&p, 1232, 0, false, 0);
    put16(&p, 0);
    assert_int_equal(parse(&p), WIRE_FORMERR);
    assert_true(q.has_question);
}

static void test_missing_additional(void **state)
{
    (void)state;
    pkt_t p;
    query(&p, 1); /* says one record, has none */
    assert_int_equal(parse(&p), WIRE_FORMERR);
    assert_true(q.has_question);
}

/* ---- EDNS ---- */

static void test_edns_fields(void **state)
{
    (void)state;
    pkt_t p;
    query(&p, 1);
    opt(&p, 4096, 0, true, 0);
    assert_int_equal(parse(&p), WIRE_OK);
    assert_true(q.has_edns);
    assert_true(q.edns_do);
    assert_int_equal(q.edns_version, 0);
    assert_int_equal(q.edns_udp_size, 4096);
    assert_false(q.has_ecs);

    query(&p, 1);
    opt(&p, 100, 0, false, 0); /* below 512: stored as sent, the answer module clamps */
    assert_int_equal(parse(&p), WIRE_OK);
    assert_false(q.edns_do);
    assert_int_equal(q.edns_udp_size, 100);
}

static void test_edns_reset_between_queries(void **state)
{
    (void)state;
    pkt_t p;
    static const uint8_t a[3] = {192, 0, 2};
    query(&p, 1);
    opt(&p, 1232, 0, true, 11);
    ecs(&p, 1, 24, 0, a, 3);
    assert_int_equal(parse(&p), WIRE_OK);
    assert_true(q.has_ecs);
    query(&p, 0);
    assert_int_equal(parse(&p), WIRE_OK);
    assert_false(q.has_edns);
    assert_false(q.has_ecs);
    assert_false(q.edns_do);
}

static void test_two_opt(void **state)
{
    (void)state;
    pkt_t p;
    query(&p, 2);
    opt(&p, 1232, 0, false, 0);
    opt(&p, 1232, 0, false, 0);
    assert_int_equal(parse(&p), WIRE_FORMERR);
    assert_true(q.has_question);
}

static void test_opt_owner_not_root(void **state)
{
    (void)state;
    pkt_t p;
    query(&p, 1);
    putname(&p, "example.com");
    put16(&p, WIRE_T_OPT);
    put16(&p, 1232);
    put32(&p, 0);
    put16(&p, 0);
    assert_int_equal(parse(&p), WIRE_FORMERR);
    assert_true(q.has_question);

    /* a pointer to the question name is not the root either */
    query(&p, 1);
    put16(&p, 0xC00C);
    put16(&p, WIRE_T_OPT);
    put16(&p, 1232);
    put32(&p, 0);
    put16(&p, 0);
    assert_int_equal(parse(&p), WIRE_FORMERR);

    /* but a pointer to the root byte that ends the question name is */
    query(&p, 1);
    put16(&p, 0xC000 | (12 + 16));
    put16(&p, WIRE_T_OPT);
    put16(&p, 1232);
    put32(&p, 0);
    put16(&p, 0);
    assert_int_equal(parse(&p), WIRE_OK);
    assert_true(q.has_edns);
}

static void test_badvers(void **state)
{
    (void)state;
    pkt_t p;
    query(&p, 1);
    opt(&p, 1400, 1, true, 0);
    assert_int_equal(parse(&p), WIRE_BADVERS);
    assert_true(q.has_question);
    assert_true(q.has_edns);
    assert_true(q.edns_do);
    assert_int_equal(q.edns_version, 1);
    assert_int_equal(q.edns_udp_size, 1400);

    /* the options of an unknown version have no format we know: not checked */
    query(&p, 1);
    opt(&p, 1232, 1, false, 3);
    put8(&p, 0xFF);
    put8(&p, 0xFF);
    put8(&p, 0xFF);
    assert_int_equal(parse(&p), WIRE_BADVERS);
    assert_false(q.has_ecs);

    /* a malformed message is FORMERR even with a new version */
    put8(&p, 0);
    assert_int_equal(parse(&p), WIRE_FORMERR);
}

static void test_option_bad_length(void **state)
{
    (void)state;
    pkt_t p;
    /* option length runs past the RDATA */
    query(&p, 1);
    opt(&p, 1232, 0, false, 6);
    put16(&p, 65001);
    put16(&p, 3);
    put16(&p, 0);
    assert_int_equal(parse(&p), WIRE_FORMERR);
    assert_true(q.has_question);

    /* three bytes left: not even an option header */
    query(&p, 1);
    opt(&p, 1232, 0, false, 7);
    put16(&p, 65001);
    put16(&p, 0);
    put16(&p, 0);
    put8(&p, 0);
    assert_int_equal(parse(&p), WIRE_FORMERR);

    /* RDLENGTH past the end of the message */
    query(&p, 1);
    opt(&p, 1232, 0, false, 8);
    put16(&p, 65001);
    put16(&p, 0);
    assert_int_equal(parse(&p), WIRE_FORMERR);
}

static void test_unknown_options_ignored(void **state)
{
    (void)state;
    pkt_t p;
    static const uint8_t cookie[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    query(&p, 1);
    opt(&p, 1232, 0, false, 4 + 8 + 4 + 0 + 4 + 3);
    put16(&p, WIRE_EDNS_COOKIE);
    put16(&p, 8);
    putmem(&p, cookie, 8);
    put16(&p, 12); /* padding, empty */
    put16(&p, 0);
    put16(&p, 65001);
    put16(&p, 3);
    putmem(&p, "xyz", 3);
    assert_int_equal(parse(&p), WIRE_OK);
    assert_true(q.has_edns);
    assert_false(q.has_ecs);
}

/* ---- ECS ---- */

static void test_ecs_v4(void **state)
{
    (void)state;
    pkt_t p;
    static const uint8_t a[3] = {192, 0, 2};
    query(&p, 1);
    opt(&p, 1232, 0, false, 11);
    ecs(&p, 1, 24, 0, a, 3);
    memset(&q.ecs, 0xEE, sizeof(q.ecs)); /* the padding must be written, not inherited */
    assert_int_equal(parse(&p), WIRE_OK);
    assert_true(q.has_ecs);
    assert_int_equal(q.ecs.family, 1);
    assert_int_equal(q.ecs.source_prefix, 24);
    assert_int_equal(q.ecs.scope_prefix, 0);
    static const uint8_t want[16] = {192, 0, 2};
    assert_memory_equal(q.ecs.addr, want, 16);
}

static void test_ecs_v6_and_zero_prefix(void **state)
{
    (void)state;
    pkt_t p;
    static const uint8_t a[7] = {0x20, 0x01, 0x0d, 0xb8, 0x12, 0x34, 0x56};
    query(&p, 1);
    opt(&p, 1232, 0, false, 15);
    ecs(&p, 2, 56, 0, a, 7);
    assert_int_equal(parse(&p), WIRE_OK);
    assert_true(q.has_ecs);
    assert_int_equal(q.ecs.family, 2);
    assert_int_equal(q.ecs.source_prefix, 56);
    uint8_t want[16] = {0};
    memcpy(want, a, 7);
    assert_memory_equal(q.ecs.addr, want, 16);

    /* /0: no address bytes at all (RFC 7871 §7.1.2 opt-out) */
    query(&p, 1);
    opt(&p, 1232, 0, false, 8);
    ecs(&p, 1, 0, 0, NULL, 0);
    assert_int_equal(parse(&p), WIRE_OK);
    assert_true(q.has_ecs);
    assert_int_equal(q.ecs.source_prefix, 0);

    /* /128 and /32: full addresses */
    uint8_t full[16];
    memset(full, 0xAB, sizeof(full));
    query(&p, 1);
    opt(&p, 1232, 0, false, 24);
    ecs(&p, 2, 128, 0, full, 16);
    assert_int_equal(parse(&p), WIRE_OK);
    assert_memory_equal(q.ecs.addr, full, 16);
    query(&p, 1);
    opt(&p, 1232, 0, false, 12);
    ecs(&p, 1, 32, 0, full, 4);
    assert_int_equal(parse(&p), WIRE_OK);
}

static void test_ecs_bad_family(void **state)
{
    (void)state;
    pkt_t p;
    static const uint8_t a[3] = {192, 0, 2};
    query(&p, 1);
    opt(&p, 1232, 0, false, 11);
    ecs(&p, 3, 24, 0, a, 3);
    assert_int_equal(parse(&p), WIRE_FORMERR);
    assert_true(q.has_question);
}

static void test_ecs_source_too_long(void **state)
{
    (void)state;
    pkt_t p;
    uint8_t a[17] = {0};
    query(&p, 1);
    opt(&p, 1232, 0, false, 13);
    ecs(&p, 1, 33, 0, a, 5);
    assert_int_equal(parse(&p), WIRE_FORMERR);

    query(&p, 1);
    opt(&p, 1232, 0, false, 25);
    ecs(&p, 2, 129, 0, a, 17);
    assert_int_equal(parse(&p), WIRE_FORMERR);
}

static void test_ecs_scope_nonzero(void **state)
{
    (void)state;
    pkt_t p;
    static const uint8_t a[3] = {192, 0, 2};
    query(&p, 1);
    opt(&p, 1232, 0, false, 11);
    ecs(&p, 1, 24, 24, a, 3);
    assert_int_equal(parse(&p), WIRE_FORMERR);
}

static void test_ecs_address_length(void **state)
{
    (void)state;
    pkt_t p;
    static const uint8_t a[4] = {192, 0, 2, 0};
    query(&p, 1); /* one byte too many */
    opt(&p, 1232, 0, false, 12);
    ecs(&p, 1, 24, 0, a, 4);
    assert_int_equal(parse(&p), WIRE_FORMERR);

    query(&p, 1); /* one byte too few */
    opt(&p, 1232, 0, false, 10);
    ecs(&p, 1, 24, 0, a, 2);
    assert_int_equal(parse(&p), WIRE_FORMERR);

    query(&p, 1); /* shorter than the fixed part */
    opt(&p, 1232, 0, false, 7);
    put16(&p, WIRE_EDNS_ECS);
    put16(&p, 3);
    put16(&p, 1);
    put8(&p, 0);
    assert_int_equal(parse(&p), WIRE_FORMERR);
}

static void test_ecs_bits_beyond_prefix(void **state)
{
    (void)state;
    pkt_t p;
    static const uint8_t bad[3] = {192, 0, 0x81}; /* /23: the last bit must be 0 */
    static const uint8_t good[3] = {192, 0, 0x80};
    query(&p, 1);
    opt(&p, 1232, 0, false, 11);
    ecs(&p, 1, 23, 0, bad, 3);
    assert_int_equal(parse(&p), WIRE_FORMERR);
    query(&p, 1);
    opt(&p, 1232, 0, false, 11);
    ecs(&p, 1, 17, 0, good, 3);
    assert_int_equal(parse(&p), WIRE_OK);
    assert_int_equal(q.ecs.addr[2], 0x80);
}

static void test_two_ecs(void **state)
{
    (void)state;
    pkt_t p;
    static const uint8_t a[3] = {192, 0, 2};
    query(&p, 1);
    opt(&p, 1232, 0, false, 22);
    ecs(&p, 1, 24, 0, a, 3);
    ecs(&p, 1, 24, 0, a, 3);
    assert_int_equal(parse(&p), WIRE_FORMERR);
}

/* ---- compressed names in the additional section ---- */

/* A TSIG-like record owned by pointer `ptr` (raw 16-bit value), then an empty OPT. */
static void query_with_ptr_owner(pkt_t *p, unsigned ptr)
{
    query(p, 2);
    put16(p, ptr);
    put16(p, WIRE_T_TSIG);
    put16(p, WIRE_CLASS_ANY);
    put32(p, 0);
    put16(p, 0);
    opt(p, 1232, 0, false, 0);
}

static void test_additional_compressed_ok(void **state)
{
    (void)state;
    pkt_t p;
    query_with_ptr_owner(&p, 0xC00C);
    assert_int_equal(parse(&p), WIRE_OK);
    assert_true(q.has_edns);
    /* a label then a pointer to a suffix of the question */
    query(&p, 1);
    put8(&p, 1);
    put8(&p, 'k');
    put16(&p, 0xC000 | (12 + 4)); /* "Example.com" */
    put16(&p, WIRE_T_TXT);
    put16(&p, WIRE_CLASS_IN);
    put32(&p, 0);
    put16(&p, 0);
    assert_int_equal(parse(&p), WIRE_OK);
}

static void test_additional_bad_pointers(void **state)
{
    (void)state;
    pkt_t p;
    size_t at;
    /* forward: points past itself */
    query_with_ptr_owner(&p, 0xC000 | 60);
    assert_int_equal(parse(&p), WIRE_FORMERR);
    assert_true(q.has_question);
    /* to itself */
    query(&p, 1);
    at = p.len;
    put16(&p, 0xC000 | (unsigned)at);
    put16(&p, WIRE_T_TXT);
    put16(&p, WIRE_CLASS_IN);
    put32(&p, 0);
    put16(&p, 0);
    assert_int_equal(parse(&p), WIRE_FORMERR);
    /* into the header */
    query_with_ptr_owner(&p, 0xC000 | 4);
    assert_int_equal(parse(&p), WIRE_FORMERR);
    /* a pointer cut in half at the end of the message */
    query(&p, 1);
    put8(&p, 0xC0);
    assert_int_equal(parse(&p), WIRE_FORMERR);
    /* 0x40 / 0x80 label types */
    query_with_ptr_owner(&p, 0x4000);
    assert_int_equal(parse(&p), WIRE_FORMERR);
    query_with_ptr_owner(&p, 0x8000);
    assert_int_equal(parse(&p), WIRE_FORMERR);
}

static void test_additional_pointer_loop(void **state)
{
    (void)state;
    pkt_t p;
    /* record 1 owner: label "a" then a pointer to record 2's owner (forward); record 2 owner: a
     * pointer back to record 1's owner. Walking record 2 would loop a -> r2 -> a. */
    query(&p, 2);
    size_t r1 = p.len;
    put8(&p, 1);
    put8(&p, 'a');
    size_t fix = p.len;
    put16(&p, 0); /* patched below */
    put16(&p, WIRE_T_TXT);
    put16(&p, WIRE_CLASS_IN);
    put32(&p, 0);
    put16(&p, 0);
    size_t r2 = p.len;
    put16(&p, 0xC000 | (unsigned)r1);
    put16(&p, WIRE_T_TXT);
    put16(&p, WIRE_CLASS_IN);
    put32(&p, 0);
    put16(&p, 0);
    p.b[fix] = (uint8_t)(0xC0 | r2 >> 8);
    p.b[fix + 1] = (uint8_t)r2;
    assert_int_equal(parse(&p), WIRE_FORMERR);

    /* a label followed by a pointer to its own start: an endless "a.a.a..." */
    query(&p, 1);
    size_t self = p.len;
    put8(&p, 1);
    put8(&p, 'a');
    put16(&p, 0xC000 | (unsigned)self);
    put16(&p, WIRE_T_TXT);
    put16(&p, WIRE_CLASS_IN);
    put32(&p, 0);
    put16(&p, 0);
    assert_int_equal(parse(&p), WIRE_FORMERR);
}

static void test_additional_name_too_long(void **state)
{
    (void)state;
    pkt_t p;
    uint8_t lab[63];
    memset(lab, 'z', sizeof(lab));
    /* 4 * 64 bytes of labels before a pointer: over 255 once expanded */
    query(&p, 1);
    for (int i = 0; i < 4; i++) {
        put8(&p, 63);
        putmem(&p, lab, 63);
    }
    put16(&p, 0xC00C);
    put16(&p, WIRE_T_TXT);
    put16(&p, WIRE_CLASS_IN);
    put32(&p, 0);
    put16(&p, 0);
    assert_int_equal(parse(&p), WIRE_FORMERR);
    /* 3 * 64 + 17 is fine */
    query(&p, 1);
    for (int i = 0; i < 3; i++) {
        put8(&p, 63);
        putmem(&p, lab, 63);
    }
    put16(&p, 0xC00C);
    put16(&p, WIRE_T_TXT);
    put16(&p, WIRE_CLASS_IN);
    put32(&p, 0);
    put16(&p, 0);
    assert_int_equal(parse(&p), WIRE_OK);
}

static void test_additional_rdlength_past_end(void **state)
{
    (void)state;
    pkt_t p;
    query(&p, 1);
    put8(&p, 0);
    put16(&p, WIRE_T_TXT);
    put16(&p, WIRE_CLASS_IN);
    put32(&p, 0);
    put16(&p, 5);
    putmem(&p, "\4abc", 4);
    assert_int_equal(parse(&p), WIRE_FORMERR);
    /* fixed part cut short */
    query(&p, 1);
    put8(&p, 0);
    put16(&p, WIRE_T_TXT);
    put16(&p, WIRE_CLASS_IN);
    put32(&p, 0);
    put8(&p, 0);
    assert_int_equal(parse(&p), WIRE_FORMERR);
}

/* Every prefix of a good EDNS+ECS query is malformed (the counts promise more), never OK. */
static void test_every_truncation(void **state)
{
    (void)state;
    pkt_t p;
    static const uint8_t a[3] = {198, 51, 100};
    query(&p, 1);
    opt(&p, 1232, 0, true, 11);
    ecs(&p, 1, 24, 0, a, 3);
    assert_int_equal(parse(&p), WIRE_OK);
    for (size_t l = 0; l < p.len; l++) {
        wire_parse_result_t r = wire_parse_query(&q, p.b, l);
        assert_int_equal(r, l < 12 ? WIRE_DROP : WIRE_FORMERR);
    }
}

/* Random corruption must never read out of bounds (ASan watches) and an OK result must have a
 * sane question. Deterministic xorshift so a failure reproduces. */
static void test_random_corruption(void **state)
{
    (void)state;
    pkt_t base;
    static const uint8_t a[3] = {198, 51, 100};
    query(&base, 2);
    put16(&base, 0xC00C);
    put16(&base, WIRE_T_TSIG);
    put16(&base, WIRE_CLASS_ANY);
    put32(&base, 0);
    put16(&base, 0);
    opt(&base, 1232, 0, true, 11);
    ecs(&base, 1, 24, 0, a, 3);
    assert_int_equal(parse(&base), WIRE_OK);

    uint32_t x = 2463534242u;
    for (int iter = 0; iter < 200000; iter++) {
        uint8_t buf[sizeof(base.b)];
        size_t len = base.len;
        memcpy(buf, base.b, len);
        int flips = 1 + iter % 4;
        for (int f = 0; f < flips; f++) {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            buf[x % len] = (uint8_t)(x >> 8);
        }
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        if (iter % 3 == 0)
            len = x % (len + 1);
        /* exact-size heap copy so ASan sees any read past the end */
        uint8_t *heap = test_malloc(len ? len : 1);
        memcpy(heap, buf, len);
        wire_parse_result_t r = wire_parse_query(&q, heap, len);
        if (r == WIRE_OK || r == WIRE_BADVERS) {
            assert_true(q.has_question);
            assert_true(q.question_len >= 5 && 12 + q.question_len <= len);
        }
        test_free(heap);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_good_query),
        cmocka_unit_test(test_good_root_and_max_name),
        cmocka_unit_test(test_short_is_dropped),
        cmocka_unit_test(test_response_is_dropped),
        cmocka_unit_test(test_qdcount_not_one),
        cmocka_unit_test(test_label_too_long),
        cmocka_unit_test(test_name_too_long),
        cmocka_unit_test(test_pointer_in_question),
        cmocka_unit_test(test_question_cut_short),
        cmocka_unit_test(test_ancount_nscount),
        cmocka_unit_test(test_notify_answer_walked),
        cmocka_unit_test(test_ixfr_authority_soa),
        cmocka_unit_test(test_opt_outside_additional),
        cmocka_unit_test(test_trailing_bytes),
        cmocka_unit_test(test_missing_additional),
        cmocka_unit_test(test_edns_fields),
        cmocka_unit_test(test_edns_reset_between_queries),
        cmocka_unit_test(test_two_opt),
        cmocka_unit_test(test_opt_owner_not_root),
        cmocka_unit_test(test_badvers),
        cmocka_unit_test(test_option_bad_length),
        cmocka_unit_test(test_unknown_options_ignored),
        cmocka_unit_test(test_ecs_v4),
        cmocka_unit_test(test_ecs_v6_and_zero_prefix),
        cmocka_unit_test(test_ecs_bad_family),
        cmocka_unit_test(test_ecs_source_too_long),
        cmocka_unit_test(test_ecs_scope_nonzero),
        cmocka_unit_test(test_ecs_address_length),
        cmocka_unit_test(test_ecs_bits_beyond_prefix),
        cmocka_unit_test(test_two_ecs),
        cmocka_unit_test(test_additional_compressed_ok),
        cmocka_unit_test(test_additional_bad_pointers),
        cmocka_unit_test(test_additional_pointer_loop),
        cmocka_unit_test(test_additional_name_too_long),
        cmocka_unit_test(test_additional_rdlength_past_end),
        cmocka_unit_test(test_every_truncation),
        cmocka_unit_test(test_random_corruption),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
