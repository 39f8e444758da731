/*
 * test_journal.c — zone diffs and the IXFR journal.
 *
 * Diffs: pairs of zone files (a changed RR, names added and removed, an empty non-terminal that
 * disappears, a TTL change, a type added beside others, apex data, nothing but the serial) with
 * the removed and added lists checked exactly; a random walk over a universe of labels where
 * every diff, applied to the old version's RR set, must give the new version's (and a patched
 * version, which shares its base's RDATA, must diff the same way). Journal: chains, a broken
 * chain, eviction by versions and by bytes, unknown serials, serial wrap-around, the listing,
 * and a reader racing the loader. Last, the cost of a diff of a large zone where one name
 * changed (100,000 names built here; TERN_XFR_BENCH_ZONE=<file> [TERN_XFR_BENCH_ORIGIN=<origin>,
 * default bench.test] measures a generated zone instead, e.g. bench/gen_zone.py --names
 * 1000000).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <time.h>
#include <cmocka.h>
#include <ldns/ldns.h>

#include "tern/common/err.h"
#include "tern/xfr/journal.h"
#include "tern/xfr/xfr_stream.h"
#include "tern/zone/zone_builder.h"
#include "tern/zone/zone_file.h"
#include "tern/zone/zone_patch.h"
#include "test_util.h"

#define ORIGIN "d.test"

static char dir[64];

/* ---- zones from text ---------------------------------------------------------------------- */

/* The zone of serial `serial` with `body` (records relative to ORIGIN) after the fixed apex. */
static zone_t *zone_v(uint32_t serial, const char *body)
{
    char *text = NULL;
    assert_true(asprintf(&text,
                         "$ORIGIN " ORIGIN ".\n$TTL 3600\n"
                         "@ SOA ns1 hostmaster %u 7200 900 1209600 300\n"
                         "@ NS ns1\nns1 A 192.0.2.1\n%s",
                         serial, body) > 0);
    tu_write_file(dir, "z.zone", text);
    free(text);
    char path[128], err[512];
    snprintf(path, sizeof(path), "%s/z.zone", dir);
    zone_t *z = NULL;
    if (zone_file_load(ORIGIN, path, &z, err, sizeof(err)) != 0)
        fail_msg("load: %s", err);
    return z;
}

/* ---- RRs as canonical text, sorted: what the lists are compared as ------------------------ */

typedef struct strs {
    char **v;
    size_t n, cap;
} strs_t;

static void strs_add(strs_t *s, ldns_rr *rr)
{
    ldns_rr2canonical(rr);
    char *t = ldns_rr2str(rr);
    assert_non_null(t);
    size_t l = strlen(t);
    while (l && (t[l - 1] == '\n' || t[l - 1] == ' ' || t[l - 1] == '\t'))
        t[--l] = 0;
    if (s->n == s->cap) {
        s->cap = s->cap ? 2 * s->cap : 64;
        s->v = realloc(s->v, s->cap * sizeof(*s->v));
        assert_non_null(s->v);
    }
    s->v[s->n++] = t;
    ldns_rr_free(rr);
}

/* One RR from its parts, through ldns's own wire parser. */
static void strs_add_wire(strs_t *s, const uint8_t *owner, size_t olen, uint16_t type, uint32_t ttl,
                          const uint8_t *rr)
{
    uint8_t w[DNAME_MAXLEN + 10 + 65535];
    size_t rdlen = (size_t)(rr[0] << 8 | rr[1]);
    memcpy(w, owner, olen);
    uint8_t *p = w + olen;
    p[0] = (uint8_t)(type >> 8);
    p[1] = (uint8_t)type;
    p[2] = 0;
    p[3] = 1;
    p[4] = (uint8_t)(ttl >> 24);
    p[5] = (uint8_t)(ttl >> 16);
    p[6] = (uint8_t)(ttl >> 8);
    p[7] = (uint8_t)ttl;
    memcpy(p + 8, rr, 2 + rdlen);
    ldns_rr *x = NULL;
    size_t pos = 0;
    assert_int_equal(ldns_wire2rr(&x, w, olen + 10 + rdlen, &pos, LDNS_SECTION_ANSWER),
                     LDNS_STATUS_OK);
    strs_add(s, x);
}

static void strs_add_rrset(strs_t *s, const xfr_rrset_t *r)
{
    const uint8_t *p = r->rdata;
    for (unsigned i = 0; i < r->count; i++) {
        strs_add_wire(s, r->owner, r->owner_len, r->type, r->ttl, p);
        p += 2 + (p[0] << 8 | p[1]);
    }
    assert_ptr_equal(p, r->rdata + r->rdata_len);
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static void strs_sort(strs_t *s)
{
    if (s->n)
        qsort(s->v, s->n, sizeof(*s->v), cmp_str);
}

static void strs_free(strs_t *s)
{
    for (size_t i = 0; i < s->n; i++)
        free(s->v[i]);
    free(s->v);
    *s = (strs_t){0};
}

/* The removed or added list of d, sorted. */
static strs_t delta_strs(const xfr_delta_t *d, xfr_side_t side)
{
    strs_t s = {0};
    size_t pos = 0;
    xfr_rrset_t r;
    while (xfr_delta_next(d, side, &pos, &r))
        strs_add_rrset(&s, &r);
    strs_sort(&s);
    assert_int_equal(s.n, side == XFR_REMOVED ? xfr_delta_removed(d) : xfr_delta_added(d));
    return s;
}

/* Every RR of z (its nodes' RRsets), sorted. */
static strs_t zone_strs(const zone_t *z)
{
    strs_t s = {0};
    for (size_t i = 0; i < z->node_count; i++) {
        const zone_node_t *n = zone_node_at(z, (uint32_t)i);
        for (unsigned k = 0; k < n->nrrsets; k++) {
            const zone_rrset_t *rs = &n->rrsets[k];
            xfr_rrset_t r = {.owner = n->name,
                             .owner_len = n->name_len,
                             .type = rs->type,
                             .count = rs->count,
                             .ttl = rs->ttl,
                             .rdata_len = rs->rdata_len,
                             .rdata = rs->rdata};
            strs_add_rrset(&s, &r);
        }
    }
    strs_sort(&s);
    return s;
}

/* Records given as text ("www 60 A 192.0.2.1", relative to ORIGIN, NULL-terminated), sorted. */
static strs_t text_strs(const char *const *rrs)
{
    strs_t s = {0};
    ldns_rdf *origin = ldns_dname_new_frm_str(ORIGIN ".");
    for (size_t i = 0; rrs && rrs[i]; i++) {
        ldns_rr *rr = NULL;
        if (ldns_rr_new_frm_str(&rr, rrs[i], 3600, origin, NULL) != LDNS_STATUS_OK)
            fail_msg("bad test record: %s", rrs[i]);
        strs_add(&s, rr);
    }
    ldns_rdf_deep_free(origin);
    strs_sort(&s);
    return s;
}

static void strs_expect(const strs_t *got, const strs_t *want, const char *what)
{
    bool same = got->n == want->n;
    for (size_t i = 0; same && i < got->n; i++)
        same = strcmp(got->v[i], want->v[i]) == 0;
    if (same)
        return;
    fprintf(stderr, "%s: got %zu RRs:\n", what, got->n);
    for (size_t i = 0; i < got->n; i++)
        fprintf(stderr, "  %s\n", got->v[i]);
    fprintf(stderr, "want %zu RRs:\n", want->n);
    for (size_t i = 0; i < want->n; i++)
        fprintf(stderr, "  %s\n", want->v[i]);
    fail_msg("%s differs", what);
}

/* ---- diffs of zone file pairs ------------------------------------------------------------- */

typedef struct diff_case {
    const char *name;
    const char *old, *new;
    const char *removed[8], *added[8];
} diff_case_t;

static const diff_case_t cases[] = {
    {"changed RR",
     "www A 192.0.2.80\n",
     "www A 192.0.2.81\n",
     {"www A 192.0.2.80"},
     {"www A 192.0.2.81"}},
    {"one RR of many",
     "pool A 10.0.0.1\npool A 10.0.0.2\npool A 10.0.0.3\npool A 10.0.0.4\n",
     "pool A 10.0.0.4\npool A 10.0.0.2\npool A 10.0.0.5\npool A 10.0.0.1\n",
     {"pool A 10.0.0.3"},
     {"pool A 10.0.0.5"}},
    {"added name",
     "www A 192.0.2.80\n",
     "www A 192.0.2.80\nnew AAAA 2001:db8::1\nnew TXT hi\n",
     {NULL},
     {"new AAAA 2001:db8::1", "new TXT hi"}},
    {"removed name and its empty non-terminals",
     "a.b.c A 192.0.2.7\nc TXT stays\n",
     "c TXT stays\n",
     {"a.b.c A 192.0.2.7"},
     {NULL}},
    {"removed name leaves an ENT",
     "x.y A 192.0.2.8\ny A 192.0.2.9\n",
     "x.y A 192.0.2.8\n",
     {"y A 192.0.2.9"},
     {NULL}},
    {"ENT becomes a name",
     "x.y A 192.0.2.8\n",
     "x.y A 192.0.2.8\ny MX 10 x.y\n",
     {NULL},
     {"y MX 10 x.y"}},
    {"TTL change",
     "web 3600 A 192.0.2.1\nweb 3600 A 192.0.2.2\n",
     "web 60 A 192.0.2.1\nweb 60 A 192.0.2.2\n",
     {"web 3600 A 192.0.2.1", "web 3600 A 192.0.2.2"},
     {"web 60 A 192.0.2.1", "web 60 A 192.0.2.2"}},
    {"type added and removed beside others",
     "h A 192.0.2.1\nh TXT old\n",
     "h A 192.0.2.1\nh AAAA 2001:db8::2\n",
     {"h TXT old"},
     {"h AAAA 2001:db8::2"}},
    {"apex data (the SOA stays apart)",
     "@ MX 10 mail\nmail A 192.0.2.25\n",
     "@ MX 20 mail\n@ TXT \"v=spf1 -all\"\nmail A 192.0.2.25\n",
     {"@ MX 10 mail"},
     {"@ MX 20 mail", "@ TXT \"v=spf1 -all\""}},
    {"delegation and glue",
     "sub NS ns.sub\nns.sub A 192.0.2.53\n",
     "sub NS ns.sub\nns.sub A 192.0.2.54\n",
     {"ns.sub A 192.0.2.53"},
     {"ns.sub A 192.0.2.54"}},
    {"name case inside RDATA",
     "w CNAME Target\n",
     "w CNAME target\n",
     {"w CNAME Target"},
     {"w CNAME target"}},
    {"only the serial",
     "www A 192.0.2.80\n*.wild TXT w\n",
     "www A 192.0.2.80\n*.wild TXT w\n",
     {NULL},
     {NULL}},
};

static void test_diff_cases(void **state)
{
    (void)state;
    for (size_t i = 0; i < TERN_ARRAY_SIZE(cases); i++) {
        const diff_case_t *c = &cases[i];
        zone_t *o = zone_v(100, c->old), *n = zone_v(101, c->new);
        xfr_delta_t *d = xfr_diff(o, n);
        assert_non_null(d);
        assert_int_equal(xfr_delta_from(d), 100);
        assert_int_equal(xfr_delta_to(d), 101);
        char what[128];
        strs_t got = delta_strs(d, XFR_REMOVED), want = text_strs(c->removed);
        snprintf(what, sizeof(what), "%s: removed", c->name);
        strs_expect(&got, &want, what);
        strs_free(&got);
        strs_free(&want);
        got = delta_strs(d, XFR_ADDED);
        want = text_strs(c->added);
        snprintf(what, sizeof(what), "%s: added", c->name);
        strs_expect(&got, &want, what);
        strs_free(&got);
        strs_free(&want);
        /* the SOAs: one RR each, at the apex, with the two serials */
        for (int side = 0; side < 2; side++) {
            xfr_rrset_t soa;
            xfr_delta_soa(d, (xfr_side_t)side, &soa);
            assert_int_equal(soa.type, WIRE_T_SOA);
            assert_int_equal(soa.count, 1);
            assert_int_equal(soa.owner_len, o->apex_len);
            assert_memory_equal(soa.owner, o->apex, o->apex_len);
            const uint8_t *ser = soa.rdata + soa.rdata_len - 20;
            uint32_t s = (uint32_t)ser[0] << 24 | (uint32_t)ser[1] << 16 | ser[2] << 8 | ser[3];
            assert_int_equal(s, side ? 101 : 100);
        }
        assert_true(xfr_delta_bytes(d) > sizeof(void *));
        xfr_delta_release(d);
        zone_free(o);
        zone_free(n);
    }
}

static void test_diff_self_and_other_zone(void **state)
{
    (void)state;
    zone_t *z = zone_v(5, "www A 192.0.2.80\n");
    xfr_delta_t *d = xfr_diff(z, z);
    assert_non_null(d);
    assert_int_equal(xfr_delta_removed(d), 0);
    assert_int_equal(xfr_delta_added(d), 0);
    xfr_delta_release(d);
    /* another origin is no version of this zone */
    uint8_t apex[DNAME_MAXLEN], soa[128];
    const char *why;
    assert_true(dname_from_str("other.test", 10, false, apex, &why) > 0);
    zone_builder_t *b = zone_builder_new(apex, NULL);
    assert_non_null(b);
    size_t o = 0;
    uint8_t mname[] = "\3ns1\5other\4test", rname[] = "\2hm\5other\4test";
    memcpy(soa, mname, sizeof(mname));
    o += sizeof(mname);
    memcpy(soa + o, rname, sizeof(rname));
    o += sizeof(rname);
    memset(soa + o, 1, 20);
    o += 20;
    assert_int_equal(zone_builder_add(b, apex, WIRE_T_SOA, 1, 60, soa, (uint16_t)o, NULL, 0), 0);
    assert_int_equal(zone_builder_add(b, apex, WIRE_T_NS, 1, 60, mname, sizeof(mname), NULL, 0), 0);
    zone_t *other = NULL;
    char err[256];
    assert_int_equal(zone_builder_finish(b, &other, err, sizeof(err)), 0);
    assert_null(xfr_diff(z, other));
    zone_free(other);
    zone_free(z);
}

/* ---- a random walk: every diff applied to the old RR set gives the new one --------------- */

static const char *const walk_labels[] = {"a",      "b.a",   "c.b.a", "www",      "*.w", "h.w",
                                          "m",      "t",     "e.f",   "deep.e.f", "k",   "sub",
                                          "ns.sub", "x.y.z", "y.z",   "pool"};
static const char *const walk_variants[] = {
    NULL,
    "A 198.51.100.1",
    "60 A 198.51.100.1",
    "A 198.51.100.2\n%s A 198.51.100.3",
    "A 198.51.100.3\n%s A 198.51.100.4\n%s A 198.51.100.2",
    "AAAA 2001:db8::7",
    "TXT hello\n%s A 203.0.113.9",
    "TXT \"hello world\"\n%s 120 A 203.0.113.9",
    "MX 10 www\n%s MX 20 m",
    "CNAME www",
};
#define WALK_N  TERN_ARRAY_SIZE(walk_labels)
#define WALK_NV TERN_ARRAY_SIZE(walk_variants)

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static unsigned rnd(unsigned n)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (unsigned)(rng_state % n);
}

/* The zone body of a state; `only` (NULL: all) limits it to some labels (a patch's fresh zone).
 * "sub" only ever holds NS (a delegation) or nothing, so that the patch can take it. */
static char *walk_body(const unsigned *st, const bool *only)
{
    size_t cap = 8192, o = 0;
    char *t = calloc(1, cap);
    assert_non_null(t);
    for (size_t i = 0; i < WALK_N; i++) {
        if ((only && !only[i]) || !walk_variants[st[i]])
            continue;
        const char *l = walk_labels[i];
        if (strcmp(l, "sub") == 0) {
            o += (size_t)snprintf(t + o, cap - o, "sub NS ns.sub\n");
            continue;
        }
        char line[512];
        snprintf(line, sizeof(line), walk_variants[st[i]], l, l, l);
        o += (size_t)snprintf(t + o, cap - o, "%s %s\n", l, line);
    }
    return t;
}

static void check_applies(const zone_t *o, const zone_t *n, const xfr_delta_t *d, int step)
{
    strs_t zo = zone_strs(o), zn = zone_strs(n), rm = delta_strs(d, XFR_REMOVED),
           ad = delta_strs(d, XFR_ADDED);
    /* old minus removed (each removed RR must be there), plus added (none may be there yet) */
    strs_t r = {0};
    size_t i = 0, k = 0;
    for (; i < zo.n; i++) {
        if (strstr(zo.v[i], "\tSOA\t"))
            continue;
        int c = k < rm.n ? strcmp(zo.v[i], rm.v[k]) : -1;
        assert_true(c <= 0); /* a removed RR not in the old version */
        if (c == 0) {
            k++;
            continue;
        }
        r.v = realloc(r.v, (r.n + 1) * sizeof(*r.v));
        r.v[r.n++] = strdup(zo.v[i]);
    }
    assert_int_equal(k, rm.n);
    for (k = 0; k < ad.n; k++) {
        r.v = realloc(r.v, (r.n + 1) * sizeof(*r.v));
        r.v[r.n++] = strdup(ad.v[k]);
    }
    strs_sort(&r);
    for (i = 1; i < r.n; i++)
        assert_true(strcmp(r.v[i - 1], r.v[i]) != 0); /* an added RR was already there */
    strs_t want = {0};
    for (i = 0; i < zn.n; i++)
        if (!strstr(zn.v[i], "\tSOA\t")) {
            want.v = realloc(want.v, (want.n + 1) * sizeof(*want.v));
            want.v[want.n++] = strdup(zn.v[i]);
        }
    char what[64];
    snprintf(what, sizeof(what), "step %d: old + delta", step);
    strs_expect(&r, &want, what);
    strs_free(&r);
    strs_free(&want);
    strs_free(&zo);
    strs_free(&zn);
    strs_free(&rm);
    strs_free(&ad);
}

/* Every RR an AXFR of z carries but the SOA, sorted (the stream walks the node array, where a
 * patched version keeps its removed nodes: they must carry nothing). */
static strs_t axfr_strs_no_soa(const zone_t *z)
{
    static const uint8_t q[] = {0, 1,   0, 0,   0,   1,   0,   0, 0, 0,   0, 0,
                                1, 'd', 4, 't', 'e', 's', 't', 0, 0, 252, 0, 1};
    xfr_stream_t *st = xfr_stream_axfr(z, q, sizeof(q));
    assert_non_null(st);
    strs_t s = {0};
    static uint8_t buf[65535];
    int rc;
    do {
        size_t len = 0;
        rc = xfr_stream_next(st, buf, sizeof(buf), 0, &len);
        assert_true(rc >= 0);
        ldns_pkt *p = NULL;
        assert_int_equal(ldns_wire2pkt(&p, buf, len), LDNS_STATUS_OK);
        ldns_rr_list *an = ldns_pkt_answer(p);
        for (size_t i = 0; i < ldns_rr_list_rr_count(an); i++)
            if (ldns_rr_get_type(ldns_rr_list_rr(an, i)) != LDNS_RR_TYPE_SOA)
                strs_add(&s, ldns_rr_clone(ldns_rr_list_rr(an, i)));
        ldns_pkt_free(p);
    } while (rc == 1);
    xfr_stream_free(st);
    strs_sort(&s);
    return s;
}

static strs_t no_soa(strs_t s)
{
    size_t k = 0;
    for (size_t i = 0; i < s.n; i++) {
        if (strstr(s.v[i], "\tSOA\t"))
            free(s.v[i]);
        else
            s.v[k++] = s.v[i];
    }
    s.n = k;
    return s;
}

/* Up to `tries` labels of the walk get a random variant (each once, marked in chg): their names
 * into w and names; returns how many. */
static size_t walk_change(unsigned *st, bool *chg, unsigned tries, const uint8_t **names,
                          uint8_t (*w)[DNAME_MAXLEN])
{
    size_t nchg = 0;
    for (unsigned k = tries; k > 0; k--) {
        unsigned i = rnd(WALK_N);
        if (chg[i])
            continue;
        chg[i] = true;
        st[i] = rnd(WALK_NV);
        char full[300];
        const char *why;
        snprintf(full, sizeof(full), "%s." ORIGIN ".", walk_labels[i]);
        assert_true(dname_from_str(full, strlen(full), false, w[nchg], &why) > 0);
        names[nchg] = w[nchg];
        nchg++;
    }
    return nchg;
}

static void test_diff_random_walk(void **state)
{
    (void)state;
    unsigned st[WALK_N];
    for (size_t i = 0; i < WALK_N; i++)
        st[i] = rnd(WALK_NV);
    uint32_t serial = 1;
    char *body = walk_body(st, NULL);
    zone_t *cur = zone_v(serial, body);
    free(body);
    int patched = 0;
    for (int step = 0; step < 150; step++) {
        bool chg[WALK_N] = {0};
        const uint8_t *names[WALK_N];
        uint8_t w[WALK_N][DNAME_MAXLEN];
        size_t nchg = walk_change(st, chg, 1 + rnd(4), names, w);
        body = walk_body(st, NULL);
        zone_t *full = zone_v(++serial, body);
        free(body);
        /* most steps, the new version is a patch of the old one, itself often a patch: the
         * RDATA of untouched names is shared, and a removed name's node is replaced by another
         * (a name removed and added again gets a new place in the node array) */
        zone_t *next = full;
        if (step % 6) {
            body = walk_body(st, chg);
            zone_t *fresh = zone_v(serial, body), *p = NULL;
            free(body);
            char err[256];
            int rc = zone_patch_names(cur, fresh, names, nchg, &p, err, sizeof(err));
            zone_free(fresh);
            assert_true(rc == 0 || rc == 1);
            if (rc == 0) {
                patched++;
                next = p;
            }
        }
        xfr_delta_t *d = xfr_diff(cur, next);
        assert_non_null(d);
        check_applies(cur, full, d, step); /* a patched next has full's content */
        xfr_delta_release(d);
        strs_t ax = axfr_strs_no_soa(next), zf = no_soa(zone_strs(full));
        strs_expect(&ax, &zf, "AXFR of the new version");
        strs_free(&ax);
        strs_free(&zf);
        if (next != full) {
            d = xfr_diff(full, next); /* the same content, found as such */
            assert_non_null(d);
            assert_int_equal(xfr_delta_removed(d) + xfr_delta_added(d), 0);
            xfr_delta_release(d);
            d = xfr_diff(next, full);
            assert_non_null(d);
            assert_int_equal(xfr_delta_removed(d) + xfr_delta_added(d), 0);
            xfr_delta_release(d);
            zone_free(full);
        }
        zone_free(cur);
        cur = next;
    }
    assert_true(patched > 50);
    zone_free(cur);
}

/* The groups of one side of d, each as its bytes (owner, type, count, TTL, RDATA), in order. */
static void same_groups(const xfr_delta_t *a, const xfr_delta_t *b, xfr_side_t side, int step)
{
    size_t pa = 0, pb = 0;
    xfr_rrset_t x, y;
    for (;;) {
        bool ha = xfr_delta_next(a, side, &pa, &x), hb = xfr_delta_next(b, side, &pb, &y);
        if (ha != hb)
            fail_msg("step %d: one diff has more groups", step);
        if (!ha)
            return;
        if (x.owner_len != y.owner_len || memcmp(x.owner, y.owner, x.owner_len) != 0 ||
            x.type != y.type || x.count != y.count || x.ttl != y.ttl ||
            x.rdata_len != y.rdata_len || memcmp(x.rdata, y.rdata, x.rdata_len) != 0)
            fail_msg("step %d: the groups differ (type %u / %u)", step, x.type, y.type);
    }
}

/* A patched version's diff from its base reads only the delta's names (zone_patch_delta()); it
 * must give the very groups, in the very order, that the whole-zone walk gives against a copy
 * of the base built from the same text (same node order, not its base: walked whole). */
static void test_diff_by_delta_same_bytes(void **state)
{
    (void)state;
    unsigned st[WALK_N];
    for (size_t i = 0; i < WALK_N; i++)
        st[i] = rnd(WALK_NV);
    int patched = 0;
    for (int step = 0; step < 120; step++) {
        uint32_t serial = (uint32_t)step * 2 + 1;
        char *body = walk_body(st, NULL);
        zone_t *cur = zone_v(serial, body), *copy = zone_v(serial, body);
        free(body);
        bool chg[WALK_N] = {0};
        const uint8_t *names[WALK_N];
        uint8_t w[WALK_N][DNAME_MAXLEN];
        size_t nchg = walk_change(st, chg, 1 + rnd(5), names, w);
        body = walk_body(st, chg);
        zone_t *fresh = zone_v(serial + 1, body), *next = NULL;
        free(body);
        char err[256];
        int rc = zone_patch_names(cur, fresh, names, nchg, &next, err, sizeof(err));
        zone_free(fresh);
        assert_true(rc == 0 || rc == 1);
        if (rc == 0) {
            patched++;
            assert_non_null(zone_patch_delta(cur, next));
            assert_null(zone_patch_delta(copy, next));
            xfr_delta_t *a = xfr_diff(cur, next), *b = xfr_diff(copy, next);
            assert_true(a && b);
            same_groups(a, b, XFR_REMOVED, step);
            same_groups(a, b, XFR_ADDED, step);
            assert_int_equal(xfr_delta_bytes(a), xfr_delta_bytes(b));
            xfr_delta_release(a);
            xfr_delta_release(b);
            zone_free(next);
        }
        zone_free(cur);
        zone_free(copy);
    }
    assert_true(patched > 50);
}

/* ---- RFC 1982 serials --------------------------------------------------------------------- */

static void test_serial_arithmetic(void **state)
{
    (void)state;
    assert_true(xfr_serial_lt(1, 2));
    assert_false(xfr_serial_lt(2, 1));
    assert_false(xfr_serial_lt(7, 7));
    assert_true(xfr_serial_le(7, 7));
    assert_true(xfr_serial_ge(7, 7));
    assert_true(xfr_serial_lt(0xFFFFFFF0u, 5)); /* across the wrap */
    assert_true(xfr_serial_gt(5, 0xFFFFFFF0u));
    assert_false(xfr_serial_gt(0xFFFFFFF0u, 5));
    assert_true(xfr_serial_lt(0, 0x7FFFFFFFu));
    assert_true(xfr_serial_gt(0, 0x80000001u)); /* more than 2^31 ahead is behind */
    /* exactly 2^31 apart: undefined, neither way */
    assert_false(xfr_serial_lt(0, 0x80000000u));
    assert_false(xfr_serial_gt(0, 0x80000000u));
    assert_false(xfr_serial_le(0, 0x80000000u));
    assert_false(xfr_serial_ge(0, 0x80000000u));
}

/* ---- the journal -------------------------------------------------------------------------- */

/* A delta from → to with `size` A RRs changed (its bytes grow with size). */
static xfr_delta_t *mk_delta(uint32_t from, uint32_t to, unsigned size)
{
    char body[8192] = "", *p = body;
    for (unsigned i = 0; i < size; i++)
        p += sprintf(p, "h%u A 10.1.%u.%u\n", i, i / 250, i % 250 + 1);
    zone_t *o = zone_v(from, "h A 192.0.2.1\n"), *n = zone_v(to, body);
    xfr_delta_t *d = xfr_diff(o, n);
    assert_non_null(d);
    zone_free(o);
    zone_free(n);
    return d;
}

/* How many versions j keeps. */
static size_t kept(xfr_journal_t *j)
{
    xfr_journal_entry_t e[64];
    size_t n = xfr_journal_list(j, e, 64);
    for (size_t i = 1; i < n; i++)
        assert_int_equal(e[i].from, e[i - 1].to); /* a chain, oldest first */
    return n;
}

static void expect_chain(xfr_journal_t *j, uint32_t from, int rc, const uint32_t *serials, size_t n)
{
    xfr_delta_t **c = NULL;
    size_t got = 99;
    assert_int_equal(xfr_journal_chain(j, from, &c, &got), rc);
    if (rc != 0) {
        assert_null(c);
        assert_int_equal(got, 0);
        return;
    }
    assert_non_null(c); /* also when up to date: it can go to xfr_stream_ixfr() as is */
    assert_int_equal(got, n);
    for (size_t i = 0; i < n; i++) {
        assert_int_equal(xfr_delta_from(c[i]), serials[i]);
        assert_int_equal(xfr_delta_to(c[i]), serials[i + 1]);
        xfr_delta_release(c[i]);
    }
    free(c);
}

static void test_journal_chain(void **state)
{
    (void)state;
    xfr_journal_t *j = xfr_journal_new(10, SIZE_MAX);
    assert_non_null(j);
    expect_chain(j, 1, TERN_ENOENT, NULL, 0); /* empty */
    for (uint32_t s = 1; s < 5; s++)
        xfr_journal_add(j, mk_delta(s, s + 1, 1));
    static const uint32_t ser[] = {1, 2, 3, 4, 5};
    expect_chain(j, 1, 0, ser, 4);
    expect_chain(j, 3, 0, ser + 2, 2);
    expect_chain(j, 4, 0, ser + 3, 1);
    expect_chain(j, 5, 0, NULL, 0); /* up to date */
    expect_chain(j, 0, TERN_ENOENT, NULL, 0);
    expect_chain(j, 6, TERN_ENOENT, NULL, 0);

    /* a chain handed out stays valid while the journal drops it */
    xfr_delta_t **c = NULL;
    size_t n = 0;
    assert_int_equal(xfr_journal_chain(j, 2, &c, &n), 0);
    xfr_journal_clear(j);
    expect_chain(j, 2, TERN_ENOENT, NULL, 0);
    assert_int_equal(n, 3);
    for (size_t i = 0; i < n; i++) {
        assert_int_equal(xfr_delta_from(c[i]), 2 + i);
        xfr_delta_release(c[i]);
    }
    free(c);
    assert_int_equal(kept(j), 0);
    xfr_journal_free(j);
}

static void test_journal_broken_chain(void **state)
{
    (void)state;
    xfr_journal_t *j = xfr_journal_new(10, SIZE_MAX);
    assert_non_null(j);
    xfr_journal_add(j, mk_delta(1, 2, 1));
    xfr_journal_add(j, mk_delta(2, 3, 1));
    xfr_journal_add(j, mk_delta(7, 8, 1)); /* 3 → 7 never came: 1..3 are useless now */
    expect_chain(j, 1, TERN_ENOENT, NULL, 0);
    expect_chain(j, 2, TERN_ENOENT, NULL, 0);
    static const uint32_t ser[] = {7, 8, 9};
    expect_chain(j, 7, 0, ser, 1);
    assert_int_equal(kept(j), 1);
    xfr_journal_add(j, mk_delta(8, 9, 1));
    expect_chain(j, 7, 0, ser, 2);
    xfr_journal_add(j, NULL); /* a diff that failed */
    expect_chain(j, 7, TERN_ENOENT, NULL, 0);
    expect_chain(j, 9, TERN_ENOENT, NULL, 0);
    xfr_journal_free(j);
}

static void test_journal_max_versions(void **state)
{
    (void)state;
    xfr_journal_t *j = xfr_journal_new(3, SIZE_MAX);
    assert_non_null(j);
    for (uint32_t s = 1; s <= 6; s++)
        xfr_journal_add(j, mk_delta(s, s + 1, 1));
    xfr_journal_entry_t e[8];
    assert_int_equal(xfr_journal_list(j, e, 8), 3);
    assert_int_equal(e[0].from, 4);
    assert_int_equal(e[2].to, 7);
    expect_chain(j, 3, TERN_ENOENT, NULL, 0);
    static const uint32_t ser[] = {4, 5, 6, 7};
    expect_chain(j, 4, 0, ser, 3);
    xfr_journal_free(j);

    j = xfr_journal_new(0, SIZE_MAX); /* keeps nothing */
    assert_non_null(j);
    xfr_journal_add(j, mk_delta(1, 2, 1));
    assert_int_equal(kept(j), 0);
    expect_chain(j, 1, TERN_ENOENT, NULL, 0);
    xfr_journal_free(j);
}

static void test_journal_max_bytes(void **state)
{
    (void)state;
    xfr_delta_t *d[5];
    for (uint32_t s = 0; s < 5; s++)
        d[s] = mk_delta(s + 1, s + 2, 40);
    size_t b = xfr_delta_bytes(d[0]);
    assert_true(b > 40 * 16); /* 40 RRs of 4 bytes plus their owners */
    for (int i = 1; i < 5; i++)
        assert_int_equal(xfr_delta_bytes(d[i]), b);
    /* room for two and a half: the third oldest goes when the fifth arrives */
    xfr_journal_t *j = xfr_journal_new(100, b * 5 / 2);
    assert_non_null(j);
    for (int i = 0; i < 5; i++)
        xfr_journal_add(j, d[i]);
    xfr_journal_entry_t e[8];
    assert_int_equal(xfr_journal_list(j, e, 8), 2);
    assert_int_equal(e[0].from, 4);
    assert_int_equal(e[1].from, 5);
    assert_int_equal(e[1].bytes, b);
    assert_int_equal(e[1].removed, 1);
    assert_int_equal(e[1].added, 40);
    expect_chain(j, 3, TERN_ENOENT, NULL, 0);
    xfr_journal_free(j);

    /* a delta larger than the whole budget is not kept at all */
    j = xfr_journal_new(100, b - 1);
    assert_non_null(j);
    xfr_journal_add(j, mk_delta(1, 2, 1));
    assert_int_equal(kept(j), 1);
    xfr_journal_add(j, mk_delta(2, 3, 40));
    assert_int_equal(kept(j), 0);
    xfr_journal_free(j);
}

static void test_journal_wraparound(void **state)
{
    (void)state;
    xfr_journal_t *j = xfr_journal_new(10, SIZE_MAX);
    assert_non_null(j);
    static const uint32_t ser[] = {0xFFFFFFF0u, 0xFFFFFFFFu, 5, 6};
    for (int i = 0; i < 3; i++) {
        assert_true(xfr_serial_lt(ser[i], ser[i + 1]));
        xfr_journal_add(j, mk_delta(ser[i], ser[i + 1], 1));
    }
    expect_chain(j, 0xFFFFFFF0u, 0, ser, 3);
    expect_chain(j, 0xFFFFFFFFu, 0, ser + 1, 2);
    expect_chain(j, 5, 0, ser + 2, 1);
    expect_chain(j, 6, 0, NULL, 0);
    expect_chain(j, 0, TERN_ENOENT, NULL, 0);
    xfr_journal_free(j);
}

static void test_journal_list(void **state)
{
    (void)state;
    xfr_journal_t *j = xfr_journal_new(10, SIZE_MAX);
    assert_non_null(j);
    struct timespec t0, t1;
    clock_gettime(CLOCK_REALTIME, &t0);
    xfr_journal_add(j, mk_delta(10, 11, 3));
    xfr_journal_add(j, mk_delta(11, 12, 1));
    clock_gettime(CLOCK_REALTIME, &t1);
    xfr_journal_entry_t e[4];
    assert_int_equal(xfr_journal_list(j, e, 4), 2);
    assert_int_equal(e[0].from, 10);
    assert_int_equal(e[0].to, 11);
    assert_int_equal(e[0].removed, 1);
    assert_int_equal(e[0].added, 3);
    assert_true(e[0].bytes > e[1].bytes); /* 3 RRs added against 1 */
    assert_int_equal(e[1].from, 11);
    assert_int_equal(e[1].added, 1);
    for (int i = 0; i < 2; i++)
        assert_true(e[i].when.tv_sec >= t0.tv_sec && e[i].when.tv_sec <= t1.tv_sec);
    /* room for one: the newest */
    memset(e, 0, sizeof(e));
    assert_int_equal(xfr_journal_list(j, e, 1), 1);
    assert_int_equal(e[0].from, 11);
    assert_int_equal(e[0].to, 12);
    assert_int_equal(e[1].from, 0); /* nothing written past max */
    assert_int_equal(xfr_journal_list(j, NULL, 0), 0);
    xfr_journal_free(j);
    xfr_journal_free(NULL);
    xfr_delta_release(NULL);
}

/* The loader appends (and evicts) while transfer threads take chains and read them. */
#define RACE_DELTAS 120

static xfr_delta_t *race_deltas[RACE_DELTAS];

static void *race_reader(void *arg)
{
    xfr_journal_t *j = arg;
    unsigned got = 0;
    for (int round = 0; round < 3000; round++) {
        xfr_delta_t **c = NULL;
        size_t n = 0;
        uint32_t from = 1 + (uint32_t)(round % RACE_DELTAS);
        if (xfr_journal_chain(j, from, &c, &n) != 0)
            continue;
        for (size_t i = 0; i < n; i++) {
            if (xfr_delta_from(c[i]) != from + i || xfr_delta_to(c[i]) != from + i + 1)
                abort();
            size_t pos = 0;
            xfr_rrset_t r;
            while (xfr_delta_next(c[i], XFR_ADDED, &pos, &r))
                got += r.count;
            xfr_delta_release(c[i]);
        }
        free(c);
    }
    return (void *)(uintptr_t)got;
}

static void test_journal_threads(void **state)
{
    (void)state;
    for (uint32_t s = 0; s < RACE_DELTAS; s++)
        race_deltas[s] = mk_delta(s + 1, s + 2, 2);
    xfr_journal_t *j = xfr_journal_new(8, SIZE_MAX);
    assert_non_null(j);
    pthread_t t[2];
    for (int i = 0; i < 2; i++)
        assert_int_equal(pthread_create(&t[i], NULL, race_reader, j), 0);
    for (uint32_t s = 0; s < RACE_DELTAS; s++) {
        xfr_journal_add(j, race_deltas[s]);
        if (s % 16 == 15)
            tu_sleep_ms(1);
    }
    for (int i = 0; i < 2; i++)
        assert_int_equal(pthread_join(t[i], NULL), 0);
    assert_int_equal(kept(j), 8);
    xfr_journal_free(j);
}

/* ---- the cost of a diff of a large zone where one name changed ---------------------------- */

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* A zone of `names` hosts h<i> with an A each (every third an AAAA too); host `changed` gets a
 * different address when `changed` < names. */
static zone_t *big_zone(const uint8_t *apex, size_t names, size_t changed)
{
    zone_builder_t *b = zone_builder_new(apex, NULL);
    assert_non_null(b);
    zone_builder_expect(b, names + names / 3 + 2);
    uint8_t soa[128], owner[DNAME_MAXLEN], ns[DNAME_MAXLEN];
    size_t al = dname_len(apex), o = 0;
    ns[0] = 2;
    memcpy(ns + 1, "ns", 2);
    memcpy(ns + 3, apex, al);
    memcpy(soa, ns, al + 3);
    o = al + 3;
    memcpy(soa + o, ns, al + 3);
    o += al + 3;
    static const uint8_t nums[20] = {0, 0,    0, 9,    0,    0, 0x1c, 0x20, 0, 0,
                                     3, 0x84, 0, 0x12, 0x75, 0, 0,    0,    1, 0x2c};
    memcpy(soa + o, nums, 20);
    o += 20;
    assert_int_equal(zone_builder_add(b, apex, WIRE_T_SOA, 1, 3600, soa, (uint16_t)o, NULL, 0), 0);
    assert_int_equal(zone_builder_add(b, apex, WIRE_T_NS, 1, 3600, ns, (uint16_t)(al + 3), NULL, 0),
                     0);
    for (size_t i = 0; i < names; i++) {
        int l = snprintf((char *)owner + 1, 16, "h%zu", i);
        owner[0] = (uint8_t)l;
        memcpy(owner + 1 + l, apex, al);
        uint8_t a[4] = {10, (uint8_t)(i >> 16), (uint8_t)(i >> 8), (uint8_t)i};
        if (i == changed)
            a[0] = 11;
        assert_int_equal(zone_builder_add(b, owner, WIRE_T_A, 1, 300, a, 4, NULL, 0), 0);
        if (i % 3 == 0) {
            uint8_t aaaa[16] = {0x20, 1, 0xd, 0xb8};
            memcpy(aaaa + 12, a, 4);
            assert_int_equal(zone_builder_add(b, owner, WIRE_T_AAAA, 1, 300, aaaa, 16, NULL, 0), 0);
        }
    }
    zone_t *z = NULL;
    char err[256];
    if (zone_builder_finish(b, &z, err, sizeof(err)) != 0)
        fail_msg("%s", err);
    return z;
}

/* A fresh zone for zone_patch(): base's apex RRsets and one A RR at owner. */
static zone_t *fresh_zone(const zone_t *base, const uint8_t *owner)
{
    zone_builder_t *b = zone_builder_new(base->apex, NULL);
    assert_non_null(b);
    const zone_node_t *apex = base->apex_node;
    for (unsigned k = 0; k < apex->nrrsets; k++) {
        const zone_rrset_t *rs = &apex->rrsets[k];
        const uint8_t *p = rs->rdata;
        for (unsigned i = 0; i < rs->count; i++) {
            uint16_t l = (uint16_t)(p[0] << 8 | p[1]);
            assert_int_equal(
                zone_builder_add(b, base->apex, rs->type, 1, rs->ttl, p + 2, l, NULL, 0), 0);
            p += 2 + l;
        }
    }
    static const uint8_t a[4] = {192, 0, 2, 123};
    assert_int_equal(zone_builder_add(b, owner, WIRE_T_A, 1, 300, a, 4, NULL, 0), 0);
    zone_t *z = NULL;
    char err[256];
    if (zone_builder_finish(b, &z, err, sizeof(err)) != 0)
        fail_msg("%s", err);
    return z;
}

static size_t node_rrs(const zone_node_t *n)
{
    size_t c = 0;
    for (unsigned k = 0; k < n->nrrsets; k++)
        c += n->rrsets[k].count;
    return c;
}

static void test_diff_cost(void **state)
{
    (void)state;
    const char *file = getenv("TERN_XFR_BENCH_ZONE");
    const char *origin = getenv("TERN_XFR_BENCH_ORIGIN");
    zone_t *a, *b;
    size_t changed;
    double t0 = now_ms();
    if (file) {
        char err[512];
        origin = origin ? origin : "bench.test";
        if (zone_file_load(origin, file, &a, err, sizeof(err)) != 0 ||
            zone_file_load(origin, file, &b, err, sizeof(err)) != 0)
            fail_msg("%s", err);
        changed = SIZE_MAX;
    } else {
        uint8_t apex[DNAME_MAXLEN];
        const char *why;
        assert_true(dname_from_str("big.test", 8, false, apex, &why) > 0);
        a = big_zone(apex, 100000, SIZE_MAX);
        changed = 54322; /* no AAAA (every third host has one) */
        b = big_zone(apex, 100000, changed);
    }
    double t1 = now_ms();
    /* two independent builds (the same file loaded twice, or one name changed): every RRset's
     * bytes are compared */
    xfr_delta_t *d = xfr_diff(a, b);
    double t2 = now_ms();
    assert_non_null(d);
    assert_int_equal(xfr_delta_removed(d), changed == SIZE_MAX ? 0 : 1);
    assert_int_equal(xfr_delta_added(d), changed == SIZE_MAX ? 0 : 1);
    xfr_delta_release(d);

    /* a patched version of a: one name changed, every other RRset shares a's RDATA */
    const zone_node_t *victim = NULL;
    for (size_t i = a->node_count / 2; i < a->node_count && !victim; i++) {
        const zone_node_t *n = zone_node_at(a, (uint32_t)i);
        if (n->flags == 0 && !n->cut && zone_node_rrset(n, WIRE_T_A) &&
            !zone_node_rrset(n, WIRE_T_MX))
            victim = n;
    }
    assert_non_null(victim);
    zone_t *fresh = fresh_zone(a, victim->name), *p = NULL;
    char err[256];
    const uint8_t *names[1] = {victim->name};
    assert_int_equal(zone_patch_names(a, fresh, names, 1, &p, err, sizeof(err)), 0);
    zone_free(fresh);
    double t3 = now_ms();
    d = xfr_diff(a, p);
    double t4 = now_ms();
    assert_non_null(d);
    assert_int_equal(xfr_delta_removed(d), node_rrs(victim));
    assert_int_equal(xfr_delta_added(d), 1);
    xfr_delta_release(d);
    print_message("diff of %zu names (%zu RRs; build %.0f ms): independent builds %.1f ms, "
                  "patched version %.1f ms\n",
                  a->node_count, a->rr_count, t1 - t0, t2 - t1, t4 - t3);
    zone_free(p);
    zone_free(a);
    zone_free(b);
}

static int setup(void **state)
{
    (void)state;
    tu_mkdtemp(dir, sizeof(dir), "tern-xfr-journal");
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    tu_rmtree(dir);
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_diff_cases),
        cmocka_unit_test(test_diff_self_and_other_zone),
        cmocka_unit_test(test_diff_random_walk),
        cmocka_unit_test(test_diff_by_delta_same_bytes),
        cmocka_unit_test(test_serial_arithmetic),
        cmocka_unit_test(test_journal_chain),
        cmocka_unit_test(test_journal_broken_chain),
        cmocka_unit_test(test_journal_max_versions),
        cmocka_unit_test(test_journal_max_bytes),
        cmocka_unit_test(test_journal_wraparound),
        cmocka_unit_test(test_journal_list),
        cmocka_unit_test(test_journal_threads),
        cmocka_unit_test(test_diff_cost),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
