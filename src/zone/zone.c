/*
 * zone.c — read-only queries over a built zone (see zone.h; the building is in zone_builder.c).
 *
 * Everything here runs on the query path: no allocation, hash probes only.
 */
#include "tern/zone/zone.h"

#include <stdlib.h>
#include <string.h>

#include "tern/common/compiler.h"
#include "tern/common/err.h"
#include "tern/zone/zone_builder.h"
#include "tern/zone/zone_delta.h"

uint32_t zone_find_index(const zone_t *z, const uint8_t *lcname, size_t len, uint32_t hash)
{
    for (uint32_t i = hash & z->node_mask;; i = (i + 1) & z->node_mask) {
        zone_slot_t sl = z->node_slots[i];
        if (sl.node == 0)
            return 0;
        if (sl.hash != hash)
            continue;
        const zone_node_t *n = zone_node_at(z, sl.node - 1);
        if (n->name_len == len && memcmp(n->name, lcname, len) == 0)
            return sl.node;
    }
}

const zone_node_t *zone_find_node(const zone_t *z, const uint8_t *lcname, size_t len, uint32_t hash)
{
    /* At most 2/3 full: a miss ends at an empty slot after a short run, within a cache line or
     * two; only a slot with the same 32-bit hash costs a look at its node. */
    for (uint32_t i = hash & z->node_mask;; i = (i + 1) & z->node_mask) {
        zone_slot_t sl = z->node_slots[i];
        if (sl.node == 0)
            return NULL;
        if (sl.hash != hash)
            continue;
        const zone_node_t *n = zone_node_at(z, sl.node - 1);
        if (n->name_len == len && memcmp(n->name, lcname, len) == 0)
            return n;
    }
}

const zone_rrset_t *zone_node_rrset(const zone_node_t *n, uint16_t type)
{
    /* Sorted by type: stop as soon as we are past it. Nodes hold a handful of RRsets. */
    for (unsigned i = 0; i < n->nrrsets && n->rrsets[i].type <= type; i++)
        if (n->rrsets[i].type == type)
            return &n->rrsets[i];
    return NULL;
}

void zone_lookup(const zone_t *z, const dname_view_t *v, unsigned apex_label, zone_lookup_t *r)
{
    /* The suffix starting at label i has nlabels - i labels; no node has more than max_labels,
     * so longer suffixes cannot match and are not probed. The name itself first: that is the
     * answer for most queries, one probe. Otherwise the closest encloser is found from the apex
     * down, and the first suffix without a node ends the walk: every ancestor of a node is a
     * node (the builder and zone_patch() keep the empty non-terminals), so nothing longer can
     * match. A random name under the apex (an NXDOMAIN flood) costs two probes, not one per
     * label, and each probe that misses is a cache miss. */
    unsigned lo = v->nlabels > z->max_labels ? (unsigned)(v->nlabels - z->max_labels) : 0;
    const zone_node_t *n = NULL;
    unsigned i = 0;
    if (lo == 0 && apex_label > 0)
        n = zone_find_node(z, v->lc, v->len, v->hash[0]);
    if (!n) {
        n = z->apex_node; /* apex_label is this zone's apex */
        i = apex_label;
        for (unsigned k = apex_label; k-- > (lo > 1 ? lo : 1);) {
            const zone_node_t *m =
                zone_find_node(z, v->lc + v->off[k], (size_t)(v->len - v->off[k]), v->hash[k]);
            if (!m)
                break;
            n = m;
            i = k;
        }
    }
    r->encloser = n;
    r->encloser_label = i;
    r->cut = zone_node_cut(z, n);
    if (i == 0) {
        r->kind = ZONE_LOOKUP_EXACT;
        r->node = n;
    } else if (unlikely(n->flags & ZONE_NODE_DNAME) && !n->cut) {
        /* RFC 6672 §2.2: below a DNAME owner every name is rewritten; the builder keeps
         * nothing below one, so the owner is always the closest encloser */
        r->kind = ZONE_LOOKUP_DNAME;
        r->node = n;
    } else if (!n->cut && n->wildcard) {
        /* RFC 4592 §3.3.1: the source of synthesis is "*.<closest encloser>"; none below a cut */
        r->kind = ZONE_LOOKUP_WILDCARD;
        r->node = zone_node_at(z, n->wildcard - 1);
    } else {
        r->kind = ZONE_LOOKUP_NXDOMAIN;
        r->node = NULL;
    }
}

zone_node_t *zone_node_page_new(uint32_t cap)
{
    /* a cache line of header keeps the 32-byte nodes aligned to half lines; the nodes are not
     * written here, so a builder touches each page only as it fills it (zone_builder.c) */
    size_t size = offsetof(zone_node_page_t, nodes) + (size_t)(cap ? cap : 1) * sizeof(zone_node_t);
    zone_node_page_t *pg = aligned_alloc(64, (size + 63) & ~(size_t)63);
    if (!pg)
        return NULL;
    pg->refs = 1;
    pg->cap = cap;
    return pg->nodes;
}

void zone_node_page_release(zone_node_t *nodes)
{
    zone_node_page_t *pg = zone_node_page_of(nodes);
    if (__atomic_sub_fetch(&pg->refs, 1, __ATOMIC_ACQ_REL) == 0)
        free(pg);
}

uint32_t zone_max_ttl(const zone_t *z)
{
    uint32_t max = 0;
    for (uint32_t i = 0; i < z->rrset_count; i++)
        if (z->rrsets[i].ttl > max)
            max = z->rrsets[i].ttl;
    return max;
}

zone_t *zone_retain(zone_t *z)
{
    /* atomic: a transfer thread pins the version it streams (tern/xfr) */
    __atomic_add_fetch(&z->refs, 1, __ATOMIC_RELAXED);
    return z;
}

void zone_free(zone_t *z)
{
    if (!z || __atomic_sub_fetch(&z->refs, 1, __ATOMIC_ACQ_REL) != 0)
        return;
    /* after the grace period: no worker can read an endpoint's rank through this zone now */
    for (uint32_t i = 0; i < z->health_count; i++)
        health_ep_release(z->health[i]);
    if (z->dnssec && z->dnssec_free)
        z->dnssec_free(z->dnssec);
    zone_delta_release(z->delta);
    for (uint32_t i = 0; i < z->data_count; i++)
        zone_data_release(z->data[i]);
    for (uint32_t i = 0; i < z->node_page_count; i++)
        if (z->node_pages[i])
            zone_node_page_release(z->node_pages[i]);
    arena_destroy(z->arena);
}

void zone_data_release(zone_data_t *d)
{
    if (d && __atomic_sub_fetch(&d->refs, 1, __ATOMIC_ACQ_REL) == 0) {
        arena_t *a = d->arena; /* d lives in its own arena */
        arena_destroy(a);
    }
}

size_t zone_footprint(const zone_t *z)
{
    size_t n = arena_footprint(z->arena);
    for (uint32_t i = 0; i < z->node_page_count; i++)
        n += offsetof(zone_node_page_t, nodes) +
             zone_node_page_of(z->node_pages[i])->cap * sizeof(zone_node_t);
    for (uint32_t i = 0; i < z->data_count; i++)
        n += arena_footprint(z->data[i]->arena);
    return n;
}

zone_t *zone_new_unavailable(const uint8_t *apex, const char *source)
{
    /* Built like any zone, so every reader (lookups, listings, metrics) sees a well-formed one:
     * an SOA and NS at the apex that the answer path never reaches (zone.unavailable). */
    size_t alen = dname_len(apex);
    uint8_t soa[2 * DNAME_MAXLEN + 20];
    memcpy(soa, apex, alen);
    memcpy(soa + alen, apex, alen);
    memset(soa + 2 * alen, 0, 20); /* serial, refresh, retry, expire, minimum */
    zone_builder_t *b = zone_builder_new(apex, source);
    if (!b)
        return NULL;
    zone_t *z = NULL;
    char err[256];
    if (zone_builder_add(b, apex, WIRE_T_SOA, WIRE_CLASS_IN, 0, soa, (uint16_t)(2 * alen + 20),
                         NULL, 0) < 0 ||
        zone_builder_add(b, apex, WIRE_T_NS, WIRE_CLASS_IN, 0, apex, (uint16_t)alen, NULL, 0) < 0) {
        zone_builder_free(b);
        return NULL;
    }
    if (zone_builder_finish(b, &z, err, sizeof(err)) < 0) /* frees b */
        return NULL;
    z->unavailable = 1;
    return z;
}

/* The SERIAL field of an SOA RDATA (sp: its first byte), big-endian. */
static void put_serial(uint8_t *sp, uint32_t serial)
{
    sp[0] = (uint8_t)(serial >> 24);
    sp[1] = (uint8_t)(serial >> 16);
    sp[2] = (uint8_t)(serial >> 8);
    sp[3] = (uint8_t)serial;
}

uint32_t zone_serial_next(bool had, uint32_t last, uint32_t serial, uint32_t now)
{
    /* RFC 1982: a before b when b is less than 2^31 ahead */
#define SERIAL_LT(a, b) ((uint32_t)((b) - (a)) - 1u < UINT32_C(0x7FFFFFFF))
    if (had)
        return SERIAL_LT(last, serial) ? serial : SERIAL_LT(last, now) ? now : last + 1;
    return SERIAL_LT(serial, now) ? now : serial;
#undef SERIAL_LT
}

int zone_set_serial_fresh(zone_t *z, uint32_t serial)
{
    const zone_rrset_t *soa = z->soa;
    if (!soa || soa->count != 1 || soa->rdata_len < 2 + 22 || z->data_count != 1 ||
        __atomic_load_n(&z->data[0]->refs, __ATOMIC_ACQUIRE) != 1)
        return TERN_EINVAL;
    /* the build's own blob, shared with no other version: written in place (the negative SOA
     * has the same RDATA) */
    uint8_t *sp = (uint8_t *)soa->rdata + soa->rdata_len - 20;
    put_serial(sp, serial);
    z->serial = serial;
    return 0;
}

int zone_set_serial(zone_t *z, uint32_t serial)
{
    /* The SOA's RDATA, the apex's RRsets and the apex's node page may all be shared with other
     * versions (data blobs, pages): none of them is written. Copies go into a blob and a page
     * of this version's own, which the versions patched from it share like any other. */
    const zone_rrset_t *soa0 = z->soa, *neg0 = z->neg_soa;
    const zone_node_t *apex0 = z->apex_node;
    if (!soa0 || soa0->count != 1 || soa0->rdata_len < 2 + 22 || apex0 != zone_node_at(z, 0))
        return TERN_EINVAL;
    arena_t *d = arena_create();
    if (!d)
        return TERN_ENOMEM;
    zone_data_t *zd = arena_calloc(d, 1, sizeof(*zd));
    uint8_t *rd = arena_alloc(d, soa0->rdata_len);
    zone_rrset_t *sets = arena_alloc(d, ((size_t)apex0->nrrsets + 1) * sizeof(*sets));
    zone_data_t **dl = arena_calloc(z->arena, (size_t)z->data_count + 1, sizeof(*dl));
    zone_node_t *page = zd && rd && sets && dl
                            ? zone_node_page_new(zone_node_page_of(z->node_pages[0])->cap)
                            : NULL;
    if (!page) {
        arena_destroy(d);
        return TERN_ENOMEM;
    }
    memcpy(page, z->node_pages[0], zone_node_page_of(z->node_pages[0])->cap * sizeof(zone_node_t));
    memcpy(sets, apex0->rrsets, apex0->nrrsets * sizeof(*sets));
    zone_rrset_t *soa = &sets[soa0 - apex0->rrsets], *neg = NULL;
    if (neg0) {
        neg = &sets[apex0->nrrsets];
        *neg = *neg0;
    }
    page[0].rrsets = sets;
    if (z->apex_ns)
        z->apex_ns = &sets[z->apex_ns - apex0->rrsets];
    z->apex_node = page;
    z->soa = soa;
    z->neg_soa = neg;
    /* apex0 is in the old page: not read after this */
    zone_node_page_release(((zone_node_t **)z->node_pages)[0]);
    ((zone_node_t **)z->node_pages)[0] = page;
    memcpy(rd, soa->rdata, soa->rdata_len);
    uint8_t *sp = rd + soa->rdata_len - 20; /* serial, refresh, retry, expire, minimum */
    put_serial(sp, serial);
    zd->refs = 1;
    zd->arena = d;
    memcpy(dl, z->data, z->data_count * sizeof(*dl));
    dl[z->data_count] = zd;
    z->data = dl;
    z->data_count++;
    soa->rdata = rd;
    if (neg && neg->rdata_len == soa->rdata_len) /* the same RDATA with the negative TTL */
        neg->rdata = rd;
    z->serial = serial;
    return 0;
}
