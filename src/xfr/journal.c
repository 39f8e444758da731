/*
 * journal.c — zone diffs (xfr_diff) and the per-zone IXFR journal (see journal.h).
 *
 * A delta keeps each side (removed, added) as one byte buffer of groups, each group some RRs of
 * one owner, type and TTL:
 *     owner_len (1) | owner | type (2) | count (2) | ttl (4) | rdata_len (4) | RDATA sequence
 * (fields in host order: the buffer never leaves the process). One buffer per side rather than
 * one allocation per RR: a delta of a large reload may hold millions of RRs, and the stream
 * reads them in order anyway.
 */
#include "tern/xfr/journal.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "tern/common/byteorder.h"
#include "tern/common/err.h"
#include "tern/common/grow.h"
#include "tern/dnssec/dnssec_export.h"
#include "tern/dnssec/dnssec_zone.h"
#include "tern/wire/dname.h"
#include "tern/wire/rr.h"
#include "tern/zone/zone_patch.h"

/* Bytes of a group header after the owner name: type, count, ttl, rdata_len. */
#define GROUP_FIXED 12

struct side {
    uint8_t *buf; /* groups, see above */
    size_t len, cap;
    size_t rrs;
    uint32_t soa_ttl;
    uint32_t soa_len; /* bytes at soa: one RR in RDATA-sequence form */
    uint8_t *soa;
};

struct xfr_delta {
    uint32_t refs; /* atomic */
    uint32_t from, to;
    struct side side[2]; /* XFR_REMOVED, XFR_ADDED */
    uint8_t apex_len;
    uint8_t apex[DNAME_MAXLEN];
};

/* ---- building a delta ------------------------------------------------------------------- */

typedef struct diff_ctx {
    xfr_delta_t *d;
    bool apex;          /* the node being compared is the apex (its SOA is not a diff) */
    const uint8_t **rr; /* scratch: the RRs of two RRsets being compared */
    size_t rr_cap;
} diff_ctx_t;

static int side_reserve(struct side *s, size_t n)
{
    return tern_grow((void **)&s->buf, &s->cap, s->len + n, 1);
}

/* Start a group; returns its offset in s->buf (for group_add_rr), or TERN_ENOMEM. */
static int64_t group_begin(struct side *s, const uint8_t *owner, uint8_t olen, uint16_t type,
                           uint32_t ttl, size_t room)
{
    if (side_reserve(s, 1 + (size_t)olen + GROUP_FIXED + room) < 0)
        return TERN_ENOMEM;
    size_t start = s->len;
    uint8_t *p = s->buf + start;
    uint16_t count = 0;
    uint32_t rdlen = 0;
    *p++ = olen;
    memcpy(p, owner, olen);
    p += olen;
    memcpy(p, &type, 2);
    memcpy(p + 2, &count, 2);
    memcpy(p + 4, &ttl, 4);
    memcpy(p + 8, &rdlen, 4);
    s->len += 1 + (size_t)olen + GROUP_FIXED;
    return (int64_t)start;
}

/* Append one RR (rr points at its RDLENGTH) to the group at offset start, the last one. */
static int group_add_rr(struct side *s, size_t start, const uint8_t *rr)
{
    size_t n = 2 + (size_t)tern_rd16(rr);
    if (side_reserve(s, n) < 0)
        return TERN_ENOMEM;
    memcpy(s->buf + s->len, rr, n);
    s->len += n;
    uint8_t *h = s->buf + start + 1 + s->buf[start];
    uint16_t count;
    uint32_t rdlen;
    memcpy(&count, h + 2, 2);
    memcpy(&rdlen, h + 8, 4);
    count++;
    rdlen += (uint32_t)n;
    memcpy(h + 2, &count, 2);
    memcpy(h + 8, &rdlen, 4);
    s->rrs++;
    return 0;
}

/* Append a whole RRset as one group. */
static int put_rrset(struct side *s, const zone_node_t *node, const zone_rrset_t *rs)
{
    int64_t start = group_begin(s, node->name, node->name_len, rs->type, rs->ttl, rs->rdata_len);
    if (start < 0)
        return (int)start;
    uint8_t *h = s->buf + start + 1 + node->name_len;
    memcpy(h + 2, &rs->count, 2);
    memcpy(h + 8, &rs->rdata_len, 4);
    memcpy(s->buf + s->len, rs->rdata, rs->rdata_len);
    s->len += rs->rdata_len;
    s->rrs += rs->count;
    return 0;
}

/* Order of RRs for the set difference: by RDLENGTH, then bytes. Any total order works; this
 * one decides most comparisons on the length alone. */
static int rr_cmp(const void *a, const void *b)
{
    const uint8_t *x = *(const uint8_t *const *)a, *y = *(const uint8_t *const *)b;
    uint16_t lx = tern_rd16(x), ly = tern_rd16(y);
    if (lx != ly)
        return lx < ly ? -1 : 1;
    return memcmp(x + 2, y + 2, lx);
}

static void rr_list(const zone_rrset_t *rs, const uint8_t **out)
{
    const uint8_t *p = rs->rdata;
    for (unsigned i = 0; i < rs->count; i++) {
        out[i] = p;
        p += 2 + tern_rd16(p);
    }
}

/* One type present in both versions. RRs are compared byte for byte: RDATA that differs only in
 * the case of a name is removed and added again, which a secondary applies correctly (it deletes
 * the old spelling, case-insensitively, and adds the new one). */
static int diff_rrset(diff_ctx_t *c, const zone_node_t *node, const zone_rrset_t *o,
                      const zone_rrset_t *n)
{
    /* the fast path: a patched version shares the RDATA of every RRset it did not touch */
    if (o->rdata == n->rdata && o->rdata_len == n->rdata_len && o->count == n->count &&
        o->ttl == n->ttl)
        return 0;
    struct side *rm = &c->d->side[XFR_REMOVED], *add = &c->d->side[XFR_ADDED];
    if (o->ttl != n->ttl) {
        /* RFC 1995 has no "change the TTL": the RRset goes and comes back with the new one */
        int rc = put_rrset(rm, node, o);
        return rc < 0 ? rc : put_rrset(add, node, n);
    }
    /* a full rebuild of unchanged data renders the same bytes in the same order */
    if (o->rdata_len == n->rdata_len && o->count == n->count &&
        memcmp(o->rdata, n->rdata, o->rdata_len) == 0)
        return 0;
    size_t need = (size_t)o->count + n->count;
    if (need > c->rr_cap) {
        const uint8_t **p = realloc(c->rr, need * sizeof(*p));
        if (!p)
            return TERN_ENOMEM;
        c->rr = p;
        c->rr_cap = need;
    }
    const uint8_t **ro = c->rr, **rn = c->rr + o->count;
    rr_list(o, ro);
    rr_list(n, rn);
    qsort(ro, o->count, sizeof(*ro), rr_cmp);
    qsort(rn, n->count, sizeof(*rn), rr_cmp);
    int64_t gr = -1, ga = -1; /* the groups, begun at the first RR each side gets */
    unsigned i = 0, k = 0;
    while (i < o->count || k < n->count) {
        int cmp = i == o->count ? 1 : k == n->count ? -1 : rr_cmp(&ro[i], &rn[k]);
        if (cmp == 0) {
            i++;
            k++;
            continue;
        }
        struct side *s = cmp < 0 ? rm : add;
        int64_t *g = cmp < 0 ? &gr : &ga;
        const uint8_t *rr = cmp < 0 ? ro[i++] : rn[k++];
        if (*g < 0) {
            *g = group_begin(s, node->name, node->name_len, n->type, n->ttl, 0);
            if (*g < 0)
                return (int)*g;
        }
        if (group_add_rr(s, (size_t)*g, rr) < 0)
            return TERN_ENOMEM;
    }
    return 0;
}

/* One name: o or n may be NULL (the name is only in one version). Both RRset arrays are sorted
 * by type, so one merge pass pairs them. */
static int diff_node(diff_ctx_t *c, const zone_node_t *o, const zone_node_t *n)
{
    const zone_node_t *node = n ? n : o;
    unsigned no = o ? o->nrrsets : 0, nn = n ? n->nrrsets : 0, i = 0, k = 0;
    while (i < no || k < nn) {
        const zone_rrset_t *a = i < no ? &o->rrsets[i] : NULL;
        const zone_rrset_t *b = k < nn ? &n->rrsets[k] : NULL;
        uint16_t type = !b || (a && a->type < b->type) ? a->type : b->type;
        int rc = 0;
        bool skip = c->apex && type == WIRE_T_SOA; /* the SOAs are kept apart */
        if (b == NULL || (a && a->type < b->type)) {
            rc = skip ? 0 : put_rrset(&c->d->side[XFR_REMOVED], node, a);
            i++;
        } else if (a == NULL || b->type < a->type) {
            rc = skip ? 0 : put_rrset(&c->d->side[XFR_ADDED], node, b);
            k++;
        } else {
            rc = skip ? 0 : diff_rrset(c, node, a, b);
            i++;
            k++;
        }
        if (rc < 0)
            return rc;
    }
    return 0;
}

/* A signed zone's export set as the node and RRset diff_rrset() and put_rrset() compare. */
static void export_as_rrset(const dnssec_export_set_t *x, zone_node_t *node, zone_rrset_t *rs)
{
    *node = (zone_node_t){.name = x->owner, .name_len = x->owner_len};
    *rs = (zone_rrset_t){.type = x->type,
                         .count = x->count,
                         .ttl = x->ttl,
                         .rdata_len = x->rdata_len,
                         .rdata = x->rdata};
}

/* The NSEC chains and RRSIGs of two versions of a signed zone (either may have none: signing
 * turned on or off): both lists are in one order (dnssec_export_set_cmp()), so one merge pass
 * pairs them. */
static int diff_exports(diff_ctx_t *c, const dnssec_export_t *o, const dnssec_export_t *n)
{
    size_t no = o ? o->count : 0, nn = n ? n->count : 0, i = 0, k = 0;
    c->apex = false;
    while (i < no || k < nn) {
        int cmp = i == no ? 1 : k == nn ? -1 : dnssec_export_set_cmp(&o->sets[i], &n->sets[k]);
        zone_node_t node, node2;
        zone_rrset_t a, b;
        int rc;
        if (cmp < 0) {
            export_as_rrset(&o->sets[i++], &node, &a);
            rc = put_rrset(&c->d->side[XFR_REMOVED], &node, &a);
        } else if (cmp > 0) {
            export_as_rrset(&n->sets[k++], &node, &b);
            rc = put_rrset(&c->d->side[XFR_ADDED], &node, &b);
        } else {
            export_as_rrset(&o->sets[i++], &node2, &a);
            export_as_rrset(&n->sets[k++], &node, &b);
            rc = diff_rrset(c, &node, &a, &b);
        }
        if (rc < 0)
            return rc;
    }
    return 0;
}

static const dnssec_export_t *export_of(const zone_t *z)
{
    return z->dnssec ? z->dnssec->export : NULL;
}

static int copy_soa(struct side *s, const zone_t *z)
{
    s->soa = malloc(z->soa->rdata_len);
    if (!s->soa)
        return TERN_ENOMEM;
    memcpy(s->soa, z->soa->rdata, z->soa->rdata_len);
    s->soa_len = z->soa->rdata_len;
    s->soa_ttl = z->soa->ttl;
    return 0;
}

/* Give back what doubling over-allocated: a journal keeps deltas for hours. */
static void side_shrink(struct side *s)
{
    if (s->len && s->len < s->cap) {
        uint8_t *p = realloc(s->buf, s->len);
        if (p) {
            s->buf = p;
            s->cap = s->len;
        }
    }
}

static void delta_free(xfr_delta_t *d)
{
    for (int i = 0; i < 2; i++) {
        free(d->side[i].buf);
        free(d->side[i].soa);
    }
    free(d);
}

/* Nodes of z that hold RRsets (one sequential pass reading a byte per node). */
static size_t names_with_data(const zone_t *z)
{
    size_t n = 0;
    for (size_t i = 0; i < z->node_count; i++)
        n += zone_node_at(z, (uint32_t)i)->nrrsets != 0;
    return n;
}

/* Every name of both versions: each of new holding data looked up in old, then (only when some
 * old name with data was not paired) each of old holding data looked up in new. */
static int diff_whole(diff_ctx_t *c, const zone_t *old, const zone_t *new)
{
    /* Pass 1: every name of the new version that holds data, looked up in the old one. Only
     * nodes with RRsets: a name with none (an empty non-terminal) has nothing to add. The array,
     * not the index (whose slots carry each name's hash), because in array order nodes and names
     * are read sequentially: on a 1M-name zone that beat skipping the hashing by a third. */
    size_t matched = 0;
    for (size_t i = 0; i < new->node_count; i++) {
        const zone_node_t *n = zone_node_at(new, (uint32_t)i);
        if (!n->nrrsets)
            continue;
        const zone_node_t *o = zone_find_node(old, n->name, n->name_len, dname_hash(n->name));
        c->apex = n == new->apex_node;
        if (o && o->nrrsets) {
            matched++;
            if (o->rrsets == n->rrsets && o->nrrsets == n->nrrsets)
                continue; /* the same array: the same data */
        }
        if (diff_node(c, o, n) < 0)
            return TERN_ENOMEM;
    }
    /* Pass 2, only when some old name with data was not paired with a new one holding data
     * (one live node per name, so `matched` old names were): the names whose data went away,
     * gone from the index or left as an empty non-terminal. */
    if (matched == names_with_data(old))
        return 0;
    c->apex = false; /* the apex is paired: it always holds the SOA */
    for (size_t i = 0; i < old->node_count; i++) {
        const zone_node_t *o = zone_node_at(old, (uint32_t)i);
        if (!o->nrrsets)
            continue;
        const zone_node_t *n = zone_find_node(new, o->name, o->name_len, dname_hash(o->name));
        if ((!n || !n->nrrsets) && diff_node(c, o, NULL) < 0)
            return TERN_ENOMEM;
    }
    return 0;
}

/* One changed name of a delta, as diff_whole() would meet it: id orders it within its pass. */
struct pick {
    uint32_t id;
    const zone_node_t *o, *n;
};

static int pick_cmp(const void *a, const void *b)
{
    uint32_t x = ((const struct pick *)a)->id, y = ((const struct pick *)b)->id;
    return x < y ? -1 : x > y;
}

static const zone_node_t *node_of(const zone_t *z, const uint8_t *lc, uint32_t *id)
{
    *id = zone_find_index(z, lc, dname_len(lc), dname_hash(lc));
    return *id ? zone_node_at(z, *id - 1) : NULL;
}

/* Only the names of the delta that made new from old (zone_patch_delta()): nothing else differs.
 * Those holding data in new in new's node order, then those that lost it in old's: the order
 * diff_whole() takes them in, so the journal's groups, and the bytes of an IXFR out, are the
 * same as a whole-zone diff gives. */
static int diff_names(diff_ctx_t *c, const zone_t *old, const zone_t *new, const zone_delta_t *zd)
{
    size_t n, k1 = 0, k2;
    const uint8_t *const *names = zone_delta_names(zd, &n);
    struct pick *v = malloc((n ? n : 1) * sizeof(*v));
    if (!v)
        return TERN_ENOMEM;
    k2 = n;
    for (size_t i = 0; i < n; i++) {
        uint32_t oid, nid;
        const zone_node_t *o = node_of(old, names[i], &oid), *nn = node_of(new, names[i], &nid);
        if (nn && nn->nrrsets)
            v[k1++] = (struct pick){nid, o, nn};
        else if (o && o->nrrsets)
            v[--k2] = (struct pick){oid, o, NULL};
    }
    qsort(v, k1, sizeof(*v), pick_cmp);
    qsort(v + k2, n - k2, sizeof(*v), pick_cmp);
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++) {
        if (i >= k1 && i < k2)
            continue;
        c->apex = v[i].n && v[i].n == new->apex_node;
        rc = diff_node(c, v[i].o, v[i].n);
    }
    free(v);
    return rc;
}

xfr_delta_t *xfr_diff(const zone_t *old, const zone_t *new)
{
    if (old->apex_len != new->apex_len || memcmp(old->apex, new->apex, old->apex_len) != 0)
        return NULL;
    diff_ctx_t c = {0};
    xfr_delta_t *d = calloc(1, sizeof(*d));
    if (!d)
        return NULL;
    c.d = d;
    d->refs = 1;
    d->from = old->serial;
    d->to = new->serial;
    d->apex_len = new->apex_len;
    memcpy(d->apex, new->apex, new->apex_len);
    if (copy_soa(&d->side[XFR_REMOVED], old) < 0 || copy_soa(&d->side[XFR_ADDED], new) < 0)
        goto fail;
    const zone_delta_t *zd = zone_patch_delta(old, new);
    if ((zd ? diff_names(&c, old, new, zd) : diff_whole(&c, old, new)) < 0)
        goto fail;
    if ((export_of(old) || export_of(new)) && diff_exports(&c, export_of(old), export_of(new)) < 0)
        goto fail;
    side_shrink(&d->side[XFR_REMOVED]);
    side_shrink(&d->side[XFR_ADDED]);
    free(c.rr);
    return d;
fail:
    free(c.rr);
    delta_free(d);
    return NULL;
}

uint32_t xfr_delta_from(const xfr_delta_t *d)
{
    return d->from;
}

uint32_t xfr_delta_to(const xfr_delta_t *d)
{
    return d->to;
}

size_t xfr_delta_removed(const xfr_delta_t *d)
{
    return d->side[XFR_REMOVED].rrs;
}

size_t xfr_delta_added(const xfr_delta_t *d)
{
    return d->side[XFR_ADDED].rrs;
}

size_t xfr_delta_bytes(const xfr_delta_t *d)
{
    size_t n = sizeof(*d);
    for (int i = 0; i < 2; i++)
        n += d->side[i].cap + d->side[i].soa_len;
    return n;
}

bool xfr_delta_next(const xfr_delta_t *d, xfr_side_t side, size_t *pos, xfr_rrset_t *out)
{
    const struct side *s = &d->side[side];
    if (*pos >= s->len)
        return false;
    const uint8_t *p = s->buf + *pos;
    out->owner_len = p[0];
    out->owner = p + 1;
    p += 1 + p[0];
    memcpy(&out->type, p, 2);
    memcpy(&out->count, p + 2, 2);
    memcpy(&out->ttl, p + 4, 4);
    memcpy(&out->rdata_len, p + 8, 4);
    out->rdata = p + GROUP_FIXED;
    *pos = (size_t)(out->rdata - s->buf) + out->rdata_len;
    return true;
}

void xfr_delta_soa(const xfr_delta_t *d, xfr_side_t side, xfr_rrset_t *out)
{
    const struct side *s = &d->side[side];
    *out = (xfr_rrset_t){.owner = d->apex,
                         .owner_len = d->apex_len,
                         .type = WIRE_T_SOA,
                         .count = 1,
                         .ttl = s->soa_ttl,
                         .rdata_len = s->soa_len,
                         .rdata = s->soa};
}

xfr_delta_t *xfr_delta_retain(xfr_delta_t *d)
{
    __atomic_add_fetch(&d->refs, 1, __ATOMIC_RELAXED);
    return d;
}

void xfr_delta_release(xfr_delta_t *d)
{
    if (d && __atomic_sub_fetch(&d->refs, 1, __ATOMIC_ACQ_REL) == 0)
        delta_free(d);
}

/* ---- the journal ------------------------------------------------------------------------ */

struct jent {
    xfr_delta_t *d;
    struct timespec when;
};

struct xfr_journal {
    pthread_mutex_t lock;
    unsigned max_versions;
    size_t max_bytes;
    struct jent *v; /* oldest first */
    size_t count, cap;
    size_t bytes; /* xfr_delta_bytes() of v[0..count) */
};

xfr_journal_t *xfr_journal_new(unsigned max_versions, size_t max_bytes)
{
    xfr_journal_t *j = calloc(1, sizeof(*j));
    if (!j)
        return NULL;
    if (pthread_mutex_init(&j->lock, NULL) != 0) {
        free(j);
        return NULL;
    }
    j->max_versions = max_versions;
    j->max_bytes = max_bytes;
    return j;
}

/* Drop the k oldest deltas (lock held). The list is at most max_versions long and an eviction
 * is one per reload, so moving the rest down costs nothing worth a ring buffer. */
static void drop_oldest(xfr_journal_t *j, size_t k)
{
    if (k == 0)
        return; /* nothing to drop (and j->v may be NULL) */
    for (size_t i = 0; i < k; i++) {
        j->bytes -= xfr_delta_bytes(j->v[i].d);
        xfr_delta_release(j->v[i].d);
    }
    memmove(j->v, j->v + k, (j->count - k) * sizeof(*j->v));
    j->count -= k;
}

void xfr_journal_add(xfr_journal_t *j, xfr_delta_t *d)
{
    pthread_mutex_lock(&j->lock);
    if (!d || (j->count && j->v[j->count - 1].d->to != d->from))
        drop_oldest(j, j->count);
    if (!d)
        goto out;
    if (tern_grow((void **)&j->v, &j->cap, j->count + 1, sizeof(*j->v)) < 0) {
        /* cannot keep d, and what is kept would not chain to the next delta */
        drop_oldest(j, j->count);
        xfr_delta_release(d);
        goto out;
    }
    struct jent *e = &j->v[j->count++];
    e->d = d;
    clock_gettime(CLOCK_REALTIME, &e->when);
    j->bytes += xfr_delta_bytes(d);
    /* count what goes first, then drop it in one move */
    size_t k = 0, bytes = j->bytes;
    while (k < j->count && (j->count - k > j->max_versions || bytes > j->max_bytes))
        bytes -= xfr_delta_bytes(j->v[k++].d);
    drop_oldest(j, k);
out:
    pthread_mutex_unlock(&j->lock);
}

int xfr_journal_chain(xfr_journal_t *j, uint32_t from, xfr_delta_t ***out, size_t *n)
{
    int rc = TERN_ENOENT;
    *out = NULL;
    *n = 0;
    pthread_mutex_lock(&j->lock);
    if (j->count == 0)
        goto out;
    size_t first = j->count; /* up to date when `from` is the newest serial */
    if (j->v[j->count - 1].d->to != from) {
        /* newest first: should a serial recur (wrapped within the journal), the shorter chain */
        size_t i = j->count;
        while (i > 0 && j->v[i - 1].d->from != from)
            i--;
        if (i == 0)
            goto out;
        first = i - 1;
    }
    size_t k = j->count - first;
    xfr_delta_t **a = malloc((k ? k : 1) * sizeof(*a));
    if (!a) {
        rc = TERN_ENOMEM;
        goto out;
    }
    for (size_t i = 0; i < k; i++)
        a[i] = xfr_delta_retain(j->v[first + i].d);
    *out = a;
    *n = k;
    rc = 0;
out:
    pthread_mutex_unlock(&j->lock);
    return rc;
}

void xfr_journal_clear(xfr_journal_t *j)
{
    pthread_mutex_lock(&j->lock);
    drop_oldest(j, j->count);
    pthread_mutex_unlock(&j->lock);
}

size_t xfr_journal_list(xfr_journal_t *j, xfr_journal_entry_t *out, size_t max)
{
    pthread_mutex_lock(&j->lock);
    size_t n = j->count < max ? j->count : max, first = j->count - n;
    for (size_t i = 0; i < n; i++) {
        const struct jent *e = &j->v[first + i];
        out[i] = (xfr_journal_entry_t){.from = e->d->from,
                                       .to = e->d->to,
                                       .removed = e->d->side[XFR_REMOVED].rrs,
                                       .added = e->d->side[XFR_ADDED].rrs,
                                       .bytes = xfr_delta_bytes(e->d),
                                       .when = e->when};
    }
    pthread_mutex_unlock(&j->lock);
    return n;
}

void xfr_journal_free(xfr_journal_t *j)
{
    if (!j)
        return;
    drop_oldest(j, j->count);
    free(j->v);
    pthread_mutex_destroy(&j->lock);
    free(j);
}
