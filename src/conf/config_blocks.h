/*
 * config_blocks.h — private to src/conf: the blocks of the configuration, each declared by the
 * file that owns it, and what those files share with one another.
 *
 * config.c's top-level table names these blocks; the engine (config_parse.h) only calls their
 * hooks. A block file includes config_parse.h and this header, never config.c's internals: the
 * dependencies run config.c → block files → engine, and between block files one way (the redins
 * keys fill the health, aname, qlog and Redis blocks; a zone entry uses the acl and transfer
 * helpers; health's redis uses the Redis block's).
 *
 * Owners: config_listen.c (listen), config_zone.c (zones), config_redis.c (redis, and the
 * connection part health's redis takes), config_health.c (health), config_limit.c (acl,
 * ratelimit, rrl, cookies), config_aname.c (aname), config_qlog.c (query_log and redins' request
 * log), config_xfr.c (tsig_keys, tsig_key_file, a zone's transfer keys), config_redins.c
 * (server, error_log, handler, geoip, healthcheck, upstream).
 *
 * Lifecycle and threading: as config_parse.h; the blocks are static constant tables.
 */
#ifndef TERN_CONF_CONFIG_BLOCKS_H
#define TERN_CONF_CONFIG_BLOCKS_H

#include <sys/un.h>

#include "config_parse.h"
#include "tern/wire/rr.h"

/* The fields several options may set (config_claim()): finer than a group, since geoip_db,
 * redins' geoip and handler.geoip may meet as long as only one of them sets each field (a redins
 * geoip with enable false sets nothing), and handler.healthcheck competes with health and the
 * top-level healthcheck, not with handler's other keys (as handler.upstream competes with aname
 * and the top-level upstream). */
enum {
    CLAIM_NONE = 0,
    CLAIM_GEOIP_DB,
    CLAIM_ASN_DB,
    CLAIM_HEALTH,
    CLAIM_ANAME,
    CLAIM_REQLOG, /* qlog's requests: query_log's requests (or query_log: ~), a redins log */
    CLAIM_COUNT
};
_Static_assert(CLAIM_COUNT <= CONFIG_CLAIM_MAX, "parse_ctx_t has a slot for every claim");

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

/* ---- the blocks (each a row of config.c's table) --------------------------------------- */

extern const conf_block_t config_listen_block;          /* config_listen.c */
extern const conf_block_t config_load_block;            /* config_health.c */
extern const conf_block_t config_xdp_block;             /* config_listen.c */
extern const conf_block_t config_zones_block;           /* config_zone.c */
extern const conf_block_t config_redis_block;           /* config_redis.c */
extern const conf_block_t config_health_block;          /* config_health.c */
extern const conf_block_t config_acl_block;             /* config_limit.c */
extern const conf_block_t config_ratelimit_block;       /* config_limit.c */
extern const conf_block_t config_rrl_block;             /* config_limit.c */
extern const conf_block_t config_cookies_block;         /* config_limit.c */
extern const conf_block_t config_aname_block;           /* config_aname.c */
extern const conf_block_t config_qlog_block;            /* config_qlog.c */
extern const conf_block_t config_tsig_keys_block;       /* config_xfr.c */
extern const conf_block_t config_tsig_file_block;       /* config_xfr.c */
extern const conf_block_t config_server_block;          /* config_redins.c */
extern const conf_block_t config_error_log_block;       /* config_redins.c */
extern const conf_block_t config_handler_block;         /* config_redins.c */
extern const conf_block_t config_geoip_block;           /* config_redins.c */
extern const conf_block_t config_healthcheck_block;     /* config_redins.c */
extern const conf_block_t config_upstream_block;        /* config_redins.c */
extern const conf_block_t config_redins_log_block;      /* config_qlog.c */
extern const conf_block_t config_api_block;             /* config_api.c */
extern const conf_block_t config_dnssec_policies_block; /* config_dnssec.c */
extern const conf_block_t config_catalogs_block;        /* config_catalog.c */
extern const conf_block_t config_latency_map_block;     /* config_latency.c */
extern const conf_block_t config_tls_block;             /* config_tls.c */
extern const conf_block_t config_steering_block;        /* config_steering.c */

/* The "tls:" block as the workers take it (config_tls.c); nlisten 0 without DoT. */
server_tls_settings_t config_tls_settings(const config_t *c);

/* Zones' dnssec policies exist, and so does their state directory (config_dnssec.c). */
int config_dnssec_check(const config_t *c, const char *file, char *err, size_t errlen) TERN_WUR;

/* ---- listen (config_listen.c) ------------------------------------------------------------- */

/** Strict port: 1-5 digits, 0..65535, nothing after. */
bool config_parse_port(const char *s, uint16_t *port);

/** Whether s is a listen address ("ADDR:PORT", "[V6]:PORT": config_parse_listen()). */
bool config_listen_text_ok(const char *s);

/** Append listen entry e (given at n), or merge it into an earlier entry for the same address
 * and port when their protocols do not overlap; the same protocol twice is an error. */
int config_put_listen(parse_ctx_t *pc, const yaml_node_t *n, const char *key,
                      const config_listen_t *e) TERN_WUR;

/* ---- Redis settings ----------------------------------------------------------------------- */

/** Free r's strings and set it to the defaults (no Redis; zone_reload 600). */
void config_redis_reset(config_redis_t *r);

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

/** A prefix list (one address or prefix, or a list; null = empty) at n into *out, replacing it;
 * errors read "key: field[i]: ...". */
int config_get_prefix_list(parse_ctx_t *pc, const yaml_node_t *n, const char *key,
                           const char *field, config_prefix_list_t *out) TERN_WUR;
/** Free a prefix list's array (empty after). */
void config_prefix_list_reset(config_prefix_list_t *l);

/* ---- zone transfers (config_xfr.c) ---- */
/** A zone's primary, notify, allow_transfer, transfer_key, allow_notify (each may be NULL). */
int config_get_zone_xfr(parse_ctx_t *pc, const char *key, config_zone_t *z,
                        const yaml_node_t *primary, const yaml_node_t *notify,
                        const yaml_node_t *allow_transfer, const yaml_node_t *transfer_key,
                        const yaml_node_t *allow_notify) TERN_WUR;

/** Whether tsig_keys (or a key file) defines name ("xfr-key" and "xfr-key." are one key). */
bool config_tsig_key_known(const config_t *c, const char *name);

/* ---- dynamic updates (config_update.c) ---- */
/** A zone's allow_update at n (null: none) into z (its file already set). */
int config_get_zone_update(parse_ctx_t *pc, const char *key, config_zone_t *z,
                           const yaml_node_t *n) TERN_WUR;
/** Free a zone's allow_update. */
void config_zone_update_reset(config_zone_t *z);
/** dst, a shallow copy of src, gets its own copy of src's allow_update. 0 or TERN_ENOMEM (dst
 * then owns what was copied: config_zone_update_reset() it). */
int config_zone_update_copy(config_zone_t *dst, const config_zone_t *src) TERN_WUR;
/** Every key an allow_update names is defined: 0, or TERN_EINVAL with "file:line: ..." in err. */
int config_update_check(const config_t *c, const char *file, char *err, size_t errlen) TERN_WUR;

/* ---- catalog zones (config_catalog.c) ---- */
/** A zone's catalog, catalog_group and catalog_coo (each may be NULL) into z. */
int config_get_zone_catalog_member(parse_ctx_t *pc, const char *key, config_zone_t *z,
                                   const yaml_node_t *catalog, const yaml_node_t *group,
                                   const yaml_node_t *coo) TERN_WUR;
/** Free a zone's catalog keys. */
void config_zone_catalog_member_reset(config_zone_t *z);
/** dst, a shallow copy of src, gets its own copies of src's catalog keys. 0 or TERN_ENOMEM. */
int config_zone_catalog_member_copy(config_zone_t *dst, const config_zone_t *src) TERN_WUR;

/** Free a zone's transfer settings (the zone stays otherwise as it is). */
void config_zone_xfr_reset(config_zone_t *z);
/** dst, a shallow copy of src, gets its own copies of src's transfer settings. 0 or
 * TERN_ENOMEM (dst then owns what was copied: config_zone_xfr_reset() it). */
int config_zone_xfr_copy(config_zone_t *dst, const config_zone_t *src) TERN_WUR;

/* ---- catalog zones consumed (config_catalog_consumer.c) ---- */
/** A secondary zone's catalog_consumer mapping at n into z (its primaries already read). */
int config_get_zone_catalog(parse_ctx_t *pc, const char *key, config_zone_t *z,
                            const yaml_node_t *n) TERN_WUR;
/** Free a zone's catalog_consumer. */
void config_zone_catalog_reset(config_zone_t *z);
/** dst, a shallow copy of src, gets its own catalog_consumer. 0 or TERN_ENOMEM (dst then owns
 * what was copied: config_zone_catalog_reset() it). */
int config_zone_catalog_copy(config_zone_t *dst, const config_zone_t *src) TERN_WUR;
/** Every key a group's primary names is defined: 0, or TERN_EINVAL with "file:line: ..." in err. */
int config_catalog_check(const config_t *c, const char *file, char *err, size_t errlen) TERN_WUR;
/** --help rows: catalog_consumer's keys and a group's, indented by depth. */
void config_catalog_print(FILE *out, int depth);
/* A primary's `tls` mapping at n (config_xfr_tls.c): parsed and its files checked, into *out
 * (config_xfr_tls_free()). Errors are "key: tls: ...". */
int config_get_xfr_tls(parse_ctx_t *pc, const yaml_node_t *n, const char *key,
                       config_xfr_tls_t **out) TERN_WUR;
/* A deep copy of src (NULL: none) into *dst. 0 or TERN_ENOMEM. */
int config_xfr_tls_copy(config_xfr_tls_t **dst, const config_xfr_tls_t *src) TERN_WUR;
void config_xfr_tls_free(config_xfr_tls_t *t);

/** An acl mapping named key at n (or null: none) into a, replacing every setting; errors are
 * "key: allow[2]: ...". */
int config_get_acl(parse_ctx_t *pc, const yaml_node_t *n, const char *key,
                   config_acl_t *a) TERN_WUR;

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

/** A redins "log" block (top level, or handler's) named key at n into qlog's requests only,
 * with redins' defaults (off, stdout, text); the caller has claimed CLAIM_REQLOG. */
int config_get_redins_log(parse_ctx_t *pc, const yaml_node_t *n, const char *key) TERN_WUR;

#endif
