/*
 * geo_test_util.h — what the steering tests (test_select.c, test_steer_latency.c) share: a
 * record's location looked up in a MaxMind DB fixture, the way the JSON zone loader locates a
 * record by its address. Header-only; cmocka's asserts.
 */
#ifndef TERN_TEST_GEO_TEST_UTIL_H
#define TERN_TEST_GEO_TEST_UTIL_H

#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>

#include "tern/geo/geoip.h"
#include "tern/zone/zone_builder.h"

/* The MaxMind DB fixture file (e.g. "nested6.mmdb") of TERN_GEOIP_DATA (tests/data/make_mmdb.pl,
 * ctest fixture geoip_mmdb), opened; NULL, said on stderr, when it is not there. */
static inline geoip_db_t *geo_test_fixture(const char *file)
{
    const char *data = getenv("TERN_GEOIP_DATA");
    if (!data) {
        fprintf(stderr, "TERN_GEOIP_DATA is not set (run through ctest)\n");
        return NULL;
    }
    char path[512], err[256];
    snprintf(path, sizeof(path), "%s/%s", data, file);
    geoip_db_t *db = geoip_open(path, err, sizeof(err));
    if (!db)
        fprintf(stderr, "%s\n", err);
    return db;
}

/* m located where db puts the IPv4 address addr (text); the fixture must locate it. */
static inline void geo_test_locate(geoip_db_t *db, const char *addr, zone_geo_meta_t *m)
{
    uint8_t a[4];
    assert_int_equal(inet_pton(AF_INET, addr, a), 1);
    geoip_result_t g;
    geoip_lookup(db, AF_INET, a, &g);
    assert_true(g.has_location);
    m->has_location = true;
    m->lat = g.lat;
    m->lon = g.lon;
}

#endif
