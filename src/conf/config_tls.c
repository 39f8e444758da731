/*
 * config_tls.c — "tls:", DNS over TLS (RFC 7858) and XoT as a primary (RFC 9103): the listen
 * addresses, the certificate and key, the CAs of client certificates, and the limits of the DoT
 * pool and its handshakes; the reset, copy and comparison of config_tls_t (tern/conf/
 * config_tls.h).
 *
 * Shaped like NSD's tls-service-pem / tls-service-key / tls-port and Knot's "cert-file" /
 * "key-file": one certificate for every DoT address. Restart-only (the row says so): the
 * listeners and limits are bound at startup; SIGHUP re-reads the certificate, key and CA files
 * at the startup paths (a bad file is refused, the old credentials stay). The per-zone
 * transfer_tls is a zone key (config_xfr.c). Nothing here holds state beyond one config_load().
 */
#include <arpa/inet.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config_blocks.h"
#include "tern/common/err.h"

#define TLSFIELD(f) .offset = offsetof(config_tls_t, f), .size = sizeof(((config_tls_t *)0)->f)

enum {
    TL_LISTEN,
    TL_CERT,
    TL_KEY,
    TL_CLIENT_CA,
    TL_MAX_CONN,
    TL_HS_TIMEOUT,
    TL_MAX_HS,
    TL_MAX_HS_CLIENT,
    TL_TICKETS,
    TL_COUNT
};

static const opt_t tls_schema[TL_COUNT] = {
    [TL_LISTEN] = {.key = "listen",
                   .type = OPT_CUSTOM,
                   .desc = "required: DoT addresses, \"ADDR:PORT\", \"[V6]:PORT\" or a bare "
                           "address (port 853); one or a list"},
    [TL_CERT] = {.key = "certificate",
                 .type = OPT_PATH,
                 TLSFIELD(certificate),
                 .min = 1,
                 .max = PATH_MAX - 1,
                 .desc = "required: PEM certificate chain, leaf first; re-read on SIGHUP"},
    [TL_KEY] = {.key = "key",
                .type = OPT_PATH,
                TLSFIELD(key),
                .min = 1,
                .max = PATH_MAX - 1,
                .desc = "required: its PEM private key; re-read on SIGHUP (readable by `user`)"},
    [TL_CLIENT_CA] = {.key = "client_ca",
                      .type = OPT_PATH,
                      TLSFIELD(client_ca),
                      .min = 1,
                      .max = PATH_MAX - 1,
                      .desc = "PEM CAs of client certificates (transfer_tls: mutual); unset = "
                              "none"},
    /* Half the TCP pool's default: DoT clients are resolvers keeping a connection open, fewer
     * than TCP's occasional truncated-answer retries. */
    [TL_MAX_CONN] = {.key = "max_connections",
                     .type = OPT_UINT,
                     TLSFIELD(max_connections),
                     .def = 128,
                     .min = 1,
                     .max = 65535,
                     .desc = "DoT connections per worker (RFC 7766 limits as tcp_*: idle timeout, "
                             "lifetime, in flight, per client)"},
    /* A handshake is two round trips; 3 s covers a 1 s RTT with a retransmission, and bounds
     * what a client that stalls its handshake can hold (Knot's tcp-io-timeout is 500 ms for
     * a whole message; NSD's tls handshakes share its tcp-timeout). */
    [TL_HS_TIMEOUT] = {.key = "handshake_timeout_ms",
                       .type = OPT_UINT,
                       TLSFIELD(handshake_timeout_ms),
                       .def = 3000,
                       .min = 100,
                       .max = 60000,
                       .desc = "accept to finished handshake, else the connection is closed"},
    /* 64 handshakes in progress is about 64 signatures, some milliseconds of one core: a
     * handshake flood cannot hold a worker away from UDP and TCP for longer per round. */
    [TL_MAX_HS] = {.key = "max_handshakes",
                   .type = OPT_UINT,
                   TLSFIELD(max_handshakes),
                   .def = 64,
                   .min = 1,
                   .max = 65535,
                   .desc = "handshakes in progress per worker; more are closed at accept (the "
                           "oldest, if stalled 1 s, makes room)"},
    /* A resolver opens one connection, a few at a restart; 8 in progress from one prefix is a
     * flood's signature. */
    [TL_MAX_HS_CLIENT] = {.key = "max_handshakes_per_client",
                          .type = OPT_UINT,
                          TLSFIELD(max_handshakes_per_client),
                          .def = 8,
                          .min = 1,
                          .max = 65535,
                          .desc = "... per worker and client prefix (tcp_client_prefix_v4/v6)"},
    [TL_TICKETS] = {.key = "session_tickets",
                    .type = OPT_BOOL,
                    TLSFIELD(session_tickets),
                    .def = true,
                    .desc = "resumption by session tickets (TLS 1.3 and 1.2), keys shared by "
                            "the workers"},
};

static void tls_reset(config_t *c)
{
    config_tls_t *t = &c->tls;
    free(t->certificate);
    free(t->key);
    free(t->client_ca);
    memset(t, 0, sizeof(*t));
    config_set_defaults(t, tls_schema, TL_COUNT);
}

static int tls_copy(config_t *dst, const config_t *src)
{
    const config_tls_t *s = &src->tls;
    config_tls_t *d = &dst->tls;
    d->certificate = s->certificate ? strdup(s->certificate) : NULL;
    d->key = s->key ? strdup(s->key) : NULL;
    d->client_ca = s->client_ca ? strdup(s->client_ca) : NULL;
    if ((s->certificate && !d->certificate) || (s->key && !d->key) ||
        (s->client_ca && !d->client_ca))
        return TERN_ENOMEM;
    return 0;
}

static bool tls_same(const config_t *x, const config_t *y)
{
    const config_tls_t *a = &x->tls, *b = &y->tls;
    if (!config_same_str(a->certificate, b->certificate) || !config_same_str(a->key, b->key) ||
        !config_same_str(a->client_ca, b->client_ca) || a->nlisten != b->nlisten ||
        a->max_connections != b->max_connections ||
        a->handshake_timeout_ms != b->handshake_timeout_ms ||
        a->max_handshakes != b->max_handshakes ||
        a->max_handshakes_per_client != b->max_handshakes_per_client ||
        a->session_tickets != b->session_tickets)
        return false;
    for (size_t i = 0; i < a->nlisten; i++)
        if (a->listen[i].addrlen != b->listen[i].addrlen ||
            memcmp(&a->listen[i].addr, &b->listen[i].addr, a->listen[i].addrlen) != 0)
            return false;
    return true;
}

/* "ADDR:PORT", "[V6]:PORT", or a bare address with port 853 into l (TCP only). */
static int parse_tls_addr(config_listen_t *l, const char *text)
{
    if (config_parse_listen(l, text) == 0) {
        l->udp = false;
        return 0;
    }
    struct in6_addr a6;
    char with_port[sizeof(l->text)];
    int n = inet_pton(AF_INET6, text, &a6) == 1
                ? snprintf(with_port, sizeof(with_port), "[%s]:%d", text, CONFIG_TLS_PORT)
                : snprintf(with_port, sizeof(with_port), "%s:%d", text, CONFIG_TLS_PORT);
    if (n < 0 || (size_t)n >= sizeof(with_port) || config_parse_listen(l, with_port) < 0)
        return TERN_EINVAL;
    l->udp = false;
    return 0;
}

static int add_tls_listen(parse_ctx_t *pc, const opt_t *o, const yaml_node_t *parent,
                          const yaml_node_t *n, size_t index)
{
    config_tls_t *t = &pc->c->tls;
    char key[64];
    (void)o;
    config_item_key(key, sizeof(key), "tls: listen", parent, index);
    if (!is_text(n) || n->type != YAML_SCALAR_NODE)
        return config_fail(pc, n, key, "expected \"ADDR:PORT\" or an address, got %s",
                           config_node_kind(n));
    if (t->nlisten >= CONFIG_MAX_LISTEN)
        return config_fail(pc, n, key, "more than %d addresses", CONFIG_MAX_LISTEN);
    config_listen_t *l = &t->listen[t->nlisten];
    if (parse_tls_addr(l, scalar(n)) < 0)
        return config_fail(pc, n, key, "bad address \"%s\" (want ADDR, ADDR:PORT or [V6]:PORT)",
                           scalar(n));
    t->nlisten++;
    return 0;
}

/* "tls" at n: replaces every setting; null = no DoT. */
static int tls_parse(parse_ctx_t *pc, const opt_t *o, const yaml_node_t *k, const yaml_node_t *n)
{
    config_tls_t *t = &pc->c->tls;
    field_t fields[TL_COUNT];
    const yaml_node_t *val[TL_COUNT];
    int rc;
    (void)k;
    tls_reset(pc->c);
    if (is_null(n))
        return 0;
    config_row_fields(fields, tls_schema, TL_COUNT);
    if ((rc = config_get_fields(pc, n, o->key, fields, TL_COUNT, val)) < 0)
        return rc;
    for (size_t i = 0; i < TL_COUNT; i++)
        if (i != TL_LISTEN && val[i] &&
            (rc = config_get_row(pc, val[i], o->key, &tls_schema[i], t)) < 0)
            return rc;
    if (!val[TL_LISTEN] || is_null(val[TL_LISTEN]))
        return config_fail(pc, n, o->key, "missing \"listen\" (the DoT addresses)");
    if ((rc = config_each_item(pc, &tls_schema[TL_LISTEN], val[TL_LISTEN], add_tls_listen)) < 0)
        return rc;
    if (!t->certificate || !t->key)
        return config_fail(pc, n, o->key, "certificate and key are required");
    return 0;
}

const conf_block_t config_tls_block = {
    .rows = tls_schema,
    .nrows = TL_COUNT,
    .parse = tls_parse,
    .reset = tls_reset,
    .copy = tls_copy,
    .same = tls_same,
};

server_tls_settings_t config_tls_settings(const config_t *c)
{
    const config_tls_t *t = &c->tls;
    return (server_tls_settings_t){
        .listen = t->listen,
        .nlisten = t->certificate ? t->nlisten : 0,
        .certificate = t->certificate,
        .key = t->key,
        .client_ca = t->client_ca,
        .max_connections = t->max_connections,
        .handshake_timeout_ms = t->handshake_timeout_ms,
        .max_handshakes = t->max_handshakes,
        .max_handshakes_per_client = t->max_handshakes_per_client,
        .session_tickets = t->session_tickets,
    };
}
