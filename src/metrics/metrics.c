/*
 * metrics.c — GET /metrics in the Prometheus text format (0.0.4), served by libmicrohttpd.
 *
 * libmicrohttpd runs in "external select" mode on a thread of ours: the thread polls
 * libmicrohttpd's epoll descriptor together with a stop eventfd and calls MHD_run(), so every
 * libmicrohttpd callback (on_request() and the connection notifications) runs on that one thread,
 * never on a worker. Each request renders a new body into a heap buffer that libmicrohttpd frees
 * once sent.
 *
 * Why not libmicrohttpd's own thread: its limits alone let a few idle clients hold the endpoint.
 * Its connection timeout is an idle timeout (a client trickling a byte now and then keeps its
 * connection forever), its per-IP limit refuses the new connection rather than an old stuck one
 * (on loopback the scraper and the stuck client share an address), and stopping its thread waited
 * for idle connections. So this thread keeps a table of the connections (the notification
 * callbacks fill it) and enforces, on top of libmicrohttpd's limits:
 *   - a deadline for the whole request head (METRICS_HEAD_TIMEOUT_MS) and one for the response;
 *   - a pool of METRICS_MAX_CONNECTIONS, at most METRICS_PER_ADDR of them from one address; a new
 *     connection beyond either bound evicts the connection (of that address, or of any) that has
 *     waited longest for its request head, and is refused only when none is waiting;
 *   - a stop that closes every connection at once (MHD_stop_daemon() in this mode waits for none).
 * A connection is closed with shutdown(): libmicrohttpd, still owning the descriptor, then reads
 * the end of the stream and frees the connection on its next run (on this thread, so the
 * descriptor cannot have been reused meanwhile).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <stddef.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <poll.h>
#include <pthread.h>

#include "tern/common/buf.h"
#include "tern/common/clock.h"
#include "tern/common/dl.h"
#include "tern/common/err.h"
#include "tern/common/log.h"
#include "tern/conf/config.h"
#include "tern/metrics/metrics.h"
#include "tern/metrics/metrics_render.h"
#include "tern/metrics/status.h"
#include "tern/xfr/xfr.h"

/*
 * libmicrohttpd is loaded when the endpoint is first configured, not linked: it drags in GnuTLS
 * and its dependencies (p11-kit, nettle, gmp, libidn2, ...), about 2.4 MiB of PSS in every ternd
 * whether or not it serves metrics. The header still gives every prototype, so each call keeps
 * its exact type.
 */
#define MHD_FUNCS(X)                                                                               \
    X(MHD_start_daemon)                                                                            \
    X(MHD_stop_daemon)                                                                             \
    X(MHD_run)                                                                                     \
    X(MHD_get_timeout)                                                                             \
    X(MHD_get_daemon_info)                                                                         \
    X(MHD_get_connection_info)                                                                     \
    X(MHD_create_response_from_buffer)                                                             \
    X(MHD_add_response_header)                                                                     \
    X(MHD_queue_response)                                                                          \
    X(MHD_destroy_response)

static struct {
#define MHD_FIELD(f) __typeof__(&f) f;
    MHD_FUNCS(MHD_FIELD)
#undef MHD_FIELD
} mhd;
static pthread_once_t mhd_once = PTHREAD_ONCE_INIT;
static char mhd_error[256];

static void mhd_load(void)
{
    static const char *const names[] = {"libmicrohttpd.so.12", "libmicrohttpd.so"};
#define MHD_NAME(f) #f,
    static const char *const syms[] = {MHD_FUNCS(MHD_NAME)};
#undef MHD_NAME
    void *p[sizeof(syms) / sizeof(syms[0])];
    if (tern_dl_load(names, 2, syms, p, sizeof(syms) / sizeof(syms[0]), mhd_error,
                     sizeof(mhd_error)) < 0)
        return;
    size_t i = 0;
#define MHD_SET(f) memcpy(&mhd.f, &p[i++], sizeof(void *));
    MHD_FUNCS(MHD_SET)
#undef MHD_SET
}

/* A scraper needs one connection; 16 leave room for a few scrapers and a curl by hand, and cap
 * what a misbehaving local client can hold (each costs libmicrohttpd's 32 KiB memory pool). */
#define METRICS_MAX_CONNECTIONS 16u
/* Half the pool per address: one address (a stuck script, a flood) leaves the other half to
 * everyone else, and beyond it evicts only its own oldest waiting connection. */
#define METRICS_PER_ADDR (METRICS_MAX_CONNECTIONS / 2)
/* Evicted connections stay libmicrohttpd's until its next run reads their end: room for them
 * beside a full pool, so libmicrohttpd's own limit (which refuses without asking) is never the
 * one that decides. */
#define METRICS_SLOTS (2 * METRICS_MAX_CONNECTIONS)
/* A scraper sends its request head in one write as soon as it has connected: 5 s covers two
 * retransmissions of it on a lossy path and cuts a client that trickles its head. The wait for
 * the next request on a kept-alive connection is held to it as well. */
#define METRICS_HEAD_TIMEOUT_MS 5000
/* From the head to the last byte of the response: three times Prometheus' default scrape
 * timeout (10 s), by when the scraper has given up on it anyway. */
#define METRICS_RESPONSE_TIMEOUT_MS 30000
/* libmicrohttpd's idle timeout (no byte either way), behind the two deadlines above. */
#define METRICS_TIMEOUT_S 10u
#define CONTENT_TYPE      "text/plain; version=0.0.4; charset=utf-8"
#define JSON_TYPE         "application/json"
#define HTML_TYPE         "text/html; charset=utf-8"

/* One connection libmicrohttpd holds. */
typedef struct mconn {
    struct MHD_Connection *conn; /* NULL: a free slot */
    int fd;
    struct sockaddr_storage addr; /* the client's (its port is ignored when comparing) */
    int64_t deadline;             /* monotonic ms: end of the head, or of the response */
    bool in_request;              /* the head is in; the response is not all sent yet */
    bool evicted;                 /* shut down; libmicrohttpd frees it on its next run */
} mconn_t;

struct metrics {
    struct MHD_Daemon *daemon;
    pthread_t thread;
    int evfd;                     /* metrics_stop() writes it */
    int epfd;                     /* libmicrohttpd's epoll descriptor */
    mconn_t conns[METRICS_SLOTS]; /* touched only on the serving thread */
    loader_t *loader;
    const server_t *server;
    xfr_t *xfr; /* zone transfers, or NULL */
    uint16_t port;
    int64_t start_time;        /* wall clock, s since the epoch */
    status_history_t *history; /* the status page's health history (serving thread only) */
    int64_t next_sample;       /* monotonic ms of its next sample */
    atomic_bool serving;       /* set once started: libmicrohttpd's messages are then per client */
};

/* ---- connections ----------------------------------------------------------------------------
 * All of this runs on the serving thread (libmicrohttpd's callbacks and the loop), so the table
 * needs no lock. */

static mconn_t *conn_slot(struct MHD_Connection *c)
{
    const union MHD_ConnectionInfo *i =
        mhd.MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return i ? i->socket_context : NULL;
}

/* on_request(): the request head is complete; the response deadline starts. */
static void conn_head_in(struct MHD_Connection *c)
{
    mconn_t *k = conn_slot(c);
    if (!k || k->in_request)
        return;
    k->in_request = true;
    k->deadline = tern_monotonic_ms() + METRICS_RESPONSE_TIMEOUT_MS;
}

/* MHD_OPTION_NOTIFY_COMPLETED: the response is sent (or the request failed); a kept-alive
 * connection waits for its next head under the head deadline again. */
static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
    (void)cls, (void)con_cls, (void)toe;
    mconn_t *k = conn_slot(c);
    if (!k)
        return;
    k->in_request = false;
    k->deadline = tern_monotonic_ms() + METRICS_HEAD_TIMEOUT_MS;
}

static bool same_addr(const struct sockaddr_storage *a, const struct sockaddr *b)
{
    if (a->ss_family != b->sa_family)
        return false;
    if (a->ss_family == AF_INET)
        return ((const struct sockaddr_in *)a)->sin_addr.s_addr ==
               ((const struct sockaddr_in *)b)->sin_addr.s_addr;
    return memcmp(&((const struct sockaddr_in6 *)a)->sin6_addr,
                  &((const struct sockaddr_in6 *)b)->sin6_addr, sizeof(struct in6_addr)) == 0;
}

/* Close k: libmicrohttpd sees the end of the stream on its next run and frees it. */
static void conn_evict(mconn_t *k, const char *why)
{
    log_debug("metrics: closing a connection: %s", why);
    (void)shutdown(k->fd, SHUT_RDWR);
    k->evicted = true;
}

/* Evict the connection (from addr, or from anyone when addr is NULL) that has waited longest for
 * its request head. false when every such connection is in a request. */
static bool evict_oldest_waiting(metrics_t *m, const struct sockaddr *addr, const char *why)
{
    mconn_t *old = NULL;
    for (unsigned i = 0; i < METRICS_SLOTS; i++) {
        mconn_t *k = &m->conns[i];
        if (!k->conn || k->evicted || k->in_request || (addr && !same_addr(&k->addr, addr)))
            continue;
        if (!old || k->deadline < old->deadline)
            old = k;
    }
    if (!old)
        return false;
    conn_evict(old, why);
    return true;
}

/* The accept policy callback (MHD_start_daemon()'s apc): admit a new connection, making room
 * by eviction. */
static enum MHD_Result on_accept(void *cls, const struct sockaddr *addr, socklen_t len)
{
    metrics_t *m = cls;
    (void)len;
    unsigned live = 0, from_addr = 0;
    for (unsigned i = 0; i < METRICS_SLOTS; i++) {
        const mconn_t *k = &m->conns[i];
        if (!k->conn || k->evicted)
            continue;
        live++;
        from_addr += same_addr(&k->addr, addr);
    }
    if (from_addr >= METRICS_PER_ADDR &&
        !evict_oldest_waiting(m, addr, "its address is at the per-address limit"))
        return MHD_NO;
    else if (from_addr < METRICS_PER_ADDR && live >= METRICS_MAX_CONNECTIONS &&
             !evict_oldest_waiting(m, NULL, "the pool is full"))
        return MHD_NO;
    return MHD_YES;
}

/* MHD_OPTION_NOTIFY_CONNECTION: keep the table in step with libmicrohttpd's connections. */
static void on_connection(void *cls, struct MHD_Connection *c, void **socket_context,
                          enum MHD_ConnectionNotificationCode toe)
{
    metrics_t *m = cls;
    if (toe == MHD_CONNECTION_NOTIFY_CLOSED) {
        mconn_t *k = *socket_context;
        if (k)
            memset(k, 0, sizeof(*k));
        *socket_context = NULL;
        return;
    }
    const union MHD_ConnectionInfo *fd =
        mhd.MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    const union MHD_ConnectionInfo *addr =
        mhd.MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    mconn_t *k = NULL;
    for (unsigned i = 0; i < METRICS_SLOTS && !k; i++)
        if (!m->conns[i].conn)
            k = &m->conns[i];
    if (!fd || !addr || !k) { /* no slot: cannot happen with METRICS_SLOTS as the MHD limit */
        if (fd)
            (void)shutdown(fd->connect_fd, SHUT_RDWR);
        return;
    }
    *k = (mconn_t){
        .conn = c, .fd = fd->connect_fd, .deadline = tern_monotonic_ms() + METRICS_HEAD_TIMEOUT_MS};
    memcpy(&k->addr, addr->client_addr,
           addr->client_addr->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6)
                                                    : sizeof(struct sockaddr_in));
    *socket_context = k;
}

/* Close the connections past their deadline; the next deadline (INT64_MAX if none). */
static int64_t sweep(metrics_t *m, int64_t now)
{
    int64_t next = INT64_MAX;
    for (unsigned i = 0; i < METRICS_SLOTS; i++) {
        mconn_t *k = &m->conns[i];
        if (!k->conn || k->evicted)
            continue;
        if (k->deadline <= now)
            conn_evict(k, k->in_request ? "response past its deadline"
                                        : "no complete request head in time");
        else if (k->deadline < next)
            next = k->deadline;
    }
    return next;
}

/* The serving thread: libmicrohttpd's descriptors and deadlines, ours, and the stop eventfd. */
/* Sample the health registry for the status page's history when due (status.h). */
static void history_tick(metrics_t *m, int64_t now)
{
    if (now < m->next_sample)
        return;
    m->next_sample = now + STATUS_SAMPLE_MS;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    status_history_sample(m->history, loader_health(m->loader),
                          (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000);
}

static void *metrics_main(void *arg)
{
    metrics_t *m = arg;
    /* one libmicrohttpd run per pass; ends when metrics_stop() writes the eventfd */
    for (;;) {
        int64_t now = tern_monotonic_ms();
        history_tick(m, now);
        int64_t next = sweep(m, now);
        if (next > m->next_sample)
            next = m->next_sample;
        MHD_UNSIGNED_LONG_LONG mhd_ms;
        int64_t wait = next == INT64_MAX ? -1 : next - now;
        if (mhd.MHD_get_timeout(m->daemon, &mhd_ms) == MHD_YES &&
            (wait < 0 || (MHD_UNSIGNED_LONG_LONG)wait > mhd_ms))
            wait = (int64_t)mhd_ms;
        if (wait > INT32_MAX)
            wait = INT32_MAX;
        struct pollfd p[2] = {{.fd = m->epfd, .events = POLLIN}, {.fd = m->evfd, .events = POLLIN}};
        if (poll(p, 2, (int)wait) < 0 && errno != EINTR) {
            log_err("metrics: poll: %s", strerror(errno));
            break;
        }
        if (p[1].revents)
            break;
        (void)mhd.MHD_run(m->daemon);
    }
    return NULL;
}

/* ---- HTTP ----------------------------------------------------------------------------------- */

/* A short static text answer (404, 405, 500). */
static enum MHD_Result answer_text(struct MHD_Connection *c, unsigned status, const char *text,
                                   const char *allow)
{
    struct MHD_Response *r =
        mhd.MHD_create_response_from_buffer(strlen(text), (void *)text, MHD_RESPMEM_PERSISTENT);
    if (!r)
        return MHD_NO;
    enum MHD_Result ok =
        mhd.MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "text/plain; charset=utf-8");
    if (ok == MHD_YES && allow)
        ok = mhd.MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, allow);
    if (ok == MHD_YES)
        ok = mhd.MHD_queue_response(c, status, r);
    mhd.MHD_destroy_response(r);
    return ok;
}

/* GET /: the status page (status_page.c), a constant. The Content-Security-Policy lets it run
 * only its own inline script and fetch only from this origin: nothing external can load. */
static enum MHD_Result answer_page(struct MHD_Connection *c)
{
    struct MHD_Response *r = mhd.MHD_create_response_from_buffer(
        strlen(status_page_html), (void *)status_page_html, MHD_RESPMEM_PERSISTENT);
    if (!r)
        return MHD_NO;
    enum MHD_Result ok = mhd.MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, HTML_TYPE);
    if (ok == MHD_YES)
        ok = mhd.MHD_add_response_header(r, "Content-Security-Policy",
                                         "default-src 'none'; script-src 'unsafe-inline'; "
                                         "style-src 'unsafe-inline'; connect-src 'self'");
    if (ok == MHD_YES)
        ok = mhd.MHD_queue_response(c, MHD_HTTP_OK, r);
    mhd.MHD_destroy_response(r);
    return ok;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version, const char *upload_data,
                                  size_t *upload_data_size, void **con_cls)
{
    static int request_seen; /* its address marks a request whose headers we have seen */
    metrics_t *m = cls;
    (void)version;
    (void)upload_data;
    conn_head_in(c);

    /* Other methods are answered on the first call, before any body is read: libmicrohttpd then
     * closes the connection instead of reading a body nobody wants. */
    if (strcmp(method, MHD_HTTP_METHOD_GET) != 0 && strcmp(method, MHD_HTTP_METHOD_HEAD) != 0)
        return answer_text(c, MHD_HTTP_METHOD_NOT_ALLOWED, "method not allowed\n", "GET, HEAD");
    /* GET and HEAD are answered on a later call, once the request is complete: a response
     * queued on the first call ends the connection, and scrapers keep theirs alive. */
    if (!*con_cls) {
        *con_cls = &request_seen;
        return MHD_YES;
    }
    if (*upload_data_size) {
        *upload_data_size = 0; /* a GET with a body: ignored */
        return MHD_YES;
    }
    if (strcmp(url, "/") == 0)
        return answer_page(c);
    bool json = strcmp(url, "/status.json") == 0;
    if (!json && strcmp(url, "/metrics") != 0)
        return answer_text(c, MHD_HTTP_NOT_FOUND, "not found; try /metrics or /\n", NULL);

    tern_buf_t b;
    metrics_source_t src = {.loader = m->loader,
                            .server = m->server,
                            .xfr = __atomic_load_n(&m->xfr, __ATOMIC_ACQUIRE),
                            .start_time = m->start_time};
    if ((json ? status_json_render(&b, &src, m->history) : metrics_render(&b, &src)) < 0) {
        log_warn("metrics: cannot render %s (out of memory or over %u bytes)", url,
                 METRICS_BODY_MAX);
        return answer_text(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "cannot render metrics\n", NULL);
    }
    struct MHD_Response *r = mhd.MHD_create_response_from_buffer(b.len, b.p, MHD_RESPMEM_MUST_FREE);
    if (!r) {
        tern_buf_free(&b);
        return MHD_NO;
    }
    enum MHD_Result ok = mhd.MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE,
                                                     json ? JSON_TYPE : CONTENT_TYPE);
    if (ok == MHD_YES && json) /* every poll must see the state of that moment */
        ok = mhd.MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
    if (ok == MHD_YES)
        ok = mhd.MHD_queue_response(c, MHD_HTTP_OK, r);
    mhd.MHD_destroy_response(r);
    return ok;
}

/* libmicrohttpd's own messages into our log: at startup they say why it cannot serve (a
 * warning, followed by our error); once serving they are about single clients (a reset, a
 * malformed request, the connection limit), which must not flood the log: debug. */
static void mhd_log(void *cls, const char *fmt, va_list ap) TERN_PRINTF(2, 0);
static void mhd_log(void *cls, const char *fmt, va_list ap)
{
    const metrics_t *m = cls;
    char msg[512];
    int n = vsnprintf(msg, sizeof(msg), fmt, ap);
    if (n < 0)
        return;
    size_t len = strnlen(msg, sizeof(msg));
    if (len > 0 && msg[len - 1] == '\n')
        msg[len - 1] = '\0';
    log_msg(atomic_load(&m->serving) ? LOG_LVL_DEBUG : LOG_LVL_WARN, "metrics: %s", msg);
}

static bool is_loopback(const struct sockaddr_storage *ss)
{
    if (ss->ss_family == AF_INET) {
        const struct sockaddr_in *sa = (const struct sockaddr_in *)ss;
        return (ntohl(sa->sin_addr.s_addr) >> 24) == 127;
    }
    const struct sockaddr_in6 *sa = (const struct sockaddr_in6 *)ss;
    return IN6_IS_ADDR_LOOPBACK(&sa->sin6_addr);
}

metrics_t *metrics_start(const char *listen, loader_t *loader, const server_t *server)
{
    config_listen_t addr;
    if (!listen || config_parse_listen(&addr, listen) < 0) {
        log_err("metrics: bad address \"%s\" (want ADDR:PORT or [V6]:PORT)",
                listen ? listen : "(null)");
        return NULL;
    }
    pthread_once(&mhd_once, mhd_load);
    if (mhd_error[0]) {
        log_err("metrics: %s (package libmicrohttpd12)", mhd_error);
        return NULL;
    }
    metrics_t *m = calloc(1, sizeof(*m));
    if (!m) {
        log_err("metrics: out of memory");
        return NULL;
    }
    m->loader = loader;
    m->server = server;
    m->evfd = -1;
    if (!(m->history = status_history_new())) {
        log_err("metrics: out of memory");
        free(m);
        return NULL;
    }
    atomic_init(&m->serving, false);
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    m->start_time = ts.tv_sec;

    /* no internal thread: metrics_main() runs libmicrohttpd (see the top of this file) */
    unsigned flags = MHD_USE_EPOLL | MHD_USE_ERROR_LOG;
    if (addr.addr.ss_family == AF_INET6)
        flags |= MHD_USE_IPv6; /* IPV6_V6ONLY: exactly this address, no IPv4 mapped */
    uint16_t port =
        ntohs(addr.addr.ss_family == AF_INET6 ? ((const struct sockaddr_in6 *)&addr.addr)->sin6_port
                                              : ((const struct sockaddr_in *)&addr.addr)->sin_port);
    /* The port argument is ignored when MHD_OPTION_SOCK_ADDR is given; pass it for clarity. */
    m->daemon = mhd.MHD_start_daemon(
        flags, port, on_accept, m, on_request, m,
        /* first, or libmicrohttpd writes to stderr about the options before it */
        MHD_OPTION_EXTERNAL_LOGGER, mhd_log, m, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&addr.addr,
        MHD_OPTION_CONNECTION_LIMIT, METRICS_SLOTS, MHD_OPTION_CONNECTION_TIMEOUT,
        METRICS_TIMEOUT_S, MHD_OPTION_NOTIFY_CONNECTION, on_connection, m,
        MHD_OPTION_NOTIFY_COMPLETED, on_completed, m, MHD_OPTION_END);
    if (!m->daemon) {
        log_err("metrics: cannot serve on %s", listen);
        goto fail;
    }
    atomic_store(&m->serving, true);
    const union MHD_DaemonInfo *info =
        mhd.MHD_get_daemon_info(m->daemon, MHD_DAEMON_INFO_BIND_PORT);
    m->port = info ? info->port : port;
    const union MHD_DaemonInfo *ep = mhd.MHD_get_daemon_info(m->daemon, MHD_DAEMON_INFO_EPOLL_FD);
    if (!ep || ep->epoll_fd < 0) {
        log_err("metrics: libmicrohttpd gives no epoll descriptor");
        goto fail;
    }
    m->epfd = ep->epoll_fd;
    if ((m->evfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) < 0) {
        log_err("metrics: eventfd: %s", strerror(errno));
        goto fail;
    }
    int e = pthread_create(&m->thread, NULL, metrics_main, m);
    if (e != 0) {
        log_err("metrics: cannot start its thread: %s", strerror(e));
        goto fail;
    }
    if (!is_loopback(&addr.addr))
        log_warn("metrics: %s is not a loopback address and the endpoint has no authentication",
                 listen);
    char host[INET6_ADDRSTRLEN] = "?";
    const void *a = addr.addr.ss_family == AF_INET6
                        ? (const void *)&((const struct sockaddr_in6 *)&addr.addr)->sin6_addr
                        : (const void *)&((const struct sockaddr_in *)&addr.addr)->sin_addr;
    inet_ntop(addr.addr.ss_family, a, host, sizeof(host));
    if (addr.addr.ss_family == AF_INET6)
        log_info("metrics: serving http://[%s]:%u/metrics (status page at /)", host, m->port);
    else
        log_info("metrics: serving http://%s:%u/metrics (status page at /)", host, m->port);
    return m;
fail:
    if (m->daemon)
        mhd.MHD_stop_daemon(m->daemon);
    if (m->evfd >= 0)
        close(m->evfd);
    status_history_free(m->history);
    free(m);
    return NULL;
}

uint16_t metrics_port(const metrics_t *m)
{
    return m->port;
}

void metrics_set_xfr(metrics_t *m, xfr_t *x)
{
    if (m)
        __atomic_store_n(&m->xfr, x, __ATOMIC_RELEASE);
}

void metrics_stop(metrics_t *m)
{
    if (!m)
        return;
    uint64_t one = 1;
    if (write(m->evfd, &one, sizeof(one)) != (ssize_t)sizeof(one))
        log_warn("metrics: eventfd write: %s", strerror(errno));
    pthread_join(m->thread, NULL);
    /* without an internal thread this closes every connection at once, waiting for none */
    mhd.MHD_stop_daemon(m->daemon);
    close(m->evfd);
    status_history_free(m->history);
    free(m);
}
