/*
 * qlog_test_util.h — helpers for the query log's unit tests: real DNS wire messages built by hand
 * (a query, its answer) and qlog_rec_t records holding them, as a worker would log them.
 * Fixture-free and header-only; include after <cmocka.h>.
 */
#ifndef TERN_TESTS_UNIT_QLOG_TEST_UTIL_H
#define TERN_TESTS_UNIT_QLOG_TEST_UTIL_H

#include <arpa/inet.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "tern/qlog/qlog_rec.h"
#include "wire/wire_test_util.h"

#define QTU_T_A    1
#define QTU_T_TXT  16
#define QTU_T_AAAA 28

/* Room for one record: its header and QLOG_WIRE_MAX bytes of messages, 8-byte aligned. */
typedef union qtu_rec_buf {
    qlog_rec_t rec;
    uint64_t align;
    uint8_t bytes[sizeof(qlog_rec_t) + QLOG_WIRE_MAX];
} qtu_rec_buf_t;

/* "www.example.com" in wire form at out (test names: no escapes). Returns its length. */
static inline size_t qtu_name(uint8_t *out, const char *s)
{
    return to_wire(s, out);
}

static inline size_t qtu_put16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)(v >> 8);
    p[1] = (uint8_t)v;
    return 2;
}

/* A query for name/qtype (class IN, RD set), id as given. Returns its length. */
static inline size_t qtu_query(uint8_t *out, uint16_t id, const char *name, uint16_t qtype)
{
    size_t o = qtu_put16(out, id);
    o += qtu_put16(out + o, 0x0100); /* RD */
    o += qtu_put16(out + o, 1);      /* QDCOUNT */
    memset(out + o, 0, 6);           /* AN, NS, AR */
    o += 6;
    o += qtu_name(out + o, name);
    o += qtu_put16(out + o, qtype);
    o += qtu_put16(out + o, 1);
    return o;
}

/*
 * The authoritative answer to qtu_query(id, name, qtype): QR AA RD, rcode as given, and one
 * answer record (owner compressed to the question, TTL 300) when rdlen > 0. Returns its length.
 */
static inline size_t qtu_response(uint8_t *out, uint16_t id, const char *name, uint16_t qtype,
                                  uint8_t rcode, const void *rdata, uint16_t rdlen)
{
    size_t o = qtu_query(out, id, name, qtype);
    out[2] = 0x85; /* QR, opcode 0, AA, RD */
    out[3] = rcode & 0x0f;
    if (rdlen == 0)
        return o;
    out[7] = 1; /* ANCOUNT */
    o += qtu_put16(out + o, 0xc00c);
    o += qtu_put16(out + o, qtype);
    o += qtu_put16(out + o, 1);
    o += qtu_put16(out + o, 0);
    o += qtu_put16(out + o, 300);
    o += qtu_put16(out + o, rdlen);
    memcpy(out + o, rdata, rdlen);
    return o + rdlen;
}

/*
 * Fill b with a record: family 4 or 6, client and server as address text and port, flags, query
 * and response bytes (either may be NULL/0), query and response times qtime_ns and +250 µs.
 * qtype and rcode are taken from the messages, size is set as the ring would set it. Returns
 * &b->rec.
 */
static inline qlog_rec_t *qtu_rec(qtu_rec_buf_t *b, int family, const char *client, uint16_t cport,
                                  const char *server, uint16_t sport, uint16_t flags,
                                  const uint8_t *q, size_t qlen, const uint8_t *r, size_t rlen,
                                  int64_t qtime_ns)
{
    memset(b, 0, sizeof(*b));
    qlog_rec_t *rec = &b->rec;
    int af = family == 4 ? AF_INET : AF_INET6;
    assert_int_equal(inet_pton(af, client, rec->client_addr), 1);
    assert_int_equal(inet_pton(af, server, rec->server_addr), 1);
    assert_true(qlen + rlen <= QLOG_WIRE_MAX);
    rec->family = (uint8_t)family;
    rec->flags = flags;
    rec->client_port = cport;
    rec->server_port = sport;
    rec->rcode = (flags & QLOG_F_RESPONSE) ? (r && rlen > 3 ? r[3] & 0x0f : 0) : 0xFFFF;
    if (qlen > 12) { /* qtype: after the question name (uncompressed in a query) */
        size_t o = 12;
        while (o < qlen && q[o])
            o += 1u + q[o];
        if (o + 3 <= qlen)
            rec->qtype = (uint16_t)(q[o + 1] << 8 | q[o + 2]);
    }
    rec->qtime_ns = qtime_ns;
    rec->rtime_ns = qtime_ns + 250000;
    rec->qlen = (uint16_t)qlen;
    rec->rlen = (uint16_t)rlen;
    if (qlen)
        memcpy(rec->wire, q, qlen);
    if (rlen)
        memcpy(rec->wire + qlen, r, rlen);
    rec->size = (uint32_t)((sizeof(*rec) + qlen + rlen + 7) & ~(size_t)7);
    return rec;
}

#endif
