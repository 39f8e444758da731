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
 *   - Chain limit: at most ANSWER_CNAME_MAX CNAMEs are written and followed; if the name
 *     reached after the last one is again a CNAME, the chain stops (NOERROR) and the resolver
 *     restarts from the last target, as RFC 1034 §3.6.2 lets it. A loop is cut as soon as a
 *     node's CNAME would be written a second time (its target is fixed, so from there on the
 *     chain only repeats — this holds for wildcard CNAMEs too).
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
 *     delegation are skipped (not authoritative data); for referrals they are the glue.
 *   - Truncation: the first answer/authority RRset that does not fit sets TC and nothing more is
 *     added; the rcode is the one decided so far, the OPT is still written (space was reserved).
 *
 * No allocation, no locks, no syscalls: only the per-worker ctx, the caller's output buffer and
 * the immutable table.
 */
#include "tern/answer/answer.h"

#include <string.h>

#include "tern/answer/select.h"
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

/* Meta and question-only types (RFC 6895 §3.1: 128-255); ANY (255) is served. */
#define QTYPE_META_MIN 128u

typedef struct resp {
    answer_ctx_t *ctx;
    wire_writer_t *w;
    const zone_t *zone; /* the zone of the RRsets being written (geo data) */
    unsigned rcode;
    bool aa;
    bool tc;
} resp_t;

/* Write one RRset to the answer or authority section; a miss sets TC (RFC 2181 §9). */
static bool put(resp_t *r, wire_section_t sec, uint16_t owner_off, const uint8_t *owner,
                const zone_rrset_t *rr)
{
    if (unlikely(rr->targets) && (rr->type == WIRE_T_A || rr->type == WIRE_T_AAAA)) {
        /* a geo-steered RRset: the client's share of it (select.h) */
        answer_ctx_t *ctx = r->ctx;
        const zone_geo_t *g = zone_rrset_geo(r->zone, rr);
        unsigned n = answer_select(ctx, ctx->view, g, ctx->offs);
        if (likely(wire_write_rrs(r->w, sec, owner_off, owner, rr->type, rr->ttl, (uint16_t)n,
                                  rr->rdata, ctx->offs) == 0))
            return true;
        r->tc = true;
        return false;
    }
    if (likely(wire_write_rrset(r->w, sec, owner_off, owner, rr->type, rr->ttl, rr->count,
                                rr->rdata) == 0))
        return true;
    r->tc = true;
    return false;
}

/* A/AAAA of the targets of an NS/MX/SRV RRset. glue: also targets below a delegation (a
 * referral's glue); otherwise those are not our authoritative data and are skipped. */
static void put_additional(resp_t *r, const zone_t *z, const zone_rrset_t *rr, bool glue)
{
    if (!rr->targets)
        return;
    for (unsigned i = 0; i < rr->count; i++) {
        const zone_node_t *n = zone_rrset_target(z, rr, i);
        if (!n || (n->cut && !glue))
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
                                 s->rdata) != 0)
                return; /* additional data is optional: stop, no TC */
        }
    }
}

/* The zone's negative-answer SOA (TTL already min(TTL, MINIMUM)) in authority: RFC 2308 §3. */
static void put_neg(resp_t *r, const zone_t *z)
{
    if (z->neg_soa)
        (void)put(r, WIRE_SEC_NS, 0, z->apex, z->neg_soa);
}

/* Referral (RFC 1034 §4.3.2 step 3b): the cut's NS in authority, glue in additional. */
static void put_referral(resp_t *r, const zone_t *z, const zone_node_t *cut)
{
    const zone_rrset_t *ns = zone_node_rrset(cut, WIRE_T_NS);
    if (ns && put(r, WIRE_SEC_NS, 0, cut->name, ns))
        put_additional(r, z, ns, true);
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

/* RFC 1034 §4.3.2 over the whole table, following CNAMEs; fills r. */
static void resolve(answer_ctx_t *ctx, const zone_table_t *t, resp_t *r)
{
    const wire_query_t *q = &ctx->query;
    const uint16_t qtype = q->qtype;
    const dname_view_t *v = &q->name;
    uint16_t owner_off = QNAME_OFF; /* the current name, already in the message */
    const uint8_t *owner = q->qname;
    const zone_node_t *seen[ANSWER_CNAME_MAX];

    for (unsigned hop = 0;; hop++) {
        zone_lookup_t res;
        const zone_t *z = lookup(ctx, t, v, qtype, &res);
        if (!z) {
            if (hop == 0)
                r->rcode = WIRE_RC_REFUSED;
            return; /* the chain left our zones: the resolver takes it from here */
        }
        if (hop == 0)
            r->aa = true;
        r->zone = z;

        if (res.cut &&
            !(res.kind == ZONE_LOOKUP_EXACT && res.node == res.cut && qtype == WIRE_T_DS)) {
            if (hop == 0)
                r->aa = false;
            put_referral(r, z, res.cut);
            return;
        }
        if (res.kind == ZONE_LOOKUP_NXDOMAIN) {
            r->rcode = WIRE_RC_NXDOMAIN;
            put_neg(r, z);
            return;
        }

        /* EXACT or WILDCARD: the node's data, owned by the name asked (RFC 4592 §4.3: a
         * wildcard answer carries the query name, here as a pointer to it). */
        const zone_node_t *n = res.node;
        const zone_rrset_t *rr;
        if (qtype == WIRE_T_ANY) {
            rr = pick_any(n);
        } else {
            rr = zone_node_rrset(n, qtype);
            const zone_rrset_t *cn;
            if (!rr && follows_cname(qtype) && (cn = zone_node_rrset(n, WIRE_T_CNAME))) {
                if (hop == ANSWER_CNAME_MAX)
                    return;
                for (unsigned i = 0; i < hop; i++)
                    if (seen[i] == n)
                        return; /* loop: every CNAME of it is already in the answer */
                seen[hop] = n;
                if (!put(r, WIRE_SEC_AN, owner_off, owner, cn))
                    return;
                /* The target, uncompressed in the zone's RDATA (u16 RDLENGTH, then the name),
                 * is the next name; in the message it sits at last_name_off. */
                owner = cn->rdata + 2;
                owner_off = r->w->last_name_off <= PTR_MAX_OFF ? r->w->last_name_off : 0;
                dname_view_init(&ctx->chase, owner);
                v = &ctx->chase;
                continue;
            }
        }
        if (!rr) {
            put_neg(r, z); /* NODATA, also at empty non-terminals */
            return;
        }
        if (put(r, WIRE_SEC_AN, owner_off, owner, rr) &&
            (rr->type == WIRE_T_NS || rr->type == WIRE_T_MX || rr->type == WIRE_T_SRV))
            put_additional(r, z, rr, false);
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
    const zone_table_t *t = v->table;
    const answer_config_t *cfg = &v->cfg;
    wire_query_t *q = &ctx->query;
    answer_info_t *info = &ctx->info;
    info->rcode = -1u;
    info->truncated = false;
    info->edns = false;
    info->ecs = false;
    info->qtype = 0;

    /* parse */
    wire_parse_result_t pr = wire_parse_query(q, pkt, len);
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

    wire_writer_t *w = &ctx->writer;
    wire_writer_init(w, out, response_limit(q, edns, adv, out_cap, transport), q);
    /* Header + question (<= 12 + 259) + OPT with ECS (<= 35) always fit 512 bytes; should the
     * reservation fail anyway, the response goes without OPT rather than not at all. */
    if (edns && wire_writer_reserve(w, wire_opt_size(ecs)) != 0)
        edns = false;

    /* policy, then lookup */
    resp_t r = {.ctx = ctx, .w = w, .rcode = WIRE_RC_NOERROR, .aa = false, .tc = false};
    uint16_t qtype = q->qtype;
    if (pr == WIRE_FORMERR)
        r.rcode = WIRE_RC_FORMERR;
    else if (pr == WIRE_BADVERS)
        r.rcode = WIRE_RC_BADVERS;
    else if (WIRE_OPCODE(q->flags) != WIRE_OP_QUERY)
        r.rcode = WIRE_RC_NOTIMP;
    else if (qtype == WIRE_T_OPT) /* a pseudo-RR is no question (RFC 6891 §6.1.1) */
        r.rcode = WIRE_RC_FORMERR;
    else if (q->qclass == WIRE_CLASS_CH)
        answer_chaos(&r, q, cfg);
    else if (q->qclass != WIRE_CLASS_IN)
        r.rcode = WIRE_RC_REFUSED;
    else if (qtype == WIRE_T_AXFR || qtype == WIRE_T_IXFR)
        /* RFC 5936 §4.2: AXFR is TCP only; transfers themselves are not implemented yet. */
        r.rcode = transport == ANSWER_TCP ? WIRE_RC_NOTIMP : WIRE_RC_FORMERR;
    else if (qtype >= QTYPE_META_MIN && qtype < WIRE_T_ANY)
        r.rcode = WIRE_RC_NOTIMP;
    else if (!t)
        r.rcode = WIRE_RC_REFUSED;
    else
        resolve(ctx, t, &r);

    /* write: the OPT last, in the room reserved before any RRset */
    if (edns) {
        uint8_t scope = ecs && ecs->source_prefix > 0 ? ctx->scope : 0;
        int rc = wire_write_opt(w, adv, (uint8_t)(r.rcode >> 4), q->edns_do, ecs, scope);
        (void)rc; /* cannot fail: its space was reserved */
    }
    info->rcode = r.rcode;
    info->truncated = r.tc;
    return wire_writer_finish(w, r.aa, r.tc, r.rcode);
}
