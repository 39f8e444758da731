/*
 * answer_dispatch.c — the dispatch stage: what the request is and where it goes (answer.h,
 * "opcodes and transfers"). Parse errors, the opcode, the class and the meta types are answered
 * here with an rcode or TC; NOTIFY, TSIG-signed requests and AXFR/IXFR over TCP go to the
 * transfer thread when transfers are configured; CHAOS identity is answered here; a question
 * for the zones goes on to resolve.
 *
 * The policy stage has run before and left its verdicts in the response (answer_int.h); they
 * are applied here, in their order of precedence: the client's refusal, then cookies, before
 * anything about the request; the zone's ACL last, because it is about the zone data a query
 * would be answered from, so it counts only for a query that would be resolved (a NOTIFY or an
 * unknown opcode for a name in that zone gets the answer any client gets).
 *
 * No allocation, no locks, no syscalls.
 */
#include <string.h>

#include "answer_int.h"

/* RFC 1035 §3.3: a <character-string> is at most 255 bytes; a longer identity or version is
 * cut there rather than split, CHAOS answers are for humans. */
#define TXT_STR_MAX 255u

static bool qname_is(const wire_query_t *q, const uint8_t *wire, size_t len)
{
    return q->name.len == len && memcmp(q->name.lc, wire, len) == 0;
}

/* CHAOS class: the conventional server-identification names only (RFC 4892 §2). */
static void chaos(answer_resp_t *r, const wire_query_t *q, const answer_config_t *cfg)
{
    /* String literals end with the NUL that is the root label, so sizeof is the wire length. */
    static const uint8_t id_server[] = "\2id\6server";
    static const uint8_t hostname_bind[] = "\10hostname\4bind";
    static const uint8_t version_bind[] = "\7version\4bind";
    static const uint8_t version_server[] = "\7version\6server";
    const char *text = NULL;
    if (qname_is(q, id_server, sizeof(id_server)) ||
        qname_is(q, hostname_bind, sizeof(hostname_bind)))
        text = cfg->identity;
    else if (qname_is(q, version_bind, sizeof(version_bind)) ||
             qname_is(q, version_server, sizeof(version_server)))
        text = cfg->version;
    if (!text || (q->qtype != WIRE_T_TXT && q->qtype != WIRE_T_ANY)) {
        r->rcode = WIRE_RC_REFUSED;
        return;
    }
    uint8_t rdata[2 + 1 + TXT_STR_MAX];
    size_t n = strnlen(text, TXT_STR_MAX);
    rdata[0] = (uint8_t)((n + 1) >> 8);
    rdata[1] = (uint8_t)(n + 1);
    rdata[2] = (uint8_t)n;
    memcpy(rdata + 3, text, n);
    /* No AA, as NSD and Knot answer: the server is not authoritative for a CH zone. */
    /* TTL 0: the answer describes this one server instance and must not be cached. */
    if (wire_write_rrset_class(r->w, WIRE_SEC_AN, QNAME_OFF, NULL, WIRE_T_TXT, WIRE_CLASS_CH, 0, 1,
                               rdata) != 0)
        r->tc = true;
}

/* The zone's ACL refused the client (the policy stage's verdict): REFUSED, or no response. */
static void zone_denied(answer_resp_t *r)
{
    answer_info_t *info = &r->ctx->info;
    info->limit_why = LIMIT_WHY_ZONE_ACL;
    info->limit_verdict = r->zone_vd;
    r->asked = r->look_zone;
    r->drop = r->zone_vd == LIMIT_DROP;
    r->rcode = WIRE_RC_REFUSED;
}

/* What the transfer thread takes: with transfers or updates configured, NOTIFY, UPDATE, any
 * TSIG-signed request and AXFR/IXFR over TCP. It checks keys and ACLs, pins the zone and streams
 * it, or hands an UPDATE to the update service, off this worker (tern/xfr/xfr.h). */
static bool handed_off(const answer_resp_t *r, unsigned opcode)
{
    const wire_query_t *q = r->q;
    return unlikely(r->v->cfg.xfr) &&
           (opcode == WIRE_OP_NOTIFY || opcode == WIRE_OP_UPDATE || q->has_tsig ||
            (r->transport == ANSWER_TCP && opcode == WIRE_OP_QUERY &&
             (q->qtype == WIRE_T_AXFR || q->qtype == WIRE_T_IXFR)));
}

answer_route_t answer_dispatch(answer_resp_t *r)
{
    const wire_query_t *q = r->q;
    const uint16_t qtype = q->qtype;
    const bool udp = r->transport == ANSWER_UDP;
    unsigned opcode = WIRE_OPCODE(q->flags);
    if (r->refused)
        r->rcode = WIRE_RC_REFUSED; /* as redins answers a limited or blacklisted client */
    else if (r->badcookie)
        r->rcode = WIRE_RC_BADCOOKIE;
    else if (r->tc_only)
        r->tc = true;
    else if (r->pr == WIRE_FORMERR)
        /* A header without a question is malformed for the opcodes we implement (QUERY, and
         * NOTIFY, which we answer), and a request we do not implement for the others: NOTIMP,
         * as NSD and Knot answer (and as DNS compliance tests expect of opcode 15). */
        r->rcode = q->qdcount == 0 && opcode != WIRE_OP_QUERY && opcode != WIRE_OP_NOTIFY
                       ? WIRE_RC_NOTIMP
                       : WIRE_RC_FORMERR;
    else if (r->pr == WIRE_BADVERS)
        r->rcode = WIRE_RC_BADVERS;
    else if (handed_off(r, opcode)) {
        r->ctx->info.outcome = ANSWER_HANDOFF;
        r->ctx->info.rcode = -1u;
        return ANSWER_ROUTE_HANDOFF;
    } else if (opcode == WIRE_OP_NOTIFY)
        /* RFC 1996 §3.10: NOTIFY is for a secondary; without transfers configured tern is
         * secondary for no zone (Knot answers NOTAUTH too) */
        r->rcode = WIRE_RC_NOTAUTH;
    else if (opcode != WIRE_OP_QUERY)
        r->rcode = WIRE_RC_NOTIMP;
    else if (qtype == WIRE_T_OPT) /* a pseudo-RR is no question (RFC 6891 §6.1.1) */
        r->rcode = WIRE_RC_FORMERR;
    else if (q->qclass == WIRE_CLASS_CH)
        chaos(r, q, &r->v->cfg);
    else if (q->qclass != WIRE_CLASS_IN && q->qclass != WIRE_CLASS_ANY)
        r->rcode = WIRE_RC_REFUSED; /* QCLASS ANY: the IN data is all there is, as NSD and Knot */
    else if (qtype == WIRE_T_AXFR && udp)
        r->rcode = WIRE_RC_NOTIMP; /* RFC 5936 §4.2: AXFR is TCP only (NSD answers NOTIMP too) */
    else if (qtype == WIRE_T_IXFR && udp && r->v->cfg.xfr)
        r->tc = true; /* RFC 1995 §2: the answer would not fit; the secondary asks over TCP */
    else if (qtype == WIRE_T_AXFR || qtype == WIRE_T_IXFR)
        r->rcode = WIRE_RC_REFUSED; /* no zone may be transferred (allow_transfer) */
    else if (qtype >= WIRE_T_META_MIN && qtype < WIRE_T_ANY)
        r->rcode = WIRE_RC_NOTIMP;
    else if (!r->v->table)
        r->rcode = WIRE_RC_REFUSED;
    else if (unlikely(r->zone_vd != LIMIT_PASS))
        zone_denied(r);
    else
        return ANSWER_ROUTE_RESOLVE;
    return ANSWER_ROUTE_FINISH;
}
