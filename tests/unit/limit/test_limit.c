/*
 * Unit tests for limit.h: SipHash-2-4 and RFC 9018 server cookies against their published test
 * vectors, prefix lists, access lists, redins' rate limit (its exact arithmetic), RRL classes and
 * slip, TCP connection caps, and the shared tables' bound when several threads hit one client
 * at once (the SO_REUSEPORT case).
 */
#include <arpa/inet.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "tern/common/err.h"
#include "tern/common/rcu.h"
#include "tern/conf/config.h"
#include "tern/limit/limit.h"
#include "tern/wire/dname.h"

static limit_client_t client(const char *ip)
{
    limit_client_t c = {0};
    if (strchr(ip, ':')) {
        c.family = 6;
        assert_int_equal(inet_pton(AF_INET6, ip, c.addr), 1);
    } else {
        c.family = 4;
        assert_int_equal(inet_pton(AF_INET, ip, c.addr), 1);
    }
    return c;
}

/* "192.0.2.0/24" into a list entry (the config parser's job, done by hand here). */
static void add_prefix(config_prefix_list_t *l, const char *text)
{
    char ip[64];
    unsigned len;
    const char *slash = strchr(text, '/');
    snprintf(ip, sizeof(ip), "%.*s", slash ? (int)(slash - text) : (int)strlen(text), text);
    limit_client_t c = client(ip);
    len = slash ? (unsigned)atoi(slash + 1) : (c.family == 4 ? 32 : 128);
    l->p = realloc(l->p, (l->n + 1) * sizeof(*l->p));
    assert_non_null(l->p);
    config_prefix_t *p = &l->p[l->n++];
    memset(p, 0, sizeof(*p));
    p->family = c.family;
    p->len = (uint8_t)len;
    memcpy(p->addr, c.addr, 16);
}

static void test_siphash_vectors(void **state)
{
    (void)state;
    /* SipHash paper (Aumasson, Bernstein 2012), key 00..0f */
    uint8_t k[16], m[15];
    for (int i = 0; i < 16; i++)
        k[i] = (uint8_t)i;
    for (int i = 0; i < 15; i++)
        m[i] = (uint8_t)i;
    assert_true(limit_siphash24(k, m, 0) == 0x726fdb47dd0e0e31ull);
    assert_true(limit_siphash24(k, m, 15) == 0xa129ca6149be45e5ull);
}

static limit_shared_t *sh;
static config_t cfg;

static limit_t *policy(void)
{
    int rc;
    limit_t *l = config_limit_new(sh, &cfg, &rc);
    assert_int_equal(rc, 0);
    return l;
}

static int setup(void **state)
{
    (void)state;
    config_init(&cfg);
    sh = limit_shared_new(4); /* test_shared_across_workers: four workers, four rings */
    return sh ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    config_free(&cfg);
    limit_shared_free(sh);
    sh = NULL;
    return 0;
}

static void unhex(const char *h, uint8_t *out)
{
    for (size_t i = 0; h[2 * i]; i++) {
        unsigned v;
        sscanf(h + 2 * i, "%2x", &v);
        out[i] = (uint8_t)v;
    }
}

/* RFC 9018 Appendix A.1: client 198.51.100.100, client cookie 2464c4abcf10c957, secret
 * e5e973e5a6b2a43f48e7dc849e37bfcf, at 1559731985 (2019-06-05 10:53:05 UTC). */
static void test_rfc9018_vector(void **state)
{
    (void)state;
    cfg.cookies.enabled = true;
    cfg.cookies.have_secret = true;
    unhex("e5e973e5a6b2a43f48e7dc849e37bfcf", cfg.cookies.secret);
    limit_t *l = policy();
    assert_non_null(l);
    assert_true(limit_cookies(l));
    assert_false(limit_cookies_required(l));
    uint8_t cc[8], want[16], got[16];
    unhex("2464c4abcf10c957", cc);
    unhex("010000005cf79f111f8130c3eee29480", want);
    limit_client_t c = client("198.51.100.100");
    const uint32_t t = 1559731985;
    limit_cookie_make(l, cc, &c, t, got);
    assert_memory_equal(got, want, 16);
    /* valid an hour back and five minutes ahead of our clock (RFC 9018 §4.3), not beyond */
    assert_true(limit_cookie_valid(l, cc, want, 16, &c, t));
    assert_true(limit_cookie_valid(l, cc, want, 16, &c, t + 3600));
    assert_false(limit_cookie_valid(l, cc, want, 16, &c, t + 3601));
    assert_true(limit_cookie_valid(l, cc, want, 16, &c, t - 300));
    assert_false(limit_cookie_valid(l, cc, want, 16, &c, t - 301));
    /* another client, another client cookie, a flipped bit, a bad version or length */
    limit_client_t other = client("198.51.100.101");
    assert_false(limit_cookie_valid(l, cc, want, 16, &other, t));
    uint8_t cc2[8];
    memcpy(cc2, cc, 8);
    cc2[0] ^= 1;
    assert_false(limit_cookie_valid(l, cc2, want, 16, &c, t));
    uint8_t bad[16];
    memcpy(bad, want, 16);
    bad[15] ^= 0x80;
    assert_false(limit_cookie_valid(l, cc, bad, 16, &c, t));
    memcpy(bad, want, 16);
    bad[0] = 2;
    assert_false(limit_cookie_valid(l, cc, bad, 16, &c, t));
    assert_false(limit_cookie_valid(l, cc, want, 8, &c, t));
    limit_free(l);
    /* a new secret: cookies of the old one stay valid (as the previous one) */
    unhex("000102030405060708090a0b0c0d0e0f", cfg.cookies.secret);
    l = policy();
    limit_cookie_make(l, cc, &c, t, got);
    assert_memory_not_equal(got, want, 16);
    assert_true(limit_cookie_valid(l, cc, got, 16, &c, t));
    assert_true(limit_cookie_valid(l, cc, want, 16, &c, t));
    limit_free(l);
    /* IPv6 */
    limit_client_t c6 = client("2001:db8::53");
    l = policy();
    limit_cookie_make(l, cc, &c6, t, got);
    assert_true(limit_cookie_valid(l, cc, got, 16, &c6, t));
    assert_false(limit_cookie_valid(l, cc, got, 16, &c, t));
    limit_free(l);
}

static void test_acl(void **state)
{
    (void)state;
    cfg.acl.enabled = true;
    add_prefix(&cfg.acl.allow, "192.0.2.0/24");
    add_prefix(&cfg.acl.allow, "192.0.2.128/25"); /* nested: merged */
    add_prefix(&cfg.acl.allow, "2001:db8::/32");
    add_prefix(&cfg.acl.deny, "192.0.2.66");
    limit_t *l = policy();
    limit_why_t why;
    static const struct {
        const char *ip;
        limit_verdict_t v;
    } cases[] = {{"192.0.2.1", LIMIT_PASS},     {"192.0.2.255", LIMIT_PASS},
                 {"192.0.2.66", LIMIT_REFUSE},  {"192.0.3.0", LIMIT_REFUSE},
                 {"192.0.1.255", LIMIT_REFUSE}, {"2001:db8:ffff::1", LIMIT_PASS},
                 {"2001:db9::1", LIMIT_REFUSE}};
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        limit_client_t c = client(cases[i].ip);
        assert_int_equal(limit_client(l, &c, 0, &why), cases[i].v);
        assert_int_equal(why, cases[i].v == LIMIT_PASS ? LIMIT_WHY_NONE : LIMIT_WHY_ACL);
    }
    limit_free(l);
    cfg.acl.action = CONFIG_LIMIT_DROP;
    l = policy();
    limit_client_t c = client("192.0.2.66");
    assert_int_equal(limit_client(l, &c, 0, &why), LIMIT_DROP);
    limit_free(l);
    /* deny alone: everything else passes; 0.0.0.0/0 denies all IPv4 */
    config_free(&cfg);
    config_init(&cfg);
    cfg.acl.enabled = true;
    add_prefix(&cfg.acl.deny, "0.0.0.0/0");
    l = policy();
    c = client("203.0.113.9");
    assert_int_equal(limit_client(l, &c, 0, &why), LIMIT_REFUSE);
    c = client("2001:db8::1");
    assert_int_equal(limit_client(l, &c, 0, &why), LIMIT_PASS);
    limit_free(l);
}

static void test_zone_acl(void **state)
{
    (void)state;
    assert_int_equal(config_add_zone(&cfg, "Example.TEST.", "x.zone"), 0);
    assert_int_equal(config_add_zone(&cfg, "other.test", "y.zone"), 0);
    cfg.zones[0].acl.enabled = true;
    add_prefix(&cfg.zones[0].acl.allow, "10.0.0.0/8");
    limit_t *l = policy();
    assert_non_null(l);
    uint8_t apex[256], w[256];
    const char *why;
    assert_true(dname_from_str("example.test", 12, false, w, &why) > 0);
    dname_lower(apex, w);
    limit_client_t in = client("10.1.2.3"), out = client("192.0.2.1");
    assert_int_equal(limit_zone(l, apex, dname_hash(apex), &in), LIMIT_PASS);
    assert_int_equal(limit_zone(l, apex, dname_hash(apex), &out), LIMIT_REFUSE);
    assert_true(dname_from_str("other.test", 10, false, w, &why) > 0);
    dname_lower(apex, w);
    assert_int_equal(limit_zone(l, apex, dname_hash(apex), &out), LIMIT_PASS);
    limit_free(l);
}

/* Which list refused (`ternctl explain`): the global acl's deny or allow list, the zone's. */
static void test_acl_rule(void **state)
{
    (void)state;
    cfg.acl.enabled = true;
    add_prefix(&cfg.acl.allow, "192.0.2.0/24");
    add_prefix(&cfg.acl.deny, "192.0.2.66");
    assert_int_equal(config_add_zone(&cfg, "example.test", "x.zone"), 0);
    cfg.zones[0].acl.enabled = true;
    add_prefix(&cfg.zones[0].acl.deny, "192.0.2.7");
    limit_t *l = policy();
    uint8_t apex[256], w[256];
    const char *why;
    assert_true(dname_from_str("example.test", 12, false, w, &why) > 0);
    dname_lower(apex, w);
    uint32_t h = dname_hash(apex);
    limit_client_t ok = client("192.0.2.1"), denied = client("192.0.2.66"),
                   outside = client("198.51.100.1"), zdenied = client("192.0.2.7");
    assert_null(limit_acl_rule(l, &ok, NULL, 0));
    assert_string_equal(limit_acl_rule(l, &denied, NULL, 0), "the client is in its deny list");
    assert_string_equal(limit_acl_rule(l, &outside, NULL, 0),
                        "the client is not in its allow list");
    assert_null(limit_acl_rule(l, &zdenied, NULL, 0));
    assert_string_equal(limit_acl_rule(l, &zdenied, apex, h), "the client is in its deny list");
    assert_null(limit_acl_rule(l, &ok, apex, h));
    limit_free(l);
}

/* redins' limiter: TimeStep = 60 s / rate, MaxTime = burst x TimeStep, allowed while the debt
 * (TAT - now) is at most MaxTime: burst + 1 at once, then one per TimeStep. */
static void test_ratelimit(void **state)
{
    (void)state;
    cfg.ratelimit.enabled = true;
    cfg.ratelimit.rate = 60; /* one a second */
    cfg.ratelimit.burst = 10;
    add_prefix(&cfg.ratelimit.whitelist, "127.0.0.1");
    add_prefix(&cfg.ratelimit.blacklist, "10.10.10.1");
    limit_t *l = policy();
    limit_why_t why;
    limit_client_t c = client("192.0.2.7");
    int64_t t = 1000000000;
    unsigned passed = 0;
    for (int i = 0; i < 50; i++)
        passed += limit_client(l, &c, t, &why) == LIMIT_PASS;
    assert_int_equal(passed, 11);
    assert_int_equal(limit_client(l, &c, t, &why), LIMIT_REFUSE);
    assert_int_equal(why, LIMIT_WHY_RATE);
    /* one more a second later, not two */
    assert_int_equal(limit_client(l, &c, t + 1000000, &why), LIMIT_PASS);
    assert_int_equal(limit_client(l, &c, t + 1000000, &why), LIMIT_REFUSE);
    /* another client has its own budget; the whitelist has none; the blacklist is refused */
    limit_client_t d = client("192.0.2.8");
    assert_int_equal(limit_client(l, &d, t, &why), LIMIT_PASS);
    limit_client_t wl = client("127.0.0.1"), bl = client("10.10.10.1");
    for (int i = 0; i < 100; i++)
        assert_int_equal(limit_client(l, &wl, t, &why), LIMIT_PASS);
    assert_int_equal(limit_client(l, &bl, t, &why), LIMIT_REFUSE);
    assert_int_equal(why, LIMIT_WHY_BLACKLIST);
    limit_free(l);
    cfg.ratelimit.action = CONFIG_LIMIT_DROP;
    cfg.ratelimit.blacklist_action = CONFIG_LIMIT_DROP;
    l = policy();
    assert_int_equal(limit_client(l, &c, t + 1000000, &why), LIMIT_DROP); /* the same bucket */
    assert_int_equal(limit_client(l, &bl, t, &why), LIMIT_DROP);
    limit_free(l);
}

static void test_rrl(void **state)
{
    (void)state;
    cfg.rrl.enabled = true;
    cfg.rrl.rate = 5;
    cfg.rrl.burst = 5;
    cfg.rrl.slip = 2;
    cfg.rrl.prefix_v4 = 24;
    cfg.rrl.prefix_v6 = 56;
    cfg.rrl.log = true;
    add_prefix(&cfg.rrl.whitelist, "198.51.100.0/24");
    limit_t *l = policy();
    limit_worker_t w = {.id = 0};
    limit_client_t a = client("192.0.2.1"), b = client("192.0.2.200"), c = client("192.0.3.1");
    int64_t t = 5000000000;
    assert_true(limit_rrl_applies(l, &a));
    for (int i = 0; i < 5; i++)
        assert_int_equal(limit_rrl(l, &w, &a, LIMIT_RC_ANSWER, 42, 1, t), LIMIT_PASS);
    /* the sixth: limited; every second limited response slips */
    assert_int_equal(limit_rrl(l, &w, &a, LIMIT_RC_ANSWER, 42, 1, t), LIMIT_DROP);
    assert_int_equal(limit_rrl(l, &w, &a, LIMIT_RC_ANSWER, 42, 1, t), LIMIT_SLIP);
    assert_int_equal(limit_rrl(l, &w, &a, LIMIT_RC_ANSWER, 42, 1, t), LIMIT_DROP);
    /* the same /24 shares the bucket; another /24, name, type or class does not */
    assert_int_equal(limit_rrl(l, &w, &b, LIMIT_RC_ANSWER, 42, 1, t), LIMIT_SLIP);
    assert_int_equal(limit_rrl(l, &w, &c, LIMIT_RC_ANSWER, 42, 1, t), LIMIT_PASS);
    assert_int_equal(limit_rrl(l, &w, &a, LIMIT_RC_ANSWER, 43, 1, t), LIMIT_PASS);
    assert_int_equal(limit_rrl(l, &w, &a, LIMIT_RC_ANSWER, 42, 28, t), LIMIT_PASS);
    assert_int_equal(limit_rrl(l, &w, &a, LIMIT_RC_NXDOMAIN, 42, 1, t), LIMIT_PASS);
    /* errors are keyed by the prefix alone: every name counts */
    for (int i = 0; i < 5; i++)
        assert_int_equal(limit_rrl(l, &w, &a, LIMIT_RC_ERROR, (uint32_t)i, 1, t), LIMIT_PASS);
    assert_true(limit_rrl(l, &w, &a, LIMIT_RC_ERROR, 99, 1, t) != LIMIT_PASS);
    /* rate 5/s: one more every 200 ms */
    assert_int_equal(limit_rrl(l, &w, &a, LIMIT_RC_ANSWER, 42, 1, t + 200000), LIMIT_PASS);
    assert_true(limit_rrl(l, &w, &a, LIMIT_RC_ANSWER, 42, 1, t + 200000) != LIMIT_PASS);
    /* whitelisted: RRL does not apply */
    limit_client_t wl = client("198.51.100.9");
    assert_false(limit_rrl_applies(l, &wl));
    limit_free(l);
}

/* The dry judgements (`ternctl explain`): the verdict the next event would get, the bucket left
 * as it was — a thousand of them charge nothing, and they agree with the real ones. */
static void test_dry(void **state)
{
    (void)state;
    cfg.ratelimit.enabled = true;
    cfg.ratelimit.rate = 60;
    cfg.ratelimit.burst = 1;
    cfg.rrl.enabled = true;
    cfg.rrl.rate = 5;
    cfg.rrl.burst = 2;
    cfg.rrl.slip = 2;
    cfg.rrl.prefix_v4 = 24;
    cfg.rrl.prefix_v6 = 56;
    limit_t *l = policy();
    limit_worker_t w = {.id = 0};
    limit_why_t why;
    limit_client_t c = client("192.0.2.7");
    int64_t t = 1000000000;
    for (int i = 0; i < 1000; i++) {
        assert_int_equal(limit_client_dry(l, &c, t, &why), LIMIT_PASS);
        assert_int_equal(limit_rrl_dry(l, &c, LIMIT_RC_ANSWER, 42, 1, t), LIMIT_PASS);
    }
    /* burst 1: two pass for real, then the dry verdict says refuse, like the real one */
    assert_int_equal(limit_client(l, &c, t, &why), LIMIT_PASS);
    assert_int_equal(limit_client(l, &c, t, &why), LIMIT_PASS);
    assert_int_equal(limit_client_dry(l, &c, t, &why), LIMIT_REFUSE);
    assert_int_equal(why, LIMIT_WHY_RATE);
    assert_int_equal(limit_client(l, &c, t, &why), LIMIT_REFUSE);
    /* a second later the dry verdict passes, and did not use the event it saw */
    assert_int_equal(limit_client_dry(l, &c, t + 1000000, &why), LIMIT_PASS);
    assert_int_equal(limit_client(l, &c, t + 1000000, &why), LIMIT_PASS);
    /* RRL: burst 2, and dry calls between the real ones change nothing (nor the slip count) */
    for (int i = 0; i < 2; i++) {
        assert_int_equal(limit_rrl_dry(l, &c, LIMIT_RC_ANSWER, 42, 1, t), LIMIT_PASS);
        assert_int_equal(limit_rrl(l, &w, &c, LIMIT_RC_ANSWER, 42, 1, t), LIMIT_PASS);
    }
    assert_int_equal(limit_rrl_dry(l, &c, LIMIT_RC_ANSWER, 42, 1, t), LIMIT_DROP);
    assert_int_equal(w.limited, 0);
    assert_int_equal(limit_rrl(l, &w, &c, LIMIT_RC_ANSWER, 42, 1, t), LIMIT_DROP);
    assert_int_equal(limit_rrl_dry(l, &c, LIMIT_RC_NXDOMAIN, 42, 1, t), LIMIT_PASS);
    limit_free(l);
}

static void test_tcp_cap(void **state)
{
    (void)state;
    limit_shared_set_tcp(sh, 3, 24, 64);
    limit_client_t a = client("192.0.2.1"), b = client("192.0.2.9"), c = client("192.0.3.1");
    assert_true(limit_tcp_acquire(sh, &a));
    assert_true(limit_tcp_acquire(sh, &a));
    assert_true(limit_tcp_acquire(sh, &b)); /* the same /24 */
    assert_false(limit_tcp_acquire(sh, &a));
    assert_true(limit_tcp_acquire(sh, &c));
    limit_tcp_release(sh, &b);
    assert_true(limit_tcp_acquire(sh, &a));
    assert_false(limit_tcp_acquire(sh, &b));
    limit_shared_set_tcp(sh, 0, 24, 64); /* no cap */
    for (int i = 0; i < 10; i++)
        assert_true(limit_tcp_acquire(sh, &a));
    assert_true(limit_tcp_acquire(NULL, &a));
}

/* Several threads (workers under SO_REUSEPORT) answering one client at full speed share its
 * bucket: over the run, no more than burst + rate x time pass, plus the few a race may let
 * through — never workers x that. */
struct hammer {
    limit_t *l;
    int64_t start;
    unsigned passed;
    unsigned id; /* the worker's number: each worker has its own log ring */
};

static void *hammer(void *arg)
{
    struct hammer *h = arg;
    limit_worker_t w = {.id = h->id};
    limit_client_t c = client("203.0.113.5");
    tern_rcu_register();
    /* 200,000 events over a simulated 2 s */
    for (int i = 0; i < 200000; i++) {
        int64_t t = h->start + (int64_t)i * 10;
        h->passed += limit_rrl(h->l, &w, &c, LIMIT_RC_ANSWER, 7, 1, t) == LIMIT_PASS;
    }
    tern_rcu_unregister();
    return NULL;
}

static void test_shared_across_workers(void **state)
{
    (void)state;
    cfg.rrl.enabled = true;
    cfg.rrl.rate = 1000;
    cfg.rrl.burst = 1000;
    cfg.rrl.slip = 0;
    limit_t *l = policy();
    struct hammer h[4];
    pthread_t th[4];
    for (int i = 0; i < 4; i++) {
        h[i] = (struct hammer){.l = l, .start = 9000000000, .id = (unsigned)i};
        assert_int_equal(pthread_create(&th[i], NULL, hammer, &h[i]), 0);
    }
    unsigned total = 0;
    for (int i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        total += h[i].passed;
    }
    /* 1000 at once + 1000/s over 2 s = 3000; the bound the issue asks: within 2x */
    printf("4 workers, one client: %u of 800,000 passed (rate x time + burst = 3000)\n", total);
    assert_true(total >= 2900 && total <= 6000);
    limit_free(l);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_siphash_vectors),
        cmocka_unit_test_setup_teardown(test_rfc9018_vector, setup, teardown),
        cmocka_unit_test_setup_teardown(test_acl, setup, teardown),
        cmocka_unit_test_setup_teardown(test_zone_acl, setup, teardown),
        cmocka_unit_test_setup_teardown(test_ratelimit, setup, teardown),
        cmocka_unit_test_setup_teardown(test_rrl, setup, teardown),
        cmocka_unit_test_setup_teardown(test_dry, setup, teardown),
        cmocka_unit_test_setup_teardown(test_acl_rule, setup, teardown),
        cmocka_unit_test_setup_teardown(test_tcp_cap, setup, teardown),
        cmocka_unit_test_setup_teardown(test_shared_across_workers, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
