/*
 * qlog.h — query logging without slowing the query path: per-worker rings, one writer thread.
 *
 * Each worker owns one qlog_ring_t, a single-producer single-consumer byte ring of qlog_rec_t
 * records (tern/qlog/qlog_rec.h) allocated once at start. After answering, a worker that logs
 * reserves room for the record in its ring, fills it in place (addresses, times, the geo
 * decision, the query's and the response's bytes: memcpy only) and commits it with one release
 * store. A ring without room drops the record and counts it: the worker never waits, allocates,
 * formats or makes a system call for the log.
 *
 * The writer thread (qlog_start()) drains every ring each QLOG_DRAIN_MS, hands each record to
 * the sinks — dnstap over Frame Streams (tern/qlog/dnstap.h) and redins' request log
 * (tern/qlog/reqlog.h) — and flushes them. SIGHUP reopens the sinks' files (log rotation) from
 * the writer thread (qlog_reopen() only raises a flag).
 *
 * What is logged: 1 query in config sample (a per-worker counter, no randomness), except queries
 * for the zones in exclude_zones (by the zone the answer came from, answer_info_t.zone), and
 * queries answer_query() dropped before any zone was looked up (no response: logged with rcode
 * 0xFFFF only when they reached a zone).
 *
 * Threading: qlog_new/start/free on the main thread; qlog_worker_put() on its worker only;
 * qlog_stats() and qlog_reopen() on any thread.
 */
#ifndef TERN_QLOG_QLOG_H
#define TERN_QLOG_QLOG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "tern/answer/answer.h"
#include "tern/common/compiler.h"
#include "tern/qlog/qlog_rec.h"
#include "tern/qlog/qlog_settings.h"

/* How often the writer drains the rings. A record of a typical query is some 320 bytes (the
 * 176-byte header, the query and the response), so at 100k q/s a 4 MiB ring holds about 130 ms:
 * a drain every 20 ms keeps it far from full, and wakes the writer (and through it fstrm's I/O
 * thread) 50 times a second on the workers' CPUs rather than 200. */
#define QLOG_DRAIN_MS 20

typedef struct qlog qlog_t;
typedef struct qlog_ring qlog_ring_t;

typedef struct qlog_stats {
    uint64_t records;     /* records the workers committed */
    uint64_t dropped;     /* records a full ring refused */
    uint64_t written;     /* dnstap messages the reader got (counted after the write) */
    uint64_t sink_drops;  /* dnstap messages lost: its queue full, or no reader connected */
    uint64_t reconnects;  /* dnstap socket connections (handshake done) after the first */
    uint64_t lines;       /* request-log lines written */
    uint64_t line_errors; /* request-log writes that failed */
    uint64_t line_drops;  /* request-log lines dropped: the reader did not take them */
} qlog_stats_t;

/* What a worker knows of one answered query beyond answer_info_t, for its record. */
typedef struct qlog_query {
    const struct sockaddr *client; /* the packet's source */
    const struct sockaddr *server; /* the address it was sent to (NULL: unknown) */
    bool tcp;
    int64_t qtime_ns; /* wall clock of the batch the query came in */
    const uint8_t *query;
    size_t qlen;
    const uint8_t *response; /* NULL when none was sent */
    size_t rlen;
} qlog_query_t;

/**
 * The query log of c (config_t's qlog) for nworkers workers (their rings, ring_kib each), its
 * sinks opened. NULL with a message in err when a sink cannot be opened, or when c->enabled is
 * false (err ""). The sinks stay open until qlog_free().
 */
qlog_t *qlog_new(const config_qlog_t *c, unsigned nworkers, char *err, size_t errlen) TERN_WUR;

/** Worker i's ring (i < nworkers). */
qlog_ring_t *qlog_ring(qlog_t *q, unsigned i);

/** Start the writer thread. 0 or a negative TERN_E* code. */
int qlog_start(qlog_t *q) TERN_WUR;

/**
 * Worker side, after answer_query(): log the query (sampling and zone exclusions applied) with
 * what ctx decided. No allocation, no lock, no system call. The ring is the worker's own.
 */
void qlog_worker_put(qlog_t *q, qlog_ring_t *r, const answer_ctx_t *ctx, const qlog_query_t *qq);

/** Ask the writer to reopen the sinks' files (SIGHUP). Any thread. */
void qlog_reopen(qlog_t *q);

/** Counters (any thread). */
void qlog_stats(qlog_t *q, qlog_stats_t *out);

/** Stop the writer (it drains the rings a last time and flushes the sinks), free everything.
 * The workers must have stopped. NULL is a no-op. */
void qlog_free(qlog_t *q);

#endif
