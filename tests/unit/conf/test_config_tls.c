/*
 * test_config_tls.c — "tls:" (src/conf/config_tls.c) and a zone's transfer_tls: defaults, every
 * key, bare addresses taking port 853, errors with file:line, the copy, the restart-only
 * comparison, and the settings handed to the workers (config_server_settings()).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "conf_test_util.h"

#include <arpa/inet.h>
#include <netinet/in.h>

static uint16_t port_of(const config_listen_t *l)
{
    return l->addr.ss_family == AF_INET ? ntohs(((const struct sockaddr_in *)&l->addr)->sin_port)
                                        : ntohs(((const struct sockaddr_in6 *)&l->addr)->sin6_port);
}

static void test_defaults(void **state)
{
    (void)state;
    config_t c = load_text("listen: [\"127.0.0.1:5353\"]\n");
    assert_null(c.tls.certificate);
    assert_int_equal(c.tls.nlisten, 0);
    server_settings_t s = config_server_settings(&c);
    assert_int_equal(s.tls.nlisten, 0); /* no DoT listener */
    config_free(&c);
    c = load_text("tls:\n  listen: 127.0.0.1\n  certificate: dot.pem\n  key: /etc/tern/dot.key\n");
    assert_int_equal(c.tls.nlisten, 1);
    assert_int_equal(port_of(&c.tls.listen[0]), 853); /* RFC 7858 §3.1 */
    assert_false(c.tls.listen[0].udp);
    assert_true(c.tls.listen[0].tcp);
    assert_string_equal(c.tls.certificate, "/tmp/dot.pem"); /* the config's directory */
    assert_string_equal(c.tls.key, "/etc/tern/dot.key");
    assert_null(c.tls.client_ca);
    assert_int_equal(c.tls.max_connections, 128);
    assert_int_equal(c.tls.handshake_timeout_ms, 3000);
    assert_int_equal(c.tls.max_handshakes, 64);
    assert_int_equal(c.tls.max_handshakes_per_client, 8);
    assert_true(c.tls.session_tickets);
    config_free(&c);
    c = load_text("tls: ~\n");
    assert_int_equal(c.tls.nlisten, 0);
    config_free(&c);
}

static void test_full(void **state)
{
    (void)state;
    config_t c = load_text("tls:\n"
                           "  listen: [\"192.0.2.53:8853\", \"[2001:db8::53]\", \"::1\"]\n"
                           "  certificate: /etc/tern/dot.pem\n"
                           "  key: /etc/tern/dot.key\n"
                           "  client_ca: /etc/tern/ca.pem\n"
                           "  max_connections: 32\n"
                           "  handshake_timeout_ms: 500\n"
                           "  max_handshakes: 16\n"
                           "  max_handshakes_per_client: 2\n"
                           "  session_tickets: false\n"
                           "zones:\n"
                           "  - {origin: a.test, file: a.zone, allow_transfer: [127.0.0.1],\n"
                           "     transfer_tls: required}\n"
                           "  - {origin: b.test, file: b.zone, transfer_tls: mutual}\n"
                           "  - {origin: c.test, file: c.zone}\n");
    assert_int_equal(c.tls.nlisten, 3);
    assert_int_equal(port_of(&c.tls.listen[0]), 8853);
    assert_int_equal(c.tls.listen[1].addr.ss_family, AF_INET6);
    assert_int_equal(port_of(&c.tls.listen[1]), 853);
    assert_int_equal(port_of(&c.tls.listen[2]), 853);
    assert_string_equal(c.tls.client_ca, "/etc/tern/ca.pem");
    assert_int_equal(c.zones[0].transfer_tls, CONFIG_TRANSFER_TLS_REQUIRED);
    assert_int_equal(c.zones[1].transfer_tls, CONFIG_TRANSFER_TLS_MUTUAL);
    assert_int_equal(c.zones[2].transfer_tls, CONFIG_TRANSFER_TLS_ANY);

    server_settings_t s = config_server_settings(&c);
    assert_int_equal(s.tls.nlisten, 3);
    assert_ptr_equal(s.tls.listen, c.tls.listen);
    assert_string_equal(s.tls.certificate, "/etc/tern/dot.pem");
    assert_string_equal(s.tls.client_ca, "/etc/tern/ca.pem");
    assert_int_equal(s.tls.max_connections, 32);
    assert_int_equal(s.tls.handshake_timeout_ms, 500);
    assert_int_equal(s.tls.max_handshakes, 16);
    assert_int_equal(s.tls.max_handshakes_per_client, 2);
    assert_false(s.tls.session_tickets);

    /* a copy owns its strings and keeps every value; a change is restart-only */
    config_t d;
    assert_int_equal(config_copy(&d, &c), 0);
    assert_ptr_not_equal(d.tls.certificate, c.tls.certificate);
    assert_string_equal(d.tls.key, "/etc/tern/dot.key");
    assert_int_equal(d.zones[1].transfer_tls, CONFIG_TRANSFER_TLS_MUTUAL);
    char buf[256] = "";
    assert_int_equal(config_restart_only_changes(&c, &d, buf, sizeof(buf)), 0);
    d.tls.max_handshakes = 17;
    assert_int_not_equal(config_restart_only_changes(&c, &d, buf, sizeof(buf)), 0);
    assert_non_null(strstr(buf, "tls"));
    config_free(&d);
    config_free(&c);
}

static void test_errors(void **state)
{
    (void)state;
    expect_error("tls:\n  certificate: a.pem\n  key: a.key\n", 2,
                 "tls: missing \"listen\" (the DoT addresses)");
    expect_error("tls:\n  listen: 127.0.0.1\n  certificate: a.pem\n", 2,
                 "tls: certificate and key are required");
    expect_error("tls:\n  listen: [\"127.0.0.1:99999\"]\n  certificate: a.pem\n  key: a.key\n", 2,
                 "tls: listen[0]: bad address \"127.0.0.1:99999\" (want ADDR, ADDR:PORT or "
                 "[V6]:PORT)");
    expect_error("tls:\n  listen: [dns.example]\n  certificate: a.pem\n  key: a.key\n", 2,
                 "tls: listen[0]: bad address \"dns.example\" (want ADDR, ADDR:PORT or "
                 "[V6]:PORT)");
    expect_error("tls:\n  listen: 127.0.0.1\n  certificate: a.pem\n  key: a.key\n"
                 "  handshake_timeout_ms: 10\n",
                 5, "tls: handshake_timeout_ms: 10 is out of range 100..60000");
    expect_error("tls:\n  listen: 127.0.0.1\n  certificate: a.pem\n  key: a.key\n  port: 853\n", 5,
                 "tls: unknown key \"port\" (want listen, certificate, key, client_ca, "
                 "max_connections, handshake_timeout_ms, max_handshakes, "
                 "max_handshakes_per_client, session_tickets)");
    expect_error("zones:\n  - {origin: a.test, file: a.zone, transfer_tls: always}\n", 2,
                 "zones[0]: transfer_tls: expected any, required or mutual, got \"always\"");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults),
        cmocka_unit_test(test_full),
        cmocka_unit_test(test_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
