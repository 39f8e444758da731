/*
 * test_config_limit.c — the flood-resistance settings (src/conf/config_limit.c): the global and
 * the zones' acl, ratelimit (tern's YAML and redins' config.json), rrl, cookies and the TCP
 * per-client cap; prefixes and prefix lists; every bad value with its file:line and key path;
 * copies and frees (run under ASan: nothing may leak).
 */
#include <arpa/inet.h>
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

/* p is the prefix text (as inet_ntop writes the address, then /len). */
static void assert_prefix(const config_prefix_t *p, const char *text)
{
    char ip[INET6_ADDRSTRLEN], got[64];
    assert_non_null(inet_ntop(p->family == 4 ? AF_INET : AF_INET6, p->addr, ip, sizeof(ip)));
    snprintf(got, sizeof(got), "%s/%u", ip, p->len);
    assert_string_equal(got, text);
    if (p->family == 4) { /* nothing past the four bytes */
        static const uint8_t zero[12];
        assert_memory_equal(p->addr + 4, zero, sizeof(zero));
    }
}

/* ---- defaults ----------------------------------------------------------------------------- */

static void test_defaults(void **state)
{
    (void)state;
    config_t c;
    config_init(&c);
    assert_false(c.acl.enabled);
    assert_int_equal(c.acl.allow.n, 0);
    assert_null(c.acl.allow.p);
    assert_int_equal(c.acl.deny.n, 0);
    assert_int_equal(c.acl.action, CONFIG_LIMIT_REFUSE);
    /* ratelimit: off; a given block's defaults otherwise (redins' 60 a minute, 10 at once) */
    assert_false(c.ratelimit.enabled);
    assert_int_equal(c.ratelimit.rate, 60);
    assert_int_equal(c.ratelimit.burst, 10);
    assert_int_equal(c.ratelimit.whitelist.n, 0);
    assert_int_equal(c.ratelimit.blacklist.n, 0);
    assert_int_equal(c.ratelimit.action, CONFIG_LIMIT_REFUSE);
    assert_int_equal(c.ratelimit.blacklist_action, CONFIG_LIMIT_REFUSE);
    assert_int_equal(c.ratelimit.table_size, 65536);
    assert_false(c.rrl.enabled);
    assert_int_equal(c.rrl.rate, 20);
    assert_int_equal(c.rrl.burst, 0);
    assert_int_equal(c.rrl.slip, 2);
    assert_int_equal(c.rrl.prefix_v4, 24);
    assert_int_equal(c.rrl.prefix_v6, 56);
    assert_int_equal(c.rrl.whitelist.n, 0);
    assert_int_equal(c.rrl.table_size, 262144);
    assert_true(c.rrl.log);
    assert_false(c.cookies.enabled);
    assert_false(c.cookies.have_secret);
    assert_int_equal(c.cookies.rotate_s, 86400);
    assert_false(c.cookies.require);
    assert_int_equal(c.tcp_max_per_client, 64);
    assert_int_equal(c.tcp_client_prefix_v4, 32);
    assert_int_equal(c.tcp_client_prefix_v6, 64);
    config_free(&c);

    /* an empty block is on, with every default; ~ is off */
    c = load_text("acl: {}\nratelimit: {}\nrrl: {}\ncookies: {}\n");
    assert_true(c.acl.enabled);
    assert_int_equal(c.acl.allow.n + c.acl.deny.n, 0);
    assert_int_equal(c.acl.action, CONFIG_LIMIT_REFUSE);
    assert_true(c.ratelimit.enabled);
    assert_int_equal(c.ratelimit.rate, 60);
    assert_int_equal(c.ratelimit.burst, 10);
    assert_int_equal(c.ratelimit.table_size, 65536);
    assert_true(c.rrl.enabled);
    assert_int_equal(c.rrl.rate, 20);
    assert_int_equal(c.rrl.slip, 2);
    assert_true(c.rrl.log);
    assert_true(c.cookies.enabled);
    assert_false(c.cookies.have_secret);
    assert_int_equal(c.cookies.rotate_s, 86400);
    config_free(&c);
    c = load_text("acl: ~\nratelimit: ~\nrrl:\ncookies: null\n");
    assert_false(c.acl.enabled);
    assert_false(c.ratelimit.enabled);
    assert_false(c.rrl.enabled);
    assert_false(c.cookies.enabled);
    config_free(&c);
}

/* ---- every key ---------------------------------------------------------------------------- */

static void test_every_key(void **state)
{
    (void)state;
    config_t c =
        load_text("acl:\n"
                  "  allow: [192.0.2.0/24, \"2001:db8::/32\", 127.0.0.1, 2001:db8:1::/48]\n"
                  "  deny: [192.0.2.66]\n"
                  "  action: drop\n"
                  "ratelimit:\n"
                  "  enable: true\n"
                  "  rate: 120\n"
                  "  burst: 0\n"
                  "  whitelist: [127.0.0.1]\n"
                  "  blacklist: [10.10.10.1, 10.20.0.0/16]\n"
                  "  action: drop\n"
                  "  blacklist_action: drop\n"
                  "  table_size: 1024\n"
                  "rrl:\n"
                  "  enable: true\n"
                  "  rate: 5\n"
                  "  burst: 7\n"
                  "  slip: 0\n"
                  "  ipv4_prefix: 32\n"
                  "  ipv6_prefix: 128\n"
                  "  whitelist: [\"198.51.100.0/24\", \"::1\"]\n"
                  "  table_size: 16777216\n"
                  "  log: false\n"
                  "cookies:\n"
                  "  enable: true\n"
                  "  secret: \"000102030405060708090a0B0C0D0E0F\"\n"
                  "  require: true\n"
                  "tcp_max_per_client: 0\n"
                  "tcp_client_prefix_v4: 24\n"
                  "tcp_client_prefix_v6: 48\n");
    assert_true(c.acl.enabled);
    assert_int_equal(c.acl.allow.n, 4);
    assert_prefix(&c.acl.allow.p[0], "192.0.2.0/24");
    assert_prefix(&c.acl.allow.p[1], "2001:db8::/32");
    assert_prefix(&c.acl.allow.p[2], "127.0.0.1/32");
    assert_prefix(&c.acl.allow.p[3], "2001:db8:1::/48");
    assert_int_equal(c.acl.deny.n, 1);
    assert_prefix(&c.acl.deny.p[0], "192.0.2.66/32");
    assert_int_equal(c.acl.action, CONFIG_LIMIT_DROP);

    assert_true(c.ratelimit.enabled);
    assert_int_equal(c.ratelimit.rate, 120);
    assert_int_equal(c.ratelimit.burst, 0);
    assert_int_equal(c.ratelimit.whitelist.n, 1);
    assert_prefix(&c.ratelimit.whitelist.p[0], "127.0.0.1/32");
    assert_int_equal(c.ratelimit.blacklist.n, 2);
    assert_prefix(&c.ratelimit.blacklist.p[0], "10.10.10.1/32");
    assert_prefix(&c.ratelimit.blacklist.p[1], "10.20.0.0/16");
    assert_int_equal(c.ratelimit.action, CONFIG_LIMIT_DROP);
    assert_int_equal(c.ratelimit.blacklist_action, CONFIG_LIMIT_DROP);
    assert_int_equal(c.ratelimit.table_size, 1024);

    assert_true(c.rrl.enabled);
    assert_int_equal(c.rrl.rate, 5);
    assert_int_equal(c.rrl.burst, 7);
    assert_int_equal(c.rrl.slip, 0);
    assert_int_equal(c.rrl.prefix_v4, 32);
    assert_int_equal(c.rrl.prefix_v6, 128);
    assert_int_equal(c.rrl.whitelist.n, 2);
    assert_prefix(&c.rrl.whitelist.p[0], "198.51.100.0/24");
    assert_prefix(&c.rrl.whitelist.p[1], "::1/128");
    assert_int_equal(c.rrl.table_size, 16777216);
    assert_false(c.rrl.log);

    assert_true(c.cookies.enabled);
    assert_true(c.cookies.have_secret);
    for (int i = 0; i < 16; i++)
        assert_int_equal(c.cookies.secret[i], i);
    assert_true(c.cookies.require);

    assert_int_equal(c.tcp_max_per_client, 0);
    assert_int_equal(c.tcp_client_prefix_v4, 24);
    assert_int_equal(c.tcp_client_prefix_v6, 48);
    assert_int_equal(config_line_of(&c, "tcp_max_per_client"), 28);
    assert_int_equal(config_line_of(&c, "tcp_client_prefix_v6"), 30);
    config_free(&c);

    /* enable: false keeps the (checked) values; rotate_s without a secret */
    c = load_text("ratelimit: {enable: false, rate: 1}\nrrl: {enable: false, rate: 3}\n"
                  "cookies: {enable: false, rotate_s: 60}\n");
    assert_false(c.ratelimit.enabled);
    assert_int_equal(c.ratelimit.rate, 1);
    assert_false(c.rrl.enabled);
    assert_int_equal(c.rrl.rate, 3);
    assert_false(c.cookies.enabled);
    assert_false(c.cookies.have_secret);
    assert_int_equal(c.cookies.rotate_s, 60);
    config_free(&c);
    /* the bounds themselves */
    c = load_text("ratelimit: {rate: 6000000, burst: 1000000, table_size: 16777216}\n"
                  "rrl: {rate: 1000000, burst: 1000000, slip: 100, ipv4_prefix: 8, "
                  "ipv6_prefix: 16}\n"
                  "cookies: {rotate_s: 31536000, secret: ~}\n"
                  "tcp_max_per_client: 65535\ntcp_client_prefix_v4: 8\n"
                  "tcp_client_prefix_v6: 128\n");
    assert_int_equal(c.ratelimit.rate, 6000000);
    assert_int_equal(c.ratelimit.burst, 1000000);
    assert_int_equal(c.rrl.rate, 1000000);
    assert_int_equal(c.rrl.slip, 100);
    assert_int_equal(c.rrl.prefix_v4, 8);
    assert_int_equal(c.rrl.prefix_v6, 16);
    assert_int_equal(c.cookies.rotate_s, 31536000);
    assert_false(c.cookies.have_secret);
    assert_int_equal(c.tcp_max_per_client, 65535);
    assert_int_equal(c.tcp_client_prefix_v4, 8);
    assert_int_equal(c.tcp_client_prefix_v6, 128);
    config_free(&c);
}

/* ---- prefixes ----------------------------------------------------------------------------- */

static void expect_prefix(const char *text, const char *want)
{
    config_prefix_t p;
    char why[128] = "";
    int r = config_parse_prefix(&p, text, why, sizeof(why));
    if (r < 0)
        print_error("%s: %s\n", text, why);
    assert_int_equal(r, 0);
    assert_prefix(&p, want);
}

static void expect_bad_prefix(const char *text, const char *want)
{
    config_prefix_t p;
    char why[128] = "";
    assert_int_equal(config_parse_prefix(&p, text, why, sizeof(why)), TERN_EINVAL);
    assert_string_equal(why, want);
}

static void test_parse_prefix(void **state)
{
    (void)state;
    expect_prefix("192.0.2.0/24", "192.0.2.0/24");
    expect_prefix("192.0.2.1", "192.0.2.1/32");
    expect_prefix("192.0.2.1/32", "192.0.2.1/32");
    expect_prefix("0.0.0.0/0", "0.0.0.0/0");
    expect_prefix("10.0.0.0/8", "10.0.0.0/8");
    expect_prefix("192.0.2.128/25", "192.0.2.128/25");
    expect_prefix("2001:db8::/32", "2001:db8::/32");
    expect_prefix("2001:DB8::1", "2001:db8::1/128");
    expect_prefix("::/0", "::/0");
    expect_prefix("::1", "::1/128");
    expect_prefix("fe80::/10", "fe80::/10");
    expect_prefix("2001:db8:0:ff00::/56", "2001:db8:0:ff00::/56");
    expect_prefix("::ffff:192.0.2.1", "::ffff:192.0.2.1/128"); /* IPv6, as written */
    config_prefix_t p;
    char why[128];
    assert_int_equal(config_parse_prefix(&p, "10.0.0.0/8", why, sizeof(why)), 0);
    assert_int_equal(p.family, 4);
    assert_int_equal(p.len, 8);
    assert_int_equal(config_parse_prefix(&p, "::/0", why, sizeof(why)), 0);
    assert_int_equal(p.family, 6);
    assert_int_equal(p.len, 0);

    /* host bits: refused with the prefix meant */
    expect_bad_prefix("192.0.2.1/24", "host bits set; did you mean 192.0.2.0/24?");
    expect_bad_prefix("192.0.2.129/25", "host bits set; did you mean 192.0.2.128/25?");
    expect_bad_prefix("1.2.3.4/0", "host bits set; did you mean 0.0.0.0/0?");
    expect_bad_prefix("2001:db8::1/32", "host bits set; did you mean 2001:db8::/32?");
    expect_bad_prefix("2001:db8:0:ff80::/56", "host bits set; did you mean 2001:db8:0:ff00::/56?");
    expect_prefix("2001:db8:0:ff80::/57", "2001:db8:0:ff80::/57");
    /* lengths */
    expect_bad_prefix("192.0.2.0/33", "length 33 is out of range 0..32 for an IPv4 prefix");
    expect_bad_prefix("::/129", "length 129 is out of range 0..128 for an IPv6 prefix");
    expect_bad_prefix("192.0.2.0/", "the length after '/' must be a number 0..32");
    expect_bad_prefix("192.0.2.0/-1", "the length after '/' must be a number 0..32");
    expect_bad_prefix("192.0.2.0/+8", "the length after '/' must be a number 0..32");
    expect_bad_prefix("192.0.2.0/ 8", "the length after '/' must be a number 0..32");
    expect_bad_prefix("192.0.2.0/1000", "the length after '/' must be a number 0..32");
    expect_bad_prefix("::/0x10", "the length after '/' must be a number 0..128");
    expect_bad_prefix("192.0.2.0/24/8", "the length after '/' must be a number 0..32");
    expect_bad_prefix("2001:db8::/32 # c", "the length after '/' must be a number 0..128");
    /* text that is no address */
    static const char *const bad[] = {
        "",
        "/24",
        "x",
        "192.0.2",
        "192.0.2.256",
        "192.0.2.0 ",
        " 192.0.2.0",
        "192.0.2.0:53",
        "[::1]",
        "fe80::1%eth0",
        "::g",
        "1.2.3.4.5/8",
        "localhost",
        "0123456789012345678901234567890123456789012345678901234567890123456789/8"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        const char *want = "not an IPv4 or IPv6 address (want ADDR or ADDR/LEN)";
        assert_int_equal(config_parse_prefix(&p, bad[i], why, sizeof(why)), TERN_EINVAL);
        if (strcmp(why, want) != 0)
            fail_msg("'%s': %s", bad[i], why);
    }
    /* a short why is cut, not overrun */
    char small[8];
    assert_int_equal(config_parse_prefix(&p, "192.0.2.1/24", small, sizeof(small)), TERN_EINVAL);
    assert_string_equal(small, "host bi");
}

static void test_prefix_lists(void **state)
{
    (void)state;
    /* one prefix alone is a list of one (as listen takes one address); ~ and [] are none;
     * duplicates are harmless and kept */
    config_t c = load_text("acl:\n  allow: 10.0.0.0/8\n  deny: ~\n"
                           "ratelimit:\n  whitelist: []\n  blacklist:\n    - 192.0.2.1\n"
                           "    - 192.0.2.1\n    - \"2001:db8::/32\"\n"
                           "rrl:\n  whitelist: \"::/0\"\n");
    assert_int_equal(c.acl.allow.n, 1);
    assert_prefix(&c.acl.allow.p[0], "10.0.0.0/8");
    assert_int_equal(c.acl.deny.n, 0);
    assert_null(c.acl.deny.p);
    assert_int_equal(c.ratelimit.whitelist.n, 0);
    assert_null(c.ratelimit.whitelist.p);
    assert_int_equal(c.ratelimit.blacklist.n, 3);
    assert_prefix(&c.ratelimit.blacklist.p[1], "192.0.2.1/32");
    assert_prefix(&c.ratelimit.blacklist.p[2], "2001:db8::/32");
    assert_int_equal(c.rrl.whitelist.n, 1);
    assert_prefix(&c.rrl.whitelist.p[0], "::/0");
    config_free(&c);
}

/* A list at the bound passes; one more is an error at the first entry past it. */
static void test_prefix_list_bound(void **state)
{
    (void)state;
    const size_t max = 100000;
    size_t cap = 32 + (max + 1) * 24;
    char *text = malloc(cap);
    assert_non_null(text);
    size_t off = (size_t)snprintf(text, cap, "acl:\n  deny:\n");
    for (size_t i = 0; i < max; i++)
        off += (size_t)snprintf(text + off, cap - off, "  - 10.%zu.%zu.%zu\n", i >> 16,
                                (i >> 8) & 255, i & 255);
    config_t c = load_text(text);
    assert_int_equal(c.acl.deny.n, max);
    assert_prefix(&c.acl.deny.p[max - 1], "10.1.134.159/32");
    config_free(&c);
    snprintf(text + off, cap - off, "  - 192.0.2.1\n");
    expect_error(text, (unsigned)(max + 3), "acl: deny: more than 100000 prefixes");
    free(text);
}

/* ---- zones' acl --------------------------------------------------------------------------- */

static void test_zone_acl(void **state)
{
    (void)state;
    config_t c = load_text("zones:\n"
                           "  - origin: a.test\n    file: a.zone\n"
                           "  - origin: b.test\n    file: b.zone\n"
                           "    acl: {allow: [10.0.0.0/8, \"fd00::/8\"], deny: 10.9.9.9, "
                           "action: drop}\n"
                           "  - origin: c.test\n    file: c.zone\n    acl: {}\n"
                           "  - {origin: d.test, file: d.zone, acl: ~}\n");
    assert_int_equal(c.nzones, 4);
    assert_false(c.zones[0].acl.enabled);
    assert_true(c.zones[1].acl.enabled);
    assert_int_equal(c.zones[1].acl.allow.n, 2);
    assert_prefix(&c.zones[1].acl.allow.p[1], "fd00::/8");
    assert_int_equal(c.zones[1].acl.deny.n, 1);
    assert_int_equal(c.zones[1].acl.action, CONFIG_LIMIT_DROP);
    assert_true(c.zones[2].acl.enabled);
    assert_int_equal(c.zones[2].acl.allow.n, 0);
    assert_int_equal(c.zones[2].acl.action, CONFIG_LIMIT_REFUSE);
    assert_false(c.zones[3].acl.enabled);
    assert_false(c.acl.enabled); /* a zone's acl is not the global one */
    config_free(&c);

    /* zones added by hand (--zone, Redis) have none */
    config_init(&c);
    assert_int_equal(config_add_zone(&c, "x.test", "x.zone"), 0);
    assert_false(c.zones[0].acl.enabled);
    assert_null(c.zones[0].acl.allow.p);
    config_free(&c);

    /* an error in a zone's acl names the zone and the entry; nothing leaks (ASan) */
    expect_error("zones:\n  - origin: a.test\n    file: a.zone\n"
                 "  - origin: b.test\n    file: b.zone\n    acl:\n      allow:\n"
                 "        - 10.0.0.0/8\n        - 10.0.0.1/8\n",
                 9,
                 "zones[1]: acl: allow[1]: bad prefix \"10.0.0.1/8\": host bits set; did you "
                 "mean 10.0.0.0/8?");
    expect_error("zones:\n  - {origin: a.test, file: a.zone, acl: {allow: 10.0.0.0/8, "
                 "action: reject}}\n",
                 2, "zones[0]: acl: action: expected refuse or drop, got \"reject\"");
    expect_error("zones:\n  - {origin: a.test, file: a.zone, acl: [10.0.0.0/8]}\n", 2,
                 "zones[0]: acl: expected a mapping {allow, deny, action}, got a list");
    expect_error("zones:\n  - {origin: a.test, file: a.zone, acl: {allow: [], allow: []}}\n", 2,
                 "zones[0]: acl: duplicate key \"allow\" (first at line 2)");
    /* the acl parsed, then a bad format: the acl is freed */
    expect_error("zones:\n  - {origin: a.test, file: a.zone, acl: {deny: 10.0.0.0/8}, "
                 "format: xml}\n",
                 2, "zones[0]: format: expected rfc1035 or json, got \"xml\"");
}

/* ---- redins' config.json ------------------------------------------------------------------ */

static void test_redins_ratelimit(void **state)
{
    (void)state;
    /* redins' block as its config.json has it */
    config_t c = load_text("{\n"
                           "  \"server\": [{\"ip\": \"127.0.0.1\", \"port\": 1053}],\n"
                           "  \"ratelimit\": {\n"
                           "    \"enable\": true,\n"
                           "    \"burst\": 10,\n"
                           "    \"rate\": 60,\n"
                           "    \"whitelist\": [\"127.0.0.1\", \"::1\"],\n"
                           "    \"blacklist\": [\"10.10.10.1\"]\n"
                           "  }\n"
                           "}\n");
    assert_true(c.ratelimit.enabled);
    assert_int_equal(c.ratelimit.rate, 60);
    assert_int_equal(c.ratelimit.burst, 10);
    assert_int_equal(c.ratelimit.whitelist.n, 2);
    assert_prefix(&c.ratelimit.whitelist.p[1], "::1/128");
    assert_int_equal(c.ratelimit.blacklist.n, 1);
    assert_prefix(&c.ratelimit.blacklist.p[0], "10.10.10.1/32");
    assert_int_equal(c.ratelimit.action, CONFIG_LIMIT_REFUSE); /* redins answers REFUSED */
    assert_int_equal(c.ratelimit.blacklist_action, CONFIG_LIMIT_REFUSE);
    assert_int_equal(c.ratelimit.table_size, 65536);
    config_free(&c);

    /* enable left out: false in a redins file (Go's zero value), whichever key comes first;
     * true in a tern file */
    static const char *const redins_files[] = {
        "{\"server\": {\"ip\": \"127.0.0.1\", \"port\": 53}, \"ratelimit\": {\"rate\": 10}}",
        "{\"ratelimit\": {\"rate\": 10}, \"error_log\": {\"level\": \"info\"}}",
        "{\"ratelimit\": {\"rate\": 10}, \"handler\": {}}",
        "{\"ratelimit\": {\"rate\": 10}, \"geoip\": {\"enable\": false}}",
        "{\"ratelimit\": {\"rate\": 10}, \"healthcheck\": {\"enable\": false}}",
    };
    for (size_t i = 0; i < sizeof(redins_files) / sizeof(redins_files[0]); i++) {
        c = load_text(redins_files[i]);
        if (c.ratelimit.enabled)
            fail_msg("enabled in '%s'", redins_files[i]);
        assert_int_equal(c.ratelimit.rate, 10);
        config_free(&c);
    }
    c = load_text("{\"listen\": \"127.0.0.1:53\", \"ratelimit\": {\"rate\": 10}}");
    assert_true(c.ratelimit.enabled);
    config_free(&c);
    /* the example redins config: a ratelimit block that is off */
    c = load_text("{\"server\": [], \"ratelimit\": {\"enable\": false, \"rate\": 60, "
                  "\"burst\": 10, \"whitelist\": [], \"blacklist\": []}}");
    assert_false(c.ratelimit.enabled);
    config_free(&c);
    /* tern's keys in a redins file too */
    c = load_text("{\"server\": [], \"ratelimit\": {\"enable\": true, \"rate\": 600, "
                  "\"action\": \"drop\", \"table_size\": 2048, "
                  "\"whitelist\": [\"192.0.2.0/24\"]}}");
    assert_true(c.ratelimit.enabled);
    assert_int_equal(c.ratelimit.action, CONFIG_LIMIT_DROP);
    assert_int_equal(c.ratelimit.table_size, 2048);
    assert_prefix(&c.ratelimit.whitelist.p[0], "192.0.2.0/24");
    config_free(&c);

    /* rate 0: redins would divide by it; refused, saying how to turn the limit off */
    expect_error("{\"server\": [],\n \"ratelimit\": {\"enable\": false,\n  \"rate\": 0}}", 3,
                 "ratelimit: rate: 0 is out of range 1..6000000 (to turn the limit off, give "
                 "enable: false)");
    expect_error("{\"server\": [], \"ratelimit\": {\"rate\": -60}}", 1,
                 "ratelimit: rate: -60 is out of range 1..6000000");
    expect_error("{\"server\": [], \"ratelimit\": {\"rate\": \"60\"}}", 1,
                 "ratelimit: rate: expected an integer, got \"60\"");
    expect_error("{\"server\": [], \"ratelimit\": {\"enable\": 1}}", 1,
                 "ratelimit: enable: expected true or false, got a plain scalar");
    expect_error("{\"server\": [],\n \"ratelimit\": {\"whitelist\": [\"127.0.0.1\", "
                 "\"localhost\"]}}",
                 2,
                 "ratelimit: whitelist[1]: bad prefix \"localhost\": not an IPv4 or IPv6 "
                 "address (want ADDR or ADDR/LEN)");
    expect_error("{\"server\": [], \"ratelimit\": {\"burst\": 10, \"burst\": 20}}", 1,
                 "ratelimit: duplicate key \"burst\" (first at line 1)");
    expect_error("{\"server\": [], \"ratelimit\": {\"size\": 10}}", 1,
                 "ratelimit: unknown key \"size\" (want enable, rate, burst, whitelist, "
                 "blacklist, action, blacklist_action, table_size)");
    expect_error("{\"server\": [], \"ratelimit\": true}", 1,
                 "ratelimit: expected a mapping {enable, rate, burst, whitelist, blacklist, "
                 "action, blacklist_action, table_size}, got a plain scalar");
}

/* ---- errors ------------------------------------------------------------------------------- */

static void test_errors(void **state)
{
    (void)state;
    /* acl */
    expect_error("acl:\n  allow: [192.0.2.0/24, \"2001:db8::/32\", 192.0.2.1/24]\n", 2,
                 "acl: allow[2]: bad prefix \"192.0.2.1/24\": host bits set; did you mean "
                 "192.0.2.0/24?");
    expect_error("acl:\n  deny: 192.0.2.0/33\n", 2,
                 "acl: deny: bad prefix \"192.0.2.0/33\": length 33 is out of range 0..32 for an "
                 "IPv4 prefix");
    expect_error("acl:\n  deny:\n    - 192.0.2.0/24\n    - bogus\n", 4,
                 "acl: deny[1]: bad prefix \"bogus\": not an IPv4 or IPv6 address (want ADDR or "
                 "ADDR/LEN)");
    expect_error("acl:\n  deny:\n    - [192.0.2.0/24]\n", 3,
                 "acl: deny[0]: expected an address or a prefix (\"192.0.2.0/24\", "
                 "\"2001:db8::/32\"), got a list");
    expect_error("acl:\n  deny: {a: 1}\n", 2,
                 "acl: deny: expected an address or prefix, or a list of them, got a mapping");
    expect_error("acl:\n  action: refused\n", 2,
                 "acl: action: expected refuse or drop, got \"refused\"");
    expect_error("acl:\n  allow: []\n  permit: []\n", 3,
                 "acl: unknown key \"permit\" (want allow, deny, action)");
    expect_error("acl: [192.0.2.0/24]\n", 1,
                 "acl: expected a mapping {allow, deny, action}, got a list");
    expect_error("acl: {}\nacl: ~\n", 2, "acl: duplicate key (first at line 1)");
    /* ratelimit */
    expect_error("ratelimit:\n  rate: 0\n", 2,
                 "ratelimit: rate: 0 is out of range 1..6000000 (to turn the limit off, give "
                 "enable: false)");
    expect_error("ratelimit:\n  rate: 6000001\n", 2,
                 "ratelimit: rate: 6000001 is out of range 1..6000000");
    expect_error("ratelimit:\n  burst: 1000001\n", 2,
                 "ratelimit: burst: 1000001 is out of range 0..1000000");
    expect_error("ratelimit:\n  table_size: 1023\n", 2,
                 "ratelimit: table_size: 1023 is out of range 1024..16777216");
    expect_error("ratelimit:\n  table_size: 16777217\n", 2,
                 "ratelimit: table_size: 16777217 is out of range 1024..16777216");
    expect_error("ratelimit:\n  action: nxdomain\n", 2,
                 "ratelimit: action: expected refuse or drop, got \"nxdomain\"");
    expect_error("ratelimit:\n  blacklist_action: [drop]\n", 2,
                 "ratelimit: blacklist_action: expected refuse or drop, got a list");
    expect_error("ratelimit:\n  blacklist: [10.0.0.1/8]\n", 2,
                 "ratelimit: blacklist[0]: bad prefix \"10.0.0.1/8\": host bits set; did you mean "
                 "10.0.0.0/8?");
    /* rrl */
    expect_error("rrl:\n  rate: 0\n", 2,
                 "rrl: rate: 0 is out of range 1..1000000 (to turn the limit off, give enable: "
                 "false)");
    expect_error("rrl:\n  rate: 1000001\n", 2, "rrl: rate: 1000001 is out of range 1..1000000");
    expect_error("rrl:\n  burst: 1000001\n", 2, "rrl: burst: 1000001 is out of range 0..1000000");
    expect_error("rrl:\n  slip: 101\n", 2, "rrl: slip: 101 is out of range 0..100");
    expect_error("rrl:\n  slip: -1\n", 2, "rrl: slip: -1 is out of range 0..100");
    expect_error("rrl:\n  ipv4_prefix: 7\n", 2, "rrl: ipv4_prefix: 7 is out of range 8..32");
    expect_error("rrl:\n  ipv4_prefix: 33\n", 2, "rrl: ipv4_prefix: 33 is out of range 8..32");
    expect_error("rrl:\n  ipv6_prefix: 15\n", 2, "rrl: ipv6_prefix: 15 is out of range 16..128");
    expect_error("rrl:\n  ipv6_prefix: 129\n", 2, "rrl: ipv6_prefix: 129 is out of range 16..128");
    expect_error("rrl:\n  table_size: 100\n", 2,
                 "rrl: table_size: 100 is out of range 1024..16777216");
    expect_error("rrl:\n  log: yes\n", 2, "rrl: log: expected true or false, got a plain scalar");
    expect_error("rrl:\n  whitelist: [\"2001:db8::1/64\"]\n", 2,
                 "rrl: whitelist[0]: bad prefix \"2001:db8::1/64\": host bits set; did you mean "
                 "2001:db8::/64?");
    expect_error("rrl:\n  prefix_v4: 24\n", 2,
                 "rrl: unknown key \"prefix_v4\" (want enable, rate, burst, slip, ipv4_prefix, "
                 "ipv6_prefix, whitelist, table_size, log)");
    /* cookies: the secret is never echoed */
    expect_error("cookies:\n  secret: \"000102030405060708090a0b0c0d0e0\"\n", 2,
                 "cookies: secret: expected 32 hex digits (16 bytes), got 31 characters");
    expect_error("cookies:\n  secret: \"000102030405060708090a0b0c0d0e0f00\"\n", 2,
                 "cookies: secret: expected 32 hex digits (16 bytes), got 34 characters");
    expect_error("cookies:\n  secret: \"0x0102030405060708090a0b0c0d0e0f\"\n", 2,
                 "cookies: secret: character 2 is not a hex digit (want 32 of 0-9, a-f)");
    expect_error("cookies:\n  secret: \"000102030405060708090a0b0c0d0e0g\"\n", 2,
                 "cookies: secret: character 32 is not a hex digit (want 32 of 0-9, a-f)");
    expect_error("cookies:\n  secret: [1, 2]\n", 2,
                 "cookies: secret: expected 32 hex digits, got a list");
    expect_error("cookies:\n  secret: \"000102030405060708090a0b0c0d0e0f\"\n  rotate_s: 3600\n", 3,
                 "cookies: rotate_s: not with secret (a shared secret is never rotated; give one "
                 "of them)");
    expect_error("cookies:\n  rotate_s: 59\n", 2,
                 "cookies: rotate_s: 59 is out of range 60..31536000");
    expect_error("cookies:\n  rotate_s: 31536001\n", 2,
                 "cookies: rotate_s: 31536001 is out of range 60..31536000");
    expect_error("cookies:\n  require: \"true\"\n", 2,
                 "cookies: require: expected true or false, got a string");
    /* TCP per client */
    expect_error("tcp_max_per_client: 65536\n", 1,
                 "tcp_max_per_client: 65536 is out of range 0..65535");
    expect_error("tcp_max_per_client: -1\n", 1, "tcp_max_per_client: -1 is out of range 0..65535");
    expect_error("tcp_client_prefix_v4: 7\n", 1, "tcp_client_prefix_v4: 7 is out of range 8..32");
    expect_error("tcp_client_prefix_v4: 33\n", 1, "tcp_client_prefix_v4: 33 is out of range 8..32");
    expect_error("tcp_client_prefix_v6: 15\n", 1,
                 "tcp_client_prefix_v6: 15 is out of range 16..128");
    expect_error("tcp_client_prefix_v6: 129\n", 1,
                 "tcp_client_prefix_v6: 129 is out of range 16..128");
    expect_error("tcp_client_prefix_v6: \"64\"\n", 1,
                 "tcp_client_prefix_v6: expected an integer, got \"64\"");
}

/* ---- copies and frees --------------------------------------------------------------------- */

static bool same_list(const config_prefix_list_t *a, const config_prefix_list_t *b)
{
    if (a->n != b->n)
        return false;
    if (a->n && a->p == b->p)
        return false; /* a copy has lists of its own */
    return a->n == 0 || memcmp(a->p, b->p, a->n * sizeof(*a->p)) == 0;
}

static const char full[] =
    "acl: {allow: [192.0.2.0/24, \"2001:db8::/32\"], deny: 192.0.2.66, action: drop}\n"
    "zones:\n"
    "  - {origin: a.test, file: a.zone}\n"
    "  - {origin: b.test, file: b.zone, acl: {allow: 10.0.0.0/8, deny: [10.1.0.0/16]}}\n"
    "  - {origin: c.test, file: c.zone, acl: {action: drop}}\n"
    "ratelimit: {rate: 30, whitelist: [127.0.0.1], blacklist: [\"::/0\", 10.10.10.1]}\n"
    "rrl: {rate: 7, whitelist: 198.51.100.0/24, log: false}\n"
    "cookies: {secret: \"ffeeddccbbaa99887766554433221100\"}\n"
    "tcp_max_per_client: 5\n";

static void test_copy(void **state)
{
    (void)state;
    config_t a = load_text(full), b;
    assert_int_equal(config_copy(&b, &a), 0);
    assert_true(b.acl.enabled);
    assert_int_equal(b.acl.action, CONFIG_LIMIT_DROP);
    assert_true(same_list(&a.acl.allow, &b.acl.allow));
    assert_true(same_list(&a.acl.deny, &b.acl.deny));
    assert_int_equal(b.nzones, 3);
    for (size_t i = 0; i < 3; i++) {
        assert_int_equal(b.zones[i].acl.enabled, a.zones[i].acl.enabled);
        assert_int_equal(b.zones[i].acl.action, a.zones[i].acl.action);
        assert_true(same_list(&a.zones[i].acl.allow, &b.zones[i].acl.allow));
        assert_true(same_list(&a.zones[i].acl.deny, &b.zones[i].acl.deny));
    }
    assert_int_equal(b.zones[1].acl.deny.n, 1);
    assert_true(b.ratelimit.enabled);
    assert_int_equal(b.ratelimit.rate, 30);
    assert_true(same_list(&a.ratelimit.whitelist, &b.ratelimit.whitelist));
    assert_true(same_list(&a.ratelimit.blacklist, &b.ratelimit.blacklist));
    assert_true(b.rrl.enabled);
    assert_int_equal(b.rrl.rate, 7);
    assert_false(b.rrl.log);
    assert_true(same_list(&a.rrl.whitelist, &b.rrl.whitelist));
    assert_true(b.cookies.have_secret);
    assert_memory_equal(b.cookies.secret, a.cookies.secret, 16);
    assert_int_equal(b.cookies.secret[0], 0xff);
    assert_int_equal(b.tcp_max_per_client, 5);
    /* the copy outlives its source, and a copy of the copy frees cleanly too */
    config_free(&a);
    assert_prefix(&b.acl.allow.p[1], "2001:db8::/32");
    assert_prefix(&b.zones[1].acl.deny.p[0], "10.1.0.0/16");
    assert_prefix(&b.ratelimit.blacklist.p[0], "::/0");
    config_t d;
    assert_int_equal(config_copy(&d, &b), 0);
    config_free(&b);
    assert_prefix(&d.rrl.whitelist.p[0], "198.51.100.0/24");
    config_free(&d);
    /* config_free leaves the defaults: nothing on, no lists */
    assert_false(d.acl.enabled);
    assert_null(d.acl.allow.p);
    assert_null(d.ratelimit.blacklist.p);
    assert_int_equal(d.ratelimit.rate, 60);
    assert_null(d.rrl.whitelist.p);
    assert_false(d.cookies.have_secret);
    assert_int_equal(d.nzones, 0);

    /* nothing set: the copy has no lists either */
    config_init(&a);
    assert_int_equal(config_copy(&b, &a), 0);
    assert_null(b.acl.allow.p);
    assert_null(b.ratelimit.whitelist.p);
    config_free(&a);
    config_free(&b);
}

/* Loading over a config that already holds lists replaces them (a block replaces every setting
 * of its block) and zones append with their acls; nothing leaks. */
static void test_load_twice(void **state)
{
    (void)state;
    config_t c = load_text(full);
    char err[512] = "";
    const char *path = write_tmp("acl: {deny: 203.0.113.0/24}\nratelimit: ~\n"
                                 "rrl: {whitelist: [192.0.2.0/24, 192.0.2.0/25]}\n"
                                 "zones: [{origin: d.test, file: d.zone, acl: {deny: \"::1\"}}]\n");
    int r = config_load(&c, path, err, sizeof(err));
    unlink(path);
    if (r < 0)
        print_error("%s\n", err);
    assert_int_equal(r, 0);
    assert_true(c.acl.enabled);
    assert_int_equal(c.acl.allow.n, 0);
    assert_int_equal(c.acl.deny.n, 1);
    assert_int_equal(c.acl.action, CONFIG_LIMIT_REFUSE);
    assert_false(c.ratelimit.enabled);
    assert_null(c.ratelimit.blacklist.p);
    assert_int_equal(c.rrl.whitelist.n, 2);
    assert_int_equal(c.rrl.rate, 20);
    assert_true(c.rrl.log);
    assert_true(c.cookies.have_secret); /* not in the second file: kept */
    assert_int_equal(c.nzones, 4);
    assert_prefix(&c.zones[3].acl.deny.p[0], "::1/128");
    /* a failing load after lists were parsed: config_free still frees everything */
    path = write_tmp("acl: {allow: [10.0.0.0/8]}\nrrl: {whitelist: [10.0.0.0/8], slip: 1000}\n");
    assert_true(config_load(&c, path, err, sizeof(err)) < 0);
    unlink(path);
    config_free(&c);
}

/* The example configurations keep serving as they did: their flood settings are off. */
static void test_examples(void **state)
{
    (void)state;
    char path[512];
    const char *dir = getenv("TERN_TEST_DATA");
    config_t c;
    char err[512] = "";
    static const char *const files[] = {"ternd.yaml", "redins-example.json"};
    for (size_t i = 0; i < 2; i++) {
        snprintf(path, sizeof(path), "%s/../../conf/%s", dir ? dir : "tests/data", files[i]);
        config_init(&c);
        int r = config_load(&c, path, err, sizeof(err));
        if (r < 0)
            print_error("%s\n", err);
        assert_int_equal(r, 0);
        assert_false(c.acl.enabled);
        assert_false(c.ratelimit.enabled);
        assert_false(c.rrl.enabled);
        assert_false(c.cookies.enabled);
        for (size_t z = 0; z < c.nzones; z++)
            assert_false(c.zones[z].acl.enabled);
        assert_int_equal(c.tcp_max_per_client, 64);
        config_free(&c);
    }
}

/* The commented example blocks of conf/ternd.yaml ("# acl:" and the "#" lines under it) are
 * valid configuration, and mean what their comments say. */
static void test_example_blocks(void **state)
{
    (void)state;
    char path[512];
    const char *dir = getenv("TERN_TEST_DATA");
    snprintf(path, sizeof(path), "%s/../../conf/ternd.yaml", dir ? dir : "tests/data");
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    static char yaml[65536], text[8192];
    size_t n = fread(yaml, 1, sizeof(yaml) - 1, f);
    assert_true(feof(f));
    fclose(f);
    yaml[n] = '\0';
    size_t off = 0;
    static const char *const names[] = {"acl", "ratelimit", "rrl", "cookies"};
    for (size_t i = 0; i < 4; i++) {
        char head[32];
        snprintf(head, sizeof(head), "\n# %s:\n", names[i]);
        const char *line = strstr(yaml, head);
        assert_non_null(line);
        for (line++; *line == '#';) {
            const char *nl = strchr(line, '\n');
            assert_non_null(nl);
            const char *s = line + 1 + (line[1] == ' ');
            off += (size_t)snprintf(text + off, sizeof(text) - off, "%.*s\n", (int)(nl - s), s);
            line = nl + 1;
        }
    }
    config_t c = load_text(text);
    assert_true(c.acl.enabled);
    assert_int_equal(c.acl.allow.n, 3);
    assert_int_equal(c.acl.deny.n, 1);
    assert_true(c.ratelimit.enabled);
    assert_int_equal(c.ratelimit.rate, 60);
    assert_int_equal(c.ratelimit.burst, 10);
    assert_int_equal(c.ratelimit.whitelist.n, 1);
    assert_int_equal(c.ratelimit.blacklist.n, 1);
    assert_true(c.rrl.enabled);
    assert_int_equal(c.rrl.rate, 20);
    assert_int_equal(c.rrl.slip, 2);
    assert_int_equal(c.rrl.whitelist.n, 1);
    assert_true(c.cookies.enabled);
    assert_false(c.cookies.have_secret);
    assert_int_equal(c.cookies.rotate_s, 86400);
    assert_false(c.cookies.require);
    config_free(&c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults),
        cmocka_unit_test(test_every_key),
        cmocka_unit_test(test_parse_prefix),
        cmocka_unit_test(test_prefix_lists),
        cmocka_unit_test(test_prefix_list_bound),
        cmocka_unit_test(test_zone_acl),
        cmocka_unit_test(test_redins_ratelimit),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_copy),
        cmocka_unit_test(test_load_twice),
        cmocka_unit_test(test_examples),
        cmocka_unit_test(test_example_blocks),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
