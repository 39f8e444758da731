/*
 * test_xfr_catalog.c — catalog zones consumed (src/xfr/xfr_catalog_parse.c, xfr_catalog.c):
 *
 *   parse      a version 2 catalog's members, group and coo properties; a zone under two ids
 *              (the first wins), a member with two PTRs (ignored), a group that is not text
 *   version    version "1", several version records, no version: refused, naming the label
 *   list_file  the member list written and read back; a damaged one refused with file:line
 *   path       file names in the directory: every byte but [A-Za-z0-9.-_] as '_'
 *   members    the transfer service (no threads) told of a catalog's versions: members added,
 *              a unique id change reset (data dropped), a member dropped retired (its copy
 *              removed), a configured zone of the same name left alone; each told through the
 *              hooks in order; kept across a reload; read back from the directory by a new
 *              service with its copy (a restart); retired when the catalog leaves the config
 *   coo        a member moves to the catalog its coo property names, and only then
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "tern/common/err.h"
#include "tern/conf/config.h"
#include "tern/xfr/xfr.h"
#include "tern/xfr/xfr_catalog.h"
#include "tern/zone/zone_file.h"

#include "xfr_int.h"

static char dir[64];

static void make_dir(void)
{
    snprintf(dir, sizeof(dir), "/tmp/tern_catalog_XXXXXX");
    assert_non_null(mkdtemp(dir));
}

static void remove_dir(void)
{
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
}

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

/* origin's zone from text (its apex SOA and NS added). */
static zone_t *load(const char *origin, const char *text)
{
    char path[128], err[512];
    snprintf(path, sizeof(path), "%s/z.zone", dir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fprintf(f, "$ORIGIN %s.\n$TTL 0\n@ SOA invalid. invalid. 1 60 60 3600 0\n@ NS invalid.\n%s",
            origin, text);
    fclose(f);
    zone_t *z = NULL;
    if (zone_file_load(origin, path, &z, err, sizeof(err)) < 0)
        fail_msg("zone_file_load: %s", err);
    unlink(path);
    return z;
}

static void test_parse(void **state)
{
    (void)state;
    make_dir();
    zone_t *z = load("cat.test", "version TXT \"2\"\n"
                                 "a.zones PTR m1.test.\n"
                                 "b.zones PTR M2.Test.\n"
                                 "group.b.zones TXT \"blue\"\n"
                                 "coo.b.zones PTR other.cat.\n"
                                 "c.zones PTR m1.test.\n" /* m1 twice: a wins */
                                 "d.zones PTR m4.test.\n" /* two PTRs: ignored */
                                 "d.zones PTR m5.test.\n"
                                 "e.zones PTR m6.test.\n"
                                 "group.e.zones TXT \"two words\"\n" /* not a group name */
                                 "zones TXT \"not a member\"\n"
                                 "x.y.zones PTR deep.test.\n"); /* not a member's name */
    xfr_catalog_list_t l = {0};
    char err[512];
    assert_int_equal(xfr_catalog_parse(z, &l, err, sizeof(err)), 0);
    assert_int_equal(l.n, 3);
    const xfr_catalog_member_t *m = xfr_catalog_list_find(&l, "m1.test");
    assert_non_null(m);
    assert_true(strcmp(m->id, "a") == 0 || strcmp(m->id, "c") == 0); /* the first in the zone */
    assert_null(m->group);
    assert_null(m->coo);
    m = xfr_catalog_list_find(&l, "m2.test");
    assert_non_null(m);
    assert_string_equal(m->id, "b");
    assert_string_equal(m->group, "blue");
    assert_string_equal(m->coo, "other.cat");
    m = xfr_catalog_list_find(&l, "m6.test");
    assert_non_null(m);
    assert_null(m->group);
    assert_null(xfr_catalog_list_find(&l, "m4.test"));
    assert_null(xfr_catalog_list_find(&l, "m5.test"));
    assert_null(xfr_catalog_list_find(&l, "deep.test"));
    xfr_catalog_list_clear(&l);
    zone_free(z);
    /* no members at all: an empty catalog */
    z = load("cat.test", "version TXT \"2\"\n");
    assert_int_equal(xfr_catalog_parse(z, &l, err, sizeof(err)), 0);
    assert_int_equal(l.n, 0);
    xfr_catalog_list_clear(&l);
    zone_free(z);
    remove_dir();
}

static void test_version(void **state)
{
    (void)state;
    make_dir();
    xfr_catalog_list_t l = {0};
    char err[512];
    zone_t *z = load("cat.test", "version TXT \"1\"\na.zones PTR m1.test.\n");
    assert_int_equal(xfr_catalog_parse(z, &l, err, sizeof(err)), TERN_EINVAL);
    assert_string_equal(err, "catalog cat.test: version.cat.test TXT is \"1\", not \"2\": only "
                             "version 2 (RFC 9432) is supported");
    assert_int_equal(l.n, 0);
    zone_free(z);
    z = load("cat.test", "version TXT \"2\"\nversion TXT \"1\"\n");
    assert_int_equal(xfr_catalog_parse(z, &l, err, sizeof(err)), TERN_EINVAL);
    assert_non_null(strstr(err, "version.cat.test TXT is several records"));
    zone_free(z);
    z = load("cat.test", "a.zones PTR m1.test.\n");
    assert_int_equal(xfr_catalog_parse(z, &l, err, sizeof(err)), TERN_EINVAL);
    assert_string_equal(err, "catalog cat.test: no version property (version.cat.test TXT): not a "
                             "catalog zone tern can follow");
    zone_free(z);
    remove_dir();
}

static void test_list_file(void **state)
{
    (void)state;
    make_dir();
    char path[128], err[512];
    snprintf(path, sizeof(path), "%s/cat.test.members", dir);
    xfr_catalog_list_t l = {0}, r = {0};
    assert_int_equal(xfr_catalog_list_read(path, &r, err, sizeof(err)), TERN_ENOENT);
    assert_int_equal(xfr_catalog_list_add(&l, "m1.test", "a", NULL, NULL), 0);
    assert_int_equal(xfr_catalog_list_add(&l, "m2.test", "b\\.c", "blue", "other.cat"), 0);
    assert_int_equal(xfr_catalog_list_write(&l, path, err, sizeof(err)), 0);
    assert_int_equal(xfr_catalog_list_read(path, &r, err, sizeof(err)), 0);
    assert_int_equal(r.n, 2);
    for (size_t i = 0; i < 2; i++) {
        assert_string_equal(r.m[i].zone, l.m[i].zone);
        assert_string_equal(r.m[i].id, l.m[i].id);
    }
    assert_null(r.m[0].group);
    assert_null(r.m[0].coo);
    assert_string_equal(r.m[1].group, "blue");
    assert_string_equal(r.m[1].coo, "other.cat");
    xfr_catalog_list_clear(&r);
    xfr_catalog_list_clear(&l);
    write_file(path, "tern-catalog-members 1\nm1.test\ta\t-\t-\nm2.test\tb\t-\n");
    assert_int_equal(xfr_catalog_list_read(path, &r, err, sizeof(err)), TERN_ESYNTAX);
    assert_non_null(strstr(err, "cat.test.members:3: expected zone, id, group and coo"));
    assert_int_equal(r.n, 0);
    write_file(path, "something else\n");
    assert_int_equal(xfr_catalog_list_read(path, &r, err, sizeof(err)), TERN_ESYNTAX);
    assert_non_null(strstr(err, ":1: not a member list"));
    write_file(path, "tern-catalog-members 1\nM1.test\ta\t-\t-\n"); /* not a canonical key */
    assert_int_equal(xfr_catalog_list_read(path, &r, err, sizeof(err)), TERN_ESYNTAX);
    remove_dir();
}

static void test_path(void **state)
{
    (void)state;
    char *p = xfr_catalog_path("/d", "a/b.test", ".zone");
    assert_string_equal(p, "/d/a_b.test.zone");
    free(p);
    p = xfr_catalog_path("/d", "x\\032y-z_1.test", ".members");
    assert_string_equal(p, "/d/x_032y-z_1.test.members");
    free(p);
}

/* ---- the service ---------------------------------------------------------------------------- */

/* What the hooks were told, in order: "+key" (a version), "0key" (no data), "-key" (gone). */
static char events[4096];

static void on_in(void *ctx, const char *key, zone_t *z)
{
    (void)ctx;
    size_t l = strlen(events);
    snprintf(events + l, sizeof(events) - l, "%s%s ", z ? "+" : "0", key);
    zone_free(z);
}

static void on_gone(void *ctx, const char *key)
{
    (void)ctx;
    size_t l = strlen(events);
    snprintf(events + l, sizeof(events) - l, "-%s ", key);
}

static void expect_events(const char *want)
{
    if (strcmp(events, want) != 0)
        fail_msg("events '%s', want '%s'", events, want);
    events[0] = '\0';
}

static config_t load_config(const char *text)
{
    char path[128], err[512];
    snprintf(path, sizeof(path), "%s/ternd.yaml", dir);
    write_file(path, text);
    config_t c;
    config_init(&c);
    if (config_load(&c, path, err, sizeof(err)) < 0)
        fail_msg("config_load: %s", err);
    return c;
}

static xfr_t *service(const answer_view_t *const *view)
{
    xfr_hooks_t h = {.member_in = on_in, .member_gone = on_gone};
    xfr_t *x = xfr_new(view, &h);
    assert_non_null(x);
    return x;
}

/* Whether x follows key as a catalog member of cat (with id, when not NULL). */
static bool member(xfr_t *x, const char *key, const char *cat, const char *id)
{
    pthread_mutex_lock(&x->mu);
    const struct zst *z = xfr_zone_find(x, key);
    bool yes = z && z->member_of && strcmp(z->member_of, cat) == 0 &&
               (!id || strcmp(z->member_id, id) == 0);
    pthread_mutex_unlock(&x->mu);
    return yes;
}

static const char *CONFIG = "zones:\n"
                            "  - origin: cat.test\n"
                            "    primary: 192.0.2.1\n"
                            "    catalog_consumer:\n"
                            "      directory: cat\n"
                            "      groups: {blue: {primary: 192.0.2.9@5300}}\n"
                            "  - {origin: m3.test, primary: 192.0.2.7}\n";

static void test_members(void **state)
{
    (void)state;
    make_dir();
    const answer_view_t *view = NULL;
    events[0] = '\0';
    config_t cfg = load_config(CONFIG);
    xfr_t *x = service(&view);
    assert_int_equal(xfr_configure(x, &cfg), 0);
    expect_events(""); /* nothing on disk yet */
    zone_t *v1 = load("cat.test", "version TXT \"2\"\n"
                                  "a.zones PTR m1.test.\nb.zones PTR m2.test.\n"
                                  "group.b.zones TXT \"blue\"\nc.zones PTR m3.test.\n");
    xfr_catalog_refreshed(x, "cat.test", v1);
    expect_events("0m1.test 0m2.test "); /* m3.test is configured: left alone */
    assert_true(member(x, "m1.test", "cat.test", "a"));
    assert_true(member(x, "m2.test", "cat.test", "b"));
    assert_false(member(x, "m3.test", "cat.test", NULL));
    pthread_mutex_lock(&x->mu);
    const struct zst *m2 = xfr_zone_find(x, "m2.test");
    assert_int_equal(m2->nprim, 1);
    assert_string_equal(m2->prim[0].text, "192.0.2.9@5300"); /* its group's */
    const struct zst *m1 = xfr_zone_find(x, "m1.test");
    assert_string_equal(m1->prim[0].text, "192.0.2.1@53"); /* the catalog's */
    pthread_mutex_unlock(&x->mu);
    char path[160];
    snprintf(path, sizeof(path), "%s/cat/cat.test.members", dir);
    assert_int_equal(access(path, F_OK), 0);
    /* the copies the pullers would write */
    char c1[160], c2[160];
    snprintf(c1, sizeof(c1), "%s/cat/m1.test.zone", dir);
    snprintf(c2, sizeof(c2), "%s/cat/m2.test.zone", dir);
    write_file(c1, "$ORIGIN m1.test.\n@ 60 SOA ns. h. 7 60 60 3600 0\n@ 60 NS ns.\n");
    write_file(c2, "$ORIGIN m2.test.\n@ 60 SOA ns. h. 7 60 60 3600 0\n@ 60 NS ns.\n");
    /* m1's id changes (a reset: its copy goes), m2 leaves (retired: its copy goes) */
    zone_t *v2 = load("cat.test", "version TXT \"2\"\na2.zones PTR m1.test.\n");
    xfr_catalog_refreshed(x, "cat.test", v2);
    expect_events("-m2.test 0m1.test ");
    assert_true(member(x, "m1.test", "cat.test", "a2"));
    assert_false(member(x, "m2.test", "cat.test", NULL));
    assert_int_not_equal(access(c1, F_OK), 0);
    assert_int_not_equal(access(c2, F_OK), 0);
    /* a refused version changes nothing */
    zone_t *bad = load("cat.test", "version TXT \"1\"\nz.zones PTR m9.test.\n");
    xfr_catalog_refreshed(x, "cat.test", bad);
    expect_events("");
    assert_false(member(x, "m9.test", "cat.test", NULL));
    /* a reload keeps the members, and tells nothing */
    assert_int_equal(xfr_configure(x, &cfg), 0);
    expect_events("");
    assert_true(member(x, "m1.test", "cat.test", "a2"));
    xfr_free(x);
    /* a restart: the members from the directory, m1 with its copy */
    write_file(c1, "$ORIGIN m1.test.\n@ 60 SOA ns. h. 7 60 60 3600 0\n@ 60 NS ns.\n");
    x = service(&view);
    assert_int_equal(xfr_configure(x, &cfg), 0);
    expect_events("+m1.test ");
    assert_true(member(x, "m1.test", "cat.test", "a2"));
    /* the catalog leaves the config: its members retired */
    config_t none = load_config("zones: [{origin: m3.test, primary: 192.0.2.7}]\n");
    assert_int_equal(xfr_configure(x, &none), 0);
    expect_events("-m1.test ");
    assert_false(member(x, "m1.test", "cat.test", NULL));
    xfr_free(x);
    config_free(&none);
    config_free(&cfg);
    zone_free(v1);
    zone_free(v2);
    zone_free(bad);
    remove_dir();
}

static void test_coo(void **state)
{
    (void)state;
    make_dir();
    const answer_view_t *view = NULL;
    events[0] = '\0';
    config_t cfg = load_config("zones:\n"
                               "  - {origin: one.cat, primary: 192.0.2.1,\n"
                               "     catalog_consumer: {directory: d}}\n"
                               "  - {origin: two.cat, primary: 192.0.2.2,\n"
                               "     catalog_consumer: {directory: d}}\n");
    xfr_t *x = service(&view);
    assert_int_equal(xfr_configure(x, &cfg), 0);
    zone_t *one = load("one.cat", "version TXT \"2\"\na.zones PTR m.test.\nb.zones PTR n.test.\n"
                                  "coo.a.zones PTR two.cat.\n");
    xfr_catalog_refreshed(x, "one.cat", one);
    expect_events("0m.test 0n.test ");
    /* two.cat lists both: m moves (its coo names two.cat; under another unique id, so its data
     * is reset, RFC 9432 4.4.1), n stays with one.cat */
    zone_t *two = load("two.cat", "version TXT \"2\"\nx.zones PTR m.test.\ny.zones PTR n.test.\n");
    xfr_catalog_refreshed(x, "two.cat", two);
    expect_events("0m.test ");
    assert_true(member(x, "m.test", "two.cat", "x"));
    assert_true(member(x, "n.test", "one.cat", "b"));
    pthread_mutex_lock(&x->mu);
    assert_string_equal(xfr_zone_find(x, "m.test")->prim[0].text, "192.0.2.2@53");
    pthread_mutex_unlock(&x->mu);
    /* one.cat drops m: not its member any more, nothing retired */
    zone_t *one2 = load("one.cat", "version TXT \"2\"\nb.zones PTR n.test.\n");
    xfr_catalog_refreshed(x, "one.cat", one2);
    expect_events("");
    assert_true(member(x, "m.test", "two.cat", "x"));
    xfr_free(x);
    config_free(&cfg);
    zone_free(one);
    zone_free(two);
    zone_free(one2);
    remove_dir();
}

/* A catalog of many members: all followed, and a change of one found among them; the time of
 * each refresh (parse, apply, list written) printed (README: figures). */
#define MANY 20000

static void test_many(void **state)
{
    (void)state;
    make_dir();
    const answer_view_t *view = NULL;
    config_t cfg = load_config(CONFIG);
    xfr_t *x = service(&view);
    assert_int_equal(xfr_configure(x, &cfg), 0);
    size_t cap = (size_t)MANY * 40 + 64, len = 0;
    char *text = malloc(cap);
    assert_non_null(text);
    len += (size_t)snprintf(text, cap, "version TXT \"2\"\n");
    for (int i = 0; i < MANY; i++)
        len += (size_t)snprintf(text + len, cap - len, "i%d.zones PTR z%d.test.\n", i, i);
    zone_t *v1 = load("cat.test", text);
    /* the second version: z0 gone, z<MANY> new */
    char *first = strstr(text, "i0.zones"), *next = strchr(first, '\n') + 1;
    memmove(first, next, strlen(next) + 1);
    len = strlen(text);
    snprintf(text + len, cap - len, "n.zones PTR z%d.test.\n", MANY);
    zone_t *v2 = load("cat.test", text);
    free(text);
    struct timespec t0, t1, t2;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    xfr_catalog_refreshed(x, "cat.test", v1);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    events[0] = '\0';
    xfr_catalog_refreshed(x, "cat.test", v2);
    clock_gettime(CLOCK_MONOTONIC, &t2);
    expect_events("-z0.test 0z20000.test ");
    assert_true(member(x, "z19999.test", "cat.test", "i19999"));
    assert_false(member(x, "z0.test", "cat.test", NULL));
    printf("%d members: the first version in %.0f ms, one removed and one added in %.0f ms\n", MANY,
           (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6,
           (double)(t2.tv_sec - t1.tv_sec) * 1e3 + (double)(t2.tv_nsec - t1.tv_nsec) / 1e6);
    xfr_free(x);
    config_free(&cfg);
    zone_free(v1);
    zone_free(v2);
    remove_dir();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse),     cmocka_unit_test(test_version),
        cmocka_unit_test(test_list_file), cmocka_unit_test(test_path),
        cmocka_unit_test(test_members),   cmocka_unit_test(test_coo),
        cmocka_unit_test(test_many),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
