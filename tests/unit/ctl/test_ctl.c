/*
 * test_ctl.c — the control socket protocol against a real loader and real workers.
 *
 * Each test writes two zones into a fresh temporary directory, loads them with a loader (its own
 * thread, as in ternd), starts two workers on 127.0.0.1:0 and a control socket in the same
 * directory, then talks to it with ctl_connect()/ctl_exchange() (ternctl's calls) or raw
 * sockets. Every wait is bounded: ctl_exchange() and poll() timeouts.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "test_util.h"

#include "tern/common/err.h"
#include "tern/conf/config.h"
#include "tern/ctl/ctl.h"
#include "tern/load/loader.h"
#include "tern/net/server.h"

/* Bounds for a response: generous for a loaded CI machine under ASan (liveness, not speed). */
#define CALL_TIMEOUT_MS  15000
#define REPLY_TIMEOUT_MS 3000

static char dir[64];
static char sock[80];

static struct {
    loader_t *loader;
    server_t *srv;
    ctl_t *ctl;
    _Atomic bool broken_config; /* read by the loader thread */
    _Atomic bool hold_config;   /* read_config() waits (HOLD_MS at most) while set */
    _Atomic bool in_config;     /* read_config() is waiting */
} fx;

/* The longest read_config() holds a reload: past any bound the tests wait for a response. */
#define HOLD_MS 10000

static void write_file(const char *name, const char *text)
{
    tu_write_file(dir, name, text);
}

/* www.ORIGIN A 192.0.2.OCTET; 4 records. broken: line 7 is unparsable. */
static void write_zone(const char *name, const char *origin, unsigned serial, bool broken)
{
    char text[512];
    snprintf(text, sizeof(text),
             "$ORIGIN %s.\n$TTL 300\n@ SOA ns1 hostmaster %u 3600 600 86400 60\n@ NS ns1\n"
             "ns1 A 192.0.2.53\nwww A 192.0.2.1\n%s",
             origin, serial, broken ? "bad A 300.1.2.3\n" : "");
    write_file(name, text);
}

static int read_config(void *ctx, config_t *cfg, char *err, size_t errlen)
{
    (void)ctx;
    config_init(cfg);
    if (fx.hold_config) {
        fx.in_config = true;
        struct timespec tick = {0, 10 * 1000 * 1000};
        /* bounded: HOLD_MS at most */
        for (int i = 0; i < HOLD_MS / 10 && fx.hold_config; i++)
            nanosleep(&tick, NULL);
        fx.in_config = false;
    }
    if (fx.broken_config) {
        snprintf(err, errlen, "test.yaml:3: unknown key 'bogus'");
        return TERN_ESYNTAX;
    }
    cfg->workers = 2;
    char a[256], b[256];
    snprintf(a, sizeof(a), "%s/a.zone", dir);
    snprintf(b, sizeof(b), "%s/b.zone", dir);
    if (config_add_listen(cfg, "127.0.0.1:0") < 0 || config_add_zone(cfg, "a.test", a) < 0 ||
        config_add_zone(cfg, "b.test", b) < 0)
        return TERN_ENOMEM;
    return 0;
}

/* Only the temporary directory (tests of the socket file itself). */
static int setup_dir(void **state)
{
    (void)state;
    memset(&fx, 0, sizeof(fx));
    tu_mkdtemp(dir, sizeof(dir), "tern-ctl");
    snprintf(sock, sizeof(sock), "%s/ctl.sock", dir);
    return 0;
}

/* The whole stack: loader (started), two workers, control socket. */
static int setup(void **state)
{
    setup_dir(state);
    write_zone("a.zone", "a.test", 1, false);
    write_zone("b.zone", "b.test", 7, false);
    fx.loader = loader_new(read_config, NULL);
    assert_non_null(fx.loader);
    const config_t *cfg;
    assert_int_equal(loader_load(fx.loader, &cfg), 0);
    fx.srv = server_start(config_server_settings(cfg), loader_published(fx.loader));
    assert_non_null(fx.srv);
    assert_int_equal(loader_start(fx.loader), 0);
    fx.ctl = ctl_start(sock, fx.loader, fx.srv, cfg->workers);
    assert_non_null(fx.ctl);
    return 0;
}

/* ternd's order: the control socket, the loader, the workers, then the data. */
static int teardown(void **state)
{
    (void)state;
    ctl_stop(fx.ctl);
    loader_stop(fx.loader);
    server_stop(fx.srv);
    loader_free(fx.loader);
    memset(&fx, 0, sizeof(fx));
    tu_rmtree(dir);
    return 0;
}

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The response to request (ternctl's path); the caller frees it. */
static char *call_at(const char *path, const char *request)
{
    int fd = ctl_connect(path, CALL_TIMEOUT_MS);
    if (fd < 0)
        fail_msg("ctl_connect %s: %s", path, tern_strerror(fd));
    char *out = NULL;
    int r = ctl_exchange(fd, request, CALL_TIMEOUT_MS, &out);
    close(fd);
    if (r < 0)
        fail_msg("ctl_exchange '%s': %s", request, tern_strerror(r));
    return out;
}

static char *call(const char *request)
{
    return call_at(sock, request);
}

/* Read until EOF (bounded by CALL_TIMEOUT_MS of silence), close fd; the caller frees. */
static char *read_all(int fd)
{
    char buf[65536];
    size_t got = 0;
    while (got < sizeof(buf) - 1) { /* bounded by the buffer and the poll timeout */
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, CALL_TIMEOUT_MS) != 1)
            fail_msg("no response within %d ms (got %zu bytes)", CALL_TIMEOUT_MS, got);
        ssize_t n = recv(fd, buf + got, sizeof(buf) - 1 - got, 0);
        if (n <= 0)
            break;
        got += (size_t)n;
    }
    buf[got] = '\0';
    close(fd);
    return strdup(buf);
}

/* Send len raw bytes (then shut down the write side if shut), read the response until EOF. */
static char *raw_call(const char *data, size_t len, bool shut)
{
    int fd = ctl_connect(sock, CALL_TIMEOUT_MS);
    assert_true(fd >= 0);
    size_t sent = 0;
    while (sent < len) { /* bounded: each pass sends or fails within the poll timeout */
        struct pollfd p = {.fd = fd, .events = POLLOUT};
        assert_int_equal(poll(&p, 1, REPLY_TIMEOUT_MS), 1);
        ssize_t n = send(fd, data + sent, len - sent, MSG_NOSIGNAL);
        if (n < 0 && (errno == EPIPE || errno == ECONNRESET))
            break; /* the server answered and closed before taking it all */
        assert_true(n > 0);
        sent += (size_t)n;
    }
    if (shut)
        assert_int_equal(shutdown(fd, SHUT_WR), 0);
    return read_all(fd);
}

static void assert_contains(const char *text, const char *what)
{
    if (!strstr(text, what))
        fail_msg("expected '%s' in:\n%s", what, text);
}

/* The value of "key: value" in a response (first match), as an integer; fails if absent. */
static long long value_of(const char *text, const char *key)
{
    char pat[96];
    snprintf(pat, sizeof(pat), "\n%s: ", key);
    const char *p = strstr(text, pat);
    if (!p)
        fail_msg("no '%s:' line in:\n%s", key, text);
    return strtoll(p + strlen(pat), NULL, 10);
}

/* --- commands */

static void test_status(void **state)
{
    (void)state;
    char *r = call("status");
    assert_true(strncmp(r, "ok\n", 3) == 0);
    assert_contains(r, "\nversion: " TERN_VERSION "\n");
    assert_contains(r, "\nworkers: 2\n");
    assert_int_equal(value_of(r, "zones"), 2);
    assert_int_equal(value_of(r, "records"), 8);
    assert_int_equal(value_of(r, "pid"), getpid());
    assert_true(value_of(r, "uptime_seconds") >= 0);
    assert_contains(r, "\nlast_reload: never\n");
    assert_contains(r, "\nlast_reload_result: none\n");
    assert_contains(r, "\nzone: a.test serial 1 records 4 bytes ");
    assert_contains(r, "\nzone: b.test serial 7 records 4 bytes ");
    char file[256];
    snprintf(file, sizeof(file), " file %s/a.zone\n", dir);
    assert_contains(r, file);
    /* configuration order */
    assert_true(strstr(r, "zone: a.test") < strstr(r, "zone: b.test"));
    free(r);
}

static void test_zone(void **state)
{
    (void)state;
    /* case-insensitive, final dot optional */
    static const char *const forms[] = {"zone b.test", "zone B.Test.", "zone b.test.."};
    for (size_t i = 0; i < 3; i++) {
        char *r = call(forms[i]);
        assert_true(strncmp(r, "ok\n", 3) == 0);
        assert_contains(r, "\nzone: b.test\n");
        assert_int_equal(value_of(r, "serial"), 7);
        assert_int_equal(value_of(r, "records"), 4);
        assert_true(value_of(r, "bytes") > 0);
        assert_contains(r, "\nloaded: 20");
        assert_contains(r, "/b.zone\n");
        free(r);
    }
    char *r = call("zone nope.test");
    assert_string_equal(r, "error: zone nope.test is not served\n");
    free(r);
    r = call("zone");
    assert_string_equal(r, "error: usage: zone NAME | zone flush NAME\n");
    free(r);
    r = call("zone a.test b.test");
    assert_string_equal(r, "error: usage: zone NAME | zone flush NAME\n");
    free(r);
}

static void test_reload_ok(void **state)
{
    (void)state;
    write_zone("a.zone", "a.test", 2, false);
    char *r = call("reload");
    assert_true(strncmp(r, "ok\n", 3) == 0);
    assert_contains(r, "\nreload: ok\n");
    assert_int_equal(value_of(r, "zones"), 2);
    assert_int_equal(value_of(r, "zones_changed"), 1);
    assert_int_equal(value_of(r, "zones_unchanged"), 1);
    assert_int_equal(value_of(r, "zones_removed"), 0);
    assert_true(value_of(r, "duration_ms") >= 0);
    assert_contains(r, "\nchanged: a.test serial 1 -> 2 records 4\n");
    assert_null(strstr(r, "changed: b.test"));
    free(r);

    r = call("status");
    assert_contains(r, "\nzone: a.test serial 2 records 4 ");
    assert_contains(r, "\nlast_reload_result: ok\n");
    assert_int_equal(value_of(r, "reloads_ok"), 1);
    assert_null(strstr(r, "last_reload: never"));
    free(r);

    /* nothing changed: a reload that reports no changed zone */
    r = call("reload");
    assert_true(strncmp(r, "ok\n", 3) == 0);
    assert_int_equal(value_of(r, "zones_changed"), 0);
    free(r);
}

static void test_reload_failed(void **state)
{
    (void)state;
    write_zone("a.zone", "a.test", 3, true);
    char *r = call("reload");
    char want[256];
    snprintf(want, sizeof(want), "error: reload failed: %s/a.zone:", dir);
    if (strncmp(r, want, strlen(want)) != 0)
        fail_msg("expected '%s...', got:\n%s", want, r);
    assert_contains(r, "\nreload: failed\n");
    assert_contains(r, "\nstill_serving: the previous data\n");
    assert_int_equal(value_of(r, "reloads_failed"), 1);
    free(r);

    r = call("status");
    assert_true(strncmp(r, "ok\n", 3) == 0);
    assert_contains(r, "\nzone: a.test serial 1 records 4 ");
    assert_contains(r, "\nlast_reload_result: failed\n");
    snprintf(want, sizeof(want), "\nlast_reload_error: %s/a.zone:", dir);
    assert_contains(r, want);
    free(r);

    /* a config that cannot be read fails the same way */
    write_zone("a.zone", "a.test", 4, false);
    fx.broken_config = true;
    r = call("reload");
    assert_true(strncmp(r, "error: reload failed: test.yaml:3: unknown key 'bogus'\n",
                        strlen("error: reload failed: test.yaml:3")) == 0);
    free(r);
    fx.broken_config = false;
    r = call("reload");
    assert_true(strncmp(r, "ok\n", 3) == 0);
    assert_contains(r, "\nchanged: a.test serial 1 -> 4 records 4\n");
    free(r);
}

static size_t make_query(uint8_t *buf, uint16_t id, const char *name, uint16_t qtype)
{
    const uint8_t hdr[12] = {id >> 8, id & 0xff, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0};
    memcpy(buf, hdr, sizeof(hdr));
    size_t len = sizeof(hdr);
    const char *p = name;
    while (*p) { /* one label per pass */
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

/* One UDP query to the workers; waits for its answer. */
static void udp_query(const char *name, uint16_t qtype, uint16_t id)
{
    int fd = socket(AF_INET, SOCK_DGRAM, 0);
    assert_true(fd >= 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(server_port(fx.srv, 0))};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    uint8_t q[512], r[2048];
    size_t len = make_query(q, id, name, qtype);
    assert_int_equal(send(fd, q, len, 0), (ssize_t)len);
    struct pollfd p = {.fd = fd, .events = POLLIN};
    assert_int_equal(poll(&p, 1, REPLY_TIMEOUT_MS), 1);
    assert_true(recv(fd, r, sizeof(r), 0) >= 12);
    close(fd);
}

static void test_stats(void **state)
{
    (void)state;
    char *r = call("stats");
    assert_true(strncmp(r, "ok\n", 3) == 0);
    assert_int_equal(value_of(r, "queries"), 0);
    free(r);
    for (uint16_t i = 0; i < 5; i++)
        udp_query("www.a.test", 1, i);
    udp_query("a.test", 6, 10);
    udp_query("nope.a.test", 28, 11);
    r = call("stats");
    assert_true(strncmp(r, "ok\n", 3) == 0);
    assert_contains(r, "\nworkers: 2\n");
    assert_int_equal(value_of(r, "queries"), 7);
    assert_int_equal(value_of(r, "queries_udp"), 7);
    assert_int_equal(value_of(r, "queries_tcp"), 0);
    assert_int_equal(value_of(r, "udp_received"), 7);
    assert_int_equal(value_of(r, "qtype_a"), 5);
    assert_int_equal(value_of(r, "qtype_soa"), 1);
    assert_int_equal(value_of(r, "qtype_aaaa"), 1);
    assert_int_equal(value_of(r, "rcode_noerror"), 6);
    assert_int_equal(value_of(r, "rcode_nxdomain"), 1);
    /* every slot is listed by name */
    for (unsigned i = 0; i < SERVER_QTYPE_COUNT; i++) {
        char key[64];
        snprintf(key, sizeof(key), "qtype_%s", server_qtype_name(i));
        (void)value_of(r, key);
    }
    for (unsigned i = 0; i < SERVER_RCODE_COUNT; i++) {
        char key[64];
        snprintf(key, sizeof(key), "rcode_%s", server_rcode_name(i));
        (void)value_of(r, key);
    }
    assert_int_equal(value_of(r, "zones"), 2);
    assert_int_equal(value_of(r, "reloads_ok"), 0);
    assert_int_equal(value_of(r, "reloads_failed"), 0);
    free(r);
}

static void test_bad_requests(void **state)
{
    (void)state;
    char *r = call("bogus");
    assert_string_equal(r, "error: unknown command 'bogus' (commands: reload, status, stats, "
                           "zone NAME, health)\n");
    free(r);
    /* health: the list (no endpoint in these zones), and set with what it needs only */
    r = call("health");
    static const char head[] = "ok\nendpoints: 0\nup: 0\ndown: 0\n";
    assert_true(strncmp(r, head, sizeof(head) - 1) == 0);
    free(r);
    static const char *const bad_health[] = {"health set 192.0.2.1",
                                             "health set 192.0.2.1 sideways",
                                             "health set 300.0.0.1 up",
                                             "health set 192.0.2.1:0 up",
                                             "health set [::1] up",
                                             "health get 192.0.2.1 up",
                                             "health set 192.0.2.1:99999 down"};
    for (size_t i = 0; i < sizeof(bad_health) / sizeof(bad_health[0]); i++) {
        r = call(bad_health[i]);
        assert_true(strncmp(r, "error: usage: health", 20) == 0);
        free(r);
    }
    r = call("health set [2001:db8::1]:443 down");
    assert_string_equal(r, "ok\noverride: [2001:db8::1]:443 down\nmatched: 0\n");
    free(r);
    r = call("health set 192.0.2.1 auto");
    assert_string_equal(r, "ok\noverride: 192.0.2.1 auto\nmatched: 0\n");
    free(r);
    r = call("");
    assert_true(strncmp(r, "error: empty request", 20) == 0);
    free(r);
    r = call("status now");
    assert_string_equal(r, "error: usage: status\n");
    free(r);
    r = call("RELOAD"); /* commands are lower case */
    assert_true(strncmp(r, "error: unknown command 'RELOAD'", 31) == 0);
    free(r);
    /* the client refuses to send a second line */
    int fd = ctl_connect(sock, CALL_TIMEOUT_MS);
    assert_true(fd >= 0);
    char *out = (char *)1;
    assert_int_equal(ctl_exchange(fd, "status\nreload", CALL_TIMEOUT_MS, &out), TERN_EINVAL);
    assert_null(out);
    close(fd);
}

static void test_line_endings(void **state)
{
    (void)state;
    char *r = raw_call("status\r\n", 8, false);
    assert_true(strncmp(r, "ok\n", 3) == 0);
    free(r);
    r = raw_call("stats", 5, true); /* no "\n": the end of the stream ends the request */
    assert_true(strncmp(r, "ok\n", 3) == 0);
    assert_contains(r, "\nqueries: ");
    free(r);
    r = raw_call("  zone \t a.test  \n", 18, false);
    assert_true(strncmp(r, "ok\n", 3) == 0);
    free(r);
    r = raw_call("status\nreload\n", 14, false); /* only the first line counts */
    assert_true(strncmp(r, "ok\n", 3) == 0);
    assert_contains(r, "\nversion: ");
    free(r);
}

static void test_oversized(void **state)
{
    (void)state;
    static char big[4 * CTL_MAX_REQUEST];
    memset(big, 'a', sizeof(big));
    char *r = raw_call(big, sizeof(big), false);
    char want[64];
    snprintf(want, sizeof(want), "error: request longer than %d bytes\n", CTL_MAX_REQUEST);
    assert_string_equal(r, want);
    free(r);
    /* exactly the limit, "\n" included, is still a request */
    memset(big, ' ', CTL_MAX_REQUEST);
    memcpy(big, "status", 6);
    big[CTL_MAX_REQUEST - 1] = '\n';
    r = raw_call(big, CTL_MAX_REQUEST, false);
    assert_true(strncmp(r, "ok\n", 3) == 0);
    free(r);
    /* and the server still serves */
    r = call("status");
    assert_true(strncmp(r, "ok\n", 3) == 0);
    free(r);
}

/* A client that connects and says nothing holds nobody else, and is told so after
 * CTL_IO_TIMEOUT_MS. */
static void test_silent_client(void **state)
{
    (void)state;
    int silent = ctl_connect(sock, CALL_TIMEOUT_MS);
    assert_true(silent >= 0);
    int64_t t0 = now_ms();
    char *r = call("status");
    assert_true(strncmp(r, "ok\n", 3) == 0);
    free(r);
    /* liveness: the second client did not wait for the first one's timeout */
    assert_true(now_ms() - t0 < CTL_IO_TIMEOUT_MS);
    char buf[256];
    struct pollfd p = {.fd = silent, .events = POLLIN};
    assert_int_equal(poll(&p, 1, CTL_IO_TIMEOUT_MS + REPLY_TIMEOUT_MS), 1);
    ssize_t n = recv(silent, buf, sizeof(buf) - 1, 0);
    assert_true(n > 0);
    buf[n] = '\0';
    char want[64];
    snprintf(want, sizeof(want), "error: no request within %d ms\n", CTL_IO_TIMEOUT_MS);
    assert_string_equal(buf, want);
    close(silent);

    /* a client that connects and goes away costs nothing */
    int gone = ctl_connect(sock, CALL_TIMEOUT_MS);
    assert_true(gone >= 0);
    close(gone);
    r = call("status");
    assert_true(strncmp(r, "ok\n", 3) == 0);
    free(r);
}

/* Idle clients hold only their own connections: with 40 of them connected (more than the
 * server's 32 places and its listen backlog), status is answered at once, not after each idle
 * client's CTL_IO_TIMEOUT_MS in turn; the server closed the ones that waited longest. */
static void test_many_idle_clients(void **state)
{
    (void)state;
    int idle[40];
    size_t n = 0;
    for (size_t i = 0; i < TERN_ARRAY_SIZE(idle); i++) {
        int fd = ctl_connect(sock, 200); /* a full backlog (the old server) is not waited for */
        if (fd >= 0)
            idle[n++] = fd;
    }
    int fd = ctl_connect(sock, CALL_TIMEOUT_MS);
    assert_true(fd >= 0);
    char *out = NULL;
    /* liveness: less than one idle client's timeout */
    int r = ctl_exchange(fd, "status", CTL_IO_TIMEOUT_MS - 500, &out);
    close(fd);
    if (r < 0)
        fail_msg("status beside %zu idle clients: %s", n, tern_strerror(r));
    assert_true(strncmp(out, "ok\n", 3) == 0);
    free(out);
    assert_int_equal(n, TERN_ARRAY_SIZE(idle));
    /* the first ones were closed to make room, without an answer */
    struct pollfd p = {.fd = idle[0], .events = POLLIN};
    assert_int_equal(poll(&p, 1, REPLY_TIMEOUT_MS), 1);
    char c;
    assert_true(recv(idle[0], &c, 1, 0) <= 0);
    for (size_t i = 0; i < n; i++)
        close(idle[i]);
}

/* Send "reload\n" on a new connection; the response is read later with read_all(). */
static int reload_async(void)
{
    int fd = ctl_connect(sock, CALL_TIMEOUT_MS);
    assert_true(fd >= 0);
    assert_int_equal(send(fd, "reload\n", 7, MSG_NOSIGNAL), 7);
    return fd;
}

/* A reload that waits for the loader holds no other request: status is answered while the
 * loader is still reading the config; a second reload asked meanwhile gets a reload of its own
 * (one that started after it asked), and both are answered. */
static void test_status_during_reload(void **state)
{
    (void)state;
    fx.hold_config = true;
    int first = reload_async();
    int64_t deadline = now_ms() + CALL_TIMEOUT_MS;
    while (!fx.in_config && now_ms() < deadline) { /* bounded by the deadline */
        struct timespec tick = {0, 10 * 1000 * 1000};
        nanosleep(&tick, NULL);
    }
    assert_true(fx.in_config);
    int second = reload_async();
    char *r = call("status");
    bool held = fx.in_config; /* status came back while the reload was still held */
    fx.hold_config = false;
    assert_true(strncmp(r, "ok\n", 3) == 0);
    free(r);
    assert_true(held);
    r = read_all(first);
    assert_true(strncmp(r, "ok\n", 3) == 0);
    free(r);
    r = read_all(second);
    assert_true(strncmp(r, "ok\n", 3) == 0);
    free(r);
    r = call("status");
    assert_int_equal(value_of(r, "reloads_ok"), 2);
    free(r);
}

/* ctl_stop() does not wait out a client's timeout. */
static void test_stop_with_pending_client(void **state)
{
    (void)state;
    int silent = ctl_connect(sock, CALL_TIMEOUT_MS);
    assert_true(silent >= 0);
    struct timespec pause = {0, 50 * 1000 * 1000};
    nanosleep(&pause, NULL); /* let the control thread take it (not required for the test) */
    int64_t t0 = now_ms();
    ctl_stop(fx.ctl);
    fx.ctl = NULL;
    assert_true(now_ms() - t0 < CTL_IO_TIMEOUT_MS);
    struct stat st;
    assert_int_equal(lstat(sock, &st), -1); /* the socket file is gone */
    assert_int_equal(errno, ENOENT);
    close(silent);
}

/* --- the socket file */

/* A socket file at sock as a process that died leaves it: bound, nobody listening. */
static void stale_socket(void)
{
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    memcpy(sa.sun_path, sock, strlen(sock) + 1);
    assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    close(fd);
}

static void test_socket_mode(void **state)
{
    (void)state;
    struct stat st;
    assert_int_equal(lstat(sock, &st), 0);
    assert_true(S_ISSOCK(st.st_mode));
    assert_int_equal(st.st_mode & 07777, 0660);
}

/* A socket file left by a process that died: nobody answers, so it is replaced. */
static void test_stale_socket_replaced(void **state)
{
    (void)state;
    stale_socket();
    struct stat st;
    assert_int_equal(lstat(sock, &st), 0);

    ctl_t *c = ctl_start(sock, NULL, NULL, 3);
    assert_non_null(c);
    char *r = call("status");
    assert_true(strncmp(r, "ok\n", 3) == 0);
    assert_contains(r, "\nworkers: 3\n");
    free(r);
    r = call("reload"); /* without a loader: an error, not a crash */
    assert_true(strncmp(r, "error: ", 7) == 0);
    free(r);
    r = call("stats");
    assert_true(strncmp(r, "ok\n", 3) == 0);
    free(r);
    ctl_stop(c);
    assert_int_equal(lstat(sock, &st), -1);
}

/* Another live server on the path keeps it; a non-socket file is not replaced either. */
static void test_live_socket_not_stolen(void **state)
{
    (void)state;
    ctl_t *a = ctl_start(sock, NULL, NULL, 1);
    assert_non_null(a);
    struct stat st0, st1;
    assert_int_equal(lstat(sock, &st0), 0);
    assert_null(ctl_start(sock, NULL, NULL, 2));
    assert_int_equal(lstat(sock, &st1), 0);
    assert_int_equal(st0.st_ino, st1.st_ino); /* the same socket file */
    char *r = call("status");
    assert_contains(r, "\nworkers: 1\n"); /* still the first one answering */
    free(r);
    ctl_stop(a);

    write_file("ctl.sock", "not a socket\n");
    assert_null(ctl_start(sock, NULL, NULL, 1));
    assert_int_equal(lstat(sock, &st0), 0);
    assert_true(S_ISREG(st0.st_mode));
    assert_int_equal(unlink(sock), 0);

    /* a path that does not fit sockaddr_un, and a missing directory */
    char longp[200];
    memset(longp, 'x', sizeof(longp) - 1);
    longp[0] = '/';
    longp[sizeof(longp) - 1] = '\0';
    assert_null(ctl_start(longp, NULL, NULL, 1));
    char missing[160];
    snprintf(missing, sizeof(missing), "%s/no/such/dir.sock", dir);
    assert_null(ctl_start(missing, NULL, NULL, 1));
}

/* The client side when nobody is there. */
static void test_connect_errors(void **state)
{
    (void)state;
    assert_int_equal(ctl_connect(sock, 100), -ENOENT);
    stale_socket();
    assert_int_equal(ctl_connect(sock, 100), -ECONNREFUSED);
    assert_int_equal(unlink(sock), 0);
}

static int teardown_dir(void **state)
{
    (void)state;
    ctl_stop(fx.ctl);
    fx.ctl = NULL;
    tu_rmtree(dir);
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_status, setup, teardown),
        cmocka_unit_test_setup_teardown(test_zone, setup, teardown),
        cmocka_unit_test_setup_teardown(test_reload_ok, setup, teardown),
        cmocka_unit_test_setup_teardown(test_reload_failed, setup, teardown),
        cmocka_unit_test_setup_teardown(test_stats, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_requests, setup, teardown),
        cmocka_unit_test_setup_teardown(test_line_endings, setup, teardown),
        cmocka_unit_test_setup_teardown(test_oversized, setup, teardown),
        cmocka_unit_test_setup_teardown(test_silent_client, setup, teardown),
        cmocka_unit_test_setup_teardown(test_many_idle_clients, setup, teardown),
        cmocka_unit_test_setup_teardown(test_status_during_reload, setup, teardown),
        cmocka_unit_test_setup_teardown(test_stop_with_pending_client, setup, teardown),
        cmocka_unit_test_setup_teardown(test_socket_mode, setup, teardown),
        cmocka_unit_test_setup_teardown(test_stale_socket_replaced, setup_dir, teardown_dir),
        cmocka_unit_test_setup_teardown(test_live_socket_not_stolen, setup_dir, teardown_dir),
        cmocka_unit_test_setup_teardown(test_connect_errors, setup_dir, teardown_dir),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
