/*
 * test_aname_results.c — the ANAME results table: build, find, misses, case, both types, the
 * last of a duplicate winning, bad input refused, many entries, the empty table, references.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "tern/common/err.h"
#include "tern/common/mem.h"
#include "tern/wire/dname.h"
#include "tern/wire/rr.h"
#include "tern/zone/aname_results.h"
#include "zone_test_util.h"

/* The result of (name, qtype) in t, name given as lowercase text. */
static const aname_result_t *find(const aname_results_t *t, const char *name, uint16_t qtype)
{
    uint8_t w[DNAME_MAXLEN];
    size_t len = wire_name(w, name);
    return aname_results_find(t, w, len, dname_hash(w), qtype);
}

static void add(aname_results_builder_t *b, const char *name, uint16_t qtype,
                const aname_result_t *r)
{
    uint8_t w[DNAME_MAXLEN];
    wire_name(w, name);
    assert_int_equal(aname_results_add(b, w, qtype, r), 0);
}

/* An ANAME_OK result over rdata (a buffer of the caller's) with n addresses of the type. */
static aname_result_t ok_result(uint8_t *rdata, uint16_t qtype, unsigned n, uint8_t seed,
                                uint32_t ttl)
{
    size_t rl = qtype == WIRE_T_A ? 4 : 16;
    for (unsigned i = 0; i < n; i++) {
        uint8_t *w = rdata + i * (2 + rl);
        w[0] = 0;
        w[1] = (uint8_t)rl;
        memset(w + 2, 0, rl);
        w[2] = seed;
        w[1 + rl] = (uint8_t)(i + 1);
    }
    return (aname_result_t){.state = ANAME_OK,
                            .count = (uint16_t)n,
                            .ttl = ttl,
                            .rdata_len = (uint32_t)(n * (2 + rl)),
                            .rdata = rdata};
}

static void test_build_find(void **state)
{
    (void)state;
    aname_results_builder_t *b = aname_results_builder_new();
    assert_non_null(b);
    uint8_t a[64], aaaa[64];
    aname_result_t ra = ok_result(a, WIRE_T_A, 2, 192, 300);
    aname_result_t r6 = ok_result(aaaa, WIRE_T_AAAA, 1, 0x20, 120);
    add(b, "target.up.test.", WIRE_T_A, &ra);
    add(b, "target.up.test.", WIRE_T_AAAA, &r6);
    aname_result_t nod = {.state = ANAME_NODATA, .ttl = 60};
    aname_result_t nx = {.state = ANAME_NXDOMAIN, .ttl = 30};
    aname_result_t pend = {.state = ANAME_PENDING};
    add(b, "v4only.up.test.", WIRE_T_A, &ra);
    add(b, "v4only.up.test.", WIRE_T_AAAA, &nod);
    add(b, "gone.up.test.", WIRE_T_A, &nx);
    add(b, "gone.up.test.", WIRE_T_AAAA, &nx);
    add(b, "later.up.test.", WIRE_T_A, &pend);
    /* the copies are the table's: scribbling over the caller's buffers changes nothing */
    memset(a, 0xee, sizeof(a));
    aname_results_t *t = aname_results_finish(b);
    assert_non_null(t);
    assert_int_equal(aname_results_count(t), 7);

    const aname_result_t *x = find(t, "target.up.test.", WIRE_T_A);
    assert_non_null(x);
    assert_int_equal(x->state, ANAME_OK);
    assert_int_equal(x->count, 2);
    assert_int_equal(x->ttl, 300);
    assert_int_equal(x->rdata_len, 12);
    const uint8_t want_a[12] = {0, 4, 192, 0, 0, 1, 0, 4, 192, 0, 0, 2};
    assert_memory_equal(x->rdata, want_a, 12);

    x = find(t, "target.up.test.", WIRE_T_AAAA);
    assert_non_null(x);
    assert_int_equal(x->state, ANAME_OK);
    assert_int_equal(x->count, 1);
    assert_int_equal(x->ttl, 120);
    assert_int_equal(x->rdata_len, 18);
    assert_int_equal(x->rdata[0], 0);
    assert_int_equal(x->rdata[1], 16);
    assert_int_equal(x->rdata[2], 0x20);
    assert_int_equal(x->rdata[17], 1);

    x = find(t, "v4only.up.test.", WIRE_T_AAAA);
    assert_non_null(x);
    assert_int_equal(x->state, ANAME_NODATA);
    assert_int_equal(x->ttl, 60);
    assert_int_equal(x->count, 0);
    assert_int_equal(x->rdata_len, 0);
    assert_int_equal(find(t, "v4only.up.test.", WIRE_T_A)->state, ANAME_OK);
    x = find(t, "gone.up.test.", WIRE_T_AAAA);
    assert_non_null(x);
    assert_int_equal(x->state, ANAME_NXDOMAIN);
    assert_int_equal(x->ttl, 30);
    x = find(t, "later.up.test.", WIRE_T_A);
    assert_non_null(x);
    assert_int_equal(x->state, ANAME_PENDING);

    /* misses: an absent name, an absent type of a present name, a parent, another type */
    assert_null(find(t, "other.up.test.", WIRE_T_A));
    assert_null(find(t, "later.up.test.", WIRE_T_AAAA));
    assert_null(find(t, "up.test.", WIRE_T_A));
    assert_null(find(t, "target.up.test.", WIRE_T_CNAME));
    assert_null(find(NULL, "target.up.test.", WIRE_T_A));
    aname_results_release(t);
}

static void test_case(void **state)
{
    (void)state;
    aname_results_builder_t *b = aname_results_builder_new();
    assert_non_null(b);
    uint8_t a[8];
    aname_result_t ra = ok_result(a, WIRE_T_A, 1, 10, 5);
    add(b, "MiXeD.Up.TEST.", WIRE_T_A, &ra); /* stored lowercased */
    aname_results_t *t = aname_results_finish(b);
    assert_non_null(t);
    assert_non_null(find(t, "mixed.up.test.", WIRE_T_A));
    /* lookups take lowercased names (the query path lowercases once): an upper-case key misses */
    assert_null(find(t, "MIXED.UP.TEST.", WIRE_T_A));
    aname_results_release(t);
}

static void test_duplicate_last_wins(void **state)
{
    (void)state;
    aname_results_builder_t *b = aname_results_builder_new();
    assert_non_null(b);
    uint8_t a1[8], a2[16];
    aname_result_t r1 = ok_result(a1, WIRE_T_A, 1, 1, 100);
    aname_result_t r2 = ok_result(a2, WIRE_T_A, 2, 2, 200);
    add(b, "dup.test.", WIRE_T_A, &r1);
    add(b, "dup.test.", WIRE_T_AAAA, &(aname_result_t){.state = ANAME_NODATA, .ttl = 9});
    add(b, "dup.test.", WIRE_T_A, &r2);
    aname_results_t *t = aname_results_finish(b);
    assert_non_null(t);
    assert_int_equal(aname_results_count(t), 2);
    const aname_result_t *x = find(t, "dup.test.", WIRE_T_A);
    assert_non_null(x);
    assert_int_equal(x->count, 2);
    assert_int_equal(x->ttl, 200);
    assert_int_equal(x->rdata[2], 2);
    assert_int_equal(find(t, "dup.test.", WIRE_T_AAAA)->state, ANAME_NODATA);
    aname_results_release(t);
}

static void test_invalid(void **state)
{
    (void)state;
    aname_results_builder_t *b = aname_results_builder_new();
    assert_non_null(b);
    uint8_t w[DNAME_MAXLEN];
    wire_name(w, "x.test.");
    uint8_t a[16];
    aname_result_t ra = ok_result(a, WIRE_T_A, 1, 1, 1);
    /* types other than A and AAAA */
    assert_int_equal(aname_results_add(b, w, WIRE_T_CNAME, &ra), TERN_EINVAL);
    /* an A result given as AAAA (4-byte RDATA) */
    assert_int_equal(aname_results_add(b, w, WIRE_T_AAAA, &ra), TERN_EINVAL);
    /* count and length disagree */
    aname_result_t bad = ra;
    bad.count = 2;
    assert_int_equal(aname_results_add(b, w, WIRE_T_A, &bad), TERN_EINVAL);
    /* an RDLENGTH that is not 4 */
    a[1] = 5;
    assert_int_equal(aname_results_add(b, w, WIRE_T_A, &ra), TERN_EINVAL);
    a[1] = 4;
    /* OK without RRs; NODATA with RRs; an unknown state */
    assert_int_equal(aname_results_add(b, w, WIRE_T_A, &(aname_result_t){.state = ANAME_OK}),
                     TERN_EINVAL);
    bad = ra;
    bad.state = ANAME_NODATA;
    assert_int_equal(aname_results_add(b, w, WIRE_T_A, &bad), TERN_EINVAL);
    assert_int_equal(aname_results_add(b, w, WIRE_T_A, &(aname_result_t){.state = 9}), TERN_EINVAL);
    /* a compression pointer is no wire name */
    const uint8_t ptr[] = {0xc0, 0x0c};
    assert_int_equal(aname_results_add(b, ptr, WIRE_T_A, &ra), TERN_EINVAL);
    assert_int_equal(aname_results_add(NULL, w, WIRE_T_A, &ra), TERN_EINVAL);
    assert_int_equal(aname_results_add(b, w, WIRE_T_A, NULL), TERN_EINVAL);
    /* nothing of that was added */
    aname_results_t *t = aname_results_finish(b);
    assert_non_null(t);
    assert_int_equal(aname_results_count(t), 0);
    aname_results_release(t);
    /* a builder dropped unfinished, with entries */
    b = aname_results_builder_new();
    assert_non_null(b);
    assert_int_equal(aname_results_add(b, w, WIRE_T_A, &ra), 0);
    aname_results_builder_free(b);
    aname_results_builder_free(NULL);
}

static void test_many(void **state)
{
    (void)state;
    enum { N = 5000 };
    aname_results_builder_t *b = aname_results_builder_new();
    assert_non_null(b);
    char name[64];
    uint8_t a[8], aaaa[36];
    for (unsigned i = 0; i < N; i++) {
        snprintf(name, sizeof(name), "t%u.example%u.test.", i, i % 7);
        aname_result_t ra = ok_result(a, WIRE_T_A, 1, (uint8_t)i, i);
        add(b, name, WIRE_T_A, &ra);
        if (i % 3 == 0) {
            aname_result_t r6 = ok_result(aaaa, WIRE_T_AAAA, 1 + i % 2, (uint8_t)(i >> 8), i + 1);
            add(b, name, WIRE_T_AAAA, &r6);
        }
    }
    aname_results_t *t = aname_results_finish(b);
    assert_non_null(t);
    assert_int_equal(aname_results_count(t), N + (N + 2) / 3);
    for (unsigned i = 0; i < N; i++) {
        snprintf(name, sizeof(name), "t%u.example%u.test.", i, i % 7);
        const aname_result_t *x = find(t, name, WIRE_T_A);
        assert_non_null(x);
        assert_int_equal(x->ttl, i);
        assert_int_equal(x->rdata[2], (uint8_t)i);
        x = find(t, name, WIRE_T_AAAA);
        if (i % 3 == 0) {
            assert_non_null(x);
            assert_int_equal(x->ttl, i + 1);
            assert_int_equal(x->count, 1 + i % 2);
            assert_int_equal(x->rdata[2], (uint8_t)(i >> 8));
        } else {
            assert_null(x);
        }
        /* a name that differs only in the zone part */
        snprintf(name, sizeof(name), "t%u.example%u.test.", i, (i + 1) % 7);
        assert_null(find(t, name, WIRE_T_A));
    }
    aname_results_release(t);
}

static void test_empty(void **state)
{
    (void)state;
    aname_results_builder_t *b = aname_results_builder_new();
    assert_non_null(b);
    aname_results_t *t = aname_results_finish(b);
    assert_non_null(t);
    assert_int_equal(aname_results_count(t), 0);
    assert_null(find(t, "target.up.test.", WIRE_T_A));
    assert_null(find(t, ".", WIRE_T_AAAA));
    aname_results_release(t);
    assert_int_equal(aname_results_count(NULL), 0);
    assert_null(aname_results_finish(NULL));
}

static void test_refs(void **state)
{
    (void)state;
    aname_results_builder_t *b = aname_results_builder_new();
    assert_non_null(b);
    uint8_t a[8];
    aname_result_t ra = ok_result(a, WIRE_T_A, 1, 7, 42);
    add(b, "r.test.", WIRE_T_A, &ra);
    aname_results_t *t = aname_results_finish(b);
    assert_non_null(t);
    assert_ptr_equal(aname_results_retain(t), t);
    assert_ptr_equal(aname_results_retain(t), t);
    aname_results_release(t);
    aname_results_release(t);
    /* still held once: readable (ASan would catch a use after free) */
    assert_int_equal(find(t, "r.test.", WIRE_T_A)->ttl, 42);
    aname_results_release(t);
    assert_null(aname_results_retain(NULL));
    aname_results_release(NULL);
}

/* The query path allocates nothing: find() hits and misses under the thread's counters (jemalloc
 * or ASan builds; skipped where nothing counts). */
static void test_no_alloc(void **state)
{
    (void)state;
    const uint64_t *alloc, *dealloc;
    if (mem_thread_counters(&alloc, &dealloc) != 0)
        skip();
    aname_results_builder_t *b = aname_results_builder_new();
    assert_non_null(b);
    uint8_t a[8];
    aname_result_t ra = ok_result(a, WIRE_T_A, 1, 7, 42);
    add(b, "hit.test.", WIRE_T_A, &ra);
    aname_results_t *t = aname_results_finish(b);
    assert_non_null(t);
    uint8_t hit[DNAME_MAXLEN], miss[DNAME_MAXLEN];
    size_t hl = wire_name(hit, "hit.test."), ml = wire_name(miss, "miss.test.");
    uint32_t hh = dname_hash(hit), mh = dname_hash(miss);
    uint64_t a0 = *alloc, d0 = *dealloc;
    size_t found = 0;
    for (int i = 0; i < 1000; i++) {
        found += aname_results_find(t, hit, hl, hh, WIRE_T_A) != NULL;
        found += aname_results_find(t, hit, hl, hh, WIRE_T_AAAA) != NULL;
        found += aname_results_find(t, miss, ml, mh, WIRE_T_A) != NULL;
    }
    assert_int_equal(*alloc, a0);
    assert_int_equal(*dealloc, d0);
    assert_int_equal(found, 1000);
    aname_results_release(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_build_find),
        cmocka_unit_test(test_case),
        cmocka_unit_test(test_duplicate_last_wins),
        cmocka_unit_test(test_invalid),
        cmocka_unit_test(test_many),
        cmocka_unit_test(test_empty),
        cmocka_unit_test(test_refs),
        cmocka_unit_test(test_no_alloc),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
