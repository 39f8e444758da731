/*
 * ctl_cmd.c — the control socket's commands: one request line in, one whole response out.
 *
 * Responses are built in memory first (a growable buffer), then written by the connection loop
 * (ctl_conn.c): a response is at most a line per zone, and building it whole means the loader's
 * lock (loader_zones()) is held only to copy the zone list, never while a client reads. The
 * commands run on the serving thread, except reload, which waits for the loader and so runs on
 * the waiter thread.
 */
#include <arpa/inet.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ctl_int.h"
#include "tern/common/clock.h"
#include "tern/common/grow.h"
#include "tern/common/log.h"
#include "tern/common/err.h"
#include "tern/dnssec/dnssec_zone.h"
#include "tern/source/source_journal.h"
#include "tern/update/update.h"

/* "2026-11-23T10:00:00Z", or "never" for 0 (the loader's "not yet"). */
static void fmt_time(char *buf, size_t cap, int64_t t)
{
    struct tm tm;
    time_t tt = (time_t)t;
    if (t <= 0 || !gmtime_r(&tt, &tm) || strftime(buf, cap, "%Y-%m-%dT%H:%M:%SZ", &tm) == 0)
        snprintf(buf, cap, "never");
}

/* --- response buffer */

void ctl_cmd_line(sb_t *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0 || !tern_buf_reserve(b, (size_t)n + 1))
        return;
    va_start(ap, fmt);
    vsnprintf(b->p + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    for (size_t i = b->len; i < b->len + (size_t)n; i++)
        if ((unsigned char)b->p[i] < 0x20 || (unsigned char)b->p[i] == 0x7f)
            b->p[i] = '?';
    b->len += (size_t)n;
    b->p[b->len++] = '\n';
    b->p[b->len] = '\0';
}

/* --- the zone list, copied out of the loader's lock */

typedef struct zinfo {
    char *origin;
    char *file;
    uint32_t serial;
    size_t records;
    size_t bytes;
    int64_t loaded;
    uint64_t version;
    /* signed zones: "keys" lines and the DS lines of its KSKs, and the signatures' validity */
    char *dnssec_keys, *dnssec_ds;
    uint32_t sig_inception, sig_expiration;
    uint64_t sigs_made;
} zinfo_t;

typedef struct zlist {
    zinfo_t *z;
    size_t n, cap;
    bool oom;
} zlist_t;

/* A signed zone's keys and DS records as text, copied while its state is held. */
static bool dnssec_info(zinfo_t *e, const dnssec_zone_t *dz)
{
    sb_t keys = SB_INIT, ds = SB_INIT;
    for (unsigned i = 0; i < dz->nkeys; i++) {
        const dnssec_key_t *k = dz->keys[i];
        ctl_cmd_line(&keys, "key: %s flags %u algorithm %u tag %u%s", k->label, k->flags, k->alg,
                     k->tag, (dz->roles[i] & DNSSEC_ROLE_SIGN_ZONE) ? " (signs the zone)" : "");
        char line[600];
        if ((k->flags & DNSSEC_FLAG_SEP || dz->nkeys == 1) &&
            dnssec_key_ds_text(k, 2, line, sizeof(line)) > 0)
            ctl_cmd_line(&ds, "%s", line);
    }
    const dnssec_sigs_t *sg = dnssec_zone_sigs(dz);
    if (sg) {
        e->sig_inception = sg->inception;
        e->sig_expiration = sg->expiration;
        e->sigs_made = sg->made;
    }
    e->dnssec_keys = keys.p ? keys.p : strdup("");
    e->dnssec_ds = ds.p ? ds.p : strdup("");
    if (!e->dnssec_keys || !e->dnssec_ds) {
        free(e->dnssec_keys);
        free(e->dnssec_ds);
        return false;
    }
    return true;
}

/* loader_zone_fn: runs under the loader's lock, so it only copies. */
static void zlist_add(void *ctx, const loader_zone_info_t *zi)
{
    zlist_t *l = ctx;
    if (l->oom)
        return;
    if (tern_grow((void **)&l->z, &l->cap, l->n + 1, sizeof(*l->z)) < 0) {
        l->oom = true;
        return;
    }
    zinfo_t *e = &l->z[l->n];
    *e = (zinfo_t){.serial = zi->serial,
                   .records = zi->records,
                   .bytes = zi->bytes,
                   .loaded = zi->loaded,
                   .version = zi->version};
    if (!(e->origin = strdup(zi->origin)) || !(e->file = strdup(zi->file ? zi->file : ""))) {
        free(e->origin);
        l->oom = true;
        return;
    }
    if (zi->dnssec && !dnssec_info(e, zi->dnssec)) {
        free(e->origin);
        free(e->file);
        l->oom = true;
        return;
    }
    l->n++;
}

static void zlist_free(zlist_t *l)
{
    for (size_t i = 0; i < l->n; i++) {
        free(l->z[i].origin);
        free(l->z[i].file);
        free(l->z[i].dnssec_keys);
        free(l->z[i].dnssec_ds);
    }
    free(l->z);
    memset(l, 0, sizeof(*l));
}

/* The published zones, in configuration order. false when out of memory (l is then empty). */
static bool zlist_get(loader_t *ld, zlist_t *l)
{
    memset(l, 0, sizeof(*l));
    (void)loader_zones(ld, zlist_add, l);
    if (l->oom) {
        zlist_free(l);
        return false;
    }
    return true;
}

static int zinfo_cmp(const void *a, const void *b)
{
    const zinfo_t *const *x = a, *const *y = b;
    return strcmp((*x)->origin, (*y)->origin);
}

/* Pointers to l's zones sorted by origin, for bsearch(); NULL when out of memory (or empty). */
static const zinfo_t **zlist_sorted(const zlist_t *l)
{
    const zinfo_t **s = malloc((l->n ? l->n : 1) * sizeof(*s));
    if (!s)
        return NULL;
    for (size_t i = 0; i < l->n; i++)
        s[i] = &l->z[i];
    qsort(s, l->n, sizeof(*s), zinfo_cmp);
    return s;
}

static const zinfo_t *zlist_find(const zinfo_t **sorted, size_t n, const char *origin)
{
    zinfo_t key = {.origin = (char *)origin};
    const zinfo_t *kp = &key;
    const zinfo_t **hit = bsearch(&kp, sorted, n, sizeof(*sorted), zinfo_cmp);
    return hit ? *hit : NULL;
}

static void zone_line(sb_t *b, const zinfo_t *z)
{
    char t[32];
    fmt_time(t, sizeof(t), z->loaded);
    ctl_cmd_line(b, "zone: %s serial %" PRIu32 " records %zu bytes %zu loaded %s file %s",
                 z->origin, z->serial, z->records, z->bytes, t, z->file);
}

/* --- commands: each fills body, or writes its error message into err (body may still follow) */

typedef void (*cmd_fn)(ctl_t *c, char **argv, sb_t *body, char *err, size_t errlen);

static void reload_counters(sb_t *b, const loader_stats_t *st)
{
    char t[32];
    fmt_time(t, sizeof(t), st->last_time);
    bool never = st->reloads_ok + st->reloads_failed == 0;
    ctl_cmd_line(b, "reloads_ok: %" PRIu64, st->reloads_ok);
    ctl_cmd_line(b, "reloads_failed: %" PRIu64, st->reloads_failed);
    ctl_cmd_line(b, "last_reload: %s", never ? "never" : t);
    ctl_cmd_line(b, "last_reload_result: %s", never ? "none" : st->last_ok ? "ok" : "failed");
    ctl_cmd_line(b, "last_reload_duration_ms: %lld",
                 never ? -1LL : (long long)st->last_duration_ms);
    if (!never && !st->last_ok)
        ctl_cmd_line(b, "last_reload_error: %s", st->last_error);
    if (st->redis_enabled) {
        ctl_cmd_line(b, "redis: %s", st->redis_connected ? "connected" : "disconnected");
        ctl_cmd_line(b, "redis_zones: %zu", st->redis_zones);
        ctl_cmd_line(b, "redis_zones_rejected: %zu", st->redis_failed);
        ctl_cmd_line(b, "redis_publishes: %" PRIu64, st->redis_publishes);
        ctl_cmd_line(b, "redis_zones_skipped: %zu", st->redis_zones_skipped);
        ctl_cmd_line(b, "redis_labels_skipped: %" PRIu64, st->redis_labels_skipped);
        ctl_cmd_line(b, "redis_over_max_value_bytes: %" PRIu64, st->redis_over_value_bytes);
        ctl_cmd_line(b, "redis_over_max_labels: %" PRIu64, st->redis_over_labels);
        ctl_cmd_line(b, "redis_over_max_rrset_records: %" PRIu64, st->redis_over_rrset_records);
    }
}

static void cmd_reload(ctl_t *c, char **argv, sb_t *body, char *err, size_t errlen)
{
    (void)argv;
    if (!c->loader) {
        snprintf(err, errlen, "no loader: reload is not available");
        return;
    }
    zlist_t before, after;
    if (!zlist_get(c->loader, &before)) {
        snprintf(err, errlen, "out of memory");
        return;
    }
    loader_stats_t st0, st;
    loader_get_stats(c->loader, &st0);
    bool ok = loader_reload_wait(c->loader, &st);
    if (!ok && st.reloads_ok + st.reloads_failed == st0.reloads_ok + st0.reloads_failed) {
        /* loader_reload_wait() returned without any reload: the loader is stopping */
        snprintf(err, errlen, "the server is shutting down: no reload was done");
        zlist_free(&before);
        return;
    }
    if (!ok) {
        snprintf(err, errlen, "reload failed: %s", st.last_error);
        ctl_cmd_line(body, "reload: failed");
        ctl_cmd_line(body, "duration_ms: %lld", (long long)st.last_duration_ms);
        ctl_cmd_line(body, "still_serving: the previous data");
        ctl_cmd_line(body, "zones: %zu", st.zones);
        ctl_cmd_line(body, "records: %zu", st.records);
        ctl_cmd_line(body, "reloads_failed: %" PRIu64, st.reloads_failed);
        zlist_free(&before);
        return;
    }
    /* What changed: a zone is changed when it is new or was read again (its version moved). */
    const zinfo_t **sorted_before = NULL, **sorted_after = NULL;
    if (!zlist_get(c->loader, &after) || !(sorted_before = zlist_sorted(&before)) ||
        !(sorted_after = zlist_sorted(&after))) {
        free(sorted_before);
        zlist_free(&before);
        zlist_free(&after);
        snprintf(err, errlen, "out of memory");
        return;
    }
    size_t changed = 0, removed = 0;
    sb_t lines = SB_INIT;
    for (size_t i = 0; i < after.n; i++) {
        const zinfo_t *z = &after.z[i], *p = zlist_find(sorted_before, before.n, z->origin);
        if (p && p->version == z->version)
            continue;
        changed++;
        if (p)
            ctl_cmd_line(&lines, "changed: %s serial %" PRIu32 " -> %" PRIu32 " records %zu",
                         z->origin, p->serial, z->serial, z->records);
        else
            ctl_cmd_line(&lines, "changed: %s serial %" PRIu32 " records %zu (new)", z->origin,
                         z->serial, z->records);
    }
    for (size_t i = 0; i < before.n; i++)
        if (!zlist_find(sorted_after, after.n, before.z[i].origin)) {
            removed++;
            ctl_cmd_line(&lines, "removed: %s", before.z[i].origin);
        }
    ctl_cmd_line(body, "reload: ok");
    ctl_cmd_line(body, "duration_ms: %lld", (long long)st.last_duration_ms);
    ctl_cmd_line(body, "zones: %zu", after.n);
    ctl_cmd_line(body, "records: %zu", st.records);
    ctl_cmd_line(body, "zones_changed: %zu", changed);
    ctl_cmd_line(body, "zones_unchanged: %zu", after.n - changed);
    ctl_cmd_line(body, "zones_removed: %zu", removed);
    if (lines.failed)
        body->failed = true;
    else if (lines.len)
        sb_append(body, lines.p, lines.len);
    tern_buf_free(&lines);
    free(sorted_before);
    free(sorted_after);
    zlist_free(&before);
    zlist_free(&after);
}

static void cmd_status(ctl_t *c, char **argv, sb_t *body, char *err, size_t errlen)
{
    (void)argv;
    char t[32];
    fmt_time(t, sizeof(t), c->start_wall);
    ctl_cmd_line(body, "version: %s", TERN_VERSION);
    ctl_cmd_line(body, "pid: %ld", (long)getpid());
    ctl_cmd_line(body, "started: %s", t);
    ctl_cmd_line(body, "uptime_seconds: %lld",
                 (long long)((tern_monotonic_ms() - c->start_ms) / 1000));
    ctl_cmd_line(body, "workers: %u", c->server ? server_workers(c->server) : c->workers);
    if (!c->loader)
        return;
    zlist_t zl;
    if (!zlist_get(c->loader, &zl)) {
        snprintf(err, errlen, "out of memory");
        return;
    }
    loader_stats_t st;
    loader_get_stats(c->loader, &st);
    ctl_cmd_line(body, "zones: %zu", zl.n);
    ctl_cmd_line(body, "records: %zu", st.records);
    reload_counters(body, &st);
    for (size_t i = 0; i < zl.n; i++)
        zone_line(body, &zl.z[i]);
    zlist_free(&zl);
}

/* The AF_XDP sockets' counters (none without xdp: listen:): summed, then per interface and
 * receive queue (xdp_<interface>_<queue>_...). */
static void xdp_lines(const server_t *srv, sb_t *body)
{
    server_xdp_stats_t x;
    server_xdp_stats(srv, &x);
    if (x.sockets == 0)
        return;
    ctl_cmd_line(body, "xdp_rx: %" PRIu64, x.rx);
    ctl_cmd_line(body, "xdp_tx: %" PRIu64, x.tx);
    for (unsigned d = 0; d < SERVER_XDP_DROP_COUNT; d++)
        ctl_cmd_line(body, "xdp_dropped_%s: %" PRIu64, server_xdp_drop_name(d),
                     server_xdp_drop(&x, d));
    server_xdp_queue_t q;
    for (size_t i = 0; server_xdp_queue(srv, i, &q); i++) {
        ctl_cmd_line(body, "xdp_%s_%" PRIu32 "_rx: %" PRIu64, q.ifname, q.queue, q.c.rx);
        ctl_cmd_line(body, "xdp_%s_%" PRIu32 "_tx: %" PRIu64, q.ifname, q.queue, q.c.tx);
        for (unsigned d = 0; d < SERVER_XDP_DROP_COUNT; d++)
            ctl_cmd_line(body, "xdp_%s_%" PRIu32 "_dropped_%s: %" PRIu64, q.ifname, q.queue,
                         server_xdp_drop_name(d), server_xdp_drop(&q.c, d));
    }
}

static void cmd_stats(ctl_t *c, char **argv, sb_t *body, char *err, size_t errlen)
{
    (void)argv, (void)err, (void)errlen;
    ctl_cmd_line(body, "uptime_seconds: %lld",
                 (long long)((tern_monotonic_ms() - c->start_ms) / 1000));
    ctl_cmd_line(body, "workers: %u", c->server ? server_workers(c->server) : c->workers);
    if (c->server) {
        server_stats_t s;
        server_stats(c->server, &s);
        ctl_cmd_line(body, "queries: %" PRIu64, s.queries_udp + s.queries_tcp);
        ctl_cmd_line(body, "queries_udp: %" PRIu64, s.queries_udp);
        ctl_cmd_line(body, "queries_tcp: %" PRIu64, s.queries_tcp);
        /* how the queries spread over the workers (udp_steering) */
        for (unsigned w = 0; w < server_workers(c->server); w++) {
            server_stats_t ws;
            server_worker_stats(c->server, w, &ws);
            ctl_cmd_line(body, "worker_%u_queries: %" PRIu64, w, ws.queries_udp + ws.queries_tcp);
        }
        ctl_cmd_line(body, "udp_received: %" PRIu64, s.udp_received);
        ctl_cmd_line(body, "udp_sent: %" PRIu64, s.udp_sent);
        ctl_cmd_line(body, "udp_dropped: %" PRIu64, s.udp_dropped);
        ctl_cmd_line(body, "udp_dropped_socket: %" PRIu64, s.udp_socket_drops);
        ctl_cmd_line(body, "udp_dropped_truncated: %" PRIu64, s.udp_drop_truncated);
        ctl_cmd_line(body, "udp_dropped_answer: %" PRIu64, s.udp_drop_answer);
        ctl_cmd_line(body, "udp_dropped_send: %" PRIu64, s.udp_drop_send);
        ctl_cmd_line(body, "tcp_accepted: %" PRIu64, s.tcp_accepted);
        ctl_cmd_line(body, "tcp_refused: %" PRIu64, s.tcp_refused);
        ctl_cmd_line(body, "tcp_accept_paused: %" PRIu64, s.tcp_accept_paused);
        ctl_cmd_line(body, "tcp_queries: %" PRIu64, s.tcp_queries);
        ctl_cmd_line(body, "tcp_closed_idle: %" PRIu64, s.tcp_closed_idle);
        ctl_cmd_line(body, "tcp_closed_full: %" PRIu64, s.tcp_closed_full);
        ctl_cmd_line(body, "tcp_closed_bad: %" PRIu64, s.tcp_closed_bad);
        ctl_cmd_line(body, "tcp_closed_life: %" PRIu64, s.tcp_closed_life);
        ctl_cmd_line(body, "tcp_closed_peer: %" PRIu64, s.tcp_closed_peer);
        for (unsigned i = 0; i < SERVER_QTYPE_COUNT; i++)
            ctl_cmd_line(body, "qtype_%s: %" PRIu64, server_qtype_name(i), s.qtype[i]);
        for (unsigned i = 0; i < SERVER_RCODE_COUNT; i++)
            ctl_cmd_line(body, "rcode_%s: %" PRIu64, server_rcode_name(i), s.rcode[i]);
        ctl_cmd_line(body, "truncated: %" PRIu64, s.truncated);
        ctl_cmd_line(body, "dropped_short: %" PRIu64, s.dropped_short);
        ctl_cmd_line(body, "dropped_qr: %" PRIu64, s.dropped_qr);
        ctl_cmd_line(body, "xfr_handed_off: %" PRIu64, s.handed_off);
        ctl_cmd_line(body, "xfr_busy: %" PRIu64, s.handoff_full);
        ctl_cmd_line(body, "tcp_handed_off: %" PRIu64, s.tcp_handed_off);
        xdp_lines(c->server, body);
        ctl_cmd_line(body, "edns: %" PRIu64, s.edns);
        ctl_cmd_line(body, "ecs: %" PRIu64, s.ecs);
        ctl_cmd_line(body, "health_fail_open: %" PRIu64, s.health_fail_open);
        static const char *const why[6] = {"other",     "acl",       "zone_acl",
                                           "blacklist", "ratelimit", "rrl"};
        for (unsigned i = 1; i < 6; i++) {
            if (i != 5)
                ctl_cmd_line(body, "refused_%s: %" PRIu64, why[i], s.policy_refused[i]);
            ctl_cmd_line(body, "dropped_%s: %" PRIu64, why[i], s.policy_dropped[i]);
        }
        ctl_cmd_line(body, "rrl_slipped: %" PRIu64, s.rrl_slipped);
        ctl_cmd_line(body, "cookies: %" PRIu64, s.cookies);
        ctl_cmd_line(body, "cookies_valid: %" PRIu64, s.cookies_valid);
        ctl_cmd_line(body, "badcookie: %" PRIu64, s.badcookie);
        ctl_cmd_line(body, "tcp_client_capped: %" PRIu64, s.tcp_client_capped);
        ctl_cmd_line(body, "tcp_evicted: %" PRIu64, s.tcp_evicted);
        /* DoT (tls: listen); its connections are in the tcp_* lines too */
        ctl_cmd_line(body, "tls_handshakes: %" PRIu64, s.tls_handshakes);
        ctl_cmd_line(body, "tls_resumed: %" PRIu64, s.tls_resumed);
        ctl_cmd_line(body, "tls_handshake_failed: %" PRIu64, s.tls_handshake_failed);
        ctl_cmd_line(body, "tls_handshake_timeout: %" PRIu64, s.tls_handshake_timeout);
        ctl_cmd_line(body, "tls_handshake_refused: %" PRIu64, s.tls_handshake_refused);
        ctl_cmd_line(body, "tls_queries: %" PRIu64, s.tls_queries);
    }
    if (c->loader) {
        loader_stats_t st;
        loader_get_stats(c->loader, &st);
        ctl_cmd_line(body, "zones: %zu", st.zones);
        ctl_cmd_line(body, "records: %zu", st.records);
        reload_counters(body, &st);
    }
}

/* The served zone named arg (any case, final dot or not) into zl; NULL with err set. */
static const zinfo_t *zone_named(ctl_t *c, const char *arg, zlist_t *zl, char *err, size_t errlen)
{
    /* the loader's form: lowercase, no final dot, "." for the root */
    char name[CTL_MAX_REQUEST];
    size_t n = strlen(arg);
    while (n > 1 && arg[n - 1] == '.')
        n--;
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)arg[i];
        name[i] = (char)(ch >= 'A' && ch <= 'Z' ? ch + ('a' - 'A') : ch);
    }
    name[n] = '\0';
    memset(zl, 0, sizeof(*zl));
    if (!c->loader) {
        snprintf(err, errlen, "zone %s is not served", name);
        return NULL;
    }
    if (!zlist_get(c->loader, zl)) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    for (size_t i = 0; i < zl->n; i++)
        if (strcmp(zl->z[i].origin, name) == 0)
            return &zl->z[i];
    snprintf(err, errlen, "zone %s is not served", name);
    return NULL;
}

/* The zone's transfer state (tern/xfr/xfr.h): history, last transfers, secondaries notified. */
static void zone_xfr_lines(xfr_t *x, const char *key, sb_t *body)
{
    xfr_zone_info_t *in = malloc(sizeof(*in));
    if (!in)
        return;
    xfr_zone_info(x, key, in);
    char t[32], u[32];
    if (!in->known) {
        ctl_cmd_line(body, "transfers: none configured");
        free(in);
        return;
    }
    ctl_cmd_line(body, "transfers: %s", in->secondary ? "secondary (transferred in)" : "primary");
    ctl_cmd_line(body, "journal: %zu versions", in->nversions);
    for (size_t i = 0; i < in->nversions; i++) {
        fmt_time(t, sizeof(t), in->versions[i].when);
        ctl_cmd_line(body,
                     "version: %" PRIu32 " -> %" PRIu32 ", %zu removed, %zu added, %zu bytes, %s",
                     in->versions[i].from, in->versions[i].to, in->versions[i].removed,
                     in->versions[i].added, in->versions[i].bytes, t);
    }
    if (in->out_when) {
        fmt_time(t, sizeof(t), in->out_when);
        ctl_cmd_line(body,
                     "last_transfer_out: %s serial %" PRIu32 " to %s, %" PRIu64
                     " records, %s (%" PRIu64 " in all)",
                     in->out_kind, in->out_serial, in->out_peer, in->out_records, t, in->out_count);
    } else {
        ctl_cmd_line(body, "last_transfer_out: never");
    }
    if (in->secondary) {
        if (in->in_when) {
            fmt_time(t, sizeof(t), in->in_when);
            ctl_cmd_line(
                body, "last_transfer_in: %s from %s, %" PRIu64 " records, %s (%" PRIu64 " in all)",
                in->in_kind, in->in_primary, in->in_records, t, in->in_count);
        } else {
            ctl_cmd_line(body, "last_transfer_in: never");
        }
        fmt_time(t, sizeof(t), in->refresh_at);
        fmt_time(u, sizeof(u), in->expire_at);
        ctl_cmd_line(body, "refresh: %s, expire: %s%s", t, u,
                     in->expired ? " (expired: SERVFAIL)" : "");
        if (in->in_error[0])
            ctl_cmd_line(body, "last_error: %s", in->in_error);
    }
    for (size_t i = 0; i < in->nnotify; i++) {
        fmt_time(t, sizeof(t), in->notify[i].acked_when);
        ctl_cmd_line(
            body, "notify: %s serial %" PRIu32 " %s after %u sends%s%s", in->notify[i].peer,
            in->notify[i].serial, in->notify[i].acked ? "acknowledged" : "not acknowledged",
            in->notify[i].attempts, in->notify[i].acked ? ", " : "", in->notify[i].acked ? t : "");
    }
    free(in);
}

/* The zone's dynamic updates (tern/update/update.h): its journal and its last changes. */
static void zone_update_lines(ctl_t *c, const zinfo_t *z, sb_t *body)
{
    update_t *u = c->loader ? update_of(loader_source(c->loader, "update")) : NULL;
    char *key = zone_source_key(z->origin),
         *jpath = z->file[0] ? source_journal_path(z->file) : NULL;
    source_journal_info_t ji;
    char why[256];
    if (jpath && source_journal_info(jpath, &ji, why, sizeof(why)) == 0 && ji.entries)
        ctl_cmd_line(body,
                     "update_journal: %s changes %zu serials %" PRIu32 " to %" PRIu32
                     " bytes %" PRIu64,
                     jpath, ji.entries, ji.first, ji.last, ji.bytes);
    update_audit_t a[8];
    size_t n = u && key ? update_recent(u, key, a, 8) : 0;
    for (size_t i = 0; i < n; i++) {
        char t[32];
        fmt_time(t, sizeof(t), a[i].when);
        ctl_cmd_line(body,
                     "update: %s serial %" PRIu32 " to %" PRIu32 " by %s removed %zu added %zu", t,
                     a[i].from, a[i].to, a[i].who, a[i].removed, a[i].added);
    }
    free(key);
    free(jpath);
}

/* zone flush NAME: its file written back from the version served, its journal emptied. */
static void zone_flush(ctl_t *c, const char *name, sb_t *body, char *err, size_t errlen)
{
    update_t *u = c->loader ? update_of(loader_source(c->loader, "update")) : NULL;
    char *key = zone_source_key(name), msg[512];
    if (!u || !key)
        snprintf(err, errlen, "%s", key ? "dynamic updates are not running" : "bad zone name");
    else if (update_flush(u, key, msg, sizeof(msg)) < 0)
        snprintf(err, errlen, "%s", msg);
    else
        ctl_cmd_line(body, "flushed: %s", msg);
    free(key);
}

static void cmd_zone(ctl_t *c, char **argv, sb_t *body, char *err, size_t errlen)
{
    if (argv[2]) {
        if (strcmp(argv[1], "flush") == 0)
            zone_flush(c, argv[2], body, err, errlen);
        else
            snprintf(err, errlen, "usage: zone NAME | zone flush NAME");
        return;
    }
    zlist_t zl;
    const zinfo_t *z = zone_named(c, argv[1], &zl, err, errlen);
    if (z) {
        char t[32];
        fmt_time(t, sizeof(t), z->loaded);
        ctl_cmd_line(body, "zone: %s", z->origin);
        ctl_cmd_line(body, "serial: %" PRIu32, z->serial);
        ctl_cmd_line(body, "records: %zu", z->records);
        ctl_cmd_line(body, "bytes: %zu", z->bytes);
        ctl_cmd_line(body, "loaded: %s", t);
        ctl_cmd_line(body, "file: %s", z->file);
        if (z->dnssec_keys) {
            char a[32], b[32];
            fmt_time(a, sizeof(a), z->sig_inception);
            fmt_time(b, sizeof(b), z->sig_expiration);
            ctl_cmd_line(body, "dnssec: signed, %" PRIu64 " signatures made ahead, valid %s to %s",
                         z->sigs_made, a, b);
            sb_append(body, z->dnssec_keys, strlen(z->dnssec_keys));
        } else {
            ctl_cmd_line(body, "dnssec: unsigned");
        }
        if (c->xfr)
            zone_xfr_lines(c->xfr, z->origin, body);
        zone_update_lines(c, z, body);
    }
    zlist_free(&zl);
}

#define DNSSEC_USAGE                                                                               \
    "dnssec ds ZONE | dnssec status [ZONE] | dnssec rollover ZONE ksk|zsk|csk | dnssec ds-seen "   \
    "ZONE [TAG] | dnssec ds-gone ZONE"

/* dnssec status [ZONE] | rollover ZONE ROLE | ds-seen ZONE [TAG] | ds-gone ZONE: the keys tern
 * manages (tern/load/loader.h). */
static void cmd_dnssec_keys(ctl_t *c, char **argv, sb_t *body, char *err, size_t errlen)
{
    bool status = strcmp(argv[1], "status") == 0;
    if (!status && (!argv[2] || (strcmp(argv[1], "rollover") == 0 && !argv[3]))) {
        snprintf(err, errlen, "usage: %s", DNSSEC_USAGE);
        return;
    }
    if (!c->loader) {
        snprintf(err, errlen, "no loader: dnssec %s is not available", argv[1]);
        return;
    }
    if (status) {
        char *text = loader_dnssec_status(c->loader, argv[2], err, errlen);
        if (text)
            sb_append(body, text, strlen(text));
        free(text);
        return;
    }
    int rc;
    if (strcmp(argv[1], "rollover") == 0) {
        rc = loader_dnssec_rollover(c->loader, argv[2], argv[3], err, errlen);
    } else if (strcmp(argv[1], "ds-gone") == 0) {
        rc = loader_dnssec_ds_gone(c->loader, argv[2], err, errlen);
    } else {
        char *end = NULL;
        long tag = argv[3] ? strtol(argv[3], &end, 10) : -1;
        if (argv[3] && (*end || tag < 0 || tag > 65535)) {
            snprintf(err, errlen, "ds-seen: bad key tag \"%s\"", argv[3]);
            return;
        }
        rc = loader_dnssec_ds_seen(c->loader, argv[2], (int)tag, err, errlen);
    }
    if (rc == 0)
        ctl_cmd_line(body, "ok");
    else if (!err[0])
        snprintf(err, errlen, "%s", tern_strerror(rc));
}

/* dnssec ds ZONE: the DS records to give the parent (of the KSKs; of the one key a zone signed
 * with a single key has). */
static void cmd_dnssec(ctl_t *c, char **argv, sb_t *body, char *err, size_t errlen)
{
    if (strcmp(argv[1], "status") == 0 || strcmp(argv[1], "rollover") == 0 ||
        strcmp(argv[1], "ds-seen") == 0 || strcmp(argv[1], "ds-gone") == 0) {
        cmd_dnssec_keys(c, argv, body, err, errlen);
        return;
    }
    if (strcmp(argv[1], "ds") != 0 || !argv[2]) {
        snprintf(err, errlen, "usage: %s", DNSSEC_USAGE);
        return;
    }
    zlist_t zl;
    const zinfo_t *z = zone_named(c, argv[2], &zl, err, errlen);
    if (z && !z->dnssec_ds)
        snprintf(err, errlen, "zone %s is not signed by tern", z->origin);
    else if (z)
        sb_append(body, z->dnssec_ds, strlen(z->dnssec_ds));
    zlist_free(&zl);
}

/* --- health */

static const char *const override_names[] = {"auto", "up", "down"};

static void health_line(void *ctx, const health_ep_info_t *i)
{
    sb_t *b = ctx;
    const health_spec_t *s = i->spec;
    char ip[INET6_ADDRSTRLEN], addr[INET6_ADDRSTRLEN + 8], t[32];
    inet_ntop(s->family == 6 ? AF_INET6 : AF_INET, s->addr, ip, sizeof(ip));
    if (s->proto == HEALTH_ICMP)
        snprintf(addr, sizeof(addr), "%s", ip);
    else
        snprintf(addr, sizeof(addr), s->family == 6 ? "[%s]:%u" : "%s:%u", ip, s->port);
    if (i->last_check)
        fmt_time(t, sizeof(t), i->last_check / 1000);
    else
        snprintf(t, sizeof(t), "never");
    ctl_cmd_line(
        b,
        "endpoint: %s protocol %s host %s uri %s state %s status %d/%d..%d override %s "
        "last_check %s last_result %s by %s latency_ms %.3f checks %" PRIu64 " failures %" PRIu64
        " error %s",
        addr, health_proto_name(s->proto), s->host ? s->host : "-",
        s->proto == HEALTH_HTTP || s->proto == HEALTH_HTTPS ? (s->uri ? s->uri : "/") : "-",
        i->state, i->status, s->down_count, s->up_count, override_names[i->override % 3], t,
        !i->checked  ? "none"
        : i->last_ok ? "ok"
                     : "failed",
        !i->checked      ? "-"
        : i->last_remote ? "redis"
                         : "self",
        i->latency_us / 1000.0, i->checks, i->failures, i->error[0] ? i->error : "-");
}

struct health_count {
    size_t up, down, other;
};

static void health_tally(void *ctx, const health_ep_info_t *i)
{
    struct health_count *n = ctx;
    if (i->rank == HEALTH_RANK_UP)
        n->up++;
    else if (i->rank == HEALTH_RANK_DOWN)
        n->down++;
    else
        n->other++;
}

/* "ADDR", "ADDR:PORT" or "[V6]:PORT" into family, addr and port (0 = every port). */
static bool parse_endpoint(const char *text, int *family, uint8_t *addr, uint16_t *port)
{
    char host[INET6_ADDRSTRLEN + 1];
    const char *p = NULL;
    size_t n = strlen(text);
    *port = 0;
    if (text[0] == '[') {
        const char *close = strchr(text, ']');
        if (!close || (size_t)(close - text - 1) >= sizeof(host) || close[1] != ':')
            return false;
        memcpy(host, text + 1, (size_t)(close - text - 1));
        host[close - text - 1] = '\0';
        p = close + 2;
    } else if (strchr(text, ':') && strchr(text, ':') == strrchr(text, ':')) {
        const char *colon = strchr(text, ':');
        if ((size_t)(colon - text) >= sizeof(host))
            return false;
        memcpy(host, text, (size_t)(colon - text));
        host[colon - text] = '\0';
        p = colon + 1;
    } else {
        if (n >= sizeof(host))
            return false;
        memcpy(host, text, n + 1);
    }
    if (p) {
        char *end;
        unsigned long v = strtoul(p, &end, 10);
        if (*p == '\0' || *end || v == 0 || v > 65535)
            return false;
        *port = (uint16_t)v;
    }
    if (inet_pton(AF_INET, host, addr) == 1)
        *family = 4;
    else if (inet_pton(AF_INET6, host, addr) == 1)
        *family = 6;
    else
        return false;
    return true;
}

static void cmd_health(ctl_t *c, char **argv, sb_t *body, char *err, size_t errlen)
{
    health_registry_t *r = c->loader ? loader_health(c->loader) : NULL;
    if (!r) {
        snprintf(err, errlen, "no health checks here");
        return;
    }
    if (argv[1]) {
        /* health set ADDR[:PORT] up|down|auto */
        int family;
        uint8_t addr[16];
        uint16_t port;
        size_t state = 0;
        while (state < 3 && strcmp(argv[3], override_names[state]) != 0)
            state++;
        if (strcmp(argv[1], "set") != 0 || state == 3 ||
            !parse_endpoint(argv[2], &family, addr, &port)) {
            snprintf(err, errlen, "usage: health | health set ADDR[:PORT] up|down|auto");
            return;
        }
        int n = health_set_override(r, family, addr, port,
                                    state == 1   ? HEALTH_FORCE_UP
                                    : state == 2 ? HEALTH_FORCE_DOWN
                                                 : HEALTH_AUTO);
        if (n < 0) {
            snprintf(err, errlen, "out of memory");
            return;
        }
        log_info("health: %s set %s by the control socket (%d endpoints now)", argv[2],
                 override_names[state], n);
        ctl_cmd_line(body, "override: %s %s", argv[2], override_names[state]);
        ctl_cmd_line(body, "matched: %d", n);
        return;
    }
    struct health_count n = {0};
    health_checker_stats_t st;
    bool checker = loader_health_stats(c->loader, &st);
    size_t total = health_each(r, health_tally, &n);
    ctl_cmd_line(body, "endpoints: %zu", total);
    ctl_cmd_line(body, "up: %zu", n.up);
    ctl_cmd_line(body, "down: %zu", n.down);
    ctl_cmd_line(body, "between: %zu", n.other);
    ctl_cmd_line(body, "checker: %s", checker ? "yes" : "no");
    ctl_cmd_line(body, "checks: %" PRIu64, st.checks);
    ctl_cmd_line(body, "failures: %" PRIu64, st.failures);
    ctl_cmd_line(body, "in_flight: %" PRIu32, st.in_flight);
    ctl_cmd_line(body, "adopted: %" PRIu64, st.adopted);
    ctl_cmd_line(body, "redis: %s",
                 !st.redis_enabled    ? "none"
                 : st.redis_connected ? "connected"
                                      : "disconnected");
    ctl_cmd_line(body, "redis_errors: %" PRIu64, st.redis_errors);
    (void)health_each(r, health_line, body);
}

static const struct {
    const char *name;
    unsigned min_args, max_args;
    const char *usage;
    cmd_fn fn;
} commands[] = {
    {"reload", 0, 0, "reload", cmd_reload},
    {"status", 0, 0, "status", cmd_status},
    {"stats", 0, 0, "stats", cmd_stats},
    {"zone", 1, 2, "zone NAME | zone flush NAME", cmd_zone},
    {"dnssec", 1, 3, DNSSEC_USAGE, cmd_dnssec},
    {"health", 0, 3, "health | health set ADDR[:PORT] up|down|auto", cmd_health},
    {"explain", 3, 9, "explain NAME [TYPE] --client ADDR [--ecs PREFIX] [--do] [--tcp] [--json]",
     ctl_explain},
};

/* A maximum of words in a request: the longest command (explain) takes nine arguments; more is
 * an error. */
#define CTL_MAX_WORDS 10

/* The whole response to one request line (NUL-terminated, without its "\n"). */
void ctl_cmd_dispatch(ctl_t *c, char *line, sb_t *resp)
{
    char *argv[CTL_MAX_WORDS + 1] = {0};
    unsigned argc = 0;
    char *save = NULL;
    for (char *w = strtok_r(line, " \t", &save); w && argc <= CTL_MAX_WORDS;
         w = strtok_r(NULL, " \t", &save))
        argv[argc++] = w;
    if (argc == 0) {
        ctl_cmd_line(resp,
                     "error: empty request (commands: reload, status, stats, zone NAME, health)");
        return;
    }
    for (size_t i = 0; i < TERN_ARRAY_SIZE(commands); i++) {
        if (strcmp(argv[0], commands[i].name) != 0)
            continue;
        if (argc < commands[i].min_args + 1 || argc > commands[i].max_args + 1 ||
            (commands[i].fn == cmd_health && argc != 1 && argc != 4)) {
            ctl_cmd_line(resp, "error: usage: %s", commands[i].usage);
            return;
        }
        log_debug("control socket: %s", argv[0]);
        char err[1024] = "";
        sb_t body = SB_INIT;
        commands[i].fn(c, argv, &body, err, sizeof(err));
        if (body.failed) {
            ctl_cmd_line(resp, "error: out of memory");
        } else {
            if (err[0])
                ctl_cmd_line(resp, "error: %s", err);
            else
                ctl_cmd_line(resp, "ok");
            if (body.len)
                sb_append(resp, body.p, body.len);
        }
        tern_buf_free(&body);
        return;
    }
    ctl_cmd_line(
        resp, "error: unknown command '%.64s' (commands: reload, status, stats, zone NAME, health)",
        argv[0]);
}
