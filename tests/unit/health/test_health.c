/*
 * Unit tests for health.h: spec validation, one endpoint per distinct check, reference counting,
 * redins' counter (statusUp/statusDown) and the ranks selection reads, Redis adoption, and
 * administrative overrides that outlive endpoints.
 */
#include <arpa/inet.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "health_int.h"
#include "tern/common/err.h"
#include "tern/health/health.h"

static health_spec_t spec4(const char *ip, uint16_t port, const char *host)
{
    health_spec_t s;
    health_spec_init(&s);
    s.family = 4;
    assert_int_equal(inet_pton(AF_INET, ip, s.addr), 1);
    s.port = port;
    s.host = host;
    return s;
}

static void count_fn(void *ctx, const health_ep_info_t *i)
{
    (void)i;
    ++*(size_t *)ctx;
}

static size_t count(health_registry_t *r)
{
    size_t n = 0;
    size_t listed = health_each(r, count_fn, &n);
    assert_int_equal(listed, n);
    return n;
}

static void test_spec_check(void **state)
{
    (void)state;
    char err[128];
    health_spec_t s = spec4("192.0.2.1", 80, "www.example.test");
    assert_int_equal(health_spec_check(&s, err, sizeof(err)), 0);
    s.port = 0;
    assert_int_equal(health_spec_check(&s, err, sizeof(err)), TERN_EINVAL);
    assert_non_null(strstr(err, "port 0"));
    s = spec4("192.0.2.1", 80, NULL);
    s.timeout_ms = 0;
    assert_int_equal(health_spec_check(&s, err, sizeof(err)), TERN_EINVAL);
    assert_non_null(strstr(err, "timeout"));
    s = spec4("192.0.2.1", 80, NULL);
    s.up_count = 0;
    assert_int_equal(health_spec_check(&s, err, sizeof(err)), TERN_EINVAL);
    s = spec4("192.0.2.1", 80, NULL);
    s.down_count = 0;
    assert_int_equal(health_spec_check(&s, err, sizeof(err)), TERN_EINVAL);
    s = spec4("192.0.2.1", 80, NULL);
    s.uri = "health";
    assert_int_equal(health_spec_check(&s, err, sizeof(err)), TERN_EINVAL);
    s.uri = "/a b";
    assert_int_equal(health_spec_check(&s, err, sizeof(err)), TERN_EINVAL);
    s = spec4("192.0.2.1", 80, NULL);
    s.nexpect = 1;
    s.expect[0] = 99;
    assert_int_equal(health_spec_check(&s, err, sizeof(err)), TERN_EINVAL);
    s = spec4("192.0.2.1", 0, NULL);
    s.proto = HEALTH_ICMP;
    assert_int_equal(health_spec_check(&s, err, sizeof(err)), 0);
    s.port = 7;
    assert_int_equal(health_spec_check(&s, err, sizeof(err)), TERN_EINVAL);
    s = spec4("192.0.2.1", 80, "bad host");
    assert_int_equal(health_spec_check(&s, err, sizeof(err)), TERN_EINVAL);

    assert_int_equal(health_proto_parse("https", 5), HEALTH_HTTPS);
    assert_int_equal(health_proto_parse("ping", 4), HEALTH_ICMP);
    assert_int_equal(health_proto_parse("icmp", 4), HEALTH_ICMP);
    assert_int_equal(health_proto_parse("tcp", 3), HEALTH_TCP);
    assert_int_equal(health_proto_parse("ftp", 3), -1);
    assert_int_equal(health_spec_default_port(HEALTH_HTTPS), 443);
}

static void test_intern(void **state)
{
    (void)state;
    health_registry_t *r = health_registry_new();
    assert_non_null(r);
    health_spec_t a = spec4("192.0.2.1", 80, "www.example.test");
    health_ep_t *e1 = health_intern(r, &a);
    /* the same check, given by another zone (strings at other addresses): one endpoint */
    char host[] = "www.example.test";
    health_spec_t b = spec4("192.0.2.1", 80, host);
    b.uri = "/";
    health_ep_t *e2 = health_intern(r, &b);
    assert_ptr_equal(e1, e2);
    /* another owner, port or uri: another endpoint */
    health_spec_t c = spec4("192.0.2.1", 80, "api.example.test");
    health_ep_t *e3 = health_intern(r, &c);
    health_spec_t d = spec4("192.0.2.1", 8080, "www.example.test");
    health_ep_t *e4 = health_intern(r, &d);
    health_spec_t e = spec4("192.0.2.1", 80, "www.example.test");
    e.uri = "/health";
    health_ep_t *e5 = health_intern(r, &e);
    assert_ptr_not_equal(e1, e3);
    assert_ptr_not_equal(e1, e4);
    assert_ptr_not_equal(e1, e5);
    assert_int_equal(count(r), 4);
    /* a new endpoint is unknown: ranked between down and up */
    assert_int_equal(health_ep_rank(e1), HEALTH_RANK_MIDDLE);
    assert_int_equal(health_ep_rank(NULL), HEALTH_RANK_UP);
    /* the Redis keys: redins' for an http check with an owner, tern's for tcp */
    assert_string_equal(ep_of(e1)->rkey, "redins:healthcheck:www.example.test.:192.0.2.1");
    health_spec_t t = spec4("192.0.2.9", 443, NULL);
    t.proto = HEALTH_TCP;
    health_ep_t *e6 = health_intern(r, &t);
    assert_string_equal(ep_of(e6)->rkey, "tern:healthcheck:tcp:-:192.0.2.9:443");
    health_ep_release(e6);

    health_ep_release(e2);
    assert_int_equal(count(r), 4); /* e1 still holds it */
    health_ep_retain(e1);
    health_ep_release(e1);
    health_ep_release(e1);
    health_ep_release(e3);
    health_ep_release(e4);
    health_ep_release(e5);
    assert_int_equal(count(r), 0);
    /* many endpoints: the table grows, every one is found again */
    health_ep_t *many[500];
    for (unsigned i = 0; i < 500; i++) {
        health_spec_t s = spec4("198.51.100.1", (uint16_t)(1000 + i), "m.example.test");
        many[i] = health_intern(r, &s);
    }
    for (unsigned i = 0; i < 500; i++) {
        health_spec_t s = spec4("198.51.100.1", (uint16_t)(1000 + i), "m.example.test");
        health_ep_t *again = health_intern(r, &s);
        assert_ptr_equal(again, many[i]);
        health_ep_release(again);
        health_ep_release(many[i]);
    }
    assert_int_equal(count(r), 0);
    health_registry_free(r);
}

/* Record one own result under the registry's mutex, as the checker does. */
static void result(health_ep_t *p, bool ok)
{
    struct ep *e = ep_of(p);
    pthread_mutex_lock(&e->reg->mu);
    health_ep_result(e, ok, ok ? NULL : "HTTP status 500", 1000, 1);
    pthread_mutex_unlock(&e->reg->mu);
}

static void test_counter(void **state)
{
    (void)state;
    health_registry_t *r = health_registry_new();
    health_spec_t s = spec4("192.0.2.1", 80, "www.example.test"); /* up 3, down -3 */
    health_ep_t *p = health_intern(r, &s);
    struct ep *e = ep_of(p);
    static const struct {
        bool ok;
        int status;
        unsigned rank;
        const char *state;
    } steps[] = {
        {true, 1, HEALTH_RANK_MIDDLE, "recovering"},
        {true, 2, HEALTH_RANK_NEAR, "recovering"}, /* up_count - 1 */
        {true, 3, HEALTH_RANK_UP, "up"},
        {true, 3, HEALTH_RANK_UP, "up"},            /* capped at up_count */
        {false, -1, HEALTH_RANK_MIDDLE, "failing"}, /* first failure after success: -1 */
        {false, -2, HEALTH_RANK_MIDDLE, "failing"},
        {true, 1, HEALTH_RANK_MIDDLE, "recovering"}, /* first success after failure: +1 */
        {false, -1, HEALTH_RANK_MIDDLE, "failing"},
        {false, -2, HEALTH_RANK_MIDDLE, "failing"},
        {false, -3, HEALTH_RANK_DOWN, "down"},
        {false, -3, HEALTH_RANK_DOWN, "down"}, /* capped at down_count */
        {true, 1, HEALTH_RANK_MIDDLE, "recovering"},
    };
    for (size_t i = 0; i < sizeof(steps) / sizeof(steps[0]); i++) {
        result(p, steps[i].ok);
        assert_int_equal(e->status, steps[i].status);
        assert_int_equal(health_ep_rank(p), steps[i].rank);
        assert_string_equal(health_ep_state(e), steps[i].state);
    }
    assert_int_equal(e->checks, 12);
    assert_int_equal(e->failures, 6);
    /* up_count 1: 0 (unknown) is already up_count - 1 */
    health_spec_t one = spec4("192.0.2.2", 80, NULL);
    one.up_count = 1;
    one.down_count = -1;
    health_ep_t *q = health_intern(r, &one);
    assert_int_equal(health_ep_rank(q), HEALTH_RANK_NEAR);
    result(q, true);
    assert_int_equal(health_ep_rank(q), HEALTH_RANK_UP);
    result(q, false);
    assert_int_equal(health_ep_rank(q), HEALTH_RANK_DOWN);

    /* another node's result, clamped to this endpoint's bounds */
    pthread_mutex_lock(&r->mu);
    health_ep_adopt(e, 7, 1234, "");
    pthread_mutex_unlock(&r->mu);
    assert_int_equal(e->status, 3);
    assert_true(e->last_remote);
    assert_int_equal(health_ep_rank(p), HEALTH_RANK_UP);
    pthread_mutex_lock(&r->mu);
    health_ep_adopt(e, -9, 1235, "connect: refused");
    pthread_mutex_unlock(&r->mu);
    assert_int_equal(e->status, -3);
    assert_int_equal(health_ep_rank(p), HEALTH_RANK_DOWN);
    health_ep_release(p);
    health_ep_release(q);
    health_registry_free(r);
}

static void test_override(void **state)
{
    (void)state;
    health_registry_t *r = health_registry_new();
    health_spec_t s80 = spec4("192.0.2.1", 80, "www.example.test");
    health_spec_t s443 = spec4("192.0.2.1", 443, "www.example.test");
    s443.proto = HEALTH_HTTPS;
    health_ep_t *a = health_intern(r, &s80), *b = health_intern(r, &s443);
    uint8_t ip[4] = {192, 0, 2, 1};
    /* every port */
    assert_int_equal(health_set_override(r, 4, ip, 0, HEALTH_FORCE_DOWN), 2);
    assert_int_equal(health_ep_rank(a), HEALTH_RANK_DOWN);
    assert_int_equal(health_ep_rank(b), HEALTH_RANK_DOWN);
    /* one port up, the other stays down */
    assert_int_equal(health_set_override(r, 4, ip, 443, HEALTH_FORCE_UP), 1);
    assert_int_equal(health_ep_rank(b), HEALTH_RANK_UP);
    assert_int_equal(health_ep_rank(a), HEALTH_RANK_DOWN);
    /* endpoints that go and come back (a reload) keep the override */
    health_ep_release(a);
    assert_int_equal(count(r), 1);
    a = health_intern(r, &s80);
    assert_int_equal(health_ep_rank(a), HEALTH_RANK_DOWN);
    /* auto gives them back to their checks */
    assert_int_equal(health_set_override(r, 4, ip, 0, HEALTH_AUTO), 2);
    assert_int_equal(health_ep_rank(a), HEALTH_RANK_MIDDLE);
    assert_int_equal(health_ep_rank(b), HEALTH_RANK_UP); /* the port's own override remains */
    assert_int_equal(health_set_override(r, 4, ip, 443, HEALTH_AUTO), 1);
    assert_int_equal(health_ep_rank(b), HEALTH_RANK_MIDDLE);
    /* an address nobody checks yet */
    uint8_t other[4] = {198, 51, 100, 7};
    assert_int_equal(health_set_override(r, 4, other, 0, HEALTH_FORCE_UP), 0);
    health_ep_release(a);
    health_ep_release(b);
    health_registry_free(r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_spec_check),
        cmocka_unit_test(test_intern),
        cmocka_unit_test(test_counter),
        cmocka_unit_test(test_override),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
