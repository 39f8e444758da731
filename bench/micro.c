/*
 * micro.c — parse → answer → render cost per query, without the network.
 *
 * Loads one zone with zone_file_load() into a frozen zone_table, builds one query packet per case
 * and calls answer_query() on it in a tight loop: the whole per-query path of a worker minus
 * recvmmsg/sendmmsg. Reports ns/query (best of ROUNDS rounds, each timed with CLOCK_MONOTONIC
 * around the loop) and checks each case's response (rcode, counts) once before timing.
 *
 * Usage:
 *   micro ZONEFILE ORIGIN ITERATIONS CASE...         timing table
 *   micro --one LABEL ZONEFILE ORIGIN ITERATIONS CASE...   only case LABEL, untimed: for
 *       valgrind --tool=callgrind --toggle-collect=answer_query (instructions/query =
 *       Ir / ITERATIONS; bench/micro.sh does this)
 * CASE is LABEL=NAME/TYPE with TYPE one of A AAAA MX TXT SRV NS SOA CNAME, e.g.
 *   exact=www.example.test./A
 * Queries carry no EDNS, like dnsperf's default; set MICRO_EDNS=1 to add an OPT record
 * (UDP size 1232). MICRO_ANAME=FILE gives the view an ANAME results table (what the resolver
 * thread publishes, tern/zone/aname_results.h): one "NAME IPV4" per line, each an A answer with
 * TTL 300 (bench/aname.sh).
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <arpa/inet.h>
#include <time.h>

#include "tern/answer/answer.h"
#include "tern/common/err.h"
#include "tern/wire/dname.h"
#include "tern/zone/aname_results.h"
#include "tern/zone/zone_file.h"
#include "tern/zone/zone_table.h"

/* Best of 5 rounds: the minimum filters out preemption by other work on a shared machine. */
#define ROUNDS    5
#define MAX_CASES 16

typedef struct bench_case {
    const char *label;
    char name[256];
    uint16_t qtype;
    uint8_t pkt[512];
    size_t len;
} bench_case_t;

static const struct {
    const char *name;
    uint16_t type;
} types[] = {
    {"A", WIRE_T_A},     {"AAAA", WIRE_T_AAAA}, {"MX", WIRE_T_MX},   {"TXT", WIRE_T_TXT},
    {"SRV", WIRE_T_SRV}, {"NS", WIRE_T_NS},     {"SOA", WIRE_T_SOA}, {"CNAME", WIRE_T_CNAME},
    {"DS", WIRE_T_DS},   {"ANY", WIRE_T_ANY},
};

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Build a standard query for c->name/c->qtype into c->pkt. 0 or -1 on a bad name. */
static int build_query(bench_case_t *c, int edns)
{
    uint8_t *p = c->pkt;
    static const uint8_t hdr[12] = {0x12, 0x34, 0x00, 0x00, 0, 1, 0, 0, 0, 0, 0, 0};
    memcpy(p, hdr, sizeof hdr);
    if (edns)
        p[11] = 1;
    size_t o = sizeof hdr;
    const char *s = c->name;
    while (*s) {
        const char *dot = strchr(s, '.');
        size_t n = dot ? (size_t)(dot - s) : strlen(s);
        if (n == 0 || n > 63 || o + n + 1 > 300)
            return -1;
        p[o++] = (uint8_t)n;
        memcpy(p + o, s, n);
        o += n;
        s += n + (dot ? 1 : 0);
    }
    p[o++] = 0;
    p[o++] = (uint8_t)(c->qtype >> 8);
    p[o++] = (uint8_t)c->qtype;
    p[o++] = 0;
    p[o++] = 1; /* IN */
    if (edns) {
        static const uint8_t opt[11] = {0, 0, 41, 0x04, 0xd0, 0, 0, 0, 0, 0, 0};
        memcpy(p + o, opt, sizeof opt);
        o += sizeof opt;
    }
    c->len = o;
    return 0;
}

static int parse_case(bench_case_t *c, char *arg, int edns)
{
    char *eq = strchr(arg, '=');
    char *slash = strrchr(arg, '/');
    if (!eq || !slash || slash < eq)
        return -1;
    *eq = '\0';
    *slash = '\0';
    c->label = arg;
    snprintf(c->name, sizeof c->name, "%s", eq + 1);
    c->qtype = 0;
    for (size_t i = 0; i < TERN_ARRAY_SIZE(types); i++)
        if (strcasecmp(slash + 1, types[i].name) == 0)
            c->qtype = types[i].type;
    return c->qtype ? build_query(c, edns) : -1;
}

static void usage(void)
{
    fprintf(stderr, "usage: micro [--one LABEL] ZONEFILE ORIGIN ITERATIONS LABEL=NAME/TYPE...\n"
                    "       micro --mix QUERYFILE ZONEFILE ORIGIN ROUNDS [BATCH]\n");
    exit(2);
}

/* --mix: every query of a dnsperf query file ("name type" lines) in file order, ROUNDS times:
 * the cost of answer_query() when the names are many and distinct, so that the zone's nodes,
 * names and RRsets come from L3 or memory as under real traffic, not from L1 as in the one-name
 * cases. Prints the best round's ns/query. */
static int run_mix(const char *qfile, const answer_view_t *view, long rounds, long batch)
{
    FILE *f = fopen(qfile, "r");
    if (!f) {
        perror(qfile);
        return 1;
    }
    /* the packets back to back (about 40 bytes each), as few cache lines as the queries need */
    size_t n = 0, used = 0, cap = 0;
    uint8_t *pkts = NULL;
    uint32_t *offs = NULL;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        char name[256], type[16];
        if (sscanf(line, "%255s %15s", name, type) != 2)
            continue;
        if (n == cap) {
            cap = cap ? cap * 2 : 4096;
            pkts = realloc(pkts, cap * 64);
            offs = realloc(offs, (cap + 1) * sizeof(*offs));
            if (!pkts || !offs)
                return 1;
        }
        static bench_case_t c;
        char arg[300];
        snprintf(arg, sizeof arg, "q=%s/%s", name, type);
        if (parse_case(&c, arg, 0) != 0 || c.len > 64)
            continue;
        offs[n] = (uint32_t)used;
        memcpy(pkts + used, c.pkt, c.len);
        used += c.len;
        offs[++n] = (uint32_t)used;
    }
    fclose(f);
    static answer_ctx_t ctx;
    static uint8_t out[4096];
    /* batch 1: one query after another; then batches of `batch` as a worker's recvmmsg gives
     * them, answered as they are and with answer_prefetch() first (rounds alternate) */
    double best[3] = {1e18, 1e18, 1e18};
    size_t sum = 0;
    for (long r = 0; r < rounds; r++) {
        for (int mode = 0; mode < 3; mode++) {
            size_t step = mode == 0 ? 1 : (size_t)batch;
            uint64_t a = now_ns();
            for (size_t i = 0; i < n; i += step) {
                size_t m = n - i < step ? n - i : step;
                if (mode == 2) {
                    static wire_query_t qs[ANSWER_PREFETCH_MAX];
                    wire_parse_result_t prs[ANSWER_PREFETCH_MAX];
                    for (size_t k = 0; k < m; k++)
                        prs[k] = wire_parse_query(&qs[k], pkts + offs[i + k],
                                                  offs[i + k + 1] - offs[i + k]);
                    answer_prefetch(view, qs, (unsigned)m);
                    for (size_t k = 0; k < m; k++)
                        sum += answer_parsed(view, &ctx, &qs[k], prs[k], NULL, pkts + offs[i + k],
                                             offs[i + k + 1] - offs[i + k], out, sizeof out,
                                             ANSWER_UDP);
                    continue;
                }
                for (size_t k = i; k < i + m; k++)
                    sum += answer_query(view, &ctx, NULL, pkts + offs[k], offs[k + 1] - offs[k],
                                        out, sizeof out, ANSWER_UDP);
            }
            double per = (double)(now_ns() - a) / (double)n;
            if (per < best[mode])
                best[mode] = per;
        }
    }
    printf("mix %zu queries: best of %ld rounds %.1f ns/query (%zu bytes)\n", n, rounds, best[0],
           sum);
    printf("mix batches of %ld: %.1f ns/query, with answer_prefetch() %.1f ns/query (%.3f)\n",
           batch, best[1], best[2], best[2] / best[1]);
    free(pkts);
    free(offs);
    return 0;
}

/* MICRO_ANAME's table, or NULL (none given, or a line that does not parse: said on stderr). */
static aname_results_t *aname_table(const char *path)
{
    FILE *f = fopen(path, "r");
    aname_results_builder_t *b = aname_results_builder_new();
    if (!f || !b) {
        perror(path);
        if (f)
            fclose(f);
        aname_results_builder_free(b);
        return NULL;
    }
    char line[512];
    while (fgets(line, sizeof line, f)) {
        char name[256], addr[64];
        uint8_t wire[DNAME_MAXLEN], rd[6] = {0, 4};
        const char *why;
        if (sscanf(line, "%255s %63s", name, addr) != 2 ||
            dname_from_str(name, strlen(name), false, wire, &why) < 0 ||
            inet_pton(AF_INET, addr, rd + 2) != 1) {
            fprintf(stderr, "micro: %s: bad line '%s'\n", path, line);
            continue;
        }
        aname_result_t r = {
            .state = ANAME_OK, .count = 1, .ttl = 300, .rdata_len = sizeof(rd), .rdata = rd};
        if (aname_results_add(b, wire, WIRE_T_A, &r) < 0)
            fprintf(stderr, "micro: %s: cannot add '%s'\n", path, name);
    }
    fclose(f);
    return aname_results_finish(b);
}

int main(int argc, char **argv)
{
    const char *only = NULL, *mix = NULL;
    long batch = 8;
    if (argc > 2 && strcmp(argv[1], "--mix") == 0) {
        mix = argv[2];
        argv += 2;
        argc -= 2;
        if (argc > 4) { /* ZONEFILE ORIGIN ROUNDS BATCH */
            batch = strtol(argv[4], NULL, 10);
            if (batch < 1 || batch > ANSWER_PREFETCH_MAX)
                usage();
            argc = 4;
        }
    }
    if (argc > 2 && strcmp(argv[1], "--one") == 0) {
        only = argv[2];
        argv += 2;
        argc -= 2;
    }
    if ((argc < 5 && !mix) || argc < 4 || argc - 4 > MAX_CASES)
        usage();
    const char *zfile = argv[1], *origin = argv[2];
    long iters = strtol(argv[3], NULL, 10);
    if (iters <= 0)
        usage();
    const char *e = getenv("MICRO_EDNS");
    int edns = e && *e == '1';

    static bench_case_t cases[MAX_CASES];
    int ncases = 0;
    for (int i = 4; i < argc; i++) {
        if (parse_case(&cases[ncases], argv[i], edns) != 0) {
            fprintf(stderr, "micro: bad case '%s'\n", argv[i]);
            return 2;
        }
        ncases++;
    }

    char err[512] = "";
    zone_t *z = NULL;
    uint64_t t0 = now_ns();
    int r = zone_file_load(origin, zfile, &z, err, sizeof err);
    if (r < 0) {
        fprintf(stderr, "micro: %s\n", err[0] ? err : tern_strerror(r));
        return 1;
    }
    size_t nodes = z->node_count, rrs = z->rr_count;
    zone_table_t *t = zone_table_new();
    if (!t || zone_table_add(t, z) < 0 || zone_table_freeze(t) < 0) {
        fprintf(stderr, "micro: out of memory\n");
        return 1;
    }
    uint64_t t1 = now_ns();
    if (!only)
        printf("# zone %s: %zu nodes, %zu RRs, loaded in %.1f ms; %ld iterations x %d rounds%s\n",
               origin, nodes, rrs, (double)(t1 - t0) / 1e6, iters, ROUNDS, edns ? ", EDNS" : "");

    answer_config_t cfg = {.edns_max_udp = ANSWER_EDNS_DEFAULT};
    answer_view_t view = {.table = t, .cfg = cfg};
    const char *an = getenv("MICRO_ANAME");
    aname_results_t *results = an && *an ? aname_table(an) : NULL;
    view.aname = results;
    if (mix) {
        int mr = run_mix(mix, &view, iters, batch);
        zone_table_free(t);
        aname_results_release(results);
        return mr;
    }
    static answer_ctx_t ctx;
    static uint8_t out[65535];
    int rc = 0;
    if (!only)
        printf("%-12s %6s %5s %8s %3s %3s %3s %10s\n", "case", "qtype", "resp", "rcode", "an", "ns",
               "ar", "ns/query");
    for (int i = 0; i < ncases; i++) {
        bench_case_t *c = &cases[i];
        if (only && strcmp(only, c->label) != 0)
            continue;
        size_t n = answer_query(&view, &ctx, NULL, c->pkt, c->len, out, sizeof out, ANSWER_UDP);
        if (n < 12) {
            fprintf(stderr, "micro: %s: no response\n", c->label);
            rc = 1;
            continue;
        }
        if (only) {
            /* the measured loop for callgrind: nothing else runs inside answer_query */
            for (long k = 0; k < iters; k++)
                n = answer_query(&view, &ctx, NULL, c->pkt, c->len, out, sizeof out, ANSWER_UDP);
            printf("%s %zu\n", c->label, n);
            continue;
        }
        size_t resp_len = n;
        unsigned rcode = out[3] & 0xFu, an = (unsigned)(out[6] << 8 | out[7]);
        unsigned ns = (unsigned)(out[8] << 8 | out[9]), ar = (unsigned)(out[10] << 8 | out[11]);
        double best = 1e18;
        for (int round = 0; round < ROUNDS; round++) {
            uint64_t a = now_ns();
            for (long k = 0; k < iters; k++)
                n += answer_query(&view, &ctx, NULL, c->pkt, c->len, out, sizeof out, ANSWER_UDP);
            double per = (double)(now_ns() - a) / (double)iters;
            if (per < best)
                best = per;
        }
        if (n == 0)
            printf("(never)\n"); /* keeps the summed lengths alive */
        printf("%-12s %6u %5zu %8u %3u %3u %3u %10.1f\n", c->label, c->qtype, resp_len, rcode, an,
               ns, ar, best);
    }
    zone_table_free(t);
    aname_results_release(results);
    return rc;
}
