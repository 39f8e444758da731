/*
 * loader_dnssec.c — the loader's DNSSEC key operations (tern/load/loader.h: `ternctl dnssec
 * status|rollover|ds-seen|ds-gone`, the key gauges) and the DS checker's finds: each routed to
 * the file zones' key registry (zone_kasp.h) or, for a Redis zone with a policy, to its Redis
 * source (tern/source/source_redis.h), which queues it for the node driving that zone's keys.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tern/common/err.h"
#include "tern/common/log.h"
#include "tern/load/loader.h"
#include "tern/source/source_redis.h"
#include "tern/wire/dname.h"

#include "ds_check.h"
#include "loader_int.h"
#include "zone_kasp.h"

/* The canonical key of a zone name the operator typed, or NULL with err set. */
static bool zone_key_of(const char *zone, char *key, size_t len, char *err, size_t errlen)
{
    const char *why = "";
    if (dname_key(zone, key, len, &why) < 0) {
        snprintf(err, errlen, "bad zone name \"%s\": %s", zone, why);
        return false;
    }
    return true;
}

/* The Redis source when it manages zone key's keys (a policy named in its config), else NULL. */
static zone_source_t *redis_managed(loader_t *l, const char *key)
{
    zone_source_t *redis = loader_source(l, "redis");
    char rerr[256];
    char *text = redis ? source_redis_dnssec_status(redis, key, rerr, sizeof(rerr)) : NULL;
    free(text);
    return text ? redis : NULL;
}

char *loader_dnssec_status(loader_t *l, const char *zone, char *err, size_t errlen)
{
    char key[DNAME_KEY_MAX], rerr[256];
    if (zone && !zone_key_of(zone, key, sizeof(key), err, errlen))
        return NULL;
    char *text = zone_kasp_status(loader_kasp(l), zone ? key : NULL, err, errlen);
    zone_source_t *redis = loader_source(l, "redis");
    char *more = redis ? source_redis_dnssec_status(redis, zone ? key : NULL, rerr, sizeof(rerr))
                       : NULL; /* Redis zones with a policy (tern/redis/redis_source.h) */
    if (!more)
        return text;
    if (!text) {
        err[0] = 0;
        return more;
    }
    char *both = NULL;
    if (asprintf(&both, "%s%s", text, more) < 0) {
        both = NULL;
        snprintf(err, errlen, "out of memory");
    }
    free(text);
    free(more);
    return both;
}

int loader_dnssec_rollover(loader_t *l, const char *zone, const char *role, char *err,
                           size_t errlen)
{
    char key[DNAME_KEY_MAX];
    if (!zone_key_of(zone, key, sizeof(key), err, errlen))
        return TERN_EINVAL;
    zone_source_t *redis = redis_managed(l, key);
    if (redis) { /* for the node of the fleet driving its keys */
        char req[64];
        snprintf(req, sizeof(req), "rollover %s", role);
        return source_redis_dnssec_request(redis, key, req, err, errlen);
    }
    int rc = zone_kasp_rollover(loader_kasp(l), key, role, (int64_t)time(NULL), err, errlen);
    return rc < 0 ? rc : loader_reread(l, key); /* built at once: the new key is made */
}

int loader_dnssec_ds_seen(loader_t *l, const char *zone, int tag, char *err, size_t errlen)
{
    char key[DNAME_KEY_MAX];
    if (!zone_key_of(zone, key, sizeof(key), err, errlen))
        return TERN_EINVAL;
    zone_source_t *redis = redis_managed(l, key);
    if (redis) {
        char req[32] = "ds-seen";
        if (tag >= 0)
            snprintf(req, sizeof(req), "ds-seen %d", tag);
        return source_redis_dnssec_request(redis, key, req, err, errlen);
    }
    int rc = zone_kasp_ds_seen(loader_kasp(l), key, tag, (int64_t)time(NULL), true, err, errlen);
    return rc < 0 ? rc : loader_reread(l, key);
}

int loader_dnssec_ds_gone(loader_t *l, const char *zone, char *err, size_t errlen)
{
    char key[DNAME_KEY_MAX];
    if (!zone_key_of(zone, key, sizeof(key), err, errlen))
        return TERN_EINVAL;
    zone_source_t *redis = redis_managed(l, key);
    if (redis) /* for the node of the fleet driving its keys */
        return source_redis_dnssec_request(redis, key, "ds-gone", err, errlen);
    int rc = zone_kasp_ds_gone(loader_kasp(l), key, (int64_t)time(NULL), true, err, errlen);
    return rc < 0 ? rc : loader_reread(l, key);
}

int loader_dnssec_keys(loader_t *l, loader_dnssec_keys_t **out, size_t *n)
{
    return zone_kasp_gauges(loader_kasp(l), out, n);
}

/* ds_check's callback (its thread): the parent has the DS a managed zone waited for (or, for a
 * zone being unsigned, no DS any more). */
void loader_dnssec_ds_found(void *ctx, const char *key, const ds_check_want_t *want)
{
    loader_t *l = ctx;
    char err[256];
    zone_source_t *redis = redis_managed(l, key);
    if (redis) { /* a Redis zone this node drives: the DS seen (or gone), as a request to itself */
        char req[32] = "ds-gone";
        if (!want->gone)
            snprintf(req, sizeof(req), "ds-seen %u", want->tag);
        if (source_redis_dnssec_request(redis, key, req, err, sizeof(err)) < 0)
            log_warn("dnssec: zone %s: %s", key, err);
        return;
    }
    int64_t now = (int64_t)time(NULL);
    if ((want->gone
             ? zone_kasp_ds_gone(loader_kasp(l), key, now, false, err, sizeof(err))
             : zone_kasp_ds_seen(loader_kasp(l), key, want->tag, now, false, err, sizeof(err))) < 0)
        log_warn("dnssec: zone %s: %s", key, err);
    else if (loader_reread(l, key) < 0)
        log_err("dnssec: zone %s: out of memory; its DS takes effect at the next check", key);
}
