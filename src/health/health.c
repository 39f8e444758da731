/*
 * health.c — check specs, the endpoint registry, counters and ranks (see health.h).
 *
 * Decisions, and why:
 *   - Endpoints are found by a hash of the whole spec (address, port, protocol, uri, host,
 *     method, codes, timeout, counts) in a chained table that doubles when full: interning is
 *     on the loader's path, thousands per zone build, so it must not scan.
 *   - The rank is stored in one byte with a relaxed atomic store: workers need no ordering with
 *     anything else (a rank is a hint that changes every few seconds at most), only a value that
 *     is never torn, and the byte never moves while any zone can point at it.
 *   - State changes are logged here, where the counter moves, so own results, results read from
 *     Redis and overrides are logged the same way.
 */
#include "tern/health/health.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "health_int.h"
#include "tern/common/err.h"
#include "tern/common/hash.h"
#include "tern/common/log.h"

static const char *const proto_names[HEALTH_PROTO_COUNT] = {
    [HEALTH_HTTP] = "http", [HEALTH_HTTPS] = "https", [HEALTH_TCP] = "tcp", [HEALTH_ICMP] = "icmp"};

const char *health_proto_name(unsigned proto)
{
    return proto < HEALTH_PROTO_COUNT ? proto_names[proto] : "?";
}

int health_proto_parse(const char *s, size_t len)
{
    for (unsigned i = 0; i < HEALTH_PROTO_COUNT; i++)
        if (strlen(proto_names[i]) == len && memcmp(proto_names[i], s, len) == 0)
            return (int)i;
    if (len == 4 && memcmp(s, "ping", 4) == 0)
        return HEALTH_ICMP; /* redins' other name for it */
    return -1;
}

uint16_t health_spec_default_port(unsigned proto)
{
    return proto == HEALTH_HTTP ? 80 : proto == HEALTH_HTTPS ? 443 : 0;
}

void health_spec_init(health_spec_t *s)
{
    memset(s, 0, sizeof(*s));
    s->proto = HEALTH_HTTP;
    s->family = 4;
    s->method = HEALTH_HEAD;
    s->tls_verify = true;
    s->port = 80;
    s->up_count = HEALTH_DEFAULT_UP;
    s->down_count = HEALTH_DEFAULT_DOWN;
    s->timeout_ms = HEALTH_DEFAULT_TIMEOUT_MS;
}

static int invalid(char *err, size_t errlen, const char *fmt, ...) TERN_PRINTF(3, 4);
static int invalid(char *err, size_t errlen, const char *fmt, ...)
{
    if (err && errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return TERN_EINVAL;
}

int health_spec_check(const health_spec_t *s, char *err, size_t errlen)
{
    if (s->proto >= HEALTH_PROTO_COUNT)
        return invalid(err, errlen, "unknown protocol");
    if (s->proto == HEALTH_ICMP) {
        if (s->port != 0)
            return invalid(err, errlen, "port %u: an icmp check has no port", s->port);
    } else if (s->port == 0) {
        return invalid(err, errlen, "port 0 is not a port (want 1..65535)");
    }
    if (s->family != 4 && s->family != 6)
        return invalid(err, errlen, "address family %u", s->family);
    if (s->timeout_ms < 1 || s->timeout_ms > HEALTH_TIMEOUT_MAX_MS)
        return invalid(err, errlen, "timeout %u ms is out of range 1..%u", s->timeout_ms,
                       HEALTH_TIMEOUT_MAX_MS);
    if (s->up_count < 1 || s->up_count > HEALTH_COUNT_MAX)
        return invalid(err, errlen, "up_count %d is out of range 1..%d", s->up_count,
                       HEALTH_COUNT_MAX);
    if (s->down_count > -1 || s->down_count < -HEALTH_COUNT_MAX)
        return invalid(err, errlen, "down_count %d is out of range 1..%d (or -%d..-1)",
                       s->down_count, HEALTH_COUNT_MAX, HEALTH_COUNT_MAX);
    if (s->nexpect > HEALTH_MAX_EXPECT)
        return invalid(err, errlen, "more than %d expected status codes", HEALTH_MAX_EXPECT);
    for (unsigned i = 0; i < s->nexpect; i++)
        if (s->expect[i] < 100 || s->expect[i] > 599)
            return invalid(err, errlen, "expected status %u is not an HTTP status (100..599)",
                           s->expect[i]);
    if (s->method > HEALTH_GET)
        return invalid(err, errlen, "unknown method");
    if (s->uri) {
        size_t n = strlen(s->uri);
        if (n == 0 || s->uri[0] != '/')
            return invalid(err, errlen, "uri must start with '/'");
        if (n > HEALTH_URI_MAX)
            return invalid(err, errlen, "uri longer than %d bytes", HEALTH_URI_MAX);
        for (size_t i = 0; i < n; i++)
            if ((unsigned char)s->uri[i] <= ' ' || s->uri[i] == 0x7f)
                return invalid(err, errlen, "uri contains a space or control character");
    }
    if (s->host) {
        size_t n = strlen(s->host);
        if (n == 0 || n > 253)
            return invalid(err, errlen, "host must be 1..253 characters");
        for (size_t i = 0; i < n; i++)
            if ((unsigned char)s->host[i] <= ' ' || s->host[i] == 0x7f || s->host[i] == '/' ||
                s->host[i] == ':')
                return invalid(err, errlen, "host contains a space, control character, '/' or ':'");
    }
    if (s->load_src != HEALTH_LOAD_NONE) {
        size_t n = s->load_key ? strlen(s->load_key) : 0;
        if (s->load_src > HEALTH_LOAD_REDIS || n == 0 || n >= HEALTH_LOAD_KEY_MAX)
            return invalid(err, errlen, "a load source needs a name of 1..%d characters",
                           HEALTH_LOAD_KEY_MAX - 1);
        if (s->load_src != HEALTH_LOAD_REDIS && s->proto != HEALTH_HTTP && s->proto != HEALTH_HTTPS)
            return invalid(err, errlen, "a load is read from an http or https check only");
        if (s->load_src == HEALTH_LOAD_JSON && s->method != HEALTH_GET)
            return invalid(err, errlen, "a load in the JSON body needs method GET");
    }
    return 0;
}

void health_spec_describe(const health_spec_t *s, char *buf, size_t len)
{
    char ip[INET6_ADDRSTRLEN];
    inet_ntop(s->family == 6 ? AF_INET6 : AF_INET, s->addr, ip, sizeof(ip));
    const char *l = s->family == 6 ? "[" : "", *r = s->family == 6 ? "]" : "";
    if (s->proto == HEALTH_ICMP)
        snprintf(buf, len, "%s icmp%s%s", ip, s->host ? " " : "", s->host ? s->host : "");
    else
        snprintf(buf, len, "%s%s%s:%u %s%s%s%s%s", l, ip, r, s->port, health_proto_name(s->proto),
                 s->uri && s->proto != HEALTH_TCP ? " " : "",
                 s->uri && s->proto != HEALTH_TCP ? s->uri : "", s->host ? " " : "",
                 s->host ? s->host : "");
}

/* ---- the registry ----------------------------------------------------------------------- */

/* Initial buckets: a few zones' worth of endpoints before the first doubling. */
#define BUCKETS_MIN 64

static size_t alen(const health_spec_t *s)
{
    return s->family == 6 ? 16 : 4;
}

/* "/" and no uri are one uri. */
static const char *uri_of(const health_spec_t *s)
{
    return s->uri && strcmp(s->uri, "/") != 0 ? s->uri : NULL;
}

static uint64_t spec_hash(const health_spec_t *s)
{
    uint8_t fixed[64];
    size_t n = 0;
    fixed[n++] = s->proto;
    fixed[n++] = s->family;
    fixed[n++] = s->method;
    fixed[n++] = s->tls_verify;
    fixed[n++] = s->nexpect;
    memcpy(fixed + n, &s->port, 2), n += 2;
    memcpy(fixed + n, &s->up_count, 2), n += 2;
    memcpy(fixed + n, &s->down_count, 2), n += 2;
    memcpy(fixed + n, &s->timeout_ms, 4), n += 4;
    memcpy(fixed + n, s->addr, alen(s)), n += alen(s);
    uint64_t h = tern_hash64(fixed, n, 0x6865616c7468ull);
    h = tern_hash64(s->expect, s->nexpect * sizeof(s->expect[0]), h);
    if (uri_of(s))
        h = tern_hash64(uri_of(s), strlen(uri_of(s)), h ^ 1);
    if (s->host)
        h = tern_hash64(s->host, strlen(s->host), h ^ 2);
    if (s->load_src)
        h = tern_hash64(s->load_key, strlen(s->load_key), h ^ (3 + s->load_src));
    return h;
}

static bool str_eq(const char *a, const char *b)
{
    return a == b || (a && b && strcmp(a, b) == 0);
}

static bool spec_eq(const health_spec_t *a, const health_spec_t *b)
{
    return a->proto == b->proto && a->family == b->family && a->method == b->method &&
           a->tls_verify == b->tls_verify && a->nexpect == b->nexpect && a->port == b->port &&
           a->up_count == b->up_count && a->down_count == b->down_count &&
           a->timeout_ms == b->timeout_ms && memcmp(a->addr, b->addr, alen(a)) == 0 &&
           memcmp(a->expect, b->expect, a->nexpect * sizeof(a->expect[0])) == 0 &&
           str_eq(uri_of(a), uri_of(b)) && str_eq(a->host, b->host) && a->load_src == b->load_src &&
           str_eq(a->load_key, b->load_key);
}

health_registry_t *health_registry_new(void)
{
    health_registry_t *r = calloc(1, sizeof(*r));
    if (!r)
        return NULL;
    r->nbuckets = BUCKETS_MIN;
    r->buckets = calloc(r->nbuckets, sizeof(*r->buckets));
    if (!r->buckets || pthread_mutex_init(&r->mu, NULL) != 0) {
        free(r->buckets);
        free(r);
        return NULL;
    }
    return r;
}

void health_registry_free(health_registry_t *r)
{
    if (!r)
        return;
    if (r->count)
        log_warn("health: %zu endpoints still referenced at exit", r->count);
    while (r->head) {
        struct ep *e = r->head;
        r->head = e->next;
        free(e->strs);
        free(e);
    }
    while (r->ovr) {
        struct ovr *o = r->ovr;
        r->ovr = o->next;
        free(o);
    }
    pthread_mutex_destroy(&r->mu);
    free(r->buckets);
    free(r);
}

static void grow(health_registry_t *r)
{
    size_t n = r->nbuckets * 2;
    struct ep **b = calloc(n, sizeof(*b));
    if (!b)
        return; /* longer chains, still correct */
    for (size_t i = 0; i < r->nbuckets; i++) {
        struct ep *e = r->buckets[i];
        while (e) {
            struct ep *next = e->hnext;
            size_t k = e->hash & (n - 1);
            e->hnext = b[k];
            b[k] = e;
            e = next;
        }
    }
    free(r->buckets);
    r->buckets = b;
    r->nbuckets = n;
}

static const struct ovr *find_ovr(const health_registry_t *r, const health_spec_t *s)
{
    for (const struct ovr *o = r->ovr; o; o = o->next)
        if (o->family == s->family && memcmp(o->addr, s->addr, alen(s)) == 0 &&
            (o->port == 0 || o->port == s->port))
            return o;
    return NULL;
}

static unsigned rank_of(const struct ep *e)
{
    if (e->override == HEALTH_FORCE_UP)
        return HEALTH_RANK_UP;
    if (e->override == HEALTH_FORCE_DOWN)
        return HEALTH_RANK_DOWN;
    if (e->status >= e->spec.up_count)
        return HEALTH_RANK_UP;
    if (e->status <= e->spec.down_count)
        return HEALTH_RANK_DOWN;
    if (e->status == e->spec.up_count - 1)
        return HEALTH_RANK_NEAR;
    return HEALTH_RANK_MIDDLE;
}

const char *health_ep_state(const struct ep *e)
{
    switch (rank_of(e)) {
    case HEALTH_RANK_UP:
        return "up";
    case HEALTH_RANK_DOWN:
        return "down";
    default:
        return e->status < 0 ? "failing" : e->status == 0 ? "unknown" : "recovering";
    }
}

/* Store the rank the state implies; log when the state name changes. */
static void update(struct ep *e, const char *before, const char *why)
{
    __atomic_store_n(&e->pub.rank, (uint8_t)rank_of(e), __ATOMIC_RELAXED);
    const char *after = health_ep_state(e);
    if (before == after)
        return;
    char d[HEALTH_RKEY_MAX];
    health_spec_describe(&e->spec, d, sizeof(d));
    log_info("health: %s: %s -> %s (counter %d)%s%s", d, before, after, e->status,
             why && *why ? ": " : "", why ? why : "");
}

health_ep_t *health_intern(health_registry_t *r, const health_spec_t *spec)
{
    uint64_t h = spec_hash(spec);
    pthread_mutex_lock(&r->mu);
    for (struct ep *e = r->buckets[h & (r->nbuckets - 1)]; e; e = e->hnext) {
        if (e->hash == h && spec_eq(&e->spec, spec)) {
            e->refs++;
            pthread_mutex_unlock(&r->mu);
            return &e->pub;
        }
    }
    size_t ul = spec->uri ? strlen(spec->uri) + 1 : 0, hl = spec->host ? strlen(spec->host) + 1 : 0;
    size_t ll = spec->load_key ? strlen(spec->load_key) + 1 : 0;
    char addr[INET6_ADDRSTRLEN], rkey[HEALTH_RKEY_MAX];
    inet_ntop(spec->family == 6 ? AF_INET6 : AF_INET, spec->addr, addr, sizeof(addr));
    bool redins_key = spec->host && spec->proto != HEALTH_TCP;
    if (redins_key)
        snprintf(rkey, sizeof(rkey), "redins:healthcheck:%s.:%s", spec->host, addr);
    else
        snprintf(rkey, sizeof(rkey), "tern:healthcheck:%s:%s:%s:%u", health_proto_name(spec->proto),
                 spec->host ? spec->host : "-", addr, spec->port);
    size_t kl = strlen(rkey) + 1;
    struct ep *e = calloc(1, sizeof(*e));
    char *strs = malloc(ul + hl + kl + ll);
    if (!e || !strs) {
        pthread_mutex_unlock(&r->mu);
        free(e);
        free(strs);
        return NULL;
    }
    e->reg = r;
    e->hash = h;
    e->refs = 1;
    e->spec = *spec;
    e->strs = strs;
    e->spec.uri = NULL;
    e->spec.host = NULL;
    if (ul) {
        memcpy(strs, spec->uri, ul);
        e->spec.uri = strs;
    }
    if (hl) {
        memcpy(strs + ul, spec->host, hl);
        e->spec.host = strs + ul;
    }
    memcpy(strs + ul + hl, rkey, kl);
    e->rkey = strs + ul + hl;
    e->spec.load_key = NULL;
    if (ll) {
        memcpy(strs + ul + hl + kl, spec->load_key, ll);
        e->spec.load_key = strs + ul + hl + kl;
    }
    __atomic_store_n(&e->pub.load, HEALTH_LOAD_UNKNOWN, __ATOMIC_RELAXED);
    e->redins_key = redins_key;
    memcpy(e->addr_text, addr, sizeof(addr));
    const struct ovr *o = find_ovr(r, spec);
    e->override = o ? o->state : HEALTH_AUTO;
    __atomic_store_n(&e->pub.rank, (uint8_t)rank_of(e), __ATOMIC_RELAXED);
    e->due_ms = 0; /* at once */
    size_t k = h & (r->nbuckets - 1);
    e->hnext = r->buckets[k];
    r->buckets[k] = e;
    e->prev = r->tail;
    if (r->tail)
        r->tail->next = e;
    else
        r->head = e;
    r->tail = e;
    if (++r->count > r->nbuckets)
        grow(r);
    if (r->wake)
        r->wake(r->wake_ctx);
    pthread_mutex_unlock(&r->mu);
    return &e->pub;
}

void health_ep_retain(health_ep_t *p)
{
    struct ep *e = ep_of(p);
    pthread_mutex_lock(&e->reg->mu);
    e->refs++;
    pthread_mutex_unlock(&e->reg->mu);
}

void health_ep_destroy(struct ep *e)
{
    health_registry_t *r = e->reg;
    struct ep **pp = &r->buckets[e->hash & (r->nbuckets - 1)];
    while (*pp != e)
        pp = &(*pp)->hnext;
    *pp = e->hnext;
    if (e->prev)
        e->prev->next = e->next;
    else
        r->head = e->next;
    if (e->next)
        e->next->prev = e->prev;
    else
        r->tail = e->prev;
    r->count--;
    free(e->strs);
    free(e);
}

void health_ep_release(health_ep_t *p)
{
    if (!p)
        return;
    struct ep *e = ep_of(p);
    health_registry_t *r = e->reg;
    pthread_mutex_lock(&r->mu);
    if (--e->refs == 0)
        health_ep_destroy(e);
    pthread_mutex_unlock(&r->mu);
}

void health_ep_result(struct ep *e, bool ok, const char *err, uint32_t latency_us, int64_t wall_ms)
{
    const char *before = health_ep_state(e);
    if (ok) {
        /* redins' statusUp */
        e->status = e->status >= 0 ? (int16_t)(e->status + 1) : 1;
        if (e->status > e->spec.up_count)
            e->status = e->spec.up_count;
    } else {
        /* redins' statusDown */
        e->status = e->status <= 0 ? (int16_t)(e->status - 1) : -1;
        if (e->status < e->spec.down_count)
            e->status = e->spec.down_count;
        e->failures++;
    }
    e->checks++;
    e->checked = true;
    e->last_ok = ok;
    e->last_remote = false;
    e->last_check = wall_ms;
    e->latency_us = latency_us;
    snprintf(e->error, sizeof(e->error), "%s", ok || !err ? "" : err);
    update(e, before, e->error);
}

void health_ep_adopt(struct ep *e, int status, int64_t wall_ms, const char *err)
{
    const char *before = health_ep_state(e);
    if (status > e->spec.up_count)
        status = e->spec.up_count;
    if (status < e->spec.down_count)
        status = e->spec.down_count;
    e->status = (int16_t)status;
    e->checked = true;
    e->last_ok = status > 0;
    e->last_remote = true;
    e->last_check = wall_ms;
    snprintf(e->error, sizeof(e->error), "%s", err ? err : "");
    update(e, before, "another node's check (Redis)");
}

int health_set_override(health_registry_t *r, int family, const uint8_t *addr, uint16_t port,
                        health_override_t state)
{
    size_t n = family == 6 ? 16 : 4;
    pthread_mutex_lock(&r->mu);
    /* one entry per (address, port): a new one replaces it, auto removes it */
    for (struct ovr **pp = &r->ovr; *pp;) {
        struct ovr *o = *pp;
        if (o->family == family && o->port == port && memcmp(o->addr, addr, n) == 0) {
            *pp = o->next;
            free(o);
        } else {
            pp = &o->next;
        }
    }
    if (state != HEALTH_AUTO) {
        struct ovr *o = calloc(1, sizeof(*o));
        if (!o) {
            pthread_mutex_unlock(&r->mu);
            return TERN_ENOMEM;
        }
        o->family = (uint8_t)family;
        memcpy(o->addr, addr, n);
        o->port = port;
        o->state = (uint8_t)state;
        o->next = r->ovr;
        r->ovr = o;
    }
    int matched = 0;
    for (struct ep *e = r->head; e; e = e->next) {
        if (e->spec.family != family || memcmp(e->spec.addr, addr, n) != 0 ||
            (port && e->spec.port != port))
            continue;
        matched++;
        const char *before = health_ep_state(e);
        /* auto on one port leaves an override of every port in force, and the reverse */
        const struct ovr *o = find_ovr(r, &e->spec);
        e->override = o ? o->state : HEALTH_AUTO;
        update(e, before,
               e->override == HEALTH_FORCE_UP     ? "forced up by the administrator"
               : e->override == HEALTH_FORCE_DOWN ? "forced down by the administrator"
                                                  : "given back to its checks");
    }
    if (r->wake)
        r->wake(r->wake_ctx);
    pthread_mutex_unlock(&r->mu);
    return matched;
}

size_t health_each(health_registry_t *r, health_each_fn fn, void *ctx)
{
    size_t n = 0;
    pthread_mutex_lock(&r->mu);
    for (struct ep *e = r->head; e; e = e->next, n++) {
        health_ep_info_t info = {.spec = &e->spec,
                                 .ep = &e->pub,
                                 .rank = rank_of(e),
                                 .status = e->status,
                                 .state = health_ep_state(e),
                                 .override = e->override,
                                 .checked = e->checked,
                                 .last_ok = e->last_ok,
                                 .last_remote = e->last_remote,
                                 .last_check = e->last_check,
                                 .latency_us = e->latency_us,
                                 .checks = e->checks,
                                 .failures = e->failures,
                                 .error = e->error,
                                 .refs = e->refs};
        fn(ctx, &info);
    }
    pthread_mutex_unlock(&r->mu);
    return n;
}
