/*
 * answer_prefetch.c — the cache misses of a batch of queries, issued together (answer.h).
 *
 * Under traffic a query's zone data is rarely in L1 or L2: the name-index slot, the node, the
 * node's name and its RRsets are each a miss, and each depends on the one before, so one query
 * pays them one after another. A batch of queries has independent chains: walking the batch
 * once per stage and prefetching what the next stage reads lets the misses of different queries
 * be in flight at the same time. The stages mirror the first probe of zone_lookup() (the name
 * itself, which answers most queries), and the slot of the walk's first step for a name that
 * is not there.
 */
#include <stdint.h>

#include "tern/answer/answer.h"
#include "tern/wire/dname.h"
#include "tern/wire/parse.h"
#include "tern/zone/zone.h"
#include "tern/zone/zone_table.h"

/* How far along a slot run stage 2 looks: the index is at most 2/3 full, runs are short. */
#define PREFETCH_PROBES 4

typedef struct {
    const zone_t *zone;
    const zone_node_t *node;
    uint32_t hash;
    uint16_t qtype;
} hint_t;

/* Stage 1: the name's zone; prefetch its slot. */
static void find_slot(const zone_table_t *t, const wire_query_t *q, hint_t *h)
{
    h->zone = NULL;
    h->node = NULL;
    const dname_view_t *v = &q->name;
    unsigned apex;
    if (!q->has_question || v->nlabels == 0)
        return;
    const zone_t *z = zone_table_find(t, v, &apex);
    if (!z || apex == 0 || v->nlabels > z->max_labels)
        return;
    h->zone = z;
    h->hash = v->hash[0];
    h->qtype = q->qtype;
    __builtin_prefetch(&z->node_slots[h->hash & z->node_mask]);
    /* a name that turns out not to exist is walked from the apex down: its first probe is the
     * name one label below the apex (a random-subdomain flood misses there) */
    if (apex >= 2)
        __builtin_prefetch(&z->node_slots[v->hash[apex - 1] & z->node_mask]);
}

/* Stage 2: the slot is (being) loaded; prefetch the node it points at. */
static void find_node(hint_t *h)
{
    const zone_t *z = h->zone;
    uint32_t k = h->hash & z->node_mask;
    for (unsigned p = 0; p < PREFETCH_PROBES; p++, k = (k + 1) & z->node_mask) {
        zone_slot_t sl = z->node_slots[k];
        if (sl.node == 0)
            return;
        if (sl.hash == h->hash) {
            h->node = zone_node_at(z, sl.node - 1);
            __builtin_prefetch(h->node);
            return;
        }
    }
}

void answer_prefetch(const answer_view_t *v, const wire_query_t *qs, unsigned n)
{
    const zone_table_t *t = v->table;
    if (!t || n < 2)
        return; /* one query has nothing to overlap with */
    if (n > ANSWER_PREFETCH_MAX)
        n = ANSWER_PREFETCH_MAX;
    hint_t h[ANSWER_PREFETCH_MAX];
    for (unsigned i = 0; i < n; i++)
        find_slot(t, &qs[i], &h[i]);
    for (unsigned i = 0; i < n; i++)
        if (h[i].zone)
            find_node(&h[i]);
    /* Stage 3: the node's name (compared by the lookup) and its RRsets (read by the answer) */
    for (unsigned i = 0; i < n; i++) {
        const zone_node_t *nd = h[i].node;
        if (!nd)
            continue;
        __builtin_prefetch(nd->name);
        if (nd->rrsets)
            __builtin_prefetch(nd->rrsets);
    }
    /* Stage 4: the RDATA the answer copies: the asked type's, else the node's first RRset's
     * (a CNAME, or what a NODATA or referral reads first) */
    for (unsigned i = 0; i < n; i++) {
        const zone_node_t *nd = h[i].node;
        if (!nd || nd->nrrsets == 0)
            continue;
        const zone_rrset_t *rs = zone_node_rrset(nd, h[i].qtype);
        __builtin_prefetch(rs ? rs->rdata : nd->rrsets[0].rdata);
    }
}
