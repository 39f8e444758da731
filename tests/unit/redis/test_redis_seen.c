/*
 * test_redis_seen.c — the labels of one zone read, with their digests (src/redis/redis_seen.c,
 * private to the module): a label added once, found again, its slot stable for its digest, and
 * every label still there after the table grew many times.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "redis_int.h"
#include "tern/common/err.h"

static void test_add_find(void **state)
{
    (void)state;
    seen_t s = {0};
    size_t slot = 0, again = 0;
    assert_int_equal(redis_seen_find(&s, "www", 3), -1); /* an empty table */
    assert_int_equal(redis_seen_add(&s, "www", 3, &slot), 1);
    s.dig[slot] = 42;
    assert_int_equal(redis_seen_add(&s, "www", 3, &again), 0); /* a repeat of HSCAN */
    assert_int_equal(redis_seen_find(&s, "www", 3), (long)slot);
    assert_int_equal(s.dig[slot], 42);
    /* a prefix, or another case, is another label (the hash's fields, byte for byte) */
    assert_int_equal(redis_seen_find(&s, "ww", 2), -1);
    assert_int_equal(redis_seen_add(&s, "WWW", 3, &again), 1);
    assert_int_equal(s.n, 2);
    redis_seen_free(&s);
    assert_int_equal(s.n, 0);
    assert_null(s.buf);
}

static void test_grows(void **state)
{
    (void)state;
    seen_t s = {0};
    char lab[32];
    enum { N = 20000 }; /* the table starts at 4096 slots, half full at most: grows three times */
    for (unsigned i = 0; i < N; i++) {
        size_t slot;
        int n = snprintf(lab, sizeof(lab), "label-%u", i);
        assert_int_equal(redis_seen_add(&s, lab, (size_t)n, &slot), 1);
        s.dig[slot] = i + 1;
    }
    assert_int_equal(s.n, N);
    assert_true(s.mask + 1 >= 2 * N);
    for (unsigned i = 0; i < N; i++) {
        int n = snprintf(lab, sizeof(lab), "label-%u", i);
        long o = redis_seen_find(&s, lab, (size_t)n);
        assert_true(o >= 0);
        assert_int_equal(s.dig[o], i + 1); /* digests move with their labels */
    }
    redis_seen_free(&s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_add_find),
        cmocka_unit_test(test_grows),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
