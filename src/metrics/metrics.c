/*
 * metrics.c — GET /metrics in the Prometheus text format (0.0.4), served by libmicrohttpd.
 *
 * libmicrohttpd runs in "external select" mode on a thread of ours: the thread polls
 * libmicrohttpd's epoll descriptor together with a stop eventfd and calls MHD_run(), so every
 * libmicrohttpd callback (on_request() and the connection notifications) runs on that one thread,
 * never on a worker. Each request renders a new body into a heap buffer that libmicrohttpd frees
 * once sent.
 *
 * Why not libmicrohttpd's own thread: its limits alone let a few idle clients hold the endpoint.
 * Its connection timeout is an idle timeout (a client trickling a byte now and then keeps its
 * connection forever), its per-IP limit refuses the new connection rather than an old stuck one
 * (on loopback the scraper and the stuck client share an address), and stopping its thread waited
 * for idle connections. So this thread keeps a table of the connections (the notification
 * callbacks fill it) and enforces, on top of libmicrohttpd's limits:
 *   - a deadline for the whole request head (METRICS_HEAD_TIMEOUT_MS) and one for the response;
 *   - a pool of METRICS_MAX_CONNECTIONS, at most METRICS_PER_ADDR of them from one address; a new
 *     connection beyond either bound evicts the connection (of that address, or of any) that has
 *     waited longest for its request head, and is refused only when none is waiting;
 *   - a stop that closes every connection at once (MHD_stop_daemon() in this mode waits for none).
 * A connection is closed with shutdown(): libmicrohttpd, still owning the descriptor, then reads
 * the end of the stream and frees the connection on its next run (on this thread, so the
 * descriptor cannot have been reused meanwhile).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <stddef.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <poll.h>
#include <pthread.h>

#include "tern/common/buf.h"
#include "tern/common/clock.h"
#include "tern/common/dl.h"
#include "tern/common/err.h"
#include "tern/common/log.h"
#include "tern/conf/config.h"
#include "tern/metrics/metrics.h"
#include "tern/xfr/xfr.h"

/*
 * libmicrohttpd is loaded when the endpoint is first configured, not linked: it drags in GnuTLS
 * and its dependencies (p11-kit, nettle, gmp, libidn2, ...), about 2.4 MiB of PSS in every ternd
 * whether or not it serves metrics. The header still gives every prototype, so each call keeps
 * its exact type.
 */
#define MHD_FUNCS(X)                                                                               \
    X(MHD_start_daemon)                                                                            \
    X(MHD_stop_daemon)                                                                             \
    X(MHD_run)                                                                                     \
    X(MHD_get_timeout)                                                                             \
    X(MHD_get_daemon_info)                                                                         \
    X(MHD_get_connection_info)                                                                     \
    X(MHD_create_response_from_buffer)                                                             \
    X(MHD_add_response_header)                                                                     \
    X(MHD_queue_response)                                                                          \
    X(MHD_destroy_response)

static struct {
#define MHD_FIELD(f) __typeof__(&f) f;
    MHD_FUNCS(MHD_FIELD)
#undef MHD_FIELD
} mhd;
static pthread_once_t mhd_once = PTHREAD_ONCE_INIT;
static char mhd_error[256];

static void mhd_load(void)
{
    static const char *const names[] = {"libmicrohttpd.so.12", "libmicrohttpd.so"};
#define MHD_NAME(f) #f,
    static const char *const syms[] = {MHD_FUNCS(MHD_NAME)};
#undef MHD_NAME
    void *p[sizeof(syms) / sizeof(syms[0])];
    if (tern_dl_load(names, 2, syms, p, sizeof(syms) / sizeof(syms[0]), mhd_error,
                     sizeof(mhd_error)) < 0)
        return;
    size_t i = 0;
#define MHD_SET(f) memcpy(&mhd.f, &p[i++], sizeof(void *));
    MHD_FUNCS(MHD_SET)
#undef MHD_SET
}

/* A scraper needs one connection; 16 leave room for a few scrapers and a curl by hand, and cap
 * what a misbehaving local client can hold (each costs libmicrohttpd's 32 KiB memory pool). */
#define METRICS_MAX_CONNECTIONS 16u
/* Half the pool per address: one address (a stuck script, a flood) leaves the other half to
 * everyone else, and beyond it evicts only its own oldest waiting connection. */
#define METRICS_PER_ADDR (METRICS_MAX_CONNECTIONS / 2)
/* Evicted connections stay libmicrohttpd's until its next run reads their end: room for them
 * beside a full pool, so libmicrohttpd's own limit (which refuses without asking) is never the
 * one that decides. */
#define METRICS_SLOTS (2 * METRICS_MAX_CONNECTIONS)
/* A scraper sends its request head in one write as soon as it has connected: 5 s covers two
 * retransmissions of it on a lossy path and cuts a client that trickles its head. The wait for
 * the next request on a kept-alive connection is held to it as well. */
#define METRICS_HEAD_TIMEOUT_MS 5000
/* From the head to the last byte of the response: three times Prometheus' default scrape
 * timeout (10 s), by when the scraper has given up on it anyway. */
#define METRICS_RESPONSE_TIMEOUT_MS 30000
/* libmicrohttpd's idle timeout (no byte either way), behind the two deadlines above. */
#define METRICS_TIMEOUT_S 10u
/* First buffer: the fixed families take about 5 KiB; zones add ~100 bytes each and the buffer
 * doubles from here. */
#define BODY_INITIAL (16u * 1024)
/* 64 MiB is ~600,000 zones; past it something is wrong and a 500 is better than any size. */
#define BODY_MAX (64u * 1024 * 1024)

#define CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"

/* One connection libmicrohttpd holds. */
typedef struct mconn {
    struct MHD_Connection *conn; /* NULL: a free slot */
    int fd;
    struct sockaddr_storage addr; /* the client's (its port is ignored when comparing) */
    int64_t deadline;             /* monotonic ms: end of the head, or of the response */
    bool in_request;              /* the head is in; the response is not all sent yet */
    bool evicted;                 /* shut down; libmicrohttpd frees it on its next run */
} mconn_t;

struct metrics {
    struct MHD_Daemon *daemon;
    pthread_t thread;
    int evfd;                     /* metrics_stop() writes it */
    int epfd;                     /* libmicrohttpd's epoll descriptor */
    mconn_t conns[METRICS_SLOTS]; /* touched only on the serving thread */
    loader_t *loader;
    const server_t *server;
    xfr_t *xfr; /* zone transfers, or NULL */
    uint16_t port;
    int64_t start_time;  /* wall clock, s since the epoch */
    atomic_bool serving; /* set once started: libmicrohttpd's messages are then per client */
};

/* ---- body buffer ---------------------------------------------------------------------------- */

typedef tern_buf_t buf_t;

/* A new body that may grow to BODY_MAX. */
static void buf_init(buf_t *b)
{
    tern_buf_init(b, BODY_MAX);
    (void)tern_buf_reserve(b, BODY_INITIAL);
}

#define put       tern_buf_printf
#define put_bytes tern_buf_append

/* A label value as the exposition format wants it: backslash, double quote and newline escaped. */
static void put_label_value(buf_t *b, const char *v)
{
    size_t n = strlen(v);
    if (!tern_buf_reserve(b, 2 * n))
        return;
    char *o = b->p + b->len;
    for (size_t i = 0; i < n; i++) {
        if (v[i] == '\\' || v[i] == '"') {
            *o++ = '\\';
            *o++ = v[i];
        } else if (v[i] == '\n') {
            *o++ = '\\';
            *o++ = 'n';
        } else {
            *o++ = v[i];
        }
    }
    *o = '\0';
    b->len = (size_t)(o - b->p);
}

/* ---- exposition ----------------------------------------------------------------------------- */

static void family(buf_t *b, const char *name, const char *type, const char *help)
{
    put(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void sample(buf_t *b, const char *name, uint64_t v)
{
    put(b, "%s %" PRIu64 "\n", name, v);
}

/* name{key="value"} v, the value escaped. */
static void sample_label(buf_t *b, const char *name, const char *key, const char *value, uint64_t v)
{
    put(b, "%s{%s=\"", name, key);
    put_label_value(b, value);
    put(b, "\"} %" PRIu64 "\n", v);
}

typedef struct zone_lines {
    buf_t *serial; /* the body: tern_zone_serial goes straight in */
    buf_t records; /* tern_zone_records, appended after (a family's lines must be together) */
} zone_lines_t;

static void on_zone(void *ctx, const loader_zone_info_t *z)
{
    zone_lines_t *zl = ctx;
    sample_label(zl->serial, "tern_zone_serial", "zone", z->origin, z->serial);
    sample_label(&zl->records, "tern_zone_records", "zone", z->origin, z->records);
}

/* Workers and queries: by transport, worker, type; responses by rcode; drops and hand-offs. */
static void render_queries(buf_t *b, const server_t *s, const server_stats_t *st)
{
    family(b, "tern_workers", "gauge", "Worker threads answering queries.");
    sample(b, "tern_workers", server_workers(s));

    family(b, "tern_queries_total", "counter",
           "DNS messages handed to the answer path, by transport (dropped ones included).");
    sample_label(b, "tern_queries_total", "transport", "udp", st->queries_udp);
    sample_label(b, "tern_queries_total", "transport", "tcp", st->queries_tcp);

    /* how the queries spread over the workers (udp_steering) */
    family(b, "tern_worker_queries_total", "counter",
           "DNS messages each worker handed to the answer path (UDP and TCP).");
    for (unsigned w = 0; w < server_workers(s); w++) {
        server_stats_t ws;
        server_worker_stats(s, w, &ws);
        char id[16];
        snprintf(id, sizeof(id), "%u", w);
        sample_label(b, "tern_worker_queries_total", "worker", id, ws.queries_udp + ws.queries_tcp);
    }

    family(b, "tern_queries_by_type_total", "counter",
           "Answered queries by question type (axfr counts AXFR and IXFR).");
    for (unsigned i = 0; i < SERVER_QTYPE_COUNT; i++)
        sample_label(b, "tern_queries_by_type_total", "qtype", server_qtype_name(i), st->qtype[i]);

    family(b, "tern_responses_total", "counter", "Responses by rcode.");
    for (unsigned i = 0; i < SERVER_RCODE_COUNT; i++)
        sample_label(b, "tern_responses_total", "rcode", server_rcode_name(i), st->rcode[i]);

    family(b, "tern_responses_truncated_total", "counter", "Responses sent with TC set.");
    sample(b, "tern_responses_truncated_total", st->truncated);

    family(b, "tern_dropped_total", "counter",
           "Messages dropped without a response: shorter than a DNS header, with QR set, or "
           "for the transfer thread while its queue was full.");
    sample_label(b, "tern_dropped_total", "reason", "short", st->dropped_short);
    sample_label(b, "tern_dropped_total", "reason", "qr", st->dropped_qr);
    sample_label(b, "tern_dropped_total", "reason", "xfr_busy", st->handoff_full);

    family(b, "tern_xfr_handoffs_total", "counter",
           "Requests handed to the transfer thread: AXFR/IXFR, NOTIFY, TSIG-signed.");
    sample(b, "tern_xfr_handoffs_total", st->handed_off);
}

/* UDP datagrams and TCP connections. */
static void render_transport(buf_t *b, const server_stats_t *st)
{
    family(b, "tern_udp_received_total", "counter", "UDP datagrams received.");
    sample(b, "tern_udp_received_total", st->udp_received);
    family(b, "tern_udp_sent_total", "counter", "UDP responses the kernel accepted.");
    sample(b, "tern_udp_sent_total", st->udp_sent);
    family(b, "tern_udp_dropped_total", "counter",
           "UDP datagrams not answered: truncated on receipt, no answer, or a failed send.");
    sample(b, "tern_udp_dropped_total", st->udp_dropped);

    family(b, "tern_tcp_connections_total", "counter",
           "TCP connections: accepted, refused at the connection limit, and closed by cause "
           "(idle timeout, peer not reading, bad message, lifetime, peer close).");
    static const struct {
        const char *event;
        size_t offset;
    } tcp[] = {
        {"accepted", offsetof(server_stats_t, tcp_accepted)},
        {"refused", offsetof(server_stats_t, tcp_refused)},
        {"closed_idle", offsetof(server_stats_t, tcp_closed_idle)},
        {"closed_full", offsetof(server_stats_t, tcp_closed_full)},
        {"closed_bad", offsetof(server_stats_t, tcp_closed_bad)},
        {"closed_lifetime", offsetof(server_stats_t, tcp_closed_life)},
        {"closed_peer", offsetof(server_stats_t, tcp_closed_peer)},
        {"handed_off", offsetof(server_stats_t, tcp_handed_off)},
    };
    for (size_t i = 0; i < TERN_ARRAY_SIZE(tcp); i++) {
        uint64_t v;
        memcpy(&v, (const char *)st + tcp[i].offset, sizeof(v));
        sample_label(b, "tern_tcp_connections_total", "event", tcp[i].event, v);
    }
    family(b, "tern_tcp_accept_paused_total", "counter",
           "Times accept() ran out of descriptors or memory and a listener paused for 100 ms.");
    sample(b, "tern_tcp_accept_paused_total", st->tcp_accept_paused);
}

/* EDNS options seen, health fail-open, and what the limits (ACL, rate limit, RRL, cookies, the
 * TCP pool) refused, dropped or closed. */
static void render_limits(buf_t *b, const server_stats_t *st)
{
    family(b, "tern_edns_queries_total", "counter", "Queries with an EDNS OPT record.");
    sample(b, "tern_edns_queries_total", st->edns);
    family(b, "tern_ecs_queries_total", "counter", "Queries with an EDNS Client Subnet option.");
    sample(b, "tern_ecs_queries_total", st->ecs);
    family(b, "tern_health_fail_open_total", "counter",
           "Health-checked RRsets answered whole because every record was down (fail open).");
    sample(b, "tern_health_fail_open_total", st->health_fail_open);

    static const char *const why[6] = {"other", "acl", "zone_acl", "blacklist", "ratelimit", "rrl"};
    family(b, "tern_limited_total", "counter",
           "Queries refused or dropped by an ACL, redins' blacklist or rate limit, or RRL "
           "(slipped: RRL sent them truncated).");
    for (unsigned i = 1; i < 6; i++) {
        if (i != 5) /* RRL never refuses */
            put(b, "tern_limited_total{rule=\"%s\",action=\"refused\"} %" PRIu64 "\n", why[i],
                st->policy_refused[i]);
        put(b, "tern_limited_total{rule=\"%s\",action=\"dropped\"} %" PRIu64 "\n", why[i],
            st->policy_dropped[i]);
    }
    put(b, "tern_limited_total{rule=\"rrl\",action=\"slipped\"} %" PRIu64 "\n", st->rrl_slipped);
    family(b, "tern_cookies_total", "counter",
           "Queries with a DNS COOKIE option, by what their server cookie was.");
    sample_label(b, "tern_cookies_total", "server_cookie", "valid", st->cookies_valid);
    sample_label(b, "tern_cookies_total", "server_cookie", "none_or_bad",
                 st->cookies - st->cookies_valid);
    family(b, "tern_badcookie_total", "counter", "Responses with rcode BADCOOKIE.");
    sample(b, "tern_badcookie_total", st->badcookie);
    family(b, "tern_tcp_client_capped_total", "counter",
           "TCP connections closed at once: their client prefix held tcp_max_per_client.");
    sample(b, "tern_tcp_client_capped_total", st->tcp_client_capped);
    family(b, "tern_tcp_evicted_total", "counter",
           "TCP connections closed to make room for a new one in a full pool: idle ones, "
           "or one stalled for a second.");
    sample(b, "tern_tcp_evicted_total", st->tcp_evicted);
}

/* The workers' per-query DNSSEC signing. */
static void render_dnssec_workers(buf_t *b, const server_t *s)
{
    dnssec_worker_stats_t ds;
    server_dnssec_stats(s, &ds);
    family(b, "tern_dnssec_cache_total", "counter",
           "Per-query DNSSEC signatures (steered subsets, wildcard and DNAME synthesis, denial) "
           "by whether the worker's cache had them.");
    sample_label(b, "tern_dnssec_cache_total", "result", "hit", ds.hits);
    sample_label(b, "tern_dnssec_cache_total", "result", "miss", ds.misses);
    family(b, "tern_dnssec_signatures_total", "counter",
           "Signatures made by the workers per query (cache misses that were signed).");
    sample(b, "tern_dnssec_signatures_total", ds.sigs);
    family(b, "tern_dnssec_sign_seconds_total", "counter",
           "Time the workers spent making those signatures.");
    put(b, "tern_dnssec_sign_seconds_total %.6f\n", (double)ds.sign_ns / 1e9);
    family(b, "tern_dnssec_sign_failures_total", "counter",
           "Per-query signatures that could not be made: the RRset went unsigned.");
    sample(b, "tern_dnssec_sign_failures_total", ds.fails);
}

static void render_server(buf_t *b, const server_t *s)
{
    server_stats_t st;
    server_stats(s, &st);
    render_queries(b, s, &st);
    render_transport(b, &st);
    render_limits(b, &st);
    render_dnssec_workers(b, s);
}

static void render_loader(buf_t *b, loader_t *l)
{
    loader_stats_t st;
    loader_get_stats(l, &st);

    family(b, "tern_reloads_total", "counter",
           "Reloads by result (ok: published; failed: the previous data kept serving).");
    sample_label(b, "tern_reloads_total", "result", "ok", st.reloads_ok);
    sample_label(b, "tern_reloads_total", "result", "failed", st.reloads_failed);

    /* No sample before the first reload: the initial load is not one, and a made-up 0 would
     * read as a failure (success) or as an instant reload (duration). */
    bool reloaded = st.last_duration_ms >= 0;
    family(b, "tern_last_reload_duration_seconds", "gauge",
           "Duration of the last reload, successful or not.");
    if (reloaded)
        put(b, "tern_last_reload_duration_seconds %" PRId64 ".%03" PRId64 "\n",
            st.last_duration_ms / 1000, st.last_duration_ms % 1000);
    family(b, "tern_last_reload_success", "gauge", "1 if the last reload was published, else 0.");
    if (reloaded)
        sample(b, "tern_last_reload_success", st.last_ok ? 1 : 0);
    family(b, "tern_last_reload_timestamp_seconds", "gauge",
           "When the last reload finished, in seconds since the epoch.");
    if (reloaded)
        put(b, "tern_last_reload_timestamp_seconds %" PRId64 "\n", st.last_time);

    /* the Redis source: only when one is configured */
    if (st.redis_enabled) {
        family(b, "tern_redis_up", "gauge", "1 while connected to the Redis zone source.");
        sample(b, "tern_redis_up", st.redis_connected ? 1 : 0);
        family(b, "tern_redis_zones", "gauge",
               "Zones in the Redis set at the last read, by state (rejected: invalid data, the "
               "previous version keeps serving; skipped: beyond max_zones, not read).");
        sample_label(b, "tern_redis_zones", "state", "ok", st.redis_zones - st.redis_failed);
        sample_label(b, "tern_redis_zones", "state", "rejected", st.redis_failed);
        sample_label(b, "tern_redis_zones", "state", "skipped", st.redis_zones_skipped);
        family(b, "tern_redis_labels_skipped_total", "counter",
               "Labels skipped in Redis zone builds (bad data or a bound), per build.");
        sample(b, "tern_redis_labels_skipped_total", st.redis_labels_skipped);
        family(b, "tern_redis_limit_breaches_total", "counter",
               "Breaches of the bounds on Redis data, each counted once when logged, by bound.");
        sample_label(b, "tern_redis_limit_breaches_total", "limit", "max_value_bytes",
                     st.redis_over_value_bytes);
        sample_label(b, "tern_redis_limit_breaches_total", "limit", "max_labels",
                     st.redis_over_labels);
        sample_label(b, "tern_redis_limit_breaches_total", "limit", "max_rrset_records",
                     st.redis_over_rrset_records);
        family(b, "tern_redis_publishes_total", "counter",
               "Views published for Redis changes (between reloads).");
        sample(b, "tern_redis_publishes_total", st.redis_publishes);
    }

    /* Both per-zone families from one pass under the loader's lock, so they list the same
     * zones even if a reload publishes right after; tern_zones is that pass's count. */
    zone_lines_t zl = {.serial = b};
    buf_init(&zl.records);
    family(b, "tern_zone_serial", "gauge", "SOA serial of each served zone.");
    size_t n = loader_zones(l, on_zone, &zl);
    family(b, "tern_zones", "gauge", "Zones served.");
    sample(b, "tern_zones", n);
    family(b, "tern_zone_records", "gauge", "Records in each served zone.");
    if (zl.records.failed)
        b->failed = true;
    put_bytes(b, zl.records.p ? zl.records.p : "", zl.records.len);
    tern_buf_free(&zl.records);
}

/* ---- health checks ---------------------------------------------------------------------- */

/* One per-endpoint family: which value of each endpoint it shows. */
typedef enum { HF_UP, HF_STATUS, HF_CHECKS, HF_FAILURES, HF_LATENCY } health_field_t;

struct health_pass {
    buf_t *b;
    const char *name;
    health_field_t field;
    size_t by_rank[4];
};

static void health_sample(void *ctx, const health_ep_info_t *i)
{
    struct health_pass *h = ctx;
    const health_spec_t *s = i->spec;
    char ip[INET6_ADDRSTRLEN], ep[INET6_ADDRSTRLEN + 8];
    inet_ntop(s->family == 6 ? AF_INET6 : AF_INET, s->addr, ip, sizeof(ip));
    snprintf(ep, sizeof(ep), s->family == 6 ? "[%s]:%u" : "%s:%u", ip, s->port);
    put(h->b, "%s{endpoint=\"", h->name);
    put_label_value(h->b, s->proto == HEALTH_ICMP ? ip : ep);
    put(h->b, "\",protocol=\"%s\",host=\"", health_proto_name(s->proto));
    put_label_value(h->b, s->host ? s->host : "");
    switch (h->field) {
    case HF_UP:
        put(h->b, "\"} %d\n", i->rank == HEALTH_RANK_UP);
        break;
    case HF_STATUS:
        put(h->b, "\"} %d\n", i->status);
        break;
    case HF_CHECKS:
        put(h->b, "\"} %" PRIu64 "\n", i->checks);
        break;
    case HF_FAILURES:
        put(h->b, "\"} %" PRIu64 "\n", i->failures);
        break;
    case HF_LATENCY:
        put(h->b, "\"} %u.%06u\n", i->latency_us / 1000000, i->latency_us % 1000000);
        break;
    }
}

static void health_count(void *ctx, const health_ep_info_t *i)
{
    struct health_pass *h = ctx;
    h->by_rank[i->rank & 3]++;
}

/* Only once there are endpoints: a server without health checks shows none of this. */
static void render_health(buf_t *b, loader_t *l)
{
    health_registry_t *r = loader_health(l);
    struct health_pass h = {.b = b};
    if (!r || health_each(r, health_count, &h) == 0)
        return;
    family(b, "tern_health_endpoints", "gauge",
           "Health-checked endpoints by state (between: failing or recovering, still ranked).");
    sample_label(b, "tern_health_endpoints", "state", "up", h.by_rank[HEALTH_RANK_UP]);
    sample_label(b, "tern_health_endpoints", "state", "between",
                 h.by_rank[HEALTH_RANK_MIDDLE] + h.by_rank[HEALTH_RANK_NEAR]);
    sample_label(b, "tern_health_endpoints", "state", "down", h.by_rank[HEALTH_RANK_DOWN]);
    static const struct {
        const char *name, *type, *help;
        health_field_t field;
    } fams[] = {
        {"tern_health_endpoint_up", "gauge", "1 when the endpoint is up (or forced up), else 0.",
         HF_UP},
        {"tern_health_endpoint_status", "gauge",
         "The endpoint's counter, from down_count (negative) to up_count.", HF_STATUS},
        {"tern_health_endpoint_checks_total", "counter", "Checks this node made of the endpoint.",
         HF_CHECKS},
        {"tern_health_endpoint_failures_total", "counter", "Of those, the ones that failed.",
         HF_FAILURES},
        {"tern_health_endpoint_latency_seconds", "gauge", "How long the last own check took.",
         HF_LATENCY},
    };
    for (size_t i = 0; i < TERN_ARRAY_SIZE(fams); i++) {
        family(b, fams[i].name, fams[i].type, fams[i].help);
        h.name = fams[i].name;
        h.field = fams[i].field;
        (void)health_each(r, health_sample, &h);
    }
    health_checker_stats_t st;
    if (!loader_health_stats(l, &st))
        return;
    family(b, "tern_health_checks_total", "counter",
           "Checks this node made, by result (adopted: results of other nodes read from Redis).");
    sample_label(b, "tern_health_checks_total", "result", "ok", st.checks - st.failures);
    sample_label(b, "tern_health_checks_total", "result", "failed", st.failures);
    sample_label(b, "tern_health_checks_total", "result", "adopted", st.adopted);
    family(b, "tern_health_checks_in_flight", "gauge", "Checks running now.");
    sample(b, "tern_health_checks_in_flight", st.in_flight);
    if (st.redis_enabled) {
        family(b, "tern_health_redis_up", "gauge",
               "1 while connected to the Redis that shares health state.");
        sample(b, "tern_health_redis_up", st.redis_connected ? 1 : 0);
        family(b, "tern_health_redis_errors_total", "counter",
               "Redis commands or connections for health state that failed.");
        sample(b, "tern_health_redis_errors_total", st.redis_errors);
    }
    family(b, "tern_health_log_dropped_total", "counter",
           "Health result log lines dropped: its reader did not take them, or a write failed.");
    sample(b, "tern_health_log_dropped_total", st.log_dropped);
}

/* A family of one unlabelled sample each, in order. */
typedef struct single {
    const char *name, *type, *help;
    uint64_t value;
} single_t;

static void singles(buf_t *b, const single_t *m, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        family(b, m[i].name, m[i].type, m[i].help);
        sample(b, m[i].name, m[i].value);
    }
}

/* The ANAME resolver, once some zone has a target outside the served zones. */
static void render_aname(buf_t *b, loader_t *l)
{
    aname_stats_t st;
    if (!loader_aname_stats(l, &st))
        return;
    const single_t m[] = {
        {"tern_aname_targets", "gauge",
         "ANAME targets outside the served zones, resolved through the upstreams.", st.targets},
        {"tern_aname_pending", "gauge",
         "Of those, targets never answered yet (their owners answer SERVFAIL).", st.pending},
        {"tern_aname_queries_total", "counter", "Queries sent to the upstreams.", st.queries},
        {"tern_aname_failures_total", "counter",
         "Resolutions no upstream answered (the last good answer stays).", st.failures},
        {"tern_aname_changes_total", "counter", "Resolutions that changed what clients see.",
         st.changes},
    };
    singles(b, m, TERN_ARRAY_SIZE(m));
}

/* Zone transfers (tern/xfr/xfr.h). */
static void render_xfr(buf_t *b, xfr_t *x)
{
    if (!x)
        return;
    xfr_stats_t st;
    xfr_get_stats(x, &st);
    const single_t m[] = {
        {"tern_xfr_out_axfr_total", "counter",
         "Whole-zone transfers sent (AXFR, or IXFR AXFR-style).", st.out_axfr},
        {"tern_xfr_out_ixfr_total", "counter",
         "Incremental transfers sent (IXFR from the journal).", st.out_ixfr},
        {"tern_xfr_out_refused_total", "counter",
         "Transfer requests refused (allow_transfer, transfer_key).", st.out_refused},
        {"tern_xfr_out_failed_total", "counter", "Transfers out the client broke off.",
         st.out_failed},
        {"tern_xfr_notify_sent_total", "counter", "NOTIFY messages sent to secondaries.",
         st.notify_sent},
        {"tern_xfr_notify_acked_total", "counter", "NOTIFY messages a secondary answered.",
         st.notify_acked},
        {"tern_xfr_notify_failed_total", "counter", "Changes a secondary never acknowledged.",
         st.notify_failed},
        {"tern_xfr_notify_received_total", "counter", "NOTIFY messages received.",
         st.notify_received},
        {"tern_xfr_in_ok_total", "counter", "Secondary zones transferred in.", st.in_ok},
        {"tern_xfr_in_up_to_date_total", "counter", "Refreshes that found the zone current.",
         st.in_up_to_date},
        {"tern_xfr_in_failed_total", "counter", "Refreshes or transfers in that failed.",
         st.in_failed},
        {"tern_xfr_tsig_bad_total", "counter", "Requests whose TSIG did not verify.", st.tsig_bad},
        {"tern_xfr_out_conn_evicted_total", "counter",
         "Transfer connections closed to make room in a full pool (idle, or stalled 2 s).",
         st.out_conn_evicted},
        {"tern_xfr_out_conn_refused_total", "counter",
         "Transfer connections refused: the pool was full of busy ones, or the address held 8.",
         st.out_conn_refused},
    };
    singles(b, m, TERN_ARRAY_SIZE(m));
}

/* The query log, when configured. */
static void render_qlog(buf_t *b, const server_t *srv)
{
    qlog_stats_t st;
    if (!server_qlog_stats(srv, &st))
        return;
    const single_t m[] = {
        {"tern_qlog_records_total", "counter",
         "Queries the workers logged (after sampling and zone exclusions).", st.records},
        {"tern_qlog_dropped_total", "counter",
         "Records a worker's full ring refused (the writer or a sink fell behind).", st.dropped},
        {"tern_qlog_dnstap_written_total", "counter", "dnstap messages the reader got.",
         st.written},
        {"tern_qlog_dnstap_dropped_total", "counter",
         "dnstap messages lost: Frame Streams' queue full, or no reader connected.", st.sink_drops},
        {"tern_qlog_dnstap_reconnects_total", "counter",
         "Connections to the dnstap socket after the first.", st.reconnects},
        {"tern_qlog_requests_lines_total", "counter", "Request-log lines written.", st.lines},
        {"tern_qlog_requests_errors_total", "counter", "Request-log writes that failed.",
         st.line_errors},
        {"tern_qlog_requests_dropped_total", "counter",
         "Request-log lines dropped: the reader (a pipe, FIFO or socket) did not take them.",
         st.line_drops},
    };
    singles(b, m, TERN_ARRAY_SIZE(m));
}

static void render(buf_t *b, const metrics_t *m)
{
    family(b, "tern_build_info", "gauge", "Always 1; the version is in the label.");
    sample_label(b, "tern_build_info", "version", TERN_VERSION, 1);
    family(b, "tern_start_time_seconds", "gauge",
           "When ternd started, in seconds since the epoch.");
    put(b, "tern_start_time_seconds %" PRId64 "\n", m->start_time);
    render_server(b, m->server);
    render_loader(b, m->loader);
    render_health(b, m->loader);
    render_aname(b, m->loader);
    render_qlog(b, m->server);
    family(b, "tern_log_dropped_total", "counter",
           "Server log lines dropped: stdout or stderr (a pipe, the journal) did not take them.");
    sample(b, "tern_log_dropped_total", log_dropped_lines());
    render_xfr(b, __atomic_load_n(&m->xfr, __ATOMIC_ACQUIRE));
}

/* ---- connections ----------------------------------------------------------------------------
 * All of this runs on the serving thread (libmicrohttpd's callbacks and the loop), so the table
 * needs no lock. */

static mconn_t *conn_slot(struct MHD_Connection *c)
{
    const union MHD_ConnectionInfo *i =
        mhd.MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return i ? i->socket_context : NULL;
}

/* on_request(): the request head is complete; the response deadline starts. */
static void conn_head_in(struct MHD_Connection *c)
{
    mconn_t *k = conn_slot(c);
    if (!k || k->in_request)
        return;
    k->in_request = true;
    k->deadline = tern_monotonic_ms() + METRICS_RESPONSE_TIMEOUT_MS;
}

/* MHD_OPTION_NOTIFY_COMPLETED: the response is sent (or the request failed); a kept-alive
 * connection waits for its next head under the head deadline again. */
static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
    (void)cls, (void)con_cls, (void)toe;
    mconn_t *k = conn_slot(c);
    if (!k)
        return;
    k->in_request = false;
    k->deadline = tern_monotonic_ms() + METRICS_HEAD_TIMEOUT_MS;
}

static bool same_addr(const struct sockaddr_storage *a, const struct sockaddr *b)
{
    if (a->ss_family != b->sa_family)
        return false;
    if (a->ss_family == AF_INET)
        return ((const struct sockaddr_in *)a)->sin_addr.s_addr ==
               ((const struct sockaddr_in *)b)->sin_addr.s_addr;
    return memcmp(&((const struct sockaddr_in6 *)a)->sin6_addr,
                  &((const struct sockaddr_in6 *)b)->sin6_addr, sizeof(struct in6_addr)) == 0;
}

/* Close k: libmicrohttpd sees the end of the stream on its next run and frees it. */
static void conn_evict(mconn_t *k, const char *why)
{
    log_debug("metrics: closing a connection: %s", why);
    (void)shutdown(k->fd, SHUT_RDWR);
    k->evicted = true;
}

/* Evict the connection (from addr, or from anyone when addr is NULL) that has waited longest for
 * its request head. false when every such connection is in a request. */
static bool evict_oldest_waiting(metrics_t *m, const struct sockaddr *addr, const char *why)
{
    mconn_t *old = NULL;
    for (unsigned i = 0; i < METRICS_SLOTS; i++) {
        mconn_t *k = &m->conns[i];
        if (!k->conn || k->evicted || k->in_request || (addr && !same_addr(&k->addr, addr)))
            continue;
        if (!old || k->deadline < old->deadline)
            old = k;
    }
    if (!old)
        return false;
    conn_evict(old, why);
    return true;
}

/* The accept policy callback (MHD_start_daemon()'s apc): admit a new connection, making room
 * by eviction. */
static enum MHD_Result on_accept(void *cls, const struct sockaddr *addr, socklen_t len)
{
    metrics_t *m = cls;
    (void)len;
    unsigned live = 0, from_addr = 0;
    for (unsigned i = 0; i < METRICS_SLOTS; i++) {
        const mconn_t *k = &m->conns[i];
        if (!k->conn || k->evicted)
            continue;
        live++;
        from_addr += same_addr(&k->addr, addr);
    }
    if (from_addr >= METRICS_PER_ADDR &&
        !evict_oldest_waiting(m, addr, "its address is at the per-address limit"))
        return MHD_NO;
    else if (from_addr < METRICS_PER_ADDR && live >= METRICS_MAX_CONNECTIONS &&
             !evict_oldest_waiting(m, NULL, "the pool is full"))
        return MHD_NO;
    return MHD_YES;
}

/* MHD_OPTION_NOTIFY_CONNECTION: keep the table in step with libmicrohttpd's connections. */
static void on_connection(void *cls, struct MHD_Connection *c, void **socket_context,
                          enum MHD_ConnectionNotificationCode toe)
{
    metrics_t *m = cls;
    if (toe == MHD_CONNECTION_NOTIFY_CLOSED) {
        mconn_t *k = *socket_context;
        if (k)
            memset(k, 0, sizeof(*k));
        *socket_context = NULL;
        return;
    }
    const union MHD_ConnectionInfo *fd =
        mhd.MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    const union MHD_ConnectionInfo *addr =
        mhd.MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    mconn_t *k = NULL;
    for (unsigned i = 0; i < METRICS_SLOTS && !k; i++)
        if (!m->conns[i].conn)
            k = &m->conns[i];
    if (!fd || !addr || !k) { /* no slot: cannot happen with METRICS_SLOTS as the MHD limit */
        if (fd)
            (void)shutdown(fd->connect_fd, SHUT_RDWR);
        return;
    }
    *k = (mconn_t){
        .conn = c, .fd = fd->connect_fd, .deadline = tern_monotonic_ms() + METRICS_HEAD_TIMEOUT_MS};
    memcpy(&k->addr, addr->client_addr,
           addr->client_addr->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6)
                                                    : sizeof(struct sockaddr_in));
    *socket_context = k;
}

/* Close the connections past their deadline; the next deadline (INT64_MAX if none). */
static int64_t sweep(metrics_t *m, int64_t now)
{
    int64_t next = INT64_MAX;
    for (unsigned i = 0; i < METRICS_SLOTS; i++) {
        mconn_t *k = &m->conns[i];
        if (!k->conn || k->evicted)
            continue;
        if (k->deadline <= now)
            conn_evict(k, k->in_request ? "response past its deadline"
                                        : "no complete request head in time");
        else if (k->deadline < next)
            next = k->deadline;
    }
    return next;
}

/* The serving thread: libmicrohttpd's descriptors and deadlines, ours, and the stop eventfd. */
static void *metrics_main(void *arg)
{
    metrics_t *m = arg;
    /* one libmicrohttpd run per pass; ends when metrics_stop() writes the eventfd */
    for (;;) {
        int64_t now = tern_monotonic_ms();
        int64_t next = sweep(m, now);
        MHD_UNSIGNED_LONG_LONG mhd_ms;
        int64_t wait = next == INT64_MAX ? -1 : next - now;
        if (mhd.MHD_get_timeout(m->daemon, &mhd_ms) == MHD_YES &&
            (wait < 0 || (MHD_UNSIGNED_LONG_LONG)wait > mhd_ms))
            wait = (int64_t)mhd_ms;
        if (wait > INT32_MAX)
            wait = INT32_MAX;
        struct pollfd p[2] = {{.fd = m->epfd, .events = POLLIN}, {.fd = m->evfd, .events = POLLIN}};
        if (poll(p, 2, (int)wait) < 0 && errno != EINTR) {
            log_err("metrics: poll: %s", strerror(errno));
            break;
        }
        if (p[1].revents)
            break;
        (void)mhd.MHD_run(m->daemon);
    }
    return NULL;
}

/* ---- HTTP ----------------------------------------------------------------------------------- */

/* A short static text answer (404, 405, 500). */
static enum MHD_Result answer_text(struct MHD_Connection *c, unsigned status, const char *text,
                                   const char *allow)
{
    struct MHD_Response *r =
        mhd.MHD_create_response_from_buffer(strlen(text), (void *)text, MHD_RESPMEM_PERSISTENT);
    if (!r)
        return MHD_NO;
    enum MHD_Result ok =
        mhd.MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "text/plain; charset=utf-8");
    if (ok == MHD_YES && allow)
        ok = mhd.MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, allow);
    if (ok == MHD_YES)
        ok = mhd.MHD_queue_response(c, status, r);
    mhd.MHD_destroy_response(r);
    return ok;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version, const char *upload_data,
                                  size_t *upload_data_size, void **con_cls)
{
    static int request_seen; /* its address marks a request whose headers we have seen */
    const metrics_t *m = cls;
    (void)version;
    (void)upload_data;
    conn_head_in(c);

    /* Other methods are answered on the first call, before any body is read: libmicrohttpd then
     * closes the connection instead of reading a body nobody wants. */
    if (strcmp(method, MHD_HTTP_METHOD_GET) != 0 && strcmp(method, MHD_HTTP_METHOD_HEAD) != 0)
        return answer_text(c, MHD_HTTP_METHOD_NOT_ALLOWED, "method not allowed\n", "GET, HEAD");
    /* GET and HEAD are answered on a later call, once the request is complete: a response
     * queued on the first call ends the connection, and scrapers keep theirs alive. */
    if (!*con_cls) {
        *con_cls = &request_seen;
        return MHD_YES;
    }
    if (*upload_data_size) {
        *upload_data_size = 0; /* a GET with a body: ignored */
        return MHD_YES;
    }
    if (strcmp(url, "/metrics") != 0)
        return answer_text(c, MHD_HTTP_NOT_FOUND, "not found; try /metrics\n", NULL);

    buf_t b;
    buf_init(&b);
    render(&b, m);
    if (b.failed || !b.p) {
        tern_buf_free(&b);
        log_warn("metrics: cannot render the exposition (out of memory or over %u bytes)",
                 BODY_MAX);
        return answer_text(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "cannot render metrics\n", NULL);
    }
    struct MHD_Response *r = mhd.MHD_create_response_from_buffer(b.len, b.p, MHD_RESPMEM_MUST_FREE);
    if (!r) {
        tern_buf_free(&b);
        return MHD_NO;
    }
    enum MHD_Result ok = mhd.MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, CONTENT_TYPE);
    if (ok == MHD_YES)
        ok = mhd.MHD_queue_response(c, MHD_HTTP_OK, r);
    mhd.MHD_destroy_response(r);
    return ok;
}

/* libmicrohttpd's own messages into our log: at startup they say why it cannot serve (a
 * warning, followed by our error); once serving they are about single clients (a reset, a
 * malformed request, the connection limit), which must not flood the log: debug. */
static void mhd_log(void *cls, const char *fmt, va_list ap) TERN_PRINTF(2, 0);
static void mhd_log(void *cls, const char *fmt, va_list ap)
{
    const metrics_t *m = cls;
    char msg[512];
    int n = vsnprintf(msg, sizeof(msg), fmt, ap);
    if (n < 0)
        return;
    size_t len = strnlen(msg, sizeof(msg));
    if (len > 0 && msg[len - 1] == '\n')
        msg[len - 1] = '\0';
    log_msg(atomic_load(&m->serving) ? LOG_LVL_DEBUG : LOG_LVL_WARN, "metrics: %s", msg);
}

static bool is_loopback(const struct sockaddr_storage *ss)
{
    if (ss->ss_family == AF_INET) {
        const struct sockaddr_in *sa = (const struct sockaddr_in *)ss;
        return (ntohl(sa->sin_addr.s_addr) >> 24) == 127;
    }
    const struct sockaddr_in6 *sa = (const struct sockaddr_in6 *)ss;
    return IN6_IS_ADDR_LOOPBACK(&sa->sin6_addr);
}

metrics_t *metrics_start(const char *listen, loader_t *loader, const server_t *server)
{
    config_listen_t addr;
    if (!listen || config_parse_listen(&addr, listen) < 0) {
        log_err("metrics: bad address \"%s\" (want ADDR:PORT or [V6]:PORT)",
                listen ? listen : "(null)");
        return NULL;
    }
    pthread_once(&mhd_once, mhd_load);
    if (mhd_error[0]) {
        log_err("metrics: %s (package libmicrohttpd12)", mhd_error);
        return NULL;
    }
    metrics_t *m = calloc(1, sizeof(*m));
    if (!m) {
        log_err("metrics: out of memory");
        return NULL;
    }
    m->loader = loader;
    m->server = server;
    m->evfd = -1;
    atomic_init(&m->serving, false);
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    m->start_time = ts.tv_sec;

    /* no internal thread: metrics_main() runs libmicrohttpd (see the top of this file) */
    unsigned flags = MHD_USE_EPOLL | MHD_USE_ERROR_LOG;
    if (addr.addr.ss_family == AF_INET6)
        flags |= MHD_USE_IPv6; /* IPV6_V6ONLY: exactly this address, no IPv4 mapped */
    uint16_t port =
        ntohs(addr.addr.ss_family == AF_INET6 ? ((const struct sockaddr_in6 *)&addr.addr)->sin6_port
                                              : ((const struct sockaddr_in *)&addr.addr)->sin_port);
    /* The port argument is ignored when MHD_OPTION_SOCK_ADDR is given; pass it for clarity. */
    m->daemon = mhd.MHD_start_daemon(
        flags, port, on_accept, m, on_request, m,
        /* first, or libmicrohttpd writes to stderr about the options before it */
        MHD_OPTION_EXTERNAL_LOGGER, mhd_log, m, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&addr.addr,
        MHD_OPTION_CONNECTION_LIMIT, METRICS_SLOTS, MHD_OPTION_CONNECTION_TIMEOUT,
        METRICS_TIMEOUT_S, MHD_OPTION_NOTIFY_CONNECTION, on_connection, m,
        MHD_OPTION_NOTIFY_COMPLETED, on_completed, m, MHD_OPTION_END);
    if (!m->daemon) {
        log_err("metrics: cannot serve on %s", listen);
        goto fail;
    }
    atomic_store(&m->serving, true);
    const union MHD_DaemonInfo *info =
        mhd.MHD_get_daemon_info(m->daemon, MHD_DAEMON_INFO_BIND_PORT);
    m->port = info ? info->port : port;
    const union MHD_DaemonInfo *ep = mhd.MHD_get_daemon_info(m->daemon, MHD_DAEMON_INFO_EPOLL_FD);
    if (!ep || ep->epoll_fd < 0) {
        log_err("metrics: libmicrohttpd gives no epoll descriptor");
        goto fail;
    }
    m->epfd = ep->epoll_fd;
    if ((m->evfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) < 0) {
        log_err("metrics: eventfd: %s", strerror(errno));
        goto fail;
    }
    int e = pthread_create(&m->thread, NULL, metrics_main, m);
    if (e != 0) {
        log_err("metrics: cannot start its thread: %s", strerror(e));
        goto fail;
    }
    if (!is_loopback(&addr.addr))
        log_warn("metrics: %s is not a loopback address and the endpoint has no authentication",
                 listen);
    char host[INET6_ADDRSTRLEN] = "?";
    const void *a = addr.addr.ss_family == AF_INET6
                        ? (const void *)&((const struct sockaddr_in6 *)&addr.addr)->sin6_addr
                        : (const void *)&((const struct sockaddr_in *)&addr.addr)->sin_addr;
    inet_ntop(addr.addr.ss_family, a, host, sizeof(host));
    if (addr.addr.ss_family == AF_INET6)
        log_info("metrics: serving http://[%s]:%u/metrics", host, m->port);
    else
        log_info("metrics: serving http://%s:%u/metrics", host, m->port);
    return m;
fail:
    if (m->daemon)
        mhd.MHD_stop_daemon(m->daemon);
    if (m->evfd >= 0)
        close(m->evfd);
    free(m);
    return NULL;
}

uint16_t metrics_port(const metrics_t *m)
{
    return m->port;
}

void metrics_set_xfr(metrics_t *m, xfr_t *x)
{
    if (m)
        __atomic_store_n(&m->xfr, x, __ATOMIC_RELEASE);
}

void metrics_stop(metrics_t *m)
{
    if (!m)
        return;
    uint64_t one = 1;
    if (write(m->evfd, &one, sizeof(one)) != (ssize_t)sizeof(one))
        log_warn("metrics: eventfd write: %s", strerror(errno));
    pthread_join(m->thread, NULL);
    /* without an internal thread this closes every connection at once, waiting for none */
    mhd.MHD_stop_daemon(m->daemon);
    close(m->evfd);
    free(m);
}
