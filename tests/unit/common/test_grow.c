/* test_grow.c — the growable array and text buffer, and the common hash. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "tern/common/buf.h"
#include "tern/common/err.h"
#include "tern/common/grow.h"
#include "tern/common/hash.h"

static void test_grow_doubles_and_keeps(void **state)
{
    (void)state;
    uint32_t *a = NULL;
    size_t cap = 0;
    assert_int_equal(tern_grow((void **)&a, &cap, 1, sizeof(*a)), 0);
    assert_int_equal(cap, TERN_GROW_MIN);
    for (uint32_t i = 0; i < 1000; i++) {
        assert_int_equal(tern_grow((void **)&a, &cap, i + 1, sizeof(*a)), 0);
        a[i] = i;
    }
    assert_int_equal(cap, 1024);
    for (uint32_t i = 0; i < 1000; i++)
        assert_int_equal(a[i], i);
    /* enough room already: nothing moves */
    uint32_t *before = a;
    assert_int_equal(tern_grow((void **)&a, &cap, 1024, sizeof(*a)), 0);
    assert_ptr_equal(a, before);
    free(a);
}

static void test_grow_overflow(void **state)
{
    (void)state;
    char *a = NULL;
    size_t cap = 0;
    assert_int_equal(tern_grow((void **)&a, &cap, SIZE_MAX / 2, 8), TERN_ENOMEM);
    assert_null(a);
    assert_int_equal(cap, 0);
}

static void test_hash(void **state)
{
    (void)state;
    /* deterministic, length- and seed-sensitive, and every tail length reads only its bytes */
    assert_true(tern_hash64("abc", 3, 0) == tern_hash64("abc", 3, 0));
    assert_true(tern_hash64("abc", 3, 0) != tern_hash64("abc", 3, 1));
    assert_true(tern_hash64("abc", 3, 0) != tern_hash64("abc\0", 4, 0));
    assert_true(tern_hash_str("example.test") == tern_hash64("example.test", 12, 0x7a6f6e65ull));
    char buf[32];
    memset(buf, 'x', sizeof(buf));
    uint64_t h9 = tern_hash64(buf, 9, 0);
    buf[9] = 'y';
    assert_true(tern_hash64(buf, 9, 0) == h9);
    assert_true(tern_mix32(1) != tern_mix32(2));
}

static void test_buf(void **state)
{
    (void)state;
    tern_buf_t b;
    tern_buf_init(&b, 0);
    tern_buf_append(&b, NULL, 0); /* nothing to add: fine, and nothing allocated yet */
    assert_false(b.failed);
    tern_buf_printf(&b, "%s=%d", "a", 1);
    tern_buf_append(&b, "xyz", 2);
    assert_string_equal(b.p, "a=1xy");
    assert_int_equal(b.len, 5);
    for (int i = 0; i < 1000; i++)
        tern_buf_printf(&b, "%04d", i);
    assert_int_equal(b.len, 4005);
    assert_false(b.failed);
    tern_buf_free(&b);
    assert_null(b.p);

    /* a bound: what passes it fails the buffer, and later appends do nothing */
    tern_buf_init(&b, 8);
    tern_buf_append(&b, "1234567", 7);
    assert_false(b.failed);
    tern_buf_append(&b, "8", 1);
    assert_true(b.failed);
    tern_buf_printf(&b, "more");
    assert_string_equal(b.p, "1234567");
    assert_true(b.cap <= 8);
    tern_buf_free(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_grow_doubles_and_keeps),
        cmocka_unit_test(test_grow_overflow),
        cmocka_unit_test(test_hash),
        cmocka_unit_test(test_buf),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
