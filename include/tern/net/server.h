/*
 * server.h — the workers: epoll loops answering UDP and TCP.
 *
 * Each worker is a thread with its own epoll instance, its own SO_REUSEPORT UDP socket per listen
 * address (recvmmsg/sendmmsg batches) and its own SO_REUSEPORT TCP listener per address, its own
 * buffers, answer context and connection pool, all allocated before it serves its first query.
 * Workers share only the read-only zone table and configuration. The query path takes no lock
 * and allocates nothing.
 *
 * Lifecycle: server_start() binds every socket (failing fast with a clear message if one cannot
 * be bound) and starts the workers; server_stop() asks them to finish and joins them.
 * What to answer from is read through *view, which the loader publishes with RCU
 * (tern/common/rcu.h): each worker is a QSBR reader, dereferences the view per event, reports a
 * quiescent state after it and is offline while blocked in epoll_wait.
 *
 * Memory: each worker has its own jemalloc arena, its buffers come from it, and its thread cache
 * is off (it allocates nothing per query; see tern/common/mem.h).
 *
 * Signals: workers inherit the caller's signal mask; block SIGINT/SIGTERM/SIGHUP before
 * server_start() so only the control thread receives them.
 */
#ifndef TERN_NET_SERVER_H
#define TERN_NET_SERVER_H

#include <stddef.h>
#include <stdint.h>

#include "tern/answer/answer.h"
#include "tern/common/compiler.h"
#include "tern/conf/config.h"
#include "tern/zone/zone_table.h"

typedef struct server server_t;

/* Counters summed over every worker. Each worker writes only its own copy. */
typedef struct server_stats {
    uint64_t udp_received;    /* datagrams read */
    uint64_t udp_sent;        /* responses the kernel accepted */
    uint64_t udp_dropped;     /* truncated datagrams, no-answer queries, failed sends */
    uint64_t tcp_accepted;    /* connections taken into the pool */
    uint64_t tcp_refused;     /* connections closed at once because the pool was full */
    uint64_t tcp_queries;     /* complete messages answered */
    uint64_t tcp_closed_idle; /* closed by the idle timeout */
    uint64_t tcp_closed_full; /* closed because the peer did not read its answers */
    uint64_t tcp_closed_bad;  /* closed for a zero-length or unanswerable message */
} server_stats_t;

/**
 * Bind and start. cfg must outlive the server; *view (never NULL once started) is read by the
 * workers with tern_rcu_deref() for every event. A listen address with port 0 gets one ephemeral
 * port, the same for UDP and TCP and for every worker (see server_port()). Returns NULL after
 * logging why (address in use, bad address...).
 */
server_t *server_start(const config_t *cfg, const answer_view_t *const *view) TERN_WUR;

/** The port bound for cfg->listen[listen_index] (the ephemeral one when 0 was configured). */
uint16_t server_port(const server_t *s, size_t listen_index);

/** Sum every worker's counters (relaxed reads: a snapshot, not a transaction). */
void server_stats(const server_t *s, server_stats_t *out);

/** Number of workers. */
unsigned server_workers(const server_t *s);

/**
 * Worker w's allocation counters (tern/common/mem.h: bytes under jemalloc, calls under ASan), read
 * while it runs: the zero-allocation tests compare them around a load. TERN_ENOTSUP when the
 * build cannot count, TERN_EINVAL for a bad index.
 */
int server_worker_allocs(const server_t *s, unsigned w, uint64_t *alloc, uint64_t *dealloc);

/** Stop every worker (they finish the batch in hand), join and free. NULL is a no-op. */
void server_stop(server_t *s);

#endif
