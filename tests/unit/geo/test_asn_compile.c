/* Unit tests for the ASN compiler: both text formats, the overlap rule, boundaries and random
 * lookups against a naive scan of the input ranges, bad input lines, empty input; MaxMind ASN
 * databases (GeoLite2 and ip-location-db shapes, IPv4 inside IPv6 trees read once, bad records,
 * damaged files) and inputs told apart by content; the cache of a database (reuse, rebuild on a
 * change, damaged input or cache, an unwritable directory). Lookups run
 * through both descents (AVX2 where the CPU has it, and the portable one forced by
 * TERN_ASN_TABLE_SCALAR). Fixtures are generated into a mkdtemp() directory. */
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
#include <errno.h>
#include <maxminddb.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tern/common/err.h"

/* ------------------------------------------------------------------------------------------ */

static void test_tsv_basic(void **state)
{
    (void)state;
    asn_compile_stats_t st;
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
    asn_compile_stats_t st;
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
    assert_int_equal(asn_compile(inputs, 2, out, NULL, errbuf, sizeof(errbuf)), 0);
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
/* random ranges against the naive model */

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
    asn_compile_stats_t st;
    if (asn_compile(inputs, 1, out, &st, errbuf, sizeof(errbuf)))
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

static void expect_bad(const char *content, const char *msg)
{
    const char *in = write_file("bad.txt", content);
    const char *inputs[] = {in};
    char want[600];
    snprintf(want, sizeof(want), "%s:2: %s", in, msg);
    errbuf[0] = '\0';
    assert_int_equal(asn_compile(inputs, 1, path_of("bad.asn"), NULL, errbuf, sizeof(errbuf)),
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
    assert_int_equal(asn_compile(inputs, 1, path_of("x.asn"), NULL, errbuf, sizeof(errbuf)),
                     TERN_ENOENT);
    assert_non_null(strstr(errbuf, "does-not-exist"));
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

/* ------------------------------------------------------------------------------------------ */
/* MaxMind DB inputs (fixtures from tests/data/make_mmdb.pl) */

/* Compile one input file at path into out.asn and open it; st may be NULL. */
static asn_table_t *compile_path(const char *path, asn_compile_stats_t *st)
{
    const char *inputs[] = {path}, *out = path_of("out.asn");
    errbuf[0] = '\0';
    if (asn_compile(inputs, 1, out, st, errbuf, sizeof(errbuf)) < 0)
        fail_msg("compile %s: %s", path, errbuf);
    return open_mode(out, 0);
}

static void expect_name(const asn_table_t *t, uint32_t asn, const char *want)
{
    const char *name;
    size_t len;
    if (!want) {
        assert_int_equal(asn_table_info(t, asn, NULL, NULL, NULL, NULL), TERN_ENOENT);
        return;
    }
    assert_int_equal(asn_table_info(t, asn, NULL, NULL, &name, &len), 0);
    if (len != strlen(want) || memcmp(name, want, len) != 0)
        fail_msg("AS%u: name '%.*s', want '%s'", asn, (int)len, name, want);
}

static uint32_t look4p(const asn_table_t *t, const char *s, uint8_t *prefix)
{
    return asn_table_lookup_v4_prefix(t, v4(s), prefix);
}

/* GeoLite2-ASN's shape: IPv4 read once from ::/96; the aliases MaxMind points back into it
 * (::ffff:0:0/96, 2001::/32, 2002::/16) are skipped, not read as copies. */
static void test_mmdb_geolite(void **state)
{
    (void)state;
    asn_compile_stats_t st;
    asn_table_t *t = compile_path(fixture("asn_geolite.mmdb"), &st);
    assert_int_equal(st.lines, 0);
    assert_int_equal(st.networks, 7);
    assert_int_equal(st.aliases, 3);
    assert_int_equal(st.ranges_v4, 5); /* each IPv4 network once */
    assert_int_equal(st.ranges_v6, 2);
    assert_int_equal(st.overlaps, 0);
    uint8_t p;
    assert_int_equal(look4p(t, "1.0.0.1", &p), 13335);
    assert_int_equal(p, 24);
    assert_int_equal(look4p(t, "1.0.5.1", &p), 38803);
    assert_int_equal(p, 22);
    assert_int_equal(asn_table_lookup_v4(t, v4("1.0.1.0")), 0);
    assert_int_equal(asn_table_lookup_v4(t, v4("10.1.255.255")), 64501);
    assert_int_equal(asn_table_lookup_v4(t, v4("81.2.69.200")), 64500);
    assert_int_equal(asn_table_lookup_v4(t, v4("8.8.8.8")), 15169);
    assert_int_equal(look6(t, "2001:4860::1"), 15169);
    assert_int_equal(look6(t, "2a02:1234:ffff::1"), 64502);
    assert_int_equal(look6(t, "::ffff:1.0.0.1"), 0); /* aliases: no copies in v6 */
    assert_int_equal(look6(t, "2002:100:1::"), 0);   /* 6to4 of 1.0.0.1 */
    assert_int_equal(look6(t, "2001:0:100:1::"), 0); /* Teredo */
    assert_int_equal(look6(t, "::1.0.0.1"), 0);      /* the IPv4 subtree is IPv4 only */
    expect_name(t, 13335, "CLOUDFLARENET");
    expect_name(t, 64500, "Example 64500");
    expect_name(t, 64501, NULL); /* no organization in the record */
    asn_table_close(t);
}

/* ip-location-db's asn-ipv4.mmdb shape: an IPv4 tree; adjacent networks of one ASN merge. */
static void test_mmdb_flat4(void **state)
{
    (void)state;
    asn_compile_stats_t st;
    asn_table_t *t = compile_path(fixture("asn_flat4.mmdb"), &st);
    assert_int_equal(st.networks, 5);
    assert_int_equal(st.aliases, 0);
    assert_int_equal(st.ranges_v6, 0);
    uint8_t p;
    assert_int_equal(look4p(t, "1.0.1.7", &p), 13335);
    assert_int_equal(p, 23); /* 1.0.0.0/24 + 1.0.1.0/24: one ASN, two records */
    assert_int_equal(look4p(t, "9.9.9.9", &p), 19281);
    assert_int_equal(p, 32);
    assert_int_equal(asn_table_lookup_v4(t, v4("9.9.9.10")), 0);
    assert_int_equal(asn_table_lookup_v4(t, v4("192.0.2.1")), 0); /* ASN 0: not routed */
    assert_int_equal(asn_table_lookup_v4(t, v4("223.255.255.255")), UINT32_MAX);
    assert_int_equal(look6(t, "2001:db8::1"), 0);
    expect_name(t, 13335, "Cloudflare, Inc.");
    expect_name(t, 0, NULL);
    expect_name(t, UINT32_MAX, "Largest ASN");
    asn_table_close(t);
}

/* An IPv6 tree without the IPv4 subtree, IPv4 stored as IPv4-mapped networks: read as IPv4. */
static void test_mmdb_flat6_mapped(void **state)
{
    (void)state;
    asn_compile_stats_t st;
    asn_table_t *t = compile_path(fixture("asn_flat6.mmdb"), &st);
    assert_int_equal(st.aliases, 0);
    assert_int_equal(st.ranges_v4, 1);
    uint8_t p;
    assert_int_equal(look4p(t, "5.6.7.8", &p), 64510);
    assert_int_equal(p, 24);
    assert_int_equal(look6(t, "::ffff:5.6.7.8"), 0);
    assert_int_equal(look6(t, "2001:db8::1"), 64511);
    assert_int_equal(look6(t, "2001:db8:0:1::4"), 64511);
    assert_int_equal(look6(t, "2001:db8:0:1::5"), 64512);
    assert_int_equal(look6(t, "2001:db8:1::"), 0);
    assert_int_equal(look6(t, "ffff:ffff:ffff:ffff:1::1"), 64513);
    expect_name(t, 64512, "One Address");
    asn_table_close(t);
}

/* libmaxminddb's answer for a (4 or 16 bytes, by fam): the ASN, 0 when none, and in *len the
 * prefix length of the network holding a, counted in the tree (from ::/0 in an IPv6 tree). */
static uint32_t mmdb_asn(const MMDB_s *db, int fam, const uint8_t *a, unsigned *len)
{
    struct sockaddr_storage ss = {0};
    if (fam == AF_INET) {
        struct sockaddr_in *sa = (struct sockaddr_in *)&ss;
        sa->sin_family = AF_INET;
        memcpy(&sa->sin_addr, a, 4);
    } else {
        struct sockaddr_in6 *sa = (struct sockaddr_in6 *)&ss;
        sa->sin6_family = AF_INET6;
        memcpy(&sa->sin6_addr, a, 16);
    }
    int e;
    MMDB_lookup_result_s r = MMDB_lookup_sockaddr(db, (struct sockaddr *)&ss, &e);
    assert_int_equal(e, MMDB_SUCCESS);
    *len = r.netmask;
    MMDB_entry_data_s d;
    if (!r.found_entry ||
        MMDB_get_value(&r.entry, &d, "autonomous_system_number", (char *)NULL) != MMDB_SUCCESS)
        return 0;
    return d.uint32;
}

/* The copies of the IPv4 data in an IPv6 tree that the table leaves without ASN: the subtree at
 * ::/96 itself (an IPv6 client is never there) and MaxMind's aliases of it. */
static bool v4_copy(u128 x)
{
    return x >> 32 == 0 || x >> 32 == 0xffff || x >> 96 == 0x20010000u || x >> 112 == 0x2002;
}

/* Every network of a random database, enumerated through libmaxminddb's own lookups (each
 * answer's netmask gives the next address to ask), checked at its first and last address against
 * the compiled table: tern answers what libmaxminddb answers, IPv4 and IPv6, down to /128s. */
static void test_mmdb_vs_libmaxminddb(void **state)
{
    (void)state;
    MMDB_s db;
    assert_int_equal(MMDB_open(fixture("asn_random.mmdb"), MMDB_MODE_MMAP, &db), MMDB_SUCCESS);
    asn_table_t *t = compile_path(fixture("asn_random.mmdb"), NULL);
    size_t nets = 0;
    for (u128 x = 0;; nets++) {
        uint8_t a[4] = {(uint8_t)(x >> 24), (uint8_t)(x >> 16), (uint8_t)(x >> 8), (uint8_t)x};
        unsigned len;
        uint32_t want = mmdb_asn(&db, AF_INET, a, &len);
        u128 last = x | (((u128)1 << (128 - len)) - 1); /* len counts from ::/0 */
        if (asn_table_lookup_v4(t, (uint32_t)x) != want ||
            asn_table_lookup_v4(t, (uint32_t)last) != want)
            fail_msg("IPv4 %08x/%u: want AS%u", (unsigned)x, len - 96, want);
        if ((uint32_t)last == UINT32_MAX)
            break;
        x = (uint32_t)last + 1;
    }
    assert_true(nets > 1000);
    for (u128 x = 0;; nets++) {
        uint8_t a[16], b[16];
        to_bytes(x, a);
        unsigned len;
        uint32_t want = mmdb_asn(&db, AF_INET6, a, &len);
        u128 last = len == 0 ? ~(u128)0 : x | ((((u128)1 << (127 - (len - 1))) - 1));
        to_bytes(last, b);
        if (v4_copy(x))
            want = 0;
        if (asn_table_lookup_v6(t, a) != want || asn_table_lookup_v6(t, b) != want)
            fail_msg("IPv6 network %u (/%u): want AS%u", (unsigned)nets, len, want);
        if (last == ~(u128)0)
            break;
        x = last + 1;
    }
    assert_true(nets > 20000);
    asn_table_close(t);
    MMDB_close(&db);
}

static void expect_compile_fails(const char *path, int code, const char *msg)
{
    const char *inputs[] = {path};
    errbuf[0] = '\0';
    assert_int_equal(asn_compile(inputs, 1, path_of("bad.asn"), NULL, errbuf, sizeof(errbuf)),
                     code);
    if (!strstr(errbuf, msg))
        fail_msg("got '%s', want '%s'", errbuf, msg);
    assert_int_equal(access(path_of("bad.asn"), F_OK), -1); /* nothing written */
}

/* A bad record fails the compile and names the file, the network and what is wrong. */
static void test_mmdb_bad_records(void **state)
{
    (void)state;
    expect_compile_fails(fixture("asn_bad_type.mmdb"), TERN_EMALF,
                         "asn_bad_type.mmdb: network 1.2.3.0/24: autonomous_system_number is a "
                         "string, not an unsigned integer");
    expect_compile_fails(fixture("asn_bad_range.mmdb"), TERN_EMALF,
                         "asn_bad_range.mmdb: network 1.2.4.0/24: autonomous_system_number "
                         "4294967296 does not fit 32 bits");
    expect_compile_fails(fixture("nested6.mmdb"), TERN_EMALF,
                         "nested6.mmdb: network 1.2.3.0/24: no autonomous_system_number "
                         "(database type 'GeoLite2-City' is not an ASN database?)");
}

/* Damaged files: truncated (no metadata), metadata alone, a record out of range, a cycle. */
static void test_mmdb_damaged(void **state)
{
    (void)state;
    size_t len;
    unsigned char *good = slurp(fixture("asn_geolite.mmdb"), &len);
    unsigned char *b = malloc(len);
    assert_non_null(b);
    expect_compile_fails(write_bytes("head.mmdb", good, len / 2), TERN_EMALF,
                         "head.mmdb: binary data without a MaxMind DB metadata marker");
    const char marker[] = "\xab\xcd\xefMaxMind.com";
    const unsigned char *m = memmem(good, len, marker, sizeof(marker) - 1);
    assert_non_null(m);
    expect_compile_fails(write_bytes("tail.mmdb", m, len - (size_t)(m - good)), TERN_EMALF,
                         "tail.mmdb: not a valid MaxMind DB file (truncated or corrupt?)");
    /* 28-bit records, 7 bytes a node: node 0's left record is bytes 0-2 and byte 3's top
     * nibble. Far beyond the data section: */
    memcpy(b, good, len);
    b[0] ^= 0xFF;
    expect_compile_fails(write_bytes("far.mmdb", b, len), TERN_EMALF,
                         "far.mmdb: corrupt search tree at network ::/1: the record points "
                         "outside the data section");
    /* node 1 (at ::/1) pointing back to itself: a cycle, which must not be walked (forever, or
     * exponentially); libmaxminddb itself refuses only records back to the root */
    memcpy(b, good, len);
    assert_int_equal(b[2], 1); /* node 0's left record is node 1 */
    b[7] = b[8] = 0;
    b[9] = 1;
    b[10] &= 0x0F;
    expect_compile_fails(write_bytes("cycle.mmdb", b, len), TERN_EMALF,
                         "cycle.mmdb: corrupt search tree at network ::/2: a node reached twice");
    free(b);
    free(good);
}

/* The kind of an input is its content, not its name; text and MaxMind DB inputs mix (the later
 * input wins an identical range, as between text files). */
static void test_input_kind_by_content(void **state)
{
    (void)state;
    size_t len;
    unsigned char *db = slurp(fixture("asn_flat4.mmdb"), &len);
    const char *as_csv = write_bytes("asn.csv", db, len);
    free(db);
    const char *as_mmdb = write_file("text.mmdb", "9.9.9.9,9.9.9.9,64999,\"Later\"\n");
    const char *inputs[] = {as_csv, as_mmdb}, *out = path_of("mixed.asn");
    asn_compile_stats_t st;
    if (asn_compile(inputs, 2, out, &st, errbuf, sizeof(errbuf)) < 0)
        fail_msg("compile: %s", errbuf);
    assert_int_equal(st.networks, 5);
    assert_int_equal(st.lines, 1);
    asn_table_t *t = open_mode(out, 0);
    assert_int_equal(asn_table_lookup_v4(t, v4("9.9.9.9")), 64999);
    assert_int_equal(asn_table_lookup_v4(t, v4("1.0.0.1")), 13335);
    asn_table_close(t);
}

/* ------------------------------------------------------------------------------------------ */
/* the cache: asn_compile_cached() */

/* tmpdir/to holds fixture name (its first cut bytes if cut > 0), put there by rename as
 * geoipupdate does; returns its path. */
static const char *put_fixture(const char *name, const char *to, size_t cut)
{
    size_t len;
    unsigned char *b = slurp(fixture(name), &len);
    char part[64];
    snprintf(part, sizeof(part), "%s.part", to);
    const char *tmp = write_bytes(part, b, cut ? cut : len);
    free(b);
    char dst[512];
    snprintf(dst, sizeof(dst), "%s", path_of(to));
    assert_int_equal(rename(tmp, dst), 0);
    return path_of(to);
}

/* asn_compile_cached(db, cache) must succeed and rebuild (or not) as want says. */
static void cached_ok(const char *db, const char *cache, bool want_rebuilt, size_t want_networks)
{
    bool rebuilt = !want_rebuilt;
    asn_compile_stats_t st;
    errbuf[0] = '\0';
    if (asn_compile_cached(db, cache, &st, &rebuilt, errbuf, sizeof(errbuf)) < 0)
        fail_msg("cached: %s", errbuf);
    if (rebuilt != want_rebuilt)
        fail_msg("rebuilt %d, want %d", rebuilt, want_rebuilt);
    assert_int_equal(st.networks, want_networks);
}

/* The ASN the cache answers for 81.2.69.1 (AS64500 in asn_geolite, AS64501 in _b). */
static uint32_t cache_london(const char *cache)
{
    asn_table_t *t = open_mode(cache, 0);
    uint32_t asn = asn_table_lookup_v4(t, v4("81.2.69.1"));
    asn_table_close(t);
    return asn;
}

static ino_t inode_of(const char *path)
{
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    return st.st_ino;
}

/* Reused while the database is the same (untouched, or touched with the same bytes), compiled
 * again when it is replaced; a damaged replacement fails and leaves the cache as it was. */
static void test_cached_reuse_and_rebuild(void **state)
{
    (void)state;
    char db[512], *cache;
    snprintf(db, sizeof(db), "%s", put_fixture("asn_geolite.mmdb", "GeoLite2-ASN.mmdb", 0));
    assert_non_null(cache = asn_compile_default_cache(db));
    assert_non_null(strstr(cache, "/GeoLite2-ASN.mmdb.tern-asn"));

    cached_ok(db, cache, true, 7);
    assert_int_equal(cache_london(cache), 64500);
    asn_table_t *t = open_mode(cache, 0);
    assert_true(asn_compile_source_unchanged(t, db));
    ino_t ino = inode_of(cache);
    cached_ok(db, cache, false, 0); /* same file: by identity, nothing read */
    assert_int_equal(inode_of(cache), ino);

    struct timespec ts[2] = {{.tv_sec = 1000000000}, {.tv_sec = 1000000000}};
    assert_int_equal(utimensat(AT_FDCWD, db, ts, 0), 0);
    assert_false(asn_compile_source_unchanged(t, db)); /* touched: the loader asks again */
    cached_ok(db, cache, false, 0);                    /* the same bytes: kept */
    assert_int_equal(inode_of(cache), ino);
    asn_table_close(t);

    put_fixture("asn_geolite_b.mmdb", "GeoLite2-ASN.mmdb", 0); /* a new release */
    cached_ok(db, cache, true, 7);
    assert_int_equal(cache_london(cache), 64501);

    put_fixture("asn_geolite.mmdb", "GeoLite2-ASN.mmdb", 1000); /* truncated */
    bool rebuilt = true;
    assert_int_equal(asn_compile_cached(db, cache, NULL, &rebuilt, errbuf, sizeof(errbuf)),
                     TERN_EMALF);
    assert_false(rebuilt);
    assert_non_null(strstr(errbuf, "GeoLite2-ASN.mmdb: not a valid MaxMind DB file"));
    assert_int_equal(cache_london(cache), 64501); /* untouched */
    free(cache);
}

/* What is at the cache path is only reused when it is a valid table of this very database by
 * this compiler: a table ternctl compiled from it is; a damaged one, a text-compiled one, or one
 * from another compiler revision is compiled again. */
static void test_cached_validates(void **state)
{
    (void)state;
    const char *db = fixture("asn_geolite_b.mmdb"), *cache = path_of("asn.cache");
    const char *inputs[] = {db};
    assert_int_equal(asn_compile(inputs, 1, cache, NULL, errbuf, sizeof(errbuf)), 0);
    cached_ok(db, cache, false, 0); /* ternctl asn compile -o CACHE DB */

    size_t len;
    unsigned char *good = slurp(cache, &len), *b = malloc(len);
    assert_non_null(b);
    memcpy(b, good, len);
    b[len / 2] ^= 1; /* bit rot: checksum mismatch */
    write_bytes("asn.cache", b, len);
    cached_ok(db, cache, true, 7);

    memcpy(b, good, len);
    assert_true(len > 64);
    size_t rev = len > 64 ? len - 64 + 44 : 0; /* (gcc -O2 cannot see the assertion) */
    b[rev] ^= 1; /* the compiler revision (the record layout in asn_table.h) */
    refresh_crc(b, len);
    write_bytes("asn.cache", b, len);
    cached_ok(db, cache, true, 7);
    free(b);
    free(good);

    asn_table_close(compile_open("81.2.69.0,81.2.69.255,1,\"text\"\n", NULL));
    const char *text_table = path_of("out.asn");
    cached_ok(db, text_table, true, 7); /* an asn_table compiled from text: replaced */
    assert_int_equal(cache_london(text_table), 64501);
    cached_ok(fixture("asn_geolite.mmdb"), text_table, true, 7); /* another database */
    assert_int_equal(cache_london(text_table), 64500);
}

/* A cache that cannot be written says how to fix it: set asn_table, or compile it elsewhere. */
static void test_cached_unwritable(void **state)
{
    (void)state;
    char dir[512], cache[600];
    /* root passes permission checks: sysfs refuses new files to everyone */
    if (geteuid() == 0) {
        snprintf(cache, sizeof(cache), "/sys/tern-asn-test.tern-asn");
    } else {
        snprintf(dir, sizeof(dir), "%s", path_of("ro"));
        assert_int_equal(mkdir(dir, 0555), 0);
        snprintf(cache, sizeof(cache), "%s/asn.tern-asn", dir);
    }
    bool rebuilt = true;
    int rc = asn_compile_cached(fixture("asn_geolite.mmdb"), cache, NULL, &rebuilt, errbuf,
                                sizeof(errbuf));
    assert_true(rc == -EACCES || rc == -EROFS || rc == -EPERM);
    assert_false(rebuilt);
    char want[700];
    snprintf(want, sizeof(want), "cannot write the compiled table %s", cache);
    if (!strstr(errbuf, want) || !strstr(errbuf, "set asn_table: to a writable path") ||
        !strstr(errbuf, "ternctl asn compile -o"))
        fail_msg("got '%s'", errbuf);
    assert_int_equal(
        asn_compile_cached(path_of("none.mmdb"), cache, NULL, &rebuilt, errbuf, sizeof(errbuf)),
        -ENOENT);
    assert_non_null(strstr(errbuf, "none.mmdb: No such file or directory"));
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
        cmocka_unit_test(test_bad_lines),
        cmocka_unit_test(test_empty_input),
        cmocka_unit_test(test_mmdb_geolite),
        cmocka_unit_test(test_mmdb_flat4),
        cmocka_unit_test(test_mmdb_flat6_mapped),
        cmocka_unit_test(test_mmdb_vs_libmaxminddb),
        cmocka_unit_test(test_mmdb_bad_records),
        cmocka_unit_test(test_mmdb_damaged),
        cmocka_unit_test(test_input_kind_by_content),
        cmocka_unit_test(test_cached_reuse_and_rebuild),
        cmocka_unit_test(test_cached_validates),
        cmocka_unit_test(test_cached_unwritable),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
