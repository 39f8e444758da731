/*
 * source_redis.c — see source_redis.h. Moved out of the loader (issue 28): the callbacks queue
 * through the sink, apply() keeps the served set, configure() follows the config.
 */
#include "tern/source/source_redis.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tern/common/clock.h"
#include "tern/common/err.h"
#include "tern/common/grow.h"
#include "tern/common/hash.h"
#include "tern/common/log.h"
#include "tern/conf/config_dnssec.h"
#include "tern/source/health_index.h"
#include "tern/wire/dname.h"
#include "tern/xfr/journal.h"
#include "tern/zone/zone_patch.h"

/* At most this many per-zone lines per batch; a full resync may change thousands. */
#define LOG_ZONES_MAX 20

typedef struct source_redis {
    zone_source_t base;
    zone_source_env_t env;
    redis_source_t *rs;
    config_redis_t cfg;    /* what the running source was started with */
    bool health_on;        /* ... and whether health checking was on */
    pthread_mutex_t rs_mu; /* guards rs against source_redis_get_stats(); callbacks never take it */
    pthread_mutex_t mu;    /* synced */
    bool synced;           /* the source finished its first read */
    zone_source_zone_t *rz; /* the Redis zones served, loader thread only */
    size_t nrz, caprz;
    /* The checks by address Redis zones are built with (their builds run on the Redis thread),
     * swapped under health_mu after a reload changed them. */
    pthread_mutex_t health_mu;
    health_index_t *hidx;
    /* The Redis zones secondaries transfer (configured entries without a file, with notify or
     * allow_transfer), by key, sorted: read by the Redis thread (exported()), replaced under
     * mu by each config. */
    char **exported;
    size_t nexported;
} source_redis_t;

static void cfg_free(config_redis_t *c)
{
    free(c->host);
    free(c->unix_path);
    free(c->password);
    free(c->prefix);
    free(c->suffix);
    free(c->changes_channel);
    for (size_t i = 0; i < c->nsentinels; i++)
        free(c->sentinels[i]);
    free(c->sentinels);
    free(c->sentinel_master);
    free(c->sentinel_password);
    memset(c, 0, sizeof(*c));
}

/* A deep copy, for comparing a reload's settings with the running source's. */
static int cfg_copy(config_redis_t *dst, const config_redis_t *src)
{
    *dst = *src;
    dst->host = dst->unix_path = dst->password = dst->prefix = dst->suffix = dst->changes_channel =
        NULL;
    dst->sentinel_master = dst->sentinel_password = NULL;
    dst->sentinels = NULL;
    dst->nsentinels = 0;
    if (src->nsentinels && !(dst->sentinels = calloc(src->nsentinels, sizeof(*dst->sentinels)))) {
        cfg_free(dst);
        return TERN_ENOMEM;
    }
    for (; dst->nsentinels < src->nsentinels; dst->nsentinels++) {
        if (!(dst->sentinels[dst->nsentinels] = strdup(src->sentinels[dst->nsentinels]))) {
            cfg_free(dst);
            return TERN_ENOMEM;
        }
    }
    if ((src->sentinel_master && !(dst->sentinel_master = strdup(src->sentinel_master))) ||
        (src->sentinel_password && !(dst->sentinel_password = strdup(src->sentinel_password))) ||
        (src->host && !(dst->host = strdup(src->host))) ||
        (src->unix_path && !(dst->unix_path = strdup(src->unix_path))) ||
        (src->password && !(dst->password = strdup(src->password))) ||
        (src->prefix && !(dst->prefix = strdup(src->prefix))) ||
        (src->suffix && !(dst->suffix = strdup(src->suffix))) ||
        (src->changes_channel && !(dst->changes_channel = strdup(src->changes_channel)))) {
        cfg_free(dst);
        return TERN_ENOMEM;
    }
    return 0;
}

/* Redis thread: queue a zone version (or its removal) for the loader thread. */
static void queue(source_redis_t *r, const char *origin, zone_t *z, uint8_t *names, size_t nnames)
{
    zone_change_t c = {.src = &r->base, .zone = z, .names = names, .nnames = nnames};
    c.key = zone_source_key(origin);
    if (!c.key || r->env.sink.push(r->env.sink.ctx, &c) < 0) {
        char esc[TERN_ESCAPE_MAX(64)]; /* a key already (log-safe), but never trust a caller */
        log_err("redis: zone %s: out of memory; change dropped (the next resync retries)",
                tern_escape(esc, sizeof(esc), origin, strlen(origin)));
        zone_change_clear(&c);
    }
}

static void on_zone(void *ctx, const char *origin, zone_t *z)
{
    queue(ctx, origin, z, NULL, 0);
}

static void on_gone(void *ctx, const char *origin)
{
    queue(ctx, origin, NULL, NULL, 0);
}

/* Redis thread: labels named on the change channel, to patch into the zone (apply()). */
static void on_patch(void *ctx, const char *origin, zone_t *fresh, const uint8_t *const *names,
                     size_t n)
{
    size_t len = 0;
    for (size_t i = 0; i < n; i++)
        len += dname_len(names[i]);
    uint8_t *buf = malloc(len ? len : 1);
    if (!buf) {
        /* the zone served keeps its old data until the next verify finds the change */
        log_err("redis: zone %s: out of memory; a change waits for the next verify", origin);
        zone_free(fresh);
        return;
    }
    len = 0;
    for (size_t i = 0; i < n; i++) {
        size_t k = dname_len(names[i]);
        memcpy(buf + len, names[i], k);
        len += k;
    }
    queue(ctx, origin, fresh, buf, n);
}

static void on_state(void *ctx, bool up)
{
    (void)ctx;
    if (up)
        log_info("redis: connected");
    else
        log_warn("redis: connection lost; serving the last zones read, reconnecting");
}

static void on_synced(void *ctx, size_t zones, size_t failed)
{
    source_redis_t *r = ctx;
    pthread_mutex_lock(&r->mu);
    bool first = !r->synced;
    r->synced = true;
    pthread_mutex_unlock(&r->mu);
    if (first || failed)
        log_info("redis: %zu zones in the set, %zu rejected", zones, failed);
}

/* Redis thread: the endpoint of a Redis zone's record by ternd.yaml's checks. */
static health_ep_t *hidx_lookup(void *ctx, const uint8_t *owner, uint16_t type, const uint8_t *addr)
{
    source_redis_t *r = ctx;
    pthread_mutex_lock(&r->health_mu);
    health_ep_t *ep = health_index_lookup(r->hidx, owner, type, addr);
    pthread_mutex_unlock(&r->health_mu);
    return ep;
}

/* Loader thread: the checks by address Redis zones are built with, from cfg. */
static int set_health(source_redis_t *r, const config_t *cfg)
{
    bool nomem;
    health_index_t *x = health_index_new(r->env.health, &cfg->health, &nomem);
    if (nomem)
        return TERN_ENOMEM;
    pthread_mutex_lock(&r->health_mu);
    health_index_t *old = r->hidx;
    r->hidx = x;
    pthread_mutex_unlock(&r->health_mu);
    health_index_free(old);
    return 0;
}

/* served's index for apply(): open addressing over key hashes, slot = index + 1, 0 = empty. */
static uint32_t *rz_index(const source_redis_t *r, size_t extra, size_t *mask)
{
    size_t n = 16;
    while (n < 2 * (r->nrz + extra))
        n *= 2;
    uint32_t *slot = calloc(n, sizeof(*slot));
    if (!slot)
        return NULL;
    *mask = n - 1;
    for (size_t i = 0; i < r->nrz; i++) {
        size_t j = tern_hash_str(r->rz[i].key) & *mask;
        while (slot[j])
            j = (j + 1) & *mask;
        slot[j] = (uint32_t)i + 1;
    }
    return slot;
}

/* A Redis zone that secondaries follow (transfer settings, tern/xfr) needs a serial above the
 * one they have, or they never take the change: redins' writers rarely touch soa.serial. So a
 * new version whose serial is not above the last one served gets max(last + 1, now) (now as a
 * Unix time, as Knot's serial-policy unixtime, so serials keep rising across restarts); a zone
 * read for the first time gets now when its own serial is below it (secondaries may hold a
 * raised one from before a restart). Signed zones keep theirs (their SOA is signed): logged. */
static void raise_serial(source_redis_t *r, const char *key, bool had, uint32_t last, zone_t *z)
{
    if (!r->env.followed(r->env.followed_ctx, key))
        return;
    if (z->dnssec && z->dnssec->export)
        return; /* raised before it was signed, on the Redis thread */
    uint32_t want = zone_serial_next(had, last, z->serial, (uint32_t)time(NULL));
    if (want == z->serial)
        return;
    if (z->dnssec) {
        log_warn("redis: zone %s changed without a higher serial (%u); it is signed, so its "
                 "secondaries keep the old data until soa.serial rises",
                 key, z->serial);
        return;
    }
    uint32_t was = z->serial;
    if (zone_set_serial(z, want) < 0)
        log_err("redis: zone %s: out of memory raising its serial", key);
    else if (had)
        log_info("redis: zone %s: serial %u -> %u (raised above %u for its secondaries)", key, was,
                 want, last);
    else
        log_info("redis: zone %s: serial %u -> %u (raised for its secondaries)", key, was, want);
}

/* apply(): the changed names of c patched into z's served version. 0 or why not (logged; the
 * Redis thread is asked for a verify, which builds the zone whole). */
static int apply_patch(source_redis_t *r, zone_source_zone_t *z, zone_change_t *c, size_t *lines)
{
    zone_t *nz = NULL;
    int rc = 1;
    char why[512] = "the zone is not served";
    const uint8_t **nv = calloc(c->nnames ? c->nnames : 1, sizeof(*nv));
    if (!nv) {
        rc = TERN_ENOMEM;
    } else if (z && z->zone) {
        const uint8_t *q = c->names;
        for (size_t k = 0; k < c->nnames; q += dname_len(q), k++)
            nv[k] = q;
        int64_t t0 = tern_monotonic_us();
        rc = zone_patch_names(z->zone, c->zone, nv, c->nnames, &nz, why, sizeof(why));
        if (rc == 0 && (*lines)++ < LOG_ZONES_MAX)
            log_info("redis: zone %s patched: %zu names in %.1f ms", z->key, c->nnames,
                     (double)(tern_monotonic_us() - t0) / 1000.0);
    }
    free(nv);
    zone_change_clear(c);
    if (rc != 0) {
        log_info("redis: zone %s: a patch cannot be applied (%s): building it whole",
                 z ? z->key : "?", rc == TERN_ENOMEM ? "out of memory" : why);
        redis_source_resync(r->rs, false);
        return rc;
    }
    raise_serial(r, z->key, true, z->zone->serial, nz);
    zone_free(z->zone);
    z->zone = nz;
    z->version = zone_source_version();
    z->loaded = (int64_t)time(NULL);
    return 0;
}

/* apply(): c's whole version of zone z (NULL: new; slot gets its index). */
static void apply_whole(source_redis_t *r, zone_source_zone_t *z, uint32_t *slot, zone_change_t *c,
                        size_t *lines)
{
    if (!z) {
        *slot = (uint32_t)r->nrz + 1;
        z = &r->rz[r->nrz++];
        *z = (zone_source_zone_t){.key = c->key};
    } else {
        free(c->key);
    }
    bool had = z->zone != NULL;
    uint32_t last = had ? z->zone->serial : 0;
    if (z->zone) {
        if ((*lines)++ < LOG_ZONES_MAX)
            log_info("redis: zone %s updated (serial %u -> %u)", z->key, z->zone->serial,
                     c->zone->serial);
        zone_free(z->zone);
    } else {
        if ((*lines)++ < LOG_ZONES_MAX)
            log_info("redis: zone %s added (serial %u)", z->key, c->zone->serial);
    }
    raise_serial(r, z->key, had, last, c->zone);
    z->zone = c->zone;
    z->version = zone_source_version();
    z->loaded = (int64_t)time(NULL);
}

/* Loader thread: move the queued versions into the served set. */
static size_t apply(zone_source_t *s, zone_change_t *p, size_t n)
{
    source_redis_t *r = (source_redis_t *)s;
    size_t mask, applied = 0, lines = 0, gone = 0;
    uint32_t *slot = NULL;
    if (r->nrz + n > r->caprz) { /* room for every pending zone to be new: no realloc below */
        zone_source_zone_t *g = realloc(r->rz, (r->nrz + n) * sizeof(*g));
        if (g) {
            r->rz = g;
            r->caprz = r->nrz + n;
        }
    }
    if (r->nrz + n > r->caprz || !(slot = rz_index(r, n, &mask))) {
        log_err("redis: out of memory; %zu zone changes dropped (the next verify retries)", n);
        for (size_t i = 0; i < n; i++)
            zone_change_clear(&p[i]);
        return 0;
    }
    for (size_t i = 0; i < n; i++) {
        size_t h = tern_hash_str(p[i].key) & mask;
        while (slot[h] && strcmp(r->rz[slot[h] - 1].key, p[i].key) != 0)
            h = (h + 1) & mask;
        zone_source_zone_t *z = slot[h] ? &r->rz[slot[h] - 1] : NULL;
        if (!p[i].zone) { /* gone: emptied now, compacted below (indexes stay valid meanwhile) */
            if (z && z->zone) {
                if (lines++ < LOG_ZONES_MAX)
                    log_info("redis: zone %s removed", z->key);
                zone_free(z->zone);
                z->zone = NULL;
                gone++;
                applied++;
            }
            free(p[i].key);
        } else if (p[i].names) { /* a patch of the zone served */
            applied += apply_patch(r, z, &p[i], &lines) == 0;
        } else {
            apply_whole(r, z, &slot[h], &p[i], &lines);
            applied++;
        }
    }
    if (lines > LOG_ZONES_MAX)
        log_info("redis: ... and %zu more zone changes", lines - LOG_ZONES_MAX);
    if (gone) {
        size_t k = 0;
        for (size_t i = 0; i < r->nrz; i++) {
            if (r->rz[i].zone)
                r->rz[k++] = r->rz[i];
            else
                free(r->rz[i].key);
        }
        r->nrz = k;
    }
    free(slot);
    return applied;
}

/* Loader thread: drop every Redis zone (the source was turned off or moved elsewhere). Changes
 * still queued for the old source are dropped by the loader (zone_source_stop()'s contract). */
static void clear(source_redis_t *r)
{
    for (size_t i = 0; i < r->nrz; i++) {
        zone_free(r->rz[i].zone);
        free(r->rz[i].key);
    }
    r->nrz = 0;
    pthread_mutex_lock(&r->mu);
    r->synced = false;
    pthread_mutex_unlock(&r->mu);
}

static void stop(zone_source_t *s)
{
    source_redis_t *r = (source_redis_t *)s;
    pthread_mutex_lock(&r->rs_mu);
    redis_source_t *rs = r->rs;
    r->rs = NULL;
    pthread_mutex_unlock(&r->rs_mu);
    redis_source_stop(rs); /* joins: no callback runs after this */
    cfg_free(&r->cfg);
}

/* The Redis thread's settings from cfg (pointers into cfg, copied by redis_source_start()). */
static void settings(source_redis_t *r, const config_t *cfg, redis_source_config_t *rc)
{
    const config_redis_t *c = &cfg->redis;
    redis_source_config_init(rc);
    rc->host = c->host;
    if (c->port)
        rc->port = c->port;
    rc->unix_path = c->unix_path;
    rc->db = c->db;
    rc->password = c->password;
    rc->prefix = c->prefix;
    rc->suffix = c->suffix;
    rc->connect_timeout_ms = c->connect_timeout_ms;
    rc->read_timeout_ms = c->read_timeout_ms;
    rc->zone_reload_s = c->zone_reload_s;
    rc->changes_channel = c->changes_channel;
    rc->sentinels = (const char *const *)c->sentinels;
    rc->nsentinels = c->nsentinels;
    rc->sentinel_master = c->sentinel_master;
    rc->sentinel_password = c->sentinel_password;
    rc->read_replica = c->read_from == CONFIG_REDIS_READ_REPLICA;
    rc->json.locate = r->env.locate;
    rc->json.locate_ctx = r->env.locate_ctx;
    rc->json.health = cfg->health.enabled ? r->env.health : NULL;
    rc->json.health_fn = hidx_lookup;
    rc->json.health_ctx = r;
    rc->json.default_ttl = c->default_ttl;
    rc->json.max_ttl = c->max_ttl;
    rc->max_value_bytes = c->max_value_bytes;
    rc->max_labels = c->max_labels;
    rc->max_rrset_records = c->max_rrset_records;
    rc->max_zones = c->max_zones;
    rc->dnssec_workers = cfg->workers;
    rc->dnssec_policy.lifetime = cfg->dnssec_lifetime;
    rc->dnssec_policy.refresh = cfg->dnssec_refresh;
}

static void exported_free(char **v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(v[i]);
    free(v);
}

static int cmp_key(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* redis_source_callbacks_t.exported (the Redis thread). */
static bool exported(void *ctx, const char *origin)
{
    source_redis_t *r = ctx;
    pthread_mutex_lock(&r->mu);
    bool yes = r->nexported &&
               bsearch(&origin, r->exported, r->nexported, sizeof(char *), cmp_key) != NULL;
    pthread_mutex_unlock(&r->mu);
    return yes;
}

/* Take cfg's set of exported Redis zones. True when it differs from the one before (their
 * signed versions then need building again, with or without their export). */
static bool set_exported(source_redis_t *r, const config_t *cfg)
{
    size_t n = 0;
    char **v = calloc(cfg->nzones + 1, sizeof(*v));
    for (size_t i = 0; v && i < cfg->nzones; i++) {
        const config_zone_t *cz = &cfg->zones[i];
        if (cz->file || (!cz->nnotify && !cz->allow_transfer.n))
            continue;
        if (!(v[n] = zone_source_key(cz->origin)))
            continue; /* out of memory: that zone is signed without its export */
        n++;
    }
    if (!v) {
        log_err("redis: out of memory; the zones secondaries transfer stay as they were");
        return false;
    }
    qsort(v, n, sizeof(*v), cmp_key);
    pthread_mutex_lock(&r->mu);
    bool same = n == r->nexported;
    for (size_t i = 0; same && i < n; i++)
        same = strcmp(v[i], r->exported[i]) == 0;
    char **old = r->exported;
    size_t nold = r->nexported;
    r->exported = v;
    r->nexported = n;
    pthread_mutex_unlock(&r->mu);
    exported_free(old, nold);
    return !same;
}

/* cfg's key policies as the Redis thread takes them (names point into cfg); NULL with *n 0 when
 * there are none; NULL with *n set when out of memory. */
static redis_source_kasp_t *kasp_policies(const config_t *cfg, size_t *n)
{
    *n = cfg->ndnssec_policies;
    redis_source_kasp_t *v = *n ? calloc(*n, sizeof(*v)) : NULL;
    for (size_t i = 0; v && i < *n; i++) {
        const config_dnssec_policy_t *p = &cfg->dnssec_policies[i];
        v[i].name = p->name;
        config_dnssec_policy_kasp(p, &v[i].pol);
        v[i].pol.zone_max_ttl = p->zone_max_ttl; /* 0: the zone's own, as built */
        v[i].parents = p->parents;
        v[i].nparents = p->nparents;
        v[i].ds_check_interval = p->ds_check_interval;
    }
    return v;
}

/* Whether a and b have the same key policies (a change restarts the Redis thread). */
static bool kasp_same(const config_t *a, const config_t *b)
{
    size_t na, nb;
    redis_source_kasp_t *va = kasp_policies(a, &na), *vb = kasp_policies(b, &nb);
    bool same = na == nb && (!na || (va && vb));
    for (size_t i = 0; same && i < na; i++)
        same = strcmp(va[i].name, vb[i].name) == 0 &&
               memcmp(&va[i].pol, &vb[i].pol, sizeof(va[i].pol)) == 0;
    free(va);
    free(vb);
    return same;
}

/* redis_source_callbacks_t.ds_want (the Redis thread): to the loader's DS checker. */
static void ds_want(void *ctx, const char *origin, const char *name, const dnssec_kasp_ds_t *wants,
                    size_t n, char *const *parents, size_t nparents, unsigned interval)
{
    source_redis_t *r = ctx;
    if (r->env.ds_want)
        r->env.ds_want(r->env.ds_want_ctx, origin, name, wants, n, parents, nparents, interval);
}

/* Start the Redis thread for cfg->redis (loader or main thread). 0 or a negative code (logged). */
static int start_thread(source_redis_t *r, const config_t *cfg)
{
    const config_redis_t *c = &cfg->redis;
    redis_source_config_t rc;
    settings(r, cfg, &rc);
    redis_source_kasp_t *kasp = kasp_policies(cfg, &rc.nkasp);
    if (rc.nkasp && !kasp) {
        log_err("redis: out of memory");
        return TERN_ENOMEM;
    }
    rc.kasp = kasp;
    r->health_on = cfg->health.enabled;
    redis_source_callbacks_t cb = {.on_zone = on_zone,
                                   .on_zone_gone = on_gone,
                                   .on_patch = on_patch,
                                   .on_state = on_state,
                                   .on_synced = on_synced,
                                   .exported = exported,
                                   .ds_want = ds_want,
                                   .ctx = r};
    char err[512] = "";
    if (cfg_copy(&r->cfg, c) < 0) {
        log_err("redis: out of memory");
        free(kasp);
        return TERN_ENOMEM;
    }
    redis_source_t *rs = redis_source_start(&rc, &cb, err, sizeof(err));
    free(kasp); /* copied */
    pthread_mutex_lock(&r->rs_mu);
    r->rs = rs;
    pthread_mutex_unlock(&r->rs_mu);
    if (!rs) {
        log_err("redis: %s", err[0] ? err : "cannot start the source");
        cfg_free(&r->cfg);
        return TERN_EINVAL;
    }
    if (c->nsentinels)
        log_info("redis: zones from the %s of Sentinel's %s (%zu sentinels) db %u",
                 rc.read_replica ? "replicas" : "primary", c->sentinel_master, c->nsentinels,
                 c->db);
    else if (c->unix_path)
        log_info("redis: zones from %s db %u", c->unix_path, c->db);
    else
        log_info("redis: zones from %s:%u db %u", c->host ? c->host : REDIS_SOURCE_DEFAULT_HOST,
                 c->port ? c->port : REDIS_SOURCE_DEFAULT_PORT, c->db);
    return 0;
}

/* Start, restart, stop or resync the Redis thread as cfg says. At start (prev NULL) the checks
 * by address are made first (out of memory fails the start). rebuild: the databases records are
 * located with changed, or the health checks by address changed (every Redis zone is built
 * again). Turning health checking on or off restarts the thread: its builds intern the zones' own
 * health_checks only when it is on. */
static int configure(zone_source_t *s, const config_t *cfg, const config_t *prev, bool rebuild)
{
    source_redis_t *r = (source_redis_t *)s;
    if (set_exported(r, cfg) && prev)
        rebuild = true;
    if (!prev) {
        if (set_health(r, cfg) < 0) {
            log_err("health: out of memory");
            return TERN_ENOMEM;
        }
        return cfg->redis.enabled ? (start_thread(r, cfg), 0) : 0;
    }
    if (!config_same_health_checks(&prev->health, &cfg->health)) {
        rebuild = true;
        if (set_health(r, cfg) < 0)
            log_err("health: out of memory; Redis zones keep their previous checks");
    }
    bool want = cfg->redis.enabled;
    if (r->rs && (!want || !redis_settings_same(&r->cfg, &cfg->redis) ||
                  r->health_on != cfg->health.enabled || !kasp_same(prev, cfg))) {
        log_info("redis: settings changed; %s", want ? "reconnecting" : "source stopped");
        stop(s);
        clear(r);
        r->env.sink.drop(r->env.sink.ctx, s);
    }
    if (want && !r->rs)
        (void)start_thread(r, cfg);
    else if (r->rs)
        redis_source_resync(r->rs, rebuild);
    return 0;
}

/* Startup: give the Redis thread the time to connect and read everything once, so the first
 * answers include the Redis zones. Redis down: go on with the file zones once a connection
 * attempt has had its timeout (the thread keeps retrying). True when the first read finished. */
static bool wait_first(zone_source_t *s)
{
    source_redis_t *r = (source_redis_t *)s;
    if (!r->rs)
        return false;
    uint32_t cto = r->cfg.connect_timeout_ms ? r->cfg.connect_timeout_ms
                                             : REDIS_SOURCE_DEFAULT_CONNECT_TIMEOUT;
    int64_t start = tern_monotonic_ms();
    /* a reachable Redis may take long for a huge zone (1M labels: seconds), bounded anyway */
    const int64_t read_limit_ms = 300000;
    for (;;) {
        pthread_mutex_lock(&r->mu);
        bool synced = r->synced;
        pthread_mutex_unlock(&r->mu);
        if (synced)
            return true;
        redis_source_stats_t st;
        redis_source_get_stats(r->rs, &st);
        int64_t el = tern_monotonic_ms() - start;
        if ((!st.connected && el > (int64_t)cto + 500) || el > read_limit_ms) {
            log_warn("redis: not available yet; serving the file zones, retrying in the "
                     "background");
            return false;
        }
        /* polled: the thread's first read is a one-off at startup, 20 ms is below notice */
        struct timespec ts = {.tv_sec = 0, .tv_nsec = 20 * 1000000};
        nanosleep(&ts, NULL);
    }
}

static zone_source_zone_t *zones(zone_source_t *s, size_t *n)
{
    source_redis_t *r = (source_redis_t *)s;
    *n = r->nrz;
    return r->rz;
}

bool source_redis_get_stats(zone_source_t *s, redis_source_stats_t *out)
{
    source_redis_t *r = (source_redis_t *)s;
    memset(out, 0, sizeof(*out));
    pthread_mutex_lock(&r->rs_mu);
    bool on = r->rs != NULL;
    if (on)
        redis_source_get_stats(r->rs, out);
    pthread_mutex_unlock(&r->rs_mu);
    return on;
}

char *source_redis_dnssec_status(zone_source_t *s, const char *key, char *err, size_t errlen)
{
    source_redis_t *r = (source_redis_t *)s;
    pthread_mutex_lock(&r->rs_mu);
    char *text = r->rs ? redis_source_dnssec_status(r->rs, key, err, errlen) : NULL;
    if (!r->rs)
        snprintf(err, errlen, "no Redis source");
    pthread_mutex_unlock(&r->rs_mu);
    return text;
}

int source_redis_dnssec_request(zone_source_t *s, const char *key, const char *request, char *err,
                                size_t errlen)
{
    source_redis_t *r = (source_redis_t *)s;
    pthread_mutex_lock(&r->rs_mu);
    int rc = r->rs ? redis_source_dnssec_request(r->rs, key, request, err, errlen) : TERN_ENOENT;
    if (!r->rs)
        snprintf(err, errlen, "no Redis source");
    pthread_mutex_unlock(&r->rs_mu);
    return rc;
}

static void stats(zone_source_t *s, zone_source_stats_t *out)
{
    redis_source_stats_t st;
    out->running = source_redis_get_stats(s, &st);
    out->connected = st.connected;
    out->zones = st.zones;
    out->failed = st.failed;
}

static zone_source_t *new_source(const zone_source_env_t *env)
{
    source_redis_t *r = calloc(1, sizeof(*r));
    if (!r)
        return NULL;
    r->base.ops = &source_redis_ops;
    r->env = *env;
    pthread_mutex_init(&r->rs_mu, NULL);
    pthread_mutex_init(&r->mu, NULL);
    pthread_mutex_init(&r->health_mu, NULL);
    return &r->base;
}

static void free_source(zone_source_t *s)
{
    source_redis_t *r = (source_redis_t *)s;
    if (!r)
        return;
    stop(s);
    clear(r);
    free(r->rz);
    exported_free(r->exported, r->nexported);
    health_index_free(r->hidx);
    pthread_mutex_destroy(&r->rs_mu);
    pthread_mutex_destroy(&r->mu);
    pthread_mutex_destroy(&r->health_mu);
    free(r);
}

const zone_source_ops_t source_redis_ops = {
    .name = "redis",
    .what = "the changes",
    .previous = "data",
    .new = new_source,
    .configure = configure,
    .wait_first = wait_first,
    .apply = apply,
    .zones = zones,
    .stats = stats,
    .stop = stop,
    .free = free_source,
};
