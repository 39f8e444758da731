/*
 * config.c — the YAML/JSON configuration, driven by one schema table.
 *
 * libyaml loads the whole file into a node tree (configs are small), and every node carries its
 * start mark, so each error can name file:line. The schema below is the only place an option is
 * described: its defaults feed config_init(), its types and bounds drive parsing and validation,
 * its string options drive config_copy() and config_free(), and its descriptions are what
 * config_schema_print() shows. Nested mappings (a zone, a listen entry, a redins server or
 * error_log) have small field tables of their own, checked by get_fields(), so an unknown or
 * duplicate key is an error at any depth.
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
    OPT_LATER,     /* a redins key tern does not implement yet: always an error saying so */
} opt_type_t;

/* Options that set the same fields share a group; a redins option and any other option of its
 * group may not both appear in one file (which one would win is a guess we refuse to make). */
enum { GROUP_NONE = 0, GROUP_LISTEN, GROUP_LOG };

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
    const char *desc; /* OPT_LATER: what the redins key is for */
} opt_t;

#define FIELD(f) .offset = offsetof(config_t, f), .size = sizeof(((config_t *)0)->f)

_Static_assert(sizeof(log_level_t) == sizeof(uint32_t) && sizeof(log_target_t) == sizeof(uint32_t),
               "OPT_ENUM fields are stored as 32-bit integers");

/* RFC 1035 §3.3: a CHAOS TXT answer is one <character-string>, at most 255 bytes. */
#define TXT_MAX 255
/* LOGIN_NAME_MAX: the longest user or group name the C library handles. */
#define NAME_MAX_LEN (LOGIN_NAME_MAX - 1)
/* A UNIX socket path must fit sun_path with its terminating NUL (107 bytes on Linux); checked
 * here, at load, rather than as a bind() failure at startup. */
#define SUN_PATH_MAX ((long long)sizeof(((struct sockaddr_un *)0)->sun_path) - 1)

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
    {.key = "geoip_db",
     .type = OPT_PATH,
     FIELD(geoip_db),
     .min = 1,
     .max = PATH_MAX - 1,
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

    /* redins's config.json: the keys that map onto the options above ... */
    {.key = "server",
     .type = OPT_SERVER,
     .group = GROUP_LISTEN,
     .desc = "list of {ip, port, protocol: udp|tcp}, into listen (same ip and port: one entry)"},
    {.key = "error_log",
     .type = OPT_ERROR_LOG,
     .group = GROUP_LOG,
     .desc = "{enable: true, level, target: stderr|stdout|syslog, format: text}, into log_*"},
    /* ... and those that do not (yet): refused, never ignored. */
    {.key = "handler", .type = OPT_LATER, .desc = "answering from zones kept in Redis"},
    {.key = "redis", .type = OPT_LATER, .desc = "zones kept in Redis"},
    {.key = "log", .type = OPT_LATER, .desc = "the per-query event log"},
    {.key = "upstream", .type = OPT_LATER, .desc = "forwarding to upstream resolvers"},
    {.key = "geoip", .type = OPT_LATER, .desc = "GeoIP answer selection"},
    {.key = "healthcheck", .type = OPT_LATER, .desc = "health checks of answer addresses"},
    {.key = "ratelimit", .type = OPT_LATER, .desc = "per-client rate limits"},
};

#define NOPTS TERN_ARRAY_SIZE(schema)

typedef struct loader {
    config_t *c;
    yaml_document_t *doc;
    const char *path;
    char *dir; /* directory of path with a trailing '/', or NULL for the cwd */
    char *err;
    size_t errlen;
    const yaml_node_t *seen[NOPTS];        /* key node of each option given in the file */
    size_t listen_line[CONFIG_MAX_LISTEN]; /* where each listen entry was given */
} loader_t;

static int fail(loader_t *l, const yaml_node_t *n, const char *key, const char *fmt, ...)
    TERN_PRINTF(4, 5);

static int fail(loader_t *l, const yaml_node_t *n, const char *key, const char *fmt, ...)
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

static const yaml_node_t *node(const loader_t *l, int id)
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
static int get_int(loader_t *l, const yaml_node_t *n, const char *key, const char *field,
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

static int get_bool(loader_t *l, const yaml_node_t *n, const char *key, const char *field,
                    bool *out)
{
    if (!parse_bool(n, out))
        return fail(l, n, key, "%s%sexpected true or false, got %s", field ? field : "",
                    field ? ": " : "", node_kind(n));
    return 0;
}

/* One of names (count of them), as its index. */
static int get_enum(loader_t *l, const yaml_node_t *n, const char *key, const char *field,
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

/* Nested mappings have at most this many fields (error_log has the most). */
#define MAX_FIELDS 12

/* Check that n is a mapping whose keys are among fields, each at most once, none refused, every
 * required one present; val[i] gets each field's value node or NULL. Errors are "key: ...". */
static int get_fields(loader_t *l, const yaml_node_t *n, const char *key, const field_t *fields,
                      size_t nfields, const yaml_node_t **val)
{
    const char *names[MAX_FIELDS];
    const yaml_node_t *keys[MAX_FIELDS] = {NULL};
    size_t nnames = 0;
    char want[160];
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
typedef int (*item_fn)(loader_t *l, const opt_t *o, const yaml_node_t *parent, const yaml_node_t *n,
                       size_t index);

static int each_item(loader_t *l, const opt_t *o, const yaml_node_t *n, item_fn fn)
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
static char *resolve_path(const loader_t *l, const char *path)
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

static void store_uint(config_t *c, const opt_t *o, long long v)
{
    char *field = (char *)c + o->offset;
    if (o->size == sizeof(uint16_t)) {
        uint16_t u = (uint16_t)v;
        memcpy(field, &u, sizeof(u));
    } else {
        uint32_t u = (uint32_t)v;
        memcpy(field, &u, sizeof(u));
    }
}

static int set_uint(loader_t *l, const opt_t *o, const yaml_node_t *n, bool allow_auto)
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

static int set_bool(loader_t *l, const opt_t *o, const yaml_node_t *n)
{
    bool v;
    int r = get_bool(l, n, o->key, NULL, &v);
    if (r < 0)
        return r;
    memcpy((char *)l->c + o->offset, &v, sizeof(v));
    return 0;
}

static int set_enum(loader_t *l, const opt_t *o, const yaml_node_t *n)
{
    size_t v = 0;
    int r = get_enum(l, n, o->key, NULL, o->names, (size_t)o->max + 1, &v);
    if (r < 0)
        return r;
    store_uint(l->c, o, (long long)v);
    return 0;
}

/* OPT_STR, OPT_PATH, OPT_ADDR. */
static int set_str(loader_t *l, const opt_t *o, const yaml_node_t *n)
{
    if (n->type != YAML_SCALAR_NODE)
        return fail(l, n, o->key, "expected a string, got %s", node_kind(n));
    const char *s = scalar(n);
    char **field = str_field(l->c, o);
    bool null = is_plain(n) && (*s == '\0' || strcmp(s, "~") == 0 || strcmp(s, "null") == 0);
    if (null) {
        free(*field);
        *field = NULL;
        return 0;
    }
    if (!is_text(n))
        return fail(l, n, o->key, "contains a NUL byte");
    if ((long long)strlen(s) < o->min)
        return fail(l, n, o->key, "must not be empty");
    if (o->type == OPT_ADDR) {
        config_listen_t tmp;
        if (config_parse_listen(&tmp, s) < 0)
            return fail(l, n, o->key, "bad address \"%s\" (want ADDR:PORT or [V6]:PORT)", s);
    }
    char *copy = o->type == OPT_PATH ? resolve_path(l, s) : strdup(s);
    if (!copy)
        return TERN_ENOMEM;
    size_t len = strlen(copy);
    if ((long long)len > o->max) {
        int r = fail(l, n, o->key, "\"%s\" is %zu bytes long, more than the %lld allowed", copy,
                     len, o->max);
        free(copy);
        return r;
    }
    free(*field);
    *field = copy;
    return 0;
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
static int put_listen(loader_t *l, const yaml_node_t *n, const char *key, const config_listen_t *e)
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

static int parse_address(loader_t *l, const yaml_node_t *n, const char *key, const char *field,
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

static int add_listen_item(loader_t *l, const opt_t *o, const yaml_node_t *parent,
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

static int set_listen(loader_t *l, const opt_t *o, const yaml_node_t *n)
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

static int add_server_item(loader_t *l, const opt_t *o, const yaml_node_t *parent,
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

static int set_server(loader_t *l, const opt_t *o, const yaml_node_t *n)
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

static int set_error_log(loader_t *l, const opt_t *o, const yaml_node_t *n)
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

static int add_zone_item(loader_t *l, const opt_t *o, const yaml_node_t *parent,
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

static int set_zones(loader_t *l, const opt_t *o, const yaml_node_t *n)
{
    if (n->type != YAML_SEQUENCE_NODE)
        return fail(l, n, o->key, "expected a list of {origin, file}, got %s", node_kind(n));
    return each_item(l, o, n, add_zone_item);
}

/* ---- the document ------------------------------------------------------------------------- */

static bool is_redins(const opt_t *o)
{
    return o->type == OPT_SERVER || o->type == OPT_ERROR_LOG;
}

static int apply(loader_t *l, const opt_t *o, const yaml_node_t *k, const yaml_node_t *n)
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
    case OPT_LATER:
        return fail(l, k, o->key, "redins option not supported yet (%s)", o->desc);
    }
    return TERN_EINVAL;
}

static int load_root(loader_t *l)
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
                (is_redins(&schema[i]) || is_redins(&schema[j])))
                return fail(l, k, scalar(k), "conflicts with %s at line %zu (give one of them)",
                            schema[j].key, line_of(l->seen[j]));
        l->seen[i] = k;
        int r = apply(l, &schema[i], k, v);
        if (r < 0)
            return r;
    }
    return 0;
}

int config_load(config_t *c, const char *path, char *err, size_t errlen)
{
    loader_t l = {.c = c, .path = path, .err = err, .errlen = errlen};
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
}

int config_copy(config_t *dst, const config_t *src)
{
    *dst = *src;
    dst->zones = NULL;
    dst->nzones = 0;
    for (size_t i = 0; i < NOPTS; i++)
        if (is_str_opt(&schema[i]))
            *str_field(dst, &schema[i]) = NULL;
    for (size_t i = 0; i < NOPTS; i++) {
        const char *s = is_str_opt(&schema[i]) ? str_value(src, &schema[i]) : NULL;
        if (s && !(*str_field(dst, &schema[i]) = strdup(s)))
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

void config_schema_print(FILE *out)
{
    char names[128];
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
        fprintf(out, "  %-20s %s", o->key, o->desc);
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
    config_init(c);
}
