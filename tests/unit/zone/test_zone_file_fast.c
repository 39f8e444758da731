/*
 * test_zone_file_fast.c — the master-file fast path (src/zone/zone_file_fast.c) against ldns,
 * the judge: every entry it accepts must be one ldns reads, and read to the same owner, type,
 * class, TTL and RDATA. The corpus: hand-picked forms (whitespace, case, TTLs, classes, "@",
 * relative and absolute names, quoting, numbers at their limits) and some thousands of entries
 * built from random combinations of them. Entries it declines are ldns's anyway (zone_file.c).
 */
#include <ldns/ldns.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <setjmp.h>
#include <cmocka.h>

#include "zone_file_fast.h"

static ldns_rdf *origin_rdf, *prev_rdf;

static int setup(void **state)
{
    (void)state;
    origin_rdf = ldns_dname_new_frm_str("Example.Test.");
    prev_rdf = ldns_dname_new_frm_str("prev.example.test.");
    return origin_rdf && prev_rdf ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    ldns_rdf_deep_free(origin_rdf);
    ldns_rdf_deep_free(prev_rdf);
    return 0;
}

static bool same_owner(const ldns_rdf *o, const zone_file_fast_rec_t *r)
{
    return ldns_rdf_size(o) <= sizeof(r->owner) &&
           memcmp(ldns_rdf_data(o), r->owner, ldns_rdf_size(o)) == 0;
}

/* e through both readers with default TTL def: whether the fast path took it. Fails the test
 * when it took one ldns refuses or reads differently. */
static bool same_as_ldns(const char *e, uint32_t def)
{
    static zone_file_fast_rec_t r;
    bool fast = zone_file_fast(e, ldns_rdf_data(origin_rdf), ldns_rdf_data(prev_rdf), def, &r);
    if (!fast)
        return false;
    ldns_rdf *prev = ldns_rdf_clone(prev_rdf);
    ldns_rr *rr = NULL;
    /* as zone_file.c's record() calls it: ldns would put its own 3600 for a default of 0 */
    ldns_status st = ldns_rr_new_frm_str(&rr, e, def ? def : UINT32_MAX, origin_rdf, &prev);
    if (st != LDNS_STATUS_OK)
        fail_msg("fast path took '%s', which ldns refuses: %s", e, ldns_get_errorstr_by_id(st));
    ldns_buffer *b = ldns_buffer_new(512);
    assert_non_null(b);
    assert_int_equal(ldns_rr_rdata2buffer_wire(b, rr), LDNS_STATUS_OK);
    const ldns_rdf *o = ldns_rr_owner(rr);
    uint32_t ttl = ldns_rr_ttl(rr) == UINT32_MAX ? 0 : ldns_rr_ttl(rr);
    bool same = same_owner(o, &r) && ldns_rr_get_type(rr) == r.type &&
                ldns_rr_get_class(rr) == LDNS_RR_CLASS_IN && ttl == r.ttl &&
                ldns_buffer_position(b) == r.rdlen &&
                memcmp(ldns_buffer_begin(b), r.rdata, r.rdlen) == 0;
    /* ldns moves its previous owner to every owner given; the fast path's caller does too */
    bool prev_same =
        !r.owner_given || (ldns_rdf_size(prev) == ldns_rdf_size(o) &&
                           memcmp(ldns_rdf_data(prev), r.owner, ldns_rdf_size(o)) == 0);
    if (!same || !prev_same)
        fail_msg("fast path reads '%s' differently from ldns (owner %s, type %u/%u, ttl %u/%u, "
                 "rdlen %zu/%u, previous owner %s)",
                 e, same_owner(o, &r) ? "same" : "differs", (unsigned)ldns_rr_get_type(rr), r.type,
                 ttl, r.ttl, ldns_buffer_position(b), r.rdlen, prev_same ? "same" : "differs");
    ldns_buffer_free(b);
    ldns_rr_free(rr);
    ldns_rdf_deep_free(prev);
    return true;
}

/* Forms the fast path takes: each must equal ldns. */
static void test_taken_equal_ldns(void **state)
{
    (void)state;
    static const char *const taken[] = {
        "www A 192.0.2.1",
        "www 300 IN A 192.0.2.1",
        "www\t300\tIN\tA\t192.0.2.1",
        "www   300   in   a   192.0.2.1",
        "www IN A 192.0.2.1",
        "www 300 A 192.0.2.1",
        " A 192.0.2.2",
        "\t300 IN A 192.0.2.2",
        "@ A 192.0.2.3",
        "@ 60 IN NS ns1",
        "Mixed.Case.example.test. AAAA 2001:db8::1",
        "v6 AAAA ::ffff:192.0.2.1",
        "v6 AAAA 2001:DB8:0:0:0:0:0:1",
        "alias CNAME target",
        "alias CNAME target.elsewhere.",
        "alias CNAME @",
        "alias CnAmE Target.Example.Test.",
        "ptr PTR host.example.net.",
        "mail MX 10 mx1",
        "mail MX 0 .",
        "mail MX 65535 mx.example.net.",
        "mail MX 00010 mx1",
        "_sip._tcp SRV 10 60 5060 sip",
        "_sip._tcp SRV 0 0 0 .",
        "txt TXT \"v=spf1 include:_spf.example.test ~all\" \"site-verification=abc\"",
        "txt TXT bare",
        "txt TXT bare \"quoted string\" bare2",
        "txt TXT \"\"",
        "txt TXT \"semi;colon inside\"",
        "txt 0 IN TXT \"x\"",
        "www 999999999 A 192.0.2.1",
        "www 0123 A 192.0.2.1",
        "www A 192.0.2.1 ",
        "www A 192.0.2.1\t",
        "deep.er.name.below NS ns.provider.example.",
    };
    for (size_t i = 0; i < sizeof(taken) / sizeof(taken[0]); i++)
        if (!same_as_ldns(taken[i], 3600))
            fail_msg("fast path declined '%s'", taken[i]);
    assert_true(same_as_ldns("www A 192.0.2.1", 0));
    assert_true(same_as_ldns(" A 192.0.2.1", 86400));
}

/* Forms left to ldns: the fast path must decline each (ldns reads or refuses them itself). */
static void test_declined(void **state)
{
    (void)state;
    static const char *const declined[] = {
        "www 1h A 192.0.2.1",         /* TTL units */
        "www 1234567890 A 192.0.2.1", /* 10 digits */
        "www CH A 192.0.2.1",         /* class */
        "www IN 300 A 192.0.2.1",     /* class before TTL: ldns reads no such thing */
        "www A 192.0.2.256",          /* not an address */
        "www A 192.0.2.1 192.0.2.2",  /* superfluous text */
        "www A",                      /* missing */
        "www AAAA 192.0.2.1",         /* not IPv6 */
        "w\\.x A 192.0.2.1",          /* escape */
        "www CNAME a..b",             /* empty label */
        "mail MX 65536 mx1",          /* ldns wraps it silently: its call */
        "mail MX -1 mx1",
        "mail MX 10",
        "_sip._tcp SRV 10 60 5060",
        "txt TXT \"unterminated",
        "txt TXT \"glued\"text",
        "txt TXT bare\"quote",
        "txt TXT \"a\\\"b\"",
        "www TYPE1 \\# 4 c0000201",
        "www HINFO cpu os",
        "www ANAME target",
        "",
        " ",
    };
    static zone_file_fast_rec_t r;
    for (size_t i = 0; i < sizeof(declined) / sizeof(declined[0]); i++)
        if (zone_file_fast(declined[i], ldns_rdf_data(origin_rdf), ldns_rdf_data(prev_rdf), 3600,
                           &r))
            fail_msg("fast path took '%s'", declined[i]);
    /* a blank owner with no previous one: ldns decides (the origin) */
    assert_false(zone_file_fast(" A 192.0.2.1", ldns_rdf_data(origin_rdf), NULL, 3600, &r));
    /* a string longer than 255 bytes */
    char big[400];
    memset(big, 'x', sizeof(big));
    memcpy(big, "t TXT ", 6);
    big[sizeof(big) - 1] = 0;
    assert_false(zone_file_fast(big, ldns_rdf_data(origin_rdf), NULL, 3600, &r));
}

/* Random entries from the parts of the forms above: whatever the fast path takes equals ldns,
 * and it takes most plain ones (a fast path that declines everything would pass the rest). */
static void test_random_entries(void **state)
{
    (void)state;
    static const char *const owners[] = {
        "",  "@",         "www",    "Www.Sub", "a-b.c", "abs.example.net.",
        "x", "_srv._tcp", "*.wild", "w\\.x"};
    static const char *const ttls[] = {"", "0", "60", "3600", "86400", "1h", "007", "4294967295"};
    static const char *const classes[] = {"", "IN", "in", "CH"};
    static const char *const rdatas[] = {"A 192.0.2.9",
                                         "a 10.0.0.1",
                                         "A 1.2.3",
                                         "AAAA 2001:db8::9",
                                         "aaaa ::1",
                                         "NS ns1",
                                         "NS ns1.example.net.",
                                         "CNAME @",
                                         "CNAME t.",
                                         "PTR p",
                                         "MX 5 mx",
                                         "MX 70000 mx",
                                         "SRV 1 2 3 t",
                                         "SRV 1 2 t",
                                         "TXT \"a b\"",
                                         "TXT a b c",
                                         "TXT \"\" x",
                                         "TXT \"x\"\"y\"",
                                         "HINFO a b",
                                         "A 192.0.2.1 extra"};
    static const char *const blanks[] = {" ", "\t", "  ", " \t "};
    unsigned seed = 20261206;
    size_t taken = 0, total = 4000;
    char e[512];
    for (size_t i = 0; i < total; i++) {
        seed = seed * 1103515245u + 12345u;
        unsigned x = seed >> 8;
        const char *b = blanks[x % 4];
        const char *o = owners[(x / 4) % 10];
        const char *t = ttls[(x / 40) % 8];
        const char *c = classes[(x / 320) % 4];
        const char *r = rdatas[(x / 1280) % 20];
        int n = snprintf(e, sizeof(e), "%s%s%s%s%s%s%s", o, b, t, *t ? b : "", c, *c ? b : "", r);
        if ((x / 25600) % 5 == 0 && n + 2 < (int)sizeof(e))
            strcat(e, b); /* trailing blanks */
        uint32_t def = (x / 128000) % 2 ? 3600 : 0;
        if (same_as_ldns(e, def))
            taken++;
    }
    print_message("fast path took %zu of %zu random entries\n", taken, total);
    assert_true(taken > total / 4);
}

/* TERN_FAST_CORPUS=FILE (optional, by hand): every line of a master file without directives
 * or parentheses (bench/gen_zone.py's) through both readers, with $ORIGIN-relative names taken
 * against the test's origin. */
static void test_corpus_file(void **state)
{
    (void)state;
    const char *path = getenv("TERN_FAST_CORPUS");
    if (!path)
        skip();
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    char line[4096];
    size_t taken = 0, total = 0;
    while (fgets(line, sizeof(line), f)) {
        line[strcspn(line, "\n")] = 0;
        if (line[0] == '$' || line[0] == ';' || !line[0])
            continue;
        total++;
        taken += same_as_ldns(line, 3600);
    }
    fclose(f);
    print_message("fast path took %zu of %zu entries of %s\n", taken, total, path);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_taken_equal_ldns),
        cmocka_unit_test(test_declined),
        cmocka_unit_test(test_random_entries),
        cmocka_unit_test(test_corpus_file),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
