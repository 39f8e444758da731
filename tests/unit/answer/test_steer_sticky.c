/*
 * Unit tests for the sticky order (steer_sticky.c, issue 33): the picks' distribution against the
 * weights (chi-square goodness of fit over 100,000 client networks), the share of clients that
 * move when one record of N is removed or added (<= 1.2/N, and only those that must), the same
 * answer for every address of a network and across queries, count multi's order, the ECS scope,
 * weights of 0, and no allocation.
 *
 * The client networks are a fixed sequence (10.x.y.0/24), so every figure here is deterministic.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "tern/common/mem.h"
#include "test_util.h"

#include "steer_test_util.h"

#define CLIENTS 100000u

/* The address of client network i (a /24) and a host in it. */
static const char *client(unsigned i, unsigned host, char *buf)
{
    snprintf(buf, 32, "10.%u.%u.%u", (i >> 8) & 255, i & 255, host);
    if (i >= 65536) /* past 10/8's 65536 /24s: 11.x.y */
        snprintf(buf, 32, "11.%u.%u.%u", ((i - 65536) >> 8) & 255, (i - 65536) & 255, host);
    return buf;
}

static uint8_t pick1(const zone_geo_t *g, unsigned i, unsigned host)
{
    char a[32];
    uint8_t out[32];
    assert_int_equal(stu_pick(g, client(i, host, a), out), 1);
    return out[0];
}

static const char *sticky_set(char *buf, size_t len, const char *filter, unsigned first, unsigned n,
                              const char *(*extra)(unsigned, char *))
{
    char recs[4096];
    snprintf(buf, len, "{\"filter\": {%s}, \"records\": %s}", filter,
             stu_records(recs, sizeof(recs), first, n, extra));
    return buf;
}

static const char *weight_i(unsigned i, char *tmp)
{
    snprintf(tmp, 64, "\"weight\": %u", i + 1); /* 1, 2, 3, 4 */
    return tmp;
}

static const char *weight_from2(unsigned i, char *tmp)
{
    snprintf(tmp, 64, "\"weight\": %u", i + 2); /* records 2.. keep weight_i()'s weights */
    return tmp;
}

static const char *no_extra(unsigned i, char *tmp)
{
    (void)i;
    tmp[0] = 0;
    return tmp;
}

#define SINGLE "\"count\": \"single\", \"order\": \"sticky\""

/* Weights 1:2:3:4 over 100,000 networks: chi-square with 3 degrees of freedom below 16.266, the
 * critical value at p = 0.001. */
static void test_chi_square(void **st)
{
    (void)st;
    char set[8192];
    zone_t *z;
    const zone_geo_t *g = stu_build(NULL, sticky_set(set, sizeof(set), SINGLE, 1, 4, weight_i), &z);
    unsigned count[5] = {0};
    for (unsigned i = 0; i < CLIENTS; i++)
        count[pick1(g, i, 1)]++;
    double chi = 0;
    for (unsigned k = 1; k <= 4; k++) {
        double want = CLIENTS * k / 10.0;
        chi += (count[k] - want) * (count[k] - want) / want;
    }
    printf("sticky chi-square (df 3): %.3f; picks %u %u %u %u\n", chi, count[1], count[2], count[3],
           count[4]);
    assert_true(chi < 16.266);
    assert_int_equal(stu_ctx.info.steer.rules, ANSWER_STEER_STICKY);
    assert_int_equal(stu_ctx.info.steer.sticky_prefix, 24);
    zone_free(z);
    /* equal weights (no log taken: steer_sticky.c): uniform over 8, chi-square with 7 degrees
     * of freedom below 24.322, the critical value at p = 0.001 */
    g = stu_build(NULL, sticky_set(set, sizeof(set), SINGLE, 1, 8, NULL), &z);
    unsigned eq[9] = {0};
    for (unsigned i = 0; i < CLIENTS; i++)
        eq[pick1(g, i, 1)]++;
    chi = 0;
    for (unsigned k = 1; k <= 8; k++) {
        double want = CLIENTS / 8.0;
        chi += (eq[k] - want) * (eq[k] - want) / want;
    }
    printf("sticky chi-square, equal weights (df 7): %.3f\n", chi);
    assert_true(chi < 24.322);
    zone_free(z);
}

/* Removing record k of N moves exactly the clients that had it (about 1/N); adding one takes
 * about 1/(N+1), each from wherever it was. Both <= 1.2/N, for N = 2..16. */
static void test_movement(void **st)
{
    (void)st;
    enum { NET = 20000 };
    static uint8_t before[NET], after[NET];
    char set[8192];
    for (unsigned n = 2; n <= 16; n++) {
        zone_t *z;
        /* records 1..n */
        const zone_geo_t *g = stu_build(NULL, sticky_set(set, sizeof(set), SINGLE, 1, n, NULL), &z);
        for (unsigned i = 0; i < NET; i++)
            before[i] = pick1(g, i, 9);
        zone_free(z);
        /* record 1 removed (the first: every index after it shifts) */
        g = stu_build(NULL, sticky_set(set, sizeof(set), SINGLE, 2, n - 1, no_extra), &z);
        unsigned moved = 0;
        for (unsigned i = 0; i < NET; i++) {
            after[i] = pick1(g, i, 9);
            if (after[i] != before[i]) {
                moved++;
                assert_int_equal(before[i], 1); /* only the removed record's clients move */
            }
        }
        zone_free(z);
        double fr = (double)moved / NET;
        /* record n+1 added */
        g = stu_build(NULL, sticky_set(set, sizeof(set), SINGLE, 1, n + 1, no_extra), &z);
        unsigned gained = 0;
        for (unsigned i = 0; i < NET; i++) {
            uint8_t p = pick1(g, i, 9);
            if (p != before[i]) {
                gained++;
                assert_int_equal(p, n + 1); /* a client moves only to the new record */
            }
        }
        zone_free(z);
        double fa = (double)gained / NET;
        printf("N=%2u: removed one: %.4f moved, added one: %.4f moved (1/N = %.4f)\n", n, fr, fa,
               1.0 / n);
        assert_true(fr <= 1.2 / n);
        assert_true(fa <= 1.2 / n);
        assert_true(fr > 0.8 / n); /* and it did move them: sticky is not stuck */
    }
}

/* Every host of a network, every time: the same record. Another prefix length (the RRset's
 * sticky_prefix) changes what "a network" is. */
static void test_same_network(void **st)
{
    (void)st;
    char set[8192];
    zone_t *z;
    const zone_geo_t *g = stu_build(NULL, sticky_set(set, sizeof(set), SINGLE, 1, 8, NULL), &z);
    unsigned split16 = 0;
    for (unsigned i = 0; i < 2000; i++) {
        uint8_t p = pick1(g, i, 1);
        for (unsigned h = 2; h < 255; h += 50)
            assert_int_equal(pick1(g, i, h), p);
        split16 += pick1(g, i & ~255u, 1) != p; /* /24s of one /16 differ */
    }
    assert_true(split16 > 1000);
    zone_free(z);
    g = stu_build(
        NULL, sticky_set(set, sizeof(set), SINGLE ", \"sticky_prefix\": {\"v4\": 16}", 1, 8, NULL),
        &z);
    for (unsigned i = 0; i < 2000; i++)
        assert_int_equal(pick1(g, i, 1), pick1(g, i & ~255u, 7)); /* one /16, one answer */
    assert_int_equal(stu_ctx.info.steer.sticky_prefix, 16);
    zone_free(z);
}

/* count multi: all records, in the client's score order: stable across queries, and removing a
 * record leaves the others' order as it was. */
static void test_multi_order(void **st)
{
    (void)st;
    char set[8192], a[32];
    zone_t *z, *z2;
    const zone_geo_t *g =
        stu_build(NULL, sticky_set(set, sizeof(set), "\"order\": \"sticky\"", 1, 6, weight_i), &z);
    const zone_geo_t *g2 = stu_build(
        NULL, sticky_set(set, sizeof(set), "\"order\": \"sticky\"", 2, 5, weight_from2), &z2);
    unsigned firsts[7] = {0};
    for (unsigned i = 0; i < 3000; i++) {
        uint8_t o1[8], o2[8], o3[8];
        /* g2 was built last: its RDATA is the one stu_rd points at; pick from g through z's */
        assert_int_equal(stu_pick(g2, client(i, 1, a), o3), 5);
        const uint8_t *rd2 = stu_rd;
        uint8_t lc[256];
        size_t len = wire_name(lc, "www." STU_ORIGIN);
        stu_rd = zone_node_rrset(zone_find_node(z, lc, len, dname_hash(lc)), WIRE_T_A)->rdata;
        assert_int_equal(stu_pick(g, client(i, 1, a), o1), 6);
        assert_int_equal(stu_pick(g, client(i, 200, a), o2), 6);
        assert_memory_equal(o1, o2, 6);
        firsts[o1[0]]++;
        stu_rd = rd2;
        /* the same order without the record removed */
        unsigned k = 0;
        for (unsigned j = 0; j < 6; j++)
            if (o1[j] != 1)
                assert_int_equal(o3[k++], o1[j]);
    }
    for (unsigned r = 1; r <= 6; r++)
        assert_true(firsts[r] > 0);
    assert_true(firsts[6] > firsts[1]); /* weight 6 leads more often than weight 1 */
    zone_free(z);
    zone_free(z2);
}

/* The ECS scope is the prefix length hashed: the configured one, or less when the resolver sent
 * less; the packet's source when there is no ECS. */
static void test_ecs_scope(void **st)
{
    (void)st;
    char set[8192];
    uint8_t out[8];
    zone_t *z;
    const zone_geo_t *g = stu_build(NULL, sticky_set(set, sizeof(set), SINGLE, 1, 4, NULL), &z);
    assert_int_equal(stu_pick_ecs(g, "10.1.2.3", 32, out), 1);
    assert_int_equal(stu_ctx.scope, 24);
    uint8_t p24 = out[0];
    assert_int_equal(stu_pick_ecs(g, "10.1.2.0", 24, out), 1);
    assert_int_equal(stu_ctx.scope, 24);
    assert_int_equal(out[0], p24); /* the /24 as the resolver sent it: the same network */
    assert_int_equal(stu_pick_ecs(g, "10.1.0.0", 20, out), 1);
    assert_int_equal(stu_ctx.scope, 20);
    assert_int_equal(stu_ctx.info.steer.sticky_prefix, 20);
    assert_int_equal(stu_pick_ecs(g, "2001:db8:1:2::1", 64, out), 1);
    assert_int_equal(stu_ctx.scope, 56);
    assert_int_equal(stu_pick_ecs(g, "2001:db8:1:2::1", 48, out), 1);
    assert_int_equal(stu_ctx.scope, 48);
    /* an IPv4-mapped address in a family 2 option: hashed as IPv4, its prefix less 96 bits; the
     * scope is then written in IPv6 bits (answer_finish.c adds 96 for client_mapped) */
    assert_int_equal(stu_pick_ecs(g, "::ffff:10.1.2.3", 128, out), 1);
    assert_int_equal(stu_ctx.scope, 24);
    assert_true(stu_ctx.client_mapped);
    assert_int_equal(out[0], p24);
    assert_int_equal(stu_pick_ecs(g, "::ffff:10.1.2.3", 112, out), 1);
    assert_int_equal(stu_ctx.scope, 16);
    assert_int_equal(stu_pick_ecs(g, "10.1.2.3", 32, out), 1);
    assert_false(stu_ctx.client_mapped); /* not left over from the query before */
    /* the server-wide defaults (ternd.yaml steering:) */
    stu_view.cfg.sticky_prefix_v4 = 22;
    stu_view.cfg.sticky_prefix_v6 = 40;
    assert_int_equal(stu_pick_ecs(g, "10.1.2.3", 32, out), 1);
    assert_int_equal(stu_ctx.scope, 22);
    assert_int_equal(stu_pick_ecs(g, "2001:db8:1:2::1", 64, out), 1);
    assert_int_equal(stu_ctx.scope, 40);
    stu_view.cfg.sticky_prefix_v4 = stu_view.cfg.sticky_prefix_v6 = 0;
    zone_free(z);
    /* the RRset's own lengths win */
    g = stu_build(NULL,
                  sticky_set(set, sizeof(set),
                             SINGLE ", \"sticky_prefix\": {\"v4\": 28, \"v6\": 64}", 1, 4, NULL),
                  &z);
    assert_int_equal(stu_pick_ecs(g, "10.1.2.3", 32, out), 1);
    assert_int_equal(stu_ctx.scope, 28);
    assert_int_equal(stu_pick_ecs(g, "2001:db8:1:2::1", 64, out), 1);
    assert_int_equal(stu_ctx.scope, 64);
    zone_free(z);
}

static const char *zero_but_two(unsigned i, char *tmp)
{
    snprintf(tmp, 64, "\"weight\": %u", i == 1 || i == 3 ? 5u : 0u);
    return tmp;
}

static const char *all_zero(unsigned i, char *tmp)
{
    (void)i;
    snprintf(tmp, 64, "\"weight\": 0");
    return tmp;
}

static void test_zero_weights(void **st)
{
    (void)st;
    char set[8192];
    zone_t *z;
    const zone_geo_t *g =
        stu_build(NULL, sticky_set(set, sizeof(set), SINGLE, 1, 4, zero_but_two), &z);
    unsigned count[5] = {0};
    for (unsigned i = 0; i < 4000; i++)
        count[pick1(g, i, 1)]++;
    assert_int_equal(count[1] + count[3], 0); /* weight 0: never while a positive one remains */
    assert_true(count[2] > 1700 && count[4] > 1700);
    zone_free(z);
    g = stu_build(NULL, sticky_set(set, sizeof(set), SINGLE, 1, 4, all_zero), &z);
    memset(count, 0, sizeof(count));
    for (unsigned i = 0; i < 4000; i++)
        count[pick1(g, i, 1)]++;
    for (unsigned k = 1; k <= 4; k++) /* all zero weigh alike: 1000 each, 5 sd ~ 140 */
        assert_true(count[k] > 860 && count[k] < 1140);
    zone_free(z);
}

static void test_no_alloc(void **st)
{
    (void)st;
    const uint64_t *alloc, *dealloc;
    if (mem_thread_counters(&alloc, &dealloc) != 0)
        skip();
    char set[8192];
    zone_t *z, *z2;
    const zone_geo_t *g = stu_build(NULL, sticky_set(set, sizeof(set), SINGLE, 1, 8, weight_i), &z);
    const zone_geo_t *g2 =
        stu_build(NULL, sticky_set(set, sizeof(set), "\"order\": \"sticky\"", 1, 8, weight_i), &z2);
    uint8_t out[16];
    char a[32];
    uint64_t a0 = *alloc;
    for (unsigned i = 0; i < 1000; i++) {
        (void)stu_pick(g, client(i, 1, a), out);
        (void)stu_pick(g2, client(i, 1, a), out);
        (void)stu_pick_ecs(g2, client(i, 1, a), 24, out);
    }
    assert_int_equal(*alloc, a0);
    zone_free(z);
    zone_free(z2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_chi_square),   cmocka_unit_test(test_movement),
        cmocka_unit_test(test_same_network), cmocka_unit_test(test_multi_order),
        cmocka_unit_test(test_ecs_scope),    cmocka_unit_test(test_zero_weights),
        cmocka_unit_test(test_no_alloc),
    };
    answer_ctx_seed(&stu_ctx, 11);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
