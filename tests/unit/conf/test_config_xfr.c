/*
 * test_config_xfr.c — zone-transfer settings (src/conf/config_xfr.c, add_zone_item() in
 * config.c): TSIG keys inline and from BIND key files, a primary zone's allow_transfer,
 * transfer_key and notify list, a secondary zone's primaries and allow_notify, an entry that only
 * holds the transfer settings of a zone from Redis, the six xfr_* bounds. Every field parsed is
 * checked; every error with its exact file:line and a message naming the key; copies and frees
 * (run under ASan: nothing may leak, a copy owns everything it points to).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>

#include <cmocka.h>

#include "tern/common/err.h"
#include "tern/conf/config.h"
#include "tern/tsig/tsig.h"

#include "conf_test_util.h"

/* Secrets (base64) and what they decode to. */
#define SECRET_XFR     "dGVybi14ZnItdGVzdC1zZWNyZXQtMDEyMzQ1Njc4OWE="
#define SECRET_XFR_RAW "tern-xfr-test-secret-0123456789a"
#define SECRET_B1      "c2Vjb25kLWtleS1mb3ItdGhlLXRlcm4tdGVzdHMhISE="
#define SECRET_B1_RAW  "second-key-for-the-tern-tests!!!"
#define SECRET_MD5     "bWQ1a2V5LTE2Ynl0ZXMhIQ=="
#define SECRET_MD5_RAW "md5key-16bytes!!"
#define SECRET_512     "c2hhNTEyLWtleS1zaGE1MTIta2V5LXNoYTUxMi1rZXktc2hhNTEyLWtleS0="
#define SECRET_512_RAW "sha512-key-sha512-key-sha512-key-sha512-key-"

/* A BIND key file as tsig-keygen and named.conf write them: two keys, every comment style. */
static const char bind_keys[] =
    "# keys shared with the secondaries\n"
    "key \"bind-key-1\" {\n"
    "    algorithm hmac-sha256; // as tsig-keygen writes it\n"
    "    secret \"" SECRET_B1 "\";\n"
    "};\n"
    "/* a second key,\n"
    "   unquoted */\n"
    "key bind-key-2 { algorithm hmac-md5; secret \"" SECRET_MD5 "\"; };\n";

static char key_path[64];

/* key_path becomes a fresh file in /tmp (the directory of write_tmp()'s configs) holding text. */
static const char *write_key_file(const char *text)
{
    snprintf(key_path, sizeof(key_path), "/tmp/tern_keys_XXXXXX");
    int fd = mkstemp(key_path);
    assert_true(fd >= 0);
    size_t len = strlen(text);
    assert_int_equal(write(fd, text, len), (ssize_t)len);
    close(fd);
    return key_path;
}

/* The file name of key_path: resolved against the config's directory (/tmp) when loaded. */
static const char *key_base(void)
{
    return strrchr(key_path, '/') + 1;
}

/* config_load() of text (a printf format; its arguments follow), expecting success. */
static config_t load_fmt(const char *fmt, ...)
{
    char text[8192];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(text, sizeof(text), fmt, ap);
    va_end(ap);
    assert_true(n > 0 && (size_t)n < sizeof(text));
    return load_text(text);
}

/* expect_error() of a formatted text. */
static void expect_error_fmt(unsigned line, const char *msg, const char *fmt, ...)
{
    char text[8192];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(text, sizeof(text), fmt, ap);
    va_end(ap);
    assert_true(n > 0 && (size_t)n < sizeof(text));
    expect_error(text, line, msg);
}

/* p is addr (IPv4 or IPv6 text) at port, its text "addr@port", signed with key (NULL: none),
 * given at line. */
static void expect_peer(const config_xfr_peer_t *p, const char *addr, unsigned port,
                        const char *key, unsigned line)
{
    char text[80];
    snprintf(text, sizeof(text), "%s@%u", addr, port);
    assert_string_equal(p->text, text);
    if (strchr(addr, ':')) {
        const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)&p->addr;
        struct in6_addr want;
        assert_int_equal(inet_pton(AF_INET6, addr, &want), 1);
        assert_int_equal(a->sin6_family, AF_INET6);
        assert_int_equal(p->addr_len, sizeof(struct sockaddr_in6));
        assert_memory_equal(&a->sin6_addr, &want, sizeof(want));
        assert_int_equal(ntohs(a->sin6_port), port);
    } else {
        const struct sockaddr_in *a = (const struct sockaddr_in *)&p->addr;
        struct in_addr want;
        assert_int_equal(inet_pton(AF_INET, addr, &want), 1);
        assert_int_equal(a->sin_family, AF_INET);
        assert_int_equal(p->addr_len, sizeof(struct sockaddr_in));
        assert_memory_equal(&a->sin_addr, &want, sizeof(want));
        assert_int_equal(ntohs(a->sin_port), port);
    }
    if (key)
        assert_string_equal(p->key, key);
    else
        assert_null(p->key);
    if (line)
        assert_int_equal(p->line, line);
}

/* l[i] is text ("192.0.2.0/24", "2001:db8::/32"). */
static void expect_prefix(const config_prefix_list_t *l, size_t i, const char *text)
{
    char why[256];
    config_prefix_t want;
    assert_true(i < l->n);
    assert_int_equal(config_parse_prefix(&want, text, why, sizeof(why)), 0);
    assert_int_equal(l->p[i].family, want.family);
    assert_int_equal(l->p[i].len, want.len);
    assert_memory_equal(l->p[i].addr, want.addr, sizeof(want.addr));
}

static void expect_key(const tsig_key_t *k, const char *name, int alg, const char *raw)
{
    assert_non_null(k);
    assert_string_equal(k->name, name);
    assert_int_equal(k->alg, alg);
    assert_int_equal(k->secret_len, strlen(raw));
    assert_memory_equal(k->secret, raw, strlen(raw));
    /* the wire form: the same name, lowercased, as labels */
    uint8_t wire[256];
    size_t wl = 0;
    for (const char *s = name; *s;) {
        const char *dot = strchr(s, '.');
        size_t l = dot ? (size_t)(dot - s) : strlen(s);
        wire[wl++] = (uint8_t)l;
        memcpy(wire + wl, s, l);
        wl += l;
        s += l + (dot ? 1 : 0);
    }
    wire[wl++] = 0;
    assert_int_equal(k->wire_len, wl);
    assert_memory_equal(k->wire, wire, wl);
}

/* The config of the brief, every form each setting takes. Line numbers matter: see below. */
static const char full_fmt[] =
    "tsig_keys:\n"                                                              /* 1 */
    "  - {name: xfr-key, algorithm: hmac-sha256, secret: \"" SECRET_XFR "\"}\n" /* 2 */
    "  - name: Notify.Key.\n"                                                   /* 3 */
    "    algorithm: HMAC-SHA512\n"                                              /* 4 */
    "    secret: \"" SECRET_512 "\"\n"                                          /* 5 */
    "tsig_key_file: [%s]\n"                                                     /* 6 */
    "zones:\n"                                                                  /* 7 */
    "  - origin: example.test\n"                                                /* 8 */
    "    file: example.zone\n"                                                  /* 9 */
    "    allow_transfer: [192.0.2.0/24, 127.0.0.1, \"2001:db8::/32\"]\n"        /* 10 */
    "    transfer_key: xfr-key\n"                                               /* 11 */
    "    notify:\n"                                                             /* 12 */
    "      - 192.0.2.7\n"                                                       /* 13 */
    "      - \"192.0.2.8@5300\"\n"                                              /* 14 */
    "      - \"2001:db8::53\"\n"                                                /* 15 */
    "      - \"2001:db8::54@5301\"\n"                                           /* 16 */
    "      - {address: 192.0.2.9, key: bind-key-1}\n"                           /* 17 */
    "      - address: \"192.0.2.10@65535\"\n"                                   /* 18 */
    "        key: notify.key.\n"                                                /* 19 */
    "  - origin: sec.test\n"                                                    /* 20 */
    "    primary:\n"                                                            /* 21 */
    "      - {address: \"192.0.2.1@53\", key: xfr-key}\n"                       /* 22 */
    "      - \"2001:db8::1\"\n"                                                 /* 23 */
    "      - \"::ffff:192.0.2.2@1\"\n"                                          /* 24 */
    "    file: sec.zone\n"                                                      /* 25 */
    "    allow_notify: [192.0.2.1, 198.51.100.0/24]\n"                          /* 26 */
    "  - origin: sec2.test\n"                                                   /* 27 */
    "    primary: {address: \"127.0.0.1@5353\", key: bind-key-2}\n"             /* 28 */
    "  - origin: redis.test\n"                                                  /* 29 */
    "    allow_transfer: 10.0.0.0/8\n"                                          /* 30 */
    "    notify: 10.0.0.53@5300\n"                                              /* 31 */
    "    transfer_key: BIND-KEY-2\n"                                            /* 32 */
    "xfr_journal_versions: 0\n"                                                 /* 33 */
    "xfr_journal_mib: 65536\n"                                                  /* 34 */
    "xfr_max_mib: 1\n"                                                          /* 35 */
    "xfr_notify_retries: 100\n"                                                 /* 36 */
    "xfr_notify_timeout_ms: 10\n"                                               /* 37 */
    "xfr_timeout_ms: 3600000\n";                                                /* 38 */

/* Everything full_fmt says, in c. */
static void expect_full(const config_t *c)
{
    /* keys: inline first, then the file's, in order; names lowercased without the final dot */
    assert_int_equal(c->ntsig_keys, 4);
    expect_key(&c->tsig_keys[0], "xfr-key", TSIG_ALG_HMAC_SHA256, SECRET_XFR_RAW);
    expect_key(&c->tsig_keys[1], "notify.key", TSIG_ALG_HMAC_SHA512, SECRET_512_RAW);
    expect_key(&c->tsig_keys[2], "bind-key-1", TSIG_ALG_HMAC_SHA256, SECRET_B1_RAW);
    expect_key(&c->tsig_keys[3], "bind-key-2", TSIG_ALG_HMAC_MD5, SECRET_MD5_RAW);
    assert_ptr_equal(config_tsig_key(c, "xfr-key"), &c->tsig_keys[0]);
    assert_ptr_equal(config_tsig_key(c, "Notify.KEY"), &c->tsig_keys[1]);
    assert_ptr_equal(config_tsig_key(c, "BIND-KEY-2"), &c->tsig_keys[3]);
    assert_null(config_tsig_key(c, "bind-key-3"));
    assert_null(config_tsig_key(c, NULL));

    assert_int_equal(c->nzones, 4);
    /* a primary zone of ours */
    const config_zone_t *z = &c->zones[0];
    assert_string_equal(z->origin, "example.test");
    assert_string_equal(z->file, "/tmp/example.zone");
    assert_int_equal(z->format, CONFIG_ZONE_RFC1035);
    assert_int_equal(z->nprimaries, 0);
    assert_null(z->primaries);
    assert_int_equal(z->allow_transfer.n, 3);
    expect_prefix(&z->allow_transfer, 0, "192.0.2.0/24");
    expect_prefix(&z->allow_transfer, 1, "127.0.0.1/32");
    expect_prefix(&z->allow_transfer, 2, "2001:db8::/32");
    assert_int_equal(z->allow_notify.n, 0);
    assert_string_equal(z->transfer_key, "xfr-key");
    assert_int_equal(z->transfer_key_line, 11);
    assert_int_equal(z->nnotify, 6);
    expect_peer(&z->notify[0], "192.0.2.7", 53, NULL, 13);
    expect_peer(&z->notify[1], "192.0.2.8", 5300, NULL, 14);
    expect_peer(&z->notify[2], "2001:db8::53", 53, NULL, 15);
    expect_peer(&z->notify[3], "2001:db8::54", 5301, NULL, 16);
    expect_peer(&z->notify[4], "192.0.2.9", 53, "bind-key-1", 17);
    expect_peer(&z->notify[5], "192.0.2.10", 65535, "notify.key.", 18);
    assert_false(z->acl.enabled);
    assert_int_equal(z->ndnssec_keys, 0);

    /* a secondary zone with its on-disk copy */
    z = &c->zones[1];
    assert_string_equal(z->origin, "sec.test");
    assert_string_equal(z->file, "/tmp/sec.zone");
    assert_int_equal(z->format, CONFIG_ZONE_RFC1035);
    assert_int_equal(z->nprimaries, 3);
    expect_peer(&z->primaries[0], "192.0.2.1", 53, "xfr-key", 22);
    expect_peer(&z->primaries[1], "2001:db8::1", 53, NULL, 23);
    expect_peer(&z->primaries[2], "::ffff:192.0.2.2", 1, NULL, 24);
    assert_int_equal(z->allow_notify.n, 2);
    expect_prefix(&z->allow_notify, 0, "192.0.2.1");
    expect_prefix(&z->allow_notify, 1, "198.51.100.0/24");
    assert_int_equal(z->allow_transfer.n, 0);
    assert_null(z->transfer_key);
    assert_int_equal(z->nnotify, 0);
    assert_null(z->notify);

    /* a secondary zone without a file (kept in memory only), one primary as a mapping */
    z = &c->zones[2];
    assert_string_equal(z->origin, "sec2.test");
    assert_null(z->file);
    assert_int_equal(z->nprimaries, 1);
    expect_peer(&z->primaries[0], "127.0.0.1", 5353, "bind-key-2", 28);
    assert_int_equal(z->allow_notify.n, 0); /* default: the primaries (xfr.c) */

    /* the transfer settings of a zone served from Redis: no file, no primary */
    z = &c->zones[3];
    assert_string_equal(z->origin, "redis.test");
    assert_null(z->file);
    assert_int_equal(z->nprimaries, 0);
    assert_int_equal(z->allow_transfer.n, 1);
    expect_prefix(&z->allow_transfer, 0, "10.0.0.0/8");
    assert_int_equal(z->nnotify, 1);
    expect_peer(&z->notify[0], "10.0.0.53", 5300, NULL, 31);
    assert_string_equal(z->transfer_key, "BIND-KEY-2");
    assert_int_equal(z->transfer_key_line, 32);
    assert_false(z->acl.enabled);

    /* the six bounds, each at an end of its range */
    assert_int_equal(c->xfr_journal_versions, 0);
    assert_int_equal(c->xfr_journal_mib, 65536);
    assert_int_equal(c->xfr_max_mib, 1);
    assert_int_equal(c->xfr_notify_retries, 100);
    assert_int_equal(c->xfr_notify_timeout_ms, 10);
    assert_int_equal(c->xfr_timeout_ms, 3600000);
    assert_int_equal(config_line_of(c, "xfr_journal_versions"), 33);
    assert_int_equal(config_line_of(c, "xfr_timeout_ms"), 38);
}

static void test_defaults(void **state)
{
    (void)state;
    config_t c;
    config_init(&c);
    assert_int_equal(c.ntsig_keys, 0);
    assert_null(c.tsig_keys);
    assert_int_equal(c.xfr_journal_versions, 64);
    assert_int_equal(c.xfr_journal_mib, 64);
    assert_int_equal(c.xfr_max_mib, 1024);
    assert_int_equal(c.xfr_notify_retries, 5);
    assert_int_equal(c.xfr_notify_timeout_ms, 2000);
    assert_int_equal(c.xfr_timeout_ms, 10000);
    assert_int_equal(c.xfr_total_timeout_ms, 600000);
    assert_int_equal(c.xfr_in_concurrency, 8);
    config_free(&c);

    /* a plain zone has no transfer settings */
    c = load_text("zones: [{origin: a.test, file: a.zone}]\n");
    assert_int_equal(c.nzones, 1);
    const config_zone_t *z = &c.zones[0];
    assert_int_equal(z->nprimaries, 0);
    assert_int_equal(z->nnotify, 0);
    assert_int_equal(z->allow_transfer.n, 0);
    assert_int_equal(z->allow_notify.n, 0);
    assert_null(z->transfer_key);
    assert_int_equal(c.ntsig_keys, 0);
    assert_int_equal(c.xfr_journal_versions, 64);
    config_free(&c);

    /* ~ is none */
    c = load_text("tsig_keys: ~\ntsig_key_file: ~\n"
                  "zones: [{origin: a.test, file: a.zone, notify: ~, allow_transfer: ~}]\n");
    assert_int_equal(c.ntsig_keys, 0);
    assert_int_equal(c.zones[0].nnotify, 0);
    assert_int_equal(c.zones[0].allow_transfer.n, 0);
    config_free(&c);
}

static void test_full(void **state)
{
    (void)state;
    write_key_file(bind_keys);
    config_t c = load_fmt(full_fmt, key_base());
    expect_full(&c);
    config_free(&c);
    /* config_free() leaves c as after config_init() */
    assert_null(c.tsig_keys);
    assert_int_equal(c.ntsig_keys, 0);
    assert_null(c.zones);
    assert_int_equal(c.nzones, 0);
    assert_int_equal(c.xfr_journal_versions, 64);

    /* one key file by its absolute path (not a list); keys defined after the zones naming them */
    c = load_fmt("zones:\n"
                 "  - origin: a.test\n"
                 "    file: a.zone\n"
                 "    transfer_key: bind-key-1.\n"
                 "    notify: {address: \"192.0.2.1\", key: late}\n"
                 "  - origin: b.test\n"
                 "    primary: [{address: 192.0.2.2, key: BIND-KEY-2}]\n"
                 "tsig_key_file: %s\n"
                 "tsig_keys: [{name: late, algorithm: hmac-sha1, secret: \"" SECRET_MD5 "\"}]\n",
                 key_path);
    assert_int_equal(c.ntsig_keys, 3);
    expect_key(&c.tsig_keys[0], "bind-key-1", TSIG_ALG_HMAC_SHA256, SECRET_B1_RAW);
    expect_key(&c.tsig_keys[1], "bind-key-2", TSIG_ALG_HMAC_MD5, SECRET_MD5_RAW);
    expect_key(&c.tsig_keys[2], "late", TSIG_ALG_HMAC_SHA1, SECRET_MD5_RAW);
    assert_string_equal(c.zones[0].transfer_key, "bind-key-1.");
    expect_peer(&c.zones[0].notify[0], "192.0.2.1", 53, "late", 5);
    expect_peer(&c.zones[1].primaries[0], "192.0.2.2", 53, "BIND-KEY-2", 7);
    assert_null(c.zones[1].file);
    config_free(&c);
    unlink(key_path);
}

/* config_parse_xfr_peer() on its own. */
static void test_parse_peer(void **state)
{
    (void)state;
    config_xfr_peer_t p = {.key = NULL, .line = 7};
    assert_int_equal(config_parse_xfr_peer(&p, "192.0.2.1"), 0);
    expect_peer(&p, "192.0.2.1", 53, NULL, 7); /* line untouched */
    assert_int_equal(config_parse_xfr_peer(&p, "192.0.2.1@1"), 0);
    expect_peer(&p, "192.0.2.1", 1, NULL, 7);
    assert_int_equal(config_parse_xfr_peer(&p, "::1@65535"), 0);
    expect_peer(&p, "::1", 65535, NULL, 7);
    assert_int_equal(config_parse_xfr_peer(&p, "2001:db8::53"), 0);
    expect_peer(&p, "2001:db8::53", 53, NULL, 7);
    static const char *const bad[] = {
        "example.com", "1.2.3.4@0",  "1.2.3.4@70000", "1.2.3.4@", "@53",     "",
        "1.2.3.4@53x", "1.2.3.4@-1", "1.2.3.4:53",    "[::1]@53", "::1:53@", "1.2.3.4@053000",
        "1.2.3",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        if (config_parse_xfr_peer(&p, bad[i]) != TERN_EINVAL)
            fail_msg("\"%s\" was taken as a peer address", bad[i]);
}

/* The messages of a bad peer in each place a peer is given. */
#define BAD_PEER(got)                                                                              \
    "expected \"ADDR\" or \"ADDR@PORT\" with a numeric address (or {address, key}), got " got

static void test_peer_errors(void **state)
{
    (void)state;
    static const char *const bad[] = {"example.com", "1.2.3.4@0", "1.2.3.4@70000", "1.2.3.4@"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char text[256], msg[256];
        snprintf(text, sizeof(text),
                 "zones:\n  - origin: a.test\n    file: a.zone\n    notify: \"%s\"\n", bad[i]);
        snprintf(msg, sizeof(msg), "zones[0]: notify: " BAD_PEER("\"%s\""), bad[i]);
        expect_error(text, 4, msg);
        snprintf(text, sizeof(text),
                 "zones:\n  - origin: a.test\n    primary:\n      - 192.0.2.1\n"
                 "      - {address: \"%s\", key: k}\n",
                 bad[i]);
        snprintf(msg, sizeof(msg), "zones[0]: primary[1]: " BAD_PEER("\"%s\""), bad[i]);
        expect_error(text, 5, msg);
    }
    expect_error("zones:\n  - origin: a.test\n    file: a.zone\n    notify: [192.0.2.1, [1]]\n", 4,
                 "zones[0]: notify[1]: " BAD_PEER("a list"));
    expect_error("zones:\n  - origin: a.test\n    primary: {key: k}\n", 3,
                 "zones[0]: primary: missing \"address\" (\"ADDR\" or \"ADDR@PORT\" (numeric))");
    expect_error("zones:\n  - origin: a.test\n    primary: {address: 192.0.2.1, port: 53}\n", 3,
                 "zones[0]: primary: unknown key \"port\" (want address, key)");
    expect_error("zones:\n  - origin: a.test\n    primary:\n      address: 192.0.2.1\n"
                 "      key: \"\"\n",
                 5, "zones[0]: primary: key: expected a key name, got a string");
    expect_error("zones:\n  - origin: a.test\n    primary: []\n", 3,
                 "zones[0]: primary: expected at least one primary");
    /* more than 64 peers */
    char text[2048] = "zones:\n  - origin: a.test\n    file: a.zone\n    notify: [";
    for (int i = 0; i < 65; i++)
        snprintf(text + strlen(text), sizeof(text) - strlen(text), "%s192.0.2.%d", i ? ", " : "",
                 i + 1);
    strcat(text, "]\n");
    expect_error(text, 4, "zones[0]: notify: more than 64 peers");
}

static void test_key_errors(void **state)
{
    (void)state;
    expect_error("tsig_keys:\n  - {name: k, algorithm: hmac-sha3, secret: \"YQ==\"}\n", 2,
                 "tsig_keys[0]: unknown algorithm \"hmac-sha3\" (expected hmac-md5, hmac-sha1, "
                 "hmac-sha224, hmac-sha256, hmac-sha384 or hmac-sha512)");
    expect_error("tsig_keys:\n  - name: k\n    algorithm: hmac-sha256\n    secret: \"YQ=*\"\n", 2,
                 "tsig_keys[0]: bad base64 in secret: a character that is not base64");
    expect_error("tsig_keys:\n  - name: k\n    algorithm: hmac-sha256\n    secret: \"\"\n", 4,
                 "tsig_keys[0]: secret: expected a non-empty string, got a string");
    expect_error("tsig_keys:\n  - {name: k, algorithm: hmac-sha256}\n", 2,
                 "tsig_keys[0]: missing \"secret\" (the shared secret in base64)");
    expect_error("tsig_keys:\n  - {name: k, algorithm: hmac-sha256, secret: \"YQ==\", x: 1}\n", 2,
                 "tsig_keys[0]: unknown key \"x\" (want name, algorithm, secret)");
    expect_error("tsig_keys: {name: k}\n", 1,
                 "tsig_keys: expected a list of {name, algorithm, secret}, got a mapping");
    /* a key defined twice: inline, inline again with another spelling */
    expect_error("tsig_keys:\n"
                 "  - {name: xfr-key, algorithm: hmac-sha256, secret: \"YQ==\"}\n"
                 "  - {name: XFR-Key., algorithm: hmac-sha1, secret: \"YQ==\"}\n",
                 3, "tsig_keys[1]: key \"xfr-key\" is defined twice");

    /* inline, then the same name in a key file (and the other way round) */
    write_key_file(bind_keys);
    expect_error_fmt(3, "tsig_key_file: key \"bind-key-2\" is defined twice",
                     "tsig_keys:\n"
                     "  - {name: Bind-Key-2, algorithm: hmac-sha256, secret: \"YQ==\"}\n"
                     "tsig_key_file: %s\n",
                     key_base());
    expect_error_fmt(2, "tsig_keys[0]: key \"bind-key-1\" is defined twice",
                     "tsig_key_file: [%s]\n"
                     "tsig_keys: [{name: bind-key-1, algorithm: hmac-sha256, secret: \"YQ==\"}]\n",
                     key_base());
    /* the same file twice */
    expect_error_fmt(1, "tsig_key_file: key \"bind-key-1\" is defined twice",
                     "tsig_key_file: [%s, %s]\n", key_base(), key_path);
    unlink(key_path);

    /* a missing key file, a directory, a file that is not a key file, one without keys */
    {
        char msg[512];
        snprintf(msg, sizeof(msg), "tsig_key_file: %s: No such file or directory", key_path);
        expect_error_fmt(2, msg, "zones: [{origin: a.test, file: a.zone}]\ntsig_key_file: %s\n",
                         key_path);
    }
    write_key_file("$ORIGIN example.test.\n@ SOA ns1 hostmaster 1 2 3 4 5\n");
    {
        char msg[512];
        snprintf(msg, sizeof(msg), "tsig_key_file: %s:1: expected a key statement, got $ORIGIN",
                 key_path);
        expect_error_fmt(1, msg, "tsig_key_file: %s\n", key_base());
    }
    unlink(key_path);
    write_key_file("# nothing yet\n// still nothing\n");
    {
        char msg[512];
        snprintf(msg, sizeof(msg), "tsig_key_file: %s: no key in the file", key_base());
        expect_error_fmt(1, msg, "tsig_key_file: %s\n", key_base());
    }
    unlink(key_path);
    write_key_file("key \"k\" {\n  algorithm hmac-sha256;\n  secret \"YQ=*\";\n};\n");
    {
        char msg[512];
        snprintf(msg, sizeof(msg),
                 "tsig_key_file: %s:3: key \"k\": bad base64 in secret: "
                 "a character that is not base64",
                 key_path);
        expect_error_fmt(1, msg, "tsig_key_file: [%s]\n", key_base());
    }
    unlink(key_path);
    expect_error("tsig_key_file: [\"\"]\n", 1,
                 "tsig_key_file: expected a key file name, got a string");
}

/* A zone naming a key no tsig_keys or key file defines: the line of that name, checked after
 * the whole file. */
static void test_undefined_keys(void **state)
{
    (void)state;
    static const char keys[] =
        "tsig_keys: [{name: known, algorithm: hmac-sha256, secret: \"" SECRET_XFR "\"}]\n";
    expect_error_fmt(4,
                     "zone sec.test: primary: no TSIG key \"nokey\" in tsig_keys or "
                     "tsig_key_file",
                     "%szones:\n"
                     "  - origin: sec.test\n"
                     "    primary: [192.0.2.1, {address: 192.0.2.2, key: nokey}]\n",
                     keys);
    expect_error_fmt(6, "zone a.test: notify: no TSIG key \"other\" in tsig_keys or tsig_key_file",
                     "zones:\n"
                     "  - origin: a.test\n"
                     "    file: a.zone\n"
                     "    notify:\n"
                     "      - {address: 192.0.2.1, key: known}\n"
                     "      - {address: 192.0.2.2, key: other}\n"
                     "%s",
                     keys);
    expect_error_fmt(5,
                     "zone a.test: transfer_key: no TSIG key \"nokey\" in tsig_keys or "
                     "tsig_key_file",
                     "zones:\n"
                     "  - origin: a.test\n"
                     "    file: a.zone\n"
                     "    allow_transfer: 192.0.2.0/24\n"
                     "    transfer_key: nokey\n"
                     "%s",
                     keys);
    /* the settings-only entry too */
    expect_error_fmt(4,
                     "zone r.test: transfer_key: no TSIG key \"x\" in tsig_keys or "
                     "tsig_key_file",
                     "zones:\n"
                     "  - origin: r.test\n"
                     "    notify: 192.0.2.1\n"
                     "    transfer_key: x\n");
    expect_error("zones:\n  - origin: a.test\n    file: a.zone\n    transfer_key: [k]\n", 4,
                 "zones[0]: transfer_key: expected a key name, got a list");
    /* the check is config_xfr_check(): on its own too */
    config_t c;
    char err[256];
    config_init(&c);
    assert_int_equal(config_add_zone(&c, "a.test", "a.zone"), 0);
    assert_int_equal(config_xfr_check(&c, "x.yaml", err, sizeof(err)), 0);
    c.zones[0].transfer_key = strdup("k");
    c.zones[0].transfer_key_line = 9;
    assert_int_equal(config_xfr_check(&c, "x.yaml", err, sizeof(err)), TERN_EINVAL);
    assert_string_equal(err, "x.yaml:9: zone a.test: transfer_key: no TSIG key \"k\" in "
                             "tsig_keys or tsig_key_file");
    config_free(&c);
}

static void test_zone_errors(void **state)
{
    (void)state;
    expect_error("zones:\n  - origin: a.test\n    file: a.zone\n    allow_notify: 192.0.2.1\n", 4,
                 "zones[0]: allow_notify: only a secondary zone (with primary) takes NOTIFY");
    expect_error("zones:\n  - origin: a.test\n    primary: 192.0.2.1\n    allow_notify: [bad]\n", 4,
                 "zones[0]: allow_notify[0]: bad prefix \"bad\": not an IPv4 or IPv6 address (want "
                 "ADDR or ADDR/LEN)");
    expect_error("zones:\n  - origin: a.test\n    file: a.zone\n    allow_transfer: 192.0.2.1/24\n",
                 4,
                 "zones[0]: allow_transfer: bad prefix \"192.0.2.1/24\": host bits set; did you "
                 "mean 192.0.2.0/24?");
    expect_error("zones:\n"
                 "  - origin: sec.test\n"
                 "    primary: 192.0.2.1\n"
                 "    dnssec: {keys: [Ksec.test.+013+12345]}\n",
                 4,
                 "zones[0]: dnssec: a secondary zone is served as transferred (sign it on the "
                 "primary)");
    expect_error("zones:\n"
                 "  - origin: sec.test\n"
                 "    primary: 192.0.2.1\n"
                 "    file: sec.zone\n"
                 "    format: json\n",
                 5, "zones[0]: a secondary zone's copy is a master file (format rfc1035)");
    expect_error("zones:\n"
                 "  - origin: sec.test\n"
                 "    primary: 192.0.2.1\n"
                 "    file: sec.json\n",
                 4, "zones[0]: a secondary zone's copy is a master file (format rfc1035)");
    /* neither file nor primary nor transfer settings */
    expect_error("zones:\n  - origin: a.test\n", 2,
                 "zones[0]: missing \"file\" (master file (RFC 1035) or redins JSON, relative "
                 "to the config file's directory (a secondary zone's on-disk copy, optional))");
    expect_error("zones:\n  - origin: a.test\n    transfer_key: k\n", 2,
                 "zones[0]: missing \"file\" (master file (RFC 1035) or redins JSON, relative "
                 "to the config file's directory (a secondary zone's on-disk copy, optional))");
    /* a settings-only entry holds nothing but transfer settings */
    static const char *const extra[] = {
        "acl: {allow: [10.0.0.0/8]}",
        "dnssec: {keys: [Kr.test.+013+12345]}",
        "format: rfc1035",
    };
    for (size_t i = 0; i < sizeof(extra) / sizeof(extra[0]); i++) {
        char text[256];
        snprintf(text, sizeof(text),
                 "zones:\n  - origin: r.test\n    allow_transfer: 10.0.0.0/8\n    %s\n", extra[i]);
        expect_error(text, 2,
                     "zones[0]: a zone entry without file or primary only holds transfer and "
                     "update settings (for a zone from Redis): no acl, dnssec or format");
    }
}

static void test_bounds(void **state)
{
    (void)state;
    static const struct {
        const char *text, *msg;
    } bad[] = {
        {"xfr_journal_versions: 1000001\n",
         "xfr_journal_versions: 1000001 is out of range 0..1000000"},
        {"xfr_journal_versions: -1\n", "xfr_journal_versions: -1 is out of range 0..1000000"},
        {"xfr_journal_mib: 0\n", "xfr_journal_mib: 0 is out of range 1..65536"},
        {"xfr_journal_mib: 65537\n", "xfr_journal_mib: 65537 is out of range 1..65536"},
        {"xfr_max_mib: 0\n", "xfr_max_mib: 0 is out of range 1..1048576"},
        {"xfr_max_mib: 1048577\n", "xfr_max_mib: 1048577 is out of range 1..1048576"},
        {"xfr_notify_retries: 0\n", "xfr_notify_retries: 0 is out of range 1..100"},
        {"xfr_notify_retries: 101\n", "xfr_notify_retries: 101 is out of range 1..100"},
        {"xfr_notify_timeout_ms: 9\n", "xfr_notify_timeout_ms: 9 is out of range 10..600000"},
        {"xfr_notify_timeout_ms: 600001\n",
         "xfr_notify_timeout_ms: 600001 is out of range 10..600000"},
        {"xfr_timeout_ms: 99\n", "xfr_timeout_ms: 99 is out of range 100..3600000"},
        {"xfr_timeout_ms: 3600001\n", "xfr_timeout_ms: 3600001 is out of range 100..3600000"},
        {"xfr_timeout_ms: \"1000\"\n", "xfr_timeout_ms: expected an integer, got \"1000\""},
        {"xfr_total_timeout_ms: 999\n", "xfr_total_timeout_ms: 999 is out of range 1000..86400000"},
        {"xfr_in_concurrency: 0\n", "xfr_in_concurrency: 0 is out of range 1..64"},
        {"xfr_in_concurrency: 65\n", "xfr_in_concurrency: 65 is out of range 1..64"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char text[128];
        snprintf(text, sizeof(text), "workers: 1\n%s", bad[i].text);
        expect_error(text, 2, bad[i].msg);
    }
    /* the other ends of the ranges */
    config_t c = load_text("xfr_journal_versions: 1000000\nxfr_journal_mib: 1\n"
                           "xfr_max_mib: 1048576\nxfr_notify_retries: 1\n"
                           "xfr_notify_timeout_ms: 600000\nxfr_timeout_ms: 100\n"
                           "xfr_total_timeout_ms: 86400000\nxfr_in_concurrency: 64\n");
    assert_int_equal(c.xfr_journal_versions, 1000000);
    assert_int_equal(c.xfr_journal_mib, 1);
    assert_int_equal(c.xfr_max_mib, 1048576);
    assert_int_equal(c.xfr_notify_retries, 1);
    assert_int_equal(c.xfr_notify_timeout_ms, 600000);
    assert_int_equal(c.xfr_timeout_ms, 100);
    assert_int_equal(c.xfr_total_timeout_ms, 86400000);
    assert_int_equal(c.xfr_in_concurrency, 64);
    config_free(&c);
}

/* A copy owns everything: the original freed (its memory poisoned under ASan), the copy still
 * holds every value; then the copy is freed, and the original (refilled) is copied again over a
 * config_init()ed one. */
static void test_copy_free(void **state)
{
    (void)state;
    write_key_file(bind_keys);
    config_t c = load_fmt(full_fmt, key_base());
    unlink(key_path);
    config_t d;
    assert_int_equal(config_copy(&d, &c), 0);
    assert_ptr_not_equal(d.tsig_keys, c.tsig_keys);
    assert_ptr_not_equal(d.zones, c.zones);
    for (size_t i = 0; i < c.nzones; i++) {
        const config_zone_t *a = &c.zones[i], *b = &d.zones[i];
        if (a->nnotify)
            assert_ptr_not_equal(a->notify, b->notify);
        for (size_t k = 0; k < a->nnotify; k++)
            if (a->notify[k].key)
                assert_ptr_not_equal(a->notify[k].key, b->notify[k].key);
        if (a->nprimaries)
            assert_ptr_not_equal(a->primaries, b->primaries);
        for (size_t k = 0; k < a->nprimaries; k++)
            if (a->primaries[k].key)
                assert_ptr_not_equal(a->primaries[k].key, b->primaries[k].key);
        if (a->allow_transfer.n)
            assert_ptr_not_equal(a->allow_transfer.p, b->allow_transfer.p);
        if (a->allow_notify.n)
            assert_ptr_not_equal(a->allow_notify.p, b->allow_notify.p);
        if (a->transfer_key)
            assert_ptr_not_equal(a->transfer_key, b->transfer_key);
    }
    config_free(&c);
    expect_full(&d); /* reads only d's own memory: a shared pointer is a use-after-free here */
    assert_int_equal(config_copy(&c, &d), 0);
    config_free(&d);
    expect_full(&c);
    config_init(&d);
    assert_int_equal(config_copy(&d, &c), 0);
    config_free(&c);
    expect_full(&d);
    config_free(&d);
    /* a config without any transfer settings copies to one without */
    c = load_text("zones: [{origin: a.test, file: a.zone}]\n");
    assert_int_equal(config_copy(&d, &c), 0);
    assert_null(d.tsig_keys);
    assert_null(d.zones[0].notify);
    assert_null(d.zones[0].primaries);
    assert_null(d.zones[0].allow_transfer.p);
    assert_null(d.zones[0].transfer_key);
    config_free(&c);
    config_free(&d);
}

/* allow_update: key names and {key, address} rules, kept and copied; the errors name the line. */
static void test_allow_update(void **state)
{
    (void)state;
    config_t c = load_text("tsig_keys:\n  - {name: k1, algorithm: hmac-sha256, secret: \"YQ==\"}\n"
                           "update_rate: 7\nzonefile_sync: 60\n"
                           "zones:\n  - origin: a.test\n    file: a.zone\n"
                           "    allow_update: [k1, {key: k1., address: [192.0.2.0/24]}, "
                           "{address: 127.0.0.1}]\n  - origin: b.test\n    file: b.zone\n");
    assert_int_equal(c.nzones, 2);
    const config_zone_t *z = &c.zones[0];
    assert_int_equal(z->nallow_update, 3);
    assert_string_equal(z->allow_update[0].key, "k1");
    assert_int_equal(z->allow_update[0].addresses.n, 0);
    assert_string_equal(z->allow_update[1].key, "k1.");
    assert_int_equal(z->allow_update[1].addresses.n, 1);
    assert_null(z->allow_update[2].key);
    assert_int_equal(z->allow_update[2].addresses.n, 1);
    assert_int_equal(c.zones[1].nallow_update, 0);
    assert_int_equal(c.update_rate, 7);
    assert_int_equal(c.zonefile_sync, 60);
    assert_int_equal(c.update_max_records, 1000);
    config_t d;
    config_init(&d);
    assert_int_equal(config_copy(&d, &c), 0);
    assert_int_equal(d.zones[0].nallow_update, 3);
    assert_ptr_not_equal(d.zones[0].allow_update[1].key, z->allow_update[1].key);
    assert_string_equal(d.zones[0].allow_update[1].key, "k1.");
    config_free(&d);
    config_free(&c);

    expect_error("zones:\n  - origin: a.test\n    file: a.zone\n    allow_update: [nokey]\n", 4,
                 "zone a.test: allow_update: no TSIG key \"nokey\" in tsig_keys or tsig_key_file");
    expect_error("zones:\n  - origin: a.test\n    file: a.zone\n    allow_update: [{}]\n", 4,
                 "zones[0]: allow_update[0]: a rule gives a key, an address, or both");
    expect_error("zones:\n  - origin: a.test\n    file: a.zone\n"
                 "    allow_update: [{address: []}]\n",
                 4,
                 "zones[0]: allow_update[0]: address: an empty list would let nobody in; leave "
                 "the rule out");
    expect_error("zones:\n  - origin: a.test\n    primary: 192.0.2.1\n"
                 "    allow_update: [{address: 127.0.0.1}]\n",
                 4, "zones[0]: allow_update: a secondary zone is changed on its primary");
    expect_error("zones:\n  - origin: a.test\n    file: a.json\n"
                 "    allow_update: [{address: 127.0.0.1}]\n",
                 4,
                 "zones[0]: allow_update: only a master-file zone takes updates (its journal "
                 "is replayed over the file); a redins JSON file does not");
    expect_error("update_rate: 0\n", 1, "update_rate: 0 is out of range 1..100000");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults),    cmocka_unit_test(test_full),
        cmocka_unit_test(test_parse_peer),  cmocka_unit_test(test_peer_errors),
        cmocka_unit_test(test_key_errors),  cmocka_unit_test(test_undefined_keys),
        cmocka_unit_test(test_zone_errors), cmocka_unit_test(test_bounds),
        cmocka_unit_test(test_copy_free),   cmocka_unit_test(test_allow_update),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
