/* Unit tests for the mapped ASN table: the ECS prefixes against a brute force over every address
 * of generated tables (both descents: AVX2 where the CPU has it, and the portable one forced by
 * TERN_ASN_TABLE_SCALAR), files the loader must refuse: truncated, foreign, corrupt, or with
 * broken search invariants under a right checksum, and the source record of a table compiled from
 * a MaxMind DB (fixtures from tests/data/make_mmdb.pl). Tables are compiled (asn_compile) into a
 * mkdtemp() directory. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "asn_test_util.h"

#include <arpa/inet.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tern/common/err.h"
#include "tern/common/hash.h"

/* ------------------------------------------------------------------------------------------ */
/* ECS prefixes: against the definition, by brute force over the naive model */

static int u128_cmp(const void *a, const void *b)
{
    u128 x = *(const u128 *)a, y = *(const u128 *)b;
    return x < y ? -1 : x > y;
}

/* The addresses where the naive model's ASN changes (and 0), sorted: every candidate range start
 * and end + 1 whose ASN differs from the address before it. out holds 2n + 1. */
static size_t naive_bounds(const struct mrange *r, size_t n, u128 max, u128 *out)
{
    size_t m = 0;
    out[m++] = 0;
    for (size_t i = 0; i < n; i++) {
        u128 c[2] = {r[i].start, r[i].end + 1};
        for (int k = 0; k < 2; k++) {
            if ((k == 1 && r[i].end == max) || c[k] == 0)
                continue;
            if (naive(r, n, c[k]) != naive(r, n, c[k] - 1))
                out[m++] = c[k];
        }
    }
    qsort(out, m, sizeof(*out), u128_cmp);
    size_t u = 0;
    for (size_t i = 0; i < m; i++)
        if (u == 0 || out[i] != out[u - 1])
            out[u++] = out[i];
    return u;
}

/* By the definition: the largest aligned block around x that no boundary splits (b splits
 * [lo, hi] when lo < b <= hi), as a prefix length. */
static unsigned brute_prefix(const u128 *b, size_t nb, u128 x, unsigned w)
{
    for (unsigned k = w;; k--) {
        u128 mask = k == 128 ? ~(u128)0 : ((u128)1 << k) - 1, lo = x & ~mask, hi = x | mask;
        size_t a = 0, z = nb; /* first boundary > lo */
        while (a < z) {
            size_t mid = a + (z - a) / 2;
            if (b[mid] <= lo)
                a = mid + 1;
            else
                z = mid;
        }
        if (a == nb || b[a] > hi)
            return w - k;
    }
}

static void check_prefix(asn_table_t *const t[2], const struct mrange *r, size_t n, const u128 *b,
                         size_t nb, u128 x, bool is6)
{
    uint32_t want = naive(r, n, x);
    unsigned want_p = brute_prefix(b, nb, x, is6 ? 128 : 32);
    for (int mode = 0; mode < 2; mode++) {
        uint8_t p = 0xEE, a6[16];
        uint32_t got;
        if (is6) {
            to_bytes(x, a6);
            got = asn_table_lookup_v6_prefix(t[mode], a6, &p);
        } else {
            got = asn_table_lookup_v4_prefix(t[mode], (uint32_t)x, &p);
        }
        if (got != want || p != want_p) {
            char sa[64];
            fmt_addr(sa, sizeof(sa), x, is6);
            fail_msg("%s (mode %d): want AS%u /%u, got AS%u /%u", sa, mode, want, want_p, got, p);
        }
    }
}

/* x - 2 .. x + 2, those inside [0, max] */
static void check_around(asn_table_t *const t[2], const struct mrange *r, size_t n, const u128 *b,
                         size_t nb, u128 x, u128 max, bool is6)
{
    for (int d = -2; d <= 2; d++) {
        if ((d < 0 && x < (u128)-d) || (d > 0 && max - x < (u128)d))
            continue;
        check_prefix(t, r, n, b, nb, d < 0 ? x - (u128)-d : x + (u128)d, is6);
    }
}

static asn_table_t *const *compile_both(const struct mrange *r, size_t n, bool is6,
                                        asn_table_t *t[2])
{
    const char *in = path_of(is6 ? "pfx6.csv" : "pfx4.csv");
    FILE *fp = fopen(in, "w");
    assert_non_null(fp);
    for (size_t i = 0; i < n; i++) {
        char sa[64], sb[64];
        fmt_addr(sa, sizeof(sa), r[i].start, is6);
        fmt_addr(sb, sizeof(sb), r[i].end, is6);
        fprintf(fp, "%s,%s,%u,n\n", sa, sb, r[i].asn);
    }
    fclose(fp);
    const char *inputs[] = {in}, *out = path_of("pfx.asn");
    if (asn_compile(inputs, 1, out, NULL, errbuf, sizeof(errbuf)))
        fail_msg("compile: %s", errbuf);
    t[0] = open_mode(out, 0);
    t[1] = open_mode(out, 1);
    return t;
}

static void test_prefix_examples(void **state)
{
    (void)state;
    asn_table_t *t = compile_open("1.0.0.0,1.0.0.255,13335,a\n"
                                  "1.0.4.0,1.0.7.255,38803,b\n"
                                  "2001:db8::,2001:db8:ffff:ffff:ffff:ffff:ffff:ffff,64500,c\n"
                                  "2001:db8:0:1::5,2001:db8:0:1::5,65000,d\n",
                                  NULL);
    struct {
        const char *a;
        uint32_t asn;
        uint8_t prefix;
    } cases[] = {
        {"1.0.0.7", 13335, 24},
        {"1.0.5.1", 38803, 22},
        {"1.0.1.0", 0, 24},
        {"1.0.2.0", 0, 23},
        {"0.0.0.1", 0, 8},
        {"1.0.8.0", 0, 21},
        {"255.255.255.255", 0, 1},
        {"2001:db8:8000::", 64500, 33},
        {"2001:db8:1::", 64500, 48},
        {"2001:db8:0:1::5", 65000, 128},
        {"2001:db8:0:1::4", 64500, 128},
        {"2001:db8:0:1::6", 64500, 127},
        {"2001:db8:0:1:8000::", 64500, 65},
        {"2001:db8:0:2::", 64500, 63},
        {"2001:db8:0:4::", 64500, 62},
        {"2001:db8::1", 64500, 64},
        {"::1", 0, 3},
        {"ffff::", 0, 1},
    };
    for (size_t i = 0; i < TERN_ARRAY_SIZE(cases); i++) {
        uint8_t p = 0xEE, b[16];
        uint32_t got;
        if (strchr(cases[i].a, ':')) {
            assert_int_equal(inet_pton(AF_INET6, cases[i].a, b), 1);
            got = asn_table_lookup_v6_prefix(t, b, &p);
        } else {
            got = asn_table_lookup_v4_prefix(t, v4(cases[i].a), &p);
        }
        if (got != cases[i].asn || p != cases[i].prefix)
            fail_msg("%s: want AS%u /%u, got AS%u /%u", cases[i].a, cases[i].asn, cases[i].prefix,
                     got, p);
    }
    asn_table_close(t);

    /* one entry for the whole space: /0, also for the all-ones addresses */
    t = compile_open("0.0.0.0,255.255.255.255,100,a\n::,ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff,"
                     "200,b\n",
                     NULL);
    uint8_t p = 0xEE, b[16];
    assert_int_equal(asn_table_lookup_v4_prefix(t, UINT32_MAX, &p), 100);
    assert_int_equal(p, 0);
    assert_int_equal(asn_table_lookup_v4_prefix(t, 12345, &p), 100);
    assert_int_equal(p, 0);
    memset(b, 0xFF, 16);
    assert_int_equal(asn_table_lookup_v6_prefix(t, b, &p), 200);
    assert_int_equal(p, 0);
    asn_table_close(t);
}

/* Every address of a /16 window (with a margin) that random ranges crowd, plus every boundary
 * +-1 and the ends of the space; ranges partly aligned so that long prefixes occur. */
static void test_prefix_v4_exhaustive(void **state)
{
    (void)state;
    enum { NR = 300 };
    static struct mrange r[NR + 4];
    static u128 b[2 * (NR + 4) + 1];
    const u128 base = 0x0A000000u, max = UINT32_MAX;
    size_t n = 0;
    for (; n < NR; n++) {
        unsigned bits = (unsigned)(rnd() % 13);
        u128 start = base + rnd() % 65536, len = (u128)1 << bits;
        if (rnd() % 2)
            start &= ~(len - 1); /* an aligned block */
        else
            len = 1 + rnd() % len;
        r[n] = (struct mrange){start, start + len - 1, (uint32_t)(rnd() % 6)};
    }
    r[n++] = (struct mrange){0x0A000000u, 0x0AFFFFFFu, 9}; /* 10/8 around the window */
    r[n++] = (struct mrange){0, 5, 77};
    r[n++] = (struct mrange){max - 3, max, 78};
    r[n++] = (struct mrange){0x0B000000u, 0x0B000000u, 79}; /* a single address */
    asn_table_t *t[2];
    compile_both(r, n, false, t);
    size_t nb = naive_bounds(r, n, max, b);
    for (u128 x = base - 16384; x < base + 65536 + 16384; x++)
        check_prefix(t, r, n, b, nb, x, false);
    for (size_t i = 0; i < nb; i++)
        check_around(t, r, n, b, nb, b[i], max, false);
    for (u128 x = 0; x < 64; x++) {
        check_prefix(t, r, n, b, nb, x, false);
        check_prefix(t, r, n, b, nb, max - x, false);
    }
    for (int i = 0; i < 20000; i++)
        check_prefix(t, r, n, b, nb, (uint32_t)rnd(), false);
    asn_table_close(t[0]);
    asn_table_close(t[1]);
}

/* v6: ranges over a few /64s (some adjacent, some with gaps, so exceptions with and without a
 * following boundary) and the first and last /64 of the space, with boundaries in the first and
 * last 2048 addresses of a /64 (sub-/64 exceptions) or on /64 edges. Checked: every address of
 * those windows in every /64 around them, every boundary +-2, random addresses. */
#define LOW_WIN 2048u
static uint64_t lo_in_window(void)
{
    return rnd() % 2 ? rnd() % LOW_WIN : UINT64_MAX - rnd() % LOW_WIN;
}

static void test_prefix_v6_exhaustive(void **state)
{
    (void)state;
    enum { NR = 160 };
    static const uint64_t his[] = {0, 1, 2, 3, 5, 8, 9, 13}; /* /64s, offsets from h0 */
    static struct mrange r[NR + 8];
    static u128 b[2 * (NR + 8) + 1];
    const uint64_t h0 = 0x20010db800000000ull;
    const u128 max = ~(u128)0;
    size_t n = 0;
    for (; n < NR; n++) {
        uint64_t ha = h0 + his[rnd() % 8], hb = rnd() % 3 ? ha : h0 + his[rnd() % 8];
        u128 x = (u128)ha << 64 | lo_in_window(), y = (u128)hb << 64 | lo_in_window();
        if (n % 10 == 0) { /* whole /64s */
            x = (u128)ha << 64;
            y = (u128)hb << 64 | UINT64_MAX;
        }
        r[n] = (struct mrange){x < y ? x : y, x < y ? y : x, (uint32_t)(rnd() % 5)};
    }
    r[n++] = (struct mrange){(u128)(h0 - 16) << 64, (u128)(h0 + 24) << 64 | UINT64_MAX, 9};
    r[n++] = (struct mrange){0, 5, 77}; /* exception in the first /64 */
    r[n++] = (struct mrange){(u128)1 << 64 | 7, (u128)1 << 64 | 7, 76};
    r[n++] = (struct mrange){max - 3, max, 78}; /* ... and in the last */
    r[n++] = (struct mrange){max - ((u128)1 << 64) - 9, max - ((u128)1 << 64) + 2, 79};
    asn_table_t *t[2];
    compile_both(r, n, true, t);
    size_t nb = naive_bounds(r, n, max, b);
    static const uint64_t near[] = {0, 1, 2, UINT64_MAX - 2, UINT64_MAX - 1, UINT64_MAX};
    for (uint64_t h = h0 - 1; h <= h0 + 14; h++)
        for (uint64_t lo = 0; lo < LOW_WIN; lo++) {
            check_prefix(t, r, n, b, nb, (u128)h << 64 | lo, true);
            check_prefix(t, r, n, b, nb, (u128)h << 64 | (UINT64_MAX - lo), true);
        }
    for (size_t i = 0; i < TERN_ARRAY_SIZE(near); i++)
        for (uint64_t lo = 0; lo < LOW_WIN; lo++) {
            check_prefix(t, r, n, b, nb, (u128)near[i] << 64 | lo, true);
            check_prefix(t, r, n, b, nb, (u128)near[i] << 64 | (UINT64_MAX - lo), true);
        }
    for (size_t i = 0; i < nb; i++)
        check_around(t, r, n, b, nb, b[i], max, true);
    for (int i = 0; i < 20000; i++) {
        u128 x = (u128)rnd() << 64 | rnd();
        if (i % 2)
            x = (u128)(h0 - 20 + rnd() % 50) << 64 | rnd();
        check_prefix(t, r, n, b, nb, x, true);
    }
    asn_table_close(t[0]);
    asn_table_close(t[1]);
}

/* ------------------------------------------------------------------------------------------ */

static void expect_open_fails(const unsigned char *data, size_t len, const char *msg)
{
    const char *p = path_of("corrupt.asn");
    FILE *fp = fopen(p, "wb");
    assert_non_null(fp);
    if (len)
        assert_int_equal(fwrite(data, 1, len, fp), len);
    fclose(fp);
    errbuf[0] = '\0';
    assert_null(asn_table_open(p, errbuf, sizeof(errbuf)));
    if (!strstr(errbuf, msg))
        fail_msg("got '%s', want '%s'", errbuf, msg);
}

static void test_corrupt_files(void **state)
{
    (void)state;
    asn_table_t *t = compile_open("1.0.0.0\t1.0.0.255\t13335\tUS\tCLOUDFLARENET\n"
                                  "2001:db8::\t2001:db8::ffff\t64500\tDE\tEXAMPLE-V6\n",
                                  NULL);
    asn_table_close(t);
    size_t len;
    unsigned char *good = slurp(path_of("out.asn"), &len);
    unsigned char *b = malloc(len);
    assert_non_null(b);

    expect_open_fails(good, 0, "truncated");
    expect_open_fails(good, 50, "truncated");
    expect_open_fails(good, len - 1, "truncated");

    memcpy(b, good, len);
    b[0] = 'X';
    expect_open_fails(b, len, "bad magic");

    memcpy(b, good, len);
    b[8] = 1; /* the v1 layout (plain sorted arrays) is no longer read */
    expect_open_fails(b, len, "unsupported version 1");
    b[8] = 2; /* nor v2 (B+ tree with the ASNs apart) */
    expect_open_fails(b, len, "unsupported version 2 (expected 3; recompile the table)");
    b[8] = 4;
    expect_open_fails(b, len, "unsupported version 4");

    for (size_t off = 96; off < len; off += 7) {
        memcpy(b, good, len);
        b[off] ^= 0x10;
        expect_open_fails(b, len, "checksum mismatch");
    }

    memcpy(b, good, len);
    b[32] = 0xF8; /* v4 section offset far beyond the file */
    expect_open_fails(b, len, "outside the file");

    errbuf[0] = '\0';
    assert_null(asn_table_open(path_of("missing.asn"), errbuf, sizeof(errbuf)));
    assert_non_null(strstr(errbuf, "missing.asn"));
    assert_null(asn_table_open(path_of("missing.asn"), NULL, 0));
    /* replaced by a FIFO or a directory: refused at once, never a blocked open */
    assert_int_equal(mkfifo(path_of("fifo.asn"), 0600), 0);
    assert_null(asn_table_open(path_of("fifo.asn"), errbuf, sizeof(errbuf)));
    assert_non_null(strstr(errbuf, "is not a regular file (a FIFO)"));
    unlink(path_of("fifo.asn"));
    assert_null(asn_table_open("/tmp", errbuf, sizeof(errbuf)));
    assert_non_null(strstr(errbuf, "is a directory"));

    free(b);
    free(good);
}

static uint64_t get64(const unsigned char *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

/* Patch b (len bytes) at off with n bytes of v, fix the checksum, expect "corrupt table". */
static void expect_corrupt(const unsigned char *good, unsigned char *b, size_t len, size_t off,
                           uint64_t v, size_t n)
{
    memcpy(b, good, len);
    memcpy(b + off, &v, n); /* little-endian, as the file */
    refresh_crc(b, len);
    expect_open_fails(b, len, "corrupt table");
}

/* Files with a right checksum but broken search invariants (as a foreign compiler could write):
 * the loader must refuse them, since lookups trust them. */
static void test_corrupt_structure(void **state)
{
    (void)state;
    char text[4096];
    size_t o = 0;
    for (int i = 0; i < 40; i++) /* 40 v4 entries + gaps: several leaves, one internal level */
        o += (size_t)snprintf(text + o, sizeof(text) - o, "1.0.%d.0,1.0.%d.255,%d,n\n", 2 * i,
                              2 * i, 100 + i);
    /* v6: boundaries ::0 (0), ::1 (5), ::3 (0): the /64 :: is an exception, entry 1 (::1:0:0:0:0)
     * closes it */
    snprintf(text + o, sizeof(text) - o, "::1,::2,5,x\n");
    asn_table_close(compile_open(text, NULL));
    size_t len;
    unsigned char *good = slurp(path_of("out.asn"), &len);
    unsigned char *b = malloc(len);
    assert_non_null(b);
    memcpy(b, good, len);
    asn_table_t *t = open_mode(path_of("out.asn"), 0);
    uint8_t p;
    uint8_t a6[16] = {0};
    a6[15] = 2;
    assert_int_equal(asn_table_lookup_v6_prefix(t, a6, &p), 5);
    assert_int_equal(p, 128);
    a6[15] = 4;
    assert_int_equal(asn_table_lookup_v6_prefix(t, a6, &p), 0);
    assert_int_equal(p, 126);
    asn_table_close(t);

    size_t v4 = (size_t)get64(good + 32), v6 = (size_t)get64(good + 40);
    /* v4: 81 entries (40 ranges, 40 gaps, 0) = 6 leaves of 128 bytes, then level 1 (6 keys) */
    size_t lv1 = v4 + 6 * 128;
    expect_corrupt(good, b, len, lv1 + 4, 0x80000000u ^ 0x01000300u, 4); /* not leaf 1's key 0 */
    expect_corrupt(good, b, len, lv1 + 6 * 4, 0, 4);                     /* a pad key */
    expect_corrupt(good, b, len, v4 + 5 * 128 + 64 + 4 * 15, 1, 4);      /* a pad lane's ASN */
    expect_corrupt(good, b, len, v4 + 4, 0x80000000u, 4);                /* keys not ascending */
    expect_corrupt(good, b, len, v4, 0x80000001u, 4);                    /* key 0 != 0 */
    /* v6 leaf: u64 key[5], u32 asn[5], u32 exception bits (entry 0 = exception 0) */
    expect_corrupt(good, b, len, v6 + 60, 0, 4);           /* the exception bit cleared */
    expect_corrupt(good, b, len, v6 + 60, 3, 4);           /* entry 1 marked as an exception */
    expect_corrupt(good, b, len, v6 + 60, 1 | 1u << 4, 4); /* a pad lane marked */
    expect_corrupt(good, b, len, v6 + 40, 1, 4);           /* exception index out of range */
    expect_corrupt(good, b, len, v6 + 8, 0x8000000000000002ull, 8); /* closing entry moved */
    free(b);
    free(good);
}

/* ------------------------------------------------------------------------------------------ */
/* source records */

/* A table compiled from one MaxMind DB ends with a record of it; other tables have none. */
static void test_source_record(void **state)
{
    (void)state;
    const char *db = fixture("asn_geolite.mmdb");
    const char *inputs[] = {db, write_file("more.csv", "9.9.9.0,9.9.9.255,19281,\"Quad9\"\n")};
    const char *out = path_of("src.asn");
    assert_int_equal(asn_compile(inputs, 1, out, NULL, errbuf, sizeof(errbuf)), 0);
    asn_table_t *t = open_mode(out, 0);
    asn_table_source_t r;
    assert_int_equal(asn_table_source(t, &r), 0);
    size_t len;
    unsigned char *bytes = slurp(db, &len);
    struct stat st;
    assert_int_equal(stat(db, &st), 0);
    assert_int_equal(r.size, len);
    assert_true(r.hash == tern_hash64(bytes, len, ASN_TABLE_SOURCE_SEED));
    assert_int_equal(r.dev, st.st_dev);
    assert_int_equal(r.ino, st.st_ino);
    assert_int_equal(r.mtime_sec, st.st_mtim.tv_sec);
    assert_int_equal(r.mtime_nsec, st.st_mtim.tv_nsec);
    assert_int_equal(r.ctime_sec, st.st_ctim.tv_sec);
    assert_int_equal(r.compiler, ASN_COMPILE_REVISION);
    assert_int_equal(asn_table_lookup_v4(t, v4("1.0.0.1")), 13335); /* the record is no section */
    asn_table_close(t);
    free(bytes);

    assert_int_equal(asn_compile(inputs, 2, out, NULL, errbuf, sizeof(errbuf)), 0);
    t = open_mode(out, 0); /* two inputs: no one source */
    assert_int_equal(asn_table_source(t, &r), TERN_ENOENT);
    asn_table_close(t);
    assert_int_equal(asn_compile(inputs + 1, 1, out, NULL, errbuf, sizeof(errbuf)), 0);
    t = open_mode(out, 0); /* text */
    assert_int_equal(asn_table_source(t, &r), TERN_ENOENT);
    asn_table_close(t);
}

/* Flags the reader does not know, and a source flag without its record, are refused. */
static void test_source_flags(void **state)
{
    (void)state;
    const char *inputs[] = {fixture("asn_geolite.mmdb")}, *out = path_of("src.asn");
    assert_int_equal(asn_compile(inputs, 1, out, NULL, errbuf, sizeof(errbuf)), 0);
    size_t len;
    unsigned char *good = slurp(out, &len), *b = malloc(len);
    assert_non_null(b);
    assert_int_equal(good[12], 1); /* ASN_F_SOURCE */
    memcpy(b, good, len);
    b[12] = 3;
    refresh_crc(b, len);
    expect_open_fails(b, len, "unsupported flags 0x3");
    memcpy(b, good, len);
    b[len - 1] = 1; /* the record's reserved word */
    refresh_crc(b, len);
    expect_open_fails(b, len, "the flags announce a source record that is not there");
    free(b);
    free(good);

    /* a text-compiled table (its strings run to the end) claiming a record */
    asn_table_close(compile_open("1.0.0.0,1.0.0.255,13335,\"a name long enough\"\n", NULL));
    good = slurp(path_of("out.asn"), &len);
    good[12] = 1;
    refresh_crc(good, len);
    expect_open_fails(good, len, "corrupt header");
    free(good);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_prefix_examples),      cmocka_unit_test(test_prefix_v4_exhaustive),
        cmocka_unit_test(test_prefix_v6_exhaustive), cmocka_unit_test(test_corrupt_files),
        cmocka_unit_test(test_corrupt_structure),    cmocka_unit_test(test_source_record),
        cmocka_unit_test(test_source_flags),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
