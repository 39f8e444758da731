/*
 * test_config.c — the YAML/JSON config: valid files, and every kind of error with its line.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "tern/common/err.h"
#include "tern/conf/config.h"

static char tmp_path[64];

static const char *data_path(const char *rel)
{
    static char buf[512];
    const char *dir = getenv("TERN_TEST_DATA");
    snprintf(buf, sizeof(buf), "%s/%s", dir ? dir : "tests/data", rel);
    return buf;
}

/* Write text to a fresh temporary file; its path is tmp_path. */
static const char *write_tmp(const char *text)
{
    snprintf(tmp_path, sizeof(tmp_path), "/tmp/tern_conf_XXXXXX");
    int fd = mkstemp(tmp_path);
    assert_true(fd >= 0);
    size_t len = strlen(text);
    assert_int_equal(write(fd, text, len), (ssize_t)len);
    close(fd);
    return tmp_path;
}

/* Load text and expect failure with exactly "<tmpfile>:<line>: <msg>". */
static void expect_error(const char *text, unsigned line, const char *msg)
{
    config_t c;
    char err[512] = "";
    char want[512];
    config_init(&c);
    const char *path = write_tmp(text);
    int r = config_load(&c, path, err, sizeof(err));
    snprintf(want, sizeof(want), "%s:%u: %s", path, line, msg);
    if (r >= 0 || strcmp(err, want) != 0)
        print_error("got r=%d err='%s'\nwant '%s'\n", r, err, want);
    assert_true(r < 0);
    assert_string_equal(err, want);
    unlink(path);
    config_free(&c);
}

static config_t load_ok(const char *path)
{
    config_t c;
    char err[512] = "";
    config_init(&c);
    int r = config_load(&c, path, err, sizeof(err));
    if (r < 0)
        print_error("%s\n", err);
    assert_int_equal(r, 0);
    return c;
}

static void test_defaults(void **state)
{
    (void)state;
    config_t c;
    config_init(&c);
    assert_int_equal(c.nlisten, 0);
    assert_int_equal(c.workers, 1);
    assert_int_equal(c.edns_max_udp, 1232);
    assert_int_equal(c.tcp_idle_timeout, 10);
    assert_int_equal(c.tcp_max_connections, 256);
    assert_true(c.udp_mmsg);
    assert_null(c.identity);
    assert_null(c.version);
    assert_int_equal(c.nzones, 0);
    config_free(&c);
}

static void test_valid_yaml(void **state)
{
    (void)state;
    config_t c = load_ok(data_path("conf/valid.yaml"));
    assert_int_equal(c.nlisten, 2);
    assert_string_equal(c.listen[0].text, "127.0.0.1:5353");
    assert_int_equal(c.listen[0].addr.ss_family, AF_INET);
    assert_int_equal(ntohs(((struct sockaddr_in *)&c.listen[0].addr)->sin_port), 5353);
    assert_int_equal(c.listen[1].addr.ss_family, AF_INET6);
    assert_int_equal(c.listen[1].addrlen, sizeof(struct sockaddr_in6));
    assert_int_equal(c.workers, 3);
    assert_int_equal(c.edns_max_udp, 1400);
    assert_string_equal(c.identity, "ns1.example.net");
    assert_string_equal(c.version, "tern 0.1");
    assert_int_equal(c.tcp_idle_timeout, 7);
    assert_int_equal(c.tcp_max_connections, 100);
    assert_false(c.udp_mmsg);
    assert_int_equal(c.nzones, 2);
    assert_string_equal(c.zones[0].origin, "example.test");
    /* relative to the config file's directory */
    assert_string_equal(c.zones[0].file, data_path("conf/example.zone"));
    assert_string_equal(c.zones[1].file, "/abs/other.zone");
    config_free(&c);
    assert_int_equal(c.nzones, 0);
    assert_null(c.identity);
}

static void test_valid_json(void **state)
{
    (void)state;
    config_t c = load_ok(data_path("conf/valid.json"));
    assert_int_equal(c.nlisten, 1);
    assert_int_equal(c.listen[0].addr.ss_family, AF_INET6);
    assert_int_equal(ntohs(((struct sockaddr_in6 *)&c.listen[0].addr)->sin6_port), 53);
    assert_int_equal(c.workers, config_auto_workers());
    assert_true(c.workers >= 1);
    assert_int_equal(c.edns_max_udp, 4096);
    assert_null(c.identity);
    assert_string_equal(c.version, "tern");
    assert_int_equal(c.tcp_idle_timeout, 1);
    assert_int_equal(c.tcp_max_connections, 65536);
    assert_true(c.udp_mmsg);
    assert_int_equal(c.nzones, 1);
    assert_string_equal(c.zones[0].origin, "example.test.");
    assert_string_equal(c.zones[0].file, data_path("conf/example.zone"));
    config_free(&c);
}

static void test_listen_string_replaces_and_empty_file(void **state)
{
    (void)state;
    config_t c;
    char err[256];
    config_init(&c);
    assert_int_equal(config_add_listen(&c, "10.0.0.1:53"), 0);
    const char *path = write_tmp("listen: 127.0.0.1:0\n");
    assert_int_equal(config_load(&c, path, err, sizeof(err)), 0);
    assert_int_equal(c.nlisten, 1);
    assert_string_equal(c.listen[0].text, "127.0.0.1:0");
    unlink(path);
    /* an empty file keeps every default and what was there */
    path = write_tmp("");
    assert_int_equal(config_load(&c, path, err, sizeof(err)), 0);
    assert_int_equal(c.nlisten, 1);
    assert_int_equal(c.workers, 1);
    unlink(path);
    config_free(&c);
}

static void test_unknown_key(void **state)
{
    (void)state;
    expect_error("workers: 2\n\nlisten_on: 1.2.3.4:53\n", 3, "listen_on: unknown key");
    /* the same in JSON, spread over lines */
    expect_error("{\n  \"workers\": 2,\n  \"bogus\": true\n}\n", 3, "bogus: unknown key");
}

static void test_duplicate_key(void **state)
{
    (void)state;
    expect_error("workers: 2\nworkers: 3\n", 2, "workers: duplicate key (first at line 1)");
}

static void test_bad_type(void **state)
{
    (void)state;
    expect_error("edns_max_udp: 1232\nworkers: [1, 2]\n", 2,
                 "workers: expected an integer or \"auto\", got a list");
    expect_error("workers: many\n", 1, "workers: expected an integer or \"auto\", got \"many\"");
    /* a quoted number is a string, in YAML as in JSON */
    expect_error("{\n\"edns_max_udp\": \"1232\"\n}\n", 2,
                 "edns_max_udp: expected an integer, got \"1232\"");
    expect_error("tcp_idle_timeout: 1.5\n", 1,
                 "tcp_idle_timeout: expected an integer, got \"1.5\"");
    expect_error("udp_mmsg: 1\n", 1, "udp_mmsg: expected true or false, got a plain scalar");
    expect_error("identity:\n  a: b\n", 2, "identity: expected a string, got a mapping");
    expect_error("zones: example.test\n", 1,
                 "zones: expected a list of {origin, file}, got a plain scalar");
    expect_error("- a\n- b\n", 1, "the top level must be a mapping of options, got a list");
}

static void test_out_of_range(void **state)
{
    (void)state;
    expect_error("listen: 127.0.0.1:53\nedns_max_udp: 511\n", 2,
                 "edns_max_udp: 511 is out of range 512..4096");
    expect_error("edns_max_udp: 4097\n", 1, "edns_max_udp: 4097 is out of range 512..4096");
    expect_error("workers: 0\n", 1, "workers: 0 is out of range 1..256");
    expect_error("tcp_idle_timeout: -1\n", 1, "tcp_idle_timeout: -1 is out of range 1..3600");
    expect_error("tcp_max_connections: 99999999999\n", 1,
                 "tcp_max_connections: 99999999999 is out of range 1..65536");
}

static void test_bad_listen(void **state)
{
    (void)state;
    expect_error("listen: \"::1\"\n", 1,
                 "listen: bad address \"::1\" (want ADDR:PORT or [V6]:PORT)");
    expect_error("listen:\n  - 127.0.0.1:53\n  - 127.0.0.1:99999\n", 3,
                 "listen: bad address \"127.0.0.1:99999\" (want ADDR:PORT or [V6]:PORT)");
    expect_error("listen: [[1]]\n", 1, "listen: expected an address string, got a list");
}

static void test_zone_fields(void **state)
{
    (void)state;
    expect_error("zones:\n  - origin: a.test\n    file: a.zone\n  - origin: b.test\n", 4,
                 "zones[1]: missing \"file\" (master file (RFC 1035), relative to the config "
                 "file's directory)");
    expect_error("zones:\n  - file: a.zone\n", 2,
                 "zones[0]: missing \"origin\" (the zone's apex name)");
    expect_error("zones:\n  - origin: a.test\n    file: a.zone\n    type: master\n", 4,
                 "zones[0]: unknown key \"type\" (want origin, file)");
    expect_error("zones:\n  - origin: a.test\n    file: [x]\n", 3,
                 "zones[0]: file: expected a non-empty string, got a list");
    expect_error("zones:\n  - a.test\n", 2,
                 "zones[0]: expected a mapping {origin, file}, got a plain scalar");
}

static void test_syntax_error(void **state)
{
    (void)state;
    config_t c;
    char err[512];
    config_init(&c);
    const char *path = write_tmp("workers: 2\nlisten: [1.2.3.4:53\nversion: x\n");
    assert_int_equal(config_load(&c, path, err, sizeof(err)), TERN_ESYNTAX);
    char want[128];
    snprintf(want, sizeof(want), "%s:", path);
    assert_true(strncmp(err, want, strlen(want)) == 0);
    assert_non_null(strstr(err, "YAML syntax error"));
    unlink(path);
    assert_int_equal(config_load(&c, "/nonexistent/tern.yaml", err, sizeof(err)), TERN_ENOENT);
    assert_non_null(strstr(err, "/nonexistent/tern.yaml"));
    config_free(&c);
}

static void test_parse_listen(void **state)
{
    (void)state;
    config_listen_t l;
    assert_int_equal(config_parse_listen(&l, "1.2.3.4:53"), 0);
    struct sockaddr_in *sa = (struct sockaddr_in *)&l.addr;
    assert_int_equal(sa->sin_family, AF_INET);
    assert_int_equal(ntohs(sa->sin_port), 53);
    assert_int_equal(ntohl(sa->sin_addr.s_addr), 0x01020304);
    assert_int_equal(l.addrlen, sizeof(struct sockaddr_in));

    assert_int_equal(config_parse_listen(&l, "[::1]:5300"), 0);
    struct sockaddr_in6 *sa6 = (struct sockaddr_in6 *)&l.addr;
    assert_int_equal(sa6->sin6_family, AF_INET6);
    assert_int_equal(ntohs(sa6->sin6_port), 5300);
    assert_true(IN6_IS_ADDR_LOOPBACK(&sa6->sin6_addr));

    assert_int_equal(config_parse_listen(&l, "127.0.0.1:0"), 0);
    assert_int_equal(config_parse_listen(&l, "[::]:65535"), 0);

    static const char *const bad[] = {
        "::1",         "[::1]",   "1.2.3.4", "1.2.3.4:",      "1.2.3.4:65536", "1.2.3.4:-1",
        "1.2.3.4:53x", "[::1]:x", "[::1]53", "localhost:53",  "1.2.3:53",      "[1.2.3.4]:53",
        ":53",         "",        "[::1:53", "1.2.3.4:000053"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        if (config_parse_listen(&l, bad[i]) != TERN_EINVAL)
            fail_msg("accepted '%s'", bad[i]);
    }
    char longtext[100];
    memset(longtext, '1', sizeof(longtext) - 1);
    longtext[sizeof(longtext) - 1] = '\0';
    assert_int_equal(config_parse_listen(&l, longtext), TERN_EINVAL);
}

static void test_add_listen_limit(void **state)
{
    (void)state;
    config_t c;
    config_init(&c);
    for (int i = 0; i < CONFIG_MAX_LISTEN; i++)
        assert_int_equal(config_add_listen(&c, "127.0.0.1:0"), 0);
    assert_int_equal(config_add_listen(&c, "127.0.0.1:0"), TERN_ELIMIT);
    assert_int_equal(c.nlisten, CONFIG_MAX_LISTEN);
    config_free(&c);
}

static void test_schema_print(void **state)
{
    (void)state;
    char buf[4096] = "";
    FILE *f = fmemopen(buf, sizeof(buf) - 1, "w");
    assert_non_null(f);
    config_schema_print(f);
    fclose(f);
    static const char *const keys[] = {
        "listen",  "workers",          "edns_max_udp",        "identity",
        "version", "tcp_idle_timeout", "tcp_max_connections", "udp_mmsg",
        "zones"};
    for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
        assert_non_null(strstr(buf, keys[i]));
    assert_non_null(strstr(buf, "[512..4096, default 1232]"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults),
        cmocka_unit_test(test_valid_yaml),
        cmocka_unit_test(test_valid_json),
        cmocka_unit_test(test_listen_string_replaces_and_empty_file),
        cmocka_unit_test(test_unknown_key),
        cmocka_unit_test(test_duplicate_key),
        cmocka_unit_test(test_bad_type),
        cmocka_unit_test(test_out_of_range),
        cmocka_unit_test(test_bad_listen),
        cmocka_unit_test(test_zone_fields),
        cmocka_unit_test(test_syntax_error),
        cmocka_unit_test(test_parse_listen),
        cmocka_unit_test(test_add_listen_limit),
        cmocka_unit_test(test_schema_print),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
