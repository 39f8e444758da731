/*
 * test_redis_source.c — the Redis zone source against a real redis-server started by each test on
 * a free loopback port: the initial read, live changes through keyspace notifications and the
 * change channel, coalescing, bad labels, rejected zones, large zones, prefix/suffix/db, AUTH, and
 * Redis down at start, killed, hung and restarted. Every wait is bounded.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "redis_server.h"
#include "test_util.h"
#include "zone/zone_test_util.h"

#include "tern/common/err.h"
#include "tern/redis/redis_source.h"
#include "tern/wire/dname.h"

/* --- what the callbacks saw --- */

#define MAX_ZONES 256

static struct {
    pthread_mutex_t mu;
    struct {
        char origin[256];
        zone_t *z; /* the latest version, NULL after gone */
        unsigned versions;
        unsigned gone;
    } zone[MAX_ZONES];
    size_t n;
    unsigned ups, downs, syncs;
} got = {.mu = PTHREAD_MUTEX_INITIALIZER};

static int slot(const char *origin)
{
    for (size_t i = 0; i < got.n; i++)
        if (strcmp(got.zone[i].origin, origin) == 0)
            return (int)i;
    if (got.n == MAX_ZONES)
        return -1;
    snprintf(got.zone[got.n].origin, sizeof(got.zone[0].origin), "%s", origin);
    return (int)got.n++;
}

static void on_zone(void *ctx, const char *origin, zone_t *z)
{
    (void)ctx;
    pthread_mutex_lock(&got.mu);
    int i = slot(origin);
    if (i >= 0) {
        zone_free(got.zone[i].z);
        got.zone[i].z = z;
        got.zone[i].versions++;
    } else {
        zone_free(z);
    }
    pthread_mutex_unlock(&got.mu);
}

static void on_zone_gone(void *ctx, const char *origin)
{
    (void)ctx;
    pthread_mutex_lock(&got.mu);
    int i = slot(origin);
    if (i >= 0) {
        zone_free(got.zone[i].z);
        got.zone[i].z = NULL;
        got.zone[i].gone++;
    }
    pthread_mutex_unlock(&got.mu);
}

static void on_state(void *ctx, bool up)
{
    (void)ctx;
    pthread_mutex_lock(&got.mu);
    if (up)
        got.ups++;
    else
        got.downs++;
    pthread_mutex_unlock(&got.mu);
}

static void on_synced(void *ctx, size_t zones, size_t failed)
{
    (void)ctx;
    (void)zones;
    (void)failed;
    pthread_mutex_lock(&got.mu);
    got.syncs++;
    pthread_mutex_unlock(&got.mu);
}

static const redis_source_callbacks_t callbacks = {
    .on_zone = on_zone,
    .on_zone_gone = on_zone_gone,
    .on_state = on_state,
    .on_synced = on_synced,
};

static void got_reset(void)
{
    pthread_mutex_lock(&got.mu);
    for (size_t i = 0; i < got.n; i++)
        zone_free(got.zone[i].z);
    memset(got.zone, 0, sizeof(got.zone));
    got.n = 0;
    got.ups = got.downs = got.syncs = 0;
    pthread_mutex_unlock(&got.mu);
}

static unsigned versions(const char *origin)
{
    pthread_mutex_lock(&got.mu);
    int i = slot(origin);
    unsigned v = i >= 0 ? got.zone[i].versions : 0;
    pthread_mutex_unlock(&got.mu);
    return v;
}

static unsigned gones(const char *origin)
{
    pthread_mutex_lock(&got.mu);
    int i = slot(origin);
    unsigned v = i >= 0 ? got.zone[i].gone : 0;
    pthread_mutex_unlock(&got.mu);
    return v;
}

static unsigned counter(const unsigned *c)
{
    pthread_mutex_lock(&got.mu);
    unsigned v = *c;
    pthread_mutex_unlock(&got.mu);
    return v;
}

/* --- looking into the zones --- */

/* Does the latest version of origin have name with an A RR of ip? ip NULL: does the name exist?
 * want_serial non-zero: is that the serial? */
typedef struct probe {
    const char *origin, *name, *ip;
    uint32_t serial;
    bool absent; /* true: the name must NOT exist */
} probe_t;

static bool probe_locked(const probe_t *p)
{
    int i = slot(p->origin);
    const zone_t *z = i >= 0 ? got.zone[i].z : NULL;
    if (!z)
        return false;
    if (p->serial && z->serial != p->serial)
        return false;
    if (!p->name)
        return true;
    uint8_t w[DNAME_MAXLEN], lc[DNAME_MAXLEN];
    wire_name(w, p->name);
    size_t len = dname_lower(lc, w);
    const zone_node_t *n = zone_find_node(z, lc, len, dname_hash(lc));
    if (p->absent)
        return n == NULL;
    if (!n)
        return false;
    if (!p->ip)
        return true;
    const zone_rrset_t *a = zone_node_rrset(n, 1);
    if (!a)
        return false;
    uint8_t want[4];
    assert_int_equal(inet_pton(AF_INET, p->ip, want), 1);
    const uint8_t *r = a->rdata;
    for (unsigned k = 0; k < a->count; k++) {
        uint16_t rdlen = (uint16_t)(r[0] << 8 | r[1]);
        if (rdlen == 4 && memcmp(r + 2, want, 4) == 0)
            return true;
        r += 2 + rdlen;
    }
    return false;
}

static bool probe(const probe_t *p)
{
    pthread_mutex_lock(&got.mu);
    bool ok = probe_locked(p);
    pthread_mutex_unlock(&got.mu);
    return ok;
}

/* The waits below are for a condition, not a speed: ms is what it takes on an idle machine, and
 * a test gives up only after GIVE_UP times that, so a busy 2-core machine (an ASan build, a
 * parallel ctest, other jobs) does not fail a correct source. */
#define GIVE_UP 10

/* Wait until p holds (give up after GIVE_UP x ms); returns the milliseconds it took, or fails
 * the test. */
static int64_t wait_probe(const probe_t *p, int ms)
{
    int64_t t0 = rsrv_now_ms();
    while (!probe(p)) {
        if (rsrv_now_ms() - t0 > (int64_t)ms * GIVE_UP)
            fail_msg("zone %s: %s %s%s%s not seen within %d ms", p->origin,
                     p->name ? p->name : "(apex)", p->absent ? "absent" : "", p->ip ? " A " : "",
                     p->ip ? p->ip : "", ms);
        rsrv_sleep_ms(5);
    }
    return rsrv_now_ms() - t0;
}

/* Wait until *c >= want (give up after GIVE_UP x ms). */
static void wait_count(const unsigned *c, unsigned want, int ms, const char *what)
{
    int64_t t0 = rsrv_now_ms();
    while (counter(c) < want) {
        if (rsrv_now_ms() - t0 > (int64_t)ms * GIVE_UP)
            fail_msg("%s: %u, wanted %u within %d ms", what, counter(c), want, ms);
        rsrv_sleep_ms(5);
    }
}

static void wait_versions(const char *origin, unsigned want, int ms)
{
    int64_t t0 = rsrv_now_ms();
    while (versions(origin) < want) {
        if (rsrv_now_ms() - t0 > (int64_t)ms * GIVE_UP)
            fail_msg("zone %s: %u versions, wanted %u within %d ms", origin, versions(origin), want,
                     ms);
        rsrv_sleep_ms(5);
    }
}

/* --- zones in Redis --- */

#define CONFIG_FMT                                                                                 \
    "{\"soa\":{\"ttl\":300,\"minttl\":100,\"mbox\":\"hostmaster.%s.\",\"ns\":\"ns1.%s.\","         \
    "\"refresh\":44,\"retry\":55,\"expire\":66,\"serial\":%u}}"

static void set_config(redisContext *c, const char *pre, const char *suf, const char *zone,
                       unsigned serial)
{
    char cfg[512];
    snprintf(cfg, sizeof(cfg), CONFIG_FMT, zone, zone, serial);
    rsrv_cmd(c, "SET %sredins:zones:%s.:config%s %s", pre, zone, suf, cfg);
}

static void set_a(redisContext *c, const char *pre, const char *suf, const char *zone,
                  const char *label, const char *ip)
{
    char v[256];
    snprintf(v, sizeof(v), "{\"a\":{\"ttl\":300,\"records\":[{\"ip\":\"%s\"}]}}", ip);
    rsrv_cmd(c, "HSET %sredins:zones:%s.%s %s %s", pre, zone, suf, label, v);
}

/* A complete zone: config (serial), @ NS, ns1 and www A records; added to the set last. */
static void put_zone_ps(redisContext *c, const char *pre, const char *suf, const char *zone,
                        unsigned serial, const char *www_ip)
{
    char ns[256];
    snprintf(ns, sizeof(ns), "{\"ns\":{\"ttl\":300,\"records\":[{\"host\":\"ns1.%s.\"}]}}", zone);
    rsrv_cmd(c, "MULTI");
    set_config(c, pre, suf, zone, serial);
    rsrv_cmd(c, "HSET %sredins:zones:%s.%s @ %s", pre, zone, suf, ns);
    set_a(c, pre, suf, zone, "ns1", "192.0.2.53");
    set_a(c, pre, suf, zone, "www", www_ip);
    rsrv_cmd(c, "SADD %sredins:zones%s %s.", pre, suf, zone);
    rsrv_cmd(c, "EXEC");
}

static void put_zone(redisContext *c, const char *zone, unsigned serial, const char *www_ip)
{
    put_zone_ps(c, "", "", zone, serial, www_ip);
}

/* --- fixtures --- */

static redis_server_t srv;
static redis_source_t *src;

static void source_config(redis_source_config_t *cfg, uint16_t port)
{
    redis_source_config_init(cfg);
    cfg->host = "127.0.0.1";
    cfg->port = port;
    cfg->connect_timeout_ms = 500;
    cfg->read_timeout_ms = 1000;
    cfg->zone_reload_s = 0; /* the tests that want it set it */
}

static redis_source_t *start_source(const redis_source_config_t *cfg)
{
    char err[256] = "";
    redis_source_t *rs = redis_source_start(cfg, &callbacks, err, sizeof(err));
    if (!rs)
        fail_msg("redis_source_start: %s", err);
    return rs;
}

/* A source on srv with the test defaults, after its initial read. */
static redis_source_t *start_default(void)
{
    redis_source_config_t cfg;
    source_config(&cfg, srv.port);
    redis_source_t *rs = start_source(&cfg);
    wait_count(&got.syncs, 1, 5000, "initial read");
    return rs;
}

static int setup(void **state)
{
    (void)state;
    got_reset();
    memset(&srv, 0, sizeof(srv));
    src = NULL;
    return 0;
}

static void cap_end_dump(bool dump);

static int teardown(void **state)
{
    (void)state;
    cap_end_dump(true); /* a test that failed while capturing: show why */
    redis_source_stop(src);
    src = NULL;
    rsrv_stop(&srv);
    got_reset();
    return 0;
}

static void get_stats(redis_source_stats_t *st)
{
    redis_source_get_stats(src, st);
}

/* --- tests --- */

static void test_initial_load(void **state)
{
    (void)state;
    rsrv_start(&srv, 0, NULL, NULL);
    redisContext *c = rsrv_connect(&srv, NULL);
    put_zone(c, "a.test", 7, "192.0.2.1");
    put_zone(c, "B.Test", 1, "192.0.2.2"); /* the origin handed out is lowercased */
    src = start_default();
    wait_probe(&(probe_t){.origin = "a.test", .name = "www.a.test", .ip = "192.0.2.1", .serial = 7},
               1000);
    wait_probe(&(probe_t){.origin = "b.test", .name = "ns1.b.test", .ip = "192.0.2.53"}, 1000);
    assert_false(probe(&(probe_t){.origin = "a.test", .name = "nope.a.test"}));
    assert_int_equal(counter(&got.ups), 1);
    redis_source_stats_t st;
    get_stats(&st);
    assert_true(st.connected);
    assert_true(st.notifications);
    assert_int_equal(st.zones, 2);
    assert_int_equal(st.failed, 0);
    assert_int_equal(st.builds, 2);
    redisFree(c);
}

static void test_live_changes(void **state)
{
    (void)state;
    rsrv_start(&srv, 0, NULL, NULL);
    redisContext *c = rsrv_connect(&srv, NULL);
    put_zone(c, "live.test", 1, "192.0.2.1");
    src = start_default();
    wait_versions("live.test", 1, 1000);

    /* a changed label */
    set_a(c, "", "", "live.test", "www", "192.0.2.9");
    int64_t ms = wait_probe(
        &(probe_t){.origin = "live.test", .name = "www.live.test", .ip = "192.0.2.9"}, 1000);
    print_message("changed label served after %lld ms\n", (long long)ms);
    /* a new label */
    set_a(c, "", "", "live.test", "mail", "192.0.2.25");
    wait_probe(&(probe_t){.origin = "live.test", .name = "mail.live.test", .ip = "192.0.2.25"},
               1000);
    /* a deleted label */
    rsrv_cmd(c, "HDEL redins:zones:live.test. mail");
    wait_probe(&(probe_t){.origin = "live.test", .name = "mail.live.test", .absent = true}, 1000);
    /* the config */
    set_config(c, "", "", "live.test", 2);
    wait_probe(&(probe_t){.origin = "live.test", .serial = 2}, 1000);
    /* the same value written again: nothing new to hand out */
    unsigned v = versions("live.test");
    set_a(c, "", "", "live.test", "www", "192.0.2.9");
    rsrv_sleep_ms(400);
    assert_int_equal(versions("live.test"), v);
    /* a zone added, and one removed from the set */
    put_zone(c, "new.test", 1, "192.0.2.3");
    wait_probe(&(probe_t){.origin = "new.test", .name = "www.new.test", .ip = "192.0.2.3"}, 1000);
    int64_t t0 = rsrv_now_ms();
    rsrv_cmd(c, "SREM redins:zones live.test.");
    while (gones("live.test") == 0) {
        if (rsrv_now_ms() - t0 > 1000 * GIVE_UP)
            fail_msg("live.test not gone within 10 s");
        rsrv_sleep_ms(5);
    }
    assert_int_equal(gones("new.test"), 0);
    /* the set deleted altogether */
    rsrv_cmd(c, "DEL redins:zones");
    t0 = rsrv_now_ms();
    while (gones("new.test") == 0) {
        if (rsrv_now_ms() - t0 > 1000 * GIVE_UP)
            fail_msg("new.test not gone within 10 s");
        rsrv_sleep_ms(5);
    }
    redisFree(c);
}

static void test_burst_coalesces(void **state)
{
    (void)state;
    rsrv_start(&srv, 0, NULL, NULL);
    redisContext *c = rsrv_connect(&srv, NULL);
    put_zone(c, "burst.test", 1, "192.0.2.1");
    src = start_default();
    wait_versions("burst.test", 1, 1000);
    unsigned before = versions("burst.test");
    for (int i = 0; i < 200; i++) {
        char label[16], ip[32];
        snprintf(label, sizeof(label), "h%d", i);
        snprintf(ip, sizeof(ip), "198.51.100.%d", i);
        set_a(c, "", "", "burst.test", label, ip);
    }
    wait_probe(
        &(probe_t){.origin = "burst.test", .name = "h199.burst.test", .ip = "198.51.100.199"},
        2000);
    rsrv_sleep_ms(300); /* anything still pending would land now */
    unsigned rebuilds = versions("burst.test") - before;
    print_message("200 HSETs: %u rebuilds\n", rebuilds);
    assert_true(rebuilds >= 1 && rebuilds <= 5);
    for (int i = 0; i < 200; i += 37) {
        char name[64];
        snprintf(name, sizeof(name), "h%d.burst.test", i);
        assert_true(probe(&(probe_t){.origin = "burst.test", .name = name}));
    }
    redisFree(c);
}

static void test_bad_label_skipped(void **state)
{
    (void)state;
    rsrv_start(&srv, 0, NULL, NULL);
    redisContext *c = rsrv_connect(&srv, NULL);
    put_zone(c, "bad.test", 1, "192.0.2.1");
    rsrv_cmd(c, "HSET redins:zones:bad.test. broken %s", "{\"a\":{\"records\":[{\"ip\":");
    rsrv_cmd(c, "HSET redins:zones:bad.test. wrong %s",
             "{\"a\":{\"ttl\":300,\"records\":[{\"ip\":\"not-an-ip\"}]}}");
    src = start_default();
    wait_probe(&(probe_t){.origin = "bad.test", .name = "www.bad.test", .ip = "192.0.2.1"}, 1000);
    assert_true(probe(&(probe_t){.origin = "bad.test", .name = "broken.bad.test", .absent = true}));
    assert_true(probe(&(probe_t){.origin = "bad.test", .name = "wrong.bad.test", .absent = true}));
    redis_source_stats_t st;
    get_stats(&st);
    assert_int_equal(st.labels_skipped, 2);
    assert_int_equal(st.failed, 0);
    /* fixing the label serves it */
    set_a(c, "", "", "bad.test", "broken", "192.0.2.77");
    wait_probe(&(probe_t){.origin = "bad.test", .name = "broken.bad.test", .ip = "192.0.2.77"},
               1000);
    redisFree(c);
}

static void test_zone_without_soa_rejected(void **state)
{
    (void)state;
    rsrv_start(&srv, 0, NULL, NULL);
    redisContext *c = rsrv_connect(&srv, NULL);
    put_zone(c, "good.test", 1, "192.0.2.1");
    put_zone(c, "nosoa.test", 1, "192.0.2.2");
    rsrv_cmd(c, "SET redins:zones:nosoa.test.:config %s", "{\"domain_id\":\"x\"}");
    put_zone(c, "noconf.test", 1, "192.0.2.3");
    rsrv_cmd(c, "DEL redins:zones:noconf.test.:config");
    src = start_default();
    wait_versions("good.test", 1, 1000);
    assert_int_equal(versions("nosoa.test"), 0);
    assert_int_equal(versions("noconf.test"), 0);
    redis_source_stats_t st;
    get_stats(&st);
    assert_int_equal(st.zones, 3);
    assert_int_equal(st.failed, 2);
    assert_int_equal(st.rejected, 2);

    /* fixed: served */
    set_config(c, "", "", "nosoa.test", 5);
    wait_probe(&(probe_t){.origin = "nosoa.test", .name = "www.nosoa.test", .serial = 5}, 1000);
    /* broken again: rejected, the version handed out stays (no gone, no new version) */
    rsrv_cmd(c, "SET redins:zones:nosoa.test.:config %s", "{\"soa\":");
    int64_t t0 = rsrv_now_ms();
    do {
        get_stats(&st);
        if (rsrv_now_ms() - t0 > 1000 * GIVE_UP)
            fail_msg("the broken config was not read within 10 s");
        rsrv_sleep_ms(5);
    } while (st.rejected < 3);
    assert_int_equal(versions("nosoa.test"), 1);
    assert_int_equal(gones("nosoa.test"), 0);
    assert_true(probe(&(probe_t){.origin = "nosoa.test", .serial = 5}));
    /* a verify does not try the same broken data again */
    redis_source_resync(src, false);
    wait_count(&got.syncs, 2, 2000, "verify");
    get_stats(&st);
    assert_int_equal(st.rejected, 3);
    redisFree(c);
}

static void test_wrong_types(void **state)
{
    (void)state;
    rsrv_start(&srv, 0, NULL, NULL);
    redisContext *c = rsrv_connect(&srv, NULL);
    put_zone(c, "good.test", 1, "192.0.2.1");
    put_zone(c, "wt.test", 1, "192.0.2.2");
    rsrv_cmd(c, "DEL redins:zones:wt.test.");
    rsrv_cmd(c, "SET redins:zones:wt.test. %s", "not a hash");
    src = start_default();
    wait_versions("good.test", 1, 1000);
    assert_int_equal(versions("wt.test"), 0);
    redis_source_stats_t st;
    get_stats(&st);
    assert_int_equal(st.failed, 1);
    /* the set itself of the wrong type: an error, and the zones stay as they are */
    rsrv_cmd(c, "MULTI");
    rsrv_cmd(c, "DEL redins:zones");
    rsrv_cmd(c, "SET redins:zones %s", "oops");
    rsrv_cmd(c, "EXEC");
    rsrv_sleep_ms(400);
    assert_int_equal(gones("good.test"), 0);
    assert_true(probe(&(probe_t){.origin = "good.test", .name = "www.good.test"}));
    get_stats(&st);
    assert_true(st.connected);
    redisFree(c);
}

static void test_large_zone(void **state)
{
    (void)state;
    rsrv_start(&srv, 0, NULL, NULL);
    redisContext *c = rsrv_connect(&srv, NULL);
    put_zone(c, "big.test", 1, "192.0.2.1");
    /* 5000 labels: read with HSCAN over several calls, not in one reply */
    for (int i = 0; i < 5000; i += 500) {
        rsrv_cmd(c, "MULTI");
        for (int j = i; j < i + 500; j++) {
            char label[16], ip[32];
            snprintf(label, sizeof(label), "n%d", j);
            snprintf(ip, sizeof(ip), "10.0.%d.%d", j / 256, j % 256);
            set_a(c, "", "", "big.test", label, ip);
        }
        rsrv_cmd(c, "EXEC");
    }
    put_zone(c, "small.test", 1, "192.0.2.2");
    src = start_default();
    wait_versions("big.test", 1, 5000);
    for (int j = 0; j < 5000; j += 499) {
        char name[64], ip[32];
        snprintf(name, sizeof(name), "n%d.big.test", j);
        snprintf(ip, sizeof(ip), "10.0.%d.%d", j / 256, j % 256);
        assert_true(probe(&(probe_t){.origin = "big.test", .name = name, .ip = ip}));
    }
    pthread_mutex_lock(&got.mu);
    size_t rr = got.zone[slot("big.test")].z->rr_count;
    pthread_mutex_unlock(&got.mu);
    assert_int_equal(rr, 5000 + 4); /* + SOA, NS, ns1, www */

    /* a verify reads it again but builds nothing */
    redis_source_resync(src, false);
    wait_count(&got.syncs, 2, 5000, "verify");
    assert_int_equal(versions("big.test"), 1);
    assert_int_equal(versions("small.test"), 1);
    /* a forced one rebuilds everything */
    redis_source_resync(src, true);
    wait_count(&got.syncs, 3, 5000, "forced verify");
    assert_int_equal(versions("big.test"), 2);
    assert_int_equal(versions("small.test"), 2);
    /* one label of the large zone changes */
    set_a(c, "", "", "big.test", "n4999", "10.9.9.9");
    wait_probe(&(probe_t){.origin = "big.test", .name = "n4999.big.test", .ip = "10.9.9.9"}, 1000);
    assert_int_equal(versions("big.test"), 3);
    redisFree(c);
}

static void test_prefix_suffix_db(void **state)
{
    (void)state;
    rsrv_start(&srv, 0, NULL, NULL);
    redisContext *c = rsrv_connect(&srv, NULL);
    rsrv_cmd(c, "SELECT 3");
    put_zone_ps(c, "t*[1]_", "_x", "mine.test", 1, "192.0.2.1");
    put_zone(c, "plain3.test", 1, "192.0.2.2");                   /* db 3, no prefix */
    put_zone_ps(c, "t*[1]_", "_y", "other.test", 1, "192.0.2.3"); /* another suffix */
    rsrv_cmd(c, "SELECT 0");
    put_zone_ps(c, "t*[1]_", "_x", "db0.test", 1, "192.0.2.4"); /* db 0 */
    rsrv_cmd(c, "SELECT 3");

    redis_source_config_t cfg;
    source_config(&cfg, srv.port);
    cfg.db = 3;
    cfg.prefix = "t*[1]_";
    cfg.suffix = "_x";
    src = start_source(&cfg);
    wait_count(&got.syncs, 1, 5000, "initial read");
    wait_probe(&(probe_t){.origin = "mine.test", .name = "www.mine.test", .ip = "192.0.2.1"}, 1000);
    assert_int_equal(versions("plain3.test"), 0);
    assert_int_equal(versions("other.test"), 0);
    assert_int_equal(versions("db0.test"), 0);
    /* live changes with prefix, suffix and db */
    set_a(c, "t*[1]_", "_x", "mine.test", "www", "192.0.2.99");
    wait_probe(&(probe_t){.origin = "mine.test", .name = "www.mine.test", .ip = "192.0.2.99"},
               1000);
    /* the same change elsewhere is not ours */
    unsigned v = versions("mine.test");
    set_a(c, "", "", "mine.test", "www", "192.0.2.98");
    set_a(c, "t*[1]_", "_y", "mine.test", "www", "192.0.2.98");
    rsrv_cmd(c, "SELECT 0");
    set_a(c, "t*[1]_", "_x", "mine.test", "www", "192.0.2.98");
    rsrv_cmd(c, "SADD t*[1]_redins:zones_x db0.test.");
    rsrv_sleep_ms(400);
    assert_int_equal(versions("mine.test"), v);
    assert_int_equal(versions("db0.test"), 0);
    redis_source_stats_t st;
    get_stats(&st);
    assert_int_equal(st.zones, 1);
    redisFree(c);
}

static void test_password(void **state)
{
    (void)state;
    rsrv_start(&srv, 0, NULL, "--requirepass", "s3cret", NULL);
    redisContext *c = rsrv_connect(&srv, "s3cret");
    put_zone(c, "auth.test", 1, "192.0.2.1");

    /* the wrong password: never up, and stop() is still prompt */
    redis_source_config_t cfg;
    source_config(&cfg, srv.port);
    cfg.password = "wrong";
    src = start_source(&cfg);
    rsrv_sleep_ms(500);
    assert_int_equal(counter(&got.ups), 0);
    assert_int_equal(versions("auth.test"), 0);
    int64_t t0 = rsrv_now_ms();
    redis_source_stop(src);
    src = NULL;
    assert_true(rsrv_now_ms() - t0 < 500);

    /* no password at all: the same */
    cfg.password = NULL;
    src = start_source(&cfg);
    rsrv_sleep_ms(300);
    assert_int_equal(counter(&got.ups), 0);
    redis_source_stop(src);
    src = NULL;

    cfg.password = "s3cret";
    src = start_source(&cfg);
    wait_probe(&(probe_t){.origin = "auth.test", .name = "www.auth.test", .ip = "192.0.2.1"}, 2000);
    set_a(c, "", "", "auth.test", "www", "192.0.2.5");
    wait_probe(&(probe_t){.origin = "auth.test", .name = "www.auth.test", .ip = "192.0.2.5"}, 1000);
    redisFree(c);
}

static void test_down_at_start(void **state)
{
    (void)state;
    uint16_t port = rsrv_free_port();
    redis_source_config_t cfg;
    source_config(&cfg, port);
    src = start_source(&cfg); /* nothing listens yet */
    rsrv_sleep_ms(700);
    assert_int_equal(counter(&got.ups), 0);
    redis_source_stats_t st;
    get_stats(&st);
    assert_false(st.connected);

    rsrv_start(&srv, port, NULL, NULL);
    redisContext *c = rsrv_connect(&srv, NULL);
    put_zone(c, "late.test", 1, "192.0.2.1");
    /* backoff is at most 5 s */
    wait_probe(&(probe_t){.origin = "late.test", .name = "www.late.test", .ip = "192.0.2.1"}, 8000);
    assert_int_equal(counter(&got.ups), 1);
    redisFree(c);
}

static void test_killed_and_restarted(void **state)
{
    (void)state;
    rsrv_start(&srv, 0, NULL, NULL);
    redisContext *c = rsrv_connect(&srv, NULL);
    put_zone(c, "k.test", 1, "192.0.2.1");
    put_zone(c, "stay.test", 1, "192.0.2.2");
    redisFree(c);
    src = start_default();
    wait_versions("k.test", 1, 1000);

    /* the data Redis will come back with, prepared in a second server's dump */
    redis_server_t prep;
    rsrv_start(&prep, 0, NULL, NULL);
    c = rsrv_connect(&prep, NULL);
    put_zone(c, "k.test", 2, "192.0.2.42");
    put_zone(c, "stay.test", 1, "192.0.2.2");
    rsrv_cmd(c, "SAVE");
    redisFree(c);
    rsrv_kill(&prep, SIGTERM);

    rsrv_kill(&srv, SIGKILL);
    wait_count(&got.downs, 1, 3000, "connection lost");
    rsrv_sleep_ms(500); /* a few reconnect attempts */
    assert_int_equal(versions("k.test"), 1);
    assert_int_equal(gones("k.test"), 0);
    assert_true(probe(&(probe_t){.origin = "k.test", .name = "www.k.test", .ip = "192.0.2.1"}));

    char cmd[256];
    snprintf(cmd, sizeof(cmd), "cp '%s/dump.rdb' '%s/dump.rdb'", prep.dir, srv.dir);
    assert_int_equal(system(cmd), 0);
    rsrv_stop(&prep);
    rsrv_restart(&srv);
    wait_probe(
        &(probe_t){.origin = "k.test", .name = "www.k.test", .ip = "192.0.2.42", .serial = 2},
        8000);
    assert_int_equal(counter(&got.ups), 2);
    assert_int_equal(gones("k.test") + gones("stay.test"), 0);
    assert_int_equal(versions("stay.test"), 1); /* unchanged: not rebuilt */
    /* and it watches again */
    c = rsrv_connect(&srv, NULL);
    set_a(c, "", "", "k.test", "www", "192.0.2.43");
    wait_probe(&(probe_t){.origin = "k.test", .name = "www.k.test", .ip = "192.0.2.43"}, 1000);
    redisFree(c);
}

static void test_hung_redis(void **state)
{
    (void)state;
    rsrv_start(&srv, 0, NULL, NULL);
    redisContext *c = rsrv_connect(&srv, NULL);
    put_zone(c, "h.test", 1, "192.0.2.1");
    redisFree(c);
    redis_source_config_t cfg;
    source_config(&cfg, srv.port);
    cfg.read_timeout_ms = 300;
    src = start_source(&cfg);
    wait_versions("h.test", 1, 2000);

    /* a Redis that stops answering is noticed within the read timeout of the next read */
    kill(srv.pid, SIGSTOP);
    redis_source_resync(src, false);
    wait_count(&got.downs, 1, 2000, "hung Redis noticed");
    kill(srv.pid, SIGCONT);
    wait_count(&got.ups, 2, 8000, "reconnected");
    /* the verify after the reconnect finds the zone unchanged */
    wait_count(&got.syncs, 2, 4000, "verify after the reconnect");
    assert_int_equal(versions("h.test"), 1);

    /* stop() does not wait for the read timeout */
    redis_source_stop(src);
    cfg.read_timeout_ms = 10000;
    src = start_source(&cfg);
    wait_count(&got.ups, 3, 2000, "connected");
    wait_count(&got.syncs, 3, 2000, "read");
    kill(srv.pid, SIGSTOP);
    redis_source_resync(src, false);
    rsrv_sleep_ms(100);
    int64_t t0 = rsrv_now_ms();
    redis_source_stop(src);
    src = NULL;
    int64_t ms = rsrv_now_ms() - t0;
    kill(srv.pid, SIGCONT);
    print_message("stop() with a read pending took %lld ms\n", (long long)ms);
    assert_true(ms < 200);
}

static void test_change_channel_without_notifications(void **state)
{
    (void)state;
    rsrv_start(&srv, 0, NULL, "--notify-keyspace-events", "", NULL);
    redisContext *c = rsrv_connect(&srv, NULL);
    put_zone(c, "ch.test", 1, "192.0.2.1");
    src = start_default();
    wait_versions("ch.test", 1, 1000);
    redis_source_stats_t st;
    get_stats(&st);
    assert_false(st.notifications);

    /* no event: not seen */
    set_a(c, "", "", "ch.test", "www", "192.0.2.2");
    rsrv_sleep_ms(500);
    assert_int_equal(versions("ch.test"), 1);
    /* published: seen */
    rsrv_cmd(c, "PUBLISH redins:zones:changed ch.test.");
    wait_probe(&(probe_t){.origin = "ch.test", .name = "www.ch.test", .ip = "192.0.2.2"}, 1000);
    /* a new zone published by name */
    put_zone(c, "ch2.test", 1, "192.0.2.3");
    rsrv_cmd(c, "PUBLISH redins:zones:changed ch2.test.");
    wait_probe(&(probe_t){.origin = "ch2.test", .name = "www.ch2.test", .ip = "192.0.2.3"}, 1000);
    /* "*": everything is verified */
    set_a(c, "", "", "ch.test", "www", "192.0.2.4");
    set_a(c, "", "", "ch2.test", "www", "192.0.2.5");
    rsrv_cmd(c, "PUBLISH redins:zones:changed *");
    wait_probe(&(probe_t){.origin = "ch.test", .name = "www.ch.test", .ip = "192.0.2.4"}, 1000);
    wait_probe(&(probe_t){.origin = "ch2.test", .name = "www.ch2.test", .ip = "192.0.2.5"}, 1000);
    /* removed from the set and published */
    rsrv_cmd(c, "SREM redins:zones ch2.test.");
    rsrv_cmd(c, "PUBLISH redins:zones:changed ch2.test.");
    int64_t t0 = rsrv_now_ms();
    while (gones("ch2.test") == 0) {
        if (rsrv_now_ms() - t0 > 1000 * GIVE_UP)
            fail_msg("ch2.test not gone within 10 s");
        rsrv_sleep_ms(5);
    }
    redisFree(c);
}

static void test_zone_reload_interval(void **state)
{
    (void)state;
    rsrv_start(&srv, 0, NULL, "--notify-keyspace-events", "", NULL);
    redisContext *c = rsrv_connect(&srv, NULL);
    put_zone(c, "iv.test", 1, "192.0.2.1");
    redis_source_config_t cfg;
    source_config(&cfg, srv.port);
    cfg.zone_reload_s = 1;
    src = start_source(&cfg);
    wait_versions("iv.test", 1, 2000);
    set_a(c, "", "", "iv.test", "www", "192.0.2.2");
    wait_probe(&(probe_t){.origin = "iv.test", .name = "www.iv.test", .ip = "192.0.2.2"}, 2500);
    unsigned v = versions("iv.test");
    rsrv_sleep_ms(1500); /* another verify, nothing changed */
    assert_true(counter(&got.syncs) >= 3);
    assert_int_equal(versions("iv.test"), v);
    redisFree(c);
}

static void test_many_zones(void **state)
{
    (void)state;
    rsrv_start(&srv, 0, NULL, NULL);
    redisContext *c = rsrv_connect(&srv, NULL);
    /* more than one pipelined batch of zones */
    for (int i = 0; i < 150; i++) {
        char zone[32], ip[32];
        snprintf(zone, sizeof(zone), "z%d.test", i);
        snprintf(ip, sizeof(ip), "10.1.%d.%d", i / 256, i % 256);
        put_zone(c, zone, (unsigned)i + 1, ip);
    }
    src = start_default();
    for (int i = 0; i < 150; i++) {
        char zone[32], name[64], ip[32];
        snprintf(zone, sizeof(zone), "z%d.test", i);
        snprintf(name, sizeof(name), "www.z%d.test", i);
        snprintf(ip, sizeof(ip), "10.1.%d.%d", i / 256, i % 256);
        assert_true(
            probe(&(probe_t){.origin = zone, .name = name, .ip = ip, .serial = (uint32_t)i + 1}));
    }
    /* one zone changes: only it is rebuilt */
    set_a(c, "", "", "z77.test", "www", "192.0.2.77");
    wait_probe(&(probe_t){.origin = "z77.test", .name = "www.z77.test", .ip = "192.0.2.77"}, 1000);
    rsrv_sleep_ms(200);
    for (int i = 0; i < 150; i++) {
        char zone[32];
        snprintf(zone, sizeof(zone), "z%d.test", i);
        assert_int_equal(versions(zone), i == 77 ? 2 : 1);
    }
    redis_source_stats_t st;
    get_stats(&st);
    assert_int_equal(st.zones, 150);
    assert_int_equal(st.builds, 151);
    redisFree(c);
}

static void test_unix_socket_and_no_config_command(void **state)
{
    (void)state;
    char sock[128];
    tu_mkdtemp(sock, sizeof(sock), "tern-redis-sock");
    char dir[sizeof(sock)];
    snprintf(dir, sizeof(dir), "%s", sock);
    strncat(sock, "/redis.sock", sizeof(sock) - strlen(sock) - 1);
    /* CONFIG disabled, as on many managed Redis services: the source cannot check the
     * notification flags, says so, and works with the events the server sends anyway */
    rsrv_start(&srv, 0, NULL, "--unixsocket", sock, "--rename-command", "CONFIG", "", NULL);
    redisContext *c = rsrv_connect(&srv, NULL);
    put_zone(c, "unix.test", 1, "192.0.2.1");
    redis_source_config_t cfg;
    source_config(&cfg, 0);
    cfg.host = NULL;
    cfg.unix_path = sock;
    src = start_source(&cfg);
    wait_probe(&(probe_t){.origin = "unix.test", .name = "www.unix.test", .ip = "192.0.2.1"}, 2000);
    redis_source_stats_t st;
    get_stats(&st);
    assert_true(st.connected);
    assert_false(st.notifications);
    set_a(c, "", "", "unix.test", "www", "192.0.2.2");
    wait_probe(&(probe_t){.origin = "unix.test", .name = "www.unix.test", .ip = "192.0.2.2"}, 1000);
    redisFree(c);
    redis_source_stop(src);
    src = NULL;
    rsrv_stop(&srv);
    tu_rmtree(dir);
}

/* --- log lines --- */

/* stderr, where the source logs, captured in a file while a test runs (every line is one
 * write(2), so reading the file any time sees whole lines). */
static struct {
    FILE *f;
    int saved;
} logcap = {.saved = -1};

static void cap_begin(void)
{
    fflush(stderr);
    logcap.f = tmpfile();
    assert_non_null(logcap.f);
    logcap.saved = dup(STDERR_FILENO);
    assert_true(logcap.saved >= 0);
    assert_true(dup2(fileno(logcap.f), STDERR_FILENO) >= 0);
}

/* Stop capturing; with dump, copy what was captured to the real stderr (cmocka's messages about
 * a failure are in it too). */
static void cap_end_dump(bool dump)
{
    if (logcap.saved < 0)
        return;
    fflush(stderr);
    dup2(logcap.saved, STDERR_FILENO);
    close(logcap.saved);
    logcap.saved = -1;
    char buf[4096];
    ssize_t n;
    for (off_t off = 0; dump && (n = pread(fileno(logcap.f), buf, sizeof(buf), off)) > 0; off += n)
        fwrite(buf, 1, (size_t)n, stderr);
    fclose(logcap.f);
    logcap.f = NULL;
}

static void cap_end(void)
{
    cap_end_dump(false);
}

/* Lines logged so far that hold every one of the NULL-terminated strings given. */
static unsigned log_lines(const char *first, ...)
{
    static char text[1 << 20];
    ssize_t n = pread(fileno(logcap.f), text, sizeof(text) - 1, 0);
    assert_true(n >= 0);
    text[n] = '\0';
    unsigned count = 0;
    for (char *line = text, *end; *line; line = end + 1) {
        end = strchr(line, '\n');
        if (!end)
            break;
        *end = '\0';
        bool all = true;
        va_list ap;
        va_start(ap, first);
        for (const char *s = first; s && all; s = va_arg(ap, const char *))
            all = strstr(line, s) != NULL;
        va_end(ap);
        count += all;
        *end = '\n';
    }
    return count;
}

/* Wait (at most ms) until a counter of the source's stats reaches want. */
static void wait_stat(size_t off, uint64_t want, int ms, const char *what)
{
    int64_t t0 = rsrv_now_ms();
    for (;;) {
        redis_source_stats_t st;
        redis_source_get_stats(src, &st);
        uint64_t v;
        if (off == offsetof(redis_source_stats_t, zones_skipped))
            v = st.zones_skipped;
        else
            memcpy(&v, (const char *)&st + off, sizeof(v));
        if (v >= want)
            return;
        if (rsrv_now_ms() - t0 > ms)
            fail_msg("%s: %llu, wanted %llu within %d ms", what, (unsigned long long)v,
                     (unsigned long long)want, ms);
        rsrv_sleep_ms(5);
    }
}
#define WAIT_STAT(field, want, ms)                                                                 \
    wait_stat(offsetof(redis_source_stats_t, field), want, ms, #field)

/* A verify of everything, waited for (syncs counts them). */
static void verify_now(void)
{
    unsigned before = counter(&got.syncs);
    redis_source_resync(src, false);
    wait_count(&got.syncs, before + 1, 3000, "verify");
}

/* --- one zone, one member --- */

/* "\101xample.test." and "example.test." are one zone (\101 is 'e'): one of them is served, the
 * one written canonically, whatever order SMEMBERS lists them in; the other is named in one error
 * line, logged once however often the set is read. A member that is no name is skipped, logged
 * once, escaped: a newline in it does not start a line of its own. */
static void test_one_zone_one_member(void **state)
{
    (void)state;
    rsrv_start(&srv, 0, NULL, NULL);
    redisContext *c = rsrv_connect(&srv, NULL);
    /* the data of "\101xample.test." names the zone as JSON would ("\\101" is invalid there) */
    put_zone(c, "example.test", 1, "192.0.2.1");
    rsrv_cmd(c, "RENAME redins:zones:example.test. redins:zones:\\101xample.test.");
    rsrv_cmd(c, "RENAME redins:zones:example.test.:config redins:zones:\\101xample.test.:config");
    rsrv_cmd(c, "SREM redins:zones example.test.");
    rsrv_cmd(c, "SADD redins:zones \\101xample.test.");
    put_zone(c, "example.test", 2, "192.0.2.2");
    put_zone(c, "other.test", 1, "192.0.2.3");
    rsrv_cmd(c, "SADD redins:zones %s", "x\nternd: error: forged..bad.");
    cap_begin();
    src = start_default();
    wait_probe(
        &(probe_t){
            .origin = "example.test", .name = "www.example.test", .ip = "192.0.2.2", .serial = 2},
        1000);
    wait_versions("other.test", 1, 1000);
    assert_int_equal(versions("\\101xample.test"), 0); /* never an origin of its own */
    redis_source_stats_t st;
    get_stats(&st);
    assert_int_equal(st.zones, 2);
    assert_int_equal(st.failed, 0);
    /* the set is read again, fully and after an event: nothing logged again */
    verify_now();
    rsrv_cmd(c, "SADD redins:zones more.test.");
    rsrv_sleep_ms(200);
    verify_now();
    assert_int_equal(log_lines("zone example.test is named by 2 members",
                               "serving \"example.test.\"", "ignoring \"\\\\101xample.test.\"",
                               NULL),
                     1);
    assert_int_equal(log_lines("x\\010ternd: error: forged..bad.", "no domain name", NULL), 1);
    assert_int_equal(log_lines("forged", NULL), 1);
    /* the served member's changes apply; the other member's keys are not its data */
    unsigned v = versions("example.test");
    set_a(c, "", "", "\\101xample.test", "www", "192.0.2.9");
    rsrv_sleep_ms(300);
    assert_int_equal(versions("example.test"), v);
    set_a(c, "", "", "example.test", "www", "192.0.2.10");
    wait_probe(&(probe_t){.origin = "example.test", .name = "www.example.test", .ip = "192.0.2.10"},
               1000);
    /* the canonical member leaves: the other one is served, from its own keys */
    rsrv_cmd(c, "SREM redins:zones example.test.");
    wait_probe(
        &(probe_t){
            .origin = "example.test", .name = "www.example.test", .ip = "192.0.2.9", .serial = 1},
        1000);
    assert_int_equal(gones("example.test"), 0);
    cap_end();
    redisFree(c);
}

/* --- bounds on untrusted data --- */

/* A source on srv with the test defaults and the given bounds (0 = the default). */
static redis_source_t *start_bounded(uint32_t value_bytes, uint32_t labels, uint32_t rrset,
                                     uint32_t zones)
{
    redis_source_config_t cfg;
    source_config(&cfg, srv.port);
    if (value_bytes)
        cfg.max_value_bytes = value_bytes;
    if (labels)
        cfg.max_labels = labels;
    if (rrset)
        cfg.max_rrset_records = rrset;
    if (zones)
        cfg.max_zones = zones;
    redis_source_t *rs = start_source(&cfg);
    wait_count(&got.syncs, 1, 10000, "initial read");
    return rs;
}

static void hset_raw(redisContext *c, const char *zone, const char *label, const char *value)
{
    redisReply *r =
        redisCommand(c, "HSET redins:zones:%s. %s %b", zone, label, value, strlen(value));
    assert_non_null(r);
    assert_int_not_equal(r->type, REDIS_REPLY_ERROR);
    freeReplyObject(r);
}

/* max_value_bytes: a longer label is skipped, a longer config rejects its zone; each is logged
 * and counted once, though the zone is rebuilt and verified again. */
static void test_bound_value_bytes(void **state)
{
    (void)state;
    rsrv_start(&srv, 0, NULL, NULL);
    redisContext *c = rsrv_connect(&srv, NULL);
    put_zone(c, "v.test", 1, "192.0.2.1");
    char *big = json_a_records(200); /* about 5 KB */
    hset_raw(c, "v.test", "big", big);
    put_zone(c, "vcfg.test", 1, "192.0.2.2");
    char soa[512], pad[4001], cfg[8192];
    snprintf(soa, sizeof(soa), CONFIG_FMT, "vcfg.test", "vcfg.test", 1u);
    soa[strlen(soa) - 1] = '\0'; /* the config object stays open for one more key */
    memset(pad, 'x', sizeof(pad) - 1);
    pad[sizeof(pad) - 1] = '\0';
    snprintf(cfg, sizeof(cfg), "%s,\"domain_id\":\"%s\"}", soa, pad);
    rsrv_cmd(c, "SET redins:zones:vcfg.test.:config %s", cfg);
    cap_begin();
    src = start_bounded(2048, 0, 0, 0);
    wait_probe(&(probe_t){.origin = "v.test", .name = "www.v.test", .ip = "192.0.2.1"}, 1000);
    assert_true(probe(&(probe_t){.origin = "v.test", .name = "big.v.test", .absent = true}));
    assert_int_equal(versions("vcfg.test"), 0);
    WAIT_STAT(over_value_bytes, 2, 1000);
    /* another label changes: the zone is rebuilt, the big label read again, not logged again */
    set_a(c, "", "", "v.test", "www", "192.0.2.7");
    wait_probe(&(probe_t){.origin = "v.test", .name = "www.v.test", .ip = "192.0.2.7"}, 1000);
    rsrv_cmd(c, "HSET redins:zones:vcfg.test. www %s",
             "{\"a\":{\"records\":[{\"ip\":\"192.0.2.8\"}]}}");
    rsrv_sleep_ms(300);
    verify_now();
    redis_source_stats_t st;
    get_stats(&st);
    assert_int_equal(st.over_value_bytes, 2);
    assert_int_equal(st.failed, 1);
    assert_int_equal(log_lines("zone v.test label big", "more than max_value_bytes (2048)", NULL),
                     1);
    assert_int_equal(log_lines("zone vcfg.test config", "more than max_value_bytes (2048)", NULL),
                     1);
    /* fixed: served */
    set_a(c, "", "", "v.test", "big", "192.0.2.99");
    wait_probe(&(probe_t){.origin = "v.test", .name = "big.v.test", .ip = "192.0.2.99"}, 1000);
    set_config(c, "", "", "vcfg.test", 3);
    wait_probe(&(probe_t){.origin = "vcfg.test", .name = "www.vcfg.test", .ip = "192.0.2.8"}, 1000);
    cap_end();
    free(big);
    redisFree(c);
}

/* Labels n0 .. n(count-1) of zone, in batches. */
static void add_labels(redisContext *c, const char *zone, int from, int count)
{
    for (int i = from; i < from + count; i += 500) {
        rsrv_cmd(c, "MULTI");
        for (int j = i; j < from + count && j < i + 500; j++) {
            char label[16], ip[32];
            snprintf(label, sizeof(label), "n%d", j);
            snprintf(ip, sizeof(ip), "10.1.%d.%d", j / 256 % 256, j % 256);
            set_a(c, "", "", zone, label, ip);
        }
        rsrv_cmd(c, "EXEC");
    }
}

/* max_labels: a zone with more is rejected whole, its previous version serving; logged and counted
 * once while it stays too large; served again once it is not. Both read paths: one HSCAN reply
 * (a small hash) and several (a large one, whose read stops at the bound). */
static void test_bound_labels(void **state)
{
    (void)state;
    rsrv_start(&srv, 0, NULL, NULL);
    redisContext *c = rsrv_connect(&srv, NULL);
    put_zone(c, "l.test", 1, "192.0.2.1"); /* 3 labels: @, ns1, www */
    put_zone(c, "big.test", 1, "192.0.2.2");
    add_labels(c, "big.test", 0, 3000);
    cap_begin();
    src = start_bounded(0, 2000, 0, 0);
    wait_probe(&(probe_t){.origin = "l.test", .name = "www.l.test", .ip = "192.0.2.1"}, 1000);
    assert_int_equal(versions("big.test"), 0);
    WAIT_STAT(over_labels, 1, 2000);
    assert_int_equal(log_lines("zone big.test", "more than max_labels (2000)", NULL), 1);
    /* a change to the large zone that leaves it too large: no new line, no new count */
    set_a(c, "", "", "big.test", "www", "192.0.2.22");
    rsrv_sleep_ms(400);
    verify_now();
    redis_source_stats_t st;
    get_stats(&st);
    assert_int_equal(st.over_labels, 1);
    assert_int_equal(log_lines("zone big.test", "more than max_labels", NULL), 1);
    /* shrunk below the bound: served */
    rsrv_cmd(c, "MULTI");
    for (int j = 0; j < 1500; j++)
        rsrv_cmd(c, "HDEL redins:zones:big.test. n%d", j);
    rsrv_cmd(c, "EXEC");
    wait_probe(&(probe_t){.origin = "big.test", .name = "www.big.test", .ip = "192.0.2.22"}, 3000);
    redis_source_stop(src);
    src = NULL;
    rsrv_cmd(c, "SREM redins:zones big.test.");

    /* the small path: the whole hash in the first reply; the served version stays */
    got_reset();
    src = start_bounded(0, 5, 0, 0);
    wait_versions("l.test", 1, 1000);
    set_a(c, "", "", "l.test", "a", "192.0.2.31");
    set_a(c, "", "", "l.test", "b", "192.0.2.32");
    wait_probe(&(probe_t){.origin = "l.test", .name = "b.l.test", .ip = "192.0.2.32"}, 1000);
    set_a(c, "", "", "l.test", "c", "192.0.2.33"); /* 6 labels */
    WAIT_STAT(over_labels, 1, 1000);
    set_a(c, "", "", "l.test", "d", "192.0.2.34"); /* 7 */
    rsrv_sleep_ms(300);
    assert_true(probe(&(probe_t){.origin = "l.test", .name = "c.l.test", .absent = true}));
    assert_true(probe(&(probe_t){.origin = "l.test", .name = "b.l.test", .ip = "192.0.2.32"}));
    get_stats(&st);
    assert_int_equal(st.over_labels, 1);
    assert_int_equal(log_lines("zone l.test", "more than max_labels (5)", NULL), 1);
    rsrv_cmd(c, "HDEL redins:zones:l.test. a b");
    wait_probe(&(probe_t){.origin = "l.test", .name = "d.l.test", .ip = "192.0.2.34"}, 1000);
    cap_end();
    redisFree(c);
}

/* One bad label never freezes its zone: a label whose RRset is over max_rrset_records, over the
 * 65,535 an RRset can hold (70,000 records), or whose owner another label gave ("WWW" beside
 * "www" with a CNAME) is skipped; the zone is served, and later changes to its other labels keep
 * applying. Logged and counted once per label. */
static void test_bad_label_never_freezes_zone(void **state)
{
    (void)state;
    rsrv_start(&srv, 0, NULL, NULL);
    redisContext *c = rsrv_connect(&srv, NULL);
    put_zone(c, "r.test", 1, "192.0.2.1");
    char *pool = json_a_records(150), *huge = json_a_records(70000);
    hset_raw(c, "r.test", "pool", pool);
    hset_raw(c, "r.test", "huge", huge);
    rsrv_cmd(c, "HSET redins:zones:r.test. alias %s", "{\"cname\":{\"host\":\"www.r.test.\"}}");
    rsrv_cmd(c, "HSET redins:zones:r.test. ALIAS %s",
             "{\"a\":{\"records\":[{\"ip\":\"192.0.2.66\"}]}}");
    cap_begin();
    src = start_bounded(4 << 20, 0, 100, 0);
    wait_probe(&(probe_t){.origin = "r.test", .name = "www.r.test", .ip = "192.0.2.1"}, 5000);
    assert_true(probe(&(probe_t){.origin = "r.test", .name = "pool.r.test", .absent = true}));
    assert_true(probe(&(probe_t){.origin = "r.test", .name = "huge.r.test", .absent = true}));
    assert_true(probe(&(probe_t){.origin = "r.test", .name = "alias.r.test"}));
    redis_source_stats_t st;
    get_stats(&st);
    assert_int_equal(st.over_rrset_records, 2);
    assert_int_equal(st.labels_skipped, 3);
    assert_int_equal(st.failed, 0);
    /* later changes to other labels apply, again and again */
    for (int i = 0; i < 3; i++) {
        char ip[32];
        snprintf(ip, sizeof(ip), "192.0.2.%d", 100 + i);
        set_a(c, "", "", "r.test", "www", ip);
        wait_probe(&(probe_t){.origin = "r.test", .name = "www.r.test", .ip = ip}, 3000);
    }
    get_stats(&st);
    assert_int_equal(st.over_rrset_records, 2);
    assert_int_equal(st.rejected, 0);
    assert_int_equal(log_lines("zone r.test label pool", "more than max_rrset_records (100)", NULL),
                     1);
    assert_int_equal(log_lines("zone r.test label huge", "70000 records", NULL), 1);
    assert_int_equal(log_lines("label ", "alias.r.test. is given by another label", NULL), 1);
    free(pool);
    free(huge);
    cap_end();
    redisFree(c);
}

/* max_zones: once the source holds that many, zones new to it are not read (in key order); the
 * ones it serves keep their place. Logged when the number skipped changes; a gauge. */
static void test_bound_zones(void **state)
{
    (void)state;
    rsrv_start(&srv, 0, NULL, NULL);
    redisContext *c = rsrv_connect(&srv, NULL);
    put_zone(c, "z9.test", 1, "192.0.2.9");
    put_zone(c, "z8.test", 1, "192.0.2.8");
    cap_begin();
    src = start_bounded(0, 0, 0, 3);
    wait_versions("z8.test", 1, 1000);
    wait_versions("z9.test", 1, 1000);
    /* four new zones (one set change, or a few): the first in key order gets the place left */
    put_zone(c, "z1.test", 1, "192.0.2.1");
    put_zone(c, "z2.test", 1, "192.0.2.2");
    put_zone(c, "z3.test", 1, "192.0.2.3");
    put_zone(c, "z4.test", 1, "192.0.2.4");
    wait_versions("z1.test", 1, 1000);
    WAIT_STAT(zones_skipped, 3, 1000);
    verify_now();
    assert_int_equal(versions("z2.test") + versions("z3.test") + versions("z4.test"), 0);
    assert_int_equal(versions("z8.test") + versions("z9.test"), 2);
    redis_source_stats_t st;
    get_stats(&st);
    assert_int_equal(st.zones, 3);
    assert_int_equal(st.zones_skipped, 3);
    assert_int_equal(log_lines("more zones than max_zones (3)", "3 not read",
                               "\"z2.test\", \"z3.test\", \"z4.test\"", NULL),
                     1);
    /* a zone leaves: the next one in key order is read */
    rsrv_cmd(c, "SREM redins:zones z9.test.");
    wait_versions("z2.test", 1, 1000);
    get_stats(&st);
    assert_int_equal(st.zones_skipped, 2);
    assert_int_equal(versions("z3.test"), 0);
    cap_end();
    redisFree(c);
}

static void test_bad_config(void **state)
{
    (void)state;
    char err[256] = "";
    redis_source_config_t cfg;
    redis_source_config_init(&cfg);
    assert_int_equal(cfg.zone_reload_s, 600);
    redis_source_callbacks_t cb = {.on_zone = on_zone};
    assert_null(redis_source_start(&cfg, &cb, err, sizeof(err)));
    assert_non_null(strstr(err, "on_zone_gone"));
    redis_source_stop(NULL); /* a no-op */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bad_config),
        cmocka_unit_test_setup_teardown(test_initial_load, setup, teardown),
        cmocka_unit_test_setup_teardown(test_live_changes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_burst_coalesces, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_label_skipped, setup, teardown),
        cmocka_unit_test_setup_teardown(test_zone_without_soa_rejected, setup, teardown),
        cmocka_unit_test_setup_teardown(test_wrong_types, setup, teardown),
        cmocka_unit_test_setup_teardown(test_large_zone, setup, teardown),
        cmocka_unit_test_setup_teardown(test_prefix_suffix_db, setup, teardown),
        cmocka_unit_test_setup_teardown(test_password, setup, teardown),
        cmocka_unit_test_setup_teardown(test_down_at_start, setup, teardown),
        cmocka_unit_test_setup_teardown(test_killed_and_restarted, setup, teardown),
        cmocka_unit_test_setup_teardown(test_hung_redis, setup, teardown),
        cmocka_unit_test_setup_teardown(test_change_channel_without_notifications, setup, teardown),
        cmocka_unit_test_setup_teardown(test_zone_reload_interval, setup, teardown),
        cmocka_unit_test_setup_teardown(test_many_zones, setup, teardown),
        cmocka_unit_test_setup_teardown(test_unix_socket_and_no_config_command, setup, teardown),
        cmocka_unit_test_setup_teardown(test_one_zone_one_member, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bound_value_bytes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bound_labels, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_label_never_freezes_zone, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bound_zones, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
