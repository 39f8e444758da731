/*
 * xfr_secondary.c — secondary zones (xfr.h): the pullers ("tern-xfr-inN"), each refreshing one
 * due zone at a time from its primaries — SOA timers from the zone's own SOA, the SOA query, IXFR
 * with AXFR fallback, the new version handed to the loader, expiry. Every wait has a deadline
 * and watches the stop flag.
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "tern/common/byteorder.h"
#include "tern/common/clock.h"
#include "tern/common/err.h"
#include "tern/common/log.h"
#include "tern/common/rcu.h"
#include "tern/xfr/xfr_in.h"
#include "tern/zone/zone_file.h"

#include "xfr_int.h"
#include "xfr_tls.h"

/* Secondary timers: the zone's SOA gives refresh, retry and expire; these bound them so a SOA
 * of zeros cannot spin the thread and one of years still refreshes daily. 2 s is Knot's
 * refresh-min-interval. */
#define REFRESH_MIN_MS 2000
#define REFRESH_MAX_MS (86400 * 1000LL)
/* before any SOA is known (nothing transferred yet): retry this often */
#define RETRY_FIRST_MS 5000

/* ---- waits with deadlines ------------------------------------------------------------------ */

/* The pullers' waits are sliced so that a stop (xfr_free()) never waits for a slow primary's
 * deadline: 100 ms is a shutdown nobody notices. */
#define WAIT_SLICE_MS 100

/* poll() one descriptor until the monotonic time until (ms), giving up early when x stops:
 * 1 ready, 0 timed out or stopping (the caller tells which by x->stop), -errno. */
static int wait_fd(xfr_t *x, int fd, short events, int64_t until)
{
    for (;;) {
        if (__atomic_load_n(&x->stop, __ATOMIC_ACQUIRE))
            return 0;
        int64_t left = until - tern_monotonic_ms();
        if (left <= 0)
            return 0;
        struct pollfd pf = {.fd = fd, .events = events};
        int pr = poll(&pf, 1, left < WAIT_SLICE_MS ? (int)left : WAIT_SLICE_MS);
        if (pr > 0)
            return 1;
        if (pr < 0 && errno != EINTR)
            return -errno;
    }
}

/* A socket to peer p, connected (TCP: the handshake done by until). fd or a negative code:
 * TERN_ETIMEDOUT when until passed (or x stops). */
static int connect_to(xfr_t *x, const config_xfr_peer_t *p, int type, int64_t until)
{
    int fd = socket(p->addr.ss_family, type | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        return -errno;
    if (connect(fd, (const struct sockaddr *)&p->addr, p->addr_len) < 0 && errno != EINPROGRESS) {
        int e = errno;
        close(fd);
        return -e;
    }
    if (type == SOCK_STREAM) {
        int rc = wait_fd(x, fd, POLLOUT, until);
        if (rc != 1) {
            close(fd);
            return rc < 0 ? rc : TERN_ETIMEDOUT;
        }
        int err = 0;
        socklen_t el = sizeof(err);
        getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el);
        if (err) {
            close(fd);
            return -err;
        }
    }
    return fd;
}

/* A stream to a primary: its socket, and the TLS session over it when the primary has tls
 * (XoT, RFC 9103). fd -1: none open. */
typedef struct {
    int fd;
    xfr_tls_conn_t *tls;
} xconn_t;

static void conn_close(xconn_t *c)
{
    xfr_tls_conn_free(c->tls);
    c->tls = NULL;
    if (c->fd >= 0)
        close(c->fd);
    c->fd = -1;
}

/* Write or read len bytes over c by until: 0, TERN_ETIMEDOUT, TERN_ECONNRESET (closed),
 * TERN_EPROTO (TLS) or -errno. Over TLS the operation is tried first and waited for only when
 * it asks (OpenSSL may hold decrypted bytes the socket no longer shows). */
static int io_all(xfr_t *x, const xconn_t *c, uint8_t *buf, size_t len, bool wr, int64_t until)
{
    size_t done = 0;
    short want = wr ? POLLOUT : POLLIN;
    while (done < len) {
        ssize_t k;
        if (c->tls) {
            k = xfr_tls_io(c->tls, buf + done, len - done, wr, &want);
            if (k < 0)
                return (int)k;
        } else {
            k = wr ? send(c->fd, buf + done, len - done, MSG_NOSIGNAL)
                   : recv(c->fd, buf + done, len - done, 0);
            if (k == 0)
                return TERN_ECONNRESET;
            if (k < 0 && errno != EAGAIN && errno != EINTR)
                return -errno;
            k = k < 0 ? 0 : k;
        }
        done += (size_t)k;
        if (k > 0)
            continue;
        int pr = wait_fd(x, c->fd, want, until);
        if (pr == 0)
            return TERN_ETIMEDOUT;
        if (pr < 0)
            return pr;
    }
    return 0;
}

typedef struct {
    const uint8_t *apex;
    size_t apex_len;
    config_xfr_peer_t peer;
    bool has_key;
    tsig_key_t key;
    zone_t *base;
    size_t max_bytes;
    /* Deadlines (see step_end()): each step within timeout_ms, the transfer by until, which is
     * total_ms after its start. */
    xfr_t *x; /* whose stop every wait checks */
    int timeout_ms, total_ms;
    int64_t until;
    size_t wire, mem; /* the last transfer's message bytes and memory estimate, for the log */
    bool soa_refused; /* the SOA query was answered REFUSED (signed or not) */
    char key_name[DNAME_KEY_MAX];
    /* XoT: the primary's TLS context (NULL: clear text), the stream the SOA query opened (the
     * transfer follows on it: RFC 9103 §6 lets one connection carry both), and how the last
     * handshake went, for the log */
    xfr_tls_t *tls;
    xconn_t conn;
    char tls_desc[256];
} pull_t;

/*
 * The deadline of the step of p that starts now: one exchange (the SOA query and its answer,
 * the connect, the request written, one message of the answer read whole) must be done within
 * xfr_timeout_ms, and every step by the transfer's total deadline. Per step, not per byte: a
 * primary dripping a byte a second would otherwise keep a message, and the transfer, going for
 * ever (Knot decrements its tcp-remote-io-timeout across a message the same way, in
 * src/contrib/net.c io_exec()). The total deadline is BIND's max-transfer-time-in: a primary
 * sending a small message a second never breaks the per-step deadline.
 */
static int64_t step_end(const pull_t *p)
{
    int64_t step = tern_monotonic_ms() + p->timeout_ms;
    return step < p->until ? step : p->until;
}

/* err for a step (what) that ended with rc at the deadline step (from step_end()); returns rc. */
static int step_failed(const pull_t *p, int rc, int64_t step, const char *what, char *err,
                       size_t errlen)
{
    if (__atomic_load_n(&p->x->stop, __ATOMIC_ACQUIRE))
        snprintf(err, errlen, "%s: stopped (shutting down)", what);
    else if (rc == TERN_EPROTO && p->conn.tls && xfr_tls_conn_error(p->conn.tls)[0])
        snprintf(err, errlen, "%s: %s", what, xfr_tls_conn_error(p->conn.tls));
    else if (rc != TERN_ETIMEDOUT)
        snprintf(err, errlen, "%s: %s", what, tern_strerror(rc));
    else if (step >= p->until)
        snprintf(err, errlen, "%s: the transfer was not done within %d ms (xfr_total_timeout_ms)",
                 what, p->total_ms);
    else
        snprintf(err, errlen, "%s: not done in %d ms (xfr_timeout_ms)", what, p->timeout_ms);
    return rc;
}

static int soa_exchange(pull_t *p, tsig_ctx_t *ctxp, uint8_t *m, size_t n, uint16_t id,
                        uint32_t *serial, char *err, size_t errlen);

/* A socket of type to p's primary for an exchange that starts now: the exchange's total
 * deadline set, the first step's in *step, connected within it (UDP: at once). what (wlen bytes)
 * gets "<verb> <primary>", the step's name in errors. The socket, or a negative code with err
 * set. */
static int pull_connect(pull_t *p, int type, const char *verb, char *what, size_t wlen,
                        int64_t *step, char *err, size_t errlen)
{
    snprintf(what, wlen, "%s %s", verb, p->peer.text);
    p->until = tern_monotonic_ms() + p->total_ms;
    *step = step_end(p);
    int fd = connect_to(p->x, &p->peer, type, *step);
    return fd < 0 ? step_failed(p, fd, *step, what, err, errlen) : fd;
}

/* p->conn: a stream to p's primary for an exchange that starts now (pull_connect()), with the
 * TLS handshake and its authentication done within the same step when the primary has tls.
 * Kept open if it already is. 0, or a negative code with err set. */
static int pull_stream(pull_t *p, char *err, size_t errlen)
{
    if (p->conn.fd >= 0) {
        p->until = tern_monotonic_ms() + p->total_ms; /* a new exchange on it */
        return 0;
    }
    char what[96];
    int64_t step;
    int fd = pull_connect(p, SOCK_STREAM, "connect to", what, sizeof(what), &step, err, errlen);
    if (fd < 0)
        return fd;
    p->conn.fd = fd;
    if (!p->tls)
        return 0;
    snprintf(what, sizeof(what), "TLS to %s", p->peer.text);
    if (!(p->conn.tls = xfr_tls_conn_new(p->tls, fd))) {
        conn_close(&p->conn);
        snprintf(err, errlen, "%s: out of memory", what);
        return TERN_ENOMEM;
    }
    for (;;) {
        int hs = xfr_tls_handshake(p->conn.tls, err, errlen);
        if (hs == 0)
            break;
        if (hs < 0) { /* err says why: a strict failure never sends the query */
            conn_close(&p->conn);
            return hs;
        }
        int wr = wait_fd(p->x, fd, (short)hs, step);
        if (wr != 1) {
            conn_close(&p->conn);
            return step_failed(p, wr < 0 ? wr : TERN_ETIMEDOUT, step, what, err, errlen);
        }
    }
    xfr_tls_conn_describe(p->conn.tls, p->tls_desc, sizeof(p->tls_desc));
    log_debug("xfr: TLS to %s: %s", p->peer.text, p->tls_desc);
    return 0;
}

/* The SOA query m (n bytes, room for 1024 + 2 at m) over p's TLS stream, its answer into r (cap
 * bytes) and its length into *len. 0, or a negative code with err set. */
static int soa_over_tls(pull_t *p, uint8_t *m, size_t n, uint8_t *r, size_t cap, size_t *len,
                        char *err, size_t errlen)
{
    int rc = pull_stream(p, err, errlen);
    if (rc < 0)
        return rc;
    memmove(m + 2, m, n);
    tern_wr16(m, (uint16_t)n);
    int64_t step = step_end(p);
    rc = io_all(p->x, &p->conn, m, n + 2, true, step);
    uint8_t l2[2];
    if (rc == 0)
        rc = io_all(p->x, &p->conn, l2, 2, false, step);
    *len = rc == 0 ? tern_rd16(l2) : 0;
    if (rc == 0 && *len > cap)
        rc = TERN_EPROTO;
    if (rc == 0)
        rc = io_all(p->x, &p->conn, r, *len, false, step);
    if (rc < 0) {
        char what[96];
        snprintf(what, sizeof(what), "SOA query to %s", p->peer.text);
        step_failed(p, rc, step, what, err, errlen);
        conn_close(&p->conn);
        return rc;
    }
    return 0;
}

/* The primary's serial (SOA over UDP, signed when a key is set). 0 or negative, err set. */
static int query_soa(pull_t *p, uint32_t *serial, char *err, size_t errlen)
{
    uint8_t m[1024 + 2]; /* + 2: the length in front, over TLS */
    uint16_t id;
    if (getrandom(&id, sizeof(id), 0) != sizeof(id))
        id = 0x5a5a;
    size_t n = xfr_msg_question(m, id, 0, p->apex, p->apex_len, WIRE_T_SOA);
    tsig_ctx_t ctx;
    tsig_ctx_init(&ctx);
    int rc = soa_exchange(p, &ctx, m, n, id, serial, err, errlen);
    tsig_ctx_clear(&ctx);
    return rc;
}

/* The SOA query m (n bytes, room for 1024 + 2) to p's primary and the answer with its id into r
 * (cap bytes): over UDP, or over the TLS stream when the primary has tls (the transfer then
 * follows on it: never a datagram in clear). The answer's length, or a negative code, err set. */
static ssize_t soa_roundtrip(pull_t *p, uint8_t *m, size_t n, uint16_t id, uint8_t *r, size_t cap,
                             char *err, size_t errlen)
{
    if (p->tls) {
        size_t len = 0;
        int rc = soa_over_tls(p, m, n, r, cap, &len, err, errlen);
        if (rc < 0)
            return rc;
        if (len < 12 || tern_rd16(r) != id || !(tern_rd16(r + 2) & WIRE_FLAG_QR)) {
            snprintf(err, errlen, "SOA answer from %s: not an answer to the query", p->peer.text);
            return TERN_EPROTO;
        }
        return (ssize_t)len;
    }
    char what[96];
    int64_t step;
    int fd = pull_connect(p, SOCK_DGRAM, "SOA query to", what, sizeof(what), &step, err, errlen);
    if (fd < 0)
        return fd;
    (void)send(fd, m, n, MSG_NOSIGNAL);
    for (;;) {
        int wr = wait_fd(p->x, fd, POLLIN, step);
        if (wr != 1) {
            close(fd);
            return step_failed(p, wr < 0 ? wr : TERN_ETIMEDOUT, step, what, err, errlen);
        }
        ssize_t k = recv(fd, r, cap, 0);
        if (k < 12 || tern_rd16(r) != id || !(tern_rd16(r + 2) & WIRE_FLAG_QR))
            continue;
        close(fd);
        return k;
    }
}

static int soa_exchange(pull_t *p, tsig_ctx_t *ctxp, uint8_t *m, size_t n, uint16_t id,
                        uint32_t *serial, char *err, size_t errlen)
{
    if (p->has_key && tsig_sign_request(ctxp, &p->key, m, n, 1024, now_s(), &n) < 0) {
        snprintf(err, errlen, "cannot sign the SOA query");
        return TERN_EINVAL;
    }
    uint8_t r[4096];
    ssize_t k = soa_roundtrip(p, m, n, id, r, sizeof(r), err, errlen);
    if (k < 0)
        return (int)k;
    size_t len = (size_t)k;
    /* Knot refuses queries for a catalog zone over UDP, unsigned, and answers them over
     * TCP: the caller asks by transfer instead. A forged REFUSED costs only that transfer
     * request, which is verified as any. */
    p->soa_refused = WIRE_RCODE(tern_rd16(r + 2)) == WIRE_RC_REFUSED;
    if (p->soa_refused) {
        snprintf(err, errlen, "SOA query to %s: REFUSED", p->peer.text);
        return TERN_EPROTO;
    }
    if (p->has_key) {
        size_t stripped = len;
        int rc = tsig_verify_response(ctxp, r, len, now_s(), &stripped);
        if (rc != 0) {
            snprintf(err, errlen, "SOA answer from %s: TSIG: %s%s%s", p->peer.text,
                     tsig_strerror(rc), rc == TSIG_EPEER ? " " : "",
                     rc == TSIG_EPEER ? tsig_error_name(ctxp->peer_error) : "");
            return TERN_EACCES;
        }
        len = stripped;
    }
    unsigned rc = WIRE_RCODE(tern_rd16(r + 2));
    if (rc != WIRE_RC_NOERROR || tern_rd16(r + 6) < 1) {
        snprintf(err, errlen, "SOA query to %s: rcode %u, %u answers", p->peer.text, rc,
                 tern_rd16(r + 6));
        return TERN_EPROTO;
    }
    size_t pos = 12;
    if (dname_unpack(r, len, len, &pos, NULL, NULL) < 0 || len - pos < 4) {
        snprintf(err, errlen, "SOA answer from %s: malformed", p->peer.text);
        return TERN_EPROTO;
    }
    pos += 4;
    if (dname_unpack(r, len, len, &pos, NULL, NULL) < 0 || len - pos < 10 ||
        tern_rd16(r + pos) != WIRE_T_SOA) {
        snprintf(err, errlen, "SOA answer from %s: no SOA", p->peer.text);
        return TERN_EPROTO;
    }
    size_t rdlen = tern_rd16(r + pos + 8), rd = pos + 10;
    if (len - rd < rdlen || rdlen < 22) {
        snprintf(err, errlen, "SOA answer from %s: malformed SOA", p->peer.text);
        return TERN_EPROTO;
    }
    *serial = tern_rd32(r + rd + rdlen - 20);
    return 0;
}

/* p's AXFR or IXFR request into q (room for RBUF_CAP), unsigned; returns its length. */
static size_t pull_request(const pull_t *p, bool ixfr, uint16_t id, uint8_t *q)
{
    size_t n = xfr_msg_question(q, id, 0, p->apex, p->apex_len, ixfr ? WIRE_T_IXFR : WIRE_T_AXFR);
    if (ixfr) {
        /* RFC 1995 §3: our SOA in the authority section */
        const zone_rrset_t *soa = p->base->soa;
        tern_wr16(q + 8, 1);
        n += xfr_msg_soa(q + n, soa->ttl, soa->rdata + 2, tern_rd16(soa->rdata));
    }
    return n;
}

/* The request (n bytes at m + 2) sent to p's primary on p->conn (the SOA query's, over TLS;
 * else a new connection): 0, or a negative code with err set. */
static int pull_send(pull_t *p, uint8_t *m, size_t n, char *err, size_t errlen)
{
    tern_wr16(m, (uint16_t)n);
    int rc = pull_stream(p, err, errlen);
    if (rc < 0)
        return rc;
    err[0] = '\0';
    int64_t step = step_end(p);
    rc = io_all(p->x, &p->conn, m, n + 2, true, step);
    if (rc < 0) {
        step_failed(p, rc, step, "the request", err, errlen);
        conn_close(&p->conn);
        return rc;
    }
    return 0;
}

/* The answer's messages read from fd (into m, room for RBUF_CAP) and fed to xi until the
 * transfer is whole, each verified in ctx when p has a key. 0, or a negative code (err set
 * unless it is only a code). */
static int pull_read(pull_t *p, uint8_t *m, tsig_ctx_t *ctx, xfr_in_t *xi, char *err, size_t errlen)
{
    char what[96];
    size_t msgs = 0;
    for (;;) {
        /* the whole message, its length and its bytes, within one step */
        int64_t step = step_end(p);
        int rc = io_all(p->x, &p->conn, m, 2, false, step);
        size_t len = rc < 0 ? 0 : tern_rd16(m);
        if (rc == 0 && len < 12) {
            snprintf(err, errlen, "message %zu: %zu bytes", msgs + 1, len);
            return TERN_EPROTO;
        }
        if (rc == 0)
            rc = io_all(p->x, &p->conn, m + 2, len, false, step);
        if (rc < 0) {
            snprintf(what, sizeof(what), "message %zu", msgs + 1);
            return step_failed(p, rc, step, what, err, errlen);
        }
        msgs++;
        if (p->has_key) {
            size_t stripped = len;
            int tr = tsig_verify_response(ctx, m + 2, len, now_s(), &stripped);
            if (tr < 0) {
                snprintf(err, errlen, "message %zu: TSIG: %s%s%s", msgs, tsig_strerror(tr),
                         tr == TSIG_EPEER ? " " : "",
                         tr == TSIG_EPEER ? tsig_error_name(ctx->peer_error) : "");
                return TERN_EACCES;
            }
            if (stripped < len) /* the TSIG RR is gone: ARCOUNT says so too */
                tern_wr16(m + 2 + 10, (uint16_t)(tern_rd16(m + 2 + 10) - 1));
            len = stripped;
        }
        int more = xfr_in_feed(xi, m + 2, len, err, errlen);
        if (more != 1)
            return more < 0 ? more : 0;
    }
}

/* A transfer read whole into xi (freed here): 0 with *out, 1 up to date, or negative (err). */
static int pull_finish(pull_t *p, xfr_in_t *xi, zone_t **out, const char **kind, uint64_t *records,
                       char *err, size_t errlen)
{
    *records = xfr_in_records(xi);
    p->wire = xfr_in_bytes(xi);
    p->mem = xfr_in_memory(xi);
    xfr_in_kind_t k = xfr_in_kind(xi);
    *kind = k == XFR_IN_INCREMENTAL ? "IXFR" : k == XFR_IN_FULL ? "AXFR" : "IXFR";
    if (k == XFR_IN_UP_TO_DATE) {
        xfr_in_free(xi);
        return 1;
    }
    int rc = xfr_in_finish(xi, out, err, errlen);
    xfr_in_free(xi);
    return rc < 0 ? rc : 0;
}

/* Transfer the zone from p (IXFR from p->base's serial, else AXFR). 0 with *out (new version),
 * 1: up to date, negative with err. */
static int pull(pull_t *p, bool ixfr, zone_t **out, const char **kind, uint64_t *records, char *err,
                size_t errlen)
{
    uint8_t *m = malloc(RBUF_CAP + 512);
    if (!m) {
        snprintf(err, errlen, "out of memory");
        return TERN_ENOMEM;
    }
    uint16_t id;
    if (getrandom(&id, sizeof(id), 0) != sizeof(id))
        id = 0x4242;
    size_t n = pull_request(p, ixfr, id, m + 2);
    tsig_ctx_t ctx;
    tsig_ctx_init(&ctx);
    xfr_in_t *xi = NULL;
    int rc;
    if (p->has_key && tsig_sign_request(&ctx, &p->key, m + 2, n, RBUF_CAP, now_s(), &n) < 0) {
        snprintf(err, errlen, "cannot sign the request");
        rc = TERN_EINVAL;
        goto done;
    }
    if ((rc = pull_send(p, m, n, err, errlen)) < 0)
        goto done;
    char src[128];
    snprintf(src, sizeof(src), "primary %s", p->peer.text);
    xi = xfr_in_new(p->apex, ixfr ? WIRE_T_IXFR : WIRE_T_AXFR, ixfr ? p->base : NULL, p->max_bytes,
                    src);
    if (!xi) {
        rc = TERN_ENOMEM;
        goto done;
    }
    xfr_in_set_id(xi, id);
    rc = pull_read(p, m, &ctx, xi, err, errlen);
    if (rc == 0 && p->has_key && tsig_verify_end(&ctx) != 0) {
        snprintf(err, errlen, "the last message is not signed");
        rc = TERN_EACCES;
    }
done:
    conn_close(&p->conn);
    free(m);
    tsig_ctx_clear(&ctx);
    if (rc < 0) {
        if (!err[0])
            snprintf(err, errlen, "%s", tern_strerror(rc));
        xfr_in_free(xi);
        return rc;
    }
    return pull_finish(p, xi, out, kind, records, err, errlen);
}

/* SOA timer fields of z (refresh, retry, expire) in ms, bounded. */
static void soa_timers(const zone_t *z, int64_t *refresh, int64_t *retry, int64_t *expire)
{
    const uint8_t *rd = z->soa->rdata + 2;
    size_t rdlen = tern_rd16(z->soa->rdata);
    const uint8_t *t = rd + rdlen - 16;
    int64_t v[3] = {(int64_t)tern_rd32(t) * 1000, (int64_t)tern_rd32(t + 4) * 1000,
                    (int64_t)tern_rd32(t + 8) * 1000};
    for (int i = 0; i < 3; i++)
        v[i] = v[i] < REFRESH_MIN_MS   ? REFRESH_MIN_MS
               : v[i] > REFRESH_MAX_MS ? REFRESH_MAX_MS
                                       : v[i];
    *refresh = v[0];
    *retry = v[1];
    *expire = v[2] * 1;
    if (*expire < *refresh)
        *expire = *refresh;
}

/* The primaries one refresh tries, from the zone's current one on: a zone lists one to three;
 * past eight, a dead list would only make the attempt, and the zone's puller, wait longer. */
#define REFRESH_PRIMARIES_MAX 8

/* One refresh attempt of a secondary zone (refresh_zone()): what it copies under mu, so the
 * transfer runs without it, and what comes of it. */
typedef struct {
    char key[DNAME_KEY_MAX];
    uint8_t apex[DNAME_MAXLEN];
    config_xfr_peer_t prims[REFRESH_PRIMARIES_MAX];
    int pkeys[REFRESH_PRIMARIES_MAX]; /* index in xfr.keys, -1: unsigned */
    tsig_key_t keys[REFRESH_PRIMARIES_MAX];
    xfr_tls_t *tls[REFRESH_PRIMARIES_MAX]; /* references; NULL: clear text */
    size_t nprim;
    char *file;     /* where the zone's copy is written, or NULL */
    bool first_try; /* nothing tried before: the served version (the on-disk copy) is the base */
    /* a catalog's member (its new versions go to hooks.member_in), and its member_gen then: a
     * result for a member reset or retired meanwhile is dropped */
    bool member;
    uint64_t member_gen;
    bool catalog, cat_parsed; /* a catalog zone; its members were read from a version already */
    pull_t p;
    /* the outcome */
    int rc; /* 0: a new version nz, 1: up to date, negative: failed (errs) */
    zone_t *nz;
    const char *kind;
    uint64_t records;
    size_t used; /* the primary (in prims) that answered */
    char errs[1024];
} refresh_t;

/* Copy what an attempt at zone key needs into r, under mu. false: no longer a secondary zone. */
static bool refresh_take(xfr_t *x, const char *key, refresh_t *r)
{
    pthread_mutex_lock(&x->mu);
    struct zst *z = xfr_zone_find(x, key);
    if (!z || !z->secondary) {
        pthread_mutex_unlock(&x->mu);
        return false;
    }
    snprintf(r->key, sizeof(r->key), "%s", z->key);
    memcpy(r->apex, z->apex, z->apex_len);
    r->p.apex = r->apex;
    r->p.apex_len = z->apex_len;
    r->nprim = z->nprim < REFRESH_PRIMARIES_MAX ? z->nprim : REFRESH_PRIMARIES_MAX;
    for (size_t i = 0; i < r->nprim; i++) {
        r->prims[i] = z->prim[(z->cur_prim + i) % z->nprim];
        r->pkeys[i] = z->prim_key[(z->cur_prim + i) % z->nprim];
        if (r->pkeys[i] >= 0)
            r->keys[i] = x->keys[r->pkeys[i]];
        r->tls[i] = xfr_tls_retain(z->prim_tls[(z->cur_prim + i) % z->nprim]);
    }
    r->p.base = z->base ? zone_retain(z->base) : NULL;
    r->first_try = !z->base_tried;
    z->base_tried = true;
    z->notified = false;
    r->p.max_bytes = x->max_bytes;
    r->p.x = x;
    r->p.timeout_ms = (int)x->timeout_ms;
    r->p.total_ms = (int)x->total_ms;
    r->file = z->file ? strdup(z->file) : NULL;
    r->member = z->member_of != NULL;
    r->member_gen = z->member_gen;
    r->catalog = z->cat != NULL;
    r->cat_parsed = z->cat && z->cat->parsed;
    pthread_mutex_unlock(&x->mu);
    if (!r->p.base && r->first_try) {
        /* the version the loader serves (the on-disk copy, read at startup) is our base */
        zone_t *cur = xfr_pin_zone(x, r->apex);
        if (cur && !cur->unavailable)
            r->p.base = cur;
        else
            zone_free(cur);
    }
    return true;
}

/* Primary i of r: its serial, and the zone from it when newer than the base (IXFR, falling back
 * to AXFR). Sets r->rc, r->nz, r->kind, r->records; err on failure. */
static void refresh_from(refresh_t *r, size_t i, char *err, size_t errlen)
{
    pull_t *p = &r->p;
    p->peer = r->prims[i];
    p->has_key = r->pkeys[i] >= 0;
    if (p->has_key)
        p->key = r->keys[i];
    p->tls = r->tls[i];
    p->conn = (xconn_t){.fd = -1};
    p->tls_desc[0] = '\0';
    uint32_t serial = 0;
    p->soa_refused = false;
    r->rc = query_soa(p, &serial, err, errlen);
    if (r->rc == 0 && p->base && !xfr_serial_lt(p->base->serial, serial)) {
        r->rc = 1; /* up to date */
        return;
    }
    if (r->rc != 0 && !p->soa_refused)
        return;
    /* SOA refused: the transfer itself says (IXFR from our serial: an up-to-date primary
     * answers with its SOA alone, RFC 1995 §2) */
    err[0] = '\0';
    r->rc = pull(p, p->base != NULL, &r->nz, &r->kind, &r->records, err, errlen);
    if (r->rc < 0 && p->base && r->rc != TERN_ETIMEDOUT) {
        /* IXFR refused or broken: the whole zone (RFC 1995 §4 fallback); not after a deadline,
         * which an AXFR from the same primary would only wait out again (Knot's refresh does
         * not fall back after an I/O failure either) */
        char e2[512];
        log_info("xfr: zone %s: IXFR from %s failed (%s); trying AXFR", r->key, p->peer.text, err);
        r->rc = pull(p, false, &r->nz, &r->kind, &r->records, e2, sizeof(e2));
        if (r->rc < 0)
            snprintf(err, errlen, "%s", e2);
    }
    if (r->rc == 0 && p->base && xfr_serial_lt(r->nz->serial, p->base->serial)) {
        snprintf(err, errlen, "serial went back from %u to %u", p->base->serial, r->nz->serial);
        zone_free(r->nz);
        r->nz = NULL;
        r->rc = TERN_EPROTO;
    }
}

/* Each primary of r in turn until one answers; each failure appended to r->errs. */
static void refresh_try(xfr_t *x, refresh_t *r)
{
    r->rc = TERN_EINVAL;
    r->kind = "";
    for (size_t i = 0; i < r->nprim && !__atomic_load_n(&x->stop, __ATOMIC_ACQUIRE); i++) {
        char err[512] = "";
        refresh_from(r, i, err, sizeof(err));
        conn_close(&r->p.conn); /* the SOA query's, when no transfer followed */
        if (r->rc >= 0) {
            r->used = i;
            return;
        }
        size_t el = strlen(r->errs);
        snprintf(r->errs + el, sizeof(r->errs) - el, "%s%s: %s", el ? "; " : "", r->prims[i].text,
                 err);
    }
}

/* The outcome of r in the log, and a new version in the zone's on-disk copy. */
static void refresh_log(const refresh_t *r)
{
    if (r->rc == 0) {
        char was[32] = "";
        if (r->p.base)
            snprintf(was, sizeof(was), " (was %u)", r->p.base->serial);
        log_info("xfr: zone %s: %s from %s%s%s, serial %u%s, %llu records, %zu KiB of messages, "
                 "~%zu MiB in memory while built",
                 r->key, r->kind, r->prims[r->used].text, r->p.tls_desc[0] ? " over " : "",
                 r->p.tls_desc, r->nz->serial, was, (unsigned long long)r->records, r->p.wire >> 10,
                 r->p.mem >> 20);
        if (r->file) {
            char werr[512];
            if (xfr_zone_write_file(r->nz, r->file, werr, sizeof(werr)) < 0)
                log_err("xfr: zone %s: cannot write its copy: %s", r->key, werr);
        }
    } else if (r->rc == 1) {
        log_debug("xfr: zone %s: up to date (serial %u)", r->key, r->p.base->serial);
    } else {
        log_warn("xfr: zone %s: refresh failed: %s", r->key, r->errs);
    }
}

/* Under mu: the zone's state after r succeeded (a new version or up to date): base, timers from
 * now (monotonic ms), the last transfer in. Returns a reference to the version to serve again when
 * the zone had expired and its primary answers with the version held, else NULL. */
static zone_t *refresh_succeeded(struct zst *z, const refresh_t *r, int64_t now, int64_t refresh,
                                 int64_t expire)
{
    zone_t *revive = NULL;
    /* an expired zone whose primary answers again with the version we hold: it is current once
     * more, serve it again (a new version is handed over anyway) */
    if (r->rc == 1 && z->expired && z->base)
        revive = zone_retain(z->base);
    if (r->rc == 0) {
        zone_free(z->base);
        z->base = zone_retain(r->nz);
        z->in_when = (int64_t)now_s();
        snprintf(z->in_primary, sizeof(z->in_primary), "%s", r->prims[r->used].text);
        snprintf(z->in_kind, sizeof(z->in_kind), "%s", r->kind);
        z->in_records = r->records;
        z->in_count++;
    } else if (!z->base && r->p.base) {
        z->base = zone_retain(r->p.base);
    }
    z->in_error[0] = '\0';
    z->next_ms = now + refresh;
    z->expire_ms = now + expire;
    z->refresh_wall = (int64_t)now_s() + refresh / 1000;
    z->expire_wall = (int64_t)now_s() + expire / 1000;
    z->expired = false;
    z->cur_prim = (z->cur_prim + r->used) % z->nprim;
    return revive;
}

/* Under mu: the zone's state after r failed: retry timer, and expiry. true: it expired now. */
static bool refresh_failed(struct zst *z, const refresh_t *r, int64_t now, int64_t retry,
                           int64_t expire)
{
    snprintf(z->in_error, sizeof(z->in_error), "%.255s", r->errs);
    z->next_ms = now + retry;
    z->refresh_wall = (int64_t)now_s() + retry / 1000;
    if (!z->expire_ms && r->p.base) {
        /* the startup copy: expire counts from now */
        z->expire_ms = now + expire;
        z->expire_wall = (int64_t)now_s() + expire / 1000;
        if (!z->base)
            z->base = zone_retain(r->p.base);
    }
    if (z->expire_ms && now >= z->expire_ms && !z->expired) {
        z->expired = true;
        return true;
    }
    return false;
}

/* The outcome of r for the loader (hooks.zone_in, or member_in for a catalog's member): the new
 * version (our reference handed over), the held version served again (revive), or the zone
 * expired (NULL). */
static void refresh_hand_over(xfr_t *x, refresh_t *r, zone_t *revive, bool expired_now)
{
    void (*in)(void *, const char *, zone_t *) = r->member ? x->hooks.member_in : x->hooks.zone_in;
    void *ctx = r->member ? x->hooks.member_ctx : x->hooks.ctx;
    if (r->rc >= 0)
        __atomic_add_fetch(r->rc == 0 ? &x->stats.in_ok : &x->stats.in_up_to_date, 1,
                           __ATOMIC_RELAXED);
    else
        __atomic_add_fetch(&x->stats.in_failed, 1, __ATOMIC_RELAXED);
    if (r->rc == 0 && in)
        in(ctx, r->key, r->nz); /* the loader owns our reference now */
    else
        zone_free(r->nz);
    r->nz = NULL;
    if (revive) {
        log_info("xfr: zone %s: the primary answers again with serial %u; serving it again", r->key,
                 revive->serial);
        if (in)
            in(ctx, r->key, revive);
        else
            zone_free(revive);
    }
    if (expired_now) {
        log_err("xfr: zone %s expired: no successful refresh within the SOA expire; answering "
                "SERVFAIL until a primary answers",
                r->key);
        if (in)
            in(ctx, r->key, NULL);
    }
}

/* A puller: one refresh attempt of secondary zone key, which it marked busy. */
static void refresh_zone(xfr_t *x, const char *key)
{
    refresh_t r = {0};
    if (!refresh_take(x, key, &r))
        return;
    refresh_try(x, &r);
    int64_t now = tern_monotonic_ms(), refresh = RETRY_FIRST_MS, retry = RETRY_FIRST_MS, expire = 0;
    const zone_t *timer_zone = r.nz ? r.nz : r.p.base;
    if (timer_zone)
        soa_timers(timer_zone, &refresh, &retry, &expire);
    refresh_log(&r);
    bool expired_now = false, current;
    zone_t *revive = NULL;
    pthread_mutex_lock(&x->mu);
    struct zst *z = xfr_zone_find(x, key); /* a reload may have replaced it meanwhile */
    /* a member reset or retired meanwhile (a new unique id, or gone): what came is not its */
    current = z && z->secondary && (!r.member || (z->member_of && z->member_gen == r.member_gen));
    if (current) {
        if (r.rc >= 0)
            revive = refresh_succeeded(z, &r, now, refresh, expire);
        else
            expired_now = refresh_failed(z, &r, now, retry, expire);
    }
    /* a member's versions are handed over under mu, in order with its retirement or reset
     * (xfr_catalog.c) */
    if (r.member && current)
        refresh_hand_over(x, &r, revive, expired_now);
    pthread_mutex_unlock(&x->mu);
    if (r.member && !current) {
        log_info("xfr: zone %s: reset or retired from its catalog during the transfer; the result "
                 "is dropped",
                 key);
        zone_free(r.nz);
        r.nz = NULL;
        if (r.rc == 0 && r.file) /* the copy refresh_log() wrote is not the zone's either */
            (void)unlink(r.file);
    }
    /* a catalog's members follow its new version (or, first, the version held) */
    if (r.catalog && current && r.rc >= 0 && (r.rc == 0 || !r.cat_parsed) && (r.nz || r.p.base))
        xfr_catalog_refreshed(x, key, r.nz ? r.nz : r.p.base);
    if (!r.member)
        refresh_hand_over(x, &r, revive, expired_now);
    zone_free(r.p.base);
    free(r.file);
    for (size_t i = 0; i < r.nprim; i++)
        xfr_tls_release(r.tls[i]);
    explicit_bzero(&r, sizeof(r)); /* the keys */
}

/* A puller thread: takes the first due secondary zone no other puller has, refreshes it, and
 * again; sleeps on pull_cv until the next zone is due, a NOTIFY or a new config. */
static void *pull_main(void *arg)
{
    struct puller *me = arg;
    xfr_t *x = me->x;
    char name[16];
    snprintf(name, sizeof(name), "tern-xfr-in%u", me->idx);
    (void)pthread_setname_np(pthread_self(), name);
    tern_rcu_register(); /* xfr_pin_zone() reads the published view */
    tern_rcu_offline();
    pthread_mutex_lock(&x->mu);
    while (!x->stop) {
        int64_t now = tern_monotonic_ms(), next = now + 1000;
        struct zst *due = NULL;
        for (size_t i = 0; i < x->nzones && !due && me->idx < x->in_max; i++) {
            struct zst *z = x->zones[i];
            if (!z->secondary || z->busy)
                continue;
            if (z->notified || z->next_ms <= now)
                due = z;
            else if (z->next_ms < next)
                next = z->next_ms;
        }
        if (!due) {
            struct timespec ts = {.tv_sec = (time_t)(next / 1000),
                                  .tv_nsec = (long)(next % 1000) * 1000000L};
            pthread_cond_timedwait(&x->pull_cv, &x->mu, &ts);
            continue;
        }
        char key[DNAME_KEY_MAX];
        snprintf(key, sizeof(key), "%s", due->key);
        due->busy = true;
        pthread_mutex_unlock(&x->mu);
        refresh_zone(x, key);
        pthread_mutex_lock(&x->mu);
        struct zst *z = xfr_zone_find(x, key); /* a reload may have replaced it meanwhile */
        if (z)
            z->busy = false;
    }
    pthread_mutex_unlock(&x->mu);
    tern_rcu_unregister();
    return NULL;
}

/* As many pullers as there are secondary zones, up to in_max; never fewer than before (a
 * puller past a lowered in_max idles). Wakes them all: a zone may be due. */
void xfr_secondary_grow(xfr_t *x)
{
    pthread_mutex_lock(&x->mu);
    size_t nsec = 0;
    for (size_t i = 0; i < x->nzones; i++)
        nsec += x->zones[i]->secondary;
    size_t want = nsec < x->in_max ? nsec : x->in_max;
    while (x->npullers < want && !x->stop) {
        struct puller *pl = &x->pullers[x->npullers];
        pl->x = x;
        pl->idx = x->npullers;
        if (pthread_create(&pl->t, NULL, pull_main, pl) != 0) {
            log_err("xfr: cannot start a transfer-in thread (%u running)", x->npullers);
            break;
        }
        x->npullers++;
    }
    pthread_cond_broadcast(&x->pull_cv);
    pthread_mutex_unlock(&x->mu);
}
