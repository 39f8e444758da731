/*
 * dnstap.c — query log records as dnstap messages over Frame Streams (libfstrm, protobuf-c).
 *
 * The writer thread encodes and queues (qlog_dnstap_write); fstrm's I/O thread sends. libfstrm
 * does the Frame Streams part (framing, the handshake, START/STOP, the queue, batching, retrying);
 * this file supplies the transport under its writer (struct dnstap_io, an fstrm_rdwr) because
 * the stock ones hide what the counters and the rotation need: see the design note in
 * tern/qlog/dnstap.h.
 */
#include "tern/qlog/dnstap.h"

#include <fcntl.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <unistd.h>

#include <fstrm.h>

#include "dnstap.pb-c.h"

/* Readers match the stream's content type in the handshake (and files announce it in START). */
static const char dnstap_content_type[] = "protobuf:dnstap.Dnstap";

/*
 * DNSTAP_QUEUE_SIZE (dnstap.h): 16384 messages (fstrm's largest). The writer thread submits in
 * bursts (it drains the workers' rings every 20 ms: 4,000 messages at 100k q/s) while fstrm's
 * I/O thread sleeps until DNSTAP_NOTIFY are waiting or a second has passed, then sends them in
 * writev batches of up to 64 KiB; the queue absorbs a few bursts and a reader that stalls for
 * a moment, yet bounds what a dead reader can pin: 16384 buffers of a few hundred bytes. fstrm
 * needs a power of two for its lock-free single-producer queue.
 */
_Static_assert((DNSTAP_QUEUE_SIZE & (DNSTAP_QUEUE_SIZE - 1)) == 0, "a power of two");

/* Writes are done in slices of this many iovecs (fstrm hands 2 per message, up to 64 messages a
 * batch): a partial write is resumed from a copy, as fstrm's iovecs are const. */
#define DNSTAP_IOV_SLICE 64

/* Mode of a dnstap file this sink creates: it holds client addresses, so not for everyone. */
#define DNSTAP_FILE_MODE 0640

/*
 * The transport under one fstrm I/O thread: the object of its fstrm_rdwr and the free_data of
 * every message queued to it. Only that thread calls the methods and frees the messages (and,
 * after joining it, fstrm_iothr_destroy on the closing thread), so the fields need no atomics.
 * Freed by us after fstrm_iothr_destroy, which still frees messages after destroying the rdwr.
 */
struct dnstap_io {
    qlog_dnstap_t *d;
    bool file; /* a file: fd is opened in advance, by the writer thread; else a socket */
    int fd;    /* -1: closed */
    struct sockaddr_un sa; /* socket: where the reader listens */
    bool accepted;         /* socket: the reader's ACCEPT was read on this connection */
    bool streaming;        /* START written (after ACCEPT on a socket): data frames get through */
};

struct qlog_dnstap {
    struct fstrm_iothr *iothr;       /* NULL only after a reopen failed to start a new one */
    struct fstrm_iothr_queue *queue; /* its one input queue (single producer: us) */
    struct dnstap_io *io;            /* its transport */
    bool queries, responses;
    char *socket_path, *file_path; /* exactly one is set */
    dev_t file_dev;                /* the file being written: a reopen that finds the path */
    ino_t file_ino;                /* still naming it has nothing to rotate */
    ProtobufCBinaryData identity, version;
    _Atomic uint64_t written, dropped;
    _Atomic uint64_t streams; /* socket connections that completed the handshake */
};

static void bump(_Atomic uint64_t *c)
{
    atomic_fetch_add_explicit(c, 1, memory_order_relaxed);
}

/* ---- the transport (fstrm's I/O thread) ---- */

static void io_drop(struct dnstap_io *io)
{
    if (io->fd >= 0)
        close(io->fd);
    io->fd = -1;
    io->accepted = false;
    io->streaming = false;
}

static fstrm_res io_open(void *obj)
{
    struct dnstap_io *io = obj;
    if (io->file) {
        /* The file was opened by the writer thread (so the error is reported there, and a rename
         * right after cannot send us to another file). Closed after a write error, it stays
         * closed until the next reopen: opening it again would truncate what it holds. */
        return io->fd >= 0 ? fstrm_res_success : fstrm_res_failure;
    }
    /* fstrm does not close a connection whose handshake it rejected (content type): start anew */
    io_drop(io);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return fstrm_res_failure;
    /* Bounds connect (a full backlog), every send and every handshake read: a reader that stops
     * reading costs a reconnect, never a hung I/O thread or a hung qlog_dnstap_close. */
    struct timeval tv = {.tv_sec = DNSTAP_IO_TIMEOUT_S};
    if (setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)) != 0 ||
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) != 0 ||
        connect(fd, (const struct sockaddr *)&io->sa, sizeof(io->sa)) != 0) {
        close(fd);
        return fstrm_res_failure;
    }
    io->fd = fd;
    return fstrm_res_success;
}

static fstrm_res io_close(void *obj)
{
    io_drop(obj);
    return fstrm_res_success;
}

static fstrm_res io_destroy(void *obj)
{
    io_drop(obj); /* the object itself is freed by the sink, after fstrm_iothr_destroy */
    return fstrm_res_success;
}

/* Sockets only: fstrm reads in the handshake (ACCEPT) and at close (FINISH). */
static fstrm_res io_read(void *obj, void *data, size_t len)
{
    struct dnstap_io *io = obj;
    uint8_t *p = data;
    while (len > 0) {
        ssize_t n = read(io->fd, p, len);
        if (n > 0) {
            p += n;
            len -= (size_t)n;
        } else if (n < 0 && errno == EINTR) {
            continue;
        } else {
            return fstrm_res_failure; /* end of stream, timeout or error */
        }
    }
    io->accepted = true;
    return fstrm_res_success;
}

static fstrm_res io_write(void *obj, const struct iovec *iov, int iovcnt)
{
    struct dnstap_io *io = obj;
    int i = 0;
    size_t skip = 0; /* bytes of iov[i] already written */
    while (i < iovcnt) {
        struct iovec v[DNSTAP_IOV_SLICE];
        int n = 0;
        size_t want = 0;
        for (; n < DNSTAP_IOV_SLICE && i + n < iovcnt; n++) {
            v[n] = iov[i + n];
            want += v[n].iov_len;
        }
        v[0].iov_base = (uint8_t *)v[0].iov_base + skip;
        v[0].iov_len -= skip;
        want -= skip;
        if (want == 0) {
            i += n;
            skip = 0;
            continue;
        }
        ssize_t done;
        if (io->file) {
            done = writev(io->fd, v, n);
        } else {
            struct msghdr msg = {.msg_iov = v, .msg_iovlen = (size_t)n};
            done = sendmsg(io->fd, &msg, MSG_NOSIGNAL);
        }
        if (done < 0 && errno == EINTR)
            continue;
        if (done <= 0)
            return fstrm_res_failure; /* the reader is gone or stalled past the timeout; disk */
        size_t left = (size_t)done;
        while (i < iovcnt && left >= iov[i].iov_len - skip) {
            left -= iov[i].iov_len - skip;
            skip = 0;
            i++;
        }
        skip += left;
    }
    /*
     * The first write of a file is START. On a socket the handshake is READY (write), ACCEPT
     * (read), START (write): the first write after the ACCEPT completes it. From then on data
     * frames get through.
     */
    if (!io->streaming && (io->file || io->accepted)) {
        io->streaming = true;
        if (!io->file)
            bump(&io->d->streams);
    }
    return fstrm_res_success;
}

/*
 * fstrm's I/O thread frees each queued message once it is done with it: after writing it in a
 * batch (when that fails, it closes the transport first), or at once when the transport is
 * closed. The transport's state at that moment tells which.
 */
static void dnstap_frame_free(void *data, void *arg)
{
    struct dnstap_io *io = arg;
    bump(io->streaming ? &io->d->written : &io->d->dropped);
    free(data);
}

/* ---- setting up fstrm ---- */

/* An I/O thread writing through io (NULL on failure: io is left to the caller, its fd closed). */
static struct fstrm_iothr *dnstap_iothr(struct dnstap_io *io)
{
    struct fstrm_writer_options *wo = fstrm_writer_options_init();
    struct fstrm_rdwr *rw = fstrm_rdwr_init(io);
    struct fstrm_iothr_options *to = fstrm_iothr_options_init();
    struct fstrm_writer *w = NULL;
    struct fstrm_iothr *t = NULL;
    if (!wo || !rw || !to ||
        fstrm_writer_options_add_content_type(
            wo, dnstap_content_type, sizeof(dnstap_content_type) - 1) != fstrm_res_success ||
        fstrm_iothr_options_set_queue_model(to, FSTRM_IOTHR_QUEUE_MODEL_SPSC) !=
            fstrm_res_success ||
        fstrm_iothr_options_set_input_queue_size(to, DNSTAP_QUEUE_SIZE) != fstrm_res_success ||
        fstrm_iothr_options_set_reopen_interval(to, DNSTAP_REOPEN_S) != fstrm_res_success ||
        /* the writer submits a drain's worth at once (some 2,000 messages per 20 ms at 50k q/s):
         * the I/O thread wakes once per DNSTAP_NOTIFY of them and writes up to 64 KiB in one
         * writev, instead of a futex wake per 32 and a write per 8 KiB */
        fstrm_iothr_options_set_queue_notify_threshold(to, DNSTAP_NOTIFY) != fstrm_res_success ||
        fstrm_iothr_options_set_buffer_hint(to, FSTRM_IOTHR_BUFFER_HINT_MAX) != fstrm_res_success ||
        fstrm_iothr_options_set_output_queue_size(to, DNSTAP_OUTPUT_QUEUE) != fstrm_res_success)
        goto out;
    fstrm_rdwr_set_open(rw, io_open);
    fstrm_rdwr_set_close(rw, io_close);
    fstrm_rdwr_set_destroy(rw, io_destroy);
    fstrm_rdwr_set_write(rw, io_write);
    if (!io->file)
        fstrm_rdwr_set_read(rw, io_read); /* a read method: fstrm does the handshake */
    if ((w = fstrm_writer_init(wo, &rw)))
        t = fstrm_iothr_init(to, &w);
out:
    fstrm_writer_destroy(&w); /* each of these is NULL when its new owner took it */
    fstrm_rdwr_destroy(&rw);
    fstrm_iothr_options_destroy(&to);
    fstrm_writer_options_destroy(&wo);
    if (!t)
        io_drop(io);
    return t;
}

/* Put t and io in place of the current I/O thread, which finishes its stream and goes. */
static void dnstap_swap(qlog_dnstap_t *d, struct fstrm_iothr *t, struct dnstap_io *io)
{
    struct fstrm_iothr *old = d->iothr;
    struct dnstap_io *old_io = d->io;
    d->iothr = t;
    d->queue = fstrm_iothr_get_input_queue(t);
    d->io = io;
    fstrm_iothr_destroy(&old);
    free(old_io);
}

/* Open d's file (anew: a Frame Streams file holds one stream) and start writing it; the current
 * I/O thread, if any, is replaced only once the new one runs. 0 or a negative code with err. */
static int dnstap_file_start(qlog_dnstap_t *d, char *err, size_t errlen)
{
    /* O_NONBLOCK only for the open: a FIFO without a reader fails instead of hanging us */
    int fd =
        open(d->file_path, O_WRONLY | O_CREAT | O_TRUNC | O_NONBLOCK | O_CLOEXEC, DNSTAP_FILE_MODE);
    struct stat st;
    int rc = 0;
    if (fd < 0 || fstat(fd, &st) != 0 || fcntl(fd, F_SETFL, 0) != 0)
        rc = -errno;
    struct dnstap_io *io = rc ? NULL : calloc(1, sizeof(*io));
    if (!io) {
        rc = rc ? rc : TERN_ENOMEM;
        if (fd >= 0)
            close(fd);
        tern_set_err(err, errlen, "dnstap: %s: %s", d->file_path, tern_strerror(rc));
        return rc;
    }
    *io = (struct dnstap_io){.d = d, .file = true, .fd = fd};
    struct fstrm_iothr *t = dnstap_iothr(io);
    if (!t) {
        free(io);
        tern_set_err(err, errlen, "dnstap: %s: cannot start the fstrm writer", d->file_path);
        return TERN_ENOMEM;
    }
    d->file_dev = st.st_dev;
    d->file_ino = st.st_ino;
    dnstap_swap(d, t, io);
    return 0;
}

static int dnstap_sock_start(qlog_dnstap_t *d, char *err, size_t errlen)
{
    struct dnstap_io *io = calloc(1, sizeof(*io));
    if (!io) {
        tern_set_err(err, errlen, "dnstap: %s: %s", d->socket_path, tern_strerror(TERN_ENOMEM));
        return TERN_ENOMEM;
    }
    *io = (struct dnstap_io){.d = d, .fd = -1, .sa.sun_family = AF_UNIX};
    size_t len = strlen(d->socket_path);
    if (len >= sizeof(io->sa.sun_path)) {
        free(io);
        tern_set_err(err, errlen, "dnstap: %s: socket path longer than %zu bytes", d->socket_path,
                     sizeof(io->sa.sun_path) - 1);
        return -ENAMETOOLONG;
    }
    memcpy(io->sa.sun_path, d->socket_path, len + 1);
    struct fstrm_iothr *t = dnstap_iothr(io);
    if (!t) {
        free(io);
        tern_set_err(err, errlen, "dnstap: %s: cannot start the fstrm writer", d->socket_path);
        return TERN_ENOMEM;
    }
    dnstap_swap(d, t, io);
    return 0;
}

static int dup_bytes(ProtobufCBinaryData *b, const char *s)
{
    b->len = strlen(s);
    b->data = (uint8_t *)strdup(s);
    return b->data ? 0 : TERN_ENOMEM;
}

/* ---- the API ---- */

qlog_dnstap_t *qlog_dnstap_open(const qlog_dnstap_opts_t *o, char *err, size_t errlen)
{
    if (!o->socket_path == !o->file_path) {
        tern_set_err(err, errlen, "dnstap: %s",
                     o->socket_path ? "socket_path and file_path are both set"
                                    : "neither socket_path nor file_path is set");
        return NULL;
    }
    const char *path = o->socket_path ? o->socket_path : o->file_path;
    qlog_dnstap_t *d = calloc(1, sizeof(*d));
    if (!d) {
        tern_set_err(err, errlen, "dnstap: %s: %s", path, tern_strerror(TERN_ENOMEM));
        return NULL;
    }
    d->queries = o->queries;
    d->responses = o->responses;
    char host[HOST_NAME_MAX + 1] = "";
    if (!o->identity && gethostname(host, sizeof(host)) != 0)
        host[0] = '\0';
    host[sizeof(host) - 1] = '\0';
    if (!(o->socket_path ? (d->socket_path = strdup(path)) : (d->file_path = strdup(path))) ||
        dup_bytes(&d->identity, o->identity ? o->identity : host) < 0 ||
        dup_bytes(&d->version, o->version ? o->version : "tern " TERN_VERSION) < 0) {
        tern_set_err(err, errlen, "dnstap: %s: %s", path, tern_strerror(TERN_ENOMEM));
        goto fail;
    }
    if ((d->socket_path ? dnstap_sock_start(d, err, errlen) : dnstap_file_start(d, err, errlen)) <
        0)
        goto fail;
    return d;
fail:
    qlog_dnstap_close(d);
    return NULL;
}

/* Encode dt into a buffer of its own and queue it; fstrm frees it (dnstap_frame_free). */
static int dnstap_submit(qlog_dnstap_t *d, const Dnstap__Dnstap *dt)
{
    if (unlikely(!d->iothr)) {
        bump(&d->dropped);
        return TERN_EAGAIN;
    }
    size_t len = dnstap__dnstap__get_packed_size(dt);
    uint8_t *buf = malloc(len);
    if (unlikely(!buf)) {
        bump(&d->dropped);
        return TERN_ENOMEM;
    }
    dnstap__dnstap__pack(dt, buf);
    if (fstrm_iothr_submit(d->iothr, d->queue, buf, len, dnstap_frame_free, d->io) !=
        fstrm_res_success) {
        free(buf); /* still ours: fstrm takes it only on success */
        bump(&d->dropped);
        return TERN_EAGAIN;
    }
    return 0;
}

static void set_time(int64_t ns, protobuf_c_boolean *has_sec, uint64_t *sec,
                     protobuf_c_boolean *has_nsec, uint32_t *nsec)
{
    if (ns <= 0)
        return; /* no time taken */
    *has_sec = *has_nsec = 1;
    *sec = (uint64_t)(ns / 1000000000);
    *nsec = (uint32_t)(ns % 1000000000);
}

static ProtobufCBinaryData bytes(const uint8_t *p, size_t len)
{
    /* protobuf-c only reads .data when packing; its type is not const */
    return (ProtobufCBinaryData){.len = len, .data = (uint8_t *)(uintptr_t)p};
}

int qlog_dnstap_write(qlog_dnstap_t *d, const qlog_rec_t *r)
{
    if (unlikely(sizeof(*r) + r->qlen + r->rlen > r->size))
        return TERN_EINVAL;
    Dnstap__Message m = DNSTAP__MESSAGE__INIT;
    if (r->family == 4 || r->family == 6) {
        size_t alen = r->family == 4 ? 4 : 16;
        m.has_socket_family = 1;
        m.socket_family =
            r->family == 4 ? DNSTAP__SOCKET_FAMILY__INET : DNSTAP__SOCKET_FAMILY__INET6;
        m.has_query_address = m.has_response_address = 1;
        m.query_address = bytes(r->client_addr, alen);
        m.response_address = bytes(r->server_addr, alen);
    }
    m.has_socket_protocol = 1;
    m.socket_protocol =
        (r->flags & QLOG_F_TCP) ? DNSTAP__SOCKET_PROTOCOL__TCP : DNSTAP__SOCKET_PROTOCOL__UDP;
    m.has_query_port = m.has_response_port = 1;
    m.query_port = r->client_port;
    m.response_port = r->server_port;
    set_time(r->qtime_ns, &m.has_query_time_sec, &m.query_time_sec, &m.has_query_time_nsec,
             &m.query_time_nsec);

    Dnstap__Dnstap dt = DNSTAP__DNSTAP__INIT;
    dt.type = DNSTAP__DNSTAP__TYPE__MESSAGE;
    dt.message = &m;
    dt.has_identity = d->identity.len > 0;
    dt.identity = d->identity;
    dt.has_version = 1;
    dt.version = d->version;

    int rc = 0;
    if (d->queries && r->qlen > 0) {
        m.type = DNSTAP__MESSAGE__TYPE__AUTH_QUERY;
        m.has_query_message = 1;
        m.query_message = bytes(r->wire, r->qlen);
        rc = dnstap_submit(d, &dt);
        m.has_query_message = 0; /* the response message carries the response only */
    }
    if (d->responses && (r->flags & QLOG_F_RESPONSE)) {
        m.type = DNSTAP__MESSAGE__TYPE__AUTH_RESPONSE;
        set_time(r->rtime_ns, &m.has_response_time_sec, &m.response_time_sec,
                 &m.has_response_time_nsec, &m.response_time_nsec);
        if (r->rlen > 0) {
            m.has_response_message = 1;
            m.response_message = bytes(r->wire + r->qlen, r->rlen);
        }
        int rc2 = dnstap_submit(d, &dt);
        if (rc == 0)
            rc = rc2;
    }
    return rc;
}

int qlog_dnstap_reopen(qlog_dnstap_t *d, char *err, size_t errlen)
{
    if (!d->file_path)
        return 0; /* fstrm reconnects a socket by itself */
    struct stat st;
    if (d->iothr && stat(d->file_path, &st) == 0 && st.st_dev == d->file_dev &&
        st.st_ino == d->file_ino)
        return 0; /* not rotated: opening it anew would truncate the file being written */
    return dnstap_file_start(d, err, errlen);
}

void qlog_dnstap_stats(const qlog_dnstap_t *d, qlog_dnstap_stats_t *out)
{
    uint64_t streams = atomic_load_explicit(&d->streams, memory_order_relaxed);
    out->written = atomic_load_explicit(&d->written, memory_order_relaxed);
    out->dropped = atomic_load_explicit(&d->dropped, memory_order_relaxed);
    out->reconnects = streams > 1 ? streams - 1 : 0;
}

void qlog_dnstap_close(qlog_dnstap_t *d)
{
    if (!d)
        return;
    fstrm_iothr_destroy(&d->iothr); /* writes what is queued, STOP, joins the thread */
    free(d->io);
    free(d->identity.data);
    free(d->version.data);
    free(d->socket_path);
    free(d->file_path);
    free(d);
}
