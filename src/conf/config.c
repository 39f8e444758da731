/*
 * config.c — the YAML/JSON configuration, driven by one schema table.
 *
 * libyaml loads the whole file into a node tree (configs are small), and every node carries its
 * start mark, so each error can name file:line. The schema below is the only place an option is
 * described: its defaults feed config_init(), its types and bounds drive parsing and validation,
 * and its descriptions are what config_schema_print() shows.
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
#include <unistd.h>
#include <yaml.h>

#include "tern/common/err.h"

typedef enum {
    OPT_UINT,    /* plain integer in [min, max], stored in a field of `size` bytes */
    OPT_BOOL,    /* plain true / false */
    OPT_STR,     /* any scalar; plain null, ~ or empty = unset */
    OPT_WORKERS, /* OPT_UINT or the string "auto" */
    OPT_LISTEN,  /* a listen string or a sequence of them */
    OPT_ZONES,   /* a sequence of {origin, file} mappings */
} opt_type_t;

typedef struct opt {
    const char *key;
    opt_type_t type;
    size_t offset; /* of the field in config_t */
    size_t size;   /* of that field (OPT_UINT, OPT_WORKERS) */
    long long def, min, max;
    const char *desc;
} opt_t;

#define FIELD(f) offsetof(config_t, f), sizeof(((config_t *)0)->f)

static const opt_t schema[] = {
    {"listen", OPT_LISTEN, 0, 0, 0, 0, 0,
     "addresses to serve: \"ADDR:PORT\" or \"[V6]:PORT\", a string or a list"},
    {"workers", OPT_WORKERS, FIELD(workers), 1, 1, CONFIG_MAX_WORKERS,
     "worker threads, each with its own sockets; \"auto\" = one per usable CPU"},
    /* 512 is the RFC 1035 floor; 4096 the largest payload the UDP buffers are sized for. */
    {"edns_max_udp", OPT_UINT, FIELD(edns_max_udp), 1232, 512, 4096,
     "EDNS UDP payload size advertised and the cap on the client's (bytes)"},
    {"identity", OPT_STR, FIELD(identity), 0, 0, 0,
     "CHAOS TXT id.server / hostname.bind answer; unset = REFUSED"},
    {"version", OPT_STR, FIELD(version), 0, 0, 0, "CHAOS TXT version.bind answer; unset = REFUSED"},
    /* RFC 7766 §6.2.3 wants idle timeouts of seconds, not minutes: an hour is the sanity cap. */
    {"tcp_idle_timeout", OPT_UINT, FIELD(tcp_idle_timeout), 10, 1, 3600,
     "seconds a TCP connection may stay without a complete query or write progress"},
    /* Each connection preallocates two 64 KiB buffers; 65536 per worker is already 8 GiB. */
    {"tcp_max_connections", OPT_UINT, FIELD(tcp_max_connections), 256, 1, 65536,
     "TCP connections per worker; beyond this new connections are closed at once"},
    {"udp_mmsg", OPT_BOOL, FIELD(udp_mmsg), 1, 0, 1,
     "batch UDP with recvmmsg/sendmmsg; false = one recvmsg/sendmsg per datagram"},
    {"zones", OPT_ZONES, 0, 0, 0, 0, 0,
     "list of {origin: NAME, file: PATH}; PATH relative to the config file's directory"},
};

typedef struct loader {
    config_t *c;
    yaml_document_t *doc;
    const char *path;
    char *dir; /* directory of path with a trailing '/', or NULL for the cwd */
    char *err;
    size_t errlen;
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

static const char *scalar(const yaml_node_t *n)
{
    return (const char *)n->data.scalar.value;
}

static bool is_plain(const yaml_node_t *n)
{
    return n->type == YAML_SCALAR_NODE && n->data.scalar.style == YAML_PLAIN_SCALAR_STYLE;
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

static void store_uint(config_t *c, const opt_t *o, long long v)
{
    char *field = (char *)c + o->offset;
    if (o->size == sizeof(uint16_t)) {
        uint16_t u = (uint16_t)v;
        memcpy(field, &u, sizeof(u));
    } else {
        unsigned u = (unsigned)v;
        memcpy(field, &u, sizeof(u));
    }
}

static int set_uint(loader_t *l, const opt_t *o, const yaml_node_t *n, bool allow_auto)
{
    long long v;
    if (allow_auto && n->type == YAML_SCALAR_NODE && strcmp(scalar(n), "auto") == 0) {
        store_uint(l->c, o, config_auto_workers());
        return 0;
    }
    if (!parse_int(n, &v)) {
        if (n->type == YAML_SCALAR_NODE)
            return fail(l, n, o->key, "expected an integer%s, got \"%s\"",
                        allow_auto ? " or \"auto\"" : "", scalar(n));
        return fail(l, n, o->key, "expected an integer%s, got %s", allow_auto ? " or \"auto\"" : "",
                    node_kind(n));
    }
    if (v < o->min || v > o->max)
        return fail(l, n, o->key, "%lld is out of range %lld..%lld", v, o->min, o->max);
    store_uint(l->c, o, v);
    return 0;
}

static int set_bool(loader_t *l, const opt_t *o, const yaml_node_t *n)
{
    bool v;
    if (is_plain(n) && strcasecmp(scalar(n), "true") == 0)
        v = true;
    else if (is_plain(n) && strcasecmp(scalar(n), "false") == 0)
        v = false;
    else
        return fail(l, n, o->key, "expected true or false, got %s", node_kind(n));
    memcpy((char *)l->c + o->offset, &v, sizeof(v));
    return 0;
}

static int set_str(loader_t *l, const opt_t *o, const yaml_node_t *n)
{
    if (n->type != YAML_SCALAR_NODE)
        return fail(l, n, o->key, "expected a string, got %s", node_kind(n));
    char **field = (char **)(void *)((char *)l->c + o->offset);
    const char *s = scalar(n);
    char *copy = NULL;
    bool null = is_plain(n) && (*s == '\0' || strcmp(s, "~") == 0 || strcmp(s, "null") == 0);
    if (!null && !(copy = strdup(s)))
        return TERN_ENOMEM;
    free(*field);
    *field = copy;
    return 0;
}

static int add_listen_node(loader_t *l, const opt_t *o, const yaml_node_t *n)
{
    if (n->type != YAML_SCALAR_NODE)
        return fail(l, n, o->key, "expected an address string, got %s", node_kind(n));
    int r = config_add_listen(l->c, scalar(n));
    if (r == TERN_ELIMIT)
        return fail(l, n, o->key, "more than %d addresses", CONFIG_MAX_LISTEN);
    if (r < 0)
        return fail(l, n, o->key, "bad address \"%s\" (want ADDR:PORT or [V6]:PORT)", scalar(n));
    return 0;
}

static int set_listen(loader_t *l, const opt_t *o, const yaml_node_t *n)
{
    l->c->nlisten = 0; /* the file's list replaces whatever was there */
    if (n->type != YAML_SEQUENCE_NODE)
        return add_listen_node(l, o, n);
    for (yaml_node_item_t *it = n->data.sequence.items.start; it < n->data.sequence.items.top;
         it++) {
        int r = add_listen_node(l, o, yaml_document_get_node(l->doc, *it));
        if (r < 0)
            return r;
    }
    return 0;
}

/* Keys of one zone entry: a schema of its own, so unknown keys get the same treatment. */
static const struct {
    const char *key;
    const char *desc;
} zone_schema[] = {
    {"origin", "the zone's apex name"},
    {"file", "master file (RFC 1035), relative to the config file's directory"},
};

static int add_zone_node(loader_t *l, const opt_t *o, const yaml_node_t *n, size_t index)
{
    char key[64];
    snprintf(key, sizeof(key), "%s[%zu]", o->key, index);
    if (n->type != YAML_MAPPING_NODE)
        return fail(l, n, key, "expected a mapping {origin, file}, got %s", node_kind(n));
    const yaml_node_t *val[TERN_ARRAY_SIZE(zone_schema)] = {NULL};
    for (yaml_node_pair_t *p = n->data.mapping.pairs.start; p < n->data.mapping.pairs.top; p++) {
        const yaml_node_t *k = yaml_document_get_node(l->doc, p->key);
        const yaml_node_t *v = yaml_document_get_node(l->doc, p->value);
        if (k->type != YAML_SCALAR_NODE)
            return fail(l, k, key, "keys must be strings");
        size_t i = 0;
        while (i < TERN_ARRAY_SIZE(zone_schema) && strcmp(zone_schema[i].key, scalar(k)) != 0)
            i++;
        if (i == TERN_ARRAY_SIZE(zone_schema))
            return fail(l, k, key, "unknown key \"%s\" (want origin, file)", scalar(k));
        if (val[i])
            return fail(l, k, key, "duplicate key \"%s\"", scalar(k));
        if (v->type != YAML_SCALAR_NODE || scalar(v)[0] == '\0')
            return fail(l, v, key, "%s: expected a non-empty string, got %s", scalar(k),
                        node_kind(v));
        val[i] = v;
    }
    for (size_t i = 0; i < TERN_ARRAY_SIZE(zone_schema); i++)
        if (!val[i])
            return fail(l, n, key, "missing \"%s\" (%s)", zone_schema[i].key, zone_schema[i].desc);

    const char *origin = scalar(val[0]);
    const char *file = scalar(val[1]);
    char *joined = NULL;
    if (file[0] != '/' && l->dir) {
        size_t dl = strlen(l->dir), fl = strlen(file);
        if (!(joined = malloc(dl + fl + 1)))
            return TERN_ENOMEM;
        memcpy(joined, l->dir, dl);
        memcpy(joined + dl, file, fl + 1);
        file = joined;
    }
    int r = config_add_zone(l->c, origin, file);
    free(joined);
    return r;
}

static int set_zones(loader_t *l, const opt_t *o, const yaml_node_t *n)
{
    if (n->type != YAML_SEQUENCE_NODE)
        return fail(l, n, o->key, "expected a list of {origin, file}, got %s", node_kind(n));
    size_t index = 0;
    for (yaml_node_item_t *it = n->data.sequence.items.start; it < n->data.sequence.items.top;
         it++, index++) {
        int r = add_zone_node(l, o, yaml_document_get_node(l->doc, *it), index);
        if (r < 0)
            return r;
    }
    return 0;
}

static int apply(loader_t *l, const opt_t *o, const yaml_node_t *n)
{
    switch (o->type) {
    case OPT_UINT:
        return set_uint(l, o, n, false);
    case OPT_WORKERS:
        return set_uint(l, o, n, true);
    case OPT_BOOL:
        return set_bool(l, o, n);
    case OPT_STR:
        return set_str(l, o, n);
    case OPT_LISTEN:
        return set_listen(l, o, n);
    case OPT_ZONES:
        return set_zones(l, o, n);
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
    const yaml_node_t *seen[TERN_ARRAY_SIZE(schema)] = {NULL};
    for (yaml_node_pair_t *p = root->data.mapping.pairs.start; p < root->data.mapping.pairs.top;
         p++) {
        const yaml_node_t *k = yaml_document_get_node(l->doc, p->key);
        const yaml_node_t *v = yaml_document_get_node(l->doc, p->value);
        if (k->type != YAML_SCALAR_NODE)
            return fail(l, k, NULL, "option names must be strings, got %s", node_kind(k));
        size_t i = 0;
        while (i < TERN_ARRAY_SIZE(schema) && strcmp(schema[i].key, scalar(k)) != 0)
            i++;
        if (i == TERN_ARRAY_SIZE(schema))
            return fail(l, k, scalar(k), "unknown key");
        if (seen[i])
            return fail(l, k, scalar(k), "duplicate key (first at line %zu)",
                        seen[i]->start_mark.line + 1);
        seen[i] = k;
        int r = apply(l, &schema[i], v);
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
    bool have_doc = false;

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
            goto fail_file;
        memcpy(l.dir, path, n);
        l.dir[n] = '\0';
    }
    if (!yaml_parser_initialize(&parser))
        goto fail_file;
    yaml_parser_set_input_file(&parser, f);
    if (!yaml_parser_load(&parser, &doc)) {
        const char *what = parser.problem ? parser.problem : "cannot parse";
        snprintf(err, errlen, "%s:%zu: YAML syntax error: %s%s%s", path,
                 parser.problem_mark.line + 1, what, parser.context ? " " : "",
                 parser.context ? parser.context : "");
        r = parser.error == YAML_MEMORY_ERROR ? TERN_ENOMEM : TERN_ESYNTAX;
        goto fail_parser;
    }
    have_doc = true;
    l.doc = &doc;
    r = load_root(&l);
    if (r == TERN_ENOMEM)
        snprintf(err, errlen, "%s: out of memory", path);

fail_parser:
    if (have_doc)
        yaml_document_delete(&doc);
    yaml_parser_delete(&parser);
fail_file:
    if (r == TERN_ENOMEM && !have_doc)
        snprintf(err, errlen, "%s: out of memory", path);
    free(l.dir);
    fclose(f);
    return r;
}

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
    config_zone_t *z = realloc(c->zones, (c->nzones + 1) * sizeof(*z));
    if (!z)
        return TERN_ENOMEM;
    c->zones = z;
    z = &c->zones[c->nzones];
    z->origin = strdup(origin);
    z->file = strdup(file);
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

void config_init(config_t *c)
{
    memset(c, 0, sizeof(*c));
    for (size_t i = 0; i < TERN_ARRAY_SIZE(schema); i++) {
        const opt_t *o = &schema[i];
        if (o->type == OPT_UINT || o->type == OPT_WORKERS) {
            store_uint(c, o, o->def);
        } else if (o->type == OPT_BOOL) {
            bool v = o->def != 0;
            memcpy((char *)c + o->offset, &v, sizeof(v));
        }
    }
}

void config_schema_print(FILE *out)
{
    for (size_t i = 0; i < TERN_ARRAY_SIZE(schema); i++) {
        const opt_t *o = &schema[i];
        fprintf(out, "  %-20s %s", o->key, o->desc);
        switch (o->type) {
        case OPT_UINT:
        case OPT_WORKERS:
            fprintf(out, " [%lld..%lld, default %lld]\n", o->min, o->max, o->def);
            break;
        case OPT_BOOL:
            fprintf(out, " [default %s]\n", o->def ? "true" : "false");
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
    free(c->identity);
    free(c->version);
    config_init(c);
}
