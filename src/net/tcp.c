/*
 * tcp.c — DNS over TCP (RFC 7766) from a preallocated per-worker connection pool.
 *
 * Every slot owns a read buffer for one whole message (2 + 65535 bytes), a write queue of the
 * same size and a ring of tcp_max_inflight answer end offsets, all allocated at startup: the
 * query path allocates nothing. Messages are length-prefixed (RFC 1035 §4.2.2); a connection may
 * carry many queries, and the answers go out in the order the queries came (RFC 7766 §6.2.1.1
 * allows reordering, in-order keeps it simple and is what clients expect of pipelining).
 *
 * Policies, all chosen to bound what one peer can hold (time, memory, worker attention):
 *   - per client (tcp_max_per_client, over all workers, by client prefix): a client at its cap
 *     has its new connection closed at once. Counted tcp_client_capped.
 *   - pool full (tcp_max_connections): a slot held without work must not keep a newcomer out
 *     (RFC 7766 §10: at the limit, close idle connections or refuse new ones; §6.2.3 lets a
 *     loaded server use a zero idle timeout). A connection is idle when it has nothing
 *     half-read and nothing to write — connected and silent, or answered and silent — and busy
 *     otherwise. A newcomer to a full pool closes, in this order:
 *       1. an idle connection of the client prefix (tcp_client_prefix_v4/v6, as for
 *          tcp_max_per_client) holding the most idle connections in this pool, the one idle
 *          longest: whoever hoards slots pays first, so 250 addresses holding thousands of idle
 *          connections and reconnecting at once cannot starve a client asking once; among
 *          prefixes holding as many, the one that came to that count first;
 *       2. with none idle, the connection quiet longest if it has made no progress for
 *          TCP_EVICT_QUIET_MS (stalled mid-message, or not reading its answers);
 *     else it is accepted and closed at once: tcp_refused. 1 and 2 count tcp_evicted. A
 *     busy connection that progressed within the last second is never closed for a newcomer.
 *     NSD instead stops accepting when full and gives connections accepted while over half
 *     full a 200 ms timeout (server.c, handle_tcp_accept); Knot stops polling its listeners
 *     when full and sweeps idle connections every 2 s (tcp-handler.c). Both make a newcomer
 *     wait in the listen backlog behind the attacker's reconnects; closing an idle slot on
 *     demand is the zero timeout applied only when someone waits, so idle clients keep their
 *     connections while the pool has room.
 *     Cost: per worker, preallocated at startup (a peer per slot, a hash of 2x that many
 *     chains seeded at random, and by_idle[k] lists of the prefixes holding k idle
 *     connections with the highest k kept); every change is a count moving by one, so accept,
 *     close and an idle/busy change are O(1) plus one hash chain walk, with no allocation.
 *   - idle (tcp_idle_timeout): a connection whose deadline (the timeout after the last complete
 *     query or write progress) passes is closed. A peer trickling a message byte by byte, or
 *     sending a length prefix and stalling, does not refresh it. Open connections sit in a list
 *     ordered by deadline (all share one timeout, so "moved to the tail on activity" keeps it
 *     sorted). Counted tcp_closed_idle.
 *   - lifetime (tcp_max_lifetime): a connection is closed at accept time + lifetime whatever it
 *     does, so a busy peer cannot hold a slot forever. A second list keeps connections in accept
 *     order, which (one lifetime for all, a monotonic clock) is lifetime-deadline order. The
 *     sweep and tcp_next_timeout() look only at the two heads: O(1) per connection closed.
 *     Counted tcp_closed_life.
 *   - in flight (tcp_max_inflight) and backpressure: answers queued but not yet taken by the
 *     kernel are counted by a ring of their end offsets, consumed as writes progress. When the
 *     count reaches the cap, or the next answer does not fit the write queue, answering stops:
 *     the remaining complete queries stay in the read buffer, the socket is no longer read
 *     (EPOLLOUT only), and the TCP window pushes back on the peer. As writes drain, the
 *     buffered queries are answered and EPOLLIN is re-armed. A peer that never reads therefore
 *     makes no write progress and is closed by the idle timeout; its queue and buffers are its
 *     own, so nobody else waits for it. An answer never has to be dropped for size: the largest
 *     fits an empty queue (TCP_WBUF_SIZE), so tcp_closed_full is no longer counted.
 *   - a zero-length message, or one answer_query() cannot answer, closes the connection: the
 *     stream cannot be trusted to be in sync afterwards. Counted tcp_closed_bad.
 *   - the peer's EOF: the answers already due are written, then the connection is closed (a
 *     partial message is dropped); a reset or an I/O error closes at once. Counted
 *     tcp_closed_peer.
 *   - accept() out of descriptors or memory: the listener leaves epoll for TCP_ACCEPT_PAUSE_MS
 *     (worker.h) rather than spin a core on a socket that stays readable; counted
 *     tcp_accept_paused, logged once per worker.
 * Every close is counted under exactly one reason, so tcp_accepted = open + the tcp_closed_*.
 * Interest stays level-triggered: EPOLLIN unless paused or at EOF, EPOLLOUT only while output is
 * pending; conn_arm() changes it only when it differs.
 *
 * DoT (RFC 7858): a worker's second pool (w->tls, tcp_pool_tls()) runs the same code over
 * tern/net/tls.h — every limit above applies as is (its own slots: a handshake flood cannot take
 * TCP's) — with these additions:
 *   - the handshake, non-blocking: each event is one SSL_do_handshake() step, its WANT_READ/
 *     WANT_WRITE is the interest registered. Nothing is read as DNS before it finishes.
 *   - handshake_timeout_ms: a connection still in handshake then is closed (a third list, in
 *     accept order, which is deadline order). Counted tcp_closed_idle and tls_handshake_timeout;
 *     a client that connects and sends nothing, or half a ClientHello, ends here.
 *   - max_handshakes in progress per pool, max_handshakes_per_client per client prefix (as
 *     tcp_max_per_client counts clients): a newcomer past either is closed at accept
 *     (tls_handshake_refused), except that at max_handshakes the oldest handshake gives way if
 *     it has been going for TCP_EVICT_QUIET_MS. What a flood of handshakes can take from a
 *     worker per round is bounded by the first, what one client can take by the second.
 *   - OpenSSL reads a record at a time and may hold decrypted bytes rbuf had no room for; no
 *     readiness event reports them, so tls_read() and conn_event() read on while
 *     tls_conn_pending() says so.
 *   - a transfer on a DoT connection (XoT) is handed over with its SSL (server_handoff_t.tls).
 * Allocation: the SSL object and OpenSSL's buffers at accept (freed at close); nothing of ours
 * per query (OpenSSL 3.0's record layer makes a few 40-byte frames per record, test_tls.c).
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "tern/common/err.h"
#include "tern/common/hash.h"
#include "tern/common/log.h"
#include "worker.h"

/* answer_query() writes at most TCP_MSG_MAX - 2 bytes after the prefix: every answer fits an
 * empty write queue, so waiting for room always ends (or the idle timeout ends the wait). */
_Static_assert(TCP_WBUF_SIZE >= TCP_MSG_MAX, "the largest answer must fit an empty write queue");

/* Why a connection ends; each close is counted under exactly one (see the header). */
typedef enum {
    KEEP = 0,
    CLOSE_PEER,
    CLOSE_BAD,
    CLOSE_IDLE,
    CLOSE_LIFE,
    CLOSE_EVICT,
    CLOSE_HS_FAIL, /* DoT: the handshake failed */
    CLOSE_HS_TIME, /* DoT: the handshake did not finish in time */
    HANDED,        /* the transfer thread has the descriptor now: forget it, do not close it */
} verdict_t;

/* One client prefix with connections in this pool (see the header: who pays first). */
struct tcp_peer {
    tcp_peer_t *hnext;         /* hash chain, or the free list */
    tcp_peer_t *bprev, *bnext; /* the prefixes holding as many idle connections, longest first */
    tcp_conn_t *ihead, *itail; /* its idle connections, idle longest first */
    uint32_t nconn;            /* connections it holds in this pool */
    uint32_t nidle;            /* ... of which idle: its by_idle index */
    uint32_t nhs;              /* ... of which in a TLS handshake (DoT pool) */
    uint8_t family;            /* 4 or 6; 0 for a non-IP peer (they all share one) */
    uint8_t key[16];           /* the address masked to its client prefix */
};

int tcp_pool_init(tcp_pool_t *p, uint32_t n, const server_settings_t *cfg)
{
    memset(p, 0, sizeof(*p));
    /* No more answers than TCP_WBUF_SIZE / TCP_ANSWER_MIN can be queued at once whatever the
     * option says, so a larger ring would never be used. */
    uint32_t ring = cfg->tcp_max_inflight;
    if (ring > TCP_WBUF_SIZE / TCP_ANSWER_MIN)
        ring = TCP_WBUF_SIZE / TCP_ANSWER_MIN;
    if (ring == 0)
        ring = 1;
    /* cache-line aligned, like the worker itself: no line is shared with another worker's data */
    size_t conns_size =
        ((size_t)n * sizeof(*p->conns) + TERN_CACHELINE - 1) & ~(size_t)(TERN_CACHELINE - 1);
    p->conns = aligned_alloc(TERN_CACHELINE, conns_size);
    if (p->conns)
        memset(p->conns, 0, conns_size);
    /* malloc, not calloc: the kernel hands out untouched pages, so an idle pool costs address
     * space, not memory. */
    p->bufs = malloc((size_t)n * (TCP_MSG_MAX + TCP_WBUF_SIZE));
    p->ends = malloc((size_t)n * ring * sizeof(*p->ends));
    p->out = malloc(TCP_MSG_MAX);
    /* at most one peer per connection; twice as many chains as peers keeps them short */
    uint32_t heads = 1;
    while (heads < 2 * n)
        heads <<= 1;
    p->peers = calloc(n, sizeof(*p->peers));
    p->peer_hash = calloc(heads, sizeof(*p->peer_hash));
    p->by_idle = calloc((size_t)n + 1, sizeof(*p->by_idle));
    p->by_idle_tail = calloc((size_t)n + 1, sizeof(*p->by_idle_tail));
    if (!p->conns || !p->bufs || !p->ends || !p->out || !p->peers || !p->peer_hash || !p->by_idle ||
        !p->by_idle_tail) {
        tcp_pool_free(p);
        return TERN_ENOMEM;
    }
    p->n = n;
    p->ring = ring;
    p->idle_ms = (int64_t)cfg->tcp_idle_timeout * 1000;
    p->life_ms = (int64_t)cfg->tcp_max_lifetime * 1000;
    for (uint32_t i = n; i-- > 0;) {
        tcp_conn_t *c = &p->conns[i];
        c->fd = -1;
        c->rbuf = p->bufs + (size_t)i * (TCP_MSG_MAX + TCP_WBUF_SIZE);
        c->wbuf = c->rbuf + TCP_MSG_MAX;
        c->ends = p->ends + (size_t)i * ring;
        c->pool = p;
        c->next = p->free;
        p->free = c;
    }
    for (uint32_t i = n; i-- > 0;) {
        p->peers[i].hnext = p->peer_free;
        p->peer_free = &p->peers[i];
    }
    p->hmask = heads - 1;
    p->pfx4 = (uint8_t)(cfg->tcp_client_prefix_v4 ? cfg->tcp_client_prefix_v4 : 32);
    p->pfx6 = (uint8_t)(cfg->tcp_client_prefix_v6 ? cfg->tcp_client_prefix_v6 : 64);
    /* a seed the peers cannot guess, so no set of addresses lines up in one chain */
    if (getrandom(&p->seed, sizeof(p->seed), GRND_NONBLOCK) != (ssize_t)sizeof(p->seed)) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        p->seed = tern_mix64((uint64_t)ts.tv_nsec ^ (uint64_t)(uintptr_t)p);
    }
    p->conn_tag = TAG_CONN;
    p->listen_tag = TAG_LISTEN;
    return 0;
}

void tcp_pool_tls(tcp_pool_t *p, tls_server_t *tls, const server_tls_settings_t *set)
{
    p->tls = tls;
    p->conn_tag = TAG_TLS_CONN;
    p->listen_tag = TAG_TLS_LISTEN;
    p->max_hs = set->max_handshakes ? set->max_handshakes : 1;
    p->max_hs_client = set->max_handshakes_per_client ? set->max_handshakes_per_client : 1;
    p->hs_ms = set->handshake_timeout_ms;
}

void tcp_pool_free(tcp_pool_t *p)
{
    if (p->tls && p->head)
        tls_thread_init(); /* the stopping thread writes close_notify to DoT clients */
    for (tcp_conn_t *c = p->head; c; c = c->next) {
        /* shutting down: hand the kernel the answers already made (one try, never blocking), so
         * a stop finishes what is in flight instead of dropping it */
        if (c->ssl) {
            if (!c->handshake && c->woff < c->wlen) {
                ssize_t n = tls_conn_write(c->ssl, c->wbuf + c->woff, c->wlen - c->woff);
                (void)n; /* best effort, as below */
            }
            tls_conn_free(c->ssl);
        } else if (c->woff < c->wlen) {
            (void)send(c->fd, c->wbuf + c->woff, c->wlen - c->woff, MSG_DONTWAIT | MSG_NOSIGNAL);
        }
        close(c->fd);
    }
    free(p->conns);
    free(p->bufs);
    free(p->ends);
    free(p->out);
    free(p->peers);
    free(p->peer_hash);
    free(p->by_idle);
    free(p->by_idle_tail);
    memset(p, 0, sizeof(*p));
}

/* ---- the lists ------------------------------------------------------------------------------ */

/* Intrusive doubly linked lists with a head and a tail. The pool keeps four, each through its own
 * link fields: open connections by idle deadline and by lifetime, a prefix's idle connections,
 * and the prefixes holding k idle connections. */
#define DL_UNLINK(head, tail, x, prev, next)                                                       \
    do {                                                                                           \
        if ((x)->prev)                                                                             \
            (x)->prev->next = (x)->next;                                                           \
        else                                                                                       \
            (head) = (x)->next;                                                                    \
        if ((x)->next)                                                                             \
            (x)->next->prev = (x)->prev;                                                           \
        else                                                                                       \
            (tail) = (x)->prev;                                                                    \
        (x)->prev = (x)->next = NULL;                                                              \
    } while (0)

#define DL_APPEND(head, tail, x, prev, next)                                                       \
    do {                                                                                           \
        (x)->next = NULL;                                                                          \
        (x)->prev = (tail);                                                                        \
        if (tail)                                                                                  \
            (tail)->next = (x);                                                                    \
        else                                                                                       \
            (head) = (x);                                                                          \
        (tail) = (x);                                                                              \
    } while (0)

static void list_unlink(tcp_pool_t *p, tcp_conn_t *c)
{
    DL_UNLINK(p->head, p->tail, c, prev, next);
}

static void list_append(tcp_pool_t *p, tcp_conn_t *c)
{
    DL_APPEND(p->head, p->tail, c, prev, next);
}

static void life_unlink(tcp_pool_t *p, tcp_conn_t *c)
{
    DL_UNLINK(p->lhead, p->ltail, c, lprev, lnext);
}

static void life_append(tcp_pool_t *p, tcp_conn_t *c)
{
    DL_APPEND(p->lhead, p->ltail, c, lprev, lnext);
}

/* ---- who pays first: client prefixes and their idle connections ------------------------------ */

/* The client prefix of sa, as tcp_max_per_client counts clients (tcp_client_prefix_v4/v6). */
static void peer_key(const tcp_pool_t *p, const struct sockaddr *sa, uint8_t *family,
                     uint8_t key[16])
{
    limit_client_t lc;
    limit_client_of(&lc, sa);
    unsigned len = lc.family == 4 ? p->pfx4 : lc.family == 6 ? p->pfx6 : 0;
    memset(key, 0, 16);
    memcpy(key, lc.addr, len / 8);
    if (len % 8)
        key[len / 8] = lc.addr[len / 8] & (uint8_t)(0xFF << (8 - len % 8));
    *family = lc.family;
}

static tcp_peer_t **peer_chain(tcp_pool_t *p, uint8_t family, const uint8_t key[16])
{
    return &p->peer_hash[tern_hash64(key, 16, p->seed ^ family) & p->hmask];
}

/* The peer of sa, added with no connection when new; NULL only if every peer is taken, which
 * cannot happen while a connection slot is free (one peer per connection at most). */
static tcp_peer_t *peer_get(tcp_pool_t *p, const struct sockaddr *sa)
{
    uint8_t family, key[16];
    peer_key(p, sa, &family, key);
    tcp_peer_t **chain = peer_chain(p, family, key);
    for (tcp_peer_t *e = *chain; e; e = e->hnext)
        if (e->family == family && memcmp(e->key, key, 16) == 0)
            return e;
    tcp_peer_t *e = p->peer_free;
    if (!e)
        return NULL;
    p->peer_free = e->hnext;
    memset(e, 0, sizeof(*e));
    e->family = family;
    memcpy(e->key, key, 16);
    e->hnext = *chain;
    *chain = e;
    return e;
}

/* e holds no connection any more: back to the free list. */
static void peer_put(tcp_pool_t *p, tcp_peer_t *e)
{
    tcp_peer_t **pp = peer_chain(p, e->family, e->key);
    while (*pp != e)
        pp = &(*pp)->hnext;
    *pp = e->hnext;
    e->hnext = p->peer_free;
    p->peer_free = e;
}

/* e's idle count goes up or down by one: it moves to the tail of the next by_idle list. A step
 * of one keeps top exact in O(1): when e leaves the top list empty, it lands on the one below
 * (or on none, from 1 to 0). */
static void peer_step(tcp_pool_t *p, tcp_peer_t *e, bool up)
{
    uint32_t k = e->nidle;
    if (k > 0)
        DL_UNLINK(p->by_idle[k], p->by_idle_tail[k], e, bprev, bnext);
    e->nidle = up ? k + 1 : k - 1;
    if (e->nidle > 0)
        DL_APPEND(p->by_idle[e->nidle], p->by_idle_tail[e->nidle], e, bprev, bnext);
    if (e->nidle > p->top)
        p->top = e->nidle;
    else if (k == p->top && !p->by_idle[k])
        p->top = e->nidle;
}

static void idle_enter(tcp_pool_t *p, tcp_conn_t *c)
{
    c->idle = true;
    DL_APPEND(c->owner->ihead, c->owner->itail, c, iprev, inext);
    peer_step(p, c->owner, true);
}

static void idle_leave(tcp_pool_t *p, tcp_conn_t *c)
{
    c->idle = false;
    DL_UNLINK(c->owner->ihead, c->owner->itail, c, iprev, inext);
    peer_step(p, c->owner, false);
}

/* After c's event: idle is nothing half-read, nothing to write (a connection that has not asked
 * yet, or has had every answer written); anything else is busy with a query. */
static void conn_settle(tcp_pool_t *p, tcp_conn_t *c)
{
    bool idle = c->rlen == 0 && c->woff == c->wlen && !c->eof;
    if (idle == c->idle)
        return;
    if (idle)
        idle_enter(p, c);
    else
        idle_leave(p, c);
}

/* The pool is full: the connection to close for a newcomer, or NULL (refuse it). An idle one of
 * the prefix holding the most idle connections, idle longest; with none idle, the one quiet
 * longest if it has made no progress for TCP_EVICT_QUIET_MS (stalled mid-message, or not
 * reading its answers). */
static tcp_conn_t *evict_victim(const worker_t *w, const tcp_pool_t *p)
{
    if (p->top > 0)
        return p->by_idle[p->top]->ihead;
    if (p->head && w->now_ms - (p->head->deadline_ms - p->idle_ms) >= TCP_EVICT_QUIET_MS)
        return p->head;
    return NULL;
}

/* Activity: push the idle deadline out and keep the list sorted by moving c to the tail. */
static void touch(worker_t *w, tcp_conn_t *c)
{
    c->deadline_ms = w->now_ms + c->pool->idle_ms;
    if (c->pool->tail != c) {
        list_unlink(c->pool, c);
        list_append(c->pool, c);
    }
}

/* DoT handshakes in progress: a list in deadline order (one timeout for all: accept order), and
 * counts per pool and per client prefix for the limits at accept. */
static void hs_enter(tcp_pool_t *p, tcp_conn_t *c)
{
    c->handshake = true;
    c->hs_want = EPOLLIN; /* the ClientHello */
    DL_APPEND(p->hhead, p->htail, c, hprev, hnext);
    p->nhs++;
    c->owner->nhs++;
}

static void hs_leave(tcp_pool_t *p, tcp_conn_t *c)
{
    c->handshake = false;
    DL_UNLINK(p->hhead, p->htail, c, hprev, hnext);
    p->nhs--;
    c->owner->nhs--;
}

static void conn_close(worker_t *w, tcp_conn_t *c, verdict_t why)
{
    switch (why) {
    case CLOSE_BAD:
        NET_COUNT(w, tcp_closed_bad, 1);
        break;
    case CLOSE_IDLE:
        NET_COUNT(w, tcp_closed_idle, 1);
        break;
    case CLOSE_LIFE:
        NET_COUNT(w, tcp_closed_life, 1);
        break;
    case CLOSE_EVICT:
        NET_COUNT(w, tcp_evicted, 1);
        break;
    case CLOSE_HS_FAIL:
        NET_COUNT(w, tcp_closed_bad, 1);
        NET_COUNT(w, tls_handshake_failed, 1);
        break;
    case CLOSE_HS_TIME:
        NET_COUNT(w, tcp_closed_idle, 1);
        NET_COUNT(w, tls_handshake_timeout, 1);
        break;
    case HANDED:
        NET_COUNT(w, tcp_handed_off, 1);
        break;
    default:
        NET_COUNT(w, tcp_closed_peer, 1);
        break;
    }
    if (c->handshake)
        hs_leave(c->pool, c);
    if (why != HANDED) {
        tls_conn_free(c->ssl); /* NULL on plain TCP */
        close(c->fd);          /* also removes it from the epoll set */
    }
    c->ssl = NULL;
    if (w->srv->limits) {
        limit_client_t lc;
        limit_client_of(&lc, (const struct sockaddr *)&c->peer);
        limit_tcp_release(w->srv->limits, &lc);
    }
    if (c->idle)
        idle_leave(c->pool, c);
    if (--c->owner->nconn == 0)
        peer_put(c->pool, c->owner);
    c->owner = NULL;
    list_unlink(c->pool, c);
    life_unlink(c->pool, c);
    c->fd = -1;
    c->gen++;
    c->rlen = c->woff = c->wlen = 0;
    c->qhead = c->qlen = c->need = c->events = 0;
    c->paused = c->eof = false;
    c->next = c->pool->free;
    c->pool->free = c;
}

/* Register the interest c's state calls for: read unless paused or at EOF, write while output
 * is pending. One epoll_ctl, and only when it changes. */
static verdict_t conn_arm(worker_t *w, tcp_conn_t *c)
{
    uint32_t want = (c->eof || c->paused ? 0 : EPOLLIN) | (c->woff < c->wlen ? EPOLLOUT : 0);
    if (c->handshake)
        want = c->hs_want;
    if (want == c->events)
        return KEEP;
    struct epoll_event ev = {.events = want};
    ev.data.u64 = TAG_MAKE(c->pool->conn_tag, c->gen, (uint32_t)(c - c->pool->conns));
    if (epoll_ctl(w->epfd, EPOLL_CTL_MOD, c->fd, &ev) < 0)
        return CLOSE_PEER;
    c->events = want;
    return KEEP;
}

/* ---- output --------------------------------------------------------------------------------- */

/* Write what is queued until done or the kernel pushes back, then retire the answers that went
 * out from the ring. KEEP, or CLOSE_PEER when the write failed (reset, EPIPE). Bounded: each
 * round either makes progress or ends, and progress is capped by the queue. */
static verdict_t flush(worker_t *w, tcp_conn_t *c)
{
    bool progress = false;
    while (c->woff < c->wlen) {
        ssize_t n;
        if (c->ssl) {
            n = tls_conn_write(c->ssl, c->wbuf + c->woff, c->wlen - c->woff);
            /* WANT_READ (a TLS 1.3 key update in flight): EPOLLIN is armed while we write */
            if (n == TLS_IO_WANT_WRITE || n == TLS_IO_WANT_READ)
                break;
        } else {
            /* send, not write: MSG_NOSIGNAL turns a reset peer into EPIPE instead of a
             * process-wide SIGPIPE */
            n = send(c->fd, c->wbuf + c->woff, c->wlen - c->woff, MSG_NOSIGNAL);
            if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
                break;
        }
        if (n > 0) {
            c->woff += (uint32_t)n;
            progress = true;
            continue;
        }
        return CLOSE_PEER;
    }
    if (!progress)
        return KEEP;
    touch(w, c);
    uint32_t ring = c->pool->ring;
    while (c->qlen > 0 && c->ends[c->qhead] <= c->woff) {
        c->qlen--;
        if (++c->qhead == ring)
            c->qhead = 0;
    }
    if (c->woff == c->wlen)
        c->woff = c->wlen = 0; /* every answer is out: the ring is empty too */
    return KEEP;
}

/* Append one answer if it fits, compacting already-written bytes away first (and shifting the
 * ring's offsets with them). The caller checked that the ring has a free slot. */
static bool try_append(worker_t *w, tcp_conn_t *c, const uint8_t *data, size_t len)
{
    uint32_t ring = c->pool->ring;
    if (c->woff > 0 && TCP_WBUF_SIZE - c->wlen < len) {
        memmove(c->wbuf, c->wbuf + c->woff, c->wlen - c->woff);
        /* at most tcp_max_inflight entries, and only when the tail of the queue is full */
        for (uint32_t k = 0, i = c->qhead; k < c->qlen; k++, i = i + 1 == ring ? 0 : i + 1)
            c->ends[i] -= c->woff;
        c->wlen -= c->woff;
        c->woff = 0;
    }
    if (TCP_WBUF_SIZE - c->wlen < len)
        return false;
    memcpy(c->wbuf + c->wlen, data, len);
    c->wlen += (uint32_t)len;
    uint32_t slot = c->qhead + c->qlen;
    c->ends[slot >= ring ? slot - ring : slot] = c->wlen;
    c->qlen++;
    return true;
}

/* Whether a paused connection may answer again: a free ring slot, and room in the write queue
 * for the answer that did not fit (need; 0 when it paused on the in-flight cap). */
static bool can_resume(const worker_t *w, const tcp_conn_t *c)
{
    return c->qlen < c->pool->ring && TCP_WBUF_SIZE - (c->wlen - c->woff) >= c->need;
}

/* ---- input ---------------------------------------------------------------------------------- */

/* Give c to the transfer thread with the request at rbuf + off and whatever followed it. */
static verdict_t hand_over(worker_t *w, tcp_conn_t *c, uint32_t off)
{
    const server_handoff_t *h = &w->srv->handoff;
    if (c->ssl ? !h->tls : !h->tcp) {
        NET_COUNT(w, handoff_full, 1);
        return CLOSE_BAD;
    }
    /* out of this worker's epoll set before anyone else may touch the descriptor */
    (void)epoll_ctl(w->epfd, EPOLL_CTL_DEL, c->fd, NULL);
    c->events = 0;
    const struct sockaddr_storage *local = &c->pool->local[c->li];
    bool taken = c->ssl
                     ? h->tls(h->ctx, c->fd, c->ssl, c->rbuf + off, c->rlen - off, &c->peer, local)
                     : h->tcp(h->ctx, c->fd, c->rbuf + off, c->rlen - off, &c->peer, local);
    if (!taken) {
        NET_COUNT(w, handoff_full, 1);
        return CLOSE_BAD;
    }
    c->ssl = NULL; /* the transfer thread's now, with the descriptor */
    return HANDED;
}

/* Answer the complete messages in rbuf until they run out or backpressure pauses c (ring full,
 * or no room for the next answer even after writing what the kernel takes); keep the rest. */
static verdict_t process(worker_t *w, tcp_conn_t *c)
{
    uint8_t *out = c->pool->out;
    uint32_t off = 0;
    verdict_t v = KEEP;
    worker_clock(w);
    while (c->rlen - off >= 2) {
        size_t mlen = (size_t)c->rbuf[off] << 8 | c->rbuf[off + 1];
        if (mlen == 0)
            return CLOSE_BAD;
        if (c->rlen - off - 2 < mlen)
            break;
        if (c->qlen >= c->pool->ring) {
            c->paused = true;
            c->need = 0;
            break;
        }
        size_t alen = answer_query(w->view, &w->actx, (const struct sockaddr *)&c->peer,
                                   c->rbuf + off + 2, mlen, out + 2, TCP_MSG_MAX - 2, ANSWER_TCP);
        if (alen == 0) {
            if (w->actx.info.outcome == ANSWER_HANDOFF) {
                /* a transfer (or NOTIFY, or a signed request): the answers queued before it
                 * go out first, then the connection is the transfer thread's */
                if (c->woff < c->wlen && (v = flush(w, c)) != KEEP)
                    return v;
                if (c->woff < c->wlen) {
                    c->paused = true;
                    c->need = TCP_WBUF_SIZE; /* resume once the queue is empty */
                    break;
                }
                net_count_answer(w, ANSWER_TCP, &w->actx.info);
                return hand_over(w, c, off);
            }
            net_count_answer(w, ANSWER_TCP, &w->actx.info);
            return CLOSE_BAD;
        }
        out[0] = (uint8_t)(alen >> 8);
        out[1] = (uint8_t)alen;
        if (!try_append(w, c, out, alen + 2)) {
            /* make room by writing; if the kernel will not take enough, wait for EPOLLOUT with
             * the query still buffered (answered again then: no per-connection answer store) */
            if ((v = flush(w, c)) != KEEP)
                return v;
            if (!try_append(w, c, out, alen + 2)) {
                c->paused = true;
                c->need = (uint32_t)alen + 2;
                break;
            }
        }
        /* counted once queued, so an answer redone after a pause is counted once */
        net_count_answer(w, ANSWER_TCP, &w->actx.info);
        if (unlikely(w->qring != NULL)) {
            const qlog_query_t qq = {.client = (const struct sockaddr *)&c->peer,
                                     .server = (const struct sockaddr *)&c->pool->local[c->li],
                                     .tcp = true,
                                     .qtime_ns = w->qtime_ns,
                                     .query = c->rbuf + off + 2,
                                     .qlen = mlen,
                                     .response = out + 2,
                                     .rlen = alen};
            qlog_worker_put(w->srv->qlog, w->qring, &w->actx, &qq);
        }
        NET_COUNT(w, tcp_queries, 1);
        if (c->ssl)
            NET_COUNT(w, tls_queries, 1);
        touch(w, c);
        off += 2 + (uint32_t)mlen;
    }
    if (off > 0) {
        memmove(c->rbuf, c->rbuf + off, c->rlen - off);
        c->rlen -= off;
    }
    return KEEP;
}

/* Answer what is buffered and write it out; while writing frees room for a paused connection,
 * go on. Bounded: a round that resumes answers at least one buffered query or ends. */
static verdict_t serve(worker_t *w, tcp_conn_t *c)
{
    for (;;) {
        verdict_t v = process(w, c);
        if (v == KEEP)
            v = flush(w, c);
        if (v != KEEP || !c->paused || !can_resume(w, c))
            return v;
        c->paused = false;
    }
}

static verdict_t tls_read(worker_t *w, tcp_conn_t *c);

/* One read per readiness event (level-triggered: the rest is reported again), so one busy peer
 * cannot monopolise the worker. Only called while not paused, when rbuf holds at most a partial
 * message, so there is always room. */
static verdict_t conn_read(worker_t *w, tcp_conn_t *c)
{
    if (c->ssl)
        return tls_read(w, c);
    ssize_t n = read(c->fd, c->rbuf + c->rlen, TCP_MSG_MAX - c->rlen);
    if (n < 0)
        return (errno == EAGAIN || errno == EWOULDBLOCK) ? KEEP : CLOSE_PEER;
    if (n == 0) {
        /* Half-close after the last query is legitimate (RFC 7766 §6.2.3 lets the server close
         * once answers are sent): finish writing, then close. A partial message is dropped. */
        c->eof = true;
        return KEEP;
    }
    c->rlen += (uint32_t)n;
    return serve(w, c);
}

/* DoT: read what the socket has. OpenSSL reads one record at a time and keeps what did not fit
 * rbuf (tls_conn_pending()); the socket does not report that as readable, so read on while
 * OpenSSL holds some and c takes more. Bounded: each round empties part of one record, or
 * ends. Called, as conn_read(), while not paused with at most a partial message in rbuf. */
static verdict_t tls_read(worker_t *w, tcp_conn_t *c)
{
    do {
        ssize_t n = tls_conn_read(c->ssl, c->rbuf + c->rlen, TCP_MSG_MAX - c->rlen);
        if (n == TLS_IO_WANT_READ || n == TLS_IO_WANT_WRITE)
            return KEEP;
        if (n == TLS_IO_EOF) {
            c->eof = true; /* as conn_read(): finish writing, then close */
            return KEEP;
        }
        if (n < 0)
            return CLOSE_PEER;
        c->rlen += (uint32_t)n;
        verdict_t v = serve(w, c);
        if (v != KEEP)
            return v;
    } while (!c->paused && !c->eof && tls_conn_pending(c->ssl) > 0);
    return KEEP;
}

/* DoT: one step of c's handshake. Once done it is counted, its idle deadline starts, and what
 * the client sent right behind its Finished (OpenSSL may hold it already) is read. */
static verdict_t tls_step(worker_t *w, tcp_conn_t *c)
{
    int r = tls_conn_handshake(c->ssl);
    if (r == TLS_IO_WANT_READ || r == TLS_IO_WANT_WRITE) {
        c->hs_want = r == TLS_IO_WANT_READ ? EPOLLIN : EPOLLOUT;
        return KEEP;
    }
    if (r != 0)
        return r == TLS_IO_EOF ? CLOSE_PEER : CLOSE_HS_FAIL;
    hs_leave(c->pool, c);
    NET_COUNT(w, tls_handshakes, 1);
    if (tls_conn_resumed(c->ssl))
        NET_COUNT(w, tls_resumed, 1);
    touch(w, c);
    return tls_read(w, c);
}

static verdict_t conn_event(worker_t *w, tcp_conn_t *c, uint32_t events)
{
    verdict_t v;
    if (events & EPOLLERR)
        return CLOSE_PEER;
    if (c->handshake) {
        if ((v = tls_step(w, c)) != KEEP)
            return v;
        if (c->handshake)
            return conn_arm(w, c);
        events = 0; /* the event was the handshake's; tls_step() read what followed it */
    }
    if ((events & EPOLLOUT) && c->woff < c->wlen) {
        if ((v = flush(w, c)) != KEEP)
            return v;
        if (c->paused && can_resume(w, c)) {
            /* the peer read enough: answer what waited in rbuf, then read again */
            c->paused = false;
            if ((v = serve(w, c)) != KEEP)
                return v;
        }
    }
    /* DoT: records OpenSSL holds while c was paused are not a readiness event */
    if (!c->eof && !c->paused &&
        ((events & (EPOLLIN | EPOLLHUP)) || (c->ssl && tls_conn_pending(c->ssl) > 0))) {
        if ((v = conn_read(w, c)) != KEEP)
            return v;
    }
    if (c->eof && c->woff == c->wlen)
        return CLOSE_PEER; /* everything due is written */
    /* a hang-up means nothing more can be written, nor read while paused or at EOF */
    if ((events & EPOLLHUP) && (c->eof || c->paused))
        return CLOSE_PEER;
    return conn_arm(w, c);
}

void tcp_conn_event(worker_t *w, tcp_pool_t *p, uint32_t idx, uint32_t gen, uint32_t events)
{
    if (idx >= p->n)
        return;
    tcp_conn_t *c = &p->conns[idx];
    if (c->fd < 0 || (c->gen & 0xFFFFFFu) != gen)
        return; /* closed (and maybe reused) earlier in this round */
    verdict_t v = conn_event(w, c, events);
    if (v != KEEP)
        conn_close(w, c, v);
    else
        conn_settle(c->pool, c);
}

/* Out of descriptors or memory: stop watching listener li of p for TCP_ACCEPT_PAUSE_MS
 * (tcp_sweep() puts it back), count it, and say so once per worker and pool. */
static void accept_pause(worker_t *w, tcp_pool_t *p, size_t li, int err)
{
    struct epoll_event ev = {.events = 0};
    ev.data.u64 = TAG_MAKE(p->listen_tag, 0, li);
    if (epoll_ctl(w->epfd, EPOLL_CTL_MOD, p->lfd[li], &ev) == 0) {
        p->accept_paused |= 1u << li;
        p->accept_resume_ms = w->now_ms + TCP_ACCEPT_PAUSE_MS;
    }
    NET_COUNT(w, tcp_accept_paused, 1);
    if (!p->accept_logged) {
        p->accept_logged = true;
        log_warn("worker %u: accept: %s; new %s connections wait %d ms at a time until "
                 "descriptors are free (raise LimitNOFILE / ulimit -n, or lower "
                 "tcp_max_connections); counted as tcp_accept_paused, logged once",
                 w->id, strerror(err), p->tls ? "DoT" : "TCP", TCP_ACCEPT_PAUSE_MS);
    }
}

static void accept_resume(worker_t *w, tcp_pool_t *p)
{
    for (size_t li = 0; li < p->nlisten; li++) {
        if (!(p->accept_paused & (1u << li)))
            continue;
        struct epoll_event ev = {.events = EPOLLIN};
        ev.data.u64 = TAG_MAKE(p->listen_tag, 0, li);
        if (epoll_ctl(w->epfd, EPOLL_CTL_MOD, p->lfd[li], &ev) == 0)
            p->accept_paused &= ~(1u << li);
    }
    if (p->accept_paused) /* could not re-arm (ENOMEM): try again after another pause */
        p->accept_resume_ms = w->now_ms + TCP_ACCEPT_PAUSE_MS;
}

/* DoT: whether a handshake may start for owner. At max_handshakes, the oldest handshake makes
 * room if it has been going for TCP_EVICT_QUIET_MS (a client that stalls its handshake pays
 * before one that has just begun); a client prefix at max_handshakes_per_client waits for its
 * own to finish. A refusal closes the newcomer at once: its client retries, while a flood of
 * handshakes can hold no more than max_handshakes of the worker's attention at a time. */
static bool hs_admit(worker_t *w, tcp_pool_t *p, const tcp_peer_t *owner)
{
    if (owner->nhs >= p->max_hs_client)
        return false;
    if (p->nhs < p->max_hs)
        return true;
    tcp_conn_t *old = p->hhead;
    if (!old || w->now_ms - (old->hs_deadline_ms - p->hs_ms) < TCP_EVICT_QUIET_MS ||
        old->owner == owner)
        return false;
    conn_close(w, old, CLOSE_EVICT);
    return true;
}

/* Connection c of p takes the accepted fd from peer on listener li; DoT: its handshake starts.
 * false: not taken (epoll or OpenSSL out of memory), nothing of it kept. */
static bool conn_open(worker_t *w, tcp_pool_t *p, tcp_conn_t *c, tcp_peer_t *owner, int fd,
                      const struct sockaddr_storage *peer, size_t li)
{
    if (p->tls && !(c->ssl = tls_conn_new(p->tls, fd)))
        return false;
    struct epoll_event ev = {.events = EPOLLIN};
    ev.data.u64 = TAG_MAKE(p->conn_tag, c->gen, (uint32_t)(c - p->conns));
    if (epoll_ctl(w->epfd, EPOLL_CTL_ADD, fd, &ev) < 0) {
        tls_conn_free(c->ssl);
        c->ssl = NULL;
        return false;
    }
    p->free = c->next;
    c->fd = fd;
    c->peer = *peer;
    c->li = (uint8_t)li;
    c->events = EPOLLIN;
    c->next = c->prev = NULL;
    c->deadline_ms = w->now_ms + p->idle_ms;
    c->life_ms = w->now_ms + p->life_ms;
    list_append(p, c);
    life_append(p, c);
    c->owner = owner;
    owner->nconn++;
    idle_enter(p, c); /* nothing read yet */
    if (p->tls) {
        c->hs_deadline_ms = w->now_ms + p->hs_ms;
        hs_enter(p, c);
    }
    NET_COUNT(w, tcp_accepted, 1);
    return true;
}

void tcp_accept(worker_t *w, tcp_pool_t *p, size_t li)
{
    for (unsigned k = 0; k < TCP_ACCEPT_BATCH; k++) {
        struct sockaddr_storage peer;
        socklen_t plen = sizeof(peer);
        int fd = accept4(p->lfd[li], (struct sockaddr *)&peer, &plen, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM)
                accept_pause(w, p, li, errno);
            return; /* EAGAIN: nothing more waiting; ECONNABORTED and the like: next event */
        }
        /* one client prefix holds at most tcp_max_per_client connections of all workers */
        limit_client_t lc;
        limit_client_of(&lc, (const struct sockaddr *)&peer);
        if (!limit_tcp_acquire(w->srv->limits, &lc)) {
            NET_COUNT(w, tcp_client_capped, 1);
            close(fd);
            continue;
        }
        tcp_conn_t *c = p->free;
        if (!c) {
            /* pool full: a connection holding a slot without work makes room (see the header) */
            tcp_conn_t *victim = evict_victim(w, p);
            if (victim) {
                conn_close(w, victim, CLOSE_EVICT);
                c = p->free;
            }
        }
        tcp_peer_t *owner = c ? peer_get(p, (const struct sockaddr *)&peer) : NULL;
        bool hs_ok = !owner || !p->tls || hs_admit(w, p, owner);
        if (!owner || !hs_ok) {
            if (!owner)
                NET_COUNT(w, tcp_refused, 1);
            else
                NET_COUNT(w, tls_handshake_refused, 1);
            if (owner && owner->nconn == 0)
                peer_put(p, owner);
            limit_tcp_release(w->srv->limits, &lc);
            close(fd);
            continue;
        }
        c = p->free; /* hs_admit() may have freed a slot and c with it: take the head again */
        if (!conn_open(w, p, c, owner, fd, &peer, li)) {
            if (owner->nconn == 0)
                peer_put(p, owner);
            limit_tcp_release(w->srv->limits, &lc);
            close(fd);
        }
    }
}

void tcp_sweep(worker_t *w, tcp_pool_t *p)
{
    /* The lists are sorted by their deadline: bounded by the connections closed, each round
     * closes one. */
    while (p->hhead && p->hhead->hs_deadline_ms <= w->now_ms)
        conn_close(w, p->hhead, CLOSE_HS_TIME);
    while (p->lhead && p->lhead->life_ms <= w->now_ms)
        conn_close(w, p->lhead, CLOSE_LIFE);
    while (p->head && p->head->deadline_ms <= w->now_ms)
        conn_close(w, p->head, CLOSE_IDLE);
    if (unlikely(p->accept_paused) && p->accept_resume_ms <= w->now_ms)
        accept_resume(w, p);
}

int tcp_next_timeout(const worker_t *w, const tcp_pool_t *p)
{
    if (!p->head && !p->accept_paused)
        return -1;
    int64_t next = INT64_MAX;
    if (p->head)
        next = p->head->deadline_ms;
    if (p->lhead && p->lhead->life_ms < next)
        next = p->lhead->life_ms;
    if (p->hhead && p->hhead->hs_deadline_ms < next)
        next = p->hhead->hs_deadline_ms;
    if (p->accept_paused && p->accept_resume_ms < next)
        next = p->accept_resume_ms;
    int64_t d = next - w->now_ms;
    if (d <= 0)
        return 0;
    return d > 3600 * 1000 ? 3600 * 1000 : (int)d;
}
