/*
 * xfr_out.c — the out thread ("tern-xfr-out", xfr.h): takes what workers hand over, answers
 * NOTIFY (xfr_notify_in()) and signed queries, and streams AXFR/IXFR from pinned zone versions
 * over a pool of connections that make room for newcomers (oconn_victim()).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "tern/common/byteorder.h"
#include "tern/common/clock.h"
#include "tern/common/err.h"
#include "tern/common/log.h"
#include "tern/common/rcu.h"

#include "xfr_int.h"

/* What one client address may hold of the XFR_CONNS_MAX: a secondary asks one transfer per zone
 * and a primary sends one NOTIFY at a time, so 8 is room for a secondary refreshing several zones
 * in parallel, while filling the pool takes 8 addresses, not one. At the cap, a newcomer takes the
 * place of its own address's idle (or stalled) connection, else it is refused. */
#define XFR_CONNS_PER_ADDR 8

/* A busy connection (a transfer being sent, a message half-read, a reply queued) that has made
 * no progress for this long may be closed for a newcomer when no connection is idle: a peer
 * that sends one byte of a next message, or stops reading its transfer, must not hold a slot
 * for the whole XFR_IDLE_MS while others wait. A secondary reading its transfer takes a window
 * every few milliseconds; 2 s without one while the pool is full and someone waits is a stall.
 * (The workers' TCP_EVICT_QUIET_MS is 1 s; a transfer's client writes a zone to disk as it
 * reads, hence the margin.) */
#define XFR_EVICT_QUIET_MS 2000

/* A connection with no progress (the client reads nothing, sends no whole message) for this
 * long is closed, as the workers' idle timeout does for queries; before that, only a newcomer
 * to a full pool closes it. */
#define XFR_IDLE_MS 30000

/* ---- replies ------------------------------------------------------------------------------ */

/* The serial in the SOA of an IXFR request's authority section (RFC 1995 §3). */
static bool ixfr_client_serial(const uint8_t *m, size_t len, size_t qend, uint32_t *serial)
{
    size_t p = qend;
    if (tern_rd16(m + 8) != 1 || dname_unpack(m, len, len, &p, NULL, NULL) < 0 || len - p < 10 ||
        tern_rd16(m + p) != WIRE_T_SOA)
        return false;
    size_t rdlen = tern_rd16(m + p + 8);
    p += 10;
    if (len - p < rdlen)
        return false;
    size_t end = p + rdlen;
    if (dname_unpack(m, len, end, &p, NULL, NULL) < 0 ||
        dname_unpack(m, len, end, &p, NULL, NULL) < 0 || end - p != 20)
        return false;
    *serial = tern_rd32(m + p);
    return true;
}

/* Header + the question echoed; returns the length (12 + question). */
size_t xfr_out_reply_head(uint8_t *out, const uint8_t *req, size_t qlen, unsigned rcode, bool aa)
{
    memcpy(out, req, 12 + qlen);
    uint16_t f = tern_rd16(req + 2);
    f = (uint16_t)((f & (0xF << 11 | WIRE_FLAG_RD)) | WIRE_FLAG_QR | (aa ? WIRE_FLAG_AA : 0) |
                   (rcode & 0xF));
    tern_wr16(out + 2, f);
    tern_wr16(out + 4, 1);
    tern_wr16(out + 6, 0);
    tern_wr16(out + 8, 0);
    tern_wr16(out + 10, 0);
    return 12 + qlen;
}

/* ---- requests ----------------------------------------------------------------------------- */

/* Refusals are logged, but a flood of NOTIFYs or transfer requests from strangers must not
 * become a flood of log lines: at most REFUSAL_LOG_PER_S a second, then one line saying how many
 * were left out. The out thread's alone, so no lock. */
#define REFUSAL_LOG_PER_S 10

static struct {
    int64_t second;
    unsigned logged;
    uint64_t suppressed;
} refusals;

bool xfr_out_refusal_log_ok(void)
{
    int64_t now = tern_monotonic_ms() / 1000;
    if (now != refusals.second) {
        if (refusals.suppressed)
            log_info("xfr: %" PRIu64 " more refusals not logged", refusals.suppressed);
        refusals.second = now;
        refusals.logged = 0;
        refusals.suppressed = 0;
    }
    if (refusals.logged < REFUSAL_LOG_PER_S) {
        refusals.logged++;
        return true;
    }
    refusals.suppressed++;
    return false;
}

void xfr_out_udp_reply(const struct handoff *r, const uint8_t *buf, size_t len)
{
    struct iovec iov = {.iov_base = (void *)buf, .iov_len = len};
    union {
        char b[CMSG_SPACE(sizeof(struct in6_pktinfo))];
        struct cmsghdr align;
    } ctl;
    struct msghdr m = {.msg_name = (void *)&r->peer,
                       .msg_namelen = r->peer.ss_family == AF_INET ? sizeof(struct sockaddr_in)
                                                                   : sizeof(struct sockaddr_in6),
                       .msg_iov = &iov,
                       .msg_iovlen = 1};
    if (r->pktinfo) {
        memset(&ctl, 0, sizeof(ctl));
        m.msg_control = ctl.b;
        struct cmsghdr *c = (struct cmsghdr *)ctl.b;
        if (r->local.ss_family == AF_INET) {
            m.msg_controllen = CMSG_SPACE(sizeof(struct in_pktinfo));
            c->cmsg_level = IPPROTO_IP;
            c->cmsg_type = IP_PKTINFO;
            c->cmsg_len = CMSG_LEN(sizeof(struct in_pktinfo));
            struct in_pktinfo pi = {0};
            pi.ipi_spec_dst = ((const struct sockaddr_in *)&r->local)->sin_addr;
            memcpy(CMSG_DATA(c), &pi, sizeof(pi));
        } else {
            m.msg_controllen = CMSG_SPACE(sizeof(struct in6_pktinfo));
            c->cmsg_level = IPPROTO_IPV6;
            c->cmsg_type = IPV6_PKTINFO;
            c->cmsg_len = CMSG_LEN(sizeof(struct in6_pktinfo));
            struct in6_pktinfo pi = {0};
            pi.ipi6_addr = ((const struct sockaddr_in6 *)&r->local)->sin6_addr;
            memcpy(CMSG_DATA(c), &pi, sizeof(pi));
        }
    }
    (void)sendmsg(r->fd, &m, MSG_DONTWAIT | MSG_NOSIGNAL);
}

void xfr_out_check_msg(xfr_t *x, const uint8_t *m, size_t len, xfr_msg_t *im)
{
    im->ok = im->tsig = false;
    im->tsig_err = 0;
    if (wire_parse_query(&im->q, m, len) != WIRE_OK)
        return;
    if (im->q.has_tsig) {
        pthread_mutex_lock(&x->mu);
        int rc = tsig_verify_request(im->ctx, x->keys, x->nkeys, m, len, now_s());
        if (im->ctx->key) {
            /* our copy: the config's keys may be replaced by a reload meanwhile */
            *im->key = *im->ctx->key;
            im->ctx->key = im->key;
        }
        pthread_mutex_unlock(&x->mu);
        if (rc < 0 && rc != TERN_ENOENT)
            return; /* a malformed or misplaced TSIG: FORMERR */
        im->tsig = rc != TERN_ENOENT;
        if (rc > 0) {
            im->tsig_err = (unsigned)rc;
            __atomic_add_fetch(&x->stats.tsig_bad, 1, __ATOMIC_RELAXED);
        }
    }
    im->ok = true;
}

/* Finish a reply in out (len bytes, cap room): signed when the request was. */
size_t xfr_out_finish_reply(xfr_msg_t *im, uint8_t *out, size_t len, size_t cap)
{
    if (!im->tsig)
        return len;
    size_t nl = len;
    if (im->tsig_err) {
        if (tsig_append_error(im->ctx, out, len, cap, now_s(), &nl) < 0)
            return len;
        return nl;
    }
    if (tsig_sign_response(im->ctx, out, len, cap, now_s(), &nl) < 0)
        return len;
    return nl;
}

size_t xfr_out_error_reply(xfr_msg_t *im, const uint8_t *req, uint8_t *out, size_t cap,
                           unsigned rcode)
{
    size_t n = xfr_out_reply_head(out, req, im->q.question_len, rcode, false);
    return xfr_out_finish_reply(im, out, n, cap);
}

/* A signed query (not a transfer): the SOA of a zone apex, which is what secondaries ask
 * before IXFR; anything else is REFUSED (signed answers are for transfer peers). */
static size_t on_signed_query(xfr_t *x, xfr_msg_t *im, const uint8_t *req, uint8_t *out, size_t cap,
                              bool udp)
{
    if (im->q.qtype == WIRE_T_IXFR && udp) {
        size_t n = xfr_out_reply_head(out, req, im->q.question_len, WIRE_RC_NOERROR, true);
        tern_wr16(out + 2, (uint16_t)(tern_rd16(out + 2) | WIRE_FLAG_TC));
        return xfr_out_finish_reply(im, out, n, cap);
    }
    if (im->q.qtype != WIRE_T_SOA)
        return xfr_out_error_reply(im, req, out, cap, WIRE_RC_REFUSED);
    zone_t *z = xfr_pin_zone(x, im->q.qname);
    if (!z || z->unavailable) {
        size_t n = xfr_out_error_reply(im, req, out, cap, z ? WIRE_RC_SERVFAIL : WIRE_RC_REFUSED);
        zone_free(z);
        return n;
    }
    size_t n = xfr_out_reply_head(out, req, im->q.question_len, WIRE_RC_NOERROR, true);
    const zone_rrset_t *soa = z->soa;
    size_t rdlen = tern_rd16(soa->rdata);
    if (n + 12 + rdlen + 512 < cap) {
        n += xfr_msg_soa(out + n, soa->ttl, soa->rdata + 2, rdlen);
        tern_wr16(out + 6, 1);
    }
    zone_free(z);
    return xfr_out_finish_reply(im, out, n, cap);
}

static void oconn_close(xfr_t *x, struct oconn *c)
{
    (void)x;
    tls_conn_free(c->ssl);
    c->ssl = NULL;
    if (c->fd >= 0)
        close(c->fd);
    c->fd = -1;
    c->gen++;
    xfr_stream_free(c->st);
    c->st = NULL;
    zone_free(c->zone);
    c->zone = NULL;
    c->rlen = c->woff = c->wlen = 0;
    c->closing = c->eof = c->upd_wait = false;
    tsig_ctx_clear(&c->tsig);
    tsig_ctx_init(&c->tsig);
    explicit_bzero(&c->key, sizeof(c->key));
}

/* Queue one reply of n bytes at wbuf + 2 (length prefix written here). */
static void oconn_queue(struct oconn *c, size_t n)
{
    tern_wr16(c->wbuf, (uint16_t)n);
    c->woff = 0;
    c->wlen = 2 + n;
}

static void transfer_done(xfr_t *x, struct oconn *c, bool ok)
{
    char peer[64];
    limit_addr_text(&c->peer, peer, sizeof(peer));
    uint64_t recs = c->st ? xfr_stream_records(c->st) : 0;
    if (ok) {
        log_info("xfr: %s %s serial %u to %s: %llu records in %zu messages, %lld ms", c->kind,
                 c->zname, c->serial, peer, (unsigned long long)recs, c->msgs,
                 (long long)(tern_monotonic_ms() - c->start_ms));
        __atomic_add_fetch(strcmp(c->kind, "IXFR") == 0 ? &x->stats.out_ixfr : &x->stats.out_axfr,
                           1, __ATOMIC_RELAXED);
        pthread_mutex_lock(&x->mu);
        for (size_t i = 0; i < x->nzones; i++) {
            struct zst *z = x->zones[i];
            if (strcmp(z->key, c->zname) != 0)
                continue;
            z->out_when = (int64_t)now_s();
            snprintf(z->out_peer, sizeof(z->out_peer), "%s", peer);
            snprintf(z->out_kind, sizeof(z->out_kind), "%s", c->kind);
            z->out_serial = c->serial;
            z->out_records = recs;
            z->out_count++;
        }
        pthread_mutex_unlock(&x->mu);
    } else {
        log_warn("xfr: %s %s to %s failed after %llu records (the client went away or stalled)",
                 c->kind, c->zname, peer, (unsigned long long)recs);
        __atomic_add_fetch(&x->stats.out_failed, 1, __ATOMIC_RELAXED);
    }
    xfr_stream_free(c->st);
    c->st = NULL;
    zone_free(c->zone);
    c->zone = NULL;
}

/* The next message of c's stream into wbuf, signed when the request was. false: done or
 * failed (c->st freed). */
static bool next_message(xfr_t *x, struct oconn *c)
{
    size_t reserve = c->tsig_on ? tsig_rr_size(&c->key) : 0, len = 0;
    int rc = xfr_stream_next(c->st, c->wbuf + 2, XFR_OUT_MSG, reserve, &len);
    if (rc < 0) {
        log_err("xfr: %s %s: %s", c->kind, c->zname, tern_strerror(rc));
        transfer_done(x, c, false);
        c->closing = true;
        return false;
    }
    if (c->tsig_on) {
        size_t nl = len;
        if (tsig_sign_response(&c->tsig, c->wbuf + 2, len, XFR_OUT_MSG, now_s(), &nl) < 0) {
            log_err("xfr: %s %s: cannot sign a message", c->kind, c->zname);
            transfer_done(x, c, false);
            c->closing = true;
            return false;
        }
        len = nl;
    }
    c->msgs++;
    oconn_queue(c, len);
    if (rc == 0)
        transfer_done(x, c, true); /* the last one is queued */
    return true;
}

/* c->zname: the request's zone as its key (lowercased, no final dot) for logs and stats. */
static void transfer_name(struct oconn *c, const xfr_msg_t *im)
{
    if (dname_to_str(im->q.qname, c->zname, sizeof(c->zname)) < 0)
        snprintf(c->zname, sizeof(c->zname), "?");
    size_t zl = strlen(c->zname);
    if (zl > 1 && c->zname[zl - 1] == '.')
        c->zname[zl - 1] = '\0';
    for (char *p = c->zname; *p; p++)
        *p = (char)(*p >= 'A' && *p <= 'Z' ? *p + 32 : *p);
}

/* What an IXFR (or AXFR) request needs from the zone's state, taken under mu. */
typedef struct {
    uint32_t client;     /* IXFR: the client's serial */
    xfr_delta_t **chain; /* IXFR: the journal's deltas from client on (references), or NULL */
    size_t nchain;
    bool have_chain;
} transfer_plan_t;

static void plan_release(transfer_plan_t *t)
{
    for (size_t i = 0; i < t->nchain; i++)
        xfr_delta_release(t->chain[i]);
    free(t->chain);
}

/* RFC 9103: over TLS, a transfer needs ALPN "dot" (§7.1); the zone's transfer_tls may ask for
 * TLS, and for a client certificate verified against tls: client_ca (mutual TLS, §9.3.3). NULL
 * or why not. */
static const char *transfer_tls_check(const struct zst *z, const struct oconn *c)
{
    if (!c->ssl)
        return z->transfer_tls != CONFIG_TRANSFER_TLS_ANY
                   ? "transfer_tls: required, and the request came over plain TCP"
                   : NULL;
    if (!tls_conn_alpn_dot(c->ssl))
        return "XoT without ALPN \"dot\" (RFC 9103 section 7.1)";
    if (z->transfer_tls == CONFIG_TRANSFER_TLS_MUTUAL && !tls_conn_client_verified(c->ssl))
        return "transfer_tls: mutual, and no client certificate verified against client_ca";
    return NULL;
}

/* Who may: the zone's allow_transfer, and its key when one is set; for IXFR, the client's serial
 * and the journal's chain from it into t. NULL, or why the request is refused. */
static const char *transfer_check(xfr_t *x, const struct oconn *c, const xfr_msg_t *im,
                                  const uint8_t *req, size_t len, transfer_plan_t *t)
{
    pthread_mutex_lock(&x->mu);
    struct zst *z = xfr_zone_find_apex(x, im->q.qname);
    const char *why = NULL;
    if (!z || !z->allow_transfer.n)
        why = "no allow_transfer for the zone";
    else if (!limit_prefix_match(&z->allow_transfer, &c->peer))
        why = "address not in allow_transfer";
    else if (z->transfer_key >= 0 &&
             (!im->tsig || strcasecmp(im->key->name, x->keys[z->transfer_key].name) != 0))
        why = "not signed with transfer_key";
    else
        why = transfer_tls_check(z, c);
    if (!why && im->q.qtype == WIRE_T_IXFR) {
        if (!ixfr_client_serial(req, len, 12 + im->q.question_len, &t->client))
            why = "IXFR without the client's SOA";
        else if (z->journal && xfr_journal_chain(z->journal, t->client, &t->chain, &t->nchain) == 0)
            t->have_chain = true;
    }
    pthread_mutex_unlock(&x->mu);
    return why;
}

/* The stream answering req from zone: AXFR; IXFR from the journal's chain; the SOA alone when
 * the client is up to date; else the whole zone in IXFR's form (c->kind then says AXFR). */
static xfr_stream_t *transfer_stream(struct oconn *c, const xfr_msg_t *im, zone_t *zone,
                                     const transfer_plan_t *t, const uint8_t *req, size_t len)
{
    if (im->q.qtype != WIRE_T_IXFR)
        return xfr_stream_axfr(zone, req, len);
    static xfr_delta_t *const none[1] = {NULL};
    if (!xfr_serial_lt(t->client, zone->serial))
        return xfr_stream_ixfr(zone, none, 0, req, len); /* up to date: the SOA alone */
    if (t->have_chain && t->nchain > 0 && xfr_delta_to(t->chain[t->nchain - 1]) == zone->serial)
        return xfr_stream_ixfr(zone, t->chain, t->nchain, req, len);
    /* not in the journal: the whole zone, in IXFR's AXFR-style form (RFC 1995 §4) */
    snprintf(c->kind, sizeof(c->kind), "AXFR");
    return xfr_stream_ixfr(zone, NULL, 0, req, len);
}

/* A transfer request on c: check, pin, start the stream (its first message queued). */
static void start_transfer(xfr_t *x, struct oconn *c, xfr_msg_t *im, const uint8_t *req, size_t len)
{
    uint8_t *out = c->wbuf + 2;
    char peer[64];
    limit_addr_text(&c->peer, peer, sizeof(peer));
    transfer_name(c, im);
    snprintf(c->kind, sizeof(c->kind), "%s", im->q.qtype == WIRE_T_IXFR ? "IXFR" : "AXFR");
    transfer_plan_t t = {0};
    const char *why = transfer_check(x, c, im, req, len, &t);
    if (why) {
        if (xfr_out_refusal_log_ok())
            log_info("xfr: %s %s from %s refused: %s", c->kind, c->zname, peer, why);
        __atomic_add_fetch(&x->stats.out_refused, 1, __ATOMIC_RELAXED);
        oconn_queue(c, xfr_out_error_reply(im, req, out, XFR_OUT_MSG,
                                           im->tsig_err ? WIRE_RC_NOTAUTH : WIRE_RC_REFUSED));
        c->closing = true;
        return;
    }
    zone_t *zone = xfr_pin_zone(x, im->q.qname);
    if (!zone || zone->unavailable) {
        log_info("xfr: %s %s from %s: the zone has no data (SERVFAIL)", c->kind, c->zname, peer);
        oconn_queue(c, xfr_out_error_reply(im, req, out, XFR_OUT_MSG, WIRE_RC_SERVFAIL));
        zone_free(zone);
        plan_release(&t);
        c->closing = true;
        return;
    }
    c->serial = zone->serial;
    c->st = transfer_stream(c, im, zone, &t, req, len);
    plan_release(&t);
    if (!c->st) {
        zone_free(zone);
        oconn_queue(c, xfr_out_error_reply(im, req, out, XFR_OUT_MSG, WIRE_RC_SERVFAIL));
        c->closing = true;
        return;
    }
    c->zone = zone;
    c->tsig_on = im->tsig; /* c->tsig and c->key hold the request's transaction already */
    c->start_ms = tern_monotonic_ms();
    c->msgs = 0;
    (void)next_message(x, c);
}

/* Handle the complete messages in c's read buffer while nothing is being written. */
static void oconn_process(xfr_t *x, struct oconn *c)
{
    while (!c->st && !c->closing && !c->upd_wait && c->woff == c->wlen && c->rlen >= 2) {
        size_t mlen = tern_rd16(c->rbuf);
        if (mlen == 0) {
            c->closing = true;
            return;
        }
        if (c->rlen < 2 + mlen)
            return;
        uint8_t *m = c->rbuf + 2;
        xfr_msg_t *im = malloc(sizeof(*im));
        if (!im) {
            c->closing = true;
            return;
        }
        im->ctx = &c->tsig;
        im->key = &c->key;
        xfr_out_check_msg(x, m, mlen, im);
        size_t n = 0;
        uint8_t *out = c->wbuf + 2;
        unsigned op = mlen >= 12 ? WIRE_OPCODE(tern_rd16(m + 2)) : 0;
        if (!im->ok) {
            if (im->q.has_question) {
                n = xfr_out_reply_head(out, m, im->q.question_len, WIRE_RC_FORMERR, false);
                oconn_queue(c, n);
            }
            c->closing = true;
        } else if (im->tsig_err) {
            oconn_queue(c, xfr_out_error_reply(im, m, out, XFR_OUT_MSG, WIRE_RC_NOTAUTH));
            c->closing = true;
        } else if (op == WIRE_OP_NOTIFY) {
            oconn_queue(c, xfr_notify_in(x, im, m, &c->peer, out, XFR_OUT_MSG));
        } else if (op == WIRE_OP_UPDATE) {
            n = xfr_update_tcp(x, c, im, m, mlen, out, XFR_OUT_MSG);
            if (n)
                oconn_queue(c, n);
        } else if (op == WIRE_OP_QUERY &&
                   (im->q.qtype == WIRE_T_AXFR || im->q.qtype == WIRE_T_IXFR)) {
            start_transfer(x, c, im, m, mlen);
        } else if (im->tsig) {
            oconn_queue(c, on_signed_query(x, im, m, out, XFR_OUT_MSG, false));
        } else {
            c->closing = true; /* a plain query: a worker's job; the client reconnects */
        }
        free(im);
        memmove(c->rbuf, c->rbuf + 2 + mlen, c->rlen - 2 - mlen);
        c->rlen -= 2 + mlen;
    }
}

/* XoT: the connection's bytes go through its TLS state. OpenSSL's outcomes as send()'s and
 * recv()'s (EAGAIN for "wait for the socket", 0 for the peer's close), so one loop serves both;
 * a write wanting a read (a key update) waits on EPOLLIN, which stays armed. */
static ssize_t tls_errno(ssize_t k)
{
    if (k >= 0)
        return k;
    if (k == TLS_IO_EOF)
        return 0;
    errno = k == TLS_IO_ERROR ? EPIPE : EAGAIN;
    return -1;
}

static ssize_t oconn_send(struct oconn *c)
{
    if (c->ssl)
        return tls_errno(
            c->woff < c->wlen ? tls_conn_write(c->ssl, c->wbuf + c->woff, c->wlen - c->woff) : 0);
    return send(c->fd, c->wbuf + c->woff, c->wlen - c->woff, MSG_NOSIGNAL);
}

static ssize_t oconn_recv(struct oconn *c)
{
    if (c->ssl)
        return tls_errno(tls_conn_read(c->ssl, c->rbuf + c->rlen, RBUF_CAP - c->rlen));
    return recv(c->fd, c->rbuf + c->rlen, RBUF_CAP - c->rlen, MSG_DONTWAIT);
}

/* Write what is queued; refill from the stream. Returns false when c is to be closed. */
static bool oconn_write(xfr_t *x, struct oconn *c)
{
    for (;;) {
        while (c->woff < c->wlen) {
            ssize_t k = oconn_send(c);
            if (k < 0) {
                if (errno == EAGAIN || errno == EWOULDBLOCK)
                    return true;
                if (errno == EINTR)
                    continue;
                if (c->st)
                    transfer_done(x, c, false);
                return false;
            }
            c->woff += (size_t)k;
            c->deadline = tern_monotonic_ms() + XFR_IDLE_MS;
        }
        c->woff = c->wlen = 0;
        if (c->st) {
            if (!next_message(x, c))
                return !c->closing;
            continue;
        }
        if (c->closing)
            return false;
        oconn_process(x, c);
        if (c->woff == c->wlen)
            return !c->closing;
    }
}

static void oconn_arm(xfr_t *x, struct oconn *c, size_t idx)
{
    struct epoll_event ev = {.events = (c->eof ? 0 : EPOLLIN) | (c->woff < c->wlen ? EPOLLOUT : 0),
                             .data.u64 = (uint64_t)c->gen << 32 | (idx + 1)};
    if (epoll_ctl(x->out_ep, EPOLL_CTL_MOD, c->fd, &ev) < 0)
        (void)epoll_ctl(x->out_ep, EPOLL_CTL_ADD, c->fd, &ev);
}

static void oconn_event(xfr_t *x, uint64_t tag, uint32_t events)
{
    size_t idx = (size_t)(tag & 0xFFFFFFFFu) - 1;
    struct oconn *c = &x->conns[idx];
    if (c->fd < 0 || c->gen != (uint32_t)(tag >> 32))
        return;
    if (events & EPOLLERR) {
        if (c->st)
            transfer_done(x, c, false);
        oconn_close(x, c);
        return;
    }
    /* XoT: what OpenSSL holds decrypted is no readiness event of the socket */
    bool more = c->ssl && tls_conn_pending(c->ssl) > 0;
    if (((events & (EPOLLIN | EPOLLHUP)) || more) && !c->eof && c->rlen < RBUF_CAP) {
        ssize_t k = oconn_recv(c);
        if (k == 0) {
            /* the client has sent all it will (a half-close is legitimate): finish what it
             * asked for, then close */
            c->eof = true;
        } else if (k < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
            if (c->st)
                transfer_done(x, c, false);
            oconn_close(x, c);
            return;
        } else if (k > 0) {
            c->rlen += (size_t)k;
            /* progress is a whole message: a peer trickling one byte at a time, or sending a
             * length and stalling, neither refreshes its deadline nor counts as busy for
             * oconn_victim() */
            if (c->rlen >= 2 && c->rlen >= 2u + tern_rd16(c->rbuf))
                c->deadline = tern_monotonic_ms() + XFR_IDLE_MS;
        }
    }
    oconn_process(x, c);
    if (!oconn_write(x, c) || (c->eof && !c->st && !c->upd_wait && c->woff == c->wlen)) {
        oconn_close(x, c);
        return;
    }
    oconn_arm(x, c, idx);
}

void xfr_out_resume(xfr_t *x, struct oconn *c, size_t n)
{
    size_t idx = (size_t)(c - x->conns);
    c->upd_wait = false;
    c->deadline = tern_monotonic_ms() + XFR_IDLE_MS;
    oconn_queue(c, n);
    if (!oconn_write(x, c) || (c->eof && !c->st && !c->upd_wait && c->woff == c->wlen)) {
        oconn_close(x, c);
        return;
    }
    oconn_arm(x, c, idx);
}

/* Nothing in progress on c: no transfer being sent, nothing half-read, nothing queued to write.
 * Such a connection only waits for its client's next request. */
static bool oconn_idle(const struct oconn *c)
{
    return c->fd >= 0 && !c->st && !c->closing && !c->upd_wait && c->rlen == 0 &&
           c->woff == c->wlen;
}

/* The last progress on c: a whole message read, or bytes written (the idle deadline's start). */
static int64_t oconn_active(const struct oconn *c)
{
    return c->deadline - XFR_IDLE_MS;
}

/* How many connections the address of c holds, and how many of them are idle. */
static void oconn_count(const xfr_t *x, const struct sockaddr_storage *peer, size_t *all,
                        size_t *idle)
{
    *all = *idle = 0;
    for (size_t i = 0; i < XFR_CONNS_MAX; i++) {
        const struct oconn *c = &x->conns[i];
        if (c->fd < 0 || !xfr_same_host(&c->peer, peer))
            continue;
        (*all)++;
        *idle += oconn_idle(c);
    }
}

/*
 * The connection a newcomer closes, or NULL (the newcomer is refused). Only connections of
 * peer's address when own (the newcomer's address is at XFR_CONNS_PER_ADDR), else any:
 *   1. an idle one of the address holding the most idle connections, the one idle longest:
 *      whoever hoards slots pays first, so many addresses each holding one connection open after
 *      a NOTIFY or a finished transfer cannot lock a secondary out;
 *   2. with none idle, the busy one quiet longest if it has made no progress for
 *      XFR_EVICT_QUIET_MS (stalled mid-message, or not reading its transfer).
 * A transfer that made progress within XFR_EVICT_QUIET_MS is never chosen. 64 slots: counting
 * by scanning (64 x 64 address compares) costs less than keeping counts in step.
 */
static struct oconn *oconn_victim(xfr_t *x, const struct sockaddr_storage *peer, bool own,
                                  int64_t now)
{
    struct oconn *best = NULL, *stalled = NULL;
    size_t best_n = 0;
    for (size_t i = 0; i < XFR_CONNS_MAX; i++) {
        struct oconn *c = &x->conns[i];
        if (c->fd < 0 || (own && !xfr_same_host(&c->peer, peer)))
            continue;
        if (!oconn_idle(c)) {
            if (now - oconn_active(c) >= XFR_EVICT_QUIET_MS &&
                (!stalled || oconn_active(c) < oconn_active(stalled)))
                stalled = c;
            continue;
        }
        size_t all, n;
        oconn_count(x, &c->peer, &all, &n);
        if (!best || n > best_n || (n == best_n && oconn_active(c) < oconn_active(best))) {
            best = c;
            best_n = n;
        }
    }
    return best ? best : stalled;
}

/* A newcomer is turned away: every slot it could take (its address's own when own) is busy.
 * Counted, logged at most REFUSAL_LOG_PER_S a second. */
static void oconn_refuse(xfr_t *x, struct handoff *r, bool own)
{
    __atomic_add_fetch(&x->stats.out_conn_refused, 1, __ATOMIC_RELAXED);
    if (xfr_out_refusal_log_ok()) {
        char peer[64];
        limit_addr_text(&r->peer, peer, sizeof(peer));
        log_warn("xfr: connection from %s closed: %s %d transfer connections, all busy", peer,
                 own ? "its address holds" : "the thread holds",
                 own ? XFR_CONNS_PER_ADDR : XFR_CONNS_MAX);
    }
    tls_conn_free(r->ssl);
    close(r->fd);
}

static void take_tcp(xfr_t *x, struct handoff *r)
{
    int64_t now = tern_monotonic_ms();
    size_t mine, mine_idle, i = 0;
    oconn_count(x, &r->peer, &mine, &mine_idle);
    struct oconn *c = NULL;
    if (mine >= XFR_CONNS_PER_ADDR) {
        c = oconn_victim(x, &r->peer, true, now);
        if (!c) {
            oconn_refuse(x, r, true);
            return;
        }
    } else {
        while (i < XFR_CONNS_MAX && x->conns[i].fd >= 0)
            i++;
        if (i == XFR_CONNS_MAX && !(c = oconn_victim(x, &r->peer, false, now))) {
            oconn_refuse(x, r, false);
            return;
        }
    }
    if (c) {
        if (c->st)
            transfer_done(x, c, false);
        oconn_close(x, c);
        __atomic_add_fetch(&x->stats.out_conn_evicted, 1, __ATOMIC_RELAXED);
        i = (size_t)(c - x->conns);
    }
    c = &x->conns[i];
    c->fd = r->fd;
    c->ssl = r->ssl;
    c->peer = r->peer;
    c->local = r->local;
    memcpy(c->rbuf, r->buf, r->len);
    c->rlen = r->len;
    c->woff = c->wlen = 0;
    c->closing = c->eof = false;
    c->deadline = now + XFR_IDLE_MS;
    oconn_process(x, c);
    if (!oconn_write(x, c)) {
        oconn_close(x, c);
        return;
    }
    oconn_arm(x, c, i);
}

static void take_udp(xfr_t *x, struct handoff *r)
{
    if (r->len >= 12 && WIRE_OPCODE(tern_rd16(r->buf + 2)) == WIRE_OP_UPDATE) {
        xfr_update_udp(x, r); /* verified into the state it keeps until the answer */
        return;
    }
    uint8_t out[4096];
    xfr_msg_t *im = malloc(sizeof(*im));
    tsig_key_t *key = malloc(sizeof(*key));
    tsig_ctx_t ctx;
    tsig_ctx_init(&ctx);
    if (!im || !key) {
        free(im);
        free(key);
        return;
    }
    im->ctx = &ctx;
    im->key = key;
    xfr_out_check_msg(x, r->buf, r->len, im);
    size_t n = 0;
    unsigned op = r->len >= 12 ? WIRE_OPCODE(tern_rd16(r->buf + 2)) : 0;
    if (!im->ok) {
        if (im->q.has_question)
            n = xfr_out_reply_head(out, r->buf, im->q.question_len, WIRE_RC_FORMERR, false);
    } else if (im->tsig_err) {
        n = xfr_out_error_reply(im, r->buf, out, sizeof(out), WIRE_RC_NOTAUTH);
    } else if (op == WIRE_OP_NOTIFY) {
        n = xfr_notify_in(x, im, r->buf, &r->peer, out, sizeof(out));
    } else if (op == WIRE_OP_QUERY && im->tsig) {
        n = on_signed_query(x, im, r->buf, out, sizeof(out), true);
    } else {
        n = xfr_out_error_reply(im, r->buf, out, sizeof(out), WIRE_RC_REFUSED);
    }
    tsig_ctx_clear(&ctx);
    explicit_bzero(key, sizeof(*key));
    free(key);
    free(im);
    if (n)
        xfr_out_udp_reply(r, out, n);
}

void *xfr_out_main(void *arg)
{
    xfr_t *x = arg;
    (void)pthread_setname_np(pthread_self(), "tern-xfr-out");
    tls_thread_init(); /* XoT: a reset secondary gives EPIPE, not SIGPIPE */
    tern_rcu_register();
    tern_rcu_offline();
    struct epoll_event evs[32];
    for (;;) {
        int n = epoll_wait(x->out_ep, evs, 32, 1000);
        pthread_mutex_lock(&x->mu);
        bool stop = x->stop;
        pthread_mutex_unlock(&x->mu);
        if (stop)
            break;
        for (int i = 0; i < n; i++) {
            if (evs[i].data.u64 == 0) {
                ev_drain(x->out_ev);
                struct handoff r;
                while (xfr_handoff_take(x, &r)) {
                    if (r.tcp)
                        take_tcp(x, &r);
                    else
                        take_udp(x, &r);
                    free(r.buf);
                }
                xfr_update_finish(x);
            } else {
                oconn_event(x, evs[i].data.u64, evs[i].events);
            }
        }
        int64_t now = tern_monotonic_ms();
        for (size_t i = 0; i < XFR_CONNS_MAX; i++) {
            struct oconn *c = &x->conns[i];
            if (c->fd >= 0 && now > c->deadline) {
                if (c->st)
                    transfer_done(x, c, false);
                oconn_close(x, c);
            }
        }
    }
    for (size_t i = 0; i < XFR_CONNS_MAX; i++)
        if (x->conns[i].fd >= 0)
            oconn_close(x, &x->conns[i]);
    tern_rcu_unregister();
    return NULL;
}
