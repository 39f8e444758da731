/*
 * test_zone_patch.c — a patched zone version answers exactly as a zone built from scratch with
 * the same data. A random walk over a universe of labels (hosts, chains of empty non-terminals,
 * a wildcard, MX and CNAME targets, glue under a delegation) changes a few labels per step; each
 * step patches the previous version (itself patched) and builds the new state in full, then
 * every name of the universe, its neighbours and names under the wildcard are asked for every
 * type through answer_query() on both, byte for byte. Also: what must be built in full says so,
 * and a patch shares the base's data rather than copying it.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "tern/answer/answer.h"
#include "tern/common/err.h"
#include "tern/wire/dname.h"
#include "tern/zone/zone_json.h"
#include "tern/zone/zone_patch.h"
#include "tern/zone/zone_table.h"
#include "zone_test_util.h"

#define ORIGIN "p.test"

#define CONFIG                                                                                     \
    "{\"soa\": {\"ttl\": 3600, \"ns\": \"ns1.p.test.\", \"mbox\": \"hostmaster.p.test\", "         \
    "\"refresh\": 7200, \"retry\": 900, \"expire\": 1209600, \"minttl\": 300, "                    \
    "\"serial\": 7}}"

#define APEX "{\"ns\": {\"records\": [{\"host\": \"ns1.p.test\"}]}}"

/* What the apex may hold (the walk changes it too): the SOA's serial, TTL and negative TTL, the
 * NS set (mail1 as a second name server brings its address along), an address at the apex. */
static const char *const apex_cfgs[] = {
    CONFIG,
    "{\"soa\": {\"ttl\": 3600, \"ns\": \"ns1.p.test.\", \"mbox\": \"hostmaster.p.test\", "
    "\"refresh\": 7200, \"retry\": 900, \"expire\": 1209600, \"minttl\": 60, \"serial\": 8}}",
    "{\"soa\": {\"ttl\": 100, \"ns\": \"ns1.p.test.\", \"mbox\": \"admin.p.test\", "
    "\"refresh\": 7200, \"retry\": 900, \"expire\": 1209600, \"minttl\": 300, \"serial\": 9}}",
};
static const char *const apex_recs[] = {
    APEX,
    "{\"ns\": {\"records\": [{\"host\": \"ns1.p.test\"}, {\"host\": \"mail1.p.test\"}]}}",
    "{\"ns\": {\"records\": [{\"host\": \"ns1.p.test\"}]}, \"a\": {\"records\": [{\"ip\": "
    "\"192.0.2.80\"}]}, \"txt\": {\"records\": [{\"text\": \"apex\"}]}}",
};
static unsigned apex_v; /* which of them build() uses */

/* Labels that never change: the delegation, its glue, the MX targets, the name server. */
static const char *const fixed[][2] = {
    {"sub", "{\"ns\": {\"records\": [{\"host\": \"ns.sub.p.test\"}]}}"},
    {"ns.sub", "{\"a\": {\"records\": [{\"ip\": \"192.0.2.53\"}]}}"},
    {"ns1", "{\"a\": {\"records\": [{\"ip\": \"192.0.2.1\"}]}}"},
    {"mail1", "{\"a\": {\"records\": [{\"ip\": \"192.0.2.25\"}]}}"},
    {"mail2", "{\"aaaa\": {\"records\": [{\"ip\": \"2001:db8::25\"}]}}"},
};

/* Labels the walk changes. */
static const char *const labels[] = {
    "a",   "b.a", "c.b.a", "d.c.b.a",  "www",   "web",   "x",      "y.x", "*.w",  "h.w",
    "m",   "t",   "t2",    "deep.e.f", "e.f",   "f",     "g1",     "g2",  "*.g1", "glue.sub",
    "k.k", "k",   "q",     "r.q",      "s.r.q", "alias", "alias2", "z",   "n1",   "n2",
};
#define NLABELS (sizeof(labels) / sizeof(labels[0]))

/* What a changed label may hold (NULL: nothing, the label is deleted). */
static const char *const variants[] = {
    NULL,
    "{\"a\": {\"records\": [{\"ip\": \"198.51.100.1\"}]}}",
    "{\"a\": {\"ttl\": 60, \"records\": [{\"ip\": \"198.51.100.2\"}, {\"ip\": \"198.51.100.3\"}]}}",
    "{\"aaaa\": {\"records\": [{\"ip\": \"2001:db8::7\"}]}}",
    "{\"txt\": {\"records\": [{\"text\": \"hello\"}]}, \"a\": {\"records\": [{\"ip\": "
    "\"203.0.113.9\"}]}}",
    "{\"mx\": {\"records\": [{\"host\": \"mail1.p.test\", \"preference\": 10}, {\"host\": "
    "\"mail2.p.test\", \"preference\": 20}, {\"host\": \"mx.other.test\", \"preference\": 30}]}}",
    "{\"cname\": {\"host\": \"web.p.test\"}}",
    "{\"cname\": {\"host\": \"mail1.p.test\"}}",
    /* targets that come and go with the walk: the additional section must follow them */
    "{\"mx\": {\"records\": [{\"host\": \"t.p.test\", \"preference\": 5}, {\"host\": "
    "\"k.k.p.test\", \"preference\": 6}]}}",
    "{\"srv\": {\"records\": [{\"target\": \"n1.p.test\", \"port\": 53, \"priority\": 1, "
    "\"weight\": 1}]}}",
};
#define NVARIANTS (sizeof(variants) / sizeof(variants[0]))

static uint64_t rng = 0x9E3779B97F4A7C15ull;

static unsigned rnd(unsigned n)
{
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    return (unsigned)((rng >> 33) % n);
}

/* A zone from the config, the apex, the fixed labels, and label i with variants[state[i]] for
 * each i in only[] (all labels if only is NULL). */
static zone_t *build(const unsigned *state, const unsigned *only, size_t nonly)
{
    char err[512];
    zone_json_t *zj = zone_json_new(ORIGIN, "test", NULL, err, sizeof(err));
    if (!zj)
        fail_msg("new: %s", err);
    const char *cfg = apex_cfgs[apex_v], *apex = apex_recs[apex_v];
    if (zone_json_config(zj, cfg, strlen(cfg), err, sizeof(err)) != 0)
        fail_msg("config: %s", err);
    if (zone_json_label(zj, "@", apex, strlen(apex), err, sizeof(err)) != 0)
        fail_msg("apex: %s", err);
    if (!only)
        for (size_t i = 0; i < sizeof(fixed) / sizeof(fixed[0]); i++)
            if (zone_json_label(zj, fixed[i][0], fixed[i][1], strlen(fixed[i][1]), err,
                                sizeof(err)) != 0)
                fail_msg("%s: %s", fixed[i][0], err);
    size_t n = only ? nonly : NLABELS;
    for (size_t k = 0; k < n; k++) {
        unsigned i = only ? only[k] : (unsigned)k;
        const char *v = variants[state[i]];
        if (v && zone_json_label(zj, labels[i], v, strlen(v), err, sizeof(err)) != 0)
            fail_msg("%s: %s", labels[i], err);
    }
    zone_t *z = NULL;
    if (zone_json_finish(zj, &z, err, sizeof(err)) != 0)
        fail_msg("finish: %s", err);
    return z;
}

static int from_str(const char *s, uint8_t *out)
{
    const char *why = NULL;
    return dname_from_str(s, strlen(s), false, out, &why);
}

/* The lowercased wire name of label.ORIGIN. */
static void wire(const char *label, uint8_t out[DNAME_MAXLEN])
{
    char full[300];
    snprintf(full, sizeof(full), "%s.%s.", label, ORIGIN);
    assert_true(from_str(full, out) > 0);
}

static size_t query(uint8_t *pkt, const char *name, uint16_t type)
{
    uint8_t w[DNAME_MAXLEN];
    char full[300];
    snprintf(full, sizeof(full), "%s%s%s.", name, name[0] ? "." : "", ORIGIN);
    int len = from_str(full, w);
    assert_true(len > 0);
    return ztu_query(pkt, w, type);
}

static answer_ctx_t ctx;

/* Every name of the universe and around it, every type: the same bytes from both zones. */
static void same_answers(zone_t *patched, zone_t *full, int step)
{
    zone_table_t *tp = ztu_table_of(patched), *tf = ztu_table_of(full);
    answer_view_t vp = {.table = tp, .cfg = {.edns_max_udp = ANSWER_EDNS_DEFAULT}};
    answer_view_t vf = {.table = tf, .cfg = {.edns_max_udp = ANSWER_EDNS_DEFAULT}};
    static const uint16_t types[] = {WIRE_T_A,   WIRE_T_AAAA,  WIRE_T_TXT, WIRE_T_MX, WIRE_T_NS,
                                     WIRE_T_SOA, WIRE_T_CNAME, WIRE_T_SRV, WIRE_T_ANY};
    const char *extra[] = {"",  "nx",  "zz.w", "a.b.w",           "q.h.w", "none.g1", "k.k.k",
                           "b", "c.b", "sub",  "deeper.glue.sub", "e",     "x.y.x",   "r"};
    static uint8_t pkt[512], ra[4096], rb[4096];
    for (size_t i = 0; i < NLABELS + sizeof(extra) / sizeof(extra[0]); i++) {
        const char *name = i < NLABELS ? labels[i] : extra[i - NLABELS];
        if (strcmp(name, "*.w") == 0 || strcmp(name, "*.g1") == 0)
            continue; /* asked through names under them */
        for (size_t t = 0; t < sizeof(types) / sizeof(types[0]); t++) {
            size_t ql = query(pkt, name, types[t]);
            size_t la = answer_query(&vp, &ctx, NULL, pkt, ql, ra, sizeof(ra), ANSWER_UDP);
            size_t lb = answer_query(&vf, &ctx, NULL, pkt, ql, rb, sizeof(rb), ANSWER_UDP);
            if (la != lb || memcmp(ra, rb, la) != 0)
                fail_msg("step %d: %s type %u: patched %zu bytes, rcode %u, an %u / built %zu "
                         "bytes, rcode %u, an %u",
                         step, name, types[t], la, ra[3] & 15u, ra[7], lb, rb[3] & 15u, rb[7]);
        }
    }
    zone_table_free(tp);
    zone_table_free(tf);
}

static void test_random_walk(void **state)
{
    (void)state;
    const char *seed = getenv("TERN_WALK_SEED"); /* another walk than CI's, to look further */
    if (seed)
        rng ^= strtoull(seed, NULL, 0) * 0x9E3779B97F4A7C15ull;
    unsigned st[NLABELS];
    for (size_t i = 0; i < NLABELS; i++)
        st[i] = rnd(NVARIANTS);
    zone_t *cur = build(st, NULL, 0);
    int patched = 0, rebuilt = 0;
    for (int step = 0; step < 300; step++) {
        unsigned chg[6];
        size_t nchg = 1 + rnd(5);
        for (size_t k = 0; k < nchg; k++) {
            chg[k] = rnd(NLABELS);
            for (size_t j = 0; j < k; j++)
                if (chg[j] == chg[k]) {
                    chg[k] = (chg[k] + 1) % NLABELS;
                    j = (size_t)-1; /* look again from the start */
                }
            st[chg[k]] = rnd(NVARIANTS);
        }
        uint8_t w[7][DNAME_MAXLEN];
        const uint8_t *names[7];
        size_t nnames = nchg;
        for (size_t k = 0; k < nchg; k++) {
            wire(labels[chg[k]], w[k]);
            names[k] = w[k];
        }
        if (rnd(4) == 0) { /* the apex too (a reload that bumps the serial, a new NS) */
            apex_v = rnd(3);
            assert_true(from_str(ORIGIN ".", w[nnames]) > 0);
            names[nnames] = w[nnames];
            nnames++;
        }
        zone_t *fresh = build(st, chg, nchg);
        zone_t *next = NULL;
        char err[256];
        int rc = zone_patch_names(cur, fresh, names, nnames, &next, err, sizeof(err));
        zone_free(fresh); /* the patch keeps references to what it needs */
        assert_true(rc == 0 || rc == 1);
        zone_t *full = build(st, NULL, 0);
        if (rc == 1) {
            rebuilt++;
            next = zone_retain(full);
        } else {
            patched++;
            assert_int_equal(next->rr_count, full->rr_count);
        }
        same_answers(next, full, step);
        zone_free(full);
        zone_free(cur);
        cur = next;
    }
    zone_free(cur);
    apex_v = 0;
    print_message("%d patched, %d built in full (rng %llx)\n", patched, rebuilt,
                  (unsigned long long)rng);
    assert_true(patched > 150);
}

/* What a patch cannot do is asked of a full build, with the reason. */
static void test_needs_build(void **state)
{
    (void)state;
    unsigned st[NLABELS] = {0};
    st[0] = 1;
    zone_t *base = build(st, NULL, 0);
    char err[256];
    zone_t *out = NULL;
    uint8_t w[DNAME_MAXLEN];
    const uint8_t *names[1] = {w};

    zone_t *fresh = build(st, (const unsigned[]){0}, 1);
    /* the delegation */
    wire("sub", w);
    assert_int_equal(zone_patch_names(base, fresh, names, 1, &out, err, sizeof(err)), 1);
    assert_non_null(strstr(err, "delegation"));
    assert_null(out);
    zone_free(fresh);

    /* a chain of patches ends in a build: for a zone this small, once the patches' blobs hold
     * more than half again its built size plus ZONE_PATCH_SLACK (each keeps a few KiB) */
    zone_t *cur = zone_retain(base);
    int rc = 0, k = 0;
    for (; k < ZONE_PATCH_MAX + 2 && rc == 0; k++) {
        st[0] = 1 + (unsigned)(k % 2);
        fresh = build(st, (const unsigned[]){0}, 1);
        wire(labels[0], w);
        zone_t *next = NULL;
        rc = zone_patch_names(cur, fresh, names, 1, &next, err, sizeof(err));
        zone_free(fresh);
        if (rc == 0) {
            zone_free(cur);
            cur = next;
        }
    }
    assert_int_equal(rc, 1);
    assert_true(k > 4 && k <= ZONE_PATCH_MAX);
    if (!strstr(err, "patches hold"))
        fail_msg("after %d patches: %s", k, err);
    print_message("a chain of patches built in full after %d: %s\n", k, err);
    zone_free(cur);
    zone_free(base);
}

/* A patch shares the data: the base's blob gains a reference, the patch adds fresh's and its own
 * (the changed names' RRsets), and the patched version outlives the base. */
static void test_shares_data(void **state)
{
    (void)state;
    unsigned st[NLABELS];
    for (size_t i = 0; i < NLABELS; i++)
        st[i] = 1;
    zone_t *base = build(st, NULL, 0);
    assert_int_equal(base->data_count, 1);
    assert_int_equal(base->data[0]->refs, 1);
    st[4] = 3;
    zone_t *fresh = build(st, (const unsigned[]){4}, 1);
    uint8_t w[DNAME_MAXLEN];
    wire(labels[4], w);
    const uint8_t *names[1] = {w};
    zone_t *out = NULL;
    char err[256];
    assert_int_equal(zone_patch_names(base, fresh, names, 1, &out, err, sizeof(err)), 0);
    zone_free(fresh);
    assert_int_equal(out->data_count, 3);
    assert_ptr_equal(out->data[0], base->data[0]);
    assert_int_equal(base->data[0]->refs, 2);
    assert_int_equal(out->patches, 1);
    zone_free(base); /* the patched version still answers from the shared data */
    zone_t *full = build(st, NULL, 0);
    same_answers(out, full, -1);
    zone_free(full);
    zone_free(out);
}

static uint32_t soa_serial(const zone_rrset_t *soa)
{
    const uint8_t *p = soa->rdata + soa->rdata_len - 20;
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* zone_set_serial(): the new serial in the SOA and the negative SOA, the shared RDATA of the
 * version it came from untouched, and versions patched from it keep it after it is gone. */
static void test_set_serial(void **state)
{
    (void)state;
    unsigned st[NLABELS];
    for (size_t i = 0; i < NLABELS; i++)
        st[i] = 1;
    zone_t *base = build(st, NULL, 0);
    uint32_t s0 = base->serial;
    st[4] = 3;
    zone_t *fresh = build(st, (const unsigned[]){4}, 1);
    uint8_t w[DNAME_MAXLEN];
    wire(labels[4], w);
    const uint8_t *names[1] = {w};
    zone_t *out = NULL;
    char err[256];
    assert_int_equal(zone_patch_names(base, fresh, names, 1, &out, err, sizeof(err)), 0);
    zone_free(fresh);
    assert_ptr_equal(out->soa->rdata, base->soa->rdata); /* shared before */
    assert_int_equal(zone_set_serial(out, s0 + 7), 0);
    assert_int_equal(out->serial, s0 + 7);
    assert_int_equal(soa_serial(out->soa), s0 + 7);
    assert_int_equal(soa_serial(out->neg_soa), s0 + 7);
    assert_int_equal(soa_serial(base->soa), s0); /* the published version: untouched */
    assert_int_equal(out->data_count, 4);
    /* a version patched from it carries the new SOA after both older ones are freed */
    st[5] = 3;
    fresh = build(st, (const unsigned[]){5}, 1);
    wire(labels[5], w);
    zone_t *next = NULL;
    assert_int_equal(zone_patch_names(out, fresh, names, 1, &next, err, sizeof(err)), 0);
    zone_free(fresh);
    zone_free(base);
    zone_free(out);
    assert_int_equal(next->serial, s0 + 7);
    assert_int_equal(soa_serial(next->soa), s0 + 7);
    zone_free(next);
}

/* A zone of hosts h0..h<count - 1>; name i holds an A record while alive[i]. */
static zone_t *hosts(const bool *alive, size_t count, const unsigned *only, size_t nonly)
{
    char err[512], label[16];
    static const char a[] = "{\"a\": {\"records\": [{\"ip\": \"192.0.2.9\"}]}}";
    zone_json_t *zj = zone_json_new(ORIGIN, "test", NULL, err, sizeof(err));
    assert_non_null(zj);
    assert_int_equal(zone_json_config(zj, CONFIG, strlen(CONFIG), err, sizeof(err)), 0);
    assert_int_equal(zone_json_label(zj, "@", APEX, strlen(APEX), err, sizeof(err)), 0);
    size_t n = only ? nonly : count;
    for (size_t k = 0; k < n; k++) {
        unsigned i = only ? only[k] : (unsigned)k;
        snprintf(label, sizeof(label), "h%u", i);
        if (alive[i])
            assert_int_equal(zone_json_label(zj, label, a, strlen(a), err, sizeof(err)), 0);
    }
    zone_t *z = NULL;
    assert_int_equal(zone_json_finish(zj, &z, err, sizeof(err)), 0);
    return z;
}

/* Names leave and come back by the hundred: the name index (linear probing, filled up to 2/3,
 * grown when the patch needs room) must keep finding every name that stays. */
static void test_index_churn(void **state)
{
    (void)state;
    static bool alive[3000];
    for (size_t i = 0; i < 3000; i++)
        alive[i] = i % 3 != 0;
    zone_t *cur = hosts(alive, 3000, NULL, 0);
    for (int step = 0; step < 40; step++) {
        unsigned chg[100];
        for (size_t k = 0; k < 100; k++) {
            chg[k] = (unsigned)((step * 7919 + (int)k * 31) % 3000);
            alive[chg[k]] = rnd(3) != 0;
        }
        zone_t *fresh = hosts(alive, 3000, chg, 100);
        uint8_t w[100][DNAME_MAXLEN];
        const uint8_t *names[100];
        for (size_t k = 0; k < 100; k++) {
            char label[16];
            snprintf(label, sizeof(label), "h%u", chg[k]);
            wire(label, w[k]);
            names[k] = w[k];
        }
        zone_t *next = NULL;
        char err[256];
        int rc = zone_patch_names(cur, fresh, names, 100, &next, err, sizeof(err));
        zone_free(fresh);
        if (rc == 1) {
            next = hosts(alive, 3000, NULL, 0);
        } else {
            assert_int_equal(rc, 0);
        }
        zone_free(cur);
        cur = next;
        for (unsigned i = 0; i < 3000; i++) {
            char label[16];
            uint8_t nm[DNAME_MAXLEN];
            snprintf(label, sizeof(label), "h%u", i);
            wire(label, nm);
            const zone_node_t *nd = zone_find_node(cur, nm, dname_len(nm), dname_hash(nm));
            if (alive[i] != (nd != NULL && nd->nrrsets > 0))
                fail_msg("step %d: h%u alive %d, found %d", step, i, alive[i], nd != NULL);
        }
    }
    zone_free(cur);
}

/* The nodes are shared page by page: a change of one name copies the one page it is on (and the
 * apex's, for a serial bump), every other page is the base's with a reference more, and each
 * outlives the version it came from. */
static void test_shares_pages(void **state)
{
    (void)state;
    enum { N = 3 * ZONE_NODE_PAGE + 100 };
    static bool alive[N];
    for (size_t i = 0; i < N; i++)
        alive[i] = true;
    zone_t *base = hosts(alive, N, NULL, 0);
    assert_int_equal(base->node_page_count, 4);
    uint8_t w[DNAME_MAXLEN];
    wire("h9000", w);
    uint32_t id = zone_find_index(base, w, dname_len(w), dname_hash(w));
    assert_true(id > 0);
    unsigned page = (id - 1) >> ZONE_NODE_SHIFT;
    alive[9000] = false;
    zone_t *fresh = hosts(alive, N, (const unsigned[]){9000}, 1);
    const uint8_t *names[1] = {w};
    zone_t *out = NULL;
    char err[256];
    assert_int_equal(zone_patch_names(base, fresh, names, 1, &out, err, sizeof(err)), 0);
    zone_free(fresh);
    assert_int_equal(out->node_page_count, base->node_page_count);
    for (unsigned k = 0; k < base->node_page_count; k++) {
        const zone_node_page_t *pb = zone_node_page_of(base->node_pages[k]);
        if (k == page) {
            assert_ptr_not_equal(out->node_pages[k], base->node_pages[k]);
            assert_int_equal(pb->refs, 1);
        } else {
            assert_ptr_equal(out->node_pages[k], base->node_pages[k]);
            assert_int_equal(pb->refs, 2);
        }
    }
    assert_null(zone_find_node(out, w, dname_len(w), dname_hash(w)));
    assert_non_null(zone_find_node(base, w, dname_len(w), dname_hash(w)));
    /* a serial bump copies the apex's page, and the base's pages outlive the base */
    assert_int_equal(zone_set_serial(out, 99), 0);
    assert_ptr_not_equal(out->node_pages[0], base->node_pages[0]);
    zone_free(base);
    zone_t *full = hosts(alive, N, NULL, 0);
    for (unsigned i = 0; i < N; i += 97) {
        char label[16];
        snprintf(label, sizeof(label), "h%u", i);
        wire(label, w);
        const zone_node_t *a = zone_find_node(out, w, dname_len(w), dname_hash(w));
        const zone_node_t *b = zone_find_node(full, w, dname_len(w), dname_hash(w));
        assert_int_equal(a != NULL, b != NULL);
        if (a)
            assert_memory_equal(a->rrsets[0].rdata, b->rrsets[0].rdata, a->rrsets[0].rdata_len);
    }
    assert_int_equal(out->serial, 99);
    zone_free(full);
    zone_free(out);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_random_walk),  cmocka_unit_test(test_needs_build),
        cmocka_unit_test(test_shares_pages), cmocka_unit_test(test_shares_data),
        cmocka_unit_test(test_set_serial),   cmocka_unit_test(test_index_churn),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
