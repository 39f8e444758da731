/*
 * zone_json_get.c — JSON values as redins reads them, and messages that name the field.
 *
 * redins decodes with Go's encoding/json, and the data in the wild was written for it: object
 * keys match case-insensitively and the last of two equal keys wins, unknown keys are ignored,
 * null means "not given", a known key of the wrong type is an error, and integers must be
 * integers (Go refuses 1.0 or 1e3 for an unsigned field). Every getter here keeps those rules,
 * so the RRset and config parsers cannot drift from them one by one.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "tern/common/err.h"
#include "tern/common/log.h"
#include "tern/wire/rr.h"
#include "zone_json_int.h"

int zone_json_fail(const struct ectx *e, int rc, const char *fmt, ...)
{
    if (!e->errlen)
        return rc;
    int n = snprintf(e->err, e->errlen, "%s: zone %s %s: ", e->zj->source, e->zj->zname, e->what);
    if (n >= 0 && (size_t)n < e->errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(e->err + n, e->errlen - (size_t)n, fmt, ap);
        va_end(ap);
    }
    return rc;
}

/* s (len bytes, untrusted) for a message: tern_escape()d, cut to about QUOTE_MAX bytes. */
const char *zone_json_quote(const char *s, size_t len, char buf[QUOTE_MAX + 4])
{
    return tern_escape(buf, QUOTE_MAX + 4, s, len);
}

const char *zone_json_type_name(const json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_OBJECT:
        return "an object";
    case JSON_ARRAY:
        return "an array";
    case JSON_STRING:
        return "a string";
    case JSON_INTEGER:
    case JSON_REAL:
        return "a number";
    case JSON_TRUE:
    case JSON_FALSE:
        return "a boolean";
    default:
        return "null";
    }
}

/* ---- JSON access ------------------------------------------------------------------------- */

/* obj's member key, matched as encoding/json does (ASCII case-insensitively, the last of equal
 * keys winning); NULL when absent or null. obj must be an object. */
json_t *zone_json_field(json_t *obj, const char *key)
{
    const char *k;
    json_t *v, *found = NULL;
    json_object_foreach(obj, k, v)
    {
        if (strcasecmp(k, key) == 0)
            found = v;
    }
    return json_is_null(found) ? NULL : found;
}

/* A field path for messages ("a.records[2].ip") into dst; cut if too long. */
const char *zone_json_pathf(char *dst, size_t len, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(dst, len, fmt, ap);
    va_end(ap);
    return dst;
}

/* "base.key" (or "key" at the top) into dst. */
const char *zone_json_join(char *dst, size_t len, const char *base, const char *key)
{
    return zone_json_pathf(dst, len, "%s%s%s", base, *base ? "." : "", key);
}

/* Unsigned integer field: *out unchanged when absent (*found false). */
int zone_json_get_uint(const struct ectx *e, json_t *obj, const char *base, const char *key,
                       uint64_t max, uint64_t *out, bool *found)
{
    char path[PATH_MAX_LEN];
    json_t *v = zone_json_field(obj, key);
    if (found)
        *found = v != NULL;
    if (!v)
        return 0;
    if (!json_is_integer(v))
        return zone_json_fail(e, TERN_EINVAL, "%s: expected an integer, got %s",
                              zone_json_join(path, sizeof(path), base, key),
                              zone_json_type_name(v));
    json_int_t i = json_integer_value(v);
    if (i < 0 || (uint64_t)i > max)
        return zone_json_fail(
            e, TERN_EINVAL, "%s: %" JSON_INTEGER_FORMAT " is out of range (0 to %llu)",
            zone_json_join(path, sizeof(path), base, key), i, (unsigned long long)max);
    *out = (uint64_t)i;
    return 0;
}

int zone_json_get_u32(const struct ectx *e, json_t *obj, const char *base, const char *key,
                      uint32_t max, uint32_t *out)
{
    uint64_t v = *out;
    int rc = zone_json_get_uint(e, obj, base, key, max, &v, NULL);
    *out = (uint32_t)v;
    return rc;
}

/* String field: *s NULL when absent. */
int zone_json_get_str(const struct ectx *e, json_t *obj, const char *base, const char *key,
                      const char **s, size_t *len)
{
    char path[PATH_MAX_LEN];
    json_t *v = zone_json_field(obj, key);
    *s = NULL;
    *len = 0;
    if (!v)
        return 0;
    if (!json_is_string(v))
        return zone_json_fail(e, TERN_EINVAL, "%s: expected a string, got %s",
                              zone_json_join(path, sizeof(path), base, key),
                              zone_json_type_name(v));
    *s = json_string_value(v);
    *len = json_string_length(v);
    return 0;
}

/* Object field: *o NULL when absent. */
int zone_json_get_obj(const struct ectx *e, json_t *obj, const char *base, const char *key,
                      json_t **o)
{
    char path[PATH_MAX_LEN];
    json_t *v = zone_json_field(obj, key);
    *o = NULL;
    if (!v)
        return 0;
    if (!json_is_object(v))
        return zone_json_fail(e, TERN_EINVAL, "%s: expected an object, got %s",
                              zone_json_join(path, sizeof(path), base, key),
                              zone_json_type_name(v));
    *o = v;
    return 0;
}

int zone_json_get_bool(const struct ectx *e, json_t *obj, const char *base, const char *key,
                       bool *b)
{
    char path[PATH_MAX_LEN];
    json_t *v = zone_json_field(obj, key);
    if (!v)
        return 0;
    if (!json_is_boolean(v))
        return zone_json_fail(e, TERN_EINVAL, "%s: expected true or false, got %s",
                              zone_json_join(path, sizeof(path), base, key),
                              zone_json_type_name(v));
    *b = json_is_true(v);
    return 0;
}

/* A name field (absolute) into out; *len 0 when absent or "" (callers decide what that means). */
int zone_json_get_name(const struct ectx *e, json_t *obj, const char *base, const char *key,
                       uint8_t *out, size_t *len)
{
    char path[PATH_MAX_LEN], q[QUOTE_MAX + 4];
    const char *s, *why;
    size_t slen;
    int rc = zone_json_get_str(e, obj, base, key, &s, &slen);
    *len = 0;
    if (rc < 0 || !s || slen == 0)
        return rc;
    int n = dname_from_str(s, slen, false, out, &why);
    if (n < 0)
        return zone_json_fail(e, TERN_EINVAL, "%s: \"%s\": %s",
                              zone_json_join(path, sizeof(path), base, key),
                              zone_json_quote(s, slen, q), why);
    *len = (size_t)n;
    return 0;
}

/* The RRset's TTL: "ttl", 0 or absent meaning the default. */
int zone_json_get_ttl(const struct ectx *e, json_t *set, const char *base, uint32_t *ttl)
{
    uint32_t v = 0;
    int rc = zone_json_get_u32(e, set, base, "ttl", WIRE_TTL_MAX, &v);
    *ttl = v ? v : e->zj->default_ttl;
    if (e->zj->opts.max_ttl && *ttl > e->zj->opts.max_ttl)
        *ttl = e->zj->opts.max_ttl; /* redins' handler max_ttl caps every TTL it serves */
    return rc;
}

/* The records one RRset of a label may give: opts->max_rrset_records, and never more than the
 * builder takes (a larger RRset would fail the whole zone at finish). */
static size_t rrset_cap(const zone_json_t *zj)
{
    uint32_t cap = zj->opts.max_rrset_records;
    return cap && cap < ZONE_BUILDER_MAX_RRSET_RRS ? cap : ZONE_BUILDER_MAX_RRSET_RRS;
}

/* The "records" array of an RRset: *arr NULL when absent; every element must be an object, and
 * there may be at most rrset_cap() of them (counted as given, before anything is rendered, so a
 * huge array costs no more than its parse). */
int zone_json_get_records(const struct ectx *e, json_t *set, const char *base, json_t **arr)
{
    char path[PATH_MAX_LEN];
    json_t *v = zone_json_field(set, "records");
    *arr = NULL;
    if (!v)
        return 0;
    zone_json_join(path, sizeof(path), base, "records");
    if (!json_is_array(v))
        return zone_json_fail(e, TERN_EINVAL, "%s: expected an array, got %s", path,
                              zone_json_type_name(v));
    size_t cap = rrset_cap(e->zj);
    if (json_array_size(v) > cap)
        return zone_json_fail(e, TERN_ELIMIT, "%s: %zu records, more than %s%zu%s", path,
                              json_array_size(v),
                              cap < ZONE_BUILDER_MAX_RRSET_RRS ? "max_rrset_records (" : "", cap,
                              cap < ZONE_BUILDER_MAX_RRSET_RRS ? ")" : " (what an RRset can hold)");
    size_t i;
    json_t *r;
    json_array_foreach(v, i, r)
    {
        if (!json_is_object(r))
            return zone_json_fail(e, TERN_EINVAL, "%s[%zu]: expected an object, got %s", path, i,
                                  zone_json_type_name(r));
    }
    *arr = v;
    return 0;
}

int zone_json_nomem(const struct ectx *e)
{
    return zone_json_fail(e, TERN_ENOMEM, "out of memory");
}

/* redins takes one value or an array of them ("country": "US" or ["US", "CA"]). The number of
 * values of v, after checking its shape (scalar_ok: v is one value) and the bound. */
int zone_json_one_or_many(const struct ectx *e, json_t *v, const char *path, bool scalar_ok,
                          const char *what, size_t max, size_t *n)
{
    if (!json_is_array(v) && !scalar_ok)
        return zone_json_fail(e, TERN_EINVAL, "%s: expected a %s or an array of %ss, got %s", path,
                              what, what, zone_json_type_name(v));
    *n = json_is_array(v) ? json_array_size(v) : 1;
    if (*n > max)
        return zone_json_fail(e, TERN_EINVAL, "%s: more than %zu values", path, max);
    return 0;
}

/* Value i of such a v, and its path for messages ("a.records[0].asn[1]", or the path itself). */
json_t *zone_json_one_or_many_at(json_t *v, size_t i, const char *path, char *epath, size_t len)
{
    if (!json_is_array(v)) {
        zone_json_pathf(epath, len, "%s", path);
        return v;
    }
    zone_json_pathf(epath, len, "%s[%zu]", path, i);
    return json_array_get(v, i);
}
