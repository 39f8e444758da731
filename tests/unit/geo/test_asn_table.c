/* Unit tests for the ASN table: both input formats, overlap rule, boundaries and random lookups
 * against a naive scan of the input ranges, the ECS prefixes against a brute force over every
 * address of generated tables, bad input lines, corrupt files. Lookups run through both descents
 * (AVX2 where the CPU has it, and the portable one forced by TERN_ASN_TABLE_SCALAR). Fixtures are
 * generated into a mkdtemp() directory. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "test_util.h"

#include <arpa/inet.h>
#include <unistd.h>

#include "tern/common/err.h"
#include "tern/geo/asn_table.h"

__extension__ typedef unsigned __int128 u128;

static char tmpdir[256];
static char errbuf[512];

static int setup(void **state)
{
    (void)state;
    tu_mkdtemp(tmpdir, sizeof(tmpdir), "tern_asn");
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    tu_rmtree(tmpdir);
    return 0;
}

static const char *path_of(const char *name)
{
    static char bufs[4][512];
    static int i;
    char *p = bufs[i++ % 4];
    snprintf(p, 512, "%s/%s", tmpdir, name);
    return p;
}

static const char *write_file(const char *name, const char *content)
{
    const char *p = path_of(name);
    FILE *fp = fopen(p, "w");
    assert_non_null(fp);
    fputs(content, fp);
    fclose(fp);
    return p;
}

static asn_table_t *compile_open(const char *content, asn_table_compile_stats_t *st)
{
    const char *in = write_file("in.txt", content);
    const char *out = path_of("out.asn");
    const char *inputs[] = {in};
    errbuf[0] = '\0';
    int rc = asn_table_compile_ex(inputs, 1, out, st, errbuf, sizeof(errbuf));
    if (rc)
        fail_msg("compile: %s", errbuf);
    asn_table_t *t = asn_table_open(out, errbuf, sizeof(errbuf));
    if (!t)
        fail_msg("open: %s", errbuf);
    return t;
}

/* mode 0: the descent open picks (AVX2 where available); mode 1: the portable one */
static asn_table_t *open_mode(const char *path, int mode)
{
    if (mode)
        assert_int_equal(setenv("TERN_ASN_TABLE_SCALAR", "1", 1), 0);
    asn_table_t *t = asn_table_open(path, errbuf, sizeof(errbuf));
    unsetenv("TERN_ASN_TABLE_SCALAR");
    if (!t)
        fail_msg("open %s: %s", path, errbuf);
    return t;
}

static uint32_t v4(const char *s)
{
    struct in_addr a;
    assert_int_equal(inet_pton(AF_INET, s, &a), 1);
    return ntohl(a.s_addr);
}

static uint32_t look6(const asn_table_t *t, const char *s)
{
    uint8_t b[16];
    assert_int_equal(inet_pton(AF_INET6, s, b), 1);
    return asn_table_lookup_v6(t, b);
}

/* ------------------------------------------------------------------------------------------ */

static void test_tsv_basic(void **state)
{
    (void)state;
    asn_table_compile_stats_t st;
    asn_table_t *t = compile_open("# iptoasn\n"
                                  "1.0.0.0\t1.0.0.255\t13335\tUS\tCLOUDFLARENET\n"
                                  "\n"
                                  "1.0.4.0\t1.0.7.255\t38803\tAU\tWPL-AS-AP Wirefreebroadband\r\n"
                                  "2.0.0.0\t2.0.0.0\t0\tNone\tNot routed\n"
                                  "2001:db8::\t2001:db8::ffff\t64500\tDE\tEXAMPLE-V6\n"
                                  "2001:db8:1::\t2001:db8:1:0:ffff:ffff:ffff:ffff\t64501\n",
                                  &st);
    assert_int_equal(st.lines, 5);
    assert_int_equal(st.ranges_v4, 3);
    assert_int_equal(st.ranges_v6, 2);
    assert_int_equal(st.overlaps, 0);
    assert_int_equal(asn_table_lookup_v4(t, v4("0.255.255.255")), 0);
    assert_int_equal(asn_table_lookup_v4(t, v4("1.0.0.0")), 13335);
    assert_int_equal(asn_table_lookup_v4(t, v4("1.0.0.255")), 13335);
    assert_int_equal(asn_table_lookup_v4(t, v4("1.0.1.0")), 0); /* gap */
    assert_int_equal(asn_table_lookup_v4(t, v4("1.0.3.255")), 0);
    assert_int_equal(asn_table_lookup_v4(t, v4("1.0.4.0")), 38803);
    assert_int_equal(asn_table_lookup_v4(t, v4("1.0.7.255")), 38803);
    assert_int_equal(asn_table_lookup_v4(t, v4("1.0.8.0")), 0);
    assert_int_equal(asn_table_lookup_v4(t, v4("255.255.255.255")), 0);
    assert_int_equal(asn_table_lookup_v4(t, 0), 0);
    assert_int_equal(look6(t, "::"), 0);
    assert_int_equal(look6(t, "2001:db7:ffff:ffff:ffff:ffff:ffff:ffff"), 0);
    assert_int_equal(look6(t, "2001:db8::"), 64500);
    assert_int_equal(look6(t, "2001:db8::ffff"), 64500);
    assert_int_equal(look6(t, "2001:db8::1:0"), 0);
    assert_int_equal(look6(t, "2001:db8:1::"), 64501);
    assert_int_equal(look6(t, "2001:db8:1:0:ffff:ffff:ffff:ffff"), 64501);
    assert_int_equal(look6(t, "2001:db8:1:1::"), 0);
    assert_int_equal(look6(t, "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff"), 0);

    const char *cc, *name;
    size_t cl, nl;
    assert_int_equal(asn_table_info(t, 38803, &cc, &cl, &name, &nl), 0);
    assert_int_equal(cl, 2);
    assert_memory_equal(cc, "AU", 2);
    assert_int_equal(nl, strlen("WPL-AS-AP Wirefreebroadband"));
    assert_memory_equal(name, "WPL-AS-AP Wirefreebroadband", nl);
    assert_int_equal(asn_table_info(t, 64501, &cc, &cl, &name, &nl), TERN_ENOENT);
    assert_int_equal(asn_table_info(t, 0, NULL, NULL, NULL, NULL), TERN_ENOENT);
    assert_int_equal(asn_table_info(t, 12345, NULL, NULL, NULL, NULL), TERN_ENOENT);
    asn_table_close(t);
}

static void test_csv_quoted(void **state)
{
    (void)state;
    asn_table_t *t = compile_open("1.0.0.0,1.0.0.255,13335,\"Cloudflare, Inc.\"\n"
                                  "1.0.1.0,1.0.1.255,AS4134,Chinanet\n"
                                  "1.0.2.0,1.0.2.255,64510,\"He said \"\"hi\"\", twice\"\n"
                                  "1.0.3.0 , 1.0.3.255 , 64511 , spaced name \n"
                                  "2001:db8::,2001:db8::ff,64512,\"v6, with comma\"\n"
                                  "1.0.4.0\t1.0.4.255\t64513\tNL\tmixed in one file\n",
                                  NULL);
    const char *cc, *name;
    size_t cl, nl;
    assert_int_equal(asn_table_lookup_v4(t, v4("1.0.0.7")), 13335);
    assert_int_equal(asn_table_lookup_v4(t, v4("1.0.1.7")), 4134);
    assert_int_equal(asn_table_lookup_v4(t, v4("1.0.2.7")), 64510);
    assert_int_equal(asn_table_lookup_v4(t, v4("1.0.3.255")), 64511);
    assert_int_equal(asn_table_lookup_v4(t, v4("1.0.4.0")), 64513);
    assert_int_equal(look6(t, "2001:db8::80"), 64512);
    assert_int_equal(asn_table_info(t, 13335, &cc, &cl, &name, &nl), 0);
    assert_int_equal(cl, 0);
    assert_int_equal(nl, strlen("Cloudflare, Inc."));
    assert_memory_equal(name, "Cloudflare, Inc.", nl);
    assert_int_equal(asn_table_info(t, 64510, NULL, NULL, &name, &nl), 0);
    assert_int_equal(nl, strlen("He said \"hi\", twice"));
    assert_memory_equal(name, "He said \"hi\", twice", nl);
    assert_int_equal(asn_table_info(t, 64511, NULL, NULL, &name, &nl), 0);
    assert_int_equal(nl, strlen("spaced name"));
    assert_memory_equal(name, "spaced name", nl);
    assert_int_equal(asn_table_info(t, 64513, &cc, &cl, NULL, NULL), 0);
    assert_int_equal(cl, 2);
    assert_memory_equal(cc, "NL", 2);
    asn_table_close(t);
}

static void test_overlaps_unsorted(void **state)
{
    (void)state;
    asn_table_compile_stats_t st;
    /* 10.0.0.0/8 = 1 with nested 10.1.0.0/16 = 2 nested again 10.1.2.0/24 = 3; a partial overlap
     * 10.200.0.0-11.0.0.255 = 4 (later start wins over 1 from 10.200.0.0 to its end); same start
     * 12.0.0.0: /16 = 5 and /24 = 6 (narrower wins); identical 13.0.0.0/24 = 7 then 8 (later
     * line wins). Given out of order. */
    asn_table_t *t = compile_open("13.0.0.0\t13.0.0.255\t7\n"
                                  "10.200.0.0\t11.0.0.255\t4\n"
                                  "10.1.2.0\t10.1.2.255\t3\n"
                                  "12.0.0.0\t12.0.0.255\t6\n"
                                  "10.0.0.0\t10.255.255.255\t1\n"
                                  "12.0.0.0\t12.0.255.255\t5\n"
                                  "10.1.0.0\t10.1.255.255\t2\n"
                                  "13.0.0.0\t13.0.0.255\t8\n",
                                  &st);
    assert_int_equal(st.overlaps, 5);
    assert_int_equal(asn_table_lookup_v4(t, v4("9.255.255.255")), 0);
    assert_int_equal(asn_table_lookup_v4(t, v4("10.0.0.0")), 1);
    assert_int_equal(asn_table_lookup_v4(t, v4("10.0.255.255")), 1);
    assert_int_equal(asn_table_lookup_v4(t, v4("10.1.0.0")), 2);
    assert_int_equal(asn_table_lookup_v4(t, v4("10.1.1.255")), 2);
    assert_int_equal(asn_table_lookup_v4(t, v4("10.1.2.0")), 3);
    assert_int_equal(asn_table_lookup_v4(t, v4("10.1.2.255")), 3);
    assert_int_equal(asn_table_lookup_v4(t, v4("10.1.3.0")), 2);
    assert_int_equal(asn_table_lookup_v4(t, v4("10.1.255.255")), 2);
    assert_int_equal(asn_table_lookup_v4(t, v4("10.2.0.0")), 1);
    assert_int_equal(asn_table_lookup_v4(t, v4("10.199.255.255")), 1);
    assert_int_equal(asn_table_lookup_v4(t, v4("10.200.0.0")), 4);
    assert_int_equal(asn_table_lookup_v4(t, v4("10.255.255.255")), 4);
    assert_int_equal(asn_table_lookup_v4(t, v4("11.0.0.255")), 4);
    assert_int_equal(asn_table_lookup_v4(t, v4("11.0.1.0")), 0);
    assert_int_equal(asn_table_lookup_v4(t, v4("12.0.0.0")), 6);
    assert_int_equal(asn_table_lookup_v4(t, v4("12.0.0.255")), 6);
    assert_int_equal(asn_table_lookup_v4(t, v4("12.0.1.0")), 5);
    assert_int_equal(asn_table_lookup_v4(t, v4("12.0.255.255")), 5);
    assert_int_equal(asn_table_lookup_v4(t, v4("12.1.0.0")), 0);
    assert_int_equal(asn_table_lookup_v4(t, v4("13.0.0.128")), 8);
    assert_int_equal(asn_table_lookup_v4(t, v4("13.0.1.0")), 0);
    asn_table_close(t);
}

static void test_full_space_and_later_file_wins(void **state)
{
    (void)state;
    const char *a = write_file("a.tsv", "0.0.0.0\t255.255.255.255\t100\n"
                                        "::\tffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff\t200\n"
                                        "5.5.5.0\t5.5.5.255\t300\tFR\tfirst\n");
    const char *b = write_file("b.csv", "5.5.5.0,5.5.5.255,301,\"second\"\n"
                                        "255.255.255.0,255.255.255.255,0,\"\"\n"
                                        "2001:db8::,2001:db8::,300,\"ignored, 300 has a name\"\n");
    const char *inputs[] = {a, b};
    const char *out = path_of("full.asn");
    assert_int_equal(asn_table_compile(inputs, 2, out, errbuf, sizeof(errbuf)), 0);
    asn_table_t *t = asn_table_open(out, errbuf, sizeof(errbuf));
    assert_non_null(t);
    assert_int_equal(asn_table_lookup_v4(t, 0), 100);
    assert_int_equal(asn_table_lookup_v4(t, v4("5.5.5.4")), 301);
    assert_int_equal(asn_table_lookup_v4(t, v4("5.5.6.0")), 100);
    assert_int_equal(asn_table_lookup_v4(t, v4("255.255.254.255")), 100);
    assert_int_equal(asn_table_lookup_v4(t, UINT32_MAX), 0);
    assert_int_equal(look6(t, "::"), 200);
    assert_int_equal(look6(t, "2001:db8::"), 300);
    assert_int_equal(look6(t, "2001:db8::1"), 200);
    assert_int_equal(look6(t, "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff"), 200);
    const char *cc, *name;
    size_t cl, nl;
    assert_int_equal(asn_table_info(t, 300, &cc, &cl, &name, &nl), 0);
    assert_memory_equal(cc, "FR", 2);
    assert_int_equal(nl, 5);
    assert_memory_equal(name, "first", 5);
    size_t n4, n6, nn;
    asn_table_counts(t, &n4, &n6, &nn);
    assert_int_equal(n4, 4); /* 100, 301, 100, 0 */
    assert_int_equal(n6, 3); /* 200, 300, 200 */
    assert_int_equal(nn, 2); /* 300, 301 */
    asn_table_close(t);
}

/* ------------------------------------------------------------------------------------------ */
/* naive model: the covering range with the greatest start, then the smallest end, then the
 * latest line wins */

struct mrange {
    u128 start, end;
    uint32_t asn;
};

static uint32_t naive(const struct mrange *r, size_t n, u128 x)
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
static uint64_t rnd(void)
{
    /* xorshift64*: fixed seed, reproducible */
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 0x2545F4914F6CDD1Dull;
}

static void fmt_addr(char *buf, size_t len, u128 v, bool is6)
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

static void to_bytes(u128 v, uint8_t b[16])
{
    for (int i = 15; i >= 0; i--) {
        b[i] = (uint8_t)v;
        v >>= 8;
    }
}

static uint32_t table_lookup(const asn_table_t *t, u128 x, bool is6)
{
    if (!is6)
        return asn_table_lookup_v4(t, (uint32_t)x);
    uint8_t b[16];
    to_bytes(x, b);
    return asn_table_lookup_v6(t, b);
}

#define NRANGES  600
#define NLOOKUPS 4000

static void check_vs_naive(const asn_table_t *t, const struct mrange *r, size_t n, bool is6,
                           u128 max, u128 base)
{
    char sa[64];
    for (size_t i = 0; i < n; i++) {
        u128 pts[4] = {r[i].start - 1, r[i].start, r[i].end, r[i].end + 1};
        for (int k = 0; k < 4; k++) {
            if ((k == 0 && r[i].start == 0) || (k == 3 && r[i].end == max))
                continue;
            uint32_t want = naive(r, n, pts[k]), got = table_lookup(t, pts[k], is6);
            if (want != got) {
                fmt_addr(sa, sizeof(sa), pts[k], is6);
                fail_msg("boundary %s: want %u got %u", sa, want, got);
            }
        }
    }
    for (int i = 0; i < NLOOKUPS; i++) {
        u128 x;
        if (i % 10 == 0) {
            x = is6 ? ((u128)rnd() << 64 | rnd()) : (u128)(uint32_t)rnd();
        } else {
            x = base + rnd() % 90000;
            if (is6)
                x += (u128)(rnd() % 5) << 64 | (u128)(rnd() % 2) << 63;
        }
        uint32_t want = naive(r, n, x), got = table_lookup(t, x, is6);
        if (want != got) {
            fmt_addr(sa, sizeof(sa), x, is6);
            fail_msg("random %s: want %u got %u", sa, want, got);
        }
    }
}

static void random_vs_naive(bool is6)
{
    static struct mrange r[NRANGES + 2];
    size_t n = 0;
    u128 max = is6 ? ~(u128)0 : (u128)UINT32_MAX;
    /* a dense window so ranges overlap a lot; v6 keys straddle four /64s */
    u128 base = is6 ? ((u128)0x20010db800000000ull << 64) : (u128)0x0A000000u;
    FILE *fp = fopen(path_of(is6 ? "rand6.csv" : "rand4.tsv"), "w");
    assert_non_null(fp);
    char sa[64], sb[64];
    for (; n < NRANGES; n++) {
        u128 off = rnd() % 65536;
        if (is6)
            off += (u128)(rnd() % 4) << 64 | (u128)(rnd() % 2) << 63;
        u128 len = (rnd() % 8 == 0) ? rnd() % 20000 : rnd() % 300;
        r[n].start = base + off;
        r[n].end = r[n].start + len;
        r[n].asn = (uint32_t)(rnd() % 40);
    }
    /* the extremes of the address space */
    r[n++] = (struct mrange){0, 5, 77};
    r[n++] = (struct mrange){max - 3, max, 78};
    for (size_t i = 0; i < n; i++) {
        fmt_addr(sa, sizeof(sa), r[i].start, is6);
        fmt_addr(sb, sizeof(sb), r[i].end, is6);
        if (is6)
            fprintf(fp, "%s,%s,%u,\"name, %u\"\n", sa, sb, r[i].asn, r[i].asn);
        else
            fprintf(fp, "%s\t%s\tAS%u\tZZ\tname %u\n", sa, sb, r[i].asn, r[i].asn);
    }
    fclose(fp);
    const char *inputs[] = {path_of(is6 ? "rand6.csv" : "rand4.tsv")};
    const char *out = path_of("rand.asn");
    asn_table_compile_stats_t st;
    if (asn_table_compile_ex(inputs, 1, out, &st, errbuf, sizeof(errbuf)))
        fail_msg("compile: %s", errbuf);
    assert_true(st.overlaps > 0);
    for (int mode = 0; mode < 2; mode++) {
        asn_table_t *t = open_mode(out, mode);
        check_vs_naive(t, r, n, is6, max, base);
        asn_table_close(t);
    }
}

static void test_random_v4(void **state)
{
    (void)state;
    random_vs_naive(false);
}

static void test_random_v6(void **state)
{
    (void)state;
    random_vs_naive(true);
}

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
    if (asn_table_compile(inputs, 1, out, errbuf, sizeof(errbuf)))
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

static void expect_bad(const char *content, const char *msg)
{
    const char *in = write_file("bad.txt", content);
    const char *inputs[] = {in};
    char want[600];
    snprintf(want, sizeof(want), "%s:2: %s", in, msg);
    errbuf[0] = '\0';
    assert_int_equal(asn_table_compile(inputs, 1, path_of("bad.asn"), errbuf, sizeof(errbuf)),
                     TERN_ESYNTAX);
    if (strncmp(errbuf, want, strlen(want)) != 0)
        fail_msg("got '%s', want prefix '%s'", errbuf, want);
    assert_int_equal(access(path_of("bad.asn"), F_OK), -1);
}

static void test_bad_lines(void **state)
{
    (void)state;
    const char *ok = "1.0.0.0\t1.0.0.255\t1\n";
    char buf[256];
    struct {
        const char *line, *msg;
    } cases[] = {
        {"1.0.0.256\t1.0.1.0\t5\n", "invalid start address '1.0.0.256'"},
        {"1.0.0.0\tnope\t5\n", "invalid end address 'nope'"},
        {"1.0.0.0\t2001:db8::\t5\n", "start and end are of different address families"},
        {"1.0.1.0\t1.0.0.0\t5\n", "start 1.0.1.0 > end 1.0.0.0"},
        {"2001:db8::2\t2001:db8::1\t5\n", "start 2001:db8::2 > end 2001:db8::1"},
        {"1.0.0.0\t1.0.0.1\t4294967296\n", "bad ASN '4294967296'"},
        {"1.0.0.0\t1.0.0.1\t-1\n", "bad ASN '-1'"},
        {"1.0.0.0\t1.0.0.1\tAS\n", "bad ASN 'AS'"},
        {"1.0.0.0,1.0.0.1,12x,name\n", "bad ASN '12x'"},
        {"1.0.0.0\t1.0.0.1\n", "expected 3 to 5 tab-separated fields, got 2"},
        {"1.0.0.0\t1.0.0.1\t1\tUS\tname\textra\n", "expected 3 to 5 tab-separated fields"},
        {"1.0.0.0,1.0.0.1,5,a,b\n", "expected 4 comma-separated fields, got more than 4"},
        {"1.0.0.0,1.0.0.1,5\n", "expected 4 comma-separated fields, got 3"},
        {"1.0.0.0,1.0.0.1,5,\"unterminated\n", "unterminated or misplaced quote"},
        {"1.0.0.0,1.0.0.1,5,\"x\"y\n", "unterminated or misplaced quote"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        snprintf(buf, sizeof(buf), "%s%s", ok, cases[i].line);
        expect_bad(buf, cases[i].msg);
    }
    /* a missing input names the file */
    const char *inputs[] = {path_of("does-not-exist")};
    assert_int_equal(asn_table_compile(inputs, 1, path_of("x.asn"), errbuf, sizeof(errbuf)),
                     TERN_ENOENT);
    assert_non_null(strstr(errbuf, "does-not-exist"));
}

/* ------------------------------------------------------------------------------------------ */

static unsigned char *slurp(const char *p, size_t *len)
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

    free(b);
    free(good);
}

static uint32_t crc32_ieee(const unsigned char *p, size_t n)
{
    uint32_t crc = 0xFFFFFFFFu;
    for (size_t i = 0; i < n; i++) {
        crc ^= p[i];
        for (int k = 0; k < 8; k++)
            crc = (crc & 1) ? 0xEDB88320u ^ (crc >> 1) : crc >> 1;
    }
    return crc ^ 0xFFFFFFFFu;
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
    uint32_t crc = crc32_ieee(b + 96, len - 96);
    memcpy(b + 80, &crc, 4);
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

static void test_empty_input(void **state)
{
    (void)state;
    asn_table_t *t = compile_open("# nothing\n\n", NULL);
    assert_int_equal(asn_table_lookup_v4(t, v4("8.8.8.8")), 0);
    assert_int_equal(look6(t, "2001:db8::1"), 0);
    asn_table_close(t);
    asn_table_close(NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tsv_basic),
        cmocka_unit_test(test_csv_quoted),
        cmocka_unit_test(test_overlaps_unsorted),
        cmocka_unit_test(test_full_space_and_later_file_wins),
        cmocka_unit_test(test_random_v4),
        cmocka_unit_test(test_random_v6),
        cmocka_unit_test(test_prefix_examples),
        cmocka_unit_test(test_prefix_v4_exhaustive),
        cmocka_unit_test(test_prefix_v6_exhaustive),
        cmocka_unit_test(test_bad_lines),
        cmocka_unit_test(test_corrupt_files),
        cmocka_unit_test(test_corrupt_structure),
        cmocka_unit_test(test_empty_input),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
