/*
 * test_config_redis_ha.c — Redis high availability in tern's "redis:" block (src/conf/config.c):
 * sentinel {addresses, master, password} and read_from parsed; every error with its file:line and
 * key path; sentinel and address exclusive; health's redis refusing both; copies, comparisons and
 * frees (run under ASan: nothing may leak).
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
#include "tern/conf/config.h"

#include "conf_test_util.h"

static const char block[] = "redis:\n"
                            "  sentinel:\n"
                            "    addresses: [\"127.0.0.1:26379\", \"127.0.0.1:26380\", "
                            "\"[::1]:26381\"]\n"
                            "    master: mymaster\n"
                            "    password: s3cret\n"
                            "  read_from: replica\n"
                            "  db: 2\n";

static void test_parsed(void **state)
{
    (void)state;
    config_t c = load_text(block);
    assert_true(c.redis.enabled);
    assert_int_equal(c.redis.nsentinels, 3);
    assert_string_equal(c.redis.sentinels[0], "127.0.0.1:26379");
    assert_string_equal(c.redis.sentinels[1], "127.0.0.1:26380");
    assert_string_equal(c.redis.sentinels[2], "[::1]:26381");
    assert_string_equal(c.redis.sentinel_master, "mymaster");
    assert_string_equal(c.redis.sentinel_password, "s3cret");
    assert_int_equal(c.redis.read_from, CONFIG_REDIS_READ_REPLICA);
    assert_int_equal(c.redis.db, 2);
    assert_null(c.redis.host);
    assert_null(c.redis.unix_path);
    config_free(&c);
}

static void test_defaults(void **state)
{
    (void)state;
    config_t c = load_text("redis:\n  sentinel: {addresses: [\"10.0.0.1:26379\"], master: m}\n");
    assert_int_equal(c.redis.nsentinels, 1);
    assert_null(c.redis.sentinel_password);
    assert_int_equal(c.redis.read_from, CONFIG_REDIS_READ_PRIMARY);
    config_free(&c);
    c = load_text("redis:\n  address: \"127.0.0.1:6379\"\n  read_from: primary\n");
    assert_int_equal(c.redis.nsentinels, 0);
    assert_null(c.redis.sentinels);
    assert_null(c.redis.sentinel_master);
    config_free(&c);
    /* sentinel: ~ is no Sentinel */
    c = load_text("redis:\n  sentinel: ~\n  address: \"127.0.0.1:6379\"\n");
    assert_int_equal(c.redis.nsentinels, 0);
    assert_string_equal(c.redis.host, "127.0.0.1");
    config_free(&c);
}

static void test_errors(void **state)
{
    (void)state;
    expect_error("redis:\n  address: \"127.0.0.1:6379\"\n  sentinel:\n"
                 "    addresses: [\"127.0.0.1:26379\"]\n    master: m\n",
                 3,
                 "redis: sentinel: and address (line 2) are exclusive: Sentinel names the node, "
                 "give one of them");
    expect_error("redis:\n  read_from: replica\n", 2,
                 "redis: read_from: replica needs sentinel: (the replicas are found through "
                 "Sentinel)");
    expect_error("redis:\n  read_from: secondary\n", 2,
                 "redis: read_from: expected primary or replica, got \"secondary\"");
    expect_error("redis:\n  sentinel: [\"127.0.0.1:26379\"]\n", 2,
                 "redis: sentinel: expected a mapping {addresses, master, password}, got a list");
    expect_error("redis:\n  sentinel:\n    master: m\n", 3,
                 "redis: sentinel: missing \"addresses\" (the sentinels, a list of \"IP:PORT\")");
    expect_error("redis:\n  sentinel:\n    addresses: [\"127.0.0.1:26379\"]\n", 3,
                 "redis: sentinel: missing \"master\" (the name the sentinels monitor)");
    expect_error("redis:\n  sentinel:\n    addresses: [\"127.0.0.1:26379\"]\n    master: m\n"
                 "    port: 1\n",
                 5, "redis: sentinel: unknown key \"port\" (want addresses, master, password)");
    expect_error("redis:\n  sentinel:\n    addresses: \"127.0.0.1:26379\"\n    master: m\n", 3,
                 "redis: sentinel: addresses: expected a list of 1 to 16 \"IP:PORT\", got a "
                 "string");
    expect_error("redis:\n  sentinel:\n    addresses: []\n    master: m\n", 3,
                 "redis: sentinel: addresses: expected a list of 1 to 16 \"IP:PORT\", got an "
                 "empty list or a longer one");
    expect_error("redis:\n  sentinel:\n    addresses:\n      - \"127.0.0.1:26379\"\n"
                 "      - \"sentinel.example:26379\"\n    master: m\n",
                 5,
                 "redis: sentinel: addresses[1]: expected a numeric \"IP:PORT\" or "
                 "\"[V6]:PORT\", got \"sentinel.example:26379\"");
    expect_error("redis:\n  sentinel:\n    addresses: [\"::1:26379\"]\n    master: m\n", 3,
                 "redis: sentinel: addresses[0]: expected a numeric \"IP:PORT\" or "
                 "\"[V6]:PORT\", got \"::1:26379\"");
    expect_error("redis:\n  sentinel:\n    addresses: [\"127.0.0.1:0\"]\n    master: m\n", 3,
                 "redis: sentinel: addresses[0]: expected a numeric \"IP:PORT\" or "
                 "\"[V6]:PORT\", got \"127.0.0.1:0\"");
    expect_error("redis:\n  sentinel:\n    addresses: [{a: b}]\n    master: m\n", 3,
                 "redis: sentinel: addresses[0]: expected a numeric \"IP:PORT\" or "
                 "\"[V6]:PORT\", got a mapping");
    expect_error("redis:\n  sentinel:\n    addresses: [\"127.0.0.1:1\", \"127.0.0.1:1\"]\n"
                 "    master: m\n",
                 3, "redis: sentinel: addresses[1]: \"127.0.0.1:1\" given twice");
    expect_error("redis:\n  sentinel:\n    addresses: [\"127.0.0.1:1\"]\n    master: \"a b\"\n", 4,
                 "redis: sentinel: master: expected the name Sentinel monitors, got one with "
                 "blanks");
    expect_error("redis:\n  sentinel:\n    addresses: [\"127.0.0.1:1\"]\n    master: ~\n", 4,
                 "redis: sentinel: master: expected the name Sentinel monitors, got nothing");
    expect_error("redis:\n  sentinel:\n    addresses: [\"127.0.0.1:1\"]\n    master: m\n"
                 "    password: [x]\n",
                 5, "redis: sentinel: password: expected a string, got a list");
    /* health's redis is a connection only */
    expect_error("health:\n  redis:\n    sentinel: {addresses: [\"127.0.0.1:1\"], master: m}\n", 3,
                 "health: redis: sentinel: not a key of health: redis (it sets the Redis zone "
                 "source: give it in the top-level redis)");
}

static void test_copy_same(void **state)
{
    (void)state;
    config_t a = load_text(block), b, c;
    assert_int_equal(config_copy(&b, &a), 0);
    assert_true(redis_settings_same(&a.redis, &b.redis));
    assert_int_equal(b.redis.nsentinels, 3);
    assert_ptr_not_equal(b.redis.sentinels[2], a.redis.sentinels[2]);
    assert_string_equal(b.redis.sentinels[2], "[::1]:26381");
    c = load_text("redis:\n  sentinel:\n    addresses: [\"127.0.0.1:26379\", \"127.0.0.1:26380\", "
                  "\"[::1]:26382\"]\n    master: mymaster\n    password: s3cret\n"
                  "  read_from: replica\n  db: 2\n");
    assert_false(redis_settings_same(&a.redis, &c.redis));
    config_free(&c);
    c = load_text("redis:\n  sentinel:\n    addresses: [\"127.0.0.1:26379\", \"127.0.0.1:26380\", "
                  "\"[::1]:26381\"]\n    master: mymaster\n    password: s3cret\n  db: 2\n");
    assert_false(redis_settings_same(&a.redis, &c.redis)); /* read_from differs */
    config_free(&c);
    c = load_text("redis:\n  sentinel:\n    addresses: [\"127.0.0.1:26379\"]\n"
                  "    master: mymaster\n    password: s3cret\n  read_from: replica\n  db: 2\n");
    assert_false(redis_settings_same(&a.redis, &c.redis)); /* fewer sentinels */
    config_free(&c);
    config_free(&a);
    config_free(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parsed),
        cmocka_unit_test(test_defaults),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_copy_same),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
