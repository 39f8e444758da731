/*
 * test_server.c — real UDP and TCP queries over loopback against server_start().
 *
 * Each test starts its own server on port 0 (ephemeral, see server_port()) with a zone table
 * loaded from tests/data/net/example.zone, and talks to it with plain sockets and hand-built
 * queries. Every wait is bounded by poll() timeouts.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "test_util.h"

#include "tern/common/err.h"
#include "tern/common/log.h"
#include "tern/common/rcu.h"
#include "tern/conf/config.h"
#include "tern/dnssec/dnssec_key.h"
#include "tern/dnssec/dnssec_sign.h"
#include "tern/dnssec/dnssec_zone.h"
#include "tern/limit/limit.h"
#include "tern/net/server.h"
#include "tern/zone/zone_file.h"
#include "tern/zone/zone_table.h"

/* How long a reply may take before the test fails: generous for a loaded CI box under ASan. */
#define REPLY_TIMEOUT_MS 3000

typedef struct fixture {
    config_t cfg;
    zone_table_t *table;
    answer_view_t view;
    const answer_view_t *published; /* what the workers read (RCU) */
    server_t *srv;
} fixture_t;

static fixture_t fx;

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static zone_table_t *load_table_path(const char *path)
{
    char err[512] = "";
    zone_t *z = NULL;
    int r = zone_file_load("example.test", path, &z, err, sizeof(err));
    if (r < 0)
        fail_msg("zone_file_load: %s", err);
    zone_table_t *t = zone_table_new();
    assert_non_null(t);
    assert_int_equal(zone_table_add(t, z), 0);
    assert_int_equal(zone_table_freeze(t), 0);
    return t;
}

static zone_table_t *load_table_from(const char *file)
{
    char path[512];
    const char *dir = getenv("TERN_TEST_DATA");
    snprintf(path, sizeof(path), "%s/net/%s", dir ? dir : "tests/data", file);
    return load_table_path(path);
}

static zone_table_t *load_table(void)
{
    return load_table_from("example.zone");
}

/* The test default config with the given listen addresses, not started yet: a test may change
 * fx.cfg, then launch(). */
static void setup(const char *const *listen, size_t n, unsigned workers, unsigned max_conn,
                  bool mmsg)
{
    config_init(&fx.cfg);
    for (size_t i = 0; i < n; i++)
        assert_int_equal(config_add_listen(&fx.cfg, listen[i]), 0);
    fx.cfg.workers = workers;
    fx.cfg.tcp_idle_timeout = 1;
    fx.cfg.tcp_max_connections = max_conn;
    fx.cfg.udp_mmsg = mmsg;
}

static void launch(void)
{
    if (!fx.table)
        fx.table = load_table();
    fx.view = (answer_view_t){.table = fx.table, .cfg = {.edns_max_udp = 1232}};
    fx.published = &fx.view;
    fx.srv = server_start(config_server_settings(&fx.cfg), &fx.published);
    assert_non_null(fx.srv);
}

/* Start a server with the given listen addresses; the rest of the config is the test default. */
static void start(const char *const *listen, size_t n, unsigned workers, unsigned max_conn,
                  bool mmsg)
{
    setup(listen, n, workers, max_conn, mmsg);
    launch();
}

static void start1(const char *listen)
{
    start(&listen, 1, 2, 8, true);
}

static void stop(void)
{
    server_stop(fx.srv);
    fx.srv = NULL;
    zone_table_free(fx.table);
    fx.table = NULL;
    config_free(&fx.cfg);
}

/* A query for name (dotted, no trailing dot) and type, no EDNS. Returns its length. */
static size_t make_query(uint8_t *buf, uint16_t id, const char *name, uint16_t qtype)
{
    size_t len = 0;
    const uint8_t hdr[12] = {id >> 8, id & 0xff, 0x00, 0x00, 0, 1, 0, 0, 0, 0, 0, 0};
    memcpy(buf, hdr, sizeof(hdr));
    len = sizeof(hdr);
    const char *p = name;
    while (*p) {
        const char *dot = strchr(p, '.');
        size_t l = dot ? (size_t)(dot - p) : strlen(p);
        buf[len++] = (uint8_t)l;
        memcpy(buf + len, p, l);
        len += l;
        p += l + (dot ? 1 : 0);
    }
    buf[len++] = 0;
    buf[len++] = (uint8_t)(qtype >> 8);
    buf[len++] = (uint8_t)qtype;
    buf[len++] = 0;
    buf[len++] = 1; /* IN */
    return len;
}

/* Check a response to make_query(id, "www.example.test", A): NOERROR, AA, one A 192.0.2.1. */
static void check_www_answer(const uint8_t *r, size_t len, uint16_t id)
{
    assert_true(len >= 12 + 22 + 16);
    assert_int_equal(r[0] << 8 | r[1], id);
    assert_true(r[2] & 0x80);              /* QR */
    assert_true(r[2] & 0x04);              /* AA */
    assert_int_equal(r[3] & 0x0f, 0);      /* NOERROR */
    assert_int_equal(r[6] << 8 | r[7], 1); /* ANCOUNT */
    static const uint8_t addr[4] = {192, 0, 2, 1};
    /* the answer is the only record: its RDATA ends the message */
    assert_memory_equal(r + len - 4, addr, 4);
}

static ssize_t recv_timeout(int fd, uint8_t *buf, size_t cap, int timeout_ms)
{
    struct pollfd p = {.fd = fd, .events = POLLIN};
    if (poll(&p, 1, timeout_ms) != 1)
        return -2;
    return recv(fd, buf, cap, 0);
}

static int udp_client(int family, const char *addr, uint16_t port)
{
    int fd = socket(family, SOCK_DGRAM, 0);
    assert_true(fd >= 0);
    struct sockaddr_storage ss;
    socklen_t len = tu_sockaddr(&ss, family, addr, port);
    /* connected: a reply from any other source address is filtered out by the kernel */
    assert_int_equal(connect(fd, (struct sockaddr *)&ss, len), 0);
    return fd;
}

/* A TCP client of 127.0.0.1 port: from source address src (NULL: any; every 127.0.0.0/8 address
 * is local), with a receive buffer of rcvbuf bytes (0: the default). */
static int tcp_client_opt(uint16_t port, const char *src, int rcvbuf)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    if (src) {
        struct sockaddr_in from = {.sin_family = AF_INET};
        assert_int_equal(inet_pton(AF_INET, src, &from.sin_addr), 1);
        assert_int_equal(bind(fd, (struct sockaddr *)&from, sizeof(from)), 0);
    }
    if (rcvbuf)
        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof(rcvbuf));
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    return fd;
}

static int tcp_client(uint16_t port)
{
    return tcp_client_opt(port, NULL, 0);
}

static void send_all(int fd, const void *buf, size_t len)
{
    assert_int_equal(send(fd, buf, len, MSG_NOSIGNAL), (ssize_t)len);
}

/* Read exactly len bytes (bounded by REPLY_TIMEOUT_MS per chunk). */
static void read_exact(int fd, uint8_t *buf, size_t len)
{
    size_t got = 0;
    while (got < len) {
        ssize_t n = recv_timeout(fd, buf + got, len - got, REPLY_TIMEOUT_MS);
        if (n <= 0)
            fail_msg("TCP read: got %zu of %zu bytes (r=%zd)", got, len, n);
        got += (size_t)n;
    }
}

/* One length-prefixed TCP response into buf; returns the message length. */
static size_t read_tcp_msg(int fd, uint8_t *buf, size_t cap)
{
    uint8_t lp[2];
    read_exact(fd, lp, 2);
    size_t len = (size_t)lp[0] << 8 | lp[1];
    assert_true(len <= cap);
    read_exact(fd, buf, len);
    return len;
}

static void udp_roundtrip(int family, const char *addr, uint16_t port, uint16_t id)
{
    uint8_t q[512], r[2048];
    int fd = udp_client(family, addr, port);
    size_t qlen = make_query(q, id, "www.example.test", 1);
    send_all(fd, q, qlen);
    ssize_t n = recv_timeout(fd, r, sizeof(r), REPLY_TIMEOUT_MS);
    if (n <= 0)
        fail_msg("no UDP reply from %s port %u", addr, port);
    check_www_answer(r, (size_t)n, id);
    close(fd);
}

static void test_udp_v4(void **state)
{
    (void)state;
    start1("127.0.0.1:0");
    uint16_t port = server_port(fx.srv, 0);
    assert_true(port != 0);
    for (uint16_t id = 1; id <= 4; id++)
        udp_roundtrip(AF_INET, "127.0.0.1", port, id);
    server_stats_t st;
    /* the worker counts a send after the kernel took it: the reply may be here first */
    for (int i = 0; i < 100; i++) {
        server_stats(fx.srv, &st);
        if (st.udp_sent == 4)
            break;
        usleep(10 * 1000);
    }
    assert_int_equal(st.udp_received, 4);
    assert_int_equal(st.udp_sent, 4);
    stop();
}

/* Whether fd is an IPv4 UDP socket bound to port (a worker's, when port is the server's). */
static bool udp_socket_on(int fd, uint16_t port)
{
    int type = 0;
    socklen_t l = sizeof(type);
    struct sockaddr_in sa;
    socklen_t sl = sizeof(sa);
    return getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &l) == 0 && type == SOCK_DGRAM &&
           getsockname(fd, (struct sockaddr *)&sa, &sl) == 0 && sa.sin_family == AF_INET &&
           ntohs(sa.sin_port) == port;
}

/* Two SOL_SOCKET options of every UDP socket on port, checked against want_a and want_b;
 * returns how many sockets it saw. */
static unsigned check_udp_opts(uint16_t port, int name_a, int want_a, int name_b, int want_b)
{
    unsigned seen = 0;
    for (int fd = 3; fd < 4096; fd++) {
        int a = -1, b = -1;
        if (!udp_socket_on(fd, port))
            continue;
        socklen_t l = sizeof(a);
        assert_int_equal(getsockopt(fd, SOL_SOCKET, name_a, &a, &l), 0);
        l = sizeof(b);
        assert_int_equal(getsockopt(fd, SOL_SOCKET, name_b, &b, &l), 0);
        assert_int_equal(a, want_a);
        assert_int_equal(b, want_b);
        seen++;
    }
    return seen;
}

/* The UDP sockets bound to port: their busy-poll options as the kernel holds them, asserted
 * equal to us and prefer on each (SO_BUSY_POLL_BUDGET cannot be read back: the kernel has no
 * getsockopt for it; its setsockopt failing fails the start). Returns the sockets looked at. */
static unsigned check_busy_poll(uint16_t port, int us, int prefer)
{
    return check_udp_opts(port, SO_BUSY_POLL, us, SO_PREFER_BUSY_POLL, prefer);
}

/* udp_busy_poll_us: every worker's UDP socket carries the busy-poll options, and queries are
 * answered as before. The kernel wants CAP_NET_ADMIN for them: as another user, ternd must
 * refuse to start (server_start() fails, the log names the option), never run without them. */
static void test_udp_busy_poll(void **state)
{
    (void)state;
    static const char *const listen[] = {"127.0.0.1:0"};
    setup(listen, 1, 2, 8, true);
    fx.cfg.udp_busy_poll_us = 50;
    fx.cfg.udp_busy_poll_budget = 32;
    fx.cfg.udp_prefer_busy_poll = true;
    if (geteuid() != 0) {
        fx.table = load_table();
        fx.view = (answer_view_t){.table = fx.table, .cfg = {.edns_max_udp = 1232}};
        fx.published = &fx.view;
        assert_null(server_start(config_server_settings(&fx.cfg), &fx.published));
        zone_table_free(fx.table);
        fx.table = NULL;
        config_free(&fx.cfg);
        return;
    }
    launch();
    uint16_t port = server_port(fx.srv, 0);
    assert_int_equal(check_busy_poll(port, 50, 1), 2); /* one per worker */
    for (uint16_t id = 1; id <= 20; id++)
        udp_roundtrip(AF_INET, "127.0.0.1", port, id);
    stop();
    /* off (the default): the kernel's own values */
    start1("127.0.0.1:0");
    port = server_port(fx.srv, 0);
    assert_int_equal(check_busy_poll(port, 0, 0), 2);
    stop();
}

/* SO_RCVBUF and SO_SNDBUF of every UDP socket on port (the kernel reports twice what was set). */
static unsigned check_sockbuf(uint16_t port, int rcv, int snd)
{
    return check_udp_opts(port, SO_RCVBUF, rcv, SO_SNDBUF, snd);
}

/* A value of /proc/sys/net/core (rmem_max and the like). */
static int core_sysctl(const char *name)
{
    char path[128];
    snprintf(path, sizeof(path), "/proc/sys/net/core/%s", name);
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    int v = -1;
    assert_int_equal(fscanf(f, "%d", &v), 1);
    fclose(f);
    return v;
}

/* udp_rcvbuf and udp_sndbuf size every worker's UDP socket: as root exactly (SO_*BUFFORCE),
 * otherwise capped at rmem_max / wmem_max; 0 leaves the kernel's default (rmem_default and
 * wmem_default). Queries are answered either way. */
static void test_udp_sockbuf(void **state)
{
    (void)state;
    static const char *const listen[] = {"127.0.0.1:0"};
    const int rcv = 300000;
    setup(listen, 1, 2, 8, true);
    fx.cfg.udp_rcvbuf = (unsigned)rcv;
    fx.cfg.udp_sndbuf = 0;
    launch();
    uint16_t port = server_port(fx.srv, 0);
    int want =
        geteuid() == 0 ? rcv : (rcv < core_sysctl("rmem_max") ? rcv : core_sysctl("rmem_max"));
    assert_int_equal(check_sockbuf(port, 2 * want, core_sysctl("wmem_default")), 2);
    for (uint16_t id = 1; id <= 10; id++)
        udp_roundtrip(AF_INET, "127.0.0.1", port, id);
    stop();
}

/* Every datagram sent is either seen by the worker or counted as a kernel drop at its socket
 * (udp_socket_drops, SO_MEMINFO's sk_drops): 50,000 queries blasted at one worker from a client
 * that reads nothing back. On loopback nothing is lost anywhere else, so once the worker has
 * drained its socket the two add up to exactly what was sent, however many the buffer dropped. */
static void test_udp_socket_drops(void **state)
{
    (void)state;
    static const char *const listen[] = {"127.0.0.1:0"};
    start(listen, 1, 1, 8, true);
    uint16_t port = server_port(fx.srv, 0);
    int fd = udp_client(AF_INET, "127.0.0.1", port);
    uint8_t q[512];
    size_t qlen = make_query(q, 7, "www.example.test", 1);
    const uint64_t n = 50000;
    for (uint64_t i = 0; i < n; i++)
        send_all(fd, q, qlen);
    server_stats_t st;
    for (int i = 0; i < 1000; i++) {
        server_stats(fx.srv, &st);
        if (st.udp_received + st.udp_socket_drops >= n)
            break;
        usleep(10 * 1000);
    }
    print_message("%" PRIu64 " received, %" PRIu64 " dropped at the socket\n", st.udp_received,
                  st.udp_socket_drops);
    assert_int_equal(st.udp_received + st.udp_socket_drops, n);
    server_stats_t w0;
    server_worker_stats(fx.srv, 0, &w0);
    assert_int_equal(w0.udp_socket_drops, st.udp_socket_drops); /* one worker: all its own */
    close(fd);
    stop();
}

/* udp_steering: 400 queries from one client socket (one 4-tuple) over two workers. The hash
 * gives them all to one worker; random spreads them (each worker between 100 and 300: outside
 * that a fair coin fails with probability below 1e-20). */
static void steered(unsigned mode, uint64_t *w0, uint64_t *w1)
{
    static const char *const listen[] = {"127.0.0.1:0"};
    setup(listen, 1, 2, 8, true);
    fx.cfg.udp_steering = mode;
    launch();
    uint16_t port = server_port(fx.srv, 0);
    int fd = udp_client(AF_INET, "127.0.0.1", port);
    uint8_t q[512], r[2048];
    for (uint16_t id = 0; id < 400; id++) {
        size_t qlen = make_query(q, id, "www.example.test", 1);
        send_all(fd, q, qlen);
        if (recv_timeout(fd, r, sizeof(r), REPLY_TIMEOUT_MS) <= 0)
            fail_msg("reply %u missing", id);
    }
    close(fd);
    server_stats_t a, b;
    server_worker_stats(fx.srv, 0, &a);
    server_worker_stats(fx.srv, 1, &b);
    *w0 = a.queries_udp;
    *w1 = b.queries_udp;
    stop();
}

static void test_udp_steering(void **state)
{
    (void)state;
    uint64_t a, b;
    steered(CONFIG_UDP_STEER_HASH, &a, &b);
    assert_int_equal(a + b, 400);
    assert_true(a == 400 || b == 400);
    steered(CONFIG_UDP_STEER_RANDOM, &a, &b);
    assert_int_equal(a + b, 400);
    assert_true(a >= 100 && a <= 300);
    /* cpu: every datagram answered (which worker depends on the CPU this test sends from) */
    steered(CONFIG_UDP_STEER_CPU, &a, &b);
    assert_int_equal(a + b, 400);
}

/* A burst larger than one recvmmsg batch: every query answered, none lost. Both I/O paths. */
static void udp_burst(bool mmsg)
{
    static const char *const listen[] = {"127.0.0.1:0"};
    start(listen, 1, 1, 8, mmsg);
    uint16_t port = server_port(fx.srv, 0);
    int fd = udp_client(AF_INET, "127.0.0.1", port);
    enum { BURST = 100 };
    uint8_t q[512], r[2048];
    bool seen[BURST] = {false};
    for (uint16_t id = 0; id < BURST; id++) {
        size_t qlen = make_query(q, id, "www.example.test", 1);
        send_all(fd, q, qlen);
    }
    for (int i = 0; i < BURST; i++) {
        ssize_t n = recv_timeout(fd, r, sizeof(r), REPLY_TIMEOUT_MS);
        if (n <= 0)
            fail_msg("reply %d of %d missing", i, BURST);
        uint16_t id = (uint16_t)(r[0] << 8 | r[1]);
        assert_true(id < BURST);
        assert_false(seen[id]);
        seen[id] = true;
        check_www_answer(r, (size_t)n, id);
    }
    close(fd);
    stop();
}

static void test_udp_burst_mmsg(void **state)
{
    (void)state;
    udp_burst(true);
}

static void test_udp_burst_fallback(void **state)
{
    (void)state;
    udp_burst(false);
}

/* A query that gets no answer (QR set) is dropped, and the worker goes on. */
static void test_udp_drop(void **state)
{
    (void)state;
    start1("127.0.0.1:0");
    uint16_t port = server_port(fx.srv, 0);
    int fd = udp_client(AF_INET, "127.0.0.1", port);
    uint8_t q[512], r[2048];
    size_t qlen = make_query(q, 7, "www.example.test", 1);
    q[2] |= 0x80;
    send_all(fd, q, qlen);
    assert_int_equal(recv_timeout(fd, r, sizeof(r), 300), -2);
    close(fd);
    udp_roundtrip(AF_INET, "127.0.0.1", port, 8);
    server_stats_t st;
    server_stats(fx.srv, &st);
    assert_int_equal(st.udp_dropped, 1);
    stop();
}

static void test_udp_v6(void **state)
{
    (void)state;
    int probe = socket(AF_INET6, SOCK_DGRAM, 0);
    struct sockaddr_in6 sa = {.sin6_family = AF_INET6, .sin6_addr = IN6ADDR_LOOPBACK_INIT};
    if (probe < 0 || bind(probe, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
        if (probe >= 0)
            close(probe);
        skip(); /* no IPv6 loopback in this sandbox */
    }
    close(probe);
    static const char *const listen[] = {"[::1]:0", "127.0.0.1:0"};
    start(listen, 2, 2, 8, true);
    assert_true(server_port(fx.srv, 0) != 0);
    assert_true(server_port(fx.srv, 1) != 0);
    udp_roundtrip(AF_INET6, "::1", server_port(fx.srv, 0), 42);
    udp_roundtrip(AF_INET, "127.0.0.1", server_port(fx.srv, 1), 43);
    stop();
}

/* Bound to 0.0.0.0: a query sent to 127.0.0.2 must be answered from 127.0.0.2 (IP_PKTINFO),
 * else the connected client socket would never see it (routing alone picks 127.0.0.1). */
static void test_udp_wildcard_pktinfo(void **state)
{
    (void)state;
    start1("0.0.0.0:0");
    uint16_t port = server_port(fx.srv, 0);
    udp_roundtrip(AF_INET, "127.0.0.2", port, 99);
    udp_roundtrip(AF_INET, "127.0.0.1", port, 100);
    stop();
}

/* Two queries in one write; both answers come back, in order. */
static void test_tcp_pipelined(void **state)
{
    (void)state;
    start1("127.0.0.1:0");
    int fd = tcp_client(server_port(fx.srv, 0));
    uint8_t buf[1024], r[65535];
    size_t l1 = make_query(buf + 2, 0x1111, "www.example.test", 1);
    buf[0] = 0;
    buf[1] = (uint8_t)l1;
    size_t off = 2 + l1;
    size_t l2 = make_query(buf + off + 2, 0x2222, "www.example.test", 1);
    buf[off] = 0;
    buf[off + 1] = (uint8_t)l2;
    send_all(fd, buf, off + 2 + l2);
    size_t n = read_tcp_msg(fd, r, sizeof(r));
    check_www_answer(r, n, 0x1111);
    n = read_tcp_msg(fd, r, sizeof(r));
    check_www_answer(r, n, 0x2222);
    /* and the connection stays usable for a third */
    send_all(fd, buf, 2 + l1);
    n = read_tcp_msg(fd, r, sizeof(r));
    check_www_answer(r, n, 0x1111);
    close(fd);
    server_stats_t st;
    server_stats(fx.srv, &st);
    assert_int_equal(st.tcp_queries, 3);
    assert_int_equal(st.tcp_accepted, 1);
    stop();
}

/* A message split across writes (even inside the length prefix) is reassembled. */
static void test_tcp_split(void **state)
{
    (void)state;
    start1("127.0.0.1:0");
    int fd = tcp_client(server_port(fx.srv, 0));
    uint8_t buf[1024], r[65535];
    size_t l = make_query(buf + 2, 0x3333, "www.example.test", 1);
    buf[0] = 0;
    buf[1] = (uint8_t)l;
    /* first a whole message, so the split one is the second on the connection */
    send_all(fd, buf, 2 + l);
    check_www_answer(r, read_tcp_msg(fd, r, sizeof(r)), 0x3333);
    buf[3] = 0x44; /* id 0x3344 */
    const size_t cuts[] = {1, 2, 9, 2 + l};
    size_t from = 0;
    for (size_t i = 0; i < sizeof(cuts) / sizeof(cuts[0]); i++) {
        send_all(fd, buf + from, cuts[i] - from);
        from = cuts[i];
        if (i + 1 < sizeof(cuts) / sizeof(cuts[0])) {
            /* nothing may come back for a partial message */
            assert_int_equal(recv_timeout(fd, r, sizeof(r), 100), -2);
        }
    }
    check_www_answer(r, read_tcp_msg(fd, r, sizeof(r)), 0x3344);
    close(fd);
    stop();
}

/* Waits for the server to close fd; returns how long it took in ms, or -1 on timeout. */
static int64_t wait_closed(int fd, int timeout_ms);

static void check_close_accounting(const server_stats_t *st);

/* The client sends its queries and half-closes: the answers still come, then the server closes. */
static void test_tcp_half_close(void **state)
{
    (void)state;
    start1("127.0.0.1:0");
    int fd = tcp_client(server_port(fx.srv, 0));
    uint8_t buf[1024], r[65535];
    size_t l = make_query(buf + 2, 0x5151, "www.example.test", 1);
    buf[0] = 0;
    buf[1] = (uint8_t)l;
    memcpy(buf + 2 + l, buf, 2 + l);
    buf[2 + l + 3] = 0x52; /* second id 0x5152 */
    send_all(fd, buf, 2 * (2 + l));
    assert_int_equal(shutdown(fd, SHUT_WR), 0);
    check_www_answer(r, read_tcp_msg(fd, r, sizeof(r)), 0x5151);
    check_www_answer(r, read_tcp_msg(fd, r, sizeof(r)), 0x5152);
    int64_t ms = wait_closed(fd, 2000);
    assert_true(ms >= 0 && ms < 800);
    close(fd);
    stop();
}

/* Waits for the server to close fd; returns how long it took in ms, or -1 on timeout. */
static int64_t wait_closed(int fd, int timeout_ms)
{
    int64_t t0 = now_ms();
    uint8_t r[512];
    for (int round = 0; round < 100; round++) {
        ssize_t n = recv_timeout(fd, r, sizeof(r), timeout_ms);
        if (n == 0 || (n < 0 && n != -2))
            return now_ms() - t0;
        if (n == -2)
            return -1;
    }
    return -1;
}

static void test_tcp_idle_timeout(void **state)
{
    (void)state;
    start1("127.0.0.1:0");
    int fd = tcp_client(server_port(fx.srv, 0));
    int64_t ms = wait_closed(fd, 4000);
    assert_true(ms >= 800); /* tcp_idle_timeout is 1 s */
    assert_true(ms <= 2500);
    close(fd);

    /* a trickle of bytes that never completes a message does not keep it open */
    fd = tcp_client(server_port(fx.srv, 0));
    send_all(fd, "\x00\x20", 2);
    usleep(500 * 1000);
    send_all(fd, "\x12", 1);
    ms = wait_closed(fd, 4000);
    assert_true(ms >= 0);
    assert_true(ms <= 1000);
    close(fd);

    /* a length prefix, then nothing: closed at the idle timeout like any stall */
    fd = tcp_client(server_port(fx.srv, 0));
    send_all(fd, "\x00\x20", 2);
    ms = wait_closed(fd, 4000);
    assert_true(ms >= 800);
    assert_true(ms <= 2500);
    close(fd);
    server_stats_t st;
    server_stats(fx.srv, &st);
    assert_int_equal(st.tcp_closed_idle, 3);
    check_close_accounting(&st);
    stop();
}

static void test_tcp_zero_length_closes(void **state)
{
    (void)state;
    start1("127.0.0.1:0");
    int fd = tcp_client(server_port(fx.srv, 0));
    send_all(fd, "\x00\x00", 2);
    int64_t ms = wait_closed(fd, 2000);
    assert_true(ms >= 0 && ms < 800); /* closed at once, not by the idle timeout */
    close(fd);
    /* a message answer_query() drops (QR set) also closes */
    fd = tcp_client(server_port(fx.srv, 0));
    uint8_t buf[512];
    size_t l = make_query(buf + 2, 5, "www.example.test", 1);
    buf[0] = 0;
    buf[1] = (uint8_t)l;
    buf[4] |= 0x80;
    send_all(fd, buf, 2 + l);
    ms = wait_closed(fd, 2000);
    assert_true(ms >= 0 && ms < 800);
    close(fd);
    server_stats_t st;
    server_stats(fx.srv, &st);
    assert_int_equal(st.tcp_closed_bad, 2);
    stop();
}

/* One www query with id on fd, and its answer. */
static void tcp_www(int fd, uint16_t id)
{
    uint8_t buf[512], r[65535];
    size_t l = make_query(buf + 2, id, "www.example.test", 1);
    buf[0] = 0;
    buf[1] = (uint8_t)l;
    send_all(fd, buf, 2 + l);
    check_www_answer(r, read_tcp_msg(fd, r, sizeof(r)), id);
}

/* One worker with a pool of slots connections and an idle timeout of 5 s (so a close within
 * the tests' waits is an admission, not a timeout). Returns the TCP port. */
static uint16_t start_pool(unsigned slots)
{
    static const char *const listen[] = {"127.0.0.1:0"};
    setup(listen, 1, 1, slots, true);
    fx.cfg.tcp_idle_timeout = 5;
    launch();
    return server_port(fx.srv, 0);
}

/* One worker, one connection slot (idle timeout 5 s, so every close below is an admission):
 *   - an idle connection (answered, silent) gives its slot to a newcomer at once;
 *   - a connection in the middle of a query (half a message read) keeps it: the newcomer is
 *     closed (tcp_refused);
 *   - once that one has made no progress for TCP_EVICT_QUIET_MS, it is stalled and gives way. */
static void test_tcp_pool_full(void **state)
{
    (void)state;
    uint16_t port = start_pool(1);
    int a = tcp_client(port);
    tcp_www(a, 0x0a0a); /* a is in the pool, answered, and idle */
    int b = tcp_client(port);
    assert_true(wait_closed(a, 3000) >= 0); /* made room for b, long before the idle timeout */
    close(a);
    tcp_www(b, 0x0b0b);
    /* b asks once more and sends half of a third query with it: once the second is answered the
     * half is in the server's buffer, and b is busy */
    uint8_t buf[1024], r[65535];
    size_t l = make_query(buf + 2, 0x0b0c, "www.example.test", 1);
    buf[0] = 0;
    buf[1] = (uint8_t)l;
    memcpy(buf + 2 + l, buf, 2 + l / 2);
    send_all(b, buf, 2 + l + 2 + l / 2);
    check_www_answer(r, read_tcp_msg(b, r, sizeof(r)), 0x0b0c);
    int c = tcp_client(port);
    assert_true(wait_closed(c, 3000) >= 0); /* refused: b is mid-query */
    close(c);
    /* b made no progress since: after TCP_EVICT_QUIET_MS it is stalled, and a newcomer gets in */
    struct timespec quiet = {TCP_EVICT_QUIET_MS / 1000,
                             (TCP_EVICT_QUIET_MS % 1000) * 1000000L + 100000000L};
    nanosleep(&quiet, NULL);
    int d = tcp_client(port);
    assert_true(wait_closed(b, 3000) >= 0);
    close(b);
    tcp_www(d, 0x0d0d);
    close(d);
    server_stats_t st;
    server_stats(fx.srv, &st);
    assert_int_equal(st.tcp_refused, 1);
    assert_int_equal(st.tcp_evicted, 2);
    stop();
}

/* A full pool takes the slot from the client prefix holding the most idle connections, not from
 * the connection idle longest: 127.0.0.2 holds two, 127.0.0.3 one (the quietest); a newcomer
 * from 127.0.0.4 closes the older of 127.0.0.2's. */
static void test_tcp_pool_full_fair(void **state)
{
    (void)state;
    uint16_t port = start_pool(3);
    int x = tcp_client_opt(port, "127.0.0.3", 0);
    tcp_www(x, 0x0301);
    int a1 = tcp_client_opt(port, "127.0.0.2", 0);
    tcp_www(a1, 0x0201);
    int a2 = tcp_client_opt(port, "127.0.0.2", 0);
    tcp_www(a2, 0x0202);
    int n = tcp_client_opt(port, "127.0.0.4", 0);
    assert_true(wait_closed(a1, 3000) >= 0);
    close(a1);
    tcp_www(n, 0x0401);
    tcp_www(x, 0x0302); /* the quietest connection, from a prefix holding one, is still there */
    tcp_www(a2, 0x0203);
    close(x);
    close(a2);
    close(n);
    server_stats_t st;
    server_stats(fx.srv, &st);
    assert_int_equal(st.tcp_evicted, 1);
    assert_int_equal(st.tcp_refused, 0);
    stop();
}

/* A TCP client whose receive buffer is small, so that answers it does not read back up into the
 * server quickly. */
static int tcp_client_small_rcvbuf(uint16_t port)
{
    return tcp_client_opt(port, NULL, 4096);
}

/* count length-prefixed queries for big.example.test TXT (~250-byte answers), ids from first. */
static size_t make_pipeline(uint8_t *buf, unsigned count, uint16_t first)
{
    size_t len = 0;
    for (unsigned i = 0; i < count; i++) {
        size_t l = make_query(buf + len + 2, (uint16_t)(first + i), "big.example.test", 16);
        buf[len] = 0;
        buf[len + 1] = (uint8_t)l;
        len += 2 + l;
    }
    return len;
}

/* One round trip on an open connection, answered within REPLY_TIMEOUT_MS; returns its ms. */
static int64_t tcp_roundtrip(int fd, uint16_t id)
{
    uint8_t m[514], r[2048];
    size_t l = make_query(m + 2, id, "www.example.test", 1);
    m[0] = 0;
    m[1] = (uint8_t)l;
    int64_t t0 = now_ms();
    send_all(fd, m, 2 + l);
    check_www_answer(r, read_tcp_msg(fd, r, sizeof(r)), id);
    return now_ms() - t0;
}

/* Every connection is closed under exactly one reason, so once all are closed the reasons add up
 * to the connections accepted. */
static void check_close_accounting(const server_stats_t *st)
{
    assert_int_equal(st->tcp_accepted, st->tcp_closed_idle + st->tcp_closed_full +
                                           st->tcp_closed_bad + st->tcp_closed_life +
                                           st->tcp_closed_peer + st->tcp_handed_off);
}

/* Wait (bounded) until pred(st) holds; returns the last snapshot. */
static server_stats_t wait_stats(bool (*pred)(const server_stats_t *), int timeout_ms)
{
    server_stats_t st;
    int64_t t0 = now_ms();
    do {
        server_stats(fx.srv, &st);
        if (pred(&st))
            break;
        usleep(10 * 1000);
    } while (now_ms() - t0 < timeout_ms);
    return st;
}

/* A peer that sends queries and never reads: once the buffers are full the server stops reading
 * it (backpressure, not buffering) and, as nothing is written any more, closes it at the idle
 * timeout. Another client's queries on the same worker are answered promptly all along. */
static void test_tcp_not_reading(void **state)
{
    (void)state;
    static const char *const listen[] = {"127.0.0.1:0"};
    start(listen, 1, 1, 8, true); /* one worker: the two clients share it */
    uint16_t port = server_port(fx.srv, 0);
    int fd = tcp_client_small_rcvbuf(port);
    int other = tcp_client(port);
    static uint8_t chunk[64 * 40];
    size_t chunk_len = make_pipeline(chunk, 64, 1);
    bool closed = false;
    int64_t t0 = now_ms(), closed_ms = -1, last_rt = 0, worst = 0;
    unsigned answered = 0;
    /* each chunk asks for ~16 KiB of answers: the buffers fill within a few chunks */
    while (!closed && now_ms() - t0 < 8000) {
        struct pollfd p = {.fd = fd, .events = POLLOUT};
        if (poll(&p, 1, 50) == 1) {
            if (p.revents & (POLLERR | POLLHUP)) {
                closed = true;
            } else {
                ssize_t n = send(fd, chunk, chunk_len, MSG_NOSIGNAL | MSG_DONTWAIT);
                if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)
                    closed = true;
            }
        }
        if (now_ms() - last_rt >= 100) {
            int64_t ms = tcp_roundtrip(other, (uint16_t)(0x6000 + answered++));
            worst = ms > worst ? ms : worst;
            last_rt = now_ms();
        }
    }
    closed_ms = now_ms() - t0;
    assert_true(closed);
    /* stalled within a few chunks, closed 1 s (tcp_idle_timeout) later */
    assert_true(closed_ms >= 800);
    assert_true(closed_ms < 5000);
    assert_true(answered >= 5);
    assert_true(worst < 1000);
    server_stats_t st;
    server_stats(fx.srv, &st);
    assert_int_equal(st.tcp_closed_idle, 1);
    assert_int_equal(st.tcp_closed_full, 0);
    assert_int_equal(st.tcp_closed_peer, 0);
    /* the other connection is unaffected */
    tcp_roundtrip(other, 0x7777);
    close(fd);
    close(other);
    stop();
}

static bool all_queries_answered(const server_stats_t *st)
{
    return st->tcp_queries >= 500;
}

/* example.zone plus huge.example.test: 64 TXT records of 250 bytes, a ~16 KiB answer. Loopback
 * TCP lets the kernel buffer a megabyte or more of answers for a peer that does not read, so
 * only answers this large make the pipeline below outgrow the kernel and reach our limits. */
static zone_table_t *load_huge_table(void)
{
    char path[] = "/tmp/tern-test-huge-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    FILE *f = fdopen(fd, "w");
    assert_non_null(f);
    fprintf(f, "$ORIGIN example.test.\n$TTL 300\n@ IN SOA ns1 hostmaster 1 3600 600 86400 60\n"
               "@ IN NS ns1\nns1 IN A 127.0.0.1\nwww IN A 192.0.2.1\n");
    char text[251];
    for (int i = 0; i < 64; i++) {
        memset(text, 'a' + i % 26, 250);
        snprintf(text, 4, "%03d", i); /* distinct records */
        text[3] = 'x';
        text[250] = '\0';
        fprintf(f, "huge IN TXT \"%s\"\n", text);
    }
    assert_int_equal(fclose(f), 0);
    zone_table_t *t = load_table_path(path);
    unlink(path);
    return t;
}

/* 500 pipelined queries from a client that reads nothing until it has sent them all: ~6 MB of
 * answers (three of four are huge.example.test, the rest www) cannot all go into the kernel, so
 * the server pauses on both limits (no room in the write queue, the in-flight cap) with the
 * queries left in its read buffer, instead of closing; once the client reads, every answer
 * arrives, in order, and the connection stays usable. */
static void inflight_backpressure(unsigned inflight)
{
    enum { COUNT = 500 };
    static const char *const listen[] = {"127.0.0.1:0"};
    setup(listen, 1, 1, 8, true);
    fx.cfg.tcp_max_inflight = inflight;
    fx.cfg.tcp_idle_timeout = 5; /* the pause below must not look idle */
    fx.table = load_huge_table();
    launch();
    int fd = tcp_client_small_rcvbuf(server_port(fx.srv, 0));
    static uint8_t q[COUNT * 40];
    size_t qlen = 0;
    for (unsigned i = 0; i < COUNT; i++) {
        bool huge = i % 4 != 3;
        size_t l = make_query(q + qlen + 2, (uint16_t)i,
                              huge ? "huge.example.test" : "www.example.test", huge ? 16 : 1);
        q[qlen] = 0;
        q[qlen + 1] = (uint8_t)l;
        qlen += 2 + l;
    }
    send_all(fd, q, qlen); /* ~18 KB: fits the socket buffers, so it does not block */
    usleep(300 * 1000);
    server_stats_t st;
    server_stats(fx.srv, &st);
    print_message("tcp_max_inflight %u: %llu of %d answered before the client read\n", inflight,
                  (unsigned long long)st.tcp_queries, COUNT);
    assert_true(st.tcp_queries < COUNT); /* paused part way */
    assert_int_equal(st.tcp_accepted, 1);
    assert_int_equal(st.tcp_closed_idle + st.tcp_closed_full + st.tcp_closed_bad, 0);
    static uint8_t r[65535];
    for (unsigned i = 0; i < COUNT; i++) {
        size_t n = read_tcp_msg(fd, r, sizeof(r));
        assert_true(n >= 12);
        if ((unsigned)(r[0] << 8 | r[1]) != i)
            fail_msg("answer %u has id %u: out of order", i, r[0] << 8 | r[1]);
        assert_true(r[2] & 0x80);                    /* QR */
        assert_int_equal(r[3] & 0x0f, 0);            /* NOERROR */
        assert_int_equal(r[7], i % 4 != 3 ? 64 : 1); /* ANCOUNT: the whole RRset */
    }
    st = wait_stats(all_queries_answered, REPLY_TIMEOUT_MS);
    assert_int_equal(st.tcp_queries, COUNT);
    /* the connection is still open and usable */
    tcp_roundtrip(fd, 0x4242);
    close(fd);
    server_stats(fx.srv, &st);
    assert_int_equal(st.tcp_closed_idle + st.tcp_closed_full + st.tcp_closed_bad, 0);
    stop();
}

static void test_tcp_inflight_small(void **state)
{
    (void)state;
    inflight_backpressure(4);
}

static void test_tcp_inflight_default(void **state)
{
    (void)state;
    config_t c;
    config_init(&c);
    unsigned def = c.tcp_max_inflight;
    config_free(&c);
    assert_int_equal(def, 64);
    inflight_backpressure(def);
}

/* tcp_max_lifetime closes a connection that never goes idle: a query every 200 ms, closed about
 * 1 s after accept all the same. */
static void test_tcp_lifetime(void **state)
{
    (void)state;
    static const char *const listen[] = {"127.0.0.1:0"};
    setup(listen, 1, 1, 8, true);
    fx.cfg.tcp_max_lifetime = 1;
    launch();
    int64_t t0 = now_ms();
    int fd = tcp_client(server_port(fx.srv, 0));
    int64_t closed_ms = -1;
    unsigned answered = 0;
    uint8_t m[514], r[2048];
    while (closed_ms < 0 && now_ms() - t0 < 5000) {
        /* between queries, watch for the close */
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, 200) == 1) {
            ssize_t n = recv(fd, r, sizeof(r), 0);
            if (n > 0)
                fail_msg("unexpected %zd bytes", n);
            closed_ms = now_ms() - t0;
            break;
        }
        size_t l = make_query(m + 2, (uint16_t)answered, "www.example.test", 1);
        m[0] = 0;
        m[1] = (uint8_t)l;
        if (send(fd, m, 2 + l, MSG_NOSIGNAL) != (ssize_t)(2 + l)) {
            closed_ms = now_ms() - t0;
            break;
        }
        /* the answer, or the close if it came first */
        ssize_t n = recv_timeout(fd, r, sizeof(r), REPLY_TIMEOUT_MS);
        if (n <= 0) {
            assert_true(n != -2);
            closed_ms = now_ms() - t0;
            break;
        }
        assert_true(n >= 2 + 12);
        assert_int_equal(r[2] << 8 | r[3], answered);
        answered++;
    }
    assert_true(closed_ms >= 900);
    assert_true(closed_ms < 2000);
    assert_true(answered >= 3);
    close(fd);
    server_stats_t st;
    server_stats(fx.srv, &st);
    assert_int_equal(st.tcp_closed_life, 1);
    assert_int_equal(st.tcp_closed_idle, 0);
    assert_int_equal(st.tcp_queries, answered);
    check_close_accounting(&st);
    stop();
}

/* The peer's EOF, a reset, and the server's own closes are each counted once. */
static bool four_closed(const server_stats_t *st)
{
    return st->tcp_closed_peer + st->tcp_closed_bad >= 4;
}

static void test_tcp_close_counts(void **state)
{
    (void)state;
    static const char *const listen[] = {"127.0.0.1:0"};
    start(listen, 1, 1, 8, true);
    uint16_t port = server_port(fx.srv, 0);
    /* 1: closes at once; 2: half-closes after a query; 3: a reset (linger 0) after a query */
    close(tcp_client(port));
    int fd = tcp_client(port);
    tcp_roundtrip(fd, 1);
    assert_int_equal(shutdown(fd, SHUT_WR), 0);
    assert_true(wait_closed(fd, 2000) >= 0);
    close(fd);
    fd = tcp_client(port);
    tcp_roundtrip(fd, 2);
    struct linger lg = {.l_onoff = 1, .l_linger = 0};
    setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
    close(fd);
    /* 4: a zero-length message */
    fd = tcp_client(port);
    send_all(fd, "\x00\x00", 2);
    assert_true(wait_closed(fd, 2000) >= 0);
    close(fd);
    server_stats_t st = wait_stats(four_closed, REPLY_TIMEOUT_MS);
    assert_int_equal(st.tcp_accepted, 4);
    assert_int_equal(st.tcp_closed_peer, 3);
    assert_int_equal(st.tcp_closed_bad, 1);
    check_close_accounting(&st);
    stop();
}

static void test_port_conflict_and_stop(void **state)
{
    (void)state;
    start1("127.0.0.1:0");
    uint16_t port = server_port(fx.srv, 0);
    /* the same address twice in one config is refused */
    config_t c2;
    config_init(&c2);
    assert_int_equal(config_add_listen(&c2, "127.0.0.1:5399"), 0);
    assert_int_equal(config_add_listen(&c2, "127.0.0.1:5399"), 0);
    assert_null(server_start(config_server_settings(&c2), &fx.published));
    config_free(&c2);

    /* server_stop returns promptly even with a client connected and idle */
    int fd = tcp_client(port);
    int64_t t0 = now_ms();
    stop();
    assert_true(now_ms() - t0 < 500);
    uint8_t r[16];
    assert_true(recv_timeout(fd, r, sizeof(r), 1000) <= 0); /* closed by the stop */
    close(fd);
}

/* Busy mode: while UDP queries keep a worker reading its socket directly, TCP queries are still
 * answered (epoll is polled every millisecond) and server_stop() stays prompt. */
static void test_busy_udp_keeps_tcp_alive(void **state)
{
    (void)state;
    static const char *const listen[] = {"127.0.0.1:0"};
    start(listen, 1, 1, 8, true);
    uint16_t port = server_port(fx.srv, 0);
    int ufd = udp_client(AF_INET, "127.0.0.1", port);
    int tfd = tcp_client(port);
    uint8_t q[512], m[514], r[2048];
    for (uint16_t round = 0; round < 50; round++) {
        /* a UDP burst in flight... */
        for (uint16_t i = 0; i < 20; i++) {
            size_t ql = make_query(q, (uint16_t)(round * 20 + i), "www.example.test", 1);
            send_all(ufd, q, ql);
        }
        /* ...and a TCP query behind it */
        size_t ql = make_query(m + 2, 0x7000 + round, "www.example.test", 1);
        m[0] = 0;
        m[1] = (uint8_t)ql;
        int64_t t0 = now_ms();
        send_all(tfd, m, ql + 2);
        size_t n = read_tcp_msg(tfd, r, sizeof(r));
        check_www_answer(r, n, 0x7000 + round);
        assert_true(now_ms() - t0 < 1000);
        for (int i = 0; i < 20; i++)
            if (recv_timeout(ufd, r, sizeof(r), REPLY_TIMEOUT_MS) <= 0)
                fail_msg("UDP reply %d of round %u missing", i, round);
    }
    /* stop while a burst is being answered */
    for (uint16_t i = 0; i < 20; i++)
        send_all(ufd, q, make_query(q, i, "www.example.test", 1));
    int64_t t0 = now_ms();
    server_stop(fx.srv);
    fx.srv = NULL;
    assert_true(now_ms() - t0 < 500);
    close(ufd);
    close(tfd);
    stop();
}

/* ---- RCU publication ---- */

/* The A record of www.example.test in a response to make_query(): the last four bytes. */
static uint8_t www_last_octet(int fd, uint16_t id)
{
    uint8_t q[512], r[2048];
    send_all(fd, q, make_query(q, id, "www.example.test", 1));
    ssize_t n = recv_timeout(fd, r, sizeof(r), REPLY_TIMEOUT_MS);
    if (n < 16)
        fail_msg("no reply to query %u", id);
    return r[n - 1];
}

/* A new view published while the workers run is answered from at once; the old one can be freed
 * after the grace period (which idle, offline workers do not hold up). */
static void test_rcu_swap(void **state)
{
    (void)state;
    static const char *const listen[] = {"127.0.0.1:0"};
    start(listen, 1, 2, 8, true);
    int fd = udp_client(AF_INET, "127.0.0.1", server_port(fx.srv, 0));
    assert_int_equal(www_last_octet(fd, 1), 1);

    zone_table_t *t2 = load_table_from("example2.zone");
    answer_view_t v2 = {.table = t2, .cfg = {.edns_max_udp = 1232}};
    for (int round = 0; round < 20; round++) {
        /* alternate between the two views, freeing nothing that a worker may still read */
        const answer_view_t *next = round % 2 == 0 ? &v2 : &fx.view;
        const answer_view_t *old = tern_rcu_xchg(&fx.published, next);
        int64_t t0 = now_ms();
        tern_rcu_synchronize();
        assert_true(now_ms() - t0 < 2000);
        assert_ptr_not_equal(old, next);
        assert_int_equal(www_last_octet(fd, (uint16_t)(100 + round)), round % 2 == 0 ? 2 : 1);
    }
    /* end on v2 and free the first table: the workers must not touch it any more */
    tern_rcu_xchg(&fx.published, &v2);
    tern_rcu_synchronize();
    zone_table_free(fx.table);
    fx.table = t2;
    fx.view = v2;
    tern_rcu_xchg(&fx.published, &fx.view);
    tern_rcu_synchronize();
    for (uint16_t id = 200; id < 210; id++)
        assert_int_equal(www_last_octet(fd, id), 2);
    close(fd);
    stop();
}

/* ---- no heap allocation on the query path ---- */

/* Sum of every worker's allocation counters; false when this build cannot count. */
static bool alloc_totals(uint64_t *alloc, uint64_t *dealloc)
{
    *alloc = *dealloc = 0;
    for (unsigned w = 0; w < server_workers(fx.srv); w++) {
        uint64_t a, d;
        int r = server_worker_allocs(fx.srv, w, &a, &d);
        if (r == TERN_ENOTSUP)
            return false;
        assert_int_equal(r, 0);
        *alloc += a;
        *dealloc += d;
    }
    return true;
}

/* Queries of several kinds over UDP and over one open TCP connection. */
static void query_mix(int ufd, int tfd, unsigned rounds)
{
    static const struct {
        const char *name;
        uint16_t type;
    } mix[] = {
        {"www.example.test", 1},   {"www.example.test", 28},    {"nothere.example.test", 1},
        {"big.example.test", 16},  {"example.test", 6},         {"example.test", 2},
        {"ns1.example.test", 255}, {"a.b.c.d.example.test", 1}, {"www.example.org", 1},
        {"alias.example.test", 1}, {"alias.example.test", 28},
    };
    uint8_t q[512], r[65535];
    for (unsigned i = 0; i < rounds; i++) {
        const char *name = mix[i % TERN_ARRAY_SIZE(mix)].name;
        uint16_t type = mix[i % TERN_ARRAY_SIZE(mix)].type;
        size_t qlen = make_query(q, (uint16_t)i, name, type);
        send_all(ufd, q, qlen);
        if (recv_timeout(ufd, r, sizeof(r), REPLY_TIMEOUT_MS) < 12)
            fail_msg("UDP query %u (%s) not answered", i, name);
        uint8_t m[514];
        m[0] = (uint8_t)(qlen >> 8);
        m[1] = (uint8_t)qlen;
        memcpy(m + 2, q, qlen);
        send_all(tfd, m, qlen + 2);
        (void)read_tcp_msg(tfd, r, sizeof(r));
    }
}

static bool four_evicted(const server_stats_t *st)
{
    return st->tcp_evicted >= 4;
}

static void test_no_alloc_per_query(void **state)
{
    (void)state;
    static const char *const listen[] = {"127.0.0.1:0"};
    start(listen, 1, 1, 8, true);
    uint16_t port = server_port(fx.srv, 0);
    int ufd = udp_client(AF_INET, "127.0.0.1", port);
    int tfd = tcp_client(port);
    query_mix(ufd, tfd, 200); /* warm up: the connection is open, every path taken once */
    uint64_t a0, d0, a1, d1;
    if (!alloc_totals(&a0, &d0)) {
        close(ufd);
        close(tfd);
        stop();
        skip(); /* neither jemalloc nor ASan in this build: nothing can count */
    }
    query_mix(ufd, tfd, 1500);
    /* and a full pool making room for newcomers (tcp.c's admission: the idle ones give way),
     * from addresses of their own: 8 slots, 12 newcomers */
    int idle[12];
    char src[32];
    for (int i = 0; i < 12; i++) {
        snprintf(src, sizeof(src), "127.0.3.%d", i + 1);
        idle[i] = tcp_client_opt(port, src, 0);
    }
    server_stats_t st = wait_stats(four_evicted, REPLY_TIMEOUT_MS);
    assert_true(alloc_totals(&a1, &d1));
    assert_true(st.udp_received >= 1700);
    assert_true(st.tcp_queries >= 1700);
    assert_true(st.tcp_evicted >= 4);
    /* not one allocation or free in 3000 queries and the evictions */
    assert_int_equal(a1, a0);
    assert_int_equal(d1, d0);
    for (int i = 0; i < 12; i++)
        close(idle[i]);
    close(ufd);
    close(tfd);
    stop();
}

/* The end of test_no_alloc_with_qlog: the workers first, then the writer drains their rings a
 * last time; the config last (the log may hold its strings). */
static void qlog_fixture_end(int ufd, int tfd, qlog_t *ql, const char *dir)
{
    close(ufd);
    close(tfd);
    server_stop(fx.srv);
    fx.srv = NULL;
    qlog_free(ql);
    stop();
    tu_rmtree(dir);
}

/* The same with the query log on (a dnstap file and redins' JSON request log, every query
 * sampled): each worker copies every query and response into its ring, and still not one
 * allocation or free on a worker (the writer thread's own are not the workers'). */
static void test_no_alloc_with_qlog(void **state)
{
    (void)state;
    static const char *const listen[] = {"127.0.0.1:0"};
    char dir[64], dnstap[128], reqlog[128], err[256];
    tu_mkdtemp(dir, sizeof(dir), "tern-qlog-noalloc");
    snprintf(dnstap, sizeof(dnstap), "%s/q.fstrm", dir);
    snprintf(reqlog, sizeof(reqlog), "%s/requests.log", dir);
    setup(listen, 1, 1, 8, true);
    fx.cfg.qlog.enabled = true;
    fx.cfg.qlog.dnstap_file = strdup(dnstap);
    fx.cfg.qlog.requests = true;
    fx.cfg.qlog.requests_target = CONFIG_REQLOG_FILE;
    fx.cfg.qlog.requests_format = CONFIG_REQLOG_JSON;
    fx.cfg.qlog.requests_path = strdup(reqlog);
    assert_non_null(fx.cfg.qlog.dnstap_file);
    assert_non_null(fx.cfg.qlog.requests_path);
    qlog_t *ql = qlog_new(&fx.cfg.qlog, 1, err, sizeof(err));
    if (!ql)
        fail_msg("qlog_new: %s", err);
    fx.table = load_table();
    fx.view = (answer_view_t){.table = fx.table, .cfg = {.edns_max_udp = 1232}};
    fx.published = &fx.view;
    fx.srv = server_bind(config_server_settings(&fx.cfg), &fx.published);
    assert_non_null(fx.srv);
    server_set_qlog(fx.srv, ql);
    assert_int_equal(server_run(fx.srv), 0);
    assert_int_equal(qlog_start(ql), 0);
    uint16_t port = server_port(fx.srv, 0);
    int ufd = udp_client(AF_INET, "127.0.0.1", port);
    int tfd = tcp_client(port);
    query_mix(ufd, tfd, 200);
    uint64_t a0, d0, a1, d1;
    if (!alloc_totals(&a0, &d0)) {
        qlog_fixture_end(ufd, tfd, ql, dir);
        skip();
    }
    query_mix(ufd, tfd, 1500);
    assert_true(alloc_totals(&a1, &d1));
    qlog_stats_t qs;
    assert_true(server_qlog_stats(fx.srv, &qs));
    assert_true(qs.records >= 3400); /* every query of the mix was logged, none dropped */
    assert_int_equal(qs.dropped, 0);
    assert_int_equal(a1, a0);
    assert_int_equal(d1, d0);
    qlog_fixture_end(ufd, tfd, ql, dir);
}

/* The same with every limit on (acl, redins' rate, RRL with slips and its log ring, cookies made
 * and checked, the TCP per-client cap): a flood of one name is limited (drops and TC slips) and
 * cookie queries are answered, and still not one allocation or free. */
static size_t make_cookie_query(uint8_t *buf, uint16_t id, const char *name, const uint8_t *cookie,
                                size_t cookie_len)
{
    size_t len = make_query(buf, id, name, 1);
    buf[11] = 1; /* ARCOUNT: the OPT record */
    const uint8_t opt[11] = {
        0, 0, 41, 1232 >> 8, 1232 & 0xff, 0, 0, 0, 0, 0, (uint8_t)(4 + cookie_len)};
    memcpy(buf + len, opt, sizeof(opt));
    len += sizeof(opt);
    buf[len++] = 0;
    buf[len++] = 10; /* COOKIE */
    buf[len++] = 0;
    buf[len++] = (uint8_t)cookie_len;
    memcpy(buf + len, cookie, cookie_len);
    return len + cookie_len;
}

/* Flood one name (RRL limits it), ask with a client cookie then with the server cookie learned,
 * and open TCP connections beyond the per-client cap. Returns the TC responses seen. */
static unsigned limited_mix(int ufd, uint16_t port)
{
    uint8_t q[512], r[65535];
    unsigned tc = 0, got = 0;
    for (unsigned i = 0; i < 60; i++) {
        size_t qlen = make_query(q, (uint16_t)i, "www.example.test", 1);
        send_all(ufd, q, qlen);
    }
    ssize_t n;
    while ((n = recv_timeout(ufd, r, sizeof(r), 300)) >= 12) {
        got++;
        tc += (r[2] & 0x02) != 0;
    }
    assert_true(got >= 5 && got < 60); /* the burst, then every 2nd limited one as TC */
    uint8_t cookie[24] = {1, 2, 3, 4, 5, 6, 7, 8};
    size_t clen = 8;
    for (unsigned i = 0; i < 20; i++) {
        size_t qlen = make_cookie_query(q, (uint16_t)(100 + i), "ns1.example.test", cookie, clen);
        send_all(ufd, q, qlen);
        n = recv_timeout(ufd, r, sizeof(r), REPLY_TIMEOUT_MS);
        assert_true(n > 12 + 28);
        assert_int_equal(r[3] & 0x0f, 0);
        /* the response's last option is our cookie: 8 client + 16 server bytes */
        memcpy(cookie, r + n - 24, 24);
        clen = 24;
    }
    int held[6];
    for (unsigned i = 0; i < 6; i++)
        held[i] = tcp_client(port);
    for (unsigned i = 0; i < 6; i++)
        close(held[i]);
    return tc;
}

static void test_no_alloc_with_limits(void **state)
{
    (void)state;
    static const char *const listen[] = {"127.0.0.1:0"};
    setup(listen, 1, 1, 8, true);
    config_prefix_t *deny = calloc(1, sizeof(*deny));
    assert_non_null(deny);
    *deny = (config_prefix_t){.family = 4, .len = 24, .addr = {192, 0, 2}};
    fx.cfg.acl = (config_acl_t){.enabled = true, .deny = {deny, 1}};
    fx.cfg.ratelimit = (config_ratelimit_t){.enabled = true, .rate = 6000000, .burst = 100000};
    fx.cfg.rrl = (config_rrl_t){.enabled = true, .rate = 5, .burst = 5, .slip = 2, .log = true};
    fx.cfg.cookies = (config_cookies_t){.enabled = true};
    limit_shared_t *sh = limit_shared_new(1);
    assert_non_null(sh);
    limit_shared_set_tcp(sh, 4, 32, 64);
    int rc = 0;
    limit_t *lim = config_limit_new(sh, &fx.cfg, &rc);
    assert_non_null(lim);
    assert_int_equal(limit_shared_start(sh), 0);
    fx.table = load_table();
    fx.view = (answer_view_t){.table = fx.table, .cfg = {.edns_max_udp = 1232}, .limit = lim};
    fx.published = &fx.view;
    fx.srv = server_bind(config_server_settings(&fx.cfg), &fx.published);
    assert_non_null(fx.srv);
    server_set_limits(fx.srv, sh);
    assert_int_equal(server_run(fx.srv), 0);
    uint16_t port = server_port(fx.srv, 0);
    int ufd = udp_client(AF_INET, "127.0.0.1", port);
    (void)limited_mix(ufd, port); /* warm up: every path taken once, the log line written */
    uint64_t a0, d0, a1, d1;
    if (!alloc_totals(&a0, &d0)) {
        close(ufd);
        stop();
        limit_free(lim);
        limit_shared_free(sh);
        skip();
    }
    unsigned tc = limited_mix(ufd, port);
    assert_true(alloc_totals(&a1, &d1));
    server_stats_t st;
    server_stats(fx.srv, &st);
    assert_true(tc > 0 && st.rrl_slipped > 0 && st.policy_dropped[LIMIT_WHY_RRL] > 0);
    assert_true(st.cookies_valid >= 19 && st.tcp_client_capped >= 2);
    assert_int_equal(a1, a0);
    assert_int_equal(d1, d0);
    close(ufd);
    stop();
    limit_free(lim);
    limit_shared_free(sh);
}

/* DNSSEC: 10,000 DO=1 queries over UDP at a signed zone — RRsets signed ahead, and a new
 * NXDOMAIN name in every round, whose compact-denial NSEC is signed by the worker per query (a
 * cache miss every time) — and not one allocation or free. */
static size_t make_do_query(uint8_t *buf, uint16_t id, const char *name, uint16_t qtype)
{
    size_t len = make_query(buf, id, name, qtype);
    buf[11] = 1; /* ARCOUNT: the OPT record, DO set */
    const uint8_t opt[11] = {0, 0, 41, 1232 >> 8, 1232 & 0xff, 0, 0, 0x80, 0, 0, 0};
    memcpy(buf + len, opt, sizeof(opt));
    return len + sizeof(opt);
}

static unsigned signed_mix(int ufd, unsigned rounds, unsigned *rrsigs)
{
    uint8_t q[512], r[2048];
    char name[64];
    unsigned answered = 0;
    for (unsigned i = 0; i < rounds; i++) {
        const char *names[4] = {"www.example.test", "example.test", "www.example.test", name};
        const uint16_t types[4] = {1, 48, 28, 1}; /* A, DNSKEY, NODATA, NXDOMAIN */
        snprintf(name, sizeof(name), "n%u-%u.example.test", i, (unsigned)rand());
        for (unsigned k = 0; k < 4; k++) {
            size_t len = make_do_query(q, (uint16_t)(i * 4 + k), names[k], types[k]);
            assert_int_equal(send(ufd, q, len, 0), (ssize_t)len);
            ssize_t n = recv(ufd, r, sizeof(r), 0);
            assert_true(n >= 12);
            answered++;
            /* an RRSIG (type 46, class IN) somewhere in the answer or authority */
            for (ssize_t j = 12; j + 4 <= n; j++)
                if (r[j] == 0 && r[j + 1] == 46 && r[j + 2] == 0 && r[j + 3] == 1) {
                    (*rrsigs)++;
                    break;
                }
        }
    }
    return answered;
}

static void test_no_alloc_dnssec(void **state)
{
    (void)state;
    static const char *const listen[] = {"127.0.0.1:0"};
    setup(listen, 1, 1, 8, true);
    dnssec_key_t *keys[2] = {NULL, NULL};
    char err[512] = "";
    const uint8_t origin[] = "\7example\4test";
    assert_int_equal(dnssec_key_generate(origin, 13, true, 0, &keys[0], err, sizeof(err)), 0);
    assert_int_equal(dnssec_key_generate(origin, 13, false, 0, &keys[1], err, sizeof(err)), 0);
    dnssec_zone_t *dz = NULL;
    if (dnssec_zone_new(origin, keys, 2, 1, NULL, &dz, err, sizeof(err)) < 0)
        fail_msg("%s", err);
    uint8_t dnskeys[4096];
    int kl = dnssec_zone_dnskeys(dz, dnskeys, sizeof(dnskeys));
    assert_true(kl > 0);
    char path[512];
    const char *dir = getenv("TERN_TEST_DATA");
    snprintf(path, sizeof(path), "%s/net/example.zone", dir ? dir : "tests/data");
    const zone_file_opts_t fo = {.dnskeys = dnskeys, .dnskeys_len = (size_t)kl};
    zone_t *z = NULL;
    if (zone_file_load_opts("example.test", path, &fo, &z, err, sizeof(err)) < 0)
        fail_msg("%s", err);
    dnssec_sigs_t *old = NULL;
    if (dnssec_zone_sign(dz, z, (uint32_t)time(NULL), &old, err, sizeof(err)) < 0)
        fail_msg("%s", err);
    z->dnssec = dz;
    z->dnssec_free = dnssec_zone_free;
    fx.table = zone_table_new();
    assert_non_null(fx.table);
    assert_int_equal(zone_table_add(fx.table, z), 0);
    assert_int_equal(zone_table_freeze(fx.table), 0);
    fx.view = (answer_view_t){.table = fx.table, .cfg = {.edns_max_udp = 1232}, .dnssec = true};
    fx.published = &fx.view;
    fx.srv = server_start(config_server_settings(&fx.cfg), &fx.published);
    assert_non_null(fx.srv);
    uint16_t port = server_port(fx.srv, 0);
    int ufd = udp_client(AF_INET, "127.0.0.1", port);
    unsigned sigs = 0;
    (void)signed_mix(ufd, 20, &sigs); /* warm up */
    uint64_t a0, d0, a1, d1;
    if (!alloc_totals(&a0, &d0)) {
        close(ufd);
        stop();
        skip();
    }
    sigs = 0;
    assert_int_equal(signed_mix(ufd, 2500, &sigs), 10000);
    assert_true(alloc_totals(&a1, &d1));
    assert_int_equal(sigs, 10000); /* every answer signed */
    dnssec_worker_stats_t ds;
    server_dnssec_stats(fx.srv, &ds);
    assert_true(ds.sigs >= 2500); /* a new NXDOMAIN name per round: signed per query */
    assert_int_equal(ds.fails, 0);
    assert_int_equal(a1, a0);
    assert_int_equal(d1, d0);
    close(ufd);
    stop();
}

int main(void)
{
    (void)dnssec_mem_install();
    log_set_level(LOG_LVL_WARN);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_udp_v4),
        cmocka_unit_test(test_udp_burst_mmsg),
        cmocka_unit_test(test_udp_steering),
        cmocka_unit_test(test_udp_busy_poll),
        cmocka_unit_test(test_udp_sockbuf),
        cmocka_unit_test(test_udp_socket_drops),
        cmocka_unit_test(test_udp_burst_fallback),
        cmocka_unit_test(test_udp_drop),
        cmocka_unit_test(test_udp_v6),
        cmocka_unit_test(test_udp_wildcard_pktinfo),
        cmocka_unit_test(test_tcp_pipelined),
        cmocka_unit_test(test_tcp_split),
        cmocka_unit_test(test_tcp_half_close),
        cmocka_unit_test(test_tcp_idle_timeout),
        cmocka_unit_test(test_tcp_zero_length_closes),
        cmocka_unit_test(test_tcp_pool_full),
        cmocka_unit_test(test_tcp_pool_full_fair),
        cmocka_unit_test(test_no_alloc_with_limits),
        cmocka_unit_test(test_no_alloc_with_qlog),
        cmocka_unit_test(test_tcp_not_reading),
        cmocka_unit_test(test_tcp_inflight_small),
        cmocka_unit_test(test_tcp_inflight_default),
        cmocka_unit_test(test_tcp_lifetime),
        cmocka_unit_test(test_tcp_close_counts),
        cmocka_unit_test(test_port_conflict_and_stop),
        cmocka_unit_test(test_busy_udp_keeps_tcp_alive),
        cmocka_unit_test(test_rcu_swap),
        cmocka_unit_test(test_no_alloc_per_query),
        cmocka_unit_test(test_no_alloc_dnssec),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
