/*
 * answer_finish.c — the finish stage: the response's frame and its last judgement. It opens the
 * response before dispatch (header, question, the OPT's room, RRL armed) and closes it after
 * resolve: the OPT (EDNS, ECS scope, cookie), the RRL verdict on the finished UDP response with
 * its class derived once from what resolve answered, and answer_info_t's last fields, which the
 * statistics and the query log copy.
 *
 * Decisions, and why:
 *   - OPT in error responses: a FORMERR from the parser carries no OPT, because the OPT itself
 *     may be what was malformed (its fields in wire_query_t are then not trustworthy). Every
 *     response to a query the parser accepted (WIRE_OK, WIRE_BADVERS) carries an OPT when the
 *     query had one, including NOTIMP/REFUSED/FORMERR decided by policy (RFC 6891 §6.1.1: an
 *     EDNS query gets an EDNS response). ECS is echoed only on the WIRE_OK path, with the
 *     scope prefix the answer depended on (RFC 7871 §7.2.1): the longest network prefix of the
 *     MaxMind DB / ASN table lookups a geo-steered RRset made for the ECS address (select.h),
 *     0 when none was made (plain data, order rr/weighted without a geo filter) and always 0
 *     for a source prefix of 0 (RFC 7871 §7.1.2: "don't use my address"; the packet's source
 *     is used instead and the answer must not be cached per subnet).
 *   - RRL (tern/limit/limit.h) judges UDP responses only, never a client with a valid server
 *     cookie (the cookie proves the source); its bucket is prefetched when the response is
 *     opened, so the miss overlaps the lookup.
 *
 * No allocation, no locks, no syscalls.
 */
#include <stdint.h>

#include "answer_int.h"
#include "tern/answer/answer_trace.h"

/* The TCP length prefix is 16 bits (RFC 1035 §4.2.2). */
#define TCP_MAX 65535u

static size_t response_limit(const wire_query_t *q, bool edns, uint16_t adv, size_t out_cap,
                             answer_transport_t transport)
{
    size_t lim;
    if (transport == ANSWER_TCP) {
        lim = TCP_MAX;
    } else if (!edns) {
        lim = UDP_MIN;
    } else {
        lim = q->edns_udp_size;
        if (lim < UDP_MIN)
            lim = UDP_MIN;
        if (lim > adv)
            lim = adv;
    }
    return lim < out_cap ? lim : out_cap;
}

void answer_finish_open(answer_resp_t *r)
{
    wire_query_t *q = r->q;
    /* NSD answers a message with several questions with a bare FORMERR: no flag copied (Knot
     * sends nothing). One question or none keeps RD, as both do. */
    if (r->pr == WIRE_FORMERR && q->qdcount > 1)
        q->flags &= (uint16_t)~WIRE_FLAG_RD;
    r->w = &r->ctx->writer;
    r->limit = response_limit(q, r->edns, r->adv, r->out_cap, r->transport);
    wire_writer_init(r->w, r->out, r->limit, q);
    /* Header + question (<= 12 + 259) + OPT with ECS (<= 35) and a cookie (28) always fit 512
     * bytes; should the reservation fail anyway, the response goes without OPT rather than not
     * at all. */
    if (r->edns && wire_writer_reserve(r->w, wire_opt_size(r->ecs, r->cookie_len)) != 0)
        r->edns = false;
    r->zone = NULL;
    r->asked = NULL;
    r->rcode = WIRE_RC_NOERROR;
    r->aa = false;
    r->tc = false;
    r->drop = false;
    r->sign = r->edns && q->edns_do && r->pr == WIRE_OK;
    r->wild = false;
    /* RRL judges the finished UDP response; a valid cookie proves the source (exempt) */
    const limit_t *lim = r->v->limit;
    r->rrl = unlikely(lim != NULL) && r->transport == ANSWER_UDP && !r->cookie_ok &&
             r->pr == WIRE_OK && !r->refused && limit_rrl_applies(lim, &r->ctx->lc);
    if (r->rrl)
        limit_rrl_prefetch(lim, &r->ctx->lc, q->name.hash[0], q->qtype);
}

/* The OPT, last, in the room reserved before any RRset. */
static void put_opt(answer_resp_t *r)
{
    answer_ctx_t *ctx = r->ctx;
    const wire_ecs_t *ecs = r->ecs;
    uint8_t scope = ecs && ecs->source_prefix > 0 ? ctx->scope : 0;
    /* An IPv4-mapped address in a family 2 option was looked up as IPv4: its scope is counted in
     * the option's family, IPv6 bits (RFC 7871 §6) */
    if (scope && ecs->family == 2 && ctx->client_mapped)
        scope = (uint8_t)(scope + 96);
    ctx->info.scope = scope;
    int rc = wire_write_opt(r->w, r->adv, (uint8_t)(r->rcode >> 4), r->q->edns_do, ecs, scope,
                            r->cookie, r->cookie_len);
    (void)rc; /* cannot fail: its space was reserved */
}

/* The RRL class of what resolve answered, and the name hash RRL keys it by: the last link of a
 * chain decides; only NOERROR and NXDOMAIN responses keep their class, every other rcode is an
 * error (key kept as it was derived). */
static limit_class_t rrl_class(const answer_resp_t *r, answer_res_t res, uint32_t *key)
{
    limit_class_t cls;
    switch (res.kind) {
    case ANSWER_RES_ANSWER:
        cls = LIMIT_RC_ANSWER;
        *key = r->q->name.hash[0];
        break;
    case ANSWER_RES_NODATA:
        cls = LIMIT_RC_NODATA;
        *key = r->q->name.hash[0];
        break;
    case ANSWER_RES_NXDOMAIN:
        cls = LIMIT_RC_NXDOMAIN;
        *key = res.at.zone->hash;
        break;
    case ANSWER_RES_REFERRAL:
        cls = LIMIT_RC_REFERRAL;
        *key = dname_hash(res.at.owner);
        break;
    case ANSWER_RES_WILDCARD:
        cls = LIMIT_RC_WILDCARD;
        *key = dname_hash(res.at.owner);
        break;
    default:
        cls = LIMIT_RC_ERROR;
        *key = 0;
        break;
    }
    return r->rcode == WIRE_RC_NOERROR || r->rcode == WIRE_RC_NXDOMAIN ? cls : LIMIT_RC_ERROR;
}

/* RRL on the finished UDP response: RRL_PASS, or the length of what is sent instead (0:
 * dropped; else a slip, the header and question alone with TC). Kept out of answer_finish(),
 * whose common path it would burden with its registers. */
#define RRL_PASS SIZE_MAX
static __attribute__((noinline)) size_t rrl(answer_resp_t *r, answer_res_t res)
{
    answer_ctx_t *ctx = r->ctx;
    answer_info_t *info = &ctx->info;
    uint32_t key;
    limit_class_t cls = rrl_class(r, res, &key);
    if (unlikely(ctx->trace != NULL)) {
        /* explain: judged without charging, and the response it explains is sent as it is */
        answer_trace_t *t = ctx->trace;
        t->rrl_judged = true;
        t->rrl_class = (uint8_t)cls;
        t->rrl_vd =
            (uint8_t)limit_rrl_dry(r->v->limit, &ctx->lc, cls, key, r->q->qtype, ctx->now_us);
        return RRL_PASS;
    }
    limit_verdict_t vd =
        limit_rrl(r->v->limit, &ctx->lim, &ctx->lc, cls, key, r->q->qtype, ctx->now_us);
    if (vd == LIMIT_PASS)
        return RRL_PASS;
    info->limit_why = LIMIT_WHY_RRL;
    info->limit_verdict = (uint8_t)vd;
    if (vd == LIMIT_DROP) {
        info->outcome = ANSWER_DROP_POLICY;
        info->rcode = r->rcode;
        return 0;
    }
    /* slip: the header and question alone, TC set, so a real client asks again over TCP; never
     * larger than the query, so it amplifies nothing */
    wire_writer_init(r->w, r->out, r->limit, r->q);
    info->rcode = r->rcode & 0xFu;
    info->truncated = true;
    return wire_writer_finish(r->w, false, true, r->rcode & 0xFu);
}

size_t answer_finish(answer_resp_t *r, answer_res_t res)
{
    answer_info_t *info = &r->ctx->info;
    info->zone = r->asked;
    if (unlikely(r->drop)) {
        info->outcome = ANSWER_DROP_POLICY;
        return 0;
    }
    if (r->edns)
        put_opt(r);
    if (unlikely(r->rrl)) {
        size_t len = rrl(r, res);
        if (len != RRL_PASS)
            return len;
    }
    info->rcode = r->rcode;
    info->truncated = r->tc;
    return wire_writer_finish(r->w, r->aa, r->tc, r->rcode);
}
