/*
 * test_aname_state.c — the ANAME state file: what aname_state_format() writes reads back the
 * same; every kind of damage (cut short, a bad field, out of order, a wrong count, another
 * version, not text) is refused whole with the file's name and the line at fault.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "test_util.h"

#include "tern/common/err.h"
#include "tern/source/aname_state.h"
#include "tern/wire/rr.h"
#include "tern/zone/aname_results.h"

static char dir[256], path[300];

static int setup(void **state)
{
    (void)state;
    tu_mkdtemp(dir, sizeof(dir), "tern-aname-state");
    snprintf(path, sizeof(path), "%s/aname.state", dir);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    tu_rmtree(dir);
    return 0;
}

static aname_state_entry_t entry(const char *name, uint16_t qtype, uint8_t st, uint32_t ttl,
                                 uint8_t *rdata, uint16_t count)
{
    aname_state_entry_t e = {.qtype = qtype, .state = st, .ttl = ttl, .confirmed = 1700000000};
    const char *why;
    int n = dname_from_str(name, strlen(name), false, e.name, &why);
    assert_true(n > 0);
    e.len = (uint8_t)n;
    e.count = count;
    e.rdata = rdata;
    e.rdata_len = (uint32_t)count * (qtype == WIRE_T_A ? 6 : 18);
    return e;
}

static void test_round_trip(void **state)
{
    (void)state;
    uint8_t a[] = {0, 4, 192, 0, 2, 1, 0, 4, 192, 0, 2, 2};
    uint8_t aaaa[18] = {0, 16, 0x20, 0x01, 0x0d, 0xb8};
    aname_state_entry_t in[] = {
        entry("a\\032b.test.", WIRE_T_A, ANAME_OK, 300, a, 2),
        entry("a\\032b.test.", WIRE_T_AAAA, ANAME_OK, 60, aaaa, 1),
        entry("gone.test.", WIRE_T_A, ANAME_NXDOMAIN, 5, NULL, 0),
        entry("gone.test.", WIRE_T_AAAA, ANAME_NODATA, 0, NULL, 0),
    };
    tern_buf_t b;
    tern_buf_init(&b, 0);
    aname_state_format(&b, in, 4);
    assert_false(b.failed);
    assert_non_null(strstr(b.p, "a\\032b.test. A ok 300 1700000000 192.0.2.1 192.0.2.2\n"));
    tu_write_file(dir, "aname.state", b.p);
    tern_buf_free(&b);

    aname_state_entry_t *out = NULL;
    size_t n = 0;
    char err[512] = "";
    assert_int_equal(aname_state_read(path, &out, &n, err, sizeof(err)), 0);
    assert_int_equal(n, 4);
    for (size_t i = 0; i < n; i++) {
        assert_int_equal(out[i].len, in[i].len);
        assert_memory_equal(out[i].name, in[i].name, in[i].len);
        assert_int_equal(out[i].qtype, in[i].qtype);
        assert_int_equal(out[i].state, in[i].state);
        assert_int_equal(out[i].ttl, in[i].ttl);
        assert_int_equal(out[i].confirmed, in[i].confirmed);
        assert_int_equal(out[i].count, in[i].count);
        assert_int_equal(out[i].rdata_len, in[i].rdata_len);
        if (in[i].rdata_len)
            assert_memory_equal(out[i].rdata, in[i].rdata, in[i].rdata_len);
    }
    aname_state_free(out, n);

    unlink(path);
    assert_int_equal(aname_state_read(path, &out, &n, err, sizeof(err)), TERN_ENOENT);
}

/* Each damaged file is refused with "path: line N: ..." naming the line given. */
static void test_damage(void **state)
{
    (void)state;
    static const struct {
        const char *text;
        unsigned line;
        const char *why;
    } cases[] = {
        {"", 1, "empty file"},
        {"# only a comment\n", 2, "empty file"},
        {"tern-aname-state 2\nend 0\n", 1, "version"},
        {"something else\n", 1, "not a tern ANAME state file"},
        {"tern-aname-state 1\nx.test. A ok 60 1700000000 192.0.2.1\n", 3, "truncated"},
        {"tern-aname-state 1\nx.test. A ok 60 1700000000 192.0.2.1\nend 1", 3, "truncated"},
        {"tern-aname-state 1\nx.test. A ok 60 1700000000 192.0.2.1\nend 2\n", 3, "count"},
        {"tern-aname-state 1\nx.test. MX ok 60 1700000000 192.0.2.1\nend 1\n", 2, "type"},
        {"tern-aname-state 1\nx.test. A maybe 60 1700000000 192.0.2.1\nend 1\n", 2, "state"},
        {"tern-aname-state 1\nx.test. A ok -1 1700000000 192.0.2.1\nend 1\n", 2, "TTL"},
        {"tern-aname-state 1\nx.test. A ok 4294967295 1700000000 192.0.2.1\nend 1\n", 2, "TTL"},
        {"tern-aname-state 1\nx.test. A ok 60 0 192.0.2.1\nend 1\n", 2, "time"},
        {"tern-aname-state 1\nx.test. A ok 60 1700000000\nend 1\n", 2, "without an address"},
        {"tern-aname-state 1\nx.test. A nodata 60 1700000000 192.0.2.1\nend 1\n", 2, "beside"},
        {"tern-aname-state 1\nx.test. A ok 60 1700000000 2001:db8::1\nend 1\n", 2, "IPv4"},
        {"tern-aname-state 1\nx.test. AAAA ok 60 1700000000 192.0.2.1\nend 1\n", 2, "IPv6"},
        {"tern-aname-state 1\nx..test. A ok 60 1700000000 192.0.2.1\nend 1\n", 2, "label"},
        {"tern-aname-state 1\nx.test. A ok 60\nend 1\n", 2, "want"},
        {"tern-aname-state 1\nx.test. AAAA nodata 60 1700000000\n"
         "x.test. A nodata 60 1700000000\nend 2\n",
         3, "order"},
        {"tern-aname-state 1\nx.test. A nodata 60 1700000000\n"
         "X.test. A nodata 60 1700000000\nend 2\n",
         3, "twice"},
        {"tern-aname-state 1\nend 0\nx.test. A nodata 60 1700000000\n", 3, "after the end"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        tu_write_file(dir, "aname.state", cases[i].text);
        aname_state_entry_t *out = (aname_state_entry_t *)1;
        size_t n = 7;
        char err[512] = "", want[400];
        int rc = aname_state_read(path, &out, &n, err, sizeof(err));
        snprintf(want, sizeof(want), "%s: line %u: ", path, cases[i].line);
        if (rc >= 0 || strncmp(err, want, strlen(want)) != 0 || !strstr(err, cases[i].why))
            fail_msg("case %zu: rc %d, \"%s\"; want \"%s...%s\"", i, rc, err, want, cases[i].why);
        assert_null(out);
        assert_int_equal(n, 0);
    }
    /* not text */
    static const char nul[] = "tern-aname-state 1\n\0end 0\n";
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(nul, 1, sizeof(nul) - 1, f), sizeof(nul) - 1);
    fclose(f);
    aname_state_entry_t *out;
    size_t n;
    char err[512] = "";
    assert_true(aname_state_read(path, &out, &n, err, sizeof(err)) < 0);
    assert_non_null(strstr(err, "NUL"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_damage),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
