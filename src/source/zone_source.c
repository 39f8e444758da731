/*
 * zone_source.c — see zone_source.h. The table of sources and what they share.
 */
#include "tern/source/zone_source.h"

#include <stdlib.h>
#include <string.h>

#include "tern/common/compiler.h"
#include "tern/wire/dname.h"

#include "tern/source/source_aname.h"
#include "tern/source/source_catalog.h"
#include "tern/source/source_catalog_member.h"
#include "tern/source/source_file.h"
#include "tern/source/source_json.h"
#include "tern/source/source_primary.h"
#include "tern/source/source_redis.h"

/* Build order: the configured zones' owners first (a configured zone goes to the first that
 * owns it), then the sources that add zones of their own (a configured zone of the same name
 * wins over theirs). Catalog members last: a configured or Redis zone of the same name wins. */
static const zone_source_ops_t *const table[] = {
    &source_primary_ops, &source_file_ops,  &source_json_ops,           &source_catalog_ops,
    &source_redis_ops,   &source_aname_ops, &source_catalog_member_ops,
};

const zone_source_ops_t *const *zone_source_table(size_t *n)
{
    *n = TERN_ARRAY_SIZE(table);
    return table;
}

zone_source_t *zone_source_new(const zone_source_ops_t *ops, const zone_source_env_t *env)
{
    if (ops->new)
        return ops->new (env);
    zone_source_t *s = malloc(sizeof(*s));
    if (s)
        s->ops = ops;
    return s;
}

void zone_source_free(zone_source_t *s)
{
    if (s && s->ops->free)
        s->ops->free(s);
    else
        free(s);
}

zone_source_t *zone_source_find(zone_source_t *const *src, size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(src[i]->ops->name, name) == 0)
            return src[i];
    return NULL;
}

char *zone_source_key(const char *origin)
{
    char key[DNAME_KEY_MAX];
    const char *why;
    if (dname_key(origin, key, sizeof(key), &why) < 0)
        return NULL;
    return strdup(key);
}

/* Zone reads so far (a process has one loader); a zone's version is its read's number. */
static uint64_t zone_reads;

uint64_t zone_source_version(void)
{
    return __atomic_add_fetch(&zone_reads, 1, __ATOMIC_RELAXED);
}

void zone_change_clear(zone_change_t *c)
{
    zone_free(c->zone);
    free(c->names);
    free(c->key);
    c->zone = NULL;
    c->names = NULL;
    c->key = NULL;
}
