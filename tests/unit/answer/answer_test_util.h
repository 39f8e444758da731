/*
 * answer_test_util.h — the zone tables the answer tests query: a zone file loaded and added to a
 * table (failures said on stderr), and the fixture zones of tests/data/answer in one table with
 * the cmocka group fixtures that make and free it.
 * Header-only (static functions) so each test stays one executable. Include after <cmocka.h>.
 */
#ifndef TERN_TEST_ANSWER_TEST_UTIL_H
#define TERN_TEST_ANSWER_TEST_UTIL_H

#include <stdio.h>
#include <stdlib.h>

#include "tern/common/err.h"
#include "tern/zone/zone_file.h"
#include "tern/zone/zone_table.h"

/* Load zone origin from path into t. 0, or -1 with the reason on stderr. */
static inline int atu_add_file(zone_table_t *t, const char *origin, const char *path)
{
    char err[512];
    zone_t *z = NULL;
    int rc = zone_file_load(origin, path, &z, err, sizeof(err));
    if (rc != 0) {
        fprintf(stderr, "load %s: %s (%s)\n", path, err, tern_strerror(rc));
        return -1;
    }
    if (zone_table_add(t, z) != 0) {
        zone_free(z);
        return -1;
    }
    return 0;
}

/* example.test, other.test and child.example.test from $TERN_TEST_DATA/answer (default
 * tests/data), in a new frozen table; NULL on failure. */
static inline zone_table_t *atu_fixture_table(void)
{
    static const char *const zones[][2] = {{"example.test", "example.test.zone"},
                                           {"other.test", "other.test.zone"},
                                           {"child.example.test.", "child.example.test.zone"}};
    const char *dir = getenv("TERN_TEST_DATA");
    zone_table_t *t = zone_table_new();
    if (!t)
        return NULL;
    for (size_t i = 0; i < sizeof(zones) / sizeof(zones[0]); i++) {
        char path[1024];
        snprintf(path, sizeof(path), "%s/answer/%s", dir ? dir : "tests/data", zones[i][1]);
        if (atu_add_file(t, zones[i][0], path) != 0) {
            zone_table_free(t);
            return NULL;
        }
    }
    if (zone_table_freeze(t) != 0) {
        zone_table_free(t);
        return NULL;
    }
    return t;
}

/* The table the fixture tests query, and cmocka group fixtures that make and free it
 * (a test with a table of its own declares the same `table` and ignores these). */
static zone_table_t *table;

static inline int atu_setup(void **state)
{
    (void)state;
    table = atu_fixture_table();
    return table ? 0 : -1;
}

static inline int atu_teardown(void **state)
{
    (void)state;
    zone_table_free(table);
    return 0;
}

#endif
