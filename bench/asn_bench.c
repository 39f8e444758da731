/*
 * asn_bench.c — size, compile time, lookup rate and exactness of the IP → ASN table
 * (src/geo/asn_table.c, compiled by src/geo/asn_compile.c) on a real data set.
 *
 * Usage: asn_bench OUT.asn LOOKUPS INPUT.csv...   (bench/asn.sh runs it on ip-location-db/asn)
 *
 * 1. compiles the inputs with asn_compile() (timed) and opens the result;
 * 2. lookups/s per family, best of ROUNDS passes over a pre-generated address array of LOOKUPS
 *    addresses, for three lookups on the same array: the table (asn_table_lookup_v4/v6), the
 *    table with the ECS prefix (asn_table_lookup_v4/v6_prefix), and a plain branchless binary
 *    search over a sorted array of the same boundaries (the layout of file format 1), as a
 *    yardstick that moves with the machine. The kinds of addresses:
 *      v4 uniform   — uniformly random 32-bit addresses;
 *      v4 in-range  — a random input range, then a random address inside it;
 *      v6 2000::/3  — uniformly random addresses in 2000::/3, the allocated unicast space (where
 *                     all the data lies; most of it is in large gaps and large ranges, so the
 *                     path is fairly cache-hot);
 *      v6 ::/0      — uniformly random 128 bits: nearly all past the last range, one hot path;
 *                     not a realistic load, shown because it is the easiest;
 *      v6 in-range  — as for v4 (every range equally likely: the realistic and hardest case).
 *    The table's and the binary search's result checksums must agree.
 * 3. exactness: every input range at start-1, start, end, end+1, plus EXACT_RANDOM random
 *    addresses per family (half uniform, half in-range), against a reference written here
 *    independently of the table's compiler: ranges sorted by (start asc, end desc, input order
 *    asc), and for an address the backward scan from the last start <= address picks the first
 *    range that covers it — greatest start, then smallest end, then latest input — stopping as
 *    soon as the prefix maximum of the ends says no earlier range can cover it (→ 0). That is
 *    the overlap rule documented in asn_compile.h. The same addresses through the *_prefix()
 *    lookups: the ASN must match, and the prefix must be exact by its definition — no boundary
 *    of the reference (an address whose ASN differs from the one before it) inside the block,
 *    one inside the block twice as large. Prints the mismatch counts; exit 1 if not 0.
 *
 * TERN_ASN_TABLE_SCALAR=1 in the environment makes the table use its portable descent.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "tern/geo/asn_compile.h"
#include "tern/geo/asn_table.h"

__extension__ typedef unsigned __int128 u128;

#define ROUNDS       5
#define EXACT_RANDOM 1000000u

struct rng {
    uint64_t s;
};
static uint64_t rnd(struct rng *r)
{
    uint64_t z = (r->s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* ---- reference ---------------------------------------------------------------------------- */

struct rr {
    u128 start, end;
    size_t seq;
    uint32_t asn;
};

struct ref {
    struct rr *v;
    u128 *prefmax; /* max end over v[0..i] */
    size_t n, cap;
};

static int rr_cmp(const void *a, const void *b)
{
    const struct rr *x = a, *y = b;
    if (x->start != y->start)
        return x->start < y->start ? -1 : 1;
    if (x->end != y->end)
        return x->end > y->end ? -1 : 1;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

static uint32_t ref_lookup(const struct ref *r, u128 a)
{
    size_t lo = 0, hi = r->n; /* first index with start > a */
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (r->v[mid].start <= a)
            lo = mid + 1;
        else
            hi = mid;
    }
    for (size_t i = lo; i-- > 0;) {
        if (r->prefmax[i] < a)
            return 0;
        if (r->v[i].end >= a)
            return r->v[i].asn;
    }
    return 0;
}

static void ref_push(struct ref *r, u128 s, u128 e, uint32_t asn, size_t seq)
{
    if (r->n == r->cap) {
        r->cap = r->cap ? r->cap * 2 : 1 << 16;
        r->v = realloc(r->v, r->cap * sizeof(*r->v));
        if (!r->v) {
            perror("realloc");
            exit(2);
        }
    }
    r->v[r->n++] = (struct rr){s, e, seq, asn};
}

static void ref_finish(struct ref *r)
{
    qsort(r->v, r->n, sizeof(*r->v), rr_cmp);
    r->prefmax = malloc((r->n ? r->n : 1) * sizeof(*r->prefmax));
    u128 m = 0;
    for (size_t i = 0; i < r->n; i++) {
        if (r->v[i].end > m || i == 0)
            m = r->v[i].end;
        r->prefmax[i] = m;
    }
}

/* The reference's boundaries: the addresses whose ASN differs from the one before (and 0), with
 * their ASNs — the same entries the table should hold, derived from the reference alone. */
struct bounds {
    u128 *key;
    uint32_t *key32; /* v4: the keys as u32, for the binary search */
    uint32_t *asn;
    size_t n;
};

static int u128_cmp(const void *a, const void *b)
{
    u128 x = *(const u128 *)a, y = *(const u128 *)b;
    return x < y ? -1 : x > y;
}

static void ref_bounds(const struct ref *r, u128 max, struct bounds *b)
{
    u128 *c = malloc((2 * r->n + 1) * sizeof(*c));
    size_t m = 0;
    c[m++] = 0;
    for (size_t i = 0; i < r->n; i++) {
        c[m++] = r->v[i].start;
        if (r->v[i].end < max)
            c[m++] = r->v[i].end + 1;
    }
    qsort(c, m, sizeof(*c), u128_cmp);
    b->key = malloc(m * sizeof(*b->key));
    b->asn = malloc(m * sizeof(*b->asn));
    if (!c || !b->key || !b->asn) {
        perror("malloc");
        exit(2);
    }
    b->n = 0;
    for (size_t i = 0; i < m; i++) {
        if (i && c[i] == c[i - 1])
            continue;
        uint32_t a = ref_lookup(r, c[i]);
        if (b->n && b->asn[b->n - 1] == a)
            continue;
        b->key[b->n] = c[i];
        b->asn[b->n++] = a;
    }
    free(c);
    if (max == UINT32_MAX) {
        b->key32 = malloc(b->n * sizeof(*b->key32));
        if (!b->key32) {
            perror("malloc");
            exit(2);
        }
        for (size_t i = 0; i < b->n; i++)
            b->key32[i] = (uint32_t)b->key[i];
    }
}

static size_t bs_find32(const struct bounds *b, uint32_t x)
{
    const uint32_t *base = b->key32;
    size_t n = b->n;
    while (n > 1) {
        size_t half = n / 2;
        base = base[half] <= x ? base + half : base;
        n -= half;
    }
    return (size_t)(base - b->key32);
}

/* index of the last key <= x: the branchless binary search of file format 1 (u32 keys for v4,
 * 16-byte ones for v6) */
static size_t bs_find(const struct bounds *b, u128 x)
{
    const u128 *base = b->key;
    size_t n = b->n;
    while (n > 1) {
        size_t half = n / 2;
        base = base[half] <= x ? base + half : base;
        n -= half;
    }
    return (size_t)(base - b->key);
}

/* Does a boundary split the aligned block of prefix length q around x (b splits [lo, hi] when
 * lo < b <= hi)? */
static int split(const struct bounds *b, u128 x, unsigned q, unsigned w)
{
    unsigned k = w - q;
    u128 mask = k == 128 ? ~(u128)0 : ((u128)1 << k) - 1, lo = x & ~mask, hi = x | mask;
    size_t i = bs_find(b, lo) + 1; /* the first boundary > lo */
    return i < b->n && b->key[i] <= hi;
}

/* The prefix p is right for x: its block is not split, the block twice as large is. */
static int prefix_ok(const struct bounds *b, u128 x, unsigned p, unsigned w)
{
    return p <= w && !split(b, x, p, w) && (p == 0 || split(b, x, p - 1, w));
}

/* Only what the bench's data needs: CSV/TSV, the first three fields, ASN with optional "AS". */
static int parse_addr(const char *s, u128 *out)
{
    if (strchr(s, ':')) {
        uint8_t b[16];
        if (inet_pton(AF_INET6, s, b) != 1)
            return -1;
        u128 v = 0;
        for (int i = 0; i < 16; i++)
            v = (v << 8) | b[i];
        *out = v;
        return 1;
    }
    struct in_addr a;
    if (inet_pton(AF_INET, s, &a) != 1)
        return -1;
    *out = ntohl(a.s_addr);
    return 0;
}

static void read_ref(const char *path, struct ref *r4, struct ref *r6, size_t *seq)
{
    FILE *fp = fopen(path, "r");
    if (!fp) {
        perror(path);
        exit(2);
    }
    char *line = NULL;
    size_t cap = 0;
    while (getline(&line, &cap, fp) >= 0) {
        if (line[0] == '#' || line[0] == '\n' || line[0] == '\0')
            continue;
        char sep = strchr(line, '\t') ? '\t' : ',';
        char *f[3], *p = line;
        for (int i = 0; i < 3; i++) {
            f[i] = p;
            p = strchr(p, sep);
            if (p)
                *p++ = '\0';
            else if (i < 2) {
                fprintf(stderr, "%s: short line\n", path);
                exit(2);
            } else
                f[i][strcspn(f[i], "\r\n")] = '\0';
        }
        u128 s, e;
        int fam = parse_addr(f[0], &s);
        if (fam < 0 || parse_addr(f[1], &e) != fam) {
            fprintf(stderr, "%s: bad line\n", path);
            exit(2);
        }
        const char *a = f[2];
        if ((a[0] == 'A' || a[0] == 'a') && (a[1] == 'S' || a[1] == 's'))
            a += 2;
        ref_push(fam ? r6 : r4, s, e, (uint32_t)strtoul(a, NULL, 10), (*seq)++);
    }
    free(line);
    fclose(fp);
}

/* ---- helpers ------------------------------------------------------------------------------ */

static void to16(u128 v, uint8_t b[16])
{
    for (int i = 15; i >= 0; i--) {
        b[i] = (uint8_t)v;
        v >>= 8;
    }
}

static u128 rnd128(struct rng *g)
{
    return ((u128)rnd(g) << 64) | rnd(g);
}

/* a random address inside a random range */
static u128 in_range(const struct ref *r, struct rng *g, int v6)
{
    const struct rr *x = &r->v[rnd(g) % r->n];
    u128 span = x->end - x->start; /* +1 may wrap for ::/0 */
    u128 off = v6 ? rnd128(g) : rnd(g);
    if (span != ~(u128)0)
        off %= span + 1;
    return x->start + off;
}

static uint64_t sink;

static struct bounds B4, B6;

static uint32_t bs_v4(const asn_table_t *t, uint32_t a)
{
    (void)t;
    return B4.asn[bs_find32(&B4, a)];
}

static uint32_t pfx_v4(const asn_table_t *t, uint32_t a)
{
    uint8_t p;
    uint32_t asn = asn_table_lookup_v4_prefix(t, a, &p);
    return asn + p;
}

static uint32_t bs_v6(const asn_table_t *t, const uint8_t *a)
{
    (void)t;
    u128 x = 0;
    for (int i = 0; i < 16; i++)
        x = x << 8 | a[i];
    return B6.asn[bs_find(&B6, x)];
}

static uint32_t pfx_v6(const asn_table_t *t, const uint8_t *a)
{
    uint8_t p;
    uint32_t asn = asn_table_lookup_v6_prefix(t, a, &p);
    return asn + p;
}

/* The three lookups share a loop shape; an indirect call costs each the same. */
typedef uint32_t (*look4_fn)(const asn_table_t *, uint32_t);
typedef uint32_t (*look6_fn)(const asn_table_t *, const uint8_t *);

static double time_v4(look4_fn f, const asn_table_t *t, const uint32_t *a, size_t n, uint64_t *sum)
{
    double best = 1e30;
    for (int r = 0; r < ROUNDS; r++) {
        uint64_t s = 0;
        double t0 = now();
        for (size_t i = 0; i < n; i++)
            s += f(t, a[i]);
        double dt = now() - t0;
        if (dt < best)
            best = dt;
        *sum = s;
        sink += s;
    }
    return (double)n / best;
}

static double time_v6(look6_fn f, const asn_table_t *t, const uint8_t (*a)[16], size_t n,
                      uint64_t *sum)
{
    double best = 1e30;
    for (int r = 0; r < ROUNDS; r++) {
        uint64_t s = 0;
        double t0 = now();
        for (size_t i = 0; i < n; i++)
            s += f(t, a[i]);
        double dt = now() - t0;
        if (dt < best)
            best = dt;
        *sum = s;
        sink += s;
    }
    return (double)n / best;
}

static size_t sum_mismatch;

/* one line: table, table with prefix, binary search (M lookups/s), checksums compared */
static void report4(const char *label, const asn_table_t *t, const uint32_t *a, size_t n)
{
    uint64_t s_tbl, s_pfx, s_bs;
    double r_tbl = time_v4(asn_table_lookup_v4, t, a, n, &s_tbl);
    double r_pfx = time_v4(pfx_v4, t, a, n, &s_pfx);
    double r_bs = time_v4(bs_v4, t, a, n, &s_bs);
    printf("%-12s table %7.2f  prefix %7.2f  bsearch %7.2f  M lookups/s  (checksum %" PRIu64
           "%s)\n",
           label, r_tbl / 1e6, r_pfx / 1e6, r_bs / 1e6, s_tbl,
           s_tbl == s_bs ? "" : ", BINARY SEARCH DIFFERS");
    sum_mismatch += s_tbl != s_bs;
}

static void report6(const char *label, const asn_table_t *t, const uint8_t (*a)[16], size_t n)
{
    uint64_t s_tbl, s_pfx, s_bs;
    double r_tbl = time_v6(asn_table_lookup_v6, t, a, n, &s_tbl);
    double r_pfx = time_v6(pfx_v6, t, a, n, &s_pfx);
    double r_bs = time_v6(bs_v6, t, a, n, &s_bs);
    printf("%-12s table %7.2f  prefix %7.2f  bsearch %7.2f  M lookups/s  (checksum %" PRIu64
           "%s)\n",
           label, r_tbl / 1e6, r_pfx / 1e6, r_bs / 1e6, s_tbl,
           s_tbl == s_bs ? "" : ", BINARY SEARCH DIFFERS");
    sum_mismatch += s_tbl != s_bs;
}

static size_t mism_shown, pfx_bad;
static size_t check(const asn_table_t *t, const struct ref *r, u128 a, int v6)
{
    uint32_t want = ref_lookup(r, a), got, got_p;
    uint8_t p;
    if (v6) {
        uint8_t b[16];
        to16(a, b);
        got = asn_table_lookup_v6(t, b);
        got_p = asn_table_lookup_v6_prefix(t, b, &p);
    } else {
        got = asn_table_lookup_v4(t, (uint32_t)a);
        got_p = asn_table_lookup_v4_prefix(t, (uint32_t)a, &p);
    }
    if (got_p != want || !prefix_ok(v6 ? &B6 : &B4, a, p, v6 ? 128 : 32)) {
        if (mism_shown++ < 10)
            fprintf(stderr,
                    "prefix mismatch v%d %016" PRIx64 "%016" PRIx64
                    ": table AS%u /%u, reference AS%u\n",
                    v6 ? 6 : 4, (uint64_t)(a >> 64), (uint64_t)a, got_p, p, want);
        pfx_bad++;
    }
    if (got == want)
        return 0;
    if (mism_shown++ < 10)
        fprintf(stderr, "mismatch v%d %016" PRIx64 "%016" PRIx64 ": table %u, reference %u\n",
                v6 ? 6 : 4, (uint64_t)(a >> 64), (uint64_t)a, got, want);
    return 1;
}

static size_t exactness(const asn_table_t *t, const struct ref *r, int v6, size_t *checked)
{
    u128 max = v6 ? ~(u128)0 : (u128)UINT32_MAX;
    size_t bad = 0, n = 0;
    for (size_t i = 0; i < r->n; i++) {
        const struct rr *x = &r->v[i];
        if (x->start > 0)
            bad += check(t, r, x->start - 1, v6), n++;
        bad += check(t, r, x->start, v6), n++;
        bad += check(t, r, x->end, v6), n++;
        if (x->end < max)
            bad += check(t, r, x->end + 1, v6), n++;
    }
    struct rng g = {v6 ? 77 : 44};
    for (size_t i = 0; i < EXACT_RANDOM; i++) {
        u128 a;
        if (i & 1)
            a = r->n ? in_range(r, &g, v6) : 0;
        else
            a = v6 ? rnd128(&g) : (u128)(uint32_t)rnd(&g);
        bad += check(t, r, a, v6), n++;
    }
    /* the extremes */
    bad += check(t, r, 0, v6) + check(t, r, max, v6);
    n += 2;
    *checked = n;
    return bad;
}

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: %s OUT.asn LOOKUPS INPUT...\n", argv[0]);
        return 2;
    }
    const char *out = argv[1];
    size_t nl = strtoull(argv[2], NULL, 10);
    const char *const *inputs = (const char *const *)argv + 3;
    size_t ni = (size_t)argc - 3;
    char err[512];

    asn_compile_stats_t st;
    double t0 = now();
    if (asn_compile(inputs, ni, out, &st, err, sizeof(err)) != 0) {
        fprintf(stderr, "compile: %s\n", err);
        return 2;
    }
    double tc = now() - t0;
    t0 = now();
    asn_table_t *t = asn_table_open(out, err, sizeof(err));
    if (!t) {
        fprintf(stderr, "open: %s\n", err);
        return 2;
    }
    double to = now() - t0;
    struct stat sb;
    stat(out, &sb);
    size_t n4, n6, nn;
    asn_table_counts(t, &n4, &n6, &nn);
    printf("input: %zu lines, %zu v4 + %zu v6 ranges, %zu overlaps\n", st.lines, st.ranges_v4,
           st.ranges_v6, st.overlaps);
    printf("table: %zu v4 + %zu v6 entries, %zu names; file %.2f MB (%lld bytes)\n", n4, n6, nn,
           (double)sb.st_size / 1e6, (long long)sb.st_size);
    printf("compile %.2f s, open (validate) %.1f ms\n", tc, to * 1e3);

    struct ref r4 = {0}, r6 = {0};
    size_t seq = 0;
    for (size_t i = 0; i < ni; i++)
        read_ref(inputs[i], &r4, &r6, &seq);
    ref_finish(&r4);
    ref_finish(&r6);
    ref_bounds(&r4, UINT32_MAX, &B4);
    ref_bounds(&r6, ~(u128)0, &B6);
    const char *scalar = getenv("TERN_ASN_TABLE_SCALAR");
    printf("descent: %s; binary search over the reference's %zu v4 + %zu v6 boundaries\n",
           scalar && *scalar && strcmp(scalar, "0") ? "portable (TERN_ASN_TABLE_SCALAR)"
           : __builtin_cpu_supports("avx2")         ? "AVX2"
                                                    : "portable (no AVX2)",
           B4.n, B6.n);

    /* lookups/s */
    struct rng g = {12345};
    uint32_t *a4 = malloc(nl * sizeof(*a4));
    uint8_t(*a6)[16] = malloc(nl * sizeof(*a6));
    if (!a4 || !a6) {
        perror("malloc");
        return 2;
    }
    for (size_t i = 0; i < nl; i++)
        a4[i] = (uint32_t)rnd(&g);
    report4("v4 uniform", t, a4, nl);
    for (size_t i = 0; i < nl; i++)
        a4[i] = (uint32_t)in_range(&r4, &g, 0);
    report4("v4 in-range", t, a4, nl);
    for (size_t i = 0; i < nl; i++)
        to16(((u128)0x2000 << 112) | (rnd128(&g) >> 3), a6[i]);
    report6("v6 2000::/3", t, (const uint8_t(*)[16])a6, nl);
    for (size_t i = 0; i < nl; i++)
        to16(rnd128(&g), a6[i]);
    report6("v6 ::/0", t, (const uint8_t(*)[16])a6, nl);
    for (size_t i = 0; i < nl; i++)
        to16(in_range(&r6, &g, 1), a6[i]);
    report6("v6 in-range", t, (const uint8_t(*)[16])a6, nl);
    free(a4);
    free(a6);

    /* exactness */
    size_t c4, c6;
    size_t m4 = exactness(t, &r4, 0, &c4), m6 = exactness(t, &r6, 1, &c6);
    printf("exactness: v4 %zu mismatches in %zu lookups, v6 %zu mismatches in %zu lookups; "
           "prefix lookups %zu wrong\n",
           m4, c4, m6, c6, pfx_bad);
    asn_table_close(t);
    free(r4.v);
    free(r4.prefmax);
    free(r6.v);
    free(r6.prefmax);
    free(B4.key);
    free(B4.key32);
    free(B4.asn);
    free(B6.key);
    free(B6.asn);
    return (m4 || m6 || pfx_bad || sum_mismatch) ? 1 : 0;
}
