/*
 * zone_builder_render.c — finish(), passes 4-5: steering attached, the zone sized, allocated and
 * filled.
 *
 *   4. steering policies and health endpoints (given per RR, or found by the health hook for
 *      records checked by address) onto their A/AAAA runs;
 *   5. every array measured, then allocated in the zone's own arenas (one chunk each), and
 *      filled: RDATA and steering, RRsets (type order, file order inside), nodes and the node
 *      hash table, NS/MX/SRV targets, wildcard and cut pointers, the zone's own fields. The
 *      builder's records, runs and names are released as soon as the zone has what it keeps of
 *      them, so a large zone's peak stays low.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tern/common/err.h"
#include "tern/common/hash.h"
#include "tern/common/mem.h"
#include "tern/wire/rr.h"
#include "zone_builder_int.h"

/* Whether a run's records carry a failover priority (a tier other than 0). */
static bool run_prio(const struct fctx *f, size_t ri)
{
    const zone_builder_t *b = f->b;
    const struct brun *r = &f->runs[ri];
    for (uint32_t k = 0; k < r->n; k++) {
        const struct brr *x = &b->rr[f->ord[r->start + k]];
        if (!x->dup && x->meta && b->meta[x->meta - 1].priority)
            return true;
    }
    return false;
}

/* Steering policies onto their runs, in the order set (the last one for an RRset wins). */
static int attach_policies(struct fctx *f)
{
    zone_builder_t *b = f->b;
    f->run_pol = calloc(f->run_count ? f->run_count : 1, sizeof(*f->run_pol));
    if (!f->run_pol)
        return zone_builder_nomem(f);
    for (size_t i = 0; i < b->pol_count; i++) {
        const struct bpol *p = &b->pol[i];
        const uint8_t *pn = b->polnames + p->owner;
        uint32_t id = zone_builder_name_find(b, pn, p->len, dname_hash(pn));
        for (uint32_t ri = id == NO_ID ? NO_ID : b->nm[id].first; ri != NO_ID; ri = f->run_next[ri])
            if (f->runs[ri].type == p->type)
                f->run_pol[ri] = p->p;
    }
    /* A run whose records carry priorities is tiered: its min_healthy made explicit (1, the
     * default), so that from here on (the records are released before fill_rrsets()) the
     * policy alone says whether the run is steered and tiered. */
    for (size_t ri = 0; ri < f->run_count; ri++) {
        zone_geo_policy_t *p = &f->run_pol[ri];
        if (!p->min_healthy && !p->nmin && run_prio(f, ri))
            p->min_healthy = 1;
    }
    return 0;
}

/* Each kept A/AAAA record's health endpoint: the one given with its geo metadata, else the
 * hook's (checks by address). Runs with a checked record are steered even without a policy. */
static int attach_health(struct fctx *f)
{
    zone_builder_t *b = f->b;
    if (b->eps_count == 0 && !b->health_fn)
        return 0;
    f->rr_health = calloc(b->rr_count ? b->rr_count : 1, sizeof(*f->rr_health));
    f->run_health = calloc(f->run_count ? f->run_count : 1, sizeof(*f->run_health));
    if (!f->rr_health || !f->run_health)
        return zone_builder_nomem(f);
    for (size_t ri = 0; ri < f->run_count; ri++) {
        const struct brun *r = &f->runs[ri];
        if (r->type != WIRE_T_A && r->type != WIRE_T_AAAA)
            continue;
        for (uint32_t k = 0; k < r->n; k++) {
            uint32_t idx = f->ord[r->start + k];
            const struct brr *x = &b->rr[idx];
            if (x->dup)
                continue;
            health_ep_t *ep = x->meta ? b->meta[x->meta - 1].health : NULL;
            if (!ep && b->health_fn) {
                ep = b->health_fn(b->health_ctx, b->names + b->nm[x->name].off, x->type,
                                  b->rdata + x->rdoff);
                if (ep && zone_builder_keep_ep(b, ep) < 0) {
                    health_ep_release(ep);
                    return zone_builder_nomem(f);
                }
            }
            if (ep) {
                f->rr_health[idx] = ep;
                f->run_health[ri] = true;
                f->nhealth++;
            }
        }
    }
    return 0;
}

static bool steered(const zone_geo_policy_t *p)
{
    return p->filter || p->count || p->order || p->shed || p->min_healthy || p->nmin;
}

/* A run that gets a zone_geo_t: a steering policy (tiers included), or a health-checked
 * record. */
static bool run_steered(const struct fctx *f, size_t ri)
{
    return steered(&f->run_pol[ri]) || (f->run_health && f->run_health[ri]);
}

/* The size of every array of the zone. */
static int measure(struct fctx *f)
{
    zone_builder_t *b = f->b;
    f->nnodes = b->nm_count;
    for (size_t i = 0; i < f->run_count; i++) {
        const struct brun *r = &f->runs[i];
        f->nrr += r->kept;
        f->rdbytes += r->bytes;
        if (zone_type_has_targets(r->type))
            f->ntargets += r->kept;
        if (!run_steered(f, i))
            continue;
        f->ngeo++;
        f->ngeo_rr += r->kept;
        for (uint32_t k = 0; k < r->n; k++) {
            const struct brr *x = &b->rr[f->ord[r->start + k]];
            if (!x->dup && x->meta) {
                f->ngeo_cc += b->meta[x->meta - 1].ncc;
                f->ngeo_asn += b->meta[x->meta - 1].nasn;
                if (b->meta[x->meta - 1].group)
                    f->ngeo_grp += strlen(b->grpnames + b->meta[x->meta - 1].grp_off) + 1;
            }
        }
    }
    f->slots = 2;
    while (f->slots < f->nnodes + f->nnodes / 2) /* load factor <= 2/3 */
        f->slots *= 2;
    if (f->slots - 1 > UINT32_MAX)
        return zone_builder_fail(f, TERN_ELIMIT, "zone %s: too many names", f->zname);
    return 0;
}

static size_t parts_size(const size_t *parts, size_t n)
{
    size_t need = 0;
    for (size_t i = 0; i < n; i++)
        need += ((parts[i] ? parts[i] : 1) + 15) & ~(size_t)15; /* arena_alloc(0) takes 16 */
    return need;
}

/* The zone's arrays in one arena, the bytes they point into in another, each one chunk of the
 * exact size. */
static int allocate(struct fctx *f)
{
    zone_builder_t *b = f->b;
    f->npages = (f->nnodes + ZONE_NODE_PAGE - 1) / ZONE_NODE_PAGE;
    const size_t arrays[] = {sizeof(zone_t),
                             f->npages * sizeof(zone_node_t *),
                             f->slots * sizeof(zone_slot_t),
                             f->ntargets * sizeof(uint32_t),
                             f->ngeo * sizeof(zone_geo_t),
                             f->nhealth * sizeof(health_ep_t *),
                             f->nnodes * sizeof(uint32_t),
                             sizeof(zone_data_t *)};
    const size_t data[] = {sizeof(zone_data_t),
                           (f->run_count + 1) * sizeof(zone_rrset_t), /* +1: neg_soa */
                           b->names_len,
                           f->rdbytes,
                           strlen(b->source) + 1,
                           b->domain_id_len + 1,
                           f->ngeo_rr * sizeof(zone_geo_rr_t),
                           f->ngeo_cc * sizeof(uint16_t),
                           f->ngeo_asn * sizeof(uint32_t),
                           f->ngeo_grp};
    f->arena = arena_create();
    f->darena = arena_create();
    if (!f->arena || !f->darena ||
        arena_reserve(f->arena, parts_size(arrays, TERN_ARRAY_SIZE(arrays))) < 0 ||
        arena_reserve(f->darena, parts_size(data, TERN_ARRAY_SIZE(data))) < 0)
        return zone_builder_nomem(f);
    arena_t *a = f->arena, *d = f->darena;
    f->z = arena_calloc(a, 1, sizeof(*f->z));
    f->pages = arena_calloc(a, f->npages ? f->npages : 1, sizeof(*f->pages));
    f->slot = arena_calloc(a, f->slots, sizeof(*f->slot));
    f->sets = arena_calloc(d, f->run_count + 1, sizeof(*f->sets));
    f->targets = arena_calloc(a, f->ntargets, sizeof(*f->targets));
    f->geo = arena_calloc(a, f->ngeo, sizeof(*f->geo));
    f->health = arena_calloc(a, f->nhealth, sizeof(*f->health));
    f->kids = arena_calloc(a, f->nnodes, sizeof(*f->kids));
    zone_data_t **dl = arena_calloc(a, 1, sizeof(*dl));
    zone_data_t *zd = arena_calloc(d, 1, sizeof(*zd));
    f->names = arena_alloc(d, b->names_len); /* filled by release_runs() */
    f->rd = arena_alloc(d, f->rdbytes);
    char *source = arena_memdup(d, b->source, strlen(b->source) + 1);
    char *domain_id = arena_alloc(d, b->domain_id_len + 1);
    if (domain_id && b->domain_id_len)
        memcpy(domain_id, b->domain_id, b->domain_id_len);
    f->geo_rr = arena_calloc(d, f->ngeo_rr, sizeof(*f->geo_rr));
    f->geo_cc = arena_calloc(d, f->ngeo_cc, sizeof(*f->geo_cc));
    f->geo_asn = arena_calloc(d, f->ngeo_asn, sizeof(*f->geo_asn));
    f->geo_grp = arena_calloc(d, f->ngeo_grp ? f->ngeo_grp : 1, 1);
    f->tnames = malloc((f->ntargets ? f->ntargets : 1) * sizeof(*f->tnames));
    for (size_t i = 0; f->pages && i < f->npages; i++) {
        size_t left = f->nnodes - i * ZONE_NODE_PAGE;
        if (!(f->pages[i] =
                  zone_node_page_new(left < ZONE_NODE_PAGE ? (uint32_t)left : ZONE_NODE_PAGE)))
            return zone_builder_nomem(f);
    }
    if (!f->z || !f->pages || !f->slot || !f->names || !f->sets || !f->rd || !f->targets ||
        !source || !domain_id || !f->tnames || !f->geo || !f->geo_rr || !f->geo_cc || !f->geo_asn ||
        !f->geo_grp || !f->health || !f->kids || !dl || !zd)
        return zone_builder_nomem(f);
    zone_t *z = f->z;
    z->arena = a;
    zd->refs = 1;
    zd->arena = d;
    f->darena = NULL; /* the zone owns it now */
    dl[0] = zd;
    z->data = dl;
    z->data_count = 1;
    z->kids = f->kids;
    z->refs = 1;
    z->source = source;
    z->domain_id = domain_id;
    z->domain_id_len = (uint16_t)b->domain_id_len;
    z->node_slots = f->slot;
    z->node_pages = f->pages;
    z->node_page_count = (uint32_t)f->npages;
    f->pages_given = true; /* the zone owns them now (zone_free()) */
    z->rrsets = f->sets;
    z->rrset_count = (uint32_t)f->run_count + 1; /* + neg_soa */
    z->targets = f->targets;
    z->target_count = (uint32_t)f->ntargets;
    z->node_mask = (uint32_t)(f->slots - 1);
    z->geo = f->geo;
    z->geo_count = (uint32_t)f->ngeo;
    return 0;
}

/* Nodes and the name index. */
/* Node id of the zone being filled (zone_node_at(), writable). */
#define NODE(f, id) (&(f)->pages[(id) >> ZONE_NODE_SHIFT][(id) & (ZONE_NODE_PAGE - 1)])

static void fill_nodes(struct fctx *f)
{
    zone_builder_t *b = f->b;
    unsigned max_labels = 0;
    for (uint32_t id = 0; id < f->nnodes; id++) {
        const struct bname *bn = &b->nm[id];
        zone_node_t *n = NODE(f, id);
        *n = (zone_node_t){0}; /* the page's first touch (zone_node_page_new()) */
        n->name = f->names + bn->off;
        n->name_len = bn->len;
        n->labels = bn->labels;
        if (id == 0)
            n->flags |= ZONE_NODE_APEX;
        if (n->name[0] == 1 && n->name[1] == '*')
            n->flags |= ZONE_NODE_WILD;
        if (bn->nsets == 0)
            n->flags |= ZONE_NODE_ENT;
        n->flags |= bn->nflags;
        n->rrsets = bn->nsets ? f->sets + bn->first : NULL;
        n->nrrsets = bn->nsets;
        if (bn->labels > max_labels)
            max_labels = bn->labels;
        uint32_t i = bn->hash & f->z->node_mask;
        while (f->slot[i].node)
            i = (i + 1) & f->z->node_mask;
        f->slot[i] = (zone_slot_t){.hash = bn->hash, .node = id + 1};
    }
    f->z->max_labels = (uint8_t)max_labels;
}

/* Copy one kept RR's geo metadata to the zone. */
static void fill_geo_rr(struct fctx *f, const struct brr *x, zone_geo_rr_t *gr, size_t *ccpos,
                        size_t *asnpos, size_t *grppos)
{
    const zone_builder_t *b = f->b;
    if (!x->meta)
        return;
    const struct bmeta *m = &b->meta[x->meta - 1];
    gr->weight = m->weight;
    gr->priority = m->priority;
    gr->has_loc = m->has_loc;
    memcpy(gr->loc, m->loc, sizeof(gr->loc));
    gr->ncountries = m->ncc;
    gr->nasns = m->nasn;
    gr->countries = f->geo_cc + *ccpos;
    gr->asns = f->geo_asn + *asnpos;
    if (m->ncc)
        memcpy(f->geo_cc + *ccpos, b->ccs + m->cc_off, m->ncc * sizeof(*f->geo_cc));
    if (m->nasn)
        memcpy(f->geo_asn + *asnpos, b->asns + m->asn_off, m->nasn * sizeof(*f->geo_asn));
    *ccpos += m->ncc;
    *asnpos += m->nasn;
    if (m->group) {
        size_t len = strlen(b->grpnames + m->grp_off) + 1;
        gr->group = m->group;
        gr->group_name = memcpy(f->geo_grp + *grppos, b->grpnames + m->grp_off, len);
        *grppos += len;
    }
}

/* The zone's RDATA, RRset after RRset (runs are in type order per owner, RRs in file order per
 * run), with the target names and the steering of each RR: everything that needs the builder's
 * records, so that they can go before the rest of the zone is written. */
static void fill_rdata(struct fctx *f)
{
    zone_builder_t *b = f->b;
    size_t rdpos = 0, tpos = 0, gpos = 0, grpos = 0, gcpos = 0, gapos = 0, hpos = 0, ggpos = 0;
    for (uint32_t id = 0; id < f->nnodes; id++) {
        for (uint32_t ri = b->nm[id].first; ri != NO_ID; ri = f->run_next[ri]) {
            const struct brun *r = &f->runs[ri];
            size_t start = rdpos;
            bool tg = zone_type_has_targets(r->type);
            zone_geo_t *g = NULL;
            if (!tg && run_steered(f, ri)) {
                g = &f->geo[gpos++];
                g->policy = f->run_pol[ri];
                g->health = f->run_health && f->run_health[ri];
                g->count = (uint16_t)r->kept;
                g->rr = f->geo_rr + grpos;
                g->tiers = g->policy.min_healthy || g->policy.nmin;
            }
            for (uint32_t i = 0; i < r->n; i++) {
                const struct brr *x = &b->rr[f->ord[r->start + i]];
                if (x->dup)
                    continue;
                if (g) {
                    zone_geo_rr_t *gr = &f->geo_rr[grpos++];
                    gr->off = (uint32_t)(rdpos - start);
                    fill_geo_rr(f, x, gr, &gcpos, &gapos, &ggpos);
                    /* the sticky order's record identity: its address, whatever its index */
                    gr->ident = (uint32_t)tern_hash64(b->rdata + x->rdoff, x->rdlen, 0x5717);
                    health_ep_t *ep = f->rr_health ? f->rr_health[f->ord[r->start + i]] : NULL;
                    gr->health = ep;
                    if (ep)
                        f->health[hpos++] = ep;
                }
                f->rd[rdpos] = (uint8_t)(x->rdlen >> 8);
                f->rd[rdpos + 1] = (uint8_t)x->rdlen;
                if (x->rdlen)
                    memcpy(f->rd + rdpos + 2, b->rdata + x->rdoff, x->rdlen);
                if (tg)
                    f->tnames[tpos++] = f->rd + rdpos + 2 + zone_type_target_off(r->type);
                rdpos += 2u + x->rdlen;
            }
        }
    }
}

/* The RRsets, in the order fill_rdata() wrote their RDATA; each name's are consecutive in
 * sets[], so the node keeps a count, not links (fill_nodes() reads them from the name). */
static void fill_rrsets(struct fctx *f)
{
    zone_builder_t *b = f->b;
    zone_t *z = f->z;
    size_t rdpos = 0, tpos = 0, spos = 0, gpos = 0;
    for (uint32_t id = 0; id < f->nnodes; id++) {
        struct bname *bn = &b->nm[id];
        unsigned nsets = 0, flags = 0;
        uint32_t first = (uint32_t)spos;
        for (uint32_t ri = bn->first; ri != NO_ID; ri = f->run_next[ri]) {
            const struct brun *r = &f->runs[ri];
            zone_rrset_t *s = &f->sets[spos++];
            s->type = r->type;
            s->count = (uint16_t)r->kept;
            s->ttl = r->ttl;
            s->rdata_len = r->bytes;
            s->rdata = f->rd + rdpos;
            rdpos += r->bytes;
            if (zone_type_has_targets(r->type)) {
                s->ext.targets = (uint32_t)tpos + 1;
                tpos += r->kept;
            } else if (run_steered(f, ri)) {
                s->ext.geo = (uint32_t)++gpos; /* 1 + index, as fill_rdata() numbered them */
            }
            nsets++;
            if (r->type == WIRE_T_NS && id != 0)
                flags |= ZONE_NODE_DELEG;
            if (r->type == WIRE_T_DNAME)
                flags |= ZONE_NODE_DNAME;
            if (id == 0 && r->type == WIRE_T_SOA)
                z->soa = s;
            if (id == 0 && r->type == WIRE_T_NS)
                z->apex_ns = s;
            if (r->type == WIRE_T_ANAME)
                z->aname_count++;
        }
        bn->first = first;
        bn->nsets = (uint8_t)nsets;
        bn->nflags = (uint8_t)flags;
    }
}

/* NS/MX/SRV targets to nodes, now that every node is in the index. */
static void resolve_targets(struct fctx *f)
{
    for (size_t i = 0; i < f->ntargets; i++) {
        uint8_t lc[DNAME_MAXLEN];
        size_t len = dname_lower(lc, f->tnames[i]);
        f->targets[i] = zone_find_index(f->z, lc, len, dname_hash(lc));
    }
}

/* Wildcard pointers, and cuts parents before children. The cut recorded is the topmost
 * delegation on the path from the apex: a delegation below another one is occluded (RFC 1034
 * §4.3.2 stops at the first cut going down), so for nested NS sets every node under the outer
 * cut points at the outer one. */
static void link_nodes(struct fctx *f)
{
    const zone_builder_t *b = f->b;
    /* every "*.<name>" has its parent as a node (ENTs were added) */
    for (uint32_t id = 0; id < f->nnodes; id++) {
        if (b->nm[id].parent != NO_ID)
            f->kids[b->nm[id].parent]++;
        if ((NODE(f, id)->flags & ZONE_NODE_WILD) && b->nm[id].parent != NO_ID)
            NODE(f, b->nm[id].parent)->wildcard = id + 1;
    }
    for (size_t k = 0; k < f->nnodes; k++) {
        uint32_t id = f->bylabel[k];
        zone_node_t *n = NODE(f, id);
        if (id == 0)
            continue;
        uint32_t pc = NODE(f, b->nm[id].parent)->cut;
        n->cut = pc ? pc : (n->flags & ZONE_NODE_DELEG) ? id + 1 : 0;
        if (!pc && (n->flags & ZONE_NODE_DELEG))
            n->flags |= ZONE_NODE_CUT;
    }
}

static uint32_t rd_u32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* The zone's own fields: apex, counts, serial and the negative-answer SOA. */
static void fill_zone(struct fctx *f)
{
    zone_t *z = f->z;
    const zone_node_t *apex = NODE(f, 0);
    z->apex_node = apex;
    z->apex = apex->name;
    z->hash = f->b->nm[0].hash;
    z->apex_len = apex->name_len;
    z->apex_labels = apex->labels;
    z->node_count = f->nnodes;
    z->rr_count = f->nrr;
    /* SOA RDATA: MNAME RNAME SERIAL REFRESH RETRY EXPIRE MINIMUM (shape checked in add) */
    const uint8_t *s = z->soa->rdata + 2;
    size_t l = z->soa->rdata_len - 2;
    z->serial = z->src_serial = rd_u32(s + l - 20);
    uint32_t minimum = rd_u32(s + l - 4);
    zone_rrset_t *neg = &f->sets[f->run_count];
    *neg = *z->soa;
    neg->ttl = minimum < z->soa->ttl ? minimum : z->soa->ttl; /* RFC 2308 §3 */
    z->neg_soa = neg;
}

static int cmp_ptr(const void *a, const void *b)
{
    uintptr_t x = (uintptr_t) * (health_ep_t *const *)a, y = (uintptr_t) * (health_ep_t *const *)b;
    return x < y ? -1 : x > y;
}

/* The zone's endpoints, each once, each with a reference of the zone's own. */
static void fill_health(struct fctx *f)
{
    size_t n = 0;
    qsort(f->health, f->nhealth, sizeof(*f->health), cmp_ptr);
    for (size_t i = 0; i < f->nhealth; i++)
        if (i == 0 || f->health[i] != f->health[i - 1])
            f->health[n++] = f->health[i];
    for (size_t i = 0; i < n; i++)
        health_ep_retain(f->health[i]);
    f->z->health = f->health;
    f->z->health_count = (uint32_t)n;
}

/* Every name is interned, every policy attached: the builder's name index is not needed any
 * more, and freeing it before the zone is allocated lowers the peak (16 MiB for a million names).
 * Always 0. */
static int drop_index(zone_builder_t *b)
{
    free(b->nm_slots);
    b->nm_slots = NULL;
    b->nm_mask = 0;
    return 0;
}

/* The builder's records and RDATA, once fill_rdata() has copied what the zone keeps of them:
 * handed back to the kernel now (not at the allocator's leisure), so that the rest of the zone
 * is written into the room they leave. With the zone's pages touched only as they are filled
 * (arena_calloc()), loading the 1,000,000-name zone peaks at 198 MiB instead of 292
 * (the zone itself is 128 MiB). */
static void release_records(struct fctx *f)
{
    zone_builder_t *b = f->b;
    free(b->rr);
    b->rr = NULL;
    b->rr_count = b->rr_cap = 0;
    free(b->rdata);
    b->rdata = NULL;
    b->rdata_len = b->rdata_cap = 0;
    free(f->ord);
    f->ord = NULL;
    free(f->rr_health);
    f->rr_health = NULL;
    mem_arena_purge(mem_thread_arena());
}

/* The runs, once fill_rrsets() has made them RRsets; then the owner names go into the zone and
 * the builder's copy goes. */
static void release_runs(struct fctx *f)
{
    zone_builder_t *b = f->b;
    free(f->runs);
    f->runs = NULL;
    free(f->run_next);
    f->run_next = NULL;
    free(f->run_pol);
    f->run_pol = NULL;
    free(f->run_health);
    f->run_health = NULL;
    memcpy(f->names, b->names, b->names_len);
    free(b->names);
    b->names = NULL;
    b->names_len = b->names_cap = 0;
    mem_arena_purge(mem_thread_arena());
}

int zone_builder_render(struct fctx *f)
{
    int rc;
    if ((rc = attach_policies(f)) < 0 || (rc = attach_health(f)) < 0 || (rc = measure(f)) < 0 ||
        (rc = drop_index(f->b)) < 0 || (rc = allocate(f)) < 0)
        return rc;
    fill_rdata(f);
    release_records(f);
    fill_rrsets(f);
    release_runs(f);
    fill_nodes(f);
    resolve_targets(f);
    link_nodes(f);
    fill_zone(f);
    fill_health(f);
    f->z->built_bytes = zone_footprint(f->z);
    return 0;
}
