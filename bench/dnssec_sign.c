/*
 * dnssec_sign.c — what one RRSIG costs tern, and what a cache hit costs instead.
 *
 *   dnssec_sign [N]       N signatures per batch for algorithms 13 and 15 (default 2000); RSA
 *                         gets N/10; hits and misses through the cache get 10 N and N
 *
 * Built by bench/dnssec.py (--parts sign) against the static libraries in build-bench and run
 * pinned to one CPU (taskset -c 0). For each algorithm (13 ECDSA P-256, 15 Ed25519, 8 RSA/SHA-256
 * 2048 bits): a ZSK from dnssec_key_generate(), a context (dnssec_keyctx_new) and a worker's
 * signer (dnssec_signer_new(65536, false), as ternd's workers make it), then
 *   sign    dnssec_sign() of a 2-record A RRset (www.bench.test. 300 A 192.0.2.1, 192.0.2.2);
 *   miss    dnssec_online() through a worker's signature cache, a new TTL each call: every call
 *           a miss, so the key hash, the signature and the cache insert;
 *   hit     dnssec_online() of the same 2-record subset of a 4-record RRset, again and again:
 *           what a steered answer costs once its subset is cached.
 * The zone for the last two is built as tests/unit/dnssec/test_dnssec_sign.c builds it: its
 * DNSKEYs from dnssec_zone_dnskeys(), a zone_builder, dnssec_zone_sign().
 * Every figure is the median of 5 batches, in µs per call, from the thread's CPU clock
 * (CLOCK_THREAD_CPUTIME_ID: a shared machine's other work does not count) and from the wall
 * clock. The last line of output is the same as one JSON object.
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tern/dnssec/dnssec_key.h"
#include "tern/dnssec/dnssec_sign.h"
#include "tern/dnssec/dnssec_zone.h"
#include "tern/wire/rr.h"
#include "tern/zone/zone.h"
#include "tern/zone/zone_builder.h"

#define BATCHES 5

static const uint8_t ORIGIN[] = "\5bench\4test";
static const uint8_t OWNER[] = "\3www\5bench\4test";
/* 4 A records as an rdata sequence (u16 RDLENGTH, RDATA); the signed RRset is the first two */
static const uint8_t FOUR_A[] = {0, 4, 192, 0, 2, 1, 0, 4, 192, 0, 2, 2,
                                 0, 4, 192, 0, 2, 3, 0, 4, 192, 0, 2, 4};
static const uint8_t SOA_RD[] = "\3ns1\5bench\4test\0\4host\5bench\4test\0"
                                "\0\0\0\1\0\0\x0e\x10\0\0\x07\x08\0\x09\x3a\x80\0\0\x0e\x10";

typedef struct {
    double cpu_us, wall_us; /* medians of the batches, per call */
    double cpu_all[BATCHES];
    unsigned n;
} fig_t;

static double now_ns(clockid_t c)
{
    struct timespec ts;
    clock_gettime(c, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(const double *v, unsigned n)
{
    double t[BATCHES];
    memcpy(t, v, n * sizeof(double));
    qsort(t, n, sizeof(double), cmp_d);
    return n % 2 ? t[n / 2] : (t[n / 2 - 1] + t[n / 2]) / 2;
}

static void die(const char *what, const char *err)
{
    fprintf(stderr, "dnssec_sign: %s: %s\n", what, err);
    exit(1);
}

/* The batch loops: one function per kind of call, each returning how many calls failed. */
typedef struct {
    dnssec_signer_t *s;
    dnssec_keyctx_t *kc;
    dnssec_worker_t *w;
    dnssec_zone_t *dz;
    zone_t *z;
    const zone_rrset_t *a;
    uint32_t now;
    uint32_t ttl; /* the next TTL for misses */
} ctx_t;

static unsigned run_sign(ctx_t *c, unsigned n)
{
    dnssec_rrsig_req_t req = {.owner = OWNER,
                              .labels = 3,
                              .type = WIRE_T_A,
                              .ttl = 300,
                              .inception = c->now - 3600,
                              .expiration = c->now + 14 * 86400,
                              .signer = ORIGIN};
    uint8_t out[DNSSEC_RRSIG_MAX];
    unsigned bad = 0;
    for (unsigned i = 0; i < n; i++) {
        req.inception = c->now - 3600 + (i & 1023); /* distinct signing data, as per query */
        bad += dnssec_sign(c->s, c->kc, &req, 2, FOUR_A, NULL, out, sizeof(out)) <= 0;
    }
    return bad;
}

static const uint32_t SUBSET[2] = {6, 0}; /* the 2nd and 1st record: a steered pick */

static unsigned run_miss(ctx_t *c, unsigned n)
{
    uint8_t out[DNSSEC_RRSIG_MAX];
    unsigned bad = 0;
    for (unsigned i = 0; i < n; i++)
        bad += dnssec_online(c->w, c->dz, c->z, OWNER, 3, WIRE_T_A, c->ttl++, 2, c->a->rdata,
                             SUBSET, c->now, out) <= 0;
    return bad;
}

static unsigned run_hit(ctx_t *c, unsigned n)
{
    uint8_t out[DNSSEC_RRSIG_MAX];
    unsigned bad = 0;
    for (unsigned i = 0; i < n; i++)
        bad += dnssec_online(c->w, c->dz, c->z, OWNER, 3, WIRE_T_A, 60, 2, c->a->rdata, SUBSET,
                             c->now, out) <= 0;
    return bad;
}

static fig_t timed(unsigned (*fn)(ctx_t *, unsigned), ctx_t *c, unsigned n, const char *what)
{
    fig_t f = {.n = n};
    double wall[BATCHES];
    fn(c, n / 10 + 1); /* warm */
    for (int b = 0; b < BATCHES; b++) {
        double c0 = now_ns(CLOCK_THREAD_CPUTIME_ID), w0 = now_ns(CLOCK_MONOTONIC);
        unsigned bad = fn(c, n);
        double c1 = now_ns(CLOCK_THREAD_CPUTIME_ID), w1 = now_ns(CLOCK_MONOTONIC);
        if (bad)
            die(what, "a call failed");
        f.cpu_all[b] = (c1 - c0) / 1e3 / n;
        wall[b] = (w1 - w0) / 1e3 / n;
    }
    f.cpu_us = median(f.cpu_all, BATCHES);
    f.wall_us = median(wall, BATCHES);
    return f;
}

static dnssec_key_t *gen(unsigned alg, bool ksk)
{
    dnssec_key_t *k = NULL;
    char err[256] = "";
    if (dnssec_key_generate(ORIGIN, alg, ksk, alg == DNSSEC_ALG_RSASHA256 ? 2048 : 0, &k, err,
                            sizeof(err)) < 0)
        die("dnssec_key_generate", err);
    return k;
}

static zone_t *build(dnssec_zone_t *dz)
{
    zone_builder_t *b = zone_builder_new(ORIGIN, "dnssec_sign");
    uint8_t keys[4096];
    char err[256];
    int kl = dnssec_zone_dnskeys(dz, keys, sizeof(keys));
    if (!b || kl <= 0 || zone_builder_set_dnssec(b, keys, (size_t)kl, 0) != 0)
        die("zone", "builder");
    if (zone_builder_add(b, ORIGIN, WIRE_T_SOA, 1, 3600, SOA_RD, sizeof(SOA_RD) - 1, NULL, 0) ||
        zone_builder_add(b, ORIGIN, WIRE_T_NS, 1, 3600, (const uint8_t *)"\3ns1\5bench\4test", 16,
                         NULL, 0))
        die("zone", zone_builder_error(b));
    for (int i = 0; i < 4; i++)
        if (zone_builder_add(b, OWNER, WIRE_T_A, 1, 60, FOUR_A + 2 + 6 * i, 4, NULL, 0))
            die("zone", zone_builder_error(b));
    zone_t *z = NULL;
    if (zone_builder_finish(b, &z, err, sizeof(err)) < 0)
        die("zone", err);
    return z;
}

int main(int argc, char **argv)
{
    dnssec_mem_install(); /* before libcrypto allocates anything, as ternd's main() does */
    unsigned n = argc > 1 ? (unsigned)strtoul(argv[1], NULL, 10) : 2000;
    if (n < 10)
        n = 10;
    static const unsigned algs[] = {DNSSEC_ALG_ECDSAP256SHA256, DNSSEC_ALG_ED25519,
                                    DNSSEC_ALG_RSASHA256};
    static const char *const names[] = {"ECDSAP256SHA256", "ED25519", "RSASHA256-2048"};
    char json[4096];
    size_t jl = (size_t)snprintf(json, sizeof(json), "{\"n\": %u, \"algs\": {", n);
    printf("%-16s %5s %9s %9s %9s %9s %9s %9s  (µs per call, median of %d batches; cpu = "
           "thread CPU clock)\n",
           "algorithm", "alg", "sign cpu", "sign wall", "miss cpu", "miss wall", "hit cpu",
           "hit wall", BATCHES);
    for (size_t ai = 0; ai < 3; ai++) {
        unsigned alg = algs[ai];
        unsigned ns = alg == DNSSEC_ALG_RSASHA256 ? n / 10 : n;
        char err[256] = "";
        ctx_t c = {.now = (uint32_t)time(NULL), .ttl = 1000};
        dnssec_key_t *zsk = gen(alg, false);
        c.kc = dnssec_keyctx_new(zsk, err, sizeof(err));
        if (!c.kc)
            die("dnssec_keyctx_new", err);
        c.s = dnssec_signer_new(65536, false);
        if (!c.s)
            die("dnssec_signer_new", "NULL");
        fig_t sign = timed(run_sign, &c, ns, "dnssec_sign");

        /* a signed zone of this algorithm and one worker's cache */
        dnssec_key_t *keys[2] = {gen(alg, true), gen(alg, false)};
        if (dnssec_zone_new(ORIGIN, keys, 2, 1, NULL, &c.dz, err, sizeof(err)) < 0)
            die("dnssec_zone_new", err);
        c.z = build(c.dz);
        dnssec_sigs_t *old = NULL;
        if (dnssec_zone_sign(c.dz, c.z, c.now, &old, err, sizeof(err)) < 0)
            die("dnssec_zone_sign", err);
        const zone_node_t *node = zone_find_node(c.z, OWNER, sizeof(OWNER), dname_hash(OWNER));
        c.a = node ? zone_node_rrset(node, WIRE_T_A) : NULL;
        if (!c.a || c.a->count != 4)
            die("zone", "www.bench.test. A is not the 4-record RRset");
        c.w = dnssec_worker_new(0, 16384); /* ternd's default dnssec_cache */
        if (!c.w)
            die("dnssec_worker_new", "NULL");
        fig_t miss = timed(run_miss, &c, ns, "dnssec_online (miss)");
        fig_t hit = timed(run_hit, &c, 10 * n, "dnssec_online (hit)");
        dnssec_worker_stats_t st;
        dnssec_worker_stats(c.w, &st);
        if (st.fails)
            die("dnssec_online", "failures counted");

        printf("%-16s %5u %9.2f %9.2f %9.2f %9.2f %9.3f %9.3f\n", names[ai], alg, sign.cpu_us,
               sign.wall_us, miss.cpu_us, miss.wall_us, hit.cpu_us, hit.wall_us);
        jl += (size_t)snprintf(
            json + jl, sizeof(json) - jl,
            "%s\"%u\": {\"name\": \"%s\", \"siglen\": %u, \"n_sign\": %u, \"n_hit\": %u, "
            "\"sign_cpu_us\": %.3f, \"sign_wall_us\": %.3f, \"miss_cpu_us\": %.3f, "
            "\"miss_wall_us\": %.3f, \"hit_cpu_us\": %.4f, \"hit_wall_us\": %.4f, "
            "\"sign_cpu_batches\": [%.3f, %.3f, %.3f, %.3f, %.3f], \"cache_hits\": %llu, "
            "\"cache_misses\": %llu}",
            ai ? ", " : "", alg, names[ai], zsk->siglen, ns, hit.n, sign.cpu_us, sign.wall_us,
            miss.cpu_us, miss.wall_us, hit.cpu_us, hit.wall_us, sign.cpu_all[0], sign.cpu_all[1],
            sign.cpu_all[2], sign.cpu_all[3], sign.cpu_all[4], (unsigned long long)st.hits,
            (unsigned long long)st.misses);

        dnssec_worker_free(c.w);
        c.z->dnssec = c.dz;
        c.z->dnssec_free = dnssec_zone_free;
        zone_free(c.z);
        dnssec_signer_free(c.s);
        dnssec_keyctx_free(c.kc);
        dnssec_key_free(zsk);
    }
    snprintf(json + jl, sizeof(json) - jl, "}}");
    printf("%s\n", json);
    return 0;
}
