/*
 * test_udp_xdp.c — the AF_XDP answer path with no kernel: synthetic query frames (IPv4, IPv6,
 * with EDNS and cookies, NXDOMAIN, CNAME, referral, refused, a NOTIFY hand-off, a response, a
 * non-UDP frame) answered in place by xdp_frames_answer() through udp's XDP handler, on a
 * worker_t built here around the answer fixtures (tests/data/answer), as a worker thread would
 * serve them. Checks the replies (headers swapped, id, QR, rcode), the counters, and that not
 * one allocation or free happens on the answering thread over thousands of batches, with and
 * without limits (RRL, cookies): the socket path's test_no_alloc_per_query for AF_XDP.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "answer/answer_test_util.h"
#include "tern/answer/select.h"
#include "tern/common/mem.h"
#include "tern/conf/config.h"
#include "wire/wire_test_util.h"
#include "worker.h"
#include "xdp_test_util.h"

/* UMEM frames are 4096 bytes (xdp.c's FRAME_SIZE): the synthetic ones too. */
#define FRAME 4096u
/* xdp.c's batch width (BATCH). */
#define NFRAMES 64u
#define MTU     1500u

typedef struct fixture {
    server_t srv;
    worker_t *w;
    zone_table_t *table;
    answer_view_t view;
    limit_shared_t *sh;
    limit_t *lim;
    uint8_t (*frames)[FRAME];
    xdp_frame_ref_t ref[NFRAMES];
    xdp_sock_stats_t stats;
} fixture_t;

static fixture_t fx;

static void fixture_up(bool limits)
{
    memset(&fx, 0, sizeof(fx));
    fx.table = atu_fixture_table();
    assert_non_null(fx.table);
    fx.view = (answer_view_t){.table = fx.table, .cfg = {.edns_max_udp = 1232, .xfr = true}};
    if (limits) {
        config_t cfg;
        config_init(&cfg);
        cfg.rrl = (config_rrl_t){.enabled = true, .rate = 5, .burst = 5, .slip = 2};
        cfg.cookies = (config_cookies_t){.enabled = true};
        fx.sh = limit_shared_new(1);
        assert_non_null(fx.sh);
        int rc = 0;
        fx.lim = config_limit_new(fx.sh, &cfg, &rc);
        assert_non_null(fx.lim);
        config_free(&cfg);
        fx.view.limit = fx.lim;
    }
    fx.w = aligned_alloc(TERN_CACHELINE,
                         (sizeof(worker_t) + TERN_CACHELINE - 1) & ~(size_t)(TERN_CACHELINE - 1));
    assert_non_null(fx.w);
    memset(fx.w, 0, sizeof(*fx.w));
    fx.w->srv = &fx.srv;
    fx.w->udp = udp_state_new();
    assert_non_null(fx.w->udp);
    answer_ctx_seed(&fx.w->actx, 42);
    fx.w->view = &fx.view;
    fx.frames = aligned_alloc(FRAME, (size_t)NFRAMES * FRAME);
    assert_non_null(fx.frames);
}

static void fixture_down(void)
{
    udp_state_free(fx.w->udp);
    free(fx.w);
    free(fx.frames);
    limit_free(fx.lim);
    limit_shared_free(fx.sh);
    zone_table_free(fx.table);
}

/* A query for name/qtype with id, opcode op, flags byte f2 (RD, QR), and an OPT record with a
 * client cookie when cookie; returns its length. */
static size_t make_query(uint8_t *buf, uint16_t id, const char *name, uint16_t qtype, unsigned op,
                         uint8_t f2, bool cookie)
{
    const uint8_t hdr[12] = {id >> 8, id & 0xff, (uint8_t)(f2 | op << 3), 0, 0, 1, 0, 0, 0,
                             0,       0,         cookie ? 1 : 0};
    memcpy(buf, hdr, sizeof(hdr));
    size_t len = sizeof(hdr) + to_wire(name, buf + sizeof(hdr));
    const uint8_t q[4] = {qtype >> 8, qtype & 0xff, 0, 1};
    memcpy(buf + len, q, 4);
    len += 4;
    if (cookie) {
        const uint8_t opt[23] = {0,  0, 41, 1232 >> 8, 1232 & 0xff, 0, 0, 0, 0, 0, 12,         0,
                                 10, 0, 8,  1,         2,           3, 4, 5, 6, 7, (uint8_t)id};
        memcpy(buf + len, opt, sizeof(opt));
        len += sizeof(opt);
    }
    return len;
}

/* What each frame of a batch asks: the answers' mix of test_no_alloc_per_query, over IPv4 and
 * IPv6, plus what XDP must leave unanswered. */
typedef struct ask {
    const char *name;
    uint16_t qtype;
    unsigned op;  /* opcode: 0 query, 4 NOTIFY */
    uint8_t f2;   /* flags byte: 0x80 a response (dropped) */
    bool cookie;  /* with EDNS and a client cookie */
    int rcode;    /* expected; -1: no reply */
    bool not_udp; /* a TCP frame: not ours, counted at parse */
} ask_t;

static const ask_t MIX[] = {
    {"www.example.test", 1, 0, 0, false, 0, false},
    {"www.example.test", 28, 0, 0, true, 0, false},
    {"nothere.example.test", 1, 0, 0, false, 3, false},
    {"example.test", 6, 0, 0, false, 0, false},
    {"example.test", 2, 0, 0, true, 0, false},
    {"alias.example.test", 1, 0, 0, false, 0, false},
    {"a.b.c.d.example.test", 1, 0, 0, false, 3, false},
    {"host.sub.example.test", 1, 0, 0, false, 0, false},
    {"www.example.org", 1, 0, 0, false, 5, false},
    {"example.test", 6, 4, 0, false, -1, false},        /* NOTIFY: handed off (no socket here) */
    {"www.example.test", 1, 0, 0x80, false, -1, false}, /* a response: never answered */
    {"www.example.test", 1, 0, 0, false, -1, true},
};
#define NMIX (sizeof(MIX) / sizeof(MIX[0]))

/* Fill a batch of n frames from the mix starting at k, alternating IPv4 and IPv6. */
static void fill(unsigned n, unsigned k)
{
    for (unsigned i = 0; i < n; i++) {
        const ask_t *a = &MIX[(k + i) % NMIX];
        uint8_t q[512];
        size_t qlen = make_query(q, (uint16_t)(k + i), a->name, a->qtype, a->op, a->f2, a->cookie);
        uint8_t *f = fx.frames[i];
        size_t len = (i & 1) && !a->not_udp ? build_v6_pl(f, NULL, 0, q, qlen)
                                            : build_v4_pl(f, 0, a->not_udp ? 6 : 17, PORT, q, qlen);
        fx.ref[i] = (xdp_frame_ref_t){.data = f, .len = (uint32_t)len, .cap = FRAME};
    }
}

/* Answer one batch as a worker does (its clock, then the frames). */
static void serve(unsigned n)
{
    worker_clock(fx.w);
    xdp_frames_answer(fx.ref, n, MTU, udp_xdp_batch, fx.w, &fx.stats);
}

/* The reply in frame i to MIX[k + i]: addresses and ports swapped, id, QR, the rcode. */
static void check_reply(unsigned i, unsigned k)
{
    const ask_t *a = &MIX[(k + i) % NMIX];
    if (a->rcode < 0) {
        assert_int_equal(fx.ref[i].len, 0);
        return;
    }
    assert_true(fx.ref[i].len > 0);
    xdp_frame_flow_t flow;
    assert_int_equal(xdp_frame_parse(fx.ref[i].data, fx.ref[i].len, CLIENT_PORT, &flow), 0);
    assert_true(xdp_frame_udp_ok(fx.ref[i].data, &flow));
    assert_int_equal(flow.sport, PORT);
    assert_memory_equal(flow.dst, flow.ip_version == 4 ? CLIENT4 : CLIENT6,
                        flow.ip_version == 4 ? 4 : 16);
    assert_memory_equal(fx.ref[i].data, CLIENT_MAC, 6);
    const uint8_t *r = fx.ref[i].data + flow.payload_off;
    assert_int_equal(r[0] << 8 | r[1], (uint16_t)(k + i));
    assert_true(r[2] & 0x80);
    assert_int_equal(r[3] & 0x0f, a->rcode);
}

static void test_replies(void **state)
{
    (void)state;
    fixture_up(false);
    fill(NMIX, 0);
    serve(NMIX);
    for (unsigned i = 0; i < NMIX; i++)
        check_reply(i, 0);
    assert_int_equal(fx.stats.not_ours, 1);
    assert_int_equal(fx.stats.no_answer, 1); /* the response; the NOTIFY was passed on */
    assert_int_equal(fx.w->stats.handed_off, 1);
    assert_int_equal(fx.w->stats.handoff_full, 1); /* no UDP socket to reply from */
    fixture_down();
}

/* Thousands of batches and not one allocation or free on this (the worker's) thread. */
static void no_alloc(bool limits)
{
    fixture_up(limits);
    const uint64_t *ap, *dp;
    if (mem_thread_counters(&ap, &dp) != 0) {
        fixture_down();
        skip(); /* neither jemalloc nor ASan in this build: nothing can count */
    }
    for (unsigned b = 0; b < 4; b++) { /* warm up: every path taken once */
        fill(NFRAMES, b * NFRAMES);
        serve(NFRAMES);
    }
    uint64_t a0 = *ap, d0 = *dp;
    for (unsigned b = 0; b < 2000; b++) {
        fill(NFRAMES, b * NFRAMES);
        serve(NFRAMES);
        if (b % 97 == 0 && !limits)
            for (unsigned i = 0; i < NFRAMES; i++)
                check_reply(i, b * NFRAMES);
    }
    uint64_t a1 = *ap, d1 = *dp;
    assert_true(fx.w->stats.queries_udp >= 2000u * NFRAMES * 9 / NMIX);
    if (limits) /* one client flooding: RRL limited it, cookies were seen */
        assert_true(fx.w->stats.policy_dropped[LIMIT_WHY_RRL] > 0 && fx.w->stats.rrl_slipped > 0 &&
                    fx.w->stats.cookies > 0);
    assert_int_equal(a1, a0);
    assert_int_equal(d1, d0);
    fixture_down();
}

static void test_no_alloc(void **state)
{
    (void)state;
    no_alloc(false);
}

static void test_no_alloc_limits(void **state)
{
    (void)state;
    no_alloc(true);
}

/* The drop stages of the AF_XDP metrics: distinct names, each reading its own counter. */
static void test_drop_stages(void **state)
{
    (void)state;
    server_xdp_stats_t x;
    uint64_t *f = &x.sockets;
    for (unsigned i = 0; i < sizeof(x) / sizeof(uint64_t); i++)
        f[i] = 1000 + i;
    for (unsigned i = 0; i < SERVER_XDP_DROP_COUNT; i++) {
        uint64_t v = server_xdp_drop(&x, i);
        assert_true(v >= 1000 + 3 && v < 1000 + sizeof(x) / sizeof(uint64_t)); /* not rx/tx */
        for (unsigned j = 0; j < i; j++) {
            assert_string_not_equal(server_xdp_drop_name(i), server_xdp_drop_name(j));
            assert_true(server_xdp_drop(&x, j) != v);
        }
    }
    assert_int_equal(server_xdp_drop(&x, 1), x.no_answer);
    assert_int_equal(server_xdp_drop(&x, 4), x.rx_ring_full);
    assert_string_equal(server_xdp_drop_name(4), "rx_ring_full");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_replies),
        cmocka_unit_test(test_no_alloc),
        cmocka_unit_test(test_no_alloc_limits),
        cmocka_unit_test(test_drop_stages),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
