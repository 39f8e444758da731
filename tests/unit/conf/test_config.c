/*
 * test_config.c — the YAML/JSON config: valid files (tests/data/conf, conf/ternd.yaml,
 * conf/redins-example.json), the redins-style keys, and every kind of error with its line.
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

/* $TERN_TEST_DATA/../../conf/rel: the repository's conf/ directory. */
static const char *conf_path(const char *rel)
{
    static char buf[512];
    const char *dir = getenv("TERN_TEST_DATA");
    snprintf(buf, sizeof(buf), "%s/../../conf/%s", dir ? dir : "tests/data", rel);
    return buf;
}

/* Load text from a temporary file that must be valid. */
static config_t load_text(const char *text)
{
    config_t c = load_ok(write_tmp(text));
    unlink(tmp_path);
    return c;
}

static unsigned port_of(const config_listen_t *l)
{
    if (l->addr.ss_family == AF_INET)
        return ntohs(((const struct sockaddr_in *)&l->addr)->sin_port);
    return ntohs(((const struct sockaddr_in6 *)&l->addr)->sin6_port);
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
    assert_int_equal(c.tcp_max_lifetime, 120);
    assert_int_equal(c.tcp_max_inflight, 64);
    assert_true(c.udp_mmsg);
    assert_null(c.identity);
    assert_null(c.version);
    assert_int_equal(c.nzones, 0);
    assert_int_equal(c.log_level, LOG_LVL_INFO);
    assert_int_equal(c.log_target, LOG_TARGET_STDERR);
    assert_null(c.user);
    assert_null(c.group);
    assert_false(c.allow_root);
    assert_null(c.pid_file);
    assert_null(c.control_socket);
    assert_null(c.metrics_listen);
    /* an empty file changes nothing */
    config_t e = load_text("");
    assert_true(memcmp(&c, &e, sizeof(c)) == 0);
    config_free(&e);
    config_free(&c);
}

static void test_valid_yaml(void **state)
{
    (void)state;
    config_t c = load_ok(data_path("conf/valid.yaml"));
    assert_int_equal(c.nlisten, 4);
    assert_string_equal(c.listen[0].text, "127.0.0.1:5353");
    assert_int_equal(c.listen[0].addr.ss_family, AF_INET);
    assert_int_equal(port_of(&c.listen[0]), 5353);
    assert_true(c.listen[0].udp && c.listen[0].tcp);
    assert_int_equal(c.listen[1].addr.ss_family, AF_INET6);
    assert_int_equal(c.listen[1].addrlen, sizeof(struct sockaddr_in6));
    assert_true(c.listen[1].udp && c.listen[1].tcp);
    /* the mapping form */
    assert_string_equal(c.listen[2].text, "127.0.0.2:5300");
    assert_true(c.listen[2].udp);
    assert_false(c.listen[2].tcp);
    assert_string_equal(c.listen[3].text, "[::1]:5300");
    assert_false(c.listen[3].udp);
    assert_true(c.listen[3].tcp);
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
    assert_int_equal(c.log_level, LOG_LVL_DEBUG);
    assert_int_equal(c.log_target, LOG_TARGET_SYSLOG);
    assert_string_equal(c.user, "tern");
    assert_string_equal(c.group, "nogroup");
    assert_true(c.allow_root);
    assert_string_equal(c.pid_file, data_path("conf/run/ternd.pid"));
    assert_string_equal(c.control_socket, "/run/tern/ternd.sock");
    assert_string_equal(c.metrics_listen, "[::1]:9153");
    config_free(&c);
    assert_int_equal(c.nzones, 0);
    assert_null(c.identity);
    assert_null(c.user);
    assert_null(c.pid_file);
    assert_int_equal(c.log_level, LOG_LVL_INFO);
}

static void test_valid_json(void **state)
{
    (void)state;
    config_t c = load_ok(data_path("conf/valid.json"));
    assert_int_equal(c.nlisten, 1);
    assert_int_equal(c.listen[0].addr.ss_family, AF_INET6);
    assert_int_equal(port_of(&c.listen[0]), 53);
    assert_true(c.listen[0].udp && c.listen[0].tcp);
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

/* conf/ternd.yaml, the commented example of every option, loads and says what it claims. */
static void test_example_ternd_yaml(void **state)
{
    (void)state;
    char path[512];
    snprintf(path, sizeof(path), "%s", conf_path("ternd.yaml"));
    config_t c = load_ok(path);
    assert_int_equal(c.nlisten, 3);
    assert_string_equal(c.listen[0].text, "0.0.0.0:53");
    assert_true(c.listen[0].udp && c.listen[0].tcp);
    assert_string_equal(c.listen[1].text, "[::]:53");
    assert_int_equal(c.listen[1].addr.ss_family, AF_INET6);
    assert_string_equal(c.listen[2].text, "127.0.0.1:5353");
    assert_true(c.listen[2].udp);
    assert_false(c.listen[2].tcp);
    assert_int_equal(c.workers, config_auto_workers());
    assert_int_equal(c.nzones, 2);
    assert_string_equal(c.zones[0].origin, "example.test");
    assert_string_equal(c.zones[0].file, conf_path("example.zone"));
    assert_int_equal(c.zones[0].format, CONFIG_ZONE_RFC1035);
    assert_int_equal(access(c.zones[0].file, R_OK), 0);
    assert_string_equal(c.zones[1].origin, "geo.example.test");
    assert_string_equal(c.zones[1].file, conf_path("example-geo.json"));
    assert_int_equal(c.zones[1].format, CONFIG_ZONE_JSON);
    assert_int_equal(access(c.zones[1].file, R_OK), 0);
    assert_null(c.geoip_db);
    assert_null(c.geoip_db_v6);
    assert_int_equal(c.edns_max_udp, 1232);
    assert_string_equal(c.identity, "ns1.example.net");
    assert_string_equal(c.version, "tern");
    assert_int_equal(c.tcp_idle_timeout, 10);
    assert_int_equal(c.tcp_max_connections, 256);
    assert_int_equal(c.tcp_max_lifetime, 120);
    assert_int_equal(c.tcp_max_inflight, 64);
    assert_true(c.udp_mmsg);
    assert_int_equal(c.log_level, LOG_LVL_INFO);
    assert_int_equal(c.log_target, LOG_TARGET_STDERR);
    assert_string_equal(c.user, "tern");
    assert_string_equal(c.group, "tern");
    assert_false(c.allow_root);
    assert_string_equal(c.pid_file, "/run/tern/ternd.pid");
    assert_string_equal(c.control_socket, "/run/tern/ternd.sock");
    assert_string_equal(c.metrics_listen, "127.0.0.1:9153");
    config_free(&c);
}

/* Every key of the schema appears in conf/ternd.yaml, uncommented. */
static void test_example_has_every_option(void **state)
{
    (void)state;
    char help[8192] = "", yaml[16384] = "";
    FILE *f = fmemopen(help, sizeof(help) - 1, "w");
    assert_non_null(f);
    config_schema_print(f);
    fclose(f);
    f = fopen(conf_path("ternd.yaml"), "r");
    assert_non_null(f);
    size_t n = fread(yaml, 1, sizeof(yaml) - 1, f);
    fclose(f);
    yaml[n] = '\0';
    /* the native options: schema lines before the redins section */
    char *end = strstr(help, "\nredins");
    assert_non_null(end);
    *end = '\0';
    size_t count = 0;
    for (char *line = strtok(help, "\n"); line; line = strtok(NULL, "\n")) {
        char key[64], want[80];
        assert_int_equal(sscanf(line, " %63s", key), 1);
        snprintf(want, sizeof(want), "\n%s:", key);
        if (!strstr(yaml, want))
            fail_msg("conf/ternd.yaml lacks option '%s'", key);
        count++;
    }
    assert_int_equal(count, 22);
}

static void test_redins_example_json(void **state)
{
    (void)state;
    char path[512];
    snprintf(path, sizeof(path), "%s", conf_path("redins-example.json"));
    config_t c = load_ok(path);
    /* four redins server entries: UDP and TCP on two addresses */
    assert_int_equal(c.nlisten, 2);
    assert_string_equal(c.listen[0].text, "127.0.0.1:1053");
    assert_true(c.listen[0].udp && c.listen[0].tcp);
    assert_string_equal(c.listen[1].text, "[::1]:1053");
    assert_int_equal(c.listen[1].addr.ss_family, AF_INET6);
    assert_true(c.listen[1].udp && c.listen[1].tcp);
    assert_int_equal(c.log_level, LOG_LVL_INFO);
    assert_int_equal(c.log_target, LOG_TARGET_STDERR);
    assert_int_equal(c.workers, config_auto_workers());
    assert_int_equal(c.nzones, 1);
    assert_string_equal(c.zones[0].file, conf_path("example.zone"));
    config_free(&c);
}

static void test_redins_server_mapping(void **state)
{
    (void)state;
    config_t c = load_ok(data_path("conf/redins.json"));
    assert_int_equal(c.nlisten, 3);
    /* udp + tcp on the same ip and port merge */
    assert_string_equal(c.listen[0].text, "127.0.0.1:1053");
    assert_int_equal(port_of(&c.listen[0]), 1053);
    assert_true(c.listen[0].udp && c.listen[0].tcp);
    /* protocol defaults to udp, as in redins */
    assert_string_equal(c.listen[1].text, "[::1]:1053");
    assert_true(c.listen[1].udp);
    assert_false(c.listen[1].tcp);
    assert_string_equal(c.listen[2].text, "127.0.0.1:2053");
    assert_false(c.listen[2].udp);
    assert_true(c.listen[2].tcp);
    assert_int_equal(c.log_level, LOG_LVL_WARN);
    assert_int_equal(c.log_target, LOG_TARGET_STDOUT);
    config_free(&c);

    /* a single object, as older redins configs have it; replaces an earlier list */
    config_init(&c);
    assert_int_equal(config_add_listen(&c, "10.0.0.1:53"), 0);
    char err[256];
    const char *path = write_tmp("{\"server\": {\"ip\": \"0.0.0.0\", \"port\": 53, "
                                 "\"protocol\": \"tcp\"}}\n");
    assert_int_equal(config_load(&c, path, err, sizeof(err)), 0);
    unlink(path);
    assert_int_equal(c.nlisten, 1);
    assert_string_equal(c.listen[0].text, "0.0.0.0:53");
    assert_false(c.listen[0].udp);
    assert_true(c.listen[0].tcp);
    config_free(&c);

    /* port 0 entries are distinct ephemeral ports, never merged */
    c = load_text("server:\n  - {ip: 127.0.0.1, port: 0}\n  - {ip: 127.0.0.1, port: 0}\n");
    assert_int_equal(c.nlisten, 2);
    config_free(&c);
}

static void test_redins_not_supported(void **state)
{
    (void)state;
    config_t c;
    char err[1024], want[1024];
    config_init(&c);
    const char *path = data_path("conf/redins_unsupported.json");
    assert_int_equal(config_load(&c, path, err, sizeof(err)), TERN_ESYNTAX);
    snprintf(want, sizeof(want),
             "%s:9: handler: redins option not supported yet (answering from zones kept in Redis)",
             path);
    assert_string_equal(err, want);
    config_free(&c);

    expect_error("{\n  \"redis\": {\"ip\": \"127.0.0.1\"}\n}\n", 2,
                 "redis: redins option not supported yet (zones kept in Redis)");
    expect_error("workers: 1\nlog:\n  enable: true\n", 2,
                 "log: redins option not supported yet (the per-query event log)");
    expect_error("upstream: []\n", 1,
                 "upstream: redins option not supported yet (forwarding to upstream resolvers)");
    expect_error("geoip: {enable: false}\n", 1,
                 "geoip: redins option not supported yet (GeoIP answer selection)");
    expect_error("\n\nhealthcheck: {}\n", 3,
                 "healthcheck: redins option not supported yet (health checks of answer "
                 "addresses)");
    expect_error("{\"ratelimit\": {\"enable\": true, \"rate\": 60}}", 1,
                 "ratelimit: redins option not supported yet (per-client rate limits)");

    /* error_log's fields that do not map */
    expect_error("error_log:\n  level: info\n  path: /tmp/error.log\n", 3,
                 "error_log: path: not supported yet (log files; use target stderr, stdout or "
                 "syslog)");
    expect_error("error_log:\n  kafka: {enable: false}\n", 2,
                 "error_log: kafka: not supported yet (logging to Kafka)");
    expect_error("error_log:\n  sentry: {}\n", 2,
                 "error_log: sentry: not supported yet (logging to Sentry)");
    expect_error("error_log:\n  syslog: {}\n", 2,
                 "error_log: syslog: not supported yet (remote syslog; target syslog logs to the "
                 "local one)");
    expect_error("error_log:\n  time_format: x\n", 2,
                 "error_log: time_format: not supported yet (timestamps; the journal or syslog "
                 "adds them)");
    expect_error("error_log:\n  target: file\n", 2,
                 "error_log: target: \"file\" is not supported yet (use stderr, stdout or syslog)");
    expect_error("error_log:\n  target: udp\n", 2,
                 "error_log: target: \"udp\" is not supported yet (use stderr, stdout or syslog)");
    expect_error("error_log:\n  format: json\n", 2,
                 "error_log: format: only \"text\" is supported, got \"json\"");
    expect_error("error_log:\n  enable: false\n", 2,
                 "error_log: enable: false is not supported (errors are always logged; level "
                 "error logs the least)");
}

static void test_redins_errors(void **state)
{
    (void)state;
    expect_error("{\n\"server\": [\n  {\"ip\": \"127.0.0.1\", \"port\": 1053},\n"
                 "  {\"ip\": \"127.0.0.1\", \"port\": 1053, \"protocol\": \"udp\"}\n]}\n",
                 4, "server[1]: udp on 127.0.0.1:1053 is given twice (first at line 3)");
    expect_error("server:\n  - {port: 53}\n", 2,
                 "server[0]: missing \"ip\" (IPv4 or IPv6 address)");
    expect_error("server:\n  - {ip: 1.2.3.4}\n", 2, "server[0]: missing \"port\" (0..65535)");
    expect_error("server:\n  - ip: 1.2.3.4\n    port: 65536\n", 3,
                 "server[0]: port: 65536 is out of range 0..65535");
    expect_error("server:\n  - ip: 1.2.3.4\n    port: \"53\"\n", 3,
                 "server[0]: port: expected an integer, got \"53\"");
    expect_error("server:\n  - ip: 1.2.3.4\n    port: 53\n    protocol: sctp\n", 4,
                 "server[0]: protocol: expected udp or tcp, got \"sctp\"");
    expect_error("server:\n  - ip: localhost\n    port: 53\n", 2,
                 "server[0]: ip: bad address \"localhost\"");
    expect_error("server:\n  - ip: [1]\n    port: 53\n", 2,
                 "server[0]: ip: expected an address, got a list");
    expect_error("server:\n  - ip: 1.2.3.4\n    port: 53\n    net: tcp\n", 4,
                 "server[0]: unknown key \"net\" (want ip, port, protocol)");
    expect_error("server: 1.2.3.4:53\n", 1,
                 "server: expected a list of {ip, port, protocol}, got a plain scalar");
    expect_error("server:\n  - 1.2.3.4:53\n", 2,
                 "server[0]: expected a mapping {ip, port, protocol}, got a plain scalar");
    /* a redins key and the tern option it maps to, in one file */
    expect_error("listen: 1.2.3.4:53\nserver: {ip: 1.2.3.4, port: 53}\n", 2,
                 "server: conflicts with listen at line 1 (give one of them)");
    expect_error("server: {ip: 1.2.3.4, port: 53}\nlisten: 1.2.3.4:53\n", 2,
                 "listen: conflicts with server at line 1 (give one of them)");
    expect_error("log_target: syslog\nerror_log: {level: info}\n", 2,
                 "error_log: conflicts with log_target at line 1 (give one of them)");
    expect_error("error_log: {level: info}\n\nlog_level: debug\n", 3,
                 "log_level: conflicts with error_log at line 1 (give one of them)");
    expect_error("error_log:\n  level: verbose\n", 2,
                 "error_log: level: expected error, warning, info or debug, got \"verbose\"");
    expect_error("error_log: true\n", 1,
                 "error_log: expected a mapping {enable, level, target, format}, got a plain "
                 "scalar");
    expect_error("error_log:\n  level: info\n  colour: red\n", 3,
                 "error_log: unknown key \"colour\" (want enable, level, target, format)");

    /* log_level and log_target together are fine */
    config_t c = load_text("log_level: error\nlog_target: stdout\n");
    assert_int_equal(c.log_level, LOG_LVL_ERR);
    assert_int_equal(c.log_target, LOG_TARGET_STDOUT);
    config_free(&c);
}

static void test_listen_forms(void **state)
{
    (void)state;
    config_t c;
    char err[256];
    config_init(&c);
    assert_int_equal(config_add_listen(&c, "10.0.0.1:53"), 0);
    assert_true(c.listen[0].udp && c.listen[0].tcp);
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

    /* a single mapping; UDP-only and TCP-only entries on one address merge */
    c = load_text("listen: {address: \"[::1]:53\", udp: false}\n");
    assert_int_equal(c.nlisten, 1);
    assert_false(c.listen[0].udp);
    assert_true(c.listen[0].tcp);
    config_free(&c);
    c = load_text("listen:\n  - {address: 127.0.0.1:53, tcp: false}\n"
                  "  - {address: 127.0.0.1:53, udp: false}\n  - 127.0.0.1:54\n");
    assert_int_equal(c.nlisten, 2);
    assert_true(c.listen[0].udp && c.listen[0].tcp);
    assert_string_equal(c.listen[1].text, "127.0.0.1:54");
    config_free(&c);
    /* the same address in another family or on another port is another entry */
    c = load_text("listen: [\"0.0.0.0:53\", \"[::]:53\", \"0.0.0.0:54\", \"127.0.0.1:0\", "
                  "\"127.0.0.1:0\"]\n");
    assert_int_equal(c.nlisten, 5);
    config_free(&c);
}

static void test_bad_listen(void **state)
{
    (void)state;
    expect_error("listen: \"::1\"\n", 1,
                 "listen: bad address \"::1\" (want ADDR:PORT or [V6]:PORT)");
    expect_error("listen:\n  - 127.0.0.1:53\n  - 127.0.0.1:99999\n", 3,
                 "listen[1]: bad address \"127.0.0.1:99999\" (want ADDR:PORT or [V6]:PORT)");
    expect_error("listen: [[1]]\n", 1,
                 "listen[0]: expected \"ADDR:PORT\" or {address, udp, tcp}, got a list");
    expect_error("listen:\n  - 127.0.0.1:53\n  - 127.0.0.1:53\n", 3,
                 "listen[1]: udp on 127.0.0.1:53 is given twice (first at line 2)");
    expect_error("listen:\n  - {address: 127.0.0.1:53, udp: false}\n  - 127.0.0.1:53\n", 3,
                 "listen[1]: tcp on 127.0.0.1:53 is given twice (first at line 2)");
    /* nested mapping: unknown key, bad types, missing address, nothing left to serve */
    expect_error("listen:\n  - address: 127.0.0.1:53\n    port: 53\n", 3,
                 "listen[0]: unknown key \"port\" (want address, udp, tcp)");
    expect_error("listen:\n  - address: 127.0.0.1:53\n    udp: yes\n", 3,
                 "listen[0]: udp: expected true or false, got a plain scalar");
    expect_error("listen:\n  - address: 127.0.0.1:53\n    tcp: \"false\"\n", 3,
                 "listen[0]: tcp: expected true or false, got a string");
    expect_error("listen:\n  - udp: true\n", 2,
                 "listen[0]: missing \"address\" (\"ADDR:PORT\" or \"[V6]:PORT\")");
    expect_error("listen:\n  - address: {ip: 1.2.3.4}\n", 2,
                 "listen[0]: address: expected \"ADDR:PORT\", got a mapping");
    expect_error("listen:\n  - address: 1.2.3.4\n", 2,
                 "listen[0]: address: bad address \"1.2.3.4\" (want ADDR:PORT or [V6]:PORT)");
    expect_error("listen:\n  - address: 127.0.0.1:53\n    udp: false\n    tcp: false\n", 2,
                 "listen[0]: udp and tcp are both false");
    expect_error("listen:\n  - address: 127.0.0.1:53\n    udp: true\n    udp: false\n", 4,
                 "listen[0]: duplicate key \"udp\" (first at line 3)");
}

static void test_listen_limit_in_file(void **state)
{
    (void)state;
    char text[4096];
    size_t off = (size_t)snprintf(text, sizeof(text), "listen:\n");
    for (int i = 0; i <= CONFIG_MAX_LISTEN; i++)
        off += (size_t)snprintf(text + off, sizeof(text) - off, "  - 127.0.0.1:%d\n", 1000 + i);
    char msg[64];
    snprintf(msg, sizeof(msg), "listen[%d]: more than %d addresses", CONFIG_MAX_LISTEN,
             CONFIG_MAX_LISTEN);
    expect_error(text, CONFIG_MAX_LISTEN + 2, msg);
}

static void test_unknown_key(void **state)
{
    (void)state;
    expect_error("workers: 2\n\nlisten_on: 1.2.3.4:53\n", 3, "listen_on: unknown key");
    /* the same in JSON, spread over lines */
    expect_error("{\n  \"workers\": 2,\n  \"bogus\": true\n}\n", 3, "bogus: unknown key");
    /* nested: every mapping has its own keys */
    expect_error("zones:\n  - origin: a.test\n    file: a.zone\n    type: master\n", 4,
                 "zones[0]: unknown key \"type\" (want origin, file, format)");
    expect_error("{\n\"zones\": [\n {\"origin\": \"a.\",\n  \"file\": \"a.zone\",\n"
                 "  \"master\": true}\n]}\n",
                 5, "zones[0]: unknown key \"master\" (want origin, file, format)");
    expect_error("{\"error_log\": {\n  \"level\": \"info\",\n  \"colour\": true}}\n", 3,
                 "error_log: unknown key \"colour\" (want enable, level, target, format)");
    expect_error("server:\n  ip: 1.2.3.4\n  port: 53\n  proto: udp\n", 4,
                 "server: unknown key \"proto\" (want ip, port, protocol)");
    expect_error("listen:\n  - {address: 1.2.3.4:53, [x]: 1}\n", 2,
                 "listen[0]: keys must be strings, got a list");
    /* an option name is case-sensitive */
    expect_error("Workers: 2\n", 1, "Workers: unknown key");
}

static void test_duplicate_key(void **state)
{
    (void)state;
    expect_error("workers: 2\nworkers: 3\n", 2, "workers: duplicate key (first at line 1)");
    expect_error("zones:\n  - origin: a\n    file: a\n    origin: b\n", 4,
                 "zones[0]: duplicate key \"origin\" (first at line 2)");
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
    expect_error("[1]: 2\n", 1, "option names must be strings, got a list");
    expect_error("allow_root: yes\n", 1, "allow_root: expected true or false, got a plain scalar");
    expect_error("user: [tern]\n", 1, "user: expected a string, got a list");
    expect_error("pid_file: {a: b}\n", 1, "pid_file: expected a string, got a mapping");
    expect_error("log_level: [info]\n", 1,
                 "log_level: expected error, warning, info or debug, got a list");
}

static void test_out_of_range(void **state)
{
    (void)state;
    expect_error("listen: 127.0.0.1:53\nedns_max_udp: 511\n", 2,
                 "edns_max_udp: 511 is out of range 512..4096");
    expect_error("edns_max_udp: 4097\n", 1, "edns_max_udp: 4097 is out of range 512..4096");
    expect_error("workers: 0\n", 1, "workers: 0 is out of range 1..256");
    expect_error("workers: 257\n", 1, "workers: 257 is out of range 1..256");
    expect_error("tcp_idle_timeout: -1\n", 1, "tcp_idle_timeout: -1 is out of range 1..3600");
    expect_error("tcp_idle_timeout: 3601\n", 1, "tcp_idle_timeout: 3601 is out of range 1..3600");
    expect_error("tcp_max_connections: 99999999999\n", 1,
                 "tcp_max_connections: 99999999999 is out of range 1..65536");
    expect_error("tcp_max_connections: 0\n", 1, "tcp_max_connections: 0 is out of range 1..65536");
    expect_error("tcp_max_lifetime: 0\n", 1, "tcp_max_lifetime: 0 is out of range 1..86400");
    expect_error("tcp_max_lifetime: 86401\n", 1,
                 "tcp_max_lifetime: 86401 is out of range 1..86400");
    expect_error("tcp_max_inflight: 0\n", 1, "tcp_max_inflight: 0 is out of range 1..65535");
    expect_error("tcp_max_inflight: 65536\n", 1,
                 "tcp_max_inflight: 65536 is out of range 1..65535");
}

/* The TCP limits: both bounds load, and a value is an integer, not a string or a duration. */
static void test_tcp_limits(void **state)
{
    (void)state;
    config_t c = load_text("tcp_max_lifetime: 1\ntcp_max_inflight: 65535\n");
    assert_int_equal(c.tcp_max_lifetime, 1);
    assert_int_equal(c.tcp_max_inflight, 65535);
    assert_int_equal(c.tcp_idle_timeout, 10); /* the others keep their defaults */
    config_free(&c);
    c = load_text("{\"tcp_max_lifetime\": 86400, \"tcp_max_inflight\": 1}\n");
    assert_int_equal(c.tcp_max_lifetime, 86400);
    assert_int_equal(c.tcp_max_inflight, 1);
    config_t d;
    assert_int_equal(config_copy(&d, &c), 0);
    assert_int_equal(d.tcp_max_lifetime, 86400);
    assert_int_equal(d.tcp_max_inflight, 1);
    config_free(&d);
    config_free(&c);
    expect_error("tcp_max_lifetime: 2m\n", 1, "tcp_max_lifetime: expected an integer, got \"2m\"");
    expect_error("tcp_max_inflight: \"64\"\n", 1,
                 "tcp_max_inflight: expected an integer, got \"64\"");
    expect_error("tcp_max_inflight: 64\ntcp_max_inflight: 32\n", 2,
                 "tcp_max_inflight: duplicate key (first at line 1)");
}

static void test_new_options(void **state)
{
    (void)state;
    /* enums name their values */
    expect_error("udp_mmsg: true\nlog_level: verbose\n", 2,
                 "log_level: expected error, warning, info or debug, got \"verbose\"");
    expect_error("log_level: INFO\n", 1,
                 "log_level: expected error, warning, info or debug, got \"INFO\"");
    expect_error("log_target: file\n", 1,
                 "log_target: expected stderr, stdout or syslog, got \"file\"");
    /* strings: empty and too long */
    expect_error("user: \"\"\n", 1, "user: must not be empty");
    expect_error("group: ''\n", 1, "group: must not be empty");
    expect_error("pid_file: \"\"\n", 1, "pid_file: must not be empty");
    expect_error("user: \"a\\0b\"\n", 1, "user: contains a NUL byte");
    char text[1024], msg[1024], name[300];
    memset(name, 'x', 256);
    name[256] = '\0';
    snprintf(text, sizeof(text), "\nidentity: %s\n", name);
    snprintf(msg, sizeof(msg), "identity: \"%s\" is 256 bytes long, more than the 255 allowed",
             name);
    expect_error(text, 2, msg);
    /* a UNIX socket path has 107 bytes once resolved */
    memset(name, 's', 108);
    name[108] = '\0';
    snprintf(text, sizeof(text), "control_socket: /%s\n", name + 1);
    snprintf(msg, sizeof(msg),
             "control_socket: \"/%s\" is 108 bytes long, more than the 107 allowed", name + 1);
    expect_error(text, 1, msg);
    /* metrics_listen is an address */
    expect_error("metrics_listen: localhost:9153\n", 1,
                 "metrics_listen: bad address \"localhost:9153\" (want ADDR:PORT or [V6]:PORT)");
    expect_error("metrics_listen: 9153\n", 1,
                 "metrics_listen: bad address \"9153\" (want ADDR:PORT or [V6]:PORT)");

    /* good values, and null unsets what an earlier file (or the command line) set */
    config_t c = load_text("log_level: warning\nlog_target: syslog\nuser: \"0\"\ngroup: 0\n"
                           "allow_root: true\npid_file: /var/run/t.pid\ncontrol_socket: c.sock\n"
                           "metrics_listen: \"[::]:0\"\nidentity: ''\n");
    assert_int_equal(c.log_level, LOG_LVL_WARN);
    assert_int_equal(c.log_target, LOG_TARGET_SYSLOG);
    assert_string_equal(c.user, "0");
    assert_string_equal(c.group, "0");
    assert_true(c.allow_root);
    assert_string_equal(c.pid_file, "/var/run/t.pid");
    assert_string_equal(c.control_socket, "/tmp/c.sock");
    assert_string_equal(c.metrics_listen, "[::]:0");
    assert_string_equal(c.identity, "");
    char err[256];
    const char *path = write_tmp("user: ~\ngroup: null\npid_file:\ncontrol_socket: ~\n"
                                 "metrics_listen: ~\nidentity: ~\n");
    assert_int_equal(config_load(&c, path, err, sizeof(err)), 0);
    unlink(path);
    assert_null(c.user);
    assert_null(c.group);
    assert_null(c.pid_file);
    assert_null(c.control_socket);
    assert_null(c.metrics_listen);
    assert_null(c.identity);
    assert_true(c.allow_root);
    config_free(&c);
}

/* Relative paths follow the config file, whichever directory ternd runs in. */
static void test_relative_paths(void **state)
{
    (void)state;
    config_t c = load_text("pid_file: run/t.pid\ncontrol_socket: ../t.sock\n"
                           "zones: [{origin: a, file: z/a.zone}]\n");
    assert_string_equal(c.pid_file, "/tmp/run/t.pid");
    assert_string_equal(c.control_socket, "/tmp/../t.sock");
    assert_string_equal(c.zones[0].file, "/tmp/z/a.zone");
    config_free(&c);

    /* a config named without a directory: paths stay relative to the working directory */
    char cwd[4096];
    assert_non_null(getcwd(cwd, sizeof(cwd)));
    write_tmp("pid_file: t.pid\ncontrol_socket: /abs.sock\n");
    assert_int_equal(chdir("/tmp"), 0);
    c = load_ok(tmp_path + strlen("/tmp/"));
    assert_int_equal(chdir(cwd), 0);
    unlink(tmp_path);
    assert_string_equal(c.pid_file, "t.pid");
    assert_string_equal(c.control_socket, "/abs.sock");
    config_free(&c);
}

static void test_zone_fields(void **state)
{
    (void)state;
    expect_error("zones:\n  - origin: a.test\n    file: a.zone\n  - origin: b.test\n", 4,
                 "zones[1]: missing \"file\" (master file (RFC 1035) or redins JSON, relative to "
                 "the config file's directory)");
    expect_error("zones:\n  - origin: a.test\n    file: a.zone\n    format: bind\n", 4,
                 "zones[0]: format: expected rfc1035 or json, got \"bind\"");
    expect_error("zones:\n  - file: a.zone\n", 2,
                 "zones[0]: missing \"origin\" (the zone's apex name)");
    expect_error("zones:\n  - origin: a.test\n    file: [x]\n", 3,
                 "zones[0]: file: expected a non-empty string, got a list");
    expect_error("zones:\n  - origin: \"\"\n    file: a\n", 2,
                 "zones[0]: origin: expected a non-empty string, got a string");
    expect_error("zones:\n  - a.test\n", 2,
                 "zones[0]: expected a mapping {origin, file, format}, got a plain scalar");
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

    /* a second document is not silently skipped */
    expect_error("workers: 2\n---\nworkers: 3\n", 3,
                 "a second YAML document (one configuration per file)");
    /* ... and a syntax error inside it is still one */
    config_init(&c);
    path = write_tmp("workers: 2\n---\nlisten: [\n");
    assert_int_equal(config_load(&c, path, err, sizeof(err)), TERN_ESYNTAX);
    assert_non_null(strstr(err, "YAML syntax error"));
    unlink(path);
    config_free(&c);
    /* an explicit end marker alone is fine */
    c = load_text("---\nworkers: 2\n...\n");
    assert_int_equal(c.workers, 2);
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
    assert_true(l.udp && l.tcp);

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

static void test_same_listen(void **state)
{
    (void)state;
    config_t a = load_text("listen: [\"127.0.0.1:53\", \"[::1]:53\"]\nworkers: 2\n");
    /* the text as written and the other options do not matter */
    config_t b = load_text("listen:\n  - \"127.0.0.1:53\"\n  - {address: \"[0::1]:53\"}\n"
                           "workers: 2\nversion: other\n");
    assert_true(config_same_listen(&a, &b));
    assert_true(config_same_listen(&a, &a));
    b.workers = 3;
    assert_false(config_same_listen(&a, &b));
    b.workers = 2;
    b.listen[1].tcp = false;
    assert_false(config_same_listen(&a, &b));
    b.listen[1].tcp = true;
    assert_true(config_same_listen(&a, &b));
    config_free(&b);
    /* another port, another order, one address fewer */
    b = load_text("listen: [\"127.0.0.1:54\", \"[::1]:53\"]\nworkers: 2\n");
    assert_false(config_same_listen(&a, &b));
    config_free(&b);
    b = load_text("listen: [\"[::1]:53\", \"127.0.0.1:53\"]\nworkers: 2\n");
    assert_false(config_same_listen(&a, &b));
    config_free(&b);
    b = load_text("listen: [\"127.0.0.1:53\"]\nworkers: 2\n");
    assert_false(config_same_listen(&a, &b));
    config_free(&b);
    /* the redins form of the same list */
    b = load_text("workers: 2\nserver:\n  - {ip: 127.0.0.1, port: 53, protocol: tcp}\n"
                  "  - {ip: \"::1\", port: 53, protocol: udp}\n"
                  "  - {ip: 127.0.0.1, port: 53, protocol: udp}\n"
                  "  - {ip: \"::1\", port: 53, protocol: tcp}\n");
    assert_true(config_same_listen(&a, &b));
    config_free(&b);
    config_free(&a);
}

static void test_copy(void **state)
{
    (void)state;
    config_t a = load_ok(data_path("conf/valid.yaml"));
    config_t b;
    assert_int_equal(config_copy(&b, &a), 0);
    assert_true(config_same_listen(&a, &b));
    assert_int_equal(b.nzones, a.nzones);
    for (size_t i = 0; i < a.nzones; i++) {
        assert_ptr_not_equal(b.zones[i].origin, a.zones[i].origin);
        assert_string_equal(b.zones[i].origin, a.zones[i].origin);
        assert_string_equal(b.zones[i].file, a.zones[i].file);
    }
    assert_ptr_not_equal(b.identity, a.identity);
    assert_string_equal(b.identity, a.identity);
    assert_string_equal(b.version, a.version);
    assert_string_equal(b.user, a.user);
    assert_string_equal(b.group, a.group);
    assert_string_equal(b.pid_file, a.pid_file);
    assert_string_equal(b.control_socket, a.control_socket);
    assert_string_equal(b.metrics_listen, a.metrics_listen);
    assert_int_equal(b.log_level, a.log_level);
    assert_int_equal(b.log_target, a.log_target);
    assert_int_equal(b.allow_root, a.allow_root);
    assert_int_equal(b.edns_max_udp, a.edns_max_udp);
    /* independent: freeing one leaves the other whole (ASan would see a double free) */
    config_free(&a);
    assert_string_equal(b.zones[1].file, "/abs/other.zone");
    config_free(&b);

    /* unset strings stay unset */
    config_init(&a);
    assert_int_equal(config_copy(&b, &a), 0);
    assert_null(b.user);
    assert_null(b.zones);
    config_free(&b);
}

static void test_schema_print(void **state)
{
    (void)state;
    char buf[8192] = "";
    FILE *f = fmemopen(buf, sizeof(buf) - 1, "w");
    assert_non_null(f);
    config_schema_print(f);
    fclose(f);
    static const char *const keys[] = {"listen",
                                       "workers",
                                       "zones",
                                       "edns_max_udp",
                                       "identity",
                                       "version",
                                       "tcp_idle_timeout",
                                       "tcp_max_connections",
                                       "tcp_max_lifetime",
                                       "tcp_max_inflight",
                                       "udp_mmsg",
                                       "log_level",
                                       "log_target",
                                       "user",
                                       "group",
                                       "allow_root",
                                       "pid_file",
                                       "control_socket",
                                       "metrics_listen",
                                       "server",
                                       "error_log",
                                       "handler",
                                       "redis",
                                       "log",
                                       "upstream",
                                       "geoip",
                                       "healthcheck",
                                       "ratelimit"};
    for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
        char want[64];
        snprintf(want, sizeof(want), "\n  %s ", keys[i]);
        if (!strstr(buf, want) && strncmp(buf, want + 1, strlen(want) - 1) != 0)
            fail_msg("schema print lacks '%s'", keys[i]);
    }
    assert_non_null(strstr(buf, "[512..4096, default 1232]"));
    assert_non_null(strstr(buf, "[1..256 or auto, default 1]"));
    assert_non_null(strstr(buf, "[1..86400, default 120]"));
    assert_non_null(strstr(buf, "[1..65535, default 64]"));
    assert_non_null(strstr(buf, "[error, warning, info or debug, default info]"));
    assert_non_null(strstr(buf, "[stderr, stdout or syslog, default stderr]"));
    assert_non_null(strstr(buf, "[at most 107 bytes, default unset]"));
    assert_non_null(strstr(buf, "not supported yet: GeoIP answer selection"));
    /* every line is one option, well under a terminal's width plus the description */
    for (char *line = strtok(buf, "\n"); line; line = strtok(NULL, "\n"))
        assert_true(strlen(line) < 160);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults),
        cmocka_unit_test(test_valid_yaml),
        cmocka_unit_test(test_valid_json),
        cmocka_unit_test(test_example_ternd_yaml),
        cmocka_unit_test(test_example_has_every_option),
        cmocka_unit_test(test_redins_example_json),
        cmocka_unit_test(test_redins_server_mapping),
        cmocka_unit_test(test_redins_not_supported),
        cmocka_unit_test(test_redins_errors),
        cmocka_unit_test(test_listen_forms),
        cmocka_unit_test(test_bad_listen),
        cmocka_unit_test(test_listen_limit_in_file),
        cmocka_unit_test(test_unknown_key),
        cmocka_unit_test(test_duplicate_key),
        cmocka_unit_test(test_bad_type),
        cmocka_unit_test(test_out_of_range),
        cmocka_unit_test(test_tcp_limits),
        cmocka_unit_test(test_new_options),
        cmocka_unit_test(test_relative_paths),
        cmocka_unit_test(test_zone_fields),
        cmocka_unit_test(test_syntax_error),
        cmocka_unit_test(test_parse_listen),
        cmocka_unit_test(test_add_listen_limit),
        cmocka_unit_test(test_same_listen),
        cmocka_unit_test(test_copy),
        cmocka_unit_test(test_schema_print),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
