/*
 * test_redis_write.c — whole zones written as redins' writers write them (redis_write.h) against
 * a real redis-server, with a key prefix and suffix: a create puts the member, the config and
 * the labels in place and publishes the member; a second create of the zone, with or without
 * its final dot, is TERN_EEXIST and changes nothing; a label reads back; a delete removes all
 * three keys and publishes; deleting again is TERN_ENOENT.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

#include <cmocka.h>

#include "redis_server.h"

#include "tern/common/err.h"
#include "tern/redis/redis_write.h"

static redis_conn_t *open_conn(uint16_t port)
{
    const redis_conn_config_t cc = {.where = "test",
                                    .host = "127.0.0.1",
                                    .port = port,
                                    .connect_timeout_ms = 1000,
                                    .read_timeout_ms = 1000,
                                    .backoff_min_ms = 100,
                                    .backoff_max_ms = 400,
                                    .wakefd = -1};
    char err[256];
    redis_conn_t *c = redis_conn_new(&cc, err, sizeof(err));
    assert_non_null(c);
    assert_int_equal(redis_conn_open(c), 0);
    return c;
}

/* The reply of a command on the test's own client, as text ("(nil)", "1", the string). */
static void expect_cmd(redisContext *t, const char *want, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    redisReply *r = redisvCommand(t, fmt, ap);
    va_end(ap);
    assert_non_null(r);
    char got[512];
    if (r->type == REDIS_REPLY_INTEGER)
        snprintf(got, sizeof(got), "%lld", r->integer);
    else if (r->type == REDIS_REPLY_NIL)
        snprintf(got, sizeof(got), "(nil)");
    else
        snprintf(got, sizeof(got), "%s", r->str ? r->str : "?");
    freeReplyObject(r);
    assert_string_equal(got, want);
}

/* The next message on the subscribed client: its payload. */
static void expect_message(redisContext *sub, const char *want)
{
    redisReply *r = NULL;
    assert_int_equal(redisGetReply(sub, (void **)&r), REDIS_OK);
    assert_true(r->type == REDIS_REPLY_ARRAY && r->elements == 3);
    assert_string_equal(r->element[0]->str, "message");
    assert_string_equal(r->element[1]->str, "p:redins:zones:changed:s");
    assert_string_equal(r->element[2]->str, want);
    freeReplyObject(r);
}

static void test_create_delete(void **state)
{
    (void)state;
    redis_server_t srv;
    rsrv_start(&srv, 0, NULL, NULL);
    redisContext *t = rsrv_connect(&srv, NULL), *sub = rsrv_connect(&srv, NULL);
    struct timeval tv = {2, 0};
    redisSetTimeout(sub, tv);
    redisReply *r = redisCommand(sub, "SUBSCRIBE p:redins:zones:changed:s");
    assert_non_null(r);
    freeReplyObject(r);
    char prefix[] = "p:", suffix[] = ":s";
    const config_redis_t cfg = {.prefix = prefix, .suffix = suffix};
    redis_conn_t *c = open_conn(srv.port);
    const char *labels[] = {"@", "www"};
    const char *texts[] = {"{\"ns\":{\"ttl\":3600,\"records\":[{\"host\":\"ns1.w.test.\"}]}}",
                           "{\"a\":{\"ttl\":60,\"records\":[{\"ip\":\"192.0.2.1\"}]}}"};
    const char *config = "{\"soa\":{\"ns\":\"ns1.w.test.\",\"mbox\":\"h.w.test.\",\"serial\":1}}";
    char err[256] = "";
    /* a hash left over from a zone no longer in the set does not survive a create */
    rsrv_cmd(t, "HSET p:redins:zones:w.test.:s stale {}");
    assert_int_equal(
        redis_write_create_zone(c, &cfg, "w.test.", config, labels, texts, 2, err, sizeof(err)), 0);
    expect_message(sub, "w.test.");
    expect_cmd(t, "1", "SISMEMBER p:redins:zones:s w.test.");
    expect_cmd(t, config, "GET p:redins:zones:w.test.:config:s");
    expect_cmd(t, texts[1], "HGET p:redins:zones:w.test.:s www");
    expect_cmd(t, "2", "HLEN p:redins:zones:w.test.:s");
    char *text = NULL;
    assert_int_equal(redis_write_label_get(c, &cfg, "w.test.", "@", &text, err, sizeof(err)), 0);
    assert_string_equal(text, texts[0]);
    free(text);
    assert_int_equal(redis_write_label_get(c, &cfg, "w.test.", "nope", &text, err, sizeof(err)),
                     TERN_ENOENT);
    assert_null(text);
    /* the zone again, or as redins' older writers spell it (no final dot) */
    rsrv_cmd(t, "SADD p:redins:zones:s v.test");
    assert_int_equal(
        redis_write_create_zone(c, &cfg, "w.test.", "{}", labels, texts, 1, err, sizeof(err)),
        TERN_EEXIST);
    assert_non_null(strstr(err, "w.test."));
    assert_int_equal(
        redis_write_create_zone(c, &cfg, "v.test.", "{}", labels, texts, 1, err, sizeof(err)),
        TERN_EEXIST);
    expect_cmd(t, config, "GET p:redins:zones:w.test.:config:s");
    expect_cmd(t, "(nil)", "GET p:redins:zones:v.test.:config:s");
    /* nothing stays WATCHed: a plain write after a refusal goes through */
    char member[64];
    assert_int_equal(
        redis_write_member(c, &cfg, "w.test", member, sizeof(member), err, sizeof(err)), 0);
    assert_string_equal(member, "w.test.");
    /* delete: the member, the hash, the config and its DNSSEC keys, then published */
    expect_cmd(t, "OK", "SET p:redins:zones:w.test.:zsk:pub:s x");
    expect_cmd(t, "OK", "SET p:redins:zones:w.test.:ksk:priv:s x");
    assert_int_equal(redis_write_delete_zone(c, &cfg, "w.test", err, sizeof(err)), 0);
    expect_message(sub, "w.test.");
    expect_cmd(t, "0", "SISMEMBER p:redins:zones:s w.test.");
    expect_cmd(t, "0", "EXISTS p:redins:zones:w.test.:s p:redins:zones:w.test.:config:s");
    expect_cmd(t, "0", "EXISTS p:redins:zones:w.test.:zsk:pub:s p:redins:zones:w.test.:ksk:priv:s");
    assert_int_equal(redis_write_delete_zone(c, &cfg, "w.test", err, sizeof(err)), TERN_ENOENT);
    /* the member as the set spells it: "v.test" without its dot */
    assert_int_equal(redis_write_delete_zone(c, &cfg, "v.test", err, sizeof(err)), 0);
    expect_message(sub, "v.test");
    expect_cmd(t, "0", "SCARD p:redins:zones:s");
    redis_conn_free(c);
    redisFree(sub);
    redisFree(t);
    rsrv_stop(&srv);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_create_delete),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
