/*
 * test_zone_source.c — the zone_source interface (tern/source/zone_source.h) with a tiny source
 * of the test's own feeding a real loader: whole zones, patches and removals pushed through the
 * sink from another thread are served by the next view; a poke is collected; configure follows
 * every config; stop comes before free. Also the helpers every source shares.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "test_util.h"

#include "tern/common/err.h"
#include "tern/load/loader.h"
#include "tern/source/zone_source.h"
#include "tern/wire/dname.h"
#include "tern/zone/zone_file.h"
#include "tern/zone/zone_patch.h"

static char dir[64];

/* The test's source: keeps what it is pushed, as a threaded source would. */
typedef struct test_source {
    zone_source_t base;
    zone_source_env_t env;
    zone_source_zone_t z[4];
    size_t nz;
    /* written on the loader thread, read by the test's: atomic */
    _Atomic unsigned configured, started, stopped, applied, collected;
    bool poke_pending;
} test_source_t;

static test_source_t *the; /* the one the loader made */
static const zone_source_ops_t test_ops;

static zone_source_t *ts_new(const zone_source_env_t *env)
{
    test_source_t *t = calloc(1, sizeof(*t));
    t->base.ops = &test_ops;
    t->env = *env;
    the = t;
    return &t->base;
}

static int ts_configure(zone_source_t *s, const config_t *cfg, const config_t *prev, bool geo)
{
    ((test_source_t *)s)->configured++;
    return 0;
}

static void ts_start(zone_source_t *s)
{
    ((test_source_t *)s)->started++;
}

static zone_source_zone_t *find(test_source_t *t, const char *key)
{
    for (size_t i = 0; i < t->nz; i++)
        if (strcmp(t->z[i].key, key) == 0)
            return &t->z[i];
    return NULL;
}

static size_t ts_apply(zone_source_t *s, zone_change_t *c, size_t n)
{
    test_source_t *t = (test_source_t *)s;
    for (size_t i = 0; i < n; i++) {
        assert_ptr_equal(c[i].src, s);
        zone_source_zone_t *z = find(t, c[i].key);
        if (!c[i].zone) { /* gone */
            assert_non_null(z);
            zone_free(z->zone);
            free(z->key);
            *z = t->z[--t->nz];
            zone_change_clear(&c[i]);
        } else if (c[i].names) { /* a patch of the version served */
            const uint8_t *nv[1] = {c[i].names};
            zone_t *nz = NULL;
            char why[256];
            assert_non_null(z);
            assert_int_equal(
                zone_patch_names(z->zone, c[i].zone, nv, c[i].nnames, &nz, why, sizeof(why)), 0);
            zone_free(z->zone);
            z->zone = nz;
            z->version = zone_source_version();
            zone_change_clear(&c[i]);
        } else {
            if (!z) {
                z = &t->z[t->nz++];
                *z = (zone_source_zone_t){.key = c[i].key};
            } else {
                zone_free(z->zone);
                free(c[i].key);
            }
            z->zone = c[i].zone;
            z->version = zone_source_version();
        }
        t->applied++;
    }
    return n;
}

static bool ts_collect(zone_source_t *s)
{
    test_source_t *t = (test_source_t *)s;
    t->collected++;
    return true;
}

static zone_source_zone_t *ts_zones(zone_source_t *s, size_t *n)
{
    test_source_t *t = (test_source_t *)s;
    *n = t->nz;
    return t->z;
}

static void ts_stop(zone_source_t *s)
{
    ((test_source_t *)s)->stopped++;
}

static void ts_free(zone_source_t *s)
{
    test_source_t *t = (test_source_t *)s;
    assert_true(t->stopped > 0); /* the loader stops a source before it frees it */
    for (size_t i = 0; i < t->nz; i++) {
        zone_free(t->z[i].zone);
        free(t->z[i].key);
    }
    free(t);
    the = NULL;
}

static const zone_source_ops_t test_ops = {
    .name = "test",
    .what = "the test's zones",
    .previous = "data",
    .new = ts_new,
    .configure = ts_configure,
    .start = ts_start,
    .apply = ts_apply,
    .collect = ts_collect,
    .zones = ts_zones,
    .stop = ts_stop,
    .free = ts_free,
};

static int read_config(void *ctx, config_t *cfg, char *err, size_t errlen)
{
    char path[256];
    config_init(cfg);
    snprintf(path, sizeof(path), "%s/file.zone", dir);
    if (config_add_listen(cfg, "127.0.0.1:53") < 0 || config_add_zone(cfg, "file.test", path) < 0)
        return TERN_ENOMEM;
    return 0;
}

/* A zone of the test source, origin src.test, with www at 192.0.2.octet. */
static zone_t *make_zone(const char *name, const char *origin, unsigned octet)
{
    char text[512], path[256], err[256];
    snprintf(text, sizeof(text),
             "$ORIGIN %s.\n$TTL 300\n@ SOA ns1 hostmaster 1 3600 600 86400 60\n@ NS ns1\n"
             "ns1 A 192.0.2.53\nwww A 192.0.2.%u\n",
             origin, octet);
    tu_write_file(dir, name, text);
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    zone_t *z = NULL;
    assert_int_equal(zone_file_load(origin, path, &z, err, sizeof(err)), 0);
    return z;
}

/* The version of origin in the published view (loader_zones()), 0: not served. */
struct find {
    const char *origin;
    uint64_t version;
};

static void on_zone(void *ctx, const loader_zone_info_t *z)
{
    struct find *f = ctx;
    if (strcmp(z->origin, f->origin) == 0)
        f->version = z->version;
}

static uint64_t served(loader_t *l, const char *origin)
{
    struct find f = {.origin = origin};
    (void)loader_zones(l, on_zone, &f);
    return f.version;
}

/* Wait (bounded) until origin is served (want) or not. */
static void wait_served(loader_t *l, const char *origin, bool want)
{
    for (int i = 0; i < 500 && (served(l, origin) != 0) != want; i++) {
        struct timespec ts = {.tv_sec = 0, .tv_nsec = 10 * 1000000};
        nanosleep(&ts, NULL);
    }
    assert_true((served(l, origin) != 0) == want);
}

/* The test source's thread: pushes what push_arg says. */
static struct {
    zone_t *zone;
    const char *origin;
    uint8_t *names;
    size_t nnames;
} push_arg;

static void *pusher(void *arg)
{
    zone_change_t c = {.src = &the->base,
                       .key = zone_source_key(push_arg.origin),
                       .zone = push_arg.zone,
                       .names = push_arg.names,
                       .nnames = push_arg.nnames};
    assert_int_equal(the->env.sink.push(the->env.sink.ctx, &c), 0);
    return NULL;
}

static void push(const char *origin, zone_t *z, uint8_t *names, size_t nnames)
{
    push_arg.origin = origin;
    push_arg.zone = z;
    push_arg.names = names;
    push_arg.nnames = nnames;
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, pusher, NULL), 0);
    pthread_join(t, NULL);
}

static void test_source_feeds_loader(void **state)
{
    (void)state;
    tu_mkdtemp(dir, sizeof(dir), "tern-source");
    zone_free(make_zone("file.zone", "file.test", 1));
    loader_t *l = loader_new(read_config, NULL);
    assert_non_null(l);
    assert_int_equal(loader_add_source(l, &test_ops), 0);
    assert_non_null(the);
    assert_ptr_equal(loader_source(l, "test"), &the->base);
    const config_t *cfg;
    assert_int_equal(loader_load(l, &cfg), 0);
    assert_int_equal(the->configured, 1); /* at start */
    assert_int_equal(loader_start(l), 0);
    assert_int_equal(the->started, 1);

    /* a whole zone, from another thread: served with the configured one */
    push("src.test", make_zone("src1.zone", "src.test", 1), NULL, 0);
    wait_served(l, "src.test", true);
    assert_true(served(l, "file.test"));

    /* a patch: www changes, the rest is shared */
    zone_t *fresh = make_zone("src2.zone", "src.test", 2);
    uint8_t www[DNAME_MAXLEN];
    const char *why;
    assert_true(dname_from_str("www.src.test", 12, false, www, &why) > 0);
    uint8_t *names = malloc(dname_len(www));
    memcpy(names, www, dname_len(www));
    uint64_t before = served(l, "src.test");
    push("src.test", fresh, names, 1);
    for (int i = 0; i < 500 && served(l, "src.test") == before; i++) {
        struct timespec ts = {.tv_sec = 0, .tv_nsec = 10 * 1000000};
        nanosleep(&ts, NULL);
    }
    assert_true(served(l, "src.test") != before);
    assert_true(the->applied >= 2);

    /* a poke: collect() runs on the loader thread, and the view is built again */
    unsigned collected = the->collected;
    the->env.sink.poke(the->env.sink.ctx, &the->base);
    for (int i = 0; i < 500 && the->collected == collected; i++) {
        struct timespec ts = {.tv_sec = 0, .tv_nsec = 10 * 1000000};
        nanosleep(&ts, NULL);
    }
    assert_int_equal(the->collected, collected + 1);

    /* a reload configures the source again and keeps its zone */
    assert_true(loader_reload_wait(l, NULL));
    assert_int_equal(the->configured, 2);
    assert_true(served(l, "src.test"));

    /* gone */
    push("src.test", NULL, NULL, 0);
    wait_served(l, "src.test", false);
    assert_true(served(l, "file.test"));

    loader_stop(l);
    assert_int_equal(the->stopped, 1);
    loader_free(l);
    assert_null(the);
    tu_rmtree(dir);
}

static void test_helpers(void **state)
{
    (void)state;
    char *k = zone_source_key("Example.COM.");
    assert_string_equal(k, "example.com");
    free(k);
    k = zone_source_key(".");
    assert_string_equal(k, ".");
    free(k);
    uint64_t a = zone_source_version(), b = zone_source_version();
    assert_true(a > 0 && b > a);
    size_t n;
    const zone_source_ops_t *const *t = zone_source_table(&n);
    assert_true(n >= 5);
    /* a configured zone goes to the first source that owns it: secondaries before files */
    config_zone_t sec = {.origin = (char *)"s.test", .file = (char *)"x", .nprimaries = 1};
    config_zone_t file = {.origin = (char *)"f.test", .file = (char *)"x"};
    const zone_source_ops_t *own_sec = NULL, *own_file = NULL;
    for (size_t i = 0; i < n; i++) {
        if (!own_sec && t[i]->owns && t[i]->owns(&sec))
            own_sec = t[i];
        if (!own_file && t[i]->owns && t[i]->owns(&file))
            own_file = t[i];
    }
    assert_string_equal(own_sec->name, "xfr");
    assert_string_equal(own_file->name, "file");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_helpers),
        cmocka_unit_test(test_source_feeds_loader),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
