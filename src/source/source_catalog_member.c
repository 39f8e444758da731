/*
 * source_catalog_member.c — see source_catalog_member.h. The members' versions as the transfer
 * service hands them over, queued through the loader's sink and kept here (loader thread) for
 * every build's zones().
 */
#include "tern/source/source_catalog_member.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tern/common/grow.h"
#include "tern/common/log.h"
#include "tern/wire/dname.h"

typedef struct source_catalog_member {
    zone_source_t base;
    zone_source_env_t env;
    zone_source_zone_t *m; /* the members served, loader thread only */
    size_t n, cap;
    /* something was queued (any thread): the startup's first publish takes it (wait_first()) */
    bool queued;
} source_catalog_member_t;

/* Queue c (its pointers handed over), or log what is dropped. */
static void queue(source_catalog_member_t *p, zone_change_t *c, const char *key)
{
    if (!c->key || p->env.sink.push(p->env.sink.ctx, c) < 0) {
        log_err("catalog: zone %s: out of memory; the change is dropped (the catalog's next "
                "refresh retries)",
                key);
        zone_change_clear(c);
        return;
    }
    __atomic_store_n(&p->queued, true, __ATOMIC_RELEASE);
}

void source_catalog_member_in(void *ctx, const char *key, zone_t *z)
{
    source_catalog_member_t *p = ctx;
    if (!z) {
        /* no data: a placeholder answering SERVFAIL, so the zone is not REFUSED meanwhile */
        uint8_t apex[DNAME_MAXLEN];
        const char *why;
        if (dname_from_str(key, strlen(key), false, apex, &why) >= 0)
            z = zone_new_unavailable(apex, "catalog member (no transfer yet)");
        if (!z) {
            log_err("catalog: zone %s: out of memory; the change is dropped", key);
            return;
        }
    }
    zone_change_t c = {.src = &p->base, .key = strdup(key), .zone = z};
    queue(p, &c, key);
}

void source_catalog_member_gone(void *ctx, const char *key)
{
    source_catalog_member_t *p = ctx;
    zone_change_t c = {.src = &p->base, .key = strdup(key)}; /* zone NULL: gone */
    queue(p, &c, key);
}

/* Loader thread: the entry of key, or NULL. */
static zone_source_zone_t *find(source_catalog_member_t *p, const char *key, size_t *at)
{
    for (size_t i = 0; i < p->n; i++)
        if (strcmp(p->m[i].key, key) == 0) {
            *at = i;
            return &p->m[i];
        }
    return NULL;
}

/* Loader thread: change c applied. true when it changed what is served. */
static bool apply_one(source_catalog_member_t *p, zone_change_t *c)
{
    size_t at = 0;
    zone_source_zone_t *e = find(p, c->key, &at);
    if (!c->zone) {
        if (!e)
            return false;
        zone_free(e->zone);
        free(e->key);
        p->m[at] = p->m[--p->n];
        log_info("catalog: zone %s is no longer served", c->key);
        return true;
    }
    if (!e) {
        if (tern_grow((void **)&p->m, &p->cap, p->n + 1, sizeof(*p->m)) < 0) {
            log_err("catalog: zone %s: out of memory; the change is dropped", c->key);
            zone_free(c->zone);
            return false;
        }
        e = &p->m[p->n++];
        *e = (zone_source_zone_t){.key = c->key};
        c->key = NULL;
    }
    zone_free(e->zone);
    e->zone = c->zone;
    e->version = zone_source_version();
    e->loaded = (int64_t)time(NULL);
    c->zone = NULL;
    return true;
}

static size_t apply(zone_source_t *s, zone_change_t *c, size_t n)
{
    source_catalog_member_t *p = (source_catalog_member_t *)s;
    size_t applied = 0;
    for (size_t i = 0; i < n; i++) {
        applied += apply_one(p, &c[i]);
        free(c[i].key);
        free(c[i].names);
    }
    return applied;
}

static zone_source_zone_t *zones(zone_source_t *s, size_t *n)
{
    source_catalog_member_t *p = (source_catalog_member_t *)s;
    *n = p->n;
    return p->m;
}

/* Startup: the members' copies were queued while the transfer service was configured (before
 * the first build); true makes the loader publish them before the first answers. */
static bool wait_first(zone_source_t *s)
{
    source_catalog_member_t *p = (source_catalog_member_t *)s;
    return __atomic_load_n(&p->queued, __ATOMIC_ACQUIRE);
}

static void stats(zone_source_t *s, zone_source_stats_t *out)
{
    source_catalog_member_t *p = (source_catalog_member_t *)s;
    *out = (zone_source_stats_t){.running = p->n > 0, .connected = true, .zones = p->n};
}

static zone_source_t *new_source(const zone_source_env_t *env)
{
    source_catalog_member_t *p = calloc(1, sizeof(*p));
    if (!p)
        return NULL;
    p->base.ops = &source_catalog_member_ops;
    p->env = *env;
    return &p->base;
}

static void free_source(zone_source_t *s)
{
    source_catalog_member_t *p = (source_catalog_member_t *)s;
    for (size_t i = 0; i < p->n; i++) {
        zone_free(p->m[i].zone);
        free(p->m[i].key);
    }
    free(p->m);
    free(p);
}

const zone_source_ops_t source_catalog_member_ops = {
    .name = "catalog",
    .what = "the catalog members' zones",
    .previous = "members",
    .copies = true,
    .new = new_source,
    .wait_first = wait_first,
    .apply = apply,
    .zones = zones,
    .stats = stats,
    .free = free_source,
};
