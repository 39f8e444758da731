/*
 * config_zone.c — "zones:", the zones ternd serves: each entry's keys (origin, file, format, its
 * acl, dnssec keys, and the transfer settings config_xfr.c reads), and the zones list's append,
 * copy and free. A zone's acl is config_limit.c's block; its transfer settings config_xfr.c's.
 *
 * Nothing here holds state beyond one config_load() call; the zones are read-only once loaded.
 */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "config_blocks.h"
#include "tern/common/err.h"

enum {
    ZF_ORIGIN,
    ZF_FILE,
    ZF_FORMAT,
    ZF_ACL,
    ZF_DNSSEC,
    ZF_PRIMARY,
    ZF_NOTIFY,
    ZF_ALLOW_TRANSFER,
    ZF_TRANSFER_KEY,
    ZF_ALLOW_NOTIFY,
    ZF_ALLOW_UPDATE,
    ZF_CATALOG_CONSUMER,
    ZF_CATALOG,
    ZF_CATALOG_GROUP,
    ZF_CATALOG_COO,
    ZF_TRANSFER_TLS,
    ZF_COUNT
};

static const field_t zone_fields[ZF_COUNT] = {
    [ZF_ORIGIN] = {"origin", "the zone's apex name", true, NULL},
    [ZF_FILE] = {"file",
                 "master file (RFC 1035) or redins JSON, relative to the config file's "
                 "directory (a secondary zone's on-disk copy, optional)",
                 false, NULL},
    [ZF_FORMAT] = {"format", "rfc1035 or json (default: json for a file name ending in .json)",
                   false, NULL},
    [ZF_ACL] = {"acl", "the zone's access list {allow, deny, action}", false, NULL},
    [ZF_DNSSEC] = {"dnssec",
                   "{keys: [BIND key pairs]} or {policy: NAME} (dnssec_policies): tern signs "
                   "the zone",
                   false, NULL},
    [ZF_PRIMARY] = {"primary",
                    "\"ADDR[@PORT]\" or {address, key}, or a list: a secondary zone, "
                    "transferred from these",
                    false, NULL},
    [ZF_NOTIFY] = {"notify", "secondaries sent NOTIFY on a change (as primary)", false, NULL},
    [ZF_ALLOW_TRANSFER] = {"allow_transfer", "who may AXFR/IXFR the zone (prefixes)", false, NULL},
    [ZF_TRANSFER_KEY] = {"transfer_key", "the TSIG key transfers must be signed with", false, NULL},
    [ZF_ALLOW_NOTIFY] = {"allow_notify", "who may NOTIFY a secondary zone (default: its primaries)",
                         false, NULL},
    [ZF_TRANSFER_TLS] = {"transfer_tls",
                         "any, required (XoT only) or mutual (XoT, client certificate)", false,
                         NULL},
    [ZF_ALLOW_UPDATE] = {"allow_update",
                         "who may change it with RFC 2136 UPDATE: key names, or {key, address} "
                         "rules (default: nobody)",
                         false, NULL},
    [ZF_CATALOG_CONSUMER] = {"catalog_consumer",
                             "{directory, groups}: the zone is an RFC 9432 catalog: its members "
                             "are served too",
                             false, NULL},
    [ZF_CATALOG] = {"catalog", "the catalog (catalogs:) this primary zone is a member of", false,
                    NULL},
    [ZF_CATALOG_GROUP] = {"catalog_group", "its group property in the catalog (RFC 9432 4.4.2)",
                          false, NULL},
    [ZF_CATALOG_COO] = {"catalog_coo",
                        "its change-of-ownership property: the catalog that may take it over "
                        "(RFC 9432 4.4.1)",
                        false, NULL},
};

enum { ZD_KEYS, ZD_POLICY, ZD_UNSIGN, ZD_COUNT };
static const field_t zone_dnssec_fields[ZD_COUNT] = {
    [ZD_KEYS] = {"keys",
                 "the zone's BIND key pairs (K<zone>.+<alg>+<tag>, with or without .key or "
                 ".private; a KSK and a ZSK, or one combined key)",
                 false, NULL},
    [ZD_POLICY] = {"policy",
                   "the name of a dnssec_policies entry: tern makes, publishes, rolls and "
                   "retires the zone's keys (instead of keys)",
                   false, NULL},
    [ZD_UNSIGN] = {"unsign",
                   "true: turn signing off safely (RFC 8078): CDS/CDNSKEY DELETE, the keys "
                   "removed once the parent's DS is gone (with policy)",
                   false, NULL},
};

/* "dnssec: {keys: [...]}" of a zone: the key paths, resolved, into z. */
static int get_zone_dnssec(parse_ctx_t *pc, const yaml_node_t *n, const char *key, config_zone_t *z)
{
    const yaml_node_t *val[ZD_COUNT];
    int r = config_get_fields(pc, n, key, zone_dnssec_fields, ZD_COUNT, val);
    if (r < 0)
        return r;
    if (!val[ZD_KEYS] == !val[ZD_POLICY])
        return config_fail(pc, n, key, "expected keys or policy (one of them)");
    if (val[ZD_UNSIGN] && !val[ZD_POLICY])
        return config_fail(pc, val[ZD_UNSIGN], key,
                           "unsign: only with policy (static keys are removed by removing dnssec, "
                           "once the parent has no DS)");
    if (val[ZD_UNSIGN] &&
        (r = config_get_bool(pc, val[ZD_UNSIGN], key, "unsign", &z->dnssec_unsign)) < 0)
        return r;
    if (val[ZD_POLICY]) {
        if (!is_text(val[ZD_POLICY]) || scalar(val[ZD_POLICY])[0] == '\0')
            return config_fail(pc, val[ZD_POLICY], key, "policy: expected a policy name, got %s",
                               config_node_kind(val[ZD_POLICY]));
        return (z->dnssec_policy = strdup(scalar(val[ZD_POLICY]))) ? 0 : TERN_ENOMEM;
    }
    const yaml_node_t *k = val[ZD_KEYS];
    if (k->type != YAML_SEQUENCE_NODE || k->data.sequence.items.start == k->data.sequence.items.top)
        return config_fail(pc, k, key, "keys: expected a non-empty list of key files, got %s",
                           config_node_kind(k));
    size_t cnt = (size_t)(k->data.sequence.items.top - k->data.sequence.items.start);
    if (!(z->dnssec_keys = calloc(cnt, sizeof(*z->dnssec_keys))))
        return TERN_ENOMEM;
    for (yaml_node_item_t *it = k->data.sequence.items.start; it < k->data.sequence.items.top;
         it++) {
        const yaml_node_t *e = node(pc, *it);
        if (!is_text(e) || scalar(e)[0] == '\0')
            return config_fail(pc, e, key, "keys: expected a key file name, got %s",
                               config_node_kind(e));
        if (!(z->dnssec_keys[z->ndnssec_keys] = config_resolve_path(pc, scalar(e))))
            return TERN_ENOMEM;
        z->ndnssec_keys++;
    }
    return 0;
}

static config_zone_format_t zone_format_of(const char *file)
{
    size_t n = strlen(file);
    return n > 5 && strcasecmp(file + n - 5, ".json") == 0 ? CONFIG_ZONE_JSON : CONFIG_ZONE_RFC1035;
}

/* transfer_tls (config_transfer_tls_t), named as config.h's enum. */
static int get_transfer_tls(parse_ctx_t *pc, const char *key, config_zone_t *z,
                            const yaml_node_t *n)
{
    static const char *const names[] = {"any", "required", "mutual"};
    size_t v = 0;
    int r = config_get_enum(pc, n, key, "transfer_tls", names, TERN_ARRAY_SIZE(names), &v);
    z->transfer_tls = (unsigned)v;
    return r;
}

static int add_zone_item(parse_ctx_t *pc, const opt_t *o, const yaml_node_t *parent,
                         const yaml_node_t *n, size_t index)
{
    char key[64], akey[80];
    const yaml_node_t *val[ZF_COUNT];
    config_acl_t acl = {0};
    int r;
    config_item_key(key, sizeof(key), o->key, parent, index);
    if ((r = config_get_fields(pc, n, key, zone_fields, ZF_COUNT, val)) < 0)
        return r;
    for (size_t i = 0; i < ZF_ACL; i++) /* the scalar fields */
        if (val[i] && (!is_text(val[i]) || scalar(val[i])[0] == '\0'))
            return config_fail(pc, val[i], key, "%s: expected a non-empty string, got %s",
                               zone_fields[i].key, config_node_kind(val[i]));
    /* no file and no primary: the transfer settings of a zone another source (Redis) serves */
    if (!val[ZF_FILE] && !val[ZF_PRIMARY] && !val[ZF_ALLOW_TRANSFER] && !val[ZF_NOTIFY] &&
        !val[ZF_ALLOW_UPDATE] && !val[ZF_CATALOG] && !val[ZF_CATALOG_GROUP] && !val[ZF_CATALOG_COO])
        return config_fail(pc, n, key, "missing \"file\" (%s)", zone_fields[ZF_FILE].desc);
    if (!val[ZF_FILE] && !val[ZF_PRIMARY] && (val[ZF_DNSSEC] || val[ZF_ACL] || val[ZF_FORMAT]))
        return config_fail(pc, n, key,
                           "a zone entry without file or primary only holds transfer and update "
                           "settings (for a zone from Redis): no acl, dnssec or format");
    config_zone_format_t fmt =
        val[ZF_FILE] ? zone_format_of(scalar(val[ZF_FILE])) : CONFIG_ZONE_RFC1035;
    if (val[ZF_FORMAT]) {
        const char *f = scalar(val[ZF_FORMAT]);
        if (strcmp(f, "rfc1035") == 0)
            fmt = CONFIG_ZONE_RFC1035;
        else if (strcmp(f, "json") == 0)
            fmt = CONFIG_ZONE_JSON;
        else
            return config_fail(pc, val[ZF_FORMAT], key,
                               "format: expected rfc1035 or json, got \"%s\"", f);
    }
    snprintf(akey, sizeof(akey), "%s: acl", key);
    if (val[ZF_ACL] && (r = config_get_acl(pc, val[ZF_ACL], akey, &acl)) < 0)
        goto out;
    if (val[ZF_PRIMARY] && fmt != CONFIG_ZONE_RFC1035) {
        r = config_fail(pc, val[ZF_FORMAT] ? val[ZF_FORMAT] : val[ZF_FILE], key,
                        "a secondary zone's copy is a master file (format rfc1035)");
        goto out;
    }
    char *file = val[ZF_FILE] ? config_resolve_path(pc, scalar(val[ZF_FILE])) : NULL;
    if (val[ZF_FILE] && !file) {
        r = TERN_ENOMEM;
        goto out;
    }
    r = config_add_zone_format(pc->c, scalar(val[ZF_ORIGIN]), file, fmt);
    free(file);
    if (r == 0) {
        config_zone_t *z = &pc->c->zones[pc->c->nzones - 1];
        z->acl = acl; /* the zone owns the lists now */
        if ((r = config_get_zone_xfr(pc, key, z, val[ZF_PRIMARY], val[ZF_NOTIFY],
                                     val[ZF_ALLOW_TRANSFER], val[ZF_TRANSFER_KEY],
                                     val[ZF_ALLOW_NOTIFY])) < 0)
            return r;
        if (val[ZF_TRANSFER_TLS] && (r = get_transfer_tls(pc, key, z, val[ZF_TRANSFER_TLS])) < 0)
            return r;
        if (val[ZF_ALLOW_UPDATE] && val[ZF_PRIMARY])
            return config_fail(pc, val[ZF_ALLOW_UPDATE], key,
                               "allow_update: a secondary zone is changed on its primary");
        if (val[ZF_ALLOW_UPDATE] && fmt != CONFIG_ZONE_RFC1035)
            return config_fail(pc, val[ZF_ALLOW_UPDATE], key,
                               "allow_update: only a master-file zone takes updates (its journal "
                               "is replayed over the file); a redins JSON file does not");
        if ((r = config_get_zone_update(pc, key, z, val[ZF_ALLOW_UPDATE])) < 0)
            return r;
        if (val[ZF_CATALOG_CONSUMER] &&
            (r = config_get_zone_catalog(pc, key, z, val[ZF_CATALOG_CONSUMER])) < 0)
            return r;
        if ((r = config_get_zone_catalog_member(pc, key, z, val[ZF_CATALOG], val[ZF_CATALOG_GROUP],
                                                val[ZF_CATALOG_COO])) < 0)
            return r;
        snprintf(akey, sizeof(akey), "%s: dnssec", key);
        if (val[ZF_DNSSEC] && val[ZF_PRIMARY])
            return config_fail(pc, val[ZF_DNSSEC], akey,
                               "a secondary zone is served as transferred (sign it on the "
                               "primary)");
        return val[ZF_DNSSEC] ? get_zone_dnssec(pc, val[ZF_DNSSEC], akey, z) : 0;
    }
out:
    config_acl_reset(&acl);
    return r;
}

static int set_zones(parse_ctx_t *pc, const opt_t *o, const yaml_node_t *k, const yaml_node_t *n)
{
    if (n->type != YAML_SEQUENCE_NODE)
        return config_fail(pc, n, o->key, "expected a list of {origin, file}, got %s",
                           config_node_kind(n));
    return config_each_item(pc, o, n, add_zone_item);
}

int config_add_zone(config_t *c, const char *origin, const char *file)
{
    return config_add_zone_format(c, origin, file, zone_format_of(file));
}

static int config_zone_keys_copy(config_zone_t *dst, const config_zone_t *src)
{
    if (src->dnssec_policy && !(dst->dnssec_policy = strdup(src->dnssec_policy)))
        return TERN_ENOMEM;
    dst->dnssec_unsign = src->dnssec_unsign;
    if (!src->ndnssec_keys)
        return 0;
    if (!(dst->dnssec_keys = calloc(src->ndnssec_keys, sizeof(*dst->dnssec_keys))))
        return TERN_ENOMEM;
    for (size_t k = 0; k < src->ndnssec_keys; k++) {
        if (!(dst->dnssec_keys[k] = strdup(src->dnssec_keys[k])))
            return TERN_ENOMEM;
        dst->ndnssec_keys++;
    }
    return 0;
}

int config_add_zone_format(config_t *c, const char *origin, const char *file,
                           config_zone_format_t format)
{
    config_zone_t *z = realloc(c->zones, (c->nzones + 1) * sizeof(*z));
    if (!z)
        return TERN_ENOMEM;
    c->zones = z;
    z = &c->zones[c->nzones];
    memset(z, 0, sizeof(*z));
    z->origin = strdup(origin);
    z->file = file ? strdup(file) : NULL;
    z->format = format;
    if (!z->origin || (file && !z->file)) {
        free(z->origin);
        free(z->file);
        return TERN_ENOMEM;
    }
    c->nzones++;
    return 0;
}

/* every key of a zone, dnssec's under it */
static void zones_print(FILE *out, int depth)
{
    for (size_t j = 0; j < ZF_COUNT; j++) {
        config_print_fields(out, depth, &zone_fields[j], 1);
        if (j == ZF_DNSSEC)
            config_print_fields(out, depth + 1, zone_dnssec_fields, ZD_COUNT);
        if (j == ZF_CATALOG_CONSUMER)
            config_catalog_print(out, depth + 1);
    }
}

static void zones_reset(config_t *c)
{
    for (size_t i = 0; i < c->nzones; i++) {
        free(c->zones[i].origin);
        free(c->zones[i].file);
        config_acl_reset(&c->zones[i].acl);
        config_zone_xfr_reset(&c->zones[i]);
        config_zone_update_reset(&c->zones[i]);
        config_zone_catalog_reset(&c->zones[i]);
        config_zone_catalog_member_reset(&c->zones[i]);
        for (size_t k = 0; k < c->zones[i].ndnssec_keys; k++)
            free(c->zones[i].dnssec_keys[k]);
        free(c->zones[i].dnssec_keys);
        free(c->zones[i].dnssec_policy);
    }
    free(c->zones);
    c->zones = NULL;
    c->nzones = 0;
}

static int zones_copy(config_t *dst, const config_t *src)
{
    dst->zones = NULL;
    dst->nzones = 0;
    for (size_t i = 0; i < src->nzones; i++)
        if (config_add_zone_format(dst, src->zones[i].origin, src->zones[i].file,
                                   src->zones[i].format) < 0 ||
            config_acl_copy(&dst->zones[i].acl, &src->zones[i].acl) < 0 ||
            config_zone_xfr_copy(&dst->zones[i], &src->zones[i]) < 0 ||
            config_zone_update_copy(&dst->zones[i], &src->zones[i]) < 0 ||
            config_zone_catalog_copy(&dst->zones[i], &src->zones[i]) < 0 ||
            config_zone_catalog_member_copy(&dst->zones[i], &src->zones[i]) < 0 ||
            config_zone_keys_copy(&dst->zones[i], &src->zones[i]) < 0)
            return TERN_ENOMEM;
    return 0;
}

/* the keys zones name may be defined anywhere in the file */
static int zones_check(parse_ctx_t *pc)
{
    int rc = config_xfr_check(pc->c, pc->path, pc->err, pc->errlen);
    if (rc == 0)
        rc = config_dnssec_check(pc->c, pc->path, pc->err, pc->errlen);
    if (rc == 0)
        rc = config_catalog_check(pc->c, pc->path, pc->err, pc->errlen);
    return rc < 0 ? rc : config_update_check(pc->c, pc->path, pc->err, pc->errlen);
}

const conf_block_t config_zones_block = {
    .parse = set_zones,
    .reset = zones_reset,
    .copy = zones_copy,
    .print = zones_print,
    .check = zones_check,
};
