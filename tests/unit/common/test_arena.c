/* Unit tests for the bump arena: alignment, zeroing, big objects, footprint growth. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cmocka.h>

#include "tern/common/arena.h"
#include "tern/common/err.h"

static void test_alignment_and_distinct(void **state)
{
    (void)state;
    arena_t *a = arena_create();
    assert_non_null(a);
    uint8_t *prev = NULL;
    for (size_t i = 1; i < 2000; i++) {
        uint8_t *p = arena_alloc(a, i % 37 + 1);
        assert_non_null(p);
        assert_int_equal((uintptr_t)p % 16, 0);
        memset(p, 0xAB, i % 37 + 1); /* ASan catches overlap with the chunk header */
        assert_true(p != prev);
        prev = p;
    }
    arena_destroy(a);
}

static void test_calloc_zeroes_and_overflow(void **state)
{
    (void)state;
    arena_t *a = arena_create();
    assert_non_null(a);
    uint32_t *v = arena_calloc(a, 1000, sizeof(*v));
    assert_non_null(v);
    for (int i = 0; i < 1000; i++)
        assert_int_equal(v[i], 0);
    assert_null(arena_calloc(a, SIZE_MAX / 2, 4));
    arena_destroy(a);
}

static void test_big_objects_keep_current_chunk(void **state)
{
    (void)state;
    arena_t *a = arena_create();
    assert_non_null(a);
    uint8_t *small1 = arena_alloc(a, 64);
    assert_non_null(small1);
    size_t before = arena_footprint(a);
    uint8_t *big = arena_alloc(a, 3u << 20);
    assert_non_null(big);
    memset(big, 1, 3u << 20);
    assert_true(arena_footprint(a) >= before + (3u << 20));
    /* the next small allocation continues in the first chunk, right after small1 */
    uint8_t *small2 = arena_alloc(a, 64);
    assert_ptr_equal(small2, small1 + 64);
    arena_destroy(a);
}

static void test_small_arena_stays_small(void **state)
{
    (void)state;
    arena_t *a = arena_create();
    assert_non_null(a);
    void *p = arena_alloc(a, 100);
    assert_non_null(p);
    /* 10,000 tiny zones each with their own arena must not cost a megabyte each */
    assert_true(arena_footprint(a) <= 8192);
    const char s[] = "memdup";
    char *d = arena_memdup(a, s, sizeof(s));
    assert_string_equal(d, s);
    arena_destroy(a);
    arena_destroy(NULL);
}

/* A zone-sized reservation is mapped on its own (huge-page aligned): all of it is usable, a
 * small allocation after it still works, and destroying the arena unmaps it. */
static void test_huge_chunk(void **state)
{
    (void)state;
    for (int round = 0; round < 3; round++) {
        arena_t *a = arena_create();
        assert_non_null(a);
        size_t big = (size_t)(9 + round) << 20;
        assert_int_equal(arena_reserve(a, big), 0);
        uint8_t *p = arena_alloc(a, big);
        assert_non_null(p);
        assert_int_equal((uintptr_t)p % 16, 0);
        memset(p, 0x5A, big);
        assert_int_equal(p[0], 0x5A);
        assert_int_equal(p[big - 1], 0x5A);
        assert_true(arena_footprint(a) >= big);
        uint8_t *q = arena_calloc(a, 100, 3);
        assert_non_null(q);
        assert_int_equal(q[299], 0);
        uint8_t *r = arena_alloc(a, (size_t)5 << 20); /* a big object of its own */
        assert_non_null(r);
        memset(r, 1, (size_t)5 << 20);
        arena_destroy(a);
    }
}

/* Resident pages of [p, p + len) (page-aligned p). */
static size_t resident(const uint8_t *p, size_t len)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE), n = len / page, count = 0;
    unsigned char vec[4096];
    assert_true(n <= sizeof(vec));
    assert_int_equal(mincore((void *)(uintptr_t)p, len, vec), 0);
    for (size_t i = 0; i < n; i++)
        count += vec[i] & 1;
    return count;
}

/* A calloc from a mapped chunk is zero without a memset: its pages stay out of memory until
 * written, which is what keeps a large zone's load from holding all of it and the builder at
 * once. */
static void test_calloc_mapped_untouched(void **state)
{
    (void)state;
    arena_t *a = arena_create();
    assert_non_null(a);
    size_t big = (size_t)16 << 20, mid = (size_t)8 << 20, win = (size_t)4 << 20;
    assert_int_equal(arena_reserve(a, big), 0);
    uint8_t *p = arena_calloc(a, big / 16, 16);
    assert_non_null(p);
    const uint8_t *w = (const uint8_t *)(((uintptr_t)p + mid) & ~(uintptr_t)4095);
    assert_int_equal(resident(w, win), 0);
    p[mid + 123] = 7;
    assert_true(resident(w, win) > 0);
    for (size_t i = 0; i < big; i += 4096)
        assert_int_equal(p[i] | p[big - 1 - i], 0);
    assert_int_equal(p[mid + 123], 7);
    arena_destroy(a);
}

static void test_strerror(void **state)
{
    (void)state;
    assert_string_equal(tern_strerror(0), "success");
    assert_string_equal(tern_strerror(TERN_ENOSOA), "no SOA record at the zone apex");
    assert_string_equal(tern_strerror(TERN_ENOMEM), strerror(ENOMEM));
    assert_string_equal(tern_strerror(-99999), "unknown error");
}

/* arena_reserve: allocations that fit the reservation take no further chunk. */
static void test_reserve_exact(void **state)
{
    (void)state;
    arena_t *a = arena_create();
    assert_non_null(a);
    assert_int_equal(arena_reserve(a, 16 + 32 + 16), 0);
    size_t fp = arena_footprint(a);
    assert_true(fp >= 64 && fp < 64 + 64); /* the chunk header and nothing more */
    assert_non_null(arena_alloc(a, 3));
    assert_non_null(arena_alloc(a, 17));
    assert_non_null(arena_alloc(a, 0));
    assert_int_equal(arena_footprint(a), fp);
    /* beyond it, the arena grows as usual */
    assert_non_null(arena_alloc(a, 1));
    assert_true(arena_footprint(a) > fp);
    /* a reservation that already fits is free */
    size_t fp2 = arena_footprint(a);
    assert_int_equal(arena_reserve(a, 16), 0);
    assert_int_equal(arena_footprint(a), fp2);
    arena_destroy(a);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reserve_exact),
        cmocka_unit_test(test_huge_chunk),
        cmocka_unit_test(test_calloc_mapped_untouched),
        cmocka_unit_test(test_alignment_and_distinct),
        cmocka_unit_test(test_calloc_zeroes_and_overflow),
        cmocka_unit_test(test_big_objects_keep_current_chunk),
        cmocka_unit_test(test_small_arena_stays_small),
        cmocka_unit_test(test_strerror),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
