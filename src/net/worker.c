/*
 * worker.c — one worker thread's event loop.
 *
 * Per iteration: epoll_wait (timeout = the earliest TCP deadline), read the monotonic clock once
 * (clock_gettime is a vDSO call, not a syscall), load the zone table pointer once, dispatch every
 * ready descriptor, then close idle connections. The stop eventfd is never read, so it stays
 * readable for every worker; a worker leaves after finishing the round in which it saw it.
 */
#include <errno.h>
#include <sys/epoll.h>
#include <time.h>

#include "tern/common/err.h"
#include "tern/common/log.h"
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

    w->now_ms = monotonic_ms();
    /* Ends when the stop eventfd is seen; each round is bounded by WORKER_EVENTS events. */
    while (!stop) {
        int n = epoll_wait(w->epfd, ev, WORKER_EVENTS, tcp_next_timeout(w));
        if (n < 0) {
            if (errno == EINTR)
                continue;
            log_err("worker %u: epoll_wait: %s", w->id, tern_strerror(-errno));
            break;
        }
        w->now_ms = monotonic_ms();
        w->table = __atomic_load_n(w->srv->table, __ATOMIC_ACQUIRE);
        for (int i = 0; i < n; i++) {
            uint64_t tag = ev[i].data.u64;
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
        }
        tcp_sweep(w);
    }
    return NULL;
}
