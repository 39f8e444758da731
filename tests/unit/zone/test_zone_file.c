/*
 * test_zone_file.c — master files through ldns: directives, $INCLUDE, RFC 3597 types,
 * out-of-zone records skipped with a warning, and each error reported with its file and line.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "tern/common/err.h"
#include "tern/zone/zone_file.h"
#include "zone_test_util.h"

static char *data_path(const char *rel)
{
    static char buf[4][1024];
    static int k;
    const char *dir = getenv("TERN_TEST_DATA");
    assert_non_null(dir);
    char *p = buf[k++ % 4];
    snprintf(p, sizeof(buf[0]), "%s/zone/%s", dir, rel);
    return p;
}

/* Run zone_file_load with stderr captured into log (what log_warn wrote). */
static int load_capture(const char *origin, const char *rel, zone_t **z, char *err, size_t errlen,
                        char *log, size_t loglen)
{
    ztu_capture_begin();
    int rc = zone_file_load(origin, data_path(rel), z, err, errlen);
    ztu_capture_end(log, loglen);
    return rc;
}

static const zone_node_t *node(const zone_t *z, const char *name)
{
    dname_view_t v;
    view_of(&v, name);
    return zone_find_node(z, v.lc, v.len, v.hash[0]);
}

static const zone_rrset_t *rrset(const zone_t *z, const char *name, uint16_t type)
{
    const zone_node_t *n = node(z, name);
    return n ? zone_node_rrset(n, type) : NULL;
}

static void test_good_zone(void **state)
{
    zone_t *z = NULL;
    char err[512], log[4096];
    int rc = load_capture("example.test", "good.zone", &z, err, sizeof(err), log, sizeof(log));
    if (rc)
        fail_msg("load: %s", err);
    assert_int_equal(z->serial, 2024010101);
    assert_int_equal(z->soa->ttl, 3600); /* $TTL 1h */
    assert_int_equal(z->neg_soa->ttl, 300);
    assert_int_equal(z->apex_ns->count, 2);
    assert_string_equal(z->source, data_path("good.zone"));

    /* multi-line SOA with comments; RNAME case kept in RDATA */
    assert_non_null(memmem(z->soa->rdata, z->soa->rdata_len,
                           "\x0aHostmaster\x07"
                           "Example",
                           19));

    /* blank owners continue WWW; explicit TTL 600 only on its own line */
    const zone_rrset_t *a = rrset(z, "www.example.test.", 1);
    assert_non_null(a);
    assert_int_equal(a->ttl, 600);
    assert_memory_equal(a->rdata, "\x00\x04\xc0\x00\x02\x0a", 6);
    const zone_rrset_t *aaaa = rrset(z, "www.example.test.", 28);
    assert_non_null(aaaa);
    assert_int_equal(aaaa->ttl, 3600);
    /* TXT: ';' inside quotes is data, parentheses join the strings */
    const zone_rrset_t *txt = rrset(z, "www.example.test.", 16);
    assert_non_null(txt);
    assert_int_equal(txt->rdata_len, 2 + 1 + 24 + 1 + 15);
    assert_memory_equal(txt->rdata + 2,
                        "\x18semi;colon inside quotes\x0f"
                        "and parentheses",
                        41);

    /* RFC 3597: an unknown type, and a known type in generic form */
    const zone_rrset_t *u = rrset(z, "u.example.test.", 65280);
    assert_non_null(u);
    assert_int_equal(u->rdata_len, 6);
    assert_memory_equal(u->rdata, "\x00\x04\x0a\x00\x00\x01", 6);
    const zone_rrset_t *k = rrset(z, "k.example.test.", 1);
    assert_non_null(k);
    assert_memory_equal(k->rdata, "\x00\x04\xc0\x00\x02\x02", 6);

    /* out-of-zone: skipped with a warning naming file:line */
    assert_null(node(z, "stray.other.test."));
    assert_non_null(strstr(log, "good.zone:17:"));
    assert_non_null(strstr(log, "outside zone"));
    assert_non_null(strstr(log, "skipped"));

    /* $ORIGIN and $TTL */
    assert_int_equal(rrset(z, "a.sub.example.test.", 1)->ttl, 3600);
    assert_int_equal(rrset(z, "b.sub.example.test.", 1)->ttl, 120);
    /* $INCLUDE with an origin, relative path, nested include relative to inc/ */
    assert_int_equal(rrset(z, "h1.inc.example.test.", 1)->ttl, 120);
    assert_non_null(rrset(z, "h2.deeper.inc.example.test.", 1));
    assert_int_equal(rrset(z, "m1.inc.example.test.", 1)->ttl, 77);
    /* after the include the parent's origin is back */
    assert_non_null(rrset(z, "after.sub.example.test.", 1));
    assert_null(node(z, "after.deeper.inc.example.test."));
    /* MX target resolved */
    const zone_rrset_t *mx = rrset(z, "mx.example.test.", 15);
    assert_ptr_equal(zone_rrset_target(z, mx, 0), node(z, "www.example.test."));
    assert_ptr_equal(zone_rrset_target(z, z->apex_ns, 0), node(z, "ns1.example.test."));
    assert_null(zone_rrset_target(z, z->apex_ns, 1));
    /* 17 records in the files, one out of zone */
    assert_int_equal(z->rr_count, 16);
    zone_free(z);
}

static void test_origin_forms(void **state)
{
    zone_t *z = NULL;
    char err[512], log[4096];
    assert_int_equal(
        load_capture("Example.Test.", "good.zone", &z, err, sizeof(err), log, sizeof(log)), 0);
    assert_memory_equal(z->apex,
                        "\x07"
                        "example\x04test",
                        14);
    zone_free(z);
    /* the same file under another origin: relative names follow it, absolute ones do not */
    assert_int_equal(
        load_capture("other.test", "good.zone", &z, err, sizeof(err), log, sizeof(log)), 0);
    assert_non_null(node(z, "www.other.test."));
    assert_non_null(node(z, "stray.other.test."));
    assert_null(node(z, "a.sub.example.test."));
    assert_non_null(strstr(log, "good.zone:19: a.sub.example.test. is outside zone other.test."));
    assert_non_null(strstr(log, "more.inc:1:"));
    assert_null(strstr(log, "good.zone:17:"));
    zone_free(z);
}

static void test_default_ttl(void **state)
{
    zone_t *z = NULL;
    char err[512], log[4096];
    int rc =
        load_capture("example.test", "ttl_default.zone", &z, err, sizeof(err), log, sizeof(log));
    if (rc)
        fail_msg("load: %s", err);
    /* no $TTL yet: 3600 (ldns/NSD default); after "$TTL 0": really 0 */
    assert_int_equal(z->soa->ttl, 3600);
    assert_int_equal(rrset(z, "ns1.example.test.", 1)->ttl, 3600);
    assert_int_equal(rrset(z, "z.example.test.", 1)->ttl, 0);
    zone_free(z);
}

struct err_case {
    const char *file;
    int rc;
    const char *where; /* "file:line:" suffix expected in the message */
    const char *what;  /* a word expected in the message */
};

static void test_errors(void **state)
{
    static const struct err_case cases[] = {
        {"err_syntax.zone", TERN_ESYNTAX, "err_syntax.zone:5:", "rdata"},
        {"err_nosoa.zone", TERN_ENOSOA, "err_nosoa.zone: no SOA", "zone example.test."},
        {"err_nons.zone", TERN_ENONS, "err_nons.zone: no NS", "zone example.test."},
        {"err_cname_other.zone", TERN_ECNAME, "err_cname_other.zone:7:", "CNAME and other"},
        {"err_two_cname.zone", TERN_ECNAME, "err_two_cname.zone:6:", "second CNAME"},
        {"err_class.zone", TERN_EINVAL, "err_class.zone:6:", "class 3"},
        {"err_meta.zone", TERN_EINVAL, "err_meta.zone:5:", "meta"},
        {"err_two_soa.zone", TERN_EINVAL, "err_two_soa.zone:4:", "SOA"},
        {"err_paren.zone", TERN_ESYNTAX, "err_paren.zone:4:", "unbalanced"},
        {"err_ttl.zone", TERN_ESYNTAX, "err_ttl.zone:4:", "$TTL"},
        {"err_include_missing.zone", TERN_ENOENT, "err_include_missing.zone:4:", "nonexistent"},
        {"loop/self.zone", TERN_ELIMIT, "self.zone:4:", "nested"},
        {"no_such_file.zone", TERN_ENOENT, "no_such_file.zone", "No such file"},
    };
    for (size_t i = 0; i < TERN_ARRAY_SIZE(cases); i++) {
        zone_t *z = (zone_t *)1;
        char err[512], log[4096];
        int rc =
            load_capture("example.test", cases[i].file, &z, err, sizeof(err), log, sizeof(log));
        print_message("%s -> %d %s\n", cases[i].file, rc, err);
        assert_int_equal(rc, cases[i].rc);
        assert_null(z);
        if (cases[i].where)
            assert_non_null(strstr(err, cases[i].where));
        else
            assert_non_null(strstr(err, "zone example.test."));
        assert_non_null(strstr(err, cases[i].what));
    }
}

/* Write text to dir/name; returns the path (static buffer per call site). */
static const char *write_file(const char *dir, const char *name, const char *text, char *path,
                              size_t len)
{
    snprintf(path, len, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
    return path;
}

static long max_rss_kb(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_maxrss;
}

/* Files that are not zone files must fail the load at once, without reading them whole: a FIFO
 * (which would block the open for good), a directory, a 2 GB sparse file, a line without end,
 * NUL bytes; and unknown types say so. */
static void test_hostile_files(void **state)
{
    (void)state;
    char dir[] = "/tmp/tern-zf-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char path[1024], inc[1024], err[512];
    zone_t *z = NULL;
    static const char head[] = "$TTL 60\n@ SOA ns h 1 2 3 4 5\n@ NS ns\nns A 192.0.2.1\n";

    snprintf(path, sizeof(path), "%s/fifo.zone", dir);
    assert_int_equal(mkfifo(path, 0600), 0);
    assert_int_equal(zone_file_load("ex.test", path, &z, err, sizeof(err)), TERN_EINVAL);
    assert_non_null(strstr(err, "fifo.zone: is not a regular file (a FIFO)"));
    /* the same FIFO as an include: named with the line that includes it */
    char text[256];
    snprintf(text, sizeof(text), "%s$INCLUDE fifo.zone\n", head);
    write_file(dir, "inc.zone", text, inc, sizeof(inc));
    assert_int_equal(zone_file_load("ex.test", inc, &z, err, sizeof(err)), TERN_EINVAL);
    assert_non_null(strstr(err, "inc.zone:5: $INCLUDE "));
    assert_non_null(strstr(err, "is not a regular file"));

    assert_int_equal(zone_file_load("ex.test", dir, &z, err, sizeof(err)), TERN_EINVAL);
    assert_non_null(strstr(err, ": is a directory"));

    /* 2 GB of holes: refused at its first bytes, memory untouched */
    snprintf(path, sizeof(path), "%s/sparse.zone", dir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    assert_int_equal(ftruncate(fileno(f), 2LL << 30), 0);
    fclose(f);
    long before = max_rss_kb();
    assert_int_equal(zone_file_load("ex.test", path, &z, err, sizeof(err)), TERN_ESYNTAX);
    assert_non_null(strstr(err, "sparse.zone:1: NUL byte"));
    assert_true(max_rss_kb() - before < 64 * 1024);

    /* one endless line: refused at the limit, not at the end */
    snprintf(path, sizeof(path), "%s/long.zone", dir);
    f = fopen(path, "w");
    assert_non_null(f);
    fputs(head, f);
    for (int i = 0; i < 1 << 20; i++)
        fputc('a', f);
    fclose(f);
    assert_int_equal(zone_file_load("ex.test", path, &z, err, sizeof(err)), TERN_ESYNTAX);
    assert_non_null(strstr(err, "long.zone:5: line longer than"));

    snprintf(text, sizeof(text), "%swww 60 IN FOO 1.2.3.4\n", head);
    write_file(dir, "type.zone", text, path, sizeof(path));
    assert_int_equal(zone_file_load("ex.test", path, &z, err, sizeof(err)), TERN_ESYNTAX);
    assert_non_null(strstr(err, "type.zone:5: unknown type in field 4"));
    snprintf(text, sizeof(text), "%swww A 192.0.2.9\n  BAR x\n", head);
    write_file(dir, "type2.zone", text, path, sizeof(path));
    assert_int_equal(zone_file_load("ex.test", path, &z, err, sizeof(err)), TERN_ESYNTAX);
    assert_non_null(strstr(err, "type2.zone:6: unknown type in field 1"));
    assert_null(z);

    /* A file that does not parse may be one only root may read ($INCLUDE /etc/shadow, checked
     * as root): its error names the file and line, never any of its text. */
    static const char *const secrets[] = {
        "root:$y$j9T$S3CRETsalt$S3CREThash:19000:0:99999:7:::\n",
        "password S3CRET\n",
        "www 60 IN A S3CRET\n",
        "$S3CRET here\n",
        "$INCLUDE x S3CRET..\n",
        "www IN S3CRET \"quoted\n",
    };
    for (size_t i = 0; i < TERN_ARRAY_SIZE(secrets); i++) {
        write_file(dir, "secret.txt", secrets[i], inc, sizeof(inc));
        snprintf(text, sizeof(text), "%s$INCLUDE secret.txt\n", head);
        write_file(dir, "inc_secret.zone", text, path, sizeof(path));
        assert_true(zone_file_load("ex.test", path, &z, err, sizeof(err)) < 0);
        assert_null(z);
        if (!strstr(err, "secret.txt:1: ") || strstr(err, "S3CRET"))
            fail_msg("secret %zu: want secret.txt:1 and none of its text, got '%s'", i, err);
    }

    static const char *const names[] = {"fifo.zone",  "inc.zone",       "sparse.zone",
                                        "long.zone",  "type.zone",      "type2.zone",
                                        "secret.txt", "inc_secret.zone"};
    for (size_t i = 0; i < TERN_ARRAY_SIZE(names); i++) {
        snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
        unlink(path);
    }
    rmdir(dir);
}

static void test_bad_origin(void **state)
{
    zone_t *z;
    char err[256];
    char origin[400] = "";
    for (int i = 0; i < 130; i++)
        strcat(origin, "ab.");
    assert_int_equal(zone_file_load(origin, data_path("good.zone"), &z, err, sizeof(err)),
                     TERN_EINVAL);
    assert_null(z);
    assert_non_null(strstr(err, "bad zone origin"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_good_zone),   cmocka_unit_test(test_origin_forms),
        cmocka_unit_test(test_default_ttl), cmocka_unit_test(test_errors),
        cmocka_unit_test(test_bad_origin),  cmocka_unit_test(test_hostile_files),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
