/* Unit tests for the ASN compiler: both text formats, the overlap rule, boundaries and random
 * lookups against a naive scan of the input ranges, bad input lines, empty input. Lookups run
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
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
