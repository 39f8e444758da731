/*
 * zone_diff.c — the names a stream of records changes in a base zone (zone_diff.h says what
 * matches and why it is kept this small).
 *
 * The RRs of the base are numbered in one walk: node by node, RRset by RRset (type order), RR by
 * RR (the RRset's order). first[i] is the number of node i's RR 0, and bit k of `seen` says RR k
 * was matched. A record may only match the first unmatched RR of its RRset, so the matched RRs of
 * every RRset are always a prefix of it: that is what makes a file that lists an RRset in another
 * order a change, and it turns "which RR is this" into one compare instead of a search. A hint
 * remembers where the last match left off, so the usual file (an RRset's RRs on consecutive
 * lines) finds the next RR without scanning the RRset's bits or RDATA.
 */
#include "tern/zone/zone_diff.h"

#include <stdlib.h>
#include <string.h>

#include "tern/common/err.h"
#include "tern/common/grow.h"
#include "tern/wire/dname.h"
#include "tern/wire/rr.h"

struct zone_diff {
    const zone_t *base;
    uint32_t *first;   /* per base node: the number of its RR 0 */
    uint64_t *seen;    /* one bit per base RR: matched */
    size_t seen_words; /* 64-bit words of seen */
    bool finished;

    /* where the last match left off: RR `next` of the RRset of `type` at node `node` - 1,
     * whose RR 0 is number `ord`, starts at byte `off` of its RDATA */
    uint32_t hint_node, hint_ord, hint_next, hint_off;
    uint16_t hint_type;

    /* the last owner looked up (lowercased) and its node (1 + index, 0 = none): a file gives
     * the records of a name together, so most records skip the hash and the probe */
    uint8_t last[DNAME_MAXLEN];
    size_t last_len; /* 0: none yet (a wire name is at least 1 byte) */
    uint32_t last_node;

    /* the changed names: lowercased, back to back in bytes at off[i]; slots is an open
     * addressing set of 1 + i, at most half full */
    uint8_t *bytes;
    size_t bytes_len, bytes_cap;
    size_t *off;
    size_t nnames, off_cap;
    uint32_t *slots;
    size_t slot_mask;     /* slots has slot_mask + 1 entries (a power of two), 0 when none */
    const uint8_t **list; /* finish(): pointers to the names */
};

/* The first capacity of the changed-name set: a reload usually changes a handful of names. */
#define DIFF_SLOTS_MIN 64

zone_diff_t *zone_diff_new(const zone_t *base)
{
    zone_diff_t *d = calloc(1, sizeof(*d));
    if (!d)
        return NULL;
    d->base = base;
    size_t nodes = base->node_count;
    if (nodes > UINT32_MAX)
        goto fail;
    d->first = malloc((nodes ? nodes : 1) * sizeof(*d->first));
    if (!d->first)
        goto fail;
    uint64_t total = 0;
    for (size_t i = 0; i < nodes; i++) {
        const zone_node_t *n = zone_node_at(base, (uint32_t)i);
        d->first[i] = (uint32_t)total;
        for (unsigned k = 0; k < n->nrrsets; k++)
            total += n->rrsets[k].count;
        if (total > UINT32_MAX) /* cannot happen: a zone counts its RRsets in 32 bits */
            goto fail;
    }
    d->seen_words = (size_t)(total + 63) / 64;
    d->seen = calloc(d->seen_words ? d->seen_words : 1, sizeof(*d->seen));
    if (!d->seen)
        goto fail;
    return d;
fail:
    zone_diff_free(d);
    return NULL;
}

void zone_diff_free(zone_diff_t *d)
{
    if (!d)
        return;
    free(d->first);
    free(d->seen);
    free(d->bytes);
    free(d->off);
    free(d->slots);
    free(d->list);
    free(d);
}

static bool bit_get(const zone_diff_t *d, uint32_t k)
{
    return d->seen[k / 64] >> (k % 64) & 1;
}

static void bit_set(zone_diff_t *d, uint32_t k)
{
    d->seen[k / 64] |= (uint64_t)1 << (k % 64);
}

/* Whether bits [from, from + n) are all set: a word at a time. */
static bool bits_all(const zone_diff_t *d, uint32_t from, uint32_t n)
{
    uint64_t k = from, end = (uint64_t)from + n;
    while (k < end) {
        unsigned shift = (unsigned)(k % 64);
        uint64_t take = 64 - shift < end - k ? 64 - shift : end - k;
        uint64_t mask = (take == 64 ? ~(uint64_t)0 : (((uint64_t)1 << take) - 1)) << shift;
        if ((d->seen[k / 64] & mask) != mask)
            return false;
        k += take;
    }
    return true;
}

/* The set bits from `from` on, up to n: where the first unset one is (n when all are set). */
static uint32_t bits_prefix(const zone_diff_t *d, uint32_t from, uint32_t n)
{
    uint32_t j = 0;
    while (j < n && (from + j) % 64 != 0 && bit_get(d, from + j))
        j++;
    if (j < n && (from + j) % 64 == 0) /* whole words while they are full */
        while (j + 64 <= n && d->seen[(from + j) / 64] == ~(uint64_t)0)
            j += 64;
    while (j < n && bit_get(d, from + j))
        j++;
    return j;
}

/* 1 + the index of lc (len bytes) in the changed names, or 0; *slot is where it is or would go. */
static size_t set_find(const zone_diff_t *d, const uint8_t *lc, size_t len, uint32_t hash,
                       size_t *slot)
{
    if (!d->slot_mask) {
        *slot = 0;
        return 0;
    }
    for (size_t i = hash & d->slot_mask;; i = (i + 1) & d->slot_mask) {
        uint32_t id = d->slots[i];
        if (!id) {
            *slot = i;
            return 0;
        }
        const uint8_t *nm = d->bytes + d->off[id - 1];
        if (dname_len(nm) == len && memcmp(nm, lc, len) == 0) {
            *slot = i;
            return id;
        }
    }
}

/* Double the set (or make it): every name put again. */
static int set_grow(zone_diff_t *d)
{
    size_t slots = d->slot_mask ? (d->slot_mask + 1) * 2 : DIFF_SLOTS_MIN;
    uint32_t *s = calloc(slots, sizeof(*s));
    if (!s)
        return TERN_ENOMEM;
    free(d->slots);
    d->slots = s;
    d->slot_mask = slots - 1;
    for (size_t id = 0; id < d->nnames; id++) {
        const uint8_t *nm = d->bytes + d->off[id];
        size_t i = dname_hash(nm) & d->slot_mask;
        while (s[i])
            i = (i + 1) & d->slot_mask;
        s[i] = (uint32_t)(id + 1);
    }
    return 0;
}

/* lc (lowercased, len bytes) has changed. */
static int mark(zone_diff_t *d, const uint8_t *lc, size_t len)
{
    uint32_t hash = dname_hash(lc);
    size_t slot;
    if (set_find(d, lc, len, hash, &slot))
        return 0;
    if (d->nnames >= UINT32_MAX - 1)
        return TERN_ENOMEM;
    if ((d->nnames + 1) * 2 > d->slot_mask + 1) {
        if (set_grow(d) < 0)
            return TERN_ENOMEM;
        (void)set_find(d, lc, len, hash, &slot);
    }
    if (tern_grow((void **)&d->bytes, &d->bytes_cap, d->bytes_len + len, 1) < 0 ||
        tern_grow((void **)&d->off, &d->off_cap, d->nnames + 1, sizeof(*d->off)) < 0)
        return TERN_ENOMEM;
    memcpy(d->bytes + d->bytes_len, lc, len);
    d->off[d->nnames] = d->bytes_len;
    d->bytes_len += len;
    d->slots[slot] = (uint32_t)++d->nnames;
    return 0;
}

int zone_diff_add(zone_diff_t *d, const uint8_t *owner, uint16_t type, uint16_t rclass,
                  uint32_t ttl, const uint8_t *rdata, uint16_t rdlen)
{
    if (d->finished)
        return TERN_EINVAL;
    const zone_t *base = d->base;
    uint8_t lc[DNAME_MAXLEN];
    size_t len = dname_lower(lc, owner);
    uint32_t idx;
    if (len == d->last_len && memcmp(lc, d->last, len) == 0) {
        idx = d->last_node;
    } else {
        if (!dname_is_subdomain(lc, base->apex))
            return TERN_EOUTZONE;
        idx = zone_find_index(base, lc, len, dname_hash(lc));
        memcpy(d->last, lc, len);
        d->last_len = len;
        d->last_node = idx;
    }
    /* a class the builder refuses, a name the base lacks (new, or an empty non-terminal) */
    if (rclass != WIRE_CLASS_IN || !idx)
        return mark(d, lc, len);
    const zone_node_t *n = zone_node_at(base, idx - 1);
    const zone_rrset_t *s = zone_node_rrset(n, type);
    if (!s || s->ttl != ttl)
        return mark(d, lc, len);

    /* the RRset's first unmatched RR: where the last match left it, else from the bits */
    uint32_t ord, j, off;
    if (d->hint_node == idx && d->hint_type == type) {
        ord = d->hint_ord;
        j = d->hint_next;
        off = d->hint_off;
    } else {
        ord = d->first[idx - 1];
        for (const zone_rrset_t *p = n->rrsets; p < s; p++)
            ord += p->count;
        j = bits_prefix(d, ord, s->count);
        off = 0;
        for (uint32_t k = 0; k < j && k < s->count; k++)
            off += 2u + (uint32_t)(s->rdata[off] << 8 | s->rdata[off + 1]);
    }
    /* none left (an RR given twice, or one more), or not this one (new, or out of order) */
    if (j >= s->count)
        return mark(d, lc, len);
    uint16_t have = (uint16_t)(s->rdata[off] << 8 | s->rdata[off + 1]);
    if (have != rdlen || (rdlen && memcmp(s->rdata + off + 2, rdata, rdlen) != 0))
        return mark(d, lc, len);
    bit_set(d, ord + j);
    d->hint_node = idx;
    d->hint_type = type;
    d->hint_ord = ord;
    d->hint_next = j + 1;
    d->hint_off = off + 2u + have;
    return 0;
}

int zone_diff_finish(zone_diff_t *d, const uint8_t *const **names, size_t *n)
{
    if (!d->finished) {
        /* names whose RRs were not all given (removed records) */
        const zone_t *base = d->base;
        for (size_t i = 0; i < base->node_count; i++) {
            const zone_node_t *nd = zone_node_at(base, (uint32_t)i);
            if (!nd->nrrsets)
                continue;
            uint32_t rrs = 0;
            for (unsigned k = 0; k < nd->nrrsets; k++)
                rrs += nd->rrsets[k].count;
            if (!bits_all(d, d->first[i], rrs) && mark(d, nd->name, nd->name_len) < 0)
                return TERN_ENOMEM;
        }
        d->list = malloc((d->nnames ? d->nnames : 1) * sizeof(*d->list));
        if (!d->list)
            return TERN_ENOMEM;
        for (size_t i = 0; i < d->nnames; i++)
            d->list[i] = d->bytes + d->off[i];
        d->finished = true;
    }
    *names = d->list;
    *n = d->nnames;
    return 0;
}

zone_delta_t *zone_diff_delta(const zone_diff_t *d, zone_t *fresh)
{
    if (!d->finished)
        return NULL;
    return zone_delta_new(d->base, fresh, d->list, d->nnames);
}

bool zone_diff_changed(const zone_diff_t *d, const uint8_t *owner)
{
    uint8_t lc[DNAME_MAXLEN];
    size_t len = dname_lower(lc, owner);
    size_t slot;
    return set_find(d, lc, len, dname_hash(lc), &slot) != 0;
}

size_t zone_diff_footprint(const zone_diff_t *d)
{
    size_t list = d->finished ? (d->nnames ? d->nnames : 1) * sizeof(*d->list) : 0;
    return sizeof(*d) + (d->base->node_count ? d->base->node_count : 1) * sizeof(*d->first) +
           (d->seen_words ? d->seen_words : 1) * sizeof(*d->seen) + d->bytes_cap +
           d->off_cap * sizeof(*d->off) + (d->slot_mask ? d->slot_mask + 1 : 0) * sizeof(uint32_t) +
           list;
}
