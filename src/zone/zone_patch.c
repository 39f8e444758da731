/*
 * zone_patch.c — a new zone version with a few names changed (zone_patch.h says what and why).
 *
 * Steps: judge every name (a full build is asked for anything that would move a cut or needs
 * signatures), count what the change adds, copy the base's arrays into one new arena with room
 * for it, re-point the copies' internal pointers, then for each name replace, add or remove its
 * node. New nodes and RRsets go after the base's, so every index kept elsewhere (targets,
 * wildcard children, geo) stays valid; a removed node stays in the array, unreachable from the
 * name index, with no RRsets.
 */
#include "tern/zone/zone_patch.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tern/common/compiler.h"
#include "tern/common/err.h"
#include "tern/wire/dname.h"
#include "tern/wire/rr.h"

struct patch {
    const zone_t *base, *fresh;
    zone_t *z; /* the new version */
    zone_node_t *nodes;
    zone_slot_t *slots;
    zone_rrset_t *sets;
    uint32_t *targets, *kids;
    zone_geo_t *geo;
    size_t nnodes, nsets, ntargets, ngeo; /* used so far */
    size_t removed_rrs, added_rrs;
    char *err;
    size_t errlen;
};

static int want_build(struct patch *p, const uint8_t *name, const char *fmt, ...) TERN_PRINTF(3, 4);

static int want_build(struct patch *p, const uint8_t *name, const char *fmt, ...)
{
    char nm[DNAME_MAXLEN * 4 + 1] = "";
    if (name)
        (void)dname_to_str(name, nm, sizeof(nm));
    char why[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof(why), fmt, ap);
    va_end(ap);
    if (p->errlen)
        snprintf(p->err, p->errlen, "%s%s%s", nm, name ? ": " : "", why);
    return 1;
}

static const zone_node_t *find(const zone_t *z, const uint8_t *lc)
{
    return zone_find_node(z, lc, dname_len(lc), dname_hash(lc));
}

static bool has_data(const zone_node_t *n)
{
    return n && n->nrrsets > 0;
}

static const uint8_t *parent_of(const uint8_t *lc)
{
    return lc + 1 + lc[0];
}

/* Every name once, judged: 0, or 1 (a full build is needed, err says why). Counts into *add the
 * nodes the patch may add (the name and its missing ancestors), into *sets, *tg and *geo what
 * the fresh RRsets bring. */
static int judge(struct patch *p, const uint8_t *const *names, size_t n, size_t *add, size_t *sets,
                 size_t *tg, size_t *geo)
{
    const zone_t *base = p->base, *fresh = p->fresh;
    for (size_t i = 0; i < n; i++) {
        const uint8_t *nm = names[i];
        size_t len = dname_len(nm);
        if (len == base->apex_len && memcmp(nm, base->apex, len) == 0)
            return want_build(p, nm, "a change at the apex");
        if (!dname_is_subdomain(nm, base->apex))
            return want_build(p, nm, "not in the zone");
        const zone_node_t *b = find(base, nm), *f = find(fresh, nm);
        if (b && (b->flags & (ZONE_NODE_DELEG | ZONE_NODE_DNAME)))
            return want_build(p, nm, "a delegation or DNAME changes");
        if (f && (f->flags & (ZONE_NODE_DELEG | ZONE_NODE_DNAME)))
            return want_build(p, nm, "a delegation or DNAME changes");
        if (!has_data(f))
            continue;
        for (unsigned k = 0; k < f->nrrsets; k++) {
            const zone_rrset_t *s = &f->rrsets[k];
            (*sets)++;
            if (zone_rrset_has_targets(s))
                *tg += s->count;
            if (zone_rrset_geo(fresh, s))
                (*geo)++;
        }
        if (b)
            continue;
        /* new: itself, and each ancestor the base lacks; none of them may own a DNAME */
        for (const uint8_t *a = nm; a[0]; a = parent_of(a)) {
            const zone_node_t *an = a == nm ? NULL : find(base, a);
            if (an) {
                if (an->flags & ZONE_NODE_DNAME)
                    return want_build(p, nm, "a new name below a DNAME");
                break;
            }
            (*add)++;
        }
    }
    return 0;
}

/* Insert node index id (hash h) into the copied index. */
static void slot_put(struct patch *p, uint32_t h, uint32_t id)
{
    uint32_t mask = p->z->node_mask;
    uint32_t i = h & mask;
    while (p->slots[i].node)
        i = (i + 1) & mask;
    p->slots[i] = (zone_slot_t){.hash = h, .node = id + 1};
}

/* Remove node index id from the copied index (linear probing: close the gap by moving later
 * entries of the run back when their home slot allows). */
static void slot_del(struct patch *p, uint32_t h, uint32_t id)
{
    uint32_t mask = p->z->node_mask;
    uint32_t i = h & mask;
    while (p->slots[i].node != id + 1) {
        if (!p->slots[i].node)
            return; /* not indexed (cannot happen for a found node) */
        i = (i + 1) & mask;
    }
    for (uint32_t j = i;;) {
        p->slots[i].node = 0;
        for (;;) {
            j = (j + 1) & mask;
            if (!p->slots[j].node)
                return;
            uint32_t home = p->slots[j].hash & mask;
            /* j's entry may move to i unless its home lies cyclically in (i, j] */
            bool stays = i <= j ? (i < home && home <= j) : (i < home || home <= j);
            if (!stays)
                break;
        }
        p->slots[i] = p->slots[j];
        i = j;
    }
}

static uint32_t node_id(const struct patch *p, const zone_node_t *n)
{
    return (uint32_t)(n - p->nodes);
}

/* The new version's node of lc, or NULL. */
static zone_node_t *find_new(struct patch *p, const uint8_t *lc)
{
    return (zone_node_t *)zone_find_node(p->z, lc, dname_len(lc), dname_hash(lc));
}

/* Copy the fresh node's RRsets after the new version's, with their targets and steering. */
static void put_rrsets(struct patch *p, zone_node_t *n, const zone_node_t *f)
{
    const zone_t *fresh = p->fresh;
    zone_rrset_t *first = &p->sets[p->nsets];
    for (unsigned k = 0; k < f->nrrsets; k++) {
        const zone_rrset_t *fs = &f->rrsets[k];
        zone_rrset_t *s = &p->sets[p->nsets++];
        *s = *fs; /* rdata stays in fresh's data, which the new version references */
        p->added_rrs += fs->count;
        if (zone_type_has_targets(fs->type)) {
            s->ext.targets = 0;
            if (zone_rrset_has_targets(fs)) {
                s->ext.targets = (uint32_t)p->ntargets + 1;
                p->ntargets += fs->count; /* resolved by resolve_targets() at the end */
            }
        } else if (zone_rrset_geo(fresh, fs)) {
            p->geo[p->ngeo] = *zone_rrset_geo(fresh, fs);
            s->ext.geo = (uint32_t)++p->ngeo;
        }
    }
    n->rrsets = f->nrrsets ? first : NULL;
    n->nrrsets = f->nrrsets;
}

/* A node for lc (a name of fresh) under its parent, which exists in the new version. */
static zone_node_t *add_node(struct patch *p, const zone_node_t *f)
{
    const uint8_t *lc = f->name;
    zone_node_t *parent = find_new(p, parent_of(lc));
    uint32_t id = (uint32_t)p->nnodes++;
    zone_node_t *n = &p->nodes[id];
    memset(n, 0, sizeof(*n));
    n->name = f->name;
    n->name_len = f->name_len;
    n->labels = f->labels;
    n->flags = (uint8_t)((f->flags & ZONE_NODE_WILD) | ZONE_NODE_ENT);
    n->cut = parent->cut ? parent->cut : (parent->flags & ZONE_NODE_DELEG) ? parent : NULL;
    p->kids[id] = 0;
    p->kids[node_id(p, parent)]++;
    if (n->flags & ZONE_NODE_WILD)
        parent->wildcard = id + 1;
    slot_put(p, dname_hash(lc), id);
    if (n->labels > p->z->max_labels)
        p->z->max_labels = n->labels;
    return n;
}

/* lc has no data any more: an empty non-terminal if names remain below it, else gone, and so
 * is every empty non-terminal above it left without children. */
static void drop(struct patch *p, zone_node_t *n)
{
    const zone_node_t *apex = p->z->apex_node;
    n->rrsets = NULL;
    n->nrrsets = 0;
    n->flags |= ZONE_NODE_ENT;
    while (n != apex && (n->flags & ZONE_NODE_ENT) && p->kids[node_id(p, n)] == 0) {
        zone_node_t *parent = find_new(p, parent_of(n->name));
        slot_del(p, dname_hash(n->name), node_id(p, n));
        p->kids[node_id(p, parent)]--;
        if ((n->flags & ZONE_NODE_WILD) && parent->wildcard == node_id(p, n) + 1)
            parent->wildcard = 0;
        n = parent;
    }
}

static uint32_t anames_of(const zone_node_t *n)
{
    return n && zone_node_rrset(n, WIRE_T_ANAME) ? 1 : 0;
}

static unsigned rrs_of(const zone_node_t *n)
{
    unsigned c = 0;
    for (unsigned k = 0; k < n->nrrsets; k++)
        c += n->rrsets[k].count;
    return c;
}

/* One changed name. */
static void apply(struct patch *p, const uint8_t *nm)
{
    const zone_node_t *f = find(p->fresh, nm);
    zone_node_t *n = find_new(p, nm);
    p->z->aname_count += anames_of(f) - anames_of(n);
    if (!has_data(f)) {
        if (n && n->nrrsets) {
            p->removed_rrs += rrs_of(n);
            drop(p, n);
        }
        return;
    }
    if (!n) {
        /* the missing ancestors first, top down: fresh has each as a node (its ENTs) */
        const uint8_t *chain[DNAME_MAXLABELS];
        unsigned depth = 0;
        for (const uint8_t *a = nm; !find_new(p, a); a = parent_of(a))
            chain[depth++] = a;
        while (depth-- > 0)
            n = add_node(p, find(p->fresh, chain[depth]));
    } else {
        p->removed_rrs += rrs_of(n);
    }
    put_rrsets(p, n, f);
    n->flags &= (uint8_t)~ZONE_NODE_ENT;
}

/* The targets of the RRsets this patch added, resolved in the new version. */
static void resolve_targets(struct patch *p, size_t first_set)
{
    for (size_t i = first_set; i < p->nsets; i++) {
        const zone_rrset_t *s = &p->sets[i];
        if (!zone_rrset_has_targets(s))
            continue;
        const uint8_t *rd = s->rdata;
        for (unsigned k = 0; k < s->count; k++) {
            size_t rdlen = (size_t)rd[0] << 8 | rd[1];
            uint8_t lc[DNAME_MAXLEN];
            (void)dname_lower(lc, rd + 2 + zone_type_target_off(s->type));
            const zone_node_t *t = find_new(p, lc);
            p->targets[s->ext.targets - 1 + k] =
                t && (t->nrrsets || !(t->flags & ZONE_NODE_ENT)) ? node_id(p, t) + 1 : 0;
            rd += 2 + rdlen;
        }
    }
}

/* The union of both zones' endpoint lists, each endpoint once with a reference of its own. */
static int merge_health(struct patch *p, arena_t *a)
{
    const zone_t *b = p->base, *f = p->fresh;
    size_t cap = (size_t)b->health_count + f->health_count;
    health_ep_t **list = arena_calloc(a, cap ? cap : 1, sizeof(*list));
    if (!list)
        return TERN_ENOMEM;
    size_t n = 0;
    for (uint32_t i = 0; i < b->health_count; i++)
        list[n++] = b->health[i];
    for (uint32_t i = 0; i < f->health_count; i++) {
        bool seen = false;
        for (uint32_t j = 0; j < b->health_count && !seen; j++)
            seen = b->health[j] == f->health[i];
        if (!seen)
            list[n++] = f->health[i];
    }
    for (size_t i = 0; i < n; i++)
        health_ep_retain(list[i]);
    p->z->health = list;
    p->z->health_count = (uint32_t)n;
    return 0;
}

int zone_patch(const zone_t *base, const zone_t *fresh, const uint8_t *const *names, size_t n,
               zone_t **out, char *err, size_t errlen)
{
    struct patch p = {.base = base, .fresh = fresh, .err = err, .errlen = errlen};
    *out = NULL;
    if (errlen)
        err[0] = '\0';
    if (base->dnssec || fresh->dnssec)
        return want_build(&p, NULL, "the zone is signed");
    if (base->patches + 1 >= ZONE_PATCH_MAX)
        return want_build(&p, NULL, "%u patches since the last build", base->patches);
    if (base->patched + n > base->node_count / 8 + ZONE_PATCH_NAMES)
        return want_build(&p, NULL, "%zu names patched since the last build", base->patched + n);
    if (base->apex_len != fresh->apex_len || memcmp(base->apex, fresh->apex, base->apex_len))
        return want_build(&p, NULL, "another origin");
    size_t add = 0, nsets = 0, ntg = 0, ngeo = 0;
    int rc = judge(&p, names, n, &add, &nsets, &ntg, &ngeo);
    if (rc != 0)
        return rc;

    /* the index grows (doubles) when the added nodes would fill it past 2/3 */
    size_t nodes = base->node_count + add;
    size_t slots = (size_t)base->node_mask + 1;
    while (nodes + nodes / 2 > slots)
        slots *= 2;
    if (slots - 1 > UINT32_MAX)
        return want_build(&p, NULL, "too many names");

    /* the targets the base's RRsets use (earlier patches appended theirs after the build's) */
    size_t base_targets = 0;
    for (uint32_t i = 0; i < base->rrset_count; i++) {
        const zone_rrset_t *s = &base->rrsets[i];
        if (zone_rrset_has_targets(s) && s->ext.targets - 1 + (size_t)s->count > base_targets)
            base_targets = s->ext.targets - 1 + (size_t)s->count;
    }
    const size_t parts[] = {sizeof(zone_t),
                            nodes * sizeof(zone_node_t),
                            slots * sizeof(zone_slot_t),
                            (base->rrset_count + nsets) * sizeof(zone_rrset_t),
                            nodes * sizeof(uint32_t),
                            (base->geo_count + ngeo) * sizeof(zone_geo_t),
                            (base_targets + ntg) * sizeof(uint32_t),
                            (base->data_count + fresh->data_count) * sizeof(zone_data_t *),
                            ((size_t)base->health_count + fresh->health_count) *
                                sizeof(health_ep_t *)};
    size_t need = 0;
    for (size_t i = 0; i < TERN_ARRAY_SIZE(parts); i++)
        need += ((parts[i] ? parts[i] : 1) + 15) & ~(size_t)15;
    arena_t *a = arena_create();
    if (!a || arena_reserve(a, need) < 0) {
        arena_destroy(a);
        return TERN_ENOMEM;
    }
    zone_t *z = arena_calloc(a, 1, sizeof(*z));
    p.nodes = arena_alloc(a, nodes * sizeof(zone_node_t));
    p.slots = arena_calloc(a, slots, sizeof(zone_slot_t));
    p.sets = arena_alloc(a, (base->rrset_count + nsets) * sizeof(zone_rrset_t));
    p.kids = arena_alloc(a, nodes * sizeof(uint32_t));
    p.geo = arena_alloc(a, (base->geo_count + ngeo) * sizeof(zone_geo_t));
    p.targets = arena_alloc(a, (base_targets + ntg) * sizeof(uint32_t));
    zone_data_t **data = arena_alloc(a, (base->data_count + fresh->data_count) * sizeof(*data));
    if (!z || !p.nodes || !p.slots || !p.sets || !p.kids || !p.geo || !p.targets || !data) {
        arena_destroy(a);
        return TERN_ENOMEM;
    }
    *z = *base;
    p.z = z;
    z->arena = a;
    z->refs = 1;

    /* the arrays, and every pointer into them re-pointed at the copies */
    memcpy(p.nodes, base->nodes, base->node_count * sizeof(zone_node_t));
    memcpy(p.sets, base->rrsets, base->rrset_count * sizeof(zone_rrset_t));
    memcpy(p.kids, base->kids, base->node_count * sizeof(uint32_t));
    if (base->geo_count)
        memcpy(p.geo, base->geo, base->geo_count * sizeof(zone_geo_t));
    if (base_targets)
        memcpy(p.targets, base->targets, base_targets * sizeof(uint32_t));
    for (size_t i = 0; i < base->node_count; i++) {
        zone_node_t *nd = &p.nodes[i];
        if (nd->cut)
            nd->cut = p.nodes + (nd->cut - base->nodes);
        if (nd->rrsets)
            nd->rrsets = p.sets + (nd->rrsets - base->rrsets);
    }
    z->nodes = p.nodes;
    z->rrsets = p.sets;
    z->kids = p.kids;
    z->geo = p.geo;
    z->targets = p.targets;
    z->apex_node = p.nodes + (base->apex_node - base->nodes);
    z->soa = p.sets + (base->soa - base->rrsets);
    z->neg_soa = p.sets + (base->neg_soa - base->rrsets);
    z->apex_ns = base->apex_ns ? p.sets + (base->apex_ns - base->rrsets) : NULL;
    z->node_slots = p.slots;
    z->node_mask = (uint32_t)(slots - 1);
    if (slots == (size_t)base->node_mask + 1) {
        memcpy(p.slots, base->node_slots, slots * sizeof(zone_slot_t));
    } else {
        for (size_t i = 0; i <= base->node_mask; i++)
            if (base->node_slots[i].node)
                slot_put(&p, base->node_slots[i].hash, base->node_slots[i].node - 1);
    }
    p.nnodes = base->node_count;
    p.nsets = base->rrset_count;
    p.ngeo = base->geo_count;
    p.ntargets = base_targets;

    for (size_t i = 0; i < n; i++)
        apply(&p, names[i]);
    resolve_targets(&p, base->rrset_count);

    /* what the new version shares, each with a reference of its own */
    for (uint32_t i = 0; i < base->data_count; i++)
        data[i] = base->data[i];
    for (uint32_t i = 0; i < fresh->data_count; i++)
        data[base->data_count + i] = fresh->data[i];
    z->data = data;
    z->data_count = base->data_count + fresh->data_count;
    if (merge_health(&p, a) < 0) {
        arena_destroy(a);
        return TERN_ENOMEM;
    }
    for (uint32_t i = 0; i < z->data_count; i++)
        __atomic_add_fetch(&z->data[i]->refs, 1, __ATOMIC_RELAXED);
    z->node_count = p.nnodes;
    z->rrset_count = (uint32_t)p.nsets;
    z->geo_count = (uint32_t)p.ngeo;
    z->rr_count = base->rr_count + p.added_rrs - p.removed_rrs;
    z->patches = base->patches + 1;
    z->patched = base->patched + n;
    *out = z;
    return 0;
}
