/*
 * dnssec_kasp.c — see dnssec_kasp.h. The key-state machine: each key's next event is computed
 * from its timestamps and the policy (key_next()); a step applies the earliest due event, again
 * and again, until none is due at now; the plan is then read off the timestamps (plan_fill()).
 * Nothing is scheduled in a stored field, so a changed policy or a restart needs no migration.
 */
#include "tern/dnssec/dnssec_kasp.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dnssec_kasp_int.h"
#include "tern/common/buf.h"
#include "tern/common/err.h"
#include "tern/dnssec/dnssec_key.h"

/* Thirty days: Knot's zsk-lifetime default (a ZSK's signatures are exposed to offline attack;
 * a month is the usual rotation and keeps the removed-key history short). */
#define ZSK_LIFETIME_DEFAULT (30 * 86400)
/* RFC 2181 §8: a TTL is at most 2^31 - 1. */
#define TTL_MAX 2147483647LL
/* A lifetime or delay beyond a century is a typo (and keeps every sum far from overflow). */
#define SPAN_MAX (100LL * 365 * 86400)

void dnssec_kasp_policy_default(dnssec_kasp_policy_t *pol)
{
    *pol = (dnssec_kasp_policy_t){
        .algorithm = DNSSEC_ALG_ECDSAP256SHA256,
        .csk = false,
        .rsa_bits = 2048,
        .ksk_lifetime = 0,
        .zsk_lifetime = ZSK_LIFETIME_DEFAULT,
        .propagation_delay = 3600,
        .dnskey_ttl = 3600,
        .zone_max_ttl = 86400,
        .parent_ds_ttl = 86400,
        .cds_digest = 2,
        .publish_cds = true,
    };
}

static int64_t max64(int64_t a, int64_t b)
{
    return a > b ? a : b;
}

int dnssec_kasp_policy_check(const dnssec_kasp_policy_t *pol, char *err, size_t errlen)
{
    uint8_t a = pol->algorithm;
    if (a != DNSSEC_ALG_RSASHA256 && a != DNSSEC_ALG_ECDSAP256SHA256 && a != DNSSEC_ALG_ED25519) {
        tern_set_err(err, errlen, "algorithm %u is not supported: use 8, 13 or 15", a);
        return TERN_EINVAL;
    }
    if (a == DNSSEC_ALG_RSASHA256 && (pol->rsa_bits < 1024 || pol->rsa_bits > 4096)) {
        tern_set_err(err, errlen, "rsa_bits %u is out of range: 1024..4096", pol->rsa_bits);
        return TERN_EINVAL;
    }
    /* Every duration in one table: lifetimes and the delay up to a century, TTLs up to
     * 2^31 - 1 (RFC 2181 §8). */
    const struct {
        const char *name;
        int64_t v, max;
        const char *bound;
    } spans[] = {
        {"ksk_lifetime", pol->ksk_lifetime, SPAN_MAX, "0..100 years"},
        {"zsk_lifetime", pol->zsk_lifetime, SPAN_MAX, "0..100 years"},
        {"propagation_delay", pol->propagation_delay, SPAN_MAX, "0..100 years"},
        {"dnskey_ttl", pol->dnskey_ttl, TTL_MAX, "0..2^31 - 1 (RFC 2181 §8)"},
        {"zone_max_ttl", pol->zone_max_ttl, TTL_MAX, "0..2^31 - 1 (RFC 2181 §8)"},
        {"parent_ds_ttl", pol->parent_ds_ttl, TTL_MAX, "0..2^31 - 1 (RFC 2181 §8)"},
    };
    for (size_t i = 0; i < TERN_ARRAY_SIZE(spans); i++) {
        if (spans[i].v < 0 || spans[i].v > spans[i].max) {
            tern_set_err(err, errlen, "%s %lld s is out of range: %s", spans[i].name,
                         (long long)spans[i].v, spans[i].bound);
            return TERN_EINVAL;
        }
    }
    if (pol->cds_digest != 2 && pol->cds_digest != 4) {
        tern_set_err(err, errlen, "cds_digest %u is not supported: use 2 (SHA-256) or 4 (SHA-384)",
                     pol->cds_digest);
        return TERN_EINVAL;
    }
    int64_t p = pol->propagation_delay;
    /* A ZSK rollover: the successor is published DNSKEY TTL + Dprp before the swap, the old key
     * lingers zone max TTL + Dprp after it; the next rollover must not start before then. */
    int64_t zsk_need = (int64_t)pol->dnskey_ttl + pol->zone_max_ttl + 2 * p;
    if (!pol->csk && pol->zsk_lifetime > 0 && pol->zsk_lifetime < zsk_need) {
        tern_set_err(err, errlen,
                     "zsk_lifetime %lld s is shorter than the ZSK rollover it needs: dnskey_ttl + "
                     "zone_max_ttl + 2 x propagation_delay = %lld s",
                     (long long)pol->zsk_lifetime, (long long)zsk_need);
        return TERN_EINVAL;
    }
    /* A KSK rollover: the successor is ready DNSKEY TTL + Dprp after publication, the old key is
     * removed parent DS TTL + Dprp after the new DS is seen (at best at once). */
    uint32_t linger =
        pol->csk && pol->zone_max_ttl > pol->parent_ds_ttl ? pol->zone_max_ttl : pol->parent_ds_ttl;
    int64_t ksk_need = (int64_t)pol->dnskey_ttl + linger + 2 * p;
    if (pol->ksk_lifetime > 0 && pol->ksk_lifetime < ksk_need) {
        tern_set_err(err, errlen,
                     "ksk_lifetime %lld s is shorter than the %s rollover it needs: dnskey_ttl + "
                     "%s + 2 x propagation_delay = %lld s",
                     (long long)pol->ksk_lifetime, pol->csk ? "CSK" : "KSK",
                     linger == pol->parent_ds_ttl ? "parent_ds_ttl" : "zone_max_ttl",
                     (long long)ksk_need);
        return TERN_EINVAL;
    }
    return 0;
}

dnssec_kasp_t *dnssec_kasp_new(void)
{
    return calloc(1, sizeof(dnssec_kasp_t));
}

void dnssec_kasp_free(dnssec_kasp_t *st)
{
    free(st);
}

size_t dnssec_kasp_key_count(const dnssec_kasp_t *st)
{
    return st->nkeys;
}

const dnssec_kasp_key_t *dnssec_kasp_key_at(const dnssec_kasp_t *st, size_t i)
{
    return i < st->nkeys ? &st->keys[i] : NULL;
}

dnssec_kasp_state_t dnssec_kasp_key_state(const dnssec_kasp_key_t *k)
{
    if (k->remove)
        return DNSSEC_KASP_REMOVED;
    if (k->post_active)
        return DNSSEC_KASP_POST_ACTIVE;
    if (k->retire)
        return DNSSEC_KASP_RETIRED;
    if (k->active)
        return DNSSEC_KASP_ACTIVE;
    if (k->ready)
        return DNSSEC_KASP_READY;
    if (k->publish)
        return DNSSEC_KASP_PUBLISHED;
    if (k->pre_active)
        return DNSSEC_KASP_PRE_ACTIVE;
    return DNSSEC_KASP_GENERATED;
}

const char *dnssec_kasp_state_name(dnssec_kasp_state_t s)
{
    static const char *const ordered[DNSSEC_KASP_STATE_COUNT] = {
        [DNSSEC_KASP_GENERATED] = "generated",     [DNSSEC_KASP_PRE_ACTIVE] = "pre-active",
        [DNSSEC_KASP_PUBLISHED] = "published",     [DNSSEC_KASP_READY] = "ready",
        [DNSSEC_KASP_ACTIVE] = "active",           [DNSSEC_KASP_RETIRED] = "retired",
        [DNSSEC_KASP_POST_ACTIVE] = "post-active", [DNSSEC_KASP_REMOVED] = "removed",
    };
    return (unsigned)s < DNSSEC_KASP_STATE_COUNT ? ordered[s] : "?";
}

const char *dnssec_kasp_role_name(dnssec_kasp_role_t r)
{
    return r == DNSSEC_KASP_KSK ? "KSK" : r == DNSSEC_KASP_ZSK ? "ZSK" : "CSK";
}

/* ---- relations between keys ---------------------------------------------------------------- */

static bool live(const dnssec_kasp_key_t *k)
{
    return k->remove == 0;
}

/* KSK or CSK: signs DNSKEY, has a DS. */
static bool key_signer(const dnssec_kasp_key_t *k)
{
    return k->role != DNSSEC_KASP_ZSK;
}

/* Whether k belongs to the role group of a rollover (KSK and CSK are one group). */
static bool in_group(const dnssec_kasp_key_t *k, bool zsk_group)
{
    return zsk_group ? k->role == DNSSEC_KASP_ZSK : key_signer(k);
}

static bool in_use(const dnssec_kasp_key_t *k)
{
    return live(k) && (k->publish || k->pre_active);
}

/* Whether some live key of alg is in use (published or pre-active). */
static bool alg_in_use(const dnssec_kasp_t *st, uint8_t alg)
{
    for (size_t i = 0; i < st->nkeys; i++)
        if (st->keys[i].alg == alg && in_use(&st->keys[i]))
            return true;
    return false;
}

/* Whether generated keys of alg make a complete set: a CSK, or a KSK and a ZSK. */
static bool batch_complete(const dnssec_kasp_t *st, uint8_t alg)
{
    bool ksk = false, zsk = false;
    for (size_t i = 0; i < st->nkeys; i++) {
        const dnssec_kasp_key_t *k = &st->keys[i];
        if (k->alg != alg || !live(k) || in_use(k))
            continue;
        if (k->role == DNSSEC_KASP_CSK)
            return true;
        ksk |= k->role == DNSSEC_KASP_KSK;
        zsk |= k->role == DNSSEC_KASP_ZSK;
    }
    return ksk && zsk;
}

/* How a generated key starts: the zone's first keys, an algorithm rollover's new set, or one key
 * rolling in beside the current ones. */
typedef enum { START_INITIAL, START_ALG, START_SAME } start_kind_t;

static start_kind_t start_kind(const dnssec_kasp_t *st, const dnssec_kasp_key_t *k)
{
    bool any = false;
    for (size_t i = 0; i < st->nkeys; i++)
        any |= in_use(&st->keys[i]);
    if (!any)
        return START_INITIAL;
    return alg_in_use(st, k->alg) ? START_SAME : START_ALG;
}

/* Time o left the DNSKEY RRset, 0 if it has not. */
static int64_t left_dnskey(const dnssec_kasp_key_t *o)
{
    return o->post_active ? o->post_active : o->remove;
}

/* Whether k was published into a zone that had no DNSKEY before (its own batch aside): then the
 * resolvers may hold unsigned answers for up to the zone's max TTL. */
static bool first_dnskey(const dnssec_kasp_t *st, const dnssec_kasp_key_t *k)
{
    for (size_t i = 0; i < st->nkeys; i++) {
        const dnssec_kasp_key_t *o = &st->keys[i];
        if (o != k && o->publish && o->publish < k->publish &&
            (left_dnskey(o) == 0 || left_dnskey(o) > k->publish))
            return false;
    }
    return true;
}

/* Whether alg still has a live KSK/CSK that is not retired (its DNSKEY signer stays). */
static bool alg_has_signer(const dnssec_kasp_t *st, uint8_t alg)
{
    for (size_t i = 0; i < st->nkeys; i++) {
        const dnssec_kasp_key_t *k = &st->keys[i];
        if (k->alg == alg && live(k) && key_signer(k) && !k->retire)
            return true;
    }
    return false;
}

/* When alg leaves DNSKEY in an algorithm rollover, 0 if it does not: every KSK/CSK of alg is
 * retired because a KSK/CSK of another algorithm is active (its DS replaced theirs), and the
 * old DS has left every cache: parent DS TTL + Dprp after the last of them retired. */
static int64_t alg_out_at(const dnssec_kasp_t *st, const dnssec_kasp_policy_t *pol, uint8_t alg)
{
    if (alg_has_signer(st, alg))
        return 0;
    bool other = false;
    int64_t last = 0;
    for (size_t i = 0; i < st->nkeys; i++) {
        const dnssec_kasp_key_t *k = &st->keys[i];
        if (!live(k) || !key_signer(k))
            continue;
        if (k->alg != alg && k->active && !k->retire)
            other = true;
        if (k->alg == alg && k->retire)
            last = max64(last, k->retire);
    }
    if (!other || last == 0)
        return 0;
    return last + pol->parent_ds_ttl + pol->propagation_delay;
}

/* ---- each key's next event ----------------------------------------------------------------- */

typedef enum {
    EV_NONE,         /* nothing ahead by itself (an active key: its successor ends it) */
    EV_WAIT_KEYS,    /* a generated key waits for the rest of its set */
    EV_WAIT_DS,      /* ready: waits for its DS at the parent */
    EV_WAIT_DS_GONE, /* unsigning: waits for the parent's DS to go */
    EV_START,        /* generated → published or pre-active */
    EV_PUBLISH,      /* pre-active → published */
    EV_READY,        /* KSK/CSK: published → ready (CDS, DS wanted) */
    EV_ACTIVATE,     /* ZSK: published → active, predecessor retired; KSK: ready → active */
    EV_ALG_OUT,      /* algorithm rollover: every key of the old algorithm leaves DNSKEY */
    EV_REMOVE,       /* → removed */
} ev_kind_t;

typedef struct ev {
    ev_kind_t kind;
    int64_t at; /* when it is due (kinds EV_START and later) */
} ev_t;

static bool ev_due_kind(ev_kind_t k)
{
    return k >= EV_START;
}

/* Unsigning: keys never used go at once, the rest once the parent's DS is gone and out of every
 * cache; removals already under way keep their own time when sooner. */
static ev_t unsign_next(const dnssec_kasp_t *st, const dnssec_kasp_policy_t *pol,
                        const dnssec_kasp_key_t *k, ev_t normal)
{
    if (!in_use(k))
        return (ev_t){EV_REMOVE, st->unsign};
    int64_t last = st->ds_gone ? st->ds_gone + pol->parent_ds_ttl + pol->propagation_delay : 0;
    if (normal.kind == EV_REMOVE && (last == 0 || normal.at < last))
        return normal;
    return last ? (ev_t){EV_REMOVE, last} : (ev_t){EV_WAIT_DS_GONE, 0};
}

static ev_t sign_next(const dnssec_kasp_t *st, const dnssec_kasp_policy_t *pol,
                      const dnssec_kasp_key_t *k)
{
    int64_t p = pol->propagation_delay;
    if (k->post_active)
        return (ev_t){EV_REMOVE, k->post_active + pol->dnskey_ttl + p};
    int64_t out = alg_out_at(st, pol, k->alg);
    if (out && in_use(k))
        return (ev_t){EV_ALG_OUT, out};
    if (k->retire) {
        if (k->role == DNSSEC_KASP_ZSK) /* its signatures may be cached that long */
            return (ev_t){EV_REMOVE, k->retire + pol->zone_max_ttl + p};
        if (!alg_has_signer(st, k->alg))
            return (ev_t){EV_NONE, 0}; /* an algorithm leaving: EV_ALG_OUT once the new DS is in */
        /* Its DS may be cached that long; a CSK's signatures as long as the zone's max TTL. */
        int64_t linger = pol->parent_ds_ttl;
        if (k->role == DNSSEC_KASP_CSK)
            linger = max64(linger, pol->zone_max_ttl);
        return (ev_t){EV_REMOVE, k->retire + linger + p};
    }
    if (k->active)
        return (ev_t){EV_NONE, 0};
    if (k->role == DNSSEC_KASP_ZSK && k->publish) /* in every cache: safe to sign with */
        return (ev_t){EV_ACTIVATE, k->publish + pol->dnskey_ttl + p};
    if (k->ready)
        return k->ds_seen ? (ev_t){EV_ACTIVATE, max64(k->ready, k->ds_seen)}
                          : (ev_t){EV_WAIT_DS, 0};
    if (k->publish) {
        /* Before the DS goes in, every cached unsigned answer must be gone too (first keys). */
        int64_t wait = pol->dnskey_ttl;
        if (first_dnskey(st, k))
            wait = max64(wait, pol->zone_max_ttl);
        return (ev_t){EV_READY, k->publish + wait + p};
    }
    if (k->pre_active) /* every cached RRset carries the new algorithm's signature by then */
        return (ev_t){EV_PUBLISH, k->pre_active + pol->zone_max_ttl + p};
    start_kind_t sk = start_kind(st, k);
    if (sk != START_SAME && !batch_complete(st, k->alg))
        return (ev_t){EV_WAIT_KEYS, 0};
    return (ev_t){EV_START, k->created};
}

static ev_t key_next(const dnssec_kasp_t *st, const dnssec_kasp_policy_t *pol,
                     const dnssec_kasp_key_t *k)
{
    if (!live(k))
        return (ev_t){EV_NONE, 0};
    ev_t ev = sign_next(st, pol, k);
    if (st->unsign)
        return unsign_next(st, pol, k, ev);
    return ev;
}

/* The state a key's pending event leads to (for the log of what comes next). */
static dnssec_kasp_state_t ev_target(const dnssec_kasp_t *st, const dnssec_kasp_key_t *k,
                                     ev_kind_t kind)
{
    switch (kind) {
    case EV_START:
        return start_kind(st, k) == START_ALG ? DNSSEC_KASP_PRE_ACTIVE
               : k->role == DNSSEC_KASP_ZSK && start_kind(st, k) == START_INITIAL
                   ? DNSSEC_KASP_ACTIVE
                   : DNSSEC_KASP_PUBLISHED;
    case EV_PUBLISH:
        return DNSSEC_KASP_PUBLISHED;
    case EV_READY:
        return DNSSEC_KASP_READY;
    case EV_ACTIVATE:
        return DNSSEC_KASP_ACTIVE;
    case EV_ALG_OUT:
        return k->publish ? DNSSEC_KASP_POST_ACTIVE : DNSSEC_KASP_REMOVED;
    default:
        return DNSSEC_KASP_REMOVED;
    }
}

/* ---- applying an event ---------------------------------------------------------------------- */

static void apply_start(dnssec_kasp_t *st, dnssec_kasp_key_t *k, int64_t now)
{
    start_kind_t sk = start_kind(st, k);
    if (sk == START_SAME) {
        k->publish = now;
        return;
    }
    /* The whole set of the algorithm starts together. */
    uint8_t alg = k->alg;
    for (size_t i = 0; i < st->nkeys; i++) {
        dnssec_kasp_key_t *o = &st->keys[i];
        if (o->alg != alg || !live(o) || in_use(o))
            continue;
        if (sk == START_ALG) {
            o->pre_active = now;
            continue;
        }
        /* The zone's first keys: nothing is cached, so they publish and sign at once. */
        o->publish = now;
        if (o->role == DNSSEC_KASP_ZSK)
            o->ready = o->active = now;
    }
}

static void apply_activate(dnssec_kasp_t *st, dnssec_kasp_key_t *k, int64_t now)
{
    if (k->role == DNSSEC_KASP_ZSK) {
        k->ready = k->active = now;
        /* The swap: its predecessor of the same algorithm stops signing. */
        for (size_t i = 0; i < st->nkeys; i++) {
            dnssec_kasp_key_t *o = &st->keys[i];
            if (o != k && live(o) && o->role == DNSSEC_KASP_ZSK && o->alg == k->alg && o->active &&
                !o->retire && !o->post_active)
                o->retire = now;
        }
        return;
    }
    k->active = now;
    /* Its DS replaced the older ones at the parent (any algorithm). */
    for (size_t i = 0; i < st->nkeys; i++) {
        dnssec_kasp_key_t *o = &st->keys[i];
        if (o != k && live(o) && key_signer(o) && o->ready && o->ready <= k->ready && !o->retire)
            o->retire = now;
    }
}

static void apply(dnssec_kasp_t *st, dnssec_kasp_key_t *k, ev_kind_t kind, int64_t now)
{
    switch (kind) {
    case EV_START:
        apply_start(st, k, now);
        break;
    case EV_PUBLISH:
        k->publish = now;
        break;
    case EV_READY:
        k->ready = now;
        k->ds_submitted = now;
        break;
    case EV_ACTIVATE:
        apply_activate(st, k, now);
        break;
    case EV_ALG_OUT:
        for (size_t i = 0; i < st->nkeys; i++) {
            dnssec_kasp_key_t *o = &st->keys[i];
            if (o->alg != k->alg || !live(o) || o->post_active)
                continue;
            if (o->publish)
                o->post_active = now;
            else
                o->remove = now;
        }
        break;
    case EV_REMOVE:
        k->remove = now;
        break;
    default:
        break;
    }
}

/* ---- what the zone needs: keys to generate, rollovers to start ------------------------------ */

/* The group's current key: live, active, not retired (the latest if several). */
static const dnssec_kasp_key_t *group_current(const dnssec_kasp_t *st, bool zsk_group)
{
    const dnssec_kasp_key_t *cur = NULL;
    for (size_t i = 0; i < st->nkeys; i++) {
        const dnssec_kasp_key_t *k = &st->keys[i];
        if (live(k) && in_group(k, zsk_group) && k->active && !k->retire && !k->post_active &&
            (!cur || k->active > cur->active))
            cur = k;
    }
    return cur;
}

/* Another live key of the group than cur: a rollover of the group is under way. */
static const dnssec_kasp_key_t *group_other(const dnssec_kasp_t *st, bool zsk_group,
                                            const dnssec_kasp_key_t *cur)
{
    for (size_t i = 0; i < st->nkeys; i++) {
        const dnssec_kasp_key_t *k = &st->keys[i];
        if (k != cur && live(k) && in_group(k, zsk_group))
            return k;
    }
    return NULL;
}

/* The single algorithm of the live keys: 0 if none, -1 if several (an algorithm rollover). */
static int live_alg(const dnssec_kasp_t *st)
{
    int alg = 0;
    for (size_t i = 0; i < st->nkeys; i++) {
        const dnssec_kasp_key_t *k = &st->keys[i];
        if (!live(k))
            continue;
        if (alg && alg != k->alg)
            return -1;
        alg = k->alg;
    }
    return alg;
}

typedef struct needs {
    dnssec_kasp_generate_t gen[2];
    size_t ngen;
    int64_t trigger; /* the next rollover start by lifetime, 0: none */
    char what[DNSSEC_KASP_LINE_MAX];
} needs_t;

static void need_key(needs_t *n, const dnssec_kasp_policy_t *pol, dnssec_kasp_role_t role,
                     uint8_t alg)
{
    if (n->ngen < TERN_ARRAY_SIZE(n->gen))
        n->gen[n->ngen++] =
            (dnssec_kasp_generate_t){role, alg, alg == DNSSEC_ALG_RSASHA256 ? pol->rsa_bits : 0};
}

/* The keys of a new set of alg that are not generated yet. */
static void need_set(const dnssec_kasp_t *st, const dnssec_kasp_policy_t *pol, uint8_t alg,
                     bool csk, needs_t *n)
{
    bool have[3] = {false, false, false};
    for (size_t i = 0; i < st->nkeys; i++) {
        const dnssec_kasp_key_t *k = &st->keys[i];
        if (k->alg == alg && live(k) && !in_use(k))
            have[k->role] = true;
    }
    if (have[DNSSEC_KASP_CSK])
        return;
    if (have[DNSSEC_KASP_KSK] || have[DNSSEC_KASP_ZSK] || !csk) {
        if (!have[DNSSEC_KASP_KSK])
            need_key(n, pol, DNSSEC_KASP_KSK, alg);
        if (!have[DNSSEC_KASP_ZSK])
            need_key(n, pol, DNSSEC_KASP_ZSK, alg);
        return;
    }
    need_key(n, pol, DNSSEC_KASP_CSK, alg);
}

/* Rollovers by lifetime or by request, one role group at a time. */
static void need_group(const dnssec_kasp_t *st, const dnssec_kasp_policy_t *pol, int64_t now,
                       bool zsk_group, needs_t *n)
{
    const dnssec_kasp_key_t *cur = group_current(st, zsk_group);
    if (!cur || group_other(st, zsk_group, cur))
        return;
    int64_t life = zsk_group ? pol->zsk_lifetime : pol->ksk_lifetime;
    bool asked = zsk_group ? st->roll_zsk : st->roll_ksk;
    /* The successor is published DNSKEY TTL + Dprp before the end of the old key's lifetime:
     * a new ZSK is active, a new KSK's DS wanted, exactly when it ends (as Knot does). */
    int64_t at = life ? cur->active + life - (int64_t)pol->dnskey_ttl - pol->propagation_delay : 0;
    if (asked || (life && now >= at)) {
        need_key(n, pol, cur->role, cur->alg);
        return;
    }
    if (life && (n->trigger == 0 || at < n->trigger)) {
        n->trigger = at;
        snprintf(n->what, sizeof(n->what), "%s rollover starts (lifetime of %s %u)",
                 dnssec_kasp_role_name(cur->role), dnssec_kasp_role_name(cur->role), cur->tag);
    }
}

static void needs_compute(const dnssec_kasp_t *st, const dnssec_kasp_policy_t *pol, int64_t now,
                          needs_t *n)
{
    memset(n, 0, sizeof(*n));
    if (st->unsign)
        return;
    int alg = live_alg(st);
    if (alg == 0) { /* never signed, or every key removed: a new set */
        need_set(st, pol, pol->algorithm, pol->csk, n);
        return;
    }
    if (alg < 0 || !alg_in_use(st, (uint8_t)alg)) {
        /* A set being made (first keys, algorithm rollover): complete it. */
        for (size_t i = 0; i < st->nkeys && n->ngen == 0; i++) {
            const dnssec_kasp_key_t *k = &st->keys[i];
            if (live(k) && !in_use(k) && !alg_in_use(st, k->alg))
                need_set(st, pol, k->alg, k->role == DNSSEC_KASP_CSK, n);
        }
        return;
    }
    const dnssec_kasp_key_t *ksk = group_current(st, false);
    const dnssec_kasp_key_t *zsk = group_current(st, true);
    /* An algorithm rollover, once no other rollover runs and the DS chain is complete; until
     * then the keys keep rolling by their lifetimes in their own algorithm. */
    if (alg != pol->algorithm && ksk && !group_other(st, false, ksk) &&
        (ksk->role == DNSSEC_KASP_CSK || zsk) && (!zsk || !group_other(st, true, zsk))) {
        need_set(st, pol, pol->algorithm, pol->csk, n);
        return;
    }
    need_group(st, pol, now, true, n);
    need_group(st, pol, now, false, n);
}

/* ---- the step ------------------------------------------------------------------------------- */

static void log_line(dnssec_kasp_plan_t *out, const dnssec_kasp_key_t *k, dnssec_kasp_state_t from,
                     dnssec_kasp_state_t to)
{
    if (out->nlog >= DNSSEC_KASP_LOG_MAX)
        return;
    snprintf(out->log[out->nlog++], DNSSEC_KASP_LINE_MAX, "%s %u: %s → %s",
             dnssec_kasp_role_name(k->role), k->tag, dnssec_kasp_state_name(from),
             dnssec_kasp_state_name(to));
}

/* The earliest event due at or before limit (any with limit INT64_MAX); NULL if none. */
static dnssec_kasp_key_t *earliest(const dnssec_kasp_t *st, const dnssec_kasp_policy_t *pol,
                                   int64_t limit, ev_t *ev)
{
    const dnssec_kasp_key_t *best = NULL;
    for (size_t i = 0; i < st->nkeys; i++) {
        ev_t e = key_next(st, pol, &st->keys[i]);
        if (ev_due_kind(e.kind) && e.at <= limit && (!best || e.at < ev->at)) {
            best = &st->keys[i];
            *ev = e;
        }
    }
    return (dnssec_kasp_key_t *)best;
}

/* Copy each key with its flags; CDS and the DS wanted go to the newest ready KSK/CSK(s). */
static void plan_fill(const dnssec_kasp_t *st, const dnssec_kasp_policy_t *pol,
                      dnssec_kasp_plan_t *out)
{
    int64_t newest = 0;
    for (size_t i = 0; i < st->nkeys; i++) {
        const dnssec_kasp_key_t *k = &st->keys[i];
        if (live(k) && key_signer(k) && k->ready && !k->retire && !k->post_active)
            newest = max64(newest, k->ready);
    }
    bool any_dnskey = false, any_sig = false;
    for (size_t i = 0; i < st->nkeys; i++) {
        const dnssec_kasp_key_t *k = &st->keys[i];
        dnssec_kasp_plan_key_t *pk = &out->keys[out->nkeys++];
        memcpy(pk->id, k->id, sizeof(pk->id));
        pk->tag = k->tag;
        pk->alg = k->alg;
        pk->role = k->role;
        pk->state = dnssec_kasp_key_state(k);
        bool on = live(k);
        pk->in_dnskey = on && k->publish && !k->post_active;
        pk->signs_dnskey = on && key_signer(k) && (k->publish || k->pre_active) && !k->post_active;
        if (k->role == DNSSEC_KASP_ZSK)
            pk->signs_zone = on && (k->active || k->pre_active) && !k->retire;
        else
            pk->signs_zone = on && k->role == DNSSEC_KASP_CSK && (k->publish || k->pre_active);
        bool cds = on && !st->unsign && newest && key_signer(k) && k->ready == newest &&
                   !k->retire && !k->post_active;
        pk->in_cds = cds && pol->publish_cds;
        if (cds && !k->ds_seen && out->nds_wanted < TERN_ARRAY_SIZE(out->ds_wanted))
            out->ds_wanted[out->nds_wanted++] = k->tag;
        any_dnskey |= pk->in_dnskey;
        any_sig |= pk->signs_dnskey || pk->signs_zone;
    }
    out->cds_delete = st->unsign && any_dnskey;
    out->unsigned_zone = !any_sig;
}

/* The zone's next event after now: a key's, or a rollover start by lifetime. */
static int64_t next_event(const dnssec_kasp_t *st, const dnssec_kasp_policy_t *pol,
                          const needs_t *n, char *what, size_t whatlen)
{
    ev_t ev = {EV_NONE, 0};
    const dnssec_kasp_key_t *k = earliest(st, pol, INT64_MAX, &ev);
    if (k && (n->trigger == 0 || ev.at <= n->trigger)) {
        snprintf(what, whatlen, "%s %u: %s → %s", dnssec_kasp_role_name(k->role), k->tag,
                 dnssec_kasp_state_name(dnssec_kasp_key_state(k)),
                 dnssec_kasp_state_name(ev_target(st, k, ev.kind)));
        return ev.at;
    }
    snprintf(what, whatlen, "%s", n->trigger ? n->what : "nothing scheduled");
    return n->trigger;
}

int dnssec_kasp_step(dnssec_kasp_t *st, const dnssec_kasp_policy_t *pol, int64_t now,
                     dnssec_kasp_plan_t *out)
{
    memset(out, 0, sizeof(*out));
    if (dnssec_kasp_policy_check(pol, NULL, 0) < 0)
        return TERN_EINVAL;
    /* Each event moves a key forward for good, and a key has fewer than 10 events: the bound
     * only guards against a bug looping. */
    for (size_t iter = 0; iter < 10 * DNSSEC_KASP_KEYS_MAX; iter++) {
        ev_t ev;
        dnssec_kasp_key_t *k = earliest(st, pol, now, &ev);
        if (!k)
            break;
        dnssec_kasp_state_t before[DNSSEC_KASP_KEYS_MAX];
        for (size_t i = 0; i < st->nkeys; i++)
            before[i] = dnssec_kasp_key_state(&st->keys[i]);
        apply(st, k, ev.kind, now);
        for (size_t i = 0; i < st->nkeys; i++) {
            dnssec_kasp_state_t after = dnssec_kasp_key_state(&st->keys[i]);
            if (after != before[i])
                log_line(out, &st->keys[i], before[i], after);
        }
    }
    needs_t n;
    needs_compute(st, pol, now, &n);
    memcpy(out->generate, n.gen, sizeof(n.gen));
    out->ngenerate = n.ngen;
    plan_fill(st, pol, out);
    out->next_event = next_event(st, pol, &n, out->next_what, sizeof(out->next_what));
    return 0;
}

/* ---- requests from outside: new keys, DS seen or gone, rollovers, unsigning ----------------- */

int dnssec_kasp_add_key(dnssec_kasp_t *st, dnssec_kasp_role_t role, uint8_t alg, uint16_t tag,
                        const char *id, int64_t now, char *err, size_t errlen)
{
    const char *why = kasp_id_problem(id);
    if (why) {
        tern_set_err(err, errlen, "key id \"%.64s\": %s", id, why);
        return TERN_EINVAL;
    }
    if (alg != DNSSEC_ALG_RSASHA256 && alg != DNSSEC_ALG_ECDSAP256SHA256 &&
        alg != DNSSEC_ALG_ED25519) {
        tern_set_err(err, errlen, "key %s: algorithm %u is not supported: use 8, 13 or 15", id,
                     alg);
        return TERN_EINVAL;
    }
    if ((unsigned)role > DNSSEC_KASP_CSK || now <= 0 || now > KASP_TIME_MAX) {
        tern_set_err(err, errlen, "key %s: bad role or time", id);
        return TERN_EINVAL;
    }
    size_t oldest = SIZE_MAX;
    for (size_t i = 0; i < st->nkeys; i++) {
        const dnssec_kasp_key_t *k = &st->keys[i];
        if (strcmp(k->id, id) == 0) {
            tern_set_err(err, errlen, "key id %s is already taken", id);
            return TERN_EEXIST;
        }
        if (live(k) && k->alg == alg && k->tag == tag) {
            /* Validators try every key with a tag; a collision costs them work (RFC 6781
             * §3.4.2 suggests avoiding it): make another key. */
            tern_set_err(err, errlen, "key %s: tag %u is the tag of live key %s: make another key",
                         id, tag, k->id);
            return TERN_EEXIST;
        }
        if (!live(k) && (oldest == SIZE_MAX || k->remove < st->keys[oldest].remove))
            oldest = i;
    }
    if (st->nkeys == DNSSEC_KASP_KEYS_MAX) {
        if (oldest == SIZE_MAX) {
            tern_set_err(err, errlen, "the zone has %d live keys, the most it may hold",
                         DNSSEC_KASP_KEYS_MAX);
            return TERN_ELIMIT;
        }
        /* Forget the oldest removed key: history only. */
        memmove(&st->keys[oldest], &st->keys[oldest + 1],
                (st->nkeys - oldest - 1) * sizeof(st->keys[0]));
        st->nkeys--;
    }
    dnssec_kasp_key_t *k = &st->keys[st->nkeys++];
    memset(k, 0, sizeof(*k));
    snprintf(k->id, sizeof(k->id), "%s", id);
    k->tag = tag;
    k->alg = alg;
    k->role = role;
    k->created = now;
    if (role == DNSSEC_KASP_ZSK)
        st->roll_zsk = false;
    else
        st->roll_ksk = false;
    return 0;
}

int dnssec_kasp_ds_seen(dnssec_kasp_t *st, uint16_t tag, int64_t now, char *err, size_t errlen)
{
    if (st->unsign) {
        tern_set_err(err, errlen, "the zone is being unsigned: no DS is wanted");
        return TERN_EINVAL;
    }
    dnssec_kasp_key_t *hit = NULL;
    bool known = false;
    for (size_t i = 0; i < st->nkeys; i++) {
        dnssec_kasp_key_t *k = &st->keys[i];
        if (!live(k) || !key_signer(k) || k->tag != tag || !k->publish || k->retire ||
            k->post_active)
            continue;
        if (k->ds_seen) {
            known = true; /* the parent still has it: nothing new, unless another key waits */
            continue;
        }
        if (hit) {
            tern_set_err(err, errlen,
                         "KSKs %s and %s both have tag %u: say which DS by removing "
                         "one",
                         hit->id, k->id, tag);
            return TERN_EEXIST;
        }
        hit = k;
    }
    if (!hit && known)
        return 0;
    if (!hit) {
        tern_set_err(err, errlen, "no published KSK with tag %u waits for its DS", tag);
        return TERN_ENOENT;
    }
    hit->ds_seen = now;
    return 0;
}

int dnssec_kasp_rollover(dnssec_kasp_t *st, const dnssec_kasp_policy_t *pol,
                         dnssec_kasp_role_t role, int64_t now, char *err, size_t errlen)
{
    (void)now;
    bool zsk_group = role == DNSSEC_KASP_ZSK;
    const char *name = dnssec_kasp_role_name(role);
    if (st->unsign) {
        tern_set_err(err, errlen, "no %s rollover: the zone is being unsigned", name);
        return TERN_EAGAIN;
    }
    if (live_alg(st) < 0) {
        tern_set_err(err, errlen, "no %s rollover: an algorithm rollover is in progress", name);
        return TERN_EAGAIN;
    }
    const dnssec_kasp_key_t *cur = group_current(st, zsk_group);
    const dnssec_kasp_key_t *other = group_other(st, zsk_group, cur);
    if (!cur) {
        if (other && other->publish) {
            tern_set_err(err, errlen, "no %s rollover: %s %u is %s, not yet active (%s)", name,
                         dnssec_kasp_role_name(other->role), other->tag,
                         dnssec_kasp_state_name(dnssec_kasp_key_state(other)),
                         key_signer(other) ? "its DS is not seen at the parent yet"
                                           : "the zone is being signed");
            return TERN_EAGAIN;
        }
        tern_set_err(err, errlen, "no %s rollover: no %s is active%s", name, name,
                     zsk_group && group_current(st, false) ? " (the zone signs with a CSK: "
                                                             "roll the CSK)"
                                                           : "");
        return TERN_ENOENT;
    }
    if (!zsk_group && cur->role != role) {
        /* a KSK is rolled as a KSK, a CSK as a CSK: the name asked for says what the operator
         * thinks the zone has, and a mismatch is a mistake worth saying */
        tern_set_err(err, errlen, "no %s rollover: the zone signs with a %s %u (roll the %s)", name,
                     dnssec_kasp_role_name(cur->role), cur->tag, dnssec_kasp_role_name(cur->role));
        return TERN_EINVAL;
    }
    if (other) {
        tern_set_err(err, errlen, "no %s rollover: one is in progress (%s %u is %s)", name,
                     dnssec_kasp_role_name(other->role), other->tag,
                     dnssec_kasp_state_name(dnssec_kasp_key_state(other)));
        return TERN_EAGAIN;
    }
    if ((zsk_group && st->roll_zsk) || (!zsk_group && st->roll_ksk)) {
        tern_set_err(err, errlen, "no %s rollover: one was already asked for", name);
        return TERN_EAGAIN;
    }
    if (cur->alg != pol->algorithm) {
        tern_set_err(err, errlen,
                     "no %s rollover: the policy's algorithm %u differs from the keys' %u: an "
                     "algorithm rollover replaces every key",
                     name, pol->algorithm, cur->alg);
        return TERN_EAGAIN;
    }
    if (zsk_group)
        st->roll_zsk = true;
    else
        st->roll_ksk = true;
    return 0;
}

int dnssec_kasp_unsign(dnssec_kasp_t *st, int64_t now, char *err, size_t errlen)
{
    if (st->unsign) {
        tern_set_err(err, errlen, "the zone is already being unsigned");
        return TERN_EINVAL;
    }
    bool any = false;
    for (size_t i = 0; i < st->nkeys; i++)
        any |= in_use(&st->keys[i]);
    if (!any) {
        tern_set_err(err, errlen, "the zone is not signed: nothing to unsign");
        return TERN_EINVAL;
    }
    st->unsign = now;
    st->roll_ksk = st->roll_zsk = false;
    return 0;
}

int dnssec_kasp_ds_gone(dnssec_kasp_t *st, int64_t now, char *err, size_t errlen)
{
    if (!st->unsign) {
        tern_set_err(err, errlen, "the zone is not being unsigned: its DS is wanted");
        return TERN_EINVAL;
    }
    if (!st->ds_gone)
        st->ds_gone = now;
    return 0;
}

int64_t dnssec_kasp_unsigning(const dnssec_kasp_t *st, int64_t *ds_gone)
{
    *ds_gone = st->ds_gone;
    return st->unsign;
}

bool dnssec_kasp_in_use(const dnssec_kasp_t *st)
{
    for (size_t i = 0; i < st->nkeys; i++)
        if (in_use(&st->keys[i]))
            return true;
    return false;
}

void dnssec_kasp_count(const dnssec_kasp_t *st, size_t counts[DNSSEC_KASP_STATE_COUNT])
{
    memset(counts, 0, DNSSEC_KASP_STATE_COUNT * sizeof(counts[0]));
    for (size_t i = 0; i < st->nkeys; i++)
        counts[dnssec_kasp_key_state(&st->keys[i])]++;
}

/* ---- status --------------------------------------------------------------------------------- */

static void iso_time(int64_t t, char *buf, size_t len)
{
    time_t s = (time_t)t;
    struct tm tm;
    if (gmtime_r(&s, &tm) == NULL || strftime(buf, len, "%Y-%m-%dT%H:%M:%SZ", &tm) == 0)
        snprintf(buf, len, "@%lld", (long long)t);
}

char *dnssec_kasp_status_text(const dnssec_kasp_t *st, const dnssec_kasp_policy_t *pol, int64_t now)
{
    tern_buf_t b;
    tern_buf_init(&b, 0);
    char when[40];
    for (size_t i = 0; i < st->nkeys; i++) {
        const dnssec_kasp_key_t *k = &st->keys[i];
        dnssec_kasp_state_t s = dnssec_kasp_key_state(k);
        tern_buf_printf(&b, "%s %u alg %u %s id %s: ", dnssec_kasp_role_name(k->role), k->tag,
                        k->alg, dnssec_kasp_state_name(s), k->id);
        ev_t ev = key_next(st, pol, k);
        if (ev_due_kind(ev.kind)) {
            iso_time(ev.at, when, sizeof(when));
            tern_buf_printf(&b, "%s at %s\n", dnssec_kasp_state_name(ev_target(st, k, ev.kind)),
                            when);
        } else if (ev.kind == EV_WAIT_DS) {
            tern_buf_printf(&b, "waits for its DS at the parent\n");
        } else if (ev.kind == EV_WAIT_DS_GONE) {
            tern_buf_printf(&b, "waits for the parent's DS to go (CDS DELETE published)\n");
        } else if (ev.kind == EV_WAIT_KEYS) {
            tern_buf_printf(&b, "waits for the rest of its key set\n");
        } else if (s == DNSSEC_KASP_REMOVED) {
            iso_time(k->remove, when, sizeof(when));
            tern_buf_printf(&b, "since %s\n", when);
        } else {
            tern_buf_printf(&b, "until its successor replaces it\n");
        }
    }
    needs_t n;
    needs_compute(st, pol, now, &n);
    char what[DNSSEC_KASP_LINE_MAX];
    int64_t next = next_event(st, pol, &n, what, sizeof(what));
    if (n.ngen)
        tern_buf_printf(&b, "zone: %zu key(s) to generate now\n", n.ngen);
    if (next) {
        iso_time(next, when, sizeof(when));
        tern_buf_printf(&b, "zone: next event at %s: %s\n", when, what);
    } else {
        tern_buf_printf(&b, "zone: no event scheduled\n");
    }
    if (b.failed || !b.p) {
        tern_buf_free(&b);
        return NULL;
    }
    return b.p;
}
