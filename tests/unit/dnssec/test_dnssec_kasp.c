/*
 * test_dnssec_kasp.c — the key-state machine driven through simulated time: each scenario (the
 * first signing, two ZSK rollovers by lifetime, a manual KSK rollover whose DS arrives late, an
 * algorithm rollover 13 → 15, a CSK rollover, unsigning with CDS DELETE) jumps now to each
 * next_event, makes the keys a step asks for, and checks the states, the plan and its exact times.
 * At every step, of every scenario, a simulator checks the invariants (every algorithm in DNSKEY
 * signs DNSKEY and the zone; nothing signs before it is in DNSKEY but an algorithm rollover's new
 * keys; a KSK whose DS may be cached stays in DNSKEY and signs it; a ZSK whose signatures may be
 * cached stays in DNSKEY; a new ZSK signs only once its DNSKEY is in every cache; removed keys
 * never come back) and restarts: the state saved to a file and loaded again must make the same
 * step, the same plan and the same text. Corrupt and truncated state files are refused with
 * path:line; policies that make no sense are refused with their reason.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "tern/common/err.h"
#include "tern/dnssec/dnssec_kasp.h"

#define T0 1800000000LL /* 2027-01-15 */
#define D  3600         /* dnskey_ttl */
#define P  300          /* propagation_delay */
#define M  86400        /* zone_max_ttl */
#define S  7200         /* parent_ds_ttl */
#define L  (30 * 86400) /* zsk_lifetime */

/* ---- the simulator ----------------------------------------------------------------------------
 */

typedef struct sim {
    dnssec_kasp_t *st;
    dnssec_kasp_policy_t pol;
    int64_t now;
    dnssec_kasp_plan_t plan;
    char log[64][DNSSEC_KASP_LINE_MAX]; /* every transition of the last sim_step */
    size_t nlog;
    unsigned next_tag;
    char path[64];
    size_t steps;
    /* per key index (the state never forgets a key in these scenarios) */
    dnssec_kasp_state_t prev[DNSSEC_KASP_KEYS_MAX];
    int64_t first_dnskey[DNSSEC_KASP_KEYS_MAX]; /* first seen in DNSKEY */
    int64_t stop_sign[DNSSEC_KASP_KEYS_MAX];    /* a ZSK stopped signing the zone then */
    bool signed_zone[DNSSEC_KASP_KEYS_MAX];
    bool ds_parent[DNSSEC_KASP_KEYS_MAX];  /* the parent has its DS */
    int64_t ds_drop[DNSSEC_KASP_KEYS_MAX]; /* the parent dropped its DS then */
    bool had_dnskey;                       /* some DNSKEY was ever published */
} sim_t;

static void sim_init(sim_t *s)
{
    memset(s, 0, sizeof(*s));
    s->st = dnssec_kasp_new();
    assert_non_null(s->st);
    dnssec_kasp_policy_default(&s->pol);
    s->pol.propagation_delay = P;
    s->pol.dnskey_ttl = D;
    s->pol.zone_max_ttl = M;
    s->pol.parent_ds_ttl = S;
    s->pol.zsk_lifetime = L;
    s->now = T0;
    s->next_tag = 1001;
    snprintf(s->path, sizeof(s->path), "/tmp/test_kasp.%d.state", (int)getpid());
}

static void sim_free(sim_t *s)
{
    dnssec_kasp_free(s->st);
    unlink(s->path);
}

typedef struct add {
    dnssec_kasp_role_t role;
    uint8_t alg;
    unsigned tag;
} add_t;

/* Step, make the keys asked for, step again: as the loader does. With replay, the keys made are
 * adds[] (a restarted twin makes the same keys). */
static void cycle(sim_t *s, dnssec_kasp_t *st, dnssec_kasp_plan_t *plan, add_t *adds, size_t *nadds,
                  bool replay, bool keep_log)
{
    size_t used = 0;
    if (keep_log)
        s->nlog = 0;
    for (int round = 0; round < 4; round++) {
        assert_int_equal(dnssec_kasp_step(st, &s->pol, s->now, plan), 0);
        for (size_t i = 0; keep_log && i < plan->nlog; i++)
            snprintf(s->log[s->nlog++], DNSSEC_KASP_LINE_MAX, "%s", plan->log[i]);
        if (plan->ngenerate == 0)
            return;
        for (size_t g = 0; g < plan->ngenerate; g++) {
            add_t a;
            if (replay) {
                assert_true(used < *nadds);
                a = adds[used++];
                assert_int_equal(a.role, plan->generate[g].role);
                assert_int_equal(a.alg, plan->generate[g].alg);
            } else {
                a = (add_t){plan->generate[g].role, plan->generate[g].alg, s->next_tag++};
                adds[(*nadds)++] = a;
            }
            char id[64];
            snprintf(id, sizeof(id), "Kexample.test.+%03u+%05u", a.alg, a.tag);
            char err[256];
            assert_int_equal(
                dnssec_kasp_add_key(st, a.role, a.alg, (uint16_t)a.tag, id, s->now, err, 256), 0);
        }
    }
    fail_msg("the step keeps asking for keys");
}

static const dnssec_kasp_plan_key_t *pk_of(const dnssec_kasp_plan_t *p, unsigned tag)
{
    for (size_t i = 0; i < p->nkeys; i++)
        if (p->keys[i].tag == tag)
            return &p->keys[i];
    fail_msg("no key %u in the plan", tag);
    return NULL;
}

static size_t idx_of(const dnssec_kasp_plan_t *p, unsigned tag)
{
    return (size_t)(pk_of(p, tag) - p->keys);
}

/* The invariants of dnssec_kasp.h, checked on every plan. */
static void check_invariants(sim_t *s)
{
    const dnssec_kasp_plan_t *p = &s->plan;
    assert_int_equal(p->nkeys, dnssec_kasp_key_count(s->st));
    bool any_dnskey = false;
    for (size_t i = 0; i < p->nkeys; i++) {
        const dnssec_kasp_plan_key_t *k = &p->keys[i];
        any_dnskey |= k->in_dnskey;
        /* Every algorithm in DNSKEY signs DNSKEY and the zone with a key in DNSKEY (RFC 4035
         * §2.2, RFC 6840 §5.11). */
        if (k->in_dnskey) {
            bool ksk = false, zsk = false;
            for (size_t j = 0; j < p->nkeys; j++) {
                const dnssec_kasp_plan_key_t *o = &p->keys[j];
                ksk |= o->alg == k->alg && o->in_dnskey && o->signs_dnskey;
                zsk |= o->alg == k->alg && o->in_dnskey && o->signs_zone;
            }
            if (!ksk || !zsk)
                fail_msg("step %zu: algorithm %u in DNSKEY without a %s", s->steps, k->alg,
                         ksk ? "zone signer" : "DNSKEY signer");
        }
        /* Nothing signs out of DNSKEY but pre-active keys and post-active zone signatures. */
        if ((k->signs_dnskey || k->signs_zone) && !k->in_dnskey)
            assert_true(k->state == DNSSEC_KASP_PRE_ACTIVE ||
                        (k->state == DNSSEC_KASP_POST_ACTIVE && !k->signs_dnskey));
        if (k->signs_dnskey)
            assert_int_not_equal(k->role, DNSSEC_KASP_ZSK);
        if (k->signs_zone)
            assert_int_not_equal(k->role, DNSSEC_KASP_KSK);
        if (k->in_cds)
            assert_true(k->state == DNSSEC_KASP_READY || k->state == DNSSEC_KASP_ACTIVE);
        /* Removed keys never come back; states only move forward. */
        if (s->prev[i] == DNSSEC_KASP_REMOVED)
            assert_int_equal(k->state, DNSSEC_KASP_REMOVED);
        assert_true(k->state >= s->prev[i]);
        if (k->state == DNSSEC_KASP_REMOVED)
            assert_false(k->in_dnskey || k->signs_dnskey || k->signs_zone || k->in_cds);
        s->prev[i] = k->state;
        /* A KSK whose DS the parent has, or may still be cached, stays and signs DNSKEY. */
        if (s->ds_parent[i] || (s->ds_drop[i] && s->now < s->ds_drop[i] + S + P))
            if (!k->in_dnskey || !k->signs_dnskey)
                fail_msg("step %zu: KSK %u left DNSKEY while its DS may be cached", s->steps,
                         k->tag);
        /* A new ZSK signs only once its DNSKEY is in every cache (first keys aside). */
        if (k->in_dnskey && !s->first_dnskey[i])
            s->first_dnskey[i] = s->now;
        if (k->signs_zone && k->state != DNSSEC_KASP_PRE_ACTIVE && !s->signed_zone[i] &&
            s->had_dnskey && k->role == DNSSEC_KASP_ZSK)
            assert_true(s->first_dnskey[i] && s->now >= s->first_dnskey[i] + D + P);
        if (k->signs_zone)
            s->signed_zone[i] = true;
        else if (s->signed_zone[i] && !s->stop_sign[i])
            s->stop_sign[i] = s->now;
        /* A ZSK whose signatures may be cached stays in DNSKEY while its algorithm is there. */
        bool alg_there = false;
        for (size_t j = 0; j < p->nkeys; j++)
            alg_there |= p->keys[j].alg == k->alg && p->keys[j].in_dnskey;
        if (s->stop_sign[i] && s->now < s->stop_sign[i] + M + P && alg_there &&
            k->role == DNSSEC_KASP_ZSK && !k->in_dnskey)
            fail_msg("step %zu: ZSK %u left DNSKEY while its signatures may be cached", s->steps,
                     k->tag);
    }
    assert_true(p->unsigned_zone || any_dnskey);
    s->had_dnskey |= any_dnskey;
}

/* One step as the loader makes it, with a restart twin and the invariants checked. */
static void sim_step(sim_t *s)
{
    char err[256];
    /* The restart: the state as saved before the step, loaded as a new process would. */
    char *before = dnssec_kasp_to_text(s->st);
    assert_non_null(before);
    assert_int_equal(dnssec_kasp_save(s->st, s->path, err, sizeof(err)), 0);
    dnssec_kasp_t *twin = NULL;
    int rc = dnssec_kasp_load(s->path, &twin, err, sizeof(err));
    if (rc != 0)
        fail_msg("load: %s", err);
    char *twin_text = dnssec_kasp_to_text(twin);
    assert_string_equal(before, twin_text);
    free(twin_text);

    add_t adds[4];
    size_t nadds = 0;
    cycle(s, s->st, &s->plan, adds, &nadds, false, true);
    dnssec_kasp_plan_t *twin_plan = malloc(sizeof(*twin_plan));
    cycle(s, twin, twin_plan, adds, &nadds, true, false);
    assert_memory_equal(&s->plan, twin_plan, sizeof(*twin_plan));
    char *a = dnssec_kasp_to_text(s->st), *b = dnssec_kasp_to_text(twin);
    assert_string_equal(a, b);
    /* The text round trip is exact. */
    dnssec_kasp_t *again = NULL;
    assert_int_equal(dnssec_kasp_from_text(a, "mem", &again, err, sizeof(err)), 0);
    char *c = dnssec_kasp_to_text(again);
    assert_string_equal(a, c);
    free(a);
    free(b);
    free(c);
    free(before);
    free(twin_plan);
    dnssec_kasp_free(twin);
    dnssec_kasp_free(again);
    check_invariants(s);
    s->steps++;
}

/* Jump to the next event and step; checks it is when expected (0: any). */
static void sim_jump(sim_t *s, int64_t expect)
{
    assert_true(s->plan.next_event > s->now);
    if (expect)
        assert_int_equal(s->plan.next_event, expect);
    s->now = s->plan.next_event;
    sim_step(s);
}

static bool logged(const sim_t *s, const char *line)
{
    for (size_t i = 0; i < s->nlog; i++)
        if (strcmp(s->log[i], line) == 0)
            return true;
    return false;
}

static void sim_ds_seen(sim_t *s, unsigned tag)
{
    char err[256];
    int rc = dnssec_kasp_ds_seen(s->st, (uint16_t)tag, s->now, err, sizeof(err));
    if (rc != 0)
        fail_msg("ds_seen %u: %s", tag, err);
    /* The simulated parent: the DS set becomes this one key's (double-signature rollover). */
    size_t me = idx_of(&s->plan, tag);
    for (size_t i = 0; i < s->plan.nkeys; i++) {
        if (i != me && s->ds_parent[i]) {
            s->ds_parent[i] = false;
            s->ds_drop[i] = s->now;
        }
    }
    s->ds_parent[me] = true;
}

static const dnssec_kasp_key_t *key_of(const sim_t *s, unsigned tag)
{
    return dnssec_kasp_key_at(s->st, idx_of(&s->plan, tag));
}

static void expect_flags(const sim_t *s, unsigned tag, dnssec_kasp_state_t st, bool dnskey,
                         bool sdnskey, bool szone, bool cds)
{
    const dnssec_kasp_plan_key_t *k = pk_of(&s->plan, tag);
    if (k->state != st || k->in_dnskey != dnskey || k->signs_dnskey != sdnskey ||
        k->signs_zone != szone || k->in_cds != cds)
        fail_msg("key %u: %s dnskey=%d signs_dnskey=%d signs_zone=%d cds=%d; expected %s %d %d "
                 "%d %d",
                 tag, dnssec_kasp_state_name(k->state), k->in_dnskey, k->signs_dnskey,
                 k->signs_zone, k->in_cds, dnssec_kasp_state_name(st), dnskey, sdnskey, szone, cds);
}

/* The first signing, to the KSK active: keys 1001 (KSK) and 1002 (ZSK), signed from T0. */
static void sign_zone(sim_t *s)
{
    sim_step(s);
    assert_int_equal(s->plan.nkeys, 2);
    assert_true(logged(s, "KSK 1001: generated → published"));
    assert_true(logged(s, "ZSK 1002: generated → active"));
    expect_flags(s, 1001, DNSSEC_KASP_PUBLISHED, true, true, false, false);
    expect_flags(s, 1002, DNSSEC_KASP_ACTIVE, true, false, true, false);
    assert_int_equal(s->plan.nds_wanted, 0);
    /* Unsigned answers cached before T0 are gone after the zone's max TTL. */
    sim_jump(s, T0 + M + P);
    expect_flags(s, 1001, DNSSEC_KASP_READY, true, true, false, true);
    assert_int_equal(s->plan.nds_wanted, 1);
    assert_int_equal(s->plan.ds_wanted[0], 1001);
    assert_int_equal(key_of(s, 1001)->ds_submitted, T0 + M + P);
    /* Nothing more until the ZSK's lifetime: the successor is published D + P before its end. */
    if (s->pol.zsk_lifetime) {
        assert_int_equal(s->plan.next_event, T0 + L - D - P);
        assert_string_equal(s->plan.next_what, "ZSK rollover starts (lifetime of ZSK 1002)");
    } else {
        assert_int_equal(s->plan.next_event, 0);
    }
    s->now += 2 * 86400;
    sim_step(s);
    assert_int_equal(s->nlog, 0);
    sim_ds_seen(s, 1001);
    sim_step(s);
    assert_true(logged(s, "KSK 1001: ready → active"));
    expect_flags(s, 1001, DNSSEC_KASP_ACTIVE, true, true, false, true);
    assert_int_equal(s->plan.nds_wanted, 0);
    assert_false(s->plan.cds_delete);
}

/* ---- scenarios ------------------------------------------------------------------------------ */

static void test_initial_signing(void **state)
{
    (void)state;
    sim_t s;
    sim_init(&s);
    /* An empty state asks for a KSK and a ZSK of the policy's algorithm. */
    dnssec_kasp_plan_t p;
    assert_int_equal(dnssec_kasp_step(s.st, &s.pol, T0, &p), 0);
    assert_int_equal(p.ngenerate, 2);
    assert_int_equal(p.generate[0].role, DNSSEC_KASP_KSK);
    assert_int_equal(p.generate[1].role, DNSSEC_KASP_ZSK);
    assert_int_equal(p.generate[0].alg, 13);
    assert_int_equal(p.next_event, 0);
    assert_true(p.unsigned_zone);
    /* With only the KSK made, the step asks for the ZSK and nothing starts. */
    char err[256];
    assert_int_equal(dnssec_kasp_add_key(s.st, DNSSEC_KASP_KSK, 13, 7, "K7", T0, err, 256), 0);
    assert_int_equal(dnssec_kasp_step(s.st, &s.pol, T0, &p), 0);
    assert_int_equal(p.ngenerate, 1);
    assert_int_equal(p.generate[0].role, DNSSEC_KASP_ZSK);
    assert_int_equal(p.keys[0].state, DNSSEC_KASP_GENERATED);
    assert_true(p.unsigned_zone);
    dnssec_kasp_free(s.st);
    s.st = dnssec_kasp_new();

    sign_zone(&s);
    const dnssec_kasp_key_t *k = key_of(&s, 1001);
    assert_int_equal(k->publish, T0);
    assert_int_equal(k->ready, T0 + M + P);
    assert_int_equal(k->active, T0 + M + P + 2 * 86400);
    assert_int_equal(key_of(&s, 1002)->active, T0);
    /* Seeing the same DS again changes nothing. */
    assert_int_equal(dnssec_kasp_ds_seen(s.st, 1001, s.now, err, 256), 0);
    assert_int_equal(dnssec_kasp_ds_seen(s.st, 4242, s.now, err, 256), TERN_ENOENT);
    assert_non_null(strstr(err, "4242"));
    sim_free(&s);
}

static void test_zsk_rollovers_by_lifetime(void **state)
{
    (void)state;
    sim_t s;
    sim_init(&s);
    sign_zone(&s);
    int64_t act = T0;
    unsigned old = 1002, tag = 1003;
    for (int round = 0; round < 2; round++, old = tag, tag++) {
        sim_jump(&s, act + L - D - P);
        assert_true(logged(&s, round ? "ZSK 1004: generated → published"
                                     : "ZSK 1003: generated → published"));
        expect_flags(&s, tag, DNSSEC_KASP_PUBLISHED, true, false, false, false);
        expect_flags(&s, old, DNSSEC_KASP_ACTIVE, true, false, true, false);
        char err[256];
        assert_int_equal(dnssec_kasp_rollover(s.st, &s.pol, DNSSEC_KASP_ZSK, s.now, err, 256),
                         TERN_EAGAIN);
        assert_non_null(strstr(err, "in progress"));
        /* The swap is exactly at the end of the old key's lifetime. */
        sim_jump(&s, act + L);
        expect_flags(&s, tag, DNSSEC_KASP_ACTIVE, true, false, true, false);
        expect_flags(&s, old, DNSSEC_KASP_RETIRED, true, false, false, false);
        assert_int_equal(s.nlog, 2);
        sim_jump(&s, act + L + M + P);
        expect_flags(&s, old, DNSSEC_KASP_REMOVED, false, false, false, false);
        assert_int_equal(key_of(&s, old)->remove, act + L + M + P);
        act += L;
        assert_int_equal(s.plan.next_event, act + L - D - P);
    }
    /* The KSK was never touched. */
    expect_flags(&s, 1001, DNSSEC_KASP_ACTIVE, true, true, false, true);
    size_t counts[DNSSEC_KASP_STATE_COUNT];
    dnssec_kasp_count(s.st, counts);
    assert_int_equal(counts[DNSSEC_KASP_ACTIVE], 2);
    assert_int_equal(counts[DNSSEC_KASP_REMOVED], 2);
    char *status = dnssec_kasp_status_text(s.st, &s.pol, s.now);
    assert_non_null(status);
    assert_non_null(strstr(status, "ZSK 1004 alg 13 active id Kexample.test.+013+01004: "));
    assert_non_null(strstr(status, "ZSK 1002 alg 13 removed"));
    assert_non_null(strstr(status, "zone: next event at 2027-04-15T"));
    assert_non_null(strstr(status, "ZSK rollover starts (lifetime of ZSK 1004)"));
    free(status);
    sim_free(&s);
}

static void test_manual_ksk_rollover_late_ds(void **state)
{
    (void)state;
    sim_t s;
    sim_init(&s);
    s.pol.zsk_lifetime = 0; /* only the KSK moves */
    sign_zone(&s);
    char err[256];
    int64_t t = s.now + 3600;
    s.now = t;
    assert_int_equal(dnssec_kasp_rollover(s.st, &s.pol, DNSSEC_KASP_KSK, t, err, 256), 0);
    assert_int_equal(dnssec_kasp_rollover(s.st, &s.pol, DNSSEC_KASP_KSK, t, err, 256), TERN_EAGAIN);
    assert_non_null(strstr(err, "already asked"));
    sim_step(&s);
    assert_true(logged(&s, "KSK 1003: generated → published"));
    /* Double signature: the new KSK signs DNSKEY at once, the old one keeps the CDS. */
    expect_flags(&s, 1003, DNSSEC_KASP_PUBLISHED, true, true, false, false);
    expect_flags(&s, 1001, DNSSEC_KASP_ACTIVE, true, true, false, true);
    assert_int_equal(dnssec_kasp_rollover(s.st, &s.pol, DNSSEC_KASP_KSK, t, err, 256), TERN_EAGAIN);
    assert_non_null(strstr(err, "KSK 1003 is published"));
    sim_jump(&s, t + D + P);
    expect_flags(&s, 1003, DNSSEC_KASP_READY, true, true, false, true);
    expect_flags(&s, 1001, DNSSEC_KASP_ACTIVE, true, true, false, false);
    assert_int_equal(s.plan.nds_wanted, 1);
    assert_int_equal(s.plan.ds_wanted[0], 1003);
    assert_int_equal(s.plan.next_event, 0);
    assert_string_equal(s.plan.next_what, "nothing scheduled");
    /* The parent takes ten days: nothing moves meanwhile. */
    for (int day = 1; day <= 10; day++) {
        s.now = t + D + P + day * 86400;
        sim_step(&s);
        assert_int_equal(s.nlog, 0);
        expect_flags(&s, 1001, DNSSEC_KASP_ACTIVE, true, true, false, false);
    }
    int64_t seen = s.now + 77;
    s.now = seen;
    sim_ds_seen(&s, 1003);
    sim_step(&s);
    assert_true(logged(&s, "KSK 1003: ready → active"));
    assert_true(logged(&s, "KSK 1001: active → retired"));
    /* The old DS may be cached parent_ds_ttl + Dprp: the old KSK stays and signs until then. */
    expect_flags(&s, 1001, DNSSEC_KASP_RETIRED, true, true, false, false);
    sim_jump(&s, seen + S + P);
    expect_flags(&s, 1001, DNSSEC_KASP_REMOVED, false, false, false, false);
    expect_flags(&s, 1003, DNSSEC_KASP_ACTIVE, true, true, false, true);
    assert_int_equal(s.plan.next_event, 0);
    /* Another may start now, as a KSK rollover (a CSK one is refused: the zone has a KSK). */
    assert_int_equal(dnssec_kasp_rollover(s.st, &s.pol, DNSSEC_KASP_CSK, s.now, err, 256),
                     TERN_EINVAL);
    assert_non_null(strstr(err, "no CSK rollover: the zone signs with a KSK 1003 (roll the KSK)"));
    assert_int_equal(dnssec_kasp_rollover(s.st, &s.pol, DNSSEC_KASP_KSK, s.now, err, 256), 0);
    sim_free(&s);
}

static void test_algorithm_rollover(void **state)
{
    (void)state;
    sim_t s;
    sim_init(&s);
    sign_zone(&s);
    char err[256];
    s.now += 3600;
    int64_t t = s.now;
    s.pol.algorithm = 15;
    sim_step(&s);
    /* The new keys sign first, out of DNSKEY. */
    assert_true(logged(&s, "KSK 1003: generated → pre-active"));
    assert_true(logged(&s, "ZSK 1004: generated → pre-active"));
    expect_flags(&s, 1003, DNSSEC_KASP_PRE_ACTIVE, false, true, false, false);
    expect_flags(&s, 1004, DNSSEC_KASP_PRE_ACTIVE, false, false, true, false);
    expect_flags(&s, 1002, DNSSEC_KASP_ACTIVE, true, false, true, false);
    assert_int_equal(pk_of(&s.plan, 1004)->alg, 15);
    assert_int_equal(dnssec_kasp_rollover(s.st, &s.pol, DNSSEC_KASP_ZSK, t, err, 256), TERN_EAGAIN);
    assert_non_null(strstr(err, "algorithm rollover"));
    /* Every cached RRset has the new signatures after the zone's max TTL: publish. */
    sim_jump(&s, t + M + P);
    expect_flags(&s, 1003, DNSSEC_KASP_PUBLISHED, true, true, false, false);
    expect_flags(&s, 1004, DNSSEC_KASP_PUBLISHED, true, false, true, false);
    expect_flags(&s, 1001, DNSSEC_KASP_ACTIVE, true, true, false, true);
    sim_jump(&s, t + M + P + D + P);
    expect_flags(&s, 1003, DNSSEC_KASP_READY, true, true, false, true);
    expect_flags(&s, 1004, DNSSEC_KASP_ACTIVE, true, false, true, false);
    expect_flags(&s, 1001, DNSSEC_KASP_ACTIVE, true, true, false, false);
    expect_flags(&s, 1002, DNSSEC_KASP_ACTIVE, true, false, true, false);
    assert_int_equal(s.plan.ds_wanted[0], 1003);
    assert_int_equal(s.plan.next_event, 0);
    s.now += 5 * 3600;
    int64_t seen = s.now;
    sim_ds_seen(&s, 1003);
    sim_step(&s);
    assert_true(logged(&s, "KSK 1001: active → retired"));
    expect_flags(&s, 1001, DNSSEC_KASP_RETIRED, true, true, false, false);
    /* The old DS out of every cache: the old algorithm leaves DNSKEY, its ZSK keeps signing. */
    sim_jump(&s, seen + S + P);
    assert_true(logged(&s, "ZSK 1002: active → post-active"));
    assert_true(logged(&s, "KSK 1001: retired → post-active"));
    expect_flags(&s, 1001, DNSSEC_KASP_POST_ACTIVE, false, false, false, false);
    expect_flags(&s, 1002, DNSSEC_KASP_POST_ACTIVE, false, false, true, false);
    sim_jump(&s, seen + S + P + D + P);
    expect_flags(&s, 1001, DNSSEC_KASP_REMOVED, false, false, false, false);
    expect_flags(&s, 1002, DNSSEC_KASP_REMOVED, false, false, false, false);
    expect_flags(&s, 1003, DNSSEC_KASP_ACTIVE, true, true, false, true);
    expect_flags(&s, 1004, DNSSEC_KASP_ACTIVE, true, false, true, false);
    /* The new ZSK's lifetime runs from its activation. */
    assert_int_equal(s.plan.next_event, t + M + P + D + P + L - D - P);
    sim_jump(&s, 0);
    assert_true(logged(&s, "ZSK 1005: generated → published"));
    assert_int_equal(pk_of(&s.plan, 1005)->alg, 15);
    sim_free(&s);
}

static void test_csk_rollover(void **state)
{
    (void)state;
    sim_t s;
    sim_init(&s);
    s.pol.csk = true;
    s.pol.ksk_lifetime = 365 * 86400;
    sim_step(&s);
    assert_true(logged(&s, "CSK 1001: generated → published"));
    expect_flags(&s, 1001, DNSSEC_KASP_PUBLISHED, true, true, true, false);
    sim_jump(&s, T0 + M + P);
    expect_flags(&s, 1001, DNSSEC_KASP_READY, true, true, true, true);
    sim_ds_seen(&s, 1001);
    sim_step(&s);
    expect_flags(&s, 1001, DNSSEC_KASP_ACTIVE, true, true, true, true);
    char err[256];
    assert_int_equal(dnssec_kasp_rollover(s.st, &s.pol, DNSSEC_KASP_ZSK, s.now, err, 256),
                     TERN_ENOENT);
    assert_non_null(strstr(err, "CSK"));
    /* a CSK is rolled as a CSK: asking for a KSK rollover says what the zone has */
    assert_int_equal(dnssec_kasp_rollover(s.st, &s.pol, DNSSEC_KASP_KSK, s.now, err, 256),
                     TERN_EINVAL);
    assert_non_null(strstr(err, "no KSK rollover: the zone signs with a CSK 1001 (roll the CSK)"));
    int64_t act = s.now;
    /* By lifetime: the successor's DS is wanted exactly at the end of it. */
    sim_jump(&s, act + 365 * 86400 - D - P);
    expect_flags(&s, 1002, DNSSEC_KASP_PUBLISHED, true, true, true, false);
    sim_jump(&s, act + 365 * 86400);
    expect_flags(&s, 1002, DNSSEC_KASP_READY, true, true, true, true);
    expect_flags(&s, 1001, DNSSEC_KASP_ACTIVE, true, true, true, false);
    sim_ds_seen(&s, 1002);
    sim_step(&s);
    expect_flags(&s, 1001, DNSSEC_KASP_RETIRED, true, true, true, false);
    /* A CSK's signatures may be cached the zone's max TTL too. */
    sim_jump(&s, s.now + M + P);
    expect_flags(&s, 1001, DNSSEC_KASP_REMOVED, false, false, false, false);
    sim_free(&s);
}

/* A KSK rollover by lifetime whose DS the parent has before the new KSK is even ready: the swap
 * waits for ready, then happens at once. */
static void test_ksk_lifetime_early_ds(void **state)
{
    (void)state;
    sim_t s;
    sim_init(&s);
    s.pol.zsk_lifetime = 0;
    s.pol.ksk_lifetime = 100 * 86400;
    sign_zone(&s);
    int64_t act = key_of(&s, 1001)->active;
    assert_int_equal(s.plan.next_event, act + 100 * 86400 - D - P);
    assert_string_equal(s.plan.next_what, "KSK rollover starts (lifetime of KSK 1001)");
    sim_jump(&s, act + 100 * 86400 - D - P);
    expect_flags(&s, 1003, DNSSEC_KASP_PUBLISHED, true, true, false, false);
    s.now += 60;
    sim_ds_seen(&s, 1003);
    sim_step(&s);
    assert_int_equal(s.nlog, 0);
    sim_jump(&s, act + 100 * 86400);
    assert_true(logged(&s, "KSK 1003: published → ready"));
    assert_true(logged(&s, "KSK 1003: ready → active"));
    assert_true(logged(&s, "KSK 1001: active → retired"));
    assert_int_equal(s.plan.nds_wanted, 0);
    sim_jump(&s, act + 100 * 86400 + S + P);
    expect_flags(&s, 1001, DNSSEC_KASP_REMOVED, false, false, false, false);
    assert_int_equal(s.plan.next_event, act + 200 * 86400 - D - P);
    sim_free(&s);
}

/* A new algorithm in the policy while the first DS is still awaited: the ZSK keeps rolling in
 * the old algorithm; the algorithm rollover starts once the DS is in and that rollover is over. */
static void test_algorithm_change_waits(void **state)
{
    (void)state;
    sim_t s;
    sim_init(&s);
    sim_step(&s);
    sim_jump(&s, T0 + M + P);
    s.pol.algorithm = 15;
    char err[256];
    assert_int_equal(dnssec_kasp_rollover(s.st, &s.pol, DNSSEC_KASP_KSK, s.now, err, 256),
                     TERN_EAGAIN);
    assert_string_equal(err, "no KSK rollover: KSK 1001 is ready, not yet active (its DS is not "
                             "seen at the parent yet)");
    sim_step(&s);
    assert_int_equal(s.plan.ngenerate, 0);
    sim_jump(&s, T0 + L - D - P);
    assert_true(logged(&s, "ZSK 1003: generated → published"));
    assert_int_equal(pk_of(&s.plan, 1003)->alg, 13);
    sim_ds_seen(&s, 1001);
    sim_step(&s);
    assert_true(logged(&s, "KSK 1001: ready → active"));
    assert_int_equal(s.nlog, 1); /* the ZSK rollover runs: no new algorithm yet */
    sim_jump(&s, T0 + L);
    sim_jump(&s, T0 + L + M + P);
    assert_true(logged(&s, "ZSK 1002: retired → removed"));
    assert_true(logged(&s, "KSK 1004: generated → pre-active"));
    assert_true(logged(&s, "ZSK 1005: generated → pre-active"));
    assert_int_equal(pk_of(&s.plan, 1005)->alg, 15);
    sim_free(&s);
}

static void test_unsign_cds_delete(void **state)
{
    (void)state;
    sim_t s;
    sim_init(&s);
    sign_zone(&s);
    char err[256];
    s.now += 600;
    assert_int_equal(dnssec_kasp_ds_gone(s.st, s.now, err, 256), TERN_EINVAL);
    assert_int_equal(dnssec_kasp_unsign(s.st, s.now, err, 256), 0);
    assert_int_equal(dnssec_kasp_unsign(s.st, s.now, err, 256), TERN_EINVAL);
    assert_int_equal(dnssec_kasp_rollover(s.st, &s.pol, DNSSEC_KASP_ZSK, s.now, err, 256),
                     TERN_EAGAIN);
    assert_non_null(strstr(err, "unsigned"));
    sim_step(&s);
    assert_true(s.plan.cds_delete);
    expect_flags(&s, 1001, DNSSEC_KASP_ACTIVE, true, true, false, false);
    expect_flags(&s, 1002, DNSSEC_KASP_ACTIVE, true, false, true, false);
    assert_int_equal(s.plan.nds_wanted, 0);
    assert_int_equal(s.plan.ngenerate, 0);
    assert_int_equal(s.plan.next_event, 0); /* waits for the parent */
    assert_int_equal(dnssec_kasp_ds_seen(s.st, 1001, s.now, err, 256), TERN_EINVAL);
    /* Past the ZSK's lifetime: no rollover while unsigning. */
    s.now = T0 + L + 86400;
    sim_step(&s);
    assert_int_equal(s.plan.ngenerate, 0);
    assert_true(s.plan.cds_delete);
    char *status = dnssec_kasp_status_text(s.st, &s.pol, s.now);
    assert_non_null(strstr(status, "waits for the parent's DS to go"));
    free(status);
    int64_t gone = s.now;
    assert_int_equal(dnssec_kasp_ds_gone(s.st, gone, err, 256), 0);
    for (size_t i = 0; i < s.plan.nkeys; i++)
        if (s.ds_parent[i]) {
            s.ds_parent[i] = false;
            s.ds_drop[i] = gone;
        }
    sim_step(&s);
    assert_int_equal(s.plan.next_event, gone + S + P);
    assert_true(s.plan.cds_delete);
    sim_jump(&s, gone + S + P);
    expect_flags(&s, 1001, DNSSEC_KASP_REMOVED, false, false, false, false);
    expect_flags(&s, 1002, DNSSEC_KASP_REMOVED, false, false, false, false);
    assert_false(s.plan.cds_delete);
    assert_true(s.plan.unsigned_zone);
    assert_int_equal(s.plan.ngenerate, 0);
    assert_int_equal(s.plan.next_event, 0);
    sim_free(&s);
}

/* ---- refusals ------------------------------------------------------------------------------- */

static void test_policy_check(void **state)
{
    (void)state;
    dnssec_kasp_policy_t p;
    char err[256];
    dnssec_kasp_policy_default(&p);
    assert_int_equal(dnssec_kasp_policy_check(&p, err, sizeof(err)), 0);
    p.algorithm = 5;
    assert_int_equal(dnssec_kasp_policy_check(&p, err, sizeof(err)), TERN_EINVAL);
    assert_string_equal(err, "algorithm 5 is not supported: use 8, 13 or 15");
    dnssec_kasp_policy_default(&p);
    p.algorithm = 8;
    p.rsa_bits = 512;
    assert_int_equal(dnssec_kasp_policy_check(&p, err, sizeof(err)), TERN_EINVAL);
    assert_string_equal(err, "rsa_bits 512 is out of range: 1024..4096");
    dnssec_kasp_policy_default(&p);
    p.zsk_lifetime = 3600;
    assert_int_equal(dnssec_kasp_policy_check(&p, err, sizeof(err)), TERN_EINVAL);
    assert_string_equal(err, "zsk_lifetime 3600 s is shorter than the ZSK rollover it needs: "
                             "dnskey_ttl + zone_max_ttl + 2 x propagation_delay = 97200 s");
    dnssec_kasp_policy_default(&p);
    p.ksk_lifetime = 86400;
    assert_int_equal(dnssec_kasp_policy_check(&p, err, sizeof(err)), TERN_EINVAL);
    assert_string_equal(err, "ksk_lifetime 86400 s is shorter than the KSK rollover it needs: "
                             "dnskey_ttl + parent_ds_ttl + 2 x propagation_delay = 97200 s");
    dnssec_kasp_policy_default(&p);
    p.cds_digest = 1;
    assert_int_equal(dnssec_kasp_policy_check(&p, err, sizeof(err)), TERN_EINVAL);
    assert_non_null(strstr(err, "cds_digest 1"));
    dnssec_kasp_policy_default(&p);
    p.propagation_delay = -1;
    assert_int_equal(dnssec_kasp_policy_check(&p, err, sizeof(err)), TERN_EINVAL);
    assert_non_null(strstr(err, "propagation_delay -1"));
    dnssec_kasp_policy_default(&p);
    p.parent_ds_ttl = 3000000000u;
    assert_int_equal(dnssec_kasp_policy_check(&p, err, sizeof(err)), TERN_EINVAL);
    assert_non_null(strstr(err, "parent_ds_ttl 3000000000"));
    /* A step with such a policy changes nothing. */
    dnssec_kasp_t *st = dnssec_kasp_new();
    dnssec_kasp_plan_t plan;
    assert_int_equal(dnssec_kasp_step(st, &p, T0, &plan), TERN_EINVAL);
    assert_int_equal(dnssec_kasp_key_count(st), 0);
    dnssec_kasp_free(st);
}

/* DS seen by tag: the key waiting for it, even beside an active key of the same tag in another
 * algorithm; two waiting keys with one tag are refused. */
static void test_ds_seen_tags(void **state)
{
    (void)state;
    char err[256];
    dnssec_kasp_t *st = dnssec_kasp_new();
    dnssec_kasp_policy_t pol;
    dnssec_kasp_policy_default(&pol);
    dnssec_kasp_plan_t p;
    assert_int_equal(dnssec_kasp_add_key(st, DNSSEC_KASP_KSK, 13, 7, "a", T0, err, 256), 0);
    assert_int_equal(dnssec_kasp_add_key(st, DNSSEC_KASP_ZSK, 13, 8, "b", T0, err, 256), 0);
    assert_int_equal(dnssec_kasp_step(st, &pol, T0, &p), 0);
    assert_int_equal(dnssec_kasp_step(st, &pol, T0 + 90000, &p), 0);
    assert_int_equal(dnssec_kasp_ds_seen(st, 7, T0 + 90000, err, 256), 0);
    assert_int_equal(dnssec_kasp_step(st, &pol, T0 + 90000, &p), 0);
    assert_int_equal(p.keys[0].state, DNSSEC_KASP_ACTIVE);
    pol.algorithm = 15; /* the new KSK takes the old one's tag */
    assert_int_equal(dnssec_kasp_step(st, &pol, T0 + 90000, &p), 0);
    assert_int_equal(p.ngenerate, 2);
    assert_int_equal(dnssec_kasp_add_key(st, DNSSEC_KASP_KSK, 15, 7, "c", T0 + 90000, err, 256), 0);
    assert_int_equal(dnssec_kasp_add_key(st, DNSSEC_KASP_ZSK, 15, 9, "d", T0 + 90000, err, 256), 0);
    assert_int_equal(dnssec_kasp_step(st, &pol, T0 + 90000, &p), 0);
    assert_int_equal(dnssec_kasp_step(st, &pol, T0 + 200000, &p), 0);
    assert_int_equal(p.keys[2].state, DNSSEC_KASP_PUBLISHED);
    assert_int_equal(dnssec_kasp_ds_seen(st, 7, T0 + 200000, err, 256), 0);
    assert_int_equal(dnssec_kasp_key_at(st, 2)->ds_seen, T0 + 200000);
    assert_int_equal(dnssec_kasp_key_at(st, 0)->ds_seen, T0 + 90000);
    /* Seen again: both have it, nothing changes. */
    assert_int_equal(dnssec_kasp_ds_seen(st, 7, T0 + 300000, err, 256), 0);
    assert_int_equal(dnssec_kasp_key_at(st, 2)->ds_seen, T0 + 200000);
    dnssec_kasp_free(st);
    /* Two keys wait with one tag (a state only a hand could write): which DS is it? */
    const char *two = "tern-kasp 1\nzone unsign=0 ds_gone=0 roll_ksk=0 roll_zsk=0\n"
                      "key id=a tag=7 alg=13 role=ksk created=5 pre_active=0 publish=5 ready=9 "
                      "active=0 retire=0 post_active=0 remove=0 ds_submitted=9 ds_seen=0\n"
                      "key id=b tag=7 alg=15 role=ksk created=5 pre_active=0 publish=5 ready=9 "
                      "active=0 retire=0 post_active=0 remove=0 ds_submitted=9 ds_seen=0\n"
                      "end keys=2\n";
    assert_int_equal(dnssec_kasp_from_text(two, "mem", &st, err, sizeof(err)), 0);
    assert_int_equal(dnssec_kasp_ds_seen(st, 7, T0, err, 256), TERN_EEXIST);
    assert_string_equal(err, "KSKs a and b both have tag 7: say which DS by removing one");
    dnssec_kasp_free(st);
}

static void test_add_key_refusals(void **state)
{
    (void)state;
    dnssec_kasp_t *st = dnssec_kasp_new();
    char err[256];
    assert_int_equal(dnssec_kasp_add_key(st, DNSSEC_KASP_ZSK, 13, 1, "", T0, err, 256),
                     TERN_EINVAL);
    assert_int_equal(dnssec_kasp_add_key(st, DNSSEC_KASP_ZSK, 13, 1, "a b", T0, err, 256),
                     TERN_EINVAL);
    assert_non_null(strstr(err, "blank"));
    assert_int_equal(dnssec_kasp_add_key(st, DNSSEC_KASP_ZSK, 13, 1, "a=b", T0, err, 256),
                     TERN_EINVAL);
    char longid[300];
    memset(longid, 'k', 256);
    longid[256] = '\0';
    assert_int_equal(dnssec_kasp_add_key(st, DNSSEC_KASP_ZSK, 13, 1, longid, T0, err, 256),
                     TERN_EINVAL);
    longid[255] = '\0';
    assert_int_equal(dnssec_kasp_add_key(st, DNSSEC_KASP_ZSK, 13, 1, longid, T0, err, 256), 0);
    assert_int_equal(dnssec_kasp_add_key(st, DNSSEC_KASP_ZSK, 7, 2, "k2", T0, err, 256),
                     TERN_EINVAL);
    assert_int_equal(dnssec_kasp_add_key(st, DNSSEC_KASP_KSK, 13, 2, longid, T0, err, 256),
                     TERN_EEXIST);
    assert_int_equal(dnssec_kasp_add_key(st, DNSSEC_KASP_KSK, 13, 1, "k3", T0, err, 256),
                     TERN_EEXIST);
    assert_non_null(strstr(err, "tag 1"));
    /* The same tag in another algorithm is another key. */
    assert_int_equal(dnssec_kasp_add_key(st, DNSSEC_KASP_KSK, 15, 1, "k3", T0, err, 256), 0);
    dnssec_kasp_free(st);
}

/* A full state forgets its oldest removed key to make room; one with no removed key refuses. */
static void test_full_state_forgets_history(void **state)
{
    (void)state;
    char *text = malloc(32 * 400 + 200), err[256];
    size_t off = (size_t)sprintf(text, "tern-kasp 1\nzone unsign=0 ds_gone=0 roll_ksk=0 "
                                       "roll_zsk=0\n");
    for (int i = 0; i < DNSSEC_KASP_KEYS_MAX; i++) {
        /* key 0 removed last, key 1 first: key 1 is the one forgotten */
        long long rm = i == 0 ? T0 + 5000 : i == 1 ? T0 + 10 : T0 + 100 + i;
        off += (size_t)sprintf(text + off,
                               "key id=k%d tag=%d alg=13 role=zsk created=%lld pre_active=0 "
                               "publish=%lld ready=%lld active=%lld retire=%lld post_active=0 "
                               "remove=%lld ds_submitted=0 ds_seen=0\n",
                               i, i, T0, T0, T0, T0, T0 + 1, rm);
    }
    sprintf(text + off, "end keys=%d\n", DNSSEC_KASP_KEYS_MAX);
    dnssec_kasp_t *st = NULL;
    assert_int_equal(dnssec_kasp_from_text(text, "mem", &st, err, sizeof(err)), 0);
    assert_int_equal(dnssec_kasp_add_key(st, DNSSEC_KASP_ZSK, 13, 500, "new", T0 + 9000, err, 256),
                     0);
    assert_int_equal(dnssec_kasp_key_count(st), DNSSEC_KASP_KEYS_MAX);
    assert_string_equal(dnssec_kasp_key_at(st, 0)->id, "k0");
    assert_string_equal(dnssec_kasp_key_at(st, 1)->id, "k2");
    assert_string_equal(dnssec_kasp_key_at(st, DNSSEC_KASP_KEYS_MAX - 1)->id, "new");
    dnssec_kasp_free(st);
    /* With no key removed, a 33rd key is refused. */
    dnssec_kasp_t *live = dnssec_kasp_new();
    for (int i = 0; i < DNSSEC_KASP_KEYS_MAX; i++) {
        char id[16];
        snprintf(id, sizeof(id), "k%d", i);
        assert_int_equal(
            dnssec_kasp_add_key(live, DNSSEC_KASP_ZSK, 13, (uint16_t)i, id, T0, err, 256), 0);
    }
    assert_int_equal(dnssec_kasp_add_key(live, DNSSEC_KASP_ZSK, 13, 99, "k99", T0, err, 256),
                     TERN_ELIMIT);
    assert_non_null(strstr(err, "32 live keys"));
    dnssec_kasp_free(live);
    free(text);
}

/* ---- the state file ------------------------------------------------------------------------- */

static char *signed_state_text(sim_t *s)
{
    sim_init(s);
    sign_zone(s);
    char *t = dnssec_kasp_to_text(s->st);
    assert_non_null(t);
    return t;
}

static void test_state_file_format(void **state)
{
    (void)state;
    sim_t s;
    char *text = signed_state_text(&s);
    int64_t r = T0 + M + P, a = r + 2 * 86400;
    char want[1024];
    snprintf(want, sizeof(want),
             "tern-kasp 1\n"
             "zone unsign=0 ds_gone=0 roll_ksk=0 roll_zsk=0\n"
             "key id=Kexample.test.+013+01001 tag=1001 alg=13 role=ksk created=%lld "
             "pre_active=0 publish=%lld ready=%lld active=%lld retire=0 post_active=0 remove=0 "
             "ds_submitted=%lld ds_seen=%lld\n"
             "key id=Kexample.test.+013+01002 tag=1002 alg=13 role=zsk created=%lld "
             "pre_active=0 publish=%lld ready=%lld active=%lld retire=0 post_active=0 remove=0 "
             "ds_submitted=0 ds_seen=0\n"
             "end keys=2\n",
             T0, T0, (long long)r, (long long)a, (long long)r, (long long)a, T0, T0, T0, T0);
    assert_string_equal(text, want);
    free(text);
    sim_free(&s);
}

static void test_state_file_refused(void **state)
{
    (void)state;
    sim_t s;
    char *good = signed_state_text(&s);
    char err[256];
    dnssec_kasp_t *st = NULL;
    size_t len = strlen(good);
    struct {
        const char *from, *to; /* replace the first `from` by `to` */
        const char *msg;
    } cases[] = {
        {"tern-kasp 1", "tern-kasp 2", "mem:1: not a tern key-state file of version 1"},
        {"end keys=2", "end keys=3", "mem:5: end says 3 keys"},
        {"tag=1002", "tag=70000", "mem:4: key: tag=70000 is not 0..65535"},
        {"tag=1002", "tag=01002", "mem:4: key: tag=01002"},
        {"role=zsk", "role=ZSK", "mem:4: key: role=ZSK is not ksk, zsk or csk"},
        {" ds_seen=0\n", " ds_seen=0 colour=red\n", "mem:4: key: unknown field colour"},
        {" ds_seen=0\n", "\n", "mem:4: key: field ds_seen is missing"},
        {"alg=13 role=zsk", "alg=5 role=zsk", "mem:4: key: alg=5 is not 8, 13 or 15"},
        {"+01002", "+01001", "mem:4: key id Kexample.test.+013+01001 is given twice"},
        {"tag=1002 alg=13 role=zsk", "tag=1002 tag=1 alg=13 role=zsk",
         "mem:4: field tag is "
         "given twice"},
        {"roll_zsk=0", "roll_zsk=2", "mem:2: zone: roll_zsk=2 is not a valid value"},
        {"ds_gone=0", "ds_gone=5", "mem:2: zone: ds_gone is set but unsign is not"},
        {"end keys=2\n", "end keys=2\nkey x\n", "mem:6: a line after end"},
        {"zone unsign", "zone  unsign", "mem:2: field \"\" is not name=value"},
        {"key id=Kexample.test.+013+01002", "kye id=Kexample.test.+013+01002",
         "mem:4: unknown record"},
        {"role=zsk created=", "role=zsk ready=1 created=", "mem:4: field ready is given twice"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char *bad = malloc(len + 64);
        const char *at = strstr(good, cases[i].from);
        assert_non_null(at);
        size_t pre = (size_t)(at - good);
        snprintf(bad, len + 64, "%.*s%s%s", (int)pre, good, cases[i].to,
                 at + strlen(cases[i].from));
        int rc = dnssec_kasp_from_text(bad, "mem", &st, err, sizeof(err));
        if (rc != TERN_ESYNTAX || strncmp(err, cases[i].msg, strlen(cases[i].msg)) != 0)
            fail_msg("case %zu: rc %d, err \"%s\", wanted \"%s\"", i, rc, err, cases[i].msg);
        assert_null(st);
        free(bad);
    }
    /* Impossible orders of events: ready without publish, a ZSK with a DS. */
    char *bad = strdup(good);
    char *k = strstr(bad, "role=ksk");
    memcpy(strstr(k, "publish=") + 8, "0", 1);
    memmove(strstr(k, "publish=") + 9, strstr(k, " ready="), strlen(strstr(k, " ready=")) + 1);
    assert_int_equal(dnssec_kasp_from_text(bad, "mem", &st, err, sizeof(err)), TERN_ESYNTAX);
    assert_non_null(strstr(err, "mem:3: key Kexample.test.+013+01001: ready without"));
    free(bad);
    /* Every truncation is refused: at a line's end (no end record) or within a line. */
    for (size_t cut = 0; cut < len; cut++) {
        char *t = strndup(good, cut);
        int rc = dnssec_kasp_from_text(t, "mem", &st, err, sizeof(err));
        if (rc == 0)
            fail_msg("truncated at %zu of %zu: accepted", cut, len);
        assert_null(st);
        assert_int_equal(strncmp(err, "mem:", 4), 0);
        free(t);
    }
    /* On disk: the path and line are named; a missing file is ENOENT. */
    char path[64];
    snprintf(path, sizeof(path), "/tmp/test_kasp_bad.%d", (int)getpid());
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fwrite(good, 1, len - 5, f);
    fclose(f);
    assert_int_equal(dnssec_kasp_load(path, &st, err, sizeof(err)), TERN_ESYNTAX);
    char want[128];
    snprintf(want, sizeof(want), "%s:5: the last line has no newline: the file is truncated", path);
    assert_string_equal(err, want);
    /* A NUL byte: not a text file at all. */
    f = fopen(path, "w");
    assert_non_null(f);
    fwrite(good, 1, len + 1, f);
    fclose(f);
    assert_int_equal(dnssec_kasp_load(path, &st, err, sizeof(err)), TERN_ESYNTAX);
    snprintf(want, sizeof(want), "%s: holds a NUL byte: not a text file", path);
    assert_string_equal(err, want);
    unlink(path);
    assert_int_equal(dnssec_kasp_load(path, &st, err, sizeof(err)), TERN_ENOENT);
    assert_null(st);
    /* A good file loads. */
    assert_int_equal(dnssec_kasp_save(s.st, path, err, sizeof(err)), 0);
    assert_int_equal(dnssec_kasp_load(path, &st, err, sizeof(err)), 0);
    char *back = dnssec_kasp_to_text(st);
    assert_string_equal(back, good);
    free(back);
    dnssec_kasp_free(st);
    unlink(path);
    free(good);
    sim_free(&s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_initial_signing),
        cmocka_unit_test(test_zsk_rollovers_by_lifetime),
        cmocka_unit_test(test_manual_ksk_rollover_late_ds),
        cmocka_unit_test(test_algorithm_rollover),
        cmocka_unit_test(test_csk_rollover),
        cmocka_unit_test(test_ksk_lifetime_early_ds),
        cmocka_unit_test(test_algorithm_change_waits),
        cmocka_unit_test(test_unsign_cds_delete),
        cmocka_unit_test(test_policy_check),
        cmocka_unit_test(test_ds_seen_tags),
        cmocka_unit_test(test_add_key_refusals),
        cmocka_unit_test(test_full_state_forgets_history),
        cmocka_unit_test(test_state_file_format),
        cmocka_unit_test(test_state_file_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
