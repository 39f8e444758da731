/*
 * ctl.c — the control socket's lifecycle (bind, start, stop, remove) and the client side.
 *
 * ctl_start() binds the socket, replacing a stale one nobody answers on, and starts the two
 * threads of ctl_conn.c: the serving thread and the waiter that runs reloads. ctl_stop() stops
 * them and removes the socket file if it is still ours. ctl_connect() and ctl_exchange() are what
 * ternctl calls: one request line out, the whole response in, under one deadline.
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "ctl_int.h"
#include "tern/common/clock.h"
#include "tern/common/err.h"
#include "tern/common/log.h"

/* Connections waiting to be accepted while all CTL_MAX_CONNECTIONS are being answered (reloads,
 * responses not yet read); ternctl retries a full backlog until its timeout. */
#define CTL_BACKLOG 16

/* ctl_connect(): a full backlog means the server is busy with a reload; poll for room this
 * often. */
#define CTL_CONNECT_RETRY_MS 10

/* The socket file's mode: the owner (the user ternd runs as) and its group (operators). */
#define CTL_SOCKET_MODE 0660
/* --- start and stop */

static int fill_addr(struct sockaddr_un *sa, const char *path)
{
    memset(sa, 0, sizeof(*sa));
    sa->sun_family = AF_UNIX;
    size_t n = strlen(path);
    if (n == 0 || n >= sizeof(sa->sun_path))
        return -ENAMETOOLONG;
    memcpy(sa->sun_path, path, n + 1);
    return 0;
}

/* If path exists: remove it when it is a socket nobody answers on (left by a ternd that did not
 * exit cleanly); refuse when someone answers or it is not a socket. 0 or -1 (logged). */
static int clear_stale(const char *path, const struct sockaddr_un *sa)
{
    struct stat st;
    if (lstat(path, &st) < 0) {
        if (errno == ENOENT)
            return 0;
        log_err("control socket %s: %s", path, strerror(errno));
        return -1;
    }
    if (!S_ISSOCK(st.st_mode)) {
        log_err("control socket %s: exists and is not a socket; not replacing it", path);
        return -1;
    }
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) {
        log_err("control socket %s: socket: %s", path, strerror(errno));
        return -1;
    }
    int r = connect(fd, (const struct sockaddr *)sa, sizeof(*sa));
    int e = errno;
    close(fd);
    if (r == 0 || e == EAGAIN || e == EINPROGRESS) { /* EAGAIN: listening, backlog full */
        log_err("control socket %s: another process is serving it (is ternd already running?); "
                "not taking it over",
                path);
        return -1;
    }
    if (e == ENOENT)
        return 0; /* gone meanwhile */
    if (e != ECONNREFUSED) {
        log_err("control socket %s: cannot tell whether it is in use: %s", path, strerror(e));
        return -1;
    }
    if (unlink(path) < 0 && errno != ENOENT) {
        log_err("control socket %s: cannot remove the stale socket: %s", path, strerror(errno));
        return -1;
    }
    log_info("control socket %s: removed a stale socket nobody was serving", path);
    return 0;
}

/* Stop the waiter thread; a reload in progress finishes first. */
static void stop_waiter(ctl_t *c)
{
    pthread_mutex_lock(&c->mu);
    c->stopping = true;
    pthread_cond_signal(&c->cv);
    pthread_mutex_unlock(&c->mu);
    pthread_join(c->waiter, NULL);
}

/* Remove the socket file if it is still the one we bound. */
static void unlink_ours(const ctl_t *c)
{
    struct stat st;
    if (lstat(c->path, &st) == 0 && st.st_dev == c->dev && st.st_ino == c->ino &&
        unlink(c->path) < 0 && errno != ENOENT)
        log_warn("control socket %s: cannot remove it: %s", c->path, strerror(errno));
}

/* Bind and listen on sa (path, replacing a stale socket there), the file in mode
 * CTL_SOCKET_MODE. 0 or -1 (logged); *bound once the file is ours to remove. */
static int listen_on(ctl_t *c, const struct sockaddr_un *sa, bool *bound)
{
    const char *path = sa->sun_path;
    if (clear_stale(path, sa) < 0)
        return -1;
    if ((c->lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0)) < 0) {
        log_err("control socket %s: socket: %s", path, strerror(errno));
        return -1;
    }
    if (bind(c->lfd, (const struct sockaddr *)sa, sizeof(*sa)) < 0) {
        log_err("control socket %s: cannot bind: %s%s", path, strerror(errno),
                errno == ENOENT ? " (does its directory exist?)" : "");
        return -1;
    }
    *bound = true;
    struct stat st;
    if (lstat(path, &st) < 0) {
        log_err("control socket %s: %s", path, strerror(errno));
        return -1;
    }
    c->dev = st.st_dev;
    c->ino = st.st_ino;
    /* before listen(): until then a connect() is refused, so nobody gets in under the umask's
     * mode */
    if (chmod(path, CTL_SOCKET_MODE) < 0) {
        log_err("control socket %s: chmod: %s", path, strerror(errno));
        return -1;
    }
    if (listen(c->lfd, CTL_BACKLOG) < 0) {
        log_err("control socket %s: listen: %s", path, strerror(errno));
        return -1;
    }
    return 0;
}

ctl_t *ctl_start(const char *path, loader_t *loader, server_t *server, unsigned workers)
{
    struct sockaddr_un sa;
    if (!path || fill_addr(&sa, path) < 0) {
        log_err("control socket %s: the path must be 1..%zu bytes", path ? path : "(null)",
                sizeof(sa.sun_path) - 1);
        return NULL;
    }
    ctl_t *c = calloc(1, sizeof(*c));
    if (!c) {
        log_err("control socket: out of memory");
        return NULL;
    }
    memcpy(c->path, sa.sun_path, sizeof(c->path));
    c->loader = loader;
    c->server = server;
    c->workers = workers;
    c->lfd = c->evfd = c->donefd = -1;
    for (unsigned i = 0; i < CTL_MAX_CONNECTIONS; i++)
        c->conns[i] = (ctl_conn_t){.state = CONN_FREE, .fd = -1};
    c->result = (sb_t)SB_INIT;
    pthread_mutex_init(&c->mu, NULL);
    pthread_cond_init(&c->cv, NULL);
    bool waiting = false;
    c->start_ms = tern_monotonic_ms();
    c->start_wall = (int64_t)time(NULL);
    bool bound = false;

    if (listen_on(c, &sa, &bound) < 0)
        goto fail;
    if ((c->evfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) < 0 ||
        (c->donefd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) < 0) {
        log_err("control socket: eventfd: %s", strerror(errno));
        goto fail;
    }
    int e = pthread_create(&c->waiter, NULL, ctl_conn_waiter, c);
    if (e != 0) {
        log_err("control socket: cannot start its thread: %s", strerror(e));
        goto fail;
    }
    waiting = true;
    e = pthread_create(&c->thread, NULL, ctl_conn_main, c);
    if (e != 0) {
        log_err("control socket: cannot start its thread: %s", strerror(e));
        goto fail;
    }
    log_info("control socket %s", path);
    return c;
fail:
    if (waiting)
        stop_waiter(c);
    if (bound)
        unlink_ours(c);
    if (c->lfd >= 0)
        close(c->lfd);
    if (c->evfd >= 0)
        close(c->evfd);
    if (c->donefd >= 0)
        close(c->donefd);
    pthread_mutex_destroy(&c->mu);
    pthread_cond_destroy(&c->cv);
    free(c);
    return NULL;
}

void ctl_set_xfr(ctl_t *c, xfr_t *x)
{
    if (c)
        c->xfr = x;
}

void ctl_stop(ctl_t *c)
{
    if (!c)
        return;
    uint64_t one = 1;
    if (write(c->evfd, &one, sizeof(one)) != (ssize_t)sizeof(one))
        log_warn("control socket: eventfd write: %s", strerror(errno));
    pthread_join(c->thread, NULL);
    stop_waiter(c);
    /* a reload that was in progress has finished: its clients get one try at their answer */
    ctl_conn_deliver_reloads(c);
    for (unsigned i = 0; i < CTL_MAX_CONNECTIONS; i++)
        if (c->conns[i].state != CONN_FREE)
            ctl_conn_close(&c->conns[i]);
    unlink_ours(c);
    close(c->lfd);
    close(c->evfd);
    close(c->donefd);
    tern_buf_free(&c->result);
    ctl_explain_free(c);
    pthread_mutex_destroy(&c->mu);
    pthread_cond_destroy(&c->cv);
    free(c);
}

/* --- client side */

int ctl_connect(const char *path, int timeout_ms)
{
    struct sockaddr_un sa;
    int r = fill_addr(&sa, path);
    if (r < 0)
        return r;
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        return -errno;
    int64_t deadline = tern_monotonic_ms() + timeout_ms;
    /* retries only while the backlog is full (EAGAIN); ends at the deadline */
    for (;;) {
        if (connect(fd, (const struct sockaddr *)&sa, sizeof(sa)) == 0)
            return fd;
        int e = errno;
        if ((e == EAGAIN || e == EINTR) && tern_monotonic_ms() < deadline) {
            struct timespec pause = {0, CTL_CONNECT_RETRY_MS * 1000000L};
            nanosleep(&pause, NULL);
            continue;
        }
        close(fd);
        return e == EAGAIN ? -ETIMEDOUT : -e;
    }
}

int ctl_exchange(int fd, const char *request, int timeout_ms, char **out)
{
    *out = NULL;
    size_t rl = strlen(request);
    if (rl + 1 > CTL_MAX_REQUEST)
        return TERN_EINVAL;
    char line[CTL_MAX_REQUEST];
    for (size_t i = 0; i < rl; i++) {
        unsigned char ch = (unsigned char)request[i];
        if (ch < 0x20 || ch == 0x7f)
            return TERN_EINVAL; /* a "\n" would smuggle in a second request */
        line[i] = (char)ch;
    }
    line[rl] = '\n';
    int64_t deadline = tern_monotonic_ms() + timeout_ms;
    size_t sent = 0;
    /* each pass sends something or waits; ends at the deadline */
    while (sent < rl + 1) {
        int64_t left = deadline - tern_monotonic_ms();
        if (left <= 0)
            return -ETIMEDOUT;
        ssize_t n = send(fd, line + sent, rl + 1 - sent, MSG_NOSIGNAL);
        if (n > 0) {
            sent += (size_t)n;
            continue;
        }
        if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
            return -errno;
        struct pollfd p = {.fd = fd, .events = POLLOUT};
        (void)poll(&p, 1, (int)left);
    }
    size_t len = 0, cap = 4096;
    char *buf = malloc(cap);
    if (!buf)
        return TERN_ENOMEM;
    int rc = 0;
    /* each pass reads something (at most CTL_MAX_RESPONSE in all) or waits; ends at EOF or the
     * deadline */
    for (;;) {
        int64_t left = deadline - tern_monotonic_ms();
        if (left <= 0) {
            rc = -ETIMEDOUT;
            break;
        }
        if (len + 1 == cap) {
            if (cap > CTL_MAX_RESPONSE) {
                rc = TERN_ELIMIT;
                break;
            }
            char *p = realloc(buf, cap * 2);
            if (!p) {
                rc = TERN_ENOMEM;
                break;
            }
            buf = p;
            cap *= 2;
        }
        ssize_t n = recv(fd, buf + len, cap - 1 - len, 0);
        if (n > 0) {
            len += (size_t)n;
            continue;
        }
        if (n == 0)
            break;
        if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
            rc = -errno;
            break;
        }
        struct pollfd p = {.fd = fd, .events = POLLIN};
        (void)poll(&p, 1, (int)left);
    }
    if (rc < 0) {
        free(buf);
        return rc;
    }
    buf[len] = '\0';
    *out = buf;
    return 0;
}
