/*
 * ctl_conn.c — the control socket's threads: accept, read one request line, answer, close.
 *
 * The serving thread runs one poll() loop over every connection (up to CTL_MAX_CONNECTIONS, all
 * non-blocking), each under its own deadline: CTL_IO_TIMEOUT_MS for the whole request line from
 * the accept, then CTL_IO_TIMEOUT_MS for the whole response. An idle or trickling client holds
 * only its own slot, and a client beyond the last slot closes the one that has waited longest for
 * its request, so nobody queues behind them. The loop also watches the stop eventfd, so ctl_stop()
 * waits for no client. What a request line means is ctl_cmd.c's business.
 *
 * A reload waits for the loader (loader_reload_wait()), which is no business of the other
 * requests: it runs on a second thread, the waiter, and every reload asked for before the waiter
 * starts one is answered by that one. The waiter's wait is the only one that does not watch the
 * stop eventfd: a reload, once started, finishes (loader_stop() would wait for it as well).
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "ctl_int.h"
#include "tern/common/clock.h"
#include "tern/common/log.h"

/* After a failed accept() (EMFILE, ENOBUFS...) the listener stays readable: pause this long
 * before trying again so the thread does not spin, and the log gets one line per pause. */
#define CTL_ACCEPT_BACKOFF_MS 200

/* A request line that is exactly "reload" (blanks around it allowed): the waiter thread runs
 * it. With arguments it goes to ctl_cmd_dispatch(), which answers the usage error at once. */
static bool is_reload(const char *line)
{
    line += strspn(line, " \t");
    size_t n = strcspn(line, " \t");
    return n == 6 && memcmp(line, "reload", 6) == 0 && line[n + strspn(line + n, " \t")] == '\0';
}

void ctl_conn_close(ctl_conn_t *k)
{
    close(k->fd);
    tern_buf_free(&k->resp);
    *k = (ctl_conn_t){.state = CONN_FREE, .fd = -1};
}

/* Send what the socket takes now; close k once all is sent or the client is gone. */
static void conn_write(ctl_conn_t *k)
{
    static const char oom[] = "error: out of memory\n";
    const char *p = k->resp.failed || !k->resp.p ? oom : k->resp.p;
    size_t len = k->resp.failed || !k->resp.p ? sizeof(oom) - 1 : k->resp.len;
    /* each pass sends something; ends when the socket is full, or all is sent */
    while (k->off < len) {
        ssize_t n = send(k->fd, p + k->off, len - k->off, MSG_NOSIGNAL);
        if (n > 0) {
            k->off += (size_t)n;
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return; /* poll() says when there is room */
        break;      /* the client went away (EPIPE, ECONNRESET) */
    }
    ctl_conn_close(k);
}

/* k's response is in k->resp: write it within CTL_IO_TIMEOUT_MS from now. */
static void conn_respond(ctl_conn_t *k)
{
    k->state = CONN_WRITE;
    k->off = 0;
    k->deadline = tern_monotonic_ms() + CTL_IO_TIMEOUT_MS;
    conn_write(k);
}

/* The request line of k is complete (k->req, k->len bytes): answer it, or queue a reload. */
static void conn_request(ctl_t *c, ctl_conn_t *k)
{
    if (k->len > 0 && k->req[k->len - 1] == '\r')
        k->len--;
    k->req[k->len] = '\0';
    if (!is_reload(k->req)) {
        ctl_cmd_dispatch(c, k->req, &k->resp);
        conn_respond(k);
        return;
    }
    struct ucred peer;
    socklen_t sl = sizeof(peer);
    if (getsockopt(k->fd, SOL_SOCKET, SO_PEERCRED, &peer, &sl) < 0)
        peer = (struct ucred){.pid = 0, .uid = (uid_t)-1, .gid = (gid_t)-1};
    log_info("control socket: reload requested (pid %ld, uid %u)", (long)peer.pid,
             (unsigned)peer.uid);
    k->state = CONN_RELOAD;
    pthread_mutex_lock(&c->mu);
    k->ticket = ++c->asked;
    pthread_cond_signal(&c->cv);
    pthread_mutex_unlock(&c->mu);
}

/* Read what k's client has sent; a whole line (or the end of the stream) makes the request. */
static void conn_read(ctl_t *c, ctl_conn_t *k)
{
    ssize_t n = recv(k->fd, k->req + k->len, CTL_MAX_REQUEST - k->len, 0);
    if (n > 0) {
        char *nl = memchr(k->req + k->len, '\n', (size_t)n);
        k->len += (size_t)n;
        if (nl) {
            k->len = (size_t)(nl - k->req);
            conn_request(c, k);
        } else if (k->len == CTL_MAX_REQUEST) {
            ctl_cmd_line(&k->resp, "error: request longer than %d bytes", CTL_MAX_REQUEST);
            conn_respond(k);
        }
        return;
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
        return;
    if (n == 0 && k->len > 0)
        conn_request(c, k); /* the end of the stream ends a non-empty request */
    else
        ctl_conn_close(k); /* nothing, or an error */
}

/* Hand every finished reload's response to the connections that asked before it started. */
void ctl_conn_deliver_reloads(ctl_t *c)
{
    pthread_mutex_lock(&c->mu);
    for (unsigned i = 0; i < CTL_MAX_CONNECTIONS; i++) {
        ctl_conn_t *k = &c->conns[i];
        if (k->state != CONN_RELOAD || k->ticket > c->done)
            continue;
        if (c->result.failed || !c->result.p)
            k->resp.failed = true;
        else
            sb_append(&k->resp, c->result.p, c->result.len);
        conn_respond(k);
    }
    pthread_mutex_unlock(&c->mu);
}

/* Answer or close the connections past their deadline; the next deadline (INT64_MAX: none). */
static int64_t conns_expire(ctl_t *c, int64_t now)
{
    int64_t next = INT64_MAX;
    for (unsigned i = 0; i < CTL_MAX_CONNECTIONS; i++) {
        ctl_conn_t *k = &c->conns[i];
        if (k->state == CONN_READ && k->deadline <= now) {
            ctl_cmd_line(&k->resp, "error: no request within %d ms", CTL_IO_TIMEOUT_MS);
            conn_respond(k);
        } else if (k->state == CONN_WRITE && k->deadline <= now) {
            log_warn("control socket: a client did not read its response within %d ms",
                     CTL_IO_TIMEOUT_MS);
            ctl_conn_close(k);
        }
        if ((k->state == CONN_READ || k->state == CONN_WRITE) && k->deadline < next)
            next = k->deadline;
    }
    return next;
}

/* A slot for a new connection: a free one, else the one that has waited longest for its request
 * line (closed); NULL when every connection is being answered. */
static ctl_conn_t *conn_slot(ctl_t *c, bool evict)
{
    ctl_conn_t *oldest = NULL;
    for (unsigned i = 0; i < CTL_MAX_CONNECTIONS; i++) {
        ctl_conn_t *k = &c->conns[i];
        if (k->state == CONN_FREE)
            return k;
        if (k->state == CONN_READ && (!oldest || k->deadline < oldest->deadline))
            oldest = k;
    }
    if (oldest && evict) {
        log_debug("control socket: %d connections; closing the one waiting longest for its "
                  "request",
                  CTL_MAX_CONNECTIONS);
        ctl_conn_close(oldest);
    }
    return oldest;
}

/* Accept what is pending, while there is room; pause accepting after a failure. */
static void accept_pending(ctl_t *c)
{
    /* one connection per pass; ends when none is pending, or there is no room */
    while (conn_slot(c, false)) {
        int fd = accept4(c->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED)
                continue;
            if (errno != EAGAIN && errno != EWOULDBLOCK) {
                log_warn("control socket: accept: %s", strerror(errno));
                c->accept_resume = tern_monotonic_ms() + CTL_ACCEPT_BACKOFF_MS;
            }
            return;
        }
        ctl_conn_t *k = conn_slot(c, true);
        *k = (ctl_conn_t){.state = CONN_READ,
                          .fd = fd,
                          .deadline = tern_monotonic_ms() + CTL_IO_TIMEOUT_MS,
                          .resp = SB_INIT};
    }
}

void *ctl_conn_main(void *arg)
{
    ctl_t *c = arg;
    enum { P_STOP, P_DONE, P_LISTEN, P_CONNS };
    struct pollfd p[P_CONNS + CTL_MAX_CONNECTIONS];
    ctl_conn_t *pk[CTL_MAX_CONNECTIONS];
    /* one poll() per pass; ends when ctl_stop() writes the eventfd */
    for (;;) {
        int64_t now = tern_monotonic_ms();
        int64_t next = conns_expire(c, now);
        bool paused = now < c->accept_resume;
        if (paused && c->accept_resume < next)
            next = c->accept_resume;
        p[P_STOP] = (struct pollfd){.fd = c->evfd, .events = POLLIN};
        p[P_DONE] = (struct pollfd){.fd = c->donefd, .events = POLLIN};
        /* no room (every connection being answered): new ones wait in the listen backlog */
        p[P_LISTEN] =
            (struct pollfd){.fd = !paused && conn_slot(c, false) ? c->lfd : -1, .events = POLLIN};
        nfds_t n = P_CONNS;
        for (unsigned i = 0; i < CTL_MAX_CONNECTIONS; i++) {
            ctl_conn_t *k = &c->conns[i];
            if (k->state != CONN_READ && k->state != CONN_WRITE)
                continue;
            pk[n - P_CONNS] = k;
            p[n++] =
                (struct pollfd){.fd = k->fd, .events = k->state == CONN_READ ? POLLIN : POLLOUT};
        }
        int64_t wait = next == INT64_MAX ? -1 : next - now;
        if (poll(p, n, (int)(wait > INT32_MAX ? INT32_MAX : wait)) < 0) {
            if (errno == EINTR)
                continue;
            log_err("control socket: poll: %s", strerror(errno));
            break;
        }
        if (p[P_STOP].revents)
            break;
        if (p[P_DONE].revents) {
            uint64_t v;
            (void)!read(c->donefd, &v, sizeof(v));
            ctl_conn_deliver_reloads(c);
        }
        for (nfds_t i = P_CONNS; i < n; i++) {
            ctl_conn_t *k = pk[i - P_CONNS];
            if (!p[i].revents || k->fd != p[i].fd)
                continue; /* closed meanwhile (a delivered reload cannot take its slot) */
            if (k->state == CONN_READ)
                conn_read(c, k);
            else if (k->state == CONN_WRITE)
                conn_write(k);
        }
        if (p[P_LISTEN].revents)
            accept_pending(c);
    }
    return NULL;
}

/* Reloads asked for on the socket, one at a time: every ticket handed out before a reload
 * starts is answered by that reload. */
void *ctl_conn_waiter(void *arg)
{
    ctl_t *c = arg;
    pthread_mutex_lock(&c->mu);
    /* one reload per pass; ends on ctl_stop() (a reload in progress finishes first) */
    for (;;) {
        while (!c->stopping && c->asked == c->done)
            pthread_cond_wait(&c->cv, &c->mu);
        if (c->stopping)
            break;
        uint64_t upto = c->asked;
        pthread_mutex_unlock(&c->mu);
        sb_t resp = SB_INIT;
        char line[] = "reload";
        ctl_cmd_dispatch(c, line, &resp);
        pthread_mutex_lock(&c->mu);
        tern_buf_free(&c->result);
        c->result = resp;
        c->done = upto;
        uint64_t one = 1;
        if (write(c->donefd, &one, sizeof(one)) != (ssize_t)sizeof(one))
            log_warn("control socket: eventfd write: %s", strerror(errno));
    }
    pthread_mutex_unlock(&c->mu);
    return NULL;
}
