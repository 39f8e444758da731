/*
 * ctl.h — the control socket ternctl talks to: reload, status, stats, zone status, health.
 *
 * Owns one UNIX stream socket (the config's control_socket, mode 0660), one thread that serves
 * it and one that waits for the reloads it asks for. Never a worker: the query path does not know
 * the control socket exists, and every response is formatted on the control threads from what
 * the loader (loader_zones(), loader_get_stats()) and the server (server_stats(), summed without
 * stopping anyone) report. A reload requested here runs on the loader's thread like a SIGHUP one
 * (loader_reload_wait()); the waiter thread only waits.
 *
 * Lifecycle: ctl_start() (after loader_start(): a reload request needs the loader thread) binds
 * the socket — replacing a stale socket file nobody answers on, refusing a live one — and starts
 * the thread; ctl_stop() (before loader_stop()) stops it, closes and removes the socket.
 *
 * Protocol: the client sends one request line (at most CTL_MAX_REQUEST bytes with its "\n"; the
 * "\n" may be replaced by shutting down the write side), the server answers and closes:
 *
 *   request               response (first line "ok" or "error: MESSAGE", then "key: value" lines)
 *   reload                waits for a reload that starts after the request, then: reload: ok,
 *                         duration_ms, zones, records, zones_changed, zones_unchanged,
 *                         zones_removed, one "changed: ORIGIN serial OLD -> NEW records N" (or
 *                         "changed: ORIGIN serial N records N (new)") line per changed zone and
 *                         one "removed: ORIGIN" per removed one. A failed reload answers
 *                         "error: reload failed: FILE:LINE: ...", then reload: failed,
 *                         duration_ms, still_serving, zones, records, reloads_failed; the old
 *                         data keeps answering. "Changed" is seen from the zone list: new, or a
 *                         different serial, record count, size, file or load time (a zone
 *                         re-read within the same second with the same content counts as
 *                         unchanged; the loader's log line counts every re-read).
 *   status                version, pid, started, uptime_seconds, workers, zones, records,
 *                         reloads_ok, reloads_failed, last_reload (time or "never"),
 *                         last_reload_result (ok|failed|none), last_reload_duration_ms (-1
 *                         before the first), last_reload_error (only when the last reload
 *                         failed), then one "zone: ORIGIN serial N records N bytes N
 *                         loaded TIME file PATH" line per zone, in configuration order
 *   stats                 uptime_seconds, workers, queries (UDP + TCP), every server_stats_t
 *                         counter under its field name (queries_udp, udp_received, ...),
 *                         qtype_NAME and rcode_NAME per slot (server_qtype_name()...), then
 *                         zones, records and the reload counters as in status
 *   zone NAME             zone, serial, records, bytes, loaded, file of that zone (NAME is
 *                         case-insensitive, the final dot optional); "error: zone NAME is not
 *                         served" otherwise
 *   health                endpoints, up, down, between (counts by rank), checker, checks,
 *                         failures, in_flight, adopted (results read from Redis), redis (none,
 *                         connected, disconnected), redis_errors, then one line per endpoint:
 *                         "endpoint: ADDR[:PORT] protocol P host H uri U state S status N/D..U
 *                         override auto|up|down last_check TIME|never last_result ok|failed|none
 *                         by self|redis|- latency_ms F checks N failures N error TEXT|-"
 *   health set ADDR[:PORT] up|down|auto
 *                         force every endpoint at ADDR (and PORT, if given) up or down, or give
 *                         it back to its checks; kept across reloads and for endpoints that
 *                         appear later: override, matched (endpoints now)
 *   explain NAME [TYPE] --client ADDR [--ecs PREFIX] [--do] [--tcp] [--json]
 *                         the query a resolver at ADDR would send, run through the workers'
 *                         pipeline over the published view (ctl_explain.c): query, zone, policy,
 *                         path, selection, response, dnssec — as "key: k=v ..." lines (nested
 *                         parts indented two spaces), or with --json one JSON object line
 *
 * Times are UTC, ISO 8601 ("2026-11-23T10:00:00Z"). Control characters in names, paths and error
 * messages are written as '?', so a response line never splits. Key names are stable: scripts
 * may grep them.
 *
 * Connections are served side by side (up to 32; beyond that a new one closes the connection that
 * has waited longest for its request). A client gets CTL_IO_TIMEOUT_MS for its whole request line
 * and as long again to read its response, and delays nobody else: an idle or trickling client
 * holds only its own connection, and a reload (answered from a thread of its own) holds no other
 * request.
 */
#ifndef TERN_CTL_CTL_H
#define TERN_CTL_CTL_H

#include <stddef.h>

#include "tern/common/compiler.h"
#include "tern/load/loader.h"
#include "tern/net/server.h"

/* ternctl's socket when neither -s nor -c says otherwise; conf/ternd.yaml uses the same. */
#define CTL_DEFAULT_SOCKET "/run/tern/ternd.sock"

/* The longest request, "\n" included: the longest command is "zone" and a name of 253
 * characters; 1 KiB leaves room and bounds what a client can make us buffer. */
#define CTL_MAX_REQUEST 1024

/* How long a client has to send its whole request, and (separately) to read the whole response.
 * A few seconds: ternctl does both at once; a stalled client holds only its own connection. */
#define CTL_IO_TIMEOUT_MS 3000

typedef struct ctl ctl_t;

/**
 * Bind the control socket at path and start serving it on a new thread. loader and server may be
 * NULL (tests): the commands that need them answer "error: ...". workers is reported by status.
 * If path exists: a socket nobody answers on is replaced; a socket someone answers on (another
 * ternd) and a file that is not a socket are left alone and ctl_start() fails. Returns NULL after
 * logging why (path too long, live socket, cannot bind...).
 *
 * Call after loader_start() and, when privileges are dropped, after that too: the socket then
 * belongs to the user and group ternd runs as. The caller's signal mask is inherited.
 */
ctl_t *ctl_start(const char *path, loader_t *loader, server_t *server, unsigned workers) TERN_WUR;

/**
 * Stop serving (a reload being waited for finishes first), join the thread, close the socket and
 * remove its file if it is still ours. NULL is a no-op. Call before loader_stop().
 */
void ctl_stop(ctl_t *c);

struct xfr; /* tern/xfr/xfr.h */
/** The zone-transfer service whose state `zone NAME` shows (transfers, journal, NOTIFY);
 * before clients connect. NULL c: no-op. */
void ctl_set_xfr(ctl_t *c, struct xfr *x);

/**
 * Client side (ternctl): a connected socket to path, or a negative code: -ENOENT (no such
 * socket), -ECONNREFUSED (nobody listens), -EACCES, -ETIMEDOUT (the backlog stayed full for
 * timeout_ms)...
 */
int ctl_connect(const char *path, int timeout_ms) TERN_WUR;

/**
 * Client side: send request (one line, without "\n") on fd, then read the response until the
 * server closes, all within timeout_ms. 0 with the NUL-terminated response in *out (malloc'd, the
 * caller frees it), or a negative code: -ETIMEDOUT, -ECONNRESET, TERN_ELIMIT (a response over
 * 64 MiB), TERN_EINVAL (a request with a control character or too long), TERN_ENOMEM. fd stays
 * open either way.
 */
int ctl_exchange(int fd, const char *request, int timeout_ms, char **out) TERN_WUR;

#endif
