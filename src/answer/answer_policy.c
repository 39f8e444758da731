/*
 * answer_policy.c — the policy stage: who may ask, and what they may see (tern/limit/limit.h).
 *
 * In order: the client's ACL, redins' blacklist and per-client rate (limit_client: REFUSED or
 * no response), its DNS cookie (RFC 7873: a fresh server cookie for every client cookie, and
 * BADCOOKIE or TC when cookies are required over UDP), then the ACL of the zone of the name
 * asked. For that ACL the zone is looked up here (answer_resolve_lookup(), as resolve would) and
 * the lookup handed on to resolve, so it costs no second walk. The verdicts are left
 * in the response for the dispatch stage, which applies them in their order of precedence; only
 * a drop by the client's rules ends the query here.
 *
 * Without limits in the view (v->limit NULL) the stage has nothing to judge and is not run:
 * the verdicts stay as answer_parsed() starts them (none), and resolve looks the name up itself.
 *
 * No allocation, no locks, no syscalls: the limit tables are read-only, the cookie secret too.
 */
#include <string.h>

#include "answer_int.h"
#include "tern/answer/answer_trace.h"

/* The ACL of zone z for this query's client. */
static limit_verdict_t zone_verdict(const answer_resp_t *r, const zone_t *z)
{
    return limit_zone(r->v->limit, z->apex, z->hash, &r->ctx->lc);
}

/* The per-zone ACL for a zone reached from another one (answer_int.h answer_hidden_fn). */
static bool zone_hidden(const answer_resp_t *r, const zone_t *z)
{
    return zone_verdict(r, z) != LIMIT_PASS;
}

/* The query's COOKIE option (cookies on, the query has EDNS and one): check the server cookie
 * it carries and make ours for the response. */
static void cookie(answer_resp_t *r, const limit_t *lim)
{
    answer_ctx_t *ctx = r->ctx;
    const wire_query_t *q = r->q;
    /* RFC 7873 §5.2: a fresh server cookie for every client cookie, valid or not */
    ctx->info.cookie = true;
    if (q->cookie_len > WIRE_COOKIE_CLIENT) {
        r->cookie_ok = limit_cookie_valid(lim, q->cookie, q->cookie + WIRE_COOKIE_CLIENT,
                                          q->cookie_len - WIRE_COOKIE_CLIENT, &ctx->lc, ctx->now_s);
        ctx->info.cookie_valid = r->cookie_ok;
    }
    memcpy(r->cookie, q->cookie, WIRE_COOKIE_CLIENT);
    limit_cookie_make(lim, q->cookie, &ctx->lc, ctx->now_s, r->cookie + WIRE_COOKIE_CLIENT);
    r->cookie_len = sizeof(r->cookie);
}

/* `ternctl explain` (answer_trace.h): the client's rules judged without charging its rate, and
 * the verdict recorded. Apart, so the workers' path keeps its one call. */
static __attribute__((noinline)) limit_verdict_t client_traced(answer_ctx_t *ctx,
                                                               const limit_t *lim, limit_why_t *why)
{
    answer_trace_t *t = ctx->trace;
    limit_verdict_t vd = limit_client_dry(lim, &ctx->lc, ctx->now_us, why);
    t->limits = true;
    t->client_vd = (uint8_t)vd;
    t->client_why = (uint8_t)*why;
    return vd;
}

/* The client's rules and its cookie. False: drop the query. */
static bool client(answer_resp_t *r, const limit_t *lim)
{
    answer_ctx_t *ctx = r->ctx;
    answer_info_t *info = &ctx->info;
    limit_client_of(&ctx->lc, r->client);
    limit_why_t why;
    limit_verdict_t vd = unlikely(ctx->trace != NULL)
                             ? client_traced(ctx, lim, &why)
                             : limit_client(lim, &ctx->lc, ctx->now_us, &why);
    info->limit_why = (uint8_t)why;
    info->limit_verdict = (uint8_t)vd;
    if (vd == LIMIT_DROP) {
        info->outcome = ANSWER_DROP_POLICY;
        return false;
    }
    r->refused = vd == LIMIT_REFUSE;
    if (limit_cookies(lim) && r->edns && r->q->has_cookie)
        cookie(r, lim);
    /* cookies required: over UDP, a client cookie without a valid server cookie learns ours
     * from BADCOOKIE (RFC 7873 §5.2.3); a query without any is told to use TCP */
    if (limit_cookies_required(lim) && r->transport == ANSWER_UDP && !r->cookie_ok &&
        r->pr == WIRE_OK && !r->refused) {
        r->badcookie = info->cookie;
        r->tc_only = !info->cookie;
    }
    info->badcookie = r->badcookie;
    r->hidden = zone_hidden;
    return true;
}

bool answer_policy(answer_resp_t *r)
{
    const limit_t *lim = r->v->limit;
    if (!client(r, lim))
        return false;
    /* the zone's ACL: only for a question that may be resolved (dispatch answers the others
     * without it); the lookup is resolve's too */
    if (r->pr != WIRE_OK || !r->v->table || r->refused || r->badcookie || r->tc_only)
        return true;
    const zone_t *z =
        answer_resolve_lookup(r->ctx, r->v->table, &r->q->name, r->q->qtype, &r->look);
    r->look_zone = z;
    r->looked = true;
    /* an unavailable zone answers SERVFAIL to everyone (resolve): no ACL to judge */
    if (z && !z->unavailable)
        r->zone_vd = (uint8_t)zone_verdict(r, z);
    if (unlikely(r->ctx->trace != NULL) && z && !z->unavailable) {
        r->ctx->trace->zone_judged = true;
        r->ctx->trace->zone_vd = r->zone_vd;
    }
    return true;
}
