/*
 * config.c — the YAML/JSON configuration, driven by one schema table.
 *
 * libyaml loads the whole file into a node tree (configs are small), and every node carries its
 * start mark, so each error can name file:line. The schema below is the only place an option is
 * described: its defaults feed config_init(), its types and bounds drive parsing and validation,
 * its string options drive config_copy() and config_free(), and its descriptions are what
 * config_schema_print() shows. Nested mappings (a zone, a listen entry, a redins server or
 * error_log) have small field tables of their own, checked by get_fields(), so an unknown or
 * duplicate key is an error at any depth. The "redis" mapping has a schema of its own
 * (redis_schema, the same opt_t rows with offsets into config_redis_t), and redins' "handler"
 * maps onto the same struct.
 */
#include "tern/conf/config.h"

#include <arpa/inet.h>
#include <limits.h>
#include <netinet/in.h>
#include <sched.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/un.h>
#include <unistd.h>
#include <yaml.h>

#include "tern/common/err.h"

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
    OPT_REDIS,     /* a mapping of redis_schema's keys into redis, or null for no Redis */
    OPT_REDIS_ADDR, /* redis_schema: "HOST:PORT", "[V6]:PORT" or an absolute UNIX socket path */
    OPT_HANDLER,    /* redins: {redis, zone_reload, max_ttl, geoip, ...}, into redis and geoip_db */
    OPT_GEOIP,      /* redins (older, top level): {enable, db}, into geoip_db */
    OPT_LATER,      /* a redins key tern does not implement yet: always an error saying so */
} opt_type_t;

/* Options that set the same fields share a group; a redins option and any other option of its
 * group may not both appear in one file (which one would win is a guess we refuse to make).
 * GROUP_GEOIP is finer: geoip_db, redins' geoip and handler.geoip may meet as long as only one
 * of them sets geoip_db (a redins geoip with enable false sets nothing); see claim_geoip(). */
enum { GROUP_NONE = 0, GROUP_LISTEN, GROUP_LOG, GROUP_REDIS, GROUP_GEOIP };

typedef struct opt {
    const char *key;
    opt_type_t type;
    size_t offset; /* of the field in config_t */
    size_t size;   /* of that field (OPT_UINT, OPT_WORKERS, OPT_ENUM) */
    long long def; /* OPT_UINT, OPT_WORKERS, OPT_BOOL, OPT_ENUM */
    long long min; /* OPT_UINT, OPT_WORKERS: value; OPT_STR, OPT_PATH, OPT_ADDR: length */
    long long max;
    const char *const *names; /* OPT_ENUM: the values, max + 1 of them */
    int group;
    bool empty_unsets; /* OPT_STR: "" unsets too (redins writes "password": "" for none) */
    const char *desc;  /* OPT_LATER: what the redins key is for */
} opt_t;

#define FIELD(f)  .offset = offsetof(config_t, f), .size = sizeof(((config_t *)0)->f)
#define RFIELD(f) .offset = offsetof(config_redis_t, f), .size = sizeof(((config_redis_t *)0)->f)

_Static_assert(sizeof(log_level_t) == sizeof(uint32_t) && sizeof(log_target_t) == sizeof(uint32_t),
               "OPT_ENUM fields are stored as 32-bit integers");

/* RFC 1035 §3.3: a CHAOS TXT answer is one <character-string>, at most 255 bytes. */
#define TXT_MAX 255
/* LOGIN_NAME_MAX: the longest user or group name the C library handles. */
#define NAME_MAX_LEN (LOGIN_NAME_MAX - 1)
/* A UNIX socket path must fit sun_path with its terminating NUL (107 bytes on Linux); checked
 * here, at load, rather than as a bind() failure at startup. */
#define SUN_PATH_MAX ((long long)sizeof(((struct sockaddr_un *)0)->sun_path) - 1)
/* RFC 2181 §8: a TTL is at most 2^31 - 1 seconds. */
#define TTL_MAX 2147483647LL
/* Redis timeouts in milliseconds: a Redis that has not answered in ten minutes is gone by any
 * measure. */
#define REDIS_TIMEOUT_MAX 600000
/* A verify interval of a week: longer is "never" in practice, which 0 says plainly. */
#define ZONE_RELOAD_MAX 604800
/* Redis accepts much longer strings; 1024 bytes is beyond any real password, key prefix or
 * channel name and keeps messages about them printable. */
#define REDIS_STR_MAX 1024

/* The keys of a tern "redis:" mapping, into config_t.redis. The defaults are config_init()'s;
 * 0 and NULL mean the source's own default (tern/load/redis_source.h), except zone_reload. */
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
    RS_COUNT
};

static const opt_t redis_schema[RS_COUNT] = {
    [RS_ADDRESS] = {.key = "address",
                    .type = OPT_REDIS_ADDR,
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
};

_Static_assert(sizeof(unsigned) == sizeof(uint32_t), "redis_schema stores unsigned as 32 bits");

static const opt_t schema[] = {
    {.key = "listen",
     .type = OPT_LISTEN,
     .group = GROUP_LISTEN,
     .desc = "addresses to serve: \"ADDR:PORT\", \"[V6]:PORT\" or {address, udp, tcp}; one or a "
             "list"},
    {.key = "workers",
     .type = OPT_WORKERS,
     FIELD(workers),
     .def = 1,
     .min = 1,
     .max = CONFIG_MAX_WORKERS,
     .desc = "worker threads, each with its own sockets; \"auto\" = one per usable CPU"},
    {.key = "zones",
     .type = OPT_ZONES,
     .desc = "list of {origin: NAME, file: PATH}; PATH relative to the config file's directory"},
    /* 512 is the RFC 1035 floor; 4096 the largest payload the UDP buffers are sized for. */
    {.key = "edns_max_udp",
     .type = OPT_UINT,
     FIELD(edns_max_udp),
     .def = 1232,
     .min = 512,
     .max = 4096,
     .desc = "EDNS UDP payload size advertised and the cap on the client's (bytes)"},
    {.key = "identity",
     .type = OPT_STR,
     FIELD(identity),
     .max = TXT_MAX,
     .desc = "CHAOS TXT id.server / hostname.bind answer; unset = REFUSED"},
    {.key = "version",
     .type = OPT_STR,
     FIELD(version),
     .max = TXT_MAX,
     .desc = "CHAOS TXT version.bind answer; unset = REFUSED"},
    /* RFC 7766 §6.2.3 wants idle timeouts of seconds, not minutes: an hour is the sanity cap. */
    {.key = "tcp_idle_timeout",
     .type = OPT_UINT,
     FIELD(tcp_idle_timeout),
     .def = 10,
     .min = 1,
     .max = 3600,
     .desc = "seconds a TCP connection may stay without a complete query or write progress"},
    /* Each connection preallocates two 64 KiB buffers; 65536 per worker is already 8 GiB. */
    {.key = "tcp_max_connections",
     .type = OPT_UINT,
     FIELD(tcp_max_connections),
     .def = 256,
     .min = 1,
     .max = 65536,
     .desc = "TCP connections per worker; beyond this new connections are closed at once"},
    /* The idle timeout alone lets a peer that keeps querying hold a slot forever; a total
     * lifetime bounds that, as NSD bounds a session by tcp-timeout (default 120 s) and
     * tcp-query-count, and Knot each message by tcp-io-timeout (500 ms). 120 s, NSD's default, is
     * far beyond one client's burst of pipelined queries; a day is the sanity cap. */
    {.key = "tcp_max_lifetime",
     .type = OPT_UINT,
     FIELD(tcp_max_lifetime),
     .def = 120,
     .min = 1,
     .max = 86400,
     .desc = "seconds a TCP connection may stay open from accept, however busy it is"},
    /* Answers queued but not yet taken by the kernel: past this a connection stops reading
     * (backpressure) until the peer takes its answers. 64 coalesces a pipelining client's answers
     * into few writes while bounding the work one peer can make us queue ahead of it; beyond
     * 4681 (the 64 KiB write queue full of minimal answers) the value changes nothing. */
    {.key = "tcp_max_inflight",
     .type = OPT_UINT,
     FIELD(tcp_max_inflight),
     .def = 64,
     .min = 1,
     .max = 65535,
     .desc = "answers queued on one TCP connection, unwritten, before it stops reading"},
    {.key = "udp_mmsg",
     .type = OPT_BOOL,
     FIELD(udp_mmsg),
     .def = 1,
     .desc = "batch UDP with recvmmsg/sendmmsg; false = one recvmsg/sendmsg per datagram"},
    {.key = "log_level",
     .type = OPT_ENUM,
     FIELD(log_level),
     .def = LOG_LVL_INFO,
     .max = LOG_LVL_COUNT - 1,
     .names = log_level_names,
     .group = GROUP_LOG,
     .desc = "log messages up to this severity"},
    {.key = "log_target",
     .type = OPT_ENUM,
     FIELD(log_target),
     .def = LOG_TARGET_STDERR,
     .max = LOG_TARGET_COUNT - 1,
     .names = log_target_names,
     .group = GROUP_LOG,
     .desc = "where log lines go; syslog uses facility daemon"},
    {.key = "user",
     .type = OPT_STR,
     FIELD(user),
     .min = 1,
     .max = NAME_MAX_LEN,
     .desc = "account (name or uid) to switch to once sockets are bound; unset = stay"},
    {.key = "group",
     .type = OPT_STR,
     FIELD(group),
     .min = 1,
     .max = NAME_MAX_LEN,
     .desc = "group (name or gid) to switch to; unset = the user's primary group"},
    {.key = "allow_root",
     .type = OPT_BOOL,
     FIELD(allow_root),
     .def = 0,
     .desc = "allow serving as root (no user, or user root); false refuses to"},
    {.key = "pid_file",
     .type = OPT_PATH,
     FIELD(pid_file),
     .min = 1,
     .max = PATH_MAX - 1,
     .desc = "file to write the pid to, relative to the config file's directory; unset = none"},
    {.key = "control_socket",
     .type = OPT_PATH,
     FIELD(control_socket),
     .min = 1,
     .max = SUN_PATH_MAX,
     .desc = "UNIX socket for ternctl, relative to the config file's directory; unset = none"},
    {.key = "asn_table",
     .type = OPT_PATH,
     FIELD(asn_table),
     .min = 1,
     .max = PATH_MAX - 1,
     .desc = "IP-to-ASN table from 'ternctl asn compile', relative to the config; unset = none"},
    {.key = "asn_db",
     .type = OPT_PATH,
     FIELD(asn_db),
     .min = 1,
     .max = PATH_MAX - 1,
     .desc = "MaxMind ASN database (GeoLite2-ASN .mmdb), compiled into an ASN table cached "
             "beside it; unset = none"},
    {.key = "geoip_db",
     .type = OPT_PATH,
     FIELD(geoip_db),
     .min = 1,
     .max = PATH_MAX - 1,
     .group = GROUP_GEOIP,
     .desc = "MaxMind DB for clients' country/location (IPv6 too if a v6 DB); unset = none"},
    {.key = "geoip_db_v6",
     .type = OPT_PATH,
     FIELD(geoip_db_v6),
     .min = 1,
     .max = PATH_MAX - 1,
     .desc = "MaxMind DB for IPv6 clients, if in a separate file; unset = geoip_db"},
    {.key = "metrics_listen",
     .type = OPT_ADDR,
     FIELD(metrics_listen),
     .min = 1,
     .max = sizeof(((config_listen_t *)0)->text) - 1,
     .desc = "\"ADDR:PORT\" of the Prometheus HTTP endpoint (/metrics); unset = none"},
    {.key = "redis",
     .type = OPT_REDIS,
     .group = GROUP_REDIS,
     .desc = "zones kept in Redis (redins' layout): a mapping of these keys; unset or ~ = none"},

    /* redins's config.json: the keys that map onto the options above ... */
    {.key = "server",
     .type = OPT_SERVER,
     .group = GROUP_LISTEN,
     .desc = "list of {ip, port, protocol: udp|tcp}, into listen (same ip and port: one entry)"},
    {.key = "error_log",
     .type = OPT_ERROR_LOG,
     .group = GROUP_LOG,
     .desc = "{enable: true, level, target: stderr|stdout|syslog, format: text}, into log_*"},
    {.key = "handler",
     .type = OPT_HANDLER,
     .group = GROUP_REDIS,
     .desc = "{redis, zone_reload, max_ttl, geoip, ...}, into redis and geoip_db:"},
    /* older redins kept geoip (and upstream and healthcheck, below) at the top level */
    {.key = "geoip",
     .type = OPT_GEOIP,
     .group = GROUP_GEOIP,
     .desc = "(older redins) {enable, db}, into geoip_db"},
    /* ... and those that do not (yet): refused, never ignored. */
    {.key = "log", .type = OPT_LATER, .desc = "the per-query event log"},
    {.key = "upstream", .type = OPT_LATER, .desc = "forwarding to upstream resolvers"},
    {.key = "healthcheck", .type = OPT_LATER, .desc = "health checks of answer addresses"},
    {.key = "ratelimit", .type = OPT_LATER, .desc = "per-client rate limits"},
};

#define NOPTS TERN_ARRAY_SIZE(schema)

typedef struct parse_ctx {
    config_t *c;
    yaml_document_t *doc;
    const char *path;
    char *dir; /* directory of path with a trailing '/', or NULL for the cwd */
    char *err;
    size_t errlen;
    const yaml_node_t *seen[NOPTS];        /* key node of each option given in the file */
    size_t listen_line[CONFIG_MAX_LISTEN]; /* where each listen entry was given */
    const yaml_node_t *geoip_by;           /* key node of what set geoip_db, if anything did */
    const char *geoip_by_name;             /* its name: geoip_db, geoip or handler: geoip */
} parse_ctx_t;

static int fail(parse_ctx_t *l, const yaml_node_t *n, const char *key, const char *fmt, ...)
    TERN_PRINTF(4, 5);

static int fail(parse_ctx_t *l, const yaml_node_t *n, const char *key, const char *fmt, ...)
{
    int k = snprintf(l->err, l->errlen, "%s:%zu: %s%s", l->path, n->start_mark.line + 1,
                     key ? key : "", key ? ": " : "");
    if (k >= 0 && (size_t)k < l->errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(l->err + k, l->errlen - (size_t)k, fmt, ap);
        va_end(ap);
    }
    return TERN_ESYNTAX;
}

static size_t line_of(const yaml_node_t *n)
{
    return n->start_mark.line + 1;
}

static const char *scalar(const yaml_node_t *n)
{
    return (const char *)n->data.scalar.value;
}

static bool is_plain(const yaml_node_t *n)
{
    return n->type == YAML_SCALAR_NODE && n->data.scalar.style == YAML_PLAIN_SCALAR_STYLE;
}

/* YAML's null: ~, null or nothing at all, unquoted. */
static bool is_null(const yaml_node_t *n)
{
    const char *s = is_plain(n) ? (const char *)n->data.scalar.value : NULL;
    return s && (*s == '\0' || strcmp(s, "~") == 0 || strcmp(s, "null") == 0);
}

static const yaml_node_t *node(const parse_ctx_t *l, int id)
{
    return yaml_document_get_node(l->doc, id);
}

static const char *node_kind(const yaml_node_t *n)
{
    switch (n->type) {
    case YAML_SCALAR_NODE:
        return is_plain(n) ? "a plain scalar" : "a string";
    case YAML_SEQUENCE_NODE:
        return "a list";
    case YAML_MAPPING_NODE:
        return "a mapping";
    default:
        return "nothing";
    }
}

/* "a, b or c" from count names. */
static void join_names(const char *const *names, size_t count, char *buf, size_t len)
{
    size_t off = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < count && off < len; i++) {
        const char *sep = i == 0 ? "" : i + 1 == count ? " or " : ", ";
        int k = snprintf(buf + off, len - off, "%s%s", sep, names[i]);
        if (k < 0)
            break;
        off += (size_t)k;
    }
}

/* Plain decimal integer, optionally negative; anything else (hex, floats, quotes) is refused so
 * "10" in JSON or 1e3 in YAML are type errors rather than silent conversions. */
static bool parse_int(const yaml_node_t *n, long long *out)
{
    if (!is_plain(n))
        return false;
    const char *s = scalar(n);
    const char *p = s + (*s == '-');
    if (*p == '\0' || strspn(p, "0123456789") != strlen(p) || strlen(p) > 12)
        return false;
    *out = strtoll(s, NULL, 10);
    return true;
}

static bool parse_bool(const yaml_node_t *n, bool *out)
{
    if (is_plain(n) && strcasecmp(scalar(n), "true") == 0)
        *out = true;
    else if (is_plain(n) && strcasecmp(scalar(n), "false") == 0)
        *out = false;
    else
        return false;
    return true;
}

/* Scalar text without an embedded NUL (a "\0" escape would cut it short silently). */
static bool is_text(const yaml_node_t *n)
{
    return n->type == YAML_SCALAR_NODE && strlen(scalar(n)) == n->data.scalar.length;
}

/* An integer in [min, max] at n, or an error naming key and field. */
static int get_int(parse_ctx_t *l, const yaml_node_t *n, const char *key, const char *field,
                   long long min, long long max, long long *out)
{
    const char *sep = field ? ": " : "";
    field = field ? field : "";
    if (!parse_int(n, out)) {
        if (n->type == YAML_SCALAR_NODE)
            return fail(l, n, key, "%s%sexpected an integer, got \"%s\"", field, sep, scalar(n));
        return fail(l, n, key, "%s%sexpected an integer, got %s", field, sep, node_kind(n));
    }
    if (*out < min || *out > max)
        return fail(l, n, key, "%s%s%lld is out of range %lld..%lld", field, sep, *out, min, max);
    return 0;
}

static int get_bool(parse_ctx_t *l, const yaml_node_t *n, const char *key, const char *field,
                    bool *out)
{
    if (!parse_bool(n, out))
        return fail(l, n, key, "%s%sexpected true or false, got %s", field ? field : "",
                    field ? ": " : "", node_kind(n));
    return 0;
}

/* One of names (count of them), as its index. */
static int get_enum(parse_ctx_t *l, const yaml_node_t *n, const char *key, const char *field,
                    const char *const *names, size_t count, size_t *out)
{
    const char *sep = field ? ": " : "";
    char want[128];
    field = field ? field : "";
    join_names(names, count, want, sizeof(want));
    if (!is_text(n))
        return fail(l, n, key, "%s%sexpected %s, got %s", field, sep, want, node_kind(n));
    for (size_t i = 0; i < count; i++) {
        if (strcmp(names[i], scalar(n)) == 0) {
            *out = i;
            return 0;
        }
    }
    return fail(l, n, key, "%s%sexpected %s, got \"%s\"", field, sep, want, scalar(n));
}

/* ---- nested mappings ---------------------------------------------------------------------- */

typedef struct field {
    const char *key;
    const char *desc; /* what the value is, for "missing" errors */
    bool required;
    const char *later; /* non-NULL: a redins key tern refuses for now; what it is for */
} field_t;

/* Nested mappings have at most this many fields (tern's redis has 15). */
#define MAX_FIELDS 16

/* Check that n is a mapping whose keys are among fields, each at most once, none refused, every
 * required one present; val[i] gets each field's value node or NULL. Errors are "key: ...". */
static int get_fields(parse_ctx_t *l, const yaml_node_t *n, const char *key, const field_t *fields,
                      size_t nfields, const yaml_node_t **val)
{
    const char *names[MAX_FIELDS];
    const yaml_node_t *keys[MAX_FIELDS] = {NULL};
    size_t nnames = 0;
    char want[256];
    for (size_t i = 0; i < nfields; i++) {
        val[i] = NULL;
        if (!fields[i].later)
            names[nnames++] = fields[i].key;
    }
    want[0] = '\0';
    for (size_t i = 0, off = 0; i < nnames && off < sizeof(want); i++) {
        int k = snprintf(want + off, sizeof(want) - off, "%s%s", i ? ", " : "", names[i]);
        off += k < 0 ? sizeof(want) : (size_t)k;
    }
    if (n->type != YAML_MAPPING_NODE)
        return fail(l, n, key, "expected a mapping {%s}, got %s", want, node_kind(n));
    for (yaml_node_pair_t *p = n->data.mapping.pairs.start; p < n->data.mapping.pairs.top; p++) {
        const yaml_node_t *k = node(l, p->key);
        if (k->type != YAML_SCALAR_NODE)
            return fail(l, k, key, "keys must be strings, got %s", node_kind(k));
        size_t i = 0;
        while (i < nfields && strcmp(fields[i].key, scalar(k)) != 0)
            i++;
        if (i == nfields)
            return fail(l, k, key, "unknown key \"%s\" (want %s)", scalar(k), want);
        if (keys[i])
            return fail(l, k, key, "duplicate key \"%s\" (first at line %zu)", scalar(k),
                        line_of(keys[i]));
        if (fields[i].later)
            return fail(l, k, key, "%s: not supported yet (%s)", fields[i].key, fields[i].later);
        keys[i] = k;
        val[i] = node(l, p->value);
    }
    for (size_t i = 0; i < nfields; i++)
        if (fields[i].required && !val[i])
            return fail(l, n, key, "missing \"%s\" (%s)", fields[i].key, fields[i].desc);
    return 0;
}

/* "key" for a single item, "key[index]" for an item of a sequence. */
static void item_key(char *buf, size_t len, const char *key, const yaml_node_t *parent,
                     size_t index)
{
    if (parent->type == YAML_SEQUENCE_NODE)
        snprintf(buf, len, "%s[%zu]", key, index);
    else
        snprintf(buf, len, "%s", key);
}

/* Call fn for n's items if it is a sequence, else for n itself (index 0). */
typedef int (*item_fn)(parse_ctx_t *l, const opt_t *o, const yaml_node_t *parent,
                       const yaml_node_t *n, size_t index);

static int each_item(parse_ctx_t *l, const opt_t *o, const yaml_node_t *n, item_fn fn)
{
    if (n->type != YAML_SEQUENCE_NODE)
        return fn(l, o, n, n, 0);
    size_t index = 0;
    for (yaml_node_item_t *it = n->data.sequence.items.start; it < n->data.sequence.items.top;
         it++, index++) {
        int r = fn(l, o, n, node(l, *it), index);
        if (r < 0)
            return r;
    }
    return 0;
}

/* dir + path for a relative path (malloc'd), or a copy of path. NULL: out of memory. */
static char *resolve_path(const parse_ctx_t *l, const char *path)
{
    if (path[0] == '/' || !l->dir)
        return strdup(path);
    size_t dl = strlen(l->dir), pl = strlen(path);
    char *joined = malloc(dl + pl + 1);
    if (joined) {
        memcpy(joined, l->dir, dl);
        memcpy(joined + dl, path, pl + 1);
    }
    return joined;
}

/* ---- scalar options ----------------------------------------------------------------------- */

static char **str_field(config_t *c, const opt_t *o)
{
    return (char **)(void *)((char *)c + o->offset);
}

static const char *str_value(const config_t *c, const opt_t *o)
{
    const char *p;
    memcpy(&p, (const char *)c + o->offset, sizeof(p));
    return p;
}

static bool is_str_opt(const opt_t *o)
{
    return o->type == OPT_STR || o->type == OPT_PATH || o->type == OPT_ADDR;
}

/* v into the field of o in base (a config_t, or a config_redis_t for redis_schema). */
static void store_uint(void *base, const opt_t *o, long long v)
{
    char *field = (char *)base + o->offset;
    if (o->size == sizeof(uint16_t)) {
        uint16_t u = (uint16_t)v;
        memcpy(field, &u, sizeof(u));
    } else {
        uint32_t u = (uint32_t)v;
        memcpy(field, &u, sizeof(u));
    }
}

static int set_uint(parse_ctx_t *l, const opt_t *o, const yaml_node_t *n, bool allow_auto)
{
    long long v = 0;
    if (allow_auto && n->type == YAML_SCALAR_NODE && strcmp(scalar(n), "auto") == 0) {
        store_uint(l->c, o, config_auto_workers());
        return 0;
    }
    if (allow_auto && !parse_int(n, &v)) {
        if (n->type == YAML_SCALAR_NODE)
            return fail(l, n, o->key, "expected an integer or \"auto\", got \"%s\"", scalar(n));
        return fail(l, n, o->key, "expected an integer or \"auto\", got %s", node_kind(n));
    }
    int r = get_int(l, n, o->key, NULL, o->min, o->max, &v);
    if (r < 0)
        return r;
    store_uint(l->c, o, v);
    return 0;
}

static int set_bool(parse_ctx_t *l, const opt_t *o, const yaml_node_t *n)
{
    bool v;
    int r = get_bool(l, n, o->key, NULL, &v);
    if (r < 0)
        return r;
    memcpy((char *)l->c + o->offset, &v, sizeof(v));
    return 0;
}

static int set_enum(parse_ctx_t *l, const opt_t *o, const yaml_node_t *n)
{
    size_t v = 0;
    int r = get_enum(l, n, o->key, NULL, o->names, (size_t)o->max + 1, &v);
    if (r < 0)
        return r;
    store_uint(l->c, o, (long long)v);
    return 0;
}

/* An OPT_STR, OPT_PATH or OPT_ADDR value at n into *out, replacing it; null unsets it (NULL), and
 * so does "" for an empty_unsets option. Errors are "key: field: ..." (field may be NULL). */
static int get_str(parse_ctx_t *l, const yaml_node_t *n, const char *key, const char *field,
                   const opt_t *o, char **out)
{
    const char *sep = field ? ": " : "";
    field = field ? field : "";
    if (n->type != YAML_SCALAR_NODE)
        return fail(l, n, key, "%s%sexpected a string, got %s", field, sep, node_kind(n));
    const char *s = scalar(n);
    if (is_null(n) || (o->empty_unsets && is_text(n) && *s == '\0')) {
        free(*out);
        *out = NULL;
        return 0;
    }
    if (!is_text(n))
        return fail(l, n, key, "%s%scontains a NUL byte", field, sep);
    if ((long long)strlen(s) < o->min)
        return fail(l, n, key, "%s%smust not be empty", field, sep);
    if (o->type == OPT_ADDR) {
        config_listen_t tmp;
        if (config_parse_listen(&tmp, s) < 0)
            return fail(l, n, key, "%s%sbad address \"%s\" (want ADDR:PORT or [V6]:PORT)", field,
                        sep, s);
    }
    char *copy = o->type == OPT_PATH ? resolve_path(l, s) : strdup(s);
    if (!copy)
        return TERN_ENOMEM;
    size_t len = strlen(copy);
    if ((long long)len > o->max) {
        int r = fail(l, n, key, "%s%s\"%s\" is %zu bytes long, more than the %lld allowed", field,
                     sep, copy, len, o->max);
        free(copy);
        return r;
    }
    free(*out);
    *out = copy;
    return 0;
}

static int set_str(parse_ctx_t *l, const opt_t *o, const yaml_node_t *n)
{
    return get_str(l, n, o->key, NULL, o, str_field(l->c, o));
}

/* ---- listen ------------------------------------------------------------------------------- */

static uint16_t listen_port(const config_listen_t *e)
{
    if (e->addr.ss_family == AF_INET)
        return ntohs(((const struct sockaddr_in *)&e->addr)->sin_port);
    return ntohs(((const struct sockaddr_in6 *)&e->addr)->sin6_port);
}

/* Same family, address and port (the text as written does not matter). */
static bool same_endpoint(const config_listen_t *a, const config_listen_t *b)
{
    if (a->addr.ss_family != b->addr.ss_family)
        return false;
    if (a->addr.ss_family == AF_INET) {
        const struct sockaddr_in *x = (const struct sockaddr_in *)&a->addr;
        const struct sockaddr_in *y = (const struct sockaddr_in *)&b->addr;
        return x->sin_port == y->sin_port && x->sin_addr.s_addr == y->sin_addr.s_addr;
    }
    const struct sockaddr_in6 *x = (const struct sockaddr_in6 *)&a->addr;
    const struct sockaddr_in6 *y = (const struct sockaddr_in6 *)&b->addr;
    return x->sin6_port == y->sin6_port &&
           memcmp(&x->sin6_addr, &y->sin6_addr, sizeof(x->sin6_addr)) == 0;
}

/* Append e, or merge it into an earlier entry for the same address and port when their
 * protocols do not overlap (redins lists UDP and TCP separately). The same protocol twice on a
 * fixed port is an error: SO_REUSEPORT would let both bind and silently split the traffic. Port 0
 * entries are each their own ephemeral port and never merge. */
static int put_listen(parse_ctx_t *l, const yaml_node_t *n, const char *key,
                      const config_listen_t *e)
{
    config_t *c = l->c;
    for (size_t i = 0; i < c->nlisten && listen_port(e) != 0; i++) {
        config_listen_t *o = &c->listen[i];
        if (!same_endpoint(o, e))
            continue;
        if ((o->udp && e->udp) || (o->tcp && e->tcp))
            return fail(l, n, key, "%s on %s is given twice (first at line %zu)",
                        o->udp && e->udp ? "udp" : "tcp", e->text, l->listen_line[i]);
        o->udp |= e->udp;
        o->tcp |= e->tcp;
        return 0;
    }
    if (c->nlisten >= CONFIG_MAX_LISTEN)
        return fail(l, n, key, "more than %d addresses", CONFIG_MAX_LISTEN);
    l->listen_line[c->nlisten] = line_of(n);
    c->listen[c->nlisten++] = *e;
    return 0;
}

static const field_t listen_fields[] = {
    {"address", "\"ADDR:PORT\" or \"[V6]:PORT\"", true, NULL},
    {"udp", "serve UDP, default true", false, NULL},
    {"tcp", "serve TCP, default true", false, NULL},
};

static int parse_address(parse_ctx_t *l, const yaml_node_t *n, const char *key, const char *field,
                         config_listen_t *e)
{
    const char *want = field ? "\"ADDR:PORT\"" : "\"ADDR:PORT\" or {address, udp, tcp}";
    const char *sep = field ? ": " : "";
    field = field ? field : "";
    if (!is_text(n))
        return fail(l, n, key, "%s%sexpected %s, got %s", field, sep, want, node_kind(n));
    if (config_parse_listen(e, scalar(n)) < 0)
        return fail(l, n, key, "%s%sbad address \"%s\" (want ADDR:PORT or [V6]:PORT)", field, sep,
                    scalar(n));
    return 0;
}

static int add_listen_item(parse_ctx_t *l, const opt_t *o, const yaml_node_t *parent,
                           const yaml_node_t *n, size_t index)
{
    char key[64];
    config_listen_t e;
    int r;
    item_key(key, sizeof(key), o->key, parent, index);
    if (n->type != YAML_MAPPING_NODE) {
        if ((r = parse_address(l, n, key, NULL, &e)) < 0)
            return r;
        return put_listen(l, n, key, &e);
    }
    const yaml_node_t *val[TERN_ARRAY_SIZE(listen_fields)];
    if ((r = get_fields(l, n, key, listen_fields, TERN_ARRAY_SIZE(listen_fields), val)) < 0)
        return r;
    if ((r = parse_address(l, val[0], key, "address", &e)) < 0)
        return r;
    if (val[1] && (r = get_bool(l, val[1], key, "udp", &e.udp)) < 0)
        return r;
    if (val[2] && (r = get_bool(l, val[2], key, "tcp", &e.tcp)) < 0)
        return r;
    if (!e.udp && !e.tcp)
        return fail(l, n, key, "udp and tcp are both false");
    return put_listen(l, n, key, &e);
}

static int set_listen(parse_ctx_t *l, const opt_t *o, const yaml_node_t *n)
{
    l->c->nlisten = 0; /* the file's list replaces whatever was there */
    return each_item(l, o, n, add_listen_item);
}

/* redins "server": {ip, port, protocol}; the defaults of redins for ip and port are not taken
 * over (a config that names no address is a mistake here, see main.c), protocol's is. */
static const field_t server_fields[] = {
    {"ip", "IPv4 or IPv6 address", true, NULL},
    {"port", "0..65535", true, NULL},
    {"protocol", "udp or tcp, default udp", false, NULL},
};

static int add_server_item(parse_ctx_t *l, const opt_t *o, const yaml_node_t *parent,
                           const yaml_node_t *n, size_t index)
{
    static const char *const protocols[] = {"udp", "tcp"};
    char key[64], text[sizeof(((config_listen_t *)0)->text)];
    const yaml_node_t *val[TERN_ARRAY_SIZE(server_fields)];
    long long port = 0;
    size_t proto = 0;
    config_listen_t e;
    int r;
    item_key(key, sizeof(key), o->key, parent, index);
    if ((r = get_fields(l, n, key, server_fields, TERN_ARRAY_SIZE(server_fields), val)) < 0)
        return r;
    if (!is_text(val[0]) || scalar(val[0])[0] == '\0')
        return fail(l, val[0], key, "ip: expected an address, got %s", node_kind(val[0]));
    if ((r = get_int(l, val[1], key, "port", 0, 65535, &port)) < 0)
        return r;
    if (val[2] && (r = get_enum(l, val[2], key, "protocol", protocols, 2, &proto)) < 0)
        return r;
    const char *ip = scalar(val[0]);
    int k = snprintf(text, sizeof(text), strchr(ip, ':') ? "[%s]:%lld" : "%s:%lld", ip, port);
    if (k < 0 || (size_t)k >= sizeof(text) || config_parse_listen(&e, text) < 0)
        return fail(l, val[0], key, "ip: bad address \"%s\"", ip);
    e.udp = proto == 0;
    e.tcp = proto == 1;
    return put_listen(l, n, key, &e);
}

static int set_server(parse_ctx_t *l, const opt_t *o, const yaml_node_t *n)
{
    l->c->nlisten = 0;
    if (n->type != YAML_SEQUENCE_NODE && n->type != YAML_MAPPING_NODE)
        return fail(l, n, o->key, "expected a list of {ip, port, protocol}, got %s", node_kind(n));
    return each_item(l, o, n, add_server_item);
}

/* ---- redins error_log --------------------------------------------------------------------- */

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

static int set_error_log(parse_ctx_t *l, const opt_t *o, const yaml_node_t *n)
{
    const yaml_node_t *val[TERN_ARRAY_SIZE(error_log_fields)];
    size_t v = 0;
    bool enable;
    int r;
    r = get_fields(l, n, o->key, error_log_fields, TERN_ARRAY_SIZE(error_log_fields), val);
    if (r < 0)
        return r;
    if (val[0]) {
        if ((r = get_bool(l, val[0], o->key, "enable", &enable)) < 0)
            return r;
        if (!enable)
            return fail(l, val[0], o->key,
                        "enable: false is not supported (errors are always "
                        "logged; level error logs the least)");
    }
    if (val[1]) {
        if ((r = get_enum(l, val[1], o->key, "level", log_level_names, LOG_LVL_COUNT, &v)) < 0)
            return r;
        l->c->log_level = (log_level_t)v;
    }
    if (val[2]) {
        /* redins's other targets are refused with a reason rather than as unknown values */
        if (is_text(val[2]) &&
            (strcmp(scalar(val[2]), "file") == 0 || strcmp(scalar(val[2]), "udp") == 0))
            return fail(l, val[2], o->key,
                        "target: \"%s\" is not supported yet (use stderr, stdout or syslog)",
                        scalar(val[2]));
        r = get_enum(l, val[2], o->key, "target", log_target_names, LOG_TARGET_COUNT, &v);
        if (r < 0)
            return r;
        l->c->log_target = (log_target_t)v;
    }
    if (val[3] && (!is_text(val[3]) || strcmp(scalar(val[3]), "text") != 0)) {
        if (val[3]->type == YAML_SCALAR_NODE)
            return fail(l, val[3], o->key, "format: only \"text\" is supported, got \"%s\"",
                        scalar(val[3]));
        return fail(l, val[3], o->key, "format: only \"text\" is supported, got %s",
                    node_kind(val[3]));
    }
    return 0;
}

/* ---- redis -------------------------------------------------------------------------------- */

static bool parse_port(const char *s, uint16_t *port);

/* The strings of config_redis_t, for config_free(), config_copy() and config_same_redis(). */
static const size_t redis_strs[] = {
    offsetof(config_redis_t, host),     offsetof(config_redis_t, unix_path),
    offsetof(config_redis_t, password), offsetof(config_redis_t, prefix),
    offsetof(config_redis_t, suffix),   offsetof(config_redis_t, changes_channel),
};

static char **redis_str(config_redis_t *r, size_t i)
{
    return (char **)(void *)((char *)r + redis_strs[i]);
}

static const char *redis_str_value(const config_redis_t *r, size_t i)
{
    const char *p;
    memcpy(&p, (const char *)r + redis_strs[i], sizeof(p));
    return p;
}

/* Free r's strings and set it to the defaults (no Redis; zone_reload 600). */
static void redis_reset(config_redis_t *r)
{
    for (size_t i = 0; i < TERN_ARRAY_SIZE(redis_strs); i++)
        free(*redis_str(r, i));
    memset(r, 0, sizeof(*r));
    for (size_t i = 0; i < RS_COUNT; i++)
        if (redis_schema[i].type == OPT_UINT)
            store_uint(r, &redis_schema[i], redis_schema[i].def);
}

/* A host for hiredis: an IPv4 address or a DNS name (hiredis resolves it when it connects).
 * Digits and dots alone must be a whole dotted quad: getaddrinfo() would take "10.1" for
 * 10.0.0.1. */
static bool is_host(const char *h)
{
    static const char name_chars[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                     "0123456789.-_";
    struct in_addr a;
    size_t n = strlen(h);
    if (n == 0 || n > 253 || strspn(h, name_chars) != n || h[0] == '.' || h[0] == '-')
        return false;
    return strspn(h, "0123456789.") != n || inet_pton(AF_INET, h, &a) == 1;
}

/* An IPv6 address (unbracketed), or what is_host() accepts. */
static bool is_ip_or_host(const char *h)
{
    struct in6_addr a6;
    return strchr(h, ':') ? inet_pton(AF_INET6, h, &a6) == 1 : is_host(h);
}

/* "HOST:PORT" or "[V6]:PORT", port 1..65535, into r's host (malloc'd, without brackets) and
 * port; r's unix_path is cleared. 0, TERN_EINVAL or TERN_ENOMEM. */
static int redis_set_host_port(config_redis_t *r, const char *s)
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
    if (!(bracketed ? inet_pton(AF_INET6, host, &a6) == 1 : is_host(host)) ||
        !parse_port(port_text, &port) || port == 0)
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
static int redis_set_unix(parse_ctx_t *l, const yaml_node_t *n, const char *key, config_redis_t *r,
                          const char *path)
{
    char *copy = resolve_path(l, path);
    if (!copy)
        return TERN_ENOMEM;
    size_t len = strlen(copy);
    if ((long long)len > SUN_PATH_MAX) {
        int rc = fail(l, n, key, "address: \"%s\" is %zu bytes long, more than the %lld allowed",
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
static int get_redis_address(parse_ctx_t *l, const yaml_node_t *n, const char *key,
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
        return fail(l, n, key, "address: expected %s, got %s", want, node_kind(n));
    const char *s = scalar(n);
    if (s[0] == '/')
        return redis_set_unix(l, n, key, r, s);
    int rc = redis_set_host_port(r, s);
    if (rc == TERN_EINVAL)
        return fail(l, n, key, "address: bad address \"%s\" (want %s)", s, want);
    return rc;
}

/* The key node of name in mapping n, or n itself when there is none. */
static const yaml_node_t *key_node(const parse_ctx_t *l, const yaml_node_t *n, const char *name)
{
    for (yaml_node_pair_t *p = n->data.mapping.pairs.start; p < n->data.mapping.pairs.top; p++) {
        const yaml_node_t *k = node(l, p->key);
        if (k->type == YAML_SCALAR_NODE && strcmp(scalar(k), name) == 0)
            return k;
    }
    return n;
}

/* tern's "redis:" mapping (or null: no Redis). The mapping replaces every earlier setting. */
static int set_redis(parse_ctx_t *l, const opt_t *o, const yaml_node_t *n)
{
    config_redis_t *r = &l->c->redis;
    field_t fields[RS_COUNT];
    const yaml_node_t *val[RS_COUNT];
    int rc;
    if (is_null(n)) {
        redis_reset(r);
        return 0;
    }
    /* redins' keys here are a redins config's handler.redis moved up a level: say where they go */
    static const char *const redins_keys[] = {"ip", "port", "net", "connection"};
    for (size_t j = 0; n->type == YAML_MAPPING_NODE && j < TERN_ARRAY_SIZE(redins_keys); j++) {
        const yaml_node_t *k = key_node(l, n, redins_keys[j]);
        if (k != n)
            return fail(l, k, o->key,
                        "%s: is a key of redins' handler: redis, not of tern's redis (give "
                        "address: \"HOST:PORT\", or move the block under handler)",
                        redins_keys[j]);
    }
    for (size_t i = 0; i < RS_COUNT; i++)
        fields[i] = (field_t){redis_schema[i].key, redis_schema[i].desc, false, NULL};
    if ((rc = get_fields(l, n, o->key, fields, RS_COUNT, val)) < 0)
        return rc;
    redis_reset(r);
    r->enabled = true;
    for (size_t i = 0; i < RS_COUNT; i++) {
        const opt_t *f = &redis_schema[i];
        long long v = 0;
        if (!val[i])
            continue;
        switch (f->type) {
        case OPT_UINT:
            if ((rc = get_int(l, val[i], o->key, f->key, f->min, f->max, &v)) == 0)
                store_uint(r, f, v);
            break;
        case OPT_STR:
            rc = get_str(l, val[i], o->key, f->key, f, (char **)(void *)((char *)r + f->offset));
            break;
        case OPT_REDIS_ADDR:
            rc = get_redis_address(l, val[i], o->key, r);
            break;
        default:
            rc = TERN_EINVAL;
            break;
        }
        if (rc < 0)
            return rc;
    }
    return 0;
}

/* ---- redins handler ----------------------------------------------------------------------- */

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
static int get_timeout(parse_ctx_t *l, const yaml_node_t *n, const char *key, const char *field,
                       unsigned *out)
{
    long long v = 0;
    int rc = get_int(l, n, key, field, 0, REDIS_TIMEOUT_MAX, &v);
    if (rc == 0)
        *out = (unsigned)v;
    return rc;
}

static int set_redins_connection(parse_ctx_t *l, const yaml_node_t *n, const yaml_node_t **rval,
                                 config_redis_t *r)
{
    static const char key[] = "handler: redis: connection";
    const yaml_node_t *val[RC_COUNT];
    long long v;
    bool b;
    int rc;
    if ((rc = get_fields(l, n, key, redins_connection_fields, RC_COUNT, val)) < 0)
        return rc;
    for (size_t i = 0; i < RC_COUNT; i++) {
        const char *f = redins_connection_fields[i].key;
        if (!val[i])
            continue;
        if (i == RC_CONNECT_TIMEOUT || i == RC_READ_TIMEOUT) {
            const yaml_node_t *outer =
                rval[i == RC_CONNECT_TIMEOUT ? RR_CONNECT_TIMEOUT : RR_READ_TIMEOUT];
            if (outer)
                return fail(l, val[i], key, "%s: given twice (also handler: redis: %s at line %zu)",
                            f, f, line_of(outer));
            rc =
                get_timeout(l, val[i], key, f,
                            i == RC_CONNECT_TIMEOUT ? &r->connect_timeout_ms : &r->read_timeout_ms);
        } else if (i == RC_WAIT) {
            rc = get_bool(l, val[i], key, f, &b);
        } else {
            rc = get_int(l, val[i], key, f, 0, INT32_MAX, &v);
        }
        if (rc < 0)
            return rc;
    }
    return 0;
}

static int set_redins_redis(parse_ctx_t *l, const yaml_node_t *n, config_redis_t *r)
{
    static const char key[] = "handler: redis";
    static const char *const nets[] = {"tcp", "unix"};
    const yaml_node_t *val[RR_COUNT];
    long long v = 0;
    size_t net = 0;
    int rc;
    if ((rc = get_fields(l, n, key, redins_redis_fields, RR_COUNT, val)) < 0)
        return rc;
    const yaml_node_t *addr = val[RR_ADDRESS], *ip = val[RR_IP], *port = val[RR_PORT];
    if (addr && (!is_text(addr) || scalar(addr)[0] == '\0'))
        return fail(l, addr, key, "address: expected a non-empty string, got %s", node_kind(addr));
    if (val[RR_NET] && (rc = get_enum(l, val[RR_NET], key, "net", nets, 2, &net)) < 0)
        return rc;
    if (!val[RR_NET] && addr && scalar(addr)[0] == '/')
        net = 1; /* a path is a UNIX socket, whatever else net would say */
    if (net == 1) {
        if (ip || port)
            return fail(l, ip ? ip : port, key, "%s: not used with a UNIX socket (net: unix)",
                        ip ? "ip" : "port");
        if (!addr)
            return fail(l, val[RR_NET], key, "net: unix needs address, the socket's path");
        if ((rc = redis_set_unix(l, addr, key, r, scalar(addr))) < 0)
            return rc;
    } else if (addr) {
        if (ip || port)
            return fail(l, addr, key, "address: give address or ip and port, not both");
        rc = redis_set_host_port(r, scalar(addr));
        if (rc == TERN_EINVAL)
            return fail(l, addr, key,
                        "address: bad address \"%s\" (want HOST:PORT or [V6]:PORT, or net: unix "
                        "and the socket's path)",
                        scalar(addr));
        if (rc < 0)
            return rc;
    } else {
        if (ip) {
            if (!is_text(ip) || scalar(ip)[0] == '\0')
                return fail(l, ip, key, "ip: expected an address, got %s", node_kind(ip));
            if (!is_ip_or_host(scalar(ip)))
                return fail(l, ip, key, "ip: bad address \"%s\"", scalar(ip));
            if (!(r->host = strdup(scalar(ip))))
                return TERN_ENOMEM;
        }
        if (port) {
            if ((rc = get_int(l, port, key, "port", 1, 65535, &v)) < 0)
                return rc;
            r->port = (uint16_t)v;
        }
    }
    if (val[RR_DB]) {
        if ((rc = get_int(l, val[RR_DB], key, "db", 0, CONFIG_REDIS_MAX_DB, &v)) < 0)
            return rc;
        r->db = (unsigned)v;
    }
    static const int strs[][2] = {
        {RR_PASSWORD, RS_PASSWORD}, {RR_PREFIX, RS_PREFIX}, {RR_SUFFIX, RS_SUFFIX}};
    for (size_t i = 0; i < TERN_ARRAY_SIZE(strs); i++) {
        const opt_t *f = &redis_schema[strs[i][1]];
        const yaml_node_t *x = val[strs[i][0]];
        if (x && (rc = get_str(l, x, key, f->key, f, (char **)(void *)((char *)r + f->offset))) < 0)
            return rc;
    }
    if (val[RR_CONNECT_TIMEOUT] &&
        (rc = get_timeout(l, val[RR_CONNECT_TIMEOUT], key, "connect_timeout",
                          &r->connect_timeout_ms)) < 0)
        return rc;
    if (val[RR_READ_TIMEOUT] &&
        (rc = get_timeout(l, val[RR_READ_TIMEOUT], key, "read_timeout", &r->read_timeout_ms)) < 0)
        return rc;
    if (val[RR_CONNECTION])
        return set_redins_connection(l, val[RR_CONNECTION], val, r);
    return 0;
}

/* k (named key) is about to set geoip_db: the first one in a file may, a second is an error. */
static int claim_geoip(parse_ctx_t *l, const yaml_node_t *k, const char *key)
{
    if (l->geoip_by)
        return fail(l, k, key, "conflicts with %s at line %zu (give one of them)", l->geoip_by_name,
                    line_of(l->geoip_by));
    l->geoip_by = k;
    l->geoip_by_name = key;
    return 0;
}

/* redins' geoip (handler.geoip, or the top-level geoip of older versions) at n, whose key node
 * is k; key names it in errors. enable false, or left out (redins' default), uses no database at
 * all, as in redins. */
enum { G_ENABLE, G_DB, G_COUNTRY_DB, G_ASN_DB, G_COUNT };

static const field_t redins_geoip_fields[G_COUNT] = {
    [G_ENABLE] = {"enable", "true or false, default false", false, NULL},
    [G_DB] = {"db", "the MaxMind DB file", false, NULL},
    [G_COUNTRY_DB] = {"country_db", "the MaxMind DB file (newer redins' name for db)", false, NULL},
    [G_ASN_DB] = {"asn_db", "a MaxMind ASN DB", false, NULL},
};

static int set_redins_geoip(parse_ctx_t *l, const yaml_node_t *k, const yaml_node_t *n,
                            const char *key)
{
    /* geoip_db's own row: a path resolved against the config's directory; "" = not given */
    static const opt_t db_opt = {
        .type = OPT_PATH, .min = 1, .max = PATH_MAX - 1, .empty_unsets = true};
    const yaml_node_t *val[G_COUNT];
    char *path[G_COUNT] = {NULL};
    bool enable = false;
    int rc;
    if ((rc = get_fields(l, n, key, redins_geoip_fields, G_COUNT, val)) < 0)
        return rc;
    if (val[G_ENABLE] && (rc = get_bool(l, val[G_ENABLE], key, "enable", &enable)) < 0)
        return rc;
    for (size_t i = G_DB; i < G_COUNT; i++)
        if (val[i] &&
            (rc = get_str(l, val[i], key, redins_geoip_fields[i].key, &db_opt, &path[i])) < 0)
            goto out;
    if (path[G_DB] && path[G_COUNTRY_DB]) {
        rc = fail(l, val[G_COUNTRY_DB], key, "country_db: give db or country_db, not both");
        goto out;
    }
    if (!enable)
        goto out;
    if (path[G_ASN_DB]) {
        rc = fail(l, val[G_ASN_DB], key,
                  "asn_db: MaxMind ASN databases are not read; compile ip2asn data with "
                  "'ternctl asn compile -o asn.bin ...' and set asn_table");
        goto out;
    }
    size_t which = path[G_DB] ? G_DB : G_COUNTRY_DB;
    if (!path[which]) {
        rc = fail(l, val[G_ENABLE], key, "enable: true needs db or country_db (the MaxMind DB)");
        goto out;
    }
    if ((rc = claim_geoip(l, k, key)) < 0)
        goto out;
    free(l->c->geoip_db);
    l->c->geoip_db = path[which];
    path[which] = NULL;
out:
    for (size_t i = 0; i < G_COUNT; i++)
        free(path[i]);
    return rc;
}

static int set_geoip(parse_ctx_t *l, const opt_t *o, const yaml_node_t *k, const yaml_node_t *n)
{
    return set_redins_geoip(l, k, n, o->key);
}

enum {
    H_REDIS,
    H_ZONE_RELOAD,
    H_MAX_TTL,
    H_DEFAULT_TTL,
    H_CACHE_TIMEOUT,
    H_LOG_SOURCE_LOCATION,
    H_UPSTREAM_FALLBACK,
    H_GEOIP,
    H_LOG,
    H_UPSTREAM,
    H_HEALTHCHECK,
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
    [H_UPSTREAM_FALLBACK] = {"upstream_fallback", "false only: tern forwards nothing", false, NULL},
    [H_GEOIP] = {"geoip", "{enable, db | country_db}, into geoip_db; for asn_db see asn_table",
                 false, NULL},
    [H_LOG] = {"log", NULL, false, "the per-query event log"},
    [H_UPSTREAM] = {"upstream", NULL, false, "forwarding to upstream resolvers"},
    [H_HEALTHCHECK] = {"healthcheck", NULL, false, "health checks of answer addresses"},
};

/* redins' handler: answering from Redis, so a handler block enables the Redis source even
 * without a redis mapping (redins' defaults are the source's: 127.0.0.1:6379, db 0). */
static int set_handler(parse_ctx_t *l, const opt_t *o, const yaml_node_t *n)
{
    config_redis_t *r = &l->c->redis;
    const yaml_node_t *val[H_COUNT];
    long long v = 0;
    bool b = false;
    int rc;
    if ((rc = get_fields(l, n, o->key, handler_fields, H_COUNT, val)) < 0)
        return rc;
    redis_reset(r);
    r->enabled = true;
    if (val[H_REDIS] && (rc = set_redins_redis(l, val[H_REDIS], r)) < 0)
        return rc;
    if (val[H_ZONE_RELOAD]) {
        if ((rc = get_int(l, val[H_ZONE_RELOAD], o->key, "zone_reload", 1, ZONE_RELOAD_MAX, &v)) <
            0)
            return rc;
        r->zone_reload_s = (unsigned)v;
    }
    if (val[H_DEFAULT_TTL]) {
        if ((rc = get_int(l, val[H_DEFAULT_TTL], o->key, "default_ttl", 0, TTL_MAX, &v)) < 0)
            return rc;
        r->default_ttl = (uint32_t)v;
    }
    /* redins' getTtl(): an RRset without a TTL gets max_ttl, any other is capped at it */
    if (val[H_MAX_TTL]) {
        if ((rc = get_int(l, val[H_MAX_TTL], o->key, "max_ttl", 0, TTL_MAX, &v)) < 0)
            return rc;
        r->max_ttl = (uint32_t)v;
        if (!val[H_DEFAULT_TTL])
            r->default_ttl = (uint32_t)v;
    }
    if (val[H_CACHE_TIMEOUT] &&
        (rc = get_int(l, val[H_CACHE_TIMEOUT], o->key, "cache_timeout", 0, INT32_MAX, &v)) < 0)
        return rc;
    if (val[H_LOG_SOURCE_LOCATION] &&
        (rc = get_bool(l, val[H_LOG_SOURCE_LOCATION], o->key, "log_source_location", &b)) < 0)
        return rc;
    if (val[H_UPSTREAM_FALLBACK]) {
        if ((rc = get_bool(l, val[H_UPSTREAM_FALLBACK], o->key, "upstream_fallback", &b)) < 0)
            return rc;
        if (b)
            return fail(l, val[H_UPSTREAM_FALLBACK], o->key,
                        "upstream_fallback: true is not supported (tern answers from its own "
                        "zones and forwards nothing)");
    }
    if (val[H_GEOIP])
        return set_redins_geoip(l, key_node(l, n, "geoip"), val[H_GEOIP], "handler: geoip");
    return 0;
}

/* ---- zones -------------------------------------------------------------------------------- */

static const field_t zone_fields[] = {
    {"origin", "the zone's apex name", true, NULL},
    {"file", "master file (RFC 1035) or redins JSON, relative to the config file's directory", true,
     NULL},
    {"format", "rfc1035 or json (default: json for a file name ending in .json)", false, NULL},
};

static config_zone_format_t zone_format_of(const char *file)
{
    size_t n = strlen(file);
    return n > 5 && strcasecmp(file + n - 5, ".json") == 0 ? CONFIG_ZONE_JSON : CONFIG_ZONE_RFC1035;
}

static int add_zone_item(parse_ctx_t *l, const opt_t *o, const yaml_node_t *parent,
                         const yaml_node_t *n, size_t index)
{
    char key[64];
    const yaml_node_t *val[TERN_ARRAY_SIZE(zone_fields)];
    int r;
    item_key(key, sizeof(key), o->key, parent, index);
    if ((r = get_fields(l, n, key, zone_fields, TERN_ARRAY_SIZE(zone_fields), val)) < 0)
        return r;
    for (size_t i = 0; i < TERN_ARRAY_SIZE(zone_fields); i++)
        if (val[i] && (!is_text(val[i]) || scalar(val[i])[0] == '\0'))
            return fail(l, val[i], key, "%s: expected a non-empty string, got %s",
                        zone_fields[i].key, node_kind(val[i]));
    char *file = resolve_path(l, scalar(val[1]));
    if (!file)
        return TERN_ENOMEM;
    config_zone_format_t fmt = zone_format_of(file);
    if (val[2]) {
        const char *f = scalar(val[2]);
        if (strcmp(f, "rfc1035") == 0) {
            fmt = CONFIG_ZONE_RFC1035;
        } else if (strcmp(f, "json") == 0) {
            fmt = CONFIG_ZONE_JSON;
        } else {
            free(file);
            return fail(l, val[2], key, "format: expected rfc1035 or json, got \"%s\"", f);
        }
    }
    r = config_add_zone_format(l->c, scalar(val[0]), file, fmt);
    free(file);
    return r;
}

static int set_zones(parse_ctx_t *l, const opt_t *o, const yaml_node_t *n)
{
    if (n->type != YAML_SEQUENCE_NODE)
        return fail(l, n, o->key, "expected a list of {origin, file}, got %s", node_kind(n));
    return each_item(l, o, n, add_zone_item);
}

/* ---- the document ------------------------------------------------------------------------- */

static bool is_redins(const opt_t *o)
{
    return o->type == OPT_SERVER || o->type == OPT_ERROR_LOG || o->type == OPT_HANDLER ||
           o->type == OPT_GEOIP;
}

static int apply(parse_ctx_t *l, const opt_t *o, const yaml_node_t *k, const yaml_node_t *n)
{
    switch (o->type) {
    case OPT_UINT:
        return set_uint(l, o, n, false);
    case OPT_WORKERS:
        return set_uint(l, o, n, true);
    case OPT_BOOL:
        return set_bool(l, o, n);
    case OPT_ENUM:
        return set_enum(l, o, n);
    case OPT_STR:
    case OPT_PATH:
    case OPT_ADDR:
        return set_str(l, o, n);
    case OPT_LISTEN:
        return set_listen(l, o, n);
    case OPT_ZONES:
        return set_zones(l, o, n);
    case OPT_SERVER:
        return set_server(l, o, n);
    case OPT_ERROR_LOG:
        return set_error_log(l, o, n);
    case OPT_REDIS:
        return set_redis(l, o, n);
    case OPT_HANDLER:
        return set_handler(l, o, n);
    case OPT_GEOIP:
        return set_geoip(l, o, k, n);
    case OPT_REDIS_ADDR:
        break;
    case OPT_LATER:
        return fail(l, k, o->key, "redins option not supported yet (%s)", o->desc);
    }
    return TERN_EINVAL;
}

static int load_root(parse_ctx_t *l)
{
    const yaml_node_t *root = yaml_document_get_root_node(l->doc);
    if (!root)
        return 0; /* an empty file: all defaults */
    if (root->type != YAML_MAPPING_NODE)
        return fail(l, root, NULL, "the top level must be a mapping of options, got %s",
                    node_kind(root));
    for (yaml_node_pair_t *p = root->data.mapping.pairs.start; p < root->data.mapping.pairs.top;
         p++) {
        const yaml_node_t *k = node(l, p->key);
        const yaml_node_t *v = node(l, p->value);
        if (k->type != YAML_SCALAR_NODE)
            return fail(l, k, NULL, "option names must be strings, got %s", node_kind(k));
        size_t i = 0;
        while (i < NOPTS && strcmp(schema[i].key, scalar(k)) != 0)
            i++;
        if (i == NOPTS)
            return fail(l, k, scalar(k), "unknown key");
        if (l->seen[i])
            return fail(l, k, scalar(k), "duplicate key (first at line %zu)", line_of(l->seen[i]));
        for (size_t j = 0; j < NOPTS && schema[i].group != GROUP_NONE; j++)
            if (l->seen[j] && schema[j].group == schema[i].group &&
                schema[i].group != GROUP_GEOIP && (is_redins(&schema[i]) || is_redins(&schema[j])))
                return fail(l, k, scalar(k), "conflicts with %s at line %zu (give one of them)",
                            schema[j].key, line_of(l->seen[j]));
        /* geoip_db itself always sets it (null included: it unsets what the file did not) */
        if (schema[i].group == GROUP_GEOIP && !is_redins(&schema[i])) {
            int r = claim_geoip(l, k, schema[i].key);
            if (r < 0)
                return r;
        }
        l->seen[i] = k;
        int r = apply(l, &schema[i], k, v);
        if (r < 0)
            return r;
    }
    return 0;
}

int config_load(config_t *c, const char *path, char *err, size_t errlen)
{
    parse_ctx_t l = {.c = c, .path = path, .err = err, .errlen = errlen};
    yaml_parser_t parser;
    yaml_document_t doc;
    int r = TERN_ENOMEM;
    bool have_parser = false, have_doc = false;

    FILE *f = fopen(path, "r");
    if (!f) {
        int e = errno;
        snprintf(err, errlen, "%s: %s", path, strerror(e));
        return -e;
    }
    const char *slash = strrchr(path, '/');
    if (slash) {
        size_t n = (size_t)(slash - path) + 1;
        if (!(l.dir = malloc(n + 1)))
            goto out;
        memcpy(l.dir, path, n);
        l.dir[n] = '\0';
    }
    if (!yaml_parser_initialize(&parser))
        goto out;
    have_parser = true;
    yaml_parser_set_input_file(&parser, f);
    if (!yaml_parser_load(&parser, &doc))
        goto syntax;
    have_doc = true;
    l.doc = &doc;
    if ((r = load_root(&l)) < 0)
        goto out;
    yaml_document_delete(&doc);
    have_doc = false;
    /* A second document ("---") would otherwise be skipped without a word. */
    if (!yaml_parser_load(&parser, &doc))
        goto syntax;
    have_doc = true;
    const yaml_node_t *extra = yaml_document_get_root_node(&doc);
    if (extra) {
        l.doc = &doc;
        r = fail(&l, extra, NULL, "a second YAML document (one configuration per file)");
    }
    goto out;

syntax:;
    const char *what = parser.problem ? parser.problem : "cannot parse";
    snprintf(err, errlen, "%s:%zu: YAML syntax error: %s%s%s", path, parser.problem_mark.line + 1,
             what, parser.context ? " " : "", parser.context ? parser.context : "");
    r = parser.error == YAML_MEMORY_ERROR ? TERN_ENOMEM : TERN_ESYNTAX;
out:
    if (r == TERN_ENOMEM)
        snprintf(err, errlen, "%s: out of memory", path);
    if (have_doc)
        yaml_document_delete(&doc);
    if (have_parser)
        yaml_parser_delete(&parser);
    free(l.dir);
    fclose(f);
    return r;
}

/* ---- the API ------------------------------------------------------------------------------ */

/* Strict port: 1-5 digits, 0..65535, nothing after. */
static bool parse_port(const char *s, uint16_t *port)
{
    size_t n = strlen(s);
    if (n == 0 || n > 5 || strspn(s, "0123456789") != n)
        return false;
    unsigned long v = strtoul(s, NULL, 10);
    if (v > 65535)
        return false;
    *port = (uint16_t)v;
    return true;
}

int config_parse_listen(config_listen_t *l, const char *text)
{
    char host[INET6_ADDRSTRLEN + 1];
    const char *port_text;
    size_t tl = strlen(text);
    if (tl >= sizeof(l->text))
        return TERN_EINVAL;
    memset(l, 0, sizeof(*l));
    if (text[0] == '[') {
        const char *close = strchr(text, ']');
        if (!close || close[1] != ':' || (size_t)(close - text - 1) >= sizeof(host))
            return TERN_EINVAL;
        size_t hl = (size_t)(close - text - 1);
        memcpy(host, text + 1, hl);
        host[hl] = '\0';
        port_text = close + 2;
        struct sockaddr_in6 *sa = (struct sockaddr_in6 *)&l->addr;
        if (inet_pton(AF_INET6, host, &sa->sin6_addr) != 1 ||
            !parse_port(port_text, &sa->sin6_port))
            return TERN_EINVAL;
        sa->sin6_family = AF_INET6;
        sa->sin6_port = htons(sa->sin6_port);
        l->addrlen = sizeof(*sa);
    } else {
        /* One colon only: a bare IPv6 address has several and needs brackets and a port. */
        const char *colon = strchr(text, ':');
        if (!colon || strchr(colon + 1, ':') || (size_t)(colon - text) >= sizeof(host))
            return TERN_EINVAL;
        size_t hl = (size_t)(colon - text);
        memcpy(host, text, hl);
        host[hl] = '\0';
        port_text = colon + 1;
        struct sockaddr_in *sa = (struct sockaddr_in *)&l->addr;
        if (inet_pton(AF_INET, host, &sa->sin_addr) != 1 || !parse_port(port_text, &sa->sin_port))
            return TERN_EINVAL;
        sa->sin_family = AF_INET;
        sa->sin_port = htons(sa->sin_port);
        l->addrlen = sizeof(*sa);
    }
    memcpy(l->text, text, tl + 1);
    l->udp = l->tcp = true;
    return 0;
}

int config_add_listen(config_t *c, const char *text)
{
    if (c->nlisten >= CONFIG_MAX_LISTEN)
        return TERN_ELIMIT;
    int r = config_parse_listen(&c->listen[c->nlisten], text);
    if (r < 0)
        return r;
    c->nlisten++;
    return 0;
}

int config_add_zone(config_t *c, const char *origin, const char *file)
{
    return config_add_zone_format(c, origin, file, zone_format_of(file));
}

int config_add_zone_format(config_t *c, const char *origin, const char *file,
                           config_zone_format_t format)
{
    config_zone_t *z = realloc(c->zones, (c->nzones + 1) * sizeof(*z));
    if (!z)
        return TERN_ENOMEM;
    c->zones = z;
    z = &c->zones[c->nzones];
    z->origin = strdup(origin);
    z->file = strdup(file);
    z->format = format;
    if (!z->origin || !z->file) {
        free(z->origin);
        free(z->file);
        return TERN_ENOMEM;
    }
    c->nzones++;
    return 0;
}

unsigned config_auto_workers(void)
{
    /* The affinity mask, not the machine's CPU count: under taskset or a container cpuset only
     * those CPUs run our threads. */
    cpu_set_t set;
    long n = 0;
    if (sched_getaffinity(0, sizeof(set), &set) == 0)
        n = CPU_COUNT(&set);
    if (n <= 0)
        n = sysconf(_SC_NPROCESSORS_ONLN);
    if (n < 1)
        n = 1;
    return n > CONFIG_MAX_WORKERS ? CONFIG_MAX_WORKERS : (unsigned)n;
}

bool config_same_listen(const config_t *a, const config_t *b)
{
    if (a->workers != b->workers || a->nlisten != b->nlisten)
        return false;
    for (size_t i = 0; i < a->nlisten; i++) {
        const config_listen_t *x = &a->listen[i], *y = &b->listen[i];
        if (!same_endpoint(x, y) || x->udp != y->udp || x->tcp != y->tcp)
            return false;
    }
    return true;
}

static bool same_str(const char *a, const char *b)
{
    return a == b || (a && b && strcmp(a, b) == 0);
}

bool config_same_redis(const config_redis_t *a, const config_redis_t *b)
{
    if (a->enabled != b->enabled || a->port != b->port || a->db != b->db ||
        a->connect_timeout_ms != b->connect_timeout_ms ||
        a->read_timeout_ms != b->read_timeout_ms || a->zone_reload_s != b->zone_reload_s ||
        a->default_ttl != b->default_ttl || a->max_ttl != b->max_ttl ||
        a->max_value_bytes != b->max_value_bytes || a->max_labels != b->max_labels ||
        a->max_rrset_records != b->max_rrset_records || a->max_zones != b->max_zones)
        return false;
    for (size_t i = 0; i < TERN_ARRAY_SIZE(redis_strs); i++)
        if (!same_str(redis_str_value(a, i), redis_str_value(b, i)))
            return false;
    return true;
}

void config_init(config_t *c)
{
    memset(c, 0, sizeof(*c));
    for (size_t i = 0; i < NOPTS; i++) {
        const opt_t *o = &schema[i];
        if (o->type == OPT_UINT || o->type == OPT_WORKERS || o->type == OPT_ENUM) {
            store_uint(c, o, o->def);
        } else if (o->type == OPT_BOOL) {
            bool v = o->def != 0;
            memcpy((char *)c + o->offset, &v, sizeof(v));
        }
    }
    redis_reset(&c->redis); /* its strings are NULL after the memset */
}

int config_copy(config_t *dst, const config_t *src)
{
    *dst = *src;
    dst->zones = NULL;
    dst->nzones = 0;
    for (size_t i = 0; i < NOPTS; i++)
        if (is_str_opt(&schema[i]))
            *str_field(dst, &schema[i]) = NULL;
    for (size_t i = 0; i < TERN_ARRAY_SIZE(redis_strs); i++)
        *redis_str(&dst->redis, i) = NULL;
    for (size_t i = 0; i < NOPTS; i++) {
        const char *s = is_str_opt(&schema[i]) ? str_value(src, &schema[i]) : NULL;
        if (s && !(*str_field(dst, &schema[i]) = strdup(s)))
            goto fail;
    }
    for (size_t i = 0; i < TERN_ARRAY_SIZE(redis_strs); i++) {
        const char *s = redis_str_value(&src->redis, i);
        if (s && !(*redis_str(&dst->redis, i) = strdup(s)))
            goto fail;
    }
    for (size_t i = 0; i < src->nzones; i++)
        if (config_add_zone_format(dst, src->zones[i].origin, src->zones[i].file,
                                   src->zones[i].format) < 0)
            goto fail;
    return 0;
fail:
    config_free(dst);
    return TERN_ENOMEM;
}

/* One row of --help: the key indented by depth, its description and bounds. */
static void print_opt(FILE *out, int depth, const opt_t *o)
{
    char names[128];
    fprintf(out, "%*s%-*s %s", 2 + 2 * depth, "", 20 - 2 * depth, o->key, o->desc);
    switch (o->type) {
    case OPT_UINT:
        fprintf(out, " [%lld..%lld, default %lld]\n", o->min, o->max, o->def);
        break;
    case OPT_WORKERS:
        fprintf(out, " [%lld..%lld or auto, default %lld]\n", o->min, o->max, o->def);
        break;
    case OPT_BOOL:
        fprintf(out, " [default %s]\n", o->def ? "true" : "false");
        break;
    case OPT_ENUM:
        join_names(o->names, (size_t)o->max + 1, names, sizeof(names));
        fprintf(out, " [%s, default %s]\n", names, o->names[o->def]);
        break;
    case OPT_STR:
    case OPT_PATH:
    case OPT_ADDR:
        fprintf(out, " [at most %lld bytes, default unset]\n", o->max);
        break;
    default:
        fputc('\n', out);
        break;
    }
}

void config_schema_print(FILE *out)
{
    bool redins_header = false;
    for (size_t i = 0; i < NOPTS; i++) {
        const opt_t *o = &schema[i];
        if ((is_redins(o) || o->type == OPT_LATER) && !redins_header) {
            fprintf(out, "\nredins-style JSON keys (its config.json):\n");
            redins_header = true;
        }
        if (o->type == OPT_LATER) {
            fprintf(out, "  %-20s not supported yet: %s\n", o->key, o->desc);
            continue;
        }
        print_opt(out, 0, o);
        if (o->type == OPT_REDIS)
            for (size_t j = 0; j < RS_COUNT; j++)
                print_opt(out, 1, &redis_schema[j]);
        for (size_t j = 0; o->type == OPT_HANDLER && j < H_COUNT; j++) {
            const field_t *f = &handler_fields[j];
            if (f->later)
                fprintf(out, "    %-18s not supported yet: %s\n", f->key, f->later);
            else
                fprintf(out, "    %-18s %s\n", f->key, f->desc);
        }
    }
}

void config_free(config_t *c)
{
    for (size_t i = 0; i < c->nzones; i++) {
        free(c->zones[i].origin);
        free(c->zones[i].file);
    }
    free(c->zones);
    for (size_t i = 0; i < NOPTS; i++)
        if (is_str_opt(&schema[i]))
            free(*str_field(c, &schema[i]));
    for (size_t i = 0; i < TERN_ARRAY_SIZE(redis_strs); i++)
        free(*redis_str(&c->redis, i));
    config_init(c);
}
