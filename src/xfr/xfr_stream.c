/*
 * xfr_stream.c — AXFR/IXFR response messages from a pinned zone version (see xfr_stream.h).
 *
 * A response is a list of segments, each a source of RRsets: one SOA, the zone's node array in
 * order (the apex first; a patched version's removed nodes hold no RRsets and add nothing), a
 * signed zone's export (its NSEC chain and RRSIGs, tern/dnssec/dnssec_export.h), or one side of
 * a delta. AXFR is [SOA, zone, export when signed, SOA]; IXFR is [SOA, then per delta: old
 * SOA, removed, new SOA, added, then SOA]. The cursor (segment, node, RRset, RR) only moves once
 * an RR is in the message, so an RR that does not fit simply opens the next message.
 */
#include "tern/xfr/xfr_stream.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "tern/common/byteorder.h"
#include "tern/common/err.h"
#include "tern/dnssec/dnssec_export.h"
#include "tern/dnssec/dnssec_zone.h"
#include "tern/wire/dname.h"
#include "tern/wire/parse.h"
#include "tern/wire/rr.h"

typedef enum { SEG_SOA, SEG_ZONE, SEG_EXPORT, SEG_DELTA } seg_kind_t;

typedef struct seg {
    seg_kind_t kind;
    xfr_side_t side;      /* SEG_DELTA: which list */
    const xfr_delta_t *d; /* SEG_DELTA */
    xfr_rrset_t soa;      /* SEG_SOA */
} seg_t;

struct xfr_stream {
    const zone_t *z;
    xfr_delta_t **deltas; /* our references */
    size_t ndeltas;
    seg_t *segs;
    size_t nsegs;
    /* what every message repeats */
    uint8_t id[2];
    uint16_t flags;    /* QR, AA, RD as asked */
    uint16_t apex_ptr; /* compression pointer to the apex inside the question; 0: none */
    size_t qlen;       /* bytes of the question: name, type, class */
    uint8_t question[DNAME_MAXLEN + 4];
    /* the cursor: the next RR is RR `rr` (at byte rr_off of cur.rdata) when `have` */
    size_t seg;
    size_t node, rrset; /* SEG_ZONE: the next RRset to take */
    size_t pos;         /* SEG_DELTA: offset of the next group; SEG_EXPORT: the next set;
                           SEG_SOA: 1 once taken */
    bool have;
    xfr_rrset_t cur;
    unsigned rr;
    size_t rr_off;
    uint64_t records;
    int state; /* 0: more to send, 1: the last message went out, < 0: failed */
};

/* Read the header and question of the request. The apex pointer: where the apex starts inside
 * the question's name (for an AXFR/IXFR the question is the apex itself, so offset 12). */
static int parse_query(xfr_stream_t *s, const uint8_t *q, size_t qlen)
{
    if (!q || qlen < WIRE_HDR_LEN || tern_rd16(q + 4) != 1)
        return TERN_EMALF;
    int nl = dname_check(q + WIRE_HDR_LEN, qlen - WIRE_HDR_LEN);
    if (nl < 0 || qlen - WIRE_HDR_LEN < (size_t)nl + 4)
        return TERN_EMALF;
    memcpy(s->id, q, 2);
    s->flags = (uint16_t)(WIRE_FLAG_QR | WIRE_FLAG_AA | (tern_rd16(q + 2) & WIRE_FLAG_RD));
    s->qlen = (size_t)nl + 4;
    memcpy(s->question, q + WIRE_HDR_LEN, s->qlen);
    const zone_t *z = s->z;
    for (size_t p = 0; p + z->apex_len <= (size_t)nl; p += (size_t)s->question[p] + 1) {
        if ((size_t)nl - p == z->apex_len && dname_equal(s->question + p, z->apex)) {
            s->apex_ptr = (uint16_t)(0xC000 | (WIRE_HDR_LEN + p));
            break;
        }
        if (s->question[p] == 0)
            break;
    }
    return 0;
}

static xfr_stream_t *stream_new(const zone_t *z, const uint8_t *query, size_t qlen, size_t nsegs)
{
    xfr_stream_t *s = calloc(1, sizeof(*s));
    if (!s)
        return NULL;
    s->z = z;
    s->segs = calloc(nsegs, sizeof(*s->segs));
    if (!s->segs || parse_query(s, query, qlen) < 0) {
        xfr_stream_free(s);
        return NULL;
    }
    return s;
}

static void soa_seg(const zone_t *z, seg_t *g)
{
    g->kind = SEG_SOA;
    g->soa = (xfr_rrset_t){.owner = z->apex,
                           .owner_len = z->apex_len,
                           .type = WIRE_T_SOA,
                           .count = 1,
                           .ttl = z->soa->ttl,
                           .rdata_len = z->soa->rdata_len,
                           .rdata = z->soa->rdata};
}

xfr_stream_t *xfr_stream_axfr(const zone_t *z, const uint8_t *query, size_t qlen)
{
    xfr_stream_t *s = stream_new(z, query, qlen, 4);
    if (!s)
        return NULL;
    soa_seg(z, &s->segs[s->nsegs++]);
    s->segs[s->nsegs++].kind = SEG_ZONE;
    if (z->dnssec && z->dnssec->export)
        s->segs[s->nsegs++].kind = SEG_EXPORT;
    soa_seg(z, &s->segs[s->nsegs++]);
    return s;
}

xfr_stream_t *xfr_stream_ixfr(const zone_t *z, xfr_delta_t *const *deltas, size_t n,
                              const uint8_t *query, size_t qlen)
{
    if (!deltas) /* RFC 1995 §4: the full zone, in the AXFR layout */
        return xfr_stream_axfr(z, query, qlen);
    /* the chain must lead from the client's serial to exactly this version */
    for (size_t i = 0; i < n; i++)
        if ((i > 0 && xfr_delta_from(deltas[i]) != xfr_delta_to(deltas[i - 1])) ||
            (i == n - 1 && xfr_delta_to(deltas[i]) != z->serial))
            return NULL;
    xfr_stream_t *s = stream_new(z, query, qlen, n ? 2 + 4 * n : 1);
    if (!s)
        return NULL;
    if (n) {
        s->deltas = malloc(n * sizeof(*s->deltas));
        if (!s->deltas) {
            xfr_stream_free(s);
            return NULL;
        }
    }
    soa_seg(z, &s->segs[s->nsegs++]);
    for (size_t i = 0; i < n; i++) {
        const xfr_delta_t *d = s->deltas[s->ndeltas++] = xfr_delta_retain(deltas[i]);
        seg_t *g = &s->segs[s->nsegs];
        g[0].kind = SEG_SOA;
        xfr_delta_soa(d, XFR_REMOVED, &g[0].soa);
        g[1] = (seg_t){.kind = SEG_DELTA, .side = XFR_REMOVED, .d = d};
        g[2].kind = SEG_SOA;
        xfr_delta_soa(d, XFR_ADDED, &g[2].soa);
        g[3] = (seg_t){.kind = SEG_DELTA, .side = XFR_ADDED, .d = d};
        s->nsegs += 4;
    }
    if (n)
        soa_seg(z, &s->segs[s->nsegs++]);
    return s;
}

/* Load the next RRset with at least one RR into s->cur; false at the end of the response. */
static bool next_rrset(xfr_stream_t *s)
{
    const zone_t *z = s->z;
    while (s->seg < s->nsegs) {
        const seg_t *g = &s->segs[s->seg];
        bool got = false;
        switch (g->kind) {
        case SEG_SOA:
            if (s->pos == 0) {
                s->cur = g->soa;
                s->pos = 1;
                got = true;
            }
            break;
        case SEG_ZONE:
            /* ENT nodes have no RRsets and fall through; the synthetic neg_soa is in no node */
            while (!got && s->node < z->node_count) {
                const zone_node_t *n = zone_node_at(z, (uint32_t)s->node);
                if (s->rrset == n->nrrsets) {
                    s->node++;
                    s->rrset = 0;
                    continue;
                }
                const zone_rrset_t *rs = &n->rrsets[s->rrset++];
                if (n == z->apex_node && rs->type == WIRE_T_SOA)
                    continue; /* it opens and closes the transfer */
                s->cur = (xfr_rrset_t){.owner = n->name,
                                       .owner_len = n->name_len,
                                       .type = rs->type,
                                       .count = rs->count,
                                       .ttl = rs->ttl,
                                       .rdata_len = rs->rdata_len,
                                       .rdata = rs->rdata};
                got = true;
            }
            break;
        case SEG_EXPORT: {
            const dnssec_export_t *e = z->dnssec->export;
            if (s->pos < e->count) {
                const dnssec_export_set_t *x = &e->sets[s->pos++];
                s->cur = (xfr_rrset_t){.owner = x->owner,
                                       .owner_len = x->owner_len,
                                       .type = x->type,
                                       .count = x->count,
                                       .ttl = x->ttl,
                                       .rdata_len = x->rdata_len,
                                       .rdata = x->rdata};
                got = true;
            }
            break;
        }
        case SEG_DELTA:
            got = xfr_delta_next(g->d, g->side, &s->pos, &s->cur);
            break;
        }
        if (got) {
            if (s->cur.count == 0)
                continue;
            s->have = true;
            s->rr = 0;
            s->rr_off = 0;
            return true;
        }
        s->seg++;
        s->pos = s->node = s->rrset = 0;
    }
    return false;
}

/* Where the current message stands for owner compression: the last owner written in full and
 * where (a pointer to it must fit 14 bits). */
typedef struct msg {
    uint8_t *buf;
    size_t len, limit;
    unsigned count;
    const uint8_t *prev; /* last owner written with its labels, in this message */
    uint8_t prev_len;
    uint16_t prev_off;
} msg_t;

/* Bytes the owner takes, and how: 0 = a pointer to the previous owner, else the first `pre`
 * bytes of labels followed by the apex pointer (apex) or by nothing (the whole name). */
typedef struct owner_form {
    size_t size;
    size_t pre;
    uint16_t ptr; /* pointer to write after the `pre` bytes, 0: none */
} owner_form_t;

static owner_form_t owner_form(const xfr_stream_t *s, const msg_t *m, const xfr_rrset_t *r)
{
    if (m->prev && m->prev_len == r->owner_len && memcmp(m->prev, r->owner, r->owner_len) == 0)
        return (owner_form_t){.size = 2, .pre = 0, .ptr = (uint16_t)(0xC000 | m->prev_off)};
    const zone_t *z = s->z;
    if (s->apex_ptr && r->owner_len >= z->apex_len &&
        memcmp(r->owner + r->owner_len - z->apex_len, z->apex, z->apex_len) == 0) {
        size_t pre = (size_t)r->owner_len - z->apex_len;
        return (owner_form_t){.size = pre + 2, .pre = pre, .ptr = s->apex_ptr};
    }
    return (owner_form_t){.size = r->owner_len, .pre = r->owner_len, .ptr = 0};
}

/* Append the next RR of s->cur to m; false (m unchanged) when it does not fit. */
static bool write_rr(xfr_stream_t *s, msg_t *m)
{
    const xfr_rrset_t *r = &s->cur;
    const uint8_t *rd = r->rdata + s->rr_off;
    size_t rdlen = tern_rd16(rd);
    owner_form_t f = owner_form(s, m, r);
    if (m->len + f.size + 10 + rdlen > m->limit)
        return false;
    uint8_t *p = m->buf + m->len;
    if (f.pre) {
        memcpy(p, r->owner, f.pre);
        /* a later RR of this owner points here; beyond 14 bits of offset it cannot */
        if (m->len <= 0x3FFF) {
            m->prev = r->owner;
            m->prev_len = r->owner_len;
            m->prev_off = (uint16_t)m->len;
        }
    }
    if (f.ptr)
        tern_wr16(p + f.pre, f.ptr);
    p += f.size;
    tern_wr16(p, r->type);
    tern_wr16(p + 2, WIRE_CLASS_IN);
    tern_wr32(p + 4, r->ttl);
    memcpy(p + 8, rd, 2 + rdlen); /* RDLENGTH and RDATA, names uncompressed */
    m->len += f.size + 10 + rdlen;
    m->count++;
    s->rr++;
    s->rr_off += 2 + rdlen;
    s->records++;
    return true;
}

int xfr_stream_next(xfr_stream_t *s, uint8_t *buf, size_t cap, size_t reserve, size_t *len)
{
    *len = 0;
    if (s->state != 0)
        return s->state < 0 ? s->state : TERN_EINVAL;
    size_t limit = cap < XFR_MSG_MAX ? cap : XFR_MSG_MAX;
    if (reserve >= limit || limit - reserve < WIRE_HDR_LEN + s->qlen) {
        s->state = TERN_ETRUNC;
        return s->state;
    }
    msg_t m = {.buf = buf, .len = WIRE_HDR_LEN + s->qlen, .limit = limit - reserve};
    memcpy(buf + WIRE_HDR_LEN, s->question, s->qlen);
    bool more = true;
    /* ANCOUNT is 16 bits; a message of empty-RDATA RRs with 2-byte owners would stop at
     * 65535 / 12 RRs anyway, the bound only makes that explicit */
    while (m.count < UINT16_MAX) {
        if (!s->have || s->rr == s->cur.count) {
            s->have = false;
            if (!next_rrset(s)) {
                more = false;
                break;
            }
        }
        if (!write_rr(s, &m)) {
            if (m.count == 0) { /* one RR larger than a whole message */
                s->state = TERN_ETRUNC;
                return s->state;
            }
            break;
        }
    }
    /* a message full by count: the end may still be right here, and then this is the last */
    if (more && m.count == UINT16_MAX && (!s->have || s->rr == s->cur.count) && !next_rrset(s))
        more = false;
    memcpy(buf, s->id, 2);
    tern_wr16(buf + 2, s->flags);
    tern_wr16(buf + 4, 1);
    tern_wr16(buf + 6, (uint16_t)m.count);
    tern_wr16(buf + 8, 0);
    tern_wr16(buf + 10, 0);
    *len = m.len;
    if (!more)
        s->state = 1;
    return more ? 1 : 0;
}

uint64_t xfr_stream_records(const xfr_stream_t *s)
{
    return s->records;
}

void xfr_stream_free(xfr_stream_t *s)
{
    if (!s)
        return;
    for (size_t i = 0; i < s->ndeltas; i++)
        xfr_delta_release(s->deltas[i]);
    free(s->deltas);
    free(s->segs);
    free(s);
}
