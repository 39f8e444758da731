/*
 * zone_patch.c — a new zone version with a few names changed (zone_patch.h says what and why).
 *
 * Steps: judge every name (a full build is asked for anything that would move a cut or needs
 * signatures), count what the change adds, copy the base's small arrays into one new arena with
 * room for it, take a reference to each of the base's node pages, then for each name replace,
 * add or remove its node, copying a node page the first time the patch writes into it. New
 * nodes go after the base's, so every index kept elsewhere (targets, wildcard children, cuts,
 * geo) stays valid while names are applied; at the end the last nodes move into the places of
 * removed ones (compact()) and the indexes into them follow, so the node array holds exactly
 * the zone's names, as a build's does. Nothing points at a node (zone.h), so a copied page
 * leaves no pointer behind.
 */
#include "tern/zone/zone_patch.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <stddef.h>
#include <string.h>

#include "tern/common/compiler.h"
#include "tern/common/err.h"
#include "tern/common/grow.h"
#include "tern/wire/dname.h"
#include "tern/wire/rr.h"
#include "tern/zone/zone_delta.h"

struct patch {
    const zone_t *base, *fresh;
    zone_t *z;           /* the new version */
    zone_node_t **pages; /* its page directory (z->node_pages, writable) */
    uint8_t *owned;      /* per page: 1 when the new version has its own copy (written) */
    size_t max_nodes;    /* node_count + what judge() counted: the pages' sizes */
    bool overflow;       /* a node past max_nodes was asked for (never: a full build then) */
    zone_slot_t *slots;
    zone_rrset_t *sets; /* the patch's RRsets (its data blob) */
    uint32_t *targets, *kids;
    zone_geo_t *geo;
    size_t nnodes, nsets, ntargets, ngeo; /* used so far */
    size_t removed_rrs, added_rrs;
    bool added;      /* a node was added */
    uint32_t *holes; /* nodes taken out of the index, compact() fills them (malloc'd) */
    size_t nholes, holes_cap;
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

/* Node id of the new version, writable: its page is copied on the first write (the base and
 * the other versions sharing the page keep theirs). NULL when out of memory. */
static zone_node_t *node_mut(struct patch *p, uint32_t id)
{
    uint32_t k = id >> ZONE_NODE_SHIFT;
    if (id >= p->max_nodes) {
        p->overflow = true;
        return NULL;
    }
    if (!p->owned[k]) {
        size_t need = p->max_nodes - (size_t)k * ZONE_NODE_PAGE;
        uint32_t cap = need < ZONE_NODE_PAGE ? (uint32_t)need : ZONE_NODE_PAGE;
        zone_node_t *old = p->pages[k];
        if (old && zone_node_page_of(old)->cap > cap)
            cap = zone_node_page_of(old)->cap;
        zone_node_t *pg = zone_node_page_new(cap);
        if (!pg)
            return NULL;
        if (old) {
            memcpy(pg, old, zone_node_page_of(old)->cap * sizeof(zone_node_t));
            zone_node_page_release(old);
        }
        p->pages[k] = pg;
        p->owned[k] = 1;
    }
    return &p->pages[k][id & (ZONE_NODE_PAGE - 1)];
}

/* 1 + the new version's node id of lc, or 0. */
static uint32_t find_id(const struct patch *p, const uint8_t *lc)
{
    return zone_find_index(p->z, lc, dname_len(lc), dname_hash(lc));
}

/* Copy the fresh node's RRsets into the patch's blob, with their targets and steering. */
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

/* A node for lc (a name of fresh) under its parent, which exists in the new version: 1 + its id,
 * or 0 when out of memory. */
static uint32_t add_node(struct patch *p, const zone_node_t *f)
{
    const uint8_t *lc = f->name;
    uint32_t pid = find_id(p, parent_of(lc));
    uint32_t id = (uint32_t)p->nnodes++;
    p->added = true;
    zone_node_t *n = node_mut(p, id);
    const zone_node_t *parent = zone_node_at(p->z, pid - 1);
    if (!n)
        return 0;
    memset(n, 0, sizeof(*n));
    n->name = f->name;
    n->name_len = f->name_len;
    n->labels = f->labels;
    n->flags = (uint8_t)((f->flags & ZONE_NODE_WILD) | ZONE_NODE_ENT);
    n->cut = parent->cut ? parent->cut : (parent->flags & ZONE_NODE_DELEG) ? pid : 0;
    p->kids[id] = 0;
    p->kids[pid - 1]++;
    if (n->flags & ZONE_NODE_WILD) {
        zone_node_t *pw = node_mut(p, pid - 1); /* the parent's page only when it changes */
        if (!pw)
            return 0;
        pw->wildcard = id + 1;
    }
    slot_put(p, dname_hash(lc), id);
    if (n->labels > p->z->max_labels)
        p->z->max_labels = n->labels;
    return id + 1;
}

/* Node id (a name with no data any more): an empty non-terminal if names remain below it, else
 * gone, and so is every empty non-terminal above it left without children. */
static int drop(struct patch *p, uint32_t id)
{
    zone_node_t *w = node_mut(p, id);
    if (!w)
        return TERN_ENOMEM;
    w->rrsets = NULL;
    w->nrrsets = 0;
    w->flags |= ZONE_NODE_ENT;
    /* a removed node leaves the index and becomes a hole (compact() fills it): only a parent
     * whose wildcard child goes is written (and its page copied) */
    const zone_node_t *n = w;
    while (id != 0 && (n->flags & ZONE_NODE_ENT) && p->kids[id] == 0) {
        uint32_t pid = find_id(p, parent_of(n->name)) - 1;
        const zone_node_t *parent = zone_node_at(p->z, pid);
        slot_del(p, dname_hash(n->name), id);
        if (tern_grow((void **)&p->holes, &p->holes_cap, p->nholes + 1, sizeof(*p->holes)) < 0)
            return TERN_ENOMEM;
        p->holes[p->nholes++] = id;
        p->kids[pid]--;
        if ((n->flags & ZONE_NODE_WILD) && parent->wildcard == id + 1) {
            zone_node_t *pw = node_mut(p, pid);
            if (!pw)
                return TERN_ENOMEM;
            pw->wildcard = 0;
            parent = pw;
        }
        n = parent;
        id = pid;
    }
    return 0;
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

/* One changed name: 0 or TERN_ENOMEM. */
static int apply(struct patch *p, const uint8_t *nm)
{
    const zone_node_t *f = find(p->fresh, nm);
    uint32_t id = find_id(p, nm);
    const zone_node_t *n = id ? zone_node_at(p->z, id - 1) : NULL;
    p->z->aname_count += anames_of(f) - anames_of(n);
    if (!has_data(f)) {
        if (n && n->nrrsets) {
            p->removed_rrs += rrs_of(n);
            return drop(p, id - 1);
        }
        return 0;
    }
    if (!n) {
        /* the missing ancestors first, top down: fresh has each as a node (its ENTs) */
        const uint8_t *chain[DNAME_MAXLABELS];
        unsigned depth = 0;
        for (const uint8_t *a = nm; !find_id(p, a); a = parent_of(a))
            chain[depth++] = a;
        while (depth-- > 0)
            if (!(id = add_node(p, find(p->fresh, chain[depth]))))
                return TERN_ENOMEM;
    } else {
        p->removed_rrs += rrs_of(n);
    }
    zone_node_t *w = node_mut(p, id - 1);
    if (!w)
        return TERN_ENOMEM;
    put_rrsets(p, w, f);
    w->flags &= (uint8_t)~ZONE_NODE_ENT;
    return 0;
}

static int u32_cmp(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

static bool is_hole(const struct patch *p, uint32_t id)
{
    return bsearch(&id, p->holes, p->nholes, sizeof(*p->holes), u32_cmp) != NULL;
}

/* Node `from` (the last) moves to `to` (a hole): its index slot, child count and its parent's
 * wildcard follow. 0 or TERN_ENOMEM. */
static int move_node(struct patch *p, uint32_t from, uint32_t to)
{
    zone_node_t n = *zone_node_at(p->z, from); /* a copy: node_mut() may copy its page */
    zone_node_t *w = node_mut(p, to);
    if (!w)
        return TERN_ENOMEM;
    *w = n;
    uint32_t mask = p->z->node_mask, h = dname_hash(n.name);
    /* every node not a hole is indexed: found before the run's empty slot */
    for (uint32_t i = h & mask; p->slots[i].node; i = (i + 1) & mask) {
        if (p->slots[i].node == from + 1) {
            p->slots[i].node = to + 1;
            break;
        }
    }
    p->kids[to] = p->kids[from];
    if (n.flags & ZONE_NODE_WILD) {
        uint32_t pid = find_id(p, parent_of(n.name)) - 1;
        if (zone_node_at(p->z, pid)->wildcard == from + 1) {
            zone_node_t *pw = node_mut(p, pid);
            if (!pw)
                return TERN_ENOMEM;
            pw->wildcard = to + 1;
        }
    }
    return 0;
}

/* A reference to node id + 1 (a target, a cut) after compact() moved nodes [end, old) down:
 * map[k] is where node end + k went, 0 when it was a hole. */
static uint32_t remapped(const struct patch *p, uint32_t ref, uint32_t end, const uint32_t *map)
{
    if (!ref)
        return 0;
    if (ref - 1 >= end)
        return map[ref - 1 - end];
    return is_hole(p, ref - 1) ? 0 : ref;
}

/* Every node cut points at a moved delegation follows it: one walk, only when one moved. */
static int remap_cuts(struct patch *p, uint32_t end, const uint32_t *map)
{
    for (uint32_t i = 0; i < p->nnodes; i++) {
        const zone_node_t *n = zone_node_at(p->z, i);
        if (n->cut && n->cut - 1 >= end) {
            zone_node_t *w = node_mut(p, i);
            if (!w)
                return TERN_ENOMEM;
            w->cut = map[n->cut - 1 - end];
        }
    }
    return 0;
}

/* The nodes taken out of the index leave no hole behind: the last nodes move into them, so a
 * patched version holds exactly the nodes a build of its data holds (whatever walks the node
 * array, the journal's diff, the zone writer, sees no removed name) and its node array stays
 * as long as its names. The targets into moved nodes follow them, those into removed ones are
 * cleared (resolve_targets() looks them up again when names were added). 0 or TERN_ENOMEM. */
static int compact(struct patch *p, size_t base_targets)
{
    if (!p->nholes)
        return 0;
    qsort(p->holes, p->nholes, sizeof(*p->holes), u32_cmp);
    uint32_t old = (uint32_t)p->nnodes, end = old - (uint32_t)p->nholes;
    uint32_t *map = calloc(p->nholes, sizeof(*map));
    if (!map)
        return TERN_ENOMEM;
    bool cuts = false;
    size_t lo = 0, hi = p->nholes;
    for (uint32_t last = old; last-- > end;) {
        if (hi > lo && p->holes[hi - 1] == last) {
            hi--; /* a hole at the end: nothing moves */
            continue;
        }
        uint32_t to = p->holes[lo++];
        cuts |= (zone_node_at(p->z, last)->flags & ZONE_NODE_DELEG) != 0;
        if (move_node(p, last, to) < 0) {
            free(map);
            return TERN_ENOMEM;
        }
        map[last - end] = to + 1;
    }
    p->nnodes = end;
    for (size_t i = 0; i < base_targets; i++)
        p->targets[i] = remapped(p, p->targets[i], end, map);
    int rc = cuts ? remap_cuts(p, end, map) : 0;
    free(map);
    return rc;
}

/* A node an additional section takes addresses from: one with data, or a name that was never
 * an empty non-terminal (a name whose data went, kept as an ENT for names below it, is not). */
static bool live(const zone_node_t *n)
{
    return n && (n->nrrsets || !(n->flags & ZONE_NODE_ENT));
}

/* The targets of RRset s looked up in the new version: all of them, or (only_dead) those that
 * point at no live node and name something inside the zone. */
static void resolve_rrset(struct patch *p, const zone_rrset_t *s, bool only_dead)
{
    const zone_t *z = p->z;
    const uint8_t *rd = s->rdata;
    for (unsigned k = 0; k < s->count; k++) {
        size_t rdlen = (size_t)rd[0] << 8 | rd[1];
        const uint8_t *name = rd + 2 + zone_type_target_off(s->type);
        uint32_t *t = &p->targets[s->ext.targets - 1 + k];
        rd += 2 + rdlen;
        if (only_dead &&
            ((*t && live(zone_node_at(z, *t - 1))) || !dname_is_subdomain(name, z->apex)))
            continue;
        uint8_t lc[DNAME_MAXLEN];
        (void)dname_lower(lc, name);
        uint32_t id = find_id(p, lc);
        *t = id && live(zone_node_at(z, id - 1)) ? id : 0;
    }
}

/* The targets of the RRsets this patch added, resolved in the new version. Then, when names
 * were added, they may be the targets of NS/MX/SRV RRsets the patch did not touch: one that
 * named a name not there yet, or one whose target was removed and is back (as a new node). Each
 * target that points at no live node is looked up again, so the additional section of a patched
 * version is the one a build gives: one walk over the nodes, a probe per such target. */
static void resolve_targets(struct patch *p)
{
    for (size_t i = 0; i < p->nsets; i++)
        if (zone_rrset_has_targets(&p->sets[i]))
            resolve_rrset(p, &p->sets[i], false);
    if (!p->added)
        return;
    for (uint32_t i = 0; i < p->nnodes; i++) {
        const zone_node_t *n = zone_node_at(p->z, i);
        for (unsigned k = 0; k < n->nrrsets; k++)
            if (zone_rrset_has_targets(&n->rrsets[k]))
                resolve_rrset(p, &n->rrsets[k], true);
    }
}

/* After a change at the apex: the zone's own view of it (SOA, negative SOA, NS, serial). */
static void refresh_apex(struct patch *p, zone_rrset_t *neg)
{
    zone_t *z = p->z;
    const zone_node_t *apex = zone_node_at(z, 0);
    z->apex_node = apex;
    z->soa = zone_node_rrset(apex, WIRE_T_SOA);
    z->apex_ns = zone_node_rrset(apex, WIRE_T_NS);
    *neg = *p->fresh->neg_soa; /* fresh's SOA with the negative TTL; its RDATA is fresh's */
    z->neg_soa = neg;
    z->serial = p->fresh->serial;
    z->src_serial = p->fresh->src_serial;
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

/* Whether the version as a whole may be patched once more: 0, or 1 (err says why). */
static int check_whole(struct patch *p, size_t n)
{
    const zone_t *base = p->base, *fresh = p->fresh;
    if (base->dnssec || fresh->dnssec)
        return want_build(p, NULL, "the zone is signed");
    if (base->patches + 1 >= ZONE_PATCH_MAX)
        return want_build(p, NULL, "%u patches since the last build", base->patches);
    if (base->patched + n > base->node_count / 8 + ZONE_PATCH_NAMES)
        return want_build(p, NULL, "%zu names patched since the last build", base->patched + n);
    size_t held = zone_footprint(base);
    if (base->built_bytes && held > base->built_bytes + base->built_bytes / 2 + ZONE_PATCH_SLACK)
        return want_build(p, NULL, "patches hold %zu KiB, built it was %zu KiB", held >> 10,
                          base->built_bytes >> 10);
    if (base->apex_len != fresh->apex_len || memcmp(base->apex, fresh->apex, base->apex_len))
        return want_build(p, NULL, "another origin");
    return 0;
}

/* The sizes of the new version's own arrays: what judge() counted on top of the base's. */
struct layout {
    size_t add, nsets, ntg, ngeo; /* judge()'s counts */
    size_t nodes, slots, npages;
    bool same_index; /* the name index keeps its size (copied whole, not filled anew) */
};

/* The index grows (doubles) when the added nodes would fill it past 2/3. 0, or 1 (too big). */
static int plan(struct patch *p, struct layout *l)
{
    const zone_t *base = p->base;
    l->nodes = base->node_count + l->add;
    l->slots = (size_t)base->node_mask + 1;
    while (l->nodes + l->nodes / 2 > l->slots)
        l->slots *= 2;
    if (l->slots - 1 > UINT32_MAX)
        return want_build(p, NULL, "too many names");
    l->npages = (l->nodes + ZONE_NODE_PAGE - 1) / ZONE_NODE_PAGE;
    l->same_index = l->slots == (size_t)base->node_mask + 1;
    return 0;
}

/* The new version's arrays in two new arenas: a (the page directory, the name index, child
 * counts, steering and targets: about 18 bytes a name, as the nodes are shared page by page and
 * the RRsets, names and RDATA blob by blob) and d (the patch's blob: the changed names' RRsets
 * and the negative SOA when the apex changes, sized exactly as it stays for the life of the
 * versions after it). Sets p->z (zeroed), the arrays of p, *data and *zd. 0 or TERN_ENOMEM
 * (nothing left allocated). */
static int allocate(struct patch *p, const struct layout *l, zone_data_t ***data, zone_data_t **zd)
{
    const zone_t *base = p->base, *fresh = p->fresh;
    size_t ndata = base->data_count + fresh->data_count + 1;
    const size_t parts[] = {sizeof(zone_t),
                            l->npages * sizeof(zone_node_t *),
                            l->npages,
                            l->slots * sizeof(zone_slot_t),
                            l->nodes * sizeof(uint32_t),
                            (base->geo_count + l->ngeo) * sizeof(zone_geo_t),
                            (base->target_count + l->ntg) * sizeof(uint32_t),
                            ndata * sizeof(zone_data_t *),
                            ((size_t)base->health_count + fresh->health_count) *
                                sizeof(health_ep_t *)};
    size_t need = 0;
    for (size_t i = 0; i < TERN_ARRAY_SIZE(parts); i++)
        need += ((parts[i] ? parts[i] : 1) + 15) & ~(size_t)15;
    size_t dneed =
        ((sizeof(zone_data_t) + 15) & ~(size_t)15) + (l->nsets + 1) * sizeof(zone_rrset_t);
    arena_t *a = arena_create(), *d = arena_create();
    if (!a || !d || arena_reserve(a, need) < 0 || arena_reserve(d, dneed) < 0)
        goto fail;
    p->z = arena_calloc(a, 1, sizeof(zone_t));
    p->pages = arena_calloc(a, l->npages, sizeof(*p->pages));
    p->owned = arena_calloc(a, l->npages, 1);
    /* zeroed only when it is filled anew (a grown index); a copy is written over whole */
    p->slots = l->same_index ? arena_alloc(a, l->slots * sizeof(zone_slot_t))
                             : arena_calloc(a, l->slots, sizeof(zone_slot_t));
    p->kids = arena_alloc(a, l->nodes * sizeof(uint32_t));
    p->geo = arena_alloc(a, (base->geo_count + l->ngeo) * sizeof(zone_geo_t));
    p->targets = arena_alloc(a, (base->target_count + l->ntg) * sizeof(uint32_t));
    *data = arena_alloc(a, ndata * sizeof(**data));
    *zd = arena_calloc(d, 1, sizeof(**zd));
    p->sets = arena_alloc(d, (l->nsets + 1) * sizeof(zone_rrset_t));
    if (!p->z || !p->pages || !p->owned || !p->slots || !p->kids || !p->geo || !p->targets ||
        !*data || !*zd || !p->sets)
        goto fail;
    p->z->arena = a;
    (*zd)->refs = 1;
    (*zd)->arena = d;
    return 0;
fail:
    arena_destroy(a);
    arena_destroy(d);
    return TERN_ENOMEM;
}

/* The new version as a copy of the base sharing everything it can: from here on it is a
 * well-formed zone holding a reference to all it shares, so a failure is zone_free(z). */
static void share_base(struct patch *p, const struct layout *l, zone_data_t **data, zone_data_t *zd)
{
    const zone_t *base = p->base, *fresh = p->fresh;
    zone_t *z = p->z;
    arena_t *a = z->arena;
    /* everything but refs: a transfer thread may be releasing its pin of base right now
     * (atomically), and a plain struct copy would read the count under its feet */
    memcpy(z, base, offsetof(zone_t, refs));
    z->arena = a;
    z->refs = 1;
    z->health = NULL;
    z->health_count = 0;
    z->delta = NULL; /* the base's is not this version's */
    for (uint32_t i = 0; i < base->data_count; i++)
        data[i] = base->data[i];
    for (uint32_t i = 0; i < fresh->data_count; i++)
        data[base->data_count + i] = fresh->data[i];
    z->data = data;
    z->data_count = base->data_count + fresh->data_count;
    for (uint32_t i = 0; i < z->data_count; i++)
        __atomic_add_fetch(&z->data[i]->refs, 1, __ATOMIC_RELAXED);
    data[z->data_count++] = zd;
    for (uint32_t i = 0; i < base->node_page_count; i++) {
        p->pages[i] = base->node_pages[i];
        __atomic_add_fetch(&zone_node_page_of(p->pages[i])->refs, 1, __ATOMIC_RELAXED);
    }
    z->node_pages = p->pages;
    z->node_page_count = (uint32_t)l->npages;
    p->max_nodes = l->nodes;

    memcpy(p->kids, base->kids, base->node_count * sizeof(uint32_t));
    if (base->geo_count)
        memcpy(p->geo, base->geo, base->geo_count * sizeof(zone_geo_t));
    if (base->target_count)
        memcpy(p->targets, base->targets, base->target_count * sizeof(uint32_t));
    z->kids = p->kids;
    z->geo = p->geo;
    z->targets = p->targets;
    z->node_slots = p->slots;
    z->node_mask = (uint32_t)(l->slots - 1);
    if (l->same_index) {
        memcpy(p->slots, base->node_slots, l->slots * sizeof(zone_slot_t));
    } else {
        for (size_t i = 0; i <= base->node_mask; i++)
            if (base->node_slots[i].node)
                slot_put(p, base->node_slots[i].hash, base->node_slots[i].node - 1);
    }
    p->nnodes = base->node_count;
    p->ngeo = base->geo_count;
    p->ntargets = base->target_count;
}

/* Names that get data first, then names that lose it: a removal takes empty non-terminals away
 * with it, and a name added after that below one of them would need nodes judge() did not count
 * (the node pages are sized by it). Added first, they keep those ancestors. 0, 1 (err says why)
 * or TERN_ENOMEM. */
static int apply_all(struct patch *p, const uint8_t *const *names, size_t n)
{
    for (int pass = 0; pass < 2; pass++) {
        for (size_t i = 0; i < n; i++) {
            if (has_data(find(p->fresh, names[i])) != (pass == 0))
                continue;
            if (apply(p, names[i]) < 0)
                return p->overflow ? want_build(p, names[i], "more new nodes than counted")
                                   : TERN_ENOMEM;
        }
    }
    return 0;
}

static bool is_apex(const zone_t *z, const uint8_t *const *names, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (dname_len(names[i]) == z->apex_len && memcmp(names[i], z->apex, z->apex_len) == 0)
            return true;
    return false;
}

int zone_patch(const zone_t *base, zone_delta_t *delta, zone_t **out, char *err, size_t errlen)
{
    size_t n;
    const uint8_t *const *names = zone_delta_names(delta, &n);
    struct patch p = {.base = base, .fresh = zone_delta_fresh(delta), .err = err, .errlen = errlen};
    struct layout l = {0};
    *out = NULL;
    if (errlen)
        err[0] = '\0';
    int rc = check_whole(&p, n);
    if (rc == 0)
        rc = judge(&p, names, n, &l.add, &l.nsets, &l.ntg, &l.ngeo);
    if (rc == 0)
        rc = plan(&p, &l);
    if (rc != 0)
        return rc;
    zone_data_t **data, *zd;
    if (allocate(&p, &l, &data, &zd) < 0)
        return TERN_ENOMEM;
    share_base(&p, &l, data, zd);
    zone_t *z = p.z;
    if ((rc = apply_all(&p, names, n)) == 0 && (rc = compact(&p, base->target_count)) == 0) {
        resolve_targets(&p);
        rc = merge_health(&p, z->arena);
    }
    free(p.holes);
    if (rc != 0) {
        zone_free(z);
        return rc;
    }
    z->apex_node = zone_node_at(z, 0);
    if (is_apex(base, names, n))
        refresh_apex(&p, &p.sets[l.nsets]);
    z->node_count = p.nnodes;
    z->geo_count = (uint32_t)p.ngeo;
    z->target_count = (uint32_t)p.ntargets;
    z->rr_count = base->rr_count + p.added_rrs - p.removed_rrs;
    z->patches = base->patches + 1;
    z->patched = base->patched + n;
    z->delta = zone_delta_retain(delta);
    *out = z;
    return 0;
}

int zone_patch_names(const zone_t *base, zone_t *fresh, const uint8_t *const *names, size_t n,
                     zone_t **out, char *err, size_t errlen)
{
    *out = NULL;
    zone_delta_t *d = zone_delta_new(base, fresh, names, n);
    if (!d)
        return TERN_ENOMEM;
    int rc = zone_patch(base, d, out, err, errlen);
    zone_delta_release(d);
    return rc;
}

const zone_delta_t *zone_patch_delta(const zone_t *old, const zone_t *new)
{
    /* A patch's data list is its base's, then its fresh zone's, then a blob of its own: blobs
     * are never shared between two versions but by a patch with its base (and with later
     * patches of itself), so old's list as new's prefix, one patch apart, is new's base. */
    if (!old || !new || !new->delta || new->patches != old->patches + 1 ||
        new->data_count <= old->data_count)
        return NULL;
    for (uint32_t i = 0; i < old->data_count; i++)
        if (new->data[i] != old->data[i])
            return NULL;
    return new->delta;
}
