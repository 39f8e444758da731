/*
 * redis_bench.c — how long the Redis source takes to fetch and build a zone, and what Redis
 * feels meanwhile. Run by bench/redis_load.sh against a redis-server it filled with
 * bench/gen_redis.py:
 *
 *     redis_bench HOST PORT ZONE
 *
 * Phases, each timed from the request to the callback that ends it:
 *   1. initial load: redis_source_start() → on_synced (connect, read every label, build);
 *   2. verify: redis_source_resync(false) → on_synced (read everything again, digest only: the
 *      zone did not change, so nothing is built);
 *   3. forced rebuild: redis_source_resync(true) → on_synced;
 *   4. one live change: HSET of one label → on_zone (keyspace event, 50 ms coalescing, re-read and
 *      rebuild of the whole zone).
 * Meanwhile a second client PINGs Redis every millisecond and reports the worst round trip, what
 * another client of Redis would have waited. It shares the CPU with the source thread (pinned
 * together by redis_load.sh), so the figure includes some of our own scheduling; Redis' slowlog,
 * printed by redis_load.sh, is the exact account of how long each command kept Redis busy.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <hiredis/hiredis.h>

#include "tern/common/arena.h"
#include "tern/common/clock.h"
#include "tern/common/log.h"
#include "tern/redis/redis_source.h"
#include "tern/zone/zone_patch.h"

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static unsigned syncs, zones_seen;
static zone_t *last;

static void on_zone(void *ctx, const char *origin, zone_t *z)
{
    (void)ctx;
    (void)origin;
    pthread_mutex_lock(&mu);
    zone_free(last);
    last = z;
    zones_seen++;
    pthread_cond_broadcast(&cv);
    pthread_mutex_unlock(&mu);
}

/* Labels named on the change channel: patched into the zone held, as the loader does. */
static unsigned patched_names, patches;
static int64_t patch_us_total, patch_us_max;

static void on_patch(void *ctx, const char *origin, zone_t *fresh, const uint8_t *const *names,
                     size_t n)
{
    (void)ctx;
    pthread_mutex_lock(&mu);
    zone_t *nz = NULL;
    char err[256];
    int64_t t0 = tern_monotonic_us();
    int rc = last ? zone_patch(last, fresh, names, n, &nz, err, sizeof(err)) : 1;
    int64_t us = tern_monotonic_us() - t0;
    zone_free(fresh);
    if (rc != 0) {
        fprintf(stderr, "unexpected: zone %s: no patch: %s\n", origin, rc == 1 ? err : "error");
    } else {
        zone_free(last);
        last = nz;
        patches++;
        patched_names += (unsigned)n;
        patch_us_total += us;
        if (us > patch_us_max)
            patch_us_max = us;
    }
    pthread_cond_broadcast(&cv);
    pthread_mutex_unlock(&mu);
}

static void on_gone(void *ctx, const char *origin)
{
    (void)ctx;
    fprintf(stderr, "unexpected: zone %s gone\n", origin);
}

static void on_synced(void *ctx, size_t zones, size_t failed)
{
    (void)ctx;
    (void)zones;
    if (failed)
        fprintf(stderr, "unexpected: %zu zones rejected\n", failed);
    pthread_mutex_lock(&mu);
    syncs++;
    pthread_cond_broadcast(&cv);
    pthread_mutex_unlock(&mu);
}

/* Wait until *counter > seen (at most 30 minutes); returns the ms waited since t0. */
static int64_t wait_past(const unsigned *counter, unsigned seen, int64_t t0)
{
    struct timespec dl;
    clock_gettime(CLOCK_REALTIME, &dl);
    dl.tv_sec += 1800;
    pthread_mutex_lock(&mu);
    while (*counter <= seen)
        if (pthread_cond_timedwait(&cv, &mu, &dl) != 0) {
            fprintf(stderr, "timed out\n");
            exit(1);
        }
    pthread_mutex_unlock(&mu);
    return tern_monotonic_ms() - t0;
}

/* "<zone> <label>" for the change channel. */
static const char *zone_msg(const char *zone, const char *label)
{
    static char msg[600];
    snprintf(msg, sizeof(msg), "%s %s", zone, label);
    return msg;
}

/* The pinger: worst PING round trip since the last reset. */
static const char *host;
static int port;
static atomic_bool ping_stop;
static atomic_llong ping_worst_us;
static atomic_llong pings;

static void *pinger(void *arg)
{
    (void)arg;
    redisContext *c = redisConnect(host, port);
    if (!c || c->err) {
        fprintf(stderr, "pinger: cannot connect\n");
        return NULL;
    }
    while (!atomic_load(&ping_stop)) {
        int64_t t = tern_monotonic_us();
        redisReply *r = redisCommand(c, "PING");
        if (!r)
            break;
        freeReplyObject(r);
        long long us = tern_monotonic_us() - t;
        long long w = atomic_load(&ping_worst_us);
        while (us > w && !atomic_compare_exchange_weak(&ping_worst_us, &w, us))
            ;
        atomic_fetch_add(&pings, 1);
        usleep(1000);
    }
    redisFree(c);
    return NULL;
}

static long long take_worst(void)
{
    return atomic_exchange(&ping_worst_us, 0);
}

static double rss_mib(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_maxrss / 1024.0;
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: %s HOST PORT ZONE\n", argv[0]);
        return 2;
    }
    host = argv[1];
    port = atoi(argv[2]);
    const char *zone = argv[3];
    log_set_level(LOG_LVL_WARN);

    pthread_t pt;
    pthread_create(&pt, NULL, pinger, NULL);
    usleep(50000);
    take_worst();

    redis_source_config_t cfg;
    redis_source_config_init(&cfg);
    cfg.host = host;
    cfg.port = (uint16_t)port;
    cfg.zone_reload_s = 0;
    cfg.read_timeout_ms = 30000;
    redis_source_callbacks_t cb = {
        .on_zone = on_zone, .on_zone_gone = on_gone, .on_synced = on_synced, .on_patch = on_patch};
    char err[256];
    int64_t t0 = tern_monotonic_ms();
    redis_source_t *rs = redis_source_start(&cfg, &cb, err, sizeof(err));
    if (!rs) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    int64_t load = wait_past(&syncs, 0, t0);
    long long w_load = take_worst();
    pthread_mutex_lock(&mu);
    if (!last) {
        pthread_mutex_unlock(&mu);
        fprintf(stderr, "no zone was built\n");
        return 1;
    }
    size_t nodes = last->node_count, rrs = last->rr_count;
    double mib = (double)zone_footprint(last) / (1 << 20);
    pthread_mutex_unlock(&mu);
    printf("zone %s: %zu nodes, %zu records, %.1f MiB of zone data\n", zone, nodes, rrs, mib);
    printf("initial load (connect + read + build): %lld ms   (worst concurrent PING %.1f ms)\n",
           (long long)load, w_load / 1000.0);
    printf("peak RSS after the load: %.0f MiB\n", rss_mib());

    unsigned v = zones_seen;
    t0 = tern_monotonic_ms();
    redis_source_resync(rs, false);
    int64_t verify = wait_past(&syncs, 1, t0);
    printf("verify, unchanged (read + digest, no build): %lld ms, %u builds   (worst PING %.1f "
           "ms)\n",
           (long long)verify, zones_seen - v, take_worst() / 1000.0);

    t0 = tern_monotonic_ms();
    redis_source_resync(rs, true);
    int64_t rebuild = wait_past(&syncs, 2, t0);
    printf("forced rebuild (read + build): %lld ms   (worst PING %.1f ms)\n", (long long)rebuild,
           take_worst() / 1000.0);

    redisContext *c = redisConnect(host, port);
    if (!c || c->err) {
        fprintf(stderr, "cannot connect\n");
        return 1;
    }
    char key[512];
    snprintf(key, sizeof(key), "redins:zones:%s", zone);
    t0 = tern_monotonic_ms();
    redisReply *r = redisCommand(c, "HSET %s %s %s", key, "bench-live-change",
                                 "{\"a\":{\"ttl\":60,\"records\":[{\"ip\":\"203.0.113.1\"}]}}");
    if (r)
        freeReplyObject(r);
    unsigned pn0 = patched_names;
    int64_t live = wait_past(&patched_names, pn0, t0);
    printf("one label changed (HSET → keyspace event, 50 ms coalescing, re-read, diff of label "
           "digests, patch): %lld ms   (worst PING %.1f ms)\n",
           (long long)live, take_worst() / 1000.0);
    r = redisCommand(c, "HDEL %s %s", key, "bench-live-change");
    if (r)
        freeReplyObject(r);
    /* let the HDEL's own patch pass before the next ones are timed */
    pn0 = patched_names;
    wait_past(&patched_names, pn0, tern_monotonic_ms());

    /* 5. one label named on the change channel: a patch, no re-read, no rebuild */
    unsigned pn = patched_names;
    t0 = tern_monotonic_ms();
    r = redisCommand(c, "HSET %s %s %s", key, "bench-patch",
                     "{\"a\":{\"ttl\":60,\"records\":[{\"ip\":\"203.0.113.2\"}]}}");
    if (r)
        freeReplyObject(r);
    r = redisCommand(c, "PUBLISH redins:zones:changed %s", zone_msg(zone, "bench-patch"));
    if (r)
        freeReplyObject(r);
    int64_t one = wait_past(&patched_names, pn, t0);
    printf("one label changed and named (HSET + PUBLISH \"<zone> <label>\" → patched zone): %lld "
           "ms, zone_patch() %.1f ms   (worst PING %.1f ms)\n",
           (long long)one, patch_us_max / 1000.0, take_worst() / 1000.0);

    /* 6. a burst: 10,000 labels changed, each HSET followed by its own PUBLISH, pipelined */
    pn = patched_names;
    unsigned pc = patches;
    patch_us_max = 0;
    t0 = tern_monotonic_ms();
    for (int i = 0; i < 10000; i++) {
        char lab[32], val[96];
        snprintf(lab, sizeof(lab), "burst-%d", i);
        snprintf(val, sizeof(val), "{\"a\":{\"records\":[{\"ip\":\"198.51.%d.%d\"}]}}",
                 (i >> 8) & 255, i & 255);
        redisAppendCommand(c, "HSET %s %s %s", key, lab, val);
        redisAppendCommand(c, "PUBLISH redins:zones:changed %s", zone_msg(zone, lab));
    }
    for (int i = 0; i < 20000; i++) {
        void *rep = NULL;
        if (redisGetReply(c, &rep) != REDIS_OK) {
            fprintf(stderr, "burst: %s\n", c->errstr);
            return 1;
        }
        freeReplyObject(rep);
    }
    while (patched_names < pn + 10000)
        wait_past(&patched_names, patched_names, t0);
    int64_t burst = tern_monotonic_ms() - t0;
    printf("10,000 labels changed and named, pipelined: all served after %lld ms, in %u patches "
           "(the longest zone_patch() %.1f ms)   (worst PING %.1f ms)\n",
           (long long)burst, patches - pc, patch_us_max / 1000.0, take_worst() / 1000.0);
    redisFree(c);

    redis_source_stats_t st;
    redis_source_get_stats(rs, &st);
    printf("peak RSS: %.0f MiB; %lld PINGs during the run; source: %llu builds, %llu patches, "
           "%llu labels skipped\n",
           rss_mib(), (long long)atomic_load(&pings), (unsigned long long)st.builds,
           (unsigned long long)st.patches, (unsigned long long)st.labels_skipped);
    redis_source_stop(rs);
    atomic_store(&ping_stop, true);
    pthread_join(pt, NULL);
    zone_free(last);
    return 0;
}
