/*
 * worker.c — one worker thread's event loop.
 *
 * Epoll mode: go RCU-offline, epoll_wait (timeout = the earliest TCP deadline), come back online,
 * read the monotonic clock once (clock_gettime is a vDSO call, not a syscall), then for every
 * ready descriptor: dereference the published view, handle the event, report a quiescent state;
 * finally close idle connections.
 *
 * Busy mode (worker.h): once its one UDP socket has steady traffic, the worker blocks in recvmmsg
 * on it directly — the way gdnsd's UDP threads and the bench's reflector do — and looks at epoll
 * with a zero timeout at least every UDP_BUSY_POLL_US for TCP and the stop event. The socket
 * leaves the epoll set for as long (EPOLL_CTL_DEL on entry, ADD on exit): a socket in an epoll set
 * runs epoll's wakeup callback for every datagram received and for every reply sent (its write-
 * space wakeup), which costs about 3% of the server's CPU per query at 50k q/s with nobody
 * waiting in epoll for it. Busy mode starts only for traffic closer than UDP_BUSY_IDLE_US apart
 * (two datagrams in one event, or an event that soon after the last one), so a trickle of
 * queries never pays the two epoll_ctl calls. Under steady UDP load that saves the epoll_wait of
 * every wakeup and the callbacks; TCP queries wait at most about a millisecond longer. A receive
 * that times out (UDP_BUSY_IDLE_US without a datagram) returns the worker to epoll mode, so an
 * idle worker sleeps in epoll_wait.
 *
 * The stop eventfd is never read, so it stays readable for every worker; a worker leaves after
 * finishing the round in which it saw it.
 */
#include <errno.h>
#include <sched.h>
#include <stdint.h>
#include <string.h>
#include <sys/epoll.h>
#include <time.h>

#include "tern/common/clock.h"
#include "tern/common/err.h"
#include "tern/common/log.h"
#include "tern/common/mem.h"
#include "tern/common/rcu.h"
#include "worker.h"

static unsigned qtype_slot(uint16_t t)
{
    switch (t) {
    case 1:
        return SERVER_QTYPE_A;
    case 2:
        return SERVER_QTYPE_NS;
    case 5:
        return SERVER_QTYPE_CNAME;
    case 6:
        return SERVER_QTYPE_SOA;
    case 12:
        return SERVER_QTYPE_PTR;
    case 15:
        return SERVER_QTYPE_MX;
    case 16:
        return SERVER_QTYPE_TXT;
    case 28:
        return SERVER_QTYPE_AAAA;
    case 33:
        return SERVER_QTYPE_SRV;
    case 35:
        return SERVER_QTYPE_NAPTR;
    case 43:
        return SERVER_QTYPE_DS;
    case 48:
        return SERVER_QTYPE_DNSKEY;
    case 64:
        return SERVER_QTYPE_SVCB;
    case 65:
        return SERVER_QTYPE_HTTPS;
    case 257:
        return SERVER_QTYPE_CAA;
    case 251:
    case 252:
        return SERVER_QTYPE_AXFR;
    case 255:
        return SERVER_QTYPE_ANY;
    default:
        return SERVER_QTYPE_OTHER;
    }
}

static unsigned rcode_slot(unsigned rc)
{
    if (rc <= 5)
        return rc; /* NOERROR .. REFUSED are slots 0..5 */
    return rc == 16 ? SERVER_RCODE_BADVERS : SERVER_RCODE_OTHER;
}

void net_count_answer(worker_t *w, answer_transport_t transport, const answer_info_t *info)
{
    if (transport == ANSWER_UDP)
        NET_COUNT(w, queries_udp, 1);
    else
        NET_COUNT(w, queries_tcp, 1);
    if (info->outcome == ANSWER_DROP_SHORT) {
        NET_COUNT(w, dropped_short, 1);
        return;
    }
    if (info->outcome == ANSWER_DROP_QR) {
        NET_COUNT(w, dropped_qr, 1);
        return;
    }
    if (unlikely(info->outcome == ANSWER_HANDOFF)) {
        NET_COUNT(w, handed_off, 1);
        return;
    }
    if (unlikely(info->limit_verdict != LIMIT_PASS)) {
        unsigned why = info->limit_why < 6 ? info->limit_why : 0;
        if (info->limit_verdict == LIMIT_REFUSE)
            NET_COUNT(w, policy_refused[why], 1);
        else if (info->limit_verdict == LIMIT_DROP)
            NET_COUNT(w, policy_dropped[why], 1);
        else
            NET_COUNT(w, rrl_slipped, 1);
    }
    if (unlikely(info->cookie)) {
        NET_COUNT(w, cookies, 1);
        if (info->cookie_valid)
            NET_COUNT(w, cookies_valid, 1);
        if (info->badcookie)
            NET_COUNT(w, badcookie, 1);
    }
    if (info->outcome == ANSWER_DROP_POLICY)
        return;
    if (info->qtype)
        NET_COUNT(w, qtype[qtype_slot(info->qtype)], 1);
    NET_COUNT(w, rcode[rcode_slot(info->rcode)], 1);
    if (info->truncated)
        NET_COUNT(w, truncated, 1);
    if (info->edns)
        NET_COUNT(w, edns, 1);
    if (info->ecs)
        NET_COUNT(w, ecs, 1);
    if (unlikely(info->health_fail_open))
        NET_COUNT(w, health_fail_open, info->health_fail_open);
}

/* The DNSSEC signer and signature cache (tern/dnssec/dnssec_sign.h), made on this thread — the
 * signer sets up its libcrypto state — once, before the first event of the first view with a
 * signed zone: a server that signs nothing never initialises libcrypto's signing side (3.4 MiB
 * of its pages) nor maps the cache. Without it, DO=1 answers carry the signatures made ahead
 * only. */
static void worker_dnssec_init(worker_t *w)
{
    w->dnssec_tried = true;
    dnssec_worker_t *dw = dnssec_worker_new(w->id, w->srv->set.dnssec_cache);
    if (!dw)
        log_warn("worker %u: no DNSSEC signer: per-query signatures are off", w->id);
    __atomic_store_n(&w->actx.dnssec, dw, __ATOMIC_RELEASE); /* server_dnssec_stats() reads it */
}

/* The earliest deadline of the TCP and DoT pools (tcp_next_timeout()), -1 for none. */
static int next_timeout(const worker_t *w)
{
    int a = tcp_next_timeout(w, &w->tcp);
    if (!w->srv->tls)
        return a;
    int b = tcp_next_timeout(w, &w->tls);
    return a < 0 ? b : b < 0 ? a : a < b ? a : b;
}

/* Busy mode's epoll membership of the worker's UDP socket (see the top of this file). Leaving
 * fails only if the kernel cannot take the socket back into the set (ENOMEM): the worker then
 * stays busy, still blocking in recvmmsg with its timeout, and tries again on the next timeout. */
static void busy_enter(worker_t *w)
{
    /* a socket left in the set only costs the callbacks: busy all the same */
    if (epoll_ctl(w->epfd, EPOLL_CTL_DEL, w->udp_fd[w->busy_li], NULL) < 0)
        log_warn("worker %u: epoll_ctl(DEL) of its UDP socket: %s", w->id, tern_strerror(-errno));
}

/* Whether the worker stays busy. */
static bool busy_leave(worker_t *w)
{
    struct epoll_event ev = {.events = EPOLLIN};
    ev.data.u64 = TAG_MAKE(TAG_UDP, 0, (unsigned)w->busy_li);
    if (epoll_ctl(w->epfd, EPOLL_CTL_ADD, w->udp_fd[w->busy_li], &ev) == 0 || errno == EEXIST)
        return false;
    log_warn("worker %u: epoll_ctl(ADD) of its UDP socket: %s: staying in busy mode", w->id,
             tern_strerror(-errno));
    return true;
}

/* udp_steering cpu: worker i runs on the i-th CPU the process may use (modulo their number),
 * the CPU whose received datagrams the steering program gives its socket. A CPU set the process
 * cannot use (a container's cpuset changed) leaves the worker where it was, said once. */
static void worker_pin(worker_t *w)
{
    cpu_set_t allowed, one;
    if (sched_getaffinity(0, sizeof(allowed), &allowed) != 0)
        return;
    int n = CPU_COUNT(&allowed);
    if (n <= 0)
        return;
    int want = (int)(w->id % (unsigned)n), seen = 0;
    for (int c = 0; c < CPU_SETSIZE; c++) {
        if (!CPU_ISSET(c, &allowed))
            continue;
        if (seen++ != want)
            continue;
        CPU_ZERO(&one);
        CPU_SET(c, &one);
        int e = pthread_setaffinity_np(pthread_self(), sizeof(one), &one);
        if (e != 0)
            log_warn("worker %u: cannot pin to CPU %d: %s", w->id, c, strerror(e));
        return;
    }
}

/* An AF_XDP socket with frames waiting: serve up to UDP_MAX_BATCHES of its batches (the bound a
 * socket's readiness event has too). The query log's and the limits' clock is read per batch. */
static void xdp_serve(worker_t *w, unsigned k)
{
    for (unsigned b = 0; b < UDP_MAX_BATCHES; b++) {
        worker_clock(w);
        if (xdp_sock_poll(w->xsk[k], 0, udp_xdp_batch, w) <= 0)
            break;
    }
}

/* Replies of an AF_XDP socket still on their way out: the epoll timeout that brings the worker
 * back to kick and reclaim them (1 ms, as xdp_sock_poll() waits), else timeout. */
static int xdp_timeout(const worker_t *w, int timeout)
{
    for (unsigned k = 0; k < w->nxsk; k++)
        if (xdp_sock_sending(w->xsk[k]))
            return timeout < 0 || timeout > 1 ? 1 : timeout;
    return timeout;
}

void *worker_main(void *arg)
{
    worker_t *w = arg;
    (void)pthread_setname_np(pthread_self(), "tern-worker"); /* top -H, perf, the benches */
    if (w->srv->set.udp_steering == CONFIG_UDP_STEER_CPU)
        worker_pin(w);
    struct epoll_event ev[WORKER_EVENTS];
    bool stop = false;

    if (mem_thread_bind(w->arena) < 0)
        log_warn("worker %u: cannot bind to its jemalloc arena", w->id);
    /* off: nothing is allocated per query, a cache would only hold memory. On with DoT: OpenSSL
     * makes hundreds of small allocations per handshake and a few per record (tls.h), each a
     * locked arena operation without the cache */
    mem_thread_tcache(w->srv->tls != NULL);
    const uint64_t *a, *d;
    if (mem_thread_counters(&a, &d) == 0) {
        __atomic_store_n(&w->allocp, a, __ATOMIC_RELEASE);
        __atomic_store_n(&w->deallocp, d, __ATOMIC_RELEASE);
    }
    if (w->srv->tls)
        tls_thread_init(); /* SIGPIPE blocked: a reset DoT client gives EPIPE */
    tern_rcu_register();

    w->now_ms = tern_monotonic_ms();
    bool busy = false;
    int64_t last_poll_us = 0, last_udp_us = INT64_MIN / 2;
    /* Ends when the stop eventfd is seen; each round is bounded by WORKER_EVENTS events, and in
     * busy mode epoll is polled at least every UDP_BUSY_POLL_US (and after every idle wait). */
    while (!stop) {
        int timeout;
        if (busy) {
            unsigned got = udp_wait_batch(w, (size_t)w->busy_li);
            int64_t now = tern_monotonic_us();
            if (got > 0 && now - last_poll_us < UDP_BUSY_POLL_US)
                continue;
            if (got == 0) /* a wait that timed out: traffic stopped, block in epoll again */
                busy = busy_leave(w);
            timeout = 0; /* TCP and the stop event: just look */
        } else {
            timeout = xdp_timeout(w, next_timeout(w));
        }
        /* Offline while blocked: an idle worker never holds up a reload's grace period. */
        if (timeout != 0)
            tern_rcu_offline();
        int n = epoll_wait(w->epfd, ev, WORKER_EVENTS, timeout);
        if (timeout != 0)
            tern_rcu_online();
        if (n < 0) {
            if (errno == EINTR)
                continue;
            log_err("worker %u: epoll_wait: %s", w->id, tern_strerror(-errno));
            break;
        }
        last_poll_us = tern_monotonic_us();
        w->now_ms = last_poll_us / 1000;
        for (int i = 0; i < n; i++) {
            uint64_t tag = ev[i].data.u64;
            w->view = tern_rcu_deref(*w->srv->view);
            if (unlikely(w->view->dnssec && !w->actx.dnssec && !w->dnssec_tried))
                worker_dnssec_init(w);
            switch (TAG_KIND(tag)) {
            case TAG_STOP:
                stop = true;
                break;
            case TAG_UDP: {
                /* steady traffic: keep reading this socket directly until it goes quiet */
                unsigned got = udp_handle(w, TAG_IDX(tag));
                if (got > 0 && !busy && w->busy_li == (int)TAG_IDX(tag) &&
                    (got > 1 || last_poll_us - last_udp_us < UDP_BUSY_IDLE_US)) {
                    busy_enter(w);
                    busy = true;
                }
                if (got > 0)
                    last_udp_us = last_poll_us;
                break;
            }
            case TAG_LISTEN:
                tcp_accept(w, &w->tcp, TAG_IDX(tag));
                break;
            case TAG_TLS_LISTEN:
                tcp_accept(w, &w->tls, TAG_IDX(tag));
                break;
            case TAG_TLS_CONN:
                tcp_conn_event(w, &w->tls, TAG_IDX(tag), TAG_GEN(tag), ev[i].events);
                break;
            case TAG_XDP:
                xdp_serve(w, TAG_IDX(tag));
                break;
            case TAG_CONN:
                tcp_conn_event(w, &w->tcp, TAG_IDX(tag), TAG_GEN(tag), ev[i].events);
                break;
            default:
                break;
            }
            /* Nothing of this view is held past the event: a reload may free it now. */
            w->view = NULL;
            tern_rcu_quiescent();
        }
        /* AF_XDP replies in flight: kick and reclaim them (the poll answers any frame that came
         * meanwhile, so under a view like any event) */
        for (unsigned k = 0; k < w->nxsk; k++) {
            if (!xdp_sock_sending(w->xsk[k]))
                continue;
            w->view = tern_rcu_deref(*w->srv->view);
            xdp_serve(w, k);
            w->view = NULL;
            tern_rcu_quiescent();
        }
        tcp_sweep(w, &w->tcp);
        if (w->srv->tls)
            tcp_sweep(w, &w->tls);
    }
    tern_rcu_unregister();
    dnssec_worker_t *dw = w->actx.dnssec;
    __atomic_store_n(&w->actx.dnssec, NULL, __ATOMIC_RELEASE);
    dnssec_worker_free(dw);
    return NULL;
}
