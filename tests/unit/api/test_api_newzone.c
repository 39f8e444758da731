/* test_api_newzone.c — pdns zone objects (POST .../zones bodies) into redins' schema: the SOA
 * pdns makes, the apex NS from "nameservers", rrsets grouped per label; every result read back
 * by tern's own redins reader (zone_json.h) into a zone; and the 422 texts of bad bodies. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "tern/api/api_newzone.h"
#include "tern/common/err.h"
#include "tern/zone/zone_json.h"

static int build(const char *body, api_newzone_t *z, char *err, size_t errlen)
{
    return api_newzone_build(body, strlen(body), 2026010101u, z, err, errlen);
}

/* Label lab's JSON in z, parsed (json_decref() it); NULL when z has no such label. */
static json_t *label(const api_newzone_t *z, const char *lab)
{
    for (size_t i = 0; i < z->n; i++)
        if (strcmp(z->labels[i], lab) == 0)
            return json_loads(z->texts[i], 0, NULL);
    return NULL;
}

/* z read by tern's redins reader, label by label, into a zone with nrecords... built. */
static void reads_back(const api_newzone_t *z)
{
    char err[512];
    const zone_json_opts_t opts = {0};
    zone_json_t *zj = zone_json_new(z->origin, "test", &opts, err, sizeof(err));
    assert_non_null(zj);
    assert_int_equal(zone_json_config(zj, z->config, strlen(z->config), err, sizeof(err)), 0);
    for (size_t i = 0; i < z->n; i++) {
        int rc =
            zone_json_label(zj, z->labels[i], z->texts[i], strlen(z->texts[i]), err, sizeof(err));
        if (rc != 0)
            fail_msg("label %s: %s", z->labels[i], err);
    }
    zone_t *zone = NULL;
    assert_int_equal(zone_json_finish(zj, &zone, err, sizeof(err)), 0);
    zone_free(zone);
}

static void test_default_soa_and_ns(void **state)
{
    (void)state;
    api_newzone_t z;
    char err[512];
    assert_int_equal(build("{\"name\": \"New.Test.\", \"kind\": \"Native\", \"nameservers\": "
                           "[\"ns1.new.test.\", \"ns2.example.\"]}",
                           &z, err, sizeof(err)),
                     0);
    assert_string_equal(z.origin, "new.test");
    assert_int_equal(z.serial, 2026010101u);
    /* pdns' default-soa-content with "@" the zone, default-ttl 3600 */
    json_t *cfg = json_loads(z.config, 0, NULL), *soa = json_object_get(cfg, "soa");
    assert_string_equal(json_string_value(json_object_get(soa, "ns")),
                        "a.misconfigured.dns.server.invalid.");
    assert_string_equal(json_string_value(json_object_get(soa, "mbox")), "hostmaster.new.test.");
    assert_int_equal(json_integer_value(json_object_get(soa, "serial")), 2026010101);
    assert_int_equal(json_integer_value(json_object_get(soa, "refresh")), 10800);
    assert_int_equal(json_integer_value(json_object_get(soa, "retry")), 3600);
    assert_int_equal(json_integer_value(json_object_get(soa, "expire")), 604800);
    assert_int_equal(json_integer_value(json_object_get(soa, "minttl")), 3600);
    assert_int_equal(json_integer_value(json_object_get(soa, "ttl")), 3600);
    json_decref(cfg);
    assert_int_equal(z.n, 1);
    json_t *apex = label(&z, "@"), *ns = json_object_get(apex, "ns");
    assert_int_equal(json_integer_value(json_object_get(ns, "ttl")), 3600);
    json_t *recs = json_object_get(ns, "records");
    assert_int_equal(json_array_size(recs), 2);
    assert_string_equal(json_string_value(json_object_get(json_array_get(recs, 0), "host")),
                        "ns1.new.test.");
    assert_string_equal(json_string_value(json_object_get(json_array_get(recs, 1), "host")),
                        "ns2.example.");
    json_decref(apex);
    reads_back(&z);
    api_newzone_free(&z);
    /* "serial" given: the SOA's */
    assert_int_equal(
        build("{\"name\": \"s.test\", \"kind\": \"Master\", \"serial\": 42}", &z, err, sizeof(err)),
        0);
    assert_int_equal(z.serial, 42);
    assert_int_equal(z.n, 0);
    api_newzone_free(&z);
}

static void test_rrsets_per_label(void **state)
{
    (void)state;
    api_newzone_t z;
    char err[512];
    const char *body =
        "{\"name\": \"n.test.\", \"kind\": \"Native\", \"rrsets\": ["
        "{\"name\": \"n.test.\", \"type\": \"SOA\", \"ttl\": 300, \"records\": [{\"content\": "
        "\"ns1.n.test. admin.n.test. 7 1200 600 86400 60\", \"disabled\": false}]},"
        "{\"name\": \"n.test.\", \"type\": \"NS\", \"ttl\": 600, \"records\": [{\"content\": "
        "\"ns1.n.test.\"}]},"
        "{\"name\": \"WWW.n.test.\", \"type\": \"A\", \"ttl\": 60, \"changetype\": \"DELETE\", "
        "\"records\": [{\"content\": \"192.0.2.1\"}, {\"content\": \"192.0.2.2\"}], "
        "\"comments\": [{\"content\": \"c\", \"account\": \"\"}]},"
        "{\"name\": \"www.n.test.\", \"type\": \"TXT\", \"ttl\": 60, \"records\": [{\"content\": "
        "\"\\\"hi there\\\"\"}]},"
        "{\"name\": \"_sip._tcp.n.test.\", \"type\": \"SRV\", \"ttl\": 60, \"records\": "
        "[{\"content\": \"10 20 5060 sip.n.test.\"}]},"
        "{\"name\": \"ns1.n.test.\", \"type\": \"AAAA\", \"ttl\": 60, \"records\": "
        "[{\"content\": \"2001:db8::53\"}]}]}";
    assert_int_equal(build(body, &z, err, sizeof(err)), 0);
    assert_int_equal(z.serial, 7); /* the SOA given */
    json_t *cfg = json_loads(z.config, 0, NULL), *soa = json_object_get(cfg, "soa");
    assert_string_equal(json_string_value(json_object_get(soa, "ns")), "ns1.n.test.");
    assert_int_equal(json_integer_value(json_object_get(soa, "ttl")), 300);
    assert_int_equal(json_integer_value(json_object_get(soa, "minttl")), 60);
    json_decref(cfg);
    assert_int_equal(z.n, 4); /* @, www, _sip._tcp, ns1 */
    json_t *www = label(&z, "www");
    assert_non_null(www);
    json_t *a = json_object_get(www, "a");
    assert_int_equal(json_integer_value(json_object_get(a, "ttl")), 60);
    assert_int_equal(json_array_size(json_object_get(a, "records")), 2); /* changetype ignored */
    json_t *txt = json_array_get(json_object_get(json_object_get(www, "txt"), "records"), 0);
    assert_string_equal(json_string_value(json_object_get(txt, "text")), "hi there");
    json_decref(www);
    json_t *srv = label(&z, "_sip._tcp");
    json_t *r0 = json_array_get(json_object_get(json_object_get(srv, "srv"), "records"), 0);
    assert_int_equal(json_integer_value(json_object_get(r0, "port")), 5060);
    assert_string_equal(json_string_value(json_object_get(r0, "target")), "sip.n.test.");
    json_decref(srv);
    reads_back(&z);
    api_newzone_free(&z);
}

static void expect_error(const char *body, const char *text)
{
    api_newzone_t z;
    char err[512] = "";
    int rc = build(body, &z, err, sizeof(err));
    api_newzone_free(&z);
    if (rc != TERN_EINVAL || !strstr(err, text))
        fail_msg("%s: rc %d, error \"%s\", want \"%s\"", body, rc, err, text);
}

static void test_errors(void **state)
{
    (void)state;
    expect_error("{nope", "JSON parse error");
    expect_error("[]", "Key 'name' not present");
    expect_error("{\"kind\": \"Native\"}", "Key 'name' not present");
    expect_error("{\"name\": \"a..b.\", \"kind\": \"Native\"}", "Unable to parse DNS Name");
    expect_error("{\"name\": \".\", \"kind\": \"Native\"}", "root zone");
    expect_error("{\"name\": \"x.test.\"}", "Key 'kind' not present");
    expect_error("{\"name\": \"x.test.\", \"kind\": \"Slave\"}", "kind Slave");
    expect_error("{\"name\": \"x.test.\", \"kind\": \"Native\", \"zone\": \"@ SOA ...\"}",
                 "zone data as text");
    expect_error("{\"name\": \"x.test.\", \"kind\": \"Native\", \"dnssec\": true}", "dnssec");
    expect_error("{\"name\": \"x.test.\", \"kind\": \"Native\", \"nameservers\": \"ns1.\"}",
                 "Nameservers is not a list");
    expect_error("{\"name\": \"x.test.\", \"kind\": \"Native\", \"nameservers\": [\"\"]}",
                 "non-empty strings");
    expect_error("{\"name\": \"x.test.\", \"kind\": \"Native\", \"nameservers\": [\"ns1.x\"]}",
                 "Nameserver is not canonical: 'ns1.x'");
    expect_error("{\"name\": \"x.test.\", \"kind\": \"Native\", \"nameservers\": [\"ns1.x.\"], "
                 "\"rrsets\": [{\"name\": \"x.test.\", \"type\": \"NS\", \"ttl\": 1, "
                 "\"records\": [{\"content\": \"ns.x.\"}]}]}",
                 "MUST NOT be mixed");
    expect_error("{\"name\": \"x.test.\", \"kind\": \"Native\", \"rrsets\": {}}",
                 "rrsets is not a list");
    expect_error("{\"name\": \"x.test.\", \"kind\": \"Native\", \"rrsets\": [{\"name\": "
                 "\"a.y.test.\", \"type\": \"A\", \"ttl\": 1, \"records\": [{\"content\": "
                 "\"192.0.2.1\"}]}]}",
                 "New RRsets are invalid: RRset a.y.test.");
    expect_error("{\"name\": \"x.test.\", \"kind\": \"Native\", \"rrsets\": [{\"name\": "
                 "\"a.x.test.\", \"type\": \"HINFO\", \"ttl\": 1, \"records\": [{\"content\": "
                 "\"\\\"a\\\" \\\"b\\\"\"}]}]}",
                 "RRset a.x.test. IN HINFO");
    expect_error("{\"name\": \"x.test.\", \"kind\": \"Native\", \"rrsets\": [{\"name\": "
                 "\"a.x.test.\", \"type\": \"SOA\", \"ttl\": 1, \"records\": [{\"content\": "
                 "\"a. b. 1 2 3 4 5\"}]}]}",
                 "an SOA only at the apex");
    expect_error("{\"name\": \"x.test.\", \"kind\": \"Native\", \"rrsets\": [{\"name\": "
                 "\"a.x.test.\", \"type\": \"CNAME\", \"ttl\": 1, \"records\": [{\"content\": "
                 "\"b.x.test.\"}, {\"content\": \"c.x.test.\"}]}]}",
                 "RRset a.x.test. IN CNAME");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_default_soa_and_ns),
        cmocka_unit_test(test_rrsets_per_label),
        cmocka_unit_test(test_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
