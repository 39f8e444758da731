/*
 * test_xfr_in.c — incoming transfers (xfr_in.h).
 *
 * Against a real primary: a knotd started on a free loopback port in a scratch directory serves
 * example.test. (some 6,000 records, several TCP messages); the test's own small TCP client
 * fetches an AXFR, which must equal the zone file as tern loads it; the zone is changed through
 * knotc in two transactions (RRs added, removed, an RRset's TTL changed); an IXFR from the first
 * serial, applied to the first version, must equal a fresh AXFR; an IXFR from the newest serial is
 * "up to date". Every wait is bounded; knotd is stopped by its PID.
 *
 * Crafted streams: every rule of the message checks, AXFR and IXFR state machines, with the exact
 * error each one gives (truncation, ids, RCODEs, questions, names outside the zone, compression
 * pointers forward, looping or into the header, missing closing SOA, a broken delta chain, old
 * serials, a removal of an absent record, max_bytes), and the semantics of applying several
 * deltas (re-added and re-removed RRs, TTLs, case). The zone writer round trip, and the apply
 * time on a zone of 150,000 names with a small delta (printed).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <ldns/ldns.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "knot_server.h"
#include "test_util.h"

#include "tern/common/err.h"
#include "tern/wire/dname.h"
#include "tern/wire/rdata.h"
#include "tern/wire/rr.h"
#include "tern/xfr/xfr_in.h"
#include "tern/zone/zone.h"
#include "tern/zone/zone_builder.h"
#include "tern/zone/zone_file.h"

/* How long one socket operation of a transfer may block (knotd answers a few hundred KB in
 * milliseconds). */
#define XFR_IO_MS 5000

static uint8_t origin[DNAME_MAXLEN];

static void wname(uint8_t *dst, const char *s)
{
    const char *why;
    assert_true(dname_from_str(s, strlen(s), false, dst, &why) > 0);
}

/* ---- comparing zones: same names, same RRsets, same TTLs, same RRs (canonical RDATA) ---- */

struct rd {
    const uint8_t *p;
    uint16_t len;
    uint16_t type;
};

static int cmp_rd(const void *a, const void *b)
{
    const struct rd *x = a, *y = b;
    uint8_t cx[UINT16_MAX], cy[UINT16_MAX];
    if (x->len != y->len)
        return x->len < y->len ? -1 : 1;
    wire_rdata_canon(x->type, x->p, x->len, cx);
    wire_rdata_canon(y->type, y->p, y->len, cy);
    return memcmp(cx, cy, x->len);
}

static void sorted_rrs(const zone_rrset_t *s, struct rd *out)
{
    const uint8_t *p = s->rdata;
    for (unsigned k = 0; k < s->count; k++) {
        out[k] = (struct rd){p + 2, (uint16_t)(p[0] << 8 | p[1]), s->type};
        p += 2 + out[k].len;
    }
    qsort(out, s->count, sizeof(*out), cmp_rd);
}

/* Every node of a is in b with the same RRsets; with equal node counts, the zones are equal. */
static void assert_zones_equal(const zone_t *a, const zone_t *b)
{
    char nb[DNAME_MAXLEN * 4 + 1];
    assert_int_equal(a->serial, b->serial);
    for (size_t i = 0; i < a->node_count; i++) {
        const zone_node_t *n = zone_node_at(a, (uint32_t)i);
        const zone_node_t *m = zone_find_node(b, n->name, n->name_len, dname_hash(n->name));
        (void)dname_to_str(n->name, nb, sizeof(nb));
        if (!m)
            fail_msg("%s missing", nb);
        if (n->nrrsets != m->nrrsets)
            fail_msg("%s: %u RRsets, %u", nb, n->nrrsets, m->nrrsets);
        for (unsigned j = 0; j < n->nrrsets; j++) {
            const zone_rrset_t *s = &n->rrsets[j], *t = &m->rrsets[j];
            if (s->type != t->type || s->ttl != t->ttl || s->count != t->count)
                fail_msg("%s: type %u ttl %u count %u, type %u ttl %u count %u", nb, s->type,
                         s->ttl, s->count, t->type, t->ttl, t->count);
            struct rd *x = calloc(s->count, sizeof(*x)), *y = calloc(s->count, sizeof(*y));
            assert_true(x && y);
            sorted_rrs(s, x);
            sorted_rrs(t, y);
            for (unsigned k = 0; k < s->count; k++)
                if (cmp_rd(&x[k], &y[k]) != 0)
                    fail_msg("%s type %u: RR %u differs", nb, s->type, k);
            free(x);
            free(y);
        }
    }
    assert_int_equal(a->node_count, b->node_count);
}

/* A zone from master-file text, through tern's own loader. */
static zone_t *zone_from_text(const char *text)
{
    char dir[64], path[128], err[512];
    tu_mkdtemp(dir, sizeof(dir), "tern-xfrin");
    tu_write_file(dir, "z.zone", text);
    snprintf(path, sizeof(path), "%s/z.zone", dir);
    zone_t *z = NULL;
    int rc = zone_file_load("example.test.", path, &z, err, sizeof(err));
    if (rc < 0)
        fail_msg("%s", err);
    tu_rmtree(dir);
    return z;
}

/* ---- crafting response messages ---- */

struct msg {
    uint8_t b[65535];
    size_t len;
    uint16_t qd, an, ns, ar;
};

#define FLAGS_OK 0x8400 /* QR, AA, RCODE NOERROR */

static void put16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)(v >> 8);
    p[1] = (uint8_t)v;
}

/* A response header; a question for qname/qtype unless qname is NULL. */
static void msg_start(struct msg *m, uint16_t id, uint16_t flags, const char *qname, uint16_t qtype)
{
    memset(m, 0, sizeof(*m));
    put16(m->b, id);
    put16(m->b + 2, flags);
    m->len = 12;
    if (qname) {
        wname(m->b + m->len, qname);
        m->len += dname_len(m->b + m->len);
        put16(m->b + m->len, qtype);
        put16(m->b + m->len + 2, WIRE_CLASS_IN);
        m->len += 4;
        m->qd = 1;
    }
}

/* Raw bytes counted as one record of the answer section. */
static void msg_raw(struct msg *m, const void *p, size_t n)
{
    memcpy(m->b + m->len, p, n);
    m->len += n;
    m->an++;
}

/* One RR from presentation text ("www.example.test. 300 IN A 192.0.2.1"), uncompressed. */
static void msg_rr(struct msg *m, const char *text)
{
    ldns_rr *rr = NULL;
    if (ldns_rr_new_frm_str(&rr, text, 3600, NULL, NULL) != LDNS_STATUS_OK)
        fail_msg("bad RR text %s", text);
    ldns_buffer *buf = ldns_buffer_new(512);
    assert_int_equal(ldns_rr2buffer_wire(buf, rr, LDNS_SECTION_ANSWER), LDNS_STATUS_OK);
    msg_raw(m, ldns_buffer_begin(buf), ldns_buffer_position(buf));
    ldns_buffer_free(buf);
    ldns_rr_free(rr);
}

/* One RR at www.example.test. (TTL 300, class IN) with RDATA given in hex, whatever ldns thinks
 * of it. */
static void msg_www_hex(struct msg *m, uint16_t type, const char *hex)
{
    uint8_t rr[300];
    size_t n = 0;
    wname(rr, "www.example.test.");
    n = dname_len(rr);
    size_t rdlen = strlen(hex) / 2;
    const uint8_t fixed[10] = {(uint8_t)(type >> 8), (uint8_t)type, 0, 1, 0, 0, 1, 0x2C, 0,
                               (uint8_t)rdlen};
    memcpy(rr + n, fixed, 10);
    n += 10;
    for (size_t i = 0; i < rdlen; i++) {
        unsigned v;
        assert_int_equal(sscanf(hex + 2 * i, "%2x", &v), 1);
        rr[n++] = (uint8_t)v;
    }
    msg_raw(m, rr, n);
}

/* An apex SOA with this serial. */
static void msg_soa(struct msg *m, uint32_t serial)
{
    char t[200];
    snprintf(t, sizeof(t),
             "example.test. 3600 IN SOA ns1.example.test. hostmaster.example.test. %u 7200 900 "
             "1209600 300",
             serial);
    msg_rr(m, t);
}

static size_t msg_end(struct msg *m)
{
    put16(m->b + 4, m->qd);
    put16(m->b + 6, m->an);
    put16(m->b + 8, m->ns);
    put16(m->b + 10, m->ar);
    return m->len;
}

static char err[1024];

static int feed(xfr_in_t *x, struct msg *m)
{
    err[0] = 0;
    return xfr_in_feed(x, m->b, msg_end(m), err, sizeof(err));
}

static void assert_err(const char *want)
{
    if (!strstr(err, want))
        fail_msg("error \"%s\" does not contain \"%s\"", err, want);
}

#define ID 0x1234

/* The version the crafted IXFRs apply to: serial 5. */
static const char have_text[] = "$ORIGIN example.test.\n"
                                "@ 3600 SOA ns1 hostmaster 5 7200 900 1209600 300\n"
                                "@ 3600 NS ns1\n"
                                "ns1 3600 A 192.0.2.1\n"
                                "www 300 A 192.0.2.9\n"
                                "www 300 A 192.0.2.10\n"
                                "mail 300 MX 10 ns1\n";

static zone_t *have;

static int group_setup(void **state)
{
    (void)state;
    wname(origin, "example.test.");
    have = zone_from_text(have_text);
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    zone_free(have);
    return 0;
}

static xfr_in_t *new_x(uint16_t qtype, const zone_t *h, size_t max_bytes)
{
    xfr_in_t *x = xfr_in_new(origin, qtype, h, max_bytes, "primary test");
    assert_non_null(x);
    xfr_in_set_id(x, ID);
    return x;
}

/* ---- crafted AXFR ---- */

/* A complete AXFR over two messages (the second without a question), a duplicate RR merged. */
static void test_axfr_ok(void **state)
{
    (void)state;
    struct msg m;
    xfr_in_t *x = new_x(WIRE_T_AXFR, NULL, 0);
    msg_start(&m, ID, FLAGS_OK, "example.test.", WIRE_T_AXFR);
    msg_soa(&m, 9);
    msg_rr(&m, "example.test. 3600 IN NS ns1.example.test.");
    msg_rr(&m, "ns1.example.test. 3600 IN A 192.0.2.1");
    assert_int_equal(feed(x, &m), 1);
    msg_start(&m, ID, FLAGS_OK, NULL, 0);
    msg_rr(&m, "WWW.example.test. 300 IN A 192.0.2.9");
    msg_rr(&m, "www.example.test. 300 IN A 192.0.2.9");
    msg_rr(&m, "mail.example.test. 300 IN MX 10 NS1.example.test.");
    msg_soa(&m, 9);
    assert_int_equal(feed(x, &m), 0);
    assert_int_equal(xfr_in_kind(x), XFR_IN_FULL);
    assert_int_equal(xfr_in_serial(x), 9);
    assert_int_equal(xfr_in_messages(x), 2);
    assert_int_equal(xfr_in_records(x), 7);
    zone_t *z;
    assert_int_equal(xfr_in_finish(x, &z, err, sizeof(err)), 0);
    zone_t *want = zone_from_text("$ORIGIN example.test.\n"
                                  "@ 3600 SOA ns1 hostmaster 9 7200 900 1209600 300\n"
                                  "@ 3600 NS ns1\n"
                                  "ns1 3600 A 192.0.2.1\n"
                                  "www 300 A 192.0.2.9\n"
                                  "mail 300 MX 10 ns1\n");
    assert_zones_equal(z, want);
    assert_string_equal(z->source, "primary test");
    zone_t *again = (zone_t *)1;
    assert_int_equal(xfr_in_finish(x, &again, err, sizeof(err)), TERN_EINVAL); /* built already */
    assert_null(again);
    assert_err("built already");
    /* a feed after the end */
    msg_start(&m, ID, FLAGS_OK, NULL, 0);
    msg_soa(&m, 9);
    assert_int_equal(feed(x, &m), TERN_EINVAL);
    assert_err("after the end of the transfer");
    zone_free(want);
    zone_free(z);
    xfr_in_free(x);
}

/* An AXFR whose body is valid so far: SOA, NS, A (no closing SOA). */
static void axfr_body(struct msg *m, uint16_t id)
{
    msg_start(m, id, FLAGS_OK, "example.test.", WIRE_T_AXFR);
    msg_soa(m, 9);
    msg_rr(m, "example.test. 3600 IN NS ns1.example.test.");
    msg_rr(m, "ns1.example.test. 3600 IN A 192.0.2.1");
}

static void test_axfr_missing_closing_soa(void **state)
{
    (void)state;
    struct msg m;
    xfr_in_t *x = new_x(WIRE_T_AXFR, NULL, 0);
    axfr_body(&m, ID);
    assert_int_equal(feed(x, &m), 1); /* more expected: the caller's timeout ends it */
    zone_t *z = (zone_t *)1;
    assert_int_equal(xfr_in_finish(x, &z, err, sizeof(err)), TERN_EINVAL);
    assert_null(z);
    assert_non_null(strstr(err, "not complete"));
    xfr_in_free(x);
}

static void test_truncated(void **state)
{
    (void)state;
    struct msg m;
    xfr_in_t *x = new_x(WIRE_T_AXFR, NULL, 0);
    axfr_body(&m, ID);
    size_t len = msg_end(&m);
    assert_int_equal(xfr_in_feed(x, m.b, len - 3, err, sizeof(err)), TERN_EMALF);
    /* the A record is the last: its owner (18 bytes), type to RDLENGTH (10), RDATA (4) */
    size_t a_off = len - (dname_len((const uint8_t *)"\3ns1\7example\4test") + 10 + 4);
    char want[64];
    snprintf(want, sizeof(want), "message 1: truncated record at offset %zu", a_off);
    assert_err(want);
    assert_err("primary test: ");
    /* every later feed fails too */
    assert_int_equal(xfr_in_feed(x, m.b, len, err, sizeof(err)), TERN_EINVAL);
    assert_err("already failed");
    xfr_in_free(x);

    x = new_x(WIRE_T_AXFR, NULL, 0);
    assert_int_equal(xfr_in_feed(x, m.b, 11, err, sizeof(err)), TERN_EMALF);
    assert_err("truncated header (11 bytes)");
    xfr_in_free(x);

    /* cut inside an owner name, and trailing garbage */
    x = new_x(WIRE_T_AXFR, NULL, 0);
    assert_int_equal(xfr_in_feed(x, m.b, a_off + 2, err, sizeof(err)), TERN_EMALF);
    assert_err("truncated name");
    xfr_in_free(x);
    x = new_x(WIRE_T_AXFR, NULL, 0);
    m.b[len] = 0;
    assert_int_equal(xfr_in_feed(x, m.b, len + 1, err, sizeof(err)), TERN_EMALF);
    assert_err("1 bytes after the last record");
    xfr_in_free(x);
}

static void test_header_errors(void **state)
{
    (void)state;
    struct msg m;
    static const struct {
        uint16_t id, flags;
        const char *qname;
        uint16_t qtype;
        const char *want;
    } cases[] = {
        {ID + 1, FLAGS_OK, "example.test.", WIRE_T_AXFR,
         "message 1: id 4661, the query's was 4660"},
        {ID, 0x8409, "example.test.", WIRE_T_AXFR, "message 1: RCODE NOTAUTH"},
        {ID, 0x8405, "example.test.", WIRE_T_AXFR, "message 1: RCODE REFUSED"},
        {ID, 0x0400, "example.test.", WIRE_T_AXFR, "QR not set"},
        {ID, 0x8000 | 4 << 11, "example.test.", WIRE_T_AXFR, "opcode 4"},
        {ID, FLAGS_OK, "other.test.", WIRE_T_AXFR, "the question is other.test. AXFR"},
        {ID, FLAGS_OK, "example.test.", WIRE_T_IXFR, "not example.test. AXFR IN"},
    };
    for (size_t i = 0; i < TERN_ARRAY_SIZE(cases); i++) {
        xfr_in_t *x = new_x(WIRE_T_AXFR, NULL, 0);
        msg_start(&m, cases[i].id, cases[i].flags, cases[i].qname, cases[i].qtype);
        msg_soa(&m, 9);
        int rc = feed(x, &m);
        assert_true(rc == TERN_EINVAL);
        assert_err(cases[i].want);
        xfr_in_free(x);
    }
    /* a first message without records, two questions */
    xfr_in_t *x = new_x(WIRE_T_AXFR, NULL, 0);
    msg_start(&m, ID, FLAGS_OK, "example.test.", WIRE_T_AXFR);
    assert_int_equal(feed(x, &m), TERN_EINVAL);
    assert_err("no records in the answer");
    xfr_in_free(x);
    x = new_x(WIRE_T_AXFR, NULL, 0);
    msg_start(&m, ID, FLAGS_OK, "example.test.", WIRE_T_AXFR);
    m.qd = 2;
    assert_int_equal(feed(x, &m), TERN_EMALF);
    assert_err("2 questions");
    xfr_in_free(x);
    /* the RCODE's upper bits in an OPT (BADVERS) */
    x = new_x(WIRE_T_AXFR, NULL, 0);
    axfr_body(&m, ID);
    static const uint8_t opt[] = {0, 0, 41, 4, 0, 1, 0, 0, 0, 0, 0}; /* extended RCODE 1 */
    memcpy(m.b + m.len, opt, sizeof(opt));
    m.len += sizeof(opt);
    m.ar = 1;
    assert_int_equal(feed(x, &m), TERN_EINVAL);
    assert_err("RCODE 16"); /* BADVERS: 1 << 4 | 0 */
    xfr_in_free(x);
}

static void test_record_errors(void **state)
{
    (void)state;
    struct msg m;
    static const struct {
        const char *first, *second;
        int rc;
        const char *want;
        uint16_t hex_type; /* instead of second: this type at www with RDATA hex */
        const char *hex;
    } cases[] = {
        {.first = "example.test. 3600 IN NS ns1.example.test.",
         .rc = TERN_EINVAL,
         .want = "message 1: first record is not the SOA of example.test."},
        {.first = "sub.example.test. 3600 IN SOA a.example.test. b.example.test. 1 2 3 4 5",
         .rc = TERN_EINVAL,
         .want = "SOA record at sub.example.test., not at the apex"},
        {.second = "www.other.test. 300 IN A 192.0.2.1",
         .rc = TERN_EOUTZONE,
         .want = "record outside the zone example.test.: www.other.test. A"},
        {.second = "www.example.test. 300 CH A 192.0.2.1",
         .rc = TERN_EINVAL,
         .want = "of class 3 (only IN)"},
        {.hex_type = WIRE_T_IXFR,
         .hex = "",
         .rc = TERN_EINVAL,
         .want = "type IXFR is not zone data"},
        {.hex_type = 41, .hex = "", .rc = TERN_EINVAL, .want = "type OPT is not zone data"},
        {.hex_type = WIRE_T_A,
         .hex = "010203",
         .rc = TERN_EINVAL,
         .want = "malformed RDATA for type 1"},
        {.hex_type = WIRE_T_MX, .hex = "000a01", .rc = TERN_EMALF, .want = "truncated name"},
        {.hex_type = WIRE_T_MX, .hex = "000a0000", .rc = TERN_EMALF, .want = "malformed MX RDATA"},
        {.hex_type = WIRE_T_MX, .hex = "00", .rc = TERN_EMALF, .want = "malformed MX RDATA"},
        {.hex_type = WIRE_T_SOA,
         .hex = "0000000000",
         .rc = TERN_EMALF,
         .want = "malformed SOA RDATA"},
    };
    for (size_t i = 0; i < TERN_ARRAY_SIZE(cases); i++) {
        xfr_in_t *x = new_x(WIRE_T_AXFR, NULL, 0);
        msg_start(&m, ID, FLAGS_OK, "example.test.", WIRE_T_AXFR);
        if (cases[i].first)
            msg_rr(&m, cases[i].first);
        else
            msg_soa(&m, 9);
        if (cases[i].second)
            msg_rr(&m, cases[i].second);
        if (cases[i].hex)
            msg_www_hex(&m, cases[i].hex_type, cases[i].hex);
        int rc = feed(x, &m);
        if (rc != cases[i].rc)
            fail_msg("case %zu: %d (%s)", i, rc, err);
        assert_err(cases[i].want);
        xfr_in_free(x);
    }
    /* records after the closing SOA; a closing SOA with another serial */
    xfr_in_t *x = new_x(WIRE_T_AXFR, NULL, 0);
    axfr_body(&m, ID);
    msg_soa(&m, 9);
    msg_rr(&m, "www.example.test. 300 IN A 192.0.2.1");
    assert_int_equal(feed(x, &m), TERN_EINVAL);
    assert_err("1 records after the closing SOA");
    xfr_in_free(x);
    x = new_x(WIRE_T_AXFR, NULL, 0);
    axfr_body(&m, ID);
    msg_soa(&m, 10);
    assert_int_equal(feed(x, &m), TERN_EINVAL);
    assert_err("closing SOA has serial 10, the opening one 9");
    xfr_in_free(x);
    /* the builder's validation at finish: CNAME beside other data */
    x = new_x(WIRE_T_AXFR, NULL, 0);
    axfr_body(&m, ID);
    msg_rr(&m, "ns1.example.test. 300 IN CNAME www.example.test.");
    msg_soa(&m, 9);
    assert_int_equal(feed(x, &m), 0);
    zone_t *z;
    assert_int_equal(xfr_in_finish(x, &z, err, sizeof(err)), TERN_ECNAME);
    assert_err("CNAME and other data");
    xfr_in_free(x);
}

/* An AXFR older than the version served is refused; an equal one is a forced retransfer. */
static void test_axfr_old_serial(void **state)
{
    (void)state;
    struct msg m;
    xfr_in_t *x = new_x(WIRE_T_AXFR, have, 0);
    msg_start(&m, ID, FLAGS_OK, "example.test.", WIRE_T_AXFR);
    msg_soa(&m, 4);
    assert_int_equal(feed(x, &m), TERN_EINVAL);
    assert_err("serial 4 is older than the version served (5)");
    xfr_in_free(x);
    x = new_x(WIRE_T_AXFR, have, 0);
    msg_start(&m, ID, FLAGS_OK, "example.test.", WIRE_T_AXFR);
    msg_soa(&m, 5);
    assert_int_equal(feed(x, &m), 1);
    xfr_in_free(x);
    /* RFC 1982: 5 is newer than 4294967290 */
    zone_t *h = zone_from_text("@ 3600 SOA ns1 hostmaster 4294967290 7200 900 1209600 300\n"
                               "@ 3600 NS ns1\nns1 A 192.0.2.1\n");
    x = new_x(WIRE_T_AXFR, h, 0);
    msg_start(&m, ID, FLAGS_OK, "example.test.", WIRE_T_AXFR);
    msg_soa(&m, 5);
    assert_int_equal(feed(x, &m), 1);
    xfr_in_free(x);
    zone_free(h);
}

/* max_bytes counts message bytes: a primary sending empty messages (header and question only,
 * nothing for the memory count) is cut off too. */
static void test_max_bytes(void **state)
{
    (void)state;
    struct msg m;
    xfr_in_t *x = new_x(WIRE_T_AXFR, NULL, 2000);
    axfr_body(&m, ID);
    size_t total = msg_end(&m);
    assert_int_equal(feed(x, &m), 1);
    int rc = 1;
    for (int i = 0; i < 200 && rc == 1; i++) {
        msg_start(&m, ID, FLAGS_OK, "example.test.", WIRE_T_AXFR);
        total += msg_end(&m);
        rc = feed(x, &m);
    }
    assert_int_equal(rc, TERN_ELIMIT);
    assert_err("transfer larger than max_bytes (2000)");
    assert_int_equal(xfr_in_bytes(x), total);
    assert_true(total > 2000);
    xfr_in_free(x);
}

/* max_bytes counts what the zone will cost in memory, not just the messages: a transfer whose
 * records would take more than max_bytes once built fails while its messages are still far
 * smaller (a 2M-record AXFR peaked at 5.5 times its message bytes). */
static void test_max_bytes_memory(void **state)
{
    (void)state;
    struct msg m;
    xfr_in_t *x = new_x(WIRE_T_AXFR, NULL, 4000);
    axfr_body(&m, ID);
    assert_int_equal(feed(x, &m), 1);
    int rc = 1;
    for (int i = 0; i < 100 && rc == 1; i++) {
        char rr[80];
        msg_start(&m, ID, FLAGS_OK, NULL, 0);
        snprintf(rr, sizeof(rr), "h%d.example.test. 300 IN A 192.0.2.9", i);
        msg_rr(&m, rr);
        rc = feed(x, &m);
    }
    assert_int_equal(rc, TERN_ELIMIT);
    assert_err("the zone would take more than max_bytes (4000) in memory");
    assert_true(xfr_in_memory(x) > 4000);
    assert_true(xfr_in_bytes(x) < 4000 / 2);
    xfr_in_free(x);
}

/* An IXFR builds the new version whole beside `have`: one against a zone whose footprint is past
 * max_bytes fails when applied, whatever the size of its deltas. */
static void test_max_bytes_ixfr_rebuild(void **state)
{
    (void)state;
    struct msg m;
    zone_t *h = zone_from_text(have_text);
    size_t max = zone_footprint(h); /* less than 3/2 of it */
    xfr_in_t *x = new_x(WIRE_T_IXFR, h, max);
    msg_start(&m, ID, FLAGS_OK, "example.test.", WIRE_T_IXFR);
    msg_soa(&m, 6);
    msg_soa(&m, 5);
    msg_soa(&m, 6);
    msg_rr(&m, "new.example.test. 300 IN A 192.0.2.77");
    msg_soa(&m, 6);
    assert_int_equal(feed(x, &m), 0);
    assert_int_equal(xfr_in_kind(x), XFR_IN_INCREMENTAL);
    zone_t *z = (zone_t *)1;
    assert_int_equal(xfr_in_finish(x, &z, err, sizeof(err)), TERN_ELIMIT);
    assert_null(z);
    assert_err("applying the IXFR would take more than max_bytes");
    xfr_in_free(x);
    /* with room for it, the same IXFR applies */
    x = new_x(WIRE_T_IXFR, h, 4 * max);
    assert_int_equal(feed(x, &m), 0);
    assert_int_equal(xfr_in_finish(x, &z, err, sizeof(err)), 0);
    assert_int_equal(z->serial, 6);
    zone_free(z);
    xfr_in_free(x);
    zone_free(h);
}

/* Compression: backwards pointers are followed (names inside MX and SOA RDATA too); forward
 * pointers, pointers to themselves, loops and pointers into the header are refused. */
static void test_compression(void **state)
{
    (void)state;
    struct msg m;
    xfr_in_t *x = new_x(WIRE_T_AXFR, NULL, 0);
    msg_start(&m, ID, FLAGS_OK, "example.test.", WIRE_T_AXFR); /* name at 12 */
    /* SOA: owner -> 12; mname "ns1" -> 12; rname "hostmaster" -> 12 */
    uint8_t soa[] = {0xC0, 12,  0,   6,    0,  1,    0,    0,   0x0E, 0x10, 0,   39,   3,
                     'n',  's', '1', 0xC0, 12, 10,   'h',  'o', 's',  't',  'm', 'a',  's',
                     't',  'e', 'r', 0xC0, 12, 0,    0,    0,   9,    0,    0,   0x1C, 0x20,
                     0,    0,   3,   0x84, 0,  0x12, 0x75, 0,   0,    0,    1,   0x2C};
    size_t soa_at = m.len;
    msg_raw(&m, soa, sizeof(soa));
    /* NS: owner -> 12, target -> the SOA's mname (soa_at + 12) */
    uint8_t ns[] = {0xC0, 12, 0, 2, 0, 1, 0, 0, 0x0E, 0x10, 0, 2, 0xC0, (uint8_t)(soa_at + 12)};
    msg_raw(&m, ns, sizeof(ns));
    /* A for ns1: owner -> the SOA's mname */
    uint8_t a[] = {0xC0, (uint8_t)(soa_at + 12), 0, 1, 0, 1, 0, 0, 0x0E, 0x10, 0, 4, 192, 0, 2, 1};
    msg_raw(&m, a, sizeof(a));
    /* MX: owner "mail" -> 12, exchange -> mname */
    uint8_t mx[] = {4,    'm', 'a', 'i', 'l', 0xC0, 12,
                    0,    15,  0,   1,   0,   0,    1,
                    0x2C, 0,   4,   0,   10,  0xC0, (uint8_t)(soa_at + 12)};
    msg_raw(&m, mx, sizeof(mx));
    msg_raw(&m, soa, sizeof(soa));
    assert_int_equal(feed(x, &m), 0);
    zone_t *z;
    assert_int_equal(xfr_in_finish(x, &z, err, sizeof(err)), 0);
    zone_t *want = zone_from_text("$ORIGIN example.test.\n"
                                  "@ 3600 SOA ns1 hostmaster 9 7200 900 1209600 300\n"
                                  "@ 3600 NS ns1\n"
                                  "ns1 3600 A 192.0.2.1\n"
                                  "mail 300 MX 10 ns1\n");
    assert_zones_equal(z, want);
    zone_free(z);
    zone_free(want);
    xfr_in_free(x);

    /* the bad pointers, each as the owner of the record after the SOA */
    for (int k = 0; k < 5; k++) {
        x = new_x(WIRE_T_AXFR, NULL, 0);
        msg_start(&m, ID, FLAGS_OK, "example.test.", WIRE_T_AXFR);
        msg_soa(&m, 9);
        size_t at = m.len;
        uint8_t rr[64];
        size_t n = 0;
        const char *want_err;
        switch (k) {
        case 0: /* forward: into its own record */
            rr[n++] = 0xC0, rr[n++] = (uint8_t)(at + 2);
            want_err = "does not point backwards";
            break;
        case 1: /* itself */
            rr[n++] = 0xC0, rr[n++] = (uint8_t)at;
            want_err = "does not point backwards";
            break;
        case 2: /* a label, then back to the start of its own name: a loop */
            rr[n++] = 1, rr[n++] = 'x', rr[n++] = 0xC0, rr[n++] = (uint8_t)at;
            want_err = "does not point backwards";
            break;
        case 3: /* into the header */
            rr[n++] = 0xC0, rr[n++] = 4;
            want_err = "points into the header (4)";
            break;
        default: /* a reserved label type */
            rr[n++] = 0x80, rr[n++] = 12;
            want_err = "bad label type 0x80";
            break;
        }
        static const uint8_t fixed[] = {0, 1, 0, 1, 0, 0, 0, 60, 0, 4, 192, 0, 2, 1};
        memcpy(rr + n, fixed, sizeof(fixed));
        n += sizeof(fixed);
        msg_raw(&m, rr, n);
        assert_true(feed(x, &m) == TERN_EMALF);
        assert_err(want_err);
        xfr_in_free(x);
    }

    /* a loop through two names: each points to the other */
    x = new_x(WIRE_T_AXFR, NULL, 0);
    msg_start(&m, ID, FLAGS_OK, "example.test.", WIRE_T_AXFR);
    msg_soa(&m, 9);
    size_t at = m.len;
    /* NS RR: owner -> 12; RDATA: "a" then a pointer to the target of the next RR */
    uint8_t two[] = {0xC0, 12, 0, 2, 0, 1, 0, 0, 0, 60, 0, 4, 1, 'a', 0xC0, 0};
    two[15] = (uint8_t)(at + sizeof(two) + 12);
    msg_raw(&m, two, sizeof(two));
    uint8_t back[] = {0xC0, 12, 0, 2, 0, 1, 0, 0, 0, 60, 0, 4, 1, 'b', 0xC0, (uint8_t)(at + 12)};
    msg_raw(&m, back, sizeof(back));
    assert_true(feed(x, &m) == TERN_EMALF);
    assert_err("does not point backwards");
    xfr_in_free(x);
}

/* ---- crafted IXFR ---- */

static void ixfr_start(struct msg *m, uint32_t serial)
{
    msg_start(m, ID, FLAGS_OK, "example.test.", WIRE_T_IXFR);
    msg_soa(m, serial);
}

static void test_ixfr_up_to_date(void **state)
{
    (void)state;
    struct msg m;
    for (uint32_t serial = 4; serial <= 5; serial++) {
        xfr_in_t *x = new_x(WIRE_T_IXFR, have, 0);
        ixfr_start(&m, serial);
        assert_int_equal(feed(x, &m), 0);
        assert_int_equal(xfr_in_kind(x), XFR_IN_UP_TO_DATE);
        assert_int_equal(xfr_in_serial(x), serial);
        zone_t *z;
        assert_int_equal(xfr_in_finish(x, &z, err, sizeof(err)), TERN_EINVAL);
        assert_err("up to date");
        xfr_in_free(x);
    }
    /* a newer single SOA: the rest may come in the next message */
    xfr_in_t *x = new_x(WIRE_T_IXFR, have, 0);
    ixfr_start(&m, 6);
    assert_int_equal(feed(x, &m), 1);
    xfr_in_free(x);
    /* no IXFR without a version to apply it to */
    assert_null(xfr_in_new(origin, WIRE_T_IXFR, NULL, 0, "p"));
    assert_null(xfr_in_new(origin, WIRE_T_A, NULL, 0, "p"));
}

static void test_ixfr_serial_backwards(void **state)
{
    (void)state;
    struct msg m;
    xfr_in_t *x = new_x(WIRE_T_IXFR, have, 0);
    ixfr_start(&m, 3);
    msg_soa(&m, 5);
    msg_soa(&m, 3);
    msg_soa(&m, 3);
    assert_int_equal(feed(x, &m), TERN_EINVAL);
    assert_err("IXFR: serial went backwards: 3 is not newer than the version served (5)");
    xfr_in_free(x);
}

static void test_ixfr_chain_gap(void **state)
{
    (void)state;
    struct msg m;
    xfr_in_t *x = new_x(WIRE_T_IXFR, have, 0);
    ixfr_start(&m, 8);
    msg_soa(&m, 4);
    assert_int_equal(feed(x, &m), TERN_EINVAL);
    assert_err("IXFR: delta 1 starts at serial 4, not at the version served (5)");
    xfr_in_free(x);

    x = new_x(WIRE_T_IXFR, have, 0);
    ixfr_start(&m, 8);
    msg_soa(&m, 5);
    msg_rr(&m, "www.example.test. 300 IN A 192.0.2.9");
    msg_soa(&m, 6);
    msg_rr(&m, "www.example.test. 300 IN A 192.0.2.11");
    assert_int_equal(feed(x, &m), 1);
    msg_start(&m, ID, FLAGS_OK, NULL, 0);
    msg_soa(&m, 7); /* delta 2 should start at 6 */
    assert_int_equal(feed(x, &m), TERN_EINVAL);
    assert_err("message 2: IXFR: delta 2 starts at serial 7, delta 1 ended at 6");
    xfr_in_free(x);

    /* the chain ends short of the opening serial: 8 is neither 6 nor the final SOA */
    x = new_x(WIRE_T_IXFR, have, 0);
    ixfr_start(&m, 8);
    msg_soa(&m, 5);
    msg_soa(&m, 6);
    msg_soa(&m, 8);
    assert_int_equal(feed(x, &m), TERN_EINVAL);
    assert_err("delta 2 starts at serial 8, delta 1 ended at 6");
    xfr_in_free(x);
}

static void test_ixfr_remove_absent(void **state)
{
    (void)state;
    struct msg m;
    xfr_in_t *x = new_x(WIRE_T_IXFR, have, 0);
    ixfr_start(&m, 7);
    msg_soa(&m, 5);
    msg_soa(&m, 6);
    msg_soa(&m, 6);
    msg_rr(&m, "www.example.test. 300 IN A 192.0.2.99");
    assert_int_equal(feed(x, &m), TERN_EINVAL);
    assert_err("IXFR: delta 2 removes a record that is not in the zone: www.example.test. A "
               "192.0.2.99");
    xfr_in_free(x);

    /* removed twice: the second time it is not there any more */
    x = new_x(WIRE_T_IXFR, have, 0);
    ixfr_start(&m, 7);
    msg_soa(&m, 5);
    msg_rr(&m, "www.example.test. 300 IN A 192.0.2.9");
    msg_soa(&m, 6);
    msg_soa(&m, 6);
    msg_rr(&m, "www.example.test. 300 IN A 192.0.2.9");
    assert_int_equal(feed(x, &m), TERN_EINVAL);
    assert_err("delta 2 removes a record that is not in the zone: www.example.test. A 192.0.2.9");
    xfr_in_free(x);

    /* another type at an existing name, and a name the zone does not have */
    x = new_x(WIRE_T_IXFR, have, 0);
    ixfr_start(&m, 6);
    msg_soa(&m, 5);
    msg_rr(&m, "www.example.test. 300 IN TXT \"x\"");
    assert_int_equal(feed(x, &m), TERN_EINVAL);
    assert_err("delta 1 removes a record that is not in the zone: www.example.test. TXT \"x\"");
    xfr_in_free(x);
    x = new_x(WIRE_T_IXFR, have, 0);
    ixfr_start(&m, 6);
    msg_soa(&m, 5);
    msg_rr(&m, "nope.example.test. 300 IN A 192.0.2.9");
    assert_int_equal(feed(x, &m), TERN_EINVAL);
    assert_err("nope.example.test. A 192.0.2.9");
    xfr_in_free(x);
}

/* Three deltas: RRs removed from `have` (names in any case), added, added and removed again,
 * removed and added back, an RRset's TTL changed, a name gone, the apex changed. */
static void test_ixfr_apply(void **state)
{
    (void)state;
    struct msg m;
    xfr_in_t *x = new_x(WIRE_T_IXFR, have, 0);
    ixfr_start(&m, 8);
    /* 5 -> 6 */
    msg_soa(&m, 5);
    msg_rr(&m, "WWW.Example.TEST. 300 IN A 192.0.2.10");
    msg_rr(&m, "mail.example.test. 300 IN MX 10 NS1.EXAMPLE.TEST.");
    msg_soa(&m, 6);
    msg_rr(&m, "new.example.test. 60 IN TXT \"added then removed\"");
    msg_rr(&m, "new.example.test. 60 IN TXT \"stays\"");
    msg_rr(&m, "example.test. 3600 IN NS ns2.example.test.");
    msg_rr(&m, "ns2.example.test. 3600 IN A 192.0.2.2");
    assert_int_equal(feed(x, &m), 1);
    /* 6 -> 7, in a message without a question */
    msg_start(&m, ID, FLAGS_OK, NULL, 0);
    msg_soa(&m, 6);
    msg_rr(&m, "new.example.test. 60 IN TXT \"added then removed\"");
    msg_rr(&m, "example.test. 3600 IN NS ns1.example.test.");
    msg_soa(&m, 7);
    msg_rr(&m, "www.example.test. 300 IN A 192.0.2.10"); /* back again */
    assert_int_equal(feed(x, &m), 1);
    /* 7 -> 8: the TTL of www's A RRset becomes 60 (all removed, all added) */
    msg_start(&m, ID, FLAGS_OK, NULL, 0);
    msg_soa(&m, 7);
    msg_rr(&m, "www.example.test. 300 IN A 192.0.2.9");
    msg_rr(&m, "www.example.test. 300 IN A 192.0.2.10");
    msg_rr(&m, "ns1.example.test. 3600 IN A 192.0.2.1");
    msg_soa(&m, 8);
    msg_rr(&m, "www.example.test. 60 IN A 192.0.2.9");
    msg_rr(&m, "www.example.test. 60 IN A 192.0.2.10");
    msg_rr(&m, "ns1.example.test. 3600 IN AAAA 2001:db8::1");
    msg_soa(&m, 8);
    assert_int_equal(feed(x, &m), 0);
    assert_int_equal(xfr_in_kind(x), XFR_IN_INCREMENTAL);
    assert_int_equal(xfr_in_serial(x), 8);
    zone_t *z;
    if (xfr_in_finish(x, &z, err, sizeof(err)) < 0)
        fail_msg("%s", err);
    zone_t *want = zone_from_text("$ORIGIN example.test.\n"
                                  "@ 3600 SOA ns1 hostmaster 8 7200 900 1209600 300\n"
                                  "@ 3600 NS ns2\n"
                                  "ns1 3600 AAAA 2001:db8::1\n"
                                  "ns2 3600 A 192.0.2.2\n"
                                  "www 60 A 192.0.2.9\n"
                                  "www 60 A 192.0.2.10\n"
                                  "new 60 TXT \"stays\"\n");
    assert_zones_equal(z, want);
    zone_free(z);
    zone_free(want);
    xfr_in_free(x);

    /* an RR added to an RRset that keeps its other RRs: the RRset takes the added RR's TTL */
    x = new_x(WIRE_T_IXFR, have, 0);
    ixfr_start(&m, 6);
    msg_soa(&m, 5);
    msg_soa(&m, 6);
    msg_rr(&m, "www.example.test. 900 IN A 192.0.2.11"); /* higher: min() alone would keep 300 */
    msg_soa(&m, 6);
    assert_int_equal(feed(x, &m), 0);
    assert_int_equal(xfr_in_finish(x, &z, err, sizeof(err)), 0);
    want = zone_from_text("$ORIGIN example.test.\n"
                          "@ 3600 SOA ns1 hostmaster 6 7200 900 1209600 300\n"
                          "@ 3600 NS ns1\n"
                          "ns1 3600 A 192.0.2.1\n"
                          "www 900 A 192.0.2.9\n"
                          "www 900 A 192.0.2.10\n"
                          "www 900 A 192.0.2.11\n"
                          "mail 300 MX 10 ns1\n");
    assert_zones_equal(z, want);
    zone_free(z);
    zone_free(want);
    xfr_in_free(x);

    /* an RR added that the zone already holds, then removed by the next delta: gone */
    x = new_x(WIRE_T_IXFR, have, 0);
    ixfr_start(&m, 7);
    msg_soa(&m, 5);
    msg_soa(&m, 6);
    msg_rr(&m, "www.example.test. 300 IN A 192.0.2.9");
    msg_soa(&m, 6);
    msg_rr(&m, "www.example.test. 300 IN A 192.0.2.9");
    msg_soa(&m, 7);
    msg_soa(&m, 7);
    assert_int_equal(feed(x, &m), 0);
    assert_int_equal(xfr_in_finish(x, &z, err, sizeof(err)), 0);
    want = zone_from_text("$ORIGIN example.test.\n"
                          "@ 3600 SOA ns1 hostmaster 7 7200 900 1209600 300\n"
                          "@ 3600 NS ns1\n"
                          "ns1 3600 A 192.0.2.1\n"
                          "www 300 A 192.0.2.10\n"
                          "mail 300 MX 10 ns1\n");
    assert_zones_equal(z, want);
    zone_free(z);
    zone_free(want);
    xfr_in_free(x);

    /* a delta that breaks the zone fails at finish, with the builder's message */
    x = new_x(WIRE_T_IXFR, have, 0);
    ixfr_start(&m, 6);
    msg_soa(&m, 5);
    msg_rr(&m, "example.test. 3600 IN NS ns1.example.test.");
    msg_soa(&m, 6);
    msg_soa(&m, 6);
    assert_int_equal(feed(x, &m), 0);
    assert_int_equal(xfr_in_finish(x, &z, err, sizeof(err)), TERN_ENONS);
    assert_err("no NS record at the apex");
    xfr_in_free(x);
}

/* An IXFR answered AXFR-style (RFC 1995 §4): the second record is not an SOA. */
static void test_ixfr_axfr_style(void **state)
{
    (void)state;
    struct msg m;
    xfr_in_t *x = new_x(WIRE_T_IXFR, have, 0);
    ixfr_start(&m, 9);
    assert_int_equal(feed(x, &m), 1);
    msg_start(&m, ID, FLAGS_OK, NULL, 0);
    msg_rr(&m, "example.test. 3600 IN NS ns1.example.test.");
    msg_rr(&m, "ns1.example.test. 3600 IN A 192.0.2.1");
    msg_soa(&m, 9);
    assert_int_equal(feed(x, &m), 0);
    assert_int_equal(xfr_in_kind(x), XFR_IN_FULL);
    zone_t *z;
    assert_int_equal(xfr_in_finish(x, &z, err, sizeof(err)), 0);
    assert_int_equal(z->serial, 9);
    assert_int_equal(z->node_count, 2);
    zone_free(z);
    xfr_in_free(x);
}

/* ---- the zone writer ---- */

static void test_write_file(void **state)
{
    (void)state;
    zone_t *z = zone_from_text(
        "$ORIGIN example.test.\n"
        "$TTL 300\n"
        "@ SOA ns1 hostmaster 42 7200 900 1209600 300\n"
        "@ NS ns1\n"
        "@ MX 10 Mail\n"
        "@ TXT \"v=spf1 -all\" \"two; strings \\\"quoted\\\" (parens)\"\n"
        "@ CAA 0 issue \"ca.example\"\n"
        "ns1 A 192.0.2.1\n"
        "ns1 AAAA 2001:db8::1\n"
        "mail 60 A 192.0.2.2\n"
        "*.wild TXT \"\\000binary\\255\"\n"
        "_sip._udp SRV 10 5 5060 ns1\n"
        "a\\032b\\.c HINFO \"cpu\" \"os\"\n"
        "naptr NAPTR 100 10 \"u\" \"E2U+sip\" \"!^.*$!sip:a@example.test!\" .\n"
        "tlsa TLSA 3 1 1 0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef\n"
        "ds DS 12345 8 2 0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef\n"
        "sshfp SSHFP 1 1 0123456789abcdef0123456789abcdef01234567\n"
        "svc HTTPS 1 . alpn=h2,h3 port=8443\n"
        "unk TYPE65000 \\# 3 abcdef\n"
        "empty TYPE65001 \\# 0\n"
        "short TYPE43 \\# 2 1234\n" /* a DS ldns prints as "DS 4660" and cannot read back */
        "alias ANAME www.other.test.\n"
        "sub NS ns.sub\n"
        "ns.sub A 192.0.2.53\n"
        "dn DNAME other.test.\n");
    char dir[64], path[128], e[512];
    tu_mkdtemp(dir, sizeof(dir), "tern-xfrin-w");
    snprintf(path, sizeof(path), "%s/example.test.zone", dir);
    tu_write_file(dir, "example.test.zone", "old content\n");
    assert_int_equal(xfr_zone_write_file(z, path, e, sizeof(e)), 0);
    zone_t *back = NULL;
    if (zone_file_load("example.test", path, &back, e, sizeof(e)) < 0)
        fail_msg("%s", e);
    assert_zones_equal(z, back);
    assert_zones_equal(back, z);
    /* the SOA is the first record; ldns's form, but RFC 3597's where ldns's does not read back */
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    char line[512];
    do
        assert_non_null(fgets(line, sizeof(line), f));
    while (line[0] == ';');
    assert_non_null(strstr(line, "\tSOA\t"));
    bool generic = false, hinfo = false;
    while (fgets(line, sizeof(line), f)) {
        generic |= strcmp(line, "short.example.test.\t300\tIN\tTYPE43\t\\# 2 1234\n") == 0;
        hinfo |= strstr(line, "\tHINFO\t\"cpu\" \"os\"") != NULL;
        assert_null(strstr(line, "\tSOA\t"));
    }
    fclose(f);
    assert_true(generic);
    assert_true(hinfo);
    /* readable by others; no temporary left */
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0644);
    char cmd[200];
    snprintf(cmd, sizeof(cmd), "test $(ls '%s' | wc -l) -eq 1", dir);
    assert_int_equal(system(cmd), 0);
    zone_free(back);

    /* a directory that does not exist: an error naming the path, nothing written */
    snprintf(path, sizeof(path), "%s/missing/example.test.zone", dir);
    assert_true(xfr_zone_write_file(z, path, e, sizeof(e)) < 0);
    assert_non_null(strstr(e, path));
    tu_rmtree(dir);
    zone_free(z);
}

/* ---- applying a small delta to a large zone ---- */

#ifndef BIG_NAMES
#define BIG_NAMES 150000
#endif

static void test_ixfr_apply_large(void **state)
{
    (void)state;
    int64_t t0 = tu_now_ms();
    zone_builder_t *b = zone_builder_new(origin, "big");
    assert_non_null(b);
    uint8_t owner[DNAME_MAXLEN], rd[600];
    char name[64];
    wname(owner, "ns1.example.test.");
    struct msg m;
    msg_start(&m, 0, 0, NULL, 0);
    msg_soa(&m, 5); /* borrow the SOA RDATA: after owner (14), fixed (10) */
    size_t soa_len = m.len - 12 - 14 - 10;
    assert_int_equal(zone_builder_add(b, origin, WIRE_T_SOA, 1, 3600, m.b + 12 + 14 + 10,
                                      (uint16_t)soa_len, NULL, 0),
                     0);
    assert_int_equal(zone_builder_add(b, origin, WIRE_T_NS, 1, 3600, owner, 18, NULL, 0), 0);
    for (unsigned i = 0; i < BIG_NAMES; i++) {
        snprintf(name, sizeof(name), "h%u.example.test.", i);
        wname(owner, name);
        rd[0] = 10, rd[1] = (uint8_t)(i >> 16), rd[2] = (uint8_t)(i >> 8), rd[3] = (uint8_t)i;
        assert_int_equal(zone_builder_add(b, owner, WIRE_T_A, 1, 300, rd, 4, NULL, 0), 0);
    }
    wname(owner, "ns1.example.test.");
    rd[0] = 192, rd[1] = 0, rd[2] = 2, rd[3] = 1;
    assert_int_equal(zone_builder_add(b, owner, WIRE_T_A, 1, 3600, rd, 4, NULL, 0), 0);
    zone_t *big;
    assert_int_equal(zone_builder_finish(b, &big, err, sizeof(err)), 0);
    int64_t build_ms = tu_now_ms() - t0;

    /* 5 -> 6: ten names lose their A, ten get a second one, ten new names */
    xfr_in_t *x = new_x(WIRE_T_IXFR, big, 0);
    ixfr_start(&m, 6);
    msg_soa(&m, 5);
    char t[128];
    for (unsigned i = 0; i < 10; i++) {
        snprintf(t, sizeof(t), "h%u.example.test. 300 IN A 10.%u.%u.%u", i * 1000, 0,
                 (i * 1000) >> 8 & 255, i * 1000 & 255);
        msg_rr(&m, t);
    }
    msg_soa(&m, 6);
    for (unsigned i = 0; i < 10; i++) {
        snprintf(t, sizeof(t), "h%u.example.test. 300 IN A 10.9.9.%u", i * 1000 + 1, i);
        msg_rr(&m, t);
        snprintf(t, sizeof(t), "n%u.example.test. 300 IN A 10.8.8.%u", i, i);
        msg_rr(&m, t);
    }
    msg_soa(&m, 6);
    t0 = tu_now_ms();
    assert_int_equal(feed(x, &m), 0);
    zone_t *z;
    assert_int_equal(xfr_in_finish(x, &z, err, sizeof(err)), 0);
    int64_t apply_ms = tu_now_ms() - t0;
    xfr_in_free(x);
    print_message("IXFR apply, %u names, 30 RRs changed: %lld ms (a build of the zone from "
                  "scratch: %lld ms)\n",
                  BIG_NAMES, (long long)apply_ms, (long long)build_ms);

    assert_int_equal(z->serial, 6);
    assert_int_equal(z->node_count, big->node_count + 10 - 10);
    wname(owner, "h1000.example.test.");
    assert_null(zone_find_node(z, owner, dname_len(owner), dname_hash(owner)));
    wname(owner, "h1001.example.test.");
    const zone_node_t *n = zone_find_node(z, owner, dname_len(owner), dname_hash(owner));
    assert_non_null(n);
    assert_int_equal(zone_node_rrset(n, WIRE_T_A)->count, 2);
    wname(owner, "n9.example.test.");
    assert_non_null(zone_find_node(z, owner, dname_len(owner), dname_hash(owner)));
    assert_int_equal(z->rr_count, big->rr_count + 10);

    /* the secondary's on-disk copy of it, and the same zone read back */
    char dir[64], path[128], e[512];
    tu_mkdtemp(dir, sizeof(dir), "tern-xfrin-big");
    snprintf(path, sizeof(path), "%s/big.zone", dir);
    t0 = tu_now_ms();
    assert_int_equal(xfr_zone_write_file(z, path, e, sizeof(e)), 0);
    int64_t write_ms = tu_now_ms() - t0;
    zone_t *back = NULL;
    t0 = tu_now_ms();
    if (zone_file_load("example.test.", path, &back, e, sizeof(e)) < 0)
        fail_msg("%s", e);
    print_message("zone file of it: written in %lld ms, loaded in %lld ms\n", (long long)write_ms,
                  (long long)(tu_now_ms() - t0));
    assert_zones_equal(back, z);
    zone_free(back);
    tu_rmtree(dir);
    zone_free(z);
    zone_free(big);
}

/* ---- a real primary: knotd ---- */

static knot_server_t knot;
static zone_t *knot_v1; /* the first version, as transferred */

/* The served zone: ~6,000 records, TXT strings long enough for several 64 KB messages. */
static char *knot_zone_text(void)
{
    size_t cap = 1 << 20, o = 0;
    char *t = malloc(cap);
    assert_non_null(t);
    o += (size_t)snprintf(t + o, cap - o,
                          "$ORIGIN example.test.\n"
                          "$TTL 3600\n"
                          "@ SOA ns1 hostmaster 1 7200 900 1209600 300\n"
                          "@ NS ns1\n"
                          "@ NS ns2.other.test.\n"
                          "@ MX 10 mail\n"
                          "ns1 A 192.0.2.1\n"
                          "mail A 192.0.2.2\n"
                          "www CNAME h1\n"
                          "*.wild TXT \"wildcard\"\n"
                          "_sip._udp SRV 10 5 5060 h2\n"
                          "sub NS ns.sub\n"
                          "ns.sub A 192.0.2.53\n"
                          "dn DNAME target.other.test.\n"
                          "cap CAA 0 issue \"ca.example\"\n");
    for (unsigned i = 0; i < 2000; i++)
        o += (size_t)snprintf(t + o, cap - o,
                              "h%u 300 A 10.0.%u.%u\n"
                              "h%u AAAA 2001:db8::%x\n"
                              "t%u TXT \"record %u, with enough text to fill the messages\"\n",
                              i, i >> 8, i & 255, i, i, i, i);
    assert_true(o < cap);
    return t;
}

static char *knot_text;

static int knot_setup(void **state)
{
    (void)state;
    wname(origin, "example.test.");
    /* a test dependency the README's test command installs: no reason to skip */
    if (!ksrv_init(&knot, "tern-knot-xfr", "example.test."))
        return -1;
    char conf[2048];
    /* journal-content: changes: knotc transactions go to the journal, so IXFR can be answered */
    int h = ksrv_conf_head(&knot, conf, sizeof(conf));
    snprintf(conf + h, sizeof(conf) - (size_t)h,
             "acl:\n"
             "  - id: xfr\n"
             "    address: 127.0.0.1\n"
             "    action: transfer\n"
             "template:\n"
             "  - id: default\n"
             "    storage: \"%s\"\n"
             "    zonefile-sync: -1\n"
             "    zonefile-load: whole\n"
             "    journal-content: changes\n"
             "zone:\n"
             "  - domain: \"example.test.\"\n"
             "    file: \"%s/example.test.zone\"\n"
             "    acl: xfr\n",
             knot.dir, knot.dir);
    tu_write_file(knot.dir, "knot.conf", conf);
    knot_text = knot_zone_text();
    tu_write_file(knot.dir, "example.test.zone", knot_text);
    if (!ksrv_start(&knot))
        return -1;
    return 0;
}

static int knot_teardown(void **state)
{
    (void)state;
    ksrv_stop(&knot);
    if (knot.dir[0])
        tu_rmtree(knot.dir);
    zone_free(knot_v1);
    free(knot_text);
    return 0;
}

static bool read_full(int fd, uint8_t *p, size_t n)
{
    while (n) {
        ssize_t r = recv(fd, p, n, 0);
        if (r <= 0)
            return false;
        p += r;
        n -= (size_t)r;
    }
    return true;
}

/*
 * Ask knotd for an AXFR, or an IXFR from serial `from`, over TCP and feed every message to x
 * until it says the transfer is complete or fails. Returns the last feed's result.
 */
static int knot_transfer(xfr_in_t *x, uint16_t qtype, uint32_t from)
{
    uint16_t id = (uint16_t)(tu_now_ms() & 0xffff);
    xfr_in_set_id(x, id);
    uint8_t q[2 + 512];
    size_t n = 2;
    put16(q + n, id);
    q[n + 2] = q[n + 3] = 0;
    put16(q + n + 4, 1);
    put16(q + n + 6, 0);
    put16(q + n + 8, qtype == WIRE_T_IXFR ? 1 : 0);
    put16(q + n + 10, 0);
    n += 12;
    memcpy(q + n, origin, dname_len(origin));
    n += dname_len(origin);
    put16(q + n, qtype);
    put16(q + n + 2, WIRE_CLASS_IN);
    n += 4;
    if (qtype == WIRE_T_IXFR) {
        /* RFC 1995 §3: the client's SOA in the authority section; only its serial matters */
        static const uint8_t soa[] = {0xC0, 12, 0, 6, 0, 1, 0, 0, 0, 0, 0, 22, 0, 0};
        memcpy(q + n, soa, sizeof(soa));
        n += sizeof(soa);
        uint32_t v[5] = {from, 0, 0, 0, 0};
        for (int i = 0; i < 5; i++) {
            put16(q + n, (uint16_t)(v[i] >> 16));
            put16(q + n + 2, (uint16_t)v[i]);
            n += 4;
        }
    }
    put16(q, (uint16_t)(n - 2));

    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(fd >= 0);
    struct timeval tv = {XFR_IO_MS / 1000, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    struct sockaddr_storage ss;
    socklen_t sl = tu_sockaddr(&ss, AF_INET, "127.0.0.1", knot.port);
    assert_int_equal(connect(fd, (struct sockaddr *)&ss, sl), 0);
    assert_int_equal(send(fd, q, n, MSG_NOSIGNAL), (ssize_t)n);
    uint8_t *buf = malloc(65535);
    assert_non_null(buf);
    int rc = 1;
    /* each recv is bounded by SO_RCVTIMEO, the number of messages by the zone's size */
    for (int msgs = 0; rc == 1 && msgs < 1000; msgs++) {
        uint8_t lb[2];
        if (!read_full(fd, lb, 2))
            fail_msg("knotd closed the connection or timed out after %d messages", msgs);
        size_t len = (size_t)lb[0] << 8 | lb[1];
        if (!read_full(fd, buf, len))
            fail_msg("a message cut short");
        rc = xfr_in_feed(x, buf, len, err, sizeof(err));
    }
    free(buf);
    close(fd);
    if (rc < 0)
        fail_msg("transfer: %s", err);
    return rc;
}

static zone_t *knot_axfr(void)
{
    xfr_in_t *x = xfr_in_new(origin, WIRE_T_AXFR, NULL, 0, "knotd");
    assert_non_null(x);
    assert_int_equal(knot_transfer(x, WIRE_T_AXFR, 0), 0);
    assert_int_equal(xfr_in_kind(x), XFR_IN_FULL);
    assert_true(xfr_in_messages(x) > 1); /* the zone does not fit one message */
    zone_t *z;
    if (xfr_in_finish(x, &z, err, sizeof(err)) < 0)
        fail_msg("%s", err);
    xfr_in_free(x);
    return z;
}

static void knotc(const char *args)
{
    if (ksrv_ctl(&knot, args) != 0)
        fail_msg("knotc %s failed", args);
}

static void test_knot_axfr(void **state)
{
    (void)state;
    knot_v1 = knot_axfr();
    zone_t *file = zone_from_text(knot_text);
    assert_zones_equal(knot_v1, file);
    assert_int_equal(knot_v1->rr_count, file->rr_count);
    assert_int_equal(knot_v1->serial, 1);
    zone_free(file);
}

static void test_knot_ixfr(void **state)
{
    (void)state;
    assert_non_null(knot_v1);
    /* two transactions, two deltas: knotd bumps the serial each time (1 -> 2 -> 3) */
    knotc("zone-begin example.test.");
    knotc("zone-set example.test. h5 300 A 10.9.9.9");
    knotc("zone-unset example.test. h6 A 10.0.0.6");
    knotc("zone-unset example.test. t7 TXT");
    knotc("zone-set example.test. added 600 A 192.0.2.200");
    knotc("zone-set example.test. h8 900 AAAA 2001:db8::9"); /* the RRset's TTL: 3600 -> 900 */
    knotc("zone-commit example.test.");
    knotc("zone-begin example.test.");
    knotc("zone-unset example.test. added A 192.0.2.200");
    knotc("zone-set example.test. later 300 TXT second-delta");
    knotc("zone-unset example.test. h5 A 10.0.0.5");
    knotc("zone-commit example.test.");

    xfr_in_t *x = xfr_in_new(origin, WIRE_T_IXFR, knot_v1, 0, "knotd");
    assert_non_null(x);
    assert_int_equal(knot_transfer(x, WIRE_T_IXFR, knot_v1->serial), 0);
    assert_int_equal(xfr_in_kind(x), XFR_IN_INCREMENTAL);
    assert_int_equal(xfr_in_serial(x), 3);
    zone_t *v3;
    if (xfr_in_finish(x, &v3, err, sizeof(err)) < 0)
        fail_msg("%s", err);
    xfr_in_free(x);

    zone_t *fresh = knot_axfr();
    assert_int_equal(fresh->serial, 3);
    assert_zones_equal(v3, fresh);
    assert_zones_equal(fresh, v3);

    /* the changes are there (not only "equal to knot") */
    uint8_t n[DNAME_MAXLEN];
    wname(n, "t7.example.test.");
    assert_null(zone_find_node(v3, n, dname_len(n), dname_hash(n)));
    wname(n, "h8.example.test.");
    const zone_rrset_t *s =
        zone_node_rrset(zone_find_node(v3, n, dname_len(n), dname_hash(n)), WIRE_T_AAAA);
    assert_int_equal(s->ttl, 900);
    assert_int_equal(s->count, 2);

    /* up to date now */
    x = xfr_in_new(origin, WIRE_T_IXFR, v3, 0, "knotd");
    assert_non_null(x);
    assert_int_equal(knot_transfer(x, WIRE_T_IXFR, v3->serial), 0);
    assert_int_equal(xfr_in_kind(x), XFR_IN_UP_TO_DATE);
    xfr_in_free(x);

    /* and the on-disk copy of what was transferred reads back the same */
    char path[128], e[512];
    snprintf(path, sizeof(path), "%s/secondary.zone", knot.dir);
    assert_int_equal(xfr_zone_write_file(v3, path, e, sizeof(e)), 0);
    zone_t *disk = NULL;
    if (zone_file_load("example.test.", path, &disk, e, sizeof(e)) < 0)
        fail_msg("%s", e);
    assert_zones_equal(disk, v3);
    zone_free(disk);
    zone_free(fresh);
    zone_free(v3);
}

int main(void)
{
    const struct CMUnitTest crafted[] = {
        cmocka_unit_test(test_axfr_ok),
        cmocka_unit_test(test_axfr_missing_closing_soa),
        cmocka_unit_test(test_truncated),
        cmocka_unit_test(test_header_errors),
        cmocka_unit_test(test_record_errors),
        cmocka_unit_test(test_axfr_old_serial),
        cmocka_unit_test(test_max_bytes),
        cmocka_unit_test(test_max_bytes_memory),
        cmocka_unit_test(test_max_bytes_ixfr_rebuild),
        cmocka_unit_test(test_compression),
        cmocka_unit_test(test_ixfr_up_to_date),
        cmocka_unit_test(test_ixfr_serial_backwards),
        cmocka_unit_test(test_ixfr_chain_gap),
        cmocka_unit_test(test_ixfr_remove_absent),
        cmocka_unit_test(test_ixfr_apply),
        cmocka_unit_test(test_ixfr_axfr_style),
        cmocka_unit_test(test_write_file),
        cmocka_unit_test(test_ixfr_apply_large),
    };
    const struct CMUnitTest real[] = {
        cmocka_unit_test(test_knot_axfr),
        cmocka_unit_test(test_knot_ixfr),
    };
    int failed = cmocka_run_group_tests_name("crafted", crafted, group_setup, group_teardown);
    failed += cmocka_run_group_tests_name("knotd", real, knot_setup, knot_teardown);
    return failed;
}
