/* test_dname.c — wire names: validation, views and suffix hashes, case folding, printing. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "tern/common/err.h"
#include "tern/wire/dname.h"

#include "wire_test_util.h"

static void test_check_valid(void **state)
{
    (void)state;
    uint8_t n[300];
    size_t l = to_wire("www.example.com", n);
    assert_int_equal(dname_check(n, l), (int)l);
    assert_int_equal(dname_check(n, sizeof(n)), (int)l); /* stops at the root */
    uint8_t root[1] = {0};
    assert_int_equal(dname_check(root, 1), 1);
}

static void test_check_truncated(void **state)
{
    (void)state;
    uint8_t n[300];
    size_t l = to_wire("www.example.com", n);
    for (size_t cut = 0; cut < l; cut++)
        assert_int_equal(dname_check(n, cut), TERN_EMALF);
}

static void test_check_label_too_long(void **state)
{
    (void)state;
    uint8_t n[80] = {0};
    n[0] = 63;
    memset(n + 1, 'a', 63);
    n[64] = 0;
    assert_int_equal(dname_check(n, sizeof(n)), 65);
    n[0] = 64;
    memset(n + 1, 'a', 64);
    n[65] = 0;
    assert_int_equal(dname_check(n, sizeof(n)), TERN_EMALF);
}

static void test_check_pointer_and_reserved(void **state)
{
    (void)state;
    uint8_t ptr[] = {3, 'w', 'w', 'w', 0xC0, 12};
    assert_int_equal(dname_check(ptr, sizeof(ptr)), TERN_EMALF);
    uint8_t ext[] = {0x41, 0};
    assert_int_equal(dname_check(ext, sizeof(ext)), TERN_EMALF);
    uint8_t ext2[] = {0x80, 0};
    assert_int_equal(dname_check(ext2, sizeof(ext2)), TERN_EMALF);
}

/* 255 bytes is the limit, 256 is over. Built from 63-byte labels plus one to adjust. */
static size_t long_name(uint8_t *n, size_t total)
{
    size_t o = 0;
    while (total - o - 1 > 0) {
        size_t room = total - o - 1; /* bytes left before the root */
        size_t l = room > 64 ? 63 : room - 1;
        if (room > 64 && room - 64 < 2)
            l = 61; /* don't leave a remainder too small for a label */
        n[o] = (uint8_t)l;
        memset(n + o + 1, 'a' + (int)(o % 26), l);
        o += l + 1;
    }
    n[o++] = 0;
    return o;
}

static void test_check_name_length(void **state)
{
    (void)state;
    uint8_t n[300];
    size_t l = long_name(n, 255);
    assert_int_equal(l, 255);
    assert_int_equal(dname_check(n, sizeof(n)), 255);
    l = long_name(n, 256);
    assert_int_equal(l, 256);
    assert_int_equal(dname_check(n, sizeof(n)), TERN_EMALF);
    /* 127 one-byte labels + root = 255: the most labels a name can have */
    for (int i = 0; i < 127; i++) {
        n[2 * i] = 1;
        n[2 * i + 1] = 'x';
    }
    n[254] = 0;
    assert_int_equal(dname_check(n, sizeof(n)), 255);
    dname_view_t v;
    dname_view_init(&v, n);
    assert_int_equal(v.nlabels, 127);
    assert_int_equal(v.len, 255);
    assert_int_equal(v.off[127], 254);
}

static void test_view_offsets(void **state)
{
    (void)state;
    uint8_t n[300];
    to_wire("WWW.Example.COM", n);
    dname_view_t v;
    dname_view_init(&v, n);
    assert_int_equal(v.nlabels, 3);
    assert_int_equal(v.len, 17);
    assert_int_equal(v.off[0], 0);
    assert_int_equal(v.off[1], 4);
    assert_int_equal(v.off[2], 12);
    assert_int_equal(v.off[3], 16);
    uint8_t lc[300];
    to_wire("www.example.com", lc);
    assert_memory_equal(v.lc, lc, 17);

    dname_view_t r;
    uint8_t root[1] = {0};
    dname_view_init(&r, root);
    assert_int_equal(r.nlabels, 0);
    assert_int_equal(r.len, 1);
    assert_int_equal(r.hash[0], dname_hash(root));
}

/* hash[i] of a long name must equal the hash of that suffix on its own: the zone table finds
 * zones and enclosers by probing exactly these values. */
static void test_view_suffix_hashes(void **state)
{
    (void)state;
    const char *names[] = {"a.b.c.d.example.com", "www.example.com", "example.com", "com"};
    uint8_t n[300], s[300];
    dname_view_t v, sv;
    for (size_t k = 0; k < TERN_ARRAY_SIZE(names); k++) {
        to_wire(names[k], n);
        dname_view_init(&v, n);
        for (unsigned i = 0; i <= v.nlabels; i++) {
            memcpy(s, v.lc + v.off[i], v.len - v.off[i]);
            assert_int_equal(v.hash[i], dname_hash(s));
            dname_view_init(&sv, s);
            assert_int_equal(v.hash[i], sv.hash[0]);
        }
    }
    /* different names, different hashes (not guaranteed in general, but these must differ or
     * the hash is useless) */
    to_wire("example.com", n);
    to_wire("example.net", s);
    assert_int_not_equal(dname_hash(n), dname_hash(s));
    to_wire("ab.com", n);
    to_wire("a.bcom", s);
    assert_int_not_equal(dname_hash(n), dname_hash(s));
}

static void test_hash_case_insensitive(void **state)
{
    (void)state;
    uint8_t a[300], b[300];
    to_wire("WwW.ExAmPlE.CoM", a);
    to_wire("www.example.com", b);
    dname_view_t va, vb;
    dname_view_init(&va, a);
    dname_view_init(&vb, b);
    for (unsigned i = 0; i <= 3; i++)
        assert_int_equal(va.hash[i], vb.hash[i]);
    /* only ASCII folds (RFC 4343): 0xC4 and 0xE4 stay different */
    uint8_t c[] = {1, 0xC4, 0}, d[] = {1, 0xE4, 0};
    assert_int_not_equal(dname_hash(c), dname_hash(d));
    assert_false(dname_equal(c, d));
}

/* The view lowercases and hashes a word at a time: over random names of every byte value and
 * label length (including names of the full 255 bytes), its lowercased copy must equal the
 * byte-wise one, and every suffix hash the hash of that suffix on its own. */
static void test_view_random_names(void **state)
{
    (void)state;
    uint64_t x = 0x243F6A8885A308D3ull;
    for (int round = 0; round < 20000; round++) {
        uint8_t name[DNAME_MAXLEN + 16], lc[DNAME_MAXLEN];
        size_t pos = 0;
        size_t budget = round % 3 == 0 ? DNAME_MAXLEN - 1 : (size_t)(x % (DNAME_MAXLEN - 1));
        while (pos + 2 <= budget) {
            x = x * 6364136223846793005ull + 1442695040888963407ull;
            size_t l = 1 + (size_t)(x >> 33) % DNAME_MAXLABEL;
            if (pos + 1 + l > budget)
                l = budget - pos - 1;
            if (l == 0)
                break;
            name[pos++] = (uint8_t)l;
            for (size_t i = 0; i < l; i++) {
                x = x * 6364136223846793005ull + 1442695040888963407ull;
                name[pos++] = (uint8_t)(x >> 56);
            }
        }
        name[pos] = 0;
        memset(name + pos + 1, 0xAA, 8); /* what follows must not matter */
        assert_int_equal(dname_check(name, pos + 1), (int)pos + 1);
        dname_view_t v;
        dname_view_init(&v, name);
        assert_int_equal(dname_lower(lc, name), pos + 1);
        assert_memory_equal(v.lc, lc, pos + 1);
        for (unsigned i = 0; i <= v.nlabels; i++)
            assert_int_equal(v.hash[i], dname_hash(lc + v.off[i]));
    }
}

static void test_lower(void **state)
{
    (void)state;
    uint8_t n[300], lc[300], want[300];
    size_t l = to_wire("Mixed-CASE.Example.ORG", n);
    to_wire("mixed-case.example.org", want);
    memset(lc, 0xAA, sizeof(lc));
    assert_int_equal(dname_lower(lc, n), l);
    assert_memory_equal(lc, want, l);
    assert_int_equal(lc[l], 0xAA); /* nothing past the name */
    assert_int_equal(dname_len(n), l);
    assert_int_equal(dname_labels(n), 3);
}

static void test_equal(void **state)
{
    (void)state;
    uint8_t a[300], b[300];
    to_wire("Example.COM", a);
    to_wire("example.com", b);
    assert_true(dname_equal(a, b));
    to_wire("example.co", b);
    assert_false(dname_equal(a, b));
    to_wire("example.com.x", b);
    assert_false(dname_equal(a, b));
    to_wire("exampl.ecom", b);
    assert_false(dname_equal(a, b));
}

static void test_subdomain(void **state)
{
    (void)state;
    uint8_t n[300], p[300];
    to_wire("www.Example.com", n);
    to_wire("example.COM", p);
    assert_true(dname_is_subdomain(n, p));
    assert_true(dname_is_subdomain(p, p));
    assert_false(dname_is_subdomain(p, n));
    to_wire("ample.com", p);
    assert_false(dname_is_subdomain(n, p)); /* label boundaries, not string suffixes */
    uint8_t root[1] = {0};
    assert_true(dname_is_subdomain(n, root));
    assert_false(dname_is_subdomain(root, p));
}

static void test_to_str(void **state)
{
    (void)state;
    char s[300];
    uint8_t root[1] = {0};
    assert_int_equal(dname_to_str(root, s, sizeof(s)), 1);
    assert_string_equal(s, ".");

    uint8_t n[300];
    to_wire("www.Example.com", n);
    assert_int_equal(dname_to_str(n, s, sizeof(s)), 16);
    assert_string_equal(s, "www.Example.com.");

    /* a dot inside a label, a space, a backslash and a non-ASCII byte */
    uint8_t e[] = {4, 'a', '.', 'b', ' ', 2, '\\', 0xFF, 0};
    int l = dname_to_str(e, s, sizeof(s));
    assert_string_equal(s, "a\\.b\\032.\\\\\\255.");
    assert_int_equal(l, (int)strlen(s));

    /* too small: ENOSPC, still terminated and within the buffer */
    char small[6];
    memset(small, 'Z', sizeof(small));
    assert_int_equal(dname_to_str(n, small, sizeof(small)), TERN_ENOSPC);
    assert_string_equal(small, "www.E");
    assert_int_equal(dname_to_str(n, small, 0), TERN_ENOSPC);
}

static void test_from_str(void **state)
{
    (void)state;
    uint8_t w[DNAME_MAXLEN];
    const char *why = NULL;
    /* absolute with or without the final dot, escapes resolved */
    assert_int_equal(dname_from_str("a\\.b.\\101x", 10, false, w, &why), 8);
    assert_memory_equal(w, "\3a.b\2ex\0", 8); /* \\DDD is decimal */
    assert_int_equal(dname_from_str("example.test.", 13, false, w, &why), 14);
    assert_int_equal(dname_from_str(".", 1, false, w, &why), 1);
    assert_int_equal(w[0], 0);
    /* relative: labels only */
    assert_int_equal(dname_from_str("www", 3, true, w, &why), 4);
    assert_int_equal(dname_from_str("www.", 4, true, w, &why), TERN_ESYNTAX);
    assert_string_equal(why, "a label of the zone is relative: no final dot");
    assert_int_equal(dname_from_str("a..b", 4, false, w, &why), TERN_ESYNTAX);
    assert_string_equal(why, "empty label in name");
    assert_int_equal(dname_from_str("\\25x", 4, false, w, &why), TERN_ESYNTAX);
    assert_int_equal(dname_from_str("\\256", 4, false, w, &why), TERN_ESYNTAX);
    assert_int_equal(dname_from_str("", 0, false, w, &why), TERN_ESYNTAX);
    char big[300];
    memset(big, 'a', 64);
    assert_int_equal(dname_from_str(big, 64, false, w, &why), TERN_ESYNTAX);
    assert_string_equal(why, "label longer than 63 bytes");
    for (int i = 0; i < 130; i++) {
        big[2 * i] = 'a';
        big[2 * i + 1] = '.';
    }
    assert_int_equal(dname_from_str(big, 260, false, w, &why), TERN_ESYNTAX);
    assert_string_equal(why, "name longer than 255 bytes");
}

static void test_key(void **state)
{
    (void)state;
    char k1[DNAME_KEY_MAX], k2[DNAME_KEY_MAX], k3[DNAME_KEY_MAX];
    const char *why = NULL;
    /* one zone, three spellings, one key */
    assert_int_equal(dname_key("Example.TEST.", k1, sizeof(k1), &why), 12);
    assert_int_equal(dname_key("example.test", k2, sizeof(k2), &why), 12);
    assert_int_equal(dname_key("\\101xample.test.", k3, sizeof(k3), &why), 12);
    assert_string_equal(k1, "example.test");
    assert_string_equal(k2, k1);
    assert_string_equal(k3, k1);
    assert_int_equal(dname_key(".", k1, sizeof(k1), &why), 1);
    assert_string_equal(k1, ".");
    /* a control character is escaped: a key is safe in a log line */
    assert_true(dname_key("a\\010b.test", k1, sizeof(k1), &why) > 0);
    assert_string_equal(k1, "a\\010b.test");
    assert_int_equal(dname_key("a..test", k1, sizeof(k1), &why), TERN_ESYNTAX);
}

/* ---- dname_unpack(): names inside a message ---- */

/* A message: 12 header bytes, then "Www.Example.test." at 12, then the bytes of tail. */
static size_t unpack_msg(uint8_t *m, const uint8_t *tail, size_t tail_len)
{
    memset(m, 0, 12);
    size_t n = 12 + to_wire("Www.Example.test", m + 12);
    memcpy(m + n, tail, tail_len);
    return n + tail_len;
}

static void test_unpack_plain_and_compressed(void **state)
{
    (void)state;
    uint8_t m[512], out[DNAME_MAXLEN], want[DNAME_MAXLEN];
    /* at 30: "mail" + a pointer to "Example.test" (16); at 37: a pointer to 30 (a chain) */
    static const uint8_t tail[] = {4, 'm', 'a', 'i', 'l', 0xC0, 16, 0xC0, 30};
    size_t len = unpack_msg(m, tail, sizeof(tail));
    size_t pos = 12;
    size_t wl = to_wire("Www.Example.test", want);
    assert_int_equal(dname_unpack(m, len, len, &pos, out, NULL), (int)wl);
    assert_memory_equal(out, want, wl); /* case kept */
    assert_int_equal(pos, 30);
    wl = to_wire("mail.Example.test", want);
    assert_int_equal(dname_unpack(m, len, len, &pos, out, NULL), (int)wl);
    assert_memory_equal(out, want, wl);
    assert_int_equal(pos, 37); /* past the name's own bytes: the pointer, not what it leads to */
    assert_int_equal(dname_unpack(m, len, len, &pos, out, NULL), (int)wl);
    assert_int_equal(pos, 39);
    /* without out: only the length and the position */
    pos = 30;
    assert_int_equal(dname_unpack(m, len, len, &pos, NULL, NULL), (int)wl);
    /* the root */
    uint8_t r[13] = {0};
    pos = 12;
    assert_int_equal(dname_unpack(r, 13, 13, &pos, out, NULL), 1);
    assert_int_equal(out[0], 0);
    assert_int_equal(pos, 13);
}

static void expect_fault(const uint8_t *m, size_t len, size_t end, size_t at, dname_fault_t f)
{
    size_t pos = at;
    dname_unpack_err_t e = {0};
    uint8_t out[DNAME_MAXLEN];
    assert_int_equal(dname_unpack(m, len, end, &pos, out, &e), TERN_EMALF);
    assert_int_equal(e.fault, f);
    /* without err or out the answer is the same */
    pos = at;
    assert_int_equal(dname_unpack(m, len, end, &pos, NULL, NULL), TERN_EMALF);
}

static void test_unpack_truncated(void **state)
{
    (void)state;
    uint8_t m[512];
    static const uint8_t tail[] = {4, 'm', 'a', 'i', 'l', 0xC0, 16};
    size_t len = unpack_msg(m, tail, sizeof(tail));
    /* every cut of either name, and of the pointer */
    for (size_t cut = 12; cut < len; cut++) {
        size_t pos = cut < 30 ? 12 : 30;
        if (cut <= pos && pos == 30)
            continue;
        expect_fault(m, cut, cut, pos, DNAME_FAULT_TRUNCATED);
    }
    /* the name's own bytes must end by end, even when the message goes on */
    expect_fault(m, len, len - 1, 30, DNAME_FAULT_TRUNCATED);
    expect_fault(m, len, 32, 30, DNAME_FAULT_TRUNCATED);
    /* the first name of a message pointing at itself */
    uint8_t p[20] = {0};
    p[12] = 0xC0;
    p[13] = 12;
    expect_fault(p, 14, 14, 12, DNAME_FAULT_PTR_FORWARD);
    /* a pointer leading to a name that runs off the message */
    uint8_t q[20] = {0};
    q[12] = 5;
    q[13] = 'a';
    q[14] = 0xC0;
    q[15] = 12;
    expect_fault(q, 16, 16, 14, DNAME_FAULT_TRUNCATED);
}

static void test_unpack_hostile_pointers(void **state)
{
    (void)state;
    uint8_t m[512];
    size_t len;
    /* at 30: forward (to 32), itself, into the header, a label then back to its own start */
    static const uint8_t fwd[] = {0xC0, 32, 0};
    len = unpack_msg(m, fwd, sizeof(fwd));
    expect_fault(m, len, len, 30, DNAME_FAULT_PTR_FORWARD);
    static const uint8_t self[] = {0xC0, 30};
    len = unpack_msg(m, self, sizeof(self));
    expect_fault(m, len, len, 30, DNAME_FAULT_PTR_FORWARD);
    static const uint8_t hdr[] = {0xC0, 4};
    len = unpack_msg(m, hdr, sizeof(hdr));
    size_t pos = 30;
    dname_unpack_err_t e;
    assert_int_equal(dname_unpack(m, len, len, &pos, NULL, &e), TERN_EMALF);
    assert_int_equal(e.fault, DNAME_FAULT_PTR_HEADER);
    assert_int_equal(e.at, 30);
    assert_int_equal(e.to, 4);
    static const uint8_t loop[] = {1, 'x', 0xC0, 30};
    len = unpack_msg(m, loop, sizeof(loop));
    expect_fault(m, len, len, 30, DNAME_FAULT_PTR_FORWARD);
    /* two names pointing at each other: 30 -> 34 -> 30 */
    static const uint8_t two[] = {1, 'a', 0xC0, 34, 1, 'b', 0xC0, 30};
    len = unpack_msg(m, two, sizeof(two));
    expect_fault(m, len, len, 30, DNAME_FAULT_PTR_FORWARD);
    expect_fault(m, len, len, 34, DNAME_FAULT_PTR_FORWARD);
    /* a reserved label type */
    static const uint8_t rsv[] = {0x80, 12};
    len = unpack_msg(m, rsv, sizeof(rsv));
    pos = 30;
    assert_int_equal(dname_unpack(m, len, len, &pos, NULL, &e), TERN_EMALF);
    assert_int_equal(e.fault, DNAME_FAULT_LABEL);
    assert_int_equal(e.label, 0x80);
    static const uint8_t ext[] = {0x41, 'a', 0};
    len = unpack_msg(m, ext, sizeof(ext));
    expect_fault(m, len, len, 30, DNAME_FAULT_LABEL);
}

static void test_unpack_hops_and_length(void **state)
{
    (void)state;
    /* a chain of DNAME_PTR_HOPS_MAX pointers, each to the one before, ends at the root: read;
     * one more hop is refused */
    uint8_t m[12 + 1 + 2 * (DNAME_PTR_HOPS_MAX + 1)];
    memset(m, 0, sizeof(m));
    size_t p = 13; /* the root at 12 */
    size_t prev = 12;
    for (unsigned i = 0; i <= DNAME_PTR_HOPS_MAX; i++) {
        m[p] = (uint8_t)(0xC0 | prev >> 8);
        m[p + 1] = (uint8_t)prev;
        prev = p;
        p += 2;
    }
    size_t pos = prev - 2;
    assert_int_equal(dname_unpack(m, sizeof(m), sizeof(m), &pos, NULL, NULL), 1);
    assert_int_equal(pos, prev);
    expect_fault(m, sizeof(m), sizeof(m), prev, DNAME_FAULT_PTR_HOPS);

    /* 255 bytes is the most: four labels of 63 (256 with the root) are refused, also when
     * made with a pointer */
    uint8_t b[600] = {0};
    size_t n = 12;
    for (int l = 0; l < 3; l++) {
        b[n++] = 63;
        memset(b + n, 'x', 63);
        n += 63;
    }
    b[n++] = 0;
    size_t second = n;
    b[n++] = 61;
    memset(b + n, 'y', 61);
    n += 61;
    b[n++] = 0xC0;
    b[n++] = 12;
    pos = second;
    uint8_t out[DNAME_MAXLEN];
    assert_int_equal(dname_unpack(b, n, n, &pos, out, NULL), 255);
    b[second] = 62;
    memmove(b + second + 63, b + second + 62, 2);
    b[second + 62] = 'y';
    n++;
    expect_fault(b, n, n, second, DNAME_FAULT_TOO_LONG);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_check_valid),
        cmocka_unit_test(test_check_truncated),
        cmocka_unit_test(test_check_label_too_long),
        cmocka_unit_test(test_check_pointer_and_reserved),
        cmocka_unit_test(test_check_name_length),
        cmocka_unit_test(test_view_offsets),
        cmocka_unit_test(test_view_suffix_hashes),
        cmocka_unit_test(test_hash_case_insensitive),
        cmocka_unit_test(test_view_random_names),
        cmocka_unit_test(test_lower),
        cmocka_unit_test(test_equal),
        cmocka_unit_test(test_subdomain),
        cmocka_unit_test(test_to_str),
        cmocka_unit_test(test_from_str),
        cmocka_unit_test(test_key),
        cmocka_unit_test(test_unpack_plain_and_compressed),
        cmocka_unit_test(test_unpack_truncated),
        cmocka_unit_test(test_unpack_hostile_pointers),
        cmocka_unit_test(test_unpack_hops_and_length),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
