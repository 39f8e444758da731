/*
 * config_listen.c — "listen:", the addresses ternd serves (config_listen_t, whose definition is
 * tern/net/server_settings.h): their text form ("ADDR:PORT", "[V6]:PORT"), the mapping form
 * {address, udp, tcp}, the merging of entries for one address (redins lists UDP and TCP apart:
 * config_redins.c's "server" appends here too), the comparison a reload makes, and the settings
 * handed to the workers (config_server_settings()).
 *
 * Nothing here holds state beyond one config_load() call.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config_blocks.h"
#include "tern/common/err.h"

bool config_parse_port(const char *s, uint16_t *port)
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
            !config_parse_port(port_text, &sa->sin6_port))
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
        if (inet_pton(AF_INET, host, &sa->sin_addr) != 1 ||
            !config_parse_port(port_text, &sa->sin_port))
            return TERN_EINVAL;
        sa->sin_family = AF_INET;
        sa->sin_port = htons(sa->sin_port);
        l->addrlen = sizeof(*sa);
    }
    memcpy(l->text, text, tl + 1);
    l->udp = l->tcp = true;
    return 0;
}

bool config_listen_text_ok(const char *s)
{
    config_listen_t tmp;
    return config_parse_listen(&tmp, s) == 0;
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
int config_put_listen(parse_ctx_t *pc, const yaml_node_t *n, const char *key,
                      const config_listen_t *e)
{
    config_t *c = pc->c;
    for (size_t i = 0; i < c->nlisten && listen_port(e) != 0; i++) {
        config_listen_t *o = &c->listen[i];
        if (!same_endpoint(o, e))
            continue;
        if ((o->udp && e->udp) || (o->tcp && e->tcp))
            return config_fail(pc, n, key, "%s on %s is given twice (first at line %zu)",
                               o->udp && e->udp ? "udp" : "tcp", e->text, pc->listen_line[i]);
        o->udp |= e->udp;
        o->tcp |= e->tcp;
        return 0;
    }
    if (c->nlisten >= CONFIG_MAX_LISTEN)
        return config_fail(pc, n, key, "more than %d addresses", CONFIG_MAX_LISTEN);
    pc->listen_line[c->nlisten] = line_of(n);
    c->listen[c->nlisten++] = *e;
    return 0;
}

static const field_t listen_fields[] = {
    {"address", "\"ADDR:PORT\" or \"[V6]:PORT\"", true, NULL},
    {"udp", "serve UDP, default true", false, NULL},
    {"tcp", "serve TCP, default true", false, NULL},
};

static int parse_address(parse_ctx_t *pc, const yaml_node_t *n, const char *key, const char *field,
                         config_listen_t *e)
{
    const char *want = field ? "\"ADDR:PORT\"" : "\"ADDR:PORT\" or {address, udp, tcp}";
    const char *sep = field ? ": " : "";
    field = field ? field : "";
    if (!is_text(n))
        return config_fail(pc, n, key, "%s%sexpected %s, got %s", field, sep, want,
                           config_node_kind(n));
    if (config_parse_listen(e, scalar(n)) < 0)
        return config_fail(pc, n, key, "%s%sbad address \"%s\" (want ADDR:PORT or [V6]:PORT)",
                           field, sep, scalar(n));
    return 0;
}

static int add_listen_item(parse_ctx_t *pc, const opt_t *o, const yaml_node_t *parent,
                           const yaml_node_t *n, size_t index)
{
    char key[64];
    config_listen_t e;
    int r;
    config_item_key(key, sizeof(key), o->key, parent, index);
    if (n->type != YAML_MAPPING_NODE) {
        if ((r = parse_address(pc, n, key, NULL, &e)) < 0)
            return r;
        return config_put_listen(pc, n, key, &e);
    }
    const yaml_node_t *val[TERN_ARRAY_SIZE(listen_fields)];
    if ((r = config_get_fields(pc, n, key, listen_fields, TERN_ARRAY_SIZE(listen_fields), val)) < 0)
        return r;
    if ((r = parse_address(pc, val[0], key, "address", &e)) < 0)
        return r;
    if (val[1] && (r = config_get_bool(pc, val[1], key, "udp", &e.udp)) < 0)
        return r;
    if (val[2] && (r = config_get_bool(pc, val[2], key, "tcp", &e.tcp)) < 0)
        return r;
    if (!e.udp && !e.tcp)
        return config_fail(pc, n, key, "udp and tcp are both false");
    return config_put_listen(pc, n, key, &e);
}

static int set_listen(parse_ctx_t *pc, const opt_t *o, const yaml_node_t *k, const yaml_node_t *n)
{
    pc->c->nlisten = 0; /* the file's list replaces whatever was there */
    return config_each_item(pc, o, n, add_listen_item);
}

/* The same listen list: same length, and entry by entry (in order) the same address, port and
 * udp/tcp flags; the text as written does not matter. */
static bool same_listen_list(const config_t *a, const config_t *b)
{
    if (a->nlisten != b->nlisten)
        return false;
    for (size_t i = 0; i < a->nlisten; i++) {
        const config_listen_t *x = &a->listen[i], *y = &b->listen[i];
        if (!same_endpoint(x, y) || x->udp != y->udp || x->tcp != y->tcp)
            return false;
    }
    return true;
}

/* ---- xdp: listen: the interfaces served over AF_XDP --------------------------------------- */

static int add_xdp_iface(parse_ctx_t *pc, const opt_t *o, const yaml_node_t *parent,
                         const yaml_node_t *n, size_t index)
{
    char key[64];
    config_t *c = pc->c;
    config_item_key(key, sizeof(key), "xdp: listen", parent, index);
    (void)o;
    if (!is_text(n) || n->type != YAML_SCALAR_NODE)
        return config_fail(pc, n, key, "expected an interface name, got %s", config_node_kind(n));
    const char *name = scalar(n);
    size_t len = strlen(name);
    /* the kernel's limit (IFNAMSIZ); a slash or a blank cannot be in an interface name */
    if (len == 0 || len > CONFIG_XDP_IFNAME_MAX || strpbrk(name, "/ \t\n:") != NULL)
        return config_fail(pc, n, key,
                           "bad interface name \"%s\" (1..%d characters, no '/', ':' "
                           "or blank)",
                           name, CONFIG_XDP_IFNAME_MAX);
    for (size_t i = 0; i < c->nxdp; i++)
        if (strcmp(c->xdp_listen[i], name) == 0)
            return config_fail(pc, n, key, "interface %s is given twice", name);
    if (c->nxdp >= CONFIG_MAX_XDP)
        return config_fail(pc, n, key, "more than %d interfaces", CONFIG_MAX_XDP);
    memcpy(c->xdp_listen[c->nxdp++], name, len + 1);
    return 0;
}

static const field_t xdp_fields[] = {
    {"listen", "interface names (one or a list) answered over AF_XDP", false, NULL},
};

static int set_xdp(parse_ctx_t *pc, const opt_t *o, const yaml_node_t *k, const yaml_node_t *n)
{
    (void)k;
    pc->c->nxdp = 0; /* the file's block replaces whatever was there */
    if (is_null(n))
        return 0;
    const yaml_node_t *val[TERN_ARRAY_SIZE(xdp_fields)];
    int r = config_get_fields(pc, n, o->key, xdp_fields, TERN_ARRAY_SIZE(xdp_fields), val);
    if (r < 0 || !val[0] || is_null(val[0]))
        return r;
    return config_each_item(pc, o, val[0], add_xdp_iface);
}

static void reset_xdp(config_t *c)
{
    c->nxdp = 0;
}

static bool same_xdp(const config_t *a, const config_t *b)
{
    if (a->nxdp != b->nxdp)
        return false;
    for (size_t i = 0; i < a->nxdp; i++)
        if (strcmp(a->xdp_listen[i], b->xdp_listen[i]) != 0)
            return false;
    return true;
}

static void print_xdp(FILE *out, int depth)
{
    config_print_fields(out, depth, xdp_fields, TERN_ARRAY_SIZE(xdp_fields));
}

const conf_block_t config_xdp_block = {
    .parse = set_xdp, .reset = reset_xdp, .same = same_xdp, .print = print_xdp};

bool config_same_listen(const config_t *a, const config_t *b)
{
    return a->workers == b->workers && same_listen_list(a, b) && same_xdp(a, b);
}

/* The port XDP serves: the first UDP listen address's, 53 when none is given (a listen on port
 * 0 picks an ephemeral one per start, which XDP cannot follow: 53 then too). */
static uint16_t xdp_port(const config_t *c)
{
    for (size_t i = 0; i < c->nlisten; i++)
        if (c->listen[i].udp && listen_port(&c->listen[i]) != 0)
            return listen_port(&c->listen[i]);
    return 53;
}

server_settings_t config_server_settings(const config_t *c)
{
    return (server_settings_t){
        .listen = c->listen,
        .nlisten = c->nlisten,
        .workers = c->workers,
        .tcp_idle_timeout = c->tcp_idle_timeout,
        .tcp_max_connections = c->tcp_max_connections,
        .tcp_max_lifetime = c->tcp_max_lifetime,
        .tcp_max_inflight = c->tcp_max_inflight,
        .tcp_client_prefix_v4 = c->tcp_client_prefix_v4,
        .tcp_client_prefix_v6 = c->tcp_client_prefix_v6,
        .udp_mmsg = c->udp_mmsg,
        .udp_steering = c->udp_steering,
        .udp_busy_poll_us = c->udp_busy_poll_us,
        .udp_busy_poll_budget = c->udp_busy_poll_budget,
        .udp_prefer_busy_poll = c->udp_prefer_busy_poll,
        .udp_rcvbuf = c->udp_rcvbuf,
        .udp_sndbuf = c->udp_sndbuf,
        .dnssec_cache = c->dnssec_cache,
        .xdp_ifaces = c->xdp_listen,
        .nxdp = c->nxdp,
        .xdp_port = xdp_port(c),
        .tls = config_tls_settings(c),
    };
}

const conf_block_t config_listen_block = {.parse = set_listen, .same = same_listen_list};
