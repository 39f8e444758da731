/*
 * limit_settings.h — what the flood-resistance policy is built from: access lists, redins' rate
 * limit, response rate limiting and DNS Cookies, as plain data.
 *
 * Owner: the limit module (tern/limit/limit.h compiles these into a view's limit_t). The config
 * parser (conf, config.h) fills them from "acl:", a zone's "acl:", "ratelimit:", "rrl:" and
 * "cookies:"; this header knows nothing of YAML, so the query path never compiles against it.
 * Lifecycle: filled at startup or reload on the control thread, read-only after; the prefix lists
 * are malloc'd by whoever fills them (conf frees them with its config_t).
 */
#ifndef TERN_LIMIT_LIMIT_SETTINGS_H
#define TERN_LIMIT_LIMIT_SETTINGS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* An address prefix of an ACL, a whitelist or a blacklist ("192.0.2.0/24", "2001:db8::/32"; a
 * bare address is a full-length prefix). addr has the bits past len cleared. */
typedef struct config_prefix {
    uint8_t family; /* 4 or 6 */
    uint8_t len;    /* 0..32 or 0..128 */
    uint8_t addr[16];
} config_prefix_t;

typedef struct config_prefix_list {
    config_prefix_t *p; /* malloc'd, n of them; NULL when empty */
    size_t n;
} config_prefix_list_t;

/* What a refused client gets: REFUSED (the question echoed, as redins does) or nothing. */
typedef enum { CONFIG_LIMIT_REFUSE = 0, CONFIG_LIMIT_DROP } config_limit_action_t;

/* An access list (global "acl:", or a zone's "acl:"): a client matching deny is refused; when
 * allow is not empty, a client matching none of it is refused too. */
typedef struct config_acl {
    bool enabled; /* a block was given */
    config_prefix_list_t allow, deny;
    unsigned action; /* config_limit_action_t */
} config_acl_t;

/* redins' "ratelimit" block (same keys, same meaning), and tern's additions. */
typedef struct config_ratelimit {
    bool enabled;
    unsigned rate;  /* requests per minute per client address, 1..; redins' default 60 */
    unsigned burst; /* requests beyond the rate at once; redins' default 10 */
    config_prefix_list_t whitelist, blacklist; /* addresses (redins) or prefixes (tern) */
    unsigned action;           /* over the limit: refuse (default, as redins) or drop */
    unsigned blacklist_action; /* blacklisted: refuse (default, as redins) or drop */
    unsigned table_size;       /* client addresses tracked at once; default 65536 */
} config_ratelimit_t;

/* Response rate limiting (Knot's and BIND's RRL): "rrl:". */
typedef struct config_rrl {
    bool enabled;
    unsigned rate;      /* responses per second per client prefix and response class */
    unsigned burst;     /* responses at once; default = rate */
    unsigned slip;      /* every slip-th limited response goes out truncated (TC); 0 = none;
                           default 2 */
    unsigned prefix_v4; /* client prefix length, default 24 */
    unsigned prefix_v6; /* default 56 */
    config_prefix_list_t whitelist; /* never limited */
    unsigned table_size;            /* buckets; default 262144 */
    bool log;                       /* log each newly limited prefix (rate-limited); default true */
} config_rrl_t;

/* DNS Cookies (RFC 7873, server cookies as RFC 9018): "cookies:". */
typedef struct config_cookies {
    bool enabled;
    bool have_secret;   /* secret given: shared by a fleet, never rotated */
    uint8_t secret[16]; /* "secret": 32 hex digits */
    unsigned rotate_s;  /* without a secret: a random one, replaced this often; default 86400 */
    bool require;       /* UDP queries without a valid server cookie get BADCOOKIE */
} config_cookies_t;

/* A zone's own access list: checked once the query's zone is known. */
typedef struct limit_zone_acl {
    const char *origin;      /* the zone's apex, as configured (text) */
    const config_acl_t *acl; /* enabled */
} limit_zone_acl_t;

/* Everything limit_new() reads: the global blocks and the zones' access lists. Nothing here is
 * owned: each pointer must stay valid for the duration of the call only. */
typedef struct limit_settings {
    const config_acl_t *acl;
    const config_ratelimit_t *ratelimit;
    const config_rrl_t *rrl;
    const config_cookies_t *cookies;
    const limit_zone_acl_t *zones; /* nzones of them, each with acl->enabled */
    size_t nzones;
} limit_settings_t;

#endif
