/* Unit tests for the latency map: compile + lookup (IPv4, IPv6, the most specific network wins,
 * range boundaries and ECS prefixes, entries sorted by ms and shared), every kind of bad line
 * with its line number, group id collisions refused, and a generated map checked address by
 * address against a naive scan of its lines. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <arpa/inet.h>
#include <sys/socket.h>
#include <unistd.h>

#include "tern/common/err.h"
#include "tern/geo/latency_map.h"

static latency_map_t *compile_ok(const char *text, latency_map_stats_t *st)
{
    latency_map_t *m = NULL;
    char err[512] = "";
    int rc = latency_map_compile(text, strlen(text), "map", &m, st, err, sizeof(err));
    if (rc != 0)
        fail_msg("compile: %d %s", rc, err);
    assert_non_null(m);
    return m;
}

static void compile_err(const char *text, const char *want)
{
    latency_map_t *m = NULL;
    char err[512] = "";
    int rc = latency_map_compile(text, strlen(text), "map", &m, NULL, err, sizeof(err));
    assert_int_equal(rc, TERN_ESYNTAX);
    assert_null(m);
    if (!strstr(err, want))
        fail_msg("error \"%s\" lacks \"%s\"", err, want);
}

/* The entry of a textual address as "grp:ms,grp:ms" with the prefix. */
static void look(const latency_map_t *m, const char *addr, char *out, size_t len, uint8_t *prefix)
{
    uint8_t a[16];
    int fam = strchr(addr, ':') ? AF_INET6 : AF_INET;
    assert_int_equal(inet_pton(fam, addr, a), 1);
    latency_entry_t e;
    uint32_t n = latency_map_lookup(m, fam, a, &e, prefix);
    assert_int_equal(n, e.n);
    out[0] = 0;
    for (uint32_t i = 0; i < n; i++) {
        uint32_t g, ms;
        latency_entry_at(&e, i, &g, &ms);
        const char *name = latency_map_group_name(m, g);
        assert_non_null(name);
        size_t l = strlen(out);
        snprintf(out + l, len - l, "%s%s:%u", i ? "," : "", name, ms);
    }
}

#define EXPECT(m, addr, want, plen)                                                                \
    do {                                                                                           \
        char got_[256];                                                                            \
        uint8_t p_;                                                                                \
        look(m, addr, got_, sizeof(got_), &p_);                                                    \
        assert_string_equal(got_, want);                                                           \
        assert_int_equal(p_, plen);                                                                \
    } while (0)

static void test_basic_v4_v6(void **state)
{
    (void)state;
    latency_map_stats_t st;
    latency_map_t *m = compile_ok("# measured 2026-12-06\n"
                                  "198.51.100.0/24 fra1 23\n"
                                  "198.51.100.0/24\tams1\t12   # the closest\n"
                                  "198.51.100.0/24 lhr1 31\r\n"
                                  "\n"
                                  "   \t\n"
                                  "2001:db8::/32 fra1 40\n"
                                  "2001:db8::/32 AMS1 5\n",
                                  &st);
    assert_int_equal(st.lines, 5);
    assert_int_equal(st.networks, 2);
    assert_int_equal(st.entries, 2);
    assert_int_equal(st.groups, 3);
    EXPECT(m, "198.51.100.7", "ams1:12,fra1:23,lhr1:31", 24);
    EXPECT(m, "198.51.100.255", "ams1:12,fra1:23,lhr1:31", 24);
    EXPECT(m, "198.51.101.0", "", 24);  /* the gap after it: 198.51.101.0/24 */
    EXPECT(m, "198.51.99.255", "", 22); /* before: 198.51.96.0/22 */
    EXPECT(m, "2001:db8:1::1", "ams1:5,fra1:40", 32);
    EXPECT(m, "2001:db9::1", "", 32);
    EXPECT(m, "10.0.0.1", "", 1); /* 0.0.0.0/1 holds nothing mapped */
    /* one id per name, whatever the case */
    assert_int_equal(latency_group_id("AMS1", 4), latency_group_id("ams1", 4));
    assert_string_equal(latency_map_group_name(m, latency_group_id("ams1", 4)), "ams1");
    assert_null(latency_map_group_name(m, latency_group_id("nope", 4)));
    latency_map_free(m);
}

static void test_most_specific_wins(void **state)
{
    (void)state;
    latency_map_t *m = compile_ok("10.0.0.0/8 a 50\n"
                                  "10.0.0.0/8 b 60\n"
                                  "10.1.0.0/16 b 10\n" /* inside: its own list, not merged */
                                  "10.1.2.0/24 c 1\n"
                                  "10.1.2.128/25 a 7\n"
                                  "0.0.0.0/0 z 999\n"
                                  "::/0 z 998\n"
                                  "2001:db8::/48 a 3\n"
                                  "2001:db8::1/128 b 4\n",
                                  NULL);
    EXPECT(m, "10.200.0.1", "a:50,b:60", 9);
    EXPECT(m, "10.0.255.255", "a:50,b:60", 16);
    EXPECT(m, "10.1.0.0", "b:10", 23);
    EXPECT(m, "10.1.2.5", "c:1", 25);
    EXPECT(m, "10.1.2.200", "a:7", 25);
    EXPECT(m, "10.1.3.0", "b:10", 24);
    EXPECT(m, "11.0.0.0", "z:999", 8);
    EXPECT(m, "9.255.255.255", "z:999", 7);
    EXPECT(m, "2001:db8::1", "b:4", 128);
    EXPECT(m, "2001:db8::2", "a:3", 127);
    EXPECT(m, "2001:db8:0:1::", "a:3", 64);
    EXPECT(m, "2001:db8:1::", "z:998", 48);
    latency_map_free(m);
}

static void test_shared_entries(void **state)
{
    (void)state;
    latency_map_stats_t st;
    /* two adjacent /25s with the same list are one entry and one range: a /24 scope */
    latency_map_t *m = compile_ok("192.0.2.0/25 a 1\n192.0.2.0/25 b 2\n"
                                  "192.0.2.128/25 b 2\n192.0.2.128/25 a 1\n"
                                  "203.0.113.0/24 a 1\n",
                                  &st);
    assert_int_equal(st.networks, 3);
    assert_int_equal(st.entries, 2);
    EXPECT(m, "192.0.2.130", "a:1,b:2", 24);
    EXPECT(m, "203.0.113.9", "a:1", 24);
    latency_map_free(m);
}

static void test_errors(void **state)
{
    (void)state;
    compile_err("1.2.3.0/24 a 1\nfoo/24 a 1\n", "map:2: bad network \"foo/24\"");
    compile_err("1.2.3.0 a 1\n", "map:1: bad network \"1.2.3.0\": expected <address>/<length>");
    compile_err("\n\n1.2.3.0/33 a 1\n", "map:3: prefix length 33 out of range (0..32");
    compile_err("2001:db8::/129 a 1\n", "map:1: prefix length 129 out of range (0..128");
    compile_err("1.2.3.0/x a 1\n", "map:1: bad network \"1.2.3.0/x\": the length is not a number");
    compile_err("1.2.3.4/24 a 1\n", "map:1: host bits set in 1.2.3.4/24");
    compile_err("2001:db8::1/64 a 1\n", "map:1: host bits set in 2001:db8::1/64");
    compile_err("1.2.3.0/24 fra.1 1\n", "map:1: group \"fra.1\": a name of 1..63");
    compile_err("1.2.3.0/24 "
                "a234567890123456789012345678901234567890123456789012345678901234 1\n",
                "map:1: group \"a2345");
    compile_err("1.2.3.0/24 a 60001\n", "map:1: latency \"60001\": an integer number of ms");
    compile_err("1.2.3.0/24 a -1\n", "map:1: latency \"-1\"");
    compile_err("1.2.3.0/24 a 1.5\n", "map:1: latency \"1.5\"");
    compile_err("1.2.3.0/24 a 12345678\n", "map:1: latency \"12345678\"");
    compile_err("1.2.3.0/24 a\n", "map:1: expected \"<network>/<length> <group> <ms>\", got 2");
    compile_err("1.2.3.0/24 a 1 x\n", "map:1: expected");
    compile_err("# x\n1.2.3.0/24 a 1\n1.2.3.0/24 b 1\n1.2.3.0/24 A 2\n",
                "map:4: the same network and group as line 2");
    /* the limit of groups per network */
    size_t cap = (LATENCY_MAP_GROUPS_MAX + 1) * 32;
    char *big = malloc(cap), *p = big;
    for (unsigned i = 0; i <= LATENCY_MAP_GROUPS_MAX; i++)
        p += sprintf(p, "1.2.3.0/24 g%u 1\n", i);
    compile_err(big, "more than 8191 groups for one network");
    free(big);
}

static int u64_cmp(const void *x, const void *y)
{
    uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;
    return a < b ? -1 : a > b;
}

static void test_collision_refused(void **state)
{
    (void)state;
    /* find two names with one id (a 32-bit birthday search: ~80k names suffice on average;
     * 2^20 make a miss all but impossible), by sorting (id, name number) */
    enum { N = 1 << 20 };
    uint64_t *v = malloc(N * sizeof(*v));
    for (unsigned i = 0; i < N; i++) {
        char s[16];
        int l = snprintf(s, sizeof(s), "g%u", i);
        uint32_t id = latency_group_id(s, (size_t)l);
        assert_int_not_equal(id, 0);
        v[i] = (uint64_t)id << 32 | i;
    }
    qsort(v, N, sizeof(*v), u64_cmp);
    unsigned a = 0, b = 0;
    bool found = false;
    for (unsigned i = 1; i < N && !found; i++)
        if (v[i] >> 32 == v[i - 1] >> 32) {
            a = (unsigned)v[i - 1];
            b = (unsigned)v[i];
            found = true;
        }
    free(v);
    assert_true(found);
    char text[128], want[128];
    snprintf(text, sizeof(text), "1.0.0.0/8 g%u 1\n2.0.0.0/8 g%u 1\n", a, b);
    snprintf(want, sizeof(want), "map:2: group \"g%u\" has the same id as group \"g%u\" (line 1)",
             b, a);
    compile_err(text, want);
}

/* A generated map against a naive scan of its lines. */
struct gline {
    uint32_t net, mask;
    unsigned plen, grp, ms;
};

static void test_generated_against_scan(void **state)
{
    (void)state;
    enum { NETS = 3000, GROUPS = 5 };
    struct gline *L = calloc(NETS * GROUPS, sizeof(*L));
    char *text = malloc(NETS * GROUPS * 48), *p = text;
    size_t nl = 0;
    srand(7);
    for (unsigned i = 0; i < NETS; i++) {
        unsigned plen = 12 + (unsigned)rand() % 17; /* /12 .. /28: overlaps happen */
        uint32_t mask = plen ? ~0u << (32 - plen) : 0;
        uint32_t net = ((uint32_t)rand() << 1 ^ (uint32_t)rand()) & mask;
        bool dup = false;
        for (size_t k = 0; k < nl && !dup; k++)
            dup = L[k].net == net && L[k].plen == plen;
        if (dup)
            continue;
        unsigned ng = 1 + (unsigned)rand() % GROUPS;
        for (unsigned g = 0; g < ng; g++) {
            L[nl] = (struct gline){net, mask, plen, g, (unsigned)rand() % 300};
            p += sprintf(p, "%u.%u.%u.%u/%u grp%u %u\n", net >> 24, net >> 16 & 255, net >> 8 & 255,
                         net & 255, plen, g, L[nl].ms);
            nl++;
        }
    }
    latency_map_t *m = compile_ok(text, NULL);
    for (unsigned probe = 0; probe < 20000; probe++) {
        uint32_t addr = probe < 10000 ? L[(size_t)rand() % nl].net + (uint32_t)(rand() % 64)
                                      : (uint32_t)rand() << 1 ^ (uint32_t)rand();
        /* naive: the most specific network holding addr, its groups */
        int best = -1;
        for (size_t k = 0; k < nl; k++)
            if ((addr & L[k].mask) == L[k].net && (best < 0 || L[k].plen > L[best].plen))
                best = (int)k;
        uint8_t a[4] = {addr >> 24, addr >> 16 & 255, addr >> 8 & 255, addr & 255};
        latency_entry_t e;
        uint8_t pfx;
        uint32_t n = latency_map_lookup(m, AF_INET, a, &e, &pfx);
        unsigned want = 0, prev_ms = 0;
        for (size_t k = 0; best >= 0 && k < nl; k++)
            if (L[k].net == L[best].net && L[k].plen == L[best].plen)
                want++;
        assert_int_equal(n, want);
        for (uint32_t i = 0; i < n; i++) {
            uint32_t g, ms;
            latency_entry_at(&e, i, &g, &ms);
            assert_true(ms >= prev_ms);
            prev_ms = ms;
            bool ok = false;
            for (size_t k = 0; k < nl && !ok; k++)
                ok = L[k].net == L[best].net && L[k].plen == L[best].plen && L[k].ms == ms &&
                     latency_group_id("grp0", 4) + 0 == latency_group_id("grp0", 4) &&
                     g == latency_group_id(latency_map_group_name(m, g),
                                           strlen(latency_map_group_name(m, g))) &&
                     (unsigned)atoi(latency_map_group_name(m, g) + 3) == L[k].grp;
            assert_true(ok);
        }
        /* the scope: every address of the block has the same answer as addr */
        uint32_t bmask = pfx ? ~0u << (32 - pfx) : 0;
        for (int t = 0; t < 4; t++) {
            uint32_t other = (addr & bmask) | ((uint32_t)rand() & ~bmask);
            uint8_t o[4] = {other >> 24, other >> 16 & 255, other >> 8 & 255, other & 255};
            latency_entry_t e2;
            uint8_t p2;
            assert_int_equal(latency_map_lookup(m, AF_INET, o, &e2, &p2), n);
            assert_true(n == 0 || memcmp(e2.pairs, e.pairs, 8 * n) == 0);
        }
    }
    latency_map_free(m);
    free(L);
    free(text);
}

static void test_load_file(void **state)
{
    (void)state;
    char path[] = "/tmp/tern-latency-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    const char *t = "192.0.2.0/24 a 5\n192.0.2.0/24 b x\n";
    assert_int_equal(write(fd, t, strlen(t)), (ssize_t)strlen(t));
    close(fd);
    latency_map_t *m = NULL;
    char err[512], want[600];
    assert_int_equal(latency_map_load_file(path, &m, NULL, err, sizeof(err)), TERN_ESYNTAX);
    snprintf(want, sizeof(want), "%s:2: latency \"x\"", path);
    assert_non_null(strstr(err, want));
    unlink(path);
    assert_true(latency_map_load_file(path, &m, NULL, err, sizeof(err)) < 0);
    assert_null(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_basic_v4_v6),       cmocka_unit_test(test_most_specific_wins),
        cmocka_unit_test(test_shared_entries),    cmocka_unit_test(test_errors),
        cmocka_unit_test(test_collision_refused), cmocka_unit_test(test_generated_against_scan),
        cmocka_unit_test(test_load_file),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
