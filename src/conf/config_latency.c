/*
 * config_latency.c — "latency_map:", where geo_filter latency's map (tern/geo/latency_map.h) is
 * read from: {file: PATH} (relative to the config's directory) or {redis_key: KEY} (a string in
 * the Redis of redis:, holding the same text). Exactly one of them. The map itself is read and
 * compiled by the loader (src/load/view_latency.c), at start and on every reload: a reload may
 * change this block too. Nothing here holds state beyond one config_load() call.
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config_blocks.h"
#include "tern/common/err.h"

#define LMFIELD(f)                                                                                 \
    .offset = offsetof(config_latency_map_t, f), .size = sizeof(((config_latency_map_t *)0)->f)

/* A Redis key of up to 1 KiB: keys are names, not data. */
#define LATENCY_KEY_MAX 1024

enum { LM_FILE, LM_REDIS_KEY, LM_COUNT };

static const opt_t latency_schema[LM_COUNT] = {
    [LM_FILE] = {.key = "file",
                 .type = OPT_PATH,
                 LMFIELD(file),
                 .min = 1,
                 .max = PATH_MAX - 1,
                 .desc = "the map's text file, relative to the config's directory"},
    [LM_REDIS_KEY] = {.key = "redis_key",
                      .type = OPT_STR,
                      LMFIELD(redis_key),
                      .min = 1,
                      .max = LATENCY_KEY_MAX,
                      .desc = "or a Redis string (in redis:'s server) holding the same text"},
};

static void latency_reset(config_t *c)
{
    free(c->latency_map.file);
    free(c->latency_map.redis_key);
    memset(&c->latency_map, 0, sizeof(c->latency_map));
}

static int latency_copy(config_t *dst, const config_t *src)
{
    const config_latency_map_t *s = &src->latency_map;
    config_latency_map_t *d = &dst->latency_map;
    d->file = s->file ? strdup(s->file) : NULL;
    d->redis_key = s->redis_key ? strdup(s->redis_key) : NULL;
    if ((s->file && !d->file) || (s->redis_key && !d->redis_key))
        return TERN_ENOMEM;
    return 0;
}

static bool latency_same(const config_t *x, const config_t *y)
{
    return config_same_str(x->latency_map.file, y->latency_map.file) &&
           config_same_str(x->latency_map.redis_key, y->latency_map.redis_key);
}

/* "latency_map" at n: replaces the block; null = no map. */
static int latency_parse(parse_ctx_t *pc, const opt_t *o, const yaml_node_t *k,
                         const yaml_node_t *n)
{
    field_t fields[LM_COUNT];
    const yaml_node_t *val[LM_COUNT];
    int rc;
    (void)k;
    latency_reset(pc->c);
    if (is_null(n))
        return 0;
    config_row_fields(fields, latency_schema, LM_COUNT);
    if ((rc = config_get_fields(pc, n, o->key, fields, LM_COUNT, val)) < 0)
        return rc;
    for (size_t i = 0; i < LM_COUNT; i++)
        if (val[i] &&
            (rc = config_get_row(pc, val[i], o->key, &latency_schema[i], &pc->c->latency_map)) < 0)
            return rc;
    const config_latency_map_t *m = &pc->c->latency_map;
    if (!m->file == !m->redis_key)
        return config_fail(pc, n, o->key, "give one of file and redis_key");
    return 0;
}

/* redis_key is read from redis:'s server: there must be one. */
static int latency_check(parse_ctx_t *pc)
{
    if (pc->c->latency_map.redis_key && !pc->c->redis.enabled) {
        snprintf(pc->err, pc->errlen,
                 "%s: latency_map: redis_key needs redis: (the server the key is read from)",
                 pc->path);
        return TERN_ESYNTAX;
    }
    return 0;
}

const conf_block_t config_latency_map_block = {
    .rows = latency_schema,
    .nrows = LM_COUNT,
    .parse = latency_parse,
    .reset = latency_reset,
    .copy = latency_copy,
    .same = latency_same,
    .check = latency_check,
};
