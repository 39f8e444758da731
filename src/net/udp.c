/*
 * udp.c — datagram batches: recvmmsg → answer_query() each → sendmmsg, behind a small ops table.
 *
 * All buffers are allocated once per worker (udp_state_new); the loop itself performs no
 * allocation and no syscall but the receive and send calls. Sockets bound to a wildcard address
 * receive the query's destination address (IP_PKTINFO / IPV6_PKTINFO) and hand it back on the
 * reply, so a multi-homed host answers from the address the client asked.
 */
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "tern/common/rcu.h"
#include "worker.h"

/* Room for the larger of the two pktinfos. Aligned as a cmsghdr without containing one: its
 * flexible array member would make a union of it variable-sized (a GNU extension). */
typedef struct {
    _Alignas(struct cmsghdr) uint8_t buf[CMSG_SPACE(sizeof(struct in6_pktinfo))];
} udp_cmsg_t;

typedef struct udp_slot {
    struct sockaddr_storage peer;
    udp_cmsg_t rctl, sctl;
    struct iovec riov, siov;
    uint8_t rx[UDP_RX_SIZE];
    uint8_t tx[UDP_TX_SIZE];
} udp_slot_t;

struct udp_state {
    struct mmsghdr rmsg[UDP_BATCH];
    struct mmsghdr smsg[UDP_BATCH];
    unsigned used; /* receive headers the kernel wrote since they were last reset */
    int pktinfo;   /* what their control buffers are set for: 0, 1, or -1 (not yet) */
    udp_slot_t slot[UDP_BATCH];
    /* the batch parsed before any of it is answered (answer_prefetch() reads the names) */
    wire_query_t q[UDP_BATCH];
    wire_parse_result_t pr[UDP_BATCH];
};

static int mmsg_recv(int fd, struct mmsghdr *msgs, unsigned n)
{
    return recvmmsg(fd, msgs, n, MSG_DONTWAIT, NULL);
}

static int mmsg_wait(int fd, struct mmsghdr *msgs, unsigned n)
{
    return recvmmsg(fd, msgs, n, MSG_WAITFORONE, NULL);
}

static int mmsg_send(int fd, struct mmsghdr *msgs, unsigned n)
{
    return sendmmsg(fd, msgs, n, MSG_DONTWAIT);
}

/* The fallback: same contract, one datagram per syscall. */
static int msg_recv(int fd, struct mmsghdr *msgs, unsigned n)
{
    unsigned i = 0;
    for (; i < n; i++) {
        ssize_t r = recvmsg(fd, &msgs[i].msg_hdr, MSG_DONTWAIT);
        if (r < 0)
            break;
        msgs[i].msg_len = (unsigned)r;
    }
    return i ? (int)i : -1;
}

static int msg_send(int fd, struct mmsghdr *msgs, unsigned n)
{
    unsigned i = 0;
    for (; i < n; i++) {
        ssize_t r = sendmsg(fd, &msgs[i].msg_hdr, MSG_DONTWAIT);
        if (r < 0)
            break;
        msgs[i].msg_len = (unsigned)r;
    }
    return i ? (int)i : -1;
}

static int msg_wait(int fd, struct mmsghdr *msgs, unsigned n)
{
    ssize_t r = recvmsg(fd, &msgs[0].msg_hdr, 0);
    if (r < 0)
        return -1;
    msgs[0].msg_len = (unsigned)r;
    int more = n > 1 ? msg_recv(fd, msgs + 1, n - 1) : 0;
    return 1 + (more > 0 ? more : 0);
}

const udp_ops_t udp_ops_mmsg = {"recvmmsg/sendmmsg", mmsg_recv, mmsg_wait, mmsg_send};
const udp_ops_t udp_ops_msg = {"recvmsg/sendmsg", msg_recv, msg_wait, msg_send};

udp_state_t *udp_state_new(void)
{
    /* cache-line aligned so no line is shared with another worker's state */
    size_t size = (sizeof(udp_state_t) + TERN_CACHELINE - 1) & ~(size_t)(TERN_CACHELINE - 1);
    udp_state_t *u = aligned_alloc(TERN_CACHELINE, size);
    if (!u)
        return NULL;
    memset(u, 0, size);
    for (unsigned i = 0; i < UDP_BATCH; i++) {
        udp_slot_t *s = &u->slot[i];
        s->riov.iov_base = s->rx;
        s->riov.iov_len = sizeof(s->rx);
        s->siov.iov_base = s->tx;
        struct msghdr *h = &u->rmsg[i].msg_hdr;
        h->msg_name = &s->peer;
        h->msg_iov = &s->riov;
        h->msg_iovlen = 1;
    }
    u->used = UDP_BATCH;
    u->pktinfo = -1;
    return u;
}

void udp_state_free(udp_state_t *u)
{
    free(u);
}

/* The destination a datagram arrived at, from its PKTINFO: 4 (in4 set), 6 (in6 set) or 0. */
static int arrived_at(const struct msghdr *rh, struct in_pktinfo *in4, struct in6_pktinfo *in6)
{
    for (struct cmsghdr *c = CMSG_FIRSTHDR(rh); c; c = CMSG_NXTHDR((struct msghdr *)rh, c)) {
        if (c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_PKTINFO) {
            memcpy(in4, CMSG_DATA(c), sizeof(*in4));
            return 4;
        }
        if (c->cmsg_level == IPPROTO_IPV6 && c->cmsg_type == IPV6_PKTINFO) {
            memcpy(in6, CMSG_DATA(c), sizeof(*in6));
            return 6;
        }
    }
    return 0;
}

/* Turn the destination the query arrived at into the source of the reply. Returns the control
 * length to send (0: none found, let the kernel choose). */
static size_t reply_pktinfo(const struct msghdr *rh, udp_cmsg_t *out)
{
    struct in_pktinfo in;
    struct in6_pktinfo in6;
    struct cmsghdr *o = (struct cmsghdr *)(void *)out->buf;
    switch (arrived_at(rh, &in, &in6)) {
    case 4: {
        /* ifindex 0: let routing pick the interface, only the source address is forced */
        struct in_pktinfo reply = {.ipi_spec_dst = in.ipi_addr};
        o->cmsg_level = IPPROTO_IP;
        o->cmsg_type = IP_PKTINFO;
        o->cmsg_len = CMSG_LEN(sizeof(reply));
        memcpy(CMSG_DATA(o), &reply, sizeof(reply));
        return CMSG_SPACE(sizeof(reply));
    }
    case 6: {
        struct in6_pktinfo reply = {.ipi6_addr = in6.ipi6_addr};
        /* a link-local source is only meaningful with its interface */
        if (IN6_IS_ADDR_LINKLOCAL(&in6.ipi6_addr))
            reply.ipi6_ifindex = in6.ipi6_ifindex;
        o->cmsg_level = IPPROTO_IPV6;
        o->cmsg_type = IPV6_PKTINFO;
        o->cmsg_len = CMSG_LEN(sizeof(reply));
        memcpy(CMSG_DATA(o), &reply, sizeof(reply));
        return CMSG_SPACE(sizeof(reply));
    }
    default:
        return 0;
    }
}

/* Send n replies; a reply the kernel refuses (full buffer, unreachable peer) is dropped and the
 * rest still go out. Every round advances by at least one message, so at most n rounds. */
static void send_all(worker_t *w, int fd, struct mmsghdr *msgs, unsigned n)
{
    const udp_ops_t *ops = w->srv->udp_ops;
    unsigned off = 0;
    while (off < n) {
        int r = ops->send(fd, msgs + off, n - off);
        if (r > 0) {
            NET_COUNT(w, udp_sent, (unsigned)r);
            off += (unsigned)r;
        } else {
            NET_COUNT(w, udp_dropped, 1);
            NET_COUNT(w, udp_drop_send, 1);
            off++;
        }
    }
}

/* Reset what the kernel wrote into the receive headers it used last time (their lengths and
 * flags), and the control buffers when the socket's pktinfo need differs from the last one. At
 * 50k q/s a batch holds some 6 datagrams: rewriting all 32 headers each time was most of it. */
static void prepare(udp_state_t *u, bool pktinfo)
{
    unsigned n = u->used;
    if (u->pktinfo != (int)pktinfo) {
        u->pktinfo = pktinfo;
        n = UDP_BATCH;
    }
    for (unsigned i = 0; i < n; i++) {
        struct msghdr *h = &u->rmsg[i].msg_hdr;
        h->msg_namelen = sizeof(u->slot[i].peer);
        h->msg_control = pktinfo ? u->slot[i].rctl.buf : NULL;
        h->msg_controllen = pktinfo ? sizeof(u->slot[i].rctl.buf) : 0;
        h->msg_flags = 0;
    }
    u->used = 0;
}

/* The address datagram o was sent to: o->local (XDP: from the frame), else its listener's, with
 * the PKTINFO address (wildcard listeners) — only when the query log or a hand-off needs it. */
static void local_of(const worker_t *w, const udp_origin_t *o, struct sockaddr_storage *local)
{
    if (o->local) {
        *local = *o->local;
        return;
    }
    *local = w->srv->local[o->li];
    struct in_pktinfo in;
    struct in6_pktinfo in6;
    switch (o->pktinfo ? arrived_at(o->rh, &in, &in6) : 0) {
    case 4:
        ((struct sockaddr_in *)(void *)local)->sin_addr = in.ipi_addr;
        break;
    case 6:
        ((struct sockaddr_in6 *)(void *)local)->sin6_addr = in6.ipi6_addr;
        break;
    default:
        break;
    }
}

/* The query log's record of a datagram (answered: len bytes of response, 0 for none). */
static void log_datagram(worker_t *w, const udp_origin_t *o, const uint8_t *query, size_t qlen,
                         const uint8_t *response, size_t len)
{
    struct sockaddr_storage local;
    local_of(w, o, &local);
    const qlog_query_t qq = {.client = (const struct sockaddr *)o->peer,
                             .server = (const struct sockaddr *)&local,
                             .tcp = false,
                             .qtime_ns = w->qtime_ns,
                             .query = query,
                             .qlen = qlen,
                             .response = len ? response : NULL,
                             .rlen = len};
    qlog_worker_put(w->srv->qlog, w->qring, &w->actx, &qq);
}

/* The port of an AF_INET or AF_INET6 address, in network byte order. */
static uint16_t port_of(const struct sockaddr_storage *a)
{
    return a->ss_family == AF_INET ? ((const struct sockaddr_in *)(const void *)a)->sin_port
                                   : ((const struct sockaddr_in6 *)(const void *)a)->sin6_port;
}

/* Whether a and b are the same address and port (AF_INET or AF_INET6). */
static bool same_endpoint(const struct sockaddr_storage *a, const struct sockaddr_storage *b)
{
    if (a->ss_family != b->ss_family || port_of(a) != port_of(b))
        return false;
    if (a->ss_family == AF_INET)
        return ((const struct sockaddr_in *)(const void *)a)->sin_addr.s_addr ==
               ((const struct sockaddr_in *)(const void *)b)->sin_addr.s_addr;
    return IN6_ARE_ADDR_EQUAL(&((const struct sockaddr_in6 *)(const void *)a)->sin6_addr,
                              &((const struct sockaddr_in6 *)(const void *)b)->sin6_addr);
}

/* The UDP socket of w a handed-off XDP query's reply leaves from: the one bound to the address
 * and port the query was sent to, else a wildcard one of its family and port (it replies from
 * any address, named by PKTINFO); -1: none (a reply from another address would be discarded by
 * the client, and the socket path would not have answered that address either). */
static int xdp_reply_socket(const worker_t *w, const struct sockaddr_storage *local, bool *pktinfo)
{
    int wild = -1;
    for (size_t li = 0; li < w->srv->nlisten; li++) {
        const struct sockaddr_storage *l = &w->srv->local[li];
        if (w->udp_fd[li] < 0 || l->ss_family != local->ss_family)
            continue;
        if (same_endpoint(l, local)) {
            *pktinfo = w->srv->wildcard[li];
            return w->udp_fd[li];
        }
        if (w->srv->wildcard[li] && port_of(l) == port_of(local) && wild < 0)
            wild = w->udp_fd[li];
    }
    *pktinfo = wild >= 0;
    return wild;
}

/* A NOTIFY or TSIG-signed datagram for the transfer thread (server_handoff_t), which replies
 * through o->fd (none: refused like a full queue). */
static void handoff(worker_t *w, const udp_origin_t *o, const uint8_t *query, size_t qlen)
{
    const server_handoff_t *h = &w->srv->handoff;
    struct sockaddr_storage local;
    local_of(w, o, &local);
    int fd = o->fd;
    bool pktinfo = o->pktinfo;
    if (fd < 0 && o->local) /* XDP: the worker's socket of the query's family */
        fd = xdp_reply_socket(w, o->local, &pktinfo);
    if (fd < 0 || !h->udp || !h->udp(h->ctx, fd, query, qlen, o->peer, &local, pktinfo))
        NET_COUNT(w, handoff_full, 1);
}

size_t udp_answer_one(worker_t *w, wire_query_t *q, wire_parse_result_t pr, const udp_origin_t *o,
                      const uint8_t *query, size_t qlen, uint8_t *tx, size_t cap)
{
    size_t len = answer_parsed(w->view, &w->actx, q, pr, (const struct sockaddr *)o->peer, query,
                               qlen, tx, cap, ANSWER_UDP);
    net_count_answer(w, ANSWER_UDP, &w->actx.info);
    if (unlikely(w->actx.info.outcome == ANSWER_HANDOFF)) {
        handoff(w, o, query, qlen);
        return 0; /* answered (or not) by the transfer thread */
    }
    if (unlikely(w->qring != NULL))
        log_datagram(w, o, query, qlen, tx, len);
    return len;
}

/* Answer the n datagrams in the slots and send the replies. */
static void answer_batch(worker_t *w, int fd, size_t li, bool pktinfo, unsigned n)
{
    udp_state_t *u = w->udp;
    NET_COUNT(w, udp_received, n);
    worker_clock(w);
    /* Parse the whole batch, then overlap its zone-data cache misses before the first answer
     * waits on one. A truncated datagram is not answered: its parse is a drop. */
    for (unsigned i = 0; i < n; i++) {
        if (u->rmsg[i].msg_hdr.msg_flags & MSG_TRUNC) {
            u->q[i].has_question = false;
            u->pr[i] = WIRE_DROP;
        } else {
            u->pr[i] = wire_parse_query(&u->q[i], u->slot[i].rx, u->rmsg[i].msg_len);
        }
    }
    answer_prefetch(w->view, u->q, n);
    unsigned ns = 0;
    for (unsigned i = 0; i < n; i++) {
        const struct msghdr *rh = &u->rmsg[i].msg_hdr;
        udp_slot_t *s = &u->slot[i];
        size_t len = 0;
        if (!(rh->msg_flags & MSG_TRUNC)) {
            const udp_origin_t o = {
                .peer = &s->peer, .fd = fd, .li = li, .pktinfo = pktinfo, .rh = rh};
            len = udp_answer_one(w, &u->q[i], u->pr[i], &o, s->rx, u->rmsg[i].msg_len, s->tx,
                                 sizeof(s->tx));
            if (unlikely(w->actx.info.outcome == ANSWER_HANDOFF))
                continue;
        }
        if (len == 0) {
            NET_COUNT(w, udp_dropped, 1);
            if (rh->msg_flags & MSG_TRUNC)
                NET_COUNT(w, udp_drop_truncated, 1);
            else
                NET_COUNT(w, udp_drop_answer, 1);
            continue;
        }
        struct msghdr *sh = &u->smsg[ns].msg_hdr;
        s->siov.iov_len = len;
        sh->msg_name = &s->peer;
        sh->msg_namelen = rh->msg_namelen;
        sh->msg_iov = &s->siov;
        sh->msg_iovlen = 1;
        sh->msg_controllen = pktinfo ? reply_pktinfo(rh, &s->sctl) : 0;
        sh->msg_control = sh->msg_controllen ? s->sctl.buf : NULL;
        sh->msg_flags = 0;
        ns++;
    }
    if (ns)
        send_all(w, fd, u->smsg, ns);
}

/* The flow's address and port as a socket address. */
static void flow_addr(struct sockaddr_storage *ss, const xdp_frame_flow_t *f, bool src)
{
    memset(ss, 0, sizeof(struct sockaddr_in6));
    if (f->ip_version == 4) {
        struct sockaddr_in *a = (struct sockaddr_in *)(void *)ss;
        a->sin_family = AF_INET;
        a->sin_port = htons(src ? f->sport : f->dport);
        memcpy(&a->sin_addr, src ? f->src : f->dst, 4);
    } else {
        struct sockaddr_in6 *a = (struct sockaddr_in6 *)(void *)ss;
        a->sin6_family = AF_INET6;
        a->sin6_port = htons(src ? f->sport : f->dport);
        memcpy(&a->sin6_addr, src ? f->src : f->dst, 16);
    }
}

/* Answer n <= UDP_BATCH queries of an AF_XDP batch as answer_batch() does a socket's: parse them
 * all, prefetch, then answer each. Each query is copied first: the reply is written in place over
 * it, and answer_parsed() reads the question as it writes (the query log both). */
static void xdp_answer_some(worker_t *w, xdp_query_t *qs, unsigned n)
{
    udp_state_t *u = w->udp;
    for (unsigned i = 0; i < n; i++) {
        if (qs[i].len > sizeof(u->slot[i].rx)) { /* a jumbo frame: abuse, as MSG_TRUNC */
            u->q[i].has_question = false;
            u->pr[i] = WIRE_DROP;
            continue;
        }
        memcpy(u->slot[i].rx, qs[i].buf, qs[i].len);
        u->pr[i] = wire_parse_query(&u->q[i], u->slot[i].rx, qs[i].len);
    }
    answer_prefetch(w->view, u->q, n);
    for (unsigned i = 0; i < n; i++) {
        if (qs[i].len > sizeof(u->slot[i].rx))
            continue;
        struct sockaddr_storage peer, local;
        flow_addr(&peer, &qs[i].flow, true);
        flow_addr(&local, &qs[i].flow, false);
        const udp_origin_t o = {.peer = &peer, .fd = -1, .local = &local};
        qs[i].out = udp_answer_one(w, &u->q[i], u->pr[i], &o, u->slot[i].rx, qs[i].len, qs[i].buf,
                                   qs[i].cap);
        qs[i].passed = w->actx.info.outcome == ANSWER_HANDOFF;
    }
}

void udp_xdp_batch(void *arg, xdp_query_t *qs, unsigned n)
{
    worker_t *w = arg;
    for (unsigned off = 0; off < n; off += UDP_BATCH)
        xdp_answer_some(w, qs + off, n - off < UDP_BATCH ? n - off : UDP_BATCH);
}

unsigned udp_handle(worker_t *w, size_t li)
{
    const server_t *srv = w->srv;
    int fd = w->udp_fd[li];
    bool pktinfo = srv->wildcard[li];
    unsigned total = 0;

    for (unsigned b = 0; b < UDP_MAX_BATCHES; b++) {
        prepare(w->udp, pktinfo);
        int n = srv->udp_ops->recv(fd, w->udp->rmsg, UDP_BATCH);
        if (n <= 0)
            break; /* EAGAIN: drained; other errors (ICMP reports) are not ours to act on */
        w->udp->used = (unsigned)n;
        answer_batch(w, fd, li, pktinfo, (unsigned)n);
        total += (unsigned)n;
        if ((unsigned)n < UDP_BATCH)
            break; /* short batch: the queue is (almost surely) empty; spare the EAGAIN call */
    }
    return total;
}

unsigned udp_wait_batch(worker_t *w, size_t li)
{
    const server_t *srv = w->srv;
    int fd = w->udp_fd[li];
    bool pktinfo = srv->wildcard[li];
    prepare(w->udp, pktinfo);
    /* blocked in the kernel: offline, so a reload's grace period does not wait for traffic */
    tern_rcu_offline();
    int n = srv->udp_ops->wait(fd, w->udp->rmsg, UDP_BATCH);
    tern_rcu_online();
    if (n <= 0)
        return 0; /* SO_RCVTIMEO expired (idle), or EINTR */
    w->udp->used = (unsigned)n;
    w->view = tern_rcu_deref(*srv->view);
    answer_batch(w, fd, li, pktinfo, (unsigned)n);
    w->view = NULL;
    tern_rcu_quiescent();
    return (unsigned)n;
}
