/*
 * answer_put.c — the resolve stage's writer: RRsets into the response, with their RRSIGs when
 * the zone is signed and the query has DO=1, the negative answers' SOA (and its NSEC proof),
 * referrals and the additional section (answer_int.h).
 *
 * Decisions, and why:
 *   - DNSSEC lives here, not in finish: an RRSIG goes right after the RRset it covers (RFC 4035
 *     §3.1.1), and what fits (TC) and where names point depend on it, so a later pass could
 *     not add them without rewriting the message.
 *   - Minimal responses: positive answers carry no NS in authority (what modern Knot and NSD
 *     with minimal-responses do); it keeps answers small and UDP-safe.
 *   - Additional section: A then AAAA of each distinct target node, in RR order; it stops at the
 *     first RRset that does not fit, without TC (RFC 2181 §9). For answers, targets below a
 *     delegation are skipped (not authoritative data). For referrals the glue below the cut
 *     comes first and must fit, else TC (RFC 9471 §3, as Knot); then the in-zone addresses of
 *     the other name servers (sibling glue), dropped without TC when they do not fit.
 *   - Truncation: the first answer/authority RRset that does not fit sets TC and nothing more is
 *     added; the rcode is the one decided so far, the OPT is still written (space was reserved).
 *
 * No allocation, no locks, no syscalls: only the per-worker ctx and the caller's output buffer.
 */
#include <string.h>

#include "answer_int.h"
#include "tern/answer/answer_trace.h"
#include "tern/answer/select.h"
#include "tern/common/byteorder.h"
#include "tern/zone/zone.h"

/* The RRSIG Labels field of owner: its labels, the "*" of a wildcard not counted. */
static unsigned sig_labels(const uint8_t *owner)
{
    unsigned n = dname_labels(owner);
    return owner[0] == 1 && owner[1] == '*' ? n - 1 : n;
}

/* Write the RRSIG RRset rdata (count RRSIGs as an rdata sequence) after the RRset it covers,
 * keeping the writer's last name (a CNAME's target, which the chain follows). */
static bool put_rrsig(answer_resp_t *r, wire_section_t sec, uint16_t owner_off,
                      const uint8_t *owner, uint32_t ttl, uint16_t count, const uint8_t *rdata)
{
    uint16_t keep = r->w->last_name_off;
    int rc = wire_write_rrset(r->w, sec, owner_off, owner, WIRE_T_RRSIG, ttl, count, rdata);
    r->w->last_name_off = keep;
    if (likely(rc == 0))
        return true;
    r->tc = true;
    return false;
}

/* The RRSIGs (one per zone signer: two during an algorithm or CSK rollover) of count RRs of
 * rdata (picked by offs if not NULL) at owner, made or taken from the worker's cache, written
 * after them. Without a signer, or if signing fails, the RRset goes without that signature
 * (counted by the cache as a failure): the answer still reaches a non-validating client. */
bool answer_put_online(answer_resp_t *r, wire_section_t sec, uint16_t owner_off,
                       const uint8_t *owner, uint16_t type, uint32_t ttl, uint16_t count,
                       const uint8_t *rdata, const uint32_t *offs)
{
    answer_ctx_t *ctx = r->ctx;
    if (!ctx->dnssec) {
        if (unlikely(ctx->trace != NULL))
            answer_trace_sig(ctx->trace, r->zone, owner, type, ANSWER_SIG_NONE, 0);
        return true;
    }
    const dnssec_zone_t *dz = r->zone->dnssec;
    dnssec_worker_stats_t before;
    if (unlikely(ctx->trace != NULL))
        dnssec_worker_stats(ctx->dnssec, &before);
    unsigned labels = sig_labels(owner);
    size_t pos = 0;
    uint16_t n = 0;
    for (unsigned j = 0; j < dz->nzsk && j < DNSSEC_ZONE_SIGNERS_MAX; j++) {
        uint8_t *o = ctx->sigbuf + pos;
        int len = dnssec_online(ctx->dnssec, dz, j, r->zone, owner, labels, type, ttl, count, rdata,
                                offs, ctx->now_s, o + 2);
        if (len < 0)
            continue;
        o[0] = (uint8_t)(len >> 8);
        o[1] = (uint8_t)len;
        pos += 2u + (size_t)len;
        n++;
    }
    if (unlikely(ctx->trace != NULL)) {
        /* the context's own cache answered every signature, or some were made now */
        dnssec_worker_stats_t after;
        dnssec_worker_stats(ctx->dnssec, &after);
        answer_trace_sig(ctx->trace, r->zone, owner, type,
                         !n                              ? ANSWER_SIG_NONE
                         : after.hits - before.hits == n ? ANSWER_SIG_CACHE
                                                         : ANSWER_SIG_MADE,
                         n);
    }
    return !n || put_rrsig(r, sec, owner_off, owner, ttl, n, ctx->sigbuf);
}

/* Write RRset rr (its steering, if any, from zone gz) owned by owner with TTL ttl to the answer
 * or authority section; a miss sets TC (RFC 2181 §9). With DO=1 in a signed zone its RRSIGs
 * follow: made ahead, or per query for a steered subset and for an RRset synthesised (synth:
 * a wildcard's, or an ANAME's from its target). */
bool answer_put_as(answer_resp_t *r, wire_section_t sec, uint16_t owner_off, const uint8_t *owner,
                   const zone_t *gz, const zone_rrset_t *rr, uint32_t ttl, bool synth)
{
    const bool sign = unlikely(r->sign) && r->zone->dnssec;
    if (unlikely(rr->ext.geo) && (rr->type == WIRE_T_A || rr->type == WIRE_T_AAAA)) {
        /* a geo-steered RRset: the client's share of it (select.h) */
        answer_ctx_t *ctx = r->ctx;
        const zone_geo_t *g = zone_rrset_geo(gz, rr);
        const zone_geo_rr_t *pick = ctx->info.pick;
        unsigned n = answer_select(ctx, ctx->view, g, ctx->offs);
        if (ctx->info.pick != pick)
            ctx->info.pick_rdata = rr->rdata; /* the RRset the new pick is in */
        if (unlikely(ctx->trace != NULL))
            answer_trace_select_end(ctx->trace, ctx, g, gz, rr, owner, ctx->offs, n);
        if (likely(wire_write_rrs(r->w, sec, owner_off, owner, rr->type, ttl, (uint16_t)n,
                                  rr->rdata, ctx->offs) == 0))
            return !sign || answer_put_online(r, sec, owner_off, owner, rr->type, ttl, (uint16_t)n,
                                              rr->rdata, ctx->offs);
        r->tc = true;
        return false;
    }
    if (likely(wire_write_rrset(r->w, sec, owner_off, owner, rr->type, ttl, rr->count, rr->rdata) ==
               0)) {
        if (likely(!sign))
            return true;
        if (synth)
            return answer_put_online(r, sec, owner_off, owner, rr->type, ttl, rr->count, rr->rdata,
                                     NULL);
        uint16_t n;
        const uint8_t *sigs = dnssec_static(dnssec_zone_sigs(r->zone->dnssec), r->zone, rr, &n);
        if (unlikely(r->ctx->trace != NULL))
            answer_trace_sig(r->ctx->trace, r->zone, owner, rr->type,
                             sigs ? ANSWER_SIG_AHEAD : ANSWER_SIG_NONE, sigs ? n : 0);
        return !sigs || put_rrsig(r, sec, owner_off, owner, ttl, n, sigs);
    }
    r->tc = true;
    return false;
}

/* Compact denial of existence (RFC 9824) in authority, after the SOA: an NSEC at the name
 * itself listing the types it has (node n; NULL: the name does not exist, NXNAME), signed per
 * query. At a delegation only NS and DS are the parent's types (RFC 4035 §2.3). */
static void put_nsec(answer_resp_t *r, uint16_t owner_off, const uint8_t *owner,
                     const zone_node_t *n)
{
    answer_ctx_t *ctx = r->ctx;
    uint16_t types[256];
    unsigned nt = 0;
    bool cut = n && (n->flags & ZONE_NODE_CUT);
    for (unsigned k = 0; n && k < n->nrrsets; k++) {
        uint16_t t = n->rrsets[k].type;
        if (!cut || t == WIRE_T_NS || t == WIRE_T_DS)
            types[nt++] = t;
    }
    int len =
        dnssec_nsec_rdata(owner, types, nt, n == NULL, ctx->nsecbuf + 2, sizeof(ctx->nsecbuf) - 2);
    if (len < 0)
        return; /* a 254-byte name has no successor: no proof, the validator will say bogus */
    ctx->nsecbuf[0] = (uint8_t)(len >> 8);
    ctx->nsecbuf[1] = (uint8_t)len;
    uint32_t ttl = r->zone->neg_soa ? r->zone->neg_soa->ttl : 0; /* RFC 9077 */
    if (wire_write_rrset(r->w, WIRE_SEC_NS, owner_off, owner, WIRE_T_NSEC, ttl, 1, ctx->nsecbuf) !=
        0) {
        r->tc = true;
        return;
    }
    (void)answer_put_online(r, WIRE_SEC_NS, owner_off, owner, WIRE_T_NSEC, ttl, 1, ctx->nsecbuf,
                            NULL);
}

/* A/AAAA of the targets of NS/MX/SRV RRset rr (of zone z) that mode selects; cut is the
 * referral's delegation point (ANSWER_ADD_GLUE, ANSWER_ADD_SIBLING). Returns false when an RRset
 * did not fit: for ANSWER_ADD_GLUE that sets TC (RFC 9471 §3), otherwise the additional section
 * just stops (RFC 2181 §9). */
bool answer_put_additional(answer_resp_t *r, const zone_t *z, const zone_rrset_t *rr,
                           answer_add_t mode, const zone_node_t *cut)
{
    if (!zone_rrset_has_targets(rr))
        return true;
    for (unsigned i = 0; i < rr->count; i++) {
        const zone_node_t *n = zone_rrset_target(z, rr, i);
        if (!n)
            continue;
        bool below = n->cut != 0, in_domain = below && zone_node_cut(z, n) == cut;
        if ((mode == ANSWER_ADD_ANSWER && below) || (mode == ANSWER_ADD_GLUE && !in_domain) ||
            (mode == ANSWER_ADD_SIBLING && in_domain))
            continue;
        bool dup = false;
        for (unsigned j = 0; j < i && !dup; j++)
            dup = zone_rrset_target(z, rr, j) == n;
        if (dup)
            continue;
        /* RRsets are sorted by type, so A (1) and AAAA (28) come first and in this order. */
        for (unsigned k = 0; k < n->nrrsets && n->rrsets[k].type <= WIRE_T_AAAA; k++) {
            const zone_rrset_t *s = &n->rrsets[k];
            if (s->type != WIRE_T_A && s->type != WIRE_T_AAAA)
                continue;
            if (wire_write_rrset(r->w, WIRE_SEC_AR, 0, n->name, s->type, s->ttl, s->count,
                                 s->rdata) != 0) {
                if (mode == ANSWER_ADD_GLUE)
                    r->tc = true;
                return false;
            }
        }
    }
    return true;
}

/* Where zone z's apex already is in the message as a suffix of the question's name, for a
 * pointer to it; 0 when it is not (a CNAME chain into another zone, a name too far down for a
 * pointer). Spares the negative answers' SOA owner a name's view and a compression-table scan:
 * the bytes written are the same, a pointer to the same suffix of the question. */
static uint16_t apex_in_question(const answer_resp_t *r, const zone_t *z)
{
    const wire_query_t *q = r->ctx->q;
    const dname_view_t *v = &q->name;
    if (!q->has_question || v->nlabels < z->apex_labels)
        return 0;
    unsigned i = v->nlabels - z->apex_labels;
    size_t off = WIRE_HDR_LEN + (size_t)v->off[i];
    if (v->hash[i] != z->hash || off > PTR_MAX_OFF || r->w->len < WIRE_HDR_LEN + q->question_len ||
        memcmp(v->lc + v->off[i], z->apex, z->apex_len) != 0)
        return 0;
    return (uint16_t)off;
}

/* ctx->negt made for z's negative SOA soa: its record after the owner, rendered as the generic
 * writer renders it right after a question that shares exactly the apex with its names. Each
 * name points at its longest suffix that the message already holds: a suffix of the apex (in
 * the question, at a known place in it) or, for RNAME, a suffix of MNAME's literal labels (in
 * the record itself). A name with none is written whole. */
static void neg_template(answer_ctx_t *ctx, const zone_t *z, const zone_rrset_t *soa)
{
    struct answer_negt *t = &ctx->negt;
    size_t rdlen = tern_rd16(soa->rdata), alen = z->apex_len;
    t->ttl = soa->ttl;
    t->rdlen = (uint16_t)rdlen;
    t->apex_len = (uint8_t)alen;
    memcpy(t->rdata, soa->rdata + 2, rdlen);
    memcpy(t->apex, z->apex, alen);
    t->ok = false;
    t->nptr = 0;
    size_t nlen = rdlen - 20;
    int a = dname_check(t->rdata, nlen);
    int b = a > 0 ? dname_check(t->rdata + a, nlen - (size_t)a) : -1;
    if (b < 0 || (size_t)a + (size_t)b != nlen)
        return;
    /* views of the apex and of each name: their label offsets (made only when the SOA
     * changes, so their hashes cost nothing that matters) */
    dname_view_t av, nv, mv;
    dname_view_init(&av, z->apex);
    unsigned an = av.nlabels;
    uint8_t *o = t->rr;
    tern_wr16(o, WIRE_T_SOA);
    tern_wr16(o + 2, WIRE_CLASS_IN);
    tern_wr32(o + 4, soa->ttl);
    size_t len = 10;
    unsigned mlit = 0;   /* MNAME's labels written literally (mv: MNAME's view) */
    uint16_t mstart = 0; /* where MNAME starts in rr[] */
    const uint8_t *nm[2] = {t->rdata, t->rdata + a};
    for (unsigned i = 0; i < 2; i++) {
        dname_view_init(&nv, nm[i]);
        const uint8_t *lc = nv.lc, *off = nv.off;
        size_t l = nv.len;
        unsigned n = nv.nlabels, j = 0;
        bool rec = false;
        uint16_t to = 0;
        for (; j < n; j++) { /* the longest suffix first, the root never */
            const uint8_t *sfx = lc + off[j];
            size_t slen = l - off[j];
            for (unsigned k = 0; i == 1 && k < mlit && !rec; k++) {
                if ((size_t)(mv.len - mv.off[k]) == slen &&
                    memcmp(mv.lc + mv.off[k], sfx, slen) == 0) {
                    rec = true;
                    to = (uint16_t)(2 + mstart + mv.off[k]);
                }
            }
            if (rec)
                break;
            bool in_apex = false;
            for (unsigned k = 0; k < an && !in_apex; k++)
                in_apex = alen - av.off[k] == slen && memcmp(z->apex + av.off[k], sfx, slen) == 0;
            if (in_apex) {
                to = (uint16_t)(alen - slen);
                break;
            }
        }
        /* below the apex: the question's label above the apex must not be this one's */
        t->guard[i][0] = 0;
        if (n > an && l - off[n - an] == alen && memcmp(lc + off[n - an], z->apex, alen) == 0)
            memcpy(t->guard[i], lc + off[n - an - 1], 1u + lc[off[n - an - 1]]);
        if (i == 0) {
            mv = nv;
            mlit = j;
            mstart = (uint16_t)len;
        }
        if (j == n) {
            memcpy(o + len, nm[i], l); /* nothing to point at: whole, root included */
            len += l;
            continue;
        }
        memcpy(o + len, nm[i], off[j]); /* literal labels, in the case they were given */
        len += off[j];
        t->ptr_at[t->nptr] = (uint16_t)len;
        t->ptr_to[t->nptr] = to;
        t->ptr_rec[t->nptr] = rec;
        t->nptr++;
        len += 2;
    }
    memcpy(o + len, t->rdata + nlen, 20); /* serial, refresh, retry, expire, minimum */
    len += 20;
    tern_wr16(o + 8, (unsigned)(len - 10));
    t->len = (uint16_t)len;
    t->ok = true;
}

/* The negative SOA from ctx->negt when this answer is the usual negative answer: nothing
 * written after the question yet, the apex at owner_off in the question, and the question's
 * label above the apex (if any) none of the SOA names' (else the generic writer would point
 * further into the question). The bytes are the generic writer's, without a search for
 * suffixes. 1: written, 0: not for this answer, -1: no room (TC). */
static int put_neg_tpl(answer_resp_t *r, const zone_t *z, const zone_rrset_t *soa,
                       uint16_t owner_off)
{
    answer_ctx_t *ctx = r->ctx;
    wire_writer_t *w = r->w;
    struct answer_negt *t = &ctx->negt;
    if (ctx->neg_plain || owner_off == 0 || w->count[WIRE_SEC_AN] || w->count[WIRE_SEC_NS] ||
        w->count[WIRE_SEC_AR])
        return 0;
    size_t rdlen = tern_rd16(soa->rdata);
    if (t->ttl != soa->ttl || t->rdlen != rdlen || t->apex_len != z->apex_len ||
        memcmp(t->rdata, soa->rdata + 2, rdlen) != 0 || memcmp(t->apex, z->apex, z->apex_len) != 0)
        neg_template(ctx, z, soa);
    if (!t->ok || w->len + 2 + t->len > PTR_MAX_OFF)
        return 0;
    const dname_view_t *v = &ctx->q->name;
    unsigned above = v->nlabels - z->apex_labels; /* apex_in_question(): nlabels >= apex's */
    if (above > 0) {
        const uint8_t *lab = v->lc + v->off[above - 1];
        for (unsigned i = 0; i < 2; i++)
            if (t->guard[i][0] == lab[0] && memcmp(t->guard[i] + 1, lab + 1, lab[0]) == 0)
                return 0;
    }
    uint16_t to[2];
    for (unsigned i = 0; i < t->nptr; i++)
        to[i] = (uint16_t)(t->ptr_rec[i] ? w->len + t->ptr_to[i] : owner_off + t->ptr_to[i]);
    if (wire_write_rr_raw(w, WIRE_SEC_NS, owner_off, t->rr, t->len, t->ptr_at, to, t->nptr) == 0)
        return 1;
    r->tc = true;
    return -1;
}

/* The negative-answer SOA of z in authority, unsigned: rendered ahead (put_neg_tpl()), or as
 * answer_put() writes it, with the views of its two names from ctx->soa (made again only when the
 * SOA's name bytes differ from the last one's). */
static bool put_neg_soa(answer_resp_t *r, const zone_t *z, uint16_t owner_off)
{
    const zone_rrset_t *soa = z->neg_soa;
    size_t rdlen = soa->count == 1 ? tern_rd16(soa->rdata) : 0;
    if (rdlen <= 20 || unlikely(r->sign))
        return answer_put(r, WIRE_SEC_NS, owner_off, z->apex, soa);
    int tr = put_neg_tpl(r, z, soa, owner_off);
    if (tr != 0)
        return tr > 0;
    const uint8_t *names = soa->rdata + 2;
    size_t nlen = rdlen - 20; /* MNAME RNAME, then serial, refresh, retry, expire, minimum */
    answer_ctx_t *ctx = r->ctx;
    if (ctx->soa.len != nlen || memcmp(ctx->soa.names, names, nlen) != 0) {
        int a = dname_check(names, nlen);
        int b = a > 0 ? dname_check(names + a, nlen - (size_t)a) : -1;
        if (b < 0 || (size_t)a + (size_t)b != nlen)
            return answer_put(r, WIRE_SEC_NS, owner_off, z->apex, soa);
        memcpy(ctx->soa.names, names, nlen);
        ctx->soa.len = (uint16_t)nlen;
        dname_view_init(&ctx->soa.view[0], ctx->soa.names);
        dname_view_init(&ctx->soa.view[1], ctx->soa.names + a);
    }
    const dname_view_t *v[2] = {&ctx->soa.view[0], &ctx->soa.view[1]};
    if (likely(wire_write_rrset_names(r->w, WIRE_SEC_NS, owner_off, z->apex, WIRE_T_SOA, soa->ttl,
                                      1, soa->rdata, v, 2) == 0))
        return true;
    r->tc = true;
    return false;
}

/* The zone's negative-answer SOA (TTL already min(TTL, MINIMUM)) in authority: RFC 2308 §3.
 * Signed, the proof follows: an NSEC at the name (owner, written at owner_off) with node n's
 * types, or NXNAME when n is NULL (and the rcode becomes NOERROR, RFC 9824 §3). */
void answer_put_neg(answer_resp_t *r, const zone_t *z, uint16_t owner_off, const uint8_t *owner,
                    const zone_node_t *n)
{
    r->wild = false;
    if (z->neg_soa && put_neg_soa(r, z, apex_in_question(r, z)) && r->sign && z->dnssec) {
        if (!n)
            r->rcode = WIRE_RC_NOERROR;
        put_nsec(r, owner_off, owner, n);
    }
}

/* Referral (RFC 1034 §4.3.2 step 3b): the cut's NS in authority, then the glue below the cut
 * (all of it or TC, RFC 9471), then in-zone addresses of the other name servers if they fit. */
void answer_put_referral(answer_resp_t *r, const zone_t *z, const zone_node_t *cut)
{
    const zone_rrset_t *ns = zone_node_rrset(cut, WIRE_T_NS);
    r->wild = false;
    if (!ns || !answer_put(r, WIRE_SEC_NS, 0, cut->name, ns))
        return;
    if (r->sign && z->dnssec) {
        /* signed: the DS of the child with its RRSIG, or the proof there is none (an insecure
         * delegation, RFC 4035 §3.1.4) */
        const zone_rrset_t *ds = zone_node_rrset(cut, WIRE_T_DS);
        if (ds) {
            if (!answer_put(r, WIRE_SEC_NS, 0, cut->name, ds))
                return;
        } else {
            put_nsec(r, 0, cut->name, cut);
            if (r->tc)
                return;
        }
    }
    if (answer_put_additional(r, z, ns, ANSWER_ADD_GLUE, cut))
        (void)answer_put_additional(r, z, ns, ANSWER_ADD_SIBLING, cut);
}
