/*
 * Unit tests for the checker thread (health_check.h) against real sockets on loopback: HTTP
 * servers answering 200, 500 or nothing (threads of this test, speaking HTTP/1.1 over real TCP),
 * a listening and a closed TCP port, and ICMP echo to 127.0.0.1 where the system allows ping
 * sockets (elsewhere the check must fail saying why). Each endpoint must reach the rank its
 * server implies, the HTTP requests must carry the method, uri and Host of the check, and
 * results must come at the configured interval. The Redis fleet protocol is exercised by the
 * integration test against a real redis-server.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "health_int.h"
#include "tern/common/clock.h"
#include "tern/health/health.h"
#include "tern/checker/health_check.h"

/* SRV_ENDLESS: a 103 (Early Hints) interim response, then 200 with a body that never ends */
typedef enum { SRV_OK, SRV_500, SRV_HANG, SRV_ENDLESS } srv_mode_t;

typedef struct server {
    int fd;
    uint16_t port;
    srv_mode_t mode;
    pthread_t thread;
    int stop;
    char last_request[512]; /* under mu */
    unsigned requests;
    size_t max_body; /* SRV_ENDLESS: the most body bytes one response got into the connection */
    pthread_mutex_t mu;
} server_t;

static int listen_any(uint16_t *port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(fd >= 0);
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
    assert_int_equal(listen(fd, 64), 0);
    socklen_t l = sizeof(a);
    assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &l), 0);
    *port = ntohs(a.sin_port);
    return fd;
}

/* SRV_ENDLESS's answer on c, until the client closes (send fails), a stop or 5 s. The send
 * buffer is fixed at 64 KiB, so what send() takes is what went towards the client, not what
 * Linux lets a sender queue (tcp_wmem autotuning, up to 4 MiB). */
static void send_endless(server_t *s, int c)
{
    static const char head[] = "HTTP/1.1 103 Early Hints\r\nLink: </a.css>; rel=preload\r\n\r\n"
                               "HTTP/1.1 200 OK\r\nContent-Length: 1000000000000\r\n\r\n";
    int sndbuf = 64 * 1024;
    (void)setsockopt(c, SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof(sndbuf));
    struct timeval tv = {0, 100 * 1000}; /* so that the stop flag and the deadline are seen */
    (void)setsockopt(c, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    if (send(c, head, sizeof(head) - 1, MSG_NOSIGNAL) != (ssize_t)sizeof(head) - 1)
        return;
    static char body[16384];
    memset(body, 'x', sizeof(body));
    size_t sent = 0;
    int64_t end = tern_monotonic_ms() + 5000;
    while (!__atomic_load_n(&s->stop, __ATOMIC_ACQUIRE) && tern_monotonic_ms() < end) {
        ssize_t k = send(c, body, sizeof(body), MSG_NOSIGNAL);
        if (k > 0)
            sent += (size_t)k;
        else if (k < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
            break;
    }
    pthread_mutex_lock(&s->mu);
    if (sent > s->max_body)
        s->max_body = sent;
    pthread_mutex_unlock(&s->mu);
}

static void *serve(void *arg)
{
    server_t *s = arg;
    int held[64];
    unsigned nheld = 0;
    while (!__atomic_load_n(&s->stop, __ATOMIC_ACQUIRE)) {
        struct pollfd p = {.fd = s->fd, .events = POLLIN};
        if (poll(&p, 1, 50) <= 0)
            continue;
        int c = accept(s->fd, NULL, NULL);
        if (c < 0)
            continue;
        char buf[512];
        ssize_t n = 0, k;
        /* the request head, up to the blank line (bounded by the buffer and 2 s) */
        struct pollfd pc = {.fd = c, .events = POLLIN};
        while (n < (ssize_t)sizeof(buf) - 1 && poll(&pc, 1, 2000) > 0 &&
               (k = recv(c, buf + n, sizeof(buf) - 1 - (size_t)n, 0)) > 0) {
            n += k;
            buf[n] = '\0';
            if (strstr(buf, "\r\n\r\n"))
                break;
        }
        buf[n > 0 ? n : 0] = '\0';
        pthread_mutex_lock(&s->mu);
        snprintf(s->last_request, sizeof(s->last_request), "%s", buf);
        s->requests++;
        pthread_mutex_unlock(&s->mu);
        srv_mode_t mode = __atomic_load_n(&s->mode, __ATOMIC_ACQUIRE);
        if (mode == SRV_HANG) {
            if (nheld < 64)
                held[nheld++] = c; /* never answered, closed at the end */
            else
                close(c);
            continue;
        }
        if (mode == SRV_ENDLESS) {
            send_endless(s, c);
            close(c);
            continue;
        }
        const char *resp =
            mode == SRV_OK ? "HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                           : "HTTP/1.1 500 Oops\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
        (void)!send(c, resp, strlen(resp), MSG_NOSIGNAL);
        close(c);
    }
    for (unsigned i = 0; i < nheld; i++)
        close(held[i]);
    return NULL;
}

static void server_start(server_t *s, srv_mode_t mode)
{
    memset(s, 0, sizeof(*s));
    s->mode = mode;
    s->fd = listen_any(&s->port);
    pthread_mutex_init(&s->mu, NULL);
    assert_int_equal(pthread_create(&s->thread, NULL, serve, s), 0);
}

static void server_stop(server_t *s)
{
    __atomic_store_n(&s->stop, 1, __ATOMIC_RELEASE);
    pthread_join(s->thread, NULL);
    close(s->fd);
    pthread_mutex_destroy(&s->mu);
}

static void count_fn(void *ctx, const health_ep_info_t *i)
{
    (void)i;
    ++*(size_t *)ctx;
}

static health_spec_t spec(unsigned proto, uint16_t port, const char *host, const char *uri)
{
    health_spec_t s;
    health_spec_init(&s);
    s.proto = (uint8_t)proto;
    s.family = 4;
    s.addr[0] = 127;
    s.addr[3] = 1;
    s.port = port;
    s.host = host;
    s.uri = uri;
    s.up_count = 2;
    s.down_count = -2;
    s.timeout_ms = 400;
    return s;
}

static config_health_t settings(unsigned interval_ms)
{
    config_health_t h;
    memset(&h, 0, sizeof(h));
    h.enabled = true;
    h.check_interval_ms = interval_ms;
    h.max_requests = 16;
    h.update_interval_s = 600;
    h.log_json = true;
    return h;
}

/* A checker of r, started with settings(interval_ms). */
static health_checker_t *checker_start(health_registry_t *r, unsigned interval_ms)
{
    health_checker_t *c = health_checker_new(r);
    assert_non_null(c);
    config_health_t h = settings(interval_ms);
    assert_int_equal(health_checker_configure(c, &h), 0);
    assert_int_equal(health_checker_start(c), 0);
    return c;
}

/* Wait (at most 10 s) until every endpoint of eps has its wanted rank. */
static void wait_ranks(health_ep_t **eps, const unsigned *want, size_t n)
{
    int64_t end = tern_monotonic_ms() + 10000;
    for (;;) {
        size_t ok = 0;
        for (size_t i = 0; i < n; i++)
            ok += health_ep_rank(eps[i]) == want[i];
        if (ok == n)
            return;
        if (tern_monotonic_ms() > end) {
            for (size_t i = 0; i < n; i++)
                fprintf(stderr, "endpoint %zu: rank %u, want %u (status %d, error \"%s\")\n", i,
                        health_ep_rank(eps[i]), want[i], ep_of(eps[i])->status,
                        ep_of(eps[i])->error);
            fail_msg("ranks not reached within 10 s");
        }
        struct timespec ts = {0, 20 * 1000000};
        nanosleep(&ts, NULL);
    }
}

static void test_checks(void **state)
{
    (void)state;
    server_t ok, bad, hang;
    server_start(&ok, SRV_OK);
    server_start(&bad, SRV_500);
    server_start(&hang, SRV_HANG);
    uint16_t open_port, closed_port;
    int lfd = listen_any(&open_port);
    close(listen_any(&closed_port)); /* nobody listens there now */

    health_registry_t *r = health_registry_new();
    health_checker_t *c = checker_start(r, 100);

    health_spec_t s[6];
    s[0] = spec(HEALTH_HTTP, ok.port, "www.example.test", "/health");
    s[1] = spec(HEALTH_HTTP, bad.port, "www.example.test", NULL);
    s[2] = spec(HEALTH_HTTP, hang.port, "www.example.test", NULL);
    s[3] = spec(HEALTH_TCP, open_port, NULL, NULL);
    s[4] = spec(HEALTH_TCP, closed_port, NULL, NULL);
    s[5] = spec(HEALTH_ICMP, 0, NULL, NULL);
    s[1].method = HEALTH_GET;
    health_ep_t *eps[6];
    for (int i = 0; i < 6; i++)
        eps[i] = health_intern(r, &s[i]);
    /* ping sockets: allowed by net.ipv4.ping_group_range or not (then the check says so) */
    int pfd = socket(AF_INET, SOCK_DGRAM, IPPROTO_ICMP);
    bool ping_ok = pfd >= 0;
    if (pfd >= 0)
        close(pfd);
    unsigned want[6] = {HEALTH_RANK_UP,   HEALTH_RANK_DOWN,
                        HEALTH_RANK_DOWN, HEALTH_RANK_UP,
                        HEALTH_RANK_DOWN, ping_ok ? HEALTH_RANK_UP : HEALTH_RANK_DOWN};
    wait_ranks(eps, want, 6);

    pthread_mutex_lock(&r->mu);
    assert_string_equal(ep_of(eps[1])->error, "HTTP status 500");
    assert_non_null(
        strstr(ep_of(eps[2])->error, "timed out")); /* curl: "Operation timed out after ..." */
    assert_non_null(strstr(ep_of(eps[4])->error, "refused"));
    if (!ping_ok)
        assert_non_null(strstr(ep_of(eps[5])->error, "ping_group_range"));
    pthread_mutex_unlock(&r->mu);

    /* the requests: method, uri, and the owner as Host */
    pthread_mutex_lock(&ok.mu);
    assert_true(strncmp(ok.last_request, "HEAD /health HTTP/1.1\r\n", 23) == 0);
    assert_non_null(strstr(ok.last_request, "Host: www.example.test"));
    pthread_mutex_unlock(&ok.mu);
    pthread_mutex_lock(&bad.mu);
    assert_true(strncmp(bad.last_request, "GET / HTTP/1.1\r\n", 16) == 0);
    pthread_mutex_unlock(&bad.mu);

    /* the interval: about 10 checks a second, not a busy loop */
    pthread_mutex_lock(&ok.mu);
    unsigned before = ok.requests;
    pthread_mutex_unlock(&ok.mu);
    struct timespec sec = {1, 0};
    nanosleep(&sec, NULL);
    pthread_mutex_lock(&ok.mu);
    unsigned during = ok.requests - before;
    pthread_mutex_unlock(&ok.mu);
    assert_true(during >= 5 && during <= 12);

    /* the 500 server recovers: its endpoint comes back after up_count checks */
    __atomic_store_n(&bad.mode, SRV_OK, __ATOMIC_RELEASE);
    want[1] = HEALTH_RANK_UP;
    wait_ranks(eps, want, 6);

    health_checker_stats_t st;
    health_checker_stats(c, &st);
    assert_true(st.checks > 20);
    assert_true(st.failures > 0);
    assert_false(st.redis_enabled);

    health_checker_free(c);
    for (int i = 0; i < 6; i++)
        health_ep_release(eps[i]);
    health_registry_free(r);
    close(lfd);
    server_stop(&ok);
    server_stop(&bad);
    server_stop(&hang);
}

/* A GET takes the status of the final response (after a 103 interim one) and stops at its
 * headers: a body that never ends is up, at once, and the server gets little of it out. */
static void test_headers_only(void **state)
{
    (void)state;
    server_t endless;
    server_start(&endless, SRV_ENDLESS);
    health_registry_t *r = health_registry_new();
    health_checker_t *c = checker_start(r, 100);
    health_spec_t s = spec(HEALTH_HTTP, endless.port, "www.example.test", "/big");
    s.method = HEALTH_GET;
    s.timeout_ms = 3000; /* a checker that reads the body times out, down */
    health_ep_t *e = health_intern(r, &s);
    unsigned want = HEALTH_RANK_UP;
    wait_ranks(&e, &want, 1);
    health_checker_free(c);
    pthread_mutex_lock(&r->mu);
    assert_string_equal(ep_of(e)->error, "");
    pthread_mutex_unlock(&r->mu);
    health_ep_release(e);
    health_registry_free(r);
    server_stop(&endless);
    /* the 64 KiB send buffer and the checker's receive window, not a megabyte */
    fprintf(stderr, "endless body: at most %zu bytes sent to one check\n", endless.max_body);
    assert_true(endless.max_body < 1024 * 1024);
}

/* Endpoints that appear while the checker runs are checked at once; a stop with checks in flight
 * releases them. */
static void test_new_and_stop(void **state)
{
    (void)state;
    server_t hang;
    server_start(&hang, SRV_HANG);
    health_registry_t *r = health_registry_new();
    health_checker_t *c = checker_start(r, 60000); /* one check a minute: only the first counts */
    uint16_t open_port;
    int lfd = listen_any(&open_port);
    health_spec_t s = spec(HEALTH_TCP, open_port, NULL, NULL);
    s.up_count = 1;
    health_ep_t *e = health_intern(r, &s);
    unsigned want = HEALTH_RANK_UP;
    wait_ranks(&e, &want, 1);
    health_spec_t sh = spec(HEALTH_HTTP, hang.port, "h.example.test", NULL);
    sh.timeout_ms = 5000;
    health_ep_t *eh = health_intern(r, &sh);
    int64_t end = tern_monotonic_ms() + 5000;
    for (;;) { /* the hanging request is in flight */
        pthread_mutex_lock(&hang.mu);
        unsigned n = hang.requests;
        pthread_mutex_unlock(&hang.mu);
        if (n)
            break;
        assert_true(tern_monotonic_ms() < end);
        struct timespec ts = {0, 10 * 1000000};
        nanosleep(&ts, NULL);
    }
    health_ep_release(eh); /* the checker still holds it */
    health_checker_free(c);
    health_ep_release(e);
    size_t n = 0;
    assert_int_equal(health_each(r, count_fn, &n), 0); /* every reference is back */
    health_registry_free(r);
    close(lfd);
    server_stop(&hang);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_checks),
        cmocka_unit_test(test_new_and_stop),
        cmocka_unit_test(test_headers_only),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
