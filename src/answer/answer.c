/*
 * answer.c — the query pipeline (answer.h): one query through the named stages, each in its own
 * file over the private answer_resp_t (answer_int.h):
 *
 *   policy   (answer_policy.c)   who may ask and what they may see: ACL, rate, cookies, the
 *                                zone's ACL (its lookup handed to resolve); run only when the
 *                                view has limits
 *   dispatch (answer_dispatch.c) what the request is: rcode-only answers, CHAOS, the hand-off
 *                                of NOTIFY/TSIG/AXFR/IXFR to the transfer thread
 *   resolve  (answer_resolve.c)  RFC 1034 over the view, written by answer_put.c (DNSSEC)
 *   finish   (answer_finish.c)   OPT, RRL (class derived once from resolve's outcome), info
 *
 * No allocation, no locks, no syscalls: only the per-worker ctx, the caller's output buffer and
 * the immutable view.
 */
#include "tern/answer/answer.h"

#include "tern/common/rcu.h"

#include "answer_int.h"

/* The query's own state in ctx and r, answer_info_t reset, no policy verdict yet. False when
 * nothing is answered: not DNS, a response (QR set), or no room for the smallest response. */
static bool start(answer_resp_t *r, wire_parse_result_t pr, const uint8_t *pkt, size_t len)
{
    answer_ctx_t *ctx = r->ctx;
    const wire_query_t *q = r->q;
    answer_info_t *info = &ctx->info;
    ctx->q = r->q;
    info->rcode = -1u;
    info->truncated = false;
    info->edns = false;
    info->ecs = false;
    info->qtype = 0;
    info->health_fail_open = 0;
    info->limit_why = LIMIT_WHY_NONE;
    info->limit_verdict = LIMIT_PASS;
    info->cookie = info->cookie_valid = info->badcookie = false;
    info->scope = 0;
    info->zone = NULL;
    info->pick = NULL;
    info->pick_rdata = NULL;
    info->steer.rules = 0; /* the other steer fields are read only under their rule's bit */
    if (pr == WIRE_DROP || unlikely(r->out_cap < UDP_MIN)) {
        info->outcome = len >= 12 && (pkt[2] & 0x80) ? ANSWER_DROP_QR : ANSWER_DROP_SHORT;
        return false;
    }
    info->outcome = ANSWER_SENT;
    r->pr = pr;
    r->edns = (pr == WIRE_OK || pr == WIRE_BADVERS) && q->has_edns;
    r->ecs = pr == WIRE_OK && r->edns && q->has_ecs ? &q->ecs : NULL;
    info->edns = r->edns;
    info->ecs = r->ecs != NULL;
    info->qtype = pr == WIRE_OK ? q->qtype : 0;
    /* the client is resolved only if a steered RRset is reached (select.c): plain answers pay
     * nothing for geo */
    ctx->view = r->v;
    ctx->q_ecs = r->ecs;
    ctx->q_src = r->client;
    ctx->ent = NULL;
    ctx->scope = 0;
    uint16_t adv = r->v->cfg.edns_max_udp;
    r->adv = adv < UDP_MIN ? UDP_MIN : adv;
    /* no policy verdict until the policy stage gives one (it runs only with limits) */
    r->refused = r->cookie_ok = r->badcookie = r->tc_only = false;
    r->cookie_len = 0;
    r->zone_vd = LIMIT_PASS;
    r->hidden = NULL;
    r->looked = false;
    return true;
}

size_t answer_parsed(const answer_view_t *v, answer_ctx_t *ctx, wire_query_t *q,
                     wire_parse_result_t pr, const struct sockaddr *client, const uint8_t *pkt,
                     size_t len, uint8_t *out, size_t out_cap, answer_transport_t transport)
{
    answer_resp_t r;
    r.ctx = ctx;
    r.v = v;
    r.q = q;
    r.transport = transport;
    r.client = client;
    r.out = out;
    r.out_cap = out_cap;
    if (!start(&r, pr, pkt, len))
        return 0;
    if (unlikely(v->limit != NULL) && !answer_policy(&r)) /* off, it costs nothing */
        return 0;
    answer_finish_open(&r);
    answer_res_t res = {.kind = ANSWER_RES_NONE, .at = {.owner = NULL}};
    switch (answer_dispatch(&r)) {
    case ANSWER_ROUTE_HANDOFF:
        return 0;
    case ANSWER_ROUTE_RESOLVE:
        res = answer_resolve(&r);
        break;
    case ANSWER_ROUTE_FINISH:
        break;
    }
    return answer_finish(&r, res);
}

size_t answer_query(const answer_view_t *v, answer_ctx_t *ctx, const struct sockaddr *client,
                    const uint8_t *pkt, size_t len, uint8_t *out, size_t out_cap,
                    answer_transport_t transport)
{
    wire_parse_result_t pr = wire_parse_query(&ctx->query, pkt, len);
    return answer_parsed(v, ctx, &ctx->query, pr, client, pkt, len, out, out_cap, transport);
}

zone_t *answer_pin_zone(const answer_view_t *const *published, const uint8_t *name)
{
    dname_view_t v;
    dname_view_init(&v, name);
    tern_rcu_online();
    const answer_view_t *view = tern_rcu_deref(*published);
    zone_t *z = NULL;
    unsigned apex;
    const zone_t *f = view ? zone_table_find(view->table, &v, &apex) : NULL;
    if (f && apex == 0)
        z = zone_retain((zone_t *)f);
    tern_rcu_offline();
    return z;
}
