/*
 * health_check.h — the checker thread: probes every endpoint of a registry (health.h) on its
 * interval and records the results there, optionally sharing state with other nodes through
 * Redis in redins' keys.
 *
 * Owns: one thread, a libcurl multi handle (HTTP and HTTPS: thousands of concurrent checks from
 * one thread, TLS verified by libcurl/OpenSSL), the sockets of TCP connect and ICMP echo checks
 * (non-blocking, polled with the curl handles through curl_multi_poll's extra descriptors), an
 * optional hiredis connection (state sharing) and an optional log file (one line per result).
 * Nothing here runs on a worker; workers see results only as endpoint ranks.
 *
 * Checks:
 *   http, https  HEAD (or GET) of scheme://<host>:<port><uri> connected to the endpoint's
 *                address (libcurl CONNECT_TO: Host and TLS name are the owner, as redins sends
 *                them, the connection goes to the record's address and port); a fresh connection
 *                each time, no redirects followed, no proxy; only the status line and headers
 *                are read (a GET stops at the end of the final response's headers, so a big
 *                page costs its headers); up when the status is one of the expected codes
 *                (default 200, 301, 302), down on any other status, a connection or TLS error,
 *                or no answer within the timeout;
 *   tcp          connect() to address:port completes within the timeout;
 *   icmp         an echo reply within the timeout, through an unprivileged ping socket
 *                (SOCK_DGRAM, IPPROTO_ICMP/ICMPV6). When the system forbids those
 *                (net.ipv4.ping_group_range excludes our group) the check fails with an error
 *                that says so and how to allow it; logged once.
 * Each endpoint is checked every check_interval after its previous result; at most max_requests
 * checks are in flight; a new endpoint is checked at once. Once per load (a second after new
 * settings) the checker logs a warning when checks that all run to their timeouts would need
 * longer than check_interval per round, with the interval it can then keep.
 *
 * Fleet (with redis configured): before checking an endpoint the checker reads its state key
 * (health_int.h: redins:healthcheck:<owner>.:<ip>, JSON with status and lastcheck as redins
 * writes them). A state checked by any node less than check_interval ago is taken as it is (the
 * counter and time); otherwise the checker takes a short lock (SET NX PX on a key outside
 * redins:healthcheck:*, so redins nodes never see it), checks, and writes the new state (EX
 * update_interval) for every node, redins ones included. Another node holding the lock is left
 * to finish and read again after the timeout. Redis commands are pipelined per round. When Redis
 * is down the checker checks on its own and reconnects with backoff; answers never wait for it.
 *
 * Threading: configure(), stats() and stop() from any thread; the registry's mutex is taken
 * briefly per round and per result, never across a check or a Redis round trip.
 */
#ifndef TERN_CHECKER_HEALTH_CHECK_H
#define TERN_CHECKER_HEALTH_CHECK_H

#include <stdbool.h>
#include <stdint.h>

#include "tern/common/compiler.h"
#include "tern/checker/health_settings.h"
#include "tern/health/health.h"

typedef struct health_checker health_checker_t;

/** A checker of the endpoints of r (not started). Calls curl_global_init() the first time.
 * NULL when out of memory or libcurl fails to initialise (logged). */
health_checker_t *health_checker_new(health_registry_t *r) TERN_WUR;

/**
 * Take the settings of cfg (copied: interval, concurrency, CA file, Redis, log). Applied by the
 * thread at its next round; a changed Redis is reconnected, the log file is reopened every time
 * (so a reload rotates it). Before start(), the settings simply wait. 0 or TERN_ENOMEM.
 */
int health_checker_configure(health_checker_t *c, const config_health_t *cfg) TERN_WUR;

/** Start the thread. 0 or a negative code (logged). */
int health_checker_start(health_checker_t *c) TERN_WUR;

/** Stop and join the thread (checks in flight are abandoned), then free. NULL is a no-op. */
void health_checker_free(health_checker_t *c);

typedef struct health_checker_stats {
    uint64_t checks;       /* own checks completed */
    uint64_t failures;     /* of those, failed */
    uint64_t adopted;      /* results taken from another node through Redis */
    uint64_t redis_errors; /* Redis commands or connections that failed */
    bool redis_enabled;    /* state sharing configured */
    bool redis_connected;  /* ... and connected now */
    uint32_t in_flight;    /* checks running now */
    uint64_t log_dropped;  /* result lines the log could not take */
} health_checker_stats_t;

/** A consistent copy of the counters. Any thread. */
void health_checker_stats(health_checker_t *c, health_checker_stats_t *out);

#endif
