/*
 * metrics.h — the Prometheus text endpoint: GET /metrics on one configured address, and beside it
 * the status page: GET / and GET /status.json (tern/metrics/status.h).
 *
 * Owns an HTTP listener (libmicrohttpd) bound to exactly the configured address — loopback is
 * the intended use, there is no authentication — and nothing else. Every request renders a
 * fresh exposition (text format 0.0.4) from what it reads at that moment:
 *   - the workers' counters, summed by server_stats() (relaxed reads, no lock, nothing stopped);
 *   - the loader's counters (loader_get_stats()) and its zones (loader_zones(), which holds the
 *     loader's lock for the short time it takes to format two lines per zone).
 * Families: tern_build_info, tern_start_time_seconds, tern_workers, tern_queries_total{transport},
 * tern_queries_by_type_total{qtype}, tern_responses_total{rcode},
 * tern_responses_truncated_total, tern_dropped_total{reason}, tern_udp_{received,sent,
 * dropped}_total, tern_tcp_connections_total{event}, tern_edns_queries_total,
 * tern_ecs_queries_total, tern_zones, tern_zone_serial{zone}, tern_zone_records{zone},
 * tern_zone_bytes{zone}, tern_resident_memory_bytes, tern_virtual_memory_bytes,
 * tern_reloads_total{result}, tern_last_reload_{duration_seconds,success,timestamp_seconds}
 * (the last three have a sample only once a reload has run: the initial load is not a reload);
 * for zones whose keys tern manages (a copy from loader_dnssec_keys(), taken under the key
 * registry's mutex, rendered after it is released): tern_dnssec_keys{zone,role,state},
 * tern_dnssec_next_event_seconds{zone}, tern_dnssec_ds_wanted{zone}.
 *
 * Lifecycle: metrics_start() after server_start() and loader_load() (it reads both), before
 * dropping privileges (the address may be a privileged port); metrics_stop() before
 * server_stop() and loader_free(). The address is fixed until restart.
 *
 * Threads: requests are served on the endpoint's own thread, which runs libmicrohttpd (never a
 * worker); it inherits the caller's signal mask (block SIGINT/SIGTERM/SIGHUP before
 * metrics_start()). The rendering allocates (a buffer per request): it is off the query path.
 *
 * Clients: at most 16 connections, 8 from one address; a request head must be complete within
 * 5 s of the connection (or of the previous response), the response within 30 s of its head. A
 * new connection beyond either bound closes the one that has waited longest for its head, so idle
 * or trickling clients cannot keep a scraper out.
 */
#ifndef TERN_METRICS_METRICS_H
#define TERN_METRICS_METRICS_H

#include <stdint.h>

#include "tern/common/compiler.h"
#include "tern/load/loader.h"
#include "tern/net/server.h"

typedef struct metrics metrics_t;

/**
 * Serve GET /metrics on listen ("ADDR:PORT" for IPv4, "[V6]:PORT" for IPv6, as
 * config_parse_listen() reads it; port 0 = ephemeral, see metrics_port()). loader and server
 * must outlive the endpoint. / is the status page and /status.json its document (status.h), under
 * the same limits. Other paths answer 404, methods other than GET and HEAD 405.
 * Returns NULL after logging why (bad address, address in use, out of memory).
 */
metrics_t *metrics_start(const char *listen, loader_t *loader, const server_t *server) TERN_WUR;

/** The port actually bound (the ephemeral one when 0 was configured). */
uint16_t metrics_port(const metrics_t *m);

/** Close the listener and every connection at once (idle, trickling or mid-response: none is
 * waited for), join the thread and free. NULL is a no-op. */
void metrics_stop(metrics_t *m);

struct xfr; /* tern/xfr/xfr.h */
/** Also export the zone-transfer counters (tern_xfr_*). NULL m: no-op. */
void metrics_set_xfr(metrics_t *m, struct xfr *x);

#endif
