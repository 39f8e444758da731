/*
 * Unit tests for src/redis/redis_sentinel.c: sentinel addresses split, the reply of SENTINEL
 * get-master-addr-by-name read, and a usable replica picked from SENTINEL replicas (flags and
 * link status judged, the current replica kept while usable, the start index rotating the pick).
 * Replies are hiredis structures built by hand, as the server would send them.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "redis_sentinel.h"

static redisReply str(const char *s)
{
    return (redisReply){.type = REDIS_REPLY_STRING, .str = (char *)(uintptr_t)s, .len = strlen(s)};
}

static void test_split(void **state)
{
    (void)state;
    redis_node_t n;
    assert_true(redis_sentinel_split("127.0.0.1:26379", &n));
    assert_string_equal(n.host, "127.0.0.1");
    assert_int_equal(n.port, 26379);
    assert_true(redis_sentinel_split("[::1]:26381", &n));
    assert_string_equal(n.host, "::1");
    assert_int_equal(n.port, 26381);
    assert_false(redis_sentinel_split("127.0.0.1", &n));
    assert_false(redis_sentinel_split("127.0.0.1:0", &n));
    assert_false(redis_sentinel_split("127.0.0.1:65536", &n));
    assert_false(redis_sentinel_split("redis.example:6379", &n));
}

static void test_master(void **state)
{
    (void)state;
    redisReply parts[2] = {str("10.0.0.7"), str("6380")};
    redisReply *pp[2] = {&parts[0], &parts[1]};
    redisReply arr = {.type = REDIS_REPLY_ARRAY, .elements = 2, .element = pp};
    redis_node_t n;
    assert_true(redis_sentinel_master(&arr, &n));
    assert_string_equal(n.host, "10.0.0.7");
    assert_int_equal(n.port, 6380);
    redisReply nil = {.type = REDIS_REPLY_NIL};
    assert_false(redis_sentinel_master(&nil, &n)); /* the master name is unknown there */
    redisReply err = {.type = REDIS_REPLY_ERROR, .str = (char *)"ERR", .len = 3};
    assert_false(redis_sentinel_master(&err, &n));
    parts[1] = str("port");
    assert_false(redis_sentinel_master(&arr, &n));
}

/* One replica entry: the flat field/value array SENTINEL replicas gives. */
struct replica {
    redisReply f[8];
    redisReply *fp[8];
    redisReply entry;
};

static void replica(struct replica *r, const char *ip, const char *port, const char *flags,
                    const char *link)
{
    const char *kv[8] = {"ip", ip, "port", port, "flags", flags, "master-link-status", link};
    for (int i = 0; i < 8; i++) {
        r->f[i] = str(kv[i]);
        r->fp[i] = &r->f[i];
    }
    r->entry = (redisReply){.type = REDIS_REPLY_ARRAY, .elements = 8, .element = r->fp};
}

static void test_pick_replica(void **state)
{
    (void)state;
    struct replica r[4];
    replica(&r[0], "127.0.0.1", "7001", "slave,s_down,disconnected", "err");
    replica(&r[1], "127.0.0.1", "7002", "slave", "ok");
    replica(&r[2], "127.0.0.1", "7003", "slave", "err"); /* its link to the primary is down */
    replica(&r[3], "127.0.0.1", "7004", "slave", "ok");
    redisReply *ep[4] = {&r[0].entry, &r[1].entry, &r[2].entry, &r[3].entry};
    redisReply all = {.type = REDIS_REPLY_ARRAY, .elements = 4, .element = ep};
    redis_node_t out;
    assert_int_equal(redis_sentinel_pick_replica(&all, NULL, 0, &out), 2);
    assert_int_equal(out.port, 7002);
    assert_int_equal(redis_sentinel_pick_replica(&all, NULL, 1, &out), 2);
    assert_int_equal(out.port, 7004); /* the start rotates among the usable ones */
    redis_node_t keep = {.host = "127.0.0.1", .port = 7004};
    assert_int_equal(redis_sentinel_pick_replica(&all, &keep, 0, &out), 2);
    assert_int_equal(out.port, 7004); /* the current one stays while usable */
    redis_node_t gone = {.host = "127.0.0.1", .port = 7001};
    assert_int_equal(redis_sentinel_pick_replica(&all, &gone, 0, &out), 2);
    assert_int_equal(out.port, 7002);
    assert_true(redis_node_same(&keep, &keep));
    assert_false(redis_node_same(&keep, &gone));
    /* none usable: out untouched */
    redisReply *bad[2] = {&r[0].entry, &r[2].entry};
    redisReply none = {.type = REDIS_REPLY_ARRAY, .elements = 2, .element = bad};
    redis_node_t untouched = {.host = "x", .port = 1};
    assert_int_equal(redis_sentinel_pick_replica(&none, NULL, 0, &untouched), 0);
    assert_int_equal(untouched.port, 1);
    redisReply empty = {.type = REDIS_REPLY_ARRAY, .elements = 0};
    assert_int_equal(redis_sentinel_pick_replica(&empty, NULL, 0, &out), 0);
}

/* Why the source moves: another node, or the node read in a new role (a replica promoted),
 * which used to read "the primary 127.0.0.1:6401 instead of 127.0.0.1:6401". */
static void test_move_text(void **state)
{
    (void)state;
    char buf[256];
    redis_node_t a = {.host = "127.0.0.1", .port = 6401}, b = {.host = "127.0.0.1", .port = 6402};
    redis_node_t v6 = {.host = "::1", .port = 6403};
    assert_string_equal(redis_sentinel_move_text(buf, sizeof(buf), &a, false, &a, true),
                        "Sentinel now names 127.0.0.1:6401 the primary (read as a replica until "
                        "now)");
    assert_string_equal(redis_sentinel_move_text(buf, sizeof(buf), &a, true, &a, false),
                        "Sentinel now names 127.0.0.1:6401 a replica (read as the primary until "
                        "now)");
    assert_string_equal(redis_sentinel_move_text(buf, sizeof(buf), &b, false, &a, false),
                        "Sentinel now names the primary 127.0.0.1:6402 instead of 127.0.0.1:6401");
    assert_string_equal(redis_sentinel_move_text(buf, sizeof(buf), &v6, true, &a, true),
                        "Sentinel now names a replica [::1]:6403 instead of 127.0.0.1:6401");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_split),
        cmocka_unit_test(test_master),
        cmocka_unit_test(test_pick_replica),
        cmocka_unit_test(test_move_text),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
