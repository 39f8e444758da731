/*
 * steer_test_util.h — the steered RRsets the tests of issue 33's rules select from: one A RRset
 * at www.t.test given as redins JSON (so the schema's new fields are parsed as a zone would be),
 * and a selection for a client, as the last octets of the 192.0.2.x records answered.
 * Header-only (static functions) so each test stays one executable. Include after <cmocka.h>.
 */
#ifndef TERN_TEST_STEER_TEST_UTIL_H
#define TERN_TEST_STEER_TEST_UTIL_H

#include <arpa/inet.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "tern/answer/select.h"
#include "tern/zone/zone_json.h"
#include "zone/zone_test_util.h"

#define STU_ORIGIN "t.test"
#define STU_CONFIG                                                                                 \
    "{\"soa\": {\"ttl\": 3600, \"ns\": \"ns1.t.test.\", \"mbox\": \"h.t.test.\", \"refresh\": "    \
    "7200, \"retry\": 900, \"expire\": 1209600, \"minttl\": 300, \"serial\": 1}}"

static answer_ctx_t stu_ctx;
static answer_view_t stu_view;
static const uint8_t *stu_rd; /* RDATA of the RRset stu_build() made last */

/* Zone t.test with label www = {"a": aset}: 0 and *out, or the error in err (a JSON error). */
static inline int stu_try(health_registry_t *hr, const char *aset, zone_t **out, char *err,
                          size_t errlen)
{
    zone_json_opts_t o = {.health = hr};
    char label[8192];
    zone_json_t *zj = zone_json_new(STU_ORIGIN, "test", &o, err, errlen);
    assert_non_null(zj);
    assert_int_equal(zone_json_config(zj, STU_CONFIG, strlen(STU_CONFIG), err, errlen), 0);
    const char *apex = "{\"ns\": {\"records\": [{\"host\": \"ns1.t.test.\"}]}}";
    assert_int_equal(zone_json_label(zj, "@", apex, strlen(apex), err, errlen), 0);
    int k = snprintf(label, sizeof(label), "{\"a\": %s}", aset);
    assert_true(k > 0 && (size_t)k < sizeof(label));
    int rc = zone_json_label(zj, "www", label, strlen(label), err, errlen);
    if (rc < 0) {
        zone_json_free(zj);
        return rc;
    }
    return zone_json_finish(zj, out, err, errlen);
}

/* The steering of www's A RRset of aset (z takes the zone: free it after). */
static inline const zone_geo_t *stu_build(health_registry_t *hr, const char *aset, zone_t **z)
{
    char err[512];
    if (stu_try(hr, aset, z, err, sizeof(err)) != 0)
        fail_msg("%s: %s", aset, err);
    uint8_t lc[256];
    size_t len = wire_name(lc, "www." STU_ORIGIN);
    const zone_node_t *n = zone_find_node(*z, lc, len, dname_hash(lc));
    assert_non_null(n);
    const zone_rrset_t *s = zone_node_rrset(n, WIRE_T_A);
    assert_non_null(s);
    stu_rd = s->rdata;
    const zone_geo_t *g = zone_rrset_geo(*z, s);
    assert_non_null(g);
    return g;
}

/* Records 192.0.2.first .. first+n-1, each with the JSON fields extra(i) gives (or none), into
 * buf as a "records" array. */
static inline const char *stu_records(char *buf, size_t len, unsigned first, unsigned n,
                                      const char *(*extra)(unsigned i, char *tmp))
{
    size_t o = (size_t)snprintf(buf, len, "[");
    for (unsigned i = 0; i < n && o < len; i++) {
        char tmp[128];
        const char *x = extra ? extra(i, tmp) : "";
        o += (size_t)snprintf(buf + o, len - o, "%s{\"ip\": \"192.0.2.%u\"%s%s}", i ? ", " : "",
                              first + i, *x ? ", " : "", x);
    }
    if (o < len)
        snprintf(buf + o, len - o, "]");
    return buf;
}

/* Select from g for the client addr (text; NULL: unknown), with an ECS option of source prefix
 * ecs_bits (0: none); the last octets answered into out, their count returned. */
static inline unsigned stu_pick_ecs(const zone_geo_t *g, const char *addr, unsigned ecs_bits,
                                    uint8_t *out)
{
    uint8_t a[16] = {0};
    int fam = 0;
    if (addr) {
        fam = strchr(addr, ':') ? AF_INET6 : AF_INET;
        assert_int_equal(inet_pton(fam, addr, a), 1);
    }
    static wire_ecs_t ecs;
    if (ecs_bits) {
        memset(&ecs, 0, sizeof(ecs));
        ecs.family = fam == AF_INET ? 1 : 2;
        ecs.source_prefix = (uint8_t)ecs_bits;
        memcpy(ecs.addr, a, sizeof(a));
        stu_ctx.q_ecs = &ecs;
        stu_ctx.q_src = NULL;
        stu_ctx.ent = NULL; /* resolved from the query, as answer_query() does */
        stu_ctx.scope = 0;
    } else {
        stu_ctx.q_ecs = NULL;
        answer_set_client(&stu_ctx, fam, a);
    }
    stu_ctx.info.steer.rules = 0;
    unsigned n = answer_select(&stu_ctx, &stu_view, g, stu_ctx.offs);
    for (unsigned i = 0; i < n; i++)
        out[i] = stu_rd[stu_ctx.offs[i] + 5]; /* RDLENGTH (2), then 192.0.2.<last> */
    return n;
}

static inline unsigned stu_pick(const zone_geo_t *g, const char *addr, uint8_t *out)
{
    return stu_pick_ecs(g, addr, 0, out);
}

#endif
