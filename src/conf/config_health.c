/*
 * config_health.c — tern's "health:" block: its schema rows, the parsing of its log and of its
 * checks, and the defaults, copies and frees of config_health_t.
 *
 * The block's scalar keys are opt_t rows with offsets into config_health_t, parsed, bounded and
 * printed by the same code as every other option (config_get_row(), config_schema_print()); its
 * redis is the connection part of tern's "redis:" mapping (config_get_redis()). A check's keys
 * are rows too, for their bounds, defaults and --help, but are read by hand into a health_spec_t
 * (fields of every width; several keys only mean something for some protocols), then checked by
 * health_spec_check(), the one judge of a spec that zone files' health_check objects meet too.
 *
 * redins' healthcheck block fills the same config_health_t from config_redins.c. Nothing here
 * holds state beyond one config_load() call; config_health_t itself is read-only once loaded.
 */
#include <arpa/inet.h>
#include <limits.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>

#include "config_blocks.h"
#include "tern/common/err.h"

#define HFIELD(f) .offset = offsetof(config_health_t, f), .size = sizeof(((config_health_t *)0)->f)

/* A checked endpoint per entry: a list this long is generated, and its place is the zones'
 * health_check objects; the bound also keeps the duplicate search (quadratic) instant. */
#define HEALTH_MAX_CHECKS 10000

/* A DNS name without its final dot (RFC 1035 §2.3.4: 255 octets on the wire). */
#define NAME_MAX_TEXT 253

const char *const config_health_log_targets[3] = {
    [CONFIG_HEALTH_LOG_FILE] = "file",
    [CONFIG_HEALTH_LOG_STDOUT] = "stdout",
    [CONFIG_HEALTH_LOG_STDERR] = "stderr",
};

/* Index 0 is log_json true. */
const char *const config_health_log_formats[2] = {"json", "text"};

/* health_proto_parse()'s names; "ping" is redins' name for icmp. */
static const char *const protocol_names[] = {"http", "https", "tcp", "icmp", "ping"};

static const char *const method_names[] = {[HEALTH_HEAD] = "HEAD", [HEALTH_GET] = "GET"};

_Static_assert(sizeof(unsigned) == sizeof(uint32_t), "config_health_schema stores 32-bit fields");

/* health's nested blocks, parsed here (get_log(), get_checks()); their rows are --help's */
static const conf_block_t log_block = {.rows = config_health_log_schema, .nrows = HL_COUNT};
static const conf_block_t check_block = {.rows = config_health_check_schema, .nrows = HC_COUNT};

const opt_t config_health_schema[HS_COUNT] = {
    /* enable's default is that of a given block; no block at all is enable false */
    [HS_ENABLE] = {.key = "enable",
                   .type = OPT_BOOL,
                   HFIELD(enabled),
                   .def = 1,
                   .desc = "false: no health checks (the block is still checked)"},
    /* 100 ms: a check is at least a connection; more often only loads the endpoint. A day: a
     * state older than that tells nothing. 10 s notices a dead endpoint within 30 s (down 3). */
    [HS_CHECK_INTERVAL] = {.key = "check_interval_ms",
                           .type = OPT_UINT,
                           HFIELD(check_interval_ms),
                           .def = 10000,
                           .min = 100,
                           .max = 86400000,
                           .desc = "milliseconds between two checks of one endpoint"},
    /* 100 in flight covers 1000 endpoints every 10 s at 1 s per check; each one in flight holds
     * a socket, and 100000 is beyond any descriptor limit ternd would be given. */
    [HS_MAX_REQUESTS] = {.key = "max_requests",
                         .type = OPT_UINT,
                         HFIELD(max_requests),
                         .def = 100,
                         .min = 1,
                         .max = 100000,
                         .desc = "checks in flight at once; the others wait their turn"},
    /* redins' update_interval and default; a week as for zone_reload */
    [HS_UPDATE_INTERVAL] = {.key = "update_interval",
                            .type = OPT_UINT,
                            HFIELD(update_interval_s),
                            .def = 600,
                            .min = 1,
                            .max = ZONE_RELOAD_MAX,
                            .desc = "seconds a state written to Redis lives (its EX)"},
    [HS_CA_FILE] = {.key = "ca_file",
                    .type = OPT_PATH,
                    HFIELD(ca_file),
                    .min = 1,
                    .max = PATH_MAX - 1,
                    .desc = "CA bundle (PEM) https checks verify against; unset = the system's"},
    [HS_REDIS] = {.key = "redis",
                  .type = OPT_CUSTOM,
                  .desc = "share states in redins' keys: redis's address, db, password, prefix, "
                          "suffix, *_timeout; unset or ~ = none"},
    [HS_LOG] = {.key = "log",
                .type = OPT_BLOCK,
                .block = &log_block,
                .desc = "one line per check result: a mapping of these keys; unset or ~ = none"},
    [HS_CHECKS] = {.key = "checks",
                   .type = OPT_BLOCK,
                   .block = &check_block,
                   .desc = "checks by address, for the A/AAAA records of every zone: a list of "
                           "mappings of these keys"},
};

const opt_t config_health_log_schema[HL_COUNT] = {
    [HL_ENABLE] = {.key = "enable",
                   .type = OPT_BOOL,
                   HFIELD(log_enabled),
                   .def = 1,
                   .desc = "false: no log (the block is still checked)"},
    [HL_TARGET] = {.key = "target",
                   .type = OPT_ENUM,
                   HFIELD(log_target),
                   .def = CONFIG_HEALTH_LOG_FILE,
                   .max = 2,
                   .names = config_health_log_targets,
                   .desc = "where the lines go"},
    [HL_PATH] = {.key = "path",
                 .type = OPT_PATH,
                 HFIELD(log_path),
                 .min = 1,
                 .max = PATH_MAX - 1,
                 .desc = "the file (target file only, and then required), appended to"},
    /* log_json is a bool: no field here, get_log() stores it (config_set_defaults() skips it) */
    [HL_FORMAT] = {.key = "format",
                   .type = OPT_ENUM,
                   .def = 0,
                   .max = 1,
                   .names = config_health_log_formats,
                   .desc = "one JSON object or key=value text per line"},
};

const opt_t config_health_check_schema[HC_COUNT] = {
    [HC_ADDRESS] = {.key = "address",
                    .type = OPT_CUSTOM,
                    .desc = "required: the IPv4 or IPv6 address checked, in A/AAAA records"},
    [HC_OWNER] = {.key = "owner",
                  .type = OPT_STR,
                  .min = 1,
                  .max = NAME_MAX_TEXT,
                  .desc = "only the records at this name; unset = at every name"},
    [HC_PROTOCOL] = {.key = "protocol",
                     .type = OPT_ENUM,
                     .max = TERN_ARRAY_SIZE(protocol_names) - 1,
                     .names = protocol_names,
                     .desc = "what is checked"},
    [HC_PORT] = {.key = "port",
                 .type = OPT_UINT,
                 .def = 80,
                 .min = 1,
                 .max = 65535,
                 .desc = "443 for https; required for tcp, none for icmp"},
    [HC_URI] = {.key = "uri",
                .type = OPT_STR,
                .min = 1,
                .max = HEALTH_URI_MAX,
                .desc = "http(s): the path asked for; unset = /"},
    [HC_METHOD] = {.key = "method",
                   .type = OPT_ENUM,
                   .max = TERN_ARRAY_SIZE(method_names) - 1,
                   .names = method_names,
                   .desc = "http(s): the request's method"},
    [HC_HOST] = {.key = "host",
                 .type = OPT_STR,
                 .min = 1,
                 .max = NAME_MAX_TEXT,
                 .desc = "http(s): Host header and TLS name; unset = the record's owner"},
    [HC_EXPECT] = {.key = "expect",
                   .type = OPT_CUSTOM,
                   .desc =
                       "http(s): status codes meaning up, 100..599, one or a list of at most 8; "
                       "default 200, 301, 302"},
    [HC_TLS_VERIFY] = {.key = "tls_verify",
                       .type = OPT_BOOL,
                       .def = 1,
                       .desc = "https: verify the certificate (ca_file) and its name (host)"},
    [HC_TIMEOUT] = {.key = "timeout",
                    .type = OPT_UINT,
                    .def = HEALTH_DEFAULT_TIMEOUT_MS,
                    .min = 1,
                    .max = HEALTH_TIMEOUT_MAX_MS,
                    .desc = "milliseconds a check may take"},
    [HC_UP_COUNT] = {.key = "up_count",
                     .type = OPT_UINT,
                     .def = HEALTH_DEFAULT_UP,
                     .min = 1,
                     .max = HEALTH_COUNT_MAX,
                     .desc = "successes in a row that make an endpoint up"},
    [HC_DOWN_COUNT] = {.key = "down_count",
                       .type = OPT_UINT,
                       .def = -HEALTH_DEFAULT_DOWN,
                       .min = 1,
                       .max = HEALTH_COUNT_MAX,
                       .desc = "failures in a row that make it down (-3 is 3, as in redins)"},
};

/* ---- config_health_t ---------------------------------------------------------------------- */

static void free_check(config_health_check_t *ck)
{
    free((void *)ck->spec.uri);
    free((void *)ck->spec.host);
    free(ck->owner);
    ck->spec.uri = ck->spec.host = NULL;
    ck->owner = NULL;
}

void config_health_reset(config_health_t *h)
{
    config_redis_reset(&h->redis);
    free(h->ca_file);
    free(h->log_path);
    for (size_t i = 0; i < h->nchecks; i++)
        free_check(&h->checks[i]);
    free(h->checks);
    unsigned load_poll_ms = h->load_poll_ms; /* the load: block's (load_parse()) */
    memset(h, 0, sizeof(*h));
    h->load_poll_ms = load_poll_ms;
    config_set_defaults(h, config_health_schema, HS_COUNT);
    config_set_defaults(h, config_health_log_schema, HL_COUNT);
    config_set_defaults(&h->redis, config_redis_schema, RS_COUNT);
    h->log_json = config_health_log_schema[HL_FORMAT].def == 0;
    /* the rows' defaults are those of a given block: without one, nothing is checked or logged */
    h->enabled = false;
    h->log_enabled = false;
}

int config_health_copy(config_health_t *dst, const config_health_t *src)
{
    *dst = *src;
    dst->ca_file = dst->log_path = NULL;
    dst->checks = NULL;
    dst->nchecks = 0;
    if (redis_settings_copy(&dst->redis, &src->redis) < 0)
        return TERN_ENOMEM;
    if ((src->ca_file && !(dst->ca_file = strdup(src->ca_file))) ||
        (src->log_path && !(dst->log_path = strdup(src->log_path))))
        return TERN_ENOMEM;
    if (src->nchecks == 0)
        return 0;
    if (!(dst->checks = calloc(src->nchecks, sizeof(*dst->checks))))
        return TERN_ENOMEM;
    for (size_t i = 0; i < src->nchecks; i++) {
        const config_health_check_t *s = &src->checks[i];
        config_health_check_t *d = &dst->checks[i];
        *d = *s;
        d->spec.uri = d->spec.host = NULL;
        d->owner = NULL;
        dst->nchecks = i + 1; /* freed by config_health_reset() from here on */
        if ((s->spec.uri && !(d->spec.uri = strdup(s->spec.uri))) ||
            (s->spec.host && !(d->spec.host = strdup(s->spec.host))) ||
            (s->owner && !(d->owner = strdup(s->owner))))
            return TERN_ENOMEM;
    }
    return 0;
}

/* health.redis without an address of its own, beside a top-level redis with Sentinel: the same
 * sentinels name its node, so the shared states live on the primary the zones come from and
 * follow its failovers (tern/redis/redis_conn.h). An address given is used as it is. */
int config_health_follow_sentinel(config_t *c)
{
    config_redis_t *h = &c->health.redis;
    const config_redis_t *z = &c->redis;
    if (!h->enabled || h->host || h->unix_path || h->nsentinels || !z->nsentinels)
        return 0;
    if (!(h->sentinels = calloc(z->nsentinels, sizeof(*h->sentinels))))
        return TERN_ENOMEM;
    for (; h->nsentinels < z->nsentinels; h->nsentinels++)
        if (!(h->sentinels[h->nsentinels] = strdup(z->sentinels[h->nsentinels])))
            return TERN_ENOMEM;
    if (!(h->sentinel_master = strdup(z->sentinel_master)) ||
        (z->sentinel_password && !(h->sentinel_password = strdup(z->sentinel_password))))
        return TERN_ENOMEM;
    return 0;
}

/* ---- log ---------------------------------------------------------------------------------- */

static int get_log(parse_ctx_t *pc, const yaml_node_t *n, config_health_t *h)
{
    static const char key[] = "health: log";
    const opt_t *rows = config_health_log_schema;
    field_t fields[HL_COUNT];
    const yaml_node_t *val[HL_COUNT];
    size_t e = 0;
    int rc;
    if (is_null(n))
        return 0; /* no log: as config_health_reset() left it */
    for (size_t i = 0; i < HL_COUNT; i++)
        fields[i] = (field_t){rows[i].key, rows[i].desc, false, NULL};
    if ((rc = config_get_fields(pc, n, key, fields, HL_COUNT, val)) < 0)
        return rc;
    h->log_enabled = true;
    for (size_t i = 0; i < HL_COUNT; i++) {
        if (!val[i])
            continue;
        if (i == HL_FORMAT) {
            rc = config_get_enum(pc, val[i], key, rows[i].key, rows[i].names,
                                 (size_t)rows[i].max + 1, &e);
            h->log_json = e == 0;
        } else {
            rc = config_get_row(pc, val[i], key, &rows[i], h);
        }
        if (rc < 0)
            return rc;
    }
    if (h->log_target != CONFIG_HEALTH_LOG_FILE && h->log_path)
        return config_fail(pc, val[HL_PATH], key, "path: only with target file (not %s)",
                           config_health_log_targets[h->log_target]);
    if (h->log_target == CONFIG_HEALTH_LOG_FILE && h->log_enabled && !h->log_path)
        return config_fail(pc, n, key, "missing \"path\" (target file writes to it)");
    return 0;
}

/* ---- one check ---------------------------------------------------------------------------- */

/* An IPv4 or IPv6 literal into sp's family and addr. */
static int get_address(parse_ctx_t *pc, const yaml_node_t *n, const char *key, health_spec_t *sp)
{
    if (!is_text(n))
        return config_fail(pc, n, key, "address: expected an IPv4 or IPv6 address, got %s",
                           config_node_kind(n));
    const char *s = scalar(n);
    if (inet_pton(AF_INET, s, sp->addr) == 1)
        sp->family = 4;
    else if (inet_pton(AF_INET6, s, sp->addr) == 1)
        sp->family = 6;
    else
        return config_fail(
            pc, n, key, "address: bad address \"%s\" (want an IPv4 or IPv6 address, no port)", s);
    return 0;
}

/* A name (owner, host) as row o at n into *out: lowercase, without its final dot; letters,
 * digits, '-', '_' (and '*' when star) in labels of 1..63 characters, 1..253 in all. null
 * unsets it. */
static int get_name(parse_ctx_t *pc, const yaml_node_t *n, const char *key, const opt_t *o,
                    bool star, char **out)
{
    /* the length is checked below, once a final dot is off */
    opt_t any = *o;
    any.max = 4 * NAME_MAX_TEXT;
    char *s = NULL;
    int rc = config_get_str(pc, n, key, o->key, &any, &s);
    if (rc < 0 || !s) {
        free(*out);
        *out = NULL;
        return rc;
    }
    size_t len = strlen(s), label = 0;
    bool ok = true;
    if (len > 0 && s[len - 1] == '.')
        s[--len] = '\0';
    ok = len >= 1 && len <= NAME_MAX_TEXT;
    for (size_t i = 0; ok && i <= len; i++) {
        char ch = s[i];
        if (ch == '.' || ch == '\0') {
            ok = label >= 1 && label <= 63;
            label = 0;
            continue;
        }
        label++;
        if (ch >= 'A' && ch <= 'Z')
            s[i] = (char)(ch - 'A' + 'a');
        else if (!((ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '-' || ch == '_' ||
                   (star && ch == '*')))
            ok = false;
    }
    if (!ok) {
        free(s);
        return config_fail(pc, n, key,
                           "%s: \"%s\" is not a domain name (letters, digits, '-', '_'%s and dots; "
                           "at most %d characters)",
                           o->key, scalar(n), star ? ", '*'" : "", NAME_MAX_TEXT);
    }
    free(*out);
    *out = s;
    return 0;
}

/* expect: one status code or a list of at most HEALTH_MAX_EXPECT. */
static int get_expect(parse_ctx_t *pc, const yaml_node_t *n, const char *key, health_spec_t *sp)
{
    long long v = 0;
    int rc;
    if (n->type != YAML_SEQUENCE_NODE) {
        if ((rc = config_get_int(pc, n, key, "expect", 100, 599, &v)) < 0)
            return rc;
        sp->expect[0] = (uint16_t)v;
        sp->nexpect = 1;
        return 0;
    }
    size_t count = (size_t)(n->data.sequence.items.top - n->data.sequence.items.start);
    if (count == 0)
        return config_fail(pc, n, key, "expect: an empty list (give the status codes meaning up)");
    if (count > HEALTH_MAX_EXPECT)
        return config_fail(pc, n, key, "expect: %zu status codes, more than the %d allowed", count,
                           HEALTH_MAX_EXPECT);
    for (size_t i = 0; i < count; i++) {
        char field[32];
        snprintf(field, sizeof(field), "expect[%zu]", i);
        if ((rc = config_get_int(pc, node(pc, n->data.sequence.items.start[i]), key, field, 100,
                                 599, &v)) < 0)
            return rc;
        sp->expect[i] = (uint16_t)v;
    }
    sp->nexpect = (uint8_t)count;
    return 0;
}

/* down_count: 1..HEALTH_COUNT_MAX, or redins' negative form; stored negative. */
static int get_down_count(parse_ctx_t *pc, const yaml_node_t *n, const char *key, health_spec_t *sp)
{
    const opt_t *o = &config_health_check_schema[HC_DOWN_COUNT];
    long long v = 0;
    int rc = config_get_int(pc, n, key, o->key, LLONG_MIN, LLONG_MAX, &v);
    if (rc < 0)
        return rc;
    if (v == 0 || v > o->max || v < -o->max)
        return config_fail(pc, n, key, "%s: %lld is out of range %lld..%lld (or -%lld..-%lld)",
                           o->key, v, o->min, o->max, o->max, o->min);
    sp->down_count = (int16_t)(v > 0 ? -v : v);
    return 0;
}

/* A key given for a protocol it means nothing to is a mistake: say so rather than ignore it. */
static int check_applies(parse_ctx_t *pc, const char *key, const yaml_node_t **val, unsigned proto)
{
    static const int http_only[] = {HC_URI, HC_METHOD, HC_HOST, HC_EXPECT};
    const char *name = health_proto_name(proto);
    if (proto == HEALTH_ICMP && val[HC_PORT])
        return config_fail(pc, val[HC_PORT], key, "port: an icmp check has no port");
    for (size_t i = 0; i < TERN_ARRAY_SIZE(http_only); i++) {
        const yaml_node_t *v = val[http_only[i]];
        if (v && proto != HEALTH_HTTP && proto != HEALTH_HTTPS)
            return config_fail(pc, v, key, "%s: only for http and https checks (not %s)",
                               config_health_check_schema[http_only[i]].key, name);
    }
    if (val[HC_TLS_VERIFY] && proto != HEALTH_HTTPS)
        return config_fail(pc, val[HC_TLS_VERIFY], key,
                           "tls_verify: only for https checks (not %s)", name);
    return 0;
}

/* The numbers of a check: port, timeout, up_count, down_count (its protocol is known). */
static int get_numbers(parse_ctx_t *pc, const yaml_node_t *n, const char *key,
                       const yaml_node_t **val, health_spec_t *sp)
{
    const opt_t *rows = config_health_check_schema;
    long long v = 0;
    int rc;
    sp->port = health_spec_default_port(sp->proto);
    if (val[HC_PORT]) {
        if ((rc = config_get_int(pc, val[HC_PORT], key, "port", rows[HC_PORT].min,
                                 rows[HC_PORT].max, &v)) < 0)
            return rc;
        sp->port = (uint16_t)v;
    } else if (sp->proto == HEALTH_TCP) {
        return config_fail(pc, n, key, "missing \"port\" (a tcp check needs one)");
    }
    if (val[HC_TIMEOUT]) {
        if ((rc = config_get_int(pc, val[HC_TIMEOUT], key, "timeout", rows[HC_TIMEOUT].min,
                                 rows[HC_TIMEOUT].max, &v)) < 0)
            return rc;
        sp->timeout_ms = (uint32_t)v;
    }
    if (val[HC_UP_COUNT]) {
        if ((rc = config_get_int(pc, val[HC_UP_COUNT], key, "up_count", rows[HC_UP_COUNT].min,
                                 rows[HC_UP_COUNT].max, &v)) < 0)
            return rc;
        sp->up_count = (int16_t)v;
    }
    if (val[HC_DOWN_COUNT])
        return get_down_count(pc, val[HC_DOWN_COUNT], key, sp);
    return 0;
}

/* The http(s) settings of a check: uri, method, host, expect, tls_verify. */
static int get_http(parse_ctx_t *pc, const char *key, const yaml_node_t **val, health_spec_t *sp)
{
    const opt_t *rows = config_health_check_schema;
    char *s = NULL;
    size_t e = 0;
    int rc;
    if (val[HC_URI]) {
        if ((rc = config_get_str(pc, val[HC_URI], key, "uri", &rows[HC_URI], &s)) < 0)
            return rc;
        sp->uri = s;
    }
    if (val[HC_METHOD]) {
        if ((rc = config_get_enum(pc, val[HC_METHOD], key, "method", method_names,
                                  TERN_ARRAY_SIZE(method_names), &e)) < 0)
            return rc;
        sp->method = (uint8_t)e;
    }
    if (val[HC_HOST]) {
        s = NULL;
        if ((rc = get_name(pc, val[HC_HOST], key, &rows[HC_HOST], false, &s)) < 0)
            return rc;
        sp->host = s;
    }
    if (val[HC_EXPECT] && (rc = get_expect(pc, val[HC_EXPECT], key, sp)) < 0)
        return rc;
    if (val[HC_TLS_VERIFY])
        return config_get_bool(pc, val[HC_TLS_VERIFY], key, "tls_verify", &sp->tls_verify);
    return 0;
}

/* The entry at n into ck (its strings ck's own, also on error). */
static int parse_check(parse_ctx_t *pc, const yaml_node_t *n, const char *key,
                       config_health_check_t *ck)
{
    const opt_t *rows = config_health_check_schema;
    field_t fields[HC_COUNT];
    const yaml_node_t *val[HC_COUNT];
    health_spec_t *sp = &ck->spec;
    char why[160];
    size_t e = 0;
    int rc;
    for (size_t i = 0; i < HC_COUNT; i++)
        fields[i] = (field_t){rows[i].key, rows[i].desc, i == HC_ADDRESS, NULL};
    if ((rc = config_get_fields(pc, n, key, fields, HC_COUNT, val)) < 0)
        return rc;
    health_spec_init(sp);
    ck->line = (unsigned)line_of(n);
    if ((rc = get_address(pc, val[HC_ADDRESS], key, sp)) < 0)
        return rc;
    if (val[HC_OWNER] &&
        (rc = get_name(pc, val[HC_OWNER], key, &rows[HC_OWNER], true, &ck->owner)) < 0)
        return rc;
    if (val[HC_PROTOCOL]) {
        if ((rc = config_get_enum(pc, val[HC_PROTOCOL], key, "protocol", protocol_names,
                                  TERN_ARRAY_SIZE(protocol_names), &e)) < 0)
            return rc;
        sp->proto = (uint8_t)health_proto_parse(protocol_names[e], strlen(protocol_names[e]));
    }
    if ((rc = check_applies(pc, key, val, sp->proto)) < 0 ||
        (rc = get_numbers(pc, n, key, val, sp)) < 0 || (rc = get_http(pc, key, val, sp)) < 0)
        return rc;
    if (health_spec_check(sp, why, sizeof(why)) < 0)
        return config_fail(pc, n, key, "%s", why);
    return 0;
}

/* "192.0.2.1:80 http", "[2001:db8::1] icmp for www.example.test": what makes a check unique. */
static void describe(const config_health_check_t *ck, char *buf, size_t len)
{
    const health_spec_t *sp = &ck->spec;
    char ip[INET6_ADDRSTRLEN], port[8] = "";
    inet_ntop(sp->family == 6 ? AF_INET6 : AF_INET, sp->addr, ip, sizeof(ip));
    if (sp->proto != HEALTH_ICMP)
        snprintf(port, sizeof(port), ":%u", sp->port);
    snprintf(buf, len, "%s%s%s%s %s%s%s", sp->family == 6 && *port ? "[" : "", ip,
             sp->family == 6 && *port ? "]" : "", port, health_proto_name(sp->proto),
             ck->owner ? " for " : "", ck->owner ? ck->owner : "");
}

/* Two entries for one address, port, protocol and owner would make one endpoint twice, with
 * settings of which only one could win. */
static int check_unique(parse_ctx_t *pc, const yaml_node_t *n, const char *key,
                        const config_health_t *h, const config_health_check_t *ck)
{
    const health_spec_t *a = &ck->spec;
    for (size_t i = 0; i < h->nchecks; i++) {
        const config_health_check_t *o = &h->checks[i];
        const health_spec_t *b = &o->spec;
        if (a->family == b->family && memcmp(a->addr, b->addr, a->family == 6 ? 16 : 4) == 0 &&
            a->port == b->port && a->proto == b->proto &&
            (ck->owner == o->owner || (ck->owner && o->owner && !strcmp(ck->owner, o->owner)))) {
            char what[INET6_ADDRSTRLEN + NAME_MAX_TEXT + 32];
            describe(ck, what, sizeof(what));
            return config_fail(pc, n, key, "%s is given twice (first at line %u)", what, o->line);
        }
    }
    return 0;
}

static int add_check(parse_ctx_t *pc, const opt_t *o, const yaml_node_t *parent,
                     const yaml_node_t *n, size_t index)
{
    config_health_t *h = &pc->c->health;
    config_health_check_t ck = {0};
    char key[64];
    config_item_key(key, sizeof(key), o->key, parent, index);
    int rc = parse_check(pc, n, key, &ck);
    if (rc == 0)
        rc = check_unique(pc, n, key, h, &ck);
    if (rc < 0) {
        free_check(&ck);
        return rc;
    }
    h->checks[h->nchecks++] = ck; /* get_checks() made room for every entry */
    return 0;
}

static int get_checks(parse_ctx_t *pc, const yaml_node_t *n, config_health_t *h)
{
    static const opt_t list = {.key = "health: checks"};
    if (is_null(n))
        return 0;
    if (n->type != YAML_SEQUENCE_NODE)
        return config_fail(pc, n, list.key, "expected a list of {address, protocol, ...}, got %s",
                           config_node_kind(n));
    size_t count = (size_t)(n->data.sequence.items.top - n->data.sequence.items.start);
    if (count > HEALTH_MAX_CHECKS)
        return config_fail(pc, node(pc, n->data.sequence.items.start[HEALTH_MAX_CHECKS]), list.key,
                           "more than %d checks (give the rest in the zones' "
                           "health_check)",
                           HEALTH_MAX_CHECKS);
    if (count == 0)
        return 0;
    if (!(h->checks = calloc(count, sizeof(*h->checks))))
        return TERN_ENOMEM;
    return config_each_item(pc, &list, n, add_check);
}

/* ---- the block ---------------------------------------------------------------------------- */

/* tern's "health" at n: replaces every health setting; null = no health checks. */
static int health_parse(parse_ctx_t *pc, const opt_t *o, const yaml_node_t *k, const yaml_node_t *n)
{
    config_health_t *h = &pc->c->health;
    const opt_t *rows = config_health_schema;
    field_t fields[HS_COUNT];
    const yaml_node_t *val[HS_COUNT];
    char key[64];
    int rc;
    if (is_null(n)) {
        config_health_reset(h);
        return 0;
    }
    for (size_t i = 0; i < HS_COUNT; i++)
        fields[i] = (field_t){rows[i].key, rows[i].desc, false, NULL};
    if ((rc = config_get_fields(pc, n, o->key, fields, HS_COUNT, val)) < 0)
        return rc;
    config_health_reset(h);
    h->enabled = true;
    for (size_t i = 0; i < HS_COUNT; i++) {
        if (!val[i])
            continue;
        switch (i) {
        case HS_REDIS:
            snprintf(key, sizeof(key), "%s: redis", o->key);
            rc = config_get_redis(pc, val[i], key, RS_CONNECTION_COUNT, &h->redis);
            break;
        case HS_LOG:
            rc = get_log(pc, val[i], h);
            break;
        case HS_CHECKS:
            rc = get_checks(pc, val[i], h);
            break;
        default:
            rc = config_get_row(pc, val[i], o->key, &rows[i], h);
            break;
        }
        if (rc < 0)
            return rc;
    }
    return 0;
}

/* The same check: every field of the spec (strings by content), and the same owner. */
static bool same_check(const config_health_check_t *x, const config_health_check_t *y)
{
    const health_spec_t *a = &x->spec, *b = &y->spec;
    size_t alen = a->family == 6 ? 16 : 4;
    return a->proto == b->proto && a->family == b->family && a->method == b->method &&
           a->tls_verify == b->tls_verify && a->nexpect == b->nexpect && a->port == b->port &&
           a->up_count == b->up_count && a->down_count == b->down_count &&
           a->timeout_ms == b->timeout_ms && memcmp(a->addr, b->addr, alen) == 0 &&
           memcmp(a->expect, b->expect, a->nexpect * sizeof(a->expect[0])) == 0 &&
           config_same_str(a->uri, b->uri) && config_same_str(a->host, b->host) &&
           config_same_str(x->owner, y->owner);
}

bool config_same_health_checks(const config_health_t *a, const config_health_t *b)
{
    if (a->enabled != b->enabled || a->nchecks != b->nchecks)
        return false;
    for (size_t i = 0; i < a->nchecks; i++)
        if (!same_check(&a->checks[i], &b->checks[i]))
            return false;
    return true;
}

static void health_reset(config_t *c)
{
    config_health_reset(&c->health);
}

static int health_copy(config_t *dst, const config_t *src)
{
    memset(&dst->health, 0, sizeof(dst->health)); /* nothing of it is dst's yet */
    return config_health_copy(&dst->health, &src->health);
}

/* ---- load: load shedding's settings (issue 33) ------------------------------------------- */

/* Its one key lives in config_health_t (the checker polls the loads over its Redis connection),
 * owned by this block: config_health_reset() keeps it. */
static const opt_t config_load_schema[] = {
    /* load shedding's Redis source (issue 33): a second is what the operators' load writers
     * publish at; 100 ms keeps the HGETs of a few thousand records under a few percent of a
     * Redis; an hour is already no live load. */
    {.key = "redis_poll_ms",
     .type = OPT_UINT,
     HFIELD(load_poll_ms),
     .def = 1000,
     .min = 100,
     .max = 3600000,
     .desc = "milliseconds between two reads of the loads in Redis (an "
             "RRset's shed.redis; over health: redis)"},
};

static void load_reset(config_t *c)
{
    config_set_defaults(&c->health, config_load_schema, TERN_ARRAY_SIZE(config_load_schema));
}

/* "load" at n: replaces its settings; null = the defaults. */
static int load_parse(parse_ctx_t *pc, const opt_t *o, const yaml_node_t *k, const yaml_node_t *n)
{
    (void)k;
    enum { NROWS = TERN_ARRAY_SIZE(config_load_schema) };
    field_t fields[NROWS];
    const yaml_node_t *val[NROWS];
    load_reset(pc->c);
    if (is_null(n))
        return 0;
    for (size_t i = 0; i < NROWS; i++)
        fields[i] = (field_t){config_load_schema[i].key, config_load_schema[i].desc, false, NULL};
    int rc = config_get_fields(pc, n, o->key, fields, NROWS, val);
    for (size_t i = 0; rc == 0 && i < NROWS; i++)
        if (val[i])
            rc = config_get_row(pc, val[i], o->key, &config_load_schema[i], &pc->c->health);
    return rc;
}

const conf_block_t config_load_block = {
    .rows = config_load_schema,
    .nrows = TERN_ARRAY_SIZE(config_load_schema),
    .parse = load_parse,
    .reset = load_reset,
};

const conf_block_t config_health_block = {
    .rows = config_health_schema,
    .nrows = HS_COUNT,
    .parse = health_parse,
    .reset = health_reset,
    .copy = health_copy,
};
