/*
 * source_primary.c — see source_primary.h. Moved out of the loader (issue 28): the loader's
 * sec_* code and its zone_in hook.
 */
#include "tern/source/source_primary.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "tern/common/grow.h"
#include "tern/common/log.h"
#include "tern/wire/dname.h"
#include "tern/zone/zone_file.h"

typedef struct source_primary {
    zone_source_t base;
    zone_source_env_t env;
    /* The last transferred version of each secondary zone, the on-disk copy read at first sight,
     * or an unavailable placeholder (SERVFAIL) until the first transfer. Loader thread only. */
    zone_source_zone_t *sec;
    size_t nsec, capsec;
} source_primary_t;

/* A secondary zone stands unavailable (SERVFAIL) with this reason; NULL when out of memory. */
static zone_t *unavailable(const char *key, const char *why)
{
    uint8_t apex[DNAME_MAXLEN];
    const char *bad;
    if (dname_from_str(key, strlen(key), false, apex, &bad) < 0)
        return NULL;
    return zone_new_unavailable(apex, why);
}

/* The zone serving secondary zone key until its first transfer: its copy cz->file when that
 * exists and loads, else an unavailable placeholder. NULL: out of memory. */
static zone_t *first_sight(const char *key, const config_zone_t *cz)
{
    zone_t *z = NULL;
    if (cz && cz->file && access(cz->file, F_OK) == 0) {
        char err[1024];
        if (zone_file_load(cz->origin, cz->file, &z, err, sizeof(err)) < 0) {
            log_warn("xfr: zone %s: its copy cannot be read (%s); waiting for a transfer", key,
                     err);
            z = NULL;
        } else {
            log_info("xfr: zone %s: serving its copy %s (serial %u) until the primary is asked",
                     key, cz->file, z->serial);
        }
    }
    return z ? z : unavailable(key, "secondary zone (no transfer yet)");
}

/* Loader thread: the entry of secondary zone key, made on first sight (first_sight()). NULL:
 * out of memory. */
static zone_source_zone_t *sec_get(source_primary_t *p, const char *key, const config_zone_t *cz)
{
    for (size_t i = 0; i < p->nsec; i++)
        if (strcmp(p->sec[i].key, key) == 0)
            return &p->sec[i];
    if (tern_grow((void **)&p->sec, &p->capsec, p->nsec + 1, sizeof(*p->sec)) < 0)
        return NULL;
    zone_t *z = first_sight(key, cz);
    char *k = z ? strdup(key) : NULL;
    if (!k) {
        zone_free(z);
        return NULL;
    }
    zone_source_zone_t *sz = &p->sec[p->nsec++];
    *sz = (zone_source_zone_t){
        .key = k, .zone = z, .version = zone_source_version(), .loaded = (int64_t)time(NULL)};
    return sz;
}

static const zone_source_zone_t *served(zone_source_t *s, const char *key, const config_zone_t *cz)
{
    return sec_get((source_primary_t *)s, key, cz);
}

static bool owns(const config_zone_t *cz)
{
    return cz->nprimaries > 0;
}

void source_primary_zone_in(void *ctx, const char *key, zone_t *z)
{
    source_primary_t *p = ctx;
    zone_change_t c = {.src = &p->base, .key = strdup(key), .zone = z};
    if (!c.key || p->env.sink.push(p->env.sink.ctx, &c) < 0) {
        log_err("xfr: zone %s: out of memory; the new version is dropped (the next refresh "
                "retries)",
                key);
        zone_change_clear(&c);
    }
}

/* Loader thread: the secondary zones' new versions (NULL: expired, SERVFAIL until a transfer
 * succeeds). */
static size_t apply(zone_source_t *s, zone_change_t *c, size_t n)
{
    source_primary_t *p = (source_primary_t *)s;
    size_t applied = 0;
    for (size_t i = 0; i < n; i++) {
        zone_source_zone_t *sz = sec_get(p, c[i].key, NULL);
        zone_t *z = c[i].zone ? c[i].zone : unavailable(c[i].key, "secondary zone (expired)");
        if (!sz || !z) {
            log_err("xfr: zone %s: out of memory; the change is dropped", c[i].key);
            zone_free(z);
        } else {
            zone_free(sz->zone);
            sz->zone = z;
            sz->version = zone_source_version();
            sz->loaded = (int64_t)time(NULL);
            applied++;
        }
        free(c[i].key);
    }
    return applied;
}

static void stats(zone_source_t *s, zone_source_stats_t *out)
{
    source_primary_t *p = (source_primary_t *)s;
    *out = (zone_source_stats_t){.running = p->nsec > 0, .connected = true, .zones = p->nsec};
}

static zone_source_t *new_source(const zone_source_env_t *env)
{
    source_primary_t *p = calloc(1, sizeof(*p));
    if (!p)
        return NULL;
    p->base.ops = &source_primary_ops;
    p->env = *env;
    return &p->base;
}

static void free_source(zone_source_t *s)
{
    source_primary_t *p = (source_primary_t *)s;
    for (size_t i = 0; i < p->nsec; i++) {
        zone_free(p->sec[i].zone);
        free(p->sec[i].key);
    }
    free(p->sec);
    free(p);
}

const zone_source_ops_t source_primary_ops = {
    .name = "xfr",
    .what = "the transferred zones",
    .previous = "data",
    .new = new_source,
    .apply = apply,
    .owns = owns,
    .served = served,
    .stats = stats,
    .free = free_source,
};
