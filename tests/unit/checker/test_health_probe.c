/*
 * test_health_probe.c — one check of one endpoint (health_probe.c), without the checker's loop:
 * a TCP connect that succeeds or is refused, how a finished HTTP transfer is judged (the default
 * statuses, an expect list, a transfer that failed before any status), and a libcurl handle set
 * up for a named host.
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
#include <unistd.h>

#include <cmocka.h>

#include "health_check_int.h"
#include "test_util.h"

/* A listening TCP socket on 127.0.0.1 and its port (tu_free_port(): a port nobody uses). */
static int listen_any(uint16_t *port)
{
    struct sockaddr_storage ss;
    *port = tu_free_port();
    socklen_t len = tu_sockaddr(&ss, AF_INET, "127.0.0.1", *port);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(fd >= 0);
    assert_int_equal(bind(fd, (struct sockaddr *)&ss, len), 0);
    assert_int_equal(listen(fd, 4), 0);
    return fd;
}

/* An endpoint at 127.0.0.1:port of protocol proto (not registered: the probes read its spec and
 * its address text only). */
static void ep_init(struct ep *e, uint8_t proto, uint16_t port)
{
    memset(e, 0, sizeof(*e));
    health_spec_init(&e->spec);
    e->spec.proto = proto;
    e->spec.family = 4;
    e->spec.port = port;
    e->spec.timeout_ms = 1000;
    const uint8_t lo[4] = {127, 0, 0, 1};
    memcpy(e->spec.addr, lo, 4);
    snprintf(e->addr_text, sizeof(e->addr_text), "127.0.0.1");
}

/* The probe's verdict on j's socket once it is ready, waiting at most 2 s. */
static int wait_ready(struct job *j, short events)
{
    struct pollfd p = {.fd = j->fd, .events = events};
    assert_int_equal(poll(&p, 1, 2000), 1);
    return health_probe_ready(j, p.revents);
}

static void test_tcp_up(void **state)
{
    (void)state;
    uint16_t port;
    int lfd = listen_any(&port);
    struct ep e;
    ep_init(&e, HEALTH_TCP, port);
    struct job j = {.e = &e, .fd = -1};
    int r = health_probe_tcp(&j);
    if (r == 0)
        r = wait_ready(&j, POLLOUT);
    else
        assert_string_equal(j.err, ""); /* connected at once */
    assert_int_equal(r, 1);
    close(j.fd);
    close(lfd);
}

static void test_tcp_refused(void **state)
{
    (void)state;
    uint16_t port = tu_free_port(); /* nobody listens there */
    struct ep e;
    ep_init(&e, HEALTH_TCP, port);
    struct job j = {.e = &e, .fd = -1};
    int r = health_probe_tcp(&j);
    if (r == 0) {
        r = wait_ready(&j, POLLOUT);
        assert_int_equal(r, 0);
    } else {
        assert_int_equal(r, 1);
        assert_string_not_equal(j.err, "");
    }
    assert_non_null(strstr(j.err, "connect: "));
    if (j.fd >= 0)
        close(j.fd);
}

/* A finished transfer's verdict for status (noted by the header callback) and libcurl's rc. */
static bool judge(struct ep *e, long status, CURLcode rc, char *err, size_t errlen)
{
    struct job j = {.e = e, .http_status = status};
    bool ok = health_probe_http_result(&j, rc, NULL);
    snprintf(err, errlen, "%s", j.err);
    return ok;
}

static void test_http_result(void **state)
{
    (void)state;
    assert_null(health_curl_load());
    struct ep e;
    ep_init(&e, HEALTH_HTTP, 80);
    char err[ERRBUF];
    /* redins' defaults: 200, 301 and 302 are up, whatever error the stop after the headers got */
    assert_true(judge(&e, 200, CURLE_WRITE_ERROR, err, sizeof(err)));
    assert_string_equal(err, "");
    assert_true(judge(&e, 301, CURLE_OK, err, sizeof(err)));
    assert_true(judge(&e, 302, CURLE_RECV_ERROR, err, sizeof(err)));
    assert_false(judge(&e, 404, CURLE_WRITE_ERROR, err, sizeof(err)));
    assert_string_equal(err, "HTTP status 404");
    /* an expect list replaces the defaults */
    e.spec.expect[0] = 204;
    e.spec.expect[1] = 503;
    e.spec.nexpect = 2;
    assert_true(judge(&e, 503, CURLE_WRITE_ERROR, err, sizeof(err)));
    assert_false(judge(&e, 200, CURLE_WRITE_ERROR, err, sizeof(err)));
    assert_string_equal(err, "HTTP status 200");
    /* no status at all: libcurl's error is the reason */
    assert_false(judge(&e, 0, CURLE_COULDNT_CONNECT, err, sizeof(err)));
    assert_string_not_equal(err, "");
}

static void test_http_setup(void **state)
{
    (void)state;
    assert_null(health_curl_load());
    struct ep e;
    ep_init(&e, HEALTH_HTTPS, 8443);
    e.spec.host = "www.example.com";
    struct job j = {.e = &e, .fd = -1};
    j.easy = curl_easy_init();
    assert_non_null(j.easy);
    assert_int_equal(health_probe_http(&j, NULL), 0);
    /* a named host is connected to the record's address, never resolved */
    assert_non_null(j.connect_to);
    assert_string_equal(j.connect_to->data, "www.example.com:8443:127.0.0.1:8443");
    char *url = NULL;
    assert_int_equal(curl_easy_getinfo(j.easy, CURLINFO_EFFECTIVE_URL, &url), CURLE_OK);
    assert_string_equal(url, "https://www.example.com:8443/");
    curl_slist_free_all(j.connect_to);
    curl_easy_cleanup(j.easy);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tcp_up),
        cmocka_unit_test(test_tcp_refused),
        cmocka_unit_test(test_http_result),
        cmocka_unit_test(test_http_setup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
