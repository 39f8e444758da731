/*
 * server.c — bind every socket, start the workers, stop and join them.
 *
 * Each worker gets, for every listen address, its own UDP socket and its own TCP listener, all
 * with SO_REUSEPORT so the kernel spreads datagrams and connections across workers without any
 * shared queue. Everything a worker needs is allocated and bound here, before its thread starts.
 */
#include <arpa/inet.h>
#include <linux/filter.h>
#include <linux/sock_diag.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "tern/answer/select.h"
#include "tern/common/err.h"
#include "tern/common/log.h"
#include "tern/common/mem.h"
#include "worker.h"

/* TCP send buffer of every accepted connection: two maximum-size answers in flight. */
#define TCP_SOCK_SNDBUF (128 << 10)

/* Port 0: an ephemeral port free for UDP can be taken for TCP by someone else; a few fresh
 * attempts make that race vanishingly unlikely without looping forever. */
#define BIND_ATTEMPTS 8

static bool is_wildcard(const config_listen_t *l)
{
    if (l->addr.ss_family == AF_INET) {
        const struct sockaddr_in *sa = (const struct sockaddr_in *)&l->addr;
        return sa->sin_addr.s_addr == htonl(INADDR_ANY);
    }
    const struct sockaddr_in6 *sa6 = (const struct sockaddr_in6 *)&l->addr;
    return IN6_IS_ADDR_UNSPECIFIED(&sa6->sin6_addr);
}

static void set_port(struct sockaddr_storage *ss, uint16_t port)
{
    if (ss->ss_family == AF_INET)
        ((struct sockaddr_in *)ss)->sin_port = htons(port);
    else
        ((struct sockaddr_in6 *)ss)->sin6_port = htons(port);
}

static uint16_t get_port(const struct sockaddr_storage *ss)
{
    if (ss->ss_family == AF_INET)
        return ntohs(((const struct sockaddr_in *)ss)->sin_port);
    return ntohs(((const struct sockaddr_in6 *)ss)->sin6_port);
}

static int setopt_int(int fd, int level, int name, int value)
{
    return setsockopt(fd, level, name, &value, sizeof(value));
}

/* UDP socket buffers of udp_rcvbuf and udp_sndbuf bytes (config.c says why 4 MiB by default), 0
 * leaving the kernel's default. Best effort: FORCE works as root and ignores rmem_max / wmem_max;
 * otherwise take what the cap allows. */
static void size_buffers(int fd, const server_settings_t *set)
{
    if (set->udp_rcvbuf && setopt_int(fd, SOL_SOCKET, SO_RCVBUFFORCE, (int)set->udp_rcvbuf) < 0)
        (void)setopt_int(fd, SOL_SOCKET, SO_RCVBUF, (int)set->udp_rcvbuf);
    if (set->udp_sndbuf && setopt_int(fd, SOL_SOCKET, SO_SNDBUFFORCE, (int)set->udp_sndbuf) < 0)
        (void)setopt_int(fd, SOL_SOCKET, SO_SNDBUF, (int)set->udp_sndbuf);
}

/* Busy polling on UDP socket fd (udp_busy_poll_us > 0; config.c says what it is for): 0, or -1
 * with errno set and the option that failed in *what. The kernel wants CAP_NET_ADMIN for each. */
static int busy_poll(int fd, const server_settings_t *set, const char **what)
{
    *what = "setsockopt SO_BUSY_POLL (udp_busy_poll_us needs root or CAP_NET_ADMIN)";
    if (setopt_int(fd, SOL_SOCKET, SO_BUSY_POLL, (int)set->udp_busy_poll_us) < 0)
        return -1;
    *what = "setsockopt SO_BUSY_POLL_BUDGET (udp_busy_poll_budget)";
    if (setopt_int(fd, SOL_SOCKET, SO_BUSY_POLL_BUDGET, (int)set->udp_busy_poll_budget) < 0)
        return -1;
    *what = "setsockopt SO_PREFER_BUSY_POLL (udp_prefer_busy_poll)";
    return setopt_int(fd, SOL_SOCKET, SO_PREFER_BUSY_POLL, set->udp_prefer_busy_poll ? 1 : 0);
}

/* One socket of the given type on l's address with the given port. Returns the fd, or -1 with
 * errno set and a message naming the step in *what. */
static int open_socket(const config_listen_t *l, const server_settings_t *set, int type,
                       uint16_t port, bool wildcard, const char **what)
{
    struct sockaddr_storage ss = l->addr;
    int family = ss.ss_family;
    set_port(&ss, port);
    /* UDP sockets stay blocking, with a receive timeout, for busy mode (worker.h); every other
     * call on them passes MSG_DONTWAIT. TCP sockets are non-blocking. */
    int fd = socket(family, type | (type == SOCK_STREAM ? SOCK_NONBLOCK : 0) | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        *what = "socket";
        return -1;
    }
    *what = "setsockopt";
    if (setopt_int(fd, SOL_SOCKET, SO_REUSEPORT, 1) < 0)
        goto fail;
    if (family == AF_INET6 && setopt_int(fd, IPPROTO_IPV6, IPV6_V6ONLY, 1) < 0)
        goto fail;
    if (type == SOCK_DGRAM) {
        size_buffers(fd, set);
        struct timeval idle = {.tv_sec = 0, .tv_usec = UDP_BUSY_IDLE_US};
        if (setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &idle, sizeof(idle)) < 0)
            goto fail;
        /* Replies leave without DF and ignore path-MTU reports (as gdnsd and NSD set it): a
         * forged ICMP "fragmentation needed" must not lower the MTU towards a resolver so that
         * our answers get fragmented for an off-path attacker's benefit. Best effort: kernels
         * before 3.15 (v4) and 4.0 (v6) lack it. */
        if (family == AF_INET)
            (void)setopt_int(fd, IPPROTO_IP, IP_MTU_DISCOVER, IP_PMTUDISC_OMIT);
        else
            (void)setopt_int(fd, IPPROTO_IPV6, IPV6_MTU_DISCOVER, IPV6_PMTUDISC_OMIT);
        if (wildcard && family == AF_INET && setopt_int(fd, IPPROTO_IP, IP_PKTINFO, 1) < 0)
            goto fail;
        if (wildcard && family == AF_INET6 && setopt_int(fd, IPPROTO_IPV6, IPV6_RECVPKTINFO, 1) < 0)
            goto fail;
    } else {
        /* restart without waiting out TIME_WAIT of the previous run's connections */
        if (setopt_int(fd, SOL_SOCKET, SO_REUSEADDR, 1) < 0)
            goto fail;
        /* inherited by accepted sockets: pipelined answers must not wait for Nagle */
        (void)setopt_int(fd, IPPROTO_TCP, TCP_NODELAY, 1);
        /* also inherited: a peer that stops reading can pin at most this much kernel memory
         * (doubled by the kernel) besides our own write queue, until the idle timeout */
        (void)setopt_int(fd, SOL_SOCKET, SO_SNDBUF, TCP_SOCK_SNDBUF);
    }
    *what = "bind";
    if (bind(fd, (struct sockaddr *)&ss, l->addrlen) < 0)
        goto fail;
    *what = "listen";
    if (type == SOCK_STREAM && listen(fd, TCP_LISTEN_BACKLOG) < 0)
        goto fail;
    return fd;
fail:;
    int e = errno;
    close(fd);
    errno = e;
    return -1;
}

static void close_listen(server_t *s, size_t li)
{
    for (unsigned w = 0; w < s->nworkers; w++) {
        worker_t *wk = &s->workers[w];
        if (wk->udp_fd[li] >= 0)
            close(wk->udp_fd[li]);
        if (wk->tcp_fd[li] >= 0)
            close(wk->tcp_fd[li]);
        wk->udp_fd[li] = wk->tcp_fd[li] = -1;
    }
}

/*
 * udp_steering other than hash: a classic BPF program on the listen address's SO_REUSEPORT group
 * picks the socket, whose index in the group is the worker's (they are bound in worker order):
 * a random number (SKF_AD_RANDOM) or the receiving CPU (SKF_AD_CPU), modulo the workers. An
 * index out of range would fall back to the hash, so the modulo keeps every worker in. One
 * program per group, attached through any member. 0 or -1 with errno.
 */
static int steer(server_t *s, size_t li)
{
    unsigned mode = s->set.udp_steering;
    if (mode == CONFIG_UDP_STEER_HASH || s->nworkers < 2)
        return 0;
    struct sock_filter code[] = {
        {BPF_LD | BPF_W | BPF_ABS, 0, 0,
         (uint32_t)SKF_AD_OFF + (mode == CONFIG_UDP_STEER_CPU ? SKF_AD_CPU : SKF_AD_RANDOM)},
        {BPF_ALU | BPF_MOD | BPF_K, 0, 0, s->nworkers},
        {BPF_RET | BPF_A, 0, 0, 0},
    };
    struct sock_fprog prog = {.len = TERN_ARRAY_SIZE(code), .filter = code};
    return setsockopt(s->workers[0].udp_fd[li], SOL_SOCKET, SO_ATTACH_REUSEPORT_CBPF, &prog,
                      sizeof(prog));
}

/* Bind every worker's UDP and/or TCP socket for listen address li (as its udp/tcp flags say). With
 * port 0 the first socket picks the port and everything else follows it; on EADDRINUSE start over
 * with a fresh one. */
static int bind_listen(server_t *s, size_t li)
{
    const config_listen_t *l = &s->set.listen[li];
    uint16_t configured = get_port(&l->addr);
    const char *what = "bind";
    const char *proto = "udp";
    for (int attempt = 0; attempt < BIND_ATTEMPTS; attempt++) {
        uint16_t port = configured;
        bool ok = true;
        for (unsigned w = 0; w < s->nworkers && ok; w++) {
            worker_t *wk = &s->workers[w];
            /* UDP first when served: the first socket bound picks an ephemeral port */
            for (int k = 0; k < 2 && ok; k++) {
                bool udp = k == 0;
                if (!(udp ? l->udp : l->tcp))
                    continue;
                proto = udp ? "udp" : "tcp";
                int fd = open_socket(l, &s->set, udp ? SOCK_DGRAM : SOCK_STREAM, port,
                                     s->wildcard[li], &what);
                if (udp)
                    wk->udp_fd[li] = fd;
                else
                    wk->tcp_fd[li] = fd;
                if (fd < 0 ||
                    (udp && s->set.udp_busy_poll_us && busy_poll(fd, &s->set, &what) < 0)) {
                    ok = false;
                    break;
                }
                if (port == 0) {
                    struct sockaddr_storage ss;
                    socklen_t len = sizeof(ss);
                    if (getsockname(fd, (struct sockaddr *)&ss, &len) < 0) {
                        what = "getsockname";
                        ok = false;
                        break;
                    }
                    port = get_port(&ss);
                }
            }
        }
        if (ok && l->udp && steer(s, li) < 0) {
            what = "SO_ATTACH_REUSEPORT_CBPF";
            ok = false;
        }
        if (ok) {
            s->port[li] = port;
            /* the query log's server side: the configured address with the port in use */
            s->local[li] = l->addr;
            set_port(&s->local[li], port);
            return 0;
        }
        int e = errno;
        close_listen(s, li);
        if (configured != 0 || e != EADDRINUSE) {
            log_err("cannot listen on %s (%s): %s: %s", l->text, proto, what, strerror(e));
            return -e;
        }
    }
    log_err("cannot listen on %s: no ephemeral port free for both UDP and TCP", l->text);
    return TERN_EEXIST;
}

/* DoT listen address li (set.tls.listen): every worker's TCP listener on it, SO_REUSEPORT as for
 * plain TCP; port 0 picks one ephemeral port for all. 0 or negative (logged). */
static int bind_tls(server_t *s, size_t li)
{
    const config_listen_t *l = &s->set.tls.listen[li];
    uint16_t port = get_port(&l->addr);
    const char *what = "bind";
    for (unsigned w = 0; w < s->nworkers; w++) {
        worker_t *wk = &s->workers[w];
        if ((wk->tls_fd[li] = open_socket(l, &s->set, SOCK_STREAM, port, false, &what)) < 0)
            goto fail;
        struct sockaddr_storage ss;
        socklen_t len = sizeof(ss);
        if (port == 0) {
            what = "getsockname";
            if (getsockname(wk->tls_fd[li], (struct sockaddr *)&ss, &len) < 0)
                goto fail;
            port = get_port(&ss);
        }
    }
    s->tls_port[li] = port;
    s->tls_local[li] = l->addr;
    set_port(&s->tls_local[li], port);
    return 0;
fail:
    log_err("cannot listen on %s (tls): %s: %s", l->text, what, strerror(errno));
    return -errno;
}

/* Every connection, listener and epoll set is a descriptor: make sure the soft limit allows the
 * configured pools so accept() does not fail with EMFILE under load. */
static void raise_nofile(const server_settings_t *cfg, unsigned nworkers)
{
    struct rlimit rl;
    rlim_t need = (rlim_t)nworkers * (cfg->nlisten * 2 + cfg->tcp_max_connections + 1 +
                                      cfg->tls.nlisten + cfg->tls.max_connections) +
                  64;
    if (getrlimit(RLIMIT_NOFILE, &rl) < 0 || rl.rlim_cur >= need)
        return;
    rl.rlim_cur = need < rl.rlim_max ? need : rl.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &rl) < 0 || rl.rlim_cur < need)
        log_warn("open file limit %llu is below the %llu descriptors the TCP pools may need",
                 (unsigned long long)rl.rlim_cur, (unsigned long long)need);
}

static int epoll_add(int epfd, int fd, uint64_t tag)
{
    struct epoll_event ev = {.events = EPOLLIN};
    ev.data.u64 = tag;
    return epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev);
}

static bool same_addr(const config_listen_t *a, const config_listen_t *b)
{
    return a->addrlen == b->addrlen && memcmp(&a->addr, &b->addr, a->addrlen) == 0;
}

/* A DoT address on a fixed port that is also a TCP (or another DoT) listen address: SO_REUSEPORT
 * would bind both and split the connections between DNS over TCP and over TLS. Logged. */
static bool tls_addrs_clash(const server_settings_t *cfg)
{
    for (size_t i = 0; i < cfg->tls.nlisten; i++) {
        const config_listen_t *t = &cfg->tls.listen[i];
        if (get_port(&t->addr) == 0)
            continue;
        for (size_t j = 0; j < cfg->nlisten; j++)
            if (cfg->listen[j].tcp && same_addr(t, &cfg->listen[j])) {
                log_err("tls: listen address %s is also a TCP listen address", t->text);
                return true;
            }
        for (size_t j = 0; j < i; j++)
            if (same_addr(t, &cfg->tls.listen[j])) {
                log_err("tls: listen address %s given twice", t->text);
                return true;
            }
    }
    return false;
}

/*
 * xdp: listen: attach the program to each interface (serving the settings' port) and open one XSK
 * socket per receive queue, spread over the workers in turn (queue q of the k-th socket overall
 * goes to worker k % workers: with as many workers as queues, one each). Each joins its worker's
 * epoll set. Runs before the privileges are dropped: AF_XDP needs CAP_NET_ADMIN, CAP_BPF (or
 * CAP_SYS_ADMIN) and CAP_NET_RAW at attach and socket creation only. 0 or negative (logged).
 */
static int xdp_setup(server_t *s)
{
    char err[256];
    unsigned k = 0;
    uint16_t port = s->set.xdp_port;
    for (size_t i = 0; i < s->set.nxdp; i++) {
        const char *ifname = s->set.xdp_ifaces[i];
        int r = xdp_attach(ifname, NULL, &port, 1, &s->xdp[i], err, sizeof(err));
        if (r < 0) {
            log_err("xdp: %s: %s", ifname, err);
            return r;
        }
        s->nxdp = i + 1;
        unsigned nq = xdp_queue_count(ifname);
        for (unsigned q = 0; q < nq; q++, k++) {
            worker_t *wk = &s->workers[k % s->nworkers];
            if (wk->nxsk >= WORKER_MAX_XSK) {
                log_err("xdp: %s: more than %d queues per worker: add workers", ifname,
                        WORKER_MAX_XSK);
                return TERN_ELIMIT;
            }
            xdp_sock_t *xs;
            if ((r = xdp_sock_open(s->xdp[i], q, &xs, err, sizeof(err))) < 0) {
                log_err("xdp: %s queue %u: %s", ifname, q, err);
                return r;
            }
            wk->xsk[wk->nxsk++] = xs;
            if (epoll_add(wk->epfd, xdp_sock_fd(xs), TAG_MAKE(TAG_XDP, 0, wk->nxsk - 1)) < 0) {
                log_err("xdp: epoll_ctl: %s", strerror(errno));
                return -errno;
            }
            log_info("xdp: %s queue %u: worker %u, %s mode, port %u", ifname, q, wk->id,
                     xdp_sock_zero_copy(xs) ? "zero-copy" : "copy", port);
        }
    }
    return 0;
}

/* Close every XSK socket, then detach the programs: nothing stays attached after a stop. */
static void xdp_teardown(server_t *s)
{
    for (unsigned w = 0; w < s->nworkers; w++) {
        worker_t *wk = &s->workers[w];
        for (unsigned k = 0; k < wk->nxsk; k++)
            xdp_sock_close(wk->xsk[k]);
        wk->nxsk = 0;
    }
    for (size_t i = 0; i < s->nxdp; i++)
        xdp_detach(s->xdp[i]);
    s->nxdp = 0;
}

static void server_free(server_t *s)
{
    if (s->workers) {
        xdp_teardown(s);
        for (unsigned w = 0; w < s->nworkers; w++) {
            worker_t *wk = &s->workers[w];
            for (size_t li = 0; li < s->nlisten; li++) {
                if (wk->udp_fd[li] >= 0)
                    close(wk->udp_fd[li]);
                if (wk->tcp_fd[li] >= 0)
                    close(wk->tcp_fd[li]);
            }
            for (size_t li = 0; li < s->ntls; li++)
                if (wk->tls_fd[li] >= 0)
                    close(wk->tls_fd[li]);
            tcp_pool_free(&wk->tcp);
            tcp_pool_free(&wk->tls);
            udp_state_free(wk->udp);
            if (wk->epfd >= 0)
                close(wk->epfd);
        }
        munmap(s->workers, sizeof(worker_t) * s->nworkers);
    }
    if (s->stop_fd >= 0)
        close(s->stop_fd);
    tls_server_free(s->tls);
    free(s);
}

/* Worker wk's epoll set, and its buffers and pools from its own arena (mem.h). 0, TERN_ENOMEM, or
 * another negative code (logged). */
static int worker_prepare(server_t *s, worker_t *wk)
{
    const server_settings_t *cfg = &s->set;
    if ((wk->epfd = epoll_create1(EPOLL_CLOEXEC)) < 0) {
        log_err("epoll_create1: %s", strerror(errno));
        return -errno;
    }
    unsigned home = mem_thread_arena();
    wk->arena = mem_arena_create();
    if (mem_thread_bind(wk->arena) < 0)
        wk->arena = MEM_NO_ARENA;
    bool ok = (wk->udp = udp_state_new()) != NULL &&
              tcp_pool_init(&wk->tcp, cfg->tcp_max_connections, cfg) == 0 &&
              (!s->tls || tcp_pool_init(&wk->tls, cfg->tls.max_connections, cfg) == 0);
    wk->tcp.lfd = wk->tcp_fd;
    wk->tcp.nlisten = s->nlisten;
    wk->tcp.local = s->local;
    if (s->tls) {
        tcp_pool_tls(&wk->tls, s->tls, &cfg->tls);
        wk->tls.lfd = wk->tls_fd;
        wk->tls.nlisten = s->ntls;
        wk->tls.local = s->tls_local;
    }
    if (wk->arena != MEM_NO_ARENA && mem_thread_bind(home) < 0)
        log_warn("server: cannot return to the main thread's arena");
    return ok ? 0 : TERN_ENOMEM;
}

server_t *server_bind(server_settings_t set, const answer_view_t *const *view)
{
    const server_settings_t *cfg = &set;
    if (cfg->nlisten == 0 || cfg->workers == 0) {
        log_err("server: no listen address or no workers configured");
        return NULL;
    }
    for (size_t i = 0; i < cfg->nlisten; i++)
        for (size_t j = 0; j < i; j++)
            if (get_port(&cfg->listen[i].addr) != 0 &&
                same_addr(&cfg->listen[i], &cfg->listen[j])) {
                /* SO_REUSEPORT would let us bind it twice and silently split the traffic */
                log_err("listen address %s given twice", cfg->listen[i].text);
                return NULL;
            }
    if (tls_addrs_clash(cfg))
        return NULL;

    server_t *s = calloc(1, sizeof(*s));
    if (!s)
        goto nomem;
    s->set = set;
    s->view = view;
    s->udp_ops = cfg->udp_mmsg ? &udp_ops_mmsg : &udp_ops_msg;
    s->nlisten = cfg->nlisten;
    s->nworkers = cfg->workers;
    s->stop_fd = -1;
    for (size_t li = 0; li < s->nlisten; li++)
        s->wildcard[li] = is_wildcard(&cfg->listen[li]);

    /* Anonymous pages, zero until touched: a worker's geo lookup cache and selection scratch
     * (answer.h, about 1.7 MiB) cost memory only as far as they are used. Page-aligned, so
     * every worker_t stays cache-line aligned. */
    void *wmem = mmap(NULL, sizeof(worker_t) * s->nworkers, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (wmem == MAP_FAILED)
        goto nomem;
    s->workers = wmem;
    for (unsigned w = 0; w < s->nworkers; w++) {
        worker_t *wk = &s->workers[w];
        wk->srv = s;
        wk->id = w;
        wk->epfd = -1;
        /* distinct, unpredictable-enough streams per worker and per start (rr/weighted picks) */
        answer_ctx_seed(&wk->actx, (uint64_t)time(NULL) << 20 ^ (uint64_t)getpid() << 8 ^ w);
        wk->actx.lim.id = w; /* its log ring of newly limited prefixes */
        for (size_t li = 0; li < CONFIG_MAX_LISTEN; li++)
            wk->udp_fd[li] = wk->tcp_fd[li] = wk->tls_fd[li] = -1;
    }
    if (cfg->tls.nlisten) {
        char err[512];
        if (!(s->tls = tls_server_new(&cfg->tls, err, sizeof(err)))) {
            log_err("%s", err);
            goto fail;
        }
        s->ntls = cfg->tls.nlisten;
    }
    if ((s->stop_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) < 0) {
        log_err("eventfd: %s", strerror(errno));
        goto fail;
    }
    raise_nofile(cfg, s->nworkers);
    for (unsigned w = 0; w < s->nworkers; w++) {
        int r = worker_prepare(s, &s->workers[w]);
        if (r == TERN_ENOMEM)
            goto nomem;
        if (r < 0)
            goto fail;
    }
    for (size_t li = 0; li < s->nlisten; li++)
        if (bind_listen(s, li) < 0)
            goto fail;
    for (size_t li = 0; li < s->ntls; li++)
        if (bind_tls(s, li) < 0)
            goto fail;
    if (s->set.nxdp && xdp_setup(s) < 0)
        goto fail;
    for (unsigned w = 0; w < s->nworkers; w++) {
        worker_t *wk = &s->workers[w];
        /* busy mode blocks on one UDP socket: only when the worker has exactly one (and no XSK
         * socket, whose frames would wait for busy mode's look at epoll) */
        wk->busy_li = -1;
        for (size_t li = 0; li < s->nlisten; li++)
            if (wk->udp_fd[li] >= 0)
                wk->busy_li = wk->busy_li == -1 ? (int)li : -2;
        if (wk->busy_li < 0 || wk->nxsk > 0)
            wk->busy_li = -1;
        if (epoll_add(wk->epfd, s->stop_fd, TAG_MAKE(TAG_STOP, 0, 0)) < 0)
            goto fail_epoll;
        for (size_t li = 0; li < s->nlisten; li++)
            if ((wk->udp_fd[li] >= 0 &&
                 epoll_add(wk->epfd, wk->udp_fd[li], TAG_MAKE(TAG_UDP, 0, li)) < 0) ||
                (wk->tcp_fd[li] >= 0 &&
                 epoll_add(wk->epfd, wk->tcp_fd[li], TAG_MAKE(TAG_LISTEN, 0, li)) < 0))
                goto fail_epoll;
        for (size_t li = 0; li < s->ntls; li++)
            if (epoll_add(wk->epfd, wk->tls_fd[li], TAG_MAKE(TAG_TLS_LISTEN, 0, li)) < 0)
                goto fail_epoll;
    }
    return s;

fail_epoll:
    log_err("epoll_ctl: %s", strerror(errno));
    goto fail;
nomem:
    log_err("server: out of memory");
fail:
    if (s)
        server_free(s);
    return NULL;
}

int server_run(server_t *s)
{
    for (unsigned w = 0; w < s->nworkers; w++) {
        worker_t *wk = &s->workers[w];
        int e = pthread_create(&wk->thread, NULL, worker_main, wk);
        if (e != 0) {
            log_err("cannot start worker %u: %s", w, strerror(e));
            return -e;
        }
        wk->started = true;
    }
    log_debug("server: %u workers, UDP via %s, allocator %s", s->nworkers, s->udp_ops->name,
              mem_allocator());
    return 0;
}

server_t *server_start(server_settings_t set, const answer_view_t *const *view)
{
    server_t *s = server_bind(set, view);
    if (s && server_run(s) < 0) {
        server_stop(s);
        return NULL;
    }
    return s;
}

uint16_t server_port(const server_t *s, size_t listen_index)
{
    return listen_index < s->nlisten ? s->port[listen_index] : 0;
}

uint16_t server_tls_port(const server_t *s, size_t listen_index)
{
    return listen_index < s->ntls ? s->tls_port[listen_index] : 0;
}

int server_tls_reload(server_t *s)
{
    if (!s || !s->tls)
        return 0;
    char err[512];
    int r = tls_server_reload(s->tls, err, sizeof(err));
    if (r < 0)
        log_err("%s; the certificate in use stays", err);
    else
        log_info("tls: certificate and key read again: new connections use them");
    return r;
}

const char *server_qtype_name(unsigned slot)
{
    static const char *const names[SERVER_QTYPE_COUNT] = {
        "a",     "ns", "cname",  "soa",  "ptr",   "mx",  "txt",  "aaaa", "srv",
        "naptr", "ds", "dnskey", "svcb", "https", "caa", "axfr", "any",  "other"};
    return slot < SERVER_QTYPE_COUNT ? names[slot] : "?";
}

const char *server_rcode_name(unsigned slot)
{
    static const char *const names[SERVER_RCODE_COUNT] = {
        "noerror", "formerr", "servfail", "nxdomain", "notimp", "refused", "badvers", "other"};
    return slot < SERVER_RCODE_COUNT ? names[slot] : "?";
}

/* server_stats_t is all uint64_t: added as an array, field by field, with relaxed loads */
enum { STATS_N = sizeof(server_stats_t) / sizeof(uint64_t) };
_Static_assert(sizeof(server_stats_t) % sizeof(uint64_t) == 0, "stats are u64 only");

static void stats_add(server_stats_t *out, const worker_t *w)
{
    uint64_t *o = (uint64_t *)out;
    const uint64_t *c = (const uint64_t *)&w->stats;
    for (size_t i = 0; i < STATS_N; i++)
        o[i] += __atomic_load_n(&c[i], __ATOMIC_RELAXED);
}

/* The datagrams the kernel dropped at worker w's UDP sockets (sk_drops: a full receive buffer),
 * read with SO_MEMINFO: one getsockopt per socket at a scrape, nothing on the query path. */
static uint64_t socket_drops(const server_t *s, const worker_t *w)
{
    uint64_t n = 0;
    for (size_t li = 0; li < s->set.nlisten; li++) {
        uint32_t mem[SK_MEMINFO_VARS];
        socklen_t len = sizeof(mem);
        if (w->udp_fd[li] >= 0 &&
            getsockopt(w->udp_fd[li], SOL_SOCKET, SO_MEMINFO, mem, &len) == 0 &&
            len > SK_MEMINFO_DROPS * sizeof(mem[0]))
            n += mem[SK_MEMINFO_DROPS];
    }
    return n;
}

void server_stats(const server_t *s, server_stats_t *out)
{
    memset(out, 0, sizeof(*out));
    for (unsigned w = 0; w < s->nworkers; w++) {
        stats_add(out, &s->workers[w]);
        out->udp_socket_drops += socket_drops(s, &s->workers[w]);
    }
}

void server_worker_stats(const server_t *s, unsigned w, server_stats_t *out)
{
    memset(out, 0, sizeof(*out));
    if (w < s->nworkers) {
        stats_add(out, &s->workers[w]);
        out->udp_socket_drops += socket_drops(s, &s->workers[w]);
    }
}

static const struct {
    const char *name;
    size_t off;
} XDP_DROPS[SERVER_XDP_DROP_COUNT] = {
    {"parse", offsetof(server_xdp_stats_t, not_ours)},
    {"answer", offsetof(server_xdp_stats_t, no_answer)},
    {"tx_full", offsetof(server_xdp_stats_t, tx_full)},
    {"fill_short", offsetof(server_xdp_stats_t, fill_short)},
    {"rx_ring_full", offsetof(server_xdp_stats_t, rx_ring_full)},
    {"fill_empty", offsetof(server_xdp_stats_t, fill_empty)},
    {"kernel_other", offsetof(server_xdp_stats_t, rx_dropped)},
    {"invalid", offsetof(server_xdp_stats_t, invalid)},
};

const char *server_xdp_drop_name(unsigned i)
{
    return i < SERVER_XDP_DROP_COUNT ? XDP_DROPS[i].name : "?";
}

uint64_t server_xdp_drop(const server_xdp_stats_t *x, unsigned i)
{
    uint64_t v = 0;
    if (i < SERVER_XDP_DROP_COUNT)
        memcpy(&v, (const char *)x + XDP_DROPS[i].off, sizeof(v));
    return v;
}

/* One socket's counters: its worker's (written by that worker alone: a torn read is off by one
 * batch at most) and the kernel's. */
static void xdp_sock_counters(const xdp_sock_t *xs, server_xdp_stats_t *c)
{
    const xdp_sock_stats_t *st = xdp_sock_stats(xs);
    c->sockets = 1;
    c->rx = __atomic_load_n(&st->rx, __ATOMIC_RELAXED);
    c->tx = __atomic_load_n(&st->tx, __ATOMIC_RELAXED);
    c->not_ours = __atomic_load_n(&st->not_ours, __ATOMIC_RELAXED);
    c->no_answer = __atomic_load_n(&st->no_answer, __ATOMIC_RELAXED);
    c->tx_full = __atomic_load_n(&st->tx_full, __ATOMIC_RELAXED);
    c->fill_short = __atomic_load_n(&st->fill_short, __ATOMIC_RELAXED);
    xdp_sock_kstats_t k;
    if (xdp_sock_kstats(xs, &k) < 0) {
        /* k is zeroed: the kernel's side reads 0 rather than failing the whole scrape */
    }
    c->rx_ring_full = k.rx_ring_full;
    c->fill_empty = k.fill_empty;
    c->rx_dropped = k.rx_dropped;
    c->invalid = k.invalid;
}

bool server_xdp_queue(const server_t *s, size_t i, server_xdp_queue_t *out)
{
    memset(out, 0, sizeof(*out));
    for (unsigned w = 0; w < s->nworkers; w++) {
        const worker_t *wk = &s->workers[w];
        if (i >= wk->nxsk) {
            i -= wk->nxsk;
            continue;
        }
        out->ifname = xdp_sock_ifname(wk->xsk[i]);
        out->queue = xdp_sock_queue(wk->xsk[i]);
        out->worker = w;
        xdp_sock_counters(wk->xsk[i], &out->c);
        return true;
    }
    return false;
}

void server_xdp_stats(const server_t *s, server_xdp_stats_t *out)
{
    memset(out, 0, sizeof(*out));
    server_xdp_queue_t q;
    for (size_t i = 0; server_xdp_queue(s, i, &q); i++) {
        out->sockets += q.c.sockets;
        out->rx += q.c.rx;
        out->tx += q.c.tx;
        out->not_ours += q.c.not_ours;
        out->no_answer += q.c.no_answer;
        out->tx_full += q.c.tx_full;
        out->fill_short += q.c.fill_short;
        out->rx_ring_full += q.c.rx_ring_full;
        out->fill_empty += q.c.fill_empty;
        out->rx_dropped += q.c.rx_dropped;
        out->invalid += q.c.invalid;
    }
}

void server_set_limits(server_t *s, limit_shared_t *limits)
{
    s->limits = limits;
}

void server_set_handoff(server_t *s, const server_handoff_t *h)
{
    if (h)
        s->handoff = *h;
    else
        memset(&s->handoff, 0, sizeof(s->handoff));
}

void server_set_qlog(server_t *s, qlog_t *q)
{
    s->qlog = q;
    for (unsigned w = 0; w < s->nworkers; w++)
        s->workers[w].qring = q ? qlog_ring(q, w) : NULL;
}

bool server_qlog_stats(const server_t *s, qlog_stats_t *out)
{
    memset(out, 0, sizeof(*out));
    if (!s->qlog)
        return false;
    qlog_stats(s->qlog, out);
    return true;
}

unsigned server_workers(const server_t *s)
{
    return s->nworkers;
}

void server_dnssec_stats(const server_t *s, dnssec_worker_stats_t *out)
{
    memset(out, 0, sizeof(*out));
    for (unsigned w = 0; w < s->nworkers; w++) {
        /* set and cleared by the worker itself; its counters are written by it alone */
        const dnssec_worker_t *dw = __atomic_load_n(&s->workers[w].actx.dnssec, __ATOMIC_ACQUIRE);
        if (!dw)
            continue;
        dnssec_worker_stats_t one;
        dnssec_worker_stats(dw, &one);
        out->hits += one.hits;
        out->misses += one.misses;
        out->sigs += one.sigs;
        out->sign_ns += one.sign_ns;
        out->fails += one.fails;
    }
}

int server_worker_allocs(const server_t *s, unsigned w, uint64_t *alloc, uint64_t *dealloc)
{
    if (w >= s->nworkers)
        return TERN_EINVAL;
    const uint64_t *a = __atomic_load_n(&s->workers[w].allocp, __ATOMIC_ACQUIRE);
    const uint64_t *d = __atomic_load_n(&s->workers[w].deallocp, __ATOMIC_ACQUIRE);
    if (!a || !d)
        return TERN_ENOTSUP;
    *alloc = __atomic_load_n(a, __ATOMIC_RELAXED);
    *dealloc = __atomic_load_n(d, __ATOMIC_RELAXED);
    return 0;
}

void server_stop(server_t *s)
{
    if (!s)
        return;
    /* Level-triggered and never read: every worker sees it, whenever it next waits. */
    uint64_t one = 1;
    if (write(s->stop_fd, &one, sizeof(one)) != sizeof(one))
        log_err("server_stop: eventfd write: %s", strerror(errno));
    for (unsigned w = 0; w < s->nworkers; w++)
        if (s->workers[w].started)
            pthread_join(s->workers[w].thread, NULL);
    server_free(s);
}
