/*
 * config_catalog_consumer.c — a secondary zone's "catalog_consumer:" (RFC 9432 catalog zones
 * consumed, tern/xfr/xfr_catalog.h): where the member list and the members' copies are kept, and
 * the groups a member's "group" property may name, each with the primaries (and keys) its
 * members are transferred from instead of the catalog's.
 *
 *   - origin: catalog.example
 *     primary: {address: "192.0.2.1", key: xfr-key}
 *     catalog_consumer:
 *       directory: catalog           # relative to the config file's directory
 *       groups:
 *         special: {primary: ["192.0.2.9@5300"]}
 *
 * The meanings are Knot's (doc/reference.rst, "catalog-role: interpret" and "catalog-template":
 * a member whose group names a template takes that template; the rest take the catalog's own
 * primaries, as BIND's catalog-zones default-primaries) and BIND's zone-directory (where the
 * members' copies go). A group's primaries are read with a zone's own reader (config_xfr.c), so
 * they take the same forms and keys.
 *
 * Nothing here holds state beyond one config_load() call.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config_blocks.h"
#include "tern/common/err.h"

enum { CC_DIRECTORY, CC_GROUPS, CC_COUNT };
static const field_t catalog_fields[CC_COUNT] = {
    [CC_DIRECTORY] = {"directory",
                      "the member list and the members' copies (relative to the config file's "
                      "directory)",
                      true, NULL},
    [CC_GROUPS] = {"groups",
                   "{NAME: {primary}}: members of group NAME (RFC 9432 4.4.2) use these "
                   "primaries",
                   false, NULL},
};

enum { CG_PRIMARY, CG_COUNT };
static const field_t group_fields[CG_COUNT] = {
    [CG_PRIMARY] = {"primary", "\"ADDR[@PORT]\" or {address, key}, or a list: the group's members'",
                    true, NULL},
};

/* A group's primaries, seen as a zone's (config_xfr.c reads, copies and frees those). */
static config_zone_t group_as_zone(const config_catalog_group_t *g)
{
    return (config_zone_t){.primaries = g->primaries, .nprimaries = g->nprimaries};
}

static void catalog_free(config_catalog_consumer_t *cc)
{
    if (!cc)
        return;
    for (size_t i = 0; i < cc->ngroups; i++) {
        config_zone_t z = group_as_zone(&cc->groups[i]);
        config_zone_xfr_reset(&z);
        free(cc->groups[i].name);
    }
    free(cc->groups);
    free(cc->directory);
    free(cc);
}

/* "groups: {NAME: {primary}}" at n into cc. */
static int get_groups(parse_ctx_t *pc, const yaml_node_t *n, const char *key,
                      config_catalog_consumer_t *cc)
{
    if (n->type != YAML_MAPPING_NODE)
        return config_fail(pc, n, key, "groups: expected a mapping of group names, got %s",
                           config_node_kind(n));
    size_t cnt = (size_t)(n->data.mapping.pairs.top - n->data.mapping.pairs.start);
    if (cnt && !(cc->groups = calloc(cnt, sizeof(*cc->groups))))
        return TERN_ENOMEM;
    for (yaml_node_pair_t *p = n->data.mapping.pairs.start; p < n->data.mapping.pairs.top; p++) {
        const yaml_node_t *k = node(pc, p->key), *v = node(pc, p->value);
        if (!is_text(k) || scalar(k)[0] == '\0')
            return config_fail(pc, k, key, "groups: expected a group name, got %s",
                               config_node_kind(k));
        char gkey[192]; /* key (96) + ": groups: " + 40 */
        snprintf(gkey, sizeof(gkey), "%s: groups: %.40s", key, scalar(k));
        for (size_t i = 0; i < cc->ngroups; i++)
            if (strcmp(cc->groups[i].name, scalar(k)) == 0)
                return config_fail(pc, k, gkey, "defined twice");
        const yaml_node_t *val[CG_COUNT];
        int r = config_get_fields(pc, v, gkey, group_fields, CG_COUNT, val);
        if (r < 0)
            return r;
        config_catalog_group_t *g = &cc->groups[cc->ngroups];
        if (!(g->name = strdup(scalar(k))))
            return TERN_ENOMEM;
        cc->ngroups++;
        config_zone_t z = {0};
        r = config_get_zone_xfr(pc, gkey, &z, val[CG_PRIMARY], NULL, NULL, NULL, NULL);
        g->primaries = z.primaries;
        g->nprimaries = z.nprimaries;
        if (r < 0)
            return r;
    }
    return 0;
}

int config_get_zone_catalog(parse_ctx_t *pc, const char *key, config_zone_t *z,
                            const yaml_node_t *n)
{
    char ckey[96];
    snprintf(ckey, sizeof(ckey), "%s: catalog_consumer", key);
    if (!z->nprimaries)
        return config_fail(pc, n, ckey,
                           "only a secondary zone (with primary) is a catalog to consume");
    const yaml_node_t *val[CC_COUNT];
    int r = config_get_fields(pc, n, ckey, catalog_fields, CC_COUNT, val);
    if (r < 0)
        return r;
    if (!is_text(val[CC_DIRECTORY]) || scalar(val[CC_DIRECTORY])[0] == '\0')
        return config_fail(pc, val[CC_DIRECTORY], ckey, "directory: expected a path, got %s",
                           config_node_kind(val[CC_DIRECTORY]));
    config_catalog_consumer_t *cc = calloc(1, sizeof(*cc));
    if (!cc)
        return TERN_ENOMEM;
    z->catalog_consumer = cc; /* the zone owns it from here, whatever follows */
    if (!(cc->directory = config_resolve_path(pc, scalar(val[CC_DIRECTORY]))))
        return TERN_ENOMEM;
    return val[CC_GROUPS] ? get_groups(pc, val[CC_GROUPS], ckey, cc) : 0;
}

void config_zone_catalog_reset(config_zone_t *z)
{
    catalog_free(z->catalog_consumer);
    z->catalog_consumer = NULL;
}

int config_zone_catalog_copy(config_zone_t *dst, const config_zone_t *src)
{
    dst->catalog_consumer = NULL;
    const config_catalog_consumer_t *s = src->catalog_consumer;
    if (!s)
        return 0;
    config_catalog_consumer_t *d = calloc(1, sizeof(*d));
    if (!d)
        return TERN_ENOMEM;
    dst->catalog_consumer = d;
    if (!(d->directory = strdup(s->directory)) ||
        (s->ngroups && !(d->groups = calloc(s->ngroups, sizeof(*d->groups)))))
        return TERN_ENOMEM;
    for (size_t i = 0; i < s->ngroups; i++) {
        config_catalog_group_t *g = &d->groups[d->ngroups];
        if (!(g->name = strdup(s->groups[i].name)))
            return TERN_ENOMEM;
        d->ngroups++;
        config_zone_t from = group_as_zone(&s->groups[i]), to = {0};
        int r = config_zone_xfr_copy(&to, &from);
        g->primaries = to.primaries;
        g->nprimaries = to.nprimaries;
        if (r < 0)
            return r;
    }
    return 0;
}

int config_catalog_check(const config_t *c, const char *file, char *err, size_t errlen)
{
    for (size_t i = 0; i < c->nzones; i++) {
        const config_catalog_consumer_t *cc = c->zones[i].catalog_consumer;
        for (size_t g = 0; cc && g < cc->ngroups; g++)
            for (size_t k = 0; k < cc->groups[g].nprimaries; k++) {
                const config_xfr_peer_t *p = &cc->groups[g].primaries[k];
                if (p->key && !config_tsig_key_known(c, p->key)) {
                    snprintf(err, errlen,
                             "%s:%u: zone %s: catalog_consumer: groups: %s: primary: no TSIG "
                             "key \"%s\" in tsig_keys or tsig_key_file",
                             file ? file : "config", p->line, c->zones[i].origin,
                             cc->groups[g].name, p->key);
                    return TERN_EINVAL;
                }
            }
    }
    return 0;
}

void config_catalog_print(FILE *out, int depth)
{
    config_print_fields(out, depth, catalog_fields, CC_COUNT);
    /* a group's keys sit under its name, one level below groups */
    config_print_fields(out, depth + 2, group_fields, CG_COUNT);
}
