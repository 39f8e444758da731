/*
 * config_redis.c — "redis:", the Redis zone source's settings (config_redis_t, whose definition
 * is tern/redis/redis_settings.h): its rows, its address and Sentinel forms, and the reset, copy
 * and comparison of config_redis_t. Health's "redis:" takes the rows up to read_timeout (where
 * Redis is and how to talk to it, config_get_redis() with RS_CONNECTION_COUNT), and redins'
 * handler.redis fills the same struct from its own keys (config_redins.c).
 *
 * Nothing here holds state beyond one config_load() call; config_redis_t is read-only once
 * loaded.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>

#include "config_blocks.h"
#include "tern/common/err.h"

#define RFIELD(f) .offset = offsetof(config_redis_t, f), .size = sizeof(((config_redis_t *)0)->f)

/* Redis accepts much longer strings; 1024 bytes is beyond any real password, key prefix or
 * channel name and keeps messages about them printable. */
#define REDIS_STR_MAX 1024

static const char *const redis_read_from_names[] = {"primary", "replica"};

const opt_t config_redis_schema[RS_COUNT] = {
    [RS_ADDRESS] = {.key = "address",
                    .type = OPT_CUSTOM,
                    .desc = "\"HOST:PORT\", \"[V6]:PORT\" or /path/of/redis.sock; default "
                            "127.0.0.1:6379"},
    [RS_DB] = {.key = "db",
               .type = OPT_UINT,
               RFIELD(db),
               .max = CONFIG_REDIS_MAX_DB,
               .desc = "database to SELECT"},
    [RS_PASSWORD] = {.key = "password",
                     .type = OPT_STR,
                     RFIELD(password),
                     .max = REDIS_STR_MAX,
                     .empty_unsets = true,
                     .desc = "AUTH password; unset or \"\" = no AUTH"},
    [RS_PREFIX] = {.key = "prefix",
                   .type = OPT_STR,
                   RFIELD(prefix),
                   .max = REDIS_STR_MAX,
                   .empty_unsets = true,
                   .desc = "put before every key (redins' prefix)"},
    [RS_SUFFIX] = {.key = "suffix",
                   .type = OPT_STR,
                   RFIELD(suffix),
                   .max = REDIS_STR_MAX,
                   .empty_unsets = true,
                   .desc = "put after every key (redins' suffix)"},
    [RS_CONNECT_TIMEOUT] = {.key = "connect_timeout",
                            .type = OPT_UINT,
                            RFIELD(connect_timeout_ms),
                            .max = REDIS_TIMEOUT_MAX,
                            .desc = "milliseconds to connect; 0 = 2000"},
    [RS_READ_TIMEOUT] = {.key = "read_timeout",
                         .type = OPT_UINT,
                         RFIELD(read_timeout_ms),
                         .max = REDIS_TIMEOUT_MAX,
                         .desc = "milliseconds for each reply; 0 = 5000"},
    /* redins' handler default: its zone list was reloaded every 600 s */
    [RS_ZONE_RELOAD] = {.key = "zone_reload",
                        .type = OPT_UINT,
                        RFIELD(zone_reload_s),
                        .def = 600,
                        .max = ZONE_RELOAD_MAX,
                        .desc = "seconds between verifies of every zone; 0 = never"},
    [RS_CHANGES_CHANNEL] = {.key = "changes_channel",
                            .type = OPT_STR,
                            RFIELD(changes_channel),
                            .max = REDIS_STR_MAX,
                            .desc = "where writers PUBLISH changed zones; unset = "
                                    "<prefix>redins:zones:changed<suffix>, \"\" = none"},
    [RS_DEFAULT_TTL] = {.key = "default_ttl",
                        .type = OPT_UINT,
                        RFIELD(default_ttl),
                        .max = TTL_MAX,
                        .desc = "TTL of RRsets that give none; 0 = 300"},
    [RS_MAX_TTL] = {.key = "max_ttl",
                    .type = OPT_UINT,
                    RFIELD(max_ttl),
                    .max = TTL_MAX,
                    .desc = "cap on every RRset's TTL (redins' max_ttl); 0 = none"},
    /* Bounds on untrusted Redis data: whoever can write to Redis must not be able to make the
     * source read or build without limit. The defaults fit a 1,000,000-label zone with room to
     * spare; the maxima are Redis' own (512 MiB strings) or what a zone can index. */
    [RS_MAX_VALUE_BYTES] = {.key = "max_value_bytes",
                            .type = OPT_UINT,
                            RFIELD(max_value_bytes),
                            .def = 1 << 20,
                            .min = 1024,
                            .max = 512 << 20,
                            .desc = "bytes of one label's JSON or a zone config; longer ones "
                                    "are skipped and logged"},
    [RS_MAX_LABELS] = {.key = "max_labels",
                       .type = OPT_UINT,
                       RFIELD(max_labels),
                       .def = 4000000,
                       .min = 1,
                       .max = 100000000,
                       .desc = "labels of one zone; a larger zone is rejected (its previous "
                               "version keeps serving)"},
    [RS_MAX_RRSET_RECORDS] = {.key = "max_rrset_records",
                              .type = OPT_UINT,
                              RFIELD(max_rrset_records),
                              .def = 10000,
                              .min = 1,
                              .max = 65535,
                              .desc = "records of one RRset; a label with more is skipped and "
                                      "logged"},
    [RS_MAX_ZONES] = {.key = "max_zones",
                      .type = OPT_UINT,
                      RFIELD(max_zones),
                      .def = 100000,
                      .min = 1,
                      .max = 10000000,
                      .desc = "zones read from the set; the ones beyond are skipped and logged"},
    [RS_SENTINEL] = {.key = "sentinel",
                     .type = OPT_CUSTOM,
                     .desc = "{addresses: [\"IP:PORT\", ...], master, password}: ask Redis "
                             "Sentinel for the node and follow its failovers; not with address"},
    [RS_READ_FROM] = {.key = "read_from",
                      .type = OPT_ENUM,
                      RFIELD(read_from),
                      .names = redis_read_from_names,
                      .max = 1,
                      .desc = "read zones from the primary or a replica Sentinel names "
                              "(replica needs sentinel)"},
};

_Static_assert(sizeof(unsigned) == sizeof(uint32_t),
               "config_redis_schema stores unsigned as 32 bits");

/* ---- redis -------------------------------------------------------------------------------- */

/* Free r's strings and set it to the defaults (no Redis; zone_reload 600). */
void config_redis_reset(config_redis_t *r)
{
    redis_settings_free(r);
    config_set_defaults(r, config_redis_schema, RS_COUNT);
}

/* A host for hiredis: an IPv4 address or a DNS name (hiredis resolves it when it connects).
 * Digits and dots alone must be a whole dotted quad: getaddrinfo() would take "10.1" for
 * 10.0.0.1. */
bool config_is_host(const char *h)
{
    static const char name_chars[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                     "0123456789.-_";
    struct in_addr a;
    size_t n = strlen(h);
    if (n == 0 || n > 253 || strspn(h, name_chars) != n || h[0] == '.' || h[0] == '-')
        return false;
    return strspn(h, "0123456789.") != n || inet_pton(AF_INET, h, &a) == 1;
}

/* "HOST:PORT" or "[V6]:PORT", port 1..65535, into r's host (malloc'd, without brackets) and
 * port; r's unix_path is cleared. 0, TERN_EINVAL or TERN_ENOMEM. */
int config_redis_set_host_port(config_redis_t *r, const char *s)
{
    char host[256];
    const char *end, *port_text;
    uint16_t port;
    struct in6_addr a6;
    bool bracketed = s[0] == '[';
    if (bracketed) {
        end = strchr(s, ']');
        if (!end || end[1] != ':')
            return TERN_EINVAL;
        s++;
        port_text = end + 2;
    } else {
        end = strrchr(s, ':');
        if (!end || memchr(s, ':', (size_t)(end - s)))
            return TERN_EINVAL;
        port_text = end + 1;
    }
    size_t hl = (size_t)(end - s);
    if (hl >= sizeof(host))
        return TERN_EINVAL;
    memcpy(host, s, hl);
    host[hl] = '\0';
    if (!(bracketed ? inet_pton(AF_INET6, host, &a6) == 1 : config_is_host(host)) ||
        !config_parse_port(port_text, &port) || port == 0)
        return TERN_EINVAL;
    char *copy = strdup(host);
    if (!copy)
        return TERN_ENOMEM;
    free(r->host);
    free(r->unix_path);
    r->host = copy;
    r->unix_path = NULL;
    r->port = port;
    return 0;
}

/* The UNIX socket at path (resolved against the config's directory) for r; host and port are
 * cleared. Errors are "key: address: ...". */
int config_redis_set_unix(parse_ctx_t *pc, const yaml_node_t *n, const char *key, config_redis_t *r,
                          const char *path)
{
    char *copy = config_resolve_path(pc, path);
    if (!copy)
        return TERN_ENOMEM;
    size_t len = strlen(copy);
    if ((long long)len > SUN_PATH_MAX) {
        int rc =
            config_fail(pc, n, key, "address: \"%s\" is %zu bytes long, more than the %lld allowed",
                        copy, len, SUN_PATH_MAX);
        free(copy);
        return rc;
    }
    free(r->host);
    free(r->unix_path);
    r->host = NULL;
    r->port = 0;
    r->unix_path = copy;
    return 0;
}

/* tern's "address": "HOST:PORT", "[V6]:PORT", or an absolute path for a UNIX socket; null = the
 * default (127.0.0.1:6379). */
static int get_redis_address(parse_ctx_t *pc, const yaml_node_t *n, const char *key,
                             config_redis_t *r)
{
    static const char want[] = "HOST:PORT, [V6]:PORT or /path/of/redis.sock";
    if (is_null(n)) {
        free(r->host);
        free(r->unix_path);
        r->host = r->unix_path = NULL;
        r->port = 0;
        return 0;
    }
    if (!is_text(n))
        return config_fail(pc, n, key, "address: expected %s, got %s", want, config_node_kind(n));
    const char *s = scalar(n);
    if (s[0] == '/')
        return config_redis_set_unix(pc, n, key, r, s);
    int rc = config_redis_set_host_port(r, s);
    if (rc == TERN_EINVAL)
        return config_fail(pc, n, key, "address: bad address \"%s\" (want %s)", s, want);
    return rc;
}

/* One sentinel address: numeric "IP:PORT" or "[V6]:PORT" (a name would make every reconnect,
 * the moment a failover needs it, wait on DNS). */
static bool sentinel_addr_ok(const char *s)
{
    char host[INET6_ADDRSTRLEN + 2];
    struct in_addr a4;
    struct in6_addr a6;
    uint16_t port;
    const char *colon = strrchr(s, ':');
    if (!colon || (size_t)(colon - s) >= sizeof(host) || !config_parse_port(colon + 1, &port) ||
        !port)
        return false;
    memcpy(host, s, (size_t)(colon - s));
    host[colon - s] = '\0';
    size_t hl = strlen(host);
    if (host[0] == '[' && hl > 2 && host[hl - 1] == ']') {
        host[hl - 1] = '\0';
        return inet_pton(AF_INET6, host + 1, &a6) == 1;
    }
    return inet_pton(AF_INET, host, &a4) == 1;
}

/* tern's "sentinel": {addresses, master, password} into r; null = no Sentinel. */
static int get_redis_sentinel(parse_ctx_t *pc, const yaml_node_t *n, const char *key,
                              config_redis_t *r)
{
    static const opt_t master_row = {.key = "master", .type = OPT_STR, .min = 1, .max = 256};
    static const opt_t password_row = {
        .key = "password", .type = OPT_STR, .max = REDIS_STR_MAX, .empty_unsets = true};
    static const field_t fields[] = {
        {"addresses", "the sentinels, a list of \"IP:PORT\"", true, NULL},
        {"master", "the name the sentinels monitor", true, NULL},
        {"password", "AUTH to the sentinels", false, NULL},
    };
    const yaml_node_t *val[TERN_ARRAY_SIZE(fields)];
    char path[64];
    int rc;
    redis_settings_free_sentinels(r);
    free(r->sentinel_master);
    free(r->sentinel_password);
    r->sentinel_master = r->sentinel_password = NULL;
    if (is_null(n))
        return 0;
    snprintf(path, sizeof(path), "%s: sentinel", key);
    if ((rc = config_get_fields(pc, n, path, fields, TERN_ARRAY_SIZE(fields), val)) < 0)
        return rc;
    const yaml_node_t *a = val[0];
    size_t count = a->type == YAML_SEQUENCE_NODE
                       ? (size_t)(a->data.sequence.items.top - a->data.sequence.items.start)
                       : 0;
    if (a->type != YAML_SEQUENCE_NODE || count == 0 || count > CONFIG_REDIS_MAX_SENTINELS)
        return config_fail(pc, a, path, "addresses: expected a list of 1 to %d \"IP:PORT\", got %s",
                           CONFIG_REDIS_MAX_SENTINELS,
                           a->type == YAML_SEQUENCE_NODE ? "an empty list or a longer one"
                                                         : config_node_kind(a));
    if (!(r->sentinels = calloc(count, sizeof(*r->sentinels))))
        return TERN_ENOMEM;
    for (size_t i = 0; i < count; i++) {
        const yaml_node_t *e = node(pc, a->data.sequence.items.start[i]);
        if (!is_text(e) || !sentinel_addr_ok(scalar(e)))
            return config_fail(pc, e, path,
                               "addresses[%zu]: expected a numeric \"IP:PORT\" or \"[V6]:PORT\", "
                               "got %s%s%s",
                               i, is_text(e) ? "\"" : "",
                               is_text(e) ? scalar(e) : config_node_kind(e),
                               is_text(e) ? "\"" : "");
        for (size_t j = 0; j < i; j++)
            if (strcmp(r->sentinels[j], scalar(e)) == 0)
                return config_fail(pc, e, path, "addresses[%zu]: \"%s\" given twice", i, scalar(e));
        if (!(r->sentinels[i] = strdup(scalar(e))))
            return TERN_ENOMEM;
        r->nsentinels++;
    }
    if ((rc = config_get_str(pc, val[1], path, "master", &master_row, &r->sentinel_master)) < 0)
        return rc;
    if (!r->sentinel_master || strpbrk(r->sentinel_master, " \t\r\n"))
        return config_fail(pc, val[1], path, "master: expected the name Sentinel monitors, got %s",
                           r->sentinel_master ? "one with blanks" : "nothing");
    if (val[2] && (rc = config_get_str(pc, val[2], path, "password", &password_row,
                                       &r->sentinel_password)) < 0)
        return rc;
    return 0;
}

/* A tern Redis mapping (or null: no Redis) of the first nrows rows of config_redis_schema into
 * r, replacing every earlier setting. */
int config_get_redis(parse_ctx_t *pc, const yaml_node_t *n, const char *key, size_t nrows,
                     config_redis_t *r)
{
    field_t fields[RS_COUNT] = {{0}};
    const yaml_node_t *val[RS_COUNT];
    int rc;
    if (nrows > RS_COUNT)
        nrows = RS_COUNT;
    if (is_null(n)) {
        config_redis_reset(r);
        return 0;
    }
    /* the zone source's settings where only a connection is wanted (health's redis) */
    for (size_t j = nrows; n->type == YAML_MAPPING_NODE && j < RS_COUNT; j++) {
        const yaml_node_t *k = config_key_node(pc, n, config_redis_schema[j].key);
        if (k != n)
            return config_fail(pc, k, key,
                               "%s: not a key of %s (it sets the Redis zone source: give it in "
                               "the top-level redis)",
                               config_redis_schema[j].key, key);
    }
    for (size_t i = 0; i < nrows; i++)
        fields[i] = (field_t){config_redis_schema[i].key, config_redis_schema[i].desc, false, NULL};
    if ((rc = config_get_fields(pc, n, key, fields, nrows, val)) < 0)
        return rc;
    config_redis_reset(r);
    r->enabled = true;
    for (size_t i = 0; i < nrows; i++) {
        const opt_t *f = &config_redis_schema[i];
        if (!val[i])
            continue;
        if (i == RS_ADDRESS)
            rc = get_redis_address(pc, val[i], key, r);
        else if (i == RS_SENTINEL)
            rc = get_redis_sentinel(pc, val[i], key, r);
        else
            rc = config_get_row(pc, val[i], key, f, r);
        if (rc < 0)
            return rc;
    }
    if (r->nsentinels && val[RS_ADDRESS])
        return config_fail(pc, config_key_node(pc, n, "sentinel"), key,
                           "sentinel: and address (line %zu) are exclusive: Sentinel names the "
                           "node, give one of them",
                           line_of(config_key_node(pc, n, "address")));
    if (r->read_from == CONFIG_REDIS_READ_REPLICA && !r->nsentinels)
        return config_fail(pc, config_key_node(pc, n, "read_from"), key,
                           "read_from: replica needs sentinel: (the replicas are found through "
                           "Sentinel)");
    if (r->nsentinels) {
        free(r->host);
        r->host = NULL;
        r->port = 0;
    }
    return 0;
}

/* tern's "redis:" mapping (or null: no Redis). The mapping replaces every earlier setting. */
static int set_redis(parse_ctx_t *pc, const opt_t *o, const yaml_node_t *key_node,
                     const yaml_node_t *n)
{
    /* redins' keys here are a redins config's handler.redis moved up a level: say where they go */
    static const char *const redins_keys[] = {"ip", "port", "net", "connection"};
    for (size_t j = 0; n->type == YAML_MAPPING_NODE && j < TERN_ARRAY_SIZE(redins_keys); j++) {
        const yaml_node_t *k = config_key_node(pc, n, redins_keys[j]);
        if (k != n)
            return config_fail(pc, k, o->key,
                               "%s: is a key of redins' handler: redis, not of tern's redis (give "
                               "address: \"HOST:PORT\", or move the block under handler)",
                               redins_keys[j]);
    }
    return config_get_redis(pc, n, o->key, RS_COUNT, &pc->c->redis);
}

static void redis_reset(config_t *c)
{
    config_redis_reset(&c->redis);
}

static int redis_copy(config_t *dst, const config_t *src)
{
    memset(&dst->redis, 0, sizeof(dst->redis)); /* nothing of it is dst's yet */
    return redis_settings_copy(&dst->redis, &src->redis);
}

const conf_block_t config_redis_block = {
    .rows = config_redis_schema,
    .nrows = RS_COUNT,
    .parse = set_redis,
    .reset = redis_reset,
    .copy = redis_copy,
};
