/*
 * answer_resolve.c — the resolve stage: RFC 1034 §4.3.2 over the view's zones (answer.h lists
 * the RFCs), pure lookup and writing. It makes no policy decision and knows nothing of RRL: it
 * starts from the zone the policy stage found for the name asked, asks r->hidden (the policy's
 * per-zone ACL) only where a chain crosses into another zone, and returns what it answered
 * (answer_res_t) for the finish stage to class.
 *
 * Decisions the header leaves open, and why:
 *   - CNAME chains cross zones (any zone of the table). AA is decided by the first lookup only:
 *     set unless the query name itself is a referral (as Knot: AA is set before chasing). A
 *     chain ending below a delegation gets that referral's NS in authority and glue in
 *     additional, with AA still set; a chain leaving our zones ends there with NOERROR; the
 *     rcode follows the last lookup (RFC 6604 §2).
 *   - Chain limit: at most ANSWER_CNAME_MAX CNAMEs (written or synthesised from a DNAME) are
 *     followed; if the name reached after the last one is again a CNAME or below a DNAME, the
 *     chain stops (NOERROR) and the resolver restarts from the last target, as RFC 1034 §3.6.2
 *     lets it. A loop is cut as soon as a node's CNAME or DNAME would be used a second time (a
 *     CNAME's target is fixed, so from there on the chain only repeats — this holds for
 *     wildcard CNAMEs too; a DNAME used twice is a loop or a name growing by a label per turn,
 *     where NSD stops too).
 *   - DNAME (RFC 6672): found on the closest-encloser walk (zone_lookup), so it costs nothing
 *     more than the NXDOMAIN it replaces; the DNAME's owner is written as a pointer into the
 *     current name, the synthesised CNAME's target is built in a per-worker buffer from the
 *     current name's labels (their case kept) and the DNAME's target.
 *   - qtype CNAME, ANY, RRSIG and NSEC at a CNAME node do not follow the chain: the first two
 *     ask for the CNAME itself, the last two for data that may live beside it (RFC 4035 §2.5).
 *   - ANY (RFC 8482 §4.1): the node's first RRset in type order that is not an RRSIG. A CNAME
 *     can only share its node with RRSIG/NSEC, which sort after it, so a CNAME node answers its
 *     CNAME. An empty non-terminal answers NODATA.
 *   - DS for a zone apex that we also serve the parent of is answered from the parent (RFC 4035
 *     §3.1.4.1, Knot does the same); if the parent does not delegate that name, the child
 *     answers as for any other type.
 *
 * No allocation, no locks, no syscalls: only the per-worker ctx and the immutable view.
 */
#include <string.h>

#include "answer_int.h"
#include "tern/answer/answer_trace.h"
#include "tern/zone/zone.h"
#include "tern/zone/zone_table.h"

/* `ternctl explain` records this stage's decisions (answer_trace.h); workers have no trace and
 * pay one predicted branch per hook. */
#define TRACED(r) unlikely((r)->ctx->trace != NULL)

/* One step into the trace (NULL when it is full); apart from the stage's functions, which stay
 * as they were. */
static __attribute__((noinline)) answer_trace_step_t *
trace(const answer_resp_t *r, answer_step_kind_t kind, const zone_t *z, const uint8_t *name,
      const uint8_t *target, unsigned detail, unsigned flag, uint16_t type)
{
    answer_trace_step_t *s = answer_trace_step(r->ctx->trace, kind, z, name, target);
    if (s) {
        s->detail = (uint8_t)detail;
        s->flag = (uint8_t)flag;
        s->type = type;
    }
    return s;
}

static const zone_rrset_t *pick_any(const zone_node_t *n)
{
    for (unsigned k = 0; k < n->nrrsets; k++)
        if (n->rrsets[k].type != WIRE_T_RRSIG)
            return &n->rrsets[k];
    return NULL;
}

static bool follows_cname(uint16_t qtype)
{
    return qtype != WIRE_T_CNAME && qtype != WIRE_T_ANY && qtype != WIRE_T_RRSIG &&
           qtype != WIRE_T_NSEC;
}

/* A DS lookup: at a zone apex the parent side owns it (RFC 4035 §3.1.4.1) when we serve the
 * parent and it delegates exactly this name. Apart from the common lookup, which would
 * otherwise keep all of this one's arguments alive across its calls (bench/micro.sh). */
static __attribute__((noinline)) const zone_t *lookup_ds(answer_ctx_t *ctx, const zone_table_t *t,
                                                         const dname_view_t *v, zone_lookup_t *res)
{
    unsigned apex;
    const zone_t *z = zone_table_find(t, v, &apex);
    if (!z)
        return NULL;
    if (apex == 0 && v->nlabels > 0) {
        dname_view_t *p = &ctx->parent;
        dname_view_init(p, v->lc + v->off[1]);
        unsigned papex;
        const zone_t *pz = zone_table_find(t, p, &papex);
        if (pz) {
            zone_lookup(pz, v, papex + 1, res);
            if (res->kind == ZONE_LOOKUP_EXACT && res->cut && res->node == res->cut)
                return pz;
        }
    }
    zone_lookup(z, v, apex, res);
    return z;
}

static inline const zone_t *lookup(answer_ctx_t *ctx, const zone_table_t *t, const dname_view_t *v,
                                   uint16_t qtype, zone_lookup_t *res)
{
    if (unlikely(qtype == WIRE_T_DS))
        return lookup_ds(ctx, t, v, res);
    unsigned apex;
    const zone_t *z = zone_table_find(t, v, &apex);
    if (z)
        zone_lookup(z, v, apex, res);
    return z;
}

const zone_t *answer_resolve_lookup(answer_ctx_t *ctx, const zone_table_t *t, const dname_view_t *v,
                                    uint16_t qtype, zone_lookup_t *res)
{
    return lookup(ctx, t, v, qtype, res);
}

/* The chain being followed: the current name, where it already is in the message, and the
 * CNAME and DNAME owners used so far (loop detection). */
typedef struct chase {
    const dname_view_t *v; /* lowercased view of the current name */
    const uint8_t *owner;  /* the current name as written (case kept), uncompressed */
    uint16_t owner_off;    /* where the message holds it (0: write it from owner) */
    unsigned hops;         /* CNAMEs written so far, synthesised ones included */
    const zone_node_t *seen[ANSWER_CNAME_MAX];
} chase_t;

/* Whether node n's CNAME or DNAME was already used by this chain: from there on it can only
 * repeat itself (a CNAME's target is fixed; a DNAME used twice is a loop or a name that grows
 * with every turn, which NSD stops at the same point). */
static bool chase_seen(const chase_t *c, const zone_node_t *n)
{
    for (unsigned i = 0; i < c->hops; i++)
        if (c->seen[i] == n)
            return true;
    return false;
}

/* Move the chain to the name the CNAME just written points at: its target, uncompressed at
 * target, sits in the message at the writer's last_name_off. */
static void chase_to(answer_ctx_t *ctx, chase_t *c, const zone_node_t *n, const uint8_t *target)
{
    c->seen[c->hops++] = n;
    c->owner = target;
    c->owner_off = ctx->writer.last_name_off <= PTR_MAX_OFF ? ctx->writer.last_name_off : 0;
    dname_view_init(&ctx->chase, target); /* the view of the old name is not needed any more */
    c->v = &ctx->chase;
}

/* RFC 6672 §3.3: the name below DNAME owner n, at label `label` of the current name, is
 * answered with the DNAME and a CNAME to the name with that suffix replaced by the DNAME's
 * target (TTL the DNAME's, owner the name as asked). Returns true when the chain goes on from
 * the new name; false when the answer is complete (YXDOMAIN, loop, limit, no room). */
static bool synthesize(answer_resp_t *r, chase_t *c, const zone_node_t *n, unsigned label)
{
    answer_ctx_t *ctx = r->ctx;
    const zone_rrset_t *dn = zone_node_rrset(n, WIRE_T_DNAME);
    if (c->hops == ANSWER_CNAME_MAX || chase_seen(c, n)) {
        if (TRACED(r))
            trace(r, ANSWER_STEP_STOP, r->zone, c->owner, n->name,
                  c->hops == ANSWER_CNAME_MAX ? ANSWER_STOP_LIMIT : ANSWER_STOP_LOOP, 0, 0);
        return false;
    }
    if (!answer_put(r, WIRE_SEC_AN, 0, n->name, dn))
        return false;
    /* the new name: the labels above the owner as asked, then the target as written */
    const uint8_t *target = dn->rdata + 2;
    size_t prefix = c->v->off[label], tlen = (size_t)dn->rdata[0] << 8 | dn->rdata[1];
    if (prefix + tlen > DNAME_MAXLEN) {
        r->rcode = WIRE_RC_YXDOMAIN; /* §2.2: the result would not be a domain name */
        if (TRACED(r))
            trace(r, ANSWER_STEP_STOP, r->zone, c->owner, n->name, ANSWER_STOP_YXDOMAIN, 0, 0);
        return false;
    }
    /* the two buffers alternate: the current name may be the previous synthesis */
    uint8_t *rd = ctx->synth[c->hops & 1];
    rd[0] = (uint8_t)((prefix + tlen) >> 8);
    rd[1] = (uint8_t)(prefix + tlen);
    memcpy(rd + 2, c->owner, prefix);
    memcpy(rd + 2 + prefix, target, tlen);
    if (wire_write_rrset(r->w, WIRE_SEC_AN, c->owner_off, c->owner, WIRE_T_CNAME, dn->ttl, 1, rd) !=
        0) {
        r->tc = true;
        return false;
    }
    /* a validator can check the DNAME's signature and synthesise the CNAME itself (RFC 6672
     * §5.3.1), but one that does not know DNAME needs the CNAME signed */
    if (r->sign && r->zone->dnssec &&
        !answer_put_online(r, WIRE_SEC_AN, c->owner_off, c->owner, WIRE_T_CNAME, dn->ttl, 1, rd,
                           NULL))
        return false;
    if (TRACED(r)) {
        answer_trace_step_t *s =
            trace(r, ANSWER_STEP_DNAME, r->zone, c->owner, rd + 2, 0, 0, WIRE_T_DNAME);
        if (s)
            memcpy(s->target2, n->name, dname_len(n->name));
    }
    chase_to(ctx, c, n, rd + 2);
    /* qtype CNAME asked for the CNAME, and has it; every other type follows it (ANY too, as NSD
     * and Knot do: nothing else lives at a synthesised name) */
    return ctx->q->qtype != WIRE_T_CNAME;
}

/* ---- ANAME ---- */

typedef enum {
    WALK_FOUND,  /* *tz, *rr: the RRset of qtype */
    WALK_NODATA, /* no such name, or no address there */
    WALK_OUT,    /* v holds the name where the walk leaves our zones */
    WALK_LOOP,   /* more than ANSWER_CNAME_MAX hops */
} walk_t;

/* From an ANAME's target through the zones of t to the RRset of qtype: CNAMEs and ANAMEs on the
 * way are followed (hops already used count against the limit), *ttl lowered to each one's. A
 * delegation or DNAME on the way leaves our authority for the name: the resolver answers it. */
static walk_t aname_walk(const zone_table_t *t, dname_view_t *v, const uint8_t *target,
                         uint16_t qtype, unsigned hops, uint32_t *ttl, const zone_t **tz,
                         const zone_rrset_t **rr)
{
    for (;;) {
        dname_view_init(v, target);
        unsigned apex;
        const zone_t *z = zone_table_find(t, v, &apex);
        if (!z)
            return WALK_OUT;
        zone_lookup_t res;
        zone_lookup(z, v, apex, &res);
        if (res.cut || res.kind == ZONE_LOOKUP_DNAME)
            return WALK_OUT;
        if (res.kind == ZONE_LOOKUP_NXDOMAIN)
            return WALK_NODATA;
        const zone_rrset_t *s = zone_node_rrset(res.node, qtype);
        if (s) {
            *tz = z;
            *rr = s;
            if (s->ttl < *ttl)
                *ttl = s->ttl;
            return WALK_FOUND;
        }
        const zone_rrset_t *next = zone_node_rrset(res.node, WIRE_T_CNAME);
        if (!next)
            next = zone_node_rrset(res.node, WIRE_T_ANAME);
        if (!next)
            return WALK_NODATA;
        if (++hops > ANSWER_CNAME_MAX)
            return WALK_LOOP;
        if (next->ttl < *ttl)
            *ttl = next->ttl;
        target = next->rdata + 2;
    }
}

int answer_aname_exit(const zone_table_t *t, const uint8_t *target, uint16_t qtype, uint8_t *out)
{
    dname_view_t v;
    uint32_t ttl = UINT32_MAX;
    const zone_t *tz;
    const zone_rrset_t *rr;
    if (aname_walk(t, &v, target, qtype, 0, &ttl, &tz, &rr) != WALK_OUT)
        return 0;
    memcpy(out, v.lc, v.len);
    return 1;
}

static inline answer_res_t res_of(answer_res_kind_t kind)
{
    return (answer_res_t){.kind = kind, .at = {.owner = NULL}};
}

/* Whether zone z, which a chain or an ANAME reached from another zone, is hidden from this
 * client (the policy stage's judgement, answer_int.h). */
static inline bool is_hidden(const answer_resp_t *r, const zone_t *z)
{
    return unlikely(r->hidden != NULL) && r->hidden(r, z);
}

/* The ANAME step: its target, what the walk found, and where it left our zones (OUT). */
static __attribute__((noinline)) void trace_aname(const answer_resp_t *r, const zone_t *z,
                                                  const uint8_t *owner, const uint8_t *target,
                                                  walk_t w, const uint8_t *exit)
{
    answer_trace_step_t *s =
        trace(r, ANSWER_STEP_ANAME, z, owner, target, (unsigned)w, 0, r->q->qtype);
    if (s && w == WALK_OUT)
        memcpy(s->target2, exit, dname_len(exit));
}

/* A or AAAA at node n of zone z, which has no RRset of that type but an ANAME (an): the
 * target's, found in our zones or in what the resolver got (answer.h). */
static answer_res_t aname(answer_resp_t *r, const chase_t *c, const zone_t *z, const zone_node_t *n,
                          const zone_rrset_t *an)
{
    answer_ctx_t *ctx = r->ctx;
    const uint16_t qtype = ctx->q->qtype;
    uint32_t ttl = an->ttl;
    const zone_t *tz = NULL;
    const zone_rrset_t *rr = NULL;
    /* the chain's own view is not needed any more: the answer is owned by c->owner */
    walk_t w = aname_walk(r->v->table, &ctx->chase, an->rdata + 2, qtype, c->hops, &ttl, &tz, &rr);
    if (w == WALK_FOUND && tz != z && is_hidden(r, tz))
        w = WALK_NODATA; /* a zone this client may not see lends it nothing */
    if (TRACED(r))
        trace_aname(r, z, c->owner, an->rdata + 2, w, ctx->chase.lc);
    if (w == WALK_FOUND) {
        (void)answer_put_as(r, WIRE_SEC_AN, c->owner_off, c->owner, tz, rr, ttl, true);
        return res_of(ANSWER_RES_ANSWER);
    }
    if (w == WALK_OUT) {
        const dname_view_t *v = &ctx->chase;
        const aname_result_t *res =
            aname_results_find(r->v->aname, v->lc, v->len, v->hash[0], qtype);
        if (res && res->state == ANAME_OK && res->count) {
            zone_rrset_t s = {.type = qtype,
                              .count = res->count,
                              .ttl = res->ttl < ttl ? res->ttl : ttl,
                              .rdata_len = res->rdata_len,
                              .rdata = res->rdata};
            if (TRACED(r))
                trace(r, ANSWER_STEP_ANSWER, z, c->owner, ctx->chase.lc, 1, 0, qtype);
            (void)answer_put_as(r, WIRE_SEC_AN, c->owner_off, c->owner, z, &s, s.ttl, true);
            return res_of(ANSWER_RES_ANSWER);
        }
        if (!res || res->state == ANAME_PENDING) {
            w = WALK_LOOP; /* not resolved yet: SERVFAIL, as for a loop */
            if (TRACED(r))
                trace(r, ANSWER_STEP_STOP, z, c->owner, v->lc, ANSWER_STOP_PENDING, 0, qtype);
        }
    }
    if (w == WALK_LOOP) {
        r->rcode = WIRE_RC_SERVFAIL;
        r->aa = false;
        return res_of(ANSWER_RES_NONE);
    }
    answer_put_neg(r, z, c->owner_off, c->owner, n);
    return res_of(ANSWER_RES_NODATA);
}

/* An EXACT or WILDCARD match res of the current name in zone z: the node's data, owned by the
 * name asked (RFC 4592 §4.3: a wildcard answer carries the query name, here as a pointer to
 * it). True when the answer is complete (*out says what it was), false when the chain goes on
 * from the CNAME's target. */
static bool at_node(answer_resp_t *r, chase_t *c, const zone_t *z, const zone_lookup_t *res,
                    answer_res_t *out)
{
    const uint16_t qtype = r->q->qtype;
    const zone_node_t *n = res->node;
    const zone_rrset_t *rr;
    *out = res_of(ANSWER_RES_NONE);
    r->wild = res->kind == ZONE_LOOKUP_WILDCARD;
    if (qtype == WIRE_T_ANY) {
        rr = pick_any(n);
    } else {
        rr = zone_node_rrset(n, qtype);
        const zone_rrset_t *cn;
        if (!rr && follows_cname(qtype) && (cn = zone_node_rrset(n, WIRE_T_CNAME))) {
            if (c->hops == ANSWER_CNAME_MAX || chase_seen(c, n)) {
                if (TRACED(r))
                    trace(r, ANSWER_STEP_STOP, z, c->owner, cn->rdata + 2,
                          c->hops == ANSWER_CNAME_MAX ? ANSWER_STOP_LIMIT : ANSWER_STOP_LOOP, 0, 0);
                return true; /* limit, or a loop: every CNAME of it is already in the answer */
            }
            if (TRACED(r))
                trace(r, ANSWER_STEP_CNAME, z, c->owner, cn->rdata + 2, 0, 0, WIRE_T_CNAME);
            if (!answer_put(r, WIRE_SEC_AN, c->owner_off, c->owner, cn))
                return true;
            chase_to(r->ctx, c, n, cn->rdata + 2);
            return false;
        }
    }
    if (!rr) {
        const zone_rrset_t *an;
        if ((qtype == WIRE_T_A || qtype == WIRE_T_AAAA) &&
            unlikely((an = zone_node_rrset(n, WIRE_T_ANAME)) != NULL)) {
            *out = aname(r, c, z, n, an);
            return true;
        }
        if (TRACED(r))
            trace(r, ANSWER_STEP_NODATA, z, c->owner, NULL, 0, 0, qtype);
        answer_put_neg(r, z, c->owner_off, c->owner, n); /* NODATA, also at empty non-terminals */
        *out = res_of(ANSWER_RES_NODATA);
        return true;
    }
    if (TRACED(r))
        trace(r, ANSWER_STEP_ANSWER, z, c->owner, r->wild ? n->name : NULL, 0, r->wild, rr->type);
    if (answer_put(r, WIRE_SEC_AN, c->owner_off, c->owner, rr))
        (void)answer_put_additional(r, z, rr, ANSWER_ADD_ANSWER, NULL);
    r->wild = false;
    /* a wildcard answer is "the same" for every name it synthesises (Knot's RRL) */
    if (res->kind == ZONE_LOOKUP_WILDCARD)
        *out = (answer_res_t){.kind = ANSWER_RES_WILDCARD, .at = {.owner = n->name}};
    else
        *out = res_of(ANSWER_RES_ANSWER);
    return true;
}

/* The current name of chain c, looked up in zone z as res: a referral, NXDOMAIN, a DNAME's
 * synthesis or the node's data. True when the answer is complete (*out), false when the chain
 * goes on from c's new name. first: this is the name asked (AA is decided by it alone). */
static bool step(answer_resp_t *r, chase_t *c, const zone_t *z, const zone_lookup_t *res,
                 bool first, answer_res_t *out)
{
    if (TRACED(r))
        trace(r, ANSWER_STEP_LOOKUP, z, c->owner, NULL, res->kind, res->cut != NULL, 0);
    if (res->cut &&
        !(res->kind == ZONE_LOOKUP_EXACT && res->node == res->cut && r->q->qtype == WIRE_T_DS)) {
        if (first)
            r->aa = false;
        if (TRACED(r))
            trace(r, ANSWER_STEP_REFERRAL, z, c->owner, res->cut->name, 0, 0, WIRE_T_NS);
        answer_put_referral(r, z, res->cut);
        *out = (answer_res_t){.kind = ANSWER_RES_REFERRAL, .at = {.owner = res->cut->name}};
        return true;
    }
    if (res->kind == ZONE_LOOKUP_NXDOMAIN) {
        r->rcode = WIRE_RC_NXDOMAIN;
        if (TRACED(r))
            trace(r, ANSWER_STEP_NXDOMAIN, z, c->owner, NULL, 0, 0, 0);
        answer_put_neg(r, z, c->owner_off, c->owner, NULL);
        *out = (answer_res_t){.kind = ANSWER_RES_NXDOMAIN, .at = {.zone = z}};
        return true;
    }
    if (res->kind == ZONE_LOOKUP_DNAME) {
        *out = res_of(ANSWER_RES_NONE);
        return !synthesize(r, c, res->node, res->encloser_label);
    }
    return at_node(r, c, z, res, out);
}

answer_res_t answer_resolve(answer_resp_t *r)
{
    answer_ctx_t *ctx = r->ctx;
    const wire_query_t *q = r->q;
    /* the name asked: the policy stage looked it up already when it had a zone ACL to judge */
    zone_lookup_t next;
    const zone_lookup_t *res = &r->look;
    const zone_t *z = r->look_zone;
    if (likely(!r->looked)) {
        res = &next;
        z = lookup(ctx, r->v->table, &q->name, q->qtype, &next);
    }
    if (!z) {
        r->rcode = WIRE_RC_REFUSED;
        if (TRACED(r))
            trace(r, ANSWER_STEP_STOP, NULL, q->qname, NULL, ANSWER_STOP_NOZONE, 0, 0);
        return res_of(ANSWER_RES_NONE);
    }
    /* seen[] is read below hops only: not zeroed (8 pointers a query) */
    chase_t c;
    c.v = &q->name;
    c.owner = q->qname;
    c.owner_off = QNAME_OFF;
    c.hops = 0;
    for (bool first = true;; first = false) {
        if (unlikely(z->unavailable)) {
            /* a secondary zone with no data, or expired: no authoritative answer at all */
            r->rcode = WIRE_RC_SERVFAIL;
            r->aa = false;
            if (TRACED(r))
                trace(r, ANSWER_STEP_STOP, z, c.owner, NULL, ANSWER_STOP_UNAVAILABLE, 0, 0);
            return res_of(ANSWER_RES_NONE);
        }
        if (first) {
            r->aa = true;
            r->asked = z;
        } else if (z != r->zone && is_hidden(r, z)) {
            /* a chain into a zone this client may not see stops at the CNAME, as if it left
             * our zones: that zone's data must not leak through another zone's alias */
            if (TRACED(r))
                trace(r, ANSWER_STEP_STOP, z, c.owner, NULL, ANSWER_STOP_HIDDEN, 0, 0);
            return res_of(ANSWER_RES_ANSWER);
        }
        r->zone = z;
        answer_res_t out;
        if (step(r, &c, z, res, first, &out))
            return out;
        r->wild = false;
        z = lookup(ctx, r->v->table, c.v, q->qtype, &next);
        res = &next;
        if (!z) {
            if (TRACED(r))
                trace(r, ANSWER_STEP_STOP, NULL, c.owner, NULL, ANSWER_STOP_LEFT, 0, 0);
            return res_of(ANSWER_RES_ANSWER); /* the chain left our zones: the resolver takes
                                                 it from here */
        }
    }
}
