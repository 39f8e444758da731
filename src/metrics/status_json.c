/*
 * status_json.c — GET /status.json: the status page's document, and the health history it shows.
 *
 * The document is built with jansson from the readers /metrics and ternctl use (see status.h):
 * counters are totals, the page turns two successive documents into rates. Per-zone lines are
 * copied out of the loader's lock first (zone_copy()), then each zone's transfer state is read
 * from the transfer service under its own mutex, so no two owners' locks are ever held at once.
 */
#include <arpa/inet.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tern/checker/health_check.h"
#include "tern/common/err.h"
#include "tern/common/grow.h"
#include "tern/common/log.h"
#include "tern/metrics/status.h"
#include "tern/source/aname_resolver.h"
#include "tern/xfr/xfr.h"

/* Endpoints the history follows: far beyond a real configuration, a bound on what a broken one
 * can make this thread hold (past it, new endpoints show no since or recent results). */
#define STATUS_MAX_ENDPOINTS 4096u

/* ---- health history ---------------------------------------------------------------------------
 */

typedef struct status_ep {
    char key[160]; /* health_spec_describe() */
    char state[16];
    int64_t since;                         /* wall clock ms: first seen in this state */
    int64_t last_check;                    /* the last result recorded */
    status_result_t recent[STATUS_RECENT]; /* a ring, newest at (head - 1) */
    unsigned head, count;
    bool seen; /* in the current sample */
} status_ep_t;

/* Sorted by key after each sample, so a lookup (one per endpoint in a sample and in a document)
 * is a binary search: thousands of endpoints cost milliseconds, not a quadratic scan. */
struct status_history {
    status_ep_t *ep;
    size_t n, cap;
    size_t sorted; /* ep[0..sorted) is in key order; those after came in the current sample */
    int64_t now;   /* of the sample being taken */
};

status_history_t *status_history_new(void)
{
    return calloc(1, sizeof(status_history_t));
}

void status_history_free(status_history_t *h)
{
    if (!h)
        return;
    free(h->ep);
    free(h);
}

static int ep_cmp(const void *a, const void *b)
{
    return strcmp(((const status_ep_t *)a)->key, ((const status_ep_t *)b)->key);
}

static status_ep_t *history_find(const status_history_t *h, const char *key)
{
    size_t lo = 0, hi = h->sorted;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(h->ep[mid].key, key);
        if (c == 0)
            return &h->ep[mid];
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    for (size_t i = h->sorted; i < h->n; i++) /* new in this sample (all of them, once) */
        if (strcmp(h->ep[i].key, key) == 0)
            return &h->ep[i];
    return NULL;
}

/* health_each_fn, under the registry's mutex: only copies. */
static void history_take(void *ctx, const health_ep_info_t *i)
{
    status_history_t *h = ctx;
    char key[160];
    health_spec_describe(i->spec, key, sizeof(key));
    status_ep_t *e = history_find(h, key);
    if (!e) {
        if (h->n >= STATUS_MAX_ENDPOINTS ||
            tern_grow((void **)&h->ep, &h->cap, h->n + 1, sizeof(*h->ep)) < 0)
            return;
        e = &h->ep[h->n++];
        memset(e, 0, sizeof(*e));
        snprintf(e->key, sizeof(e->key), "%s", key);
    }
    e->seen = true;
    if (strncmp(e->state, i->state, sizeof(e->state) - 1) != 0) {
        snprintf(e->state, sizeof(e->state), "%s", i->state);
        e->since = h->now;
    }
    if (i->checked && i->last_check && i->last_check != e->last_check) {
        e->last_check = i->last_check;
        e->recent[e->head] = (status_result_t){.when = i->last_check,
                                               .ok = i->last_ok,
                                               .remote = i->last_remote,
                                               .latency_us = i->latency_us};
        e->head = (e->head + 1) % STATUS_RECENT;
        if (e->count < STATUS_RECENT)
            e->count++;
    }
}

bool status_history_get(const status_history_t *h, const char *key, status_ep_history_t *out)
{
    const status_ep_t *e = h ? history_find(h, key) : NULL;
    if (!e)
        return false;
    memcpy(out->state, e->state, sizeof(out->state));
    out->since = e->since;
    out->count = e->count;
    for (unsigned k = 0; k < e->count; k++) /* newest first */
        out->recent[k] = e->recent[(e->head + STATUS_RECENT - 1 - k) % STATUS_RECENT];
    return true;
}

void status_history_sample(status_history_t *h, health_registry_t *r, int64_t now_ms)
{
    if (!h)
        return;
    for (size_t i = 0; i < h->n; i++)
        h->ep[i].seen = false;
    h->now = now_ms;
    if (r)
        (void)health_each(r, history_take, h);
    size_t k = 0; /* forget the endpoints gone (a reload dropped their records) */
    for (size_t i = 0; i < h->n; i++)
        if (h->ep[i].seen)
            h->ep[k++] = h->ep[i];
    bool added = h->n > h->sorted;
    h->n = k;
    if (added)
        qsort(h->ep, h->n, sizeof(*h->ep), ep_cmp);
    h->sorted = h->n;
}

/* ---- the document ------------------------------------------------------------------------------
 */

/* jansson's setters take the new reference and fail only without memory: one flag for them all. */
typedef struct doc {
    json_t *root;
    bool oom;
} doc_t;

static void set(doc_t *d, json_t *obj, const char *key, json_t *v)
{
    if (!v || !obj || json_object_set_new(obj, key, v) < 0)
        d->oom = true;
}

static void push(doc_t *d, json_t *arr, json_t *v)
{
    if (!v || !arr || json_array_append_new(arr, v) < 0)
        d->oom = true;
}

static json_t *num(uint64_t v)
{
    return json_integer(v > (uint64_t)INT64_MAX ? INT64_MAX : (json_int_t)v);
}

/* One zone, copied out of the loader's lock. */
typedef struct zcopy {
    char *origin, *file;
    uint32_t serial;
    size_t records, bytes;
    int64_t loaded;
    bool is_signed;
} zcopy_t;

typedef struct zlist {
    zcopy_t *z;
    size_t n, cap;
    bool oom;
} zlist_t;

static void zone_copy(void *ctx, const loader_zone_info_t *zi)
{
    zlist_t *l = ctx;
    if (l->oom || tern_grow((void **)&l->z, &l->cap, l->n + 1, sizeof(*l->z)) < 0) {
        l->oom = true;
        return;
    }
    zcopy_t *e = &l->z[l->n];
    *e = (zcopy_t){.serial = zi->serial,
                   .records = zi->records,
                   .bytes = zi->bytes,
                   .loaded = zi->loaded,
                   .is_signed = zi->dnssec != NULL};
    e->origin = strdup(zi->origin);
    e->file = strdup(zi->file ? zi->file : "");
    if (!e->origin || !e->file) {
        free(e->origin);
        free(e->file);
        l->oom = true;
        return;
    }
    l->n++;
}

/* The zone's transfer state, as `ternctl zone` shows it (xfr_zone_info()). */
static json_t *zone_transfer(doc_t *d, xfr_t *x, const char *origin)
{
    json_t *t = json_object();
    xfr_zone_info_t *in = x ? malloc(sizeof(*in)) : NULL;
    if (x && !in)
        d->oom = true;
    if (in)
        xfr_zone_info(x, origin, in);
    if (!in || !in->known) {
        set(d, t, "role", json_string("none"));
        free(in);
        return t;
    }
    set(d, t, "role", json_string(in->secondary ? "secondary" : "primary"));
    set(d, t, "journal_versions", num(in->nversions));
    if (in->out_when) {
        set(d, t, "last_out", json_integer(in->out_when));
        set(d, t, "last_out_kind", json_string(in->out_kind));
        set(d, t, "last_out_peer", json_string(in->out_peer));
    }
    if (in->secondary) {
        if (in->in_when) {
            set(d, t, "last_in", json_integer(in->in_when));
            set(d, t, "last_in_kind", json_string(in->in_kind));
            set(d, t, "primary", json_string(in->in_primary));
        }
        set(d, t, "refresh_at", json_integer(in->refresh_at));
        set(d, t, "expire_at", json_integer(in->expire_at));
        set(d, t, "expired", json_boolean(in->expired));
        set(d, t, "error", json_string(in->in_error));
    }
    size_t acked = 0;
    for (size_t i = 0; i < in->nnotify; i++)
        acked += in->notify[i].acked;
    set(d, t, "notify_peers", num(in->nnotify));
    set(d, t, "notify_acked", num(acked));
    free(in);
    return t;
}

static void render_zones(doc_t *d, const metrics_source_t *src)
{
    zlist_t zl = {0};
    (void)loader_zones(src->loader, zone_copy, &zl);
    json_t *arr = json_array();
    set(d, d->root, "zones", arr);
    for (size_t i = 0; i < zl.n && !zl.oom; i++) {
        const zcopy_t *z = &zl.z[i];
        json_t *o = json_object();
        set(d, o, "name", json_string(z->origin));
        set(d, o, "source", json_string(z->file));
        set(d, o, "serial", json_integer(z->serial));
        set(d, o, "loaded", json_integer(z->loaded));
        set(d, o, "records", num(z->records));
        set(d, o, "bytes", num(z->bytes));
        set(d, o, "signed", json_boolean(z->is_signed));
        set(d, o, "transfer", zone_transfer(d, src->xfr, z->origin));
        push(d, arr, o);
    }
    if (zl.oom)
        d->oom = true;
    for (size_t i = 0; i < zl.n; i++) {
        free(zl.z[i].origin);
        free(zl.z[i].file);
    }
    free(zl.z);
}

typedef struct health_doc {
    doc_t *d;
    json_t *arr;
    const status_history_t *h;
} health_doc_t;

/* health_each_fn, under the registry's mutex: builds one small object, no I/O. */
static void health_entry(void *ctx, const health_ep_info_t *i)
{
    health_doc_t *hd = ctx;
    doc_t *d = hd->d;
    const health_spec_t *s = i->spec;
    char ip[INET6_ADDRSTRLEN], ep[INET6_ADDRSTRLEN + 8], key[160];
    inet_ntop(s->family == 6 ? AF_INET6 : AF_INET, s->addr, ip, sizeof(ip));
    snprintf(ep, sizeof(ep), s->family == 6 ? "[%s]:%u" : "%s:%u", ip, s->port);
    json_t *o = json_object();
    set(d, o, "endpoint", json_string(s->proto == HEALTH_ICMP ? ip : ep));
    set(d, o, "protocol", json_string(health_proto_name(s->proto)));
    set(d, o, "host", json_string(s->host ? s->host : ""));
    set(d, o, "state", json_string(i->state));
    set(d, o, "up", json_boolean(i->rank == HEALTH_RANK_UP));
    set(d, o, "override",
        json_string(i->override == HEALTH_FORCE_UP     ? "up"
                    : i->override == HEALTH_FORCE_DOWN ? "down"
                                                       : "auto"));
    set(d, o, "checks", num(i->checks));
    set(d, o, "failures", num(i->failures));
    set(d, o, "latency_ms", json_real(i->latency_us / 1000.0));
    set(d, o, "last_check", json_integer(i->last_check));
    set(d, o, "error", json_string(i->error ? i->error : ""));
    health_spec_describe(s, key, sizeof(key));
    status_ep_history_t e;
    if (status_history_get(hd->h, key, &e)) {
        set(d, o, "since", json_integer(e.since));
        json_t *rec = json_array();
        set(d, o, "recent", rec);
        for (unsigned k = 0; k < e.count; k++) {
            const status_result_t *r = &e.recent[k];
            json_t *ro = json_object();
            set(d, ro, "when", json_integer(r->when));
            set(d, ro, "ok", json_boolean(r->ok));
            set(d, ro, "by", json_string(r->remote ? "redis" : "self"));
            set(d, ro, "latency_ms", json_real(r->latency_us / 1000.0));
            push(d, rec, ro);
        }
    }
    push(d, hd->arr, o);
}

static void render_health(doc_t *d, const metrics_source_t *src, const status_history_t *h)
{
    health_doc_t hd = {.d = d, .arr = json_array(), .h = h};
    set(d, d->root, "health", hd.arr);
    health_registry_t *r = loader_health(src->loader);
    if (r && hd.arr)
        (void)health_each(r, health_entry, &hd);
}

/* name -> count for each of n names. */
static json_t *by_name(doc_t *d, unsigned n, const char *(*name)(unsigned), const uint64_t *v)
{
    json_t *o = json_object();
    for (unsigned i = 0; i < n; i++)
        set(d, o, name(i), num(v[i]));
    return o;
}

static void render_traffic(doc_t *d, const server_t *s)
{
    server_stats_t st;
    server_stats(s, &st);
    json_t *q = json_object();
    set(d, d->root, "queries", q);
    json_t *tr = json_object();
    set(d, q, "transport", tr);
    set(d, tr, "udp", num(st.queries_udp));
    set(d, tr, "tcp", num(st.queries_tcp - st.tls_queries));
    set(d, tr, "tls", num(st.tls_queries));
    set(d, q, "rcode", by_name(d, SERVER_RCODE_COUNT, server_rcode_name, st.rcode));
    set(d, q, "truncated", num(st.truncated));

    /* what was not answered, or answered short, and why (render_limits() in metrics_render.c) */
    json_t *dr = json_object();
    set(d, d->root, "drops", dr);
    set(d, dr, "rrl_dropped", num(st.policy_dropped[5]));
    set(d, dr, "rrl_slipped", num(st.rrl_slipped));
    set(d, dr, "ratelimit_dropped", num(st.policy_dropped[4]));
    set(d, dr, "ratelimit_refused", num(st.policy_refused[4]));
    set(d, dr, "acl_refused", num(st.policy_refused[1] + st.policy_refused[2]));
    set(d, dr, "blacklist", num(st.policy_refused[3] + st.policy_dropped[3]));
    set(d, dr, "short_or_qr", num(st.dropped_short + st.dropped_qr));
    set(d, dr, "xfr_queue_full", num(st.handoff_full));
    set(d, dr, "udp_unanswered", num(st.udp_dropped));
    set(d, dr, "udp_socket_full", num(st.udp_socket_drops));
    set(d, dr, "tcp_refused", num(st.tcp_refused));
    set(d, dr, "tcp_evicted", num(st.tcp_evicted));
    server_xdp_stats_t x;
    server_xdp_stats(s, &x);
    if (x.sockets) {
        uint64_t ring = 0;
        for (unsigned i = 0; i < SERVER_XDP_DROP_COUNT; i++)
            ring += server_xdp_drop(&x, i);
        set(d, dr, "xdp_rings", num(ring));
    }
    qlog_stats_t ql;
    if (server_qlog_stats(s, &ql))
        set(d, dr, "qlog_ring", num(ql.dropped));
    set(d, dr, "log_lines", num(log_dropped_lines()));
}

/* Redis (zone source, health sharing) and the upstreams the ANAME resolver asks. */
static void render_links(doc_t *d, loader_t *l)
{
    loader_stats_t st;
    loader_get_stats(l, &st);
    json_t *c = json_object();
    set(d, d->root, "connections", c);
    if (st.redis_enabled) {
        json_t *o = json_object();
        set(d, o, "connected", json_boolean(st.redis_connected));
        set(d, o, "zones", num(st.redis_zones));
        set(d, o, "rejected", num(st.redis_failed));
        set(d, c, "redis_zones", o);
    }
    health_checker_stats_t hs;
    if (loader_health_stats(l, &hs) && hs.redis_enabled) {
        json_t *o = json_object();
        set(d, o, "connected", json_boolean(hs.redis_connected));
        set(d, o, "errors", num(hs.redis_errors));
        set(d, c, "redis_health", o);
    }
    aname_stats_t as;
    if (loader_aname_stats(l, &as)) {
        json_t *o = json_object();
        set(d, o, "targets", num(as.targets));
        set(d, o, "pending", num(as.pending));
        set(d, o, "queries", num(as.queries));
        set(d, o, "failures", num(as.failures));
        set(d, c, "aname_upstreams", o);
    }
    json_t *rl = json_object();
    set(d, d->root, "reloads", rl);
    set(d, rl, "ok", num(st.reloads_ok));
    set(d, rl, "failed", num(st.reloads_failed));
    if (st.last_duration_ms >= 0) {
        set(d, rl, "last", json_integer(st.last_time));
        set(d, rl, "last_ok", json_boolean(st.last_ok));
    }
}

int status_json_render(tern_buf_t *out, const metrics_source_t *src, const status_history_t *h)
{
    tern_buf_init(out, METRICS_BODY_MAX);
    doc_t d = {.root = json_object()};
    if (!d.root)
        return TERN_ENOMEM;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    set(&d, d.root, "version", json_string(TERN_VERSION));
    set(&d, d.root, "now", json_integer((json_int_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000));
    set(&d, d.root, "start_time", json_integer(src->start_time));
    set(&d, d.root, "workers", json_integer(server_workers(src->server)));
    render_zones(&d, src);
    render_health(&d, src, h);
    render_traffic(&d, src->server);
    render_links(&d, src->loader);
    char *text = d.oom ? NULL : json_dumps(d.root, JSON_COMPACT);
    json_decref(d.root);
    if (!text)
        return TERN_ENOMEM;
    tern_buf_append(out, text, strlen(text));
    free(text);
    if (out->failed || !out->p) {
        tern_buf_free(out);
        return TERN_ENOMEM;
    }
    return 0;
}
