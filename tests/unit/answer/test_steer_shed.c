/*
 * test_steer_shed.c — load shedding (src/answer/steer_shed.c) through answer_select(): the
 * watermark math, records left out at or above high, fail open when all are, an unknown (or
 * stale: the checker turns it unknown) load treated as unloaded, weights scaled for the weighted
 * order, the draw of the orders that weigh nothing, what the request log and the trace get.
 * The steering is built by hand (no zone): each record's health endpoint is a local cell whose
 * load the test sets, as the checker would.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "steer_shed.h"
#include "tern/answer/answer_trace.h"
#include "tern/answer/select.h"
#include "tern/common/mem.h"
#include "tern/health/health.h"

#define NREC 4

static answer_ctx_t ctx;
static answer_view_t view;
static health_ep_t eps[NREC];
static zone_geo_rr_t rrs[NREC];
static zone_geo_t geo;
static uint32_t offs[NREC];

/* n records at offsets 0, 10, 20... with weights w, all up, loads unknown; low/high in milli. */
static void setup_geo(unsigned n, uint8_t order, uint8_t count, uint32_t low, uint32_t high,
                      const uint32_t *w)
{
    memset(rrs, 0, sizeof(rrs));
    for (unsigned i = 0; i < n; i++) {
        eps[i].rank = HEALTH_RANK_UP;
        eps[i].load = HEALTH_LOAD_UNKNOWN;
        rrs[i].off = 10 * i;
        rrs[i].weight = w ? w[i] : 1;
        rrs[i].health = &eps[i];
    }
    geo = (zone_geo_t){
        .policy = {.order = order, .count = count, .shed = 1, .shed_low = low, .shed_high = high},
        .health = true,
        .count = (uint16_t)n,
        .rr = rrs};
    memset(&ctx.info, 0, sizeof(ctx.info));
}

/* Which record answer_select() put first (count single: the only one). */
static unsigned pick(void)
{
    unsigned n = answer_select(&ctx, &view, &geo, offs);
    assert_true(n >= 1);
    return offs[0] / 10;
}

/* How many of n answers put record 0 first. */
static unsigned first_hits(unsigned n)
{
    unsigned hits = 0;
    for (unsigned i = 0; i < n; i++)
        hits += pick() == 0;
    return hits;
}

static void test_scale_math(void **state)
{
    (void)state;
    /* (high - load) / (high - low): 700..900, load 800 halves, 850 a quarter */
    assert_int_equal(steer_shed_scale(100, 700, 700, 900), 100);
    assert_int_equal(steer_shed_scale(100, 800, 700, 900), 50);
    assert_int_equal(steer_shed_scale(100, 850, 700, 900), 25);
    assert_int_equal(steer_shed_scale(100, 899, 700, 900), 1); /* 0.5 rounds to 1 */
    /* a kept record stays pickable: never scaled to 0 from a weight above 0 */
    assert_int_equal(steer_shed_scale(1, 899, 700, 900), 1);
    assert_int_equal(steer_shed_scale(0, 800, 700, 900), 0);
    /* 64-bit: the largest weight and span do not overflow */
    assert_int_equal(steer_shed_scale(UINT32_MAX, 0, 0, UINT32_MAX - 1), UINT32_MAX);
    assert_int_equal(steer_shed_scale(4000000000u, 50000, 0, 100000), 2000000000u);
}

/* At or above high: left out while another stays below; all of them: all kept (fail open). */
static void test_out_and_fail_open(void **state)
{
    (void)state;
    setup_geo(3, ZONE_GEO_ORDER_NONE, ZONE_GEO_COUNT_MULTI, 700, 900, NULL);
    eps[0].load = 900; /* exactly high: out */
    eps[1].load = 5000;
    eps[2].load = 100;
    unsigned n = answer_select(&ctx, &view, &geo, offs);
    assert_int_equal(n, 1);
    assert_int_equal(offs[0], 20);
    assert_true(ctx.info.steer.rules & ANSWER_STEER_SHED);
    assert_int_equal(ctx.info.steer.shed_out, 2);
    assert_int_equal(ctx.info.steer.shed_scaled, 0);
    /* every one above high: all kept, nothing recorded as shed */
    eps[2].load = 950;
    memset(&ctx.info, 0, sizeof(ctx.info));
    assert_int_equal(answer_select(&ctx, &view, &geo, offs), 3);
    assert_int_equal(ctx.info.steer.rules, 0);
    /* a shed record counts as unavailable to what follows, health's choice first: a down record
     * below high is not brought back by shedding */
    eps[2].load = 100;
    eps[2].rank = HEALTH_RANK_DOWN;
    assert_int_equal(answer_select(&ctx, &view, &geo, offs), 2); /* only 0, 1: both above */
}

/* No reading (never read, unparsable, stale: the cell says unknown) is never shed. */
static void test_unknown_is_unloaded(void **state)
{
    (void)state;
    setup_geo(2, ZONE_GEO_ORDER_NONE, ZONE_GEO_COUNT_MULTI, 700, 900, NULL);
    eps[1].load = 2000;
    /* record 0 unknown: kept, record 1 out */
    assert_int_equal(answer_select(&ctx, &view, &geo, offs), 1);
    assert_int_equal(offs[0], 0);
    /* a record without a check has no load either */
    rrs[0].health = NULL;
    assert_int_equal(answer_select(&ctx, &view, &geo, offs), 1);
    assert_int_equal(offs[0], 0);
    /* both unknown: both kept, nothing shed */
    eps[1].load = HEALTH_LOAD_UNKNOWN;
    memset(&ctx.info, 0, sizeof(ctx.info));
    assert_int_equal(answer_select(&ctx, &view, &geo, offs), 2);
    assert_int_equal(ctx.info.steer.rules, 0);
}

/* Weighted: between the watermarks the weight is scaled; the shares follow (loose bounds). */
static void test_weighted_scaled(void **state)
{
    (void)state;
    const uint32_t w[2] = {100, 100};
    setup_geo(2, ZONE_GEO_ORDER_WEIGHTED, ZONE_GEO_COUNT_SINGLE, 70000, 90000, w);
    eps[0].load = 80000; /* 80 of 70..90: half weight */
    eps[1].load = 10000;
    /* 50 : 100 -> a third; 30,000 draws: sd ~82, the bounds are ~10 sd */
    assert_in_range(first_hits(30000), 9200, 10800);
    assert_true(ctx.info.steer.rules & ANSWER_STEER_SHED);
    assert_int_equal(ctx.info.steer.shed_scaled, 1);
    assert_int_equal(ctx.info.steer.shed_out, 0);
    assert_int_equal(ctx.wscaled[0], 50);
    assert_int_equal(ctx.wscaled[1], 100);
    /* at low exactly: full weight */
    eps[0].load = 70000;
    assert_in_range(first_hits(30000), 14000, 16000);
}

/* rr and none: between the watermarks a record is left out with probability
 * (load - low) / (high - low), but the draws never leave none. */
static void test_draw(void **state)
{
    (void)state;
    setup_geo(2, ZONE_GEO_ORDER_NONE, ZONE_GEO_COUNT_SINGLE, 0, 1000, NULL);
    eps[0].load = 750; /* left out 3 times in 4: record 1 answers then */
    eps[1].load = 0;
    assert_in_range(first_hits(20000), 4500, 5500);
    /* both between: each answer still has one (when both are drawn, both stay) */
    eps[1].load = 750;
    for (int i = 0; i < 2000; i++)
        assert_true(answer_select(&ctx, &view, &geo, offs) >= 1);
    /* rr: the same rule */
    setup_geo(2, ZONE_GEO_ORDER_RR, ZONE_GEO_COUNT_SINGLE, 0, 1000, NULL);
    eps[0].load = 500;
    eps[1].load = 0;
    /* kept half the time, then picked half the time: a quarter */
    assert_in_range(first_hits(20000), 4400, 5600);
}

/* The trace: each candidate's load as read, what it decided, the weight the order read. */
static void test_trace(void **state)
{
    (void)state;
    const uint32_t w[4] = {10, 10, 10, 10};
    setup_geo(4, ZONE_GEO_ORDER_WEIGHTED, ZONE_GEO_COUNT_SINGLE, 500, 1000, w);
    eps[0].load = 1500;
    eps[1].load = 750;
    eps[2].load = 100;
    uint16_t c[4] = {0, 1, 2, 3};
    answer_trace_select_t ts;
    memset(&ts, 0, sizeof(ts));
    ts.g = &geo;
    ts.count = 4;
    assert_int_equal(steer_shed(&ctx, &geo, c, 4, &ts), 3);
    assert_true(ts.shed);
    assert_false(ts.shed_fail_open);
    assert_int_equal(ts.shed_how[0], ANSWER_SHED_OUT);
    assert_int_equal(ts.dropped[0], ANSWER_SEL_SHED);
    assert_int_equal(ts.load[0], 1500);
    assert_int_equal(ts.shed_how[1], ANSWER_SHED_SCALED);
    assert_int_equal(ts.wscaled[1], 5);
    assert_int_equal(ts.shed_how[2], ANSWER_SHED_BELOW);
    assert_int_equal(ts.wscaled[2], 10);
    assert_int_equal(ts.shed_how[3], ANSWER_SHED_UNKNOWN);
    assert_int_equal(ts.load[3], HEALTH_LOAD_UNKNOWN);
    assert_int_equal(ts.dropped[3], ANSWER_SEL_KEPT);
    assert_int_equal(c[0], 1);
    assert_int_equal(c[2], 3);
    /* all above: fail open, recorded */
    for (int i = 0; i < 4; i++)
        eps[i].load = 2000;
    uint16_t c2[4] = {0, 1, 2, 3};
    memset(&ts, 0, sizeof(ts));
    ts.g = &geo;
    ts.count = 4;
    assert_int_equal(steer_shed(&ctx, &geo, c2, 4, &ts), 4);
    assert_true(ts.shed_fail_open);
    assert_int_equal(ts.shed_how[2], ANSWER_SHED_OPEN);
}

/* Shedding (records out, weights scaled, draws) and failover tiers after it allocate nothing,
 * as the workers' query path must not: every order over loaded records in two tiers. */
static void test_no_alloc(void **state)
{
    (void)state;
    const uint64_t *alloc, *dealloc;
    if (mem_thread_counters(&alloc, &dealloc) != 0)
        skip();
    static const uint32_t w[4] = {1, 2, 3, 4};
    static const uint8_t orders[] = {ZONE_GEO_ORDER_WEIGHTED, ZONE_GEO_ORDER_RR,
                                     ZONE_GEO_ORDER_NONE};
    uint64_t a0 = *alloc;
    for (unsigned o = 0; o < sizeof(orders); o++) {
        setup_geo(4, orders[o], ZONE_GEO_COUNT_SINGLE, 500, 900, w);
        eps[0].load = 950; /* out */
        eps[1].load = 700; /* scaled, or drawn out */
        rrs[2].priority = rrs[3].priority = 1;
        geo.tiers = true;
        for (unsigned i = 0; i < 1000; i++)
            (void)pick();
    }
    assert_int_equal(*alloc, a0);
}

int main(void)
{
    answer_ctx_seed(&ctx, 33);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_scale_math),
        cmocka_unit_test(test_out_and_fail_open),
        cmocka_unit_test(test_unknown_is_unloaded),
        cmocka_unit_test(test_weighted_scaled),
        cmocka_unit_test(test_draw),
        cmocka_unit_test(test_trace),
        cmocka_unit_test(test_no_alloc),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
