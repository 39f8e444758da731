/*
 * test_config_aname.c — the ANAME upstreams (src/conf/config_aname.c): tern's "aname:" block,
 * redins' handler.upstream and older top-level upstream, upstream_fallback refused, the two
 * forms in one file refused; every bad value with its file:line and key path; copies,
 * comparisons and frees (run under ASan: nothing may leak).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "tern/common/err.h"
#include "tern/conf/config.h"

#include "conf_test_util.h"

/* u is host:port over protocol, waiting timeout_ms. */
static void expect_upstream(const config_upstream_t *u, const char *host, unsigned port, bool tcp,
                            unsigned timeout_ms)
{
    assert_non_null(u->host);
    assert_string_equal(u->host, host);
    assert_int_equal(u->port, port);
    assert_int_equal(u->tcp, tcp);
    assert_int_equal(u->timeout_ms, timeout_ms);
}

/* Nothing set: no upstreams, every slot empty. */
static void expect_none(const config_t *c)
{
    assert_int_equal(c->aname.nupstreams, 0);
    for (size_t i = 0; i < CONFIG_MAX_UPSTREAMS; i++)
        assert_null(c->aname.upstreams[i].host);
}

/* ---- tern's aname: ------------------------------------------------------------------------ */

static void test_defaults(void **state)
{
    (void)state;
    config_t c;
    config_init(&c);
    expect_none(&c);
    config_free(&c);
    /* ~, an empty block, no upstreams, an empty list: none */
    static const char *const none[] = {"aname: ~\n",
                                       "aname:\n",
                                       "aname: null\n",
                                       "aname: {}\n",
                                       "aname:\n  upstreams: ~\n",
                                       "aname:\n  upstreams: []\n"};
    for (size_t i = 0; i < sizeof(none) / sizeof(none[0]); i++) {
        c = load_text(none[i]);
        expect_none(&c);
        config_free(&c);
    }
    /* an entry with its address only takes every default: port 53, udp, 400 ms (redins') */
    c = load_text("aname:\n  upstreams:\n    - address: 192.0.2.53\n");
    assert_int_equal(c.aname.nupstreams, 1);
    expect_upstream(&c.aname.upstreams[0], "192.0.2.53", 53, false, 400);
    assert_null(c.aname.upstreams[1].host);
    config_free(&c);
}

static void test_yaml(void **state)
{
    (void)state;
    config_t c = load_text("aname:\n"
                           "  upstreams:\n"
                           "    - address: 127.0.0.1\n"
                           "      port: 5353\n"
                           "      protocol: tcp\n"
                           "      timeout: 1500\n"
                           "    - ip: \"2001:db8::53\"\n"
                           "      protocol: udp\n"
                           "    - {address: \"::1\", port: 65535, timeout: 60000}\n"
                           "    - {address: 10.0.0.1, port: 1, timeout: 1}\n"
                           "    - address: 127.0.0.1\n" /* the same server over udp: fine */
                           "      port: 5353\n");
    assert_int_equal(c.aname.nupstreams, 5);
    expect_upstream(&c.aname.upstreams[0], "127.0.0.1", 5353, true, 1500);
    expect_upstream(&c.aname.upstreams[1], "2001:db8::53", 53, false, 400);
    expect_upstream(&c.aname.upstreams[2], "::1", 65535, false, 60000);
    expect_upstream(&c.aname.upstreams[3], "10.0.0.1", 1, false, 1);
    expect_upstream(&c.aname.upstreams[4], "127.0.0.1", 5353, false, 400);
    config_free(&c);
    expect_none(&c);

    /* eight is the most */
    c = load_text("aname:\n  upstreams: [{address: 10.0.0.1}, {address: 10.0.0.2}, "
                  "{address: 10.0.0.3}, {address: 10.0.0.4}, {address: 10.0.0.5}, "
                  "{address: 10.0.0.6}, {address: 10.0.0.7}, {address: 10.0.0.8}]\n");
    assert_int_equal(c.aname.nupstreams, CONFIG_MAX_UPSTREAMS);
    expect_upstream(&c.aname.upstreams[7], "10.0.0.8", 53, false, 400);
    config_free(&c);

    /* JSON is YAML: the same block in a JSON config */
    c = load_text("{\"aname\": {\"upstreams\": [{\"address\": \"198.51.100.1\", \"port\": 53, "
                  "\"protocol\": \"tcp\", \"timeout\": 250}]}}\n");
    assert_int_equal(c.aname.nupstreams, 1);
    expect_upstream(&c.aname.upstreams[0], "198.51.100.1", 53, true, 250);
    config_free(&c);

    /* a second file replaces the list, and aname: ~ in it clears it */
    char err[512] = "";
    c = load_text("aname: {upstreams: [{address: 10.0.0.1}, {address: 10.0.0.2}]}\n");
    const char *path = write_tmp("aname: {upstreams: [{address: 10.0.0.3}]}\n");
    assert_int_equal(config_load(&c, path, err, sizeof(err)), 0);
    unlink(path);
    assert_int_equal(c.aname.nupstreams, 1);
    expect_upstream(&c.aname.upstreams[0], "10.0.0.3", 53, false, 400);
    assert_null(c.aname.upstreams[1].host);
    path = write_tmp("aname: ~\n");
    assert_int_equal(config_load(&c, path, err, sizeof(err)), 0);
    unlink(path);
    expect_none(&c);
    config_free(&c);
}

static void test_yaml_errors(void **state)
{
    (void)state;
    static const char keys[] = "address, ip, port, protocol, timeout";
    char msg[512];
    /* the block */
    expect_error("aname: true\n", 1,
                 "aname: expected a mapping {upstreams, state_file, ready_wait, max_stale}, got a "
                 "plain scalar");
    expect_error(
        "aname: [127.0.0.1]\n", 1,
        "aname: expected a mapping {upstreams, state_file, ready_wait, max_stale}, got a list");
    expect_error(
        "aname:\n  upstream: []\n", 2,
        "aname: unknown key \"upstream\" (want upstreams, state_file, ready_wait, max_stale)");
    expect_error("aname:\n  upstreams: []\n  upstreams: []\n", 3,
                 "aname: duplicate key \"upstreams\" (first at line 2)");
    expect_error("aname: ~\naname: ~\n", 2, "aname: duplicate key (first at line 1)");
    /* not a list */
    expect_error("aname:\n  upstreams: 127.0.0.1\n", 2,
                 "aname: upstreams: expected a list of {address, port, protocol, timeout}, got a "
                 "plain scalar");
    expect_error("aname:\n  upstreams: {address: 127.0.0.1}\n", 2,
                 "aname: upstreams: expected a list of {address, port, protocol, timeout}, got a "
                 "mapping");
    expect_error("aname:\n  upstreams:\n    - 127.0.0.1\n", 3,
                 "aname: upstreams[0]: expected a mapping {address, ip, port, protocol, "
                 "timeout}, got a plain scalar");
    /* more than 8: the ninth's line */
    expect_error("aname:\n  upstreams:\n"
                 "    - {address: 10.0.0.1}\n    - {address: 10.0.0.2}\n"
                 "    - {address: 10.0.0.3}\n    - {address: 10.0.0.4}\n"
                 "    - {address: 10.0.0.5}\n    - {address: 10.0.0.6}\n"
                 "    - {address: 10.0.0.7}\n    - {address: 10.0.0.8}\n"
                 "    - {address: 10.0.0.9}\n",
                 11,
                 "aname: upstreams: more than 8 upstreams (each is tried in turn, for up to its "
                 "timeout)");
    /* the address */
    expect_error("aname:\n  upstreams:\n    - address: dns.google\n", 3,
                 "aname: upstreams[0]: address: \"dns.google\" is not a numeric IP address: tern "
                 "does not resolve the upstream's own name");
    expect_error("aname:\n  upstreams:\n    - {address: 127.0.0.1}\n    - ip: localhost\n", 4,
                 "aname: upstreams[1]: ip: \"localhost\" is not a numeric IP address: tern does "
                 "not resolve the upstream's own name");
    expect_error("aname:\n  upstreams:\n    - address: \"127.0.0.1:53\"\n", 3,
                 "aname: upstreams[0]: address: bad address \"127.0.0.1:53\" (want an IPv4 or "
                 "IPv6 address, no port: give the port in port)");
    expect_error("aname:\n  upstreams:\n    - address: \"[::1]:53\"\n", 3,
                 "aname: upstreams[0]: address: bad address \"[::1]:53\" (want an IPv4 or IPv6 "
                 "address, no port: give the port in port)");
    expect_error("aname:\n  upstreams:\n    - address: 10.1\n", 3,
                 "aname: upstreams[0]: address: bad address \"10.1\" (want an IPv4 or IPv6 "
                 "address, no port: give the port in port)");
    expect_error("aname:\n  upstreams:\n    - address: \"\"\n", 3,
                 "aname: upstreams[0]: address: bad address \"\" (want an IPv4 or IPv6 address, "
                 "no port: give the port in port)");
    expect_error("aname:\n  upstreams:\n    - address: ~\n", 3,
                 "aname: upstreams[0]: address: expected an IPv4 or IPv6 address, got nothing");
    expect_error("aname:\n  upstreams:\n    - address: [127.0.0.1]\n", 3,
                 "aname: upstreams[0]: address: expected an IPv4 or IPv6 address, got a list");
    expect_error("aname:\n  upstreams:\n    - port: 53\n", 3,
                 "aname: upstreams[0]: missing \"address\" (the server's IPv4 or IPv6 address)");
    expect_error("aname:\n  upstreams:\n    - address: 127.0.0.1\n      ip: 127.0.0.2\n", 4,
                 "aname: upstreams[0]: ip: give address or ip, not both");
    /* port, protocol, timeout */
    expect_error("aname:\n  upstreams:\n    - address: 127.0.0.1\n      port: 0\n", 4,
                 "aname: upstreams[0]: port: 0 is out of range 1..65535");
    expect_error("aname:\n  upstreams:\n    - address: 127.0.0.1\n      port: 65536\n", 4,
                 "aname: upstreams[0]: port: 65536 is out of range 1..65535");
    expect_error("aname:\n  upstreams:\n    - address: 127.0.0.1\n      port: \"53\"\n", 4,
                 "aname: upstreams[0]: port: expected an integer, got \"53\"");
    expect_error("aname:\n  upstreams:\n    - address: 127.0.0.1\n      protocol: sctp\n", 4,
                 "aname: upstreams[0]: protocol: expected udp or tcp, got \"sctp\"");
    expect_error("aname:\n  upstreams:\n    - address: 127.0.0.1\n      protocol: UDP\n", 4,
                 "aname: upstreams[0]: protocol: expected udp or tcp, got \"UDP\"");
    expect_error("aname:\n  upstreams:\n    - address: 127.0.0.1\n      protocol: tcp-tls\n", 4,
                 "aname: upstreams[0]: protocol: \"tcp-tls\" is not supported (DNS over TLS to an "
                 "upstream): give udp or tcp");
    expect_error("aname:\n  upstreams:\n    - address: 127.0.0.1\n      timeout: 0\n", 4,
                 "aname: upstreams[0]: timeout: 0 is out of range 1..60000");
    expect_error("aname:\n  upstreams:\n    - address: 127.0.0.1\n      timeout: 60001\n", 4,
                 "aname: upstreams[0]: timeout: 60001 is out of range 1..60000");
    expect_error("aname:\n  upstreams:\n    - address: 127.0.0.1\n      timeout: 1s\n", 4,
                 "aname: upstreams[0]: timeout: expected an integer, got \"1s\"");
    /* unknown and duplicate keys */
    snprintf(msg, sizeof(msg), "aname: upstreams[0]: unknown key \"tls\" (want %s)", keys);
    expect_error("aname:\n  upstreams:\n    - address: 127.0.0.1\n      tls: false\n", 4, msg);
    expect_error("aname:\n  upstreams:\n    - address: 127.0.0.1\n      port: 53\n      port: 54\n",
                 5, "aname: upstreams[0]: duplicate key \"port\" (first at line 4)");
    /* the same server asked the same way twice ("::1" and "0::1" are one address) */
    expect_error("aname:\n  upstreams:\n    - address: \"::1\"\n    - address: \"0::1\"\n", 4,
                 "aname: upstreams[1]: 0::1 port 53 over udp is given twice (first at line 3)");
    expect_error("aname:\n  upstreams:\n    - {address: 127.0.0.1, protocol: tcp}\n"
                 "    - {address: 127.0.0.2}\n    - {ip: 127.0.0.1, port: 53, protocol: tcp}\n",
                 5,
                 "aname: upstreams[2]: 127.0.0.1 port 53 over tcp is given twice (first at line "
                 "3)");
}

/* ---- redins' upstream --------------------------------------------------------------------- */

static void test_redins_handler_upstream(void **state)
{
    (void)state;
    /* redins' own config.json form, with its defaults for what an entry leaves out */
    config_t c = load_text("{\n"
                           "  \"handler\": {\n"
                           "    \"upstream_fallback\": false,\n"
                           "    \"upstream\": [{\n"
                           "      \"ip\": \"1.1.1.1\",\n"
                           "      \"port\": 53,\n"
                           "      \"protocol\": \"udp\",\n"
                           "      \"timeout\": 400\n"
                           "    }, {\n"
                           "      \"ip\": \"8.8.8.8\"\n"
                           "    }, {\n"
                           "      \"ip\": \"2606:4700:4700::1111\",\n"
                           "      \"port\": 5353,\n"
                           "      \"protocol\": \"tcp\",\n"
                           "      \"timeout\": 2000\n"
                           "    }]\n"
                           "  }\n"
                           "}\n");
    assert_int_equal(c.aname.nupstreams, 3);
    expect_upstream(&c.aname.upstreams[0], "1.1.1.1", 53, false, 400);
    expect_upstream(&c.aname.upstreams[1], "8.8.8.8", 53, false, 400);
    expect_upstream(&c.aname.upstreams[2], "2606:4700:4700::1111", 5353, true, 2000);
    assert_true(c.redis.enabled); /* the handler's own business, as ever */
    config_free(&c);
    expect_none(&c);

    /* an empty list is none, and so is null */
    c = load_text("{\"handler\": {\"upstream\": []}}\n");
    expect_none(&c);
    config_free(&c);
    c = load_text("{\"handler\": {\"upstream\": null}}\n");
    expect_none(&c);
    config_free(&c);
    /* no upstream in handler: none */
    c = load_text("{\"handler\": {\"zone_reload\": 60}}\n");
    expect_none(&c);
    config_free(&c);
    /* tern's word works in redins' list too */
    c = load_text("{\"handler\": {\"upstream\": [{\"address\": \"192.0.2.1\"}]}}\n");
    expect_upstream(&c.aname.upstreams[0], "192.0.2.1", 53, false, 400);
    config_free(&c);
}

static void test_redins_top_level_upstream(void **state)
{
    (void)state;
    /* older redins: the same list at the top level */
    config_t c = load_text("{\n"
                           "  \"upstream\": [{\n"
                           "    \"ip\": \"1.1.1.1\",\n"
                           "    \"port\": 53,\n"
                           "    \"protocol\": \"udp\",\n"
                           "    \"timeout\": 400\n"
                           "  },{\n"
                           "    \"ip\": \"8.8.8.8\",\n"
                           "    \"protocol\": \"tcp\"\n"
                           "  }]\n"
                           "}\n");
    assert_int_equal(c.aname.nupstreams, 2);
    expect_upstream(&c.aname.upstreams[0], "1.1.1.1", 53, false, 400);
    expect_upstream(&c.aname.upstreams[1], "8.8.8.8", 53, true, 400);
    /* a redins config.json: its ratelimit would take redins' defaults */
    assert_false(c.redis.enabled);
    config_free(&c);
    /* some versions had one object */
    c = load_text("{\"upstream\": {\"ip\": \"9.9.9.9\", \"port\": 53, \"protocol\": \"udp\", "
                  "\"timeout\": 300}}\n");
    assert_int_equal(c.aname.nupstreams, 1);
    expect_upstream(&c.aname.upstreams[0], "9.9.9.9", 53, false, 300);
    config_free(&c);
    c = load_text("upstream: []\n");
    expect_none(&c);
    config_free(&c);
    /* a redins key: "ratelimit" left without enable is off, as in redins */
    c = load_text("upstream: []\nratelimit: {rate: 10}\n");
    assert_false(c.ratelimit.enabled);
    config_free(&c);
}

static void test_redins_errors(void **state)
{
    (void)state;
    /* errors name redins' key path and word */
    expect_error("{\"handler\": {\n  \"upstream\": [{\"port\": 53}]}}\n", 2,
                 "handler: upstream[0]: missing \"ip\" (the server's IPv4 or IPv6 address)");
    expect_error("{\"handler\": {\n  \"upstream\": [\n    {\"ip\": \"dns.google\"}]}}\n", 3,
                 "handler: upstream[0]: ip: \"dns.google\" is not a numeric IP address: tern "
                 "does not resolve the upstream's own name");
    expect_error("{\"handler\": {\n  \"upstream\": [{\"ip\": \"1.1.1.1\",\n"
                 "    \"timeout\": 0}]}}\n",
                 3, "handler: upstream[0]: timeout: 0 is out of range 1..60000");
    expect_error("{\"handler\": {\n  \"upstream\": [{\"ip\": \"1.1.1.1\", \"port\": 0}]}}\n", 2,
                 "handler: upstream[0]: port: 0 is out of range 1..65535");
    expect_error("{\"handler\": {\n  \"upstream\": [{\"ip\": \"1.1.1.1\",\n"
                 "    \"protocol\": \"tcp-tls\"}]}}\n",
                 3,
                 "handler: upstream[0]: protocol: \"tcp-tls\" is not supported (DNS over TLS to "
                 "an upstream): give udp or tcp");
    expect_error("{\"handler\": {\n  \"upstream\": \"1.1.1.1\"}}\n", 2,
                 "handler: upstream: expected a list of {ip, port, protocol, timeout}, got a "
                 "string");
    expect_error("{\"handler\": {\n  \"upstream\": [{\"ip\": \"1.1.1.1\", \"address\": "
                 "\"1.0.0.1\"}]}}\n",
                 2, "handler: upstream[0]: address: give address or ip, not both");
    /* the oldest form had enable: a key no list of upstreams has */
    expect_error("{\n\"upstream\": {\"enable\": true, \"ip\": \"1.1.1.1\"}}\n", 2,
                 "upstream: unknown key \"enable\" (want address, ip, port, protocol, timeout)");
    expect_error("{\n\"upstream\": [{\"ip\": \"1.1.1.1\"},\n  {\"ip\": \"1.1.1.1\"}]}\n", 3,
                 "upstream[1]: 1.1.1.1 port 53 over udp is given twice (first at line 2)");
    expect_error("upstream: 1.1.1.1\n", 1,
                 "upstream: expected a list of {ip, port, protocol, timeout}, got a plain scalar");
}

/* handler.upstream_fallback: false is fine; true would forward every query tern does not serve. */
static void test_upstream_fallback(void **state)
{
    (void)state;
    config_t c = load_text("{\"handler\": {\"upstream_fallback\": false, \"upstream\": "
                           "[{\"ip\": \"1.1.1.1\"}]}}\n");
    assert_int_equal(c.aname.nupstreams, 1);
    config_free(&c);
    expect_error("{\"handler\": {\n  \"upstream\": [{\"ip\": \"1.1.1.1\"}],\n"
                 "  \"upstream_fallback\": true}}\n",
                 3,
                 "handler: upstream_fallback: true is not supported: forwarding every query tern "
                 "is not authoritative for would make it an open resolver (a reflection and "
                 "amplification tool, and a cache-poisoning target); tern asks upstreams only for "
                 "ANAME targets");
}

/* tern's aname and a redins upstream (top level or handler's) set the same list: one file may not
 * give two of them, whatever their order; the error names both. */
static void test_conflicts(void **state)
{
    (void)state;
    expect_error("aname:\n  upstreams: [{address: 127.0.0.1}]\n"
                 "handler:\n  upstream: [{ip: 127.0.0.1}]\n",
                 4, "handler: upstream: conflicts with aname at line 1 (give one of them)");
    expect_error("{\"handler\": {\n  \"upstream\": [{\"ip\": \"1.1.1.1\"}]},\n"
                 " \"aname\": {\"upstreams\": []}}\n",
                 3, "aname: conflicts with handler: upstream at line 2 (give one of them)");
    expect_error("aname: ~\nupstream: []\n", 2,
                 "upstream: conflicts with aname at line 1 (give one of them)");
    expect_error("upstream: [{ip: 1.1.1.1}]\n\naname:\n  upstreams: [{address: 1.1.1.1}]\n", 3,
                 "aname: conflicts with upstream at line 1 (give one of them)");
    expect_error("upstream: []\nhandler:\n  upstream: []\n", 3,
                 "handler: upstream: conflicts with upstream at line 1 (give one of them)");
    /* a handler without upstream beside aname is fine */
    config_t c =
        load_text("handler: {zone_reload: 60}\naname: {upstreams: [{address: \"::1\"}]}\n");
    assert_true(c.redis.enabled);
    assert_int_equal(c.aname.nupstreams, 1);
    expect_upstream(&c.aname.upstreams[0], "::1", 53, false, 400);
    /* and each in its own file: the second file replaces the list */
    char err[512] = "";
    const char *path = write_tmp("upstream: [{ip: 1.1.1.1, port: 5353}]\n");
    assert_int_equal(config_load(&c, path, err, sizeof(err)), 0);
    unlink(path);
    assert_int_equal(c.aname.nupstreams, 1);
    expect_upstream(&c.aname.upstreams[0], "1.1.1.1", 5353, false, 400);
    config_free(&c);
}

/* ---- copies, comparisons, reloads --------------------------------------------------------- */

static const char aname_text[] = "aname:\n"
                                 "  upstreams:\n"
                                 "    - {address: 127.0.0.1, port: 5353, protocol: tcp}\n"
                                 "    - {address: \"2001:db8::1\", timeout: 900}\n";

static void test_copy(void **state)
{
    (void)state;
    config_t a = load_text(aname_text), b;
    assert_int_equal(config_copy(&b, &a), 0);
    assert_true(config_same_aname(&a.aname, &b.aname));
    assert_int_equal(b.aname.nupstreams, 2);
    for (size_t i = 0; i < 2; i++)
        assert_ptr_not_equal(b.aname.upstreams[i].host, a.aname.upstreams[i].host);
    /* independent: freeing one leaves the other whole (ASan would see a use after free) */
    config_free(&a);
    expect_none(&a);
    expect_upstream(&b.aname.upstreams[0], "127.0.0.1", 5353, true, 400);
    expect_upstream(&b.aname.upstreams[1], "2001:db8::1", 53, false, 900);
    assert_null(b.aname.upstreams[2].host);
    config_free(&b);
    /* none copies as none */
    config_init(&a);
    assert_int_equal(config_copy(&b, &a), 0);
    expect_none(&b);
    config_free(&b);
}

static void test_same(void **state)
{
    (void)state;
    config_t a = load_text(aname_text);
    static const char *const differ[] = {
        /* one fewer, one more, another order */
        "aname: {upstreams: [{address: 127.0.0.1, port: 5353, protocol: tcp}]}\n",
        "aname: {upstreams: [{address: 127.0.0.1, port: 5353, protocol: tcp}, "
        "{address: \"2001:db8::1\", timeout: 900}, {address: 10.0.0.1}]}\n",
        "aname: {upstreams: [{address: \"2001:db8::1\", timeout: 900}, "
        "{address: 127.0.0.1, port: 5353, protocol: tcp}]}\n",
        /* each field */
        "aname: {upstreams: [{address: 127.0.0.2, port: 5353, protocol: tcp}, "
        "{address: \"2001:db8::1\", timeout: 900}]}\n",
        "aname: {upstreams: [{address: 127.0.0.1, port: 5354, protocol: tcp}, "
        "{address: \"2001:db8::1\", timeout: 900}]}\n",
        "aname: {upstreams: [{address: 127.0.0.1, port: 5353}, "
        "{address: \"2001:db8::1\", timeout: 900}]}\n",
        "aname: {upstreams: [{address: 127.0.0.1, port: 5353, protocol: tcp}, "
        "{address: \"2001:db8::1\", timeout: 901}]}\n",
        "aname: ~\n",
    };
    for (size_t i = 0; i < sizeof(differ) / sizeof(differ[0]); i++) {
        config_t b = load_text(differ[i]);
        if (config_same_aname(&a.aname, &b.aname))
            fail_msg("'%s' is the same as the base", differ[i]);
        config_free(&b);
    }
    /* redins' form of the same list is the same */
    config_t b = load_text("{\"handler\": {\"upstream\": [\n"
                           "  {\"ip\": \"127.0.0.1\", \"port\": 5353, \"protocol\": \"tcp\"},\n"
                           "  {\"ip\": \"2001:db8::1\", \"port\": 53, \"timeout\": 900}]}}\n");
    assert_true(config_same_aname(&a.aname, &b.aname));
    config_free(&b);
    config_free(&a);
}

/* A reload may change the upstreams: never a restart-only option. */
static void test_not_restart_only(void **state)
{
    (void)state;
    config_t a = load_text(aname_text), b = load_text("aname: {upstreams: [{address: \"::1\"}]}\n");
    char buf[256];
    assert_int_equal(config_restart_only_changes(&a, &b, buf, sizeof(buf)), 0);
    assert_string_equal(buf, "");
    assert_int_equal(config_restart_only_changes(&b, &a, buf, sizeof(buf)), 0);
    config_free(&b);
    b = load_text("{\"upstream\": [{\"ip\": \"1.1.1.1\"}]}\n");
    assert_int_equal(config_restart_only_changes(&a, &b, buf, sizeof(buf)), 0);
    config_free(&b);
    config_free(&a);
    /* the line of aname is not kept: it has no value of its own */
    a = load_text(aname_text);
    assert_int_equal(config_line_of(&a, "aname"), 0);
    config_free(&a);
}

/* The start-up keys: defaults, values (state_file relative to the config's directory), bounds,
 * copies, and the state file's default in systemd's $STATE_DIRECTORY. */
static void test_state_and_ready(void **state)
{
    (void)state;
    char buf[256];
    config_t c;
    config_init(&c);
    assert_null(c.aname.state_file);
    assert_int_equal(c.aname.ready_wait_ms, 5000);
    assert_int_equal(c.aname.max_stale_s, 86400);
    unsetenv("STATE_DIRECTORY");
    assert_null(config_aname_state_file(&c.aname, buf, sizeof(buf)));
    setenv("STATE_DIRECTORY", "/var/lib/tern:/var/lib/other", 1);
    assert_string_equal(config_aname_state_file(&c.aname, buf, sizeof(buf)),
                        "/var/lib/tern/aname.state");
    assert_null(config_aname_state_file(&c.aname, buf, 10)); /* does not fit: none */
    setenv("STATE_DIRECTORY", "relative", 1);
    assert_null(config_aname_state_file(&c.aname, buf, sizeof(buf)));
    unsetenv("STATE_DIRECTORY");
    config_free(&c);

    c = load_text("aname:\n  state_file: /srv/tern/aname.state\n  ready_wait: 0\n"
                  "  max_stale: 604800\n  upstreams: [{address: 192.0.2.53}]\n");
    assert_string_equal(c.aname.state_file, "/srv/tern/aname.state");
    assert_string_equal(config_aname_state_file(&c.aname, buf, sizeof(buf)),
                        "/srv/tern/aname.state");
    assert_int_equal(c.aname.ready_wait_ms, 0);
    assert_int_equal(c.aname.max_stale_s, 604800);
    assert_int_equal(c.aname.nupstreams, 1);
    config_t d;
    assert_int_equal(config_copy(&d, &c), 0);
    assert_ptr_not_equal(d.aname.state_file, c.aname.state_file);
    config_free(&c);
    assert_string_equal(d.aname.state_file, "/srv/tern/aname.state");
    config_free(&d);

    c = load_text("aname:\n  state_file: aname.state\n");
    assert_true(c.aname.state_file[0] == '/'); /* resolved against the config's directory */
    assert_non_null(strstr(c.aname.state_file, "/aname.state"));
    config_free(&c);

    expect_error("aname:\n  ready_wait: 60001\n", 2,
                 "aname: ready_wait: 60001 is out of range 0..60000");
    expect_error("aname:\n  max_stale: 604801\n", 2,
                 "aname: max_stale: 604801 is out of range 0..604800");
    expect_error("aname:\n  max_stale: -1\n", 2, "aname: max_stale: -1 is out of range 0..604800");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults),
        cmocka_unit_test(test_yaml),
        cmocka_unit_test(test_yaml_errors),
        cmocka_unit_test(test_redins_handler_upstream),
        cmocka_unit_test(test_redins_top_level_upstream),
        cmocka_unit_test(test_redins_errors),
        cmocka_unit_test(test_upstream_fallback),
        cmocka_unit_test(test_conflicts),
        cmocka_unit_test(test_copy),
        cmocka_unit_test(test_same),
        cmocka_unit_test(test_not_restart_only),
        cmocka_unit_test(test_state_and_ready),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
