/*
 * test_status.c — the status page's health history (status_history_*) against a real health
 * registry whose endpoints get results as the checker gives them (health_ep_result(), under the
 * registry's mutex, as health_check.c calls it).
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include <arpa/inet.h>

#include "health_int.h"
#include "tern/health/health.h"
#include "tern/metrics/status.h"

static health_spec_t tcp_spec(const char *addr, uint16_t port)
{
    health_spec_t s;
    health_spec_init(&s);
    s.proto = HEALTH_TCP;
    s.family = 4;
    s.port = port;
    s.up_count = 2;
    s.down_count = -2;
    assert_int_equal(inet_pton(AF_INET, addr, s.addr), 1);
    return s;
}

static void result(health_ep_t *p, bool ok, int64_t when_ms)
{
    struct ep *e = ep_of(p);
    pthread_mutex_lock(&e->reg->mu);
    health_ep_result(e, ok, ok ? NULL : "connect: Connection refused", 1500, when_ms);
    pthread_mutex_unlock(&e->reg->mu);
}

static void key_of(const health_spec_t *s, char *key, size_t len)
{
    health_spec_describe(s, key, len);
}

/* since moves only with the state; each new result is recorded once; newest first. */
static void test_history(void **state)
{
    (void)state;
    health_registry_t *r = health_registry_new();
    status_history_t *h = status_history_new();
    assert_non_null(r);
    assert_non_null(h);
    health_spec_t s = tcp_spec("192.0.2.1", 80);
    health_ep_t *ep = health_intern(r, &s);
    assert_non_null(ep);
    char key[160];
    key_of(&s, key, sizeof(key));
    status_ep_history_t e;

    status_history_sample(h, r, 1000);
    assert_true(status_history_get(h, key, &e));
    assert_string_equal(e.state, "unknown");
    assert_int_equal(e.since, 1000);
    assert_int_equal(e.count, 0);

    result(ep, true, 1100);
    status_history_sample(h, r, 2000);
    result(ep, true, 2100);
    status_history_sample(h, r, 3000);
    status_history_sample(h, r, 4000); /* nothing new: no new result, same state */
    assert_true(status_history_get(h, key, &e));
    assert_string_equal(e.state, "up");
    assert_int_equal(e.since, 3000);
    assert_int_equal(e.count, 2);
    assert_int_equal(e.recent[0].when, 2100);
    assert_int_equal(e.recent[1].when, 1100);
    assert_true(e.recent[0].ok && !e.recent[0].remote);
    assert_int_equal(e.recent[0].latency_us, 1500);

    result(ep, false, 4100);
    status_history_sample(h, r, 5000);
    result(ep, false, 5100);
    result(ep, false, 5200); /* two between samples: only the last is seen */
    status_history_sample(h, r, 6000);
    assert_true(status_history_get(h, key, &e));
    assert_string_equal(e.state, "down");
    assert_int_equal(e.since, 6000);
    assert_int_equal(e.count, 4);
    assert_int_equal(e.recent[0].when, 5200);
    assert_false(e.recent[0].ok);
    assert_int_equal(e.recent[1].when, 4100);

    /* the ring keeps the last STATUS_RECENT, newest first */
    for (int i = 0; i < 15; i++) {
        result(ep, true, 7000 + i * 1000);
        status_history_sample(h, r, 7500 + i * 1000);
    }
    assert_true(status_history_get(h, key, &e));
    assert_int_equal(e.count, STATUS_RECENT);
    assert_int_equal(e.recent[0].when, 7000 + 14 * 1000);
    assert_int_equal(e.recent[STATUS_RECENT - 1].when, 7000 + (15 - STATUS_RECENT) * 1000);
    assert_string_equal(e.state, "up");

    /* a second endpoint appears, the first goes (a reload dropped its record): forgotten */
    health_spec_t s2 = tcp_spec("192.0.2.2", 81);
    health_ep_t *ep2 = health_intern(r, &s2);
    assert_non_null(ep2);
    health_ep_release(ep);
    status_history_sample(h, r, 30000);
    assert_false(status_history_get(h, key, &e));
    key_of(&s2, key, sizeof(key));
    assert_true(status_history_get(h, key, &e));
    assert_int_equal(e.since, 30000);

    /* no registry (no health checks): everything forgotten; NULL history: nothing */
    status_history_sample(h, NULL, 31000);
    assert_false(status_history_get(h, key, &e));
    assert_false(status_history_get(NULL, key, &e));
    status_history_sample(NULL, r, 31000);

    health_ep_release(ep2);
    status_history_free(h);
    status_history_free(NULL);
    health_registry_free(r);
}

/* Many endpoints, some gone and some new between samples: every one present is found (the
 * history's binary search over its sorted entries and its scan of the new ones), none gone is. */
#define MANY 600
static void test_many(void **state)
{
    (void)state;
    health_registry_t *r = health_registry_new();
    status_history_t *h = status_history_new();
    assert_non_null(r);
    assert_non_null(h);
    static health_ep_t *eps[MANY + 100];
    static health_spec_t specs[MANY + 100];
    char addr[32], key[160];
    for (unsigned i = 0; i < MANY + 100; i++) {
        /* ports in an order unlike the keys' sort order */
        snprintf(addr, sizeof(addr), "198.51.100.%u", (i * 37) % 250 + 1);
        specs[i] = tcp_spec(addr, (uint16_t)(1000 + (i * 7919) % 60000));
    }
    for (unsigned i = 0; i < MANY; i++)
        assert_non_null(eps[i] = health_intern(r, &specs[i]));
    status_history_sample(h, r, 1000);
    for (unsigned i = MANY; i < MANY + 100; i++)
        assert_non_null(eps[i] = health_intern(r, &specs[i]));
    for (unsigned i = 0; i < MANY; i += 2) {
        health_ep_release(eps[i]);
        eps[i] = NULL;
    }
    status_history_sample(h, r, 2000);
    status_ep_history_t e;
    for (unsigned i = 0; i < MANY + 100; i++) {
        health_spec_describe(&specs[i], key, sizeof(key));
        bool found = status_history_get(h, key, &e);
        if (found != (eps[i] != NULL))
            fail_msg("endpoint %u (%s): found %d", i, key, found);
        if (found)
            assert_int_equal(e.since, i < MANY ? 1000 : 2000);
    }
    for (unsigned i = 0; i < MANY + 100; i++)
        health_ep_release(eps[i]);
    status_history_free(h);
    health_registry_free(r);
}

/* The page is whole and self-contained: no URL but its own document's. */
static void test_page(void **state)
{
    (void)state;
    const char *p = status_page_html;
    assert_non_null(strstr(p, "<!DOCTYPE html>"));
    assert_non_null(strstr(p, "</html>"));
    assert_non_null(strstr(p, "fetch('status.json'"));
    assert_null(strstr(p, "http:"));
    assert_null(strstr(p, "https:"));
    assert_null(strstr(p, "src="));
    assert_null(strstr(p, "<link"));
    assert_null(strstr(p, "innerHTML")); /* names are drawn as text, never as markup */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_history),
        cmocka_unit_test(test_many),
        cmocka_unit_test(test_page),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
