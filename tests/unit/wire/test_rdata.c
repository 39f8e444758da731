/* test_rdata.c — RDATA layouts: which names compress, and the canonical form used to compare. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "tern/wire/rdata.h"
#include "tern/wire/rr.h"

static void test_layouts(void **state)
{
    (void)state;
    wire_rdata_layout_t l;
    assert_true(wire_rdata_layout(WIRE_T_MX, &l));
    assert_int_equal(l.head, 2);
    assert_int_equal(l.names, 1);
    assert_true(l.compress);
    assert_true(wire_rdata_layout(WIRE_T_SOA, &l));
    assert_int_equal(l.names, 2);
    assert_int_equal(l.tail, 20);
    /* named, but never compressed (RFC 3597 §4, RFC 6672 §2.5) */
    assert_true(wire_rdata_layout(WIRE_T_SRV, &l));
    assert_false(l.compress);
    assert_true(wire_rdata_layout(WIRE_T_DNAME, &l));
    assert_false(l.compress);
    assert_false(wire_rdata_layout(WIRE_T_TXT, &l));
    assert_false(wire_rdata_layout(WIRE_T_A, &l));
}

static void test_canon(void **state)
{
    (void)state;
    uint8_t out[64];
    /* MX 10 Mail.EXAMPLE.: the preference stays, the name is lowercased */
    static const uint8_t mx[] = "\x00\x0a\x04Mail\x07"
                                "EXAMPLE";
    wire_rdata_canon(WIRE_T_MX, mx, sizeof(mx), out);
    assert_memory_equal(out,
                        "\x00\x0a\x04mail\x07"
                        "example",
                        sizeof(mx));
    /* TXT is text: unchanged */
    static const uint8_t txt[] = "\x03"
                                 "ABC";
    wire_rdata_canon(WIRE_T_TXT, txt, 4, out);
    assert_memory_equal(out, txt, 4);
    /* an RDATA that is not its layout (a truncated name) is copied as it is */
    static const uint8_t bad[] = "\x00\x0a\x05Ma";
    wire_rdata_canon(WIRE_T_MX, bad, 5, out);
    assert_memory_equal(out, bad, 5);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_layouts),
        cmocka_unit_test(test_canon),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
