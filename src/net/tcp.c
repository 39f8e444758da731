/*
 * tcp.c — DNS over TCP (RFC 7766) from a preallocated per-worker connection pool.
 *
 * Every slot owns a read buffer for one whole message (2 + 65535 bytes) and a write queue of the
 * same size, allocated at startup. Messages are length-prefixed (RFC 1035 §4.2.2); a connection
 * may carry many queries, and the answers go out in the order the queries came (RFC 7766 §6.2.1.1
 * allows reordering, in-order keeps it simple and is what clients expect of pipelining).
 *
 * Policies, all chosen to bound what one peer can hold:
 *   - pool full: the new connection is accepted and closed at once. Not accepting would leave the
 *     listener readable and spin the level-triggered loop; a prompt close tells the client to
 *     retry elsewhere.
 *   - idle: a connection whose deadline (tcp_idle_timeout after the last complete query or write
 *     progress) passes is closed. A peer trickling a message byte by byte does not refresh it.
 *     Open connections sit in a list ordered by deadline (all share one timeout, so "moved to the
 *     tail on activity" keeps it sorted): the sweep and the epoll_wait timeout look at the head.
 *   - a peer that does not read: when the next answer does not fit the write queue and the
 *     kernel will not take more, the connection is closed instead of buffering further.
 *   - a zero-length message, or one answer_query() cannot answer, closes the connection: the
 *     stream cannot be trusted to be in sync afterwards.
 * Read interest stays level-triggered; EPOLLOUT is armed only while output is stuck.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "tern/common/err.h"
#include "worker.h"

int tcp_pool_init(tcp_pool_t *p, uint32_t n)
{
    memset(p, 0, sizeof(*p));
    /* cache-line aligned, like the worker itself: no line is shared with another worker's data */
    size_t conns_size =
        ((size_t)n * sizeof(*p->conns) + TERN_CACHELINE - 1) & ~(size_t)(TERN_CACHELINE - 1);
    p->conns = aligned_alloc(TERN_CACHELINE, conns_size);
    if (p->conns)
        memset(p->conns, 0, conns_size);
    /* malloc, not calloc: the kernel hands out untouched pages, so an idle pool costs address
     * space, not memory. */
    p->bufs = malloc((size_t)n * (TCP_MSG_MAX + TCP_WBUF_SIZE));
    p->out = malloc(TCP_MSG_MAX);
    if (!p->conns || !p->bufs || !p->out) {
        tcp_pool_free(p);
        return TERN_ENOMEM;
    }
    p->n = n;
    for (uint32_t i = n; i-- > 0;) {
        tcp_conn_t *c = &p->conns[i];
        c->fd = -1;
        c->rbuf = p->bufs + (size_t)i * (TCP_MSG_MAX + TCP_WBUF_SIZE);
        c->wbuf = c->rbuf + TCP_MSG_MAX;
        c->next = p->free;
        p->free = c;
    }
    return 0;
}

void tcp_pool_free(tcp_pool_t *p)
{
    for (tcp_conn_t *c = p->head; c; c = c->next)
        close(c->fd);
    free(p->conns);
    free(p->bufs);
    free(p->out);
    memset(p, 0, sizeof(*p));
}

static void list_unlink(tcp_pool_t *p, tcp_conn_t *c)
{
    if (c->prev)
        c->prev->next = c->next;
    else
        p->head = c->next;
    if (c->next)
        c->next->prev = c->prev;
    else
        p->tail = c->prev;
    c->prev = c->next = NULL;
}

static void list_append(tcp_pool_t *p, tcp_conn_t *c)
{
    c->next = NULL;
    c->prev = p->tail;
    if (p->tail)
        p->tail->next = c;
    else
        p->head = c;
    p->tail = c;
}

/* Activity: push the deadline out and keep the list sorted by moving c to the tail. */
static void touch(worker_t *w, tcp_conn_t *c)
{
    c->deadline_ms = w->now_ms + (int64_t)w->srv->cfg->tcp_idle_timeout * 1000;
    if (w->tcp.tail != c) {
        list_unlink(&w->tcp, c);
        list_append(&w->tcp, c);
    }
}

static void conn_close(worker_t *w, tcp_conn_t *c)
{
    close(c->fd); /* also removes it from the epoll set */
    list_unlink(&w->tcp, c);
    c->fd = -1;
    c->gen++;
    c->rlen = c->woff = c->wlen = 0;
    c->want_out = c->eof = false;
    c->next = w->tcp.free;
    w->tcp.free = c;
}

static int conn_events(worker_t *w, tcp_conn_t *c, uint32_t events)
{
    struct epoll_event ev = {.events = events};
    ev.data.u64 = TAG_MAKE(TAG_CONN, c->gen, (uint32_t)(c - w->tcp.conns));
    return epoll_ctl(w->epfd, EPOLL_CTL_MOD, c->fd, &ev);
}

/* Write what is queued. 0 when everything went or the rest waits for EPOLLOUT, -1 on error.
 * Bounded: each round either makes progress or ends, and progress is capped by the buffer. */
static int flush(worker_t *w, tcp_conn_t *c)
{
    bool progress = false;
    while (c->woff < c->wlen) {
        /* send, not write: MSG_NOSIGNAL turns a reset peer into EPIPE instead of a process-wide
         * SIGPIPE */
        ssize_t n = send(c->fd, c->wbuf + c->woff, c->wlen - c->woff, MSG_NOSIGNAL);
        if (n > 0) {
            c->woff += (uint32_t)n;
            progress = true;
            continue;
        }
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            if (progress)
                touch(w, c);
            if (!c->want_out) {
                uint32_t in = c->eof ? 0 : EPOLLIN;
                if (conn_events(w, c, in | EPOLLOUT) < 0)
                    return -1;
                c->want_out = true;
            }
            return 0;
        }
        return -1;
    }
    if (progress)
        touch(w, c);
    c->woff = c->wlen = 0;
    if (c->want_out) {
        if (!c->eof && conn_events(w, c, EPOLLIN) < 0)
            return -1;
        c->want_out = false;
    }
    return 0;
}

/* Append if it fits, compacting already-written bytes away first. */
static bool try_append(tcp_conn_t *c, const uint8_t *data, size_t len)
{
    if (c->woff > 0 && TCP_WBUF_SIZE - c->wlen < len) {
        memmove(c->wbuf, c->wbuf + c->woff, c->wlen - c->woff);
        c->wlen -= c->woff;
        c->woff = 0;
    }
    if (TCP_WBUF_SIZE - c->wlen < len)
        return false;
    memcpy(c->wbuf + c->wlen, data, len);
    c->wlen += (uint32_t)len;
    return true;
}

/* Queue len bytes; makes room by compacting, then by writing. -1: the peer is not reading (or
 * the write failed) and the connection must be closed. */
static int enqueue(worker_t *w, tcp_conn_t *c, const uint8_t *data, size_t len)
{
    if (try_append(c, data, len))
        return 0;
    if (flush(w, c) < 0)
        return -1;
    if (try_append(c, data, len))
        return 0;
    NET_COUNT(w, tcp_closed_full, 1);
    return -1;
}

/* Answer every complete message in rbuf, keep the partial tail. -1: close the connection. */
static int process(worker_t *w, tcp_conn_t *c)
{
    uint8_t *out = w->tcp.out;
    uint32_t off = 0;
    while (c->rlen - off >= 2) {
        size_t mlen = (size_t)c->rbuf[off] << 8 | c->rbuf[off + 1];
        if (mlen == 0) {
            NET_COUNT(w, tcp_closed_bad, 1);
            return -1;
        }
        if (c->rlen - off - 2 < mlen)
            break;
        size_t alen = answer_query(w->view->table, &w->view->cfg, &w->actx, c->rbuf + off + 2, mlen,
                                   out + 2, TCP_MSG_MAX - 2, ANSWER_TCP);
        net_count_answer(w, ANSWER_TCP, &w->actx.info);
        if (alen == 0) {
            NET_COUNT(w, tcp_closed_bad, 1);
            return -1;
        }
        out[0] = (uint8_t)(alen >> 8);
        out[1] = (uint8_t)alen;
        if (enqueue(w, c, out, alen + 2) < 0)
            return -1;
        NET_COUNT(w, tcp_queries, 1);
        touch(w, c);
        off += 2 + (uint32_t)mlen;
    }
    if (off > 0) {
        memmove(c->rbuf, c->rbuf + off, c->rlen - off);
        c->rlen -= off;
    }
    return 0;
}

/* One read per readiness event (level-triggered: the rest is reported again), so one busy peer
 * cannot monopolise the worker. */
static int conn_read(worker_t *w, tcp_conn_t *c)
{
    ssize_t n = read(c->fd, c->rbuf + c->rlen, TCP_MSG_MAX - c->rlen);
    if (n < 0)
        return (errno == EAGAIN || errno == EWOULDBLOCK) ? 0 : -1;
    if (n == 0) {
        /* Half-close after the last query is legitimate (RFC 7766 §6.2.3 lets the server close
         * once answers are sent): finish writing, then close. A partial message is dropped. */
        c->eof = true;
        if (c->woff == c->wlen)
            return -1;
        if (conn_events(w, c, EPOLLOUT) < 0)
            return -1;
        c->want_out = true;
        return 0;
    }
    c->rlen += (uint32_t)n;
    if (process(w, c) < 0)
        return -1;
    return flush(w, c);
}

void tcp_conn_event(worker_t *w, uint32_t idx, uint32_t gen, uint32_t events)
{
    if (idx >= w->tcp.n)
        return;
    tcp_conn_t *c = &w->tcp.conns[idx];
    if (c->fd < 0 || (c->gen & 0xFFFFFFu) != gen)
        return; /* closed (and maybe reused) earlier in this round */
    if (events & EPOLLERR) {
        conn_close(w, c);
        return;
    }
    if ((events & EPOLLOUT) && c->want_out) {
        if (flush(w, c) < 0 || (c->eof && c->woff == c->wlen)) {
            conn_close(w, c);
            return;
        }
    }
    if (c->eof) {
        /* nothing left to read; a hang-up means the rest can never be written */
        if (events & EPOLLHUP)
            conn_close(w, c);
        return;
    }
    if (events & (EPOLLIN | EPOLLHUP)) {
        if (conn_read(w, c) < 0)
            conn_close(w, c);
    }
}

void tcp_accept(worker_t *w, size_t li)
{
    for (unsigned k = 0; k < TCP_ACCEPT_BATCH; k++) {
        int fd = accept4(w->tcp_fd[li], NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0)
            return; /* EAGAIN; or EMFILE & co, which the rlimit raised at startup makes rare */
        tcp_conn_t *c = w->tcp.free;
        if (!c) {
            NET_COUNT(w, tcp_refused, 1);
            close(fd);
            continue;
        }
        struct epoll_event ev = {.events = EPOLLIN};
        ev.data.u64 = TAG_MAKE(TAG_CONN, c->gen, (uint32_t)(c - w->tcp.conns));
        if (epoll_ctl(w->epfd, EPOLL_CTL_ADD, fd, &ev) < 0) {
            close(fd);
            continue;
        }
        w->tcp.free = c->next;
        c->fd = fd;
        c->next = c->prev = NULL;
        c->deadline_ms = w->now_ms + (int64_t)w->srv->cfg->tcp_idle_timeout * 1000;
        list_append(&w->tcp, c);
        NET_COUNT(w, tcp_accepted, 1);
    }
}

void tcp_sweep(worker_t *w)
{
    /* bounded by the number of open connections: each round closes one */
    while (w->tcp.head && w->tcp.head->deadline_ms <= w->now_ms) {
        NET_COUNT(w, tcp_closed_idle, 1);
        conn_close(w, w->tcp.head);
    }
}

int tcp_next_timeout(const worker_t *w)
{
    if (!w->tcp.head)
        return -1;
    int64_t d = w->tcp.head->deadline_ms - w->now_ms;
    if (d <= 0)
        return 0;
    return d > 3600 * 1000 ? 3600 * 1000 : (int)d;
}
