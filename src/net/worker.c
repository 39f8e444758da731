/*
 * worker.c — one worker thread's event loop.
 *
 * Per iteration: go RCU-offline, epoll_wait (timeout = the earliest TCP deadline), come back
 * online, read the monotonic clock once (clock_gettime is a vDSO call, not a syscall), then for
 * every ready descriptor: dereference the published view, handle the event, report a quiescent
 * state; finally close idle connections. The stop eventfd is never read, so it stays
 * readable for every worker; a worker leaves after finishing the round in which it saw it.
 */
#include <errno.h>
#include <sys/epoll.h>
#include <time.h>

#include "tern/common/err.h"
#include "tern/common/log.h"
#include "tern/common/mem.h"
#include "tern/common/rcu.h"
#include "worker.h"

static int64_t monotonic_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void *worker_main(void *arg)
{
    worker_t *w = arg;
    struct epoll_event ev[WORKER_EVENTS];
    bool stop = false;

    if (mem_thread_bind(w->arena) < 0)
        log_warn("worker %u: cannot bind to its jemalloc arena", w->id);
    mem_thread_tcache(false);
    const uint64_t *a, *d;
    if (mem_thread_counters(&a, &d) == 0) {
        __atomic_store_n(&w->allocp, a, __ATOMIC_RELEASE);
        __atomic_store_n(&w->deallocp, d, __ATOMIC_RELEASE);
    }
    tern_rcu_register();

    w->now_ms = monotonic_ms();
    /* Ends when the stop eventfd is seen; each round is bounded by WORKER_EVENTS events. */
    while (!stop) {
        /* Offline while blocked: an idle worker never holds up a reload's grace period. */
        tern_rcu_offline();
        int n = epoll_wait(w->epfd, ev, WORKER_EVENTS, tcp_next_timeout(w));
        tern_rcu_online();
        if (n < 0) {
            if (errno == EINTR)
                continue;
            log_err("worker %u: epoll_wait: %s", w->id, tern_strerror(-errno));
            break;
        }
        w->now_ms = monotonic_ms();
        for (int i = 0; i < n; i++) {
            uint64_t tag = ev[i].data.u64;
            w->view = tern_rcu_deref(*w->srv->view);
            switch (TAG_KIND(tag)) {
            case TAG_STOP:
                stop = true;
                break;
            case TAG_UDP:
                udp_handle(w, TAG_IDX(tag));
                break;
            case TAG_LISTEN:
                tcp_accept(w, TAG_IDX(tag));
                break;
            case TAG_CONN:
                tcp_conn_event(w, TAG_IDX(tag), TAG_GEN(tag), ev[i].events);
                break;
            default:
                break;
            }
            /* Nothing of this view is held past the event: a reload may free it now. */
            w->view = NULL;
            tern_rcu_quiescent();
        }
        tcp_sweep(w);
    }
    tern_rcu_unregister();
    return NULL;
}
