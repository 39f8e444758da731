/*
 * zone_table.c — the zones a server answers from, indexed by apex hash.
 *
 * The index is open addressing with linear probing, kept at most half full and maintained on
 * every add (so a duplicate apex is refused at once); freeze only marks the table read-only.
 * A lookup probes the suffixes of the query name longest first, but only those whose label
 * count lies between the shortest and the longest apex in the table: a 127-label random name
 * against a table of two-label zones costs one or two probes, not 127.
 */
#include "tern/zone/zone_table.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "tern/common/err.h"

/* Starting sizes: most servers have a few zones; doubling reaches 10,000+ quickly. */
#define TABLE_ZONES_MIN 8
#define TABLE_SLOTS_MIN 16

/* The apex hash is kept in the slot: a probe that does not match never touches the zone, which
 * with thousands of zones is a cache miss each time. */
struct zslot {
    const zone_t *zone; /* NULL = empty */
    uint32_t hash;
};

struct zone_table {
    zone_t **zones; /* in the order added */
    size_t count, cap;
    struct zslot *slots; /* index by apex hash */
    size_t mask;
    unsigned min_labels, max_labels; /* apex label counts over all zones */
    bool frozen;
};

zone_table_t *zone_table_new(void)
{
    zone_table_t *t = calloc(1, sizeof(*t));
    if (!t)
        return NULL;
    t->min_labels = DNAME_MAXLABELS;
    return t;
}

static const zone_t *slot_find(const zone_table_t *t, const uint8_t *lc, size_t len, uint32_t hash)
{
    if (!t->slots)
        return NULL;
    for (size_t i = hash & t->mask;; i = (i + 1) & t->mask) {
        const struct zslot *s = &t->slots[i];
        if (!s->zone)
            return NULL;
        if (s->hash == hash && s->zone->apex_len == len && memcmp(s->zone->apex, lc, len) == 0)
            return s->zone;
    }
}

static void slot_put(struct zslot *slots, size_t mask, const zone_t *z)
{
    size_t i = z->hash & mask;
    while (slots[i].zone)
        i = (i + 1) & mask;
    slots[i].zone = z;
    slots[i].hash = z->hash;
}

static int reserve(zone_table_t *t, size_t count)
{
    if (count > t->cap) {
        size_t cap = t->cap ? t->cap * 2 : TABLE_ZONES_MIN;
        zone_t **z = realloc(t->zones, cap * sizeof(*z));
        if (!z)
            return TERN_ENOMEM;
        t->zones = z;
        t->cap = cap;
    }
    if (t->slots && count * 2 <= t->mask + 1)
        return 0;
    size_t size = TABLE_SLOTS_MIN;
    while (size < count * 2) /* load factor <= 0.5 */
        size *= 2;
    struct zslot *slots = calloc(size, sizeof(*slots));
    if (!slots)
        return TERN_ENOMEM;
    for (size_t i = 0; i < t->count; i++)
        slot_put(slots, size - 1, t->zones[i]);
    free(t->slots);
    t->slots = slots;
    t->mask = size - 1;
    return 0;
}

int zone_table_add(zone_table_t *t, zone_t *z)
{
    if (t->frozen)
        return TERN_EINVAL;
    if (slot_find(t, z->apex, z->apex_len, z->hash))
        return TERN_EDUPZONE;
    int rc = reserve(t, t->count + 1);
    if (rc < 0)
        return rc;
    t->zones[t->count++] = z;
    slot_put(t->slots, t->mask, z);
    if (z->apex_labels < t->min_labels)
        t->min_labels = z->apex_labels;
    if (z->apex_labels > t->max_labels)
        t->max_labels = z->apex_labels;
    return 0;
}

int zone_table_freeze(zone_table_t *t)
{
    /* The index is already complete; an empty table still gets one so find() needs no test. */
    int rc = reserve(t, t->count);
    if (rc < 0)
        return rc;
    t->frozen = true;
    return 0;
}

const zone_t *zone_table_find(const zone_table_t *t, const dname_view_t *v, unsigned *apex_label)
{
    if (t->count == 0 || v->nlabels < t->min_labels)
        return NULL;
    unsigned i = v->nlabels > t->max_labels ? v->nlabels - t->max_labels : 0;
    unsigned last = v->nlabels - t->min_labels;
    for (; i <= last; i++) {
        const zone_t *z = slot_find(t, v->lc + v->off[i], (size_t)(v->len - v->off[i]), v->hash[i]);
        if (z) {
            *apex_label = i;
            return z;
        }
    }
    return NULL;
}

size_t zone_table_count(const zone_table_t *t)
{
    return t->count;
}

const zone_t *zone_table_at(const zone_table_t *t, size_t i)
{
    return t->zones[i];
}

void zone_table_free(zone_table_t *t)
{
    if (!t)
        return;
    for (size_t i = 0; i < t->count; i++)
        zone_free(t->zones[i]);
    free(t->zones);
    free(t->slots);
    free(t);
}
