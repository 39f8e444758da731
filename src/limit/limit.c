/*
 * limit.c — the policy and its query-side decisions (see limit.h).
 *
 * Decisions, and why:
 *   - Prefix lists become sorted, merged ranges (IPv4 as 32-bit, IPv6 as 128-bit integers):
 *     one binary search per list, whatever the list's length or nesting.
 *   - Rate buckets are found by a 64-bit hash of the key in four slots of one cache line; an
 *     unknown key takes an empty slot, else the one whose TAT is furthest in the past (its client
 *     has been quiet longest, so forgetting it forgives the least). A key collision of 64 bits
 *     merges two clients' budgets: negligible.
 *   - The TAT is updated with compare-and-swap, a few tries at most: under a flood from one
 *     client every worker hits the same bucket, and a lost race means the event is judged again
 *     against the newer state, not counted twice.
 *   - Slip counts per worker (every slip-th limited response of this worker): per bucket would
 *     cost a word of shared state per bucket for the same average.
 */
#include "tern/limit/limit.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>

#include "limit_int.h"
#include "tern/common/err.h"
#include "tern/common/hash.h"
#include "tern/common/log.h"
#include "tern/wire/dname.h"

/* Slots of the TCP connection count table: far more than any pool's connections, so two
 * clients rarely share a count (if they do, they share the cap: conservative). */
#define TCP_COUNT_SLOTS 65536u

/* How long a worker does not report a limited prefix again, and how many CAS tries a bucket
 * update gets before the event is allowed anyway. */
#define REPORT_AGAIN_US (10 * 1000000)
#define CAS_TRIES       4

/* ---- prefix sets ------------------------------------------------------------------------- */

static unsigned __int128 u128(const uint8_t *a)
{
    unsigned __int128 v = 0;
    for (int i = 0; i < 16; i++)
        v = v << 8 | a[i];
    return v;
}

static uint32_t u32(const uint8_t *a)
{
    return (uint32_t)a[0] << 24 | (uint32_t)a[1] << 16 | (uint32_t)a[2] << 8 | a[3];
}

static int cmp4(const void *a, const void *b)
{
    const range4_t *x = a, *y = b;
    return x->lo < y->lo ? -1 : x->lo > y->lo;
}

static int cmp6(const void *a, const void *b)
{
    const range6_t *x = a, *y = b;
    return x->lo < y->lo ? -1 : x->lo > y->lo;
}

static void pset_free(pset_t *s)
{
    free(s->r4);
    free(s->r6);
    memset(s, 0, sizeof(*s));
}

static int pset_build(pset_t *s, const config_prefix_list_t *l)
{
    memset(s, 0, sizeof(*s));
    if (l->n == 0)
        return 0;
    s->r4 = calloc(l->n, sizeof(*s->r4));
    s->r6 = calloc(l->n, sizeof(*s->r6));
    if (!s->r4 || !s->r6) {
        pset_free(s);
        return TERN_ENOMEM;
    }
    for (size_t i = 0; i < l->n; i++) {
        const config_prefix_t *p = &l->p[i];
        if (p->family == 4) {
            uint32_t lo = u32(p->addr);
            uint32_t span = p->len == 0 ? UINT32_MAX : (uint32_t)((1ull << (32 - p->len)) - 1);
            s->r4[s->n4++] = (range4_t){lo, lo | span};
        } else {
            unsigned __int128 lo = u128(p->addr);
            unsigned __int128 span = p->len == 0 ? ~(unsigned __int128)0
                                                 : (((unsigned __int128)1) << (128 - p->len)) - 1;
            s->r6[s->n6++] = (range6_t){lo, lo | span};
        }
    }
    /* sort and merge overlapping or adjacent ranges */
    qsort(s->r4, s->n4, sizeof(*s->r4), cmp4);
    size_t k = 0;
    for (size_t i = 0; i < s->n4; i++) {
        if (k && (uint64_t)s->r4[i].lo <= (uint64_t)s->r4[k - 1].hi + 1) {
            if (s->r4[i].hi > s->r4[k - 1].hi)
                s->r4[k - 1].hi = s->r4[i].hi;
        } else {
            s->r4[k++] = s->r4[i];
        }
    }
    s->n4 = k;
    qsort(s->r6, s->n6, sizeof(*s->r6), cmp6);
    k = 0;
    for (size_t i = 0; i < s->n6; i++) {
        if (k && (s->r6[k - 1].hi == ~(unsigned __int128)0 || s->r6[i].lo <= s->r6[k - 1].hi + 1)) {
            if (s->r6[i].hi > s->r6[k - 1].hi)
                s->r6[k - 1].hi = s->r6[i].hi;
        } else {
            s->r6[k++] = s->r6[i];
        }
    }
    s->n6 = k;
    return 0;
}

bool pset_has(const pset_t *s, const limit_client_t *c)
{
    if (c->family == 4) {
        uint32_t x = u32(c->addr);
        size_t lo = 0, hi = s->n4;
        while (lo < hi) { /* the first range starting above x */
            size_t mid = lo + (hi - lo) / 2;
            if (s->r4[mid].lo <= x)
                lo = mid + 1;
            else
                hi = mid;
        }
        return lo > 0 && x <= s->r4[lo - 1].hi;
    }
    if (c->family == 6) {
        unsigned __int128 x = u128(c->addr);
        size_t lo = 0, hi = s->n6;
        while (lo < hi) {
            size_t mid = lo + (hi - lo) / 2;
            if (s->r6[mid].lo <= x)
                lo = mid + 1;
            else
                hi = mid;
        }
        return lo > 0 && x <= s->r6[lo - 1].hi;
    }
    return false;
}

static bool pset_empty(const pset_t *s)
{
    return s->n4 == 0 && s->n6 == 0;
}

/* ---- access lists ------------------------------------------------------------------------ */

static void acl_free(acl_t *a)
{
    pset_free(&a->allow);
    pset_free(&a->deny);
}

static int acl_build(acl_t *a, const config_acl_t *c)
{
    memset(a, 0, sizeof(*a));
    if (pset_build(&a->allow, &c->allow) < 0 || pset_build(&a->deny, &c->deny) < 0) {
        acl_free(a);
        return TERN_ENOMEM;
    }
    a->has_allow = c->allow.n > 0;
    a->action = (uint8_t)c->action;
    return 0;
}

static limit_verdict_t acl_check(const acl_t *a, const limit_client_t *c)
{
    if (pset_has(&a->deny, c) || (a->has_allow && !pset_has(&a->allow, c)))
        return a->action == CONFIG_LIMIT_DROP ? LIMIT_DROP : LIMIT_REFUSE;
    return LIMIT_PASS;
}

/* ---- rate tables --------------------------------------------------------------------------- */

static gtable_t *gtable_new(size_t size)
{
    size_t n = GSLOT_WAYS;
    while (n < size)
        n *= 2;
    gtable_t *t = calloc(1, sizeof(*t));
    if (!t)
        return NULL;
    t->slots = aligned_alloc(64, n * sizeof(gslot_t));
    if (!t->slots) {
        free(t);
        return NULL;
    }
    memset(t->slots, 0, n * sizeof(gslot_t));
    t->mask = n - 1;
    t->size = size;
    return t;
}

static void gtable_free(gtable_t *t)
{
    if (t) {
        free(t->slots);
        free(t);
    }
}

/* The bucket of key k (k != 0), taking one if k has none. */
static gslot_t *gtable_slot(gtable_t *t, uint64_t k, int64_t now)
{
    gslot_t *line = &t->slots[(k & t->mask) & ~(uint64_t)(GSLOT_WAYS - 1)];
    gslot_t *victim = NULL;
    uint64_t oldest = UINT64_MAX;
    for (unsigned i = 0; i < GSLOT_WAYS; i++) {
        uint64_t key = __atomic_load_n(&line[i].key, __ATOMIC_ACQUIRE);
        if (key == k)
            return &line[i];
        uint64_t tat = __atomic_load_n(&line[i].tat, __ATOMIC_RELAXED);
        if (key == 0)
            tat = 0; /* an empty slot is the best victim */
        if (tat < oldest) {
            oldest = tat;
            victim = &line[i];
        }
    }
    /* Take the victim: its TAT first (an allowed-at-once state, in the past), then the key. A
     * worker reading in between may judge its old key by our fresh state: a limiter's error. */
    uint64_t old = __atomic_load_n(&victim->key, __ATOMIC_RELAXED);
    __atomic_store_n(&victim->tat, (uint64_t)(now > 0 ? now : 0), __ATOMIC_RELAXED);
    (void)__atomic_compare_exchange_n(&victim->key, &old, k, false, __ATOMIC_RELEASE,
                                      __ATOMIC_RELAXED);
    return victim;
}

/* One event of key k at now against interval T and tolerance tau: true when allowed. */
static bool gcra(gtable_t *t, uint64_t k, int64_t now, uint64_t T, uint64_t tau)
{
    gslot_t *s = gtable_slot(t, k ? k : 1, now);
    uint64_t n = (uint64_t)(now > 0 ? now : 0);
    for (unsigned i = 0; i < CAS_TRIES; i++) {
        uint64_t tat = __atomic_load_n(&s->tat, __ATOMIC_RELAXED);
        uint64_t base = tat > n ? tat : n;
        if (base - n > tau)
            return false;
        if (__atomic_compare_exchange_n(&s->tat, &tat, base + T, false, __ATOMIC_RELAXED,
                                        __ATOMIC_RELAXED))
            return true;
    }
    return true; /* contended beyond reason: let it pass rather than spin on the query path */
}

/* gcra() without the event: whether one at now would be allowed, nothing written (no bucket
 * taken, no TAT moved). For `ternctl explain`, which must not charge the client it explains. */
static bool gcra_peek(const gtable_t *t, uint64_t k, int64_t now, uint64_t tau)
{
    k = k ? k : 1;
    const gslot_t *line = &t->slots[(k & t->mask) & ~(uint64_t)(GSLOT_WAYS - 1)];
    uint64_t n = (uint64_t)(now > 0 ? now : 0);
    for (unsigned i = 0; i < GSLOT_WAYS; i++) {
        if (__atomic_load_n(&line[i].key, __ATOMIC_ACQUIRE) != k)
            continue;
        uint64_t tat = __atomic_load_n(&line[i].tat, __ATOMIC_RELAXED);
        uint64_t base = tat > n ? tat : n;
        return base - n <= tau;
    }
    return true; /* no bucket: a first event is always allowed */
}

/* ---- the policy ---------------------------------------------------------------------------- */

void limit_client_of(limit_client_t *c, const struct sockaddr *src)
{
    static const uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF};
    memset(c, 0, sizeof(*c));
    if (src && src->sa_family == AF_INET) {
        c->family = 4;
        memcpy(c->addr, &((const struct sockaddr_in *)src)->sin_addr, 4);
    } else if (src && src->sa_family == AF_INET6) {
        const uint8_t *a = ((const struct sockaddr_in6 *)src)->sin6_addr.s6_addr;
        if (memcmp(a, mapped, 12) == 0) {
            c->family = 4;
            memcpy(c->addr, a + 12, 4);
        } else {
            c->family = 6;
            memcpy(c->addr, a, 16);
        }
    }
}

static void zacl_free(limit_t *l)
{
    if (!l->zacl)
        return;
    for (uint32_t i = 0; i <= l->zmask; i++)
        if (l->zacl[i].len)
            acl_free(&l->zacl[i].acl);
    free(l->zacl);
    l->zacl = NULL;
}

void limit_free(limit_t *l)
{
    if (!l)
        return;
    acl_free(&l->acl);
    zacl_free(l);
    pset_free(&l->rl_white);
    pset_free(&l->rl_black);
    pset_free(&l->rrl_white);
    free(l);
}

/* The zone origin as a lowercased wire name (len bytes); false when it does not parse (the
 * loader refuses such a zone anyway). */
static bool apex_of(const char *origin, uint8_t *out, uint8_t *len)
{
    uint8_t wire[DNAME_MAXLEN];
    const char *why;
    int n = dname_from_str(origin, strlen(origin), false, wire, &why);
    if (n < 0)
        return false;
    *len = (uint8_t)dname_lower(out, wire);
    return true;
}

static int zacl_build(limit_t *l, const limit_settings_t *set)
{
    size_t n = set->nzones;
    if (n == 0)
        return 0;
    uint32_t slots = 4;
    while (slots < 2 * n)
        slots *= 2;
    if (!(l->zacl = calloc(slots, sizeof(*l->zacl))))
        return TERN_ENOMEM;
    l->zmask = slots - 1;
    for (size_t i = 0; i < set->nzones; i++) {
        const limit_zone_acl_t *z = &set->zones[i];
        uint8_t apex[256], len;
        if (!z->acl->enabled || !apex_of(z->origin, apex, &len))
            continue;
        uint32_t h = dname_hash(apex);
        uint32_t k = h & l->zmask;
        while (l->zacl[k].len &&
               !(l->zacl[k].len == len && memcmp(l->zacl[k].apex, apex, len) == 0))
            k = (k + 1) & l->zmask;
        if (l->zacl[k].len)
            continue; /* the same zone twice: the zone table refuses it anyway */
        zacl_t *e = &l->zacl[k];
        memcpy(e->apex, apex, len);
        e->len = len;
        e->hash = h;
        if (acl_build(&e->acl, z->acl) < 0) {
            e->len = 0;
            return TERN_ENOMEM;
        }
    }
    return 0;
}

/* The shared table at *slot, made of `size` buckets the first time; a later size is noted. */
static int ensure_table(limit_shared_t *sh, gtable_t **slot, size_t size, const char *what)
{
    if (*slot) {
        if ((*slot)->size != size)
            log_warn("%s: table_size %zu applies on restart; %zu buckets are in use", what, size,
                     (*slot)->size);
        return 0;
    }
    gtable_t *t = gtable_new(size);
    if (!t)
        return TERN_ENOMEM;
    pthread_mutex_lock(&sh->mu);
    *slot = t;
    pthread_mutex_unlock(&sh->mu);
    return 0;
}

limit_t *limit_new(limit_shared_t *sh, const limit_settings_t *set, int *rc)
{
    *rc = 0;
    bool zones = set->nzones > 0;
    if (sh)
        sh->rrl_log = set->rrl->enabled && set->rrl->log;
    if (!set->acl->enabled && !zones && !set->ratelimit->enabled && !set->rrl->enabled &&
        !set->cookies->enabled)
        return NULL;
    limit_t *l = calloc(1, sizeof(*l));
    if (!l)
        goto nomem;
    l->sh = sh;
    if (set->acl->enabled) {
        if (acl_build(&l->acl, set->acl) < 0)
            goto nomem;
        l->acl_on = true;
    }
    if (zacl_build(l, set) < 0)
        goto nomem;
    const config_ratelimit_t *rl = set->ratelimit;
    if (rl->enabled && rl->rate > 0) {
        if (pset_build(&l->rl_white, &rl->whitelist) < 0 ||
            pset_build(&l->rl_black, &rl->blacklist) < 0 ||
            ensure_table(sh, &sh->rl, rl->table_size ? rl->table_size : 65536, "ratelimit") < 0)
            goto nomem;
        l->rl_on = true;
        l->rl_T = 60000000ull / rl->rate; /* redins: TimeStep = 60000 ms / rate */
        l->rl_tau = l->rl_T * rl->burst;  /* redins: MaxTime = TimeStep x burst */
        l->rl_action = (uint8_t)rl->action;
        l->rl_black_action = (uint8_t)rl->blacklist_action;
    }
    const config_rrl_t *rr = set->rrl;
    if (rr->enabled && rr->rate > 0) {
        if (pset_build(&l->rrl_white, &rr->whitelist) < 0 ||
            ensure_table(sh, &sh->rrl, rr->table_size ? rr->table_size : 262144, "rrl") < 0)
            goto nomem;
        unsigned burst = rr->burst ? rr->burst : rr->rate;
        l->rrl_on = true;
        l->rrl_T = 1000000ull / rr->rate;
        l->rrl_tau = l->rrl_T * (burst - 1);
        l->slip = rr->slip;
        l->pfx4 = (uint8_t)(rr->prefix_v4 ? rr->prefix_v4 : 24);
        l->pfx6 = (uint8_t)(rr->prefix_v6 ? rr->prefix_v6 : 56);
    }
    if (set->cookies->enabled) {
        if ((*rc = limit_shared_cookies(sh, set->cookies)) < 0) {
            limit_free(l);
            return NULL;
        }
        l->ck_on = true;
        l->ck_require = set->cookies->require;
    }
    return l;
nomem:
    limit_free(l);
    *rc = TERN_ENOMEM;
    return NULL;
}

/* ---- query-side decisions ------------------------------------------------------------------- */

/* limit_client() and limit_client_dry(): the rate charged, or only looked at (dry). */
static limit_verdict_t client_judge(const limit_t *l, const limit_client_t *c, int64_t now_us,
                                    limit_why_t *why, bool dry)
{
    *why = LIMIT_WHY_NONE;
    if (!l || c->family == 0)
        return LIMIT_PASS;
    if (l->acl_on) {
        limit_verdict_t v = acl_check(&l->acl, c);
        if (v != LIMIT_PASS) {
            *why = LIMIT_WHY_ACL;
            return v;
        }
    }
    if (!l->rl_on)
        return LIMIT_PASS;
    /* redins: the blacklist first, then the whitelist, then the rate */
    if (pset_has(&l->rl_black, c)) {
        *why = LIMIT_WHY_BLACKLIST;
        return l->rl_black_action == CONFIG_LIMIT_DROP ? LIMIT_DROP : LIMIT_REFUSE;
    }
    if (pset_has(&l->rl_white, c))
        return LIMIT_PASS;
    uint64_t k = tern_hash64(c->addr, c->family == 4 ? 4 : 16, 0x726c ^ c->family);
    if (dry ? gcra_peek(l->sh->rl, k, now_us, l->rl_tau)
            : gcra(l->sh->rl, k, now_us, l->rl_T, l->rl_tau))
        return LIMIT_PASS;
    *why = LIMIT_WHY_RATE;
    return l->rl_action == CONFIG_LIMIT_DROP ? LIMIT_DROP : LIMIT_REFUSE;
}

limit_verdict_t limit_client(const limit_t *l, const limit_client_t *c, int64_t now_us,
                             limit_why_t *why)
{
    return client_judge(l, c, now_us, why, false);
}

limit_verdict_t limit_client_dry(const limit_t *l, const limit_client_t *c, int64_t now_us,
                                 limit_why_t *why)
{
    return client_judge(l, c, now_us, why, true);
}

limit_verdict_t limit_zone(const limit_t *l, const uint8_t *apex, uint32_t apex_hash,
                           const limit_client_t *c)
{
    if (!l || !l->zacl || c->family == 0)
        return LIMIT_PASS;
    for (uint32_t k = apex_hash & l->zmask; l->zacl[k].len; k = (k + 1) & l->zmask) {
        const zacl_t *e = &l->zacl[k];
        if (e->hash == apex_hash && memcmp(e->apex, apex, e->len) == 0)
            return acl_check(&e->acl, c);
    }
    return LIMIT_PASS;
}

const char *limit_acl_rule(const limit_t *l, const limit_client_t *c, const uint8_t *apex,
                           uint32_t apex_hash)
{
    const acl_t *a = NULL;
    if (l && !apex && l->acl_on)
        a = &l->acl;
    for (uint32_t k = apex_hash & l->zmask; l && apex && l->zacl && l->zacl[k].len;
         k = (k + 1) & l->zmask)
        if (l->zacl[k].hash == apex_hash && memcmp(l->zacl[k].apex, apex, l->zacl[k].len) == 0)
            a = &l->zacl[k].acl;
    if (!a || c->family == 0)
        return NULL;
    if (pset_has(&a->deny, c))
        return "the client is in its deny list";
    if (a->has_allow && !pset_has(&a->allow, c))
        return "the client is not in its allow list";
    return NULL;
}

bool limit_rrl_applies(const limit_t *l, const limit_client_t *c)
{
    return l && l->rrl_on && c->family != 0 &&
           (pset_empty(&l->rrl_white) || !pset_has(&l->rrl_white, c));
}

/* The client's address cut to the RRL prefix, in a key with the family and length. */
static uint64_t prefix_key(const limit_client_t *c, unsigned len, uint8_t *masked)
{
    unsigned n = c->family == 4 ? 4 : 16;
    memset(masked, 0, 16);
    memcpy(masked, c->addr, (len + 7) / 8);
    if (len % 8)
        masked[len / 8] &= (uint8_t)(0xFF << (8 - len % 8));
    return tern_hash64(masked, n, (uint64_t)c->family << 8 | len);
}

/* Put a newly limited prefix in the worker's ring (once per REPORT_AGAIN_US per prefix). */
static void report(const limit_t *l, limit_worker_t *w, uint64_t pk, const limit_client_t *c,
                   const uint8_t *masked, unsigned len, limit_class_t cls, int64_t now)
{
    for (unsigned i = 0; i < 8; i++)
        if (w->reported[i] == pk && now - w->reported_at[i] < REPORT_AGAIN_US)
            return;
    unsigned slot = w->next_report++ % 8;
    w->reported[slot] = pk;
    w->reported_at[slot] = now;
    ring_t *r = limit_ring(l->sh, w->id);
    if (!r)
        return;
    uint32_t head = r->head, tail = __atomic_load_n(&r->tail, __ATOMIC_ACQUIRE);
    if (head - tail >= RING_SIZE) {
        __atomic_fetch_add(&r->dropped, 1, __ATOMIC_RELAXED);
        return;
    }
    ring_rec_t *rec = &r->rec[head % RING_SIZE];
    rec->family = c->family;
    rec->len = (uint8_t)len;
    rec->cls = (uint8_t)cls;
    memcpy(rec->addr, masked, 16);
    __atomic_store_n(&r->head, head + 1, __ATOMIC_RELEASE);
}

/* The RRL bucket key of a response: what makes two responses the same is the client prefix
 * (key pk), the class and its name (and the type, for answers); errors by prefix alone. */
static uint64_t rrl_key(uint64_t pk, limit_class_t cls, uint32_t name_hash, uint16_t qtype)
{
    if (cls == LIMIT_RC_ERROR)
        return tern_mix64(pk ^ ((uint64_t)cls << 56));
    return tern_mix64(pk ^ ((uint64_t)cls << 56) ^ ((uint64_t)name_hash << 16) ^
                      (cls == LIMIT_RC_ANSWER ? qtype : 0));
}

void limit_rrl_prefetch(const limit_t *l, const limit_client_t *c, uint32_t name_hash,
                        uint16_t qtype)
{
    uint8_t masked[16];
    uint64_t pk = prefix_key(c, c->family == 4 ? l->pfx4 : l->pfx6, masked);
    uint64_t k = rrl_key(pk, LIMIT_RC_ANSWER, name_hash, qtype);
    const gtable_t *t = l->sh->rrl;
    __builtin_prefetch(&t->slots[(k & t->mask) & ~(uint64_t)(GSLOT_WAYS - 1)], 1, 3);
}

limit_verdict_t limit_rrl(const limit_t *l, limit_worker_t *w, const limit_client_t *c,
                          limit_class_t cls, uint32_t name_hash, uint16_t qtype, int64_t now_us)
{
    uint8_t masked[16];
    unsigned len = c->family == 4 ? l->pfx4 : l->pfx6;
    uint64_t pk = prefix_key(c, len, masked);
    uint64_t k = rrl_key(pk, cls, name_hash, qtype);
    if (gcra(l->sh->rrl, k, now_us, l->rrl_T, l->rrl_tau))
        return LIMIT_PASS;
    if (l->sh->rrl_log)
        report(l, w, pk, c, masked, len, cls, now_us);
    w->limited++;
    return l->slip && w->limited % l->slip == 0 ? LIMIT_SLIP : LIMIT_DROP;
}

limit_verdict_t limit_rrl_dry(const limit_t *l, const limit_client_t *c, limit_class_t cls,
                              uint32_t name_hash, uint16_t qtype, int64_t now_us)
{
    uint8_t masked[16];
    uint64_t pk = prefix_key(c, c->family == 4 ? l->pfx4 : l->pfx6, masked);
    uint64_t k = rrl_key(pk, cls, name_hash, qtype);
    return gcra_peek(l->sh->rrl, k, now_us, l->rrl_tau) ? LIMIT_PASS : LIMIT_DROP;
}

bool limit_cookies(const limit_t *l)
{
    return l && l->ck_on;
}

bool limit_cookies_required(const limit_t *l)
{
    return l && l->ck_on && l->ck_require;
}

/* ---- TCP ------------------------------------------------------------------------------------ */

void limit_shared_set_tcp(limit_shared_t *sh, unsigned cap, unsigned prefix_v4, unsigned prefix_v6)
{
    sh->tcp_cap = cap;
    sh->tcp_pfx4 = prefix_v4 ? prefix_v4 : 32;
    sh->tcp_pfx6 = prefix_v6 ? prefix_v6 : 64;
}

static uint32_t *tcp_count(limit_shared_t *sh, const limit_client_t *c)
{
    uint8_t masked[16];
    uint64_t k = prefix_key(c, c->family == 4 ? sh->tcp_pfx4 : sh->tcp_pfx6, masked);
    return &sh->tcp[k & sh->tcp_mask];
}

bool limit_tcp_acquire(limit_shared_t *sh, const limit_client_t *c)
{
    if (!sh || !sh->tcp_cap || !sh->tcp || c->family == 0)
        return true;
    uint32_t *n = tcp_count(sh, c);
    if (__atomic_add_fetch(n, 1, __ATOMIC_RELAXED) <= sh->tcp_cap)
        return true;
    __atomic_sub_fetch(n, 1, __ATOMIC_RELAXED);
    return false;
}

void limit_tcp_release(limit_shared_t *sh, const limit_client_t *c)
{
    if (!sh || !sh->tcp_cap || !sh->tcp || c->family == 0)
        return;
    __atomic_sub_fetch(tcp_count(sh, c), 1, __ATOMIC_RELAXED);
}

/* ---- the shared state ------------------------------------------------------------------------ */

limit_shared_t *limit_shared_alloc(unsigned workers)
{
    limit_shared_t *sh = calloc(1, sizeof(*sh));
    if (!sh)
        return NULL;
    sh->evfd = -1;
    pthread_mutex_init(&sh->mu, NULL);
    sh->tcp = calloc(TCP_COUNT_SLOTS, sizeof(*sh->tcp));
    sh->tcp_mask = TCP_COUNT_SLOTS - 1;
    sh->nrings = workers ? workers : 1;
    sh->rings = aligned_alloc(64, sh->nrings * sizeof(ring_t));
    if (!sh->tcp || !sh->rings) {
        free(sh->tcp);
        free(sh->rings);
        pthread_mutex_destroy(&sh->mu);
        free(sh);
        return NULL;
    }
    memset(sh->rings, 0, sh->nrings * sizeof(ring_t));
    sh->tcp_pfx4 = 32;
    sh->tcp_pfx6 = 64;
    return sh;
}

void limit_shared_release_tables(limit_shared_t *sh)
{
    gtable_free(sh->rl);
    gtable_free(sh->rrl);
    free(sh->tcp);
    free(sh->rings);
    free(sh->secrets);
    pthread_mutex_destroy(&sh->mu);
}
