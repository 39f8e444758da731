/*
 * test_config_qlog.c — query logging's configuration (src/conf/config_qlog.c): tern's
 * "query_log:" block and its defaults, redins' request log ("log" in handler, or at the top
 * level), the two in one file refused; every bad value with its file:line and key path; copies,
 * comparisons, the restart-only check and frees (run under ASan: nothing may leak); the
 * examples in conf/.
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

/* Nothing logged, every setting at its default. */
static void expect_off(const config_qlog_t *q)
{
    assert_false(q->enabled);
    assert_null(q->dnstap_socket);
    assert_null(q->dnstap_file);
    assert_true(q->dnstap_queries);
    assert_true(q->dnstap_responses);
    assert_null(q->dnstap_identity);
    assert_null(q->dnstap_version);
    assert_false(q->requests);
    assert_int_equal(q->requests_target, CONFIG_REQLOG_FILE);
    assert_int_equal(q->requests_format, CONFIG_REQLOG_JSON);
    assert_null(q->requests_path);
    assert_int_equal(q->sample, 1);
    assert_null(q->exclude_zones);
    assert_int_equal(q->nexclude_zones, 0);
    assert_int_equal(q->ring_kib, 4096);
}

/* No request log and nothing else logged (the unused target and format are left alone). */
static void expect_no_requests(const config_qlog_t *q)
{
    assert_false(q->enabled);
    assert_false(q->requests);
    assert_null(q->requests_path);
    assert_null(q->dnstap_socket);
    assert_null(q->dnstap_file);
}

static void test_defaults(void **state)
{
    (void)state;
    config_t c;
    config_init(&c);
    expect_off(&c.qlog);
    config_free(&c);
    c = load_text("workers: 1\n");
    expect_off(&c.qlog);
    config_free(&c);
    c = load_text("query_log: ~\n");
    expect_off(&c.qlog);
    config_free(&c);
    /* a block without sinks: its settings, nothing on */
    c = load_text("query_log:\n  sample: 10\n");
    assert_false(c.qlog.enabled);
    assert_int_equal(c.qlog.sample, 10);
    config_free(&c);
}

/* The block of the brief, as conf/ternd.yaml shows it. */
static void test_full_block(void **state)
{
    (void)state;
    config_t c = load_text("query_log:\n"
                           "  sample: 1\n"
                           "  ring_size: 4096\n"
                           "  exclude_zones: [internal.example.test]\n"
                           "  dnstap:\n"
                           "    socket: /run/tern/dnstap.sock\n"
                           "    queries: true\n"
                           "    responses: true\n"
                           "    identity: ns1.example.test\n"
                           "    version: \"tern x\"\n"
                           "  requests:\n"
                           "    target: file\n"
                           "    format: json\n"
                           "    path: /var/log/tern/requests.log\n");
    const config_qlog_t *q = &c.qlog;
    assert_true(q->enabled);
    assert_string_equal(q->dnstap_socket, "/run/tern/dnstap.sock");
    assert_null(q->dnstap_file);
    assert_true(q->dnstap_queries);
    assert_true(q->dnstap_responses);
    assert_string_equal(q->dnstap_identity, "ns1.example.test");
    assert_string_equal(q->dnstap_version, "tern x");
    assert_true(q->requests);
    assert_int_equal(q->requests_target, CONFIG_REQLOG_FILE);
    assert_int_equal(q->requests_format, CONFIG_REQLOG_JSON);
    assert_string_equal(q->requests_path, "/var/log/tern/requests.log");
    assert_int_equal(q->sample, 1);
    assert_int_equal(q->ring_kib, 4096);
    assert_int_equal(q->nexclude_zones, 1);
    assert_string_equal(q->exclude_zones[0], "internal.example.test");
    config_free(&c);

    /* a dnstap file, relative paths (resolved against the config's directory), the other
     * values */
    c = load_text("query_log:\n"
                  "  sample: 1000000\n"
                  "  ring_size: 64\n"
                  "  exclude_zones: Internal.Example.TEST.\n"
                  "  dnstap: {file: dnstap.fstrm, queries: false}\n"
                  "  requests: {target: stdout, format: text}\n");
    q = &c.qlog;
    assert_true(q->enabled);
    assert_null(q->dnstap_socket);
    assert_string_equal(q->dnstap_file, "/tmp/dnstap.fstrm");
    assert_false(q->dnstap_queries);
    assert_true(q->dnstap_responses);
    assert_null(q->dnstap_identity);
    assert_true(q->requests);
    assert_int_equal(q->requests_target, CONFIG_REQLOG_STDOUT);
    assert_int_equal(q->requests_format, CONFIG_REQLOG_TEXT);
    assert_null(q->requests_path);
    assert_int_equal(q->sample, 1000000);
    assert_int_equal(q->ring_kib, 64);
    assert_int_equal(q->nexclude_zones, 1);
    assert_string_equal(q->exclude_zones[0], "internal.example.test");
    config_free(&c);

    /* only one sink; the maxima; canonical keys of escaped names */
    c = load_text("query_log:\n"
                  "  ring_size: 1048576\n"
                  "  exclude_zones: [a.test, \"b\\\\.c.test\", \"\\\\065x.test\", sub.a.test]\n"
                  "  requests: {target: stderr}\n");
    q = &c.qlog;
    assert_true(q->enabled);
    assert_true(q->requests);
    assert_int_equal(q->requests_target, CONFIG_REQLOG_STDERR);
    assert_int_equal(q->requests_format, CONFIG_REQLOG_JSON);
    assert_int_equal(q->ring_kib, 1048576);
    assert_int_equal(q->nexclude_zones, 4);
    assert_string_equal(q->exclude_zones[0], "a.test");
    assert_string_equal(q->exclude_zones[1], "b\\.c.test");
    assert_string_equal(q->exclude_zones[2], "ax.test");
    assert_string_equal(q->exclude_zones[3], "sub.a.test");
    config_free(&c);

    /* sinks switched off */
    c = load_text("query_log:\n"
                  "  dnstap: ~\n"
                  "  requests: {enable: false, target: file}\n"
                  "  exclude_zones: []\n");
    assert_false(c.qlog.enabled);
    assert_false(c.qlog.requests);
    assert_int_equal(c.qlog.nexclude_zones, 0);
    config_free(&c);
    c = load_text("query_log:\n  requests: ~\n  dnstap: {socket: s.sock, responses: false}\n");
    assert_true(c.qlog.enabled);
    assert_false(c.qlog.requests);
    assert_string_equal(c.qlog.dnstap_socket, "/tmp/s.sock");
    assert_true(c.qlog.dnstap_queries);
    assert_false(c.qlog.dnstap_responses);
    config_free(&c);
}

static void test_errors(void **state)
{
    (void)state;
    expect_error("query_log: 5\n", 1,
                 "query_log: expected a mapping {sample, ring_size, exclude_zones, dnstap, "
                 "requests}, got a plain scalar");
    expect_error("query_log:\n  samples: 2\n", 2,
                 "query_log: unknown key \"samples\" (want sample, ring_size, exclude_zones, "
                 "dnstap, requests)");
    expect_error("query_log:\n  sample: 1\n  sample: 2\n", 3,
                 "query_log: duplicate key \"sample\" (first at line 2)");
    expect_error("query_log:\n  sample: 0\n", 2, "query_log: sample: 0 is out of range 1..1000000");
    expect_error("query_log:\n  sample: 1000001\n", 2,
                 "query_log: sample: 1000001 is out of range 1..1000000");
    expect_error("query_log:\n  sample: \"2\"\n", 2,
                 "query_log: sample: expected an integer, got \"2\"");
    expect_error("query_log:\n  ring_size: 63\n", 2,
                 "query_log: ring_size: 63 is out of range 64..1048576");
    expect_error("query_log:\n  ring_size: 1048577\n", 2,
                 "query_log: ring_size: 1048577 is out of range 64..1048576");

    /* exclude_zones */
    expect_error("query_log:\n  exclude_zones: [ok.test, a..b]\n", 2,
                 "query_log: exclude_zones[1]: bad zone name \"a..b\": empty label in name");
    expect_error("query_log:\n  exclude_zones: \"\"\n", 2,
                 "query_log: exclude_zones: bad zone name \"\": empty name");
    expect_error("query_log:\n  exclude_zones:\n    - a.test\n    - .\n", 4,
                 "query_log: exclude_zones[1]: the root would exclude every query (query_log: ~ "
                 "logs none)");
    expect_error("query_log:\n  exclude_zones:\n    - a.test\n    - A.TEST.\n", 4,
                 "query_log: exclude_zones[1]: a.test is given twice (first at line 3)");
    expect_error("query_log:\n  exclude_zones: {a: b}\n", 2,
                 "query_log: exclude_zones: expected a zone name or a list of them, got a "
                 "mapping");
    expect_error("query_log:\n  exclude_zones: [[a]]\n", 2,
                 "query_log: exclude_zones[0]: expected a zone name, got a list");
    expect_error("query_log:\n  exclude_zones: [a.test, ~]\n", 2,
                 "query_log: exclude_zones[1]: expected a zone name, got nothing");

    /* dnstap */
    expect_error("query_log:\n  dnstap:\n    sockets: x\n", 3,
                 "query_log: dnstap: unknown key \"sockets\" (want socket, file, queries, "
                 "responses, identity, version)");
    expect_error("query_log:\n  dnstap:\n    socket: a.sock\n    file: a.fstrm\n", 4,
                 "query_log: dnstap: file: give socket or file, not both");
    expect_error("query_log:\n  dnstap:\n    queries: true\n", 3,
                 "query_log: dnstap: missing \"socket\" or \"file\" (where the dnstap messages "
                 "go; dnstap: ~ for none)");
    expect_error("query_log:\n  dnstap: {socket: ~, file: ~}\n", 2,
                 "query_log: dnstap: missing \"socket\" or \"file\" (where the dnstap messages "
                 "go; dnstap: ~ for none)");
    expect_error("query_log:\n  dnstap:\n    file: f\n    queries: false\n    responses: false\n",
                 3,
                 "query_log: dnstap: queries and responses are both false (nothing to write; "
                 "dnstap: ~ for none)");
    expect_error("query_log:\n  dnstap:\n    file: f\n    queries: yes\n", 4,
                 "query_log: dnstap: queries: expected true or false, got a plain scalar");
    expect_error("query_log:\n  dnstap:\n    socket: \"\"\n", 3,
                 "query_log: dnstap: socket: must not be empty");
    char text[512], want[512];
    char long_name[200];
    memset(long_name, 'x', 120);
    long_name[120] = '\0';
    snprintf(text, sizeof(text), "query_log:\n  dnstap:\n    socket: /%s\n", long_name);
    snprintf(want, sizeof(want),
             "query_log: dnstap: socket: \"/%s\" is 121 bytes long, more than the 107 allowed",
             long_name);
    expect_error(text, 3, want);
    expect_error("query_log:\n  dnstap:\n    file: f\n    identity: [a]\n", 4,
                 "query_log: dnstap: identity: expected a string, got a list");

    /* requests */
    expect_error("query_log:\n  requests:\n    target: kafka\n", 3,
                 "query_log: requests: target: expected file, stdout, stderr or syslog, got "
                 "\"kafka\"");
    expect_error("query_log:\n  requests:\n    target: stdout\n    format: capnp\n", 4,
                 "query_log: requests: format: expected json or text, got \"capnp\"");
    expect_error("query_log:\n  requests:\n    format: text\n", 3,
                 "query_log: requests: missing \"path\" (target file writes to it)");
    expect_error("query_log:\n  requests: {}\n", 2,
                 "query_log: requests: missing \"path\" (target file writes to it)");
    expect_error("query_log:\n  requests:\n    target: stdout\n    path: x.log\n", 4,
                 "query_log: requests: path: only with target file (not stdout)");
    expect_error("query_log:\n  requests:\n    level: info\n", 3,
                 "query_log: requests: unknown key \"level\" (want enable, target, format, path)");
    expect_error("query_log:\n  requests: [file]\n", 2,
                 "query_log: requests: expected a mapping {enable, target, format, path}, got a "
                 "list");
}

/* redins' request log: handler.log, or the top-level log of older redins. */
static void test_redins_log(void **state)
{
    (void)state;
    config_t c = load_text("{\n"
                           "  \"handler\": {\n"
                           "    \"log\": {\n"
                           "      \"enable\": true,\n"
                           "      \"level\": \"info\",\n"
                           "      \"target\": \"file\",\n"
                           "      \"format\": \"json\",\n"
                           "      \"time_format\": \"2006-01-02T15:04:05.999999-07:00\",\n"
                           "      \"path\": \"requests.log\",\n"
                           "      \"kafka\": {\"enable\": false, \"topic\": \"dns\",\n"
                           "                \"brokers\": [\"127.0.0.1:9092\"]},\n"
                           "      \"sentry\": {\"enable\": false, \"dsn\": \"\"},\n"
                           "      \"syslog\": {\"enable\": false}\n"
                           "    }\n"
                           "  }\n"
                           "}\n");
    const config_qlog_t *q = &c.qlog;
    assert_true(q->enabled);
    assert_true(q->requests);
    assert_int_equal(q->requests_target, CONFIG_REQLOG_FILE);
    assert_int_equal(q->requests_format, CONFIG_REQLOG_JSON);
    assert_string_equal(q->requests_path, "/tmp/requests.log");
    assert_null(q->dnstap_socket);
    assert_null(q->dnstap_file);
    assert_true(c.redis.enabled); /* handler is still the Redis source */
    config_free(&c);

    /* redins' defaults: off; when enabled, stdout and text; the path only with target file */
    c = load_text("{\"handler\": {\"log\": {\"path\": \"/tmp/x.log\"}}}\n");
    expect_no_requests(&c.qlog);
    config_free(&c);
    c = load_text("{\"handler\": {\"log\": {\"enable\": false, \"target\": \"file\"}}}\n");
    expect_no_requests(&c.qlog);
    config_free(&c);
    c = load_text("{\"handler\": {\"log\": {\"enable\": true, \"path\": \"/tmp/x.log\"}}}\n");
    assert_true(c.qlog.enabled);
    assert_true(c.qlog.requests);
    assert_int_equal(c.qlog.requests_target, CONFIG_REQLOG_STDOUT);
    assert_int_equal(c.qlog.requests_format, CONFIG_REQLOG_TEXT);
    assert_null(c.qlog.requests_path);
    config_free(&c);
    c = load_text("{\"handler\": {\"log\": null}}\n");
    expect_no_requests(&c.qlog);
    config_free(&c);

    /* level: requests were logged at info */
    static const char *const on[] = {"trace", "debug", "info"};
    static const char *const off[] = {"warning", "warn", "error", "fatal", "panic"};
    char text[256];
    for (size_t i = 0; i < 3; i++) {
        snprintf(text, sizeof(text),
                 "{\"handler\": {\"log\": {\"enable\": true, \"level\": \"%s\", "
                 "\"target\": \"stderr\"}}}\n",
                 on[i]);
        c = load_text(text);
        assert_true(c.qlog.requests);
        assert_true(c.qlog.enabled);
        assert_int_equal(c.qlog.requests_target, CONFIG_REQLOG_STDERR);
        config_free(&c);
    }
    for (size_t i = 0; i < 5; i++) {
        snprintf(text, sizeof(text),
                 "{\"handler\": {\"log\": {\"enable\": true, \"level\": \"%s\", "
                 "\"target\": \"stderr\"}}}\n",
                 off[i]);
        c = load_text(text);
        assert_false(c.qlog.requests);
        assert_false(c.qlog.enabled);
        config_free(&c);
    }

    /* the top-level log of older redins, beside a tern query_log with dnstap only: in either
     * order, each keeps its part */
    c = load_text("log:\n  enable: true\n  target: stdout\n  format: json\n"
                  "query_log:\n  dnstap: {socket: /run/d.sock}\n  sample: 5\n");
    q = &c.qlog;
    assert_true(q->enabled);
    assert_true(q->requests);
    assert_int_equal(q->requests_target, CONFIG_REQLOG_STDOUT);
    assert_int_equal(q->requests_format, CONFIG_REQLOG_JSON);
    assert_string_equal(q->dnstap_socket, "/run/d.sock");
    assert_int_equal(q->sample, 5);
    config_free(&c);
    c = load_text("query_log:\n  dnstap: {socket: /run/d.sock}\n"
                  "handler:\n  log: {enable: true, target: file, path: r.log, format: text}\n");
    q = &c.qlog;
    assert_true(q->requests);
    assert_int_equal(q->requests_target, CONFIG_REQLOG_FILE);
    assert_int_equal(q->requests_format, CONFIG_REQLOG_TEXT);
    assert_string_equal(q->requests_path, "/tmp/r.log");
    assert_string_equal(q->dnstap_socket, "/run/d.sock");
    config_free(&c);
}

static void test_redins_log_errors(void **state)
{
    (void)state;
    expect_error("{\n  \"handler\": {\n    \"log\": {\"enable\": true, \"target\": \"kafka\"}\n"
                 "  }\n}\n",
                 3,
                 "handler: log: target: \"kafka\" is not supported: tern writes the request log "
                 "to a file, stdout, stderr or the local syslog (the journal under systemd) and "
                 "queries as dnstap (query_log.dnstap); Kafka is out of scope");
    expect_error("log:\n  target: udp\n", 2,
                 "log: target: \"udp\" is not supported: tern writes the request log to a file, "
                 "stdout, stderr or the local syslog (the journal under systemd) and queries as "
                 "dnstap (query_log.dnstap); Kafka is out of scope");
    expect_error("handler:\n  log:\n    enable: true\n    kafka:\n      enable: true\n"
                 "      topic: dns\n",
                 5,
                 "handler: log: kafka: enable: true: Kafka is out of scope for tern: the request "
                 "log goes to a file, stdout or stderr (the journal); use dnstap "
                 "(query_log.dnstap) or the request log file with a shipper");
    expect_error("handler:\n  log:\n    sentry: {enable: true, dsn: \"https://x@y/1\"}\n", 3,
                 "handler: log: sentry: enable: true: Sentry is out of scope for tern: the "
                 "request log goes to a file, stdout or stderr (the journal); use dnstap "
                 "(query_log.dnstap) or the request log file with a shipper");
    expect_error("log:\n  syslog: {enable: true, address: \"127.0.0.1:514\"}\n", 2,
                 "log: syslog: enable: true: remote syslog is out of scope for tern: the request "
                 "log goes to a file, stdout, stderr or the local syslog (target: syslog, the "
                 "journal under systemd); use dnstap (query_log.dnstap) or the file with a "
                 "shipper");
    expect_error("handler:\n  log:\n    kafka: {enabled: true}\n", 3,
                 "handler: log: kafka: unknown key \"enabled\" (want enable, topic, topics, "
                 "brokers, format, compression, timeout, buffer_size)");
    expect_error("handler:\n  log:\n    enable: true\n    target: file\n", 4,
                 "handler: log: target: file needs path, the log file");
    expect_error("handler:\n  log:\n    enable: true\n    target: file\n    path: \"\"\n", 4,
                 "handler: log: target: file needs path, the log file");
    expect_error("handler:\n  log:\n    level: verbose\n", 3,
                 "handler: log: level: expected trace, debug, info, warning, warn, error, fatal "
                 "or panic, got \"verbose\"");
    expect_error("handler:\n  log:\n    format: capnp\n", 3,
                 "handler: log: format: expected json or text, got \"capnp\"");
    expect_error("handler:\n  log:\n    enable: 1\n", 3,
                 "handler: log: enable: expected true or false, got a plain scalar");
    expect_error("handler:\n  log:\n    time_format: [x]\n", 3,
                 "handler: log: time_format: expected a string, got a list");
    expect_error("handler:\n  log:\n    file: x\n", 3,
                 "handler: log: unknown key \"file\" (want enable, level, target, format, path, "
                 "time_format, kafka, sentry, syslog)");
    expect_error("handler:\n  log: true\n", 2,
                 "handler: log: expected a mapping {enable, level, target, format, path, "
                 "time_format, kafka, sentry, syslog}, got a plain scalar");
}

/* tern's request log and a redins log in one file: which would win is a guess; refused. */
/* target syslog (the local socket: journald under systemd), in tern's block and redins' log */
static void test_syslog_target(void **state)
{
    (void)state;
    config_t c = load_text("query_log:\n  requests:\n    target: syslog\n    format: json\n");
    assert_true(c.qlog.enabled && c.qlog.requests);
    assert_int_equal(c.qlog.requests_target, CONFIG_REQLOG_SYSLOG);
    assert_null(c.qlog.requests_path);
    config_free(&c);
    c = load_text("{\"handler\": {\"log\": {\"enable\": true, \"target\": \"syslog\", "
                  "\"format\": \"json\", \"level\": \"info\"}}}\n");
    assert_true(c.qlog.requests);
    assert_int_equal(c.qlog.requests_target, CONFIG_REQLOG_SYSLOG);
    assert_int_equal(c.qlog.requests_format, CONFIG_REQLOG_JSON);
    config_free(&c);
}

static void test_both_refused(void **state)
{
    (void)state;
    expect_error("query_log:\n  sample: 2\n  requests: {target: stdout}\n"
                 "handler:\n  log: {enable: false}\n",
                 5,
                 "handler: log: conflicts with query_log: requests at line 3 (give one of them)");
    expect_error("handler:\n  zone_reload: 60\n  log: {enable: true}\n"
                 "query_log:\n  requests: {target: stdout}\n",
                 5,
                 "query_log: requests: conflicts with handler: log at line 3 (give one of them)");
    expect_error("log: {enable: true}\nquery_log:\n  requests: ~\n", 3,
                 "query_log: requests: conflicts with log at line 1 (give one of them)");
    expect_error("query_log: ~\nlog: {enable: true}\n", 2,
                 "log: conflicts with query_log at line 1 (give one of them)");
    expect_error("log: {enable: false}\nhandler:\n  log: {enable: true}\n", 3,
                 "handler: log: conflicts with log at line 1 (give one of them)");
    expect_error("log: {}\nquery_log: ~\n", 2,
                 "query_log: conflicts with log at line 1 (give one of them)");
}

/* config_copy(), config_same_qlog(), the restart-only check, config_free() (ASan: no leak). */
static void test_copy_same_restart(void **state)
{
    (void)state;
    config_t a = load_text("query_log:\n"
                           "  exclude_zones: [a.test, b.test]\n"
                           "  dnstap: {file: d.fstrm, identity: me, version: v1}\n"
                           "  requests: {path: r.log}\n");
    config_t b;
    assert_int_equal(config_copy(&b, &a), 0);
    assert_true(config_same_qlog(&a.qlog, &b.qlog));
    assert_ptr_not_equal(a.qlog.dnstap_file, b.qlog.dnstap_file);
    assert_ptr_not_equal(a.qlog.exclude_zones, b.qlog.exclude_zones);
    assert_ptr_not_equal(a.qlog.exclude_zones[1], b.qlog.exclude_zones[1]);
    assert_string_equal(b.qlog.exclude_zones[1], "b.test");
    assert_string_equal(b.qlog.requests_path, "/tmp/r.log");
    char buf[256];
    assert_int_equal(config_restart_only_changes(&a, &b, buf, sizeof(buf)), 0);

    free(b.qlog.exclude_zones[1]);
    b.qlog.exclude_zones[1] = strdup("c.test");
    assert_false(config_same_qlog(&a.qlog, &b.qlog));
    assert_int_equal(config_restart_only_changes(&a, &b, buf, sizeof(buf)), 1);
    assert_string_equal(buf, "query_log");
    config_free(&b);

    /* each field counts */
    assert_int_equal(config_copy(&b, &a), 0);
    b.qlog.sample = 2;
    assert_false(config_same_qlog(&a.qlog, &b.qlog));
    b.qlog.sample = 1;
    b.qlog.requests_format = CONFIG_REQLOG_TEXT;
    assert_false(config_same_qlog(&a.qlog, &b.qlog));
    b.qlog.requests_format = CONFIG_REQLOG_JSON;
    free(b.qlog.dnstap_version);
    b.qlog.dnstap_version = NULL;
    assert_false(config_same_qlog(&a.qlog, &b.qlog));
    config_free(&b);

    /* a redins log that changes is a query_log change too */
    config_t r = load_text("{\"handler\": {\"log\": {\"enable\": true}}}\n");
    config_t r2 = load_text("{\"handler\": {\"log\": {\"enable\": true, \"format\": \"json\"}}}\n");
    assert_int_equal(config_restart_only_changes(&r, &r2, buf, sizeof(buf)), 1);
    assert_string_equal(buf, "query_log");
    config_free(&r);
    config_free(&r2);

    /* a copy of nothing logged */
    config_t e, f;
    config_init(&e);
    assert_int_equal(config_copy(&f, &e), 0);
    expect_off(&f.qlog);
    assert_true(config_same_qlog(&e.qlog, &f.qlog));
    config_free(&e);
    config_free(&f);
    config_free(&a);
}

/* A second load replaces query_log as a whole. */
static void test_load_twice(void **state)
{
    (void)state;
    config_t c;
    char err[512] = "";
    config_init(&c);
    assert_int_equal(config_load(&c,
                                 write_tmp("query_log:\n  exclude_zones: [a.test]\n"
                                           "  requests: {target: stdout}\n"),
                                 err, sizeof(err)),
                     0);
    unlink(tmp_path);
    assert_true(c.qlog.requests);
    assert_int_equal(
        config_load(&c, write_tmp("query_log:\n  dnstap: {socket: /d.sock}\n"), err, sizeof(err)),
        0);
    unlink(tmp_path);
    assert_false(c.qlog.requests);
    assert_int_equal(c.qlog.nexclude_zones, 0);
    assert_string_equal(c.qlog.dnstap_socket, "/d.sock");
    config_free(&c);
}

/* $TERN_TEST_DATA/../../conf/name into buf. */
static const char *conf_file(char *buf, size_t len, const char *name)
{
    const char *dir = getenv("TERN_TEST_DATA");
    snprintf(buf, len, "%s/../../conf/%s", dir ? dir : "tests/data", name);
    return buf;
}

/* conf/ternd.yaml: "query_log: ~"; its commented block, uncommented, is valid and means what it
 * says. conf/redins-example.json: its handler.log is the request log. */
static void test_examples(void **state)
{
    (void)state;
    char path[512], err[512] = "";
    config_t c;
    config_init(&c);
    int r = config_load(&c, conf_file(path, sizeof(path), "ternd.yaml"), err, sizeof(err));
    if (r < 0)
        print_error("%s\n", err);
    assert_int_equal(r, 0);
    expect_off(&c.qlog);
    config_free(&c);

    /* "# query_log:" and the "#" lines under it */
    static char yaml[65536], block[8192];
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    size_t n = fread(yaml, 1, sizeof(yaml) - 1, f);
    fclose(f);
    yaml[n] = '\0';
    const char *line = strstr(yaml, "\n# query_log:\n");
    assert_non_null(line);
    size_t off = 0;
    for (line++; *line == '#';) {
        const char *nl = strchr(line, '\n');
        assert_non_null(nl);
        const char *s = line + 1 + (line[1] == ' ');
        off += (size_t)snprintf(block + off, sizeof(block) - off, "%.*s\n", (int)(nl - s), s);
        line = nl + 1;
    }
    c = load_text(block);
    const config_qlog_t *q = &c.qlog;
    assert_true(q->enabled);
    assert_int_equal(q->sample, 1);
    assert_int_equal(q->ring_kib, 4096);
    assert_int_equal(q->nexclude_zones, 1);
    assert_string_equal(q->exclude_zones[0], "internal.example.test");
    assert_string_equal(q->dnstap_socket, "/run/tern/dnstap.sock");
    assert_null(q->dnstap_file);
    assert_true(q->dnstap_queries);
    assert_true(q->dnstap_responses);
    assert_true(q->requests);
    assert_int_equal(q->requests_target, CONFIG_REQLOG_FILE);
    assert_int_equal(q->requests_format, CONFIG_REQLOG_JSON);
    assert_string_equal(q->requests_path, "/var/log/tern/requests.log");
    config_free(&c);

    config_init(&c);
    r = config_load(&c, conf_file(path, sizeof(path), "redins-example.json"), err, sizeof(err));
    if (r < 0)
        print_error("%s\n", err);
    assert_int_equal(r, 0);
    q = &c.qlog;
    assert_true(q->enabled);
    assert_true(q->requests);
    assert_int_equal(q->requests_target, CONFIG_REQLOG_FILE);
    assert_int_equal(q->requests_format, CONFIG_REQLOG_JSON);
    assert_string_equal(q->requests_path, "/var/log/redins/requests.log");
    assert_null(q->dnstap_socket);
    assert_null(q->dnstap_file);
    config_free(&c);
}

/* --help lists query_log's keys under it, and redins' log's. */
static void test_schema_print(void **state)
{
    (void)state;
    static char help[65536];
    memset(help, 0, sizeof(help));
    FILE *f = fmemopen(help, sizeof(help) - 1, "w");
    assert_non_null(f);
    config_schema_print(f);
    fclose(f);
    const char *ql = strstr(help, "\n  query_log ");
    assert_non_null(ql);
    static const char *const keys[] = {
        "\n    sample             ", "\n    ring_size          ", "\n    exclude_zones      ",
        "\n    dnstap             ", "\n      socket           ", "\n      file             ",
        "\n      queries          ", "\n      responses        ", "\n      identity         ",
        "\n      version          ", "\n    requests           ", "\n      enable           ",
        "\n      target           ", "\n      format           ", "\n      path             "};
    for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
        if (!strstr(ql, keys[i]))
            fail_msg("--help lacks '%s' under query_log", keys[i] + 1);
    assert_non_null(strstr(ql, "[1..1000000, default 1]"));
    assert_non_null(strstr(ql, "[64..1048576, default 4096]"));
    assert_non_null(strstr(ql, "[file, stdout, stderr or syslog, default file]"));
    const char *redins = strstr(help, "\nredins");
    assert_non_null(redins);
    assert_true(ql < redins);
    const char *log = strstr(redins, "\n  log ");
    assert_non_null(log);
    assert_non_null(strstr(log, "\n    time_format        accepted and ignored"));
    assert_null(strstr(help, "not supported yet: the per-query"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults),
        cmocka_unit_test(test_full_block),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_redins_log),
        cmocka_unit_test(test_redins_log_errors),
        cmocka_unit_test(test_syslog_target),
        cmocka_unit_test(test_both_refused),
        cmocka_unit_test(test_copy_same_restart),
        cmocka_unit_test(test_load_twice),
        cmocka_unit_test(test_examples),
        cmocka_unit_test(test_schema_print),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
