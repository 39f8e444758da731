/*
 * test_config.c — the YAML/JSON config: valid files (tests/data/conf, conf/ternd.yaml,
 * conf/redins-example.json), the redins-style keys, the Redis source's settings (tern's "redis:"
 * and redins' "handler"), health checking (tern's "health:" and redins' "healthcheck"), and every
 * kind of error with its line. The ANAME upstreams have test_config_aname.c.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
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

/* Write text to path (created or truncated). */
static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
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

/* Load text (valid) and check the MaxMind databases it sets; NULL = unset. */
static void expect_dbs(const char *text, const char *geoip_db, const char *asn_db)
{
    config_t c = load_text(text);
    if (geoip_db)
        assert_string_equal(c.geoip_db, geoip_db);
    else
        assert_null(c.geoip_db);
    if (asn_db)
        assert_string_equal(c.asn_db, asn_db);
    else
        assert_null(c.asn_db);
    config_free(&c);
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
    /* no Redis; its verify interval is redins' 600 s, everything else the source's default */
    assert_false(c.redis.enabled);
    assert_null(c.redis.host);
    assert_int_equal(c.redis.port, 0);
    assert_null(c.redis.unix_path);
    assert_int_equal(c.redis.db, 0);
    assert_null(c.redis.password);
    assert_null(c.redis.prefix);
    assert_null(c.redis.suffix);
    assert_int_equal(c.redis.connect_timeout_ms, 0);
    assert_int_equal(c.redis.read_timeout_ms, 0);
    assert_int_equal(c.redis.zone_reload_s, 600);
    assert_null(c.redis.changes_channel);
    assert_int_equal(c.redis.default_ttl, 0);
    assert_int_equal(c.redis.max_ttl, 0);
    /* no health checks; a block's defaults are there for when one is given */
    assert_false(c.health.enabled);
    assert_int_equal(c.health.check_interval_ms, 10000);
    assert_int_equal(c.health.max_requests, 100);
    assert_int_equal(c.health.max_pending, 0);
    assert_int_equal(c.health.update_interval_s, 600);
    assert_null(c.health.ca_file);
    assert_false(c.health.redis.enabled);
    assert_null(c.health.redis.host);
    assert_null(c.health.redis.prefix);
    assert_false(c.health.log_enabled);
    assert_int_equal(c.health.log_target, CONFIG_HEALTH_LOG_FILE);
    assert_true(c.health.log_json);
    assert_null(c.health.log_path);
    assert_null(c.health.checks);
    assert_int_equal(c.health.nchecks, 0);
    assert_null(c.file);
    config_free(&c);
}

/* A file with no options is a truncated one (a crashed editor, a half-finished deploy), never
 * "all defaults": a reload would otherwise serve no zone at all. */
static void test_empty_refused(void **state)
{
    (void)state;
    const char *texts[] = {"", "\n", "# only a comment\n", "\n# two\n\n# comments\n"};
    for (size_t i = 0; i < TERN_ARRAY_SIZE(texts); i++) {
        config_t c;
        char err[512] = "", want[512];
        config_init(&c);
        const char *path = write_tmp(texts[i]);
        int r = config_load(&c, path, err, sizeof(err));
        snprintf(want, sizeof(want),
                 "%s: the file holds no options (empty, or only comments): refused, as a "
                 "truncated file would be",
                 path);
        assert_int_equal(r, TERN_EINVAL);
        assert_string_equal(err, want);
        unlink(path);
        config_free(&c);
    }
    expect_error("{}\n", 1,
                 "an empty mapping ({}) holds no options: refused, as a truncated "
                 "file would be");
    expect_error("\n\n{ }\n", 3,
                 "an empty mapping ({}) holds no options: refused, as a "
                 "truncated file would be");
}

/* What a start requires of the complete config: a listen address (the file's or --listen's). */
static void test_check_complete(void **state)
{
    (void)state;
    char err[256];
    config_t c = load_text("workers: 1\n");
    assert_int_equal(config_check_complete(&c, err, sizeof(err)), TERN_EINVAL);
    assert_non_null(strstr(err, "no listen address"));
    assert_int_equal(config_add_listen(&c, "127.0.0.1:53"), 0);
    assert_int_equal(config_check_complete(&c, err, sizeof(err)), 0);
    assert_string_equal(err, "");
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
    /* "redis: ~": no Redis */
    assert_false(c.redis.enabled);
    assert_null(c.redis.host);
    assert_int_equal(c.redis.zone_reload_s, 600);
    /* "health: ~": no health checks */
    assert_false(c.health.enabled);
    assert_int_equal(c.health.nchecks, 0);
    assert_false(c.health.log_enabled);
    /* "aname: ~": no ANAME upstreams */
    assert_int_equal(c.aname.nupstreams, 0);
    assert_null(c.aname.upstreams[0].host);
    config_free(&c);
}

/* conf/ternd.yaml into yaml (len bytes). */
static void read_example(char *yaml, size_t len)
{
    FILE *f = fopen(conf_path("ternd.yaml"), "r");
    assert_non_null(f);
    size_t n = fread(yaml, 1, len - 1, f);
    assert_true(feof(f)); /* all of it */
    fclose(f);
    yaml[n] = '\0';
}

/* The commented-out "# name:" block of conf/ternd.yaml ("# name:" and the lines under it,
 * "#   key: ...") into block without their "# "; returns how many lines. */
static size_t example_block(const char *name, char *block, size_t len)
{
    static char yaml[65536];
    char head[64];
    read_example(yaml, sizeof(yaml));
    snprintf(head, sizeof(head), "\n# %s:\n", name);
    const char *line = strstr(yaml, head);
    assert_non_null(line);
    line++;
    size_t off = 0, lines = 0;
    do {
        const char *end = strchr(line, '\n');
        assert_non_null(end);
        off += (size_t)snprintf(block + off, len - off, "%.*s\n", (int)(end - line - 2), line + 2);
        assert_true(off < len);
        lines++;
        line = end + 1;
    } while (strncmp(line, "#   ", 4) == 0);
    return lines;
}

/* The commented-out "# redis:" block of conf/ternd.yaml, uncommented, is a valid config that
 * sets what its comments say. */
static void test_example_redis_block(void **state)
{
    (void)state;
    char block[4096] = "";
    assert_true(example_block("redis", block, sizeof(block)) > 11);
    config_t c = load_text(block);
    assert_true(c.redis.enabled);
    assert_string_equal(c.redis.host, "127.0.0.1");
    assert_int_equal(c.redis.port, 6379);
    assert_null(c.redis.unix_path);
    assert_int_equal(c.redis.db, 0);
    assert_string_equal(c.redis.password, "secret");
    assert_string_equal(c.redis.prefix, "dns_");
    assert_string_equal(c.redis.suffix, "_dns");
    assert_int_equal(c.redis.connect_timeout_ms, 2000);
    assert_int_equal(c.redis.read_timeout_ms, 5000);
    assert_int_equal(c.redis.zone_reload_s, 600);
    assert_null(c.redis.changes_channel);
    assert_int_equal(c.redis.default_ttl, 300);
    assert_int_equal(c.redis.max_ttl, 0);
    assert_int_equal(c.redis.nsentinels, 0);
    assert_int_equal(c.redis.read_from, CONFIG_REDIS_READ_PRIMARY);
    config_free(&c);
}

/* The commented-out "# health:" block of conf/ternd.yaml, uncommented, is a valid config that
 * sets what its comments say. */
static void test_example_health_block(void **state)
{
    (void)state;
    char block[8192] = "";
    assert_true(example_block("health", block, sizeof(block)) > 30);
    config_t c = load_text(block);
    config_health_t *h = &c.health;
    assert_true(h->enabled);
    assert_int_equal(h->check_interval_ms, 10000);
    assert_int_equal(h->max_requests, 100);
    assert_int_equal(h->update_interval_s, 600);
    assert_string_equal(h->ca_file, "/etc/ssl/certs/ca-certificates.crt");
    assert_true(h->redis.enabled);
    assert_string_equal(h->redis.host, "127.0.0.1");
    assert_int_equal(h->redis.port, 6379);
    assert_string_equal(h->redis.prefix, "healthcheck_");
    assert_string_equal(h->redis.suffix, "_healthcheck");
    assert_true(h->log_enabled);
    assert_int_equal(h->log_target, CONFIG_HEALTH_LOG_FILE);
    assert_string_equal(h->log_path, "/var/log/tern/health.log");
    assert_true(h->log_json);
    assert_int_equal(h->nchecks, 3);
    const config_health_check_t *k = &h->checks[0];
    const health_spec_t *sp = &k->spec;
    const uint8_t v4[4] = {192, 0, 2, 1};
    assert_int_equal(sp->family, 4);
    assert_memory_equal(sp->addr, v4, 4);
    assert_string_equal(k->owner, "www.example.test");
    assert_int_equal(sp->proto, HEALTH_HTTPS);
    assert_int_equal(sp->port, 8443);
    assert_string_equal(sp->uri, "/health");
    assert_int_equal(sp->method, HEALTH_GET);
    assert_string_equal(sp->host, "www.example.test");
    assert_int_equal(sp->nexpect, 2);
    assert_int_equal(sp->expect[0], 200);
    assert_int_equal(sp->expect[1], 204);
    assert_true(sp->tls_verify);
    assert_int_equal(sp->timeout_ms, 2000);
    assert_int_equal(sp->up_count, 2);
    assert_int_equal(sp->down_count, -5);
    /* its line in the block */
    const char *at = strstr(block, "- address: 192.0.2.1");
    assert_non_null(at);
    unsigned line = 1;
    for (const char *p = block; p < at; p++)
        line += *p == '\n';
    assert_int_equal(k->line, line);
    k = &h->checks[1];
    assert_int_equal(k->spec.family, 6);
    assert_int_equal(k->spec.proto, HEALTH_TCP);
    assert_int_equal(k->spec.port, 5432);
    assert_null(k->owner);
    assert_null(k->spec.uri);
    assert_null(k->spec.host);
    assert_true(k->line > h->checks[0].line);
    k = &h->checks[2];
    assert_int_equal(k->spec.proto, HEALTH_ICMP);
    assert_int_equal(k->spec.port, 0);
    assert_int_equal(k->spec.timeout_ms, 1000);
    assert_int_equal(k->spec.up_count, 3);
    assert_int_equal(k->spec.down_count, -3);
    config_free(&c);
}

/* The commented-out "# aname:" block of conf/ternd.yaml, uncommented, is a valid config that
 * sets what its comments say. */
static void test_example_aname_block(void **state)
{
    (void)state;
    char block[4096] = "";
    assert_true(example_block("aname", block, sizeof(block)) > 8);
    config_t c = load_text(block);
    assert_int_equal(c.aname.nupstreams, 2);
    const config_upstream_t *u = &c.aname.upstreams[0];
    assert_string_equal(u->host, "127.0.0.1");
    assert_int_equal(u->port, 53);
    assert_false(u->tcp);
    assert_int_equal(u->timeout_ms, 400);
    u = &c.aname.upstreams[1];
    assert_string_equal(u->host, "::1");
    assert_int_equal(u->port, 53);
    assert_true(u->tcp);
    assert_int_equal(u->timeout_ms, 1000);
    config_free(&c);
}

/* Whether block (len bytes, lines of "#...") has a line "#", indent - 1 spaces and "key:": a key
 * as deep as --help indents it. A list item's keys count at the depth of its "- ". */
static bool block_has_key(const char *block, size_t len, size_t indent, const char *key)
{
    const char *end = block + len;
    size_t item = SIZE_MAX; /* spaces before the "- " of the list item we are in */
    for (const char *line = block; line < end;) {
        const char *nl = memchr(line, '\n', (size_t)(end - line));
        const char *p = line + 1;
        size_t spaces = strspn(p, " ");
        p += spaces;
        if (p[0] == '-' && p[1] == ' ') {
            item = spaces;
            p += 2;
        } else if (item != SIZE_MAX && spaces == item + 2 && *p != '#') {
            spaces = item;
        } else if (*p != '#') {
            item = SIZE_MAX;
        }
        if (spaces + 1 == indent && strncmp(p, key, strlen(key)) == 0 && p[strlen(key)] == ':')
            return true;
        line = nl ? nl + 1 : end;
    }
    return false;
}

/* Every key of the schema appears in conf/ternd.yaml, uncommented; the keys of redis and health
 * (and of health's log and checks) in their commented example blocks. */
static void test_example_has_every_option(void **state)
{
    (void)state;
    static char help[65536], yaml[65536];
    memset(help, 0, sizeof(help));
    FILE *f = fmemopen(help, sizeof(help) - 1, "w");
    assert_non_null(f);
    config_schema_print(f);
    fclose(f);
    read_example(yaml, sizeof(yaml));
    /* the native options: schema lines before the redins section */
    char *end = strstr(help, "\nredins");
    assert_non_null(end);
    *end = '\0';
    size_t count = 0, nested = 0;
    const char *block = NULL;
    size_t block_len = 0;
    for (char *line = strtok(help, "\n"); line; line = strtok(NULL, "\n")) {
        char key[64], want[80];
        size_t indent = strspn(line, " ");
        assert_int_equal(sscanf(line, " %63s", key), 1);
        if (indent == 2) {
            snprintf(want, sizeof(want), "\n%s:", key);
            if (!strstr(yaml, want))
                fail_msg("conf/ternd.yaml lacks option '%s'", key);
            count++;
            /* its commented block, if it has keys: "# key:" and the "#" lines after it */
            snprintf(want, sizeof(want), "\n# %s:\n", key);
            block = strstr(yaml, want);
            block_len = 0;
            if (block) {
                block++;
                const char *p = block;
                while (*p == '#') {
                    const char *nl = strchr(p, '\n');
                    assert_non_null(nl);
                    p = nl + 1;
                }
                block_len = (size_t)(p - block);
            }
            continue;
        }
        /* a key of the mapping above (indent 4), or of a mapping in it (indent 6) */
        if (!block || !block_has_key(block, block_len, indent, key))
            fail_msg("conf/ternd.yaml lacks key '%s' (indent %zu) in its example block", key,
                     indent);
        nested++;
    }
    assert_int_equal(count, 65);
    /* xdp 1; a zone 16, its dnssec 3, its catalog_consumer 2, a group 1; catalogs 5;
     * dnssec_policies 16; api 5, a key 4; tls 9; redis 17; load 1; health 8, its log 4, a check 12;
     * acl 3, ratelimit 8, rrl 9, cookies 4; aname 4, an upstream 4; query_log 5, its dnstap 6, its
     * requests 4; latency_map 2; steering 2 */
    assert_int_equal(nested, 1 + 16 + 3 + 2 + 1 + 5 + 16 + 5 + 4 + 9 + 17 + 1 + 8 + 4 + 12 + 3 + 8 +
                                 9 + 4 + 4 + 4 + 5 + 6 + 4 + 2 + 2);
}

/* steering: the sticky order's server-wide prefix lengths (issue 33). */
static void test_steering(void **state)
{
    (void)state;
    static const struct {
        const char *text;
        unsigned v4, v6;
    } ok[] = {
        {"listen: \"127.0.0.1:5353\"\n", 24, 56}, /* RFC 7871's lengths by default */
        {"listen: \"127.0.0.1:5353\"\nsteering:\n  sticky_prefix_v4: 20\n", 20, 56},
        {"listen: \"127.0.0.1:5353\"\nsteering: {sticky_prefix_v6: 48}\n", 24, 48},
    };
    for (size_t i = 0; i < TERN_ARRAY_SIZE(ok); i++) {
        config_t c = load_text(ok[i].text);
        assert_int_equal(c.steering.sticky_prefix_v4, ok[i].v4);
        assert_int_equal(c.steering.sticky_prefix_v6, ok[i].v6);
        config_free(&c);
    }
    expect_error("steering:\n  sticky_prefix_v4: 0\n", 2,
                 "steering: sticky_prefix_v4: 0 is out of range 1..32");
    expect_error("steering:\n  sticky_prefix_v6: 129\n", 2,
                 "steering: sticky_prefix_v6: 129 is out of range 1..128");
    expect_error("steering:\n  sticky_prefix: 24\n", 2,
                 "steering: unknown key \"sticky_prefix\" (want sticky_prefix_v4, "
                 "sticky_prefix_v6)");
}

/* xdp: listen: interface names, restart-only; the port is the listen addresses' UDP port. */
static void test_xdp_listen(void **state)
{
    (void)state;
    config_t c = load_text("listen: [\"127.0.0.1:5353\"]\nxdp:\n  listen: [veth0, eth1]\n");
    assert_int_equal(c.nxdp, 2);
    assert_string_equal(c.xdp_listen[0], "veth0");
    assert_string_equal(c.xdp_listen[1], "eth1");
    server_settings_t set = config_server_settings(&c);
    assert_int_equal(set.nxdp, 2);
    assert_string_equal(set.xdp_ifaces[1], "eth1");
    assert_int_equal(set.xdp_port, 5353);
    config_t d = load_text("listen: \"127.0.0.1:0\"\nxdp: {listen: eth0}\n");
    assert_int_equal(d.nxdp, 1);
    assert_int_equal(config_server_settings(&d).xdp_port, 53); /* ephemeral: 53 */
    assert_false(config_same_listen(&c, &d));
    config_free(&d);
    d = load_text("listen: [\"127.0.0.1:5353\"]\nxdp: ~\n");
    assert_int_equal(d.nxdp, 0);
    assert_false(config_same_listen(&c, &d));
    config_free(&d);
    config_free(&c);

    expect_error("xdp:\n  listen: [eth0, eth0]\n", 2,
                 "xdp: listen[1]: interface eth0 is given twice");
    expect_error("xdp:\n  listen: abcdefghijklmnop\n", 2,
                 "xdp: listen: bad interface name \"abcdefghijklmnop\" (1..15 characters, no "
                 "'/', ':' or blank)");
    expect_error("xdp:\n  listen: [{a: 1}]\n", 2,
                 "xdp: listen[0]: expected an interface name, got a mapping");
    expect_error("xdp:\n  ports: 53\n", 2, "xdp: unknown key \"ports\" (want listen)");
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
    /* the handler block: its redis, with uperdis' connection timeouts and pool (ignored) */
    assert_true(c.redis.enabled);
    assert_string_equal(c.redis.host, "127.0.0.1");
    assert_int_equal(c.redis.port, 6379);
    assert_null(c.redis.unix_path);
    assert_int_equal(c.redis.db, 0);
    assert_null(c.redis.password); /* "": no AUTH */
    assert_string_equal(c.redis.prefix, "redins_");
    assert_null(c.redis.suffix);
    assert_int_equal(c.redis.connect_timeout_ms, 500);
    assert_int_equal(c.redis.read_timeout_ms, 500);
    assert_int_equal(c.redis.zone_reload_s, 600);
    assert_null(c.redis.changes_channel);
    /* max_ttl caps every TTL and is the TTL of RRsets without one, as in redins */
    assert_int_equal(c.redis.max_ttl, 3600);
    assert_int_equal(c.redis.default_ttl, 3600);
    /* geoip with enable false: no database, neither the city nor the ASN one */
    assert_null(c.geoip_db);
    assert_null(c.asn_db);
    assert_null(c.asn_table);
    /* handler.healthcheck: its own Redis (the same keys as handler's), check_interval in s */
    const config_health_t *h = &c.health;
    assert_true(h->enabled);
    assert_int_equal(h->max_requests, 10);
    assert_int_equal(h->max_pending, 100);
    assert_int_equal(h->update_interval_s, 600);
    assert_int_equal(h->check_interval_ms, 600000);
    assert_null(h->ca_file);
    assert_true(h->redis.enabled);
    assert_string_equal(h->redis.host, "127.0.0.1");
    assert_int_equal(h->redis.port, 6379);
    assert_int_equal(h->redis.db, 0);
    assert_null(h->redis.password);
    assert_string_equal(h->redis.prefix, "healthcheck_");
    assert_string_equal(h->redis.suffix, "_healthcheck");
    assert_int_equal(h->redis.connect_timeout_ms, 500);
    assert_int_equal(h->redis.read_timeout_ms, 500);
    assert_true(h->log_enabled);
    assert_int_equal(h->log_target, CONFIG_HEALTH_LOG_FILE);
    assert_true(h->log_json);
    assert_string_equal(h->log_path, "/var/log/redins/healthcheck.log");
    assert_int_equal(h->nchecks, 0); /* redins' checks are the zones' health_check objects */
    /* redins' ratelimit block, off as in the example: checked, and its values kept */
    assert_false(c.ratelimit.enabled);
    assert_int_equal(c.ratelimit.rate, 60);
    assert_int_equal(c.ratelimit.burst, 10);
    assert_int_equal(c.ratelimit.whitelist.n, 2);
    assert_int_equal(c.ratelimit.whitelist.p[0].family, 4);
    assert_int_equal(c.ratelimit.whitelist.p[1].family, 6);
    assert_int_equal(c.ratelimit.blacklist.n, 0);
    assert_null(c.ratelimit.blacklist.p);
    /* handler.upstream: the ANAME upstreams, in order */
    assert_int_equal(c.aname.nupstreams, 2);
    assert_string_equal(c.aname.upstreams[0].host, "127.0.0.1");
    assert_int_equal(c.aname.upstreams[0].port, 53);
    assert_false(c.aname.upstreams[0].tcp);
    assert_int_equal(c.aname.upstreams[0].timeout_ms, 400);
    assert_string_equal(c.aname.upstreams[1].host, "::1");
    assert_true(c.aname.upstreams[1].tcp);
    assert_int_equal(c.aname.upstreams[1].timeout_ms, 1000);
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
    /* this file's handler block was refused before the Redis source; now it maps */
    config_t c = load_ok(data_path("conf/redins_unsupported.json"));
    assert_true(c.redis.enabled);
    assert_string_equal(c.redis.host, "127.0.0.1");
    assert_int_equal(c.redis.port, 6379);
    assert_int_equal(c.redis.max_ttl, 300);
    assert_int_equal(c.redis.default_ttl, 300);
    assert_int_equal(c.log_target, LOG_TARGET_STDOUT);
    config_free(&c);

    /* tern's redis block has tern's keys, not redins' */
    expect_error("{\n  \"redis\": {\"ip\": \"127.0.0.1\"}\n}\n", 2,
                 "redis: ip: is a key of redins' handler: redis, not of tern's redis (give "
                 "address: \"HOST:PORT\", or move the block under handler)");
    expect_error("redis:\n  address: 127.0.0.1:6379\n  connection: {read_timeout: 1}\n", 3,
                 "redis: connection: is a key of redins' handler: redis, not of tern's redis "
                 "(give address: \"HOST:PORT\", or move the block under handler)");
    /* (log, at the top level or in handler, maps now: test_config_qlog.c; upstream too:
     * test_config_aname.c) */

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

/* tern's "redis:" block: every key, the address forms, null and empty values. */
static void test_redis_yaml(void **state)
{
    (void)state;
    config_t c = load_text("redis:\n"
                           "  address: \"10.0.0.7:6380\"\n"
                           "  db: 1023\n"
                           "  password: s3cret\n"
                           "  prefix: \"pre_\"\n"
                           "  suffix: _suf\n"
                           "  connect_timeout: 600000\n"
                           "  read_timeout: 1\n"
                           "  zone_reload: 604800\n"
                           "  changes_channel: zones-changed\n"
                           "  default_ttl: 2147483647\n"
                           "  max_ttl: 86400\n");
    assert_true(c.redis.enabled);
    assert_string_equal(c.redis.host, "10.0.0.7");
    assert_int_equal(c.redis.port, 6380);
    assert_null(c.redis.unix_path);
    assert_int_equal(c.redis.db, 1023);
    assert_string_equal(c.redis.password, "s3cret");
    assert_string_equal(c.redis.prefix, "pre_");
    assert_string_equal(c.redis.suffix, "_suf");
    assert_int_equal(c.redis.connect_timeout_ms, 600000);
    assert_int_equal(c.redis.read_timeout_ms, 1);
    assert_int_equal(c.redis.zone_reload_s, 604800);
    assert_string_equal(c.redis.changes_channel, "zones-changed");
    assert_int_equal(c.redis.default_ttl, 2147483647u);
    assert_int_equal(c.redis.max_ttl, 86400);

    /* a later file's redis replaces all of it; a UNIX socket clears host and port */
    char err[512];
    const char *path = write_tmp("redis: {address: /run/redis/redis.sock, zone_reload: 0}\n");
    assert_int_equal(config_load(&c, path, err, sizeof(err)), 0);
    unlink(path);
    assert_true(c.redis.enabled);
    assert_null(c.redis.host);
    assert_int_equal(c.redis.port, 0);
    assert_string_equal(c.redis.unix_path, "/run/redis/redis.sock");
    assert_int_equal(c.redis.db, 0);
    assert_null(c.redis.password);
    assert_null(c.redis.prefix);
    assert_null(c.redis.changes_channel);
    assert_int_equal(c.redis.zone_reload_s, 0);
    assert_int_equal(c.redis.max_ttl, 0);
    /* and null turns Redis off again */
    path = write_tmp("redis: ~\n");
    assert_int_equal(config_load(&c, path, err, sizeof(err)), 0);
    unlink(path);
    assert_false(c.redis.enabled);
    assert_null(c.redis.unix_path);
    assert_int_equal(c.redis.zone_reload_s, 600);
    config_free(&c);

    /* {} and an empty JSON object: Redis with every default */
    c = load_text("redis: {}\n");
    assert_true(c.redis.enabled);
    assert_null(c.redis.host);
    assert_int_equal(c.redis.port, 0);
    assert_int_equal(c.redis.zone_reload_s, 600);
    config_free(&c);
    c = load_text("{\"redis\": {}}");
    assert_true(c.redis.enabled);
    config_free(&c);
    /* plain null and nothing at all: no Redis */
    c = load_text("redis: null\n");
    assert_false(c.redis.enabled);
    config_free(&c);
    c = load_text("redis:\nworkers: 1\n");
    assert_false(c.redis.enabled);
    config_free(&c);

    /* IPv6, a DNS name, and null for the default address */
    c = load_text("{\"redis\": {\"address\": \"[2001:db8::1]:7000\", \"db\": 0}}");
    assert_string_equal(c.redis.host, "2001:db8::1");
    assert_int_equal(c.redis.port, 7000);
    config_free(&c);
    c = load_text("redis:\n  address: redis-1.internal.example:6379\n");
    assert_string_equal(c.redis.host, "redis-1.internal.example");
    assert_int_equal(c.redis.port, 6379);
    config_free(&c);
    c = load_text("redis:\n  address: ~\n  db: 2\n");
    assert_true(c.redis.enabled);
    assert_null(c.redis.host);
    assert_null(c.redis.unix_path);
    assert_int_equal(c.redis.port, 0);
    assert_int_equal(c.redis.db, 2);
    config_free(&c);

    /* "" : no AUTH, no prefix; but "" for changes_channel is "no channel", unlike null */
    c = load_text("redis:\n  password: \"\"\n  prefix: ''\n  suffix: ~\n  changes_channel: \"\"\n");
    assert_null(c.redis.password);
    assert_null(c.redis.prefix);
    assert_null(c.redis.suffix);
    assert_non_null(c.redis.changes_channel);
    assert_string_equal(c.redis.changes_channel, "");
    config_free(&c);
    c = load_text("redis:\n  changes_channel: ~\n");
    assert_null(c.redis.changes_channel);
    config_free(&c);
}

static void test_redis_errors(void **state)
{
    (void)state;
    static const char want_keys[] =
        "(want address, db, password, prefix, suffix, connect_timeout, "
        "read_timeout, zone_reload, changes_channel, default_ttl, "
        "max_ttl, max_value_bytes, max_labels, max_rrset_records, max_zones, sentinel, "
        "read_from)";
    char msg[512];
    /* wrong types */
    snprintf(msg, sizeof(msg), "redis: expected a mapping {%.*s}, got a plain scalar",
             (int)strlen(want_keys) - 7, want_keys + 6);
    expect_error("redis: 127.0.0.1:6379\n", 1, msg);
    snprintf(msg, sizeof(msg), "redis: expected a mapping {%.*s}, got a list",
             (int)strlen(want_keys) - 7, want_keys + 6);
    expect_error("workers: 1\nredis: [127.0.0.1:6379]\n", 2, msg);
    expect_error("redis:\n  db: \"1\"\n", 2, "redis: db: expected an integer, got \"1\"");
    expect_error("redis:\n  read_timeout: 5s\n", 2,
                 "redis: read_timeout: expected an integer, got \"5s\"");
    expect_error("redis:\n  zone_reload: [600]\n", 2,
                 "redis: zone_reload: expected an integer, got a list");
    expect_error("redis:\n  password: [x]\n", 2, "redis: password: expected a string, got a list");
    expect_error("redis:\n  prefix: {a: b}\n", 2,
                 "redis: prefix: expected a string, got a mapping");
    expect_error("redis:\n  changes_channel: \"a\\0b\"\n", 2,
                 "redis: changes_channel: contains a NUL byte");
    expect_error(
        "redis:\n  address: [127.0.0.1:6379]\n", 2,
        "redis: address: expected HOST:PORT, [V6]:PORT or /path/of/redis.sock, got a list");
    expect_error("{\"redis\": {\"address\": 6379}}", 1,
                 "redis: address: bad address \"6379\" (want HOST:PORT, [V6]:PORT or "
                 "/path/of/redis.sock)");
    /* out of range */
    expect_error("redis:\n  db: 1024\n", 2, "redis: db: 1024 is out of range 0..1023");
    expect_error("redis: {db: -1}\n", 1, "redis: db: -1 is out of range 0..1023");
    expect_error("redis:\n  connect_timeout: 600001\n", 2,
                 "redis: connect_timeout: 600001 is out of range 0..600000");
    expect_error("redis:\n  read_timeout: -5\n", 2,
                 "redis: read_timeout: -5 is out of range 0..600000");
    expect_error("redis:\n  zone_reload: 604801\n", 2,
                 "redis: zone_reload: 604801 is out of range 0..604800");
    expect_error("redis:\n  default_ttl: 2147483648\n", 2,
                 "redis: default_ttl: 2147483648 is out of range 0..2147483647");
    expect_error("redis:\n  max_ttl: -1\n", 2, "redis: max_ttl: -1 is out of range 0..2147483647");
    /* unknown and duplicate keys */
    snprintf(msg, sizeof(msg), "redis: unknown key \"host\" %s", want_keys);
    expect_error("redis:\n  address: 127.0.0.1:6379\n  host: 127.0.0.1\n", 3, msg);
    snprintf(msg, sizeof(msg), "redis: unknown key \"timeout\" %s", want_keys);
    expect_error("redis:\n  timeout: 1\n", 2, msg);
    expect_error("redis:\n  db: 1\n  db: 2\n", 3, "redis: duplicate key \"db\" (first at line 2)");
    expect_error("redis:\n  db: 1\n  [ip]: 2\n", 3, "redis: keys must be strings, got a list");
    expect_error("redis: {}\nredis: {}\n", 2, "redis: duplicate key (first at line 1)");
    /* addresses */
    static const char *const bad[] = {
        "localhost",       "127.0.0.1",        "127.0.0.1:0", "127.0.0.1:65536",
        "127.0.0.1:6379x", "10.1:6379",        "::1:6379",    "[::1]",
        "[::1]6379",       "[127.0.0.1]:6379", "[x]:6379",    "redis.sock",
        ":6379",           "-redis:6379",      "a b:6379",    "host:",
        "1.2.3.4.5:6379",  "[::1]:6379:1",     "\"\""};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char text[128];
        snprintf(text, sizeof(text), "redis:\n  address: %s%s%s\n", bad[i][0] == '"' ? "" : "\"",
                 bad[i], bad[i][0] == '"' ? "" : "\"");
        snprintf(msg, sizeof(msg),
                 "redis: address: bad address \"%s\" (want HOST:PORT, [V6]:PORT or "
                 "/path/of/redis.sock)",
                 bad[i][0] == '"' ? "" : bad[i]);
        expect_error(text, 2, msg);
    }
    /* a UNIX socket path has 107 bytes */
    char name[200], text[300];
    memset(name, 's', 107);
    name[0] = '/';
    name[107] = '\0';
    snprintf(text, sizeof(text), "redis:\n  address: %s\n", name);
    config_t c = load_text(text);
    assert_int_equal(strlen(c.redis.unix_path), 107);
    config_free(&c);
    memset(name, 's', 108);
    name[0] = '/';
    name[108] = '\0';
    snprintf(text, sizeof(text), "redis:\n  address: %s\n", name);
    snprintf(msg, sizeof(msg),
             "redis: address: \"%s\" is 108 bytes long, more than the 107 allowed", name);
    expect_error(text, 2, msg);
    /* strings are at most 1024 bytes */
    static char big[1200], bigtext[1300];
    memset(big, 'p', 1024);
    big[1024] = '\0';
    snprintf(bigtext, sizeof(bigtext), "redis:\n  password: %s\n", big);
    c = load_text(bigtext);
    assert_int_equal(strlen(c.redis.password), 1024);
    config_free(&c);
    big[1024] = 'p';
    big[1025] = '\0';
    snprintf(bigtext, sizeof(bigtext), "redis:\n  password: %s\n", big);
    config_init(&c);
    char err[2048];
    const char *path = write_tmp(bigtext);
    assert_int_equal(config_load(&c, path, err, sizeof(err)), TERN_ESYNTAX);
    unlink(path);
    assert_non_null(strstr(err, ":2: redis: password: \"pppp"));
    assert_non_null(strstr(err, "\" is 1025 bytes long, more than the 1024 allowed"));
    config_free(&c);

    /* tern's redis and redins' handler set the same things: one of them */
    expect_error("redis: {}\nhandler: {}\n", 2,
                 "handler: conflicts with redis at line 1 (give one of them)");
    expect_error("handler:\n  redis: {ip: 127.0.0.1}\nredis:\n  db: 1\n", 3,
                 "redis: conflicts with handler at line 1 (give one of them)");
    expect_error("{\n  \"redis\": {\"address\": \"127.0.0.1:6379\"},\n"
                 "  \"handler\": {\"redis\": {\"ip\": \"127.0.0.1\", \"port\": 6379}}\n}\n",
                 3, "handler: conflicts with redis at line 2 (give one of them)");
}

/* redins' handler, in the union of its versions: old (ip/port, default_ttl), new (max_ttl,
 * address/net/db, uperdis' connection). */
static void test_redins_handler(void **state)
{
    (void)state;
    /* redins' own config.json handler block */
    config_t c = load_text("{\n"
                           "  \"handler\": {\n"
                           "    \"max_ttl\": 300,\n"
                           "    \"cache_timeout\": 10,\n"
                           "    \"zone_reload\": 60,\n"
                           "    \"log_source_location\": true,\n"
                           "    \"upstream_fallback\": false,\n"
                           "    \"redis\": {\n"
                           "      \"ip\": \"127.0.0.2\",\n"
                           "      \"port\": 6380,\n"
                           "      \"password\": \"pw\",\n"
                           "      \"prefix\": \"test_\",\n"
                           "      \"suffix\": \"_test\",\n"
                           "      \"connect_timeout\": 0,\n"
                           "      \"read_timeout\": 250\n"
                           "    }\n"
                           "  }\n"
                           "}\n");
    assert_true(c.redis.enabled);
    assert_string_equal(c.redis.host, "127.0.0.2");
    assert_int_equal(c.redis.port, 6380);
    assert_null(c.redis.unix_path);
    assert_int_equal(c.redis.db, 0);
    assert_string_equal(c.redis.password, "pw");
    assert_string_equal(c.redis.prefix, "test_");
    assert_string_equal(c.redis.suffix, "_test");
    assert_int_equal(c.redis.connect_timeout_ms, 0); /* redins' "none": the source's default */
    assert_int_equal(c.redis.read_timeout_ms, 250);
    assert_int_equal(c.redis.zone_reload_s, 60);
    assert_null(c.redis.changes_channel);
    assert_int_equal(c.redis.max_ttl, 300);
    assert_int_equal(c.redis.default_ttl, 300);
    assert_null(c.geoip_db);
    config_free(&c);

    /* older redins: default_ttl only, no cap */
    c = load_text("handler:\n  default_ttl: 120\n  redis: {ip: \"::1\"}\n");
    assert_string_equal(c.redis.host, "::1");
    assert_int_equal(c.redis.port, 0);
    assert_int_equal(c.redis.default_ttl, 120);
    assert_int_equal(c.redis.max_ttl, 0);
    assert_int_equal(c.redis.zone_reload_s, 600);
    config_free(&c);
    /* both: default_ttl for RRsets without one, max_ttl the cap */
    c = load_text("handler: {default_ttl: 60, max_ttl: 3600}\n");
    assert_int_equal(c.redis.default_ttl, 60);
    assert_int_equal(c.redis.max_ttl, 3600);
    config_free(&c);
    c = load_text("handler: {max_ttl: 0}\n");
    assert_int_equal(c.redis.default_ttl, 0);
    assert_int_equal(c.redis.max_ttl, 0);
    config_free(&c);

    /* a handler without redis: redins' defaults, which are the source's */
    c = load_text("handler: {}\n");
    assert_true(c.redis.enabled);
    assert_null(c.redis.host);
    assert_int_equal(c.redis.port, 0);
    assert_int_equal(c.redis.zone_reload_s, 600);
    config_free(&c);
    /* a port alone, a name */
    c = load_text("handler:\n  redis: {port: 6390}\n");
    assert_null(c.redis.host);
    assert_int_equal(c.redis.port, 6390);
    config_free(&c);
    c = load_text("handler:\n  redis: {ip: redis.internal}\n");
    assert_string_equal(c.redis.host, "redis.internal");
    config_free(&c);

    /* uperdis: address, net, db, and the connection pool (its timeouts map, the rest is ignored) */
    c = load_text(
        "{\"handler\": {\"redis\": {\n"
        "  \"address\": \"[::1]:6379\", \"net\": \"tcp\", \"db\": 7,\n"
        "  \"password\": \"\", \"prefix\": \"\", \"suffix\": \"\",\n"
        "  \"connection\": {\"max_idle_connections\": 10, \"max_active_connections\": 0,\n"
        "    \"connect_timeout\": 1500, \"read_timeout\": 3000,\n"
        "    \"idle_keep_alive\": 30, \"max_keep_alive\": 0,\n"
        "    \"wait_for_connection\": true}}}}\n");
    assert_string_equal(c.redis.host, "::1");
    assert_int_equal(c.redis.port, 6379);
    assert_int_equal(c.redis.db, 7);
    assert_null(c.redis.password);
    assert_null(c.redis.prefix);
    assert_null(c.redis.suffix);
    assert_int_equal(c.redis.connect_timeout_ms, 1500);
    assert_int_equal(c.redis.read_timeout_ms, 3000);
    config_free(&c);
    c = load_text("handler:\n  redis:\n    address: redis.internal:6379\n    connection: {}\n");
    assert_string_equal(c.redis.host, "redis.internal");
    assert_int_equal(c.redis.port, 6379);
    config_free(&c);
    /* UNIX sockets: net unix, relative to the config file; a path alone says unix too */
    c = load_text("handler:\n  redis: {net: unix, address: run/redis.sock, db: 1}\n");
    assert_null(c.redis.host);
    assert_int_equal(c.redis.port, 0);
    assert_string_equal(c.redis.unix_path, "/tmp/run/redis.sock");
    assert_int_equal(c.redis.db, 1);
    config_free(&c);
    c = load_text("handler:\n  redis: {address: /var/run/redis/redis.sock}\n");
    assert_string_equal(c.redis.unix_path, "/var/run/redis/redis.sock");
    assert_null(c.redis.host);
    config_free(&c);

    /* geoip: enable with db (or country_db) sets geoip_db, relative to the config file */
    c = load_text("handler:\n  geoip: {enable: true, db: geoCity.mmdb}\n");
    assert_string_equal(c.geoip_db, "/tmp/geoCity.mmdb");
    assert_null(c.geoip_db_v6);
    config_free(&c);
    c = load_text("{\"handler\": {\"geoip\": {\"enable\": true, \"country_db\": "
                  "\"/usr/share/GeoIP/GeoLite2-City.mmdb\", \"asn_db\": \"\"}}}\n");
    assert_string_equal(c.geoip_db, "/usr/share/GeoIP/GeoLite2-City.mmdb");
    config_free(&c);
    /* asn_db: the MaxMind ASN database, beside the city one or alone */
    expect_dbs("{\"handler\": {\"geoip\": {\"enable\": true, \"country_db\": \"city.mmdb\", "
               "\"asn_db\": \"GeoLite2-ASN.mmdb\"}}}\n",
               "/tmp/city.mmdb", "/tmp/GeoLite2-ASN.mmdb");
    expect_dbs("handler:\n  geoip: {enable: true, asn_db: /usr/share/GeoIP/asn.mmdb}\n", NULL,
               "/usr/share/GeoIP/asn.mmdb");
    expect_dbs("geoip:\n  enable: true\n  asn_db: asn.mmdb\n  db: city.mmdb\n", "/tmp/city.mmdb",
               "/tmp/asn.mmdb");
    /* enable false, or left out as redins defaults it: nothing, whatever the files say */
    expect_dbs("handler:\n  geoip: {enable: false, db: a.mmdb, asn_db: asn.mmdb}\n", NULL, NULL);
    c = load_text("handler:\n  geoip: {country_db: a.mmdb}\n");
    assert_null(c.geoip_db);
    config_free(&c);
    /* geoip_db_v6 still adds a separate IPv6 database */
    c = load_text("handler:\n  geoip: {enable: true, db: /g/v4.mmdb}\ngeoip_db_v6: /g/v6.mmdb\n");
    assert_string_equal(c.geoip_db, "/g/v4.mmdb");
    assert_string_equal(c.geoip_db_v6, "/g/v6.mmdb");
    config_free(&c);
    /* older redins: geoip at the top level */
    c = load_text("{\"geoip\": {\"enable\": true, \"db\": \"geoCity.mmdb\"}}\n");
    assert_string_equal(c.geoip_db, "/tmp/geoCity.mmdb");
    assert_false(c.redis.enabled);
    config_free(&c);
    c = load_text("geoip: {enable: false}\n");
    assert_null(c.geoip_db);
    config_free(&c);
}

static void test_redins_handler_errors(void **state)
{
    (void)state;
    expect_error("handler: []\n", 1,
                 "handler: expected a mapping {redis, zone_reload, max_ttl, default_ttl, "
                 "cache_timeout, log_source_location, upstream_fallback, geoip, healthcheck, "
                 "log, upstream}, got a list");
    expect_error("handler:\n  zone_reload: 60\n  dnssec: true\n", 3,
                 "handler: unknown key \"dnssec\" (want redis, zone_reload, max_ttl, default_ttl, "
                 "cache_timeout, log_source_location, upstream_fallback, geoip, healthcheck, "
                 "log, upstream)");
    expect_error("handler:\n  zone_reload: 60\n  zone_reload: 61\n", 3,
                 "handler: duplicate key \"zone_reload\" (first at line 2)");
    /* types and ranges */
    expect_error("handler:\n  zone_reload: 0\n", 2,
                 "handler: zone_reload: 0 is out of range 1..604800");
    expect_error("handler:\n  zone_reload: \"600\"\n", 2,
                 "handler: zone_reload: expected an integer, got \"600\"");
    expect_error("handler:\n  max_ttl: -1\n", 2,
                 "handler: max_ttl: -1 is out of range 0..2147483647");
    expect_error("handler:\n  default_ttl: 1.5\n", 2,
                 "handler: default_ttl: expected an integer, got \"1.5\"");
    expect_error("handler:\n  cache_timeout: \"60\"\n", 2,
                 "handler: cache_timeout: expected an integer, got \"60\"");
    expect_error("handler:\n  cache_timeout: -1\n", 2,
                 "handler: cache_timeout: -1 is out of range 0..2147483647");
    expect_error("handler:\n  log_source_location: 1\n", 2,
                 "handler: log_source_location: expected true or false, got a plain scalar");
    expect_error("handler:\n  upstream_fallback: \"false\"\n", 2,
                 "handler: upstream_fallback: expected true or false, got a string");
    expect_error("{\"handler\": {\n  \"upstream_fallback\": true}}\n", 2,
                 "handler: upstream_fallback: true is not supported: forwarding every query tern "
                 "is not authoritative for would make it an open resolver (a reflection and "
                 "amplification tool, and a cache-poisoning target); tern asks upstreams only for "
                 "ANAME targets");
    /* handler.redis */
    expect_error("handler:\n  redis: 127.0.0.1:6379\n", 2,
                 "handler: redis: expected a mapping {ip, port, address, net, db, password, "
                 "prefix, suffix, connect_timeout, read_timeout, connection}, got a plain scalar");
    expect_error("handler:\n  redis:\n    host: 127.0.0.1\n", 3,
                 "handler: redis: unknown key \"host\" (want ip, port, address, net, db, "
                 "password, prefix, suffix, connect_timeout, read_timeout, connection)");
    expect_error("handler:\n  redis:\n    port: 0\n", 3,
                 "handler: redis: port: 0 is out of range 1..65535");
    expect_error("handler:\n  redis:\n    port: 65536\n", 3,
                 "handler: redis: port: 65536 is out of range 1..65535");
    expect_error("handler:\n  redis:\n    port: \"6379\"\n", 3,
                 "handler: redis: port: expected an integer, got \"6379\"");
    expect_error("handler:\n  redis:\n    ip: 1.2.3\n", 3,
                 "handler: redis: ip: bad address \"1.2.3\"");
    expect_error("handler:\n  redis:\n    ip: \"[::1]\"\n", 3,
                 "handler: redis: ip: bad address \"[::1]\"");
    expect_error("handler:\n  redis:\n    ip: [127.0.0.1]\n", 3,
                 "handler: redis: ip: expected an address, got a list");
    expect_error("handler:\n  redis:\n    ip: \"\"\n", 3,
                 "handler: redis: ip: expected an address, got a string");
    expect_error("handler:\n  redis:\n    db: 1024\n", 3,
                 "handler: redis: db: 1024 is out of range 0..1023");
    expect_error("handler:\n  redis:\n    password: 1234\n    prefix: [a]\n", 4,
                 "handler: redis: prefix: expected a string, got a list");
    expect_error("handler:\n  redis:\n    connect_timeout: 600001\n", 3,
                 "handler: redis: connect_timeout: 600001 is out of range 0..600000");
    expect_error("handler:\n  redis:\n    read_timeout: \"1s\"\n", 3,
                 "handler: redis: read_timeout: expected an integer, got \"1s\"");
    expect_error("handler:\n  redis:\n    net: udp\n", 3,
                 "handler: redis: net: expected tcp or unix, got \"udp\"");
    expect_error("handler:\n  redis:\n    net: unix\n", 3,
                 "handler: redis: net: unix needs address, the socket's path");
    expect_error(
        "handler:\n  redis:\n    net: unix\n    address: /run/redis.sock\n    ip: 1.2.3.4\n", 5,
        "handler: redis: ip: not used with a UNIX socket (net: unix)");
    expect_error("handler:\n  redis:\n    address: /run/redis.sock\n    port: 6379\n", 4,
                 "handler: redis: port: not used with a UNIX socket (net: unix)");
    expect_error("handler:\n  redis:\n    ip: 127.0.0.1\n    address: 127.0.0.1:6379\n", 4,
                 "handler: redis: address: give address or ip and port, not both");
    expect_error("handler:\n  redis:\n    net: tcp\n    address: /run/redis.sock\n", 4,
                 "handler: redis: address: bad address \"/run/redis.sock\" (want HOST:PORT or "
                 "[V6]:PORT, or net: unix and the socket's path)");
    expect_error("handler:\n  redis:\n    address: 127.0.0.1\n", 3,
                 "handler: redis: address: bad address \"127.0.0.1\" (want HOST:PORT or "
                 "[V6]:PORT, or net: unix and the socket's path)");
    expect_error("handler:\n  redis:\n    address: \"\"\n", 3,
                 "handler: redis: address: expected a non-empty string, got a string");
    char name[200], text[300], msg[512];
    memset(name, 's', 100);
    memcpy(name, "sock/", 5);
    name[100] = '\0';
    snprintf(text, sizeof(text), "handler:\n  redis: {net: unix, address: %s}\n", name);
    snprintf(msg, sizeof(msg),
             "handler: redis: address: \"/tmp/%s\" is 105 bytes long, more than the 107 allowed",
             name);
    config_t c = load_text(text);
    assert_int_equal(strlen(c.redis.unix_path), 105);
    config_free(&c);
    memset(name, 's', 104);
    memcpy(name, "sock/", 5);
    name[104] = '\0';
    snprintf(text, sizeof(text), "handler:\n  redis: {net: unix, address: %s}\n", name);
    snprintf(msg, sizeof(msg),
             "handler: redis: address: \"/tmp/%s\" is 109 bytes long, more than the 107 allowed",
             name);
    expect_error(text, 2, msg);
    /* handler.redis.connection */
    expect_error("handler:\n  redis:\n    connection: 10\n", 3,
                 "handler: redis: connection: expected a mapping {max_idle_connections, "
                 "max_active_connections, connect_timeout, read_timeout, idle_keep_alive, "
                 "max_keep_alive, wait_for_connection}, got a plain scalar");
    expect_error("handler:\n  redis:\n    connection:\n      pool_size: 10\n", 4,
                 "handler: redis: connection: unknown key \"pool_size\" (want "
                 "max_idle_connections, max_active_connections, connect_timeout, read_timeout, "
                 "idle_keep_alive, max_keep_alive, wait_for_connection)");
    expect_error("handler:\n  redis:\n    connect_timeout: 100\n    connection:\n"
                 "      connect_timeout: 200\n",
                 5,
                 "handler: redis: connection: connect_timeout: given twice (also handler: redis: "
                 "connect_timeout at line 3)");
    expect_error("handler:\n  redis:\n    connection: {read_timeout: 1}\n    read_timeout: 2\n", 3,
                 "handler: redis: connection: read_timeout: given twice (also handler: redis: "
                 "read_timeout at line 4)");
    expect_error("handler:\n  redis:\n    connection: {read_timeout: 600001}\n", 3,
                 "handler: redis: connection: read_timeout: 600001 is out of range 0..600000");
    expect_error("handler:\n  redis:\n    connection:\n      max_idle_connections: -1\n", 4,
                 "handler: redis: connection: max_idle_connections: -1 is out of range "
                 "0..2147483647");
    expect_error("handler:\n  redis:\n    connection:\n      idle_keep_alive: 30s\n", 4,
                 "handler: redis: connection: idle_keep_alive: expected an integer, got \"30s\"");
    expect_error("handler:\n  redis:\n    connection:\n      wait_for_connection: yes\n", 4,
                 "handler: redis: connection: wait_for_connection: expected true or false, got a "
                 "plain scalar");
    /* geoip */
    expect_error("handler:\n  geoip: true\n", 2,
                 "handler: geoip: expected a mapping {enable, db, country_db, asn_db}, got a "
                 "plain scalar");
    expect_error("handler:\n  geoip: {enable: true, path: a.mmdb}\n", 2,
                 "handler: geoip: unknown key \"path\" (want enable, db, country_db, asn_db)");
    expect_error("handler:\n  geoip:\n    enable: \"true\"\n", 3,
                 "handler: geoip: enable: expected true or false, got a string");
    expect_error("handler:\n  geoip:\n    enable: true\n", 3,
                 "handler: geoip: enable: true needs db, country_db or asn_db (a MaxMind DB)");
    expect_error("handler:\n  geoip:\n    enable: true\n    db: \"\"\n    asn_db: \"\"\n", 3,
                 "handler: geoip: enable: true needs db, country_db or asn_db (a MaxMind DB)");
    expect_error("handler:\n  geoip:\n    enable: true\n    db: [a]\n", 4,
                 "handler: geoip: db: expected a string, got a list");
    expect_error("handler:\n  geoip:\n    db: a.mmdb\n    country_db: b.mmdb\n", 4,
                 "handler: geoip: country_db: give db or country_db, not both");
    expect_error("handler:\n  geoip:\n    enable: true\n    asn_db: [a]\n", 4,
                 "handler: geoip: asn_db: expected a string, got a list");
    expect_error("geoip: {enable: 1}\n", 1,
                 "geoip: enable: expected true or false, got a plain scalar");
    /* one place for the geo database */
    expect_error("geoip_db: a.mmdb\nhandler:\n  geoip: {enable: true, db: b.mmdb}\n", 3,
                 "handler: geoip: conflicts with geoip_db at line 1 (give one of them)");
    expect_error("handler:\n  zone_reload: 60\n  geoip: {enable: true, db: b}\ngeoip_db: a.mmdb\n",
                 4, "geoip_db: conflicts with handler: geoip at line 3 (give one of them)");
    expect_error("geoip: {enable: true, db: a.mmdb}\nhandler:\n  geoip: {enable: true, db: b}\n", 3,
                 "handler: geoip: conflicts with geoip at line 1 (give one of them)");
    expect_error("handler:\n  geoip: {enable: true, db: b}\ngeoip: {enable: true, db: c}\n", 3,
                 "geoip: conflicts with handler: geoip at line 2 (give one of them)");
    expect_error("geoip_db: a.mmdb\ngeoip: {enable: true, db: b.mmdb}\n", 2,
                 "geoip: conflicts with geoip_db at line 1 (give one of them)");
    expect_error("geoip: {enable: true, db: b.mmdb}\n\ngeoip_db: ~\n", 3,
                 "geoip_db: conflicts with geoip at line 1 (give one of them)");
    /* one place for the ASN database: asn_db, or the asn_db of one enabled redins geoip */
    expect_error("asn_db: a.mmdb\nhandler:\n  geoip:\n    enable: true\n    asn_db: b.mmdb\n", 5,
                 "handler: geoip: asn_db: conflicts with asn_db at line 1 (give one of them)");
    expect_error("{\"handler\": {\"geoip\": {\"enable\": true,\n"
                 "  \"country_db\": \"GeoLite2-City.mmdb\",\n"
                 "  \"asn_db\": \"GeoLite2-ASN.mmdb\"}},\n"
                 " \"asn_db\": \"asn.mmdb\"}\n",
                 4, "asn_db: conflicts with handler: geoip: asn_db at line 3 (give one of them)");
    expect_error("geoip: {enable: true, asn_db: a.mmdb}\nasn_db: ~\n", 2,
                 "asn_db: conflicts with geoip: asn_db at line 1 (give one of them)");
    expect_error("geoip: {enable: true, asn_db: a.mmdb}\nhandler:\n  geoip: {enable: true, "
                 "asn_db: b.mmdb}\n",
                 3,
                 "handler: geoip: asn_db: conflicts with geoip: asn_db at line 1 (give one of "
                 "them)");
    /* geoip_db is claimed before asn_db: a block that sets both names the first conflict */
    expect_error("geoip_db: /a.mmdb\nasn_db: /b.mmdb\nhandler:\n  geoip:\n    enable: true\n"
                 "    db: c.mmdb\n    asn_db: d.mmdb\n",
                 4, "handler: geoip: conflicts with geoip_db at line 1 (give one of them)");
    /* a redins geoip that sets only one of them competes only for that one */
    expect_dbs("asn_db: /asn.mmdb\nhandler:\n  geoip: {enable: true, db: /city.mmdb}\n",
               "/city.mmdb", "/asn.mmdb");
    expect_dbs("geoip_db: /city.mmdb\nhandler:\n  geoip: {enable: true, asn_db: /asn.mmdb}\n",
               "/city.mmdb", "/asn.mmdb");
    expect_dbs("asn_db: /asn.mmdb\nhandler:\n  geoip: {enable: false, asn_db: b.mmdb}\n", NULL,
               "/asn.mmdb");
    /* a disabled redins geoip sets nothing, so it is no rival */
    c = load_text("handler:\n  geoip: {enable: false, db: b.mmdb}\ngeoip_db: /a.mmdb\n");
    assert_string_equal(c.geoip_db, "/a.mmdb");
    config_free(&c);
    c = load_text("geoip_db: /a.mmdb\ngeoip: {enable: false}\nhandler:\n  geoip: {db: b.mmdb}\n");
    assert_string_equal(c.geoip_db, "/a.mmdb");
    config_free(&c);
    c = load_text("geoip: {enable: true, db: /top.mmdb}\nhandler:\n  geoip: {enable: false}\n");
    assert_string_equal(c.geoip_db, "/top.mmdb");
    config_free(&c);
    /* but geoip_db_v6 beside any of them is fine, and so is handler beside geoip_db */
    c = load_text("geoip_db: /a.mmdb\nhandler: {zone_reload: 5}\n");
    assert_string_equal(c.geoip_db, "/a.mmdb");
    assert_int_equal(c.redis.zone_reload_s, 5);
    config_free(&c);
}

/* redis_settings_same: every field, strings by content; NULL and "" differ. */
static void test_same_redis(void **state)
{
    (void)state;
    static const char text[] = "redis:\n  address: 10.1.2.3:6379\n  db: 2\n  password: pw\n"
                               "  prefix: p\n  suffix: s\n  connect_timeout: 100\n"
                               "  read_timeout: 200\n  zone_reload: 30\n  changes_channel: ch\n"
                               "  default_ttl: 60\n  max_ttl: 600\n";
    config_t a = load_text(text), b = load_text(text);
    assert_true(redis_settings_same(&a.redis, &b.redis));
    assert_ptr_not_equal(a.redis.host, b.redis.host);
    config_redis_t *r = &b.redis;
    /* each number */
#define DIFFERS(field, value)                                                                      \
    do {                                                                                           \
        __typeof__(r->field) saved = r->field;                                                     \
        r->field = (value);                                                                        \
        assert_false(redis_settings_same(&a.redis, r));                                            \
        assert_false(redis_settings_same(r, &a.redis));                                            \
        r->field = saved;                                                                          \
        assert_true(redis_settings_same(&a.redis, r));                                             \
    } while (0)
    DIFFERS(enabled, false);
    DIFFERS(port, 6380);
    DIFFERS(db, 3);
    DIFFERS(connect_timeout_ms, 101);
    DIFFERS(read_timeout_ms, 0);
    DIFFERS(zone_reload_s, 600);
    DIFFERS(default_ttl, 0);
    DIFFERS(max_ttl, 0);
    /* each string: another value, NULL, and "" */
    char **strs[] = {&r->host,   &r->unix_path, &r->password,
                     &r->prefix, &r->suffix,    &r->changes_channel};
    for (size_t i = 0; i < sizeof(strs) / sizeof(strs[0]); i++) {
        char *saved = *strs[i];
        char other[] = "other", empty[] = "";
        *strs[i] = other;
        assert_false(redis_settings_same(&a.redis, r));
        *strs[i] = empty;
        assert_false(redis_settings_same(&a.redis, r));
        *strs[i] = NULL;
        assert_int_equal(redis_settings_same(&a.redis, r), saved == NULL);
        *strs[i] = saved;
        assert_true(redis_settings_same(&a.redis, r));
    }
#undef DIFFERS
    config_free(&b);
    /* written differently, the same settings */
    b = load_text(
        "{\"handler\": {\"zone_reload\": 30, \"max_ttl\": 600, \"default_ttl\": 60,\n"
        "  \"redis\": {\"ip\": \"10.1.2.3\", \"port\": 6379, \"db\": 2, \"password\": \"pw\",\n"
        "    \"prefix\": \"p\", \"suffix\": \"s\", \"connect_timeout\": 100,\n"
        "    \"connection\": {\"read_timeout\": 200}}}}\n");
    assert_false(redis_settings_same(&a.redis, &b.redis)); /* no changes_channel in redins */
    free(b.redis.changes_channel);
    b.redis.changes_channel = strdup("ch");
    assert_true(redis_settings_same(&a.redis, &b.redis));
    config_free(&b);
    /* a UNIX socket is not a host */
    config_free(&a);
    a = load_text("redis: {address: /run/a.sock}\n");
    b = load_text("redis: {address: /run/b.sock}\n");
    assert_false(redis_settings_same(&a.redis, &b.redis));
    config_free(&b);
    b = load_text("redis: {address: /run/a.sock}\n");
    assert_true(redis_settings_same(&a.redis, &b.redis));
    config_free(&b);
    config_free(&a);
    /* two configs without Redis */
    config_init(&a);
    config_init(&b);
    assert_true(redis_settings_same(&a.redis, &b.redis));
    config_free(&a);
    config_free(&b);
}

/* ---- health ------------------------------------------------------------------------------- */

static void expect_v4(const health_spec_t *sp, uint8_t a, uint8_t b, uint8_t c, uint8_t d)
{
    const uint8_t want[4] = {a, b, c, d};
    assert_int_equal(sp->family, 4);
    assert_memory_equal(sp->addr, want, 4);
}

/* tern's "health:" block: every key, the protocols, defaults and normalised names. */
static void test_health_yaml(void **state)
{
    (void)state;
    config_t c = load_text("health:\n"                           /* 1 */
                           "  enable: true\n"                    /* 2 */
                           "  check_interval_ms: 100\n"          /* 3 */
                           "  max_requests: 100000\n"            /* 4 */
                           "  update_interval: 604800\n"         /* 5 */
                           "  ca_file: certs/ca.pem\n"           /* 6 */
                           "  redis:\n"                          /* 7 */
                           "    address: \"[::1]:6380\"\n"       /* 8 */
                           "    db: 2\n"                         /* 9 */
                           "    password: pw\n"                  /* 10 */
                           "    prefix: hc_\n"                   /* 11 */
                           "    suffix: _hc\n"                   /* 12 */
                           "    connect_timeout: 100\n"          /* 13 */
                           "    read_timeout: 200\n"             /* 14 */
                           "  log:\n"                            /* 15 */
                           "    target: stderr\n"                /* 16 */
                           "    format: text\n"                  /* 17 */
                           "  checks:\n"                         /* 18 */
                           "    - address: 192.0.2.1\n"          /* 19 */
                           "      owner: WWW.Example.Test.\n"    /* 20 */
                           "      protocol: http\n"              /* 21 */
                           "      uri: /health?x=1\n"            /* 22 */
                           "      method: GET\n"                 /* 23 */
                           "      host: Backend.Example.Test.\n" /* 24 */
                           "      expect: 204\n"                 /* 25 */
                           "      timeout: 60000\n"              /* 26 */
                           "      up_count: 1000\n"              /* 27 */
                           "      down_count: -1000\n"           /* 28 */
                           "    - {address: \"2001:db8::1\", protocol: https, port: 8443,\n"
                           "       expect: [200, 204, 301], tls_verify: false, down_count: 1}\n"
                           "    - {address: 192.0.2.1, protocol: tcp, port: 22}\n" /* 31 */
                           "    - {address: 192.0.2.1, protocol: ping}\n"          /* 32 */
                           "    - {address: 192.0.2.1, owner: \"*.example.test\"}\n"
                           "    - {address: 192.0.2.1, protocol: icmp, owner: a.test}\n"
                           "    - {address: 192.0.2.1}\n"
                           "    - {address: \"2001:db8::1\", protocol: https}\n");
    const config_health_t *h = &c.health;
    assert_true(h->enabled);
    assert_int_equal(h->check_interval_ms, 100);
    assert_int_equal(h->max_requests, 100000);
    assert_int_equal(h->update_interval_s, 604800);
    assert_int_equal(h->max_pending, 0);
    assert_string_equal(h->ca_file, "/tmp/certs/ca.pem"); /* relative to the config's directory */
    assert_true(h->redis.enabled);
    assert_string_equal(h->redis.host, "::1");
    assert_int_equal(h->redis.port, 6380);
    assert_int_equal(h->redis.db, 2);
    assert_string_equal(h->redis.password, "pw");
    assert_string_equal(h->redis.prefix, "hc_");
    assert_string_equal(h->redis.suffix, "_hc");
    assert_int_equal(h->redis.connect_timeout_ms, 100);
    assert_int_equal(h->redis.read_timeout_ms, 200);
    assert_false(c.redis.enabled); /* the zone source is another matter */
    assert_true(h->log_enabled);
    assert_int_equal(h->log_target, CONFIG_HEALTH_LOG_STDERR);
    assert_false(h->log_json);
    assert_null(h->log_path);
    assert_int_equal(h->nchecks, 8);
    /* 0: every http key; names lowercased, without their final dot */
    const config_health_check_t *k = &h->checks[0];
    expect_v4(&k->spec, 192, 0, 2, 1);
    assert_int_equal(k->line, 19);
    assert_string_equal(k->owner, "www.example.test");
    assert_int_equal(k->spec.proto, HEALTH_HTTP);
    assert_int_equal(k->spec.port, 80);
    assert_string_equal(k->spec.uri, "/health?x=1");
    assert_int_equal(k->spec.method, HEALTH_GET);
    assert_string_equal(k->spec.host, "backend.example.test");
    assert_int_equal(k->spec.nexpect, 1);
    assert_int_equal(k->spec.expect[0], 204);
    assert_int_equal(k->spec.timeout_ms, 60000);
    assert_int_equal(k->spec.up_count, 1000);
    assert_int_equal(k->spec.down_count, -1000);
    /* 1: IPv6, https, a positive down_count stored negative */
    k = &h->checks[1];
    const uint8_t v6[16] = {0x20, 0x01, 0x0d, 0xb8, [15] = 1};
    assert_int_equal(k->spec.family, 6);
    assert_memory_equal(k->spec.addr, v6, 16);
    assert_int_equal(k->line, 29);
    assert_int_equal(k->spec.proto, HEALTH_HTTPS);
    assert_int_equal(k->spec.port, 8443);
    assert_int_equal(k->spec.nexpect, 3);
    assert_int_equal(k->spec.expect[2], 301);
    assert_false(k->spec.tls_verify);
    assert_int_equal(k->spec.down_count, -1);
    assert_null(k->owner);
    assert_null(k->spec.uri);
    assert_null(k->spec.host);
    /* 2: tcp; 3: ping is icmp, without a port; the same address as 0 on other protocols */
    k = &h->checks[2];
    assert_int_equal(k->spec.proto, HEALTH_TCP);
    assert_int_equal(k->spec.port, 22);
    assert_int_equal(k->line, 31);
    k = &h->checks[3];
    assert_int_equal(k->spec.proto, HEALTH_ICMP);
    assert_int_equal(k->spec.port, 0);
    assert_int_equal(k->line, 32);
    /* 4, 5, 6: the same address and protocol as others, for other owners (or any) */
    assert_string_equal(h->checks[4].owner, "*.example.test");
    assert_string_equal(h->checks[5].owner, "a.test");
    k = &h->checks[6];
    assert_null(k->owner);
    /* every default */
    expect_v4(&k->spec, 192, 0, 2, 1);
    assert_int_equal(k->spec.proto, HEALTH_HTTP);
    assert_int_equal(k->spec.port, 80);
    assert_int_equal(k->spec.method, HEALTH_HEAD);
    assert_int_equal(k->spec.nexpect, 0);
    assert_true(k->spec.tls_verify);
    assert_int_equal(k->spec.timeout_ms, 1000);
    assert_int_equal(k->spec.up_count, 3);
    assert_int_equal(k->spec.down_count, -3);
    /* https defaults to 443 */
    assert_int_equal(h->checks[7].spec.port, 443);

    /* a later file's health replaces all of it; null turns it off */
    char err[512];
    const char *path = write_tmp("health:\n  log: {path: health.log}\n");
    assert_int_equal(config_load(&c, path, err, sizeof(err)), 0);
    unlink(path);
    assert_true(h->enabled);
    assert_int_equal(h->nchecks, 0);
    assert_null(h->checks);
    assert_null(h->ca_file);
    assert_false(h->redis.enabled);
    assert_int_equal(h->check_interval_ms, 10000);
    assert_true(h->log_enabled);
    assert_int_equal(h->log_target, CONFIG_HEALTH_LOG_FILE);
    assert_true(h->log_json);
    assert_string_equal(h->log_path, "/tmp/health.log");
    path = write_tmp("health: ~\n");
    assert_int_equal(config_load(&c, path, err, sizeof(err)), 0);
    unlink(path);
    assert_false(h->enabled);
    assert_false(h->log_enabled);
    assert_null(h->log_path);
    config_free(&c);

    /* {}: checks from the zones only, with every default */
    c = load_text("health: {}\n");
    assert_true(c.health.enabled);
    assert_int_equal(c.health.nchecks, 0);
    assert_false(c.health.log_enabled);
    assert_false(c.health.redis.enabled);
    config_free(&c);
    c = load_text("{\"health\": {\"checks\": [{\"address\": \"192.0.2.9\", \"protocol\": \"tcp\",\n"
                  "  \"port\": 443}], \"redis\": {}, \"log\": null, \"ca_file\": null}}\n");
    assert_true(c.health.enabled);
    assert_int_equal(c.health.nchecks, 1);
    assert_int_equal(c.health.checks[0].line, 1);
    assert_true(c.health.redis.enabled);
    assert_null(c.health.redis.host);
    assert_false(c.health.log_enabled);
    config_free(&c);
    /* enable false: nothing checked, but the block is read (and checked) all the same */
    c = load_text("health:\n  enable: false\n  checks:\n    - address: 192.0.2.1\n");
    assert_false(c.health.enabled);
    assert_int_equal(c.health.nchecks, 1);
    config_free(&c);
    /* an empty list, null checks, a log that is off needs no path, and the other streams */
    c = load_text("health:\n  checks: []\n  log: {enable: false}\n");
    assert_int_equal(c.health.nchecks, 0);
    assert_false(c.health.log_enabled);
    config_free(&c);
    c = load_text("health:\n  checks:\n  log: {target: stdout, path: ~}\n");
    assert_int_equal(c.health.nchecks, 0);
    assert_true(c.health.log_enabled);
    assert_int_equal(c.health.log_target, CONFIG_HEALTH_LOG_STDOUT);
    config_free(&c);
    /* a redis by UNIX socket, and the zone source's Redis beside it */
    c = load_text("redis: {address: 10.0.0.1:6379}\nhealth:\n  redis: {address: /run/r.sock}\n");
    assert_string_equal(c.redis.host, "10.0.0.1");
    assert_string_equal(c.health.redis.unix_path, "/run/r.sock");
    assert_null(c.health.redis.host);
    config_free(&c);
}

/* Every mistake in a health block, with its line. */
static void test_health_errors(void **state)
{
    (void)state;
    static const char want_keys[] = "enable, check_interval_ms, max_requests, update_interval, "
                                    "ca_file, redis, log, checks";
    static const char check_keys[] = "address, owner, protocol, port, uri, method, host, expect, "
                                     "tls_verify, timeout, up_count, down_count";
    char msg[512];
    /* the block */
    snprintf(msg, sizeof(msg), "health: expected a mapping {%s}, got a plain scalar", want_keys);
    expect_error("health: true\n", 1, msg);
    snprintf(msg, sizeof(msg), "health: unknown key \"interval\" (want %s)", want_keys);
    expect_error("health:\n  interval: 5\n", 2, msg);
    expect_error("health:\n  enable: true\n  enable: false\n", 3,
                 "health: duplicate key \"enable\" (first at line 2)");
    expect_error("health: {}\nhealth: {}\n", 2, "health: duplicate key (first at line 1)");
    expect_error("health:\n  enable: yes\n", 2,
                 "health: enable: expected true or false, got a plain scalar");
    expect_error("health:\n  check_interval_ms: 99\n", 2,
                 "health: check_interval_ms: 99 is out of range 100..86400000");
    expect_error("health:\n  check_interval_ms: 86400001\n", 2,
                 "health: check_interval_ms: 86400001 is out of range 100..86400000");
    expect_error("health:\n  check_interval_ms: 10s\n", 2,
                 "health: check_interval_ms: expected an integer, got \"10s\"");
    expect_error("health:\n  max_requests: 0\n", 2,
                 "health: max_requests: 0 is out of range 1..100000");
    expect_error("health:\n  max_requests: 100001\n", 2,
                 "health: max_requests: 100001 is out of range 1..100000");
    expect_error("health:\n  update_interval: 0\n", 2,
                 "health: update_interval: 0 is out of range 1..604800");
    expect_error("health:\n  update_interval: 604801\n", 2,
                 "health: update_interval: 604801 is out of range 1..604800");
    expect_error("health:\n  ca_file: [a]\n", 2, "health: ca_file: expected a string, got a list");
    expect_error("health:\n  ca_file: \"\"\n", 2, "health: ca_file: must not be empty");
    /* its redis: the connection's keys only */
    expect_error("health:\n  redis:\n    address: 127.0.0.1:6379\n    zone_reload: 60\n", 4,
                 "health: redis: zone_reload: not a key of health: redis (it sets the Redis zone "
                 "source: give it in the top-level redis)");
    expect_error("health:\n  redis: {max_zones: 1}\n", 2,
                 "health: redis: max_zones: not a key of health: redis (it sets the Redis zone "
                 "source: give it in the top-level redis)");
    expect_error("health:\n  redis:\n    changes_channel: x\n", 3,
                 "health: redis: changes_channel: not a key of health: redis (it sets the Redis "
                 "zone source: give it in the top-level redis)");
    expect_error("health:\n  redis:\n    ip: 127.0.0.1\n", 3,
                 "health: redis: unknown key \"ip\" (want address, db, password, prefix, suffix, "
                 "connect_timeout, read_timeout)");
    expect_error("health:\n  redis: 5\n", 2,
                 "health: redis: expected a mapping {address, db, password, prefix, suffix, "
                 "connect_timeout, read_timeout}, got a plain scalar");
    expect_error("health:\n  redis:\n    address: localhost\n", 3,
                 "health: redis: address: bad address \"localhost\" (want HOST:PORT, [V6]:PORT or "
                 "/path/of/redis.sock)");
    expect_error("health:\n  redis:\n    db: 1024\n", 3,
                 "health: redis: db: 1024 is out of range 0..1023");
    expect_error("health:\n  redis:\n    read_timeout: 600001\n", 3,
                 "health: redis: read_timeout: 600001 is out of range 0..600000");
    /* its log */
    expect_error("health:\n  log: stderr\n", 2,
                 "health: log: expected a mapping {enable, target, path, format}, got a plain "
                 "scalar");
    expect_error("health:\n  log:\n    level: info\n", 3,
                 "health: log: unknown key \"level\" (want enable, target, path, format)");
    expect_error("health:\n  log:\n    target: syslog\n", 3,
                 "health: log: target: expected file, stdout or stderr, got \"syslog\"");
    expect_error("health:\n  log:\n    format: xml\n", 3,
                 "health: log: format: expected json or text, got \"xml\"");
    expect_error("health:\n  log:\n    enable: 1\n", 3,
                 "health: log: enable: expected true or false, got a plain scalar");
    expect_error("health:\n  log:\n    format: text\n", 3,
                 "health: log: missing \"path\" (target file writes to it)");
    expect_error("health:\n  log:\n    target: stdout\n    path: x.log\n", 4,
                 "health: log: path: only with target file (not stdout)");
    expect_error("health:\n  log:\n    path: [x]\n", 3,
                 "health: log: path: expected a string, got a list");
    /* checks: the list */
    expect_error("health:\n  checks: {address: 192.0.2.1}\n", 2,
                 "health: checks: expected a list of {address, protocol, ...}, got a mapping");
    snprintf(msg, sizeof(msg), "health: checks[0]: expected a mapping {%s}, got a plain scalar",
             check_keys);
    expect_error("health:\n  checks:\n    - 192.0.2.1\n", 3, msg);
    snprintf(msg, sizeof(msg), "health: checks[0]: unknown key \"interval\" (want %s)", check_keys);
    expect_error("health:\n  checks:\n    - address: 192.0.2.1\n      interval: 5\n", 4, msg);
    expect_error("health:\n  checks:\n    - address: 192.0.2.1\n      port: 80\n      port: 81\n",
                 5, "health: checks[0]: duplicate key \"port\" (first at line 4)");
    expect_error("health:\n  checks:\n    - protocol: tcp\n      port: 22\n", 3,
                 "health: checks[0]: missing \"address\" (required: the IPv4 or IPv6 address "
                 "checked, in A/AAAA records)");
    /* address */
    expect_error("health:\n  checks:\n    - address: 192.0.2.1:80\n", 3,
                 "health: checks[0]: address: bad address \"192.0.2.1:80\" (want an IPv4 or IPv6 "
                 "address, no port)");
    expect_error("health:\n  checks:\n    - address: www.example.test\n", 3,
                 "health: checks[0]: address: bad address \"www.example.test\" (want an IPv4 or "
                 "IPv6 address, no port)");
    expect_error("health:\n  checks:\n    - address: \"[2001:db8::1]\"\n", 3,
                 "health: checks[0]: address: bad address \"[2001:db8::1]\" (want an IPv4 or IPv6 "
                 "address, no port)");
    expect_error("health:\n  checks:\n    - address: [192.0.2.1]\n", 3,
                 "health: checks[0]: address: expected an IPv4 or IPv6 address, got a list");
    /* protocol and port (the line of the value, and the index of the entry) */
    expect_error("health:\n  checks:\n    - address: 192.0.2.1\n      protocol: ftp\n", 4,
                 "health: checks[0]: protocol: expected http, https, tcp, icmp or ping, got "
                 "\"ftp\"");
    expect_error("health:\n"
                 "  checks:\n"
                 "    - address: 192.0.2.1\n"
                 "    - address: 192.0.2.2\n"
                 "      protocol: https\n"
                 "    - address: 192.0.2.3\n"
                 "      port: 0\n",
                 7, "health: checks[2]: port: 0 is out of range 1..65535");
    expect_error("health:\n  checks:\n    - {address: 192.0.2.1, port: 65536}\n", 3,
                 "health: checks[0]: port: 65536 is out of range 1..65535");
    expect_error("health:\n  checks:\n    - address: 192.0.2.1\n      protocol: icmp\n"
                 "      port: 7\n",
                 5, "health: checks[0]: port: an icmp check has no port");
    expect_error("health:\n  checks:\n    - address: 192.0.2.1\n      protocol: tcp\n", 3,
                 "health: checks[0]: missing \"port\" (a tcp check needs one)");
    /* keys that mean nothing to the protocol */
    expect_error("health:\n  checks:\n    - {address: 192.0.2.1, protocol: tcp, port: 22,\n"
                 "       uri: /}\n",
                 4, "health: checks[0]: uri: only for http and https checks (not tcp)");
    expect_error("health:\n  checks:\n    - {address: 192.0.2.1, protocol: ping, expect: 200}\n", 3,
                 "health: checks[0]: expect: only for http and https checks (not icmp)");
    expect_error("health:\n  checks:\n    - {address: 192.0.2.1, protocol: icmp, method: GET}\n", 3,
                 "health: checks[0]: method: only for http and https checks (not icmp)");
    expect_error("health:\n  checks:\n    - {address: 192.0.2.1, protocol: tcp, port: 1,\n"
                 "       host: a.test}\n",
                 4, "health: checks[0]: host: only for http and https checks (not tcp)");
    expect_error("health:\n  checks:\n    - address: 192.0.2.1\n      tls_verify: false\n", 4,
                 "health: checks[0]: tls_verify: only for https checks (not http)");
    /* http settings */
    expect_error("health:\n  checks:\n    - address: 192.0.2.1\n      method: get\n", 4,
                 "health: checks[0]: method: expected HEAD or GET, got \"get\"");
    expect_error("health:\n  checks:\n    - address: 192.0.2.1\n      uri: health\n", 3,
                 "health: checks[0]: uri must start with '/'");
    expect_error("health:\n  checks:\n    - address: 192.0.2.1\n      uri: \"/a b\"\n", 3,
                 "health: checks[0]: uri contains a space or control character");
    expect_error("health:\n  checks:\n    - address: 192.0.2.1\n      uri: \"\"\n", 4,
                 "health: checks[0]: uri: must not be empty");
    expect_error("health:\n  checks:\n    - address: 192.0.2.1\n      expect: 600\n", 4,
                 "health: checks[0]: expect: 600 is out of range 100..599");
    expect_error("health:\n  checks:\n    - address: 192.0.2.1\n      expect: \"200\"\n", 4,
                 "health: checks[0]: expect: expected an integer, got \"200\"");
    expect_error("health:\n  checks:\n    - address: 192.0.2.1\n      expect:\n        - 200\n"
                 "        - 99\n",
                 6, "health: checks[0]: expect[1]: 99 is out of range 100..599");
    expect_error("health:\n  checks:\n    - address: 192.0.2.1\n      expect: []\n", 4,
                 "health: checks[0]: expect: an empty list (give the status codes meaning up)");
    expect_error("health:\n  checks:\n    - address: 192.0.2.1\n"
                 "      expect: [200, 201, 202, 203, 204, 205, 206, 207, 208]\n",
                 4, "health: checks[0]: expect: 9 status codes, more than the 8 allowed");
    expect_error("health:\n  checks:\n    - {address: 192.0.2.1, protocol: https, tls_verify: 0}\n",
                 3, "health: checks[0]: tls_verify: expected true or false, got a plain scalar");
    /* numbers */
    expect_error("health:\n  checks:\n    - {address: 192.0.2.1, timeout: 0}\n", 3,
                 "health: checks[0]: timeout: 0 is out of range 1..60000");
    expect_error("health:\n  checks:\n    - {address: 192.0.2.1, timeout: 60001}\n", 3,
                 "health: checks[0]: timeout: 60001 is out of range 1..60000");
    expect_error("health:\n  checks:\n    - {address: 192.0.2.1, up_count: 0}\n", 3,
                 "health: checks[0]: up_count: 0 is out of range 1..1000");
    expect_error("health:\n  checks:\n    - {address: 192.0.2.1, up_count: 1001}\n", 3,
                 "health: checks[0]: up_count: 1001 is out of range 1..1000");
    expect_error("health:\n  checks:\n    - {address: 192.0.2.1, down_count: 0}\n", 3,
                 "health: checks[0]: down_count: 0 is out of range 1..1000 (or -1000..-1)");
    expect_error("health:\n  checks:\n    - {address: 192.0.2.1, down_count: 1001}\n", 3,
                 "health: checks[0]: down_count: 1001 is out of range 1..1000 (or -1000..-1)");
    expect_error("health:\n  checks:\n    - {address: 192.0.2.1, down_count: -1001}\n", 3,
                 "health: checks[0]: down_count: -1001 is out of range 1..1000 (or -1000..-1)");
    expect_error("health:\n  checks:\n    - {address: 192.0.2.1, down_count: 1.5}\n", 3,
                 "health: checks[0]: down_count: expected an integer, got \"1.5\"");
    /* names */
    static const char *const bad_owners[] = {"bad name", "a..b", ".a", ".", "a/b", "a:b", "é.test"};
    for (size_t i = 0; i < sizeof(bad_owners) / sizeof(bad_owners[0]); i++) {
        char text[256];
        snprintf(text, sizeof(text),
                 "health:\n  checks:\n    - address: 192.0.2.1\n"
                 "      owner: \"%s\"\n",
                 bad_owners[i]);
        snprintf(msg, sizeof(msg),
                 "health: checks[0]: owner: \"%s\" is not a domain name (letters, digits, '-', "
                 "'_', '*' and dots; at most 253 characters)",
                 bad_owners[i]);
        expect_error(text, 4, msg);
    }
    expect_error("health:\n  checks:\n    - {address: 192.0.2.1, owner: \"\"}\n", 3,
                 "health: checks[0]: owner: must not be empty");
    expect_error("health:\n  checks:\n    - {address: 192.0.2.1, host: \"*.a.test\"}\n", 3,
                 "health: checks[0]: host: \"*.a.test\" is not a domain name (letters, digits, "
                 "'-', '_' and dots; at most 253 characters)");
    /* a label of 64, a name of 254; 63 and 253 (with a final dot) are fine */
    char label[80], name[300], text[512];
    memset(label, 'a', 64);
    label[64] = '\0';
    snprintf(text, sizeof(text), "health:\n  checks:\n    - {address: 192.0.2.1, owner: %s.test}\n",
             label);
    snprintf(msg, sizeof(msg),
             "health: checks[0]: owner: \"%s.test\" is not a domain name (letters, digits, '-', "
             "'_', '*' and dots; at most 253 characters)",
             label);
    expect_error(text, 3, msg);
    memset(name, 0, sizeof(name));
    for (size_t i = 0; i < 4; i++)
        memset(name + i * 64, 'a', 63), name[i * 64 + 63] = '.';
    name[253] = '\0'; /* 4 labels: 63+1+63+1+63+1+61 = 253 */
    snprintf(text, sizeof(text), "health:\n  checks:\n    - {address: 192.0.2.1, owner: %s.}\n",
             name);
    config_t c = load_text(text);
    assert_int_equal(strlen(c.health.checks[0].owner), 253);
    config_free(&c);
    snprintf(text, sizeof(text), "health:\n  checks:\n    - {address: 192.0.2.1, owner: %sa}\n",
             name);
    snprintf(msg, sizeof(msg),
             "health: checks[0]: owner: \"%sa\" is not a domain name (letters, digits, '-', '_', "
             "'*' and dots; at most 253 characters)",
             name);
    expect_error(text, 3, msg);
    /* the same address, port, protocol and owner twice: the second names the first's line */
    expect_error("health:\n  checks:\n    - address: 192.0.2.1\n"
                 "    - {address: 192.0.2.1, port: 80}\n",
                 4, "health: checks[1]: 192.0.2.1:80 http is given twice (first at line 3)");
    expect_error("health:\n  checks:\n    - {address: 192.0.2.1, owner: www.example.test}\n"
                 "    - {address: 192.0.2.2, owner: www.example.test}\n"
                 "    - {address: 192.0.2.1, owner: WWW.Example.Test., uri: /other}\n",
                 5,
                 "health: checks[2]: 192.0.2.1:80 http for www.example.test is given twice (first "
                 "at line 3)");
    expect_error("health:\n  checks:\n    - {address: \"2001:db8::1\", protocol: https}\n"
                 "    - {address: \"2001:db8:0:0::1\", protocol: https, port: 443}\n",
                 4, "health: checks[1]: [2001:db8::1]:443 https is given twice (first at line 3)");
    expect_error("health:\n  checks:\n    - {address: 192.0.2.1, protocol: icmp}\n"
                 "    - {address: 192.0.2.1, protocol: ping, timeout: 5}\n",
                 4, "health: checks[1]: 192.0.2.1 icmp is given twice (first at line 3)");
}

/* A file of many checks: fine up to the bound, and the one past it is named. */
static void test_health_many_checks(void **state)
{
    (void)state;
    size_t len = 10001 * 40 + 64, off = 0;
    char *text = malloc(len);
    assert_non_null(text);
    off += (size_t)snprintf(text, len, "health:\n  checks:\n");
    for (unsigned i = 0; i < 10000; i++)
        off += (size_t)snprintf(text + off, len - off, "    - {address: 10.0.%u.%u}\n", i / 256,
                                i % 256);
    config_t c = load_text(text);
    assert_int_equal(c.health.nchecks, 10000);
    config_free(&c);
    snprintf(text + off, len - off, "    - {address: 10.1.0.0}\n");
    expect_error(text, 10003,
                 "health: checks: more than 10000 checks (give the rest in the zones' "
                 "health_check)");
    free(text);
}

/* redins' healthcheck, at the top level (older redins) and in handler (newer): every key, the
 * redins defaults, seconds into milliseconds, the redis block as handler's. */
static void test_redins_healthcheck(void **state)
{
    (void)state;
    config_t c = load_text("{\n"
                           "  \"healthcheck\": {\n"
                           "    \"enable\": true,\n"
                           "    \"max_requests\": 5,\n"
                           "    \"max_pending_requests\": 50,\n"
                           "    \"update_interval\": 601,\n"
                           "    \"check_interval\": 30,\n"
                           "    \"redis\": {\"ip\": \"10.0.0.5\", \"port\": 6380, \"password\": "
                           "\"\",\n"
                           "      \"prefix\": \"healthcheck_\", \"suffix\": \"_healthcheck\",\n"
                           "      \"connect_timeout\": 100, \"read_timeout\": 200},\n"
                           "    \"log\": {\"enable\": true, \"level\": \"info\", \"target\": "
                           "\"file\",\n"
                           "      \"format\": \"json\", \"path\": \"healthcheck.log\"}\n"
                           "  }\n"
                           "}\n");
    const config_health_t *h = &c.health;
    assert_true(h->enabled);
    assert_int_equal(h->max_requests, 5);
    assert_int_equal(h->max_pending, 50);
    assert_int_equal(h->update_interval_s, 601);
    assert_int_equal(h->check_interval_ms, 30000);
    assert_true(h->redis.enabled);
    assert_string_equal(h->redis.host, "10.0.0.5");
    assert_int_equal(h->redis.port, 6380);
    assert_null(h->redis.password);
    assert_string_equal(h->redis.prefix, "healthcheck_");
    assert_string_equal(h->redis.suffix, "_healthcheck");
    assert_int_equal(h->redis.connect_timeout_ms, 100);
    assert_int_equal(h->redis.read_timeout_ms, 200);
    assert_true(h->log_enabled);
    assert_int_equal(h->log_target, CONFIG_HEALTH_LOG_FILE);
    assert_true(h->log_json);
    assert_string_equal(h->log_path, "/tmp/healthcheck.log");
    assert_int_equal(h->nchecks, 0);
    assert_false(c.redis.enabled); /* no handler: no zones from Redis */
    config_free(&c);

    /* redins' defaults: off, 10 in flight, every 600 s, states in the default Redis */
    c = load_text("healthcheck: {}\n");
    assert_false(h->enabled);
    assert_int_equal(h->max_requests, 10);
    assert_int_equal(h->max_pending, 0);
    assert_int_equal(h->update_interval_s, 600);
    assert_int_equal(h->check_interval_ms, 600000);
    assert_true(h->redis.enabled);
    assert_null(h->redis.host);
    assert_int_equal(h->redis.port, 0);
    assert_false(h->log_enabled);
    assert_null(h->log_path);
    config_free(&c);
    /* a redins log's defaults: off, stdout, text; path only means something with target file */
    c = load_text("healthcheck:\n  enable: true\n  log: {enable: true}\n");
    assert_true(h->enabled);
    assert_true(h->log_enabled);
    assert_int_equal(h->log_target, CONFIG_HEALTH_LOG_STDOUT);
    assert_false(h->log_json);
    config_free(&c);
    c = load_text("healthcheck:\n  log: {enable: true, target: stderr, path: /tmp/x.log, "
                  "format: text, level: debug}\n");
    assert_int_equal(h->log_target, CONFIG_HEALTH_LOG_STDERR);
    assert_null(h->log_path);
    config_free(&c);
    c = load_text("healthcheck:\n  log: {enable: false, target: file}\n");
    assert_false(h->log_enabled);
    assert_null(h->log_path);
    config_free(&c);
    /* both bounds of check_interval */
    c = load_text("healthcheck: {check_interval: 1}\n");
    assert_int_equal(h->check_interval_ms, 1000);
    config_free(&c);
    c = load_text("healthcheck: {check_interval: 86400}\n");
    assert_int_equal(h->check_interval_ms, 86400000);
    config_free(&c);

    /* newer redins: in handler, with uperdis' redis (address, net, connection) */
    c = load_text("handler:\n"
                  "  redis: {address: \"10.0.0.1:6379\"}\n"
                  "  healthcheck:\n"
                  "    enable: true\n"
                  "    check_interval: 10\n"
                  "    redis:\n"
                  "      address: \"10.0.0.2:6379\"\n"
                  "      net: tcp\n"
                  "      db: 3\n"
                  "      connection: {connect_timeout: 300, read_timeout: 400,\n"
                  "                   max_idle_connections: 10, wait_for_connection: true}\n");
    assert_true(c.redis.enabled);
    assert_string_equal(c.redis.host, "10.0.0.1");
    assert_true(h->enabled);
    assert_int_equal(h->check_interval_ms, 10000);
    assert_string_equal(h->redis.host, "10.0.0.2");
    assert_int_equal(h->redis.port, 6379);
    assert_int_equal(h->redis.db, 3);
    assert_int_equal(h->redis.connect_timeout_ms, 300);
    assert_int_equal(h->redis.read_timeout_ms, 400);
    config_free(&c);
    c = load_text("handler:\n  healthcheck:\n    redis: {net: unix, address: run/redis.sock}\n");
    assert_string_equal(h->redis.unix_path, "/tmp/run/redis.sock");
    assert_null(h->redis.host);
    assert_false(h->enabled);
    config_free(&c);
}

static void test_redins_healthcheck_errors(void **state)
{
    (void)state;
    static const char keys[] = "enable, max_requests, max_pending_requests, update_interval, "
                               "check_interval, redis, log";
    char msg[512];
    snprintf(msg, sizeof(msg), "healthcheck: expected a mapping {%s}, got a list", keys);
    expect_error("healthcheck: []\n", 1, msg);
    snprintf(msg, sizeof(msg), "healthcheck: unknown key \"checks\" (want %s)", keys);
    expect_error("healthcheck:\n  checks: []\n", 2, msg);
    snprintf(msg, sizeof(msg), "handler: healthcheck: unknown key \"interval\" (want %s)", keys);
    expect_error("handler:\n  healthcheck:\n    interval: 5\n", 3, msg);
    expect_error("healthcheck:\n  enable: \"true\"\n", 2,
                 "healthcheck: enable: expected true or false, got a string");
    expect_error("healthcheck:\n  check_interval: 0\n", 2,
                 "healthcheck: check_interval: 0 is out of range 1..86400");
    expect_error("healthcheck:\n  check_interval: 86401\n", 2,
                 "healthcheck: check_interval: 86401 is out of range 1..86400");
    expect_error("healthcheck:\n  max_requests: 0\n", 2,
                 "healthcheck: max_requests: 0 is out of range 1..100000");
    expect_error("healthcheck:\n  max_pending_requests: -1\n", 2,
                 "healthcheck: max_pending_requests: -1 is out of range 0..2147483647");
    expect_error("healthcheck:\n  update_interval: 0\n", 2,
                 "healthcheck: update_interval: 0 is out of range 1..604800");
    /* its redis, as handler's */
    expect_error("handler:\n  healthcheck:\n    redis:\n      port: 0\n", 4,
                 "handler: healthcheck: redis: port: 0 is out of range 1..65535");
    expect_error("healthcheck:\n  redis:\n    host: 127.0.0.1\n", 3,
                 "healthcheck: redis: unknown key \"host\" (want ip, port, address, net, db, "
                 "password, prefix, suffix, connect_timeout, read_timeout, connection)");
    expect_error("healthcheck:\n  redis:\n    connect_timeout: 1\n"
                 "    connection: {connect_timeout: 2}\n",
                 4,
                 "healthcheck: redis: connection: connect_timeout: given twice (also healthcheck: "
                 "redis: connect_timeout at line 3)");
    expect_error("handler:\n  healthcheck:\n    redis:\n      connection: {pool: 1}\n", 4,
                 "handler: healthcheck: redis: connection: unknown key \"pool\" (want "
                 "max_idle_connections, max_active_connections, connect_timeout, read_timeout, "
                 "idle_keep_alive, max_keep_alive, wait_for_connection)");
    expect_error("healthcheck:\n  redis: {net: unix}\n", 2,
                 "healthcheck: redis: net: unix needs address, the socket's path");
    /* its log */
    expect_error("healthcheck:\n  log: {kafka: {}}\n", 2,
                 "healthcheck: log: kafka: not supported yet (logging to Kafka: check results go "
                 "to a file or a standard stream)");
    expect_error("handler:\n  healthcheck:\n    log:\n      sentry: {enable: false}\n", 4,
                 "handler: healthcheck: log: sentry: not supported yet (logging to Sentry: check "
                 "results go to a file or a standard stream)");
    expect_error("healthcheck:\n  log: {syslog: {}}\n", 2,
                 "healthcheck: log: syslog: not supported yet (logging to syslog: check results go "
                 "to a file or a standard stream)");
    expect_error("healthcheck:\n  log: {time_format: x}\n", 2,
                 "healthcheck: log: time_format: not supported yet (timestamps: every line carries "
                 "tern's own)");
    expect_error(
        "healthcheck:\n  log:\n    target: kafka\n", 3,
        "healthcheck: log: target: \"kafka\" is not supported (check results go to a file, "
        "stdout or stderr)");
    expect_error("healthcheck:\n  log:\n    target: udp\n", 3,
                 "healthcheck: log: target: \"udp\" is not supported (check results go to a file, "
                 "stdout or stderr)");
    expect_error("healthcheck:\n  log:\n    target: tty\n", 3,
                 "healthcheck: log: target: expected file, stdout or stderr, got \"tty\"");
    expect_error("healthcheck:\n  log:\n    enable: true\n    target: file\n", 4,
                 "healthcheck: log: target: file needs path, the log file");
    expect_error(
        "healthcheck:\n  log:\n    level: verbose\n", 3,
        "healthcheck: log: level: expected error, warning, info or debug, got \"verbose\"");
    expect_error("healthcheck:\n  log:\n    format: xml\n", 3,
                 "healthcheck: log: format: expected json or text, got \"xml\"");
    expect_error("healthcheck:\n  log:\n    colour: red\n", 3,
                 "healthcheck: log: unknown key \"colour\" (want enable, level, target, format, "
                 "path)");
}

/* tern's health and redins' healthcheck (either place) set the same settings: one per file. */
static void test_health_conflicts(void **state)
{
    (void)state;
    expect_error("health: {}\nhealthcheck: {enable: false}\n", 2,
                 "healthcheck: conflicts with health at line 1 (give one of them)");
    expect_error("healthcheck: {}\n\nhealth: ~\n", 3,
                 "health: conflicts with healthcheck at line 1 (give one of them)");
    expect_error("health: {}\nhandler:\n  healthcheck: {enable: true}\n", 3,
                 "handler: healthcheck: conflicts with health at line 1 (give one of them)");
    expect_error("handler:\n  zone_reload: 60\n  healthcheck: {}\nhealth: {}\n", 4,
                 "health: conflicts with handler: healthcheck at line 3 (give one of them)");
    expect_error("healthcheck: {}\nhandler:\n  healthcheck: {}\n", 3,
                 "handler: healthcheck: conflicts with healthcheck at line 1 (give one of them)");
    expect_error("{\"handler\": {\n  \"healthcheck\": {\"enable\": true}},\n"
                 " \"healthcheck\": {\"enable\": true}}\n",
                 3,
                 "healthcheck: conflicts with handler: healthcheck at line 2 (give one of them)");
    /* handler without healthcheck beside health is fine, and so is each file alone */
    config_t c = load_text("handler: {zone_reload: 60}\nhealth: {}\n");
    assert_true(c.health.enabled);
    assert_true(c.redis.enabled);
    char err[512];
    const char *path = write_tmp("healthcheck: {enable: true}\n");
    assert_int_equal(config_load(&c, path, err, sizeof(err)), 0); /* a second file replaces */
    unlink(path);
    assert_true(c.health.enabled);
    assert_int_equal(c.health.max_requests, 10);
    config_free(&c);
}

static const char health_text[] =
    "health:\n"
    "  ca_file: /etc/ca.pem\n"
    "  redis: {address: \"[::1]:6380\", password: pw, prefix: p, suffix: s}\n"
    "  log: {path: /var/log/h.log}\n"
    "  checks:\n"
    "    - {address: 192.0.2.1, owner: www.example.test, uri: /h, host: h.example.test,\n"
    "       expect: [200, 204], method: GET, timeout: 10, up_count: 2, down_count: 4}\n"
    "    - {address: \"2001:db8::1\", protocol: https, tls_verify: false}\n"
    "    - {address: 192.0.2.2, protocol: tcp, port: 22}\n";

/* config_copy() copies every health string; each copy frees on its own (ASan checks both). */
static void test_health_copy(void **state)
{
    (void)state;
    config_t a = load_text(health_text), b;
    assert_int_equal(config_copy(&b, &a), 0);
    assert_true(config_same_health_checks(&a.health, &b.health));
    assert_int_equal(b.health.nchecks, 3);
    assert_ptr_not_equal(b.health.checks, a.health.checks);
    assert_ptr_not_equal(b.health.ca_file, a.health.ca_file);
    assert_ptr_not_equal(b.health.log_path, a.health.log_path);
    assert_ptr_not_equal(b.health.redis.host, a.health.redis.host);
    assert_ptr_not_equal(b.health.checks[0].owner, a.health.checks[0].owner);
    assert_ptr_not_equal(b.health.checks[0].spec.uri, a.health.checks[0].spec.uri);
    assert_ptr_not_equal(b.health.checks[0].spec.host, a.health.checks[0].spec.host);
    assert_true(redis_settings_same(&a.health.redis, &b.health.redis));
    config_free(&a);
    assert_false(a.health.enabled);
    assert_null(a.health.checks);
    const config_health_t *h = &b.health;
    assert_true(h->enabled);
    assert_string_equal(h->ca_file, "/etc/ca.pem");
    assert_string_equal(h->log_path, "/var/log/h.log");
    assert_string_equal(h->redis.host, "::1");
    assert_string_equal(h->redis.password, "pw");
    assert_string_equal(h->redis.prefix, "p");
    assert_string_equal(h->redis.suffix, "s");
    assert_string_equal(h->checks[0].owner, "www.example.test");
    assert_string_equal(h->checks[0].spec.uri, "/h");
    assert_string_equal(h->checks[0].spec.host, "h.example.test");
    assert_int_equal(h->checks[0].spec.expect[1], 204);
    assert_int_equal(h->checks[0].line, 6);
    assert_int_equal(h->checks[1].spec.family, 6);
    assert_null(h->checks[1].owner);
    assert_int_equal(h->checks[2].spec.port, 22);
    /* a copy of the copy, then both freed */
    assert_int_equal(config_copy(&a, &b), 0);
    assert_true(config_same_health_checks(&a.health, &b.health));
    config_free(&b);
    config_free(&a);
    /* no health at all */
    config_init(&a);
    assert_int_equal(config_copy(&b, &a), 0);
    assert_null(b.health.checks);
    assert_true(config_same_health_checks(&a.health, &b.health));
    config_free(&b);
    config_free(&a);
}

/* config_same_health_checks: enabled alike and the same checks, entry by entry; the other
 * health settings do not count. */
static void test_same_health_checks(void **state)
{
    (void)state;
    config_t a = load_text(health_text), b = load_text(health_text);
    assert_true(config_same_health_checks(&a.health, &b.health));
    config_health_t *h = &b.health;
    health_spec_t *sp = &h->checks[0].spec;
#define DIFFERS(lvalue, value)                                                                     \
    do {                                                                                           \
        __typeof__(lvalue) saved = (lvalue);                                                       \
        (lvalue) = (value);                                                                        \
        assert_false(config_same_health_checks(&a.health, h));                                     \
        assert_false(config_same_health_checks(h, &a.health));                                     \
        (lvalue) = saved;                                                                          \
        assert_true(config_same_health_checks(&a.health, h));                                      \
    } while (0)
    DIFFERS(h->enabled, false);
    DIFFERS(h->nchecks, 2);
    DIFFERS(sp->proto, HEALTH_HTTPS);
    DIFFERS(sp->family, 6);
    DIFFERS(sp->addr[3], 9);
    DIFFERS(sp->port, 81);
    DIFFERS(sp->method, HEALTH_HEAD);
    DIFFERS(sp->tls_verify, false);
    DIFFERS(sp->nexpect, 1);
    DIFFERS(sp->expect[1], 205);
    DIFFERS(sp->up_count, 3);
    DIFFERS(sp->down_count, -3);
    DIFFERS(sp->timeout_ms, 1000);
    DIFFERS(h->checks[1].spec.addr[15], 2);
    DIFFERS(h->checks[2].spec.port, 23);
    /* strings: another value, NULL (unless it is) */
    char other[] = "other";
    DIFFERS(sp->uri, other);
    DIFFERS(sp->uri, NULL);
    DIFFERS(sp->host, other);
    DIFFERS(sp->host, NULL);
    DIFFERS(h->checks[0].owner, other);
    DIFFERS(h->checks[0].owner, NULL);
    DIFFERS(h->checks[1].owner, other);
    /* where it was written does not matter, nor do the settings other than the checks */
    h->checks[0].line = 99;
    h->check_interval_ms = 5;
    h->max_requests = 1;
    h->log_enabled = false;
    h->redis.enabled = false;
    assert_true(config_same_health_checks(&a.health, h));
#undef DIFFERS
    config_free(&b);
    /* the same checks written differently */
    b = load_text(
        "health:\n"
        "  checks:\n"
        "    - address: 192.0.2.1\n"
        "      owner: WWW.EXAMPLE.TEST.\n"
        "      protocol: http\n"
        "      port: 80\n"
        "      uri: /h\n"
        "      host: h.example.test.\n"
        "      expect:\n"
        "        - 200\n"
        "        - 204\n"
        "      method: GET\n"
        "      timeout: 10\n"
        "      up_count: 2\n"
        "      down_count: -4\n"
        "    - {address: \"2001:db8:0::1\", protocol: https, port: 443, tls_verify: false}\n"
        "    - {address: 192.0.2.2, protocol: tcp, port: 22}\n");
    assert_true(config_same_health_checks(&a.health, &b.health));
    config_free(&b);
    /* the same checks in another order are other checks */
    b = load_text("health:\n"
                  "  checks:\n"
                  "    - {address: 192.0.2.2, protocol: tcp, port: 22}\n"
                  "    - {address: 192.0.2.1, owner: www.example.test, uri: /h, "
                  "host: h.example.test,\n"
                  "       expect: [200, 204], method: GET, timeout: 10, up_count: 2, "
                  "down_count: 4}\n"
                  "    - {address: \"2001:db8::1\", protocol: https, tls_verify: false}\n");
    assert_false(config_same_health_checks(&a.health, &b.health));
    config_free(&b);
    /* disabled against enabled with no checks; two configs without health */
    config_free(&a);
    a = load_text("health: {}\n");
    config_init(&b);
    assert_false(config_same_health_checks(&a.health, &b.health));
    config_free(&a);
    config_init(&a);
    assert_true(config_same_health_checks(&a.health, &b.health));
    config_free(&a);
    config_free(&b);
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
    /* an empty file is refused (a truncated one) and changes nothing that was there */
    path = write_tmp("");
    assert_int_equal(config_load(&c, path, err, sizeof(err)), TERN_EINVAL);
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
                 "zones[0]: unknown key \"type\" (want origin, file, format, acl, dnssec, primary, "
                 "notify, allow_transfer, "
                 "transfer_key, allow_notify, allow_update, catalog_consumer, "
                 "catalog, catalog_group, catalog_coo, transfer_tls)");
    expect_error("{\n\"zones\": [\n {\"origin\": \"a.\",\n  \"file\": \"a.zone\",\n"
                 "  \"master\": true}\n]}\n",
                 5,
                 "zones[0]: unknown key \"master\" (want origin, file, format, acl, dnssec, "
                 "primary, notify, allow_transfer, "
                 "transfer_key, allow_notify, allow_update, catalog_consumer, "
                 "catalog, catalog_group, catalog_coo, transfer_tls)");
    expect_error("{\"error_log\": {\n  \"level\": \"info\",\n  \"colour\": true}}\n", 3,
                 "error_log: unknown key \"colour\" (want enable, level, target, format)");
    expect_error("server:\n  ip: 1.2.3.4\n  port: 53\n  proto: udp\n", 4,
                 "server: unknown key \"proto\" (want ip, port, protocol)");
    expect_error("listen:\n  - {address: 1.2.3.4:53, [x]: 1}\n", 2,
                 "listen[0]: keys must be strings, got a list");
    /* an option name is case-sensitive */
    expect_error("Workers: 2\n", 1, "Workers: unknown key");
}

/* Keys, values and the file's name reach the log through error messages: their control
 * characters come out escaped, never as a new line, a terminal sequence or a systemd field. */
static void test_error_escapes(void **state)
{
    (void)state;
    expect_error("\"bad\\nREADY=1\": 1\n", 1, "bad\\010READY=1: unknown key");
    expect_error("zones:\n  - {origin: a, file: a, \"t\\tx\\r\": 1}\n", 2,
                 "zones[0]: unknown key \"t\\009x\\013\" (want origin, file, format, acl, dnssec, "
                 "primary, notify, allow_transfer, "
                 "transfer_key, allow_notify, allow_update, catalog_consumer, "
                 "catalog, catalog_group, catalog_coo, transfer_tls)");
    expect_error("log_level: \"\\e[31mred\\x7f\"\n", 1,
                 "log_level: expected error, warning, info or debug, got \"\\027[31mred\\127\"");
    expect_error("handler:\n  redis:\n    ip: \"a\\x01b\"\n", 3,
                 "handler: redis: ip: bad address \"a\\001b\"");

    /* the file's own name */
    char dir[] = "/tmp/tern_conf_dir_XXXXXX", path[128], err[512] = "";
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof(path), "%s/a\nb.yaml", dir);
    write_file(path, "workers: 0\n");
    config_t c;
    config_init(&c);
    assert_int_equal(config_load(&c, path, err, sizeof(err)), TERN_ESYNTAX);
    char want[512];
    snprintf(want, sizeof(want), "%s/a\\010b.yaml:1: workers: 0 is out of range 1..256", dir);
    assert_string_equal(err, want);
    config_free(&c);
    unlink(path);
    snprintf(path, sizeof(path), "%s/missing\x1b.yaml", dir);
    assert_true(config_load(&c, path, err, sizeof(err)) < 0);
    snprintf(want, sizeof(want), "%s/missing\\027.yaml: No such file or directory", dir);
    assert_string_equal(err, want);
    config_free(&c);
    rmdir(dir);

    /* a short buffer ends before an escape rather than in the middle of one */
    const char *p = write_tmp("\"\\x01\": 1\n");
    size_t plen = strlen(p);
    char small[64];
    assert_true(plen + 8 < sizeof(small));
    config_init(&c);
    assert_true(config_load(&c, p, small, plen + 6) < 0); /* room for "PATH:1: " and one byte */
    snprintf(want, sizeof(want), "%s:1: ", p);
    assert_string_equal(small, want);
    config_free(&c);
    unlink(p);
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
                 "the config file's directory (a secondary zone's on-disk copy, optional))");
    expect_error("zones:\n  - origin: a.test\n    file: a.zone\n    format: bind\n", 4,
                 "zones[0]: format: expected rfc1035 or json, got \"bind\"");
    expect_error("zones:\n  - file: a.zone\n", 2,
                 "zones[0]: missing \"origin\" (the zone's apex name)");
    expect_error("zones:\n  - origin: a.test\n    file: [x]\n", 3,
                 "zones[0]: file: expected a non-empty string, got a list");
    expect_error("zones:\n  - origin: \"\"\n    file: a\n", 2,
                 "zones[0]: origin: expected a non-empty string, got a string");
    expect_error(
        "zones:\n  - a.test\n", 2,
        "zones[0]: expected a mapping {origin, file, format, acl, dnssec, primary, notify, "
        "allow_transfer, transfer_key, allow_notify, allow_update, catalog_consumer, "
        "catalog, catalog_group, catalog_coo, transfer_tls}, got a plain scalar");
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
    /* read again at every SIGHUP on the loader thread: a FIFO must not hang it */
    char fifo[] = "/tmp/tern-conf-fifo-XXXXXX";
    assert_non_null(mkdtemp(fifo));
    char fpath[64];
    snprintf(fpath, sizeof(fpath), "%s/c.yaml", fifo);
    assert_int_equal(mkfifo(fpath, 0600), 0);
    assert_int_equal(config_load(&c, fpath, err, sizeof(err)), TERN_EINVAL);
    assert_non_null(strstr(err, "is not a regular file (a FIFO)"));
    assert_int_equal(config_load(&c, fifo, err, sizeof(err)), TERN_EINVAL);
    assert_non_null(strstr(err, "is a directory"));
    unlink(fpath);
    rmdir(fifo);
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

/* Restart-only options changed between two configs, named in schema order. */
static void expect_restart_only(const char *from, const char *to, size_t count, const char *keys)
{
    config_t a = load_text(from), b = load_text(to);
    char buf[256];
    size_t n = config_restart_only_changes(&a, &b, buf, sizeof(buf));
    if (n != count || strcmp(buf, keys) != 0)
        print_error("from '%s' to '%s': %zu '%s', want %zu '%s'\n", from, to, n, buf, count, keys);
    assert_int_equal(n, count);
    assert_string_equal(buf, keys);
    config_free(&a);
    config_free(&b);
}

static void test_restart_only_changes(void **state)
{
    (void)state;
    static const char base[] = "listen: [\"127.0.0.1:53\"]\nworkers: 2\n";
    char to[1024];
    /* the two that the old hand-written check missed */
    snprintf(to, sizeof(to), "%stcp_max_lifetime: 60\ntcp_max_inflight: 8\n", base);
    expect_restart_only(base, to, 2, "tcp_max_lifetime, tcp_max_inflight");
    /* each restart-only option alone, with its name */
    static const struct {
        const char *text, *key;
    } one[] = {
        {"listen: [\"127.0.0.1:54\"]\nworkers: 2\n", "listen"},
        {"listen: [{address: \"127.0.0.1:53\", tcp: false}]\nworkers: 2\n", "listen"},
        {"listen: [\"127.0.0.1:53\"]\nworkers: 3\n", "workers"},
        {"tcp_idle_timeout: 11\n", "tcp_idle_timeout"},
        {"tcp_max_connections: 10\n", "tcp_max_connections"},
        {"tcp_max_lifetime: 121\n", "tcp_max_lifetime"},
        {"tcp_max_inflight: 65\n", "tcp_max_inflight"},
        {"udp_mmsg: false\n", "udp_mmsg"},
        {"user: nobody\n", "user"},
        {"group: nogroup\n", "group"},
        {"allow_root: true\n", "allow_root"},
        {"pid_file: /run/t.pid\n", "pid_file"},
        {"control_socket: /run/t.sock\n", "control_socket"},
        {"metrics_listen: \"127.0.0.1:9153\"\n", "metrics_listen"},
        {"tcp_max_per_client: 0\n", "tcp_max_per_client"},
        {"tcp_client_prefix_v4: 24\n", "tcp_client_prefix_v4"},
        {"tcp_client_prefix_v6: 56\n", "tcp_client_prefix_v6"},
    };
    for (size_t i = 0; i < TERN_ARRAY_SIZE(one); i++) {
        snprintf(to, sizeof(to), "%s%s", strncmp(one[i].text, "listen", 6) ? base : "",
                 one[i].text);
        expect_restart_only(base, to, 1, one[i].key);
        expect_restart_only(to, base, 1, one[i].key); /* and back */
    }
    /* what a reload applies is not listed; the text of a listen entry does not matter */
    snprintf(to, sizeof(to),
             "listen: [{address: \"127.0.0.1:53\"}]\nworkers: 2\nidentity: x\nversion: y\n"
             "edns_max_udp: 1400\nlog_level: debug\nlog_target: stdout\nasn_table: a.bin\n"
             "asn_db: a.mmdb\ngeoip_db: g.mmdb\ngeoip_db_v6: g6.mmdb\nredis: {db: 1}\n"
             "zones: [{origin: a.test, file: a.zone, acl: {deny: 10.0.0.0/8}}]\n"
             "acl: {allow: 127.0.0.1}\nratelimit: {rate: 1}\nrrl: {rate: 1, table_size: 1024}\n"
             "cookies: {rotate_s: 60}\n");
    expect_restart_only(base, to, 0, "");
    /* all of them at once fit 256 bytes */
    snprintf(to, sizeof(to),
             "listen: [\"127.0.0.1:54\"]\nworkers: 3\ntcp_idle_timeout: 11\n"
             "tcp_max_connections: 10\ntcp_max_lifetime: 121\ntcp_max_inflight: 65\n"
             "tcp_max_per_client: 1\ntcp_client_prefix_v4: 8\ntcp_client_prefix_v6: 16\n"
             "udp_mmsg: false\nuser: nobody\ngroup: nogroup\nallow_root: true\n"
             "pid_file: /run/t.pid\ncontrol_socket: /run/t.sock\n"
             "metrics_listen: \"127.0.0.1:9153\"\n");
    expect_restart_only(base, to, 16,
                        "listen, workers, tcp_idle_timeout, tcp_max_connections, "
                        "tcp_max_lifetime, tcp_max_inflight, tcp_max_per_client, "
                        "tcp_client_prefix_v4, tcp_client_prefix_v6, udp_mmsg, user, group, "
                        "allow_root, pid_file, control_socket, metrics_listen");
    /* a short buffer is cut, the count is whole */
    config_t a = load_text(base), b = load_text(to);
    char small[12];
    assert_int_equal(config_restart_only_changes(&a, &b, small, sizeof(small)), 16);
    assert_string_equal(small, "listen, wor");
    assert_int_equal(config_restart_only_changes(&a, &b, small, 0), 16);
    config_free(&a);
    config_free(&b);
}

/* config_line_of(): the line a value came from, as long as it is still that value. */
static void test_line_of(void **state)
{
    (void)state;
    config_t c = load_text("workers: 2\n\nuser: nobody\nlisten: [\"127.0.0.1:53\"]\n"
                           "pid_file: /run/t.pid\n");
    assert_non_null(c.file);
    assert_int_equal(config_line_of(&c, "workers"), 1);
    assert_int_equal(config_line_of(&c, "user"), 3);
    assert_int_equal(config_line_of(&c, "pid_file"), 5);
    assert_int_equal(config_line_of(&c, "group"), 0);  /* not in the file */
    assert_int_equal(config_line_of(&c, "listen"), 0); /* no value of its own */
    assert_int_equal(config_line_of(&c, "no_such_key"), 0);
    config_t d;
    assert_int_equal(config_copy(&d, &c), 0);
    assert_string_equal(d.file, c.file);
    assert_int_equal(config_line_of(&d, "user"), 3);
    /* replaced after loading, as main.c does for --user and --workers: no longer the file's */
    free(c.user);
    c.user = strdup("nobody2");
    c.workers = 3;
    assert_int_equal(config_line_of(&c, "user"), 0);
    assert_int_equal(config_line_of(&c, "workers"), 0);
    assert_int_equal(config_line_of(&d, "user"), 3);
    config_free(&c);
    config_free(&d);
    assert_null(d.file);
}

/* config_check_runtime() on c, expecting rc and exactly msg. */
static void expect_runtime(const config_t *c, bool create, int rc, const char *msg)
{
    char err[1024] = "x";
    int r = config_check_runtime(c, create, err, sizeof(err));
    if (r != rc || strcmp(err, msg) != 0)
        print_error("got %d '%s', want %d '%s'\n", r, err, rc, msg);
    assert_int_equal(r, rc);
    assert_string_equal(err, msg);
}

static void test_check_runtime(void **state)
{
    (void)state;
    char dir[] = "/tmp/tern_conf_run_XXXXXX", text[512], want[1024], path[300];
    struct stat st;
    assert_non_null(mkdtemp(dir));
    /* accounts: from the file with their lines, every problem in one message, escaped */
    snprintf(path, sizeof(path), "%s/ternd.yaml", dir);
    write_file(path, "workers: 1\nuser: no-such-user\ngroup: \"no\\nsuch\"\n");
    config_t c = load_ok(path);
    snprintf(want, sizeof(want),
             "%s:2: user 'no-such-user': no such user; %s:3: group 'no\\010such': no such group",
             path, path);
    expect_runtime(&c, false, TERN_ENOENT, want);
    /* replaced by a flag: named by it */
    free(c.user);
    c.user = strdup("no-such-flag-user");
    free(c.group);
    c.group = NULL;
    expect_runtime(&c, true, TERN_ENOENT, "user 'no-such-flag-user' (--user): no such user");
    free(c.user);
    c.user = strdup("nobody");
    expect_runtime(&c, true, 0, "");
    c.group = strdup("nogroup");
    expect_runtime(&c, true, 0, "");
    config_free(&c);
    unlink(path);

    /* directories: there; one level missing (created only when asked); two levels; a file */
    snprintf(text, sizeof(text), "pid_file: %s/ternd.pid\ncontrol_socket: %s/run/ternd.sock\n", dir,
             dir);
    c = load_text(text);
    expect_runtime(&c, false, 0, "");
    snprintf(path, sizeof(path), "%s/run", dir);
    assert_int_equal(stat(path, &st), -1); /* a check changes nothing */
    c.user = strdup("nobody");
    expect_runtime(&c, true, 0, "");
    assert_int_equal(stat(path, &st), 0);
    assert_true(S_ISDIR(st.st_mode));
    assert_int_equal(st.st_mode & 07777, 0755);
    if (geteuid() == 0) /* given to the account ternd becomes, so it can use it after the switch */
        assert_int_equal(st.st_uid, 65534);
    expect_runtime(&c, true, 0, ""); /* there now: left as it is */
    rmdir(path);
    config_free(&c);
    snprintf(text, sizeof(text), "pid_file: %s/a/b/ternd.pid\n", dir);
    c = load_text(text);
    snprintf(want, sizeof(want),
             "%s:1: pid_file '%s/a/b/ternd.pid': directory %s/a/b does not exist, nor does %s/a "
             "to create it in",
             tmp_path, dir, dir, dir);
    expect_runtime(&c, true, TERN_ENOENT, want);
    config_free(&c);
    snprintf(path, sizeof(path), "%s/file", dir);
    write_file(path, "");
    snprintf(text, sizeof(text), "control_socket: %s/file/ternd.sock\n", dir);
    c = load_text(text);
    snprintf(want, sizeof(want),
             "%s:1: control_socket '%s/file/ternd.sock': %s/file is not a directory", tmp_path, dir,
             dir);
    expect_runtime(&c, true, TERN_EINVAL, want);
    config_free(&c);
    unlink(path);
    /* a relative path without a directory is in the cwd, which exists */
    config_init(&c);
    c.pid_file = strdup("ternd.pid");
    expect_runtime(&c, false, 0, "");
    config_free(&c);
    rmdir(dir);
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
    assert_true(redis_settings_same(&a.redis, &b.redis));
    /* independent: freeing one leaves the other whole (ASan would see a double free) */
    config_free(&a);
    assert_string_equal(b.zones[1].file, "/abs/other.zone");
    config_free(&b);

    /* the redis strings are copied too */
    a = load_text("redis:\n  address: \"[::1]:6380\"\n  password: pw\n  prefix: p\n"
                  "  suffix: s\n  changes_channel: \"\"\n  db: 3\n  max_ttl: 60\n");
    assert_int_equal(config_copy(&b, &a), 0);
    assert_true(redis_settings_same(&a.redis, &b.redis));
    assert_ptr_not_equal(b.redis.host, a.redis.host);
    assert_ptr_not_equal(b.redis.password, a.redis.password);
    assert_ptr_not_equal(b.redis.changes_channel, a.redis.changes_channel);
    config_free(&a);
    assert_true(b.redis.enabled);
    assert_string_equal(b.redis.host, "::1");
    assert_int_equal(b.redis.port, 6380);
    assert_string_equal(b.redis.password, "pw");
    assert_string_equal(b.redis.prefix, "p");
    assert_string_equal(b.redis.suffix, "s");
    assert_string_equal(b.redis.changes_channel, "");
    assert_int_equal(b.redis.db, 3);
    assert_int_equal(b.redis.max_ttl, 60);
    config_free(&b);
    assert_false(b.redis.enabled);
    assert_null(b.redis.host);
    assert_int_equal(b.redis.zone_reload_s, 600);
    a = load_text("redis: {address: /run/redis.sock}\n");
    assert_int_equal(config_copy(&b, &a), 0);
    assert_string_equal(b.redis.unix_path, "/run/redis.sock");
    assert_ptr_not_equal(b.redis.unix_path, a.redis.unix_path);
    config_free(&a);
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
    static char buf[32768];
    memset(buf, 0, sizeof(buf));
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
                                       "asn_table",
                                       "geoip_db",
                                       "geoip_db_v6",
                                       "redis",
                                       "health",
                                       "server",
                                       "error_log",
                                       "handler",
                                       "log",
                                       "upstream",
                                       "geoip",
                                       "healthcheck",
                                       "ratelimit",
                                       "acl",
                                       "rrl",
                                       "cookies",
                                       "tcp_max_per_client",
                                       "tcp_client_prefix_v4",
                                       "tcp_client_prefix_v6",
                                       "aname"};
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
    /* redis's keys, under it */
    const char *redis = strstr(buf, "\n  redis ");
    assert_non_null(redis);
    static const char *const redis_keys[] = {"address",      "db",          "password",
                                             "prefix",       "suffix",      "connect_timeout",
                                             "read_timeout", "zone_reload", "changes_channel",
                                             "default_ttl",  "max_ttl"};
    for (size_t i = 0; i < sizeof(redis_keys) / sizeof(redis_keys[0]); i++) {
        char want[64];
        snprintf(want, sizeof(want), "\n    %s ", redis_keys[i]);
        const char *at = strstr(redis, want);
        if (!at || at > strstr(buf, "\nredins"))
            fail_msg("schema print lacks redis key '%s'", redis_keys[i]);
    }
    assert_non_null(strstr(buf, "    db                 database to SELECT [0..1023, default 0]"));
    assert_non_null(strstr(buf, "[0..604800, default 600]"));
    assert_non_null(strstr(buf, "[0..2147483647, default 0]"));
    /* handler's keys, and what they map to */
    const char *handler = strstr(buf, "\n  handler ");
    assert_non_null(handler);
    assert_non_null(
        strstr(handler, "\n    max_ttl            into redis: max_ttl, and default_ttl"));
    assert_non_null(strstr(handler, "\n    cache_timeout      ignored"));
    assert_non_null(strstr(handler, "\n    log                {enable, level, target, format"));
    assert_non_null(strstr(buf, "\n  geoip                (older redins) {enable, db}"));
    /* health's keys under it, and its log's and a check's under those */
    const char *health = strstr(buf, "\n  health ");
    assert_non_null(health);
    assert_non_null(strstr(health,
                           "\n    check_interval_ms  milliseconds between two checks of one "
                           "endpoint [100..86400000, default 10000]"));
    assert_non_null(strstr(health, "\n    max_requests       "));
    assert_non_null(strstr(health, "\n    redis              "));
    assert_non_null(strstr(health, "\n      target           where the lines go [file, stdout or "
                                   "stderr, default file]"));
    assert_non_null(strstr(health, "\n      protocol         what is checked [http, https, tcp, "
                                   "icmp or ping, default http]"));
    assert_non_null(strstr(health, "\n      down_count       "));
    assert_true(strstr(health, "\n      down_count ") < strstr(buf, "\nredins"));
    /* redins' healthcheck, at the top level and in handler */
    const char *hc = strstr(buf, "\n  healthcheck ");
    assert_non_null(hc);
    assert_non_null(strstr(hc, "\n    max_pending_requests accepted"));
    assert_non_null(strstr(hc, "\n    check_interval     seconds"));
    assert_non_null(strstr(handler, "\n    healthcheck        {enable, max_requests"));
    /* ratelimit is a native option now (redins' key too): its keys under it, before redins' */
    const char *rl = strstr(buf, "\n  ratelimit ");
    assert_non_null(rl);
    assert_true(rl < strstr(buf, "\nredins"));
    assert_non_null(strstr(rl, "\n    rate               requests a minute from one client "
                               "address [1..6000000, default 60]"));
    assert_null(strstr(buf, "per-client rate limits"));
    /* aname's upstreams, and an upstream's keys under them, before redins'; redins' upstream at
     * the top level and in handler, as supported keys */
    const char *aname = strstr(buf, "\n  aname ");
    assert_non_null(aname);
    assert_true(aname < strstr(buf, "\nredins"));
    assert_non_null(strstr(aname, "\n    upstreams          "));
    assert_non_null(strstr(aname, "\n      port             the server's port [1..65535, default "
                                  "53]"));
    assert_non_null(strstr(aname, "\n      protocol         how it is asked"));
    assert_non_null(strstr(aname, "[udp or tcp, default udp]"));
    assert_non_null(strstr(aname, "[1..60000, default 400]"));
    assert_non_null(strstr(handler, "\n    upstream           list of {ip, port: 53"));
    assert_null(strstr(buf, "not supported yet: forwarding"));
    const char *upstream = strstr(buf, "\n  upstream ");
    assert_non_null(upstream);
    assert_true(upstream > strstr(buf, "\nredins"));
    /* every line is one option, well under a terminal's width plus the description */
    for (char *line = strtok(buf, "\n"); line; line = strtok(NULL, "\n"))
        assert_true(strlen(line) < 160);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults),
        cmocka_unit_test(test_empty_refused),
        cmocka_unit_test(test_check_complete),
        cmocka_unit_test(test_valid_yaml),
        cmocka_unit_test(test_valid_json),
        cmocka_unit_test(test_example_ternd_yaml),
        cmocka_unit_test(test_example_redis_block),
        cmocka_unit_test(test_example_health_block),
        cmocka_unit_test(test_example_aname_block),
        cmocka_unit_test(test_example_has_every_option),
        cmocka_unit_test(test_steering),
        cmocka_unit_test(test_xdp_listen),
        cmocka_unit_test(test_redins_example_json),
        cmocka_unit_test(test_redins_server_mapping),
        cmocka_unit_test(test_redins_not_supported),
        cmocka_unit_test(test_redins_errors),
        cmocka_unit_test(test_redis_yaml),
        cmocka_unit_test(test_redis_errors),
        cmocka_unit_test(test_redins_handler),
        cmocka_unit_test(test_redins_handler_errors),
        cmocka_unit_test(test_same_redis),
        cmocka_unit_test(test_health_yaml),
        cmocka_unit_test(test_health_errors),
        cmocka_unit_test(test_health_many_checks),
        cmocka_unit_test(test_redins_healthcheck),
        cmocka_unit_test(test_redins_healthcheck_errors),
        cmocka_unit_test(test_health_conflicts),
        cmocka_unit_test(test_health_copy),
        cmocka_unit_test(test_same_health_checks),
        cmocka_unit_test(test_listen_forms),
        cmocka_unit_test(test_bad_listen),
        cmocka_unit_test(test_listen_limit_in_file),
        cmocka_unit_test(test_unknown_key),
        cmocka_unit_test(test_error_escapes),
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
        cmocka_unit_test(test_restart_only_changes),
        cmocka_unit_test(test_copy),
        cmocka_unit_test(test_line_of),
        cmocka_unit_test(test_check_runtime),
        cmocka_unit_test(test_schema_print),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
