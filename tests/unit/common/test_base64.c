/* test_base64.c — the one base64 decoder: RFC 4648 test vectors, padding rules, blanks only when
 * asked for, faults at their offsets, output bounded by cap while the length is still counted. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "tern/common/base64.h"
#include "tern/common/err.h"

static int dec(const char *s, unsigned flags, uint8_t *out, size_t cap, size_t *n,
               tern_base64_err_t *e)
{
    return tern_base64_decode(s, strlen(s), flags, out, cap, n, e);
}

/* RFC 4648 §10 */
static void test_vectors(void **state)
{
    (void)state;
    static const char *const enc[] = {"",         "Zg==",     "Zm8=",    "Zm9v",
                                      "Zm9vYg==", "Zm9vYmE=", "Zm9vYmFy"};
    static const char *const plain[] = {"", "f", "fo", "foo", "foob", "fooba", "foobar"};
    for (size_t i = 0; i < sizeof(enc) / sizeof(enc[0]); i++) {
        uint8_t out[16];
        size_t n = 99;
        assert_int_equal(dec(enc[i], 0, out, sizeof(out), &n, NULL), 0);
        assert_int_equal(n, strlen(plain[i]));
        assert_memory_equal(out, plain[i], n);
    }
    /* the whole alphabet: 0..63 in order */
    uint8_t out[48];
    size_t n;
    assert_int_equal(dec("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/", 0, out,
                         sizeof(out), &n, NULL),
                     0);
    assert_int_equal(n, 48);
    static const uint8_t first[] = {0x00, 0x10, 0x83, 0x10, 0x51, 0x87};
    assert_memory_equal(out, first, sizeof(first));
    assert_int_equal(out[45], 0xF3);
    assert_int_equal(out[46], 0xDF);
    assert_int_equal(out[47], 0xBF);
}

static void expect_fault(const char *s, unsigned flags, tern_base64_fault_t f, size_t at)
{
    uint8_t out[64];
    size_t n;
    tern_base64_err_t e;
    if (dec(s, flags, out, sizeof(out), &n, &e) != TERN_ESYNTAX)
        fail_msg("\"%s\" was accepted", s);
    assert_int_equal(e.fault, f);
    assert_int_equal(e.at, at);
    /* without err the answer is the same */
    assert_int_equal(dec(s, flags, out, sizeof(out), &n, NULL), TERN_ESYNTAX);
}

static void test_faults(void **state)
{
    (void)state;
    expect_fault("Zm9", 0, TERN_BASE64_LENGTH, 3);
    expect_fault("Zm9vY", 0, TERN_BASE64_LENGTH, 5);
    expect_fault("Zm!v", 0, TERN_BASE64_BAD_CHAR, 2);
    expect_fault("Zm-_", 0, TERN_BASE64_BAD_CHAR, 2); /* base64url is another alphabet */
    expect_fault("=m9v", 0, TERN_BASE64_PAD_EARLY, 0);
    expect_fault("Z=9v", 0, TERN_BASE64_PAD_EARLY, 1);
    expect_fault("Zm=v", 0, TERN_BASE64_AFTER_PAD, 3);
    expect_fault("Zg==Zg==", 0, TERN_BASE64_AFTER_PAD, 4);
    expect_fault("Zg===", 0, TERN_BASE64_AFTER_PAD, 4);
    expect_fault("Zg=", 0, TERN_BASE64_LENGTH, 3);
    expect_fault("====", 0, TERN_BASE64_PAD_EARLY, 0);
    /* the first '=' seen before the fault is reported too */
    tern_base64_err_t e;
    uint8_t out[8];
    size_t n;
    assert_int_equal(dec("Zm=*", 0, out, sizeof(out), &n, &e), TERN_ESYNTAX);
    assert_int_equal(e.fault, TERN_BASE64_BAD_CHAR);
    assert_int_equal(e.at, 3);
    assert_int_equal(e.pad_at, 2);
    assert_int_equal(dec("Zm9*", 0, out, sizeof(out), &n, &e), TERN_ESYNTAX);
    assert_int_equal(e.pad_at, SIZE_MAX);
}

static void test_blanks(void **state)
{
    (void)state;
    uint8_t out[16];
    size_t n;
    /* strict: a blank is a bad character */
    expect_fault("Zm9v YmFy", 0, TERN_BASE64_BAD_CHAR, 4);
    expect_fault("Zm9vYmFy\n", 0, TERN_BASE64_BAD_CHAR, 8);
    /* with TERN_BASE64_BLANKS: skipped anywhere, even inside a quantum or the padding */
    assert_int_equal(dec(" Zm\t9v\r\nYm E =\f\v", TERN_BASE64_BLANKS, out, sizeof(out), &n, NULL),
                     0);
    assert_int_equal(n, 5);
    assert_memory_equal(out, "fooba", 5);
    assert_int_equal(dec(" \n ", TERN_BASE64_BLANKS, out, sizeof(out), &n, NULL), 0);
    assert_int_equal(n, 0);
    /* faults are still found, at their offset in the input (blanks counted) */
    expect_fault("Zm 9", TERN_BASE64_BLANKS, TERN_BASE64_LENGTH, 4);
    expect_fault("Zg== Zg==", TERN_BASE64_BLANKS, TERN_BASE64_AFTER_PAD, 5);
    expect_fault("Z =9v", TERN_BASE64_BLANKS, TERN_BASE64_PAD_EARLY, 2);
    /* other control characters are not blanks */
    expect_fault("Zm9v\001", TERN_BASE64_BLANKS, TERN_BASE64_BAD_CHAR, 4);
}

static void test_cap(void **state)
{
    (void)state;
    /* nothing written past cap, the whole length still counted */
    uint8_t out[8];
    memset(out, 0xAA, sizeof(out));
    size_t n;
    assert_int_equal(dec("Zm9vYmFy", 0, out, 4, &n, NULL), 0);
    assert_int_equal(n, 6);
    assert_memory_equal(out, "foob", 4);
    assert_int_equal(out[4], 0xAA);
    assert_int_equal(dec("Zm9vYmFy", 0, NULL, 0, &n, NULL), 0);
    assert_int_equal(n, 6);
}

/* Random data through a reference encoder decodes back to itself, with and without blanks. */
static void test_round_trip(void **state)
{
    (void)state;
    static const char al[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    srand(28);
    for (int iter = 0; iter < 2000; iter++) {
        uint8_t data[64], out[64];
        size_t len = (size_t)rand() % sizeof(data);
        for (size_t i = 0; i < len; i++)
            data[i] = (uint8_t)rand();
        char enc[2 * 96];
        size_t e = 0;
        for (size_t i = 0; i < len; i += 3) {
            uint32_t v = (uint32_t)data[i] << 16 | (i + 1 < len ? data[i + 1] << 8 : 0) |
                         (i + 2 < len ? data[i + 2] : 0);
            enc[e++] = al[v >> 18 & 63];
            enc[e++] = al[v >> 12 & 63];
            enc[e++] = i + 1 < len ? al[v >> 6 & 63] : '=';
            enc[e++] = i + 2 < len ? al[v & 63] : '=';
            if (iter % 2 && e % 7 == 0)
                enc[e++] = ' ';
        }
        enc[e] = '\0';
        size_t n;
        assert_int_equal(dec(enc, iter % 2 ? TERN_BASE64_BLANKS : 0, out, sizeof(out), &n, NULL),
                         0);
        assert_int_equal(n, len);
        assert_memory_equal(out, data, len);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_vectors),    cmocka_unit_test(test_faults),
        cmocka_unit_test(test_blanks),     cmocka_unit_test(test_cap),
        cmocka_unit_test(test_round_trip),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
