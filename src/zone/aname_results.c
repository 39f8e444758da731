/*
 * aname_results.c — see aname_results.h. The builder keeps copies; finish() lays the table out in
 * one block: header, entries, index slots, then the names and RDATA the entries point into.
 */
#include "tern/zone/aname_results.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "tern/common/err.h"
#include "tern/common/grow.h"
#include "tern/common/hash.h"
#include "tern/wire/dname.h"
#include "tern/wire/rr.h"

/* One (name, type) of a finished table: the result first, so find() returns its address. */
struct aname_entry {
    aname_result_t r;
    const uint8_t *name; /* lowercased wire name */
    uint16_t qtype;
    uint8_t len;
};

/* The key hash beside the entry, so a probe compares hashes without touching an entry. */
struct aname_slot {
    uint32_t hash;
    uint32_t entry; /* index in entries plus one; 0 = empty */
};

struct aname_results {
    uint32_t refs; /* atomic (__atomic builtins): workers and the publisher share a table */
    uint32_t mask; /* slots has mask + 1 entries, a power of two, at most half full */
    bool complete; /* aname_results_set_complete() was called on its builder */
    size_t count;
    const struct aname_entry *entries;
    const struct aname_slot *slots;
};

/* One added result, with its own copies, until finish(). */
struct bentry {
    uint8_t name[DNAME_MAXLEN];
    uint8_t len;
    uint16_t qtype;
    aname_result_t r; /* r.rdata points to rdata */
    uint8_t *rdata;   /* malloc'd, NULL when rdata_len is 0 */
};

struct aname_results_builder {
    struct bentry *e;
    size_t n, cap;
    bool complete;
};

/* The index key of (name, type): A and AAAA of one name land in unrelated slots. */
static inline uint32_t slot_hash(uint32_t name_hash, uint16_t qtype)
{
    return tern_mix32(name_hash + (uint32_t)qtype * 0x9e3779b9u);
}

/* Bytes of one RR's RDATA for the type: 4 for A, 16 for AAAA. */
static size_t rr_size(uint16_t qtype)
{
    return qtype == WIRE_T_A ? 4 : 16;
}

/* Whether r is a well-formed result of qtype (see aname_results_add()). */
static bool result_ok(uint16_t qtype, const aname_result_t *r)
{
    if (r->state > ANAME_NXDOMAIN)
        return false;
    if (r->state != ANAME_OK)
        return r->count == 0 && r->rdata_len == 0;
    size_t rl = rr_size(qtype);
    if (r->count == 0 || !r->rdata || r->rdata_len != (size_t)r->count * (2 + rl))
        return false;
    for (size_t off = 0; off < r->rdata_len; off += 2 + rl)
        if (((size_t)r->rdata[off] << 8 | r->rdata[off + 1]) != rl)
            return false;
    return true;
}

aname_results_builder_t *aname_results_builder_new(void)
{
    return calloc(1, sizeof(aname_results_builder_t));
}

void aname_results_builder_free(aname_results_builder_t *b)
{
    if (!b)
        return;
    for (size_t i = 0; i < b->n; i++)
        free(b->e[i].rdata);
    free(b->e);
    free(b);
}

int aname_results_add(aname_results_builder_t *b, const uint8_t *lcname, uint16_t qtype,
                      const aname_result_t *r)
{
    if (!b || !lcname || !r || (qtype != WIRE_T_A && qtype != WIRE_T_AAAA))
        return TERN_EINVAL;
    if (dname_check(lcname, DNAME_MAXLEN) < 0 || !result_ok(qtype, r))
        return TERN_EINVAL;
    /* the index holds entry numbers as uint32_t and is sized to twice the entries */
    if (b->n >= UINT32_MAX / 4)
        return TERN_ENOMEM;
    if (tern_grow((void **)&b->e, &b->cap, b->n + 1, sizeof(*b->e)) < 0)
        return TERN_ENOMEM;
    struct bentry *e = &b->e[b->n];
    e->rdata = NULL;
    if (r->rdata_len) {
        if (!(e->rdata = malloc(r->rdata_len)))
            return TERN_ENOMEM;
        memcpy(e->rdata, r->rdata, r->rdata_len);
    }
    e->len = (uint8_t)dname_lower(e->name, lcname);
    e->qtype = qtype;
    e->r = *r;
    e->r.rdata = e->rdata;
    b->n++;
    return 0;
}

/* Same key: the builder entries a and b are one (name, type). */
static bool same_key(const struct bentry *a, const struct bentry *b)
{
    return a->qtype == b->qtype && a->len == b->len && memcmp(a->name, b->name, a->len) == 0;
}

void aname_results_set_complete(aname_results_builder_t *b)
{
    b->complete = true;
}

bool aname_results_complete(const aname_results_t *t)
{
    return t && t->complete;
}

aname_results_t *aname_results_finish(aname_results_builder_t *b)
{
    if (!b)
        return NULL;
    aname_results_t *t = NULL;
    uint32_t *hashes = NULL, *slot_of = NULL;
    size_t cap = 2; /* at least one empty slot even for an empty table: probes always end */
    while (cap < 2 * b->n)
        cap *= 2;
    uint32_t mask = (uint32_t)(cap - 1);

    /* Pass 1: index the builder's entries by number, the last of a key replacing the earlier. */
    hashes = malloc((b->n ? b->n : 1) * sizeof(*hashes));
    slot_of = calloc(cap, sizeof(*slot_of)); /* builder index + 1 */
    if (!hashes || !slot_of)
        goto fail;
    size_t count = 0, bytes = 0;
    for (size_t i = 0; i < b->n; i++) {
        const struct bentry *e = &b->e[i];
        hashes[i] = slot_hash(dname_hash(e->name), e->qtype);
        uint32_t s = hashes[i] & mask;
        while (slot_of[s] && !same_key(&b->e[slot_of[s] - 1], e))
            s = (s + 1) & mask;
        if (slot_of[s]) {
            bytes -= b->e[slot_of[s] - 1].r.rdata_len;
        } else {
            count++;
            bytes += e->len;
        }
        bytes += e->r.rdata_len;
        slot_of[s] = (uint32_t)i + 1;
    }

    /* Pass 2: one block, the surviving entries in slot order. */
    size_t off_entries = (sizeof(*t) + 15) & ~(size_t)15;
    size_t off_slots = off_entries + count * sizeof(struct aname_entry);
    size_t off_bytes = off_slots + cap * sizeof(struct aname_slot);
    uint8_t *block = malloc(off_bytes + bytes);
    if (!block)
        goto fail;
    t = (aname_results_t *)block;
    struct aname_entry *entries = (struct aname_entry *)(block + off_entries);
    struct aname_slot *slots = (struct aname_slot *)(block + off_slots);
    uint8_t *p = block + off_bytes;
    size_t k = 0;
    for (size_t s = 0; s < cap; s++) {
        if (!slot_of[s]) {
            slots[s] = (struct aname_slot){0, 0};
            continue;
        }
        const struct bentry *e = &b->e[slot_of[s] - 1];
        struct aname_entry *x = &entries[k];
        memcpy(p, e->name, e->len);
        x->name = p;
        p += e->len;
        x->len = e->len;
        x->qtype = e->qtype;
        x->r = e->r;
        x->r.rdata = NULL;
        if (e->r.rdata_len) {
            memcpy(p, e->rdata, e->r.rdata_len);
            x->r.rdata = p;
            p += e->r.rdata_len;
        }
        slots[s] = (struct aname_slot){hashes[slot_of[s] - 1], (uint32_t)++k};
    }
    t->refs = 1;
    t->mask = mask;
    t->complete = b->complete;
    t->count = count;
    t->entries = entries;
    t->slots = slots;
fail:
    free(hashes);
    free(slot_of);
    aname_results_builder_free(b);
    return t;
}

const aname_result_t *aname_results_find(const aname_results_t *t, const uint8_t *lcname,
                                         size_t len, uint32_t hash, uint16_t qtype)
{
    if (!t)
        return NULL;
    uint32_t h = slot_hash(hash, qtype);
    for (uint32_t s = h & t->mask;; s = (s + 1) & t->mask) {
        const struct aname_slot *sl = &t->slots[s];
        if (!sl->entry)
            return NULL;
        if (sl->hash != h)
            continue;
        const struct aname_entry *e = &t->entries[sl->entry - 1];
        if (e->qtype == qtype && e->len == len && memcmp(e->name, lcname, len) == 0)
            return &e->r;
    }
}

size_t aname_results_count(const aname_results_t *t)
{
    return t ? t->count : 0;
}

aname_results_t *aname_results_retain(aname_results_t *t)
{
    if (t)
        __atomic_add_fetch(&t->refs, 1, __ATOMIC_RELAXED);
    return t;
}

void aname_results_release(aname_results_t *t)
{
    /* acq_rel: every holder's reads happen before the free by whoever drops the last one */
    if (t && __atomic_sub_fetch(&t->refs, 1, __ATOMIC_ACQ_REL) == 0)
        free(t);
}
