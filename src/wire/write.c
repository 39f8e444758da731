/*
 * write.c — response rendering: header and question from the query, RRsets appended whole or not
 * at all, names compressed against a small table of suffixes already in the message.
 *
 * Every name goes through put_name(): find the longest suffix already written (hash probe, then
 * a real comparison, since hashes collide), copy the labels before it, end with a pointer or the
 * root. Suffixes written literally are registered so later names can point at them.
 */
#include "tern/wire/write.h"

#include <string.h>

#include "tern/common/byteorder.h"
#include "tern/common/err.h"
#include "tern/wire/rdata.h"

/* RFC 1035 §4.1.4: a pointer holds a 14-bit offset, so only names starting below this can be
 * pointed at. */
#define PTR_MAX_OFF 0x4000u
#define PTR_BITS    0xC000u

/* The largest DNS message (RFC 1035 §4.2.2: TCP length is 16 bits); offsets fit in uint16_t. */
#define MSG_MAX 65535u

/* Owner, type, class, TTL, RDLENGTH of an OPT record with an empty RDATA (RFC 6891 §6.1.2). */
#define OPT_FIXED_LEN 11
/* Option code, option length, family, source prefix, scope prefix (RFC 7871 §6). */
#define ECS_FIXED_LEN 8

/* A name we wrote ourselves needs at most one hop per label; anything more means the caller
 * handed us an offset that isn't a name, and we stop rather than loop. */
#define OWN_NAME_MAX_HOPS DNAME_MAXLABELS

static inline uint8_t ascii_lower(uint8_t c)
{
    return (uint8_t)(c >= 'A' && c <= 'Z' ? c + ('a' - 'A') : c);
}

/* Offset where the name at off really starts: follows pointers (a pointer to a pointer is legal
 * but would make every reader do an extra hop). Returns -1 if off isn't inside the message. */
static long resolve_off(const wire_writer_t *w, size_t off)
{
    for (unsigned hops = 0; hops <= OWN_NAME_MAX_HOPS; hops++) {
        if (off >= w->len)
            return -1;
        uint8_t l = w->buf[off];
        if ((l & 0xC0u) != 0xC0u)
            return (long)off;
        if (off + 1 >= w->len)
            return -1;
        off = (size_t)tern_rd16(w->buf + off) & ~(size_t)PTR_BITS;
    }
    return -1;
}

/*
 * Does the name at message offset off equal the lowercased uncompressed name lc? Follows
 * pointers; bounded by the message length and a hop count so a stale table entry can't loop.
 */
static bool msg_name_equal(const wire_writer_t *w, size_t off, const uint8_t *lc)
{
    unsigned hops = 0;
    for (;;) {
        if (off >= w->len)
            return false;
        uint8_t l = w->buf[off];
        if ((l & 0xC0u) == 0xC0u) {
            if (off + 1 >= w->len || ++hops > OWN_NAME_MAX_HOPS)
                return false;
            off = (size_t)tern_rd16(w->buf + off) & ~(size_t)PTR_BITS;
            continue;
        }
        if (l != lc[0] || l > DNAME_MAXLABEL || off + 1 + l > w->len)
            return false;
        if (l == 0)
            return true;
        for (unsigned i = 1; i <= l; i++)
            if (ascii_lower(w->buf[off + i]) != lc[i])
                return false;
        off += (size_t)l + 1;
        lc += l + 1;
    }
}

/* Expand the name at message offset off into dst (255 bytes). Returns its length or -1. */
static int msg_name_expand(const wire_writer_t *w, size_t off, uint8_t *dst)
{
    size_t o = 0;
    unsigned hops = 0;
    for (;;) {
        if (off >= w->len)
            return -1;
        uint8_t l = w->buf[off];
        if ((l & 0xC0u) == 0xC0u) {
            if (off + 1 >= w->len || ++hops > OWN_NAME_MAX_HOPS)
                return -1;
            off = (size_t)tern_rd16(w->buf + off) & ~(size_t)PTR_BITS;
            continue;
        }
        if (l > DNAME_MAXLABEL || off + 1 + l > w->len || o + 1 + l > DNAME_MAXLEN)
            return -1;
        memcpy(dst + o, w->buf + off, (size_t)l + 1);
        o += (size_t)l + 1;
        if (l == 0)
            return (int)o;
        off += (size_t)l + 1;
    }
}

static void comp_add(wire_writer_t *w, size_t off, unsigned labels, uint32_t hash)
{
    /* Past the table's size names are still correct, just less compressed (write.h). */
    if (off >= PTR_MAX_OFF || w->ncomp >= WIRE_COMP_MAX)
        return;
    wire_comp_entry_t *e = &w->comp[w->ncomp++];
    e->off = (uint16_t)off;
    e->labels = (uint8_t)labels;
    e->hash = hash;
}

/*
 * Append name (uncompressed wire name; v its view) at w->len, compressed. Returns the bytes
 * written or TERN_ENOSPC (nothing written, table unchanged) if they don't fit before end.
 */
static int put_name(wire_writer_t *w, size_t end, const uint8_t *name, const dname_view_t *v)
{
    unsigned n = v->nlabels;
    const wire_comp_entry_t *best = NULL;
    for (unsigned k = 0; k < w->ncomp; k++) {
        const wire_comp_entry_t *e = &w->comp[k];
        if (e->labels > n || (best && e->labels <= best->labels))
            continue;
        unsigned i = n - e->labels;
        if (e->hash == v->hash[i] && msg_name_equal(w, e->off, v->lc + v->off[i])) {
            best = e;
            if (e->labels == n)
                break;
        }
    }
    unsigned lit = best ? n - best->labels : n; /* labels written literally */
    size_t litlen = v->off[lit];                /* off[n] is the root's offset, so this works */
    size_t total = litlen + (best ? 2 : 1);
    if (w->len + total > end)
        return TERN_ENOSPC;

    size_t start = w->len;
    memcpy(w->buf + start, name, litlen); /* case as given: only lookups fold case */
    if (best)
        tern_wr16(w->buf + start + litlen, PTR_BITS | best->off);
    else
        w->buf[start + litlen] = 0;
    for (unsigned k = 0; k < lit; k++)
        comp_add(w, start + v->off[k], n - k, v->hash[k]);
    w->len += total;
    return (int)total;
}

/* Pointer to offset off (< PTR_MAX_OFF). */
static int put_ptr(wire_writer_t *w, size_t end, size_t off)
{
    if (w->len + 2 > end)
        return TERN_ENOSPC;
    tern_wr16(w->buf + w->len, PTR_BITS | (unsigned)off);
    w->len += 2;
    return 2;
}

/* Copy n bytes verbatim. */
static int put_bytes(wire_writer_t *w, size_t end, const uint8_t *src, size_t n)
{
    if (w->len + n > end)
        return TERN_ENOSPC;
    memcpy(w->buf + w->len, src, n);
    w->len += n;
    return 0;
}

/* Where the name sits in the RDATA for w->last_name_off (write.h), or -1 for none. */
static int rd_name_pos(uint16_t type, size_t rdlen)
{
    switch (type) {
    case WIRE_T_CNAME:
    case WIRE_T_NS:
    case WIRE_T_PTR:
    case WIRE_T_DNAME:
        return rdlen > 0 ? 0 : -1;
    case WIRE_T_MX:
        return rdlen > 2 ? 2 : -1;
    case WIRE_T_SRV: /* priority, weight, port, target */
        return rdlen > 6 ? 6 : -1;
    default:
        return -1;
    }
}

/*
 * One RDATA: compressed per its layout when it parses as that layout, verbatim otherwise
 * (zone data is validated at load, but a copy is always a faithful rendering). v is scratch.
 */
static int put_rdata(wire_writer_t *w, size_t end, uint16_t type, const uint8_t *rd, size_t rdlen,
                     dname_view_t *v, const dname_view_t *const *pre, unsigned npre)
{
    wire_rdata_layout_t l;
    if (wire_rdata_layout(type, &l) && l.compress && rdlen >= (size_t)l.head + l.tail) {
        /* Check the whole layout first so a bad RDATA is never half compressed. */
        size_t p = l.head;
        bool ok = true;
        for (unsigned k = 0; k < l.names && ok; k++) {
            int nl = dname_check(rd + p, rdlen - p);
            if (nl < 0)
                ok = false;
            else
                p += (size_t)nl;
        }
        if (ok && rdlen - p == l.tail) {
            if (put_bytes(w, end, rd, l.head) < 0)
                return TERN_ENOSPC;
            p = l.head;
            for (unsigned k = 0; k < l.names; k++) {
                /* a view the caller made of these very bytes (write.h), or one made now */
                const dname_view_t *nv = k < npre ? pre[k] : NULL;
                if (!nv || nv->len != dname_len(rd + p)) {
                    dname_view_init(v, rd + p);
                    nv = v;
                }
                if (put_name(w, end, rd + p, nv) < 0)
                    return TERN_ENOSPC;
                p += nv->len;
            }
            return put_bytes(w, end, rd + p, l.tail);
        }
    }
    return put_bytes(w, end, rd, rdlen);
}

void wire_writer_init(wire_writer_t *w, uint8_t *buf, size_t limit, const wire_query_t *q)
{
    w->buf = buf;
    w->limit = limit > MSG_MAX ? MSG_MAX : limit;
    w->reserved = 0;
    w->len = WIRE_HDR_LEN;
    w->count[0] = w->count[1] = w->count[2] = 0;
    w->section = WIRE_SEC_AN;
    w->last_name_off = 0;
    w->ncomp = 0;

    /* RA is never set: we don't recurse. AD and CD are not echoed: we don't validate. */
    unsigned flags = WIRE_FLAG_QR | (q->flags & (0xFu << 11)) | (q->flags & WIRE_FLAG_RD);
    tern_wr16(buf, q->id);
    tern_wr16(buf + 2, flags);
    memset(buf + 4, 0, 8);

    if (q->has_question && WIRE_HDR_LEN + q->question_len <= w->limit) {
        memcpy(buf + WIRE_HDR_LEN, q->qname, q->question_len);
        w->len += q->question_len;
        tern_wr16(buf + 4, 1);
        const dname_view_t *v = &q->name;
        for (unsigned i = 0; i < v->nlabels; i++)
            comp_add(w, WIRE_HDR_LEN + (size_t)v->off[i], v->nlabels - i, v->hash[i]);
    }
}

int wire_writer_reserve(wire_writer_t *w, size_t n)
{
    if (n > w->limit || w->len > w->limit - n)
        return TERN_ENOSPC;
    w->reserved = n;
    return 0;
}

int wire_write_rrset(wire_writer_t *w, wire_section_t sec, uint16_t owner_off, const uint8_t *owner,
                     uint16_t type, uint32_t ttl, uint16_t count, const uint8_t *rdata)
{
    return wire_write_rrset_class(w, sec, owner_off, owner, type, WIRE_CLASS_IN, ttl, count, rdata);
}

/* The RRset writer: RR r's RDLENGTH+RDATA is at rdata + offs[r], or (offs NULL) next after
 * RR r-1's. */
static int write_rrs(wire_writer_t *w, wire_section_t sec, uint16_t owner_off, const uint8_t *owner,
                     uint16_t type, uint16_t rclass, uint32_t ttl, uint16_t count,
                     const uint8_t *rdata, const uint32_t *offs, const dname_view_t *const *pre,
                     unsigned npre)
{
    if ((int)sec < w->section || sec > WIRE_SEC_AR)
        return TERN_EINVAL; /* records are appended: an earlier section is already closed */
    if (count == 0)
        return 0;
    if ((unsigned)w->count[sec] + count > 0xFFFFu)
        return TERN_ENOSPC;

    const size_t end = w->limit - w->reserved;
    const size_t save_len = w->len;
    const unsigned save_ncomp = w->ncomp;
    dname_view_t ov, rv; /* owner, RDATA names: about 900 bytes each, on the stack by design */
    uint8_t expanded[DNAME_MAXLEN];
    size_t last_name = 0;

    /* Where the owner already is, if anywhere we can point at. */
    long at = owner_off != 0 ? resolve_off(w, owner_off) : -1;
    if (at >= (long)PTR_MAX_OFF) {
        /* Too far for a pointer (large TCP answers): write it again, compressed. */
        if (!owner && msg_name_expand(w, (size_t)at, expanded) > 0)
            owner = expanded;
        at = -1;
    }
    if (at < 0 && !owner)
        return TERN_EINVAL; /* owner_off wasn't a name in the message and no owner given */
    if (at < 0)
        dname_view_init(&ov, owner);

    /* The first owner decides what the others repeat: a pointer to it, or its short form. */
    size_t first_off = 0, first_len = 0;
    const uint8_t *rd = rdata;
    for (unsigned r = 0; r < count; r++) {
        int n;
        if (r == 0) {
            first_off = w->len;
            n = at >= 0 ? put_ptr(w, end, (size_t)at) : put_name(w, end, owner, &ov);
            first_len = n > 0 ? (size_t)n : 0;
        } else if (first_len <= 2) { /* the root or a pointer: as short as it gets */
            n = put_bytes(w, end, w->buf + first_off, first_len);
        } else if (first_off < PTR_MAX_OFF) {
            n = put_ptr(w, end, first_off);
        } else {
            n = put_name(w, end, owner, &ov);
        }
        if (n < 0 || w->len + 10 > end)
            goto nospace;

        uint8_t *fixed = w->buf + w->len;
        tern_wr16(fixed, type);
        tern_wr16(fixed + 2, rclass);
        tern_wr32(fixed + 4, ttl);
        w->len += 10;

        if (offs)
            rd = rdata + offs[r];
        size_t rdlen = tern_rd16(rd);
        size_t rd_start = w->len;
        if (put_rdata(w, end, type, rd + 2, rdlen, &rv, r == 0 ? pre : NULL, r == 0 ? npre : 0) < 0)
            goto nospace;
        /* Compression only shrinks names; the length is what was written, not what was given. */
        tern_wr16(fixed + 8, (unsigned)(w->len - rd_start));
        int np = rd_name_pos(type, rdlen);
        last_name = np >= 0 ? rd_start + (size_t)np : 0;
        rd += 2 + rdlen;
    }

    w->count[sec] += count;
    w->section = (int)sec;
    w->last_name_off = (uint16_t)last_name;
    return 0;

nospace:
    /* The message is exactly as before: bytes past len are not part of it, and the table
     * loses the entries that pointed into them. */
    w->len = save_len;
    w->ncomp = save_ncomp;
    return TERN_ENOSPC;
}

int wire_write_rrset_class(wire_writer_t *w, wire_section_t sec, uint16_t owner_off,
                           const uint8_t *owner, uint16_t type, uint16_t rclass, uint32_t ttl,
                           uint16_t count, const uint8_t *rdata)
{
    return write_rrs(w, sec, owner_off, owner, type, rclass, ttl, count, rdata, NULL, NULL, 0);
}

int wire_write_rr_raw(wire_writer_t *w, wire_section_t sec, uint16_t owner_off, const uint8_t *rest,
                      size_t n, const uint16_t *ptr_at, const uint16_t *ptr_to, unsigned nptr)
{
    if ((int)sec < w->section || sec > WIRE_SEC_AR || owner_off >= PTR_MAX_OFF)
        return TERN_EINVAL;
    if (w->count[sec] == 0xFFFFu || w->len + 2 + n > w->limit - w->reserved)
        return TERN_ENOSPC;
    uint8_t *o = w->buf + w->len;
    tern_wr16(o, PTR_BITS | owner_off);
    memcpy(o + 2, rest, n);
    for (unsigned i = 0; i < nptr; i++)
        tern_wr16(o + 2 + ptr_at[i], PTR_BITS | (ptr_to[i] & ~PTR_BITS));
    w->len += 2 + n;
    w->count[sec]++;
    w->section = (int)sec;
    w->last_name_off = 0;
    return 0;
}

int wire_write_rrset_names(wire_writer_t *w, wire_section_t sec, uint16_t owner_off,
                           const uint8_t *owner, uint16_t type, uint32_t ttl, uint16_t count,
                           const uint8_t *rdata, const dname_view_t *const *names, unsigned n)
{
    return write_rrs(w, sec, owner_off, owner, type, WIRE_CLASS_IN, ttl, count, rdata, NULL, names,
                     n);
}

int wire_write_rrs(wire_writer_t *w, wire_section_t sec, uint16_t owner_off, const uint8_t *owner,
                   uint16_t type, uint32_t ttl, uint16_t count, const uint8_t *rdata,
                   const uint32_t *offs)
{
    return write_rrs(w, sec, owner_off, owner, type, 1, ttl, count, rdata, offs, NULL, 0);
}

size_t wire_opt_size(const wire_ecs_t *ecs, size_t cookie_len)
{
    size_t n = OPT_FIXED_LEN + (cookie_len ? 4 + cookie_len : 0);
    if (!ecs)
        return n;
    size_t alen = ((size_t)ecs->source_prefix + 7) / 8;
    return n + ECS_FIXED_LEN + (alen > sizeof(ecs->addr) ? sizeof(ecs->addr) : alen);
}

int wire_write_opt(wire_writer_t *w, uint16_t udp_size, uint8_t ext_rcode, bool do_bit,
                   const wire_ecs_t *ecs, uint8_t scope_prefix, const uint8_t *cookie,
                   size_t cookie_len)
{
    if ((ecs && ecs->source_prefix > 8 * sizeof(ecs->addr)) || cookie_len > WIRE_COOKIE_MAX)
        return TERN_EINVAL;
    size_t need = wire_opt_size(ecs, cookie_len);
    if (w->len + need > w->limit || w->count[WIRE_SEC_AR] == 0xFFFFu)
        return TERN_ENOSPC;
    w->reserved = 0; /* the room was kept for exactly this */

    uint8_t *p = w->buf + w->len;
    p[0] = 0; /* owner: the root */
    tern_wr16(p + 1, WIRE_T_OPT);
    tern_wr16(p + 3, udp_size);
    /* TTL: extended rcode, version 0, DO, Z zero (RFC 6891 §6.1.3) */
    tern_wr32(p + 5, (uint32_t)ext_rcode << 24 | (do_bit ? 0x8000u : 0));
    tern_wr16(p + 9, (unsigned)(need - OPT_FIXED_LEN));
    uint8_t *o = p + OPT_FIXED_LEN;
    if (ecs) {
        size_t alen = ((size_t)ecs->source_prefix + 7) / 8;
        tern_wr16(o, WIRE_EDNS_ECS);
        tern_wr16(o + 2, (unsigned)(4 + alen));
        tern_wr16(o + 4, ecs->family);
        o[6] = ecs->source_prefix;
        o[7] = scope_prefix;
        memcpy(o + 8, ecs->addr, alen);
        /* RFC 7871 §6: address bits past the source prefix are zero. */
        if (ecs->source_prefix % 8)
            o[8 + alen - 1] &= (uint8_t)(0xFFu << (8 - ecs->source_prefix % 8));
        o += ECS_FIXED_LEN + alen;
    }
    if (cookie_len) {
        tern_wr16(o, WIRE_EDNS_COOKIE);
        tern_wr16(o + 2, (unsigned)cookie_len);
        memcpy(o + 4, cookie, cookie_len);
    }
    w->len += need;
    w->count[WIRE_SEC_AR]++;
    w->section = WIRE_SEC_AR;
    return 0;
}

size_t wire_writer_finish(wire_writer_t *w, bool aa, bool tc, unsigned rcode)
{
    unsigned flags = tern_rd16(w->buf + 2);
    flags &= ~(WIRE_FLAG_AA | WIRE_FLAG_TC | 0xFu);
    flags |= (aa ? WIRE_FLAG_AA : 0) | (tc ? WIRE_FLAG_TC : 0) | (rcode & 0xFu);
    tern_wr16(w->buf + 2, flags);
    tern_wr16(w->buf + 6, w->count[WIRE_SEC_AN]);
    tern_wr16(w->buf + 8, w->count[WIRE_SEC_NS]);
    tern_wr16(w->buf + 10, w->count[WIRE_SEC_AR]);
    return w->len;
}
