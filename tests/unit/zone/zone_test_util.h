/*
 * zone_test_util.h — helpers shared by the zone unit tests (and the Redis source's): wire names
 * from text, a builder shorthand, redins JSON of a large RRset, a table of one zone, stderr
 * captured, a query. Header-only (static functions) so
 * each test stays one executable. Include after <cmocka.h>.
 */
#ifndef TERN_TEST_ZONE_TEST_UTIL_H
#define TERN_TEST_ZONE_TEST_UTIL_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <unistd.h>

#include "tern/wire/dname.h"
#include "tern/zone/zone_builder.h"
#include "tern/zone/zone_table.h"

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

/* A frozen table holding z alone (a reference of its own), for answer_query(). */
static inline zone_table_t *ztu_table_of(zone_t *z)
{
    zone_table_t *t = zone_table_new();
    assert_non_null(t);
    assert_int_equal(zone_table_add(t, zone_retain(z)), 0);
    assert_int_equal(zone_table_freeze(t), 0);
    return t;
}

/* stderr into a temporary file from ztu_capture_begin() until ztu_capture_end(), which puts
 * what was written (what log_warn() said) into buf. */
struct ztu_cap {
    FILE *file;
    int saved;
};

static inline struct ztu_cap *ztu_cap(void)
{
    static struct ztu_cap c = {NULL, -1};
    return &c;
}

static inline void ztu_capture_begin(void)
{
    struct ztu_cap *c = ztu_cap();
    c->file = tmpfile();
    assert_non_null(c->file);
    fflush(stderr);
    c->saved = dup(2);
    assert_true(c->saved >= 0);
    assert_true(dup2(fileno(c->file), 2) >= 0);
}

static inline void ztu_capture_end(char *buf, size_t len)
{
    struct ztu_cap *c = ztu_cap();
    fflush(stderr);
    assert_true(dup2(c->saved, 2) >= 0);
    close(c->saved);
    rewind(c->file);
    size_t n = fread(buf, 1, len - 1, c->file);
    buf[n] = 0;
    fclose(c->file);
}

/* A query (id 0xabcd, RD, EDNS with a 1232-byte buffer) for the wire name name and type into
 * pkt (room for 300 bytes); returns its length. */
static inline size_t ztu_query(uint8_t *pkt, const uint8_t *name, uint16_t type)
{
    static const uint8_t hdr[12] = {0xab, 0xcd, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 1};
    memcpy(pkt, hdr, 12);
    size_t len = dname_len(name);
    memcpy(pkt + 12, name, len);
    size_t o = 12 + len;
    pkt[o++] = (uint8_t)(type >> 8);
    pkt[o++] = (uint8_t)type;
    pkt[o++] = 0;
    pkt[o++] = 1;
    static const uint8_t opt[11] = {0, 0, 41, 0x04, 0xd0, 0, 0, 0, 0, 0, 0};
    memcpy(pkt + o, opt, sizeof(opt));
    return o + sizeof(opt);
}

#endif
