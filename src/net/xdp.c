/*
 * xdp.c — attaching the XDP program and serving one receive queue through an AF_XDP socket
 * (tern/net/xdp.h).
 *
 * A frame's life: the kernel takes a free frame from the fill ring, writes a query into it and
 * puts it on the RX ring; xdp_sock_poll() takes up to a batch of them, parses each, lets the
 * handler answer the batch at once, each reply written in its query's frame, and puts the replies
 * on the TX ring together; once a reply is sent, the kernel returns its frame on the completion
 * ring and it goes back to the free stack, then to the fill ring. A frame that is not answered
 * goes straight back to the free stack. Nothing is copied here but the payload's move to the
 * reply's offset (none for a query without IP options or extension headers); the answer path
 * copies the query itself (udp.c says why).
 */
#include "tern/net/xdp.h"

#include <arpa/inet.h>
#include <errno.h>
#include <linux/ethtool.h>
#include <linux/if_xdp.h>
#include <linux/sockios.h>
#include <net/if.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <xdp/libxdp.h>
#include <xdp/xsk.h>

#include "tern/common/err.h"
#include "tern/common/log.h"

/* One page per frame: aligned-chunk UMEMs need a power of two between 2048 and the page size,
 * and a page holds a 1500-byte-MTU frame with room to spare, so no frame needs multi-buffer. */
#define FRAME_SIZE 4096u
/* Descriptors per ring (fill, completion, RX, TX), libxdp's default: at 1M queries/s on one queue
 * it is 2 ms of backlog before the kernel drops (xsk rx_dropped), enough to ride out a worker's
 * scheduling hiccup; more only adds latency under overload. */
#define RING_SIZE 2048u
/* Enough frames for a full fill ring and a full TX ring at once, so replies in flight never starve
 * receive: 4096 frames × 4 KiB = 16 MiB per queue. */
#define NUM_FRAMES (2u * RING_SIZE)
struct xdp {
    struct xdp_program *prog;
    int ifindex;
    char ifname[IF_NAMESIZE];
    size_t mtu;
    int xsks_fd;
    int ports_fd;
};

struct xdp_sock {
    xdp_t *x;
    uint32_t queue;
    bool zero_copy;
    bool in_map;
    struct xsk_umem *umem;
    struct xsk_socket *xsk;
    struct xsk_ring_prod fill;
    struct xsk_ring_cons comp;
    struct xsk_ring_cons rx;
    struct xsk_ring_prod tx;
    uint8_t *area;
    xdp_sock_stats_t stats;
    uint32_t in_flight; /* frames on the TX ring or being sent: not yet on the completion ring */
    uint32_t nfree;
    uint64_t free[NUM_FRAMES]; /* frame addresses owned by user space, a stack */
};

/* The interface's MTU, or 1500 when it cannot be read. */
static size_t mtu_of(const char *ifname)
{
    struct ifreq ifr = {0};
    snprintf(ifr.ifr_name, sizeof ifr.ifr_name, "%s", ifname);
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    size_t mtu = 1500;
    if (fd >= 0 && ioctl(fd, SIOCGIFMTU, &ifr) == 0 && ifr.ifr_mtu > 0)
        mtu = (size_t)ifr.ifr_mtu;
    if (fd >= 0)
        close(fd);
    return mtu;
}

/* libxdp's and libbpf's messages, into tern's log: their warnings are what an operator needs
 * (a fallback without the dispatcher, a map or section skipped) but not errors of ours (every
 * failure is returned and reported by the caller), so one level down; their debug output not. */
static int lib_print(int level, const char *fmt, va_list ap)
{
    if (level == LIBXDP_DEBUG)
        return 0;
    char line[256];
    int n = vsnprintf(line, sizeof line, fmt, ap);
    size_t len = strlen(line);
    while (len > 0 && line[len - 1] == '\n')
        line[--len] = '\0';
    log_msg(level == LIBXDP_WARN ? LOG_LVL_INFO : LOG_LVL_DEBUG, "xdp: %s", line);
    return n;
}

static int libxdp_print(enum libxdp_print_level level, const char *fmt, va_list ap)
{
    return lib_print((int)level, fmt, ap);
}

static int libbpf_print(enum libbpf_print_level level, const char *fmt, va_list ap)
{
    /* the two enums share their values (libxdp.h: "compatible with libbpf logging levels") */
    return lib_print((int)level, fmt, ap);
}

const char *xdp_obj_path(void)
{
    /* an uninstalled build (the tests) names its own: read at attach, on the control thread */
    const char *env = getenv("TERN_XDP_OBJ");
    return env && *env ? env : TERN_XDP_OBJ_INSTALLED;
}

/* Why the kernel refused to attach, in an operator's words. */
static void attach_err(int rc, const char *ifname, char *err, size_t errlen)
{
    char why[128];
    libxdp_strerror(rc, why, sizeof why);
    if (rc == -EPERM || rc == -EACCES)
        tern_set_err(err, errlen, "XDP on %s: %s (needs root, or CAP_NET_ADMIN and CAP_BPF)",
                     ifname, why);
    else if (rc == -EOPNOTSUPP || rc == -ENOTSUP)
        tern_set_err(err, errlen, "XDP on %s: the driver has no native XDP mode (%s)", ifname, why);
    else if (rc == -EEXIST || rc == -EBUSY)
        tern_set_err(err, errlen, "XDP on %s: another XDP program is attached (%s)", ifname, why);
    else
        tern_set_err(err, errlen, "XDP on %s: cannot attach: %s", ifname, why);
}

/* Find the program's maps and fill the port map. */
static int attach_maps(xdp_t *x, const uint16_t *ports, size_t nports, char *err, size_t errlen)
{
    struct bpf_object *obj = xdp_program__bpf_obj(x->prog);
    x->xsks_fd = obj ? bpf_object__find_map_fd_by_name(obj, "tern_xdp_xsks") : -1;
    x->ports_fd = obj ? bpf_object__find_map_fd_by_name(obj, "tern_xdp_ports") : -1;
    if (x->xsks_fd < 0 || x->ports_fd < 0) {
        tern_set_err(err, errlen, "XDP object: no tern_xdp_xsks/tern_xdp_ports map");
        return TERN_EINVAL;
    }
    for (size_t i = 0; i < nports; i++) {
        uint16_t port = htons(ports[i]);
        uint8_t one = 1;
        if (bpf_map_update_elem(x->ports_fd, &port, &one, BPF_ANY) != 0) {
            int rc = -errno;
            tern_set_err(err, errlen, "XDP port map: %s", strerror(errno));
            return rc;
        }
    }
    return 0;
}

int xdp_attach(const char *ifname, const char *obj_path, const uint16_t *ports, size_t nports,
               xdp_t **out, char *err, size_t errlen)
{
    *out = NULL;
    if (nports == 0 || nports > XDP_PORTS_MAX || strlen(ifname) >= IF_NAMESIZE) {
        tern_set_err(err, errlen, "XDP: 1 to %d ports and an interface name", XDP_PORTS_MAX);
        return TERN_EINVAL;
    }
    unsigned ifindex = if_nametoindex(ifname);
    if (ifindex == 0) {
        tern_set_err(err, errlen, "XDP: no interface %s", ifname);
        return TERN_ENOENT;
    }
    libxdp_set_print(libxdp_print); /* process-wide; the same value every time */
    libbpf_set_print(libbpf_print);
    if (!obj_path)
        obj_path = xdp_obj_path();
    xdp_t *x = calloc(1, sizeof *x);
    if (!x)
        return TERN_ENOMEM;
    x->ifindex = (int)ifindex;
    snprintf(x->ifname, sizeof x->ifname, "%s", ifname);
    x->mtu = mtu_of(ifname);
    x->prog = xdp_program__open_file(obj_path, "xdp", NULL);
    int rc = (int)libxdp_get_error(x->prog);
    if (rc) {
        x->prog = NULL;
        tern_set_err(err, errlen, "XDP object %s: %s", obj_path, strerror(-rc));
        goto fail;
    }
    rc = xdp_program__attach(x->prog, x->ifindex, XDP_MODE_NATIVE, 0);
    if (rc) {
        attach_err(rc, ifname, err, errlen);
        xdp_program__close(x->prog);
        x->prog = NULL;
        goto fail;
    }
    rc = attach_maps(x, ports, nports, err, errlen);
    if (rc)
        goto fail;
    *out = x;
    return 0;
fail:
    xdp_detach(x);
    return rc;
}

void xdp_detach(xdp_t *x)
{
    if (!x)
        return;
    if (x->prog) {
        xdp_program__detach(x->prog, x->ifindex, XDP_MODE_NATIVE, 0);
        xdp_program__close(x->prog);
    }
    free(x);
}

/* Return completed TX frames to the free stack. */
static void reclaim(xdp_sock_t *s)
{
    uint32_t idx;
    uint32_t n = xsk_ring_cons__peek(&s->comp, RING_SIZE, &idx);
    for (uint32_t i = 0; i < n; i++) {
        uint64_t addr = *xsk_ring_cons__comp_addr(&s->comp, idx + i);
        s->free[s->nfree++] = addr - addr % FRAME_SIZE; /* the frame, not the packet in it */
    }
    xsk_ring_cons__release(&s->comp, n);
    s->in_flight -= n;
}

/* Ask the kernel to send what the TX ring holds, if it wants asking. In copy mode it always does,
 * and each call sends at most 32 frames (TX_BATCH_SIZE, net/xdp/xsk.c): hence a kick on every
 * poll while frames are in flight, not only after a batch is queued. EAGAIN, ENOBUFS and EBUSY
 * mean the kernel is busy sending already: the next poll kicks again. */
static void kick(xdp_sock_t *s)
{
    if (s->in_flight && xsk_ring_prod__needs_wakeup(&s->tx))
        (void)sendto(xsk_socket__fd(s->xsk), NULL, 0, MSG_DONTWAIT, NULL, 0);
}

/* Give the kernel as many free frames as the fill ring takes. */
static void refill(xdp_sock_t *s)
{
    uint32_t room = xsk_prod_nb_free(&s->fill, RING_SIZE);
    uint32_t n = room < s->nfree ? room : s->nfree;
    if (n < room)
        s->stats.fill_short++;
    uint32_t idx;
    if (n == 0 || xsk_ring_prod__reserve(&s->fill, n, &idx) != n)
        return;
    for (uint32_t i = 0; i < n; i++)
        *xsk_ring_prod__fill_addr(&s->fill, idx + i) = s->free[--s->nfree];
    xsk_ring_prod__submit(&s->fill, n);
}

/* Create the UMEM and socket, and learn whether the kernel chose zero-copy. */
static int sock_create(xdp_sock_t *s, char *err, size_t errlen)
{
    const struct xsk_umem_config ucfg = {
        .fill_size = RING_SIZE, .comp_size = RING_SIZE, .frame_size = FRAME_SIZE};
    int rc = xsk_umem__create(&s->umem, s->area, (uint64_t)NUM_FRAMES * FRAME_SIZE, &s->fill,
                              &s->comp, &ucfg);
    if (rc) {
        tern_set_err(err, errlen, "XDP UMEM: %s", strerror(-rc));
        return rc;
    }
    /* Neither XDP_COPY nor XDP_ZEROCOPY: the kernel tries zero-copy and falls back to copy. The
     * program is ours (xdp_attach), so libxdp must not load its default one. */
    const struct xsk_socket_config scfg = {.rx_size = RING_SIZE,
                                           .tx_size = RING_SIZE,
                                           .libxdp_flags = XSK_LIBXDP_FLAGS__INHIBIT_PROG_LOAD,
                                           .bind_flags = XDP_USE_NEED_WAKEUP};
    rc = xsk_socket__create(&s->xsk, s->x->ifname, s->queue, s->umem, &s->rx, &s->tx, &scfg);
    if (rc) {
        tern_set_err(err, errlen, "XDP socket on %s queue %u: %s", s->x->ifname, s->queue,
                     strerror(-rc));
        return rc;
    }
    struct xdp_options opts = {0};
    socklen_t len = sizeof opts;
    if (getsockopt(xsk_socket__fd(s->xsk), SOL_XDP, XDP_OPTIONS, &opts, &len) == 0)
        s->zero_copy = (opts.flags & XDP_OPTIONS_ZEROCOPY) != 0;
    return 0;
}

int xdp_sock_open(xdp_t *x, uint32_t queue, xdp_sock_t **out, char *err, size_t errlen)
{
    *out = NULL;
    xdp_sock_t *s = calloc(1, sizeof *s);
    if (!s)
        return TERN_ENOMEM;
    s->x = x;
    s->queue = queue;
    void *area = mmap(NULL, (size_t)NUM_FRAMES * FRAME_SIZE, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    int rc;
    if (area == MAP_FAILED) {
        rc = -errno;
        tern_set_err(err, errlen, "XDP UMEM: %s", strerror(errno));
        goto fail;
    }
    s->area = area;
    rc = sock_create(s, err, errlen);
    if (rc)
        goto fail;
    for (uint32_t i = 0; i < NUM_FRAMES; i++)
        s->free[s->nfree++] = (uint64_t)i * FRAME_SIZE;
    refill(s); /* buffers before the program may steer frames here */
    rc = xsk_socket__update_xskmap(s->xsk, x->xsks_fd);
    if (rc) {
        tern_set_err(err, errlen, "XDP socket map, queue %u: %s", queue, strerror(-rc));
        goto fail;
    }
    s->in_map = true;
    *out = s;
    return 0;
fail:
    xdp_sock_close(s);
    return rc;
}

bool xdp_sock_zero_copy(const xdp_sock_t *s)
{
    return s->zero_copy;
}

int xdp_sock_fd(const xdp_sock_t *s)
{
    return xsk_socket__fd(s->xsk);
}

const xdp_sock_stats_t *xdp_sock_stats(const xdp_sock_t *s)
{
    return &s->stats;
}

int xdp_sock_kstats(const xdp_sock_t *s, xdp_sock_kstats_t *out)
{
    memset(out, 0, sizeof(*out));
    struct xdp_statistics st = {0};
    socklen_t len = sizeof st;
    if (getsockopt(xsk_socket__fd(s->xsk), SOL_XDP, XDP_STATISTICS, &st, &len) != 0)
        return -errno;
    out->rx_ring_full = st.rx_ring_full;
    out->fill_empty = st.rx_fill_ring_empty_descs;
    out->rx_dropped = st.rx_dropped;
    out->invalid = st.rx_invalid_descs + st.tx_invalid_descs;
    return 0;
}

const char *xdp_sock_ifname(const xdp_sock_t *s)
{
    return s->x->ifname;
}

uint32_t xdp_sock_queue(const xdp_sock_t *s)
{
    return s->queue;
}

/* Parse frame f and move its DNS payload to where the reply's goes (the reply's headers are
 * never longer than the query's: the payload moves down or stays), making q; false when the frame
 * is not ours. */
static bool take(const xdp_frame_ref_t *f, size_t mtu, xdp_query_t *q)
{
    if (xdp_frame_parse(f->data, f->len, 0, &q->flow) != 0)
        return false;
    size_t hdr = xdp_frame_hdr_len(&q->flow);
    size_t max = f->cap < XDP_FRAME_ETH_LEN + mtu ? f->cap : XDP_FRAME_ETH_LEN + mtu;
    memmove(f->data + hdr, f->data + q->flow.payload_off, q->flow.payload_len);
    q->buf = f->data + hdr;
    q->len = q->flow.payload_len;
    q->cap = max - hdr;
    q->out = 0;
    q->passed = false;
    return true;
}

void xdp_frames_answer(xdp_frame_ref_t *frames, unsigned n, size_t mtu, xdp_batch_fn handler,
                       void *arg, xdp_sock_stats_t *stats)
{
    if (n > XDP_BATCH) { /* beyond the contract: the rest as batches of their own */
        xdp_frames_answer(frames + XDP_BATCH, n - XDP_BATCH, mtu, handler, arg, stats);
        n = XDP_BATCH;
    }
    xdp_query_t qs[XDP_BATCH];
    uint8_t of[XDP_BATCH]; /* the frame of each query */
    unsigned m = 0;
    for (unsigned i = 0; i < n; i++) {
        if (take(&frames[i], mtu, &qs[m])) {
            of[m++] = (uint8_t)i;
        } else {
            stats->not_ours++;
        }
        frames[i].len = 0;
    }
    if (m)
        handler(arg, qs, m);
    for (unsigned k = 0; k < m; k++) {
        xdp_frame_ref_t *f = &frames[of[k]];
        size_t hdr = (size_t)(qs[k].buf - f->data), flen = 0;
        if (qs[k].out == 0 && qs[k].passed)
            continue; /* answered elsewhere: the transfer thread, through a socket */
        if (qs[k].out == 0 || qs[k].out > qs[k].cap ||
            xdp_frame_write(f->data, hdr + qs[k].cap, &qs[k].flow, qs[k].out, &flen) != 0) {
            stats->no_answer++;
            continue;
        }
        f->len = (uint32_t)flen;
    }
}

/* Put the batch's replies on the TX ring (frames without one, or beyond the ring's room, go back
 * to the free stack) and wake the kernel if it asks. */
static void transmit(xdp_sock_t *s, const uint64_t *addr, const xdp_frame_ref_t *f, uint32_t n)
{
    uint32_t want = 0;
    for (uint32_t i = 0; i < n; i++)
        want += f[i].len != 0;
    uint32_t idx = 0;
    uint32_t room = want ? xsk_ring_prod__reserve(&s->tx, want, &idx) : 0;
    uint32_t sent = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (f[i].len != 0 && sent < room) {
            struct xdp_desc *d = xsk_ring_prod__tx_desc(&s->tx, idx + sent++);
            d->addr = addr[i];
            d->len = f[i].len;
            continue;
        }
        if (f[i].len != 0)
            s->stats.tx_full++;
        s->free[s->nfree++] = addr[i] - addr[i] % FRAME_SIZE;
    }
    if (sent == 0)
        return;
    xsk_ring_prod__submit(&s->tx, sent);
    s->stats.tx += sent;
    s->in_flight += sent;
    kick(s);
}

int xdp_sock_poll(xdp_sock_t *s, int timeout_ms, xdp_batch_fn handler, void *arg)
{
    reclaim(s);
    refill(s);
    kick(s);
    uint32_t idx;
    uint32_t n = xsk_ring_cons__peek(&s->rx, XDP_BATCH, &idx);
    if (n == 0) {
        /* Replies still to send: wait at most 1 ms, then kick again (poll() itself sends in copy
         * mode); bounded, so a link that never completes them does not spin a CPU. */
        if (s->in_flight && (timeout_ms < 0 || timeout_ms > 1))
            timeout_ms = 1;
        if (timeout_ms == 0 && !xsk_ring_prod__needs_wakeup(&s->fill))
            return 0;
        /* need-wakeup: with the flag set the kernel fills the RX ring only after a syscall */
        struct pollfd p = {.fd = xsk_socket__fd(s->xsk), .events = POLLIN};
        if (poll(&p, 1, timeout_ms) < 0 && errno != EINTR)
            return -errno;
        return 0;
    }
    uint64_t addr[XDP_BATCH];
    xdp_frame_ref_t f[XDP_BATCH];
    for (uint32_t i = 0; i < n; i++) {
        const struct xdp_desc *d = xsk_ring_cons__rx_desc(&s->rx, idx + i);
        addr[i] = d->addr;
        f[i] = (xdp_frame_ref_t){.data = xsk_umem__get_data(s->area, d->addr),
                                 .len = d->len,
                                 .cap = (uint32_t)(FRAME_SIZE - d->addr % FRAME_SIZE)};
    }
    xsk_ring_cons__release(&s->rx, n);
    s->stats.rx += n;
    xdp_frames_answer(f, n, s->x->mtu, handler, arg, &s->stats);
    transmit(s, addr, f, n);
    return (int)n;
}

bool xdp_sock_sending(const xdp_sock_t *s)
{
    return s->in_flight != 0;
}

unsigned xdp_queue_count(const char *ifname)
{
    struct ethtool_channels ch = {.cmd = ETHTOOL_GCHANNELS};
    struct ifreq ifr = {0};
    snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", ifname);
    ifr.ifr_data = (void *)&ch;
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return 1;
    int r = ioctl(fd, SIOCETHTOOL, &ifr);
    close(fd);
    /* the larger of the two, not their sum: veth reports its one queue as both (rx 1, combined
     * 1). A NIC with RX-only channels besides combined ones would leave some queues without a
     * socket: the program passes their frames to the kernel, and the socket path answers. */
    unsigned n = r == 0 ? (ch.combined_count > ch.rx_count ? ch.combined_count : ch.rx_count) : 0;
    return n ? n : 1;
}

void xdp_sock_close(xdp_sock_t *s)
{
    if (!s)
        return;
    if (s->in_map) {
        uint32_t key = s->queue;
        (void)bpf_map_delete_elem(s->x->xsks_fd, &key);
    }
    if (s->xsk)
        xsk_socket__delete(s->xsk);
    if (s->umem)
        (void)xsk_umem__delete(s->umem);
    if (s->area)
        munmap(s->area, (size_t)NUM_FRAMES * FRAME_SIZE);
    free(s);
}
