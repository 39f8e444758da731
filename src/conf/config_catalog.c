/*
 * config_catalog.c — catalog zones tern produces (RFC 9432, version 2): the top-level
 * "catalogs:" block and a zone's "catalog", "catalog_group" and "catalog_coo" keys.
 *
 * The meanings follow Knot's (doc/reference.rst, knot/src/knot/conf/schema.c): a catalog entry
 * is Knot's `catalog-role: generate` zone; a zone's `catalog` is Knot's `catalog-role: member`
 * with `catalog-zone`, its `catalog_group` Knot's `catalog-group`. Beyond Knot: `members: all`
 * makes every zone tern is primary for (master files, redins JSON files, Redis zones and so the
 * API's) a member without naming the catalog in each entry, and `catalog_coo` sets the change of
 * ownership property (§4.4.1), which Knot only reads.
 *
 * A catalog's transfer settings (notify, allow_transfer, transfer_key) become a zone entry
 * without a file, the form a Redis zone's settings already take, so tern/xfr journals, serves
 * and notifies the catalog zone like any other; the catalog source (tern/source/
 * source_catalog.h) serves its content.
 *
 * Nothing here holds state beyond one config_load() call.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config_blocks.h"
#include "tern/common/err.h"
#include "tern/wire/dname.h"

enum { CF_ORIGIN, CF_MEMBERS, CF_NOTIFY, CF_ALLOW_TRANSFER, CF_TRANSFER_KEY, CF_COUNT };

static const field_t catalog_fields[CF_COUNT] = {
    [CF_ORIGIN] = {"origin", "the catalog zone's name (RFC 9432)", true, NULL},
    [CF_MEMBERS] = {"members",
                    "all (every zone tern is primary for) or listed (default: the zones whose "
                    "catalog names this one)",
                    false, NULL},
    [CF_NOTIFY] = {"notify", "the consumers sent NOTIFY when the catalog changes", false, NULL},
    [CF_ALLOW_TRANSFER] = {"allow_transfer", "who may AXFR/IXFR the catalog (prefixes)", false,
                           NULL},
    [CF_TRANSFER_KEY] = {"transfer_key",
                         "the TSIG key transfers of the catalog must be signed with", false, NULL},
};

static const char *const members_names[] = {"listed", "all"};

/* name (presentation form) in canonical form into out; false when it is not a domain name. */
static bool canonical(const char *name, char *out, size_t len)
{
    const char *why;
    return dname_key(name, out, len, &why) >= 0;
}

static int add_catalog_item(parse_ctx_t *pc, const opt_t *o, const yaml_node_t *parent,
                            const yaml_node_t *n, size_t index)
{
    char key[64], ck[DNAME_KEY_MAX];
    const yaml_node_t *val[CF_COUNT];
    config_item_key(key, sizeof(key), o->key, parent, index);
    int r = config_get_fields(pc, n, key, catalog_fields, CF_COUNT, val);
    if (r < 0)
        return r;
    const yaml_node_t *on = val[CF_ORIGIN];
    if (!is_text(on) || !canonical(scalar(on), ck, sizeof(ck)))
        return config_fail(pc, on, key, "origin: expected a domain name, got %s",
                           config_node_kind(on));
    if (!val[CF_NOTIFY] && !val[CF_ALLOW_TRANSFER])
        return config_fail(pc, n, key,
                           "a catalog is for its consumers: give allow_transfer (and notify)");
    size_t members = 0;
    if (val[CF_MEMBERS] &&
        (r = config_get_enum(pc, val[CF_MEMBERS], key, "members", members_names, 2, &members)) < 0)
        return r;
    config_t *c = pc->c;
    config_catalog_t *v = realloc(c->catalogs, (c->ncatalogs + 1) * sizeof(*v));
    if (!v)
        return TERN_ENOMEM;
    c->catalogs = v;
    v = &c->catalogs[c->ncatalogs];
    *v = (config_catalog_t){.members_all = members == 1, .line = (uint32_t)line_of(n)};
    if (!(v->origin = strdup(scalar(on))))
        return TERN_ENOMEM;
    c->ncatalogs++;
    if ((r = config_add_zone_format(c, scalar(on), NULL, CONFIG_ZONE_RFC1035)) < 0)
        return r;
    return config_get_zone_xfr(pc, key, &c->zones[c->nzones - 1], NULL, val[CF_NOTIFY],
                               val[CF_ALLOW_TRANSFER], val[CF_TRANSFER_KEY], NULL);
}

static int catalogs_parse(parse_ctx_t *pc, const opt_t *o, const yaml_node_t *k,
                          const yaml_node_t *n)
{
    (void)k;
    if (is_null(n))
        return 0;
    if (n->type != YAML_SEQUENCE_NODE)
        return config_fail(pc, n, o->key, "expected a list of {origin, members, ...}, got %s",
                           config_node_kind(n));
    return config_each_item(pc, o, n, add_catalog_item);
}

static void catalogs_reset(config_t *c)
{
    for (size_t i = 0; i < c->ncatalogs; i++)
        free(c->catalogs[i].origin);
    free(c->catalogs);
    c->catalogs = NULL;
    c->ncatalogs = 0;
}

static int catalogs_copy(config_t *dst, const config_t *src)
{
    dst->catalogs = NULL;
    dst->ncatalogs = 0;
    if (!src->ncatalogs)
        return 0;
    if (!(dst->catalogs = calloc(src->ncatalogs, sizeof(*dst->catalogs))))
        return TERN_ENOMEM;
    for (size_t i = 0; i < src->ncatalogs; i++) {
        dst->catalogs[i] = src->catalogs[i];
        if (!(dst->catalogs[i].origin = strdup(src->catalogs[i].origin)))
            return TERN_ENOMEM;
        dst->ncatalogs++;
    }
    return 0;
}

static void catalogs_print(FILE *out, int depth)
{
    config_print_fields(out, depth, catalog_fields, CF_COUNT);
}

/* The catalog of c called name (any case, final dot optional), or NULL. */
static const config_catalog_t *catalog_named(const config_t *c, const char *name)
{
    char want[DNAME_KEY_MAX], have[DNAME_KEY_MAX];
    if (!canonical(name, want, sizeof(want)))
        return NULL;
    for (size_t i = 0; i < c->ncatalogs; i++)
        if (canonical(c->catalogs[i].origin, have, sizeof(have)) && strcmp(want, have) == 0)
            return &c->catalogs[i];
    return NULL;
}

/* Zone entries of c whose origin is name's. */
static size_t zone_entries(const config_t *c, const char *name)
{
    char want[DNAME_KEY_MAX], have[DNAME_KEY_MAX];
    size_t n = 0;
    if (!canonical(name, want, sizeof(want)))
        return 0;
    for (size_t i = 0; i < c->nzones; i++)
        n += canonical(c->zones[i].origin, have, sizeof(have)) && strcmp(want, have) == 0;
    return n;
}

/* A whole-file check's error (no node to point at): fmt into pc->err. TERN_EINVAL. */
TERN_PRINTF(2, 3) static int check_fail(parse_ctx_t *pc, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(pc->err, pc->errlen, fmt, ap);
    va_end(ap);
    return TERN_EINVAL;
}

/* Once the whole file is read: every catalog a zone names exists, and a catalog is nothing
 * else (not a zone of its own, not a member, not named twice). */
static int catalogs_check(parse_ctx_t *pc)
{
    const config_t *c = pc->c;
    const char *file = pc->path ? pc->path : "config";
    for (size_t i = 0; i < c->ncatalogs; i++) {
        const config_catalog_t *cat = &c->catalogs[i];
        if (catalog_named(c, cat->origin) != cat)
            return check_fail(pc, "%s:%u: catalogs: %s is given twice", file, cat->line,
                              cat->origin);
    }
    for (size_t i = 0; i < c->ncatalogs; i++) {
        const config_catalog_t *cat = &c->catalogs[i];
        if (zone_entries(c, cat->origin) != 1)
            return check_fail(pc,
                              "%s:%u: catalogs: %s is also a zone entry (a catalog zone is made "
                              "by tern: its transfer settings go in its catalogs entry)",
                              file, cat->line, cat->origin);
    }
    for (size_t i = 0; i < c->nzones; i++) {
        const config_zone_t *z = &c->zones[i];
        const char *bad = NULL;
        if (z->catalog && !catalog_named(c, z->catalog))
            bad = "catalog: no such entry in catalogs";
        else if ((z->catalog || z->catalog_group || z->catalog_coo) && z->nprimaries)
            bad = "a secondary zone is a member of its primary's catalog, not of tern's";
        else if ((z->catalog || z->catalog_group || z->catalog_coo) && catalog_named(c, z->origin))
            bad = "a catalog zone is no member of a catalog";
        if (bad)
            return check_fail(pc, "%s:%u: zone %s: %s", file, z->catalog_line, z->origin, bad);
    }
    return 0;
}

const conf_block_t config_catalogs_block = {
    .parse = catalogs_parse,
    .reset = catalogs_reset,
    .copy = catalogs_copy,
    .print = catalogs_print,
    .check = catalogs_check,
};

/* ---- a zone's keys ------------------------------------------------------------------------ */

/* RFC 1035 §3.3: the group is one TXT <character-string>. */
#define GROUP_MAX 255

int config_get_zone_catalog_member(parse_ctx_t *pc, const char *key, config_zone_t *z,
                                   const yaml_node_t *catalog, const yaml_node_t *group,
                                   const yaml_node_t *coo)
{
    char ck[DNAME_KEY_MAX];
    if (catalog && (!is_text(catalog) || !canonical(scalar(catalog), ck, sizeof(ck))))
        return config_fail(pc, catalog, key, "catalog: expected a catalog's name, got %s",
                           config_node_kind(catalog));
    if (coo && (!is_text(coo) || !canonical(scalar(coo), ck, sizeof(ck))))
        return config_fail(pc, coo, key, "catalog_coo: expected a catalog zone's name, got %s",
                           config_node_kind(coo));
    if (group && (!is_text(group) || scalar(group)[0] == '\0' || strlen(scalar(group)) > GROUP_MAX))
        return config_fail(pc, group, key,
                           "catalog_group: expected a group name of 1..%d bytes, got %s", GROUP_MAX,
                           config_node_kind(group));
    const yaml_node_t *first = catalog ? catalog : group ? group : coo;
    if (first)
        z->catalog_line = (uint32_t)line_of(first);
    if ((catalog && !(z->catalog = strdup(scalar(catalog)))) ||
        (group && !(z->catalog_group = strdup(scalar(group)))) ||
        (coo && !(z->catalog_coo = strdup(scalar(coo)))))
        return TERN_ENOMEM;
    return 0;
}

void config_zone_catalog_member_reset(config_zone_t *z)
{
    free(z->catalog);
    free(z->catalog_group);
    free(z->catalog_coo);
    z->catalog = z->catalog_group = z->catalog_coo = NULL;
}

int config_zone_catalog_member_copy(config_zone_t *dst, const config_zone_t *src)
{
    dst->catalog = dst->catalog_group = dst->catalog_coo = NULL;
    dst->catalog_line = src->catalog_line;
    if ((src->catalog && !(dst->catalog = strdup(src->catalog))) ||
        (src->catalog_group && !(dst->catalog_group = strdup(src->catalog_group))) ||
        (src->catalog_coo && !(dst->catalog_coo = strdup(src->catalog_coo))))
        return TERN_ENOMEM;
    return 0;
}
