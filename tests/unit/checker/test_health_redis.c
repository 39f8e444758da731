/*
 * test_health_redis.c — the checker's shared state (src/checker/health_redis.c, private to the
 * module) against a real redis-server, through the connection type the zone source uses
 * (tern/redis/redis_conn.h): claim (no state: ours to check, the lock taken; the lock held:
 * wait), publish (redins' JSON with its expiry, the lock dropped), adopt a fresh state, Redis
 * gone (-1, counted, checked locally), the loads of load shedding's Redis source, and a client
 * for Sentinel's settings.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "redis_server.h"

#include "health_int.h"
#include "health_redis.h"

static int64_t wall_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void test_claim_publish_adopt(void **state)
{
    (void)state;
    redis_server_t srv;
    rsrv_start(&srv, 0, NULL, NULL);
    health_registry_t *reg = health_registry_new();
    assert_non_null(reg);
    health_spec_t spec;
    health_spec_init(&spec);
    spec.proto = HEALTH_TCP;
    spec.family = 4;
    spec.port = 8080;
    memcpy(spec.addr, (uint8_t[]){192, 0, 2, 7}, 4);
    struct ep *e = (struct ep *)health_intern(reg, &spec);
    assert_non_null(e);

    config_redis_t rc = {.enabled = true, .host = "127.0.0.1", .port = srv.port, .prefix = "p:"};
    hredis_t *h = hredis_new(&rc);
    assert_non_null(h);
    assert_true(hredis_ready(h, rsrv_now_ms()));
    assert_true(hredis_connected(h));
    hredis_state_t st;
    assert_int_equal(hredis_claim(h, &e, 1, 10000, wall_now(), &st), 0);
    assert_int_equal(st.decision, HREDIS_CHECK); /* no state: ours, the lock taken */
    assert_int_equal(hredis_claim(h, &e, 1, 10000, wall_now(), &st), 0);
    assert_int_equal(st.decision, HREDIS_WAIT); /* the lock is held */

    hredis_result_t res = {.e = e, .status = 2, .wall_ms = wall_now(), .error = ""};
    assert_int_equal(hredis_publish(h, &res, 1, 60), 0);
    redisContext *t = rsrv_connect(&srv, NULL);
    char key[HEALTH_RKEY_MAX + 8];
    snprintf(key, sizeof(key), "p:%s", e->rkey);
    redisReply *r = redisCommand(t, "GET %s", key);
    assert_non_null(r);
    assert_int_equal(r->type, REDIS_REPLY_STRING);
    assert_non_null(strstr(r->str, "\"status\":2"));
    freeReplyObject(r);
    r = redisCommand(t, "TTL %s", key);
    assert_true(r && r->type == REDIS_REPLY_INTEGER && r->integer > 0 && r->integer <= 60);
    freeReplyObject(r);
    redisFree(t);
    /* a state checked within the interval: adopted */
    assert_int_equal(hredis_claim(h, &e, 1, 10000, wall_now(), &st), 0);
    assert_int_equal(st.decision, HREDIS_ADOPT);
    assert_int_equal(st.status, 2);

    /* Redis gone: -1, counted, everything checked locally; no retry before the backoff */
    uint64_t errors = hredis_errors(h);
    rsrv_kill(&srv, SIGKILL);
    assert_int_equal(hredis_claim(h, &e, 1, 10000, wall_now(), &st), -1);
    assert_int_equal(st.decision, HREDIS_CHECK);
    assert_true(hredis_errors(h) > errors);
    assert_false(hredis_connected(h));
    assert_false(hredis_ready(h, rsrv_now_ms()));
    hredis_free(h);
    health_ep_release(&e->pub);
    health_registry_free(reg);
    rsrv_stop(&srv);
}

/* Load shedding's Redis source: HGET <hash> <address> for each endpoint in one round trip (the
 * operator's hash, no prefix); a number is the load, a missing field, a word or a key of another
 * type is unknown; Redis gone: -1. */
static void test_loads(void **state)
{
    (void)state;
    redis_server_t srv;
    rsrv_start(&srv, 0, NULL, NULL);
    health_registry_t *reg = health_registry_new();
    assert_non_null(reg);
    struct ep *e[4];
    const char *hash[4] = {"tern:load", "tern:load", "tern:load", "not:a:hash"};
    for (int i = 0; i < 4; i++) {
        health_spec_t spec;
        health_spec_init(&spec);
        spec.proto = HEALTH_TCP;
        spec.family = 4;
        spec.port = 8080;
        spec.load_src = HEALTH_LOAD_REDIS;
        spec.load_key = hash[i];
        memcpy(spec.addr, (uint8_t[]){192, 0, 2, (uint8_t)(10 + i)}, 4);
        e[i] = (struct ep *)health_intern(reg, &spec);
        assert_non_null(e[i]);
        assert_int_equal(health_ep_load(&e[i]->pub), HEALTH_LOAD_UNKNOWN);
    }
    redisContext *t = rsrv_connect(&srv, NULL);
    freeReplyObject(redisCommand(t, "HSET tern:load 192.0.2.10 0.85 192.0.2.11 busy"));
    freeReplyObject(redisCommand(t, "SET not:a:hash 5"));
    config_redis_t rc = {.enabled = true, .host = "127.0.0.1", .port = srv.port, .prefix = "p:"};
    hredis_t *h = hredis_new(&rc);
    assert_non_null(h);
    assert_true(hredis_ready(h, rsrv_now_ms()));
    uint32_t loads[4];
    assert_int_equal(hredis_loads(h, e, 4, loads), 0);
    assert_int_equal(loads[0], 850);
    assert_int_equal(loads[1], HEALTH_LOAD_UNKNOWN); /* "busy" */
    assert_int_equal(loads[2], HEALTH_LOAD_UNKNOWN); /* no field for 192.0.2.12 */
    assert_int_equal(loads[3], HEALTH_LOAD_UNKNOWN); /* WRONGTYPE */
    assert_true(hredis_connected(h));                /* a reply error is no connection error */
    redisFree(t);
    rsrv_kill(&srv, SIGKILL);
    assert_int_equal(hredis_loads(h, e, 4, loads), -1);
    assert_false(hredis_connected(h));
    hredis_free(h);
    for (int i = 0; i < 4; i++)
        health_ep_release(&e[i]->pub);
    health_registry_free(reg);
    rsrv_stop(&srv);
}

static void test_sentinel_settings(void **state)
{
    (void)state;
    char *sentinels[] = {"127.0.0.1:26379", "[::1]:26380"};
    char *bad[] = {"localhost:26379"};
    config_redis_t rc = {.enabled = true,
                         .db = 2,
                         .sentinels = sentinels,
                         .nsentinels = 2,
                         .sentinel_master = "m",
                         .sentinel_password = "sp"};
    /* a client for them: the node is asked of the sentinels at the first hredis_ready() */
    hredis_t *h = hredis_new(&rc);
    assert_non_null(h);
    assert_false(hredis_connected(h));
    hredis_free(h);
    rc.sentinels = bad; /* the config never lets one through; the client refuses it too */
    rc.nsentinels = 1;
    assert_null(hredis_new(&rc));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_claim_publish_adopt),
        cmocka_unit_test(test_loads),
        cmocka_unit_test(test_sentinel_settings),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
