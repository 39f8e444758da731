/*
 * config_xfr.c — the zone-transfer settings: TSIG keys (tsig_keys, tsig_key_file in BIND
 * syntax), and a zone's primary, notify, allow_transfer, transfer_key and allow_notify.
 *
 * Keys are decoded and checked here (tsig_key_init(), tsig_keys_parse_bind()), so a bad secret
 * or algorithm is a config error with file:line, never a transfer that fails at 3 a.m. Names
 * of keys a zone refers to are checked once the whole file is read (config_xfr_check()), since
 * tsig_keys may come after zones.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config_blocks.h"
#include "tern/common/err.h"
#include "tern/common/file.h"
#include "tern/tsig/tsig.h"

/* A key file larger than this is not a key file (a key is ~150 bytes). */
#define KEY_FILE_MAX (1u << 20)

/* Peers per list: primaries tried in order, secondaries notified; a zone with more is a
 * mistake, not a deployment. */
#define XFR_PEERS_MAX 64

static int add_key(parse_ctx_t *pc, const yaml_node_t *at, const char *key, const tsig_key_t *k)
{
    config_t *c = pc->c;
    for (size_t i = 0; i < c->ntsig_keys; i++)
        if (strcmp(c->tsig_keys[i].name, k->name) == 0)
            return config_fail(pc, at, key, "key \"%s\" is defined twice", k->name);
    tsig_key_t *n = realloc(c->tsig_keys, (c->ntsig_keys + 1) * sizeof(*n));
    if (!n)
        return TERN_ENOMEM;
    c->tsig_keys = n;
    c->tsig_keys[c->ntsig_keys++] = *k;
    return 0;
}

enum { TK_NAME, TK_ALGORITHM, TK_SECRET, TK_COUNT };
static const field_t tsig_key_fields[TK_COUNT] = {
    [TK_NAME] = {"name", "the key's name, as the peers know it", true, NULL},
    [TK_ALGORITHM] = {"algorithm", "hmac-sha256 (or hmac-md5, -sha1, -sha224, -sha384, -sha512)",
                      true, NULL},
    [TK_SECRET] = {"secret", "the shared secret in base64", true, NULL},
};

static int add_key_item(parse_ctx_t *pc, const opt_t *o, const yaml_node_t *parent,
                        const yaml_node_t *n, size_t index)
{
    char key[64], err[256];
    const yaml_node_t *val[TK_COUNT];
    config_item_key(key, sizeof(key), o->key, parent, index);
    int r = config_get_fields(pc, n, key, tsig_key_fields, TK_COUNT, val);
    if (r < 0)
        return r;
    for (size_t i = 0; i < TK_COUNT; i++)
        if (!is_text(val[i]) || scalar(val[i])[0] == '\0')
            return config_fail(pc, val[i], key, "%s: expected a non-empty string, got %s",
                               tsig_key_fields[i].key, config_node_kind(val[i]));
    tsig_key_t k;
    if (tsig_key_init(&k, scalar(val[TK_NAME]), scalar(val[TK_ALGORITHM]), scalar(val[TK_SECRET]),
                      err, sizeof(err)) < 0)
        return config_fail(pc, n, key, "%s", err);
    r = add_key(pc, n, key, &k);
    explicit_bzero(&k, sizeof(k));
    return r;
}

/* tern's "tsig_keys" (a list of {name, algorithm, secret}), appended to c->tsig_keys. */
static int tsig_keys_parse(parse_ctx_t *pc, const opt_t *o, const yaml_node_t *k,
                           const yaml_node_t *n)
{
    if (is_null(n))
        return 0;
    if (n->type != YAML_SEQUENCE_NODE)
        return config_fail(pc, n, o->key, "expected a list of {name, algorithm, secret}, got %s",
                           config_node_kind(n));
    return config_each_item(pc, o, n, add_key_item);
}

/* One BIND key file (path as written in the config, resolved against its directory). */
static int load_key_file(parse_ctx_t *pc, const yaml_node_t *n, const char *key)
{
    if (!is_text(n) || scalar(n)[0] == '\0')
        return config_fail(pc, n, key, "expected a key file name, got %s", config_node_kind(n));
    char *path = config_resolve_path(pc, scalar(n));
    if (!path)
        return TERN_ENOMEM;
    char err[512];
    size_t len = 0;
    struct stat st;
    int fd = tern_open_regular(path, KEY_FILE_MAX, &st, err, sizeof(err));
    char *text = fd >= 0 ? malloc((size_t)st.st_size + 1) : NULL;
    if (fd < 0 || !text) {
        if (fd >= 0)
            close(fd);
        free(path);
        return fd < 0 ? config_fail(pc, n, key, "%s", err) : TERN_ENOMEM;
    }
    while (len < (size_t)st.st_size) {
        ssize_t k = read(fd, text + len, (size_t)st.st_size - len);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            break;
        len += (size_t)k;
    }
    close(fd);
    text[len] = '\0';
    int r;
    if (len != (size_t)st.st_size) {
        r = config_fail(pc, n, key, "%s: cannot read it", path);
        free(text);
        free(path);
        return r;
    }
    tsig_key_t *keys = NULL;
    size_t nkeys = 0;
    r = tsig_keys_parse_bind(text, path, &keys, &nkeys, err, sizeof(err));
    explicit_bzero(text, len);
    free(text);
    free(path);
    if (r < 0)
        return config_fail(pc, n, key, "%s", err);
    if (nkeys == 0)
        r = config_fail(pc, n, key, "%s: no key in the file", scalar(n));
    for (size_t i = 0; i < nkeys && r >= 0; i++)
        r = add_key(pc, n, key, &keys[i]);
    if (keys)
        explicit_bzero(keys, nkeys * sizeof(*keys));
    free(keys);
    return r;
}

/* "tsig_key_file": one BIND key file or a list of them, appended to c->tsig_keys. */
static int tsig_file_parse(parse_ctx_t *pc, const opt_t *o, const yaml_node_t *k,
                           const yaml_node_t *n)
{
    if (is_null(n))
        return 0;
    if (n->type != YAML_SEQUENCE_NODE)
        return load_key_file(pc, n, o->key);
    for (yaml_node_item_t *it = n->data.sequence.items.start; it < n->data.sequence.items.top;
         it++) {
        int r = load_key_file(pc, node(pc, *it), o->key);
        if (r < 0)
            return r;
    }
    return 0;
}

/* ---- a zone's peers ----------------------------------------------------------------------- */

int config_parse_xfr_peer(config_xfr_peer_t *p, const char *text)
{
    char host[INET6_ADDRSTRLEN + 1];
    const char *at = strrchr(text, '@');
    size_t hl = at ? (size_t)(at - text) : strlen(text);
    unsigned long port = 53;
    if (hl == 0 || hl >= sizeof(host))
        return TERN_EINVAL;
    memcpy(host, text, hl);
    host[hl] = '\0';
    if (at) {
        const char *ps = at + 1;
        size_t pl = strlen(ps);
        if (pl == 0 || pl > 5 || strspn(ps, "0123456789") != pl)
            return TERN_EINVAL;
        port = strtoul(ps, NULL, 10);
        if (port == 0 || port > 65535)
            return TERN_EINVAL;
    }
    memset(&p->addr, 0, sizeof(p->addr));
    struct sockaddr_in *v4 = (struct sockaddr_in *)&p->addr;
    struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)&p->addr;
    if (inet_pton(AF_INET, host, &v4->sin_addr) == 1) {
        v4->sin_family = AF_INET;
        v4->sin_port = htons((uint16_t)port);
        p->addr_len = sizeof(*v4);
    } else if (inet_pton(AF_INET6, host, &v6->sin6_addr) == 1) {
        v6->sin6_family = AF_INET6;
        v6->sin6_port = htons((uint16_t)port);
        p->addr_len = sizeof(*v6);
    } else {
        return TERN_EINVAL;
    }
    snprintf(p->text, sizeof(p->text), "%s@%lu", host, port);
    return 0;
}

/* A peer's keys. `tls` (a primary's, XoT) is last: a mapping without it is read with the first
 * two only, so its errors read as they did before XoT (a peer without tls is what it was). */
enum { PEER_ADDRESS, PEER_KEY, PEER_TLS, PEER_COUNT };
static const field_t peer_fields[PEER_COUNT] = {
    [PEER_ADDRESS] = {"address", "\"ADDR\" or \"ADDR@PORT\" (numeric)", true, NULL},
    [PEER_KEY] = {"key", "the TSIG key (of tsig_keys) to sign with", false, NULL},
    [PEER_TLS] = {"tls", "a primary: transfers over TLS (RFC 9103), port 853 by default", false,
                  NULL},
};

/* Whether mapping n has the key "tls". */
static bool has_tls_key(parse_ctx_t *pc, const yaml_node_t *n)
{
    for (yaml_node_pair_t *p = n->data.mapping.pairs.start; p < n->data.mapping.pairs.top; p++) {
        const yaml_node_t *k = node(pc, p->key);
        if (is_text(k) && strcmp(scalar(k), "tls") == 0)
            return true;
    }
    return false;
}

/* XoT's port (RFC 9103 §7.3: DoT's, RFC 7858 §3.1) for a primary with tls and no port given */
#define XOT_PORT 853

static int get_peer(parse_ctx_t *pc, const yaml_node_t *n, const char *key, config_xfr_peer_t *p,
                    bool primary)
{
    const yaml_node_t *addr = n, *val[PEER_COUNT] = {NULL};
    if (n->type == YAML_MAPPING_NODE) {
        int r = config_get_fields(pc, n, key, peer_fields,
                                  has_tls_key(pc, n) ? PEER_COUNT : PEER_TLS, val);
        if (r < 0)
            return r;
        if (val[PEER_TLS] && !primary)
            return config_fail(pc, val[PEER_TLS], key,
                               "tls: only a primary is reached over TLS (NOTIFY is a datagram)");
        if (val[PEER_TLS] && !is_null(val[PEER_TLS]) &&
            (r = config_get_xfr_tls(pc, val[PEER_TLS], key, &p->tls)) < 0)
            return r;
        addr = val[PEER_ADDRESS];
        if (val[PEER_KEY]) {
            if (!is_text(val[PEER_KEY]) || scalar(val[PEER_KEY])[0] == '\0')
                return config_fail(pc, val[PEER_KEY], key, "key: expected a key name, got %s",
                                   config_node_kind(val[PEER_KEY]));
            if (!(p->key = strdup(scalar(val[PEER_KEY]))))
                return TERN_ENOMEM;
        }
    }
    p->line = (uint32_t)line_of(n);
    if (!is_text(addr) || config_parse_xfr_peer(p, scalar(addr)) < 0)
        return config_fail(pc, addr, key,
                           "expected \"ADDR\" or \"ADDR@PORT\" with a numeric address (or "
                           "{address, key}), got %s%s%s",
                           is_text(addr) ? "\"" : config_node_kind(addr),
                           is_text(addr) ? scalar(addr) : "", is_text(addr) ? "\"" : "");
    if (p->tls && !strchr(scalar(addr), '@')) {
        char text[sizeof(p->text) + 8];
        snprintf(text, sizeof(text), "%s@%d", scalar(addr), XOT_PORT);
        if (config_parse_xfr_peer(p, text) < 0)
            return config_fail(pc, addr, key, "cannot set port %d on \"%s\"", XOT_PORT,
                               scalar(addr));
    }
    return 0;
}

static void peers_free(config_xfr_peer_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free(p[i].key);
        config_xfr_tls_free(p[i].tls);
    }
    free(p);
}

/* One peer or a list of them at n into out and nout (empty list: none). */
static int get_peers(parse_ctx_t *pc, const yaml_node_t *n, const char *key,
                     config_xfr_peer_t **out, size_t *nout, bool primary)
{
    size_t cnt = 1;
    if (n->type == YAML_SEQUENCE_NODE)
        cnt = (size_t)(n->data.sequence.items.top - n->data.sequence.items.start);
    else if (is_null(n))
        cnt = 0;
    if (cnt > XFR_PEERS_MAX)
        return config_fail(pc, n, key, "more than %d peers", XFR_PEERS_MAX);
    config_xfr_peer_t *p = cnt ? calloc(cnt, sizeof(*p)) : NULL;
    if (cnt && !p)
        return TERN_ENOMEM;
    for (size_t i = 0; i < cnt; i++) {
        char ikey[96];
        const yaml_node_t *item = n;
        if (n->type == YAML_SEQUENCE_NODE) {
            item = node(pc, n->data.sequence.items.start[i]);
            snprintf(ikey, sizeof(ikey), "%s[%zu]", key, i);
        } else {
            snprintf(ikey, sizeof(ikey), "%s", key);
        }
        int r = get_peer(pc, item, ikey, &p[i], primary);
        if (r < 0) {
            peers_free(p, cnt);
            return r;
        }
    }
    *out = p;
    *nout = cnt;
    return 0;
}

int config_get_zone_xfr(parse_ctx_t *pc, const char *key, config_zone_t *z,
                        const yaml_node_t *primary, const yaml_node_t *notify,
                        const yaml_node_t *allow_transfer, const yaml_node_t *transfer_key,
                        const yaml_node_t *allow_notify)
{
    char k[128];
    int r;
    if (primary) {
        snprintf(k, sizeof(k), "%s: primary", key);
        if ((r = get_peers(pc, primary, k, &z->primaries, &z->nprimaries, true)) < 0)
            return r;
        if (z->nprimaries == 0)
            return config_fail(pc, primary, k, "expected at least one primary");
    }
    if (notify) {
        snprintf(k, sizeof(k), "%s: notify", key);
        if ((r = get_peers(pc, notify, k, &z->notify, &z->nnotify, false)) < 0)
            return r;
    }
    if (allow_transfer) {
        if ((r = config_get_prefix_list(pc, allow_transfer, key, "allow_transfer",
                                        &z->allow_transfer)) < 0)
            return r;
    }
    if (allow_notify) {
        snprintf(k, sizeof(k), "%s: allow_notify", key);
        if (!primary)
            return config_fail(pc, allow_notify, k,
                               "only a secondary zone (with primary) takes NOTIFY");
        if ((r = config_get_prefix_list(pc, allow_notify, key, "allow_notify", &z->allow_notify)) <
            0)
            return r;
    }
    if (transfer_key) {
        snprintf(k, sizeof(k), "%s: transfer_key", key);
        if (!is_text(transfer_key) || scalar(transfer_key)[0] == '\0')
            return config_fail(pc, transfer_key, k, "expected a key name, got %s",
                               config_node_kind(transfer_key));
        if (!(z->transfer_key = strdup(scalar(transfer_key))))
            return TERN_ENOMEM;
        z->transfer_key_line = (uint32_t)line_of(transfer_key);
    }
    return 0;
}

const tsig_key_t *config_tsig_key(const config_t *c, const char *name)
{
    for (size_t i = 0; name && i < c->ntsig_keys; i++)
        if (strcasecmp(c->tsig_keys[i].name, name) == 0)
            return &c->tsig_keys[i];
    return NULL;
}

/* A key name as written: "xfr-key" and "xfr-key." are the same key. */
bool config_tsig_key_known(const config_t *c, const char *name)
{
    char n[256];
    size_t l = strlen(name);
    if (l && l < sizeof(n) && name[l - 1] == '.') {
        memcpy(n, name, l - 1);
        n[l - 1] = '\0';
        name = n;
    }
    return config_tsig_key(c, name) != NULL;
}

int config_xfr_check(const config_t *c, const char *file, char *err, size_t errlen)
{
    for (size_t i = 0; i < c->nzones; i++) {
        const config_zone_t *z = &c->zones[i];
        const char *what = NULL, *name = NULL;
        uint32_t line = 0;
        for (size_t j = 0; !what && j < z->nprimaries; j++)
            if (z->primaries[j].key && !config_tsig_key_known(c, z->primaries[j].key))
                what = "primary", name = z->primaries[j].key, line = z->primaries[j].line;
        for (size_t j = 0; !what && j < z->nnotify; j++)
            if (z->notify[j].key && !config_tsig_key_known(c, z->notify[j].key))
                what = "notify", name = z->notify[j].key, line = z->notify[j].line;
        if (!what && z->transfer_key && !config_tsig_key_known(c, z->transfer_key))
            what = "transfer_key", name = z->transfer_key, line = z->transfer_key_line;
        if (what) {
            snprintf(err, errlen,
                     "%s:%u: zone %s: %s: no TSIG key \"%s\" in tsig_keys or "
                     "tsig_key_file",
                     file ? file : "config", line, z->origin, what, name);
            return TERN_EINVAL;
        }
    }
    return 0;
}

void config_zone_xfr_reset(config_zone_t *z)
{
    peers_free(z->primaries, z->nprimaries);
    peers_free(z->notify, z->nnotify);
    z->primaries = z->notify = NULL;
    z->nprimaries = z->nnotify = 0;
    config_prefix_list_reset(&z->allow_transfer);
    config_prefix_list_reset(&z->allow_notify);
    free(z->transfer_key);
    z->transfer_key = NULL;
}

static int peers_copy(config_xfr_peer_t **dst, const config_xfr_peer_t *src, size_t n)
{
    *dst = NULL;
    if (!n)
        return 0;
    if (!(*dst = calloc(n, sizeof(**dst))))
        return TERN_ENOMEM;
    for (size_t i = 0; i < n; i++) {
        (*dst)[i] = src[i];
        (*dst)[i].key = NULL;
        (*dst)[i].tls = NULL;
        if (src[i].key && !((*dst)[i].key = strdup(src[i].key)))
            return TERN_ENOMEM;
        if (config_xfr_tls_copy(&(*dst)[i].tls, src[i].tls) < 0)
            return TERN_ENOMEM;
    }
    return 0;
}

int config_zone_xfr_copy(config_zone_t *dst, const config_zone_t *src)
{
    /* whatever dst held is not its own (a shallow copy, or nothing): start empty */
    dst->primaries = dst->notify = NULL;
    dst->nprimaries = dst->nnotify = 0;
    dst->allow_transfer = dst->allow_notify = (config_prefix_list_t){NULL, 0};
    dst->transfer_key = NULL;
    dst->transfer_key_line = src->transfer_key_line;
    dst->transfer_tls = src->transfer_tls;
    if (peers_copy(&dst->primaries, src->primaries, src->nprimaries) < 0)
        return TERN_ENOMEM;
    dst->nprimaries = src->nprimaries;
    if (peers_copy(&dst->notify, src->notify, src->nnotify) < 0)
        return TERN_ENOMEM;
    dst->nnotify = src->nnotify;
    if (config_prefix_list_copy(&dst->allow_transfer, &src->allow_transfer) < 0 ||
        config_prefix_list_copy(&dst->allow_notify, &src->allow_notify) < 0)
        return TERN_ENOMEM;
    if (src->transfer_key && !(dst->transfer_key = strdup(src->transfer_key)))
        return TERN_ENOMEM;
    return 0;
}

/* dst (its tsig_keys not its own) gets a copy of src's keys. 0 or TERN_ENOMEM. */
static int tsig_keys_copy(config_t *dst, const config_t *src)
{
    dst->tsig_keys = NULL;
    dst->ntsig_keys = 0;
    if (!src->ntsig_keys)
        return 0;
    if (!(dst->tsig_keys = malloc(src->ntsig_keys * sizeof(*dst->tsig_keys))))
        return TERN_ENOMEM;
    memcpy(dst->tsig_keys, src->tsig_keys, src->ntsig_keys * sizeof(*dst->tsig_keys));
    dst->ntsig_keys = src->ntsig_keys;
    return 0;
}

/* Wipe and free c's keys. */
static void tsig_keys_reset(config_t *c)
{
    if (c->tsig_keys)
        explicit_bzero(c->tsig_keys, c->ntsig_keys * sizeof(*c->tsig_keys));
    free(c->tsig_keys);
    c->tsig_keys = NULL;
    c->ntsig_keys = 0;
}

/* tsig_keys owns the keys both rows append to */
const conf_block_t config_tsig_keys_block = {
    .parse = tsig_keys_parse,
    .reset = tsig_keys_reset,
    .copy = tsig_keys_copy,
};

const conf_block_t config_tsig_file_block = {.parse = tsig_file_parse};
