/*
 * test_config_api.c — the HTTP API's block (src/conf/config_api.c): every key read, the zones
 * canonical, the defaults; every bad value with its file:line; copies, the restart-only
 * comparison and frees (run under ASan: nothing may leak).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "tern/conf/config.h"

#include "conf_test_util.h"

static const char *const full = "api:\n"
                                "  listen: \"127.0.0.1:8081\"\n"
                                "  cert: api.pem\n"
                                "  cert_key: /etc/tern/api.key\n"
                                "  max_body_bytes: 65536\n"
                                "  keys:\n"
                                "    - name: octodns\n"
                                "      key: \"0123456789abcdef0123\"\n"
                                "      zones: [Example.COM., b.test]\n"
                                "    - {name: ro, key: \"ro-0123456789abcdef\", read_only: true}\n";

static void test_full(void **state)
{
    (void)state;
    config_t c = load_text(full);
    const config_api_t *a = &c.api;
    assert_string_equal(a->listen, "127.0.0.1:8081");
    /* relative to the config file's directory */
    assert_string_equal(a->cert, "/tmp/api.pem");
    assert_string_equal(a->cert_key, "/etc/tern/api.key");
    assert_int_equal(a->max_body_bytes, 65536);
    assert_int_equal(a->nkeys, 2);
    assert_string_equal(a->keys[0].name, "octodns");
    assert_string_equal(a->keys[0].secret, "0123456789abcdef0123");
    assert_false(a->keys[0].all_zones);
    assert_false(a->keys[0].read_only);
    assert_int_equal(a->keys[0].nzones, 2);
    assert_string_equal(a->keys[0].zones[0], "example.com");
    assert_string_equal(a->keys[0].zones[1], "b.test");
    assert_true(a->keys[1].all_zones);
    assert_true(a->keys[1].read_only);
    assert_int_equal(a->keys[1].nzones, 0);

    /* a copy is the same, and owns its strings */
    config_t d;
    assert_int_equal(config_copy(&d, &c), 0);
    assert_ptr_not_equal(d.api.keys, c.api.keys);
    assert_string_equal(d.api.keys[0].zones[0], "example.com");
    char buf[256] = "";
    assert_int_equal(config_restart_only_changes(&c, &d, buf, sizeof(buf)), 0);
    /* a key changed: restart-only, named */
    d.api.keys[1].read_only = false;
    assert_int_not_equal(config_restart_only_changes(&c, &d, buf, sizeof(buf)), 0);
    assert_non_null(strstr(buf, "api"));
    config_free(&d);
    config_free(&c);
}

static void test_defaults(void **state)
{
    (void)state;
    config_t c = load_text("listen: [\"127.0.0.1:5353\"]\n");
    assert_null(c.api.listen);
    assert_int_equal(c.api.nkeys, 0);
    config_free(&c);
    c = load_text("api:\n  listen: \"[::1]:0\"\n  keys: [{name: a, key: \"aaaaaaaaaaaaaaaa\"}]\n");
    assert_string_equal(c.api.listen, "[::1]:0");
    assert_int_equal(c.api.max_body_bytes, 1048576);
    assert_null(c.api.cert);
    config_free(&c);
    c = load_text("api: ~\n");
    assert_null(c.api.listen);
    config_free(&c);
}

static void test_errors(void **state)
{
    (void)state;
    expect_error("api:\n  keys: [{name: a, key: \"aaaaaaaaaaaaaaaa\"}]\n", 2,
                 "api: missing \"listen\" (\"ADDR:PORT\" of the API)");
    expect_error("api:\n  listen: \"127.0.0.1:8081\"\n", 2,
                 "api: keys: expected a non-empty list of {name, key, zones, read_only} (every "
                 "request presents one)");
    expect_error("api:\n  listen: \"127.0.0.1:8081\"\n  keys: []\n", 3,
                 "api: keys: expected a non-empty list of {name, key, zones, read_only} (every "
                 "request presents one)");
    expect_error("api:\n  listen: \"127.0.0.1:8081\"\n  keys: [{name: a, key: short}]\n", 3,
                 "api: keys[0]: key: shorter than 16 characters (make one with: openssl rand "
                 "-hex 32)");
    expect_error("api:\n  listen: \"127.0.0.1:8081\"\n  keys:\n"
                 "    - {name: a, key: \"aaaaaaaaaaaaaaaa\"}\n"
                 "    - {name: a, key: \"bbbbbbbbbbbbbbbb\"}\n",
                 5, "api: keys[1]: name: \"a\" is given twice");
    expect_error("api:\n  listen: \"127.0.0.1:8081\"\n  keys:\n"
                 "    - {name: a, key: \"aaaaaaaaaaaaaaaa\"}\n"
                 "    - {name: b, key: \"aaaaaaaaaaaaaaaa\"}\n",
                 5, "api: keys[1]: key: the same secret as key \"a\" (one secret, one key)");
    expect_error("api:\n  listen: \"127.0.0.1:8081\"\n  cert: a.pem\n"
                 "  keys: [{name: a, key: \"aaaaaaaaaaaaaaaa\"}]\n",
                 2, "api: cert and cert_key go together (HTTPS needs both)");
    expect_error("api:\n  listen: \"127.0.0.1:8081\"\n"
                 "  keys: [{name: a, key: \"aaaaaaaaaaaaaaaa\", zones: example.com}]\n",
                 3, "api: keys[0]: zones: expected a list of zone names, got a plain scalar");
    expect_error("api:\n  listen: \"127.0.0.1:8081\"\n"
                 "  keys: [{name: a, key: \"aaaaaaaaaaaaaaaa\", zones: [\"a..b\"]}]\n",
                 3, "api: keys[0][0]: zones: bad zone name \"a..b\": empty label in name");
    expect_error("api:\n  listen: \"127.0.0.1:8081\"\n  max_body_bytes: 10\n"
                 "  keys: [{name: a, key: \"aaaaaaaaaaaaaaaa\"}]\n",
                 3, "api: max_body_bytes: 10 is out of range 1024..67108864");
    expect_error("api:\n  listen: \"localhost:8081\"\n"
                 "  keys: [{name: a, key: \"aaaaaaaaaaaaaaaa\"}]\n",
                 2, "api: listen: bad address \"localhost:8081\" (want ADDR:PORT or [V6]:PORT)");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_full),
        cmocka_unit_test(test_defaults),
        cmocka_unit_test(test_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
