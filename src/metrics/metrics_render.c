/*
 * metrics_render.c — the exposition: every family of GET /metrics in the Prometheus text format
 * (0.0.4), rendered from what the workers, the loader, the health checker and the transfer
 * service report at that moment.
 *
 * Only reads: server_stats() sums the workers' counters without stopping anyone, the loader's
 * calls take its lock for as long as they copy. A family's lines stay together, as the format
 * wants: the per-zone families are gathered in one pass under the loader's lock.
 */
#include <arpa/inet.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "tern/common/err.h"
#include "tern/common/log.h"
#include "tern/metrics/metrics_render.h"
#include "tern/update/update.h"
#include "tern/update/update_msg.h"

/* First buffer: the fixed families take about 5 KiB; zones add ~100 bytes each and the buffer
 * doubles from here. */
#define BODY_INITIAL (16u * 1024)

/* ---- body buffer ---------------------------------------------------------------------------- */

typedef tern_buf_t buf_t;

/* A new body that may grow to METRICS_BODY_MAX. */
static void buf_init(buf_t *b)
{
    tern_buf_init(b, METRICS_BODY_MAX);
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
    buf_t bytes;   /* tern_zone_bytes, after those */
} zone_lines_t;

static void on_zone(void *ctx, const loader_zone_info_t *z)
{
    zone_lines_t *zl = ctx;
    sample_label(zl->serial, "tern_zone_serial", "zone", z->origin, z->serial);
    sample_label(&zl->records, "tern_zone_records", "zone", z->origin, z->records);
    sample_label(&zl->bytes, "tern_zone_bytes", "zone", z->origin, z->bytes);
}

/* Append a side buffer (a family gathered beside another) to the body and free it. */
static void put_side(buf_t *b, buf_t *side)
{
    if (side->failed)
        b->failed = true;
    put_bytes(b, side->p ? side->p : "", side->len);
    tern_buf_free(side);
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
    /* every stage a datagram can be lost at on the socket path, the kernel's first (as
     * tern_xdp_dropped_total does for AF_XDP) */
    family(b, "tern_udp_stage_dropped_total", "counter",
           "UDP datagrams lost, by stage: socket (the kernel dropped it at a full receive buffer "
           "before a worker saw it), truncated, answer (no reply: a drop by ACL, rate limit or "
           "RRL, not DNS), send (the kernel refused the reply). All but socket make up "
           "tern_udp_dropped_total.");
    sample_label(b, "tern_udp_stage_dropped_total", "stage", "socket", st->udp_socket_drops);
    sample_label(b, "tern_udp_stage_dropped_total", "stage", "truncated", st->udp_drop_truncated);
    sample_label(b, "tern_udp_stage_dropped_total", "stage", "answer", st->udp_drop_answer);
    sample_label(b, "tern_udp_stage_dropped_total", "stage", "send", st->udp_drop_send);

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
    family(b, "tern_tls_total", "counter",
           "DoT: handshakes finished, resumed, failed, timed out, refused at the handshake "
           "limits, and queries answered (its connections are in tern_tcp_connections_total).");
    static const struct {
        const char *event;
        size_t offset;
    } tls[] = {
        {"handshake", offsetof(server_stats_t, tls_handshakes)},
        {"resumed", offsetof(server_stats_t, tls_resumed)},
        {"handshake_failed", offsetof(server_stats_t, tls_handshake_failed)},
        {"handshake_timeout", offsetof(server_stats_t, tls_handshake_timeout)},
        {"handshake_refused", offsetof(server_stats_t, tls_handshake_refused)},
        {"query", offsetof(server_stats_t, tls_queries)},
    };
    for (size_t i = 0; i < TERN_ARRAY_SIZE(tls); i++) {
        uint64_t v;
        memcpy(&v, (const char *)st + tls[i].offset, sizeof(v));
        sample_label(b, "tern_tls_total", "event", tls[i].event, v);
    }
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

/* name{interface="…",queue="q"[,stage="…"]} v: one AF_XDP socket's sample. */
static void sample_queue(buf_t *b, const char *name, const server_xdp_queue_t *q, const char *stage,
                         uint64_t v)
{
    put(b, "%s{interface=\"", name);
    put_label_value(b, q->ifname);
    put(b, "\",queue=\"%" PRIu32 "\"", q->queue);
    if (stage)
        put(b, ",stage=\"%s\"", stage);
    put(b, "} %" PRIu64 "\n", v);
}

/* The AF_XDP sockets (xdp: listen:), summed and per receive queue: only when some are open, so
 * socket-only servers' output is unchanged. Each per-queue family walks the sockets again (a
 * family's samples must be together); a scrape costs a getsockopt() per socket and family. */
static void render_xdp(buf_t *b, const server_t *s)
{
    server_xdp_stats_t x;
    server_xdp_stats(s, &x);
    if (x.sockets == 0)
        return;
    family(b, "tern_xdp_rx_total", "counter", "Frames received on the AF_XDP sockets.");
    sample(b, "tern_xdp_rx_total", x.rx);
    family(b, "tern_xdp_tx_total", "counter", "Replies sent from the AF_XDP sockets.");
    sample(b, "tern_xdp_tx_total", x.tx);
    family(b, "tern_xdp_dropped_total", "counter",
           "AF_XDP frames without a reply, by stage: parse (not a UDP query to us), answer (the "
           "answer path sent none), tx_full (no room on the TX ring); the kernel's: rx_ring_full "
           "(the worker fell behind), fill_empty (no free buffer), kernel_other, invalid. "
           "fill_short counts refills of the fill ring that fell short.");
    for (unsigned d = 0; d < SERVER_XDP_DROP_COUNT; d++)
        sample_label(b, "tern_xdp_dropped_total", "stage", server_xdp_drop_name(d),
                     server_xdp_drop(&x, d));
    server_xdp_queue_t q;
    family(b, "tern_xdp_queue_rx_total", "counter",
           "Frames received, per AF_XDP socket (interface and receive queue).");
    for (size_t i = 0; server_xdp_queue(s, i, &q); i++)
        sample_queue(b, "tern_xdp_queue_rx_total", &q, NULL, q.c.rx);
    family(b, "tern_xdp_queue_tx_total", "counter", "Replies sent, per AF_XDP socket.");
    for (size_t i = 0; server_xdp_queue(s, i, &q); i++)
        sample_queue(b, "tern_xdp_queue_tx_total", &q, NULL, q.c.tx);
    family(b, "tern_xdp_queue_dropped_total", "counter",
           "tern_xdp_dropped_total per AF_XDP socket.");
    for (size_t i = 0; server_xdp_queue(s, i, &q); i++)
        for (unsigned d = 0; d < SERVER_XDP_DROP_COUNT; d++)
            sample_queue(b, "tern_xdp_queue_dropped_total", &q, server_xdp_drop_name(d),
                         server_xdp_drop(&q.c, d));
}

static void render_server(buf_t *b, const server_t *s)
{
    server_stats_t st;
    server_stats(s, &st);
    render_queries(b, s, &st);
    render_transport(b, &st);
    render_limits(b, &st);
    render_dnssec_workers(b, s);
    render_xdp(b, s);
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
    buf_init(&zl.bytes);
    family(b, "tern_zone_serial", "gauge", "SOA serial of each served zone.");
    size_t n = loader_zones(l, on_zone, &zl);
    family(b, "tern_zones", "gauge", "Zones served.");
    sample(b, "tern_zones", n);
    family(b, "tern_zone_records", "gauge", "Records in each served zone.");
    put_side(b, &zl.records);
    family(b, "tern_zone_bytes", "gauge", "Memory of each served zone's data, in bytes.");
    put_side(b, &zl.bytes);
}

/* The process' memory from /proc/self/statm (a read of procfs: it never waits on a device), in
 * every build — jemalloc's own statistics are not there under the sanitizers. */
static void render_memory(buf_t *b)
{
    FILE *f = fopen("/proc/self/statm", "re");
    unsigned long long size = 0, resident = 0;
    bool ok = f && fscanf(f, "%llu %llu", &size, &resident) == 2;
    if (f)
        fclose(f);
    long page = sysconf(_SC_PAGESIZE);
    if (!ok || page <= 0)
        return;
    family(b, "tern_resident_memory_bytes", "gauge", "Resident memory of the ternd process.");
    sample(b, "tern_resident_memory_bytes", resident * (uint64_t)page);
    family(b, "tern_virtual_memory_bytes", "gauge", "Virtual memory of the ternd process.");
    sample(b, "tern_virtual_memory_bytes", size * (uint64_t)page);
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

/* Dynamic updates (tern/update/update.h): what came in and what became of it. */
static void render_update(buf_t *b, loader_t *l)
{
    update_t *u = l ? update_of(loader_source(l, "update")) : NULL;
    if (!u)
        return;
    update_stats_t st;
    update_get_stats(u, &st);
    const single_t m[] = {
        {"tern_update_received_total", "counter", "UPDATE messages and API changes taken.",
         st.received},
        {"tern_update_applied_total", "counter",
         "Changes journaled and published (a new serial each).", st.applied},
        {"tern_update_unchanged_total", "counter", "Updates that changed nothing (NOERROR).",
         st.unchanged},
        {"tern_update_refused_rate_total", "counter", "Updates refused over update_rate.",
         st.refused_rate},
        {"tern_update_queue_full_total", "counter",
         "Updates not taken: the update service's queue was full (SERVFAIL).", st.queue_full},
        {"tern_update_flushes_total", "counter", "Zone files written back from their journal.",
         st.flushes},
        {"tern_update_journal_errors_total", "counter",
         "Journal writes that failed (the change was not made; SERVFAIL).", st.journal_errors},
    };
    singles(b, m, TERN_ARRAY_SIZE(m));
    family(b, "tern_update_answers_total", "counter", "Updates answered, by rcode.");
    for (unsigned i = 0; i < 16; i++)
        if (st.rcode[i])
            sample_label(b, "tern_update_answers_total", "rcode", update_rcode_name(i),
                         st.rcode[i]);
}

/* The zones whose keys tern manages (dnssec: {policy}), from the loader's snapshot: the keys by
 * role and state, the next key event, the DS awaited. Only once such a zone has been stepped. */
static void render_dnssec_keys(buf_t *b, loader_t *l)
{
    loader_dnssec_keys_t *g = NULL;
    size_t n = 0;
    if (loader_dnssec_keys(l, &g, &n) < 0) {
        b->failed = true;
        return;
    }
    if (!n)
        return;
    /* Prometheus label values in lower case, as the policy's role words are written */
    static const char *const roles[LOADER_DNSSEC_ROLES] = {"ksk", "zsk", "csk"};
    family(b, "tern_dnssec_keys", "gauge",
           "Keys of each zone whose keys tern manages, by role and state (removed: the history "
           "its key state keeps). Only the roles the zone has keys of.");
    for (size_t i = 0; i < n; i++)
        for (unsigned r = 0; r < LOADER_DNSSEC_ROLES; r++) {
            uint32_t any = 0;
            for (unsigned s = 0; s < DNSSEC_KASP_STATE_COUNT; s++)
                any += g[i].count[r][s];
            for (unsigned s = 0; any && s < DNSSEC_KASP_STATE_COUNT; s++) {
                put(b, "tern_dnssec_keys{zone=\"");
                put_label_value(b, g[i].zone);
                put(b, "\",role=\"%s\",state=\"%s\"} %" PRIu32 "\n", roles[r],
                    dnssec_kasp_state_name((dnssec_kasp_state_t)s), g[i].count[r][s]);
            }
        }
    /* a zone with nothing scheduled (every key waits for the operator or the parent) has no
     * sample: a made-up 0 would read as "due now" */
    int64_t now = (int64_t)time(NULL);
    family(b, "tern_dnssec_next_event_seconds", "gauge",
           "Seconds until the zone's next key event (0: due, its build pending).");
    for (size_t i = 0; i < n; i++)
        if (g[i].next_event)
            sample_label(b, "tern_dnssec_next_event_seconds", "zone", g[i].zone,
                         g[i].next_event > now ? (uint64_t)(g[i].next_event - now) : 0);
    family(b, "tern_dnssec_ds_wanted", "gauge",
           "1 while the zone waits for a new KSK's (or CSK's) DS at its parent, else 0.");
    for (size_t i = 0; i < n; i++)
        sample_label(b, "tern_dnssec_ds_wanted", "zone", g[i].zone, g[i].ds_wanted);
    free(g);
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

int metrics_render(tern_buf_t *out, const metrics_source_t *src)
{
    buf_t *b = out;
    buf_init(b);
    family(b, "tern_build_info", "gauge", "Always 1; the version is in the label.");
    sample_label(b, "tern_build_info", "version", TERN_VERSION, 1);
    family(b, "tern_start_time_seconds", "gauge",
           "When ternd started, in seconds since the epoch.");
    put(b, "tern_start_time_seconds %" PRId64 "\n", src->start_time);
    render_server(b, src->server);
    render_loader(b, src->loader);
    render_health(b, src->loader);
    render_aname(b, src->loader);
    render_qlog(b, src->server);
    family(b, "tern_log_dropped_total", "counter",
           "Server log lines dropped: stdout or stderr (a pipe, the journal) did not take them.");
    sample(b, "tern_log_dropped_total", log_dropped_lines());
    render_xfr(b, src->xfr);
    render_update(b, src->loader);
    render_dnssec_keys(b, src->loader);
    render_memory(b);
    if (b->failed || !b->p) {
        tern_buf_free(b);
        return TERN_ENOMEM;
    }
    return 0;
}
