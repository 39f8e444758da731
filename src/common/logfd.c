/*
 * logfd.c — non-blocking writes to a log's descriptor (logfd.h says why and how).
 */
#include "tern/common/logfd.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "tern/common/clock.h"

enum {
    LFD_NONE = 0, /* unusable: writes fail with EBADF */
    LFD_PLAIN,    /* regular file, character device: write(2) */
    LFD_PIPE,     /* pipe or FIFO through a non-blocking description of our own */
    LFD_SOCKET,   /* send(2) with MSG_DONTWAIT */
    LFD_POLLED,   /* a pipe we could not open again: poll(2) first, then PIPE_BUF at most */
    LFD_SYSLOG,   /* our own datagram socket to /dev/log */
};

/* The local syslog socket, as glibc's syslog(3) uses it. */
#define SYSLOG_PATH "/dev/log"

void logfd_init(logfd_t *l, int src)
{
    memset(l, 0, sizeof(*l));
    l->fd = -1;
    l->src = src;
    struct stat st;
    if (src < 0 || fstat(src, &st) < 0)
        return;
    l->dev = st.st_dev;
    l->ino = st.st_ino;
    l->fd = src;
    if (S_ISSOCK(st.st_mode)) {
        l->kind = LFD_SOCKET;
    } else if (S_ISFIFO(st.st_mode)) {
        /* a description of our own, so O_NONBLOCK stays ours (the parent shares src's) */
        char path[32];
        snprintf(path, sizeof(path), "/proc/self/fd/%d", src);
        int fd = open(path, O_WRONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
        if (fd >= 0) {
            l->fd = fd;
            l->own = true;
            l->kind = LFD_PIPE;
        } else {
            l->kind = LFD_POLLED; /* no /proc (a chroot): see logfd_write() */
        }
    } else {
        l->kind = LFD_PLAIN;
    }
}

void logfd_init_syslog(logfd_t *l)
{
    logfd_init(l, -1);
    l->kind = LFD_SYSLOG;
    int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return;
    struct sockaddr_un sa = {.sun_family = AF_UNIX, .sun_path = SYSLOG_PATH};
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
        close(fd);
        return;
    }
    l->fd = fd;
    l->own = true;
}

int logfd_syslog(logfd_t *l, int pri, const char *ident, const char *msg, size_t len)
{
    char hdr[96], ts[32];
    time_t now = time(NULL);
    struct tm tm;
    if (!localtime_r(&now, &tm) || strftime(ts, sizeof(ts), "%h %e %T", &tm) == 0)
        snprintf(ts, sizeof(ts), "Jan  1 00:00:00");
    int n = snprintf(hdr, sizeof(hdr), "<%d>%s %s[%d]: ", pri, ts, ident, (int)getpid());
    if (n < 0 || (size_t)n >= sizeof(hdr))
        return -EINVAL;
    struct iovec iov[2] = {{hdr, (size_t)n}, {(void *)msg, len}};
    for (int attempt = 0; attempt < 2; attempt++) {
        if (l->fd < 0 || l->kind != LFD_SYSLOG) {
            logfd_close(l);
            logfd_init_syslog(l); /* the daemon restarted, or was not there at first */
            if (l->fd < 0)
                return -ENOTCONN;
        }
        struct msghdr mh = {.msg_iov = iov, .msg_iovlen = 2};
        if (sendmsg(l->fd, &mh, MSG_DONTWAIT | MSG_NOSIGNAL) >= 0)
            return 0;
        if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
            return -EAGAIN;
        int e = errno;
        logfd_close(l); /* ECONNREFUSED, ENOTCONN: connect again once */
        if (attempt == 1)
            return -e;
    }
    return -ENOTCONN;
}

void logfd_sync(logfd_t *l)
{
    if (l->kind == LFD_SYSLOG)
        return; /* not made from a descriptor */
    struct stat st;
    bool same = l->src >= 0 && fstat(l->src, &st) == 0 && l->kind != LFD_NONE &&
                st.st_dev == l->dev && st.st_ino == l->ino;
    if (same)
        return;
    int src = l->src;
    logfd_close(l);
    logfd_init(l, src);
}

/* The longest prefix of buf[0..len) that ends a line and is at most max bytes; a first line
 * longer than max alone when there is none (a pipe may take part of it). */
static size_t whole_lines(const char *buf, size_t len, size_t max)
{
    if (len <= max)
        return len;
    for (size_t i = max; i > 0; i--)
        if (buf[i - 1] == '\n')
            return i;
    return max;
}

ssize_t logfd_write(logfd_t *l, const char *buf, size_t len)
{
    size_t done = 0;
    while (done < len) {
        ssize_t k;
        size_t n = len - done;
        switch (l->kind) {
        case LFD_SOCKET:
            k = send(l->fd, buf + done, n, MSG_DONTWAIT | MSG_NOSIGNAL);
            break;
        case LFD_POLLED: {
            /* writable means room for PIPE_BUF bytes at least: a piece that size cannot block
             * unless another writer fills the pipe in between (the fallback's one risk) */
            struct pollfd p = {.fd = l->fd, .events = POLLOUT};
            if (poll(&p, 1, 0) != 1 || !(p.revents & POLLOUT))
                return (ssize_t)done;
            k = write(l->fd, buf + done, whole_lines(buf + done, n, PIPE_BUF));
            break;
        }
        case LFD_PIPE:
            k = write(l->fd, buf + done, whole_lines(buf + done, n, PIPE_BUF));
            break;
        case LFD_PLAIN:
            k = write(l->fd, buf + done, n);
            break;
        default:
            return -EBADF;
        }
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return (ssize_t)done;
        if (k < 0)
            return done ? (ssize_t)done : -errno;
        if (k == 0)
            return (ssize_t)done;
        done += (size_t)k;
    }
    return (ssize_t)done;
}

uint64_t logfd_lines(const char *p, size_t n)
{
    uint64_t k = 0;
    for (const char *e = p + n; (p = memchr(p, '\n', (size_t)(e - p))); p++)
        k++;
    return k;
}

int64_t logfd_flush(logfd_t *l, char *buf, size_t *len, int timeout_ms)
{
    int64_t until = tern_monotonic_ms() + timeout_ms;
    size_t done = 0;
    for (;;) {
        ssize_t w = logfd_write(l, buf + done, *len - done);
        if (w < 0 && done == 0)
            return w;
        if (w > 0)
            done += (size_t)w;
        int64_t left = until - tern_monotonic_ms();
        if (w < 0 || done == *len || left <= 0 || !logfd_wait(l, (int)left))
            break;
    }
    int64_t lines = (int64_t)logfd_lines(buf, done);
    memmove(buf, buf + done, *len - done);
    *len -= done;
    return lines;
}

bool logfd_wait(const logfd_t *l, int timeout_ms)
{
    if (l->fd < 0)
        return false;
    struct pollfd p = {.fd = l->fd, .events = POLLOUT};
    int n;
    do
        n = poll(&p, 1, timeout_ms);
    while (n < 0 && errno == EINTR);
    return n == 1 && (p.revents & POLLOUT);
}

void logfd_close(logfd_t *l)
{
    if (l->own && l->fd >= 0)
        close(l->fd);
    l->fd = -1;
    l->own = false;
    l->kind = LFD_NONE;
}
