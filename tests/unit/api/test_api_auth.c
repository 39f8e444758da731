/* test_api_auth.c — which key an X-API-Key is, and what a key may see and do. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <sodium.h>

#include "tern/api/api_auth.h"

static char *ops_zones[] = {"a.test", "."};
static config_api_key_t keys[] = {
    {.name = "all", .secret = "0123456789abcdef0123", .all_zones = true},
    {.name = "ops", .secret = "ops-secret-ops-secret", .zones = ops_zones, .nzones = 2},
    {.name = "ro", .secret = "read-only-0123456789", .all_zones = true, .read_only = true},
};

static void test_find(void **state)
{
    (void)state;
    assert_ptr_equal(api_auth_find(keys, 3, "0123456789abcdef0123"), &keys[0]);
    assert_ptr_equal(api_auth_find(keys, 3, "ops-secret-ops-secret"), &keys[1]);
    assert_ptr_equal(api_auth_find(keys, 3, "read-only-0123456789"), &keys[2]);
    /* a prefix, a longer string, another case, nothing: no key */
    assert_null(api_auth_find(keys, 3, "0123456789abcdef012"));
    assert_null(api_auth_find(keys, 3, "0123456789abcdef01234"));
    assert_null(api_auth_find(keys, 3, "OPS-SECRET-OPS-SECRET"));
    assert_null(api_auth_find(keys, 3, ""));
    assert_null(api_auth_find(keys, 3, NULL));
    assert_null(api_auth_find(keys, 0, "0123456789abcdef0123"));
}

static void test_zones(void **state)
{
    (void)state;
    assert_true(api_auth_zone_ok(&keys[0], "b.test"));
    assert_true(api_auth_zone_ok(&keys[1], "a.test"));
    assert_true(api_auth_zone_ok(&keys[1], "A.Test"));
    assert_true(api_auth_zone_ok(&keys[1], "."));
    assert_false(api_auth_zone_ok(&keys[1], "b.test"));
    assert_false(api_auth_zone_ok(&keys[1], "sub.a.test"));
}

static void test_methods(void **state)
{
    (void)state;
    assert_true(api_auth_method_ok(&keys[0], "PATCH"));
    assert_true(api_auth_method_ok(&keys[2], "GET"));
    assert_true(api_auth_method_ok(&keys[2], "HEAD"));
    assert_false(api_auth_method_ok(&keys[2], "PATCH"));
    assert_false(api_auth_method_ok(&keys[2], "PUT"));
    assert_false(api_auth_method_ok(&keys[2], "DELETE"));
}

int main(void)
{
    if (sodium_init() < 0)
        return 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_find),
        cmocka_unit_test(test_zones),
        cmocka_unit_test(test_methods),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
