/*
 * parse.c — one forward pass over a query: header, question, then every counted record with
 * bounds checks, picking up the OPT record (EDNS0, RFC 6891) and its Client Subnet option
 * (RFC 7871) on the way. Nothing is copied except the question name into its dname_view.
 */
#include "tern/wire/parse.h"

#include <string.h>

#include "tern/common/byteorder.h"
#include "tern/common/err.h"

/* Fixed part of a resource record after its owner: type, class, TTL, RDLENGTH. */
#define RR_FIXED_LEN 10

/* RFC 7871 §6: the address families the option defines for IP. */
#define ECS_FAMILY_IP4 1
#define ECS_FAMILY_IP6 2

/* RFC 7871 §6 checks on one ECS option (data of dlen bytes); fills q->ecs. */
static bool parse_ecs(wire_query_t *q, const uint8_t *d, size_t dlen)
{
    if (dlen < 4)
        return false;
    uint16_t family = tern_rd16(d);
    uint8_t source = d[2];
    uint8_t scope = d[3];
    unsigned max = family == ECS_FAMILY_IP4 ? 32 : family == ECS_FAMILY_IP6 ? 128 : 0;
    if (max == 0 || source > max || scope != 0)
        return false;
    size_t alen = ((size_t)source + 7) / 8;
    if (dlen - 4 != alen)
        return false;
    /* Bits past the source prefix must be zero (§6, "MUST be set to 0"), else the client
     * may be leaking more of its address than it announced. */
    if (source % 8 != 0 && (d[4 + alen - 1] & (0xFFu >> (source % 8))) != 0)
        return false;
    q->ecs.family = family;
    q->ecs.source_prefix = source;
    q->ecs.scope_prefix = scope;
    memset(q->ecs.addr, 0, sizeof(q->ecs.addr));
    memcpy(q->ecs.addr, d + 4, alen);
    q->has_ecs = true;
    return true;
}

/* The OPT record's RDATA (rdlen bytes at rd): option code, length, data, repeated. */
static bool parse_opt_options(wire_query_t *q, const uint8_t *rd, size_t rdlen)
{
    size_t p = 0;
    while (p < rdlen) {
        if (rdlen - p < 4)
            return false;
        uint16_t code = tern_rd16(rd + p);
        size_t olen = tern_rd16(rd + p + 2);
        p += 4;
        if (olen > rdlen - p)
            return false;
        if (code == WIRE_EDNS_ECS) {
            if (q->has_ecs) /* two subnets: which one would we answer for? */
                return false;
            if (!parse_ecs(q, rd + p, olen))
                return false;
        } else if (code == WIRE_EDNS_COOKIE) {
            /* RFC 7873 §5.2.2: a client cookie alone (8) or with a server cookie of 8..32;
             * anything else, or a second COOKIE, is malformed */
            if (q->has_cookie || (olen != WIRE_COOKIE_CLIENT &&
                                  (olen < WIRE_COOKIE_CLIENT + 8 || olen > WIRE_COOKIE_MAX)))
                return false;
            memcpy(q->cookie, rd + p, olen);
            q->cookie_len = (uint8_t)olen;
            q->has_cookie = true;
        }
        p += olen;
    }
    return true;
}

/* Everything after the question: ancount + nscount + arcount records (an/ns only outside
 * opcode QUERY, checked by the caller). Returns WIRE_OK, WIRE_BADVERS or WIRE_FORMERR. */
static wire_parse_result_t parse_records(wire_query_t *q, const uint8_t *pkt, size_t len,
                                         size_t pos, unsigned an_ns, unsigned ar)
{
    bool badvers = false;
    unsigned total = an_ns + ar;

    for (unsigned i = 0; i < total; i++) {
        /* names may be compressed here, pointing backwards only (dname_unpack()) */
        int nlen = dname_unpack(pkt, len, len, &pos, NULL, NULL);
        if (nlen < 0 || len - pos < RR_FIXED_LEN)
            return WIRE_FORMERR;
        uint16_t type = tern_rd16(pkt + pos);
        uint16_t rclass = tern_rd16(pkt + pos + 2);
        uint32_t ttl = tern_rd32(pkt + pos + 4);
        size_t rdlen = tern_rd16(pkt + pos + 8);
        pos += RR_FIXED_LEN;
        if (rdlen > len - pos)
            return WIRE_FORMERR;
        const uint8_t *rd = pkt + pos;
        pos += rdlen;

        if (type == WIRE_T_TSIG && i >= an_ns) {
            /* RFC 8945 §5.1: signed requests go to the transfer side, which checks the
             * signature (and that it is the last record) */
            q->has_tsig = true;
            continue;
        }
        if (type != WIRE_T_OPT)
            continue; /* anything else: walked, not interpreted */
        /* RFC 6891 §6.1.1: one OPT, in the additional section, owned by the root. */
        if (i < an_ns || q->has_edns || nlen != 1)
            return WIRE_FORMERR;
        q->has_edns = true;
        q->edns_udp_size = rclass;
        q->edns_version = (uint8_t)(ttl >> 16);
        q->edns_do = (ttl & 0x8000u) != 0;
        if (q->edns_version != 0) {
            /* Options of a version we don't speak have no format we could check; §6.1.3
             * asks only for BADVERS. The rest of the message is still walked. */
            badvers = true;
            continue;
        }
        if (!parse_opt_options(q, rd, rdlen))
            return WIRE_FORMERR;
    }
    if (pos != len) /* trailing garbage: Knot refuses it too */
        return WIRE_FORMERR;
    return badvers ? WIRE_BADVERS : WIRE_OK;
}

wire_parse_result_t wire_parse_query(wire_query_t *q, const uint8_t *pkt, size_t len)
{
    /* Reset only the fields a reader looks at (even for a drop, so nothing stale survives);
     * the view is filled only with a question. */
    q->qtype = 0;
    q->qclass = 0;
    q->qdcount = 0;
    q->has_question = false;
    q->qname = NULL;
    q->question_len = 0;
    q->has_edns = false;
    q->has_tsig = false;
    q->edns_do = false;
    q->edns_version = 0;
    q->edns_udp_size = 0;
    q->has_ecs = false;
    q->has_cookie = false;

    if (len < WIRE_HDR_LEN)
        return WIRE_DROP;
    uint16_t flags = tern_rd16(pkt + 2);
    if (flags & WIRE_FLAG_QR) /* a response: answering it could start a loop */
        return WIRE_DROP;
    q->id = tern_rd16(pkt);
    q->flags = flags;

    unsigned qd = tern_rd16(pkt + 4), an = tern_rd16(pkt + 6), ns = tern_rd16(pkt + 8),
             ar = tern_rd16(pkt + 10);
    q->qdcount = (uint16_t)qd;
    if (qd != 1)
        return WIRE_FORMERR;

    const uint8_t *qname = pkt + WIRE_HDR_LEN;
    int nlen = dname_check(qname, len - WIRE_HDR_LEN);
    if (nlen < 0 || len - WIRE_HDR_LEN - (size_t)nlen < 4)
        return WIRE_FORMERR;
    q->qname = qname;
    q->qtype = tern_rd16(qname + nlen);
    q->qclass = tern_rd16(qname + nlen + 2);
    q->question_len = (size_t)nlen + 4;
    dname_view_init(&q->name, qname);
    q->has_question = true;

    /* A query carries nothing in answer and authority, but an IXFR its SOA in authority (RFC
     * 1995 §3); NOTIFY and UPDATE carry records too. All are walked like the additional section
     * so that their OPT is still found and checked. */
    if (WIRE_OPCODE(flags) == WIRE_OP_QUERY &&
        (an != 0 || (ns != 0 && !(q->qtype == WIRE_T_IXFR && ns == 1))))
        return WIRE_FORMERR;
    return parse_records(q, pkt, len, WIRE_HDR_LEN + q->question_len, an + ns, ar);
}
