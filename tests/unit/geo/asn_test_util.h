/*
 * asn_test_util.h — helpers shared by the ASN compiler and table unit tests: a scratch directory
 * with files written into it, a compile-and-open shorthand, address helpers, and the naive model
 * of the overlap rule (tern/geo/asn_compile.h) the tables are checked against. Header-only
 * (static functions), so each test stays one executable. Include after <cmocka.h>.
 */
#ifndef TERN_TEST_GEO_ASN_TEST_UTIL_H
#define TERN_TEST_GEO_ASN_TEST_UTIL_H

#include <arpa/inet.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_util.h"

#include "tern/geo/asn_compile.h"
#include "tern/geo/asn_table.h"

__extension__ typedef unsigned __int128 u128;

static char tmpdir[256];
static char errbuf[512];

static inline int setup(void **state)
{
    (void)state;
    tu_mkdtemp(tmpdir, sizeof(tmpdir), "tern_asn");
    return 0;
}

static inline int teardown(void **state)
{
    (void)state;
    tu_rmtree(tmpdir);
    return 0;
}

static inline const char *path_of(const char *name)
{
    static char bufs[4][512];
    static int i;
    char *p = bufs[i++ % 4];
    snprintf(p, 512, "%s/%s", tmpdir, name);
    return p;
}

static inline const char *write_file(const char *name, const char *content)
{
    const char *p = path_of(name);
    FILE *fp = fopen(p, "w");
    assert_non_null(fp);
    fputs(content, fp);
    fclose(fp);
    return p;
}

static inline asn_table_t *compile_open(const char *content, asn_compile_stats_t *st)
{
    const char *in = write_file("in.txt", content);
    const char *out = path_of("out.asn");
    const char *inputs[] = {in};
    errbuf[0] = '\0';
    int rc = asn_compile(inputs, 1, out, st, errbuf, sizeof(errbuf));
    if (rc)
        fail_msg("compile: %s", errbuf);
    asn_table_t *t = asn_table_open(out, errbuf, sizeof(errbuf));
    if (!t)
        fail_msg("open: %s", errbuf);
    return t;
}

/* mode 0: the descent open picks (AVX2 where available); mode 1: the portable one */
static inline asn_table_t *open_mode(const char *path, int mode)
{
    if (mode)
        assert_int_equal(setenv("TERN_ASN_TABLE_SCALAR", "1", 1), 0);
    asn_table_t *t = asn_table_open(path, errbuf, sizeof(errbuf));
    unsetenv("TERN_ASN_TABLE_SCALAR");
    if (!t)
        fail_msg("open %s: %s", path, errbuf);
    return t;
}

static inline uint32_t v4(const char *s)
{
    struct in_addr a;
    assert_int_equal(inet_pton(AF_INET, s, &a), 1);
    return ntohl(a.s_addr);
}

static inline uint32_t look6(const asn_table_t *t, const char *s)
{
    uint8_t b[16];
    assert_int_equal(inet_pton(AF_INET6, s, b), 1);
    return asn_table_lookup_v6(t, b);
}

/* naive model: the covering range with the greatest start, then the smallest end, then the
 * latest line wins */

struct mrange {
    u128 start, end;
    uint32_t asn;
};

static inline uint32_t naive(const struct mrange *r, size_t n, u128 x)
{
    const struct mrange *best = NULL;
    for (size_t i = 0; i < n; i++) {
        if (r[i].start > x || r[i].end < x)
            continue;
        if (!best || r[i].start > best->start ||
            (r[i].start == best->start && r[i].end <= best->end))
            best = &r[i];
    }
    return best ? best->asn : 0;
}

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static inline uint64_t rnd(void)
{
    /* xorshift64*: fixed seed, reproducible */
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 0x2545F4914F6CDD1Dull;
}

static inline void fmt_addr(char *buf, size_t len, u128 v, bool is6)
{
    if (!is6) {
        struct in_addr a = {.s_addr = htonl((uint32_t)v)};
        inet_ntop(AF_INET, &a, buf, (socklen_t)len);
        return;
    }
    uint8_t b[16];
    for (int i = 15; i >= 0; i--) {
        b[i] = (uint8_t)v;
        v >>= 8;
    }
    inet_ntop(AF_INET6, b, buf, (socklen_t)len);
}

static inline void to_bytes(u128 v, uint8_t b[16])
{
    for (int i = 15; i >= 0; i--) {
        b[i] = (uint8_t)v;
        v >>= 8;
    }
}

static inline uint32_t table_lookup(const asn_table_t *t, u128 x, bool is6)
{
    if (!is6)
        return asn_table_lookup_v4(t, (uint32_t)x);
    uint8_t b[16];
    to_bytes(x, b);
    return asn_table_lookup_v6(t, b);
}

/* The whole file at p, malloc'd; *len its size. */
static inline unsigned char *slurp(const char *p, size_t *len)
{
    FILE *fp = fopen(p, "rb");
    assert_non_null(fp);
    fseek(fp, 0, SEEK_END);
    long n = ftell(fp);
    fseek(fp, 0, SEEK_SET);
    unsigned char *b = malloc((size_t)n);
    assert_non_null(b);
    assert_int_equal(fread(b, 1, (size_t)n, fp), (size_t)n);
    fclose(fp);
    *len = (size_t)n;
    return b;
}

/* tmpdir/name holds len bytes of data afterwards; returns its path. */
static inline const char *write_bytes(const char *name, const void *data, size_t len)
{
    const char *p = path_of(name);
    FILE *fp = fopen(p, "wb");
    assert_non_null(fp);
    if (len)
        assert_int_equal(fwrite(data, 1, len, fp), len);
    assert_int_equal(fclose(fp), 0);
    return p;
}

/* The path of a MaxMind DB fixture written by tests/data/make_mmdb.pl (ctest's setup test puts
 * them in TERN_GEOIP_DATA). */
static inline const char *fixture(const char *name)
{
    static char buf[512];
    const char *dir = getenv("TERN_GEOIP_DATA");
    if (!dir || !*dir)
        fail_msg("TERN_GEOIP_DATA is not set (run through ctest: it writes the fixtures)");
    snprintf(buf, sizeof(buf), "%s/%s", dir, name);
    return buf;
}

/* CRC-32 (IEEE) written independently of the table's, to forge files with a right checksum. */
static inline uint32_t crc32_ieee(const unsigned char *p, size_t n)
{
    uint32_t crc = 0xFFFFFFFFu;
    for (size_t i = 0; i < n; i++) {
        crc ^= p[i];
        for (int k = 0; k < 8; k++)
            crc = (crc & 1) ? 0xEDB88320u ^ (crc >> 1) : crc >> 1;
    }
    return crc ^ 0xFFFFFFFFu;
}

/* Recompute the payload checksum of the table file image b (len bytes) after a patch. */
static inline void refresh_crc(unsigned char *b, size_t len)
{
    uint32_t crc = crc32_ieee(b + 96, len - 96);
    memcpy(b + 80, &crc, 4); /* little-endian, as the file */
}

#endif
