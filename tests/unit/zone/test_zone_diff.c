/*
 * test_zone_diff.c — a zone file read as a change of the version it replaces (zone_file_patch():
 * zone_diff finds the changed names, zone_patch applies them) answers exactly as the same file
 * loaded in full. A generated zone (hosts, an RRset of three RRs, empty non-terminals, a
 * wildcard, CNAMEs, MX and SRV targets, a delegation with glue, an $INCLUDE) is edited one way
 * per case; every name of both versions, a name below each and every type are asked through
 * answer_query() of both, byte for byte. Also: what must be built in full says so, a file that
 * does not load gives the load's message, warnings come once, files that change under the two
 * reads are caught, and the diff stays within its memory bound.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "tern/answer/answer.h"
#include "tern/common/err.h"
#include "tern/wire/dname.h"
#include "tern/zone/zone_diff.h"
#include "tern/zone/zone_file.h"
#include "tern/zone/zone_table.h"
#include "zone_test_util.h"

#define ORIGIN "d.test"
#define HOSTS  300

/* ---- a zone file as lines: the main file and the one it includes ---- */

#define MAXLINES 8192
#define LINELEN  160

struct model {
    char main[MAXLINES][LINELEN];
    size_t nmain;
    char inc[16][LINELEN];
    size_t ninc;
};

static struct model base_m, work_m; /* large: static */
static char dir[] = "/tmp/tern-zd-XXXXXX";
static char main_path[64], inc_path[64];

static void addf(struct model *m, const char *fmt, ...) TERN_PRINTF(2, 3);

static void addf(struct model *m, const char *fmt, ...)
{
    assert_true(m->nmain < MAXLINES);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(m->main[m->nmain++], LINELEN, fmt, ap);
    va_end(ap);
}

static void gen(struct model *m, unsigned hosts)
{
    memset(m, 0, sizeof(*m));
    addf(m, "$TTL 3600");
    addf(m, "@ IN SOA ns1 hostmaster 1 7200 900 1209600 300");
    addf(m, "@ NS ns1");
    addf(m, "@ NS ns2");
    addf(m, "@ MX 10 mx1");
    addf(m, "ns1 A 192.0.2.1");
    addf(m, "ns2 A 192.0.2.2");
    addf(m, "mx1 A 192.0.2.3");
    addf(m, "rr A 192.0.2.10");
    addf(m, "rr A 192.0.2.11");
    addf(m, "rr A 192.0.2.12");
    addf(m, "a.b.c A 192.0.2.20");
    addf(m, "only.e.f A 192.0.2.21");
    addf(m, "*.w TXT \"wild\"");
    addf(m, "w A 192.0.2.22");
    addf(m, "alias CNAME h1");
    addf(m, "cn CNAME Target.d.test.");
    addf(m, "target A 192.0.2.23");
    addf(m, "mx MX 10 h2");
    addf(m, "mx MX 20 mail.other.test.");
    addf(m, "_http._tcp SRV 0 5 80 h3");
    addf(m, "sub NS ns.sub");
    addf(m, "ns.sub A 192.0.2.53");
    addf(m, "$INCLUDE inc.zone");
    for (unsigned i = 0; i < hosts; i++) {
        addf(m, "h%u A 10.0.%u.%u", i, i >> 8, i & 255);
        if (i % 3 == 0)
            addf(m, "h%u AAAA 2001:db8::%x", i, i);
        if (i % 5 == 0)
            addf(m, "h%u TXT \"host %u\"", i, i);
    }
    snprintf(m->inc[m->ninc++], LINELEN, "i1 A 192.0.2.50");
    snprintf(m->inc[m->ninc++], LINELEN, "i2 TXT \"included\"");
}

static size_t find_line(char (*lines)[LINELEN], size_t n, const char *line)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(lines[i], line) == 0)
            return i;
    fail_msg("no line '%s'", line);
    return 0;
}

static void replace(struct model *m, const char *old, const char *new)
{
    snprintf(m->main[find_line(m->main, m->nmain, old)], LINELEN, "%s", new);
}

static void del(struct model *m, const char *line)
{
    size_t i = find_line(m->main, m->nmain, line);
    memmove(m->main[i], m->main[i + 1], (m->nmain - i - 1) * LINELEN);
    m->nmain--;
}

static void write_lines(const char *path, char (*lines)[LINELEN], size_t n)
{
    /* a new file each time (rename): a reader never sees one half written */
    char tmp[80];
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    assert_non_null(f);
    for (size_t i = 0; i < n; i++)
        fprintf(f, "%s\n", lines[i]);
    assert_int_equal(fclose(f), 0);
    assert_int_equal(rename(tmp, path), 0);
}

static void write_model(struct model *m)
{
    write_lines(main_path, m->main, m->nmain);
    write_lines(inc_path, m->inc, m->ninc);
}

static zone_t *load(void)
{
    zone_t *z = NULL;
    char err[512];
    int rc = zone_file_load(ORIGIN, main_path, &z, err, sizeof(err));
    if (rc != 0)
        fail_msg("load: %s", err);
    return z;
}

static unsigned count_of(const char *hay, const char *needle)
{
    unsigned n = 0;
    for (const char *p = hay; (p = strstr(p, needle)) != NULL; p += strlen(needle))
        n++;
    return n;
}

/* ---- answers compared ---- */

static answer_ctx_t ctx;

static void ask_all(const answer_view_t *va, const answer_view_t *vb, const uint8_t *name,
                    const char *tag)
{
    static const uint16_t types[] = {WIRE_T_A,     WIRE_T_AAAA, WIRE_T_TXT, WIRE_T_MX,
                                     WIRE_T_NS,    WIRE_T_SOA,  WIRE_T_SRV, WIRE_T_CNAME,
                                     WIRE_T_DNAME, WIRE_T_ANY};
    static uint8_t pkt[512], ra[4096], rb[4096];
    for (size_t t = 0; t < sizeof(types) / sizeof(types[0]); t++) {
        size_t ql = ztu_query(pkt, name, types[t]);
        size_t la = answer_query(va, &ctx, NULL, pkt, ql, ra, sizeof(ra), ANSWER_UDP);
        size_t lb = answer_query(vb, &ctx, NULL, pkt, ql, rb, sizeof(rb), ANSWER_UDP);
        if (la != lb || memcmp(ra, rb, la) != 0) {
            char nm[DNAME_MAXLEN * 4 + 1];
            (void)dname_to_str(name, nm, sizeof(nm));
            fail_msg("%s: %s type %u: patched %zu bytes, rcode %u, an %u / loaded %zu bytes, "
                     "rcode %u, an %u",
                     tag, nm, types[t], la, ra[3] & 15u, ra[7], lb, rb[3] & 15u, rb[7]);
        }
    }
}

/* Every name of either zone, one below each ("zz."), and the origin's neighbours: the same
 * bytes from both, for every type. */
static void same_answers(zone_t *a, zone_t *b, const char *tag)
{
    zone_table_t *ta = ztu_table_of(a), *tb = ztu_table_of(b);
    answer_view_t va = {.table = ta, .cfg = {.edns_max_udp = ANSWER_EDNS_DEFAULT}};
    answer_view_t vb = {.table = tb, .cfg = {.edns_max_udp = ANSWER_EDNS_DEFAULT}};
    const zone_t *zs[2] = {a, b};
    for (int k = 0; k < 2; k++) {
        for (uint32_t i = 0; i < zs[k]->node_count; i++) {
            const zone_node_t *n = zone_node_at(zs[k], i);
            ask_all(&va, &vb, n->name, tag);
            uint8_t below[DNAME_MAXLEN];
            if (n->name_len + 3 <= DNAME_MAXLEN) {
                below[0] = 2;
                below[1] = 'z';
                below[2] = 'z';
                memcpy(below + 3, n->name, n->name_len);
                ask_all(&va, &vb, below, tag);
            }
        }
    }
    zone_table_free(ta);
    zone_table_free(tb);
}

/* ---- one edit ---- */

struct result {
    int rc;
    char err[512];
    char log[8192]; /* what the patch wrote on stderr */
};

/* The base model loaded, work_m written, patched from the base; the patch's version (or the
 * base, when nothing changed) answers as work_m loaded in full. */
static void patch_case(const char *tag, struct result *r)
{
    write_model(&base_m);
    zone_t *base = load();
    write_model(&work_m);
    zone_t *out = NULL;
    ztu_capture_begin();
    r->rc = zone_file_patch(ORIGIN, main_path, NULL, base, &out, r->err, sizeof(r->err));
    ztu_capture_end(r->log, sizeof(r->log));
    if (r->rc == 0 || r->rc == ZONE_FILE_SAME) {
        zone_t *full = load();
        zone_t *got = r->rc == 0 ? out : base;
        assert_non_null(got);
        assert_int_equal(got->rr_count, full->rr_count);
        same_answers(got, full, tag);
        zone_free(full);
    } else {
        assert_null(out);
    }
    zone_free(out);
    zone_free(base);
}

typedef void (*edit_fn)(struct model *m);

static void expect_patch(const char *tag, edit_fn edit, int want)
{
    gen(&base_m, HOSTS);
    work_m = base_m;
    edit(&work_m);
    struct result r;
    patch_case(tag, &r);
    if (r.rc != want)
        fail_msg("%s: rc %d (%s), want %d", tag, r.rc, r.err, want);
}

static void e_nothing(struct model *m)
{
    (void)m;
}
static void e_change_rr(struct model *m)
{
    replace(m, "h5 A 10.0.0.5", "h5 A 10.9.9.9");
}
static void e_add_rr(struct model *m)
{
    addf(m, "h7 AAAA 2001:db8::77");
}
static void e_remove_rr(struct model *m)
{
    del(m, "rr A 192.0.2.11");
}
static void e_remove_name(struct model *m)
{
    del(m, "h10 A 10.0.0.10");
    del(m, "h10 TXT \"host 10\"");
}
static void e_change_ttl(struct model *m)
{
    replace(m, "h8 A 10.0.0.8", "h8 300 A 10.0.0.8");
}
static void e_add_under_ent(struct model *m)
{
    addf(m, "x.b.c A 192.0.2.99");     /* b.c is an empty non-terminal above a.b.c */
    addf(m, "deep.x.e.f TXT \"new\""); /* x.e.f a new one, e.f an existing one */
}
static void e_remove_last_under_ent(struct model *m)
{
    del(m, "only.e.f A 192.0.2.21"); /* e.f and f go with it */
}
static void e_wildcard_added(struct model *m)
{
    addf(m, "*.h11 TXT \"wild h11\"");
    addf(m, "*.b.c A 192.0.2.98"); /* a wildcard below an empty non-terminal */
}
static void e_wildcard_removed(struct model *m)
{
    del(m, "*.w TXT \"wild\"");
}
static void e_cname_for_a(struct model *m)
{
    replace(m, "alias CNAME h1", "alias A 192.0.2.77");
    replace(m, "h14 A 10.0.0.14", "h14 CNAME h1");
}
static void e_duplicate(struct model *m)
{
    addf(m, "h13 A 10.0.0.13"); /* a second copy of a line: the builder merges it */
    addf(m, "rr A 192.0.2.10");
}
static void e_case_rdata(struct model *m)
{
    replace(m, "cn CNAME Target.d.test.", "cn CNAME target.d.test.");
    replace(m, "mx MX 10 h2", "mx MX 10 H2");
}
static void e_include_changed(struct model *m)
{
    snprintf(m->inc[0], LINELEN, "i1 A 192.0.2.51");
    snprintf(m->inc[m->ninc++], LINELEN, "i3 AAAA 2001:db8::53");
}
static void e_shuffle_names(struct model *m)
{
    /* the host lines reversed: every RRset keeps its RRs and their order */
    size_t first = find_line(m->main, m->nmain, "h0 A 10.0.0.0");
    for (size_t i = first, j = m->nmain - 1; i < j; i++, j--) {
        char t[LINELEN];
        memcpy(t, m->main[i], LINELEN);
        memcpy(m->main[i], m->main[j], LINELEN);
        memcpy(m->main[j], t, LINELEN);
    }
}
static void e_shuffle_rrset(struct model *m)
{
    /* the same three RRs in another order: answers list them in the file's order */
    size_t a = find_line(m->main, m->nmain, "rr A 192.0.2.10");
    size_t b = find_line(m->main, m->nmain, "rr A 192.0.2.12");
    snprintf(m->main[a], LINELEN, "rr A 192.0.2.12");
    snprintf(m->main[b], LINELEN, "rr A 192.0.2.10");
}
static void e_interleaved(struct model *m)
{
    /* an RRset's RRs apart in the file, unchanged: still the same data */
    del(m, "rr A 192.0.2.12");
    addf(m, "rr A 192.0.2.12");
}
static void e_glue(struct model *m)
{
    replace(m, "ns.sub A 192.0.2.53", "ns.sub A 192.0.2.54");
    addf(m, "ns2.sub A 192.0.2.55"); /* new glue-less data below the cut */
}
static void e_mx_target(struct model *m)
{
    del(m, "h2 A 10.0.0.2"); /* an MX target goes */
    replace(m, "_http._tcp SRV 0 5 80 h3", "_http._tcp SRV 0 5 80 h4");
}
static void e_out_of_zone(struct model *m)
{
    addf(m, "foo.other.test. A 192.0.2.1");
}
static void e_out_of_zone_and_change(struct model *m)
{
    addf(m, "foo.other.test. A 192.0.2.1");
    replace(m, "h5 A 10.0.0.5", "h5 A 10.9.9.9");
}

static void test_edits(void **state)
{
    (void)state;
    static const struct {
        const char *tag;
        edit_fn edit;
        int want;
    } cases[] = {
        {"nothing", e_nothing, ZONE_FILE_SAME},
        {"change an RR", e_change_rr, 0},
        {"add an RR", e_add_rr, 0},
        {"remove an RR", e_remove_rr, 0},
        {"remove a name", e_remove_name, 0},
        {"change a TTL", e_change_ttl, 0},
        {"add below an ENT", e_add_under_ent, 0},
        {"remove the last name under an ENT", e_remove_last_under_ent, 0},
        {"wildcards added", e_wildcard_added, 0},
        {"wildcard removed", e_wildcard_removed, 0},
        {"CNAME for A and back", e_cname_for_a, 0},
        {"duplicate RR lines", e_duplicate, 0}, /* conservative: merged data, still patched */
        {"case in RDATA", e_case_rdata, 0},
        {"$INCLUDE changed", e_include_changed, 0},
        {"names shuffled", e_shuffle_names, ZONE_FILE_SAME},
        {"RRset shuffled", e_shuffle_rrset, 0},
        {"RRset interleaved", e_interleaved, ZONE_FILE_SAME},
        {"glue below a cut", e_glue, 0},
        {"MX and SRV targets", e_mx_target, 0},
        {"out-of-zone record", e_out_of_zone, ZONE_FILE_SAME},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        expect_patch(cases[i].tag, cases[i].edit, cases[i].want);
}

/* The second pass skips an entry by its owner before ldns parses it (zone_file.c
 * fresh_skip()): every spelling of an owner must be judged as ldns reads it. Blank owners after
 * a skipped and after a kept entry, $ORIGIN, "@" under another origin, absolute and upper-case
 * names, escapes (never skipped, parsed in full), the root-relative "." is not in the zone. */
static void owner_forms(struct model *m)
{
    addf(m, "$ORIGIN o.d.test.");
    addf(m, "k1 A 192.0.2.101");
    addf(m, " TXT \"k1 blank\"");
    addf(m, "k2 A 192.0.2.102");
    addf(m, "\tTXT \"k2 blank\"");
    addf(m, "esc\\.aped A 192.0.2.103");
    addf(m, "\\075eq A 192.0.2.104");
    addf(m, "@ TXT \"o apex\"");
    addf(m, "UP.Case.D.TEST. A 192.0.2.105");
    addf(m, " TXT \"up blank\"");
    addf(m, "$ORIGIN d.test.");
    addf(m, "*.star A 192.0.2.106");
    addf(m, "under_score A 192.0.2.107");
}

static void test_owner_forms(void **state)
{
    (void)state;
    static const char *const edits[][2] = {
        {"k1 A 192.0.2.101", "k1 A 192.0.2.201"},     /* kept, then its blank line */
        {" TXT \"k1 blank\"", " TXT \"k1 changed\""}, /* a blank owner's record */
        {"k2 A 192.0.2.102", "k2 A 192.0.2.202"},     /* after a kept entry's blank line */
        {"esc\\.aped A 192.0.2.103", "esc\\.aped A 192.0.2.203"},
        {"\\075eq A 192.0.2.104", "\\075eq A 192.0.2.204"},
        {"@ TXT \"o apex\"", "@ TXT \"o apex changed\""},
        {"UP.Case.D.TEST. A 192.0.2.105", "UP.Case.D.TEST. A 192.0.2.205"},
        {" TXT \"up blank\"", " TXT \"up changed\""},
        {"*.star A 192.0.2.106", "*.star A 192.0.2.206"},
        {"under_score A 192.0.2.107", "under_score A 192.0.2.207"},
    };
    for (size_t k = 0; k < sizeof(edits) / sizeof(edits[0]); k++) {
        gen(&base_m, HOSTS);
        owner_forms(&base_m);
        work_m = base_m;
        replace(&work_m, edits[k][0], edits[k][1]);
        replace(&work_m, "h5 A 10.0.0.5", "h5 A 10.9.9.9"); /* and a name elsewhere */
        struct result r;
        patch_case(edits[k][1], &r);
        if (r.rc != 0)
            fail_msg("%s: rc %d (%s)", edits[k][1], r.rc, r.err);
    }
}

/* An out-of-zone record is warned about once (the first read), as a full load does. */
static void test_warn_once(void **state)
{
    (void)state;
    edit_fn edits[] = {e_out_of_zone, e_out_of_zone_and_change};
    for (size_t k = 0; k < 2; k++) {
        gen(&base_m, HOSTS);
        work_m = base_m;
        edits[k](&work_m);
        struct result r;
        patch_case("out of zone", &r);
        assert_int_equal(r.rc, k == 0 ? ZONE_FILE_SAME : 0);
        assert_int_equal(count_of(r.log, "outside zone"), 1);
        /* the load's own words */
        char log[4096], err[512];
        zone_t *z = NULL;
        ztu_capture_begin();
        int rc = zone_file_load(ORIGIN, main_path, &z, err, sizeof(err));
        ztu_capture_end(log, sizeof(log));
        assert_int_equal(rc, 0);
        zone_free(z);
        assert_string_equal(r.log, log);
    }
}

/* The apex (SOA serial, apex NS): built in full until zone_patch() takes apex changes. */
static void e_serial(struct model *m)
{
    replace(m, "@ IN SOA ns1 hostmaster 1 7200 900 1209600 300",
            "@ IN SOA ns1 hostmaster 2 7200 900 1209600 300");
    replace(m, "h5 A 10.0.0.5", "h5 A 10.9.9.9");
}
static void e_apex_ns(struct model *m)
{
    addf(m, "@ NS ns3");
    addf(m, "ns3 A 192.0.2.4");
}

static void test_apex(void **state)
{
    (void)state;
    edit_fn edits[] = {e_serial, e_apex_ns};
    for (size_t k = 0; k < 2; k++) {
        gen(&base_m, HOSTS);
        work_m = base_m;
        edits[k](&work_m);
        struct result r;
        patch_case("apex", &r);
        assert_int_equal(r.rc, 0); /* zone_patch() takes changes at the apex */
    }
}

/* What zone_patch() cannot do (a delegation changes) and a signed zone: a full build, why. */
static void e_delegation(struct model *m)
{
    replace(m, "sub NS ns.sub", "sub NS ns1.d.test.");
}

static void test_needs_build(void **state)
{
    (void)state;
    gen(&base_m, HOSTS);
    work_m = base_m;
    e_delegation(&work_m);
    struct result r;
    patch_case("delegation", &r);
    assert_int_equal(r.rc, ZONE_FILE_BUILD);
    assert_non_null(strstr(r.err, "delegation"));

    /* signed: never patched, not even read */
    write_model(&base_m);
    zone_t *base = load(), *out = NULL;
    static const uint8_t key[] = {0, 48, 0, 4, 1, 0, 3, 13}; /* DNSKEY, 4 bytes */
    const zone_file_opts_t o = {.dnskeys = key, .dnskeys_len = sizeof(key)};
    char err[256];
    assert_int_equal(zone_file_patch(ORIGIN, main_path, &o, base, &out, err, sizeof(err)),
                     ZONE_FILE_BUILD);
    assert_null(out);
    assert_non_null(strstr(err, "signed"));
    /* another origin */
    assert_int_equal(zone_file_patch("e.test", main_path, NULL, base, &out, err, sizeof(err)),
                     ZONE_FILE_BUILD);
    zone_free(base);
}

/* More changed names than an eighth of the zone plus 1024 (ZONE_PATCH_NAMES): a full build. */
static void test_large_change(void **state)
{
    (void)state;
    gen(&base_m, 5000); /* more than one page of nodes (zone.h) */
    work_m = base_m;
    for (unsigned i = 0; i < 2000; i++) {
        char old[64], new[64];
        snprintf(old, sizeof(old), "h%u A 10.0.%u.%u", i, i >> 8, i & 255);
        snprintf(new, sizeof(new), "h%u A 10.1.%u.%u", i, i >> 8, i & 255);
        replace(&work_m, old, new);
    }
    struct result r;
    patch_case("large", &r);
    assert_int_equal(r.rc, ZONE_FILE_BUILD);
    assert_non_null(strstr(r.err, "2000 names changed"));
    /* a thousand is still a patch */
    work_m = base_m;
    for (unsigned i = 0; i < 1000; i++) {
        char old[64], new[64];
        snprintf(old, sizeof(old), "h%u A 10.0.%u.%u", i, i >> 8, i & 255);
        snprintf(new, sizeof(new), "h%u A 10.1.%u.%u", i, i >> 8, i & 255);
        replace(&work_m, old, new);
    }
    patch_case("a thousand", &r);
    assert_int_equal(r.rc, 0);
}

/* A file that does not load: the error (code and "file:line: message") a full load gives. */
static void e_syntax(struct model *m)
{
    replace(m, "h20 A 10.0.0.20", "h20 A 10.0.0.300");
}
static void e_syntax_inc(struct model *m)
{
    snprintf(m->inc[m->ninc++], LINELEN, "i4 BOGUS 1");
}
static void e_cname_and_a(struct model *m)
{
    addf(m, "alias A 192.0.2.5"); /* found only by the builder */
}
static void e_class(struct model *m)
{
    addf(m, "h21 CH TXT \"chaos\"");
}
static void e_class_outside(struct model *m)
{
    addf(m, "foo.other.test. CH TXT \"chaos\"");
}
static void e_no_soa(struct model *m)
{
    del(m, "@ IN SOA ns1 hostmaster 1 7200 900 1209600 300");
}
static void e_ns_wild(struct model *m)
{
    addf(m, "*.w NS ns1");
}

static void test_errors(void **state)
{
    (void)state;
    edit_fn edits[] = {e_syntax, e_syntax_inc, e_cname_and_a,  e_class,
                       e_no_soa, e_ns_wild,    e_class_outside};
    for (size_t k = 0; k < sizeof(edits) / sizeof(edits[0]); k++) {
        gen(&base_m, HOSTS);
        work_m = base_m;
        edits[k](&work_m);
        struct result r;
        patch_case("error", &r);
        zone_t *z = NULL;
        char err[512];
        int rc = zone_file_load(ORIGIN, main_path, &z, err, sizeof(err));
        assert_true(rc < 0);
        if (r.rc != rc || strcmp(r.err, err) != 0)
            fail_msg("edit %zu: patch %d '%s', load %d '%s'", k, r.rc, r.err, rc, err);
        assert_non_null(strstr(r.err, ".zone:"));
    }
}

/* opts->seen hears of each file once (the first read), and a file replaced or rewritten while
 * the patch reads it gives a full build, never a version made of two files. */
struct seen_ctx {
    unsigned calls;
    int act; /* 0: count only; 1: replace the main file (rename); 2: rewrite it in place */
};

static int seen(void *vctx, const char *path, const struct stat *st)
{
    struct seen_ctx *c = vctx;
    (void)st;
    c->calls++;
    if (c->act && strcmp(path, main_path) == 0) {
        if (c->act == 1) {
            write_lines(main_path, work_m.main, work_m.nmain);
        } else {
            FILE *f = fopen(main_path, "w"); /* same inode, other size */
            assert_non_null(f);
            for (size_t i = 0; i < work_m.nmain; i++)
                fprintf(f, "%s\n", work_m.main[i]);
            fprintf(f, "; more\n");
            assert_int_equal(fclose(f), 0);
        }
        c->act = 0;
    }
    return 0;
}

static void test_files_change(void **state)
{
    (void)state;
    gen(&base_m, HOSTS);
    write_model(&base_m);
    zone_t *base = load(), *out = NULL;
    char err[256];
    work_m = base_m;
    e_change_rr(&work_m);
    write_model(&work_m);

    struct seen_ctx c = {0};
    zone_file_opts_t o = {.seen = seen, .seen_ctx = &c};
    assert_int_equal(zone_file_patch(ORIGIN, main_path, &o, base, &out, err, sizeof(err)), 0);
    assert_int_equal(c.calls, 2); /* main and inc, the first read only */
    zone_free(out);
    out = NULL;

    /* replaced after the first read opened it: the second reads another file */
    e_add_rr(&work_m);
    c = (struct seen_ctx){.act = 1};
    assert_int_equal(zone_file_patch(ORIGIN, main_path, &o, base, &out, err, sizeof(err)),
                     ZONE_FILE_BUILD);
    assert_null(out);
    assert_non_null(strstr(err, "changed"));

    /* rewritten in place while the first read had it open */
    write_model(&base_m);
    work_m = base_m;
    e_change_rr(&work_m);
    c = (struct seen_ctx){.act = 2};
    assert_int_equal(zone_file_patch(ORIGIN, main_path, &o, base, &out, err, sizeof(err)),
                     ZONE_FILE_BUILD);
    assert_null(out);
    assert_non_null(strstr(err, "changed"));
    zone_free(base);
}

/* Edits one after another, each patched from the version before (itself patched): a removed
 * name's place in the node array is taken by another node, and the diff must not mind. */
static void test_sequence(void **state)
{
    (void)state;
    static const edit_fn steps[] = {
        e_change_rr,     e_remove_last_under_ent,
        e_add_under_ent, e_wildcard_added,
        e_remove_name,   e_wildcard_removed,
        e_cname_for_a,   e_include_changed,
        e_shuffle_rrset, e_mx_target,
        e_change_ttl,    e_case_rdata,
    };
    gen(&work_m, HOSTS);
    write_model(&work_m);
    zone_t *cur = load();
    int patched = 0;
    for (size_t k = 0; k < sizeof(steps) / sizeof(steps[0]); k++) {
        steps[k](&work_m);
        write_model(&work_m);
        zone_t *out = NULL, *full = load();
        char err[256];
        int rc = zone_file_patch(ORIGIN, main_path, NULL, cur, &out, err, sizeof(err));
        if (rc != 0)
            fail_msg("step %zu: %d %s", k, rc, err);
        patched++;
        char tag[32];
        snprintf(tag, sizeof(tag), "step %zu", k);
        same_answers(out, full, tag);
        /* nothing more: the patched version is the file */
        zone_t *again = NULL;
        assert_int_equal(zone_file_patch(ORIGIN, main_path, NULL, out, &again, err, sizeof(err)),
                         ZONE_FILE_SAME);
        zone_free(full);
        zone_free(cur);
        cur = out;
    }
    assert_int_equal(cur->patches, patched);
    zone_free(cur);
}

/* A random walk of file edits, each reload patched from the version the last one made (as
 * SIGHUPs do): lines of the host part changed, removed, duplicated, moved, given another TTL or
 * case; new names under hosts, under new empty non-terminals and as wildcards; MX and SRV whose
 * targets come and go; the SOA serial bumped. Every version answers as a full load of its file,
 * or the patch says the file must be read in full (then the load is the next base). The first 24
 * lines (apex, fixed names, $INCLUDE) stay. TERN_WALK_SEED picks another walk. */
static uint64_t walk_rng = 0x2545F4914F6CDD1Dull;

static unsigned walk_rnd(unsigned n)
{
    walk_rng ^= walk_rng << 13;
    walk_rng ^= walk_rng >> 7;
    walk_rng ^= walk_rng << 17;
    return (unsigned)(walk_rng % n);
}

static void walk_edit(struct model *m, unsigned serial)
{
    enum { FIXED = 24 };
    snprintf(m->main[1], LINELEN, "@ IN SOA ns1 hostmaster %u 7200 900 1209600 300", serial);
    unsigned edits = 1 + walk_rnd(6);
    for (unsigned e = 0; e < edits && m->nmain < MAXLINES - 2; e++) {
        size_t span = m->nmain - FIXED, at = FIXED + (span ? walk_rnd((unsigned)span) : 0);
        unsigned h = walk_rnd(HOSTS), x = walk_rnd(1000);
        switch (walk_rnd(11)) {
        case 0: /* an address changed */
            snprintf(m->main[at], LINELEN, "h%u A 10.9.%u.%u", h, x >> 8, x & 255);
            break;
        case 1: /* a line gone */
            if (span > 1) {
                memmove(m->main[at], m->main[at + 1], (m->nmain - at - 1) * LINELEN);
                m->nmain--;
            }
            break;
        case 2: /* a line twice */
            addf(m, "%s", m->main[at]);
            break;
        case 3: { /* a line moved to the end */
            char line[LINELEN];
            memcpy(line, m->main[at], LINELEN);
            memmove(m->main[at], m->main[at + 1], (m->nmain - at - 1) * LINELEN);
            memcpy(m->main[m->nmain - 1], line, LINELEN);
            break;
        }
        case 4: /* a name below a host, or below a new empty non-terminal */
            addf(m, x % 2 ? "n%u.h%u A 192.0.2.%u" : "n%u.ent%u.h%u A 192.0.2.%u", x % 7, h,
                 x % 2 ? x % 250 : h % 3, x % 250);
            break;
        case 5: /* a wildcard */
            addf(m, "*.h%u TXT \"wild %u\"", h, x);
            break;
        case 6: /* MX and SRV naming hosts that may not be there */
            addf(m, "mx%u MX %u h%u", x % 9, x % 50, h);
            addf(m, "_s%u._tcp SRV 0 1 53 n%u.h%u", x % 5, x % 7, h);
            break;
        case 7: /* another TTL for a host's address */
            addf(m, "h%u %u A 10.0.%u.%u", h, 60 + x, h >> 8, h & 255);
            break;
        case 8: /* upper case owner, the same data */
            addf(m, "H%u.D.TEST. TXT \"host %u\"", h, h);
            break;
        case 9: /* a CNAME where there may be other data (the load refuses it: so must the
                   patch) */
            if (x % 10 == 0)
                addf(m, "h%u CNAME h%u", h, (h + 1) % HOSTS);
            else
                addf(m, "c%u CNAME h%u", x % 11, h);
            break;
        default: /* a name and all its lines gone */
            for (size_t i = FIXED; i < m->nmain;) {
                char pre[16];
                int pl = snprintf(pre, sizeof(pre), "h%u ", h);
                if (strncmp(m->main[i], pre, (size_t)pl) == 0) {
                    memmove(m->main[i], m->main[i + 1], (m->nmain - i - 1) * LINELEN);
                    m->nmain--;
                } else {
                    i++;
                }
            }
        }
    }
}

static void test_random_edits(void **state)
{
    (void)state;
    const char *seed = getenv("TERN_WALK_SEED");
    if (seed)
        walk_rng ^= strtoull(seed, NULL, 0) * 0x9E3779B97F4A7C15ull;
    gen(&work_m, HOSTS);
    write_model(&work_m);
    zone_t *cur = load();
    unsigned patched = 0, same = 0, built = 0, refused = 0;
    for (unsigned step = 0; step < 120; step++) {
        struct model keep = work_m;
        walk_edit(&work_m, 2 + step);
        write_model(&work_m);
        zone_t *out = NULL, *full = NULL;
        char err[512], lerr[512];
        ztu_capture_begin(); /* out-of-zone and TTL warnings: not this test's business */
        int lrc = zone_file_load(ORIGIN, main_path, &full, lerr, sizeof(lerr));
        int rc = zone_file_patch(ORIGIN, main_path, NULL, cur, &out, err, sizeof(err));
        char log[8192];
        ztu_capture_end(log, sizeof(log));
        if (lrc != 0) {
            /* a file the load refuses: the patch refuses it as well, with the same words */
            if (rc >= 0 || strcmp(err, lerr) != 0)
                fail_msg("step %u: load %d '%s', patch %d '%s'", step, lrc, lerr, rc, err);
            refused++;
            work_m = keep; /* the operator mends the file */
            continue;
        }
        char tag[64];
        snprintf(tag, sizeof(tag), "step %u (rc %d)", step, rc);
        if (rc == 0) {
            patched++;
            assert_int_equal(out->rr_count, full->rr_count);
            same_answers(out, full, tag);
            zone_free(cur);
            cur = out;
        } else if (rc == ZONE_FILE_SAME) {
            same++;
            same_answers(cur, full, tag);
        } else if (rc == ZONE_FILE_BUILD) {
            if (getenv("WALK_DEBUG"))
                fprintf(stderr, "%s: %s\n", tag, err);
            built++;
            zone_free(cur);
            cur = zone_retain(full);
        } else {
            fail_msg("%s: %s", tag, err);
        }
        zone_free(full);
    }
    zone_free(cur);
    print_message("%u patched, %u unchanged, %u read in full, %u refused (rng %llx)\n", patched,
                  same, built, refused, (unsigned long long)walk_rng);
    assert_true(patched > 60);
}

/* The diff itself: what matches, what does not, and what is out of the zone. */
static void wname(uint8_t *w, const char *s)
{
    const char *why;
    assert_true(dname_from_str(s, strlen(s), false, w, &why) > 0);
}

static void test_diff_api(void **state)
{
    (void)state;
    gen(&base_m, 10);
    write_model(&base_m);
    zone_t *base = load();
    zone_diff_t *d = zone_diff_new(base);
    assert_non_null(d);
    uint8_t o[DNAME_MAXLEN];
    static const uint8_t a5[] = {10, 0, 0, 5}, a6[] = {10, 0, 0, 6}, rr10[] = {192, 0, 2, 10},
                         rr11[] = {192, 0, 2, 11};

    wname(o, "foo.other.test.");
    assert_int_equal(zone_diff_add(d, o, WIRE_T_A, 1, 3600, a5, 4), TERN_EOUTZONE);
    wname(o, "H5.D.test."); /* any case */
    assert_int_equal(zone_diff_add(d, o, WIRE_T_A, 1, 3600, a5, 4), 0);
    assert_false(zone_diff_changed(d, o));
    assert_int_equal(zone_diff_add(d, o, WIRE_T_A, 1, 3600, a5, 4), 0); /* twice */
    assert_true(zone_diff_changed(d, o));
    wname(o, "h6.d.test.");
    assert_int_equal(zone_diff_add(d, o, WIRE_T_A, 1, 60, a6, 4), 0); /* another TTL */
    assert_true(zone_diff_changed(d, o));
    wname(o, "rr.d.test."); /* out of order */
    assert_int_equal(zone_diff_add(d, o, WIRE_T_A, 1, 3600, rr11, 4), 0);
    assert_true(zone_diff_changed(d, o));
    wname(o, "h7.d.test.");
    assert_int_equal(zone_diff_add(d, o, WIRE_T_A, 3, 3600, a6, 4), 0); /* class CH */
    assert_true(zone_diff_changed(d, o));
    wname(o, "new.b.c.d.test.");
    assert_int_equal(zone_diff_add(d, o, WIRE_T_A, 1, 3600, rr10, 4), 0);
    wname(o, "b.c.d.test."); /* an empty non-terminal in the base */
    assert_int_equal(zone_diff_add(d, o, WIRE_T_A, 1, 3600, rr10, 4), 0);
    assert_true(zone_diff_changed(d, o));

    const uint8_t *const *names;
    size_t n;
    assert_int_equal(zone_diff_finish(d, &names, &n), 0);
    /* every name with data (none had all its RRs given), and the two the base has no data at */
    size_t with_data = 0;
    for (uint32_t i = 0; i < base->node_count; i++)
        with_data += zone_node_at(base, i)->nrrsets > 0;
    assert_int_equal(n, with_data + 2);
    wname(o, "new.b.c.d.test.");
    assert_true(zone_diff_changed(d, o));
    wname(o, "NS1.d.test."); /* never given: removed */
    assert_true(zone_diff_changed(d, o));
    for (size_t i = 0; i < n; i++)
        assert_true(zone_diff_changed(d, names[i]));
    assert_int_equal(zone_diff_add(d, o, WIRE_T_A, 1, 3600, a5, 4), TERN_EINVAL);
    zone_diff_free(d);
    zone_free(base);
}

/*
 * The diff's memory is O(nodes), not O(records): zone_diff_new() makes two arrays, a u32 per
 * base node (the number of its first RR) and a bit per base RR, and afterwards only the changed
 * names grow (a set of 4-byte slots, the names and their offsets). So, with no change, the
 * footprint is at most 8 bytes per node plus a bit per RR (plus the struct); a whole zone's
 * records given back from the base itself leave it there and change nothing.
 */
static void test_memory(void **state)
{
    (void)state;
    gen(&base_m, 5000);
    write_model(&base_m);
    zone_t *base = load();
    zone_diff_t *d = zone_diff_new(base);
    assert_non_null(d);
    size_t bound = 8 * base->node_count + base->rr_count / 8 + 1024;
    size_t fp = zone_diff_footprint(d);
    print_message("%zu nodes, %zu RRs: %zu bytes (bound %zu)\n", base->node_count, base->rr_count,
                  fp, bound);
    assert_true(fp <= bound);
    for (uint32_t i = 0; i < base->node_count; i++) {
        const zone_node_t *nd = zone_node_at(base, i);
        for (unsigned k = 0; k < nd->nrrsets; k++) {
            const zone_rrset_t *s = &nd->rrsets[k];
            const uint8_t *rd = s->rdata;
            for (unsigned j = 0; j < s->count; j++) {
                uint16_t l = (uint16_t)(rd[0] << 8 | rd[1]);
                assert_int_equal(zone_diff_add(d, nd->name, s->type, 1, s->ttl, rd + 2, l), 0);
                rd += 2 + l;
            }
        }
    }
    const uint8_t *const *names;
    size_t n;
    assert_int_equal(zone_diff_finish(d, &names, &n), 0);
    assert_int_equal(n, 0);
    assert_true(zone_diff_footprint(d) <= bound);
    zone_diff_free(d);
    zone_free(base);
}

static int setup(void **state)
{
    (void)state;
    if (!mkdtemp(dir))
        return -1;
    snprintf(main_path, sizeof(main_path), "%s/main.zone", dir);
    snprintf(inc_path, sizeof(inc_path), "%s/inc.zone", dir);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    unlink(main_path);
    unlink(inc_path);
    rmdir(dir);
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_edits),       cmocka_unit_test(test_owner_forms),
        cmocka_unit_test(test_warn_once),   cmocka_unit_test(test_apex),
        cmocka_unit_test(test_needs_build), cmocka_unit_test(test_large_change),
        cmocka_unit_test(test_errors),      cmocka_unit_test(test_files_change),
        cmocka_unit_test(test_sequence),    cmocka_unit_test(test_diff_api),
        cmocka_unit_test(test_memory),      cmocka_unit_test(test_random_edits),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
