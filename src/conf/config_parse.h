/*
 * config_parse.h — private to src/conf: what the schema machinery (config.c) and the redins
 * translation (config_redins.c) share to parse one config file.
 *
 * config.c owns the schema rows (opt_t), the YAML node helpers that turn a node into a checked
 * value or a "file:line: key: message" error, and the Redis settings both tern's "redis:" and
 * redins' "handler.redis" write. config_health.c owns tern's "health:" block (its rows, its
 * checks) and config_health_t's defaults and copies. config_limit.c owns the flood-resistance
 * blocks ("acl:", a zone's "acl:", "ratelimit:", "rrl:", "cookies:"), their prefix lists and
 * their defaults and copies. config_aname.c owns "aname:" (the upstreams that resolve ANAME
 * targets), the list of upstreams that redins' "upstream" blocks fill too, and config_aname_t's
 * defaults, copies and comparison. config_qlog.c owns "query_log:" (dnstap and the request
 * log), the request-log settings that redins' "log" blocks (top level and handler's) fill too,
 * and config_qlog_t's defaults, copies and comparison. config_redins.c owns the mapping of
 * redins' config.json keys (server, error_log, handler, geoip, healthcheck, upstream) onto
 * config_t, and only calls in here. Nothing outside src/conf includes this header (it is not
 * installed).
 *
 * Lifecycle and threading: a parse_ctx_t lives for one config_load() call, on the caller's
 * thread; the libyaml document and every node pointer here die with that call.
 */
#ifndef TERN_CONF_CONFIG_PARSE_H
#define TERN_CONF_CONFIG_PARSE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/un.h>
#include <yaml.h>

#include "tern/common/compiler.h"
#include "tern/conf/config.h"
#include "tern/wire/rr.h"

typedef enum {
    OPT_UINT,      /* plain integer in [min, max], stored in a field of `size` bytes */
    OPT_BOOL,      /* plain true / false */
    OPT_ENUM,      /* one of `names` (any scalar style); the index is stored like OPT_UINT */
    OPT_STR,       /* any scalar of min..max bytes; plain null, ~ or empty = unset (NULL) */
    OPT_PATH,      /* OPT_STR resolved against the config file's directory; max bounds the result */
    OPT_ADDR,      /* OPT_STR that config_parse_listen() accepts */
    OPT_WORKERS,   /* OPT_UINT or the string "auto" */
    OPT_LISTEN,    /* a listen entry or a sequence of them */
    OPT_ZONES,     /* a sequence of {origin, file} mappings */
    OPT_SERVER,    /* redins: {ip, port, protocol} or a sequence of them, into listen */
    OPT_ERROR_LOG, /* redins: {enable, level, target, format}, into log_level and log_target */
    OPT_REDIS,     /* a mapping of config_redis_schema's keys into redis, or null for no Redis */
    OPT_REDIS_ADDR, /* config_redis_schema: "HOST:PORT", "[V6]:PORT" or an absolute socket path */
    OPT_HANDLER,    /* redins: {redis, zone_reload, max_ttl, geoip, ...}, into redis and geoip_db */
    OPT_GEOIP,      /* redins (older, top level): {enable, db}, into geoip_db */
    OPT_HEALTH,     /* a mapping of config_health_schema's keys into health, or null for none */
    OPT_HEALTHCHECK,   /* redins (older, top level): {enable, max_requests, ...}, into health */
    OPT_ACL,           /* a mapping of config_acl_schema's keys into acl, or null for none */
    OPT_RATELIMIT,     /* tern's and redins' "ratelimit": config_ratelimit_schema's keys */
    OPT_RRL,           /* a mapping of config_rrl_schema's keys into rrl, or null for none */
    OPT_COOKIES,       /* a mapping of config_cookies_schema's keys into cookies, or null */
    OPT_ANAME,         /* a mapping of config_aname_schema's keys into aname, or null for none */
    OPT_UPSTREAM,      /* redins (older, top level): a list of {ip, port, protocol, timeout} into
                          aname */
    OPT_QUERY_LOG,     /* a mapping of config_qlog_schema's keys into qlog, or null for none */
    OPT_REDINS_LOG,    /* redins (older, top level): its request log {enable, level, target, ...}
                          into qlog's requests */
    OPT_TSIG_KEYS,     /* a list of {name, algorithm, secret}, appended to tsig_keys */
    OPT_TSIG_KEY_FILE, /* a BIND key file or a list of them, appended to tsig_keys */
    OPT_CUSTOM,        /* a nested value with a parser of its own (health's log, checks, a check's
                          address and expect): the row names and describes it, its owner parses it */
    OPT_LATER,         /* a redins key tern does not implement yet: always an error saying so */
} opt_type_t;

/* Options that set the same fields share a group; a redins option and any other option of its
 * group may not both appear in one file (which one would win is a guess we refuse to make). */
enum { GROUP_NONE = 0, GROUP_LISTEN, GROUP_LOG, GROUP_REDIS, GROUP_HEALTH };

/* Fields that one option and a redins block nested in another may both set: finer than a
 * group, since geoip_db, redins' geoip and handler.geoip may meet as long as only one of them
 * sets each field (a redins geoip with enable false sets nothing), and handler.healthcheck
 * competes with health and the top-level healthcheck, not with handler's other keys (as
 * handler.upstream competes with aname and the top-level upstream); see config_claim(). */
typedef enum {
    CLAIM_NONE = 0,
    CLAIM_GEOIP_DB,
    CLAIM_ASN_DB,
    CLAIM_HEALTH,
    CLAIM_ANAME,
    CLAIM_REQLOG, /* qlog's requests: query_log's requests (or query_log: ~), a redins log */
    CLAIM_COUNT
} claim_t;

typedef struct opt {
    const char *key;
    opt_type_t type;
    size_t offset; /* of the field in config_t (or in the struct a nested schema fills) */
    size_t size;   /* of that field (OPT_UINT, OPT_WORKERS, OPT_ENUM) */
    long long def; /* OPT_UINT, OPT_WORKERS, OPT_BOOL, OPT_ENUM */
    long long min; /* OPT_UINT, OPT_WORKERS: value; OPT_STR, OPT_PATH, OPT_ADDR: length */
    long long max;
    const char *const *names; /* OPT_ENUM: the values, max + 1 of them */
    int group;
    claim_t claim;     /* the field this option sets, when a redins geoip may set it too */
    bool restart;      /* bound at startup: a reload that changes it cannot apply it */
    bool empty_unsets; /* OPT_STR: "" unsets too (redins writes "password": "" for none) */
    const char *desc;  /* OPT_LATER: what the redins key is for */
} opt_t;

/* The largest TTL (RFC 2181 §8), as the schema's bounds are typed. */
#define TTL_MAX ((long long)WIRE_TTL_MAX)
/* Redis timeouts in milliseconds: a Redis that has not answered in ten minutes is gone by any
 * measure. */
#define REDIS_TIMEOUT_MAX 600000
/* A verify interval of a week: longer is "never" in practice, which 0 says plainly. */
#define ZONE_RELOAD_MAX 604800
/* A UNIX socket path must fit sun_path with its terminating NUL (107 bytes on Linux); checked
 * at load, rather than as a bind() or connect() failure at startup. */
#define SUN_PATH_MAX ((long long)sizeof(((struct sockaddr_un *)0)->sun_path) - 1)

/* The keys of a tern "redis:" mapping, into config_t.redis (config_redis_schema's rows). The
 * defaults are config_init()'s; 0 and NULL mean the source's own default
 * (tern/redis/redis_source.h), except zone_reload. */
enum {
    RS_ADDRESS,
    RS_DB,
    RS_PASSWORD,
    RS_PREFIX,
    RS_SUFFIX,
    RS_CONNECT_TIMEOUT,
    RS_READ_TIMEOUT,
    RS_ZONE_RELOAD,
    RS_CHANGES_CHANNEL,
    RS_DEFAULT_TTL,
    RS_MAX_TTL,
    RS_MAX_VALUE_BYTES,
    RS_MAX_LABELS,
    RS_MAX_RRSET_RECORDS,
    RS_MAX_ZONES,
    RS_SENTINEL,
    RS_READ_FROM,
    RS_COUNT
};

extern const opt_t config_redis_schema[RS_COUNT];

/* The leading rows of config_redis_schema (address .. read_timeout): where Redis is and how to
 * talk to it, all that health's redis takes; the rows from RS_ZONE_RELOAD on are the zone
 * source's. */
#define RS_CONNECTION_COUNT RS_ZONE_RELOAD

/* One config_load() call. */
typedef struct parse_ctx {
    config_t *c;
    yaml_document_t *doc;
    const char *path;
    char *dir; /* directory of path with a trailing '/', or NULL for the cwd */
    char *err;
    size_t errlen;
    const yaml_node_t **seen; /* key node of each schema option given in the file */
    bool redins; /* the file has a key only redins' config.json has (server, error_log, handler,
                    geoip, healthcheck, upstream, log): its "ratelimit" takes redins' defaults */
    size_t listen_line[CONFIG_MAX_LISTEN]; /* where each listen entry was given */
    struct {
        const yaml_node_t *by; /* key node of what set the claimed field, if anything did */
        const char *name;      /* its name: "geoip_db", "handler: geoip", ... */
    } claimed[CLAIM_COUNT];
} parse_ctx_t;

/* A key of a nested mapping (a zone, a listen entry, a redins block). */
typedef struct field {
    const char *key;
    const char *desc; /* what the value is, for "missing" errors */
    bool required;
    const char *later; /* non-NULL: a redins key tern refuses for now; what it is for */
} field_t;

/* --help rows for fields (a nested mapping's keys), indented by depth (1: under a top-level
 * key); a field tern refuses for now says so. */
void config_print_fields(FILE *out, int depth, const field_t *fields, size_t count);

/* Nested mappings have at most this many fields (tern's redis has 17). */
#define MAX_FIELDS 20

/* ---- nodes -------------------------------------------------------------------------------- */

static inline size_t line_of(const yaml_node_t *n)
{
    return n->start_mark.line + 1;
}

static inline const char *scalar(const yaml_node_t *n)
{
    return (const char *)n->data.scalar.value;
}

static inline bool is_plain(const yaml_node_t *n)
{
    return n->type == YAML_SCALAR_NODE && n->data.scalar.style == YAML_PLAIN_SCALAR_STYLE;
}

/* YAML's null: ~, null or nothing at all, unquoted. */
static inline bool is_null(const yaml_node_t *n)
{
    const char *s = is_plain(n) ? scalar(n) : NULL;
    return s && (*s == '\0' || strcmp(s, "~") == 0 || strcmp(s, "null") == 0);
}

/* Scalar text without an embedded NUL (a "\0" escape would cut it short silently). */
static inline bool is_text(const yaml_node_t *n)
{
    return n->type == YAML_SCALAR_NODE && strlen(scalar(n)) == n->data.scalar.length;
}

static inline const yaml_node_t *node(const parse_ctx_t *pc, int id)
{
    return yaml_document_get_node(pc->doc, id);
}

/** "a plain scalar", "a string", "a list", "a mapping" or "nothing", for type errors. */
const char *config_node_kind(const yaml_node_t *n);

/** dir + path for a relative path (malloc'd), or a copy of path. NULL: out of memory. */
char *config_resolve_path(const parse_ctx_t *pc, const char *path);

/** The key node of name in mapping n, or n itself when there is none (an error's line). */
const yaml_node_t *config_key_node(const parse_ctx_t *pc, const yaml_node_t *n, const char *name);

/* ---- values: 0, or TERN_ESYNTAX with "file:line: key: field: message" in pc->err ---------- */

/** Record an error at n's line: "path:line: key: <fmt>" (no "key: " when key is NULL), escaped
 * by tern_escape_controls(). Always returns TERN_ESYNTAX. */
int config_fail(parse_ctx_t *pc, const yaml_node_t *n, const char *key, const char *fmt, ...)
    TERN_PRINTF(4, 5);

/** A plain integer in [min, max] at n; field (or NULL) names the key inside key. */
int config_get_int(parse_ctx_t *pc, const yaml_node_t *n, const char *key, const char *field,
                   long long min, long long max, long long *out) TERN_WUR;

/** A plain true or false at n. */
int config_get_bool(parse_ctx_t *pc, const yaml_node_t *n, const char *key, const char *field,
                    bool *out) TERN_WUR;

/** One of names (count of them) at n, as its index. */
int config_get_enum(parse_ctx_t *pc, const yaml_node_t *n, const char *key, const char *field,
                    const char *const *names, size_t count, size_t *out) TERN_WUR;

/** An OPT_STR, OPT_PATH or OPT_ADDR value of row o at n into *out, replacing (freeing) it; null
 * unsets it, and so does "" when o->empty_unsets. TERN_ENOMEM too. */
int config_get_str(parse_ctx_t *pc, const yaml_node_t *n, const char *key, const char *field,
                   const opt_t *o, char **out) TERN_WUR;

/** Check that n is a mapping whose keys are among fields, each at most once, none refused
 * (field_t.later), every required one present; val[i] gets each field's value node or NULL. */
int config_get_fields(parse_ctx_t *pc, const yaml_node_t *n, const char *key, const field_t *fields,
                      size_t nfields, const yaml_node_t **val) TERN_WUR;

/** The value of row o (OPT_UINT, OPT_BOOL, OPT_ENUM, OPT_STR, OPT_PATH or OPT_ADDR) at n into
 * its field in base (the struct o's schema describes), checked against o's bounds; errors are
 * "key: o->key: ...". */
int config_get_row(parse_ctx_t *pc, const yaml_node_t *n, const char *key, const opt_t *o,
                   void *base) TERN_WUR;

/** The defaults of the count rows at rows (OPT_UINT, OPT_WORKERS, OPT_ENUM, OPT_BOOL) into their
 * fields in base; other rows, and rows without a field (size 0), are left alone. */
void config_set_defaults(void *base, const opt_t *rows, size_t count);

/** "key" for a single item, "key[index]" for an item of a sequence (parent). */
void config_item_key(char *buf, size_t len, const char *key, const yaml_node_t *parent,
                     size_t index);

typedef int (*item_fn)(parse_ctx_t *pc, const opt_t *o, const yaml_node_t *parent,
                       const yaml_node_t *n, size_t index);

/** Call fn for n's items if it is a sequence, else for n itself (index 0); the first error. */
int config_each_item(parse_ctx_t *pc, const opt_t *o, const yaml_node_t *n, item_fn fn) TERN_WUR;

/** Append listen entry e (given at n), or merge it into an earlier entry for the same address
 * and port when their protocols do not overlap; the same protocol twice is an error. */
int config_put_listen(parse_ctx_t *pc, const yaml_node_t *n, const char *key,
                      const config_listen_t *e) TERN_WUR;

/** k (named key, a string that outlives the parse) is about to set the field of claim: the first
 * one in a file may, a second is an error naming both lines. */
int config_claim(parse_ctx_t *pc, claim_t claim, const yaml_node_t *k, const char *key) TERN_WUR;

/* ---- Redis settings ----------------------------------------------------------------------- */

/* config_redis_reset() and config_redis_copy(): tern/conf/config.h (the health checker keeps a
 * copy of its Redis settings). */

/* Once a file is loaded: health.redis without an address follows the top-level Sentinel
 * (config_health.c). 0 or TERN_ENOMEM. */
int config_health_follow_sentinel(config_t *c) TERN_WUR;

/** A tern Redis mapping at n (or null: no Redis) into r, replacing every setting: the first
 * nrows rows of config_redis_schema (RS_COUNT for "redis:", RS_CONNECTION_COUNT for health's);
 * a key of a later row is an error ("not a key of <key>"). */
int config_get_redis(parse_ctx_t *pc, const yaml_node_t *n, const char *key, size_t nrows,
                     config_redis_t *r) TERN_WUR;

/** A host for hiredis: an IPv4 address or a DNS name. */
bool config_is_host(const char *h);

/** "HOST:PORT" or "[V6]:PORT", port 1..65535, into r's host and port; r's unix_path is
 * cleared. 0, TERN_EINVAL (nothing changed) or TERN_ENOMEM. */
int config_redis_set_host_port(config_redis_t *r, const char *s) TERN_WUR;

/** The UNIX socket at path (resolved against the config's directory) for r; host and port are
 * cleared. Errors are "key: address: ...". */
int config_redis_set_unix(parse_ctx_t *pc, const yaml_node_t *n, const char *key, config_redis_t *r,
                          const char *path) TERN_WUR;

/* ---- health (config_health.c) ------------------------------------------------------------- */

/* The keys of tern's "health:" mapping (config_health_schema's rows, offsets into
 * config_health_t). Their defaults are those of a given block; config_health_reset() clears
 * enabled and log_enabled, since no block means no checks and no log. */
enum {
    HS_ENABLE,
    HS_CHECK_INTERVAL,
    HS_MAX_REQUESTS,
    HS_UPDATE_INTERVAL,
    HS_CA_FILE,
    HS_REDIS,
    HS_LOG,
    HS_CHECKS,
    HS_COUNT
};

/* The keys of health's "log:" mapping. */
enum { HL_ENABLE, HL_TARGET, HL_PATH, HL_FORMAT, HL_COUNT };

/* The keys of one entry of health's "checks:" list (into a health_spec_t, parsed by hand: its
 * fields are of every width, and several keys only apply to some protocols). */
enum {
    HC_ADDRESS,
    HC_OWNER,
    HC_PROTOCOL,
    HC_PORT,
    HC_URI,
    HC_METHOD,
    HC_HOST,
    HC_EXPECT,
    HC_TLS_VERIFY,
    HC_TIMEOUT,
    HC_UP_COUNT,
    HC_DOWN_COUNT,
    HC_COUNT
};

extern const opt_t config_health_schema[HS_COUNT];
extern const opt_t config_health_log_schema[HL_COUNT];
extern const opt_t config_health_check_schema[HC_COUNT];

/* "file", "stdout", "stderr" by config_health_log_target_t; "json", "text" by !log_json. */
extern const char *const config_health_log_targets[3];
extern const char *const config_health_log_formats[2];

/** Free h's strings and checks and set it to the defaults: no health checks (enabled false), no
 * log, no Redis; check_interval 10000 ms, max_requests 100, update_interval 600 s. */
void config_health_reset(config_health_t *h);

/** Deep copy of src into dst, which owns nothing (its contents are overwritten). 0, or
 * TERN_ENOMEM with dst owning only what config_health_reset() frees. */
int config_health_copy(config_health_t *dst, const config_health_t *src) TERN_WUR;

/** tern's "health" (OPT_HEALTH) at n: replaces every health setting; null = no health checks. */
int config_health(parse_ctx_t *pc, const opt_t *o, const yaml_node_t *n) TERN_WUR;

/* ---- flood resistance (config_limit.c) ---------------------------------------------------- */

/* The keys of an "acl:" mapping (the global one, or a zone's), offsets into config_acl_t. */
enum { ACL_ALLOW, ACL_DENY, ACL_ACTION, ACL_COUNT };

/* The keys of "ratelimit:" (redins' enable, rate, burst, whitelist, blacklist, then tern's),
 * offsets into config_ratelimit_t. */
enum {
    RATE_ENABLE,
    RATE_RATE,
    RATE_BURST,
    RATE_WHITELIST,
    RATE_BLACKLIST,
    RATE_ACTION,
    RATE_BLACKLIST_ACTION,
    RATE_TABLE_SIZE,
    RATE_COUNT
};

/* The keys of "rrl:", offsets into config_rrl_t. */
enum {
    RRL_ENABLE,
    RRL_RATE,
    RRL_BURST,
    RRL_SLIP,
    RRL_IPV4_PREFIX,
    RRL_IPV6_PREFIX,
    RRL_WHITELIST,
    RRL_TABLE_SIZE,
    RRL_LOG,
    RRL_COUNT
};

/* The keys of "cookies:", offsets into config_cookies_t. */
enum { COOKIE_ENABLE, COOKIE_SECRET, COOKIE_ROTATE, COOKIE_REQUIRE, COOKIE_COUNT };

extern const opt_t config_acl_schema[ACL_COUNT];
extern const opt_t config_ratelimit_schema[RATE_COUNT];
extern const opt_t config_rrl_schema[RRL_COUNT];
extern const opt_t config_cookies_schema[COOKIE_COUNT];

/** Free a's prefix lists and set it to the defaults: no access list (enabled false), refuse. */
void config_acl_reset(config_acl_t *a);

/** Deep copy of src into dst, which owns nothing (its contents are overwritten). 0, or
 * TERN_ENOMEM with dst owning only what config_acl_reset() frees. */
int config_acl_copy(config_acl_t *dst, const config_acl_t *src) TERN_WUR;

/** Free the prefix lists of c's acl, ratelimit and rrl and set them and cookies to the defaults
 * (each disabled; the rows' defaults otherwise). Zones' acls and the tcp_* rows are not touched. */
void config_limit_reset(config_t *c);

/** Deep copy of src's acl, ratelimit, rrl and cookies into dst's, which own nothing (they are
 * overwritten). 0, or TERN_ENOMEM with them owning only what config_limit_reset() frees. */
int config_limit_copy(config_t *dst, const config_t *src) TERN_WUR;

/** An acl mapping named key at n (or null: none) into a, replacing every setting; errors are
 * "key: allow[2]: ...". */
/** A prefix list (one address or prefix, or a list; null = empty) at n into *out, replacing it;
 * errors read "key: field[i]: ...". */
int config_get_prefix_list(parse_ctx_t *pc, const yaml_node_t *n, const char *key,
                           const char *field, config_prefix_list_t *out) TERN_WUR;
/** Free a prefix list's array (empty after). */
void config_prefix_list_reset(config_prefix_list_t *l);

/* ---- zone transfers (config_xfr.c) ---- */
/** tern's "tsig_keys" (a list of {name, algorithm, secret}), appended to c->tsig_keys. */
int config_tsig_keys(parse_ctx_t *pc, const opt_t *o, const yaml_node_t *n) TERN_WUR;
/** "tsig_key_file": one BIND key file or a list of them, appended to c->tsig_keys. */
int config_tsig_key_file(parse_ctx_t *pc, const opt_t *o, const yaml_node_t *n) TERN_WUR;
/** A zone's primary, notify, allow_transfer, transfer_key, allow_notify (each may be NULL). */
int config_get_zone_xfr(parse_ctx_t *pc, const char *key, config_zone_t *z,
                        const yaml_node_t *primary, const yaml_node_t *notify,
                        const yaml_node_t *allow_transfer, const yaml_node_t *transfer_key,
                        const yaml_node_t *allow_notify) TERN_WUR;

/** Free a zone's transfer settings (the zone stays otherwise as it is). */
void config_zone_xfr_reset(config_zone_t *z);
/** dst, a shallow copy of src, gets its own copies of src's transfer settings. 0 or
 * TERN_ENOMEM (dst then owns what was copied: config_zone_xfr_reset() it). */
int config_zone_xfr_copy(config_zone_t *dst, const config_zone_t *src) TERN_WUR;

/** dst (its tsig_keys not its own) gets a copy of src's keys. 0 or TERN_ENOMEM. */
int config_tsig_keys_copy(config_t *dst, const config_t *src) TERN_WUR;
/** Wipe and free c's keys. */
void config_tsig_keys_reset(config_t *c);

int config_get_acl(parse_ctx_t *pc, const yaml_node_t *n, const char *key,
                   config_acl_t *a) TERN_WUR;

/** The top-level "acl" (OPT_ACL), "ratelimit" (OPT_RATELIMIT), "rrl" (OPT_RRL) and "cookies"
 * (OPT_COOKIES) at n: each replaces every setting of its block; null = none. ratelimit's enable
 * defaults to true, or to false when pc->redins (as redins' Go struct leaves it). */
int config_acl(parse_ctx_t *pc, const opt_t *o, const yaml_node_t *n) TERN_WUR;
int config_ratelimit(parse_ctx_t *pc, const opt_t *o, const yaml_node_t *n) TERN_WUR;
int config_rrl(parse_ctx_t *pc, const opt_t *o, const yaml_node_t *n) TERN_WUR;
int config_cookies(parse_ctx_t *pc, const opt_t *o, const yaml_node_t *n) TERN_WUR;

/* ---- ANAME upstreams (config_aname.c) ----------------------------------------------------- */

/* The keys of "aname:" (config_aname_schema's rows). */
enum { AN_UPSTREAMS, AN_STATE_FILE, AN_READY_WAIT, AN_MAX_STALE, AN_COUNT };

/* The keys of one upstream (config_aname_upstream_schema's rows, offsets into config_upstream_t;
 * "ip", redins' word, is address's synonym). */
enum { AU_ADDRESS, AU_PORT, AU_PROTOCOL, AU_TIMEOUT, AU_COUNT };

extern const opt_t config_aname_schema[AN_COUNT];
extern const opt_t config_aname_upstream_schema[AU_COUNT];

/** Free a's hosts and set it to none (nupstreams 0, every slot zero). */
void config_aname_reset(config_aname_t *a);

/** Deep copy of src into dst, which owns nothing (its contents are overwritten). 0, or
 * TERN_ENOMEM with dst owning only what config_aname_reset() frees. */
int config_aname_copy(config_aname_t *dst, const config_aname_t *src) TERN_WUR;

/** A list of upstreams named key ("aname: upstreams", "handler: upstream") at n into a,
 * replacing it: each entry {address | ip, port, protocol, timeout}, at most
 * CONFIG_MAX_UPSTREAMS, none given twice; null or [] = none. redins: the entries' address is
 * called "ip" in messages, and a lone mapping is one entry (older redins' top-level form).
 * Errors are "key[i]: field: ...". */
int config_get_upstreams(parse_ctx_t *pc, const yaml_node_t *n, const char *key, bool redins,
                         config_aname_t *a) TERN_WUR;

/** tern's "aname" (OPT_ANAME) at n: replaces every upstream; null = none. */
int config_aname(parse_ctx_t *pc, const opt_t *o, const yaml_node_t *n) TERN_WUR;

/* ---- query logging (config_qlog.c) ------------------------------------------------------- */

/* The keys of "query_log:" (config_qlog_schema's rows, offsets into config_qlog_t). */
enum { QL_SAMPLE, QL_RING_SIZE, QL_EXCLUDE_ZONES, QL_DNSTAP, QL_REQUESTS, QL_COUNT };

/* The keys of query_log's "dnstap:" mapping. */
enum { QD_SOCKET, QD_FILE, QD_QUERIES, QD_RESPONSES, QD_IDENTITY, QD_VERSION, QD_COUNT };

/* The keys of query_log's "requests:" mapping. */
enum { QR_ENABLE, QR_TARGET, QR_FORMAT, QR_PATH, QR_COUNT };

extern const opt_t config_qlog_schema[QL_COUNT];
extern const opt_t config_qlog_dnstap_schema[QD_COUNT];
extern const opt_t config_qlog_requests_schema[QR_COUNT];

/** Free q's strings and excluded zones and set it to the defaults: no query logging (enabled
 * and requests false), sample 1, ring_kib 4096, dnstap queries and responses true, requests
 * target file, format json. */
void config_qlog_reset(config_qlog_t *q);

/** Deep copy of src into dst, which owns nothing (its contents are overwritten). 0, or
 * TERN_ENOMEM with dst owning only what config_qlog_reset() frees. */
int config_qlog_copy(config_qlog_t *dst, const config_qlog_t *src) TERN_WUR;

/** tern's "query_log" (OPT_QUERY_LOG) at n, whose key node is k: replaces every query logging
 * setting but the request log's when the block has no "requests" and a redins log gave it;
 * null = none. A "requests" key (or a null block) claims CLAIM_REQLOG. */
int config_query_log(parse_ctx_t *pc, const opt_t *o, const yaml_node_t *k,
                     const yaml_node_t *n) TERN_WUR;

/** A redins "log" block (top level, or handler's) named key at n into qlog's requests only,
 * with redins' defaults (off, stdout, text); the caller has claimed CLAIM_REQLOG. */
int config_get_redins_log(parse_ctx_t *pc, const yaml_node_t *n, const char *key) TERN_WUR;

/** The rows of a redins log block's keys for config_schema_print(), indented by depth. */
void config_redins_print_log(FILE *out, int depth);

/* ---- redins' config.json (config_redins.c) ------------------------------------------------- */

/** redins "server" (OPT_SERVER) at n: replaces the listen list. */
int config_redins_server(parse_ctx_t *pc, const opt_t *o, const yaml_node_t *n) TERN_WUR;

/** redins "error_log" (OPT_ERROR_LOG) at n: log_level and log_target. */
int config_redins_error_log(parse_ctx_t *pc, const opt_t *o, const yaml_node_t *n) TERN_WUR;

/** redins "handler" (OPT_HANDLER) at n: replaces every redis setting (and enables Redis); its
 * geoip sets geoip_db and asn_db, its healthcheck health, its upstream aname. */
int config_redins_handler(parse_ctx_t *pc, const opt_t *o, const yaml_node_t *n) TERN_WUR;

/** Older redins' top-level "geoip" (OPT_GEOIP) at n, whose key node is k. */
int config_redins_geoip(parse_ctx_t *pc, const opt_t *o, const yaml_node_t *k,
                        const yaml_node_t *n) TERN_WUR;

/** Older redins' top-level "healthcheck" (OPT_HEALTHCHECK) at n: replaces every health
 * setting, with redins' defaults. */
int config_redins_healthcheck(parse_ctx_t *pc, const opt_t *o, const yaml_node_t *n) TERN_WUR;

/** Older redins' top-level "upstream" (OPT_UPSTREAM) at n: replaces every ANAME upstream, with
 * redins' defaults (config_get_upstreams()). */
int config_redins_upstream(parse_ctx_t *pc, const opt_t *o, const yaml_node_t *n) TERN_WUR;

/** The rows of handler's keys for config_schema_print(), indented under "handler". */
void config_redins_print_handler(FILE *out);

/** The rows of healthcheck's keys for config_schema_print(), indented by depth. */
void config_redins_print_healthcheck(FILE *out, int depth);

#endif
