/*
 * dnssec_export.c — see dnssec_export.h: the NSEC chain and every RRSIG of a signed zone, for
 * the secondaries that transfer it.
 */
#include "tern/dnssec/dnssec_export.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tern/common/byteorder.h"
#include "tern/common/clock.h"
#include "tern/common/err.h"
#include "tern/common/grow.h"
#include "tern/dnssec/dnssec_zone.h"
#include "tern/wire/rr.h"

/* Label starts of a wire name (at most 127 labels below the root); returns how many. */
static unsigned label_starts(const uint8_t *n, uint8_t *at)
{
    unsigned k = 0;
    for (unsigned p = 0; n[p] && k < DNAME_MAXLEN / 2; p += n[p] + 1u)
        at[k++] = (uint8_t)p;
    return k;
}

int dnssec_export_name_cmp(const uint8_t *a, const uint8_t *b)
{
    uint8_t la[DNAME_MAXLEN / 2], lb[DNAME_MAXLEN / 2];
    unsigned na = label_starts(a, la), nb = label_starts(b, lb);
    /* from the rightmost label: each compared as an octet string, a proper prefix first; then
     * the name with fewer labels first (RFC 4034 §6.1) */
    for (unsigned i = 1; i <= na && i <= nb; i++) {
        const uint8_t *x = a + la[na - i], *y = b + lb[nb - i];
        unsigned m = x[0] < y[0] ? x[0] : y[0];
        int c = memcmp(x + 1, y + 1, m);
        if (c)
            return c;
        if (x[0] != y[0])
            return x[0] < y[0] ? -1 : 1;
    }
    return na < nb ? -1 : na > nb;
}

int dnssec_export_set_cmp(const dnssec_export_set_t *a, const dnssec_export_set_t *b)
{
    int c = a->owner == b->owner ? 0 : dnssec_export_name_cmp(a->owner, b->owner);
    if (c)
        return c;
    if (a->type != b->type)
        return a->type < b->type ? -1 : 1;
    return a->covered < b->covered ? -1 : a->covered > b->covered;
}

void dnssec_export_free(dnssec_export_t *e)
{
    if (!e)
        return;
    free(e->sets);
    free(e->blob);
    free(e);
}

/* The names of the chain: every node with data that is authoritative or a delegation point. */
static bool in_chain(const zone_node_t *n)
{
    if (!n->nrrsets)
        return false; /* an empty non-terminal has no NSEC (RFC 4035 §2.3) */
    return !n->cut || (n->flags & ZONE_NODE_CUT);
}

static int node_cmp(const void *a, const void *b)
{
    const zone_node_t *x = *(const zone_node_t *const *)a, *y = *(const zone_node_t *const *)b;
    return dnssec_export_name_cmp(x->name, y->name);
}

/* One pass making an export. The blob grows while the sets are made, so a set whose RDATA is
 * in the blob records its offset (blob_at) and is pointed at its bytes once the blob is final. */
struct mk {
    const dnssec_zone_t *dz;
    const zone_t *z;
    const dnssec_sigs_t *sg;
    const zone_t *prev;        /* the previous version, when its ZSK is this one's */
    const dnssec_export_t *pe; /* ... and its export */
    dnssec_export_t *e;
    size_t cap_sets, cap_at, cap_blob;
    size_t *blob_at; /* per set: 1 + offset of its RDATA in the blob, 0: points elsewhere */
    uint32_t now;
    dnssec_signer_t *signer;
    char *err;
    size_t errlen;
};

/* RRs in the blob (offset at: the first one's RDLENGTH; len bytes) as one set. */
typedef struct blob_rr {
    size_t at;
    uint32_t ttl;
    uint16_t count;
    uint32_t len;
} blob_rr_t;

static int add_set(struct mk *m, const zone_node_t *n, uint16_t type, uint16_t covered,
                   uint32_t ttl, uint16_t count, const uint8_t *rdata, uint32_t rdata_len,
                   size_t blob_off)
{
    dnssec_export_t *e = m->e;
    if (tern_grow((void **)&e->sets, &m->cap_sets, e->count + 1, sizeof(*e->sets)) < 0 ||
        tern_grow((void **)&m->blob_at, &m->cap_at, e->count + 1, sizeof(*m->blob_at)) < 0)
        return TERN_ENOMEM;
    e->sets[e->count] = (dnssec_export_set_t){.owner = n->name,
                                              .owner_len = n->name_len,
                                              .type = type,
                                              .covered = covered,
                                              .count = count,
                                              .ttl = ttl,
                                              .rdata_len = rdata_len,
                                              .rdata = rdata};
    m->blob_at[e->count] = blob_off;
    e->count++;
    e->records += count;
    return 0;
}

/* RRs of the blob as a set. */
static int add_blob_set(struct mk *m, const zone_node_t *n, uint16_t type, uint16_t covered,
                        blob_rr_t r)
{
    return add_set(m, n, type, covered, r.ttl, r.count, NULL, r.len, r.at + 1);
}

static int blob_room(struct mk *m, size_t n)
{
    return tern_grow((void **)&m->e->blob, &m->cap_blob, m->e->blob_len + n, 1);
}

/* Sign count RRs at rdata (owner n, type, ttl) now with each zone signer: the RRSIGs into the
 * blob, *r. */
static int sign_now(struct mk *m, const zone_node_t *n, uint16_t type, uint32_t ttl, uint16_t count,
                    const uint8_t *rdata, blob_rr_t *r)
{
    const dnssec_zone_t *dz = m->dz;
    if (blob_room(m, dz->nzsk * (2 + DNSSEC_RRSIG_MAX)) < 0)
        return TERN_ENOMEM;
    dnssec_rrsig_req_t req = dnssec_node_req(n, type, ttl, m->sg, m->z->apex);
    size_t at = m->e->blob_len;
    for (unsigned j = 0; j < dz->nzsk; j++) {
        uint8_t *o = m->e->blob + m->e->blob_len;
        int len = dnssec_sign(m->signer, dz->loader_zsk[j], &req, count, rdata, NULL, o + 2,
                              DNSSEC_RRSIG_MAX);
        if (len < 0) {
            char name[DNAME_MAXLEN * 4 + 1];
            dnssec_name_text(n->name, name, sizeof(name));
            snprintf(m->err, m->errlen, "cannot sign %s type %u for transfer with key %s: %s", name,
                     type, dnssec_keyctx_key(dz->loader_zsk[j])->label,
                     len == TERN_ENOSPC ? "RRset too large" : "the key failed");
            return len;
        }
        tern_wr16(o, (uint16_t)len);
        m->e->blob_len += 2u + (size_t)len;
        m->e->made++;
    }
    if ((int32_t)(m->sg->expiration - m->e->earliest) < 0)
        m->e->earliest = m->sg->expiration;
    *r = (blob_rr_t){at, ttl, (uint16_t)dz->nzsk, (uint32_t)(m->e->blob_len - at)};
    return 0;
}

/* The previous export's set at owner n of type/covered, or NULL (binary search: the sets are
 * in dnssec_export_set_cmp() order). */
static const dnssec_export_set_t *prev_set(const struct mk *m, const zone_node_t *n, uint16_t type,
                                           uint16_t covered)
{
    if (!m->pe)
        return NULL;
    const dnssec_export_set_t key = {.owner = n->name, .type = type, .covered = covered};
    size_t lo = 0, hi = m->pe->count;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = dnssec_export_set_cmp(&m->pe->sets[mid], &key);
        if (c == 0)
            return &m->pe->sets[mid];
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

/* The previous export's RRSIGs over `covered` at n, copied into the blob as *r when none is
 * due: 1 (0: sign anew). The caller has checked that what they cover is the same. */
static int reuse_sigs(struct mk *m, const zone_node_t *n, uint16_t covered, blob_rr_t *r)
{
    const dnssec_export_set_t *ps = prev_set(m, n, WIRE_T_RRSIG, covered);
    uint32_t earliest;
    if (!ps || !dnssec_rrsigs_fresh(ps->rdata, ps->count, m->now, m->dz->policy.refresh, &earliest))
        return 0;
    if (blob_room(m, ps->rdata_len) < 0)
        return TERN_ENOMEM;
    size_t at = m->e->blob_len;
    memcpy(m->e->blob + at, ps->rdata, ps->rdata_len);
    m->e->blob_len += ps->rdata_len;
    m->e->reused += ps->count;
    if ((int32_t)(earliest - m->e->earliest) < 0)
        m->e->earliest = earliest;
    *r = (blob_rr_t){at, ps->ttl, ps->count, ps->rdata_len};
    return 1;
}

/* The RRSIG group of RRset s at n: made ahead, or (steered) signed now over every RR. */
static int rrset_sigs(struct mk *m, const zone_node_t *n, const zone_rrset_t *s)
{
    uint16_t count = 0;
    const uint8_t *sig = dnssec_static(m->sg, m->z, s, &count);
    if (sig) {
        const uint8_t *p = sig;
        for (unsigned i = 0; i < count; i++)
            p += 2 + tern_rd16(p);
        return add_set(m, n, WIRE_T_RRSIG, s->type, s->ttl, count, sig, (uint32_t)(p - sig), 0);
    }
    blob_rr_t r;
    int rc = m->prev && dnssec_prev_rrset(m->prev, n, s) ? reuse_sigs(m, n, s->type, &r) : 0;
    if (rc == 0)
        rc = sign_now(m, n, s->type, s->ttl, s->count, s->rdata, &r);
    return rc < 0 ? rc : add_blob_set(m, n, WIRE_T_RRSIG, s->type, r);
}

/* Node n's NSEC (pointing at next) into the blob, *r. */
static int make_nsec(struct mk *m, const zone_node_t *n, const zone_node_t *next, blob_rr_t *r)
{
    uint16_t types[256];
    unsigned nt = 0;
    for (unsigned k = 0; k < n->nrrsets && nt < 256; k++) {
        uint16_t t = n->rrsets[k].type;
        /* at a delegation: the NS and DS the parent side holds, not the glue (RFC 4035 §2.3) */
        if (!n->cut || t == WIRE_T_NS || t == WIRE_T_DS)
            types[nt++] = t;
    }
    static const uint16_t extra[2] = {WIRE_T_RRSIG, WIRE_T_NSEC};
    if (blob_room(m, 2 + DNSSEC_NSEC_MAX) < 0)
        return TERN_ENOMEM;
    size_t at = m->e->blob_len;
    uint8_t *o = m->e->blob + at + 2;
    memcpy(o, next->name, next->name_len);
    int bl = dnssec_nsec_bitmap(types, nt, extra, 2, o + next->name_len,
                                DNSSEC_NSEC_MAX - next->name_len);
    if (bl < 0)
        return bl;
    uint16_t rdlen = (uint16_t)(next->name_len + bl);
    tern_wr16(m->e->blob + at, rdlen);
    m->e->blob_len += 2u + rdlen;
    m->e->names++;
    /* RFC 9077: min(SOA TTL, MINIMUM) */
    *r = (blob_rr_t){at, m->z->neg_soa->ttl, 1, 2u + (uint32_t)rdlen};
    return 0;
}

/* Everything the export has at node n, in the export's order: the RRSIG groups by covered type
 * (the NSEC's among them), then the NSEC. */
static int node_sets(struct mk *m, const zone_node_t *n, const zone_node_t *next)
{
    blob_rr_t nsec, nsig;
    int rc = make_nsec(m, n, next, &nsec);
    if (rc < 0)
        return rc;
    /* sign a copy: the blob may move while the signature is appended */
    uint8_t rr[2 + DNSSEC_NSEC_MAX];
    memcpy(rr, m->e->blob + nsec.at, nsec.len);
    const dnssec_export_set_t *pn = prev_set(m, n, WIRE_T_NSEC, 0);
    rc = pn && pn->ttl == nsec.ttl && pn->rdata_len == nsec.len &&
                 memcmp(pn->rdata, rr, nsec.len) == 0
             ? reuse_sigs(m, n, WIRE_T_NSEC, &nsig)
             : 0;
    if (rc == 0)
        rc = sign_now(m, n, WIRE_T_NSEC, nsec.ttl, 1, rr, &nsig);
    if (rc < 0)
        return rc;
    bool nsig_done = false;
    for (unsigned k = 0; k < n->nrrsets; k++) {
        const zone_rrset_t *s = &n->rrsets[k];
        if (n->cut && s->type != WIRE_T_DS)
            continue; /* at a delegation only DS is signed (RFC 4035 §2.2) */
        if (!nsig_done && s->type > WIRE_T_NSEC) {
            if ((rc = add_blob_set(m, n, WIRE_T_RRSIG, WIRE_T_NSEC, nsig)) < 0)
                return rc;
            nsig_done = true;
        }
        if ((rc = rrset_sigs(m, n, s)) < 0)
            return rc;
    }
    if (!nsig_done && (rc = add_blob_set(m, n, WIRE_T_RRSIG, WIRE_T_NSEC, nsig)) < 0)
        return rc;
    return add_blob_set(m, n, WIRE_T_NSEC, 0, nsec);
}

int dnssec_export_make(const dnssec_zone_t *dz, const zone_t *z, const zone_t *prev,
                       dnssec_export_t **out, char *err, size_t errlen)
{
    int64_t t0 = tern_monotonic_ms();
    char zn[DNAME_MAXLEN * 4 + 1], why[384] = "";
    dnssec_name_text(z->apex, zn, sizeof(zn));
    *out = NULL;
    struct mk m = {.dz = dz,
                   .z = z,
                   .sg = dnssec_zone_sigs(dz),
                   .now = (uint32_t)time(NULL),
                   .err = why,
                   .errlen = sizeof(why)};
    const zone_node_t **nodes = NULL;
    int rc = TERN_ENOMEM;
    if (!m.sg) {
        snprintf(err, errlen, "zone %s: not signed yet: nothing to export", zn);
        return TERN_EINVAL;
    }
    const dnssec_zone_t *pdz = prev && !prev->unavailable ? prev->dnssec : NULL;
    if (pdz && pdz->export && dnssec_zone_same_signers(pdz, dz)) {
        m.prev = prev;
        m.pe = pdz->export;
    }
    if (!(m.e = calloc(1, sizeof(*m.e))) || !(nodes = malloc(z->node_count * sizeof(*nodes))) ||
        !(m.signer = dnssec_signer_new(65536, true)))
        goto fail;
    m.e->earliest = m.sg->expiration;
    size_t nn = 0;
    for (uint32_t i = 0; i < z->node_count; i++) {
        const zone_node_t *n = zone_node_at(z, i);
        if (in_chain(n))
            nodes[nn++] = n;
    }
    qsort(nodes, nn, sizeof(*nodes), node_cmp);
    for (size_t i = 0; i < nn; i++)
        if ((rc = node_sets(&m, nodes[i], nodes[(i + 1) % nn])) < 0)
            goto fail;
    /* the blob is final: point the sets made in it at their bytes */
    for (size_t i = 0; i < m.e->count; i++)
        if (m.blob_at[i])
            m.e->sets[i].rdata = m.e->blob + m.blob_at[i] - 1;
    free(m.blob_at);
    free(nodes);
    dnssec_signer_free(m.signer);
    m.e->make_ms = tern_monotonic_ms() - t0;
    *out = m.e;
    return 0;
fail:
    if (rc == TERN_ENOMEM)
        snprintf(err, errlen, "zone %s: out of memory making the signed zone for transfer", zn);
    else
        snprintf(err, errlen, "zone %s: %s", zn, why);
    free(m.blob_at);
    free(nodes);
    dnssec_signer_free(m.signer);
    dnssec_export_free(m.e);
    return rc;
}
