/*
 * zone_delta.c — the one zone change type (zone_delta.h says what it holds and why).
 *
 * The names are kept back to back in one buffer and sorted by length, then bytes: any total
 * order makes the set unique and searchable, and this one decides most compares on the length.
 */
#include "tern/zone/zone_delta.h"

#include <ldns/ldns.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "tern/common/byteorder.h"
#include "tern/common/err.h"
#include "tern/common/grow.h"
#include "tern/common/hash.h"
#include "tern/wire/dname.h"
#include "tern/wire/rdata.h"
#include "tern/wire/rr.h"
#include "tern/zone/zone_builder.h"

struct zone_delta {
    uint32_t refs; /* atomic */
    uint32_t from, to;
    zone_t *fresh;         /* one reference */
    const uint8_t **names; /* n, sorted, unique, pointing into bytes */
    size_t n;
    uint8_t *bytes;
};

static int name_cmp(const uint8_t *a, const uint8_t *b)
{
    size_t la = dname_len(a), lb = dname_len(b);
    if (la != lb)
        return la < lb ? -1 : 1;
    return memcmp(a, b, la);
}

static int name_qcmp(const void *a, const void *b)
{
    return name_cmp(*(const uint8_t *const *)a, *(const uint8_t *const *)b);
}

zone_delta_t *zone_delta_new(const zone_t *base, zone_t *fresh, const uint8_t *const *names,
                             size_t n)
{
    zone_delta_t *d = calloc(1, sizeof(*d));
    if (!d)
        return NULL;
    d->refs = 1;
    d->from = base->serial;
    d->to = fresh->serial;
    size_t bytes = 0;
    for (size_t i = 0; i < n; i++)
        bytes += dname_len(names[i]);
    d->bytes = malloc(bytes ? bytes : 1);
    d->names = malloc((n ? n : 1) * sizeof(*d->names));
    if (!d->bytes || !d->names)
        goto fail;
    size_t off = 0;
    for (size_t i = 0; i < n; i++) {
        size_t len = dname_len(names[i]);
        memcpy(d->bytes + off, names[i], len);
        d->names[i] = d->bytes + off;
        off += len;
    }
    qsort(d->names, n, sizeof(*d->names), name_qcmp);
    for (size_t i = 0; i < n; i++) /* duplicates: kept once */
        if (d->n == 0 || name_cmp(d->names[d->n - 1], d->names[i]) != 0)
            d->names[d->n++] = d->names[i];
    d->fresh = zone_retain(fresh);
    return d;
fail:
    free(d->bytes);
    free(d->names);
    free(d);
    return NULL;
}

uint32_t zone_delta_from(const zone_delta_t *d)
{
    return d->from;
}

uint32_t zone_delta_to(const zone_delta_t *d)
{
    return d->to;
}

const uint8_t *const *zone_delta_names(const zone_delta_t *d, size_t *n)
{
    *n = d->n;
    return d->names;
}

bool zone_delta_has(const zone_delta_t *d, const uint8_t *lc)
{
    size_t lo = 0, hi = d->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = name_cmp(d->names[mid], lc);
        if (c == 0)
            return true;
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return false;
}

const zone_t *zone_delta_fresh(const zone_delta_t *d)
{
    return d->fresh;
}

zone_delta_t *zone_delta_retain(zone_delta_t *d)
{
    __atomic_add_fetch(&d->refs, 1, __ATOMIC_RELAXED);
    return d;
}

void zone_delta_release(zone_delta_t *d)
{
    if (!d || __atomic_sub_fetch(&d->refs, 1, __ATOMIC_ACQ_REL) != 0)
        return;
    zone_free(d->fresh);
    free(d->names);
    free(d->bytes);
    free(d);
}

/* ---- a delta from IXFR steps ------------------------------------------------------------ */

/*
 * Why the store looks the way it does: a step is usually a handful of RRs against a zone of a
 * million, so what it keeps must be proportional to the steps. RRs removed from base are kept as
 * their position in it — (node, RRset, RR) packed into 56 bits, in an open-addressing set — since
 * base is pinned and immutable, and a bitmap over the nodes says which nodes have any, so a walk
 * probes the set only there. RRs added are copied (they are new data) into a chained hash table
 * keyed by owner, type and canonical RDATA, so a later step can remove them again.
 */

/* Decompressed RDATA: the layouts with names (wire/rdata.h) grow by at most two names of 255
 * bytes; everything else is at most 65535 bytes. */
#define RDATA_CAP (UINT16_MAX + 2 * DNAME_MAXLEN)

/* The position of an RR of base: node index, RRset index in the node (< 256), RR index in the
 * RRset (< 65535). RR index 0xffff marks the TTL override of an RRset instead. */
#define POS(node, set, rr) ((uint64_t)(node) << 24 | (uint64_t)(set) << 16 | (uint64_t)(rr))
#define POS_TTL            0xffffu
#define POS_EMPTY          UINT64_MAX
#define POS_NONE           UINT64_MAX

/* Room for a name in presentation form (every byte escaped as \DDD). */
#define NAME_STR_MAX (DNAME_MAXLEN * 4 + 1)

/* One RR a step added. */
struct add {
    uint64_t hash;
    uint32_t off;  /* lowercased owner, then the RDATA as received, at blob + off */
    uint32_t next; /* the next entry of its bucket, plus one; 0 ends the chain */
    uint32_t ttl;
    uint16_t type;
    uint16_t rdlen;
    uint8_t owner_len;
    uint8_t live; /* 0 once a later step removed it */
};

struct pos_slot {
    uint64_t key;
    uint32_t val;
};

enum ixfr_state { IX_IDLE, IX_DEL, IX_ADD };

struct zone_delta_ixfr {
    const zone_t *base;
    enum ixfr_state state;
    bool stepped;    /* some step was ended */
    uint32_t serial; /* the serial reached: base's, then each ended step's */
    bool overrides;  /* the TTL overrides were worked out (finish or build) */

    uint64_t seed; /* of the additions' hash: random, so a primary cannot aim for collisions */
    struct add *adds;
    size_t nadds, adds_cap, adds_live;
    uint32_t *heads; /* buckets: entry index plus one, 0 empty; nbuckets a power of two */
    size_t nbuckets;
    uint8_t *blob;
    size_t blob_len, blob_cap;

    struct pos_slot *pos; /* removed RRs of base and TTL overrides */
    size_t pos_mask, pos_count;
    uint8_t *touched; /* one bit per node of base: it has an entry in pos */

    uint8_t canon_a[RDATA_CAP], canon_b[RDATA_CAP];
};

zone_delta_ixfr_t *zone_delta_ixfr_new(const zone_t *base)
{
    zone_delta_ixfr_t *x = malloc(sizeof(*x));
    if (!x)
        return NULL;
    memset(x, 0, offsetof(zone_delta_ixfr_t, canon_a)); /* not the scratch buffers */
    x->base = base;
    x->serial = base->src_serial; /* the source's: an UPDATE's steps continue it (zone.h) */
    if (getrandom(&x->seed, sizeof(x->seed), GRND_NONBLOCK) != (ssize_t)sizeof(x->seed))
        x->seed = tern_mix64((uint64_t)(uintptr_t)x); /* no entropy yet: at least not fixed */
    return x;
}

void zone_delta_ixfr_free(zone_delta_ixfr_t *x)
{
    if (!x)
        return;
    free(x->adds);
    free(x->heads);
    free(x->blob);
    free(x->pos);
    free(x->touched);
    free(x);
}

static uint64_t key_hash(const zone_delta_ixfr_t *x, const uint8_t *lc, size_t len, uint16_t type,
                         const uint8_t *canon, size_t rdlen)
{
    return tern_hash64(canon, rdlen, tern_hash64(lc, len, x->seed ^ type));
}

static uint64_t *pos_find(zone_delta_ixfr_t *x, uint64_t key, uint32_t **val)
{
    if (!x->pos)
        return NULL;
    for (size_t i = tern_mix64(key) & x->pos_mask;; i = (i + 1) & x->pos_mask) {
        if (x->pos[i].key == key) {
            if (val)
                *val = &x->pos[i].val;
            return &x->pos[i].key;
        }
        if (x->pos[i].key == POS_EMPTY)
            return NULL;
    }
}

static void pos_insert(struct pos_slot *slots, size_t mask, uint64_t key, uint32_t val)
{
    size_t i = tern_mix64(key) & mask;
    while (slots[i].key != POS_EMPTY)
        i = (i + 1) & mask;
    slots[i] = (struct pos_slot){key, val};
}

/* Put key (absent) with val; the set stays at most half full so probes stay short. */
static int pos_put(zone_delta_ixfr_t *x, uint64_t key, uint32_t val)
{
    if (!x->pos || (x->pos_count + 1) * 2 > x->pos_mask + 1) {
        size_t cap = x->pos ? (x->pos_mask + 1) * 2 : 64;
        struct pos_slot *s = malloc(cap * sizeof(*s));
        if (!s)
            return TERN_ENOMEM;
        for (size_t i = 0; i < cap; i++)
            s[i].key = POS_EMPTY;
        for (size_t i = 0; x->pos && i <= x->pos_mask; i++)
            if (x->pos[i].key != POS_EMPTY)
                pos_insert(s, cap - 1, x->pos[i].key, x->pos[i].val);
        free(x->pos);
        x->pos = s;
        x->pos_mask = cap - 1;
    }
    pos_insert(x->pos, x->pos_mask, key, val);
    x->pos_count++;
    return 0;
}

/* Mark node i of base as having entries in pos. */
static int touch(zone_delta_ixfr_t *x, size_t node)
{
    if (!x->touched && !(x->touched = calloc(x->base->node_count / 8 + 1, 1)))
        return TERN_ENOMEM;
    x->touched[node / 8] |= (uint8_t)(1u << (node % 8));
    return 0;
}

static bool touched(const zone_delta_ixfr_t *x, size_t node)
{
    return x->touched && (x->touched[node / 8] >> (node % 8) & 1);
}

/* The node and RRset index of (lc, type) in base; false when there is none. */
static bool base_rrset(const zone_delta_ixfr_t *x, const uint8_t *lc, size_t len, uint16_t type,
                       size_t *node, unsigned *set)
{
    uint32_t id = zone_find_index(x->base, lc, len, dname_hash(lc));
    if (!id)
        return false;
    const zone_node_t *n = zone_node_at(x->base, id - 1);
    for (unsigned j = 0; j < n->nrrsets; j++) {
        if (n->rrsets[j].type == type) {
            *node = id - 1;
            *set = j;
            return true;
        }
    }
    return false;
}

/* The position in base of the RR (lc, type, canonical RDATA canon), or POS_NONE. */
static uint64_t base_find(zone_delta_ixfr_t *x, const uint8_t *lc, size_t len, uint16_t type,
                          const uint8_t *canon, uint16_t rdlen)
{
    size_t node;
    unsigned set;
    if (!base_rrset(x, lc, len, type, &node, &set))
        return POS_NONE;
    const zone_rrset_t *s = &zone_node_at(x->base, (uint32_t)node)->rrsets[set];
    const uint8_t *p = s->rdata;
    for (unsigned k = 0; k < s->count; k++) {
        uint16_t l = tern_rd16(p);
        if (l == rdlen) {
            wire_rdata_canon(type, p + 2, l, x->canon_b);
            if (memcmp(x->canon_b, canon, l) == 0)
                return POS(node, set, k);
        }
        p += 2 + l;
    }
    return POS_NONE;
}

/* The live entry added for (lc, type, canon), or NULL. */
static struct add *adds_find(zone_delta_ixfr_t *x, uint64_t h, const uint8_t *lc, size_t len,
                             uint16_t type, const uint8_t *canon, uint16_t rdlen)
{
    if (!x->nbuckets)
        return NULL;
    for (uint32_t i = x->heads[h & (x->nbuckets - 1)]; i; i = x->adds[i - 1].next) {
        struct add *a = &x->adds[i - 1];
        if (a->hash != h || !a->live || a->type != type || a->rdlen != rdlen ||
            a->owner_len != len || memcmp(x->blob + a->off, lc, len) != 0)
            continue;
        wire_rdata_canon(type, x->blob + a->off + len, rdlen, x->canon_b);
        if (memcmp(x->canon_b, canon, rdlen) == 0)
            return a;
    }
    return NULL;
}

/* One bucket per entry: chains of one or two. */
static int adds_rehash(zone_delta_ixfr_t *x)
{
    size_t nb = x->nbuckets ? x->nbuckets * 2 : 64;
    uint32_t *heads = calloc(nb, sizeof(*heads));
    if (!heads)
        return TERN_ENOMEM;
    for (size_t i = 0; i < x->nadds; i++) {
        size_t bkt = x->adds[i].hash & (nb - 1);
        x->adds[i].next = heads[bkt];
        heads[bkt] = (uint32_t)(i + 1);
    }
    free(x->heads);
    x->heads = heads;
    x->nbuckets = nb;
    return 0;
}

static int adds_insert(zone_delta_ixfr_t *x, uint64_t h, const uint8_t *lc, size_t len,
                       uint16_t type, uint32_t ttl, const uint8_t *rdata, uint16_t rdlen)
{
    if (x->blob_len + len + rdlen > UINT32_MAX)
        return TERN_ELIMIT;
    if (tern_grow((void **)&x->adds, &x->adds_cap, x->nadds + 1, sizeof(*x->adds)) < 0 ||
        tern_grow((void **)&x->blob, &x->blob_cap, x->blob_len + len + rdlen, 1) < 0 ||
        (x->nadds + 1 > x->nbuckets && adds_rehash(x) < 0))
        return TERN_ENOMEM;
    struct add *a = &x->adds[x->nadds];
    *a = (struct add){.hash = h,
                      .off = (uint32_t)x->blob_len,
                      .ttl = ttl,
                      .type = type,
                      .rdlen = rdlen,
                      .owner_len = (uint8_t)len,
                      .live = 1};
    memcpy(x->blob + x->blob_len, lc, len);
    memcpy(x->blob + x->blob_len + len, rdata, rdlen);
    x->blob_len += len + rdlen;
    size_t bkt = h & (x->nbuckets - 1);
    a->next = x->heads[bkt];
    x->heads[bkt] = (uint32_t)++x->nadds;
    x->adds_live++;
    return 0;
}

/* Mark the RR of base at position p removed (it must not be already). */
static int remove_pos(zone_delta_ixfr_t *x, uint64_t p)
{
    if (pos_put(x, p, 0) < 0 || touch(x, (size_t)(p >> 24)) < 0)
        return TERN_ENOMEM;
    return 0;
}

int zone_delta_ixfr_begin(zone_delta_ixfr_t *x, uint32_t from, char *err, size_t errlen)
{
    if (x->state != IX_IDLE && x->state != IX_ADD) {
        tern_set_err(err, errlen, "a step starts before the last one's new SOA");
        return TERN_EINVAL;
    }
    if (from != x->serial) {
        tern_set_err(err, errlen, "a step starts at serial %u, the zone is at %u", from, x->serial);
        return TERN_EINVAL;
    }
    x->state = IX_DEL;
    return 0;
}

int zone_delta_ixfr_end(zone_delta_ixfr_t *x, uint32_t to)
{
    if (x->state != IX_DEL)
        return TERN_EINVAL;
    x->state = IX_ADD;
    x->serial = to;
    x->stepped = true;
    return 0;
}

/* "www.example.test. A 192.0.2.9": the RR through ldns, as the operator would write it. */
static void rr_text(zone_delta_ixfr_t *x, const uint8_t *owner, uint16_t type, const uint8_t *rdata,
                    uint16_t rdlen, char *out, size_t outlen)
{
    uint8_t *w = x->canon_b; /* free now; RDATA_CAP > DNAME_MAXLEN + 10 + UINT16_MAX */
    size_t n = dname_len(owner), pos = 0;
    memcpy(w, owner, n);
    const uint8_t fixed[10] = {(uint8_t)(type >> 8),  (uint8_t)type, 0, WIRE_CLASS_IN, 0, 0, 0, 0,
                               (uint8_t)(rdlen >> 8), (uint8_t)rdlen};
    memcpy(w + n, fixed, 10);
    memcpy(w + n + 10, rdata, rdlen);
    char nb[NAME_STR_MAX], tb[16];
    (void)dname_to_str(owner, nb, sizeof(nb));
    const ldns_rr_descriptor *d = ldns_rr_descript(type);
    if (type == WIRE_T_ANAME)
        snprintf(tb, sizeof(tb), "ANAME");
    else if (d && d->_type == type && d->_name)
        snprintf(tb, sizeof(tb), "%s", d->_name);
    else
        snprintf(tb, sizeof(tb), "TYPE%u", type);
    size_t o = (size_t)snprintf(out, outlen, "%s %s ", nb, tb);
    ldns_rr *lr = NULL;
    if (ldns_wire2rr(&lr, w, n + 10 + rdlen, &pos, LDNS_SECTION_ANSWER) != LDNS_STATUS_OK)
        return;
    for (size_t i = 0; i < ldns_rr_rd_count(lr) && o < outlen; i++) {
        char *s = ldns_rdf2str(ldns_rr_rdf(lr, i));
        if (s)
            o += (size_t)snprintf(out + o, outlen - o, "%s%s", i ? " " : "", s);
        free(s);
    }
    ldns_rr_free(lr);
}

/* One RR as the store keys it: the owner lowercased, the RDATA canonical (in x->canon_a). */
struct key {
    uint8_t lc[DNAME_MAXLEN];
    size_t len;
    uint16_t type, rdlen;
    uint64_t hash;
};

/* k made from the RR; returns the live entry an earlier step added for it, or NULL. */
static struct add *lookup(zone_delta_ixfr_t *x, struct key *k, const uint8_t *owner, uint16_t type,
                          const uint8_t *rdata, uint16_t rdlen)
{
    k->len = dname_lower(k->lc, owner);
    k->type = type;
    k->rdlen = rdlen;
    wire_rdata_canon(type, rdata, rdlen, x->canon_a);
    k->hash = key_hash(x, k->lc, k->len, type, x->canon_a, rdlen);
    return adds_find(x, k->hash, k->lc, k->len, type, x->canon_a, rdlen);
}

/* The position of k's RR in base when no step removed it yet, else POS_NONE. */
static uint64_t base_live(zone_delta_ixfr_t *x, const struct key *k)
{
    uint64_t p = base_find(x, k->lc, k->len, k->type, x->canon_a, k->rdlen);
    return p != POS_NONE && !pos_find(x, p, NULL) ? p : POS_NONE;
}

int zone_delta_ixfr_remove(zone_delta_ixfr_t *x, const uint8_t *owner, uint16_t type,
                           const uint8_t *rdata, uint16_t rdlen, char *err, size_t errlen)
{
    if (x->state != IX_DEL)
        return TERN_EINVAL;
    struct key k;
    struct add *a = lookup(x, &k, owner, type, rdata, rdlen);
    if (a) { /* from what an earlier step added */
        a->live = 0;
        x->adds_live--;
        return 0;
    }
    uint64_t p = base_live(x, &k);
    if (p != POS_NONE)
        return remove_pos(x, p);
    char rr[NAME_STR_MAX + 300] = "";
    rr_text(x, owner, type, rdata, rdlen, rr, sizeof(rr));
    tern_set_err(err, errlen, "a record that is not in the zone: %.*s", 256 + NAME_STR_MAX, rr);
    return TERN_ENOENT;
}

int zone_delta_ixfr_add(zone_delta_ixfr_t *x, const uint8_t *owner, uint16_t type, uint32_t ttl,
                        const uint8_t *rdata, uint16_t rdlen)
{
    if (x->state != IX_ADD)
        return TERN_EINVAL;
    struct key k;
    struct add *a = lookup(x, &k, owner, type, rdata, rdlen);
    if (a) {
        a->ttl = ttl;
        return 0;
    }
    /* base holds it (not removed): that copy goes, the added one (with its TTL) replaces it and
     * a later step's removal finds it among the additions */
    uint64_t p = base_live(x, &k);
    int rc;
    if (p != POS_NONE && (rc = remove_pos(x, p)) < 0)
        return rc;
    rc = adds_insert(x, k.hash, k.lc, k.len, type, ttl, rdata, rdlen);
    return rc < 0 ? rc : 1;
}

size_t zone_delta_ixfr_added(const zone_delta_ixfr_t *x)
{
    return x->adds_live;
}

/* Each RRset of base some step adds to takes the lowest TTL of the RRs added to it. Once. */
static int ttl_overrides(zone_delta_ixfr_t *x)
{
    if (x->overrides)
        return 0;
    for (size_t i = 0; i < x->nadds; i++) {
        const struct add *a = &x->adds[i];
        size_t node;
        unsigned set;
        if (!a->live || !base_rrset(x, x->blob + a->off, a->owner_len, a->type, &node, &set))
            continue;
        uint32_t *v;
        uint64_t key = POS(node, set, POS_TTL);
        if (pos_find(x, key, &v)) {
            if (a->ttl < *v)
                *v = a->ttl;
        } else if (pos_put(x, key, a->ttl) < 0 || touch(x, node) < 0) {
            return TERN_ENOMEM;
        }
    }
    x->overrides = true;
    return 0;
}

/* Node i of base as the steps leave it into b: its RRs not removed, with their TTL overrides;
 * not the apex SOA (the new one replaces it). */
static int feed_node(zone_delta_ixfr_t *x, size_t i, zone_builder_t *b)
{
    const zone_t *h = x->base;
    const zone_node_t *n = zone_node_at(h, (uint32_t)i);
    bool t = touched(x, i);
    int rc;
    for (unsigned j = 0; j < n->nrrsets; j++) {
        const zone_rrset_t *s = &n->rrsets[j];
        if (s->type == WIRE_T_SOA && n == h->apex_node)
            continue;
        uint32_t ttl = s->ttl, *v;
        if (t && pos_find(x, POS(i, j, POS_TTL), &v))
            ttl = *v;
        const uint8_t *p = s->rdata;
        for (unsigned k = 0; k < s->count; k++) {
            uint16_t l = tern_rd16(p);
            if ((!t || !pos_find(x, POS(i, j, k), NULL)) &&
                (rc = zone_builder_add(b, n->name, s->type, WIRE_CLASS_IN, ttl, p + 2, l, NULL,
                                       0)) < 0)
                return rc;
            p += 2 + l;
        }
    }
    return 0;
}

/* The new SOA, then every RR added and not removed again, into b. */
static int feed_adds(zone_delta_ixfr_t *x, uint32_t ttl, const uint8_t *soa, uint16_t soa_len,
                     zone_builder_t *b)
{
    int rc =
        zone_builder_add(b, x->base->apex, WIRE_T_SOA, WIRE_CLASS_IN, ttl, soa, soa_len, NULL, 0);
    for (size_t i = 0; rc >= 0 && i < x->nadds; i++) {
        const struct add *a = &x->adds[i];
        if (a->live)
            rc = zone_builder_add(b, x->blob + a->off, a->type, WIRE_CLASS_IN, a->ttl,
                                  x->blob + a->off + a->owner_len, a->rdlen, NULL, 0);
    }
    return rc < 0 ? rc : 0;
}

int zone_delta_ixfr_build(zone_delta_ixfr_t *x, uint32_t ttl, const uint8_t *soa, uint16_t soa_len,
                          zone_builder_t *b)
{
    int rc = ttl_overrides(x);
    if (rc < 0)
        return rc;
    zone_builder_expect(b, x->base->rr_count + x->adds_live);
    for (size_t i = 0; i < x->base->node_count; i++)
        if ((rc = feed_node(x, i, b)) < 0)
            return rc;
    return feed_adds(x, ttl, soa, soa_len, b);
}

/* The names the steps touched: the base's nodes with removed RRs or TTL overrides, the apex, and
 * every owner an RR was added at (live or not: a name whose data came back as it was only costs
 * a compare). Pointers into base and the blob, into *out (malloc'd), *n of them. */
static int touched_names(zone_delta_ixfr_t *x, const uint8_t ***out, size_t *n)
{
    size_t cap = 1 + x->nadds, k = 0;
    for (size_t i = 0; x->touched && i < x->base->node_count; i++)
        cap += touched(x, i);
    const uint8_t **v = malloc(cap * sizeof(*v));
    if (!v)
        return TERN_ENOMEM;
    v[k++] = x->base->apex;
    for (size_t i = 0; x->touched && i < x->base->node_count; i++)
        if (touched(x, i))
            v[k++] = zone_node_at(x->base, (uint32_t)i)->name;
    for (size_t i = 0; i < x->nadds; i++)
        v[k++] = x->blob + x->adds[i].off;
    *out = v;
    *n = k;
    return 0;
}

/* The partial zone of the touched names as the steps leave them, and the apex. */
static int build_fresh(zone_delta_ixfr_t *x, uint32_t ttl, const uint8_t *soa, uint16_t soa_len,
                       zone_builder_t *b)
{
    int rc = feed_node(x, 0, b); /* the apex, which is node 0 */
    for (size_t i = 1; rc >= 0 && x->touched && i < x->base->node_count; i++)
        if (touched(x, i))
            rc = feed_node(x, i, b);
    /* the names RRs were added at hold base's RRs too, where base has that name untouched */
    for (size_t i = 0; rc >= 0 && i < x->nadds; i++) {
        const uint8_t *nm = x->blob + x->adds[i].off;
        uint32_t id = zone_find_index(x->base, nm, x->adds[i].owner_len, dname_hash(nm));
        if (id > 1 && !touched(x, id - 1)) {
            rc = feed_node(x, id - 1, b);
            if (rc >= 0 && touch(x, id - 1) < 0) /* fed once: a touched node is fed above */
                rc = TERN_ENOMEM;
        }
    }
    return rc < 0 ? rc : feed_adds(x, ttl, soa, soa_len, b);
}

int zone_delta_ixfr_finish(zone_delta_ixfr_t *x, uint32_t ttl, const uint8_t *soa, uint16_t soa_len,
                           const char *source, zone_delta_t **out, char *err, size_t errlen)
{
    *out = NULL;
    if (!x->stepped || x->state != IX_ADD) {
        tern_set_err(err, errlen, "no complete IXFR step to apply");
        return TERN_EINVAL;
    }
    zone_builder_t *b = zone_builder_new(x->base->apex, source);
    const uint8_t **names = NULL;
    zone_t *fresh = NULL;
    size_t n = 0;
    int rc = b ? ttl_overrides(x) : TERN_ENOMEM;
    if (rc == 0 && (rc = build_fresh(x, ttl, soa, soa_len, b)) < 0)
        tern_set_err(err, errlen, "%s", zone_builder_error(b));
    if (rc == 0) {
        rc = zone_builder_finish(b, &fresh, err, errlen);
        b = NULL;
    }
    if (rc == 0 && (rc = touched_names(x, &names, &n)) == 0 &&
        !(*out = zone_delta_new(x->base, fresh, names, n)))
        rc = TERN_ENOMEM;
    if (rc == TERN_ENOMEM)
        tern_set_err(err, errlen, "out of memory");
    free(names);
    zone_free(fresh);
    zone_builder_free(b);
    return rc;
}
