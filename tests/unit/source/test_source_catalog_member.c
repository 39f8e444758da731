/*
 * test_source_catalog_member.c — the catalog members' source (src/source/source_catalog_member.c)
 * behind a sink of the test's own: a member with no data yet is a SERVFAIL placeholder, a new
 * version replaces it, a member gone leaves zones(), the changes applied in the order they were
 * told; wait_first() says whether something was queued (the startup's copies).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "tern/source/source_catalog_member.h"
#include "tern/wire/dname.h"

static zone_change_t queued[16];
static size_t nqueued;

static int push(void *ctx, const zone_change_t *c)
{
    (void)ctx;
    assert_true(nqueued < 16);
    queued[nqueued++] = *c;
    return 0;
}

/* A zone of its own for key (a placeholder stands in for a transferred version). */
static zone_t *version_of(const char *key)
{
    uint8_t apex[DNAME_MAXLEN];
    const char *why;
    assert_true(dname_from_str(key, strlen(key), false, apex, &why) > 0);
    zone_t *z = zone_new_unavailable(apex, "test");
    assert_non_null(z);
    z->unavailable = 0; /* stands for data */
    return z;
}

/* What was queued, applied; the number that changed what is served. */
static size_t apply_queued(zone_source_t *s)
{
    size_t n = s->ops->apply(s, queued, nqueued);
    nqueued = 0;
    return n;
}

static const zone_source_zone_t *served(zone_source_t *s, const char *key)
{
    size_t n;
    zone_source_zone_t *z = s->ops->zones(s, &n);
    for (size_t i = 0; i < n; i++)
        if (strcmp(z[i].key, key) == 0)
            return &z[i];
    return NULL;
}

static void test_members(void **state)
{
    (void)state;
    zone_source_env_t env = {.sink = {.push = push}};
    zone_source_t *s = zone_source_new(&source_catalog_member_ops, &env);
    assert_non_null(s);
    assert_string_equal(s->ops->name, "catalog");
    assert_false(s->ops->wait_first(s));
    source_catalog_member_in(s, "m1.test", NULL);
    source_catalog_member_in(s, "m2.test", version_of("m2.test"));
    assert_true(s->ops->wait_first(s));
    assert_int_equal(apply_queued(s), 2);
    const zone_source_zone_t *m1 = served(s, "m1.test");
    assert_non_null(m1);
    assert_true(m1->zone->unavailable); /* SERVFAIL until transferred */
    assert_false(served(s, "m2.test")->zone->unavailable);
    uint64_t v = served(s, "m2.test")->version;
    /* m1 transferred, m2 gone then back (in that order), m3 gone without being there */
    source_catalog_member_in(s, "m1.test", version_of("m1.test"));
    source_catalog_member_gone(s, "m2.test");
    source_catalog_member_in(s, "m2.test", version_of("m2.test"));
    source_catalog_member_gone(s, "m3.test");
    assert_int_equal(apply_queued(s), 3);
    assert_false(served(s, "m1.test")->zone->unavailable);
    assert_non_null(served(s, "m2.test"));
    assert_true(served(s, "m2.test")->version > v);
    source_catalog_member_gone(s, "m1.test");
    assert_int_equal(apply_queued(s), 1);
    assert_null(served(s, "m1.test"));
    zone_source_stats_t st;
    s->ops->stats(s, &st);
    assert_int_equal(st.zones, 1);
    zone_source_free(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_members),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
