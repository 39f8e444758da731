/*
 * test_zone_json_get.c — JSON values as redins' Go decoder reads them (zone_json_get.c): keys
 * match case-insensitively and the last of equal keys wins, null is "not given", integers must be
 * integers, and every error names its zone, its part and the field's path.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "tern/common/err.h"
#include "zone_json_int.h"

typedef struct fx {
    zone_json_t *zj;
    char err[512];
    struct ectx e;
} fx_t;

static int setup(void **state)
{
    fx_t *f = calloc(1, sizeof(*f));
    assert_non_null(f);
    zone_json_opts_t o = {.max_rrset_records = 3};
    f->zj = zone_json_new("example.com.", "src", &o, f->err, sizeof(f->err));
    assert_non_null(f->zj);
    f->e = (struct ectx){.zj = f->zj, .what = "label www", .err = f->err, .errlen = sizeof(f->err)};
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fx_t *f = *state;
    zone_json_free(f->zj);
    free(f);
    return 0;
}

static json_t *parse(const char *text)
{
    json_error_t je;
    json_t *v = json_loads(text, JSON_ALLOW_NUL, &je);
    assert_non_null(v);
    return v;
}

static void test_field(void **state)
{
    (void)state;
    json_t *o = parse("{\"TTL\": 1, \"ttl\": 2, \"Ip\": null}");
    /* the last of equal keys (ASCII case-insensitively) wins; null is absent */
    assert_int_equal(json_integer_value(zone_json_field(o, "tTl")), 2);
    assert_null(zone_json_field(o, "ip"));
    assert_null(zone_json_field(o, "weight"));
    json_decref(o);
}

static void test_integers(void **state)
{
    fx_t *f = *state;
    json_t *o = parse("{\"a\": 7, \"b\": 1.0, \"c\": -1, \"d\": 70000, \"e\": \"7\"}");
    uint64_t v = 99;
    bool found = true;
    assert_int_equal(zone_json_get_uint(&f->e, o, "x", "a", 100, &v, &found), 0);
    assert_int_equal(v, 7);
    assert_true(found);
    v = 99;
    assert_int_equal(zone_json_get_uint(&f->e, o, "x", "none", 100, &v, &found), 0);
    assert_int_equal(v, 99); /* unchanged when absent */
    assert_false(found);
    /* Go refuses 1.0 for an unsigned field */
    assert_int_equal(zone_json_get_uint(&f->e, o, "x", "b", 100, &v, NULL), TERN_EINVAL);
    assert_string_equal(f->err, "src: zone example.com label www: x.b: expected an integer, got "
                                "a number");
    assert_int_equal(zone_json_get_uint(&f->e, o, "", "c", 100, &v, NULL), TERN_EINVAL);
    assert_string_equal(f->err,
                        "src: zone example.com label www: c: -1 is out of range (0 to 100)");
    uint32_t u = 0;
    assert_int_equal(zone_json_get_u32(&f->e, o, "x", "d", UINT16_MAX, &u), TERN_EINVAL);
    assert_int_equal(zone_json_get_u32(&f->e, o, "x", "e", UINT16_MAX, &u), TERN_EINVAL);
    assert_non_null(strstr(f->err, "x.e: expected an integer, got a string"));
    json_decref(o);
}

static void test_strings_objects_bools(void **state)
{
    fx_t *f = *state;
    json_t *o = parse("{\"s\": \"a\\u0000b\", \"n\": 5, \"o\": {}, \"t\": true, \"f\": 0}");
    const char *s;
    size_t len;
    assert_int_equal(zone_json_get_str(&f->e, o, "", "s", &s, &len), 0);
    assert_int_equal(len, 3); /* the length jansson read, NUL included */
    assert_int_equal(zone_json_get_str(&f->e, o, "", "absent", &s, &len), 0);
    assert_null(s);
    assert_int_equal(zone_json_get_str(&f->e, o, "", "n", &s, &len), TERN_EINVAL);
    json_t *sub;
    assert_int_equal(zone_json_get_obj(&f->e, o, "", "o", &sub), 0);
    assert_non_null(sub);
    assert_int_equal(zone_json_get_obj(&f->e, o, "", "t", &sub), TERN_EINVAL);
    assert_non_null(strstr(f->err, "t: expected an object, got a boolean"));
    bool b = false;
    assert_int_equal(zone_json_get_bool(&f->e, o, "", "t", &b), 0);
    assert_true(b);
    assert_int_equal(zone_json_get_bool(&f->e, o, "", "f", &b), TERN_EINVAL);
    assert_non_null(strstr(f->err, "f: expected true or false, got a number"));
    json_decref(o);
}

static void test_names_and_ttl(void **state)
{
    fx_t *f = *state;
    json_t *o = parse("{\"host\": \"ns1.example.net\", \"empty\": \"\", \"bad\": \"a..b\", "
                      "\"ttl\": 0}");
    uint8_t name[DNAME_MAXLEN];
    size_t len;
    assert_int_equal(zone_json_get_name(&f->e, o, "ns", "host", name, &len), 0);
    assert_int_equal(len, 17); /* with or without its final dot: absolute */
    assert_int_equal(zone_json_get_name(&f->e, o, "ns", "empty", name, &len), 0);
    assert_int_equal(len, 0);
    assert_int_equal(zone_json_get_name(&f->e, o, "ns", "bad", name, &len), TERN_EINVAL);
    assert_non_null(strstr(f->err, "ns.bad: \"a..b\": "));
    uint32_t ttl = 0;
    assert_int_equal(zone_json_get_ttl(&f->e, o, "a", &ttl), 0);
    assert_int_equal(ttl, 300); /* 0 or absent: redins' default_ttl */
    json_decref(o);
}

static void test_records(void **state)
{
    fx_t *f = *state;
    json_t *o = parse("{\"ok\": {\"records\": [{}, {}]}, \"many\": {\"records\": [{}, {}, {}, {}]},"
                      " \"bad\": {\"records\": [{}, 1]}, \"none\": {}}");
    json_t *arr;
    assert_int_equal(zone_json_get_records(&f->e, json_object_get(o, "ok"), "a", &arr), 0);
    assert_int_equal(json_array_size(arr), 2);
    assert_int_equal(zone_json_get_records(&f->e, json_object_get(o, "none"), "a", &arr), 0);
    assert_null(arr);
    /* counted before anything is rendered: max_rrset_records is 3 here */
    assert_int_equal(zone_json_get_records(&f->e, json_object_get(o, "many"), "a", &arr),
                     TERN_ELIMIT);
    assert_non_null(strstr(f->err, "a.records: 4 records, more than max_rrset_records (3)"));
    assert_int_equal(zone_json_get_records(&f->e, json_object_get(o, "bad"), "a", &arr),
                     TERN_EINVAL);
    assert_non_null(strstr(f->err, "a.records[1]: expected an object, got a number"));
    json_decref(o);
}

static void test_one_or_many(void **state)
{
    fx_t *f = *state;
    json_t *o = parse("{\"one\": \"US\", \"many\": [\"US\", \"CA\"], \"n\": 5}");
    size_t n;
    char epath[PATH_MAX_LEN];
    json_t *one = json_object_get(o, "one"), *many = json_object_get(o, "many");
    assert_int_equal(zone_json_one_or_many(&f->e, one, "c", true, "string", 10, &n), 0);
    assert_int_equal(n, 1);
    assert_ptr_equal(zone_json_one_or_many_at(one, 0, "c", epath, sizeof(epath)), one);
    assert_string_equal(epath, "c");
    assert_int_equal(zone_json_one_or_many(&f->e, many, "c", false, "string", 10, &n), 0);
    assert_int_equal(n, 2);
    assert_string_equal(
        json_string_value(zone_json_one_or_many_at(many, 1, "c", epath, sizeof(epath))), "CA");
    assert_string_equal(epath, "c[1]");
    assert_int_equal(zone_json_one_or_many(&f->e, many, "c", false, "string", 1, &n), TERN_EINVAL);
    assert_non_null(strstr(f->err, "c: more than 1 values"));
    assert_int_equal(
        zone_json_one_or_many(&f->e, json_object_get(o, "n"), "c", false, "string", 10, &n),
        TERN_EINVAL);
    assert_non_null(strstr(f->err, "c: expected a string or an array of strings, got a number"));
    json_decref(o);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_field),
        cmocka_unit_test_setup_teardown(test_integers, setup, teardown),
        cmocka_unit_test_setup_teardown(test_strings_objects_bools, setup, teardown),
        cmocka_unit_test_setup_teardown(test_names_and_ttl, setup, teardown),
        cmocka_unit_test_setup_teardown(test_records, setup, teardown),
        cmocka_unit_test_setup_teardown(test_one_or_many, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
