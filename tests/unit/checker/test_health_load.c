/*
 * test_health_load.c — an endpoint's load read from a check's response (health_load.c): numbers
 * as text (blanks, decimals, exponents; no sign, hex, nan or trailing words), a response header
 * line, a number at a dotted path of a JSON body (nested, as a string, missing, not a number,
 * not JSON), and the milli-unit clamp.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "health_load.h"
#include "tern/common/err.h"
#include "tern/health/health.h"

static int text(const char *s, uint32_t *m)
{
    return health_load_parse_text(s, strlen(s), m);
}

static void test_text(void **state)
{
    (void)state;
    static const struct {
        const char *s;
        uint32_t want;
    } good[] = {
        {"0.85", 850},
        {" 72.5\r\n", 72500},
        {"90", 90000},
        {".5", 500},
        {"1e2", 100000},
        {"2.5E-1", 250},
        {"0.0004", 0},                            /* below the milli step */
        {"99999999999", HEALTH_LOAD_UNKNOWN - 1}, /* above the cell: clamped below unknown */
    };
    uint32_t m = 0;
    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
        if (text(good[i].s, &m) != 0 || m != good[i].want)
            fail_msg("\"%s\": got %u, want %u", good[i].s, m, good[i].want);
    }
    static const char *const bad[] = {"",      "   ", "-1",    "+1", "0x10", "nan", "inf",
                                      "1.2.3", "12%", "70 80", "1e", "e5",   "1e+", "high"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        m = 7;
        if (text(bad[i], &m) != TERN_EINVAL)
            fail_msg("\"%s\" was taken as %u", bad[i], m);
    }
    /* too long to be a number */
    char longs[100];
    memset(longs, '1', sizeof(longs) - 1);
    longs[sizeof(longs) - 1] = 0;
    assert_int_equal(text(longs, &m), TERN_EINVAL);
    /* len bounds the text: no NUL needed */
    assert_int_equal(health_load_parse_text("0.5junk", 3, &m), 0);
    assert_int_equal(m, 500);
}

static void test_double(void **state)
{
    (void)state;
    uint32_t m;
    assert_int_equal(health_load_from_double(0.7, &m), 0);
    assert_int_equal(m, 700);
    assert_int_equal(health_load_from_double(-0.1, &m), TERN_EINVAL);
    assert_int_equal(health_load_from_double(1e300, &m), 0);
    assert_int_equal(m, HEALTH_LOAD_UNKNOWN - 1);
}

static void test_header(void **state)
{
    (void)state;
    uint32_t m = 0;
    const char *h = "x-load: 0.93\r\n";
    assert_int_equal(health_load_header(h, strlen(h), "X-Load", &m), 1);
    assert_int_equal(m, 930);
    h = "X-Loaded: 0.93\r\n"; /* a longer name is another header */
    assert_int_equal(health_load_header(h, strlen(h), "X-Load", &m), 0);
    h = "Content-Type: text/plain\r\n";
    assert_int_equal(health_load_header(h, strlen(h), "X-Load", &m), 0);
    h = "X-Load: busy\r\n";
    assert_int_equal(health_load_header(h, strlen(h), "X-Load", &m), TERN_EINVAL);
    h = "X-Load:\r\n";
    assert_int_equal(health_load_header(h, strlen(h), "X-Load", &m), TERN_EINVAL);
    h = "X-Load";
    assert_int_equal(health_load_header(h, strlen(h), "X-Load", &m), 0);
}

static int json(const char *body, const char *path, uint32_t *m)
{
    return health_load_parse_json(body, strlen(body), path, m);
}

static void test_json(void **state)
{
    (void)state;
    uint32_t m = 0;
    assert_int_equal(json("{\"load\": 0.42}", "load", &m), 0);
    assert_int_equal(m, 420);
    assert_int_equal(json("{\"stats\": {\"cpu\": {\"load\": 81}}}", "stats.cpu.load", &m), 0);
    assert_int_equal(m, 81000);
    assert_int_equal(json("{\"stats\": {\"load\": \" 0.5 \"}}", "stats.load", &m), 0);
    assert_int_equal(m, 500);
    /* a key with the path's dots in it is not the path */
    assert_int_equal(json("{\"stats.load\": 1}", "stats.load", &m), TERN_EINVAL);
    static const char *const bad[][2] = {
        {"{\"load\": -1}", "load"},
        {"{\"load\": \"high\"}", "load"},
        {"{\"load\": null}", "load"},
        {"{\"load\": [0.5]}", "load"},
        {"{\"load\": {\"v\": 1}}", "load"},
        {"{\"stats\": 5}", "stats.load"},
        {"{\"other\": 1}", "load"},
        {"[0.5]", "load"},
        {"load=0.5", "load"},
        {"{\"load\": 0.5", "load"},
        {"", "load"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        if (json(bad[i][0], bad[i][1], &m) != TERN_EINVAL)
            fail_msg("%s at %s was taken as %u", bad[i][0], bad[i][1], m);
    /* a body as large as a check reads, with the number deep inside: still found */
    size_t cap = HEALTH_LOAD_BODY_MAX;
    char *big = malloc(cap + 1);
    assert_non_null(big);
    int k = snprintf(big, cap, "{\"pad\": \"");
    memset(big + k, 'x', cap - (size_t)k - 40);
    snprintf(big + cap - 40, 40, "\", \"s\": {\"load\": 3.25}}");
    assert_int_equal(json(big, "s.load", &m), 0);
    assert_int_equal(m, 3250);
    free(big);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_text),
        cmocka_unit_test(test_double),
        cmocka_unit_test(test_header),
        cmocka_unit_test(test_json),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
