/*
 * worker.h — private to src/net: the state one worker thread owns and the functions of its loop.
 *
 * server.c binds sockets and starts/joins workers; worker.c runs the epoll loop; udp.c answers
 * datagram batches; tcp.c runs the connection pool. Everything in a worker_t is written only by
 * its own thread (the counters are also read, relaxed, by server_stats()).
 */
#ifndef TERN_NET_WORKER_H
#define TERN_NET_WORKER_H

#include <netinet/in.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>
#include <time.h>

#include "tern/answer/answer.h"
#include "tern/common/compiler.h"
#include "tern/net/server.h"
#include "tern/net/tls.h"
#include "tern/net/xdp.h"
#include "tern/qlog/qlog.h"

/* recvmmsg/sendmmsg width. 32 datagrams amortise one syscall (~1-2 us) over enough answers
 * (~1 us each) that the syscall is no longer the cost, while 32 x 8 KiB of buffers stay within
 * L2; wider batches mostly add latency for the first datagram of the batch. */
#define UDP_BATCH 32

/* Batches per readiness event of one socket: bounds how long UDP floods can keep a worker from
 * its TCP connections and other sockets (level-triggered epoll reports the rest again). */
#define UDP_MAX_BATCHES 8

/* A query larger than this is abuse, not DNS (EDNS queries are a few hundred bytes even with
 * cookies and padding); longer datagrams arrive with MSG_TRUNC and are dropped. */
#define UDP_RX_SIZE 4096

/* The largest edns_max_udp the config allows; answer_query() caps each response to the client's
 * payload size within it. */
#define UDP_TX_SIZE 4096

/* RFC 1035 §4.2.2: a two-byte length, then up to 65535 bytes of message. */
#define TCP_MSG_MAX (2u + 65535u)

/* Per-connection write queue: one maximum-size response always fits once the queue has drained
 * (so an answer is never dropped for size: the connection waits for room instead), and many
 * small pipelined answers coalesce into one write(). */
#define TCP_WBUF_SIZE TCP_MSG_MAX

/* The smallest answer a connection can queue: length prefix + DNS header. No more than
 * TCP_WBUF_SIZE / TCP_ANSWER_MIN answers fit the write queue at once, which bounds the per-
 * connection ring of queued answers whatever tcp_max_inflight says (4681 entries, 18 KiB). */
#define TCP_ANSWER_MIN (2u + 12u)

/* Connections taken per listener readiness event: enough for bursts, bounded so an accept flood
 * cannot starve established connections. */
#define TCP_ACCEPT_BATCH 16

/* accept() failing for want of descriptors or memory (EMFILE, ENFILE, ENOBUFS, ENOMEM) leaves
 * the listener readable: retried at once, the level-triggered loop would spin a core. The
 * listener is taken out of epoll for this long instead; 100 ms lets connections close and
 * descriptors come back while a waiting client barely notices (its SYN is already queued). */
#define TCP_ACCEPT_PAUSE_MS 100

/* listen(2) backlog: absorbs connect bursts between two epoll rounds; the kernel caps it at
 * net.core.somaxconn. */
#define TCP_LISTEN_BACKLOG 1024

/* Busy mode (worker.c): while UDP queries keep coming, a worker with one UDP socket blocks in
 * recvmmsg itself instead of in epoll_wait, saving a syscall per wakeup, and polls epoll (timeout
 * 0) for its TCP sockets and the stop event at least every UDP_BUSY_POLL_US. A receive that
 * waits UDP_BUSY_IDLE_US for nothing (SO_RCVTIMEO) ends busy mode. Meanwhile the socket is out of
 * the epoll set (worker.c says why). */
#define UDP_BUSY_POLL_US 1000
#define UDP_BUSY_IDLE_US 1000

/* Ready descriptors handled per epoll_wait: more simply arrive with the next call. */
#define WORKER_EVENTS 64

/* epoll tags: kind in the top byte, connection generation in the next 24 bits (so an event
 * queued for a connection slot that was closed and reused is recognised as stale), index low. */
enum {
    TAG_STOP = 1,
    TAG_UDP = 2,
    TAG_LISTEN = 3,
    TAG_CONN = 4,
    TAG_XDP = 5,
    TAG_TLS_LISTEN = 6, /* a DoT listener (tls: listen:) */
    TAG_TLS_CONN = 7,   /* a connection of the DoT pool */
};
#define TAG_MAKE(kind, gen, idx)                                                                   \
    (((uint64_t)(kind) << 56) | ((uint64_t)((gen)&0xFFFFFFu) << 32) | (uint64_t)(uint32_t)(idx))
#define TAG_KIND(t) ((unsigned)((t) >> 56))
#define TAG_GEN(t)  ((uint32_t)(((t) >> 32) & 0xFFFFFFu))
#define TAG_IDX(t)  ((uint32_t)(t))

/* Batched datagram I/O (recvmmsg/sendmmsg) or one datagram per syscall; both return the number
 * of messages done (msg_len filled in) or -1 with errno when the first one fails. */
typedef struct udp_ops {
    const char *name;
    int (*recv)(int fd, struct mmsghdr *msgs, unsigned n);
    /* Block until at least one datagram (or the socket's SO_RCVTIMEO), then take what is there. */
    int (*wait)(int fd, struct mmsghdr *msgs, unsigned n);
    int (*send)(int fd, struct mmsghdr *msgs, unsigned n);
} udp_ops_t;

extern const udp_ops_t udp_ops_mmsg;
extern const udp_ops_t udp_ops_msg;

typedef struct udp_state udp_state_t;

/* Where a datagram came from and where a hand-off's reply leaves: what udp_answer_one() needs
 * beyond the query. The local address is local when set (XDP: from the frame), else the
 * listener li's, with rh's PKTINFO address when pktinfo (a wildcard listener). */
typedef struct udp_origin {
    const struct sockaddr_storage *peer;
    int fd;       /* the socket a handed-off query's reply leaves from; -1: none (with local set:
                     found at the hand-off, xdp_reply_socket(), as only a hand-off needs one) */
    size_t li;    /* the listener (when local is NULL) */
    bool pktinfo; /* fd is a wildcard socket: the reply names its source address */
    const struct msghdr *rh;              /* the received header, for its PKTINFO */
    const struct sockaddr_storage *local; /* or NULL: from li and rh */
} udp_origin_t;

/* XSK sockets one worker serves at most (AF_XDP, one per receive queue, spread over the
 * workers): 64 queues on one worker is beyond any NIC we would serve from one thread. */
#define WORKER_MAX_XSK 64

/* A client prefix with connections in one worker's pool (tcp.c): who pays first when the pool is
 * full. */
typedef struct tcp_peer tcp_peer_t;

typedef struct tcp_pool tcp_pool_t;

typedef struct tcp_conn {
    int fd;
    uint32_t gen;          /* bumped at close: see TAG_MAKE */
    struct tcp_conn *prev; /* idle list (ordered by deadline) or free list (next only) */
    struct tcp_conn *next;
    struct tcp_conn *lprev; /* lifetime list: accept order, hence ordered by life_ms */
    struct tcp_conn *lnext;
    int64_t deadline_ms; /* monotonic ms after which the connection is idle-closed */
    int64_t life_ms;     /* monotonic ms at which it is closed whatever it does */
    uint32_t rlen;       /* bytes in rbuf: a partial message, or more while paused */
    uint32_t woff, wlen; /* pending output is wbuf[woff, wlen) */
    uint32_t *ends;      /* ring of the end offsets in wbuf of queued answers (pool.ring slots) */
    uint32_t qhead;      /* ring index of the oldest queued answer */
    uint32_t qlen;       /* answers queued, not yet written to the kernel */
    uint32_t need;       /* paused for room: bytes the next answer needs in the write queue */
    uint32_t events;     /* epoll interest currently registered (EPOLLIN / EPOLLOUT) */
    bool paused;         /* backpressure: complete queries wait in rbuf, nothing is read */
    bool eof;            /* the peer closed its side: close once the output is drained */
    uint8_t *rbuf;       /* TCP_MSG_MAX bytes */
    uint8_t *wbuf;       /* TCP_WBUF_SIZE bytes */
    struct sockaddr_storage peer; /* the client, for geo-steered answers */
    uint8_t li;                   /* the listener it came through (the query log's server) */
    bool idle;                    /* nothing half-read, nothing to write: on its owner's list */
    tcp_peer_t *owner;            /* its client prefix in this pool */
    struct tcp_conn *iprev;       /* the owner's idle connections, idle longest first */
    struct tcp_conn *inext;
    tcp_pool_t *pool; /* the pool it belongs to: the TCP one or the DoT one */
    /* DoT (the pool's tls set): the connection's TLS state; NULL on a plain TCP connection */
    SSL *ssl;
    bool handshake;         /* the TLS handshake is not finished: no query read yet */
    uint32_t hs_want;       /* what the handshake waits for (EPOLLIN or EPOLLOUT) */
    int64_t hs_deadline_ms; /* closed then if still in handshake (tls handshake_timeout_ms) */
    struct tcp_conn *hprev; /* the pool's handshakes in progress, oldest first */
    struct tcp_conn *hnext;
} tcp_conn_t;

struct tcp_pool {
    tcp_conn_t *conns;         /* n slots */
    uint8_t *bufs;             /* every slot's rbuf and wbuf, one allocation */
    uint32_t *ends;            /* every slot's ring of answer ends, one allocation */
    tcp_conn_t *free;          /* free slots, through next */
    tcp_conn_t *head, *tail;   /* open connections, earliest idle deadline first */
    tcp_conn_t *lhead, *ltail; /* open connections, oldest (earliest life_ms) first */
    uint32_t n;
    uint32_t ring;            /* answers queued per connection at most: tcp_max_inflight, capped */
    int64_t idle_ms;          /* tcp_idle_timeout */
    int64_t life_ms;          /* tcp_max_lifetime */
    uint8_t *out;             /* TCP_MSG_MAX bytes: answer_query() output before queueing */
    uint32_t accept_paused;   /* listen indexes taken out of epoll after an accept() failure */
    int64_t accept_resume_ms; /* when they go back in (TCP_ACCEPT_PAUSE_MS) */
    bool accept_logged;       /* the first failure was logged; later ones are only counted */

    /* admission under a full pool (tcp.c): the client prefixes with connections here */
    tcp_peer_t *peers;      /* n of them, one allocation; unused ones on peer_free */
    tcp_peer_t *peer_free;  /* through their hash chain link */
    tcp_peer_t **peer_hash; /* chained by masked prefix, hmask + 1 heads */
    uint32_t hmask;
    uint64_t seed;        /* random per pool: chains an attacker cannot aim at */
    uint8_t pfx4, pfx6;   /* tcp_client_prefix_v4/v6: one client, as for tcp_max_per_client */
    tcp_peer_t **by_idle; /* [k]: the prefixes holding k idle connections, longest first */
    tcp_peer_t **by_idle_tail;
    uint32_t top; /* the highest k with a prefix in by_idle[k]; 0 = nobody idle */

    /* what the pool serves: TCP (tls NULL) or DoT; set by server.c before the worker runs */
    uint8_t conn_tag;   /* TAG_CONN or TAG_TLS_CONN: its connections' epoll tag */
    uint8_t listen_tag; /* TAG_LISTEN or TAG_TLS_LISTEN */
    const int *lfd;     /* the worker's listeners of this kind, by listen index */
    size_t nlisten;
    const struct sockaddr_storage *local; /* each listener's own address (the query log's) */
    tls_server_t *tls;                    /* DoT: the credentials; NULL: plain TCP */
    /* DoT handshakes in progress (tls.c; the limits of the "tls:" block) */
    tcp_conn_t *hhead, *htail; /* by deadline: all share one timeout, so accept order */
    uint32_t nhs;              /* in progress in this pool */
    uint32_t max_hs;           /* tls max_handshakes */
    uint32_t max_hs_client;    /* tls max_handshakes_per_client */
    int64_t hs_ms;             /* tls handshake_timeout_ms */
};

/* Owner-written, relaxed-read counters: the same fields as server_stats_t, so the reader sums
 * them field by field. NET_COUNT keeps the increment a plain load + store (no locked
 * instruction): only this worker writes its copy. */
typedef server_stats_t net_counters_t;

#define NET_COUNT(w, field, n)                                                                     \
    __atomic_store_n(&(w)->stats.field, (w)->stats.field + (n), __ATOMIC_RELAXED)

typedef struct worker {
    struct server *srv;
    unsigned id;
    int epfd;
    bool started;
    pthread_t thread;
    int udp_fd[CONFIG_MAX_LISTEN];
    int tcp_fd[CONFIG_MAX_LISTEN];
    int tls_fd[CONFIG_MAX_LISTEN]; /* DoT listeners, by index in set.tls.listen */
    int64_t now_ms;                /* monotonic clock, read once per loop iteration */
    int busy_li;                   /* the one UDP listen index busy mode may block on, or -1 */
    bool dnssec_tried;             /* worker_dnssec_init() ran (actx.dnssec may still be NULL) */
    const answer_view_t *view;     /* the RCU snapshot for the event in hand */
    unsigned arena;                /* this worker's jemalloc arena (MEM_NO_ARENA without one) */
    const uint64_t *allocp; /* this thread's allocation counters (mem.h); NULL until it runs */
    const uint64_t *deallocp;
    udp_state_t *udp;
    xdp_sock_t *xsk[WORKER_MAX_XSK]; /* the AF_XDP sockets this worker serves (xdp: listen:) */
    unsigned nxsk;
    tcp_pool_t tcp;
    tcp_pool_t tls; /* DoT connections (n 0 without tls: listen:): RFC 7766 limits as tcp's */
    net_counters_t stats;
    qlog_ring_t *qring; /* this worker's query-log ring, or NULL: nothing logged */
    int64_t qtime_ns;   /* wall clock of the batch in hand, when qring */
    answer_ctx_t actx;
} TERN_ALIGNED(TERN_CACHELINE) worker_t; /* cache-line separated: no false sharing */

struct server {
    server_settings_t set;
    limit_shared_t *limits; /* TCP connections per client (tern/limit/limit.h); NULL = no cap */
    const answer_view_t *const *view; /* RCU-published by the loader */
    const udp_ops_t *udp_ops;
    int stop_fd; /* eventfd in every worker's epoll set; written once */
    size_t nlisten;
    uint16_t port[CONFIG_MAX_LISTEN];
    bool wildcard[CONFIG_MAX_LISTEN]; /* bound to 0.0.0.0 / :: : reply with PKTINFO */
    unsigned nworkers;
    worker_t *workers;
    qlog_t *qlog; /* the query log (tern/qlog/qlog.h), or NULL */
    /* each listener's own address and port: the query log's server side (a wildcard UDP
     * listener logs the address each datagram was sent to, from its PKTINFO) */
    struct sockaddr_storage local[CONFIG_MAX_LISTEN];
    server_handoff_t handoff; /* the transfer side; its calls NULL when none */
    tls_server_t *tls;        /* DoT credentials, or NULL: no tls: listen: */
    size_t ntls;              /* DoT listen addresses (set.tls.listen) */
    uint16_t tls_port[CONFIG_MAX_LISTEN];
    struct sockaddr_storage tls_local[CONFIG_MAX_LISTEN];
    xdp_t *xdp[CONFIG_MAX_XDP]; /* the program attached to each xdp: listen: interface */
    size_t nxdp;
};

/* The clock the limits, the online signer and the query log of the next batch judge by: read
 * once per batch, and only when the view has limits or a signed zone or queries are logged
 * (vDSO calls, no system call). */
static inline void worker_clock(worker_t *w)
{
    if (w->view && (w->view->limit || w->view->dnssec || w->qring)) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        w->actx.now_us = (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
        clock_gettime(CLOCK_REALTIME, &ts);
        w->actx.now_s = (uint32_t)ts.tv_sec;
        w->qtime_ns = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
    }
}

/* Count one answer_query() call by its outcome (worker.c). */
void net_count_answer(worker_t *w, answer_transport_t transport, const answer_info_t *info);

/* worker.c */
void *worker_main(void *arg);

/* udp.c */
udp_state_t *udp_state_new(void) TERN_WUR;
void udp_state_free(udp_state_t *u);
/** Answer up to UDP_MAX_BATCHES batches from listen socket li. Returns the datagrams read. */
unsigned udp_handle(worker_t *w, size_t li);
/** Busy mode: block (RCU-offline) for one batch on listen socket li and answer it. Returns the
 * datagrams read; 0 when the wait timed out or was interrupted. */
unsigned udp_wait_batch(worker_t *w, size_t li);
/** Answer one parsed datagram (query, qlen bytes, parsed into q with result pr) into tx (cap
 * bytes) through answer_parsed(), count it, hand it to the transfer thread or log it: the one
 * answer path of the socket batch and of AF_XDP. Returns the reply's length, 0 for none (also
 * for a hand-off: w->actx.info.outcome says which). */
size_t udp_answer_one(worker_t *w, wire_query_t *q, wire_parse_result_t pr, const udp_origin_t *o,
                      const uint8_t *query, size_t qlen, uint8_t *tx, size_t cap);
/** xdp_batch_fn of the AF_XDP sockets served by worker arg: the batch parsed, prefetched
 * (answer_prefetch()) and answered as a socket's batch is, each query through udp_answer_one()
 * with the client and server addresses of its frame's flow. */
void udp_xdp_batch(void *arg, xdp_query_t *qs, unsigned n);

/* tcp.c */
/** Preallocate n connection slots with their buffers and answer rings, the limits taken from
 * cfg (tcp_idle_timeout, tcp_max_lifetime, tcp_max_inflight). 0 or TERN_ENOMEM. The caller
 * sets the pool's kind (conn_tag, listen_tag, lfd, nlisten, local; tls and the handshake limits
 * for DoT: tcp_pool_tls()). */
int tcp_pool_init(tcp_pool_t *p, uint32_t n, const server_settings_t *set) TERN_WUR;
/** Make p a DoT pool: tls's credentials, set's handshake limits. */
void tcp_pool_tls(tcp_pool_t *p, tls_server_t *tls, const server_tls_settings_t *set);
/** Close every open connection and free the pool. */
void tcp_pool_free(tcp_pool_t *p);
/** Take the connections waiting on listener li of pool p (TCP or DoT). */
void tcp_accept(worker_t *w, tcp_pool_t *p, size_t li);
void tcp_conn_event(worker_t *w, tcp_pool_t *p, uint32_t idx, uint32_t gen, uint32_t events);
/** Close connections of p whose idle deadline, lifetime or handshake deadline passed; put
 * paused listeners back. */
void tcp_sweep(worker_t *w, tcp_pool_t *p);
/** epoll_wait timeout in ms until p's earliest idle, lifetime or handshake deadline or accept
 * pause end, or -1 when there is none. */
int tcp_next_timeout(const worker_t *w, const tcp_pool_t *p);

#endif
