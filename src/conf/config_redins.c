/*
 * config_redins.c — redins' config.json (arvancloud/redins) read as a tern config.
 *
 * A redins config is JSON, so it parses as YAML with everything else; this file maps its keys
 * onto config_t: "server" entries become listen addresses, "error_log" log_level/log_target,
 * "handler" the Redis source (its "redis" block, zone_reload, max_ttl, ...), "geoip" (in the
 * handler, or at the top level in older redins) geoip_db, "healthcheck" (in the handler, or
 * at the top level in older redins) health, "upstream" (in the handler, or at the top level
 * in older redins) the ANAME upstreams, and handler's "log" the request log (config_qlog.c, as
 * the top-level "log" of older redins). What redins has and tern does not is an error naming
 * the key, never silently ignored. The schema, the node helpers and the Redis settings both
 * "redis:" and "handler.redis" write live in config.c, health's rows in config_health.c, the
 * list of upstreams in config_aname.c (config_parse.h); nothing here holds state beyond one
 * config_load() call.
 */
#include <arpa/inet.h>
#include <limits.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>

#include "config_blocks.h"
#include "tern/common/err.h"

/* ---- server ------------------------------------------------------------------------------- */

/* redins "server": {ip, port, protocol}; the defaults of redins for ip and port are not taken
 * over (a config that names no address is a mistake here, see main.c), protocol's is. */
static const field_t server_fields[] = {
    {"ip", "IPv4 or IPv6 address", true, NULL},
    {"port", "0..65535", true, NULL},
    {"protocol", "udp or tcp, default udp", false, NULL},
};

static int add_server_item(parse_ctx_t *pc, const opt_t *o, const yaml_node_t *parent,
                           const yaml_node_t *n, size_t index)
{
    static const char *const protocols[] = {"udp", "tcp"};
    char key[64], text[sizeof(((config_listen_t *)0)->text)];
    const yaml_node_t *val[TERN_ARRAY_SIZE(server_fields)];
    long long port = 0;
    size_t proto = 0;
    config_listen_t e;
    int r;
    config_item_key(key, sizeof(key), o->key, parent, index);
    if ((r = config_get_fields(pc, n, key, server_fields, TERN_ARRAY_SIZE(server_fields), val)) < 0)
        return r;
    if (!is_text(val[0]) || scalar(val[0])[0] == '\0')
        return config_fail(pc, val[0], key, "ip: expected an address, got %s",
                           config_node_kind(val[0]));
    if ((r = config_get_int(pc, val[1], key, "port", 0, 65535, &port)) < 0)
        return r;
    if (val[2] && (r = config_get_enum(pc, val[2], key, "protocol", protocols, 2, &proto)) < 0)
        return r;
    const char *ip = scalar(val[0]);
    int k = snprintf(text, sizeof(text), strchr(ip, ':') ? "[%s]:%lld" : "%s:%lld", ip, port);
    if (k < 0 || (size_t)k >= sizeof(text) || config_parse_listen(&e, text) < 0)
        return config_fail(pc, val[0], key, "ip: bad address \"%s\"", ip);
    e.udp = proto == 0;
    e.tcp = proto == 1;
    return config_put_listen(pc, n, key, &e);
}

/* redins "server" at n: replaces the listen list. */
static int server_parse(parse_ctx_t *pc, const opt_t *o, const yaml_node_t *k, const yaml_node_t *n)
{
    pc->c->nlisten = 0;
    if (n->type != YAML_SEQUENCE_NODE && n->type != YAML_MAPPING_NODE)
        return config_fail(pc, n, o->key, "expected a list of {ip, port, protocol}, got %s",
                           config_node_kind(n));
    return config_each_item(pc, o, n, add_server_item);
}

/* ---- error_log ---------------------------------------------------------------------------- */

static const field_t error_log_fields[] = {
    {"enable", "true", false, NULL},
    {"level", "error, warning, info or debug", false, NULL},
    {"target", "stderr, stdout or syslog", false, NULL},
    {"format", "text", false, NULL},
    {"path", NULL, false, "log files; use target stderr, stdout or syslog"},
    {"time_format", NULL, false, "timestamps; the journal or syslog adds them"},
    {"sentry", NULL, false, "logging to Sentry"},
    {"syslog", NULL, false, "remote syslog; target syslog logs to the local one"},
    {"kafka", NULL, false, "logging to Kafka"},
};

/* redins "error_log" at n: log_level and log_target. */
static int error_log_parse(parse_ctx_t *pc, const opt_t *o, const yaml_node_t *k,
                           const yaml_node_t *n)
{
    const yaml_node_t *val[TERN_ARRAY_SIZE(error_log_fields)];
    size_t v = 0;
    bool enable;
    int r;
    r = config_get_fields(pc, n, o->key, error_log_fields, TERN_ARRAY_SIZE(error_log_fields), val);
    if (r < 0)
        return r;
    if (val[0]) {
        if ((r = config_get_bool(pc, val[0], o->key, "enable", &enable)) < 0)
            return r;
        if (!enable)
            return config_fail(pc, val[0], o->key,
                               "enable: false is not supported (errors are always "
                               "logged; level error logs the least)");
    }
    if (val[1]) {
        if ((r = config_get_enum(pc, val[1], o->key, "level", log_level_names, LOG_LVL_COUNT, &v)) <
            0)
            return r;
        pc->c->log_level = (log_level_t)v;
    }
    if (val[2]) {
        /* redins's other targets are refused with a reason rather than as unknown values */
        if (is_text(val[2]) &&
            (strcmp(scalar(val[2]), "file") == 0 || strcmp(scalar(val[2]), "udp") == 0))
            return config_fail(pc, val[2], o->key,
                               "target: \"%s\" is not supported yet (use stderr, stdout or syslog)",
                               scalar(val[2]));
        r = config_get_enum(pc, val[2], o->key, "target", log_target_names, LOG_TARGET_COUNT, &v);
        if (r < 0)
            return r;
        pc->c->log_target = (log_target_t)v;
    }
    if (val[3] && (!is_text(val[3]) || strcmp(scalar(val[3]), "text") != 0)) {
        if (val[3]->type == YAML_SCALAR_NODE)
            return config_fail(pc, val[3], o->key, "format: only \"text\" is supported, got \"%s\"",
                               scalar(val[3]));
        return config_fail(pc, val[3], o->key, "format: only \"text\" is supported, got %s",
                           config_node_kind(val[3]));
    }
    return 0;
}

/* ---- handler.redis ------------------------------------------------------------------------ */

/* An IPv6 address (unbracketed), or what config_is_host() accepts. */
static bool is_ip_or_host(const char *h)
{
    struct in6_addr a6;
    return strchr(h, ':') ? inet_pton(AF_INET6, h, &a6) == 1 : config_is_host(h);
}

/* handler.redis: redins' Redis layer (redigo, later hawell/uperdis); versions differ, the union
 * is accepted. 0 timeouts meant "none" there and mean the source's defaults here. */
enum {
    RR_IP,
    RR_PORT,
    RR_ADDRESS,
    RR_NET,
    RR_DB,
    RR_PASSWORD,
    RR_PREFIX,
    RR_SUFFIX,
    RR_CONNECT_TIMEOUT,
    RR_READ_TIMEOUT,
    RR_CONNECTION,
    RR_COUNT
};

static const field_t redins_redis_fields[RR_COUNT] = {
    [RR_IP] = {"ip", "the server's address, default 127.0.0.1", false, NULL},
    [RR_PORT] = {"port", "1..65535, default 6379", false, NULL},
    [RR_ADDRESS] = {"address", "HOST:PORT, or with net unix the socket's path", false, NULL},
    [RR_NET] = {"net", "tcp or unix", false, NULL},
    [RR_DB] = {"db", "0..1023", false, NULL},
    [RR_PASSWORD] = {"password", "AUTH password", false, NULL},
    [RR_PREFIX] = {"prefix", "key prefix", false, NULL},
    [RR_SUFFIX] = {"suffix", "key suffix", false, NULL},
    [RR_CONNECT_TIMEOUT] = {"connect_timeout", "milliseconds", false, NULL},
    [RR_READ_TIMEOUT] = {"read_timeout", "milliseconds", false, NULL},
    [RR_CONNECTION] = {"connection", "uperdis' pool settings and timeouts", false, NULL},
};

/* uperdis' "connection": a pool of connections. The source keeps one command connection (and
 * one subscriber), so the pool's sizes, keep-alives and wait_for_connection have nothing to act
 * on: they are type-checked and ignored. Its timeouts are redis's own. */
enum {
    RC_MAX_IDLE,
    RC_MAX_ACTIVE,
    RC_CONNECT_TIMEOUT,
    RC_READ_TIMEOUT,
    RC_IDLE_KEEP_ALIVE,
    RC_MAX_KEEP_ALIVE,
    RC_WAIT,
    RC_COUNT
};

static const field_t redins_connection_fields[RC_COUNT] = {
    [RC_MAX_IDLE] = {"max_idle_connections", "ignored", false, NULL},
    [RC_MAX_ACTIVE] = {"max_active_connections", "ignored", false, NULL},
    [RC_CONNECT_TIMEOUT] = {"connect_timeout", "milliseconds", false, NULL},
    [RC_READ_TIMEOUT] = {"read_timeout", "milliseconds", false, NULL},
    [RC_IDLE_KEEP_ALIVE] = {"idle_keep_alive", "ignored", false, NULL},
    [RC_MAX_KEEP_ALIVE] = {"max_keep_alive", "ignored", false, NULL},
    [RC_WAIT] = {"wait_for_connection", "ignored", false, NULL},
};

/* A timeout of handler.redis or its connection into *out. */
static int get_timeout(parse_ctx_t *pc, const yaml_node_t *n, const char *key, const char *field,
                       unsigned *out)
{
    long long v = 0;
    int rc = config_get_int(pc, n, key, field, 0, REDIS_TIMEOUT_MAX, &v);
    if (rc == 0)
        *out = (unsigned)v;
    return rc;
}

/* rkey names the redis block ("handler: redis"), whose fields are rval. */
static int set_redins_connection(parse_ctx_t *pc, const yaml_node_t *n, const char *rkey,
                                 const yaml_node_t **rval, config_redis_t *r)
{
    char key[96];
    const yaml_node_t *val[RC_COUNT];
    long long v;
    bool b;
    int rc;
    snprintf(key, sizeof(key), "%s: connection", rkey);
    if ((rc = config_get_fields(pc, n, key, redins_connection_fields, RC_COUNT, val)) < 0)
        return rc;
    for (size_t i = 0; i < RC_COUNT; i++) {
        const char *f = redins_connection_fields[i].key;
        if (!val[i])
            continue;
        if (i == RC_CONNECT_TIMEOUT || i == RC_READ_TIMEOUT) {
            const yaml_node_t *outer =
                rval[i == RC_CONNECT_TIMEOUT ? RR_CONNECT_TIMEOUT : RR_READ_TIMEOUT];
            if (outer)
                return config_fail(pc, val[i], key, "%s: given twice (also %s: %s at line %zu)", f,
                                   rkey, f, line_of(outer));
            rc =
                get_timeout(pc, val[i], key, f,
                            i == RC_CONNECT_TIMEOUT ? &r->connect_timeout_ms : &r->read_timeout_ms);
        } else if (i == RC_WAIT) {
            rc = config_get_bool(pc, val[i], key, f, &b);
        } else {
            rc = config_get_int(pc, val[i], key, f, 0, INT32_MAX, &v);
        }
        if (rc < 0)
            return rc;
    }
    return 0;
}

/* handler.redis' ip and port, given apart (each defaults to the source's own). */
static int set_redins_ip_port(parse_ctx_t *pc, const char *key, const yaml_node_t *ip,
                              const yaml_node_t *port, config_redis_t *r)
{
    long long v = 0;
    int rc;
    if (ip) {
        if (!is_text(ip) || scalar(ip)[0] == '\0')
            return config_fail(pc, ip, key, "ip: expected an address, got %s",
                               config_node_kind(ip));
        if (!is_ip_or_host(scalar(ip)))
            return config_fail(pc, ip, key, "ip: bad address \"%s\"", scalar(ip));
        if (!(r->host = strdup(scalar(ip))))
            return TERN_ENOMEM;
    }
    if (port) {
        if ((rc = config_get_int(pc, port, key, "port", 1, 65535, &v)) < 0)
            return rc;
        r->port = (uint16_t)v;
    }
    return 0;
}

/* handler.redis' net, address, ip and port: where Redis is. A UNIX socket (net: unix, or an
 * address that is a path), "HOST:PORT" in address, or ip and port apart; never two of them. */
static int set_redins_endpoint(parse_ctx_t *pc, const char *key, const yaml_node_t **val,
                               config_redis_t *r)
{
    static const char *const nets[] = {"tcp", "unix"};
    const yaml_node_t *addr = val[RR_ADDRESS], *ip = val[RR_IP], *port = val[RR_PORT];
    size_t net = 0;
    int rc;
    if (addr && (!is_text(addr) || scalar(addr)[0] == '\0'))
        return config_fail(pc, addr, key, "address: expected a non-empty string, got %s",
                           config_node_kind(addr));
    if (val[RR_NET] && (rc = config_get_enum(pc, val[RR_NET], key, "net", nets, 2, &net)) < 0)
        return rc;
    if (!val[RR_NET] && addr && scalar(addr)[0] == '/')
        net = 1; /* a path is a UNIX socket, whatever else net would say */
    if (net == 1) {
        if (ip || port)
            return config_fail(pc, ip ? ip : port, key,
                               "%s: not used with a UNIX socket (net: unix)", ip ? "ip" : "port");
        if (!addr)
            return config_fail(pc, val[RR_NET], key, "net: unix needs address, the socket's path");
        return config_redis_set_unix(pc, addr, key, r, scalar(addr));
    }
    if (!addr)
        return set_redins_ip_port(pc, key, ip, port, r);
    if (ip || port)
        return config_fail(pc, addr, key, "address: give address or ip and port, not both");
    rc = config_redis_set_host_port(r, scalar(addr));
    if (rc == TERN_EINVAL)
        return config_fail(pc, addr, key,
                           "address: bad address \"%s\" (want HOST:PORT or [V6]:PORT, or net: "
                           "unix and the socket's path)",
                           scalar(addr));
    return rc;
}

/* A redins redis block (handler.redis, healthcheck.redis) named key at n into r, over what r
 * holds (the caller resets it). */
static int set_redins_redis(parse_ctx_t *pc, const yaml_node_t *n, const char *key,
                            config_redis_t *r)
{
    const yaml_node_t *val[RR_COUNT];
    long long v = 0;
    int rc;
    if ((rc = config_get_fields(pc, n, key, redins_redis_fields, RR_COUNT, val)) < 0)
        return rc;
    if ((rc = set_redins_endpoint(pc, key, val, r)) < 0)
        return rc;
    if (val[RR_DB]) {
        if ((rc = config_get_int(pc, val[RR_DB], key, "db", 0, CONFIG_REDIS_MAX_DB, &v)) < 0)
            return rc;
        r->db = (unsigned)v;
    }
    static const int strs[][2] = {
        {RR_PASSWORD, RS_PASSWORD}, {RR_PREFIX, RS_PREFIX}, {RR_SUFFIX, RS_SUFFIX}};
    for (size_t i = 0; i < TERN_ARRAY_SIZE(strs); i++) {
        const opt_t *f = &config_redis_schema[strs[i][1]];
        const yaml_node_t *x = val[strs[i][0]];
        if (x && (rc = config_get_str(pc, x, key, f->key, f,
                                      (char **)(void *)((char *)r + f->offset))) < 0)
            return rc;
    }
    if (val[RR_CONNECT_TIMEOUT] &&
        (rc = get_timeout(pc, val[RR_CONNECT_TIMEOUT], key, "connect_timeout",
                          &r->connect_timeout_ms)) < 0)
        return rc;
    if (val[RR_READ_TIMEOUT] &&
        (rc = get_timeout(pc, val[RR_READ_TIMEOUT], key, "read_timeout", &r->read_timeout_ms)) < 0)
        return rc;
    if (val[RR_CONNECTION])
        return set_redins_connection(pc, val[RR_CONNECTION], key, val, r);
    return 0;
}

/* ---- geoip -------------------------------------------------------------------------------- */

/* redins' geoip (handler.geoip, or the top-level geoip of older versions) at n, whose key node
 * is k; key names it in errors, asn_key its asn_db. enable false, or left out (redins' default),
 * uses no database at all, as in redins; enable true needs one of them (redins opened both and
 * used what it could). */
enum { G_ENABLE, G_DB, G_COUNTRY_DB, G_ASN_DB, G_COUNT };

static const field_t redins_geoip_fields[G_COUNT] = {
    [G_ENABLE] = {"enable", "true or false, default false", false, NULL},
    [G_DB] = {"db", "the MaxMind DB file", false, NULL},
    [G_COUNTRY_DB] = {"country_db", "the MaxMind DB file (newer redins' name for db)", false, NULL},
    [G_ASN_DB] = {"asn_db", "a MaxMind ASN DB", false, NULL},
};

/* *field = *path, once claim allows the key at k to set it. */
static int put_claimed(parse_ctx_t *pc, int claim, const yaml_node_t *k, const char *key,
                       char **path, char **field)
{
    int rc = config_claim(pc, claim, k, key);
    if (rc < 0)
        return rc;
    free(*field);
    *field = *path;
    *path = NULL;
    return 0;
}

static int set_redins_geoip(parse_ctx_t *pc, const yaml_node_t *k, const yaml_node_t *n,
                            const char *key, const char *asn_key)
{
    /* geoip_db's and asn_db's own rows: a path resolved against the config's directory; "" = not
     * given */
    static const opt_t db_opt = {
        .type = OPT_PATH, .min = 1, .max = PATH_MAX - 1, .empty_unsets = true};
    const yaml_node_t *val[G_COUNT];
    char *path[G_COUNT] = {NULL};
    bool enable = false;
    int rc;
    if ((rc = config_get_fields(pc, n, key, redins_geoip_fields, G_COUNT, val)) < 0)
        return rc;
    if (val[G_ENABLE] && (rc = config_get_bool(pc, val[G_ENABLE], key, "enable", &enable)) < 0)
        return rc;
    for (size_t i = G_DB; i < G_COUNT; i++)
        if (val[i] && (rc = config_get_str(pc, val[i], key, redins_geoip_fields[i].key, &db_opt,
                                           &path[i])) < 0)
            goto out;
    if (path[G_DB] && path[G_COUNTRY_DB]) {
        rc = config_fail(pc, val[G_COUNTRY_DB], key, "country_db: give db or country_db, not both");
        goto out;
    }
    if (!enable)
        goto out;
    size_t which = path[G_DB] ? G_DB : G_COUNTRY_DB;
    if (!path[which] && !path[G_ASN_DB]) {
        rc = config_fail(pc, val[G_ENABLE], key,
                         "enable: true needs db, country_db or asn_db (a MaxMind DB)");
        goto out;
    }
    if (path[which] &&
        (rc = put_claimed(pc, CLAIM_GEOIP_DB, k, key, &path[which], &pc->c->geoip_db)) < 0)
        goto out;
    /* asn_db's own line: the database, not the block, is what a direct asn_db competes with */
    if (path[G_ASN_DB])
        rc = put_claimed(pc, CLAIM_ASN_DB, config_key_node(pc, n, "asn_db"), asn_key,
                         &path[G_ASN_DB], &pc->c->asn_db);
out:
    for (size_t i = 0; i < G_COUNT; i++)
        free(path[i]);
    return rc;
}

/* Older redins' top-level "geoip" at n, whose key node is k. */
static int geoip_parse(parse_ctx_t *pc, const opt_t *o, const yaml_node_t *k, const yaml_node_t *n)
{
    return set_redins_geoip(pc, k, n, o->key, "geoip: asn_db");
}

/* ---- healthcheck -------------------------------------------------------------------------- */

/* redins' README defaults for what its healthcheck block leaves out (enable's is false: no
 * checks). update_interval's default is health's own (600 s, redins' config.json value). */
#define REDINS_HC_MAX_REQUESTS   10
#define REDINS_HC_CHECK_INTERVAL 600 /* seconds */

enum {
    RH_ENABLE,
    RH_MAX_REQUESTS,
    RH_MAX_PENDING,
    RH_UPDATE_INTERVAL,
    RH_CHECK_INTERVAL,
    RH_REDIS,
    RH_LOG,
    RH_COUNT
};

/* desc: what config_schema_print() says each maps to. */
static const field_t healthcheck_fields[RH_COUNT] = {
    [RH_ENABLE] = {"enable", "into health: enable; default false (no checks), as in redins", false,
                   NULL},
    [RH_MAX_REQUESTS] = {"max_requests", "into health: max_requests (1..100000); default 10", false,
                         NULL},
    [RH_MAX_PENDING] = {"max_pending_requests",
                        "accepted and kept: tern's checker has no queue for it to bound", false,
                        NULL},
    [RH_UPDATE_INTERVAL] = {"update_interval", "into health: update_interval (s); default 600",
                            false, NULL},
    [RH_CHECK_INTERVAL] = {"check_interval",
                           "seconds (1..86400), into health: check_interval_ms; default 600", false,
                           NULL},
    [RH_REDIS] = {"redis", "as handler's redis, into health: redis; default 127.0.0.1:6379", false,
                  NULL},
    [RH_LOG] = {"log", "{enable, level (ignored), target: file|stdout|stderr, format, path}", false,
                NULL},
};

/* redins' logger settings (its "log" blocks). One check result is one line whatever the level,
 * and the lines go to a file or a standard stream: the rest is refused, saying why. */
enum {
    RL_ENABLE,
    RL_LEVEL,
    RL_TARGET,
    RL_FORMAT,
    RL_PATH,
    RL_TIME_FORMAT,
    RL_SENTRY,
    RL_SYSLOG,
    RL_KAFKA,
    RL_COUNT
};

static const field_t redins_log_fields[RL_COUNT] = {
    [RL_ENABLE] = {"enable", "true or false, default false", false, NULL},
    [RL_LEVEL] = {"level", "ignored: every check result is one line", false, NULL},
    [RL_TARGET] = {"target", "file, stdout or stderr, default stdout", false, NULL},
    [RL_FORMAT] = {"format", "json or text, default text", false, NULL},
    [RL_PATH] = {"path", "the file of target file", false, NULL},
    [RL_TIME_FORMAT] = {"time_format", NULL, false, "timestamps: every line carries tern's own"},
    [RL_SENTRY] = {"sentry", NULL, false,
                   "logging to Sentry: check results go to a file or a standard stream"},
    [RL_SYSLOG] = {"syslog", NULL, false,
                   "logging to syslog: check results go to a file or a standard stream"},
    [RL_KAFKA] = {"kafka", NULL, false,
                  "logging to Kafka: check results go to a file or a standard stream"},
};

/* healthcheck.log (named key) at n into h's log settings; redins' defaults: off, stdout, text. */
static int set_redins_health_log(parse_ctx_t *pc, const yaml_node_t *n, const char *key,
                                 config_health_t *h)
{
    /* health's own path row: resolved against the config's directory; "" = none */
    static const opt_t path_opt = {
        .type = OPT_PATH, .min = 1, .max = PATH_MAX - 1, .empty_unsets = true};
    const yaml_node_t *val[RL_COUNT];
    char *path = NULL;
    size_t v = 0;
    int rc;
    if ((rc = config_get_fields(pc, n, key, redins_log_fields, RL_COUNT, val)) < 0)
        return rc;
    h->log_enabled = false;
    h->log_target = CONFIG_HEALTH_LOG_STDOUT;
    h->log_json = false;
    if (val[RL_ENABLE] &&
        (rc = config_get_bool(pc, val[RL_ENABLE], key, "enable", &h->log_enabled)) < 0)
        return rc;
    if (val[RL_LEVEL] && (rc = config_get_enum(pc, val[RL_LEVEL], key, "level", log_level_names,
                                               LOG_LVL_COUNT, &v)) < 0)
        return rc;
    if (val[RL_TARGET]) {
        static const char *const elsewhere[] = {"udp", "syslog", "kafka", "sentry"};
        for (size_t i = 0; is_text(val[RL_TARGET]) && i < TERN_ARRAY_SIZE(elsewhere); i++)
            if (strcmp(scalar(val[RL_TARGET]), elsewhere[i]) == 0)
                return config_fail(pc, val[RL_TARGET], key,
                                   "target: \"%s\" is not supported (check results go to a file, "
                                   "stdout or stderr)",
                                   elsewhere[i]);
        if ((rc = config_get_enum(pc, val[RL_TARGET], key, "target", config_health_log_targets,
                                  TERN_ARRAY_SIZE(config_health_log_targets), &v)) < 0)
            return rc;
        h->log_target = (unsigned)v;
    }
    if (val[RL_FORMAT]) {
        if ((rc = config_get_enum(pc, val[RL_FORMAT], key, "format", config_health_log_formats,
                                  TERN_ARRAY_SIZE(config_health_log_formats), &v)) < 0)
            return rc;
        h->log_json = v == 0;
    }
    if (val[RL_PATH] && (rc = config_get_str(pc, val[RL_PATH], key, "path", &path_opt, &path)) < 0)
        return rc;
    /* redins' logger only opens the path of target file; elsewhere it is left unused */
    if (h->log_target != CONFIG_HEALTH_LOG_FILE) {
        free(path);
        return 0;
    }
    if (!path && h->log_enabled)
        return config_fail(pc, val[RL_TARGET], key, "target: file needs path, the log file");
    free(h->log_path);
    h->log_path = path;
    return 0;
}

/* A redins healthcheck block named key at n: every health setting, from redins' defaults. */
static int set_redins_health(parse_ctx_t *pc, const yaml_node_t *n, const char *key)
{
    const opt_t *rows = config_health_schema;
    config_health_t *h = &pc->c->health;
    const yaml_node_t *val[RH_COUNT];
    char sub[64];
    long long v = 0;
    int rc;
    if ((rc = config_get_fields(pc, n, key, healthcheck_fields, RH_COUNT, val)) < 0)
        return rc;
    config_health_reset(h);
    h->max_requests = REDINS_HC_MAX_REQUESTS;
    h->check_interval_ms = REDINS_HC_CHECK_INTERVAL * 1000;
    /* redins' checker always kept its states in Redis: its defaults are the source's */
    h->redis.enabled = true;
    if (val[RH_ENABLE] &&
        (rc = config_get_bool(pc, val[RH_ENABLE], key, "enable", &h->enabled)) < 0)
        return rc;
    if (val[RH_MAX_REQUESTS]) {
        const opt_t *o = &rows[HS_MAX_REQUESTS];
        if ((rc = config_get_int(pc, val[RH_MAX_REQUESTS], key, "max_requests", o->min, o->max,
                                 &v)) < 0)
            return rc;
        h->max_requests = (unsigned)v;
    }
    if (val[RH_MAX_PENDING]) {
        if ((rc = config_get_int(pc, val[RH_MAX_PENDING], key, "max_pending_requests", 0, INT32_MAX,
                                 &v)) < 0)
            return rc;
        h->max_pending = (unsigned)v;
    }
    if (val[RH_UPDATE_INTERVAL]) {
        const opt_t *o = &rows[HS_UPDATE_INTERVAL];
        if ((rc = config_get_int(pc, val[RH_UPDATE_INTERVAL], key, "update_interval", o->min,
                                 o->max, &v)) < 0)
            return rc;
        h->update_interval_s = (unsigned)v;
    }
    if (val[RH_CHECK_INTERVAL]) {
        /* seconds, within health's bounds in milliseconds (100 ms .. a day: 1 s .. a day) */
        const opt_t *o = &rows[HS_CHECK_INTERVAL];
        if ((rc = config_get_int(pc, val[RH_CHECK_INTERVAL], key, "check_interval",
                                 (o->min + 999) / 1000, o->max / 1000, &v)) < 0)
            return rc;
        h->check_interval_ms = (unsigned)(v * 1000);
    }
    snprintf(sub, sizeof(sub), "%s: redis", key);
    if (val[RH_REDIS] && (rc = set_redins_redis(pc, val[RH_REDIS], sub, &h->redis)) < 0)
        return rc;
    snprintf(sub, sizeof(sub), "%s: log", key);
    if (val[RH_LOG])
        return set_redins_health_log(pc, val[RH_LOG], sub, h);
    return 0;
}

/* Older redins' top-level "healthcheck" at n: replaces every health setting, with redins'
 * defaults. */
static int healthcheck_parse(parse_ctx_t *pc, const opt_t *o, const yaml_node_t *k,
                             const yaml_node_t *n)
{
    return set_redins_health(pc, n, o->key);
}

/* ---- upstream ----------------------------------------------------------------------------- */

/* Older redins' top-level upstream: the list handler.upstream became (a single object in some
 * versions). redins asked these for ANAME targets, and forwarded to them with
 * upstream_fallback; tern does the first only. */
static int upstream_parse(parse_ctx_t *pc, const opt_t *o, const yaml_node_t *k,
                          const yaml_node_t *n)
{
    return config_get_upstreams(pc, n, o->key, true, &pc->c->aname);
}

/* ---- handler ------------------------------------------------------------------------------ */

enum {
    H_REDIS,
    H_ZONE_RELOAD,
    H_MAX_TTL,
    H_DEFAULT_TTL,
    H_CACHE_TIMEOUT,
    H_LOG_SOURCE_LOCATION,
    H_UPSTREAM_FALLBACK,
    H_GEOIP,
    H_HEALTHCHECK,
    H_LOG,
    H_UPSTREAM,
    H_COUNT
};

/* desc: what config_schema_print() says each maps to. */
static const field_t handler_fields[H_COUNT] = {
    [H_REDIS] = {"redis",
                 "{ip, port | address, net: tcp|unix, db, password, prefix, suffix, "
                 "*_timeout, connection}, into redis",
                 false, NULL},
    [H_ZONE_RELOAD] = {"zone_reload", "into redis: zone_reload (1..604800 s)", false, NULL},
    [H_MAX_TTL] = {"max_ttl", "into redis: max_ttl, and default_ttl unless that is given", false,
                   NULL},
    [H_DEFAULT_TTL] = {"default_ttl", "(older redins) into redis: default_ttl", false, NULL},
    [H_CACHE_TIMEOUT] = {"cache_timeout", "ignored: every zone is kept in memory, no cache", false,
                         NULL},
    [H_LOG_SOURCE_LOCATION] = {"log_source_location", "ignored: it only adds to the event log",
                               false, NULL},
    [H_UPSTREAM_FALLBACK] = {"upstream_fallback",
                             "false only: tern never forwards a client's query (an open resolver "
                             "is an amplifier)",
                             false, NULL},
    [H_GEOIP] = {"geoip", "{enable, db | country_db, asn_db}, into geoip_db and asn_db", false,
                 NULL},
    [H_HEALTHCHECK] = {"healthcheck",
                       "{enable, max_requests, ..., redis, log}, into health: as "
                       "healthcheck below",
                       false, NULL},
    [H_LOG] = {"log",
               "{enable, level, target, format, path, ...}, the request log, into query_log: "
               "requests: as log below",
               false, NULL},
    [H_UPSTREAM] = {"upstream",
                    "list of {ip, port: 53, protocol: udp|tcp, timeout: 400 ms}, into aname: "
                    "upstreams (asked for ANAME targets only)",
                    false, NULL},
};

/* redins' handler: answering from Redis, so a handler block enables the Redis source even
 * without a redis mapping (redins' defaults are the source's: 127.0.0.1:6379, db 0). */
static int handler_parse(parse_ctx_t *pc, const opt_t *o, const yaml_node_t *k,
                         const yaml_node_t *n)
{
    config_redis_t *r = &pc->c->redis;
    const yaml_node_t *val[H_COUNT];
    long long v = 0;
    bool b = false;
    int rc;
    if ((rc = config_get_fields(pc, n, o->key, handler_fields, H_COUNT, val)) < 0)
        return rc;
    config_redis_reset(r);
    r->enabled = true;
    if (val[H_REDIS] && (rc = set_redins_redis(pc, val[H_REDIS], "handler: redis", r)) < 0)
        return rc;
    if (val[H_ZONE_RELOAD]) {
        if ((rc = config_get_int(pc, val[H_ZONE_RELOAD], o->key, "zone_reload", 1, ZONE_RELOAD_MAX,
                                 &v)) < 0)
            return rc;
        r->zone_reload_s = (unsigned)v;
    }
    if (val[H_DEFAULT_TTL]) {
        if ((rc = config_get_int(pc, val[H_DEFAULT_TTL], o->key, "default_ttl", 0, TTL_MAX, &v)) <
            0)
            return rc;
        r->default_ttl = (uint32_t)v;
    }
    /* redins' getTtl(): an RRset without a TTL gets max_ttl, any other is capped at it */
    if (val[H_MAX_TTL]) {
        if ((rc = config_get_int(pc, val[H_MAX_TTL], o->key, "max_ttl", 0, TTL_MAX, &v)) < 0)
            return rc;
        r->max_ttl = (uint32_t)v;
        if (!val[H_DEFAULT_TTL])
            r->default_ttl = (uint32_t)v;
    }
    if (val[H_CACHE_TIMEOUT] && (rc = config_get_int(pc, val[H_CACHE_TIMEOUT], o->key,
                                                     "cache_timeout", 0, INT32_MAX, &v)) < 0)
        return rc;
    if (val[H_LOG_SOURCE_LOCATION] && (rc = config_get_bool(pc, val[H_LOG_SOURCE_LOCATION], o->key,
                                                            "log_source_location", &b)) < 0)
        return rc;
    if (val[H_UPSTREAM_FALLBACK]) {
        if ((rc = config_get_bool(pc, val[H_UPSTREAM_FALLBACK], o->key, "upstream_fallback", &b)) <
            0)
            return rc;
        /* redins forwarded every query outside its zones to the upstreams, recursion
         * available: anyone could use the server as a resolver */
        if (b)
            return config_fail(pc, val[H_UPSTREAM_FALLBACK], o->key,
                               "upstream_fallback: true is not supported: forwarding every query "
                               "tern is not authoritative for would make it an open resolver (a "
                               "reflection and amplification tool, and a cache-poisoning target); "
                               "tern asks upstreams only for ANAME targets");
    }
    if (val[H_UPSTREAM]) {
        static const char ukey[] = "handler: upstream";
        if ((rc = config_claim(pc, CLAIM_ANAME, config_key_node(pc, n, "upstream"), ukey)) < 0 ||
            (rc = config_get_upstreams(pc, val[H_UPSTREAM], ukey, true, &pc->c->aname)) < 0)
            return rc;
    }
    if (val[H_LOG]) {
        static const char lkey[] = "handler: log";
        if ((rc = config_claim(pc, CLAIM_REQLOG, config_key_node(pc, n, "log"), lkey)) < 0 ||
            (rc = config_get_redins_log(pc, val[H_LOG], lkey)) < 0)
            return rc;
    }
    if (val[H_GEOIP] && (rc = set_redins_geoip(pc, config_key_node(pc, n, "geoip"), val[H_GEOIP],
                                               "handler: geoip", "handler: geoip: asn_db")) < 0)
        return rc;
    if (val[H_HEALTHCHECK]) {
        static const char hkey[] = "handler: healthcheck";
        if ((rc = config_claim(pc, CLAIM_HEALTH, config_key_node(pc, n, "healthcheck"), hkey)) < 0)
            return rc;
        return set_redins_health(pc, val[H_HEALTHCHECK], hkey);
    }
    return 0;
}

static void handler_print(FILE *out, int depth)
{
    config_print_fields(out, depth, handler_fields, H_COUNT);
}

static void healthcheck_print(FILE *out, int depth)
{
    config_print_fields(out, depth, healthcheck_fields, RH_COUNT);
}

/* ---- the blocks: each fills settings other blocks own (and reset, copy and free) ----------- */

const conf_block_t config_server_block = {.parse = server_parse};
const conf_block_t config_error_log_block = {.parse = error_log_parse};
const conf_block_t config_handler_block = {.parse = handler_parse, .print = handler_print};
const conf_block_t config_geoip_block = {.parse = geoip_parse};
const conf_block_t config_healthcheck_block = {.parse = healthcheck_parse,
                                               .print = healthcheck_print};
const conf_block_t config_upstream_block = {.parse = upstream_parse};
