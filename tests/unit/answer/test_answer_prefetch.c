/*
 * test_answer_prefetch.c — a batch answered in halves (wire_parse_query() for every query, then
 * answer_prefetch(), then answer_parsed() for each) gives every response byte for byte as
 * answer_query() does, whatever the bytes: every packet sits at the end of a buffer of exactly
 * its length, so AddressSanitizer sees a read one byte too far.
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

#include "answer_test_util.h"
#include "zone/zone_test_util.h"
#include "tern/answer/answer.h"
#include "tern/common/err.h"
#include "tern/zone/zone_file.h"
#include "tern/zone/zone_table.h"

static answer_ctx_t ctx;
static const answer_config_t cfg = {.edns_max_udp = ANSWER_EDNS_DEFAULT};

/* A query for name (dotted, "." for the root) and qtype, id 0x1234, RD, optional EDNS. */
static size_t mkquery(uint8_t *buf, const char *name, uint16_t qtype, bool edns)
{
    static const uint8_t head[12] = {0x12, 0x34, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0};
    memcpy(buf, head, 12);
    size_t p = 12 + wire_name(buf + 12, name);
    buf[p++] = (uint8_t)(qtype >> 8);
    buf[p++] = (uint8_t)qtype;
    buf[p++] = 0;
    buf[p++] = 1;
    if (edns) {
        buf[11] = 1;
        static const uint8_t opt[11] = {0, 0, 41, 0x04, 0xd0, 0, 0, 0, 0, 0, 0};
        memcpy(buf + p, opt, sizeof(opt));
        p += sizeof(opt);
    }
    return p;
}

/* The batch as the worker has it, each packet at the very end of its own allocation. */
typedef struct {
    unsigned n;
    uint8_t *mem[ANSWER_PREFETCH_MAX + 8];
    const uint8_t *pkt[ANSWER_PREFETCH_MAX + 8];
    size_t len[ANSWER_PREFETCH_MAX + 8];
} batch_t;

static void batch_add(batch_t *b, const uint8_t *p, size_t len)
{
    assert_true(b->n < ANSWER_PREFETCH_MAX + 8);
    uint8_t *m = malloc(len ? len : 1);
    assert_non_null(m);
    memcpy(m, p, len);
    b->mem[b->n] = m;
    b->pkt[b->n] = m;
    b->len[b->n] = len;
    b->n++;
}

static void batch_free(batch_t *b)
{
    for (unsigned i = 0; i < b->n; i++)
        free(b->mem[i]);
    b->n = 0;
}

/* Answer every packet of b: into outs[i] (4096 bytes each), lengths into lens[i]. */
static void answer_all(const answer_view_t *v, const batch_t *b, uint8_t (*outs)[4096],
                       size_t *lens)
{
    for (unsigned i = 0; i < b->n; i++)
        lens[i] = answer_query(v, &ctx, NULL, b->pkt[i], b->len[i], outs[i], 4096, ANSWER_UDP);
}

/* The halves give every response byte for byte as answer_query() does. */
static void check_same_answers(const answer_view_t *v, const batch_t *b)
{
    static uint8_t plain[ANSWER_PREFETCH_MAX + 8][4096], warm[ANSWER_PREFETCH_MAX + 8][4096];
    static wire_query_t qs[ANSWER_PREFETCH_MAX + 8];
    wire_parse_result_t prs[ANSWER_PREFETCH_MAX + 8];
    size_t lp[ANSWER_PREFETCH_MAX + 8], lw[ANSWER_PREFETCH_MAX + 8];
    answer_all(v, b, plain, lp);
    for (unsigned i = 0; i < b->n; i++)
        prs[i] = wire_parse_query(&qs[i], b->pkt[i], b->len[i]);
    answer_prefetch(v, qs, b->n);
    for (unsigned i = 0; i < b->n; i++)
        lw[i] = answer_parsed(v, &ctx, &qs[i], prs[i], NULL, b->pkt[i], b->len[i], warm[i], 4096,
                              ANSWER_UDP);
    for (unsigned i = 0; i < b->n; i++) {
        assert_int_equal(lp[i], lw[i]);
        assert_memory_equal(plain[i], warm[i], lp[i]);
    }
}

static void add_names(batch_t *b)
{
    static const struct {
        const char *name;
        uint16_t qtype;
    } qs[] = {
        {"www.example.test", 1},
        {"WWW.Example.TEST", 28},
        {"mail.example.test", 15},
        {"nope.example.test", 1},
        {"a.b.c.example.test", 1},
        {"alias.example.test", 1},
        {"host.sub.example.test", 1},
        {"x.child.example.test", 1},
        {"www.other.test", 1},
        {"example.test", 6},
        {"example.test", 2},
        {"www.example.net", 1},
        {".", 2},
        {"c1.example.test", 1},
        {"loop1.example.test", 1},
        {"ns1.example.test", 255},
    };
    uint8_t buf[512];
    for (size_t i = 0; i < sizeof(qs) / sizeof(qs[0]); i++)
        batch_add(b, buf, mkquery(buf, qs[i].name, qs[i].qtype, i % 2 == 0));
}

static void test_answers_unchanged(void **state)
{
    (void)state;
    answer_view_t v = {.table = table, .cfg = cfg};
    batch_t b = {0};
    add_names(&b);
    check_same_answers(&v, &b);
    batch_free(&b);
}

/* Every prefix of every query (the header alone, a name cut anywhere, the type cut), QR set,
 * no or two questions, a compression pointer in the question, a label longer than 63. */
static void test_malformed(void **state)
{
    (void)state;
    answer_view_t v = {.table = table, .cfg = cfg};
    uint8_t q[512];
    size_t ql = mkquery(q, "www.example.test", 1, false);
    batch_t b = {0};
    for (size_t cut = 0; cut <= ql; cut++) {
        batch_add(&b, q, cut);
        if (b.n == ANSWER_PREFETCH_MAX) {
            check_same_answers(&v, &b);
            batch_free(&b);
        }
    }
    check_same_answers(&v, &b);
    batch_free(&b);

    uint8_t m[512];
    memcpy(m, q, ql);
    m[2] |= 0x80; /* a response */
    batch_add(&b, m, ql);
    memcpy(m, q, ql);
    m[5] = 0; /* no question */
    batch_add(&b, m, ql);
    memcpy(m, q, ql);
    m[5] = 2; /* two */
    batch_add(&b, m, ql);
    memcpy(m, q, ql);
    m[12] = 0xC0; /* a pointer where the name starts */
    m[13] = 12;
    batch_add(&b, m, ql);
    memcpy(m, q, ql);
    m[12] = 64; /* a label too long */
    batch_add(&b, m, ql);
    memcpy(m, q, ql);
    m[12] = 60; /* a label running past the end */
    batch_add(&b, m, ql);
    /* a name of 127 one-byte labels: longer than any node, deeper than max_labels */
    size_t p = 12;
    memcpy(m, q, 12);
    for (int i = 0; i < 120; i++) {
        m[p++] = 1;
        m[p++] = 'a';
    }
    memcpy(m + p, q + 12, ql - 12);
    batch_add(&b, m, p + ql - 12);
    check_same_answers(&v, &b);
    batch_free(&b);
}

/* No table, no queries, one query, and more than ANSWER_PREFETCH_MAX. */
static void test_edges(void **state)
{
    (void)state;
    answer_view_t none = {.table = NULL, .cfg = cfg};
    answer_view_t v = {.table = table, .cfg = cfg};
    batch_t b = {0};
    add_names(&b);
    static wire_query_t qs[ANSWER_PREFETCH_MAX + 8];
    for (unsigned i = 0; i < b.n; i++) {
        wire_parse_result_t pr = wire_parse_query(&qs[i], b.pkt[i], b.len[i]);
        assert_int_equal(pr, WIRE_OK);
    }
    answer_prefetch(&none, qs, b.n);
    answer_prefetch(&v, qs, 0);
    answer_prefetch(&v, qs, 1);
    batch_free(&b);
    check_same_answers(&none, &b);
    uint8_t buf[512];
    while (b.n < ANSWER_PREFETCH_MAX + 8)
        batch_add(&b, buf, mkquery(buf, b.n % 3 ? "www.example.test" : "zz.other.test", 1, false));
    check_same_answers(&v, &b);
    check_same_answers(&none, &b);
    batch_free(&b);
}

/* The negative answers' SOA views a context keeps (answer.h: ctx.soa) follow the zone asked:
 * NXDOMAIN and NODATA in turn from three zones give every response byte for byte as a context
 * that never answered anything does. */
static void test_neg_soa_views_follow_the_zone(void **state)
{
    (void)state;
    answer_view_t v = {.table = table, .cfg = cfg};
    static const char *const names[] = {"nope.example.test", "nope.other.test",
                                        "www.example.test",  "x.child.example.test",
                                        "nope.example.test", "a.b.other.test"};
    /* and two zones whose SOA names have the same lengths but not the same bytes */
    char dir[] = "/tmp/tern-prefetch-XXXXXX", path[2][300];
    assert_non_null(mkdtemp(dir));
    zone_table_t *t2 = zone_table_new();
    assert_non_null(t2);
    for (int z = 0; z < 2; z++) {
        const char c = z ? 'b' : 'a';
        snprintf(path[z], sizeof(path[z]), "%s/%c.zone", dir, c);
        FILE *f = fopen(path[z], "w");
        assert_non_null(f);
        fprintf(f, "@ 300 SOA ns1.%c.test. h.%c.test. 1 2 3 4 5\n@ NS ns1\nns1 A 192.0.2.1\n", c,
                c);
        assert_int_equal(fclose(f), 0);
        char origin[] = "x.test";
        origin[0] = c;
        assert_int_equal(atu_add_file(t2, origin, path[z]), 0);
        (void)unlink(path[z]);
    }
    (void)rmdir(dir);
    assert_int_equal(zone_table_freeze(t2), 0);
    answer_view_t v2 = {.table = t2, .cfg = cfg};
    static const char *const names2[] = {"x.a.test", "x.b.test", "y.b.test", "y.a.test"};

    static answer_ctx_t fresh;
    static uint8_t warm_out[4096], fresh_out[4096];
    uint8_t buf[512];
    memset(&ctx, 0, sizeof(ctx)); /* the first SOA it keeps is a.test's */
    for (int round = 0; round < 6; round++) {
        const answer_view_t *vv = round % 2 ? &v : &v2;
        const char *const *nn = round % 2 ? names : names2;
        size_t count =
            round % 2 ? sizeof(names) / sizeof(names[0]) : sizeof(names2) / sizeof(names2[0]);
        for (size_t i = 0; i < count; i++) {
            size_t ql = mkquery(buf, nn[i], i == 2 ? 16 : 1, round == 2);
            size_t lw =
                answer_query(vv, &ctx, NULL, buf, ql, warm_out, sizeof(warm_out), ANSWER_UDP);
            memset(&fresh, 0, sizeof(fresh));
            size_t lf =
                answer_query(vv, &fresh, NULL, buf, ql, fresh_out, sizeof(fresh_out), ANSWER_UDP);
            assert_true(lw > 12);
            assert_int_equal(lw, lf);
            assert_memory_equal(warm_out, fresh_out, lw);
        }
    }
    zone_table_free(t2);
}

/* The negative SOA rendered ahead (answer_put.c put_neg_tpl()) is byte for byte what the generic
 * writer gives (ctx.neg_plain), for SOAs whose names are in the zone, outside it, share labels
 * with each other beyond the apex, are the apex, are the root, or are written in upper case,
 * asked as NXDOMAIN and NODATA with questions that share more than the apex with the SOA's
 * names (the template must step aside), in mixed case, long, after a CNAME, and truncated. */
static void test_neg_template_is_the_generic_bytes(void **state)
{
    (void)state;
    static const char *const zones[][2] = {
        {"z1.test", "@ 300 SOA ns1 hostmaster 1 2 3 4 5\n@ NS ns1\nns1 A 192.0.2.1\n"
                    "alias CNAME gone\nalias2 CNAME x.ns1\nwww A 192.0.2.2\n"},
        {"z2.test", "@ 300 SOA NS.Provider.NET. HostMaster 1 2 3 4 5\n@ NS ns.provider.net.\n"},
        {"z3.test", "@ 300 SOA ns hostmaster.ns 1 2 3 4 60\n@ NS ns\nns A 192.0.2.3\n"},
        {"z4.test", "@ 300 SOA @ @ 1 2 3 4 5\n@ NS @\n@ A 192.0.2.4\n"},
        {"a.b.z5.test", "@ 300 SOA ns1.b.z5.test. mail.z5.test. 1 2 3 4 5\n@ NS ns1.b.z5.test.\n"},
        {"z6.test", "@ 300 SOA ns.other.test. h.other.test. 1 2 3 4 5\n@ NS ns.other.test.\n"},
        {"z7.test", "@ 300 SOA . . 1 2 3 4 5\n@ NS ns.z7.test.\nns A 192.0.2.7\n"},
        {"z8.test", "@ 300 SOA x.y.ns.z8.test. y.ns.z8.test. 1 2 3 4 5\n@ NS ns\n"
                    "ns A 192.0.2.8\n"},
    };
    static const char *const labels[] = {
        "",     "nx1", "NX2",    "ns1", "x.ns1", "hostmaster", "x.HOSTMASTER", "ns",    "y.ns",
        "mail", "www", "x.y.ns", "q.b", "alias", "z.x.y.ns",   "Ns1",          "alias2"};
    char dir[] = "/tmp/tern-negt-XXXXXX", path[300];
    assert_non_null(mkdtemp(dir));
    zone_table_t *t = zone_table_new();
    assert_non_null(t);
    for (size_t z = 0; z < sizeof(zones) / sizeof(zones[0]); z++) {
        snprintf(path, sizeof(path), "%s/%zu.zone", dir, z);
        FILE *f = fopen(path, "w");
        assert_non_null(f);
        fprintf(f, "$ORIGIN %s.\n%s", zones[z][0], zones[z][1]);
        assert_int_equal(fclose(f), 0);
        assert_int_equal(atu_add_file(t, zones[z][0], path), 0);
        (void)unlink(path);
    }
    (void)rmdir(dir);
    assert_int_equal(zone_table_freeze(t), 0);
    answer_view_t v = {.table = t, .cfg = cfg};
    static answer_ctx_t plain;
    static uint8_t out_t[4096], out_p[4096];
    uint8_t buf[512];
    char name[300];
    memset(&ctx, 0, sizeof(ctx));
    memset(&plain, 0, sizeof(plain));
    plain.neg_plain = true;
    unsigned made = 0;
    for (int round = 0; round < 3; round++) {
        for (size_t z = 0; z < sizeof(zones) / sizeof(zones[0]); z++) {
            for (size_t k = 0; k < sizeof(labels) / sizeof(labels[0]); k++) {
                for (int qt = 0; qt < 2; qt++) {
                    if (round == 2 && k == 1) /* a long question */
                        snprintf(name, sizeof(name), "%s.%s.%s.%s",
                                 "a123456789012345678901234567890",
                                 "b123456789012345678901234567890",
                                 "c123456789012345678901234567890", zones[z][0]);
                    else
                        snprintf(name, sizeof(name), "%s%s%s", labels[k], labels[k][0] ? "." : "",
                                 zones[z][0]);
                    size_t ql = mkquery(buf, name, qt ? 16 : 1, round == 1);
                    /* round 0 also truncated: room for the question and little more */
                    size_t cap = round == 0 && k % 3 == 0 ? ql + 20 : sizeof(out_t);
                    size_t lt = answer_query(&v, &ctx, NULL, buf, ql, out_t, cap, ANSWER_UDP);
                    size_t lp = answer_query(&v, &plain, NULL, buf, ql, out_p, cap, ANSWER_UDP);
                    if (lt != lp || memcmp(out_t, out_p, lt) != 0)
                        fail_msg("%s type %d round %d: template %zu bytes, generic %zu", name,
                                 qt ? 16 : 1, round, lt, lp);
                    made += ctx.negt.ok;
                }
            }
        }
    }
    assert_true(made > 100); /* the template was made and used, not stepped around */
    zone_table_free(t);
}

/* Random bytes and random mutations of real queries, in random batch sizes. */
static void test_random(void **state)
{
    (void)state;
    answer_view_t v = {.table = table, .cfg = cfg};
    uint64_t r = 0x9e3779b97f4a7c15ull;
    uint8_t q[512], buf[512];
    batch_t base = {0};
    add_names(&base);
    for (int round = 0; round < 3000; round++) {
        batch_t b = {0};
        r = r * 6364136223846793005ull + 1442695040888963407ull;
        unsigned n = 1 + (unsigned)(r >> 33) % ANSWER_PREFETCH_MAX;
        for (unsigned i = 0; i < n; i++) {
            r = r * 6364136223846793005ull + 1442695040888963407ull;
            const unsigned k = (unsigned)(r >> 40) % base.n;
            size_t len = base.len[k];
            memcpy(q, base.pkt[k], len);
            unsigned flips = (unsigned)(r >> 20) % 4;
            for (unsigned f = 0; f < flips; f++) {
                r = r * 6364136223846793005ull + 1442695040888963407ull;
                q[(r >> 33) % len] = (uint8_t)(r >> 17);
            }
            if ((r >> 13) % 5 == 0) { /* cut short */
                len = (size_t)(r >> 45) % (len + 1);
            } else if ((r >> 13) % 5 == 1) { /* all random */
                len = (size_t)(r >> 45) % sizeof(buf);
                for (size_t j = 0; j < len; j++) {
                    r = r * 6364136223846793005ull + 1442695040888963407ull;
                    buf[j] = (uint8_t)(r >> 33);
                }
                memcpy(q, buf, len);
            }
            batch_add(&b, q, len);
        }
        check_same_answers(&v, &b);
        batch_free(&b);
    }
    batch_free(&base);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_answers_unchanged),
        cmocka_unit_test(test_malformed),
        cmocka_unit_test(test_edges),
        cmocka_unit_test(test_neg_soa_views_follow_the_zone),
        cmocka_unit_test(test_neg_template_is_the_generic_bytes),
        cmocka_unit_test(test_random),
    };
    return cmocka_run_group_tests(tests, atu_setup, atu_teardown);
}
