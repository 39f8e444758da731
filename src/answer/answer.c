/*
 * answer.c — parse → policy → lookup → write for one query, over one zone_table snapshot.
 *
 * Decisions the header leaves open, and why:
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
 * No allocation, no locks, no syscalls: only the per-worker ctx, the caller's output buffer and
 * the immutable table.
 */
#include "tern/answer/answer.h"

#include <string.h>

#include "tern/answer/select.h"
#include "tern/common/byteorder.h"
#include "tern/common/err.h"
#include "tern/zone/zone.h"

/* Plain DNS over UDP: RFC 1035 §4.2.1 limits a message to 512 bytes without EDNS, and RFC 6891
 * §6.2.5 treats smaller advertised sizes as 512. */
#define UDP_MIN 512u

/* The TCP length prefix is 16 bits (RFC 1035 §4.2.2). */
#define TCP_MAX 65535u

/* Compression pointers carry a 14-bit offset (RFC 1035 §4.1.4): a CNAME target written beyond
 * it in a large TCP response is repeated by value instead of pointed at. */
#define PTR_MAX_OFF 0x3FFFu

/* Offset of the question name in every message (right after the 12-byte header). */
#define QNAME_OFF WIRE_HDR_LEN

/* RFC 1035 §3.3: a <character-string> is at most 255 bytes; a longer identity or version is
 * cut there rather than split, CHAOS answers are for humans. */
#define TXT_STR_MAX 255u

typedef struct resp {
    answer_ctx_t *ctx;
    wire_writer_t *w;
    const zone_t *zone; /* the zone of the RRsets being written (geo data) */
    unsigned rcode;
    bool aa;
    bool tc;
    bool drop;               /* a zone's ACL says: no response at all */
    bool sign;               /* DO=1: RRsets of signed zones go with their RRSIGs */
    bool wild;               /* the RRsets being written are synthesised from a wildcard: signed
                                per query as the name asked (dnssec_zone.h) */
    uint8_t cls;             /* RRL class of the response (limit_class_t) */
    uint32_t cls_key;        /* the name hash RRL keys that class by, when at hand; else */
    const uint8_t *cls_name; /* the name to hash, only if RRL asks (no hash when it is off) */
} resp_t;

/* The RRL class of the response so far (the last link of a chain decides): its key is the hash
 * at hand, or that of name, computed only if RRL asks. */
static inline void rrl_class(resp_t *r, limit_class_t cls, uint32_t key, const uint8_t *name)
{
    r->cls = (uint8_t)cls;
    r->cls_key = key;
    r->cls_name = name;
}

/* The RRSIG Labels field of owner: its labels, the "*" of a wildcard not counted. */
static unsigned sig_labels(const uint8_t *owner)
{
    unsigned n = dname_labels(owner);
    return owner[0] == 1 && owner[1] == '*' ? n - 1 : n;
}

/* Write the RRSIG RRset rdata (count RRSIGs as an rdata sequence) after the RRset it covers,
 * keeping the writer's last name (a CNAME's target, which the chain follows). */
static bool put_rrsig(resp_t *r, wire_section_t sec, uint16_t owner_off, const uint8_t *owner,
                      uint32_t ttl, uint16_t count, const uint8_t *rdata)
{
    uint16_t keep = r->w->last_name_off;
    int rc = wire_write_rrset(r->w, sec, owner_off, owner, WIRE_T_RRSIG, ttl, count, rdata);
    r->w->last_name_off = keep;
    if (likely(rc == 0))
        return true;
    r->tc = true;
    return false;
}

/* The RRSIG of count RRs of rdata (picked by offs if not NULL) at owner, made or taken from the
 * worker's cache, written after them. Without a signer, or if signing fails, the RRset goes
 * unsigned (counted by the cache as a failure): the answer still reaches a non-validating
 * client. */
static bool put_online(resp_t *r, wire_section_t sec, uint16_t owner_off, const uint8_t *owner,
                       uint16_t type, uint32_t ttl, uint16_t count, const uint8_t *rdata,
                       const uint32_t *offs)
{
    answer_ctx_t *ctx = r->ctx;
    if (!ctx->dnssec)
        return true;
    int len = dnssec_online(ctx->dnssec, r->zone->dnssec, r->zone, owner, sig_labels(owner), type,
                            ttl, count, rdata, offs, ctx->now_s, ctx->sigbuf + 2);
    if (len < 0)
        return true;
    ctx->sigbuf[0] = (uint8_t)(len >> 8);
    ctx->sigbuf[1] = (uint8_t)len;
    return put_rrsig(r, sec, owner_off, owner, ttl, 1, ctx->sigbuf);
}

/* Write RRset rr (its steering, if any, from zone gz) owned by owner with TTL ttl to the answer
 * or authority section; a miss sets TC (RFC 2181 §9). With DO=1 in a signed zone its RRSIGs
 * follow: made ahead, or per query for a steered subset and for an RRset synthesised (synth:
 * a wildcard's, or an ANAME's from its target). */
static bool put_as(resp_t *r, wire_section_t sec, uint16_t owner_off, const uint8_t *owner,
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
        if (likely(wire_write_rrs(r->w, sec, owner_off, owner, rr->type, ttl, (uint16_t)n,
                                  rr->rdata, ctx->offs) == 0))
            return !sign || put_online(r, sec, owner_off, owner, rr->type, ttl, (uint16_t)n,
                                       rr->rdata, ctx->offs);
        r->tc = true;
        return false;
    }
    if (likely(wire_write_rrset(r->w, sec, owner_off, owner, rr->type, ttl, rr->count, rr->rdata) ==
               0)) {
        if (likely(!sign))
            return true;
        if (synth)
            return put_online(r, sec, owner_off, owner, rr->type, ttl, rr->count, rr->rdata, NULL);
        uint16_t n;
        const uint8_t *sigs = dnssec_static(dnssec_zone_sigs(r->zone->dnssec), r->zone, rr, &n);
        return !sigs || put_rrsig(r, sec, owner_off, owner, ttl, n, sigs);
    }
    r->tc = true;
    return false;
}

/* An RRset of the zone being written, as it is (a wildcard's synthesised per query). */
static inline bool put(resp_t *r, wire_section_t sec, uint16_t owner_off, const uint8_t *owner,
                       const zone_rrset_t *rr)
{
    return put_as(r, sec, owner_off, owner, r->zone, rr, rr->ttl, r->wild);
}

/* Compact denial of existence (RFC 9824) in authority, after the SOA: an NSEC at the name
 * itself listing the types it has (node n; NULL: the name does not exist, NXNAME), signed per
 * query. At a delegation only NS and DS are the parent's types (RFC 4035 §2.3). */
static void put_nsec(resp_t *r, uint16_t owner_off, const uint8_t *owner, const zone_node_t *n)
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
    (void)put_online(r, WIRE_SEC_NS, owner_off, owner, WIRE_T_NSEC, ttl, 1, ctx->nsecbuf, NULL);
}

/* Which targets of an NS/MX/SRV RRset put_additional() writes. */
typedef enum {
    ADD_ANSWER,  /* after an answer: our authoritative data only (no names below a cut) */
    ADD_GLUE,    /* a referral's in-domain glue: names at or below its cut (RFC 9471: must fit,
                    else TC) */
    ADD_SIBLING, /* a referral's other in-zone targets (sibling glue, authoritative names):
                    optional, dropped without TC */
} add_mode_t;

/* A/AAAA of the targets of NS/MX/SRV RRset rr (of zone z) that mode selects; cut is the
 * referral's delegation point (ADD_GLUE, ADD_SIBLING). Returns false when an RRset did not fit:
 * for ADD_GLUE that sets TC (RFC 9471 §3), otherwise the additional section just stops (RFC 2181
 * §9). */
static bool put_additional(resp_t *r, const zone_t *z, const zone_rrset_t *rr, add_mode_t mode,
                           const zone_node_t *cut)
{
    if (!zone_rrset_has_targets(rr))
        return true;
    for (unsigned i = 0; i < rr->count; i++) {
        const zone_node_t *n = zone_rrset_target(z, rr, i);
        if (!n)
            continue;
        bool below = n->cut != 0, in_domain = below && zone_node_cut(z, n) == cut;
        if ((mode == ADD_ANSWER && below) || (mode == ADD_GLUE && !in_domain) ||
            (mode == ADD_SIBLING && in_domain))
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
                if (mode == ADD_GLUE)
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
static uint16_t apex_in_question(const resp_t *r, const zone_t *z)
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
static int put_neg_tpl(resp_t *r, const zone_t *z, const zone_rrset_t *soa, uint16_t owner_off)
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
 * put() writes it, with the views of its two names from ctx->soa (made again only when the
 * SOA's name bytes differ from the last one's). */
static bool put_neg_soa(resp_t *r, const zone_t *z, uint16_t owner_off)
{
    const zone_rrset_t *soa = z->neg_soa;
    size_t rdlen = soa->count == 1 ? tern_rd16(soa->rdata) : 0;
    if (rdlen <= 20 || unlikely(r->sign))
        return put(r, WIRE_SEC_NS, owner_off, z->apex, soa);
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
            return put(r, WIRE_SEC_NS, owner_off, z->apex, soa);
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
static void put_neg(resp_t *r, const zone_t *z, uint16_t owner_off, const uint8_t *owner,
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
static void put_referral(resp_t *r, const zone_t *z, const zone_node_t *cut)
{
    const zone_rrset_t *ns = zone_node_rrset(cut, WIRE_T_NS);
    r->wild = false;
    if (!ns || !put(r, WIRE_SEC_NS, 0, cut->name, ns))
        return;
    if (r->sign && z->dnssec) {
        /* signed: the DS of the child with its RRSIG, or the proof there is none (an insecure
         * delegation, RFC 4035 §3.1.4) */
        const zone_rrset_t *ds = zone_node_rrset(cut, WIRE_T_DS);
        if (ds) {
            if (!put(r, WIRE_SEC_NS, 0, cut->name, ds))
                return;
        } else {
            put_nsec(r, 0, cut->name, cut);
            if (r->tc)
                return;
        }
    }
    if (put_additional(r, z, ns, ADD_GLUE, cut))
        (void)put_additional(r, z, ns, ADD_SIBLING, cut);
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

/* Find the zone for v and look v up in it. NULL when no served zone contains v. */
static const zone_t *lookup(answer_ctx_t *ctx, const zone_table_t *t, const dname_view_t *v,
                            uint16_t qtype, zone_lookup_t *res)
{
    unsigned apex;
    const zone_t *z = zone_table_find(t, v, &apex);
    if (!z)
        return NULL;
    if (unlikely(qtype == WIRE_T_DS) && apex == 0 && v->nlabels > 0) {
        /* DS at a zone apex: the parent side owns it (RFC 4035 §3.1.4.1) when we serve the
         * parent and it delegates exactly this name. */
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
static bool synthesize(resp_t *r, chase_t *c, const zone_node_t *n, unsigned label)
{
    answer_ctx_t *ctx = r->ctx;
    const zone_rrset_t *dn = zone_node_rrset(n, WIRE_T_DNAME);
    if (c->hops == ANSWER_CNAME_MAX || chase_seen(c, n))
        return false;
    if (!put(r, WIRE_SEC_AN, 0, n->name, dn))
        return false;
    /* the new name: the labels above the owner as asked, then the target as written */
    const uint8_t *target = dn->rdata + 2;
    size_t prefix = c->v->off[label], tlen = (size_t)dn->rdata[0] << 8 | dn->rdata[1];
    if (prefix + tlen > DNAME_MAXLEN) {
        r->rcode = WIRE_RC_YXDOMAIN; /* §2.2: the result would not be a domain name */
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
        !put_online(r, WIRE_SEC_AN, c->owner_off, c->owner, WIRE_T_CNAME, dn->ttl, 1, rd, NULL))
        return false;
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

/* A or AAAA at node n of zone z, which has no RRset of that type but an ANAME (an): the
 * target's, found in our zones or in what the resolver got (answer.h). */
static void answer_aname(answer_ctx_t *ctx, const zone_table_t *t, resp_t *r, const chase_t *c,
                         const zone_t *z, const zone_node_t *n, const zone_rrset_t *an)
{
    const uint16_t qtype = ctx->q->qtype;
    uint32_t ttl = an->ttl;
    const zone_t *tz = NULL;
    const zone_rrset_t *rr = NULL;
    /* the chain's own view is not needed any more: the answer is owned by c->owner */
    walk_t w = aname_walk(t, &ctx->chase, an->rdata + 2, qtype, c->hops, &ttl, &tz, &rr);
    if (w == WALK_FOUND && tz != z && ctx->view->limit &&
        limit_zone(ctx->view->limit, tz->apex, tz->hash, &ctx->lc) != LIMIT_PASS)
        w = WALK_NODATA; /* a zone this client may not see lends it nothing */
    if (w == WALK_FOUND) {
        rrl_class(r, LIMIT_RC_ANSWER, ctx->q->name.hash[0], NULL);
        (void)put_as(r, WIRE_SEC_AN, c->owner_off, c->owner, tz, rr, ttl, true);
        return;
    }
    if (w == WALK_OUT) {
        const dname_view_t *v = &ctx->chase;
        const aname_result_t *res =
            aname_results_find(ctx->view->aname, v->lc, v->len, v->hash[0], qtype);
        if (res && res->state == ANAME_OK && res->count) {
            zone_rrset_t s = {.type = qtype,
                              .count = res->count,
                              .ttl = res->ttl < ttl ? res->ttl : ttl,
                              .rdata_len = res->rdata_len,
                              .rdata = res->rdata};
            rrl_class(r, LIMIT_RC_ANSWER, ctx->q->name.hash[0], NULL);
            (void)put_as(r, WIRE_SEC_AN, c->owner_off, c->owner, z, &s, s.ttl, true);
            return;
        }
        if (!res || res->state == ANAME_PENDING)
            w = WALK_LOOP; /* not resolved yet: SERVFAIL, as for a loop */
    }
    if (w == WALK_LOOP) {
        r->rcode = WIRE_RC_SERVFAIL;
        r->aa = false;
        return;
    }
    rrl_class(r, LIMIT_RC_NODATA, ctx->q->name.hash[0], NULL);
    put_neg(r, z, c->owner_off, c->owner, n);
}

/* RFC 1034 §4.3.2 over the whole table, following CNAMEs and DNAMEs; fills r. */
static void resolve(answer_ctx_t *ctx, const zone_table_t *t, resp_t *r)
{
    const wire_query_t *q = ctx->q;
    const uint16_t qtype = q->qtype;
    /* seen[] is read below hops only: not zeroed (8 pointers a query) */
    chase_t c;
    c.v = &q->name;
    c.owner = q->qname;
    c.owner_off = QNAME_OFF;
    c.hops = 0;

    for (bool first = true;; first = false) {
        zone_lookup_t res;
        r->wild = false;
        const zone_t *z = lookup(ctx, t, c.v, qtype, &res);
        if (!z) {
            if (first)
                r->rcode = WIRE_RC_REFUSED;
            else
                rrl_class(r, LIMIT_RC_ANSWER, q->name.hash[0], NULL);
            return; /* the chain left our zones: the resolver takes it from here */
        }
        if (unlikely(z->unavailable)) {
            /* a secondary zone with no data, or expired: no authoritative answer at all */
            r->rcode = WIRE_RC_SERVFAIL;
            r->aa = false;
            return;
        }
        if (first) {
            r->aa = true;
            ctx->info.zone = z;
            /* the zone's own access list, once the zone of the name asked is known */
            const limit_t *lim = ctx->view->limit;
            limit_verdict_t vd = lim ? limit_zone(lim, z->apex, z->hash, &ctx->lc) : LIMIT_PASS;
            if (vd != LIMIT_PASS) {
                ctx->info.limit_why = LIMIT_WHY_ZONE_ACL;
                ctx->info.limit_verdict = (uint8_t)vd;
                r->drop = vd == LIMIT_DROP;
                r->rcode = WIRE_RC_REFUSED;
                r->aa = false;
                return;
            }
        } else if (z != r->zone && ctx->view->limit &&
                   limit_zone(ctx->view->limit, z->apex, z->hash, &ctx->lc) != LIMIT_PASS) {
            /* a chain into a zone this client may not see stops at the CNAME, as if it left
             * our zones: that zone's data must not leak through another zone's alias */
            rrl_class(r, LIMIT_RC_ANSWER, q->name.hash[0], NULL);
            return;
        }
        r->zone = z;

        if (res.cut &&
            !(res.kind == ZONE_LOOKUP_EXACT && res.node == res.cut && qtype == WIRE_T_DS)) {
            if (first)
                r->aa = false;
            rrl_class(r, LIMIT_RC_REFERRAL, 0, res.cut->name);
            put_referral(r, z, res.cut);
            return;
        }
        if (res.kind == ZONE_LOOKUP_NXDOMAIN) {
            r->rcode = WIRE_RC_NXDOMAIN;
            rrl_class(r, LIMIT_RC_NXDOMAIN, z->hash, NULL);
            put_neg(r, z, c.owner_off, c.owner, NULL);
            return;
        }
        if (res.kind == ZONE_LOOKUP_DNAME) {
            if (!synthesize(r, &c, res.node, res.encloser_label))
                return;
            continue;
        }

        /* EXACT or WILDCARD: the node's data, owned by the name asked (RFC 4592 §4.3: a
         * wildcard answer carries the query name, here as a pointer to it). */
        const zone_node_t *n = res.node;
        const zone_rrset_t *rr;
        r->wild = res.kind == ZONE_LOOKUP_WILDCARD;
        if (qtype == WIRE_T_ANY) {
            rr = pick_any(n);
        } else {
            rr = zone_node_rrset(n, qtype);
            const zone_rrset_t *cn;
            if (!rr && follows_cname(qtype) && (cn = zone_node_rrset(n, WIRE_T_CNAME))) {
                if (c.hops == ANSWER_CNAME_MAX || chase_seen(&c, n))
                    return; /* limit, or a loop: every CNAME of it is already in the answer */
                if (!put(r, WIRE_SEC_AN, c.owner_off, c.owner, cn))
                    return;
                chase_to(ctx, &c, n, cn->rdata + 2);
                continue;
            }
        }
        if (!rr) {
            const zone_rrset_t *an;
            if ((qtype == WIRE_T_A || qtype == WIRE_T_AAAA) &&
                unlikely((an = zone_node_rrset(n, WIRE_T_ANAME)) != NULL)) {
                answer_aname(ctx, t, r, &c, z, n, an);
                return;
            }
            rrl_class(r, LIMIT_RC_NODATA, q->name.hash[0], NULL);
            put_neg(r, z, c.owner_off, c.owner, n); /* NODATA, also at empty non-terminals */
            return;
        }
        /* a wildcard answer is "the same" for every name it synthesises (Knot's RRL) */
        if (res.kind == ZONE_LOOKUP_WILDCARD)
            rrl_class(r, LIMIT_RC_WILDCARD, 0, n->name);
        else
            rrl_class(r, LIMIT_RC_ANSWER, q->name.hash[0], NULL);
        if (put(r, WIRE_SEC_AN, c.owner_off, c.owner, rr))
            (void)put_additional(r, z, rr, ADD_ANSWER, NULL);
        r->wild = false;
        return;
    }
}

static bool qname_is(const wire_query_t *q, const uint8_t *wire, size_t len)
{
    return q->name.len == len && memcmp(q->name.lc, wire, len) == 0;
}

/* CHAOS class: the conventional server-identification names only (RFC 4892 §2). */
static void answer_chaos(resp_t *r, const wire_query_t *q, const answer_config_t *cfg)
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

size_t answer_query(const answer_view_t *v, answer_ctx_t *ctx, const struct sockaddr *client,
                    const uint8_t *pkt, size_t len, uint8_t *out, size_t out_cap,
                    answer_transport_t transport)
{
    wire_parse_result_t pr = wire_parse_query(&ctx->query, pkt, len);
    return answer_parsed(v, ctx, &ctx->query, pr, client, pkt, len, out, out_cap, transport);
}

size_t answer_parsed(const answer_view_t *v, answer_ctx_t *ctx, wire_query_t *q,
                     wire_parse_result_t pr, const struct sockaddr *client, const uint8_t *pkt,
                     size_t len, uint8_t *out, size_t out_cap, answer_transport_t transport)
{
    const zone_table_t *t = v->table;
    const answer_config_t *cfg = &v->cfg;
    ctx->q = q;
    answer_info_t *info = &ctx->info;
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

    if (pr == WIRE_DROP || unlikely(out_cap < UDP_MIN)) {
        info->outcome = len >= 12 && (pkt[2] & 0x80) ? ANSWER_DROP_QR : ANSWER_DROP_SHORT;
        return 0;
    }
    info->outcome = ANSWER_SENT;
    bool edns = (pr == WIRE_OK || pr == WIRE_BADVERS) && q->has_edns;
    const wire_ecs_t *ecs = pr == WIRE_OK && edns && q->has_ecs ? &q->ecs : NULL;
    info->edns = edns;
    info->ecs = ecs != NULL;
    info->qtype = pr == WIRE_OK ? q->qtype : 0;
    /* the client is resolved only if a steered RRset is reached (select.c): plain answers pay
     * nothing for geo */
    ctx->view = v;
    ctx->q_ecs = ecs;
    ctx->q_src = client;
    ctx->ent = NULL;
    ctx->scope = 0;
    uint16_t adv = cfg->edns_max_udp < UDP_MIN ? UDP_MIN : cfg->edns_max_udp;

    /* policy: who may ask (access list, redins' blacklist and rate), and their cookie */
    const limit_t *lim = v->limit;
    bool refused = false, cookie_ok = false, badcookie = false, tc_only = false, rrl = false;
    uint8_t cookie[WIRE_COOKIE_CLIENT + LIMIT_SERVER_COOKIE_LEN];
    size_t cookie_len = 0;
    if (unlikely(lim != NULL)) {
        limit_client_of(&ctx->lc, client);
        limit_why_t why;
        limit_verdict_t vd = limit_client(lim, &ctx->lc, ctx->now_us, &why);
        info->limit_why = (uint8_t)why;
        info->limit_verdict = (uint8_t)vd;
        if (vd == LIMIT_DROP) {
            info->outcome = ANSWER_DROP_POLICY;
            return 0;
        }
        refused = vd == LIMIT_REFUSE;
        if (limit_cookies(lim) && edns && q->has_cookie) {
            /* RFC 7873 §5.2: a fresh server cookie for every client cookie, valid or not */
            info->cookie = true;
            if (q->cookie_len > WIRE_COOKIE_CLIENT) {
                cookie_ok =
                    limit_cookie_valid(lim, q->cookie, q->cookie + WIRE_COOKIE_CLIENT,
                                       q->cookie_len - WIRE_COOKIE_CLIENT, &ctx->lc, ctx->now_s);
                info->cookie_valid = cookie_ok;
            }
            memcpy(cookie, q->cookie, WIRE_COOKIE_CLIENT);
            limit_cookie_make(lim, q->cookie, &ctx->lc, ctx->now_s, cookie + WIRE_COOKIE_CLIENT);
            cookie_len = sizeof(cookie);
        }
        /* cookies required: over UDP, a client cookie without a valid server cookie learns
         * ours from BADCOOKIE (RFC 7873 §5.2.3); a query without any is told to use TCP */
        if (limit_cookies_required(lim) && transport == ANSWER_UDP && !cookie_ok && pr == WIRE_OK &&
            !refused) {
            badcookie = info->cookie;
            tc_only = !info->cookie;
        }
        info->badcookie = badcookie;
        /* RRL judges the finished UDP response; a valid cookie proves the source (exempt) */
        rrl = transport == ANSWER_UDP && !cookie_ok && pr == WIRE_OK && !refused &&
              limit_rrl_applies(lim, &ctx->lc);
        if (rrl)
            limit_rrl_prefetch(lim, &ctx->lc, q->name.hash[0], q->qtype);
    }

    /* NSD answers a message with several questions with a bare FORMERR: no flag copied (Knot
     * sends nothing). One question or none keeps RD, as both do. */
    if (pr == WIRE_FORMERR && q->qdcount > 1)
        q->flags &= (uint16_t)~WIRE_FLAG_RD;
    wire_writer_t *w = &ctx->writer;
    size_t limit = response_limit(q, edns, adv, out_cap, transport);
    wire_writer_init(w, out, limit, q);
    /* Header + question (<= 12 + 259) + OPT with ECS (<= 35) and a cookie (28) always fit 512
     * bytes; should the reservation fail anyway, the response goes without OPT rather than not
     * at all. */
    if (edns && wire_writer_reserve(w, wire_opt_size(ecs, cookie_len)) != 0)
        edns = false;

    /* then the request itself, then lookup */
    resp_t r = {.ctx = ctx,
                .w = w,
                .rcode = WIRE_RC_NOERROR,
                .aa = false,
                .tc = false,
                .sign = edns && q->edns_do && pr == WIRE_OK,
                .wild = false,
                .cls = LIMIT_RC_ERROR,
                .cls_key = 0,
                .cls_name = NULL};
    uint16_t qtype = q->qtype;
    unsigned opcode = WIRE_OPCODE(q->flags);
    if (refused)
        r.rcode = WIRE_RC_REFUSED; /* as redins answers a limited or blacklisted client */
    else if (badcookie)
        r.rcode = WIRE_RC_BADCOOKIE;
    else if (tc_only)
        r.tc = true;
    else if (pr == WIRE_FORMERR)
        /* A header without a question is malformed for the opcodes we implement (QUERY, and
         * NOTIFY, which we answer), and a request we do not implement for the others: NOTIMP,
         * as NSD and Knot answer (and as DNS compliance tests expect of opcode 15). */
        r.rcode = q->qdcount == 0 && opcode != WIRE_OP_QUERY && opcode != WIRE_OP_NOTIFY
                      ? WIRE_RC_NOTIMP
                      : WIRE_RC_FORMERR;
    else if (pr == WIRE_BADVERS)
        r.rcode = WIRE_RC_BADVERS;
    else if (unlikely(cfg->xfr) && (opcode == WIRE_OP_NOTIFY || q->has_tsig ||
                                    (transport == ANSWER_TCP && opcode == WIRE_OP_QUERY &&
                                     (qtype == WIRE_T_AXFR || qtype == WIRE_T_IXFR)))) {
        /* the transfer thread's: it checks keys and ACLs, pins the zone and streams it, off
         * this worker (tern/xfr/xfr.h) */
        info->outcome = ANSWER_HANDOFF;
        info->rcode = -1u;
        return 0;
    } else if (opcode == WIRE_OP_NOTIFY)
        /* RFC 1996 §3.10: NOTIFY is for a secondary; tern is secondary for no zone (Knot
         * answers NOTAUTH too) */
        r.rcode = WIRE_RC_NOTAUTH;
    else if (opcode != WIRE_OP_QUERY)
        r.rcode = WIRE_RC_NOTIMP;
    else if (qtype == WIRE_T_OPT) /* a pseudo-RR is no question (RFC 6891 §6.1.1) */
        r.rcode = WIRE_RC_FORMERR;
    else if (q->qclass == WIRE_CLASS_CH)
        answer_chaos(&r, q, cfg);
    else if (q->qclass != WIRE_CLASS_IN && q->qclass != WIRE_CLASS_ANY)
        r.rcode = WIRE_RC_REFUSED; /* QCLASS ANY: the IN data is all there is, as NSD and Knot */
    else if (qtype == WIRE_T_AXFR && transport == ANSWER_UDP)
        r.rcode = WIRE_RC_NOTIMP; /* RFC 5936 §4.2: AXFR is TCP only (NSD answers NOTIMP too) */
    else if (qtype == WIRE_T_IXFR && transport == ANSWER_UDP && cfg->xfr)
        r.tc = true; /* RFC 1995 §2: the answer would not fit; the secondary asks over TCP */
    else if (qtype == WIRE_T_AXFR || qtype == WIRE_T_IXFR)
        r.rcode = WIRE_RC_REFUSED; /* no zone may be transferred (allow_transfer) */
    else if (qtype >= WIRE_T_META_MIN && qtype < WIRE_T_ANY)
        r.rcode = WIRE_RC_NOTIMP;
    else if (!t)
        r.rcode = WIRE_RC_REFUSED;
    else
        resolve(ctx, t, &r);

    if (unlikely(r.drop)) {
        info->outcome = ANSWER_DROP_POLICY;
        return 0;
    }

    /* write: the OPT last, in the room reserved before any RRset */
    if (edns) {
        uint8_t scope = ecs && ecs->source_prefix > 0 ? ctx->scope : 0;
        /* An IPv4-mapped address in a family 2 option was looked up as IPv4: its scope is
         * counted in the option's family, IPv6 bits (RFC 7871 §6) */
        if (scope && ecs->family == 2 && ctx->client_mapped)
            scope = (uint8_t)(scope + 96);
        info->scope = scope;
        int rc = wire_write_opt(w, adv, (uint8_t)(r.rcode >> 4), q->edns_do, ecs, scope, cookie,
                                cookie_len);
        (void)rc; /* cannot fail: its space was reserved */
    }

    /* RRL on the finished UDP response */
    if (unlikely(rrl)) {
        unsigned cls =
            r.rcode == WIRE_RC_NOERROR || r.rcode == WIRE_RC_NXDOMAIN ? r.cls : LIMIT_RC_ERROR;
        uint32_t key = r.cls_name ? dname_hash(r.cls_name) : r.cls_key;
        limit_verdict_t vd =
            limit_rrl(lim, &ctx->lim, &ctx->lc, (limit_class_t)cls, key, qtype, ctx->now_us);
        if (vd != LIMIT_PASS) {
            info->limit_why = LIMIT_WHY_RRL;
            info->limit_verdict = (uint8_t)vd;
            if (vd == LIMIT_DROP) {
                info->outcome = ANSWER_DROP_POLICY;
                info->rcode = r.rcode;
                return 0;
            }
            /* slip: the header and question alone, TC set, so a real client asks again over
             * TCP; never larger than the query, so it amplifies nothing */
            wire_writer_init(w, out, limit, q);
            info->rcode = r.rcode & 0xFu;
            info->truncated = true;
            return wire_writer_finish(w, false, true, r.rcode & 0xFu);
        }
    }
    info->rcode = r.rcode;
    info->truncated = r.tc;
    return wire_writer_finish(w, r.aa, r.tc, r.rcode);
}
