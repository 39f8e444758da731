/*
 * server.h — the workers: epoll loops answering UDP and TCP.
 *
 * Each worker is a thread with its own epoll instance, its own SO_REUSEPORT UDP socket per listen
 * address (recvmmsg/sendmmsg batches) and its own SO_REUSEPORT TCP listener per address, its own
 * buffers, answer context and connection pool, all allocated before it serves its first query.
 * With "tls: listen" each worker also has a DoT listener per address and a DoT pool (tcp.c, over
 * tern/net/tls.h): one SSL_CTX shared by all (ticket keys), an SSL object per connection from
 * accept to close. Workers share only the read-only zone table and configuration (and that
 * SSL_CTX, RCU-published). The query path takes no lock and allocates nothing.
 *
 * Lifecycle: server_bind() binds every socket (failing fast with a clear message if one cannot
 * be bound), server_run() starts the workers (server_start() does both); server_stop() asks them
 * to finish and joins them.
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
#include "tern/net/server_settings.h"
#include "tern/qlog/qlog.h"
#include "tern/zone/zone_table.h"

typedef struct server server_t;

/* Query types counted one by one; everything else is SERVER_QTYPE_OTHER. */
enum {
    SERVER_QTYPE_A,
    SERVER_QTYPE_NS,
    SERVER_QTYPE_CNAME,
    SERVER_QTYPE_SOA,
    SERVER_QTYPE_PTR,
    SERVER_QTYPE_MX,
    SERVER_QTYPE_TXT,
    SERVER_QTYPE_AAAA,
    SERVER_QTYPE_SRV,
    SERVER_QTYPE_NAPTR,
    SERVER_QTYPE_DS,
    SERVER_QTYPE_DNSKEY,
    SERVER_QTYPE_SVCB,
    SERVER_QTYPE_HTTPS,
    SERVER_QTYPE_CAA,
    SERVER_QTYPE_AXFR, /* AXFR and IXFR */
    SERVER_QTYPE_ANY,
    SERVER_QTYPE_OTHER,
    SERVER_QTYPE_COUNT
};

/* Response codes counted one by one; everything else is SERVER_RCODE_OTHER. */
enum {
    SERVER_RCODE_NOERROR,
    SERVER_RCODE_FORMERR,
    SERVER_RCODE_SERVFAIL,
    SERVER_RCODE_NXDOMAIN,
    SERVER_RCODE_NOTIMP,
    SERVER_RCODE_REFUSED,
    SERVER_RCODE_BADVERS,
    SERVER_RCODE_OTHER,
    SERVER_RCODE_COUNT
};

/* Counters summed over every worker. Each worker writes only its own copy (cache-line separated,
 * plain increments); server_stats() reads them without stopping anyone. */
/* A full pool with no idle connection (nothing half-read, nothing to write) closes a busy one for
 * a newcomer only when it has made no progress for this long: a client stalled mid-message or
 * not reading its answers makes room, one in the middle of a query does not. Idle connections
 * make room at once (tcp.c says who pays first). */
#define TCP_EVICT_QUIET_MS 1000

typedef struct server_stats {
    uint64_t udp_received;       /* datagrams read */
    uint64_t udp_sent;           /* responses the kernel accepted */
    uint64_t udp_dropped;        /* truncated datagrams, no-answer queries, failed sends */
    uint64_t udp_drop_truncated; /* ... of which: larger than the receive buffer */
    uint64_t udp_drop_answer;    /* ... the answer path sent nothing (a drop by ACL, rate limit or
                                    RRL; not DNS; a response) */
    uint64_t udp_drop_send;      /* ... the kernel refused the reply (full buffer, unreachable) */
    /* Datagrams the kernel dropped at our UDP sockets before a worker saw them (a full receive
     * buffer: the socket's sk_drops, SO_MEMINFO). Not a worker counter: server_stats() and
     * server_worker_stats() read it from the sockets at each call. */
    uint64_t udp_socket_drops;
    uint64_t tcp_accepted;      /* connections taken into the pool */
    uint64_t tcp_refused;       /* closed at once: the pool was full of busy connections */
    uint64_t tcp_accept_paused; /* accept() out of descriptors/memory: listener paused 100 ms */
    uint64_t tcp_queries;       /* complete messages answered */
    uint64_t tcp_closed_idle;   /* closed by the idle timeout */
    uint64_t tcp_closed_full;   /* unused since backpressure pauses a non-reading peer (always 0) */
    uint64_t tcp_closed_bad;    /* closed for a zero-length or unanswerable message */
    uint64_t tcp_closed_life;   /* closed at the total connection lifetime */
    uint64_t tcp_closed_peer;   /* closed by the peer, or after our answers to its EOF */
    uint64_t tcp_handed_off;    /* given to the transfer thread (a zone transfer, NOTIFY, TSIG) */
    uint64_t queries_udp;       /* messages handed to the answer path, by transport */
    uint64_t queries_tcp;
    uint64_t qtype[SERVER_QTYPE_COUNT]; /* answered queries by question type */
    uint64_t rcode[SERVER_RCODE_COUNT]; /* responses by rcode */
    uint64_t truncated;                 /* responses with TC set */
    uint64_t dropped_short;             /* not DNS (under 12 bytes): no response */
    uint64_t dropped_qr;                /* QR set: no response */
    uint64_t handed_off;                /* to the transfer thread (AXFR/IXFR, NOTIFY, TSIG) */
    uint64_t handoff_full;              /* ... refused by it (its queue full): no response */
    uint64_t edns;                      /* queries with EDNS */
    uint64_t ecs;                       /* ... with an EDNS Client Subnet option */
    uint64_t health_fail_open;          /* health-checked RRsets served whole: all down */
    uint64_t policy_refused[6];         /* by limit_why_t: REFUSED by an ACL, the blacklist, the
                                           rate limit */
    uint64_t policy_dropped[6];         /* ... dropped by them, or by RRL */
    uint64_t rrl_slipped;               /* RRL: sent truncated instead of dropped */
    uint64_t cookies;                   /* queries with a COOKIE option (cookies on) */
    uint64_t cookies_valid;             /* ... with a valid server cookie */
    uint64_t badcookie;                 /* answered BADCOOKIE */
    uint64_t tcp_client_capped;         /* connections closed: the client held its cap */
    uint64_t tcp_evicted;               /* idle (or stalled) connections closed to make room
                                           for a new one in a full pool */
    /* DoT (tls: listen:). Its connections are counted by the tcp_* counters above too (a DoT
     * connection is a TCP connection of the DoT pool); these say what TLS added. */
    uint64_t tls_handshakes;        /* handshakes finished (full or resumed) */
    uint64_t tls_resumed;           /* ... of which resumed a session (a ticket) */
    uint64_t tls_handshake_failed;  /* failed (protocol error, alert): also tcp_closed_bad */
    uint64_t tls_handshake_timeout; /* not finished in handshake_timeout_ms: also
                                       tcp_closed_idle */
    uint64_t tls_handshake_refused; /* closed at accept: max_handshakes (per worker or per
                                       client) in progress; not in tcp_accepted */
    uint64_t tls_queries;           /* DoT messages answered: also tcp_queries */
} server_stats_t;

/** Lower-case name of a qtype slot ("a", "aaaa", "other") or rcode slot ("noerror"...). */
const char *server_qtype_name(unsigned slot);
const char *server_rcode_name(unsigned slot);

/**
 * Bind every socket and prepare every worker without starting them: the part that may need root
 * (ports below 1024), done before privileges are dropped. set is copied; the listen list it
 * points to must outlive the server; *view is
 * read by the workers with tern_rcu_deref() for every event once they run. A listen address with
 * port 0 gets one ephemeral port, the same for UDP and TCP and for every worker (see
 * server_port()). Returns NULL after logging why (address in use, bad address...).
 */
server_t *server_bind(server_settings_t set, const answer_view_t *const *view) TERN_WUR;

/** Worker w's own counters (w < server_workers()): how the queries spread. Any thread. */
void server_worker_stats(const server_t *s, unsigned w, server_stats_t *out);

/** The shared limit state whose TCP connection counts the workers keep (tcp_max_per_client);
 * before server_run(). NULL (the default): no cap. */
void server_set_limits(server_t *s, limit_shared_t *limits);

/** The query log whose rings the workers write (tern/qlog/qlog.h), one per worker; before
 * server_run(). NULL (the default): nothing is logged, at the cost of one branch per query. */
void server_set_qlog(server_t *s, qlog_t *q);

/*
 * The transfer side (tern/xfr/xfr.h): where a worker hands a request answer_query() marked
 * ANSWER_HANDOFF. Both calls run on the worker and must not block: copy and queue.
 *   udp: a datagram; the callee answers through fd (shared, sendmsg is thread-safe) from local
 *        (set pktinfo when the listener is a wildcard one). false: not taken (queue full).
 *   tcp: a connection; from a true return on, fd and everything sent on it are the callee's
 *        (it closes it). buf holds the request and whatever the client pipelined after it.
 */
typedef struct server_handoff {
    bool (*udp)(void *ctx, int fd, const uint8_t *msg, size_t len,
                const struct sockaddr_storage *peer, const struct sockaddr_storage *local,
                bool pktinfo);
    bool (*tcp)(void *ctx, int fd, const uint8_t *buf, size_t len,
                const struct sockaddr_storage *peer, const struct sockaddr_storage *local);
    /* tls: a DoT connection, as tcp, with its TLS state ssl (an SSL *, tern/net/tls.h): from a
     * true return on, both are the callee's (tls_conn_free(), then close). NULL: a request on
     * a DoT connection is closed like one nobody takes. */
    bool (*tls)(void *ctx, int fd, void *ssl, const uint8_t *buf, size_t len,
                const struct sockaddr_storage *peer, const struct sockaddr_storage *local);
    void *ctx;
} server_handoff_t;

/** Set the transfer side (before server_run()); NULL: none (answer_config.xfr must be false). */
void server_set_handoff(server_t *s, const server_handoff_t *h);

/** The query log's counters; false (zeroed) without one. Any thread. */
bool server_qlog_stats(const server_t *s, qlog_stats_t *out);

/** Start the workers of a bound server; *view must be published (not NULL) by then. 0, or a
 * negative code after logging (server_stop() then cleans up). */
int server_run(server_t *s) TERN_WUR;

/** server_bind() then server_run(). NULL after logging why. */
server_t *server_start(server_settings_t set, const answer_view_t *const *view) TERN_WUR;

/** The port bound for cfg->listen[listen_index] (the ephemeral one when 0 was configured). */
uint16_t server_port(const server_t *s, size_t listen_index);

/** The port bound for cfg->tls.listen[listen_index], as server_port(). */
uint16_t server_tls_port(const server_t *s, size_t listen_index);

/** Read the DoT certificate, key and client CAs again (SIGHUP): new connections get them. 0 (also
 * without DoT), or negative after logging why with the file's path (the old ones stay). The
 * signal thread; not a worker. */
int server_tls_reload(server_t *s);

/** Sum every worker's counters (relaxed reads: a snapshot, not a transaction). */
void server_stats(const server_t *s, server_stats_t *out);

/* The AF_XDP sockets' counters (xdp: listen:): one socket's, or summed over every socket. The
 * first six are the worker's (xdp_sock_stats_t), the rest the kernel's (xdp_sock_kstats_t). */
typedef struct server_xdp_stats {
    uint64_t sockets;      /* XSK sockets open (one per receive queue of each interface) */
    uint64_t rx;           /* frames received */
    uint64_t tx;           /* replies sent */
    uint64_t not_ours;     /* dropped at parse: malformed, fragment, other port */
    uint64_t no_answer;    /* dropped by the answer path (policy, malformed query) */
    uint64_t tx_full;      /* replies dropped: the TX ring was full */
    uint64_t fill_short;   /* times the fill ring could not be refilled completely */
    uint64_t rx_ring_full; /* kernel: dropped, the RX ring was full (the worker fell behind) */
    uint64_t fill_empty;   /* kernel: frames that found no buffer on the fill ring */
    uint64_t rx_dropped;   /* kernel: dropped for other reasons (too large) */
    uint64_t invalid;      /* kernel: invalid RX/TX descriptors */
} server_xdp_stats_t;

/* One AF_XDP socket: the receive queue it serves and its counters. */
typedef struct server_xdp_queue {
    const char *ifname; /* the interface (lives as long as the server) */
    uint32_t queue;
    unsigned worker; /* the worker that serves it */
    server_xdp_stats_t c;
} server_xdp_queue_t;

/* The stages where AF_XDP frames are lost: the worker's (parse, answer, tx_full; fill_short
 * counts refills that fell short), then the kernel's (rx_ring_full, fill_empty, kernel_other,
 * invalid). */
#define SERVER_XDP_DROP_COUNT 8

/** Stage i's name (tern_xdp_dropped_total's stage label), i < SERVER_XDP_DROP_COUNT. */
const char *server_xdp_drop_name(unsigned i);

/** Stage i's counter in x. */
uint64_t server_xdp_drop(const server_xdp_stats_t *x, unsigned i);

/** The AF_XDP counters summed over every socket (all zero without xdp: listen:). Any thread but
 * a worker's (the kernel's counters are a getsockopt() per socket); relaxed reads. */
void server_xdp_stats(const server_t *s, server_xdp_stats_t *out);

/** The i-th AF_XDP socket (0 up to the number open) into *out: true, or false past the last.
 * Any thread but a worker's; relaxed reads. */
bool server_xdp_queue(const server_t *s, size_t i, server_xdp_queue_t *out);

/** Number of workers. */
unsigned server_workers(const server_t *s);

/** The workers' per-query DNSSEC signing (tern/dnssec/dnssec_zone.h), summed: signature cache
 * hits and misses, signatures made and the time they took, failures. */
void server_dnssec_stats(const server_t *s, dnssec_worker_stats_t *out);

/**
 * Worker w's allocation counters (tern/common/mem.h: bytes under jemalloc, calls under ASan), read
 * while it runs: the zero-allocation tests compare them around a load. TERN_ENOTSUP when the
 * build cannot count, TERN_EINVAL for a bad index.
 */
int server_worker_allocs(const server_t *s, unsigned w, uint64_t *alloc, uint64_t *dealloc);

/** Stop every worker (they finish the batch in hand), join and free. NULL is a no-op. */
void server_stop(server_t *s);

#endif
