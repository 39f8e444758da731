/*
 * redis_settings.c — config_redis_t as a value (redis_settings.h): free, copy, compare. The
 * config parser fills it; the zone reader and the health checker each keep a copy, and a
 * reload compares the old with the new to know whether to reconnect.
 */
#include "tern/redis/redis_settings.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "tern/common/compiler.h"
#include "tern/common/err.h"

/* The strings of config_redis_t: one table for free, copy and compare, so a string field added
 * to the struct is added here once. */
static const size_t strs[] = {
    offsetof(config_redis_t, host),
    offsetof(config_redis_t, unix_path),
    offsetof(config_redis_t, password),
    offsetof(config_redis_t, prefix),
    offsetof(config_redis_t, suffix),
    offsetof(config_redis_t, changes_channel),
    offsetof(config_redis_t, sentinel_master),
    offsetof(config_redis_t, sentinel_password),
};

static char **str_at(config_redis_t *r, size_t i)
{
    return (char **)(void *)((char *)r + strs[i]);
}

static const char *str_value(const config_redis_t *r, size_t i)
{
    const char *p;
    memcpy(&p, (const char *)r + strs[i], sizeof(p));
    return p;
}

static bool same_str(const char *a, const char *b)
{
    return a == b || (a && b && strcmp(a, b) == 0);
}

void redis_settings_free_sentinels(config_redis_t *r)
{
    for (size_t i = 0; i < r->nsentinels; i++)
        free(r->sentinels[i]);
    free(r->sentinels);
    r->sentinels = NULL;
    r->nsentinels = 0;
}

void redis_settings_free(config_redis_t *r)
{
    for (size_t i = 0; i < TERN_ARRAY_SIZE(strs); i++)
        free(*str_at(r, i));
    redis_settings_free_sentinels(r);
    memset(r, 0, sizeof(*r));
}

int redis_settings_copy(config_redis_t *dst, const config_redis_t *src)
{
    *dst = *src;
    for (size_t i = 0; i < TERN_ARRAY_SIZE(strs); i++)
        *str_at(dst, i) = NULL;
    dst->sentinels = NULL;
    dst->nsentinels = 0;
    for (size_t i = 0; i < TERN_ARRAY_SIZE(strs); i++) {
        const char *s = str_value(src, i);
        if (s && !(*str_at(dst, i) = strdup(s)))
            return TERN_ENOMEM;
    }
    if (src->nsentinels) {
        if (!(dst->sentinels = calloc(src->nsentinels, sizeof(*dst->sentinels))))
            return TERN_ENOMEM;
        for (; dst->nsentinels < src->nsentinels; dst->nsentinels++)
            if (!(dst->sentinels[dst->nsentinels] = strdup(src->sentinels[dst->nsentinels])))
                return TERN_ENOMEM;
    }
    return 0;
}

bool redis_settings_same(const config_redis_t *a, const config_redis_t *b)
{
    if (a->enabled != b->enabled || a->port != b->port || a->db != b->db ||
        a->connect_timeout_ms != b->connect_timeout_ms ||
        a->read_timeout_ms != b->read_timeout_ms || a->zone_reload_s != b->zone_reload_s ||
        a->default_ttl != b->default_ttl || a->max_ttl != b->max_ttl ||
        a->max_value_bytes != b->max_value_bytes || a->max_labels != b->max_labels ||
        a->max_rrset_records != b->max_rrset_records || a->max_zones != b->max_zones ||
        a->read_from != b->read_from || a->nsentinels != b->nsentinels)
        return false;
    for (size_t i = 0; i < TERN_ARRAY_SIZE(strs); i++)
        if (!same_str(str_value(a, i), str_value(b, i)))
            return false;
    for (size_t i = 0; i < a->nsentinels; i++)
        if (strcmp(a->sentinels[i], b->sentinels[i]) != 0)
            return false;
    return true;
}
