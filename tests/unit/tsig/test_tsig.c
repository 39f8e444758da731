/*
 * test_tsig.c — TSIG (RFC 8945): keys and both sides of signing, with real peers as oracles.
 *
 *   keys     tsig_key_init() and BIND key statements: several keys with every comment style,
 *            the output of tsig-keygen (or rndc-confgen -a, which writes the same statement,
 *            when bind9's tsig-keygen is not installed) and its text by hand; exact
 *            "file:line: message" errors.
 *   self     our client against our server for every algorithm; Original ID; BADKEY, BADSIG,
 *            BADTIME, BADTRUNC answers and how the client reports them; truncated MACs; unsigned
 *            messages between signed ones (built with a reference HMAC written here from
 *            §5.3.1); room (tsig_rr_size()); misuse of the API.
 *   hostile  tsig_find() and both verifiers on truncated, misplaced, doubled and garbled TSIGs,
 *            compression loops, and 20,000 random mutations (run it under ASan).
 *   ldns     ldns signs, we verify, and the other way round, for the algorithms ldns 1.8 has
 *            (MD5, SHA-1, SHA-256, SHA-512), including the timers-only MACs of later messages.
 *   knotd    a real knotd with a key and an ACL: a signed AXFR of ~2,000 records over several
 *            TCP messages verified message by message; a wrong secret (BADSIG), an unknown key
 *            (BADKEY), a skewed clock (BADTIME) reported distinctly; tampered replays.
 *   kdig     our server (a thread here, UDP and TCP) answering kdig -y: every algorithm, wrong
 *            keys answered NOTAUTH with BADSIG/BADKEY, a signed BADTIME kdig verifies, a
 *            5-message AXFR that kdig and BIND's dig accept, a corrupted MAC in message 1 that
 *            kdig rejects and one in message 3 that dig catches (kdig 3.2 checks only the first
 *            message of a transfer; dig checks every one).
 * Every wait is bounded. Fails without knotd, kdig or dig (test dependencies, not optional).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <ldns/ldns.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "knot_server.h"
#include "test_util.h"

#include "tern/common/err.h"
#include "tern/wire/dname.h"
#include "tern/wire/rr.h"
#include "tern/tsig/tsig.h"

/* How long a peer may take to start, answer, or exit. */
#define PEER_WAIT_MS 5000

/* 32 bytes, as tsig-keygen makes for hmac-sha256; and another one for "wrong secret" */
static const char SECRET[] = "3zUwNDqDGavYwAkDxajEjF+lqeZvfBQHk5iU0j/aRFU=";
static const char OTHER_SECRET[] = "Zm9vYmFyYmF6cXV4Zm9vYmFyYmF6cXV4Zm9vYmFyYmE=";

static const char *const ALGS[] = {"hmac-md5",    "hmac-sha1",   "hmac-sha224",
                                   "hmac-sha256", "hmac-sha384", "hmac-sha512"};

/* ---- helpers ---- */

static tsig_key_t make_key(const char *name, const char *alg, const char *secret)
{
    tsig_key_t k;
    char err[256] = "";
    if (tsig_key_init(&k, name, alg, secret, err, sizeof(err)) != 0)
        fail_msg("tsig_key_init(%s, %s): %s", name, alg, err);
    return k;
}

static uint16_t get16(const uint8_t *p)
{
    return (uint16_t)(p[0] << 8 | p[1]);
}

static void put16(uint8_t *p, unsigned v)
{
    p[0] = (uint8_t)(v >> 8);
    p[1] = (uint8_t)v;
}

/* A query (opcode QUERY, RD clear) for name/qtype IN into buf; returns its length. */
static size_t make_query(uint8_t *buf, uint16_t id, const char *name, uint16_t qtype)
{
    memset(buf, 0, 12);
    put16(buf, id);
    put16(buf + 4, 1);
    const char *why;
    int n = dname_from_str(name, strlen(name), false, buf + 12, &why);
    assert_true(n > 0);
    put16(buf + 12 + n, qtype);
    put16(buf + 14 + n, WIRE_CLASS_IN);
    return 12 + (size_t)n + 4;
}

/* Offset just past the question of msg (one uncompressed name + type + class), 0 if none. */
static size_t question_end(const uint8_t *msg, size_t len)
{
    size_t p = 12;
    if (len < 12 || get16(msg + 4) != 1)
        return 0;
    while (p < len && msg[p] != 0) {
        if (msg[p] > 63)
            return 0;
        p += msg[p] + 1u;
    }
    return p + 5 <= len ? p + 5 : 0;
}

/* Start a response to query q (header and question copied, QR and AA set, counts 0 but QD). */
static size_t resp_begin(uint8_t *out, const uint8_t *q, size_t qend)
{
    memcpy(out, q, qend);
    out[2] = (uint8_t)(0x84 | (q[2] & 0x79)); /* QR, opcode and RD from the query, AA */
    out[3] = 0;
    put16(out + 6, 0);
    put16(out + 8, 0);
    put16(out + 10, 0);
    return qend;
}

/* Append an answer RR: owner = optional label + pointer to the question name (offset 12). */
static size_t add_answer(uint8_t *m, size_t len, const char *label, uint16_t type,
                         const uint8_t *rdata, size_t rdlen)
{
    if (label) {
        m[len++] = (uint8_t)strlen(label);
        memcpy(m + len, label, strlen(label));
        len += strlen(label);
    }
    m[len++] = 0xC0;
    m[len++] = 12;
    put16(m + len, type);
    put16(m + len + 2, WIRE_CLASS_IN);
    put16(m + len + 4, 0);
    put16(m + len + 6, 3600);
    put16(m + len + 8, (unsigned)rdlen);
    memcpy(m + len + 10, rdata, rdlen);
    len += 10 + rdlen;
    put16(m + 6, get16(m + 6) + 1u);
    return len;
}

/* SOA RDATA of big.test (names uncompressed). */
static size_t soa_rdata(uint8_t *rd)
{
    static const uint8_t soa[] = {2,   'n', 's', 3,    'b', 'i',  'g',  4,   't', 'e', 's',  't',
                                  0,   4,   'h', 'o',  's', 't',  3,    'b', 'i', 'g', 4,    't',
                                  'e', 's', 't', 0,    0,   0,    0,    1,   0,   0,   0x1c, 0x20,
                                  0,   0,   3,   0x84, 0,   0x12, 0x75, 0,   0,   0,   1,    0x2c};
    memcpy(rd, soa, sizeof(soa));
    return sizeof(soa);
}

/* A response to q with n TXT answers (owner "rK" under the question's name, K from first). */
static size_t make_txt_response(uint8_t *out, const uint8_t *q, size_t qlen, unsigned first,
                                unsigned n, bool soa_first, bool soa_last)
{
    size_t qend = question_end(q, qlen);
    assert_true(qend > 0);
    size_t len = resp_begin(out, q, qend);
    uint8_t rd[256];
    if (soa_first)
        len = add_answer(out, len, NULL, WIRE_T_SOA, rd, soa_rdata(rd));
    for (unsigned i = first; i < first + n; i++) {
        char label[16], text[120];
        snprintf(label, sizeof(label), "r%u", i);
        int tl = snprintf(text, sizeof(text), "record %u of a transfer signed with TSIG", i);
        rd[0] = (uint8_t)tl;
        memcpy(rd + 1, text, (size_t)tl);
        len = add_answer(out, len, label, WIRE_T_TXT, rd, (size_t)tl + 1);
    }
    if (soa_last)
        len = add_answer(out, len, NULL, WIRE_T_SOA, rd, soa_rdata(rd));
    return len;
}

/* Reference HMAC (libcrypto's one-shot HMAC(), independent of tsig.c's EVP_MAC use). */
static const EVP_MD *ref_md(int alg)
{
    switch (alg) {
    case TSIG_ALG_HMAC_MD5:
        return EVP_md5();
    case TSIG_ALG_HMAC_SHA1:
        return EVP_sha1();
    case TSIG_ALG_HMAC_SHA224:
        return EVP_sha224();
    case TSIG_ALG_HMAC_SHA256:
        return EVP_sha256();
    case TSIG_ALG_HMAC_SHA384:
        return EVP_sha384();
    default:
        return EVP_sha512();
    }
}

/* The TSIG RR's MAC in a message tsig_find() accepts, into mac (returns its length). */
static size_t tsig_mac_of(const uint8_t *msg, size_t len, uint8_t *mac)
{
    tsig_rr_t rr;
    assert_int_equal(tsig_find(msg, len, &rr), 0);
    assert_true(rr.present);
    memcpy(mac, rr.mac, rr.mac_len);
    return rr.mac_len;
}

/* ---- keys ---- */

static void test_key_init(void **state)
{
    (void)state;
    tsig_key_t k;
    char err[256];
    assert_int_equal(tsig_key_init(&k, "Xfr.KEY.", "HMAC-SHA256.", "c2VjcmV0", err, sizeof(err)),
                     0);
    assert_string_equal(k.name, "xfr.key");
    assert_int_equal(k.wire_len, 9);
    assert_memory_equal(k.wire, "\x03xfr\x03key", 9);
    assert_int_equal(k.alg, TSIG_ALG_HMAC_SHA256);
    assert_int_equal(k.secret_len, 6);
    assert_memory_equal(k.secret, "secret", 6);
    /* blanks inside the base64 are skipped, as BIND does */
    assert_int_equal(tsig_key_init(&k, "a", "hmac-sha1", " c2Vj\ncmV0 ", err, sizeof(err)), 0);
    assert_int_equal(k.secret_len, 6);
    assert_int_equal(tsig_key_init(&k, "a", "hmac-sha1", "YQ==", err, sizeof(err)), 0);
    assert_int_equal(k.secret_len, 1);
    assert_int_equal(tsig_key_init(&k, "a", "hmac-sha1", "YWI=", err, sizeof(err)), 0);
    assert_int_equal(k.secret_len, 2);
    /* every algorithm, by each of its names */
    static const struct {
        const char *name;
        int alg;
        size_t mac;
    } names[] = {
        {"hmac-md5", TSIG_ALG_HMAC_MD5, 16},
        {"HMAC-MD5.SIG-ALG.REG.INT", TSIG_ALG_HMAC_MD5, 16},
        {"hmac-md5.sig-alg.reg.int.", TSIG_ALG_HMAC_MD5, 16},
        {"hmac-sha1", TSIG_ALG_HMAC_SHA1, 20},
        {"Hmac-Sha224.", TSIG_ALG_HMAC_SHA224, 28},
        {"hmac-sha256", TSIG_ALG_HMAC_SHA256, 32},
        {"HMAC-SHA384", TSIG_ALG_HMAC_SHA384, 48},
        {"hmac-sha512.", TSIG_ALG_HMAC_SHA512, 64},
    };
    for (size_t i = 0; i < TERN_ARRAY_SIZE(names); i++) {
        assert_int_equal(tsig_alg_from_name(names[i].name), names[i].alg);
        assert_int_equal(tsig_alg_mac_len(names[i].alg), names[i].mac);
    }
    assert_string_equal(tsig_alg_name(TSIG_ALG_HMAC_MD5), "hmac-md5.sig-alg.reg.int");
    assert_int_equal(tsig_alg_from_name("hmac-sha3"), TSIG_ALG_NONE);
    assert_int_equal(tsig_alg_from_name("hmac-md5.sig-alg"), TSIG_ALG_NONE);
    assert_int_equal(tsig_alg_from_name(""), TSIG_ALG_NONE);
}

static void expect_key_error(const char *name, const char *alg, const char *secret,
                             const char *want)
{
    tsig_key_t k;
    char err[256] = "";
    memset(&k, 0x5a, sizeof(k));
    assert_int_equal(tsig_key_init(&k, name, alg, secret, err, sizeof(err)), TERN_EINVAL);
    assert_string_equal(err, want);
    assert_int_equal(k.secret_len, 0); /* cleansed */
}

static void test_key_init_errors(void **state)
{
    (void)state;
    expect_key_error("a..b", "hmac-sha256", "c2VjcmV0",
                     "bad key name \"a..b\": empty label in name");
    expect_key_error("", "hmac-sha256", "c2VjcmV0", "empty key name");
    expect_key_error(".", "hmac-sha256", "c2VjcmV0", "bad key name \".\": the root");
    expect_key_error("a", "hmac-sha3", "c2VjcmV0",
                     "unknown algorithm \"hmac-sha3\" (expected hmac-md5, hmac-sha1, "
                     "hmac-sha224, hmac-sha256, hmac-sha384 or hmac-sha512)");
    expect_key_error("a", "hmac-sha1", "c2VjcmV",
                     "bad base64 in secret: its length is not a multiple of 4 (cut short?)");
    expect_key_error("a", "hmac-sha1", "c2V!cmV0",
                     "bad base64 in secret: a character that is not base64");
    expect_key_error("a", "hmac-sha1", "c=Vj", "bad base64 in secret: '=' where data should be");
    expect_key_error("a", "hmac-sha1", "YQ==YQ==",
                     "bad base64 in secret: data after the '=' "
                     "padding");
    expect_key_error("a", "hmac-sha1", "YW=j", "bad base64 in secret: data after the '=' padding");
    expect_key_error("a", "hmac-sha1", "", "empty secret");
    expect_key_error("a", "hmac-sha1", "  \n", "empty secret");
    /* 200 bytes of secret */
    uint8_t raw[200];
    char b64[300];
    memset(raw, 7, sizeof(raw));
    EVP_EncodeBlock((unsigned char *)b64, raw, sizeof(raw));
    expect_key_error("a", "hmac-sha1", b64, "secret too long (200 bytes, at most 128)");
    /* 128 bytes is fine */
    EVP_EncodeBlock((unsigned char *)b64, raw, 128);
    tsig_key_t k;
    char err[256];
    assert_int_equal(tsig_key_init(&k, "a", "hmac-sha512", b64, err, sizeof(err)), 0);
    assert_int_equal(k.secret_len, 128);
}

/* Decode base64 with libcrypto as an independent check of what the parser decoded. */
static size_t ref_b64(const char *s, uint8_t *out)
{
    size_t len = strlen(s);
    int n = EVP_DecodeBlock(out, (const unsigned char *)s, (int)len);
    assert_true(n >= 0);
    size_t pad = len >= 2 && s[len - 2] == '=' ? 2 : len >= 1 && s[len - 1] == '=' ? 1 : 0;
    return (size_t)n - pad;
}

static void expect_key(const tsig_key_t *k, const char *name, int alg, const char *b64)
{
    uint8_t raw[256];
    size_t n = ref_b64(b64, raw);
    assert_string_equal(k->name, name);
    assert_int_equal(k->alg, alg);
    assert_int_equal(k->secret_len, n);
    assert_memory_equal(k->secret, raw, n);
}

static void test_bind_several(void **state)
{
    (void)state;
    static const char text[] = "# keys for the fleet\n"
                               "key \"xfr.key\" {\n"
                               "\talgorithm hmac-sha256;  // the usual one\n"
                               "\tsecret \"3zUwNDqDGavYwAkDxajEjF+lqeZvfBQHk5iU0j/aRFU=\";\n"
                               "};\n"
                               "/* an old peer,\n"
                               "   still on MD5 */\n"
                               "key Notify.Key. { algorithm \"HMAC-MD5.SIG-ALG.REG.INT\";\n"
                               "  secret \"c2VjcmV0LWtleS0xMjM0NTY3ODkwYWJjZGVm\"; };\n"
                               "key \"k3\"{algorithm hmac-sha512;secret \"YWJj\";};# tight\n"
                               "KEY k4 {\n"
                               "   secret \"YWJj ZGVm\";   # blanks in the base64\n"
                               "   algorithm hmac-sha1;\n"
                               "};\n";
    tsig_key_t *keys = NULL;
    size_t n = 0;
    char err[256] = "";
    assert_int_equal(tsig_keys_parse_bind(text, "keys.conf", &keys, &n, err, sizeof(err)), 0);
    assert_int_equal(n, 4);
    expect_key(&keys[0], "xfr.key", TSIG_ALG_HMAC_SHA256, SECRET);
    expect_key(&keys[1], "notify.key", TSIG_ALG_HMAC_MD5, "c2VjcmV0LWtleS0xMjM0NTY3ODkwYWJjZGVm");
    expect_key(&keys[2], "k3", TSIG_ALG_HMAC_SHA512, "YWJj");
    expect_key(&keys[3], "k4", TSIG_ALG_HMAC_SHA1, "YWJjZGVm");
    free(keys);
    /* nothing but comments: no keys, no error */
    assert_int_equal(
        tsig_keys_parse_bind("# none\n/* */ // x\n", "e.conf", &keys, &n, err, sizeof(err)), 0);
    assert_int_equal(n, 0);
    assert_null(keys);
}

/* The whole of a small file into a malloc'd string. */
static char *read_text(const char *path)
{
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    char *buf = malloc(1 << 20);
    assert_non_null(buf);
    size_t n = fread(buf, 1, (1 << 20) - 1, f);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

/* The quoted secret of the first `secret "..."` in text. */
static void secret_of(const char *text, char *out, size_t outlen)
{
    const char *s = strstr(text, "secret \"");
    assert_non_null(s);
    s += 8;
    const char *e = strchr(s, '"');
    assert_non_null(e);
    assert_true((size_t)(e - s) < outlen);
    memcpy(out, s, (size_t)(e - s));
    out[e - s] = '\0';
}

static void test_bind_generated(void **state)
{
    (void)state;
    tsig_key_t *keys = NULL;
    size_t n = 0;
    char err[256] = "", secret[256];
    /* tsig-keygen's output, by hand (BIND 9.18 `tsig-keygen -a hmac-sha256 xfr.key`) */
    static const char keygen[] = "key \"xfr.key\" {\n"
                                 "\talgorithm hmac-sha256;\n"
                                 "\tsecret \"3zUwNDqDGavYwAkDxajEjF+lqeZvfBQHk5iU0j/aRFU=\";\n"
                                 "};\n";
    assert_int_equal(tsig_keys_parse_bind(keygen, "k.conf", &keys, &n, err, sizeof(err)), 0);
    assert_int_equal(n, 1);
    expect_key(&keys[0], "xfr.key", TSIG_ALG_HMAC_SHA256, SECRET);
    free(keys);

    /* and written by BIND itself: tsig-keygen if installed, else rndc-confgen -a (same key
     * statement, from the bind9-utils package) */
    char prog[256], dir[64], cmd[1024], path[128];
    tu_mkdtemp(dir, sizeof(dir), "tern-tsig-keys");
    snprintf(path, sizeof(path), "%s/gen.key", dir);
    for (size_t a = 1; a < TERN_ARRAY_SIZE(ALGS); a++) { /* sha1..sha512 (BIND has no md5 keys) */
        if (tu_find_program("tsig-keygen", prog, sizeof(prog)))
            snprintf(cmd, sizeof(cmd), "'%s' -a %s Gen.Key > '%s' 2>/dev/null", prog, ALGS[a],
                     path);
        else if (tu_find_program("rndc-confgen", prog, sizeof(prog)))
            snprintf(cmd, sizeof(cmd),
                     "rm -f '%s'; '%s' -a -A %s -k Gen.Key -c '%s' >/dev/null 2>&1", path, prog,
                     ALGS[a], path);
        else
            fail_msg("neither tsig-keygen nor rndc-confgen (install bind9-utils)");
        assert_int_equal(system(cmd), 0);
        char *text = read_text(path);
        secret_of(text, secret, sizeof(secret));
        assert_int_equal(tsig_keys_parse_bind(text, path, &keys, &n, err, sizeof(err)), 0);
        assert_int_equal(n, 1);
        expect_key(&keys[0], "gen.key", tsig_alg_from_name(ALGS[a]), secret);
        assert_true(keys[0].secret_len >= 16);
        free(keys);
        free(text);
    }
    tu_rmtree(dir);
}

static void expect_bind_error(const char *text, int code, const char *want)
{
    tsig_key_t *keys = (tsig_key_t *)1;
    size_t n = 99;
    char err[512] = "";
    assert_int_equal(tsig_keys_parse_bind(text, "bad.conf", &keys, &n, err, sizeof(err)), code);
    assert_string_equal(err, want);
    assert_null(keys);
    assert_int_equal(n, 0);
}

static void test_bind_errors(void **state)
{
    (void)state;
    expect_bind_error("key \"a\" { algorithm hmac-sha256; };\n", TERN_ESYNTAX,
                      "bad.conf:1: key \"a\": missing secret");
    expect_bind_error("# first\nkey \"ok\" { algorithm hmac-sha1; secret \"YWJj\"; };\n\n"
                      "key \"b\" {\n  secret \"YWJj\";\n};\n",
                      TERN_ESYNTAX, "bad.conf:4: key \"b\": missing algorithm");
    expect_bind_error("key \"a\" {\n  algorithm hmac-sha3;\n  secret \"YWJj\";\n};\n", TERN_EINVAL,
                      "bad.conf:2: key \"a\": unknown algorithm \"hmac-sha3\" (expected hmac-md5, "
                      "hmac-sha1, hmac-sha224, hmac-sha256, hmac-sha384 or hmac-sha512)");
    expect_bind_error(
        "key \"a\" {\n  algorithm hmac-sha256;\n\n  secret \"YWJ*\";\n};\n", TERN_EINVAL,
        "bad.conf:4: key \"a\": bad base64 in secret: a character that is not base64");
    expect_bind_error("key \"a\" {\n  algorithm hmac-sha256;\n  secret \"YWJ\";\n};\n", TERN_EINVAL,
                      "bad.conf:3: key \"a\": bad base64 in secret: its length is not a multiple "
                      "of 4 (cut short?)");
    expect_bind_error("\nkey \"a\" {\n  algorithm hmac-sha256;\n  secret \"YWJj\";\n", TERN_ESYNTAX,
                      "bad.conf:5: key \"a\" (line 2): unterminated block, '};' missing");
    expect_bind_error("key \"a\" {\n  algorithm hmac-sha256;\n  secret \"YWJj\";\n}\n",
                      TERN_ESYNTAX,
                      "bad.conf:5: key \"a\" (line 1): unterminated block, ';' missing after '}'");
    expect_bind_error("key \"a\" { algorithm hmac-sha256; secret \"YWJj\"; };\n/* open\n\n",
                      TERN_ESYNTAX, "bad.conf:2: unterminated comment");
    expect_bind_error("key \"a\" { algorithm hmac-sha256; secret \"YWJj; };\n", TERN_ESYNTAX,
                      "bad.conf:1: unterminated string");
    expect_bind_error("key \"a\" { algorithm hmac-sha256; secret \"YWJj\"; keys 1; };",
                      TERN_ESYNTAX,
                      "bad.conf:1: key \"a\": unknown option \"keys\" (expected algorithm or "
                      "secret)");
    expect_bind_error("key \"a\" { algorithm hmac-sha256; algorithm hmac-sha1; };", TERN_ESYNTAX,
                      "bad.conf:1: key \"a\": algorithm given twice");
    expect_bind_error(
        "key \"a\" { algorithm hmac-sha256 secret \"YWJj\"; };", TERN_ESYNTAX,
        "bad.conf:1: key \"a\": expected ';' after algorithm hmac-sha256, got secret");
    expect_bind_error("key \"a\" { algorithm hmac-sha256; secret \"YWJj\"; };\n"
                      "key \"A.\" { algorithm hmac-sha1; secret \"YWJj\"; };\n",
                      TERN_ESYNTAX, "bad.conf:2: key \"a\" is defined twice");
    expect_bind_error("options {\n};\n", TERN_ESYNTAX,
                      "bad.conf:1: expected a key statement, got options");
    expect_bind_error("key { algorithm hmac-sha1; };", TERN_ESYNTAX,
                      "bad.conf:1: expected a key name after \"key\", got {");
    expect_bind_error("key \"a..b\" { algorithm hmac-sha1; secret \"YWJj\"; };", TERN_EINVAL,
                      "bad.conf:1: bad key name \"a..b\": empty label in name");
}

/* ---- our client against our server ---- */

/* Verify a request, then sign and verify nmsg responses of nrec TXT records each. */
static void roundtrip(const tsig_key_t *key, unsigned nmsg)
{
    uint8_t q[512], m[8192];
    size_t qlen = make_query(q, 0x1234, "big.test", WIRE_T_AXFR), len;
    tsig_ctx_t cli, srv;
    tsig_ctx_init(&cli);
    tsig_ctx_init(&srv);
    uint64_t now = 1700000000;
    assert_int_equal(tsig_sign_request(&cli, key, q, qlen, sizeof(q), now, &qlen), 0);
    assert_int_equal(get16(q + 10), 1);
    assert_int_equal(tsig_verify_request(&srv, key, 1, q, qlen, now + 3), 0);
    assert_ptr_equal(srv.key, key);
    for (unsigned i = 0; i < nmsg; i++) {
        len = make_txt_response(m, q, qlen, i * 10, 10, i == 0, i == nmsg - 1);
        size_t before = len, stripped = 0;
        assert_int_equal(tsig_sign_response(&srv, m, len, sizeof(m), now + 4 + i, &len), 0);
        assert_true(len - before <= tsig_rr_size(key));
        assert_int_equal(tsig_verify_response(&cli, m, len, now + 5 + i, &stripped), 0);
        assert_int_equal(stripped, before);
        assert_int_equal(cli.nmsg, i + 1);
    }
    assert_int_equal(tsig_verify_end(&cli), 0);
    assert_int_equal(srv.nmsg, nmsg);
    tsig_ctx_clear(&cli);
    tsig_ctx_clear(&srv);
}

static void test_roundtrip_all_algorithms(void **state)
{
    (void)state;
    for (size_t a = 0; a < TERN_ARRAY_SIZE(ALGS); a++) {
        tsig_key_t k = make_key("xfr.key", ALGS[a], SECRET);
        roundtrip(&k, 1);
        roundtrip(&k, 4);
    }
}

/* A request signed by one of keys[], the server's ctx after verifying it. */
static void signed_request(tsig_ctx_t *cli, const tsig_key_t *key, uint8_t *q, size_t *qlen,
                           uint64_t now)
{
    *qlen = make_query(q, 0xbeef, "big.test", WIRE_T_SOA);
    assert_int_equal(tsig_sign_request(cli, key, q, *qlen, 512, now, qlen), 0);
}

static void test_original_id(void **state)
{
    (void)state;
    tsig_key_t k = make_key("xfr.key", "hmac-sha256", SECRET);
    uint8_t q[512], m[4096];
    size_t qlen, len, stripped;
    tsig_ctx_t cli, srv;
    tsig_ctx_init(&cli);
    tsig_ctx_init(&srv);
    signed_request(&cli, &k, q, &qlen, 1000);
    /* a forwarder rewrote the ID: the MAC covers the Original ID (§4.3.3) */
    put16(q, 0x4242);
    assert_int_equal(tsig_verify_request(&srv, &k, 1, q, qlen, 1000), 0);
    len = make_txt_response(m, q, qlen, 0, 3, true, true);
    assert_int_equal(tsig_sign_response(&srv, m, len, sizeof(m), 1001, &len), 0);
    put16(m, 0xbeef); /* and back on the way home */
    assert_int_equal(tsig_verify_response(&cli, m, len, 1001, &stripped), 0);
    /* but any other byte of the header is covered */
    signed_request(&cli, &k, q, &qlen, 1000);
    q[2] ^= 0x01; /* RD */
    assert_int_equal(tsig_verify_request(&srv, &k, 1, q, qlen, 1000), TSIG_BADSIG);
    tsig_ctx_clear(&cli);
    tsig_ctx_clear(&srv);
}

/* Server answers an error for q: NOTAUTH, then the TSIG of §5.3.2; client reads it. */
static void error_answer(tsig_ctx_t *srv, tsig_ctx_t *cli, const uint8_t *q, size_t qlen,
                         uint64_t srv_now, uint64_t cli_now, int want_client)
{
    uint8_t m[1024];
    size_t len = resp_begin(m, q, question_end(q, qlen)), stripped;
    m[3] = 9; /* NOTAUTH: the caller's job */
    size_t before = len;
    assert_int_equal(tsig_sign_response(srv, m, len, sizeof(m), srv_now, &len), TERN_EINVAL);
    assert_int_equal(tsig_append_error(srv, m, len, sizeof(m), srv_now, &len), 0);
    tsig_rr_t rr;
    assert_int_equal(tsig_find(m, len, &rr), 0);
    assert_true(rr.present);
    assert_int_equal(rr.off, before);
    assert_int_equal(rr.error, srv->error);
    assert_int_equal(rr.orig_id, get16(q));
    if (srv->error == TSIG_BADTIME) {
        assert_int_equal(rr.mac_len, tsig_alg_mac_len(srv->key->alg));
        assert_int_equal(rr.other_len, 6);
    } else {
        assert_int_equal(rr.mac_len, 0);
        assert_int_equal(rr.other_len, 0);
    }
    assert_int_equal(tsig_verify_response(cli, m, len, cli_now, &stripped), want_client);
}

static void test_server_refusals(void **state)
{
    (void)state;
    tsig_key_t k = make_key("xfr.key", "hmac-sha256", SECRET);
    tsig_key_t server_keys[] = {make_key("other.key", "hmac-sha256", SECRET),
                                make_key("xfr.key", "hmac-sha256", SECRET)};
    tsig_key_t wrong = make_key("xfr.key", "hmac-sha256", OTHER_SECRET);
    tsig_key_t sha1 = make_key("xfr.key", "hmac-sha1", SECRET);
    tsig_key_t unknown = make_key("nobody.key", "hmac-sha256", SECRET);
    uint8_t q[512];
    size_t qlen;
    tsig_ctx_t cli, srv;
    tsig_ctx_init(&cli);
    tsig_ctx_init(&srv);

    /* the second key of the list is found */
    signed_request(&cli, &k, q, &qlen, 5000);
    assert_int_equal(tsig_verify_request(&srv, server_keys, 2, q, qlen, 5000), 0);
    assert_ptr_equal(srv.key, &server_keys[1]);

    /* unknown name: BADKEY, unsigned, echoing our key name */
    signed_request(&cli, &unknown, q, &qlen, 5000);
    assert_int_equal(tsig_verify_request(&srv, server_keys, 2, q, qlen, 5000), TSIG_BADKEY);
    assert_null(srv.key);
    error_answer(&srv, &cli, q, qlen, 5000, 5000, TSIG_EPEER);
    assert_int_equal(cli.peer_error, TSIG_BADKEY);
    assert_false(cli.peer_signed);
    assert_string_equal(tsig_error_name(cli.peer_error), "BADKEY");
    /* the transaction is over */
    size_t stripped;
    assert_int_equal(tsig_verify_response(&cli, q, qlen, 5000, &stripped), TERN_EINVAL);
    assert_int_equal(tsig_verify_end(&cli), TERN_EINVAL);

    /* known name, other algorithm: BADKEY too */
    signed_request(&cli, &sha1, q, &qlen, 5000);
    assert_int_equal(tsig_verify_request(&srv, server_keys, 2, q, qlen, 5000), TSIG_BADKEY);
    error_answer(&srv, &cli, q, qlen, 5000, 5000, TSIG_EPEER);
    assert_int_equal(cli.peer_error, TSIG_BADKEY);

    /* wrong secret: BADSIG, unsigned */
    signed_request(&cli, &wrong, q, &qlen, 5000);
    assert_int_equal(tsig_verify_request(&srv, server_keys, 2, q, qlen, 5000), TSIG_BADSIG);
    assert_null(srv.key);
    error_answer(&srv, &cli, q, qlen, 5000, 5000, TSIG_EPEER);
    assert_int_equal(cli.peer_error, TSIG_BADSIG);
    assert_false(cli.peer_signed);

    tsig_ctx_clear(&cli);
    tsig_ctx_clear(&srv);
}

static void test_badtime(void **state)
{
    (void)state;
    tsig_key_t k = make_key("xfr.key", "hmac-sha256", SECRET);
    tsig_key_t server_keys[] = {make_key("other.key", "hmac-sha256", SECRET),
                                make_key("xfr.key", "hmac-sha256", SECRET)};
    uint8_t q[512], m[1024];
    size_t qlen, len, stripped;
    tsig_ctx_t cli, srv;
    tsig_ctx_init(&cli);
    tsig_ctx_init(&srv);

    /* clocks 301 s apart: BADTIME, signed, our clock in Other Data; the client verifies it */
    signed_request(&cli, &k, q, &qlen, 5000);
    assert_int_equal(tsig_verify_request(&srv, server_keys, 2, q, qlen, 5301), TSIG_BADTIME);
    assert_ptr_equal(srv.key, &server_keys[1]);
    error_answer(&srv, &cli, q, qlen, 5301, 5000, TSIG_EPEER);
    assert_int_equal(cli.peer_error, TSIG_BADTIME);
    assert_true(cli.peer_signed);
    assert_int_equal(cli.peer_time, 5301);
    /* the other way round, and right at the edge of the fudge */
    signed_request(&cli, &k, q, &qlen, 5000);
    assert_int_equal(tsig_verify_request(&srv, server_keys, 2, q, qlen, 4699), TSIG_BADTIME);
    assert_int_equal(tsig_verify_request(&srv, server_keys, 2, q, qlen, 4700), 0);
    assert_int_equal(tsig_verify_request(&srv, server_keys, 2, q, qlen, 5300), 0);

    /* a BADTIME answer whose MAC was tampered with is not trusted as one */
    signed_request(&cli, &k, q, &qlen, 5000);
    assert_int_equal(tsig_verify_request(&srv, server_keys, 2, q, qlen, 9000), TSIG_BADTIME);
    len = resp_begin(m, q, question_end(q, qlen));
    m[3] = 9;
    assert_int_equal(tsig_append_error(&srv, m, len, sizeof(m), 9000, &len), 0);
    m[len - 13] ^= 1; /* the MAC's last byte: Original ID, Error, Other Len, 6 bytes of Other */
    assert_int_equal(tsig_verify_response(&cli, m, len, 5000, &stripped), TSIG_EBADSIG);

    tsig_ctx_clear(&cli);
    tsig_ctx_clear(&srv);
}

/* What the client checks on its own, and the API refusing misuse. */
static void test_client_checks(void **state)
{
    (void)state;
    tsig_key_t k = make_key("xfr.key", "hmac-sha256", SECRET);
    tsig_key_t server_keys[] = {make_key("other.key", "hmac-sha256", SECRET),
                                make_key("xfr.key", "hmac-sha256", SECRET)};
    uint8_t q[512], m[1024];
    size_t qlen, len, stripped;
    tsig_ctx_t cli, srv;
    tsig_ctx_init(&cli);
    tsig_ctx_init(&srv);

    /* the client's own clock check */
    signed_request(&cli, &k, q, &qlen, 5000);
    assert_int_equal(tsig_verify_request(&srv, server_keys, 2, q, qlen, 5000), 0);
    len = make_txt_response(m, q, qlen, 0, 1, true, false);
    assert_int_equal(tsig_sign_response(&srv, m, len, sizeof(m), 5000, &len), 0);
    assert_int_equal(tsig_verify_response(&cli, m, len, 5301, &stripped), TSIG_EBADTIME);

    /* an answer signed with another key than our request's */
    signed_request(&cli, &k, q, &qlen, 5000);
    assert_int_equal(tsig_verify_request(&srv, server_keys, 1, q, qlen, 5000), TSIG_BADKEY);
    tsig_ctx_t srv2;
    tsig_ctx_init(&srv2);
    uint8_t q2[512];
    size_t q2len;
    tsig_ctx_t cli2;
    tsig_ctx_init(&cli2);
    signed_request(&cli2, &server_keys[0], q2, &q2len, 5000);
    assert_int_equal(tsig_verify_request(&srv2, server_keys, 1, q2, q2len, 5000), 0);
    len = make_txt_response(m, q, qlen, 0, 1, true, false);
    assert_int_equal(tsig_sign_response(&srv2, m, len, sizeof(m), 5000, &len), 0);
    assert_int_equal(tsig_verify_response(&cli, m, len, 5000, &stripped), TSIG_EBADKEY);

    /* an unsigned answer to a signed request */
    signed_request(&cli, &k, q, &qlen, 5000);
    len = make_txt_response(m, q, qlen, 0, 1, true, true);
    assert_int_equal(tsig_verify_response(&cli, m, len, 5000, &stripped), TSIG_ENOSIG);
    assert_int_equal(stripped, len);

    /* an unsigned request */
    len = make_query(q, 7, "big.test", WIRE_T_SOA);
    assert_int_equal(tsig_verify_request(&srv, server_keys, 2, q, len, 5000), TERN_ENOENT);
    assert_int_equal(tsig_sign_response(&srv, m, len, sizeof(m), 5000, &len), TERN_EINVAL);
    assert_int_equal(tsig_append_error(&srv, m, len, sizeof(m), 5000, &len), TERN_EINVAL);
    /* a client ctx that signed nothing */
    tsig_ctx_t fresh;
    tsig_ctx_init(&fresh);
    assert_int_equal(tsig_verify_response(&fresh, m, len, 5000, &stripped), TERN_EINVAL);
    assert_int_equal(tsig_verify_end(&fresh), TERN_EINVAL);
    tsig_ctx_clear(&fresh);

    tsig_ctx_clear(&cli);
    tsig_ctx_clear(&cli2);
    tsig_ctx_clear(&srv);
    tsig_ctx_clear(&srv2);
}

/* Rewrite the MAC of the TSIG RR ending msg[0..*len) to its first n bytes (n <= its size) or,
 * with n larger, pad it with zeros; fixes RDLENGTH and MAC Size. */
static void resize_mac(uint8_t *msg, size_t *len, size_t n)
{
    tsig_rr_t rr;
    assert_int_equal(tsig_find(msg, *len, &rr), 0);
    size_t macoff = (size_t)(rr.mac - msg), old = rr.mac_len;
    size_t tail = *len - (macoff + old); /* Original ID, Error, Other Len, Other */
    uint8_t t[64];
    memcpy(t, msg + macoff + old, tail);
    if (n > old)
        memset(msg + macoff + old, 0, n - old);
    memcpy(msg + macoff + n, t, tail);
    put16(msg + macoff - 2, (unsigned)n);
    size_t rdlen_off = rr.off + rr.key_name_len + 8;
    put16(msg + rdlen_off, get16(msg + rdlen_off) + (unsigned)n - (unsigned)old);
    *len = *len - old + n;
}

static void test_truncation(void **state)
{
    (void)state;
    tsig_key_t k = make_key("xfr.key", "hmac-sha256", SECRET);
    uint8_t q[512], q0[512], m[2048];
    size_t qlen, q0len, len, stripped;
    tsig_ctx_t cli, srv;
    tsig_ctx_init(&cli);
    tsig_ctx_init(&srv);
    signed_request(&cli, &k, q0, &q0len, 100);
    /* sha256: at least max(10, 32/2) = 16 bytes */
    memcpy(q, q0, q0len);
    qlen = q0len;
    resize_mac(q, &qlen, 16);
    assert_int_equal(tsig_verify_request(&srv, &k, 1, q, qlen, 100), 0);
    memcpy(q, q0, q0len);
    qlen = q0len;
    resize_mac(q, &qlen, 15);
    assert_int_equal(tsig_verify_request(&srv, &k, 1, q, qlen, 100), TSIG_BADTRUNC);
    assert_null(srv.key); /* not verified: the answer is unsigned */
    len = resp_begin(m, q, question_end(q, qlen));
    m[3] = 9;
    assert_int_equal(tsig_append_error(&srv, m, len, sizeof(m), 100, &len), 0);
    tsig_rr_t rr;
    assert_int_equal(tsig_find(m, len, &rr), 0);
    assert_int_equal(rr.error, TSIG_BADTRUNC);
    assert_int_equal(rr.mac_len, 0);
    memcpy(q, q0, q0len);
    qlen = q0len;
    resize_mac(q, &qlen, 0);
    assert_int_equal(tsig_verify_request(&srv, &k, 1, q, qlen, 100), TSIG_BADTRUNC);
    /* longer than the hash: FORMERR */
    memcpy(q, q0, q0len);
    qlen = q0len;
    resize_mac(q, &qlen, 33);
    assert_int_equal(tsig_verify_request(&srv, &k, 1, q, qlen, 100), TERN_EMALF);
    /* a truncated request MAC with a wrong byte in what is left */
    memcpy(q, q0, q0len);
    qlen = q0len;
    resize_mac(q, &qlen, 20);
    q[qlen - 7] ^= 0x80;
    assert_int_equal(tsig_verify_request(&srv, &k, 1, q, qlen, 100), TSIG_BADSIG);

    /* the client accepts a response MAC cut to 16 bytes, not to 15 */
    for (size_t cut = 15; cut <= 16; cut++) {
        signed_request(&cli, &k, q, &qlen, 100);
        assert_int_equal(tsig_verify_request(&srv, &k, 1, q, qlen, 100), 0);
        len = make_txt_response(m, q, qlen, 0, 2, true, true);
        assert_int_equal(tsig_sign_response(&srv, m, len, sizeof(m), 100, &len), 0);
        resize_mac(m, &len, cut);
        assert_int_equal(tsig_verify_response(&cli, m, len, 100, &stripped),
                         cut == 16 ? 0 : TSIG_EBADSIG);
    }
    /* an empty MAC without an error is not a signature */
    signed_request(&cli, &k, q, &qlen, 100);
    assert_int_equal(tsig_verify_request(&srv, &k, 1, q, qlen, 100), 0);
    len = make_txt_response(m, q, qlen, 0, 2, true, true);
    assert_int_equal(tsig_sign_response(&srv, m, len, sizeof(m), 100, &len), 0);
    resize_mac(m, &len, 0);
    assert_int_equal(tsig_verify_response(&cli, m, len, 100, &stripped), TSIG_EBADSIG);
    tsig_ctx_clear(&cli);
    tsig_ctx_clear(&srv);
}

/* Reference for §5.3.1, written here from the RFC: sign msg[0..len) as a later message of a
 * stream whose prior MAC is prior[0..plen), with the unsigned messages um[0..nu) between. */
static size_t ref_sign_next(const tsig_key_t *k, const uint8_t *prior, size_t plen,
                            uint8_t *const *um, const size_t *ulen, size_t nu, uint8_t *msg,
                            size_t len, uint64_t now)
{
    size_t cap = 2 + plen + len + 8;
    for (size_t i = 0; i < nu; i++)
        cap += ulen[i];
    uint8_t *d = malloc(cap), mac[64];
    assert_non_null(d);
    size_t n = 0;
    put16(d, (unsigned)plen);
    memcpy(d + 2, prior, plen);
    n = 2 + plen;
    for (size_t i = 0; i < nu; i++) {
        memcpy(d + n, um[i], ulen[i]);
        n += ulen[i];
    }
    memcpy(d + n, msg, len);
    n += len;
    for (int i = 0; i < 6; i++)
        d[n + (size_t)i] = (uint8_t)(now >> (40 - 8 * i));
    put16(d + n + 6, TSIG_FUDGE);
    n += 8;
    unsigned maclen = 0;
    assert_non_null(HMAC(ref_md(k->alg), k->secret, (int)k->secret_len, d, n, mac, &maclen));
    free(d);
    /* the TSIG RR, by hand */
    const char *alg = tsig_alg_name(k->alg);
    uint8_t awire[256];
    const char *why;
    int alen = dname_from_str(alg, strlen(alg), false, awire, &why);
    assert_true(alen > 0);
    uint8_t *p = msg + len;
    memcpy(p, k->wire, k->wire_len);
    p += k->wire_len;
    put16(p, WIRE_T_TSIG);
    put16(p + 2, WIRE_CLASS_ANY);
    memset(p + 4, 0, 4);
    put16(p + 8, (unsigned)alen + 16 + maclen);
    p += 10;
    memcpy(p, awire, (size_t)alen);
    p += alen;
    for (int i = 0; i < 6; i++)
        p[i] = (uint8_t)(now >> (40 - 8 * i));
    put16(p + 6, TSIG_FUDGE);
    put16(p + 8, maclen);
    memcpy(p + 10, mac, maclen);
    p += 10 + maclen;
    memcpy(p, msg, 2);
    memset(p + 2, 0, 4);
    p += 6;
    put16(msg + 10, get16(msg + 10) + 1u);
    return (size_t)(p - msg);
}

/* A stream: message 0 signed by our server, then groups of `gap` unsigned messages each
 * followed by one signed by the reference. Messages go in msgs[i] (lens in lens). */
static size_t build_stream(const tsig_key_t *k, tsig_ctx_t *cli, uint8_t **msgs, size_t *lens,
                           size_t groups, size_t gap, bool end_unsigned)
{
    uint8_t q[512];
    size_t qlen, n = 0;
    tsig_ctx_t srv;
    tsig_ctx_init(&srv);
    signed_request(cli, k, q, &qlen, 777);
    assert_int_equal(tsig_verify_request(&srv, k, 1, q, qlen, 777), 0);
    msgs[0] = malloc(4096);
    lens[0] = make_txt_response(msgs[0], q, qlen, 0, 3, true, false);
    assert_int_equal(tsig_sign_response(&srv, msgs[0], lens[0], 4096, 777, &lens[0]), 0);
    tsig_ctx_clear(&srv);
    n = 1;
    uint8_t prior[64];
    size_t plen = tsig_mac_of(msgs[0], lens[0], prior);
    for (size_t g = 0; g < groups; g++) {
        size_t first = n;
        for (size_t u = 0; u < gap; u++, n++) {
            msgs[n] = malloc(4096);
            lens[n] = make_txt_response(msgs[n], q, qlen, (unsigned)n * 3, 3, false, false);
        }
        if (end_unsigned && g == groups - 1)
            break;
        msgs[n] = malloc(4096);
        lens[n] = make_txt_response(msgs[n], q, qlen, (unsigned)n * 3, 3, false, g == groups - 1);
        lens[n] = ref_sign_next(k, prior, plen, msgs + first, lens + first, gap, msgs[n], lens[n],
                                778 + g);
        plen = tsig_mac_of(msgs[n], lens[n], prior);
        n++;
    }
    return n;
}

static void free_stream(uint8_t **msgs, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(msgs[i]);
}

static void test_unsigned_between(void **state)
{
    (void)state;
    tsig_key_t k = make_key("xfr.key", "hmac-sha384", SECRET);
    static uint8_t *msgs[300];
    static size_t lens[300];
    size_t stripped;
    tsig_ctx_t cli;
    tsig_ctx_init(&cli);

    /* 1 signed, (3 unsigned, 1 signed) x 3, and (0 unsigned, 1 signed): all verify */
    size_t n = build_stream(&k, &cli, msgs, lens, 3, 3, false);
    assert_int_equal(n, 13);
    for (size_t i = 0; i < n; i++) {
        int want = i == 0 || i % 4 == 0 ? 0 : TSIG_PENDING;
        assert_int_equal(tsig_verify_response(&cli, msgs[i], lens[i], 780, &stripped), want);
        if (want == TSIG_PENDING)
            assert_int_equal(stripped, lens[i]);
        assert_int_equal(tsig_verify_end(&cli), want == 0 ? 0 : TSIG_ENOSIG);
    }
    assert_int_equal(cli.nmsg, 4);
    /* the same with one byte of an unsigned message changed: the next signed one fails */
    free_stream(msgs, n);
    tsig_ctx_clear(&cli);
    tsig_ctx_init(&cli);
    n = build_stream(&k, &cli, msgs, lens, 2, 3, false);
    msgs[2][lens[2] - 1] ^= 0x20;
    for (size_t i = 0; i < 4; i++)
        assert_int_equal(tsig_verify_response(&cli, msgs[i], lens[i], 780, &stripped),
                         i == 0 ? 0 : TSIG_PENDING);
    assert_int_equal(tsig_verify_response(&cli, msgs[4], lens[4], 780, &stripped), TSIG_EBADSIG);
    free_stream(msgs, n);
    tsig_ctx_clear(&cli);

    /* one unsigned message dropped: the chain breaks */
    tsig_ctx_init(&cli);
    n = build_stream(&k, &cli, msgs, lens, 1, 2, false);
    assert_int_equal(tsig_verify_response(&cli, msgs[0], lens[0], 780, &stripped), 0);
    assert_int_equal(tsig_verify_response(&cli, msgs[2], lens[2], 780, &stripped), TSIG_PENDING);
    assert_int_equal(tsig_verify_response(&cli, msgs[3], lens[3], 780, &stripped), TSIG_EBADSIG);
    free_stream(msgs, n);
    tsig_ctx_clear(&cli);

    /* a stream that ends unsigned: every message accepted, the end is not */
    tsig_ctx_init(&cli);
    n = build_stream(&k, &cli, msgs, lens, 2, 2, true);
    assert_int_equal(n, 6);
    for (size_t i = 0; i < n; i++)
        assert_true(tsig_verify_response(&cli, msgs[i], lens[i], 780, &stripped) >= 0);
    assert_int_equal(tsig_verify_end(&cli), TSIG_ENOSIG);
    free_stream(msgs, n);
    tsig_ctx_clear(&cli);

    /* 99 unsigned in a row are fine, the 100th is not */
    tsig_ctx_init(&cli);
    n = build_stream(&k, &cli, msgs, lens, 1, 99, false);
    assert_int_equal(n, 101);
    for (size_t i = 0; i < n; i++)
        assert_int_equal(tsig_verify_response(&cli, msgs[i], lens[i], 780, &stripped),
                         i == 0 || i == 100 ? 0 : TSIG_PENDING);
    assert_int_equal(tsig_verify_end(&cli), 0);
    free_stream(msgs, n);
    tsig_ctx_clear(&cli);
    tsig_ctx_init(&cli);
    n = build_stream(&k, &cli, msgs, lens, 1, 100, true);
    for (size_t i = 0; i < 100; i++)
        assert_int_equal(tsig_verify_response(&cli, msgs[i], lens[i], 780, &stripped),
                         i == 0 ? 0 : TSIG_PENDING);
    assert_int_equal(tsig_verify_response(&cli, msgs[100], lens[100], 780, &stripped), TSIG_ENOSIG);
    free_stream(msgs, n);
    tsig_ctx_clear(&cli);
}

static void test_room(void **state)
{
    (void)state;
    for (size_t a = 0; a < TERN_ARRAY_SIZE(ALGS); a++) {
        tsig_key_t k = make_key("a.rather.long.key.name.for.room", ALGS[a], SECRET);
        uint8_t q[1024], copy[1024], m[2048];
        size_t qlen = make_query(q, 1, "big.test", WIRE_T_SOA), newlen = 0;
        size_t need = tsig_rr_size(&k) - 6; /* what a request takes: no Other Data */
        tsig_ctx_t cli, srv;
        tsig_ctx_init(&cli);
        tsig_ctx_init(&srv);
        memcpy(copy, q, qlen);
        assert_int_equal(tsig_sign_request(&cli, &k, q, qlen, qlen + need - 1, 1, &newlen),
                         TERN_ENOSPC);
        assert_memory_equal(q, copy, qlen);
        assert_int_equal(tsig_sign_request(&cli, &k, q, qlen, qlen + need, 1, &newlen), 0);
        assert_int_equal(newlen, qlen + need);
        /* a BADTIME answer uses all of tsig_rr_size() */
        assert_int_equal(tsig_verify_request(&srv, &k, 1, q, newlen, 1000), TSIG_BADTIME);
        size_t len = resp_begin(m, q, question_end(q, newlen));
        m[3] = 9;
        assert_int_equal(tsig_append_error(&srv, m, len, len + tsig_rr_size(&k) - 1, 1000, &newlen),
                         TERN_ENOSPC);
        assert_int_equal(get16(m + 10), 0);
        assert_int_equal(tsig_append_error(&srv, m, len, len + tsig_rr_size(&k), 1000, &newlen), 0);
        assert_int_equal(newlen, len + tsig_rr_size(&k));
        /* and no message grows past 65535 bytes */
        assert_int_equal(tsig_verify_request(&srv, &k, 1, q, qlen + need, 1), 0);
        uint8_t *big = calloc(1, 70000);
        memcpy(big, m, len);
        assert_int_equal(tsig_sign_response(&srv, big, 65535 - need + 1, 70000, 1, &newlen),
                         TERN_ENOSPC);
        assert_int_equal(tsig_sign_response(&srv, big, 65535 - need, 70000, 1, &newlen), 0);
        assert_int_equal(newlen, 65535);
        free(big);
        tsig_ctx_clear(&cli);
        tsig_ctx_clear(&srv);
    }
}

/* ---- hostile input ---- */

static tsig_ctx_t probe_srv, probe_cli;

/* tsig_find() and both verifiers on an exact-size heap copy of msg (ASan sees any byte read
 * past it); a message tsig_find() refuses is refused by both verifiers as malformed too. */
static int probe(const uint8_t *msg, size_t len, const tsig_key_t *k)
{
    uint8_t *c = malloc(len ? len : 1), q[512];
    assert_non_null(c);
    memcpy(c, msg, len);
    tsig_rr_t rr;
    size_t qlen, stripped;
    int r = tsig_find(c, len, &rr);
    int v = tsig_verify_request(&probe_srv, k, 1, c, len, 5000);
    signed_request(&probe_cli, k, q, &qlen, 5000);
    int w = tsig_verify_response(&probe_cli, c, len, 5000, &stripped);
    if (r < 0) {
        assert_int_equal(r, TERN_EMALF);
        assert_int_equal(v, TERN_EMALF);
        assert_int_equal(w, TERN_EMALF);
    } else if (rr.present) {
        assert_true(rr.off >= 12 && rr.off < len);
        assert_true(rr.mac >= c + rr.off && rr.mac + rr.mac_len <= c + len);
        assert_true(rr.other + rr.other_len == c + len);
    }
    free(c);
    return r;
}

/* msg[0..len) with the bytes of ins[0..n) put at off. */
static size_t insert_bytes(uint8_t *out, const uint8_t *msg, size_t len, size_t off,
                           const void *ins, size_t n)
{
    memcpy(out, msg, off);
    memcpy(out + off, ins, n);
    memcpy(out + off + n, msg + off, len - off);
    return len + n;
}

/* TSIGs cut short, misplaced, doubled or with fields running past their bounds. */
static void test_hostile_placement(void **state)
{
    (void)state;
    tsig_key_t k = make_key("xfr.key", "hmac-sha256", SECRET);
    uint8_t q[512], m[1024];
    size_t qlen, len;
    tsig_ctx_init(&probe_srv);
    tsig_ctx_init(&probe_cli);
    tsig_ctx_t cli;
    tsig_ctx_init(&cli);
    signed_request(&cli, &k, q, &qlen, 5000);
    tsig_rr_t rr;
    assert_int_equal(probe(q, qlen, &k), 0);
    assert_int_equal(tsig_find(q, qlen, &rr), 0);
    size_t off = rr.off, tsig_len = qlen - off;
    size_t macsize_off = off + 9 + 10 + 13 + 8, rdlen_off = off + 9 + 8;
    assert_int_equal(get16(q + macsize_off), 32);

    /* cut anywhere: malformed */
    for (size_t cut = 0; cut < qlen; cut++)
        assert_int_equal(probe(q, cut, &k), TERN_EMALF);
    /* a byte after the TSIG */
    memcpy(m, q, qlen);
    m[qlen] = 0;
    assert_int_equal(probe(m, qlen + 1, &k), TERN_EMALF);
    /* a record after the TSIG */
    static const uint8_t a_rr[] = {0xC0, 12, 0, 1, 0, 1, 0, 0, 0, 60, 0, 4, 192, 0, 2, 1};
    memcpy(m, q, qlen);
    memcpy(m + qlen, a_rr, sizeof(a_rr));
    put16(m + 10, 2);
    assert_int_equal(probe(m, qlen + sizeof(a_rr), &k), TERN_EMALF);
    /* ... and before it is fine (the MAC no longer matches, but that is the verifier's call) */
    len = insert_bytes(m, q, qlen, off, a_rr, sizeof(a_rr));
    put16(m + 10, 2);
    assert_int_equal(probe(m, len, &k), 0);
    assert_int_equal(tsig_verify_request(&probe_srv, &k, 1, m, len, 5000), TSIG_BADSIG);
    /* two TSIGs */
    memcpy(m, q, qlen);
    memcpy(m + qlen, q + off, tsig_len);
    put16(m + 10, 2);
    assert_int_equal(probe(m, qlen + tsig_len, &k), TERN_EMALF);
    /* the TSIG in the answer or authority section */
    memcpy(m, q, qlen);
    put16(m + 10, 0);
    put16(m + 6, 1);
    assert_int_equal(probe(m, qlen, &k), TERN_EMALF);
    put16(m + 6, 0);
    put16(m + 8, 1);
    assert_int_equal(probe(m, qlen, &k), TERN_EMALF);
    /* a MAC size running past the RDATA and the packet */
    memcpy(m, q, qlen);
    put16(m + macsize_off, 0xFFFF);
    assert_int_equal(probe(m, qlen, &k), TERN_EMALF);
    put16(m + rdlen_off, 0xFFFF);
    assert_int_equal(probe(m, qlen, &k), TERN_EMALF);
    memcpy(m, q, qlen);
    put16(m + macsize_off, 33);
    assert_int_equal(probe(m, qlen, &k), TERN_EMALF);
    /* Other Len past the end */
    memcpy(m, q, qlen);
    put16(m + qlen - 2, 1);
    assert_int_equal(probe(m, qlen, &k), TERN_EMALF);
    /* RDLENGTH shorter than the fields */
    memcpy(m, q, qlen);
    put16(m + rdlen_off, 20);
    assert_int_equal(probe(m, qlen, &k), TERN_EMALF);
    /* class IN, TTL 1 */
    memcpy(m, q, qlen);
    put16(m + off + 9 + 2, WIRE_CLASS_IN);
    assert_int_equal(probe(m, qlen, &k), TERN_EMALF);
    memcpy(m, q, qlen);
    m[off + 9 + 7] = 1;
    assert_int_equal(probe(m, qlen, &k), TERN_EMALF);
    /* counts beyond the records */
    memcpy(m, q, qlen);
    put16(m + 6, 5);
    assert_int_equal(probe(m, qlen, &k), TERN_EMALF);
    memcpy(m, q, qlen);
    put16(m + 4, 2);
    assert_int_equal(probe(m, qlen, &k), TERN_EMALF);

    tsig_ctx_clear(&cli);
    tsig_ctx_clear(&probe_srv);
    tsig_ctx_clear(&probe_cli);
}

/* Names: compression read everywhere, loops and overlong names refused. */
static void test_hostile_names(void **state)
{
    (void)state;
    tsig_key_t k = make_key("xfr.key", "hmac-sha256", SECRET);
    uint8_t m[1024];
    size_t len;
    tsig_ctx_init(&probe_srv);
    tsig_ctx_init(&probe_cli);
    tsig_ctx_t cli;
    tsig_ctx_init(&cli);
    tsig_rr_t rr;

    /* compression: the TSIG owner as a pointer to the same name in the question is read
     * (and verifies: the MAC covers the canonical name); in upper case too */
    uint8_t q2[512];
    size_t q2len = make_query(q2, 9, "XFR.Key", WIRE_T_SOA);
    assert_int_equal(tsig_sign_request(&cli, &k, q2, q2len, sizeof(q2), 5000, &q2len), 0);
    assert_int_equal(tsig_find(q2, q2len, &rr), 0);
    memcpy(m, q2, rr.off);
    m[rr.off] = 0xC0;
    m[rr.off + 1] = 12;
    memcpy(m + rr.off + 2, q2 + rr.off + 9, q2len - rr.off - 9);
    len = q2len - 7;
    assert_int_equal(probe(m, len, &k), 0);
    assert_int_equal(tsig_verify_request(&probe_srv, &k, 1, m, len, 5000), 0);

    /* a pointer to itself, a forward pointer, a reserved label type */
    static const uint8_t hdr1[] = {0, 1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0};
    uint8_t b[1024];
    memcpy(b, hdr1, 12);
    memcpy(b + 12, (uint8_t[]){0xC0, 12, 0, 6, 0, 1}, 6);
    assert_int_equal(probe(b, 18, &k), TERN_EMALF);
    memcpy(b + 12, (uint8_t[]){1, 'a', 0xC0, 14, 0, 6, 0, 1}, 8);
    assert_int_equal(probe(b, 20, &k), TERN_EMALF);
    memcpy(b + 12, (uint8_t[]){0xC0, 18, 0, 6, 0, 1, 1, 'a', 0}, 9);
    assert_int_equal(probe(b, 21, &k), TERN_EMALF);
    memcpy(b + 12, (uint8_t[]){0x41, 'a', 0, 0, 6, 0, 1}, 7);
    assert_int_equal(probe(b, 19, &k), TERN_EMALF);
    memcpy(b + 12, (uint8_t[]){0x81, 'a', 0, 0, 6, 0, 1}, 7);
    assert_int_equal(probe(b, 19, &k), TERN_EMALF);
    /* a loop hidden in RDATA: an A record whose RDATA is a pointer to itself, and a later
     * owner name pointing at it */
    static const uint8_t hid[] = {
        0,    1,   0, 0, 0, 0, 0, 2, 0, 0,  0,  0,    /* header: 2 answers */
        1,    'a', 0, 0, 1, 0, 1, 0, 0, 0,  60, 0, 4, /* a. A, RDATA at 25: */
        0xC0, 25,  0, 0,                              /* C0 25 (itself), 0, 0 */
        0xC0, 25,  0, 1, 0, 1, 0, 0, 0, 60, 0,  0,    /* owner -> 25 */
    };
    assert_int_equal(probe(hid, sizeof(hid), &k), TERN_EMALF);
    /* a name through the RDATA that points back properly is fine ("b" + pointer to "a.") */
    uint8_t hid2[sizeof(hid)];
    memcpy(hid2, hid, sizeof(hid));
    memcpy(hid2 + 25, (uint8_t[]){1, 'b', 0xC0, 12}, 4);
    assert_int_equal(probe(hid2, sizeof(hid2), &k), 0);
    /* but 25 -> 27 (forward) -> 25 is a loop */
    memcpy(hid2 + 25, (uint8_t[]){0xC0, 27, 0xC0, 25}, 4);
    assert_int_equal(probe(hid2, sizeof(hid2), &k), TERN_EMALF);
    /* a name of 257 bytes made with a pointer */
    memcpy(b, hdr1, 12);
    put16(b + 6, 1);
    size_t p = 12;
    for (int l = 0; l < 3; l++) {
        b[p++] = 63;
        memset(b + p, 'x', 63);
        p += 63;
    }
    b[p++] = 0;
    memcpy(b + p, (uint8_t[]){0, 6, 0, 1}, 4);
    p += 4;
    size_t owner = p;
    b[p++] = 63;
    memset(b + p, 'y', 63);
    p += 63;
    memcpy(b + p, (uint8_t[]){0xC0, 12, 0, 1, 0, 1, 0, 0, 0, 60, 0, 0}, 12);
    p += 12;
    assert_int_equal(probe(b, p, &k), TERN_EMALF);
    b[owner] = 61; /* 62 + 193 = 255: just fits; shift the rest left by 2 */
    memmove(b + owner + 62, b + owner + 64, p - owner - 64);
    assert_int_equal(probe(b, p - 2, &k), 0);

    tsig_ctx_clear(&cli);
    tsig_ctx_clear(&probe_srv);
    tsig_ctx_clear(&probe_cli);
}

/* Random damage to a signed response with compressed names: nothing read out of bounds. */
static void test_hostile_random(void **state)
{
    (void)state;
    tsig_key_t k = make_key("xfr.key", "hmac-sha256", SECRET);
    uint8_t q[512], m[1024];
    size_t qlen;
    tsig_ctx_init(&probe_srv);
    tsig_ctx_init(&probe_cli);
    tsig_ctx_t cli;
    tsig_ctx_init(&cli);

    uint8_t resp[4096];
    tsig_ctx_t srv;
    tsig_ctx_init(&srv);
    signed_request(&cli, &k, q, &qlen, 5000);
    assert_int_equal(tsig_verify_request(&srv, &k, 1, q, qlen, 5000), 0);
    size_t rlen = make_txt_response(resp, q, qlen, 0, 6, true, true);
    assert_int_equal(tsig_sign_response(&srv, resp, rlen, sizeof(resp), 5000, &rlen), 0);
    assert_int_equal(probe(resp, rlen, &k), 0);
    uint32_t seed = 0x9e3779b9u;
    unsigned refused = 0;
    for (int it = 0; it < 20000; it++) {
        memcpy(m, resp, rlen);
        size_t mlen = rlen;
        int nmut = 1 + (int)(seed % 4);
        for (int j = 0; j < nmut; j++) {
            seed ^= seed << 13;
            seed ^= seed >> 17;
            seed ^= seed << 5;
            m[seed % mlen] = (uint8_t)(seed >> 8);
        }
        seed ^= seed << 13;
        seed ^= seed >> 17;
        seed ^= seed << 5;
        if (seed % 8 == 0)
            mlen = (seed >> 4) % mlen;
        refused += probe(m, mlen, &k) < 0;
    }
    assert_true(refused > 1000); /* the damage was seen, not just survived */
    tsig_ctx_clear(&srv);
    tsig_ctx_clear(&cli);
    tsig_ctx_clear(&probe_srv);
    tsig_ctx_clear(&probe_cli);
}

/* ---- ldns as a second implementation ---- */

static ldns_pkt *ldns_parse(const uint8_t *wire, size_t len)
{
    ldns_pkt *p = NULL;
    assert_int_equal(ldns_wire2pkt(&p, wire, len), LDNS_STATUS_OK);
    return p;
}

static size_t ldns_render(ldns_pkt *p, uint8_t *out, size_t cap)
{
    uint8_t *w = NULL;
    size_t n = 0;
    assert_int_equal(ldns_pkt2wire(&w, p, &n), LDNS_STATUS_OK);
    assert_true(n <= cap);
    memcpy(out, w, n);
    free(w);
    return n;
}

static void test_ldns(void **state)
{
    (void)state;
    /* ldns 1.8 has no hmac-sha224 or hmac-sha384 for TSIG (kdig covers those) */
    static const char *const ldns_algs[] = {"hmac-md5", "hmac-sha1", "hmac-sha256", "hmac-sha512"};
    for (size_t a = 0; a < TERN_ARRAY_SIZE(ldns_algs); a++) {
        tsig_key_t k = make_key("xfr.key", ldns_algs[a], SECRET);
        char alg[64];
        snprintf(alg, sizeof(alg), "%s.", tsig_alg_name(k.alg));
        uint64_t now = (uint64_t)time(NULL);
        uint8_t w[4096], m[4096];
        size_t len, mlen, stripped;
        tsig_ctx_t srv, cli;
        tsig_ctx_init(&srv);
        tsig_ctx_init(&cli);

        /* ldns signs a request, we verify it and answer with two messages ldns verifies */
        ldns_pkt *req = NULL;
        assert_int_equal(
            ldns_pkt_query_new_frm_str(&req, "big.test.", LDNS_RR_TYPE_AXFR, LDNS_RR_CLASS_IN, 0),
            LDNS_STATUS_OK);
        ldns_pkt_set_id(req, 0x3131);
        assert_int_equal(ldns_pkt_tsig_sign(req, "xfr.key.", SECRET, 300, alg, NULL),
                         LDNS_STATUS_OK);
        len = ldns_render(req, w, sizeof(w));
        assert_int_equal(tsig_verify_request(&srv, &k, 1, w, len, now), 0);
        w[len - 7] ^= 0x01; /* the MAC's last byte */
        assert_int_equal(tsig_verify_request(&srv, &k, 1, w, len, now), TSIG_BADSIG);
        w[len - 7] ^= 0x01;
        assert_int_equal(tsig_verify_request(&srv, &k, 1, w, len, now), 0);
        ldns_rdf *prior = ldns_rdf_clone(ldns_rr_rdf(ldns_pkt_tsig(req), 3));
        for (int i = 0; i < 3; i++) {
            mlen = make_txt_response(m, w, len, (unsigned)i * 5, 5, i == 0, i == 2);
            assert_int_equal(tsig_sign_response(&srv, m, mlen, sizeof(m), now, &mlen), 0);
            ldns_pkt *resp = ldns_parse(m, mlen);
            assert_non_null(ldns_pkt_tsig(resp));
            bool ok = i == 0
                          ? ldns_pkt_tsig_verify(resp, m, mlen, "xfr.key.", SECRET, prior)
                          : ldns_pkt_tsig_verify_next(resp, m, mlen, "xfr.key.", SECRET, prior, 1);
            assert_true(ok);
            ldns_rdf_deep_free(prior);
            prior = ldns_rdf_clone(ldns_rr_rdf(ldns_pkt_tsig(resp), 3));
            ldns_pkt_free(resp);
        }
        ldns_rdf_deep_free(prior);
        ldns_pkt_free(req);

        /* we sign a request, ldns verifies it (and refuses it with another secret) */
        len = make_query(w, 0x4141, "big.test", WIRE_T_AXFR);
        assert_int_equal(tsig_sign_request(&cli, &k, w, len, sizeof(w), now, &len), 0);
        req = ldns_parse(w, len);
        assert_true(ldns_pkt_tsig_verify(req, w, len, "xfr.key.", SECRET, NULL));
        assert_false(ldns_pkt_tsig_verify(req, w, len, "xfr.key.", OTHER_SECRET, NULL));
        /* ldns answers with two messages, the second timers only; we verify both */
        prior = ldns_rdf_clone(ldns_rr_rdf(ldns_pkt_tsig(req), 3));
        for (int i = 0; i < 2; i++) {
            mlen = make_txt_response(m, w, len, (unsigned)i * 5, 5, i == 0, i == 1);
            ldns_pkt *resp = ldns_parse(m, mlen);
            ldns_status st =
                i == 0 ? ldns_pkt_tsig_sign(resp, "xfr.key.", SECRET, 300, alg, prior)
                       : ldns_pkt_tsig_sign_next(resp, "xfr.key.", SECRET, 300, alg, prior, 1);
            assert_int_equal(st, LDNS_STATUS_OK);
            mlen = ldns_render(resp, m, sizeof(m));
            assert_int_equal(tsig_verify_response(&cli, m, mlen, now, &stripped), 0);
            ldns_rdf_deep_free(prior);
            prior = ldns_rdf_clone(ldns_rr_rdf(ldns_pkt_tsig(resp), 3));
            ldns_pkt_free(resp);
        }
        assert_int_equal(tsig_verify_end(&cli), 0);
        ldns_rdf_deep_free(prior);
        ldns_pkt_free(req);
        tsig_ctx_clear(&srv);
        tsig_ctx_clear(&cli);
    }
}

/* ---- sockets ---- */

static void set_timeouts(int fd, int ms)
{
    struct timeval tv = {ms / 1000, (ms % 1000) * 1000};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
}

static bool send_all(int fd, const uint8_t *p, size_t n)
{
    while (n > 0) {
        ssize_t k = send(fd, p, n, MSG_NOSIGNAL);
        if (k <= 0)
            return false;
        p += k;
        n -= (size_t)k;
    }
    return true;
}

static bool recv_all(int fd, uint8_t *p, size_t n)
{
    while (n > 0) {
        ssize_t k = recv(fd, p, n, 0);
        if (k <= 0)
            return false;
        p += k;
        n -= (size_t)k;
    }
    return true;
}

/* One DNS message over TCP (2-byte length first). */
static bool tcp_send_msg(int fd, const uint8_t *m, size_t len)
{
    uint8_t l[2];
    put16(l, (unsigned)len);
    return send_all(fd, l, 2) && send_all(fd, m, len);
}

/* The next DNS message from TCP into buf (65535 bytes); its length, or 0 on EOF or timeout. */
static size_t tcp_recv_msg(int fd, uint8_t *buf)
{
    uint8_t l[2];
    if (!recv_all(fd, l, 2))
        return 0;
    size_t len = get16(l);
    return recv_all(fd, buf, len) ? len : 0;
}

static int tcp_connect(uint16_t port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(fd >= 0);
    struct sockaddr_storage ss;
    socklen_t sl = tu_sockaddr(&ss, AF_INET, "127.0.0.1", port);
    set_timeouts(fd, PEER_WAIT_MS);
    assert_int_equal(connect(fd, (struct sockaddr *)&ss, sl), 0);
    return fd;
}

/* A UDP exchange: send q, wait up to ms for an answer; its length or 0. */
static size_t udp_exchange(uint16_t port, const uint8_t *q, size_t qlen, uint8_t *buf, size_t cap,
                           int ms)
{
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    assert_true(fd >= 0);
    struct sockaddr_storage ss;
    socklen_t sl = tu_sockaddr(&ss, AF_INET, "127.0.0.1", port);
    set_timeouts(fd, ms);
    ssize_t n = -1;
    if (sendto(fd, q, qlen, 0, (struct sockaddr *)&ss, sl) == (ssize_t)qlen)
        n = recv(fd, buf, cap, 0);
    close(fd);
    return n > 0 ? (size_t)n : 0;
}

/* ---- a real knotd ---- */

#define ZONE_TXT 2000 /* TXT records of ~130 bytes: the AXFR takes well over 64 KiB */

static knot_server_t knot;
static tsig_key_t knot_key;

static int knot_setup(void **state)
{
    (void)state;
    if (!ksrv_init(&knot, "tern-tsig-knot", "big.test."))
        return -1;
    knot_key = make_key("xfr.key", "hmac-sha256", SECRET);
    char path[128];
    snprintf(path, sizeof(path), "%s/big.test.zone", knot.dir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fprintf(f, "$ORIGIN big.test.\n"
               "@  3600 SOA ns.big.test. host.big.test. 1 7200 900 1209600 300\n"
               "@  3600 NS  ns\n"
               "ns 3600 A   192.0.2.53\n");
    for (int i = 0; i < ZONE_TXT; i++)
        fprintf(f,
                "r%d 3600 TXT \"record %d of big.test, padded to make the transfer take many "
                "TCP messages ..............\"\n",
                i, i);
    assert_int_equal(fclose(f), 0);
    char conf[2048];
    int h = ksrv_conf_head(&knot, conf, sizeof(conf));
    snprintf(conf + h, sizeof(conf) - (size_t)h,
             "key:\n"
             "  - id: xfr.key\n"
             "    algorithm: hmac-sha256\n"
             "    secret: %s\n"
             "acl:\n"
             "  - id: xfr\n"
             "    address: 127.0.0.1\n"
             "    key: xfr.key\n"
             "    action: transfer\n"
             "template:\n"
             "  - id: default\n"
             "    storage: \"%s\"\n"
             "    zonefile-sync: -1\n"
             "    zonefile-load: whole\n"
             "    journal-content: none\n"
             "zone:\n"
             "  - domain: \"big.test.\"\n"
             "    file: \"%s\"\n"
             "    acl: xfr\n",
             SECRET, knot.dir, path);
    tu_write_file(knot.dir, "knot.conf", conf);
    return ksrv_start(&knot) ? 0 : -1;
}

static int knot_teardown(void **state)
{
    (void)state;
    ksrv_stop(&knot);
    tu_rmtree(knot.dir);
    return 0;
}

/* Messages of one transfer as received. */
#define XFR_MAX_MSGS 64
typedef struct xfr {
    size_t n;
    uint8_t *msg[XFR_MAX_MSGS];
    size_t len[XFR_MAX_MSGS];
} xfr_t;

static void xfr_free(xfr_t *x)
{
    for (size_t i = 0; i < x->n; i++)
        free(x->msg[i]);
    x->n = 0;
}

/* Answer records of msg[0..len), and how many of them are SOA (ldns parses). */
static unsigned count_answers(const uint8_t *msg, size_t len, unsigned *nsoa)
{
    ldns_pkt *p = ldns_parse(msg, len);
    ldns_rr_list *an = ldns_pkt_answer(p);
    unsigned n = (unsigned)ldns_rr_list_rr_count(an);
    for (unsigned i = 0; i < n; i++)
        *nsoa += ldns_rr_get_type(ldns_rr_list_rr(an, i)) == LDNS_RR_TYPE_SOA;
    ldns_pkt_free(p);
    return n;
}

/* An AXFR of big.test from knotd signed with key at time now: every message kept in x until
 * the closing SOA, EOF or one that carries no answer (an error). */
static void knot_axfr(const tsig_key_t *key, uint64_t now, tsig_ctx_t *ctx, xfr_t *x)
{
    uint8_t q[512];
    size_t qlen = make_query(q, 0x6161, "big.test", WIRE_T_AXFR);
    assert_int_equal(tsig_sign_request(ctx, key, q, qlen, sizeof(q), now, &qlen), 0);
    int fd = tcp_connect(knot.port);
    assert_true(tcp_send_msg(fd, q, qlen));
    unsigned nsoa = 0;
    x->n = 0;
    while (x->n < XFR_MAX_MSGS && nsoa < 2) {
        uint8_t *m = malloc(65535);
        assert_non_null(m);
        size_t len = tcp_recv_msg(fd, m);
        if (len == 0) {
            free(m);
            break;
        }
        x->msg[x->n] = m;
        x->len[x->n++] = len;
        if (count_answers(m, len, &nsoa) == 0)
            break;
    }
    close(fd);
}

/* Verify x's messages with a ctx that signed the same request at the same time. */
static int replay(const xfr_t *x, const tsig_key_t *key, uint64_t now, size_t skip, size_t *bad)
{
    tsig_ctx_t ctx;
    tsig_ctx_init(&ctx);
    uint8_t q[512];
    size_t qlen = make_query(q, 0x6161, "big.test", WIRE_T_AXFR), stripped;
    assert_int_equal(tsig_sign_request(&ctx, key, q, qlen, sizeof(q), now, &qlen), 0);
    int r = 0;
    for (size_t i = 0; i < x->n && r == 0; i++) {
        if (i == skip)
            continue;
        r = tsig_verify_response(&ctx, x->msg[i], x->len[i], now, &stripped);
        *bad = i;
    }
    if (r == 0)
        r = tsig_verify_end(&ctx);
    tsig_ctx_clear(&ctx);
    return r;
}

static void test_knot_axfr(void **state)
{
    (void)state;
    uint64_t now = (uint64_t)time(NULL);
    tsig_ctx_t ctx;
    tsig_ctx_init(&ctx);
    xfr_t x = {0};
    knot_axfr(&knot_key, now, &ctx, &x);
    unsigned records = 0, nsoa = 0;
    for (size_t i = 0; i < x.n; i++) {
        size_t stripped = 0;
        assert_int_equal(x.msg[i][3] & 0x0f, 0);
        assert_int_equal(tsig_verify_response(&ctx, x.msg[i], x.len[i], now, &stripped), 0);
        assert_true(stripped < x.len[i]);
        records += count_answers(x.msg[i], x.len[i], &nsoa);
    }
    assert_int_equal(tsig_verify_end(&ctx), 0);
    assert_int_equal(nsoa, 2);
    assert_int_equal(records, ZONE_TXT + 3 + 1); /* SOA NS A, the TXTs, the closing SOA */
    assert_true(x.n >= 3);
    assert_int_equal(ctx.nmsg, x.n);
    print_message("knotd: AXFR of %u records in %zu signed messages verified\n", records, x.n);
    tsig_ctx_clear(&ctx);

    /* replays of what knotd sent, against a ctx that signed the same request */
    size_t bad = 0;
    assert_int_equal(replay(&x, &knot_key, now, SIZE_MAX, &bad), 0);
    size_t mid = x.len[1] / 2;
    x.msg[1][mid] ^= 0x04;
    assert_int_equal(replay(&x, &knot_key, now, SIZE_MAX, &bad), TSIG_EBADSIG);
    assert_int_equal(bad, 1);
    x.msg[1][mid] ^= 0x04;
    assert_int_equal(replay(&x, &knot_key, now, 1, &bad), TSIG_EBADSIG); /* one left out */
    assert_int_equal(bad, 2);
    put16(x.msg[2], 0x7777); /* an ID rewritten: the Original ID still verifies */
    assert_int_equal(replay(&x, &knot_key, now, SIZE_MAX, &bad), 0);
    tsig_key_t other = make_key("xfr.key", "hmac-sha256", OTHER_SECRET);
    assert_int_equal(replay(&x, &other, now, SIZE_MAX, &bad), TSIG_EBADSIG);
    assert_int_equal(bad, 0);
    xfr_free(&x);
}

/* One AXFR attempt that knotd refuses: the first (only) message's verdict. */
static int knot_refused(const tsig_key_t *key, uint64_t now, tsig_ctx_t *ctx)
{
    xfr_t x = {0};
    knot_axfr(key, now, ctx, &x);
    assert_int_equal(x.n, 1);
    assert_int_equal(x.msg[0][3] & 0x0f, 9); /* NOTAUTH */
    size_t stripped;
    int r = tsig_verify_response(ctx, x.msg[0], x.len[0], now, &stripped);
    xfr_free(&x);
    return r;
}

static void test_knot_refusals(void **state)
{
    (void)state;
    uint64_t now = (uint64_t)time(NULL);
    tsig_ctx_t ctx;
    tsig_ctx_init(&ctx);
    tsig_key_t wrong = make_key("xfr.key", "hmac-sha256", OTHER_SECRET);
    assert_int_equal(knot_refused(&wrong, now, &ctx), TSIG_EPEER);
    assert_int_equal(ctx.peer_error, TSIG_BADSIG);
    assert_false(ctx.peer_signed);
    tsig_key_t unknown = make_key("nobody.key", "hmac-sha256", SECRET);
    assert_int_equal(knot_refused(&unknown, now, &ctx), TSIG_EPEER);
    assert_int_equal(ctx.peer_error, TSIG_BADKEY);
    assert_false(ctx.peer_signed);
    tsig_key_t sha512 = make_key("xfr.key", "hmac-sha512", SECRET);
    assert_int_equal(knot_refused(&sha512, now, &ctx), TSIG_EPEER);
    assert_int_equal(ctx.peer_error, TSIG_BADKEY);
    /* our clock an hour slow: knotd's BADTIME answer is signed and carries its clock */
    assert_int_equal(knot_refused(&knot_key, now - 3600, &ctx), TSIG_EPEER);
    assert_int_equal(ctx.peer_error, TSIG_BADTIME);
    assert_true(ctx.peer_signed);
    assert_true(ctx.peer_time + 5 >= now && ctx.peer_time <= now + 5);
    print_message("knotd: BADSIG, BADKEY (name and algorithm) and BADTIME (its clock %llu, ours "
                  "%llu) reported as such\n",
                  (unsigned long long)ctx.peer_time, (unsigned long long)now);
    tsig_ctx_clear(&ctx);
}

/* A signed single-message exchange over UDP (as NOTIFY and SOA checks are). */
static void test_knot_udp(void **state)
{
    (void)state;
    uint64_t now = (uint64_t)time(NULL);
    tsig_ctx_t ctx;
    tsig_ctx_init(&ctx);
    uint8_t q0[512], q[512], a[4096];
    size_t q0len = make_query(q0, 0x7171, "big.test", WIRE_T_SOA), qlen, stripped;
    memcpy(q, q0, q0len);
    assert_int_equal(tsig_sign_request(&ctx, &knot_key, q, q0len, sizeof(q), now, &qlen), 0);
    size_t n = udp_exchange(knot.port, q, qlen, a, sizeof(a), PEER_WAIT_MS);
    assert_true(n > 12);
    assert_int_equal(a[3] & 0x0f, 0);
    assert_int_equal(tsig_verify_response(&ctx, a, n, now, &stripped), 0);
    assert_int_equal(tsig_verify_end(&ctx), 0);
    /* the same answer with one byte of its SOA changed, against the same request */
    a[stripped - 3] ^= 1;
    memcpy(q, q0, q0len);
    assert_int_equal(tsig_sign_request(&ctx, &knot_key, q, q0len, sizeof(q), now, &qlen), 0);
    assert_int_equal(tsig_verify_response(&ctx, a, n, now, &stripped), TSIG_EBADSIG);
    tsig_ctx_clear(&ctx);
}

/* ---- our server, kdig as the client ---- */

#define SRV_KEYS  (TERN_ARRAY_SIZE(ALGS) + 1)
#define AXFR_RECS 20 /* TXT records per AXFR message */

static struct server {
    pthread_t th;
    int udp, tcp;
    uint16_t port;
    char kdig[256], dig[256];
    tsig_key_t keys[SRV_KEYS]; /* "k-<alg>" for each algorithm, and xfr.key (sha256) */
    atomic_bool stop;
    atomic_int axfr_msgs;   /* messages of an AXFR answer */
    atomic_int corrupt_msg; /* 1-based message whose MAC is damaged after signing; 0: none */
    atomic_int clock_skew;  /* seconds added to the server's clock */
    atomic_int last_verify; /* tsig_verify_request() of the last request */
    atomic_int requests;
    atomic_int errors; /* calls that failed in the server thread (asserts can't run there) */
} srv;

/* Send m[0..len) (in buf after its 2 bytes of TCP length): on fd (TCP) or to peer (UDP). */
static bool reply_send(uint8_t *buf, size_t len, int fd, bool tcp,
                       const struct sockaddr_storage *peer, socklen_t plen)
{
    if (tcp) {
        put16(buf, (unsigned)len);
        return send_all(fd, buf, len + 2);
    }
    return sendto(fd, buf + 2, len, 0, (const struct sockaddr *)peer, plen) == (ssize_t)len;
}

/* Answer request q: FORMERR, a TSIG error (NOTAUTH + the TSIG of §5.3.2), SOA, or an AXFR of
 * srv.axfr_msgs messages over TCP; each signed when the request verified. */
static void serve_one(const uint8_t *q, size_t qlen, int fd, bool tcp,
                      const struct sockaddr_storage *peer, socklen_t plen)
{
    static uint8_t buf[65535 + 2];
    uint8_t *m = buf + 2, rd[256];
    tsig_ctx_t ctx;
    tsig_ctx_init(&ctx);
    uint64_t now = (uint64_t)time(NULL) + (uint64_t)(int64_t)atomic_load(&srv.clock_skew);
    int v = tsig_verify_request(&ctx, srv.keys, SRV_KEYS, q, qlen, now);
    atomic_store(&srv.last_verify, v);
    atomic_fetch_add(&srv.requests, 1);
    size_t qend = question_end(q, qlen), len;
    if (!qend || v == TERN_EMALF) {
        memcpy(m, q, 12);
        m[2] |= 0x80;
        m[3] = 1; /* FORMERR, unsigned */
        memset(m + 4, 0, 8);
        (void)reply_send(buf, 12, fd, tcp, peer, plen);
    } else if (v > 0) {
        len = resp_begin(m, q, qend);
        m[3] = 9; /* NOTAUTH */
        if (tsig_append_error(&ctx, m, len, 65535, now, &len) != 0)
            atomic_fetch_add(&srv.errors, 1);
        (void)reply_send(buf, len, fd, tcp, peer, plen);
    } else {
        bool axfr = get16(q + qend - 4) == WIRE_T_AXFR && tcp;
        int nmsg = axfr ? atomic_load(&srv.axfr_msgs) : 1;
        for (int i = 0; i < nmsg; i++) {
            if (axfr)
                len = make_txt_response(m, q, qlen, (unsigned)i * AXFR_RECS, AXFR_RECS, i == 0,
                                        i == nmsg - 1);
            else
                len = add_answer(m, resp_begin(m, q, qend), NULL, WIRE_T_SOA, rd, soa_rdata(rd));
            if (v == 0 && tsig_sign_response(&ctx, m, len, 65535, now, &len) != 0)
                atomic_fetch_add(&srv.errors, 1);
            if (i + 1 == atomic_load(&srv.corrupt_msg))
                m[len - 7] ^= 0x55; /* the MAC's last byte */
            if (!reply_send(buf, len, fd, tcp, peer, plen))
                break;
        }
    }
    tsig_ctx_clear(&ctx);
}

static void *server_main(void *arg)
{
    (void)arg;
    static uint8_t q[65535];
    while (!atomic_load(&srv.stop)) {
        struct pollfd pf[2] = {{srv.udp, POLLIN, 0}, {srv.tcp, POLLIN, 0}};
        if (poll(pf, 2, 50) <= 0)
            continue;
        if (pf[0].revents & POLLIN) {
            struct sockaddr_storage peer;
            socklen_t plen = sizeof(peer);
            ssize_t n = recvfrom(srv.udp, q, sizeof(q), 0, (struct sockaddr *)&peer, &plen);
            if (n > 0)
                serve_one(q, (size_t)n, srv.udp, false, &peer, plen);
        }
        if (pf[1].revents & POLLIN) {
            int c = accept4(srv.tcp, NULL, NULL, SOCK_CLOEXEC);
            if (c < 0)
                continue;
            set_timeouts(c, 2000);
            size_t n;
            while ((n = tcp_recv_msg(c, q)) > 0) /* kdig sends one query per connection */
                serve_one(q, n, c, true, NULL, 0);
            close(c);
        }
    }
    return NULL;
}

static int server_setup(void **state)
{
    (void)state;
    if (!tu_find_program("kdig", srv.kdig, sizeof(srv.kdig)) ||
        !tu_find_program("dig", srv.dig, sizeof(srv.dig))) {
        fprintf(stderr, "kdig or dig not found (install knot-dnsutils and bind9-dnsutils)\n");
        return -1;
    }
    for (size_t a = 0; a < TERN_ARRAY_SIZE(ALGS); a++) {
        char name[64];
        snprintf(name, sizeof(name), "k-%s", ALGS[a]);
        srv.keys[a] = make_key(name, ALGS[a], SECRET);
    }
    srv.keys[SRV_KEYS - 1] = make_key("xfr.key", "hmac-sha256", SECRET);
    srv.port = tu_free_port();
    struct sockaddr_storage ss;
    socklen_t sl = tu_sockaddr(&ss, AF_INET, "127.0.0.1", srv.port);
    srv.udp = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    srv.tcp = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1;
    setsockopt(srv.tcp, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(srv.udp, (struct sockaddr *)&ss, sl) != 0 ||
        bind(srv.tcp, (struct sockaddr *)&ss, sl) != 0 || listen(srv.tcp, 8) != 0)
        return -1;
    atomic_store(&srv.stop, false);
    return pthread_create(&srv.th, NULL, server_main, NULL) == 0 ? 0 : -1;
}

static int server_teardown(void **state)
{
    (void)state;
    atomic_store(&srv.stop, true);
    pthread_join(srv.th, NULL);
    close(srv.udp);
    close(srv.tcp);
    return 0;
}

/* Run kdig (or BIND's dig) against our server with args; its exit status, its output (stdout
 * and stderr) in out. timeout(1) bounds it whatever happens. */
static int run_client(bool bind_dig, char *out, size_t outlen, const char *args)
{
    char dir[64], cmd[1024], path[128];
    tu_mkdtemp(dir, sizeof(dir), "tern-tsig-kdig");
    snprintf(path, sizeof(path), "%s/out", dir);
    snprintf(cmd, sizeof(cmd), "timeout 20 '%s' @127.0.0.1 -p %u %s %s > '%s' 2>&1",
             bind_dig ? srv.dig : srv.kdig, srv.port,
             bind_dig ? "+tries=1 +time=3" : "+retry=0 +timeout=3", args, path);
    int st = system(cmd);
    char *text = read_text(path);
    snprintf(out, outlen, "%s", text);
    if (getenv("TSIG_TEST_VERBOSE"))
        fprintf(stderr, "$ %s\n%s\n", cmd, text);
    free(text);
    tu_rmtree(dir);
    assert_true(WIFEXITED(st));
    assert_int_not_equal(WEXITSTATUS(st), 124); /* timeout(1) had to stop it */
    return WEXITSTATUS(st);
}

static int run_kdig(char *out, size_t outlen, const char *args)
{
    return run_client(false, out, outlen, args);
}

static void expect_in(const char *out, const char *what)
{
    if (!strstr(out, what))
        fail_msg("kdig's output lacks \"%s\":\n%s", what, out);
}

static void expect_not_in(const char *out, const char *what)
{
    if (strstr(out, what))
        fail_msg("kdig's output has \"%s\":\n%s", what, out);
}

static void test_kdig_algorithms(void **state)
{
    (void)state;
    static char out[1 << 16];
    char args[512];
    for (size_t a = 0; a < TERN_ARRAY_SIZE(ALGS); a++) {
        for (int tcp = 0; tcp < 2; tcp++) {
            snprintf(args, sizeof(args), "-y %s:k-%s:%s big.test SOA %s", ALGS[a], ALGS[a], SECRET,
                     tcp ? "+tcp" : "+notcp");
            int before = atomic_load(&srv.requests);
            assert_int_equal(run_kdig(out, sizeof(out), args), 0);
            assert_int_equal(atomic_load(&srv.requests), before + 1);
            assert_int_equal(atomic_load(&srv.last_verify), 0);
            expect_in(out, "status: NOERROR");
            expect_in(out, "TSIG PSEUDOSECTION");
            expect_not_in(out, "WARNING");
            expect_not_in(out, ";; ERROR");
        }
    }
    /* unsigned: answered unsigned */
    assert_int_equal(run_kdig(out, sizeof(out), "big.test SOA +notcp"), 0);
    assert_int_equal(atomic_load(&srv.last_verify), TERN_ENOENT);
    expect_in(out, "status: NOERROR");
    expect_not_in(out, "TSIG");
    assert_int_equal(atomic_load(&srv.errors), 0);
}

static void test_kdig_refused(void **state)
{
    (void)state;
    static char out[1 << 16];
    char args[512];
    /* a wrong secret: NOTAUTH with TSIG error BADSIG, unsigned (kdig shows the TSIG error as
     * the status and warns that the answer is not signed) */
    snprintf(args, sizeof(args), "-y hmac-sha256:xfr.key:%s big.test SOA +notcp", OTHER_SECRET);
    (void)run_kdig(out, sizeof(out), args);
    assert_int_equal(atomic_load(&srv.last_verify), TSIG_BADSIG);
    expect_in(out, "status: BADSIG");
    expect_in(out, "\tTSIG\thmac-sha256. ");
    expect_in(out, " 300 0 "); /* fudge, then MAC size 0 */
    /* a key we do not know: BADKEY; over TCP an AXFR stops there */
    snprintf(args, sizeof(args), "-y hmac-sha256:nobody.key:%s big.test SOA +notcp", SECRET);
    (void)run_kdig(out, sizeof(out), args);
    assert_int_equal(atomic_load(&srv.last_verify), TSIG_BADKEY);
    expect_in(out, "status: BADKEY");
    snprintf(args, sizeof(args), "-y hmac-sha256:nobody.key:%s big.test AXFR", SECRET);
    atomic_store(&srv.axfr_msgs, 3);
    assert_int_not_equal(run_kdig(out, sizeof(out), args), 0);
    expect_in(out, "server replied with error 'BADKEY'");
    /* a known name with another algorithm: BADKEY */
    snprintf(args, sizeof(args), "-y hmac-sha1:xfr.key:%s big.test AXFR", SECRET);
    assert_int_not_equal(run_kdig(out, sizeof(out), args), 0);
    assert_int_equal(atomic_load(&srv.last_verify), TSIG_BADKEY);
    expect_in(out, "server replied with error 'BADKEY'");
    snprintf(args, sizeof(args), "-y hmac-sha256:xfr.key:%s big.test AXFR", OTHER_SECRET);
    assert_int_not_equal(run_kdig(out, sizeof(out), args), 0);
    expect_in(out, "server replied with error 'BADSIG'");
    /* our clock 400 s ahead: BADTIME, signed: kdig verifies it (no warning) and shows it */
    atomic_store(&srv.clock_skew, 400);
    snprintf(args, sizeof(args), "-y hmac-sha256:xfr.key:%s big.test SOA +notcp", SECRET);
    (void)run_kdig(out, sizeof(out), args);
    atomic_store(&srv.clock_skew, 0);
    assert_int_equal(atomic_load(&srv.last_verify), TSIG_BADTIME);
    expect_in(out, "status: BADTIME");
    expect_in(out, " BADTIME 6 "); /* Other Data: our clock */
    /* kdig checked the MAC first: its complaint is the time, not the signature */
    expect_in(out, "(TSIG out of time window)");
    expect_not_in(out, "failed to verify");
    assert_int_equal(atomic_load(&srv.errors), 0);
}

/* A 5-message AXFR, every message signed. kdig 3.2 verifies only the first message of a
 * transfer, so BIND's dig, which verifies every one, is the oracle for the rest. */
static void test_kdig_axfr(void **state)
{
    (void)state;
    static char out[1 << 20];
    char args[512], want[64];
    snprintf(args, sizeof(args), "-y hmac-sha256:xfr.key:%s big.test AXFR", SECRET);
    atomic_store(&srv.axfr_msgs, 5);
    assert_int_equal(run_kdig(out, sizeof(out), args), 0);
    assert_int_equal(atomic_load(&srv.last_verify), 0);
    snprintf(want, sizeof(want), "(5 messages, %d records)", 5 * AXFR_RECS + 2);
    expect_in(out, want);
    expect_not_in(out, "WARNING");
    expect_not_in(out, ";; ERROR");
    assert_int_equal(run_client(true, out, sizeof(out), args), 0);
    snprintf(want, sizeof(want), "XFR size: %d records (messages 5", 5 * AXFR_RECS + 2);
    expect_in(out, want);
    expect_not_in(out, "verify");
    /* the MAC of the first message damaged: kdig refuses the transfer */
    atomic_store(&srv.corrupt_msg, 1);
    int rc = run_kdig(out, sizeof(out), args);
    assert_int_not_equal(rc, 0);
    expect_in(out, "reply verification");
    /* the MAC of message 3 damaged: dig reports it after message 2's records, before
     * message 3's (it goes on printing, and fails message 4 too: the chain is broken) */
    atomic_store(&srv.corrupt_msg, 3);
    (void)run_client(true, out, sizeof(out), args);
    atomic_store(&srv.corrupt_msg, 0);
    const char *failure = strstr(out, "tsig verify failure");
    const char *end2 = strstr(out, "r39.big.test."), *start3 = strstr(out, "r40.big.test.");
    if (!failure || !end2 || !start3 || failure < end2 || failure > start3)
        fail_msg("dig did not catch message 3:\n%s", out);
    assert_int_equal(atomic_load(&srv.errors), 0);
}

int main(void)
{
    const struct CMUnitTest local[] = {
        cmocka_unit_test(test_key_init),      cmocka_unit_test(test_key_init_errors),
        cmocka_unit_test(test_bind_several),  cmocka_unit_test(test_bind_generated),
        cmocka_unit_test(test_bind_errors),   cmocka_unit_test(test_roundtrip_all_algorithms),
        cmocka_unit_test(test_original_id),   cmocka_unit_test(test_server_refusals),
        cmocka_unit_test(test_badtime),       cmocka_unit_test(test_client_checks),
        cmocka_unit_test(test_truncation),    cmocka_unit_test(test_unsigned_between),
        cmocka_unit_test(test_room),          cmocka_unit_test(test_hostile_placement),
        cmocka_unit_test(test_hostile_names), cmocka_unit_test(test_hostile_random),
        cmocka_unit_test(test_ldns),
    };
    const struct CMUnitTest with_knot[] = {
        cmocka_unit_test(test_knot_axfr),
        cmocka_unit_test(test_knot_refusals),
        cmocka_unit_test(test_knot_udp),
    };
    const struct CMUnitTest with_kdig[] = {
        cmocka_unit_test(test_kdig_algorithms),
        cmocka_unit_test(test_kdig_refused),
        cmocka_unit_test(test_kdig_axfr),
    };
    int failed = cmocka_run_group_tests_name("tsig", local, NULL, NULL);
    failed += cmocka_run_group_tests_name("tsig with knotd", with_knot, knot_setup, knot_teardown);
    failed +=
        cmocka_run_group_tests_name("tsig with kdig", with_kdig, server_setup, server_teardown);
    return failed;
}
