/*
 * config_limit.c — the flood-resistance settings: the global "acl:" and a zone's "acl:", redins'
 * "ratelimit:" (the same key in tern's YAML and in redins' config.json), "rrl:" and "cookies:";
 * their rows, their prefix lists, and the defaults, copies and frees of config_acl_t,
 * config_ratelimit_t, config_rrl_t and config_cookies_t. The TCP per-client cap
 * (tcp_max_per_client, tcp_client_prefix_v4/v6) is three plain rows of config.c's schema.
 *
 * Each block's scalar keys are opt_t rows with offsets into its struct, parsed, bounded and
 * printed by the same code as every other option (config_get_row(), config_schema_print()); the
 * prefix lists and the cookie secret are OPT_CUSTOM rows read here. A block given replaces every
 * setting of that block (as "health:" does); null (~) or no key at all means none.
 *
 * What reads these: src/limit/limit.c (limit_new()) compiles them into the policy of each view.
 * Nothing here holds state beyond one config_load() call; the structs are read-only once loaded.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>

#include "config_blocks.h"
#include "tern/common/err.h"

#define AFIELD(f) .offset = offsetof(config_acl_t, f), .size = sizeof(((config_acl_t *)0)->f)
#define RLFIELD(f)                                                                                 \
    .offset = offsetof(config_ratelimit_t, f), .size = sizeof(((config_ratelimit_t *)0)->f)
#define RRFIELD(f) .offset = offsetof(config_rrl_t, f), .size = sizeof(((config_rrl_t *)0)->f)
#define CKFIELD(f)                                                                                 \
    .offset = offsetof(config_cookies_t, f), .size = sizeof(((config_cookies_t *)0)->f)

/* Entries of one prefix list. Lists are compiled into sorted ranges (any length answers in one
 * binary search), so the bound is about the config, not the query path: 100,000 prefixes is a
 * generated list already (a country's address space), and it keeps a typo'd include of a huge
 * file from eating memory at every reload. */
#define PREFIX_LIST_MAX 100000

/* Rate tables: 16 bytes a bucket (limit.h). 1024 buckets is the smallest table that still spreads
 * clients; 16,777,216 (256 MiB) is more clients at once than one host answers. */
#define TABLE_MIN 1024
#define TABLE_MAX 16777216

/* redins counts requests a minute: 6,000,000 a minute (100,000 a second from one address) is
 * beyond any legitimate client, and keeps the interval (60 s / rate) at 10 µs or more. */
#define RATELIMIT_RATE_MAX 6000000
/* RRL counts responses a second; 1,000,000 keeps the interval at a microsecond. */
#define RRL_RATE_MAX 1000000
/* Bursts: a million at once is no limit at all; beyond it, a typo. */
#define BURST_MAX 1000000

/* A cookie secret is 16 bytes (RFC 9018 §4.4, SipHash-2-4's key): 32 hex digits. */
#define SECRET_HEX 32

_Static_assert(sizeof(unsigned) == sizeof(uint32_t), "the limit rows store 32-bit fields");
_Static_assert(sizeof(((config_cookies_t *)0)->secret) * 2 == SECRET_HEX, "secret is 16 bytes");

/* The index is config_limit_action_t. */
static const char *const action_names[] = {
    [CONFIG_LIMIT_REFUSE] = "refuse", [CONFIG_LIMIT_DROP] = "drop"};

const opt_t config_acl_schema[ACL_COUNT] = {
    [ACL_ALLOW] = {.key = "allow",
                   .type = OPT_CUSTOM,
                   AFIELD(allow),
                   .desc = "prefixes (\"192.0.2.0/24\", \"2001:db8::/32\", or an address) allowed; "
                           "one or a list; empty or unset = every client"},
    [ACL_DENY] = {.key = "deny",
                  .type = OPT_CUSTOM,
                  AFIELD(deny),
                  .desc = "prefixes refused, whatever allow says; one or a list"},
    [ACL_ACTION] = {.key = "action",
                    .type = OPT_ENUM,
                    AFIELD(action),
                    .def = CONFIG_LIMIT_REFUSE,
                    .max = 1,
                    .names = action_names,
                    .desc = "what a refused client gets: REFUSED, or no answer at all"},
};

const opt_t config_ratelimit_schema[RATE_COUNT] = {
    /* the default of a given block; no block at all is no limit (the blocks' reset) */
    [RATE_ENABLE] = {.key = "enable",
                     .type = OPT_BOOL,
                     RLFIELD(enabled),
                     .def = 1,
                     .desc = "false: no limit (the block is still checked); left out of a "
                             "redins config.json: false, as in redins"},
    /* redins' defaults: 60 a minute, 10 at once (its README) */
    [RATE_RATE] = {.key = "rate",
                   .type = OPT_UINT,
                   RLFIELD(rate),
                   .def = 60,
                   .min = 1,
                   .max = RATELIMIT_RATE_MAX,
                   .desc = "requests a minute from one client address"},
    [RATE_BURST] = {.key = "burst",
                    .type = OPT_UINT,
                    RLFIELD(burst),
                    .def = 10,
                    .max = BURST_MAX,
                    .desc = "requests beyond the rate allowed at once (burst + 1 pass together)"},
    [RATE_WHITELIST] = {.key = "whitelist",
                        .type = OPT_CUSTOM,
                        RLFIELD(whitelist),
                        .desc = "addresses (redins) or prefixes never limited; one or a list"},
    [RATE_BLACKLIST] = {.key = "blacklist",
                        .type = OPT_CUSTOM,
                        RLFIELD(blacklist),
                        .desc = "addresses or prefixes always refused (checked before the "
                                "whitelist, as in redins); one or a list"},
    [RATE_ACTION] = {.key = "action",
                     .type = OPT_ENUM,
                     RLFIELD(action),
                     .def = CONFIG_LIMIT_REFUSE,
                     .max = 1,
                     .names = action_names,
                     .desc = "a client over the rate gets REFUSED (as in redins) or nothing"},
    [RATE_BLACKLIST_ACTION] = {.key = "blacklist_action",
                               .type = OPT_ENUM,
                               RLFIELD(blacklist_action),
                               .def = CONFIG_LIMIT_REFUSE,
                               .max = 1,
                               .names = action_names,
                               .desc = "a blacklisted client gets REFUSED (as in redins) or "
                                       "nothing"},
    [RATE_TABLE_SIZE] = {.key = "table_size",
                         .type = OPT_UINT,
                         RLFIELD(table_size),
                         .def = 65536,
                         .min = TABLE_MIN,
                         .max = TABLE_MAX,
                         .desc = "client addresses tracked at once (16 bytes each; the quietest "
                                 "goes first); on restart"},
};

const opt_t config_rrl_schema[RRL_COUNT] = {
    [RRL_ENABLE] = {.key = "enable",
                    .type = OPT_BOOL,
                    RRFIELD(enabled),
                    .def = 1,
                    .desc = "false: no response rate limiting (the block is still checked)"},
    /* Knot's default rate-limit (20 a second); BIND has none, and asks for one */
    [RRL_RATE] = {.key = "rate",
                  .type = OPT_UINT,
                  RRFIELD(rate),
                  .def = 20,
                  .min = 1,
                  .max = RRL_RATE_MAX,
                  .desc = "responses a second to one client prefix, per response class"},
    [RRL_BURST] = {.key = "burst",
                   .type = OPT_UINT,
                   RRFIELD(burst),
                   .def = 0,
                   .max = BURST_MAX,
                   .desc = "responses allowed at once; 0 = rate"},
    /* BIND's default slip (Knot's is 1): every other limited response goes out truncated */
    [RRL_SLIP] = {.key = "slip",
                  .type = OPT_UINT,
                  RRFIELD(slip),
                  .def = 2,
                  .max = 100,
                  .desc = "every slip-th limited response goes out truncated (TC: retry over "
                          "TCP), the rest dropped; 0 = drop all"},
    /* BIND's and Knot's defaults: a /24 and a /56 are one client (one site) */
    [RRL_IPV4_PREFIX] = {.key = "ipv4_prefix",
                         .type = OPT_UINT,
                         RRFIELD(prefix_v4),
                         .def = 24,
                         .min = 8,
                         .max = 32,
                         .desc = "IPv4 clients counted together (prefix length)"},
    [RRL_IPV6_PREFIX] = {.key = "ipv6_prefix",
                         .type = OPT_UINT,
                         RRFIELD(prefix_v6),
                         .def = 56,
                         .min = 16,
                         .max = 128,
                         .desc = "IPv6 clients counted together (prefix length)"},
    [RRL_WHITELIST] = {.key = "whitelist",
                       .type = OPT_CUSTOM,
                       RRFIELD(whitelist),
                       .desc = "prefixes never limited (monitoring, resolvers you trust); one or a "
                               "list"},
    [RRL_TABLE_SIZE] = {.key = "table_size",
                        .type = OPT_UINT,
                        RRFIELD(table_size),
                        .def = 262144,
                        .min = TABLE_MIN,
                        .max = TABLE_MAX,
                        .desc = "buckets (prefix and response class, 16 bytes each); on restart"},
    [RRL_LOG] = {.key = "log",
                 .type = OPT_BOOL,
                 RRFIELD(log),
                 .def = 1,
                 .desc = "log each newly limited prefix (once per 10 s per prefix and worker)"},
};

const opt_t config_cookies_schema[COOKIE_COUNT] = {
    [COOKIE_ENABLE] = {.key = "enable",
                       .type = OPT_BOOL,
                       CKFIELD(enabled),
                       .def = 1,
                       .desc = "false: no cookies (the block is still checked)"},
    [COOKIE_SECRET] = {.key = "secret",
                       .type = OPT_CUSTOM,
                       .desc = "32 hex digits (16 bytes) shared by every server of a fleet, never "
                               "rotated; unset = a random one, rotated every rotate_s"},
    /* a day: a cookie made with the previous secret still validates after a rotation (both are
     * kept), so clients see no BADCOOKIE for a change of secret; a minute is the least that keeps
     * cookies useful, a year bounds a typo */
    [COOKIE_ROTATE] = {.key = "rotate_s",
                       .type = OPT_UINT,
                       CKFIELD(rotate_s),
                       .def = 86400,
                       .min = 60,
                       .max = 31536000,
                       .desc = "seconds between two random secrets (not with secret)"},
    [COOKIE_REQUIRE] =
        {.key = "require",
         .type = OPT_BOOL,
         CKFIELD(require),
         .def = 0,
         .desc = "UDP queries without a valid server cookie get BADCOOKIE (with a cookie) or TC "
                 "(without)"},
};

/* ---- prefixes ----------------------------------------------------------------------------- */

/* Keep the bits of addr (bytes bytes) up to len; clear the rest. */
static void mask_to(uint8_t *addr, size_t bytes, unsigned len)
{
    for (size_t i = 0; i < bytes; i++) {
        unsigned have = len > 8 * i ? len - 8 * (unsigned)i : 0;
        if (have < 8)
            addr[i] &= (uint8_t)(0xff00u >> have);
    }
}

int config_parse_prefix(config_prefix_t *p, const char *text, char *why, size_t whylen)
{
    char host[INET6_ADDRSTRLEN];
    const char *slash = strchr(text, '/');
    size_t hl = slash ? (size_t)(slash - text) : strlen(text);
    config_prefix_t v = {0};
    unsigned max, len;
    if (hl >= sizeof(host)) {
        snprintf(why, whylen, "not an IPv4 or IPv6 address (want ADDR or ADDR/LEN)");
        return TERN_EINVAL;
    }
    memcpy(host, text, hl);
    host[hl] = '\0';
    if (inet_pton(AF_INET, host, v.addr) == 1) {
        v.family = 4;
        max = 32;
    } else if (inet_pton(AF_INET6, host, v.addr) == 1) {
        v.family = 6;
        max = 128;
    } else {
        snprintf(why, whylen, "not an IPv4 or IPv6 address (want ADDR or ADDR/LEN)");
        return TERN_EINVAL;
    }
    len = max;
    if (slash) {
        const char *d = slash + 1;
        size_t dl = strlen(d);
        if (dl == 0 || dl > 3 || strspn(d, "0123456789") != dl) {
            snprintf(why, whylen, "the length after '/' must be a number 0..%u", max);
            return TERN_EINVAL;
        }
        len = (unsigned)strtoul(d, NULL, 10);
        if (len > max) {
            snprintf(why, whylen, "length %u is out of range 0..%u for an IPv%u prefix", len, max,
                     (unsigned)v.family);
            return TERN_EINVAL;
        }
    }
    v.len = (uint8_t)len;
    config_prefix_t net = v;
    mask_to(net.addr, v.family == 4 ? 4 : 16, len);
    if (memcmp(net.addr, v.addr, sizeof(v.addr)) != 0) {
        char ip[INET6_ADDRSTRLEN];
        inet_ntop(v.family == 4 ? AF_INET : AF_INET6, net.addr, ip, sizeof(ip));
        snprintf(why, whylen, "host bits set; did you mean %s/%u?", ip, len);
        return TERN_EINVAL;
    }
    *p = v;
    return 0;
}

static void prefix_list_free(config_prefix_list_t *l)
{
    free(l->p);
    l->p = NULL;
    l->n = 0;
}

/* dst, which owns nothing, gets a copy of src. 0 or TERN_ENOMEM (dst empty). */
static int prefix_list_copy(config_prefix_list_t *dst, const config_prefix_list_t *src)
{
    dst->p = NULL;
    dst->n = 0;
    if (src->n == 0)
        return 0;
    if (!(dst->p = malloc(src->n * sizeof(*dst->p))))
        return TERN_ENOMEM;
    memcpy(dst->p, src->p, src->n * sizeof(*dst->p));
    dst->n = src->n;
    return 0;
}

void config_prefix_list_reset(config_prefix_list_t *l)
{
    prefix_list_free(l);
}

int config_prefix_list_copy(config_prefix_list_t *dst, const config_prefix_list_t *src)
{
    return prefix_list_copy(dst, src);
}

/* One prefix of a list at n (field names it: "allow[2]") into *p. */
static int get_prefix(parse_ctx_t *pc, const yaml_node_t *n, const char *key, const char *field,
                      config_prefix_t *p)
{
    char why[128];
    if (!is_text(n))
        return config_fail(pc, n, key,
                           "%s: expected an address or a prefix (\"192.0.2.0/24\", "
                           "\"2001:db8::/32\"), got %s",
                           field, config_node_kind(n));
    if (config_parse_prefix(p, scalar(n), why, sizeof(why)) < 0)
        return config_fail(pc, n, key, "%s: bad prefix \"%s\": %s", field, scalar(n), why);
    return 0;
}

static int get_prefixes(parse_ctx_t *pc, const yaml_node_t *n, const char *key, const opt_t *o,
                        config_prefix_list_t *out);

int config_get_prefix_list(parse_ctx_t *pc, const yaml_node_t *n, const char *key,
                           const char *field, config_prefix_list_t *out)
{
    const opt_t o = {.key = field};
    return get_prefixes(pc, n, key, &o, out);
}

/* A prefix list (row o) at n into *out, replacing it: one prefix or a sequence of them (as
 * listen takes one address or a list); null = empty. Errors are "key: field[i]: ...". */
static int get_prefixes(parse_ctx_t *pc, const yaml_node_t *n, const char *key, const opt_t *o,
                        config_prefix_list_t *out)
{
    char field[64];
    size_t count = 1;
    int rc;
    if (is_null(n)) {
        prefix_list_free(out);
        return 0;
    }
    if (n->type == YAML_MAPPING_NODE)
        return config_fail(pc, n, key,
                           "%s: expected an address or prefix, or a list of them, got %s", o->key,
                           config_node_kind(n));
    if (n->type == YAML_SEQUENCE_NODE) {
        count = (size_t)(n->data.sequence.items.top - n->data.sequence.items.start);
        if (count > PREFIX_LIST_MAX)
            return config_fail(pc, node(pc, n->data.sequence.items.start[PREFIX_LIST_MAX]), key,
                               "%s: more than %d prefixes", o->key, PREFIX_LIST_MAX);
    }
    config_prefix_t *p = count ? calloc(count, sizeof(*p)) : NULL;
    if (count && !p)
        return TERN_ENOMEM;
    for (size_t i = 0; i < count; i++) {
        const yaml_node_t *item = n;
        if (n->type == YAML_SEQUENCE_NODE)
            item = node(pc, n->data.sequence.items.start[i]);
        config_item_key(field, sizeof(field), o->key, n, i);
        if ((rc = get_prefix(pc, item, key, field, &p[i])) < 0) {
            free(p);
            return rc;
        }
    }
    prefix_list_free(out);
    out->p = p;
    out->n = count;
    return 0;
}

/* ---- the structs -------------------------------------------------------------------------- */

void config_acl_reset(config_acl_t *a)
{
    prefix_list_free(&a->allow);
    prefix_list_free(&a->deny);
    memset(a, 0, sizeof(*a));
    config_set_defaults(a, config_acl_schema, ACL_COUNT);
}

int config_acl_copy(config_acl_t *dst, const config_acl_t *src)
{
    *dst = *src;
    dst->allow = dst->deny = (config_prefix_list_t){NULL, 0};
    if (prefix_list_copy(&dst->allow, &src->allow) < 0 ||
        prefix_list_copy(&dst->deny, &src->deny) < 0)
        return TERN_ENOMEM;
    return 0;
}

/* The rows' defaults are those of a given block: without one, nothing is limited. */
static void ratelimit_reset(config_ratelimit_t *r)
{
    prefix_list_free(&r->whitelist);
    prefix_list_free(&r->blacklist);
    memset(r, 0, sizeof(*r));
    config_set_defaults(r, config_ratelimit_schema, RATE_COUNT);
    r->enabled = false;
}

static void rrl_reset(config_rrl_t *r)
{
    prefix_list_free(&r->whitelist);
    memset(r, 0, sizeof(*r));
    config_set_defaults(r, config_rrl_schema, RRL_COUNT);
    r->enabled = false;
}

static void cookies_reset(config_cookies_t *k)
{
    memset(k, 0, sizeof(*k));
    config_set_defaults(k, config_cookies_schema, COOKIE_COUNT);
    k->enabled = false;
}

/* ---- the blocks --------------------------------------------------------------------------- */

/* The most rows a block has (config_rrl_schema). */
#define BLOCK_ROWS_MAX 16
_Static_assert(ACL_COUNT <= BLOCK_ROWS_MAX && RATE_COUNT <= BLOCK_ROWS_MAX &&
                   RRL_COUNT <= BLOCK_ROWS_MAX && COOKIE_COUNT <= BLOCK_ROWS_MAX,
               "block_open()'s field array holds every row of a block");

/* The keys of block n (rows) into val: 1 when n is ~ (no block), 0, or an error. */
static int block_open(parse_ctx_t *pc, const yaml_node_t *n, const char *key, const opt_t *rows,
                      size_t count, const yaml_node_t **val)
{
    if (is_null(n))
        return 1;
    field_t fields[BLOCK_ROWS_MAX];
    config_row_fields(fields, rows, count);
    int rc = config_get_fields(pc, n, key, fields, count, val);
    return rc < 0 ? rc : 0;
}

/* A rate (row o) at n into its field in base: 0 gets a message saying how to turn a limit off
 * (redins divided by its rate: 0 made it crash). */
static int get_rate(parse_ctx_t *pc, const yaml_node_t *n, const char *key, const opt_t *o,
                    void *base)
{
    if (is_plain(n) && strcmp(scalar(n), "0") == 0)
        return config_fail(pc, n, key,
                           "%s: 0 is out of range %lld..%lld (to turn the limit off, give "
                           "enable: false)",
                           o->key, o->min, o->max);
    return config_get_row(pc, n, key, o, base);
}

/* The given rows of a block into base: prefix lists (the OPT_CUSTOM rows, at their offset), the
 * rate (row rate_row, if any: 0 is refused with advice), the rest by config_get_row(). */
static int block_rows(parse_ctx_t *pc, const char *key, const opt_t *rows, size_t count,
                      const yaml_node_t *const *val, void *base, size_t rate_row)
{
    for (size_t i = 0; i < count; i++) {
        int rc = 0;
        if (!val[i])
            continue;
        if (rows[i].type == OPT_CUSTOM)
            rc = get_prefixes(pc, val[i], key, &rows[i],
                              (config_prefix_list_t *)((char *)base + rows[i].offset));
        else if (i == rate_row)
            rc = get_rate(pc, val[i], key, &rows[i], base);
        else
            rc = config_get_row(pc, val[i], key, &rows[i], base);
        if (rc < 0)
            return rc;
    }
    return 0;
}

int config_get_acl(parse_ctx_t *pc, const yaml_node_t *n, const char *key, config_acl_t *a)
{
    const yaml_node_t *val[ACL_COUNT];
    int rc = block_open(pc, n, key, config_acl_schema, ACL_COUNT, val);
    if (rc < 0)
        return rc;
    config_acl_reset(a);
    if (rc == 1)
        return 0;
    a->enabled = true;
    return block_rows(pc, key, config_acl_schema, ACL_COUNT, val, a, ACL_COUNT);
}

static int acl_parse(parse_ctx_t *pc, const opt_t *o, const yaml_node_t *k, const yaml_node_t *n)
{
    return config_get_acl(pc, n, o->key, &pc->c->acl);
}

/* ratelimit's enable defaults to true, or to false when pc->redins (as redins' Go struct leaves
 * it). */
static int ratelimit_parse(parse_ctx_t *pc, const opt_t *o, const yaml_node_t *k,
                           const yaml_node_t *n)
{
    config_ratelimit_t *r = &pc->c->ratelimit;
    const yaml_node_t *val[RATE_COUNT];
    int rc = block_open(pc, n, o->key, config_ratelimit_schema, RATE_COUNT, val);
    if (rc < 0)
        return rc;
    ratelimit_reset(r);
    if (rc == 1)
        return 0;
    /* redins' RateLimiterConfig.Enable is a Go bool: false when the JSON leaves it out */
    r->enabled = !pc->redins;
    return block_rows(pc, o->key, config_ratelimit_schema, RATE_COUNT, val, r, RATE_RATE);
}

static int rrl_parse(parse_ctx_t *pc, const opt_t *o, const yaml_node_t *k, const yaml_node_t *n)
{
    config_rrl_t *r = &pc->c->rrl;
    const yaml_node_t *val[RRL_COUNT];
    int rc = block_open(pc, n, o->key, config_rrl_schema, RRL_COUNT, val);
    if (rc < 0)
        return rc;
    rrl_reset(r);
    if (rc == 1)
        return 0;
    r->enabled = true;
    return block_rows(pc, o->key, config_rrl_schema, RRL_COUNT, val, r, RRL_RATE);
}

static int hex_digit(char ch)
{
    if (ch >= '0' && ch <= '9')
        return ch - '0';
    if (ch >= 'a' && ch <= 'f')
        return ch - 'a' + 10;
    if (ch >= 'A' && ch <= 'F')
        return ch - 'A' + 10;
    return -1;
}

/* cookies' secret: 32 hex digits into k->secret. The value is never echoed in a message: it is
 * a secret, and the error lands in logs. */
static int get_secret(parse_ctx_t *pc, const yaml_node_t *n, const char *key, config_cookies_t *k)
{
    if (is_null(n)) {
        k->have_secret = false;
        memset(k->secret, 0, sizeof(k->secret));
        return 0;
    }
    if (!is_text(n))
        return config_fail(pc, n, key, "secret: expected %d hex digits, got %s", SECRET_HEX,
                           config_node_kind(n));
    const char *s = scalar(n);
    size_t len = strlen(s);
    if (len != SECRET_HEX)
        return config_fail(pc, n, key,
                           "secret: expected %d hex digits (16 bytes), got %zu characters",
                           SECRET_HEX, len);
    for (size_t i = 0; i < SECRET_HEX; i++)
        if (hex_digit(s[i]) < 0)
            return config_fail(pc, n, key,
                               "secret: character %zu is not a hex digit (want %d of 0-9, a-f)",
                               i + 1, SECRET_HEX);
    for (size_t i = 0; i < SECRET_HEX / 2; i++)
        k->secret[i] = (uint8_t)(hex_digit(s[2 * i]) << 4 | hex_digit(s[2 * i + 1]));
    k->have_secret = true;
    return 0;
}

static int cookies_parse(parse_ctx_t *pc, const opt_t *o, const yaml_node_t *key_node,
                         const yaml_node_t *n)
{
    config_cookies_t *k = &pc->c->cookies;
    const yaml_node_t *val[COOKIE_COUNT];
    int rc = block_open(pc, n, o->key, config_cookies_schema, COOKIE_COUNT, val);
    if (rc < 0)
        return rc;
    cookies_reset(k);
    if (rc == 1)
        return 0;
    k->enabled = true;
    /* the secret is the block's one OPT_CUSTOM row that is no prefix list */
    const yaml_node_t *secret = val[COOKIE_SECRET];
    val[COOKIE_SECRET] = NULL;
    if ((rc = block_rows(pc, o->key, config_cookies_schema, COOKIE_COUNT, val, k, COOKIE_COUNT)) <
            0 ||
        (secret && (rc = get_secret(pc, secret, o->key, k)) < 0))
        return rc;
    /* a shared secret must stay the same on every server of the fleet: it is never rotated */
    if (k->have_secret && val[COOKIE_ROTATE])
        return config_fail(pc, val[COOKIE_ROTATE], o->key,
                           "rotate_s: not with secret (a shared secret is never rotated; give "
                           "one of them)");
    return 0;
}

/* ---- the blocks' hooks: each block's part of config_t ------------------------------------- */

static void acl_reset(config_t *c)
{
    config_acl_reset(&c->acl);
}

static int acl_copy(config_t *dst, const config_t *src)
{
    return config_acl_copy(&dst->acl, &src->acl);
}

static void ratelimit_reset_c(config_t *c)
{
    ratelimit_reset(&c->ratelimit);
}

static int ratelimit_copy(config_t *dst, const config_t *src)
{
    static const config_prefix_list_t none = {NULL, 0};
    dst->ratelimit.whitelist = dst->ratelimit.blacklist = none; /* src's until copied */
    if (prefix_list_copy(&dst->ratelimit.whitelist, &src->ratelimit.whitelist) < 0 ||
        prefix_list_copy(&dst->ratelimit.blacklist, &src->ratelimit.blacklist) < 0)
        return TERN_ENOMEM;
    return 0;
}

static void rrl_reset_c(config_t *c)
{
    rrl_reset(&c->rrl);
}

static int rrl_copy(config_t *dst, const config_t *src)
{
    dst->rrl.whitelist = (config_prefix_list_t){NULL, 0}; /* src's until copied */
    return prefix_list_copy(&dst->rrl.whitelist, &src->rrl.whitelist);
}

static void cookies_reset_c(config_t *c)
{
    cookies_reset(&c->cookies);
}

const conf_block_t config_acl_block = {.rows = config_acl_schema,
                                       .nrows = ACL_COUNT,
                                       .parse = acl_parse,
                                       .reset = acl_reset,
                                       .copy = acl_copy};
const conf_block_t config_ratelimit_block = {.rows = config_ratelimit_schema,
                                             .nrows = RATE_COUNT,
                                             .parse = ratelimit_parse,
                                             .reset = ratelimit_reset_c,
                                             .copy = ratelimit_copy};
const conf_block_t config_rrl_block = {.rows = config_rrl_schema,
                                       .nrows = RRL_COUNT,
                                       .parse = rrl_parse,
                                       .reset = rrl_reset_c,
                                       .copy = rrl_copy};
/* cookies own no pointer: the shallow copy is the copy */
const conf_block_t config_cookies_block = {.rows = config_cookies_schema,
                                           .nrows = COOKIE_COUNT,
                                           .parse = cookies_parse,
                                           .reset = cookies_reset_c};

/* ---- the policy --------------------------------------------------------------------------- */

limit_t *config_limit_new(limit_shared_t *sh, const config_t *c, int *rc)
{
    limit_zone_acl_t *zones = NULL;
    size_t n = 0;
    for (size_t i = 0; i < c->nzones; i++)
        n += c->zones[i].acl.enabled;
    if (n && !(zones = calloc(n, sizeof(*zones)))) {
        *rc = TERN_ENOMEM;
        return NULL;
    }
    n = 0;
    for (size_t i = 0; i < c->nzones; i++)
        if (c->zones[i].acl.enabled)
            zones[n++] = (limit_zone_acl_t){c->zones[i].origin, &c->zones[i].acl};
    limit_settings_t set = {&c->acl, &c->ratelimit, &c->rrl, &c->cookies, zones, n};
    limit_t *l = limit_new(sh, &set, rc);
    free(zones);
    return l;
}
