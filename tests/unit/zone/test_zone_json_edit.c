/*
 * test_zone_json_edit.c — redins JSON written back: every RRset type redins' schema holds,
 * written from RDATA and read back through the JSON reader, gives the same RDATA; an edited A
 * set keeps its filter, health check and the staying records' own fields; removing the last
 * RRset empties the label; types and RDATA the schema cannot hold are refused by name; the
 * config's SOA is set and reads back with the new serial.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <jansson.h>

#include "tern/common/byteorder.h"
#include "tern/common/err.h"
#include "tern/wire/dname.h"
#include "tern/wire/rr.h"
#include "tern/zone/zone_file.h"
#include "tern/zone/zone_json.h"
#include "test_util.h"

#define ORIGIN "e.test"
#define CONFIG                                                                                     \
    "{\"soa\": {\"ttl\": 3600, \"ns\": \"ns1.e.test.\", \"mbox\": \"hostmaster.e.test.\", "        \
    "\"refresh\": 7200, \"retry\": 900, \"expire\": 1209600, \"minttl\": 300, \"serial\": 5}, "    \
    "\"domain_id\": \"abc\"}"

static char dir[64];

/* Every type the schema holds, in a master file: the RDATA to write. */
static const char *FILE_TEXT = "$ORIGIN e.test.\n"
                               "@ 3600 IN SOA ns1 hostmaster 5 7200 900 1209600 300\n"
                               "@ 3600 IN NS ns1\n"
                               "ns1 60 IN A 192.0.2.1\n"
                               "x 60 IN A 192.0.2.7\n"
                               "x 60 IN A 192.0.2.8\n"
                               "x 60 IN AAAA 2001:db8::1\n"
                               "x 60 IN TXT \"hello world\"\n"
                               "x 60 IN MX 10 mx.example.\n"
                               "x 60 IN SRV 1 2 443 srv.example.\n"
                               "x 60 IN CAA 0 issue \"letsencrypt.org\"\n"
                               "x 60 IN TLSA 3 1 1 0123456789abcdef\n"
                               "y 60 IN CNAME target.example.\n"
                               "z 60 IN PTR host.example.\n"
                               "n 60 IN NS ns.elsewhere.example.\n";

static zone_t *file_zone(void)
{
    char path[128], err[256];
    tu_write_file(dir, "e.zone", FILE_TEXT);
    snprintf(path, sizeof(path), "%s/e.zone", dir);
    zone_t *z = NULL;
    if (zone_file_load(ORIGIN, path, &z, err, sizeof(err)) != 0)
        fail_msg("%s", err);
    return z;
}

static const zone_rrset_t *rrset(const zone_t *z, const char *name, uint16_t type)
{
    uint8_t w[DNAME_MAXLEN];
    const char *why;
    assert_true(dname_from_str(name, strlen(name), false, w, &why) > 0);
    const zone_node_t *n = zone_find_node(z, w, dname_len(w), dname_hash(w));
    return n ? zone_node_rrset(n, type) : NULL;
}

/* The JSON of label written from z's RRset (name, type), on top of old. */
static char *write_set(const zone_t *z, const char *name, uint16_t type, const char *old)
{
    const zone_rrset_t *s = rrset(z, name, type);
    assert_non_null(s);
    const uint8_t *rd[16];
    uint16_t len[16];
    const uint8_t *p = s->rdata;
    for (unsigned i = 0; i < s->count; i++) {
        len[i] = tern_rd16(p);
        rd[i] = p + 2;
        p += 2 + len[i];
    }
    char *out = NULL, err[256];
    if (zone_json_label_set(old, old ? strlen(old) : 0, type, s->ttl, rd, len, s->count, &out, err,
                            sizeof(err)) != 0)
        fail_msg("%s: %s", name, err);
    assert_non_null(out);
    return out;
}

/* The zone read back from the config and labels given. */
static zone_t *read_back(const char *config, const char *const *labels, const char *const *json,
                         size_t n)
{
    char err[512];
    zone_json_t *zj = zone_json_new(ORIGIN, "test", NULL, err, sizeof(err));
    assert_non_null(zj);
    if (zone_json_config(zj, config, strlen(config), err, sizeof(err)) != 0)
        fail_msg("config: %s", err);
    const char *apex = "{\"ns\": {\"ttl\": 3600, \"records\": [{\"host\": \"ns1.e.test.\"}]}}";
    if (zone_json_label(zj, "@", apex, strlen(apex), err, sizeof(err)) != 0)
        fail_msg("@: %s", err);
    for (size_t i = 0; i < n; i++)
        if (zone_json_label(zj, labels[i], json[i], strlen(json[i]), err, sizeof(err)) != 0)
            fail_msg("%s: %s (%s)", labels[i], err, json[i]);
    zone_t *z = NULL;
    if (zone_json_finish(zj, &z, err, sizeof(err)) != 0)
        fail_msg("finish: %s", err);
    return z;
}

static void same_rrset(const zone_t *a, const zone_t *b, const char *name, uint16_t type)
{
    const zone_rrset_t *x = rrset(a, name, type), *y = rrset(b, name, type);
    assert_non_null(x);
    if (!y)
        fail_msg("%s type %u not read back", name, type);
    assert_int_equal(x->ttl, y->ttl);
    assert_int_equal(x->count, y->count);
    assert_int_equal(x->rdata_len, y->rdata_len);
    assert_memory_equal(x->rdata, y->rdata, x->rdata_len);
}

static void test_every_type_round_trips(void **state)
{
    (void)state;
    tu_mkdtemp(dir, sizeof(dir), "tern-json-edit");
    zone_t *f = file_zone();
    static const uint16_t xt[] = {WIRE_T_A,   WIRE_T_AAAA, WIRE_T_TXT, WIRE_T_MX,
                                  WIRE_T_SRV, WIRE_T_CAA,  WIRE_T_TLSA};
    char *x = NULL;
    for (size_t i = 0; i < sizeof(xt) / sizeof(xt[0]); i++) {
        char *n = write_set(f, "x.e.test", xt[i], x);
        free(x);
        x = n;
    }
    char *y = write_set(f, "y.e.test", WIRE_T_CNAME, NULL);
    char *zz = write_set(f, "z.e.test", WIRE_T_PTR, NULL);
    char *nn = write_set(f, "n.e.test", WIRE_T_NS, NULL);
    const char *labels[] = {"x", "y", "z", "n"};
    const char *json[] = {x, y, zz, nn};
    zone_t *r = read_back(CONFIG, labels, json, 4);
    for (size_t i = 0; i < sizeof(xt) / sizeof(xt[0]); i++)
        same_rrset(f, r, "x.e.test", xt[i]);
    same_rrset(f, r, "y.e.test", WIRE_T_CNAME);
    same_rrset(f, r, "z.e.test", WIRE_T_PTR);
    same_rrset(f, r, "n.e.test", WIRE_T_NS);
    free(x);
    free(y);
    free(zz);
    free(nn);
    zone_free(r);
    zone_free(f);
    tu_rmtree(dir);
}

/* Load shedding's "shed" block (issue 33) is the set's: an API edit of the records keeps it. */
static void test_shed_kept(void **state)
{
    (void)state;
    const char *old = "{\"a\": {\"ttl\": 300, \"health_check\": {\"enable\": true}, "
                      "\"shed\": {\"low\": 0.5, \"high\": 0.9, \"redis\": \"tern:load\"}, "
                      "\"records\": [{\"ip\": \"192.0.2.7\"}]}}";
    const uint8_t a8[4] = {192, 0, 2, 8};
    const uint8_t *rd[1] = {a8};
    const uint16_t len[1] = {4};
    char *out = NULL, err[256];
    assert_int_equal(
        zone_json_label_set(old, strlen(old), WIRE_T_A, 300, rd, len, 1, &out, err, sizeof(err)),
        0);
    json_error_t je;
    json_t *j = json_loads(out, 0, &je);
    assert_non_null(j);
    json_t *shed = json_object_get(json_object_get(j, "a"), "shed");
    assert_non_null(shed);
    assert_string_equal(json_string_value(json_object_get(shed, "redis")), "tern:load");
    assert_true(json_real_value(json_object_get(shed, "high")) == 0.9);
    json_decref(j);
    free(out);
}

/* An A set with a filter, a health check and a geo record: a new record joins, one goes, the
 * one that stays keeps its country, the set its filter and health check. */
static void test_geo_fields_kept(void **state)
{
    (void)state;
    const char *old =
        "{\"a\": {\"ttl\": 300, \"filter\": {\"count\": \"single\", \"order\": \"weighted\", "
        "\"geo_filter\": \"country\"}, \"health_check\": {\"protocol\": \"http\", \"uri\": "
        "\"/\", \"port\": 80, \"timeout\": 1000, \"up_count\": 3, \"down_count\": -3}, "
        "\"records\": [{\"ip\": \"192.0.2.7\", \"country\": [\"DE\"], \"weight\": 5}, "
        "{\"ip\": \"192.0.2.9\", \"country\": [\"FR\"]}]}, \"txt\": {\"ttl\": 60, \"records\": "
        "[{\"text\": \"keep\"}]}}";
    const uint8_t a7[4] = {192, 0, 2, 7}, a8[4] = {192, 0, 2, 8};
    const uint8_t *rd[2] = {a7, a8};
    const uint16_t len[2] = {4, 4};
    char *out = NULL, err[256];
    assert_int_equal(
        zone_json_label_set(old, strlen(old), WIRE_T_A, 120, rd, len, 2, &out, err, sizeof(err)),
        0);
    json_error_t je;
    json_t *j = json_loads(out, 0, &je);
    assert_non_null(j);
    json_t *a = json_object_get(j, "a");
    assert_int_equal(json_integer_value(json_object_get(a, "ttl")), 120);
    assert_non_null(json_object_get(a, "filter"));
    assert_non_null(json_object_get(a, "health_check"));
    json_t *recs = json_object_get(a, "records");
    assert_int_equal(json_array_size(recs), 2);
    json_t *r0 = json_array_get(recs, 0), *r1 = json_array_get(recs, 1);
    assert_string_equal(json_string_value(json_object_get(r0, "ip")), "192.0.2.7");
    assert_int_equal(json_integer_value(json_object_get(r0, "weight")), 5);
    assert_non_null(json_object_get(r0, "country"));
    assert_string_equal(json_string_value(json_object_get(r1, "ip")), "192.0.2.8");
    assert_null(json_object_get(r1, "country"));
    assert_non_null(json_object_get(j, "txt"));
    json_decref(j);
    /* the TXT removed: the A set stays; then the A set removed too: the label is empty */
    char *out2 = NULL;
    assert_int_equal(zone_json_label_set(out, strlen(out), WIRE_T_TXT, 0, NULL, NULL, 0, &out2, err,
                                         sizeof(err)),
                     0);
    assert_non_null(out2);
    assert_null(strstr(out2, "txt"));
    char *out3 = (char *)1;
    assert_int_equal(zone_json_label_set(out2, strlen(out2), WIRE_T_A, 0, NULL, NULL, 0, &out3, err,
                                         sizeof(err)),
                     0);
    assert_null(out3);
    free(out);
    free(out2);
}

/* Issue 33's fields survive an API edit: a staying record keeps its priority, the set its
 * min_healthy, sticky order and sticky_prefix. */
static void test_steering_fields_kept(void **state)
{
    (void)state;
    const char *old = "{\"a\": {\"ttl\": 300, \"filter\": {\"order\": \"sticky\", \"min_healthy\": "
                      "{\"0\": 2}, \"sticky_prefix\": {\"v4\": 20}}, \"records\": [{\"ip\": "
                      "\"192.0.2.7\", \"priority\": 1, \"weight\": 3}, {\"ip\": \"192.0.2.9\"}]}}";
    const uint8_t a7[4] = {192, 0, 2, 7}, a8[4] = {192, 0, 2, 8};
    const uint8_t *rd[2] = {a8, a7};
    const uint16_t len[2] = {4, 4};
    char *out = NULL, err[256];
    assert_int_equal(
        zone_json_label_set(old, strlen(old), WIRE_T_A, 60, rd, len, 2, &out, err, sizeof(err)), 0);
    json_error_t je;
    json_t *j = json_loads(out, 0, &je);
    assert_non_null(j);
    json_t *a = json_object_get(j, "a"), *f = json_object_get(a, "filter");
    assert_string_equal(json_string_value(json_object_get(f, "order")), "sticky");
    assert_int_equal(json_integer_value(json_object_get(json_object_get(f, "min_healthy"), "0")),
                     2);
    assert_int_equal(json_integer_value(json_object_get(json_object_get(f, "sticky_prefix"), "v4")),
                     20);
    json_t *r1 = json_array_get(json_object_get(a, "records"), 1);
    assert_string_equal(json_string_value(json_object_get(r1, "ip")), "192.0.2.7");
    assert_int_equal(json_integer_value(json_object_get(r1, "priority")), 1);
    json_decref(j);
    free(out);
}

static void test_refusals(void **state)
{
    (void)state;
    char *out = NULL, err[256];
    const uint8_t hinfo[] = {1, 'a', 1, 'b'};
    const uint8_t *rd[2] = {hinfo};
    uint16_t len[2] = {sizeof(hinfo)};
    assert_int_equal(
        zone_json_label_set(NULL, 0, WIRE_T_HINFO, 60, rd, len, 1, &out, err, sizeof(err)),
        TERN_ENOTSUP);
    assert_non_null(strstr(err, "no such RRset"));
    /* a TXT of two short strings: redins keeps one text split at 255 */
    const uint8_t txt[] = {1, 'a', 1, 'b'};
    rd[0] = txt;
    assert_int_equal(
        zone_json_label_set(NULL, 0, WIRE_T_TXT, 60, rd, len, 1, &out, err, sizeof(err)),
        TERN_ENOTSUP);
    assert_non_null(strstr(err, "255"));
    /* two CNAMEs */
    const uint8_t c1[] = {1, 'a', 0}, c2[] = {1, 'b', 0};
    rd[0] = c1;
    rd[1] = c2;
    len[0] = len[1] = 3;
    assert_int_equal(
        zone_json_label_set(NULL, 0, WIRE_T_CNAME, 60, rd, len, 2, &out, err, sizeof(err)),
        TERN_ENOTSUP);
    /* a label whose JSON does not parse */
    assert_int_equal(
        zone_json_label_set("{nope", 5, WIRE_T_CNAME, 60, rd, len, 1, &out, err, sizeof(err)),
        TERN_ESYNTAX);
}

static void test_config_soa(void **state)
{
    (void)state;
    uint8_t soa[128];
    size_t n = 0;
    memcpy(soa, "\3ns2\1e\4test\0", 12);
    n = 12;
    memcpy(soa + n, "\4host\1e\4test\0", 13);
    n += 13;
    const uint32_t v[5] = {6, 100, 200, 300, 60};
    for (int i = 0; i < 5; i++, n += 4)
        tern_wr32(soa + n, v[i]);
    char *out = NULL, err[256];
    assert_int_equal(zone_json_config_set_soa(CONFIG, strlen(CONFIG), 1800, soa, (uint16_t)n, &out,
                                              err, sizeof(err)),
                     0);
    assert_non_null(strstr(out, "\"domain_id\""));
    zone_t *z = read_back(out, NULL, NULL, 0);
    assert_int_equal(z->serial, 6);
    assert_int_equal(z->soa->ttl, 1800);
    assert_int_equal(tern_rd16(z->soa->rdata), n);
    assert_memory_equal(z->soa->rdata + 2, soa, n);
    zone_free(z);
    free(out);
    assert_int_equal(zone_json_config_set_soa("[", 1, 60, soa, (uint16_t)n, &out, err, sizeof(err)),
                     TERN_ESYNTAX);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_type_round_trips),
        cmocka_unit_test(test_geo_fields_kept),
        cmocka_unit_test(test_shed_kept),
        cmocka_unit_test(test_steering_fields_kept),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_config_soa),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
