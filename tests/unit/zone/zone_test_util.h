/*
 * zone_test_util.h — helpers shared by the zone unit tests (and the Redis source's): wire names
 * from text, a builder shorthand, redins JSON of a large RRset. Header-only (static functions) so
 * each test stays one executable. Include after <cmocka.h>.
 */
#ifndef TERN_TEST_ZONE_TEST_UTIL_H
#define TERN_TEST_ZONE_TEST_UTIL_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tern/wire/dname.h"
#include "tern/zone/zone_builder.h"

/* "www.example.test." (no escapes) into wire form in dst (room for 255); returns its length. */
static inline size_t wire_name(uint8_t *dst, const char *s)
{
    size_t o = 0;
    while (*s && strcmp(s, ".") != 0) {
        const char *dot = strchr(s, '.');
        size_t l = dot ? (size_t)(dot - s) : strlen(s);
        dst[o++] = (uint8_t)l;
        memcpy(dst + o, s, l);
        o += l;
        s += l;
        if (*s == '.')
            s++;
    }
    dst[o++] = 0;
    return o;
}

/* A view of a name given as text. */
static inline void view_of(dname_view_t *v, const char *s)
{
    uint8_t w[DNAME_MAXLEN];
    wire_name(w, s);
    dname_view_init(v, w);
}

/* Add a record with RDATA given as bytes; fails the test on error. */
static inline int add_raw(zone_builder_t *b, const char *owner, uint16_t type, uint32_t ttl,
                          const void *rdata, size_t rdlen, unsigned line)
{
    uint8_t o[DNAME_MAXLEN];
    wire_name(o, owner);
    return zone_builder_add(b, o, type, 1, ttl, rdata, (uint16_t)rdlen, "test.zone", line);
}

/* RDATA of a record whose data is one name after `pre` bytes of prefix (NS, CNAME, MX, SRV). */
static inline size_t rdata_name(uint8_t *dst, const void *pre, size_t prelen, const char *name)
{
    if (prelen)
        memcpy(dst, pre, prelen);
    return prelen + wire_name(dst + prelen, name);
}

/* SOA RDATA with the given serial and minimum. */
static inline size_t rdata_soa(uint8_t *dst, const char *mname, const char *rname, uint32_t serial,
                               uint32_t minimum)
{
    size_t o = wire_name(dst, mname);
    o += wire_name(dst + o, rname);
    uint32_t v[5] = {serial, 7200, 900, 1209600, minimum};
    for (int i = 0; i < 5; i++) {
        dst[o++] = (uint8_t)(v[i] >> 24);
        dst[o++] = (uint8_t)(v[i] >> 16);
        dst[o++] = (uint8_t)(v[i] >> 8);
        dst[o++] = (uint8_t)v[i];
    }
    return o;
}

/* redins JSON of one label whose "a" RRset has n records (10.x.y.z), malloc'd. */
static inline char *json_a_records(size_t n)
{
    size_t cap = 64 + n * 24, o = 0;
    char *j = malloc(cap);
    assert_non_null(j);
    o += (size_t)snprintf(j, cap, "{\"a\": {\"ttl\": 60, \"records\": [");
    for (size_t i = 0; i < n; i++)
        o += (size_t)snprintf(j + o, cap - o, "%s{\"ip\": \"10.%zu.%zu.%zu\"}", i ? "," : "",
                              i >> 16 & 255, i >> 8 & 255, i & 255);
    snprintf(j + o, cap - o, "]}}");
    return j;
}

#endif
