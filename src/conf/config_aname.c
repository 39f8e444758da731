/*
 * config_aname.c — "aname:", the upstream DNS servers that resolve the targets of ANAME records
 * outside the zones tern serves: its rows, the list of upstreams (which redins' handler.upstream
 * and older top-level upstream fill too, through config_redins.c), and the reset, copy and
 * comparison of config_aname_t.
 *
 * The upstreams are asked in the background, by the ANAME resolver (src/load/aname_resolver.c),
 * for the A/AAAA of those targets only: a client's query is never forwarded to them, so tern
 * stays an authoritative-only server. They are numeric addresses: resolving the resolver's own
 * name would need a resolver before the first one is known.
 *
 * Beside the list, the block has the resolver's start-up keys: state_file (its last good results,
 * by default in systemd's $STATE_DIRECTORY), ready_wait (how long READY waits for its first
 * round) and max_stale (how old a saved result may be to be loaded); rows with offsets into
 * config_aname_t.
 *
 * Each upstream's scalar keys are opt_t rows with offsets into config_upstream_t, bounded and
 * printed by the same code as every other option; the address, its "ip" synonym and the
 * protocol (a bool in the struct) are read here. Nothing here holds state beyond one
 * config_load() call; config_aname_t is read-only once loaded.
 */
#include <arpa/inet.h>
#include <limits.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config_blocks.h"
#include "tern/common/err.h"

#define AFIELD(f) .offset = offsetof(config_aname_t, f), .size = sizeof(((config_aname_t *)0)->f)
#define UFIELD(f)                                                                                  \
    .offset = offsetof(config_upstream_t, f), .size = sizeof(((config_upstream_t *)0)->f)

/* A minute: an upstream that takes longer is down for any purpose, and the targets it was asked
 * for wait that long behind it before the next upstream is tried. */
#define UPSTREAM_TIMEOUT_MAX 60000

/* systemd's default start timeout is 90 s: a READY held longer would fail the start. */
#define READY_WAIT_MAX 60000
/* A week: past that a saved address is more likely wrong than useful (RFC 8767 §5 suggests
 * one to three days; BIND's max-stale-ttl defaults to one). */
#define MAX_STALE_MAX (7 * 86400)
/* The file in systemd's state directory (StateDirectory=tern: /var/lib/tern). */
#define STATE_FILE_NAME "aname.state"

_Static_assert(sizeof(unsigned) == sizeof(uint32_t), "timeout_ms is stored as 32 bits");

/* The index is config_upstream_t.tcp. */
static const char *const protocol_names[] = {"udp", "tcp"};

const opt_t config_aname_schema[AN_COUNT] = {
    [AN_UPSTREAMS] = {.key = "upstreams",
                      .type = OPT_CUSTOM,
                      .desc = "asked in this order for ANAME targets outside the served zones: a "
                              "list of at most 8 of these; empty or unset = none"},
    [AN_STATE_FILE] = {.key = "state_file",
                       .type = OPT_PATH,
                       AFIELD(state_file),
                       .min = 1,
                       .max = PATH_MAX - 1,
                       .desc = "last good results, served after a restart; unset: "
                               "$STATE_DIRECTORY/" STATE_FILE_NAME " or none"},
    /* 5 s: a first round with a few hundred targets and one upstream answering in tens of ms
     * fits; a dead upstream costs its timeout per (target, type), so this bounds that case */
    [AN_READY_WAIT] = {.key = "ready_wait",
                       .type = OPT_UINT,
                       AFIELD(ready_wait_ms),
                       .def = 5000,
                       .min = 0,
                       .max = READY_WAIT_MAX,
                       .desc = "ms READY waits at start for every target to be asked once; 0 = "
                               "no wait"},
    [AN_MAX_STALE] = {.key = "max_stale",
                      .type = OPT_UINT,
                      AFIELD(max_stale_s),
                      .def = 86400,
                      .min = 0,
                      .max = MAX_STALE_MAX,
                      .desc = "seconds a saved result is loaded after its TTL ran out (RFC 8767)"},
};

const opt_t config_aname_upstream_schema[AU_COUNT] = {
    [AU_ADDRESS] = {.key = "address",
                    .type = OPT_CUSTOM,
                    .desc = "required: the server's IPv4 or IPv6 address, no port, never a name "
                            "(\"ip\", redins' word, works too)"},
    /* port 53 and 400 ms: redins' defaults (its config.json) */
    [AU_PORT] = {.key = "port",
                 .type = OPT_UINT,
                 UFIELD(port),
                 .def = 53,
                 .min = 1,
                 .max = 65535,
                 .desc = "the server's port"},
    /* no field: the index is stored as the bool tcp (get_upstream()) */
    [AU_PROTOCOL] = {.key = "protocol",
                     .type = OPT_ENUM,
                     .def = 0,
                     .max = 1,
                     .names = protocol_names,
                     .desc = "how it is asked (UDP answers that come truncated are asked again "
                             "over TCP)"},
    [AU_TIMEOUT] = {.key = "timeout",
                    .type = OPT_UINT,
                    UFIELD(timeout_ms),
                    .def = 400,
                    .min = 1,
                    .max = UPSTREAM_TIMEOUT_MAX,
                    .desc = "milliseconds to wait for its answer before the next is asked"},
};

/* ---- the struct --------------------------------------------------------------------------- */

void config_aname_reset(config_aname_t *a)
{
    /* every slot: one whose entry failed half-way was cleared, the others are NULL or owned */
    for (size_t i = 0; i < CONFIG_MAX_UPSTREAMS; i++)
        free(a->upstreams[i].host);
    free(a->state_file);
    memset(a, 0, sizeof(*a));
    config_set_defaults(a, config_aname_schema, AN_COUNT);
}

int config_aname_copy(config_aname_t *dst, const config_aname_t *src)
{
    *dst = *src;
    for (size_t i = 0; i < CONFIG_MAX_UPSTREAMS; i++)
        dst->upstreams[i].host = NULL;
    dst->state_file = NULL;
    if (src->state_file && !(dst->state_file = strdup(src->state_file)))
        return TERN_ENOMEM;
    for (size_t i = 0; i < src->nupstreams; i++)
        if (!(dst->upstreams[i].host = strdup(src->upstreams[i].host)))
            return TERN_ENOMEM;
    return 0;
}

bool config_same_aname(const config_aname_t *a, const config_aname_t *b)
{
    if (a->nupstreams != b->nupstreams)
        return false;
    for (size_t i = 0; i < a->nupstreams; i++) {
        const config_upstream_t *x = &a->upstreams[i], *y = &b->upstreams[i];
        if (x->port != y->port || x->tcp != y->tcp || x->timeout_ms != y->timeout_ms ||
            strcmp(x->host, y->host) != 0)
            return false;
    }
    return true;
}

const char *config_aname_state_file(const config_aname_t *a, char *buf, size_t len)
{
    return a->state_file ? a->state_file : config_state_path(STATE_FILE_NAME, buf, len);
}

/* ---- one upstream ------------------------------------------------------------------------- */

/* The keys of an entry: the rows, with "ip" beside "address". */
enum { UF_ADDRESS, UF_IP, UF_PORT, UF_PROTOCOL, UF_TIMEOUT, UF_COUNT };

/* An entry as its list is read: where it was and its address in binary, so that one given twice
 * ("::1" and "0::1" alike) is found. */
typedef struct seen {
    size_t line;
    int family; /* AF_INET or AF_INET6 */
    uint8_t addr[16];
} seen_t;

/* The address at n (its key is field, "address" or "ip") into u->host and s. */
static int get_host(parse_ctx_t *pc, const yaml_node_t *n, const char *key, const char *field,
                    config_upstream_t *u, seen_t *s)
{
    if (!is_text(n) || is_null(n))
        return config_fail(pc, n, key, "%s: expected an IPv4 or IPv6 address, got %s", field,
                           is_null(n) ? "nothing" : config_node_kind(n));
    const char *h = scalar(n);
    if (inet_pton(AF_INET, h, s->addr) == 1)
        s->family = AF_INET;
    else if (inet_pton(AF_INET6, h, s->addr) == 1)
        s->family = AF_INET6;
    else if (config_is_host(h))
        return config_fail(pc, n, key,
                           "%s: \"%s\" is not a numeric IP address: tern does not resolve the "
                           "upstream's own name",
                           field, h);
    else
        return config_fail(pc, n, key,
                           "%s: bad address \"%s\" (want an IPv4 or IPv6 address, no port: give "
                           "the port in port)",
                           field, h);
    if (!(u->host = strdup(h)))
        return TERN_ENOMEM;
    return 0;
}

/* protocol at n into u->tcp. redins' DNS client also took "tcp-tls": said plainly. */
static int get_protocol(parse_ctx_t *pc, const yaml_node_t *n, const char *key,
                        config_upstream_t *u)
{
    const opt_t *o = &config_aname_upstream_schema[AU_PROTOCOL];
    size_t v = 0;
    if (is_text(n) && strcmp(scalar(n), "tcp-tls") == 0)
        return config_fail(pc, n, key,
                           "protocol: \"tcp-tls\" is not supported (DNS over TLS to an upstream): "
                           "give udp or tcp");
    int rc = config_get_enum(pc, n, key, o->key, o->names, (size_t)o->max + 1, &v);
    if (rc == 0)
        u->tcp = v == 1;
    return rc;
}

/* One entry (named key) at n into u, from the rows' defaults; its address's word is "ip" in a
 * redins list, "address" in tern's. */
static int get_upstream(parse_ctx_t *pc, const yaml_node_t *n, const char *key, bool redins,
                        config_upstream_t *u, seen_t *s)
{
    const opt_t *rows = config_aname_upstream_schema;
    const char *word = redins ? "ip" : "address";
    const field_t fields[UF_COUNT] = {
        [UF_ADDRESS] = {rows[AU_ADDRESS].key, rows[AU_ADDRESS].desc, false, NULL},
        [UF_IP] = {"ip", "the same as address (redins' word)", false, NULL},
        [UF_PORT] = {rows[AU_PORT].key, rows[AU_PORT].desc, false, NULL},
        [UF_PROTOCOL] = {rows[AU_PROTOCOL].key, rows[AU_PROTOCOL].desc, false, NULL},
        [UF_TIMEOUT] = {rows[AU_TIMEOUT].key, rows[AU_TIMEOUT].desc, false, NULL},
    };
    const yaml_node_t *val[UF_COUNT];
    int rc;
    memset(u, 0, sizeof(*u));
    config_set_defaults(u, rows, AU_COUNT);
    s->line = line_of(n);
    if ((rc = config_get_fields(pc, n, key, fields, UF_COUNT, val)) < 0)
        return rc;
    if (val[UF_ADDRESS] && val[UF_IP])
        return config_fail(pc, config_key_node(pc, n, redins ? "address" : "ip"), key,
                           "%s: give address or ip, not both", redins ? "address" : "ip");
    const yaml_node_t *addr = val[UF_ADDRESS] ? val[UF_ADDRESS] : val[UF_IP];
    if (!addr)
        return config_fail(pc, n, key, "missing \"%s\" (the server's IPv4 or IPv6 address)", word);
    if ((rc = get_host(pc, addr, key, val[UF_ADDRESS] ? "address" : "ip", u, s)) < 0)
        return rc;
    if (val[UF_PORT] && (rc = config_get_row(pc, val[UF_PORT], key, &rows[AU_PORT], u)) < 0)
        return rc;
    if (val[UF_PROTOCOL] && (rc = get_protocol(pc, val[UF_PROTOCOL], key, u)) < 0)
        return rc;
    if (val[UF_TIMEOUT] &&
        (rc = config_get_row(pc, val[UF_TIMEOUT], key, &rows[AU_TIMEOUT], u)) < 0)
        return rc;
    return 0;
}

/* The same server asked the same way twice would only make a failing one cost twice its
 * timeout: a copy-and-paste slip, refused. */
static int check_unique(parse_ctx_t *pc, const yaml_node_t *n, const char *key,
                        const config_aname_t *a, const seen_t *seen, size_t i)
{
    const config_upstream_t *u = &a->upstreams[i];
    size_t alen = seen[i].family == AF_INET ? 4 : 16;
    for (size_t j = 0; j < i; j++) {
        const config_upstream_t *o = &a->upstreams[j];
        if (seen[j].family == seen[i].family && memcmp(seen[j].addr, seen[i].addr, alen) == 0 &&
            o->port == u->port && o->tcp == u->tcp)
            return config_fail(pc, n, key, "%s port %u over %s is given twice (first at line %zu)",
                               u->host, (unsigned)u->port, protocol_names[u->tcp], seen[j].line);
    }
    return 0;
}

/* ---- the list and the block --------------------------------------------------------------- */

int config_get_upstreams(parse_ctx_t *pc, const yaml_node_t *n, const char *key, bool redins,
                         config_aname_t *a)
{
    seen_t seen[CONFIG_MAX_UPSTREAMS];
    char ikey[96];
    config_aname_reset(a);
    if (is_null(n))
        return 0;
    bool list = n->type == YAML_SEQUENCE_NODE;
    if (!list && !(redins && n->type == YAML_MAPPING_NODE))
        return config_fail(pc, n, key, "expected a list of {%s, port, protocol, timeout}, got %s",
                           redins ? "ip" : "address", config_node_kind(n));
    size_t count = list ? (size_t)(n->data.sequence.items.top - n->data.sequence.items.start) : 1;
    if (count > CONFIG_MAX_UPSTREAMS)
        return config_fail(pc, node(pc, n->data.sequence.items.start[CONFIG_MAX_UPSTREAMS]), key,
                           "more than %d upstreams (each is tried in turn, for up to its "
                           "timeout)",
                           CONFIG_MAX_UPSTREAMS);
    for (size_t i = 0; i < count; i++) {
        const yaml_node_t *item = list ? node(pc, n->data.sequence.items.start[i]) : n;
        config_upstream_t *u = &a->upstreams[i];
        config_item_key(ikey, sizeof(ikey), key, n, i);
        int rc = get_upstream(pc, item, ikey, redins, u, &seen[i]);
        if (rc == 0)
            rc = check_unique(pc, item, ikey, a, seen, i);
        if (rc < 0) {
            free(u->host);
            u->host = NULL;
            return rc;
        }
        a->nupstreams++;
    }
    return 0;
}

/* tern's "aname" at n: replaces every upstream; null = none. */
static int aname_parse(parse_ctx_t *pc, const opt_t *o, const yaml_node_t *k, const yaml_node_t *n)
{
    config_aname_t *a = &pc->c->aname;
    field_t fields[AN_COUNT];
    const yaml_node_t *val[AN_COUNT];
    char key[64];
    int rc;
    if (is_null(n)) {
        config_aname_reset(a);
        return 0;
    }
    config_row_fields(fields, config_aname_schema, AN_COUNT);
    if ((rc = config_get_fields(pc, n, o->key, fields, AN_COUNT, val)) < 0)
        return rc;
    /* the list first: config_get_upstreams() starts from a reset block */
    config_aname_reset(a);
    snprintf(key, sizeof(key), "%s: %s", o->key, config_aname_schema[AN_UPSTREAMS].key);
    if (val[AN_UPSTREAMS] && (rc = config_get_upstreams(pc, val[AN_UPSTREAMS], key, false, a)) < 0)
        return rc;
    for (size_t i = 0; i < AN_COUNT; i++)
        if (i != AN_UPSTREAMS && val[i] &&
            (rc = config_get_row(pc, val[i], o->key, &config_aname_schema[i], a)) < 0)
            return rc;
    return 0;
}

static void aname_reset(config_t *c)
{
    config_aname_reset(&c->aname);
}

static int aname_copy(config_t *dst, const config_t *src)
{
    memset(&dst->aname, 0, sizeof(dst->aname)); /* nothing of it is dst's yet */
    return config_aname_copy(&dst->aname, &src->aname);
}

/* aname's rows, then an upstream's under them */
static void aname_print(FILE *out, int depth)
{
    config_print_rows(out, depth, config_aname_schema, AN_COUNT);
    config_print_rows(out, depth + 1, config_aname_upstream_schema, AU_COUNT);
}

const conf_block_t config_aname_block = {
    .rows = config_aname_schema,
    .nrows = AN_COUNT,
    .parse = aname_parse,
    .reset = aname_reset,
    .copy = aname_copy,
    .print = aname_print,
};
