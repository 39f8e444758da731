/*
 * ctl.c — the control socket's threads: accept, read one request line, answer, close.
 *
 * The serving thread runs one poll() loop over every connection (up to CTL_MAX_CONNECTIONS, all
 * non-blocking), each under its own deadline: CTL_IO_TIMEOUT_MS for the whole request line from
 * the accept, then CTL_IO_TIMEOUT_MS for the whole response. An idle or trickling client holds
 * only its own slot, and a client beyond the last slot closes the one that has waited longest for
 * its request, so nobody queues behind them. The loop also watches the stop eventfd, so ctl_stop()
 * waits for no client.
 *
 * A reload waits for the loader (loader_reload_wait()), which is no business of the other
 * requests: it runs on a second thread, the waiter, and every reload asked for before the waiter
 * starts one is answered by that one. The waiter's wait is the only one that does not watch the
 * stop eventfd: a reload, once started, finishes (loader_stop() would wait for it as well).
 *
 * Responses are built in memory first (a growable buffer), then written: a response is at most a
 * line per zone, and building it whole means the loader's lock (loader_zones()) is held only to
 * copy the zone list, never while a client reads.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "tern/common/clock.h"
#include "tern/common/buf.h"
#include "tern/common/err.h"
#include "tern/common/grow.h"
#include "tern/common/log.h"
#include "tern/ctl/ctl.h"
#include "tern/xfr/xfr.h"
#include "tern/dnssec/dnssec_zone.h"

/* Connections waiting to be accepted while all CTL_MAX_CONNECTIONS are being answered (reloads,
 * responses not yet read); ternctl retries a full backlog until its timeout. */
#define CTL_BACKLOG 16

/* Served at once. Control traffic is an operator and a monitoring script or two; 32 leave room
 * for bursts of those (each costs a descriptor and a 1 KiB request buffer), and a client beyond
 * them closes the one that has waited longest for its request line, so idle connections cannot
 * keep anyone out. */
#define CTL_MAX_CONNECTIONS 32

/* ctl_exchange() refuses a larger response: a line per zone is ~150 bytes, so this allows
 * hundreds of thousands of zones while bounding what a confused peer can make ternctl buffer. */
#define CTL_MAX_RESPONSE ((size_t)64 << 20)

/* After a failed accept() (EMFILE, ENOBUFS...) the listener stays readable: pause this long
 * before trying again so the thread does not spin, and the log gets one line per pause. */
#define CTL_ACCEPT_BACKOFF_MS 200

/* ctl_connect(): a full backlog means the server is busy with a reload; poll for room this
 * often. */
#define CTL_CONNECT_RETRY_MS 10

/* The socket file's mode: the owner (the user ternd runs as) and its group (operators). */
#define CTL_SOCKET_MODE 0660

typedef tern_buf_t sb_t;

/* One client: its request line is read, then its response written, each under a deadline. */
typedef struct ctl_conn {
    enum { CONN_FREE, CONN_READ, CONN_RELOAD, CONN_WRITE } state;
    int fd;
    int64_t deadline; /* monotonic ms: READ, for the whole line; WRITE, the whole response */
    uint64_t ticket;  /* RELOAD: answered by the first reload done with done >= ticket */
    size_t len;       /* READ: bytes in req */
    char req[CTL_MAX_REQUEST + 1];
    sb_t resp; /* WRITE: the response, sent from off */
    size_t off;
} ctl_conn_t;

struct ctl {
    char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
    loader_t *loader; /* may be NULL (tests) */
    server_t *server; /* may be NULL (tests) */
    xfr_t *xfr;       /* zone transfers; may be NULL */
    unsigned workers;
    int lfd;   /* the listening socket */
    int evfd;  /* ctl_stop() writes it */
    dev_t dev; /* identity of the socket file we bound, so ctl_stop() removes only ours */
    ino_t ino;
    int64_t start_ms; /* monotonic, for the uptime */
    int64_t start_wall;
    pthread_t thread;
    int64_t accept_resume; /* after a failed accept(), accept again from then on (monotonic) */
    ctl_conn_t conns[CTL_MAX_CONNECTIONS]; /* the serving thread's */
    /* The waiter thread runs the reloads asked for, so that a reload (which waits for the
     * loader) holds up no other request. */
    pthread_t waiter;
    pthread_mutex_t mu; /* guards asked, done, result, stopping */
    pthread_cond_t cv;  /* asked moved, or stopping */
    uint64_t asked;     /* reload tickets handed out */
    uint64_t done;      /* the last ticket the last finished reload answers */
    sb_t result;        /* that reload's whole response */
    bool stopping;
    int donefd; /* eventfd: the waiter has a result */
};

/* "2026-11-23T10:00:00Z", or "never" for 0 (the loader's "not yet"). */
static void fmt_time(char *buf, size_t cap, int64_t t)
{
    struct tm tm;
    time_t tt = (time_t)t;
    if (t <= 0 || !gmtime_r(&tt, &tm) || strftime(buf, cap, "%Y-%m-%dT%H:%M:%SZ", &tm) == 0)
        snprintf(buf, cap, "never");
}

/* --- response buffer */

/* Responses are bounded by CTL_MAX_RESPONSE; an append beyond it (or out of memory) fails the
 * buffer and the response becomes "error: out of memory". */

#define SB_INIT                                                                                    \
    {                                                                                              \
        .max = CTL_MAX_RESPONSE + 1                                                                \
    }
#define sb_append tern_buf_append

/* Append one printf-formatted line and its "\n". Control characters that came in through a name,
 * a path or an error message are written as '?', so one line stays one line. */
static void sb_line(sb_t *b, const char *fmt, ...) TERN_PRINTF(2, 3);
static void sb_line(sb_t *b, const char *fmt, ...)
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
        sb_line(&keys, "key: %s flags %u algorithm %u tag %u%s", k->label, k->flags, k->alg, k->tag,
                k == dz->zsk ? " (signs the zone)" : "");
        char line[600];
        if ((k->flags & DNSSEC_FLAG_SEP || dz->nkeys == 1) &&
            dnssec_key_ds_text(k, 2, line, sizeof(line)) > 0)
            sb_line(&ds, "%s", line);
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
    sb_line(b, "zone: %s serial %" PRIu32 " records %zu bytes %zu loaded %s file %s", z->origin,
            z->serial, z->records, z->bytes, t, z->file);
}

/* --- commands: each fills body, or writes its error message into err (body may still follow) */

typedef void (*cmd_fn)(ctl_t *c, char **argv, sb_t *body, char *err, size_t errlen);

static void reload_counters(sb_t *b, const loader_stats_t *st)
{
    char t[32];
    fmt_time(t, sizeof(t), st->last_time);
    bool never = st->reloads_ok + st->reloads_failed == 0;
    sb_line(b, "reloads_ok: %" PRIu64, st->reloads_ok);
    sb_line(b, "reloads_failed: %" PRIu64, st->reloads_failed);
    sb_line(b, "last_reload: %s", never ? "never" : t);
    sb_line(b, "last_reload_result: %s", never ? "none" : st->last_ok ? "ok" : "failed");
    sb_line(b, "last_reload_duration_ms: %lld", never ? -1LL : (long long)st->last_duration_ms);
    if (!never && !st->last_ok)
        sb_line(b, "last_reload_error: %s", st->last_error);
    if (st->redis_enabled) {
        sb_line(b, "redis: %s", st->redis_connected ? "connected" : "disconnected");
        sb_line(b, "redis_zones: %zu", st->redis_zones);
        sb_line(b, "redis_zones_rejected: %zu", st->redis_failed);
        sb_line(b, "redis_publishes: %" PRIu64, st->redis_publishes);
        sb_line(b, "redis_zones_skipped: %zu", st->redis_zones_skipped);
        sb_line(b, "redis_labels_skipped: %" PRIu64, st->redis_labels_skipped);
        sb_line(b, "redis_over_max_value_bytes: %" PRIu64, st->redis_over_value_bytes);
        sb_line(b, "redis_over_max_labels: %" PRIu64, st->redis_over_labels);
        sb_line(b, "redis_over_max_rrset_records: %" PRIu64, st->redis_over_rrset_records);
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
        sb_line(body, "reload: failed");
        sb_line(body, "duration_ms: %lld", (long long)st.last_duration_ms);
        sb_line(body, "still_serving: the previous data");
        sb_line(body, "zones: %zu", st.zones);
        sb_line(body, "records: %zu", st.records);
        sb_line(body, "reloads_failed: %" PRIu64, st.reloads_failed);
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
            sb_line(&lines, "changed: %s serial %" PRIu32 " -> %" PRIu32 " records %zu", z->origin,
                    p->serial, z->serial, z->records);
        else
            sb_line(&lines, "changed: %s serial %" PRIu32 " records %zu (new)", z->origin,
                    z->serial, z->records);
    }
    for (size_t i = 0; i < before.n; i++)
        if (!zlist_find(sorted_after, after.n, before.z[i].origin)) {
            removed++;
            sb_line(&lines, "removed: %s", before.z[i].origin);
        }
    sb_line(body, "reload: ok");
    sb_line(body, "duration_ms: %lld", (long long)st.last_duration_ms);
    sb_line(body, "zones: %zu", after.n);
    sb_line(body, "records: %zu", st.records);
    sb_line(body, "zones_changed: %zu", changed);
    sb_line(body, "zones_unchanged: %zu", after.n - changed);
    sb_line(body, "zones_removed: %zu", removed);
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
    sb_line(body, "version: %s", TERN_VERSION);
    sb_line(body, "pid: %ld", (long)getpid());
    sb_line(body, "started: %s", t);
    sb_line(body, "uptime_seconds: %lld", (long long)((tern_monotonic_ms() - c->start_ms) / 1000));
    sb_line(body, "workers: %u", c->server ? server_workers(c->server) : c->workers);
    if (!c->loader)
        return;
    zlist_t zl;
    if (!zlist_get(c->loader, &zl)) {
        snprintf(err, errlen, "out of memory");
        return;
    }
    loader_stats_t st;
    loader_get_stats(c->loader, &st);
    sb_line(body, "zones: %zu", zl.n);
    sb_line(body, "records: %zu", st.records);
    reload_counters(body, &st);
    for (size_t i = 0; i < zl.n; i++)
        zone_line(body, &zl.z[i]);
    zlist_free(&zl);
}

static void cmd_stats(ctl_t *c, char **argv, sb_t *body, char *err, size_t errlen)
{
    (void)argv, (void)err, (void)errlen;
    sb_line(body, "uptime_seconds: %lld", (long long)((tern_monotonic_ms() - c->start_ms) / 1000));
    sb_line(body, "workers: %u", c->server ? server_workers(c->server) : c->workers);
    if (c->server) {
        server_stats_t s;
        server_stats(c->server, &s);
        sb_line(body, "queries: %" PRIu64, s.queries_udp + s.queries_tcp);
        sb_line(body, "queries_udp: %" PRIu64, s.queries_udp);
        sb_line(body, "queries_tcp: %" PRIu64, s.queries_tcp);
        /* how the queries spread over the workers (udp_steering) */
        for (unsigned w = 0; w < server_workers(c->server); w++) {
            server_stats_t ws;
            server_worker_stats(c->server, w, &ws);
            sb_line(body, "worker_%u_queries: %" PRIu64, w, ws.queries_udp + ws.queries_tcp);
        }
        sb_line(body, "udp_received: %" PRIu64, s.udp_received);
        sb_line(body, "udp_sent: %" PRIu64, s.udp_sent);
        sb_line(body, "udp_dropped: %" PRIu64, s.udp_dropped);
        sb_line(body, "tcp_accepted: %" PRIu64, s.tcp_accepted);
        sb_line(body, "tcp_refused: %" PRIu64, s.tcp_refused);
        sb_line(body, "tcp_accept_paused: %" PRIu64, s.tcp_accept_paused);
        sb_line(body, "tcp_queries: %" PRIu64, s.tcp_queries);
        sb_line(body, "tcp_closed_idle: %" PRIu64, s.tcp_closed_idle);
        sb_line(body, "tcp_closed_full: %" PRIu64, s.tcp_closed_full);
        sb_line(body, "tcp_closed_bad: %" PRIu64, s.tcp_closed_bad);
        sb_line(body, "tcp_closed_life: %" PRIu64, s.tcp_closed_life);
        sb_line(body, "tcp_closed_peer: %" PRIu64, s.tcp_closed_peer);
        for (unsigned i = 0; i < SERVER_QTYPE_COUNT; i++)
            sb_line(body, "qtype_%s: %" PRIu64, server_qtype_name(i), s.qtype[i]);
        for (unsigned i = 0; i < SERVER_RCODE_COUNT; i++)
            sb_line(body, "rcode_%s: %" PRIu64, server_rcode_name(i), s.rcode[i]);
        sb_line(body, "truncated: %" PRIu64, s.truncated);
        sb_line(body, "dropped_short: %" PRIu64, s.dropped_short);
        sb_line(body, "dropped_qr: %" PRIu64, s.dropped_qr);
        sb_line(body, "xfr_handed_off: %" PRIu64, s.handed_off);
        sb_line(body, "xfr_busy: %" PRIu64, s.handoff_full);
        sb_line(body, "tcp_handed_off: %" PRIu64, s.tcp_handed_off);
        sb_line(body, "edns: %" PRIu64, s.edns);
        sb_line(body, "ecs: %" PRIu64, s.ecs);
        sb_line(body, "health_fail_open: %" PRIu64, s.health_fail_open);
        static const char *const why[6] = {"other",     "acl",       "zone_acl",
                                           "blacklist", "ratelimit", "rrl"};
        for (unsigned i = 1; i < 6; i++) {
            if (i != 5)
                sb_line(body, "refused_%s: %" PRIu64, why[i], s.policy_refused[i]);
            sb_line(body, "dropped_%s: %" PRIu64, why[i], s.policy_dropped[i]);
        }
        sb_line(body, "rrl_slipped: %" PRIu64, s.rrl_slipped);
        sb_line(body, "cookies: %" PRIu64, s.cookies);
        sb_line(body, "cookies_valid: %" PRIu64, s.cookies_valid);
        sb_line(body, "badcookie: %" PRIu64, s.badcookie);
        sb_line(body, "tcp_client_capped: %" PRIu64, s.tcp_client_capped);
        sb_line(body, "tcp_evicted: %" PRIu64, s.tcp_evicted);
    }
    if (c->loader) {
        loader_stats_t st;
        loader_get_stats(c->loader, &st);
        sb_line(body, "zones: %zu", st.zones);
        sb_line(body, "records: %zu", st.records);
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
        sb_line(body, "transfers: none configured");
        free(in);
        return;
    }
    sb_line(body, "transfers: %s", in->secondary ? "secondary (transferred in)" : "primary");
    sb_line(body, "journal: %zu versions", in->nversions);
    for (size_t i = 0; i < in->nversions; i++) {
        fmt_time(t, sizeof(t), in->versions[i].when);
        sb_line(body, "version: %" PRIu32 " -> %" PRIu32 ", %zu removed, %zu added, %zu bytes, %s",
                in->versions[i].from, in->versions[i].to, in->versions[i].removed,
                in->versions[i].added, in->versions[i].bytes, t);
    }
    if (in->out_when) {
        fmt_time(t, sizeof(t), in->out_when);
        sb_line(body,
                "last_transfer_out: %s serial %" PRIu32 " to %s, %" PRIu64 " records, %s (%" PRIu64
                " in all)",
                in->out_kind, in->out_serial, in->out_peer, in->out_records, t, in->out_count);
    } else {
        sb_line(body, "last_transfer_out: never");
    }
    if (in->secondary) {
        if (in->in_when) {
            fmt_time(t, sizeof(t), in->in_when);
            sb_line(body,
                    "last_transfer_in: %s from %s, %" PRIu64 " records, %s (%" PRIu64 " in all)",
                    in->in_kind, in->in_primary, in->in_records, t, in->in_count);
        } else {
            sb_line(body, "last_transfer_in: never");
        }
        fmt_time(t, sizeof(t), in->refresh_at);
        fmt_time(u, sizeof(u), in->expire_at);
        sb_line(body, "refresh: %s, expire: %s%s", t, u, in->expired ? " (expired: SERVFAIL)" : "");
        if (in->in_error[0])
            sb_line(body, "last_error: %s", in->in_error);
    }
    for (size_t i = 0; i < in->nnotify; i++) {
        fmt_time(t, sizeof(t), in->notify[i].acked_when);
        sb_line(body, "notify: %s serial %" PRIu32 " %s after %u sends%s%s", in->notify[i].peer,
                in->notify[i].serial, in->notify[i].acked ? "acknowledged" : "not acknowledged",
                in->notify[i].attempts, in->notify[i].acked ? ", " : "",
                in->notify[i].acked ? t : "");
    }
    free(in);
}

static void cmd_zone(ctl_t *c, char **argv, sb_t *body, char *err, size_t errlen)
{
    zlist_t zl;
    const zinfo_t *z = zone_named(c, argv[1], &zl, err, errlen);
    if (z) {
        char t[32];
        fmt_time(t, sizeof(t), z->loaded);
        sb_line(body, "zone: %s", z->origin);
        sb_line(body, "serial: %" PRIu32, z->serial);
        sb_line(body, "records: %zu", z->records);
        sb_line(body, "bytes: %zu", z->bytes);
        sb_line(body, "loaded: %s", t);
        sb_line(body, "file: %s", z->file);
        if (z->dnssec_keys) {
            char a[32], b[32];
            fmt_time(a, sizeof(a), z->sig_inception);
            fmt_time(b, sizeof(b), z->sig_expiration);
            sb_line(body, "dnssec: signed, %" PRIu64 " signatures made ahead, valid %s to %s",
                    z->sigs_made, a, b);
            sb_append(body, z->dnssec_keys, strlen(z->dnssec_keys));
        } else {
            sb_line(body, "dnssec: unsigned");
        }
        if (c->xfr)
            zone_xfr_lines(c->xfr, z->origin, body);
    }
    zlist_free(&zl);
}

/* dnssec ds ZONE: the DS records to give the parent (of the KSKs; of the one key a zone signed
 * with a single key has). */
static void cmd_dnssec(ctl_t *c, char **argv, sb_t *body, char *err, size_t errlen)
{
    if (strcmp(argv[1], "ds") != 0) {
        snprintf(err, errlen, "usage: dnssec ds ZONE");
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
    sb_line(b,
            "endpoint: %s protocol %s host %s uri %s state %s status %d/%d..%d override %s "
            "last_check %s last_result %s by %s latency_ms %.3f checks %" PRIu64
            " failures %" PRIu64 " error %s",
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
        sb_line(body, "override: %s %s", argv[2], override_names[state]);
        sb_line(body, "matched: %d", n);
        return;
    }
    struct health_count n = {0};
    health_checker_stats_t st;
    bool checker = loader_health_stats(c->loader, &st);
    size_t total = health_each(r, health_tally, &n);
    sb_line(body, "endpoints: %zu", total);
    sb_line(body, "up: %zu", n.up);
    sb_line(body, "down: %zu", n.down);
    sb_line(body, "between: %zu", n.other);
    sb_line(body, "checker: %s", checker ? "yes" : "no");
    sb_line(body, "checks: %" PRIu64, st.checks);
    sb_line(body, "failures: %" PRIu64, st.failures);
    sb_line(body, "in_flight: %" PRIu32, st.in_flight);
    sb_line(body, "adopted: %" PRIu64, st.adopted);
    sb_line(body, "redis: %s",
            !st.redis_enabled    ? "none"
            : st.redis_connected ? "connected"
                                 : "disconnected");
    sb_line(body, "redis_errors: %" PRIu64, st.redis_errors);
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
    {"zone", 1, 1, "zone NAME", cmd_zone},
    {"dnssec", 2, 2, "dnssec ds ZONE", cmd_dnssec},
    {"health", 0, 3, "health | health set ADDR[:PORT] up|down|auto", cmd_health},
};

/* A maximum of words in a request: the longest command takes three arguments; more is an
 * error. */
#define CTL_MAX_WORDS 5

/* The whole response to one request line (NUL-terminated, without its "\n"). */
static void dispatch(ctl_t *c, char *line, sb_t *resp)
{
    char *argv[CTL_MAX_WORDS + 1] = {0};
    unsigned argc = 0;
    char *save = NULL;
    for (char *w = strtok_r(line, " \t", &save); w && argc <= CTL_MAX_WORDS;
         w = strtok_r(NULL, " \t", &save))
        argv[argc++] = w;
    if (argc == 0) {
        sb_line(resp, "error: empty request (commands: reload, status, stats, zone NAME, health)");
        return;
    }
    for (size_t i = 0; i < TERN_ARRAY_SIZE(commands); i++) {
        if (strcmp(argv[0], commands[i].name) != 0)
            continue;
        if (argc < commands[i].min_args + 1 || argc > commands[i].max_args + 1 ||
            (commands[i].fn == cmd_health && argc != 1 && argc != 4)) {
            sb_line(resp, "error: usage: %s", commands[i].usage);
            return;
        }
        log_debug("control socket: %s", argv[0]);
        char err[1024] = "";
        sb_t body = SB_INIT;
        commands[i].fn(c, argv, &body, err, sizeof(err));
        if (body.failed) {
            sb_line(resp, "error: out of memory");
        } else {
            if (err[0])
                sb_line(resp, "error: %s", err);
            else
                sb_line(resp, "ok");
            if (body.len)
                sb_append(resp, body.p, body.len);
        }
        tern_buf_free(&body);
        return;
    }
    sb_line(resp,
            "error: unknown command '%.64s' (commands: reload, status, stats, zone NAME, health)",
            argv[0]);
}

/* --- connections: one poll() loop over non-blocking sockets, each under its own deadline */

/* A request line that is exactly "reload" (blanks around it allowed): the waiter thread runs
 * it. With arguments it goes to dispatch(), which answers the usage error at once. */
static bool is_reload(const char *line)
{
    line += strspn(line, " \t");
    size_t n = strcspn(line, " \t");
    return n == 6 && memcmp(line, "reload", 6) == 0 && line[n + strspn(line + n, " \t")] == '\0';
}

static void conn_close(ctl_conn_t *k)
{
    close(k->fd);
    tern_buf_free(&k->resp);
    *k = (ctl_conn_t){.state = CONN_FREE, .fd = -1};
}

/* Send what the socket takes now; close k once all is sent or the client is gone. */
static void conn_write(ctl_conn_t *k)
{
    static const char oom[] = "error: out of memory\n";
    const char *p = k->resp.failed || !k->resp.p ? oom : k->resp.p;
    size_t len = k->resp.failed || !k->resp.p ? sizeof(oom) - 1 : k->resp.len;
    /* each pass sends something; ends when the socket is full, or all is sent */
    while (k->off < len) {
        ssize_t n = send(k->fd, p + k->off, len - k->off, MSG_NOSIGNAL);
        if (n > 0) {
            k->off += (size_t)n;
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return; /* poll() says when there is room */
        break;      /* the client went away (EPIPE, ECONNRESET) */
    }
    conn_close(k);
}

/* k's response is in k->resp: write it within CTL_IO_TIMEOUT_MS from now. */
static void conn_respond(ctl_conn_t *k)
{
    k->state = CONN_WRITE;
    k->off = 0;
    k->deadline = tern_monotonic_ms() + CTL_IO_TIMEOUT_MS;
    conn_write(k);
}

/* The request line of k is complete (k->req, k->len bytes): answer it, or queue a reload. */
static void conn_request(ctl_t *c, ctl_conn_t *k)
{
    if (k->len > 0 && k->req[k->len - 1] == '\r')
        k->len--;
    k->req[k->len] = '\0';
    if (!is_reload(k->req)) {
        dispatch(c, k->req, &k->resp);
        conn_respond(k);
        return;
    }
    struct ucred peer;
    socklen_t sl = sizeof(peer);
    if (getsockopt(k->fd, SOL_SOCKET, SO_PEERCRED, &peer, &sl) < 0)
        peer = (struct ucred){.pid = 0, .uid = (uid_t)-1, .gid = (gid_t)-1};
    log_info("control socket: reload requested (pid %ld, uid %u)", (long)peer.pid,
             (unsigned)peer.uid);
    k->state = CONN_RELOAD;
    pthread_mutex_lock(&c->mu);
    k->ticket = ++c->asked;
    pthread_cond_signal(&c->cv);
    pthread_mutex_unlock(&c->mu);
}

/* Read what k's client has sent; a whole line (or the end of the stream) makes the request. */
static void conn_read(ctl_t *c, ctl_conn_t *k)
{
    ssize_t n = recv(k->fd, k->req + k->len, CTL_MAX_REQUEST - k->len, 0);
    if (n > 0) {
        char *nl = memchr(k->req + k->len, '\n', (size_t)n);
        k->len += (size_t)n;
        if (nl) {
            k->len = (size_t)(nl - k->req);
            conn_request(c, k);
        } else if (k->len == CTL_MAX_REQUEST) {
            sb_line(&k->resp, "error: request longer than %d bytes", CTL_MAX_REQUEST);
            conn_respond(k);
        }
        return;
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
        return;
    if (n == 0 && k->len > 0)
        conn_request(c, k); /* the end of the stream ends a non-empty request */
    else
        conn_close(k); /* nothing, or an error */
}

/* Hand every finished reload's response to the connections that asked before it started. */
static void deliver_reloads(ctl_t *c)
{
    pthread_mutex_lock(&c->mu);
    for (unsigned i = 0; i < CTL_MAX_CONNECTIONS; i++) {
        ctl_conn_t *k = &c->conns[i];
        if (k->state != CONN_RELOAD || k->ticket > c->done)
            continue;
        if (c->result.failed || !c->result.p)
            k->resp.failed = true;
        else
            sb_append(&k->resp, c->result.p, c->result.len);
        conn_respond(k);
    }
    pthread_mutex_unlock(&c->mu);
}

/* Answer or close the connections past their deadline; the next deadline (INT64_MAX: none). */
static int64_t conns_expire(ctl_t *c, int64_t now)
{
    int64_t next = INT64_MAX;
    for (unsigned i = 0; i < CTL_MAX_CONNECTIONS; i++) {
        ctl_conn_t *k = &c->conns[i];
        if (k->state == CONN_READ && k->deadline <= now) {
            sb_line(&k->resp, "error: no request within %d ms", CTL_IO_TIMEOUT_MS);
            conn_respond(k);
        } else if (k->state == CONN_WRITE && k->deadline <= now) {
            log_warn("control socket: a client did not read its response within %d ms",
                     CTL_IO_TIMEOUT_MS);
            conn_close(k);
        }
        if ((k->state == CONN_READ || k->state == CONN_WRITE) && k->deadline < next)
            next = k->deadline;
    }
    return next;
}

/* A slot for a new connection: a free one, else the one that has waited longest for its request
 * line (closed); NULL when every connection is being answered. */
static ctl_conn_t *conn_slot(ctl_t *c, bool evict)
{
    ctl_conn_t *oldest = NULL;
    for (unsigned i = 0; i < CTL_MAX_CONNECTIONS; i++) {
        ctl_conn_t *k = &c->conns[i];
        if (k->state == CONN_FREE)
            return k;
        if (k->state == CONN_READ && (!oldest || k->deadline < oldest->deadline))
            oldest = k;
    }
    if (oldest && evict) {
        log_debug("control socket: %d connections; closing the one waiting longest for its "
                  "request",
                  CTL_MAX_CONNECTIONS);
        conn_close(oldest);
    }
    return oldest;
}

/* Accept what is pending, while there is room; pause accepting after a failure. */
static void accept_pending(ctl_t *c)
{
    /* one connection per pass; ends when none is pending, or there is no room */
    while (conn_slot(c, false)) {
        int fd = accept4(c->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED)
                continue;
            if (errno != EAGAIN && errno != EWOULDBLOCK) {
                log_warn("control socket: accept: %s", strerror(errno));
                c->accept_resume = tern_monotonic_ms() + CTL_ACCEPT_BACKOFF_MS;
            }
            return;
        }
        ctl_conn_t *k = conn_slot(c, true);
        *k = (ctl_conn_t){.state = CONN_READ,
                          .fd = fd,
                          .deadline = tern_monotonic_ms() + CTL_IO_TIMEOUT_MS,
                          .resp = SB_INIT};
    }
}

static void *ctl_main(void *arg)
{
    ctl_t *c = arg;
    enum { P_STOP, P_DONE, P_LISTEN, P_CONNS };
    struct pollfd p[P_CONNS + CTL_MAX_CONNECTIONS];
    ctl_conn_t *pk[CTL_MAX_CONNECTIONS];
    /* one poll() per pass; ends when ctl_stop() writes the eventfd */
    for (;;) {
        int64_t now = tern_monotonic_ms();
        int64_t next = conns_expire(c, now);
        bool paused = now < c->accept_resume;
        if (paused && c->accept_resume < next)
            next = c->accept_resume;
        p[P_STOP] = (struct pollfd){.fd = c->evfd, .events = POLLIN};
        p[P_DONE] = (struct pollfd){.fd = c->donefd, .events = POLLIN};
        /* no room (every connection being answered): new ones wait in the listen backlog */
        p[P_LISTEN] =
            (struct pollfd){.fd = !paused && conn_slot(c, false) ? c->lfd : -1, .events = POLLIN};
        nfds_t n = P_CONNS;
        for (unsigned i = 0; i < CTL_MAX_CONNECTIONS; i++) {
            ctl_conn_t *k = &c->conns[i];
            if (k->state != CONN_READ && k->state != CONN_WRITE)
                continue;
            pk[n - P_CONNS] = k;
            p[n++] =
                (struct pollfd){.fd = k->fd, .events = k->state == CONN_READ ? POLLIN : POLLOUT};
        }
        int64_t wait = next == INT64_MAX ? -1 : next - now;
        if (poll(p, n, (int)(wait > INT32_MAX ? INT32_MAX : wait)) < 0) {
            if (errno == EINTR)
                continue;
            log_err("control socket: poll: %s", strerror(errno));
            break;
        }
        if (p[P_STOP].revents)
            break;
        if (p[P_DONE].revents) {
            uint64_t v;
            (void)!read(c->donefd, &v, sizeof(v));
            deliver_reloads(c);
        }
        for (nfds_t i = P_CONNS; i < n; i++) {
            ctl_conn_t *k = pk[i - P_CONNS];
            if (!p[i].revents || k->fd != p[i].fd)
                continue; /* closed meanwhile (a delivered reload cannot take its slot) */
            if (k->state == CONN_READ)
                conn_read(c, k);
            else if (k->state == CONN_WRITE)
                conn_write(k);
        }
        if (p[P_LISTEN].revents)
            accept_pending(c);
    }
    return NULL;
}

/* Reloads asked for on the socket, one at a time: every ticket handed out before a reload
 * starts is answered by that reload. */
static void *ctl_waiter(void *arg)
{
    ctl_t *c = arg;
    pthread_mutex_lock(&c->mu);
    /* one reload per pass; ends on ctl_stop() (a reload in progress finishes first) */
    for (;;) {
        while (!c->stopping && c->asked == c->done)
            pthread_cond_wait(&c->cv, &c->mu);
        if (c->stopping)
            break;
        uint64_t upto = c->asked;
        pthread_mutex_unlock(&c->mu);
        sb_t resp = SB_INIT;
        char line[] = "reload";
        dispatch(c, line, &resp);
        pthread_mutex_lock(&c->mu);
        tern_buf_free(&c->result);
        c->result = resp;
        c->done = upto;
        uint64_t one = 1;
        if (write(c->donefd, &one, sizeof(one)) != (ssize_t)sizeof(one))
            log_warn("control socket: eventfd write: %s", strerror(errno));
    }
    pthread_mutex_unlock(&c->mu);
    return NULL;
}

/* --- start and stop */

static int fill_addr(struct sockaddr_un *sa, const char *path)
{
    memset(sa, 0, sizeof(*sa));
    sa->sun_family = AF_UNIX;
    size_t n = strlen(path);
    if (n == 0 || n >= sizeof(sa->sun_path))
        return -ENAMETOOLONG;
    memcpy(sa->sun_path, path, n + 1);
    return 0;
}

/* If path exists: remove it when it is a socket nobody answers on (left by a ternd that did not
 * exit cleanly); refuse when someone answers or it is not a socket. 0 or -1 (logged). */
static int clear_stale(const char *path, const struct sockaddr_un *sa)
{
    struct stat st;
    if (lstat(path, &st) < 0) {
        if (errno == ENOENT)
            return 0;
        log_err("control socket %s: %s", path, strerror(errno));
        return -1;
    }
    if (!S_ISSOCK(st.st_mode)) {
        log_err("control socket %s: exists and is not a socket; not replacing it", path);
        return -1;
    }
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) {
        log_err("control socket %s: socket: %s", path, strerror(errno));
        return -1;
    }
    int r = connect(fd, (const struct sockaddr *)sa, sizeof(*sa));
    int e = errno;
    close(fd);
    if (r == 0 || e == EAGAIN || e == EINPROGRESS) { /* EAGAIN: listening, backlog full */
        log_err("control socket %s: another process is serving it (is ternd already running?); "
                "not taking it over",
                path);
        return -1;
    }
    if (e == ENOENT)
        return 0; /* gone meanwhile */
    if (e != ECONNREFUSED) {
        log_err("control socket %s: cannot tell whether it is in use: %s", path, strerror(e));
        return -1;
    }
    if (unlink(path) < 0 && errno != ENOENT) {
        log_err("control socket %s: cannot remove the stale socket: %s", path, strerror(errno));
        return -1;
    }
    log_info("control socket %s: removed a stale socket nobody was serving", path);
    return 0;
}

/* Stop the waiter thread; a reload in progress finishes first. */
static void stop_waiter(ctl_t *c)
{
    pthread_mutex_lock(&c->mu);
    c->stopping = true;
    pthread_cond_signal(&c->cv);
    pthread_mutex_unlock(&c->mu);
    pthread_join(c->waiter, NULL);
}

/* Remove the socket file if it is still the one we bound. */
static void unlink_ours(const ctl_t *c)
{
    struct stat st;
    if (lstat(c->path, &st) == 0 && st.st_dev == c->dev && st.st_ino == c->ino &&
        unlink(c->path) < 0 && errno != ENOENT)
        log_warn("control socket %s: cannot remove it: %s", c->path, strerror(errno));
}

ctl_t *ctl_start(const char *path, loader_t *loader, server_t *server, unsigned workers)
{
    struct sockaddr_un sa;
    if (!path || fill_addr(&sa, path) < 0) {
        log_err("control socket %s: the path must be 1..%zu bytes", path ? path : "(null)",
                sizeof(sa.sun_path) - 1);
        return NULL;
    }
    ctl_t *c = calloc(1, sizeof(*c));
    if (!c) {
        log_err("control socket: out of memory");
        return NULL;
    }
    memcpy(c->path, sa.sun_path, sizeof(c->path));
    c->loader = loader;
    c->server = server;
    c->workers = workers;
    c->lfd = c->evfd = c->donefd = -1;
    for (unsigned i = 0; i < CTL_MAX_CONNECTIONS; i++)
        c->conns[i] = (ctl_conn_t){.state = CONN_FREE, .fd = -1};
    c->result = (sb_t)SB_INIT;
    pthread_mutex_init(&c->mu, NULL);
    pthread_cond_init(&c->cv, NULL);
    bool waiting = false;
    c->start_ms = tern_monotonic_ms();
    c->start_wall = (int64_t)time(NULL);
    bool bound = false;

    if (clear_stale(path, &sa) < 0)
        goto fail;
    if ((c->lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0)) < 0) {
        log_err("control socket %s: socket: %s", path, strerror(errno));
        goto fail;
    }
    if (bind(c->lfd, (const struct sockaddr *)&sa, sizeof(sa)) < 0) {
        log_err("control socket %s: cannot bind: %s%s", path, strerror(errno),
                errno == ENOENT ? " (does its directory exist?)" : "");
        goto fail;
    }
    bound = true;
    struct stat st;
    if (lstat(path, &st) < 0) {
        log_err("control socket %s: %s", path, strerror(errno));
        goto fail;
    }
    c->dev = st.st_dev;
    c->ino = st.st_ino;
    /* before listen(): until then a connect() is refused, so nobody gets in under the umask's
     * mode */
    if (chmod(path, CTL_SOCKET_MODE) < 0) {
        log_err("control socket %s: chmod: %s", path, strerror(errno));
        goto fail;
    }
    if (listen(c->lfd, CTL_BACKLOG) < 0) {
        log_err("control socket %s: listen: %s", path, strerror(errno));
        goto fail;
    }
    if ((c->evfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) < 0 ||
        (c->donefd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) < 0) {
        log_err("control socket: eventfd: %s", strerror(errno));
        goto fail;
    }
    int e = pthread_create(&c->waiter, NULL, ctl_waiter, c);
    if (e != 0) {
        log_err("control socket: cannot start its thread: %s", strerror(e));
        goto fail;
    }
    waiting = true;
    e = pthread_create(&c->thread, NULL, ctl_main, c);
    if (e != 0) {
        log_err("control socket: cannot start its thread: %s", strerror(e));
        goto fail;
    }
    log_info("control socket %s", path);
    return c;
fail:
    if (waiting)
        stop_waiter(c);
    if (bound)
        unlink_ours(c);
    if (c->lfd >= 0)
        close(c->lfd);
    if (c->evfd >= 0)
        close(c->evfd);
    if (c->donefd >= 0)
        close(c->donefd);
    pthread_mutex_destroy(&c->mu);
    pthread_cond_destroy(&c->cv);
    free(c);
    return NULL;
}

void ctl_set_xfr(ctl_t *c, xfr_t *x)
{
    if (c)
        c->xfr = x;
}

void ctl_stop(ctl_t *c)
{
    if (!c)
        return;
    uint64_t one = 1;
    if (write(c->evfd, &one, sizeof(one)) != (ssize_t)sizeof(one))
        log_warn("control socket: eventfd write: %s", strerror(errno));
    pthread_join(c->thread, NULL);
    stop_waiter(c);
    /* a reload that was in progress has finished: its clients get one try at their answer */
    deliver_reloads(c);
    for (unsigned i = 0; i < CTL_MAX_CONNECTIONS; i++)
        if (c->conns[i].state != CONN_FREE)
            conn_close(&c->conns[i]);
    unlink_ours(c);
    close(c->lfd);
    close(c->evfd);
    close(c->donefd);
    tern_buf_free(&c->result);
    pthread_mutex_destroy(&c->mu);
    pthread_cond_destroy(&c->cv);
    free(c);
}

/* --- client side */

int ctl_connect(const char *path, int timeout_ms)
{
    struct sockaddr_un sa;
    int r = fill_addr(&sa, path);
    if (r < 0)
        return r;
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        return -errno;
    int64_t deadline = tern_monotonic_ms() + timeout_ms;
    /* retries only while the backlog is full (EAGAIN); ends at the deadline */
    for (;;) {
        if (connect(fd, (const struct sockaddr *)&sa, sizeof(sa)) == 0)
            return fd;
        int e = errno;
        if ((e == EAGAIN || e == EINTR) && tern_monotonic_ms() < deadline) {
            struct timespec pause = {0, CTL_CONNECT_RETRY_MS * 1000000L};
            nanosleep(&pause, NULL);
            continue;
        }
        close(fd);
        return e == EAGAIN ? -ETIMEDOUT : -e;
    }
}

int ctl_exchange(int fd, const char *request, int timeout_ms, char **out)
{
    *out = NULL;
    size_t rl = strlen(request);
    if (rl + 1 > CTL_MAX_REQUEST)
        return TERN_EINVAL;
    char line[CTL_MAX_REQUEST];
    for (size_t i = 0; i < rl; i++) {
        unsigned char ch = (unsigned char)request[i];
        if (ch < 0x20 || ch == 0x7f)
            return TERN_EINVAL; /* a "\n" would smuggle in a second request */
        line[i] = (char)ch;
    }
    line[rl] = '\n';
    int64_t deadline = tern_monotonic_ms() + timeout_ms;
    size_t sent = 0;
    /* each pass sends something or waits; ends at the deadline */
    while (sent < rl + 1) {
        int64_t left = deadline - tern_monotonic_ms();
        if (left <= 0)
            return -ETIMEDOUT;
        ssize_t n = send(fd, line + sent, rl + 1 - sent, MSG_NOSIGNAL);
        if (n > 0) {
            sent += (size_t)n;
            continue;
        }
        if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
            return -errno;
        struct pollfd p = {.fd = fd, .events = POLLOUT};
        (void)poll(&p, 1, (int)left);
    }
    size_t len = 0, cap = 4096;
    char *buf = malloc(cap);
    if (!buf)
        return TERN_ENOMEM;
    int rc = 0;
    /* each pass reads something (at most CTL_MAX_RESPONSE in all) or waits; ends at EOF or the
     * deadline */
    for (;;) {
        int64_t left = deadline - tern_monotonic_ms();
        if (left <= 0) {
            rc = -ETIMEDOUT;
            break;
        }
        if (len + 1 == cap) {
            if (cap > CTL_MAX_RESPONSE) {
                rc = TERN_ELIMIT;
                break;
            }
            char *p = realloc(buf, cap * 2);
            if (!p) {
                rc = TERN_ENOMEM;
                break;
            }
            buf = p;
            cap *= 2;
        }
        ssize_t n = recv(fd, buf + len, cap - 1 - len, 0);
        if (n > 0) {
            len += (size_t)n;
            continue;
        }
        if (n == 0)
            break;
        if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
            rc = -errno;
            break;
        }
        struct pollfd p = {.fd = fd, .events = POLLIN};
        (void)poll(&p, 1, (int)left);
    }
    if (rc < 0) {
        free(buf);
        return rc;
    }
    buf[len] = '\0';
    *out = buf;
    return 0;
}
